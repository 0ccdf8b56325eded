/*
 * test_agg_vs_mapreduce.c -- the Applied Design Patterns' log reports two
 * ways, on every engine: the aggregation pipeline ($match, $project with
 * $year / $month / $dayOfMonth, $group) and the same report as mapReduce
 * (the map emitting the day of each event), over generated log events; the
 * two must give the same count and byte total for every day, and both must
 * agree with a count made here from the events themselves.
 */
#include "test_q_util.h"

#define NEV 600
#define NDAYS 40

/* Event i: a date spread over NDAYS days of 2012 (UTC), a path, a size. */
static int64_t ev_ms(int i) { return (1325376000LL + (int64_t)(i * 7919 % (NDAYS * 86400))) * 1000; }
static int ev_bytes(int i) { return 100 + i % 37; }
static int ev_day(int i) { return (int)((ev_ms(i) / 1000 - 1325376000LL) / 86400); }

Test(q_agg_vs_mapreduce, daily_hits_by_pipeline_and_by_mapreduce)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        int64_t want_n[NDAYS] = {0}, want_b[NDAYS] = {0};
        for (int i = 0; i < NEV; i++) {
            T_RUN(&t, "{\"insert\": \"events\", \"documents\": [{\"_id\": %d, \"ts\": {\"$date\": "
                      "{\"$numberLong\": \"%lld\"}}, \"path\": \"/p%d\", \"bytes\": %d}]}",
                  i, (long long)ev_ms(i), i % 3, ev_bytes(i));
            if (i % 3 != 2) { /* the reports take /p0 and /p1 */
                want_n[ev_day(i)]++;
                want_b[ev_day(i)] += ev_bytes(i);
            }
        }
        bson_t *a = T_OK(&t,
            "{\"aggregate\": \"events\", \"cursor\": {\"batchSize\": 1000}, \"pipeline\": ["
            "{\"$match\": {\"path\": {\"$in\": [\"/p0\", \"/p1\"]}}},"
            "{\"$project\": {\"y\": {\"$year\": \"$ts\"}, \"m\": {\"$month\": \"$ts\"},"
            " \"d\": {\"$dayOfMonth\": \"$ts\"}, \"bytes\": 1}},"
            "{\"$group\": {\"_id\": {\"y\": \"$y\", \"m\": \"$m\", \"d\": \"$d\"},"
            " \"n\": {\"$sum\": 1}, \"b\": {\"$sum\": \"$bytes\"}}},"
            "{\"$sort\": {\"_id.y\": 1, \"_id.m\": 1, \"_id.d\": 1}}]}");
        bson_t *m = T_OK(&t,
            "{\"mapReduce\": \"events\", \"query\": {\"path\": {\"$in\": [\"/p0\", \"/p1\"]}},"
            " \"map\": \"function () { emit({y: this.ts.getUTCFullYear(), m: "
            "this.ts.getUTCMonth() + 1, d: this.ts.getUTCDate()}, {n: 1, b: this.bytes}); }\","
            " \"reduce\": \"function (k, vs) { var r = {n: 0, b: 0}; vs.forEach(function (v) "
            "{ r.n += v.n; r.b += v.b; }); return r; }\", \"out\": {\"inline\": 1}}");
        int days = 0;
        for (int d = 0; d < NDAYS; d++)
            days += want_n[d] > 0;
        cr_assert_eq(t_len(a, "cursor.firstBatch"), days, "[%s] pipeline days", t.engine);
        cr_assert_eq(t_len(m, "results"), days, "[%s] mapReduce days", t.engine);
        int k = 0;
        for (int d = 0; d < NDAYS; d++) {
            if (!want_n[d])
                continue;
            char p[96];
            /* day d of 2012: January has 31 days */
            int mon = d < 31 ? 1 : 2, dom = d < 31 ? d + 1 : d - 30;
            snprintf(p, sizeof p, "cursor.firstBatch.%d._id.m", k);
            cr_assert_eq(t_i64(a, p), mon, "[%s] %s", t.engine, p);
            snprintf(p, sizeof p, "cursor.firstBatch.%d._id.d", k);
            cr_assert_eq(t_i64(a, p), dom, "[%s] %s", t.engine, p);
            snprintf(p, sizeof p, "cursor.firstBatch.%d.n", k);
            cr_assert_eq(t_i64(a, p), want_n[d], "[%s] %s", t.engine, p);
            snprintf(p, sizeof p, "cursor.firstBatch.%d.b", k);
            cr_assert_eq(t_i64(a, p), want_b[d], "[%s] %s", t.engine, p);
            /* mapReduce's output is ordered by key, the same order here */
            snprintf(p, sizeof p, "results.%d._id.m", k);
            cr_assert_eq(t_i64(m, p), mon, "[%s] %s", t.engine, p);
            snprintf(p, sizeof p, "results.%d._id.d", k);
            cr_assert_eq(t_i64(m, p), dom, "[%s] %s", t.engine, p);
            snprintf(p, sizeof p, "results.%d.value.n", k);
            cr_assert_eq(t_i64(m, p), want_n[d], "[%s] %s", t.engine, p);
            snprintf(p, sizeof p, "results.%d.value.b", k);
            cr_assert_eq(t_i64(m, p), want_b[d], "[%s] %s", t.engine, p);
            k++;
        }
        bson_destroy(a);
        bson_destroy(m);
    }
}
