/*
 * test_q_decimal.c -- decimal128 against int32, int64 and double, exactly
 * (query/q_decimal.c): a property test over random pairs near the limits of
 * each type's precision (2^53, 2^63, 34-digit decimals, subnormals, +-0,
 * NaN, +-Infinity, the extreme decimal exponents) that checks q_value_cmp,
 * the ascending and descending index key bytes and an exact reference (each
 * value written out as its exact decimal expansion, compared digit by
 * digit) all agree; equal values encoding equally; equality, ranges, $in,
 * sort and unique indexes through commands on every engine, with and
 * without an index; and the rebuild of an index whose catalog entry has the
 * old key format.
 */
#include <float.h>
#include <math.h>

#include "q.h"
#include "q_int.h"
#include "q_path.h"
#include "test_q_util.h"

/* ---- an exact reference: values as decimal digit strings ---------------------- */

enum { R_NAN, R_NINF, R_NEG, R_ZERO, R_POS, R_PINF };

typedef struct ref {
    int cls;
    long lead;       /* decimal exponent of the leading digit */
    char dig[1200];  /* significant digits, no leading or trailing zeros */
} ref;

/* Parse "[-]digits[.digits][e[+-]digits]", "NaN", "[-]Infinity"/"[-]inf". */
static void ref_parse(const char *s, ref *r)
{
    bool neg = *s == '-';
    if (neg || *s == '+')
        s++;
    if (!strncasecmp(s, "nan", 3)) {
        r->cls = R_NAN;
        return;
    }
    if (!strncasecmp(s, "inf", 3)) {
        r->cls = neg ? R_NINF : R_PINF;
        return;
    }
    static char m[1300];
    size_t n = 0, pp = (size_t)-1;
    for (; (*s >= '0' && *s <= '9') || *s == '.'; s++) {
        if (*s == '.')
            pp = n;
        else
            m[n++] = *s;
    }
    if (pp == (size_t)-1)
        pp = n;
    long e = (*s == 'e' || *s == 'E') ? strtol(s + 1, NULL, 10) : 0;
    size_t z = 0;
    while (z < n && m[z] == '0')
        z++;
    if (z == n) {
        r->cls = R_ZERO;
        return;
    }
    size_t end = n;
    while (m[end - 1] == '0')
        end--;
    r->cls = neg ? R_NEG : R_POS;
    r->lead = (long)pp - (long)z - 1 + e;
    memcpy(r->dig, m + z, end - z);
    r->dig[end - z] = '\0';
}

static int ref_cmp(const ref *a, const ref *b)
{
    if (a->cls != b->cls)
        return a->cls < b->cls ? -1 : 1;
    if (a->cls != R_NEG && a->cls != R_POS)
        return 0;
    int c = a->lead != b->lead ? (a->lead < b->lead ? -1 : 1) : strcmp(a->dig, b->dig);
    c = c < 0 ? -1 : c > 0;
    return a->cls == R_NEG ? -c : c;
}

static void ref_of(const bson_iter_t *it, ref *r)
{
    static char s[1300];
    bson_decimal128_t d;
    switch (bson_iter_type(it)) {
    case BSON_TYPE_INT32: snprintf(s, sizeof s, "%d", bson_iter_int32(it)); break;
    case BSON_TYPE_INT64: snprintf(s, sizeof s, "%lld", (long long)bson_iter_int64(it)); break;
    case BSON_TYPE_DOUBLE:
        /* glibc prints a double's exact expansion when given enough digits
         * (at most 767 significant ones) */
        snprintf(s, sizeof s, "%.1100e", bson_iter_double(it));
        break;
    default:
        bson_iter_decimal128(it, &d);
        bson_decimal128_to_string(&d, s);
        break;
    }
    ref_parse(s, r);
}

/* ---- random numbers near the edges ------------------------------------------------ */

static uint64_t st = 0x2545F4914F6CDD1Dull;

