/*
 * tsan_q_threads.c -- the multi-threaded workloads of q_threads.h through
 * md_db_command under ThreadSanitizer (`make test-tsan`; Criterion cannot
 * start under TSan, test_q_threads.c runs the same workloads in the suite):
 * the 8-reader queue, counters in one and in three collections with
 * scanners beside them, on mmapv1 (collection and database lock
 * granularity, journal on) and on btree (document-level, log on, tiny cache
 * so eviction and checkpoints race the readers).
 */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>

#include "minidoc.h"
#include "q_threads.h"

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static int run(const char *label, bson_t *opts)
{
    char dir[64] = "/tmp/md_tsan_q_XXXXXX";
    md_db *db;
    md_error err;
    int bad = 0;
    if (!mkdtemp(dir))
        return 1;
    if (md_db_open(dir, opts, &db, &err) != 0) {
        fprintf(stderr, "%s: open: %s\n", label, err.message);
        return 1;
    }
    bad += qt_queue(db, 2, 8, 100);
    bad += qt_counters(db, 4, 2, 1, 80);
    md_db_close(db);
    if (md_db_open(dir, opts, &db, &err) != 0) {
        fprintf(stderr, "%s: reopen: %s\n", label, err.message);
        return 1;
    }
    bad += qt_cmd(db, qt_json("{\"dropDatabase\": 1}"), NULL) != 0;
    bad += qt_counters(db, 4, 2, 3, 60);
    md_db_close(db);
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    bson_destroy(opts);
    printf("%s: %s\n", label, bad ? "FAILED" : "ok");
    return bad;
}

int main(void)
{
    int bad = 0;
    bad += run("mmapv1/collection",
               BCON_NEW("engine", "mmapv1", "mmapv1", "{", "firstFileSize",
                        BCON_INT32(1 << 20), "journalCommitInterval", BCON_INT32(2), "}"));
    bad += run("mmapv1/database",
               BCON_NEW("engine", "mmapv1", "lockGranularity", "database", "mmapv1", "{",
                        "firstFileSize", BCON_INT32(1 << 20), "}"));
    bad += run("btree", BCON_NEW("engine", "btree", "btree", "{", "cacheSize",
                                 BCON_INT32(256 << 10), "commitIntervalMs", BCON_INT32(2),
                                 "checkpointIntervalMs", BCON_INT32(50), "}"));
    return bad ? 1 : 0;
}
