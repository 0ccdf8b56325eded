/*
 * agg_expr_string.c -- string expressions of MongoDB 4.0: $concat $substr
 * $substrBytes $substrCP $split $toLower $toUpper $trim $ltrim $rtrim
 * $strLenBytes $strLenCP $indexOfBytes $indexOfCP $strcasecmp, and
 * $regexMatch (MongoDB 4.2's form, {input, regex, options}, over PCRE2
 * through q_regex.c, the pattern compiled at each evaluation).
 *
 * Strings are UTF-8 as BSON stores them; "CP" operators count code points
 * (bytes that are not continuation bytes 10xxxxxx).  $toLower, $toUpper
 * and $strcasecmp fold ASCII letters only, as MongoDB does.  Operators
 * that coerce their argument to a string (Value::coerceToString) take
 * numbers ("%g" for doubles), dates (ISO 8601, UTC), timestamps, and give
 * "" for null and missing.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "agg_expr_int.h"
#include "q_regex.h"

/* ---- coercion --------------------------------------------------------------- */

/* Value::coerceToString into b; 16007 for types without a string form. */
int agg_coerce_string(const bson_value_t *v, q_buf *b, md_error *err)
{
    char s[64];
    switch (v->value_type) {
    case BSON_TYPE_DOUBLE: snprintf(s, sizeof s, "%g", v->value.v_double); break;
    case BSON_TYPE_INT32: snprintf(s, sizeof s, "%d", v->value.v_int32); break;
    case BSON_TYPE_INT64: snprintf(s, sizeof s, "%" PRId64, v->value.v_int64); break;
    case BSON_TYPE_DECIMAL128: bson_decimal128_to_string(&v->value.v_decimal128, s); break;
    case BSON_TYPE_UTF8: q_buf_append(b, v->value.v_utf8.str, v->value.v_utf8.len); return 0;
    case BSON_TYPE_SYMBOL:
        q_buf_append(b, v->value.v_symbol.symbol, v->value.v_symbol.len);
        return 0;
    case BSON_TYPE_CODE: q_buf_append(b, v->value.v_code.code, v->value.v_code.code_len); return 0;
    case BSON_TYPE_TIMESTAMP: {
        /* Timestamp::toStringPretty: "<time in ISO local format>:<inc>"; we
         * print the seconds in UTC */
        time_t t = (time_t)v->value.v_timestamp.timestamp;
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(s, sizeof s, "%Y-%m-%dT%H:%M:%S", &tm);
        q_buf_printf(b, "%s:%u", s, v->value.v_timestamp.increment);
        return 0;
    }
    case BSON_TYPE_DATE_TIME: agg_format_iso_date(v->value.v_datetime, b); return 0;
    case BSON_TYPE_EOD:
    case BSON_TYPE_NULL:
    case BSON_TYPE_UNDEFINED: return 0;
    default:
        return agg_err(err, 16007, "can't convert from BSON type %s to String",
                       agg_type_name(v));
    }
    q_buf_puts(b, s);
    return 0;
}

static void set_buf(bson_value_t *out, q_buf *b)
{
    agg_set_utf8(out, (const char *)b->data, b->len);
}

static bool cont_byte(unsigned char c)
{
    return (c & 0xC0) == 0x80;
}

/* Bytes of the UTF-8 character starting with c. */
static size_t cp_len(unsigned char c)
{
    return c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
}

/* ---- $concat $toLower $toUpper $strcasecmp ---------------------------------------- */

static int concat_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    q_buf b;
    q_buf_init(&b);
    for (size_t i = 0; i < e->nkid; i++) {
        bson_value_t v;
        int rc = agg_eval_kid(e, i, vars, &v, err);
        if (rc) {
            q_buf_cleanup(&b);
            return rc;
        }
        if (agg_nullish(&v)) {
            q_buf_cleanup(&b);
            agg_set_null(out);
            return 0;
        }
        if (v.value_type != BSON_TYPE_UTF8) {
            rc = agg_err(err, 16702, "$concat only supports strings, not %s", agg_type_name(&v));
            agg_value_destroy(&v);
            q_buf_cleanup(&b);
            return rc;
        }
        q_buf_append(&b, v.value.v_utf8.str, v.value.v_utf8.len);
        agg_value_destroy(&v);
    }
    set_buf(out, &b);
    q_buf_cleanup(&b);
    return 0;
}

