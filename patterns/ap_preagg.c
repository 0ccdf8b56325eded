/*
 * ap_preagg.c -- Ch.4 "Pre-Aggregated Reports" (pp.52-63), the book's
 * final schema: one document per page per day with hourly counters and
 * per-hour minute buckets, and one per page per month with daily counters,
 *
 *   stats.daily   {_id: "20101010/site-1/apache_pb.gif",
 *                  metadata: {date, site, page},
 *                  hourly: {"0": n, ... "23": n},
 *                  minute: {"0": {"0": n, ... "59": n}, ... "23": {...}}}
 *   stats.monthly {_id: "201010/site-1/apache_pb.gif",
 *                  metadata: {date: first of the month, site, page},
 *                  daily: {"1": n, ... "31": n}}
 *
 * updated by upsert + $inc (log_hit), preallocated with every counter at 0
 * ($inc by 0 with upsert, so running it on an existing document is
 * harmless), read by exact match on the whole metadata subdocument or by
 * a range on metadata.date (index {metadata.site, metadata.page,
 * metadata.date}).
 *
 * Errata followed in their corrected form: preallocate's
 * `daily_m['d']` and `for i in range(24)` with `h` (the daily metadata's
 * date and the hour), and its monthly update's `{'daily': daily}` query
 * (the monthly metadata, as log_hit has it).
 *
 * bench/mms has the blog's three schemas over whole simulated days; the
 * measurement here is the book's own claim in miniature: one page's day
 * of hits (one a minute) on a document that grows, then on a preallocated
 * one, and a month of daily counters.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ap.h"

#define DAILY "stats.daily"
#define MONTHLY "stats.monthly"
#define DAY_MS 86400000LL
#define T0_MS 1286668800000LL /* 2010-10-10T00:00:00Z */

static void fmt_id(char *buf, size_t n, const char *fmt, int64_t t_ms, const char *site,
                   const char *page)
{
    time_t t = (time_t)(t_ms / 1000);
    struct tm tm;
    char d[16];
    gmtime_r(&t, &tm);
    strftime(d, sizeof d, fmt, &tm);
    snprintf(buf, n, "%s%s%s", d, site, page);
}

/* Midnight of t's day, and the first of its month (UTC). */
static int64_t day_of(int64_t t_ms)
{
    return t_ms - ((t_ms % DAY_MS) + DAY_MS) % DAY_MS;
}

