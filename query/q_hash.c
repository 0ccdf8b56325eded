/*
 * q_hash.c -- MongoDB's hash of a BSON element (BSONElementHasher::hash64),
 * the key of a hashed index, over MD5 (RFC 1321, implemented here: 64-byte
 * blocks, four rounds of sixteen steps).
 *
 * The hash is the first 8 bytes of the MD5 digest, read little-endian as a
 * signed 64-bit integer, of:
 *
 *   seed             int32 little-endian (a hashed index's "seed", 0)
 *   element          canonical type  int32 little-endian (below)
 *                    [field name and its NUL, inside documents only]
 *                    value: a number as its int64 (doubles truncated and
 *                      clamped: NaN -> 0, >= 2^63 -> INT64_MAX but exactly
 *                      2^63 -> INT64_MIN, <= -2^63 -> INT64_MIN), so that
 *                      42, 42L and 42.0 (and 42.5) hash alike;
 *                    a document or array: each element, field name included,
 *                      then its end (the EOO element: type 0, 4 zero bytes);
 *                      code with scope: the code and its NUL, then the scope
 *                      as a document;
 *                    anything else: its BSON value bytes as stored.
 *
 * Canonical types are BSONElement::canonicalType, q_type_rank (MinKey -1,
 * undefined 0, null 5, numbers 10, string and symbol 15, document 20, ...,
 * MaxKey 127).
 *
 * Checked against MongoDB's own published values (jstests/core/
 * hash.js with seed 1, and hasher.cpp's start-up check with seed 0) in
 * tests/query/test_q_hash.c.  Deviation: a decimal128 is truncated through
 * long double (MongoDB: exactly).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "q_int.h"

/* ---- MD5 -------------------------------------------------------------------- */

static const uint32_t md5_k[64] = {
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613,
    0xfd469501, 0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193,
    0xa679438e, 0x49b40821, 0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d,
    0x02441453, 0xd8a1e681, 0xe7d3fbc8, 0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed,
    0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a, 0xfffa3942, 0x8771f681, 0x6d9d6122,
    0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70, 0x289b7ec6, 0xeaa127fa,
    0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665, 0xf4292244,
    0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb,
    0xeb86d391,
};
static const uint8_t md5_r[64] = {
    7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 5, 9,  14, 20, 5, 9,
    14, 20, 5, 9,  14, 20, 5, 9,  14, 20, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
    4, 11, 16, 23, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21,
};

static uint32_t rotl32(uint32_t x, unsigned n) { return x << n | x >> (32 - n); }

static void md5_block(uint32_t h[4], const uint8_t *p)
{
    uint32_t m[16], a = h[0], b = h[1], c = h[2], d = h[3];
    for (int i = 0; i < 16; i++)
        m[i] = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
               (uint32_t)p[4 * i + 3] << 24;
    for (int i = 0; i < 64; i++) {
        uint32_t f;
        int g;
        if (i < 16)
            f = (b & c) | (~b & d), g = i;
        else if (i < 32)
            f = (d & b) | (~d & c), g = (5 * i + 1) % 16;
        else if (i < 48)
            f = b ^ c ^ d, g = (3 * i + 5) % 16;
        else
            f = c ^ (b | ~d), g = (7 * i) % 16;
        f += a + md5_k[i] + m[g];
        a = d;
        d = c;
        c = b;
        b += rotl32(f, md5_r[i]);
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d;
}

void q_md5_init(q_md5 *m)
{
    m->h[0] = 0x67452301, m->h[1] = 0xefcdab89, m->h[2] = 0x98badcfe, m->h[3] = 0x10325476;
    m->len = 0;
}

void q_md5_append(q_md5 *m, const void *data, size_t n)
{
    const uint8_t *p = data;
    size_t have = (size_t)(m->len % 64);
    m->len += n;
    if (have) {
        size_t take = n < 64 - have ? n : 64 - have;
        memcpy(m->buf + have, p, take);
        p += take, n -= take, have += take;
        if (have < 64)
            return;
        md5_block(m->h, m->buf);
    }
    for (; n >= 64; p += 64, n -= 64)
        md5_block(m->h, p);
    memcpy(m->buf, p, n);
}

void q_md5_finish(q_md5 *m, uint8_t digest[16])
{
    uint64_t bits = m->len * 8;
    uint8_t pad[72] = {0x80};
    size_t have = (size_t)(m->len % 64), n = (have < 56 ? 56 : 120) - have;
    for (int i = 0; i < 8; i++)
        pad[n + (size_t)i] = (uint8_t)(bits >> (8 * i));
    q_md5_append(m, pad, n + 8);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            digest[4 * i + j] = (uint8_t)(m->h[i] >> (8 * j));
}

/* ---- the element hasher ------------------------------------------------------------ */

#define TWO63 9223372036854775808.0

/* BSONElement::safeNumberLongForHash. */
static int64_t hash_number(const bson_iter_t *it)
{
    long double d;
    switch (bson_iter_type(it)) {
    case BSON_TYPE_INT32: return bson_iter_int32(it);
    case BSON_TYPE_INT64: return bson_iter_int64(it);
    case BSON_TYPE_DOUBLE:
        d = bson_iter_double(it);
        if ((double)d == TWO63)
            return INT64_MIN; /* kept as MongoDB's older releases hashed it */
        break;
    default: {
        bson_decimal128_t dec;
        char s[BSON_DECIMAL128_STRING];
        bson_iter_decimal128(it, &dec);
        bson_decimal128_to_string(&dec, s);
        d = strtold(s, NULL);
        break;
    }
    }
    if (isnan(d))
        return 0;
    if (d >= (long double)TWO63)
        return INT64_MAX;
    if (d <= -(long double)TWO63)
        return INT64_MIN;
    return (int64_t)d;
}

static void put_le32(q_md5 *m, int32_t v)
{
    uint8_t b[4];
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)((uint32_t)v >> (8 * i));
    q_md5_append(m, b, 4);
}

