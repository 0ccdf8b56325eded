/*
 * eng_mem.c -- "ephemeralForTest": the in-memory reference engine.
 *
 * The simplest engine that honours every word of eng.h, after MongoDB's
 * engine of the same name.  query/ runs on it before the disk engines exist,
 * and differential tests compare mmapv1 and btree against it.
 *
 * EPHEMERAL: nothing is written to disk.  The directory given to open() is
 * only a name (no lock file), and every record, index entry and catalog
 * document is lost at close.
 *
 * Everything is a sorted array of mem_rec: a record store by RecordId (a
 * counter from 1, so insertion order), a sorted store by (key, rid) with
 * eng_key_cmp(), and the catalog as entries "key\0" + BSON value, which
 * memcmp orders exactly as strcmp orders the keys.  Updates replace or patch
 * the heap copy and never move.  A transaction keeps an undo log replayed
 * backwards on abort; arrays never shrink, so abort never allocates.
 *
 * Capped record stores (eng.h) are the same sorted array used as a queue:
 * rs_insert removes from the front (the oldest RecordIds) until the new
 * record fits within capped_size bytes of documents and capped_max records,
 * telling the capped-delete hook first, as WiredTiger's capped record store
 * does.  RecordIds are never reused by committed records, so a cursor's last
 * RecordId being gone from a capped store means the ring passed it.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng.h"

/* A record (rid -> bytes), an index entry (key bytes, rid) or a catalog
 * entry ("key\0" + BSON, rid 0). */
typedef struct mem_rec {
    uint8_t *data;
    uint32_t len;
    eng_rid rid;
} mem_rec;

/* The record-store counters, restored by an abort. */
typedef struct mem_counters {
    eng_rid next_rid;
    int64_t n_inserts, n_updates, bytes_written;
} mem_counters;

/*
 * A record store, sorted store or the catalog.  Invariants:
 *   1. v[0..n) is strictly increasing (by rid for a record store, by
 *      eng_key_cmp otherwise).
 *   2. bytes == the sum over v[0..n) of len (+ 8 unless a record store).
 *   3. Record stores: every rid is in [1, c.next_rid).
 *   4. A dropped store (live == false) stays allocated while a handle or the
 *      active transaction's undo log may still reach it.
 */
typedef struct mem_obj {
    char ident[ENG_IDENT_MAX];
    bool is_rs, live;
    int refs; /* open handles */
    eng_rs_options opts;
    mem_rec *v;
    size_t n, cap;
    int64_t bytes;
    mem_counters c;
} mem_obj;

enum { U_CREATE, U_DROP, U_INSERT, U_UPDATE, U_REMOVE, U_TRUNCATE };

/* One change to undo.  `rec` owns its bytes: the removed entry, the old
 * record of an update, or a copy of an inserted key.  TRUNCATE owns the old
 * array. */
typedef struct mem_undo {
    int kind;
    mem_obj *obj;
    bool snap; /* restore `before` (record stores) */
    mem_counters before;
    mem_rec rec;
    mem_rec *arr;
    size_t n, cap;
    int64_t bytes;
} mem_undo;

typedef struct mem_txn {
    eng_txn hdr;
    mem_undo *u;
    size_t n, cap;
} mem_txn;

typedef struct mem_engine {
    eng_engine hdr;
    mem_obj cat;    /* the catalog */
    mem_obj **objs; /* live and dropped stores */
    size_t nobjs, capobjs;
    mem_txn *txn;   /* the active transaction or NULL */
} mem_engine;

/* A handle on a record or sorted store. */
typedef struct mem_handle {
    union {
        eng_rs rs;
        eng_ss ss;
    } h;
    mem_obj *o;
} mem_handle;

typedef struct mem_rs_cursor {
    eng_rs_cursor hdr;
    bool forward;
    bool lost;    /* capped: the ring removed `last` (MD_ECAPPEDLOST) */
    eng_rid last; /* last rid returned, ENG_RID_NONE before the first */
} mem_rs_cursor;

enum { SAVED_NONE, SAVED_BEFORE, SAVED_AT, SAVED_AFTER };
typedef struct mem_ss_cursor {
    eng_ss_cursor hdr;
    int64_t pos; /* -1: past the left end; n: past the right end */
    int saved;
    mem_rec at;  /* SAVED_AT: owned copy of the entry */
} mem_ss_cursor;

#define ENG_OF(h) ((mem_engine *)(h)->engine)
#define OBJ(h) (((mem_handle *)(h))->o)

extern const eng_ops eng_mem_ops;

/* ---- sorted arrays ------------------------------------------------------ */

static int no_mem(md_error *err)
{
    return md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
}

/* Grow *arr (of `size`-byte elements) to hold at least `need`. */
static int grow(void **arr, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    size_t ncap = *cap ? *cap * 2 : 8;
    while (ncap < need)
        ncap *= 2;
    void *p = realloc(*arr, ncap * size);
    if (!p)
        return MD_ENOMEM;
    *arr = p;
    *cap = ncap;
    return 0;
}

