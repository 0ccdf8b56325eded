/*
 * mm_rs.c -- record stores (collections) and their cursors.
 *
 * A RecordId is the record's DiskLoc, so an update that outgrows its slot
 * moves the document: a new record with fresh padding is allocated, the
 * bytes copied, the old record freed, and the caller told the new id.
 * Updates that fit are written in place, whole or as damages (patches).
 *
 * Natural order is extent order, then each extent's record chain.  Cursors
 * remember the record they will return next; every open cursor is on the
 * engine's list, and removing a record first moves any cursor about to
 * return it to the record after it, which gives the contract's
 * save/restore semantics (a removed or moved record is skipped).
 *
 * Capped collections (mm_capped.c) are in ring order instead, oldest
 * first.  Their forward cursors tail: they remember the last record they
 * returned and step from it on each call, so records inserted after they
 * reached the end come next; removing that record (the ring overwrote it)
 * marks them lost, and they fail with MD_ECAPPEDLOST from then on, even if
 * a new record now has the same RecordId.  (A transaction that removed it
 * and then aborted loses them too.)
 */
#include <stdlib.h>

#include "mm_int.h"

static mm_rs *RS(eng_rs *rs)
{
    assert(rs && rs->engine->ops == &mm_engine_ops);
    return (mm_rs *)rs;
}

mm_ns_slot *mm_rs_details(const mm_rs *rs)
{
    mm_ns_slot *d = mm_ns_at(rs->e, rs->slot);
    if (d->hash <= 1 || strncmp(d->name, rs->name, sizeof d->name) != 0)
        return NULL;
    return d;
}

/* ---- locating records -------------------------------------------------------- */

static bool in_extent(int32_t ofs, int32_t len, int32_t ext_ofs, const mm_extent *x)
{
    return ofs >= ext_ofs + MM_EXT_HDR && (ofs & 3) == 0 &&
           (int64_t)ofs + len <= (int64_t)ext_ofs + x->length;
}

static mm_record *locate(const mm_engine *e, int32_t slot, mm_loc l, bool linked)
{
    const mm_ns_slot *d = mm_ns_at(e, slot);
    mm_record *r = mm_record_at(e, l);
    if (!r)
        return NULL;
    const mm_extent *x = mm_extent_at(e, mm_loc_make(l.a, r->extent_ofs));
    if (!x || r->len < MM_MIN_REC_LEN || !in_extent(l.ofs, r->len, r->extent_ofs, x) ||
        strncmp(x->ns, d->name, sizeof x->ns) != 0)
        return NULL;
    if (r->next_ofs != MM_NULL_OFS && !in_extent(r->next_ofs, MM_REC_HDR, r->extent_ofs, x))
        return NULL;
    if (r->prev_ofs == MM_NULL_OFS) {
        if (!mm_loc_eq(x->first_record, l))
            return NULL;
    } else {
        if (!in_extent(r->prev_ofs, MM_REC_HDR, r->extent_ofs, x))
            return NULL;
        const mm_record *p = (const mm_record *)(e->files[l.a].map + r->prev_ofs);
        if (linked && p->next_ofs != l.ofs)
            return NULL;
    }
    if (d->kind != MM_KIND_INDEX) {
        int32_t bl = mm_le32((const uint8_t *)(r + 1));
        if (bl < 5 || bl > r->len - MM_REC_HDR)
            return NULL;
    }
    return r;
}

mm_record *mm_rs_locate(const mm_engine *e, int32_t slot, mm_loc l)
{
    return locate(e, slot, l, true);
}

mm_record *mm_rs_locate_point(const mm_engine *e, int32_t slot, mm_loc l)
{
    return locate(e, slot, l, false);
}

/* The first (forward) or last record of the first non-empty extent from el. */
static int extent_walk(const mm_engine *e, mm_loc el, bool forward, mm_loc *out)
{
    int64_t guard = mm_max_chain(e);
    while (!mm_loc_is_null(el)) {
        const mm_extent *x = mm_extent_at(e, el);
        if (!x || --guard < 0)
            return MD_ECORRUPT;
        mm_loc r = forward ? x->first_record : x->last_record;
        if (!mm_loc_is_null(r)) {
            if (!mm_record_at(e, r))
                return MD_ECORRUPT;
            *out = r;
            return 0;
        }
        el = forward ? x->xnext : x->xprev;
    }
    *out = mm_loc_null();
    return 0;
}