static uint64_t rnd(void)
{
    st ^= st << 13;
    st ^= st >> 7;
    st ^= st << 17;
    return st;
}

static void add_dec(bson_t *d, const char *key, const char *s)
{
    bson_decimal128_t x;
    cr_assert(bson_decimal128_from_string(s, &x), "decimal %s", s);
    bson_append_decimal128(d, key, -1, &x);
}

/* A decimal near `v`'s exact value: its first k (<= 34) digits, maybe one
 * unit more or less in the last, maybe with trailing zeros (another member
 * of the cohort), maybe scaled by ten. */
static void add_dec_near(bson_t *d, const char *key, const char *exact)
{
    ref r;
    char s[128];
    ref_parse(exact, &r);
    if (r.cls != R_POS && r.cls != R_NEG) {
        add_dec(d, key, r.cls == R_NAN ? "NaN" : r.cls == R_ZERO ? "-0E+12" : r.cls == R_PINF ? "Infinity" : "-Infinity");
        return;
    }
    int k = (int)(rnd() % 3 == 0 ? 34 : 1 + rnd() % 34);
    char dig[40];
    size_t n = strlen(r.dig);
    memset(dig, '0', sizeof dig);
    memcpy(dig, r.dig, n < (size_t)k ? n : (size_t)k);
    dig[k] = '\0';
    int bump = (int)(rnd() % 3) - 1;
    for (int i = k - 1; bump && i >= 0; i--) {
        if (bump > 0 && dig[i] < '9') {
            dig[i]++;
            bump = 0;
        } else if (bump > 0) {
            dig[i] = '0';
        } else if (dig[i] > '0') {
            dig[i]--;
            bump = 0;
        } else {
            dig[i] = '9';
        }
    }
    if (dig[0] == '0' && k > 1)
        memmove(dig, dig + 1, (size_t)k); /* 10..0 - 1 = 09..9: one digit fewer */
    int zeros = rnd() % 4 == 0 ? (int)(rnd() % 3) : 0;
    size_t dl = strlen(dig);
    while (zeros-- > 0 && dl < 34)
        dig[dl++] = '0', dig[dl] = '\0', r.lead += 0;
    long exp = r.lead - (long)dl + 1 + (long)(strlen(dig) - dl);
    if (rnd() % 8 == 0)
        exp += (long)(rnd() % 3) - 1;
    snprintf(s, sizeof s, "%s%sE%ld", r.cls == R_NEG ? "-" : "", dig, exp);
    if (exp < -6176 || exp > 6111)
        snprintf(s, sizeof s, "%s1E%d", r.cls == R_NEG ? "-" : "", exp < 0 ? -6176 : 6111);
    add_dec(d, key, s);
}

static double rnd_double(void)
{
    static const double anchors[] = {0x1p53, 0x1p63, 0x1p64, -0x1p63, 0x1p62, 1.0, 0.1, 1.0 / 3,
                                     DBL_MIN, DBL_TRUE_MIN, DBL_MAX, 1e-300, 123456789.125,
                                     -9007199254740993.0, 1e22, 1e23, 0.0};
    double a = anchors[rnd() % (sizeof anchors / sizeof anchors[0])];
    switch (rnd() % 6) {
    case 0: {
        uint64_t bits = rnd();
        memcpy(&a, &bits, sizeof a);
        return a; /* anything, NaN and infinities included */
    }
    case 1: return -a;
    case 2:
        for (int k = (int)(rnd() % 4); k > 0; k--)
            a = nextafter(a, rnd() & 1 ? INFINITY : -INFINITY);
        return a;
    case 3: return rnd() % 2 ? INFINITY : -INFINITY;
    case 4: return rnd() % 2 ? NAN : -0.0;
    default: return a;
    }
}

