/*
 * test_agg_pipeline.c -- the aggregation pipeline beyond the conformance
 * cases: the blocking stages' spill to disk ($sort, $group, $bucketAuto
 * forced past a small memory limit must give exactly the in-memory
 * results, and leave no file behind), the limits' errors without
 * allowDiskUse, the cursor of an aggregate (batchSize, getMore,
 * killCursors), md_collection_aggregate, and bad input.  Every test runs
 * on every engine.
 */
#include <dirent.h>

#include "test_q_util.h"

/* query/agg_spill.c: runs written to disk by this process */
int64_t agg_spill_count(void);

/* n documents {_id: i, k: i % groups, v: pseudo-random, s: a string, t: [..]} */
static void fill(tdb *t, int n, int groups)
{
    bson_t cmd = BSON_INITIALIZER, arr, d, tags;
    char key[16], s[64];
    uint32_t x = 12345;
    BSON_APPEND_UTF8(&cmd, "insert", "c");
    BSON_APPEND_ARRAY_BEGIN(&cmd, "documents", &arr);
    for (int i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        snprintf(key, sizeof key, "%d", i);
        bson_append_document_begin(&arr, key, -1, &d);
        BSON_APPEND_INT32(&d, "_id", i);
        BSON_APPEND_INT32(&d, "k", i % groups);
        BSON_APPEND_INT32(&d, "v", (int32_t)((x >> 8) % 1000));
        snprintf(s, sizeof s, "str-%08u-padding-padding", (x >> 4) % 100000);
        BSON_APPEND_UTF8(&d, "s", s);
        BSON_APPEND_ARRAY_BEGIN(&d, "t", &tags);
        BSON_APPEND_INT32(&tags, "0", i % 7);
        BSON_APPEND_INT32(&tags, "1", i % 5);
        bson_append_array_end(&d, &tags);
        bson_append_document_end(&arr, &d);
    }
    bson_append_array_end(&cmd, &arr);
    bson_t r;
    md_error err;
    int rc = md_db_command(t->db, &cmd, &r, &err);
    cr_assert_eq(rc, 0, "insert: %s", err.message);
    bson_destroy(&r);
    bson_destroy(&cmd);
}

static void set_limits(tdb *t, long long sort, long long group)
{
    T_RUN(t, "{\"setParameter\": 1, \"internalDocumentSourceSortMaxBlockingSortBytes\": %lld}",
          sort);
    T_RUN(t, "{\"setParameter\": 1, \"internalDocumentSourceGroupMaxMemoryBytes\": %lld}", group);
}

/* The firstBatch of an aggregate that must fit in one batch, as a copy. */
static bson_t *batch_of(tdb *t, const char *pipeline, bool disk)
{
    bson_t *r = T_OK(t, "{\"aggregate\": \"c\", \"pipeline\": %s, \"cursor\": {\"batchSize\": "
                        "1000000}, \"allowDiskUse\": %s}",
                     pipeline, disk ? "true" : "false");
    bson_iter_t it;
    cr_assert(t_find(r, "cursor.id", &it) && bson_iter_as_int64(&it) == 0,
              "the results must fit one batch");
    cr_assert(t_find(r, "cursor.firstBatch", &it));
    const uint8_t *data;
    uint32_t len;
    bson_iter_array(&it, &len, &data);
    bson_t *b = bson_new_from_data(data, len);
    bson_destroy(r);
    return b;
}

static int tmp_files(tdb *t)
{
    char dir[300];
    int n = 0;
    snprintf(dir, sizeof dir, "%s/_tmp", t->dir);
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (de->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

/* The pipeline with the default limits (expect_docs results, -1: any), then with tiny ones and
 * allowDiskUse: the same results, and runs were written. */
static void same_when_spilled(tdb *t, const char *pipeline, int expect_docs)
{
    set_limits(t, 100 * 1024 * 1024, 100 * 1024 * 1024);
    bson_t *mem = batch_of(t, pipeline, false);
    cr_assert(expect_docs < 0 || (int)bson_count_keys(mem) == expect_docs,
              "[%s] %s: %d results", t->engine, pipeline, (int)bson_count_keys(mem));
    set_limits(t, 20000, 20000);
    int64_t before = agg_spill_count();
    bson_t *disk = batch_of(t, pipeline, true);
    cr_assert_gt(agg_spill_count(), before + 1, "[%s] %s did not spill", t->engine, pipeline);
    cr_assert(mem->len == disk->len && memcmp(bson_get_data(mem), bson_get_data(disk),
                                              mem->len) == 0,
              "[%s] %s: spilled results differ", t->engine, pipeline);
    cr_assert_eq(tmp_files(t), 0, "spill files left behind");
    bson_destroy(mem);
    bson_destroy(disk);
}


Test(agg_pipeline, sort_spill_equals_memory)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        fill(&t, 3000, 37);
        same_when_spilled(&t, "[{\"$sort\": {\"v\": 1, \"s\": -1}}]", 3000);
        same_when_spilled(&t, "[{\"$match\": {\"k\": {\"$lt\": 20}}}, {\"$sort\": {\"s\": 1}}, "
                              "{\"$project\": {\"s\": 1, \"v\": 1}}]", 1623);
        /* ties (v repeats) keep the input order in both */
        same_when_spilled(&t, "[{\"$sort\": {\"v\": -1}}, {\"$skip\": 5}]", 2995);
        same_when_spilled(&t, "[{\"$unwind\": \"$t\"}, {\"$sort\": {\"t\": 1, \"v\": 1}}]", 6000);
    }
}