int mm_rec_step(const mm_engine *e, int32_t slot, mm_loc cur, bool forward, mm_loc *out)
{
    const mm_ns_slot *d = mm_ns_at(e, slot);
    if (d->is_capped)
        return mm_capped_step(e, slot, cur, forward, out);
    if (mm_loc_is_null(cur))
        return extent_walk(e, forward ? d->first_extent : d->last_extent, forward, out);
    const mm_record *r = mm_record_at(e, cur);
    if (!r)
        return MD_ECORRUPT;
    int32_t ofs = forward ? r->next_ofs : r->prev_ofs;
    if (ofs != MM_NULL_OFS) {
        *out = mm_loc_make(cur.a, ofs);
        return mm_record_at(e, *out) ? 0 : MD_ECORRUPT;
    }
    const mm_extent *x = mm_extent_at(e, mm_loc_make(cur.a, r->extent_ofs));
    if (!x)
        return MD_ECORRUPT;
    return extent_walk(e, forward ? x->xnext : x->xprev, forward, out);
}

/* ---- writes shared with the catalog ----------------------------------------- */

static int check_doc(const uint8_t *data, uint32_t len, md_error *err)
{
    if (len < 5)
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                            "record has to be >= 5 bytes (a BSON document), got %u", len);
    if ((uint32_t)mm_le32(data) != len)
        return md_error_set(err, MD_EINVAL, MD_CODE_INVALID_BSON,
                            "record of %u bytes does not start with its BSON length (%d)", len,
                            mm_le32(data));
    if ((uint64_t)len + MM_REC_HDR > MM_MAX_ALLOC)
        return md_error_set(err, MD_ETOOBIG, MD_CODE_BSON_OBJECT_TOO_LARGE,
                            "record has to be <= 16.5MB (%u bytes)", len);
    return 0;
}

int mm_do_insert(mm_engine *e, mm_txn *t, int32_t slot, const uint8_t *data, uint32_t len,
                 mm_loc *out, md_error *err)
{
    int rc = check_doc(data, len, err);
    if (rc)
        return rc;
    int32_t alloc = mm_alloc_size_for(mm_ns_at(e, slot), (int32_t)len + MM_REC_HDR);
    if ((rc = mm_record_insert(e, t, slot, data, len, alloc, out, err)) != 0)
        return rc;
    mm_ns_slot *d = mm_ns_at(e, slot);
    mm_w64(t, &d->n_inserts, d->n_inserts + 1);
    mm_w64(t, &d->bytes_written, d->bytes_written + len);
    return 0;
}

/* Move: new record with fresh padding, copy, free the old one. */
static int move_record(mm_engine *e, mm_txn *t, int32_t slot, mm_loc l, const uint8_t *data,
                       uint32_t len, mm_loc *out, md_error *err)
{
    mm_pf_too_small(e, t, slot);
    int32_t alloc = mm_alloc_size_for(mm_ns_at(e, slot), (int32_t)len + MM_REC_HDR);
    int rc = mm_record_insert(e, t, slot, data, len, alloc, out, err);
    if (rc)
        return rc;
    mm_record_delete(e, t, slot, l);
    mm_ns_slot *d = mm_ns_at(e, slot);
    mm_w64(t, &d->n_moves, d->n_moves + 1);
    mm_ns_header *h = mm_ns_header_of(e);
    mm_w64(t, &h->total_moves, h->total_moves + 1);
    return 0;
}

/* nUpdates, nInPlace (when in place) and bytesWritten: adjacent fields of
 * the details, declared as one intent (one journal entry, not three). */
static void count_update(mm_txn *t, mm_ns_slot *d, bool inplace, uint64_t written)
{
    _Static_assert(offsetof(mm_ns_slot, n_inplace) == offsetof(mm_ns_slot, n_updates) + 8 &&
                       offsetof(mm_ns_slot, bytes_written) ==
                           offsetof(mm_ns_slot, n_updates) + 24,
                   "update counters are adjacent");
    mm_writing(t, &d->n_updates, offsetof(mm_ns_slot, bytes_written) + sizeof d->bytes_written -
                                     offsetof(mm_ns_slot, n_updates));
    d->n_updates++;
    d->n_inplace += inplace;
    d->bytes_written += (int64_t)written;
}

