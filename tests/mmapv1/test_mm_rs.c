/*
 * test_mm_rs.c -- mmapv1 record stores: insert/get/remove, in-place updates
 * versus moves, damages, the paddingFactor strategy, cursors with
 * save/restore, transactions (abort), truncate, drop, the catalog, and
 * persistence across close and reopen.
 */
#include "test_mm_util.h"

static bson_t *getdoc(eng_rs *rs, eng_rid rid, bson_t *b)
{
    const uint8_t *p;
    uint32_t len;
    cr_assert_eq(eng_rs_get(rs, rid, &p, &len), 0);
    cr_assert(bson_init_static(b, p, len));
    return b;
}

static int doc_id(eng_rs *rs, eng_rid rid)
{
    bson_t b;
    return (int)mmt_bson_int(getdoc(rs, rid, &b), "_id");
}

Test(mm_rs, insert_get_remove)
{
    mmt t;
    mmt_open(&t);
    eng_rs *rs = mmt_coll(&t, "test.c", ENG_ALLOC_POWEROF2);
    eng_rid a = mmt_insert(&t, rs, 7, 100);
    const uint8_t *p;
    uint32_t len;
    cr_assert_eq(eng_rs_get(rs, a, &p, &len), 0);
    cr_assert_eq(len, 100);
    cr_assert_eq(doc_id(rs, a), 7);
    mmt_remove(&t, rs, a);
    cr_assert_eq(eng_rs_get(rs, a, &p, &len), MD_NOTFOUND);
    cr_assert_eq(p[0], 0xee); /* deleted records are marked */
    eng_txn *x = mmt_begin(&t);
    cr_assert_eq(eng_rs_remove(rs, x, a), MD_NOTFOUND);
    cr_assert_eq(eng_rs_remove(rs, x, a + 4), MD_NOTFOUND); /* not a record start */
    cr_assert_eq(eng_rs_remove(rs, x, ((eng_rid)9 << 32) | 8368), MD_NOTFOUND);
    eng_txn_abort(x);
    struct eng_rs_stats s;
    mmt_stats(rs, &s);
    cr_assert_eq(s.count, 0);
    cr_assert_eq(s.data_size, 0);
    cr_assert_eq(s.n_inserts, 1);
    eng_rs_close(rs);
    mmt_close(&t);
}

Test(mm_rs, update_in_place_until_the_slot_is_outgrown)
{
    mmt t;
    mmt_open(&t);
    eng_rs *rs = mmt_coll(&t, "test.c", ENG_ALLOC_POWEROF2);
    eng_rid a = mmt_insert(&t, rs, 1, 100), b;
    bool moved;
    cr_assert_eq(mmt_update(&t, rs, a, 1, 112, &b, &moved), 0); /* netLength 112 */
    cr_assert(!moved);
    cr_assert_eq(b, a);
    cr_assert_eq(mmt_update(&t, rs, a, 1, 60, &b, &moved), 0); /* shrink: in place */
    cr_assert(!moved && b == a);
    cr_assert_eq(mmt_update(&t, rs, a, 1, 113, &b, &moved), 0);
    cr_assert(moved);
    cr_assert_neq(b, a);
    cr_assert_eq(mmt_reclen(rs, b), 256); /* fresh padding */
    cr_assert_eq(doc_id(rs, b), 1);
    const uint8_t *p;
    uint32_t len;
    cr_assert_eq(eng_rs_get(rs, a, &p, &len), MD_NOTFOUND);
    struct eng_rs_stats s;
    mmt_stats(rs, &s);
    cr_assert_eq(s.n_updates, 3);
    cr_assert_eq(s.n_inplace, 2);
    cr_assert_eq(s.n_moves, 1);
    cr_assert_eq(s.count, 1);
    cr_assert_eq(s.data_size, 240);
    cr_assert_eq(s.bytes_written, 100 + 112 + 60 + 113);
    cr_assert_eq(t.e->ops->total_moves(t.e), 1);
    /* the old slot is free and reused */
    cr_assert_eq(mmt_insert(&t, rs, 2, 100), a);
    eng_rs_close(rs);
    mmt_verify_clean(&t);
    mmt_close(&t);
}

