/*
 * test_bt_fold.c -- committed versions that wait in the overlay, and the
 * folds that apply them to the pages (bt_txn.c).
 *
 * A commit only stamps its versions; they stay in their tree's overlay,
 * pending, until a fold (the overlay's bound, a checkpoint, verify, or a
 * reader after a run of reads without commits) applies them in key order.
 * These tests read pending versions through every reader (point reads in
 * and outside a transaction, record and sorted cursors, eng_ss_find,
 * unique checks, the counters), across a reopen with and without the log,
 * with a snapshot that keeps folded chains, and with folds racing readers,
 * writers and checkpoints.
 */
#include <pthread.h>

#include "test_bt_util.h"

TestSuite(bt_fold, .init = bt_fx_init, .fini = bt_fx_fini, .timeout = 120);

static eng_rs *RS;
static eng_ss *SS;

/* A record {v: n} padded to 64 bytes, so that values are told apart. */
static void rec(uint8_t out[64], int n)
{
    memset(out, 0, 64);
    uint32_t len = 64, bin = 64 - 13;
    memcpy(out, &len, 4);
    out[4] = 0x05, out[5] = 'p', out[6] = 0;
    memcpy(out + 7, &bin, 4);
    memcpy(out + 12, &n, 4);
}

static int val(const uint8_t *p, uint32_t len)
{
    int n;
    if (len != 64)
        return -2;
    memcpy(&n, p + 12, 4);
    return n;
}

static int get(eng_rid rid)
{
    const uint8_t *p;
    uint32_t len;
    return eng_rs_get(RS, rid, &p, &len) == 0 ? val(p, len) : -1;
}

static void key_of(uint8_t k[8], uint64_t i)
{
    for (int j = 0; j < 8; j++)
        k[j] = (uint8_t)(i >> (56 - 8 * j));
}

/* n records v = kbase + i and index keys kbase + i -> rid, committed in
 * one transaction each; returns the first RecordId (they are
 * consecutive). */
static eng_rid load_at(int kbase, int n)
{
    eng_rid first = 0;
    for (int i = 0; i < n; i++) {
        eng_txn *t = btb();
        uint8_t d[64], k[8];
        eng_rid rid;
        rec(d, kbase + i);
        key_of(k, (uint64_t)(kbase + i));
        BOK(eng_rs_insert(RS, t, d, 64, &rid, &BERR));
        BOK(eng_ss_insert(SS, t, k, 8, rid, true, NULL, &BERR));
        btc(t);
        if (!first)
            first = rid;
    }
    return first;
}

static eng_rid load(int n)
{
    return load_at(0, n);
}

/* A commit elsewhere (a store of its own): readers then start their wait
 * for an idle fold (BT_FOLD_IDLE_MS without a commit) again. */
static void touch(void)
{
    eng_rs *o = bt_rs("test.other", NULL, false);
    eng_txn *t = btb();
    uint8_t d[64];
    eng_rid rid;
    rec(d, 0);
    BOK(eng_rs_insert(o, t, d, 64, &rid, &BERR));
    btc(t);
    eng_rs_close(o);
}

static void open_stores(bool create)
{
    RS = bt_rs("test.c", NULL, create);
    if (create) {
        eng_rs_close(bt_rs("test.other", NULL, true));
        eng_txn *t = btb();
        BOK(eng_ss_create(BE, t, "test.c.$k", &BERR));
        btc(t);
    }
    BOK(eng_ss_open(BE, "test.c.$k", &SS, &BERR));
}

static void close_stores(void)
{
    eng_ss_close(SS);
    eng_rs_close(RS);
}

static void set(eng_rid rid, int n)
{
    eng_txn *t = btb();
    uint8_t d[64];
    eng_rid nr;
    bool moved;
    rec(d, n);
    BOK(eng_rs_update(RS, t, rid, d, 64, &nr, &moved, &BERR));
    btc(t);
}

/* Every reader sees the records 0..n-1 (with v = i + add for those below
 * `upto`, v = i above) and their index keys, whether folded or not (a
 * commit between each kind of read starts the wait for an idle fold
 * again). */
