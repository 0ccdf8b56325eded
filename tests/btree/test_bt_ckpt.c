/*
 * test_bt_ckpt.c -- btree persistence: checkpoint and reopen, a crash in
 * the middle of a checkpoint (and of a compaction), checksum errors, each
 * block compressor with the store-raw fallback, and eviction with a cache
 * smaller than the data.
 */
#include <fcntl.h>

#include "test_bt_util.h"
#include "bt_int.h"
#include "../engine/t_log.h"

/* The compressor contract: "if it didn't shrink, store it raw". */
Test(bt_compress, incompressible_input_reports_failure)
{
    uint8_t src[4096], dst[8192], back[4096];
    uint32_t x = 12345;
    for (size_t i = 0; i < sizeof src; i++)
        x ^= x << 13, x ^= x >> 17, x ^= x << 5, src[i] = (uint8_t)x;
    static const char *names[] = {"none", "snappy", "zstd"};
    for (int k = 0; k < 3; k++) {
        const bt_compressor *c = bt_compressor_find(names[k]);
        size_t n = 0;
        cr_assert(c && c->pre_size(sizeof src) <= sizeof dst);
        cr_assert_neq(c->compress(src, sizeof src, dst, sizeof dst, &n), 0, "%s", names[k]);
        memset(src + 1000, 'a', 3000); /* now it shrinks */
        if (k > 0) {
            cr_assert_eq(c->compress(src, sizeof src, dst, sizeof dst, &n), 0);
            cr_assert_lt(n, sizeof src);
            cr_assert_eq(c->decompress(dst, n, back, sizeof back, &n), 0);
            cr_assert(n == sizeof src && memcmp(back, src, n) == 0);
        }
        for (size_t i = 1000; i < 4000; i++)
            x ^= x << 13, x ^= x >> 17, x ^= x << 5, src[i] = (uint8_t)x;
    }
}

TestSuite(bt_ckpt, .init = bt_fx_init, .fini = bt_fx_fini);

static void expect_docs(eng_rs *rs, const eng_rid *rids, int n, uint32_t len, int seed0)
{
    const uint8_t *d;
    uint32_t l;
    for (int i = 0; i < n; i++) {
        BOK(eng_rs_get(rs, rids[i], &d, &l));
        cr_assert(bt_doc_is(d, l, len, (uint32_t)(seed0 + i), false), "record %d", i);
    }
}

Test(bt_ckpt, checkpoint_then_reopen)
{
    eng_rid rids[500];
    bt_open_with(NULL, 0);
    eng_rs *rs = bt_rs("test.c", NULL, true);
    eng_txn *t = btb();
    for (int i = 0; i < 500; i++)
        rids[i] = bt_ins(rs, t, 300, (uint32_t)i, false);
    btc(t);
    int64_t ck = bt_checkpoints(BE);
    BOK(eng_flush(BE, true, &BERR));
    cr_assert_eq(bt_checkpoints(BE), ck + 1);
    eng_rs_close(rs);
    eng_close(BE);
    bt_open_with(NULL, 0);
    rs = bt_rs("test.c", NULL, false);
    expect_docs(rs, rids, 500, 300, 0);
    eng_rid r = bt_ins(rs, (t = btb()), 300, 999, false);
    btc(t);
    cr_assert_gt(r, rids[499], "RecordIds must not be reused");
    bt_expect_valid();
    eng_rs_close(rs);
}

/* How many .bt files BDIR holds. */
static int bt_files(void)
{
    DIR *d = opendir(BDIR);
    struct dirent *de;
    int n = 0;
    while ((de = readdir(d)))
        n += strlen(de->d_name) > 3 && strcmp(de->d_name + strlen(de->d_name) - 3, ".bt") == 0;
    closedir(d);
    return n;
}

/* Without the log: a crash mid-checkpoint keeps exactly the previous one
 * (with the log, recovery would replay the later commits; test_bt_log.c). */
