/*
 * agg_expr_array.c -- array expressions of MongoDB 4.0: $arrayElemAt
 * $concatArrays $filter $map $reduce $slice $size $in $range $reverseArray
 * $zip $indexOfArray $isArray, and the document/array conversions
 * $objectToArray $arrayToObject $mergeObjects.
 *
 * $filter and $map bind "as" (default "this"), $reduce binds "value" and
 * "this", each to a fresh slot of the scope while its body is parsed
 * (agg_expr.c); at run time the element is lent to the slot, not copied.
 * $arrayToObject and $mergeObjects build documents as MongoDB's
 * MutableDocument does: setting a field that exists replaces its value
 * where it stands.
 */
#include <stdio.h>
#include <string.h>

#include "agg_expr_int.h"

/* ---- a document with replace-in-place fields ----------------------------------- */

typedef struct mdoc {
    char **key;
    bson_value_t *val; /* owned copies */
    size_t n, cap;
} mdoc;

static void mdoc_set(mdoc *d, const char *key, size_t klen, const bson_value_t *v)
{
    for (size_t i = 0; i < d->n; i++) {
        if (strlen(d->key[i]) == klen && !memcmp(d->key[i], key, klen)) {
            agg_value_destroy(&d->val[i]);
            agg_value_copy(v, &d->val[i]);
            return;
        }
    }
    if (d->n == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 8;
        d->key = bson_realloc(d->key, d->cap * sizeof *d->key);
        d->val = bson_realloc(d->val, d->cap * sizeof *d->val);
    }
    d->key[d->n] = bson_strndup(key, klen);
    agg_value_copy(v, &d->val[d->n++]);
}

static void mdoc_finish(mdoc *d, bson_value_t *out)
{
    bson_t b;
    bson_init(&b);
    for (size_t i = 0; i < d->n; i++) {
        agg_value_append(&b, d->key[i], -1, &d->val[i]);
        agg_value_destroy(&d->val[i]);
        bson_free(d->key[i]);
    }
    bson_free(d->key);
    bson_free(d->val);
    memset(d, 0, sizeof *d);
    agg_set_doc_steal(out, &b, false);
}

static void mdoc_cleanup(mdoc *d)
{
    for (size_t i = 0; i < d->n; i++) {
        agg_value_destroy(&d->val[i]);
        bson_free(d->key[i]);
    }
    bson_free(d->key);
    bson_free(d->val);
    memset(d, 0, sizeof *d);
}

static char *render(const bson_value_t *v, q_buf *b)
{
    q_buf_reset(b);
    agg_value_render(b, v);
    return (char *)q_buf_cstr(b);
}

/* ---- $arrayElemAt $size $isArray $reverseArray $concatArrays ------------------------ */

static int elem_at_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    bson_value_t v[2];
    int32_t idx;
    int rc = agg_eval_kids(e, vars, v, err);
    if (rc)
        return rc;
    if (agg_nullish(&v[0]) || agg_nullish(&v[1])) {
        agg_set_null(out);
    } else if (v[0].value_type != BSON_TYPE_ARRAY) {
        rc = agg_err(err, 28689, "$arrayElemAt's first argument must be an array, but is %s",
                     agg_type_name(&v[0]));
    } else if (!agg_is_number(&v[1])) {
        rc = agg_err(err, 28690,
                     "$arrayElemAt's second argument must be a numeric value, but is %s",
                     agg_type_name(&v[1]));
    } else if (!agg_num_int32(&v[1], &idx)) {
        rc = agg_err(err, 28691,
                     "$arrayElemAt's second argument must be representable as a 32-bit "
                     "integer: %g",
                     agg_num_double(&v[1]));
    } else {
        int64_t n = agg_array_len(&v[0]), i = idx;
        if (i < 0)
            i += n;
        if (i >= 0 && i < n) {
            bson_iter_t it;
            agg_iter_init(&it, &v[0]);
            for (int64_t k = 0; bson_iter_next(&it); k++) {
                if (k == i) {
                    agg_value_from_iter(&it, out);
                    break;
                }
            }
        }
    }
    agg_values_destroy(v, 2);
    return rc;
}

