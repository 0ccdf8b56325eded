/*
 * test_bt_tree.c -- btree structure: root and cascading splits, emptied
 * pages merged away, thinned leaves merged with a sibling, overflow values
 * up to 16 MB, prefix compression, and a randomized differential test
 * against an in-memory model (checked after every batch and after reopen).
 */
#include "test_bt_util.h"

TestSuite(bt_tree, .init = bt_fx_init, .fini = bt_fx_fini);

Test(bt_tree, splits_cascade_and_emptied_pages_merge)
{
    enum { N = 9000, LEN = 1000 };
    static eng_rid rids[N];
    bt_open_with("none", 0);
    eng_rs *rs = bt_rs("test.c", NULL, true);
    cr_assert_eq(bt_test_depth(rs), 1);
    for (int b = 0; b < N; b += 1000) {
        eng_txn *t = btb();
        for (int i = b; i < b + 1000; i++)
            rids[i] = bt_ins(rs, t, LEN, (uint32_t)i, false);
        btc(t);
        bt_expect_valid();
    }
    /* 32 KB leaves of ~30 documents, 4 KB internal pages of ~130 children */
    cr_assert_geq(bt_test_depth(rs), 3, "depth %d: no cascading split", bt_test_depth(rs));
    BOK(eng_flush(BE, true, &BERR));
    const uint8_t *d;
    uint32_t l;
    for (int i = 0; i < N; i += 97) {
        BOK(eng_rs_get(rs, rids[i], &d, &l));
        cr_assert(bt_doc_is(d, l, LEN, (uint32_t)i, false));
    }
    eng_txn *t = btb();
    for (int i = 0; i < N; i++)
        BOK(eng_rs_remove(rs, t, rids[i]));
    btc(t);
    cr_assert_eq(bt_test_depth(rs), 1, "emptied pages were not merged away");
    bt_expect_valid();
    BOK(eng_flush(BE, true, &BERR));
    bt_expect_valid();
    eng_rs_close(rs);
}

static int64_t leaf_pages(eng_rs *rs)
{
    bson_t sub = BSON_INITIALIZER;
    bson_iter_t it, f;
    int64_t n = -1;
    eng_rs_append_stats(rs, &sub);
    if (bson_iter_init(&it, &sub) && bson_iter_find_descendant(&it, "pages.leaf", &f))
        n = bson_iter_as_int64(&f);
    bson_destroy(&sub);
    return n;
}

/* Leaves thinned out by deletes (not emptied) merge with their siblings. */
Test(bt_tree, thinned_leaves_merge)
{
    enum { N = 6000, LEN = 1000 };
    static eng_rid rids[N];
    bt_open_with("none", 0);
    eng_rs *rs = bt_rs("test.c", NULL, true);
    eng_txn *t = btb();
    for (int i = 0; i < N; i++)
        rids[i] = bt_ins(rs, t, LEN, (uint32_t)i, false);
    btc(t);
    int64_t before = leaf_pages(rs);
    cr_assert_gt(before, 150);
    t = btb();
    for (int i = 0; i < N; i++)
        if (i % 8 != 0)
            BOK(eng_rs_remove(rs, t, rids[i]));
    btc(t);
    int64_t after = leaf_pages(rs);
    /* 1/8 of the data left: without merges every leaf would stay */
    cr_assert_lt(after, before / 3, "leaves %lld -> %lld", (long long)before, (long long)after);
    bt_expect_valid();
    const uint8_t *d;
    uint32_t l;
    for (int i = 0; i < N; i += 8) {
        BOK(eng_rs_get(rs, rids[i], &d, &l));
        cr_assert(bt_doc_is(d, l, LEN, (uint32_t)i, false), "record %d", i);
    }
    BOK(eng_flush(BE, true, &BERR));
    bt_expect_valid();
    eng_rs_close(rs);
}

