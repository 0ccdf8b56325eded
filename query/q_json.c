/*
 * q_json.c -- the extended JSON reader (md_json_parse): JSON text to BSON the
 * way MongoDB's tools read it, for md_db_command_json, the CLI's run / eval /
 * --opts and the tests' case files.
 *
 * A strict JSON parser (RFC 8259: no trailing commas, no comments, no
 * leading zeros, \u escapes with surrogate pairs, UTF-8 checked) that
 * writes BSON as it goes.  Numbers: an integer is int32 when it fits, else
 * int64, else double (Extended JSON v2's rule; libbson refuses those); a
 * number with a fraction or an exponent is a double.
 *
 * Type wrappers.  An object below the top level whose keys all begin with
 * '$' is held back until it closes, and becomes a typed value only when its
 * keys are exactly those of one of these forms and every value is valid:
 *
 *   canonical / relaxed v2        legacy (v1 strict mode)
 *   {$oid: hex24}                 {$binary: base64, $type: hex}
 *   {$symbol: s}                  {$regex: s, $options: s}
 *   {$numberInt: "i32"}           {$date: ms number}
 *   {$numberLong: "i64"}          {$date: "ISO-8601"}
 *   {$numberDouble: "d"|"NaN"|"Infinity"|"-Infinity"}
 *   {$numberDecimal: "d128"}      {$undefined: true}
 *   {$binary: {base64, subType}}  {$minKey: 1}, {$maxKey: 1}
 *   {$uuid: "8-4-4-4-12 hex"}     {$timestamp: {t, i}}
 *   {$code: s}, {$code: s, $scope: {...}}
 *   {$regularExpression: {pattern, options}}
 *   {$dbPointer: {$ref: s, $id: ObjectId}}
 *   {$date: {$numberLong: "ms"}}
 *
 * Anything else -- a form with a key missing or extra, a value of the wrong
 * type, an unknown $-key, a DBRef {$ref, $id, $db} -- stays an ordinary
 * document, for the query or update parser to judge: {$type: "string"},
 * {$type: 2}, {$regex: 1}, {$options: "i"} are query operators, not
 * malformed binaries or regexes.  (libbson's reader takes any $type,
 * $regex or $options for legacy extended JSON and fails the whole text.)
 * The top-level object is always a document.
 *
 * Errors: FailedToParse (9), "invalid JSON: <what> at position <byte
 * offset>".  Nesting deeper than 200 objects and arrays is refused.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "q.h"
#include "q_path.h"

#define Q_JSON_MAX_DEPTH 200

typedef struct jp {
    const char *s;
    size_t n, i;
    int depth;
    bool failed;
    md_error *err;
} jp;

static bool jp_fail(jp *p, size_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static bool jp_fail(jp *p, size_t at, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    if (p->failed)
        return false;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    p->failed = true;
    md_error_set(p->err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE, "invalid JSON: %s at position %zu",
                 what, at);
    return false;
}

static void jp_ws(jp *p)
{
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' ||
                           p->s[p->i] == '\r'))
        p->i++;
}

static bool jp_unexpected(jp *p, const char *wanted)
{
    if (p->i >= p->n)
        return jp_fail(p, p->i, "unexpected end of input, expected %s", wanted);
    unsigned char c = (unsigned char)p->s[p->i];
    if (c >= 0x20 && c < 0x7F)
        return jp_fail(p, p->i, "unexpected '%c', expected %s", c, wanted);
    return jp_fail(p, p->i, "unexpected byte 0x%02X, expected %s", c, wanted);
}

/* ---- strings ---------------------------------------------------------------- */

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static bool jp_hex4(jp *p, unsigned *v)
{
    *v = 0;
    for (int k = 0; k < 4; k++) {
        int h = p->i < p->n ? hexval(p->s[p->i]) : -1;
        if (h < 0)
            return jp_unexpected(p, "4 hex digits after \\u");
        *v = *v << 4 | (unsigned)h;
        p->i++;
    }
    return true;
}

