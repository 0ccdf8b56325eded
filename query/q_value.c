/*
 * q_value.c -- BSON values as MongoDB sees them: the cross-type comparison
 * order (BSONElement::woCompare / compareElementValues), canonical type
 * ranks, number arithmetic (SafeNum), dotted-path helpers shared by the
 * matcher, the update engine and key generation, and BSONElement::toString()
 * renderings for error messages.
 *
 * Numbers compare exactly across types, as MongoDB's compareElementValues:
 * int32, int64 and double through long double (a 64-bit mantissa holds
 * each exactly), decimal128 against anything through q_decimal.c, so
 * {a: 1} does not match NumberDecimal("1.00000000000000000001").
 *
 * Deviations from MongoDB 3.6, all deliberate:
 *   - array elements compare position by position; their field names
 *     ("0", "1", ...) are not compared (they are equal in any valid array).
 *   - decimal arithmetic ($inc, $mul) that cannot be done exactly in 34
 *     digits is done through long double (about 19 digits), where MongoDB
 *     rounds the exact result to 34 digits.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "q.h"
#include "q_path.h"

_Static_assert(LDBL_MANT_DIG >= 64, "int64 and double must convert exactly to long double");

#define Q_RENDER_MAX_DEPTH 100

/* ---- paths ----------------------------------------------------------------- */

static bool path_split(q_path *p, const char *dotted, int len, q_arena *a)
{
    assert(p && dotted);
    size_t n = len < 0 ? strlen(dotted) : (size_t)len;
    p->buf = NULL;
    p->part = NULL;
    p->n = 0;
    p->in_arena = a != NULL;
    if (n == 0 || memchr(dotted, '\0', n))
        return false;
    size_t nparts = 1;
    for (size_t i = 0; i < n; i++)
        nparts += dotted[i] == '.';
    p->buf = a ? q_arena_alloc(a, n + 1) : bson_malloc(n + 1);
    p->part = a ? q_arena_alloc(a, nparts * sizeof *p->part)
                : bson_malloc(nparts * sizeof *p->part);
    memcpy(p->buf, dotted, n);
    p->buf[n] = '\0';
    p->part[p->n++] = p->buf;
    for (size_t i = 0; i < n; i++) {
        if (p->buf[i] == '.') {
            p->buf[i] = '\0';
            p->part[p->n++] = p->buf + i + 1;
        }
    }
    for (size_t i = 0; i < p->n; i++) {
        if (p->part[i][0] == '\0') {
            q_path_cleanup(p);
            return false;
        }
    }
    return true;
}

bool q_path_init(q_path *p, const char *dotted, int len)
{
    return path_split(p, dotted, len, NULL);
}

bool q_path_init_arena(q_path *p, const char *dotted, int len, q_arena *a)
{
    return path_split(p, dotted, len, a);
}

void q_path_cleanup(q_path *p)
{
    if (!p)
        return;
    if (!p->in_arena) {
        bson_free(p->buf);
        bson_free(p->part);
    }
    p->buf = NULL;
    p->part = NULL;
    p->n = 0;
}

void q_path_join(q_buf *b, const q_path *p, size_t from, size_t to)
{
    assert(to <= p->n);
    for (size_t i = from; i < to; i++) {
        if (i > from)
            q_buf_putc(b, '.');
        q_buf_puts(b, p->part[i]);
    }
}

bool q_all_digits(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return false;
    return true;
}

/* ---- documents ------------------------------------------------------------- */

bool q_doc_find(const uint8_t *data, uint32_t len, const char *name, bson_iter_t *out)
{
    if (!bson_iter_init_from_data(out, data, len))
        return false;
    while (bson_iter_next(out))
        if (strcmp(bson_iter_key(out), name) == 0)
            return true;
    return false;
}

bool q_is_container(bson_type_t t)
{
    return t == BSON_TYPE_DOCUMENT || t == BSON_TYPE_ARRAY;
}

void q_iter_sub(const bson_iter_t *it, const uint8_t **data, uint32_t *len)
{
    if (bson_iter_type(it) == BSON_TYPE_ARRAY)
        bson_iter_array(it, len, data);
    else
        bson_iter_document(it, len, data);
}

