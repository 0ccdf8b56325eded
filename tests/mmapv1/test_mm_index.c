/*
 * test_mm_index.c -- sorted stores on the mmapv1 engine: the pager glue
 * between mm_btree.c and the allocator.  Buckets are 8192-byte records of
 * the index's own namespace, index size is the namespace's extents, the
 * root survives reopen, drop frees the extents, abort undoes bucket
 * allocation, and creating an index counts in the collection's nIndexes.
 */
#include "test_mm_util.h"

static void key_of(int i, char *buf, size_t n)
{
    snprintf(buf, n, "key%06d", i);
}

static eng_ss *make_index(mmt *t, const char *name, int n)
{
    eng_txn *x = mmt_begin(t);
    cr_assert_eq(eng_ss_create(t->e, x, name, &t->err), 0, "%s", t->err.message);
    mmt_commit(x);
    eng_ss *ss;
    cr_assert_eq(eng_ss_open(t->e, name, &ss, &t->err), 0, "%s", t->err.message);
    x = mmt_begin(t);
    for (int i = 0; i < n; i++) {
        char k[32];
        key_of(i, k, sizeof k);
        cr_assert_eq(eng_ss_insert(ss, x, (const uint8_t *)k, (uint32_t)strlen(k),
                                   (eng_rid)(10000 + i), false, NULL, &t->err), 0,
                     "%s", t->err.message);
    }
    mmt_commit(x);
    return ss;
}

/* Walk the index in order; returns the count, checks keys and rids. */
static int walk(eng_ss *ss)
{
    eng_ss_cursor *c;
    cr_assert_eq(eng_ss_cursor_open(ss, &c), 0);
    int n = 0, rc = eng_ss_cursor_seek(c, NULL, 0, 0);
    while (rc == 0) {
        const uint8_t *k;
        uint32_t klen;
        eng_rid rid;
        char want[32];
        cr_assert_eq(eng_ss_cursor_get(c, &k, &klen, &rid), 0);
        key_of(n, want, sizeof want);
        cr_assert(klen == strlen(want) && memcmp(k, want, klen) == 0);
        cr_assert_eq(rid, 10000 + n);
        n++;
        rc = eng_ss_cursor_next(c);
    }
    cr_assert_eq(rc, MD_NOTFOUND);
    eng_ss_cursor_close(c);
    return n;
}

/* Every record of the index namespace is an 8192-byte bucket. */
static int count_buckets(mmt *t, const char *name)
{
    mm_engine *e = (mm_engine *)t->e;
    int32_t slot = mm_ns_find(e, name);
    cr_assert_geq(slot, 1);
    int n = 0;
    mm_loc l = mm_loc_null();
    for (;;) {
        cr_assert_eq(mm_rec_step(e, slot, l, true, &l), 0);
        if (mm_loc_is_null(l))
            break;
        cr_assert_eq(mm_record_at(e, l)->len, 8192);
        cr_assert_eq(l.ofs % 4096, 0, "bucket at 0x%x is not page aligned", l.ofs);
        n++;
    }
    return n;
}

Test(mm_index, buckets_are_records_of_the_index_namespace)
{
    mmt t;
    mmt_open(&t);
    eng_rs *rs = mmt_coll(&t, "test.c", ENG_ALLOC_POWEROF2);
    eng_ss *ss = make_index(&t, "test.c.$x_1", 3000);
    cr_assert_eq(eng_ss_entries(ss), 3000);
    cr_assert_eq(walk(ss), 3000);
    int buckets = count_buckets(&t, "test.c.$x_1");
    cr_assert_gt(buckets, 3);
    /* a 128 KB extent holds 15 page-aligned buckets, the next one (512 KB,
     * followupSize) 63 more */
    cr_assert_leq(buckets, 15 + 63);
    cr_assert_eq(eng_ss_size(ss), buckets <= 15 ? 131072 : 131072 + 524288);
    eng_validate v;
    eng_validate_init(&v, true);
    cr_assert_eq(eng_ss_validate(ss, &v), 0);
    char *s = mmt_errors(&v);
    cr_assert_eq(v.nerrors, 0, "%s", s);
    bson_free(s);
    eng_validate_cleanup(&v);
    bson_t sub;
    mmt_engine_stats(rs, &sub);
    cr_assert_eq(mmt_bson_int(&sub, "nIndexes"), 1);
    bson_destroy(&sub);
    eng_ss_close(ss);
    eng_rs_close(rs);
    mmt_verify_clean(&t);
    mmt_close(&t);
}

Test(mm_index, survives_reopen)
{
    mmt t;
    mmt_open(&t);
    eng_ss *ss = make_index(&t, "test.c.$x_1", 2000);
    int64_t size = eng_ss_size(ss);
    eng_ss_close(ss);
    mmt_reopen(&t);
    cr_assert_eq(eng_ss_open(t.e, "test.c.$x_1", &ss, &t.err), 0);
    cr_assert_eq(eng_ss_entries(ss), 2000);
    cr_assert_eq(eng_ss_size(ss), size);
    cr_assert_eq(walk(ss), 2000);
    eng_ss_close(ss);
    mmt_verify_clean(&t);
    mmt_close(&t);
}

