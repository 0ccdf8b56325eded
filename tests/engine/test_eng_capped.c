/*
 * test_eng_capped.c -- capped record stores (eng.h, "Capped record
 * stores"), written once and run on every engine that implements them.
 *
 * What is checked: the ring wraps by size and by max keeping insertion
 * order; the capped-delete hook sees every removed record, oldest first,
 * with its bytes, in the inserting transaction (it can remove index entries
 * there); a refusing hook fails the insert and the abort leaves the ring as
 * it was; a forward cursor tails (returns records inserted after it hit the
 * end, directly and across save/restore); a saved cursor whose record the
 * ring removed fails with MD_ECAPPEDLOST, also where the location was
 * reused; truncate empties; a record that cannot fit is MD_ETOOBIG; stats
 * are true; the ring and its order survive close and reopen; validate is
 * clean after many wraps.
 *
 * Engines measure the ring differently (eng.h): ephemeralForTest and btree
 * count document bytes, so their counts are exact; mmapv1 counts the space
 * of its extents (record headers, extent headers, free remainders), so its
 * counts are bounded instead.
 */
#define ENG_FX_DIR "/tmp/md_capped_XXXXXX"
#define ENG_FX_FIRST_FILE 262144
#define ENG_FX_CAPPED_EXTENT 8192 /* rings of several extents: 16 KB has two */
#include "test_eng_fixture.h"

/* ---- fixture ------------------------------------------------------------ */

/* The engines with capped record stores. */
static const char *const CAPPED_ENGINES[] = {"ephemeralForTest", "mmapv1", "btree", NULL};

static bool persists(void)
{
    return strcmp(OPS->name, "ephemeralForTest") != 0;
}

/* Engines whose ring counts document bytes only (eng.h). */
static bool counts_doc_bytes(void)
{
    return strcmp(OPS->name, "mmapv1") != 0;
}

#define CAPPED_TEST(test) \
    ParameterizedTestParameters(capped, test) \
    { \
        return engine_params_of(CAPPED_ENGINES); \
    } \
    ParameterizedTest(eng_param *p, capped, test, .fini = fx_fini)

/* ---- documents ---------------------------------------------------------- */

#define DOC_MIN 13
#define DOC_MAX 8192
static uint8_t DOC[DOC_MAX], CMP[DOC_MAX];

/* A valid BSON document of exactly len bytes whose payload depends on seed,
 * written into buf (DOC for inserts; CMP for comparisons, which the hook
 * makes while DOC is being inserted). */
static const uint8_t *fill_doc(uint8_t *buf, uint32_t len, uint32_t seed)
{
    cr_assert(len >= DOC_MIN && len <= DOC_MAX);
    uint32_t bin = len - DOC_MIN;
    memcpy(buf, &len, 4);
    buf[4] = 0x05, buf[5] = 'p', buf[6] = 0;
    memcpy(buf + 7, &bin, 4);
    buf[11] = 0;
    for (uint32_t i = 0; i < bin; i++)
        buf[12 + i] = (uint8_t)(seed * 131u + i * 7u + (i >> 8));
    buf[len - 1] = 0;
    return buf;
}

static const uint8_t *make_doc(uint32_t len, uint32_t seed)
{
    return fill_doc(DOC, len, seed);
}

static bool doc_is(const uint8_t *data, uint32_t len, uint32_t want_len, uint32_t seed)
{
    return len == want_len && memcmp(data, fill_doc(CMP, want_len, seed), len) == 0;
}

/* ---- the model: what was inserted, what the hook saw -------------------- */

#define MAXN 4096

/* Insertion k had seed k, length lens[k] and RecordId rids[k].  The hook
 * checks that its calls name insertions 0, 1, 2 ... in order, with their
 * bytes, in the inserting transaction. */