bool q_dotted_or_array(const uint8_t *data, uint32_t len, const q_path *p, size_t start,
                       bson_iter_t *out, size_t *stop)
{
    assert(start < p->n);
    for (size_t i = start; i < p->n; i++) {
        if (!q_doc_find(data, len, p->part[i], out))
            return false;
        *stop = i;
        switch (bson_iter_type(out)) {
        case BSON_TYPE_DOCUMENT: bson_iter_document(out, &len, &data); break;
        case BSON_TYPE_ARRAY: return true;
        default: return i + 1 == p->n;
        }
    }
    return true;
}

uint32_t q_value_size(const bson_iter_t *it)
{
    return it->next_off - it->d1;
}

bool q_value_binary_equal(const bson_iter_t *a, const bson_iter_t *b)
{
    if (bson_iter_type(a) != bson_iter_type(b))
        return false;
    uint32_t n = q_value_size(a);
    return n == q_value_size(b) && memcmp(a->raw + a->d1, b->raw + b->d1, n) == 0;
}

/* ---- numbers --------------------------------------------------------------- */

bool q_is_number(bson_type_t t)
{
    return t == BSON_TYPE_INT32 || t == BSON_TYPE_INT64 || t == BSON_TYPE_DOUBLE ||
           t == BSON_TYPE_DECIMAL128;
}

long double q_decimal_ld(const bson_decimal128_t *d)
{
    char s[BSON_DECIMAL128_STRING];
    bson_decimal128_to_string(d, s);
    return strtold(s, NULL);
}

long double q_number_ld(const bson_iter_t *it)
{
    switch (bson_iter_type(it)) {
    case BSON_TYPE_INT32: return (long double)bson_iter_int32(it);
    case BSON_TYPE_INT64: return (long double)bson_iter_int64(it);
    case BSON_TYPE_DOUBLE: return (long double)bson_iter_double(it);
    case BSON_TYPE_DECIMAL128: {
        bson_decimal128_t d;
        bson_iter_decimal128(it, &d);
        return q_decimal_ld(&d);
    }
    default: return 0;
    }
}

int q_ld_cmp(long double a, long double b)
{
    if (a < b)
        return -1;
    if (a > b)
        return 1;
    if (isnan(a))
        return isnan(b) ? 0 : -1;
    return isnan(b) ? 1 : 0;
}

static int cmp_numbers(const bson_iter_t *a, const bson_iter_t *b)
{
    bson_type_t ta = bson_iter_type(a), tb = bson_iter_type(b);
    bool ia = ta == BSON_TYPE_INT32 || ta == BSON_TYPE_INT64;
    bool ib = tb == BSON_TYPE_INT32 || tb == BSON_TYPE_INT64;
    if (ia && ib) {
        int64_t x = bson_iter_as_int64(a), y = bson_iter_as_int64(b);
        return x < y ? -1 : x > y;
    }
    if (ta == BSON_TYPE_DECIMAL128 || tb == BSON_TYPE_DECIMAL128)
        return q_number_cmp(a, b);
    return q_ld_cmp(q_number_ld(a), q_number_ld(b));
}

/* ---- arithmetic (SafeNum) ----------------------------------------------------
 * int32 op int32 is int32, or int64 when it overflows; int64 overflow is an
 * error; any double makes a double; any decimal128 makes a decimal128.
 * Decimals are computed exactly when the result fits 34 digits without
 * rounding (the usual case: 1.10 + 2.25); otherwise through long double
 * (about 19 digits).  A double operand becomes a 15-digit decimal, as
 * MongoDB's Decimal128(double) does.
 */

void q_num_get(const bson_iter_t *it, q_num *n)
{
    memset(n, 0, sizeof *n);
    n->t = bson_iter_type(it);
    switch (n->t) {
    case BSON_TYPE_INT32: n->i32 = bson_iter_int32(it); break;
    case BSON_TYPE_INT64: n->i64 = bson_iter_int64(it); break;
    case BSON_TYPE_DOUBLE: n->d = bson_iter_double(it); break;
    default: bson_iter_decimal128(it, &n->dec); break;
    }
}

static double num_double(const q_num *n)
{
    return n->t == BSON_TYPE_INT32 ? n->i32 : n->t == BSON_TYPE_INT64 ? (double)n->i64 : n->d;
}