/* $stdDevPop / $stdDevSamp: partial states merged by the parallel formula
 * agree with the one-pass result to rounding (MongoDB merges them the same
 * way across shards). */
static void stddev_spilled(tdb *t)
{
    const char *p = "[{\"$group\": {\"_id\": \"$k\", \"p\": {\"$stdDevPop\": \"$v\"}, "
                    "\"s\": {\"$stdDevSamp\": \"$v\"}}}, {\"$sort\": {\"_id\": 1}}]";
    set_limits(t, 100 * 1024 * 1024, 100 * 1024 * 1024);
    bson_t *mem = batch_of(t, p, false);
    set_limits(t, 20000, 20000);
    int64_t before = agg_spill_count();
    bson_t *disk = batch_of(t, p, true);
    cr_assert_gt(agg_spill_count(), before);
    cr_assert_eq(bson_count_keys(mem), bson_count_keys(disk));
    for (uint32_t i = 0; i < bson_count_keys(mem); i++) {
        char path[32];
        for (int f = 0; f < 2; f++) {
            snprintf(path, sizeof path, "%u.%s", i, f ? "s" : "p");
            double a = t_dbl(mem, path), b = t_dbl(disk, path);
            cr_assert(a - b < 1e-9 * (a > 1 ? a : 1) && b - a < 1e-9 * (a > 1 ? a : 1),
                      "%s: %.17g vs %.17g", path, a, b);
        }
    }
    bson_destroy(mem);
    bson_destroy(disk);
}

Test(agg_pipeline, group_spill_equals_memory)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        fill(&t, 3000, 500);
        same_when_spilled(&t,
                          "[{\"$group\": {\"_id\": \"$k\", \"n\": {\"$sum\": 1}, \"sv\": {\"$sum\": "
                          "\"$v\"}, \"avg\": {\"$avg\": \"$v\"}, \"lo\": {\"$min\": \"$s\"}, "
                          "\"hi\": {\"$max\": \"$v\"}, \"f\": {\"$first\": \"$_id\"}, \"l\": "
                          "{\"$last\": \"$_id\"}, \"ids\": {\"$push\": \"$_id\"}, \"set\": "
                          "{\"$addToSet\": {\"$mod\": [\"$v\", 3]}}}}, {\"$sort\": {\"_id\": "
                          "1}}]",
                          500);
        stddev_spilled(&t);
        same_when_spilled(&t, "[{\"$unwind\": \"$t\"}, {\"$group\": {\"_id\": {\"t\": \"$t\", "
                              "\"k\": \"$k\"}, \"n\": {\"$sum\": 1}}}, {\"$sort\": {\"_id.t\": 1, "
                              "\"_id.k\": 1}}]",
                          -1);
        same_when_spilled(&t, "[{\"$bucketAuto\": {\"groupBy\": \"$v\", \"buckets\": 7, "
                              "\"output\": {\"n\": {\"$sum\": 1}, \"ids\": {\"$push\": "
                              "\"$_id\"}}}}]",
                          7);
    }
}

Test(agg_pipeline, limits_without_disk_use)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        fill(&t, 500, 500);
        set_limits(&t, 20000, 20000);
        T_ERR(&t, 16819, "Sort exceeded memory limit of 20000 bytes",
              "{\"aggregate\": \"c\", \"pipeline\": [{\"$sort\": {\"v\": 1}}], \"cursor\": {}}");
        T_ERR(&t, 16945, "Exceeded memory limit for $group",
              "{\"aggregate\": \"c\", \"pipeline\": [{\"$group\": {\"_id\": \"$_id\"}}], "
              "\"cursor\": {}}");
        T_ERR(&t, 16819, NULL,
              "{\"aggregate\": \"c\", \"pipeline\": [{\"$bucketAuto\": {\"groupBy\": \"$v\", "
              "\"buckets\": 2}}], \"cursor\": {}}");
        /* a top-k sort needs no more than its k documents */
        bson_t *r = T_OK(&t, "{\"aggregate\": \"c\", \"pipeline\": [{\"$sort\": {\"v\": -1}}, "
                             "{\"$limit\": 3}], \"cursor\": {}}");
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 3);
        bson_destroy(r);
        /* the open options set the same limits */
        t_close(&t);
        t_open(&t, (*e_)->name);
        md_db_close(t.db);
        bson_t *o = BCON_NEW("engine", BCON_UTF8(t.engine), "mmapv1", "{", "firstFileSize",
                             BCON_INT32(131072), "nsSize", BCON_INT32(65536), "}",
                             "internalDocumentSourceSortMaxBlockingSortBytes", BCON_INT32(1000));
        md_error err;
        cr_assert_eq(md_db_open(t.dir, o, &t.db, &err), 0, "%s", err.message);
        bson_destroy(o);
        fill(&t, 50, 5);
        T_ERR(&t, 16819, "limit of 1000 bytes",
              "{\"aggregate\": \"c\", \"pipeline\": [{\"$sort\": {\"v\": 1}}], \"cursor\": {}}");
    }
}

