/*
 * test_q_match.c -- filters against documents, operator by operator, with
 * the array / null / missing edge cases MongoDB 3.6 has; parse errors with
 * their codes and messages; positional offsets; upsert seeds.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "q.h"
#include "test_q_fuzz.h"

static bson_t *J(const char *json)
{
    bson_error_t e;
    bson_t *b = bson_new_from_json((const uint8_t *)json, -1, &e);
    cr_assert(b, "bad JSON %s: %s", json, e.message);
    return b;
}

typedef struct mcase {
    const char *doc;
    bool want;
} mcase;

/* Check one filter against a table of documents. */
static void table_bson(const bson_t *f, const char *filter, const mcase *c, size_t n)
{
    q_matcher *m;
    md_error err;
    int rc = q_matcher_new(f, &m, &err);
    cr_assert_eq(rc, 0, "%s: %s", filter, err.message);
    for (size_t i = 0; i < n; i++) {
        bson_t *d = J(c[i].doc);
        cr_assert_eq(q_matcher_matches(m, d), c[i].want, "%s on %s should be %s", filter,
                     c[i].doc, c[i].want ? "true" : "false");
        bson_destroy(d);
    }
    q_matcher_destroy(m);
}

static void table(const char *filter, const mcase *c, size_t n)
{
    bson_t *f = J(filter);
    table_bson(f, filter, c, n);
    bson_destroy(f);
}

#define TABLE(filter, ...)                                                                    \
    do {                                                                                      \
        const mcase cases_[] = {__VA_ARGS__};                                                 \
        table(filter, cases_, sizeof cases_ / sizeof cases_[0]);                              \
    } while (0)

/* {a: {$type: <arg>}}: libbson's JSON reader takes "$type" for binary. */
static bson_t *type_filter(const char *alias, int32_t code)
{
    bson_t *f = bson_new(), a;
    bson_append_document_begin(f, "a", 1, &a);
    if (alias)
        bson_append_utf8(&a, "$type", -1, alias, -1);
    else
        bson_append_int32(&a, "$type", -1, code);
    bson_append_document_end(f, &a);
    return f;
}

#define TYPE_TABLE(alias, code, ...)                                                          \
    do {                                                                                      \
        const mcase cases_[] = {__VA_ARGS__};                                                 \
        bson_t *f_ = type_filter(alias, code);                                                \
        table_bson(f_, alias ? alias : "$type code", cases_, sizeof cases_ / sizeof cases_[0]); \
        bson_destroy(f_);                                                                     \
    } while (0)

static void parse_error_bson(const bson_t *f, const char *filter, int code, const char *msg)
{
    q_matcher *m = (q_matcher *)1;
    md_error err;
    md_error_clear(&err);
    int rc = q_matcher_new(f, &m, &err);
    cr_assert_neq(rc, 0, "%s should not parse", filter);
    cr_assert_null(m);
    cr_assert_eq(err.code, code, "%s: code %d (%s)", filter, err.code, err.message);
    if (msg)
        cr_assert_str_eq(err.message, msg, "%s", filter);
}

static void parse_error(const char *filter, int code, const char *msg)
{
    bson_t *f = J(filter);
    parse_error_bson(f, filter, code, msg);
    bson_destroy(f);
}

Test(q_match, implicit_equality_top_level)
{
    TABLE("{\"a\": 1}", {"{\"a\": 1}", true}, {"{\"a\": 1.0}", true},
          {"{\"a\": {\"$numberLong\": \"1\"}}", true},
          {"{\"a\": {\"$numberDecimal\": \"1.0\"}}", true}, {"{\"a\": \"1\"}", false},
          {"{}", false}, {"{\"b\": 1}", false}, {"{\"a\": [0, 1]}", true},
          {"{\"a\": [[1]]}", false});
    TABLE("{\"a\": 1, \"b\": \"x\"}", {"{\"b\": \"x\", \"a\": 1}", true},
          {"{\"a\": 1, \"b\": \"y\"}", false});
    TABLE("{}", {"{}", true}, {"{\"a\": 1}", true});
}