static int size_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    bson_value_t v;
    int rc = agg_eval_kid(e, 0, vars, &v, err);
    if (rc)
        return rc;
    if (v.value_type != BSON_TYPE_ARRAY)
        rc = agg_err(err, 17124, "The argument to $size must be an array, but was of type: %s",
                     agg_type_name(&v));
    else
        agg_set_int32(out, (int32_t)agg_array_len(&v));
    agg_value_destroy(&v);
    return rc;
}

static int is_array_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    bson_value_t v;
    int rc = agg_eval_kid(e, 0, vars, &v, err);
    if (rc)
        return rc;
    agg_set_bool(out, v.value_type == BSON_TYPE_ARRAY);
    agg_value_destroy(&v);
    return 0;
}

static int reverse_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    bson_value_t v;
    int rc = agg_eval_kid(e, 0, vars, &v, err);
    if (rc)
        return rc;
    if (agg_nullish(&v)) {
        agg_set_null(out);
    } else if (v.value_type != BSON_TYPE_ARRAY) {
        rc = agg_err(err, 34435,
                     "The argument to $reverseArray must be an array, but was of type: %s",
                     agg_type_name(&v));
    } else {
        uint32_t n = agg_array_len(&v);
        bson_iter_t it;
        agg_arr a;
        /* collect the element iterators, then append backwards */
        bson_value_t *el = bson_malloc0((n ? n : 1) * sizeof *el); /* views into v */
        agg_iter_init(&it, &v);
        for (uint32_t i = 0; i < n && bson_iter_next(&it); i++)
            el[i] = *bson_iter_value(&it);
        agg_arr_init(&a);
        for (uint32_t i = n; i-- > 0;)
            agg_arr_push(&a, &el[i]);
        bson_free(el);
        agg_arr_finish(&a, out);
    }
    agg_value_destroy(&v);
    return rc;
}

static int concat_arrays_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out,
                              md_error *err)
{
    agg_arr a;
    agg_arr_init(&a);
    for (size_t i = 0; i < e->nkid; i++) {
        bson_value_t v;
        int rc = agg_eval_kid(e, i, vars, &v, err);
        if (rc) {
            bson_destroy(&a.b);
            return rc;
        }
        if (agg_nullish(&v)) {
            bson_destroy(&a.b);
            agg_set_null(out);
            return 0;
        }
        if (v.value_type != BSON_TYPE_ARRAY) {
            rc = agg_err(err, 28664, "$concatArrays only supports arrays, not %s",
                         agg_type_name(&v));
            agg_value_destroy(&v);
            bson_destroy(&a.b);
            return rc;
        }
        bson_iter_t it;
        agg_iter_init(&it, &v);
        while (bson_iter_next(&it))
            agg_arr_push(&a, bson_iter_value(&it));
        agg_value_destroy(&v);
    }
    agg_arr_finish(&a, out);
    return 0;
}

/* ---- $in $indexOfArray ----------------------------------------------------------- */

static int in_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    bson_value_t v[2];
    int rc = agg_eval_kids(e, vars, v, err);
    if (rc)
        return rc;
    if (v[1].value_type != BSON_TYPE_ARRAY) {
        rc = agg_err(err, 40081, "$in requires an array as a second argument, found: %s",
                     agg_type_name(&v[1]));
    } else {
        bool found = false;
        bson_iter_t it;
        agg_iter_init(&it, &v[1]);
        while (!found && bson_iter_next(&it))
            found = agg_value_cmp_expr(&v[0], bson_iter_value(&it)) == 0;
        agg_set_bool(out, found);
    }
    agg_values_destroy(v, 2);
    return rc;
}

static int index_arg(const bson_value_t *v, const char *what, int32_t *out, md_error *err)
{
    q_buf b;
    int rc = 0;
    q_buf_init(&b);
    if (!agg_num_int32(v, out))
        rc = agg_err(err, 40096,
                     "$indexOfArrayrequires an integral %s, found a value of type: %s, with "
                     "value: %s",
                     what, agg_type_name(v), render(v, &b));
    else if (*out < 0)
        rc = agg_err(err, 40097, "$indexOfArray requires a nonnegative %s, found: %s", what,
                     render(v, &b));
    q_buf_cleanup(&b);
    return rc;
}