static int64_t rnd_int64(void)
{
    static const int64_t anchors[] = {INT64_MAX, INT64_MIN, 9007199254740992LL,
                                      -9007199254740992LL, 0, 1, -1, 4611686018427387904LL};
    int64_t a = anchors[rnd() % (sizeof anchors / sizeof anchors[0])];
    switch (rnd() % 3) {
    case 0: return (int64_t)rnd();
    case 1: return a + (a > 0 ? -(int64_t)(rnd() % 5) : (int64_t)(rnd() % 5));
    default: return a;
    }
}

/* One random number under `key`, often near the value `near` holds. */
static void rnd_number(bson_t *d, const char *key, const bson_iter_t *near)
{
    char s[1300];
    static const char *const extremes[] = {"1E-6176", "-1E-6176", "9999999999999999999999999999999999E+6111",
                                           "-9.999999999999999999999999999999999E+6144",
                                           "1.000000000000000000000000000000001", "0E-6176", "-0",
                                           "NaN", "-NaN", "Infinity", "-Infinity",
                                           "9223372036854775807.5", "9007199254740992.5",
                                           "4.9406564584124654E-324", "1.797693134862315708145274237317043E+308"};
    if (near && rnd() % 2) {
        ref r;
        ref_of(near, &r);
        switch (bson_iter_type(near)) {
        case BSON_TYPE_INT32: snprintf(s, sizeof s, "%d", bson_iter_int32(near)); break;
        case BSON_TYPE_INT64: snprintf(s, sizeof s, "%lld", (long long)bson_iter_int64(near)); break;
        case BSON_TYPE_DOUBLE: snprintf(s, sizeof s, "%.1100e", bson_iter_double(near)); break;
        default: {
            bson_decimal128_t x;
            bson_iter_decimal128(near, &x);
            bson_decimal128_to_string(&x, s);
        }
        }
        switch (rnd() % 4) {
        case 0: bson_append_double(d, key, -1, strtod(s, NULL)); return;
        case 1:
            if (r.cls == R_POS || r.cls == R_NEG) {
                double x = strtod(s, NULL);
                if (fabs(x) < 9.2e18) {
                    bson_append_int64(d, key, -1, (int64_t)x + (int64_t)(rnd() % 3) - 1);
                    return;
                }
            }
            /* fall through */
        default: add_dec_near(d, key, s); return;
        }
    }
    switch (rnd() % 6) {
    case 0: bson_append_int32(d, key, -1, (int32_t)rnd_int64()); break;
    case 1: bson_append_int64(d, key, -1, rnd_int64()); break;
    case 2: bson_append_double(d, key, -1, rnd_double()); break;
    case 3: add_dec(d, key, extremes[rnd() % (sizeof extremes / sizeof extremes[0])]); break;
    default: {
        /* a random 34-digit decimal, mostly in double's range */
        char dig[40];
        for (int i = 0; i < 34; i++)
            dig[i] = (char)('0' + (i ? rnd() % 10 : 1 + rnd() % 9));
        dig[rnd() % 34 + 1] = '\0';
        int exp = rnd() % 4 ? (int)(rnd() % 700) - 350 : (int)(rnd() % 12287) - 6176;
        snprintf(s, sizeof s, "%s%sE%d", rnd() & 1 ? "-" : "", dig, exp);
        add_dec(d, key, s);
    }
    }
}

static int key_cmp(const bson_iter_t *a, const bson_iter_t *b, bool desc)
{
    q_buf x, y;
    q_buf_init(&x);
    q_buf_init(&y);
    q_key_append_value(&x, a, desc);
    q_key_append_value(&y, b, desc);
    size_t n = x.len < y.len ? x.len : y.len;
    int c = memcmp(x.data, y.data, n);
    c = c ? (c < 0 ? -1 : 1) : (x.len < y.len ? -1 : x.len > y.len);
    if (c == 0)
        cr_assert(x.len == y.len, "equal keys have equal length");
    q_buf_cleanup(&x);
    q_buf_cleanup(&y);
    return c;
}

