/*
 * bt_engine.c -- the btree engine's operations table (eng.h): engine
 * open/close, transactions with an in-memory undo log, the catalog,
 * record stores and sorted stores.
 *
 * Every write goes through logged_put / logged_del, which first copy what
 * they replace into the active transaction's undo log; abort replays the
 * log backwards through the same tree operations; with the write-ahead
 * log on, they also append a logical operation to the transaction's log
 * buffer, which commit hands to bt_log.c as one record.  Checkpoints
 * (bt_ckpt.c) are taken every checkpointIntervalSecs and every
 * checkpointLogSizeMB of log (both checked at commit), by eng_flush and at
 * close; without the log, a commit is durable only at the next one.
 *
 * The cache is checked at the start of every write, at commit and at the
 * start of every read: above its size, pages are evicted down to 80% of it
 * (bt_evict), which is why borrowed views last only until the next write
 * (eng.h).  A read spares the page of each handle's and cursor's latest
 * view (bt_pin), so that view lasts until that handle's next read.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bt_int.h"

/* ---- trees and handles ------------------------------------------------------- */

bt_tree *bt_find_tree(bt_engine *e, const char *ident)
{
    for (size_t i = 0; i < e->ntrees; i++)
        if (e->trees[i]->live && strcmp(e->trees[i]->ident, ident) == 0)
            return e->trees[i];
    return NULL;
}

int bt_add_tree(bt_engine *e, bt_tree *t)
{
    if (e->ntrees == e->captrees) {
        size_t ncap = e->captrees ? e->captrees * 2 : 16;
        bt_tree **nv = realloc(e->trees, ncap * sizeof *nv);
        if (!nv)
            return MD_ENOMEM;
        e->trees = nv;
        e->captrees = ncap;
    }
    e->trees[e->ntrees++] = t;
    return 0;
}

/* Destroy dropped trees nothing can reach (no handle, no transaction). */
static void sweep(bt_engine *e)
{
    size_t j = 0;
    if (e->txn)
        return;
    for (size_t i = 0; i < e->ntrees; i++) {
        bt_tree *t = e->trees[i];
        if (!t->live && t->refs == 0) {
            if (t->unlink_now)
                unlink(t->blk.path);
            bt_tree_destroy(t);
        } else {
            e->trees[j++] = t;
        }
    }
    e->ntrees = j;
}

/* Evict down to 80% of the cache when it is over its size. */
int bt_cache_check(bt_engine *e)
{
    if (e->cache_bytes <= e->cache_max)
        return 0;
    return bt_evict(e, e->cache_max / 10 * 8);
}

/* Reads evict too (clean pages first, as at writes), sparing the pages
 * that hold a live view; called where a read starts, never mid-search. */
void bt_read_check(bt_engine *e)
{
    if (e->cache_bytes > e->cache_max)
        bt_evict(e, e->cache_max / 10 * 8);
}

void bt_pin_set(bt_engine *e, bt_pin *pin, bt_page *p)
{
    bt_pin_clear(e, pin);
    if (p->pin_epoch != e->view_epoch) {
        p->pin_epoch = e->view_epoch;
        p->pins = 0;
    }
    p->pins++;
    pin->page = p;
    pin->epoch = e->view_epoch;
}

/* Within one view epoch a pinned page cannot have been freed. */
void bt_pin_clear(bt_engine *e, bt_pin *pin)
{
    if (pin->page && pin->epoch == e->view_epoch)
        pin->page->pins--;
    pin->page = NULL;
}

bool bt_pinned(const bt_engine *e, const bt_page *p)
{
    return p->pins > 0 && p->pin_epoch == e->view_epoch;
}

int bt_txn_check(bt_engine *e, eng_txn *t, md_error *err)
{
    if (e->crashed)
        return md_error_set(err, MD_EIO, MD_CODE_FILE_STREAM_FAILED, "btree: engine crashed");
    if (!t || !e->txn || t != &e->txn->hdr)
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                            "btree: write outside the active transaction");
    e->view_epoch++; /* a write ends every borrowed view (eng.h) */
    int rc = bt_cache_check(e);
    if (rc && err)
        *err = e->last_err;
    return rc;
}