Test(bt_tree, overflow_values_and_16mb_document)
{
    static const uint32_t lens[] = {8191, 8192, 20000, 300000, 16u << 20};
    eng_rid rids[5];
    bt_open_with(NULL, 0);
    eng_rs *rs = bt_rs("test.big", NULL, true);
    eng_txn *t = btb();
    for (int i = 0; i < 5; i++)
        rids[i] = bt_ins(rs, t, lens[i], (uint32_t)i, i % 2);
    btc(t);
    BOK(eng_flush(BE, true, &BERR));
    bt_expect_valid();
    /* replace one overflow value: its old block is freed, not leaked */
    uint8_t *d = bt_doc(30000, 77, true);
    eng_rid nr;
    bool moved;
    t = btb();
    BOK(eng_rs_update(rs, t, rids[2], d, 30000, &nr, &moved, &BERR));
    btc(t);
    free(d);
    eng_rs_close(rs);
    eng_close(BE);
    bt_open_with(NULL, 0);
    rs = bt_rs("test.big", NULL, false);
    const uint8_t *p;
    uint32_t l;
    for (int i = 0; i < 5; i++) {
        BOK(eng_rs_get(rs, rids[i], &p, &l));
        if (i == 2)
            cr_assert(bt_doc_is(p, l, 30000, 77, true));
        else
            cr_assert(bt_doc_is(p, l, lens[i], (uint32_t)i, i % 2), "document %d", i);
    }
    double ovfl = 0;
    bson_t sub = BSON_INITIALIZER;
    eng_rs_append_stats(rs, &sub);
    bson_iter_t it;
    cr_assert(bson_iter_init_find(&it, &sub, "pages"));
    bson_destroy(&sub);
    (void)ovfl;
    bt_expect_valid();
    eng_rs_close(rs);
}

static eng_ss *bt_ss(const char *ident, bool create)
{
    eng_ss *ss;
    if (create) {
        eng_txn *t = btb();
        BOK(eng_ss_create(BE, t, ident, &BERR));
        btc(t);
    }
    BOK(eng_ss_open(BE, ident, &ss, &BERR));
    return ss;
}

Test(bt_tree, prefix_compression_round_trip)
{
    enum { N = 3000, KL = 200 };
    static uint8_t keys[N][KL];
    bt_open_with(NULL, 0);
    eng_ss *ss = bt_ss("test.c.$x_1", true);
    eng_txn *t = btb();
    for (int i = 0; i < N; i++) {
        memset(keys[i], 'k', KL);
        snprintf((char *)keys[i] + KL - 8, 8, "%07u", (unsigned)i % 10000000u);
        BOK(eng_ss_insert(ss, t, keys[i], KL, i + 1, true, NULL, &BERR));
    }
    btc(t);
    BOK(eng_flush(BE, true, &BERR));
    /* index pages are not block-compressed: the saving is the prefixes */
    cr_assert_lt(eng_ss_size(ss), (int64_t)N * KL / 4, "index file %lld bytes",
                 (long long)eng_ss_size(ss));
    eng_ss_close(ss);
    eng_close(BE);
    bt_open_with(NULL, 0);
    ss = bt_ss("test.c.$x_1", false);
    eng_ss_cursor *c;
    const uint8_t *k;
    uint32_t kl;
    eng_rid r;
    BOK(eng_ss_cursor_open(ss, &c));
    BOK(eng_ss_cursor_seek(c, (const uint8_t *)"", 0, 0));
    for (int i = 0; i < N; i++) {
        BOK(eng_ss_cursor_get(c, &k, &kl, &r));
        cr_assert(kl == KL && memcmp(k, keys[i], KL) == 0 && r == i + 1, "entry %d", i);
        cr_assert_eq(eng_ss_cursor_next(c), i + 1 < N ? 0 : MD_NOTFOUND);
    }
    eng_ss_cursor_close(c);
    bt_expect_valid();
    eng_ss_close(ss);
}

/* Found by tests/fuzz/fuzz_open_btree.c (UBSan): a leaf cell stores its rid
 * as the difference from the previous cell's, and INT64_MIN followed by 1
 * (a rid replayed from a damaged log record) overflowed int64.  The
 * difference wraps now, and reads back exactly. */
