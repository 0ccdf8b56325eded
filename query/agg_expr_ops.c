/*
 * agg_expr_ops.c -- the core expression operators of MongoDB 4.0:
 * comparison ($cmp $eq $ne $gt $gte $lt $lte), boolean ($and $or $not),
 * conditional ($cond in both forms, $ifNull, $switch) and arithmetic ($add
 * $subtract $multiply $divide $mod $abs $ceil $floor $trunc $exp $ln $log
 * $log10 $pow $sqrt), with dates in $add and $subtract.
 *
 * Result types follow MongoDB's: int32 op int32 stays int32 unless it
 * overflows (then int64, then double); a double operand gives a double;
 * a decimal operand gives a decimal.  Decimal $divide and $mod are IEEE
 * 754-2008's (34 digits, agg_dec_divide / agg_dec_mod), sums and products
 * exact where 34 digits suffice (q_num_arith).  Deviation: decimal $exp,
 * $ln, $log, $log10, $pow and $sqrt are computed in long double (about 19
 * significant digits).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "agg_expr_int.h"

/* ---- comparison ------------------------------------------------------------- */

enum { CMP_CMP, CMP_EQ, CMP_NE, CMP_GT, CMP_GTE, CMP_LT, CMP_LTE };

static int cmp_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err,
                    int which)
{
    bson_value_t v[2];
    int rc = agg_eval_kids(e, vars, v, err);
    if (rc)
        return rc;
    int c = agg_value_cmp_expr(&v[0], &v[1]);
    agg_values_destroy(v, 2);
    switch (which) {
    case CMP_CMP: agg_set_int32(out, c < 0 ? -1 : c > 0); break;
    case CMP_EQ: agg_set_bool(out, c == 0); break;
    case CMP_NE: agg_set_bool(out, c != 0); break;
    case CMP_GT: agg_set_bool(out, c > 0); break;
    case CMP_GTE: agg_set_bool(out, c >= 0); break;
    case CMP_LT: agg_set_bool(out, c < 0); break;
    default: agg_set_bool(out, c <= 0); break;
    }
    return 0;
}

#define CMP_FN(fn, which)                                                                 \
    static int fn(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)    \
    {                                                                                     \
        return cmp_eval(e, vars, out, err, which);                                        \
    }
CMP_FN(cmp_cmp, CMP_CMP)
CMP_FN(cmp_eq, CMP_EQ)
CMP_FN(cmp_ne, CMP_NE)
CMP_FN(cmp_gt, CMP_GT)
CMP_FN(cmp_gte, CMP_GTE)
CMP_FN(cmp_lt, CMP_LT)
CMP_FN(cmp_lte, CMP_LTE)

/* ---- boolean ------------------------------------------------------------------- */

static int andor_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err,
                      bool is_and)
{
    for (size_t i = 0; i < e->nkid; i++) {
        bson_value_t v;
        int rc = agg_eval_kid(e, i, vars, &v, err);
        if (rc)
            return rc;
        bool t = agg_value_truthy(&v);
        agg_value_destroy(&v);
        if (t != is_and) {
            agg_set_bool(out, !is_and);
            return 0;
        }
    }
    agg_set_bool(out, is_and);
    return 0;
}

static int and_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    return andor_eval(e, vars, out, err, true);
}

static int or_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    return andor_eval(e, vars, out, err, false);
}

static int not_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    bson_value_t v;
    int rc = agg_eval_kid(e, 0, vars, &v, err);
    if (rc)
        return rc;
    agg_set_bool(out, !agg_value_truthy(&v));
    agg_value_destroy(&v);
    return 0;
}

/* ---- conditional ------------------------------------------------------------------ */

/* {$cond: [if, then, else]} or {$cond: {if, then, else}}. */
static int cond_parse(agg_expr *e, const bson_iter_t *arg, agg_scope *s, md_error *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(arg))
        return agg_parse_nary(e, arg, s, err);
    static const char *const names[3] = {"if", "then", "else"};
    static const int missing_code[3] = {17080, 17081, 17082};
    int rc = agg_parse_named(e, arg, s, names, 3, 17083, "Unrecognized parameter to %s: %s", err);
    if (rc)
        return rc;
    for (int i = 0; i < 3; i++)
        if (!e->kid[i])
            return agg_err(err, missing_code[i], "Missing '%s' parameter to $cond", names[i]);
    return 0;
}