static int64_t month_of(int64_t t_ms)
{
    time_t t = (time_t)(t_ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    return day_of(t_ms) - (int64_t)(tm.tm_mday - 1) * DAY_MS;
}

static void metadata(bson_t *q, int64_t date_ms, const char *site, const char *page)
{
    bson_t md;
    BSON_APPEND_DOCUMENT_BEGIN(q, "metadata", &md);
    BSON_APPEND_DATE_TIME(&md, "date", date_ms);
    BSON_APPEND_UTF8(&md, "site", site);
    BSON_APPEND_UTF8(&md, "page", page);
    bson_append_document_end(q, &md);
}

int ap_preagg_create_indexes(md_db *db, md_error *err)
{
    bson_t *k = BCON_NEW("metadata.site", BCON_INT32(1), "metadata.page", BCON_INT32(1),
                         "metadata.date", BCON_INT32(1));
    int rc = pt_ensure_index(db, DAILY, k, NULL, err);
    if (rc == 0)
        rc = pt_ensure_index(db, MONTHLY, k, NULL, err);
    bson_destroy(k);
    return rc;
}

int ap_preagg_log_hit(md_db *db, int64_t t_ms, const char *site, const char *page,
                      bool *daily_existed, md_error *err)
{
    char id[512], key[32];
    time_t tt = (time_t)(t_ms / 1000);
    struct tm tm;
    gmtime_r(&tt, &tm);
    bson_t q = BSON_INITIALIZER, u = BSON_INITIALIZER, inc;
    fmt_id(id, sizeof id, "%Y%m%d/", t_ms, site, page);
    BSON_APPEND_UTF8(&q, "_id", id);
    metadata(&q, day_of(t_ms), site, page);
    BSON_APPEND_DOCUMENT_BEGIN(&u, "$inc", &inc);
    snprintf(key, sizeof key, "hourly.%d", tm.tm_hour);
    BSON_APPEND_INT32(&inc, key, 1);
    snprintf(key, sizeof key, "minute.%d.%d", tm.tm_hour, tm.tm_min);
    BSON_APPEND_INT32(&inc, key, 1);
    bson_append_document_end(&u, &inc);
    int rc = ap_update(db, DAILY, &q, &u, true, false, daily_existed, NULL, NULL, NULL, err);
    bson_reinit(&q);
    bson_reinit(&u);
    if (rc == 0) {
        fmt_id(id, sizeof id, "%Y%m/", t_ms, site, page);
        BSON_APPEND_UTF8(&q, "_id", id);
        metadata(&q, month_of(t_ms), site, page);
        BSON_APPEND_DOCUMENT_BEGIN(&u, "$inc", &inc);
        snprintf(key, sizeof key, "daily.%d", tm.tm_mday);
        BSON_APPEND_INT32(&inc, key, 1);
        bson_append_document_end(&u, &inc);
        rc = ap_update(db, MONTHLY, &q, &u, true, false, NULL, NULL, NULL, NULL, err);
    }
    bson_destroy(&q);
    bson_destroy(&u);
    return rc;
}

int ap_preagg_preallocate(md_db *db, int64_t t_ms, const char *site, const char *page,
                          md_error *err)
{
    char id[512], key[32];
    bson_t q = BSON_INITIALIZER, u = BSON_INITIALIZER, inc;
    fmt_id(id, sizeof id, "%Y%m%d/", t_ms, site, page);
    BSON_APPEND_UTF8(&q, "_id", id);
    metadata(&q, day_of(t_ms), site, page);
    BSON_APPEND_DOCUMENT_BEGIN(&u, "$inc", &inc);
    for (int h = 0; h < 24; h++) {
        snprintf(key, sizeof key, "hourly.%d", h);
        BSON_APPEND_INT32(&inc, key, 0);
    }
    for (int h = 0; h < 24; h++)
        for (int m = 0; m < 60; m++) {
            snprintf(key, sizeof key, "minute.%d.%d", h, m);
            BSON_APPEND_INT32(&inc, key, 0);
        }
    bson_append_document_end(&u, &inc);
    int rc = ap_update(db, DAILY, &q, &u, true, false, NULL, NULL, NULL, NULL, err);
    bson_reinit(&q);
    bson_reinit(&u);
    if (rc == 0) {
        fmt_id(id, sizeof id, "%Y%m/", t_ms, site, page);
        BSON_APPEND_UTF8(&q, "_id", id);
        metadata(&q, month_of(t_ms), site, page);
        BSON_APPEND_DOCUMENT_BEGIN(&u, "$inc", &inc);
        for (int d = 1; d < 32; d++) {
            snprintf(key, sizeof key, "daily.%d", d);
            BSON_APPEND_INT32(&inc, key, 0);
        }
        bson_append_document_end(&u, &inc);
        rc = ap_update(db, MONTHLY, &q, &u, true, false, NULL, NULL, NULL, NULL, err);
    }
    bson_destroy(&q);
    bson_destroy(&u);
    return rc;
}

int ap_preagg_log_hit_prob(md_db *db, int64_t t_ms, const char *site, const char *page,
                           double prob, uint64_t *rng, bool *preallocated, md_error *err)
{
    /* if random.random() < prob_preallocate:
     *     preallocate(db, dt_utc + timedelta(days=1), site, page) */
    double x = (double)(pt_rand_next(rng) >> 11) / 9007199254740992.0;
    int rc = 0;
    if (preallocated)
        *preallocated = x < prob;
    if (x < prob)
        rc = ap_preagg_preallocate(db, t_ms + DAY_MS, site, page, err);
    return rc ? rc : ap_preagg_log_hit(db, t_ms, site, page, NULL, err);
}

static int64_t num_at(const bson_t *doc, const char *path)
{
    bson_iter_t it, d;
    if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, path, &d) &&
        BSON_ITER_HOLDS_NUMBER(&d))
        return bson_iter_as_int64(&d);
    return 0;
}

