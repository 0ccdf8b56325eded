/*
 * mm_index.c -- sorted stores (indexes): the pager that gives mm_btree.c
 * its buckets, and the eng_ss_* operations on top of mm_bt_*.
 *
 * As in MongoDB, an index is a namespace of its own ("test.c.$x_1") and a
 * bucket is an ordinary record of that namespace, allocated from its free
 * lists and extents with lengthWithHeaders 8192 (MM_BUCKET_SIZE = 8176
 * bytes of body), so index size and fragmentation are real.  The tree's
 * root ("head") is kept in the namespace details.  Creating or dropping an
 * index also counts it in its collection's nIndexes (the part of the name
 * before ".$"), which the paddingFactor strategy uses.
 */
#include <stdio.h>
#include <stdlib.h>

#include "mm_int.h"

typedef struct mm_ss {
    eng_ss base;
    mm_engine *e;
    int32_t slot;
    char name[ENG_IDENT_MAX];
    mm_bt_pager pager;
    mm_bt *bt;
    md_error alloc_err; /* why the pager's last allocation failed */
} mm_ss;

typedef struct mm_ss_cur {
    eng_ss_cursor base;
    mm_bt_cursor *c;
} mm_ss_cur;

static mm_ss *SS(eng_ss *ss)
{
    assert(ss && ss->engine->ops == &mm_engine_ops);
    return (mm_ss *)ss;
}

static mm_bt_loc bt_loc(mm_loc l)
{
    return mm_loc_is_null(l) ? 0 : (mm_bt_loc)mm_loc_to_rid(l);
}

static mm_loc from_bt_loc(mm_bt_loc b)
{
    return b == 0 ? mm_loc_null() : mm_rid_to_loc((eng_rid)b);
}

/* ---- the pager ------------------------------------------------------------------ */

static int pg_alloc(void *ctx, eng_txn *tx, mm_bt_loc *loc, uint8_t **page)
{
    mm_ss *ss = ctx;
    mm_txn *t = mm_T(tx, ss->e);
    mm_loc l;
    int rc = mm_record_insert(ss->e, t, ss->slot, NULL, MM_BUCKET_SIZE,
                              MM_BUCKET_SIZE + MM_REC_HDR, &l, &ss->alloc_err);
    if (rc)
        return rc;
    *loc = bt_loc(l);
    *page = (uint8_t *)(mm_record_at(ss->e, l) + 1);
    return 0;
}

/* A bucket of this index at loc, or NULL. */
static mm_record *bucket_at(const mm_ss *ss, mm_bt_loc loc)
{
    mm_loc l = from_bt_loc(loc);
    const mm_engine *e = ss->e;
    mm_record *r = mm_record_at(e, l);
    if (!r || r->len < MM_BUCKET_SIZE + MM_REC_HDR)
        return NULL;
    const mm_extent *x = mm_extent_at(e, mm_loc_make(l.a, r->extent_ofs));
    if (!x || l.ofs < r->extent_ofs + MM_EXT_HDR ||
        (int64_t)l.ofs + r->len > (int64_t)r->extent_ofs + x->length)
        return NULL;
    return r;
}

static void pg_free(void *ctx, eng_txn *tx, mm_bt_loc loc)
{
    mm_ss *ss = ctx;
    mm_txn *t = mm_T(tx, ss->e);
    mm_loc l = from_bt_loc(loc);
    if (mm_rs_locate(ss->e, ss->slot, l))
        mm_record_delete(ss->e, t, ss->slot, l);
}

static uint8_t *pg_page(void *ctx, mm_bt_loc loc)
{
    mm_record *r = bucket_at(ctx, loc);
    return r ? (uint8_t *)(r + 1) : NULL;
}

static void pg_writing(void *ctx, eng_txn *tx, void *p, size_t len)
{
    mm_ss *ss = ctx;
    mm_writing(mm_T(tx, ss->e), p, len);
}

static mm_bt_loc pg_get_root(void *ctx)
{
    mm_ss *ss = ctx;
    return bt_loc(mm_ns_at(ss->e, ss->slot)->index_head);
}

static void pg_set_root(void *ctx, eng_txn *tx, mm_bt_loc root)
{
    mm_ss *ss = ctx;
    mm_wloc(mm_T(tx, ss->e), &mm_ns_at(ss->e, ss->slot)->index_head, from_bt_loc(root));
}

/* ---- create / open / drop --------------------------------------------------------- */

/* The collection an index belongs to: the name before ".$". */
static int32_t parent_slot(const mm_engine *e, const char *ident)
{
    char coll[ENG_IDENT_MAX];
    const char *p = strstr(ident, ".$");
    if (!p || (size_t)(p - ident) >= sizeof coll)
        return -1;
    memcpy(coll, ident, (size_t)(p - ident));
    coll[p - ident] = '\0';
    int32_t s = mm_ns_find(e, coll);
    return s >= 0 && mm_ns_at(e, s)->kind == MM_KIND_COLL ? s : -1;
}

static void count_index(mm_engine *e, mm_txn *t, const char *ident, int delta)
{
    int32_t p = parent_slot(e, ident);
    if (p >= 0) {
        mm_ns_slot *d = mm_ns_at(e, p);
        mm_w32(t, &d->n_indexes, d->n_indexes + delta);
    }
}

int mm_ss_create(eng_engine *eng, eng_txn *tx, const char *ident, md_error *err)
{
    mm_engine *e = mm_E(eng);
    mm_txn *t = mm_T(tx, e);
    int32_t slot;
    int rc = mm_ns_add(e, t, ident, MM_KIND_INDEX, &slot, err);
    if (rc)
        return rc;
    /* buckets are allocated exactly (8192 bytes), never padded */
    mm_w32(t, &mm_ns_at(e, slot)->user_flags, MM_FLAG_NOPADDING);
    count_index(e, t, ident, +1);
    return 0;
}

