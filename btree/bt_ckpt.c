/*
 * bt_ckpt.c -- checkpoints, the metadata tree and the turtle file.
 *
 * The metadata tree (DIR/minidoc.meta.bt, itself a btree) holds one entry
 * per data file, "file:<ident>" -> that file's checkpoint:
 *
 *   {file, kind, compressor, nextRid, count, dataSize, nInserts, nUpdates,
 *    bytesWritten, pagesInternal, pagesLeaf, pagesOverflow, liveRaw,
 *    liveDisk, root: bin(16), fileSize, avail: bin((off u64, size u64)...)}
 *
 * (page counts and live block bytes feed collStats; an entry without them,
 * from before they were kept, is recounted by a walk at open).  The catalog lives in the same tree
 * under "cat:<key>".  The turtle DIR/minidoc.turtle points at the metadata
 * tree's own checkpoint:
 *
 *   OFFSET SIZE FIELD
 *   0      8    magic "MDTURTL1"
 *   8      4    length of the BSON document
 *   12     4    crc32c of the BSON document
 *   16     ...  BSON {root: bin(16), fileSize, avail: bin, nextFileId, checkpoint,
 *                      logLsn}
 *
 * logLsn (absent: none yet) is the log position the checkpoint covers:
 * every commit before it is in the checkpoint, recovery replays from it,
 * and the log files before its file are removed once the turtle is
 * written (bt_log.c).
 *
 * A checkpoint:
 *
 *   sync the log, take its LSN ──> reconcile dirty data trees ──> fsync ──> metadata entries ──┐
 *   ┌───────────────────────────────────────────────────────────┘
 *   └─> reconcile metadata tree ──> fsync ──> turtle.tmp, fsync,
 *       rename over the turtle, fsync dir ──> discard -> avail,
 *       unlink the files of committed drops, remove log files before the LSN
 *
 * Until the rename the previous turtle names the previous metadata, whose
 * blocks and the data blocks it reaches were not overwritten (invariant 1
 * in bt_int.h), so a crash at any point leaves the previous checkpoint
 * readable.  Open truncates every file to its checkpointed size and removes
 * the .bt files no checkpoint names (remove_orphans).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bt_int.h"

#define TURTLE_MAGIC "MDTURTL1"

double bt_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int bt_meta_key(char *buf, size_t cap, const char *prefix, const char *key)
{
    int n = snprintf(buf, cap, "%s%s", prefix, key);
    return n < 0 || (size_t)n >= cap ? MD_EINVAL : n;
}

/* A file-name-safe form of an ident: [A-Za-z0-9._-] kept, others %XX. */
static void escape_ident(char *out, size_t cap, const char *ident)
{
    size_t j = 0;
    for (const char *p = ident; *p && j + 4 < cap; p++) {
        unsigned char c = (unsigned char)*p;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '.' || c == '_' || c == '-')
            out[j++] = (char)c;
        else
            j += (size_t)snprintf(out + j, cap - j, "%%%02X", c);
    }
    out[j] = '\0';
}

static void tree_limits(bt_tree *t)
{
    switch (t->kind) {
    case BT_RS: t->leaf_max = 32768, t->int_max = 4096, t->ovfl_min = 8192; break;
    case BT_SS: t->leaf_max = 16384, t->int_max = 16384, t->ovfl_min = 4096; break;
    default: t->leaf_max = 16384, t->int_max = 4096, t->ovfl_min = 8192; break;
    }
}

static bt_tree *tree_alloc(bt_engine *e, const char *ident, int kind,
                           const bt_compressor *comp)
{
    bt_tree *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->eng = e;
    t->kind = kind;
    t->live = true;
    t->comp = comp;
    t->next_rid = 1;
    t->blk.fd = -1;
    snprintf(t->ident, sizeof t->ident, "%s", ident);
    tree_limits(t);
    return t;
}

static void tree_path(bt_engine *e, const char *fname, char *path, size_t cap)
{
    snprintf(path, cap, "%s/%s", e->dir, fname);
}

/* Create a new empty file for t's ident (not yet t's): a fresh name
 * "<escaped ident>-<n>.bt" in fname, its path in path. */