static int case_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err,
                     bool upper)
{
    bson_value_t v;
    q_buf b;
    int rc = agg_eval_kid(e, 0, vars, &v, err);
    if (rc)
        return rc;
    q_buf_init(&b);
    rc = agg_coerce_string(&v, &b, err);
    agg_value_destroy(&v);
    if (!rc) {
        for (size_t i = 0; i < b.len; i++) {
            uint8_t c = b.data[i];
            if (upper && c >= 'a' && c <= 'z')
                b.data[i] = (uint8_t)(c - 32);
            else if (!upper && c >= 'A' && c <= 'Z')
                b.data[i] = (uint8_t)(c + 32);
        }
        set_buf(out, &b);
    }
    q_buf_cleanup(&b);
    return rc;
}

static int lower_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    return case_eval(e, vars, out, err, false);
}

static int upper_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    return case_eval(e, vars, out, err, true);
}

static int strcasecmp_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    bson_value_t v[2];
    q_buf a, b;
    int rc = agg_eval_kids(e, vars, v, err);
    if (rc)
        return rc;
    q_buf_init(&a);
    q_buf_init(&b);
    rc = agg_coerce_string(&v[0], &a, err);
    if (!rc)
        rc = agg_coerce_string(&v[1], &b, err);
    if (!rc) {
        int c = 0;
        size_t n = a.len < b.len ? a.len : b.len;
        for (size_t i = 0; i < n && !c; i++) {
            int x = a.data[i], y = b.data[i];
            x = x >= 'A' && x <= 'Z' ? x + 32 : x;
            y = y >= 'A' && y <= 'Z' ? y + 32 : y;
            c = x < y ? -1 : x > y;
        }
        if (!c)
            c = a.len < b.len ? -1 : a.len > b.len;
        agg_set_int32(out, c);
    }
    q_buf_cleanup(&a);
    q_buf_cleanup(&b);
    agg_values_destroy(v, 2);
    return rc;
}

/* ---- substrings ------------------------------------------------------------------- */

static bool num_for_substr(const bson_value_t *v)
{
    return v->value_type == BSON_TYPE_INT32 || v->value_type == BSON_TYPE_INT64 ||
           v->value_type == BSON_TYPE_DOUBLE;
}

static int64_t coerce_long(const bson_value_t *v)
{
    long double x = agg_num_ld(v);
    if (isnan(x))
        return 0;
    if (x >= 9223372036854775807.0L)
        return INT64_MAX;
    if (x <= -9223372036854775808.0L)
        return INT64_MIN;
    return (int64_t)x;
}

static int substr_bytes_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out,
                             md_error *err)
{
    bson_value_t v[3];
    q_buf s;
    const char *name = e->op->name;
    int rc = agg_eval_kids(e, vars, v, err);
    if (rc)
        return rc;
    q_buf_init(&s);
    if ((rc = agg_coerce_string(&v[0], &s, err)))
        goto out;
    if (!num_for_substr(&v[1])) {
        rc = agg_err(err, 16034, "%s:  starting index must be a numeric type (is BSON type %s)",
                     name, agg_type_name(&v[1]));
        goto out;
    }
    if (!num_for_substr(&v[2])) {
        rc = agg_err(err, 16035, "%s:  length must be a numeric type (is BSON type %s)", name,
                     agg_type_name(&v[2]));
        goto out;
    }
    int64_t lower = coerce_long(&v[1]), slen = coerce_long(&v[2]);
    if (lower < 0) {
        rc = agg_err(err, 50752, "%s:  starting index must be non-negative (got: %" PRId64 ")",
                     name, lower);
        goto out;
    }
    size_t lo = (size_t)lower, n = s.len;
    size_t len = slen < 0 ? n : (size_t)slen;
    if (lo < n && cont_byte(s.data[lo])) {
        rc = agg_err(err, 28656,
                     "%s:  Invalid range, starting index is a UTF-8 continuation byte.", name);
        goto out;
    }
    if (lo + len < n && lo + len >= lo && cont_byte(s.data[lo + len])) {
        rc = agg_err(err, 28657,
                     "%s:  Invalid range, ending index is in the middle of a UTF-8 character.",
                     name);
        goto out;
    }
    if (lo >= n)
        agg_set_utf8(out, "", 0);
    else
        agg_set_utf8(out, (const char *)s.data + lo, len > n - lo ? n - lo : len);
out:
    q_buf_cleanup(&s);
    agg_values_destroy(v, 3);
    return rc;
}

