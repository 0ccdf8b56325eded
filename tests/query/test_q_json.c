/*
 * test_q_json.c -- the extended JSON reader (md_json_parse, query/q_json.c):
 * every legacy and canonical type-wrapper key in both of its roles (a
 * complete, valid wrapper becomes its BSON type; anything else stays a
 * document that the query parser judges), JSON's own grammar (numbers,
 * strings, escapes, nesting, positions of errors), a round trip of random
 * documents through libbson's canonical writer, and the query operators
 * that collide with legacy extended JSON answered through
 * md_db_command_json on every engine.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "q.h"
#include "q_path.h"
#include "test_q_util.h"

#define OID24 "0123456789abcdef01234567"

/* Parse `json` (must succeed); the type of its field "a". */
static bson_type_t type_of_a(const char *json, bson_t *out)
{
    md_error err;
    bson_iter_t it;
    int rc = md_json_parse(json, -1, out, &err);
    cr_assert_eq(rc, 0, "%s: %s", json, err.message);
    cr_assert(bson_iter_init_find(&it, out, "a"), "%s: no field a", json);
    return bson_iter_type(&it);
}

/* Field "a" of `json` has BSON type t. */
static void expect_type(const char *json, bson_type_t t)
{
    bson_t b;
    bson_type_t got = type_of_a(json, &b);
    char *s = bson_as_canonical_extended_json(&b, NULL);
    cr_assert_eq(got, t, "%s: type %d, wanted %d (%s)", json, (int)got, (int)t, s);
    bson_free(s);
    bson_destroy(&b);
}

/* Field "a" of `json` stays a document whose first key is `first`. */
static void expect_doc(const char *json, const char *first)
{
    bson_t b;
    bson_iter_t it, sub;
    bson_type_t got = type_of_a(json, &b);
    cr_assert_eq(got, BSON_TYPE_DOCUMENT, "%s: type %d, wanted a document", json, (int)got);
    bson_iter_init_find(&it, &b, "a");
    cr_assert(bson_iter_recurse(&it, &sub) && bson_iter_next(&sub));
    cr_assert_str_eq(bson_iter_key(&sub), first, "%s", json);
    bson_destroy(&b);
}

static void expect_error(const char *json, size_t pos)
{
    bson_t b;
    md_error err;
    char want[32];
    cr_assert_neq(md_json_parse(json, -1, &b, &err), 0, "%s parsed", json);
    cr_assert_eq(err.code, 9, "%s: code %d", json, err.code);
    cr_assert_str_eq(err.code_name, "FailedToParse");
    snprintf(want, sizeof want, "at position %zu", pos);
    cr_assert(strstr(err.message, want), "%s: \"%s\" lacks \"%s\"", json, err.message, want);
    cr_assert(bson_empty(&b), "a failed parse leaves an empty document");
    bson_destroy(&b);
}

