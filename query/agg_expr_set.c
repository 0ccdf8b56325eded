/*
 * agg_expr_set.c -- set expressions of MongoDB 4.0: $setEquals
 * $setIntersection $setUnion $setDifference $setIsSubset $anyElementTrue
 * $allElementsTrue.  Arrays are sets: duplicates count once, elements are
 * equal as $eq says (1 and 1.0 are one element).
 *
 * Result order: MongoDB leaves the order of $setUnion's and
 * $setIntersection's results unspecified (a hash set); minidoc returns
 * them in MongoDB's sort order, so that results are reproducible.
 * $setDifference keeps the first operand's order, as MongoDB does.
 */
#include <string.h>

#include "agg_expr_int.h"

/* A set: sorted, deduplicated borrowed values (they point into arrays the
 * caller keeps alive). */
typedef struct vset {
    const bson_value_t **v;
    size_t n, cap;
} vset;

static int vcmp(const void *a, const void *b)
{
    return agg_value_cmp_expr(*(const bson_value_t *const *)a, *(const bson_value_t *const *)b);
}

static bool vset_has(const vset *s, const bson_value_t *x)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = agg_value_cmp_expr(s->v[mid], x);
        if (c == 0)
            return true;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

/* Add every element of array value arr (bson_iter_value views stay valid
 * while arr does: each is copied into `keep`). */
static void vset_add_array(vset *s, const bson_value_t *arr, bson_value_t **keep, size_t *nkeep)
{
    bson_iter_t it;
    agg_iter_init(&it, arr);
    while (bson_iter_next(&it)) {
        *keep = bson_realloc(*keep, (*nkeep + 1) * sizeof **keep);
        (*keep)[*nkeep] = *bson_iter_value(&it); /* a view into arr */
        if (s->n == s->cap) {
            s->cap = s->cap ? s->cap * 2 : 16;
            s->v = bson_realloc(s->v, s->cap * sizeof *s->v);
        }
        s->v[s->n++] = NULL;
        (*nkeep)++;
    }
}

/* Point the set at keep[] (after every add: keep may have moved), sort, dedup. */
static void vset_finish(vset *s, bson_value_t *keep, size_t nkeep)
{
    for (size_t i = 0; i < nkeep; i++)
        s->v[i] = &keep[i];
    s->n = nkeep;
    q_sort(s->v, s->n, sizeof *s->v, vcmp);
    size_t w = 0;
    for (size_t i = 0; i < s->n; i++)
        if (w == 0 || agg_value_cmp_expr(s->v[w - 1], s->v[i]) != 0)
            s->v[w++] = s->v[i];
    s->n = w;
}

/* The set of one array value. */
static void vset_of(vset *s, const bson_value_t *arr, bson_value_t **keep, size_t *nkeep)
{
    memset(s, 0, sizeof *s);
    *keep = NULL;
    *nkeep = 0;
    vset_add_array(s, arr, keep, nkeep);
    vset_finish(s, *keep, *nkeep);
}

static void vset_free(vset *s, bson_value_t *keep)
{
    bson_free(s->v);
    bson_free(keep);
}

static void vset_out(const vset *s, bson_value_t *out)
{
    agg_arr a;
    agg_arr_init(&a);
    for (size_t i = 0; i < s->n; i++)
        agg_arr_push(&a, s->v[i]);
    agg_arr_finish(&a, out);
}

static int set_equals_parse(agg_expr *e, const bson_iter_t *arg, agg_scope *s, md_error *err)
{
    int rc = agg_parse_nary(e, arg, s, err);
    if (!rc && e->nkid < 2)
        rc = agg_err(err, 17045, "$setEquals needs at least two arguments had: %zu", e->nkid);
    return rc;
}

static int set_equals_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    bson_value_t *v = bson_malloc0(e->nkid * sizeof *v);
    int rc = agg_eval_kids(e, vars, v, err);
    vset first = {0}, other;
    bson_value_t *k0 = NULL, *k1;
    size_t n0 = 0, n1;
    bool eq = true;
    for (size_t i = 0; !rc && i < e->nkid; i++) {
        if (v[i].value_type != BSON_TYPE_ARRAY) {
            rc = agg_err(err, 17044,
                         "All operands of $setEquals must be arrays. One argument is of type: %s",
                         agg_type_name(&v[i]));
            break;
        }
        if (i == 0) {
            vset_of(&first, &v[0], &k0, &n0);
            continue;
        }
        vset_of(&other, &v[i], &k1, &n1);
        if (other.n != first.n)
            eq = false;
        for (size_t j = 0; eq && j < other.n; j++)
            eq = vset_has(&first, other.v[j]);
        vset_free(&other, k1);
    }
    if (!rc)
        agg_set_bool(out, eq);
    vset_free(&first, k0);
    agg_values_destroy(v, e->nkid);
    bson_free(v);
    return rc;
}

