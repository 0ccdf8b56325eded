/*
 * mm_capped.c -- capped collections: MongoDB 3.0's CappedRecordStoreV1.
 *
 * The extents are allocated when the collection is created, enough to cover
 * its size, and never change.  They are used as a ring: records are only
 * ever allocated in the "cap extent"; when it has no room, the oldest record
 * of the cap extent is removed (the capped-delete hook is told first) and
 * its space merged with free neighbours, and once the cap extent holds only
 * records of the current pass the ring moves on to the next extent (after
 * the last: the first).  capFirstNewRecord marks, in the cap extent's record
 * chain, where this pass's records start:
 *
 *   cap extent's chain:  r17 r18 r19 | r40 r41        (r40 = capFirstNewRecord)
 *                        old (oldest)  new (newest)
 *   ring order:          cap extent's old part, then every record of the
 *                        extents after it (wrapping), then the new part
 *
 *   first pass (capFirstNewRecord "invalid"): plain extent order; the cap
 *   extent moves forward as each fills, and the first wrap sets
 *   capFirstNewRecord to null ("looped, nothing new here yet"); the first
 *   record then allocated in the cap extent becomes capFirstNewRecord.
 *
 * Free space: every free record of the collection is on deletedList[0]
 * (cappedListOfAllDeletedRecords); a freed record is merged with the free
 * records right before and after it in its extent, so an extent's free
 * space is a few large pieces.  An allocation takes the lowest-addressed
 * free record of the cap extent with room for the record plus 24 bytes (as
 * 3.0's __capAlloc, which always leaves a free record behind) and splits it.
 * Unlike 3.0 the list is not kept grouped by extent (deletedList[1],
 * cappedLastDelRecLastExtent, is unused): allocation scans it, which stays
 * short because of the merging.
 *
 * Everything is written through mm_writing(), so the ring is journaled and
 * survives crashes and reopening like any other structure.
 */
#include <stdlib.h>

#include "mm_int.h"

/* Free bytes an allocation leaves in its piece (__capAlloc's "len + 24"). */
#define MM_CAP_KEEP 24

static bool looped(const mm_ns_slot *d)
{
    return mm_loc_is_valid(d->cap_first_new);
}

/* ---- creating ------------------------------------------------------------ */

int mm_capped_create(mm_engine *e, mm_txn *t, int32_t slot, int64_t size, int64_t max,
                     md_error *err)
{
    mm_ns_slot *d = mm_ns_at(e, slot);
    if (size <= 0)
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                            "a capped collection needs a size > 0, got %lld", (long long)size);
    mm_w32(t, &d->is_capped, 1);
    mm_w64(t, &d->capped_size, size);
    mm_w64(t, &d->capped_max, max > 0 ? max : 0);
    /* MMAPV1DatabaseCatalogEntry::createCollection: extents of what is
     * still missing (at least 4 KB, at most the largest extent), & ~0xff,
     * until the storage covers the size. */
    int64_t have = 0;
    for (int i = 0; have < size; i++) {
        int64_t want = size - have;
        if (want < MM_MIN_EXTENT)
            want = MM_MIN_EXTENT;
        if (want > mm_extent_max_size(e))
            want = mm_extent_max_size(e);
        if (e->capped_extent_max > 0 && want > e->capped_extent_max)
            want = e->capped_extent_max;
        int rc = mm_ns_increase_storage(e, t, slot, (int32_t)(want & 0xffffff00), err);
        if (rc)
            return rc;
        have = mm_ns_storage_size(e, slot, NULL);
        if (i > 100000)
            return md_error_set(err, MD_ENOSPC, MD_CODE_OUT_OF_DISK_SPACE,
                                "cannot allocate %lld bytes of extents", (long long)size);
    }
    d = mm_ns_at(e, slot);
    mm_wloc(t, &d->cap_extent, d->first_extent);
    mm_wloc(t, &d->cap_first_new, mm_loc_invalid());
    return 0;
}

/* ---- free records -------------------------------------------------------- */