static void expect_all(eng_rid first, int n, int upto, int add)
{
    for (int i = 0; i < n; i++)
        cr_assert_eq(get(first + i), i + (i < upto ? add : 0), "record %d", i);
    touch();
    eng_txn *t = btb(); /* and inside a transaction */
    for (int i = 0; i < n; i += 7)
        cr_assert_eq(get(first + i), i + (i < upto ? add : 0), "record %d in a txn", i);
    btc(t);
    eng_rs_cursor *c;
    eng_rid rid;
    const uint8_t *p;
    uint32_t len;
    int seen = 0;
    BOK(eng_rs_cursor_open(RS, true, &c));
    while (eng_rs_cursor_next(c, &rid, &p, &len) == 0) {
        cr_assert_eq(rid, first + seen);
        cr_assert_eq(val(p, len), seen + (seen < upto ? add : 0));
        seen++;
    }
    eng_rs_cursor_close(c);
    cr_assert_eq(seen, n);
    touch();
    for (int i = 0; i < n; i += 5) {
        uint8_t k[8];
        key_of(k, (uint64_t)i);
        BOK(eng_ss_find(SS, k, 8, &rid));
        cr_assert_eq(rid, first + i);
    }
    touch();
    eng_ss_cursor *sc;
    const uint8_t *kp;
    uint32_t kl;
    BOK(eng_ss_cursor_open(SS, &sc));
    seen = 0;
    while (eng_ss_cursor_next(sc) == 0 && eng_ss_cursor_get(sc, &kp, &kl, &rid) == 0) {
        uint8_t k[8];
        key_of(k, (uint64_t)seen);
        cr_assert(kl == 8 && memcmp(kp, k, 8) == 0 && rid == first + seen);
        seen++;
    }
    eng_ss_cursor_close(sc);
    cr_assert_eq(seen, n);
    eng_rs_stats s;
    eng_rs_get_stats(RS, &s);
    cr_assert_eq(s.count, n);
    cr_assert_eq(s.data_size, 64 * n);
    cr_assert_eq(eng_ss_entries(SS), n);
}

Test(bt_fold, pending_versions_are_read_everywhere)
{
    bt_open_with(NULL, 0);
    open_stores(true);
    eng_rid first = load(12); /* 12 chains a tree: under the bound, none folded */
    cr_assert_eq(bt_txn_stat("versionsPending"), 24);
    for (int i = 0; i < 5; i++)
        set(first + i, i + 1000);
    cr_assert_eq(bt_txn_stat("versionsPending"), 24);
    expect_all(first, 12, 5, 1000);
    cr_assert_gt(bt_txn_stat("versionsPending"), 0, "the reads above are fewer than a fold's");
    /* a duplicate of a pending index key is found */
    eng_txn *t = btb();
    uint8_t k[8];
    eng_rid dup = 0;
    key_of(k, 3);
    cr_assert_eq(eng_ss_insert(SS, t, k, 8, 999999, true, &dup, &BERR), MD_EDUPKEY);
    cr_assert_gt(bt_txn_stat("versionsPending"), 0);
    cr_assert_eq(dup, first + 3);
    eng_txn_abort(t);
    /* a pending delete hides the page's entry */
    t = btb();
    BOK(eng_rs_remove(RS, t, first + 11));
    BOK(eng_ss_remove(SS, t, (key_of(k, 11), k), 8, first + 11));
    btc(t);
    cr_assert_gt(bt_txn_stat("versionsPending"), 0);
    expect_all(first, 11, 5, 1000);
    bt_expect_valid(); /* folds, then checks counters against the pages */
    cr_assert_eq(bt_txn_stat("versionsPending"), 0);
    cr_assert_eq(bt_txn_stat("chains"), 0);
    expect_all(first, 11, 5, 1000);
    t = btb(); /* the duplicate is found in the pages now */
    dup = 0;
    key_of(k, 3);
    cr_assert_eq(eng_ss_insert(SS, t, k, 8, 999999, true, &dup, &BERR), MD_EDUPKEY);
    cr_assert_eq(dup, first + 3);
    key_of(k, 11); /* a removed key can be inserted again */
    BOK(eng_ss_insert(SS, t, k, 8, 999999, true, NULL, &BERR));
    eng_txn_abort(t);
    close_stores();
}

