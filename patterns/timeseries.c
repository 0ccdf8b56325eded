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
 * The scenario is the simulator's timeseries/exercise_time_series.js,
 * which does not preallocate (see the scenario below); the check afterwards
 * adds up every counter.
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

/* updateOne(q, u, {upsert: true}) into *changed: documents modified plus
 * upserted (the simulator treats "neither" as a failure). */
static int upsert_one(md_db *db, const bson_t *q, const bson_t *u, int64_t *changed,
                      md_error *err)
{
    bson_t reply;
    bson_iter_t it;
    md_collection *c = md_db_get_collection(db, TS_COLL);
    bson_t *opts = BCON_NEW("upsert", BCON_BOOL(true));
    int rc = md_collection_update_one(c, q, u, opts, &reply, err);
    *changed = 0;
    if (rc == 0 && bson_iter_init_find(&it, &reply, "modifiedCount"))
        *changed += bson_iter_as_int64(&it);
    if (rc == 0 && bson_iter_init_find(&it, &reply, "upsertedCount"))
        *changed += bson_iter_as_int64(&it);
    bson_destroy(&reply);
    bson_destroy(opts);
    md_collection_destroy(c);
    return rc;
}

int pt_ts_record_view(md_db *db, const char *page, int64_t minute_ms, int second,
                      md_error *err)
{
    char path[16];
    int64_t n;
    if (second < 0 || second > 59)
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE, "second %d not in 0..59",
                            second);
    snprintf(path, sizeof path, "seconds.%d", second);
    bson_t *q = BCON_NEW("page", BCON_UTF8(page), "timestamp", BCON_DATE_TIME(minute_ms));
    bson_t *u = BCON_NEW("$inc", "{", path, BCON_INT32(1), "}");
    int rc = upsert_one(db, q, u, &n, err);
    if (rc == 0 && n != 1)
        rc = md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR,
                          "view of %s at second %d changed %lld documents", page, second,
                          (long long)n);
    bson_destroy(u);
    bson_destroy(q);
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
 * The simulator's timeseries/exercise_time_series.js, the script the book
 * names for its table: preAllocate false, resolution "minute",
 * numberOfTimeSeries 1000.  Its execute() (scenarios/timeseries.js) picks
 * one of the 1000 series at random, series i being the minute
 * start + i minutes with _id i and tag "device.i", and a random second s,
 * and sends its TimeSeries.inc():
 *
 *   updateOne({_id: i, tag: "device.i", timestamp: minute},
 *             {$inc: {"series.s": 1},
 *              $setOnInsert: {tag, timestamp, resolution: "minute"},
 *              $set: {modifiedOn: new Date()}},
 *             {upsert: true})
 *
 * and fails when nothing was modified or upserted.  Without preallocation
 * the first view of a series inserts it and each new second adds a field:
 * the documents grow, so mmapv1 cannot write just the changed bytes as it
 * does for the chapter's preallocated buckets (pt_ts_preallocate_hour and
 * pt_ts_record_view above, tested on their own).  The simulator's start is
 * the local midnight of the day it ran; here it is 2014-01-01T00:00:00Z.
 */
#define TS_SERIES 1000
#define TS_START_MS 1388534400000LL

typedef struct ts_state {
    atomic_int_fast64_t views; /* successful increments */
} ts_state;

static int ts_setup(md_db *db, const pt_setup_args *a, void **state, md_error *err)
{
    (void)a;
    ts_state *st = calloc(1, sizeof *st);
    if (!st)
        return md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
    atomic_init(&st->views, 0);
    /* The simulator starts from an empty database (dropDatabase) and makes
     * no index of its own: the _id index serves its updates. */
    int rc = pt_drop_if_exists(db, TS_COLL, err);
    if (rc) {
        free(st);
        return rc;
    }
    *state = st;
    return 0;
}

