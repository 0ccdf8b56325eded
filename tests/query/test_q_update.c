/*
 * test_q_update.c -- update operators one by one, field order, _id
 * immutability, parse and apply errors with MongoDB's codes and messages,
 * replacements, the positional operator, and a property test that applying
 * the damage list to the old bytes yields the new document.
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

/* Apply update to doc; compare with want (byte-exact, so order and types count). */
static void upd_full(const char *update, const char *doc, bool inserting, const char *pos,
                     const char *want, bool want_changed)
{
    bson_t *u = J(update), *d = J(doc), *w = J(want), out;
    q_update *q;
    md_error err;
    bool changed;
    cr_assert_eq(q_update_new(u, &q, &err), 0, "%s: %s", update, err.message);
    int rc = q_update_apply_pos(q, d, pos, inserting, &out, &changed, NULL, &err);
    cr_assert_eq(rc, 0, "%s on %s: %s", update, doc, err.message);
    char *got = bson_as_canonical_extended_json(&out, NULL);
    cr_assert(out.len == w->len && !memcmp(bson_get_data(&out), bson_get_data(w), w->len),
              "%s on %s gave %s, want %s", update, doc, got, want);
    cr_assert_eq(changed, want_changed, "%s on %s: changed", update, doc);
    bson_free(got);
    bson_destroy(&out);
    q_update_destroy(q);
    bson_destroy(u);
    bson_destroy(d);
    bson_destroy(w);
}

static void upd(const char *update, const char *doc, const char *want)
{
    upd_full(update, doc, false, NULL, want, strcmp(doc, want) != 0);
}

static void parse_err(const char *update, int code, const char *msg)
{
    bson_t *u = J(update);
    q_update *q = (q_update *)1;
    md_error err;
    cr_assert_neq(q_update_new(u, &q, &err), 0, "%s should not parse", update);
    cr_assert_null(q);
    cr_assert_eq(err.code, code, "%s: %d %s", update, err.code, err.message);
    if (msg)
        cr_assert_str_eq(err.message, msg, "%s", update);
    bson_destroy(u);
}

static void apply_err_pos(const char *update, const char *doc, const char *pos, int code,
                          const char *msg)
{
    bson_t *u = J(update), *d = J(doc), out;
    q_update *q;
    md_error err;
    bool changed = true;
    cr_assert_eq(q_update_new(u, &q, &err), 0, "%s: %s", update, err.message);
    int rc = q_update_apply_pos(q, d, pos, false, &out, &changed, NULL, &err);
    cr_assert_neq(rc, 0, "%s on %s should fail", update, doc);
    cr_assert_eq(err.code, code, "%s on %s: %d %s", update, doc, err.code, err.message);
    if (msg)
        cr_assert_str_eq(err.message, msg, "%s on %s", update, doc);
    cr_assert_eq(out.len, 5, "out is left empty");
    cr_assert_not(changed);
    bson_destroy(&out);
    q_update_destroy(q);
    bson_destroy(u);
    bson_destroy(d);
}

static void apply_err(const char *update, const char *doc, int code, const char *msg)
{
    apply_err_pos(update, doc, NULL, code, msg);
}

Test(q_update, set_top_level_keeps_order_and_appends)
{
    upd("{\"$set\": {\"a\": 5}}", "{\"_id\": 1, \"a\": 1, \"b\": 2}",
        "{\"_id\": 1, \"a\": 5, \"b\": 2}");
    upd("{\"$set\": {\"c\": 3}}", "{\"_id\": 1, \"a\": 1, \"b\": 2}",
        "{\"_id\": 1, \"a\": 1, \"b\": 2, \"c\": 3}");
    upd("{\"$set\": {\"b\": \"x\", \"a\": [1]}}", "{\"b\": 1, \"a\": 2}",
        "{\"b\": \"x\", \"a\": [1]}");
    /* new fields of one update are created in name order, as 3.6 does */
    upd("{\"$set\": {\"z\": 1, \"y\": 2}}", "{\"_id\": 1}", "{\"_id\": 1, \"y\": 2, \"z\": 1}");
    upd("{\"$set\": {\"a\": {\"x\": 1}}}", "{\"a\": 5}", "{\"a\": {\"x\": 1}}");
}

Test(q_update, set_same_value_is_no_change_but_type_counts)
{
    upd_full("{\"$set\": {\"a\": 1}}", "{\"a\": 1}", false, NULL, "{\"a\": 1}", false);
    upd_full("{\"$set\": {\"a\": 1.0}}", "{\"a\": 1}", false, NULL, "{\"a\": 1.0}", true);
    upd_full("{\"$set\": {\"a\": {\"b\": 1}}}", "{\"a\": {\"b\": 1}}", false, NULL,
             "{\"a\": {\"b\": 1}}", false);
}