static void crash_mid_checkpoint(int point)
{
    eng_rid a[200], b[200];
    BLOG_OFF = true;
    bt_open_with(NULL, 0);
    eng_rs *rs = bt_rs("test.c", NULL, true);
    eng_txn *t = btb();
    for (int i = 0; i < 200; i++)
        a[i] = bt_ins(rs, t, 400, (uint32_t)i, false);
    btc(t);
    BOK(eng_flush(BE, true, &BERR));
    /* change much: updates, removes, inserts, a new collection */
    t = btb();
    for (int i = 0; i < 200; i++)
        b[i] = bt_ins(rs, t, 400, (uint32_t)(1000 + i), false);
    for (int i = 0; i < 100; i++)
        BOK(eng_rs_remove(rs, t, a[i]));
    BOK(eng_rs_create(BE, t, "test.new", NULL, &BERR));
    btc(t);
    bt_test_set_crash(BE, point);
    cr_assert_eq(eng_flush(BE, true, &BERR), MD_EIO);
    eng_rs_close(rs);
    eng_close(BE); /* "crashed": no checkpoint at close */
    bt_open_with(NULL, 0);
    rs = bt_rs("test.c", NULL, false);
    expect_docs(rs, a, 200, 400, 0);
    const uint8_t *d;
    uint32_t l;
    cr_assert_eq(eng_rs_get(rs, b[0], &d, &l), MD_NOTFOUND);
    struct eng_rs_stats s;
    eng_rs_get_stats(rs, &s);
    cr_assert_eq(s.count, 200);
    eng_rs *nope;
    cr_assert_eq(eng_rs_open(BE, "test.new", &nope, &BERR), MD_NOTFOUND);
    cr_assert_eq(bt_files(), 2, "test.new's file, in no checkpoint, is removed at open");
    bt_expect_valid();
    /* and the old checkpoint takes writes and checkpoints again */
    t = btb();
    bt_ins(rs, t, 50, 5, false);
    btc(t);
    BOK(eng_flush(BE, true, &BERR));
    bt_expect_valid();
    eng_rs_close(rs);
}

Test(bt_ckpt, crash_before_turtle_keeps_old_checkpoint)
{
    crash_mid_checkpoint(BT_CRASH_BEFORE_TURTLE);
}

Test(bt_ckpt, crash_before_metadata_keeps_old_checkpoint)
{
    crash_mid_checkpoint(BT_CRASH_BEFORE_META);
}

/* compact switches files at a checkpoint: a crash before the turtle keeps
 * the old file and checkpoint; done again, it shrinks the file. */
static void compact_now(eng_rs *rs)
{
    eng_compact_opts o = {.padding = ENG_PAD_NONE};
    bson_t info = BSON_INITIALIZER;
    eng_txn *t = btb();
    BOK(eng_rs_compact(rs, t, &o, &info, &BERR));
    btc(t); /* the commit's checkpoint does the work */
    bson_destroy(&info);
}

Test(bt_ckpt, crash_mid_compact_keeps_old_file)
{
    enum { N = 2000 };
    static eng_rid rids[N];
    struct eng_rs_stats s;
    BLOG_OFF = true;
    bt_open_with("none", 0);
    eng_rs *rs = bt_rs("test.c", NULL, true);
    eng_txn *t = btb();
    for (int i = 0; i < N; i++)
        rids[i] = bt_ins(rs, t, 400, (uint32_t)i, false);
    btc(t);
    BOK(eng_flush(BE, true, &BERR));
    t = btb();
    for (int i = 0; i < N; i++)
        if (i % 10)
            BOK(eng_rs_remove(rs, t, rids[i]));
    btc(t);
    BOK(eng_flush(BE, true, &BERR));
    eng_rs_get_stats(rs, &s);
    int64_t full = s.storage_size;
    bt_test_set_crash(BE, BT_CRASH_BEFORE_TURTLE);
    t_log_begin();
    compact_now(rs);
    eng_rs_close(rs);
    eng_close(BE);
    char *log = t_log_end();
    cr_assert_str_eq(log, "btree: checkpoint failed: btree: test crash\n",
                     "the crashed checkpoint says so, once");
    free(log);
    cr_assert_eq(bt_files(), 3, "meta, the old file and the unfinished copy");
    bt_open_with("none", 0);
    cr_assert_eq(bt_files(), 2, "the unfinished copy is removed at open");
    rs = bt_rs("test.c", NULL, false);
    eng_rs_get_stats(rs, &s);
    cr_assert_eq(s.count, N / 10);
    cr_assert_eq(s.storage_size, full, "the old file, as it was");
    bt_expect_valid();
    compact_now(rs);
    eng_rs_get_stats(rs, &s);
    cr_assert_lt(s.storage_size, full / 4, "%lld -> %lld", (long long)full,
                 (long long)s.storage_size);
    cr_assert_eq(bt_files(), 2, "the old file is removed after the checkpoint");
    bt_expect_valid();
    eng_rs_close(rs);
    eng_close(BE);
    bt_open_with("none", 0);
    rs = bt_rs("test.c", NULL, false);
    const uint8_t *d;
    uint32_t l;
    for (int i = 0; i < N; i += 10) {
        BOK(eng_rs_get(rs, rids[i], &d, &l));
        cr_assert(bt_doc_is(d, l, 400, (uint32_t)i, false), "record %d", i);
    }
    bt_expect_valid();
    eng_rs_close(rs);
}