Test(q_match, null_matches_null_missing_and_undefined)
{
    TABLE("{\"a\": null}", {"{}", true}, {"{\"a\": null}", true},
          {"{\"a\": {\"$undefined\": true}}", true}, {"{\"a\": 0}", false},
          {"{\"a\": false}", false}, {"{\"a\": [null, 1]}", true}, {"{\"a\": [1]}", false},
          {"{\"a\": []}", false});
    TABLE("{\"a.b\": null}", {"{}", true}, {"{\"a\": 1}", true}, {"{\"a\": {}}", true},
          {"{\"a\": {\"b\": 1}}", false}, {"{\"a\": [{\"c\": 1}]}", true},
          {"{\"a\": [{\"b\": 1}]}", false}, {"{\"a\": [1, 2]}", false},
          {"{\"a\": [{\"b\": 1}, {\"c\": 2}]}", true});
    TABLE("{\"a\": {\"$eq\": null}}", {"{}", true}, {"{\"a\": 3}", false});
}

Test(q_match, dotted_paths_through_documents_and_arrays)
{
    TABLE("{\"a.b\": 1}", {"{\"a\": {\"b\": 1}}", true}, {"{\"a\": {\"b\": 2}}", false},
          {"{\"a\": [{\"b\": 2}, {\"b\": 1}]}", true}, {"{\"a\": [{\"b\": [3, 1]}]}", true},
          {"{\"a\": {\"b\": [2, 1]}}", true}, {"{\"a\": 1}", false},
          {"{\"a\": [[{\"b\": 1}]]}", false}, {"{\"a\": [1, {\"b\": 1}]}", true});
    TABLE("{\"a.b.c\": \"x\"}", {"{\"a\": [{\"b\": [{\"c\": \"y\"}, {\"c\": \"x\"}]}]}", true},
          {"{\"a\": {\"b\": {\"c\": \"x\"}}}", true}, {"{\"a\": {\"b\": \"x\"}}", false});
}

Test(q_match, numeric_components_index_arrays)
{
    TABLE("{\"a.0\": 5}", {"{\"a\": [5, 6]}", true}, {"{\"a\": [6, 5]}", false},
          {"{\"a\": {\"0\": 5}}", true}, {"{\"a\": [[5]]}", false},
          {"{\"a\": [{\"0\": 5}]}", true});
    TABLE("{\"a.1.b\": 2}", {"{\"a\": [{\"b\": 1}, {\"b\": 2}]}", true},
          {"{\"a\": [{\"b\": 2}, {\"b\": 1}]}", false});
    TABLE("{\"a.0.0\": 5}", {"{\"a\": [[5, 1]]}", true}, {"{\"a\": [[1, 5]]}", false});
    /* the theater seat map of the Little Book */
    TABLE("{\"seats.1.5\": 0}", {"{\"seats\": [[1, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0]]}", true},
          {"{\"seats\": [[0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 1]]}", false});
    TABLE("{\"$and\": [{\"seats.0.0\": 0}, {\"seats.0.1\": 0}]}",
          {"{\"seats\": [[0, 0], [1, 1]]}", true}, {"{\"seats\": [[0, 1], [0, 0]]}", false});
}

Test(q_match, arrays_match_by_element_or_as_a_whole)
{
    TABLE("{\"a\": [1, 2]}", {"{\"a\": [1, 2]}", true}, {"{\"a\": [2, 1]}", false},
          {"{\"a\": [[1, 2], 3]}", true}, {"{\"a\": [1, 2, 3]}", false}, {"{\"a\": 1}", false});
    TABLE("{\"a\": []}", {"{\"a\": []}", true}, {"{\"a\": [[]]}", true}, {"{}", false});
    TABLE("{\"tags\": \"action\"}", {"{\"tags\": [\"drama\", \"action\"]}", true},
          {"{\"tags\": [\"drama\"]}", false});
}

