/*
 * restore.c -- `minidoc restore`: a mongodump dump (directory or archive,
 * gzip or not) into a minidoc database, as mongorestore does.
 *
 *   minidoc restore --dbpath DIR [PATH | --archive[=FILE]] [--gzip]
 *                   [--drop] [--nsInclude PATTERN]... [--noIndexRestore]
 *                   [--noOptionsRestore] [--stopOnError]
 *
 * PATH (default "dump") is a dump directory (one subdirectory per
 * database) or one database's directory (it holds .bson files).  The
 * archive is read as dump.c's header describes (mongodump's format); the
 * CRC-64 of each namespace's documents is checked against its EOF header.
 * For each collection: --drop drops it first; it is created with the
 * metadata's options (capped included; NamespaceExists is fine, the
 * documents go into the existing collection as mongorestore does); the
 * documents are inserted in batches of 1000 (unordered: a duplicate key
 * is reported and the rest goes on, unless --stopOnError); then the
 * indexes are built from the metadata's specs (without "ns").  Per
 * collection counts go to stderr, then mongorestore's summary line
 * "N document(s) restored successfully. M document(s) failed to restore."
 *
 * --nsInclude takes mongorestore's patterns: '*' matches any run of
 * characters ("test.*", "*.users").  A minidoc directory holds one
 * database: the selected namespaces are restored into it when they come
 * from one database (whatever its name); when they span several, only
 * the one named like this database (--dbname, default test) is, and the
 * others are reported as skipped.  Deviation: uuid in the metadata is
 * ignored (minidoc keeps none; mongorestore uses it only with
 * --preserveUUID).  Exit status 1 when anything failed.
 */
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tool.h"

#define PROG "minidoc restore"
#define BATCH_DOCS 1000
#define BATCH_BYTES (8 * 1024 * 1024)

typedef struct rs_opts {
    tool_db_opts db;
    const char *path, *archive, *target_db;
    const char *include[32];
    int ninclude;
    bool gzip, drop, no_index, no_options, stop_on_error;
} rs_opts;

typedef struct rs_coll {
    char *db, *coll;
    char *bson_path, *meta_path; /* directory form */
    char *meta_json;             /* archive form */
    bool selected, prepared, failed, eof;
    int64_t restored, failures;
    uint64_t crc;
    bson_t batch; /* array of pending documents */
    int nbatch;
} rs_coll;

typedef struct rs_state {
    rs_opts *o;
    md_db *db;
    rs_coll **c; /* each on its own: a bson_t must not move once it grew */
    size_t n, cap;
    int64_t restored, failures;
    bool error, stop;
} rs_state;

static void rs_usage(FILE *f)
{
    fprintf(f, "usage: minidoc restore --dbpath DIR [--engine E] [--dbname NAME]\n"
               "                       [PATH | --archive[=FILE]] [--gzip] [--drop]\n"
               "                       [--nsInclude PATTERN]... [--noIndexRestore]\n"
               "                       [--noOptionsRestore] [--stopOnError]\n"
               "  PATH: a dump directory (default: dump) or one database's directory\n");
}

/* --nsInclude, which may be given many times. */
static int rs_more(int argc, char **argv, int *i, void *opts, const char *prog)
{
    rs_opts *o = opts;
    const char *v = tool_opt_value(argc, argv, i, "--nsInclude");
    if (!v)
        return 0;
    if (o->ninclude == 32) {
        fprintf(stderr, "%s: too many --nsInclude\n", prog);
        return -1;
    }
    o->include[o->ninclude++] = v;
    return 1;
}

static int parse(int argc, char **argv, rs_opts *o)
{
    static const tool_opt table[] = {
        TOOL_OPT_STR("--db", "-d", rs_opts, target_db),
        TOOL_OPT_STR("--dir", NULL, rs_opts, path),
        TOOL_OPT_OPTIONAL("--archive", rs_opts, archive),
        TOOL_OPT_FLAG("--gzip", rs_opts, gzip),
        TOOL_OPT_FLAG("--drop", rs_opts, drop),
        TOOL_OPT_FLAG("--noIndexRestore", rs_opts, no_index),
        TOOL_OPT_FLAG("--noOptionsRestore", rs_opts, no_options),
        TOOL_OPT_FLAG("--stopOnError", rs_opts, stop_on_error),
        TOOL_OPT_END,
    };
    memset(o, 0, sizeof *o);
    if (tool_parse(argc, argv, table, o, &o->db, &o->path, rs_usage, PROG, rs_more) != 0)
        return -1;
    if (o->archive && o->path) {
        fprintf(stderr, "%s: give either a dump directory or --archive, not both\n", PROG);
        return -1;
    }
    if (!o->archive && !o->path)
        o->path = "dump";
    return 0;
}