int mm_do_update(mm_engine *e, mm_txn *t, int32_t slot, mm_loc l, const uint8_t *data,
                 uint32_t len, mm_loc *out, bool *moved, md_error *err)
{
    int rc = check_doc(data, len, err);
    if (rc)
        return rc;
    bool fits = false;
    mm_record *r = mm_rs_locate_point(e, slot, l);
    if (r && !(fits = r->len - MM_REC_HDR >= (int32_t)len))
        r = mm_rs_locate(e, slot, l); /* a move unlinks it: check the chain */
    if (!r)
        return md_error_set(err, MD_NOTFOUND, MD_CODE_NO_SUCH_KEY,
                            "no record at %d:0x%x", l.a, l.ofs);
    if (mm_ns_at(e, slot)->is_capped && !fits)
        return eng_capped_cannot_grow(err);
    if (fits) {
        mm_writing(t, r + 1, len);
        memmove(r + 1, data, len);
        mm_pf_fits(e, t, slot);
        *out = l;
        *moved = false;
    } else {
        if ((rc = move_record(e, t, slot, l, data, len, out, err)) != 0)
            return rc;
        *moved = true;
    }
    count_update(t, mm_ns_at(e, slot), !*moved, len);
    return 0;
}

/* ---- record store handles ------------------------------------------------------ */

static void set_strategy(mm_txn *t, mm_ns_slot *d, int alloc)
{
    int32_t f = d->user_flags & ~(MM_FLAG_POWEROF2 | MM_FLAG_NOPADDING | MM_FLAG_PADDINGFACTOR);
    f |= alloc == ENG_ALLOC_NOPADDING       ? MM_FLAG_NOPADDING
         : alloc == ENG_ALLOC_PADDINGFACTOR ? MM_FLAG_PADDINGFACTOR
                                            : MM_FLAG_POWEROF2;
    mm_w32(t, &d->user_flags, f);
}

int mm_rs_create(eng_engine *eng, eng_txn *tx, const char *ident, const eng_rs_options *o,
                 md_error *err)
{
    mm_engine *e = mm_E(eng);
    mm_txn *t = mm_T(tx, e);
    int alloc = o ? o->alloc : ENG_ALLOC_POWEROF2;
    int32_t slot;
    if (alloc < ENG_ALLOC_POWEROF2 || alloc > ENG_ALLOC_PADDINGFACTOR)
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE, "unknown allocation strategy %d",
                            alloc);
    if (o && o->capped && o->capped_size <= 0)
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                            "a capped collection needs a size > 0");
    int rc = mm_ns_add(e, t, ident, MM_KIND_COLL, &slot, err);
    if (rc)
        return rc;
    set_strategy(t, mm_ns_at(e, slot), alloc);
    if (o && o->capped)
        return mm_capped_create(e, t, slot, o->capped_size, o->capped_max, err);
    /* MongoDB's _userCreateNS: a first extent of Extent::initialSize(128) */
    return mm_ns_increase_storage(e, t, slot, mm_extent_initial_size(e, 128), err);
}

int mm_rs_open(eng_engine *eng, const char *ident, eng_rs **out, md_error *err)
{
    mm_engine *e = mm_E(eng);
    int32_t slot = mm_ns_find(e, ident);
    if (slot < 0 || mm_ns_at(e, slot)->kind != MM_KIND_COLL)
        return mm_meta_missing(e, ident, MD_CODE_NAMESPACE_NOT_FOUND, "ns", err);
    mm_rs *rs = calloc(1, sizeof *rs);
    if (!rs)
        return md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
    rs->base.engine = eng;
    rs->e = e;
    rs->slot = slot;
    snprintf(rs->name, sizeof rs->name, "%s", ident);
    *out = &rs->base;
    return 0;
}

void mm_rs_close(eng_rs *rs)
{
    free(RS(rs));
}

