/*
 * test_bt_log.c -- the btree write-ahead log (bt_log.c): the record format
 * and its worked example, checksum and torn-record rejection, recovery
 * after a simulated crash (bt_test_crash_now: the unwritten log buffer and
 * every dirty page are lost), replaying the same log twice, log files
 * switched and removed after a checkpoint, the checkpoint every
 * checkpointLogSizeMB, and {log: false}: post-checkpoint writes are lost,
 * the checkpoint stays consistent.
 */
#include <fcntl.h>
#include <sys/stat.h>

#include "test_bt_util.h"
#include "bt_int.h"

TestSuite(bt_log, .init = bt_fx_init, .fini = bt_fx_fini);

static void open_json(const char *btree_json)
{
    char js[512];
    bson_error_t be;
    snprintf(js, sizeof js, "{\"btree\": %s}", btree_json);
    bson_t *o = bson_new_from_json((const uint8_t *)js, -1, &be);
    cr_assert(o, "%s", be.message);
    BOK(eng_open(&bt_engine_ops, BDIR, "test", o, &BE, &BERR));
    bson_destroy(o);
}

static void crash_and_reopen(const char *btree_json)
{
    bt_test_crash_now(BE);
    eng_close(BE);
    open_json(btree_json);
}

static int log_files(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/log", BDIR);
    DIR *d = opendir(path);
    struct dirent *de;
    int n = 0;
    if (!d)
        return -1;
    while ((de = readdir(d)))
        n += strncmp(de->d_name, "btlog.", 6) == 0;
    closedir(d);
    return n;
}

/* The last log file's path. */
static void last_log(char *out, size_t cap)
{
    char dir[96];
    snprintf(dir, sizeof dir, "%s/log", BDIR);
    DIR *d = opendir(dir);
    struct dirent *de;
    char best[256] = "";
    while ((de = readdir(d)))
        if (strncmp(de->d_name, "btlog.", 6) == 0 && strcmp(de->d_name, best) > 0)
            snprintf(best, sizeof best, "%s", de->d_name);
    closedir(d);
    cr_assert(best[0]);
    snprintf(out, cap, "%s/%s", dir, best);
}

Test(bt_log_format, worked_example_and_roundtrip)
{
    static const uint8_t val[5] = {5, 0, 0, 0, 0};
    static const uint8_t body_ex[12] = {1, 1, 'c', 0, 2, 1, 5, 5, 0, 0, 0, 0};
    static const uint8_t hdr_ex[24] = {0x24, 0, 0, 0, 0xcc, 0xcc, 0xcc, 0xcc, 0x20, 0, 0, 0,
                                       1, 0, 0, 0, 0x0c, 0, 0, 0, 0, 0, 0, 0};
    bt_buf body = {0}, rec = {0}, back = {0};
    uint64_t lsn = (uint64_t)1 << 32 | 32;
    bt_log_op(&body, BT_LOG_PUT, "c", NULL, 0, 1, val, 5, true);
    cr_assert(body.n == 12 && memcmp(body.p, body_ex, 12) == 0, "the example in bt_int.h");
    BOK(bt_log_encode(lsn, body.p, body.n, false, &rec));
    cr_assert_eq(rec.n, 36);
    cr_assert(memcmp(rec.p, hdr_ex, 4) == 0 && memcmp(rec.p + 8, hdr_ex + 8, 16) == 0);
    size_t len = 0;
    BOK(bt_log_decode(rec.p, rec.n, lsn, &back, &len));
    cr_assert(len == 36 && back.n == 12 && memcmp(back.p, body_ex, 12) == 0);
    /* a compressible body is stored with snappy, smaller */
    body.n = 0;
    uint8_t big[4000];
    memset(big, 'x', sizeof big);
    for (int i = 0; i < 10; i++)
        bt_log_op(&body, BT_LOG_PUT, "test.c", NULL, 0, i, big, sizeof big, true);
    bt_log_op(&body, BT_LOG_DEL, "test.i", (const uint8_t *)"k", 1, -7, NULL, 0, false);
    bt_log_op_create(&body, "test.j", BT_SS, "none");
    bt_log_op(&body, BT_LOG_DROP, "test.j", NULL, 0, 0, NULL, 0, false);
    BOK(bt_log_encode(lsn, body.p, body.n, true, &rec));
    cr_assert_eq(rec.p[20], BT_COMP_SNAPPY);
    cr_assert_lt(rec.n, body.n / 10);
    BOK(bt_log_decode(rec.p, rec.n + 100, lsn, &back, &len));
    cr_assert(len == rec.n && back.n == body.n && memcmp(back.p, body.p, body.n) == 0);
    /* incompressible: stored raw */
    uint32_t x = 99;
    for (size_t i = 0; i < sizeof big; i++)
        x ^= x << 13, x ^= x >> 17, x ^= x << 5, big[i] = (uint8_t)x;
    body.n = 0;
    bt_log_op(&body, BT_LOG_PUT, "c", NULL, 0, 1, big, sizeof big, true);
    BOK(bt_log_encode(lsn, body.p, body.n, true, &rec));
    cr_assert_eq(rec.p[20], BT_COMP_NONE);
    BOK(bt_log_decode(rec.p, rec.n, lsn, &back, &len));
    bt_buf_free(&body);
    bt_buf_free(&rec);
    bt_buf_free(&back);
}