Test(q_update, set_dotted_paths_create_documents_and_index_arrays)
{
    upd("{\"$set\": {\"x.y.z\": 1}}", "{\"_id\": 1}", "{\"_id\": 1, \"x\": {\"y\": {\"z\": 1}}}");
    upd("{\"$set\": {\"a.b\": 5}}", "{\"a\": {\"b\": 1, \"c\": 2}}", "{\"a\": {\"b\": 5, \"c\": 2}}");
    upd("{\"$set\": {\"a.d\": 5}}", "{\"a\": {\"b\": 1}, \"z\": 0}",
        "{\"a\": {\"b\": 1, \"d\": 5}, \"z\": 0}");
    upd("{\"$set\": {\"a.1\": 9}}", "{\"a\": [1, 2, 3]}", "{\"a\": [1, 9, 3]}");
    upd("{\"$set\": {\"a.4\": 9}}", "{\"a\": [1]}", "{\"a\": [1, null, null, null, 9]}");
    upd("{\"$set\": {\"a.1.b\": 5}}", "{\"a\": [{\"b\": 1}, {\"b\": 2}]}",
        "{\"a\": [{\"b\": 1}, {\"b\": 5}]}");
    upd("{\"$set\": {\"a.0\": 1}}", "{}", "{\"a\": {\"0\": 1}}");
    upd("{\"$set\": {\"seats.1.5\": 1}}", "{\"seats\": [[0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]]}",
        "{\"seats\": [[0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 1]]}");
    upd("{\"$set\": {\"a.2.x\": 1}}", "{\"a\": []}", "{\"a\": [null, null, {\"x\": 1}]}");
    upd("{\"$set\": {\"a.3\": 3, \"a.1\": 1}}", "{\"a\": [0]}", "{\"a\": [0, 1, null, 3]}");
    upd("{\"$set\": {\"a.01\": 7}}", "{\"a\": [0, 0]}", "{\"a\": [0, 7]}");
    /* "10" sorts before "9": it pads first, then $inc meets a padding null */
    apply_err("{\"$inc\": {\"a.10\": 1, \"a.9\": 1}}", "{\"_id\": 1, \"a\": []}",
              MD_CODE_TYPE_MISMATCH,
              "Cannot apply $inc to a value of non-numeric type. {_id: 1} has the field '9' of "
              "non-numeric type null");
    upd("{\"$set\": {\"a.10\": 1, \"a.9\": 2}}", "{\"a\": []}",
        "{\"a\": [null, null, null, null, null, null, null, null, null, 2, 1]}");
}

Test(q_update, set_through_a_non_document_is_path_not_viable)
{
    apply_err("{\"$set\": {\"a.b\": 1}}", "{\"_id\": 1, \"a\": 1}", MD_CODE_PATH_NOT_VIABLE,
              "Cannot create field 'b' in element {a: 1}");
    apply_err("{\"$set\": {\"a.x\": 1}}", "{\"a\": [1, 2]}", MD_CODE_PATH_NOT_VIABLE,
              "Cannot create field 'x' in element {a: [ 1, 2 ]}");
    apply_err("{\"$set\": {\"x.a.b\": 1}}", "{\"x\": {\"a\": \"s\"}}", MD_CODE_PATH_NOT_VIABLE,
              "Cannot create field 'b' in element {a: \"s\"}");
    apply_err("{\"$set\": {\"a.0.b\": 1}}", "{\"a\": [5]}", MD_CODE_PATH_NOT_VIABLE,
              "Cannot create field 'b' in element {0: 5}");
    /* $unset through a scalar just does nothing */
    upd("{\"$unset\": {\"a.b\": 1}}", "{\"a\": 1}", "{\"a\": 1}");
}

Test(q_update, set_refuses_dollar_field_names_for_storage)
{
    apply_err("{\"$set\": {\"a\": {\"$x\": 1}}}", "{}", MD_CODE_DOLLAR_PREFIXED_FIELD_NAME,
              "The dollar ($) prefixed field '$x' in 'a.$x' is not valid for storage.");
    apply_err("{\"$set\": {\"a.$b\": 1}}", "{\"a\": {}}", MD_CODE_DOLLAR_PREFIXED_FIELD_NAME,
              "The dollar ($) prefixed field '$b' in 'a.$b' is not valid for storage.");
    upd("{\"$set\": {\"r\": {\"$ref\": \"c\", \"$id\": 1}}}", "{}",
        "{\"r\": {\"$ref\": \"c\", \"$id\": 1}}");
}

Test(q_update, unset)
{
    upd("{\"$unset\": {\"a\": \"\"}}", "{\"a\": 1, \"b\": 2}", "{\"b\": 2}");
    upd_full("{\"$unset\": {\"z\": 1}}", "{\"a\": 1}", false, NULL, "{\"a\": 1}", false);
    upd("{\"$unset\": {\"a.b\": 1}}", "{\"a\": {\"b\": 1, \"c\": 2}}", "{\"a\": {\"c\": 2}}");
    upd("{\"$unset\": {\"a.0\": 1}}", "{\"a\": [1, 2]}", "{\"a\": [null, 2]}");
    upd("{\"$unset\": {\"a.5\": 1}}", "{\"a\": [1, 2]}", "{\"a\": [1, 2]}");
    upd("{\"$unset\": {\"x.y\": 1}}", "{}", "{}");
}

