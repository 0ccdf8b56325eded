/*
 * bt_store.c -- record stores and sorted stores on the B+tree, their
 * cursors, and the merged position (bt_cur) every scan is built on.
 *
 * A record store's entries are (empty key, RecordId) -> BSON; RecordIds
 * come from a per-store counter that is never reused (aborted inserts burn
 * theirs) and is persisted in the checkpoint.  There are no in-place
 * updates: an update stores the whole new document under the same RecordId
 * (moved = false), so every update counts as "in place" for the contract's
 * counters, and bytes written per update shows the rewrite cost.
 *
 * A sorted store's entries are (key bytes, rid) with no value.
 *
 * Every read runs under the shared latch and copies what it returns:
 * eng_rs_get into the calling thread's buffer of the handle (bt_view),
 * cursors into their own buffers, so no other thread can end a view.  In
 * a transaction a read resolves keys through their update chains
 * (bt_txn.c); outside one it reads the latest committed state: a chain's
 * newest commit published when the thread took the latch (not yet folded
 * into the pages, or kept for a snapshot), else the base.
 * A cursor keeps its current entry and finds the next one after it at
 * every step, merging the base with the overlay (a tombstone hides a base
 * entry); save and restore therefore have nothing to do but re-read
 * (capped stores: restore and next check that the last record is still
 * there).
 */
#include <stdlib.h>
#include <string.h>

#include "bt_int.h"

/* ---- merged positions ------------------------------------------------------------ */

void bt_cur_cleanup(bt_cur *c)
{
    bt_buf_free(&c->key);
    bt_buf_free(&c->val);
}

/* The base entry after (fwd) or before the point, into c->pos; NULL at
 * the end.  A forward step from c's current entry reuses c->pos. */
static int base_find(bt_engine *e, bt_tree *t, bt_cur *c, const uint8_t *key, uint32_t klen,
                     eng_rid rid, bool fwd, bool incl, bool inf, bt_ent **out, md_error *err)
{
    bool exact = false, step = fwd && !inf && !incl && c->have && c->pos_ok &&
                              c->gen == e->gen && key == c->key.p && rid == c->rid;
    bt_ent *en;
    int rc = 0;
    *out = NULL;
    if (!step && !fwd && inf) {
        rc = bt_pos_last(t, &c->pos, err);
    } else if (!step) {
        if (inf)
            key = NULL, klen = 0, rid = INT64_MIN, incl = true;
        if ((rc = bt_search(t, key, klen, rid, &c->pos, &exact, err)) != 0)
            return rc;
        if (!fwd)
            rc = exact && incl ? 0 : bt_pos_prev(t, &c->pos, err);
        else if ((rc = bt_pos_normalize(t, &c->pos, err)) == 0 && exact && !incl)
            rc = bt_pos_next(t, &c->pos, err);
    }
    while (rc == 0 && step && (en = bt_pos_ent(&c->pos)) &&
           eng_key_cmp(en->key, en->klen, en->rid, key, klen, rid) <= 0)
        rc = bt_pos_next(t, &c->pos, err);
    c->pos_ok = fwd && (rc == 0 || rc == MD_NOTFOUND);
    c->gen = e->gen;
    if (rc == 0)
        *out = bt_pos_ent(&c->pos);
    return rc == MD_NOTFOUND ? 0 : rc;
}

static int cur_take(bt_cur *c, const uint8_t *key, uint32_t klen, eng_rid rid,
                    const uint8_t *val, uint32_t vlen)
{
    if (bt_buf_set(&c->key, key, klen) || bt_buf_set(&c->val, val, val ? vlen : 0))
        return MD_ENOMEM;
    c->rid = rid;
    c->have = true;
    return 0;
}

/* Merge the base candidate b with the overlay candidate o (chains in
 * order from the point): a chain decides for its key, base entries
 * without a chain stand.  Without t->ov.mu (see bt_overlay). */