int ap_preagg_hourly(md_db *db, int64_t t_ms, const char *site, const char *page, int hour,
                     int64_t *hits, md_error *err)
{
    bson_t q = BSON_INITIALIZER, doc;
    char key[32];
    metadata(&q, day_of(t_ms), site, page);
    bson_t *proj = BCON_NEW("hourly", BCON_INT32(1));
    int rc = pt_find_one(db, DAILY, &q, proj, &doc, err);
    snprintf(key, sizeof key, "hourly.%d", hour);
    *hits = rc == 0 ? num_at(&doc, key) : 0;
    bson_destroy(&doc);
    bson_destroy(proj);
    bson_destroy(&q);
    return rc == MD_NOTFOUND ? 0 : rc;
}

int ap_preagg_range(md_db *db, int64_t from_ms, int64_t to_ms, const char *site,
                    const char *page, int64_t *days, int64_t *hits, md_error *err)
{
    bson_t *q = BCON_NEW("metadata.date", "{", "$gte", BCON_DATE_TIME(from_ms), "$lte",
                         BCON_DATE_TIME(to_ms), "}", "metadata.site", BCON_UTF8(site),
                         "metadata.page", BCON_UTF8(page));
    bson_t *o = BCON_NEW("projection", "{", "metadata.date", BCON_INT32(1), "hourly",
                         BCON_INT32(1), "}", "sort", "{", "metadata.date", BCON_INT32(1), "}");
    md_collection *c = md_db_get_collection(db, DAILY);
    md_cursor *cur = md_collection_find_with_opts(c, q, o);
    const bson_t *doc;
    *days = *hits = 0;
    while (md_cursor_next(cur, &doc)) {
        bson_iter_t it, h;
        (*days)++;
        if (bson_iter_init_find(&it, doc, "hourly") && bson_iter_recurse(&it, &h))
            while (bson_iter_next(&h))
                if (BSON_ITER_HOLDS_NUMBER(&h))
                    *hits += bson_iter_as_int64(&h);
    }
    int rc = md_cursor_error(cur, err) ? MD_ERROR : 0;
    md_cursor_destroy(cur);
    md_collection_destroy(c);
    bson_destroy(q);
    bson_destroy(o);
    return rc;
}

int ap_preagg_monthly_day(md_db *db, int64_t t_ms, const char *site, const char *page,
                          int64_t *hits, md_error *err)
{
    bson_t q = BSON_INITIALIZER, doc;
    char key[32];
    time_t tt = (time_t)(t_ms / 1000);
    struct tm tm;
    gmtime_r(&tt, &tm);
    metadata(&q, month_of(t_ms), site, page);
    bson_t *proj = BCON_NEW("daily", BCON_INT32(1));
    int rc = pt_find_one(db, MONTHLY, &q, proj, &doc, err);
    snprintf(key, sizeof key, "daily.%d", tm.tm_mday);
    *hits = rc == 0 ? num_at(&doc, key) : 0;
    bson_destroy(&doc);
    bson_destroy(proj);
    bson_destroy(&q);
    return rc == MD_NOTFOUND ? 0 : rc;
}

/* ---- the measurement ----------------------------------------------------------- */

/* One hit a minute (every `step` minutes) over the day at day_ms; the
 * day document's size after the first hit and at the end, the moves, the
 * bytes written per hit and the rate, under `tag`. */