static int union_inter_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err,
                            bool is_union)
{
    bson_value_t *v = bson_malloc0((e->nkid ? e->nkid : 1) * sizeof *v);
    int rc = agg_eval_kids(e, vars, v, err);
    vset acc = {0};
    bson_value_t *keep = NULL;
    size_t nkeep = 0;
    bool null = false;
    if (rc)
        goto out;
    for (size_t i = 0; i < e->nkid; i++) {
        if (agg_nullish(&v[i])) {
            null = true;
            break;
        }
        if (v[i].value_type != BSON_TYPE_ARRAY) {
            rc = agg_err(err, is_union ? 17043 : 17047,
                         "All operands of %s must be arrays. One argument is of type: %s",
                         e->op->name, agg_type_name(&v[i]));
            goto out;
        }
    }
    if (null) {
        agg_set_null(out);
        goto out;
    }
    if (is_union) {
        for (size_t i = 0; i < e->nkid; i++)
            vset_add_array(&acc, &v[i], &keep, &nkeep);
        vset_finish(&acc, keep, nkeep);
    } else if (e->nkid > 0) {
        vset_of(&acc, &v[0], &keep, &nkeep);
        for (size_t i = 1; i < e->nkid; i++) {
            vset other;
            bson_value_t *k1;
            size_t n1, w = 0;
            vset_of(&other, &v[i], &k1, &n1);
            for (size_t j = 0; j < acc.n; j++)
                if (vset_has(&other, acc.v[j]))
                    acc.v[w++] = acc.v[j];
            acc.n = w;
            vset_free(&other, k1);
        }
    }
    vset_out(&acc, out);
out:
    vset_free(&acc, keep);
    agg_values_destroy(v, e->nkid);
    bson_free(v);
    return rc;
}

static int union_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    return union_inter_eval(e, vars, out, err, true);
}

static int inter_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    return union_inter_eval(e, vars, out, err, false);
}

static int difference_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    bson_value_t v[2];
    int rc = agg_eval_kids(e, vars, v, err);
    if (rc)
        return rc;
    if (agg_nullish(&v[0]) || agg_nullish(&v[1])) {
        agg_set_null(out);
    } else if (v[0].value_type != BSON_TYPE_ARRAY) {
        rc = agg_err(err, 17048,
                     "both operands of $setDifference must be arrays. First argument is of type: "
                     "%s",
                     agg_type_name(&v[0]));
    } else if (v[1].value_type != BSON_TYPE_ARRAY) {
        rc = agg_err(err, 17049,
                     "both operands of $setDifference must be arrays. Second argument is of "
                     "type: %s",
                     agg_type_name(&v[1]));
    } else {
        vset rhs, seen = {0};
        bson_value_t *k1;
        size_t n1;
        vset_of(&rhs, &v[1], &k1, &n1);
        agg_arr a;
        bson_iter_t it;
        agg_arr_init(&a);
        agg_iter_init(&it, &v[0]);
        while (bson_iter_next(&it)) {
            const bson_value_t *x = bson_iter_value(&it);
            bool dup = false;
            for (size_t i = 0; i < seen.n && !dup; i++)
                dup = agg_value_cmp_expr(seen.v[i], x) == 0;
            if (dup || vset_has(&rhs, x))
                continue;
            agg_arr_push(&a, x);
            /* remember it: a copy, since x is overwritten by the iterator */
            bson_value_t *c = bson_malloc(sizeof *c);
            agg_value_copy(x, c);
            seen.v = bson_realloc(seen.v, (seen.n + 1) * sizeof *seen.v);
            seen.v[seen.n++] = c;
        }
        for (size_t i = 0; i < seen.n; i++) {
            agg_value_destroy((bson_value_t *)seen.v[i]);
            bson_free((void *)seen.v[i]);
        }
        bson_free(seen.v);
        vset_free(&rhs, k1);
        agg_arr_finish(&a, out);
    }
    agg_values_destroy(v, 2);
    return rc;
}

static int subset_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    bson_value_t v[2];
    int rc = agg_eval_kids(e, vars, v, err);
    if (rc)
        return rc;
    if (v[0].value_type != BSON_TYPE_ARRAY) {
        rc = agg_err(err, 17046,
                     "both operands of $setIsSubset must be arrays. First argument is of type: %s",
                     agg_type_name(&v[0]));
    } else if (v[1].value_type != BSON_TYPE_ARRAY) {
        rc = agg_err(err, 17042,
                     "both operands of $setIsSubset must be arrays. Second argument is of type: "
                     "%s",
                     agg_type_name(&v[1]));
    } else {
        vset rhs;
        bson_value_t *k1;
        size_t n1;
        bool sub = true;
        bson_iter_t it;
        vset_of(&rhs, &v[1], &k1, &n1);
        agg_iter_init(&it, &v[0]);
        while (sub && bson_iter_next(&it))
            sub = vset_has(&rhs, bson_iter_value(&it));
        vset_free(&rhs, k1);
        agg_set_bool(out, sub);
    }
    agg_values_destroy(v, 2);
    return rc;
}

static int elements_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err,
                         bool any)
{
    bson_value_t v;
    int rc = agg_eval_kid(e, 0, vars, &v, err);
    if (rc)
        return rc;
    if (v.value_type != BSON_TYPE_ARRAY) {
        rc = agg_err(err, any ? 17041 : 17040, "%s's argument must be an array, but is %s",
                     e->op->name, agg_type_name(&v));
    } else {
        bson_iter_t it;
        bool r = !any;
        agg_iter_init(&it, &v);
        while (bson_iter_next(&it)) {
            if (agg_value_truthy(bson_iter_value(&it)) == any) {
                r = any;
                break;
            }
        }
        agg_set_bool(out, r);
    }
    agg_value_destroy(&v);
    return rc;
}

static int any_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    return elements_eval(e, vars, out, err, true);
}

static int all_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    return elements_eval(e, vars, out, err, false);
}

const agg_op agg_ops_set[] = {
    {"$setEquals", 0, -1, set_equals_parse, set_equals_eval, NULL},
    {"$setIntersection", 0, -1, NULL, inter_eval, NULL},
    {"$setUnion", 0, -1, NULL, union_eval, NULL},
    {"$setDifference", 2, 2, NULL, difference_eval, NULL},
    {"$setIsSubset", 2, 2, NULL, subset_eval, NULL},
    {"$anyElementTrue", 1, 1, NULL, any_eval, NULL},
    {"$allElementsTrue", 1, 1, NULL, all_eval, NULL},
    {NULL, 0, 0, NULL, NULL, NULL},
};
