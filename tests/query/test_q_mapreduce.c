/*
 * test_q_mapreduce.c -- the mapReduce command and $where on every engine:
 * the manual's examples, every out mode, re-reduce (reduce meeting its own
 * output), key order, sort/limit/query/scope/finalize, the errors, and the
 * Applied Design Patterns' hierarchical aggregation (events -> stats.hourly
 * -> stats.daily -> stats.weekly / stats.monthly -> stats.yearly, run
 * incrementally in two passes by value.ts with out: {reduce}) checked
 * against a direct count of the events.
 */
#include <time.h>

#include "test_q_util.h"

#define MAPF "function () { emit(this.cust_id, this.amount); }"
#define SUMF "function (k, vs) { return Array.sum(vs); }"

static void orders(tdb *t)
{
    /* the manual's mapReduce example collection */
    T_RUN(t, "{\"insert\": \"orders\", \"documents\": ["
             "{\"_id\": 1, \"cust_id\": \"abc123\", \"amount\": 25, \"status\": \"A\"},"
             "{\"_id\": 2, \"cust_id\": \"abc123\", \"amount\": 50, \"status\": \"A\"},"
             "{\"_id\": 3, \"cust_id\": \"xyz123\", \"amount\": 25, \"status\": \"D\"},"
             "{\"_id\": 4, \"cust_id\": \"xyz123\", \"amount\": 10, \"status\": \"A\"},"
             "{\"_id\": 5, \"cust_id\": \"def456\", \"amount\": 7, \"status\": \"A\"}]}");
}

static void expect_json(const bson_t *r, const char *path, const char *want)
{
    bson_iter_t it;
    cr_assert(t_find(r, path, &it), "no %s", path);
    bson_t *w = NULL;
    bson_error_t e;
    char buf[8192];
    snprintf(buf, sizeof buf, "{\"v\": %s}", want);
    w = bson_new_from_json((const uint8_t *)buf, -1, &e);
    cr_assert(w, "%s", e.message);
    bson_t got = BSON_INITIALIZER;
    bson_append_iter(&got, "v", 1, &it);
    char *a = bson_as_canonical_extended_json(&got, NULL), *b = bson_as_canonical_extended_json(w, NULL);
    cr_assert_str_eq(a, b, "%s", path);
    bson_free(a);
    bson_free(b);
    bson_destroy(&got);
    bson_destroy(w);
}

Test(q_mapreduce, inline_manual_example)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        orders(&t);
        bson_t *r = T_OK(&t, "{\"mapReduce\": \"orders\", \"map\": \"%s\", \"reduce\": \"%s\","
                             " \"query\": {\"status\": \"A\"}, \"out\": {\"inline\": 1}}", MAPF, SUMF);
        expect_json(r, "results", "[{\"_id\": \"abc123\", \"value\": 75.0},"
                                  " {\"_id\": \"def456\", \"value\": 7.0},"
                                  " {\"_id\": \"xyz123\", \"value\": 10.0}]");
        expect_json(r, "counts", "{\"input\": 4, \"emit\": 4, \"reduce\": 1, \"output\": 3}");
        cr_assert(t_has(r, "timeMillis"));
        cr_assert_not(t_has(r, "timing"));
        bson_destroy(r);
        /* a missing collection maps nothing */
        r = T_OK(&t, "{\"mapReduce\": \"none\", \"map\": \"%s\", \"reduce\": \"%s\","
                     " \"out\": {\"inline\": 1}, \"verbose\": true}", MAPF, SUMF);
        expect_json(r, "results", "[]");
        cr_assert(t_has(r, "timing.total"));
        bson_destroy(r);
    }
}