void mm_capped_add_deleted(mm_engine *e, mm_txn *t, int32_t slot, mm_loc l)
{
    mm_ns_slot *d = mm_ns_at(e, slot);
    mm_deleted *dr = (mm_deleted *)mm_record_at(e, l);
    assert(dr && dr->len >= MM_REC_HDR);
    int32_t start = l.ofs, len = dr->len, ext = dr->extent_ofs;
    int64_t guard = mm_total_bytes(e) / MM_REC_HDR + 1;
    mm_loc *link = &d->deleted[0];
    while (!mm_loc_is_null(*link) && --guard >= 0) {
        mm_loc cl = *link;
        mm_deleted *c = mm_deleted_at(e, cl);
        if (!c)
            break; /* damaged: validate reports it; stop merging */
        if (cl.a == l.a && c->extent_ofs == ext &&
            ((int64_t)cl.ofs + c->len == start || (int64_t)start + len == cl.ofs)) {
            if (cl.ofs < start)
                start = cl.ofs;
            len += c->len;
            mm_wloc(t, link, c->next); /* unlink; `link` now names the next one */
            continue;
        }
        link = &c->next;
    }
    mm_deleted *m = (mm_deleted *)mm_ptr(e, mm_loc_make(l.a, start), MM_REC_HDR);
    mm_writing(t, m, sizeof *m);
    m->len = len;
    m->extent_ofs = ext;
    m->next = d->deleted[0];
    mm_wloc(t, &d->deleted[0], mm_loc_make(l.a, start));
}

/* __capAlloc: the lowest free record of the cap extent with room for need
 * bytes and MM_CAP_KEEP more, unlinked and split; *out null if none. */
static int cap_alloc(mm_engine *e, mm_txn *t, int32_t slot, int32_t need, mm_loc *out,
                     md_error *err)
{
    mm_ns_slot *d = mm_ns_at(e, slot);
    mm_loc cap = d->cap_extent, best = mm_loc_null();
    mm_loc *best_link = NULL;
    int64_t guard = mm_total_bytes(e) / MM_REC_HDR + 1;
    *out = mm_loc_null();
    for (mm_loc *link = &d->deleted[0]; !mm_loc_is_null(*link);) {
        mm_loc cl = *link;
        mm_deleted *c = mm_deleted_at(e, cl);
        if (!c || --guard < 0)
            return ENG_CORRUPT(err, "%s: capped free list entry %d:0x%x is damaged (or loops)",
                               d->name, cl.a, cl.ofs);
        if (cl.a == cap.a && c->extent_ofs == cap.ofs && c->len >= need + MM_CAP_KEEP &&
            (best_link == NULL || cl.ofs < best.ofs)) {
            best = cl;
            best_link = link;
        }
        link = &c->next;
    }
    if (!best_link)
        return 0;
    mm_wloc(t, best_link, mm_deleted_at(e, best)->next);
    mm_free_split(e, t, slot, best, need);
    *out = best;
    return 0;
}

/* advanceCapExtent: the next extent of the chain, after the last the first;
 * nothing allocated there on this pass yet. */
static int advance(mm_engine *e, mm_txn *t, mm_ns_slot *d)
{
    const mm_extent *x = mm_extent_at(e, d->cap_extent);
    if (!x)
        return MD_ECORRUPT;
    mm_wloc(t, &d->cap_extent, mm_loc_is_null(x->xnext) ? d->first_extent : x->xnext);
    mm_wloc(t, &d->cap_first_new, mm_loc_null());
    return 0;
}

/* ---- inserting ----------------------------------------------------------- */