static void num_to_dec(const q_num *n, bson_decimal128_t *out)
{
    char s[64];
    switch (n->t) {
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
        snprintf(s, sizeof s, "%" PRId64, n->t == BSON_TYPE_INT32 ? n->i32 : n->i64);
        break;
    case BSON_TYPE_DOUBLE:
        if (isnan(n->d))
            snprintf(s, sizeof s, "NaN");
        else if (isinf(n->d))
            snprintf(s, sizeof s, "%sInfinity", n->d < 0 ? "-" : "");
        else
            snprintf(s, sizeof s, "%.14e", n->d);
        break;
    default: *out = n->dec; return;
    }
    bson_decimal128_from_string(s, out);
}

/* Approximate decimal arithmetic through long double. */
static void dec_ld(bool mul, const bson_decimal128_t *a, const bson_decimal128_t *b,
                   bson_decimal128_t *r)
{
    long double x = q_decimal_ld(a), y = q_decimal_ld(b), z = mul ? x * y : x + y;
    char s[64];
    if (isnan(z))
        snprintf(s, sizeof s, "NaN");
    else if (isinf(z))
        snprintf(s, sizeof s, "%sInfinity", z < 0 ? "-" : "");
    else
        snprintf(s, sizeof s, "%.18Le", z);
    bson_decimal128_from_string(s, r);
}

static bool dec_scale(q_u128 *c, int by)
{
    for (; by > 0; by--) {
        if (*c > q_dec_ten34())
            return false;
        *c *= 10;
    }
    return *c < q_dec_ten34();
}

/* Exact a + b or a * b when representable without rounding. */
static bool dec_exact(bool mul, const bson_decimal128_t *a, const bson_decimal128_t *b,
                      bson_decimal128_t *r)
{
    bool na, nb;
    q_u128 ca, cb, c;
    int ea, eb;
    if (q_dec_split(a, &na, &ca, &ea) != Q_DEC_FINITE || q_dec_split(b, &nb, &cb, &eb) != Q_DEC_FINITE)
        return false;
    if (mul)
        return !__builtin_mul_overflow(ca, cb, &c) && q_dec_join(na != nb, c, ea + eb, r);
    int e = ea < eb ? ea : eb;
    if (!dec_scale(&ca, ea - e) || !dec_scale(&cb, eb - e))
        return false;
    if (na == nb)
        return q_dec_join(na, ca + cb, e, r);
    if (ca >= cb)
        return q_dec_join(ca == cb ? false : na, ca - cb, e, r);
    return q_dec_join(nb, cb - ca, e, r);
}

static int type_order(bson_type_t t)
{
    return t == BSON_TYPE_INT32 ? 0 : t == BSON_TYPE_INT64 ? 1 : t == BSON_TYPE_DOUBLE ? 2 : 3;
}

/* r = a op b; false when an int64 result overflows. */
bool q_num_arith(bool mul, const q_num *a, const q_num *b, q_num *r)
{
    memset(r, 0, sizeof *r);
    int ta = type_order(a->t), tb = type_order(b->t), t = ta > tb ? ta : tb;
    if (t == 3) {
        bson_decimal128_t x, y;
        num_to_dec(a, &x);
        num_to_dec(b, &y);
        r->t = BSON_TYPE_DECIMAL128;
        if (!dec_exact(mul, &x, &y, &r->dec))
            dec_ld(mul, &x, &y, &r->dec);
        return true;
    }
    if (t == 2) {
        r->t = BSON_TYPE_DOUBLE;
        r->d = mul ? num_double(a) * num_double(b) : num_double(a) + num_double(b);
        return true;
    }
    int64_t x = ta ? a->i64 : a->i32, y = tb ? b->i64 : b->i32, z;
    bool over = mul ? __builtin_mul_overflow(x, y, &z) : __builtin_add_overflow(x, y, &z);
    if (over)
        return false;
    if (t == 0 && z == (int32_t)z) {
        r->t = BSON_TYPE_INT32;
        r->i32 = (int32_t)z;
    } else {
        r->t = BSON_TYPE_INT64;
        r->i64 = z;
    }
    return true;
}