static char *show(const bson_iter_t *it)
{
    static char buf[2][200];
    static int k;
    q_buf b;
    q_buf_init(&b);
    q_buf_printf(&b, "%s ", q_type_name(bson_iter_type(it)));
    q_render_value(&b, it);
    k ^= 1;
    snprintf(buf[k], sizeof buf[k], "%s", q_buf_cstr(&b));
    q_buf_cleanup(&b);
    return buf[k];
}

Test(q_decimal, order_is_exact_property)
{
    int equal = 0, near_pairs = 0;
    for (int round = 0; round < 40000; round++) {
        bson_t d = BSON_INITIALIZER;
        bson_iter_t a, b;
        rnd_number(&d, "a", NULL);
        bson_iter_init_find(&a, &d, "a");
        rnd_number(&d, "b", &a);
        bson_iter_init_find(&a, &d, "a");
        bson_iter_init_find(&b, &d, "b");
        ref ra, rb;
        ref_of(&a, &ra);
        ref_of(&b, &rb);
        int want = ref_cmp(&ra, &rb);
        int c = q_value_cmp(&a, &b);
        c = c < 0 ? -1 : c > 0;
        cr_assert_eq(c, want, "q_value_cmp(%s, %s) = %d, exactly %d", show(&a), show(&b), c, want);
        cr_assert_eq(-q_value_cmp(&b, &a) < 0 ? -1 : -q_value_cmp(&b, &a) > 0, want);
        cr_assert_eq(key_cmp(&a, &b, false), want, "keys of %s, %s", show(&a), show(&b));
        cr_assert_eq(key_cmp(&a, &b, true), -want, "descending keys of %s, %s", show(&a), show(&b));
        equal += want == 0;
        near_pairs += ra.cls == rb.cls && ra.lead == rb.lead;
        bson_destroy(&d);
    }
    /* the generator must actually produce ties and near misses */
    cr_assert_gt(equal, 1000, "only %d equal pairs", equal);
    cr_assert_gt(near_pairs, 10000, "only %d pairs of one magnitude", near_pairs);
}

static void key_of(const char *json, q_buf *out)
{
    bson_t b;
    bson_iter_t it;
    md_error err;
    cr_assert_eq(md_json_parse(json, -1, &b, &err), 0, "%s", err.message);
    cr_assert(bson_iter_init_find(&it, &b, "v"));
    q_buf_init(out);
    q_key_append_value(out, &it, false);
    bson_destroy(&b);
}

Test(q_decimal, equal_values_encode_equally)
{
    static const char *const groups[][6] = {
        {"{\"v\": 1}", "{\"v\": {\"$numberLong\": \"1\"}}", "{\"v\": 1.0}",
         "{\"v\": {\"$numberDecimal\": \"1.00\"}}", "{\"v\": {\"$numberDecimal\": \"0.001E+3\"}}", NULL},
        {"{\"v\": 0}", "{\"v\": -0.0}", "{\"v\": {\"$numberDecimal\": \"-0\"}}",
         "{\"v\": {\"$numberDecimal\": \"0E-6176\"}}", "{\"v\": {\"$numberDecimal\": \"0E+6111\"}}", NULL},
        {"{\"v\": {\"$numberDouble\": \"NaN\"}}", "{\"v\": {\"$numberDecimal\": \"NaN\"}}",
         "{\"v\": {\"$numberDecimal\": \"-NaN\"}}", NULL},
        {"{\"v\": {\"$numberDouble\": \"-Infinity\"}}", "{\"v\": {\"$numberDecimal\": \"-Infinity\"}}", NULL},
        {"{\"v\": 9007199254740993}", "{\"v\": {\"$numberDecimal\": \"9007199254740993\"}}",
         "{\"v\": {\"$numberDecimal\": \"9.007199254740993000E+15\"}}", NULL},
        {"{\"v\": 0.5}", "{\"v\": {\"$numberDecimal\": \"0.50\"}}", "{\"v\": {\"$numberDecimal\": \"5E-1\"}}", NULL},
        {"{\"v\": {\"$numberDecimal\": \"0.1\"}}", "{\"v\": {\"$numberDecimal\": \"0.1000\"}}",
         "{\"v\": {\"$numberDecimal\": \"1E-1\"}}", NULL},
    };
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
        q_buf first;
        key_of(groups[g][0], &first);
        for (size_t i = 1; groups[g][i]; i++) {
            q_buf k;
            key_of(groups[g][i], &k);
            cr_assert(k.len == first.len && !memcmp(k.data, first.data, k.len), "%s vs %s",
                      groups[g][0], groups[g][i]);
            q_buf_cleanup(&k);
        }
        q_buf_cleanup(&first);
    }
}