Test(q_update, inc_types_and_promotion)
{
    upd("{\"$inc\": {\"a\": 2}}", "{\"a\": 1}", "{\"a\": 3}");
    upd("{\"$inc\": {\"a\": 1}}", "{\"a\": 2147483647}",
        "{\"a\": {\"$numberLong\": \"2147483648\"}}");
    upd("{\"$inc\": {\"a\": -1}}", "{\"a\": -2147483648}",
        "{\"a\": {\"$numberLong\": \"-2147483649\"}}");
    upd("{\"$inc\": {\"a\": 0.5}}", "{\"a\": 1}", "{\"a\": 1.5}");
    upd("{\"$inc\": {\"a\": 1}}", "{\"a\": 1.5}", "{\"a\": 2.5}");
    upd("{\"$inc\": {\"a\": 1}}", "{\"a\": {\"$numberLong\": \"5\"}}",
        "{\"a\": {\"$numberLong\": \"6\"}}");
    upd("{\"$inc\": {\"a\": {\"$numberLong\": \"1\"}}}", "{\"a\": 5}",
        "{\"a\": {\"$numberLong\": \"6\"}}");
    upd("{\"$inc\": {\"a\": 5}}", "{\"x\": 1}", "{\"x\": 1, \"a\": 5}");
    upd("{\"$inc\": {\"m.3\": 1}}", "{\"m\": {\"3\": 7}}", "{\"m\": {\"3\": 8}}");
    upd("{\"$inc\": {\"h.10.5\": 2}}", "{}", "{\"h\": {\"10\": {\"5\": 2}}}");
    upd_full("{\"$inc\": {\"a\": 0}}", "{\"a\": 7}", false, NULL, "{\"a\": 7}", false);
    upd("{\"$inc\": {\"a\": 0}}", "{}", "{\"a\": 0}");
}

Test(q_update, inc_decimal)
{
    upd("{\"$inc\": {\"a\": {\"$numberDecimal\": \"2.25\"}}}", "{\"a\": {\"$numberDecimal\": \"1.10\"}}",
        "{\"a\": {\"$numberDecimal\": \"3.35\"}}");
    upd("{\"$inc\": {\"a\": 1}}", "{\"a\": {\"$numberDecimal\": \"1.5\"}}",
        "{\"a\": {\"$numberDecimal\": \"2.5\"}}");
    upd("{\"$inc\": {\"a\": {\"$numberDecimal\": \"0.2\"}}}", "{\"a\": 0.1}",
        "{\"a\": {\"$numberDecimal\": \"0.300000000000000\"}}");
    upd("{\"$mul\": {\"a\": {\"$numberDecimal\": \"1.5\"}}}", "{\"a\": {\"$numberLong\": \"4\"}}",
        "{\"a\": {\"$numberDecimal\": \"6.0\"}}");
}

Test(q_update, inc_errors)
{
    apply_err("{\"$inc\": {\"x\": 1}}", "{\"_id\": 1, \"x\": \"s\"}", MD_CODE_TYPE_MISMATCH,
              "Cannot apply $inc to a value of non-numeric type. {_id: 1} has the field 'x' of "
              "non-numeric type string");
    apply_err("{\"$inc\": {\"a.b\": 1}}", "{\"a\": {\"b\": null}}", MD_CODE_TYPE_MISMATCH,
              "Cannot apply $inc to a value of non-numeric type. {no id} has the field 'b' of "
              "non-numeric type null");
    parse_err("{\"$inc\": {\"x\": \"a\"}}", MD_CODE_TYPE_MISMATCH,
              "Cannot increment with non-numeric argument: {x: \"a\"}");
    apply_err("{\"$inc\": {\"a\": 1}}", "{\"_id\": 1, \"a\": {\"$numberLong\": \"9223372036854775807\"}}",
              MD_CODE_BAD_VALUE,
              "Failed to apply $inc operations to current value "
              "((NumberLong)9223372036854775807) for document {_id: 1}");
}

Test(q_update, mul)
{
    upd("{\"$mul\": {\"a\": 2}}", "{\"a\": 3}", "{\"a\": 6}");
    upd("{\"$mul\": {\"a\": 65536}}", "{\"a\": 65536}", "{\"a\": {\"$numberLong\": \"4294967296\"}}");
    upd("{\"$mul\": {\"a\": 2.5}}", "{\"a\": 2}", "{\"a\": 5.0}");
    upd("{\"$mul\": {\"b\": 2.5, \"c\": {\"$numberLong\": \"2\"}, \"d\": 3}}", "{}",
        "{\"b\": 0.0, \"c\": {\"$numberLong\": \"0\"}, \"d\": 0}");
    parse_err("{\"$mul\": {\"x\": true}}", MD_CODE_TYPE_MISMATCH,
              "Cannot multiply with non-numeric argument: {x: true}");
    apply_err("{\"$mul\": {\"x\": 2}}", "{\"_id\": \"k\", \"x\": [1]}", MD_CODE_TYPE_MISMATCH,
              "Cannot apply $mul to a value of non-numeric type. {_id: \"k\"} has the field 'x' "
              "of non-numeric type array");
}

Test(q_update, min_max)
{
    upd("{\"$min\": {\"a\": 3}}", "{\"a\": 5}", "{\"a\": 3}");
    upd_full("{\"$min\": {\"a\": 7}}", "{\"a\": 5}", false, NULL, "{\"a\": 5}", false);
    upd_full("{\"$min\": {\"a\": 5.0}}", "{\"a\": 5}", false, NULL, "{\"a\": 5}", false);
    upd("{\"$max\": {\"a\": 7}}", "{\"a\": 5}", "{\"a\": 7}");
    upd("{\"$max\": {\"a\": \"x\"}}", "{\"a\": 5}", "{\"a\": \"x\"}");
    upd("{\"$min\": {\"a\": null}}", "{\"a\": 5}", "{\"a\": null}");
    upd("{\"$max\": {\"n.m\": 1}}", "{}", "{\"n\": {\"m\": 1}}");
}