typedef struct model {
    eng_rid rids[MAXN];
    uint32_t lens[MAXN];
    int n;           /* insertions */
    int removed;     /* hook calls that let the removal go ahead */
    int hook_calls;
    int fail_at;     /* the hook call (0-based) that refuses, -1: none */
    int fail_rc;
    bool bad;        /* a call out of order or with other bytes */
    char why[160];
    eng_txn *txn;    /* the transaction of the insert in progress */
    eng_ss *ss;      /* if set: key "k%05d" of insertion k, removed here */
    bool padded;     /* not capped: mmapv1 pads records */
} model;

static model M;

static void key_of(int k, uint8_t key[8])
{
    snprintf((char *)key, 8, "k%05d", k % 100000); /* k < 100000 in these tests */
}

static int hook(void *ctx, eng_txn *t, eng_rid rid, const uint8_t *data, uint32_t len)
{
    model *m = ctx;
    int call = m->hook_calls++;
    if (call == m->fail_at)
        return m->fail_rc;
    int k = m->removed;
    if (!m->bad && (k >= m->n || m->rids[k] != rid || !doc_is(data, len, m->lens[k], k) ||
                    t != m->txn)) {
        m->bad = true;
        snprintf(m->why, sizeof m->why, "call %d: RecordId %lld, %u bytes; expected insertion %d",
                 call, (long long)rid, len, k);
    }
    if (m->ss) {
        uint8_t key[8];
        key_of(k, key);
        int rc = eng_ss_remove(m->ss, t, key, 6, rid);
        if (rc)
            return rc;
    }
    m->removed++;
    return 0;
}

static eng_txn *tb(void)
{
    eng_txn *t = NULL;
    OK(eng_txn_begin(E, &t));
    CHECK(t != NULL, "txn_begin gave no transaction");
    return t;
}

static void tc(eng_txn *t)
{
    OK(eng_txn_commit(t, false, &ERR));
}

static eng_rs *capped_open(const char *ident)
{
    eng_rs *rs = NULL;
    OK(eng_rs_open(E, ident, &rs, &ERR));
    eng_rs_set_capped_hook(rs, hook, &M);
    return rs;
}

static eng_rs *capped_make(const char *ident, int64_t size, int64_t max)
{
    eng_rs_options o = {.capped = true, .capped_size = size, .capped_max = max};
    eng_txn *t = tb();
    OK(eng_rs_create(E, t, ident, &o, &ERR));
    tc(t);
    memset(&M, 0, sizeof M);
    M.fail_at = -1;
    return capped_open(ident);
}

/* Insert the next document (seed M.n) of len bytes in its own transaction. */
static eng_rid ins(eng_rs *rs, uint32_t len)
{
    int k = M.n;
    CHECK(k < MAXN, "model full");
    eng_txn *t = tb();
    eng_rid rid = ENG_RID_NONE;
    M.txn = t;
    M.rids[k] = ENG_RID_NONE;
    M.lens[k] = len;
    M.n++; /* the hook may only name older insertions */
    OK(eng_rs_insert(rs, t, make_doc(len, (uint32_t)k), len, &rid, &ERR));
    CHECK(rid != ENG_RID_NONE, "insert returned RecordId 0");
    M.rids[k] = rid;
    if (M.ss) {
        uint8_t key[8];
        key_of(k, key);
        OK(eng_ss_insert(M.ss, t, key, 6, rid, true, NULL, &ERR));
    }
    tc(t);
    M.txn = NULL;
    CHECK(!M.bad, "capped-delete hook: %s", M.why);
    return rid;
}

static void rs_stat(eng_rs *rs, struct eng_rs_stats *s)
{
    memset(s, 0, sizeof *s);
    rs->engine->ops->rs_stats(rs, s);
}

/* The store holds exactly insertions [M.removed, M.n), in that order
 * forward and the reverse backward, and its stats agree. */
