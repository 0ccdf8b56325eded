/*
 * srv_db.c -- the databases of one data directory.
 *
 *   DIR/                 --dbpath
 *     test/              one md_db (dbName "test"), its engine's files
 *     shop/              one md_db (dbName "shop")
 *
 * A database is an md_db of its own, opened by the first command that names
 * it and kept open until shutdown: each database has its own engine
 * instance, locks, cursors and files, as each had its own files in
 * MongoDB 3.0's mmapv1.  Reads of a database that does not exist open it
 * too (MongoDB answers them with empty results, so does the new empty
 * md_db); listDatabases shows only those that hold a collection, as
 * MongoDB shows only those that exist.
 *
 * dropDatabase drops every collection through the md_db, then closes it
 * and removes DIR/<name>/ when no other connection is inside it; when one
 * is, the emptied database stays open and its directory is removed by the
 * last one to let go.  Entries are reference counted under one mutex.
 */
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "srv.h"

struct srv_db {
    srv_dbs *owner;
    char name[SRV_DB_NAME_MAX + 1];
    md_db *db;
    int refs;
    bool dropped; /* remove the directory when refs reaches 0 */
    srv_db *next;
};

struct srv_dbs {
    char *dir;
    char *engine;
    bson_t open_opts;
    pthread_mutex_t mu;
    srv_db *list;
};

int srv_dbs_new(const char *dir, const char *engine, const bson_t *open_opts, srv_dbs **out)
{
    srv_dbs *d = bson_aligned_alloc0(BSON_ALIGNOF(srv_dbs), sizeof *d); /* a bson_t inside */
    if (!d)
        return MD_ENOMEM;
    d->dir = strdup(dir);
    d->engine = engine ? strdup(engine) : NULL;
    if (open_opts)
        bson_copy_to(open_opts, &d->open_opts);
    else
        bson_init(&d->open_opts);
    pthread_mutex_init(&d->mu, NULL);
    *out = d;
    return 0;
}

void srv_dbs_destroy(srv_dbs *d)
{
    if (!d)
        return;
    for (srv_db *e = d->list, *next; e; e = next) {
        next = e->next;
        md_db_close(e->db);
        free(e);
    }
    pthread_mutex_destroy(&d->mu);
    bson_destroy(&d->open_opts);
    free(d->engine);
    free(d->dir);
    free(d);
}

int srv_db_name_check(const char *name, md_error *err)
{
    size_t n = strlen(name);
    if (n == 0)
        return md_error_set(err, MD_EINVAL, MD_CODE_INVALID_NAMESPACE,
                            "Invalid empty database name");
    if (n >= SRV_DB_NAME_MAX)
        return md_error_set(err, MD_EINVAL, MD_CODE_INVALID_NAMESPACE,
                            "db name is too long: '%s'", name);
    if (strpbrk(name, "/\\. \"$*<>:|?"))
        return md_error_set(err, MD_EINVAL, MD_CODE_INVALID_NAMESPACE,
                            "Invalid database name: '%s'", name);
    return 0;
}

static void db_path(const srv_dbs *d, const char *name, char *path, size_t n)
{
    snprintf(path, n, "%s/%s", d->dir, name);
}

static int open_db(srv_dbs *d, const char *name, md_db **out, md_error *err)
{
    char path[4096];
    bson_t opts;
    bson_copy_to_excluding_noinit(&d->open_opts, (bson_init(&opts), &opts), "engine", "dbName",
                                  NULL);
    if (d->engine)
        BSON_APPEND_UTF8(&opts, "engine", d->engine);
    BSON_APPEND_UTF8(&opts, "dbName", name);
    db_path(d, name, path, sizeof path);
    int rc = md_db_open(path, &opts, out, err);
    bson_destroy(&opts);
    return rc;
}

static srv_db *find(srv_dbs *d, const char *name)
{
    for (srv_db *e = d->list; e; e = e->next)
        if (strcmp(e->name, name) == 0)
            return e;
    return NULL;
}

int srv_db_get(srv_dbs *d, const char *name, bool create, srv_db **out, md_error *err)
{
    int rc = srv_db_name_check(name, err);
    if (rc)
        return rc;
    pthread_mutex_lock(&d->mu);
    srv_db *e = find(d, name);
    if (e && e->dropped) {
        pthread_mutex_unlock(&d->mu);
        return md_error_set(err, MD_EBUSY, 215,
                            "Database %s is being dropped: a connection is still inside it",
                            name);
    }
    if (!e) {
        char path[4096];
        struct stat st;
        db_path(d, name, path, sizeof path);
        if (!create && stat(path, &st) != 0) {
            pthread_mutex_unlock(&d->mu);
            *out = NULL;
            return MD_NOTFOUND;
        }
        e = calloc(1, sizeof *e);
        rc = e ? open_db(d, name, &e->db, err)
               : md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
        if (rc) {
            free(e);
            pthread_mutex_unlock(&d->mu);
            return rc;
        }
        e->owner = d;
        snprintf(e->name, sizeof e->name, "%s", name);
        e->next = d->list;
        d->list = e;
    }
    e->refs++;
    pthread_mutex_unlock(&d->mu);
    *out = e;
    return 0;
}