static int cond_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    bson_value_t c;
    int rc = agg_eval_kid(e, 0, vars, &c, err);
    if (rc)
        return rc;
    bool t = agg_value_truthy(&c);
    agg_value_destroy(&c);
    return agg_eval_kid(e, t ? 1 : 2, vars, out, err);
}

static int ifnull_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    int rc = agg_eval_kid(e, 0, vars, out, err);
    if (rc || !agg_nullish(out))
        return rc;
    agg_value_destroy(out);
    return agg_eval_kid(e, 1, vars, out, err);
}

/* {$switch: {branches: [{case, then}, ...], default}}: kid[2i] case,
 * kid[2i+1] then, kid[2n] default (or NULL). */
static int switch_parse(agg_expr *e, const bson_iter_t *arg, agg_scope *s, md_error *err)
{
    bson_iter_t x, br, f;
    agg_expr *def = NULL;
    bool have_def = false;
    int rc;
    if (!BSON_ITER_HOLDS_DOCUMENT(arg))
        return agg_err(err, 40060, "$switch requires an object as an argument, found: %s",
                       q_type_name(bson_iter_type(arg)));
    bson_iter_recurse(arg, &x);
    while (bson_iter_next(&x)) {
        const char *k = bson_iter_key(&x);
        if (!strcmp(k, "branches")) {
            if (!BSON_ITER_HOLDS_ARRAY(&x)) {
                rc = agg_err(err, 40061, "$switch expected an array for 'branches', found: %s",
                             q_type_name(bson_iter_type(&x)));
                goto out_def;
            }
            bson_iter_recurse(&x, &br);
            while (bson_iter_next(&br)) {
                if (!BSON_ITER_HOLDS_DOCUMENT(&br)) {
                    rc = agg_err(err, 40062,
                                 "$switch expected each branch to be an object, found: %s",
                                 q_type_name(bson_iter_type(&br)));
                    goto out_def;
                }
                agg_expr *c = NULL, *t = NULL;
                bson_iter_recurse(&br, &f);
                rc = 0;
                while (!rc && bson_iter_next(&f)) {
                    const char *bk = bson_iter_key(&f);
                    agg_expr **slot = !strcmp(bk, "case") ? &c : !strcmp(bk, "then") ? &t : NULL;
                    if (!slot) {
                        rc = agg_err(err, 40063, "$switch found an unknown argument to a branch: %s",
                                     bk);
                        break;
                    }
                    agg_expr_destroy(*slot);
                    *slot = NULL;
                    rc = agg_expr_parse(&f, s, slot, err);
                }
                if (!rc && !c)
                    rc = agg_err(err, 40064, "$switch requires each branch have a 'case' expression");
                if (!rc && !t)
                    rc = agg_err(err, 40065,
                                 "$switch requires each branch have a 'then' expression.");
                if (rc) {
                    agg_expr_destroy(c);
                    agg_expr_destroy(t);
                    goto out_def;
                }
                agg_node_add(e, c);
                agg_node_add(e, t);
            }
        } else if (!strcmp(k, "default")) {
            agg_expr_destroy(def);
            def = NULL;
            if ((rc = agg_expr_parse(&x, s, &def, err)))
                goto out_def;
            have_def = true;
        } else {
            rc = agg_err(err, 40067, "$switch found an unknown argument: %s", k);
            goto out_def;
        }
    }
    if (e->nkid == 0) {
        rc = agg_err(err, 40068, "$switch requires at least one branch.");
        goto out_def;
    }
    e->flag = have_def;
    agg_node_add(e, def);
    return 0;
out_def:
    agg_expr_destroy(def);
    return rc;
}

static int switch_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    size_t n = (e->nkid - 1) / 2;
    for (size_t i = 0; i < n; i++) {
        bson_value_t c;
        int rc = agg_eval_kid(e, 2 * i, vars, &c, err);
        if (rc)
            return rc;
        bool t = agg_value_truthy(&c);
        agg_value_destroy(&c);
        if (t)
            return agg_eval_kid(e, 2 * i + 1, vars, out, err);
    }
    if (!e->flag)
        return agg_err(err, 40066,
                       "$switch could not find a matching branch for an input, and no default "
                       "was specified.");
    return agg_eval_kid(e, 2 * n, vars, out, err);
}