static void put_utf8(q_buf *b, unsigned cp)
{
    if (cp < 0x80) {
        q_buf_putc(b, (uint8_t)cp);
    } else if (cp < 0x800) {
        q_buf_putc(b, (uint8_t)(0xC0 | cp >> 6));
        q_buf_putc(b, (uint8_t)(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        q_buf_putc(b, (uint8_t)(0xE0 | cp >> 12));
        q_buf_putc(b, (uint8_t)(0x80 | (cp >> 6 & 0x3F)));
        q_buf_putc(b, (uint8_t)(0x80 | (cp & 0x3F)));
    } else {
        q_buf_putc(b, (uint8_t)(0xF0 | cp >> 18));
        q_buf_putc(b, (uint8_t)(0x80 | (cp >> 12 & 0x3F)));
        q_buf_putc(b, (uint8_t)(0x80 | (cp >> 6 & 0x3F)));
        q_buf_putc(b, (uint8_t)(0x80 | (cp & 0x3F)));
    }
}

/* One \-escape (the backslash already consumed) into b. */
static bool jp_escape(jp *p, q_buf *b)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    size_t at = p->i - 1;
    if (p->i >= p->n)
        return jp_unexpected(p, "an escape");
    char c = p->s[p->i++];
    const char *k = c ? strchr(from, c) : NULL;
    if (k) {
        q_buf_putc(b, (uint8_t)to[k - from]);
        return true;
    }
    if (c != 'u')
        return jp_fail(p, at, "invalid escape '\\%c'", c >= 0x20 && c < 0x7F ? c : '?');
    unsigned cp, lo;
    if (!jp_hex4(p, &cp))
        return false;
    if (cp >= 0xDC00 && cp <= 0xDFFF)
        return jp_fail(p, at, "unpaired surrogate \\u%04X", cp);
    if (cp >= 0xD800 && cp <= 0xDBFF) {
        if (p->i + 1 >= p->n || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u')
            return jp_fail(p, at, "unpaired surrogate \\u%04X", cp);
        p->i += 2;
        if (!jp_hex4(p, &lo))
            return false;
        if (lo < 0xDC00 || lo > 0xDFFF)
            return jp_fail(p, at, "unpaired surrogate \\u%04X", cp);
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    }
    put_utf8(b, cp);
    return true;
}

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned cp;
    size_t len;
    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xC2 && s[0] <= 0xDF)
        len = 2, cp = s[0] & 0x1F;
    else if (s[0] >= 0xE0 && s[0] <= 0xEF)
        len = 3, cp = s[0] & 0x0F;
    else if (s[0] >= 0xF0 && s[0] <= 0xF4)
        len = 4, cp = s[0] & 0x07;
    else
        return 0;
    if (n < len)
        return 0;
    for (size_t k = 1; k < len; k++) {
        if ((s[k] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (s[k] & 0x3F);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
        return 0;
    return len;
}

/* A string (at its opening quote) into b, unescaped. */
static bool jp_string(jp *p, q_buf *b)
{
    q_buf_reset(b);
    p->i++;
    while (p->i < p->n) {
        unsigned char c = (unsigned char)p->s[p->i];
        if (c == '"') {
            p->i++;
            q_buf_cstr(b);
            return true;
        }
        if (c == '\\') {
            p->i++;
            if (!jp_escape(p, b))
                return false;
            continue;
        }
        if (c < 0x20)
            return jp_fail(p, p->i, "unescaped control character 0x%02X in a string", c);
        size_t len = utf8_len((const unsigned char *)p->s + p->i, p->n - p->i);
        if (len == 0)
            return jp_fail(p, p->i, "invalid UTF-8 in a string");
        q_buf_append(b, p->s + p->i, len);
        p->i += len;
    }
    return jp_unexpected(p, "'\"' closing the string");
}

/* ---- numbers ------------------------------------------------------------------ */

static bool jp_number(jp *p, bson_t *parent, const char *key)
{
    size_t start = p->i, k = p->i;
    const char *s = p->s;
    bool integer = true;
    if (k < p->n && s[k] == '-')
        k++;
    if (k >= p->n || s[k] < '0' || s[k] > '9') {
        p->i = k;
        return jp_unexpected(p, "a digit");
    }
    if (s[k] == '0' && k + 1 < p->n && s[k + 1] >= '0' && s[k + 1] <= '9')
        return jp_fail(p, start, "invalid number (leading zero)");
    while (k < p->n && s[k] >= '0' && s[k] <= '9')
        k++;
    if (k < p->n && s[k] == '.') {
        integer = false;
        if (++k >= p->n || s[k] < '0' || s[k] > '9') {
            p->i = k;
            return jp_unexpected(p, "a digit after '.'");
        }
        while (k < p->n && s[k] >= '0' && s[k] <= '9')
            k++;
    }
    if (k < p->n && (s[k] == 'e' || s[k] == 'E')) {
        integer = false;
        if (++k < p->n && (s[k] == '+' || s[k] == '-'))
            k++;
        if (k >= p->n || s[k] < '0' || s[k] > '9') {
            p->i = k;
            return jp_unexpected(p, "a digit in the exponent");
        }
        while (k < p->n && s[k] >= '0' && s[k] <= '9')
            k++;
    }
    p->i = k;
    char buf[128], *copy = k - start < sizeof buf ? buf : bson_malloc(k - start + 1), *end;
    memcpy(copy, s + start, k - start);
    copy[k - start] = '\0';
    bool ok = true;
    errno = 0;
    long long v = integer ? strtoll(copy, &end, 10) : 0;
    if (integer && errno == 0) {
        if (v >= INT32_MIN && v <= INT32_MAX)
            bson_append_int32(parent, key, -1, (int32_t)v);
        else
            bson_append_int64(parent, key, -1, (int64_t)v);
    } else {
        double d = strtod(copy, &end);
        if (isinf(d))
            ok = jp_fail(p, start, "number %s is out of range", copy);
        else
            bson_append_double(parent, key, -1, d);
    }
    if (copy != buf)
        bson_free(copy);
    return ok;
}

/* ---- the typed forms ------------------------------------------------------------- */

static bool parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    if (!*s || (*s != '-' && (*s < '0' || *s > '9')))
        return false;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

static bool parse_double_str(const char *s, double *out)
{
    if (!strcmp(s, "NaN")) {
        *out = NAN;
        return true;
    }
    if (!strcmp(s, "Infinity") || !strcmp(s, "-Infinity")) {
        *out = s[0] == '-' ? -INFINITY : INFINITY;
        return true;
    }
    if (!*s || strspn(s, "0123456789+-.eE") != strlen(s))
        return false;
    char *end;
    double d = strtod(s, &end);
    if (*end || isinf(d))
        return false;
    *out = d;
    return true;
}

static int b64val(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Strict base64 with padding; out must hold 3 * len / 4 bytes. */
static bool base64_decode(const char *s, size_t len, uint8_t *out, size_t *outlen)
{
    size_t o = 0;
    if (len % 4)
        return false;
    for (size_t i = 0; i < len; i += 4) {
        int v[4], pad = 0;
        for (int k = 0; k < 4; k++) {
            if (s[i + k] == '=' && i + 4 == len && k >= 2) {
                v[k] = 0;
                pad++;
            } else if (pad || (v[k] = b64val(s[i + k])) < 0) {
                return false;
            }
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        out[o++] = (uint8_t)(w >> 16);
        if (pad < 2)
            out[o++] = (uint8_t)(w >> 8);
        if (pad < 1)
            out[o++] = (uint8_t)w;
    }
    *outlen = o;
    return true;
}

static bool parse_subtype(const char *s, bson_subtype_t *st)
{
    size_t n = strlen(s);
    int h0 = n >= 1 ? hexval(s[0]) : -1, h1 = n == 2 ? hexval(s[1]) : 0;
    if (n < 1 || n > 2 || h0 < 0 || h1 < 0)
        return false;
    *st = (bson_subtype_t)(n == 2 ? h0 * 16 + h1 : h0);
    return true;
}

static bool append_binary(bson_t *parent, const char *key, const char *b64, uint32_t b64len,
                          const char *subtype)
{
    bson_subtype_t st;
    size_t n;
    if (!parse_subtype(subtype, &st))
        return false;
    uint8_t *bytes = bson_malloc(b64len / 4 * 3 + 1);
    bool ok = base64_decode(b64, b64len, bytes, &n) &&
              bson_append_binary(parent, key, -1, st, bytes, (uint32_t)n);
    bson_free(bytes);
    return ok;
}

static bool append_uuid(bson_t *parent, const char *key, const char *s)
{
    uint8_t b[16];
    size_t k = 0;
    if (strlen(s) != 36)
        return false;
    for (size_t i = 0; i < 36; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-')
                return false;
            continue;
        }
        int h = hexval(s[i]), l = i + 1 < 36 ? hexval(s[i + 1]) : -1;
        if (h < 0 || l < 0)
            return false;
        b[k++] = (uint8_t)(h * 16 + l);
        i++;
    }
    return k == 16 && bson_append_binary(parent, key, -1, BSON_SUBTYPE_UUID, b, 16);
}

static bool digits(const char **s, int n, int *v)
{
    *v = 0;
    for (int k = 0; k < n; k++, (*s)++) {
        if (**s < '0' || **s > '9')
            return false;
        *v = *v * 10 + (**s - '0');
    }
    return true;
}

/* Days since 1970-01-01 of a proleptic Gregorian date. */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* ISO-8601 as MongoDB writes it: YYYY-MM-DDTHH:MM[:SS[.fff]] then Z or
 * +HH:MM / +HHMM; milliseconds since the epoch. */
static bool parse_iso_date(const char *s, int64_t *ms)
{
    static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int y, mo, d, h, mi, sec = 0, frac = 0, oh = 0, om = 0;
    if (!digits(&s, 4, &y) || *s++ != '-' || !digits(&s, 2, &mo) || *s++ != '-' ||
        !digits(&s, 2, &d) || *s++ != 'T' || !digits(&s, 2, &h) || *s++ != ':' ||
        !digits(&s, 2, &mi))
        return false;
    if (*s == ':') {
        s++;
        if (!digits(&s, 2, &sec))
            return false;
        if (*s == '.') {
            int k = 0;
            for (s++; *s >= '0' && *s <= '9'; s++, k++)
                if (k < 3)
                    frac = frac * 10 + (*s - '0');
            if (k == 0)
                return false;
            for (; k < 3; k++)
                frac *= 10;
        }
    }
    int sign = 0;
    if (*s == 'Z') {
        s++;
    } else if (*s == '+' || *s == '-') {
        sign = *s++ == '-' ? -1 : 1;
        if (!digits(&s, 2, &oh))
            return false;
        if (*s == ':')
            s++;
        if (!digits(&s, 2, &om))
            return false;
    } else {
        return false;
    }
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if (*s || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] || (mo == 2 && d == 29 && !leap) ||
        h > 23 || mi > 59 || sec > 59 || oh > 23 || om > 59)
        return false;
    int64_t secs = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec -
                   sign * (oh * 3600 + om * 60);
    *ms = secs * 1000 + frac;
    return true;
}

static bool hex24_oid(const char *s, uint32_t len, bson_oid_t *oid)
{
    if (len != 24)
        return false;
    for (int i = 0; i < 24; i++)
        if (hexval(s[i]) < 0)
            return false;
    bson_oid_init_from_string(oid, s);
    return true;
}

/* A string without NUL bytes (a BSON cstring). */
static const char *cstr(const bson_iter_t *it)
{
    uint32_t n;
    if (!BSON_ITER_HOLDS_UTF8(it))
        return NULL;
    const char *s = bson_iter_utf8(it, &n);
    return strlen(s) == n ? s : NULL;
}

/* Sub-document `it` holding exactly the string fields a and b. */
static bool two_strings(const bson_iter_t *it, const char *a, const char *b, const char **va,
                        const char **vb)
{
    bson_iter_t x;
    int n = 0;
    *va = *vb = NULL;
    if (!BSON_ITER_HOLDS_DOCUMENT(it) || !bson_iter_recurse(it, &x))
        return false;
    while (bson_iter_next(&x)) {
        const char *k = bson_iter_key(&x);
        const char **dst = !strcmp(k, a) ? va : !strcmp(k, b) ? vb : NULL;
        if (!dst || *dst || !(*dst = cstr(&x)))
            return false;
        n++;
    }
    return n == 2;
}

/* Regex options sorted, as BSON wants them. */
static bool append_regex(bson_t *parent, const char *key, const char *pattern, const char *opts)
{
    char sorted[64];
    size_t n = strlen(opts);
    if (n >= sizeof sorted)
        return false;
    memcpy(sorted, opts, n + 1);
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && sorted[j - 1] > sorted[j]; j--) {
            char c = sorted[j];
            sorted[j] = sorted[j - 1];
            sorted[j - 1] = c;
        }
    return bson_append_regex(parent, key, -1, pattern, sorted);
}

static bool uint32_of(const bson_iter_t *it, uint32_t *v)
{
    if (!BSON_ITER_HOLDS_INT32(it) && !BSON_ITER_HOLDS_INT64(it))
        return false;
    int64_t x = bson_iter_as_int64(it);
    if (x < 0 || x > UINT32_MAX)
        return false;
    *v = (uint32_t)x;
    return true;
}

static bool append_timestamp(bson_t *parent, const char *key, const bson_iter_t *it)
{
    bson_iter_t x;
    uint32_t t = 0, i = 0;
    int seen = 0;
    if (!BSON_ITER_HOLDS_DOCUMENT(it) || !bson_iter_recurse(it, &x))
        return false;
    while (bson_iter_next(&x)) {
        const char *k = bson_iter_key(&x);
        int bit = !strcmp(k, "t") ? 1 : !strcmp(k, "i") ? 2 : 0;
        if (!bit || (seen & bit) || !uint32_of(&x, bit == 1 ? &t : &i))
            return false;
        seen |= bit;
    }
    return seen == 3 && bson_append_timestamp(parent, key, -1, t, i);
}

static bool append_dbpointer(bson_t *parent, const char *key, const bson_iter_t *it)
{
    bson_iter_t x;
    const char *ns = NULL;
    const bson_oid_t *oid = NULL;
    int n = 0;
    if (!BSON_ITER_HOLDS_DOCUMENT(it) || !bson_iter_recurse(it, &x))
        return false;
    while (bson_iter_next(&x)) {
        const char *k = bson_iter_key(&x);
        n++;
        if (!strcmp(k, "$ref") && !ns && (ns = cstr(&x)))
            continue;
        if (!strcmp(k, "$id") && !oid && BSON_ITER_HOLDS_OID(&x)) {
            oid = bson_iter_oid(&x);
            continue;
        }
        return false;
    }
    return n == 2 && ns && oid && bson_append_dbpointer(parent, key, -1, ns, oid);
}

static bool append_date(bson_t *parent, const char *key, const bson_iter_t *it)
{
    int64_t ms;
    const char *s;
    if (BSON_ITER_HOLDS_INT32(it) || BSON_ITER_HOLDS_INT64(it)) {
        ms = bson_iter_as_int64(it);
    } else if (BSON_ITER_HOLDS_DOUBLE(it)) {
        double d = bson_iter_double(it);
        if (!(d == floor(d) && fabs(d) < 9.2e18))
            return false;
        ms = (int64_t)d;
    } else if ((s = cstr(it)) != NULL) {
        if (!parse_iso_date(s, &ms))
            return false;
    } else {
        return false;
    }
    return bson_append_date_time(parent, key, -1, ms);
}

/* The one-key forms: {$k: v}. */
static bool wrap1(bson_t *parent, const char *key, const char *k, const bson_iter_t *v)
{
    const char *s = cstr(v), *a, *b;
    int64_t i;
    double d;
    bson_oid_t oid;
    bson_decimal128_t dec;
    uint32_t n;
    if (!strcmp(k, "$oid"))
        return s && hex24_oid(s, (uint32_t)strlen(s), &oid) && bson_append_oid(parent, key, -1, &oid);
    if (!strcmp(k, "$symbol") && BSON_ITER_HOLDS_UTF8(v)) {
        const char *sym = bson_iter_utf8(v, &n);
        return bson_append_symbol(parent, key, -1, sym, (int)n);
    }
    if (!strcmp(k, "$code") && BSON_ITER_HOLDS_UTF8(v)) {
        const char *code = bson_iter_utf8(v, &n);
        return strlen(code) == n && bson_append_code(parent, key, -1, code);
    }
    if (!strcmp(k, "$numberInt"))
        return s && parse_i64(s, INT32_MIN, INT32_MAX, &i) &&
               bson_append_int32(parent, key, -1, (int32_t)i);
    if (!strcmp(k, "$numberLong"))
        return s && parse_i64(s, INT64_MIN, INT64_MAX, &i) && bson_append_int64(parent, key, -1, i);
    if (!strcmp(k, "$numberDouble"))
        return s && parse_double_str(s, &d) && bson_append_double(parent, key, -1, d);
    if (!strcmp(k, "$numberDecimal"))
        return s && bson_decimal128_from_string(s, &dec) &&
               bson_append_decimal128(parent, key, -1, &dec);
    if (!strcmp(k, "$binary"))
        return two_strings(v, "base64", "subType", &a, &b) &&
               append_binary(parent, key, a, (uint32_t)strlen(a), b);
    if (!strcmp(k, "$uuid"))
        return s && append_uuid(parent, key, s);
    if (!strcmp(k, "$regularExpression"))
        return two_strings(v, "pattern", "options", &a, &b) && append_regex(parent, key, a, b);
    if (!strcmp(k, "$timestamp"))
        return append_timestamp(parent, key, v);
    if (!strcmp(k, "$dbPointer"))
        return append_dbpointer(parent, key, v);
    if (!strcmp(k, "$date"))
        return append_date(parent, key, v);
    if (!strcmp(k, "$undefined"))
        return BSON_ITER_HOLDS_BOOL(v) && bson_iter_bool(v) && bson_append_undefined(parent, key, -1);
    if (!strcmp(k, "$minKey") || !strcmp(k, "$maxKey")) {
        if (!BSON_ITER_HOLDS_INT32(v) || bson_iter_int32(v) != 1)
            return false;
        return k[2] == 'i' ? bson_append_minkey(parent, key, -1) : bson_append_maxkey(parent, key, -1);
    }
    return false;
}

/* The two-key forms, in either order. */
static bool wrap2(bson_t *parent, const char *key, const char *k1, const bson_iter_t *v1,
                  const char *k2, const bson_iter_t *v2)
{
    if (strcmp(k1, k2) > 0) {
        const char *k = k1;
        const bson_iter_t *v = v1;
        k1 = k2, v1 = v2, k2 = k, v2 = v;
    }
    /* now sorted: $binary < $type, $options < $regex, $code < $scope */
    const char *s1 = cstr(v1), *s2 = cstr(v2);
    if (!strcmp(k1, "$binary") && !strcmp(k2, "$type"))
        return s1 && s2 && append_binary(parent, key, s1, (uint32_t)strlen(s1), s2);
    if (!strcmp(k1, "$options") && !strcmp(k2, "$regex"))
        return s1 && s2 && append_regex(parent, key, s2, s1);
    if (!strcmp(k1, "$code") && !strcmp(k2, "$scope")) {
        const uint8_t *data;
        uint32_t len;
        bson_t scope;
        if (!s1 || !BSON_ITER_HOLDS_DOCUMENT(v2))
            return false;
        bson_iter_document(v2, &len, &data);
        return bson_init_static(&scope, data, len) &&
               bson_append_code_with_scope(parent, key, -1, s1, &scope);
    }
    return false;
}

/* Append the held-back object `tmp` to parent: as the typed value its keys
 * spell, or as a document. */
static void wrap_or_document(bson_t *parent, const char *key, const bson_t *tmp)
{
    bson_iter_t it, v0, v1;
    const char *k0 = NULL, *k1 = NULL;
    int n = 0;
    bool done = false;
    bson_iter_init(&it, tmp);
    while (bson_iter_next(&it) && ++n <= 2) {
        if (n == 1) {
            k0 = bson_iter_key(&it);
            v0 = it;
        } else {
            k1 = bson_iter_key(&it);
            v1 = it;
        }
    }
    /* wrap1 / wrap2 check every value before appending, so a form they
     * refuse has appended nothing. */
    if (n == 1)
        done = wrap1(parent, key, k0, &v0);
    else if (n == 2)
        done = wrap2(parent, key, k0, &v0, k1, &v1);
    if (!done)
        bson_append_document(parent, key, -1, tmp);
}

/* ---- values, objects, arrays -------------------------------------------------- */

static bool jp_value(jp *p, bson_t *parent, const char *key);

static bool jp_enter(jp *p)
{
    if (++p->depth > Q_JSON_MAX_DEPTH)
        return jp_fail(p, p->i, "nesting deeper than %d levels", Q_JSON_MAX_DEPTH);
    p->i++;
    return true;
}

/* Members after the first key (at its value's colon) into doc. */
static bool jp_members(jp *p, bson_t *doc, q_buf *k)
{
    for (;;) {
        jp_ws(p);
        if (p->i >= p->n || p->s[p->i] != ':')
            return jp_unexpected(p, "':'");
        p->i++;
        if (!jp_value(p, doc, (const char *)k->data))
            return false;
        jp_ws(p);
        if (p->i < p->n && p->s[p->i] == '}') {
            p->i++;
            return true;
        }
        if (p->i >= p->n || p->s[p->i] != ',')
            return jp_unexpected(p, "',' or '}'");
        p->i++;
        jp_ws(p);
        if (p->i >= p->n || p->s[p->i] != '"')
            return jp_unexpected(p, "a key");
        size_t at = p->i;
        if (!jp_string(p, k))
            return false;
        if (strlen((const char *)k->data) != k->len)
            return jp_fail(p, at, "a key holds a NUL character");
    }
}

/* An object at p->i; top: it is `parent` itself. */
static bool jp_object(jp *p, bson_t *parent, const char *key, bool top)
{
    q_buf k;
    bson_t child, *doc = top ? parent : &child;
    bool ok;
    if (!jp_enter(p))
        return false;
    jp_ws(p);
    if (p->i < p->n && p->s[p->i] == '}') {
        p->i++;
        p->depth--;
        if (!top) {
            bson_append_document_begin(parent, key, -1, &child);
            bson_append_document_end(parent, &child);
        }
        return true;
    }
    if (p->i >= p->n || p->s[p->i] != '"')
        return jp_unexpected(p, "a key or '}'");
    q_buf_init(&k);
    size_t at = p->i;
    ok = jp_string(p, &k);
    if (ok && strlen((const char *)k.data) != k.len)
        ok = jp_fail(p, at, "a key holds a NUL character");
    if (!ok) {
        q_buf_cleanup(&k);
        return false;
    }
    if (!top && k.data[0] == '$') {
        bson_init(&child);
        ok = jp_members(p, &child, &k);
        if (ok)
            wrap_or_document(parent, key, &child);
        bson_destroy(&child);
    } else {
        if (!top)
            bson_append_document_begin(parent, key, -1, &child);
        ok = jp_members(p, doc, &k);
        if (!top)
            bson_append_document_end(parent, &child);
    }
    q_buf_cleanup(&k);
    p->depth--;
    return ok;
}

static bool jp_array(jp *p, bson_t *parent, const char *key)
{
    bson_t child;
    char buf[16];
    const char *idx;
    uint32_t n = 0;
    bool ok = true;
    if (!jp_enter(p))
        return false;
    bson_append_array_begin(parent, key, -1, &child);
    jp_ws(p);
    if (p->i < p->n && p->s[p->i] == ']') {
        p->i++;
    } else {
        for (;;) {
            bson_uint32_to_string(n++, &idx, buf, sizeof buf);
            if (!(ok = jp_value(p, &child, idx)))
                break;
            jp_ws(p);
            if (p->i < p->n && p->s[p->i] == ']') {
                p->i++;
                break;
            }
            if (p->i >= p->n || p->s[p->i] != ',') {
                ok = jp_unexpected(p, "',' or ']'");
                break;
            }
            p->i++;
        }
    }
    bson_append_array_end(parent, &child);
    p->depth--;
    return ok;
}

static bool jp_literal(jp *p, const char *word)
{
    size_t n = strlen(word);
    if (p->n - p->i < n || memcmp(p->s + p->i, word, n) != 0)
        return jp_unexpected(p, "a value");
    p->i += n;
    return true;
}

static bool jp_value(jp *p, bson_t *parent, const char *key)
{
    jp_ws(p);
    if (p->i >= p->n)
        return jp_unexpected(p, "a value");
    char c = p->s[p->i];
    switch (c) {
    case '{': return jp_object(p, parent, key, false);
    case '[': return jp_array(p, parent, key);
    case '"': {
        q_buf s;
        q_buf_init(&s);
        bool ok = jp_string(p, &s);
        if (ok)
            bson_append_utf8(parent, key, -1, s.len ? (const char *)s.data : "", (int)s.len);
        q_buf_cleanup(&s);
        return ok;
    }
    case 't': return jp_literal(p, "true") && bson_append_bool(parent, key, -1, true);
    case 'f': return jp_literal(p, "false") && bson_append_bool(parent, key, -1, false);
    case 'n': return jp_literal(p, "null") && bson_append_null(parent, key, -1);
    default:
        if (c == '-' || (c >= '0' && c <= '9'))
            return jp_number(p, parent, key);
        return jp_unexpected(p, "a value");
    }
}

int md_json_parse(const char *json, ssize_t len, bson_t *out, md_error *err)
{
    md_error local;
    jp p = {.s = json, .n = json ? (len < 0 ? strlen(json) : (size_t)len) : 0,
            .err = err ? err : &local};
    assert(out);
    bson_init(out);
    if (!json)
        return md_error_set(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE, "invalid JSON: no text");
    jp_ws(&p);
    if (p.i >= p.n || p.s[p.i] != '{')
        jp_unexpected(&p, "'{' starting a document");
    else if (jp_object(&p, out, NULL, true)) {
        jp_ws(&p);
        if (p.i < p.n)
            jp_unexpected(&p, "the end after the document");
    }
    if (p.failed) {
        bson_reinit(out);
        return MD_EINVAL;
    }
    return 0;
}
