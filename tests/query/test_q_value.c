/*
 * test_q_value.c -- q_value_cmp (MongoDB's cross-type order and value
 * comparisons), the path helpers and BSONElement::toString renderings.
 */
#include <criterion/criterion.h>
#include <math.h>
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

/* Compare the values of field "v" of two JSON documents. */
static int cmpj(const char *a, const char *b)
{
    bson_t *x = J(a), *y = J(b);
    bson_iter_t i, j;
    cr_assert(bson_iter_init_find(&i, x, "v") && bson_iter_init_find(&j, y, "v"));
    int c = q_value_cmp(&i, &j);
    int d = q_value_cmp(&j, &i);
    cr_assert_eq(c, -d, "antisymmetry %s vs %s", a, b);
    bson_destroy(x);
    bson_destroy(y);
    return c;
}

Test(q_value, canonical_type_order)
{
    const char *order[] = {
        "{\"v\": {\"$minKey\": 1}}",
        "{\"v\": null}",
        "{\"v\": 5}",
        "{\"v\": \"s\"}",
        "{\"v\": {\"a\": 1}}",
        "{\"v\": [1]}",
        "{\"v\": {\"$binary\": {\"base64\": \"AA==\", \"subType\": \"00\"}}}",
        "{\"v\": {\"$oid\": \"000000000000000000000001\"}}",
        "{\"v\": false}",
        "{\"v\": {\"$date\": {\"$numberLong\": \"0\"}}}",
        "{\"v\": {\"$timestamp\": {\"t\": 1, \"i\": 1}}}",
        "{\"v\": {\"$regularExpression\": {\"pattern\": \"a\", \"options\": \"\"}}}",
        "{\"v\": {\"$maxKey\": 1}}",
    };
    size_t n = sizeof order / sizeof order[0];
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            int c = cmpj(order[i], order[j]);
            cr_assert_eq(c, i < j ? -1 : i > j ? 1 : 0, "%s vs %s", order[i], order[j]);
        }
    cr_assert_lt(q_type_rank(BSON_TYPE_MINKEY), q_type_rank(BSON_TYPE_NULL));
    cr_assert_eq(q_type_rank(BSON_TYPE_INT32), q_type_rank(BSON_TYPE_DECIMAL128));
    cr_assert_eq(q_type_rank(BSON_TYPE_UTF8), q_type_rank(BSON_TYPE_SYMBOL));
    cr_assert_lt(q_type_rank(BSON_TYPE_UNDEFINED), q_type_rank(BSON_TYPE_NULL));
}

Test(q_value, numbers_compare_by_value_across_types)
{
    cr_assert_eq(cmpj("{\"v\": 42}", "{\"v\": {\"$numberLong\": \"42\"}}"), 0);
    cr_assert_eq(cmpj("{\"v\": 42}", "{\"v\": 42.0}"), 0);
    cr_assert_eq(cmpj("{\"v\": 42}", "{\"v\": {\"$numberDecimal\": \"42.000\"}}"), 0);
    cr_assert_eq(cmpj("{\"v\": 1}", "{\"v\": 1.5}"), -1);
    cr_assert_eq(cmpj("{\"v\": -3}", "{\"v\": {\"$numberDecimal\": \"-2.5\"}}"), -1);
    /* 2^53 + 1 is not a double: the int64 is exactly one more */
    cr_assert_eq(cmpj("{\"v\": {\"$numberLong\": \"9007199254740993\"}}",
                      "{\"v\": 9007199254740992.0}"), 1);
    cr_assert_eq(cmpj("{\"v\": {\"$numberLong\": \"9223372036854775807\"}}",
                      "{\"v\": 9223372036854775808.0}"), -1);
    cr_assert_eq(cmpj("{\"v\": -0.0}", "{\"v\": 0}"), 0);
}

Test(q_value, nan_is_lowest_number_and_equal_to_itself)
{
    const char *nan = "{\"v\": {\"$numberDouble\": \"NaN\"}}";
    cr_assert_eq(cmpj(nan, nan), 0);
    cr_assert_eq(cmpj(nan, "{\"v\": {\"$numberDouble\": \"-Infinity\"}}"), -1);
    cr_assert_eq(cmpj(nan, "{\"v\": {\"$numberDecimal\": \"NaN\"}}"), 0);
    cr_assert_eq(cmpj(nan, "{\"v\": null}"), 1);
    cr_assert_eq(cmpj("{\"v\": {\"$numberDouble\": \"Infinity\"}}",
                      "{\"v\": {\"$numberLong\": \"9223372036854775807\"}}"), 1);
}