Test(bt_log_format, damaged_torn_or_misplaced_records_are_rejected)
{
    bt_buf body = {0}, rec = {0}, back = {0};
    uint8_t v[300];
    size_t len;
    memset(v, 'v', sizeof v);
    bt_log_op(&body, BT_LOG_PUT, "c", NULL, 0, 3, v, sizeof v, true);
    for (int comp = 0; comp < 2; comp++) {
        BOK(bt_log_encode(77, body.p, body.n, comp, &rec));
        BOK(bt_log_decode(rec.p, rec.n, 77, &back, &len));
        cr_assert_eq(bt_log_decode(rec.p, 0, 77, &back, &len), MD_NOTFOUND);
        cr_assert_eq(bt_log_decode(rec.p, rec.n, 78, &back, &len), MD_ECORRUPT, "wrong LSN");
        for (size_t cut = 1; cut < rec.n; cut += 7)
            cr_assert_eq(bt_log_decode(rec.p, cut, 77, &back, &len), MD_ECORRUPT, "torn at %zu",
                         cut);
        for (size_t i = 0; i < rec.n; i++) {
            rec.p[i] ^= 0x10;
            cr_assert_eq(bt_log_decode(rec.p, rec.n, 77, &back, &len), MD_ECORRUPT,
                         "flipped byte %zu", i);
            rec.p[i] ^= 0x10;
        }
    }
    bt_buf_free(&body);
    bt_buf_free(&rec);
    bt_buf_free(&back);
}

/* Found by tests/fuzz/fuzz_open_btree.c: a record whose uncompressed
 * length field was damaged, its crc32c made to match, reserved that many
 * bytes (up to 4 GB) before the body was looked at.  The length must be
 * the one the body gives: the stored length when raw, snappy's own
 * header when compressed. */
Test(bt_log_format, a_damaged_body_length_is_refused_before_any_allocation)
{
    bt_buf body = {0}, rec = {0}, back = {0};
    uint8_t v[300];
    size_t len;
    memset(v, 'v', sizeof v);
    bt_log_op(&body, BT_LOG_PUT, "c", NULL, 0, 3, v, sizeof v, true);
    for (int comp = 0; comp < 2; comp++) {
        static const uint32_t lies[] = {0xfffffebbu, 1u << 31, 100000000u, 1, 0};
        BOK(bt_log_encode(77, body.p, body.n, comp, &rec));
        cr_assert_eq(rec.p[20], comp ? BT_COMP_SNAPPY : BT_COMP_NONE);
        for (size_t i = 0; i < sizeof lies / sizeof *lies; i++) {
            uint32_t mem = lies[i];
            for (int b = 0; b < 4; b++)
                rec.p[16 + b] = (uint8_t)(mem >> (8 * b));
            memset(rec.p + 4, 0, 4);
            uint32_t ck = eng_crc32c(0, rec.p, rec.n);
            for (int b = 0; b < 4; b++)
                rec.p[4 + b] = (uint8_t)(ck >> (8 * b));
            cr_assert_eq(bt_log_decode(rec.p, rec.n, 77, &back, &len), MD_ECORRUPT,
                         "length %u accepted", mem);
            cr_assert_lt(back.cap, 1u << 20, "%zu bytes reserved for length %u", back.cap, mem);
        }
    }
    bt_buf_free(&body);
    bt_buf_free(&rec);
    bt_buf_free(&back);
}

/* A record store, an index and a catalog entry written after the last
 * checkpoint come back from the log. */
static void write_set(eng_rid *rids, int n, int seed, bool durable)
{
    eng_rs *rs = bt_rs("test.c", NULL, false);
    eng_ss *ss;
    BOK(eng_ss_open(BE, "test.i", &ss, &BERR));
    eng_txn *t = btb();
    for (int i = 0; i < n; i++) {
        char k[32];
        rids[i] = bt_ins(rs, t, 300, (uint32_t)(seed + i), false);
        int kl = snprintf(k, sizeof k, "k%06d", seed + i);
        BOK(eng_ss_insert(ss, t, (const uint8_t *)k, (uint32_t)kl, rids[i], true, NULL, &BERR));
    }
    bson_t meta = BSON_INITIALIZER;
    BSON_APPEND_INT32(&meta, "seed", seed);
    BOK(eng_meta_put(BE, t, "test.c", &meta, &BERR));
    bson_destroy(&meta);
    BOK(eng_txn_commit(t, durable, &BERR));
    eng_ss_close(ss);
    eng_rs_close(rs);
}