Test(mm_rs, update_damages_writes_only_patches)
{
    mmt t;
    mmt_open(&t);
    eng_rs *rs = mmt_coll(&t, "test.c", ENG_ALLOC_POWEROF2);
    eng_rid a = mmt_insert(&t, rs, 1, 40);
    bson_t nd;
    mmt_doc(&nd, 9, 40);
    uint8_t *src = (uint8_t *)bson_get_data(&nd);
    src[30] = 'Q';
    /* _id value lives at offset 4 + 1 + 4 = 9; patch it and one string byte */
    eng_damage dm[2] = {{9, 9, 4}, {30, 30, 1}};
    eng_txn *x = mmt_begin(&t);
    cr_assert(eng_rs_has_damages(rs));
    cr_assert_eq(eng_rs_update_damages(rs, x, a, src, dm, 2, &t.err), 0);
    eng_damage outside = {0, 38, 4};
    cr_assert_eq(eng_rs_update_damages(rs, x, a, src, &outside, 1, &t.err), MD_EINVAL);
    mmt_commit(x);
    const uint8_t *p;
    uint32_t len;
    cr_assert_eq(eng_rs_get(rs, a, &p, &len), 0);
    cr_assert_eq(memcmp(p, src, 40), 0);
    struct eng_rs_stats s;
    mmt_stats(rs, &s);
    cr_assert_eq(s.n_inplace, 1);
    cr_assert_eq(s.bytes_written, 40 + 5);
    bson_destroy(&nd);
    eng_rs_close(rs);
    mmt_close(&t);
}

static double padding_factor(eng_rs *rs)
{
    bson_t sub;
    mmt_engine_stats(rs, &sub);
    double pf = mmt_bson_double(&sub, "paddingFactor");
    bson_destroy(&sub);
    return pf;
}

Test(mm_rs, paddingfactor_rises_with_moves_and_falls_with_fits)
{
    mmt t;
    mmt_open(&t);
    eng_rs *rs = mmt_coll(&t, "test.c", ENG_ALLOC_PADDINGFACTOR);
    eng_rid ids[40];
    for (int i = 0; i < 40; i++)
        ids[i] = mmt_insert(&t, rs, i, 50);
    /* 10 rounds of growth: 1 move in 4 raises the factor by 0.003 (no
     * indexes: 0.001 * (0 + 3)), 1 fitting update in 4 lowers it by 0.001 */
    int moves = 0, fits = 0;
    for (int round = 1; round <= 10; round++) {
        for (int i = 0; i < 40; i++) {
            bool moved;
            cr_assert_eq(mmt_update(&t, rs, ids[i], i, 50 + 40 * round, &ids[i], &moved), 0);
            moves += moved;
            fits += !moved;
        }
    }
    double pf = padding_factor(rs);
    cr_assert_gt(moves, 200);
    cr_assert_float_eq(pf, 1.0 + 0.003 * ((moves + 3) / 4) - 0.001 * ((fits + 3) / 4), 1e-9);
    cr_assert_gt(pf, 1.2);
    /* a new record is allocated with the factor */
    eng_rid n = mmt_insert(&t, rs, 99, 484); /* 500 with header */
    int32_t want = ((int32_t)(500 * pf) + 3) & ~3;
    cr_assert_eq(mmt_reclen(rs, n), want);
    /* fitting updates: 1 in 4 lowers by 0.001 */
    for (int k = 0; k < 400; k++) {
        bool moved;
        cr_assert_eq(mmt_update(&t, rs, n, 99, 484, &n, &moved), 0);
        cr_assert(!moved);
    }
    cr_assert_float_eq(padding_factor(rs), pf - 0.1, 1e-9);
    eng_rs_close(rs);
    mmt_verify_clean(&t);
    mmt_close(&t);
}