Test(q_match, document_equality_is_field_order_sensitive)
{
    TABLE("{\"a\": {\"x\": 1, \"y\": 2}}", {"{\"a\": {\"x\": 1, \"y\": 2}}", true},
          {"{\"a\": {\"y\": 2, \"x\": 1}}", false}, {"{\"a\": {\"x\": 1, \"y\": 2, \"z\": 3}}", false},
          {"{\"a\": [{\"x\": 1, \"y\": 2}]}", true}, {"{\"a\": {\"x\": 1.0, \"y\": 2}}", true});
    TABLE("{\"a\": {\"$ref\": \"c\", \"$id\": 1}}", {"{\"a\": {\"$ref\": \"c\", \"$id\": 1}}", true});
}

Test(q_match, ne_and_nin_negate_any_element)
{
    TABLE("{\"a\": {\"$ne\": 1}}", {"{\"a\": 2}", true}, {"{\"a\": 1}", false}, {"{}", true},
          {"{\"a\": [1, 2]}", false}, {"{\"a\": [2, 3]}", true}, {"{\"a\": \"1\"}", true});
    TABLE("{\"a\": {\"$ne\": null}}", {"{}", false}, {"{\"a\": null}", false},
          {"{\"a\": 0}", true});
    TABLE("{\"items.sku\": {\"$ne\": \"s1\"}}", {"{\"items\": [{\"sku\": \"s2\"}]}", true},
          {"{\"items\": [{\"sku\": \"s2\"}, {\"sku\": \"s1\"}]}", false});
    TABLE("{\"a\": {\"$nin\": [1, 2]}}", {"{\"a\": 3}", true}, {"{\"a\": 1}", false},
          {"{}", true}, {"{\"a\": [3, 2]}", false}, {"{\"a\": [3, 4]}", true});
}

Test(q_match, comparisons_stay_within_canonical_type)
{
    TABLE("{\"a\": {\"$gt\": 5}}", {"{\"a\": 6}", true}, {"{\"a\": 5}", false},
          {"{\"a\": 5.5}", true}, {"{\"a\": {\"$numberLong\": \"6\"}}", true},
          {"{\"a\": \"6\"}", false}, {"{\"a\": [1, 10]}", true}, {"{\"a\": [1, 2]}", false},
          {"{}", false}, {"{\"a\": null}", false}, {"{\"a\": {\"$maxKey\": 1}}", false});
    TABLE("{\"a\": {\"$gte\": 5}}", {"{\"a\": 5}", true}, {"{\"a\": 4.9}", false});
    TABLE("{\"a\": {\"$lt\": 5}}", {"{\"a\": 4}", true}, {"{\"a\": null}", false},
          {"{\"a\": -1e300}", true}, {"{\"a\": \"a\"}", false});
    TABLE("{\"a\": {\"$lte\": 5}}", {"{\"a\": 5}", true}, {"{\"a\": 6}", false});
    TABLE("{\"a\": {\"$gt\": \"a\"}}", {"{\"a\": \"b\"}", true}, {"{\"a\": 5}", false},
          {"{\"a\": {\"x\": 1}}", false});
    TABLE("{\"t\": {\"$gte\": {\"$date\": {\"$numberLong\": \"1000\"}}}}",
          {"{\"t\": {\"$date\": {\"$numberLong\": \"2000\"}}}", true},
          {"{\"t\": {\"$date\": {\"$numberLong\": \"999\"}}}", false}, {"{\"t\": 5000}", false});
    /* each bound may be met by a different element */
    TABLE("{\"a\": {\"$gt\": 5, \"$lt\": 10}}", {"{\"a\": 7}", true}, {"{\"a\": [1, 20]}", true},
          {"{\"a\": 10}", false});
}