static uint8_t *dup_bytes(const uint8_t *p, uint32_t len)
{
    uint8_t *d = malloc(len ? len : 1);
    if (d && len)
        memcpy(d, p, len);
    return d;
}

static int rec_cmp(const mem_obj *o, const mem_rec *r, const uint8_t *key, uint32_t klen,
                   eng_rid rid)
{
    if (o->is_rs)
        return r->rid < rid ? -1 : r->rid > rid;
    return eng_key_cmp(r->data, r->len, r->rid, key, klen, rid);
}

/* Index of the first element >= (key, rid); record stores compare rids. */
static size_t lower_bound(const mem_obj *o, const uint8_t *key, uint32_t klen, eng_rid rid)
{
    size_t lo = 0, hi = o->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (rec_cmp(o, &o->v[mid], key, klen, rid) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static bool find(const mem_obj *o, const uint8_t *key, uint32_t klen, eng_rid rid, size_t *idx)
{
    *idx = lower_bound(o, key, klen, rid);
    return *idx < o->n && rec_cmp(o, &o->v[*idx], key, klen, rid) == 0;
}

static int64_t weight(const mem_obj *o, const mem_rec *r)
{
    return (int64_t)r->len + (o->is_rs ? 0 : 8);
}

/* Insert at idx; the capacity must already be there. */
static void insert_at(mem_obj *o, size_t idx, mem_rec r)
{
    assert(o->n < o->cap);
    memmove(&o->v[idx + 1], &o->v[idx], (o->n - idx) * sizeof *o->v);
    o->v[idx] = r;
    o->n++;
    o->bytes += weight(o, &r);
}

static mem_rec remove_at(mem_obj *o, size_t idx)
{
    mem_rec r = o->v[idx];
    memmove(&o->v[idx], &o->v[idx + 1], (o->n - idx - 1) * sizeof *o->v);
    o->n--;
    o->bytes -= weight(o, &r);
    return r;
}

static void free_recs(mem_rec *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i].data);
    free(v);
}

/* ---- transactions ------------------------------------------------------- */

/* The write's transaction must be the engine's active one. */
static int txn_check(mem_engine *e, eng_txn *t, md_error *err)
{
    if (t && e->txn && t == &e->txn->hdr)
        return 0;
    return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                        "ephemeralForTest: write outside the active transaction");
}

/* A zeroed undo slot of the active transaction, or NULL on ENOMEM.  Writes
 * call it after their other allocations, so nothing can fail after it. */
static mem_undo *undo_push(mem_engine *e, int kind, mem_obj *o)
{
    mem_txn *t = e->txn;
    if (grow((void **)&t->u, &t->cap, t->n + 1, sizeof *t->u))
        return NULL;
    mem_undo *u = &t->u[t->n++];
    memset(u, 0, sizeof *u);
    u->kind = kind;
    u->obj = o;
    u->snap = o->is_rs && kind != U_CREATE && kind != U_DROP;
    u->before = o->c;
    return u;
}

/* Insert a copy of (data, rid) at idx, logged. */
static int obj_insert(mem_engine *e, mem_obj *o, size_t idx, const uint8_t *data,
                      uint32_t len, eng_rid rid)
{
    uint8_t *copy = dup_bytes(data, len);
    uint8_t *key = o->is_rs ? NULL : dup_bytes(data, len); /* to find it again */
    mem_undo *u = NULL;
    if (!copy || (!o->is_rs && !key) || grow((void **)&o->v, &o->cap, o->n + 1, sizeof *o->v) ||
        !(u = undo_push(e, U_INSERT, o))) {
        free(copy);
        free(key);
        return MD_ENOMEM;
    }
    u->rec = (mem_rec){key, key ? len : 0, rid};
    insert_at(o, idx, (mem_rec){copy, len, rid});
    return 0;
}

/* Remove the entry at idx, logged. */
static int obj_remove(mem_engine *e, mem_obj *o, size_t idx)
{
    mem_undo *u = undo_push(e, U_REMOVE, o);
    if (!u)
        return MD_ENOMEM;
    u->rec = remove_at(o, idx);
    return 0;
}

/* Empty a store, logged: the old array moves to the undo log. */
static int obj_truncate(mem_engine *e, mem_obj *o, eng_txn *t)
{
    if (txn_check(e, t, NULL))
        return MD_EINVAL;
    mem_undo *u = undo_push(e, U_TRUNCATE, o);
    if (!u)
        return MD_ENOMEM;
    u->arr = o->v, u->n = o->n, u->cap = o->cap, u->bytes = o->bytes;
    o->v = NULL, o->n = o->cap = 0, o->bytes = 0;
    return 0;
}

