/*
 * scan.c -- what one FIFO fetch of the simulator's Queue costs each engine
 * with nothing around it: the walk past the jobs already taken.
 *
 * The simulator's Queue (patterns/queue.c, queue_fifo) indexes {startTime},
 * {createdOn}, {priority: -1, createdOn} and {jobId}, none of which holds
 * both the filter and the sort, so its fetch
 *     findAndModify({query: {startTime: Date(0)}, sort: {createdOn: 1},
 *                    update: {$set: {startTime: <now>}}})
 * walks {createdOn} from the oldest job, fetching and matching every job
 * already taken before it reaches a waiting one.  Here one thread publishes
 * --jobs jobs, then takes --fetches of them in order, so the i-th fetch
 * walks past i taken jobs: the mean walk is fetches / 2 jobs.  The journal
 * and the log are on, as in the patterns runner.
 *
 * Per engine it prints the mean time per fetch and per job walked:
 *     scan ENGINE jobs=N fetches=F us_per_fetch=X ns_per_job=X
 * This is the part of the Queue that the runner's service time measures
 * with little backlog; docs/patterns.md has the same fetch under 200
 * clients.
 *
 *   build/bench/scan [--quick] [--engine mmapv1|btree] [--jobs N] [--fetches F]
 */
#define BENCH_NAME "scan"
#include "bench.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void one(const char *engine, int jobs, int fetches)
{
    char dir[] = "/tmp/minidoc-scan-XXXXXX";
    if (!mkdtemp(dir))
        fail("mkdtemp failed");
    bson_t *opts = BCON_NEW("engine", BCON_UTF8(engine));
    md_db *db;
    md_error err;
    if (md_db_open(dir, opts, &db, &err) != 0)
        die("open", &err);
    bson_destroy(opts);
    static const char *const keys[] = {"startTime", "createdOn", "priority", "jobId"};
    for (int i = 0; i < 4; i++)
        run(db,
            BCON_NEW("createIndexes", BCON_UTF8("queue"), "indexes", "[", "{", "key", "{",
                     keys[i], BCON_INT32(i == 2 ? -1 : 1), "}", "name", BCON_UTF8(keys[i]),
                     "}", "]"),
            "createIndexes", NULL);
    bson_oid_t job_id;
    bson_oid_init_from_data(&job_id, (const uint8_t *)"000000000000");
    for (int i = 0; i < jobs; i++)
        run(db,
            BCON_NEW("insert", BCON_UTF8("queue"), "documents", "[", "{", "startTime",
                     BCON_DATE_TIME(0), "endTime", BCON_DATE_TIME(0), "jobId",
                     BCON_OID(&job_id), "createdOn", BCON_DATE_TIME(1000 + i), "priority",
                     BCON_INT32(i % 10), "payload", "{", "}", "}", "]"),
            "insert", NULL);
    double t0 = now();
    for (int i = 0; i < fetches; i++) {
        bson_t reply;
        bson_iter_t it, v;
        run(db,
            BCON_NEW("findAndModify", BCON_UTF8("queue"), "query", "{", "startTime",
                     BCON_DATE_TIME(0), "}", "sort", "{", "createdOn", BCON_INT32(1), "}",
                     "update", "{", "$set", "{", "startTime", BCON_DATE_TIME(1 + i), "}",
                     "}"),
            "findAndModify", &reply);
        /* the oldest waiting job, every time */
        if (!bson_iter_init_find(&it, &reply, "value") || !BSON_ITER_HOLDS_DOCUMENT(&it) ||
            !bson_iter_recurse(&it, &v) || !bson_iter_find(&v, "createdOn") ||
            bson_iter_date_time(&v) != 1000 + i)
            fail("%s: fetch %d did not take job %d", engine, i, i);
        bson_destroy(&reply);
    }
    double t = now() - t0;
    printf("scan %s jobs=%d fetches=%d us_per_fetch=%.1f ns_per_job=%.1f\n", engine, jobs,
           fetches, t / fetches * 1e6, t / ((double)fetches * fetches / 2) * 1e9);
    md_db_close(db);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fail("could not remove %s", dir);
}

int main(int argc, char **argv)
{
    int jobs = 20000, fetches = 3000;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            jobs = 2000, fetches = 300;
        else if (strcmp(argv[i], "--engine") == 0 && i + 1 < argc)
            only = argv[++i];
        else if (strcmp(argv[i], "--jobs") == 0 && i + 1 < argc)
            jobs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--fetches") == 0 && i + 1 < argc)
            fetches = atoi(argv[++i]);
        else
            fail("usage: build/bench/scan [--quick] [--engine mmapv1|btree] [--jobs N] "
                 "[--fetches F]");
    }
    if (jobs < 1 || fetches < 1 || fetches > jobs)
        fail("need 1 <= fetches <= jobs");
    static const char *const engines[] = {"mmapv1", "btree"};
    for (int e = 0; e < 2; e++)
        if (!only || strcmp(only, engines[e]) == 0)
            one(engines[e], jobs, fetches);
    return 0;
}