Test(q_match, null_minkey_maxkey_and_nan_comparisons)
{
    TABLE("{\"a\": {\"$gte\": null}}", {"{}", true}, {"{\"a\": null}", true},
          {"{\"a\": 1}", false});
    TABLE("{\"a\": {\"$lt\": null}}", {"{}", false}, {"{\"a\": null}", false});
    TABLE("{\"a\": {\"$gt\": {\"$minKey\": 1}}}", {"{}", true}, {"{\"a\": 1}", true},
          {"{\"a\": {\"$minKey\": 1}}", false});
    TABLE("{\"a\": {\"$lt\": {\"$maxKey\": 1}}}", {"{\"a\": \"x\"}", true}, {"{}", true});
    TABLE("{\"a\": {\"$numberDouble\": \"NaN\"}}", {"{\"a\": {\"$numberDouble\": \"NaN\"}}", true},
          {"{\"a\": 1}", false});
    TABLE("{\"a\": {\"$gte\": {\"$numberDouble\": \"NaN\"}}}",
          {"{\"a\": {\"$numberDouble\": \"NaN\"}}", true}, {"{\"a\": 1}", false});
    TABLE("{\"a\": {\"$lt\": {\"$numberDouble\": \"NaN\"}}}",
          {"{\"a\": {\"$numberDouble\": \"NaN\"}}", false},
          {"{\"a\": {\"$numberDouble\": \"-Infinity\"}}", false});
    TABLE("{\"a\": {\"$gt\": {\"$numberDouble\": \"-Infinity\"}}}",
          {"{\"a\": {\"$numberDouble\": \"NaN\"}}", false}, {"{\"a\": -1e308}", true});
}

Test(q_match, in_matches_any_listed_value)
{
    TABLE("{\"a\": {\"$in\": [1, \"x\"]}}", {"{\"a\": 1}", true}, {"{\"a\": 1.0}", true},
          {"{\"a\": \"x\"}", true}, {"{\"a\": 2}", false}, {"{\"a\": [2, 1]}", true},
          {"{}", false});
    TABLE("{\"a\": {\"$in\": [null]}}", {"{}", true}, {"{\"a\": null}", true},
          {"{\"a\": {\"$undefined\": true}}", false}, {"{\"a\": 0}", false});
    TABLE("{\"a\": {\"$in\": []}}", {"{\"a\": 1}", false}, {"{}", false});
    TABLE("{\"a\": {\"$in\": [[1, 2]]}}", {"{\"a\": [1, 2]}", true}, {"{\"a\": [1]}", false});
    TABLE("{\"categories\": {\"$in\": [\"/a\", \"/b\"]}}", {"{\"categories\": [\"/c\", \"/b\"]}", true});
}

Test(q_match, exists)
{
    TABLE("{\"a\": {\"$exists\": true}}", {"{\"a\": null}", true}, {"{}", false},
          {"{\"a\": []}", true});
    TABLE("{\"a\": {\"$exists\": 0}}", {"{}", true}, {"{\"a\": 1}", false});
    TABLE("{\"a.b\": {\"$exists\": true}}", {"{\"a\": [{\"b\": 1}]}", true},
          {"{\"a\": [1]}", false}, {"{\"a\": [{\"c\": 1}]}", false},
          {"{\"a\": {\"b\": null}}", true});
    TABLE("{\"a.b\": {\"$exists\": false}}", {"{\"a\": [1]}", true}, {"{\"a\": [{\"b\": 1}]}", false});
}