/* Reverse one change; what the entry owned moves back into the store. */
static void undo_one(mem_undo *u)
{
    mem_obj *o = u->obj;
    size_t i;
    switch (u->kind) {
    case U_CREATE: o->live = false; break;
    case U_DROP: o->live = true; break;
    case U_INSERT:
        if (find(o, u->rec.data, u->rec.len, u->rec.rid, &i))
            free(remove_at(o, i).data);
        break;
    case U_UPDATE:
        if (find(o, NULL, 0, u->rec.rid, &i)) {
            o->bytes += (int64_t)u->rec.len - o->v[i].len;
            free(o->v[i].data);
            o->v[i] = u->rec;
            u->rec.data = NULL;
        }
        break;
    case U_REMOVE:
        insert_at(o, lower_bound(o, u->rec.data, u->rec.len, u->rec.rid), u->rec);
        u->rec.data = NULL;
        break;
    case U_TRUNCATE:
        free_recs(o->v, o->n);
        o->v = u->arr, o->n = u->n, o->cap = u->cap, o->bytes = u->bytes;
        u->arr = NULL, u->n = 0;
        break;
    }
    if (u->snap)
        o->c = u->before;
}

static int mem_txn_begin(eng_engine *eh, eng_txn **out)
{
    mem_engine *e = (mem_engine *)eh;
    if (e->txn)
        return MD_EBUSY; /* one transaction at a time (eng.h) */
    mem_txn *t = calloc(1, sizeof *t);
    if (!t)
        return MD_ENOMEM;
    t->hdr.engine = eh;
    e->txn = t;
    *out = &t->hdr;
    return 0;
}

/* Free dropped stores that nothing can reach any more (invariant 4). */
static void sweep(mem_engine *e)
{
    size_t j = 0;
    if (e->txn)
        return;
    for (size_t i = 0; i < e->nobjs; i++) {
        mem_obj *o = e->objs[i];
        if (!o->live && o->refs == 0) {
            free_recs(o->v, o->n);
            free(o);
        } else {
            e->objs[j++] = o;
        }
    }
    e->nobjs = j;
}

/* End the transaction: abort replays the log backwards, then both free it. */
static void txn_end(mem_txn *t, bool abort)
{
    mem_engine *e = ENG_OF(&t->hdr);
    for (size_t i = t->n; abort && i-- > 0;)
        undo_one(&t->u[i]);
    for (size_t i = 0; i < t->n; i++) {
        free(t->u[i].rec.data);
        free_recs(t->u[i].arr, t->u[i].n);
    }
    free(t->u);
    free(t);
    e->txn = NULL;
    sweep(e);
}

static int mem_txn_commit(eng_txn *t, bool durable, md_error *err)
{
    txn_end((mem_txn *)t, false);
    return 0;
}

static void mem_txn_abort(eng_txn *t)
{
    txn_end((mem_txn *)t, true);
}

/* ---- engine ------------------------------------------------------------- */

static int mem_open(const char *dir, const char *db_name, const bson_t *opts,
                    eng_engine **out, md_error *err)
{
    mem_engine *e = calloc(1, sizeof *e);
    if (!e)
        return no_mem(err);
    e->hdr.ops = &eng_mem_ops;
    snprintf(e->cat.ident, sizeof e->cat.ident, "catalog");
    e->cat.live = true;
    *out = &e->hdr;
    return 0;
}

static void mem_close(eng_engine *eh)
{
    mem_engine *e = (mem_engine *)eh;
    if (e->txn)
        mem_txn_abort(&e->txn->hdr);
    for (size_t i = 0; i < e->nobjs; i++) {
        free_recs(e->objs[i]->v, e->objs[i]->n);
        free(e->objs[i]);
    }
    free(e->objs);
    free_recs(e->cat.v, e->cat.n);
    free(e);
}

static int mem_flush(eng_engine *e, bool sync, md_error *err)
{
    return 0;
}

static void mem_append_status(eng_engine *e, bson_t *status)
{
}

static int64_t mem_total_moves(eng_engine *e)
{
    return 0;
}

/* ---- catalog ------------------------------------------------------------ */

/* Position of `key` in the catalog (entries "key\0" + value, rid 0). */
static bool meta_find(mem_engine *e, const char *key, size_t *idx)
{
    uint32_t klen = (uint32_t)strlen(key) + 1;
    *idx = lower_bound(&e->cat, (const uint8_t *)key, klen, 0);
    return *idx < e->cat.n && e->cat.v[*idx].len > klen &&
           memcmp(e->cat.v[*idx].data, key, klen) == 0;
}

static int mem_meta_put(eng_engine *eh, eng_txn *t, const char *key, const bson_t *value,
                        md_error *err)
{
    mem_engine *e = (mem_engine *)eh;
    size_t i, klen = strlen(key) + 1;
    int rc = txn_check(e, t, err);
    if (rc)
        return rc;
    uint8_t *buf = malloc(klen + value->len);
    if (!buf)
        return no_mem(err);
    memcpy(buf, key, klen);
    memcpy(buf + klen, bson_get_data(value), value->len);
    if (meta_find(e, key, &i))
        rc = obj_remove(e, &e->cat, i);
    if (rc == 0)
        rc = obj_insert(e, &e->cat, lower_bound(&e->cat, buf, (uint32_t)(klen + value->len), 0),
                        buf, (uint32_t)(klen + value->len), 0);
    free(buf);
    return rc ? no_mem(err) : 0;
}