Test(agg_pipeline, cursor_batches_and_get_more)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        fill(&t, 10, 3);
        bson_t *r = T_OK(&t, "{\"aggregate\": \"c\", \"pipeline\": [{\"$sort\": {\"_id\": -1}}], "
                             "\"cursor\": {\"batchSize\": 4}}");
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 4);
        cr_assert_eq(t_i64(r, "cursor.firstBatch.0._id"), 9);
        int64_t id = t_i64(r, "cursor.id");
        cr_assert_neq(id, 0);
        cr_assert_str_eq(t_str(r, "cursor.ns"), "test.c");
        bson_destroy(r);
        r = T_OK(&t, "{\"getMore\": {\"$numberLong\": \"%lld\"}, \"collection\": \"c\", "
                     "\"batchSize\": 4}", (long long)id);
        cr_assert_eq(t_len(r, "cursor.nextBatch"), 4);
        cr_assert_eq(t_i64(r, "cursor.nextBatch.0._id"), 5);
        cr_assert_eq(t_i64(r, "cursor.id"), id);
        bson_destroy(r);
        r = T_OK(&t, "{\"getMore\": {\"$numberLong\": \"%lld\"}, \"collection\": \"c\"}",
                 (long long)id);
        cr_assert_eq(t_len(r, "cursor.nextBatch"), 2);
        cr_assert_eq(t_i64(r, "cursor.nextBatch.1._id"), 0);
        cr_assert_eq(t_i64(r, "cursor.id"), 0);
        bson_destroy(r);
        T_ERR(&t, 43, NULL, "{\"getMore\": {\"$numberLong\": \"%lld\"}, \"collection\": \"c\"}",
              (long long)id);

        /* killCursors ends an aggregate's cursor */
        r = T_OK(&t, "{\"aggregate\": \"c\", \"pipeline\": [], \"cursor\": {\"batchSize\": 0}}");
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 0);
        id = t_i64(r, "cursor.id");
        cr_assert_neq(id, 0);
        bson_destroy(r);
        r = T_OK(&t, "{\"killCursors\": \"c\", \"cursors\": [{\"$numberLong\": \"%lld\"}]}",
                 (long long)id);
        cr_assert_eq(t_len(r, "cursorsKilled"), 1);
        bson_destroy(r);
        T_ERR(&t, 43, NULL, "{\"getMore\": {\"$numberLong\": \"%lld\"}, \"collection\": \"c\"}",
              (long long)id);

        /* dropping the collection kills its aggregate cursors */
        r = T_OK(&t, "{\"aggregate\": \"c\", \"pipeline\": [], \"cursor\": {\"batchSize\": 1}}");
        id = t_i64(r, "cursor.id");
        bson_destroy(r);
        T_RUN(&t, "{\"drop\": \"c\"}");
        T_ERR(&t, 43, NULL, "{\"getMore\": {\"$numberLong\": \"%lld\"}, \"collection\": \"c\"}",
              (long long)id);
    }
}