static int substr_cp_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    bson_value_t v[3];
    q_buf s, r;
    int32_t start, length;
    int rc = agg_eval_kids(e, vars, v, err);
    if (rc)
        return rc;
    q_buf_init(&s);
    q_buf_init(&r);
    if ((rc = agg_coerce_string(&v[0], &s, err)))
        goto out;
    if (!agg_is_number(&v[1])) {
        rc = agg_err(err, 34450, "$substrCP: starting index must be a numeric type (is BSON type %s)",
                     agg_type_name(&v[1]));
        goto out;
    }
    if (!agg_num_int32(&v[1], &start)) {
        agg_value_render(&r, &v[1]);
        rc = agg_err(err, 34451,
                     "$substrCP: starting index cannot be represented as a 32-bit integral "
                     "value: %s",
                     q_buf_cstr(&r));
        goto out;
    }
    if (!agg_is_number(&v[2])) {
        rc = agg_err(err, 34452, "$substrCP: length must be a numeric type (is BSON type %s)",
                     agg_type_name(&v[2]));
        goto out;
    }
    if (!agg_num_int32(&v[2], &length)) {
        agg_value_render(&r, &v[2]);
        rc = agg_err(err, 34453,
                     "$substrCP: length cannot be represented as a 32-bit integral value: %s",
                     q_buf_cstr(&r));
        goto out;
    }
    if (length < 0) {
        rc = agg_err(err, 34454, "$substrCP: length must be a nonnegative integer.");
        goto out;
    }
    if (start < 0) {
        rc = agg_err(err, 34455, "$substrCP: the starting index must be nonnegative integer.");
        goto out;
    }
    size_t i = 0, n = s.len;
    for (int32_t k = 0; k < start && i < n; k++)
        i += cp_len(s.data[i]);
    size_t j = i;
    for (int32_t k = 0; k < length && j < n; k++)
        j += cp_len(s.data[j]);
    if (i > n)
        i = n;
    if (j > n)
        j = n;
    agg_set_utf8(out, (const char *)s.data + i, j - i);
out:
    q_buf_cleanup(&s);
    q_buf_cleanup(&r);
    agg_values_destroy(v, 3);
    return rc;
}

/* ---- lengths and searches ------------------------------------------------------------ */

static int strlen_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err,
                       bool cp)
{
    bson_value_t v;
    int rc = agg_eval_kid(e, 0, vars, &v, err);
    if (rc)
        return rc;
    if (v.value_type != BSON_TYPE_UTF8) {
        rc = agg_err(err, cp ? 34471 : 34473, "%s requires a string argument, found: %s",
                     e->op->name, agg_type_name(&v));
        agg_value_destroy(&v);
        return rc;
    }
    size_t n = v.value.v_utf8.len;
    if (cp) {
        size_t c = 0;
        for (size_t i = 0; i < n; i++)
            c += !cont_byte((unsigned char)v.value.v_utf8.str[i]);
        n = c;
    }
    agg_value_destroy(&v);
    if (n > INT32_MAX)
        return agg_err(err, 34470, "string length could not be represented as an int.");
    agg_set_int32(out, (int32_t)n);
    return 0;
}

static int strlen_bytes_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out,
                             md_error *err)
{
    return strlen_eval(e, vars, out, err, false);
}

static int strlen_cp_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    return strlen_eval(e, vars, out, err, true);
}

/* uassertIfNotIntegralAndNonNegative. */
static int index_arg(const bson_value_t *v, const char *op, const char *what, int32_t *out,
                     md_error *err)
{
    q_buf b;
    int rc = 0;
    q_buf_init(&b);
    agg_value_render(&b, v);
    if (!agg_num_int32(v, out))
        rc = agg_err(err, 40096,
                     "%srequires an integral %s, found a value of type: %s, with value: %s", op,
                     what, agg_type_name(v), q_buf_cstr(&b));
    else if (*out < 0)
        rc = agg_err(err, 40097, "%s requires a nonnegative %s, found: %s", op, what,
                     q_buf_cstr(&b));
    q_buf_cleanup(&b);
    return rc;
}