static int mem_meta_get(eng_engine *eh, const char *key, bson_t *out)
{
    mem_engine *e = (mem_engine *)eh;
    size_t i, klen = strlen(key) + 1;
    bson_t view;
    if (!meta_find(e, key, &i))
        return MD_NOTFOUND;
    if (!bson_init_static(&view, e->cat.v[i].data + klen, e->cat.v[i].len - klen))
        return MD_ECORRUPT;
    bson_copy_to(&view, out);
    return 0;
}

static int mem_meta_del(eng_engine *eh, eng_txn *t, const char *key)
{
    mem_engine *e = (mem_engine *)eh;
    size_t i;
    if (txn_check(e, t, NULL))
        return MD_EINVAL;
    if (!meta_find(e, key, &i))
        return MD_NOTFOUND;
    return obj_remove(e, &e->cat, i);
}

static int mem_meta_list(eng_engine *eh, eng_meta_fn fn, void *ctx)
{
    mem_engine *e = (mem_engine *)eh;
    for (size_t i = 0; i < e->cat.n; i++) {
        const char *key = (const char *)e->cat.v[i].data;
        size_t klen = strlen(key) + 1;
        bson_t view;
        if (!bson_init_static(&view, e->cat.v[i].data + klen, e->cat.v[i].len - klen))
            return MD_ECORRUPT;
        if (fn(ctx, key, &view))
            break;
    }
    return 0;
}

/* ---- creating, opening and dropping stores ------------------------------ */

/* The live store named `ident`; record and sorted stores share the names. */
static mem_obj *obj_find(mem_engine *e, const char *ident)
{
    for (size_t i = 0; i < e->nobjs; i++)
        if (e->objs[i]->live && strcmp(e->objs[i]->ident, ident) == 0)
            return e->objs[i];
    return NULL;
}

static int obj_create(eng_engine *eh, eng_txn *t, const char *ident, bool is_rs,
                      const eng_rs_options *opts, md_error *err)
{
    mem_engine *e = (mem_engine *)eh;
    int rc = txn_check(e, t, err);
    if (rc)
        return rc;
    if (obj_find(e, ident))
        return md_error_set(err, MD_EEXISTS, MD_CODE_NAMESPACE_EXISTS, "%s already exists",
                            ident);
    mem_obj *o = calloc(1, sizeof *o);
    if (!o || grow((void **)&e->objs, &e->capobjs, e->nobjs + 1, sizeof *e->objs) ||
        !undo_push(e, U_CREATE, o)) {
        free(o);
        return no_mem(err);
    }
    snprintf(o->ident, sizeof o->ident, "%s", ident);
    o->is_rs = is_rs;
    o->live = true;
    o->c.next_rid = 1;
    if (opts)
        o->opts = *opts;
    e->objs[e->nobjs++] = o;
    return 0;
}

static int obj_drop(eng_engine *eh, eng_txn *t, const char *ident, bool is_rs)
{
    mem_engine *e = (mem_engine *)eh;
    if (txn_check(e, t, NULL))
        return MD_EINVAL;
    mem_obj *o = obj_find(e, ident);
    if (!o || o->is_rs != is_rs)
        return MD_NOTFOUND;
    if (!undo_push(e, U_DROP, o))
        return MD_ENOMEM;
    o->live = false;
    return 0;
}

/* Open a handle on a live store of the given kind. */
static int obj_open(eng_engine *eh, const char *ident, bool is_rs, mem_handle **out,
                    md_error *err)
{
    mem_obj *o = obj_find((mem_engine *)eh, ident);
    if (!o || o->is_rs != is_rs)
        return md_error_set(err, MD_NOTFOUND, MD_CODE_NAMESPACE_NOT_FOUND, "%s not found",
                            ident);
    mem_handle *h = calloc(1, sizeof *h);
    if (!h)
        return no_mem(err);
    if (is_rs)
        h->h.rs.engine = eh;
    else
        h->h.ss.engine = eh;
    h->o = o;
    o->refs++;
    *out = h;
    return 0;
}

static void obj_close(eng_engine *eh, void *h)
{
    OBJ(h)->refs--;
    free(h);
    sweep((mem_engine *)eh);
}

static int mem_rs_create(eng_engine *e, eng_txn *t, const char *ident,
                         const eng_rs_options *o, md_error *err)
{
    return obj_create(e, t, ident, true, o, err);
}