static int merge(bt_engine *e, bt_txn *x, bt_tree *t, bt_cur *c, bt_ent *b, bt_chain *o,
                 bool fwd, md_error *err)
{
    (void)e;
    for (;;) {
        int k, rc;
        if (!o && !b)
            return MD_NOTFOUND;
        k = !o ? 1 : !b ? -1 : eng_key_cmp(o->key, o->klen, o->rid, b->key, b->klen, b->rid);
        if (!fwd && o && b)
            k = -k;
        if (k > 0)
            return cur_take(c, b->key, b->klen, b->rid, b->val, b->vlen);
        const bt_upd *u = bt_visible(o, x, c->rts);
        if (u->present)
            return cur_take(c, o->key, o->klen, o->rid, u->val, u->vlen);
        if (k == 0) {
            rc = fwd ? bt_pos_next(t, &c->pos, err) : bt_pos_prev(t, &c->pos, err);
            if (rc && rc != MD_NOTFOUND)
                return rc;
            b = rc ? NULL : bt_pos_ent(&c->pos);
            c->pos_ok = c->pos_ok && rc == 0;
        }
        o = fwd ? BT_LD(o->next[0]) : bt_ov_seek_back(t, o->key, o->klen, o->rid, false, false);
    }
}

/* Position c on the first entry x sees after (fwd) or before the point
 * (key, rid), or on it when incl; inf: from the start (fwd) or the end.
 * MD_NOTFOUND past the end leaves c's entry as it was.  The caller holds
 * the shared latch; `key` may be c's own current key. */
int bt_cur_find(bt_engine *e, bt_txn *x, bt_tree *t, bt_cur *c, const uint8_t *key,
                uint32_t klen, eng_rid rid, bool fwd, bool incl, bool inf, md_error *err)
{
    bt_ent *b;
    c->rts = bt_read_ts(e, x);
    int rc = base_find(e, t, c, key, klen, rid, fwd, incl, inf, &b, err);
    if (rc)
        return rc;
    if (!bt_ov_count(t)) {
        if (!b)
            return MD_NOTFOUND;
        return cur_take(c, b->key, b->klen, b->rid, b->val, b->vlen);
    }
    bt_chain *o;
    if (fwd)
        o = inf ? BT_LD(t->ov.head[0]) : bt_ov_seek(t, key, klen, rid, incl);
    else
        o = bt_ov_seek_back(t, key, klen, rid, incl, inf);
    return merge(e, x, t, c, b, o, fwd, err);
}

/* ---- record stores ------------------------------------------------------------ */

int bt_rs_create(eng_engine *e, eng_txn *t, const char *ident, const eng_rs_options *o,
                 md_error *err)
{
    if (o && o->capped)
        return bt_capped_create((bt_engine *)e, t, ident, o, err);
    return bt_obj_create((bt_engine *)e, t, ident, BT_RS, o ? o->block_compressor : NULL, err);
}

int bt_rs_open(eng_engine *e, const char *ident, eng_rs **out, md_error *err)
{
    bt_handle *h;
    int rc = bt_obj_open((bt_engine *)e, ident, BT_RS, &h, err);
    if (rc == 0 && (rc = bt_capped_load((bt_engine *)e, h->t, err)) != 0)
        bt_obj_close(h);
    if (rc == 0)
        *out = &h->h.rs;
    return rc;
}

void bt_rs_close(eng_rs *rs)
{
    bt_obj_close((bt_handle *)rs);
}

int bt_rs_drop(eng_engine *e, eng_txn *t, const char *ident)
{
    int rc = bt_obj_drop((bt_engine *)e, t, ident, BT_RS);
    return rc ? rc : bt_capped_drop((bt_engine *)e, t, ident);
}

int bt_rs_insert(eng_rs *rs, eng_txn *t, const uint8_t *data, uint32_t len, eng_rid *out,
                 md_error *err)
{
    bt_engine *e = BT_ENG(rs);
    bt_tree *tr = BT_TREE(rs);
    int rc = bt_txn_check(e, t, err);
    if (rc)
        return rc;
    if (bt_capped_is(tr))
        return bt_capped_insert(rs, t, data, len, out, err);
    return bt_write(e, (bt_txn *)t, tr, NULL, 0, 0, data, len, BT_W_INSERT, out, err);
}

/* The calling thread's view buffer of handle h: found through a small
 * thread-local cache by the handle's unique id, else in the handle's list
 * (h->mu).  Ids are never reused, so a closed handle's entries never
 * match again. */