static int index_of_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err,
                         bool cp)
{
    bson_value_t v[4];
    const char *op = e->op->name;
    int rc = agg_eval_kids(e, vars, v, err);
    if (rc)
        return rc;
    if (agg_nullish(&v[0])) {
        agg_set_null(out);
        goto out;
    }
    if (v[0].value_type != BSON_TYPE_UTF8) {
        rc = agg_err(err, cp ? 40093 : 40091,
                     "%s requires a string as the first argument, found: %s", op,
                     agg_type_name(&v[0]));
        goto out;
    }
    if (v[1].value_type != BSON_TYPE_UTF8) {
        rc = agg_err(err, cp ? 40094 : 40092,
                     "%s requires a string as the second argument, found: %s", op,
                     agg_type_name(&v[1]));
        goto out;
    }
    const char *s = v[0].value.v_utf8.str, *tok = v[1].value.v_utf8.str;
    size_t n = v[0].value.v_utf8.len, tn = v[1].value.v_utf8.len;
    /* the string's length in the operator's unit */
    size_t ulen = n;
    if (cp) {
        ulen = 0;
        for (size_t i = 0; i < n; i++)
            ulen += !cont_byte((unsigned char)s[i]);
    }
    int32_t start = 0, end = (int32_t)(ulen > INT32_MAX ? INT32_MAX : ulen);
    if (e->nkid > 2 && (rc = index_arg(&v[2], op, "starting index", &start, err)))
        goto out;
    if (e->nkid > 3) {
        if ((rc = index_arg(&v[3], op, "ending index", &end, err)))
            goto out;
        if ((size_t)end > ulen)
            end = (int32_t)ulen;
    }
    if ((size_t)start > ulen || end < start) {
        agg_set_int32(out, -1);
        goto out;
    }
    if (!cp) {
        for (size_t i = (size_t)start; i + tn <= (size_t)end; i++) {
            if (!memcmp(s + i, tok, tn)) {
                agg_set_int32(out, (int32_t)i);
                goto out;
            }
        }
        agg_set_int32(out, -1);
        goto out;
    }
    /* code points: walk to the start, then try each position before end */
    size_t bi = 0;
    for (int32_t k = 0; k < start && bi < n; k++)
        bi += cp_len((unsigned char)s[bi]);
    for (int32_t k = start; k < end; k++) {
        if (bi + tn <= n && !memcmp(s + bi, tok, tn)) {
            agg_set_int32(out, k);
            goto out;
        }
        bi += cp_len((unsigned char)s[bi]);
    }
    agg_set_int32(out, -1);
out:
    agg_values_destroy(v, e->nkid);
    return rc;
}

static int index_bytes_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    return index_of_eval(e, vars, out, err, false);
}

static int index_cp_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    return index_of_eval(e, vars, out, err, true);
}

/* ---- $split ------------------------------------------------------------------------------- */

static int split_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    bson_value_t v[2];
    int rc = agg_eval_kids(e, vars, v, err);
    if (rc)
        return rc;
    if (agg_nullish(&v[0]) || agg_nullish(&v[1])) {
        agg_set_null(out);
    } else if (v[0].value_type != BSON_TYPE_UTF8) {
        rc = agg_err(err, 40085,
                     "$split requires an expression that evaluates to a string as a first "
                     "argument, found: %s",
                     agg_type_name(&v[0]));
    } else if (v[1].value_type != BSON_TYPE_UTF8) {
        rc = agg_err(err, 40086,
                     "$split requires an expression that evaluates to a string as a second "
                     "argument, found: %s",
                     agg_type_name(&v[1]));
    } else if (v[1].value.v_utf8.len == 0) {
        rc = agg_err(err, 40087, "$split requires a non-empty separator");
    } else {
        const char *s = v[0].value.v_utf8.str, *sep = v[1].value.v_utf8.str;
        size_t n = v[0].value.v_utf8.len, sn = v[1].value.v_utf8.len, from = 0;
        agg_arr a;
        agg_arr_init(&a);
        for (size_t i = 0; i + sn <= n;) {
            if (!memcmp(s + i, sep, sn)) {
                bson_value_t piece;
                agg_set_utf8(&piece, s + from, i - from);
                agg_arr_push(&a, &piece);
                agg_value_destroy(&piece);
                i += sn;
                from = i;
            } else {
                i++;
            }
        }
        bson_value_t piece;
        agg_set_utf8(&piece, s + from, n - from);
        agg_arr_push(&a, &piece);
        agg_value_destroy(&piece);
        agg_arr_finish(&a, out);
    }
    agg_values_destroy(v, 2);
    return rc;
}

/* ---- $trim $ltrim $rtrim -------------------------------------------------------------- */

