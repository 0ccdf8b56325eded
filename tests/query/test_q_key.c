/*
 * test_q_key.c -- index key encoding (memcmp order == q_value_cmp order,
 * numeric normalization, descending inversion) and key generation from key
 * patterns (multikey, nested arrays, positional paths, parallel arrays,
 * sparse, KeyTooLong), plus q_key_describe.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "q.h"
#include "q_path.h"

static bson_t *J(const char *json)
{
    bson_error_t e;
    bson_t *b = bson_new_from_json((const uint8_t *)json, -1, &e);
    cr_assert(b, "bad JSON %s: %s", json, e.message);
    return b;
}

/* bson_iter_t is over-aligned: arrays need a wrapper */
typedef struct iter_box {
    bson_iter_t it;
} iter_box;

static int sgn(int c)
{
    return c < 0 ? -1 : c > 0;
}

static int buf_cmp(const q_buf *a, const q_buf *b)
{
    return eng_key_cmp(a->data, (uint32_t)a->len, 0, b->data, (uint32_t)b->len, 0);
}

/* Encoding of field "v" of a JSON document. */
static void enc_json(q_buf *b, const char *json, bool desc)
{
    bson_t *d = J(json);
    bson_iter_t it;
    cr_assert(bson_iter_init_find(&it, d, "v"));
    q_buf_init(b);
    q_key_append_value(b, &it, desc);
    bson_destroy(d);
}

/* ---- a random BSON value generator ------------------------------------------ */

static unsigned q_rand(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return (*s >> 16) & 0x7FFF;
}

static void rand_value(bson_t *d, const char *key, unsigned *s, int depth);

static void rand_number(bson_t *d, const char *key, unsigned *s)
{
    static const double dv[] = {0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 42.0, 1e300, -1e300,
                                9007199254740992.0, 3.25, -7.75, 1e-300};
    static const int64_t lv[] = {0, 1, -1, 42, INT64_MAX, INT64_MIN, 9007199254740993LL,
                                 9007199254740992LL, 3, -8};
    static const char *dec[] = {"42", "0.5", "-1", "1E+2", "NaN", "-Infinity", "3.25", "0"};
    bson_decimal128_t x;
    switch (q_rand(s) % 6) {
    case 0: bson_append_int32(d, key, -1, (int32_t)(q_rand(s) % 7) - 3); break;
    case 1: bson_append_int64(d, key, -1, lv[q_rand(s) % 10]); break;
    case 2: bson_append_double(d, key, -1, dv[q_rand(s) % 13]); break;
    case 3: bson_append_double(d, key, -1, q_rand(s) % 2 ? NAN : (q_rand(s) % 2 ? INFINITY : -INFINITY)); break;
    case 4:
        bson_decimal128_from_string(dec[q_rand(s) % 8], &x);
        bson_append_decimal128(d, key, -1, &x);
        break;
    default: bson_append_double(d, key, -1, ((int)(q_rand(s) % 9) - 4) / 2.0); break;
    }
}

static void rand_string(char *buf, unsigned *s, uint32_t *len)
{
    static const char alpha[] = {'a', 'b', '\0', '\x01', '\xff', 'A'};
    *len = q_rand(s) % 4;
    for (uint32_t i = 0; i < *len; i++)
        buf[i] = alpha[q_rand(s) % 6];
    buf[*len] = '\0';
}

static void rand_container(bson_t *d, const char *key, unsigned *s, int depth, bool array)
{
    bson_t child;
    char k[16];
    int n = (int)(q_rand(s) % 3);
    if (array)
        bson_append_array_begin(d, key, -1, &child);
    else
        bson_append_document_begin(d, key, -1, &child);
    for (int i = 0; i < n; i++) {
        if (array)
            snprintf(k, sizeof k, "%d", i);
        else
            snprintf(k, sizeof k, "%c", "abc"[q_rand(s) % 3]);
        rand_value(&child, k, s, depth + 1);
    }
    if (array)
        bson_append_array_end(d, &child);
    else
        bson_append_document_end(d, &child);
}

