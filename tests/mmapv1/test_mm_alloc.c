/*
 * test_mm_alloc.c -- record allocation of the mmapv1 engine: quantization
 * and bucket choice (MongoDB 3.0's bucketSizes), free-list reuse and
 * splitting, the three allocation strategies, extent sizing and growth,
 * and data file rollover.
 */
#include "test_mm_util.h"

/* freeList entry of bucket b in append_stats, or 0 when the bucket is empty. */
static int64_t free_count(eng_rs *rs, int b, int64_t *bytes)
{
    bson_t sub;
    bson_iter_t it, arr, item, f;
    int64_t count = 0;
    mmt_engine_stats(rs, &sub);
    cr_assert(bson_iter_init_find(&it, &sub, "freeList") && bson_iter_recurse(&it, &arr));
    while (bson_iter_next(&arr)) {
        bson_iter_recurse(&arr, &item);
        cr_assert(bson_iter_find(&item, "bucket"));
        if (bson_iter_int32(&item) != b)
            continue;
        bson_iter_recurse(&arr, &f);
        bson_iter_find(&f, "count");
        count = bson_iter_as_int64(&f);
        bson_iter_recurse(&arr, &f);
        bson_iter_find(&f, "bytes");
        if (bytes)
            *bytes = bson_iter_as_int64(&f);
    }
    bson_destroy(&sub);
    return count;
}

Test(mm_alloc, quantize_examples)
{
    cr_assert_eq(mm_quantize(100 + 16), 128);
    cr_assert_eq(mm_quantize(112 + 16), 128); /* exact power of two incl. header */
    cr_assert_eq(mm_quantize(113 + 16), 256);
    cr_assert_eq(mm_quantize(1000 + 16), 1024);
    cr_assert_eq(mm_quantize(5000 + 16), 8192);
    cr_assert_eq(mm_quantize(1), 32);
    cr_assert_eq(mm_quantize(3 << 20), 4 << 20);
    cr_assert_eq(mm_quantize((4 << 20) + (512 << 10)), 6 << 20);
    cr_assert_eq(mm_quantize(15 << 20), MM_MAX_ALLOC);
    cr_assert_eq(mm_quantize(MM_MAX_ALLOC), MM_MAX_ALLOC);
    cr_assert(mm_is_quantized(128) && !mm_is_quantized(116));
}

Test(mm_alloc, bucket_is_first_strictly_larger)
{
    cr_assert_eq(mm_bucket(31), 0);
    cr_assert_eq(mm_bucket(32), 1);
    cr_assert_eq(mm_bucket(127), 2);
    cr_assert_eq(mm_bucket(128), 3);
    cr_assert_eq(mm_bucket(4 << 20), 18);
    cr_assert_eq(mm_bucket(MM_MAX_ALLOC - 1), 23);
    cr_assert_eq(mm_bucket(MM_MAX_ALLOC), 24);
    cr_assert_eq(mm_bucket(MM_MAX_ALLOC + 1), 25);
    cr_assert_eq(mm_bucket(100 << 20), 25);
    cr_assert_eq(mm_bucket_sizes[18], 6 << 20);
    cr_assert_eq(mm_bucket_sizes[22], 14 << 20);
}

Test(mm_alloc, powerof2_slot_sizes)
{
    mmt t;
    mmt_open(&t);
    eng_rs *rs = mmt_coll(&t, "test.c", ENG_ALLOC_POWEROF2);
    cr_assert_eq(mmt_reclen(rs, mmt_insert(&t, rs, 1, 100)), 128);
    cr_assert_eq(mmt_reclen(rs, mmt_insert(&t, rs, 2, 112)), 128);
    cr_assert_eq(mmt_reclen(rs, mmt_insert(&t, rs, 3, 1000)), 1024);
    cr_assert_eq(mmt_reclen(rs, mmt_insert(&t, rs, 4, 5000)), 8192);
    struct eng_rs_stats s;
    mmt_stats(rs, &s);
    cr_assert_eq(s.count, 4);
    cr_assert_eq(s.data_size, 112 + 112 + 1008 + 8176); /* sum of netLength */
    eng_rs_close(rs);
    mmt_verify_clean(&t);
    mmt_close(&t);
}