int bt_file_new(bt_engine *e, const bt_tree *t, bt_block *b, char *fname, size_t cap,
                md_error *err)
{
    char esc[ENG_IDENT_MAX * 3 + 1], path[8192];
    escape_ident(esc, sizeof esc, t->ident);
    if (t->kind == BT_META)
        snprintf(fname, cap, "minidoc.meta.bt");
    else
        snprintf(fname, cap, "%s-%llu.bt", esc, (unsigned long long)e->next_file_id++);
    tree_path(e, fname, path, sizeof path);
    return bt_block_create(b, path, err);
}

/* Create a new, empty tree with a new file. */
int bt_tree_new(bt_engine *e, const char *ident, int kind, const bt_compressor *comp,
                bt_tree **out, md_error *err)
{
    bt_tree *t = tree_alloc(e, ident, kind, comp);
    if (!t)
        return bt_nomem(err);
    int rc = bt_file_new(e, t, &t->blk, t->fname, sizeof t->fname, err);
    if (rc == 0 && bt_tree_init_empty(t) != 0)
        rc = bt_nomem(err);
    if (rc) {
        bt_tree_destroy(t);
        return rc;
    }
    *out = t;
    return 0;
}

void bt_tree_destroy(bt_tree *t)
{
    if (!t)
        return;
    bt_tree_free_pages(t);
    bt_block_close(&t->blk);
    free(t);
}

/* ---- checkpoint entries -------------------------------------------------------- */

static int64_t get_i64(const bson_t *b, const char *k)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, b, k) ? bson_iter_as_int64(&it) : 0;
}

static bool get_bin(const bson_t *b, const char *k, const uint8_t **p, uint32_t *len)
{
    bson_iter_t it;
    bson_subtype_t st;
    if (!bson_iter_init_find(&it, b, k) || !BSON_ITER_HOLDS_BINARY(&it))
        return false;
    bson_iter_binary(&it, &st, len, p);
    return true;
}

static const char *get_str(const bson_t *b, const char *k)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, b, k) && BSON_ITER_HOLDS_UTF8(&it)
               ? bson_iter_utf8(&it, NULL)
               : NULL;
}

/* The block part of a checkpoint: root, file size, free extents. */
static int ckpt_append_block(bt_tree *t, bson_t *doc)
{
    uint8_t root[16];
    size_t alen;
    uint8_t *avail = bt_block_ckpt_avail(&t->blk, &alen);
    if (!avail)
        return MD_ENOMEM;
    bt_addr_pack(root, &t->root_addr);
    BSON_APPEND_BINARY(doc, "root", BSON_SUBTYPE_BINARY, root, 16);
    BSON_APPEND_INT64(doc, "fileSize", (int64_t)t->blk.file_size);
    BSON_APPEND_BINARY(doc, "avail", BSON_SUBTYPE_BINARY, avail, (uint32_t)alen);
    free(avail);
    return 0;
}

static int ckpt_entry(bt_tree *t, bson_t *doc)
{
    bson_init(doc);
    BSON_APPEND_UTF8(doc, "file", t->fname);
    BSON_APPEND_INT32(doc, "kind", t->kind);
    BSON_APPEND_UTF8(doc, "compressor", t->comp->name);
    BSON_APPEND_INT64(doc, "nextRid", t->next_rid);
    BSON_APPEND_INT64(doc, "count", t->count);
    BSON_APPEND_INT64(doc, "dataSize", t->data_size);
    BSON_APPEND_INT64(doc, "nInserts", t->n_inserts);
    BSON_APPEND_INT64(doc, "nUpdates", t->n_updates);
    BSON_APPEND_INT64(doc, "bytesWritten", t->bytes_written);
    BSON_APPEND_INT64(doc, "pagesInternal", t->pages_int);
    BSON_APPEND_INT64(doc, "pagesLeaf", t->pages_leaf);
    BSON_APPEND_INT64(doc, "pagesOverflow", t->pages_ovfl);
    BSON_APPEND_INT64(doc, "liveRaw", t->live_raw);
    BSON_APPEND_INT64(doc, "liveDisk", t->live_disk);
    return ckpt_append_block(t, doc);
}

