/*
 * ap_hieragg.c -- Ch.4 "Hierarchical Aggregation" (pp.63-73): raw events
 * {userid, ts, length} rolled up by mapReduce with out {reduce: ...} into
 *
 *   events -> stats.hourly -> stats.daily -> stats.weekly
 *                                        \-> stats.monthly -> stats.yearly
 *
 * each aggregate {_id: {u, d}, value: {total, count, mean, ts}}: finalize
 * computes the mean and stamps value.ts with the time of the computation,
 * and the next level's run takes the documents with last_run < value.ts <
 * cutoff.  The book's JavaScript, as it writes it, but for two errata
 * corrected: mapf_week's undefined `dt` (the day's own date) and mapf_year's
 * month 1 (February; January is 0).  Dates are built with JavaScript's
 * local-time Date constructor, as the book's are: on a process whose time
 * zone is not UTC the buckets are local days, as they were on the book's
 * servers.
 *
 * The measurement runs the cascade until every level has seen a backlog
 * of events, then logs more events into hours already aggregated and runs
 * it again: the first level stays exact (out reduce adds the new events to
 * the hour), but a level above it receives the hour's whole new total
 * again and adds it to what it already had, so the book's "run it as often
 * as you like" holds for events -> hourly and not above, which is what the
 * claims report.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ap.h"

#define EVENTS "hier.events"

static const char REDUCEF[] =
    "function(key, values) {"
    "  var r = { total: 0, count: 0, mean: 0, ts: null };"
    "  values.forEach(function(v) { r.total += v.total; r.count += v.count; });"
    "  return r; }";

static const char FINALIZEF[] =
    "function(key, value) {"
    "  if (value.count > 0) { value.mean = value.total / value.count; }"
    "  value.ts = new Date();"
    "  return value; }";

static const char MAPF_HOUR[] =
    "function() {"
    "  var key = { u: this.userid, d: new Date(this.ts.getFullYear(), this.ts.getMonth(),"
    "      this.ts.getDate(), this.ts.getHours(), 0, 0, 0) };"
    "  emit(key, { total: this.length, count: 1, mean: 0, ts: null }); }";

/* mapf_hierarchical's template with each level's date expression. */
#define MAPF_LEVEL(expr)                                                             \
    "function() {"                                                                   \
    "  var key = { u: this._id.u, d: " expr " };"                                    \
    "  emit(key, { total: this.value.total, count: this.value.count, mean: 0,"      \
    "              ts: null }); }"

static const char MAPF_DAY[] = MAPF_LEVEL(
    "new Date(this._id.d.getFullYear(), this._id.d.getMonth(), this._id.d.getDate(),"
    " 0, 0, 0, 0)");
static const char MAPF_WEEK[] = MAPF_LEVEL(
    "new Date(this._id.d.valueOf() - this._id.d.getDay() * 24 * 60 * 60 * 1000)");
static const char MAPF_MONTH[] =
    MAPF_LEVEL("new Date(this._id.d.getFullYear(), this._id.d.getMonth(), 1, 0, 0, 0, 0)");
static const char MAPF_YEAR[] =
    MAPF_LEVEL("new Date(this._id.d.getFullYear(), 0, 1, 0, 0, 0, 0)");

int ap_hieragg_create_indexes(md_db *db, md_error *err)
{
    static const char *const stats[] = {"stats.hourly", "stats.daily", "stats.weekly",
                                        "stats.monthly", "stats.yearly"};
    bson_t *k = BCON_NEW("ts", BCON_INT32(1));
    int rc = pt_ensure_index(db, EVENTS, k, NULL, err);
    bson_destroy(k);
    k = BCON_NEW("value.ts", BCON_INT32(1));
    for (int i = 0; i < 5 && rc == 0; i++)
        rc = pt_ensure_index(db, stats[i], k, NULL, err);
    bson_destroy(k);
    return rc;
}

