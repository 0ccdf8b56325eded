/*
 * q_decimal.c -- numbers compared exactly across int32, int64, double and
 * decimal128, and the index key bytes of a number (q_key.c's number
 * encoding), which order exactly as that comparison does.
 *
 * int32, int64 and double are all m * 2^e with m of at most 63 bits, so a
 * long double (64-bit mantissa) holds each exactly.  A decimal128 is
 * c * 10^q (c < 10^34, 113 bits; q in [-6176, 6111]) and is mostly not a
 * binary fraction at all (0.1).  Its key is the binary encoding of its value
 * truncated toward zero to 63 bits, with the mantissa's lowest bit -- zero in
 * every exact key -- set when the truncation lost something, followed by the
 * decimal's own digits, which order any two decimals that truncate alike.
 * The truncation is computed exactly with a small bignum (c * 5^q, or
 * c / 5^-q by long division), never through a long double; MongoDB's
 * KeyString does the same with a double and a decimal continuation.
 *
 * Key bytes of a number (after the type byte 0x1E):
 *
 *   class  1 byte  01 NaN, 02 -Infinity, 03 negative, 04 zero (+0, -0,
 *                  any decimal zero), 05 positive, 06 +Infinity
 *   then, for classes 03 and 05 only:
 *   exp    2 bytes binary exponent e + 32768, big-endian, |v| = m * 2^e
 *   mant   8 bytes m * 2^64, m in [0.5, 1), truncated to 63 bits; the low
 *                  bit is 1 only for a decimal that is not such a number
 *   then, only when that bit is 1 (a decimal continuation):
 *   dexp   2 bytes decimal exponent of the leading digit + 32768, big-endian
 *   digits n bytes the significant digits (trailing zeros dropped) two per
 *                  byte, 10 * d1 + d2 + 1 (a lone last digit: 10 * d + 1)
 *   end    1 byte  00
 *   A negative number has every byte after the class inverted.
 *
 * Equal values encode equally (42, 42L, 42.0, NumberDecimal("4.20E+1")),
 * and no encoding is a proper prefix of another.
 *
 * Worked example: NumberDecimal("0.1") -> 1E 05 7F FD CC CC CC CC CC CC CC CD
 * 7F FF 0B 00: 0.1 = 0.8 * 2^-3, 0.8 * 2^64 truncated to 63 bits is
 * 0xCCCCCCCCCCCCCCCC, low bit set (inexact); decimal exponent -1 (0x7FFF),
 * digit "1" -> 0x0B, end.  The double 0.1 (just above) encodes as
 * 1E 05 7F FD CC CC CC CC CC CC D0 00 and sorts after it, as it should.
 */
#include <math.h>
#include <string.h>

#include "q.h"
#include "q_path.h"


/* ---- a bignum just big enough for c * 5^6111 and 5^6176 ------------------------- */

#define BN_LIMBS 480 /* 15,360 bits; 5^6176 has 14,341 */

typedef struct bn {
    uint32_t v[BN_LIMBS]; /* little-endian limbs */
    int n;                /* limbs in use; v[n-1] != 0 unless n == 0 */
} bn;

static void bn_trim(bn *a)
{
    while (a->n > 0 && a->v[a->n - 1] == 0)
        a->n--;
}

static void bn_set(bn *a, q_u128 x)
{
    a->n = 0;
    while (x) {
        a->v[a->n++] = (uint32_t)x;
        x >>= 32;
    }
}

static void bn_mul_small(bn *a, uint32_t m)
{
    uint64_t carry = 0;
    for (int i = 0; i < a->n; i++) {
        uint64_t t = (uint64_t)a->v[i] * m + carry;
        a->v[i] = (uint32_t)t;
        carry = t >> 32;
    }
    if (carry) {
        assert(a->n < BN_LIMBS);
        a->v[a->n++] = (uint32_t)carry;
    }
}