Test(q_match, and_or_nor)
{
    TABLE("{\"$and\": [{\"a\": 1}, {\"b\": 2}]}", {"{\"a\": 1, \"b\": 2}", true},
          {"{\"a\": 1}", false});
    TABLE("{\"$or\": [{\"a\": 1}, {\"b\": 2}]}", {"{\"b\": 2}", true}, {"{\"a\": 2}", false},
          {"{\"a\": 1, \"b\": 3}", true});
    TABLE("{\"$nor\": [{\"a\": 1}, {\"b\": 2}]}", {"{\"a\": 3}", true}, {"{\"a\": 1}", false},
          {"{}", true});
    TABLE("{\"x\": 1, \"$or\": [{\"$and\": [{\"a\": 1}, {\"b\": 1}]}, {\"c\": {\"$gt\": 5}}]}",
          {"{\"x\": 1, \"c\": 6}", true}, {"{\"x\": 1, \"a\": 1}", false},
          {"{\"x\": 1, \"a\": 1, \"b\": 1}", true}, {"{\"c\": 6}", false});
    TABLE("{\"$comment\": \"hi\", \"a\": 1}", {"{\"a\": 1}", true});
}

Test(q_match, not_negates_an_operator_document)
{
    TABLE("{\"a\": {\"$not\": {\"$gt\": 5}}}", {"{\"a\": 3}", true}, {"{\"a\": 6}", false},
          {"{}", true}, {"{\"a\": \"x\"}", true}, {"{\"a\": [1, 9]}", false});
    TABLE("{\"a\": {\"$not\": {\"$gt\": 1, \"$lt\": 5}}}", {"{\"a\": 3}", false},
          {"{\"a\": 7}", true});
}

Test(q_match, size_all_elem_match_type_mod)
{
    TABLE("{\"a\": {\"$size\": 2}}", {"{\"a\": [1, 2]}", true}, {"{\"a\": [1]}", false},
          {"{\"a\": 2}", false}, {"{\"a\": [[1, 2]]}", false});
    TABLE("{\"a\": {\"$size\": 1.5}}", {"{\"a\": [1]}", false});
    TABLE("{\"tags\": {\"$all\": [\"a\", \"b\"]}}", {"{\"tags\": [\"b\", \"c\", \"a\"]}", true},
          {"{\"tags\": [\"a\"]}", false}, {"{\"tags\": \"a\"}", false});
    TABLE("{\"a\": {\"$all\": []}}", {"{\"a\": []}", false});
    TABLE("{\"a\": {\"$elemMatch\": {\"x\": 1, \"y\": {\"$gt\": 1}}}}",
          {"{\"a\": [{\"x\": 1, \"y\": 0}, {\"x\": 2, \"y\": 5}]}", false},
          {"{\"a\": [{\"x\": 1, \"y\": 2}]}", true}, {"{\"a\": {\"x\": 1, \"y\": 2}}", false});
    TABLE("{\"a\": {\"$elemMatch\": {\"$gt\": 1, \"$lt\": 5}}}", {"{\"a\": [0, 9]}", false},
          {"{\"a\": [0, 3]}", true}, {"{\"a\": 3}", false});
    TABLE("{\"a\": {\"$elemMatch\": {\"$ne\": 1}}}", {"{\"a\": [1, 1]}", false},
          {"{\"a\": [1, 2]}", true});
    TABLE("{\"tags\": {\"$all\": [{\"$elemMatch\": {\"k\": \"a\"}}, {\"$elemMatch\": {\"k\": \"b\"}}]}}",
          {"{\"tags\": [{\"k\": \"b\"}, {\"k\": \"a\"}]}", true}, {"{\"tags\": [{\"k\": \"a\"}]}", false});
    TYPE_TABLE("string", 0, {"{\"a\": \"x\"}", true}, {"{\"a\": 1}", false},
          {"{\"a\": [1, \"x\"]}", true}, {"{}", false});
    TYPE_TABLE("number", 0, {"{\"a\": 1.5}", true},
          {"{\"a\": {\"$numberLong\": \"1\"}}", true}, {"{\"a\": \"1\"}", false});
    TYPE_TABLE(NULL, 10, {"{\"a\": null}", true}, {"{}", false});
    TYPE_TABLE("array", 0, {"{\"a\": [1]}", true}, {"{\"a\": 1}", false});
    TABLE("{\"a\": {\"$mod\": [4, 1]}}", {"{\"a\": 5}", true}, {"{\"a\": 5.9}", true},
          {"{\"a\": 6}", false}, {"{\"a\": \"5\"}", false}, {"{\"a\": [2, 9]}", true});
}

