/*
 * test_mm_verify.c -- validate on the mmapv1 engine: the info fields of a
 * clean collection, and damage written straight into the data file (record
 * headers, record chain loops, extent magic, free-list pointers, cycles and
 * wrong buckets) reported with file and offset -- never a crash or a hang,
 * and reads of damaged records fail cleanly.
 */
#include "test_mm_util.h"

#define EXT0 8192
#define REC(i) (EXT0 + MM_EXT_HDR + 128 * (i)) /* 100-byte docs, powerOf2 */

static eng_rs *setup(mmt *t, int n, eng_rid *ids)
{
    mmt_open(t);
    eng_rs *rs = mmt_coll(t, "test.c", ENG_ALLOC_POWEROF2);
    for (int i = 0; i < n; i++) {
        eng_rid r = mmt_insert(t, rs, i, 100);
        if (ids)
            ids[i] = r;
    }
    return rs;
}

static void expect_error(eng_rs *rs, const char *needle)
{
    eng_validate v;
    int n = mmt_validate(rs, &v);
    char *s = mmt_errors(&v);
    cr_assert_gt(n, 0, "no error reported");
    cr_assert(mmt_has_error(&v, needle), "want \"%s\" in %s", needle, s);
    bson_free(s);
    eng_validate_cleanup(&v);
}

Test(mm_verify, clean_collection_info)
{
    mmt t;
    eng_rid ids[10];
    eng_rs *rs = setup(&t, 10, ids);
    mmt_remove(&t, rs, ids[2]);
    mmt_remove(&t, rs, ids[5]);
    eng_validate v;
    cr_assert_eq(mmt_validate(rs, &v), 0);
    cr_assert_eq(mmt_bson_int(&v.info, "nrecords"), 8);
    cr_assert_eq(mmt_bson_int(&v.info, "datasize"), 8 * 112);
    cr_assert_eq(mmt_bson_int(&v.info, "extentCount"), 1);
    cr_assert_eq(mmt_bson_int(&v.info, "deletedCount"), 3);
    cr_assert_eq(mmt_bson_int(&v.info, "deletedSize"), 2 * 128 + (8192 - 176 - 10 * 128));
    cr_assert_eq(mmt_bson_int(&v.info, "nQuantizedSize"), 8);
    cr_assert_eq(mmt_bson_int(&v.info, "bytesWithHeaders"), 8 * 128);
    cr_assert_eq(mmt_bson_int(&v.info, "bytesWithoutHeaders"), 8 * 100);
    eng_validate_cleanup(&v);
    eng_rs_close(rs);
    mmt_verify_clean(&t);
    mmt_close(&t);
}

Test(mm_verify, damaged_record_length)
{
    mmt t;
    eng_rid ids[10];
    eng_rs *rs = setup(&t, 10, ids);
    mmt_poke32(&t, 0, REC(3), 0x7fffff00);
    expect_error(rs, "record at file 0 offset 0x2230: lengthWithHeaders 2147483392 out of range");
    const uint8_t *p;
    uint32_t len;
    cr_assert_eq(eng_rs_get(rs, ids[3], &p, &len), MD_NOTFOUND);
    cr_assert_eq(eng_rs_get(rs, ids[2], &p, &len), 0);
    eng_rs_cursor *c;
    eng_rid rid;
    int n = 0, rc;
    cr_assert_eq(eng_rs_cursor_open(rs, true, &c), 0);
    while ((rc = eng_rs_cursor_next(c, &rid, &p, &len)) == 0)
        n++;
    cr_assert_eq(rc, MD_ECORRUPT);
    cr_assert_eq(n, 3);
    eng_rs_cursor_close(c);
    eng_rs_close(rs);
    mmt_close(&t);
}

Test(mm_verify, damaged_record_extent_ofs_and_prev)
{
    mmt t;
    eng_rs *rs = setup(&t, 10, NULL);
    mmt_poke32(&t, 0, REC(4) + 4, 0x5000);
    mmt_poke32(&t, 0, REC(6) + 12, REC(1));
    eng_validate v;
    cr_assert_eq(mmt_validate(rs, &v), 2);
    cr_assert(mmt_has_error(&v, "offset 0x22b0: extentOfs 0x5000, expected 0x2000"));
    cr_assert(mmt_has_error(&v, "offset 0x23b0: prevOfs 0x2130, expected 0x2330"));
    eng_validate_cleanup(&v);
    eng_rs_close(rs);
    mmt_close(&t);
}

