/*
 * fuzz_open.h -- the body of fuzz_open_mmapv1.c and fuzz_open_btree.c:
 * opening a damaged data directory.  Opening must never crash on any
 * bytes: an error (DataCorruptionDetected and the like) is the expected
 * answer; a database that opens must survive a find, a find through an
 * index and a full validate.
 *
 * Two templates are built once per process in the scratch directory:
 *   clean   a small database (an indexed collection with inserts, moves,
 *           deletes; a capped collection), closed cleanly;
 *   crash   the same, copied while still open after durable ({j: true})
 *           writes: the journal / log holds commits the data files do not,
 *           so opening it replays them.
 * Each input is copied over a fresh copy of one template:
 *
 *   byte 0    bit 0: template (clean, crash); bits 1-2: how the rest lands
 *             in the file: 0 overwrite at the offset, 1 the same and then
 *             the journal's or log's checksums made right again
 *             (FZ_FIX_CHECKSUMS, so that replay reads the damage instead
 *             of stopping at a checksum), 2 the whole file is the bytes,
 *             3 the file cut at the offset and the bytes appended
 *   byte 1    which file (the template's files in sorted order, modulo)
 *   bytes 2-5 offset, little-endian, modulo the file's size + 1
 *   the rest  the bytes
 *
 * The including file defines FZ_OPTS (md_db_open's options, JSON),
 * FZ_CRASH_OPTS (the crash template's, e.g. no periodic flushes) and
 * fz_fix_checksums(name, bytes, len).
 */
#ifndef FUZZ_OPEN_H
#define FUZZ_OPEN_H

#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fz_fix_checksums(const char *name, uint8_t *p, size_t n);

#define FZ_MAX_FILES 64

static char fz_tmpl[2][512], fz_work[512];
static char *fz_files[2][FZ_MAX_FILES];
static int fz_nfiles[2];

static void fz_cmd(md_db *db, const char *json)
{
    bson_t cmd, reply;
    md_error err;
    if (md_json_parse(json, -1, &cmd, &err) != 0) {
        fprintf(stderr, "%s: %s\n", json, err.message);
        abort();
    }
    if (md_db_command(db, &cmd, &reply, &err) != 0) {
        fprintf(stderr, "template: %s: %s\n", json, err.message);
        abort();
    }
    bson_destroy(&cmd);
    bson_destroy(&reply);
}

static md_db *fz_open(const char *dir, const char *opts_json, md_error *err)
{
    bson_t o;
    md_db *db = NULL;
    if (md_json_parse(opts_json, -1, &o, err) != 0)
        abort();
    int rc = md_db_open(dir, &o, &db, err);
    bson_destroy(&o);
    return rc == 0 ? db : NULL;
}

/* The template's writes: inserts of many sizes, updates that grow
 * documents (moves on mmapv1), deletes (free lists), an index, a capped
 * collection that wraps. */
static void fz_fill(md_db *db, int round)
{
    char json[4096];
    if (round == 0) {
        fz_cmd(db, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"a\": 1}, \"name\": "
                   "\"a_1\"}, {\"key\": {\"s\": 1, \"a\": -1}, \"name\": \"s_1_a_-1\"}]}");
        fz_cmd(db, "{\"create\": \"cap\", \"capped\": true, \"size\": 8192}");
    }
    for (int i = 0; i < 40; i++) {
        int k = round * 40 + i;
        snprintf(json, sizeof json,
                 "{\"insert\": \"c\", \"documents\": [{\"_id\": %d, \"a\": %d, \"s\": "
                 "\"%.*s\", \"arr\": [1, \"two\", {\"x\": %d}]}], \"writeConcern\": {\"j\": %s}}",
                 k, k * 7 % 13, 1 + (k * 37) % 300,
                 "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                 "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                 "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                 "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
                 k, round ? "true" : "false");
        fz_cmd(db, json);
        snprintf(json, sizeof json,
                 "{\"insert\": \"cap\", \"documents\": [{\"n\": %d, \"pad\": \"%0*d\"}]}", k,
                 100 + k % 50, k);
        fz_cmd(db, json);
    }
    snprintf(json, sizeof json,
             "{\"update\": \"c\", \"updates\": [{\"q\": {\"a\": {\"$lt\": 4}}, \"u\": {\"$set\": "
             "{\"grown\": \"%0400d\"}, \"$inc\": {\"a\": 1}}, \"multi\": true}], "
             "\"writeConcern\": {\"j\": %s}}", round, round ? "true" : "false");
    fz_cmd(db, json);
    snprintf(json, sizeof json,
             "{\"delete\": \"c\", \"deletes\": [{\"q\": {\"a\": %d}, \"limit\": 0}], "
             "\"writeConcern\": {\"j\": %s}}", 5 + round, round ? "true" : "false");
    fz_cmd(db, json);
}