Test(q_match, parse_errors_carry_mongodb_codes)
{
    parse_error("{\"a\": {\"$foo\": 1}}", MD_CODE_BAD_VALUE, "unknown operator: $foo");
    parse_error("{\"a\": {\"$gt\": 1, \"b\": 2}}", MD_CODE_BAD_VALUE, "unknown operator: b");
    parse_error("{\"$x\": 1}", MD_CODE_BAD_VALUE, "unknown top level operator: $x");
    parse_error("{\"a\": {\"$in\": 5}}", MD_CODE_BAD_VALUE, "$in needs an array");
    parse_error("{\"a\": {\"$nin\": {\"x\": 1}}}", MD_CODE_BAD_VALUE, "$nin needs an array");
    parse_error("{\"a\": {\"$in\": [{\"$gt\": 1}]}}", MD_CODE_BAD_VALUE, "cannot nest $ under $in");
    parse_error("{\"$and\": []}", MD_CODE_BAD_VALUE, "$and/$or/$nor must be a nonempty array");
    parse_error("{\"$or\": 5}", MD_CODE_BAD_VALUE, "$and/$or/$nor must be a nonempty array");
    parse_error("{\"$nor\": {\"a\": 1}}", MD_CODE_BAD_VALUE, "$and/$or/$nor must be a nonempty array");
    parse_error("{\"$or\": [1]}", MD_CODE_BAD_VALUE, "$or/$and/$nor entries need to be full objects");
    parse_error("{\"a\": {\"$gt\": {\"$regularExpression\": {\"pattern\": \"x\", \"options\": \"\"}}}}",
                MD_CODE_BAD_VALUE, "Can't have RegEx as arg to predicate over field 'a'.");
    parse_error("{\"a\": {\"$eq\": {\"$undefined\": true}}}", MD_CODE_BAD_VALUE,
                "cannot compare to undefined");
    parse_error("{\"a\": {\"$not\": 5}}", MD_CODE_BAD_VALUE, "$not needs a regex or a document");
    parse_error("{\"a\": {\"$not\": {}}}", MD_CODE_BAD_VALUE, "$not cannot be empty");
    parse_error("{\"a\": {\"$not\": {\"b\": 1}}}", MD_CODE_BAD_VALUE, "unknown operator: b");
    parse_error("{\"a\": {\"$size\": \"x\"}}", MD_CODE_BAD_VALUE, "$size needs a number");
    parse_error("{\"a\": {\"$size\": -1}}", MD_CODE_BAD_VALUE, "$size may not be negative");
    parse_error("{\"a\": {\"$mod\": [0, 1]}}", MD_CODE_BAD_VALUE, "divisor cannot be 0");
    parse_error("{\"a\": {\"$mod\": [1]}}", MD_CODE_BAD_VALUE, "malformed mod, not enough elements");
    parse_error("{\"a\": {\"$all\": 1}}", MD_CODE_BAD_VALUE, "$all needs an array");
    parse_error("{\"a\": {\"$elemMatch\": 1}}", MD_CODE_BAD_VALUE, "$elemMatch needs an Object");
    parse_error("{\"a\": {\"$where\": 1}}", MD_CODE_BAD_VALUE, "$where cannot be applied to a field");
    parse_error("{\"a\": {\"$regularExpression\": {\"pattern\": \"(\", \"options\": \"\"}}}",
                MD_CODE_BAD_VALUE, NULL);
    parse_error("{\"$where\": 5}", MD_CODE_BAD_VALUE, "$where got bad type");
    parse_error("{\"a\": {\"$elemMatch\": {\"$where\": \"true\"}}}", MD_CODE_BAD_VALUE,
                "$where can only be applied to the top-level document");
    parse_error("{\"$or\": [{\"a\": {\"$bad\": 1}}]}", MD_CODE_BAD_VALUE, "unknown operator: $bad");
    bson_t *f = type_filter("foo", 0);
    parse_error_bson(f, "$type foo", MD_CODE_BAD_VALUE, "Unknown type name alias: foo");
    bson_destroy(f);
    f = type_filter(NULL, 99);
    parse_error_bson(f, "$type 99", MD_CODE_BAD_VALUE, "Invalid numerical type code: 99");
    bson_destroy(f);
}