int ap_hieragg_log(md_db *db, const char *userid, int64_t ts_ms, int32_t length,
                   md_error *err)
{
    bson_t *d = BCON_NEW("userid", BCON_UTF8(userid), "ts", BCON_DATE_TIME(ts_ms), "length",
                         BCON_INT32(length));
    int rc = ap_insert(db, EVENTS, d, NULL, err);
    bson_destroy(d);
    return rc;
}

/* obj = db.my_sequence.find_and_modify(query={'_id': 0},
 *         update={'$inc': {'inc': 50}}, upsert=True, new=True)
 * batch_of_ids = range(obj['inc'] - 50, obj['inc']) */
int ap_hieragg_reserve_ids(md_db *db, int64_t *first, int64_t *end, md_error *err)
{
    md_collection *c = md_db_get_collection(db, "my_sequence");
    bson_t *q = BCON_NEW("_id", BCON_INT32(0));
    bson_t *o = BCON_NEW("update", "{", "$inc", "{", "inc", BCON_INT64(50), "}", "}", "upsert",
                         BCON_BOOL(true), "new", BCON_BOOL(true));
    bson_t reply;
    bson_iter_t it;
    int rc = md_collection_find_and_modify(c, q, o, &reply, err);
    if (rc == 0 && bson_iter_init(&it, &reply) &&
        bson_iter_find_descendant(&it, "value.inc", &it) && BSON_ITER_HOLDS_NUMBER(&it)) {
        *end = bson_iter_as_int64(&it);
        *first = *end - 50;
    } else if (rc == 0) {
        rc = md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR, "findAndModify: no value");
    }
    bson_destroy(&reply);
    bson_destroy(q);
    bson_destroy(o);
    md_collection_destroy(c);
    return rc;
}

/* icollection.map_reduce(map, reducef, finalize=finalizef, query=query,
 * out={'reduce': ocollection}) with query {field: {$gt: last_run, $lt:
 * cutoff}}. */
static int map_reduce(md_db *db, const char *in, const char *out, const char *mapf,
                      const char *field, int64_t last_run, int64_t cutoff, md_error *err)
{
    bson_t *cmd = BCON_NEW("mapReduce", BCON_UTF8(in), "map", BCON_CODE(mapf), "reduce",
                           BCON_CODE(REDUCEF), "finalize", BCON_CODE(FINALIZEF), "query", "{",
                           field, "{", "$gt", BCON_DATE_TIME(last_run), "$lt",
                           BCON_DATE_TIME(cutoff), "}", "}", "out", "{", "reduce",
                           BCON_UTF8(out), "}");
    bson_t reply;
    int rc = md_db_command(db, cmd, &reply, err);
    bson_destroy(&reply);
    bson_destroy(cmd);
    return rc;
}

int ap_hieragg_run(md_db *db, int64_t last_run_ms, int64_t cutoff_ms, md_error *err)
{
    int rc = map_reduce(db, EVENTS, "stats.hourly", MAPF_HOUR, "ts", last_run_ms, cutoff_ms,
                        err);
    /* h_aggregate(icollection, ocollection, mapf, cutoff, last_run) */
    if (rc == 0)
        rc = map_reduce(db, "stats.hourly", "stats.daily", MAPF_DAY, "value.ts", last_run_ms,
                        cutoff_ms, err);
    if (rc == 0)
        rc = map_reduce(db, "stats.daily", "stats.weekly", MAPF_WEEK, "value.ts", last_run_ms,
                        cutoff_ms, err);
    if (rc == 0)
        rc = map_reduce(db, "stats.daily", "stats.monthly", MAPF_MONTH, "value.ts",
                        last_run_ms, cutoff_ms, err);
    if (rc == 0)
        rc = map_reduce(db, "stats.monthly", "stats.yearly", MAPF_YEAR, "value.ts",
                        last_run_ms, cutoff_ms, err);
    return rc;
}