Test(bt_tree, extreme_rids_in_one_leaf_round_trip)
{
    static const eng_rid rids[] = {INT64_MIN, -1, 1, INT64_MAX};
    enum { N = sizeof rids / sizeof rids[0] };
    bt_open_with(NULL, 0);
    eng_ss *ss = bt_ss("test.c.$x_1", true);
    eng_txn *t = btb();
    for (int i = N - 1; i >= 0; i--)
        BOK(eng_ss_insert(ss, t, (const uint8_t *)"k", 1, rids[i], false, NULL, &BERR));
    btc(t);
    BOK(eng_flush(BE, true, &BERR));
    eng_ss_close(ss);
    eng_close(BE);
    bt_open_with(NULL, 0);
    ss = bt_ss("test.c.$x_1", false);
    eng_ss_cursor *c;
    const uint8_t *k;
    uint32_t kl;
    eng_rid r;
    BOK(eng_ss_cursor_open(ss, &c));
    BOK(eng_ss_cursor_seek(c, (const uint8_t *)"", 0, 0));
    for (int i = 0; i < N; i++) {
        BOK(eng_ss_cursor_get(c, &k, &kl, &r));
        cr_assert(kl == 1 && k[0] == 'k' && r == rids[i], "entry %d: rid %lld", i, (long long)r);
        cr_assert_eq(eng_ss_cursor_next(c), i + 1 < N ? 0 : MD_NOTFOUND);
    }
    eng_ss_cursor_close(c);
    bt_expect_valid();
    eng_ss_close(ss);
}

/* ---- randomized differential test ----------------------------------------- */

#define MN 600
typedef struct model {
    bool live[MN];
    eng_rid rid[MN];
    uint32_t len[MN], seed[MN];
} model;

static uint64_t rs_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n)
{
    rs_state ^= rs_state << 13, rs_state ^= rs_state >> 7, rs_state ^= rs_state << 17;
    return (uint32_t)(rs_state % n);
}

static void check_model(eng_rs *rs, eng_ss *ss, const model *m)
{
    int64_t n = 0;
    for (int i = 0; i < MN; i++) {
        const uint8_t *d;
        uint32_t l;
        if (!m->rid[i])
            continue;
        int rc = eng_rs_get(rs, m->rid[i], &d, &l);
        if (!m->live[i]) {
            cr_assert_eq(rc, MD_NOTFOUND, "slot %d should be gone", i);
            continue;
        }
        n++;
        cr_assert_eq(rc, 0, "slot %d: %s", i, md_strerror(rc));
        cr_assert(bt_doc_is(d, l, m->len[i], m->seed[i], m->seed[i] % 3 == 0), "slot %d", i);
    }
    struct eng_rs_stats s;
    eng_rs_get_stats(rs, &s);
    cr_assert_eq(s.count, n);
    cr_assert_eq(eng_ss_entries(ss), n);
    bt_expect_valid();
}

static void random_batch(eng_rs *rs, eng_ss *ss, model *m, bool abort)
{
    model before = *m;
    eng_txn *t = btb();
    for (int k = 0; k < 60; k++) {
        int i = (int)rnd(MN), op = (int)rnd(3);
        uint32_t key = (uint32_t)i;
        uint32_t len = 13 + (rnd(10) == 0 ? rnd(40000) : rnd(600)), seed = rnd(1u << 30);
        uint8_t *d = bt_doc(len, seed, seed % 3 == 0);
        if (!m->live[i]) {
            BOK(eng_rs_insert(rs, t, d, len, &m->rid[i], &BERR));
            BOK(eng_ss_insert(ss, t, (uint8_t *)&key, 4, m->rid[i], true, NULL, &BERR));
            m->live[i] = true, m->len[i] = len, m->seed[i] = seed;
        } else if (op == 0) {
            BOK(eng_rs_remove(rs, t, m->rid[i]));
            BOK(eng_ss_remove(ss, t, (uint8_t *)&key, 4, m->rid[i]));
            m->live[i] = false;
        } else {
            eng_rid nr;
            bool moved;
            BOK(eng_rs_update(rs, t, m->rid[i], d, len, &nr, &moved, &BERR));
            cr_assert(!moved && nr == m->rid[i]);
            m->len[i] = len, m->seed[i] = seed;
        }
        free(d);
    }
    if (abort) {
        eng_txn_abort(t);
        for (int i = 0; i < MN; i++) /* aborted inserts: their rids are unused */
            if (!before.rid[i] && m->rid[i])
                before.rid[i] = 0;
        *m = before;
    } else {
        btc(t);
    }
}

