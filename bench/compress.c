/*
 * compress.c -- btree block compression on typical small documents,
 * measured through the public command API.
 *
 * For each block compressor (none, snappy, zstd) it opens a fresh btree
 * database, creates the collection exactly as a MongoDB user would,
 *
 *   {create: "c", storageEngine: {btree: {configString: "block_compressor=zstd"}}}
 *
 * inserts N documents of about 150 bytes (a user profile: _id, name,
 * email, age, city, tags, created, active, score) in batches of 1000,
 * runs fsync (a checkpoint: every page is reconciled and written) and reads
 * collStats.  One line per compressor:
 *
 *   name docs seconds docs_per_s compressionRatio=X storageSize=N size=N
 *
 * compressionRatio is collStats' btree.compressionRatio (uncompressed page
 * bytes over stored bytes of the pages the collection references),
 * storageSize the file size, size the documents' BSON bytes.
 *
 *   build/bench/compress [N]        (default 100000)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "minidoc.h"

#define BENCH_NAME "compress"
#include "bench.h"


/* A user profile of about 150 bytes; the values vary from one document to
 * the next like real data, the field names repeat like real data. */
static void append_doc(bson_t *docs, const char *key, int i)
{
    static const char *const cities[] = {"Paris", "Berlin", "Madrid", "Rome", "Lisbon",
                                         "Vienna", "Prague", "Dublin"};
    static const char *const tags[] = {"sports", "music", "books", "travel", "food", "games"};
    char name[32], email[48];
    bson_t d, arr;
    snprintf(name, sizeof name, "user%07d", i);
    snprintf(email, sizeof email, "user%07d@example.com", i);
    BSON_APPEND_DOCUMENT_BEGIN(docs, key, &d);
    BSON_APPEND_INT32(&d, "_id", i);
    BSON_APPEND_UTF8(&d, "name", name);
    BSON_APPEND_UTF8(&d, "email", email);
    BSON_APPEND_INT32(&d, "age", 18 + (int)((unsigned)i * 2654435761u % 60));
    BSON_APPEND_UTF8(&d, "city", cities[(unsigned)i * 40503u % 8]);
    BSON_APPEND_ARRAY_BEGIN(&d, "tags", &arr);
    BSON_APPEND_UTF8(&arr, "0", tags[i % 6]);
    BSON_APPEND_UTF8(&arr, "1", tags[(i / 6) % 6]);
    bson_append_array_end(&d, &arr);
    BSON_APPEND_DATE_TIME(&d, "created", 1500000000000LL + (int64_t)i * 61000);
    BSON_APPEND_BOOL(&d, "active", i % 3 != 0);
    BSON_APPEND_DOUBLE(&d, "score", (double)((unsigned)i * 7919u % 10000) / 100.0);
    bson_append_document_end(docs, &d);
}

static double sub_double(const bson_t *reply, const char *path)
{
    bson_iter_t it, f;
    return bson_iter_init(&it, reply) && bson_iter_find_descendant(&it, path, &f)
               ? bson_iter_as_double(&f)
               : -1;
}

static void bench_one(const char *comp, int n)
{
    char dir[] = "/tmp/minidoc-compress-XXXXXX", cfg[64], rm[128];
    md_db *db;
    md_error err;
    bson_t reply;
    if (!mkdtemp(dir)) {
        perror("compress: mkdtemp");
        exit(1);
    }
    bson_t *opts = BCON_NEW("engine", BCON_UTF8("btree"));
    if (md_db_open(dir, opts, &db, &err) != 0)
        die("open", &err);
    bson_destroy(opts);
    snprintf(cfg, sizeof cfg, "block_compressor=%s", comp);
    run(db, BCON_NEW("create", "c", "storageEngine", "{", "btree", "{", "configString",
                     BCON_UTF8(cfg), "}", "}"),
        "create", NULL);
    double t0 = now();
    for (int i = 0; i < n; i += 1000) {
        bson_t *cmd = bson_new(), docs;
        BSON_APPEND_UTF8(cmd, "insert", "c");
        BSON_APPEND_ARRAY_BEGIN(cmd, "documents", &docs);
        for (int j = i; j < i + 1000 && j < n; j++) {
            char key[16];
            snprintf(key, sizeof key, "%d", j - i);
            append_doc(&docs, key, j);
        }
        bson_append_array_end(cmd, &docs);
        run(db, cmd, "insert", NULL);
    }
    run(db, BCON_NEW("fsync", BCON_INT32(1)), "fsync", NULL);
    double dt = now() - t0;
    run(db, BCON_NEW("collStats", "c"), "collStats", &reply);
    printf("%s %d %.3f %.0f compressionRatio=%.2f storageSize=%.0f size=%.0f\n", comp, n, dt,
           n / dt, sub_double(&reply, "btree.compressionRatio"),
           sub_double(&reply, "storageSize"), sub_double(&reply, "size"));
    bson_destroy(&reply);
    md_db_close(db);
    snprintf(rm, sizeof rm, "rm -rf %s", dir);
    if (system(rm) != 0)
        fprintf(stderr, "compress: could not remove %s\n", dir);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 100000;
    if (n <= 0) {
        fprintf(stderr, "usage: compress [N>0]\n");
        return 2;
    }
    printf("# btree block compressors, %d documents of ~150 bytes\n", n);
    bench_one("none", n);
    bench_one("snappy", n);
    bench_one("zstd", n);
    return 0;
}
