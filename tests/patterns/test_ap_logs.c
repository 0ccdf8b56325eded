/*
 * test_ap_logs.c -- Ch.4 Storing Log Data (patterns/ap_logs.c) on every
 * engine: inserts at each write concern (w: 2 refused on a standalone),
 * bulk inserts, the page, date and host+date queries with the book's
 * indexes in explain (1,296 keys against 11), the per-day aggregation, the
 * TTL index, a capped collection and rotation, and the use case's measured
 * claims.
 */
#include "ap.h"
#include "pt_test_util.h"

#define DAY 86400000LL
#define OCT10 971136000000LL /* 2000-10-10T00:00:00Z */

static void load(ptt_db *t)
{
    md_error err;
    ap_event ev[40];
    char hosts[40][16];
    /* 40 events on Oct 10, every 10th from 127.0.0.1; 10 on Oct 11. */
    for (int i = 0; i < 40; i++) {
        snprintf(hosts[i], sizeof hosts[i], "10.0.0.%d", i);
        ev[i] = (ap_event){.host = i % 10 == 0 ? "127.0.0.1" : hosts[i],
                           .path = i % 2 ? "/apache_pb.gif" : "/index.html",
                           .referer = "http://www.example.com/start.html",
                           .user_agent = "Mozilla/4.08", .time_ms = OCT10 + i * 60000LL};
    }
    cr_assert_eq(ap_logs_insert_bulk(t->db, ev, 40, NULL, &err), 0, "[%s] %s", t->engine,
                 err.message);
    for (int i = 0; i < 10; i++) {
        ev[i].time_ms = OCT10 + DAY + i;
        ev[i].host = "127.0.0.1";
        cr_assert_eq(ap_logs_insert(t->db, &ev[i], NULL, &err), 0);
    }
}

Test(ap_logs, write_concerns)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        md_error err;
        ap_event ev = {.host = "127.0.0.1", .path = "/", .time_ms = OCT10};
        bson_t *w0 = BCON_NEW("w", BCON_INT32(0)), *w1 = BCON_NEW("w", BCON_INT32(1)),
               *j = BCON_NEW("j", BCON_BOOL(true)), *w2 = BCON_NEW("w", BCON_INT32(2));
        cr_assert_eq(ap_logs_insert(t.db, &ev, w0, &err), 0, "[%s] %s", t.engine, err.message);
        cr_assert_eq(ap_logs_insert(t.db, &ev, NULL, &err), 0);
        cr_assert_eq(ap_logs_insert(t.db, &ev, w1, &err), 0);
        cr_assert_eq(ap_logs_insert(t.db, &ev, j, &err), 0);
        cr_assert_neq(ap_logs_insert(t.db, &ev, w2, &err), 0, "[%s] w: 2 on a standalone",
                      t.engine);
        cr_assert_eq(err.code, MD_CODE_BAD_VALUE);
        ap_event evs[100];
        for (int i = 0; i < 100; i++)
            evs[i] = ev;
        cr_assert_eq(ap_logs_insert_bulk(t.db, evs, 100, j, &err), 0);
        cr_assert_eq(ptt_count(&t, "events", "{}"), 104);
        bson_destroy(w0);
        bson_destroy(w1);
        bson_destroy(j);
        bson_destroy(w2);
    }
}

Test(ap_logs, queries_and_the_compound_index_order)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        md_error err;
        int64_t n;
        load(&t);
        bson_t *k = BCON_NEW("path", BCON_INT32(1));
        cr_assert_eq(pt_ensure_index(t.db, "events", k, NULL, &err), 0);
        bson_destroy(k);
        cr_assert_eq(ap_logs_by_path(t.db, "/apache_pb.gif", &n, &err), 0);
        cr_assert_eq(n, 25, "[%s] %lld", t.engine, (long long)n);
        cr_assert_eq(ap_logs_by_date(t.db, OCT10, OCT10 + DAY, &n, &err), 0);
        cr_assert_eq(n, 40);
        cr_assert_eq(ap_logs_by_host_date(t.db, "127.0.0.1", OCT10, OCT10 + DAY, &n, &err), 0);
        cr_assert_eq(n, 4);
        ap_plan x;
        bson_t *q = BCON_NEW("path", BCON_UTF8("/apache_pb.gif"));
        cr_assert_eq(ap_explain_find(t.db, "events", q, NULL, NULL, &x, &err), 0);
        cr_assert_str_eq(x.index, "path_1");
        bson_destroy(q);
        /* time_1_host_1 walks the whole day; host_1_time_1 only the host's. */
        k = BCON_NEW("time", BCON_INT32(1), "host", BCON_INT32(1));
        cr_assert_eq(pt_ensure_index(t.db, "events", k, NULL, &err), 0);
        bson_destroy(k);
        q = BCON_NEW("host", BCON_UTF8("127.0.0.1"), "time", "{", "$gte", BCON_DATE_TIME(OCT10),
                     "$lt", BCON_DATE_TIME(OCT10 + DAY), "}");
        cr_assert_eq(ap_explain_find(t.db, "events", q, NULL, NULL, &x, &err), 0);
        cr_assert_str_eq(x.index, "time_1_host_1", "[%s]", t.engine);
        cr_assert_eq(x.n_returned, 4);
        cr_assert_geq(x.keys_examined, 40, "[%s] %lld", t.engine, (long long)x.keys_examined);
        k = BCON_NEW("host", BCON_INT32(1), "time", BCON_INT32(1));
        cr_assert_eq(pt_ensure_index(t.db, "events", k, NULL, &err), 0);
        cr_assert_eq(ap_explain_find(t.db, "events", q, NULL, k, &x, &err), 0);
        cr_assert_str_eq(x.index, "host_1_time_1");
        cr_assert_eq(x.keys_examined, 4);
        cr_assert_eq(x.docs_examined, 4);
        cr_assert_eq(ap_explain_find(t.db, "events", q, NULL, NULL, &x, &err), 0);
        cr_assert_str_eq(x.index, "host_1_time_1", "[%s] the planner's choice", t.engine);
        bson_destroy(k);
        bson_destroy(q);
        /* Requests per page and day. */
        int64_t groups, hits;
        cr_assert_eq(ap_logs_hits_by_day(t.db, OCT10 - 9 * DAY, OCT10 + 22 * DAY, &groups,
                                         &hits, &err), 0, "%s", err.message);
        cr_assert_eq(groups, 4, "[%s] %lld groups", t.engine, (long long)groups);
        cr_assert_eq(hits, 50);
        bson_t *r = PTT_OK(&t, "{\"aggregate\": \"events\", \"pipeline\": [{\"$match\": "
                               "{\"host\": \"127.0.0.1\"}}, {\"$project\": {\"path\": 1, "
                               "\"date\": {\"y\": {\"$year\": \"$time\"}, \"m\": {\"$month\": "
                               "\"$time\"}, \"d\": {\"$dayOfMonth\": \"$time\"}}}}, {\"$group\": "
                               "{\"_id\": {\"p\": \"$path\", \"y\": \"$date.y\", \"m\": "
                               "\"$date.m\", \"d\": \"$date.d\"}, \"hits\": {\"$sum\": 1}}}, "
                               "{\"$sort\": {\"_id.d\": 1}}], \"cursor\": {}}");
        cr_assert_eq(ptt_i64(r, "cursor.firstBatch.0._id.y"), 2000);
        cr_assert_eq(ptt_i64(r, "cursor.firstBatch.0._id.m"), 10);
        cr_assert_eq(ptt_i64(r, "cursor.firstBatch.0._id.d"), 10);
        bson_destroy(r);
    }
}