static rs_coll *add_coll(rs_state *st, const char *dbname, const char *coll)
{
    for (size_t k = 0; k < st->n; k++)
        if (strcmp(st->c[k]->db, dbname) == 0 && strcmp(st->c[k]->coll, coll) == 0)
            return st->c[k];
    if (st->n == st->cap) {
        st->cap = st->cap ? st->cap * 2 : 16;
        st->c = realloc(st->c, st->cap * sizeof *st->c);
    }
    rs_coll *c = bson_aligned_alloc0(BSON_ALIGNOF(rs_coll), sizeof *c);
    st->c[st->n++] = c;
    c->db = strdup(dbname);
    c->coll = strdup(coll);
    bson_init(&c->batch);
    return c;
}

/* --nsInclude and the one-database rule (header comment). */
static void select_colls(rs_state *st)
{
    const char *first_db = NULL;
    bool several = false;
    char ns[1024];
    for (size_t k = 0; k < st->n; k++) {
        rs_coll *c = st->c[k];
        snprintf(ns, sizeof ns, "%s.%s", c->db, c->coll);
        c->selected = st->o->ninclude == 0 && strncmp(c->coll, "system.", 7) != 0;
        for (int p = 0; p < st->o->ninclude; p++)
            if (fnmatch(st->o->include[p], ns, 0) == 0)
                c->selected = true;
        if (!c->selected)
            continue;
        if (!first_db)
            first_db = c->db;
        else if (strcmp(first_db, c->db) != 0)
            several = true;
    }
    if (!several)
        return;
    for (size_t k = 0; k < st->n; k++) {
        rs_coll *c = st->c[k];
        if (c->selected && strcmp(c->db, md_db_name(st->db)) != 0) {
            fprintf(stderr,
                    "skipping %s.%s: the dump holds several databases and this one is "
                    "'%s' (open another --dbname, or choose with --nsInclude)\n",
                    c->db, c->coll, md_db_name(st->db));
            c->selected = false;
        }
    }
}

static void report(const char *what, rs_coll *c, const md_error *err)
{
    fprintf(stderr, "%s: %s %s.%s: %s (%s, code %d)\n", PROG, what, c->db, c->coll,
            err->message, err->code_name, err->code);
}

/* Read a metadata file (NULL path: none) into c->meta_json. */
static int load_meta_file(rs_state *st, rs_coll *c)
{
    if (!c->meta_path || c->meta_json)
        return 0;
    c->meta_json = tool_slurp(c->meta_path, st->o->gzip, NULL);
    if (!c->meta_json) {
        fprintf(stderr, "%s: cannot read %s: %s\n", PROG, c->meta_path, strerror(errno));
        return -1;
    }
    return 0;
}

