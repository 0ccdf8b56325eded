/*
 * q_update_array.c -- MongoDB 3.6's array update operators, one q_uarr per
 * modified field, used by the leaves of q_update.c's tree.
 *
 *   $push      append values; with {$each: [..]} also $position (insert at,
 *              negative from the end), then $sort (1/-1 or {field: 1/-1}),
 *              then $slice (first n, or last -n) -- in that order, as 3.6
 *   $addToSet  append values not already present (q_value_cmp equality);
 *              {$each: [..]} adds several, themselves deduplicated
 *   $pop       1 removes the last element, -1 the first
 *   $pull      remove elements equal to a value, matching an operator
 *              condition ({$gte: 6}, a regex: matched as {x: element}), or,
 *              for a plain document, document elements matching it as a query
 *   $pullAll   remove elements equal to any listed value
 *
 * The new array is written whole into the caller's q_buf with its elements
 * renumbered; an unchanged array comes out byte for byte the same, so the
 * caller's "changed" test and damage list see no change.
 *
 * Also here: the update command's arrayFilters (parsed into one matcher per
 * identifier) and $bit's integer arithmetic.
 */
#include <stdlib.h>
#include <string.h>

#include "q_path.h"
#include "q_uarr.h"

struct q_uarr {
    q_uarr_kind kind;
    bson_t vals;          /* PUSH/ADD_TO_SET/PULL_ALL: the values, as an array */
    uint32_t nvals;
    bool has_slice, has_pos;
    int64_t slice, pos;
    int sort;             /* 0 none, 1/-1 whole elements, 2 by sort_pattern */
    bson_t sort_pattern;
    int pop;              /* 1 last, -1 first */
    q_matcher *pull;      /* PULL with a condition */
    bool pull_wrapped;    /* the condition applies to {x: element} */
    bson_t pull_eq;       /* PULL by equality: {"0": value} */
};

static int bad(md_error *err, int code, const char *fmt, const char *arg)
{
    return md_error_set(err, MD_EINVAL, code, fmt, arg);
}

static void vals_append(q_uarr *a, const bson_iter_t *v)
{
    char key[16];
    snprintf(key, sizeof key, "%u", a->nvals++);
    bson_append_iter(&a->vals, key, -1, v);
}

/* Integral numbers only (parseIntegerElementToLong). */
static bool integral(const bson_iter_t *e, int64_t *out)
{
    if (!q_is_number(bson_iter_type(e)))
        return false;
    long double v = q_number_ld(e);
    if (v != v || v >= 9.2e18L || v <= -9.2e18L || v != (long double)(int64_t)v)
        return false;
    *out = (int64_t)v;
    return true;
}

/* $sort: 1, -1 or a non-empty {field: 1/-1, ...}. */
static int parse_sort(q_uarr *a, const bson_iter_t *e, md_error *err)
{
    int64_t v;
    if (integral(e, &v) && (v == 1 || v == -1)) {
        a->sort = (int)v;
        return 0;
    }
    if (!BSON_ITER_HOLDS_DOCUMENT(e))
        return bad(err, MD_CODE_BAD_VALUE, "%s", "The $sort is invalid: use 1/-1 to sort the "
                   "whole element, or {field:1/-1} to sort embedded fields");
    bson_iter_t x;
    bson_iter_recurse(e, &x);
    if (!bson_iter_next(&x))
        return bad(err, MD_CODE_BAD_VALUE, "%s",
                   "The $sort pattern is empty when it should be a set of fields.");
    do {
        if (!integral(&x, &v) || (v != 1 && v != -1))
            return bad(err, MD_CODE_BAD_VALUE, "%s",
                       "The $sort element value must be either 1 or -1");
        const char *k = bson_iter_key(&x);
        if (!*k || k[0] == '.' || k[strlen(k) - 1] == '.' || strstr(k, ".."))
            return bad(err, MD_CODE_BAD_VALUE, "%s",
                       "The $sort field is a special identifier, which is not allowed: ''");
    } while (bson_iter_next(&x));
    a->sort = 2;
    const uint8_t *d;
    uint32_t l;
    q_iter_sub(e, &d, &l);
    bson_destroy(&a->sort_pattern);
    bson_init_static(&a->sort_pattern, d, l);
    return 0;
}