Test(mm_alloc, nopadding_is_exact)
{
    mmt t;
    mmt_open(&t);
    eng_rs *rs = mmt_coll(&t, "test.c", ENG_ALLOC_NOPADDING);
    cr_assert_eq(mmt_reclen(rs, mmt_insert(&t, rs, 1, 100)), 116);
    cr_assert_eq(mmt_reclen(rs, mmt_insert(&t, rs, 2, 101)), 120); /* rounded up to 4 */
    struct eng_rs_stats s;
    mmt_stats(rs, &s);
    cr_assert_eq(s.data_size, 100 + 104);
    eng_rs_close(rs);
    mmt_close(&t);
}

Test(mm_alloc, size_limits)
{
    mmt t;
    mmt_open(&t);
    eng_rs *rs = mmt_coll(&t, "test.c", ENG_ALLOC_POWEROF2);
    eng_txn *x = mmt_begin(&t);
    eng_rid rid;
    uint8_t small[4] = {3, 0, 0, 0};
    cr_assert_eq(eng_rs_insert(rs, x, small, 3, &rid, &t.err), MD_EINVAL);
    uint8_t bad[8] = {9, 0, 0, 0, 0, 0, 0, 0}; /* length prefix disagrees */
    cr_assert_eq(eng_rs_insert(rs, x, bad, 8, &rid, &t.err), MD_EINVAL);
    uint32_t over = MM_MAX_ALLOC - MM_REC_HDR + 1;
    uint8_t *big = calloc(1, over);
    memcpy(big, &over, 4);
    cr_assert_eq(eng_rs_insert(rs, x, big, over, &rid, &t.err), MD_ETOOBIG);
    cr_assert_eq(t.err.code, MD_CODE_BSON_OBJECT_TOO_LARGE);
    /* exactly 16.5 MB with the header is accepted */
    uint32_t max = over - 1;
    memcpy(big, &max, 4);
    cr_assert_eq(eng_rs_insert(rs, x, big, max, &rid, &t.err), 0, "%s", t.err.message);
    mmt_commit(x);
    cr_assert_eq(mmt_reclen(rs, rid), MM_MAX_ALLOC);
    free(big);
    eng_rs_close(rs);
    mmt_close(&t);
}

Test(mm_alloc, freed_record_goes_to_first_larger_bucket)
{
    mmt t;
    mmt_open(&t);
    eng_rs *p2 = mmt_coll(&t, "test.p", ENG_ALLOC_POWEROF2);
    eng_rs *np = mmt_coll(&t, "test.n", ENG_ALLOC_NOPADDING);
    mmt_remove(&t, p2, mmt_insert(&t, p2, 1, 100)); /* 128-byte slot -> bucket 3 */
    mmt_remove(&t, np, mmt_insert(&t, np, 1, 100)); /* 116-byte slot -> bucket 2 */
    int64_t bytes = 0;
    cr_assert_eq(free_count(p2, 3, &bytes), 1);
    cr_assert_eq(bytes, 128);
    cr_assert_eq(free_count(p2, 2, NULL), 0);
    cr_assert_eq(free_count(np, 2, &bytes), 1);
    cr_assert_eq(bytes, 116);
    /* the rest of each first extent: 8192 - 176 - slot, in bucket 8 (8K) */
    cr_assert_eq(free_count(p2, 8, &bytes), 1);
    cr_assert_eq(bytes, 8192 - 176 - 128);
    eng_rs_close(p2);
    eng_rs_close(np);
    mmt_verify_clean(&t);
    mmt_close(&t);
}

