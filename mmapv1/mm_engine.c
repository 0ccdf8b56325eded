/*
 * mm_engine.c -- the mmapv1 engine object: open (options, lock, files,
 * checks, catalog), close, flush, status, and the operations table that
 * the registry knows as "mmapv1".
 *
 * Open order matters: the directory lock is taken before anything else is
 * read or created, so a second opener gets MD_EBUSY (DBPathInUse, 98) and
 * touches nothing.  Then journal replay, the .ns file, the data files
 * (headers checked), every namespace slot's pointers, the journal and its
 * flush thread, and the catalog namespace "<db>.system.namespaces",
 * created on first open.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "mm_int.h"

typedef struct mm_opts {
    bool small_files, debug_remap, create, journal, check_views;
    int64_t first_file_size, ns_size;
    int64_t interval_ms, syncdelay, jfile_size;
    int64_t capped_extent_max;
    int64_t remap_bytes;
} mm_opts;

static int opt_int64(const bson_iter_t *it, const char *name, int64_t *out, md_error *err)
{
    if (!BSON_ITER_HOLDS_NUMBER(it))
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE, "mmapv1.%s must be a number",
                            name);
    double dv = bson_iter_as_double(it);
    *out = bson_iter_as_int64(it);
    if ((double)*out != dv)
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                            "mmapv1.%s must be an integer", name);
    return 0;
}

static int parse_mmapv1(bson_iter_t *sub, mm_opts *o, md_error *err)
{
    int rc = 0;
    while (rc == 0 && bson_iter_next(sub)) {
        const char *k = bson_iter_key(sub);
        if (strcmp(k, "firstFileSize") == 0)
            rc = opt_int64(sub, k, &o->first_file_size, err);
        else if (strcmp(k, "nsSize") == 0)
            rc = opt_int64(sub, k, &o->ns_size, err);
        else if (strcmp(k, "debugRemapOnGrow") == 0)
            o->debug_remap = bson_iter_as_bool(sub);
        else if (strcmp(k, "journal") == 0)
            o->journal = bson_iter_as_bool(sub);
        else if (strcmp(k, "journalCommitInterval") == 0)
            rc = opt_int64(sub, k, &o->interval_ms, err);
        else if (strcmp(k, "syncdelay") == 0)
            rc = opt_int64(sub, k, &o->syncdelay, err);
        else if (strcmp(k, "journalFileSize") == 0)
            rc = opt_int64(sub, k, &o->jfile_size, err);
        else if (strcmp(k, "debugCheckViews") == 0)
            o->check_views = bson_iter_as_bool(sub);
        else if (strcmp(k, "debugCappedExtentSize") == 0)
            rc = opt_int64(sub, k, &o->capped_extent_max, err);
        else if (strcmp(k, "debugRemapPrivateViewBytes") == 0)
            rc = opt_int64(sub, k, &o->remap_bytes, err);
    }
    if (rc == 0 && o->capped_extent_max != 0 &&
        (o->capped_extent_max < MM_MIN_EXTENT || o->capped_extent_max > MM_MAX_FILE_SIZE))
        rc = md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                          "mmapv1.debugCappedExtentSize %lld must be 0 or between 4 KB and 2 GB",
                          (long long)o->capped_extent_max);
    if (rc == 0 && (o->remap_bytes < 0 || o->remap_bytes > MM_J_REMAP_BYTES))
        rc = md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                          "mmapv1.debugRemapPrivateViewBytes %lld must be between 0 "
                          "(the default, %lld) and %lld",
                          (long long)o->remap_bytes, (long long)MM_J_REMAP_BYTES,
                          (long long)MM_J_REMAP_BYTES);
    if (rc == 0 && (o->interval_ms < 1 || o->interval_ms > 500))
        rc = md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                          "mmapv1.journalCommitInterval %lld must be between 1 and 500 ms",
                          (long long)o->interval_ms);
    if (rc == 0 && (o->syncdelay < 0 || o->syncdelay > 31536000))
        rc = md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                          "mmapv1.syncdelay %lld must be between 0 and 31536000 s",
                          (long long)o->syncdelay);
    if (rc == 0 && (o->jfile_size < 65536 || o->jfile_size > MM_J_FILE_LIMIT))
        rc = md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                          "mmapv1.journalFileSize %lld must be between 64 KB and 1 GB",
                          (long long)o->jfile_size);
    return rc;
}

static int parse_opts(const bson_t *opts, mm_opts *o, md_error *err)
{
    bson_iter_t it, sub;
    *o = (mm_opts){.create = true,
                   .journal = true,
                   .first_file_size = 0,
                   .ns_size = MM_DEFAULT_NS_SIZE,
                   .interval_ms = MM_J_DEFAULT_INTERVAL,
                   .syncdelay = MM_J_DEFAULT_SYNCDELAY,
                   .jfile_size = MM_J_FILE_LIMIT};
    if (opts && bson_iter_init(&it, opts)) {
        while (bson_iter_next(&it)) {
            const char *k = bson_iter_key(&it);
            if (strcmp(k, "smallFiles") == 0) {
                o->small_files = bson_iter_as_bool(&it);
            } else if (strcmp(k, "create") == 0) {
                o->create = bson_iter_as_bool(&it);
            } else if (strcmp(k, "mmapv1") == 0) {
                if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &sub))
                    return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                                        "mmapv1 options must be a document");
                int rc = parse_mmapv1(&sub, o, err);
                if (rc)
                    return rc;
            }
        }
    }
    int64_t cap = o->small_files ? MM_MAX_FILE_SIZE / 4 : MM_MAX_FILE_SIZE;
    if (o->first_file_size == 0)
        o->first_file_size = o->small_files ? MM_DEFAULT_FIRST_FILE / 4 : MM_DEFAULT_FIRST_FILE;
    if (o->first_file_size < 65536 || o->first_file_size % 4096 || o->first_file_size > cap)
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                            "mmapv1.firstFileSize %lld must be a multiple of 4096 between "
                            "65536 and %lld", (long long)o->first_file_size, (long long)cap);
    if (o->ns_size < MM_MIN_NS_SIZE || o->ns_size % 4096 || o->ns_size > MM_MAX_FILE_SIZE)
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                            "mmapv1.nsSize %lld must be a multiple of 4096 between %lld and "
                            "2047 MB", (long long)o->ns_size, (long long)MM_MIN_NS_SIZE);
    return 0;
}

/* A database name usable in file and namespace names (MongoDB's rules). */
static int check_db_name(const char *db, md_error *err)
{
    size_t n = strlen(db);
    if (n == 0 || n > 63 || strpbrk(db, "/\\. \"$*<>:|?"))
        return md_error_set(err, MD_EINVAL, MD_CODE_INVALID_NAMESPACE,
                            "invalid database name '%s'", db);
    return 0;
}

