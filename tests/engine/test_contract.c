/*
 * test_contract.c -- the engine contract suite (engine/eng.h), written once
 * and run on every engine of eng_engines().
 *
 * Each test is a Criterion parameterized test over the registered engine
 * names; it opens the engine on a fresh mkdtemp directory (tiny files for
 * mmapv1) and removes it afterwards.  Failure messages start with the engine
 * name.  Ideas follow MongoDB's record_store_test_* and
 * sorted_data_interface_test_* conformance suites.
 *
 * Where engines legitimately differ the tests check the contract, not one
 * engine: RecordIds may change on update only when `moved` says so; sizes
 * are exact only for engines that do not pad records; persistence across
 * close/reopen is checked only for engines that persist.
 */
#define ENG_FX_DIR "/tmp/md_contract_XXXXXX"
#define ENG_FX_FIRST_FILE 131072
#include "test_eng_fixture.h"

/* ---- fixture ------------------------------------------------------------ */

/* Engines that keep their data across close and reopen. */
static bool persists(const eng_ops *o)
{
    return strcmp(o->name, "ephemeralForTest") != 0;
}

/* Engines whose natural order is insertion order even with records of
 * mixed sizes.  mmapv1's is extent order: a small record inserted late may
 * fill the leftover space of an earlier extent (as in MongoDB 3.0). */
static bool insertion_ordered(const eng_ops *o)
{
    return strcmp(o->name, "mmapv1") != 0;
}

/* Engines whose data_size / storage_size / ss_size count only payload. */
static bool exact_sizes(const eng_ops *o)
{
    return strcmp(o->name, "ephemeralForTest") == 0;
}

#define ENGINE_TEST(test) \
    ParameterizedTestParameters(contract, test) \
    { \
        return engine_params_of(NULL); \
    } \
    ParameterizedTest(eng_param *p, contract, test, .fini = fx_fini)

/* ---- helpers ------------------------------------------------------------ */

