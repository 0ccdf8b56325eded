/*
 * mm_alloc.c -- record allocation: quantization, the 26 free-list buckets,
 * allocation strategies, and linking records into their extent's chain
 * (MongoDB 3.0's RecordStoreV1Base / SimpleRecordStoreV1).
 *
 *   bucket(size)   first bucket whose size is strictly larger than size;
 *                  a free record of exactly 128 bytes lives in bucket 3
 *   quantize(size) first bucket size >= size among the first 24
 *   allocation     round up to 4, look only at the head of each bucket from
 *                  bucket(len) upward, split off a remainder of >= 32 bytes,
 *                  never merge neighbours; if nothing fits, add an extent of
 *                  followupSize() and try again
 *
 * Strategies: powerOf2 (quantize record + header), noPadding (exact) and
 * MongoDB 2.4's adaptive paddingFactor, whose two sampled adjustments
 * (1 call in 4, counted in the namespace details) live here too.
 */
#include <limits.h>

#include "mm_int.h"

const int32_t mm_bucket_sizes[MM_NBUCKETS] = {
    0x20,     0x40,     0x80,     0x100,    0x200,     0x400,    0x800,
    0x1000,   0x2000,   0x4000,   0x8000,   0x10000,   0x20000,  0x40000,
    0x80000,  0x100000, 0x200000, 0x400000, 0x600000,  0x800000, 0xA00000,
    0xC00000, 0xE00000, MM_MAX_ALLOC, MM_MAX_ALLOC + 1, INT_MAX,
};

int mm_bucket(int32_t size)
{
    for (int i = 0; i < MM_NBUCKETS; i++)
        if (mm_bucket_sizes[i] > size)
            return i;
    return MM_NBUCKETS - 1;
}

int32_t mm_quantize(int32_t size)
{
    assert(size <= MM_MAX_ALLOC);
    for (int i = 0; i < MM_NBUCKETS - 2; i++)
        if (mm_bucket_sizes[i] >= size)
            return mm_bucket_sizes[i];
    return MM_MAX_ALLOC;
}

bool mm_is_quantized(int32_t size)
{
    return size <= MM_MAX_ALLOC && mm_quantize(size) == size;
}

int mm_strategy(const mm_ns_slot *d)
{
    if (d->user_flags & MM_FLAG_NOPADDING)
        return ENG_ALLOC_NOPADDING;
    if (d->user_flags & MM_FLAG_PADDINGFACTOR)
        return ENG_ALLOC_PADDINGFACTOR;
    return ENG_ALLOC_POWEROF2;
}

/* Bytes to allocate for a new record of len_with_headers bytes. */
int32_t mm_alloc_size_for(const mm_ns_slot *d, int32_t lwh)
{
    assert(lwh <= MM_MAX_ALLOC);
    if (d->is_capped)
        return lwh;
    switch (mm_strategy(d)) {
    case ENG_ALLOC_NOPADDING:
        return lwh;
    case ENG_ALLOC_PADDINGFACTOR: {
        int64_t n = (int64_t)(lwh * d->padding_factor);
        n = (n + 3) & ~(int64_t)3;
        if (n > MM_MAX_ALLOC)
            n = MM_MAX_ALLOC;
        return n < lwh ? lwh : (int32_t)n;
    }
    default:
        return mm_quantize(lwh);
    }
}

/* ---- pointers ------------------------------------------------------------------ */

/* A free record on a free list: in bounds and inside its extent. */
mm_deleted *mm_deleted_at(const mm_engine *e, mm_loc l)
{
    mm_deleted *dr = (mm_deleted *)mm_record_at(e, l);
    if (!dr)
        return NULL;
    const mm_extent *x = mm_extent_at(e, mm_loc_make(l.a, dr->extent_ofs));
    if (!x || l.ofs < dr->extent_ofs + MM_EXT_HDR || dr->len < MM_REC_HDR ||
        (int64_t)l.ofs + dr->len > (int64_t)dr->extent_ofs + x->length)
        return NULL;
    return dr;
}

/* ---- free lists ---------------------------------------------------------------- */

/* Push the free record at l onto the head of its bucket (addDeletedRec). */
void mm_add_deleted(mm_engine *e, mm_txn *t, int32_t slot, mm_loc l)
{
    mm_ns_slot *d = mm_ns_at(e, slot);
    mm_deleted *dr = (mm_deleted *)mm_record_at(e, l);
    assert(dr && dr->len >= MM_REC_HDR);
    if (d->is_capped) {
        mm_capped_add_deleted(e, t, slot, l);
        return;
    }
    int b = mm_bucket(dr->len);
    mm_wloc(t, &dr->next, d->deleted[b]);
    mm_wloc(t, &d->deleted[b], l);
}


/* Free record l, taken off its list, keeps len bytes; the rest becomes a
 * free record of its own on the namespace's free list (mm_add_deleted). */