Test(mm_rs, paddingfactor_stays_within_bounds)
{
    mmt t;
    mmt_open(&t);
    eng_rs *rs = mmt_coll(&t, "test.c", ENG_ALLOC_PADDINGFACTOR);
    eng_rid a = mmt_insert(&t, rs, 1, 30);
    for (int k = 0; k < 20; k++) {
        bool moved;
        cr_assert_eq(mmt_update(&t, rs, a, 1, 30, &a, &moved), 0);
    }
    cr_assert_float_eq(padding_factor(rs), 1.0, 1e-12); /* floor */
    eng_rs_close(rs);
    mmt_close(&t);
}

Test(mm_rs, set_alloc_switches_strategy)
{
    mmt t;
    mmt_open(&t);
    eng_rs *rs = mmt_coll(&t, "test.c", ENG_ALLOC_POWEROF2);
    eng_txn *x = mmt_begin(&t);
    cr_assert_eq(eng_rs_set_alloc(rs, x, ENG_ALLOC_NOPADDING), 0);
    cr_assert_eq(eng_rs_set_alloc(rs, x, 7), MD_EINVAL);
    mmt_commit(x);
    cr_assert_eq(mmt_reclen(rs, mmt_insert(&t, rs, 1, 100)), 116);
    bson_t sub;
    mmt_engine_stats(rs, &sub);
    cr_assert_eq(mmt_bson_int(&sub, "userFlags"), MM_FLAG_NOPADDING);
    bson_iter_t it;
    cr_assert(bson_iter_init_find(&it, &sub, "allocationStrategy"));
    cr_assert_str_eq(bson_iter_utf8(&it, NULL), "noPadding");
    bson_destroy(&sub);
    eng_rs_close(rs);
    mmt_close(&t);
}

/* Ids in cursor order. */
static int scan(eng_rs *rs, bool forward, int *out, int max)
{
    eng_rs_cursor *c;
    eng_rid rid;
    const uint8_t *p;
    uint32_t len;
    int n = 0;
    cr_assert_eq(eng_rs_cursor_open(rs, forward, &c), 0);
    while (eng_rs_cursor_next(c, &rid, &p, &len) == 0 && n < max)
        out[n++] = doc_id(rs, rid);
    cr_assert_eq(eng_rs_cursor_next(c, &rid, &p, &len), MD_NOTFOUND);
    eng_rs_cursor_close(c);
    return n;
}

Test(mm_rs, cursors_walk_extents_forward_and_backward)
{
    mmt t;
    mmt_open(&t);
    eng_rs *rs = mmt_coll(&t, "test.c", ENG_ALLOC_POWEROF2);
    for (int i = 0; i < 300; i++) /* spans 3 extents */
        mmt_insert(&t, rs, i, 100);
    int ids[400];
    cr_assert_eq(scan(rs, true, ids, 400), 300);
    for (int i = 0; i < 300; i++)
        cr_assert_eq(ids[i], i);
    cr_assert_eq(scan(rs, false, ids, 400), 300);
    for (int i = 0; i < 300; i++)
        cr_assert_eq(ids[i], 299 - i);
    eng_rs_close(rs);
    mmt_close(&t);
}