static bt_view *view_of(bt_handle *h)
{
    static __thread struct {
        uint64_t hid;
        bt_view *v;
    } cache[8];
    pthread_t me = pthread_self();
    bt_view *v;
    if (cache[h->hid % 8].hid == h->hid)
        return cache[h->hid % 8].v;
    pthread_mutex_lock(&h->mu);
    for (v = h->views; v && !pthread_equal(v->owner, me); v = v->next)
        ;
    if (!v && (v = calloc(1, sizeof *v)) != NULL) {
        v->owner = me;
        v->next = h->views;
        h->views = v;
    }
    pthread_mutex_unlock(&h->mu);
    if (v) {
        cache[h->hid % 8].hid = h->hid;
        cache[h->hid % 8].v = v;
    }
    return v;
}

int bt_rs_get(eng_rs *rs, eng_rid rid, const uint8_t **data, uint32_t *len)
{
    bt_engine *e = BT_ENG(rs);
    bt_view *v = view_of((bt_handle *)rs);
    md_error err = {0};
    if (!v)
        return MD_ENOMEM;
    bt_read_check(e);
    bt_latch_shared(e);
    int rc = bt_lookup(e, bt_txn_mine(e), BT_TREE(rs), NULL, 0, rid, &v->b, &v->near, &err);
    bt_unlatch(e);
    eng_note_error(rc, &err);
    if (rc)
        return rc;
    *data = v->b.p ? v->b.p : (const uint8_t *)"";
    *len = (uint32_t)v->b.n;
    return 0;
}

int bt_rs_update(eng_rs *rs, eng_txn *t, eng_rid rid, const uint8_t *data, uint32_t len,
                 eng_rid *new_rid, bool *moved, md_error *err)
{
    bt_engine *e = BT_ENG(rs);
    int rc = bt_txn_check(e, t, err);
    if (rc)
        return rc;
    if (bt_capped_is(BT_TREE(rs)) && (rc = bt_capped_changing(rs, t, rid, len, err)) != 0)
        return rc;
    rc = bt_write(e, (bt_txn *)t, BT_TREE(rs), NULL, 0, rid, data, len, BT_W_UPDATE, NULL, err);
    if (rc == MD_NOTFOUND)
        return md_error_set(err, MD_NOTFOUND, MD_CODE_NO_SUCH_KEY, "no record %lld",
                            (long long)rid);
    if (rc)
        return rc;
    *new_rid = rid;
    *moved = false;
    return 0;
}

int bt_rs_remove(eng_rs *rs, eng_txn *t, eng_rid rid)
{
    bt_engine *e = BT_ENG(rs);
    md_error err;
    int rc = bt_txn_check(e, t, NULL);
    if (rc)
        return rc;
    if (bt_capped_is(BT_TREE(rs)) && (rc = bt_capped_changing(rs, t, rid, -1, &err)) != 0)
        return rc;
    return bt_write(e, (bt_txn *)t, BT_TREE(rs), NULL, 0, rid, NULL, 0, BT_W_REMOVE, NULL, &err);
}

int bt_rs_truncate(eng_rs *rs, eng_txn *t)
{
    int rc = bt_obj_truncate(BT_ENG(rs), BT_TREE(rs), t);
    if (rc == 0 && bt_capped_is(BT_TREE(rs)))
        bt_capped_truncated(BT_TREE(rs), t);
    return rc;
}

int bt_rs_set_alloc(eng_rs *rs, eng_txn *t, int alloc)
{
    return 0; /* no allocation strategies: records are never padded */
}

/* Counters of the committed state (commit applies them). */
void bt_rs_stats(eng_rs *rs, struct eng_rs_stats *s)
{
    bt_tree *t = BT_TREE(rs);
    bt_engine *e = BT_ENG(rs);
    bt_latch_shared(e);
    /* commits count into these under the shared latch: atomic loads */
    s->count = __atomic_load_n(&t->count, __ATOMIC_RELAXED);
    s->data_size = __atomic_load_n(&t->data_size, __ATOMIC_RELAXED);
    /* The file's size on disk, as WiredTiger reports it: with compression
     * it can be far below data_size, and it lags until pages are written. */
    s->storage_size = bt_file_size(t);
    s->n_inserts = __atomic_load_n(&t->n_inserts, __ATOMIC_RELAXED);
    s->n_updates = __atomic_load_n(&t->n_updates, __ATOMIC_RELAXED);
    s->n_inplace = s->n_updates; /* RecordIds never change */
    s->n_moves = 0;
    s->bytes_written = __atomic_load_n(&t->bytes_written, __ATOMIC_RELAXED);
    bt_unlatch(e);
}