/* Append every element of the array `arr` points at. */
static void vals_append_all(q_uarr *a, const bson_iter_t *arr)
{
    bson_iter_t v;
    bson_iter_recurse(arr, &v);
    while (bson_iter_next(&v))
        vals_append(a, &v);
}

/* {$each: [...], $slice: n, $sort: s, $position: p} */
static int parse_push_each(q_uarr *a, const bson_iter_t *arg, md_error *err)
{
    bson_iter_t x;
    bson_iter_recurse(arg, &x);
    while (bson_iter_next(&x)) {
        const char *k = bson_iter_key(&x);
        int rc = 0;
        if (!strcmp(k, "$each")) {
            if (!BSON_ITER_HOLDS_ARRAY(&x))
                return bad(err, MD_CODE_BAD_VALUE, "The argument to $each in $push must be an "
                           "array but it was of type: %s", q_type_name(bson_iter_type(&x)));
            vals_append_all(a, &x);
        } else if (!strcmp(k, "$slice")) {
            if (!integral(&x, &a->slice))
                return bad(err, MD_CODE_BAD_VALUE, "The value for $slice must be an integer "
                           "value but was given type: %s", q_type_name(bson_iter_type(&x)));
            a->has_slice = true;
        } else if (!strcmp(k, "$position")) {
            if (!integral(&x, &a->pos))
                return bad(err, MD_CODE_BAD_VALUE, "The value for $position must be an "
                           "integer value, not of type: %s", q_type_name(bson_iter_type(&x)));
            a->has_pos = true;
        } else if (!strcmp(k, "$sort")) {
            rc = parse_sort(a, &x, err);
        } else {
            return bad(err, MD_CODE_BAD_VALUE, "Unrecognized clause in $push: %s", k);
        }
        if (rc)
            return rc;
    }
    return 0;
}

static bool has_field(const bson_iter_t *doc, const char *name)
{
    bson_iter_t x;
    return BSON_ITER_HOLDS_DOCUMENT(doc) && bson_iter_recurse(doc, &x) &&
           bson_iter_find(&x, name);
}

static int parse_add_to_set(q_uarr *a, const bson_iter_t *arg, md_error *err)
{
    bson_iter_t x;
    if (!BSON_ITER_HOLDS_DOCUMENT(arg) || !bson_iter_recurse(arg, &x) || !bson_iter_next(&x) ||
        strcmp(bson_iter_key(&x), "$each")) {
        vals_append(a, arg);
        return 0;
    }
    if (!BSON_ITER_HOLDS_ARRAY(&x))
        return bad(err, MD_CODE_BAD_VALUE, "The argument to $each in $addToSet must be an "
                   "array but was %s", q_type_name(bson_iter_type(&x)));
    vals_append_all(a, &x);
    if (bson_iter_next(&x))
        return bad(err, MD_CODE_BAD_VALUE, "Found unexpected fields after $each in "
                   "$addToSet: %s", bson_iter_key(&x));
    return 0;
}

static int parse_pop(q_uarr *a, const bson_iter_t *arg, md_error *err)
{
    q_buf b;
    q_buf_init(&b);
    int rc = 0;
    if (!q_is_number(bson_iter_type(arg))) {
        q_render_elem(&b, arg);
        rc = bad(err, MD_CODE_FAILED_TO_PARSE, "Expected a number in: %s", q_buf_cstr(&b));
    } else {
        long double v = q_number_ld(arg);
        if (v != 1 && v != -1) {
            q_buf_printf(&b, "%.17Lg", v);
            rc = bad(err, MD_CODE_FAILED_TO_PARSE, "$pop expects 1 or -1, found: %s",
                     q_buf_cstr(&b));
        }
        a->pop = v < 0 ? -1 : 1;
    }
    q_buf_cleanup(&b);
    return rc;
}

