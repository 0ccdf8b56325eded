/*
 * test_bt_mvcc.c -- the btree engine's document-level concurrency (eng.h
 * "Threads", bt_txn.c): snapshots, own writes, write conflicts, unique
 * index conflicts, aborts, readers that do not wait for writers, cursors
 * over a snapshot, and the sweep of old versions.
 *
 * Each test runs two threads, A and B, in lock step: STEP() is a two-party
 * barrier, so the interleaving is fixed.  Criterion asserts only in the
 * test's own thread: the workers record the first failed check (CHECK)
 * and the test asserts on it after joining them.
 */
#include <pthread.h>

#include "bt_int.h"
#include "test_bt_util.h"

TestSuite(bt_mvcc, .init = bt_fx_init, .fini = bt_fx_fini, .timeout = 60);

static pthread_barrier_t BAR;
static int FAIL_LINE;
static char FAIL_MSG[256];
static eng_rs *RS;
static eng_ss *SS;
static eng_rid R1, R2;

#define STEP() pthread_barrier_wait(&BAR)
#define CHECK(cond, ...) \
    do { \
        if (!(cond) && __atomic_exchange_n(&FAIL_LINE, __LINE__, __ATOMIC_SEQ_CST) == 0) \
            snprintf(FAIL_MSG, sizeof FAIL_MSG, __VA_ARGS__); \
    } while (0)