/* The "btree" statistics: pages of the tree as it is now (the committed
 * versions folded in first, under the exclusive latch); the compression
 * ratio of the blocks it references (uncompressed bytes over the bytes
 * stored, headers included, the padding to 4 KB not: storageSize shows
 * that); bytesWrittenTotal is every block written since open. */
void bt_rs_append_stats(eng_rs *rs, bson_t *sub)
{
    bt_tree *t = BT_TREE(rs);
    bt_engine *e = BT_ENG(rs);
    bson_t pages;
    bt_latch_excl(e);
    (void)bt_fold_all(e, NULL); /* a failed put: the pages as they are */
    BSON_APPEND_DOCUMENT_BEGIN(sub, "pages", &pages);
    BSON_APPEND_INT64(&pages, "internal", t->pages_int);
    BSON_APPEND_INT64(&pages, "leaf", t->pages_leaf);
    BSON_APPEND_INT64(&pages, "overflow", t->pages_ovfl);
    bson_append_document_end(sub, &pages);
    BSON_APPEND_INT64(sub, "fileSize", bt_file_size(t));
    BSON_APPEND_INT64(sub, "bytesWrittenTotal", t->blk.bytes_written);
    BSON_APPEND_DOUBLE(sub, "bytesWrittenPerUpdate",
                       t->n_updates ? (double)t->upd_bytes / (double)t->n_updates : 0.0);
    BSON_APPEND_UTF8(sub, "compressor", t->comp->name);
    BSON_APPEND_DOUBLE(sub, "compressionRatio",
                       t->live_disk > 0 ? (double)t->live_raw / (double)t->live_disk : 1.0);
    BSON_APPEND_INT64(sub, "cacheBytes",
                      (int64_t)__atomic_load_n(&e->cache_bytes, __ATOMIC_RELAXED));
    BSON_APPEND_INT64(sub, "dirtyBytes", (int64_t)e->dirty_bytes);
    BSON_APPEND_INT64(sub, "checkpoints", e->checkpoints);
    bt_unlatch(e);
}

/* The verifier reads pages in and walks every one: nothing may move.  The
 * committed versions are folded in first (the counters include them). */
static int64_t verify_excl(bt_tree *t, eng_validate *v)
{
    bt_latch_excl(t->eng);
    (void)bt_fold_all(t->eng, NULL); /* a failed put shows as a count mismatch */
    bt_verify_tree(t, v);
    int64_t n = t->count;
    bt_unlatch(t->eng);
    return n;
}

int bt_rs_validate(eng_rs *rs, eng_validate *v)
{
    BSON_APPEND_INT64(&v->info, "nrecords", verify_excl(BT_TREE(rs), v));
    bt_capped_validate(BT_TREE(rs), v);
    return 0;
}

int bt_test_depth(eng_rs *rs)
{
    bt_pos pos;
    bt_tree *t = BT_TREE(rs);
    bt_latch_shared(t->eng);
    int rc = bt_search(t, NULL, 0, 0, &pos, NULL, NULL);
    bt_unlatch(t->eng);
    return rc ? -1 : pos.depth;
}

/* ---- record-store cursors ------------------------------------------------------ */

typedef struct bt_rs_cursor {
    eng_rs_cursor hdr;
    bool forward;
    bool lost;  /* capped: the last record returned was removed */
    bt_cur cur; /* the last record returned */
    bt_buf probe; /* capped: scratch for checking that cur is still there */
} bt_rs_cursor;

int bt_rs_cursor_open(eng_rs *rs, bool forward, eng_rs_cursor **out)
{
    bt_rs_cursor *c = calloc(1, sizeof *c);
    if (!c)
        return MD_ENOMEM;
    c->hdr.rs = rs;
    c->forward = forward;
    *out = &c->hdr;
    return 0;
}

/* The record after the last one returned (which may be gone). */
/* Capped, forward: is the last record returned still there for the
 * calling thread?  0 if so, MD_ECAPPEDLOST (and lost from now on) if the
 * ring has passed it.  Under the latch. */
