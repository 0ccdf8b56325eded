/*
 * test_mm_capped.c -- what mmapv1's capped collections promise beyond the
 * capped contract (tests/engine/test_eng_capped.c runs that on every
 * engine): MongoDB 3.0's layout -- the extents covering `size` allocated at
 * create and never more, used as a ring through capExtent and
 * capFirstNewRecord at their offsets in the .ns details, free space merged
 * on one list -- a ring that survives a SIGKILL through the journal, updates
 * that would grow refused (10003), compact refused, and validate noticing a
 * damaged capExtent.
 */

#include "test_mm_util.h"

/* A capped collection of size bytes (and max documents) on engine t. */
static eng_rs *capped_coll(mmt *t, const char *name, int64_t size, int64_t max)
{
    eng_rs_options o = {.capped = true, .capped_size = size, .capped_max = max};
    eng_rs *rs;
    eng_txn *x = mmt_begin(t);
    int rc = eng_rs_create(t->e, x, name, &o, &t->err);
    cr_assert_eq(rc, 0, "create %s: %s", name, t->err.message);
    mmt_commit(x);
    cr_assert_eq(eng_rs_open(t->e, name, &rs, &t->err), 0);
    return rs;
}

static mm_ns_slot *details(mmt *t, const char *name)
{
    mm_engine *e = (mm_engine *)t->e;
    int32_t slot = mm_ns_find(e, name);
    cr_assert(slot > 0);
    return mm_ns_at(e, slot);
}

/* The ids of the documents in forward order must be first..last. */
static void expect_ids(eng_rs *rs, int first, int last)
{
    eng_rs_cursor *c;
    eng_rid rid;
    const uint8_t *p;
    uint32_t len;
    int want = first;
    cr_assert_eq(eng_rs_cursor_open(rs, true, &c), 0);
    while (eng_rs_cursor_next(c, &rid, &p, &len) == 0) {
        bson_t b;
        bson_iter_t it;
        cr_assert(bson_init_static(&b, p, len));
        cr_assert(bson_iter_init_find(&it, &b, "_id"));
        cr_assert_eq(bson_iter_int32(&it), want, "ring order: got _id %d, want %d",
                     bson_iter_int32(&it), want);
        want++;
    }
    cr_assert_eq(want, last + 1, "the ring ends at _id %d, want %d", want - 1, last);
    eng_rs_cursor_close(c);
}

/* The oldest _id in the ring. */
static int oldest_id(eng_rs *rs)
{
    eng_rs_cursor *c;
    eng_rid rid;
    const uint8_t *p;
    uint32_t len;
    bson_t b;
    bson_iter_t it;
    cr_assert_eq(eng_rs_cursor_open(rs, true, &c), 0);
    cr_assert_eq(eng_rs_cursor_next(c, &rid, &p, &len), 0);
    cr_assert(bson_init_static(&b, p, len) && bson_iter_init_find(&it, &b, "_id"));
    int id = bson_iter_int32(&it);
    eng_rs_cursor_close(c);
    return id;
}

static void expect_valid(eng_rs *rs)
{
    eng_validate v;
    int n = mmt_validate(rs, &v);
    char *s = mmt_errors(&v);
    cr_assert_eq(n, 0, "validate: %s", s);
    bson_free(s);
    eng_validate_cleanup(&v);
}

Test(mm_capped, extents_cover_the_size_up_front_and_never_grow)
{
    mmt t;
    mmt_open(&t);
    eng_rs *rs = capped_coll(&t, "test.cap", 100000, 0);
    struct eng_rs_stats s0, s1;
    bson_t sub;
    mmt_stats(rs, &s0);
    cr_assert_geq(s0.storage_size, 100000);
    cr_assert_lt(s0.storage_size, 100000 + 2 * 4096);
    mmt_engine_stats(rs, &sub);
    int64_t nextents = mmt_bson_int(&sub, "numExtents");
    bson_destroy(&sub);
    mm_ns_slot *d = details(&t, "test.cap");
    cr_assert_eq(d->is_capped, 1);
    cr_assert_eq(d->capped_size, 100000);
    cr_assert(mm_loc_eq(d->cap_extent, d->first_extent));
    cr_assert(!mm_loc_is_valid(d->cap_first_new), "first pass: capFirstNewRecord invalid");
    for (int i = 1; i <= 2000; i++)
        mmt_insert(&t, rs, i, 100 + (i * 37) % 400);
    mmt_stats(rs, &s1);
    cr_assert_eq(s1.storage_size, s0.storage_size, "the ring never adds an extent");
    mmt_engine_stats(rs, &sub);
    cr_assert_eq(mmt_bson_int(&sub, "numExtents"), nextents);
    bson_destroy(&sub);
    d = details(&t, "test.cap");
    cr_assert(mm_loc_is_valid(d->cap_first_new) && !mm_loc_is_null(d->cap_first_new),
              "after wrapping, capFirstNewRecord is a record");
    cr_assert_lt(s1.count, 2000);
    cr_assert_leq(s1.data_size + s1.count * MM_REC_HDR, s1.storage_size);
    expect_ids(rs, 2001 - (int)s1.count, 2000);
    expect_valid(rs);
    mmt_verify_clean(&t);
    eng_rs_close(rs);
    mmt_close(&t);
}

