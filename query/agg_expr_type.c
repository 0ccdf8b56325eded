/*
 * agg_expr_type.c -- type expressions of MongoDB 4.0: $type and $convert
 * ({input, to, onError, onNull}) with its shorthands $toInt $toLong
 * $toDouble $toDecimal $toString $toDate $toObjectId $toBool.
 *
 * The conversion table is ExpressionConvert's: a pair it does not list
 * (int to date, object to anything but bool, ...) is ConversionFailure
 * (241) "Unsupported conversion from X to Y in $convert with no onError
 * value", and so are a string that is not a number, an overflow, NaN or
 * infinity to an integer; onError catches ConversionFailure only, onNull
 * answers for a null or missing input.  Strings become dates through
 * agg_date_parse (agg_expr_date.c: ISO 8601 forms).  Doubles become strings
 * with "%g", as MongoDB's StringBuilder prints them.
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg_expr_int.h"

#define CODE_CONVERSION_FAILURE 241
#define CODE_FAILED_TO_PARSE 9
#define CODE_BAD_VALUE 2

/* ---- $type ------------------------------------------------------------------------- */

static int type_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    bson_value_t v;
    int rc = agg_eval_kid(e, 0, vars, &v, err);
    if (rc)
        return rc;
    const char *n = agg_type_name(&v);
    agg_set_utf8(out, n, strlen(n));
    agg_value_destroy(&v);
    return 0;
}

/* ---- conversions ------------------------------------------------------------------- */

static int unsupported(const bson_value_t *v, bson_type_t to, md_error *err)
{
    return agg_err(err, CODE_CONVERSION_FAILURE,
                   "Unsupported conversion from %s to %s in $convert with no onError value",
                   agg_type_name(v), q_type_name(to));
}

static int overflow(const bson_value_t *v, md_error *err)
{
    q_buf b;
    q_buf_init(&b);
    agg_value_render(&b, v);
    int rc = agg_err(err, CODE_CONVERSION_FAILURE,
                     "Conversion would overflow target type in $convert with no onError value: "
                     "%s",
                     q_buf_cstr(&b));
    q_buf_cleanup(&b);
    return rc;
}

/* A number from a string, as parseNumberFromStringWithBase (base 10, the
 * whole string, no leading or trailing spaces). */
static int parse_number(const bson_value_t *v, bson_type_t to, bson_value_t *out, md_error *err)
{
    const char *s = v->value.v_utf8.str;
    size_t n = v->value.v_utf8.len;
    char *end;
    if (n == 0 || n > 512 || memchr(s, '\0', n) || s[0] == ' ' || s[0] == '\t' ||
        s[n - 1] == ' ' || s[n - 1] == '\t')
        goto bad;
    errno = 0;
    if (to == BSON_TYPE_INT32 || to == BSON_TYPE_INT64) {
        long long x = strtoll(s, &end, 10);
        if (end != s + n || (s[0] != '-' && s[0] != '+' && (s[0] < '0' || s[0] > '9')))
            goto bad;
        if (errno == ERANGE || (to == BSON_TYPE_INT32 && x != (int32_t)x))
            goto bad;
        if (to == BSON_TYPE_INT32)
            agg_set_int32(out, (int32_t)x);
        else
            agg_set_int64(out, x);
        return 0;
    }
    if (to == BSON_TYPE_DOUBLE) {
        if ((n > 1 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) || strchr(s, 'x'))
            goto bad;
        double d = strtod(s, &end);
        if (end != s + n)
            goto bad;
        agg_set_double(out, d);
        return 0;
    }
    bson_decimal128_t d;
    if (!bson_decimal128_from_string(s, &d))
        goto bad;
    agg_set_decimal(out, &d);
    return 0;
bad:
    return agg_err(err, CODE_CONVERSION_FAILURE,
                   "Failed to parse number '%.*s' in $convert with no onError value: Did not "
                   "consume whole number.",
                   (int)(n > 200 ? 200 : n), s);
}

