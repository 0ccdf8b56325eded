/*
 * test_timeseries.c -- 5.9 Time Series (patterns/timeseries.c) on every
 * engine: the upserting $inc of one second's counter, preAllocateHour, the
 * hour count with erratum 2 corrected, the {page: 1, timestamp: 1} index
 * the way explain shows it, the scenario from several threads with its
 * check, and what the pattern is about: a preallocated bucket is updated
 * in place on mmapv1 (no moves, a few bytes written per view) while btree
 * writes the whole bucket again on every view.
 */
#include "pt_test_util.h"

#define HOUR_10 1388570400000LL /* ISODate("2014-01-01T10:00:00Z") */
#define MINUTE 60000LL

static bool in_place(const ptt_db *t)
{
    const eng_ops *ops = eng_find(t->engine);
    return ops && ops->has_damages;
}

/* The collection's collStats reply (caller destroys). */
static bson_t *coll_stats(ptt_db *t, const char *coll)
{
    return PTT_OK(t, "{\"collStats\": \"%s\"}", coll);
}

/* A counter of the engine's collStats subdocument ("mmapv1.moves", ...). */
static int64_t engine_stat(ptt_db *t, const bson_t *stats, const char *field)
{
    char path[128];
    snprintf(path, sizeof path, "%s.%s", t->engine, field);
    return ptt_i64(stats, path);
}

static int32_t second_count(const bson_t *bucket, int s)
{
    char path[32];
    snprintf(path, sizeof path, "seconds.%d", s);
    return (int32_t)ptt_i64(bucket, path);
}

Test(timeseries, record_view_upserts_then_increments)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        bson_t b;
        int64_t minute = HOUR_10 + MINUTE;
        /* no bucket yet: the upsert creates it from the query's equalities */
        cr_assert_eq(pt_ts_find_bucket(t.db, "/index.htm", minute, &b, &err), MD_NOTFOUND);
        bson_destroy(&b);
        cr_assert_eq(pt_ts_record_view(t.db, "/index.htm", minute, 2, &err), 0, "%s",
                     err.message);
        cr_assert_eq(pt_ts_find_bucket(t.db, "/index.htm", minute, &b, &err), 0);
        cr_assert_str_eq(ptt_str(&b, "page"), "/index.htm");
        bson_iter_t it;
        cr_assert(ptt_find(&b, "timestamp", &it) && BSON_ITER_HOLDS_DATE_TIME(&it));
        cr_assert_eq(bson_iter_date_time(&it), minute);
        cr_assert_eq(second_count(&b, 2), 1, "[%s]", t.engine);
        cr_assert(!ptt_has(&b, "seconds.3") && !ptt_has(&b, "totalViews"));
        bson_destroy(&b);
        /* the second view increments the same counter, no new bucket */
        cr_assert_eq(pt_ts_record_view(t.db, "/index.htm", minute, 2, &err), 0);
        cr_assert_eq(pt_ts_record_view(t.db, "/index.htm", minute, 59, &err), 0);
        cr_assert_eq(pt_ts_find_bucket(t.db, "/index.htm", minute, &b, &err), 0);
        cr_assert_eq(second_count(&b, 2), 2);
        cr_assert_eq(second_count(&b, 59), 1);
        bson_destroy(&b);
        cr_assert_eq(ptt_count(&t, PT_TS_COLLECTION, "{}"), 1);
        /* another minute, another page: other buckets */
        cr_assert_eq(pt_ts_record_view(t.db, "/index.htm", minute + MINUTE, 0, &err), 0);
        cr_assert_eq(pt_ts_record_view(t.db, "/about.htm", minute, 0, &err), 0);
        cr_assert_eq(ptt_count(&t, PT_TS_COLLECTION, "{}"), 3);
        cr_assert_eq(pt_ts_record_view(t.db, "/index.htm", minute, 60, &err), MD_EINVAL);
        cr_assert_eq(pt_ts_record_view(t.db, "/index.htm", minute, -1, &err), MD_EINVAL);
    }
}