static int index_of_array_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out,
                               md_error *err)
{
    bson_value_t v[4];
    int32_t start = 0, end = INT32_MAX;
    int rc = agg_eval_kids(e, vars, v, err);
    if (rc)
        return rc;
    if (agg_nullish(&v[0])) {
        agg_set_null(out);
        goto out;
    }
    if (v[0].value_type != BSON_TYPE_ARRAY) {
        rc = agg_err(err, 40090, "$indexOfArray requires an array as a first argument, found: %s",
                     agg_type_name(&v[0]));
        goto out;
    }
    if (e->nkid > 2 && (rc = index_arg(&v[2], "starting index", &start, err)))
        goto out;
    if (e->nkid > 3 && (rc = index_arg(&v[3], "ending index", &end, err)))
        goto out;
    bson_iter_t it;
    int32_t found = -1;
    agg_iter_init(&it, &v[0]);
    for (int32_t i = 0; bson_iter_next(&it) && i < end; i++) {
        if (i >= start && agg_value_cmp_expr(bson_iter_value(&it), &v[1]) == 0) {
            found = i;
            break;
        }
    }
    agg_set_int32(out, found);
out:
    agg_values_destroy(v, e->nkid);
    return rc;
}

/* ---- $slice $range ---------------------------------------------------------------- */

static int slice_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    bson_value_t v[3];
    int32_t a2, cnt;
    int rc = agg_eval_kids(e, vars, v, err);
    if (rc)
        return rc;
    if (agg_nullish(&v[0]) || agg_nullish(&v[1])) {
        agg_set_null(out);
        goto out;
    }
    if (v[0].value_type != BSON_TYPE_ARRAY) {
        rc = agg_err(err, 28724, "First argument to $slice must be an array, but is of type: %s",
                     agg_type_name(&v[0]));
        goto out;
    }
    if (!agg_is_number(&v[1])) {
        rc = agg_err(err, 28725,
                     "Second argument to $slice must be a numeric value, but is of type: %s",
                     agg_type_name(&v[1]));
        goto out;
    }
    if (!agg_num_int32(&v[1], &a2)) {
        rc = agg_err(err, 28726,
                     "Second argument to $slice can't be represented as a 32-bit integer: %g",
                     agg_num_double(&v[1]));
        goto out;
    }
    int64_t n = agg_array_len(&v[0]), start, end;
    if (e->nkid == 2) {
        start = 0;
        end = n;
        if (a2 >= 0)
            end = a2 < n ? a2 : n;
        else
            start = n + a2 > 0 ? n + a2 : 0;
    } else {
        start = a2 < 0 ? (n + a2 > 0 ? n + a2 : 0) : (a2 < n ? a2 : n);
        if (agg_nullish(&v[2])) {
            agg_set_null(out);
            goto out;
        }
        if (!agg_is_number(&v[2])) {
            rc = agg_err(err, 28727, "Third argument to $slice must be numeric, but is of type: %s",
                         agg_type_name(&v[2]));
            goto out;
        }
        if (!agg_num_int32(&v[2], &cnt)) {
            rc = agg_err(err, 28728,
                         "Third argument to $slice can't be represented as a 32-bit integer: %g",
                         agg_num_double(&v[2]));
            goto out;
        }
        if (cnt <= 0) {
            rc = agg_err(err, 28729, "Third argument to $slice must be positive: %d", cnt);
            goto out;
        }
        end = start + cnt < n ? start + cnt : n;
    }
    agg_arr a;
    bson_iter_t it;
    agg_arr_init(&a);
    agg_iter_init(&it, &v[0]);
    for (int64_t i = 0; bson_iter_next(&it) && i < end; i++)
        if (i >= start)
            agg_arr_push(&a, bson_iter_value(&it));
    agg_arr_finish(&a, out);
out:
    agg_values_destroy(v, e->nkid);
    return rc;
}