Test(q_mapreduce, out_modes)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        orders(&t);
        /* replace (the string form): old documents go, indexes stay */
        T_RUN(&t, "{\"insert\": \"totals\", \"documents\": [{\"_id\": \"old\", \"value\": 1}]}");
        T_RUN(&t, "{\"createIndexes\": \"totals\", \"indexes\": [{\"key\": {\"value\": 1},"
                  " \"name\": \"value_1\"}]}");
        bson_t *r = T_OK(&t, "{\"mapReduce\": \"orders\", \"map\": \"%s\", \"reduce\": \"%s\","
                             " \"out\": \"totals\"}", MAPF, SUMF);
        cr_assert_str_eq(t_str(r, "result"), "totals");
        expect_json(r, "counts", "{\"input\": 5, \"emit\": 5, \"reduce\": 2, \"output\": 3}");
        bson_destroy(r);
        r = T_OK(&t, "{\"find\": \"totals\"}");
        expect_json(r, "cursor.firstBatch", "[{\"_id\": \"abc123\", \"value\": 75.0},"
                                            " {\"_id\": \"def456\", \"value\": 7.0},"
                                            " {\"_id\": \"xyz123\", \"value\": 35.0}]");
        bson_destroy(r);
        r = T_OK(&t, "{\"listIndexes\": \"totals\"}");
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 2);
        bson_destroy(r);
        /* merge: new keys overwrite, others stay */
        T_RUN(&t, "{\"insert\": \"orders\", \"documents\": [{\"_id\": 6, \"cust_id\": \"new\","
                  " \"amount\": 1, \"status\": \"A\"}]}");
        r = T_OK(&t, "{\"mapReduce\": \"orders\", \"map\": \"%s\", \"reduce\": \"%s\","
                     " \"query\": {\"amount\": {\"$lt\": 20}}, \"out\": {\"merge\": \"totals\","
                     " \"db\": \"test\", \"nonAtomic\": true}}", MAPF, SUMF);
        expect_json(r, "result", "{\"db\": \"test\", \"collection\": \"totals\"}");
        expect_json(r, "counts", "{\"input\": 3, \"emit\": 3, \"reduce\": 0, \"output\": 4}");
        bson_destroy(r);
        r = T_OK(&t, "{\"find\": \"totals\"}");
        expect_json(r, "cursor.firstBatch", "[{\"_id\": \"abc123\", \"value\": 75.0},"
                                            " {\"_id\": \"def456\", \"value\": 7.0},"
                                            " {\"_id\": \"xyz123\", \"value\": 10.0},"
                                            " {\"_id\": \"new\", \"value\": 1.0}]");
        bson_destroy(r);
        /* reduce: combined with what is there, finalize after */
        r = T_OK(&t, "{\"mapReduce\": \"orders\", \"map\": \"%s\", \"reduce\": \"%s\","
                     " \"finalize\": \"function (k, v) { return v * 2; }\","
                     " \"query\": {\"cust_id\": {\"$in\": [\"new\", \"abc123\"]}},"
                     " \"out\": {\"reduce\": \"totals\", \"sharded\": false}}", MAPF, SUMF);
        expect_json(r, "counts", "{\"input\": 3, \"emit\": 3, \"reduce\": 3, \"output\": 4}");
        bson_destroy(r);
        /* abc123: finalize(reduce([finalize(75), 75])) = (150 + 75) * 2 */
        r = T_OK(&t, "{\"find\": \"totals\", \"filter\": {\"_id\": {\"$in\": [\"abc123\", \"new\"]}}}");
        expect_json(r, "cursor.firstBatch", "[{\"_id\": \"abc123\", \"value\": 450.0},"
                                            " {\"_id\": \"new\", \"value\": 6.0}]");
        bson_destroy(r);
        T_ERR(&t, 115, "another database", "{\"mapReduce\": \"orders\", \"map\": \"%s\","
              " \"reduce\": \"%s\", \"out\": {\"replace\": \"x\", \"db\": \"other\"}}", MAPF, SUMF);
        T_ERR(&t, 15895, NULL, "{\"mapReduce\": \"orders\", \"map\": \"%s\", \"reduce\": \"%s\","
              " \"out\": {\"replace\": \"x\", \"nonAtomic\": true}}", MAPF, SUMF);
    }
}