static void expect_ring(eng_rs *rs)
{
    eng_rs_cursor *c;
    eng_rid rid;
    const uint8_t *d;
    uint32_t l;
    int rc, k = M.removed;
    int64_t bytes = 0;
    OK(eng_rs_cursor_open(rs, true, &c));
    while ((rc = eng_rs_cursor_next(c, &rid, &d, &l)) == 0) {
        CHECK(k < M.n, "forward scan returned more than insertions [%d, %d)", M.removed, M.n);
        CHECK(rid == M.rids[k] && doc_is(d, l, M.lens[k], (uint32_t)k),
              "forward scan position %d: RecordId %lld (%u bytes), want insertion %d",
              k - M.removed, (long long)rid, l, k);
        bytes += l;
        k++;
    }
    RC(rc, MD_NOTFOUND);
    EQ(k, M.n);
    eng_rs_cursor_close(c);
    OK(eng_rs_cursor_open(rs, false, &c));
    k = M.n;
    while ((rc = eng_rs_cursor_next(c, &rid, &d, &l)) == 0) {
        k--;
        CHECK(k >= M.removed && rid == M.rids[k],
              "reverse scan: RecordId %lld, want insertion %d", (long long)rid, k);
    }
    RC(rc, MD_NOTFOUND);
    EQ(k, M.removed);
    eng_rs_cursor_close(c);
    struct eng_rs_stats s;
    rs_stat(rs, &s);
    EQ(s.count, M.n - M.removed);
    if (counts_doc_bytes())
        EQ(s.data_size, bytes);
    else /* mmapv1: netLength, documents rounded up to 4 bytes (more if padded) */
        CHECK(s.data_size >= bytes && (M.padded || s.data_size <= bytes + 3 * s.count),
              "data_size %lld for %lld bytes of %lld documents", (long long)s.data_size,
              (long long)bytes, (long long)s.count);
}

static char *validate_errors(eng_validate *v)
{
    return bson_as_relaxed_extended_json(&v->errors, NULL);
}

static void expect_valid(eng_rs *rs)
{
    eng_validate v;
    bson_iter_t it;
    eng_validate_init(&v, true);
    int rc = eng_rs_validate(rs, &v);
    char *errs = validate_errors(&v);
    CHECK(rc == 0 && v.nerrors == 0, "rs_validate: %s, errors %s", md_strerror(rc), errs);
    bson_free(errs);
    if (bson_iter_init_find(&it, &v.info, "nrecords"))
        EQ(bson_iter_as_int64(&it), M.n - M.removed);
    eng_validate_cleanup(&v);
}