/* SafeNum::isIdentical: same type and equal value. */
bool q_num_identical(const q_num *a, const q_num *b)
{
    if (a->t != b->t)
        return false;
    switch (a->t) {
    case BSON_TYPE_INT32: return a->i32 == b->i32;
    case BSON_TYPE_INT64: return a->i64 == b->i64;
    case BSON_TYPE_DOUBLE: return a->d == b->d;
    default:
        return (a->dec.high == b->dec.high && a->dec.low == b->dec.low) ||
               q_decimal_cmp(&a->dec, &b->dec) == 0;
    }
}

/* SafeNum's debug form: "(NumberLong)9223372036854775807". */
void q_num_debug(q_buf *b, const q_num *n)
{
    char s[BSON_DECIMAL128_STRING];
    switch (n->t) {
    case BSON_TYPE_INT32: q_buf_printf(b, "(NumberInt)%" PRId32, n->i32); break;
    case BSON_TYPE_INT64: q_buf_printf(b, "(NumberLong)%" PRId64, n->i64); break;
    case BSON_TYPE_DOUBLE: q_buf_printf(b, "(NumberDouble)%g", n->d); break;
    default:
        bson_decimal128_to_string(&n->dec, s);
        q_buf_printf(b, "(NumberDecimal)%s", s);
        break;
    }
}

/* ---- comparison ------------------------------------------------------------ */

int q_type_rank(bson_type_t t)
{
    switch (t) {
    case BSON_TYPE_MINKEY: return -1;
    case BSON_TYPE_EOD:
    case BSON_TYPE_UNDEFINED: return 0;
    case BSON_TYPE_NULL: return 5;
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
    case BSON_TYPE_DECIMAL128: return 10;
    case BSON_TYPE_UTF8:
    case BSON_TYPE_SYMBOL: return 15;
    case BSON_TYPE_DOCUMENT: return 20;
    case BSON_TYPE_ARRAY: return 25;
    case BSON_TYPE_BINARY: return 30;
    case BSON_TYPE_OID: return 35;
    case BSON_TYPE_BOOL: return 40;
    case BSON_TYPE_DATE_TIME: return 45;
    case BSON_TYPE_TIMESTAMP: return 47;
    case BSON_TYPE_REGEX: return 50;
    case BSON_TYPE_DBPOINTER: return 55;
    case BSON_TYPE_CODE: return 60;
    case BSON_TYPE_CODEWSCOPE: return 65;
    case BSON_TYPE_MAXKEY: return 127;
    default: return 0;
    }
}

/* The bytes of a string-like value (string, symbol, code). */
static const char *str_of(const bson_iter_t *it, uint32_t *len)
{
    switch (bson_iter_type(it)) {
    case BSON_TYPE_UTF8: return bson_iter_utf8(it, len);
    case BSON_TYPE_SYMBOL: return bson_iter_symbol(it, len);
    case BSON_TYPE_CODE: return bson_iter_code(it, len);
    case BSON_TYPE_CODEWSCOPE: {
        uint32_t sl;
        const uint8_t *s;
        return bson_iter_codewscope(it, len, &sl, &s);
    }
    default: *len = 0; return "";
    }
}

static int sign(int c)
{
    return c < 0 ? -1 : c > 0;
}

static int cmp_bytes(const void *a, uint32_t al, const void *b, uint32_t bl)
{
    uint32_t n = al < bl ? al : bl;
    int c = n ? memcmp(a, b, n) : 0;
    if (c)
        return sign(c);
    return al < bl ? -1 : al > bl;
}

static int cmp_same_rank(const bson_iter_t *a, const bson_iter_t *b);

/* BSONObj::woCompare; field names compared for documents, not for arrays. */
static int cmp_docs(const uint8_t *ad, uint32_t al, const uint8_t *bd, uint32_t bl, bool names)
{
    bson_iter_t x, y;
    bool okx = bson_iter_init_from_data(&x, ad, al);
    bool oky = bson_iter_init_from_data(&y, bd, bl);
    for (;;) {
        bool mx = okx && bson_iter_next(&x), my = oky && bson_iter_next(&y);
        if (!mx)
            return my ? -1 : 0;
        if (!my)
            return 1;
        int rx = q_type_rank(bson_iter_type(&x)), ry = q_type_rank(bson_iter_type(&y));
        if (rx != ry)
            return rx < ry ? -1 : 1;
        if (names) {
            int c = strcmp(bson_iter_key(&x), bson_iter_key(&y));
            if (c)
                return sign(c);
        }
        int c = cmp_same_rank(&x, &y);
        if (c)
            return c;
    }
}