static uint64_t rng_state = 88172645463325252ull;
static uint32_t rnd(uint32_t n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

#define DOC_MIN 13
#define DOC_MAX 20000
static uint8_t DOC[DOC_MAX];

/* A valid BSON document of exactly len bytes, {p: BinData(0, payload)},
 * whose payload is a function of seed. */
static const uint8_t *make_doc(uint32_t len, uint32_t seed)
{
    cr_assert(len >= DOC_MIN && len <= DOC_MAX);
    uint32_t bin = len - DOC_MIN;
    memcpy(DOC, &len, 4); /* little-endian hosts only, like MongoDB 3.x */
    DOC[4] = 0x05, DOC[5] = 'p', DOC[6] = 0;
    memcpy(DOC + 7, &bin, 4);
    DOC[11] = 0;
    for (uint32_t i = 0; i < bin; i++)
        DOC[12 + i] = (uint8_t)(seed * 131u + i * 7u + (i >> 8));
    DOC[len - 1] = 0;
    return DOC;
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

static eng_rs *rs_make(const char *ident)
{
    eng_rs_options o = {0};
    eng_rs *rs = NULL;
    eng_txn *t = tb();
    OK(eng_rs_create(E, t, ident, &o, &ERR));
    tc(t);
    OK(eng_rs_open(E, ident, &rs, &ERR));
    return rs;
}

static eng_ss *ss_make(const char *ident)
{
    eng_ss *ss = NULL;
    eng_txn *t = tb();
    OK(eng_ss_create(E, t, ident, &ERR));
    tc(t);
    OK(eng_ss_open(E, ident, &ss, &ERR));
    return ss;
}

static eng_rid ins_t(eng_rs *rs, eng_txn *t, uint32_t len, uint32_t seed)
{
    eng_rid rid = ENG_RID_NONE;
    OK(eng_rs_insert(rs, t, make_doc(len, seed), len, &rid, &ERR));
    CHECK(rid != ENG_RID_NONE, "insert returned RecordId 0");
    return rid;
}

static eng_rid ins(eng_rs *rs, uint32_t len, uint32_t seed)
{
    eng_txn *t = tb();
    eng_rid rid = ins_t(rs, t, len, seed);
    tc(t);
    return rid;
}

static bool doc_is(const uint8_t *data, uint32_t len, uint32_t want_len, uint32_t seed)
{
    return len == want_len && memcmp(data, make_doc(want_len, seed), len) == 0;
}

static void expect_rec(eng_rs *rs, eng_rid rid, uint32_t len, uint32_t seed)
{
    const uint8_t *d;
    uint32_t l;
    OK(eng_rs_get(rs, rid, &d, &l));
    CHECK(doc_is(d, l, len, seed), "record %lld: %u bytes, want %u bytes of seed %u",
          (long long)rid, l, len, seed);
}

/* Through the operations table, as eng_rs_stats() does: in this version of
 * eng.h the wrapper's name clashes with the struct's typedef. */
static void rs_stat(eng_rs *rs, struct eng_rs_stats *s)
{
    memset(s, 0, sizeof *s);
    rs->engine->ops->rs_stats(rs, s);
}

static int rid_cmp(const void *a, const void *b)
{
    eng_rid x = *(const eng_rid *)a, y = *(const eng_rid *)b;
    return x < y ? -1 : x > y;
}

/* Scan a record store; returns the number of records, rids into out. */
static size_t rs_scan(eng_rs *rs, bool forward, eng_rid *out, size_t max)
{
    eng_rs_cursor *c;
    eng_rid rid;
    const uint8_t *d;
    uint32_t l;
    size_t n = 0;
    int rc;
    OK(eng_rs_cursor_open(rs, forward, &c));
    while ((rc = eng_rs_cursor_next(c, &rid, &d, &l)) == 0) {
        CHECK(n < max, "cursor returned more than %zu records", max);
        out[n++] = rid;
    }
    RC(rc, MD_NOTFOUND);
    eng_rs_cursor_close(c);
    return n;
}

/* Forward and reverse scans return each of rids[0..n) exactly once, the
 * reverse scan in the opposite order; and in insertion order where the
 * engine promises it (or `same_size`: equal records never reorder). */
static void expect_scans(eng_rs *rs, const eng_rid *rids, size_t n, bool same_size)
{
    eng_rid *fwd = calloc(n + 1, sizeof *fwd), *rev = calloc(n + 1, sizeof *rev);
    bool exact = same_size || insertion_ordered(OPS);
    EQ(rs_scan(rs, true, fwd, n + 1), n);
    EQ(rs_scan(rs, false, rev, n + 1), n);
    for (size_t i = 0; i < n; i++) {
        CHECK(fwd[i] == rev[n - 1 - i], "reverse scan position %zu differs", n - 1 - i);
        if (exact)
            CHECK(fwd[i] == rids[i], "forward position %zu is %llx, want insert %zu (%llx)", i,
                  (unsigned long long)fwd[i], i, (unsigned long long)rids[i]);
    }
    if (!exact) {
        eng_rid *a = malloc(n * sizeof *a);
        memcpy(a, rids, n * sizeof *a);
        qsort(a, n, sizeof *a, rid_cmp);
        qsort(fwd, n, sizeof *fwd, rid_cmp);
        for (size_t i = 0; i < n; i++)
            CHECK(fwd[i] == a[i], "scan and inserted RecordIds differ at sorted position %zu", i);
        free(a);
    }
    free(fwd);
    free(rev);
}

static char *validate_errors(eng_validate *v)
{
    return bson_as_relaxed_extended_json(&v->errors, NULL);
}

/* Validate (if the engine can); nrecords < 0 skips that check. */
static void expect_valid_rs(eng_rs *rs, int64_t nrecords)
{
    eng_validate v;
    bson_iter_t it;
    eng_validate_init(&v, true);
    int rc = eng_rs_validate(rs, &v);
    if (rc != MD_ENOTSUP) {
        char *errs = validate_errors(&v);
        CHECK(rc == 0 && v.nerrors == 0, "rs_validate: %s, errors %s", md_strerror(rc), errs);
        bson_free(errs);
        if (nrecords >= 0 && bson_iter_init_find(&it, &v.info, "nrecords"))
            EQ(bson_iter_as_int64(&it), nrecords);
    }
    eng_validate_cleanup(&v);
}

static void expect_valid_ss(eng_ss *ss)
{
    eng_validate v;
    eng_validate_init(&v, true);
    int rc = eng_ss_validate(ss, &v);
    if (rc != MD_ENOTSUP) {
        char *errs = validate_errors(&v);
        CHECK(rc == 0 && v.nerrors == 0, "ss_validate: %s, errors %s", md_strerror(rc), errs);
        bson_free(errs);
    }
    eng_validate_cleanup(&v);
}

/* A sorted-store entry of the model. */
typedef struct ent {
    uint8_t key[16];
    uint32_t klen;
    eng_rid rid;
} ent;

static int ent_cmp(const void *a, const void *b)
{
    const ent *x = a, *y = b;
    return eng_key_cmp(x->key, x->klen, x->rid, y->key, y->klen, y->rid);
}

#define K(s) (const uint8_t *)(s), (uint32_t)strlen(s)

static void ss_ins(eng_ss *ss, const uint8_t *key, uint32_t klen, eng_rid rid)
{
    eng_txn *t = tb();
    OK(eng_ss_insert(ss, t, key, klen, rid, false, NULL, &ERR));
    tc(t);
}

static void ss_rem(eng_ss *ss, const uint8_t *key, uint32_t klen, eng_rid rid)
{
    eng_txn *t = tb();
    OK(eng_ss_remove(ss, t, key, klen, rid));
    tc(t);
}

/* The cursor is on (key, rid). */
static void expect_at(eng_ss_cursor *c, const char *key, eng_rid rid)
{
    const uint8_t *k;
    uint32_t kl;
    eng_rid r;
    OK(eng_ss_cursor_get(c, &k, &kl, &r));
    CHECK(kl == strlen(key) && memcmp(k, key, kl) == 0 && r == rid,
          "cursor at (%.*s, %lld), want (%s, %lld)", (int)kl, (const char *)k, (long long)r,
          key, (long long)rid);
}

static void expect_off_end(eng_ss_cursor *c)
{
    const uint8_t *k;
    uint32_t kl;
    eng_rid r;
    RC(eng_ss_cursor_get(c, &k, &kl, &r), MD_NOTFOUND);
}

/* Scan a sorted store forward, then backward from past the right end, and
 * compare both with the model m[0..n). */
static void expect_ss_equals(eng_ss *ss, const ent *m, size_t n)
{
    eng_ss_cursor *c;
    const uint8_t *k;
    uint32_t kl;
    eng_rid r;
    EQ(eng_ss_entries(ss), n);
    OK(eng_ss_cursor_open(ss, &c));
    RC(eng_ss_cursor_seek(c, (const uint8_t *)"", 0, ENG_RID_NONE), n ? 0 : MD_NOTFOUND);
    for (size_t i = 0; i < n; i++) {
        OK(eng_ss_cursor_get(c, &k, &kl, &r));
        CHECK(kl == m[i].klen && memcmp(k, m[i].key, kl) == 0 && r == m[i].rid,
              "forward entry %zu: rid %lld klen %u, want rid %lld klen %u", i, (long long)r,
              kl, (long long)m[i].rid, m[i].klen);
        RC(eng_ss_cursor_next(c), i + 1 < n ? 0 : MD_NOTFOUND);
    }
    expect_off_end(c);
    for (size_t i = n; i-- > 0;) {
        OK(eng_ss_cursor_prev(c));
        OK(eng_ss_cursor_get(c, &k, &kl, &r));
        CHECK(kl == m[i].klen && memcmp(k, m[i].key, kl) == 0 && r == m[i].rid,
              "backward entry %zu: rid %lld, want %lld", i, (long long)r,
              (long long)m[i].rid);
    }
    RC(eng_ss_cursor_prev(c), MD_NOTFOUND);
    expect_off_end(c);
    eng_ss_cursor_close(c);
}

/* ---- record stores ------------------------------------------------------ */

ENGINE_TEST(rs_insert_get_roundtrip)
{
    fx_open(p);
    eng_rs *rs = rs_make("test.c");
    static const uint32_t lens[] = {13, 14, 100, 1000, 4096, 20000};
    eng_rid rids[6];
    eng_txn *t = tb();
    for (uint32_t i = 0; i < 6; i++) {
        rids[i] = ins_t(rs, t, lens[i], i);
        expect_rec(rs, rids[i], lens[i], i); /* read your own write */
    }
    tc(t);
    for (uint32_t i = 0; i < 6; i++) {
        for (uint32_t j = 0; j < i; j++)
            CHECK(rids[i] != rids[j], "RecordIds %u and %u are equal", i, j);
        expect_rec(rs, rids[i], lens[i], i);
    }
    eng_rs_close(rs);
}

ENGINE_TEST(rs_many_inserts)
{
    enum { N = 3000 };
    static eng_rid rids[N];
    static uint32_t lens[N];
    fx_open(p);
    eng_rs *rs = rs_make("test.many");
    for (int b = 0; b < N; b += 100) {
        eng_txn *t = tb();
        for (int i = b; i < b + 100; i++) {
            lens[i] = DOC_MIN + rnd(700);
            rids[i] = ins_t(rs, t, lens[i], (uint32_t)i);
        }
        tc(t);
    }
    for (int i = 0; i < N; i++)
        expect_rec(rs, rids[i], lens[i], (uint32_t)i);
    struct eng_rs_stats s;
    rs_stat(rs, &s);
    EQ(s.count, N);
    EQ(s.n_inserts, N);
    expect_scans(rs, rids, N, false);
    expect_valid_rs(rs, N);
    eng_rs_close(rs);
}

ENGINE_TEST(rs_get_removed_notfound)
{
    fx_open(p);
    eng_rs *rs = rs_make("test.c");
    eng_rid a = ins(rs, 50, 1), b = ins(rs, 60, 2), c = ins(rs, 70, 3);
    eng_txn *t = tb();
    OK(eng_rs_remove(rs, t, b));
    const uint8_t *d;
    uint32_t l;
    RC(eng_rs_get(rs, b, &d, &l), MD_NOTFOUND);
    RC(eng_rs_remove(rs, t, b), MD_NOTFOUND);
    tc(t);
    RC(eng_rs_get(rs, b, &d, &l), MD_NOTFOUND);
    expect_rec(rs, a, 50, 1);
    expect_rec(rs, c, 70, 3);
    struct eng_rs_stats s;
    rs_stat(rs, &s);
    EQ(s.count, 2);
    expect_valid_rs(rs, 2);
    eng_rs_close(rs);
}

/* An update keeps the RecordId unless the engine says it moved the record. */
static eng_rid upd(eng_rs *rs, eng_rid rid, uint32_t len, uint32_t seed, bool *moved_out)
{
    eng_rid nr = ENG_RID_NONE;
    bool moved = true;
    const uint8_t *d;
    uint32_t l;
    eng_txn *t = tb();
    OK(eng_rs_update(rs, t, rid, make_doc(len, seed), len, &nr, &moved, &ERR));
    CHECK(nr != ENG_RID_NONE, "update returned RecordId 0");
    CHECK(moved == (nr != rid), "moved=%d but RecordId %lld -> %lld", moved, (long long)rid,
          (long long)nr);
    expect_rec(rs, nr, len, seed);
    tc(t);
    expect_rec(rs, nr, len, seed);
    if (moved)
        RC(eng_rs_get(rs, rid, &d, &l), MD_NOTFOUND);
    if (moved_out)
        *moved_out = moved;
    return nr;
}

ENGINE_TEST(rs_update_inplace_and_growing)
{
    fx_open(p);
    eng_rs *rs = rs_make("test.c");
    eng_rid a = ins(rs, 200, 1), b = ins(rs, 200, 2), c = ins(rs, 200, 3);
    b = upd(rs, b, 200, 20, NULL);  /* same size */
    b = upd(rs, b, 150, 21, NULL);  /* shrink */
    b = upd(rs, b, 6000, 22, NULL); /* grow well past any padding */
    b = upd(rs, b, 190, 23, NULL);  /* shrink again */
    expect_rec(rs, a, 200, 1);
    expect_rec(rs, c, 200, 3);
    struct eng_rs_stats s;
    rs_stat(rs, &s);
    EQ(s.count, 3);
    EQ(s.n_inserts, 3);
    EQ(s.n_updates, 4);
    EQ(s.n_inplace + s.n_moves, s.n_updates);
    EQ(s.bytes_written, 3 * 200 + 200 + 150 + 6000 + 190);
    eng_rid rids[4];
    EQ(rs_scan(rs, true, rids, 4), 3);
    expect_valid_rs(rs, 3);
    eng_rs_close(rs);
}

ENGINE_TEST(rs_update_counters_add_up)
{
    enum { N = 200, U = 1000 };
    eng_rid rids[N];
    uint32_t lens[N], seeds[N];
    int64_t written = 0, moves = 0;
    fx_open(p);
    eng_rs *rs = rs_make("test.c");
    for (int i = 0; i < N; i++) {
        lens[i] = DOC_MIN + rnd(300);
        seeds[i] = (uint32_t)i;
        rids[i] = ins(rs, lens[i], seeds[i]);
        written += lens[i];
    }
    for (int u = 0; u < U; u++) {
        int i = (int)rnd(N);
        bool moved;
        lens[i] = DOC_MIN + rnd(u % 3 ? 400 : 3000);
        seeds[i] = (uint32_t)(1000 + u);
        rids[i] = upd(rs, rids[i], lens[i], seeds[i], &moved);
        written += lens[i];
        moves += moved;
    }
    for (int i = 0; i < N; i++)
        expect_rec(rs, rids[i], lens[i], seeds[i]);
    struct eng_rs_stats s;
    rs_stat(rs, &s);
    EQ(s.count, N);
    EQ(s.n_updates, U);
    EQ(s.n_moves, moves);
    EQ(s.n_inplace, U - moves);
    EQ(s.bytes_written, written);
    if (OPS->total_moves)
        CHECK(OPS->total_moves(E) >= moves, "total_moves %lld < %lld",
              (long long)OPS->total_moves(E), (long long)moves);
    expect_valid_rs(rs, N);
    eng_rs_close(rs);
}

ENGINE_TEST(rs_update_damages_patches_exactly)
{
    fx_open(p);
    eng_rs *rs = rs_make("test.c");
    eng_rid a = ins(rs, 64, 1), b = ins(rs, 64, 2);
    static const eng_damage d[] = {{12, 12, 4}, {30, 40, 5}, {62, 62, 1}};
    uint8_t want[64], src[64];
    memcpy(want, make_doc(64, 1), 64);
    memcpy(src, make_doc(64, 9), 64);
    eng_txn *t = tb();
    if (!eng_rs_has_damages(rs)) {
        RC(eng_rs_update_damages(rs, t, a, src, d, 3, &ERR), MD_ENOTSUP);
        tc(t);
        eng_rs_close(rs);
        return;
    }
    struct eng_rs_stats s0, s1;
    rs_stat(rs, &s0);
    OK(eng_rs_update_damages(rs, t, a, src, d, 3, &ERR));
    tc(t);
    for (int k = 0; k < 3; k++)
        memcpy(want + d[k].dst_ofs, src + d[k].src_ofs, d[k].len);
    const uint8_t *got;
    uint32_t l;
    OK(eng_rs_get(rs, a, &got, &l));
    EQ(l, 64);
    for (int i = 0; i < 64; i++)
        CHECK(got[i] == want[i], "byte %d is %02x, want %02x", i, got[i], want[i]);
    expect_rec(rs, b, 64, 2);
    rs_stat(rs, &s1);
    EQ(s1.n_updates, s0.n_updates + 1);
    EQ(s1.n_inplace, s0.n_inplace + 1);
    EQ(s1.n_moves, s0.n_moves);
    EQ(s1.bytes_written, s0.bytes_written + 4 + 5 + 1);
    EQ(s1.data_size, s0.data_size);
    eng_rs_close(rs);
}

ENGINE_TEST(rs_remove_and_sizes)
{
    enum { N = 30 };
    eng_rid rids[N];
    uint32_t lens[N];
    int64_t live = 0;
    fx_open(p);
    eng_rs *rs = rs_make("test.c");
    struct eng_rs_stats s;
    rs_stat(rs, &s);
    EQ(s.count, 0);
    EQ(s.data_size, 0);
    for (int i = 0; i < N; i++) {
        lens[i] = DOC_MIN + 37u * (uint32_t)i;
        rids[i] = ins(rs, lens[i], (uint32_t)i);
        live += lens[i];
    }
    rs_stat(rs, &s);
    EQ(s.count, N);
    if (exact_sizes(OPS))
        EQ(s.data_size, live);
    CHECK(s.data_size >= live, "data_size %lld < %lld", (long long)s.data_size,
          (long long)live);
    /* Compressing engines may store less than data_size: only require that
     * a non-empty store reports some storage. */
    CHECK(s.storage_size > 0, "storage_size %lld for %d records", (long long)s.storage_size, N);
    int64_t before = s.data_size;
    eng_txn *t = tb();
    for (int i = 0; i < N; i += 3) {
        OK(eng_rs_remove(rs, t, rids[i]));
        live -= lens[i];
    }
    tc(t);
    rs_stat(rs, &s);
    EQ(s.count, N - (N + 2) / 3);
    CHECK(s.data_size < before, "data_size did not shrink after removes");
    if (exact_sizes(OPS))
        EQ(s.data_size, live);
    for (int i = 0; i < N; i++) {
        const uint8_t *d;
        uint32_t l;
        if (i % 3 == 0)
            RC(eng_rs_get(rs, rids[i], &d, &l), MD_NOTFOUND);
        else
            expect_rec(rs, rids[i], lens[i], (uint32_t)i);
    }
    t = tb();
    for (int i = 0; i < N; i++)
        if (i % 3)
            OK(eng_rs_remove(rs, t, rids[i]));
    tc(t);
    rs_stat(rs, &s);
    EQ(s.count, 0);
    EQ(s.data_size, 0);
    expect_valid_rs(rs, 0);
    eng_rs_close(rs);
}

ENGINE_TEST(rs_truncate)
{
    eng_rid rids[60];
    fx_open(p);
    eng_rs *rs = rs_make("test.c");
    eng_rs *other = rs_make("test.d");
    eng_rid keep = ins(other, 100, 7);
    for (int i = 0; i < 50; i++)
        rids[i] = ins(rs, 100 + (uint32_t)i, (uint32_t)i);
    eng_txn *t = tb();
    OK(eng_rs_truncate(rs, t));
    tc(t);
    struct eng_rs_stats s;
    rs_stat(rs, &s);
    EQ(s.count, 0);
    EQ(s.data_size, 0);
    EQ(rs_scan(rs, true, rids + 50, 10), 0);
    EQ(rs_scan(rs, false, rids + 50, 10), 0);
    eng_rid r = ins(rs, 80, 99);
    expect_rec(rs, r, 80, 99);
    EQ(rs_scan(rs, true, rids + 50, 10), 1);
    EQ(rids[50], r);
    expect_rec(other, keep, 100, 7);
    expect_valid_rs(rs, 1);
    eng_rs_close(rs);
    eng_rs_close(other);
}

ENGINE_TEST(rs_cursor_order)
{
    enum { N = 500 };
    eng_rid rids[N], seen[N];
    fx_open(p);
    eng_rs *rs = rs_make("test.c");
    EQ(rs_scan(rs, true, seen, N), 0);
    EQ(rs_scan(rs, false, seen, N), 0);
    eng_txn *t = tb();
    for (int i = 0; i < N; i++)
        rids[i] = ins_t(rs, t, 200, (uint32_t)i);
    tc(t);
    expect_scans(rs, rids, N, true);
    /* Mixed sizes in a second store. */
    eng_rs *mixed = rs_make("test.mixed");
    t = tb();
    for (int i = 0; i < N; i++)
        rids[i] = ins_t(mixed, t, DOC_MIN + rnd(500), (uint32_t)i);
    tc(t);
    expect_scans(mixed, rids, N, false);
    eng_rs_close(mixed);
    /* The data a cursor shows is the record's. */
    eng_rs_cursor *c;
    eng_rid rid;
    const uint8_t *d, *g;
    uint32_t l, gl;
    OK(eng_rs_cursor_open(rs, true, &c));
    while (eng_rs_cursor_next(c, &rid, &d, &l) == 0) {
        OK(eng_rs_get(rs, rid, &g, &gl));
        CHECK(l == gl && memcmp(d, g, l) == 0, "cursor data differs from get");
    }
    eng_rs_cursor_close(c);
    eng_rs_close(rs);
}

/* Read `k` records, save, remove record `victim` (an index into rids in
 * cursor order), restore, and check the rest of the scan skips it. */
static void save_remove_restore(eng_rs *rs, bool forward, const eng_rid *order, int n, int k,
                                int victim)
{
    eng_rs_cursor *c;
    eng_rid rid;
    const uint8_t *d;
    uint32_t l;
    OK(eng_rs_cursor_open(rs, forward, &c));
    for (int i = 0; i < k; i++) {
        OK(eng_rs_cursor_next(c, &rid, &d, &l));
        EQ(rid, order[i]);
    }
    eng_rs_cursor_save(c);
    eng_txn *t = tb();
    OK(eng_rs_remove(rs, t, order[victim]));
    tc(t);
    OK(eng_rs_cursor_restore(c));
    for (int i = k; i < n; i++) {
        if (i == victim)
            continue;
        OK(eng_rs_cursor_next(c, &rid, &d, &l));
        CHECK(rid == order[i], "after restore got %lld, want %lld (position %d)",
              (long long)rid, (long long)order[i], i);
    }
    RC(eng_rs_cursor_next(c, &rid, &d, &l), MD_NOTFOUND);
    eng_rs_cursor_close(c);
}

ENGINE_TEST(rs_cursor_save_restore_skips_removed)
{
    eng_rid rids[20], rev[20];
    fx_open(p);
    eng_rs *rs = rs_make("test.c");
    for (int i = 0; i < 20; i++)
        rids[i] = ins(rs, 100, (uint32_t)i);
    save_remove_restore(rs, true, rids, 20, 3, 3);  /* the next record */
    /* rids[3] is gone: the order is now rids without it */
    memmove(rids + 3, rids + 4, 16 * sizeof *rids);
    save_remove_restore(rs, true, rids, 19, 5, 4);  /* the current record */
    memmove(rids + 4, rids + 5, 14 * sizeof *rids);
    for (int i = 0; i < 18; i++)
        rev[i] = rids[17 - i];
    save_remove_restore(rs, false, rev, 18, 2, 2);  /* reverse, next */
    memmove(rev + 2, rev + 3, 15 * sizeof *rev);
    save_remove_restore(rs, false, rev, 17, 4, 3);  /* reverse, current */
    expect_valid_rs(rs, 16);
    eng_rs_close(rs);
}

ENGINE_TEST(rs_cursor_save_restore_across_growing_update)
{
    enum { N = 12 };
    eng_rid rids[N], nr;
    bool moved, seen_upd = false;
    int seen[N] = {0};
    fx_open(p);
    eng_rs *rs = rs_make("test.c");
    for (int i = 0; i < N; i++)
        rids[i] = ins(rs, 100, (uint32_t)i);
    eng_rs_cursor *c;
    eng_rid rid;
    const uint8_t *d;
    uint32_t l;
    OK(eng_rs_cursor_open(rs, true, &c));
    for (int i = 0; i < 4; i++) {
        OK(eng_rs_cursor_next(c, &rid, &d, &l));
        EQ(rid, rids[i]);
        seen[i]++;
    }
    eng_rs_cursor_save(c);
    eng_txn *t = tb();
    OK(eng_rs_update(rs, t, rids[4], make_doc(5000, 77), 5000, &nr, &moved, &ERR));
    tc(t);
    OK(eng_rs_cursor_restore(c));
    while (eng_rs_cursor_next(c, &rid, &d, &l) == 0) {
        if (rid == nr) {
            CHECK(!seen_upd, "updated record returned twice");
            CHECK(doc_is(d, l, 5000, 77), "updated record has stale data");
            seen_upd = true;
            continue;
        }
        int i = 0;
        while (i < N && rids[i] != rid)
            i++;
        CHECK(i < N && i != 4, "cursor returned unknown RecordId %lld", (long long)rid);
        seen[i]++;
    }
    for (int i = 0; i < N; i++)
        CHECK(i == 4 || seen[i] == 1, "record %d seen %d times", i, seen[i]);
    CHECK(moved || seen_upd, "record updated in place was skipped");
    eng_rs_cursor_close(c);
    eng_rs_close(rs);
}

ENGINE_TEST(rs_stores_are_independent)
{
    eng_rid x[10], y[10], seen[20];
    fx_open(p);
    eng_rs *a = rs_make("test.a"), *b = rs_make("test.b");
    for (int i = 0; i < 10; i++) {
        x[i] = ins(a, 40, (uint32_t)i);
        y[i] = ins(b, 50, 100 + (uint32_t)i);
    }
    EQ(rs_scan(a, true, seen, 20), 10);
    for (int i = 0; i < 10; i++)
        EQ(seen[i], x[i]);
    EQ(rs_scan(b, true, seen, 20), 10);
    for (int i = 0; i < 10; i++)
        EQ(seen[i], y[i]);
    eng_txn *t = tb();
    OK(eng_rs_truncate(a, t));
    tc(t);
    for (int i = 0; i < 10; i++)
        expect_rec(b, y[i], 50, 100 + (uint32_t)i);
    eng_rs_close(a);
    eng_rs_close(b);
}

ENGINE_TEST(rs_compact_keeps_records)
{
    enum { N = 100 };
    eng_rid rids[N];
    int found[N] = {0};
    fx_open(p);
    eng_rs *rs = rs_make("test.c");
    for (int i = 0; i < N; i++)
        rids[i] = ins(rs, DOC_MIN + 20u * (uint32_t)i, (uint32_t)i);
    eng_txn *t = tb();
    for (int i = 0; i < N; i += 2)
        OK(eng_rs_remove(rs, t, rids[i]));
    tc(t);
    eng_compact_opts o = {.padding = ENG_PAD_NONE};
    bson_t info = BSON_INITIALIZER;
    t = tb();
    int rc = eng_rs_compact(rs, t, &o, &info, &ERR);
    bson_destroy(&info);
    if (rc == MD_ENOTSUP) {
        eng_txn_abort(t);
        eng_rs_close(rs);
        return;
    }
    OK(rc);
    tc(t);
    eng_rs_cursor *c;
    eng_rid rid;
    const uint8_t *d;
    uint32_t l;
    OK(eng_rs_cursor_open(rs, true, &c));
    while (eng_rs_cursor_next(c, &rid, &d, &l) == 0) {
        int i = (int)((l - DOC_MIN) / 20);
        CHECK(i < N && i % 2 && doc_is(d, l, DOC_MIN + 20u * (uint32_t)i, (uint32_t)i),
              "compacted record %lld is not a live document", (long long)rid);
        found[i]++;
    }
    eng_rs_cursor_close(c);
    for (int i = 1; i < N; i += 2)
        CHECK(found[i] == 1, "record %d found %d times after compact", i, found[i]);
    expect_valid_rs(rs, N / 2);
    eng_rs_close(rs);
}

/* ---- transactions ------------------------------------------------------- */

ENGINE_TEST(txn_abort_undoes_record_store_changes)
{
    enum { N = 8 };
    eng_rid rids[N], seen[N + 8], nr;
    bool moved;
    fx_open(p);
    eng_rs *rs = rs_make("test.c");
    for (int i = 0; i < N; i++)
        rids[i] = ins(rs, 100, (uint32_t)i);
    struct eng_rs_stats s0, s1;
    rs_stat(rs, &s0);

    eng_txn *t = tb();
    for (int i = 0; i < 5; i++)
        ins_t(rs, t, 300, 50 + (uint32_t)i);
    OK(eng_rs_update(rs, t, rids[1], make_doc(100, 60), 100, &nr, &moved, &ERR));
    OK(eng_rs_update(rs, t, rids[2], make_doc(4000, 61), 4000, &nr, &moved, &ERR));
    OK(eng_rs_update(rs, t, nr, make_doc(100, 62), 100, &nr, &moved, &ERR));
    OK(eng_rs_remove(rs, t, rids[5]));
    if (eng_rs_has_damages(rs)) {
        eng_damage d = {20, 20, 30};
        OK(eng_rs_update_damages(rs, t, rids[6], make_doc(100, 63), &d, 1, &ERR));
    }
    eng_txn_abort(t);

    for (int i = 0; i < N; i++)
        expect_rec(rs, rids[i], 100, (uint32_t)i);
    EQ(rs_scan(rs, true, seen, N + 8), N);
    for (int i = 0; i < N; i++)
        EQ(seen[i], rids[i]);
    rs_stat(rs, &s1);
    EQ(s1.count, s0.count);
    EQ(s1.data_size, s0.data_size);
    expect_valid_rs(rs, N);
    /* The store still works after the abort. */
    eng_rid r = ins(rs, 70, 70);
    expect_rec(rs, r, 70, 70);
    eng_rs_close(rs);
}

ENGINE_TEST(txn_abort_undoes_truncate)
{
    eng_rid rids[40], seen[40];
    fx_open(p);
    eng_rs *rs = rs_make("test.c");
    eng_ss *ss = ss_make("test.c.$x_1");
    for (int i = 0; i < 40; i++) {
        rids[i] = ins(rs, 64, (uint32_t)i);
        ss_ins(ss, (const uint8_t *)&i, sizeof i, rids[i]);
    }
    eng_txn *t = tb();
    OK(eng_rs_truncate(rs, t));
    OK(eng_ss_truncate(ss, t));
    ins_t(rs, t, 64, 999);
    OK(eng_ss_insert(ss, t, K("zz"), 5, false, NULL, &ERR));
    eng_txn_abort(t);
    EQ(rs_scan(rs, true, seen, 40), 40);
    for (int i = 0; i < 40; i++) {
        EQ(seen[i], rids[i]);
        expect_rec(rs, rids[i], 64, (uint32_t)i);
    }
    ent m[40];
    for (int i = 0; i < 40; i++) {
        memcpy(m[i].key, &i, sizeof i);
        m[i].klen = sizeof i;
        m[i].rid = rids[i];
    }
    qsort(m, 40, sizeof *m, ent_cmp);
    expect_ss_equals(ss, m, 40);
    eng_rs_close(rs);
    eng_ss_close(ss);
}

ENGINE_TEST(txn_abort_undoes_sorted_store_changes)
{
    static const char *keys[] = {"apple", "banana", "cherry", "date", "elder"};
    ent m[5];
    fx_open(p);
    eng_ss *ss = ss_make("test.c.$x_1");
    for (int i = 0; i < 5; i++) {
        ss_ins(ss, K(keys[i]), 10 + i);
        m[i].klen = (uint32_t)strlen(keys[i]);
        memcpy(m[i].key, keys[i], m[i].klen);
        m[i].rid = 10 + i;
    }
    int64_t size0 = eng_ss_size(ss);
    eng_txn *t = tb();
    OK(eng_ss_insert(ss, t, K("avocado"), 1, false, NULL, &ERR));
    OK(eng_ss_insert(ss, t, K("cherry"), 99, false, NULL, &ERR));
    OK(eng_ss_remove(ss, t, K("banana"), 11));
    OK(eng_ss_remove(ss, t, K("elder"), 14));
    OK(eng_ss_insert(ss, t, K("elder"), 15, true, NULL, &ERR));
    eng_txn_abort(t);
    expect_ss_equals(ss, m, 5);
    EQ(eng_ss_size(ss), size0);
    expect_valid_ss(ss);
    eng_ss_close(ss);
}

/* Catalog listing: checks the key order of every entry and keeps those
 * under "test.cat." (entries an engine may keep for itself are ignored). */
struct meta_seen {
    int n;
    char keys[16][32];
    char last[ENG_IDENT_MAX];
};

static int meta_collect(void *ctx, const char *key, const bson_t *value)
{
    struct meta_seen *s = ctx;
    CHECK(strcmp(s->last, key) < 0 || !s->last[0], "list: %s after %s", key, s->last);
    snprintf(s->last, sizeof s->last, "%s", key);
    if (strncmp(key, "test.cat.", 9) != 0)
        return 0;
    if (s->n < 16)
        snprintf(s->keys[s->n], sizeof s->keys[0], "%s", key);
    s->n++;
    return 0;
}

static void expect_meta_int(const char *key, int want)
{
    bson_t out;
    bson_iter_t it;
    OK(eng_meta_get(E, key, &out));
    CHECK(bson_iter_init_find(&it, &out, "v") && bson_iter_as_int64(&it) == want,
          "catalog %s: v != %d", key, want);
    bson_destroy(&out);
}

static void meta_put_int(eng_txn *t, const char *key, int v)
{
    bson_t *doc = BCON_NEW("v", BCON_INT32(v));
    OK(eng_meta_put(E, t, key, doc, &ERR));
    bson_destroy(doc);
}

ENGINE_TEST(txn_abort_undoes_catalog_changes)
{
    fx_open(p);
    eng_txn *t = tb();
    meta_put_int(t, "test.cat.a", 1);
    meta_put_int(t, "test.cat.b", 2);
    meta_put_int(t, "test.cat.c", 3);
    OK(eng_rs_create(E, t, "test.keep", &(eng_rs_options){0}, &ERR));
    OK(eng_rs_create(E, t, "test.gone", &(eng_rs_options){0}, &ERR));
    OK(eng_ss_create(E, t, "test.keep.$x_1", &ERR));
    tc(t);
    eng_rs *keep;
    OK(eng_rs_open(E, "test.keep", &keep, &ERR));
    eng_rid r = ins(keep, 100, 5);
    eng_rs_close(keep);

    t = tb();
    meta_put_int(t, "test.cat.a", 100);     /* overwrite */
    OK(eng_meta_del(E, t, "test.cat.b"));   /* delete */
    meta_put_int(t, "test.cat.new", 4);     /* insert */
    OK(eng_meta_del(E, t, "test.cat.new")); /* and delete again */
    meta_put_int(t, "test.cat.new2", 5);
    OK(eng_rs_drop(E, t, "test.keep"));
    OK(eng_rs_drop(E, t, "test.gone"));
    OK(eng_rs_create(E, t, "test.gone", &(eng_rs_options){0}, &ERR)); /* re-create */
    OK(eng_rs_create(E, t, "test.fresh", &(eng_rs_options){0}, &ERR));
    OK(eng_ss_drop(E, t, "test.keep.$x_1"));
    OK(eng_ss_create(E, t, "test.fresh.$x_1", &ERR));
    eng_txn_abort(t);

    expect_meta_int("test.cat.a", 1);
    expect_meta_int("test.cat.b", 2);
    expect_meta_int("test.cat.c", 3);
    bson_t out;
    RC(eng_meta_get(E, "test.cat.new", &out), MD_NOTFOUND);
    RC(eng_meta_get(E, "test.cat.new2", &out), MD_NOTFOUND);
    struct meta_seen s = {0};
    OK(eng_meta_list(E, meta_collect, &s));
    EQ(s.n, 3);
    eng_rs *rs;
    eng_ss *ss;
    OK(eng_rs_open(E, "test.keep", &rs, &ERR));
    expect_rec(rs, r, 100, 5);
    eng_rs_close(rs);
    OK(eng_rs_open(E, "test.gone", &rs, &ERR));
    eng_rs_close(rs);
    RC(eng_rs_open(E, "test.fresh", &rs, &ERR), MD_NOTFOUND);
    OK(eng_ss_open(E, "test.keep.$x_1", &ss, &ERR));
    eng_ss_close(ss);
    RC(eng_ss_open(E, "test.fresh.$x_1", &ss, &ERR), MD_NOTFOUND);
    /* The names freed by the abort can be created again. */
    t = tb();
    OK(eng_rs_create(E, t, "test.fresh", &(eng_rs_options){0}, &ERR));
    tc(t);
}

/* ---- catalog ------------------------------------------------------------ */

static int meta_count(void *ctx, const char *key, const bson_t *value)
{
    ++*(int *)ctx;
    return 0;
}

static int meta_stop_after_two(void *ctx, const char *key, const bson_t *value)
{
    return ++*(int *)ctx == 2;
}

ENGINE_TEST(meta_put_get_del_list)
{
    static const char *keys[] = {"test.cat.m", "test.cat.b", "test.cat.z", "test.cat.a", "test.cat.a.$x_1",
                                 "test.cat.k"};
    static const char *sorted[] = {"test.cat.a", "test.cat.a.$x_1", "test.cat.b", "test.cat.k", "test.cat.m",
                                   "test.cat.z"};
    fx_open(p);
    bson_t out;
    RC(eng_meta_get(E, "test.cat.a", &out), MD_NOTFOUND);
    eng_txn *t = tb();
    for (int i = 0; i < 6; i++)
        meta_put_int(t, keys[i], i);
    tc(t);
    for (int i = 0; i < 6; i++)
        expect_meta_int(keys[i], i);
    struct meta_seen s = {0};
    OK(eng_meta_list(E, meta_collect, &s));
    EQ(s.n, 6);
    for (int i = 0; i < 6; i++)
        CHECK(strcmp(s.keys[i], sorted[i]) == 0, "list entry %d is %s, want %s", i,
              s.keys[i], sorted[i]);
    int visited = 0;
    eng_meta_list(E, meta_stop_after_two, &visited);
    EQ(visited, 2);
    s.n = 0;
    s.last[0] = 0;

    /* A richer value survives byte for byte. */
    bson_t *spec = BCON_NEW("v", BCON_INT32(2), "key", "{", "x", BCON_INT32(1), "}", "name",
                            BCON_UTF8("x_1"), "unique", BCON_BOOL(true));
    t = tb();
    OK(eng_meta_put(E, t, "test.cat.k", spec, &ERR));
    OK(eng_meta_del(E, t, "test.cat.m"));
    tc(t);
    OK(eng_meta_get(E, "test.cat.k", &out));
    CHECK(bson_equal(&out, spec), "catalog value changed");
    bson_destroy(&out);
    bson_destroy(spec);
    RC(eng_meta_get(E, "test.cat.m", &out), MD_NOTFOUND);
    OK(eng_meta_list(E, meta_collect, &s));
    EQ(s.n, 5);
    CHECK(strcmp(s.keys[4], "test.cat.z") == 0, "last key %s", s.keys[4]);
}

ENGINE_TEST(create_twice_exists_and_drop_then_open_notfound)
{
    fx_open(p);
    eng_rs *rs = rs_make("test.c");
    eng_rid r = ins(rs, 100, 1);
    eng_rs_close(rs);
    eng_ss *ss = ss_make("test.c.$x_1");
    ss_ins(ss, K("k"), r);
    eng_ss_close(ss);

    eng_txn *t = tb();
    RC(eng_rs_create(E, t, "test.c", &(eng_rs_options){0}, &ERR), MD_EEXISTS);
    RC(eng_ss_create(E, t, "test.c.$x_1", &ERR), MD_EEXISTS);
    tc(t);
    RC(eng_rs_open(E, "test.nope", &rs, &ERR), MD_NOTFOUND);
    RC(eng_ss_open(E, "test.nope.$x_1", &ss, &ERR), MD_NOTFOUND);

    t = tb();
    OK(eng_ss_drop(E, t, "test.c.$x_1"));
    OK(eng_rs_drop(E, t, "test.c"));
    tc(t);
    RC(eng_rs_open(E, "test.c", &rs, &ERR), MD_NOTFOUND);
    RC(eng_ss_open(E, "test.c.$x_1", &ss, &ERR), MD_NOTFOUND);

    /* Re-created stores start empty. */
    rs = rs_make("test.c");
    eng_rid seen[4];
    EQ(rs_scan(rs, true, seen, 4), 0);
    struct eng_rs_stats s;
    rs_stat(rs, &s);
    EQ(s.count, 0);
    eng_rs_close(rs);
    ss = ss_make("test.c.$x_1");
    EQ(eng_ss_entries(ss), 0);
    eng_ss_close(ss);
}

/* ---- sorted stores ------------------------------------------------------ */

ENGINE_TEST(ss_insert_remove)
{
    fx_open(p);
    eng_ss *ss = ss_make("test.c.$x_1");
    EQ(eng_ss_entries(ss), 0);
    expect_ss_equals(ss, NULL, 0);
    ss_ins(ss, K("hello"), 7);
    ss_ins(ss, K("world"), 3);
    ent m[2] = {{"hello", 5, 7}, {"world", 5, 3}};
    expect_ss_equals(ss, m, 2);
    ss_rem(ss, K("hello"), 7);
    expect_ss_equals(ss, m + 1, 1);
    eng_txn *t = tb();
    RC(eng_ss_remove(ss, t, K("hello"), 7), MD_NOTFOUND); /* already gone */
    RC(eng_ss_remove(ss, t, K("world"), 4), MD_NOTFOUND); /* wrong rid */
    RC(eng_ss_remove(ss, t, K("worl"), 3), MD_NOTFOUND);  /* prefix */
    RC(eng_ss_remove(ss, t, K("world!"), 3), MD_NOTFOUND); /* extension */
    tc(t);
    expect_ss_equals(ss, m + 1, 1);
    ss_rem(ss, K("world"), 3);
    expect_ss_equals(ss, NULL, 0);
    expect_valid_ss(ss);
    eng_ss_close(ss);
}

/* Random (key, rid) pairs over a small alphabet (shared prefixes, equal
 * keys with several rids, 0x00 and 0xff bytes) against a sorted model. */
static void random_ent(ent *e)
{
    static const uint8_t alpha[] = {0x00, 0x01, 'a', 'b', 0x7f, 0xff};
    e->klen = 1 + rnd(6);
    for (uint32_t i = 0; i < e->klen; i++)
        e->key[i] = alpha[rnd(sizeof alpha)];
    e->rid = 1 + rnd(40);
}

static size_t model_dedup(ent *m, size_t n)
{
    size_t j = 0;
    qsort(m, n, sizeof *m, ent_cmp);
    for (size_t i = 0; i < n; i++)
        if (j == 0 || ent_cmp(&m[j - 1], &m[i]) != 0)
            m[j++] = m[i];
    return j;
}

ENGINE_TEST(ss_order_matches_model)
{
    enum { N = 3000 };
    static ent m[N], del[N];
    fx_open(p);
    eng_ss *ss = ss_make("test.c.$x_1");
    for (int b = 0; b < N; b += 250) {
        eng_txn *t = tb();
        for (int i = b; i < b + 250; i++) {
            random_ent(&m[i]);
            OK(eng_ss_insert(ss, t, m[i].key, m[i].klen, m[i].rid, false, NULL, &ERR));
        }
        tc(t);
    }
    size_t n = model_dedup(m, N);
    CHECK(n < N, "the random keys should repeat some pairs");
    expect_ss_equals(ss, m, n);
    expect_valid_ss(ss);

    /* Remove about a third, then compare again. */
    size_t nd = 0, k = 0;
    eng_txn *t = tb();
    for (size_t i = 0; i < n; i++) {
        if (rnd(3) == 0) {
            del[nd++] = m[i];
            OK(eng_ss_remove(ss, t, m[i].key, m[i].klen, m[i].rid));
        } else {
            m[k++] = m[i];
        }
    }
    tc(t);
    n = k;
    expect_ss_equals(ss, m, n);
    t = tb();
    for (size_t i = 0; i < nd; i += 7)
        RC(eng_ss_remove(ss, t, del[i].key, del[i].klen, del[i].rid), MD_NOTFOUND);
    tc(t);

    /* Random seeks land on the model's lower bound. */
    eng_ss_cursor *c;
    OK(eng_ss_cursor_open(ss, &c));
    for (int q = 0; q < 500; q++) {
        ent probe;
        random_ent(&probe);
        probe.klen = rnd(7);
        probe.rid = rnd(42);
        size_t lo = 0, hi = n;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (ent_cmp(&m[mid], &probe) < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        RC(eng_ss_cursor_seek(c, probe.key, probe.klen, probe.rid), lo < n ? 0 : MD_NOTFOUND);
        const uint8_t *key;
        uint32_t kl;
        eng_rid r;
        if (lo == n) {
            expect_off_end(c);
            continue;
        }
        OK(eng_ss_cursor_get(c, &key, &kl, &r));
        CHECK(r == m[lo].rid && kl == m[lo].klen && memcmp(key, m[lo].key, kl) == 0,
              "seek %d landed on rid %lld, want %lld", q, (long long)r, (long long)m[lo].rid);
        if (lo + 1 < n) {
            OK(eng_ss_cursor_next(c));
            OK(eng_ss_cursor_get(c, &key, &kl, &r));
            EQ(r, m[lo + 1].rid);
            OK(eng_ss_cursor_prev(c));
        }
        if (lo > 0) {
            OK(eng_ss_cursor_prev(c));
            OK(eng_ss_cursor_get(c, &key, &kl, &r));
            EQ(r, m[lo - 1].rid);
        }
    }
    eng_ss_cursor_close(c);
    expect_valid_ss(ss);
    eng_ss_close(ss);
}

ENGINE_TEST(ss_unique_and_duplicate_pairs)
{
    fx_open(p);
    eng_ss *ss = ss_make("test.c.$x_1");
    eng_rid dup = ENG_RID_NONE;
    eng_txn *t = tb();
    OK(eng_ss_insert(ss, t, K("k1"), 10, true, &dup, &ERR));
    RC(eng_ss_insert(ss, t, K("k1"), 20, true, &dup, &ERR), MD_EDUPKEY);
    EQ(dup, 10);
    OK(eng_ss_insert(ss, t, K("k1"), 10, true, &dup, &ERR));  /* same pair: no-op */
    OK(eng_ss_insert(ss, t, K("k1"), 10, false, NULL, &ERR)); /* again, not unique */
    OK(eng_ss_insert(ss, t, K("k"), 20, true, &dup, &ERR));   /* a prefix is another key */
    OK(eng_ss_insert(ss, t, K("k10"), 20, true, &dup, &ERR)); /* so is an extension */
    OK(eng_ss_insert(ss, t, K("k2"), 5, true, &dup, &ERR));
    tc(t);
    ent m[] = {{"k", 1, 20}, {"k1", 2, 10}, {"k10", 3, 20}, {"k2", 2, 5}};
    expect_ss_equals(ss, m, 4);
    int64_t size = eng_ss_size(ss);

    /* Without the unique flag, equal keys with other rids are allowed; a
     * unique insert then reports one of them. */
    t = tb();
    OK(eng_ss_insert(ss, t, K("k2"), 3, false, NULL, &ERR));
    OK(eng_ss_insert(ss, t, K("k2"), 5, false, NULL, &ERR)); /* duplicate pair */
    dup = ENG_RID_NONE;
    RC(eng_ss_insert(ss, t, K("k2"), 9, true, &dup, &ERR), MD_EDUPKEY);
    CHECK(dup == 3 || dup == 5, "dup_rid %lld", (long long)dup);
    tc(t);
    ent m2[] = {{"k", 1, 20}, {"k1", 2, 10}, {"k10", 3, 20}, {"k2", 2, 3}, {"k2", 2, 5}};
    expect_ss_equals(ss, m2, 5);
    CHECK(eng_ss_size(ss) >= size, "size shrank after an insert");
    expect_valid_ss(ss);
    eng_ss_close(ss);
}

/* Entries: b/1 b/2 d/1 d/2 dd/1 f/1 f/2. */
static eng_ss *seek_fixture(void)
{
    eng_ss *ss = ss_make("test.c.$x_1");
    eng_txn *t = tb();
    static const char *keys[] = {"f", "d", "b", "dd"};
    for (int i = 0; i < 4; i++)
        for (eng_rid r = 1; r <= (i == 3 ? 1 : 2); r++)
            OK(eng_ss_insert(ss, t, K(keys[i]), r, false, NULL, &ERR));
    tc(t);
    return ss;
}

ENGINE_TEST(ss_cursor_seek_and_ends)
{
    fx_open(p);
    eng_ss *ss = seek_fixture();
    eng_ss_cursor *c;
    OK(eng_ss_cursor_open(ss, &c));
    OK(eng_ss_cursor_seek(c, K("d"), 0));      /* exact key, rid 0 */
    expect_at(c, "d", 1);
    OK(eng_ss_cursor_seek(c, K("d"), 2));      /* exact pair */
    expect_at(c, "d", 2);
    OK(eng_ss_cursor_seek(c, K("d"), 3));      /* past the key's rids */
    expect_at(c, "dd", 1);
    OK(eng_ss_cursor_seek(c, K("c"), 0));      /* between keys */
    expect_at(c, "d", 1);
    OK(eng_ss_cursor_seek(c, K("a"), 0));      /* before everything */
    expect_at(c, "b", 1);
    OK(eng_ss_cursor_seek(c, (const uint8_t *)"", 0, 0)); /* klen 0: first of all */
    expect_at(c, "b", 1);
    OK(eng_ss_cursor_seek(c, K("e"), 0));
    expect_at(c, "f", 1);
    OK(eng_ss_cursor_next(c));
    expect_at(c, "f", 2);

    /* Off the right end: rests there; prev gives the last entry. */
    RC(eng_ss_cursor_next(c), MD_NOTFOUND);
    expect_off_end(c);
    RC(eng_ss_cursor_next(c), MD_NOTFOUND);
    OK(eng_ss_cursor_prev(c));
    expect_at(c, "f", 2);

    /* A seek past every entry also rests past the right end. */
    RC(eng_ss_cursor_seek(c, K("g"), 0), MD_NOTFOUND);
    expect_off_end(c);
    OK(eng_ss_cursor_prev(c));
    expect_at(c, "f", 2);
    RC(eng_ss_cursor_seek(c, K("f"), 3), MD_NOTFOUND);
    OK(eng_ss_cursor_prev(c));
    expect_at(c, "f", 2);

    /* Off the left end: next gives the first entry. */
    OK(eng_ss_cursor_seek(c, K("b"), 2));
    OK(eng_ss_cursor_prev(c));
    expect_at(c, "b", 1);
    RC(eng_ss_cursor_prev(c), MD_NOTFOUND);
    expect_off_end(c);
    RC(eng_ss_cursor_prev(c), MD_NOTFOUND);
    OK(eng_ss_cursor_next(c));
    expect_at(c, "b", 1);
    OK(eng_ss_cursor_next(c));
    expect_at(c, "b", 2);
    OK(eng_ss_cursor_next(c));
    expect_at(c, "d", 1);
    eng_ss_cursor_close(c);
    eng_ss_close(ss);
}

ENGINE_TEST(ss_cursor_save_restore)
{
    fx_open(p);
    eng_ss *ss = seek_fixture();
    eng_ss_cursor *c;
    OK(eng_ss_cursor_open(ss, &c));

    /* Nothing changed: back on the same entry. */
    OK(eng_ss_cursor_seek(c, K("d"), 2));
    eng_ss_cursor_save(c);
    OK(eng_ss_cursor_restore(c));
    expect_at(c, "d", 2);

    /* Entries inserted before it do not move the cursor. */
    eng_ss_cursor_save(c);
    ss_ins(ss, K("c"), 1);
    ss_ins(ss, K("cz"), 5);
    ss_ins(ss, K("a"), 9);
    OK(eng_ss_cursor_restore(c));
    expect_at(c, "d", 2);
    OK(eng_ss_cursor_prev(c));
    expect_at(c, "d", 1);
    OK(eng_ss_cursor_prev(c));
    expect_at(c, "cz", 5);

    /* The current entry removed: restore lands on the next greater one. */
    OK(eng_ss_cursor_seek(c, K("d"), 2));
    eng_ss_cursor_save(c);
    ss_rem(ss, K("d"), 2);
    OK(eng_ss_cursor_restore(c));
    expect_at(c, "dd", 1);
    OK(eng_ss_cursor_prev(c));
    expect_at(c, "d", 1);

    /* The current entry and its successor removed. */
    OK(eng_ss_cursor_seek(c, K("d"), 1));
    eng_ss_cursor_save(c);
    eng_txn *t = tb();
    OK(eng_ss_remove(ss, t, K("d"), 1));
    OK(eng_ss_remove(ss, t, K("dd"), 1));
    tc(t);
    OK(eng_ss_cursor_restore(c));
    expect_at(c, "f", 1);

    /* The last entry removed: restore rests past the end. */
    OK(eng_ss_cursor_seek(c, K("f"), 2));
    eng_ss_cursor_save(c);
    ss_rem(ss, K("f"), 2);
    eng_ss_cursor_restore(c);
    expect_off_end(c);
    OK(eng_ss_cursor_prev(c));
    expect_at(c, "f", 1);

    /* Resting past the right end survives save/restore. */
    RC(eng_ss_cursor_next(c), MD_NOTFOUND);
    eng_ss_cursor_save(c);
    ss_ins(ss, K("e"), 4);
    eng_ss_cursor_restore(c);
    expect_off_end(c);
    OK(eng_ss_cursor_prev(c));
    expect_at(c, "f", 1);
    eng_ss_cursor_close(c);
    ent m[] = {{"a", 1, 9}, {"b", 1, 1}, {"b", 1, 2}, {"c", 1, 1},
               {"cz", 2, 5}, {"e", 1, 4}, {"f", 1, 1}};
    expect_ss_equals(ss, m, 7);
    expect_valid_ss(ss);
    eng_ss_close(ss);
}

ENGINE_TEST(ss_truncate_entries_size)
{
    fx_open(p);
    eng_ss *ss = ss_make("test.c.$x_1");
    eng_ss *other = ss_make("test.c.$y_1");
    ss_ins(other, K("keep"), 1);
    int64_t keys = 0;
    eng_txn *t = tb();
    for (int i = 0; i < 500; i++) {
        char k[32];
        snprintf(k, sizeof k, "key%05d", i * 7919 % 500);
        OK(eng_ss_insert(ss, t, K(k), 1 + i % 3, false, NULL, &ERR));
        keys += (int64_t)strlen(k);
    }
    tc(t);
    EQ(eng_ss_entries(ss), 500);
    CHECK(eng_ss_size(ss) > 0, "size 0 with 500 entries");
    if (exact_sizes(OPS))
        EQ(eng_ss_size(ss), keys + 8 * 500);
    expect_valid_ss(ss);
    t = tb();
    OK(eng_ss_truncate(ss, t));
    tc(t);
    EQ(eng_ss_entries(ss), 0);
    if (exact_sizes(OPS))
        EQ(eng_ss_size(ss), 0);
    expect_ss_equals(ss, NULL, 0);
    ss_ins(ss, K("again"), 2);
    ent m = {"again", 5, 2};
    expect_ss_equals(ss, &m, 1);
    ent mo = {"keep", 4, 1};
    expect_ss_equals(other, &mo, 1);
    expect_valid_ss(ss);
    eng_ss_close(ss);
    eng_ss_close(other);
}

/* ---- close and reopen --------------------------------------------------- */

ENGINE_TEST(close_reopen)
{
    enum { N = 300 };
    static eng_rid rids[N], seen[N];
    static uint32_t lens[N], seeds[N];
    static ent m[N];
    bool live[N];
    fx_open(p);
    eng_rs *rs = rs_make("test.c");
    eng_ss *ss = ss_make("test.c.$x_1");
    eng_txn *t = tb();
    meta_put_int(t, "test.c", 1);
    meta_put_int(t, "test.c.$x_1", 2);
    for (int i = 0; i < N; i++) {
        lens[i] = DOC_MIN + rnd(400);
        seeds[i] = (uint32_t)i;
        rids[i] = ins_t(rs, t, lens[i], seeds[i]);
        live[i] = true;
    }
    tc(t);
    t = tb();
    for (int i = 0; i < N; i += 5) {
        OK(eng_rs_remove(rs, t, rids[i]));
        live[i] = false;
    }
    for (int i = 1; i < N; i += 7) {
        bool moved;
        if (!live[i])
            continue;
        lens[i] = lens[i] * 3 + 50;
        seeds[i] += 1000;
        OK(eng_rs_update(rs, t, rids[i], make_doc(lens[i], seeds[i]), lens[i], &rids[i],
                         &moved, &ERR));
    }
    size_t n = 0;
    for (int i = 0; i < N; i++) {
        if (!live[i])
            continue;
        snprintf((char *)m[n].key, sizeof m[n].key, "k%04d", i);
        m[n].klen = 5;
        m[n].rid = rids[i];
        OK(eng_ss_insert(ss, t, m[n].key, 5, rids[i], true, NULL, &ERR));
        n++;
    }
    tc(t);
    qsort(m, n, sizeof *m, ent_cmp);
    struct eng_rs_stats s0, s1;
    rs_stat(rs, &s0);
    int frc = eng_flush(E, true, &ERR);
    CHECK(frc == 0 || frc == MD_ENOTSUP, "flush: %s", md_strerror(frc));
    eng_rs_close(rs);
    eng_ss_close(ss);
    fx_reopen();

    if (!persists(OPS)) {
        /* An ephemeral engine starts empty again. */
        int entries = 0;
        OK(eng_meta_list(E, meta_count, &entries));
        EQ(entries, 0);
        RC(eng_rs_open(E, "test.c", &rs, &ERR), MD_NOTFOUND);
        RC(eng_ss_open(E, "test.c.$x_1", &ss, &ERR), MD_NOTFOUND);
        return;
    }
    expect_meta_int("test.c", 1);
    expect_meta_int("test.c.$x_1", 2);
    OK(eng_rs_open(E, "test.c", &rs, &ERR));
    OK(eng_ss_open(E, "test.c.$x_1", &ss, &ERR));
    for (int i = 0; i < N; i++) {
        const uint8_t *d;
        uint32_t l;
        if (live[i])
            expect_rec(rs, rids[i], lens[i], seeds[i]);
        else
            RC(eng_rs_get(rs, rids[i], &d, &l), MD_NOTFOUND);
    }
    rs_stat(rs, &s1);
    EQ(s1.count, s0.count);
    EQ(s1.data_size, s0.data_size);
    EQ(rs_scan(rs, true, seen, N), n);
    expect_ss_equals(ss, m, n);
    expect_valid_rs(rs, (int64_t)n);
    expect_valid_ss(ss);
    /* And the reopened stores take writes. */
    eng_rid r = ins(rs, 90, 4242);
    ss_ins(ss, K("zzz"), r);
    expect_rec(rs, r, 90, 4242);
    EQ(eng_ss_entries(ss), n + 1);
    eng_rs_close(rs);
    eng_ss_close(ss);
}