Test(mm_rs, cursor_restore_skips_removed_and_moved_records)
{
    mmt t;
    mmt_open(&t);
    eng_rs *rs = mmt_coll(&t, "test.c", ENG_ALLOC_POWEROF2);
    eng_rid r[6];
    for (int i = 0; i < 6; i++)
        r[i] = mmt_insert(&t, rs, i, 100);
    eng_rs_cursor *c;
    eng_rid rid;
    const uint8_t *p;
    uint32_t len;
    cr_assert_eq(eng_rs_cursor_open(rs, true, &c), 0);
    cr_assert_eq(eng_rs_cursor_next(c, &rid, &p, &len), 0);
    cr_assert_eq(rid, r[0]);
    eng_rs_cursor_save(c);
    mmt_remove(&t, rs, r[0]); /* the current one */
    mmt_remove(&t, rs, r[1]); /* the next one */
    eng_rid nr;
    bool moved;
    cr_assert_eq(mmt_update(&t, rs, r[2], 2, 500, &nr, &moved), 0); /* moves to the end */
    cr_assert(moved);
    mmt_remove(&t, rs, r[5]); /* further ahead: the position must not change */
    cr_assert_eq(eng_rs_cursor_restore(c), 0);
    int seen[8], n = 0;
    while (eng_rs_cursor_next(c, &rid, &p, &len) == 0)
        seen[n++] = doc_id(rs, rid);
    cr_assert_eq(n, 3);
    cr_assert_eq(seen[0], 3);
    cr_assert_eq(seen[1], 4);
    cr_assert_eq(seen[2], 2); /* the moved document, at its new place */
    eng_rs_cursor_close(c);
    eng_rs_close(rs);
    mmt_close(&t);
}

Test(mm_rs, abort_restores_everything)
{
    mmt t;
    mmt_open(&t);
    eng_rs *rs = mmt_coll(&t, "test.c", ENG_ALLOC_POWEROF2);
    eng_rid a = mmt_insert(&t, rs, 1, 100);
    struct eng_rs_stats before, after;
    mmt_stats(rs, &before);
    eng_txn *x = mmt_begin(&t);
    bson_t b;
    mmt_doc(&b, 2, 3000);
    eng_rid n, m;
    bool moved;
    for (int i = 0; i < 60; i++) /* enough to add extents and a data file */
        cr_assert_eq(eng_rs_insert(rs, x, bson_get_data(&b), b.len, &n, &t.err), 0);
    cr_assert_eq(eng_rs_update(rs, x, a, bson_get_data(&b), b.len, &m, &moved, &t.err), 0);
    cr_assert(moved);
    cr_assert_eq(eng_rs_create(t.e, x, "test.d", NULL, &t.err), 0);
    eng_txn_abort(x);
    bson_destroy(&b);
    mmt_stats(rs, &after);
    cr_assert_eq(memcmp(&before, &after, sizeof before), 0);
    cr_assert_eq(doc_id(rs, a), 1);
    eng_rs *d;
    cr_assert_eq(eng_rs_open(t.e, "test.d", &d, &t.err), MD_NOTFOUND);
    cr_assert_eq(t.e->ops->total_moves(t.e), 0);
    mmt_verify_clean(&t);
    eng_rs_close(rs);
    mmt_close(&t);
}

Test(mm_rs, truncate_keeps_the_first_extent)
{
    mmt t;
    mmt_open(&t);
    eng_rs *rs = mmt_coll(&t, "test.c", ENG_ALLOC_POWEROF2);
    for (int i = 0; i < 200; i++)
        mmt_insert(&t, rs, i, 100);
    eng_txn *x = mmt_begin(&t);
    cr_assert_eq(eng_rs_truncate(rs, x), 0);
    mmt_commit(x);
    struct eng_rs_stats s;
    mmt_stats(rs, &s);
    cr_assert_eq(s.count, 0);
    cr_assert_eq(s.storage_size, 8192);
    cr_assert_eq(mmt_insert(&t, rs, 1, 100), (eng_rid)(8192 + 176));
    eng_rs_close(rs);
    mmt_verify_clean(&t);
    mmt_close(&t);
}