/* Open a file at the checkpoint described by `doc`. */
static int ckpt_load_block(bt_engine *e, bt_tree *t, const bson_t *doc, md_error *err)
{
    const uint8_t *root, *avail;
    uint32_t rlen, alen;
    char path[8192];
    if (!get_bin(doc, "root", &root, &rlen) || rlen != 16 ||
        !get_bin(doc, "avail", &avail, &alen))
        return ENG_CORRUPT(err, "btree: bad checkpoint entry for %s", t->ident);
    bt_addr_unpack(root, &t->root_addr);
    tree_path(e, t->fname, path, sizeof path);
    return bt_block_open(&t->blk, path, (uint64_t)get_i64(doc, "fileSize"), avail, alen, err);
}

static int tree_load(bt_engine *e, const char *ident, const bson_t *doc, md_error *err)
{
    const char *fname = get_str(doc, "file"), *cname = get_str(doc, "compressor");
    const bt_compressor *comp = cname ? bt_compressor_find(cname) : NULL;
    if (!fname || !comp)
        return ENG_CORRUPT(err, "btree: bad checkpoint entry for %s", ident);
    bt_tree *t = tree_alloc(e, ident, (int)get_i64(doc, "kind"), comp);
    if (!t)
        return bt_nomem(err);
    snprintf(t->fname, sizeof t->fname, "%s", fname);
    tree_limits(t);
    t->next_rid = get_i64(doc, "nextRid");
    t->count = get_i64(doc, "count");
    t->data_size = get_i64(doc, "dataSize");
    t->n_inserts = get_i64(doc, "nInserts");
    t->n_updates = get_i64(doc, "nUpdates");
    t->bytes_written = get_i64(doc, "bytesWritten");
    t->pages_int = get_i64(doc, "pagesInternal");
    t->pages_leaf = get_i64(doc, "pagesLeaf");
    t->pages_ovfl = get_i64(doc, "pagesOverflow");
    t->live_raw = get_i64(doc, "liveRaw");
    t->live_disk = get_i64(doc, "liveDisk");
    int rc = ckpt_load_block(e, t, doc, err);
    bson_iter_t it;
    if (rc == 0 && !bson_iter_init_find(&it, doc, "pagesLeaf"))
        rc = bt_tree_recount(t, err); /* written before the entry had them */
    if (rc == 0 && e->ntrees == e->captrees) {
        size_t ncap = e->captrees ? e->captrees * 2 : 16;
        bt_tree **nv = realloc(e->trees, ncap * sizeof *nv);
        if (!nv)
            rc = bt_nomem(err);
        else
            e->trees = nv, e->captrees = ncap;
    }
    if (rc) {
        bt_tree_destroy(t);
        return rc;
    }
    e->trees[e->ntrees++] = t;
    return 0;
}

/* ---- turtle ------------------------------------------------------------------- */

static int sync_dir(bt_engine *e, md_error *err)
{
    int fd = open(e->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) {
        int rc = bt_io_error(err, "cannot sync directory", e->dir);
        if (fd >= 0)
            close(fd);
        return rc;
    }
    close(fd);
    return 0;
}

static int turtle_write(bt_engine *e, uint64_t lsn, md_error *err)
{
    char path[8192], tmp[8300];
    bson_t doc = BSON_INITIALIZER;
    int rc = ckpt_append_block(e->meta, &doc);
    if (rc) {
        bson_destroy(&doc);
        return bt_nomem(err);
    }
    BSON_APPEND_INT64(&doc, "nextFileId", (int64_t)e->next_file_id);
    BSON_APPEND_INT64(&doc, "checkpoint", e->checkpoints + 1);
    if (lsn)
        BSON_APPEND_INT64(&doc, "logLsn", (int64_t)lsn);
    uint8_t hdr[16];
    uint32_t len = doc.len, ck = eng_crc32c(0, bson_get_data(&doc), doc.len);
    memcpy(hdr, TURTLE_MAGIC, 8);
    memcpy(hdr + 8, &len, 4);
    memcpy(hdr + 12, &ck, 4);
    snprintf(path, sizeof path, "%s/minidoc.turtle", e->dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, hdr, 16) != 16 ||
        write(fd, bson_get_data(&doc), len) != (ssize_t)len || fsync(fd) != 0) {
        rc = bt_io_error(err, "cannot write", tmp);
    } else if (rename(tmp, path) != 0) {
        rc = bt_io_error(err, "cannot rename", tmp);
    }
    if (fd >= 0)
        close(fd);
    bson_destroy(&doc);
    return rc ? rc : sync_dir(e, err);
}

