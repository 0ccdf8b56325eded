/*
 * agg_value.c -- values of aggregation expressions (bson_value_t, with
 * BSON_TYPE_EOD for MongoDB's "missing"): comparison, truthiness, copies,
 * numbers, and small builders shared by the operator files.
 *
 * Comparison is q_value_cmp's (q_value.c), not a second implementation: a
 * value is appended to a one-field document (inline storage, no allocation
 * for small values) and compared through an iterator.  agg_value_cmp
 * treats missing as null (the contract in agg_expr.h, for stages that sort
 * and group); the comparison operators use agg_value_cmp_expr, where
 * missing ranks with undefined, below null, as MongoDB's Value::compare
 * ({$eq: ["$nosuchfield", null]} is false in MongoDB 4.0).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "agg_expr_int.h"
#include "q_path.h"

/* ---- comparison ----------------------------------------------------------- */

/* v as a one-field document; missing becomes `missing_as`. */
static void wrap(bson_t *b, const bson_value_t *v, bson_type_t missing_as, bson_iter_t *it)
{
    bson_init(b);
    if (agg_missing(v)) {
        if (missing_as == BSON_TYPE_NULL)
            bson_append_null(b, "", 0);
        else
            bson_append_undefined(b, "", 0);
    } else {
        bson_append_value(b, "", 0, v);
    }
    bson_iter_init(it, b);
    bson_iter_next(it);
}

/* An int32, int64 or double as a long double (exact for all three). */
static bool binary_number(const bson_value_t *v, long double *ld)
{
    switch (v->value_type) {
    case BSON_TYPE_INT32: *ld = v->value.v_int32; return true;
    case BSON_TYPE_INT64: *ld = (long double)v->value.v_int64; return true;
    case BSON_TYPE_DOUBLE: *ld = v->value.v_double; return true;
    default: return false;
    }
}

static int cmp_as(const bson_value_t *a, const bson_value_t *b, bson_type_t missing_as)
{
    /* two binary numbers (what $sort and $group mostly meet) compare as
     * q_value_cmp's cmp_numbers does, without wrapping both in documents */
    long double x, y;
    if (binary_number(a, &x) && binary_number(b, &y))
        return q_ld_cmp(x, y);
    bson_t da, db;
    bson_iter_t ia, ib;
    wrap(&da, a, missing_as, &ia);
    wrap(&db, b, missing_as, &ib);
    int c = q_value_cmp(&ia, &ib);
    bson_destroy(&da);
    bson_destroy(&db);
    return c;
}

int agg_value_cmp(const bson_value_t *a, const bson_value_t *b)
{
    return cmp_as(a, b, BSON_TYPE_NULL);
}

int agg_value_cmp_expr(const bson_value_t *a, const bson_value_t *b)
{
    return cmp_as(a, b, BSON_TYPE_UNDEFINED);
}

bool agg_value_truthy(const bson_value_t *v)
{
    switch (v->value_type) {
    case BSON_TYPE_EOD:
    case BSON_TYPE_NULL:
    case BSON_TYPE_UNDEFINED: return false;
    case BSON_TYPE_BOOL: return v->value.v_bool;
    case BSON_TYPE_INT32: return v->value.v_int32 != 0;
    case BSON_TYPE_INT64: return v->value.v_int64 != 0;
    case BSON_TYPE_DOUBLE: return v->value.v_double != 0; /* NaN is true */
    case BSON_TYPE_DECIMAL128: { /* NaN and the infinities are true */
        bool neg;
        q_u128 coef;
        int exp;
        return q_dec_split(&v->value.v_decimal128, &neg, &coef, &exp) != Q_DEC_FINITE ||
               coef != 0;
    }
    default: return true;
    }
}

/* ---- ownership -------------------------------------------------------------- */

void agg_value_copy(const bson_value_t *src, bson_value_t *dst)
{
    if (agg_missing(src)) {
        agg_set_missing(dst);
        return;
    }
    bson_value_copy(src, dst);
}

void agg_value_destroy(bson_value_t *v)
{
    if (!v)
        return;
    if (!agg_missing(v))
        bson_value_destroy(v);
    agg_set_missing(v);
}

void agg_values_destroy(bson_value_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        agg_value_destroy(&v[i]);
}

void agg_value_append(bson_t *doc, const char *key, int keylen, const bson_value_t *v)
{
    if (!agg_missing(v))
        bson_append_value(doc, key, keylen, v);
}