void mm_free_split(mm_engine *e, mm_txn *t, int32_t slot, mm_loc l, int32_t len)
{
    mm_deleted *dr = mm_deleted_at(e, l);
    int32_t rest = dr->len - len;
    mm_w32(t, &dr->len, len);
    mm_loc nl = mm_loc_make(l.a, l.ofs + len);
    mm_deleted *nd = (mm_deleted *)mm_ptr(e, nl, MM_REC_HDR);
    mm_writing(t, nd, sizeof *nd);
    nd->len = rest;
    nd->extent_ofs = dr->extent_ofs;
    nd->next = mm_loc_null();
    mm_add_deleted(e, t, slot, nl);
}

/* SimpleRecordStoreV1::_allocFromExistingExtents; *out null if none fits. */
static int alloc_from_existing(mm_engine *e, mm_txn *t, int32_t slot, int32_t raw,
                               mm_loc *out, md_error *err)
{
    mm_ns_slot *d = mm_ns_at(e, slot);
    int32_t len = (raw + 3) & ~3;
    mm_deleted *dr = NULL;
    mm_loc l = mm_loc_null();
    int b;
    *out = mm_loc_null();
    for (b = mm_bucket(len); b < MM_NBUCKETS; b++) {
        l = d->deleted[b];
        if (mm_loc_is_null(l))
            continue;
        if (!(dr = mm_deleted_at(e, l)))
            return ENG_CORRUPT(err, "%s: free list %d head %d:0x%x is not a free record",
                               d->name, b, l.a, l.ofs);
        if (dr->len >= len)
            break;
        dr = NULL;
    }
    if (!dr)
        return 0;
    if (!mm_loc_is_null(dr->next) && !mm_record_at(e, dr->next))
        return ENG_CORRUPT(err, "%s: free record %d:0x%x links to %d:0x%x, out of bounds",
                           d->name, l.a, l.ofs, dr->next.a, dr->next.ofs);
    mm_wloc(t, &d->deleted[b], dr->next);
    mm_wloc(t, &dr->next, mm_loc_make(-2, 0)); /* defensive: "invalid" */

    if (dr->len - len >= mm_bucket_sizes[0])
        mm_free_split(e, t, slot, l, len);
    *out = l;
    return 0;
}

/* SimpleRecordStoreV1::allocRecord: free lists, else grow and retry. */
int mm_alloc_record(mm_engine *e, mm_txn *t, int32_t slot, int32_t len, mm_loc *out,
                    md_error *err)
{
    mm_ns_slot *d = mm_ns_at(e, slot);
    if (len > MM_MAX_ALLOC)
        return md_error_set(err, MD_ETOOBIG, MD_CODE_BSON_OBJECT_TOO_LARGE,
                            "record has to be <= 16.5MB");
    if (d->is_capped) /* the ring allocates (mm_capped_insert); nothing moves */
        return eng_capped_cannot_grow(err);
    int rc = alloc_from_existing(e, t, slot, len, out, err);
    for (int z = -1; rc == 0 && mm_loc_is_null(*out); z++) {
        if (z >= 10 || (z >= 0 && len <= d->last_extent_size))
            return md_error_set(err, MD_ENOSPC, MD_CODE_INTERNAL_ERROR,
                                "cannot allocate space for a record of %d bytes in %s", len,
                                d->name);
        int32_t size = mm_extent_followup_size(e, len, d->last_extent_size);
        if ((rc = mm_ns_increase_storage(e, t, slot, size, err)) != 0)
            return rc;
        rc = alloc_from_existing(e, t, slot, len, out, err);
    }
    return rc;
}

/* ---- record chains ------------------------------------------------------------- */

/* _addRecordToRecListInExtent: append l to its extent's chain. */
static int link_record(mm_engine *e, mm_txn *t, mm_loc l, mm_record *r, md_error *err)
{
    mm_extent *x = mm_extent_at(e, mm_loc_make(l.a, r->extent_ofs));
    assert(x);
    if (mm_loc_is_null(x->last_record)) {
        mm_wloc(t, &x->first_record, l);
        mm_wloc(t, &x->last_record, l);
        r->prev_ofs = r->next_ofs = MM_NULL_OFS;
        return 0;
    }
    mm_record *last = x->last_record.a == l.a ? mm_record_at(e, x->last_record) : NULL;
    if (!last)
        return ENG_CORRUPT(err, "extent %d:0x%x: lastRecord %d:0x%x out of bounds", l.a,
                           r->extent_ofs, x->last_record.a, x->last_record.ofs);
    r->prev_ofs = x->last_record.ofs;
    r->next_ofs = MM_NULL_OFS;
    mm_w32(t, &last->next_ofs, l.ofs);
    mm_wloc(t, &x->last_record, l);
    return 0;
}

