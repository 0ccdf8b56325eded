/*
 * test_bt_capped.c -- what btree's capped record stores promise beyond the
 * capped contract (tests/engine/test_eng_capped.c): the options and the
 * ring come back from the log after a crash (no checkpoint since the
 * create) and from a checkpoint; a drop forgets the options; the ring's
 * removals belong to the inserting transaction (other readers see the old
 * records until it commits, an abort brings them back).
 */
#include "test_bt_util.h"

TestSuite(bt_capped, .init = bt_fx_init, .fini = bt_fx_fini);

static eng_rs *capped(const char *ident, int64_t size, int64_t max)
{
    eng_rs_options o = {.capped = true, .capped_size = size, .capped_max = max};
    eng_rs *rs;
    eng_txn *t = btb();
    BOK(eng_rs_create(BE, t, ident, &o, &BERR));
    btc(t);
    BOK(eng_rs_open(BE, ident, &rs, &BERR));
    return rs;
}

static void ins(eng_rs *rs, uint32_t len, uint32_t seed, bool durable)
{
    eng_txn *t = btb();
    bt_ins(rs, t, len, seed, false);
    BOK(eng_txn_commit(t, durable, &BERR));
}

/* A forward scan (outside any transaction) returns seeds first..last of
 * len bytes with increasing RecordIds; returns the count. */
static int expect_seeds(eng_rs *rs, uint32_t len, uint32_t first, uint32_t last)
{
    eng_rs_cursor *c;
    eng_rid rid, prev = 0;
    const uint8_t *p;
    uint32_t l, seed = first;
    int rc;
    BOK(eng_rs_cursor_open(rs, true, &c));
    while ((rc = eng_rs_cursor_next(c, &rid, &p, &l)) == 0) {
        cr_assert(rid > prev, "RecordIds increase");
        cr_assert(bt_doc_is(p, l, len, seed, false), "record of seed %u expected", seed);
        prev = rid;
        seed++;
    }
    cr_assert_eq(rc, MD_NOTFOUND);
    cr_assert_eq(seed, last + 1, "the scan ended at seed %u, want %u", seed - 1, last);
    eng_rs_cursor_close(c);
    return (int)(last + 1 - first);
}

static void stats(eng_rs *rs, struct eng_rs_stats *s)
{
    memset(s, 0, sizeof *s);
    bt_engine_ops.rs_stats(rs, s);
}

Test(bt_capped, crash_replays_the_ring_and_its_options_from_the_log)
{
    bt_open_with(NULL, 0);
    eng_rs *rs = capped("test.cap", 4000, 0);
    for (uint32_t i = 1; i <= 100; i++)
        ins(rs, 200, i, i == 100);
    expect_seeds(rs, 200, 81, 100);
    eng_rs_close(rs);
    bt_test_crash_now(BE);
    eng_close(BE);
    bt_open_with(NULL, 0);
    BOK(eng_rs_open(BE, "test.cap", &rs, &BERR));
    expect_seeds(rs, 200, 81, 100);
    /* still a ring of 4000 bytes */
    for (uint32_t i = 101; i <= 130; i++)
        ins(rs, 200, i, false);
    expect_seeds(rs, 200, 111, 130);
    struct eng_rs_stats s;
    stats(rs, &s);
    cr_assert_eq(s.count, 20);
    cr_assert_eq(s.data_size, 4000);
    bt_expect_valid();
    eng_rs_close(rs);
}

Test(bt_capped, options_survive_a_checkpoint_and_a_drop_forgets_them)
{
    bt_open_with(NULL, 0);
    eng_rs *rs = capped("test.cap", 100000, 5);
    for (uint32_t i = 1; i <= 9; i++)
        ins(rs, 100, i, false);
    eng_rs_close(rs);
    BOK(eng_flush(BE, true, &BERR));
    bt_test_crash_now(BE); /* only the checkpoint remains */
    eng_close(BE);
    bt_open_with(NULL, 0);
    BOK(eng_rs_open(BE, "test.cap", &rs, &BERR));
    expect_seeds(rs, 100, 5, 9);
    ins(rs, 100, 10, false);
    expect_seeds(rs, 100, 6, 10);
    eng_rs_close(rs);
    eng_txn *t = btb();
    BOK(eng_rs_drop(BE, t, "test.cap"));
    btc(t);
    rs = bt_rs("test.cap", NULL, true);
    for (uint32_t i = 1; i <= 9; i++)
        ins(rs, 100, i, false);
    expect_seeds(rs, 100, 1, 9);
    eng_rs_close(rs);
    eng_close(BE);
    bt_open_with(NULL, 0);
    BOK(eng_rs_open(BE, "test.cap", &rs, &BERR));
    ins(rs, 100, 10, false);
    expect_seeds(rs, 100, 1, 10);
    eng_rs_close(rs);
}

Test(bt_capped, removals_belong_to_the_inserting_transaction)
{
    bt_open_with(NULL, 0);
    eng_rs *rs = capped("test.cap", 2000, 0);
    for (uint32_t i = 1; i <= 10; i++)
        ins(rs, 200, i, false);
    expect_seeds(rs, 200, 1, 10);
    /* A transaction wraps the ring half way: until it commits, other
     * readers (no transaction: the latest commit) see the old records. */
    eng_txn *t = btb();
    for (uint32_t i = 11; i <= 15; i++)
        bt_ins(rs, t, 200, i, false);
    struct eng_rs_stats s;
    stats(rs, &s);
    cr_assert_eq(s.count, 10);
    eng_txn_abort(t);
    expect_seeds(rs, 200, 1, 10);
    t = btb();
    for (uint32_t i = 11; i <= 15; i++)
        bt_ins(rs, t, 200, i, false);
    btc(t);
    expect_seeds(rs, 200, 6, 15);
    stats(rs, &s);
    cr_assert_eq(s.count, 10);
    cr_assert_eq(s.data_size, 2000);
    bt_expect_valid();
    eng_rs_close(rs);
}