Test(mm_alloc, free_list_reuse_looks_only_at_bucket_heads)
{
    mmt t;
    mmt_open(&t);
    eng_rs *rs = mmt_coll(&t, "test.c", ENG_ALLOC_NOPADDING);
    eng_rid a = mmt_insert(&t, rs, 1, 100);
    mmt_insert(&t, rs, 2, 100);
    mmt_remove(&t, rs, a); /* 116 bytes -> bucket 2 */
    /* 110 + 16 = 126 -> 128: search starts at bucket(128) = 3, skipping the
     * 116-byte record, and splits the big free record instead */
    eng_rid c = mmt_insert(&t, rs, 3, 110);
    cr_assert_neq(c, a);
    cr_assert_eq(free_count(rs, 2, NULL), 1);
    /* an exact fit for bucket 2 takes the freed record */
    eng_rid d = mmt_insert(&t, rs, 4, 96); /* 112 -> bucket 2 head (116) */
    cr_assert_eq(d, a);
    cr_assert_eq(mmt_reclen(rs, d), 116); /* remainder 4 < 32: not split */
    eng_rs_close(rs);
    mmt_verify_clean(&t);
    mmt_close(&t);
}

Test(mm_alloc, powerof2_reuses_freed_slot)
{
    mmt t;
    mmt_open(&t);
    eng_rs *rs = mmt_coll(&t, "test.c", ENG_ALLOC_POWEROF2);
    eng_rid ids[10];
    for (int i = 0; i < 10; i++)
        ids[i] = mmt_insert(&t, rs, i, 100);
    mmt_remove(&t, rs, ids[3]);
    mmt_remove(&t, rs, ids[7]);
    /* LIFO: the last freed slot is reused first, for any size up to 112 */
    cr_assert_eq(mmt_insert(&t, rs, 20, 60), ids[7]);
    cr_assert_eq(mmt_insert(&t, rs, 21, 112), ids[3]);
    cr_assert_eq(free_count(rs, 3, NULL), 0);
    eng_rs_close(rs);
    mmt_verify_clean(&t);
    mmt_close(&t);
}

Test(mm_alloc, remainder_of_32_or_more_is_split)
{
    mmt t;
    mmt_open(&t);
    eng_rs *rs = mmt_coll(&t, "test.c", ENG_ALLOC_NOPADDING);
    eng_rid a = mmt_insert(&t, rs, 1, 300); /* 316 bytes */
    mmt_insert(&t, rs, 2, 50);
    mmt_remove(&t, rs, a);           /* bucket 4 (512) */
    eng_rid b = mmt_insert(&t, rs, 3, 240); /* 256: bucket(256) = 4 */
    cr_assert_eq(b, a);
    cr_assert_eq(mmt_reclen(rs, b), 256);
    int64_t bytes;
    cr_assert_eq(free_count(rs, 1, &bytes), 1); /* 60-byte remainder in bucket 1 */
    cr_assert_eq(bytes, 60);
    eng_rs_close(rs);
    mmt_verify_clean(&t);
    mmt_close(&t);
}

Test(mm_alloc, paddingfactor_allocation)
{
    mmt t;
    mmt_open(&t);
    eng_rs *rs = mmt_coll(&t, "test.c", ENG_ALLOC_PADDINGFACTOR);
    /* factor 1.0 at creation: exact (rounded to 4) */
    cr_assert_eq(mmt_reclen(rs, mmt_insert(&t, rs, 1, 101)), 120);
    bson_t sub;
    mmt_engine_stats(rs, &sub);
    cr_assert_float_eq(mmt_bson_double(&sub, "paddingFactor"), 1.0, 1e-9);
    bson_destroy(&sub);
    eng_rs_close(rs);
    mmt_close(&t);
}

Test(mm_alloc, extent_size_functions)
{
    mmt t;
    mmt_open(&t);
    mm_engine *e = (mm_engine *)t.e;
    cr_assert_eq(mm_extent_initial_size(e, 116), 7424);
    cr_assert_eq(mm_extent_quantize(e, 7424), 8192);
    cr_assert_eq(mm_extent_initial_size(e, 8192), 131072);
    cr_assert_eq(mm_extent_followup_size(e, 128, 8192), 32768);
    cr_assert_eq(mm_extent_followup_size(e, 128, 3999744), 15998976);
    /* at and above 4,000,000 the growth is x1.35, quantized to 4 KB */
    cr_assert_eq(mm_extent_followup_size(e, 128, 4001792), 5402624);
    cr_assert_eq(mm_extent_quantize(e, 1), MM_MIN_EXTENT);
    cr_assert_eq(mm_extent_max_size(e), 0x7ff00000 - 8192 - 16);
    cr_assert_eq(mm_extent_followup_size(e, 128, 0x70000000), mm_extent_max_size(e));
    mmt_close(&t);
}