md_db *srv_db_handle(srv_db *db)
{
    return db->db;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path) == 0 || errno == ENOENT ? 0 : -1;
}

/* Unlinks and frees a dropped entry; under d->mu, refs == 0. */
static void retire(srv_dbs *d, srv_db *e)
{
    char path[4096];
    for (srv_db **p = &d->list; *p; p = &(*p)->next)
        if (*p == e) {
            *p = e->next;
            break;
        }
    md_db_close(e->db);
    db_path(d, e->name, path, sizeof path);
    if (nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
        srv_log(SRV_LOG_W, "STORAGE", 20321, "dropDatabase",
                "could not remove the dropped database's directory", NULL);
    free(e);
}

void srv_db_put(srv_db *e)
{
    srv_dbs *d = e->owner;
    pthread_mutex_lock(&d->mu);
    if (--e->refs == 0 && e->dropped)
        retire(d, e);
    pthread_mutex_unlock(&d->mu);
}

int srv_db_drop(srv_dbs *d, const char *name, bson_t *reply, md_error *err)
{
    srv_db *e;
    int rc = srv_db_get(d, name, false, &e, err);
    if (rc == MD_NOTFOUND)
        return 0; /* MongoDB: ok: 1 and nothing more */
    if (rc)
        return rc;
    bson_t cmd = BSON_INITIALIZER, r;
    BSON_APPEND_INT32(&cmd, "dropDatabase", 1);
    rc = md_db_command(e->db, &cmd, &r, err);
    bson_destroy(&cmd);
    if (rc == 0) {
        bson_iter_t it;
        if (bson_iter_init_find(&it, &r, "dropped"))
            bson_append_iter(reply, "dropped", -1, &it);
        pthread_mutex_lock(&d->mu);
        e->dropped = true; /* no new user finds it; the last one retires it */
        pthread_mutex_unlock(&d->mu);
    }
    bson_destroy(&r);
    srv_db_put(e);
    return rc;
}

static int64_t dir_size(const char *path)
{
    int64_t total = 0;
    DIR *dh = opendir(path);
    struct dirent *de;
    char p[4096];
    struct stat st;
    if (!dh)
        return 0;
    while ((de = readdir(dh))) {
        if (de->d_name[0] == '.')
            continue;
        snprintf(p, sizeof p, "%s/%s", path, de->d_name);
        if (lstat(p, &st) != 0)
            continue;
        total += S_ISDIR(st.st_mode) ? dir_size(p) : (int64_t)st.st_blocks * 512;
    }
    closedir(dh);
    return total;
}

/* Does the database hold a collection? */
static bool has_collections(md_db *db)
{
    bson_t cmd = BSON_INITIALIZER, r;
    bson_iter_t it, batch;
    BSON_APPEND_INT32(&cmd, "listCollections", 1);
    BSON_APPEND_BOOL(&cmd, "nameOnly", true);
    bool any = false;
    if (md_db_command(db, &cmd, &r, NULL) == 0 &&
        bson_iter_init(&it, &r) && bson_iter_find_descendant(&it, "cursor.firstBatch", &batch) &&
        BSON_ITER_HOLDS_ARRAY(&batch) && bson_iter_recurse(&batch, &it))
        any = bson_iter_next(&it);
    bson_destroy(&cmd);
    bson_destroy(&r);
    return any;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int srv_dbs_list(srv_dbs *d, bool name_only, bson_t *databases, int64_t *total, md_error *err)
{
    DIR *dh = opendir(d->dir);
    struct dirent *de;
    char **names = NULL;
    size_t n = 0, cap = 0, out = 0;
    *total = 0;
    if (!dh)
        return md_error_set(err, MD_EIO, MD_CODE_INTERNAL_ERROR, "cannot list %s: %s", d->dir,
                            strerror(errno));
    while ((de = readdir(dh))) {
        if (de->d_name[0] == '.' || srv_db_name_check(de->d_name, NULL) != 0)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            char **nn = realloc(names, cap * sizeof *names);
            if (!nn)
                break;
            names = nn;
        }
        names[n++] = strdup(de->d_name);
    }
    closedir(dh);
    if (n)
        qsort(names, n, sizeof *names, cmp_names);
    for (size_t i = 0; i < n; i++) {
        srv_db *e;
        char key[16], path[4096];
        const char *k;
        struct stat st;
        db_path(d, names[i], path, sizeof path);
        if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode) ||
            srv_db_get(d, names[i], false, &e, NULL) != 0)
            continue;
        if (has_collections(e->db)) {
            bson_t doc;
            int64_t size = dir_size(path);
            bson_uint32_to_string((uint32_t)out++, &k, key, sizeof key);
            BSON_APPEND_DOCUMENT_BEGIN(databases, k, &doc);
            BSON_APPEND_UTF8(&doc, "name", names[i]);
            if (!name_only) {
                BSON_APPEND_DOUBLE(&doc, "sizeOnDisk", (double)size);
                BSON_APPEND_BOOL(&doc, "empty", false);
            }
            bson_append_document_end(databases, &doc);
            *total += size;
        }
        srv_db_put(e);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return 0;
}