Test(q_decimal, worked_example_bytes)
{
    static const uint8_t dec01[] = {0x1E, 0x05, 0x7F, 0xFD, 0xCC, 0xCC, 0xCC, 0xCC, 0xCC,
                                    0xCC, 0xCC, 0xCD, 0x7F, 0xFF, 0x0B, 0x00};
    static const uint8_t dbl01[] = {0x1E, 0x05, 0x7F, 0xFD, 0xCC, 0xCC, 0xCC,
                                    0xCC, 0xCC, 0xCC, 0xD0, 0x00};
    q_buf k;
    key_of("{\"v\": {\"$numberDecimal\": \"0.1\"}}", &k);
    cr_assert(k.len == sizeof dec01 && !memcmp(k.data, dec01, k.len));
    q_buf_cleanup(&k);
    key_of("{\"v\": 0.1}", &k);
    cr_assert(k.len == sizeof dbl01 && !memcmp(k.data, dbl01, k.len));
    q_buf_cleanup(&k);
    /* a negative decimal inverts everything after the class byte */
    key_of("{\"v\": {\"$numberDecimal\": \"-0.1\"}}", &k);
    cr_assert_eq(k.data[1], 0x03);
    for (size_t i = 2; i < k.len; i++)
        cr_assert_eq(k.data[i], (uint8_t)~dec01[i]);
    q_buf_cleanup(&k);
    /* covered-query decoding refuses a decimal that is no binary number */
    bson_t pat = BSON_INITIALIZER, out;
    BSON_APPEND_INT32(&pat, "v", 1);
    key_of("{\"v\": {\"$numberDecimal\": \"0.1\"}}", &k);
    cr_assert_not(q_key_decode(&pat, k.data, (uint32_t)k.len, &out));
    bson_destroy(&out);
    q_buf_cleanup(&k);
    key_of("{\"v\": {\"$numberDecimal\": \"2.50\"}}", &k);
    cr_assert(q_key_decode(&pat, k.data, (uint32_t)k.len, &out));
    bson_iter_t it;
    cr_assert(bson_iter_init_find(&it, &out, "v") && bson_iter_as_double(&it) == 2.5);
    bson_destroy(&out);
    q_buf_cleanup(&k);
    bson_destroy(&pat);
}

/* ---- through commands ------------------------------------------------------------------ */

#define DEC(s) "{\"$numberDecimal\": \"" s "\"}"

/* The _ids of a find reply's first batch, as "1,3,2". */
static void ids_of(bson_t *r, char *out, size_t cap)
{
    bson_iter_t it, x, id;
    size_t k = 0;
    out[0] = '\0';
    cr_assert(t_find(r, "cursor.firstBatch", &it), "%s", t_json(r));
    bson_iter_recurse(&it, &x);
    while (bson_iter_next(&x)) {
        bson_iter_recurse(&x, &id);
        cr_assert(bson_iter_find(&id, "_id"));
        k += (size_t)snprintf(out + k, cap - k, "%s%d", k ? "," : "", bson_iter_int32(&id));
    }
}