static int one_day(md_db *db, int64_t day_ms, int step, const char *page, const char *tag,
                   ap_result *r, md_error *err)
{
    char id[256], name[64];
    ap_coll_stats a, b;
    int rc = ap_coll_stats_get(db, DAILY, &a, err);
    int64_t first = 0, hits = 0;
    fmt_id(id, sizeof id, "%Y%m%d/", day_ms, "site-1", page);
    bson_t *q = BCON_NEW("_id", BCON_UTF8(id));
    double t0 = ap_now_s();
    for (int m = 0; m < 1440 && rc == 0; m += step, hits++) {
        rc = ap_preagg_log_hit(db, day_ms + m * 60000LL, "site-1", page, NULL, err);
        if (m == 0)
            first = ap_doc_size(db, DAILY, q);
    }
    double s = ap_now_s() - t0;
    if (rc == 0)
        rc = ap_coll_stats_get(db, DAILY, &b, err);
    if (rc == 0) {
        snprintf(name, sizeof name, "%s_doc_bytes_first", tag);
        ap_set(r, name, (double)first, "bytes");
        snprintf(name, sizeof name, "%s_doc_bytes_last", tag);
        ap_set(r, name, (double)ap_doc_size(db, DAILY, q), "bytes");
        snprintf(name, sizeof name, "%s_moves", tag);
        ap_set(r, name, (double)(b.moves - a.moves), "moves");
        snprintf(name, sizeof name, "%s_daily_bytes_per_hit", tag);
        ap_set(r, name, (double)(b.bytes_written - a.bytes_written) / (double)hits, "bytes");
        snprintf(name, sizeof name, "%s_hits_per_s", tag);
        ap_set(r, name, (double)hits / s, "hits/s");
    }
    bson_destroy(q);
    return rc;
}

/* The rates, timed apart from the counts: on a later day, a hit on a fresh
 * (growing) page and one on a preallocated page in turn, minute by minute,
 * so that a change in the machine's load slows both alike. */
static int interleaved_rates(md_db *db, int64_t day_ms, int step, ap_result *r,
                             md_error *err)
{
    double tg = 0, tp = 0;
    int64_t hits = 0;
    int rc = ap_preagg_preallocate(db, day_ms, "site-1", "/preallocated.html", err);
    for (int m = 0; m < 1440 && rc == 0; m += step, hits++) {
        for (int k = 0; k < 2 && rc == 0; k++) {
            bool grow = (k == 0) == (hits % 2 == 0);
            double t0 = ap_now_s();
            rc = ap_preagg_log_hit(db, day_ms + m * 60000LL, "site-1",
                                   grow ? "/growing.html" : "/preallocated.html", NULL, err);
            *(grow ? &tg : &tp) += ap_now_s() - t0;
        }
    }
    if (rc == 0) {
        ap_set(r, "growing_hits_per_s", (double)hits / tg, "hits/s");
        ap_set(r, "prealloc_hits_per_s", (double)hits / tp, "hits/s");
    }
    return rc;
}