/* a *= 5^p */
static void bn_mul_pow5(bn *a, int p)
{
    for (; p >= 13; p -= 13)
        bn_mul_small(a, 1220703125u); /* 5^13 */
    uint32_t m = 1;
    while (p-- > 0)
        m *= 5;
    if (m > 1)
        bn_mul_small(a, m);
}

static int bn_bitlen(const bn *a)
{
    return a->n ? 32 * (a->n - 1) + (32 - __builtin_clz(a->v[a->n - 1])) : 0;
}

static bool bn_bit(const bn *a, int i)
{
    return i >= 0 && i / 32 < a->n && (a->v[i / 32] >> (i % 32) & 1);
}

static void bn_shl(bn *a, int bits)
{
    int w = bits / 32, s = bits % 32;
    if (a->n == 0 || bits == 0)
        return;
    assert(a->n + w + 1 <= BN_LIMBS);
    a->v[a->n + w] = 0;
    for (int i = a->n - 1; i >= 0; i--) {
        uint64_t x = (uint64_t)a->v[i] << s;
        a->v[i + w + 1] |= (uint32_t)(x >> 32);
        a->v[i + w] = (uint32_t)x;
    }
    for (int i = 0; i < w; i++)
        a->v[i] = 0;
    a->n += w + 1;
    bn_trim(a);
}

static int bn_cmp(const bn *a, const bn *b)
{
    if (a->n != b->n)
        return a->n < b->n ? -1 : 1;
    for (int i = a->n - 1; i >= 0; i--)
        if (a->v[i] != b->v[i])
            return a->v[i] < b->v[i] ? -1 : 1;
    return 0;
}

/* a -= b, a >= b */
static void bn_sub(bn *a, const bn *b)
{
    int64_t borrow = 0;
    for (int i = 0; i < a->n; i++) {
        int64_t t = (int64_t)a->v[i] - (i < b->n ? b->v[i] : 0) - borrow;
        borrow = t < 0;
        a->v[i] = (uint32_t)(t + (borrow ? (int64_t)1 << 32 : 0));
    }
    assert(!borrow);
    bn_trim(a);
}

/* ---- decimal128 (BID) ------------------------------------------------------------- */

int q_dec_split(const bson_decimal128_t *d, bool *neg, q_u128 *coef, int *exp)
{
    uint64_t hi = d->high;
    *neg = hi >> 63;
    *coef = 0;
    *exp = 0;
    if (((hi >> 61) & 3) == 3) {
        unsigned top = (unsigned)(hi >> 58) & 0x1F;
        if (top == 0x1F)
            return Q_DEC_NAN;
        if (top == 0x1E)
            return *neg ? Q_DEC_NEG_INF : Q_DEC_POS_INF;
        *exp = (int)((hi >> 47) & 0x3FFF) - 6176; /* 2^113 and up: not canonical */
        return Q_DEC_FINITE;
    }
    *exp = (int)((hi >> 49) & 0x3FFF) - 6176;
    *coef = (q_u128)(hi & 0x1FFFFFFFFFFFFull) << 64 | d->low;
    if (*coef >= q_dec_ten34())
        *coef = 0;
    return Q_DEC_FINITE;
}

bool q_dec_join(bool neg, q_u128 coef, int exp, bson_decimal128_t *d)
{
    while (exp > 6111 && coef < q_dec_ten34() / 10) {
        coef *= 10;
        exp--;
    }
    while (exp < -6176 && coef % 10 == 0 && coef) {
        coef /= 10;
        exp++;
    }
    if (coef >= q_dec_ten34() || exp < -6176 || exp > 6111)
        return false;
    d->high = (uint64_t)neg << 63 | (uint64_t)(exp + 6176) << 49 | (uint64_t)(coef >> 64);
    d->low = (uint64_t)coef;
    return true;
}

/*
 * |c * 10^q| (c > 0) as 63 bits truncated toward zero: *mant has bit 63
 * set and bit 0 clear, |v| = (*mant + r) * 2^(*e - 64) with 0 <= r < 2;
 * returns true when r == 0 (the decimal is that binary number exactly).
 */