int mm_rs_drop(eng_engine *eng, eng_txn *tx, const char *ident)
{
    mm_engine *e = mm_E(eng);
    mm_txn *t = mm_T(tx, e);
    int32_t slot = mm_ns_find(e, ident);
    if (slot < 0 || mm_ns_at(e, slot)->kind != MM_KIND_COLL)
        return MD_NOTFOUND;
    mm_cursors_invalidate(e, slot);
    int rc = mm_ns_free_extents(e, t, slot);
    if (rc)
        return rc;
    mm_ns_remove(e, t, slot);
    return 0;
}

int mm_rs_insert(eng_rs *rs_, eng_txn *tx, const uint8_t *data, uint32_t len, eng_rid *out,
                 md_error *err)
{
    mm_rs *rs = RS(rs_);
    mm_txn *t = mm_T(tx, rs->e);
    mm_loc l;
    mm_ns_slot *d = mm_rs_details(rs);
    if (!d)
        return md_error_set(err, MD_NOTFOUND, MD_CODE_NAMESPACE_NOT_FOUND, "ns not found: %s",
                            rs->name);
    int rc;
    if (!d->is_capped) {
        rc = mm_do_insert(rs->e, t, rs->slot, data, len, &l, err);
    } else if ((rc = check_doc(data, len, err)) == 0 &&
               (rc = mm_capped_insert(rs->e, t, rs_, tx, rs->slot, data, len, &l, err)) == 0) {
        d = mm_ns_at(rs->e, rs->slot);
        mm_w64(t, &d->n_inserts, d->n_inserts + 1);
        mm_w64(t, &d->bytes_written, d->bytes_written + len);
    }
    if (rc == 0)
        *out = mm_loc_to_rid(l);
    return rc;
}

/*
 * The record the calling thread last found with mm_rs_get while a write
 * transaction was open, and how many writes that transaction had made.  An
 * update reads its record and then patches it: if the transaction is the
 * same one and has written nothing since, the record's checks
 * (mm_rs_locate) still hold -- no other thread writes while it is open --
 * and mm_rs_update_damages need not make them again.
 */
static __thread struct {
    const mm_engine *e;
    int32_t slot;
    eng_rid rid;
    uint64_t serial;
    size_t n;
} seen;

int mm_rs_get(eng_rs *rs_, eng_rid rid, const uint8_t **data, uint32_t *len)
{
    mm_rs *rs = RS(rs_);
    if (!mm_rs_details(rs))
        return MD_NOTFOUND;
    const mm_record *r = mm_rs_locate_point(rs->e, rs->slot, mm_rid_to_loc(rid));
    if (!r)
        return MD_NOTFOUND;
    const mm_txn *t = mm_txn_mine && mm_txn_mine->e == rs->e ? mm_txn_mine : NULL;
    seen.e = t ? rs->e : NULL;
    if (t) {
        seen.slot = rs->slot;
        seen.rid = rid;
        seen.serial = t->serial;
        seen.n = t->n;
    }
    *data = (const uint8_t *)(r + 1);
    *len = (uint32_t)mm_le32(*data);
    return 0;
}

int mm_rs_update(eng_rs *rs_, eng_txn *tx, eng_rid rid, const uint8_t *data, uint32_t len,
                 eng_rid *new_rid, bool *moved, md_error *err)
{
    mm_rs *rs = RS(rs_);
    mm_txn *t = mm_T(tx, rs->e);
    mm_loc l;
    if (!mm_rs_details(rs))
        return md_error_set(err, MD_NOTFOUND, MD_CODE_NAMESPACE_NOT_FOUND, "ns not found: %s",
                            rs->name);
    int rc = mm_do_update(rs->e, t, rs->slot, mm_rid_to_loc(rid), data, len, &l, moved, err);
    if (rc == 0)
        *new_rid = mm_loc_to_rid(l);
    return rc;
}