Test(mm_index, abort_undoes_buckets)
{
    mmt t;
    mmt_open(&t);
    eng_ss *ss = make_index(&t, "test.c.$x_1", 10);
    int buckets = count_buckets(&t, "test.c.$x_1");
    eng_txn *x = mmt_begin(&t);
    for (int i = 10; i < 3000; i++) {
        char k[32];
        key_of(i, k, sizeof k);
        cr_assert_eq(eng_ss_insert(ss, x, (const uint8_t *)k, (uint32_t)strlen(k),
                                   (eng_rid)(10000 + i), true, NULL, &t.err), 0);
    }
    eng_txn_abort(x);
    cr_assert_eq(eng_ss_entries(ss), 10);
    cr_assert_eq(walk(ss), 10);
    cr_assert_eq(count_buckets(&t, "test.c.$x_1"), buckets);
    eng_ss_close(ss);
    mmt_verify_clean(&t);
    mmt_close(&t);
}

Test(mm_index, drop_and_truncate)
{
    mmt t;
    mmt_open(&t);
    eng_rs *rs = mmt_coll(&t, "test.c", ENG_ALLOC_POWEROF2);
    eng_ss *ss = make_index(&t, "test.c.$x_1", 3000);
    eng_txn *x = mmt_begin(&t);
    cr_assert_eq(eng_ss_truncate(ss, x), 0);
    mmt_commit(x);
    cr_assert_eq(eng_ss_entries(ss), 0);
    cr_assert_eq(count_buckets(&t, "test.c.$x_1"), 0);
    eng_ss_close(ss);
    x = mmt_begin(&t);
    cr_assert_eq(eng_ss_drop(t.e, x, "test.c.$x_1"), 0);
    cr_assert_eq(eng_ss_drop(t.e, x, "test.c.$x_1"), MD_NOTFOUND);
    mmt_commit(x);
    cr_assert_eq(eng_ss_open(t.e, "test.c.$x_1", &ss, &t.err), MD_NOTFOUND);
    bson_t sub;
    mmt_engine_stats(rs, &sub);
    cr_assert_eq(mmt_bson_int(&sub, "nIndexes"), 0);
    bson_destroy(&sub);
    /* an index name is not a record store and vice versa */
    cr_assert_eq(eng_ss_open(t.e, "test.c", &ss, &t.err), MD_NOTFOUND);
    eng_rs_close(rs);
    mmt_verify_clean(&t);
    mmt_close(&t);
}

Test(mm_index, unique_and_remove_through_the_pager)
{
    mmt t;
    mmt_open(&t);
    eng_ss *ss = make_index(&t, "test.c.$x_1", 500);
    eng_txn *x = mmt_begin(&t);
    eng_rid dup = 0;
    cr_assert_eq(eng_ss_insert(ss, x, (const uint8_t *)"key000007", 9, 1, true, &dup, &t.err),
                 MD_EDUPKEY);
    cr_assert_eq(dup, 10007);
    for (int i = 0; i < 500; i += 2) {
        char k[32];
        key_of(i, k, sizeof k);
        cr_assert_eq(eng_ss_remove(ss, x, (const uint8_t *)k, (uint32_t)strlen(k),
                                   (eng_rid)(10000 + i)), 0);
    }
    mmt_commit(x);
    cr_assert_eq(eng_ss_entries(ss), 250);
    eng_ss_close(ss);
    mmt_verify_clean(&t);
    mmt_close(&t);
}

Test(mm_index, remap_on_grow_with_buckets_and_records)
{
    mmt t;
    mmt_open_ex(&t, true);
    eng_rs *rs = mmt_coll(&t, "test.c", ENG_ALLOC_POWEROF2);
    eng_txn *x = mmt_begin(&t);
    cr_assert_eq(eng_ss_create(t.e, x, "test.c.$x_1", &t.err), 0);
    mmt_commit(x);
    eng_ss *ss;
    cr_assert_eq(eng_ss_open(t.e, "test.c.$x_1", &ss, &t.err), 0);
    bson_t b;
    mmt_doc(&b, 1, 700);
    x = mmt_begin(&t);
    for (int i = 0; i < 3000; i++) { /* files are added while the tree splits */
        char k[32];
        eng_rid rid;
        key_of(i, k, sizeof k);
        cr_assert_eq(eng_rs_insert(rs, x, bson_get_data(&b), b.len, &rid, &t.err), 0);
        cr_assert_eq(eng_ss_insert(ss, x, (const uint8_t *)k, (uint32_t)strlen(k),
                                   (eng_rid)(10000 + i), true, NULL, &t.err), 0,
                     "%s", t.err.message);
    }
    mmt_commit(x);
    bson_destroy(&b);
    cr_assert_eq(walk(ss), 3000);
    bson_t st = BSON_INITIALIZER;
    t.e->ops->append_status(t.e, &st);
    cr_assert_gt(mmt_bson_int(&st, "mmapv1.remaps"), 2);
    bson_destroy(&st);
    eng_ss_close(ss);
    eng_rs_close(rs);
    mmt_verify_clean(&t);
    mmt_close(&t);
}