static int mem_rs_open(eng_engine *e, const char *ident, eng_rs **out, md_error *err)
{
    mem_handle *h;
    int rc = obj_open(e, ident, true, &h, err);
    if (rc == 0)
        *out = &h->h.rs;
    return rc;
}

static void mem_rs_close(eng_rs *rs)
{
    obj_close(rs->engine, rs);
}

static int mem_rs_drop(eng_engine *e, eng_txn *t, const char *ident)
{
    return obj_drop(e, t, ident, true);
}

static int mem_ss_create(eng_engine *e, eng_txn *t, const char *ident, md_error *err)
{
    return obj_create(e, t, ident, false, NULL, err);
}

static int mem_ss_open(eng_engine *e, const char *ident, eng_ss **out, md_error *err)
{
    mem_handle *h;
    int rc = obj_open(e, ident, false, &h, err);
    if (rc == 0)
        *out = &h->h.ss;
    return rc;
}

static void mem_ss_close(eng_ss *ss)
{
    obj_close(ss->engine, ss);
}

static int mem_ss_drop(eng_engine *e, eng_txn *t, const char *ident)
{
    return obj_drop(e, t, ident, false);
}

/* ---- record stores ------------------------------------------------------ */

/* Capped: make room for a `len`-byte record by removing the oldest records,
 * each announced to the capped-delete hook first (its refusal is the
 * insert's failure; the caller aborts, which restores what was removed). */
static int capped_make_room(eng_rs *rs, eng_txn *t, uint32_t len, md_error *err)
{
    mem_obj *o = OBJ(rs);
    const eng_rs_options *op = &o->opts;
    int rc = eng_capped_check_len(op->capped_size, len, err);
    if (rc)
        return rc;
    while (eng_capped_full(op->capped_size, op->capped_max, (int64_t)o->n, o->bytes, len)) {
        mem_rec *r = &o->v[0];
        if ((rc = eng_rs_capped_deleting(rs, t, r->rid, r->data, r->len, err)) != 0)
            return rc;
        if (obj_remove(ENG_OF(rs), o, 0))
            return no_mem(err);
    }
    return 0;
}

static int mem_rs_insert(eng_rs *rs, eng_txn *t, const uint8_t *data, uint32_t len,
                         eng_rid *out, md_error *err)
{
    mem_obj *o = OBJ(rs);
    int rc = txn_check(ENG_OF(rs), t, err);
    if (rc)
        return rc;
    if (o->opts.capped && (rc = capped_make_room(rs, t, len, err)) != 0)
        return rc;
    if (obj_insert(ENG_OF(rs), o, o->n, data, len, o->c.next_rid))
        return no_mem(err);
    *out = o->c.next_rid++;
    o->c.n_inserts++;
    o->c.bytes_written += len;
    return 0;
}

static int mem_rs_get(eng_rs *rs, eng_rid rid, const uint8_t **data, uint32_t *len)
{
    mem_obj *o = OBJ(rs);
    size_t i;
    if (!find(o, NULL, 0, rid, &i))
        return MD_NOTFOUND;
    *data = o->v[i].data;
    *len = o->v[i].len;
    return 0;
}

static int no_record(md_error *err, eng_rid rid)
{
    return md_error_set(err, MD_NOTFOUND, MD_CODE_NO_SUCH_KEY, "no record %lld",
                        (long long)rid);
}

static int mem_rs_update(eng_rs *rs, eng_txn *t, eng_rid rid, const uint8_t *data,
                         uint32_t len, eng_rid *new_rid, bool *moved, md_error *err)
{
    mem_engine *e = ENG_OF(rs);
    mem_obj *o = OBJ(rs);
    size_t i;
    int rc = txn_check(e, t, err);
    if (rc)
        return rc;
    if (!find(o, NULL, 0, rid, &i))
        return no_record(err, rid);
    if (o->opts.capped && len > o->v[i].len) /* as mmapv1 and btree */
        return eng_capped_cannot_grow(err);
    uint8_t *copy = dup_bytes(data, len);
    mem_undo *u = copy ? undo_push(e, U_UPDATE, o) : NULL;
    if (!u) {
        free(copy);
        return no_mem(err);
    }
    u->rec = o->v[i]; /* the old bytes now belong to the undo log */
    o->bytes += (int64_t)len - o->v[i].len;
    o->v[i] = (mem_rec){copy, len, rid};
    o->c.n_updates++;
    o->c.bytes_written += len;
    *new_rid = rid;
    *moved = false;
    return 0;
}