/* {input, chars}: kid[0] input, kid[1] chars (NULL: whitespace). */
static int trim_parse(agg_expr *e, const bson_iter_t *arg, agg_scope *s, md_error *err)
{
    const char *name = e->op->name;
    if (!BSON_ITER_HOLDS_DOCUMENT(arg))
        return agg_err(err, 50696, "%s only supports an object as an argument, found %s", name,
                       q_type_name(bson_iter_type(arg)));
    static const char *const names[2] = {"input", "chars"};
    int rc = agg_parse_named(e, arg, s, names, 2, 50694, "%s found an unknown argument: %s", err);
    if (rc)
        return rc;
    if (!e->kid[0])
        return agg_err(err, 50695, "%s requires an 'input' field", name);
    return 0;
}

/* The code points of the default whitespace set, UTF-8 encoded. */
static const char *const trim_ws[] = {
    "\0", " ", "\t", "\n", "\v", "\f", "\r", "\xC2\xA0", "\xE1\x9A\x80", "\xE2\x80\x80",
    "\xE2\x80\x81", "\xE2\x80\x82", "\xE2\x80\x83", "\xE2\x80\x84", "\xE2\x80\x85",
    "\xE2\x80\x86", "\xE2\x80\x87", "\xE2\x80\x88", "\xE2\x80\x89", "\xE2\x80\x8A",
    "\xE2\x80\xA8", "\xE2\x80\xA9", "\xE2\x80\xAF", "\xE2\x81\x9F", "\xE3\x80\x80",
};

/* Is the code point at s[i] (of length l) in the set? */
static bool trim_in_set(const char *s, size_t l, const char *chars, size_t cn)
{
    if (!chars) {
        for (size_t k = 0; k < sizeof trim_ws / sizeof *trim_ws; k++) {
            size_t wl = trim_ws[k][0] ? strlen(trim_ws[k]) : 1;
            if (wl == l && !memcmp(trim_ws[k], s, l))
                return true;
        }
        return false;
    }
    for (size_t i = 0; i < cn; i += cp_len((unsigned char)chars[i])) {
        size_t cl = cp_len((unsigned char)chars[i]);
        if (cl == l && i + cl <= cn && !memcmp(chars + i, s, l))
            return true;
    }
    return false;
}

static int trim_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    const char *name = e->op->name;
    bool left = strcmp(name, "$rtrim") != 0, right = strcmp(name, "$ltrim") != 0;
    bson_value_t in, ch;
    q_buf r;
    int rc = agg_eval_kid(e, 0, vars, &in, err);
    if (rc)
        return rc;
    agg_set_missing(&ch);
    q_buf_init(&r);
    if (agg_nullish(&in)) {
        agg_set_null(out);
        goto out;
    }
    if (in.value_type != BSON_TYPE_UTF8) {
        agg_value_render(&r, &in);
        rc = agg_err(err, 50699,
                     "%s requires its input to be a string, got %s (of type %s) instead.", name,
                     q_buf_cstr(&r), agg_type_name(&in));
        goto out;
    }
    const char *chars = NULL;
    size_t cn = 0;
    if (e->kid[1]) {
        if ((rc = agg_eval_kid(e, 1, vars, &ch, err)))
            goto out;
        if (agg_nullish(&ch)) {
            agg_set_null(out);
            goto out;
        }
        if (ch.value_type != BSON_TYPE_UTF8) {
            agg_value_render(&r, &ch);
            rc = agg_err(err, 50700,
                         "%s requires 'chars' to be a string, got %s (of type %s) instead.",
                         name, q_buf_cstr(&r), agg_type_name(&ch));
            goto out;
        }
        chars = ch.value.v_utf8.str;
        cn = ch.value.v_utf8.len;
    }
    const char *s = in.value.v_utf8.str;
    size_t n = in.value.v_utf8.len, b = 0, end = n;
    if (left) {
        while (b < n) {
            size_t l = cp_len((unsigned char)s[b]);
            if (b + l > n || !trim_in_set(s + b, l, chars, cn))
                break;
            b += l;
        }
    }
    if (right) {
        while (end > b) {
            size_t st = end - 1;
            while (st > b && cont_byte((unsigned char)s[st]))
                st--;
            if (!trim_in_set(s + st, end - st, chars, cn))
                break;
            end = st;
        }
    }
    agg_set_utf8(out, s + b, end - b);
out:
    q_buf_cleanup(&r);
    agg_value_destroy(&in);
    agg_value_destroy(&ch);
    return rc;
}

/* ---- $regexMatch ------------------------------------------------------------------------ */