static void fz_templates(void)
{
    const char *s = fz_scratch_dir();
    md_error err;
    fz_quiet();
    snprintf(fz_tmpl[0], sizeof fz_tmpl[0], "%s/clean", s);
    snprintf(fz_tmpl[1], sizeof fz_tmpl[1], "%s/crash", s);
    snprintf(fz_work, sizeof fz_work, "%s/work", s);
    md_db *db = fz_open(fz_tmpl[0], FZ_OPTS, &err);
    if (!db) {
        fprintf(stderr, "template: %s\n", err.message);
        abort();
    }
    fz_fill(db, 0);
    md_db_close(db);
    /* crash: the clean one reopened, more durable writes, copied open */
    char src[600];
    snprintf(src, sizeof src, "%s/src", s);
    fz_copytree(fz_tmpl[0], src);
    db = fz_open(src, FZ_CRASH_OPTS, &err);
    if (!db) {
        fprintf(stderr, "template: %s\n", err.message);
        abort();
    }
    fz_fill(db, 1);
    fz_copytree(src, fz_tmpl[1]);
    md_db_close(db);
    fz_rmtree(src);
    for (int t = 0; t < 2; t++) {
        fz_nfiles[t] = fz_list_files(fz_tmpl[t], fz_files[t], FZ_MAX_FILES);
        for (int k = 0; k < fz_nfiles[t]; k++) {
            if (strstr(fz_files[t][k], ".lock"))
                fz_files[t][k][0] = '\0'; /* the lock file: no format to damage */
            if (getenv("FUZZ_LIST_FILES")) /* what byte 1 of an input chooses from */
                fprintf(stderr, "template %d file %d: %s\n", t, k, fz_files[t][k]);
        }
    }
}

static uint32_t fz_rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void fz_wr32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Put the input's bytes into the work copy's file `name`. */
static void fz_damage(const char *name, int how, uint32_t ofs, const uint8_t *b, size_t n)
{
    char path[1200];
    size_t len;
    snprintf(path, sizeof path, "%s/%s", fz_work, name);
    uint8_t *p = fz_read_file(path, &len);
    ofs = (uint32_t)(ofs % (len + 1));
    if (how == 2) {
        fz_write_file(path, b, n);
    } else if (how == 3) {
        p = realloc(p, ofs + n + 1);
        memcpy(p + ofs, b, n);
        fz_write_file(path, p, ofs + n);
    } else {
        size_t end = ofs + n > len ? ofs + n : len;
        p = realloc(p, end + 1);
        memcpy(p + ofs, b, n);
        if (how == 1)
            fz_fix_checksums(name, p, end);
        fz_write_file(path, p, end);
    }
    free(p);
}

/* What a damaged database that opened must survive. */
static void fz_use(md_db *db)
{
    static const char *const cmds[] = {
        "{\"listCollections\": 1}",
        "{\"find\": \"c\", \"filter\": {}, \"batchSize\": 1000}",
        "{\"find\": \"c\", \"filter\": {\"a\": {\"$gte\": 2}}, \"hint\": \"a_1\"}",
        "{\"find\": \"c\", \"filter\": {\"s\": {\"$gt\": \"\"}}, \"sort\": {\"s\": 1, \"a\": -1},"
        " \"hint\": \"s_1_a_-1\"}",
        "{\"find\": \"cap\", \"filter\": {}, \"sort\": {\"$natural\": -1}}",
        "{\"count\": \"c\"}",
        "{\"listIndexes\": \"c\"}",
        "{\"validate\": \"c\", \"full\": true}",
        "{\"validate\": \"cap\", \"full\": true}",
        "{\"collStats\": \"c\"}",
    };
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        bson_t cmd, reply;
        md_json_parse(cmds[i], -1, &cmd, NULL);
        md_db_command(db, &cmd, &reply, NULL);
        bson_destroy(&cmd);
        bson_destroy(&reply);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    md_error err;
    if (size < 6 || size > (1u << 20))
        return 0;
    if (!fz_nfiles[0])
        fz_templates();
    int t = data[0] & 1, how = (data[0] >> 1) & 3;
    const char *name = fz_files[t][data[1] % fz_nfiles[t]];
    if (!*name)
        return 0;
    fz_rmtree(fz_work);
    fz_copytree(fz_tmpl[t], fz_work);
    fz_damage(name, how, fz_rd32(data + 2), data + 6, size - 6);
    md_db *db = fz_open(fz_work, FZ_OPTS, &err);
    if (db) {
        fz_use(db);
        md_db_close(db);
    }
    return 0;
}

#endif