int mm_capped_insert(mm_engine *e, mm_txn *t, eng_rs *rs, eng_txn *tx, int32_t slot,
                     const uint8_t *data, uint32_t len, mm_loc *out, md_error *err)
{
    int32_t src_file = 0;
    int64_t src_ofs = 0;
    bool mapped = mm_ptr_locate(e, data, &src_file, &src_ofs);
    int32_t need = ((int32_t)len + MM_REC_HDR + 3) & ~3, nextents = 0, room = 0;
    mm_ns_slot *d = mm_ns_at(e, slot);
    for (mm_loc l = d->first_extent; !mm_loc_is_null(l) && nextents <= mm_max_chain(e);
         nextents++) {
        const mm_extent *x = mm_extent_at(e, l);
        if (!x)
            return ENG_CORRUPT(err, "%s: extent %d:0x%x is damaged", d->name, l.a, l.ofs);
        if (x->length - MM_EXT_HDR - MM_CAP_KEEP > room)
            room = x->length - MM_EXT_HDR - MM_CAP_KEEP;
        l = x->xnext;
    }
    if (need > room)
        return md_error_set(err, MD_ETOOBIG, 16328,
                            "document is larger than capped size %d > %d", need, room);
    if (!mm_extent_at(e, d->cap_extent))
        return ENG_CORRUPT(err, "%s: capExtent %d:0x%x is not an extent", d->name,
                           d->cap_extent.a, d->cap_extent.ofs);

    mm_loc l = mm_loc_null(), first_empty = mm_loc_null();
    int64_t guard = (d->nrecords + 2) * (2 * (int64_t)nextents + 4);
    for (;;) {
        d = mm_ns_at(e, slot);
        if (--guard < 0)
            return ENG_CORRUPT(err, "%s: the capped ring does not make room", d->name);
        if (d->capped_max <= 0 || d->nrecords < d->capped_max) {
            int rc = cap_alloc(e, t, slot, need, &l, err);
            if (rc)
                return rc;
            if (!mm_loc_is_null(l))
                break;
        }
        if (!looped(d)) { /* first pass: on to the next extent */
            if (advance(e, t, d) != 0)
                return ENG_CORRUPT(err, "%s: capExtent is damaged", d->name);
            if (!mm_loc_eq(d->cap_extent, d->first_extent))
                mm_wloc(t, &d->cap_first_new, mm_loc_invalid());
            continue;
        }
        const mm_extent *x = mm_extent_at(e, d->cap_extent);
        if (!x)
            return ENG_CORRUPT(err, "%s: capExtent is damaged", d->name);
        if (!mm_loc_is_null(d->cap_first_new) && mm_loc_eq(x->first_record, d->cap_first_new)) {
            advance(e, t, d); /* only this pass's records are left here */
            continue;
        }
        if (mm_loc_is_null(x->first_record)) {
            if (mm_loc_is_null(first_empty))
                first_empty = d->cap_extent;
            advance(e, t, d);
            if (mm_loc_eq(first_empty, d->cap_extent))
                return md_error_set(err, MD_ETOOBIG, 28575,
                                    "document doesn't fit in capped collection. size: %d", need);
            continue;
        }
        mm_loc fr = x->first_record;
        const mm_record *r = mm_rs_locate(e, slot, fr);
        if (!r)
            return ENG_CORRUPT(err, "%s: record %d:0x%x of the cap extent is damaged", d->name,
                               fr.a, fr.ofs);
        const uint8_t *doc = (const uint8_t *)(r + 1);
        int rc = eng_rs_capped_deleting(rs, tx, mm_loc_to_rid(fr), doc, (uint32_t)mm_le32(doc),
                                        err);
        if (rc)
            return rc;
        if (!mm_rs_locate(e, slot, fr)) /* the hook may have remapped, not removed */
            return ENG_CORRUPT(err, "%s: record %d:0x%x vanished in the capped-delete hook",
                               mm_ns_at(e, slot)->name, fr.a, fr.ofs);
        mm_record_delete(e, t, slot, fr);
        first_empty = mm_loc_null();
    }
    d = mm_ns_at(e, slot);
    if (looped(d) && mm_loc_is_null(d->cap_first_new))
        mm_wloc(t, &d->cap_first_new, l);
    if (mapped)
        data = mm_file_base(e, src_file) + src_ofs;
    *out = l;
    return mm_record_place(e, t, slot, l, data, len, err);
}

void mm_capped_removing(mm_engine *e, mm_txn *t, int32_t slot, mm_loc l)
{
    mm_ns_slot *d = mm_ns_at(e, slot);
    if (!looped(d) || mm_loc_is_null(d->cap_first_new) || !mm_loc_eq(d->cap_first_new, l))
        return;
    const mm_record *r = mm_record_at(e, l);
    assert(r);
    mm_wloc(t, &d->cap_first_new,
            r->next_ofs == MM_NULL_OFS ? mm_loc_null() : mm_loc_make(l.a, r->next_ofs));
}