Test(q_mapreduce, rereduce_and_single_values)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        /* 30,000 emits of ~40 bytes pass the in-memory limit: reduce runs
         * on batches and then again on its own output */
        for (int b = 0; b < 30; b++) {
            char buf[60000];
            size_t o = (size_t)snprintf(buf, sizeof buf, "{\"insert\": \"e\", \"documents\": [");
            for (int i = 0; i < 1000; i++)
                o += (size_t)snprintf(buf + o, sizeof buf - o, "%s{\"k\": %d, \"n\": 1}",
                                      i ? "," : "", i % 3);
            snprintf(buf + o, sizeof buf - o, "]}");
            T_RUN(&t, "%s", buf);
        }
        bson_t *r = T_OK(&t, "{\"mapReduce\": \"e\", \"map\": \"function () { emit(this.k,"
                             " {n: this.n, calls: 0}); }\", \"reduce\": \"function (k, vs) {"
                             " var r = {n: 0, calls: 1}; vs.forEach(function (v) { r.n += v.n;"
                             " r.calls += v.calls; }); return r; }\", \"out\": {\"inline\": 1}}");
        expect_json(r, "counts.input", "30000");
        expect_json(r, "counts.emit", "30000");
        cr_assert_gt(t_i64(r, "counts.reduce"), 6, "%lld", (long long)t_i64(r, "counts.reduce"));
        for (int k = 0; k < 3; k++) {
            char path[64];
            snprintf(path, sizeof path, "results.%d.value.n", k);
            cr_assert_eq(t_dbl(r, path), k == 0 ? 10020.0 : 9990.0); /* 334 or 333 per 1000 */
            snprintf(path, sizeof path, "results.%d.value.calls", k);
            cr_assert_gt(t_dbl(r, path), 1.0); /* re-reduced */
        }
        bson_destroy(r);
        /* a key emitted once is never reduced (this reduce would fail) */
        r = T_OK(&t, "{\"mapReduce\": \"e\", \"map\": \"function () { if (this.k == 0)"
                     " emit(this._id, 1); }\", \"reduce\": \"function () { throw 'no'; }\","
                     " \"limit\": 5, \"out\": {\"inline\": 1}}");
        expect_json(r, "counts", "{\"input\": 5, \"emit\": 2, \"reduce\": 0, \"output\": 2}");
        bson_destroy(r);
    }
}

Test(q_mapreduce, keys_sort_limit_scope)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"insert\": \"k\", \"documents\": [{\"_id\": 1, \"k\": \"b\"},"
                  " {\"_id\": 2, \"k\": 2}, {\"_id\": 3, \"k\": {\"a\": 1}}, {\"_id\": 4, \"k\": 1.0},"
                  " {\"_id\": 5, \"k\": {\"$numberLong\": \"1\"}}, {\"_id\": 6, \"k\": null},"
                  " {\"_id\": 7, \"k\": \"a\"}]}");
        /* keys compare as BSON values: 1.0 and NumberLong(1) are one key;
         * the output is in MongoDB's order */
        bson_t *r = T_OK(&t, "{\"mapReduce\": \"k\", \"map\": \"function () { emit(this.k,"
                             " this._id * factor); }\", \"reduce\": \"%s\", \"scope\": {\"factor\": 10},"
                             " \"out\": {\"inline\": 1}}", SUMF);
        expect_json(r, "results", "[{\"_id\": null, \"value\": 60.0}, {\"_id\": 1.0, \"value\": 90.0},"
                                  " {\"_id\": 2.0, \"value\": 20.0}, {\"_id\": \"a\", \"value\": 70.0},"
                                  " {\"_id\": \"b\", \"value\": 10.0}, {\"_id\": {\"a\": 1}, \"value\": 30.0}]");
        bson_destroy(r);
        /* sort + limit pick the input; finalize shapes each value */
        r = T_OK(&t, "{\"mapReduce\": \"k\", \"map\": \"function () { emit('all', this._id); }\","
                     " \"reduce\": \"function (k, vs) { return vs.join(','); }\","
                     " \"finalize\": \"function (k, v) { return {key: k, ids: v}; }\","
                     " \"sort\": {\"_id\": -1}, \"limit\": 3, \"out\": {\"inline\": 1}}");
        expect_json(r, "results", "[{\"_id\": \"all\", \"value\": {\"key\": \"all\", \"ids\": \"7,6,5\"}}]");
        bson_destroy(r);
        /* map as BSON code with scope, emit documents and int64 */
        r = T_OK(&t, "{\"mapReduce\": \"k\", \"map\": {\"$code\": \"function () { if (this._id < lim)"
                     " emit({id: this._id}, NumberLong(this._id)); }\", \"$scope\": {\"lim\": 3}},"
                     " \"reduce\": \"%s\", \"out\": {\"inline\": 1}}", SUMF);
        expect_json(r, "results", "[{\"_id\": {\"id\": 1.0}, \"value\": {\"$numberLong\": \"1\"}},"
                                  " {\"_id\": {\"id\": 2.0}, \"value\": {\"$numberLong\": \"2\"}}]");
        bson_destroy(r);
    }
}