static void rand_misc(bson_t *d, const char *key, unsigned *s, int t)
{
    char str[8];
    uint32_t len;
    uint8_t bin[3] = {(uint8_t)q_rand(s), 0, 0xFF};
    bson_oid_t oid;
    memset(&oid, 0, sizeof oid);
    oid.bytes[11] = (uint8_t)(q_rand(s) % 3);
    bson_t scope = BSON_INITIALIZER;
    switch (t) {
    case 0: bson_append_minkey(d, key, -1); break;
    case 1: bson_append_maxkey(d, key, -1); break;
    case 2: bson_append_null(d, key, -1); break;
    case 3: bson_append_undefined(d, key, -1); break;
    case 4: bson_append_bool(d, key, -1, q_rand(s) % 2); break;
    case 5: bson_append_oid(d, key, -1, &oid); break;
    case 6: bson_append_date_time(d, key, -1, (int64_t)(q_rand(s) % 5) - 2); break;
    case 7: bson_append_timestamp(d, key, -1, q_rand(s) % 3 ? 1 : 4000000000u, q_rand(s) % 3); break;
    case 8: bson_append_binary(d, key, -1, (bson_subtype_t)(q_rand(s) % 2), bin, q_rand(s) % 4); break;
    case 9:
        rand_string(str, s, &len);
        bson_append_regex(d, key, -1, len ? "a" : "b", q_rand(s) % 2 ? "i" : "");
        break;
    case 10: rand_string(str, s, &len); bson_append_symbol(d, key, -1, str, (int)len); break;
    case 11: bson_append_code(d, key, -1, q_rand(s) % 2 ? "f()" : "g"); break;
    case 12:
        BSON_APPEND_INT32(&scope, "x", (int32_t)(q_rand(s) % 2));
        bson_append_code_with_scope(d, key, -1, q_rand(s) % 2 ? "f" : "g", &scope);
        break;
    default: bson_append_dbpointer(d, key, -1, q_rand(s) % 2 ? "db.c" : "d.c", &oid); break;
    }
    bson_destroy(&scope);
}

static void rand_value(bson_t *d, const char *key, unsigned *s, int depth)
{
    char str[8];
    uint32_t len;
    unsigned t = q_rand(s) % (depth < 2 ? 8 : 6);
    switch (t) {
    case 0:
    case 1: rand_number(d, key, s); break;
    case 2:
    case 3: rand_string(str, s, &len); bson_append_utf8(d, key, -1, str, (int)len); break;
    case 4:
    case 5: rand_misc(d, key, s, (int)(q_rand(s) % 14)); break;
    case 6: rand_container(d, key, s, depth, false); break;
    default: rand_container(d, key, s, depth, true); break;
    }
}

/* ---- encoding ---------------------------------------------------------------- */

Test(q_key, encoding_order_matches_value_order_property)
{
    unsigned seed = 12345;
    bson_t *vals[300];
    q_buf enc[300], dsc[300];
    iter_box box[300];
    for (int i = 0; i < 300; i++) {
        vals[i] = bson_new();
        rand_value(vals[i], "v", &seed, 0);
        cr_assert(bson_iter_init_find(&box[i].it, vals[i], "v"));
        q_buf_init(&enc[i]);
        q_buf_init(&dsc[i]);
        q_key_append_value(&enc[i], &box[i].it, false);
        q_key_append_value(&dsc[i], &box[i].it, true);
    }
    int pairs = 0, ties = 0;
    for (int i = 0; i < 300; i++) {
        for (int j = 0; j < 300; j++) {
            int want = sgn(q_value_cmp(&box[i].it, &box[j].it));
            int got = sgn(buf_cmp(&enc[i], &enc[j]));
            if (want != got) {
                char *a = bson_as_relaxed_extended_json(vals[i], NULL);
                char *b = bson_as_relaxed_extended_json(vals[j], NULL);
                cr_assert_fail("%s vs %s: cmp %d, keys %d", a, b, want, got);
            }
            cr_assert_eq(sgn(buf_cmp(&dsc[i], &dsc[j])), -want);
            ties += want == 0;
            pairs++;
        }
    }
    cr_assert_eq(pairs, 90000);
    cr_assert_gt(ties, 300, "the generator should produce equal values of different types");
    for (int i = 0; i < 300; i++) {
        q_buf_cleanup(&enc[i]);
        q_buf_cleanup(&dsc[i]);
        bson_destroy(vals[i]);
    }
}