static void expect_ids(tdb *t, const char *want, const char *fmt, const char *arg)
{
    char ids[256];
    bson_t *r = T_OK(t, fmt, arg);
    ids_of(r, ids, sizeof ids);
    cr_assert_str_eq(ids, want, "[%s] %s %s", t->engine, fmt, arg);
    bson_destroy(r);
}

static void queries(tdb *t, const char *hint)
{
    static const struct {
        const char *filter, *ids;
    } q[] = {
        {"{\"a\": 1}", "1,3"},
        {"{\"a\": " DEC("1.00000000000000000001") "}", "2"},
        {"{\"a\": {\"$gt\": 1, \"$lt\": 1.0000000000000002}}", "2"},
        {"{\"a\": {\"$gte\": " DEC("1.00000000000000000001") "}}", "2,4,6,7,8"},
        {"{\"a\": {\"$lt\": 1}}", "5"},
        {"{\"a\": {\"$lte\": " DEC("0.99999999999999999999") "}}", "5"},
        {"{\"a\": {\"$in\": [" DEC("1.00000000000000000001") ", 9007199254740992.0]}}", "2,8"},
        {"{\"a\": " DEC("9007199254740993") "}", "6,7"},
        {"{\"a\": 9007199254740992.0}", "8"},
        {"{\"a\": {\"$ne\": 1}}", "2,4,5,6,7,8"},
    };
    char fmt[256];
    snprintf(fmt, sizeof fmt, "{\"find\": \"c\", \"filter\": %%s, \"sort\": {\"_id\": 1}%s}", hint);
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++)
        expect_ids(t, q[i].ids, fmt, q[i].filter);
    snprintf(fmt, sizeof fmt, "{\"find\": \"c\", \"sort\": %%s%s}", hint);
    expect_ids(t, "5,1,3,2,4,8,6,7", fmt, "{\"a\": 1, \"_id\": 1}");
    expect_ids(t, "7,6,8,4,2,3,1,5", fmt, "{\"a\": -1, \"_id\": -1}");
}

Test(q_decimal, equality_ranges_in_and_sort_by_exact_value)
{
    tdb t;
    FOR_EACH_ENGINE(t)
    {
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": ["
                  "{\"_id\": 1, \"a\": 1}, {\"_id\": 2, \"a\": " DEC("1.00000000000000000001") "},"
                  "{\"_id\": 3, \"a\": " DEC("1.00") "}, {\"_id\": 4, \"a\": 1.0000000000000002},"
                  "{\"_id\": 5, \"a\": " DEC("0.99999999999999999999") "},"
                  "{\"_id\": 6, \"a\": 9007199254740993}, {\"_id\": 7, \"a\": " DEC("9007199254740993") "},"
                  "{\"_id\": 8, \"a\": 9007199254740992.0}]}");
        queries(&t, "");
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"a\": 1}, \"name\": \"a_1\"},"
                  "{\"key\": {\"a\": -1}, \"name\": \"a_-1\"}]}");
        queries(&t, ", \"hint\": \"a_1\"");
        queries(&t, ", \"hint\": \"a_-1\"");
        bson_t *r = T_OK(&t, "{\"validate\": \"c\", \"full\": true}");
        bson_iter_t it;
        cr_assert(t_find(r, "valid", &it) && bson_iter_as_bool(&it), "%s", t_json(r));
        bson_destroy(r);
        /* a unique index sees 1 and 1.00 as one value, 1.00000000000000000001 as another */
        T_RUN(&t, "{\"createIndexes\": \"u\", \"indexes\": [{\"key\": {\"a\": 1}, \"name\": \"a_1\", "
                  "\"unique\": true}]}");
        T_RUN(&t, "{\"insert\": \"u\", \"documents\": [{\"_id\": 1, \"a\": 1}, {\"_id\": 2, \"a\": "
                  DEC("1.00000000000000000001") "}]}");
        r = T_OK(&t, "{\"insert\": \"u\", \"documents\": [{\"_id\": 3, \"a\": " DEC("1.00") "}]}");
        cr_assert_eq(t_i64(r, "writeErrors.0.code"), 11000, "[%s] %s", t.engine, t_json(r));
        bson_destroy(r);
    }
}