Test(mm_verify, record_chain_loop_terminates)
{
    mmt t;
    eng_rs *rs = setup(&t, 10, NULL);
    mmt_poke32(&t, 0, REC(7) + 8, REC(2)); /* nextOfs of 7 back to 2 */
    expect_error(rs, "record chain loops");
    /* a cursor over the loop stops with an error too */
    eng_rs_cursor *c;
    eng_rid rid;
    const uint8_t *p;
    uint32_t len;
    int n = 0, rc;
    cr_assert_eq(eng_rs_cursor_open(rs, true, &c), 0);
    while ((rc = eng_rs_cursor_next(c, &rid, &p, &len)) == 0)
        n++;
    cr_assert_eq(rc, MD_ECORRUPT);
    cr_assert_gt(n, 10);
    eng_rs_cursor_close(c);
    eng_rs_close(rs);
    mmt_close(&t);
}

Test(mm_verify, damaged_extent_magic)
{
    mmt t;
    eng_rs *rs = setup(&t, 100, NULL); /* second extent at 0x4000 */
    mmt_poke32(&t, 0, 0x4000, 0x11111111);
    expect_error(rs, "extent at file 0 offset 0x4000: bad magic 0x11111111 (expected 0x41424344)");
    eng_validate v;
    eng_validate_init(&v, true);
    cr_assert_eq(mm_verify(t.e, &v), 0);
    cr_assert_gt(v.nerrors, 0);
    eng_validate_cleanup(&v);
    eng_rs_close(rs);
    mmt_close(&t);
}

Test(mm_verify, extent_link_damage)
{
    mmt t;
    eng_rs *rs = setup(&t, 100, NULL);
    mmt_poke32(&t, 0, 0x4000 + 20 + 4, 0x7000); /* xprev.ofs of the second extent */
    expect_error(rs, "xprev 0:0x7000, expected 0:0x2000");
    mmt_poke32(&t, 0, 0x2000 + 12 + 4, 0x2000); /* xnext of the first: itself */
    expect_error(rs, "extent chain loops");
    eng_rs_close(rs);
    mmt_close(&t);
}

Test(mm_verify, damaged_free_list_pointer)
{
    mmt t;
    eng_rid ids[10];
    eng_rs *rs = setup(&t, 10, ids);
    mmt_remove(&t, rs, ids[4]);
    mmt_remove(&t, rs, ids[6]); /* bucket 3: 6 -> 4 */
    mmt_poke32(&t, 0, REC(6) + 12, 0x100); /* nextDeleted.ofs into the file header */
    expect_error(rs, "free list 3: entry 0:0x100 is not inside an extent of this namespace");
    mmt_poke32(&t, 0, REC(6) + 12, 0x7ffffff0); /* far outside the file */
    expect_error(rs, "free list 3: entry 0:0x7ffffff0 is not inside an extent");
    eng_rs_close(rs);
    mmt_close(&t);
}

Test(mm_verify, free_list_cycle_terminates)
{
    mmt t;
    eng_rid ids[10];
    eng_rs *rs = setup(&t, 10, ids);
    mmt_remove(&t, rs, ids[4]);
    mmt_remove(&t, rs, ids[6]);
    mmt_poke32(&t, 0, REC(4) + 8, 0); /* 6 -> 4 -> 6 ... */
    mmt_poke32(&t, 0, REC(4) + 12, REC(6));
    expect_error(rs, "free list 3 loops");
    eng_rs_close(rs);
    mmt_close(&t);
}

Test(mm_verify, free_record_in_wrong_bucket_and_overlap)
{
    mmt t;
    eng_rid ids[10];
    eng_rs *rs = setup(&t, 10, ids);
    mmt_remove(&t, rs, ids[4]);
    mmt_poke32(&t, 0, REC(4), 300); /* now claims 300 bytes: bucket 4, overlaps 5, 6 */
    expect_error(rs, "free record at file 0 offset 0x22b0 of 300 bytes is in bucket 3, expected 4");
    expect_error(rs, "overlaps free record at 0x22b0");
    eng_rs_close(rs);
    mmt_close(&t);
}