int mm_record_place(mm_engine *e, mm_txn *t, int32_t slot, mm_loc l, const uint8_t *data,
                    uint32_t len, md_error *err)
{
    mm_record *r = mm_record_at(e, l);
    assert(r && r->len >= (int32_t)len + MM_REC_HDR);
    mm_writing(t, r, MM_REC_HDR + (size_t)len);
    if (data)
        memmove(r + 1, data, len);
    else
        memset(r + 1, 0, len);
    int rc = link_record(e, t, l, r, err);
    if (rc)
        return rc;
    mm_ns_slot *d = mm_ns_at(e, slot);
    mm_w64(t, &d->datasize, d->datasize + r->len - MM_REC_HDR);
    mm_w64(t, &d->nrecords, d->nrecords + 1);
    return 0;
}

int mm_record_insert(mm_engine *e, mm_txn *t, int32_t slot, const uint8_t *data,
                     uint32_t len, int32_t alloc_len, mm_loc *out, md_error *err)
{
    int32_t src_file = 0;
    int64_t src_ofs = 0;
    bool mapped = data && mm_ptr_locate(e, data, &src_file, &src_ofs);
    assert((int64_t)len + MM_REC_HDR <= alloc_len);
    int rc = mm_alloc_record(e, t, slot, alloc_len, out, err);
    if (rc)
        return rc;
    if (mapped) /* the allocation may have moved the mappings */
        data = mm_file_base(e, src_file) + src_ofs;
    return mm_record_place(e, t, slot, *out, data, len, err);
}

/* RecordStoreV1Base::deleteRecord: unlink, count, mark 0xEE, free list. */
void mm_record_delete(mm_engine *e, mm_txn *t, int32_t slot, mm_loc l)
{
    mm_record *r = mm_record_at(e, l);
    assert(r && r->len >= MM_MIN_REC_LEN);
    mm_cursors_removing(e, slot, l);
    if (mm_ns_at(e, slot)->is_capped)
        mm_capped_removing(e, t, slot, l);
    if (r->prev_ofs != MM_NULL_OFS)
        mm_w32(t, &mm_record_at(e, mm_loc_make(l.a, r->prev_ofs))->next_ofs, r->next_ofs);
    if (r->next_ofs != MM_NULL_OFS)
        mm_w32(t, &mm_record_at(e, mm_loc_make(l.a, r->next_ofs))->prev_ofs, r->prev_ofs);
    mm_extent *x = mm_extent_at(e, mm_loc_make(l.a, r->extent_ofs));
    assert(x);
    if (mm_loc_eq(x->first_record, l))
        mm_wloc(t, &x->first_record, r->next_ofs == MM_NULL_OFS
                                         ? mm_loc_null()
                                         : mm_loc_make(l.a, r->next_ofs));
    if (mm_loc_eq(x->last_record, l))
        mm_wloc(t, &x->last_record, r->prev_ofs == MM_NULL_OFS
                                        ? mm_loc_null()
                                        : mm_loc_make(l.a, r->prev_ofs));
    mm_ns_slot *d = mm_ns_at(e, slot);
    mm_w64(t, &d->datasize, d->datasize - (r->len - MM_REC_HDR));
    mm_w64(t, &d->nrecords, d->nrecords - 1);
    uint8_t *data = (uint8_t *)(r + 1);
    mm_writing(t, data, 4);
    memset(data, 0xee, 4);
    mm_add_deleted(e, t, slot, l);
}

/* ---- paddingFactor (MongoDB 2.4 NamespaceDetails) ------------------------------ */

/* An update fitted: 1 call in 4 lowers the factor by 0.001 (not below 1). */
void mm_pf_fits(mm_engine *e, mm_txn *t, int32_t slot)
{
    mm_ns_slot *d = mm_ns_at(e, slot);
    if (mm_strategy(d) != ENG_ALLOC_PADDINGFACTOR)
        return;
    int32_t c = d->pf_fits_count;
    mm_w32(t, &d->pf_fits_count, (c + 1) & 0x3fffffff);
    double x = d->padding_factor - 0.001;
    if (c % 4 == 0 && x >= 1.0)
        mm_wdbl(t, &d->padding_factor, x);
}

/* An update moved: 1 call in 4 raises the factor by 0.001 * (min(nIndexes,
 * 7) + 3), as long as it stays <= 2.0. */
void mm_pf_too_small(mm_engine *e, mm_txn *t, int32_t slot)
{
    mm_ns_slot *d = mm_ns_at(e, slot);
    if (mm_strategy(d) != ENG_ALLOC_PADDINGFACTOR)
        return;
    int32_t c = d->pf_move_count;
    mm_w32(t, &d->pf_move_count, (c + 1) & 0x3fffffff);
    int n = d->n_indexes < 7 ? d->n_indexes : 7;
    double x = d->padding_factor + 0.001 * (n + 3);
    if (c % 4 == 0 && x <= 2.0)
        mm_wdbl(t, &d->padding_factor, x);
}