/* ---- undo log ---------------------------------------------------------------- */

static bt_undo *undo_push(bt_engine *e)
{
    bt_txn *t = e->txn;
    if (t->n == t->cap) {
        size_t ncap = t->cap ? t->cap * 2 : 32;
        bt_undo *nv = realloc(t->u, ncap * sizeof *nv);
        if (!nv)
            return NULL;
        t->u = nv;
        t->cap = ncap;
    }
    bt_undo *u = &t->u[t->n++];
    memset(u, 0, sizeof *u);
    return u;
}

/* Put or delete (val == NULL && !has_val && del) keeping count and size. */
int bt_tree_apply(bt_tree *t, const uint8_t *key, uint32_t klen, eng_rid rid,
                  const uint8_t *val, uint32_t vlen, bool has_val, bool del, const bt_ent *old,
                  md_error *err)
{
    int64_t oldsz = old ? (int64_t)(t->kind == BT_RS ? old->vlen : old->klen + 8) : 0;
    int rc = del ? bt_del(t, key, klen, rid, err)
                 : bt_put(t, key, klen, rid, val, vlen, has_val, NULL, err);
    if (rc)
        return rc;
    t->count += (del ? 0 : 1) - (old ? 1 : 0);
    t->data_size += (del ? 0 : (t->kind == BT_RS ? vlen : klen + 8)) - oldsz;
    return 0;
}

/* Put or delete through the undo log. */
int bt_logged(bt_engine *e, bt_tree *t, const uint8_t *key, uint32_t klen, eng_rid rid,
              const uint8_t *val, uint32_t vlen, bool has_val, bool del, md_error *err)
{
    bt_ent *old = NULL;
    int rc = bt_get(t, key, klen, rid, &old, err);
    if (rc && rc != MD_NOTFOUND)
        return rc;
    if (del && !old)
        return MD_NOTFOUND;
    bt_undo *u = undo_push(e);
    if (!u)
        return bt_nomem(err);
    u->t = t;
    u->kind = U_PUT;
    u->rid = rid;
    u->klen = klen;
    u->had_old = old != NULL;
    u->key = malloc(klen + 1);
    if (old && old->has_val) {
        u->olen = old->vlen;
        u->old = malloc(old->vlen + 1);
        if (u->old)
            memcpy(u->old, old->val, old->vlen);
    }
    if (!u->key || (old && old->has_val && !u->old)) {
        free(u->key);
        free(u->old);
        e->txn->n--;
        return bt_nomem(err);
    }
    u->oval = old && old->has_val;
    if (klen)
        memcpy(u->key, key, klen);
    rc = bt_tree_apply(t, key, klen, rid, val, vlen, has_val, del, old, err);
    if (rc) {
        free(u->key);
        free(u->old);
        e->txn->n--;
    } else if (e->log.on) {
        bt_log_op(&e->txn->lg, del ? BT_LOG_DEL : BT_LOG_PUT, t == e->meta ? "" : t->ident, key,
                  klen, rid, val, vlen, has_val);
    }
    return rc;
}

static void undo_one(bt_engine *e, bt_undo *u)
{
    bt_tree *t = u->t;
    bt_ent *cur = NULL;
    switch (u->kind) {
    case U_CREATE: t->live = false, t->unlink_now = true; break;
    case U_DROP: t->live = true; break;
    case U_PUT:
        if (bt_get(t, u->key, u->klen, u->rid, &cur, NULL) != 0)
            cur = NULL;
        if (u->had_old || cur)
            bt_tree_apply(t, u->key, u->klen, u->rid, u->old, u->olen, u->oval, !u->had_old, cur,
                       NULL);
        t->n_inserts -= u->d_ins;
        t->n_updates -= u->d_upd;
        t->bytes_written -= u->d_bytes;
        t->upd_bytes -= u->d_upd ? u->d_bytes : 0;
        break;
    }
}