Test(q_key, compound_keys_order_field_by_field_property)
{
    unsigned seed = 777;
    enum { N = 120 };
    bson_t *vals[N];
    q_buf key[N];
    iter_box a[N], b[N];
    for (int i = 0; i < N; i++) {
        vals[i] = bson_new();
        rand_value(vals[i], "a", &seed, 1);
        rand_value(vals[i], "b", &seed, 1);
        bson_iter_init_find(&a[i].it, vals[i], "a");
        bson_iter_init_find(&b[i].it, vals[i], "b");
        q_buf_init(&key[i]);
        q_key_append_value(&key[i], &a[i].it, false);
        q_key_append_value(&key[i], &b[i].it, true); /* {a: 1, b: -1} */
    }
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            int want = sgn(q_value_cmp(&a[i].it, &a[j].it));
            if (!want)
                want = -sgn(q_value_cmp(&b[i].it, &b[j].it));
            cr_assert_eq(sgn(buf_cmp(&key[i], &key[j])), want, "pair %d %d", i, j);
        }
    for (int i = 0; i < N; i++) {
        q_buf_cleanup(&key[i]);
        bson_destroy(vals[i]);
    }
}

Test(q_key, numbers_normalize_across_types)
{
    const char *same[] = {"{\"v\": 42}", "{\"v\": {\"$numberLong\": \"42\"}}", "{\"v\": 42.0}",
                          "{\"v\": {\"$numberDecimal\": \"42\"}}",
                          "{\"v\": {\"$numberDecimal\": \"4.20E+1\"}}"};
    q_buf ref, b;
    enc_json(&ref, same[0], false);
    for (size_t i = 1; i < sizeof same / sizeof same[0]; i++) {
        enc_json(&b, same[i], false);
        cr_assert_eq(b.len, ref.len, "%s", same[i]);
        cr_assert(!memcmp(b.data, ref.data, b.len), "%s", same[i]);
        q_buf_cleanup(&b);
    }
    q_buf_cleanup(&ref);
    const char *asc[] = {
        "{\"v\": {\"$numberDouble\": \"NaN\"}}", "{\"v\": {\"$numberDouble\": \"-Infinity\"}}",
        "{\"v\": -1e300}", "{\"v\": {\"$numberLong\": \"-9223372036854775808\"}}",
        "{\"v\": -2}", "{\"v\": -1.5}", "{\"v\": -1}", "{\"v\": -0.5}", "{\"v\": 0}",
        "{\"v\": 1e-300}", "{\"v\": 0.5}", "{\"v\": 1}",
        "{\"v\": {\"$numberDecimal\": \"1.5\"}}", "{\"v\": 2}",
        "{\"v\": {\"$numberLong\": \"9007199254740992\"}}",
        "{\"v\": {\"$numberLong\": \"9007199254740993\"}}",
        "{\"v\": {\"$numberLong\": \"9223372036854775807\"}}", "{\"v\": 1e300}",
        "{\"v\": {\"$numberDouble\": \"Infinity\"}}"};
    size_t n = sizeof asc / sizeof asc[0];
    q_buf prev;
    enc_json(&prev, asc[0], false);
    for (size_t i = 1; i < n; i++) {
        enc_json(&b, asc[i], false);
        cr_assert_lt(buf_cmp(&prev, &b), 0, "%s < %s", asc[i - 1], asc[i]);
        q_buf_cleanup(&prev);
        prev = b;
    }
    q_buf_cleanup(&prev);
    q_buf z, nz;
    enc_json(&z, "{\"v\": 0}", false);
    enc_json(&nz, "{\"v\": -0.0}", false);
    cr_assert(z.len == nz.len && !memcmp(z.data, nz.data, z.len));
    q_buf_cleanup(&z);
    q_buf_cleanup(&nz);
}