int ap_hieragg_totals(md_db *db, const char *coll, const char *userid, int64_t *total,
                      int64_t *count, int64_t *docs, md_error *err)
{
    bson_t q = BSON_INITIALIZER;
    if (userid)
        BSON_APPEND_UTF8(&q, "_id.u", userid);
    md_collection *c = md_db_get_collection(db, coll);
    md_cursor *cur = md_collection_find_with_opts(c, &q, NULL);
    const bson_t *doc;
    *total = *count = *docs = 0;
    while (md_cursor_next(cur, &doc)) {
        bson_iter_t it, v;
        (*docs)++;
        if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, "value.total", &v) &&
            BSON_ITER_HOLDS_NUMBER(&v))
            *total += bson_iter_as_int64(&v);
        if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, "value.count", &v) &&
            BSON_ITER_HOLDS_NUMBER(&v))
            *count += bson_iter_as_int64(&v);
    }
    int rc = md_cursor_error(cur, err) ? MD_ERROR : 0;
    md_cursor_destroy(cur);
    md_collection_destroy(c);
    bson_destroy(&q);
    return rc;
}

/* ---- the measurement ----------------------------------------------------------- */

static const char *const LEVELS[] = {"stats.hourly", "stats.daily", "stats.weekly",
                                     "stats.monthly", "stats.yearly"};
static const char *const TAGS[] = {"hourly", "daily", "weekly", "monthly", "yearly"};

/* Run the cascade `runs` times, each run's cutoff the clock at its start
 * (the book's `utcnow() - 60 s` without the minute: the events here are
 * logged before the run, not by servers still sending them). */
static int cascade(md_db *db, int runs, int64_t *last_run, double *secs, md_error *err)
{
    int rc = 0;
    double t0 = ap_now_s();
    for (int i = 0; i < runs && rc == 0; i++) {
        usleep(2000);
        int64_t cutoff = pt_now_ms();
        rc = ap_hieragg_run(db, *last_run, cutoff, err);
        *last_run = cutoff;
    }
    *secs = ap_now_s() - t0;
    return rc;
}

static int record_levels(md_db *db, const char *phase, int64_t want_total, ap_result *r,
                         md_error *err)
{
    char name[64];
    for (int l = 0; l < 5; l++) {
        int64_t total, count, docs;
        int rc = ap_hieragg_totals(db, LEVELS[l], NULL, &total, &count, &docs, err);
        if (rc)
            return rc;
        snprintf(name, sizeof name, "%s_%s_total_ratio", phase, TAGS[l]);
        ap_set(r, name, want_total ? (double)total / (double)want_total : 0, "x events");
        if (strcmp(phase, "backlog") == 0) {
            snprintf(name, sizeof name, "%s_docs", TAGS[l]);
            ap_set(r, name, (double)docs, "docs");
        }
    }
    return 0;
}

static int measure(md_db *db, const ap_args *a, ap_result *r, md_error *err)
{
    static const char *const users[] = {"rick", "stuart", "alice", "bob", "carol", "dave"};
    int n = a->quick ? 600 : 6000, rc;
    uint64_t rng = a->seed ? a->seed : 7;
    int64_t now = pt_now_ms(), want = 0, last_run = 0;
    double secs;
    if ((rc = ap_hieragg_create_indexes(db, err)))
        return rc;
    /* A backlog over the last 40 days, each user's latest event a few ms ago. */
    for (int i = 0; i < n && rc == 0; i++) {
        int64_t ago = i < 6 ? 5 + i : 5 + (int64_t)(pt_rand_next(&rng) % (40LL * 86400000));
        int32_t len = 1 + (int32_t)(pt_rand_next(&rng) % 300);
        want += len;
        rc = ap_hieragg_log(db, users[i % 6], now - ago, len, err);
    }
    if (rc || (rc = cascade(db, 4, &last_run, &secs, err)) ||
        (rc = record_levels(db, "backlog", want, r, err)))
        return rc;
    ap_set(r, "backlog_events", n, "events");
    ap_set(r, "cascade_4_runs_ms", secs * 1000.0, "ms");
    /* New events in hours already aggregated (each user's current hour). */
    int more = n / 10;
    for (int i = 0; i < more && rc == 0; i++) {
        int32_t len = 1 + (int32_t)(pt_rand_next(&rng) % 300);
        want += len;
        rc = ap_hieragg_log(db, users[i % 6], pt_now_ms(), len, err);
    }
    if (rc || (rc = cascade(db, 4, &last_run, &secs, err)) ||
        (rc = record_levels(db, "incremental", want, r, err)))
        return rc;
    ap_set(r, "incremental_events", more, "events");
    ap_set(r, "incremental_4_runs_ms", secs * 1000.0, "ms");
    ap_plan x;
    bson_t *q = BCON_NEW("value.ts", "{", "$gt", BCON_DATE_TIME(last_run - 1000), "$lt",
                         BCON_DATE_TIME(last_run), "}");
    rc = ap_explain_find(db, "stats.daily", q, NULL, NULL, &x, err);
    bson_destroy(q);
    if (rc == 0)
        ap_set(r, "daily_value_ts_index_used", strcmp(x.index, "value.ts_1") == 0, "bool");
    return rc;
}