Test(q_json, wrappers_complete_and_valid_become_types)
{
    expect_type("{\"a\": {\"$oid\": \"" OID24 "\"}}", BSON_TYPE_OID);
    expect_type("{\"a\": {\"$symbol\": \"s\"}}", BSON_TYPE_SYMBOL);
    expect_type("{\"a\": {\"$numberInt\": \"-7\"}}", BSON_TYPE_INT32);
    expect_type("{\"a\": {\"$numberLong\": \"5\"}}", BSON_TYPE_INT64);
    expect_type("{\"a\": {\"$numberDouble\": \"-Infinity\"}}", BSON_TYPE_DOUBLE);
    expect_type("{\"a\": {\"$numberDouble\": \"1.5E+3\"}}", BSON_TYPE_DOUBLE);
    expect_type("{\"a\": {\"$numberDecimal\": \"1.10\"}}", BSON_TYPE_DECIMAL128);
    expect_type("{\"a\": {\"$binary\": {\"base64\": \"AAEC\", \"subType\": \"00\"}}}",
                BSON_TYPE_BINARY);
    expect_type("{\"a\": {\"$binary\": {\"subType\": \"4\", \"base64\": \"\"}}}", BSON_TYPE_BINARY);
    expect_type("{\"a\": {\"$binary\": \"AAE=\", \"$type\": \"80\"}}", BSON_TYPE_BINARY);
    expect_type("{\"a\": {\"$type\": \"0\", \"$binary\": \"AA==\"}}", BSON_TYPE_BINARY);
    expect_type("{\"a\": {\"$uuid\": \"c8edabc3-f738-4ca3-b68d-ab92a91478a3\"}}", BSON_TYPE_BINARY);
    expect_type("{\"a\": {\"$code\": \"f()\"}}", BSON_TYPE_CODE);
    expect_type("{\"a\": {\"$code\": \"f()\", \"$scope\": {\"x\": 1}}}", BSON_TYPE_CODEWSCOPE);
    expect_type("{\"a\": {\"$scope\": {}, \"$code\": \"f()\"}}", BSON_TYPE_CODEWSCOPE);
    expect_type("{\"a\": {\"$timestamp\": {\"t\": 4294967295, \"i\": 0}}}", BSON_TYPE_TIMESTAMP);
    expect_type("{\"a\": {\"$regularExpression\": {\"pattern\": \"x\", \"options\": \"mi\"}}}",
                BSON_TYPE_REGEX);
    expect_type("{\"a\": {\"$regex\": \"^x\", \"$options\": \"i\"}}", BSON_TYPE_REGEX);
    expect_type("{\"a\": {\"$options\": \"\", \"$regex\": \"^x\"}}", BSON_TYPE_REGEX);
    expect_type("{\"a\": {\"$dbPointer\": {\"$ref\": \"db.c\", \"$id\": {\"$oid\": \"" OID24
                "\"}}}}",
                BSON_TYPE_DBPOINTER);
    expect_type("{\"a\": {\"$date\": 1577836800000}}", BSON_TYPE_DATE_TIME);
    expect_type("{\"a\": {\"$date\": -1}}", BSON_TYPE_DATE_TIME);
    expect_type("{\"a\": {\"$date\": {\"$numberLong\": \"-62135596800000\"}}}", BSON_TYPE_DATE_TIME);
    expect_type("{\"a\": {\"$date\": \"2020-02-29T23:59:59.999Z\"}}", BSON_TYPE_DATE_TIME);
    expect_type("{\"a\": {\"$undefined\": true}}", BSON_TYPE_UNDEFINED);
    expect_type("{\"a\": {\"$minKey\": 1}}", BSON_TYPE_MINKEY);
    expect_type("{\"a\": {\"$maxKey\": 1}}", BSON_TYPE_MAXKEY);
    /* inside arrays too */
    bson_t b;
    md_error err;
    bson_iter_t it;
    cr_assert_eq(md_json_parse("{\"a\": [{\"$numberLong\": \"1\"}, {\"$minKey\": 1}]}", -1, &b,
                               &err),
                 0);
    cr_assert(bson_iter_init(&it, &b) && bson_iter_find_descendant(&it, "a.1", &it));
    cr_assert(BSON_ITER_HOLDS_MINKEY(&it));
    bson_destroy(&b);
}

Test(q_json, wrapper_values)
{
    bson_t b;
    md_error err;
    bson_iter_t it;
    cr_assert_eq(md_json_parse("{\"a\": {\"$date\": \"2020-01-01T01:00:00.5+01:00\"}, "
                               "\"b\": {\"$date\": \"1969-12-31T23:59:59.999Z\"}, "
                               "\"c\": {\"$binary\": \"AAEC/w==\", \"$type\": \"05\"}, "
                               "\"d\": {\"$timestamp\": {\"i\": 2, \"t\": 1}}, "
                               "\"e\": {\"$regex\": \"p\", \"$options\": \"xmi\"}, "
                               "\"f\": {\"$uuid\": \"00112233-4455-6677-8899-aabbccddeeff\"}}",
                               -1, &b, &err),
                 0, "%s", err.message);
    bson_iter_init_find(&it, &b, "a");
    cr_assert_eq(bson_iter_date_time(&it), 1577836800500LL);
    bson_iter_init_find(&it, &b, "b");
    cr_assert_eq(bson_iter_date_time(&it), -1);
    bson_subtype_t st;
    uint32_t n;
    const uint8_t *p;
    bson_iter_init_find(&it, &b, "c");
    bson_iter_binary(&it, &st, &n, &p);
    cr_assert(st == 5 && n == 4 && p[0] == 0 && p[1] == 1 && p[2] == 2 && p[3] == 0xFF);
    uint32_t t, i;
    bson_iter_init_find(&it, &b, "d");
    bson_iter_timestamp(&it, &t, &i);
    cr_assert(t == 1 && i == 2);
    const char *opts;
    bson_iter_init_find(&it, &b, "e");
    cr_assert_str_eq(bson_iter_regex(&it, &opts), "p");
    cr_assert_str_eq(opts, "imx", "options are stored sorted");
    bson_iter_init_find(&it, &b, "f");
    bson_iter_binary(&it, &st, &n, &p);
    cr_assert(st == BSON_SUBTYPE_UUID && n == 16 && p[0] == 0x00 && p[15] == 0xFF);
    bson_destroy(&b);
}