/* mkdir -p */
static int make_dir(const char *dir, md_error *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char c = *p;
        *p = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST)
            return md_error_set(err, MD_EIO, MD_CODE_FILE_STREAM_FAILED,
                                "cannot create directory %s: %s", path, strerror(errno));
        *p = c;
        if (c == '\0')
            return 0;
    }
}

static void engine_free(mm_engine *e)
{
    mm_journal_close(e); /* stops the flush thread first */
    mm_txn_spare_free(e);
    mm_meta_free(e);
    mm_files_close(e);
    mm_lock_release(e);
    pthread_mutex_destroy(&e->cursors_mu);
    free(e->dir);
    free(e->db);
    free(e);
}

/* Find or create the catalog namespace, then load the catalog. */
static int open_catalog(mm_engine *e, md_error *err)
{
    char name[ENG_IDENT_MAX];
    snprintf(name, sizeof name, "%s.system.namespaces", e->db);
    e->meta_slot = mm_ns_find(e, name);
    if (e->meta_slot < 0) {
        eng_txn *t = NULL;
        int rc = mm_txn_begin(&e->base, &t);
        if (rc == 0)
            rc = mm_ns_add(e, mm_T(t, e), name, MM_KIND_CATALOG, &e->meta_slot, err);
        if (rc) {
            if (t)
                mm_txn_abort(t);
            return rc;
        }
        if ((rc = mm_txn_commit(t, false, err)) != 0)
            return rc;
    } else if (mm_ns_at(e, e->meta_slot)->kind != MM_KIND_CATALOG) {
        return ENG_CORRUPT(err, "%s is not the catalog namespace", name);
    }
    return mm_meta_load(e, err);
}