static int measure(md_db *db, const ap_args *a, ap_result *r, md_error *err)
{
    int step = a->quick ? 2 : 1, rc;
    if ((rc = ap_preagg_create_indexes(db, err)))
        return rc;
    /* A growing day, then a preallocated one (the next day). */
    if ((rc = one_day(db, T0_MS, step, "/index.html", "growing", r, err)))
        return rc;
    double t0 = ap_now_s();
    ap_coll_stats s0, s1;
    if ((rc = ap_coll_stats_get(db, DAILY, &s0, err)) ||
        (rc = ap_preagg_preallocate(db, T0_MS + DAY_MS, "site-1", "/index.html", err)) ||
        (rc = ap_coll_stats_get(db, DAILY, &s1, err)))
        return rc;
    ap_set(r, "preallocate_ms", (ap_now_s() - t0) * 1000.0, "ms");
    ap_set(r, "preallocate_daily_bytes_written", (double)(s1.bytes_written - s0.bytes_written),
           "bytes");
    double hit_ms = 1000.0 / ap_get(r, "growing_hits_per_s");
    ap_set(r, "log_hit_ms", hit_ms, "ms");
    char id[256];
    fmt_id(id, sizeof id, "%Y%m%d/", T0_MS + DAY_MS, "site-1", "/index.html");
    bson_t *q = BCON_NEW("_id", BCON_UTF8(id));
    ap_set(r, "preallocated_doc_bytes", (double)ap_doc_size(db, DAILY, q), "bytes");
    bson_destroy(q);
    if ((rc = one_day(db, T0_MS + DAY_MS, step, "/index.html", "prealloc", r, err)))
        return rc;
    /* The month documents: a hit a day on a fresh page, growing, then on a
     * preallocated month. */
    const int64_t nov = T0_MS + 22 * DAY_MS, dec = nov + 30 * DAY_MS; /* 2010-11-01, 12-01 */
    char mid[256];
    for (int pass = 0; pass < 2 && rc == 0; pass++) {
        int64_t month = pass ? dec : nov;
        ap_coll_stats m0, m1;
        if (pass)
            rc = ap_preagg_preallocate(db, month, "site-1", "/month.html", err);
        if (rc == 0)
            rc = ap_coll_stats_get(db, MONTHLY, &m0, err);
        fmt_id(mid, sizeof mid, "%Y%m/", month, "site-1", "/month.html");
        bson_t *mq = BCON_NEW("_id", BCON_UTF8(mid));
        int64_t first = 0;
        for (int d = 0; d < 30 && rc == 0; d++) {
            rc = ap_preagg_log_hit(db, month + d * DAY_MS + 3600000, "site-1", "/month.html",
                                   NULL, err);
            if (d == 0)
                first = ap_doc_size(db, MONTHLY, mq);
        }
        if (rc == 0 && (rc = ap_coll_stats_get(db, MONTHLY, &m1, err)) == 0) {
            const char *tag = pass ? "month_prealloc" : "month_growing";
            char name[64];
            snprintf(name, sizeof name, "%s_doc_bytes_day1", tag);
            ap_set(r, name, (double)first, "bytes");
            snprintf(name, sizeof name, "%s_doc_bytes_day30", tag);
            ap_set(r, name, (double)ap_doc_size(db, MONTHLY, mq), "bytes");
            snprintf(name, sizeof name, "%s_moves", tag);
            ap_set(r, name, (double)(m1.moves - m0.moves), "moves");
        }
        bson_destroy(mq);
    }
    if (rc == 0)
        rc = interleaved_rates(db, T0_MS + 5 * DAY_MS, step, r, err);
    /* The chart queries read back what was logged. */
    int64_t days = 0, hits = 0, h5 = 0;
    if (rc == 0)
        rc = ap_preagg_range(db, T0_MS, T0_MS + DAY_MS, "site-1", "/index.html", &days, &hits,
                             err);
    if (rc == 0)
        rc = ap_preagg_hourly(db, T0_MS, "site-1", "/index.html", 5, &h5, err);
    if (rc == 0) {
        ap_set(r, "range_days", (double)days, "docs");
        ap_set(r, "range_hits_ok", hits == 2 * (1440 / step) && h5 == 60 / step, "bool");
    }
    return rc;
}

/* ---- the claims ----------------------------------------------------------------- */

static ap_verdict c_growth(const ap_result *r, char *m, size_t n)
{
    double mv = ap_get(r, "growing_moves");
    snprintf(m, n, "a day of hits grew the document from %.0f to %.0f bytes: %.0f moves, "
                   "%.0f bytes written per hit",
             ap_get(r, "growing_doc_bytes_first"), ap_get(r, "growing_doc_bytes_last"), mv,
             ap_get(r, "growing_daily_bytes_per_hit"));
    if (strcmp(r->engine, "mmapv1") != 0)
        return AP_NA; /* no moves on a rewriting engine: see the bytes */
    return mv > 0 ? AP_HOLDS : AP_FAILS;
}