static void expect_pos(const char *filter, const char *doc, bool match, const char *pos)
{
    bson_t *f = J(filter), *d = J(doc);
    q_matcher *m;
    char got[32] = "junk";
    cr_assert_eq(q_matcher_new(f, &m, NULL), 0);
    cr_assert_eq(q_matcher_matches_pos(m, d, got, sizeof got), match, "%s on %s", filter, doc);
    cr_assert_str_eq(got, pos, "%s on %s", filter, doc);
    q_matcher_destroy(m);
    bson_destroy(f);
    bson_destroy(d);
}

Test(q_match, positional_offset_of_the_matching_element)
{
    expect_pos("{\"a.b\": 2}", "{\"a\": [{\"b\": 1}, {\"b\": 2}]}", true, "1");
    expect_pos("{\"a\": 7}", "{\"a\": [5, 6, 7]}", true, "2");
    expect_pos("{\"a\": 5}", "{\"a\": 5}", true, "");
    expect_pos("{\"a\": 9}", "{\"a\": [5]}", false, "");
    expect_pos("{\"a.b\": 2}", "{\"a\": [{\"b\": [1, 2]}]}", true, "0"); /* outermost array */
    expect_pos("{\"x\": 1, \"a.b\": {\"$gt\": 1}}", "{\"x\": 1, \"a\": [{\"b\": 0}, {\"b\": 3}]}",
               true, "1");
    expect_pos("{\"$or\": [{\"a\": 6}]}", "{\"a\": [5, 6]}", true, "");
    expect_pos("{\"products\": {\"$elemMatch\": {\"_id\": 2, \"qty\": {\"$gt\": 0}}}}",
               "{\"products\": [{\"_id\": 1, \"qty\": 1}, {\"_id\": 2, \"qty\": 0}, "
               "{\"_id\": 2, \"qty\": 4}]}", true, "2");
    expect_pos("{\"a\": {\"$elemMatch\": {\"$gt\": 5}}}", "{\"a\": [1, 9]}", true, "1");
}

static void expect_seed(const char *filter, const char *want)
{
    bson_t *f = J(filter), out = BSON_INITIALIZER;
    md_error err;
    int rc = q_matcher_upsert_seed(f, &out, &err);
    cr_assert_eq(rc, 0, "%s: %s", filter, err.message);
    bson_t *w = J(want);
    char *got = bson_as_relaxed_extended_json(&out, NULL);
    cr_assert(bson_equal(&out, w), "%s gave %s, want %s", filter, got, want);
    bson_free(got);
    bson_destroy(w);
    bson_destroy(&out);
    bson_destroy(f);
}

static void seed_error(const char *filter, int code, const char *msg)
{
    bson_t *f = J(filter), out = BSON_INITIALIZER;
    md_error err;
    cr_assert_neq(q_matcher_upsert_seed(f, &out, &err), 0);
    cr_assert_eq(err.code, code);
    if (msg)
        cr_assert_str_eq(err.message, msg);
    bson_destroy(&out);
    bson_destroy(f);
}