/* Extents of test.c, first to last. */
static int extent_lengths(mmt *t, int32_t *len, int max)
{
    mm_engine *e = (mm_engine *)t->e;
    const mm_ns_slot *d = mm_ns_at(e, mm_ns_find(e, "test.c"));
    int n = 0;
    for (mm_loc l = d->first_extent; !mm_loc_is_null(l) && n < max; n++) {
        const mm_extent *x = mm_extent_at(e, l);
        cr_assert(x);
        len[n] = x->length;
        l = x->xnext;
    }
    return n;
}

Test(mm_alloc, extent_growth_and_file_rollover)
{
    mmt t;
    mmt_open(&t);
    eng_rs *rs = mmt_coll(&t, "test.c", ENG_ALLOC_POWEROF2);
    int32_t len[8];
    cr_assert_eq(extent_lengths(&t, len, 8), 1);
    cr_assert_eq(len[0], 8192); /* initialSize(128) at create */
    for (int i = 0; i < 1400; i++) /* 62 + 254 + 1022 fit in the first three */
        mmt_insert(&t, rs, i, 100);
    int n = extent_lengths(&t, len, 8);
    cr_assert_eq(n, 4);
    cr_assert_eq(len[1], 32768);
    cr_assert_eq(len[2], 131072);
    cr_assert_eq(len[3], 524288);
    bson_t sub;
    mmt_engine_stats(rs, &sub);
    cr_assert_eq(mmt_bson_int(&sub, "numExtents"), 4);
    cr_assert_eq(mmt_bson_int(&sub, "lastExtentSize"), 524288);
    bson_destroy(&sub);
    /* 64 KiB test.0 holds 8 + 32 KB; test.1 (128 KiB default) doubled to
     * 256 KiB for the 128 KB extent; test.2 (256 KiB) doubled to 1 MiB */
    cr_assert_eq(mmt_file_size(&t, ".0"), 65536);
    cr_assert_eq(mmt_file_size(&t, ".1"), 262144);
    cr_assert_eq(mmt_file_size(&t, ".2"), 1048576);
    cr_assert_eq(mmt_file_size(&t, ".3"), -1);
    struct eng_rs_stats s;
    mmt_stats(rs, &s);
    cr_assert_eq(s.storage_size, 8192 + 32768 + 131072 + 524288);
    eng_rs_close(rs);
    mmt_verify_clean(&t);
    mmt_close(&t);
}

Test(mm_alloc, big_extent_sizes_up_the_new_file)
{
    mmt t;
    mmt_open(&t);
    eng_rs *rs = mmt_coll(&t, "test.c", ENG_ALLOC_NOPADDING);
    eng_rid rid = mmt_insert(&t, rs, 1, 100 * 1000);
    /* initialSize(100016) = 1600256 -> 1601536; test.1 doubles to 2 MiB */
    cr_assert_eq(rid >> 32, 1);
    cr_assert_eq(mmt_file_size(&t, ".1"), 2 * 1024 * 1024);
    int32_t len[4];
    cr_assert_eq(extent_lengths(&t, len, 4), 2);
    cr_assert_eq(len[1], 1601536);
    eng_rs_close(rs);
    mmt_verify_clean(&t);
    mmt_close(&t);
}

Test(mm_alloc, first_record_location)
{
    mmt t;
    mmt_open(&t);
    eng_rs *rs = mmt_coll(&t, "test.c", ENG_ALLOC_POWEROF2);
    eng_rid rid = mmt_insert(&t, rs, 1, 100);
    /* file 0, first extent at 8192, record right after its 176-byte header */
    cr_assert_eq(rid, (eng_rid)(8192 + 176));
    cr_assert_eq(mmt_insert(&t, rs, 2, 100), (eng_rid)(8192 + 176 + 128));
    eng_rs_close(rs);
    mmt_close(&t);
}