/* Read and check the turtle; *out is a new document the caller destroys. */
static int turtle_read(bt_engine *e, const char *path, bson_t **out, md_error *err)
{
    uint8_t hdr[16];
    uint32_t len, ck;
    uint8_t *buf = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return bt_io_error(err, "cannot open", path);
    *out = NULL;
    const char *why = "bad magic at offset 0";
    if (read(fd, hdr, 16) == 16 && memcmp(hdr, TURTLE_MAGIC, 8) == 0) {
        memcpy(&len, hdr + 8, 4);
        memcpy(&ck, hdr + 12, 4);
        why = "bad length at offset 8";
        if (len >= 5 && len <= (64u << 20) && (buf = malloc(len))) {
            why = "short: the document at offset 16 is cut off";
            if (read(fd, buf, len) == (ssize_t)len) {
                why = "the document at offset 16 fails its checksum (offset 12)";
                if (eng_crc32c(0, buf, len) == ck) {
                    why = "the document at offset 16 is not BSON";
                    *out = bson_new_from_data(buf, len);
                }
            }
        }
    }
    free(buf);
    close(fd);
    return *out ? 0 : ENG_CORRUPT(err, "btree: %s is damaged: %s", path, why);
}

/* ---- open -------------------------------------------------------------------- */

/* Load every "file:" entry of the metadata tree. */
static int load_trees(bt_engine *e, md_error *err)
{
    bt_pos pos;
    int rc = bt_search(e->meta, (const uint8_t *)"file:", 5, 0, &pos, NULL, err);
    if (rc == 0)
        rc = bt_pos_normalize(e->meta, &pos, err);
    for (; rc == 0; rc = bt_pos_next(e->meta, &pos, err)) {
        bt_ent *en = bt_pos_ent(&pos);
        bson_t doc;
        char ident[ENG_IDENT_MAX];
        if (en->klen < 5 || memcmp(en->key, "file:", 5) != 0)
            break;
        if (en->klen - 5 >= ENG_IDENT_MAX || !bson_init_static(&doc, en->val, en->vlen))
            return ENG_CORRUPT(err, "btree: bad metadata entry");
        memcpy(ident, en->key + 5, en->klen - 5);
        ident[en->klen - 5] = '\0';
        if ((rc = tree_load(e, ident, &doc, err)) != 0)
            return rc;
    }
    return rc == MD_NOTFOUND ? 0 : rc;
}

/* Remove the data files no checkpoint names: those of a create, a
 * compaction or a drop that a crash cut off before (or after) its
 * checkpoint, as MongoDB drops idents its catalog does not know at startup. */
static void remove_orphans(bt_engine *e)
{
    DIR *d = opendir(e->dir);
    struct dirent *de;
    if (!d)
        return;
    while ((de = readdir(d)) != NULL) {
        size_t n = strlen(de->d_name);
        bool known = strcmp(de->d_name, e->meta->fname) == 0;
        if (n < 4 || strcmp(de->d_name + n - 3, ".bt") != 0)
            continue;
        for (size_t i = 0; !known && i < e->ntrees; i++)
            known = strcmp(de->d_name, e->trees[i]->fname) == 0;
        if (!known) {
            char path[8192];
            tree_path(e, de->d_name, path, sizeof path);
            unlink(path);
        }
    }
    closedir(d);
}

int bt_ckpt_open(bt_engine *e, md_error *err)
{
    char path[8192];
    struct stat st;
    snprintf(path, sizeof path, "%s/minidoc.turtle", e->dir);
    if (stat(path, &st) != 0) {
        int rc = bt_tree_new(e, "minidoc.meta", BT_META, bt_compressor_find("none"), &e->meta,
                             err);
        return rc ? rc : bt_checkpoint(e, err);
    }
    bson_t *turtle;
    int rc = turtle_read(e, path, &turtle, err);
    if (rc)
        return rc;
    e->meta = tree_alloc(e, "minidoc.meta", BT_META, bt_compressor_find("none"));
    if (!e->meta) {
        bson_destroy(turtle);
        return bt_nomem(err);
    }
    snprintf(e->meta->fname, sizeof e->meta->fname, "minidoc.meta.bt");
    e->next_file_id = (uint64_t)get_i64(turtle, "nextFileId");
    e->ckpt_lsn = (uint64_t)get_i64(turtle, "logLsn");
    rc = ckpt_load_block(e, e->meta, turtle, err);
    bson_destroy(turtle);
    if (rc == 0 && (rc = load_trees(e, err)) == 0)
        remove_orphans(e);
    return rc;
}