Test(q_value, strings_compare_as_bytes_then_length)
{
    cr_assert_eq(cmpj("{\"v\": \"B\"}", "{\"v\": \"a\"}"), -1);
    cr_assert_eq(cmpj("{\"v\": \"a\"}", "{\"v\": \"ab\"}"), -1);
    cr_assert_eq(cmpj("{\"v\": \"a\\u0000\"}", "{\"v\": \"a\"}"), 1);
    cr_assert_eq(cmpj("{\"v\": \"a\\u0000b\"}", "{\"v\": \"a\\u0001\"}"), -1);
    cr_assert_eq(cmpj("{\"v\": \"\\u00e9\"}", "{\"v\": \"z\"}"), 1); /* UTF-8 0xC3 > 'z' */
    cr_assert_eq(cmpj("{\"v\": {\"$symbol\": \"abc\"}}", "{\"v\": \"abc\"}"), 0);
}

Test(q_value, documents_compare_type_then_name_then_value)
{
    cr_assert_eq(cmpj("{\"v\": {\"a\": 1, \"b\": 2}}", "{\"v\": {\"a\": 1, \"b\": 2}}"), 0);
    cr_assert_neq(cmpj("{\"v\": {\"a\": 1, \"b\": 2}}", "{\"v\": {\"b\": 2, \"a\": 1}}"), 0);
    cr_assert_eq(cmpj("{\"v\": {\"b\": 1}}", "{\"v\": {\"a\": \"x\"}}"), -1); /* type first */
    cr_assert_eq(cmpj("{\"v\": {\"a\": 5}}", "{\"v\": {\"b\": 1}}"), -1);   /* then name */
    cr_assert_eq(cmpj("{\"v\": {\"a\": 1}}", "{\"v\": {\"a\": 1, \"b\": 1}}"), -1);
    cr_assert_eq(cmpj("{\"v\": {}}", "{\"v\": {\"a\": {\"$minKey\": 1}}}"), -1);
    cr_assert_eq(cmpj("{\"v\": {\"a\": 1}}", "{\"v\": {\"a\": 1.0}}"), 0);
}

Test(q_value, arrays_compare_element_wise)
{
    cr_assert_eq(cmpj("{\"v\": [1, 2]}", "{\"v\": [1, 3]}"), -1);
    cr_assert_eq(cmpj("{\"v\": [1]}", "{\"v\": [1, 0]}"), -1);
    cr_assert_eq(cmpj("{\"v\": []}", "{\"v\": [{\"$minKey\": 1}]}"), -1);
    cr_assert_eq(cmpj("{\"v\": [2]}", "{\"v\": [1, 5]}"), 1);
    cr_assert_eq(cmpj("{\"v\": [[1], 2]}", "{\"v\": [[1], 2]}"), 0);
}

Test(q_value, bindata_by_length_then_subtype_then_bytes)
{
    /* "/w==" is FF, "AAA=" is 00 00 */
    cr_assert_eq(cmpj("{\"v\": {\"$binary\": {\"base64\": \"/w==\", \"subType\": \"80\"}}}",
                      "{\"v\": {\"$binary\": {\"base64\": \"AAA=\", \"subType\": \"00\"}}}"), -1);
    cr_assert_eq(cmpj("{\"v\": {\"$binary\": {\"base64\": \"/w==\", \"subType\": \"00\"}}}",
                      "{\"v\": {\"$binary\": {\"base64\": \"AA==\", \"subType\": \"05\"}}}"), -1);
    cr_assert_eq(cmpj("{\"v\": {\"$binary\": {\"base64\": \"/w==\", \"subType\": \"00\"}}}",
                      "{\"v\": {\"$binary\": {\"base64\": \"AA==\", \"subType\": \"00\"}}}"), 1);
}

Test(q_value, dates_signed_timestamps_unsigned_bools)
{
    cr_assert_eq(cmpj("{\"v\": {\"$date\": {\"$numberLong\": \"-1\"}}}",
                      "{\"v\": {\"$date\": {\"$numberLong\": \"0\"}}}"), -1);
    cr_assert_eq(cmpj("{\"v\": {\"$timestamp\": {\"t\": 4294967295, \"i\": 0}}}",
                      "{\"v\": {\"$timestamp\": {\"t\": 1, \"i\": 9}}}"), 1);
    cr_assert_eq(cmpj("{\"v\": {\"$timestamp\": {\"t\": 1, \"i\": 2}}}",
                      "{\"v\": {\"$timestamp\": {\"t\": 1, \"i\": 9}}}"), -1);
    cr_assert_eq(cmpj("{\"v\": false}", "{\"v\": true}"), -1);
    cr_assert_eq(cmpj("{\"v\": {\"$regularExpression\": {\"pattern\": \"a\", \"options\": \"i\"}}}",
                      "{\"v\": {\"$regularExpression\": {\"pattern\": \"a\", \"options\": \"\"}}}"),
                 1);
}

Test(q_value, path_helpers)
{
    q_path p;
    cr_assert(q_path_init(&p, "a.b.12", -1));
    cr_assert_eq(p.n, 3);
    cr_assert_str_eq(p.part[2], "12");
    q_buf b;
    q_buf_init(&b);
    q_path_join(&b, &p, 1, 3);
    cr_assert_str_eq(q_buf_cstr(&b), "b.12");
    q_buf_cleanup(&b);
    q_path_cleanup(&p);
    cr_assert_not(q_path_init(&p, "a..b", -1));
    cr_assert_not(q_path_init(&p, "", -1));
    cr_assert_not(q_path_init(&p, "a.", -1));
    cr_assert(q_all_digits("01"));
    cr_assert_not(q_all_digits("1a"));
    cr_assert_not(q_all_digits(""));
}

