/*
 * inplace.c -- in-place updates against document moves, measured.
 *
 * Inserts N documents of about 60 bytes, then runs two update passes by _id
 * through the update command, exactly as a MongoDB client would:
 *
 *   inc     $inc of an int32: the size is unchanged, so mmapv1 writes the
 *           damaged bytes in place and nothing moves
 *   grow    $set of a new 64-byte string: the document no longer fits its
 *           128-byte powerOf2 slot and moves (noPadding moves too;
 *           paddingFactor depends on how far the factor has grown)
 *
 * For each pass it prints one line `name ops seconds ops_per_s`, then the
 * collection's moves, in-place updates, size and storageSize from
 * collStats, so the claim "size-preserving updates never move" is a number
 * anyone can reprint:  build/bench/inplace [N] [engine] [strategy]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "minidoc.h"

#define BENCH_NAME "inplace"
#include "bench.h"

static void update_pass(md_db *db, int n, const char *name, bson_t *(*make)(int i))
{
    double t0 = now();
    for (int i = 0; i < n; i++) {
        bson_t *u = make(i);
        bson_t *cmd = BCON_NEW("update", "c", "updates", "[", "{", "q", "{", "_id",
                               BCON_INT32(i), "}", "u", BCON_DOCUMENT(u), "}", "]");
        run(db, cmd, name, NULL);
        bson_destroy(u);
    }
    double dt = now() - t0;
    printf("%s %d %.3f %.0f\n", name, n, dt, n / dt);
}

static bson_t *make_inc(int i)
{
    return BCON_NEW("$inc", "{", "n", BCON_INT32(1), "}");
}

static bson_t *make_grow(int i)
{
    static const char pad[] = "0123456789012345678901234567890123456789012345678901234567890123";
    return BCON_NEW("$set", "{", "pad", BCON_UTF8(pad), "}");
}

static void print_stats(md_db *db, const char *engine)
{
    bson_t reply;
    md_error err;
    bson_t *cmd = BCON_NEW("collStats", "c");
    if (md_db_command(db, cmd, &reply, &err) != 0)
        die("collStats", &err);
    bson_iter_t it, sub;
    int64_t size = 0, storage = 0, moves = -1, inplace = -1;
    if (bson_iter_init_find(&it, &reply, "size"))
        size = bson_iter_as_int64(&it);
    if (bson_iter_init_find(&it, &reply, "storageSize"))
        storage = bson_iter_as_int64(&it);
    if (bson_iter_init_find(&it, &reply, engine) && BSON_ITER_HOLDS_DOCUMENT(&it) &&
        bson_iter_recurse(&it, &sub)) {
        while (bson_iter_next(&sub)) {
            if (strcmp(bson_iter_key(&sub), "moves") == 0)
                moves = bson_iter_as_int64(&sub);
            else if (strcmp(bson_iter_key(&sub), "inPlaceUpdates") == 0)
                inplace = bson_iter_as_int64(&sub);
        }
    }
    printf("  stats moves=%lld inPlaceUpdates=%lld size=%lld storageSize=%lld\n",
           (long long)moves, (long long)inplace, (long long)size, (long long)storage);
    bson_destroy(&reply);
    bson_destroy(cmd);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 100000;
    const char *engine = argc > 2 ? argv[2] : "mmapv1";
    const char *strategy = argc > 3 ? argv[3] : "powerOf2";
    char dir[] = "/tmp/minidoc-bench-XXXXXX";
    if (n <= 0 || !mkdtemp(dir)) {
        fprintf(stderr, "usage: inplace [N>0] [engine] [powerOf2|noPadding|paddingFactor]\n");
        return 2;
    }
    md_db *db;
    md_error err;
    bson_t *opts = BCON_NEW("engine", BCON_UTF8(engine));
    if (md_db_open(dir, opts, &db, &err) != 0)
        die("open", &err);
    bson_destroy(opts);
    run(db,
        BCON_NEW("create", "c", "storageEngine", "{", "mmapv1", "{", "allocationStrategy",
                 BCON_UTF8(strategy), "}", "}"),
        "create", NULL);
    printf("# engine=%s strategy=%s documents=%d\n", engine, strategy, n);

    double t0 = now();
    for (int i = 0; i < n; i += 1000) {
        bson_t *cmd = bson_new();
        bson_t docs;
        BSON_APPEND_UTF8(cmd, "insert", "c");
        BSON_APPEND_ARRAY_BEGIN(cmd, "documents", &docs);
        for (int j = i; j < i + 1000 && j < n; j++) {
            char key[16];
            bson_t d;
            snprintf(key, sizeof key, "%d", j - i);
            BSON_APPEND_DOCUMENT_BEGIN(&docs, key, &d);
            BSON_APPEND_INT32(&d, "_id", j);
            BSON_APPEND_INT32(&d, "n", 0);
            BSON_APPEND_UTF8(&d, "name", "a typical small document");
            bson_append_document_end(&docs, &d);
        }
        bson_append_array_end(cmd, &docs);
        run(db, cmd, "insert", NULL);
    }
    double dt = now() - t0;
    printf("insert %d %.3f %.0f\n", n, dt, n / dt);
    print_stats(db, engine);

    update_pass(db, n, "inc", make_inc);
    print_stats(db, engine);
    update_pass(db, n, "grow", make_grow);
    print_stats(db, engine);

    md_db_close(db);
    char rm[128];
    snprintf(rm, sizeof rm, "rm -rf %s", dir);
    return system(rm) == 0 ? 0 : 1;
}