/* ---- checkpoint ---------------------------------------------------------------- */

static int meta_put_doc(bt_engine *e, const char *prefix, const char *ident, const bson_t *doc,
                        md_error *err)
{
    char key[ENG_IDENT_MAX + 16];
    int n = bt_meta_key(key, sizeof key, prefix, ident);
    if (n < 0)
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE, "btree: ident too long");
    return bt_put(e->meta, (const uint8_t *)key, (uint32_t)n, 0, bson_get_data(doc), doc->len,
                  true, NULL, err);
}

/* Write the dirty data trees and their metadata entries. */
static int ckpt_data(bt_engine *e, md_error *err)
{
    int rc = 0;
    for (size_t i = 0; i < e->nunlink; i++) {
        char key[ENG_IDENT_MAX + 16];
        const char *ident = e->unlink_after[i] + strlen(e->unlink_after[i]) + 1;
        int n = bt_meta_key(key, sizeof key, "file:", ident);
        if (n > 0 && ident[0]) /* "": a compacted tree's old file */
            bt_del(e->meta, (const uint8_t *)key, (uint32_t)n, 0, NULL, NULL);
    }
    for (size_t i = 0; i < e->ntrees && rc == 0; i++) {
        bt_tree *t = e->trees[i];
        bson_t doc;
        if (!t->live || !t->modified)
            continue;
        if ((rc = bt_reconcile_tree(t, err)) != 0 || (rc = bt_block_sync(&t->blk, err)) != 0)
            break;
        if (ckpt_entry(t, &doc) != 0)
            rc = bt_nomem(err);
        else
            rc = meta_put_doc(e, "file:", t->ident, &doc, err);
        bson_destroy(&doc);
    }
    return rc;
}

static void ckpt_finish(bt_engine *e)
{
    for (size_t i = 0; i < e->ntrees; i++) {
        if (!e->trees[i]->live)
            continue;
        bt_block_ckpt_done(&e->trees[i]->blk);
        e->trees[i]->modified = false;
    }
    bt_block_ckpt_done(&e->meta->blk);
    e->meta->modified = false;
    for (size_t i = 0; i < e->nunlink; i++) {
        char path[8192];
        tree_path(e, e->unlink_after[i], path, sizeof path);
        unlink(path);
        free(e->unlink_after[i]);
    }
    e->nunlink = 0;
    e->checkpoints++;
    e->last_ckpt = bt_now();
}

static int crash_at(bt_engine *e, int point)
{
    if (e->crash_point != point)
        return 0;
    e->crashed = true;
    return MD_EIO;
}

int bt_checkpoint(bt_engine *e, md_error *err)
{
    int rc;
    uint64_t lsn;
    if (e->crashed)
        return md_error_set(err, MD_EIO, MD_CODE_FILE_STREAM_FAILED, "btree: engine crashed");
    if (e->txn) {
        e->ckpt_pending = true; /* taken when the transaction ends */
        return 0;
    }
    e->ckpt_pending = false;
    /* every commit up to now into the pages, before the log position that
     * recovery will replay from is taken */
    if ((rc = bt_fold_all(e, err)) != 0 || (rc = bt_log_ckpt_begin(e, &lsn, err)) != 0)
        return rc;
    bt_compact_pending(e);
    if ((rc = ckpt_data(e, err)) != 0)
        return rc;
    if (crash_at(e, BT_CRASH_BEFORE_META))
        return md_error_set(err, MD_EIO, MD_CODE_FILE_STREAM_FAILED, "btree: test crash");
    if ((rc = bt_reconcile_tree(e->meta, err)) != 0 ||
        (rc = bt_block_sync(&e->meta->blk, err)) != 0)
        return rc;
    if (crash_at(e, BT_CRASH_BEFORE_TURTLE))
        return md_error_set(err, MD_EIO, MD_CODE_FILE_STREAM_FAILED, "btree: test crash");
    if ((rc = turtle_write(e, lsn, err)) != 0)
        return rc;
    ckpt_finish(e);
    e->ckpt_lsn = lsn;
    bt_log_ckpt_done(e, lsn);
    return 0;
}