static int range_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    static const char *const what[3] = {"starting value", "ending value", "step value"};
    static const int code_num[3] = {34443, 34445, 34447}, code_int[3] = {34444, 34446, 34448};
    bson_value_t v[3];
    int32_t x[3] = {0, 0, 1};
    q_buf b;
    int rc = agg_eval_kids(e, vars, v, err);
    if (rc)
        return rc;
    q_buf_init(&b);
    for (size_t i = 0; i < e->nkid && !rc; i++) {
        if (!agg_is_number(&v[i]))
            rc = agg_err(err, code_num[i], "$range requires a numeric %s, found value of type: %s",
                         what[i], agg_type_name(&v[i]));
        else if (!agg_num_int32(&v[i], &x[i]))
            rc = agg_err(err, code_int[i],
                         "$range requires a %s that can be represented as a 32-bit integer, "
                         "found value: %s",
                         what[i], render(&v[i], &b));
    }
    if (!rc && x[2] == 0)
        rc = agg_err(err, 34449, "$range requires a non-zero step value");
    if (!rc) {
        agg_arr a;
        agg_arr_init(&a);
        for (int64_t i = x[0]; x[2] > 0 ? i < x[1] : i > x[1]; i += x[2]) {
            bson_value_t n;
            agg_set_int32(&n, (int32_t)i);
            agg_arr_push(&a, &n);
        }
        agg_arr_finish(&a, out);
    }
    q_buf_cleanup(&b);
    agg_values_destroy(v, e->nkid);
    return rc;
}

/* ---- $filter $map $reduce ---------------------------------------------------------- */

/*
 * {input, as, cond|in}: kid[0] input, kid[1] the body; slot[0] the
 * variable.  Variables are parsed in the outer scope; the body sees them.
 */
static int iter_parse(agg_expr *e, const bson_iter_t *arg, agg_scope *s, md_error *err,
                      bool is_map)
{
    const char *op = is_map ? "$map" : "$filter", *body = is_map ? "in" : "cond";
    bson_iter_t x, in_it, body_it;
    const char *as = "this";
    bool have_in = false, have_body = false;
    int rc;
    if (!BSON_ITER_HOLDS_DOCUMENT(arg))
        return agg_err(err, is_map ? 16878 : 28646, "%s only supports an object as its argument",
                       op);
    bson_iter_recurse(arg, &x);
    while (bson_iter_next(&x)) {
        const char *k = bson_iter_key(&x);
        if (!strcmp(k, "input")) {
            in_it = x;
            have_in = true;
        } else if (!strcmp(k, "as")) {
            as = BSON_ITER_HOLDS_UTF8(&x) ? bson_iter_utf8(&x, NULL) : "";
        } else if (!strcmp(k, body)) {
            body_it = x;
            have_body = true;
        } else {
            return agg_err(err, is_map ? 16879 : 28647, "Unrecognized parameter to %s: %s", op, k);
        }
    }
    if (!have_in)
        return agg_err(err, is_map ? 16880 : 28648, "Missing 'input' parameter to %s", op);
    if (!have_body)
        return agg_err(err, is_map ? 16882 : 28650, "Missing '%s' parameter to %s", body, op);
    if ((rc = agg_var_name_check(as, err)))
        return rc;
    agg_expr *kid;
    if ((rc = agg_expr_parse(&in_it, s, &kid, err)))
        return rc;
    agg_node_add(e, kid);
    size_t mark = agg_scope_mark(s);
    e->slot[0] = agg_scope_push(s, as, err);
    rc = agg_expr_parse(&body_it, s, &kid, err);
    agg_scope_pop(s, mark);
    if (rc)
        return rc;
    agg_node_add(e, kid);
    return 0;
}

static int map_parse(agg_expr *e, const bson_iter_t *arg, agg_scope *s, md_error *err)
{
    return iter_parse(e, arg, s, err, true);
}

static int filter_parse(agg_expr *e, const bson_iter_t *arg, agg_scope *s, md_error *err)
{
    return iter_parse(e, arg, s, err, false);
}

static int iter_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err,
                     bool is_map)
{
    bson_value_t in;
    int rc = agg_eval_kid(e, 0, vars, &in, err);
    if (rc)
        return rc;
    if (agg_nullish(&in)) {
        agg_set_null(out);
        return 0;
    }
    if (in.value_type != BSON_TYPE_ARRAY) {
        rc = agg_err(err, is_map ? 16883 : 28651, "input to %s must be an array not %s",
                     is_map ? "$map" : "$filter", agg_type_name(&in));
        agg_value_destroy(&in);
        return rc;
    }
    agg_arr a;
    bson_iter_t it;
    agg_arr_init(&a);
    agg_iter_init(&it, &in);
    while (bson_iter_next(&it)) {
        bson_value_t r;
        const bson_value_t *el = bson_iter_value(&it);
        agg_vars_borrow(vars, e->slot[0], el);
        if ((rc = agg_eval_kid(e, 1, vars, &r, err)))
            break;
        if (is_map)
            agg_arr_push(&a, &r);
        else if (agg_value_truthy(&r))
            agg_arr_push(&a, el);
        agg_value_destroy(&r);
    }
    bson_value_t none;
    agg_set_missing(&none);
    agg_vars_borrow(vars, e->slot[0], &none);
    if (rc)
        bson_destroy(&a.b);
    else
        agg_arr_finish(&a, out);
    agg_value_destroy(&in);
    return rc;
}