static bool dec_binary(q_u128 c, int q, int *e, uint64_t *mant)
{
    static __thread bn a, b;
    uint64_t t = 0;
    bn_set(&a, c);
    if (q >= 0) {
        bn_mul_pow5(&a, q); /* v = a * 2^q */
        int len = bn_bitlen(&a);
        bool exact = true;
        for (int i = 0; i < 63; i++)
            t = t << 1 | bn_bit(&a, len - 1 - i);
        for (int i = 0; i < len - 63 && exact; i++)
            exact = !bn_bit(&a, i);
        *e = len + q;
        *mant = t << 1;
        return exact;
    }
    /* v = a / 5^p * 2^-p: long division of a by b = 5^p, one bit at a time */
    int p = -q;
    bn_set(&b, 1);
    bn_mul_pow5(&b, p);
    int d = bn_bitlen(&b) - bn_bitlen(&a);
    if (d > 0)
        bn_shl(&a, d);
    else if (d < 0)
        bn_shl(&b, -d);
    if (bn_cmp(&a, &b) < 0) {
        bn_shl(&a, 1);
        d++;
    }
    /* now 1 <= a / b < 2 and v = (a / b) * 2^(-p - d) */
    for (int i = 0; i < 63; i++) {
        bool bit = bn_cmp(&a, &b) >= 0;
        if (bit)
            bn_sub(&a, &b);
        t = t << 1 | bit;
        bn_shl(&a, 1);
    }
    *e = -p - d + 1;
    *mant = t << 1;
    return a.n == 0;
}

static void put_be(q_buf *b, uint64_t v, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--)
        q_buf_putc(b, (uint8_t)(v >> (8 * i)));
}

static void invert_from(q_buf *b, size_t start)
{
    for (size_t i = start; i < b->len; i++)
        b->data[i] = (uint8_t)~b->data[i];
}

/* The continuation: decimal exponent of the leading digit, digit pairs, 00. */
static void dec_digits(q_buf *b, q_u128 c, int q)
{
    char s[40];
    int n = 0;
    while (c % 10 == 0) {
        c /= 10;
        q++;
    }
    for (; c; c /= 10)
        s[n++] = (char)(c % 10);
    put_be(b, (uint64_t)(q + n - 1 + 32768), 2);
    for (int i = n - 1; i >= 0; i -= 2)
        q_buf_putc(b, (uint8_t)(10 * s[i] + (i > 0 ? s[i - 1] : 0) + 1));
    q_buf_putc(b, 0x00);
}

void q_key_number_decimal(q_buf *b, const bson_decimal128_t *d)
{
    bool neg;
    q_u128 c;
    int q, e;
    uint64_t mant;
    switch (q_dec_split(d, &neg, &c, &q)) {
    case Q_DEC_NAN: q_buf_putc(b, 0x01); return;
    case Q_DEC_NEG_INF: q_buf_putc(b, 0x02); return;
    case Q_DEC_POS_INF: q_buf_putc(b, 0x06); return;
    default: break;
    }
    if (c == 0) {
        q_buf_putc(b, 0x04);
        return;
    }
    q_buf_putc(b, neg ? 0x03 : 0x05);
    size_t start = b->len;
    bool exact = dec_binary(c, q, &e, &mant);
    put_be(b, (uint64_t)(e + 32768), 2);
    put_be(b, mant | !exact, 8);
    if (!exact)
        dec_digits(b, c, q);
    if (neg)
        invert_from(b, start);
}

/* int32, int64 and double: exact in a long double. */
void q_key_number_ld(q_buf *b, long double v)
{
    if (isnan(v)) {
        q_buf_putc(b, 0x01);
        return;
    }
    if (isinf(v) || v == 0) {
        q_buf_putc(b, isinf(v) ? (v < 0 ? 0x02 : 0x06) : 0x04);
        return;
    }
    bool neg = v < 0;
    int e;
    long double m = frexpl(neg ? -v : v, &e);
    uint64_t mant = (uint64_t)ldexpl(m, 64);
    q_buf_putc(b, neg ? 0x03 : 0x05);
    size_t start = b->len;
    put_be(b, (uint64_t)(e + 32768), 2);
    put_be(b, mant, 8);
    if (neg)
        invert_from(b, start);
}