Test(bt_fold, the_bound_folds_and_reads_stay_right)
{
    bt_open_with(NULL, 0);
    open_stores(true);
    eng_rid first = load_at(0, 3000);
    cr_assert_gt(bt_txn_stat("folds"), 10);
    for (int i = 0; i < 3000; i++)
        cr_assert_eq(get(first + i), i);
    /* two trees, each folded when its overlay reaches BT_FOLD_MIN (16) */
    cr_assert_lt(bt_txn_stat("chains"), 2 * 16, "more than the bound: %lld, folds %lld",
                 (long long)bt_txn_stat("chains"), (long long)bt_txn_stat("folds"));
    bt_expect_valid();
    eng_rs_stats st;
    eng_rs_get_stats(RS, &st);
    cr_assert_eq(st.count, 3000);
    cr_assert_eq(eng_ss_entries(SS), 3000);
    close_stores();
}

/* A read-mostly run: once no commit has come for a while (BT_FOLD_IDLE_MS,
 * looked at every BT_FOLD_IDLE reads) a reader folds, and reads go to the
 * pages alone again; reads that come quickly after a commit do not fold. */
Test(bt_fold, idle_readers_fold)
{
    bt_open_with(NULL, 0);
    open_stores(true);
    eng_rid first = load(10);
    cr_assert_eq(bt_txn_stat("versionsPending"), 20);
    for (int i = 0; i < 200; i++)
        cr_assert_eq(get(first + i % 10), i % 10);
    usleep(5000); /* past BT_FOLD_IDLE_MS with no commit */
    for (int i = 0; i < 200; i++)
        cr_assert_eq(get(first + i % 10), i % 10);
    cr_assert_eq(bt_txn_stat("versionsPending"), 0);
    cr_assert_eq(bt_txn_stat("chains"), 0);
    expect_all(first, 10, 0, 0);
    int64_t committed_us = eng_now_us(); /* expect_all's commit is before this */
    /* aborts leave retired entries and nothing pending: an idle reader
     * frees them too */
    bt_expect_valid(); /* folds what expect_all's commit left */
    eng_txn *t = btb();
    uint8_t d[64];
    eng_rid nr;
    bool moved;
    rec(d, 77);
    BOK(eng_rs_update(RS, t, first, d, 64, &nr, &moved, &BERR));
    eng_txn_abort(t);
    cr_assert_eq(bt_txn_stat("versionsPending"), 0);
    cr_assert_eq(bt_txn_stat("retired"), 2);
    for (int i = 0; i < 200; i++) /* the reader sees the commits so far */
        cr_assert_eq(get(first + i % 10), i % 10);
    /* within BT_FOLD_IDLE_MS (2 ms) of the last commit no reader folds; a
     * slower machine (a sanitizer, a loaded CPU) may be past it already */
    int64_t since_us = eng_now_us() - committed_us;
    if (since_us < 2000)
        cr_assert_eq(bt_txn_stat("retired"), 2, "folded %lld us after a commit",
                     (long long)since_us);
    else
        cr_log_info("idle_readers_fold: %lld us since the commit, not checking that "
                    "nothing folded yet", (long long)since_us);
    usleep(5000);
    for (int i = 0; i < 200; i++)
        cr_assert_eq(get(first + i % 10), i % 10);
    cr_assert_eq(bt_txn_stat("retired"), 0);
    close_stores();
}

static void reopen(void)
{
    close_stores();
    eng_close(BE);
    bt_open_with(NULL, 0);
    open_stores(false);
}

/* Pending at a crash: the log replays them; at a clean close (log off),
 * the closing checkpoint folds them. */
