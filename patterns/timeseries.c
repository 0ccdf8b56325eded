/*
 * timeseries.c -- 5.9 Time Series: page views counted in one bucket
 * document per page per minute, one counter per second.
 *
 *     {page: "/index.htm", timestamp: ISODate("2014-01-01T10:01:00Z"),
 *      seconds: {"0": 0, "1": 0, ... "59": 0}}
 *
 * A view is an upsert that $inc's "seconds.<s>" of its bucket (Example 2).
 * preAllocateHour (Example 6) inserts the 60 buckets of an hour up front
 * with every counter at 0, so that each later $inc rewrites an int32 of the
 * same size: on mmapv1 the update is done in place and the document never
 * moves; btree writes the whole bucket again on every view.  The book's
 * index is {page: 1, timestamp: 1} (Example 4).
 *
 * The scenario is the simulator's timeseries/exercise_time_series.js:
 * each user increments one random second of one random preallocated bucket
 * and the check afterwards adds up every counter.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "patterns.h"

#define TS_COLL PT_TS_COLLECTION
#define TS_MINUTE_MS 60000LL
#define TS_HOUR_MS (60 * TS_MINUTE_MS)

/* ---- operations ----------------------------------------------------------- */

int pt_ts_create_indexes(md_db *db, md_error *err)
{
    bson_t *keys = BCON_NEW("page", BCON_INT32(1), "timestamp", BCON_INT32(1));
    int rc = pt_ensure_index(db, TS_COLL, keys, NULL, err);
    bson_destroy(keys);
    return rc;
}

/* The template of Example 6: seconds "0".."59" all 0, no totalViews. */
static void append_zero_seconds(bson_t *doc)
{
    bson_t secs;
    char key[4];
    BSON_APPEND_DOCUMENT_BEGIN(doc, "seconds", &secs);
    for (int s = 0; s < 60; s++) {
        snprintf(key, sizeof key, "%d", s);
        BSON_APPEND_INT32(&secs, key, 0);
    }
    bson_append_document_end(doc, &secs);
}

int pt_ts_preallocate_hour(md_db *db, const char *page, int64_t hour_ms, md_error *err)
{
    md_collection *c = md_db_get_collection(db, TS_COLL);
    int rc = 0;
    /* One insert per minute, as the book's loop does. */
    for (int m = 0; m < 60 && rc == 0; m++) {
        bson_t doc = BSON_INITIALIZER;
        BSON_APPEND_UTF8(&doc, "page", page);
        BSON_APPEND_DATE_TIME(&doc, "timestamp", hour_ms + m * TS_MINUTE_MS);
        append_zero_seconds(&doc);
        rc = md_collection_insert_one(c, &doc, NULL, NULL, err);
        bson_destroy(&doc);
    }
    md_collection_destroy(c);
    return rc;
}

int pt_ts_record_view(md_db *db, const char *page, int64_t minute_ms, int second,
                      md_error *err)
{
    char path[16];
    bson_t reply;
    int rc;
    if (second < 0 || second > 59)
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE, "second %d not in 0..59",
                            second);
    snprintf(path, sizeof path, "seconds.%d", second);
    md_collection *c = md_db_get_collection(db, TS_COLL);
    bson_t *q = BCON_NEW("page", BCON_UTF8(page), "timestamp", BCON_DATE_TIME(minute_ms));
    bson_t *u = BCON_NEW("$inc", "{", path, BCON_INT32(1), "}");
    bson_t *opts = BCON_NEW("upsert", BCON_BOOL(true));
    rc = md_collection_update_one(c, q, u, opts, &reply, err);
    /* The simulator treats "neither modified nor upserted" as a failure. */
    if (rc == 0) {
        bson_iter_t it;
        int64_t mod = 0, ups = 0;
        if (bson_iter_init_find(&it, &reply, "modifiedCount"))
            mod = bson_iter_as_int64(&it);
        if (bson_iter_init_find(&it, &reply, "upsertedCount"))
            ups = bson_iter_as_int64(&it);
        if (mod + ups != 1)
            rc = md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR,
                              "view of %s at second %d changed %lld documents", page, second,
                              (long long)(mod + ups));
    }
    bson_destroy(&reply);
    bson_destroy(opts);
    bson_destroy(u);
    bson_destroy(q);
    md_collection_destroy(c);
    return rc;
}

int pt_ts_find_bucket(md_db *db, const char *page, int64_t minute_ms, bson_t *bucket,
                      md_error *err)
{
    bson_t *q = BCON_NEW("page", BCON_UTF8(page), "timestamp", BCON_DATE_TIME(minute_ms));
    int rc = pt_find_one(db, TS_COLL, q, NULL, bucket, err);
    bson_destroy(q);
    return rc;
}

/*
 * Example 8 writes {timestamp: {$gte: h}, timestamp: {$lt: h + 1h}}: the
 * shell keeps only the last "timestamp" key, so the book's count is really
 * {timestamp: {$lt: h + 1h}} and gives 60 only because nothing older is in
 * the collection (erratum 2).  We send the intended range, both bounds on
 * one key.
 */
int pt_ts_count_hour(md_db *db, int64_t hour_ms, int64_t *count, md_error *err)
{
    md_collection *c = md_db_get_collection(db, TS_COLL);
    bson_t *q = BCON_NEW("timestamp", "{", "$gte", BCON_DATE_TIME(hour_ms), "$lt",
                         BCON_DATE_TIME(hour_ms + TS_HOUR_MS), "}");
    int rc = md_collection_count(c, q, NULL, count, err);
    bson_destroy(q);
    md_collection_destroy(c);
    return rc;
}

/* ---- the scenario ------------------------------------------------------------ */