int mm_rs_update_damages(eng_rs *rs_, eng_txn *tx, eng_rid rid, const uint8_t *src,
                         const eng_damage *dmg, size_t nd, md_error *err)
{
    mm_rs *rs = RS(rs_);
    mm_txn *t = mm_T(tx, rs->e);
    mm_ns_slot *d = mm_rs_details(rs);
    bool checked = d && seen.e == rs->e && seen.slot == rs->slot && seen.rid == rid &&
                   seen.serial == t->serial && seen.n == t->n;
    mm_record *r = !d ? NULL
                   : checked ? mm_record_at(rs->e, mm_rid_to_loc(rid))
                             : mm_rs_locate_point(rs->e, rs->slot, mm_rid_to_loc(rid));
    if (!r)
        return md_error_set(err, MD_NOTFOUND, MD_CODE_NO_SUCH_KEY, "no record %lld in %s",
                            (long long)rid, rs->name);
    uint8_t *dst = (uint8_t *)(r + 1);
    uint64_t size = (uint64_t)mm_le32(dst), written = 0;
    for (size_t i = 0; i < nd; i++)
        if ((uint64_t)dmg[i].dst_ofs + dmg[i].len > size ||
            (uint64_t)dmg[i].src_ofs + dmg[i].len > size)
            return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                                "damage %zu (%u bytes at %u) is outside the %llu-byte document",
                                i, dmg[i].len, dmg[i].dst_ofs, (unsigned long long)size);
    for (size_t i = 0; i < nd; i++) {
        mm_writing(t, dst + dmg[i].dst_ofs, dmg[i].len);
        memmove(dst + dmg[i].dst_ofs, src + dmg[i].src_ofs, dmg[i].len);
        written += dmg[i].len;
    }
    mm_pf_fits(rs->e, t, rs->slot);
    count_update(t, d, true, written);
    return 0;
}

int mm_rs_remove(eng_rs *rs_, eng_txn *tx, eng_rid rid)
{
    mm_rs *rs = RS(rs_);
    mm_txn *t = mm_T(tx, rs->e);
    mm_loc l = mm_rid_to_loc(rid);
    if (!mm_rs_details(rs) || !mm_rs_locate(rs->e, rs->slot, l))
        return MD_NOTFOUND;
    mm_record_delete(rs->e, t, rs->slot, l);
    return 0;
}

/* RecordStoreV1Base::truncate: free every extent but the first, which
 * becomes one big free record.  A capped collection keeps its extents
 * (emptyCappedCollection). */
int mm_rs_truncate(eng_rs *rs_, eng_txn *tx)
{
    mm_rs *rs = RS(rs_);
    mm_engine *e = rs->e;
    mm_txn *t = mm_T(tx, e);
    mm_ns_slot *d = mm_rs_details(rs);
    if (!d)
        return MD_NOTFOUND;
    mm_cursors_invalidate(e, rs->slot);
    if (d->is_capped)
        return mm_capped_truncate(e, t, rs->slot);
    if (mm_loc_is_null(d->first_extent))
        return 0;
    mm_loc first = d->first_extent;
    mm_extent *x = mm_extent_at(e, first);
    if (!x || (!mm_loc_is_null(x->xnext) && !mm_extent_at(e, x->xnext)))
        return MD_ECORRUPT;
    if (!mm_loc_is_null(x->xnext)) {
        mm_loc next = x->xnext;
        mm_wloc(t, &mm_extent_at(e, next)->xprev, mm_loc_null());
        mm_wloc(t, &x->xnext, mm_loc_null());
        mm_wloc(t, &d->last_extent, first);
        mm_w32(t, &d->last_extent_size, x->length);
        int rc = mm_extent_free_chain(e, t, next);
        if (rc)
            return rc;
    }
    mm_wloc(t, &x->first_record, mm_loc_null());
    mm_wloc(t, &x->last_record, mm_loc_null());
    for (int b = 0; b < MM_NBUCKETS; b++)
        mm_wloc(t, &d->deleted[b], mm_loc_null());
    mm_extent_free_space(e, t, rs->slot, first);
    mm_w64(t, &d->datasize, 0);
    mm_w64(t, &d->nrecords, 0);
    return 0;
}

int mm_rs_set_alloc(eng_rs *rs_, eng_txn *tx, int alloc)
{
    mm_rs *rs = RS(rs_);
    mm_txn *t = mm_T(tx, rs->e);
    mm_ns_slot *d = mm_rs_details(rs);
    if (!d)
        return MD_NOTFOUND;
    if (alloc < ENG_ALLOC_POWEROF2 || alloc > ENG_ALLOC_PADDINGFACTOR)
        return MD_EINVAL;
    set_strategy(t, d, alloc);
    return 0;
}