int mm_capped_truncate(mm_engine *e, mm_txn *t, int32_t slot)
{
    mm_loc *v;
    int32_t n;
    int rc = mm_extent_chain(e, mm_ns_at(e, slot)->first_extent, &v, &n);
    if (rc)
        return rc;
    mm_ns_slot *d = mm_ns_at(e, slot);
    for (int b = 0; b < MM_NBUCKETS; b++)
        mm_wloc(t, &d->deleted[b], mm_loc_null());
    for (int32_t i = 0; i < n; i++) {
        mm_extent *x = mm_extent_at(e, v[i]);
        mm_wloc(t, &x->first_record, mm_loc_null());
        mm_wloc(t, &x->last_record, mm_loc_null());
        mm_extent_free_space(e, t, slot, v[i]);
    }
    free(v);
    mm_w64(t, &d->datasize, 0);
    mm_w64(t, &d->nrecords, 0);
    mm_wloc(t, &d->cap_extent, d->first_extent);
    mm_wloc(t, &d->cap_first_new, mm_loc_invalid());
    return 0;
}

/* ---- ring order ---------------------------------------------------------- */

/* In extent order from el (xnext or xprev), the first / last record of the
 * first non-empty extent; null at the end of the chain. */
static int linear_walk(const mm_engine *e, mm_loc el, bool forward, mm_loc *out)
{
    int64_t guard = mm_max_chain(e);
    for (; !mm_loc_is_null(el); guard--) {
        const mm_extent *x = mm_extent_at(e, el);
        if (!x || guard < 0)
            return MD_ECORRUPT;
        mm_loc r = forward ? x->first_record : x->last_record;
        if (!mm_loc_is_null(r)) {
            *out = r;
            return 0;
        }
        el = forward ? x->xnext : x->xprev;
    }
    *out = mm_loc_null();
    return 0;
}

/* The cap extent's old part ends (going backward: where it ends). */
static mm_loc old_part_end(const mm_engine *e, const mm_ns_slot *d, const mm_extent *cx)
{
    if (mm_loc_is_null(d->cap_first_new))
        return cx->last_record;
    const mm_record *r = mm_record_at(e, d->cap_first_new);
    return !r || r->prev_ofs == MM_NULL_OFS
               ? mm_loc_null()
               : mm_loc_make(d->cap_first_new.a, r->prev_ofs);
}

/* Going around the ring from extent el (not the cap extent's parts): the
 * first record (forward) of the extents after el, or the last record
 * (backward) of the extents before it; arriving at the cap extent, its new
 * part's first record (forward) or old part's last (backward). */
static int ring_walk(const mm_engine *e, const mm_ns_slot *d, mm_loc el, bool forward,
                     mm_loc *out)
{
    int64_t guard = mm_max_chain(e) + 1;
    for (;;) {
        const mm_extent *x = mm_extent_at(e, el);
        if (!x || --guard < 0)
            return MD_ECORRUPT;
        if (forward)
            el = mm_loc_is_null(x->xnext) ? d->first_extent : x->xnext;
        else
            el = mm_loc_is_null(x->xprev) ? d->last_extent : x->xprev;
        if (mm_loc_eq(el, d->cap_extent)) {
            const mm_extent *cx = mm_extent_at(e, el);
            if (!cx)
                return MD_ECORRUPT;
            *out = forward ? d->cap_first_new : old_part_end(e, d, cx);
            return 0;
        }
        const mm_extent *nx = mm_extent_at(e, el);
        if (!nx)
            return MD_ECORRUPT;
        mm_loc r = forward ? nx->first_record : nx->last_record;
        if (!mm_loc_is_null(r)) {
            *out = r;
            return 0;
        }
    }
}

