/*
 * test_eng_mem.c -- what ephemeralForTest promises beyond the contract
 * (which tests/engine/test_contract.c checks on every engine): RecordIds
 * are a counter from 1, an abort restores the counters too, nothing moves,
 * there is no compact, writes need the active transaction, one transaction
 * at a time, handles on dropped stores stay safe, and close forgets all.
 */
#include <criterion/criterion.h>

#include "eng.h"

extern const eng_ops eng_mem_ops;

static eng_engine *E;

static void setup(void)
{
    cr_assert(eng_open(&eng_mem_ops, "/nonexistent/only-a-name", "test", NULL, &E, NULL) == 0);
}

static void teardown(void)
{
    eng_close(E);
}

TestSuite(eng_mem, .init = setup, .fini = teardown);

static const uint8_t DOC[] = {5, 0, 0, 0, 0};
static const uint8_t DOC2[] = {13, 0, 0, 0, 0x10, 'a', 0, 1, 0, 0, 0, 0, 0};

/* eng_rs_stats() through the operations table (its name clashes with the
 * struct's typedef in this version of eng.h). */
static void rs_stats(eng_rs *rs, struct eng_rs_stats *s)
{
    memset(s, 0, sizeof *s);
    eng_mem_ops.rs_stats(rs, s);
}

static eng_rs *make_rs(const char *ident)
{
    eng_txn *t;
    eng_rs *rs;
    cr_assert(eng_txn_begin(E, &t) == 0);
    cr_assert(eng_rs_create(E, t, ident, NULL, NULL) == 0);
    cr_assert(eng_txn_commit(t, true, NULL) == 0);
    cr_assert(eng_rs_open(E, ident, &rs, NULL) == 0);
    return rs;
}

Test(eng_mem, rids_count_from_one_and_abort_restores_counters)
{
    eng_rs *rs = make_rs("test.c");
    eng_txn *t;
    eng_rid rid, nr;
    bool moved;
    struct eng_rs_stats s0, s1;
    cr_assert(eng_txn_begin(E, &t) == 0);
    for (eng_rid want = 1; want <= 3; want++) {
        cr_assert(eng_rs_insert(rs, t, DOC, sizeof DOC, &rid, NULL) == 0);
        cr_assert_eq(rid, want);
    }
    cr_assert(eng_txn_commit(t, false, NULL) == 0);
    rs_stats(rs, &s0);

    cr_assert(eng_txn_begin(E, &t) == 0);
    cr_assert(eng_rs_insert(rs, t, DOC, sizeof DOC, &rid, NULL) == 0);
    cr_assert_eq(rid, 4);
    cr_assert(eng_rs_update(rs, t, 2, DOC2, sizeof DOC2, &nr, &moved, NULL) == 0);
    cr_assert(nr == 2 && !moved);
    eng_txn_abort(t);
    rs_stats(rs, &s1);
    cr_assert(memcmp(&s0, &s1, sizeof s0) == 0, "abort left the counters changed");

    cr_assert(eng_txn_begin(E, &t) == 0);
    cr_assert(eng_rs_insert(rs, t, DOC, sizeof DOC, &rid, NULL) == 0);
    cr_assert_eq(rid, 4, "the aborted RecordId is handed out again");
    cr_assert(eng_txn_commit(t, false, NULL) == 0);
    rs_stats(rs, &s1);
    cr_assert_eq(s1.data_size, 4 * 5);
    cr_assert_eq(s1.storage_size, s1.data_size);
    eng_rs_close(rs);
}

Test(eng_mem, never_moves_and_has_no_compact)
{
    eng_rs *rs = make_rs("test.c");
    eng_txn *t;
    eng_rid rid, nr;
    bool moved = true;
    static uint8_t big[100000];
    cr_assert(eng_txn_begin(E, &t) == 0);
    cr_assert(eng_rs_insert(rs, t, DOC, sizeof DOC, &rid, NULL) == 0);
    cr_assert(eng_rs_update(rs, t, rid, big, sizeof big, &nr, &moved, NULL) == 0);
    cr_assert(nr == rid && !moved);
    eng_compact_opts o = {0};
    cr_assert_eq(eng_rs_compact(rs, t, &o, NULL, NULL), MD_ENOTSUP);
    eng_damage d = {0, 99999, 2};
    cr_assert_eq(eng_rs_update_damages(rs, t, rid, big, &d, 1, NULL), MD_EINVAL,
                 "a damage past the end of the record is refused");
    cr_assert(eng_txn_commit(t, false, NULL) == 0);
    struct eng_rs_stats s;
    rs_stats(rs, &s);
    cr_assert(s.n_moves == 0 && s.n_inplace == 1 && eng_mem_ops.total_moves(E) == 0);
    eng_rs_close(rs);
}

Test(eng_mem, writes_need_the_active_transaction)
{
    eng_rs *rs = make_rs("test.c");
    eng_txn *t, *t2;
    eng_rid rid;
    cr_assert_eq(eng_rs_remove(rs, NULL, 1), MD_EINVAL);
    cr_assert(eng_txn_begin(E, &t) == 0);
    cr_assert_eq(eng_txn_begin(E, &t2), MD_EBUSY);
    cr_assert(eng_rs_insert(rs, t, DOC, sizeof DOC, &rid, NULL) == 0);
    cr_assert(eng_txn_commit(t, false, NULL) == 0);
    cr_assert_eq(eng_meta_del(E, t, "x"), MD_EINVAL, "a finished transaction is refused");
    eng_rs_close(rs);
}

Test(eng_mem, handle_on_dropped_store_stays_safe)
{
    eng_rs *rs = make_rs("test.c");
    eng_txn *t;
    eng_rid rid;
    const uint8_t *d;
    uint32_t l;
    cr_assert(eng_txn_begin(E, &t) == 0);
    cr_assert(eng_rs_insert(rs, t, DOC, sizeof DOC, &rid, NULL) == 0);
    cr_assert(eng_rs_drop(E, t, "test.c") == 0);
    cr_assert(eng_txn_commit(t, false, NULL) == 0);
    cr_assert(eng_rs_get(rs, rid, &d, &l) == 0, "the open handle still reads its store");
    eng_rs_close(rs); /* frees the dropped store (ASan checks) */
    rs = make_rs("test.c");
    cr_assert_eq(eng_rs_get(rs, rid, &d, &l), MD_NOTFOUND);
    eng_rs_close(rs);
}

Test(eng_mem, close_forgets_everything)
{
    eng_rs *rs = make_rs("test.c");
    eng_txn *t;
    eng_rid rid;
    bson_t *v = BCON_NEW("x", BCON_INT32(1));
    cr_assert(eng_txn_begin(E, &t) == 0);
    cr_assert(eng_rs_insert(rs, t, DOC, sizeof DOC, &rid, NULL) == 0);
    cr_assert(eng_meta_put(E, t, "test.c", v, NULL) == 0);
    cr_assert(eng_txn_commit(t, true, NULL) == 0);
    cr_assert(eng_flush(E, true, NULL) == 0);
    bson_destroy(v);
    eng_rs_close(rs);
    eng_close(E);
    setup();
    bson_t out;
    cr_assert_eq(eng_meta_get(E, "test.c", &out), MD_NOTFOUND);
    cr_assert_eq(eng_rs_open(E, "test.c", &rs, NULL), MD_NOTFOUND);
}
