/*
 * srv_compress.c -- OP_COMPRESSED's compressors as a table of callbacks:
 * snappy (id 1), zlib (2, level 6 as mongod's default) and zstd (3), plus
 * noop (0).  Each decompressor must produce exactly the announced size; the
 * caller (srv_wire.c) treats anything else as a broken message.
 */
#include <snappy-c.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "srv.h"

static long noop_c(const uint8_t *in, size_t n, uint8_t *out, size_t cap)
{
    if (n > cap)
        return -1;
    memcpy(out, in, n);
    return (long)n;
}

static size_t noop_bound(size_t n)
{
    return n;
}

static long snappy_c(const uint8_t *in, size_t n, uint8_t *out, size_t cap)
{
    size_t outn = cap;
    if (snappy_compress((const char *)in, n, (char *)out, &outn) != SNAPPY_OK)
        return -1;
    return (long)outn;
}

static long snappy_d(const uint8_t *in, size_t n, uint8_t *out, size_t cap)
{
    size_t want;
    if (snappy_uncompressed_length((const char *)in, n, &want) != SNAPPY_OK || want > cap)
        return -1;
    size_t outn = cap;
    if (snappy_uncompress((const char *)in, n, (char *)out, &outn) != SNAPPY_OK)
        return -1;
    return (long)outn;
}

static size_t snappy_bound(size_t n)
{
    return snappy_max_compressed_length(n);
}

static long zlib_c(const uint8_t *in, size_t n, uint8_t *out, size_t cap)
{
    uLongf outn = cap;
    if (compress2(out, &outn, in, n, 6) != Z_OK)
        return -1;
    return (long)outn;
}

static long zlib_d(const uint8_t *in, size_t n, uint8_t *out, size_t cap)
{
    uLongf outn = cap;
    if (uncompress(out, &outn, in, n) != Z_OK)
        return -1;
    return (long)outn;
}

static size_t zlib_bound(size_t n)
{
    return compressBound(n);
}

static long zstd_c(const uint8_t *in, size_t n, uint8_t *out, size_t cap)
{
    size_t r = ZSTD_compress(out, cap, in, n, 1);
    return ZSTD_isError(r) ? -1 : (long)r;
}

static long zstd_d(const uint8_t *in, size_t n, uint8_t *out, size_t cap)
{
    size_t r = ZSTD_decompress(out, cap, in, n);
    return ZSTD_isError(r) ? -1 : (long)r;
}

static size_t zstd_bound(size_t n)
{
    return ZSTD_compressBound(n);
}

static const srv_compressor table[] = {
    {"noop", SRV_COMP_NOOP, noop_c, noop_c, noop_bound},
    {"snappy", SRV_COMP_SNAPPY, snappy_c, snappy_d, snappy_bound},
    {"zlib", SRV_COMP_ZLIB, zlib_c, zlib_d, zlib_bound},
    {"zstd", SRV_COMP_ZSTD, zstd_c, zstd_d, zstd_bound},
};

const srv_compressor *srv_compressor_by_id(int id)
{
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].id == id)
            return &table[i];
    return NULL;
}

const srv_compressor *srv_compressor_by_name(const char *name)
{
    for (size_t i = 1; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(table[i].name, name) == 0)
            return &table[i];
    return NULL;
}