/* ---- key format versions in the catalog -------------------------------------------------- */

static void put_catalog(md_db *db, q_coll *c)
{
    eng_txn *tx;
    md_error err;
    cr_assert_eq(eng_txn_begin(db->eng, &tx), 0);
    cr_assert_eq(q_catalog_put(db, tx, c, &err), 0, "%s", err.message);
    cr_assert_eq(eng_txn_commit(tx, true, &err), 0, "%s", err.message);
}

Test(q_decimal, old_key_format_indexes_are_rebuilt_on_open)
{
    tdb t;
    FOR_EACH_ENGINE(t)
    {
        if (!t_persistent(&t))
            continue;
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": 1, \"a\": " DEC("0.1") "},"
                  "{\"_id\": 2, \"a\": 0.1}, {\"_id\": 3, \"a\": " DEC("1E-400") "}]}");
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"a\": 1}, \"name\": \"a_1\"}]}");
        /* Make it look like an index written by the old format: its catalog
         * entry without keyFormat 2, and the key format 1 gave decimal 0.1
         * (through long double) beside the exact one. */
        q_coll *c = q_coll_find(t.db, "c");
        cr_assert_not_null(c);
        q_index *ix = q_index_find(c, "a_1");
        cr_assert_not_null(ix);
        eng_rid *rids = NULL;
        size_t n = 0;
        md_error err;
        cr_assert_eq(q_scan_collect(t.db, c, NULL, NULL, 0, &rids, &n, &err), 0);
        cr_assert_eq(n, 3);
        bson_decimal128_t d01;
        bson_decimal128_from_string("0.1", &d01);
        q_buf old;
        q_buf_init(&old);
        q_buf_putc(&old, 0x1E);
        q_key_number_ld(&old, q_decimal_ld(&d01));
        eng_txn *tx;
        cr_assert_eq(eng_txn_begin(t.db->eng, &tx), 0);
        cr_assert_eq(eng_ss_insert(ix->ss, tx, old.data, (uint32_t)old.len, rids[0], false, NULL,
                                   &err),
                     0, "%s", err.message);
        cr_assert_eq(eng_txn_commit(tx, true, &err), 0);
        q_buf_cleanup(&old);
        free(rids);
        ix->key_format = 1;
        put_catalog(t.db, c);
        bson_t *r = T_OK(&t, "{\"validate\": \"c\", \"full\": true}");
        bson_iter_t it;
        cr_assert(t_find(r, "valid", &it) && !bson_iter_as_bool(&it),
                  "[%s] the stale key shows: %s", t.engine, t_json(r));
        bson_destroy(r);

        md_db_close(t.db);
        t_reopen(&t);
        ix = q_index_find(q_coll_find(t.db, "c"), "a_1");
        cr_assert_eq(ix->key_format, Q_KEY_FORMAT, "[%s] recorded as rebuilt", t.engine);
        r = T_OK(&t, "{\"validate\": \"c\", \"full\": true}");
        cr_assert(t_find(r, "valid", &it) && bson_iter_as_bool(&it), "[%s] %s", t.engine, t_json(r));
        bson_destroy(r);
        expect_ids(&t, "1", "{\"find\": \"c\", \"filter\": {\"a\": %s}, \"hint\": \"a_1\"}",
                   DEC("0.1"));
        expect_ids(&t, "3,1,2", "{\"find\": \"c\", \"sort\": {\"a\": 1}, \"hint\": \"%s\"}", "a_1");

        /* a format from a newer build is refused, clearly */
        ix->key_format = Q_KEY_FORMAT + 1;
        put_catalog(t.db, q_coll_find(t.db, "c"));
        md_db_close(t.db);
        bson_t *o = t_open_opts(t.engine);
        int rc = md_db_open(t.dir, o, &t.db, &err);
        bson_destroy(o);
        cr_assert_neq(rc, 0, "[%s] opened an index of a newer key format", t.engine);
        cr_assert(strstr(err.message, "key format 3"), "%s", err.message);
        t.db = NULL;
    }
}

