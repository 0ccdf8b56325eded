/*
 * mm_extent.c -- extents: sizing, allocation from the per-file extent free
 * lists or from a data file's unused tail, and the per-namespace extent
 * chain (MongoDB 3.0's ExtentManager / MmapV1ExtentManager and
 * RecordStoreV1Base::increaseStorageSize).
 *
 *   initialSize(len)  = len * 16 (* 64 below 1000 bytes), & ~0xff, <= max
 *   followupSize      = max(initialSize, last < 4,000,000 ? last * 4
 *                                                         : last * 1.35)
 *   quantize          = round up to 4 KB, clamp to [4 KB, max]
 *
 * Freed extents (drop, truncate, compact) go on the extent free list of the
 * file that holds them, linked through xnext/xprev, and are reused by any
 * namespace whose request is within [0.8x, 1.4x] of their length (capped:
 * [x - 256, 1.05x + 256]), best fit, stopping early within 10%.
 */
#include <stdlib.h>

#include "mm_int.h"

int32_t mm_extent_max_size(const mm_engine *e)
{
    return (int32_t)(e->file_cap - MM_DFH_SIZE - 16);
}

int64_t mm_max_chain(const mm_engine *e)
{
    return mm_total_bytes(e) / MM_MIN_EXTENT + 1;
}

int32_t mm_extent_quantize(const mm_engine *e, int64_t size)
{
    int32_t max = mm_extent_max_size(e);
    if (size >= max)
        return max;
    int64_t q = (size + 0xfff) & ~(int64_t)0xfff;
    if (q > max)
        return max;
    return q < MM_MIN_EXTENT ? MM_MIN_EXTENT : (int32_t)q;
}

int32_t mm_extent_initial_size(const mm_engine *e, int32_t len)
{
    int64_t sz = (int64_t)len * (len < 1000 ? 64 : 16);
    int32_t max = mm_extent_max_size(e);
    if (sz >= max)
        sz = max;
    int32_t z = (int32_t)(sz & 0xffffff00);
    assert(z > len);
    return z;
}

int32_t mm_extent_followup_size(const mm_engine *e, int32_t len, int32_t last_len)
{
    int64_t x = mm_extent_initial_size(e, len);
    int64_t y = (int64_t)(last_len < 4000000 ? last_len * 4.0 : last_len * 1.35);
    int64_t sz = y > x ? y : x;
    if (sz >= mm_extent_max_size(e))
        return mm_extent_max_size(e);
    int32_t q = mm_extent_quantize(e, sz);
    assert(q >= len);
    return q;
}

/* ---- the per-file extent free lists ---------------------------------------- */

typedef struct pick {
    mm_loc loc;
    int32_t diff;
} pick;

/* Scan one file's free list for the best extent in [low, high]. */
static int scan_free_list(const mm_engine *e, int n, int32_t want, int32_t low, int32_t high,
                          pick *best)
{
    mm_loc l = mm_dfh_at(e, n)->free_start;
    int64_t guard = mm_max_chain(e);
    while (!mm_loc_is_null(l)) {
        const mm_extent *x = mm_extent_at(e, l);
        if (!x || l.a != n || --guard < 0)
            return MD_ECORRUPT;
        if (x->length >= low && x->length <= high) {
            int32_t diff = abs(x->length - want);
            if (diff < best->diff) {
                best->diff = diff;
                best->loc = l;
                if ((double)diff / want < 0.1)
                    return 1; /* close enough */
            }
        }
        l = x->xnext;
    }
    return 0;
}

static int unlink_free(mm_engine *e, mm_txn *t, mm_loc l)
{
    mm_extent *x = mm_extent_at(e, l);
    mm_dfh *h = mm_dfh_at(e, l.a);
    assert(x);
    mm_extent *prev = mm_loc_is_null(x->xprev) ? NULL : mm_extent_at(e, x->xprev);
    mm_extent *next = mm_loc_is_null(x->xnext) ? NULL : mm_extent_at(e, x->xnext);
    if ((!mm_loc_is_null(x->xprev) && !prev) || (!mm_loc_is_null(x->xnext) && !next))
        return MD_ECORRUPT;
    if (prev)
        mm_wloc(t, &prev->xnext, x->xnext);
    if (next)
        mm_wloc(t, &next->xprev, x->xprev);
    if (mm_loc_eq(h->free_start, l))
        mm_wloc(t, &h->free_start, x->xnext);
    if (mm_loc_eq(h->free_end, l))
        mm_wloc(t, &h->free_end, x->xprev);
    return 0;
}