Test(mm_capped, ring_visits_every_extent_in_order)
{
    mmt t;
    mmt_open(&t);
    /* extents of at most 64 KB: the size takes several */
    bson_t sub;
    bson_destroy(&t.opts);
    bson_init(&t.opts);
    BSON_APPEND_DOCUMENT_BEGIN(&t.opts, "mmapv1", &sub);
    BSON_APPEND_INT64(&sub, "firstFileSize", 65536);
    BSON_APPEND_INT64(&sub, "nsSize", 65536);
    BSON_APPEND_BOOL(&sub, "debugCheckViews", true);
    BSON_APPEND_INT32(&sub, "debugCappedExtentSize", 65536);
    bson_append_document_end(&t.opts, &sub);
    mmt_reopen(&t);
    eng_rs *rs = capped_coll(&t, "test.cap", 300000, 0);
    mm_engine *e = (mm_engine *)t.e;
    mm_loc *chain;
    int32_t n;
    mm_ns_slot *d = details(&t, "test.cap");
    cr_assert_eq(mm_extent_chain(e, d->first_extent, &chain, &n), 0);
    cr_assert_gt(n, 1, "one extent only");
    int at = 0, moves = 0;
    for (int i = 1; i <= 3000; i++) {
        mmt_insert(&t, rs, i, 200 + (i * 53) % 700);
        d = details(&t, "test.cap");
        /* one extent on per filled extent (two when the next one's old
         * records leave too little room in it) */
        for (int steps = 0; !mm_loc_eq(d->cap_extent, chain[at]); steps++) {
            cr_assert_lt(steps, 2, "insert %d: capExtent %d:0x%x is not the next extent", i,
                         d->cap_extent.a, d->cap_extent.ofs);
            at = (at + 1) % n;
            moves++;
        }
        if (i % 500 == 0)
            expect_valid(rs);
    }
    cr_assert_gt(moves, 2 * n, "the ring went around only %d extent moves", moves);
    struct eng_rs_stats s;
    mmt_stats(rs, &s);
    expect_ids(rs, 3001 - (int)s.count, 3000);
    /* Free space stays in few pieces: neighbours are merged. */
    eng_validate v;
    cr_assert_eq(mmt_validate(rs, &v), 0);
    cr_assert_leq(mmt_bson_int(&v.info, "deletedCount"), 3 * n);
    cr_assert(bson_has_field(&v.info, "capped"));
    eng_validate_cleanup(&v);
    free(chain);
    eng_rs_close(rs);
    mmt_close(&t);
}

Test(mm_capped, fields_are_at_their_ns_offsets_and_persist)
{
    mmt t;
    mmt_open(&t);
    eng_rs *rs = capped_coll(&t, "test.cap", 20000, 50);
    for (int i = 1; i <= 120; i++)
        mmt_insert(&t, rs, i, 150);
    mm_ns_slot *d = details(&t, "test.cap");
    mm_loc cap = d->cap_extent, cfn = d->cap_first_new;
    int32_t slot = mm_ns_find((mm_engine *)t.e, "test.cap");
    mmt_settle(&t);
    char path[128];
    snprintf(path, sizeof path, "%s/test.ns", t.dir);
    int fd = open(path, O_RDONLY);
    cr_assert(fd >= 0);
    mm_loc on_disk[2];
    int64_t max;
    cr_assert_eq(pread(fd, on_disk, 16, (int64_t)slot * 640 + 472), 16);
    cr_assert_eq(pread(fd, &max, 8, (int64_t)slot * 640 + 456), 8);
    close(fd);
    cr_assert(mm_loc_eq(on_disk[0], cap) && mm_loc_eq(on_disk[1], cfn));
    cr_assert_eq(max, 50);
    eng_rs_close(rs);
    mmt_reopen(&t);
    cr_assert_eq(eng_rs_open(t.e, "test.cap", &rs, &t.err), 0);
    expect_ids(rs, 71, 120);
    mmt_insert(&t, rs, 121, 150);
    expect_ids(rs, 72, 121);
    expect_valid(rs);
    eng_rs_close(rs);
    mmt_close(&t);
}

