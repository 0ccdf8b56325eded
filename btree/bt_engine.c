/*
 * bt_engine.c -- the btree engine's operations table (eng.h): engine
 * open/close, the catalog, creates and drops, checkpoints at commit.
 *
 * Transactions, update chains and the latch are in bt_txn.c: every
 * ordinary write (record, index entry, catalog entry) becomes a version in
 * its tree's overlay and reaches the pages only when its transaction
 * commits.  Creates and drops are the exception: they flip a tree's `live`
 * flag at once and are undone by abort (bt_undo); eng.h runs them only
 * while no other transaction is open, and the checkpoint waits for their
 * transaction (e->txn).  With the write-ahead log on, every write also
 * appends a logical operation to the transaction's log buffer, which commit
 * hands to bt_log.c as one record.  Checkpoints (bt_ckpt.c) are taken every
 * checkpointIntervalSecs and every checkpointLogSizeMB of log (both checked
 * at commit: bt_commit_due under the shared latch, then bt_commit_checkpoint
 * under the exclusive one), by eng_flush and at close; without
 * the log, a commit is durable only at the next one.
 *
 * The cache is checked at commit and at the start of every read: above its
 * size, pages are evicted down to 80% of it (bt_evict) under the exclusive
 * latch.  Reads return copies (bt_store.c), so eviction ends no view.
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
#include "eng_log.h"

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
    if (!t->ov.mu_ok)
        bt_ov_init(t);
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

/* Destroy dropped trees nothing can reach (no handle, no create or drop
 * in flight).  Under the exclusive latch. */
void bt_sweep_trees(bt_engine *e)
{
    size_t j = 0;
    if (e->txn)
        return;
    for (size_t i = 0; i < e->ntrees; i++) {
        bt_tree *t = e->trees[i];
        if (!t->live && t->refs == 0) {
            if (t->unlink_now)
                unlink(t->blk.path);
            bt_ov_free(e, t);
            bt_tree_destroy(t);
        } else {
            e->trees[j++] = t;
        }
    }
    e->ntrees = j;
}

/* Evict down to 80% of the cache when it is over its size.  Under the
 * exclusive latch (or single-threaded, in recovery). */
int bt_cache_check(bt_engine *e)
{
    if (__atomic_load_n(&e->cache_bytes, __ATOMIC_RELAXED) <= e->cache_max)
        return 0;
    return bt_evict(e, e->cache_max / 10 * 8);
}

/* Reads evict too, taking the latch exclusively for it; called where a
 * read starts, before its shared latch.  One reader evicts at a time: the
 * others read on rather than queue for the latch. */
void bt_read_check(bt_engine *e)
{
    bt_fold_idle(e);
    if (__atomic_load_n(&e->cache_bytes, __ATOMIC_RELAXED) <= e->cache_max ||
        __atomic_exchange_n(&e->evicting, true, __ATOMIC_ACQUIRE))
        return;
    bt_latch_excl(e);
    bt_cache_check(e);
    bt_unlatch(e);
    __atomic_store_n(&e->evicting, false, __ATOMIC_RELEASE);
}

int bt_txn_check(bt_engine *e, eng_txn *t, md_error *err)
{
    if (e->crashed)
        return md_error_set(err, MD_EIO, MD_CODE_FILE_STREAM_FAILED, "btree: engine crashed");
    if (__atomic_load_n(&e->ckpt_failed, __ATOMIC_ACQUIRE))
        return md_error_set(err, MD_EIO, MD_CODE_FILE_STREAM_FAILED,
                            "btree: a checkpoint failed (%s); reopen the database",
                            e->last_err.message);
    if (!t || t->engine != &e->hdr)
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                            "btree: write outside a transaction of this engine");
    return 0;
}

/* Put or delete (del) keeping count and size, with one search; deleting
 * an absent key does nothing. */
int bt_tree_apply(bt_tree *t, const uint8_t *key, uint32_t klen, eng_rid rid,
                  const uint8_t *val, uint32_t vlen, bool has_val, bool del, md_error *err)
{
    int64_t old = -1;
    int rc = del ? bt_del(t, key, klen, rid, &old, err)
                 : bt_put(t, key, klen, rid, val, vlen, has_val, &old, err);
    if (rc == MD_NOTFOUND && del)
        return 0;
    if (rc)
        return rc;
    int64_t oldsz = old < 0 ? 0 : t->kind == BT_RS ? old : (int64_t)klen + 8;
    t->count += (del ? 0 : 1) - (old >= 0 ? 1 : 0);
    t->data_size += (del ? 0 : (t->kind == BT_RS ? vlen : klen + 8)) - oldsz;
    return 0;
}