/* Record counter deltas on the last undo entry (a record-store write). */
void bt_undo_counters(bt_engine *e, int64_t ins, int64_t upd, int64_t bytes)
{
    bt_undo *u = &e->txn->u[e->txn->n - 1];
    u->d_ins = ins, u->d_upd = upd, u->d_bytes = bytes;
}

static void txn_end(bt_engine *e, bool abort)
{
    bt_txn *t = e->txn;
    for (size_t i = t->n; abort && i-- > 0;)
        undo_one(e, &t->u[i]);
    for (size_t i = 0; i < t->n; i++) {
        bt_undo *u = &t->u[i];
        if (!abort && u->kind == U_DROP && !u->t->live)
            bt_unlink_after_ckpt(e, u->t->fname, u->t->ident);
        free(u->key);
        free(u->old);
    }
    free(t->u);
    bt_buf_free(&t->lg);
    free(t);
    e->txn = NULL;
    e->gen++;
    e->view_epoch++;
    sweep(e);
}

/* Remove file `fname` once the next checkpoint is durable, and with it the
 * metadata entry of `ident` ("" to keep the entry: a compacted tree's old
 * file).  Stored as "fname\0ident\0"; on ENOMEM the file just stays. */
int bt_unlink_after_ckpt(bt_engine *e, const char *fname, const char *ident)
{
    size_t fl = strlen(fname), il = strlen(ident);
    char *s = malloc(fl + il + 2);
    char **nv = realloc(e->unlink_after, (e->nunlink + 1) * sizeof *nv);
    if (nv)
        e->unlink_after = nv;
    if (!s || !nv) {
        free(s);
        return MD_ENOMEM;
    }
    memcpy(s, fname, fl + 1);
    memcpy(s + fl + 1, ident, il + 1);
    e->unlink_after[e->nunlink++] = s;
    return 0;
}

static int bt_txn_begin(eng_engine *eh, eng_txn **out)
{
    bt_engine *e = (bt_engine *)eh;
    if (e->txn)
        return MD_EBUSY;
    bt_txn *t = calloc(1, sizeof *t);
    if (!t)
        return MD_ENOMEM;
    t->hdr.engine = eh;
    e->txn = t;
    *out = &t->hdr;
    return 0;
}

static bool any_modified(bt_engine *e)
{
    for (size_t i = 0; i < e->ntrees; i++)
        if (e->trees[i]->modified)
            return true;
    return e->meta->modified || e->nunlink;
}

/* The transaction's log record is appended first (bt_log.c): if that
 * fails, the transaction is aborted; if only writing or syncing it fails,
 * the commit stands in memory and the error is returned.  With the log,
 * `durable` waits for the record's fsync; without it, a commit is durable
 * at the next checkpoint whatever `durable` says.  Commit then takes the
 * periodic or a deferred checkpoint, or one for checkpointLogSizeMB of log. */
static int bt_txn_commit(eng_txn *th, bool durable, md_error *err)
{
    bt_engine *e = (bt_engine *)th->engine;
    md_error cerr;
    bool want = false, appended = false;
    int rc = e->crashed ? 0 : bt_log_commit(e, &e->txn->lg, durable, &appended, &want, err);
    txn_end(e, rc != 0 && !appended);
    if (rc)
        return rc;
    if (e->crashed)
        return 0;
    if (e->ckpt_pending || want ||
        (e->ckpt_interval > 0 && bt_now() - e->last_ckpt >= e->ckpt_interval && any_modified(e))) {
        if (bt_checkpoint(e, &cerr) != 0) {
            e->last_err = cerr;
            fprintf(stderr, "btree: checkpoint failed: %s\n", cerr.message);
        }
    }
    bt_cache_check(e);
    return 0;
}

static void bt_txn_abort(eng_txn *th)
{
    bt_engine *e = (bt_engine *)th->engine;
    txn_end(e, true);
}

/* ---- engine ------------------------------------------------------------------ */

