/*
 * bt_store.c -- record stores and sorted stores on the B+tree, and their
 * cursors.
 *
 * A record store's entries are (empty key, RecordId) -> BSON; RecordIds
 * come from a per-store counter that is never reused and is persisted in
 * the checkpoint.  There are no in-place updates: an update stores the
 * whole new document under the same RecordId (moved = false), so every
 * update counts as "in place" for the contract's counters, and bytes
 * written per update shows the rewrite cost.
 *
 * A sorted store's entries are (key bytes, rid) with no value.
 *
 * Cursors keep a copy of their current key (rid for record stores) and a
 * position valid while the engine generation is unchanged; after any
 * write or eviction they re-seek from the key.  save/restore therefore
 * only force that re-seek.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "bt_int.h"

/* ---- record stores ------------------------------------------------------------ */

int bt_rs_create(eng_engine *e, eng_txn *t, const char *ident, const eng_rs_options *o,
                 md_error *err)
{
    return bt_obj_create((bt_engine *)e, t, ident, BT_RS, o ? o->block_compressor : NULL, err);
}

int bt_rs_open(eng_engine *e, const char *ident, eng_rs **out, md_error *err)
{
    bt_handle *h;
    int rc = bt_obj_open((bt_engine *)e, ident, BT_RS, &h, err);
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
    return bt_obj_drop((bt_engine *)e, t, ident, BT_RS);
}

int bt_rs_insert(eng_rs *rs, eng_txn *t, const uint8_t *data, uint32_t len, eng_rid *out,
                 md_error *err)
{
    bt_engine *e = BT_ENG(rs);
    bt_tree *tr = BT_TREE(rs);
    int rc = bt_txn_check(e, t, err);
    if (rc)
        return rc;
    eng_rid rid = tr->next_rid;
    if ((rc = bt_logged(e, tr, NULL, 0, rid, data, len, true, false, err)) != 0)
        return rc;
    tr->next_rid++;
    tr->n_inserts++;
    tr->bytes_written += len;
    bt_undo_counters(e, 1, 0, len);
    *out = rid;
    return 0;
}

int bt_rs_get(eng_rs *rs, eng_rid rid, const uint8_t **data, uint32_t *len)
{
    bt_engine *e = BT_ENG(rs);
    bt_pos pos;
    bool exact;
    bt_read_check(e);
    int rc = bt_search(BT_TREE(rs), NULL, 0, rid, &pos, &exact, &e->last_err);
    if (rc)
        return rc;
    if (!exact)
        return MD_NOTFOUND;
    bt_ent *en = bt_pos_ent(&pos);
    bt_pin_set(e, &((bt_handle *)rs)->pin, pos.pg[pos.depth - 1]);
    *data = en->val;
    *len = en->vlen;
    return 0;
}

int bt_rs_update(eng_rs *rs, eng_txn *t, eng_rid rid, const uint8_t *data, uint32_t len,
                 eng_rid *new_rid, bool *moved, md_error *err)
{
    bt_engine *e = BT_ENG(rs);
    bt_tree *tr = BT_TREE(rs);
    bt_ent *en;
    int rc = bt_txn_check(e, t, err);
    if (rc)
        return rc;
    if ((rc = bt_get(tr, NULL, 0, rid, &en, err)) == MD_NOTFOUND)
        return md_error_set(err, MD_NOTFOUND, MD_CODE_NO_SUCH_KEY, "no record %lld",
                            (long long)rid);
    if (rc || (rc = bt_logged(e, tr, NULL, 0, rid, data, len, true, false, err)) != 0)
        return rc;
    tr->n_updates++;
    tr->bytes_written += len;
    tr->upd_bytes += len;
    bt_undo_counters(e, 0, 1, len);
    *new_rid = rid;
    *moved = false;
    return 0;
}

int bt_rs_remove(eng_rs *rs, eng_txn *t, eng_rid rid)
{
    bt_engine *e = BT_ENG(rs);
    int rc = bt_txn_check(e, t, NULL);
    if (rc)
        return rc;
    return bt_logged(e, BT_TREE(rs), NULL, 0, rid, NULL, 0, false, true, &e->last_err);
}