Test(timeseries, preallocate_hour_and_the_corrected_count)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        int64_t n = -1;
        cr_assert_eq(pt_ts_preallocate_hour(t.db, "index.htm", HOUR_10, &err), 0, "%s",
                     err.message);
        cr_assert_eq(pt_ts_count_hour(t.db, HOUR_10, &n, &err), 0);
        cr_assert_eq(n, 60, "[%s] the book's 60 entries", t.engine);
        /* every bucket is the template: 60 zero counters, no totalViews */
        bson_t b;
        cr_assert_eq(pt_ts_find_bucket(t.db, "index.htm", HOUR_10 + 59 * MINUTE, &b, &err), 0);
        for (int s = 0; s < 60; s++)
            cr_assert_eq(second_count(&b, s), 0);
        cr_assert(!ptt_has(&b, "totalViews"));
        bson_destroy(&b);
        /* erratum 2: with an earlier hour present the shell's reading of
         * Example 8 (only the last timestamp key, $lt) counts 120; the
         * corrected range still counts 60 */
        cr_assert_eq(pt_ts_preallocate_hour(t.db, "index.htm", HOUR_10 - 60 * MINUTE, &err), 0);
        cr_assert_eq(pt_ts_count_hour(t.db, HOUR_10, &n, &err), 0);
        cr_assert_eq(n, 60);
        cr_assert_eq(pt_ts_count_hour(t.db, HOUR_10 - 60 * MINUTE, &n, &err), 0);
        cr_assert_eq(n, 60);
        cr_assert_eq(ptt_count(&t, PT_TS_COLLECTION,
                               "{\"timestamp\": {\"$lt\": {\"$date\": 1388574000000}}}"),
                     120);
    }
}

/* A BSON filter that really carries the book's two "timestamp" keys (what a
 * driver other than the shell would send): the server ANDs both. */
Test(timeseries, duplicate_timestamp_keys_both_apply)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        int64_t n = -1;
        cr_assert_eq(pt_ts_preallocate_hour(t.db, "index.htm", HOUR_10 - 60 * MINUTE, &err), 0);
        cr_assert_eq(pt_ts_preallocate_hour(t.db, "index.htm", HOUR_10, &err), 0);
        bson_t q = BSON_INITIALIZER, r;
        BSON_APPEND_DOCUMENT_BEGIN(&q, "timestamp", &r);
        BSON_APPEND_DATE_TIME(&r, "$gte", HOUR_10);
        bson_append_document_end(&q, &r);
        BSON_APPEND_DOCUMENT_BEGIN(&q, "timestamp", &r);
        BSON_APPEND_DATE_TIME(&r, "$lt", HOUR_10 + 60 * MINUTE);
        bson_append_document_end(&q, &r);
        md_collection *c = md_db_get_collection(t.db, PT_TS_COLLECTION);
        cr_assert_eq(md_collection_count(c, &q, NULL, &n, &err), 0, "%s", err.message);
        cr_assert_eq(n, 60, "[%s] duplicate keys: %lld", t.engine, (long long)n);
        md_collection_destroy(c);
        bson_destroy(&q);
    }
}