Test(q_key, worked_example_bytes)
{
    static const uint8_t want[] = {0x1E, 0x03, 0x7F, 0xFE, 0x3F, 0xFF, 0xFF,
                                   0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
    q_buf b;
    enc_json(&b, "{\"v\": -1.5}", false);
    cr_assert_eq(b.len, sizeof want);
    cr_assert(!memcmp(b.data, want, sizeof want));
    q_buf_cleanup(&b);
    enc_json(&b, "{\"v\": \"a\\u0000b\"}", false);
    static const uint8_t s[] = {0x3C, 'a', 0x01, 0x01, 'b', 0x00};
    cr_assert_eq(b.len, sizeof s);
    cr_assert(!memcmp(b.data, s, sizeof s));
    q_buf_cleanup(&b);
}

Test(q_key, strings_with_nuls_order_correctly)
{
    const char *asc[] = {"{\"v\": \"\"}", "{\"v\": \"\\u0000\"}", "{\"v\": \"a\"}",
                         "{\"v\": \"a\\u0000\"}", "{\"v\": \"a\\u0000\\u0000\"}",
                         "{\"v\": \"a\\u0000b\"}", "{\"v\": \"a\\u0001\"}", "{\"v\": \"ab\"}",
                         "{\"v\": \"b\"}"};
    size_t n = sizeof asc / sizeof asc[0];
    for (size_t i = 0; i + 1 < n; i++) {
        q_buf x, y;
        enc_json(&x, asc[i], false);
        enc_json(&y, asc[i + 1], false);
        cr_assert_lt(buf_cmp(&x, &y), 0, "%s < %s", asc[i], asc[i + 1]);
        q_buf_cleanup(&x);
        q_buf_cleanup(&y);
    }
}

Test(q_key, descending_inverts_every_byte)
{
    const char *vals[] = {"{\"v\": 7}", "{\"v\": \"xy\\u0000\"}", "{\"v\": {\"a\": [1, \"b\"]}}",
                          "{\"v\": null}", "{\"v\": {\"$maxKey\": 1}}"};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        q_buf a, d;
        enc_json(&a, vals[i], false);
        enc_json(&d, vals[i], true);
        cr_assert_eq(a.len, d.len);
        for (size_t k = 0; k < a.len; k++)
            cr_assert_eq(0xFF ^ a.data[k], d.data[k]);
        q_buf_cleanup(&a);
        q_buf_cleanup(&d);
    }
    q_buf n, nd;
    q_buf_init(&n);
    q_buf_init(&nd);
    q_key_append_null(&n, false);
    q_key_append_null(&nd, true);
    cr_assert(n.len == 1 && nd.len == 1);
    unsigned inv = nd.data[0] ^ 0xFFu, asc = n.data[0];
    cr_assert_eq(inv, asc);
    q_buf e;
    enc_json(&e, "{\"v\": null}", false);
    cr_assert(e.len == 1 && e.data[0] == n.data[0], "missing encodes as null");
    q_buf_cleanup(&n);
    q_buf_cleanup(&nd);
    q_buf_cleanup(&e);
}

/* ---- key generation ------------------------------------------------------------ */

/* Keys of doc for pattern, each as the encoding of the listed values. */
static void expect_keys(const char *pattern, const char *doc, bool sparse, bool multikey,
                        const char *const *want, size_t nwant)
{
    bson_t *p = J(pattern), *d = J(doc);
    q_keyset ks;
    md_error err;
    q_keyset_init(&ks);
    int rc = q_index_keys(p, d, sparse, &ks, &err);
    cr_assert_eq(rc, 0, "%s on %s: %s", pattern, doc, err.message);
    cr_assert_eq(ks.n, nwant, "%s on %s: %zu keys", pattern, doc, ks.n);
    cr_assert_eq(ks.multikey, multikey, "%s on %s: multikey", pattern, doc);
    for (size_t i = 0; i < nwant; i++) {
        /* want[i] is a JSON document whose values, in order, form the key */
        bson_t *k = J(want[i]);
        bson_iter_t it, pit;
        q_buf b;
        q_buf_init(&b);
        bson_iter_init(&it, k);
        bson_iter_init(&pit, p);
        while (bson_iter_next(&it) && bson_iter_next(&pit)) {
            bool desc = bson_iter_as_int64(&pit) < 0;
            if (BSON_ITER_HOLDS_UNDEFINED(&it) || !BSON_ITER_HOLDS_NULL(&it))
                q_key_append_value(&b, &it, desc);
            else
                q_key_append_null(&b, desc);
        }
        cr_assert_eq(buf_cmp(&b, &ks.keys[i]), 0, "%s on %s: key %zu should be %s", pattern,
                     doc, i, want[i]);
        q_buf_cleanup(&b);
        bson_destroy(k);
    }
    q_keyset_cleanup(&ks);
    bson_destroy(p);
    bson_destroy(d);
}