/* The data file of ident prefix `pfx` in BDIR. */
static void data_file(const char *pfx, char *out, size_t cap)
{
    DIR *d = opendir(BDIR);
    struct dirent *de;
    out[0] = 0;
    while ((de = readdir(d)))
        if (strncmp(de->d_name, pfx, strlen(pfx)) == 0)
            snprintf(out, cap, "%s/%s", BDIR, de->d_name);
    closedir(d);
    cr_assert(out[0], "no file %s*", pfx);
}

Test(bt_ckpt, checksum_error_is_reported)
{
    eng_rid rids[50];
    char path[512];
    bt_open_with("none", 0);
    eng_rs *rs = bt_rs("test.c", NULL, true);
    eng_txn *t = btb();
    for (int i = 0; i < 50; i++)
        rids[i] = bt_ins(rs, t, 200, (uint32_t)i, false);
    btc(t);
    eng_rs_close(rs);
    eng_close(BE);
    data_file("test.c-", path, sizeof path);
    int fd = open(path, O_RDWR);
    uint8_t byte;
    cr_assert(pread(fd, &byte, 1, 4096 + 500) == 1);
    byte ^= 0x40;
    cr_assert(pwrite(fd, &byte, 1, 4096 + 500) == 1);
    close(fd);

    bt_open_with("none", 0);
    rs = bt_rs("test.c", NULL, false);
    const uint8_t *d;
    uint32_t l;
    cr_assert_eq(eng_rs_get(rs, rids[3], &d, &l), MD_ECORRUPT);
    eng_validate v;
    eng_validate_init(&v, true);
    eng_rs_validate(rs, &v);
    char *errs = bson_as_relaxed_extended_json(&v.errors, NULL);
    cr_assert(v.nerrors > 0 && strstr(errs, "checksum mismatch") && strstr(errs, "offset 4096"),
              "validate: %s", errs);
    bson_free(errs);
    eng_validate_cleanup(&v);
    eng_rs_close(rs);
}

static double ratio_of(const char *comp, bool noise, int64_t *bytes_out)
{
    char ident[32];
    snprintf(ident, sizeof ident, "test.%s%d", comp, noise);
    eng_rs *rs = bt_rs(ident, comp, true);
    eng_rid rids[400];
    eng_txn *t = btb();
    for (int i = 0; i < 400; i++)
        rids[i] = bt_ins(rs, t, 500, (uint32_t)i, noise);
    btc(t);
    BOK(eng_flush(BE, true, &BERR));
    double r = 0;
    cr_assert_str_eq(bt_stat_str(rs, "compressor", NULL), comp);
    bt_stat_str(rs, "compressionRatio", &r);
    const uint8_t *d;
    uint32_t l;
    for (int i = 0; i < 400; i += 7) {
        BOK(eng_rs_get(rs, rids[i], &d, &l));
        cr_assert(bt_doc_is(d, l, 500, (uint32_t)i, noise));
    }
    eng_rs_close(rs);
    (void)bytes_out;
    return r;
}