Test(q_update, rename)
{
    upd("{\"$rename\": {\"a\": \"c\"}}", "{\"_id\": 1, \"a\": 1, \"b\": 2}",
        "{\"_id\": 1, \"b\": 2, \"c\": 1}");
    upd("{\"$rename\": {\"a\": \"b\"}}", "{\"a\": 1, \"b\": 2}", "{\"b\": 1}");
    upd("{\"$rename\": {\"b\": \"a\"}}", "{\"a\": 1, \"b\": 2}", "{\"a\": 2}");
    upd_full("{\"$rename\": {\"q\": \"r\"}}", "{\"a\": 1}", false, NULL, "{\"a\": 1}", false);
    upd("{\"$rename\": {\"a.x\": \"y\"}}", "{\"a\": {\"x\": [1], \"k\": 0}}",
        "{\"a\": {\"k\": 0}, \"y\": [1]}");
    upd("{\"$rename\": {\"info.branch\": \"branch\", \"balance\": \"info.balance\"}}",
        "{\"balance\": 5, \"info\": {\"branch\": \"b1\"}}",
        "{\"info\": {\"balance\": 5}, \"branch\": \"b1\"}");
}

Test(q_update, rename_errors)
{
    parse_err("{\"$rename\": {\"a\": 1}}", MD_CODE_BAD_VALUE,
              "The 'to' field for $rename must be a string: a: 1");
    parse_err("{\"$rename\": {\"a\": \"a\"}}", MD_CODE_BAD_VALUE,
              "The source and target field for $rename must differ: a: \"a\"");
    parse_err("{\"$rename\": {\"a\": \"a.b\"}}", MD_CODE_BAD_VALUE,
              "The source and target field for $rename must not be on the same path: a: \"a.b\"");
    parse_err("{\"$rename\": {\"a.$\": \"b\"}}", MD_CODE_BAD_VALUE,
              "The source field for $rename may not be dynamic: a.$");
    parse_err("{\"$rename\": {\"a\": \"b\"}, \"$set\": {\"b\": 1}}",
              MD_CODE_CONFLICTING_UPDATE_OPERATORS,
              "Updating the path 'b' would create a conflict at 'b'");
    apply_err("{\"$rename\": {\"a.0.b\": \"c\"}}", "{\"_id\": 1, \"a\": [{\"b\": 1}]}",
              MD_CODE_BAD_VALUE,
              "The source field cannot be an array element, 'a.0.b' in doc with _id: 1 has an "
              "array field called 'a'");
    apply_err("{\"$rename\": {\"a\": \"b.0\"}}", "{\"_id\": 1, \"a\": 1, \"b\": [5]}",
              MD_CODE_BAD_VALUE,
              "The destination field cannot be an array element, 'b.0' in doc with _id: 1 has "
              "an array field called 'b'");
    apply_err("{\"$rename\": {\"a.b\": \"c\"}}", "{\"a\": 1}", MD_CODE_PATH_NOT_VIABLE,
              "cannot use the part (a of a.b) to traverse the element ({a: 1})");
}

Test(q_update, set_on_insert_only_when_inserting)
{
    upd_full("{\"$setOnInsert\": {\"a\": 1}, \"$set\": {\"b\": 2}}", "{\"_id\": 1}", false, NULL,
             "{\"_id\": 1, \"b\": 2}", true);
    upd_full("{\"$setOnInsert\": {\"a\": 1}, \"$set\": {\"b\": 2}}", "{\"_id\": 1}", true, NULL,
             "{\"_id\": 1, \"a\": 1, \"b\": 2}", true);
    upd_full("{\"$setOnInsert\": {\"a\": 1}}", "{\"a\": 0}", false, NULL, "{\"a\": 0}", false);
}

Test(q_update, current_date)
{
    bson_t *u = J("{\"$currentDate\": {\"d\": true, \"t\": {\"$type\": \"timestamp\"}}}");
    bson_t *d = J("{\"_id\": 1, \"d\": 5}"), out;
    q_update *q;
    bool changed;
    cr_assert_eq(q_update_new(u, &q, NULL), 0);
    cr_assert_eq(q_update_apply(q, d, false, &out, &changed, NULL, NULL), 0);
    cr_assert(changed);
    bson_iter_t it;
    cr_assert(bson_iter_init_find(&it, &out, "d") && BSON_ITER_HOLDS_DATE_TIME(&it));
    cr_assert_gt(bson_iter_date_time(&it), (int64_t)1500000000 * 1000);
    cr_assert(bson_iter_init_find(&it, &out, "t") && BSON_ITER_HOLDS_TIMESTAMP(&it));
    bson_destroy(&out);
    q_update_destroy(q);
    bson_destroy(u);
    bson_destroy(d);
    parse_err("{\"$currentDate\": {\"a\": 1}}", MD_CODE_BAD_VALUE,
              "int is not valid type for $currentDate. Please use a boolean ('true') or a $type "
              "expression ({$type: 'timestamp/date'}).");
    parse_err("{\"$currentDate\": {\"a\": {\"x\": 1}}}", MD_CODE_BAD_VALUE,
              "Unrecognized $currentDate option: x");
}