/* ---- arithmetic ------------------------------------------------------------------ */

static void dec_of(const bson_value_t *v, bson_decimal128_t *d)
{
    char buf[32];
    switch (v->value_type) {
    case BSON_TYPE_DECIMAL128: *d = v->value.v_decimal128; return;
    case BSON_TYPE_DOUBLE: agg_dec_from_double(v->value.v_double, d); return;
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64: {
        int64_t x = v->value_type == BSON_TYPE_INT32 ? v->value.v_int32 : v->value.v_int64;
        snprintf(buf, sizeof buf, "%" PRId64, x);
        bson_decimal128_from_string(buf, d);
        return;
    }
    default: bson_decimal128_from_string("0", d); return;
    }
}

static bool dec_is_zero(const bson_decimal128_t *d)
{
    return q_decimal_ld(d) == 0;
}

static void set_dec_ld(bson_value_t *out, long double x)
{
    bson_decimal128_t d;
    agg_dec_from_ld(x, &d);
    agg_set_decimal(out, &d);
}

static int add_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    agg_sum sum;
    bool have_date = false;
    agg_sum_init(&sum);
    for (size_t i = 0; i < e->nkid; i++) {
        bson_value_t v;
        int rc = agg_eval_kid(e, i, vars, &v, err);
        if (rc)
            return rc;
        if (v.value_type == BSON_TYPE_DATE_TIME) {
            if (have_date)
                return agg_err(err, 16612, "only one date allowed in an $add expression");
            have_date = true;
            bson_value_t n;
            agg_set_int64(&n, v.value.v_datetime);
            agg_sum_add(&sum, &n);
        } else if (agg_is_number(&v)) {
            agg_sum_add(&sum, &v);
        } else if (agg_nullish(&v)) {
            agg_set_null(out);
            return 0;
        } else {
            rc = agg_err(err, 16554, "$add only supports numeric or date types, not %s",
                         agg_type_name(&v));
            agg_value_destroy(&v);
            return rc;
        }
        agg_value_destroy(&v);
    }
    bson_value_t r;
    agg_sum_result(&sum, &r);
    if (!have_date) {
        *out = r;
        return 0;
    }
    long double ms = agg_num_ld(&r);
    if (!(ms >= -9223372036854775808.0L && ms < 9223372036854775808.0L))
        return agg_err(err, 15, "date overflow in $add");
    agg_set_date(out, (int64_t)llroundl(ms));
    return 0;
}

/* The widest numeric type of two values: 0 int, 1 long, 2 double, 3 decimal. */
static int widest(const bson_value_t *a, const bson_value_t *b)
{
    int w = 0;
    const bson_value_t *v[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        int t = v[i]->value_type == BSON_TYPE_INT64        ? 1
                : v[i]->value_type == BSON_TYPE_DOUBLE     ? 2
                : v[i]->value_type == BSON_TYPE_DECIMAL128 ? 3
                                                           : 0;
        w = t > w ? t : w;
    }
    return w;
}

static int64_t to_long(const bson_value_t *v)
{
    switch (v->value_type) {
    case BSON_TYPE_INT32: return v->value.v_int32;
    case BSON_TYPE_INT64: return v->value.v_int64;
    default: {
        long double x = agg_num_ld(v);
        if (isnan(x))
            return 0;
        if (x >= 9223372036854775807.0L)
            return INT64_MAX;
        if (x <= -9223372036854775808.0L)
            return INT64_MIN;
        return (int64_t)x;
    }
    }
}

static void int_or_long(bson_value_t *out, int64_t x)
{
    if (x == (int32_t)x)
        agg_set_int32(out, (int32_t)x);
    else
        agg_set_int64(out, x);
}