static int cmp_containers(const bson_iter_t *a, const bson_iter_t *b)
{
    const uint8_t *ad, *bd;
    uint32_t al, bl;
    q_iter_sub(a, &ad, &al);
    q_iter_sub(b, &bd, &bl);
    return cmp_docs(ad, al, bd, bl, bson_iter_type(a) == BSON_TYPE_DOCUMENT);
}

static int cmp_binary(const bson_iter_t *a, const bson_iter_t *b)
{
    bson_subtype_t sa, sb;
    uint32_t la, lb;
    const uint8_t *da, *db;
    bson_iter_binary(a, &sa, &la, &da);
    bson_iter_binary(b, &sb, &lb, &db);
    if (la != lb)
        return la < lb ? -1 : 1;
    if (sa != sb)
        return sa < sb ? -1 : 1;
    return la ? sign(memcmp(da, db, la)) : 0;
}

static int cmp_regex(const bson_iter_t *a, const bson_iter_t *b)
{
    const char *oa, *ob;
    const char *pa = bson_iter_regex(a, &oa), *pb = bson_iter_regex(b, &ob);
    int c = strcmp(pa, pb);
    return c ? sign(c) : sign(strcmp(oa, ob));
}

static int cmp_dbpointer(const bson_iter_t *a, const bson_iter_t *b)
{
    uint32_t la, lb;
    const char *ca, *cb;
    const bson_oid_t *oa, *ob;
    bson_iter_dbpointer(a, &la, &ca, &oa);
    bson_iter_dbpointer(b, &lb, &cb, &ob);
    if (la != lb)
        return la < lb ? -1 : 1;
    int c = memcmp(ca, cb, la);
    return c ? sign(c) : sign(memcmp(oa->bytes, ob->bytes, 12));
}

static int cmp_codewscope(const bson_iter_t *a, const bson_iter_t *b)
{
    uint32_t la, lb, sla, slb;
    const uint8_t *sa, *sb;
    const char *ca = bson_iter_codewscope(a, &la, &sla, &sa);
    const char *cb = bson_iter_codewscope(b, &lb, &slb, &sb);
    int c = cmp_bytes(ca, la, cb, lb);
    return c ? c : cmp_docs(sa, sla, sb, slb, true);
}

static int cmp_u64(uint64_t x, uint64_t y)
{
    return x < y ? -1 : x > y;
}

/* compareElementValues: a and b have the same canonical rank. */
static int cmp_same_rank(const bson_iter_t *a, const bson_iter_t *b)
{
    uint32_t la, lb, ta, ia, tb, ib;
    switch (bson_iter_type(a)) {
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
    case BSON_TYPE_DECIMAL128: return cmp_numbers(a, b);
    case BSON_TYPE_UTF8:
    case BSON_TYPE_SYMBOL:
    case BSON_TYPE_CODE: {
        const char *sa = str_of(a, &la), *sb = str_of(b, &lb);
        return cmp_bytes(sa, la, sb, lb);
    }
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY: return cmp_containers(a, b);
    case BSON_TYPE_BINARY: return cmp_binary(a, b);
    case BSON_TYPE_OID: return sign(memcmp(bson_iter_oid(a)->bytes, bson_iter_oid(b)->bytes, 12));
    case BSON_TYPE_BOOL: return (int)bson_iter_bool(a) - (int)bson_iter_bool(b);
    case BSON_TYPE_DATE_TIME: {
        int64_t x = bson_iter_date_time(a), y = bson_iter_date_time(b);
        return x < y ? -1 : x > y;
    }
    case BSON_TYPE_TIMESTAMP:
        bson_iter_timestamp(a, &ta, &ia);
        bson_iter_timestamp(b, &tb, &ib);
        return cmp_u64((uint64_t)ta << 32 | ia, (uint64_t)tb << 32 | ib);
    case BSON_TYPE_REGEX: return cmp_regex(a, b);
    case BSON_TYPE_DBPOINTER: return cmp_dbpointer(a, b);
    case BSON_TYPE_CODEWSCOPE: return cmp_codewscope(a, b);
    default: return 0; /* MinKey, MaxKey, null, undefined */
    }
}