/* Each key again, incomplete, with an extra key, or with a value of the
 * wrong type: an ordinary document. */
Test(q_json, incomplete_or_invalid_wrappers_stay_documents)
{
    static const struct {
        const char *json, *first;
    } cases[] = {
        {"{\"a\": {\"$type\": \"string\"}}", "$type"},
        {"{\"a\": {\"$type\": 2}}", "$type"},
        {"{\"a\": {\"$type\": [\"int\", \"long\"]}}", "$type"},
        {"{\"a\": {\"$binary\": \"AAAA\"}}", "$binary"},
        {"{\"a\": {\"$binary\": \"AAA\", \"$type\": \"00\"}}", "$binary"},
        {"{\"a\": {\"$binary\": \"AAAA\", \"$type\": 0}}", "$binary"},
        {"{\"a\": {\"$binary\": {\"base64\": \"AAAA\"}}}", "$binary"},
        {"{\"a\": {\"$binary\": {\"base64\": \"AAAA\", \"subType\": \"100\"}}}", "$binary"},
        {"{\"a\": {\"$regex\": 1}}", "$regex"},
        {"{\"a\": {\"$regex\": \"x\"}}", "$regex"},
        {"{\"a\": {\"$options\": \"i\"}}", "$options"},
        {"{\"a\": {\"$regex\": \"x\", \"$options\": 1}}", "$regex"},
        {"{\"a\": {\"$regex\": \"x\", \"$options\": \"i\", \"$ne\": 1}}", "$regex"},
        {"{\"a\": {\"$regex\": {\"$regularExpression\": {\"pattern\": \"x\", \"options\": \"\"}}, "
         "\"$options\": \"i\"}}",
         "$regex"},
        {"{\"a\": {\"$date\": \"yesterday\"}}", "$date"},
        {"{\"a\": {\"$date\": \"2019-02-29T00:00:00Z\"}}", "$date"},
        {"{\"a\": {\"$date\": 1.5}}", "$date"},
        {"{\"a\": {\"$date\": true}}", "$date"},
        {"{\"a\": {\"$date\": 1, \"$x\": 1}}", "$date"},
        {"{\"a\": {\"$oid\": \"0123\"}}", "$oid"},
        {"{\"a\": {\"$oid\": \"0123456789abcdef0123456z\"}}", "$oid"},
        {"{\"a\": {\"$oid\": 1}}", "$oid"},
        {"{\"a\": {\"$numberLong\": 5}}", "$numberLong"},
        {"{\"a\": {\"$numberLong\": \"9223372036854775808\"}}", "$numberLong"},
        {"{\"a\": {\"$numberLong\": \"12a\"}}", "$numberLong"},
        {"{\"a\": {\"$numberInt\": \"2147483648\"}}", "$numberInt"},
        {"{\"a\": {\"$numberDouble\": \"one\"}}", "$numberDouble"},
        {"{\"a\": {\"$numberDecimal\": \"1.x\"}}", "$numberDecimal"},
        {"{\"a\": {\"$numberDecimal\": 1}}", "$numberDecimal"},
        {"{\"a\": {\"$undefined\": false}}", "$undefined"},
        {"{\"a\": {\"$undefined\": 1}}", "$undefined"},
        {"{\"a\": {\"$minKey\": 2}}", "$minKey"},
        {"{\"a\": {\"$maxKey\": \"1\"}}", "$maxKey"},
        {"{\"a\": {\"$timestamp\": {\"t\": 1}}}", "$timestamp"},
        {"{\"a\": {\"$timestamp\": {\"t\": -1, \"i\": 1}}}", "$timestamp"},
        {"{\"a\": {\"$timestamp\": 5}}", "$timestamp"},
        {"{\"a\": {\"$ref\": \"c\", \"$id\": 1}}", "$ref"},
        {"{\"a\": {\"$ref\": \"c\", \"$id\": {\"$oid\": \"" OID24 "\"}, \"$db\": \"d\"}}", "$ref"},
        {"{\"a\": {\"$ref\": \"c\"}}", "$ref"},
        {"{\"a\": {\"$id\": 5}}", "$id"},
        {"{\"a\": {\"$code\": 1}}", "$code"},
        {"{\"a\": {\"$scope\": {}}}", "$scope"},
        {"{\"a\": {\"$code\": \"f\", \"$scope\": 1}}", "$code"},
        {"{\"a\": {\"$symbol\": 1}}", "$symbol"},
        {"{\"a\": {\"$dbPointer\": {\"$ref\": \"c\", \"$id\": 1}}}", "$dbPointer"},
        {"{\"a\": {\"$dbPointer\": \"c\"}}", "$dbPointer"},
        {"{\"a\": {\"$uuid\": \"c8edabc3f7384ca3b68dab92a91478a3\"}}", "$uuid"},
        {"{\"a\": {\"$regularExpression\": {\"pattern\": \"x\"}}}", "$regularExpression"},
        {"{\"a\": {\"$gt\": 1}}", "$gt"},
        {"{\"a\": {\"$foo\": {\"$oid\": \"" OID24 "\"}}}", "$foo"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_doc(cases[i].json, cases[i].first);
    /* a document's inner wrappers are still converted */
    bson_t b;
    bson_iter_t it;
    type_of_a("{\"a\": {\"$ref\": \"c\", \"$id\": {\"$oid\": \"" OID24 "\"}}}", &b);
    cr_assert(bson_iter_init(&it, &b) && bson_iter_find_descendant(&it, "a.$id", &it));
    cr_assert(BSON_ITER_HOLDS_OID(&it));
    bson_destroy(&b);
    /* the top level is always a document */
    md_error err;
    cr_assert_eq(md_json_parse("{\"$oid\": \"" OID24 "\"}", -1, &b, &err), 0);
    cr_assert(bson_iter_init_find(&it, &b, "$oid") && BSON_ITER_HOLDS_UTF8(&it));
    bson_destroy(&b);
}

Test(q_json, numbers)
{
    expect_type("{\"a\": 2147483647}", BSON_TYPE_INT32);
    expect_type("{\"a\": -2147483648}", BSON_TYPE_INT32);
    expect_type("{\"a\": 2147483648}", BSON_TYPE_INT64);
    expect_type("{\"a\": -9223372036854775808}", BSON_TYPE_INT64);
    expect_type("{\"a\": 9223372036854775808}", BSON_TYPE_DOUBLE);
    expect_type("{\"a\": -0}", BSON_TYPE_INT32);
    expect_type("{\"a\": 1.0}", BSON_TYPE_DOUBLE);
    expect_type("{\"a\": 1e2}", BSON_TYPE_DOUBLE);
    expect_type("{\"a\": 1E-400}", BSON_TYPE_DOUBLE);
    bson_t b;
    bson_iter_t it;
    type_of_a("{\"a\": -0.0, \"b\": 0.1, \"c\": 123456789012345678901234567890}", &b);
    bson_iter_init_find(&it, &b, "a");
    cr_assert(bson_iter_double(&it) == 0 && signbit(bson_iter_double(&it)));
    bson_iter_init_find(&it, &b, "b");
    cr_assert(bson_iter_double(&it) == 0.1);
    bson_iter_init_find(&it, &b, "c");
    cr_assert(bson_iter_double(&it) == 123456789012345678901234567890.0);
    bson_destroy(&b);
    expect_error("{\"a\": 01}", 6);
    expect_error("{\"a\": 1.}", 8);
    expect_error("{\"a\": .5}", 6);
    expect_error("{\"a\": -}", 7);
    expect_error("{\"a\": 1e}", 8);
    expect_error("{\"a\": +1}", 6);
    expect_error("{\"a\": 1e400}", 6);
    expect_error("{\"a\": NaN}", 6);
}

Test(q_json, strings)
{
    bson_t b;
    md_error err;
    bson_iter_t it;
    uint32_t n;
    cr_assert_eq(md_json_parse("{\"a\": \"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00x\\u0000y\", "
                               "\"\": \"\", \"\xc3\xa9\": 1}",
                               -1, &b, &err),
                 0, "%s", err.message);
    bson_iter_init_find(&it, &b, "a");
    const char *s = bson_iter_utf8(&it, &n);
    cr_assert_eq(n, 17);
    cr_assert(memcmp(s, "\"\\/\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80x\0y", 17) == 0);
    cr_assert(bson_iter_init_find(&it, &b, ""));
    cr_assert(bson_iter_init_find(&it, &b, "\xc3\xa9"));
    bson_destroy(&b);
    expect_error("{\"a\": \"\\ud800\"}", 7);
    expect_error("{\"a\": \"\\udc00\"}", 7);
    expect_error("{\"a\": \"\\ud800\\u0041\"}", 7);
    expect_error("{\"a\": \"\\x\"}", 7);
    expect_error("{\"a\": \"\\u12\"}", 11);
    expect_error("{\"a\": \"x\ny\"}", 8);
    expect_error("{\"a\": \"\xff\"}", 7);
    expect_error("{\"a\": \"\xc0\x80\"}", 7);
    expect_error("{\"a\": \"\xed\xa0\x80\"}", 7);
    expect_error("{\"a\": \"abc}", 11);
    expect_error("{\"a\\u0000b\": 1}", 1);
}

Test(q_json, grammar_and_positions)
{
    expect_error("", 0);
    expect_error("   ", 3);
    expect_error("[1, 2]", 0);
    expect_error("{\"a\": 1,}", 8);
    expect_error("{\"a\": [1, 2,]}", 12);
    expect_error("{\"a\" 1}", 5);
    expect_error("{a: 1}", 1);
    expect_error("{\"a\": 1} x", 9);
    expect_error("{\"a\": 1}{\"b\": 2}", 8);
    expect_error("{\"a\": tru}", 6);
    expect_error("{\"a\": 1", 7);
    expect_error("{\"a\": [1", 8);
    expect_error("{\"a\": {\"$numberLong\": \"1\"", 25);
    /* 200 levels are fine, 201 are not */
    char deep[1024];
    size_t k = 0;
    k += (size_t)snprintf(deep + k, sizeof deep - k, "{\"a\": ");
    for (int i = 0; i < 199; i++)
        deep[k++] = '[';
    deep[k++] = '1';
    for (int i = 0; i < 199; i++)
        deep[k++] = ']';
    deep[k++] = '}';
    deep[k] = '\0';
    bson_t b;
    md_error err;
    cr_assert_eq(md_json_parse(deep, -1, &b, &err), 0, "%s", err.message);
    bson_destroy(&b);
    memmove(deep + 7, deep + 6, k - 6 + 1);
    deep[6] = '[';
    memmove(deep + k + 1, deep + k, 2);
    deep[k] = ']';
    expect_error(deep, 205);
    /* an explicit length; blanks around */
    cr_assert_eq(md_json_parse(" {\"a\": 1}\n\t garbage", 11, &b, &err), 0, "%s", err.message);
    bson_destroy(&b);
    cr_assert_neq(md_json_parse(NULL, -1, &b, &err), 0);
    bson_destroy(&b);
}

/* ---- round trip through libbson's canonical writer ------------------------------ */

static uint64_t rnd_state = 0x9E3779B97F4A7C15ull;

static uint64_t rnd(void)
{
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 7;
    rnd_state ^= rnd_state << 17;
    return rnd_state;
}

static void rnd_string(char *s, size_t cap)
{
    static const char *const pieces[] = {"a", "Z", "\"", "\\", "/", "\n", "\x01", "\xc3\xa9",
                                         "\xe2\x82\xac", "\xf0\x9f\x98\x80", " ", "$"};
    size_t n = rnd() % 6, k = 0;
    for (size_t i = 0; i < n; i++) {
        const char *p = pieces[rnd() % (sizeof pieces / sizeof pieces[0])];
        if (k + strlen(p) + 1 >= cap)
            break;
        memcpy(s + k, p, strlen(p));
        k += strlen(p);
    }
    s[k] = '\0';
}

static void rnd_doc(bson_t *d, int depth, bool array);

static void rnd_value(bson_t *d, const char *key, int depth)
{
    char s[64], opts[8];
    bson_t child;
    bson_oid_t oid;
    bson_decimal128_t dec;
    static const char *const decs[] = {"1.10", "-0", "NaN", "-Infinity", "1E+6144",
                                       "9999999999999999999999999999999999", "1E-6176"};
    static const double dbls[] = {0.1, -0.0, 1e308, 5e-324, 2.5, -1e-7, 1e20};
    uint8_t bin[5] = {0, 1, 0xFE, 0xFF, 0x80};
    switch (rnd() % 20) {
    case 0: bson_append_int32(d, key, -1, (int32_t)rnd()); break;
    case 1: bson_append_int64(d, key, -1, (int64_t)rnd()); break;
    case 2: bson_append_double(d, key, -1, dbls[rnd() % 7]); break;
    case 3: bson_append_double(d, key, -1, (double)(int64_t)rnd() / (double)(rnd() | 1)); break;
    case 4:
        bson_decimal128_from_string(decs[rnd() % 7], &dec);
        bson_append_decimal128(d, key, -1, &dec);
        break;
    case 5: rnd_string(s, sizeof s); bson_append_utf8(d, key, -1, s, -1); break;
    case 6: bson_append_binary(d, key, -1, (bson_subtype_t)(rnd() % 6), bin, (uint32_t)(rnd() % 6)); break;
    case 7: bson_oid_init(&oid, NULL); bson_append_oid(d, key, -1, &oid); break;
    case 8: bson_append_bool(d, key, -1, rnd() & 1); break;
    case 9: bson_append_date_time(d, key, -1, (int64_t)(rnd() % 400000000000000ull) - 200000000000000LL); break;
    case 10: bson_append_null(d, key, -1); break;
    case 11:
        rnd_string(s, sizeof s);
        snprintf(opts, sizeof opts, "%s", rnd() & 1 ? "im" : "");
        bson_append_regex(d, key, -1, s, opts);
        break;
    case 12: rnd_string(s, sizeof s); bson_append_code(d, key, -1, s); break;
    case 13: bson_append_timestamp(d, key, -1, (uint32_t)rnd(), (uint32_t)rnd()); break;
    case 14: bson_append_minkey(d, key, -1); break;
    case 15: bson_append_maxkey(d, key, -1); break;
    case 16: bson_append_undefined(d, key, -1); break;
    case 17: rnd_string(s, sizeof s); bson_append_symbol(d, key, -1, s, -1); break;
    case 18:
        if (depth < 4) {
            bool arr = rnd() & 1;
            if (arr)
                bson_append_array_begin(d, key, -1, &child);
            else
                bson_append_document_begin(d, key, -1, &child);
            rnd_doc(&child, depth + 1, arr);
            if (arr)
                bson_append_array_end(d, &child);
            else
                bson_append_document_end(d, &child);
        } else {
            bson_append_int32(d, key, -1, 1);
        }
        break;
    default:
        bson_oid_init(&oid, NULL);
        rnd_string(s, sizeof s);
        if (rnd() & 1) {
            bson_append_dbpointer(d, key, -1, "db.c", &oid);
        } else {
            bson_t scope = BSON_INITIALIZER;
            BSON_APPEND_INT32(&scope, "x", 1);
            bson_append_code_with_scope(d, key, -1, s, &scope);
            bson_destroy(&scope);
        }
        break;
    }
}

static void rnd_doc(bson_t *d, int depth, bool array)
{
    size_t n = rnd() % 5;
    char key[32];
    for (size_t i = 0; i < n; i++) {
        if (array)
            snprintf(key, sizeof key, "%zu", i);
        else
            snprintf(key, sizeof key, "%s%zu", rnd() & 1 ? "k" : "\xc3\xa9 x", i);
        rnd_value(d, key, depth);
    }
}

Test(q_json, canonical_round_trip)
{
    for (int round = 0; round < 3000; round++) {
        bson_t d = BSON_INITIALIZER, back;
        md_error err;
        rnd_doc(&d, 0, false);
        size_t len;
        char *json = bson_as_canonical_extended_json(&d, &len);
        cr_assert_eq(md_json_parse(json, (ssize_t)len, &back, &err), 0, "%s: %s", json,
                     err.message);
        cr_assert(d.len == back.len && !memcmp(bson_get_data(&d), bson_get_data(&back), d.len),
                  "round trip differs: %s", json);
        bson_free(json);
        /* libbson's legacy writer too, for the types it writes unambiguously */
        bson_destroy(&back);
        bson_destroy(&d);
    }
}

Test(q_json, legacy_writer_forms)
{
    bson_t d = BSON_INITIALIZER, back;
    md_error err;
    bson_oid_t oid;
    uint8_t bin[3] = {1, 2, 3};
    bson_oid_init_from_string(&oid, OID24);
    BSON_APPEND_BINARY(&d, "b", BSON_SUBTYPE_USER, bin, 3);
    BSON_APPEND_REGEX(&d, "r", "^a.c", "i");
    BSON_APPEND_DATE_TIME(&d, "t", 1234567890123LL);
    BSON_APPEND_OID(&d, "o", &oid);
    BSON_APPEND_TIMESTAMP(&d, "ts", 5, 6);
    BSON_APPEND_MINKEY(&d, "mn");
    BSON_APPEND_MAXKEY(&d, "mx");
    BSON_APPEND_UNDEFINED(&d, "u");
    char *json = bson_as_json(&d, NULL);
    cr_assert_eq(md_json_parse(json, -1, &back, &err), 0, "%s: %s", json, err.message);
    cr_assert(d.len == back.len && !memcmp(bson_get_data(&d), bson_get_data(&back), d.len),
              "legacy round trip differs: %s", json);
    bson_free(json);
    bson_destroy(&back);
    bson_destroy(&d);
}

/* ---- the colliding query operators, end to end ------------------------------------ */

static int count_of(bson_t *reply)
{
    bson_iter_t it, x;
    int n = 0;
    cr_assert(t_find(reply, "cursor.firstBatch", &it), "no firstBatch");
    bson_iter_recurse(&it, &x);
    while (bson_iter_next(&x))
        n++;
    return n;
}

Test(q_json, colliding_operators_reach_the_query_parser)
{
    tdb t;
    FOR_EACH_ENGINE(t)
    {
        int rc;
        bson_t *r = t_cmd(&t, &rc,
                          "{\"insert\": \"c\", \"documents\": [{\"_id\": 1, \"a\": \"x\"}, "
                          "{\"_id\": 2, \"a\": 2}, {\"_id\": 3, \"a\": {\"$numberLong\": \"3\"}}, "
                          "{\"_id\": 4, \"a\": \"Xy\"}, "
                          "{\"_id\": 5, \"a\": {\"$binary\": \"AA==\", \"$type\": \"00\"}}]}");
        cr_assert_eq(rc, 0);
        bson_destroy(r);
        static const struct {
            const char *filter;
            int n;
        } q[] = {
            {"{\"a\": {\"$type\": \"string\"}}", 2},
            {"{\"a\": {\"$type\": 2}}", 2},
            {"{\"a\": {\"$type\": [\"int\", \"long\"]}}", 2},
            {"{\"a\": {\"$type\": \"binData\"}}", 1},
            {"{\"a\": {\"$regex\": \"^x\", \"$options\": \"i\"}}", 2},
            {"{\"a\": {\"$regex\": \"^x\"}}", 1},
            {"{\"a\": {\"$in\": [{\"$regex\": \"^X\", \"$options\": \"\"}, 2]}}", 2},
            {"{\"a\": {\"$not\": {\"$type\": \"string\"}}}", 3},
        };
        for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
            r = t_cmd(&t, &rc, "{\"find\": \"c\", \"filter\": %s}", q[i].filter);
            cr_assert_eq(rc, 0, "[%s] %s", t.engine, q[i].filter);
            cr_assert_eq(count_of(r), q[i].n, "[%s] %s", t.engine, q[i].filter);
            bson_destroy(r);
        }
        static const char *const bad[] = {
            "{\"a\": {\"$regex\": 1}}",
            "{\"a\": {\"$options\": \"i\"}}",
            "{\"a\": {\"$type\": \"nonsense\"}}",
            "{\"a\": {\"$numberLong\": \"x\"}}",
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            r = t_cmd(&t, &rc, "{\"find\": \"c\", \"filter\": %s}", bad[i]);
            cr_assert_neq(rc, 0, "[%s] %s", t.engine, bad[i]);
            cr_assert_eq(t_i64(r, "code"), 2, "[%s] %s: BadValue", t.engine, bad[i]);
            bson_destroy(r);
        }
        r = t_cmd(&t, &rc, "{\"find\": \"c\", \"filter\": {\"a\": 1,}}");
        cr_assert_eq(t_i64(r, "code"), 9);
        cr_assert_str_eq(t_str(r, "codeName"), "FailedToParse");
        bson_destroy(r);
    }
}
