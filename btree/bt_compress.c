/*
 * bt_compress.c -- block compressors as a table of callbacks, after
 * WiredTiger's WT_COMPRESSOR: pre_size, compress, decompress.
 *
 * The contract: compress returns nonzero when it failed or when the result
 * would not be smaller than the input, and the caller then stores the body
 * raw ("if it didn't shrink, store it raw").  Only the page body is
 * compressed; the 40-byte page and block headers never are, so a block's
 * size and checksum can be read without knowing its compressor.
 *
 * snappy needs the exact compressed length to decompress; the block header's
 * disk_size supplies it (WiredTiger's extension prepends it instead).  zstd
 * runs at level 6, WiredTiger's zstd default.
 */
#include <snappy-c.h>
#include <string.h>
#include <zstd.h>

#include "bt_int.h"

static size_t none_pre_size(size_t n)
{
    return n;
}

static int none_compress(const uint8_t *src, size_t n, uint8_t *dst, size_t cap, size_t *out)
{
    return 1; /* always "store raw" */
}

static int none_decompress(const uint8_t *src, size_t n, uint8_t *dst, size_t dlen, size_t *out)
{
    if (n != dlen)
        return MD_ECORRUPT;
    memcpy(dst, src, n);
    *out = n;
    return 0;
}

static size_t snappy_pre_size(size_t n)
{
    return snappy_max_compressed_length(n);
}

static int snappy_comp(const uint8_t *src, size_t n, uint8_t *dst, size_t cap, size_t *out)
{
    size_t len = cap;
    if (snappy_compress((const char *)src, n, (char *)dst, &len) != SNAPPY_OK || len >= n)
        return 1;
    *out = len;
    return 0;
}

static int snappy_decomp(const uint8_t *src, size_t n, uint8_t *dst, size_t dlen, size_t *out)
{
    size_t len = dlen;
    if (snappy_uncompress((const char *)src, n, (char *)dst, &len) != SNAPPY_OK || len != dlen)
        return MD_ECORRUPT;
    *out = len;
    return 0;
}

static size_t zstd_pre_size(size_t n)
{
    return ZSTD_compressBound(n);
}

static int zstd_comp(const uint8_t *src, size_t n, uint8_t *dst, size_t cap, size_t *out)
{
    size_t r = ZSTD_compress(dst, cap, src, n, 6);
    if (ZSTD_isError(r) || r >= n)
        return 1;
    *out = r;
    return 0;
}

static int zstd_decomp(const uint8_t *src, size_t n, uint8_t *dst, size_t dlen, size_t *out)
{
    size_t r = ZSTD_decompress(dst, dlen, src, n);
    if (ZSTD_isError(r) || r != dlen)
        return MD_ECORRUPT;
    *out = r;
    return 0;
}

static const bt_compressor compressors[] = {
    {"none", BT_COMP_NONE, none_pre_size, none_compress, none_decompress},
    {"snappy", BT_COMP_SNAPPY, snappy_pre_size, snappy_comp, snappy_decomp},
    {"zstd", BT_COMP_ZSTD, zstd_pre_size, zstd_comp, zstd_decomp},
};

const bt_compressor *bt_compressor_find(const char *name)
{
    for (size_t i = 0; i < sizeof compressors / sizeof compressors[0]; i++)
        if (strcmp(compressors[i].name, name) == 0)
            return &compressors[i];
    return NULL;
}

const bt_compressor *bt_compressor_by_id(int id)
{
    for (size_t i = 0; i < sizeof compressors / sizeof compressors[0]; i++)
        if (compressors[i].id == id)
            return &compressors[i];
    return NULL;
}