/* Patch the heap copy in place; bytes_written counts the patched bytes. */
static int mem_rs_update_damages(eng_rs *rs, eng_txn *t, eng_rid rid, const uint8_t *src,
                                 const eng_damage *d, size_t nd, md_error *err)
{
    mem_engine *e = ENG_OF(rs);
    mem_obj *o = OBJ(rs);
    size_t i;
    int rc = txn_check(e, t, err);
    if (rc)
        return rc;
    if (!find(o, NULL, 0, rid, &i))
        return no_record(err, rid);
    mem_rec *r = &o->v[i];
    for (size_t k = 0; k < nd; k++)
        if ((uint64_t)d[k].dst_ofs + d[k].len > r->len)
            return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                                "damage %zu [%u, +%u) is outside the %u-byte record", k,
                                d[k].dst_ofs, d[k].len, r->len);
    uint8_t *old = dup_bytes(r->data, r->len);
    mem_undo *u = old ? undo_push(e, U_UPDATE, o) : NULL;
    if (!u) {
        free(old);
        return no_mem(err);
    }
    u->rec = (mem_rec){old, r->len, rid};
    for (size_t k = 0; k < nd; k++) {
        memmove(r->data + d[k].dst_ofs, src + d[k].src_ofs, d[k].len);
        o->c.bytes_written += d[k].len;
    }
    o->c.n_updates++;
    return 0;
}

static int mem_rs_remove(eng_rs *rs, eng_txn *t, eng_rid rid)
{
    size_t i;
    if (txn_check(ENG_OF(rs), t, NULL))
        return MD_EINVAL;
    if (!find(OBJ(rs), NULL, 0, rid, &i))
        return MD_NOTFOUND;
    return obj_remove(ENG_OF(rs), OBJ(rs), i);
}

static int mem_rs_truncate(eng_rs *rs, eng_txn *t)
{
    return obj_truncate(ENG_OF(rs), OBJ(rs), t);
}

static int mem_rs_set_alloc(eng_rs *rs, eng_txn *t, int alloc)
{
    OBJ(rs)->opts.alloc = alloc; /* remembered, otherwise ignored */
    return 0;
}

static void mem_rs_stats(eng_rs *rs, struct eng_rs_stats *s)
{
    mem_obj *o = OBJ(rs);
    s->count = (int64_t)o->n;
    s->data_size = o->bytes;
    s->storage_size = o->opts.capped ? o->opts.capped_size : o->bytes;
    s->n_inserts = o->c.n_inserts;
    s->n_updates = o->c.n_updates;
    s->n_inplace = o->c.n_updates; /* nothing ever moves */
    s->n_moves = 0;
    s->bytes_written = o->c.bytes_written;
}

/* Check invariants 1-3 of mem_obj. */
static void obj_validate(mem_obj *o, eng_validate *v)
{
    int64_t bytes = 0;
    for (size_t i = 0; i < o->n; i++) {
        mem_rec *r = &o->v[i];
        bytes += weight(o, r);
        if (!r->data)
            eng_validate_error(v, "%s: entry %zu has no data", o->ident, i);
        if (o->is_rs && (r->rid <= 0 || r->rid >= o->c.next_rid))
            eng_validate_error(v, "%s: RecordId %lld out of range", o->ident,
                               (long long)r->rid);
        if (i > 0 && rec_cmp(o, &o->v[i - 1], r->data, r->len, r->rid) >= 0)
            eng_validate_error(v, "%s: entries %zu and %zu out of order", o->ident, i - 1, i);
    }
    if (bytes != o->bytes)
        eng_validate_error(v, "%s: size is %lld, entries add up to %lld", o->ident,
                           (long long)o->bytes, (long long)bytes);
}

static int mem_rs_validate(eng_rs *rs, eng_validate *v)
{
    mem_obj *o = OBJ(rs);
    obj_validate(o, v);
    if (o->opts.capped && o->bytes > o->opts.capped_size)
        eng_validate_error(v, "%s: capped store holds %lld bytes, more than its size %lld",
                           o->ident, (long long)o->bytes, (long long)o->opts.capped_size);
    if (o->opts.capped && o->opts.capped_max > 0 && (int64_t)o->n > o->opts.capped_max)
        eng_validate_error(v, "%s: capped store holds %zu records, more than its max %lld",
                           o->ident, o->n, (long long)o->opts.capped_max);
    BSON_APPEND_INT64(&v->info, "nrecords", (int64_t)o->n);
    return 0;
}

/* ---- record-store cursors ------------------------------------------------
 * The position is the last rid returned: removed records are skipped by
 * construction, so save and restore have nothing to do, except on a capped
 * store, where a forward cursor whose last record is gone has lost its
 * place in the ring (the store's records are a contiguous run of the
 * RecordIds still there, so the cursor cannot tell what it missed). */

/* Capped, forward, and the last record returned no longer there? */
static bool capped_lost(mem_rs_cursor *c)
{
    mem_obj *o = OBJ(c->hdr.rs);
    size_t i;
    if (!c->lost && o->opts.capped && c->forward && c->last != ENG_RID_NONE &&
        !find(o, NULL, 0, c->last, &i))
        c->lost = true;
    return c->lost;
}

static int mem_rs_cursor_open(eng_rs *rs, bool forward, eng_rs_cursor **out)
{
    mem_rs_cursor *c = calloc(1, sizeof *c);
    if (!c)
        return MD_ENOMEM;
    c->hdr.rs = rs;
    c->forward = forward;
    *out = &c->hdr;
    return 0;
}