/* Drop, create with options: before the first document. */
static int prepare(rs_state *st, rs_coll *c)
{
    bson_t cmd, reply, meta, opts;
    md_error err;
    bson_iter_t it;
    char msg[256];
    c->prepared = true;
    if (load_meta_file(st, c) != 0) {
        c->failed = true;
        return -1;
    }
    bson_init(&meta);
    if (c->meta_json && tool_json_parse(c->meta_json, -1, &meta, msg, sizeof msg) != 0) {
        fprintf(stderr, "%s: metadata of %s.%s is not valid JSON: %s\n", PROG, c->db, c->coll,
                msg);
        bson_destroy(&meta);
        c->failed = true;
        return -1;
    }
    if (st->o->drop) {
        bson_init(&cmd);
        BSON_APPEND_UTF8(&cmd, "drop", c->coll);
        if (tool_command(st->db, &cmd, &reply, &err) != 0 &&
            err.code != MD_CODE_NAMESPACE_NOT_FOUND)
            report("cannot drop", c, &err);
        bson_destroy(&cmd);
        bson_destroy(&reply);
    }
    bson_init(&cmd);
    BSON_APPEND_UTF8(&cmd, "create", c->coll);
    if (!st->o->no_options && bson_iter_init_find(&it, &meta, "options") &&
        BSON_ITER_HOLDS_DOCUMENT(&it)) {
        const uint8_t *d;
        uint32_t dl;
        bson_iter_document(&it, &dl, &d);
        bson_init_static(&opts, d, dl);
        bson_concat(&cmd, &opts);
    }
    int rc = tool_command(st->db, &cmd, &reply, &err);
    bson_destroy(&cmd);
    bson_destroy(&reply);
    bson_destroy(&meta);
    if (rc != 0 && err.code != MD_CODE_NAMESPACE_EXISTS) {
        report("cannot create", c, &err);
        c->failed = true;
        return -1;
    }
    fprintf(stderr, "restoring %s.%s%s%s\n", md_db_name(st->db), c->coll,
            c->bson_path ? " from " : "", c->bson_path ? c->bson_path : "");
    return 0;
}

/* Insert the pending batch. */
static int flush(rs_state *st, rs_coll *c)
{
    if (c->nbatch == 0)
        return 0;
    bson_t cmd, reply;
    md_error err;
    bson_iter_t it, we, one, f;
    bson_init(&cmd);
    BSON_APPEND_UTF8(&cmd, "insert", c->coll);
    BSON_APPEND_ARRAY(&cmd, "documents", &c->batch);
    BSON_APPEND_BOOL(&cmd, "ordered", st->o->stop_on_error);
    int rc = tool_command(st->db, &cmd, &reply, &err);
    bson_destroy(&cmd);
    int64_t n = 0;
    if (rc == 0) {
        if (bson_iter_init_find(&it, &reply, "n"))
            n = bson_iter_as_int64(&it);
        if (bson_iter_init_find(&we, &reply, "writeErrors") && bson_iter_recurse(&we, &one))
            while (bson_iter_next(&one)) {
                bson_iter_t sub;
                if (bson_iter_recurse(&one, &sub) && bson_iter_find(&sub, "errmsg"))
                    fprintf(stderr, "continuing through error: %s\n",
                            bson_iter_utf8(&sub, NULL));
                (void)f;
            }
    } else {
        report("insert into", c, &err);
    }
    bson_destroy(&reply);
    c->restored += n;
    c->failures += c->nbatch - n;
    if (c->nbatch - n > 0 && st->o->stop_on_error)
        st->stop = true;
    bson_reinit(&c->batch);
    c->nbatch = 0;
    return rc == 0 ? 0 : -1;
}

static int add_doc(rs_state *st, rs_coll *c, const uint8_t *d, size_t len)
{
    bson_t doc;
    char key[16];
    if (!c->prepared && prepare(st, c) != 0)
        return -1;
    if (c->failed)
        return 0;
    if (!bson_init_static(&doc, d, len) || !bson_validate(&doc, BSON_VALIDATE_NONE, NULL)) {
        fprintf(stderr, "%s: %s.%s: invalid BSON document skipped\n", PROG, c->db, c->coll);
        c->failures++;
        return 0;
    }
    snprintf(key, sizeof key, "%d", c->nbatch);
    bson_append_document(&c->batch, key, -1, &doc);
    c->nbatch++;
    if (c->nbatch >= BATCH_DOCS || c->batch.len >= BATCH_BYTES)
        return flush(st, c);
    return 0;
}