Test(q_mapreduce, errors)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        orders(&t);
        T_ERR(&t, 139, "SyntaxError", "{\"mapReduce\": \"orders\", \"map\": \"function () {"
              " emit(1 }\", \"reduce\": \"%s\", \"out\": {\"inline\": 1}}", SUMF);
        T_ERR(&t, 139, "boom", "{\"mapReduce\": \"orders\", \"map\": \"%s\", \"reduce\":"
              " \"function () { throw new Error('boom'); }\", \"out\": {\"inline\": 1}}", MAPF);
        T_ERR(&t, 139, "emit takes 2 args", "{\"mapReduce\": \"orders\", \"map\": \"function () {"
              " emit(1); }\", \"reduce\": \"%s\", \"out\": {\"inline\": 1}}", SUMF);
        T_ERR(&t, 50, NULL, "{\"mapReduce\": \"orders\", \"map\": \"function () { for (;;) {} }\","
              " \"reduce\": \"%s\", \"out\": {\"inline\": 1}, \"maxTimeMS\": 100}", SUMF);
        T_ERR(&t, 50, NULL, "{\"mapReduce\": \"orders\", \"map\": \"%s\", \"reduce\": \"%s\","
              " \"finalize\": \"function () { while (true) {} }\", \"out\": \"o\","
              " \"maxTimeMS\": 100}", MAPF, SUMF);
        T_ERR(&t, 13606, NULL, "{\"mapReduce\": \"orders\", \"map\": \"%s\", \"reduce\": \"%s\"}",
              MAPF, SUMF);
        T_ERR(&t, 13606, NULL, "{\"mapReduce\": \"orders\", \"map\": \"%s\", \"reduce\": \"%s\","
              " \"out\": 1}", MAPF, SUMF);
        T_ERR(&t, 13522, NULL, "{\"mapReduce\": \"orders\", \"map\": \"%s\", \"reduce\": \"%s\","
              " \"out\": {\"into\": \"x\"}}", MAPF, SUMF);
        T_ERR(&t, 2, NULL, "{\"mapReduce\": \"orders\", \"map\": 1, \"reduce\": \"%s\","
              " \"out\": {\"inline\": 1}}", SUMF);
        T_ERR(&t, 2, "'reduce' is required", "{\"mapReduce\": \"orders\", \"map\": \"%s\","
              " \"out\": {\"inline\": 1}}", MAPF);
        T_ERR(&t, 14, NULL, "{\"mapReduce\": \"orders\", \"map\": \"%s\", \"reduce\": \"%s\","
              " \"query\": 5, \"out\": {\"inline\": 1}}", MAPF, SUMF);
        /* nothing was written by the failures; the database still works */
        bson_t *r = T_OK(&t, "{\"count\": \"o\"}");
        cr_assert_eq(t_i64(r, "n"), 0);
        bson_destroy(r);
    }
}

Test(q_mapreduce, where)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        orders(&t);
        bson_t *r = T_OK(&t, "{\"find\": \"orders\", \"filter\": {\"$where\": \"this.amount > 20\"},"
                             " \"projection\": {\"_id\": 1}}");
        expect_json(r, "cursor.firstBatch", "[{\"_id\": 1}, {\"_id\": 2}, {\"_id\": 3}]");
        bson_destroy(r);
        r = T_OK(&t, "{\"count\": \"orders\", \"query\": {\"status\": \"A\", \"$where\":"
                     " {\"$code\": \"function () { return this.cust_id.indexOf('xyz') == 0; }\"}}}");
        cr_assert_eq(t_i64(r, "n"), 1);
        bson_destroy(r);
        T_RUN(&t, "{\"update\": \"orders\", \"updates\": [{\"q\": {\"$where\": \"obj = this;"
                  " return this.amount == 7;\"}, \"u\": {\"$set\": {\"small\": true}}}]}");
        r = T_OK(&t, "{\"find\": \"orders\", \"filter\": {\"small\": true}}");
        expect_json(r, "cursor.firstBatch.0._id", "5");
        bson_destroy(r);
        T_RUN(&t, "{\"delete\": \"orders\", \"deletes\": [{\"q\": {\"$where\": \"this._id > 4\"},"
                  " \"limit\": 0}]}");
        r = T_OK(&t, "{\"count\": \"orders\"}");
        cr_assert_eq(t_i64(r, "n"), 4);
        bson_destroy(r);
        T_ERR(&t, 139, "TypeError", "{\"find\": \"orders\", \"filter\": {\"$where\": \"this.no.x\"}}");
        T_ERR(&t, 2, NULL, "{\"find\": \"orders\", \"filter\": {\"$where\": 1}}");
    }
}