static int mem_rs_cursor_next(eng_rs_cursor *ch, eng_rid *rid, const uint8_t **data,
                              uint32_t *len)
{
    mem_rs_cursor *c = (mem_rs_cursor *)ch;
    mem_obj *o = OBJ(ch->rs);
    size_t i;
    if (capped_lost(c))
        return MD_ECAPPEDLOST;
    if (c->forward) {
        i = lower_bound(o, NULL, 0, c->last + 1);
        if (i >= o->n)
            return MD_NOTFOUND;
    } else {
        i = c->last == ENG_RID_NONE ? o->n : lower_bound(o, NULL, 0, c->last);
        if (i-- == 0)
            return MD_NOTFOUND;
    }
    c->last = *rid = o->v[i].rid;
    *data = o->v[i].data;
    *len = o->v[i].len;
    return 0;
}

static void mem_rs_cursor_save(eng_rs_cursor *c)
{
}

static int mem_rs_cursor_restore(eng_rs_cursor *c)
{
    return capped_lost((mem_rs_cursor *)c) ? MD_ECAPPEDLOST : 0;
}

static void mem_rs_cursor_close(eng_rs_cursor *c)
{
    free(c);
}

/* ---- sorted stores ------------------------------------------------------ */

static int mem_ss_insert(eng_ss *ss, eng_txn *t, const uint8_t *key, uint32_t klen,
                         eng_rid rid, bool unique, eng_rid *dup_rid, md_error *err)
{
    mem_obj *o = OBJ(ss);
    size_t i;
    int rc = txn_check(ENG_OF(ss), t, err);
    if (rc)
        return rc;
    if (find(o, key, klen, rid, &i))
        return 0;
    if (unique) {
        /* Entries with these key bytes are contiguous from (key, 0). */
        size_t j = lower_bound(o, key, klen, ENG_RID_NONE);
        if (j < o->n && eng_key_cmp(o->v[j].data, o->v[j].len, 0, key, klen, 0) == 0) {
            if (dup_rid)
                *dup_rid = o->v[j].rid;
            return md_error_set(err, MD_EDUPKEY, MD_CODE_DUPLICATE_KEY, "duplicate key");
        }
    }
    return obj_insert(ENG_OF(ss), o, i, key, klen, rid) ? no_mem(err) : 0;
}

static int mem_ss_remove(eng_ss *ss, eng_txn *t, const uint8_t *key, uint32_t klen,
                         eng_rid rid)
{
    size_t i;
    if (txn_check(ENG_OF(ss), t, NULL))
        return MD_EINVAL;
    if (!find(OBJ(ss), key, klen, rid, &i))
        return MD_NOTFOUND;
    return obj_remove(ENG_OF(ss), OBJ(ss), i);
}

static int mem_ss_truncate(eng_ss *ss, eng_txn *t)
{
    return obj_truncate(ENG_OF(ss), OBJ(ss), t);
}

static int64_t mem_ss_size(eng_ss *ss)
{
    return OBJ(ss)->bytes;
}

static int64_t mem_ss_entries(eng_ss *ss)
{
    return (int64_t)OBJ(ss)->n;
}

static int mem_ss_validate(eng_ss *ss, eng_validate *v)
{
    obj_validate(OBJ(ss), v);
    return 0;
}

/* ---- sorted-store cursors ----------------------------------------------- */

static int mem_ss_cursor_open(eng_ss *ss, eng_ss_cursor **out)
{
    mem_ss_cursor *c = calloc(1, sizeof *c);
    if (!c)
        return MD_ENOMEM;
    c->hdr.ss = ss;
    c->pos = -1; /* a fresh cursor rests before the first entry */
    *out = &c->hdr;
    return 0;
}

/* The position, clamped to [-1, n] in case of a write without save. */
static int64_t ss_pos(mem_ss_cursor *c)
{
    int64_t n = (int64_t)OBJ(c->hdr.ss)->n;
    if (c->pos > n)
        c->pos = n;
    return c->pos;
}

static int mem_ss_cursor_seek(eng_ss_cursor *ch, const uint8_t *key, uint32_t klen,
                              eng_rid rid)
{
    mem_ss_cursor *c = (mem_ss_cursor *)ch;
    mem_obj *o = OBJ(ch->ss);
    c->pos = (int64_t)lower_bound(o, key, klen, rid);
    return c->pos < (int64_t)o->n ? 0 : MD_NOTFOUND;
}

static int mem_ss_cursor_next(eng_ss_cursor *ch)
{
    mem_ss_cursor *c = (mem_ss_cursor *)ch;
    int64_t n = (int64_t)OBJ(ch->ss)->n;
    if (ss_pos(c) < n)
        c->pos++;
    return c->pos < n ? 0 : MD_NOTFOUND;
}