static int subtract_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    bson_value_t v[2];
    int rc = agg_eval_kids(e, vars, v, err);
    if (rc)
        return rc;
    const bson_value_t *l = &v[0], *r = &v[1];
    if (agg_is_number(l) && agg_is_number(r)) {
        int w = widest(l, r);
        if (w == 3) {
            q_num x, y, res;
            bson_decimal128_t dr;
            memset(&x, 0, sizeof x);
            memset(&y, 0, sizeof y);
            x.t = y.t = BSON_TYPE_DECIMAL128;
            dec_of(l, &x.dec);
            dec_of(r, &dr);
            dr.high ^= 1ull << 63; /* negate */
            y.dec = dr;
            q_num_arith(false, &x, &y, &res);
            agg_set_decimal(out, &res.dec);
        } else if (w == 2) {
            agg_set_double(out, agg_num_double(l) - agg_num_double(r));
        } else {
            int64_t d;
            if (__builtin_sub_overflow(to_long(l), to_long(r), &d))
                agg_set_double(out, agg_num_double(l) - agg_num_double(r));
            else if (w == 1)
                agg_set_int64(out, d);
            else
                int_or_long(out, d);
        }
    } else if (agg_nullish(l) || agg_nullish(r)) {
        agg_set_null(out);
    } else if (l->value_type == BSON_TYPE_DATE_TIME) {
        if (r->value_type == BSON_TYPE_DATE_TIME)
            agg_set_int64(out, (int64_t)((uint64_t)l->value.v_datetime - (uint64_t)r->value.v_datetime));
        else if (agg_is_number(r))
            agg_set_date(out, (int64_t)((uint64_t)l->value.v_datetime - (uint64_t)to_long(r)));
        else
            rc = agg_err(err, 16613, "cant $subtract a %s from a Date", agg_type_name(r));
    } else {
        rc = agg_err(err, 16556, "cant $subtract a%s from a %s", agg_type_name(r),
                     agg_type_name(l));
    }
    agg_values_destroy(v, 2);
    return rc;
}

static int multiply_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    double dp = 1;
    int64_t lp = 1;
    q_num decp;
    int type = 0;
    memset(&decp, 0, sizeof decp);
    decp.t = BSON_TYPE_DECIMAL128;
    for (size_t i = 0; i < e->nkid; i++) {
        bson_value_t v;
        int rc = agg_eval_kid(e, i, vars, &v, err);
        if (rc)
            return rc;
        if (agg_is_number(&v)) {
            int old = type, w = widest(&v, &v);
            type = w > type ? w : type;
            if (type == 3) {
                if (old != 3) {
                    bson_value_t p;
                    if (old == 2)
                        agg_set_double(&p, dp);
                    else
                        agg_set_int64(&p, lp);
                    dec_of(&p, &decp.dec);
                }
                q_num y, r;
                memset(&y, 0, sizeof y);
                y.t = BSON_TYPE_DECIMAL128;
                dec_of(&v, &y.dec);
                q_num_arith(true, &decp, &y, &r);
                decp = r;
            } else {
                dp *= agg_num_double(&v);
                if (__builtin_mul_overflow(lp, to_long(&v), &lp))
                    type = 2;
            }
        } else if (agg_nullish(&v)) {
            agg_set_null(out);
            return 0;
        } else {
            rc = agg_err(err, 16555, "$multiply only supports numeric types, not %s",
                         agg_type_name(&v));
            agg_value_destroy(&v);
            return rc;
        }
        agg_value_destroy(&v);
    }
    switch (type) {
    case 0: int_or_long(out, lp); break;
    case 1: agg_set_int64(out, lp); break;
    case 2: agg_set_double(out, dp); break;
    default: agg_set_decimal(out, &decp.dec); break;
    }
    return 0;
}

static int divide_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    bson_value_t v[2];
    int rc = agg_eval_kids(e, vars, v, err);
    if (rc)
        return rc;
    const bson_value_t *l = &v[0], *r = &v[1];
    if (agg_is_number(l) && agg_is_number(r)) {
        if (widest(l, r) == 3) {
            bson_decimal128_t a, b;
            dec_of(l, &a);
            dec_of(r, &b);
            bson_decimal128_t q;
            if (dec_is_zero(&b))
                rc = agg_err(err, 16608, "can't $divide by zero");
            else if (agg_dec_divide(&a, &b, &q))
                agg_set_decimal(out, &q);
            else
                set_dec_ld(out, q_decimal_ld(&a) / q_decimal_ld(&b));
        } else {
            double d = agg_num_double(r);
            if (d == 0)
                rc = agg_err(err, 16608, "can't $divide by zero");
            else
                agg_set_double(out, agg_num_double(l) / d);
        }
    } else if (agg_nullish(l) || agg_nullish(r)) {
        agg_set_null(out);
    } else {
        rc = agg_err(err, 16609, "$divide only supports numeric types, not %s and %s",
                     agg_type_name(l), agg_type_name(r));
    }
    agg_values_destroy(v, 2);
    return rc;
}