Test(agg_pipeline, typed_aggregate)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        fill(&t, 250, 10);
        md_collection *c = md_db_get_collection(t.db, "c");
        bson_t *pipe = BCON_NEW("pipeline", "[", "{", "$match", "{", "k", BCON_INT32(3), "}",
                                "}", "{", "$project", "{", "_id", BCON_INT32(1), "}", "}", "]");
        bson_t *opts = BCON_NEW("batchSize", BCON_INT32(7));
        md_cursor *cur = md_collection_aggregate(c, pipe, opts);
        const bson_t *doc;
        int n = 0;
        while (md_cursor_next(cur, &doc)) {
            bson_iter_t it;
            cr_assert(bson_iter_init_find(&it, doc, "_id"));
            cr_assert_eq(bson_iter_int32(&it) % 10, 3);
            n++;
        }
        cr_assert_not(md_cursor_error(cur, NULL));
        cr_assert_eq(n, 25);
        md_cursor_destroy(cur);
        bson_destroy(pipe);
        bson_destroy(opts);

        /* the pipeline as a bare array, no options */
        pipe = BCON_NEW("0", "{", "$count", BCON_UTF8("n"), "}");
        cur = md_collection_aggregate(c, pipe, NULL);
        cr_assert(md_cursor_next(cur, &doc));
        bson_iter_t it;
        cr_assert(bson_iter_init_find(&it, doc, "n") && bson_iter_int32(&it) == 250);
        cr_assert_not(md_cursor_next(cur, &doc));
        md_cursor_destroy(cur);
        bson_destroy(pipe);

        /* an error surfaces through md_cursor_error */
        pipe = BCON_NEW("0", "{", "$bogus", BCON_INT32(1), "}");
        cur = md_collection_aggregate(c, pipe, NULL);
        cr_assert_not(md_cursor_next(cur, &doc));
        md_error err;
        cr_assert(md_cursor_error(cur, &err));
        cr_assert_eq(err.code, 40324);
        cr_assert_str_eq(err.message, "Unrecognized pipeline stage name: '$bogus'");
        md_cursor_destroy(cur);
        bson_destroy(pipe);

        /* a cursor destroyed before its end is killed */
        pipe = BCON_NEW("0", "{", "$match", "{", "}", "}");
        opts = BCON_NEW("batchSize", BCON_INT32(2));
        cur = md_collection_aggregate(c, pipe, opts);
        cr_assert(md_cursor_next(cur, &doc));
        md_cursor_destroy(cur);
        bson_t *r = T_OK(&t, "{\"serverStatus\": 1}");
        cr_assert_eq(t_i64(r, "metrics.cursor.open.total"), 0);
        bson_destroy(r);
        bson_destroy(pipe);
        bson_destroy(opts);
        md_collection_destroy(c);
    }
}

Test(agg_pipeline, bad_input)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        fill(&t, 5, 2);
        T_ERR(&t, 40324, "Unrecognized pipeline stage name: '$nope'",
              "{\"aggregate\": \"c\", \"pipeline\": [{\"$nope\": 1}], \"cursor\": {}}");
        T_ERR(&t, 168, NULL,
              "{\"aggregate\": \"c\", \"pipeline\": [{\"$project\": {\"x\": {\"$nope\": 1}}}], "
              "\"cursor\": {}}");
        T_ERR(&t, 168, NULL,
              "{\"aggregate\": \"c\", \"pipeline\": [{\"$group\": {\"_id\": {\"$nope\": 1}}}], "
              "\"cursor\": {}}");
        T_ERR(&t, 15952, NULL,
              "{\"aggregate\": \"c\", \"pipeline\": [{\"$group\": {\"_id\": 1, \"x\": "
              "{\"$nope\": 1}}}], \"cursor\": {}}");
        T_ERR(&t, 14, NULL, "{\"aggregate\": \"c\", \"pipeline\": [[]], \"cursor\": {}}");
        T_ERR(&t, 16554, NULL,
              "{\"aggregate\": \"c\", \"pipeline\": [{\"$project\": {\"x\": {\"$add\": [\"$s\", "
              "1]}}}], \"cursor\": {}}");
        T_RUN(&t, "{\"create\": \"capped\", \"capped\": true, \"size\": 4096}");
        T_ERR(&t, 17152, "is capped",
              "{\"aggregate\": \"c\", \"pipeline\": [{\"$out\": \"capped\"}], \"cursor\": {}}");
        bson_t *r = T_OK(&t, "{\"find\": \"capped\"}");
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 0);
        bson_destroy(r);
        /* $lookup from a missing collection: empty arrays */
        r = T_OK(&t, "{\"aggregate\": \"c\", \"pipeline\": [{\"$lookup\": {\"from\": \"none\", "
                     "\"localField\": \"k\", \"foreignField\": \"k\", \"as\": \"j\"}}], "
                     "\"cursor\": {}}");
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 5);
        cr_assert_eq(t_len(r, "cursor.firstBatch.4.j"), 0);
        bson_destroy(r);
        /* deep nesting and garbage never crash */
        T_ERR(&t, 9, NULL,
              "{\"aggregate\": \"c\", \"pipeline\": [{\"$lookup\": {\"from\": \"c\", \"as\": "
              "\"x\", \"pipeline\": [{\"$lookup\": {\"from\": \"c\", \"as\": 5, \"pipeline\": "
              "[]}}]}}], \"cursor\": {}}");
        T_ERR(&t, 40324, NULL,
              "{\"aggregate\": \"c\", \"pipeline\": [{\"$facet\": {\"a\": [{\"$limit\": 1}], "
              "\"b\": [{\"$zz\": 1}]}}], \"cursor\": {}}");
    }
}