static bool is_top_keyword(const char *k)
{
    return !strcmp(k, "$and") || !strcmp(k, "$or") || !strcmp(k, "$nor") ||
           !strcmp(k, "$where") || !strcmp(k, "$text") || !strcmp(k, "$comment") ||
           !strcmp(k, "$expr");
}

/* $pull: a query on document elements, an operator condition (or regex)
 * on each element, or equality. */
static int parse_pull(q_uarr *a, const bson_iter_t *arg, md_error *err)
{
    bson_iter_t x;
    if (BSON_ITER_HOLDS_DOCUMENT(arg)) {
        const uint8_t *d;
        uint32_t l;
        bson_t q;
        bool first_op = bson_iter_recurse(arg, &x) && bson_iter_next(&x) &&
                        bson_iter_key(&x)[0] == '$' && strcmp(bson_iter_key(&x), "$ref") &&
                        !is_top_keyword(bson_iter_key(&x));
        if (!first_op) {
            q_iter_sub(arg, &d, &l);
            bson_init_static(&q, d, l);
            return q_matcher_new(&q, &a->pull, err);
        }
    }
    if (BSON_ITER_HOLDS_DOCUMENT(arg) || BSON_ITER_HOLDS_REGEX(arg)) {
        bson_t q = BSON_INITIALIZER;
        bson_append_iter(&q, "x", 1, arg);
        int rc = q_matcher_new(&q, &a->pull, err);
        bson_destroy(&q);
        a->pull_wrapped = true;
        return rc;
    }
    bson_append_iter(&a->pull_eq, "0", 1, arg);
    return 0;
}

static int parse_kind(q_uarr *a, const bson_iter_t *arg, md_error *err)
{
    bson_iter_t v;
    switch (a->kind) {
    case Q_UARR_PUSH:
        if (has_field(arg, "$each"))
            return parse_push_each(a, arg, err);
        vals_append(a, arg);
        return 0;
    case Q_UARR_ADD_TO_SET: return parse_add_to_set(a, arg, err);
    case Q_UARR_POP: return parse_pop(a, arg, err);
    case Q_UARR_PULL: return parse_pull(a, arg, err);
    case Q_UARR_PULL_ALL:
        if (!BSON_ITER_HOLDS_ARRAY(arg))
            return bad(err, MD_CODE_BAD_VALUE, "$pullAll requires an array argument but was "
                       "given a %s", q_type_name(bson_iter_type(arg)));
        bson_iter_recurse(arg, &v);
        while (bson_iter_next(&v))
            vals_append(a, &v);
        return 0;
    }
    return 0;
}

int q_uarr_new(q_uarr_kind kind, const bson_iter_t *arg, q_uarr **out, md_error *err)
{
    q_uarr *a = bson_aligned_alloc0(BSON_ALIGNOF(q_uarr), sizeof *a);
    a->kind = kind;
    bson_init(&a->vals);
    bson_init(&a->sort_pattern);
    bson_init(&a->pull_eq);
    int rc = parse_kind(a, arg, err);
    if (rc) {
        q_uarr_destroy(a);
        a = NULL;
    }
    *out = a;
    return rc;
}

void q_uarr_destroy(q_uarr *a)
{
    if (!a)
        return;
    bson_destroy(&a->vals);
    bson_destroy(&a->sort_pattern);
    bson_destroy(&a->pull_eq);
    q_matcher_destroy(a->pull);
    bson_free(a);
}

const bson_t *q_uarr_values(const q_uarr *a)
{
    return &a->vals;
}

/* ---- applying --------------------------------------------------------------- */

/* bson_iter_t is 128-byte aligned but only 80 bytes long, so it cannot be
 * an array element itself: a struct around it is padded to its alignment. */