#define CHECK_RC(x, want) \
    do { \
        int rc_ = (x); \
        CHECK(rc_ == (want), "%s -> %s, want %s", #x, md_strerror(rc_), md_strerror(want)); \
    } while (0)

static void run2(void *(*a)(void *), void *(*b)(void *))
{
    pthread_t ta, tb;
    FAIL_LINE = 0;
    pthread_barrier_init(&BAR, NULL, 2);
    cr_assert(pthread_create(&ta, NULL, a, NULL) == 0);
    cr_assert(pthread_create(&tb, NULL, b, NULL) == 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    pthread_barrier_destroy(&BAR);
    cr_assert(FAIL_LINE == 0, "line %d: %s", FAIL_LINE, FAIL_MSG);
}

/* A one-int32 document {v: n}. */
static bson_t *doc(int n)
{
    bson_t *b = bson_new();
    BSON_APPEND_INT32(b, "v", n);
    return b;
}

/* The v of record rid as the calling thread sees it; -1 if absent. */
static int val_of(eng_rid rid)
{
    const uint8_t *p;
    uint32_t len;
    bson_t view;
    bson_iter_t it;
    if (eng_rs_get(RS, rid, &p, &len) != 0)
        return -1;
    if (!bson_init_static(&view, p, len) || !bson_iter_init_find(&it, &view, "v"))
        return -2;
    return bson_iter_int32(&it);
}

static int put(eng_txn *t, eng_rid rid, int n)
{
    eng_rid nr;
    bool moved;
    bson_t *b = doc(n);
    int rc = eng_rs_update(RS, t, rid, bson_get_data(b), b->len, &nr, &moved, NULL);
    bson_destroy(b);
    return rc;
}

static eng_rid ins(eng_txn *t, int n)
{
    eng_rid rid = 0;
    bson_t *b = doc(n);
    int rc = eng_rs_insert(RS, t, bson_get_data(b), b->len, &rid, NULL);
    bson_destroy(b);
    return rc ? 0 : rid;
}

/* A store with two records, v = 1 and v = 2, and an index. */
static void setup(void)
{
    bt_open_with(NULL, 0);
    RS = bt_rs("test.c", NULL, true);
    eng_txn *t = btb();
    BOK(eng_ss_create(BE, t, "test.c.$x_1", &BERR));
    btc(t);
    BOK(eng_ss_open(BE, "test.c.$x_1", &SS, &BERR));
    t = btb();
    R1 = ins(t, 1);
    R2 = ins(t, 2);
    btc(t);
}

static void teardown(void)
{
    eng_ss_close(SS);
    eng_rs_close(RS);
}

/* ---- snapshots ----------------------------------------------------------------- */

static void *snap_a(void *arg)
{
    eng_txn *t;
    CHECK_RC(eng_txn_begin(BE, &t), 0);
    CHECK(val_of(R1) == 1, "before: %d", val_of(R1));
    STEP(); /* B commits v = 10 */
    STEP();
    CHECK(val_of(R1) == 1, "snapshot sees a later commit: %d", val_of(R1));
    CHECK_RC(eng_txn_commit(t, false, NULL), 0);
    CHECK(val_of(R1) == 10, "after the snapshot ended: %d", val_of(R1));
    return NULL;
}

static void *snap_b(void *arg)
{
    eng_txn *t;
    STEP();
    CHECK_RC(eng_txn_begin(BE, &t), 0);
    CHECK_RC(put(t, R1, 10), 0);
    CHECK_RC(eng_txn_commit(t, false, NULL), 0);
    CHECK(val_of(R1) == 10, "no-txn read after commit: %d", val_of(R1));
    STEP();
    return NULL;
}

Test(bt_mvcc, snapshot_does_not_see_later_commits)
{
    setup();
    run2(snap_a, snap_b);
    cr_assert_eq(val_of(R1), 10);
    teardown();
}

/* ---- own writes, uncommitted writes invisible to others --------------------------- */

static eng_rid NEWRID;

static void *own_a(void *arg)
{
    eng_txn *t;
    CHECK_RC(eng_txn_begin(BE, &t), 0);
    NEWRID = ins(t, 7);
    CHECK(NEWRID != 0, "insert");
    CHECK_RC(put(t, R1, 11), 0);
    CHECK_RC(eng_rs_remove(RS, t, R2), 0);
    CHECK(val_of(NEWRID) == 7 && val_of(R1) == 11 && val_of(R2) == -1, "own writes: %d %d %d",
          val_of(NEWRID), val_of(R1), val_of(R2));
    STEP(); /* B reads */
    STEP();
    CHECK_RC(eng_txn_commit(t, false, NULL), 0);
    STEP(); /* B reads again */
    return NULL;
}

static void *own_b(void *arg)
{
    STEP();
    CHECK(val_of(NEWRID) == -1 && val_of(R1) == 1 && val_of(R2) == 2,
          "uncommitted writes seen: %d %d %d", val_of(NEWRID), val_of(R1), val_of(R2));
    eng_rs_stats s;
    eng_rs_get_stats(RS, &s);
    CHECK(s.count == 2, "count %lld before commit", (long long)s.count);
    STEP();
    STEP();
    CHECK(val_of(NEWRID) == 7 && val_of(R1) == 11 && val_of(R2) == -1,
          "committed writes not seen: %d %d %d", val_of(NEWRID), val_of(R1), val_of(R2));
    eng_rs_get_stats(RS, &s);
    CHECK(s.count == 2 && s.n_inserts == 3 && s.n_updates == 1, "stats %lld %lld %lld",
          (long long)s.count, (long long)s.n_inserts, (long long)s.n_updates);
    return NULL;
}

Test(bt_mvcc, own_writes_visible_others_not_until_commit)
{
    setup();
    run2(own_a, own_b);
    teardown();
}

/* ---- write-write conflicts ----------------------------------------------------- */

static void *ww_a(void *arg)
{
    eng_txn *t;
    CHECK_RC(eng_txn_begin(BE, &t), 0);
    CHECK_RC(put(t, R1, 100), 0);
    STEP(); /* B conflicts on R1, writes R2 */
    STEP();
    CHECK_RC(eng_txn_commit(t, false, NULL), 0);
    STEP(); /* B retries */
    return NULL;
}

static void *ww_b(void *arg)
{
    eng_txn *t;
    STEP();
    CHECK_RC(eng_txn_begin(BE, &t), 0);
    CHECK_RC(put(t, R2, 200), 0); /* another rid: no conflict */
    CHECK_RC(put(t, R1, 101), MD_EWRITECONFLICT);
    eng_txn_abort(t);
    STEP();
    STEP();
    CHECK_RC(eng_txn_begin(BE, &t), 0);
    CHECK(val_of(R1) == 100, "retry reads %d", val_of(R1));
    CHECK_RC(put(t, R1, 101), 0);
    CHECK_RC(put(t, R2, 200), 0);
    CHECK_RC(eng_txn_commit(t, false, NULL), 0);
    return NULL;
}

Test(bt_mvcc, write_conflict_then_retry_after_abort)
{
    setup();
    run2(ww_a, ww_b);
    cr_assert_eq(val_of(R1), 101);
    cr_assert_eq(val_of(R2), 200);
    cr_assert_geq(bt_txn_stat("writeConflicts"), 1);
    teardown();
}

static void *late_a(void *arg)
{
    eng_txn *t;
    CHECK_RC(eng_txn_begin(BE, &t), 0);
    STEP(); /* B commits R1 after this snapshot */
    STEP();
    CHECK_RC(eng_rs_remove(RS, t, R1), MD_EWRITECONFLICT);
    eng_txn_abort(t);
    return NULL;
}

static void *late_b(void *arg)
{
    eng_txn *t;
    STEP();
    CHECK_RC(eng_txn_begin(BE, &t), 0);
    CHECK_RC(put(t, R1, 5), 0);
    CHECK_RC(eng_txn_commit(t, false, NULL), 0);
    STEP();
    return NULL;
}

Test(bt_mvcc, write_conflict_with_a_commit_after_the_snapshot)
{
    setup();
    run2(late_a, late_b);
    cr_assert_eq(val_of(R1), 5);
    teardown();
}

static void *diff_a(void *arg)
{
    eng_txn *t;
    CHECK_RC(eng_txn_begin(BE, &t), 0);
    CHECK_RC(put(t, R1, 31), 0);
    STEP();
    STEP();
    CHECK_RC(eng_txn_commit(t, false, NULL), 0);
    return NULL;
}

static void *diff_b(void *arg)
{
    eng_txn *t;
    CHECK_RC(eng_txn_begin(BE, &t), 0);
    STEP();
    CHECK_RC(put(t, R2, 32), 0);
    CHECK_RC(eng_ss_insert(SS, t, (const uint8_t *)"k", 1, R2, true, NULL, NULL), 0);
    STEP();
    CHECK_RC(eng_txn_commit(t, false, NULL), 0);
    return NULL;
}

Test(bt_mvcc, writers_of_different_records_both_commit)
{
    setup();
    run2(diff_a, diff_b);
    cr_assert_eq(val_of(R1), 31);
    cr_assert_eq(val_of(R2), 32);
    cr_assert_eq(eng_ss_entries(SS), 1);
    teardown();
}

/* ---- unique index entries --------------------------------------------------------- */

static void *uniq_a(void *arg)
{
    eng_txn *t;
    CHECK_RC(eng_txn_begin(BE, &t), 0);
    CHECK_RC(eng_ss_insert(SS, t, (const uint8_t *)"dup", 3, R1, true, NULL, NULL), 0);
    STEP(); /* B conflicts */
    STEP();
    CHECK_RC(eng_txn_commit(t, false, NULL), 0);
    STEP(); /* B retries */
    return NULL;
}

static void *uniq_b(void *arg)
{
    eng_txn *t;
    eng_rid dup = 0;
    STEP();
    CHECK_RC(eng_txn_begin(BE, &t), 0);
    CHECK_RC(eng_ss_insert(SS, t, (const uint8_t *)"dup", 3, R2, true, &dup, NULL),
             MD_EWRITECONFLICT);
    STEP();
    /* A committed after this snapshot: still a conflict, not a duplicate */
    CHECK_RC(eng_ss_insert(SS, t, (const uint8_t *)"dup", 3, R2, true, &dup, NULL),
             MD_EWRITECONFLICT);
    eng_txn_abort(t);
    STEP();
    CHECK_RC(eng_txn_begin(BE, &t), 0);
    CHECK_RC(eng_ss_insert(SS, t, (const uint8_t *)"dup", 3, R2, true, &dup, NULL),
             MD_EDUPKEY);
    CHECK(dup == R1, "dup_rid %lld", (long long)dup);
    CHECK_RC(eng_ss_insert(SS, t, (const uint8_t *)"dup", 3, R2, false, NULL, NULL), 0);
    eng_txn_abort(t);
    return NULL;
}

Test(bt_mvcc, concurrent_unique_inserts_conflict)
{
    setup();
    run2(uniq_a, uniq_b);
    cr_assert_eq(eng_ss_entries(SS), 1);
    teardown();
}

/* ---- aborts ------------------------------------------------------------------------ */

Test(bt_mvcc, abort_leaves_no_trace)
{
    eng_rs_stats before, after;
    setup();
    eng_rs_get_stats(RS, &before);
    int64_t chains = bt_txn_stat("chains"); /* setup's commits, not folded yet */
    eng_txn *t = btb();
    eng_rid r = ins(t, 9);
    cr_assert(r);
    cr_assert_eq(put(t, R1, 8), 0);
    cr_assert_eq(eng_rs_remove(RS, t, R2), 0);
    BOK(eng_ss_insert(SS, t, (const uint8_t *)"a", 1, r, true, NULL, &BERR));
    bson_t *m = doc(1);
    BOK(eng_meta_put(BE, t, "x", m, &BERR));
    bson_destroy(m);
    cr_assert_gt(bt_txn_stat("chains"), 0);
    eng_txn_abort(t);
    eng_rs_get_stats(RS, &after);
    cr_assert_eq(val_of(R1), 1);
    cr_assert_eq(val_of(R2), 2);
    cr_assert_eq(val_of(r), -1);
    cr_assert_eq(eng_ss_entries(SS), 0);
    bson_t out;
    cr_assert_eq(eng_meta_get(BE, "x", &out), MD_NOTFOUND);
    cr_assert_eq(after.count, before.count);
    cr_assert_eq(after.n_inserts, before.n_inserts);
    cr_assert_eq(after.n_updates, before.n_updates);
    cr_assert_eq(bt_txn_stat("chains"), chains);
    cr_assert_geq(bt_txn_stat("aborts"), 1);
    teardown();
}

/* ---- commits under the shared latch -------------------------------------------------- */

/* v of R1 read outside a transaction by a thread that holds the latch. */
static int held_val(bt_engine *e)
{
    bt_buf b = {0};
    bson_t view;
    bson_iter_t it;
    md_error err;
    int v = -1;
    if (bt_lookup(e, NULL, BT_TREE(RS), NULL, 0, R1, &b, NULL, &err) == 0 &&
        bson_init_static(&view, b.p, b.n) && bson_iter_init_find(&it, &view, "v"))
        v = bson_iter_int32(&it);
    bt_buf_free(&b);
    return v;
}

static void *held_a(void *arg)
{
    bt_engine *e = (bt_engine *)BE;
    bt_latch_shared(e);
    CHECK(held_val(e) == 1, "before: %d", held_val(e));
    STEP(); /* B commits v = 10 while A holds the latch shared */
    STEP();
    CHECK(held_val(e) == 1, "a commit published during this hold is visible: %d",
          held_val(e));
    bt_unlatch(e);
    CHECK(val_of(R1) == 10, "the next hold sees it: %d", val_of(R1));
    return NULL;
}

static void *held_b(void *arg)
{
    eng_txn *t;
    STEP();
    CHECK_RC(eng_txn_begin(BE, &t), 0);
    CHECK_RC(put(t, R1, 10), 0);
    CHECK_RC(eng_txn_commit(t, false, NULL), 0); /* would wait forever if exclusive */
    STEP();
    return NULL;
}

/* A commit takes the engine latch shared (with the commit mutex), so it
 * completes while another thread holds the latch; that thread's reads
 * outside a transaction keep the commits published when it took the latch,
 * as when no commit could happen under a shared hold. */
Test(bt_mvcc, commit_runs_beside_a_shared_hold_which_does_not_see_it)
{
    setup();
    run2(held_a, held_b);
    teardown();
}

/* ---- readers do not wait ------------------------------------------------------------ */

static void *nowait_a(void *arg)
{
    eng_txn *t;
    CHECK_RC(eng_txn_begin(BE, &t), 0);
    CHECK_RC(put(t, R1, 50), 0);
    CHECK_RC(eng_ss_insert(SS, t, (const uint8_t *)"w", 1, R1, true, NULL, NULL), 0);
    STEP(); /* B reads everything while this transaction is open */
    STEP();
    CHECK_RC(eng_txn_commit(t, false, NULL), 0);
    return NULL;
}

static void *nowait_b(void *arg)
{
    eng_rs_cursor *c;
    eng_ss_cursor *sc;
    eng_rid rid;
    const uint8_t *p;
    uint32_t len;
    int n = 0;
    eng_txn *t;
    STEP();
    CHECK(val_of(R1) == 1, "reader saw %d", val_of(R1));
    CHECK_RC(eng_rs_cursor_open(RS, true, &c), 0);
    while (eng_rs_cursor_next(c, &rid, &p, &len) == 0)
        n++;
    eng_rs_cursor_close(c);
    CHECK(n == 2, "scan saw %d records", n);
    CHECK_RC(eng_ss_cursor_open(SS, &sc), 0);
    CHECK_RC(eng_ss_cursor_seek(sc, NULL, 0, 0), MD_NOTFOUND);
    eng_ss_cursor_close(sc);
    CHECK_RC(eng_txn_begin(BE, &t), 0); /* a reading transaction does not wait either */
    CHECK(val_of(R1) == 1, "txn reader saw %d", val_of(R1));
    CHECK_RC(eng_txn_commit(t, false, NULL), 0);
    STEP();
    return NULL;
}

Test(bt_mvcc, readers_finish_while_a_writer_is_open)
{
    setup();
    run2(nowait_a, nowait_b);
    cr_assert_eq(val_of(R1), 50);
    teardown();
}

/* ---- cursors over a snapshot ---------------------------------------------------------- */

#define NSEED 100
static eng_rid SEED[NSEED];

static void *curs_a(void *arg)
{
    eng_txn *t;
    eng_rs_cursor *c;
    eng_ss_cursor *sc;
    eng_rid rid, prev = 0;
    const uint8_t *p, *k;
    uint32_t len, kl;
    int n = 0, ns = 0;
    CHECK_RC(eng_txn_begin(BE, &t), 0);
    CHECK_RC(eng_rs_cursor_open(RS, true, &c), 0);
    CHECK_RC(eng_ss_cursor_open(SS, &sc), 0);
    for (; n < 10 && eng_rs_cursor_next(c, &rid, &p, &len) == 0; n++)
        CHECK(rid == SEED[n], "record %d is %lld", n, (long long)rid);
    CHECK_RC(eng_ss_cursor_seek(sc, NULL, 0, 0), 0);
    ns = 1;
    STEP(); /* B inserts, updates and removes, and commits */
    STEP();
    while (eng_rs_cursor_next(c, &rid, &p, &len) == 0) {
        CHECK(n < NSEED && rid == SEED[n], "record %d is %lld", n, (long long)rid);
        CHECK(val_of(rid) == n, "record %d has v %d", n, val_of(rid));
        n++;
    }
    CHECK(n == NSEED, "snapshot scan saw %d of %d", n, NSEED);
    while (eng_ss_cursor_next(sc) == 0) {
        CHECK_RC(eng_ss_cursor_get(sc, &k, &kl, &rid), 0);
        CHECK(rid > prev, "index order");
        prev = rid;
        ns++;
    }
    CHECK(ns == NSEED, "snapshot index scan saw %d", ns);
    eng_rs_cursor_close(c);
    eng_ss_cursor_close(sc);
    CHECK_RC(eng_txn_commit(t, false, NULL), 0);
    return NULL;
}

static void *curs_b(void *arg)
{
    eng_txn *t;
    STEP();
    CHECK_RC(eng_txn_begin(BE, &t), 0);
    for (int i = 0; i < 50; i++)
        CHECK(ins(t, 1000 + i) != 0, "insert");
    for (int i = 0; i < NSEED; i += 5) {
        char key[16];
        snprintf(key, sizeof key, "k%05d", i);
        CHECK_RC(eng_rs_remove(RS, t, SEED[i]), 0);
        CHECK_RC(eng_ss_remove(SS, t, (const uint8_t *)key, (uint32_t)strlen(key), SEED[i]), 0);
    }
    for (int i = 1; i < NSEED; i += 5)
        CHECK_RC(put(t, SEED[i], -7), 0);
    CHECK_RC(eng_txn_commit(t, false, NULL), 0);
    STEP();
    return NULL;
}

Test(bt_mvcc, cursor_in_a_transaction_reads_its_snapshot)
{
    bt_open_with(NULL, 0);
    RS = bt_rs("test.c", NULL, true);
    eng_txn *t = btb();
    BOK(eng_ss_create(BE, t, "test.c.$x_1", &BERR));
    btc(t);
    BOK(eng_ss_open(BE, "test.c.$x_1", &SS, &BERR));
    t = btb();
    for (int i = 0; i < NSEED; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%05d", i);
        SEED[i] = ins(t, i);
        BOK(eng_ss_insert(SS, t, (const uint8_t *)key, (uint32_t)strlen(key), SEED[i], true,
                          NULL, &BERR));
    }
    btc(t);
    run2(curs_a, curs_b);
    eng_rs_stats s;
    eng_rs_get_stats(RS, &s);
    cr_assert_eq(s.count, NSEED + 50 - NSEED / 5);
    cr_assert_eq(eng_ss_entries(SS), NSEED - NSEED / 5);
    bt_expect_valid();
    teardown();
}

/* A transaction's cursor merges its own writes with the base, in order. */
Test(bt_mvcc, cursor_merges_own_writes)
{
    eng_ss_cursor *sc;
    const uint8_t *k;
    uint32_t kl;
    eng_rid rid;
    char got[64] = "";
    setup();
    eng_txn *t = btb();
    BOK(eng_ss_insert(SS, t, (const uint8_t *)"b", 1, 1, false, NULL, &BERR));
    BOK(eng_ss_insert(SS, t, (const uint8_t *)"d", 1, 1, false, NULL, &BERR));
    btc(t);
    t = btb();
    BOK(eng_ss_insert(SS, t, (const uint8_t *)"a", 1, 1, false, NULL, &BERR));
    BOK(eng_ss_insert(SS, t, (const uint8_t *)"c", 1, 1, false, NULL, &BERR));
    BOK(eng_ss_remove(SS, t, (const uint8_t *)"d", 1, 1));
    BOK(eng_ss_insert(SS, t, (const uint8_t *)"e", 1, 1, false, NULL, &BERR));
    BOK(eng_ss_cursor_open(SS, &sc));
    for (int rc = eng_ss_cursor_seek(sc, NULL, 0, 0); rc == 0; rc = eng_ss_cursor_next(sc)) {
        BOK(eng_ss_cursor_get(sc, &k, &kl, &rid));
        strncat(got, (const char *)k, kl);
    }
    cr_assert_str_eq(got, "abce");
    got[0] = 0;
    for (int rc = eng_ss_cursor_prev(sc); rc == 0; rc = eng_ss_cursor_prev(sc)) {
        BOK(eng_ss_cursor_get(sc, &k, &kl, &rid));
        strncat(got, (const char *)k, kl);
    }
    cr_assert_str_eq(got, "ecba");
    eng_ss_cursor_close(sc);
    btc(t);
    teardown();
}

/* ---- old versions ---------------------------------------------------------------------- */

static void *sweep_a(void *arg)
{
    eng_txn *t;
    CHECK_RC(eng_txn_begin(BE, &t), 0);
    CHECK(val_of(R1) == 1, "start");
    STEP(); /* B commits updates: the versions stay for this snapshot */
    STEP();
    CHECK(val_of(R1) == 1, "old version gone while needed: %d", val_of(R1));
    CHECK_RC(eng_txn_commit(t, false, NULL), 0);
    return NULL;
}

static void *sweep_b(void *arg)
{
    STEP();
    for (int i = 0; i < 5; i++) {
        eng_txn *t;
        CHECK_RC(eng_txn_begin(BE, &t), 0);
        CHECK_RC(put(t, R1, 100 + i), 0);
        CHECK_RC(eng_txn_commit(t, false, NULL), 0);
    }
    CHECK(bt_txn_stat("chains") >= 1, "chains while a snapshot needs them: %lld",
          (long long)bt_txn_stat("chains"));
    STEP();
    return NULL;
}

Test(bt_mvcc, old_versions_are_freed)
{
    setup();
    BOK(eng_flush(BE, false, &BERR)); /* the checkpoint folds setup's commits */
    cr_assert_eq(bt_txn_stat("chains"), 0);
    run2(sweep_a, sweep_b);
    BOK(eng_flush(BE, false, &BERR)); /* no snapshot left: the fold drops them */
    cr_assert_eq(bt_txn_stat("chains"), 0);
    cr_assert_geq(bt_txn_stat("versionsFreed"), 5);
    cr_assert_eq(val_of(R1), 104);
    cr_assert_geq(bt_txn_stat("commits"), 7);
    cr_assert_geq(bt_txn_stat("latch.sharedAcquired"), 1);
    cr_assert_geq(bt_txn_stat("latch.exclusiveAcquired"), 1);
    teardown();
}

/* ---- the catalog ------------------------------------------------------------------------ */

static void *meta_a(void *arg)
{
    eng_txn *t;
    bson_t *m = doc(1);
    CHECK_RC(eng_txn_begin(BE, &t), 0);
    CHECK_RC(eng_meta_put(BE, t, "test.c", m, NULL), 0);
    STEP();
    STEP();
    CHECK_RC(eng_txn_commit(t, false, NULL), 0);
    bson_destroy(m);
    return NULL;
}

static void *meta_b(void *arg)
{
    eng_txn *t;
    bson_t *m = doc(2), out;
    STEP();
    CHECK_RC(eng_txn_begin(BE, &t), 0);
    CHECK_RC(eng_meta_get(BE, "test.c", &out), MD_NOTFOUND);
    CHECK_RC(eng_meta_put(BE, t, "test.c", m, NULL), MD_EWRITECONFLICT);
    CHECK_RC(eng_meta_put(BE, t, "test.d", m, NULL), 0);
    STEP();
    CHECK_RC(eng_txn_commit(t, false, NULL), 0);
    bson_destroy(m);
    return NULL;
}

Test(bt_mvcc, catalog_writes_conflict_per_key)
{
    bson_t out;
    setup();
    run2(meta_a, meta_b);
    BOK(eng_meta_get(BE, "test.c", &out));
    bson_destroy(&out);
    BOK(eng_meta_get(BE, "test.d", &out));
    bson_destroy(&out);
    teardown();
}

/* ---- many writes in one transaction, then a crash ---------------------------------------- */

Test(bt_mvcc, large_transaction_commits_and_recovers)
{
    bt_open_with(NULL, 0);
    RS = bt_rs("test.c", NULL, true);
    eng_txn *t = btb();
    eng_rid last = 0;
    for (int i = 0; i < 100000; i++)
        last = bt_ins(RS, t, 64, (uint32_t)i, false);
    BOK(eng_txn_commit(t, true, &BERR));
    cr_assert_eq(bt_txn_stat("chains"), 0);
    eng_rs_close(RS);
    bt_test_crash_now(BE);
    eng_close(BE);
    bt_open_with(NULL, 0);
    RS = bt_rs("test.c", NULL, false);
    eng_rs_stats s;
    eng_rs_get_stats(RS, &s);
    cr_assert_eq(s.count, 100000);
    const uint8_t *p;
    uint32_t len;
    BOK(eng_rs_get(RS, last, &p, &len));
    cr_assert(bt_doc_is(p, len, 64, 99999, false));
    eng_rs_close(RS);
}

/* ---- checkpoints see committed data only ------------------------------------------------ */

static eng_rid UNCOMMITTED;

static void *ckpt_a(void *arg)
{
    eng_txn *t;
    CHECK_RC(eng_txn_begin(BE, &t), 0);
    UNCOMMITTED = ins(t, 77);
    CHECK_RC(put(t, R2, 78), 0);
    STEP(); /* B commits, checkpoints, and the engine "crashes" */
    STEP();
    eng_txn_abort(t);
    return NULL;
}

static void *ckpt_b(void *arg)
{
    eng_txn *t;
    STEP();
    CHECK_RC(eng_txn_begin(BE, &t), 0);
    CHECK_RC(put(t, R1, 70), 0);
    CHECK_RC(eng_txn_commit(t, false, NULL), 0);
    CHECK_RC(eng_flush(BE, true, NULL), 0);
    STEP();
    return NULL;
}

Test(bt_mvcc, checkpoint_with_an_open_writer_holds_committed_data_only)
{
    BLOG_OFF = true; /* recovery is the checkpoint alone */
    setup();
    run2(ckpt_a, ckpt_b);
    teardown();
    bt_test_crash_now(BE);
    eng_close(BE);
    bt_open_with(NULL, 0);
    RS = bt_rs("test.c", NULL, false);
    cr_assert_eq(val_of(R1), 70);
    cr_assert_eq(val_of(R2), 2);
    cr_assert_eq(val_of(UNCOMMITTED), -1);
    eng_rs_close(RS);
    BLOG_OFF = false;
}