/* {input, regex, options}: kid[0..2]. */
static int regex_parse(agg_expr *e, const bson_iter_t *arg, agg_scope *s, md_error *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(arg))
        return agg_err(err, 51103, "$regexMatch expects an object of named arguments but found: %s",
                       q_type_name(bson_iter_type(arg)));
    static const char *const names[3] = {"input", "regex", "options"};
    int rc = agg_parse_named(e, arg, s, names, 3, 31024, "%s found an unknown field: %s", err);
    if (rc)
        return rc;
    if (!e->kid[0])
        return agg_err(err, 31022, "$regexMatch requires 'input' parameter");
    if (!e->kid[1])
        return agg_err(err, 31023, "$regexMatch requires 'regex' parameter");
    return 0;
}

/* The pattern and flags of regex value re with options value opt. */
static int regex_source(const bson_value_t *re, const bson_value_t *opt, q_buf *pat,
                        q_buf *flags, bool *null, md_error *err)
{
    *null = false;
    if (!agg_nullish(opt) && opt->value_type != BSON_TYPE_UTF8)
        return agg_err(err, 51106, "$regexMatch needs 'options' to be of type string");
    if (opt->value_type == BSON_TYPE_UTF8)
        q_buf_append(flags, opt->value.v_utf8.str, opt->value.v_utf8.len);
    if (re->value_type == BSON_TYPE_REGEX) {
        if (re->value.v_regex.options[0] && flags->len)
            return agg_err(err, 51107,
                           "$regexMatch found regex option(s) specified in both 'regex' and "
                           "'option' fields");
        q_buf_puts(pat, re->value.v_regex.regex);
        q_buf_puts(flags, re->value.v_regex.options);
        return 0;
    }
    if (re->value_type == BSON_TYPE_UTF8) {
        q_buf_append(pat, re->value.v_utf8.str, re->value.v_utf8.len);
        return 0;
    }
    if (agg_nullish(re)) {
        *null = true;
        return 0;
    }
    return agg_err(err, 51105, "$regexMatch needs 'regex' to be of type string or regex");
}

static int regex_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    bson_value_t v[3];
    q_buf pat, flags;
    q_regex *re = NULL;
    bool null;
    int rc = agg_eval_kids(e, vars, v, err);
    if (rc)
        return rc;
    q_buf_init(&pat);
    q_buf_init(&flags);
    if ((rc = regex_source(&v[1], &v[2], &pat, &flags, &null, err)))
        goto out;
    if (agg_nullish(&v[0]) || null) {
        agg_set_bool(out, false);
        goto out;
    }
    if (v[0].value_type != BSON_TYPE_UTF8) {
        rc = agg_err(err, 51104, "$regexMatch needs 'input' to be of type string");
        goto out;
    }
    md_error cerr;
    if (q_regex_compile((const char *)pat.data ? (const char *)pat.data : "", (uint32_t)pat.len,
                        q_buf_cstr(&flags), &re, &cerr)) {
        rc = agg_err(err, 51111, "Invalid Regex in $regexMatch: %s", cerr.message);
        goto out;
    }
    agg_set_bool(out, q_regex_match(re, v[0].value.v_utf8.str, v[0].value.v_utf8.len));
out:
    if (re)
        q_regex_free(re);
    q_buf_cleanup(&pat);
    q_buf_cleanup(&flags);
    agg_values_destroy(v, 3);
    return rc;
}

const agg_op agg_ops_string[] = {
    {"$concat", 0, -1, NULL, concat_eval, NULL},
    {"$substr", 3, 3, NULL, substr_bytes_eval, NULL},
    {"$substrBytes", 3, 3, NULL, substr_bytes_eval, NULL},
    {"$substrCP", 3, 3, NULL, substr_cp_eval, NULL},
    {"$toLower", 1, 1, NULL, lower_eval, NULL},
    {"$toUpper", 1, 1, NULL, upper_eval, NULL},
    {"$strcasecmp", 2, 2, NULL, strcasecmp_eval, NULL},
    {"$strLenBytes", 1, 1, NULL, strlen_bytes_eval, NULL},
    {"$strLenCP", 1, 1, NULL, strlen_cp_eval, NULL},
    {"$indexOfBytes", 2, 4, NULL, index_bytes_eval, NULL},
    {"$indexOfCP", 2, 4, NULL, index_cp_eval, NULL},
    {"$split", 2, 2, NULL, split_eval, NULL},
    {"$trim", 1, 1, trim_parse, trim_eval, NULL},
    {"$ltrim", 1, 1, trim_parse, trim_eval, NULL},
    {"$rtrim", 1, 1, trim_parse, trim_eval, NULL},
    {"$regexMatch", 1, 1, regex_parse, regex_eval, NULL},
    {NULL, 0, 0, NULL, NULL, NULL},
};