static int mem_ss_cursor_prev(eng_ss_cursor *ch)
{
    mem_ss_cursor *c = (mem_ss_cursor *)ch;
    if (ss_pos(c) >= 0)
        c->pos--;
    return c->pos >= 0 ? 0 : MD_NOTFOUND;
}

static int mem_ss_cursor_get(eng_ss_cursor *ch, const uint8_t **key, uint32_t *klen,
                             eng_rid *rid)
{
    mem_ss_cursor *c = (mem_ss_cursor *)ch;
    mem_obj *o = OBJ(ch->ss);
    int64_t p = ss_pos(c);
    if (p < 0 || p >= (int64_t)o->n)
        return MD_NOTFOUND;
    *key = o->v[p].data;
    *klen = o->v[p].len;
    *rid = o->v[p].rid;
    return 0;
}

/* Remember the current entry by value: its index will not survive writes.
 * Without memory for the copy, restore reports MD_ENOMEM. */
static void mem_ss_cursor_save(eng_ss_cursor *ch)
{
    mem_ss_cursor *c = (mem_ss_cursor *)ch;
    mem_obj *o = OBJ(ch->ss);
    int64_t p = ss_pos(c);
    free(c->at.data);
    c->at.data = NULL;
    c->saved = p < 0 ? SAVED_BEFORE : p >= (int64_t)o->n ? SAVED_AFTER : SAVED_AT;
    if (c->saved == SAVED_AT) {
        c->at = o->v[p];
        c->at.data = dup_bytes(o->v[p].data, o->v[p].len);
        if (!c->at.data)
            c->saved = SAVED_NONE;
    }
}

static int mem_ss_cursor_restore(eng_ss_cursor *ch)
{
    mem_ss_cursor *c = (mem_ss_cursor *)ch;
    mem_obj *o = OBJ(ch->ss);
    switch (c->saved) {
    case SAVED_BEFORE: c->pos = -1; return 0;
    case SAVED_AFTER: c->pos = (int64_t)o->n; return 0;
    case SAVED_AT: c->pos = (int64_t)lower_bound(o, c->at.data, c->at.len, c->at.rid); return 0;
    default: ss_pos(c); return MD_ENOMEM;
    }
}

static void mem_ss_cursor_close(eng_ss_cursor *ch)
{
    free(((mem_ss_cursor *)ch)->at.data);
    free(ch);
}

const eng_ops eng_mem_ops = {
    .name = "ephemeralForTest",
    .has_damages = true,
    .collection_lock = false,
    .checked_reads = true, /* nothing on disk to damage */
    .open = mem_open,
    .close = mem_close,
    .flush = mem_flush,
    .append_status = mem_append_status,
    .total_moves = mem_total_moves,
    .txn_begin = mem_txn_begin,
    .txn_commit = mem_txn_commit,
    .txn_abort = mem_txn_abort,
    .meta_put = mem_meta_put,
    .meta_get = mem_meta_get,
    .meta_del = mem_meta_del,
    .meta_list = mem_meta_list,
    .rs_create = mem_rs_create,
    .rs_open = mem_rs_open,
    .rs_close = mem_rs_close,
    .rs_drop = mem_rs_drop,
    .rs_insert = mem_rs_insert,
    .rs_get = mem_rs_get,
    .rs_update = mem_rs_update,
    .rs_update_damages = mem_rs_update_damages,
    .rs_remove = mem_rs_remove,
    .rs_truncate = mem_rs_truncate,
    .rs_set_alloc = mem_rs_set_alloc,
    .rs_stats = mem_rs_stats,
    .rs_append_stats = NULL,
    .rs_validate = mem_rs_validate,
    .rs_compact = NULL, /* MD_ENOTSUP */
    .rs_cursor_open = mem_rs_cursor_open,
    .rs_cursor_next = mem_rs_cursor_next,
    .rs_cursor_save = mem_rs_cursor_save,
    .rs_cursor_restore = mem_rs_cursor_restore,
    .rs_cursor_close = mem_rs_cursor_close,
    .ss_create = mem_ss_create,
    .ss_open = mem_ss_open,
    .ss_close = mem_ss_close,
    .ss_drop = mem_ss_drop,
    .ss_insert = mem_ss_insert,
    .ss_remove = mem_ss_remove,
    .ss_truncate = mem_ss_truncate,
    .ss_size = mem_ss_size,
    .ss_entries = mem_ss_entries,
    .ss_validate = mem_ss_validate,
    .ss_cursor_open = mem_ss_cursor_open,
    .ss_cursor_seek = mem_ss_cursor_seek,
    .ss_cursor_next = mem_ss_cursor_next,
    .ss_cursor_prev = mem_ss_cursor_prev,
    .ss_cursor_get = mem_ss_cursor_get,
    .ss_cursor_save = mem_ss_cursor_save,
    .ss_cursor_restore = mem_ss_cursor_restore,
    .ss_cursor_close = mem_ss_cursor_close,
};
