/*
 * agg_accum.c -- $group's accumulators (MongoDB 4.0): $sum $avg $min $max
 * $first $last $push $addToSet $stdDevPop $stdDevSamp.
 *
 * Each keeps one group's running state.  For a spilled $group
 * (agg_stage_group.c) the state is written out as a partial value and
 * folded back in (agg_acc_merge) when the runs are merged:
 *
 *   $sum         the sum so far            merge: add
 *   $avg         {s: sum, c: count}        merge: add both
 *   $min $max    the value (or absent)     merge: compare
 *   $first $last {v: value} once set       merge: first keeps its own, last takes
 *   $push        the array                 merge: append
 *   $addToSet    the array (distinct)      merge: add each
 *   $stdDev*     {c, m: mean, q: M2}       merge: Chan et al.'s parallel formula
 *
 * Rules as MongoDB's: $sum and $avg and $stdDev* ignore non-numbers; $min
 * and $max ignore null and missing; $push and $addToSet skip missing.
 * $sum's type follows $add (int32 widening to int64, then double; decimal
 * wins); $avg is a double unless a decimal was summed (then decimal);
 * $first / $last of a missing field give null.  $addToSet keeps first
 * occurrences in input order (MongoDB's order is unspecified).
 */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg_int.h"

enum { A_SUM, A_AVG, A_MIN, A_MAX, A_FIRST, A_LAST, A_PUSH, A_ADDTOSET, A_STDPOP, A_STDSAMP };

struct agg_acc_ops {
    const char *name;
    int kind;
};

static const agg_acc_ops accs[] = {
    {"$sum", A_SUM},       {"$avg", A_AVG},           {"$min", A_MIN},
    {"$max", A_MAX},       {"$first", A_FIRST},       {"$last", A_LAST},
    {"$push", A_PUSH},     {"$addToSet", A_ADDTOSET}, {"$stdDevPop", A_STDPOP},
    {"$stdDevSamp", A_STDSAMP},
};

struct agg_acc {
    const agg_acc_ops *ops;
    bson_value_t v; /* sum, min, max, first, last (owned; EOD: none) */
    bool have;      /* first/last: set */
    int64_t count;
    double mean, m2;
    bson_value_t *items; /* push / addToSet (owned) */
    size_t n, cap;
    size_t mem;
};

const agg_acc_ops *agg_acc_find(const char *op)
{
    for (size_t i = 0; i < sizeof accs / sizeof accs[0]; i++)
        if (strcmp(accs[i].name, op) == 0)
            return &accs[i];
    return NULL;
}

agg_acc *agg_acc_new(const agg_acc_ops *ops)
{
    agg_acc *a = calloc(1, sizeof *a);
    assert(a);
    a->ops = ops;
    a->v.value_type = BSON_TYPE_EOD;
    if (ops->kind == A_SUM) {
        a->v.value_type = BSON_TYPE_INT32;
        a->v.value.v_int32 = 0;
    }
    a->mem = sizeof *a;
    return a;
}

void agg_acc_destroy(agg_acc *a)
{
    if (!a)
        return;
    agg_value_destroy(&a->v);
    for (size_t i = 0; i < a->n; i++)
        agg_value_destroy(&a->items[i]);
    free(a->items);
    free(a);
}

static bool is_num(const bson_value_t *v)
{
    return v->value_type == BSON_TYPE_INT32 || v->value_type == BSON_TYPE_INT64 ||
           v->value_type == BSON_TYPE_DOUBLE || v->value_type == BSON_TYPE_DECIMAL128;
}

static double num_double(const bson_value_t *v)
{
    switch (v->value_type) {
    case BSON_TYPE_INT32: return v->value.v_int32;
    case BSON_TYPE_INT64: return (double)v->value.v_int64;
    case BSON_TYPE_DOUBLE: return v->value.v_double;
    case BSON_TYPE_DECIMAL128: {
        char s[BSON_DECIMAL128_STRING];
        bson_decimal128_to_string(&v->value.v_decimal128, s);
        return strtod(s, NULL);
    }
    default: return 0;
    }
}

static size_t value_mem(const bson_value_t *v)
{
    switch (v->value_type) {
    case BSON_TYPE_UTF8: return sizeof *v + v->value.v_utf8.len;
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY: return sizeof *v + v->value.v_doc.data_len;
    case BSON_TYPE_BINARY: return sizeof *v + v->value.v_binary.data_len;
    default: return sizeof *v;
    }
}

static void sum_into(bson_value_t *acc, const bson_value_t *x)
{
    bson_value_t r;
    agg_value_add_numbers(acc, x, &r);
    *acc = r; /* numbers own nothing */
}