Test(bt_fold, pending_versions_survive_crash_with_the_log)
{
    bt_open_with(NULL, 0);
    open_stores(true);
    BOK(eng_flush(BE, true, &BERR));
    eng_rid first = load(60); /* folded at the bound, but for the last ones */
    for (int i = 0; i < 10; i++)
        set(first + i, i + 500);
    cr_assert_gt(bt_txn_stat("versionsPending"), 0);
    eng_txn *t = btb(); /* commit durably: the log is flushed */
    uint8_t d[64];
    eng_rid nr;
    bool moved;
    rec(d, 10 + 500);
    BOK(eng_rs_update(RS, t, first + 10, d, 64, &nr, &moved, &BERR));
    BOK(eng_txn_commit(t, true, &BERR));
    close_stores();
    bt_test_crash_now(BE);
    eng_close(BE);
    bt_open_with(NULL, 0);
    open_stores(false);
    expect_all(first, 60, 11, 500);
    bt_expect_valid();
    close_stores();
}

Test(bt_fold, pending_versions_survive_clean_close_without_the_log)
{
    BLOG_OFF = true;
    bt_open_with(NULL, 0);
    open_stores(true);
    eng_rid first = load(60); /* folded at the bound, but for the last ones */
    for (int i = 0; i < 10; i++)
        set(first + i, i + 500);
    cr_assert_gt(bt_txn_stat("versionsPending"), 0);
    reopen();
    expect_all(first, 60, 10, 500);
    bt_expect_valid();
    close_stores();
    BLOG_OFF = false;
}

/* A snapshot older than folded commits keeps reading its versions; the
 * pages hold the newest.  The snapshot lives on its own thread (one
 * transaction per thread); the main thread commits and folds meanwhile. */
static pthread_barrier_t BAR;
static eng_rid SNAP_FIRST;
static int SNAP_BAD = -1;

static void *snapshot_reader(void *arg)
{
    eng_txn *t;
    if (eng_txn_begin(BE, &t) != 0)
        SNAP_BAD = 1000;
    for (int i = 0; i < 10 && SNAP_BAD < 0; i++)
        if (get(SNAP_FIRST + i) != i)
            SNAP_BAD = i;
    pthread_barrier_wait(&BAR); /* the main thread commits and folds */
    pthread_barrier_wait(&BAR);
    for (int i = 0; i < 10 && SNAP_BAD < 0; i++)
        if (get(SNAP_FIRST + i) != i)
            SNAP_BAD = 100 + i;
    eng_txn_commit(t, false, NULL);
    return NULL;
}

Test(bt_fold, a_snapshot_keeps_what_a_fold_applied)
{
    pthread_t th;
    bt_open_with(NULL, 0);
    open_stores(true);
    SNAP_FIRST = load(10);
    BOK(eng_flush(BE, false, &BERR));
    pthread_barrier_init(&BAR, NULL, 2);
    cr_assert(pthread_create(&th, NULL, snapshot_reader, NULL) == 0);
    pthread_barrier_wait(&BAR);
    for (int i = 0; i < 10; i++)
        set(SNAP_FIRST + i, i + 70);
    load_at(10000, 400); /* past the bound: the overlay folds */
    BOK(eng_flush(BE, false, &BERR)); /* and the checkpoint folds again */
    cr_assert_eq(bt_txn_stat("versionsPending"), 0);
    cr_assert_geq(bt_txn_stat("chains"), 10, "the snapshot's versions were dropped");
    for (int i = 0; i < 10; i++)
        cr_assert_eq(get(SNAP_FIRST + i), i + 70);
    pthread_barrier_wait(&BAR);
    pthread_join(th, NULL);
    pthread_barrier_destroy(&BAR);
    cr_assert_eq(SNAP_BAD, -1, "the snapshot saw a later value at %d", SNAP_BAD);
    BOK(eng_flush(BE, false, &BERR)); /* no snapshot left */
    cr_assert_eq(bt_txn_stat("chains"), 0);
    bt_expect_valid();
    close_stores();
}

/* Folds (at the bound, by idle readers, at checkpoints) racing readers
 * that check every value they see: a record's v only grows, and its index
 * key is always there. */
#define RACE_N 300
static volatile int STOP;
static int RACE_BAD;
static eng_rid RACE_FIRST;

static void *race_reader(void *arg)
{
    int last[RACE_N] = {0};
    uint64_t x = (uintptr_t)arg * 2654435761u + 1;
    while (!STOP && !RACE_BAD) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int i = (int)(x % RACE_N), v = get(RACE_FIRST + i);
        uint8_t k[8];
        eng_rid rid;
        key_of(k, (uint64_t)i);
        if (v < last[i] || v % RACE_N != i)
            RACE_BAD = 1;
        else if (eng_ss_find(SS, k, 8, &rid) != 0 || rid != RACE_FIRST + i)
            RACE_BAD = 2;
        last[i] = v;
    }
    return NULL;
}