int mm_capped_step(const mm_engine *e, int32_t slot, mm_loc cur, bool forward, mm_loc *out)
{
    const mm_ns_slot *d = mm_ns_at(e, slot);
    *out = mm_loc_null();
    if (!looped(d)) { /* first pass: extent order */
        if (mm_loc_is_null(cur))
            return linear_walk(e, forward ? d->first_extent : d->last_extent, forward, out);
        const mm_record *r = mm_record_at(e, cur);
        if (!r)
            return MD_ECORRUPT;
        int32_t ofs = forward ? r->next_ofs : r->prev_ofs;
        if (ofs != MM_NULL_OFS) {
            *out = mm_loc_make(cur.a, ofs);
            return 0;
        }
        const mm_extent *x = mm_extent_at(e, mm_loc_make(cur.a, r->extent_ofs));
        if (!x)
            return MD_ECORRUPT;
        return linear_walk(e, forward ? x->xnext : x->xprev, forward, out);
    }
    const mm_extent *cx = mm_extent_at(e, d->cap_extent);
    mm_loc cfn = d->cap_first_new;
    if (!cx)
        return MD_ECORRUPT;
    if (mm_loc_is_null(cur)) {
        if (forward) { /* the oldest */
            if (!mm_loc_is_null(cx->first_record) && !mm_loc_eq(cx->first_record, cfn)) {
                *out = cx->first_record;
                return 0;
            }
            return ring_walk(e, d, d->cap_extent, true, out);
        }
        if (!mm_loc_is_null(cfn)) { /* the newest */
            *out = cx->last_record;
            return 0;
        }
        return ring_walk(e, d, d->cap_extent, false, out);
    }
    const mm_record *r = mm_record_at(e, cur);
    if (!r)
        return MD_ECORRUPT;
    mm_loc el = mm_loc_make(cur.a, r->extent_ofs);
    mm_loc n = forward ? (r->next_ofs == MM_NULL_OFS ? mm_loc_null()
                                                     : mm_loc_make(cur.a, r->next_ofs))
                       : (r->prev_ofs == MM_NULL_OFS ? mm_loc_null()
                                                     : mm_loc_make(cur.a, r->prev_ofs));
    if (mm_loc_eq(el, d->cap_extent)) {
        if (forward) {
            if (!mm_loc_is_null(n) && !mm_loc_eq(n, cfn)) {
                *out = n;
                return 0;
            }
            /* the end of the old part (the next is the first new record,
             * or there is no new part): on to the extents after; the end
             * of the new part is the end of the ring */
            if (!mm_loc_is_null(n) || mm_loc_is_null(cfn))
                return ring_walk(e, d, el, true, out);
            return 0;
        }
        if (mm_loc_eq(cur, cfn)) /* the first new record: back to the others */
            return ring_walk(e, d, el, false, out);
        *out = n; /* null at the oldest record */
        return 0;
    }
    if (!mm_loc_is_null(n)) {
        *out = n;
        return 0;
    }
    return ring_walk(e, d, el, forward, out);
}

/* ---- validate ------------------------------------------------------------ */

static int loc_cmp(const void *a, const void *b)
{
    const mm_loc *x = a, *y = b;
    if (x->a != y->a)
        return x->a < y->a ? -1 : 1;
    return x->ofs < y->ofs ? -1 : x->ofs > y->ofs;
}

/* Free records of the capped list, sorted: none may touch the next one in
 * the same extent (they would have been merged). */
static void verify_merged(const mm_engine *e, const mm_ns_slot *d, eng_validate *v)
{
    mm_loc *locs = NULL;
    size_t n = 0, cap = 0;
    int64_t guard = mm_total_bytes(e) / MM_REC_HDR + 1;
    for (mm_loc l = d->deleted[0]; !mm_loc_is_null(l) && --guard >= 0;) {
        const mm_deleted *dr = mm_deleted_at(e, l);
        if (!dr)
            break; /* mm_verify_ns reports it */
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            mm_loc *nv = realloc(locs, cap * sizeof *nv);
            if (!nv)
                break;
            locs = nv;
        }
        locs[n++] = l;
        l = dr->next;
    }
    if (n > 1)
        qsort(locs, n, sizeof *locs, loc_cmp);
    for (size_t i = 1; i < n; i++) {
        const mm_deleted *p = mm_deleted_at(e, locs[i - 1]), *q = mm_deleted_at(e, locs[i]);
        if (p && q && locs[i].a == locs[i - 1].a && p->extent_ofs == q->extent_ofs &&
            (int64_t)locs[i - 1].ofs + p->len == locs[i].ofs)
            eng_validate_error(v, "%s: free records at %d:0x%x and 0x%x are neighbours, not "
                               "merged", d->name, locs[i].a, locs[i - 1].ofs, locs[i].ofs);
    }
    free(locs);
}