/* q_key_number encodes int32, int64 and double with integer arithmetic; the
 * bytes must be q_key_number_ld's (the long double definition) for every
 * value: random bit patterns of each type, plus the edges (0, -0, the
 * extremes, subnormals, powers of two, NaN, the infinities). */
static void same_as_ld(const bson_t *doc)
{
    bson_iter_t it;
    cr_assert(bson_iter_init(&it, doc));
    while (bson_iter_next(&it)) {
        q_buf a, b;
        long double v;
        if (bson_iter_type(&it) == BSON_TYPE_INT32)
            v = bson_iter_int32(&it);
        else if (bson_iter_type(&it) == BSON_TYPE_INT64)
            v = bson_iter_int64(&it);
        else
            v = bson_iter_double(&it);
        q_buf_init(&a);
        q_buf_init(&b);
        q_key_number(&a, &it);
        q_key_number_ld(&b, v);
        cr_assert(a.len == b.len && memcmp(a.data, b.data, a.len) == 0,
                  "type %d value %La: %zu bytes against %zu", (int)bson_iter_type(&it), v, a.len,
                  b.len);
        q_buf_cleanup(&a);
        q_buf_cleanup(&b);
    }
}

Test(q_decimal, binary_number_keys_match_the_long_double_encoding)
{
    static const double dbl[] = {0.0, -0.0, 1.0, -1.0, 0.5, 0.1, -0.1, DBL_MAX, -DBL_MAX,
                                 DBL_MIN, -DBL_MIN, DBL_TRUE_MIN, -DBL_TRUE_MIN,
                                 DBL_MIN / 3, 9007199254740993.0, 1e308, -1e-308};
    static const int64_t i64[] = {0, 1, -1, INT64_MAX, INT64_MIN, INT64_MIN + 1,
                                  (int64_t)1 << 53, ((int64_t)1 << 53) + 1, -((int64_t)1 << 62)};
    static const int32_t i32[] = {0, 1, -1, INT32_MAX, INT32_MIN, 1 << 30, -(1 << 30) - 1};
    bson_t d = BSON_INITIALIZER;
    for (size_t i = 0; i < sizeof dbl / sizeof *dbl; i++)
        BSON_APPEND_DOUBLE(&d, "d", dbl[i]);
    BSON_APPEND_DOUBLE(&d, "d", NAN);
    BSON_APPEND_DOUBLE(&d, "d", INFINITY);
    BSON_APPEND_DOUBLE(&d, "d", -INFINITY);
    for (size_t i = 0; i < sizeof i64 / sizeof *i64; i++)
        BSON_APPEND_INT64(&d, "l", i64[i]);
    for (size_t i = 0; i < sizeof i32 / sizeof *i32; i++)
        BSON_APPEND_INT32(&d, "i", i32[i]);
    for (int k = 0; k < 64; k++) {
        BSON_APPEND_INT64(&d, "p", (int64_t)((uint64_t)1 << k));
        BSON_APPEND_DOUBLE(&d, "p", ldexp(1.0, k * 33 - 1074));
    }
    same_as_ld(&d);
    bson_destroy(&d);

    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (int round = 0; round < 200; round++) {
        bson_init(&d);
        for (int k = 0; k < 100; k++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            double x;
            memcpy(&x, &s, sizeof x);
            BSON_APPEND_DOUBLE(&d, "d", x);
            BSON_APPEND_INT64(&d, "l", (int64_t)s >> (s % 64));
            BSON_APPEND_INT32(&d, "i", (int32_t)(s >> 32));
        }
        same_as_ld(&d);
        bson_destroy(&d);
    }
}