static int lock_dir(bt_engine *e, md_error *err)
{
    char path[8192];
    snprintf(path, sizeof path, "%s/mongod.lock", e->dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return bt_io_error(err, "cannot open lock file", path);
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int busy = errno == EWOULDBLOCK;
        close(fd);
        if (!busy)
            return bt_io_error(err, "cannot lock", path);
        return md_error_set(err, MD_EBUSY, MD_CODE_DBPATH_IN_USE,
                            "Unable to lock file: %s. Is a mongod instance already running?",
                            path);
    }
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n) {
        /* the lock is what matters */
    }
    e->lock_fd = fd;
    return 0;
}

/* Parse the "btree" subdocument of the open options. */
static int parse_opts(bt_engine *e, const bson_t *opts, md_error *err)
{
    bson_iter_t it, sub;
    e->cache_max = (size_t)100 << 20;
    e->ckpt_interval = 60;
    e->default_comp = bt_compressor_find("snappy");
    e->log.on = true;
    e->log.interval_ms = 100;
    e->log.file_max = (uint64_t)100 << 20;
    e->log.ckpt_bytes = (int64_t)2048 << 20;
    if (!opts || !bson_iter_init_find(&it, opts, "btree") || !BSON_ITER_HOLDS_DOCUMENT(&it) ||
        !bson_iter_recurse(&it, &sub))
        return 0;
    int64_t mb = -1, bytes = -1;
    while (bson_iter_next(&sub)) {
        const char *k = bson_iter_key(&sub);
        if (strcmp(k, "cacheSizeMB") == 0)
            mb = bson_iter_as_int64(&sub);
        else if (strcmp(k, "cacheSize") == 0)
            bytes = bson_iter_as_int64(&sub);
        else if (strcmp(k, "checkpointIntervalSecs") == 0)
            e->ckpt_interval = (double)bson_iter_as_int64(&sub);
        else if (strcmp(k, "checkpointIntervalMs") == 0)
            e->ckpt_interval = (double)bson_iter_as_int64(&sub) / 1000;
        else if (bt_log_parse_opts(&e->log, k, &sub, err) != 0)
            return MD_EINVAL;
        else if (strcmp(k, "blockCompressor") == 0) {
            const char *name = BSON_ITER_HOLDS_UTF8(&sub) ? bson_iter_utf8(&sub, NULL) : "";
            if (!(e->default_comp = bt_compressor_find(name)))
                return md_error_set(err, MD_EINVAL, MD_CODE_INVALID_OPTIONS,
                                    "btree: unknown blockCompressor '%s'", name);
        }
    }
    if (mb > 0)
        e->cache_max = (size_t)mb << 20;
    if (bytes > 0)
        e->cache_max = (size_t)bytes;
    return 0;
}

static void engine_free(bt_engine *e)
{
    for (size_t i = 0; i < e->ntrees; i++)
        bt_tree_destroy(e->trees[i]);
    bt_tree_destroy(e->meta);
    for (size_t i = 0; i < e->nunlink; i++)
        free(e->unlink_after[i]);
    free(e->unlink_after);
    free(e->trees);
    bt_log_close(e);
    if (e->lock_fd >= 0) {
        if (ftruncate(e->lock_fd, 0) != 0) {
            /* the lock goes away with the descriptor */
        }
        flock(e->lock_fd, LOCK_UN);
        close(e->lock_fd);
    }
    free(e);
}

static int bt_open(const char *dir, const char *db_name, const bson_t *opts, eng_engine **out,
                   md_error *err)
{
    bt_engine *e = calloc(1, sizeof *e);
    if (!e)
        return bt_nomem(err);
    e->hdr.ops = &bt_engine_ops;
    e->lock_fd = -1;
    e->log.fd = -1;
    pthread_mutex_init(&e->log.mu, NULL);
    pthread_cond_init(&e->log.cv, NULL);
    e->next_file_id = 1;
    snprintf(e->dir, sizeof e->dir, "%s", dir);
    snprintf(e->db_name, sizeof e->db_name, "%s", db_name);
    int rc = parse_opts(e, opts, err);
    if (rc == 0 && mkdir(dir, 0755) != 0 && errno != EEXIST)
        rc = bt_io_error(err, "cannot create directory", dir);
    if (rc == 0)
        rc = lock_dir(e, err);
    if (rc == 0)
        rc = bt_ckpt_open(e, err);
    if (rc == 0)
        rc = bt_log_open(e, err);
    if (rc) {
        engine_free(e);
        return rc;
    }
    e->last_ckpt = bt_now();
    *out = &e->hdr;
    return 0;
}

