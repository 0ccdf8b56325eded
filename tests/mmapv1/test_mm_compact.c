/*
 * test_mm_compact.c -- compact on the mmapv1 engine: storage shrinks after
 * deletes, every document survives (with new RecordIds), the three padding
 * modes size records as MongoDB 3.0 did, the old extents land on the
 * extent free lists, and an aborted compact leaves no trace.
 */
#include "test_mm_util.h"

/* Ids and record lengths in natural order. */
static int scan(eng_rs *rs, int *ids, int32_t *lens, int max)
{
    eng_rs_cursor *c;
    eng_rid rid;
    const uint8_t *p;
    uint32_t len;
    int n = 0;
    cr_assert_eq(eng_rs_cursor_open(rs, true, &c), 0);
    while (n < max && eng_rs_cursor_next(c, &rid, &p, &len) == 0) {
        bson_t b;
        cr_assert(bson_init_static(&b, p, len));
        ids[n] = (int)mmt_bson_int(&b, "_id");
        lens[n++] = ((const mm_record *)(p - MM_REC_HDR))->len;
    }
    eng_rs_cursor_close(c);
    return n;
}

static int compact(mmt *t, eng_rs *rs, int padding, double factor, int bytes, bson_t *info)
{
    eng_compact_opts o = {.padding = padding, .padding_factor = factor, .padding_bytes = bytes};
    eng_txn *x = mmt_begin(t);
    bson_init(info);
    int rc = eng_rs_compact(rs, x, &o, info, &t->err);
    if (rc == 0)
        mmt_commit(x);
    else
        eng_txn_abort(x);
    return rc;
}

Test(mm_compact, shrinks_storage_after_deletes)
{
    mmt t;
    mmt_open(&t);
    eng_rs *rs = mmt_coll(&t, "test.c", ENG_ALLOC_POWEROF2);
    eng_rid ids[1000];
    for (int i = 0; i < 1000; i++)
        ids[i] = mmt_insert(&t, rs, i, 100);
    for (int i = 0; i < 1000; i++)
        if (i % 3)
            mmt_remove(&t, rs, ids[i]);
    struct eng_rs_stats before, after;
    mmt_stats(rs, &before);
    cr_assert_eq(before.storage_size, 8192 + 32768 + 131072);
    bson_t info;
    cr_assert_eq(compact(&t, rs, ENG_PAD_NONE, 0, 0, &info), 0, "%s", t.err.message);
    mmt_stats(rs, &after);
    cr_assert_eq(after.count, 334);
    cr_assert_eq(after.data_size, 334 * 112);
    cr_assert_eq(after.storage_size, 4096 + 16384 + 65536);
    cr_assert_eq(mmt_bson_int(&info, "oldStorageSize"), before.storage_size);
    cr_assert_eq(mmt_bson_int(&info, "newStorageSize"), after.storage_size);
    cr_assert_eq(mmt_bson_int(&info, "records"), 334);
    bson_destroy(&info);
    int got[400];
    int32_t lens[400];
    cr_assert_eq(scan(rs, got, lens, 400), 334);
    for (int k = 0; k < 334; k++) {
        cr_assert_eq(got[k], 3 * k);
        cr_assert_eq(lens[k], 128);
    }
    eng_validate v;
    cr_assert_eq(mmt_validate(rs, &v), 0);
    cr_assert_eq(mmt_bson_int(&v.info, "extentCount"), 3);
    eng_validate_cleanup(&v);
    /* the three old extents are on the extent free lists */
    mm_engine *e = (mm_engine *)t.e;
    int nfree = 0;
    for (int f = 0; f < e->nfiles; f++)
        for (mm_loc l = mm_dfh_at(e, f)->free_start; !mm_loc_is_null(l);
             l = mm_extent_at(e, l)->xnext)
            nfree++;
    cr_assert_eq(nfree, 3);
    eng_rs_close(rs);
    mmt_verify_clean(&t);
    mmt_close(&t);
}