static int map_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    return iter_eval(e, vars, out, err, true);
}

static int filter_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    return iter_eval(e, vars, out, err, false);
}

/* {input, initialValue, in}: kid[0..2]; slot[0] $$value, slot[1] $$this. */
static int reduce_parse(agg_expr *e, const bson_iter_t *arg, agg_scope *s, md_error *err)
{
    bson_iter_t x, it0, it1, it2;
    bson_iter_t *it[3] = {&it0, &it1, &it2};
    bool have[3] = {false, false, false};
    static const char *const names[3] = {"input", "initialValue", "in"};
    static const int codes[3] = {40077, 40078, 40079};
    int rc;
    if (!BSON_ITER_HOLDS_DOCUMENT(arg))
        return agg_err(err, 40075, "$reduce requires an object as an argument, found: %s",
                       q_type_name(bson_iter_type(arg)));
    bson_iter_recurse(arg, &x);
    while (bson_iter_next(&x)) {
        const char *k = bson_iter_key(&x);
        int i = !strcmp(k, "input") ? 0 : !strcmp(k, "initialValue") ? 1 : !strcmp(k, "in") ? 2 : -1;
        if (i < 0)
            return agg_err(err, 40076, "$reduce found an unknown argument: %s", k);
        *it[i] = x;
        have[i] = true;
    }
    for (int i = 0; i < 3; i++)
        if (!have[i])
            return agg_err(err, codes[i], "$reduce requires '%s' to be specified", names[i]);
    for (int i = 0; i < 2; i++) {
        agg_expr *kid;
        if ((rc = agg_expr_parse(it[i], s, &kid, err)))
            return rc;
        agg_node_add(e, kid);
    }
    size_t mark = agg_scope_mark(s);
    e->slot[0] = agg_scope_push(s, "value", err);
    e->slot[1] = agg_scope_push(s, "this", err);
    agg_expr *body;
    rc = agg_expr_parse(it[2], s, &body, err);
    agg_scope_pop(s, mark);
    if (rc)
        return rc;
    agg_node_add(e, body);
    return 0;
}

static int reduce_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    bson_value_t in, acc;
    q_buf b;
    int rc = agg_eval_kid(e, 0, vars, &in, err);
    if (rc)
        return rc;
    if (agg_nullish(&in)) {
        agg_set_null(out);
        return 0;
    }
    if (in.value_type != BSON_TYPE_ARRAY) {
        q_buf_init(&b);
        rc = agg_err(err, 40080, "$reduce requires that 'input' be an array, found: %s",
                     render(&in, &b));
        q_buf_cleanup(&b);
        agg_value_destroy(&in);
        return rc;
    }
    if ((rc = agg_eval_kid(e, 1, vars, &acc, err))) {
        agg_value_destroy(&in);
        return rc;
    }
    bson_iter_t it;
    agg_iter_init(&it, &in);
    while (bson_iter_next(&it)) {
        bson_value_t next;
        agg_vars_steal(vars, e->slot[0], &acc);
        agg_vars_borrow(vars, e->slot[1], bson_iter_value(&it));
        rc = agg_eval_kid(e, 2, vars, &next, err);
        if (rc)
            break;
        acc = next;
    }
    bson_value_t none;
    agg_set_missing(&none);
    agg_vars_borrow(vars, e->slot[1], &none);
    agg_vars_borrow(vars, e->slot[0], &none);
    if (!rc)
        *out = acc;
    agg_value_destroy(&in);
    return rc;
}

/* ---- $zip -------------------------------------------------------------------------- */

/* {inputs: [...], useLongestLength, defaults: [...]}: kid[0..n) inputs,
 * kid[n..2n) defaults (when given); flag bit 0 useLongestLength, bit 1
 * defaults given; names unused. */
