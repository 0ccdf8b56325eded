/*
 * test_ap_hieragg.c -- Ch.4 Hierarchical Aggregation (patterns/ap_hieragg.c)
 * on every engine: the hourly level's keys, totals, counts and means, the
 * cascade reaching the yearly level one run per level, events -> hourly
 * staying exact when run again with new events, and the use case's
 * measured claims.
 */
#include <unistd.h>

#include "ap.h"
#include "pt_test_util.h"

static void run(ptt_db *t, int64_t *last)
{
    md_error err;
    usleep(2000);
    int64_t cutoff = pt_now_ms();
    cr_assert_eq(ap_hieragg_run(t->db, *last, cutoff, &err), 0, "[%s] %s", t->engine,
                 err.message);
    *last = cutoff;
}

Test(ap_hieragg, cascade_rolls_events_up_level_by_level)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        md_error err;
        int64_t total, count, docs, last = 0;
        int64_t hour = (pt_now_ms() / 3600000 - 30) * 3600000; /* a whole hour, 30 h ago */
        cr_assert_eq(ap_hieragg_create_indexes(t.db, &err), 0);
        cr_assert_eq(ap_hieragg_log(t.db, "rick", hour + 1000, 95, &err), 0);
        cr_assert_eq(ap_hieragg_log(t.db, "rick", hour + 2000, 5, &err), 0);
        cr_assert_eq(ap_hieragg_log(t.db, "rick", hour + 3600000 + 10, 40, &err), 0);
        cr_assert_eq(ap_hieragg_log(t.db, "stuart", hour + 5, 10, &err), 0);
        run(&t, &last);
        cr_assert_eq(ap_hieragg_totals(t.db, "stats.hourly", "rick", &total, &count, &docs,
                                       &err), 0);
        cr_assert_eq(docs, 2, "[%s] rick's two hours", t.engine);
        cr_assert_eq(total, 140);
        cr_assert_eq(count, 3);
        bson_t *r = PTT_OK(&t, "{\"find\": \"stats.hourly\", \"filter\": {\"_id.u\": \"rick\"}, "
                               "\"sort\": {\"_id.d\": 1}}");
        bson_iter_t it;
        cr_assert(ptt_find(r, "cursor.firstBatch.0.value.mean", &it));
        cr_assert_float_eq(bson_iter_as_double(&it), 50.0, 1e-9);
        cr_assert(ptt_find(r, "cursor.firstBatch.0._id.d", &it) && BSON_ITER_HOLDS_DATE_TIME(&it));
        cr_assert_eq(bson_iter_date_time(&it), hour, "[%s] the hour's key", t.engine);
        cr_assert(ptt_find(r, "cursor.firstBatch.0.value.ts", &it) &&
                  BSON_ITER_HOLDS_DATE_TIME(&it));
        bson_destroy(r);
        /* One level per run: daily, then weekly and monthly, then yearly. */
        cr_assert_eq(ap_hieragg_totals(t.db, "stats.daily", NULL, &total, &count, &docs, &err), 0);
        cr_assert_eq(docs, 0);
        run(&t, &last);
        cr_assert_eq(ap_hieragg_totals(t.db, "stats.daily", NULL, &total, &count, &docs, &err), 0);
        cr_assert_eq(total, 150);
        cr_assert_eq(count, 4);
        run(&t, &last);
        run(&t, &last);
        static const char *const lv[] = {"stats.weekly", "stats.monthly", "stats.yearly"};
        for (int i = 0; i < 3; i++) {
            cr_assert_eq(ap_hieragg_totals(t.db, lv[i], NULL, &total, &count, &docs, &err), 0);
            cr_assert_eq(total, 150, "[%s] %s", t.engine, lv[i]);
            cr_assert_eq(count, 4);
        }
        cr_assert_eq(ap_hieragg_totals(t.db, "stats.yearly", "rick", &total, &count, &docs,
                                       &err), 0);
        cr_assert_eq(docs, 1);
        cr_assert_eq(total, 140);
        /* New events: out {reduce} adds them to the hours already there. */
        cr_assert_eq(ap_hieragg_log(t.db, "rick", pt_now_ms(), 7, &err), 0);
        run(&t, &last);
        cr_assert_eq(ap_hieragg_totals(t.db, "stats.hourly", NULL, &total, &count, &docs, &err), 0);
        cr_assert_eq(total, 157);
        cr_assert_eq(count, 5);
    }
}

Test(ap_hieragg, sequence_reserves_blocks_of_50)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        md_error err;
        int64_t a, b;
        cr_assert_eq(ap_hieragg_reserve_ids(t.db, &a, &b, &err), 0, "[%s] %s", t.engine,
                     err.message);
        cr_assert_eq(a, 0);
        cr_assert_eq(b, 50);
        cr_assert_eq(ap_hieragg_reserve_ids(t.db, &a, &b, &err), 0);
        cr_assert_eq(a, 50);
        cr_assert_eq(b, 100);
    }
}

Test(ap_hieragg, usecase_claims)
{
    ap_args a = {.quick = true, .seed = 1};
    ap_result r;
    md_error err;
    cr_assert_eq(ap_run_usecase(&ap_usecase_hieragg, "btree", &a, &r, &err), 0);
    cr_assert_eq(r.rc, 0, "%s", r.error);
    cr_assert_eq(ap_get(&r, "backlog_yearly_total_ratio"), 1);
    cr_assert_eq(ap_get(&r, "backlog_daily_total_ratio"), 1);
    cr_assert_eq(ap_get(&r, "incremental_hourly_total_ratio"), 1);
    cr_assert_eq(ap_get(&r, "daily_value_ts_index_used"), 1);
}