/* After the last document: the indexes, the counts. */
static int finish(rs_state *st, rs_coll *c)
{
    bson_t meta, cmd, reply, specs;
    bson_iter_t it, one;
    md_error err;
    char msg[256];
    int rc = 0;
    if (!c->prepared && prepare(st, c) != 0)
        rc = -1;
    if (!c->failed && flush(st, c) != 0)
        rc = -1;
    if (!c->failed && !st->o->no_index && c->meta_json &&
        tool_json_parse(c->meta_json, -1, &meta, msg, sizeof msg) == 0) {
        bson_init(&specs);
        int ns = 0;
        if (bson_iter_init_find(&it, &meta, "indexes") && bson_iter_recurse(&it, &one))
            while (bson_iter_next(&one)) {
                bson_t spec, clean;
                const uint8_t *d;
                uint32_t dl;
                bson_iter_t name;
                if (!BSON_ITER_HOLDS_DOCUMENT(&one))
                    continue;
                bson_iter_document(&one, &dl, &d);
                bson_init_static(&spec, d, dl);
                if (bson_iter_init_find(&name, &spec, "name") && BSON_ITER_HOLDS_UTF8(&name) &&
                    strcmp(bson_iter_utf8(&name, NULL), "_id_") == 0)
                    continue;
                bson_init(&clean);
                bson_copy_to_excluding_noinit(&spec, &clean, "ns", NULL);
                char key[16];
                snprintf(key, sizeof key, "%d", ns++);
                BSON_APPEND_DOCUMENT(&specs, key, &clean);
                bson_destroy(&clean);
            }
        if (ns > 0) {
            fprintf(stderr, "restoring indexes for collection %s.%s from metadata\n",
                    md_db_name(st->db), c->coll);
            bson_init(&cmd);
            BSON_APPEND_UTF8(&cmd, "createIndexes", c->coll);
            BSON_APPEND_ARRAY(&cmd, "indexes", &specs);
            if (tool_command(st->db, &cmd, &reply, &err) != 0) {
                report("cannot build the indexes of", c, &err);
                rc = -1;
            }
            bson_destroy(&cmd);
            bson_destroy(&reply);
        }
        bson_destroy(&specs);
        bson_destroy(&meta);
    } else if (!c->failed && c->meta_json && !st->o->no_index) {
        fprintf(stderr, "%s: metadata of %s.%s is not valid JSON: %s\n", PROG, c->db, c->coll,
                msg);
        rc = -1;
    }
    fprintf(stderr, "finished restoring %s.%s (%lld document%s, %lld failure%s)\n",
            md_db_name(st->db), c->coll, (long long)c->restored, c->restored == 1 ? "" : "s",
            (long long)c->failures, c->failures == 1 ? "" : "s");
    st->restored += c->restored;
    st->failures += c->failures;
    if (c->failed || c->failures > 0 || rc != 0)
        st->error = true;
    if (c->failed && st->o->stop_on_error)
        st->stop = true;
    return rc;
}

/* ---- directory form ------------------------------------------------------- */

static bool has_suffix(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n > m && strcmp(s + n - m, suf) == 0;
}

static char *join(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);
    snprintf(p, n, "%s/%s", a, b);
    return p;
}

/* The .bson and .metadata.json files of one database directory; returns
 * how many it found. */
static int scan_db_dir(rs_state *st, const char *dir, const char *dbname)
{
    struct dirent **ents;
    const char *bs = st->o->gzip ? ".bson.gz" : ".bson";
    const char *ms = st->o->gzip ? ".metadata.json.gz" : ".metadata.json";
    int n = scandir(dir, &ents, NULL, alphasort), found = 0;
    if (n < 0)
        return -1;
    for (int k = 0; k < n; k++) {
        const char *name = ents[k]->d_name;
        char coll[512];
        bool is_bson = has_suffix(name, bs), is_meta = has_suffix(name, ms);
        if (is_bson || is_meta) {
            size_t cut = strlen(name) - strlen(is_bson ? bs : ms);
            snprintf(coll, sizeof coll, "%.*s", (int)cut, name);
            rs_coll *c = add_coll(st, dbname, coll);
            if (is_bson)
                c->bson_path = join(dir, name);
            else
                c->meta_path = join(dir, name);
            found++;
        }
        free(ents[k]);
    }
    free(ents);
    return found;
}