/* An integer from a double or decimal: NaN, infinity and out of range fail. */
static int float_to_int(const bson_value_t *v, bson_type_t to, bson_value_t *out, md_error *err)
{
    long double x = agg_num_ld(v);
    if (isnan(x))
        return agg_err(err, CODE_CONVERSION_FAILURE,
                       "Attempt to convert NaN value to integer type in $convert with no "
                       "onError value");
    if (isinf(x))
        return agg_err(err, CODE_CONVERSION_FAILURE,
                       "Attempt to convert infinity value to integer type in $convert with no "
                       "onError value");
    long double t = truncl(x);
    if (to == BSON_TYPE_INT32) {
        if (t < -2147483648.0L || t > 2147483647.0L)
            return overflow(v, err);
        agg_set_int32(out, (int32_t)t);
    } else {
        if (t < -9223372036854775808.0L || t >= 9223372036854775808.0L)
            return overflow(v, err);
        agg_set_int64(out, (int64_t)t);
    }
    return 0;
}

static int to_int(const bson_value_t *v, bson_type_t to, bson_value_t *out, md_error *err)
{
    switch (v->value_type) {
    case BSON_TYPE_INT32:
        if (to == BSON_TYPE_INT32)
            agg_set_int32(out, v->value.v_int32);
        else
            agg_set_int64(out, v->value.v_int32);
        return 0;
    case BSON_TYPE_INT64:
        if (to == BSON_TYPE_INT64) {
            agg_set_int64(out, v->value.v_int64);
            return 0;
        }
        if (v->value.v_int64 != (int32_t)v->value.v_int64)
            return overflow(v, err);
        agg_set_int32(out, (int32_t)v->value.v_int64);
        return 0;
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_DECIMAL128: return float_to_int(v, to, out, err);
    case BSON_TYPE_BOOL:
        if (to == BSON_TYPE_INT32)
            agg_set_int32(out, v->value.v_bool);
        else
            agg_set_int64(out, v->value.v_bool);
        return 0;
    case BSON_TYPE_UTF8: return parse_number(v, to, out, err);
    case BSON_TYPE_DATE_TIME:
        if (to == BSON_TYPE_INT64) {
            agg_set_int64(out, v->value.v_datetime);
            return 0;
        }
        /* fall through */
    default: return unsupported(v, to, err);
    }
}

static int to_double(const bson_value_t *v, bson_value_t *out, md_error *err)
{
    switch (v->value_type) {
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
    case BSON_TYPE_DOUBLE: agg_set_double(out, agg_num_double(v)); return 0;
    case BSON_TYPE_DECIMAL128: {
        long double x = agg_num_ld(v);
        if (!isnan(x) && !isinf(x) && (fabsl(x) > DBL_MAX))
            return overflow(v, err);
        agg_set_double(out, (double)x);
        return 0;
    }
    case BSON_TYPE_BOOL: agg_set_double(out, v->value.v_bool ? 1.0 : 0.0); return 0;
    case BSON_TYPE_DATE_TIME: agg_set_double(out, (double)v->value.v_datetime); return 0;
    case BSON_TYPE_UTF8: return parse_number(v, BSON_TYPE_DOUBLE, out, err);
    default: return unsupported(v, BSON_TYPE_DOUBLE, err);
    }
}

static int to_decimal(const bson_value_t *v, bson_value_t *out, md_error *err)
{
    bson_decimal128_t d;
    char s[32];
    switch (v->value_type) {
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
    case BSON_TYPE_DATE_TIME:
    case BSON_TYPE_BOOL: {
        int64_t x = v->value_type == BSON_TYPE_INT32       ? v->value.v_int32
                    : v->value_type == BSON_TYPE_INT64     ? v->value.v_int64
                    : v->value_type == BSON_TYPE_DATE_TIME ? v->value.v_datetime
                                                           : v->value.v_bool;
        snprintf(s, sizeof s, "%" PRId64, x);
        bson_decimal128_from_string(s, &d);
        agg_set_decimal(out, &d);
        return 0;
    }
    case BSON_TYPE_DOUBLE:
        agg_dec_from_double(v->value.v_double, &d);
        agg_set_decimal(out, &d);
        return 0;
    case BSON_TYPE_DECIMAL128: agg_set_decimal(out, &v->value.v_decimal128); return 0;
    case BSON_TYPE_UTF8: return parse_number(v, BSON_TYPE_DECIMAL128, out, err);
    default: return unsupported(v, BSON_TYPE_DECIMAL128, err);
    }
}