Test(mm_rs, drop_frees_extents_for_reuse)
{
    mmt t;
    mmt_open(&t);
    eng_rs *rs = mmt_coll(&t, "test.c", ENG_ALLOC_POWEROF2);
    mmt_insert(&t, rs, 1, 100);
    eng_rs_close(rs);
    eng_txn *x = mmt_begin(&t);
    cr_assert_eq(eng_rs_drop(t.e, x, "test.c"), 0);
    cr_assert_eq(eng_rs_drop(t.e, x, "test.c"), MD_NOTFOUND);
    mmt_commit(x);
    cr_assert_eq(eng_rs_open(t.e, "test.c", &rs, &t.err), MD_NOTFOUND);
    mm_engine *e = (mm_engine *)t.e;
    cr_assert_eq(mm_dfh_at(e, 0)->free_start.ofs, 8192);
    mmt_verify_clean(&t);
    /* a new collection takes the freed 8 KB extent back */
    rs = mmt_coll(&t, "test.other", ENG_ALLOC_POWEROF2);
    cr_assert_eq(mmt_insert(&t, rs, 1, 100), (eng_rid)(8192 + 176));
    cr_assert(mm_loc_is_null(mm_dfh_at(e, 0)->free_start));
    eng_rs_close(rs);
    mmt_verify_clean(&t);
    mmt_close(&t);
}

Test(mm_rs, create_twice_is_eexists)
{
    mmt t;
    mmt_open(&t);
    eng_rs *rs = mmt_coll(&t, "test.c", ENG_ALLOC_POWEROF2);
    eng_txn *x = mmt_begin(&t);
    cr_assert_eq(eng_rs_create(t.e, x, "test.c", NULL, &t.err), MD_EEXISTS);
    eng_txn *y;
    cr_assert_eq(eng_txn_begin(t.e, &y), MD_EBUSY); /* one at a time */
    eng_txn_abort(x);
    eng_rs_close(rs);
    mmt_close(&t);
}

static int collect(void *ctx, const char *key, const bson_t *value)
{
    char *buf = ctx;
    char item[64];
    snprintf(item, sizeof item, "%s=%d;", key, (int)mmt_bson_int(value, "n"));
    strcat(buf, item);
    return 0;
}

static void put(mmt *t, const char *key, int n)
{
    bson_t v = BSON_INITIALIZER;
    BSON_APPEND_INT32(&v, "n", n);
    eng_txn *x = mmt_begin(t);
    cr_assert_eq(eng_meta_put(t->e, x, key, &v, &t->err), 0);
    mmt_commit(x);
    bson_destroy(&v);
}

Test(mm_rs, catalog_put_get_list_del)
{
    mmt t;
    mmt_open(&t);
    put(&t, "test.b", 2);
    put(&t, "test.a", 1);
    put(&t, "test.c", 3);
    put(&t, "test.b", 20); /* overwrite, with a bigger value below */
    bson_t big = BSON_INITIALIZER;
    BSON_APPEND_INT32(&big, "n", 30);
    BSON_APPEND_UTF8(&big, "pad", "................................................................"
                                  "................................................................");
    eng_txn *x = mmt_begin(&t);
    cr_assert_eq(eng_meta_put(t.e, x, "test.c", &big, &t.err), 0); /* moves */
    cr_assert_eq(eng_meta_del(t.e, x, "test.a"), 0);
    cr_assert_eq(eng_meta_del(t.e, x, "test.zz"), MD_NOTFOUND);
    mmt_commit(x);
    bson_destroy(&big);
    char buf[256] = "";
    cr_assert_eq(eng_meta_list(t.e, collect, buf), 0);
    cr_assert_str_eq(buf, "test.b=20;test.c=30;");
    /* an aborted change leaves the catalog as it was */
    x = mmt_begin(&t);
    bson_t v = BSON_INITIALIZER;
    cr_assert_eq(eng_meta_put(t.e, x, "test.new", &v, &t.err), 0);
    cr_assert_eq(eng_meta_del(t.e, x, "test.b"), 0);
    eng_txn_abort(x);
    buf[0] = '\0';
    eng_meta_list(t.e, collect, buf);
    cr_assert_str_eq(buf, "test.b=20;test.c=30;");
    mmt_reopen(&t);
    buf[0] = '\0';
    eng_meta_list(t.e, collect, buf);
    cr_assert_str_eq(buf, "test.b=20;test.c=30;");
    bson_t out;
    cr_assert_eq(eng_meta_get(t.e, "test.c", &out), 0);
    cr_assert_eq(mmt_bson_int(&out, "n"), 30);
    bson_destroy(&out);
    cr_assert_eq(eng_meta_get(t.e, "test.a", &out), MD_NOTFOUND);
    eng_rs *cat; /* the catalog namespace is not a collection */
    cr_assert_eq(eng_rs_open(t.e, "test.system.namespaces", &cat, &t.err), MD_NOTFOUND);
    mmt_verify_clean(&t);
    mmt_close(&t);
}