int bt_rs_truncate(eng_rs *rs, eng_txn *t)
{
    return bt_obj_truncate(BT_ENG(rs), BT_TREE(rs), t);
}

int bt_rs_set_alloc(eng_rs *rs, eng_txn *t, int alloc)
{
    return 0; /* no allocation strategies: records are never padded */
}

void bt_rs_stats(eng_rs *rs, struct eng_rs_stats *s)
{
    bt_tree *t = BT_TREE(rs);
    s->count = t->count;
    s->data_size = t->data_size;
    /* The file's size on disk, as WiredTiger reports it: with compression
     * it can be far below data_size, and it lags until pages are written. */
    s->storage_size = bt_file_size(t);
    s->n_inserts = t->n_inserts;
    s->n_updates = t->n_updates;
    s->n_inplace = t->n_updates; /* RecordIds never change */
    s->n_moves = 0;
    s->bytes_written = t->bytes_written;
}

/* The "btree" statistics: pages of the tree as it is now; the compression
 * ratio of the blocks it references (uncompressed bytes over the bytes
 * stored, headers included, the padding to 4 KB not: storageSize shows
 * that); bytesWrittenTotal is every block written since open. */
void bt_rs_append_stats(eng_rs *rs, bson_t *sub)
{
    bt_tree *t = BT_TREE(rs);
    bt_engine *e = BT_ENG(rs);
    bson_t pages;
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
    BSON_APPEND_INT64(sub, "cacheBytes", (int64_t)e->cache_bytes);
    BSON_APPEND_INT64(sub, "dirtyBytes", (int64_t)e->dirty_bytes);
    BSON_APPEND_INT64(sub, "checkpoints", e->checkpoints);
}

int bt_rs_validate(eng_rs *rs, eng_validate *v)
{
    bt_verify_tree(BT_TREE(rs), v);
    BSON_APPEND_INT64(&v->info, "nrecords", BT_TREE(rs)->count);
    return 0;
}

int bt_test_depth(eng_rs *rs)
{
    bt_pos pos;
    bt_tree *t = BT_TREE(rs);
    if (bt_search(t, NULL, 0, 0, &pos, NULL, NULL) != 0)
        return -1;
    return pos.depth;
}

/* ---- record-store cursors ------------------------------------------------------ */

