/*
 * mm_compact.c -- compact (SimpleRecordStoreV1::compact of MongoDB 3.0).
 *
 *   1. snapshot the extent chain;
 *   2. orphan the 26 free lists, reset lastExtentSize so that extent sizing
 *      starts over, and add a fresh extent, so that every copy lands in new
 *      space;
 *   3. for each old extent, first to last, copy each record in chain order
 *      with padding NONE (the current strategy), PRESERVE (the old
 *      lengthWithHeaders) or MANUAL (len * factor + bytes), unlink it, and
 *      when the extent is empty give it to its file's extent free list.
 *
 * Capped collections are refused, as in 3.0.
 *
 * RecordIds change; the caller rebuilds the indexes.  Everything runs in the
 * caller's transaction, so the pre-images amount to about the collection's
 * size again; a cheaper variant would skip pre-images of never-used space,
 * but the journal will need those intents anyway.
 */
#include <stdlib.h>

#include "mm_int.h"

/* Allocation size of a copied record (_compactExtent's padding switch). */
static int32_t compact_size(const mm_ns_slot *d, const eng_compact_opts *o, int32_t bson_len,
                            int32_t old_len)
{
    int32_t min = bson_len + MM_REC_HDR;
    int64_t n;
    switch (o ? o->padding : ENG_PAD_NONE) {
    case ENG_PAD_PRESERVE:
        return old_len >= min ? old_len : min;
    case ENG_PAD_MANUAL:
        n = (int64_t)(min * o->padding_factor) + o->padding_bytes;
        return n < min || n > 16 * 1024 * 1024 / 2 ? min : (int32_t)n;
    default:
        return mm_alloc_size_for(d, min);
    }
}

typedef struct cstats {
    int64_t records, old_net, bson_bytes, new_net;
} cstats;

/* Move every record out of extent el, then free el (first of the chain). */
static int compact_extent(mm_engine *e, mm_txn *t, int32_t slot, mm_loc el,
                          const eng_compact_opts *o, cstats *st, md_error *err)
{
    int64_t guard = mm_total_bytes(e) / MM_MIN_REC_LEN + 1;
    for (;;) {
        mm_extent *x = mm_extent_at(e, el);
        if (!x)
            return ENG_CORRUPT(err, "compact: extent %d:0x%x vanished", el.a, el.ofs);
        if (mm_loc_is_null(x->first_record))
            break;
        mm_loc rl = x->first_record;
        mm_record *r = mm_rs_locate(e, slot, rl);
        if (!r || --guard < 0)
            return ENG_CORRUPT(err, "compact: bad record %d:0x%x in extent %d:0x%x", rl.a,
                               rl.ofs, el.a, el.ofs);
        int32_t bl = mm_le32((const uint8_t *)(r + 1)), old_len = r->len, next = r->next_ofs;
        int32_t size = compact_size(mm_ns_at(e, slot), o, bl, old_len);
        mm_loc nl;
        int rc = mm_record_insert(e, t, slot, (const uint8_t *)(r + 1), (uint32_t)bl, size,
                                  &nl, err);
        if (rc)
            return rc;
        /* re-derive: the insert may have added a file (and remapped) */
        x = mm_extent_at(e, el);
        mm_wloc(t, &x->first_record, next == MM_NULL_OFS ? mm_loc_null()
                                                         : mm_loc_make(el.a, next));
        if (next == MM_NULL_OFS)
            mm_wloc(t, &x->last_record, mm_loc_null());
        else
            mm_w32(t, &mm_record_at(e, mm_loc_make(el.a, next))->prev_ofs, MM_NULL_OFS);
        mm_ns_slot *d = mm_ns_at(e, slot);
        mm_w64(t, &d->datasize, d->datasize - (old_len - MM_REC_HDR));
        mm_w64(t, &d->nrecords, d->nrecords - 1);
        st->records++;
        st->old_net += old_len - MM_REC_HDR;
        st->bson_bytes += bl;
        st->new_net += mm_record_at(e, nl)->len - MM_REC_HDR;
    }
    mm_ns_slot *d = mm_ns_at(e, slot);
    mm_extent *x = mm_extent_at(e, el), *next = mm_extent_at(e, x->xnext);
    assert(mm_loc_eq(d->first_extent, el) && !mm_loc_eq(d->last_extent, el));
    if (!next)
        return ENG_CORRUPT(err, "compact: extent %d:0x%x has a bad xnext", el.a, el.ofs);
    mm_wloc(t, &d->first_extent, x->xnext);
    mm_wloc(t, &next->xprev, mm_loc_null());
    if (mm_extent_free(e, t, el) != 0)
        return ENG_CORRUPT(err, "extent free list of data file %d is damaged", el.a);
    return 0;
}

static int check_opts(const eng_compact_opts *o, md_error *err)
{
    if (!o || o->padding != ENG_PAD_MANUAL)
        return 0;
    if (!(o->padding_factor >= 1.0 && o->padding_factor <= 4.0))
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                            "invalid padding factor %g (must be between 1.0 and 4.0)",
                            o->padding_factor);
    if (o->padding_bytes < 0)
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                            "invalid padding bytes %d", o->padding_bytes);
    return 0;
}

int mm_rs_compact(eng_rs *rs_, eng_txn *tx, const eng_compact_opts *o, bson_t *info,
                  md_error *err)
{
    mm_rs *rs = (mm_rs *)rs_;
    mm_engine *e = rs->e;
    mm_txn *t = mm_T(tx, e);
    mm_ns_slot *d = mm_rs_details(rs);
    cstats st = {0};
    mm_loc *old;
    int32_t nold;
    if (!d)
        return md_error_set(err, MD_NOTFOUND, MD_CODE_NAMESPACE_NOT_FOUND, "ns not found: %s",
                            rs->name);
    if (d->is_capped) /* as MongoDB 3.0's compact command */
        return md_error_set(err, MD_ENOTSUP, MD_CODE_COMMAND_NOT_SUPPORTED,
                            "cannot compact a capped collection");
    int rc = check_opts(o, err);
    if (rc)
        return rc;
    if ((rc = mm_extent_chain(e, d->first_extent, &old, &nold)) != 0)
        return ENG_CORRUPT(err, "compact %s: the extent chain is damaged", rs->name);
    int64_t old_size = mm_ns_storage_size(e, rs->slot, NULL);
    mm_cursors_invalidate(e, rs->slot);
    for (int b = 0; b < MM_NBUCKETS; b++)
        mm_wloc(t, &d->deleted[b], mm_loc_null());
    mm_w32(t, &d->last_extent_size, 0);
    rc = mm_ns_increase_storage(e, t, rs->slot, d->last_extent_size, err);
    for (int32_t i = 0; rc == 0 && i < nold; i++)
        rc = compact_extent(e, t, rs->slot, old[i], o, &st, err);
    free(old);
    if (rc)
        return rc;
    if (info) {
        BSON_APPEND_INT64(info, "oldStorageSize", old_size);
        BSON_APPEND_INT64(info, "newStorageSize", mm_ns_storage_size(e, rs->slot, NULL));
        BSON_APPEND_INT64(info, "records", st.records);
        BSON_APPEND_DOUBLE(info, "oldPaddingRatio",
                           st.bson_bytes ? (double)st.old_net / (double)st.bson_bytes : 1.0);
        BSON_APPEND_DOUBLE(info, "newPaddingRatio",
                           st.bson_bytes ? (double)st.new_net / (double)st.bson_bytes : 1.0);
    }
    return 0;
}