/* The key of a nonzero binary number, sign neg and magnitude u * 2^sh,
 * with integer arithmetic only: the bytes q_key_number_ld gives the same
 * value (frexp's e is u's bit length + sh, and m * 2^64 is u shifted up to
 * bit 63), without the long double work every _id lookup would pay. */
static void key_binary(q_buf *b, bool neg, uint64_t u, int sh)
{
    int z = __builtin_clzll(u);
    uint64_t mant = u << z;
    unsigned e = (unsigned)(64 - z + sh + 32768);
    uint8_t k[11];
    k[0] = neg ? 0x03 : 0x05;
    k[1] = (uint8_t)(e >> 8);
    k[2] = (uint8_t)e;
    for (int i = 0; i < 8; i++)
        k[3 + i] = (uint8_t)(mant >> (56 - 8 * i));
    if (neg)
        for (int i = 1; i < 11; i++)
            k[i] = (uint8_t)~k[i];
    q_buf_append(b, k, sizeof k);
}

static void key_int(q_buf *b, int64_t v)
{
    if (v == 0)
        q_buf_putc(b, 0x04);
    else
        key_binary(b, v < 0, v < 0 ? 0 - (uint64_t)v : (uint64_t)v, 0);
}

static void key_double(q_buf *b, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    unsigned ex = (unsigned)(bits >> 52) & 0x7ff;
    uint64_t frac = bits & ((1ull << 52) - 1);
    bool neg = bits >> 63;
    if (ex == 0x7ff) /* NaN, infinities */
        q_key_number_ld(b, (long double)v);
    else if (ex == 0 && frac == 0)
        q_buf_putc(b, 0x04); /* +0 and -0 */
    else if (ex == 0)
        key_binary(b, neg, frac, -1074); /* subnormal */
    else
        key_binary(b, neg, frac | 1ull << 52, (int)ex - 1075);
}

void q_key_number(q_buf *b, const bson_iter_t *it)
{
    switch (bson_iter_type(it)) {
    case BSON_TYPE_INT32: key_int(b, bson_iter_int32(it)); break;
    case BSON_TYPE_INT64: key_int(b, bson_iter_int64(it)); break;
    case BSON_TYPE_DOUBLE: key_double(b, bson_iter_double(it)); break;
    default: {
        bson_decimal128_t d;
        bson_iter_decimal128(it, &d);
        q_key_number_decimal(b, &d);
        break;
    }
    }
}

/* ---- exact comparison ----------------------------------------------------------- */

static int cmp_keys(const q_buf *x, const q_buf *y)
{
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->data, y->data, n);
    if (c)
        return c < 0 ? -1 : 1;
    return x->len < y->len ? -1 : x->len > y->len;
}

int q_number_cmp(const bson_iter_t *a, const bson_iter_t *b)
{
    uint8_t sa[64], sb[64];
    q_buf x, y;
    q_buf_init_fixed(&x, sa, sizeof sa);
    q_buf_init_fixed(&y, sb, sizeof sb);
    q_key_number(&x, a);
    q_key_number(&y, b);
    int c = cmp_keys(&x, &y);
    q_buf_cleanup(&x);
    q_buf_cleanup(&y);
    return c;
}

int q_decimal_cmp(const bson_decimal128_t *a, const bson_decimal128_t *b)
{
    uint8_t sa[64], sb[64];
    q_buf x, y;
    q_buf_init_fixed(&x, sa, sizeof sa);
    q_buf_init_fixed(&y, sb, sizeof sb);
    q_key_number_decimal(&x, a);
    q_key_number_decimal(&y, b);
    int c = cmp_keys(&x, &y);
    q_buf_cleanup(&x);
    q_buf_cleanup(&y);
    return c;
}