static int to_string(const bson_value_t *v, bson_value_t *out, md_error *err)
{
    q_buf b;
    char s[64];
    q_buf_init(&b);
    switch (v->value_type) {
    case BSON_TYPE_DOUBLE: {
        double d = v->value.v_double;
        if (isinf(d))
            q_buf_puts(&b, d < 0 ? "-Infinity" : "Infinity");
        else if (isnan(d))
            q_buf_puts(&b, "NaN");
        else if (d == 0 && signbit(d))
            q_buf_puts(&b, "-0");
        else
            q_buf_printf(&b, "%g", d);
        break;
    }
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
    case BSON_TYPE_DECIMAL128:
    case BSON_TYPE_UTF8:
    case BSON_TYPE_DATE_TIME: agg_coerce_string(v, &b, err); break;
    case BSON_TYPE_BOOL: q_buf_puts(&b, v->value.v_bool ? "true" : "false"); break;
    case BSON_TYPE_OID:
        bson_oid_to_string(&v->value.v_oid, s);
        q_buf_puts(&b, s);
        break;
    default: q_buf_cleanup(&b); return unsupported(v, BSON_TYPE_UTF8, err);
    }
    agg_set_utf8(out, (const char *)b.data, b.len);
    q_buf_cleanup(&b);
    return 0;
}

static int to_date(const bson_value_t *v, bson_value_t *out, md_error *err)
{
    switch (v->value_type) {
    case BSON_TYPE_DATE_TIME: agg_set_date(out, v->value.v_datetime); return 0;
    case BSON_TYPE_INT64: agg_set_date(out, v->value.v_int64); return 0;
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_DECIMAL128: {
        long double x = agg_num_ld(v);
        if (isnan(x) || isinf(x) || x < -9223372036854775808.0L || x >= 9223372036854775808.0L)
            return overflow(v, err);
        agg_set_date(out, (int64_t)truncl(x));
        return 0;
    }
    case BSON_TYPE_OID:
        agg_set_date(out, (int64_t)bson_oid_get_time_t(&v->value.v_oid) * 1000);
        return 0;
    case BSON_TYPE_TIMESTAMP:
        agg_set_date(out, (int64_t)v->value.v_timestamp.timestamp * 1000);
        return 0;
    case BSON_TYPE_UTF8: {
        int64_t ms;
        char why[256];
        if (!agg_date_parse(v->value.v_utf8.str, v->value.v_utf8.len, NULL, &ms, NULL, why,
                            sizeof why))
            return agg_err(err, CODE_CONVERSION_FAILURE,
                           "Error parsing date string '%.*s'; %s",
                           (int)(v->value.v_utf8.len > 200 ? 200 : v->value.v_utf8.len),
                           v->value.v_utf8.str, why);
        agg_set_date(out, ms);
        return 0;
    }
    default: return unsupported(v, BSON_TYPE_DATE_TIME, err);
    }
}

static int to_oid(const bson_value_t *v, bson_value_t *out, md_error *err)
{
    if (v->value_type == BSON_TYPE_OID) {
        agg_value_copy(v, out);
        return 0;
    }
    if (v->value_type != BSON_TYPE_UTF8)
        return unsupported(v, BSON_TYPE_OID, err);
    const char *s = v->value.v_utf8.str;
    size_t n = v->value.v_utf8.len;
    if (n != 24)
        return agg_err(err, CODE_CONVERSION_FAILURE,
                       "Failed to parse objectId '%.*s' in $convert with no onError value: "
                       "Invalid string length for parsing to OID, expected 24 but found %zu",
                       (int)(n > 200 ? 200 : n), s, n);
    if (!bson_oid_is_valid(s, n))
        return agg_err(err, CODE_CONVERSION_FAILURE,
                       "Failed to parse objectId '%s' in $convert with no onError value: "
                       "Invalid character found in hex string",
                       s);
    memset(out, 0, sizeof *out);
    out->value_type = BSON_TYPE_OID;
    bson_oid_init_from_string(&out->value.v_oid, s);
    return 0;
}