typedef struct bt_rs_cursor {
    eng_rs_cursor hdr;
    bool forward, positioned;
    eng_rid last; /* last rid returned, 0 before the first */
    uint64_t gen;
    bt_pos pos;
    bt_pin pin; /* the leaf of the last view */
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

/* Position on the record after (or before) c->last by searching. */
static int rs_reseek(bt_rs_cursor *c, bt_tree *t, md_error *err)
{
    int rc;
    if (c->forward) {
        if ((rc = bt_search(t, NULL, 0, c->last + 1, &c->pos, NULL, err)) != 0)
            return rc;
        return bt_pos_normalize(t, &c->pos, err);
    }
    if (c->last == ENG_RID_NONE)
        return bt_pos_last(t, &c->pos, err);
    if ((rc = bt_search(t, NULL, 0, c->last, &c->pos, NULL, err)) != 0)
        return rc;
    return bt_pos_prev(t, &c->pos, err);
}

int bt_rs_cursor_next(eng_rs_cursor *ch, eng_rid *rid, const uint8_t **data, uint32_t *len)
{
    bt_rs_cursor *c = (bt_rs_cursor *)ch;
    bt_tree *t = BT_TREE(ch->rs);
    bt_engine *e = BT_ENG(ch->rs);
    int rc;
    bt_read_check(e);
    if (c->positioned && c->gen == e->gen)
        rc = c->forward ? bt_pos_next(t, &c->pos, &e->last_err)
                        : bt_pos_prev(t, &c->pos, &e->last_err);
    else
        rc = rs_reseek(c, t, &e->last_err);
    c->positioned = rc == 0;
    c->gen = e->gen;
    if (rc)
        return rc;
    bt_ent *en = bt_pos_ent(&c->pos);
    bt_pin_set(e, &c->pin, c->pos.pg[c->pos.depth - 1]);
    c->last = *rid = en->rid;
    *data = en->val;
    *len = en->vlen;
    return 0;
}

void bt_rs_cursor_save(eng_rs_cursor *ch)
{
    ((bt_rs_cursor *)ch)->positioned = false;
}

int bt_rs_cursor_restore(eng_rs_cursor *ch)
{
    ((bt_rs_cursor *)ch)->positioned = false;
    return 0;
}

void bt_rs_cursor_close(eng_rs_cursor *ch)
{
    bt_pin_clear(BT_ENG(ch->rs), &((bt_rs_cursor *)ch)->pin);
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
    bt_tree *tr = BT_TREE(ss);
    bt_ent *en;
    int rc = bt_txn_check(e, t, err);
    if (rc)
        return rc;
    if ((rc = bt_get(tr, key, klen, rid, &en, err)) != MD_NOTFOUND)
        return rc; /* 0: the pair exists, a no-op */
    if (unique) {
        bt_pos pos;
        if ((rc = bt_search(tr, key, klen, INT64_MIN, &pos, NULL, err)) != 0)
            return rc;
        rc = bt_pos_normalize(tr, &pos, err);
        if (rc && rc != MD_NOTFOUND)
            return rc;
        en = rc == 0 ? bt_pos_ent(&pos) : NULL;
        if (en && en->klen == klen && (klen == 0 || memcmp(en->key, key, klen) == 0)) {
            if (dup_rid)
                *dup_rid = en->rid;
            return md_error_set(err, MD_EDUPKEY, MD_CODE_DUPLICATE_KEY, "duplicate key");
        }
    }
    return bt_logged(e, tr, key, klen, rid, NULL, 0, false, false, err);
}

int bt_ss_remove(eng_ss *ss, eng_txn *t, const uint8_t *key, uint32_t klen, eng_rid rid)
{
    bt_engine *e = BT_ENG(ss);
    int rc = bt_txn_check(e, t, NULL);
    if (rc)
        return rc;
    return bt_logged(e, BT_TREE(ss), key, klen, rid, NULL, 0, false, true, &e->last_err);
}

int bt_ss_truncate(eng_ss *ss, eng_txn *t)
{
    return bt_obj_truncate(BT_ENG(ss), BT_TREE(ss), t);
}

int64_t bt_ss_size(eng_ss *ss)
{
    return bt_file_size(BT_TREE(ss));
}

int64_t bt_ss_entries(eng_ss *ss)
{
    return BT_TREE(ss)->count;
}

int bt_ss_validate(eng_ss *ss, eng_validate *v)
{
    bt_verify_tree(BT_TREE(ss), v);
    return 0;
}

/* ---- sorted-store cursors ------------------------------------------------------ */

enum { SS_BEFORE, SS_AT, SS_AFTER };

typedef struct bt_ss_cursor {
    eng_ss_cursor hdr;
    int state;
    uint8_t *key; /* SS_AT: copy of the current entry */
    uint32_t klen, kcap;
    eng_rid rid;
    uint64_t gen; /* pos is valid while this is the engine's */
    bt_pos pos;
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

/* Remember the entry at c->pos, or rest past an end on MD_NOTFOUND. */
static int ss_capture(bt_ss_cursor *c, int rc, int end_state)
{
    c->gen = BT_ENG(c->hdr.ss)->gen;
    if (rc) {
        c->state = rc == MD_NOTFOUND ? end_state : c->state;
        return rc;
    }
    bt_ent *en = bt_pos_ent(&c->pos);
    if (en->klen > c->kcap) {
        uint8_t *nk = realloc(c->key, en->klen);
        if (!nk)
            return MD_ENOMEM;
        c->key = nk;
        c->kcap = en->klen;
    }
    if (en->klen)
        memcpy(c->key, en->key, en->klen);
    c->klen = en->klen;
    c->rid = en->rid;
    c->state = SS_AT;
    return 0;
}

static int ss_seek(bt_ss_cursor *c, const uint8_t *key, uint32_t klen, eng_rid rid, bool *exact)
{
    bt_engine *e = BT_ENG(c->hdr.ss);
    bt_tree *t = BT_TREE(c->hdr.ss);
    int rc = bt_search(t, key, klen, rid, &c->pos, exact, &e->last_err);
    if (rc == 0)
        rc = bt_pos_normalize(t, &c->pos, &e->last_err);
    return rc;
}

/* After a write, find the saved entry again (or the next greater one);
 * *moved says the cursor is no longer on the saved entry. */
static int ss_refresh(bt_ss_cursor *c, bool *moved)
{
    bool exact = true;
    *moved = false;
    if (c->state != SS_AT || c->gen == BT_ENG(c->hdr.ss)->gen)
        return 0;
    int rc = ss_seek(c, c->key, c->klen, c->rid, &exact);
    *moved = !exact;
    return ss_capture(c, rc, SS_AFTER);
}

int bt_ss_cursor_seek(eng_ss_cursor *ch, const uint8_t *key, uint32_t klen, eng_rid rid)
{
    bt_ss_cursor *c = (bt_ss_cursor *)ch;
    bt_read_check(BT_ENG(ch->ss));
    return ss_capture(c, ss_seek(c, key, klen, rid, NULL), SS_AFTER);
}

int bt_ss_cursor_next(eng_ss_cursor *ch)
{
    bt_ss_cursor *c = (bt_ss_cursor *)ch;
    bool moved;
    if (c->state == SS_AFTER)
        return MD_NOTFOUND;
    bt_read_check(BT_ENG(ch->ss));
    if (c->state == SS_BEFORE)
        return bt_ss_cursor_seek(ch, NULL, 0, INT64_MIN);
    int rc = ss_refresh(c, &moved);
    if (rc || moved)
        return rc;
    bt_engine *e = BT_ENG(ch->ss);
    return ss_capture(c, bt_pos_next(BT_TREE(ch->ss), &c->pos, &e->last_err), SS_AFTER);
}

int bt_ss_cursor_prev(eng_ss_cursor *ch)
{
    bt_ss_cursor *c = (bt_ss_cursor *)ch;
    bt_engine *e = BT_ENG(ch->ss);
    bt_tree *t = BT_TREE(ch->ss);
    bool moved;
    if (c->state == SS_BEFORE)
        return MD_NOTFOUND;
    bt_read_check(e);
    if (c->state == SS_AFTER)
        return ss_capture(c, bt_pos_last(t, &c->pos, &e->last_err), SS_BEFORE);
    int rc = ss_refresh(c, &moved);
    if (rc == MD_NOTFOUND) /* everything from the saved entry on is gone */
        return ss_capture(c, bt_pos_last(t, &c->pos, &e->last_err), SS_BEFORE);
    if (rc)
        return rc;
    return ss_capture(c, bt_pos_prev(t, &c->pos, &e->last_err), SS_BEFORE);
}

int bt_ss_cursor_get(eng_ss_cursor *ch, const uint8_t **key, uint32_t *klen, eng_rid *rid)
{
    bt_ss_cursor *c = (bt_ss_cursor *)ch;
    bool moved;
    int rc = ss_refresh(c, &moved);
    if (rc)
        return rc;
    if (c->state != SS_AT)
        return MD_NOTFOUND;
    *key = c->key ? c->key : (const uint8_t *)"";
    *klen = c->klen;
    *rid = c->rid;
    return 0;
}

void bt_ss_cursor_save(eng_ss_cursor *ch)
{
}

int bt_ss_cursor_restore(eng_ss_cursor *ch)
{
    bt_ss_cursor *c = (bt_ss_cursor *)ch;
    bool moved;
    c->gen = BT_ENG(ch->ss)->gen - 1; /* force a re-seek */
    int rc = ss_refresh(c, &moved);
    return rc == MD_NOTFOUND ? 0 : rc;
}

void bt_ss_cursor_close(eng_ss_cursor *ch)
{
    free(((bt_ss_cursor *)ch)->key);
    free(ch);
}