Test(q_update, parse_errors)
{
    parse_err("{\"$foo\": {\"a\": 1}}", MD_CODE_FAILED_TO_PARSE, "Unknown modifier: $foo");
    parse_err("{\"$set\": {\"a\": 1}, \"b\": 2}", MD_CODE_FAILED_TO_PARSE, "Unknown modifier: b");
    parse_err("{\"a\": 1, \"$set\": {\"b\": 1}}", MD_CODE_DOLLAR_PREFIXED_FIELD_NAME,
              "The dollar ($) prefixed field '$set' in '$set' is not valid for storage.");
    parse_err("{\"$set\": 1}", MD_CODE_FAILED_TO_PARSE,
              "Modifiers operate on fields but we found type int instead. For example: {$mod: "
              "{<field>: ...}} not {$set: 1}");
    parse_err("{\"$set\": {}}", MD_CODE_FAILED_TO_PARSE,
              "'$set' is empty. You must specify a field like so: {$set: {<field_name>: ...}}");
    parse_err("{\"$set\": {\"a\": 1, \"a.b\": 2}}", MD_CODE_CONFLICTING_UPDATE_OPERATORS,
              "Updating the path 'a.b' would create a conflict at 'a'");
    parse_err("{\"$set\": {\"a.b\": 1}, \"$inc\": {\"a\": 1}}", MD_CODE_CONFLICTING_UPDATE_OPERATORS,
              "Updating the path 'a' would create a conflict at 'a'");
    parse_err("{\"$set\": {\"x\": 1}, \"$unset\": {\"x\": 1}}", MD_CODE_CONFLICTING_UPDATE_OPERATORS,
              "Updating the path 'x' would create a conflict at 'x'");
    parse_err("{\"$set\": {\"\": 1}}", MD_CODE_EMPTY_FIELD_NAME, "An empty update path is not valid.");
    parse_err("{\"$set\": {\"a..b\": 1}}", MD_CODE_EMPTY_FIELD_NAME,
              "The update path 'a..b' contains an empty field name, which is not allowed.");
    parse_err("{\"$set\": {\"$.a\": 1}}", MD_CODE_BAD_VALUE,
              "Cannot have positional (i.e. '$') element in the first position in path '$.a'");
    parse_err("{\"$set\": {\"a.$.b.$\": 1}}", MD_CODE_BAD_VALUE,
              "Too many positional (i.e. '$') elements found in path 'a.$.b.$'");
    parse_err("{\"$bit\": {\"a\": {\"and\": 1.0}}}", MD_CODE_BAD_VALUE, NULL);
    parse_err("{\"$pop\": {\"a\": 2}}", MD_CODE_FAILED_TO_PARSE, "$pop expects 1 or -1, found: 2");
    parse_err("{\"$set\": {\"a.$[x]\": 1}}", MD_CODE_BAD_VALUE,
              "No array filter found for identifier 'x' in path 'a.$[x]'");
    parse_err("{\"$set\": {\"$[]\": 1}}", MD_CODE_BAD_VALUE, NULL);
}

Test(q_update, id_is_immutable)
{
    apply_err("{\"$set\": {\"_id\": 2}}", "{\"_id\": 1}", MD_CODE_IMMUTABLE_FIELD,
              "Performing an update on the path '_id' would modify the immutable field '_id'");
    apply_err("{\"$set\": {\"_id\": 1.0}}", "{\"_id\": 1}", MD_CODE_IMMUTABLE_FIELD, NULL);
    apply_err("{\"$unset\": {\"_id\": 1}}", "{\"_id\": 1}", MD_CODE_IMMUTABLE_FIELD, NULL);
    apply_err("{\"$inc\": {\"_id\": 1}}", "{\"_id\": 1}", MD_CODE_IMMUTABLE_FIELD, NULL);
    apply_err("{\"$set\": {\"_id.x\": 1}}", "{\"_id\": {\"x\": 2}}", MD_CODE_IMMUTABLE_FIELD,
              "Performing an update on the path '_id.x' would modify the immutable field '_id'");
    apply_err("{\"$rename\": {\"_id\": \"k\"}}", "{\"_id\": 1}", MD_CODE_IMMUTABLE_FIELD, NULL);
    upd_full("{\"$set\": {\"_id\": 1, \"a\": 2}}", "{\"_id\": 1}", false, NULL,
             "{\"_id\": 1, \"a\": 2}", true);
    /* an upsert's seed without _id may get one */
    upd_full("{\"$set\": {\"_id\": 5}}", "{\"a\": 1}", true, NULL, "{\"a\": 1, \"_id\": 5}", true);
}

