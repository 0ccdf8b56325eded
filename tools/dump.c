/*
 * dump.c -- `minidoc dump`: the database's collections in mongodump's
 * layout, for `minidoc restore` and MongoDB's mongorestore.
 *
 *   minidoc dump --dbpath DIR [--collection C [--query JSON]]
 *                [--out OUT | --archive[=FILE]] [--gzip]
 *
 * Directory form (default OUT "dump"):
 *   OUT/<db>/<coll>.bson           the documents, BSON back to back, in
 *                                  natural order
 *   OUT/<db>/<coll>.metadata.json  {"options": {...}, "indexes": [...]} in
 *                                  canonical extended JSON, as mongodump
 *                                  100.x writes it (4.0's tools wrote the
 *                                  same fields in legacy JSON)
 *   --gzip compresses each file (.bson.gz, .metadata.json.gz).
 *
 * Archive form (--archive=FILE, or stdout without a value): mongodump's
 * archive (mongo-tools common/archive/spec.md), as this file reads it:
 *
 *   magic        uint32 0x8199e26d, little-endian (6d e2 99 81)
 *   header       BSON {concurrent_collections: int32 1, version: "0.1",
 *                      server_version, tool_version}
 *   metadata     one BSON {db, collection, metadata: <the metadata.json
 *                text>, size: int32 (int64 past 2 GB) uncompressed bytes}
 *                per collection
 *   terminator   int32 -1 (ff ff ff ff)
 *   then per collection: a segment {db, collection, EOF: false, CRC:
 *   int64 0}, its documents, a terminator (no segment when the
 *   collection is empty, the grammar wants at least one document); then
 *   the EOF header {db, collection, EOF: true, CRC: CRC-64-ECMA of every
 *   document byte of the namespace} and a terminator.
 *   --gzip compresses the whole archive, as mongodump's.
 *
 * Deviations: minidoc keeps no collection UUIDs, so the metadata has no
 * "uuid" field; system.* collections are not dumped; a collection name
 * is used as the file name as is (mongodump escapes '/' and names too
 * long for the file system).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tool.h"

#define PROG "minidoc dump"

typedef struct dump_opts {
    tool_db_opts db;
    const char *out, *collection, *query, *archive;
    bool gzip;
} dump_opts;

typedef struct dump_coll {
    char *name;
    bson_t meta;  /* {options, indexes} */
    char *meta_json;
    int64_t size, count;
} dump_coll;

static void dump_usage(FILE *f)
{
    fprintf(f, "usage: minidoc dump --dbpath DIR [--engine E] [--dbname NAME]\n"
               "                    [--collection C [--query JSON]]\n"
               "                    [--out OUT | --archive[=FILE]] [--gzip]\n"
               "  writes OUT/<db>/<coll>.bson and <coll>.metadata.json (OUT: dump),\n"
               "  or mongodump's archive format to FILE (stdout without =FILE)\n");
}

static int parse(int argc, char **argv, dump_opts *o)
{
    static const tool_opt table[] = {
        TOOL_OPT_STR("--out", "-o", dump_opts, out),
        TOOL_OPT_STR("--collection", "-c", dump_opts, collection),
        TOOL_OPT_STR("--query", "-q", dump_opts, query),
        TOOL_OPT_OPTIONAL("--archive", dump_opts, archive),
        TOOL_OPT_FLAG("--gzip", dump_opts, gzip),
        TOOL_OPT_END,
    };
    memset(o, 0, sizeof *o);
    o->out = "dump";
    if (tool_parse(argc, argv, table, o, &o->db, NULL, dump_usage, PROG, NULL) != 0)
        return -1;
    if (o->query && !o->collection) {
        fprintf(stderr, "%s: cannot dump using a query without a specified collection\n", PROG);
        return -1;
    }
    return 0;
}