/* ---- statistics ------------------------------------------------------------------ */

void mm_rs_stats(eng_rs *rs_, struct eng_rs_stats *s)
{
    mm_rs *rs = RS(rs_);
    const mm_ns_slot *d = mm_rs_details(rs);
    if (!d)
        return;
    s->count = d->nrecords;
    s->data_size = d->datasize;
    s->storage_size = mm_ns_storage_size(rs->e, rs->slot, NULL);
    s->n_inserts = d->n_inserts;
    s->n_updates = d->n_updates;
    s->n_inplace = d->n_inplace;
    s->n_moves = d->n_moves;
    s->bytes_written = d->bytes_written;
}

/* freeList: [{bucket, size, count, bytes}] for the non-empty buckets. */
static void append_free_lists(const mm_engine *e, const mm_ns_slot *d, bson_t *sub)
{
    bson_t arr, item;
    char key[16];
    int n = 0;
    int64_t guard = mm_total_bytes(e) / 16 + 1;
    bson_append_array_begin(sub, "freeList", -1, &arr);
    for (int b = 0; b < MM_NBUCKETS; b++) {
        int64_t count = 0, bytes = 0;
        for (mm_loc l = d->deleted[b]; !mm_loc_is_null(l) && guard-- > 0; count++) {
            const mm_deleted *dr = mm_deleted_at(e, l);
            if (!dr)
                break;
            bytes += dr->len;
            l = dr->next;
        }
        if (count == 0)
            continue;
        snprintf(key, sizeof key, "%d", n++);
        bson_append_document_begin(&arr, key, -1, &item);
        BSON_APPEND_INT32(&item, "bucket", b);
        BSON_APPEND_INT32(&item, "size", mm_bucket_sizes[b]);
        BSON_APPEND_INT64(&item, "count", count);
        BSON_APPEND_INT64(&item, "bytes", bytes);
        bson_append_document_end(&arr, &item);
    }
    bson_append_array_end(sub, &arr);
}

void mm_rs_append_stats(eng_rs *rs_, bson_t *sub)
{
    mm_rs *rs = RS(rs_);
    const mm_ns_slot *d = mm_rs_details(rs);
    int32_t nextents;
    if (!d)
        return;
    mm_ns_storage_size(rs->e, rs->slot, &nextents);
    BSON_APPEND_INT32(sub, "numExtents", nextents);
    BSON_APPEND_INT32(sub, "lastExtentSize", d->last_extent_size);
    BSON_APPEND_INT32(sub, "userFlags", d->user_flags);
    BSON_APPEND_DOUBLE(sub, "paddingFactor", d->padding_factor);
    BSON_APPEND_UTF8(sub, "allocationStrategy", eng_alloc_name(mm_strategy(d)));
    BSON_APPEND_INT32(sub, "nIndexes", d->n_indexes);
    BSON_APPEND_INT64(sub, "inPlaceUpdates", d->n_inplace);
    BSON_APPEND_INT64(sub, "moves", d->n_moves);
    append_free_lists(rs->e, d, sub);
}

/* ---- cursors --------------------------------------------------------------------- */

static mm_cursor *CUR(eng_rs_cursor *c)
{
    assert(c && c->rs->engine->ops == &mm_engine_ops);
    return (mm_cursor *)c;
}

int mm_rs_cursor_open(eng_rs *rs_, bool forward, eng_rs_cursor **out)
{
    mm_rs *rs = RS(rs_);
    const mm_ns_slot *d = mm_rs_details(rs);
    if (!d)
        return MD_NOTFOUND;
    mm_cursor *c = calloc(1, sizeof *c);
    if (!c)
        return MD_ENOMEM;
    c->base.rs = rs_;
    c->e = rs->e;
    c->slot = rs->slot;
    c->forward = forward;
    c->next = mm_loc_null();
    c->tail = forward && d->is_capped;
    c->last = mm_loc_null();
    pthread_mutex_lock(&rs->e->cursors_mu);
    c->link_next = rs->e->cursors;
    if (c->link_next)
        c->link_next->link_prev = c;
    rs->e->cursors = c;
    pthread_mutex_unlock(&rs->e->cursors_mu);
    *out = &c->base;
    return 0;
}