typedef struct q_elem {
    bson_iter_t it;
} q_elem;

typedef struct elems {
    q_elem *v;
    size_t n, cap;
} elems;

/* q_elem asks for 128-byte alignment, which realloc does not give. */
static void elems_add(elems *l, const bson_iter_t *e)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        q_elem *v = bson_aligned_alloc(BSON_ALIGNOF(q_elem), l->cap * sizeof *v);
        if (l->n)
            memcpy(v, l->v, l->n * sizeof *v);
        bson_free(l->v);
        l->v = v;
    }
    l->v[l->n++].it = *e;
}

static void elems_add_all(elems *l, const bson_iter_t *arr)
{
    bson_iter_t x;
    if (bson_iter_recurse(arr, &x))
        while (bson_iter_next(&x))
            elems_add(l, &x);
}

static void write_array(const elems *l, size_t from, size_t to, const char *key, q_buf *dst)
{
    char k[24];
    size_t at = q_bw_begin(dst, BSON_TYPE_ARRAY, key);
    for (size_t i = from; i < to; i++) {
        snprintf(k, sizeof k, "%zu", i - from);
        q_bw_iter(dst, k, &l->v[i].it);
    }
    q_bw_end(dst, at);
}

static bool elems_contains(const elems *l, const bson_iter_t *v)
{
    for (size_t i = 0; i < l->n; i++)
        if (q_value_cmp(&l->v[i].it, v) == 0)
            return true;
    return false;
}

/* The value an element sorts by for field `path` of a pattern: the field of
 * a document element (null when missing), else the element itself. */
static bool sort_key(const bson_iter_t *e, const char *path, bson_iter_t *out)
{
    bson_iter_t x;
    if (!BSON_ITER_HOLDS_DOCUMENT(e))
        return *out = *e, true;
    return bson_iter_recurse(e, &x) && bson_iter_find_descendant(&x, path, out);
}

typedef struct sort_item {
    bson_iter_t it;
    size_t idx;
} sort_item;

static int sort_cmp(const void *pa, const void *pb, void *ctx)
{
    const sort_item *a = pa, *b = pb;
    const q_uarr *u = ctx;
    int c = 0;
    if (u->sort != 2) {
        c = q_value_cmp(&a->it, &b->it) * u->sort;
    } else {
        bson_iter_t p, ka, kb;
        bson_t nulls = BSON_INITIALIZER;
        bson_append_null(&nulls, "n", 1);
        bson_iter_t null_it;
        bson_iter_init_find(&null_it, &nulls, "n");
        bson_iter_init(&p, &u->sort_pattern);
        while (!c && bson_iter_next(&p)) {
            bool ha = sort_key(&a->it, bson_iter_key(&p), &ka);
            bool hb = sort_key(&b->it, bson_iter_key(&p), &kb);
            c = q_value_cmp(ha ? &ka : &null_it, hb ? &kb : &null_it);
            c *= bson_iter_as_int64(&p) < 0 ? -1 : 1;
        }
        bson_destroy(&nulls);
    }
    return c ? c : (a->idx < b->idx ? -1 : a->idx > b->idx);
}

static void elems_sort(elems *l, const q_uarr *a)
{
    sort_item *s = bson_aligned_alloc(BSON_ALIGNOF(sort_item), (l->n + 1) * sizeof *s);
    for (size_t i = 0; i < l->n; i++)
        s[i] = (sort_item){l->v[i].it, i};
    qsort_r(s, l->n, sizeof *s, sort_cmp, (void *)a);
    for (size_t i = 0; i < l->n; i++)
        l->v[i].it = s[i].it;
    bson_free(s);
}