static bool integral(const bson_value_t *v)
{
    int32_t x;
    return agg_num_int32(v, &x);
}

static int mod_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    bson_value_t v[2];
    int rc = agg_eval_kids(e, vars, v, err);
    if (rc)
        return rc;
    const bson_value_t *l = &v[0], *r = &v[1];
    bson_type_t lt = l->value_type, rt = r->value_type;
    if (agg_is_number(l) && agg_is_number(r)) {
        if (lt == BSON_TYPE_DECIMAL128 || rt == BSON_TYPE_DECIMAL128) {
            bson_decimal128_t a, b;
            dec_of(l, &a);
            dec_of(r, &b);
            bson_decimal128_t m;
            if (dec_is_zero(&b))
                rc = agg_err(err, 16610, "can't $mod by zero");
            else if (agg_dec_mod(&a, &b, &m))
                agg_set_decimal(out, &m);
            else
                set_dec_ld(out, fmodl(q_decimal_ld(&a), q_decimal_ld(&b)));
        } else if (agg_num_double(r) == 0) {
            rc = agg_err(err, 16610, "can't $mod by zero");
        } else if (lt == BSON_TYPE_DOUBLE || (rt == BSON_TYPE_DOUBLE && !integral(r))) {
            agg_set_double(out, fmod(agg_num_double(l), agg_num_double(r)));
        } else if (lt == BSON_TYPE_INT64 || rt == BSON_TYPE_INT64) {
            int64_t a = to_long(l), b = to_long(r);
            agg_set_int64(out, b == -1 ? 0 : a % b);
        } else {
            int32_t a = (int32_t)to_long(l), b = (int32_t)to_long(r);
            agg_set_int32(out, b == -1 ? 0 : a % b);
        }
    } else if (agg_nullish(l) || agg_nullish(r)) {
        agg_set_null(out);
    } else {
        rc = agg_err(err, 16611, "$mod only supports numeric types, not %s and %s",
                     agg_type_name(l), agg_type_name(r));
    }
    agg_values_destroy(v, 2);
    return rc;
}

/* ExpressionSingleNumericArg: null for nullish, 28765 for non-numbers. */
static int unary_arg(const agg_expr *e, agg_vars *vars, bson_value_t *v, bson_value_t *out,
                     md_error *err, bool *done)
{
    *done = true;
    int rc = agg_eval_kid(e, 0, vars, v, err);
    if (rc)
        return rc;
    if (agg_nullish(v)) {
        agg_set_null(out);
        return 0;
    }
    if (!agg_is_number(v)) {
        rc = agg_err(err, 28765, "%s only supports numeric types, not %s", e->op->name,
                     agg_type_name(v));
        agg_value_destroy(v);
        return rc;
    }
    *done = false;
    return 0;
}

static int abs_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    bson_value_t v;
    bool done;
    int rc = unary_arg(e, vars, &v, out, err, &done);
    if (rc || done)
        return rc;
    switch (v.value_type) {
    case BSON_TYPE_INT32:
        if (v.value.v_int32 == INT32_MIN)
            agg_set_int64(out, -(int64_t)INT32_MIN);
        else
            agg_set_int32(out, v.value.v_int32 < 0 ? -v.value.v_int32 : v.value.v_int32);
        break;
    case BSON_TYPE_INT64:
        if (v.value.v_int64 == INT64_MIN)
            return agg_err(err, 28680, "can't take $abs of long long min");
        agg_set_int64(out, v.value.v_int64 < 0 ? -v.value.v_int64 : v.value.v_int64);
        break;
    case BSON_TYPE_DOUBLE: agg_set_double(out, fabs(v.value.v_double)); break;
    default: {
        bson_decimal128_t d = v.value.v_decimal128;
        d.high &= ~(1ull << 63);
        agg_set_decimal(out, &d);
        break;
    }
    }
    return 0;
}