/*
 * Replay the journal (whatever the journal option: files left by a crashed
 * journaled run are applied before anything reads the data files), open
 * and check the files, note an earlier unjournaled run that did not close
 * cleanly, then start the journal and the flush thread.
 */
static int open_files(mm_engine *e, const mm_opts *o, md_error *err)
{
    bool created;
    uint64_t last_seq;
    int64_t replayed;
    bool damaged;
    int rc = mm_journal_recover(e, &last_seq, &replayed, &damaged, err);
    if (rc == 0)
        rc = mm_ns_file_open(e, o->ns_size, &created, err);
    if (rc == 0)
        rc = mm_files_open(e, err);
    if (rc == 0 && e->nfiles == 0)
        rc = mm_file_add(e, 0, err);
    if (rc == 0)
        rc = mm_ns_check_all(e, err);
    if (rc)
        return rc;
    uint32_t flags = mm_ns_header_of(e)->flags;
    e->unclean_nojournal = (flags & MM_NSF_NOJOURNAL) != 0;
    e->journal_damaged = damaged || (flags & MM_NSF_JDAMAGED);
    uint32_t want = flags | (e->journal ? 0 : MM_NSF_NOJOURNAL) |
                    (e->journal_damaged ? MM_NSF_JDAMAGED : 0);
    if (want != flags && mm_ns_set_flags(e, want) != 0)
        return md_error_set(err, MD_EIO, MD_CODE_FILE_STREAM_FAILED,
                            "cannot write the .ns header in %s", e->dir);
    mm_jopts jo = {.interval_ms = (int)o->interval_ms,
                   .syncdelay = o->syncdelay,
                   .file_limit = o->jfile_size};
    return mm_journal_open(e, &jo, last_seq, replayed, err);
}

static int mm_open(const char *dir, const char *db, const bson_t *opts, eng_engine **out,
                   md_error *err)
{
    mm_opts o;
    struct stat st;
    int rc = parse_opts(opts, &o, err);
    if (rc == 0)
        rc = check_db_name(db, err);
    if (rc)
        return rc;
    if (!o.create && stat(dir, &st) != 0)
        return md_error_set(err, MD_NOTFOUND, MD_CODE_NAMESPACE_NOT_FOUND,
                            "database directory %s does not exist", dir);
    if ((rc = make_dir(dir, err)) != 0)
        return rc;
    mm_engine *e = calloc(1, sizeof *e);
    if (!e || !(e->dir = strdup(dir)) || !(e->db = strdup(db))) {
        if (e)
            free(e->dir);
        free(e);
        return md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
    }
    e->base.ops = &mm_engine_ops;
    pthread_mutex_init(&e->cursors_mu, NULL);
    e->lock_fd = e->ns.fd = -1;
    e->first_file_size = o.first_file_size;
    e->file_cap = o.small_files ? MM_MAX_FILE_SIZE / 4 : MM_MAX_FILE_SIZE;
    e->debug_remap = o.debug_remap;
    e->journal = o.journal;
    e->check_views = o.check_views;
    e->remap_bytes = o.remap_bytes > 0 ? o.remap_bytes : MM_J_REMAP_BYTES;
    e->capped_extent_max = (int32_t)o.capped_extent_max;
    if ((rc = mm_lock_acquire(e, err)) == 0 && (rc = open_files(e, &o, err)) == 0)
        rc = open_catalog(e, err);
    if (rc) {
        engine_free(e);
        return rc;
    }
    *out = &e->base;
    return 0;
}

static void mm_close(eng_engine *eng)
{
    mm_engine *e = mm_E(eng);
    if (e->txn)
        mm_txn_abort(&e->txn->base);
    while (e->cursors) { /* leaked by the caller: free them with the engine */
        mm_cursor *c = e->cursors;
        e->cursors = c->link_next;
        free(c);
    }
    mm_journal_close(e); /* final flush; a clean close removes the journal */
    if (e->ns.fd >= 0 && (mm_ns_header_of(e)->flags & (MM_NSF_NOJOURNAL | MM_NSF_JDAMAGED)))
        mm_ns_set_flags(e, 0);
    engine_free(e);
}

static int mm_flush(eng_engine *eng, bool sync, md_error *err)
{
    return mm_journal_flush(mm_E(eng), sync, err);
}