static void *race_ckpt(void *arg)
{
    while (!STOP && !RACE_BAD) {
        if (eng_flush(BE, false, NULL) != 0)
            RACE_BAD = 3;
        usleep(2000);
    }
    return NULL;
}

Test(bt_fold, folds_race_readers_and_checkpoints)
{
    pthread_t r[2], c;
    bt_open_with(NULL, 0);
    open_stores(true);
    RACE_FIRST = load(RACE_N);
    STOP = 0;
    RACE_BAD = 0;
    for (long i = 0; i < 2; i++)
        cr_assert(pthread_create(&r[i], NULL, race_reader, (void *)(i + 1)) == 0);
    cr_assert(pthread_create(&c, NULL, race_ckpt, NULL) == 0);
    uint64_t x = 7;
    for (int n = 0; n < 6000 && !RACE_BAD; n++) { /* v = i + RACE_N * round */
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int i = (int)(x % RACE_N);
        eng_txn *t;
        BOK(eng_txn_begin(BE, &t));
        uint8_t d[64];
        const uint8_t *p;
        uint32_t len;
        eng_rid nr;
        bool moved;
        BOK(eng_rs_get(RS, RACE_FIRST + i, &p, &len));
        rec(d, val(p, len) + RACE_N);
        BOK(eng_rs_update(RS, t, RACE_FIRST + i, d, 64, &nr, &moved, &BERR));
        BOK(eng_txn_commit(t, false, &BERR));
    }
    STOP = 1;
    pthread_join(r[0], NULL);
    pthread_join(r[1], NULL);
    pthread_join(c, NULL);
    cr_assert_eq(RACE_BAD, 0, "a reader saw a wrong value (%d)", RACE_BAD);
    cr_assert_gt(bt_txn_stat("folds"), 5);
    bt_expect_valid();
    close_stores();
}

/* The sorted store's keys, walked with a cursor, are the model's. */
static void expect_keys(const bool *present, int n)
{
    eng_ss_cursor *sc;
    const uint8_t *kp;
    uint32_t kl;
    eng_rid rid;
    int at = 0;
    BOK(eng_ss_cursor_open(SS, &sc));
    while (eng_ss_cursor_next(sc) == 0 && eng_ss_cursor_get(sc, &kp, &kl, &rid) == 0) {
        uint8_t k[8];
        while (at < n && !present[at])
            at++;
        cr_assert(at < n, "a key the model does not have");
        key_of(k, (uint64_t)at);
        cr_assert(kl == 8 && memcmp(kp, k, 8) == 0 && rid == 7, "key %d out of place", at);
        at++;
    }
    eng_ss_cursor_close(sc);
    while (at < n && !present[at])
        at++;
    cr_assert_eq(at, n, "key %d missing", at);
}

/*
 * The overlay places a key past its last chain from its tails, without a
 * search (an append).  Random appends, inserts below the last chain,
 * removals, and aborted appends (the last chain unlinked again: the tails
 * step back) across folds must keep every key where the model has it.
 */