static void bt_close(eng_engine *eh)
{
    bt_engine *e = (bt_engine *)eh;
    md_error err;
    if (e->txn)
        bt_txn_abort(&e->txn->hdr);
    if (!e->crashed && bt_checkpoint(e, &err) != 0)
        fprintf(stderr, "btree: checkpoint at close failed: %s\n", err.message);
    engine_free(e);
}

static int bt_flush(eng_engine *eh, bool sync, md_error *err)
{
    return bt_checkpoint((bt_engine *)eh, err);
}

static void bt_append_status(eng_engine *eh, bson_t *status)
{
    bt_engine *e = (bt_engine *)eh;
    bson_t sub;
    BSON_APPEND_DOCUMENT_BEGIN(status, "btree", &sub);
    BSON_APPEND_INT64(&sub, "cacheBytes", (int64_t)e->cache_bytes);
    BSON_APPEND_INT64(&sub, "cacheMaxBytes", (int64_t)e->cache_max);
    BSON_APPEND_INT64(&sub, "dirtyBytes", (int64_t)e->dirty_bytes);
    BSON_APPEND_INT64(&sub, "checkpoints", e->checkpoints);
    BSON_APPEND_INT64(&sub, "evictions", e->evictions);
    BSON_APPEND_UTF8(&sub, "blockCompressor", e->default_comp->name);
    bt_log_status(e, &sub);
    bson_append_document_end(status, &sub);
}

static int64_t bt_total_moves(eng_engine *e)
{
    return 0;
}

void bt_test_set_crash(eng_engine *eh, int point)
{
    ((bt_engine *)eh)->crash_point = point;
}

int64_t bt_cache_bytes(eng_engine *eh)
{
    return (int64_t)((bt_engine *)eh)->cache_bytes;
}

int64_t bt_evictions(eng_engine *eh)
{
    return ((bt_engine *)eh)->evictions;
}

int64_t bt_checkpoints(eng_engine *eh)
{
    return ((bt_engine *)eh)->checkpoints;
}

/* ---- catalog ----------------------------------------------------------------- */

static int bt_meta_put(eng_engine *eh, eng_txn *t, const char *key, const bson_t *value,
                       md_error *err)
{
    bt_engine *e = (bt_engine *)eh;
    char k[ENG_IDENT_MAX + 8];
    int rc = bt_txn_check(e, t, err);
    if (rc)
        return rc;
    int n = bt_meta_key(k, sizeof k, "cat:", key);
    return bt_logged(e, e->meta, (const uint8_t *)k, (uint32_t)n, 0, bson_get_data(value),
                     value->len, true, false, err);
}

static int bt_meta_get(eng_engine *eh, const char *key, bson_t *out)
{
    bt_engine *e = (bt_engine *)eh;
    char k[ENG_IDENT_MAX + 8];
    bt_ent *en;
    bson_t view;
    int n = bt_meta_key(k, sizeof k, "cat:", key);
    bt_read_check(e);
    int rc = bt_get(e->meta, (const uint8_t *)k, (uint32_t)n, 0, &en, &e->last_err);
    if (rc)
        return rc;
    if (!bson_init_static(&view, en->val, en->vlen))
        return MD_ECORRUPT;
    bson_copy_to(&view, out);
    return 0;
}

static int bt_meta_del(eng_engine *eh, eng_txn *t, const char *key)
{
    bt_engine *e = (bt_engine *)eh;
    char k[ENG_IDENT_MAX + 8];
    int rc = bt_txn_check(e, t, NULL);
    if (rc)
        return rc;
    int n = bt_meta_key(k, sizeof k, "cat:", key);
    return bt_logged(e, e->meta, (const uint8_t *)k, (uint32_t)n, 0, NULL, 0, false, true,
                     NULL);
}