/* The collections to dump, with their metadata. */
static int list_colls(md_db *db, const dump_opts *o, dump_coll **out, size_t *n)
{
    bson_t cmd, reply;
    md_error err;
    bson_iter_t it, arr, one;
    *out = NULL;
    *n = 0;
    bson_init(&cmd);
    BSON_APPEND_INT32(&cmd, "listCollections", 1);
    int rc = tool_command(db, &cmd, &reply, &err);
    bson_destroy(&cmd);
    if (rc != 0) {
        fprintf(stderr, "%s: listCollections failed: %s\n", PROG, err.message);
        bson_destroy(&reply);
        return -1;
    }
    size_t cap = 0;
    if (bson_iter_init(&it, &reply) && bson_iter_find_descendant(&it, "cursor.firstBatch", &arr) &&
        BSON_ITER_HOLDS_ARRAY(&arr) && bson_iter_recurse(&arr, &one)) {
        while (bson_iter_next(&one)) {
            bson_t info;
            const uint8_t *d;
            uint32_t dl;
            bson_iter_t f;
            if (!BSON_ITER_HOLDS_DOCUMENT(&one))
                continue;
            bson_iter_document(&one, &dl, &d);
            bson_init_static(&info, d, dl);
            if (!bson_iter_init_find(&f, &info, "name") || !BSON_ITER_HOLDS_UTF8(&f))
                continue;
            const char *name = bson_iter_utf8(&f, NULL);
            if (strncmp(name, "system.", 7) == 0)
                continue;
            if (o->collection && strcmp(name, o->collection) != 0)
                continue;
            if (*n == cap) {
                cap = cap ? cap * 2 : 8;
                *out = realloc(*out, cap * sizeof **out);
            }
            dump_coll *c = &(*out)[(*n)++];
            memset(c, 0, sizeof *c);
            c->name = strdup(name);
            bson_init(&c->meta);
            if (bson_iter_init_find(&f, &info, "options") && BSON_ITER_HOLDS_DOCUMENT(&f))
                bson_append_iter(&c->meta, "options", -1, &f);
            else {
                bson_t empty = BSON_INITIALIZER;
                BSON_APPEND_DOCUMENT(&c->meta, "options", &empty);
            }
        }
    }
    bson_destroy(&reply);
    if (o->collection && *n == 0) {
        fprintf(stderr, "%s: collection '%s' does not exist in %s\n", PROG, o->collection,
                md_db_name(db));
        return -1;
    }
    /* indexes */
    for (size_t k = 0; k < *n; k++) {
        dump_coll *c = &(*out)[k];
        bson_init(&cmd);
        BSON_APPEND_UTF8(&cmd, "listIndexes", c->name);
        rc = tool_command(db, &cmd, &reply, &err);
        bson_destroy(&cmd);
        if (rc != 0) {
            fprintf(stderr, "%s: listIndexes %s failed: %s\n", PROG, c->name, err.message);
            bson_destroy(&reply);
            return -1;
        }
        if (bson_iter_init(&it, &reply) &&
            bson_iter_find_descendant(&it, "cursor.firstBatch", &arr) &&
            BSON_ITER_HOLDS_ARRAY(&arr))
            bson_append_iter(&c->meta, "indexes", -1, &arr);
        bson_destroy(&reply);
        c->meta_json = bson_as_canonical_extended_json(&c->meta, NULL);
    }
    return 0;
}

typedef struct dump_sink {
    tool_stream *s;
    uint64_t crc;
    int64_t count, bytes;
    bool counting; /* only count (the archive's first pass) */
} dump_sink;

static int sink_doc(const bson_t *doc, void *arg)
{
    dump_sink *k = arg;
    k->count++;
    k->bytes += doc->len;
    if (k->counting)
        return 0;
    const uint8_t *d = bson_get_data(doc);
    k->crc = tool_crc64(k->crc, d, doc->len);
    return tool_stream_write(k->s, d, doc->len) == 0 ? 0 : 1;
}