/* $push onto the elements already in l. */
static void apply_push(const q_uarr *a, elems *l, bool existed, const char *key, q_buf *dst)
{
    elems vals = {0};
    bson_iter_t v;
    bson_iter_init(&v, &a->vals);
    while (bson_iter_next(&v))
        elems_add(&vals, &v);
    size_t at = l->n;
    if (a->has_pos && existed) {
        int64_t p = a->pos < 0 ? (int64_t)l->n + a->pos : a->pos;
        at = p < 0 ? 0 : (size_t)p > l->n ? l->n : (size_t)p;
    }
    for (size_t i = 0; i < vals.n; i++)
        elems_add(l, &vals.v[i].it);
    if (at < l->n - vals.n) { /* move the new values to `at` */
        size_t nv = vals.n, tail = l->n - nv - at;
        memmove(l->v + at + nv, l->v + at, tail * sizeof *l->v);
        memcpy(l->v + at, vals.v, nv * sizeof *l->v);
    }
    bson_free(vals.v);
    if (a->sort)
        elems_sort(l, a);
    size_t from = 0, to = l->n;
    if (a->has_slice) {
        if (a->slice >= 0 && (uint64_t)a->slice < l->n)
            to = (size_t)a->slice;
        else if (a->slice < 0 && (uint64_t)-a->slice < l->n)
            from = l->n - (size_t)-a->slice;
    }
    write_array(l, from, to, key, dst);
}

static bool pull_matches(const q_uarr *a, const bson_iter_t *e)
{
    bson_iter_t eq;
    if (!a->pull) {
        bson_iter_init_find(&eq, &a->pull_eq, "0");
        return q_value_cmp(e, &eq) == 0;
    }
    if (!a->pull_wrapped) {
        if (!BSON_ITER_HOLDS_DOCUMENT(e))
            return false;
        const uint8_t *d;
        uint32_t l;
        bson_t doc;
        q_iter_sub(e, &d, &l);
        bson_init_static(&doc, d, l);
        return q_matcher_matches(a->pull, &doc);
    }
    bson_t w = BSON_INITIALIZER;
    bson_append_iter(&w, "x", 1, e);
    bool m = q_matcher_matches(a->pull, &w);
    bson_destroy(&w);
    return m;
}

/* $pull / $pullAll: keep the elements nothing removes. */
static void apply_cull(const q_uarr *a, const elems *l, const char *key, q_buf *dst)
{
    elems keep = {0}, vals = {0};
    bson_iter_t v;
    if (a->kind == Q_UARR_PULL_ALL) {
        bson_iter_init(&v, &a->vals);
        while (bson_iter_next(&v))
            elems_add(&vals, &v);
    }
    for (size_t i = 0; i < l->n; i++) {
        bool drop = a->kind == Q_UARR_PULL ? pull_matches(a, &l->v[i].it)
                                           : elems_contains(&vals, &l->v[i].it);
        if (!drop)
            elems_add(&keep, &l->v[i].it);
    }
    write_array(&keep, 0, keep.n, key, dst);
    bson_free(keep.v);
    bson_free(vals.v);
}

static int not_array(const q_uarr *a, const bson_iter_t *e, const char *key, const char *path,
                     const char *id, md_error *err)
{
    const char *t = q_type_name(bson_iter_type(e));
    switch (a->kind) {
    case Q_UARR_PUSH:
        return md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE, "The field '%s' must be an array "
                            "but is of type %s in document {%s}", key, t, id);
    case Q_UARR_ADD_TO_SET:
        return md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE, "Cannot apply $addToSet to "
                            "non-array field. Field named '%s' has non-array type %s", key, t);
    case Q_UARR_POP:
        return md_error_set(err, MD_ERROR, MD_CODE_TYPE_MISMATCH, "Path '%s' contains an "
                            "element of non-array type '%s'", path, t);
    default:
        return md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE,
                            "Cannot apply $pull to a non-array value");
    }
}

/* $addToSet: append each value the array does not hold yet, then write it. */
static void apply_add_to_set(const q_uarr *a, elems *l, const char *key, q_buf *dst)
{
    bson_iter_t v;
    bson_iter_init(&v, &a->vals);
    while (bson_iter_next(&v))
        if (!elems_contains(l, &v))
            elems_add(l, &v);
    write_array(l, 0, l->n, key, dst);
}