Test(q_value, dotted_or_array_stops_at_arrays)
{
    bson_t *d = J("{\"a\": {\"b\": [{\"c\": 1}], \"s\": 5}}");
    q_path p;
    bson_iter_t e;
    size_t stop;
    cr_assert(q_path_init(&p, "a.b.c", -1));
    cr_assert(q_dotted_or_array(bson_get_data(d), d->len, &p, 0, &e, &stop));
    cr_assert(BSON_ITER_HOLDS_ARRAY(&e));
    cr_assert_eq(stop, 1);
    q_path_cleanup(&p);
    cr_assert(q_path_init(&p, "a.s.x", -1));
    cr_assert_not(q_dotted_or_array(bson_get_data(d), d->len, &p, 0, &e, &stop));
    q_path_cleanup(&p);
    bson_destroy(d);
}

static char *render(const char *json)
{
    bson_t *d = J(json);
    q_buf b;
    q_buf_init(&b);
    q_render_doc(&b, bson_get_data(d), d->len, false);
    char *s = bson_strdup(q_buf_cstr(&b));
    q_buf_cleanup(&b);
    bson_destroy(d);
    return s;
}

static void assert_render(const char *json, const char *want)
{
    char *s = render(json);
    cr_assert_str_eq(s, want, "%s", json);
    bson_free(s);
}

Test(q_value, renders_like_bson_element_to_string)
{
    assert_render("{\"a\": 1, \"b\": \"x\"}", "{ a: 1, b: \"x\" }");
    assert_render("{}", "{}");
    assert_render("{\"a\": [1, 2], \"e\": [], \"o\": {}}", "{ a: [ 1, 2 ], e: [], o: {} }");
    assert_render("{\"d\": 1.0, \"f\": 1.5, \"g\": 1e20}", "{ d: 1.0, f: 1.5, g: 1e+20.0 }");
    assert_render("{\"l\": {\"$numberLong\": \"5\"}, \"m\": {\"$numberDecimal\": \"1.50\"}}",
                  "{ l: 5, m: 1.50 }");
    assert_render("{\"_id\": {\"$oid\": \"5d45aa393f559e4e1a7c6a5d\"}}",
                  "{ _id: ObjectId('5d45aa393f559e4e1a7c6a5d') }");
    assert_render("{\"t\": {\"$date\": {\"$numberLong\": \"1000\"}}, \"n\": null, \"b\": true}",
                  "{ t: new Date(1000), n: null, b: true }");
    assert_render("{\"r\": {\"$regularExpression\": {\"pattern\": \"^a\", \"options\": \"i\"}}}",
                  "{ r: /^a/i }");
    assert_render("{\"k\": {\"$minKey\": 1}, \"x\": {\"$maxKey\": 1}}", "{ k: MinKey, x: MaxKey }");
    assert_render("{\"ts\": {\"$timestamp\": {\"t\": 2, \"i\": 3}}}", "{ ts: Timestamp 2000|3 }");
    assert_render("{\"bin\": {\"$binary\": {\"base64\": \"AP8=\", \"subType\": \"00\"}}}",
                  "{ bin: BinData(0, 00FF) }");
}

Test(q_value, long_strings_are_cut_at_150_bytes)
{
    char json[512], want[512];
    char s[200];
    memset(s, 'x', 170);
    s[170] = '\0';
    snprintf(json, sizeof json, "{\"s\": \"%s\"}", s);
    s[150] = '\0';
    snprintf(want, sizeof want, "{ s: \"%s...\" }", s);
    assert_render(json, want);
}

Test(q_value, binary_equal_and_number_helpers)
{
    bson_t *d = J("{\"a\": 1, \"b\": 1.0, \"c\": 1, \"x\": {\"$numberDecimal\": \"2.5\"}}");
    bson_iter_t a, b, c, x;
    bson_iter_init_find(&a, d, "a");
    bson_iter_init_find(&b, d, "b");
    bson_iter_init_find(&c, d, "c");
    bson_iter_init_find(&x, d, "x");
    cr_assert(q_value_binary_equal(&a, &c));
    cr_assert_not(q_value_binary_equal(&a, &b));
    cr_assert_eq(q_value_cmp(&a, &b), 0);
    cr_assert(q_number_ld(&x) == 2.5L);
    cr_assert_eq(q_ld_cmp(NAN, NAN), 0);
    cr_assert_eq(q_ld_cmp(NAN, -INFINITY), -1);
    cr_assert_str_eq(q_type_name(BSON_TYPE_UTF8), "string");
    cr_assert_str_eq(q_type_name(BSON_TYPE_OID), "objectId");
    bson_destroy(d);
}