/* Every document of c (with the query) into sink; 0 or -1 (printed). */
static int each(md_db *db, const dump_opts *o, const dump_coll *c, dump_sink *k)
{
    bson_t filter;
    char msg[256];
    md_error err;
    if (tool_json_parse(o->query ? o->query : "{}", -1, &filter, msg, sizeof msg) != 0) {
        fprintf(stderr, "%s: --query is not valid JSON: %s\n", PROG, msg);
        bson_destroy(&filter);
        return -1;
    }
    int rc = tool_each_doc(db, c->name, &filter, NULL, sink_doc, k, &err);
    bson_destroy(&filter);
    if (rc < 0)
        fprintf(stderr, "%s: reading %s failed: %s\n", PROG, c->name, err.message);
    else if (rc > 0)
        fprintf(stderr, "%s: writing %s: %s\n", PROG, k->s->path, strerror(errno));
    return rc ? -1 : 0;
}

static int write_file(const char *path, const void *data, size_t n, bool gzip)
{
    tool_stream s;
    if (tool_stream_open(&s, path, true, gzip) != 0 || tool_stream_write(&s, data, n) != 0 ||
        tool_stream_close(&s) != 0) {
        fprintf(stderr, "%s: cannot write %s: %s\n", PROG, path, strerror(errno));
        if (s.f || s.gz)
            tool_stream_close(&s);
        return -1;
    }
    return 0;
}

static int dump_dir(md_db *db, const dump_opts *o, dump_coll *cs, size_t n)
{
    char dir[2048], path[4096];
    const char *gz = o->gzip ? ".gz" : "";
    snprintf(dir, sizeof dir, "%s/%s", o->out, md_db_name(db));
    if (tool_mkdirs(dir) != 0) {
        fprintf(stderr, "%s: cannot create directory %s: %s\n", PROG, dir, strerror(errno));
        return -1;
    }
    for (size_t k = 0; k < n; k++) {
        tool_stream s;
        snprintf(path, sizeof path, "%s/%s.bson%s", dir, cs[k].name, gz);
        fprintf(stderr, "writing %s.%s to %s\n", md_db_name(db), cs[k].name, path);
        if (tool_stream_open(&s, path, true, o->gzip) != 0) {
            fprintf(stderr, "%s: cannot write %s: %s\n", PROG, path, strerror(errno));
            return -1;
        }
        dump_sink sink = {.s = &s};
        int rc = each(db, o, &cs[k], &sink);
        if (tool_stream_close(&s) != 0 && rc == 0) {
            fprintf(stderr, "%s: cannot write %s: %s\n", PROG, path, strerror(errno));
            rc = -1;
        }
        if (rc != 0)
            return -1;
        snprintf(path, sizeof path, "%s/%s.metadata.json%s", dir, cs[k].name, gz);
        if (write_file(path, cs[k].meta_json, strlen(cs[k].meta_json), o->gzip) != 0)
            return -1;
        fprintf(stderr, "done dumping %s.%s (%lld document%s)\n", md_db_name(db), cs[k].name,
                (long long)sink.count, sink.count == 1 ? "" : "s");
    }
    return 0;
}

static const uint8_t terminator[4] = {0xff, 0xff, 0xff, 0xff};

static int put_doc(tool_stream *s, const bson_t *b)
{
    return tool_stream_write(s, bson_get_data(b), b->len);
}

static void ns_header(bson_t *h, const char *dbname, const char *coll, bool eof, uint64_t crc)
{
    bson_init(h);
    BSON_APPEND_UTF8(h, "db", dbname);
    BSON_APPEND_UTF8(h, "collection", coll);
    BSON_APPEND_BOOL(h, "EOF", eof);
    BSON_APPEND_INT64(h, "CRC", (int64_t)crc);
}