Test(q_update, replacement_keeps_id_first)
{
    bson_t *u = J("{\"c\": 3}");
    q_update *q;
    cr_assert_eq(q_update_new(u, &q, NULL), 0);
    cr_assert(q_update_is_replacement(q));
    q_update_destroy(q);
    bson_destroy(u);
    upd("{\"c\": 3}", "{\"_id\": 1, \"a\": 1, \"b\": 2}", "{\"_id\": 1, \"c\": 3}");
    upd("{\"c\": 3, \"_id\": 1}", "{\"a\": 1, \"_id\": 1}", "{\"_id\": 1, \"c\": 3}");
    upd("{}", "{\"_id\": 1, \"a\": 1}", "{\"_id\": 1}");
    upd("{\"_id\": 7, \"a\": 1}", "{}", "{\"_id\": 7, \"a\": 1}");
    upd_full("{\"_id\": 1, \"a\": 1}", "{\"_id\": 1, \"a\": 1}", false, NULL,
             "{\"_id\": 1, \"a\": 1}", false);
    apply_err("{\"_id\": 2, \"a\": 1}", "{\"_id\": 1}", MD_CODE_IMMUTABLE_FIELD,
              "After applying the update, the (immutable) field '_id' was found to have been "
              "altered to _id: 2");
    parse_err("{\"a\": {\"b\": {\"$c\": 1}}}", MD_CODE_DOLLAR_PREFIXED_FIELD_NAME,
              "The dollar ($) prefixed field '$c' in 'a.b.$c' is not valid for storage.");
}

Test(q_update, positional_operator)
{
    upd_full("{\"$set\": {\"a.$.b\": 1}}", "{\"a\": [{\"b\": 0}, {\"b\": 0}]}", false, "1",
             "{\"a\": [{\"b\": 0}, {\"b\": 1}]}", true);
    upd_full("{\"$inc\": {\"products.$.qty\": 2}}",
             "{\"products\": [{\"id\": 1, \"qty\": 1}, {\"id\": 2, \"qty\": 5}]}", false, "0",
             "{\"products\": [{\"id\": 1, \"qty\": 3}, {\"id\": 2, \"qty\": 5}]}", true);
    upd_full("{\"$set\": {\"a.$\": 9}}", "{\"a\": [1, 2]}", false, "1", "{\"a\": [1, 9]}", true);
    apply_err_pos("{\"$set\": {\"a.$.b\": 1}}", "{\"a\": [{\"b\": 0}]}", NULL, MD_CODE_BAD_VALUE,
                  "The positional operator did not find the match needed from the query.");
    apply_err_pos("{\"$set\": {\"a.$\": 1, \"a.0\": 2}}", "{\"a\": [0]}", "0",
                  MD_CODE_CONFLICTING_UPDATE_OPERATORS, "Update created a conflict at 'a.0'");
}

/* ---- damages ------------------------------------------------------------------ */

static void random_doc(bson_t *d, unsigned *s, int id)
{
    char str[6];
    for (int i = 0; i < 5; i++)
        str[i] = (char)('a' + lcg(s) % 3);
    str[5] = '\0';
    bson_t sub, arr;
    bson_init(d);
    BSON_APPEND_INT32(d, "_id", id);
    BSON_APPEND_INT32(d, "a", (int32_t)(lcg(s) % 1000));
    BSON_APPEND_DOUBLE(d, "b", (double)(lcg(s) % 100) / 4);
    BSON_APPEND_UTF8(d, "s", str);
    BSON_APPEND_DOCUMENT_BEGIN(d, "sub", &sub);
    BSON_APPEND_INT32(&sub, "x", (int32_t)(lcg(s) % 1000));
    BSON_APPEND_DOUBLE(&sub, "y", 0.5);
    BSON_APPEND_UTF8(&sub, "t", "abc");
    bson_append_document_end(d, &sub);
    BSON_APPEND_ARRAY_BEGIN(d, "arr", &arr);
    for (int i = 0; i < 3; i++) {
        char k[2] = {(char)('0' + i), 0};
        BSON_APPEND_INT32(&arr, k, (int32_t)(lcg(s) % 50));
    }
    bson_append_array_end(d, &arr);
    BSON_APPEND_INT64(d, "long", (int64_t)lcg(s) << 20);
}

/* One size-preserving modifier on a field not used yet (bit in *used). */
static void random_op(bson_t *u, unsigned *s, unsigned *used)
{
    static const char *fields[] = {"a", "b", "s", "sub.x", "sub.y", "arr.1", "arr.2", "long"};
    unsigned f = lcg(s) % 8;
    if (*used & (1u << f))
        return;
    *used |= 1u << f;
    bson_t op;
    bool inc = lcg(s) % 2;
    const char *name = f == 2 ? "$set" : inc ? "$inc" : (lcg(s) % 3 ? "$set" : "$max");
    bson_append_document_begin(u, name, -1, &op);
    switch (f) {
    case 0:
    case 3:
    case 5:
    case 6: BSON_APPEND_INT32(&op, fields[f], (int32_t)(lcg(s) % 100)); break;
    case 1:
    case 4: BSON_APPEND_DOUBLE(&op, fields[f], (double)(lcg(s) % 8) / 2); break;
    case 2: {
        char str[6] = "abcde";
        str[lcg(s) % 5] = (char)('a' + lcg(s) % 26);
        BSON_APPEND_UTF8(&op, "s", str);
        break;
    }
    default: BSON_APPEND_INT64(&op, fields[f], (int64_t)lcg(s) << (lcg(s) % 30)); break;
    }
    bson_append_document_end(u, &op);
}