Test(mm_verify, count_mismatch)
{
    mmt t;
    eng_rs *rs = setup(&t, 5, NULL);
    mm_engine *e = (mm_engine *)t.e;
    int32_t slot = mm_ns_find(e, "test.c");
    char path[128];
    snprintf(path, sizeof path, "%s/test.ns", t.dir);
    mmt_settle(&t);
    int fd = open(path, O_RDWR);
    int64_t n = 7;
    cr_assert_eq(pwrite(fd, &n, 8, (int64_t)slot * 640 + 368), 8);
    close(fd);
    expect_error(rs, "nrecords is 7 in the namespace details, 5 records found");
    eng_rs_close(rs);
    mmt_close(&t);
}

Test(mm_verify, engine_wide_after_mixed_work)
{
    mmt t;
    eng_rid ids[400];
    eng_rs *rs = setup(&t, 400, ids);
    eng_rs *b = mmt_coll(&t, "test.b", ENG_ALLOC_NOPADDING);
    for (int i = 0; i < 400; i += 3) {
        bool moved;
        cr_assert_eq(mmt_update(&t, rs, ids[i], i, 300, &ids[i], &moved), 0);
        mmt_insert(&t, b, i, 50 + i);
    }
    for (int i = 1; i < 400; i += 3)
        mmt_remove(&t, rs, ids[i]);
    mmt_verify_clean(&t);
    eng_txn *x = mmt_begin(&t);
    cr_assert_eq(eng_rs_drop(t.e, x, "test.b"), 0);
    mmt_commit(x);
    mmt_verify_clean(&t);
    eng_rs_close(b);
    eng_rs_close(rs);
    mmt_close(&t);
}

Test(mm_verify, damaged_free_record_fails_the_insert_cleanly)
{
    mmt t;
    eng_rid ids[10];
    eng_rs *rs = setup(&t, 10, ids);
    mmt_remove(&t, rs, ids[4]); /* head of bucket 3 */
    mmt_poke32(&t, 0, REC(4) + 4, 0x123); /* its extentOfs */
    bson_t b;
    mmt_doc(&b, 99, 100);
    eng_txn *x = mmt_begin(&t);
    eng_rid rid;
    cr_assert_eq(eng_rs_insert(rs, x, bson_get_data(&b), b.len, &rid, &t.err), MD_ECORRUPT);
    cr_assert(strstr(t.err.message, "free list 3 head 0:0x22b0"), "%s", t.err.message);
    eng_txn_abort(x);
    bson_destroy(&b);
    eng_rs_close(rs);
    mmt_close(&t);
}

Test(mm_verify, damaged_extent_my_loc)
{
    mmt t;
    eng_rs *rs = setup(&t, 100, NULL); /* second extent at 0x4000 */
    mmt_poke32(&t, 0, 0x4000 + 4 + 4, 0x9000); /* myLoc.ofs */
    expect_error(rs, "extent at file 0 offset 0x4000: myLoc is 0:0x9000");
    eng_rs_close(rs);
    mmt_close(&t);
}

Test(mm_verify, damaged_extent_length_past_the_file)
{
    mmt t;
    eng_rs *rs = setup(&t, 100, NULL);
    mmt_poke32(&t, 0, 12 + 4, 0x7ff00000); /* the file header's unused.ofs */
    mmt_poke32(&t, 0, 0x4000 + 156, 0x1000000); /* the second extent's length */
    expect_error(rs, "extent at file 0 offset 0x4000: length 16777216 runs past");
    eng_rs_close(rs);
    mmt_close(&t);
}

/* Bytes read from a damaged file reach the validate reply escaped, so the
 * reply stays valid UTF-8 (and printable as JSON). */
Test(mm_verify, damaged_ns_diagnostic_is_escaped)
{
    mmt t;
    eng_rs *rs = setup(&t, 100, NULL);
    uint8_t bad[2] = {0xff, 0x01};
    mmt_poke(&t, 0, 0x4000 + 28 + 3, bad, sizeof bad);
    eng_validate v;
    cr_assert_eq(mmt_validate(rs, &v), 1);
    char *s = mmt_errors(&v);
    cr_assert_not_null(s, "the errors are not valid UTF-8");
    cr_assert(strstr(s, "nsDiagnostic is \\\"tes\\\\xff\\\\x01c\\\""), "%s", s);
    bson_free(s);
    eng_validate_cleanup(&v);
    eng_rs_close(rs);
    mmt_close(&t);
}