/* $ceil $floor $trunc: integers unchanged; doubles and decimals rounded. */
static int round_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err,
                      long double (*fn)(long double))
{
    bson_value_t v;
    bool done;
    int rc = unary_arg(e, vars, &v, out, err, &done);
    if (rc || done)
        return rc;
    switch (v.value_type) {
    case BSON_TYPE_DOUBLE: agg_set_double(out, (double)fn(v.value.v_double)); break;
    case BSON_TYPE_DECIMAL128: {
        long double x = q_decimal_ld(&v.value.v_decimal128);
        if (isnan(x) || isinf(x)) {
            *out = v;
            return 0;
        }
        char buf[64];
        bson_decimal128_t d;
        snprintf(buf, sizeof buf, "%.0Lf", fn(x));
        bson_decimal128_from_string(buf, &d);
        agg_set_decimal(out, &d);
        break;
    }
    default: *out = v; return 0;
    }
    return 0;
}

static int ceil_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    return round_eval(e, vars, out, err, ceill);
}

static int floor_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    return round_eval(e, vars, out, err, floorl);
}

static int trunc_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    return round_eval(e, vars, out, err, truncl);
}

/* $exp $ln $log10 $sqrt: a double (or, for a decimal, a decimal); `code`
 * and `msg` for an argument out of the domain (lo: the smallest allowed,
 * lo_incl: allowed itself). */
static int math1_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err,
                      long double (*fn)(long double), int code, const char *msg, bool check,
                      bool zero_ok)
{
    bson_value_t v;
    bool done;
    int rc = unary_arg(e, vars, &v, out, err, &done);
    if (rc || done)
        return rc;
    long double x = agg_num_ld(&v);
    if (check && !(zero_ok ? x >= 0 : x > 0) && !isnan(x)) {
        q_buf b;
        q_buf_init(&b);
        agg_value_render(&b, &v);
        rc = agg_err(err, code, msg, q_buf_cstr(&b));
        q_buf_cleanup(&b);
        return rc;
    }
    if (v.value_type == BSON_TYPE_DECIMAL128)
        set_dec_ld(out, fn(x));
    else
        agg_set_double(out, (double)fn(x));
    return 0;
}

static int exp_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    return math1_eval(e, vars, out, err, expl, 0, "", false, false);
}

static int ln_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    return math1_eval(e, vars, out, err, logl, 28766,
                      "$ln's argument must be a positive number, but %s", true, false);
}

static int log10_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    return math1_eval(e, vars, out, err, log10l, 28761,
                      "$log10's argument must be a positive number, but %s", true, false);
}

static int sqrt_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    bson_value_t v;
    bool done;
    int rc = unary_arg(e, vars, &v, out, err, &done);
    if (rc || done)
        return rc;
    long double x = agg_num_ld(&v);
    if (x < 0)
        return agg_err(err, 28714, "$sqrt's argument must be greater than or equal to 0");
    if (v.value_type == BSON_TYPE_DECIMAL128)
        set_dec_ld(out, sqrtl(x));
    else
        agg_set_double(out, sqrt((double)x));
    return 0;
}

static int log_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    bson_value_t v[2];
    int rc = agg_eval_kids(e, vars, v, err);
    if (rc)
        return rc;
    const bson_value_t *a = &v[0], *b = &v[1];
    if (agg_nullish(a) || agg_nullish(b)) {
        agg_set_null(out);
    } else if (!agg_is_number(a)) {
        rc = agg_err(err, 28756, "$log's argument must be numeric, not %s", agg_type_name(a));
    } else if (!agg_is_number(b)) {
        rc = agg_err(err, 28757, "$log's base must be numeric, not %s", agg_type_name(b));
    } else {
        long double x = agg_num_ld(a), base = agg_num_ld(b);
        bool dec = widest(a, b) == 3;
        if (dec && x > 0 && base > 0 && base != 1) {
            set_dec_ld(out, logl(x) / logl(base));
        } else if (!(x > 0 || isnan(x))) {
            rc = agg_err(err, 28758, "$log's argument must be a positive number, but is %g",
                         (double)x);
        } else if (!((base > 0 && base != 1) || isnan(base))) {
            rc = agg_err(err, 28759,
                         "$log's base must be a positive number not equal to 1, but is %g",
                         (double)base);
        } else {
            agg_set_double(out, log((double)x) / log((double)base));
        }
    }
    agg_values_destroy(v, 2);
    return rc;
}