static int bt_meta_list(eng_engine *eh, eng_meta_fn fn, void *ctx)
{
    bt_engine *e = (bt_engine *)eh;
    bt_pos pos;
    char key[ENG_IDENT_MAX + 8];
    int rc = bt_search(e->meta, (const uint8_t *)"cat:", 4, 0, &pos, NULL, &e->last_err);
    if (rc == 0)
        rc = bt_pos_normalize(e->meta, &pos, &e->last_err);
    for (; rc == 0; rc = bt_pos_next(e->meta, &pos, &e->last_err)) {
        bt_ent *en = bt_pos_ent(&pos);
        bson_t view;
        if (en->klen < 4 || memcmp(en->key, "cat:", 4) != 0 || en->klen - 4 >= sizeof key)
            break;
        memcpy(key, en->key + 4, en->klen - 4);
        key[en->klen - 4] = '\0';
        if (!bson_init_static(&view, en->val, en->vlen))
            return MD_ECORRUPT;
        if (fn(ctx, key, &view))
            break;
    }
    return rc == MD_NOTFOUND ? 0 : rc;
}

/* ---- create, open, drop ------------------------------------------------------- */

int bt_obj_create(bt_engine *e, eng_txn *t, const char *ident, int kind,
                  const char *compressor, md_error *err)
{
    int rc = bt_txn_check(e, t, err);
    if (rc)
        return rc;
    if (bt_find_tree(e, ident))
        return md_error_set(err, MD_EEXISTS, MD_CODE_NAMESPACE_EXISTS, "%s already exists",
                            ident);
    const bt_compressor *c = compressor ? bt_compressor_find(compressor) : e->default_comp;
    if (!c)
        return md_error_set(err, MD_EINVAL, MD_CODE_INVALID_OPTIONS,
                            "btree: unknown block_compressor '%s'", compressor);
    bt_tree *tr;
    bt_undo *u;
    if ((rc = bt_tree_new(e, ident, kind, c, &tr, err)) != 0)
        return rc;
    if (bt_add_tree(e, tr) || !(u = undo_push(e))) {
        if (e->ntrees && e->trees[e->ntrees - 1] == tr)
            e->ntrees--;
        unlink(tr->blk.path);
        bt_tree_destroy(tr);
        return bt_nomem(err);
    }
    u->t = tr;
    u->kind = U_CREATE;
    if (e->log.on)
        bt_log_op_create(&e->txn->lg, ident, kind, c->name);
    return 0;
}

int bt_obj_drop(bt_engine *e, eng_txn *t, const char *ident, int kind)
{
    if (bt_txn_check(e, t, NULL))
        return MD_EINVAL;
    bt_tree *tr = bt_find_tree(e, ident);
    if (!tr || tr->kind != kind)
        return MD_NOTFOUND;
    bt_undo *u = undo_push(e);
    if (!u)
        return MD_ENOMEM;
    u->t = tr;
    u->kind = U_DROP;
    tr->live = false;
    if (e->log.on)
        bt_log_op(&e->txn->lg, BT_LOG_DROP, ident, NULL, 0, 0, NULL, 0, false);
    return 0;
}

int bt_obj_open(bt_engine *e, const char *ident, int kind, bt_handle **out, md_error *err)
{
    bt_tree *tr = bt_find_tree(e, ident);
    if (!tr || tr->kind != kind)
        return md_error_set(err, MD_NOTFOUND, MD_CODE_NAMESPACE_NOT_FOUND, "%s not found",
                            ident);
    bt_handle *h = calloc(1, sizeof *h);
    if (!h)
        return bt_nomem(err);
    h->h.rs.engine = &e->hdr;
    h->t = tr;
    tr->refs++;
    *out = h;
    return 0;
}

void bt_obj_close(bt_handle *h)
{
    bt_engine *e = h->t->eng;
    bt_pin_clear(e, &h->pin);
    h->t->refs--;
    free(h);
    sweep(e);
}