static int64_t mm_total_moves(eng_engine *eng)
{
    return mm_ns_header_of(mm_E(eng))->total_moves;
}

/* serverStatus: an "mmapv1" section with the files and mapped bytes. */
static void mm_append_status(eng_engine *eng, bson_t *status)
{
    mm_engine *e = mm_E(eng);
    bson_t sub, arr;
    char key[16];
    bson_append_document_begin(status, "mmapv1", -1, &sub);
    BSON_APPEND_INT32(&sub, "dataFiles", e->nfiles);
    BSON_APPEND_INT64(&sub, "mappedBytes", mm_total_bytes(e) + e->ns.len);
    BSON_APPEND_INT64(&sub, "nsFileSize", e->ns.len);
    bson_append_array_begin(&sub, "fileSizes", -1, &arr);
    for (int i = 0; i < e->nfiles; i++) {
        snprintf(key, sizeof key, "%d", i);
        BSON_APPEND_INT64(&arr, key, e->files[i].len);
    }
    bson_append_array_end(&sub, &arr);
    BSON_APPEND_INT64(&sub, "totalMoves", mm_ns_header_of(e)->total_moves);
    BSON_APPEND_INT64(&sub, "remaps", e->nremaps);
    mm_journal_status(e, &sub);
    bson_append_document_end(status, &sub);
}

/* mmapv1 left a "<db>.ns" file for some database in dir. */
static bool mm_owns_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    bool found = false;
    if (!d)
        return false;
    while (!found && (de = readdir(d)) != NULL) {
        size_t n = strlen(de->d_name);
        found = n > 3 && strcmp(de->d_name + n - 3, ".ns") == 0;
    }
    closedir(d);
    return found;
}

const eng_ops mm_engine_ops = {
    .name = "mmapv1",
    .has_damages = true,
    .collection_lock = true,

    .owns_dir = mm_owns_dir,
    .open = mm_open,
    .close = mm_close,
    .flush = mm_flush,
    .append_status = mm_append_status,
    .total_moves = mm_total_moves,

    .txn_begin = mm_txn_begin,
    .txn_commit = mm_txn_commit,
    .txn_abort = mm_txn_abort,

    .meta_put = mm_meta_put,
    .meta_get = mm_meta_get,
    .meta_del = mm_meta_del,
    .meta_list = mm_meta_list,
    .meta_where = mm_meta_where,

    .rs_create = mm_rs_create,
    .rs_open = mm_rs_open,
    .rs_close = mm_rs_close,
    .rs_drop = mm_rs_drop,
    .rs_insert = mm_rs_insert,
    .rs_get = mm_rs_get,
    .rs_update = mm_rs_update,
    .rs_update_damages = mm_rs_update_damages,
    .rs_remove = mm_rs_remove,
    .rs_truncate = mm_rs_truncate,
    .rs_set_alloc = mm_rs_set_alloc,
    .rs_stats = mm_rs_stats,
    .rs_append_stats = mm_rs_append_stats,
    .rs_validate = mm_rs_validate,
    .rs_compact = mm_rs_compact,

    .rs_cursor_open = mm_rs_cursor_open,
    .rs_cursor_next = mm_rs_cursor_next,
    .rs_cursor_save = mm_rs_cursor_save,
    .rs_cursor_restore = mm_rs_cursor_restore,
    .rs_cursor_close = mm_rs_cursor_close,

    .ss_create = mm_ss_create,
    .ss_open = mm_ss_open,
    .ss_close = mm_ss_close,
    .ss_drop = mm_ss_drop,
    .ss_insert = mm_ss_insert,
    .ss_remove = mm_ss_remove,
    .ss_truncate = mm_ss_truncate,
    .ss_size = mm_ss_size,
    .ss_entries = mm_ss_entries,
    .ss_validate = mm_ss_validate,

    .ss_find = mm_ss_find,
    .ss_cursor_open = mm_ss_cursor_open,
    .ss_cursor_seek = mm_ss_cursor_seek,
    .ss_cursor_next = mm_ss_cursor_next,
    .ss_cursor_prev = mm_ss_cursor_prev,
    .ss_cursor_get = mm_ss_cursor_get,
    .ss_cursor_save = mm_ss_cursor_save,
    .ss_cursor_restore = mm_ss_cursor_restore,
    .ss_cursor_close = mm_ss_cursor_close,
};