static int zip_parse(agg_expr *e, const bson_iter_t *arg, agg_scope *s, md_error *err)
{
    bson_iter_t x, a, inputs, defaults;
    bool have_in = false, have_def = false, longest = false;
    size_t nin = 0, ndef = 0;
    int rc;
    if (!BSON_ITER_HOLDS_DOCUMENT(arg))
        return agg_err(err, 34460, "$zip only supports an object as an argument, found %s",
                       q_type_name(bson_iter_type(arg)));
    bson_iter_recurse(arg, &x);
    while (bson_iter_next(&x)) {
        const char *k = bson_iter_key(&x);
        if (!strcmp(k, "inputs")) {
            if (!BSON_ITER_HOLDS_ARRAY(&x))
                return agg_err(err, 34461, "inputs must be an array of expressions, found %s",
                               q_type_name(bson_iter_type(&x)));
            inputs = x;
            have_in = true;
        } else if (!strcmp(k, "defaults")) {
            if (!BSON_ITER_HOLDS_ARRAY(&x))
                return agg_err(err, 34462, "defaults must be an array of expressions, found %s",
                               q_type_name(bson_iter_type(&x)));
            defaults = x;
            have_def = true;
        } else if (!strcmp(k, "useLongestLength")) {
            if (!BSON_ITER_HOLDS_BOOL(&x))
                return agg_err(err, 34463, "useLongestLength must be a bool, found %s",
                               q_type_name(bson_iter_type(arg)));
            longest = bson_iter_bool(&x);
        } else {
            return agg_err(err, 34464, "$zip found an unknown argument: %s", k);
        }
    }
    if (have_in) {
        bson_iter_recurse(&inputs, &a);
        while (bson_iter_next(&a))
            nin++;
    }
    if (have_def) {
        bson_iter_recurse(&defaults, &a);
        while (bson_iter_next(&a))
            ndef++;
    }
    if (nin == 0)
        return agg_err(err, 34465, "$zip requires at least one input array");
    if (!longest && ndef)
        return agg_err(err, 34466, "cannot specify defaults unless useLongestLength is true");
    if (ndef && ndef != nin)
        return agg_err(err, 34467, "defaults and inputs must have the same length");
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1 && !ndef)
            break;
        bson_iter_recurse(pass ? &defaults : &inputs, &a);
        while (bson_iter_next(&a)) {
            agg_expr *kid;
            if ((rc = agg_expr_parse(&a, s, &kid, err)))
                return rc;
            agg_node_add(e, kid);
        }
    }
    e->flag = (longest ? 1 : 0) | (ndef ? 2 : 0);
    e->slot[2] = (int)nin;
    return 0;
}

static int zip_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    size_t nin = (size_t)e->slot[2];
    bool longest = e->flag & 1, has_def = e->flag & 2;
    bson_value_t *v = bson_malloc0(e->nkid * sizeof *v);
    uint32_t *len = bson_malloc0(nin * sizeof *len);
    q_buf b;
    int rc = agg_eval_kids(e, vars, v, err);
    if (rc)
        goto out_free;
    uint32_t minl = UINT32_MAX, maxl = 0;
    for (size_t i = 0; i < nin; i++) {
        if (agg_nullish(&v[i])) {
            agg_set_null(out);
            goto out;
        }
        if (v[i].value_type != BSON_TYPE_ARRAY) {
            q_buf_init(&b);
            rc = agg_err(err, 34468, "$zip found a non-array expression in input: %s",
                         render(&v[i], &b));
            q_buf_cleanup(&b);
            goto out;
        }
        len[i] = agg_array_len(&v[i]);
        minl = len[i] < minl ? len[i] : minl;
        maxl = len[i] > maxl ? len[i] : maxl;
    }
    uint32_t rows = longest ? maxl : minl;
    /* the inputs' elements, as views into v[] */
    bson_value_t **el = bson_malloc0(nin * sizeof *el);
    for (size_t i = 0; i < nin; i++) {
        bson_iter_t it;
        el[i] = bson_malloc0((len[i] ? len[i] : 1) * sizeof **el);
        agg_iter_init(&it, &v[i]);
        for (uint32_t k = 0; k < len[i] && bson_iter_next(&it); k++)
            el[i][k] = *bson_iter_value(&it);
    }
    agg_arr a;
    agg_arr_init(&a);
    for (uint32_t r = 0; r < rows; r++) {
        agg_arr row;
        agg_arr_init(&row);
        for (size_t i = 0; i < nin; i++) {
            if (r < len[i]) {
                agg_arr_push(&row, &el[i][r]);
            } else if (has_def) {
                agg_arr_push(&row, &v[nin + i]);
            } else {
                bson_value_t null;
                agg_set_null(&null);
                agg_arr_push(&row, &null);
            }
        }
        bson_value_t rv;
        agg_arr_finish(&row, &rv);
        agg_arr_push(&a, &rv);
        agg_value_destroy(&rv);
    }
    for (size_t i = 0; i < nin; i++)
        bson_free(el[i]);
    bson_free(el);
    agg_arr_finish(&a, out);