Test(bt_ckpt, compressors_and_raw_fallback)
{
    bt_open_with(NULL, 0);
    double none = ratio_of("none", false, NULL), snappy = ratio_of("snappy", false, NULL);
    double zstd = ratio_of("zstd", false, NULL);
    double snappy_raw = ratio_of("snappy", true, NULL), zstd_raw = ratio_of("zstd", true, NULL);
    cr_assert_float_eq(none, 1.0, 1e-9);
    cr_assert_gt(snappy, 3.0);
    cr_assert_gt(zstd, snappy, "zstd %f should beat snappy %f", zstd, snappy);
    /* noise: only the per-document headers compress; never worse than raw */
    cr_assert(snappy_raw >= 1.0 && snappy_raw < 1.1, "snappy on noise %f", snappy_raw);
    cr_assert(zstd_raw >= 1.0 && zstd_raw < 1.1, "zstd on noise %f", zstd_raw);
    eng_rs *bad;
    eng_rs_options o = {.block_compressor = "lz5"};
    eng_txn *t = btb();
    cr_assert_eq(eng_rs_create(BE, t, "test.bad", &o, &BERR), MD_EINVAL);
    btc(t);
    (void)bad;
    eng_close(BE);
    bt_open_with(NULL, 0); /* everything reads back after reopen */
    bt_expect_valid();
}

Test(bt_ckpt, eviction_with_small_cache)
{
    enum { N = 6000 };
    static eng_rid rids[N];
    bt_open_with(NULL, 256 * 1024);
    eng_rs *rs = bt_rs("test.c", NULL, true);
    for (int b = 0; b < N; b += 500) {
        eng_txn *t = btb();
        for (int i = b; i < b + 500; i++)
            rids[i] = bt_ins(rs, t, 500, (uint32_t)i, false);
        btc(t);
    }
    cr_assert_gt(bt_evictions(BE), 0);
    cr_assert_lt(bt_cache_bytes(BE), 2 * 1024 * 1024, "cache %lld", (long long)bt_cache_bytes(BE));
    expect_docs(rs, rids, N, 500, 0);
    eng_txn *t = btb();
    for (int i = 0; i < N; i += 3) {
        uint8_t *d = bt_doc(700, (uint32_t)(50000 + i), false);
        eng_rid nr;
        bool moved;
        BOK(eng_rs_update(rs, t, rids[i], d, 700, &nr, &moved, &BERR));
        free(d);
    }
    btc(t);
    bt_expect_valid();
    eng_rs_close(rs);
    eng_close(BE);
    bt_open_with(NULL, 256 * 1024);
    rs = bt_rs("test.c", NULL, false);
    const uint8_t *p;
    uint32_t l;
    for (int i = 0; i < N; i += 1) {
        BOK(eng_rs_get(rs, rids[i], &p, &l));
        cr_assert(i % 3 ? bt_doc_is(p, l, 500, (uint32_t)i, false)
                        : bt_doc_is(p, l, 700, (uint32_t)(50000 + i), false),
                  "record %d", i);
    }
    bt_expect_valid();
    eng_rs_close(rs);
}

/* checkpointIntervalSecs: a commit after the interval takes a checkpoint. */
Test(bt_ckpt, periodic_checkpoint)
{
    bson_t *o = BCON_NEW("btree", "{", "checkpointIntervalSecs", BCON_INT32(1), "}");
    BOK(eng_open(&bt_engine_ops, BDIR, "test", o, &BE, &BERR));
    bson_destroy(o);
    eng_rs *rs = bt_rs("test.c", NULL, true);
    int64_t ck = bt_checkpoints(BE);
    eng_txn *t = btb();
    bt_ins(rs, t, 100, 1, false);
    btc(t);
    cr_assert_eq(bt_checkpoints(BE), ck, "not yet: the interval has not passed");
    usleep(1100 * 1000);
    t = btb();
    bt_ins(rs, t, 100, 2, false);
    btc(t);
    cr_assert_eq(bt_checkpoints(BE), ck + 1);
    t = btb();
    bt_ins(rs, t, 100, 3, false);
    btc(t);
    cr_assert_eq(bt_checkpoints(BE), ck + 1);
    eng_rs_close(rs);
}

Test(bt_ckpt, second_open_is_busy)
{
    bt_open_with(NULL, 0);
    eng_engine *e2;
    cr_assert_eq(eng_open(&bt_engine_ops, BDIR, "test", NULL, &e2, &BERR), MD_EBUSY);
    cr_assert_eq(BERR.code, 98);
    cr_assert(strstr(BERR.message, "mongod.lock. Is a mongod instance already running?"));
}