int q_value_cmp(const bson_iter_t *a, const bson_iter_t *b)
{
    assert(a && b);
    int ra = q_type_rank(bson_iter_type(a)), rb = q_type_rank(bson_iter_type(b));
    if (ra != rb)
        return ra < rb ? -1 : 1;
    return cmp_same_rank(a, b);
}

/* ---- rendering ------------------------------------------------------------- */

const char *q_type_name(bson_type_t t)
{
    switch (t) {
    case BSON_TYPE_MINKEY: return "minKey";
    case BSON_TYPE_EOD: return "missing";
    case BSON_TYPE_DOUBLE: return "double";
    case BSON_TYPE_UTF8: return "string";
    case BSON_TYPE_DOCUMENT: return "object";
    case BSON_TYPE_ARRAY: return "array";
    case BSON_TYPE_BINARY: return "binData";
    case BSON_TYPE_UNDEFINED: return "undefined";
    case BSON_TYPE_OID: return "objectId";
    case BSON_TYPE_BOOL: return "bool";
    case BSON_TYPE_DATE_TIME: return "date";
    case BSON_TYPE_NULL: return "null";
    case BSON_TYPE_REGEX: return "regex";
    case BSON_TYPE_DBPOINTER: return "dbPointer";
    case BSON_TYPE_CODE: return "javascript";
    case BSON_TYPE_SYMBOL: return "symbol";
    case BSON_TYPE_CODEWSCOPE: return "javascriptWithScope";
    case BSON_TYPE_INT32: return "int";
    case BSON_TYPE_TIMESTAMP: return "timestamp";
    case BSON_TYPE_INT64: return "long";
    case BSON_TYPE_DECIMAL128: return "decimal";
    case BSON_TYPE_MAXKEY: return "maxKey";
    default: return "unknown";
    }
}

static void render_doc_depth(q_buf *b, const uint8_t *data, uint32_t len, bool is_array, int depth);
static void render_value_depth(q_buf *b, const bson_iter_t *it, int depth);

/* StringBuilder::appendDoubleNice: "%.16g", plus ".0" when that has no '.', 'E' or 'N'. */
static void render_double(q_buf *b, double d)
{
    char s[40];
    snprintf(s, sizeof s, "%.16g", d);
    q_buf_puts(b, s);
    if (!strchr(s, '.') && !strchr(s, 'E') && !strchr(s, 'N'))
        q_buf_puts(b, ".0");
}

static void render_hex(q_buf *b, const uint8_t *p, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        q_buf_printf(b, "%02X", p[i]);
}

static void render_oid(q_buf *b, const bson_oid_t *oid)
{
    char hex[25];
    bson_oid_to_string(oid, hex);
    q_buf_puts(b, hex);
}

static void render_string_like(q_buf *b, const bson_iter_t *it)
{
    uint32_t n;
    const char *s = str_of(it, &n);
    if (bson_iter_type(it) == BSON_TYPE_CODE) {
        q_buf_append(b, s, n + 1 > 80 ? 70 : n);
        if (n + 1 > 80)
            q_buf_puts(b, "...");
        return;
    }
    q_buf_putc(b, '"');
    q_buf_append(b, s, n + 1 > 160 ? 150 : n);
    q_buf_puts(b, n + 1 > 160 ? "...\"" : "\"");
}

static void render_binary(q_buf *b, const bson_iter_t *it)
{
    bson_subtype_t st;
    uint32_t n;
    const uint8_t *p;
    bson_iter_binary(it, &st, &n, &p);
    q_buf_printf(b, "BinData(%d, ", (int)st);
    render_hex(b, p, n > 80 ? 70 : n);
    q_buf_puts(b, n > 80 ? "...)" : ")");
}