out:
    agg_values_destroy(v, e->nkid);
out_free:
    bson_free(v);
    bson_free(len);
    return rc;
}

/* ---- $objectToArray $arrayToObject $mergeObjects ---------------------------------- */

static int object_to_array_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out,
                                md_error *err)
{
    bson_value_t v;
    int rc = agg_eval_kid(e, 0, vars, &v, err);
    if (rc)
        return rc;
    if (agg_nullish(&v)) {
        agg_set_null(out);
    } else if (v.value_type != BSON_TYPE_DOCUMENT) {
        rc = agg_err(err, 40390, "$objectToArray requires a document input, found: %s",
                     agg_type_name(&v));
    } else {
        agg_arr a;
        bson_iter_t it;
        agg_arr_init(&a);
        agg_iter_init(&it, &v);
        while (bson_iter_next(&it)) {
            bson_t kv;
            bson_value_t d;
            bson_init(&kv);
            bson_append_utf8(&kv, "k", 1, bson_iter_key(&it), -1);
            bson_append_value(&kv, "v", 1, bson_iter_value(&it));
            agg_set_doc_steal(&d, &kv, false);
            agg_arr_push(&a, &d);
            agg_value_destroy(&d);
        }
        agg_arr_finish(&a, out);
    }
    agg_value_destroy(&v);
    return rc;
}

static int array_to_object_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out,
                                md_error *err)
{
    bson_value_t v;
    q_buf b;
    mdoc d;
    int rc = agg_eval_kid(e, 0, vars, &v, err);
    if (rc)
        return rc;
    memset(&d, 0, sizeof d);
    q_buf_init(&b);
    if (agg_nullish(&v)) {
        agg_set_null(out);
        goto out;
    }
    if (v.value_type != BSON_TYPE_ARRAY) {
        rc = agg_err(err, 40386, "$arrayToObject requires an array input, found: %s",
                     agg_type_name(&v));
        goto out;
    }
    bson_iter_t it;
    int form = 0; /* 1: [k, v] pairs, 2: {k, v} documents */
    agg_iter_init(&it, &v);
    while (bson_iter_next(&it)) {
        const bson_value_t *el = bson_iter_value(&it);
        if (!form) {
            if (el->value_type == BSON_TYPE_ARRAY)
                form = 1;
            else if (el->value_type == BSON_TYPE_DOCUMENT)
                form = 2;
            else {
                rc = agg_err(err, 40398, "Unrecognised input type format for $arrayToObject: %s",
                             agg_type_name(el));
                goto out;
            }
        }
        bson_iter_t kv, k, val;
        if (form == 1) {
            if (el->value_type != BSON_TYPE_ARRAY) {
                rc = agg_err(err, 40396,
                             "$arrayToObject requires a consistent input format. Elements must "
                             "all be arrays or all be objects. Array was detected, now found: %s",
                             agg_type_name(el));
                goto out;
            }
            uint32_t n = agg_array_len(el);
            if (n != 2) {
                rc = agg_err(err, 40397,
                             "$arrayToObject requires an array of size 2 arrays,found array of "
                             "size: %u",
                             n);
                goto out;
            }
            agg_iter_init(&kv, el);
            bson_iter_next(&kv);
            k = kv;
            bson_iter_next(&kv);
            val = kv;
            if (!BSON_ITER_HOLDS_UTF8(&k)) {
                rc = agg_err(err, 40395,
                             "$arrayToObject requires an array of key-value pairs, where the key "
                             "must be of type string. Found key type: %s",
                             q_type_name(bson_iter_type(&k)));
                goto out;
            }
        } else {
            if (el->value_type != BSON_TYPE_DOCUMENT) {
                rc = agg_err(err, 40396,
                             "$arrayToObject requires a consistent input format. Elements must "
                             "all be arrays or all be objects. Object was detected, now found: %s",
                             agg_type_name(el));
                goto out;
            }
            uint32_t n = agg_array_len(el);
            if (n != 2) {
                rc = agg_err(err, 40392,
                             "$arrayToObject requires an object keys of 'k' and 'v'. Found "
                             "incorrect number of keys:%u",
                             n);
                goto out;
            }
            bson_iter_t f;
            bool hk = false, hv = false;
            agg_iter_init(&f, el);
            while (bson_iter_next(&f)) {
                if (!strcmp(bson_iter_key(&f), "k")) {
                    k = f;
                    hk = true;
                } else if (!strcmp(bson_iter_key(&f), "v")) {
                    val = f;
                    hv = true;
                }
            }
            if (!hk || !hv) {
                rc = agg_err(err, 40393,
                             "$arrayToObject requires an object with keys 'k' and 'v'. Missing "
                             "either or both keys from: %s",
                             render(el, &b));
                goto out;
            }
            if (!BSON_ITER_HOLDS_UTF8(&k)) {
                rc = agg_err(err, 40394,
                             "$arrayToObject requires an object with keys 'k' and 'v', where the "
                             "value of 'k' must be of type string. Found type: %s",
                             q_type_name(bson_iter_type(&k)));
                goto out;
            }
        }
        uint32_t kl;
        const char *ks = bson_iter_utf8(&k, &kl);
        if (memchr(ks, '\0', kl)) {
            rc = agg_err(err, 2, "$arrayToObject: a key cannot contain an embedded null byte");
            goto out;
        }
        mdoc_set(&d, ks, kl, bson_iter_value(&val));
    }
    mdoc_finish(&d, out);
out:
    mdoc_cleanup(&d);
    q_buf_cleanup(&b);
    agg_value_destroy(&v);
    return rc;
}