static int capped_still_there(bt_rs_cursor *c, md_error *err)
{
    bt_engine *e = BT_ENG(c->hdr.rs);
    if (c->cur.pos_ok && c->cur.gen == e->gen && c->cur.rts == bt_read_ts(e, bt_txn_mine(e)))
        return 0; /* nothing committed or folded since the cursor stood on it */
    int rc = bt_lookup(e, bt_txn_mine(e), BT_TREE(c->hdr.rs), NULL, 0, c->cur.rid, &c->probe, NULL,
                       err);
    if (rc == MD_NOTFOUND)
        c->lost = true, rc = MD_ECAPPEDLOST;
    return rc;
}

int bt_rs_cursor_next(eng_rs_cursor *ch, eng_rid *rid, const uint8_t **data, uint32_t *len)
{
    bt_rs_cursor *c = (bt_rs_cursor *)ch;
    bt_engine *e = BT_ENG(ch->rs);
    md_error err = {0};
    if (c->lost)
        return MD_ECAPPEDLOST;
    bt_read_check(e);
    bt_latch_shared(e);
    int rc = 0;
    /* Capped, tailing: readers need no lock on btree, so the ring may have
     * passed the last record since restore.  Every read under one hold of
     * the latch sees the same commits (bt_read_ts), so if it is still
     * there every newer record is too. */
    if (c->forward && c->cur.have && bt_capped_is(BT_TREE(ch->rs)))
        rc = capped_still_there(c, &err);
    if (rc == 0)
        rc = bt_cur_find(e, bt_txn_mine(e), BT_TREE(ch->rs), &c->cur, NULL, 0, c->cur.rid,
                         c->forward, false, !c->cur.have, &err);
    bt_unlatch(e);
    eng_note_error(rc, &err);
    if (rc)
        return rc;
    *rid = c->cur.rid;
    *data = c->cur.val.p ? c->cur.val.p : (const uint8_t *)"";
    *len = (uint32_t)c->cur.val.n;
    return 0;
}

void bt_rs_cursor_save(eng_rs_cursor *ch)
{
}

/* Every step finds the record after the last one; on a capped store a
 * forward cursor whose last record is gone lost its place in the ring. */
int bt_rs_cursor_restore(eng_rs_cursor *ch)
{
    bt_rs_cursor *c = (bt_rs_cursor *)ch;
    md_error err;
    if (!c->lost && c->forward && c->cur.have && bt_capped_is(BT_TREE(ch->rs))) {
        bt_engine *e = BT_ENG(ch->rs);
        bt_latch_shared(e);
        (void)capped_still_there(c, &err); /* another error: next reports it */
        bt_unlatch(e);
    }
    return c->lost ? MD_ECAPPEDLOST : 0;
}

void bt_rs_cursor_close(eng_rs_cursor *ch)
{
    bt_cur_cleanup(&((bt_rs_cursor *)ch)->cur);
    bt_buf_free(&((bt_rs_cursor *)ch)->probe);
    free(ch);
}

/* ---- sorted stores ------------------------------------------------------------- */

int bt_ss_create(eng_engine *e, eng_txn *t, const char *ident, md_error *err)
{
    return bt_obj_create((bt_engine *)e, t, ident, BT_SS, "none", err);
}

int bt_ss_open(eng_engine *e, const char *ident, eng_ss **out, md_error *err)
{
    bt_handle *h;
    int rc = bt_obj_open((bt_engine *)e, ident, BT_SS, &h, err);
    if (rc == 0)
        *out = &h->h.ss;
    return rc;
}

void bt_ss_close(eng_ss *ss)
{
    bt_obj_close((bt_handle *)ss);
}

int bt_ss_drop(eng_engine *e, eng_txn *t, const char *ident)
{
    return bt_obj_drop((bt_engine *)e, t, ident, BT_SS);
}

int bt_ss_insert(eng_ss *ss, eng_txn *t, const uint8_t *key, uint32_t klen, eng_rid rid,
                 bool unique, eng_rid *dup_rid, md_error *err)
{
    bt_engine *e = BT_ENG(ss);
    int rc = bt_txn_check(e, t, err);
    if (rc)
        return rc;
    return bt_write(e, (bt_txn *)t, BT_TREE(ss), key, klen, rid, NULL, 0,
                    unique ? BT_W_UNIQUE : BT_W_SSINSERT, dup_rid, err);
}