static int to_bool(const bson_value_t *v, bson_value_t *out)
{
    agg_set_bool(out, agg_value_truthy(v));
    return 0;
}

/* performConversion. */
static int convert(const bson_value_t *v, bson_type_t to, bson_value_t *out, md_error *err)
{
    switch (to) {
    case BSON_TYPE_DOUBLE: return to_double(v, out, err);
    case BSON_TYPE_UTF8: return to_string(v, out, err);
    case BSON_TYPE_OID: return to_oid(v, out, err);
    case BSON_TYPE_BOOL: return to_bool(v, out);
    case BSON_TYPE_DATE_TIME: return to_date(v, out, err);
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64: return to_int(v, to, out, err);
    case BSON_TYPE_DECIMAL128: return to_decimal(v, out, err);
    default: return unsupported(v, to, err);
    }
}

/* typeFromName, and "missing" (EOD); BadValue for unknown names. */
static int type_from_name(const char *name, bson_type_t *t, md_error *err)
{
    static const bson_type_t all[] = {
        BSON_TYPE_DOUBLE, BSON_TYPE_UTF8,      BSON_TYPE_DOCUMENT,   BSON_TYPE_ARRAY,
        BSON_TYPE_BINARY, BSON_TYPE_UNDEFINED, BSON_TYPE_OID,        BSON_TYPE_BOOL,
        BSON_TYPE_DATE_TIME, BSON_TYPE_NULL,   BSON_TYPE_REGEX,      BSON_TYPE_DBPOINTER,
        BSON_TYPE_CODE,   BSON_TYPE_SYMBOL,    BSON_TYPE_CODEWSCOPE, BSON_TYPE_INT32,
        BSON_TYPE_TIMESTAMP, BSON_TYPE_INT64,  BSON_TYPE_DECIMAL128, BSON_TYPE_MINKEY,
        BSON_TYPE_MAXKEY,
    };
    if (!strcmp(name, "missing")) {
        *t = BSON_TYPE_EOD;
        return 0;
    }
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        if (!strcmp(q_type_name(all[i]), name)) {
            *t = all[i];
            return 0;
        }
    }
    return agg_err(err, CODE_BAD_VALUE, "Unknown type name: %s", name);
}

static bool valid_type_code(int64_t c)
{
    return (c >= 1 && c <= 19) || c == -1 || c == 127;
}

/* computeTargetType. */
static int target_type(const bson_value_t *to, bson_type_t *t, md_error *err)
{
    if (to->value_type == BSON_TYPE_UTF8)
        return type_from_name(to->value.v_utf8.str, t, err);
    if (agg_is_number(to)) {
        int64_t c;
        if (!agg_num_int64(to, &c) || c != (int32_t)c)
            return agg_err(err, CODE_FAILED_TO_PARSE,
                           "In $convert, numeric 'to' argument is not an integer");
        if (!valid_type_code(c))
            return agg_err(err, CODE_FAILED_TO_PARSE,
                           "In $convert, numeric value for 'to' does not correspond to a BSON "
                           "type: %d",
                           (int)c);
        *t = c == -1 ? BSON_TYPE_MINKEY : c == 127 ? BSON_TYPE_MAXKEY : (bson_type_t)c;
        return 0;
    }
    return agg_err(err, CODE_FAILED_TO_PARSE,
                   "$convert's 'to' argument must be a string or number, but is %s",
                   agg_type_name(to));
}