/* meta_seed: the seed of the last write_set, -1: not checked */
static void expect_set(const eng_rid *rids, int n, int seed, int64_t entries, int meta_seed)
{
    eng_rs *rs = bt_rs("test.c", NULL, false);
    eng_ss *ss;
    const uint8_t *d;
    uint32_t l;
    for (int i = 0; i < n; i++) {
        BOK(eng_rs_get(rs, rids[i], &d, &l));
        cr_assert(bt_doc_is(d, l, 300, (uint32_t)(seed + i), false), "record %d", i);
    }
    struct eng_rs_stats s;
    eng_rs_get_stats(rs, &s);
    cr_assert_eq(s.count, entries);
    BOK(eng_ss_open(BE, "test.i", &ss, &BERR));
    cr_assert_eq(eng_ss_entries(ss), entries);
    eng_ss_close(ss);
    bson_t meta;
    bson_iter_t it;
    if (meta_seed >= 0) {
        BOK(eng_meta_get(BE, "test.c", &meta));
        cr_assert(bson_iter_init_find(&it, &meta, "seed") &&
                  bson_iter_as_int64(&it) == meta_seed);
        bson_destroy(&meta);
    }
    eng_rs_close(rs);
    bt_expect_valid();
}

static void create_stores(void)
{
    eng_txn *t = btb();
    BOK(eng_rs_create(BE, t, "test.c", NULL, &BERR));
    BOK(eng_ss_create(BE, t, "test.i", &BERR));
    btc(t);
}

Test(bt_log, durable_commits_survive_a_crash)
{
    static eng_rid a[300], b[300];
    open_json("{}");
    create_stores(); /* only in the log: the stores are recreated by replay */
    write_set(a, 300, 0, false);
    BOK(eng_flush(BE, true, &BERR));
    write_set(b, 300, 1000, true);
    int64_t ckpts = bt_checkpoints(BE);
    crash_and_reopen("{}");
    expect_set(a, 300, 0, 600, 1000);
    expect_set(b, 300, 1000, 600, 1000);
    cr_assert_gt(bt_checkpoints(BE), 0, "recovery checkpoints (%lld before)",
                 (long long)ckpts);
    /* a drop and a create after the checkpoint replay too */
    eng_txn *t = btb();
    BOK(eng_rs_drop(BE, t, "test.c"));
    BOK(eng_rs_create(BE, t, "test.d", NULL, &BERR));
    BOK(eng_txn_commit(t, true, &BERR));
    crash_and_reopen("{}");
    eng_rs *rs;
    cr_assert_eq(eng_rs_open(BE, "test.c", &rs, &BERR), MD_NOTFOUND);
    BOK(eng_rs_open(BE, "test.d", &rs, &BERR));
    eng_rs_close(rs);
    bt_expect_valid();
}

Test(bt_log, stores_created_before_the_first_checkpoint_replay)
{
    static eng_rid a[50];
    open_json("{}");
    create_stores();
    write_set(a, 50, 7, true);
    crash_and_reopen("{}");
    expect_set(a, 50, 7, 50, 7);
}

Test(bt_log, group_commit_flushes_without_j)
{
    static eng_rid a[20];
    open_json("{\"commitIntervalMs\": 10}");
    create_stores();
    write_set(a, 20, 3, false);
    usleep(200 * 1000); /* the flush thread writes and syncs it */
    crash_and_reopen("{}");
    expect_set(a, 20, 3, 20, 3);
}

Test(bt_log, replaying_twice_gives_the_same_state)
{
    static eng_rid a[200], b[100];
    open_json("{}");
    create_stores();
    BOK(eng_flush(BE, true, &BERR));
    write_set(a, 200, 0, true);
    crash_and_reopen("{\"debugNoRecoveryCheckpoint\": true}");
    expect_set(a, 200, 0, 200, 0);
    write_set(b, 100, 500, true); /* more log after the replayed records */
    crash_and_reopen("{\"debugNoRecoveryCheckpoint\": true}");
    expect_set(a, 200, 0, 300, 500);
    expect_set(b, 100, 500, 300, 500);
    crash_and_reopen("{}");
    expect_set(b, 100, 500, 300, 500);
    expect_set(a, 200, 0, 300, 500);
}