/* A tailing cursor: the record after the last one returned, every time. */
static int tail_next(mm_cursor *c, eng_rid *rid, const uint8_t **data, uint32_t *len)
{
    mm_loc n;
    if (c->lost)
        return MD_ECAPPEDLOST;
    if (mm_rec_step(c->e, c->slot, c->last, true, &n) != 0)
        return MD_ECORRUPT;
    if (mm_loc_is_null(n))
        return MD_NOTFOUND;
    const mm_record *r = mm_rs_locate(c->e, c->slot, n);
    if (!r)
        return MD_ECORRUPT;
    c->started = true;
    c->last = n;
    *rid = mm_loc_to_rid(n);
    *data = (const uint8_t *)(r + 1);
    *len = (uint32_t)mm_le32(*data);
    return 0;
}

int mm_rs_cursor_next(eng_rs_cursor *c_, eng_rid *rid, const uint8_t **data, uint32_t *len)
{
    mm_cursor *c = CUR(c_);
    int rc;
    if (c->eof || !mm_rs_details((mm_rs *)c->base.rs))
        return MD_NOTFOUND;
    if (c->tail)
        return tail_next(c, rid, data, len);
    if (!c->started) {
        c->started = true;
        if ((rc = mm_rec_step(c->e, c->slot, mm_loc_null(), c->forward, &c->next)) != 0)
            return rc;
    }
    if (mm_loc_is_null(c->next)) {
        c->eof = true;
        return MD_NOTFOUND;
    }
    mm_loc cur = c->next;
    const mm_record *r = mm_rs_locate(c->e, c->slot, cur);
    if (++c->steps > mm_total_bytes(c->e) / MM_MIN_REC_LEN + 1)
        return MD_ECORRUPT; /* more records than fit: the chain loops */
    if (!r || (rc = mm_rec_step(c->e, c->slot, cur, c->forward, &c->next)) != 0)
        return MD_ECORRUPT;
    *rid = mm_loc_to_rid(cur);
    *data = (const uint8_t *)(r + 1);
    *len = (uint32_t)mm_le32(*data);
    return 0;
}

/* Positions are adjusted on every removal, so save has nothing to do. */
void mm_rs_cursor_save(eng_rs_cursor *c)
{
    (void)CUR(c);
}

int mm_rs_cursor_restore(eng_rs_cursor *c_)
{
    mm_cursor *c = CUR(c_);
    if (!mm_rs_details((mm_rs *)c->base.rs))
        return MD_NOTFOUND;
    return c->tail && c->lost ? MD_ECAPPEDLOST : 0;
}

void mm_rs_cursor_close(eng_rs_cursor *c_)
{
    mm_cursor *c = CUR(c_);
    pthread_mutex_lock(&c->e->cursors_mu);
    if (c->link_prev)
        c->link_prev->link_next = c->link_next;
    else
        c->e->cursors = c->link_next;
    if (c->link_next)
        c->link_next->link_prev = c->link_prev;
    pthread_mutex_unlock(&c->e->cursors_mu);
    free(c);
}

/* Record l of namespace slot is about to be unlinked: cursors that would
 * return it next move on to its successor. */
void mm_cursors_removing(mm_engine *e, int32_t slot, mm_loc l)
{
    pthread_mutex_lock(&e->cursors_mu);
    for (mm_cursor *c = e->cursors; c; c = c->link_next) {
        if (c->slot == slot && c->tail && mm_loc_eq(c->last, l))
            c->lost = true;
        if (c->slot != slot || c->tail || !c->started || c->eof || !mm_loc_eq(c->next, l))
            continue;
        if (mm_rec_step(e, slot, l, c->forward, &c->next) != 0)
            c->next = mm_loc_null();
    }
    pthread_mutex_unlock(&e->cursors_mu);
}

void mm_cursors_invalidate(mm_engine *e, int32_t slot)
{
    pthread_mutex_lock(&e->cursors_mu);
    for (mm_cursor *c = e->cursors; c; c = c->link_next) {
        if (c->slot != slot)
            continue;
        if (c->tail) /* truncate: its last record is gone */
            c->lost |= !mm_loc_is_null(c->last);
        else
            c->eof = true;
    }
    pthread_mutex_unlock(&e->cursors_mu);
}