int bt_ss_remove(eng_ss *ss, eng_txn *t, const uint8_t *key, uint32_t klen, eng_rid rid)
{
    bt_engine *e = BT_ENG(ss);
    md_error err;
    int rc = bt_txn_check(e, t, NULL);
    if (rc)
        return rc;
    return bt_write(e, (bt_txn *)t, BT_TREE(ss), key, klen, rid, NULL, 0, BT_W_REMOVE, NULL,
                    &err);
}

int bt_ss_truncate(eng_ss *ss, eng_txn *t)
{
    return bt_obj_truncate(BT_ENG(ss), BT_TREE(ss), t);
}

int64_t bt_ss_size(eng_ss *ss)
{
    bt_engine *e = BT_ENG(ss);
    bt_latch_shared(e); /* compact switches the file */
    int64_t n = bt_file_size(BT_TREE(ss));
    bt_unlatch(e);
    return n;
}

int64_t bt_ss_entries(eng_ss *ss)
{
    bt_engine *e = BT_ENG(ss);
    bt_latch_shared(e);
    int64_t n = __atomic_load_n(&BT_TREE(ss)->count, __ATOMIC_RELAXED); /* commits add */
    bt_unlatch(e);
    return n;
}

int bt_ss_validate(eng_ss *ss, eng_validate *v)
{
    verify_excl(BT_TREE(ss), v);
    return 0;
}

/* ---- sorted-store cursors ------------------------------------------------------ */

enum { SS_BEFORE, SS_AT, SS_AFTER };

/* SS_AT: cur holds the current entry, as read when the engine generation
 * was gen, at read timestamp cur.rts, and the transaction txn had made
 * wseq writes. */
typedef struct bt_ss_cursor {
    eng_ss_cursor hdr;
    int state;
    bt_cur cur;
    uint64_t gen, txn, wseq;
} bt_ss_cursor;

int bt_ss_cursor_open(eng_ss *ss, eng_ss_cursor **out)
{
    bt_ss_cursor *c = calloc(1, sizeof *c);
    if (!c)
        return MD_ENOMEM;
    c->hdr.ss = ss;
    c->state = SS_BEFORE;
    *out = &c->hdr;
    return 0;
}

/* One step under the shared latch; MD_NOTFOUND rests at `end_state`. */
static int ss_find(bt_ss_cursor *c, const uint8_t *key, uint32_t klen, eng_rid rid, bool fwd,
                   bool incl, bool inf, int end_state)
{
    bt_engine *e = BT_ENG(c->hdr.ss);
    md_error err = {0};
    bt_read_check(e);
    bt_latch_shared(e);
    bt_txn *x = bt_txn_mine(e);
    int rc = bt_cur_find(e, x, BT_TREE(c->hdr.ss), &c->cur, key, klen, rid, fwd, incl, inf,
                         &err);
    eng_note_error(rc, &err);
    c->gen = e->gen;
    c->txn = x ? x->id : 0;
    c->wseq = x ? x->wseq : 0;
    bt_unlatch(e);
    if (rc == 0)
        c->state = SS_AT;
    else if (rc == MD_NOTFOUND)
        c->state = end_state;
    return rc;
}

/* Find the current entry again (or the next greater one) if anything
 * changed since it was read.  Whether anything did is read without the
 * latch (the base's gen and last_ts are stored atomically), so the usual
 * step -- next, then get -- takes the latch once, not twice. */
static int ss_refresh(bt_ss_cursor *c)
{
    bt_engine *e = BT_ENG(c->hdr.ss);
    bt_txn *x = bt_txn_mine(e);
    bool same = c->gen == __atomic_load_n(&e->gen, __ATOMIC_ACQUIRE) &&
                c->cur.rts == bt_read_ts(e, x) && c->txn == (x ? x->id : 0) &&
                c->wseq == (x ? x->wseq : 0);
    if (c->state != SS_AT || same)
        return 0;
    return ss_find(c, c->cur.key.p, (uint32_t)c->cur.key.n, c->cur.rid, true, true, false,
                   SS_AFTER);
}