Test(ap_logs, growth_ttl_capped_and_rotation)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        md_error err;
        cr_assert_eq(ap_logs_ttl_index(t.db, 3600, &err), 0, "[%s] %s", t.engine, err.message);
        bson_t *r = PTT_OK(&t, "{\"listIndexes\": \"events\"}");
        cr_assert_eq(ptt_i64(r, "cursor.firstBatch.1.expireAfterSeconds"), 3600);
        cr_assert_str_eq(ptt_str(r, "cursor.firstBatch.1.name"), "time_1");
        bson_destroy(r);
        cr_assert_eq(ap_logs_create_capped(t.db, "events.capped", 4096, &err), 0);
        r = PTT_OK(&t, "{\"collStats\": \"events.capped\"}");
        cr_assert(ptt_has(r, "capped"));
        bson_iter_t it;
        cr_assert(ptt_find(r, "capped", &it) && bson_iter_as_bool(&it), "[%s]", t.engine);
        bson_destroy(r);
        /* Rotation drops the oldest generation kept. */
        bson_destroy(PTT_OK(&t, "{\"insert\": \"events.0\", \"documents\": [{\"a\": 1}]}"));
        bson_destroy(PTT_OK(&t, "{\"insert\": \"events.1\", \"documents\": [{\"a\": 1}]}"));
        cr_assert_eq(ap_logs_rotate(t.db, 1, 2, &err), 0);
        cr_assert_eq(ptt_count(&t, "events.0", "{}"), 1, "kept: two generations");
        cr_assert_eq(ap_logs_rotate(t.db, 2, 2, &err), 0);
        cr_assert_eq(ptt_count(&t, "events.0", "{}"), 0);
        cr_assert_eq(ptt_count(&t, "events.1", "{}"), 1);
    }
}

Test(ap_logs, usecase_claims)
{
    ap_args a = {.quick = true, .seed = 1};
    static const char *const engines[] = {"mmapv1", "btree"};
    for (int e = 0; e < 2; e++) {
        ap_result r;
        md_error err;
        cr_assert_eq(ap_run_usecase(&ap_usecase_logs, engines[e], &a, &r, &err), 0);
        cr_assert_eq(r.rc, 0, "[%s] %s", engines[e], r.error);
        cr_assert_eq(ap_get(&r, "time_1_host_1_keys_examined"), 1296, "[%s]", engines[e]);
        cr_assert_eq(ap_get(&r, "time_1_host_1_n"), 11);
        cr_assert_eq(ap_get(&r, "host_1_time_1_keys_examined"), 11);
        cr_assert_eq(ap_get(&r, "planner_picks_host_1_time_1"), 1);
        cr_assert_eq(ap_get(&r, "aggregate_hits_match_events"), 1);
        /* One j: true batch of 100 waits once: far above single j: true inserts. */
        cr_assert_gt(ap_get(&r, "inserts_per_s_bulk100_j"), 5 * ap_get(&r, "inserts_per_s_j"),
                     "[%s]", engines[e]);
        cr_assert_geq(ap_get(&r, "storage_after_remove"), ap_get(&r, "storage_before_remove"));
        cr_assert_eq(ap_get(&r, "capped_count_after_fill_1"),
                     ap_get(&r, "capped_count_after_fill_3"), "[%s]", engines[e]);
        cr_assert_eq(ap_get(&r, "capped_storage_after_fill_1"),
                     ap_get(&r, "capped_storage_after_fill_3"));
        cr_assert_eq(ap_get(&r, "ttl_removed"), 5000);
    }
}