/* TimeSeries.inc(t, 1) of series i at second `second`, as the simulator's. */
static int ts_inc(md_db *db, int i, int second, md_error *err)
{
    char tag[32], path[16];
    int64_t n, minute = TS_START_MS + (int64_t)i * TS_MINUTE_MS;
    snprintf(tag, sizeof tag, "device.%d", i);
    snprintf(path, sizeof path, "series.%d", second);
    bson_t *q = BCON_NEW("_id", BCON_INT32(i), "tag", BCON_UTF8(tag), "timestamp",
                         BCON_DATE_TIME(minute));
    bson_t *u = BCON_NEW("$inc", "{", path, BCON_INT32(1), "}", "$setOnInsert", "{", "tag",
                         BCON_UTF8(tag), "timestamp", BCON_DATE_TIME(minute), "resolution",
                         BCON_UTF8("minute"), "}", "$set", "{", "modifiedOn",
                         BCON_DATE_TIME(pt_now_ms()), "}");
    int rc = upsert_one(db, q, u, &n, err);
    if (rc == 0 && n != 1)
        rc = md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR,
                          "could not correctly update or upsert the timeseries document "
                          "with id %d",
                          i);
    bson_destroy(u);
    bson_destroy(q);
    return rc;
}

/* One user: one increment of a random second of a random series. */
static int ts_run(pt_user *u, md_error *err)
{
    ts_state *st = u->state;
    int i = (int)pt_rand_below(u, TS_SERIES);
    int rc = ts_inc(u->db, i, (int)pt_rand_below(u, 60), err);
    if (!rc)
        atomic_fetch_add(&st->views, 1);
    return rc;
}

/* A series document's counters, added up; -1 when the document is not
 * one the run made (its _id, tag, minute and resolution must match). */
static int64_t ts_series_sum(const bson_t *doc)
{
    bson_iter_t it, s;
    char tag[32];
    int64_t sum = 0;
    if (!bson_iter_init_find(&it, doc, "_id") || !BSON_ITER_HOLDS_INT32(&it))
        return -1;
    int i = bson_iter_int32(&it);
    if (i < 0 || i >= TS_SERIES)
        return -1;
    snprintf(tag, sizeof tag, "device.%d", i);
    if (!bson_iter_init_find(&it, doc, "tag") || !BSON_ITER_HOLDS_UTF8(&it) ||
        strcmp(bson_iter_utf8(&it, NULL), tag) != 0 ||
        !bson_iter_init_find(&it, doc, "timestamp") || !BSON_ITER_HOLDS_DATE_TIME(&it) ||
        bson_iter_date_time(&it) != TS_START_MS + (int64_t)i * TS_MINUTE_MS ||
        !bson_iter_init_find(&it, doc, "resolution") || !BSON_ITER_HOLDS_UTF8(&it) ||
        !bson_iter_init_find(&it, doc, "modifiedOn") || !BSON_ITER_HOLDS_DATE_TIME(&it) ||
        !bson_iter_init_find(&it, doc, "series") || !BSON_ITER_HOLDS_DOCUMENT(&it))
        return -1;
    bson_iter_recurse(&it, &s);
    while (bson_iter_next(&s)) {
        char *end;
        long sec = strtol(bson_iter_key(&s), &end, 10);
        if (*end || sec < 0 || sec > 59 || !BSON_ITER_HOLDS_INT32(&s) || bson_iter_int32(&s) < 1)
            return -1;
        sum += bson_iter_int32(&s);
    }
    return sum;
}

/* Every document is one of the 1000 series, whole, and the counters add
 * up to the increments that succeeded. */
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
        int64_t s = ts_series_sum(doc);
        if (s < 0)
            rc = md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR,
                              "a document that is not one of the run's series");
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
    if (docs > TS_SERIES)
        return md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR,
                            "%lld series documents, at most %d", (long long)docs, TS_SERIES);
    if (sum != want)
        return md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR,
                            "counters add up to %lld, %lld increments succeeded",
                            (long long)sum, (long long)want);
    return 0;
}

static const pt_scenario ts_scenario = {
    .name = "timeseries",
    .title = "Timeseries Simulation",
    .script = "timeseries/exercise_time_series.js",
    .note = "As the simulator's script ran it: 1000 minute series, not preallocated (the "
            "documents grow with each new second), each view an upsert of {$inc: "
            "{\"series.S\": 1}, $setOnInsert: {tag, timestamp, resolution}, $set: "
            "{modifiedOn}}. The chapter's preallocated buckets are in the library "
            "(pt_ts_preallocate_hour) and its tests.",
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
                   "WiredTiger, but the simulator's script it ran does not preallocate: its "
                   "series documents grow",
    .nscenarios = 1,
    .scenarios = {&ts_scenario},
};