/* ---- the claims ----------------------------------------------------------------- */

static ap_verdict c_levels(const ap_result *r, char *m, size_t n)
{
    char *p = m;
    size_t left = n;
    bool ok = true;
    for (int l = 0; l < 5; l++) {
        char name[64];
        snprintf(name, sizeof name, "backlog_%s_total_ratio", TAGS[l]);
        double v = ap_get(r, name);
        ok = ok && v == 1.0;
        int k = snprintf(p, left, "%s%s %.3f", l ? ", " : "after 4 runs each level's total / "
                                                         "the events': ", TAGS[l], v);
        if (k > 0 && (size_t)k < left)
            p += k, left -= (size_t)k;
    }
    return ok ? AP_HOLDS : AP_FAILS;
}

static ap_verdict c_incr_first(const ap_result *r, char *m, size_t n)
{
    double v = ap_get(r, "incremental_hourly_total_ratio");
    snprintf(m, n, "after %.0f more events and 4 more runs, stats.hourly's total / the "
                   "events' = %.3f",
             ap_get(r, "incremental_events"), v);
    return v == 1.0 ? AP_HOLDS : AP_FAILS;
}

static ap_verdict c_incr_all(const ap_result *r, char *m, size_t n)
{
    double d = ap_get(r, "incremental_daily_total_ratio"),
           y = ap_get(r, "incremental_yearly_total_ratio");
    snprintf(m, n, "after the incremental runs daily / events = %.3f, yearly / events = "
                   "%.3f: an hour aggregated again is re-reduced whole into the day it "
                   "was already added to",
             d, y);
    return d == 1.0 && y == 1.0 ? AP_HOLDS : AP_FAILS;
}

static ap_verdict c_index(const ap_result *r, char *m, size_t n)
{
    double v = ap_get(r, "daily_value_ts_index_used");
    snprintf(m, n, "the next level's query on stats.daily %s the value.ts index",
             v == 1 ? "uses" : "DOES NOT use");
    return v == 1 ? AP_HOLDS : AP_FAILS;
}

const ap_usecase ap_usecase_hieragg = {
    .name = "ap_hieragg",
    .chapter = "Ch.4 Operational Intelligence",
    .title = "Hierarchical Aggregation with mapReduce",
    .pages = "pp.63-73",
    .demonstrates = "a cascade of incremental mapReduce jobs (events to hourly to daily to "
                    "weekly, monthly and yearly) with out {reduce}",
    .measure = measure,
    .nclaims = 4,
    .claims = {
        {"each level aggregates the next finer one: events -> hourly -> daily -> "
         "weekly/monthly -> yearly", c_levels},
        {"out {reduce} makes the aggregation incremental: run it as often as desired "
         "(events -> hourly)", c_incr_first},
        {"... and the cascade above it stays exact when run again (the book's "
         "h_aggregate)", c_incr_all},
        {"value.ts, stamped by finalize, drives the next level through its index",
         c_index},
    },
};