/*
 * exercise_time_series.js keeps numberOfTimeSeries = 1000 buckets.  We
 * preallocate them the book's way, whole hours of 60 minute buckets per
 * page: 17 pages give 1020 buckets.
 * The simulator script as stored sets preAllocate: false; the chapter's
 * table is the one it presents under "Benefits from Preallocation on MMAP"
 * and its notes credit preallocation, so the scenario runs the
 * preallocated form.  The book's hour, 2014-01-01T10:00:00Z, is the first.
 */
#define TS_FIRST_HOUR_MS 1388570400000LL
#define TS_PAGES 17

typedef struct ts_state {
    int npages;
    atomic_int_fast64_t views; /* successful record_view calls */
} ts_state;

static void ts_page_name(int i, char *buf, size_t n)
{
    snprintf(buf, n, "/page%03d.htm", i);
}

static int ts_setup(md_db *db, const pt_setup_args *a, void **state, md_error *err)
{
    char page[32];
    int rc;
    ts_state *st = calloc(1, sizeof *st);
    if (!st)
        return md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
    /* The same buckets at quick scale: setup takes a fraction of a second,
     * and at the runner's rate the updates per bucket, so the contention
     * on each, depend on how many buckets there are. */
    st->npages = TS_PAGES;
    atomic_init(&st->views, 0);
    /* The simulator starts from an empty database (dropDatabase). */
    rc = pt_drop_if_exists(db, TS_COLL, err);
    if (!rc)
        rc = pt_ts_create_indexes(db, err);
    for (int p = 0; p < st->npages && !rc; p++) {
        ts_page_name(p, page, sizeof page);
        rc = pt_ts_preallocate_hour(db, page, TS_FIRST_HOUR_MS, err);
    }
    if (rc) {
        free(st);
        return rc;
    }
    *state = st;
    return 0;
}

/* One user: one view in a random second of a random preallocated bucket. */
static int ts_run(pt_user *u, md_error *err)
{
    ts_state *st = u->state;
    char page[32];
    uint64_t b = pt_rand_below(u, (uint64_t)st->npages * 60);
    int second = (int)pt_rand_below(u, 60);
    ts_page_name((int)(b / 60), page, sizeof page);
    int rc = pt_ts_record_view(u->db, page, TS_FIRST_HOUR_MS + (int64_t)(b % 60) * TS_MINUTE_MS,
                               second, err);
    if (!rc)
        atomic_fetch_add(&st->views, 1);
    return rc;
}

/* Sum the 60 counters of one bucket; -1 if the bucket is not a full template. */
static int64_t ts_bucket_sum(const bson_t *doc)
{
    bson_iter_t it, s;
    int64_t sum = 0;
    int n = 0;
    if (!bson_iter_init_find(&it, doc, "seconds") || !BSON_ITER_HOLDS_DOCUMENT(&it))
        return -1;
    bson_iter_recurse(&it, &s);
    while (bson_iter_next(&s)) {
        if (!BSON_ITER_HOLDS_NUMBER(&s))
            return -1;
        sum += bson_iter_as_int64(&s);
        n++;
    }
    return n == 60 ? sum : -1;
}

/* Every bucket is still there, still has its 60 counters, no upsert made a
 * new one, and the counters add up to the views that succeeded. */
static int ts_check(md_db *db, void *state, md_error *err)
{
    ts_state *st = state;
    md_collection *c = md_db_get_collection(db, TS_COLL);
    bson_t filter = BSON_INITIALIZER;
    md_cursor *cur = md_collection_find_with_opts(c, &filter, NULL);
    const bson_t *doc;
    int64_t docs = 0, sum = 0, want = atomic_load(&st->views);
    int rc = 0;
    while (rc == 0 && md_cursor_next(cur, &doc)) {
        int64_t s = ts_bucket_sum(doc);
        if (s < 0)
            rc = md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR,
                              "bucket without its 60 preallocated counters");
        sum += s;
        docs++;
    }
    if (!rc && md_cursor_error(cur, err))
        rc = MD_ERROR;
    md_cursor_destroy(cur);
    bson_destroy(&filter);
    md_collection_destroy(c);
    if (rc)
        return rc;
    if (docs != (int64_t)st->npages * 60)
        return md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR,
                            "%lld buckets, preallocated %d", (long long)docs, st->npages * 60);
    if (sum != want)
        return md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR,
                            "counters add up to %lld, %lld views succeeded", (long long)sum,
                            (long long)want);
    return 0;
}

static const pt_scenario ts_scenario = {
    .name = "timeseries",
    .title = "Timeseries Simulation",
    .script = "timeseries/exercise_time_series.js",
    .nops = 1,
    .ops = {{
        .name = "timeseries",
        .users = 1000,
        .decides = true,
        .run = ts_run,
        .book_mmap = {30.253, 1.06, 1.588, 1.246, 1.502, 1.815, 0.448, 57.48},
        .book_wt = {30.08, 1.108, 0.401, 1.341, 1.871, 2.477, 0.513, 5.481},
    }},
    .setup = ts_setup,
    .check = ts_check,
};

const pt_pattern pt_pattern_timeseries = {
    .name = "timeseries",
    .title = "Time Series",
    .section = "5.9",
    .book_winner = "tie",
    .book_reason = "\"not much difference between the MMAP and WiredTiger storage engines\" "
                   "(means 1.06 vs 1.108 ms); the chapter's premise is that in-place updates "
                   "of preallocated buckets suit MMAP and are \"not as efficient\" on "
                   "WiredTiger, which lacks in-place updates",
    .nscenarios = 1,
    .scenarios = {&ts_scenario},
};