Test(timeseries, index_as_the_book_creates_it)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        cr_assert_eq(pt_ts_create_indexes(t.db, &err), 0, "%s", err.message);
        cr_assert_eq(pt_ts_preallocate_hour(t.db, "/index.htm", HOUR_10, &err), 0);
        cr_assert_eq(pt_ts_preallocate_hour(t.db, "/about.htm", HOUR_10, &err), 0);
        bson_t *r = PTT_OK(&t, "{\"listIndexes\": \"%s\"}", PT_TS_COLLECTION);
        cr_assert_str_eq(ptt_str(r, "cursor.firstBatch.1.name"), "page_1_timestamp_1");
        cr_assert_eq(ptt_i64(r, "cursor.firstBatch.1.key.page"), 1);
        cr_assert_eq(ptt_i64(r, "cursor.firstBatch.1.key.timestamp"), 1);
        cr_assert(!ptt_has(r, "cursor.firstBatch.2"));
        bson_destroy(r);
        /* Example 3's findOne and a range over one page's hour: IXSCAN */
        const char *finds[] = {
            "{\"find\": \"pageViews\", \"filter\": {\"page\": \"/index.htm\", \"timestamp\": "
            "{\"$date\": 1388570460000}}, \"limit\": 1}",
            "{\"find\": \"pageViews\", \"filter\": {\"page\": \"/index.htm\", \"timestamp\": "
            "{\"$gte\": {\"$date\": 1388570400000}, \"$lt\": {\"$date\": 1388574000000}}}}",
        };
        for (size_t i = 0; i < 2; i++) {
            bson_t *x = ptt_explain(&t, finds[i]);
            bson_t ix;
            cr_assert(ptt_plan_stage(x, "IXSCAN", &ix), "[%s] no IXSCAN for %s", t.engine,
                      finds[i]);
            cr_assert_str_eq(ptt_str(&ix, "indexName"), "page_1_timestamp_1");
            bson_destroy(&ix);
            bson_destroy(x);
        }
        r = PTT_OK(&t, "%s", finds[1]);
        int n = 0;
        bson_iter_t it, arr;
        cr_assert(ptt_find(r, "cursor.firstBatch", &it) && bson_iter_recurse(&it, &arr));
        while (bson_iter_next(&arr))
            n++;
        cr_assert_eq(n, 60);
        bson_destroy(r);
    }
}

/* The pattern's point, seen through collStats. */
Test(timeseries, preallocated_buckets_update_in_place)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        cr_assert_eq(pt_ts_preallocate_hour(t.db, "/index.htm", HOUR_10, &err), 0);
        bson_t b;
        cr_assert_eq(pt_ts_find_bucket(t.db, "/index.htm", HOUR_10, &b, &err), 0);
        int64_t bucket_size = b.len;
        bson_destroy(&b);
        bson_t *s0 = coll_stats(&t, PT_TS_COLLECTION);
        for (int i = 0; i < 300; i++)
            cr_assert_eq(pt_ts_record_view(t.db, "/index.htm", HOUR_10 + (i % 60) * MINUTE,
                                           (i * 7) % 60, &err), 0, "%s", err.message);
        bson_t *s1 = coll_stats(&t, PT_TS_COLLECTION);
        int64_t upd = engine_stat(&t, s1, "updates") - engine_stat(&t, s0, "updates");
        int64_t bytes = engine_stat(&t, s1, "bytesWritten") - engine_stat(&t, s0, "bytesWritten");
        cr_assert_eq(upd, 300, "[%s] updates %lld", t.engine, (long long)upd);
        cr_assert_eq(ptt_i64(s1, "size"), ptt_i64(s0, "size"), "[%s] buckets do not grow",
                     t.engine);
        if (in_place(&t)) {
            cr_assert_eq(engine_stat(&t, s1, "moves"), 0, "[%s]", t.engine);
            cr_assert_eq(engine_stat(&t, s1, "inPlaceUpdates") -
                             engine_stat(&t, s0, "inPlaceUpdates"), 300);
            /* only the changed counter's bytes */
            cr_assert_leq(bytes, 300 * 8, "[%s] %lld bytes for 300 $inc", t.engine,
                          (long long)bytes);
        } else {
            /* every view rewrites the whole bucket */
            cr_assert_geq(bytes, 300 * bucket_size, "[%s] %lld bytes, bucket %lld", t.engine,
                          (long long)bytes, (long long)bucket_size);
            bson_iter_t it;
            if (ptt_find(s1, "btree.bytesWrittenPerUpdate", &it))
                cr_assert_geq(bson_iter_as_double(&it), (double)bucket_size);
        }
        bson_destroy(s0);
        bson_destroy(s1);
    }
}