Test(mm_compact, padding_modes)
{
    mmt t;
    mmt_open(&t);
    eng_rs *rs = mmt_coll(&t, "test.c", ENG_ALLOC_NOPADDING);
    for (int i = 0; i < 10; i++)
        mmt_insert(&t, rs, i, 100);
    int ids[16];
    int32_t lens[16];
    bson_t info;
    cr_assert_eq(compact(&t, rs, ENG_PAD_MANUAL, 1.5, 0, &info), 0, "%s", t.err.message);
    bson_destroy(&info);
    cr_assert_eq(scan(rs, ids, lens, 16), 10);
    cr_assert_eq(lens[0], 176); /* 116 * 1.5 = 174, rounded up to 4 */
    cr_assert_eq(compact(&t, rs, ENG_PAD_MANUAL, 1.0, 30, &info), 0);
    cr_assert_float_eq(mmt_bson_double(&info, "oldPaddingRatio"), 160.0 / 100.0, 1e-9);
    bson_destroy(&info);
    cr_assert_eq(scan(rs, ids, lens, 16), 10);
    cr_assert_eq(lens[9], 148); /* 116 + 30, rounded up to 4 */
    cr_assert_eq(compact(&t, rs, ENG_PAD_PRESERVE, 0, 0, &info), 0);
    bson_destroy(&info);
    cr_assert_eq(scan(rs, ids, lens, 16), 10);
    cr_assert_eq(lens[5], 148);
    cr_assert_eq(compact(&t, rs, ENG_PAD_NONE, 0, 0, &info), 0);
    bson_destroy(&info);
    cr_assert_eq(scan(rs, ids, lens, 16), 10);
    cr_assert_eq(lens[5], 116); /* the collection's strategy: noPadding */
    for (int i = 0; i < 10; i++)
        cr_assert_eq(ids[i], i);
    cr_assert_eq(compact(&t, rs, ENG_PAD_MANUAL, 5.0, 0, &info), MD_EINVAL);
    bson_destroy(&info);
    eng_rs_close(rs);
    mmt_verify_clean(&t);
    mmt_close(&t);
}

Test(mm_compact, abort_leaves_no_trace)
{
    mmt t;
    mmt_open(&t);
    eng_rs *rs = mmt_coll(&t, "test.c", ENG_ALLOC_POWEROF2);
    eng_rid ids[300];
    for (int i = 0; i < 300; i++)
        ids[i] = mmt_insert(&t, rs, i, 100);
    for (int i = 0; i < 300; i += 2)
        mmt_remove(&t, rs, ids[i]);
    struct eng_rs_stats before, after;
    mmt_stats(rs, &before);
    eng_txn *x = mmt_begin(&t);
    bson_t info = BSON_INITIALIZER;
    cr_assert_eq(eng_rs_compact(rs, x, NULL, &info, &t.err), 0);
    bson_destroy(&info);
    eng_txn_abort(x);
    mmt_stats(rs, &after);
    cr_assert_eq(memcmp(&before, &after, sizeof before), 0);
    for (int i = 1; i < 300; i += 2) {
        const uint8_t *p;
        uint32_t len;
        cr_assert_eq(eng_rs_get(rs, ids[i], &p, &len), 0);
    }
    eng_rs_close(rs);
    mmt_verify_clean(&t);
    mmt_close(&t);
}

Test(mm_compact, survives_reopen)
{
    mmt t;
    mmt_open(&t);
    eng_rs *rs = mmt_coll(&t, "test.c", ENG_ALLOC_POWEROF2);
    for (int i = 0; i < 500; i++)
        mmt_insert(&t, rs, i, 60 + i % 200);
    bson_t info;
    cr_assert_eq(compact(&t, rs, ENG_PAD_NONE, 0, 0, &info), 0);
    bson_destroy(&info);
    eng_rs_close(rs);
    mmt_reopen(&t);
    cr_assert_eq(eng_rs_open(t.e, "test.c", &rs, &t.err), 0);
    int ids[600];
    int32_t lens[600];
    cr_assert_eq(scan(rs, ids, lens, 600), 500);
    /* copies of different sizes may land in earlier free space: the natural
     * order can change, the set of documents does not */
    bool seen[500] = {false};
    for (int i = 0; i < 500; i++) {
        cr_assert(ids[i] >= 0 && ids[i] < 500 && !seen[ids[i]]);
        seen[ids[i]] = true;
    }
    eng_rs_close(rs);
    mmt_verify_clean(&t);
    mmt_close(&t);
}
