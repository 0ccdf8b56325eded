/*
 * q_buf.c -- a growable byte buffer, the scratch space of the query layer:
 * index keys are encoded into one, error messages and value renderings are
 * built in one, and updated documents are written into one as raw BSON
 * (q_bw_*), so that unchanged runs of fields cost one memcpy.
 *
 * Allocation goes through libbson's allocator, which aborts on exhaustion
 * (as every bson_append_* already does), so appends cannot fail.  A buffer
 * that grows moves: pointers into b->data are no longer valid after any
 * append.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "q.h"
#include "q_path.h"

void q_buf_init(q_buf *b)
{
    assert(b);
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->fixed = NULL;
}

void q_buf_init_fixed(q_buf *b, uint8_t *storage, size_t cap)
{
    assert(b && storage && cap > 0);
    b->data = b->fixed = storage;
    b->len = 0;
    b->cap = cap;
}

void q_buf_cleanup(q_buf *b)
{
    if (!b)
        return;
    if (b->data != b->fixed)
        bson_free(b->data);
    q_buf_init(b);
}

/* Make room for `n` more bytes (plus a spare byte for a NUL terminator). */
void q_buf_reserve(q_buf *b, size_t n)
{
    size_t need = b->len + n + 1;
    if (need <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap *= 2;
    if (b->data && b->data == b->fixed) {
        b->data = bson_malloc(cap);
        memcpy(b->data, b->fixed, b->len);
    } else {
        b->data = bson_realloc(b->data, cap);
    }
    b->cap = cap;
}

void q_buf_append(q_buf *b, const void *p, size_t n)
{
    assert(b && (p || n == 0));
    if (n == 0)
        return;
    q_buf_reserve(b, n);
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

void q_buf_putc(q_buf *b, uint8_t c)
{
    q_buf_reserve(b, 1);
    b->data[b->len++] = c;
}

void q_buf_puts(q_buf *b, const char *s)
{
    q_buf_append(b, s, strlen(s));
}

void q_buf_printf(q_buf *b, const char *fmt, ...)
{
    va_list ap;
    char small[128];
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    assert(n >= 0);
    if ((size_t)n < sizeof small) {
        q_buf_append(b, small, (size_t)n);
        return;
    }
    q_buf_reserve(b, (size_t)n);
    va_start(ap, fmt);
    vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

const char *q_buf_cstr(q_buf *b)
{
    q_buf_reserve(b, 0);
    b->data[b->len] = '\0';
    return (const char *)b->data;
}

void q_buf_reset(q_buf *b)
{
    b->len = 0;
}

/* ---- raw BSON writing ------------------------------------------------------
 * Elements are type byte, key, NUL, value; integers are little-endian.
 */

void q_bw_le(q_buf *b, uint64_t v, int nbytes)
{
    for (int i = 0; i < nbytes; i++)
        q_buf_putc(b, (uint8_t)(v >> (8 * i)));
}

void q_bw_head(q_buf *b, bson_type_t t, const char *key)
{
    q_buf_putc(b, (uint8_t)t);
    q_buf_append(b, key, strlen(key) + 1);
}

size_t q_bw_begin(q_buf *b, bson_type_t t, const char *key)
{
    assert(t == BSON_TYPE_DOCUMENT || t == BSON_TYPE_ARRAY);
    q_bw_head(b, t, key);
    size_t at = b->len;
    q_bw_le(b, 0, 4);
    return at;
}

void q_bw_end(q_buf *b, size_t at)
{
    q_buf_putc(b, 0);
    uint32_t n = (uint32_t)(b->len - at);
    for (int i = 0; i < 4; i++)
        b->data[at + i] = (uint8_t)(n >> (8 * i));
}

void q_bw_iter(q_buf *b, const char *key, const bson_iter_t *it)
{
    q_bw_head(b, bson_iter_type(it), key);
    q_buf_append(b, it->raw + it->d1, it->next_off - it->d1);
}

void q_bw_num(q_buf *b, const char *key, const q_num *n)
{
    uint64_t bits;
    q_bw_head(b, n->t, key);
    switch (n->t) {
    case BSON_TYPE_INT32: q_bw_le(b, (uint32_t)n->i32, 4); break;
    case BSON_TYPE_INT64: q_bw_le(b, (uint64_t)n->i64, 8); break;
    case BSON_TYPE_DOUBLE:
        memcpy(&bits, &n->d, 8);
        q_bw_le(b, bits, 8);
        break;
    default:
        q_bw_le(b, n->dec.low, 8);
        q_bw_le(b, n->dec.high, 8);
        break;
    }
}

void q_bw_null(q_buf *b, const char *key)
{
    q_bw_head(b, BSON_TYPE_NULL, key);
}

void q_bw_date(q_buf *b, const char *key, int64_t ms)
{
    q_bw_head(b, BSON_TYPE_DATE_TIME, key);
    q_bw_le(b, (uint64_t)ms, 8);
}

void q_bw_timestamp(q_buf *b, const char *key, uint32_t t, uint32_t i)
{
    q_bw_head(b, BSON_TYPE_TIMESTAMP, key);
    q_bw_le(b, (uint64_t)t << 32 | i, 8);
}