Test(q_update, damages_rebuild_the_new_document_property)
{
    unsigned seed = 4242;
    int with_damages = 0, unchanged = 0;
    for (int iter = 0; iter < 3000; iter++) {
        bson_t doc, upd_doc = BSON_INITIALIZER, out;
        random_doc(&doc, &seed, iter);
        /* merge several ops: one document per operator name keeps it valid */
        unsigned used = 0, nops = 1 + lcg(&seed) % 3;
        bson_t ops[3];
        for (unsigned i = 0; i < nops; i++) {
            bson_init(&ops[i]);
            random_op(&ops[i], &seed, &used);
        }
        bson_t merged = BSON_INITIALIZER;
        const char *names[] = {"$set", "$inc", "$max"};
        for (int k = 0; k < 3; k++) {
            bson_t child;
            bool any = false;
            for (unsigned i = 0; i < nops; i++) {
                bson_iter_t it, f;
                if (bson_iter_init_find(&it, &ops[i], names[k]) && bson_iter_recurse(&it, &f) &&
                    bson_iter_next(&f)) {
                    if (!any)
                        bson_append_document_begin(&merged, names[k], -1, &child);
                    any = true;
                    bson_append_iter(&child, NULL, 0, &f);
                }
            }
            if (any)
                bson_append_document_end(&merged, &child);
        }
        for (unsigned i = 0; i < nops; i++)
            bson_destroy(&ops[i]);
        if (merged.len == 5) {
            bson_destroy(&merged);
            bson_destroy(&doc);
            bson_destroy(&upd_doc);
            continue;
        }
        q_update *q;
        md_error err;
        q_damages dmg;
        bool changed;
        q_damages_init(&dmg);
        cr_assert_eq(q_update_new(&merged, &q, &err), 0, "%s", err.message);
        cr_assert_eq(q_update_apply(q, &doc, false, &out, &changed, &dmg, &err), 0, "%s",
                     err.message);
        cr_assert_eq(out.len, doc.len, "these updates preserve the size");
        const uint8_t *old = bson_get_data(&doc), *nw = bson_get_data(&out);
        cr_assert_eq(changed, memcmp(old, nw, doc.len) != 0);
        if (!changed) {
            cr_assert_eq(dmg.n, 0);
            unchanged++;
        } else {
            cr_assert_gt(dmg.n, 0);
            with_damages++;
            uint8_t *copy = bson_malloc(doc.len);
            memcpy(copy, old, doc.len);
            for (size_t i = 0; i < dmg.n; i++) {
                const eng_damage *d = &dmg.v[i];
                cr_assert_eq(d->src_ofs, d->dst_ofs);
                cr_assert(d->len > 0 && d->src_ofs + d->len <= doc.len);
                cr_assert_neq(old[d->src_ofs], nw[d->src_ofs], "a range starts at a change");
                cr_assert_neq(old[d->src_ofs + d->len - 1], nw[d->src_ofs + d->len - 1]);
                if (i)
                    cr_assert_geq(d->src_ofs, dmg.v[i - 1].src_ofs + dmg.v[i - 1].len + 8,
                                  "ranges closer than 8 bytes are joined");
                memcpy(copy + d->dst_ofs, nw + d->src_ofs, d->len);
            }
            cr_assert(!memcmp(copy, nw, doc.len), "damages rebuild the new document");
            bson_free(copy);
        }
        q_damages_cleanup(&dmg);
        q_update_destroy(q);
        bson_destroy(&out);
        bson_destroy(&merged);
        bson_destroy(&doc);
        bson_destroy(&upd_doc);
    }
    cr_assert_gt(with_damages, 1000);
    cr_assert_gt(unchanged, 10);
}

Test(q_update, no_damages_when_the_size_changes)
{
    bson_t *u = J("{\"$set\": {\"s\": \"longer string\"}}"), *d = J("{\"s\": \"x\"}"), out;
    q_update *q;
    q_damages dmg;
    bool changed;
    q_damages_init(&dmg);
    cr_assert_eq(q_update_new(u, &q, NULL), 0);
    cr_assert_eq(q_update_apply(q, d, false, &out, &changed, &dmg, NULL), 0);
    cr_assert(changed);
    cr_assert_eq(dmg.n, 0);
    bson_destroy(&out);
    /* int32 -> int64 promotion changes the size too */
    bson_destroy(d);
    bson_destroy(u);
    q_update_destroy(q);
    u = J("{\"$inc\": {\"n\": 1}}");
    d = J("{\"n\": 2147483647}");
    cr_assert_eq(q_update_new(u, &q, NULL), 0);
    cr_assert_eq(q_update_apply(q, d, false, &out, &changed, &dmg, NULL), 0);
    cr_assert(changed && out.len == d->len + 4 && dmg.n == 0);
    bson_destroy(&out);
    q_damages_cleanup(&dmg);
    q_update_destroy(q);
    bson_destroy(u);
    bson_destroy(d);
}