/* Remove every entry through the undo log. */
int bt_obj_truncate(bt_engine *e, bt_tree *t, eng_txn *txn)
{
    int rc = bt_txn_check(e, txn, NULL);
    while (rc == 0) {
        bt_pos pos;
        bt_ent *en;
        if ((rc = bt_search(t, NULL, 0, INT64_MIN, &pos, NULL, &e->last_err)) != 0 ||
            (rc = bt_pos_normalize(t, &pos, &e->last_err)) != 0)
            break;
        en = bt_pos_ent(&pos);
        uint8_t *k = malloc(en->klen + 1);
        if (!k)
            return MD_ENOMEM;
        memcpy(k, en->key, en->klen);
        rc = bt_logged(e, t, k, en->klen, en->rid, NULL, 0, false, true, &e->last_err);
        free(k);
    }
    return rc == MD_NOTFOUND ? 0 : rc;
}

int64_t bt_file_size(bt_tree *t)
{
    struct stat st;
    return fstat(t->blk.fd, &st) == 0 ? (int64_t)st.st_size : (int64_t)t->blk.file_size;
}

/* A btree directory has its turtle file. */
static bool bt_owns_dir(const char *dir)
{
    char path[8192];
    struct stat st;
    snprintf(path, sizeof path, "%s/minidoc.turtle", dir);
    return stat(path, &st) == 0;
}

const eng_ops bt_engine_ops = {
    .name = "btree",
    .has_damages = false,
    .collection_lock = false,
    .owns_dir = bt_owns_dir,
    .open = bt_open,
    .close = bt_close,
    .flush = bt_flush,
    .append_status = bt_append_status,
    .total_moves = bt_total_moves,
    .txn_begin = bt_txn_begin,
    .txn_commit = bt_txn_commit,
    .txn_abort = bt_txn_abort,
    .meta_put = bt_meta_put,
    .meta_get = bt_meta_get,
    .meta_del = bt_meta_del,
    .meta_list = bt_meta_list,
    .rs_create = bt_rs_create,
    .rs_open = bt_rs_open,
    .rs_close = bt_rs_close,
    .rs_drop = bt_rs_drop,
    .rs_insert = bt_rs_insert,
    .rs_get = bt_rs_get,
    .rs_update = bt_rs_update,
    .rs_update_damages = NULL, /* no in-place updates: MD_ENOTSUP */
    .rs_remove = bt_rs_remove,
    .rs_truncate = bt_rs_truncate,
    .rs_set_alloc = bt_rs_set_alloc,
    .rs_stats = bt_rs_stats,
    .rs_append_stats = bt_rs_append_stats,
    .rs_validate = bt_rs_validate,
    .rs_compact = bt_rs_compact,
    .rs_cursor_open = bt_rs_cursor_open,
    .rs_cursor_next = bt_rs_cursor_next,
    .rs_cursor_save = bt_rs_cursor_save,
    .rs_cursor_restore = bt_rs_cursor_restore,
    .rs_cursor_close = bt_rs_cursor_close,
    .ss_create = bt_ss_create,
    .ss_open = bt_ss_open,
    .ss_close = bt_ss_close,
    .ss_drop = bt_ss_drop,
    .ss_insert = bt_ss_insert,
    .ss_remove = bt_ss_remove,
    .ss_truncate = bt_ss_truncate,
    .ss_size = bt_ss_size,
    .ss_entries = bt_ss_entries,
    .ss_validate = bt_ss_validate,
    .ss_cursor_open = bt_ss_cursor_open,
    .ss_cursor_seek = bt_ss_cursor_seek,
    .ss_cursor_next = bt_ss_cursor_next,
    .ss_cursor_prev = bt_ss_cursor_prev,
    .ss_cursor_get = bt_ss_cursor_get,
    .ss_cursor_save = bt_ss_cursor_save,
    .ss_cursor_restore = bt_ss_cursor_restore,
    .ss_cursor_close = bt_ss_cursor_close,
};