#define KEYS(...) (const char *const[]){__VA_ARGS__}, sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *)

Test(q_key, scalar_missing_and_dotted_fields)
{
    expect_keys("{\"a\": 1}", "{\"a\": 5}", false, false, KEYS("{\"a\": 5}"));
    expect_keys("{\"a\": 1}", "{\"b\": 5}", false, false, KEYS("{\"a\": null}"));
    expect_keys("{\"a.b\": 1}", "{\"a\": {\"b\": \"x\"}}", false, false, KEYS("{\"k\": \"x\"}"));
    expect_keys("{\"a.b\": 1}", "{\"a\": 3}", false, false, KEYS("{\"k\": null}"));
    expect_keys("{\"a\": 1, \"b\": -1}", "{\"b\": 2, \"a\": 1}", false, false,
                KEYS("{\"a\": 1, \"b\": 2}"));
    expect_keys("{\"a\": 1}", "{\"a\": {\"x\": [1, 2]}}", false, false,
                KEYS("{\"a\": {\"x\": [1, 2]}}"));
}

Test(q_key, arrays_give_one_key_per_element_sorted_and_unique)
{
    expect_keys("{\"a\": 1}", "{\"a\": [3, 1, 2, 1]}", false, true,
                KEYS("{\"a\": 1}", "{\"a\": 2}", "{\"a\": 3}"));
    expect_keys("{\"a\": -1}", "{\"a\": [3, 1, 2]}", false, true,
                KEYS("{\"a\": 3}", "{\"a\": 2}", "{\"a\": 1}"));
    expect_keys("{\"a\": 1}", "{\"a\": [7]}", false, true, KEYS("{\"a\": 7}"));
    expect_keys("{\"a\": 1}", "{\"a\": [1, 1.0, {\"$numberLong\": \"1\"}]}", false, true,
                KEYS("{\"a\": 1}"));
}

Test(q_key, empty_array_indexes_as_undefined)
{
    expect_keys("{\"a\": 1}", "{\"a\": []}", false, true,
                KEYS("{\"a\": {\"$undefined\": true}}"));
    expect_keys("{\"a.b\": 1}", "{\"a\": [{\"b\": []}, {\"b\": 1}]}", false, true,
                KEYS("{\"a\": {\"$undefined\": true}}", "{\"a\": 1}"));
}

Test(q_key, nested_arrays_index_whole_inner_arrays)
{
    expect_keys("{\"a\": 1}", "{\"a\": [[1, 2], 3]}", false, true,
                KEYS("{\"a\": 3}", "{\"a\": [1, 2]}"));
    /* a.b does not descend into an array inside an array */
    expect_keys("{\"a.b\": 1}", "{\"a\": [[{\"b\": 1}]]}", false, true, KEYS("{\"a\": null}"));
}

Test(q_key, dotted_paths_through_arrays_of_documents)
{
    expect_keys("{\"a.b\": 1}", "{\"a\": [{\"b\": 2}, {\"b\": 1}, {\"c\": 5}]}", false, true,
                KEYS("{\"a\": null}", "{\"a\": 1}", "{\"a\": 2}"));
    expect_keys("{\"a.b\": 1, \"a.c\": 1}",
                "{\"a\": [{\"b\": 1, \"c\": \"x\"}, {\"b\": 2, \"c\": \"y\"}]}", false, true,
                KEYS("{\"b\": 1, \"c\": \"x\"}", "{\"b\": 2, \"c\": \"y\"}"));
    expect_keys("{\"x\": 1, \"a.b\": 1}", "{\"x\": 9, \"a\": [{\"b\": 1}, {\"b\": 2}]}", false,
                true, KEYS("{\"x\": 9, \"b\": 1}", "{\"x\": 9, \"b\": 2}"));
}

Test(q_key, positional_components_index_one_element)
{
    expect_keys("{\"a.1\": 1}", "{\"a\": [5, 6, 7]}", false, false, KEYS("{\"a\": 6}"));
    expect_keys("{\"a.1.b\": 1}", "{\"a\": [{\"b\": 1}, {\"b\": 2}]}", false, false,
                KEYS("{\"a\": 2}"));
    expect_keys("{\"a.5\": 1}", "{\"a\": [5, 6]}", false, true, KEYS("{\"a\": null}"));
}