void agg_value_from_iter(const bson_iter_t *it, bson_value_t *out)
{
    bson_value_copy(bson_iter_value((bson_iter_t *)it), out);
}

/* ---- setters ------------------------------------------------------------------ */

void agg_set_missing(bson_value_t *v)
{
    memset(v, 0, sizeof *v);
    v->value_type = BSON_TYPE_EOD;
}

void agg_set_null(bson_value_t *v)
{
    memset(v, 0, sizeof *v);
    v->value_type = BSON_TYPE_NULL;
}

void agg_set_bool(bson_value_t *v, bool b)
{
    memset(v, 0, sizeof *v);
    v->value_type = BSON_TYPE_BOOL;
    v->value.v_bool = b;
}

void agg_set_int32(bson_value_t *v, int32_t i)
{
    memset(v, 0, sizeof *v);
    v->value_type = BSON_TYPE_INT32;
    v->value.v_int32 = i;
}

void agg_set_int64(bson_value_t *v, int64_t i)
{
    memset(v, 0, sizeof *v);
    v->value_type = BSON_TYPE_INT64;
    v->value.v_int64 = i;
}

void agg_set_double(bson_value_t *v, double d)
{
    memset(v, 0, sizeof *v);
    v->value_type = BSON_TYPE_DOUBLE;
    v->value.v_double = d;
}

void agg_set_decimal(bson_value_t *v, const bson_decimal128_t *d)
{
    memset(v, 0, sizeof *v);
    v->value_type = BSON_TYPE_DECIMAL128;
    v->value.v_decimal128 = *d;
}

void agg_set_date(bson_value_t *v, int64_t ms)
{
    memset(v, 0, sizeof *v);
    v->value_type = BSON_TYPE_DATE_TIME;
    v->value.v_datetime = ms;
}

void agg_set_utf8(bson_value_t *v, const char *s, size_t len)
{
    memset(v, 0, sizeof *v);
    v->value_type = BSON_TYPE_UTF8;
    v->value.v_utf8.str = bson_malloc(len + 1);
    if (len)
        memcpy(v->value.v_utf8.str, s, len);
    v->value.v_utf8.str[len] = '\0';
    v->value.v_utf8.len = (uint32_t)len;
}

void agg_set_doc_steal(bson_value_t *v, bson_t *b, bool is_array)
{
    uint32_t len;
    memset(v, 0, sizeof *v);
    v->value_type = is_array ? BSON_TYPE_ARRAY : BSON_TYPE_DOCUMENT;
    v->value.v_doc.data = bson_destroy_with_steal(b, true, &len);
    v->value.v_doc.data_len = len;
}

bool agg_iter_init(bson_iter_t *it, const bson_value_t *v)
{
    assert(v->value_type == BSON_TYPE_ARRAY || v->value_type == BSON_TYPE_DOCUMENT);
    return bson_iter_init_from_data(it, v->value.v_doc.data, v->value.v_doc.data_len);
}

uint32_t agg_array_len(const bson_value_t *v)
{
    bson_iter_t it;
    uint32_t n = 0;
    if (agg_iter_init(&it, v))
        while (bson_iter_next(&it))
            n++;
    return n;
}

void agg_arr_init(agg_arr *a)
{
    bson_init(&a->b);
    a->n = 0;
}

void agg_arr_push(agg_arr *a, const bson_value_t *v)
{
    char buf[16];
    const char *key;
    size_t kl = bson_uint32_to_string(a->n++, &key, buf, sizeof buf);
    if (agg_missing(v)) /* an array cannot hold missing: MongoDB stores null */
        bson_append_null(&a->b, key, (int)kl);
    else
        bson_append_value(&a->b, key, (int)kl, v);
}

void agg_arr_finish(agg_arr *a, bson_value_t *out)
{
    agg_set_doc_steal(out, &a->b, true);
}

/* ---- numbers ------------------------------------------------------------------ */

long double agg_num_ld(const bson_value_t *v)
{
    switch (v->value_type) {
    case BSON_TYPE_INT32: return v->value.v_int32;
    case BSON_TYPE_INT64: return (long double)v->value.v_int64;
    case BSON_TYPE_DOUBLE: return v->value.v_double;
    case BSON_TYPE_DECIMAL128: return q_decimal_ld(&v->value.v_decimal128);
    default: return 0;
    }
}

double agg_num_double(const bson_value_t *v)
{
    return (double)agg_num_ld(v);
}