static int restore_dir(rs_state *st)
{
    const char *path = st->o->path;
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "%s: %s: %s\n", PROG, path,
                stat(path, &sb) != 0 ? strerror(errno) : "not a directory");
        return -1;
    }
    const char *base = strrchr(path, '/');
    base = base && base[1] ? base + 1 : path;
    char dbname[256];
    snprintf(dbname, sizeof dbname, "%s", st->o->target_db ? st->o->target_db : base);
    int found = scan_db_dir(st, path, dbname);
    if (found < 0) {
        fprintf(stderr, "%s: cannot read %s: %s\n", PROG, path, strerror(errno));
        return -1;
    }
    if (found == 0) {
        struct dirent **ents;
        int n = scandir(path, &ents, NULL, alphasort);
        for (int k = 0; k < n; k++) {
            char *sub = join(path, ents[k]->d_name);
            if (ents[k]->d_name[0] != '.' && stat(sub, &sb) == 0 && S_ISDIR(sb.st_mode))
                scan_db_dir(st, sub, ents[k]->d_name);
            free(sub);
            free(ents[k]);
        }
        if (n >= 0)
            free(ents);
    }
    if (st->n == 0) {
        fprintf(stderr, "%s: no .bson%s or .metadata.json%s files in %s\n", PROG,
                st->o->gzip ? ".gz" : "", st->o->gzip ? ".gz" : "", path);
        return -1;
    }
    select_colls(st);
    uint8_t *buf = NULL;
    size_t cap = 0;
    char msg[256];
    for (size_t k = 0; k < st->n && !st->stop; k++) {
        rs_coll *c = st->c[k];
        if (!c->selected)
            continue;
        if (c->bson_path) {
            tool_stream s;
            if (tool_stream_open(&s, c->bson_path, false, st->o->gzip) != 0) {
                fprintf(stderr, "%s: cannot read %s: %s\n", PROG, c->bson_path,
                        strerror(errno));
                st->error = true;
                continue;
            }
            if (prepare(st, c) == 0) {
                int r = 0;
                while (!st->stop && (r = tool_read_bson(&s, &buf, &cap, false, msg,
                                                         sizeof msg)) == 1)
                    if (add_doc(st, c, buf, (size_t)((int32_t *)buf)[0]) != 0)
                        break;
                if (r < 0) {
                    fprintf(stderr, "%s: %s: %s at byte %llu\n", PROG, c->bson_path, msg,
                            (unsigned long long)s.bytes);
                    st->error = true;
                }
            }
            tool_stream_close(&s);
        }
        finish(st, c);
    }
    free(buf);
    return 0;
}

/* ---- archive form ------------------------------------------------------------ */

static bool doc_str(const bson_t *b, const char *key, const char **out)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, b, key) || !BSON_ITER_HOLDS_UTF8(&it))
        return false;
    *out = bson_iter_utf8(&it, NULL);
    return true;
}