/* Without preallocation the buckets grow a counter at a time and move. */
Test(timeseries, buckets_without_preallocation_move_on_mmapv1)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        if (strcmp(t.engine, "mmapv1") != 0) /* ephemeralForTest never moves */
            continue;
        md_error err;
        for (int m = 0; m < 20; m++)
            for (int s = 0; s < 60; s++)
                cr_assert_eq(pt_ts_record_view(t.db, "/index.htm", HOUR_10 + m * MINUTE, s,
                                               &err), 0);
        bson_t *st = coll_stats(&t, PT_TS_COLLECTION);
        cr_assert_gt(engine_stat(&t, st, "moves"), 0, "[%s] no moves", t.engine);
        bson_destroy(st);
    }
}

static const pt_scenario *ts_scenario(void)
{
    cr_assert_eq(pt_pattern_timeseries.nscenarios, 1);
    return pt_pattern_timeseries.scenarios[0];
}

Test(timeseries, scenario_matches_the_book)
{
    const pt_scenario *s = ts_scenario();
    cr_assert_str_eq(pt_pattern_timeseries.section, "5.9");
    cr_assert_eq(s->nops, 1);
    cr_assert_eq(s->ops[0].users, 1000);
    cr_assert(s->ops[0].decides);
    cr_assert_float_eq(s->ops[0].book_mmap.mean, 1.06, 1e-9);
    cr_assert_float_eq(s->ops[0].book_wt.mean, 1.108, 1e-9);
    cr_assert_float_eq(s->ops[0].book_wt.max, 5.481, 1e-9);
    bool listed = false;
    for (const pt_pattern *const *p = pt_patterns; *p; p++)
        listed |= *p == &pt_pattern_timeseries;
    cr_assert(listed, "timeseries is in pt_patterns[]");
}

/* The simulator's script: 1000 series, none preallocated, upserted and
 * grown by concurrent increments; every increment is counted once. */
Test(timeseries, scenario_from_many_threads_keeps_every_view)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        const pt_scenario *s = ts_scenario();
        md_error err;
        void *state = NULL;
        pt_setup_args a = {.users = 3000, .quick = true};
        char first[256];
        cr_assert_eq(s->setup(t.db, &a, &state, &err), 0, "[%s] %s", t.engine, err.message);
        cr_assert_eq(ptt_count(&t, PT_TS_COLLECTION, "{}"), 0, "nothing preallocated");
        cr_assert_eq(ptt_run_op(t.db, state, &s->ops[0], 8, 3000, first), 0, "[%s] %s",
                     t.engine, first);
        cr_assert_eq(s->check(t.db, state, &err), 0, "[%s] %s", t.engine, err.message);
        int64_t series = ptt_count(&t, PT_TS_COLLECTION, "{}");
        cr_assert(series > 900 && series <= 1000, "[%s] %lld series upserted", t.engine,
                  (long long)series);
        bson_t *doc = PTT_OK(&t, "{\"find\": \"pageViews\", \"filter\": {\"_id\": 7}}");
        bson_iter_t it;
        cr_assert(ptt_find(doc, "cursor.firstBatch.0.tag", &it) &&
                      strcmp(bson_iter_utf8(&it, NULL), "device.7") == 0,
                  "[%s] the simulator's tag", t.engine);
        cr_assert(ptt_find(doc, "cursor.firstBatch.0.resolution", &it) &&
                      strcmp(bson_iter_utf8(&it, NULL), "minute") == 0,
                  "[%s] $setOnInsert applied", t.engine);
        bson_destroy(doc);
        /* the check notices a counter that no increment accounts for */
        bson_destroy(PTT_OK(&t, "{\"update\": \"pageViews\", \"updates\": [{\"q\": {}, "
                                "\"u\": {\"$inc\": {\"series.0\": 1}}}]}"));
        cr_assert_neq(s->check(t.db, state, &err), 0, "[%s] check missed an extra view",
                      t.engine);
        /* setup again starts from an empty collection */
        pt_scenario_destroy(s, state);
        cr_assert_eq(s->setup(t.db, &a, &state, &err), 0);
        cr_assert_eq(ptt_count(&t, PT_TS_COLLECTION, "{}"), 0);
        cr_assert_eq(s->check(t.db, state, &err), 0, "%s", err.message);
        pt_scenario_destroy(s, state);
    }
}