static int pow_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    bson_value_t v[2];
    int rc = agg_eval_kids(e, vars, v, err);
    if (rc)
        return rc;
    const bson_value_t *b = &v[0], *x = &v[1];
    if (agg_nullish(b) || agg_nullish(x)) {
        agg_set_null(out);
        goto out;
    }
    if (!agg_is_number(b)) {
        rc = agg_err(err, 28762, "$pow's base must be numeric, not %s", agg_type_name(b));
        goto out;
    }
    if (!agg_is_number(x)) {
        rc = agg_err(err, 28763, "$pow's exponent must be numeric, not %s", agg_type_name(x));
        goto out;
    }
    long double bd = agg_num_ld(b), xd = agg_num_ld(x);
    if (bd == 0 && xd < 0) {
        rc = agg_err(err, 28764, "$pow cannot take a base of 0 and a negative exponent");
        goto out;
    }
    int w = widest(b, x);
    if (w == 3) {
        set_dec_ld(out, powl(bd, xd));
        goto out;
    }
    if (w == 2) {
        agg_set_double(out, pow((double)bd, (double)xd));
        goto out;
    }
    bool is_long = w == 1;
    int64_t bl = to_long(b), xl = to_long(x), r = 1;
    if (bl == 0 || bl == 1) {
        r = bl == 0 ? (xl == 0 ? 1 : 0) : 1;
    } else if (bl == -1) {
        r = xl % 2 == 0 ? 1 : -1;
    } else if (xl > 63 || xl < 0) {
        agg_set_double(out, pow((double)bl, (double)xl));
        goto out;
    } else {
        for (int64_t i = 0; i < xl; i++) {
            if (__builtin_mul_overflow(r, bl, &r)) {
                agg_set_double(out, pow((double)bl, (double)xl));
                goto out;
            }
        }
    }
    if (is_long)
        agg_set_int64(out, r);
    else
        int_or_long(out, r);
out:
    agg_values_destroy(v, 2);
    return rc;
}

const agg_op agg_ops_core[] = {
    {"$cmp", 2, 2, NULL, cmp_cmp, NULL},
    {"$eq", 2, 2, NULL, cmp_eq, NULL},
    {"$ne", 2, 2, NULL, cmp_ne, NULL},
    {"$gt", 2, 2, NULL, cmp_gt, NULL},
    {"$gte", 2, 2, NULL, cmp_gte, NULL},
    {"$lt", 2, 2, NULL, cmp_lt, NULL},
    {"$lte", 2, 2, NULL, cmp_lte, NULL},
    {"$and", 0, -1, NULL, and_eval, NULL},
    {"$or", 0, -1, NULL, or_eval, NULL},
    {"$not", 1, 1, NULL, not_eval, NULL},
    {"$cond", 3, 3, cond_parse, cond_eval, NULL},
    {"$ifNull", 2, 2, NULL, ifnull_eval, NULL},
    {"$switch", 1, 1, switch_parse, switch_eval, NULL},
    {"$add", 0, -1, NULL, add_eval, NULL},
    {"$subtract", 2, 2, NULL, subtract_eval, NULL},
    {"$multiply", 0, -1, NULL, multiply_eval, NULL},
    {"$divide", 2, 2, NULL, divide_eval, NULL},
    {"$mod", 2, 2, NULL, mod_eval, NULL},
    {"$abs", 1, 1, NULL, abs_eval, NULL},
    {"$ceil", 1, 1, NULL, ceil_eval, NULL},
    {"$floor", 1, 1, NULL, floor_eval, NULL},
    {"$trunc", 1, 1, NULL, trunc_eval, NULL},
    {"$exp", 1, 1, NULL, exp_eval, NULL},
    {"$ln", 1, 1, NULL, ln_eval, NULL},
    {"$log", 2, 2, NULL, log_eval, NULL},
    {"$log10", 1, 1, NULL, log10_eval, NULL},
    {"$pow", 2, 2, NULL, pow_eval, NULL},
    {"$sqrt", 1, 1, NULL, sqrt_eval, NULL},
    {NULL, 0, 0, NULL, NULL, NULL},
};