Test(mm_rs, everything_survives_reopen)
{
    mmt t;
    mmt_open(&t);
    eng_rs *rs = mmt_coll(&t, "test.c", ENG_ALLOC_PADDINGFACTOR);
    eng_rid ids[100];
    for (int i = 0; i < 100; i++)
        ids[i] = mmt_insert(&t, rs, i, 80);
    for (int i = 0; i < 100; i += 2) {
        bool moved;
        cr_assert_eq(mmt_update(&t, rs, ids[i], i, 200, &ids[i], &moved), 0);
    }
    for (int i = 1; i < 100; i += 4)
        mmt_remove(&t, rs, ids[i]);
    struct eng_rs_stats before, after;
    mmt_stats(rs, &before);
    double pf = padding_factor(rs);
    eng_rs_close(rs);
    mmt_reopen(&t);
    cr_assert_eq(eng_rs_open(t.e, "test.c", &rs, &t.err), 0);
    mmt_stats(rs, &after);
    cr_assert_eq(memcmp(&before, &after, sizeof before), 0);
    cr_assert_eq(before.n_moves, 50);
    cr_assert_float_eq(padding_factor(rs), pf, 1e-12);
    cr_assert_eq(t.e->ops->total_moves(t.e), 50);
    for (int i = 0; i < 100; i++) {
        const uint8_t *p;
        uint32_t len;
        int rc = eng_rs_get(rs, ids[i], &p, &len);
        if (i % 4 == 1) {
            cr_assert_eq(rc, MD_NOTFOUND);
        } else {
            cr_assert_eq(rc, 0);
            cr_assert_eq(doc_id(rs, ids[i]), i);
            cr_assert_eq(len, i % 2 ? 80u : 200u);
        }
    }
    eng_rs_close(rs);
    mmt_verify_clean(&t);
    mmt_close(&t);
}

Test(mm_rs, remap_on_grow_keeps_working)
{
    mmt t;
    mmt_open_ex(&t, true);
    eng_rs *rs = mmt_coll(&t, "test.c", ENG_ALLOC_POWEROF2);
    eng_rid ids[300];
    for (int i = 0; i < 300; i++)
        ids[i] = mmt_insert(&t, rs, i, 200);
    for (int i = 0; i < 300; i += 3) { /* moves that add files while copying */
        bool moved;
        cr_assert_eq(mmt_update(&t, rs, ids[i], i, 1000, &ids[i], &moved), 0);
    }
    for (int i = 0; i < 300; i++)
        cr_assert_eq(doc_id(rs, ids[i]), i);
    bson_t st = BSON_INITIALIZER;
    t.e->ops->append_status(t.e, &st);
    cr_assert_gt(mmt_bson_int(&st, "mmapv1.remaps"), 0);
    cr_assert_gt(mmt_bson_int(&st, "mmapv1.dataFiles"), 1);
    bson_destroy(&st);
    eng_rs_close(rs);
    mmt_verify_clean(&t);
    mmt_close(&t);
}