static bt_undo *undo_push(bt_txn *x)
{
    if (x->n == x->cap) {
        size_t ncap = x->cap ? x->cap * 2 : 8;
        bt_undo *nv = realloc(x->u, ncap * sizeof *nv);
        if (!nv)
            return NULL;
        x->u = nv;
        x->cap = ncap;
    }
    bt_undo *u = &x->u[x->n++];
    memset(u, 0, sizeof *u);
    return u;
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

static bool any_modified(bt_engine *e)
{
    for (size_t i = 0; i < e->ntrees; i++)
        if (e->trees[i]->modified)
            return true;
    return e->meta->modified || e->nunlink;
}

/* After a commit, under the shared latch: is bt_commit_checkpoint's work
 * due (a checkpoint, or eviction)?  Its own test, less any_modified (the
 * commit modified a tree). */
bool bt_commit_due(bt_engine *e, bool want)
{
    return e->ckpt_pending || want ||
           (e->ckpt_interval > 0 && bt_now() - e->last_ckpt >= e->ckpt_interval) ||
           __atomic_load_n(&e->cache_bytes, __ATOMIC_RELAXED) > e->cache_max;
}

/* At commit, under the exclusive latch: the periodic or a deferred
 * checkpoint, or one for checkpointLogSizeMB of log (want); then the
 * cache. */
/* Under the exclusive latch.  An I/O failure (not a lack of memory)
 * stops writes: see bt_engine.ckpt_failed. */
void bt_checkpoint_failed(bt_engine *e, int rc, const md_error *err)
{
    if (rc != MD_EIO && rc != MD_ENOSPC)
        return;
    if (!__atomic_load_n(&e->ckpt_failed, __ATOMIC_RELAXED))
        e->last_err = *err;
    __atomic_store_n(&e->ckpt_failed, true, __ATOMIC_RELEASE);
}

void bt_commit_checkpoint(bt_engine *e, bool want)
{
    md_error cerr;
    if (e->ckpt_pending || want ||
        (e->ckpt_interval > 0 && bt_now() - e->last_ckpt >= e->ckpt_interval && any_modified(e))) {
        int rc = bt_checkpoint(e, &cerr);
        if (rc != 0) {
            bt_checkpoint_failed(e, rc, &cerr);
            eng_log("btree: checkpoint failed: %s", cerr.message);
        }
    }
    bt_cache_check(e);
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

/* WiredTiger's default cache in MongoDB 3.4: half of (RAM - 1 GB), at
 * least 256 MB.  A bound, not an allocation: the cache grows to it. */
static size_t default_cache_max(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    size_t floor_ = (size_t)256 << 20, ram = pages > 0 && psize > 0 ? (size_t)pages * psize : 0;
    size_t half = ram > ((size_t)1 << 30) ? (ram - ((size_t)1 << 30)) / 2 : 0;
    return half > floor_ ? half : floor_;
}

/* Parse the "btree" subdocument of the open options. */
static int parse_opts(bt_engine *e, const bson_t *opts, md_error *err)
{
    bson_iter_t it, sub;
    e->cache_max = default_cache_max();
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
    for (size_t i = 0; i < e->ntrees; i++) {
        bt_ov_free(e, e->trees[i]);
        bt_tree_destroy(e->trees[i]);
    }
    if (e->meta)
        bt_ov_free(e, e->meta);
    bt_tree_destroy(e->meta);
    bt_txn_spares_free(e);
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
    bt_conc_cleanup(e);
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
    pthread_mutex_init(&e->log.wmu, NULL);
    pthread_mutex_init(&e->log.mu, NULL);
    pthread_cond_init(&e->log.cv, NULL);
    bt_conc_init(e);
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
    for (size_t i = 0; rc == 0 && i <= e->ntrees; i++)
        bt_ov_init(i < e->ntrees ? e->trees[i] : e->meta);
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
    while (e->open) /* eng.h: only the closing thread's, if any */
        bt_txn_abort(&e->open->hdr);
    if (!e->crashed && bt_checkpoint(e, &err) != 0)
        eng_log("btree: checkpoint at close failed: %s", err.message);
    engine_free(e);
}

static int bt_flush(eng_engine *eh, bool sync, md_error *err)
{
    bt_engine *e = (bt_engine *)eh;
    bt_latch_excl(e);
    md_error local;
    int rc = bt_checkpoint(e, err ? err : &local);
    if (rc)
        bt_checkpoint_failed(e, rc, err ? err : &local);
    bt_unlatch(e);
    return rc;
}

static void bt_append_status(eng_engine *eh, bson_t *status)
{
    bt_engine *e = (bt_engine *)eh;
    bson_t sub;
    bt_latch_shared(e);
    BSON_APPEND_DOCUMENT_BEGIN(status, "btree", &sub);
    BSON_APPEND_INT64(&sub, "cacheBytes",
                      (int64_t)__atomic_load_n(&e->cache_bytes, __ATOMIC_RELAXED));
    BSON_APPEND_INT64(&sub, "cacheMaxBytes", (int64_t)e->cache_max);
    BSON_APPEND_INT64(&sub, "dirtyBytes", (int64_t)e->dirty_bytes);
    BSON_APPEND_INT64(&sub, "checkpoints", e->checkpoints);
    BSON_APPEND_INT64(&sub, "evictions", e->evictions);
    BSON_APPEND_UTF8(&sub, "blockCompressor", e->default_comp->name);
    bt_log_status(e, &sub);
    bt_txn_status(e, &sub);
    bson_append_document_end(status, &sub);
    bt_unlatch(e);
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
    return (int64_t)__atomic_load_n(&((bt_engine *)eh)->cache_bytes, __ATOMIC_RELAXED);
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

/* Catalog entries are ordinary versioned writes (query/ sets multikey
 * flags inside concurrent transactions). */
static int bt_meta_put(eng_engine *eh, eng_txn *t, const char *key, const bson_t *value,
                       md_error *err)
{
    bt_engine *e = (bt_engine *)eh;
    char k[ENG_IDENT_MAX + 8];
    int rc = bt_txn_check(e, t, err);
    if (rc)
        return rc;
    int n = bt_meta_key(k, sizeof k, "cat:", key);
    return bt_write(e, (bt_txn *)t, e->meta, (const uint8_t *)k, (uint32_t)n, 0,
                    bson_get_data(value), value->len, BT_W_PUT, NULL, err);
}

static int bt_meta_get(eng_engine *eh, const char *key, bson_t *out)
{
    bt_engine *e = (bt_engine *)eh;
    char k[ENG_IDENT_MAX + 8];
    bt_buf val = {0};
    bson_t view;
    md_error err;
    int n = bt_meta_key(k, sizeof k, "cat:", key);
    bt_read_check(e);
    bt_latch_shared(e);
    int rc = bt_lookup(e, bt_txn_mine(e), e->meta, (const uint8_t *)k, (uint32_t)n, 0, &val, NULL,
                       &err);
    bt_unlatch(e);
    if (rc == 0 && !bson_init_static(&view, val.p, val.n))
        rc = MD_ECORRUPT;
    if (rc == 0)
        bson_copy_to(&view, out);
    bt_buf_free(&val);
    return rc;
}

static int bt_meta_del(eng_engine *eh, eng_txn *t, const char *key)
{
    bt_engine *e = (bt_engine *)eh;
    char k[ENG_IDENT_MAX + 8];
    md_error err;
    int rc = bt_txn_check(e, t, NULL);
    if (rc)
        return rc;
    int n = bt_meta_key(k, sizeof k, "cat:", key);
    return bt_write(e, (bt_txn *)t, e->meta, (const uint8_t *)k, (uint32_t)n, 0, NULL, 0,
                    BT_W_REMOVE, NULL, &err);
}

/* Each entry is read under the latch and handed to fn outside it (fn may
 * call the engine). */
static int bt_meta_list(eng_engine *eh, eng_meta_fn fn, void *ctx)
{
    bt_engine *e = (bt_engine *)eh;
    bt_cur c = {0};
    md_error err;
    char key[ENG_IDENT_MAX + 8];
    int rc;
    for (bool first = true;; first = false) {
        bson_t view;
        bt_read_check(e);
        bt_latch_shared(e);
        rc = first ? bt_cur_find(e, bt_txn_mine(e), e->meta, &c, (const uint8_t *)"cat:", 4, 0,
                                 true, true, false, &err)
                   : bt_cur_find(e, bt_txn_mine(e), e->meta, &c, c.key.p, (uint32_t)c.key.n,
                                 c.rid, true, false, false, &err);
        bt_unlatch(e);
        if (rc)
            break;
        if (c.key.n < 4 || memcmp(c.key.p, "cat:", 4) != 0 || c.key.n - 4 >= sizeof key)
            break;
        memcpy(key, c.key.p + 4, c.key.n - 4);
        key[c.key.n - 4] = '\0';
        if (!bson_init_static(&view, c.val.p, c.val.n)) {
            rc = MD_ECORRUPT;
            break;
        }
        if (fn(ctx, key, &view))
            break;
    }
    bt_cur_cleanup(&c);
    return rc == MD_NOTFOUND ? 0 : rc;
}

/* ---- create, open, drop ------------------------------------------------------- */

/* Creates and drops change the tree list under the exclusive latch; the
 * checkpoint waits for their transaction (e->txn). */
int bt_obj_create(bt_engine *e, eng_txn *t, const char *ident, int kind,
                  const char *compressor, md_error *err)
{
    bt_txn *x = (bt_txn *)t;
    int rc = bt_txn_check(e, t, err);
    if (rc)
        return rc;
    const bt_compressor *c = compressor ? bt_compressor_find(compressor) : e->default_comp;
    if (!c)
        return md_error_set(err, MD_EINVAL, MD_CODE_INVALID_OPTIONS,
                            "btree: unknown block_compressor '%s'", compressor);
    bt_tree *tr;
    bt_undo *u;
    bt_latch_excl(e);
    if (bt_find_tree(e, ident)) {
        bt_unlatch(e);
        return md_error_set(err, MD_EEXISTS, MD_CODE_NAMESPACE_EXISTS, "%s already exists",
                            ident);
    }
    if ((rc = bt_tree_new(e, ident, kind, c, &tr, err)) != 0) {
        bt_unlatch(e);
        return rc;
    }
    if (bt_add_tree(e, tr) || !(u = undo_push(x))) {
        if (e->ntrees && e->trees[e->ntrees - 1] == tr)
            e->ntrees--;
        unlink(tr->blk.path);
        bt_tree_destroy(tr);
        bt_unlatch(e);
        return bt_nomem(err);
    }
    u->t = tr;
    u->kind = U_CREATE;
    e->txn = x;
    bt_unlatch(e);
    if (e->log.on)
        bt_log_op_create(&x->lg, ident, kind, c->name);
    return 0;
}

int bt_obj_drop(bt_engine *e, eng_txn *t, const char *ident, int kind)
{
    bt_txn *x = (bt_txn *)t;
    bt_undo *u;
    if (bt_txn_check(e, t, NULL))
        return MD_EINVAL;
    bt_latch_excl(e);
    bt_tree *tr = bt_find_tree(e, ident);
    if (!tr || tr->kind != kind || !(u = undo_push(x))) {
        bt_unlatch(e);
        return !tr || tr->kind != kind ? MD_NOTFOUND : MD_ENOMEM;
    }
    u->t = tr;
    u->kind = U_DROP;
    tr->live = false;
    e->txn = x;
    bt_unlatch(e);
    if (e->log.on)
        bt_log_op(&x->lg, BT_LOG_DROP, ident, NULL, 0, 0, NULL, 0, false);
    return 0;
}

static uint64_t handle_ids; /* bt_handle.hid */

int bt_obj_open(bt_engine *e, const char *ident, int kind, bt_handle **out, md_error *err)
{
    bt_latch_excl(e);
    bt_tree *tr = bt_find_tree(e, ident);
    bt_handle *h = tr && tr->kind == kind ? calloc(1, sizeof *h) : NULL;
    if (h) {
        h->h.rs.engine = &e->hdr;
        h->t = tr;
        h->hid = __atomic_add_fetch(&handle_ids, 1, __ATOMIC_RELAXED);
        pthread_mutex_init(&h->mu, NULL);
        tr->refs++;
    }
    bt_unlatch(e);
    if (!tr || tr->kind != kind)
        return md_error_set(err, MD_NOTFOUND, MD_CODE_NAMESPACE_NOT_FOUND, "%s not found",
                            ident);
    if (!h)
        return bt_nomem(err);
    *out = h;
    return 0;
}

void bt_obj_close(bt_handle *h)
{
    bt_engine *e = h->t->eng;
    bt_latch_excl(e);
    h->t->refs--;
    bt_sweep_trees(e);
    bt_unlatch(e);
    for (bt_view *v = h->views, *n; v; v = n) {
        n = v->next;
        bt_buf_free(&v->b);
        free(v);
    }
    pthread_mutex_destroy(&h->mu);
    free(h);
}

/* Remove every entry the transaction sees, each as an ordinary write. */
int bt_obj_truncate(bt_engine *e, bt_tree *t, eng_txn *txn)
{
    bt_cur c = {0};
    md_error err;
    int rc = bt_txn_check(e, txn, NULL);
    while (rc == 0) {
        bt_latch_shared(e);
        rc = bt_cur_find(e, (bt_txn *)txn, t, &c, c.key.p, (uint32_t)c.key.n, c.rid, true,
                         false, !c.have, &err);
        bt_unlatch(e);
        if (rc == 0)
            rc = bt_write(e, (bt_txn *)txn, t, c.key.p, (uint32_t)c.key.n, c.rid, NULL, 0,
                          BT_W_REMOVE, NULL, &err);
    }
    bt_cur_cleanup(&c);
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
    .concurrent = true,
    .checked_reads = true, /* every block carries a crc32c */
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
    .ss_find = bt_ss_find,
    .ss_cursor_open = bt_ss_cursor_open,
    .ss_cursor_seek = bt_ss_cursor_seek,
    .ss_cursor_next = bt_ss_cursor_next,
    .ss_cursor_prev = bt_ss_cursor_prev,
    .ss_cursor_get = bt_ss_cursor_get,
    .ss_cursor_save = bt_ss_cursor_save,
    .ss_cursor_restore = bt_ss_cursor_restore,
    .ss_cursor_close = bt_ss_cursor_close,
};