Test(q_match, upsert_seed_takes_equalities_in_filter_order)
{
    expect_seed("{\"_id\": 1, \"a\": 2, \"b.c\": 3, \"d\": {\"$gt\": 1}, \"e\": {\"$eq\": 4}}",
                "{\"_id\": 1, \"a\": 2, \"b\": {\"c\": 3}, \"e\": 4}");
    expect_seed("{\"x\": 1, \"_id\": 5}", "{\"_id\": 5, \"x\": 1}");
    expect_seed("{\"$and\": [{\"a\": 1}, {\"b.c\": 2}], \"b.d\": 3}",
                "{\"a\": 1, \"b\": {\"c\": 2, \"d\": 3}}");
    expect_seed("{\"$or\": [{\"a\": 1}], \"n\": {\"$in\": [1]}}", "{}");
    expect_seed("{\"m\": {\"date\": 1, \"site\": \"s\"}, \"a.0\": 7}",
                "{\"m\": {\"date\": 1, \"site\": \"s\"}, \"a\": {\"0\": 7}}");
    expect_seed("{\"a\": {\"$eq\": 1, \"$gt\": 0}}", "{\"a\": 1}");
    expect_seed("{\"a\": {\"$not\": {\"$eq\": 1}}}", "{}");
}

Test(q_match, upsert_seed_conflicts)
{
    seed_error("{\"a\": 1, \"a.b\": 2}", MD_CODE_NOT_SINGLE_VALUE_FIELD,
               "cannot infer query fields to set, both paths 'a.b' and 'a' are matched");
    seed_error("{\"$and\": [{\"a\": 1}, {\"a\": 2}]}", MD_CODE_NOT_SINGLE_VALUE_FIELD,
               "cannot infer query fields to set, path 'a' is matched twice");
    seed_error("{\"a\": {\"$bad\": 1}}", MD_CODE_BAD_VALUE, "unknown operator: $bad");
}

/* ---- robustness ------------------------------------------------------------- */

static const char *fuzz_keys[] = {"a", "b", "a.b", "a.0", "$gt", "$in", "$not", "$and",
                                  "$or", "$nor", "$elemMatch", "$size", "$mod", "$exists",
                                  "$ne", "$nin", "$all", "$eq", "_id", "0", "", "$comment"};

static const q_fuzz fuzz = {fuzz_keys, sizeof fuzz_keys / sizeof *fuzz_keys, "a"};

static void fuzz_value(bson_t *d, const char *k, unsigned *s, int depth)
{
    q_fuzz_value(&fuzz, d, k, s, depth);
}

Test(q_match, random_filters_parse_or_fail_with_a_code)
{
    unsigned seed = 7;
    int parsed = 0;
    size_t nk = sizeof fuzz_keys / sizeof *fuzz_keys;
    for (int iter = 0; iter < 20000; iter++) {
        bson_t f = BSON_INITIALIZER, doc = BSON_INITIALIZER, s = BSON_INITIALIZER;
        for (unsigned i = lcg(&seed) % 4; i > 0; i--)
            fuzz_value(&f, fuzz_keys[lcg(&seed) % nk], &seed, 0);
        for (unsigned i = lcg(&seed) % 4; i > 0; i--)
            fuzz_value(&doc, fuzz_keys[lcg(&seed) % nk], &seed, 0);
        q_matcher *m;
        md_error err;
        char pos[32];
        md_error_clear(&err);
        if (q_matcher_new(&f, &m, &err)) {
            cr_assert(err.code != 0 && err.message[0]);
        } else {
            parsed++;
            bool a = q_matcher_matches(m, &doc);
            cr_assert_eq(q_matcher_matches_pos(m, &doc, pos, sizeof pos), a);
            q_matcher_destroy(m);
            if (!q_matcher_upsert_seed(&f, &s, &err))
                cr_assert(bson_validate(&s, BSON_VALIDATE_NONE, NULL));
        }
        bson_destroy(&f);
        bson_destroy(&doc);
        bson_destroy(&s);
    }
    cr_assert_gt(parsed, 1000);
}