Test(q_update, inc_in_place_damages_only_the_number)
{
    bson_t *u = J("{\"$inc\": {\"minute.3\": 1}}");
    bson_t *d = J("{\"_id\": \"20101010/site/page\", \"minute\": {\"0\": 0, \"1\": 0, \"2\": 0, "
                  "\"3\": 0, \"4\": 0}}");
    bson_t out;
    q_update *q;
    q_damages dmg;
    bool changed;
    q_damages_init(&dmg);
    cr_assert_eq(q_update_new(u, &q, NULL), 0);
    cr_assert_eq(q_update_apply(q, d, false, &out, &changed, &dmg, NULL), 0);
    cr_assert_eq(dmg.n, 1);
    bson_iter_t top, it;
    cr_assert(bson_iter_init(&top, &out) && bson_iter_find_descendant(&top, "minute.3", &it));
    cr_assert_eq(bson_iter_int32(&it), 1);
    cr_assert_eq(dmg.v[0].len, 1, "only the low byte of the int32 changes");
    cr_assert_eq(dmg.v[0].src_ofs, (uint32_t)(it.raw + it.d1 - bson_get_data(&out)));
    bson_destroy(&out);
    q_damages_cleanup(&dmg);
    q_update_destroy(q);
    bson_destroy(u);
    bson_destroy(d);
}

/* ---- robustness ------------------------------------------------------------- */

static const char *fuzz_keys[] = {"a", "b", "a.b", "a.0", "a.$", "$set", "$inc", "$unset",
                                  "$rename", "$mul", "$min", "$max", "$currentDate",
                                  "$setOnInsert", "_id", "0", "1", "", "a..b", "$", "x.1.y",
                                  "$push", "$type", "c.d"};

static const q_fuzz fuzz = {fuzz_keys, sizeof fuzz_keys / sizeof *fuzz_keys, "a.b"};

static void fuzz_value(bson_t *d, const char *k, unsigned *s, int depth)
{
    q_fuzz_value(&fuzz, d, k, s, depth);
}

Test(q_update, random_updates_give_valid_documents_or_coded_errors)
{
    unsigned seed = 99;
    int applied = 0;
    for (int iter = 0; iter < 20000; iter++) {
        bson_t u = BSON_INITIALIZER, doc = BSON_INITIALIZER, out;
        size_t nk = sizeof fuzz_keys / sizeof *fuzz_keys;
        for (unsigned i = lcg(&seed) % 4; i > 0; i--)
            fuzz_value(&u, fuzz_keys[lcg(&seed) % nk], &seed, 0);
        for (unsigned i = lcg(&seed) % 5; i > 0; i--)
            fuzz_value(&doc, fuzz_keys[lcg(&seed) % nk], &seed, 0);
        q_update *q;
        md_error err;
        bool changed;
        q_damages dmg;
        q_damages_init(&dmg);
        md_error_clear(&err);
        int rc = q_update_new(&u, &q, &err);
        if (rc) {
            cr_assert(err.code != 0 && err.message[0], "parse errors carry a code");
        } else {
            bool ins = lcg(&seed) % 2;
            rc = q_update_apply_pos(q, &doc, lcg(&seed) % 2 ? "0" : NULL, ins, &out, &changed,
                                    &dmg, &err);
            if (rc) {
                cr_assert(err.code != 0 && err.message[0], "apply errors carry a code");
                cr_assert_eq(out.len, 5);
            } else {
                cr_assert(bson_validate(&out, BSON_VALIDATE_NONE, NULL), "valid BSON");
                cr_assert(dmg.n == 0 || out.len == doc.len);
                applied++;
            }
            bson_destroy(&out);
            q_update_destroy(q);
        }
        q_damages_cleanup(&dmg);
        bson_destroy(&u);
        bson_destroy(&doc);
    }
    cr_assert_gt(applied, 1000);
}

/* Found by tests/fuzz/fuzz_update.c: "arr.709551615" on a short array
 * allocated a slot per padding null (tens of GB) before any size check.
 * MongoDB pads at most 1,500,000 nulls: CannotBackfillArray (34). */
Test(q_update, padding_an_array_is_limited_as_in_mongodb)
{
    apply_err("{\"$set\": {\"arr.709551615\": 1}}", "{\"arr\": [{\"x\": 1}, {\"x\": 5}]}", 34,
              "can't backfill more than 1500000 elements");
    apply_err("{\"$set\": {\"a.1500002\": 1}}", "{\"a\": [0]}", 34, NULL);
    apply_err("{\"$set\": {\"a.0.999999999\": 1}}", "{\"a\": [[]]}", 34, NULL);
    apply_err("{\"$set\": {\"a.5\": 1, \"a.1500008\": 1}}", "{\"a\": []}", 34, NULL);
    /* exactly the limit is allowed */
    bson_t *u = J("{\"$set\": {\"a.1500001\": true}}"), *d = J("{\"a\": [0]}"), out;
    q_update *q;
    md_error err;
    bool changed;
    cr_assert_eq(q_update_new(u, &q, &err), 0);
    cr_assert_eq(q_update_apply(q, d, false, &out, &changed, NULL, &err), 0, "%s", err.message);
    bson_iter_t it, a;
    cr_assert(bson_iter_init_find(&it, &out, "a") && bson_iter_recurse(&it, &a));
    uint32_t n = 0;
    while (bson_iter_next(&a))
        n++;
    cr_assert_eq(n, 1500002);
    bson_destroy(&out);
    q_update_destroy(q);
    bson_destroy(u);
    bson_destroy(d);
}