/* {input, to, onError, onNull}: kid[0..3]. */
static int convert_parse(agg_expr *e, const bson_iter_t *arg, agg_scope *s, md_error *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(arg))
        return agg_err(err, CODE_FAILED_TO_PARSE,
                       "$convert expects an object of named arguments but found: %s",
                       q_type_name(bson_iter_type(arg)));
    static const char *const names[4] = {"input", "to", "onError", "onNull"};
    int rc = agg_parse_named(e, arg, s, names, 4, CODE_FAILED_TO_PARSE,
                             "%s found an unknown argument: %s", err);
    if (rc)
        return rc;
    if (!e->kid[0])
        return agg_err(err, CODE_FAILED_TO_PARSE, "Missing 'input' parameter to $convert");
    if (!e->kid[1])
        return agg_err(err, CODE_FAILED_TO_PARSE, "Missing 'to' parameter to $convert");
    return 0;
}

static int convert_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    bson_value_t to, in;
    bson_type_t t = BSON_TYPE_EOD;
    bool have_t = false;
    int rc = agg_eval_kid(e, 1, vars, &to, err);
    if (rc)
        return rc;
    if ((rc = agg_eval_kid(e, 0, vars, &in, err))) {
        agg_value_destroy(&to);
        return rc;
    }
    if (!agg_nullish(&to)) {
        if ((rc = target_type(&to, &t, err)))
            goto out;
        have_t = true;
    }
    if (agg_nullish(&in)) {
        if (e->kid[3])
            rc = agg_eval_kid(e, 3, vars, out, err);
        else
            agg_set_null(out);
        goto out;
    }
    if (!have_t) {
        agg_set_null(out);
        goto out;
    }
    rc = convert(&in, t, out, err);
    if (rc && err && err->code == CODE_CONVERSION_FAILURE && e->kid[2]) {
        agg_value_destroy(out);
        rc = agg_eval_kid(e, 2, vars, out, err);
    }
out:
    agg_value_destroy(&to);
    agg_value_destroy(&in);
    return rc;
}

/* $toInt and the others: {$convert: {input: <arg>, to: T}}; null for
 * null and missing. */
static int to_type_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err,
                        bson_type_t to)
{
    bson_value_t in;
    int rc = agg_eval_kid(e, 0, vars, &in, err);
    if (rc)
        return rc;
    if (agg_nullish(&in))
        agg_set_null(out);
    else
        rc = convert(&in, to, out, err);
    agg_value_destroy(&in);
    return rc;
}

#define TO_FN(fn, t)                                                                      \
    static int fn(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)    \
    {                                                                                     \
        return to_type_eval(e, vars, out, err, t);                                        \
    }
TO_FN(to_int_eval, BSON_TYPE_INT32)
TO_FN(to_long_eval, BSON_TYPE_INT64)
TO_FN(to_double_eval, BSON_TYPE_DOUBLE)
TO_FN(to_decimal_eval, BSON_TYPE_DECIMAL128)
TO_FN(to_string_eval, BSON_TYPE_UTF8)
TO_FN(to_date_eval, BSON_TYPE_DATE_TIME)
TO_FN(to_oid_eval, BSON_TYPE_OID)
TO_FN(to_bool_eval, BSON_TYPE_BOOL)

const agg_op agg_ops_type[] = {
    {"$type", 1, 1, NULL, type_eval, NULL},
    {"$convert", 1, 1, convert_parse, convert_eval, NULL},
    {"$toInt", 1, 1, NULL, to_int_eval, NULL},
    {"$toLong", 1, 1, NULL, to_long_eval, NULL},
    {"$toDouble", 1, 1, NULL, to_double_eval, NULL},
    {"$toDecimal", 1, 1, NULL, to_decimal_eval, NULL},
    {"$toString", 1, 1, NULL, to_string_eval, NULL},
    {"$toDate", 1, 1, NULL, to_date_eval, NULL},
    {"$toObjectId", 1, 1, NULL, to_oid_eval, NULL},
    {"$toBool", 1, 1, NULL, to_bool_eval, NULL},
    {NULL, 0, 0, NULL, NULL, NULL},
};