int q_uarr_apply(const q_uarr *a, const bson_iter_t *e, const char *key, const char *path,
                 const char *id, q_buf *dst, md_error *err)
{
    elems l = {0};
    if (!e) {
        if (a->kind == Q_UARR_PUSH) {
            apply_push(a, &l, false, key, dst);
        } else if (a->kind == Q_UARR_ADD_TO_SET) {
            apply_add_to_set(a, &l, key, dst);
        }
        bson_free(l.v);
        return 0;
    }
    if (!BSON_ITER_HOLDS_ARRAY(e))
        return not_array(a, e, key, path, id, err);
    elems_add_all(&l, e);
    switch (a->kind) {
    case Q_UARR_PUSH: apply_push(a, &l, true, key, dst); break;
    case Q_UARR_ADD_TO_SET: apply_add_to_set(a, &l, key, dst); break;
    case Q_UARR_POP:
        if (l.n == 0)
            write_array(&l, 0, 0, key, dst);
        else
            write_array(&l, a->pop < 0 ? 1 : 0, a->pop < 0 ? l.n : l.n - 1, key, dst);
        break;
    default: apply_cull(a, &l, key, dst); break;
    }
    bson_free(l.v);
    return 0;
}

/* ---- arrayFilters ------------------------------------------------------------ */

static int af_error(md_error *err, int code, const char *fmt, const char *arg)
{
    return md_error_set(err, MD_EINVAL, code, fmt, arg);
}

/* The identifier of one arrayFilters document: the first component of
 * every top-level field, which must all agree (3.6's parseArrayFilters). */
static int af_ident(const bson_t *f, char *name, size_t len, md_error *err)
{
    bson_iter_t it;
    name[0] = '\0';
    bson_iter_init(&it, f);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        size_t n = strcspn(k, ".");
        if (k[0] == '$' || n == 0)
            return af_error(err, MD_CODE_FAILED_TO_PARSE, "Error parsing array filter :: caused "
                            "by :: Expected a single top-level field name, found '%s'", k);
        if (name[0] && (strlen(name) != n || strncmp(name, k, n)))
            return md_error_set(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE, "Error parsing array "
                                "filter :: caused by :: Expected a single top-level field "
                                "name, found '%s' and '%.*s'", name, (int)n, k);
        snprintf(name, len, "%.*s", (int)n, k);
    }
    if (!name[0])
        return af_error(err, MD_CODE_FAILED_TO_PARSE, "%s", "Cannot use an expression without "
                        "a top-level field name in arrayFilters");
    for (const char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9')) ||
            (c == name && !(*c >= 'a' && *c <= 'z')))
            return af_error(err, MD_CODE_BAD_VALUE, "Error parsing array filter :: caused by "
                            ":: The top-level field name must be an alphanumeric string "
                            "beginning with a lowercase letter, found '%s'", name);
    return 0;
}

int q_afilters_parse(const bson_t *filters, q_afilter **out, size_t *nout, md_error *err)
{
    bson_iter_t it;
    int rc = 0;
    *out = NULL;
    *nout = 0;
    bson_iter_init(&it, filters);
    while (!rc && bson_iter_next(&it)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&it)) {
            rc = af_error(err, MD_CODE_TYPE_MISMATCH, "%s", "arrayFilters entries must be objects");
            break;
        }
        const uint8_t *d;
        uint32_t l;
        bson_t f;
        q_iter_sub(&it, &d, &l);
        bson_init_static(&f, d, l);
        *out = bson_realloc(*out, (*nout + 1) * sizeof **out);
        q_afilter *a = &(*out)[(*nout)++];
        memset(a, 0, sizeof *a);
        rc = af_ident(&f, a->name, sizeof a->name, err);
        for (size_t i = 0; !rc && i + 1 < *nout; i++)
            if (!strcmp((*out)[i].name, a->name))
                rc = af_error(err, MD_CODE_FAILED_TO_PARSE, "Found multiple array filters with "
                              "the same top-level field name %s", a->name);
        if (!rc)
            rc = q_matcher_new(&f, &a->m, err);
    }
    return rc;
}