Test(q_key, parallel_arrays_are_refused)
{
    bson_t *p = J("{\"a\": 1, \"b\": 1}"), *d = J("{\"a\": [1, 2], \"b\": [3, 4]}");
    q_keyset ks;
    md_error err;
    q_keyset_init(&ks);
    int rc = q_index_keys(p, d, false, &ks, &err);
    cr_assert_neq(rc, 0);
    cr_assert_eq(err.code, MD_CODE_CANNOT_INDEX_PARALLEL_ARRAYS);
    cr_assert_str_eq(err.message, "cannot index parallel arrays [b] [a]");
    cr_assert_eq(ks.n, 0);
    q_keyset_cleanup(&ks);
    bson_destroy(p);
    bson_destroy(d);
    /* one array shared by two fields is not parallel */
    expect_keys("{\"a.b\": 1, \"a.c\": -1}", "{\"a\": [{\"b\": 1, \"c\": 2}]}", false, true,
                KEYS("{\"b\": 1, \"c\": 2}"));
}

Test(q_key, sparse_skips_documents_missing_every_field)
{
    expect_keys("{\"a\": 1}", "{\"b\": 1}", true, false, NULL, 0);
    expect_keys("{\"a\": 1}", "{\"a\": null}", true, false, KEYS("{\"a\": null}"));
    expect_keys("{\"a\": 1, \"b\": 1}", "{\"b\": 2}", true, false, KEYS("{\"a\": null, \"b\": 2}"));
    expect_keys("{\"a\": 1, \"b\": 1}", "{\"c\": 2}", true, false, NULL, 0);
    expect_keys("{\"a.b\": 1}", "{\"a\": [{\"b\": 1}, {\"c\": 1}]}", true, true,
                KEYS("{\"a\": 1}"));
}

Test(q_key, key_too_long_is_refused_with_mongodb_message)
{
    char big[1100], json[1200];
    memset(big, 'x', 1040);
    big[1040] = '\0';
    snprintf(json, sizeof json, "{\"a\": \"%s\"}", big);
    bson_t *p = J("{\"a\": 1}"), *d = J(json);
    q_keyset ks;
    md_error err;
    q_keyset_init(&ks);
    int rc = q_index_keys(p, d, false, &ks, &err);
    cr_assert_eq(rc, MD_ETOOBIG);
    cr_assert_eq(err.code, MD_CODE_KEY_TOO_LONG);
    cr_assert_str_eq(err.code_name, "KeyTooLong");
    char want[1300];
    big[150] = '\0';
    snprintf(want, sizeof want, "key too large to index, failing 1052 { : \"%s...\" }", big);
    cr_assert_str_eq(err.message, want);
    bson_destroy(d);
    /* 1012 bytes of string: a 1024-byte key object is still fine */
    memset(big, 'y', 1012);
    big[1012] = '\0';
    snprintf(json, sizeof json, "{\"a\": \"%s\"}", big);
    d = J(json);
    cr_assert_eq(q_index_keys(p, d, false, &ks, &err), 0);
    cr_assert_eq(ks.n, 1);
    q_keyset_cleanup(&ks);
    bson_destroy(p);
    bson_destroy(d);
}

Test(q_key, unsupported_index_types_are_reported)
{
    bson_t *p = J("{\"a\": \"hashed\"}"), *d = J("{\"a\": 1}");
    q_keyset ks;
    md_error err;
    q_keyset_init(&ks);
    cr_assert_neq(q_index_keys(p, d, false, &ks, &err), 0);
    cr_assert_eq(err.code, MD_CODE_NOT_YET_IMPLEMENTED);
    q_keyset_cleanup(&ks);
    bson_destroy(p);
    bson_destroy(d);
}

static void expect_describe(const char *pattern, const char *doc, const char *want)
{
    bson_t *p = J(pattern), *d = J(doc);
    char out[256];
    q_key_describe(p, d, out, sizeof out);
    cr_assert_str_eq(out, want);
    bson_destroy(p);
    bson_destroy(d);
}