static uint64_t rng_state = 88172645463325252ull;
static uint32_t rnd(uint32_t n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

/* ---- tests -------------------------------------------------------------- */

CAPPED_TEST(wraps_by_size_in_insertion_order)
{
    fx_open(p);
    const int64_t size = 16384;
    eng_rs *rs = capped_make("test.cap", size, 0);
    int peak = 0;
    for (int i = 0; i < 400; i++) {
        ins(rs, 200);
        int live = M.n - M.removed;
        if (live > peak)
            peak = live;
        if (counts_doc_bytes())
            EQ(live, i + 1 < size / 200 ? i + 1 : size / 200);
        else
            CHECK(live * 200 <= size, "%d records of 200 bytes in a %lld-byte ring", live,
                  (long long)size);
        if (i % 37 == 0 || i > 390)
            expect_ring(rs);
    }
    /* The ring filled (mmapv1: its overhead is record headers and the
     * 24 bytes kept free per extent) and then wrapped many times. */
    CHECK(peak >= size / 200 * 3 / 4, "the ring held at most %d records", peak);
    CHECK(M.removed >= 400 - peak, "only %d removed", M.removed);
    expect_valid(rs);
    eng_rs_close(rs);
}

CAPPED_TEST(wraps_by_max)
{
    fx_open(p);
    eng_rs *rs = capped_make("test.cap", 65536, 10);
    for (int i = 0; i < 57; i++) {
        ins(rs, 100 + (uint32_t)rnd(300));
        EQ(M.n - M.removed, i + 1 < 10 ? i + 1 : 10);
    }
    expect_ring(rs);
    EQ(M.removed, 47);
    expect_valid(rs);
    eng_rs_close(rs);
}

CAPPED_TEST(mixed_sizes_keep_order_and_the_hook_sees_every_removal)
{
    fx_open(p);
    const int64_t size = 32768;
    eng_rs *rs = capped_make("test.cap", size, 0);
    for (int i = 0; i < 600; i++) {
        ins(rs, DOC_MIN + rnd(i % 50 == 0 ? 6000 : 900));
        if (i % 25 == 0)
            expect_ring(rs);
        struct eng_rs_stats s;
        rs_stat(rs, &s);
        CHECK(s.data_size <= size, "data_size %lld over the cap", (long long)s.data_size);
    }
    expect_ring(rs);
    CHECK(M.removed > 300, "only %d removed", M.removed);
    expect_valid(rs);
    eng_rs_close(rs);
}

CAPPED_TEST(hook_removes_index_entries_in_the_same_transaction)
{
    fx_open(p);
    eng_txn *t = tb();
    OK(eng_ss_create(E, t, "test.cap.$k_1", &ERR));
    tc(t);
    eng_rs *rs = capped_make("test.cap", 8192, 0);
    OK(eng_ss_open(E, "test.cap.$k_1", &M.ss, &ERR));
    for (int i = 0; i < 300; i++)
        ins(rs, 60 + (uint32_t)rnd(200));
    expect_ring(rs);
    EQ(eng_ss_entries(M.ss), M.n - M.removed);
    eng_ss_cursor *c;
    const uint8_t *key;
    uint32_t klen;
    eng_rid rid;
    OK(eng_ss_cursor_open(M.ss, &c));
    int rc = eng_ss_cursor_seek(c, NULL, 0, ENG_RID_NONE);
    for (int k = M.removed; k < M.n; k++) {
        uint8_t want[8];
        key_of(k, want);
        RC(rc, 0);
        OK(eng_ss_cursor_get(c, &key, &klen, &rid));
        CHECK(klen == 6 && memcmp(key, want, 6) == 0 && rid == M.rids[k],
              "index entry for insertion %d", k);
        rc = eng_ss_cursor_next(c);
    }
    RC(rc, MD_NOTFOUND);
    eng_ss_cursor_close(c);
    eng_ss_close(M.ss);
    M.ss = NULL;
    eng_rs_close(rs);
}

CAPPED_TEST(hook_failure_fails_the_insert_and_abort_keeps_the_ring)
{
    fx_open(p);
    eng_rs *rs = capped_make("test.cap", 4096, 8);
    for (int i = 0; i < 8; i++)
        ins(rs, 300);
    EQ(M.removed, 0);
    expect_ring(rs);
    /* The next insert must remove the oldest record; the hook refuses. */
    M.fail_at = M.hook_calls;
    M.fail_rc = MD_EDUPKEY;
    eng_txn *t = tb();
    eng_rid rid = ENG_RID_NONE;
    M.txn = t;
    RC(eng_rs_insert(rs, t, make_doc(300, 999), 300, &rid, &ERR), MD_EDUPKEY);
    eng_txn_abort(t);
    M.txn = NULL;
    M.fail_at = -1;
    expect_ring(rs);
    /* A refusal after the first removal of an insert that needs two. */
    M.fail_at = M.hook_calls + 1;
    t = tb();
    M.txn = t;
    RC(eng_rs_insert(rs, t, make_doc(2000, 998), 2000, &rid, &ERR), MD_EDUPKEY);
    eng_txn_abort(t);
    M.txn = NULL;
    M.fail_at = -1;
    M.removed = 0; /* the abort brought the first one back */
    expect_ring(rs);
    /* And the ring goes on as if nothing happened. */
    for (int i = 0; i < 20; i++)
        ins(rs, 300);
    expect_ring(rs);
    expect_valid(rs);
    eng_rs_close(rs);
}

CAPPED_TEST(tailing_cursor_returns_new_records)
{
    fx_open(p);
    eng_rs *rs = capped_make("test.cap", 65536, 0);
    for (int i = 0; i < 5; i++)
        ins(rs, 100);
    eng_rs_cursor *c;
    eng_rid rid;
    const uint8_t *d;
    uint32_t l;
    OK(eng_rs_cursor_open(rs, true, &c));
    int k = 0, rc;
    while ((rc = eng_rs_cursor_next(c, &rid, &d, &l)) == 0)
        CHECK(rid == M.rids[k++], "scan position %d", k - 1);
    RC(rc, MD_NOTFOUND);
    EQ(k, 5);
    /* Directly: new records after MD_NOTFOUND. */
    ins(rs, 100);
    ins(rs, 120);
    for (; k < 7; k++) {
        OK(eng_rs_cursor_next(c, &rid, &d, &l));
        CHECK(rid == M.rids[k] && doc_is(d, l, M.lens[k], (uint32_t)k), "tail record %d", k);
    }
    RC(eng_rs_cursor_next(c, &rid, &d, &l), MD_NOTFOUND);
    RC(eng_rs_cursor_next(c, &rid, &d, &l), MD_NOTFOUND);
    /* Across save and restore, several times. */
    for (int round = 0; round < 4; round++) {
        eng_rs_cursor_save(c);
        for (int j = 0; j <= round; j++)
            ins(rs, 90 + (uint32_t)rnd(50));
        OK(eng_rs_cursor_restore(c));
        for (; k < M.n; k++) {
            OK(eng_rs_cursor_next(c, &rid, &d, &l));
            CHECK(rid == M.rids[k] && doc_is(d, l, M.lens[k], (uint32_t)k), "tail record %d",
                  k);
        }
        RC(eng_rs_cursor_next(c, &rid, &d, &l), MD_NOTFOUND);
    }
    /* Saved in the middle, not at the end: resumes at the next record. */
    eng_rs_cursor_close(c);
    OK(eng_rs_cursor_open(rs, true, &c));
    OK(eng_rs_cursor_next(c, &rid, &d, &l));
    eng_rs_cursor_save(c);
    ins(rs, 100);
    OK(eng_rs_cursor_restore(c));
    for (k = 1; k < M.n; k++) {
        OK(eng_rs_cursor_next(c, &rid, &d, &l));
        CHECK(rid == M.rids[k], "resumed scan position %d", k);
    }
    RC(eng_rs_cursor_next(c, &rid, &d, &l), MD_NOTFOUND);
    eng_rs_cursor_close(c);
    eng_rs_close(rs);
}

CAPPED_TEST(tailing_across_wraps)
{
    fx_open(p);
    eng_rs *rs = capped_make("test.cap", 8192, 0);
    eng_rs_cursor *c;
    eng_rid rid;
    const uint8_t *d;
    uint32_t l;
    OK(eng_rs_cursor_open(rs, true, &c));
    RC(eng_rs_cursor_next(c, &rid, &d, &l), MD_NOTFOUND);
    int k = 0;
    /* A reader that keeps up never loses its place, however often the
     * ring wraps. */
    for (int round = 0; round < 60; round++) {
        eng_rs_cursor_save(c);
        for (int j = 0; j < 1 + round % 7; j++)
            ins(rs, 150 + (uint32_t)rnd(200));
        OK(eng_rs_cursor_restore(c));
        for (; k < M.n; k++) {
            OK(eng_rs_cursor_next(c, &rid, &d, &l));
            CHECK(rid == M.rids[k] && doc_is(d, l, M.lens[k], (uint32_t)k), "tail record %d",
                  k);
        }
        RC(eng_rs_cursor_next(c, &rid, &d, &l), MD_NOTFOUND);
    }
    CHECK(M.removed > 50, "the ring wrapped only %d records", M.removed);
    eng_rs_cursor_close(c);
    eng_rs_close(rs);
}

CAPPED_TEST(position_lost_when_the_ring_overwrites_it)
{
    fx_open(p);
    eng_rs *rs = capped_make("test.cap", 8192, 0);
    for (int i = 0; i < 20; i++)
        ins(rs, 200);
    eng_rs_cursor *c, *c2;
    eng_rid rid, saved;
    const uint8_t *d;
    uint32_t l;
    OK(eng_rs_cursor_open(rs, true, &c));
    OK(eng_rs_cursor_next(c, &rid, &d, &l));
    saved = rid;
    EQ(saved, M.rids[M.removed]);
    eng_rs_cursor_save(c);
    /* A second cursor at the newest record stays valid throughout. */
    OK(eng_rs_cursor_open(rs, true, &c2));
    while (eng_rs_cursor_next(c2, &rid, &d, &l) == 0)
        ;
    eng_rs_cursor_save(c2);
    /* Same-size records: once the ring is full, the record that removes
     * the saved one takes its place (mmapv1 reuses the location). */
    int first = M.removed, before = M.n;
    while (M.removed < first + 1)
        ins(rs, 200);
    CHECK(M.removed < before, "the ring removed the newest record too");
    if (strcmp(OPS->name, "mmapv1") == 0) {
        bool reused = false;
        for (int k = M.removed; k < M.n; k++)
            reused |= M.rids[k] == saved;
        CHECK(reused, "no new record at the saved location");
    }
    RC(eng_rs_cursor_restore(c), MD_ECAPPEDLOST);
    RC(eng_rs_cursor_next(c, &rid, &d, &l), MD_ECAPPEDLOST);
    RC(eng_rs_cursor_next(c, &rid, &d, &l), MD_ECAPPEDLOST);
    eng_rs_cursor_close(c);
    /* c2's record (the newest then) is still in the ring. */
    OK(eng_rs_cursor_restore(c2));
    int k = before;
    for (; k < M.n; k++) {
        OK(eng_rs_cursor_next(c2, &rid, &d, &l));
        CHECK(rid == M.rids[k], "tail record %d", k);
    }
    RC(eng_rs_cursor_next(c2, &rid, &d, &l), MD_NOTFOUND);
    /* Now let the ring pass c2 too, without a save: next notices. */
    eng_rs_cursor_save(c2);
    first = M.n;
    while (M.removed < first)
        ins(rs, 200);
    RC(eng_rs_cursor_restore(c2), MD_ECAPPEDLOST);
    RC(eng_rs_cursor_next(c2, &rid, &d, &l), MD_ECAPPEDLOST);
    eng_rs_cursor_close(c2);
    expect_ring(rs);
    eng_rs_close(rs);
}

CAPPED_TEST(truncate_empties_the_ring)
{
    fx_open(p);
    eng_rs *rs = capped_make("test.cap", 8192, 0);
    for (int i = 0; i < 100; i++)
        ins(rs, 180);
    eng_txn *t = tb();
    OK(eng_rs_truncate(rs, t));
    tc(t);
    M.removed = M.n; /* the hook is for the ring's own removals */
    struct eng_rs_stats s;
    rs_stat(rs, &s);
    EQ(s.count, 0);
    EQ(s.data_size, 0);
    expect_ring(rs);
    expect_valid(rs);
    /* The ring fills and wraps again from empty. */
    int hook_calls = M.hook_calls;
    for (int i = 0; i < 100; i++)
        ins(rs, 180);
    CHECK(M.hook_calls > hook_calls, "no removals after the truncate");
    expect_ring(rs);
    expect_valid(rs);
    eng_rs_close(rs);
}

CAPPED_TEST(record_too_big_for_the_ring)
{
    fx_open(p);
    eng_rs *rs = capped_make("test.cap", 4096, 0);
    for (int i = 0; i < 5; i++)
        ins(rs, 300);
    eng_txn *t = tb();
    eng_rid rid;
    M.txn = t;
    RC(eng_rs_insert(rs, t, make_doc(8000, 1), 8000, &rid, &ERR), MD_ETOOBIG);
    eng_txn_abort(t);
    M.txn = NULL;
    EQ(M.removed, 0);
    expect_ring(rs);
    /* A record the size of the ring fits where the engine counts only
     * document bytes, and empties the ring. */
    if (counts_doc_bytes()) {
        ins(rs, 4096);
        EQ(M.removed, 5);
        expect_ring(rs);
    }
    ins(rs, 300);
    expect_ring(rs);
    expect_valid(rs);
    eng_rs_close(rs);
}

CAPPED_TEST(reopen_keeps_the_ring_and_its_order)
{
    fx_open(p);
    if (!persists())
        return; /* nothing survives a close (see test_eng_mem.c) */
    eng_rs *rs = capped_make("test.cap", 16384, 0);
    eng_rs *small = capped_make("test.small", 65536, 7);
    model keep;
    for (int i = 0; i < 23; i++)
        ins(small, 100);
    keep = M;
    memset(&M, 0, sizeof M);
    M.fail_at = -1;
    for (int i = 0; i < 250; i++)
        ins(rs, 40 + rnd(300));
    expect_ring(rs);
    eng_rs_close(rs);
    eng_rs_close(small);
    OK(eng_flush(E, true, &ERR));
    fx_reopen();
    rs = capped_open("test.cap");
    expect_ring(rs);
    expect_valid(rs);
    /* The ring goes on from where it was. */
    for (int i = 0; i < 150; i++)
        ins(rs, 40 + rnd(300));
    expect_ring(rs);
    expect_valid(rs);
    eng_rs_close(rs);
    /* The max survived too. */
    M = keep;
    small = capped_open("test.small");
    expect_ring(small);
    ins(small, 100);
    EQ(M.n - M.removed, 7);
    expect_ring(small);
    eng_rs_close(small);
    /* And without a flush (btree: from the log; mmapv1: the journal). */
    memset(&M, 0, sizeof M);
    M.fail_at = -1;
    rs = capped_make("test.cap2", 8192, 0);
    for (int i = 0; i < 120; i++)
        ins(rs, 40 + rnd(300));
    eng_txn *t = tb();
    OK(eng_txn_commit(t, true, &ERR));
    eng_rs_close(rs);
    fx_reopen();
    rs = capped_open("test.cap2");
    expect_ring(rs);
    expect_valid(rs);
    eng_rs_close(rs);
}

CAPPED_TEST(valid_after_many_wraps_and_updates_in_place)
{
    fx_open(p);
    eng_rs *rs = capped_make("test.cap", 12288, 0);
    for (int i = 0; i < 1500; i++) {
        ins(rs, DOC_MIN + rnd(500));
        if (i % 10 == 0) {
            /* Same-size updates (all the query layer lets through). */
            int k = M.removed + (int)rnd((uint32_t)(M.n - M.removed));
            eng_txn *t = tb();
            eng_rid nr;
            bool moved;
            M.txn = t;
            OK(eng_rs_update(rs, t, M.rids[k], make_doc(M.lens[k], (uint32_t)k), M.lens[k],
                             &nr, &moved, &ERR));
            CHECK(!moved && nr == M.rids[k], "a same-size update moved");
            /* growth is refused on every engine (10003) */
            RC(eng_rs_update(rs, t, M.rids[k], make_doc(M.lens[k] + 8, (uint32_t)k),
                             M.lens[k] + 8, &nr, &moved, &ERR),
               MD_ENOTSUP);
            EQ(ERR.code, 10003);
            tc(t);
        }
        if (i % 150 == 0)
            expect_valid(rs);
    }
    expect_ring(rs);
    expect_valid(rs);
    eng_rs_close(rs);
}

CAPPED_TEST(ordinary_stores_are_not_capped)
{
    fx_open(p);
    eng_rs_options o = {0};
    eng_rs *rs;
    eng_txn *t = tb();
    OK(eng_rs_create(E, t, "test.plain", &o, &ERR));
    tc(t);
    OK(eng_rs_open(E, "test.plain", &rs, &ERR));
    memset(&M, 0, sizeof M);
    M.fail_at = -1;
    M.padded = true;
    eng_rs_set_capped_hook(rs, hook, &M);
    for (int i = 0; i < 300; i++)
        ins(rs, 100);
    EQ(M.hook_calls, 0);
    expect_ring(rs);
    eng_rs_close(rs);
}