static void render_scalar(q_buf *b, const bson_iter_t *it)
{
    uint32_t t, i, n;
    const char *opts, *coll;
    const bson_oid_t *oid;
    char dec[BSON_DECIMAL128_STRING];
    bson_decimal128_t d;
    switch (bson_iter_type(it)) {
    case BSON_TYPE_DATE_TIME: q_buf_printf(b, "new Date(%" PRId64 ")", bson_iter_date_time(it)); break;
    case BSON_TYPE_REGEX:
        q_buf_printf(b, "/%s/", bson_iter_regex(it, &opts));
        q_buf_puts(b, opts);
        break;
    case BSON_TYPE_DOUBLE: render_double(b, bson_iter_double(it)); break;
    case BSON_TYPE_INT64: q_buf_printf(b, "%" PRId64, bson_iter_int64(it)); break;
    case BSON_TYPE_INT32: q_buf_printf(b, "%" PRId32, bson_iter_int32(it)); break;
    case BSON_TYPE_DECIMAL128:
        bson_iter_decimal128(it, &d);
        bson_decimal128_to_string(&d, dec);
        q_buf_puts(b, dec);
        break;
    case BSON_TYPE_BOOL: q_buf_puts(b, bson_iter_bool(it) ? "true" : "false"); break;
    case BSON_TYPE_UNDEFINED: q_buf_puts(b, "undefined"); break;
    case BSON_TYPE_NULL: q_buf_puts(b, "null"); break;
    case BSON_TYPE_MAXKEY: q_buf_puts(b, "MaxKey"); break;
    case BSON_TYPE_MINKEY: q_buf_puts(b, "MinKey"); break;
    case BSON_TYPE_UTF8:
    case BSON_TYPE_SYMBOL:
    case BSON_TYPE_CODE: render_string_like(b, it); break;
    case BSON_TYPE_DBPOINTER:
        bson_iter_dbpointer(it, &n, &coll, &oid);
        q_buf_printf(b, "DBRef('%s',", coll);
        render_oid(b, oid);
        q_buf_putc(b, ')');
        break;
    case BSON_TYPE_OID:
        q_buf_puts(b, "ObjectId('");
        render_oid(b, bson_iter_oid(it));
        q_buf_puts(b, "')");
        break;
    case BSON_TYPE_BINARY: render_binary(b, it); break;
    case BSON_TYPE_TIMESTAMP:
        bson_iter_timestamp(it, &t, &i);
        q_buf_printf(b, "Timestamp %" PRIu64 "|%" PRIu32, (uint64_t)t * 1000, i);
        break;
    default: q_buf_printf(b, "?type=%d", (int)bson_iter_type(it)); break;
    }
}

static void render_value_depth(q_buf *b, const bson_iter_t *it, int depth)
{
    if (depth > Q_RENDER_MAX_DEPTH) {
        q_buf_puts(b, "...");
        return;
    }
    const uint8_t *data;
    uint32_t len, sl;
    switch (bson_iter_type(it)) {
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY:
        q_iter_sub(it, &data, &len);
        render_doc_depth(b, data, len, bson_iter_type(it) == BSON_TYPE_ARRAY, depth + 1);
        break;
    case BSON_TYPE_CODEWSCOPE: {
        const char *code = bson_iter_codewscope(it, &len, &sl, &data);
        q_buf_puts(b, "CodeWScope( ");
        q_buf_append(b, code, len);
        q_buf_puts(b, ", ");
        render_doc_depth(b, data, sl, false, depth + 1);
        q_buf_putc(b, ')');
        break;
    }
    default: render_scalar(b, it); break;
    }
}

static void render_doc_depth(q_buf *b, const uint8_t *data, uint32_t len, bool is_array, int depth)
{
    bson_iter_t it;
    bool first = true;
    if (bson_iter_init_from_data(&it, data, len)) {
        while (bson_iter_next(&it)) {
            q_buf_puts(b, first ? (is_array ? "[ " : "{ ") : ", ");
            first = false;
            if (!is_array)
                q_buf_printf(b, "%s: ", bson_iter_key(&it));
            render_value_depth(b, &it, depth);
        }
    }
    if (first)
        q_buf_puts(b, is_array ? "[]" : "{}");
    else
        q_buf_puts(b, is_array ? " ]" : " }");
}

void q_render_value(q_buf *b, const bson_iter_t *it)
{
    render_value_depth(b, it, 0);
}

void q_render_elem(q_buf *b, const bson_iter_t *it)
{
    q_buf_printf(b, "%s: ", bson_iter_key(it));
    render_value_depth(b, it, 0);
}

void q_render_doc(q_buf *b, const uint8_t *data, uint32_t len, bool is_array)
{
    render_doc_depth(b, data, len, is_array, 0);
}