static void items_push(agg_acc *a, const bson_value_t *v)
{
    if (a->n == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 8;
        a->items = realloc(a->items, a->cap * sizeof *a->items);
        assert(a->items);
    }
    agg_value_copy(v, &a->items[a->n++]);
    a->mem += value_mem(v);
}

static bool items_has(const agg_acc *a, const bson_value_t *v)
{
    for (size_t i = 0; i < a->n; i++)
        if (agg_value_cmp(&a->items[i], v) == 0 && a->items[i].value_type != BSON_TYPE_EOD)
            return true;
    return false;
}

static void std_add(agg_acc *a, double x)
{
    a->count++;
    double d = x - a->mean;
    a->mean += d / (double)a->count;
    a->m2 += d * (x - a->mean);
}

static void replace_value(agg_acc *a, const bson_value_t *v)
{
    a->mem -= value_mem(&a->v) < a->mem ? value_mem(&a->v) : 0;
    agg_value_destroy(&a->v);
    agg_value_copy(v, &a->v);
    a->mem += value_mem(v);
}

int agg_acc_add(agg_acc *a, const bson_value_t *v, md_error *err)
{
    bool missing = v->value_type == BSON_TYPE_EOD;
    switch (a->ops->kind) {
    case A_SUM:
        if (is_num(v))
            sum_into(&a->v, v);
        break;
    case A_AVG:
        if (is_num(v)) {
            if (a->count == 0)
                a->v = (bson_value_t){.value_type = BSON_TYPE_INT32};
            sum_into(&a->v, v);
            a->count++;
        }
        break;
    case A_MIN:
    case A_MAX:
        if (missing || v->value_type == BSON_TYPE_NULL || v->value_type == BSON_TYPE_UNDEFINED)
            break;
        if (a->v.value_type == BSON_TYPE_EOD ||
            (a->ops->kind == A_MIN ? agg_value_cmp(v, &a->v) < 0 : agg_value_cmp(v, &a->v) > 0))
            replace_value(a, v);
        break;
    case A_FIRST:
        if (!a->have) {
            replace_value(a, v);
            a->have = true;
        }
        break;
    case A_LAST:
        replace_value(a, v);
        a->have = true;
        break;
    case A_PUSH:
        if (!missing)
            items_push(a, v);
        break;
    case A_ADDTOSET:
        if (!missing && !items_has(a, v))
            items_push(a, v);
        break;
    case A_STDPOP:
    case A_STDSAMP:
        if (is_num(v))
            std_add(a, num_double(v));
        break;
    }
    if (a->mem > Q_BSON_MAX && (a->ops->kind == A_PUSH || a->ops->kind == A_ADDTOSET))
        return q_err(err, MD_ETOOBIG, 4568 /* 4.0's $push / $addToSet BSON limit */,
                     "%s used too much memory and cannot spill to disk", a->ops->name);
    return 0;
}

static void append_items(const agg_acc *a, bson_t *doc, const char *key)
{
    bson_t arr;
    char k[24];
    bson_append_array_begin(doc, key, -1, &arr);
    for (size_t i = 0; i < a->n; i++) {
        snprintf(k, sizeof k, "%zu", i);
        agg_value_append(&arr, k, -1, &a->items[i]);
    }
    bson_append_array_end(doc, &arr);
}

void agg_acc_partial(const agg_acc *a, bson_t *doc, const char *key)
{
    bson_t sub;
    switch (a->ops->kind) {
    case A_SUM:
        agg_value_append(doc, key, -1, &a->v);
        break;
    case A_AVG:
        bson_append_document_begin(doc, key, -1, &sub);
        if (a->count)
            agg_value_append(&sub, "s", 1, &a->v);
        BSON_APPEND_INT64(&sub, "c", a->count);
        bson_append_document_end(doc, &sub);
        break;
    case A_MIN:
    case A_MAX:
    case A_FIRST:
    case A_LAST:
        bson_append_document_begin(doc, key, -1, &sub);
        if (a->have || a->v.value_type != BSON_TYPE_EOD) {
            BSON_APPEND_BOOL(&sub, "h", true);
            agg_value_append(&sub, "v", 1, &a->v);
        }
        bson_append_document_end(doc, &sub);
        break;
    case A_PUSH:
    case A_ADDTOSET:
        append_items(a, doc, key);
        break;
    case A_STDPOP:
    case A_STDSAMP:
        bson_append_document_begin(doc, key, -1, &sub);
        BSON_APPEND_INT64(&sub, "c", a->count);
        BSON_APPEND_DOUBLE(&sub, "m", a->mean);
        BSON_APPEND_DOUBLE(&sub, "q", a->m2);
        bson_append_document_end(doc, &sub);
        break;
    }
}