Test(q_mapreduce, where_runaway_stopped_by_the_configured_limit)
{
    md_db *db;
    md_error err;
    char dir[] = "/tmp/md_where_XXXXXX";
    cr_assert(mkdtemp(dir));
    bson_t *o = BCON_NEW("engine", "btree", "jsTimeLimitMS", BCON_INT32(200));
    cr_assert_eq(md_db_open(dir, o, &db, &err), 0, "%s", err.message);
    bson_destroy(o);
    bson_t r;
    md_db_command_json(db, "{\"insert\": \"c\", \"documents\": [{\"_id\": 1}]}", &r, &err);
    bson_destroy(&r);
    cr_assert_neq(md_db_command_json(db, "{\"find\": \"c\", \"filter\": {\"$where\":"
                                         " \"while (true) {}\"}}", &r, &err), 0);
    bson_destroy(&r);
    cr_assert_eq(err.code, 50, "%d %s", err.code, err.message);
    cr_assert_str_eq(err.code_name, "MaxTimeMSExpired");
    cr_assert_eq(md_db_command_json(db, "{\"find\": \"c\"}", &r, &err), 0);
    bson_destroy(&r);
    md_db_close(db);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

/* ---- the book's hierarchical aggregation ------------------------------------------------ */

#define NEV 1500
#define DAY 86400

typedef struct agg {
    int user;
    int64_t start; /* the period's first second (UTC) */
    double total, count;
} agg;

typedef struct level {
    agg *v;
    int n;
} level;

static void level_add(level *l, int user, int64_t start, double length)
{
    for (int i = 0; i < l->n; i++)
        if (l->v[i].user == user && l->v[i].start == start) {
            l->v[i].total += length;
            l->v[i].count += 1;
            return;
        }
    l->v = realloc(l->v, (size_t)(l->n + 1) * sizeof *l->v);
    l->v[l->n++] = (agg){user, start, length, 1};
}

static const char *const users[] = {"rick", "ann", "bob"};

/* Every document of a stats collection matches the direct count. */
static void check_level(tdb *t, const char *coll, const level *l)
{
    bson_t *r = T_OK(t, "{\"find\": \"%s\", \"batchSize\": 100000}", coll);
    bson_iter_t it, d;
    cr_assert(t_find(r, "cursor.firstBatch", &it) && bson_iter_recurse(&it, &d));
    int n = 0;
    while (bson_iter_next(&d)) {
        uint32_t len;
        const uint8_t *p;
        bson_t doc;
        bson_iter_document(&d, &len, &p);
        bson_init_static(&doc, p, len);
        const char *u = t_str(&doc, "_id.u");
        bson_iter_t di;
        cr_assert(t_find(&doc, "_id.d", &di) && BSON_ITER_HOLDS_DATE_TIME(&di), "%s", coll);
        int64_t start = bson_iter_date_time(&di) / 1000;
        const agg *a = NULL;
        for (int i = 0; i < l->n; i++)
            if (!strcmp(users[l->v[i].user], u) && l->v[i].start == start)
                a = &l->v[i];
        char *j = t_json(&doc);
        cr_assert(a, "[%s] %s: %s has no events", t->engine, coll, j);
        cr_assert_eq(t_dbl(&doc, "value.count"), a->count, "[%s] %s: %s", t->engine, coll, j);
        cr_assert_eq(t_dbl(&doc, "value.total"), a->total, "[%s] %s: %s", t->engine, coll, j);
        cr_assert_float_eq(t_dbl(&doc, "value.mean"), a->total / a->count, 1e-9, "%s", j);
        bson_free(j);
        n++;
    }
    cr_assert_eq(n, l->n, "[%s] %s: %d documents, %d expected", t->engine, coll, n, l->n);
    bson_destroy(r);
}

#define REDUCEF "function (key, values) { var r = {total: 0, count: 0, mean: 0, ts: null};" \
                " values.forEach(function (v) { r.total += v.total; r.count += v.count; });" \
                " return r; }"
#define FINALIZEF "function (key, value) { if (value.count > 0) { value.mean = value.total /" \
                  " value.count; } value.ts = new Date(); return value; }"
#define MAPF_HOUR "function () { var key = {u: this.userid, d: new Date(this.ts.getFullYear()," \
                  " this.ts.getMonth(), this.ts.getDate(), this.ts.getHours(), 0, 0, 0)};" \
                  " emit(key, {total: this.length, count: 1, mean: 0, ts: null}); }"
#define MAPF_LEVEL(d) "function () { var key = {u: this._id.u, d: " d "};" \
                      " emit(key, {total: this.value.total, count: this.value.count, mean: 0," \
                      " ts: null}); }"
/* the book's keys, with its two slips fixed: the week used an undefined
 * `dt`, the year `new Date(y, 1, 1)` (February) */
#define DAYKEY "new Date(this._id.d.getFullYear(), this._id.d.getMonth(), this._id.d.getDate(), 0, 0, 0, 0)"
#define WEEKKEY "new Date(this._id.d.valueOf() - this._id.d.getDay() * 24 * 60 * 60 * 1000)"
#define MONTHKEY "new Date(this._id.d.getFullYear(), this._id.d.getMonth(), 1, 0, 0, 0, 0)"
#define YEARKEY "new Date(this._id.d.getFullYear(), 0, 1, 0, 0, 0, 0)"

static void h_aggregate(tdb *t, const char *in, const char *out, const char *mapf,
                        int64_t last_run, int64_t cutoff)
{
    T_RUN(t, "{\"mapReduce\": \"%s\", \"map\": \"%s\", \"reduce\": \"%s\", \"finalize\": \"%s\","
             " \"query\": {\"value.ts\": {\"$gt\": {\"$date\": {\"$numberLong\": \"%lld\"}},"
             " \"$lt\": {\"$date\": {\"$numberLong\": \"%lld\"}}}}, \"out\": {\"reduce\": \"%s\"}}",
          in, mapf, REDUCEF, FINALIZEF, (long long)last_run, (long long)cutoff, out);
}

static int64_t q_now_ms_test(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One incremental run over the events with ts in [ev_from, ev_to). */
static void run_hierarchy(tdb *t, int64_t ev_from, int64_t ev_to, int64_t *last_run)
{
    T_RUN(t, "{\"mapReduce\": \"events\", \"map\": \"%s\", \"reduce\": \"%s\", \"finalize\": \"%s\","
             " \"query\": {\"ts\": {\"$gte\": {\"$date\": {\"$numberLong\": \"%lld\"}},"
             " \"$lt\": {\"$date\": {\"$numberLong\": \"%lld\"}}}}, \"out\": {\"reduce\": \"stats.hourly\"}}",
          MAPF_HOUR, REDUCEF, FINALIZEF, (long long)ev_from * 1000, (long long)ev_to * 1000);
    /* each level takes the aggregates its finer level stamped since the
     * last run (value.ts), as the book's h_aggregate does */
    int64_t cutoff = q_now_ms_test() + 1;
    h_aggregate(t, "stats.hourly", "stats.daily", MAPF_LEVEL(DAYKEY), *last_run, cutoff);
    cutoff = q_now_ms_test() + 1;
    h_aggregate(t, "stats.daily", "stats.weekly", MAPF_LEVEL(WEEKKEY), *last_run, cutoff);
    h_aggregate(t, "stats.daily", "stats.monthly", MAPF_LEVEL(MONTHKEY), *last_run, cutoff);
    cutoff = q_now_ms_test() + 1;
    h_aggregate(t, "stats.monthly", "stats.yearly", MAPF_LEVEL(YEARKEY), *last_run, cutoff);
    *last_run = cutoff;
}

Test(q_mapreduce, applied_patterns_hierarchical_aggregation)
{
    setenv("TZ", "UTC", 1); /* the book's keys use the local-time Date getters */
    tzset();
    level lv[5] = {{0}}; /* hourly daily weekly monthly yearly */
    struct { int user; int64_t ts; int length; } ev[NEV];
    uint64_t seed = 42;
    const int64_t t0 = 1262304000; /* 2010-01-01 */
    for (int i = 0; i < NEV; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        ev[i].user = (int)((seed >> 33) % 3);
        ev[i].ts = t0 + (int64_t)((seed >> 20) % (2 * 365 * DAY)); /* 2010 and 2011 */
        ev[i].length = (int)((seed >> 10) % 300) + 1;
        time_t s = (time_t)ev[i].ts;
        struct tm tm;
        gmtime_r(&s, &tm);
        int64_t day = ev[i].ts - ev[i].ts % DAY;
        level_add(&lv[0], ev[i].user, ev[i].ts - ev[i].ts % 3600, ev[i].length);
        level_add(&lv[1], ev[i].user, day, ev[i].length);
        level_add(&lv[2], ev[i].user, day - (int64_t)tm.tm_wday * DAY, ev[i].length);
        struct tm m = {.tm_year = tm.tm_year, .tm_mon = tm.tm_mon, .tm_mday = 1};
        level_add(&lv[3], ev[i].user, (int64_t)timegm(&m), ev[i].length);
        struct tm y = {.tm_year = tm.tm_year, .tm_mon = 0, .tm_mday = 1};
        level_add(&lv[4], ev[i].user, (int64_t)timegm(&y), ev[i].length);
    }
    tdb t;
    FOR_EACH_ENGINE(t) {
        for (int b = 0; b < NEV; b += 150) {
            char buf[30000];
            size_t o = (size_t)snprintf(buf, sizeof buf, "{\"insert\": \"events\", \"documents\": [");
            for (int i = b; i < b + 150 && i < NEV; i++)
                o += (size_t)snprintf(buf + o, sizeof buf - o, "%s{\"userid\": \"%s\", \"ts\":"
                                      " {\"$date\": {\"$numberLong\": \"%lld\"}}, \"length\": %d}",
                                      i > b ? "," : "", users[ev[i].user],
                                      (long long)ev[i].ts * 1000, ev[i].length);
            snprintf(buf + o, sizeof buf - o, "]}");
            T_RUN(&t, "%s", buf);
        }
        T_RUN(&t, "{\"createIndexes\": \"events\", \"indexes\": [{\"key\": {\"ts\": 1}, \"name\": \"ts_1\"}]}");
        const char *stats[] = {"stats.hourly", "stats.daily", "stats.weekly", "stats.monthly", "stats.yearly"};
        for (int i = 0; i < 4; i++)
            T_RUN(&t, "{\"createIndexes\": \"%s\", \"indexes\": [{\"key\": {\"value.ts\": 1},"
                      " \"name\": \"value.ts_1\"}]}", stats[i]);
        /* two incremental runs, split on a year boundary: every finer
         * aggregate then belongs to one run only (the book's scheme counts
         * an aggregate twice when a run boundary cuts through its period) */
        int64_t last_run = 0;
        run_hierarchy(&t, 0, t0 + 365 * DAY, &last_run);
        t_sleep_ms(5);
        run_hierarchy(&t, t0 + 365 * DAY, t0 + 3 * 365 * DAY, &last_run);
        for (int i = 0; i < 5; i++)
            check_level(&t, stats[i], &lv[i]);
        /* and the grand totals against a direct count of the events */
        bson_t *r = T_OK(&t, "{\"count\": \"events\"}");
        cr_assert_eq(t_i64(r, "n"), NEV);
        bson_destroy(r);
        r = T_OK(&t, "{\"mapReduce\": \"stats.yearly\", \"map\": \"function () { emit('all',"
                     " this.value.count); }\", \"reduce\": \"%s\", \"out\": {\"inline\": 1}}", SUMF);
        cr_assert_eq(t_dbl(r, "results.0.value"), NEV);
        bson_destroy(r);
    }
    for (int i = 0; i < 5; i++)
        free(lv[i].v);
}