/* MmapV1ExtentManager::_allocFromFreeList */
static int alloc_from_free_list(mm_engine *e, mm_txn *t, int32_t want, bool capped,
                                mm_loc *out, md_error *err)
{
    int32_t low, high;
    if (capped) {
        low = want > 2048 ? want - 256 : want;
        high = (int32_t)(want * 1.05) + 256;
    } else {
        low = (int32_t)(want * 0.8);
        high = (int32_t)(want * 1.4);
    }
    if (high <= MM_MIN_EXTENT)
        high = MM_MIN_EXTENT + 1;
    pick best = {mm_loc_null(), 0x7fffffff};
    for (int n = 0; n < e->nfiles; n++) {
        int rc = scan_free_list(e, n, want > 0 ? want : 1, low, high, &best);
        if (rc < 0)
            return ENG_CORRUPT(err, "extent free list of data file %d is damaged", n);
        if (rc > 0)
            break;
    }
    *out = best.loc;
    if (!mm_loc_is_null(best.loc) && unlink_free(e, t, best.loc) != 0)
        return ENG_CORRUPT(err, "extent free list of data file %d is damaged", best.loc.a);
    return 0;
}

/* Carve a new extent out of file n's unused tail (DataFile::allocExtentArea). */
static mm_loc create_in_file(mm_engine *e, mm_txn *t, int n, int32_t size)
{
    mm_dfh *h = mm_dfh_at(e, n);
    assert(size <= h->unused_length);
    mm_loc l = h->unused;
    mm_wloc(t, &h->unused, mm_loc_make(n, l.ofs + size));
    mm_w32(t, &h->unused_length, h->unused_length - size);
    mm_extent *x = (mm_extent *)mm_ptr(e, l, MM_EXT_HDR);
    assert(x);
    mm_writing(t, x, sizeof *x);
    memset(x, 0, sizeof *x);
    x->magic = MM_EXTENT_MAGIC;
    x->my_loc = l;
    x->length = size;
    x->xnext = x->xprev = x->first_record = x->last_record = mm_loc_null();
    return l;
}

/* MmapV1ExtentManager::_createExtent: last file with room, else new files. */
static int create_extent(mm_engine *e, mm_txn *t, int32_t size, mm_loc *out, md_error *err)
{
    size = mm_extent_quantize(e, size);
    for (int n = e->nfiles - 1; n >= 0; n--) {
        if (mm_dfh_at(e, n)->unused_length >= size) {
            *out = create_in_file(e, t, n, size);
            return 0;
        }
    }
    for (int i = 0; i < 8; i++) {
        int rc = mm_file_add(e, size, err);
        if (rc)
            return rc;
        if (mm_dfh_at(e, e->nfiles - 1)->unused_length >= size) {
            *out = create_in_file(e, t, e->nfiles - 1, size);
            return 0;
        }
    }
    return md_error_set(err, MD_ENOSPC, MD_CODE_OUT_OF_DISK_SPACE,
                        "couldn't allocate space for a new extent of %d bytes", size);
}

int mm_extent_alloc(mm_engine *e, mm_txn *t, bool capped, int32_t size, mm_loc *out,
                    md_error *err)
{
    int rc = alloc_from_free_list(e, t, size, capped, out, err);
    if (rc == 0 && mm_loc_is_null(*out))
        rc = create_extent(e, t, size, out, err);
    return rc;
}

/* Put one extent at the end of its file's free list (freeExtent). */
int mm_extent_free(mm_engine *e, mm_txn *t, mm_loc l)
{
    mm_extent *x = mm_extent_at(e, l);
    mm_dfh *h = mm_dfh_at(e, l.a);
    assert(x);
    if (!mm_loc_is_null(h->free_end) && !mm_extent_at(e, h->free_end))
        return MD_ECORRUPT;
    mm_writing(t, x->ns, sizeof x->ns);
    memset(x->ns, 0, sizeof x->ns);
    strcpy(x->ns, MM_FREELIST_NS);
    mm_wloc(t, &x->xnext, mm_loc_null());
    mm_wloc(t, &x->xprev, h->free_end);
    mm_wloc(t, &x->first_record, mm_loc_null());
    mm_wloc(t, &x->last_record, mm_loc_null());
    if (mm_loc_is_null(h->free_end))
        mm_wloc(t, &h->free_start, l);
    else
        mm_wloc(t, &mm_extent_at(e, h->free_end)->xnext, l);
    mm_wloc(t, &h->free_end, l);
    return 0;
}

/* ---- namespace extent chains ---------------------------------------------- */

/*
 * Where the extent's free space starts (RecordStoreV1Base::_findFirstSpot):
 * right after the header, except that index extents of >= 32 KB skip to
 * the next 4 KB boundary to keep their buckets page aligned.
 */
static mm_loc first_spot(const mm_ns_slot *d, mm_loc el, const mm_extent *x, int32_t *len)
{
    mm_loc l = mm_loc_make(el.a, el.ofs + MM_EXT_HDR);
    *len = x->length - MM_EXT_HDR;
    if (*len >= 32 * 1024 && d->kind == MM_KIND_INDEX && !d->is_capped) {
        int32_t aligned = (l.ofs + 0xfff) & ~0xfff;
        *len -= aligned - l.ofs;
        l.ofs = aligned;
    }
    return l;
}