/* Walk the ring one way; the number of records, or -1 if the walk failed. */
static int64_t ring_count(const mm_engine *e, int32_t slot, bool forward, int64_t limit)
{
    mm_loc l;
    int64_t n = 0;
    if (mm_capped_step(e, slot, mm_loc_null(), forward, &l) != 0)
        return -1;
    while (!mm_loc_is_null(l)) {
        if (++n > limit || !mm_rs_locate(e, slot, l) ||
            mm_capped_step(e, slot, l, forward, &l) != 0)
            return -1;
    }
    return n;
}

void mm_capped_verify(const mm_engine *e, int32_t slot, eng_validate *v, int64_t nrecords)
{
    const mm_ns_slot *d = mm_ns_at(e, slot);
    const char *ns = d->name;
    mm_loc *chain;
    int32_t n, cap_at = -1;
    for (int b = 1; b < MM_NBUCKETS; b++)
        if (!mm_loc_is_null(d->deleted[b]))
            eng_validate_error(v, "%s: capped collection with free list %d not empty", ns, b);
    if (d->capped_size <= 0)
        eng_validate_error(v, "%s: capped collection of size %lld", ns,
                           (long long)d->capped_size);
    if (d->capped_max > 0 && d->nrecords > d->capped_max)
        eng_validate_error(v, "%s: %lld records, more than the capped max %lld", ns,
                           (long long)d->nrecords, (long long)d->capped_max);
    if (mm_extent_chain(e, d->first_extent, &chain, &n) != 0)
        return; /* reported by the extent walk */
    for (int32_t i = 0; i < n; i++)
        if (mm_loc_eq(chain[i], d->cap_extent))
            cap_at = i;
    if (cap_at < 0) {
        eng_validate_error(v, "%s: capExtent %d:0x%x is not an extent of the collection", ns,
                           d->cap_extent.a, d->cap_extent.ofs);
        free(chain);
        return;
    }
    const mm_extent *cx = mm_extent_at(e, d->cap_extent);
    if (!looped(d)) {
        for (int32_t i = cap_at + 1; i < n; i++)
            if (!mm_loc_is_null(mm_extent_at(e, chain[i])->first_record))
                eng_validate_error(v, "%s: extent %d:0x%x after the capExtent has records on "
                                   "the ring's first pass", ns, chain[i].a, chain[i].ofs);
    } else if (!mm_loc_is_null(d->cap_first_new)) {
        bool found = false;
        int64_t guard = cx->length / MM_MIN_REC_LEN + 1;
        for (mm_loc l = cx->first_record; !mm_loc_is_null(l) && --guard >= 0;) {
            const mm_record *r = mm_record_at(e, l);
            if (!r)
                break;
            if (mm_loc_eq(l, d->cap_first_new))
                found = true;
            l = r->next_ofs == MM_NULL_OFS ? mm_loc_null() : mm_loc_make(l.a, r->next_ofs);
        }
        if (!found)
            eng_validate_error(v, "%s: capFirstNewRecord %d:0x%x is not a record of the "
                               "capExtent %d:0x%x", ns, d->cap_first_new.a,
                               d->cap_first_new.ofs, d->cap_extent.a, d->cap_extent.ofs);
    }
    free(chain);
    int64_t fw = ring_count(e, slot, true, nrecords + 1);
    int64_t bw = ring_count(e, slot, false, nrecords + 1);
    if (fw != nrecords || bw != nrecords)
        eng_validate_error(v, "%s: the ring holds %lld records forward, %lld backward, the "
                           "extents %lld", ns, (long long)fw, (long long)bw,
                           (long long)nrecords);
    verify_merged(e, d, v);
}