static int restore_archive(rs_state *st)
{
    tool_stream s;
    uint8_t *buf = NULL;
    size_t cap = 0;
    char msg[256];
    const char *what = st->o->archive;
    int r, rc = -1;
    if (tool_stream_open(&s, what, false, st->o->gzip) != 0) {
        fprintf(stderr, "%s: cannot read %s: %s\n", PROG, what, strerror(errno));
        return -1;
    }
    uint8_t magic[4];
    if (tool_stream_read(&s, magic, 4) != 4 || magic[0] != 0x6d || magic[1] != 0xe2 ||
        magic[2] != 0x99 || magic[3] != 0x81) {
        fprintf(stderr, "%s: %s is not a mongodump archive (no magic number 0x8199e26d%s)\n",
                PROG, what, st->o->gzip ? "" : "; gzipped? then add --gzip");
        goto out;
    }
    if ((r = tool_read_bson(&s, &buf, &cap, false, msg, sizeof msg)) != 1) {
        fprintf(stderr, "%s: %s: bad archive header: %s\n", PROG, what,
                r == 0 ? "end of file" : msg);
        goto out;
    }
    /* prelude: collection metadata up to the terminator */
    while ((r = tool_read_bson(&s, &buf, &cap, true, msg, sizeof msg)) == 1) {
        bson_t m;
        const char *dbn, *coll, *meta;
        bson_init_static(&m, buf, (size_t)((int32_t *)buf)[0]);
        if (!doc_str(&m, "db", &dbn) || !doc_str(&m, "collection", &coll)) {
            fprintf(stderr, "%s: %s: collection metadata without db/collection\n", PROG, what);
            goto out;
        }
        rs_coll *c = add_coll(st, dbn, coll);
        if (doc_str(&m, "metadata", &meta) && !c->meta_json)
            c->meta_json = strdup(meta);
    }
    if (r != 2) {
        fprintf(stderr, "%s: %s: bad archive prelude: %s\n", PROG, what,
                r == 0 ? "end of file" : msg);
        goto out;
    }
    select_colls(st);
    /* namespace segments and EOF headers */
    while (!st->stop && (r = tool_read_bson(&s, &buf, &cap, false, msg, sizeof msg)) == 1) {
        bson_t h;
        bson_iter_t it;
        const char *dbn, *coll;
        bson_init_static(&h, buf, (size_t)((int32_t *)buf)[0]);
        if (!doc_str(&h, "db", &dbn) || !doc_str(&h, "collection", &coll)) {
            fprintf(stderr, "%s: %s: namespace header without db/collection\n", PROG, what);
            goto out;
        }
        bool eof = bson_iter_init_find(&it, &h, "EOF") && bson_iter_as_bool(&it);
        uint64_t crc = bson_iter_init_find(&it, &h, "CRC") ? (uint64_t)bson_iter_as_int64(&it)
                                                           : 0;
        rs_coll *c = NULL;
        for (size_t k = 0; k < st->n; k++)
            if (strcmp(st->c[k]->db, dbn) == 0 && strcmp(st->c[k]->coll, coll) == 0)
                c = st->c[k];
        if (!c || c->eof) {
            fprintf(stderr, "%s: %s: %s for %s.%s, not in the prelude\n", PROG, what,
                    c ? "data after the end" : "data", dbn, coll);
            goto out;
        }
        if (eof) {
            if ((r = tool_read_bson(&s, &buf, &cap, true, msg, sizeof msg)) != 2) {
                fprintf(stderr, "%s: %s: no terminator after the EOF of %s.%s\n", PROG, what,
                        c->db, c->coll);
                goto out;
            }
            c->eof = true;
            if (crc != c->crc) {
                fprintf(stderr, "%s: %s: CRC mismatch for %s.%s (archive %016llx, data "
                        "%016llx)\n", PROG, what, c->db, c->coll, (unsigned long long)crc,
                        (unsigned long long)c->crc);
                st->error = true;
            }
            if (c->selected)
                finish(st, c);
            continue;
        }
        while ((r = tool_read_bson(&s, &buf, &cap, true, msg, sizeof msg)) == 1) {
            size_t len = (size_t)((int32_t *)buf)[0];
            c->crc = tool_crc64(c->crc, buf, len);
            if (c->selected && !st->stop && add_doc(st, c, buf, len) != 0 &&
                st->o->stop_on_error)
                st->stop = true;
        }
        if (r != 2) {
            fprintf(stderr, "%s: %s: %s in the data of %s.%s at byte %llu\n", PROG, what,
                    r == 0 ? "end of file" : msg, c->db, c->coll,
                    (unsigned long long)s.bytes);
            goto out;
        }
    }
    if (r < 0) {
        fprintf(stderr, "%s: %s: %s at byte %llu\n", PROG, what, msg,
                (unsigned long long)s.bytes);
        goto out;
    }
    for (size_t k = 0; k < st->n && !st->stop; k++)
        if (!st->c[k]->eof) {
            fprintf(stderr, "%s: %s: archive ends before the EOF of %s.%s\n", PROG, what,
                    st->c[k]->db, st->c[k]->coll);
            st->error = true;
            if (st->c[k]->selected)
                finish(st, st->c[k]);
        }
    rc = 0;
out:
    tool_stream_close(&s);
    free(buf);
    return rc;
}

int tool_restore_main(int argc, char **argv)
{
    rs_opts o;
    if (parse(argc, argv, &o) != 0) {
        rs_usage(stderr);
        return 2;
    }
    rs_state st = {.o = &o};
    st.db = tool_open_db(&o.db, true, PROG);
    if (!st.db)
        return 1;
    int rc = o.archive ? restore_archive(&st) : restore_dir(&st);
    if (rc == 0)
        fprintf(stderr, "%lld document(s) restored successfully. %lld document(s) failed to "
                "restore.\n", (long long)st.restored, (long long)st.failures);
    for (size_t k = 0; k < st.n; k++) {
        rs_coll *c = st.c[k];
        free(c->db);
        free(c->coll);
        free(c->bson_path);
        free(c->meta_path);
        free(c->meta_json);
        bson_destroy(&c->batch);
        bson_free(c);
    }
    free(st.c);
    md_db_close(st.db);
    return rc == 0 && !st.error ? 0 : 1;
}