int mm_ns_increase_storage(mm_engine *e, mm_txn *t, int32_t slot, int32_t size,
                           md_error *err)
{
    mm_ns_slot *d = mm_ns_at(e, slot);
    mm_loc el;
    if (!mm_loc_is_null(d->last_extent) && !mm_extent_at(e, d->last_extent))
        return ENG_CORRUPT(err, "%s: lastExtent %d:0x%x is not an extent", d->name,
                           d->last_extent.a, d->last_extent.ofs);
    int rc = mm_extent_alloc(e, t, d->is_capped != 0, size, &el, err);
    if (rc)
        return rc;
    mm_extent *x = mm_extent_at(e, el);
    assert(x);
    mm_writing(t, x->ns, sizeof x->ns);
    memset(x->ns, 0, sizeof x->ns);
    memcpy(x->ns, d->name, strlen(d->name));
    mm_wloc(t, &x->xnext, mm_loc_null());
    mm_wloc(t, &x->xprev, mm_loc_null());
    mm_wloc(t, &x->first_record, mm_loc_null());
    mm_wloc(t, &x->last_record, mm_loc_null());
    if (mm_loc_is_null(d->last_extent)) {
        assert(mm_loc_is_null(d->first_extent));
        mm_wloc(t, &d->first_extent, el);
    } else {
        mm_wloc(t, &x->xprev, d->last_extent);
        mm_wloc(t, &mm_extent_at(e, d->last_extent)->xnext, el);
    }
    mm_wloc(t, &d->last_extent, el);
    mm_w32(t, &d->last_extent_size, x->length);
    mm_extent_free_space(e, t, slot, el);
    return 0;
}

void mm_extent_free_space(mm_engine *e, mm_txn *t, int32_t slot, mm_loc el)
{
    const mm_extent *x = mm_extent_at(e, el);
    int32_t len;
    assert(x);
    mm_loc spot = first_spot(mm_ns_at(e, slot), el, x, &len);
    mm_deleted *dr = (mm_deleted *)mm_ptr(e, spot, MM_REC_HDR);
    mm_writing(t, dr, sizeof *dr);
    dr->len = len;
    dr->extent_ofs = el.ofs;
    dr->next = mm_loc_null();
    mm_add_deleted(e, t, slot, spot);
}

/* Collect an extent chain from `start`; MD_ECORRUPT if it is broken. */
int mm_extent_chain(const mm_engine *e, mm_loc start, mm_loc **out, int32_t *n)
{
    int64_t guard = mm_max_chain(e);
    mm_loc *v = NULL;
    int32_t cnt = 0, cap = 0;
    for (mm_loc l = start; !mm_loc_is_null(l);) {
        const mm_extent *x = mm_extent_at(e, l);
        if (!x || --guard < 0) {
            free(v);
            return MD_ECORRUPT;
        }
        if (cnt == cap) {
            cap = cap ? cap * 2 : 16;
            mm_loc *nv = realloc(v, (size_t)cap * sizeof *nv);
            if (!nv) {
                free(v);
                return MD_ENOMEM;
            }
            v = nv;
        }
        v[cnt++] = l;
        l = x->xnext;
    }
    *out = v;
    *n = cnt;
    return 0;
}

/* Free the extents from `start` to the end of their xnext chain. */
int mm_extent_free_chain(mm_engine *e, mm_txn *t, mm_loc start)
{
    mm_loc *v;
    int32_t n;
    int rc = mm_extent_chain(e, start, &v, &n);
    if (rc)
        return rc;
    for (int32_t i = 0; rc == 0 && i < n; i++)
        rc = mm_extent_free(e, t, v[i]);
    free(v);
    return rc;
}

/* Give every extent of the namespace back to the extent free lists and
 * empty its details (used by drop). */
int mm_ns_free_extents(mm_engine *e, mm_txn *t, int32_t slot)
{
    int rc = mm_extent_free_chain(e, t, mm_ns_at(e, slot)->first_extent);
    if (rc)
        return rc;
    mm_ns_slot *d = mm_ns_at(e, slot);
    mm_wloc(t, &d->first_extent, mm_loc_null());
    mm_wloc(t, &d->last_extent, mm_loc_null());
    for (int b = 0; b < MM_NBUCKETS; b++)
        mm_wloc(t, &d->deleted[b], mm_loc_null());
    return 0;
}

int64_t mm_ns_storage_size(const mm_engine *e, int32_t slot, int32_t *nextents)
{
    const mm_ns_slot *d = mm_ns_at(e, slot);
    int64_t guard = mm_max_chain(e), total = 0;
    int32_t n = 0;
    for (mm_loc l = d->first_extent; !mm_loc_is_null(l) && --guard >= 0; n++) {
        const mm_extent *x = mm_extent_at(e, l);
        if (!x)
            break;
        total += x->length;
        l = x->xnext;
    }
    if (nextents)
        *nextents = n;
    return total;
}