static int merge_objects_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out,
                              md_error *err)
{
    mdoc d;
    q_buf b;
    memset(&d, 0, sizeof d);
    for (size_t i = 0; i < e->nkid; i++) {
        bson_value_t v;
        int rc = agg_eval_kid(e, i, vars, &v, err);
        if (rc) {
            mdoc_cleanup(&d);
            return rc;
        }
        if (agg_nullish(&v))
            continue;
        if (v.value_type != BSON_TYPE_DOCUMENT) {
            q_buf_init(&b);
            rc = agg_err(err, 40400,
                         "$mergeObjects requires object inputs, but input %s is of type %s",
                         render(&v, &b), agg_type_name(&v));
            q_buf_cleanup(&b);
            agg_value_destroy(&v);
            mdoc_cleanup(&d);
            return rc;
        }
        bson_iter_t it;
        agg_iter_init(&it, &v);
        while (bson_iter_next(&it))
            mdoc_set(&d, bson_iter_key(&it), strlen(bson_iter_key(&it)), bson_iter_value(&it));
        agg_value_destroy(&v);
    }
    mdoc_finish(&d, out);
    return 0;
}

const agg_op agg_ops_array[] = {
    {"$arrayElemAt", 2, 2, NULL, elem_at_eval, NULL},
    {"$concatArrays", 0, -1, NULL, concat_arrays_eval, NULL},
    {"$filter", 1, 1, filter_parse, filter_eval, NULL},
    {"$map", 1, 1, map_parse, map_eval, NULL},
    {"$reduce", 1, 1, reduce_parse, reduce_eval, NULL},
    {"$slice", 2, 3, NULL, slice_eval, NULL},
    {"$size", 1, 1, NULL, size_eval, NULL},
    {"$in", 2, 2, NULL, in_eval, NULL},
    {"$range", 2, 3, NULL, range_eval, NULL},
    {"$reverseArray", 1, 1, NULL, reverse_eval, NULL},
    {"$zip", 1, 1, zip_parse, zip_eval, NULL},
    {"$indexOfArray", 2, 4, NULL, index_of_array_eval, NULL},
    {"$isArray", 1, 1, NULL, is_array_eval, NULL},
    {"$objectToArray", 1, 1, NULL, object_to_array_eval, NULL},
    {"$arrayToObject", 1, 1, NULL, array_to_object_eval, NULL},
    {"$mergeObjects", 0, -1, NULL, merge_objects_eval, NULL},
    {NULL, 0, 0, NULL, NULL, NULL},
};