Test(bt_fold, appends_and_inserts_below_the_last_chain)
{
    enum { MAXK = 4000 };
    static bool present[MAXK];
    uint64_t s = 0x9E3779B97F4A7C15ull;
    int high = 0;
    bt_open_with(NULL, 0);
    open_stores(true);
    memset(present, 0, sizeof present);
    for (int op = 0; op < 2500 && high < MAXK - 2; op++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        int r = (int)(s % 100), k = high ? (int)((s >> 8) % (uint64_t)high) : 0;
        uint8_t key[8], key2[8];
        eng_txn *t = btb();
        if (r < 40 || high == 0) { /* an append */
            key_of(key, (uint64_t)high);
            BOK(eng_ss_insert(SS, t, key, 8, 7, false, NULL, &BERR));
            present[high++] = true;
            btc(t);
        } else if (r < 60) { /* below the last chain */
            key_of(key, (uint64_t)k);
            BOK(eng_ss_insert(SS, t, key, 8, 7, false, NULL, &BERR));
            present[k] = true;
            btc(t);
        } else if (r < 75) { /* a removal */
            key_of(key, (uint64_t)k);
            int rc = eng_ss_remove(SS, t, key, 8, 7);
            cr_assert_eq(rc, present[k] ? 0 : MD_NOTFOUND);
            present[k] = false;
            btc(t);
        } else if (r < 90) { /* aborted appends: the last chains go again */
            key_of(key, (uint64_t)high);
            key_of(key2, (uint64_t)high + 1);
            BOK(eng_ss_insert(SS, t, key, 8, 7, false, NULL, &BERR));
            if (r & 1)
                BOK(eng_ss_insert(SS, t, key2, 8, 7, false, NULL, &BERR));
            eng_txn_abort(t);
        } else { /* an append and the removal of the key before it */
            key_of(key, (uint64_t)high);
            key_of(key2, (uint64_t)high - 1);
            BOK(eng_ss_insert(SS, t, key, 8, 7, false, NULL, &BERR));
            int rc = eng_ss_remove(SS, t, key2, 8, 7);
            cr_assert_eq(rc, present[high - 1] ? 0 : MD_NOTFOUND);
            present[high - 1] = false;
            present[high++] = true;
            btc(t);
        }
        if (op % 97 == 0)
            expect_keys(present, high);
    }
    expect_keys(present, high);
    bt_expect_valid();
    expect_keys(present, high);
    close_stores();
}

/* Readers take no lock on the overlay, so what a writer takes out under the
 * shared latch -- an aborted version, a chain left with only its base
 * image, a version its own transaction replaced -- is retired, readable,
 * and freed by the next fold. */
Test(bt_fold, aborted_versions_are_retired_until_the_next_fold)
{
    bt_open_with(NULL, 0);
    open_stores(true);
    eng_rid first = load(4);
    bt_expect_valid(); /* folded: no chains */
    cr_assert_eq(bt_txn_stat("chains"), 0);
    cr_assert_eq(bt_txn_stat("retired"), 0);
    int64_t freed = bt_txn_stat("versionsFreed");
    /* an update of each record and 3 inserts, aborted: 7 versions out of
     * 7 chains, which go too (only their base images were left) */
    eng_txn *t = btb();
    uint8_t d[64];
    eng_rid nr;
    bool moved;
    for (int i = 0; i < 4; i++) {
        rec(d, 500 + i);
        BOK(eng_rs_update(RS, t, first + i, d, 64, &nr, &moved, &BERR));
    }
    for (int i = 0; i < 3; i++) {
        rec(d, 600 + i);
        BOK(eng_rs_insert(RS, t, d, 64, &nr, &BERR));
    }
    cr_assert_eq(bt_txn_stat("chains"), 7);
    eng_txn_abort(t);
    cr_assert_eq(bt_txn_stat("chains"), 0);
    cr_assert_eq(bt_txn_stat("retired"), 14);
    cr_assert_eq(bt_txn_stat("versionsFreed"), freed, "freed under the shared latch");
    for (int i = 0; i < 4; i++) /* the aborted writes are not seen (a few reads: no idle fold) */
        cr_assert_eq(get(first + i), i);
    /* a record written twice by one transaction: the first version retires */
    t = btb();
    rec(d, 700);
    BOK(eng_rs_update(RS, t, first, d, 64, &nr, &moved, &BERR));
    rec(d, 701);
    BOK(eng_rs_update(RS, t, first, d, 64, &nr, &moved, &BERR));
    cr_assert_eq(bt_txn_stat("retired"), 15);
    /* retired entries count toward the fold bound (16): the commit folds,
     * and the fold frees them */
    btc(t);
    cr_assert_eq(bt_txn_stat("retired"), 0);
    /* 7 aborted and 1 replaced version, and the 4 updates' base images */
    cr_assert_geq(bt_txn_stat("versionsFreed"), freed + 12);
    cr_assert_eq(get(first), 701);
    bt_expect_valid();
    close_stores();
}