Test(q_key, describe_renders_pattern_values)
{
    expect_describe("{\"x\": 1}", "{\"_id\": 1, \"x\": 1}", "{ x: 1 }");
    expect_describe("{\"a\": 1, \"b\": -1}", "{\"b\": \"x\", \"a\": 1}", "{ a: 1, b: \"x\" }");
    expect_describe("{\"a.b\": 1}", "{\"a\": {\"b\": 2.5}}", "{ a.b: 2.5 }");
    expect_describe("{\"z\": 1}", "{\"a\": 1}", "{ z: null }");
    expect_describe("{\"a.1\": 1}", "{\"a\": [4, 5]}", "{ a.1: 5 }");
    bson_t *p = J("{\"x\": 1}"), *d = J("{\"x\": \"abcdef\"}");
    char small[6];
    q_key_describe(p, d, small, sizeof small);
    cr_assert_str_eq(small, "{ x: ");
    bson_destroy(p);
    bson_destroy(d);
}

/*
 * q_key_simple, the insert path's key for a one-field index, against the
 * key generator: on random documents (every kind of value, the field
 * first, later, twice or missing, keys near and past the 1024-byte limit)
 * and both directions, sparse or not, whenever it answers its key is the
 * generator's one key (or, answering 0, the generator's none); it leaves
 * arrays and keys too long to the generator.
 */
Test(q_key, simple_key_matches_the_generator_property)
{
    static const char *const vals[] = {
        "1", "-2.5", "{\"$numberLong\": \"9007199254740993\"}", "\"str\"", "\"\"", "null",
        "true", "{\"a\": 1, \"b\": [1, 2]}", "{}", "[1, 2]", "[]", "[[1]]",
        "{\"$oid\": \"0123456789abcdef01234567\"}", "{\"$date\": 1500000000000}",
        "{\"$minKey\": 1}", "{\"$maxKey\": 1}", "{\"$numberDecimal\": \"1.10\"}",
        "{\"$regex\": \"a.b\", \"$options\": \"i\"}", "{\"$undefined\": true}",
    };
    const int nv = (int)(sizeof vals / sizeof *vals);
    const char *const fields[] = {"_id", "f", "g"};
    uint64_t s = 12345;
    int answered = 0, deferred = 0;
    char json[4096], pad[1100];
    for (int round = 0; round < 3000; round++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        const char *field = fields[s % 3];
        bool desc = (s >> 2) & 1, sparse = (s >> 3) & 1;
        int n = 0;
        n += snprintf(json + n, sizeof json - n, "{");
        int nf = (int)((s >> 4) % 4);
        for (int i = 0; i < nf; i++) {
            const char *name = fields[(s >> (8 + 2 * i)) % 3];
            int v = (int)((s >> (16 + 5 * i)) % (uint64_t)(nv + 1));
            if (v == nv) { /* a long string: near or past the key limit */
                size_t len = 1000 + (s >> 40) % 40;
                memset(pad, 'x', len);
                pad[len] = 0;
                n += snprintf(json + n, sizeof json - n, "%s\"%s\": \"%s\"", i ? ", " : "", name,
                              pad);
            } else {
                n += snprintf(json + n, sizeof json - n, "%s\"%s\": %s", i ? ", " : "", name,
                              vals[v]);
            }
        }
        snprintf(json + n, sizeof json - n, "}");
        bson_t *doc = J(json), *pat = BCON_NEW(field, BCON_INT32(desc ? -1 : 1));
        q_buf b;
        q_keyset ks;
        md_error err;
        q_buf_init(&b);
        q_keyset_init(&ks);
        int r = q_key_simple(field, desc, sparse, doc, &b);
        int rc = q_index_keys(pat, doc, sparse, &ks, &err);
        if (r < 0) {
            deferred++;
            cr_assert_eq(b.len, 0u);
            cr_assert(rc != 0 || ks.n != 1 || ks.multikey, "%s: deferred a plain key", json);
        } else {
            answered++;
            cr_assert_eq(rc, 0, "%s: %s", json, err.message);
            cr_assert_eq(ks.n, (size_t)r, "%s: %zu keys, simple %d", json, ks.n, r);
            if (r == 1)
                cr_assert(ks.keys[0].len == b.len && memcmp(ks.keys[0].data, b.data, b.len) == 0,
                          "%s: keys differ", json);
            cr_assert(!ks.multikey);
        }
        q_buf_cleanup(&b);
        q_keyset_cleanup(&ks);
        bson_destroy(doc);
        bson_destroy(pat);
    }
    cr_assert(answered > 1500 && deferred > 100, "answered %d, deferred %d", answered, deferred);
}
