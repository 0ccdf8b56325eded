/*
 * test_bt_util.h -- fixture and helpers shared by the btree engine tests:
 * a fresh directory per test, open/reopen with btree options, documents of
 * a given size and seed, a verify helper that fails with the messages, and
 * readers of the engine's and a store's statistics.
 */
#ifndef TEST_BT_UTIL_H
#define TEST_BT_UTIL_H

#include <criterion/criterion.h>
#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bt.h"

static char BDIR[64];
static eng_engine *BE;
static md_error BERR;
static bool BLOG_OFF; /* open with btree {log: false} */

#define BOK(x) \
    do { \
        int rc_ = (x); \
        cr_assert(rc_ == 0, "%s -> %s (%s)", #x, md_strerror(rc_), BERR.message); \
    } while (0)

static void bt_open_with(const char *compressor, int64_t cache_bytes)
{
    bson_t opts = BSON_INITIALIZER, sub;
    BSON_APPEND_DOCUMENT_BEGIN(&opts, "btree", &sub);
    if (compressor)
        BSON_APPEND_UTF8(&sub, "blockCompressor", compressor);
    if (cache_bytes)
        BSON_APPEND_INT64(&sub, "cacheSize", cache_bytes);
    if (BLOG_OFF)
        BSON_APPEND_BOOL(&sub, "log", false);
    bson_append_document_end(&opts, &sub);
    BOK(eng_open(&bt_engine_ops, BDIR, "test", &opts, &BE, &BERR));
    bson_destroy(&opts);
}

static void bt_fx_init(void)
{
    snprintf(BDIR, sizeof BDIR, "/tmp/md_bt_XXXXXX");
    cr_assert(mkdtemp(BDIR));
}

static int bt_rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    return remove(path);
}

static void bt_fx_fini(void)
{
    eng_close(BE);
    BE = NULL;
    nftw(BDIR, bt_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static eng_txn *btb(void)
{
    eng_txn *t;
    BOK(eng_txn_begin(BE, &t));
    return t;
}

static void btc(eng_txn *t)
{
    BOK(eng_txn_commit(t, false, &BERR));
}

/* A document-like byte string of len bytes (len >= 13) from seed; `noise`
 * makes the payload incompressible. */
static uint8_t *bt_doc(uint32_t len, uint32_t seed, bool noise)
{
    uint8_t *d = malloc(len);
    uint32_t bin = len - 13, x = seed * 2654435761u + 1;
    memcpy(d, &len, 4);
    d[4] = 0x05, d[5] = 'p', d[6] = 0;
    memcpy(d + 7, &bin, 4);
    d[11] = 0;
    for (uint32_t i = 0; i < bin; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        d[12 + i] = noise ? (uint8_t)x : (uint8_t)("abcdefgh"[(seed + i / 16) % 8]);
    }
    d[len - 1] = 0;
    return d;
}

static inline bool bt_doc_is(const uint8_t *p, uint32_t l, uint32_t len, uint32_t seed, bool noise)
{
    uint8_t *d = bt_doc(len, seed, noise);
    bool ok = l == len && memcmp(p, d, len) == 0;
    free(d);
    return ok;
}

static eng_rs *bt_rs(const char *ident, const char *compressor, bool create)
{
    eng_rs *rs;
    if (create) {
        eng_rs_options o = {.block_compressor = compressor};
        eng_txn *t = btb();
        BOK(eng_rs_create(BE, t, ident, &o, &BERR));
        btc(t);
    }
    BOK(eng_rs_open(BE, ident, &rs, &BERR));
    return rs;
}

static inline eng_rid bt_ins(eng_rs *rs, eng_txn *t, uint32_t len, uint32_t seed, bool noise)
{
    eng_rid rid;
    uint8_t *d = bt_doc(len, seed, noise);
    BOK(eng_rs_insert(rs, t, d, len, &rid, &BERR));
    free(d);
    return rid;
}

static void bt_expect_valid(void)
{
    eng_validate v;
    eng_validate_init(&v, true);
    int n = bt_verify_engine(BE, &v);
    char *errs = bson_as_relaxed_extended_json(&v.errors, NULL);
    cr_assert(n == 0, "bt_verify: %s", errs);
    bson_free(errs);
    eng_validate_cleanup(&v);
}

__attribute__((unused)) static const char *bt_stat_str(eng_rs *rs, const char *key, double *num)
{
    static char buf[64];
    bson_t sub = BSON_INITIALIZER;
    bson_iter_t it;
    eng_rs_append_stats(rs, &sub);
    buf[0] = 0;
    if (bson_iter_init_find(&it, &sub, key)) {
        if (BSON_ITER_HOLDS_UTF8(&it))
            snprintf(buf, sizeof buf, "%s", bson_iter_utf8(&it, NULL));
        else if (num)
            *num = bson_iter_as_double(&it);
    }
    bson_destroy(&sub);
    return buf;
}

/* The field `key` of the engine status's btree.transaction (-1: none). */
static inline int64_t bt_txn_stat(const char *key)
{
    bson_t st = BSON_INITIALIZER;
    bson_iter_t it, sub;
    int64_t v = -1;
    char path[64];
    BE->ops->append_status(BE, &st);
    snprintf(path, sizeof path, "btree.transaction.%s", key);
    if (bson_iter_init(&it, &st) && bson_iter_find_descendant(&it, path, &sub))
        v = bson_iter_as_int64(&sub);
    bson_destroy(&st);
    return v;
}

#endif /* TEST_BT_UTIL_H */