void agg_num_get(const bson_value_t *v, q_num *n)
{
    memset(n, 0, sizeof *n);
    n->t = v->value_type;
    switch (v->value_type) {
    case BSON_TYPE_INT32: n->i32 = v->value.v_int32; break;
    case BSON_TYPE_INT64: n->i64 = v->value.v_int64; break;
    case BSON_TYPE_DOUBLE: n->d = v->value.v_double; break;
    default: n->dec = v->value.v_decimal128; break;
    }
}

void agg_num_set(bson_value_t *v, const q_num *n)
{
    switch (n->t) {
    case BSON_TYPE_INT32: agg_set_int32(v, n->i32); break;
    case BSON_TYPE_INT64: agg_set_int64(v, n->i64); break;
    case BSON_TYPE_DOUBLE: agg_set_double(v, n->d); break;
    default: agg_set_decimal(v, &n->dec); break;
    }
}

void agg_dec_from_ld(long double x, bson_decimal128_t *d)
{
    char s[64];
    if (isnan(x))
        snprintf(s, sizeof s, "NaN");
    else if (isinf(x))
        snprintf(s, sizeof s, "%sInfinity", x < 0 ? "-" : "");
    else
        snprintf(s, sizeof s, "%.19Lg", x);
    bson_decimal128_from_string(s, d);
}

/* Decimal128(double): 15 significant digits, as MongoDB's conversion. */
void agg_dec_from_double(double x, bson_decimal128_t *d)
{
    char s[64];
    if (isnan(x))
        snprintf(s, sizeof s, "NaN");
    else if (isinf(x))
        snprintf(s, sizeof s, "%sInfinity", x < 0 ? "-" : "");
    else
        snprintf(s, sizeof s, "%.14e", x);
    bson_decimal128_from_string(s, d);
}

bool agg_num_int64(const bson_value_t *v, int64_t *out)
{
    switch (v->value_type) {
    case BSON_TYPE_INT32: *out = v->value.v_int32; return true;
    case BSON_TYPE_INT64: *out = v->value.v_int64; return true;
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_DECIMAL128: {
        long double x = agg_num_ld(v);
        if (!(x >= -9223372036854775808.0L && x < 9223372036854775808.0L) || x != truncl(x))
            return false;
        *out = (int64_t)x;
        return true;
    }
    default: return false;
    }
}

bool agg_num_int32(const bson_value_t *v, int32_t *out)
{
    int64_t x;
    if (!agg_num_int64(v, &x) || x != (int32_t)x)
        return false;
    *out = (int32_t)x;
    return true;
}

void agg_value_add_numbers(const bson_value_t *a, const bson_value_t *b, bson_value_t *out)
{
    q_num x, y, r;
    assert(agg_is_number(a) && agg_is_number(b));
    agg_num_get(a, &x);
    agg_num_get(b, &y);
    if (q_num_arith(false, &x, &y, &r)) {
        agg_num_set(out, &r);
        return;
    }
    /* int64 overflow: the sum as a double, as $add and $sum do */
    agg_set_double(out, (double)agg_num_ld(a) + (double)agg_num_ld(b));
}

/* ---- rendering -------------------------------------------------------------------- */

void agg_value_render(q_buf *b, const bson_value_t *v)
{
    bson_t d;
    bson_iter_t it;
    if (agg_missing(v)) {
        q_buf_puts(b, "missing");
        return;
    }
    wrap(&d, v, BSON_TYPE_NULL, &it);
    q_render_value(b, &it);
    bson_destroy(&d);
}

const char *agg_type_name(const bson_value_t *v)
{
    return q_type_name(v->value_type);
}

/* ---- sums ------------------------------------------------------------------------ */

void agg_sum_init(agg_sum *s)
{
    memset(s, 0, sizeof *s);
    bson_decimal128_from_string("0", &s->dec);
}