Test(bt_log, a_torn_or_damaged_tail_is_cut)
{
    static eng_rid a[10], b[10];
    char path[256];
    struct stat st;
    for (int damage = 0; damage < 2; damage++) {
        open_json("{}");
        if (damage == 0)
            create_stores();
        BOK(eng_flush(BE, true, &BERR));
        write_set(a, 10, 100 * damage, true);
        write_set(b, 10, 100 * damage + 50, true);
        bt_test_crash_now(BE);
        eng_close(BE);
        last_log(path, sizeof path);
        cr_assert_eq(stat(path, &st), 0);
        if (damage) { /* flip a byte of the last record */
            int fd = open(path, O_RDWR);
            uint8_t c;
            cr_assert_eq(pread(fd, &c, 1, st.st_size - 10), 1);
            c ^= 0xff;
            cr_assert_eq(pwrite(fd, &c, 1, st.st_size - 10), 1);
            close(fd);
        } else {
            cr_assert_eq(truncate(path, st.st_size - 30), 0);
        }
        open_json("{}");
        expect_set(a, 10, 100 * damage, 10 + 10 * damage, 100 * damage);
        eng_rs *rs = bt_rs("test.c", NULL, false);
        const uint8_t *d;
        uint32_t l;
        cr_assert_eq(eng_rs_get(rs, b[0], &d, &l), MD_NOTFOUND, "the cut record is gone");
        eng_rs_close(rs);
        eng_close(BE);
    }
    BE = NULL;
    open_json("{}");
}

Test(bt_log, files_switch_and_are_removed_after_a_checkpoint)
{
    static eng_rid a[100];
    open_json("{\"logFileSize\": 8192}");
    create_stores();
    for (int i = 0; i < 10; i++)
        write_set(a, 100, i * 100, i % 2 == 1); /* the last one durable */
    cr_assert_gt(log_files(), 3, "%d files", log_files());
    crash_and_reopen("{\"logFileSize\": 8192}");
    expect_set(a, 100, 900, 1000, 900);
    cr_assert_eq(log_files(), 1, "recovery's checkpoint removed the replayed files");
    for (int i = 10; i < 15; i++)
        write_set(a, 100, i * 100, false);
    cr_assert_gt(log_files(), 2);
    BOK(eng_flush(BE, true, &BERR));
    cr_assert_eq(log_files(), 1, "only the current file stays");
    crash_and_reopen("{\"logFileSize\": 8192}");
    expect_set(a, 100, 1400, 1500, 1400);
}

Test(bt_log, a_checkpoint_every_checkpoint_log_size)
{
    static eng_rid a[200];
    open_json("{\"checkpointLogSize\": 65536, \"checkpointIntervalSecs\": 0}");
    create_stores();
    int64_t c0 = bt_checkpoints(BE);
    for (int i = 0; i < 30; i++)
        write_set(a, 200, i * 200, false);
    cr_assert_gt(bt_checkpoints(BE), c0, "checkpointed for the log size");
    bson_t st = BSON_INITIALIZER;
    BE->ops->append_status(BE, &st);
    char *js = bson_as_relaxed_extended_json(&st, NULL);
    cr_assert(strstr(js, "\"bytesSinceCheckpoint\""), "%s", js);
    bson_free(js);
    bson_destroy(&st);
}

Test(bt_log, log_off_loses_post_checkpoint_writes_consistently)
{
    static eng_rid a[100], b[100];
    BLOG_OFF = true;
    bt_open_with(NULL, 0);
    create_stores();
    write_set(a, 100, 0, false);
    BOK(eng_flush(BE, true, &BERR));
    write_set(b, 100, 200, true); /* j:true: durable at the next checkpoint */
    bt_test_crash_now(BE);
    eng_close(BE);
    bt_open_with(NULL, 0);
    cr_assert_eq(log_files(), -1, "no log directory");
    expect_set(a, 100, 0, 100, 0);
    eng_rs *rs = bt_rs("test.c", NULL, false);
    const uint8_t *d;
    uint32_t l;
    cr_assert_eq(eng_rs_get(rs, b[0], &d, &l), MD_NOTFOUND);
    eng_rs_close(rs);
}

Test(bt_log, log_off_replays_and_removes_a_log_left_behind)
{
    static eng_rid a[30];
    open_json("{}");
    create_stores();
    write_set(a, 30, 1, true);
    bt_test_crash_now(BE);
    eng_close(BE);
    BLOG_OFF = true;
    bt_open_with(NULL, 0);
    expect_set(a, 30, 1, 30, 1);
    cr_assert_eq(log_files(), 0);
    eng_close(BE);
    open_json("{}"); /* and the log on again starts clean */
    expect_set(a, 30, 1, 30, 1);
}