int q_afilters_check_used(const q_afilter *af, size_t n, const bson_t *update, md_error *err)
{
    for (size_t i = 0; i < n; i++) {
        if (af[i].used)
            continue;
        q_buf b;
        q_buf_init(&b);
        q_render_doc(&b, bson_get_data(update), update->len, false);
        md_error_set(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE, "The array filter for identifier "
                     "'%s' was not used in the update %s", af[i].name, q_buf_cstr(&b));
        q_buf_cleanup(&b);
        return MD_EINVAL;
    }
    return 0;
}

void q_afilters_free(q_afilter *af, size_t n)
{
    for (size_t i = 0; i < n; i++)
        q_matcher_destroy(af[i].m);
    bson_free(af);
}

/* ---- $bit ------------------------------------------------------------------------ */

static int bit_error(md_error *err, const char *fmt, const bson_iter_t *e)
{
    q_buf b;
    q_buf_init(&b);
    q_render_elem(&b, e);
    md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE, fmt, q_type_name(bson_iter_type(e)),
                 q_buf_cstr(&b));
    q_buf_cleanup(&b);
    return MD_EINVAL;
}

int q_bit_check(const bson_iter_t *arg, md_error *err)
{
    bson_iter_t x;
    bool any = false;
    if (!BSON_ITER_HOLDS_DOCUMENT(arg))
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE, "The $bit modifier is not "
                            "compatible with a %s. You must pass in an embedded document: "
                            "{$bit: {field: {and/or/xor: #}}", q_type_name(bson_iter_type(arg)));
    bson_iter_recurse(arg, &x);
    while (bson_iter_next(&x)) {
        const char *k = bson_iter_key(&x);
        if (strcmp(k, "and") && strcmp(k, "or") && strcmp(k, "xor")) {
            q_buf b;
            q_buf_init(&b);
            q_render_elem(&b, &x);
            md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE, "The $bit modifier only supports "
                         "'and', 'or', and 'xor', not '%s' which is an unknown operator: {%s}",
                         k, q_buf_cstr(&b));
            q_buf_cleanup(&b);
            return MD_EINVAL;
        }
        if (!BSON_ITER_HOLDS_INT32(&x) && !BSON_ITER_HOLDS_INT64(&x))
            return bit_error(err, "The $bit modifier field must be an Integer(32/64 bit); a "
                             "'%s' is not supported here: {%s}", &x);
        any = true;
    }
    if (!any)
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE, "You must pass in at least one "
                            "bitwise operation. The format is: {$bit: {field: {and/or/xor: #}}");
    return 0;
}

/* SafeNum's bitAnd/bitOr/bitXor: int32 with int32 stays int32, else int64. */
void q_bit_apply(const bson_iter_t *arg, const q_num *in, q_num *out)
{
    bson_iter_t x;
    *out = *in;
    bson_iter_recurse(arg, &x);
    while (bson_iter_next(&x)) {
        const char *k = bson_iter_key(&x);
        bool wide = out->t == BSON_TYPE_INT64 || BSON_ITER_HOLDS_INT64(&x);
        int64_t a = out->t == BSON_TYPE_INT64 ? out->i64 : out->i32;
        int64_t b = bson_iter_as_int64(&x);
        int64_t r = k[0] == 'a' ? (a & b) : k[0] == 'o' ? (a | b) : (a ^ b);
        if (wide) {
            out->t = BSON_TYPE_INT64;
            out->i64 = r;
        } else {
            out->t = BSON_TYPE_INT32;
            out->i32 = (int32_t)r;
        }
    }
}