int mm_ss_open(eng_engine *eng, const char *ident, eng_ss **out, md_error *err)
{
    mm_engine *e = mm_E(eng);
    int32_t slot = mm_ns_find(e, ident);
    if (slot < 0 || mm_ns_at(e, slot)->kind != MM_KIND_INDEX)
        return mm_meta_missing(e, ident, MD_CODE_INDEX_NOT_FOUND, "index", err);
    mm_ss *ss = calloc(1, sizeof *ss);
    if (!ss)
        return md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
    ss->base.engine = eng;
    ss->e = e;
    ss->slot = slot;
    snprintf(ss->name, sizeof ss->name, "%s", ident);
    ss->pager = (mm_bt_pager){
        .ctx = ss,
        .alloc = pg_alloc,
        .free = pg_free,
        .page = pg_page,
        .writing = pg_writing,
        .get_root = pg_get_root,
        .set_root = pg_set_root,
    };
    int rc = mm_bt_open(&ss->pager, &ss->bt);
    if (rc) {
        free(ss);
        return md_error_set(err, rc, eng_rc_to_code(rc), "cannot open index %s", ident);
    }
    *out = &ss->base;
    return 0;
}

void mm_ss_close(eng_ss *ss_)
{
    mm_ss *ss = SS(ss_);
    mm_bt_close(ss->bt);
    free(ss);
}

int mm_ss_drop(eng_engine *eng, eng_txn *tx, const char *ident)
{
    mm_engine *e = mm_E(eng);
    mm_txn *t = mm_T(tx, e);
    int32_t slot = mm_ns_find(e, ident);
    if (slot < 0 || mm_ns_at(e, slot)->kind != MM_KIND_INDEX)
        return MD_NOTFOUND;
    int rc = mm_ns_free_extents(e, t, slot);
    if (rc)
        return rc;
    mm_ns_remove(e, t, slot);
    count_index(e, t, ident, -1);
    return 0;
}

/* ---- entries ------------------------------------------------------------------------ */

int mm_ss_insert(eng_ss *ss, eng_txn *t, const uint8_t *key, uint32_t klen, eng_rid rid,
                 bool unique, eng_rid *dup_rid, md_error *err)
{
    mm_ss *s = SS(ss);
    md_error_clear(&s->alloc_err);
    int rc = mm_bt_insert(s->bt, t, key, klen, rid, unique, dup_rid, err);
    if (rc && s->alloc_err.message[0] && err)
        *err = s->alloc_err; /* the file system's words, naming the file */
    return rc;
}

int mm_ss_remove(eng_ss *ss, eng_txn *t, const uint8_t *key, uint32_t klen, eng_rid rid)
{
    return mm_bt_remove(SS(ss)->bt, t, key, klen, rid);
}

int mm_ss_truncate(eng_ss *ss, eng_txn *t)
{
    return mm_bt_truncate(SS(ss)->bt, t);
}

int64_t mm_ss_size(eng_ss *ss_)
{
    mm_ss *ss = SS(ss_);
    return mm_ns_storage_size(ss->e, ss->slot, NULL);
}

int64_t mm_ss_entries(eng_ss *ss)
{
    return mm_bt_entries(SS(ss)->bt);
}

/* The index namespace's extents, records and free lists, then the tree. */
int mm_ss_validate(eng_ss *ss_, eng_validate *v)
{
    mm_ss *ss = SS(ss_);
    mm_verify_ns(ss->e, ss->slot, v, false);
    return mm_bt_validate(ss->bt, v);
}

int mm_ss_find(eng_ss *ss, const uint8_t *key, uint32_t klen, eng_rid *rid)
{
    return mm_bt_find(SS(ss)->bt, key, klen, rid);
}

/* ---- cursors ------------------------------------------------------------------------ */

int mm_ss_cursor_open(eng_ss *ss, eng_ss_cursor **out)
{
    mm_ss_cur *c = calloc(1, sizeof *c);
    if (!c)
        return MD_ENOMEM;
    int rc = mm_bt_cursor_open(SS(ss)->bt, &c->c);
    if (rc) {
        free(c);
        return rc;
    }
    c->base.ss = ss;
    *out = &c->base;
    return 0;
}

static mm_bt_cursor *BC(eng_ss_cursor *c)
{
    return ((mm_ss_cur *)c)->c;
}

int mm_ss_cursor_seek(eng_ss_cursor *c, const uint8_t *key, uint32_t klen, eng_rid rid)
{
    return mm_bt_cursor_seek(BC(c), key, klen, rid);
}

int mm_ss_cursor_next(eng_ss_cursor *c)
{
    return mm_bt_cursor_next(BC(c));
}

int mm_ss_cursor_prev(eng_ss_cursor *c)
{
    return mm_bt_cursor_prev(BC(c));
}

int mm_ss_cursor_get(eng_ss_cursor *c, const uint8_t **key, uint32_t *klen, eng_rid *rid)
{
    return mm_bt_cursor_get(BC(c), key, klen, rid);
}

void mm_ss_cursor_save(eng_ss_cursor *c)
{
    mm_bt_cursor_save(BC(c));
}

int mm_ss_cursor_restore(eng_ss_cursor *c)
{
    return mm_bt_cursor_restore(BC(c));
}

void mm_ss_cursor_close(eng_ss_cursor *c)
{
    mm_bt_cursor_close(BC(c));
    free(c);
}