/* In a child: create test.cap (journal on), insert n documents {_id: i}
 * of varying sizes, every tenth commit and the last durable, then die by
 * SIGKILL. */
static void crash_capped_writer(mmt *t, int n)
{
    eng_rs_options o = {.capped = true, .capped_size = 16384};
    mmt_crash_writer(t, "test.cap", &o, n, 0, 10);
}

Test(mm_capped, ring_survives_sigkill_through_the_journal)
{
    mmt t;
    mmt_open(&t);
    eng_close(t.e); /* the child owns the directory now */
    t.e = NULL;
    crash_capped_writer(&t, 700);
    cr_assert_eq(mmt_try_open(&t), 0, "%s", t.err.message);
    eng_rs *rs;
    cr_assert_eq(eng_rs_open(t.e, "test.cap", &rs, &t.err), 0);
    struct eng_rs_stats s;
    mmt_stats(rs, &s);
    cr_assert_gt(s.count, 20);
    int first = oldest_id(rs);
    cr_assert_gt(first, 1, "the ring wrapped before the crash");
    expect_ids(rs, first, 700);
    expect_valid(rs);
    mmt_verify_clean(&t);
    /* and the ring goes on */
    for (int i = 701; i <= 900; i++)
        mmt_insert(&t, rs, i, 100);
    mmt_stats(rs, &s);
    expect_ids(rs, 901 - (int)s.count, 900);
    expect_valid(rs);
    eng_rs_close(rs);
    mmt_close(&t);
}

Test(mm_capped, growth_and_compact_are_refused)
{
    mmt t;
    mmt_open(&t);
    eng_rs *rs = capped_coll(&t, "test.cap", 8192, 0);
    eng_rid r1 = mmt_insert(&t, rs, 1, 100);
    mmt_insert(&t, rs, 2, 100);
    eng_rid out;
    bool moved;
    cr_assert_eq(mmt_update(&t, rs, r1, 1, 100, &out, &moved), 0);
    cr_assert(!moved && out == r1);
    cr_assert_eq(mmt_update(&t, rs, r1, 1, 200, &out, &moved), MD_ENOTSUP);
    cr_assert_eq(t.err.code, 10003, "code %d: %s", t.err.code, t.err.message);
    eng_txn *x = mmt_begin(&t);
    bson_t info = BSON_INITIALIZER;
    cr_assert_eq(eng_rs_compact(rs, x, NULL, &info, &t.err), MD_ENOTSUP);
    eng_txn_abort(x);
    bson_destroy(&info);
    expect_ids(rs, 1, 2);
    expect_valid(rs);
    eng_rs_close(rs);
    mmt_close(&t);
}

Test(mm_capped, validate_reports_a_damaged_cap_extent)
{
    mmt t;
    mmt_open(&t);
    eng_rs *rs = capped_coll(&t, "test.cap", 8192, 0);
    for (int i = 1; i <= 100; i++)
        mmt_insert(&t, rs, i, 120);
    int32_t slot = mm_ns_find((mm_engine *)t.e, "test.cap");
    mmt_settle(&t);
    char path[128];
    snprintf(path, sizeof path, "%s/test.ns", t.dir);
    int fd = open(path, O_RDWR);
    cr_assert(fd >= 0);
    mm_loc bogus = {0, 0x7000};
    cr_assert_eq(pwrite(fd, &bogus, 8, (int64_t)slot * 640 + 472), 8);
    close(fd);
    eng_validate v;
    cr_assert_gt(mmt_validate(rs, &v), 0);
    cr_assert(mmt_has_error(&v, "capExtent"), "no capExtent error");
    eng_validate_cleanup(&v);
    eng_rs_close(rs);
    mmt_close(&t);
}