Test(bt_tree, randomized_against_model)
{
    static model m;
    memset(&m, 0, sizeof m);
    bt_open_with(NULL, 512 * 1024);
    eng_rs *rs = bt_rs("test.r", NULL, true);
    eng_ss *ss = bt_ss("test.r.$k_1", true);
    for (int b = 0; b < 40; b++) {
        random_batch(rs, ss, &m, b % 5 == 4);
        check_model(rs, ss, &m);
        if (b % 13 == 12)
            BOK(eng_flush(BE, true, &BERR));
    }
    check_model(rs, ss, &m);
    eng_rs_close(rs);
    eng_ss_close(ss);
    eng_close(BE);
    bt_open_with(NULL, 512 * 1024);
    rs = bt_rs("test.r", NULL, false);
    ss = bt_ss("test.r.$k_1", false);
    check_model(rs, ss, &m);
    eng_rs_close(rs);
    eng_ss_close(ss);
}

/* eng_rs_get starts from the leaf its thread's last get ended on
 * (bt_get_near): in order, backwards, at random, past the ends, and after
 * updates, deletes and folds have changed the pages under it. */
Test(bt_tree, record_gets_from_the_last_leaf_follow_changes)
{
    enum { N = 3000, LEN = 300 };
    static eng_rid rids[N];
    static uint32_t seed[N];
    static uint32_t len[N];
    static bool gone[N];
    const uint8_t *d;
    uint32_t l;
    bt_open_with("none", 0);
    eng_rs *rs = bt_rs("test.near", NULL, true);
    eng_txn *t = btb();
    for (int i = 0; i < N; i++)
        rids[i] = bt_ins(rs, t, len[i] = LEN, seed[i] = (uint32_t)i, false);
    btc(t);
    BOK(eng_flush(BE, true, &BERR));
    cr_assert_geq(bt_test_depth(rs), 2, "one leaf: nothing to follow");
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++) { /* in order: the next entry of the leaf */
            cr_assert_eq(eng_rs_get(rs, rids[i], &d, &l), gone[i] ? MD_NOTFOUND : 0);
            cr_assert(gone[i] || bt_doc_is(d, l, len[i], seed[i], false));
        }
        for (int i = N; i-- > 0;) /* backwards */
            cr_assert_eq(eng_rs_get(rs, rids[i], &d, &l), gone[i] ? MD_NOTFOUND : 0);
        uint32_t x = 12345;
        for (int k = 0; k < N; k++) {
            int i = (int)((x = x * 1103515245u + 12345u) >> 8) % N;
            int rc = eng_rs_get(rs, rids[i], &d, &l);
            cr_assert_eq(rc, gone[i] ? MD_NOTFOUND : 0, "rid %lld", (long long)rids[i]);
            cr_assert(gone[i] || bt_doc_is(d, l, len[i], seed[i], false));
        }
        cr_assert_eq(eng_rs_get(rs, rids[N - 1] + 1, &d, &l), MD_NOTFOUND);
        cr_assert_eq(eng_rs_get(rs, rids[0] - 1, &d, &l), MD_NOTFOUND);
        /* change the pages: every 7th rewritten, a run deleted, then a fold
         * (round 0: the run's leaves are emptied and freed, and the last
         * get stood in the middle of them) or not (later rounds: the
         * overlay answers) */
        int mid = 700 + round * 700;
        BOK(eng_rs_get(rs, rids[mid], &d, &l));
        t = btb();
        for (int i = 0; i < N; i += 7) {
            if (gone[i])
                continue;
            len[i] = LEN + 50 * (uint32_t)(round + 1);
            uint8_t *doc = bt_doc(len[i], seed[i] = (uint32_t)(i + 100000 * (round + 1)), false);
            eng_rid nr;
            bool moved;
            BOK(eng_rs_update(rs, t, rids[i], doc, len[i], &nr, &moved, &BERR));
            free(doc);
        }
        for (int i = 500 + round * 700; i < 900 + round * 700; i++)
            if (!gone[i]) {
                BOK(eng_rs_remove(rs, t, rids[i]));
                gone[i] = true;
            }
        btc(t);
        if (round == 0)
            BOK(eng_flush(BE, true, &BERR));
        cr_assert_eq(eng_rs_get(rs, rids[mid], &d, &l), MD_NOTFOUND);
        for (int i = 0; i < N; i++) {
            int rc = eng_rs_get(rs, rids[i], &d, &l);
            cr_assert_eq(rc, gone[i] ? MD_NOTFOUND : 0, "round %d rid %lld", round,
                         (long long)rids[i]);
            cr_assert(gone[i] || bt_doc_is(d, l, len[i], seed[i], false),
                      "round %d: stale document at %d", round, i);
        }
    }
    bt_expect_valid();
    eng_rs_close(rs);
}
