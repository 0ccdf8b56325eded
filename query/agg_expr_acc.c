/*
 * agg_expr_acc.c -- $sum $avg $min $max $stdDevPop $stdDevSamp used as
 * expressions (MongoDB 4.0's ExpressionFromAccumulator, allowed in
 * $project and everywhere an expression is): with one argument that is an
 * array they accumulate its elements, otherwise each argument's value.
 *
 * The rules are the accumulators': $sum, $avg and the standard deviations
 * ignore what is not a number; $min and $max ignore null and missing and
 * answer null when nothing is left; $avg of nothing is null, a population
 * deviation of nothing and a sample deviation of fewer than two values
 * too.  (The $group accumulators themselves live with the pipeline.)
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "agg_expr_int.h"

enum { ACC_SUM, ACC_AVG, ACC_MIN, ACC_MAX, ACC_STDPOP, ACC_STDSAMP };

typedef struct acc_state {
    int which;
    agg_sum sum;
    int64_t count;
    bool dec;
    bson_value_t best; /* $min / $max: owned copy, missing until the first */
    double mean, m2;   /* Welford's online variance */
} acc_state;

static void acc_process(acc_state *a, const bson_value_t *v)
{
    switch (a->which) {
    case ACC_SUM:
    case ACC_AVG:
        if (!agg_is_number(v))
            return;
        agg_sum_add(&a->sum, v);
        a->dec |= v->value_type == BSON_TYPE_DECIMAL128;
        a->count++;
        return;
    case ACC_MIN:
    case ACC_MAX: {
        if (agg_nullish(v))
            return;
        int c = agg_missing(&a->best) ? 0 : agg_value_cmp(v, &a->best);
        if (agg_missing(&a->best) || (a->which == ACC_MIN ? c < 0 : c > 0)) {
            agg_value_destroy(&a->best);
            agg_value_copy(v, &a->best);
        }
        return;
    }
    default: {
        if (!agg_is_number(v))
            return;
        double x = agg_num_double(v);
        a->count++;
        double delta = x - a->mean;
        a->mean += delta / (double)a->count;
        a->m2 += delta * (x - a->mean);
        return;
    }
    }
}

static void acc_result(acc_state *a, bson_value_t *out)
{
    switch (a->which) {
    case ACC_SUM: agg_sum_result(&a->sum, out); return;
    case ACC_AVG: {
        if (a->count == 0) {
            agg_set_null(out);
            return;
        }
        bson_value_t total;
        agg_sum_result(&a->sum, &total);
        if (a->dec) {
            bson_decimal128_t d, n;
            char buf[32];
            snprintf(buf, sizeof buf, "%" PRId64, a->count);
            bson_decimal128_from_string(buf, &n);
            if (!agg_dec_divide(&total.value.v_decimal128, &n, &d))
                agg_dec_from_ld(agg_num_ld(&total) / (long double)a->count, &d);
            agg_set_decimal(out, &d);
        } else {
            agg_set_double(out, agg_num_double(&total) / (double)a->count);
        }
        return;
    }
    case ACC_MIN:
    case ACC_MAX:
        if (agg_missing(&a->best))
            agg_set_null(out);
        else
            *out = a->best;
        agg_set_missing(&a->best);
        return;
    default: {
        int64_t n = a->which == ACC_STDSAMP ? a->count - 1 : a->count;
        if (n <= 0)
            agg_set_null(out);
        else
            agg_set_double(out, sqrt(a->m2 / (double)n));
        return;
    }
    }
}

static int acc_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err,
                    int which)
{
    acc_state a;
    memset(&a, 0, sizeof a);
    a.which = which;
    agg_sum_init(&a.sum);
    agg_set_missing(&a.best);
    for (size_t i = 0; i < e->nkid; i++) {
        bson_value_t v;
        int rc = agg_eval_kid(e, i, vars, &v, err);
        if (rc) {
            agg_value_destroy(&a.best);
            return rc;
        }
        if (e->nkid == 1 && v.value_type == BSON_TYPE_ARRAY) {
            bson_iter_t it;
            agg_iter_init(&it, &v);
            while (bson_iter_next(&it))
                acc_process(&a, bson_iter_value(&it));
        } else {
            acc_process(&a, &v);
        }
        agg_value_destroy(&v);
    }
    acc_result(&a, out);
    agg_value_destroy(&a.best);
    return 0;
}

#define ACC_FN(fn, which)                                                                 \
    static int fn(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)    \
    {                                                                                     \
        return acc_eval(e, vars, out, err, which);                                        \
    }
ACC_FN(sum_eval, ACC_SUM)
ACC_FN(avg_eval, ACC_AVG)
ACC_FN(min_eval, ACC_MIN)
ACC_FN(max_eval, ACC_MAX)
ACC_FN(stdpop_eval, ACC_STDPOP)
ACC_FN(stdsamp_eval, ACC_STDSAMP)

const agg_op agg_ops_acc[] = {
    {"$sum", 0, -1, NULL, sum_eval, NULL},
    {"$avg", 0, -1, NULL, avg_eval, NULL},
    {"$min", 0, -1, NULL, min_eval, NULL},
    {"$max", 0, -1, NULL, max_eval, NULL},
    {"$stdDevPop", 0, -1, NULL, stdpop_eval, NULL},
    {"$stdDevSamp", 0, -1, NULL, stdsamp_eval, NULL},
    {NULL, 0, 0, NULL, NULL, NULL},
};