void agg_sum_add(agg_sum *s, const bson_value_t *v)
{
    switch (v->value_type) {
    case BSON_TYPE_DECIMAL128: {
        q_num x, y, r;
        memset(&x, 0, sizeof x);
        x.t = y.t = BSON_TYPE_DECIMAL128;
        x.dec = s->dec;
        y.dec = v->value.v_decimal128;
        q_num_arith(false, &x, &y, &r);
        s->dec = r.dec;
        s->has_dec = true;
        s->type = 3;
        return;
    }
    case BSON_TYPE_DOUBLE:
        s->ld += v->value.v_double;
        s->dbl = true;
        if (s->type < 2)
            s->type = 2;
        return;
    case BSON_TYPE_INT64:
    case BSON_TYPE_INT32: {
        int64_t x = v->value_type == BSON_TYPE_INT32 ? v->value.v_int32 : v->value.v_int64;
        s->ld += (long double)x;
        if (!s->ovf && __builtin_add_overflow(s->i, x, &s->i))
            s->ovf = true;
        if (v->value_type == BSON_TYPE_INT64 && s->type < 1)
            s->type = 1;
        return;
    }
    default: return;
    }
}

void agg_sum_result(const agg_sum *s, bson_value_t *out)
{
    if (s->type == 3) {
        bson_decimal128_t d;
        q_num x, y, r;
        char buf[32];
        if (s->ld == 0 && !s->dbl) {
            agg_set_decimal(out, &s->dec);
            return;
        }
        if (!s->dbl && !s->ovf) {
            snprintf(buf, sizeof buf, "%" PRId64, s->i);
            bson_decimal128_from_string(buf, &d);
        } else {
            agg_dec_from_double((double)s->ld, &d);
        }
        memset(&x, 0, sizeof x);
        memset(&y, 0, sizeof y);
        x.t = y.t = BSON_TYPE_DECIMAL128;
        x.dec = s->dec;
        y.dec = d;
        q_num_arith(false, &x, &y, &r);
        agg_set_decimal(out, &r.dec);
        return;
    }
    if (s->type < 2 && !s->ovf) {
        if (s->type == 0 && s->i == (int32_t)s->i)
            agg_set_int32(out, (int32_t)s->i);
        else
            agg_set_int64(out, s->i);
        return;
    }
    agg_set_double(out, (double)s->ld);
}

/* ---- exact decimal division and remainder ---------------------------------------- *
 * IEEE 754-2008 decimal128 semantics for finite operands: the quotient is
 * exact when 34 digits hold it (with the exponent nearest the ideal
 * exponent ea - eb), else rounded half-even to 34 digits; the remainder
 * a - b * trunc(a / b) is exact.  Infinities and NaN go through long
 * double (the caller's fallback: false).
 */
bool agg_dec_divide(const bson_decimal128_t *a, const bson_decimal128_t *b, bson_decimal128_t *r)
{
    bool na, nb;
    q_u128 ca, cb;
    int ea, eb;
    if (q_dec_split(a, &na, &ca, &ea) != Q_DEC_FINITE || q_dec_split(b, &nb, &cb, &eb) != Q_DEC_FINITE || cb == 0)
        return false;
    int exp = ea - eb;
    q_u128 q = ca / cb, rem = ca % cb;
    /* more digits while the remainder is not zero and there is room */
    while (rem != 0 && q < q_dec_ten34() / 10) {
        rem *= 10;
        q = q * 10 + rem / cb;
        rem %= cb;
        exp--;
    }
    if (rem != 0) {
        q_u128 twice = rem * 2;
        if (twice > cb || (twice == cb && (q & 1)))
            q++;
        if (q >= q_dec_ten34()) {
            q /= 10; /* 10^34 exactly: drop a zero */
            exp++;
        }
    }
    /* a huge quotient: shed digits (rounding half-even) */
    while (q >= q_dec_ten34()) {
        q_u128 d = q % 10;
        q /= 10;
        exp++;
        if (d > 5 || (d == 5 && (q & 1)))
            q++;
    }
    return q_dec_join(na != nb, q, exp, r);
}

bool agg_dec_mod(const bson_decimal128_t *a, const bson_decimal128_t *b, bson_decimal128_t *r)
{
    bool na, nb;
    q_u128 ca, cb;
    int ea, eb;
    if (q_dec_split(a, &na, &ca, &ea) != Q_DEC_FINITE || q_dec_split(b, &nb, &cb, &eb) != Q_DEC_FINITE || cb == 0)
        return false;
    int e = ea < eb ? ea : eb;
    for (int i = ea; i > e; i--) {
        if (ca > q_dec_ten34() * 1000)
            return false;
        ca *= 10;
    }
    for (int i = eb; i > e; i--) {
        if (cb > q_dec_ten34() * 1000)
            return false;
        cb *= 10;
    }
    return q_dec_join(na, ca % cb, e, r); /* the sign of the dividend, as fmod */
}