static ap_verdict c_prealloc(const ap_result *r, char *m, size_t n)
{
    double a = ap_get(r, "prealloc_doc_bytes_first"), b = ap_get(r, "prealloc_doc_bytes_last"),
           mv = ap_get(r, "prealloc_moves");
    snprintf(m, n, "preallocated: %.0f bytes before and %.0f after the day, %.0f moves", a, b,
             mv);
    return a == b && mv == 0 ? AP_HOLDS : AP_FAILS;
}

static ap_verdict c_faster(const ap_result *r, char *m, size_t n)
{
    double g = ap_get(r, "growing_hits_per_s"), p = ap_get(r, "prealloc_hits_per_s");
    snprintf(m, n, "%.0f hits/s on the growing day, %.0f on the preallocated one; bytes "
                   "written per hit %.0f and %.0f",
             g, p, ap_get(r, "growing_daily_bytes_per_hit"),
             ap_get(r, "prealloc_daily_bytes_per_hit"));
    return p >= g ? AP_HOLDS : AP_FAILS;
}

static ap_verdict c_month(const ap_result *r, char *m, size_t n)
{
    double g1 = ap_get(r, "month_growing_doc_bytes_day1"),
           g30 = ap_get(r, "month_growing_doc_bytes_day30"),
           p1 = ap_get(r, "month_prealloc_doc_bytes_day1"),
           p30 = ap_get(r, "month_prealloc_doc_bytes_day30");
    snprintf(m, n, "the month document grew from %.0f to %.0f bytes over 30 daily hits "
                   "(%.0f moves); preallocated it stayed %.0f -> %.0f (%.0f moves)",
             g1, g30, ap_get(r, "month_growing_moves"), p1, p30,
             ap_get(r, "month_prealloc_moves"));
    return g30 > g1 && p1 == p30 && ap_get(r, "month_prealloc_moves") == 0 ? AP_HOLDS
                                                                          : AP_FAILS;
}

static ap_verdict c_spike(const ap_result *r, char *m, size_t n)
{
    double p = ap_get(r, "preallocate_ms"), h = ap_get(r, "log_hit_ms");
    snprintf(m, n, "preallocating a day and month took %.3f ms (%.0f bytes written), a hit "
                   "%.3f ms: x%.0f",
             p, ap_get(r, "preallocate_daily_bytes_written"), h, p / h);
    return p > 5 * h ? AP_HOLDS : AP_FAILS;
}

static ap_verdict c_query(const ap_result *r, char *m, size_t n)
{
    double ok = ap_get(r, "range_hits_ok");
    snprintf(m, n, "the range query returned %.0f day documents; hourly counters %s",
             ap_get(r, "range_days"), ok == 1 ? "match the hits logged" : "DO NOT match");
    return ok == 1 && ap_get(r, "range_days") == 2 ? AP_HOLDS : AP_FAILS;
}

const ap_usecase ap_usecase_preagg = {
    .name = "ap_preagg",
    .chapter = "Ch.4 Operational Intelligence",
    .title = "Pre-Aggregated Reports",
    .pages = "pp.52-63",
    .demonstrates = "counters in one daily and one monthly document per page, updated with "
                    "$inc upserts and preallocated so they never grow",
    .measure = measure,
    .nclaims = 6,
    .claims = {
        {"documents growing after creation must be moved on disk (upsert + $inc adds "
         "keys all day)", c_growth},
        {"preallocated documents never grow and never need to be moved", c_prealloc},
        {"updates of a preallocated document are faster than of a growing one", c_faster},
        {"the monthly document grows a counter a day unless preallocated", c_month},
        {"preallocating is costly enough to spread it (probability per hit) rather than "
         "run it all at once", c_spike},
        {"a day's chart is one range query on {metadata.site, page, date}", c_query},
    },
};