static bool sub_field(const bson_iter_t *p, const char *k, bson_iter_t *out)
{
    bson_iter_t s;
    return BSON_ITER_HOLDS_DOCUMENT(p) && bson_iter_recurse(p, &s) && bson_iter_find(&s, k) &&
           (*out = s, true);
}

int agg_acc_merge(agg_acc *a, const bson_iter_t *p, md_error *err)
{
    bson_iter_t x, y, z;
    switch (a->ops->kind) {
    case A_SUM:
        sum_into(&a->v, bson_iter_value((bson_iter_t *)p));
        return 0;
    case A_AVG:
        if (sub_field(p, "s", &x)) {
            if (a->count == 0)
                a->v = (bson_value_t){.value_type = BSON_TYPE_INT32};
            sum_into(&a->v, bson_iter_value(&x));
        }
        if (sub_field(p, "c", &y))
            a->count += bson_iter_as_int64(&y);
        return 0;
    case A_MIN:
    case A_MAX:
        if (sub_field(p, "v", &x))
            return agg_acc_add(a, bson_iter_value(&x), err);
        return 0;
    case A_FIRST:
    case A_LAST:
        if (sub_field(p, "h", &y)) {
            bson_value_t missing = {.value_type = BSON_TYPE_EOD};
            bool has_v = sub_field(p, "v", &x);
            return agg_acc_add(a, has_v ? bson_iter_value(&x) : &missing, err);
        }
        return 0;
    case A_PUSH:
    case A_ADDTOSET:
        if (!BSON_ITER_HOLDS_ARRAY(p) || !bson_iter_recurse(p, &x))
            return 0;
        while (bson_iter_next(&x)) {
            int rc = agg_acc_add(a, bson_iter_value(&x), err);
            if (rc)
                return rc;
        }
        return 0;
    case A_STDPOP:
    case A_STDSAMP:
        if (sub_field(p, "c", &x) && sub_field(p, "m", &y) && sub_field(p, "q", &z)) {
            int64_t nb = bson_iter_as_int64(&x);
            double mb = bson_iter_as_double(&y), qb = bson_iter_as_double(&z);
            if (nb == 0)
                return 0;
            int64_t n = a->count + nb;
            double d = mb - a->mean;
            a->m2 += qb + d * d * (double)a->count * (double)nb / (double)n;
            a->mean += d * (double)nb / (double)n;
            a->count = n;
        }
        return 0;
    }
    return 0;
}

/* $avg: sum / count, as a double, or a decimal when the sum is one. */
static void append_avg(const agg_acc *a, bson_t *doc, const char *key)
{
    if (a->count == 0) {
        bson_append_null(doc, key, -1);
        return;
    }
    if (a->v.value_type == BSON_TYPE_DECIMAL128) {
        char s[64];
        bson_decimal128_t d;
        snprintf(s, sizeof s, "%.17g", num_double(&a->v) / (double)a->count);
        bson_decimal128_from_string(s, &d);
        bson_append_decimal128(doc, key, -1, &d);
        return;
    }
    long double sum = a->v.value_type == BSON_TYPE_INT64 ? (long double)a->v.value.v_int64
                                                         : (long double)num_double(&a->v);
    bson_append_double(doc, key, -1, (double)(sum / (long double)a->count));
}

void agg_acc_result(const agg_acc *a, bson_t *doc, const char *key)
{
    switch (a->ops->kind) {
    case A_SUM:
        agg_value_append(doc, key, -1, &a->v);
        break;
    case A_AVG:
        append_avg(a, doc, key);
        break;
    case A_MIN:
    case A_MAX:
    case A_FIRST:
    case A_LAST:
        if (a->v.value_type == BSON_TYPE_EOD)
            bson_append_null(doc, key, -1);
        else
            agg_value_append(doc, key, -1, &a->v);
        break;
    case A_PUSH:
    case A_ADDTOSET:
        append_items(a, doc, key);
        break;
    case A_STDPOP:
    case A_STDSAMP: {
        int64_t div = a->ops->kind == A_STDPOP ? a->count : a->count - 1;
        if (a->count == 0 || div <= 0)
            bson_append_null(doc, key, -1);
        else
            bson_append_double(doc, key, -1, sqrt(a->m2 / (double)div));
        break;
    }
    }
}

size_t agg_acc_mem(const agg_acc *a)
{
    return a->mem;
}