/* eng_ss_find's position: one per thread, its key and value buffers kept
 * between lookups (freed when the thread exits). */
static __thread bt_cur *find_cur;
static pthread_key_t find_key;
static pthread_once_t find_once = PTHREAD_ONCE_INIT;

static void find_cur_free(void *p)
{
    find_cur = NULL;
    bt_cur_cleanup(p);
    free(p);
}

static void find_key_make(void)
{
    pthread_key_create(&find_key, find_cur_free);
}

/* eng_ss_find: one positioning under the shared latch, no cursor. */
int bt_ss_find(eng_ss *ss, const uint8_t *key, uint32_t klen, eng_rid *rid)
{
    bt_engine *e = BT_ENG(ss);
    md_error err = {0};
    if (!find_cur) {
        pthread_once(&find_once, find_key_make);
        if (!(find_cur = calloc(1, sizeof *find_cur)))
            return MD_ENOMEM;
        pthread_setspecific(find_key, find_cur);
    }
    bt_cur cur = *find_cur; /* the buffers move in and out; no position is reused */
    cur.have = cur.pos_ok = false;
    bt_read_check(e);
    bt_latch_shared(e);
    int rc = bt_cur_find(e, bt_txn_mine(e), BT_TREE(ss), &cur, key, klen, ENG_RID_NONE, true,
                         true, false, &err);
    eng_note_error(rc, &err);
    bt_unlatch(e);
    if (rc == 0 && (cur.key.n != klen || (klen && memcmp(cur.key.p, key, klen) != 0)))
        rc = MD_NOTFOUND;
    if (rc == 0)
        *rid = cur.rid;
    *find_cur = cur;
    return rc;
}

int bt_ss_cursor_seek(eng_ss_cursor *ch, const uint8_t *key, uint32_t klen, eng_rid rid)
{
    return ss_find((bt_ss_cursor *)ch, key, klen, rid, true, true, false, SS_AFTER);
}

int bt_ss_cursor_next(eng_ss_cursor *ch)
{
    bt_ss_cursor *c = (bt_ss_cursor *)ch;
    if (c->state == SS_AFTER)
        return MD_NOTFOUND;
    if (c->state == SS_BEFORE)
        return ss_find(c, NULL, 0, INT64_MIN, true, true, true, SS_AFTER);
    return ss_find(c, c->cur.key.p, (uint32_t)c->cur.key.n, c->cur.rid, true, false, false,
                   SS_AFTER);
}

int bt_ss_cursor_prev(eng_ss_cursor *ch)
{
    bt_ss_cursor *c = (bt_ss_cursor *)ch;
    if (c->state == SS_BEFORE)
        return MD_NOTFOUND;
    if (c->state == SS_AFTER)
        return ss_find(c, NULL, 0, INT64_MAX, false, true, true, SS_BEFORE);
    return ss_find(c, c->cur.key.p, (uint32_t)c->cur.key.n, c->cur.rid, false, false, false,
                   SS_BEFORE);
}

int bt_ss_cursor_get(eng_ss_cursor *ch, const uint8_t **key, uint32_t *klen, eng_rid *rid)
{
    bt_ss_cursor *c = (bt_ss_cursor *)ch;
    int rc = ss_refresh(c);
    if (rc)
        return rc;
    if (c->state != SS_AT)
        return MD_NOTFOUND;
    *key = c->cur.key.p ? c->cur.key.p : (const uint8_t *)"";
    *klen = (uint32_t)c->cur.key.n;
    *rid = c->cur.rid;
    return 0;
}

void bt_ss_cursor_save(eng_ss_cursor *ch)
{
}

int bt_ss_cursor_restore(eng_ss_cursor *ch)
{
    bt_ss_cursor *c = (bt_ss_cursor *)ch;
    if (c->state != SS_AT)
        return 0;
    int rc = ss_find(c, c->cur.key.p, (uint32_t)c->cur.key.n, c->cur.rid, true, true, false,
                     SS_AFTER);
    return rc == MD_NOTFOUND ? 0 : rc;
}

void bt_ss_cursor_close(eng_ss_cursor *ch)
{
    bt_cur_cleanup(&((bt_ss_cursor *)ch)->cur);
    free(ch);
}