static int dump_archive(md_db *db, const dump_opts *o, dump_coll *cs, size_t n)
{
    tool_stream s;
    const char *dbname = md_db_name(db);
    /* first pass: sizes for the prelude */
    for (size_t k = 0; k < n; k++) {
        dump_sink sink = {.counting = true};
        if (each(db, o, &cs[k], &sink) != 0)
            return -1;
        cs[k].size = sink.bytes;
    }
    if (tool_stream_open(&s, o->archive, true, o->gzip) != 0) {
        fprintf(stderr, "%s: cannot write %s: %s\n", PROG, o->archive, strerror(errno));
        return -1;
    }
    const uint8_t magic[4] = {0x6d, 0xe2, 0x99, 0x81};
    bson_t h;
    int rc = tool_stream_write(&s, magic, 4);
    bson_init(&h);
    BSON_APPEND_INT32(&h, "concurrent_collections", 1);
    BSON_APPEND_UTF8(&h, "version", "0.1");
    BSON_APPEND_UTF8(&h, "server_version", "4.0.0 (minidoc " MD_VERSION_STRING ")");
    BSON_APPEND_UTF8(&h, "tool_version", "minidoc dump " MD_VERSION_STRING);
    rc |= put_doc(&s, &h);
    bson_destroy(&h);
    for (size_t k = 0; k < n; k++) {
        bson_init(&h);
        BSON_APPEND_UTF8(&h, "db", dbname);
        BSON_APPEND_UTF8(&h, "collection", cs[k].name);
        BSON_APPEND_UTF8(&h, "metadata", cs[k].meta_json);
        if (cs[k].size <= INT32_MAX)
            BSON_APPEND_INT32(&h, "size", (int32_t)cs[k].size);
        else
            BSON_APPEND_INT64(&h, "size", cs[k].size);
        rc |= put_doc(&s, &h);
        bson_destroy(&h);
    }
    rc |= tool_stream_write(&s, terminator, 4);
    for (size_t k = 0; k < n && rc == 0; k++) {
        dump_sink sink = {.s = &s};
        fprintf(stderr, "writing %s.%s to archive '%s'\n", dbname, cs[k].name, o->archive);
        if (cs[k].size > 0) {
            ns_header(&h, dbname, cs[k].name, false, 0);
            rc |= put_doc(&s, &h);
            bson_destroy(&h);
            if (rc == 0 && each(db, o, &cs[k], &sink) != 0) {
                tool_stream_close(&s);
                return -1;
            }
            rc |= tool_stream_write(&s, terminator, 4);
        }
        ns_header(&h, dbname, cs[k].name, true, sink.crc);
        rc |= put_doc(&s, &h);
        bson_destroy(&h);
        rc |= tool_stream_write(&s, terminator, 4);
        fprintf(stderr, "done dumping %s.%s (%lld document%s)\n", dbname, cs[k].name,
                (long long)sink.count, sink.count == 1 ? "" : "s");
    }
    if (tool_stream_close(&s) != 0 || rc != 0) {
        fprintf(stderr, "%s: cannot write %s: %s\n", PROG, o->archive, strerror(errno));
        return -1;
    }
    return 0;
}

int tool_dump_main(int argc, char **argv)
{
    dump_opts o;
    if (parse(argc, argv, &o) != 0) {
        dump_usage(stderr);
        return 2;
    }
    md_db *db = tool_open_db(&o.db, false, PROG);
    if (!db)
        return 1;
    dump_coll *cs = NULL;
    size_t n = 0;
    int rc = list_colls(db, &o, &cs, &n);
    if (rc == 0)
        rc = o.archive ? dump_archive(db, &o, cs, n) : dump_dir(db, &o, cs, n);
    for (size_t k = 0; k < n; k++) {
        free(cs[k].name);
        bson_destroy(&cs[k].meta);
        bson_free(cs[k].meta_json);
    }
    free(cs);
    md_db_close(db);
    return rc == 0 ? 0 : 1;
}