static void hash_element(q_md5 *m, const bson_iter_t *it, bool with_name, int depth)
{
    bson_type_t t = bson_iter_type(it);
    put_le32(m, q_type_rank(t)); /* canonicalType */
    if (with_name)
        q_md5_append(m, bson_iter_key(it), bson_iter_key_len(it) + 1);
    if (t == BSON_TYPE_INT32 || t == BSON_TYPE_INT64 || t == BSON_TYPE_DOUBLE ||
        t == BSON_TYPE_DECIMAL128) {
        uint64_t v = (uint64_t)hash_number(it);
        uint8_t b[8];
        for (int i = 0; i < 8; i++)
            b[i] = (uint8_t)(v >> (8 * i));
        q_md5_append(m, b, 8);
    } else if ((t == BSON_TYPE_DOCUMENT || t == BSON_TYPE_ARRAY || t == BSON_TYPE_CODEWSCOPE) &&
               depth < 200) {
        bson_iter_t sub;
        bson_t scope;
        bool in;
        if (t == BSON_TYPE_CODEWSCOPE) {
            uint32_t clen, slen;
            const uint8_t *sdata;
            const char *code = bson_iter_codewscope(it, &clen, &slen, &sdata);
            q_md5_append(m, code, clen + 1);
            in = bson_init_static(&scope, sdata, slen) && bson_iter_init(&sub, &scope);
        } else {
            in = bson_iter_recurse(it, &sub);
        }
        while (in && bson_iter_next(&sub))
            hash_element(m, &sub, true, depth + 1);
        /* the end-of-object element: its canonical type 0; an EOO element
         * has no name (fieldNameSize 0) and no value */
        put_le32(m, 0);
    } else if (t != BSON_TYPE_EOD) {
        /* the value's bytes as stored: from the value's start to the next
         * element (libbson's d1 / next_off offsets into raw) */
        q_md5_append(m, it->raw + it->d1, it->next_off - it->d1);
    }
}

int64_t q_hash_element(const bson_iter_t *it, int32_t seed)
{
    q_md5 m;
    uint8_t d[16];
    q_md5_init(&m);
    put_le32(&m, seed);
    if (it)
        hash_element(&m, it, false, 0);
    else { /* a missing field hashes as null */
        put_le32(&m, q_type_rank(BSON_TYPE_NULL));
    }
    q_md5_finish(&m, d);
    uint64_t h = 0;
    for (int i = 7; i >= 0; i--)
        h = h << 8 | d[i];
    return (int64_t)h;
}

void q_hash_key(const bson_iter_t *it, int32_t seed, q_buf *out)
{
    bson_t one = BSON_INITIALIZER;
    bson_iter_t h;
    BSON_APPEND_INT64(&one, "h", q_hash_element(it, seed));
    bson_iter_init_find(&h, &one, "h");
    q_key_append_value(out, &h, false);
    bson_destroy(&one);
}
