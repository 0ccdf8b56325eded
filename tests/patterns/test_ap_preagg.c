/*
 * test_ap_preagg.c -- Ch.4 Pre-Aggregated Reports (patterns/ap_preagg.c)
 * on every engine: log_hit's upserts (updatedExisting false, then true),
 * the documents' shape and _ids, preallocation's zeros (harmless on an
 * existing document), the chart queries with their index, and the use
 * case's measured claims (no move once preallocated).
 */
#include "ap.h"
#include "pt_test_util.h"

#define DAY 86400000LL
#define OCT10 1286668800000LL /* 2010-10-10T00:00:00Z */

Test(ap_preagg, log_hit_upserts_daily_and_monthly)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        md_error err;
        bool existed = true;
        cr_assert_eq(ap_preagg_create_indexes(t.db, &err), 0);
        int64_t t1 = OCT10 + 13 * 3600000LL + 55 * 60000LL; /* 13:55 */
        cr_assert_eq(ap_preagg_log_hit(t.db, t1, "site-1", "/apache_pb.gif", &existed, &err), 0,
                     "[%s] %s", t.engine, err.message);
        cr_assert_not(existed, "[%s] the first hit inserts", t.engine);
        cr_assert_eq(ap_preagg_log_hit(t.db, t1 + 1000, "site-1", "/apache_pb.gif", &existed,
                                       &err), 0);
        cr_assert(existed);
        bson_t *r = PTT_OK(&t, "{\"find\": \"stats.daily\"}");
        cr_assert_str_eq(ptt_str(r, "cursor.firstBatch.0._id"), "20101010/site-1/apache_pb.gif");
        cr_assert_str_eq(ptt_str(r, "cursor.firstBatch.0.metadata.site"), "site-1");
        cr_assert_eq(ptt_i64(r, "cursor.firstBatch.0.hourly.13"), 2);
        cr_assert_eq(ptt_i64(r, "cursor.firstBatch.0.minute.13.55"), 2);
        bson_destroy(r);
        r = PTT_OK(&t, "{\"find\": \"stats.monthly\"}");
        cr_assert_str_eq(ptt_str(r, "cursor.firstBatch.0._id"), "201010/site-1/apache_pb.gif");
        cr_assert_eq(ptt_i64(r, "cursor.firstBatch.0.daily.10"), 2);
        bson_destroy(r);
        int64_t h;
        cr_assert_eq(ap_preagg_hourly(t.db, t1, "site-1", "/apache_pb.gif", 13, &h, &err), 0);
        cr_assert_eq(h, 2);
        cr_assert_eq(ap_preagg_monthly_day(t.db, t1, "site-1", "/apache_pb.gif", &h, &err), 0);
        cr_assert_eq(h, 2);
    }
}

Test(ap_preagg, preallocation_fills_zeros_and_keeps_counts)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        md_error err;
        cr_assert_eq(ap_preagg_log_hit(t.db, OCT10 + 60000, "s", "/p", NULL, &err), 0);
        cr_assert_eq(ap_preagg_preallocate(t.db, OCT10, "s", "/p", &err), 0, "[%s] %s",
                     t.engine, err.message);
        bson_t *r = PTT_OK(&t, "{\"find\": \"stats.daily\"}");
        cr_assert_eq(ptt_i64(r, "cursor.firstBatch.0.minute.0.1"), 1, "[%s] kept", t.engine);
        cr_assert(ptt_has(r, "cursor.firstBatch.0.minute.23.59"));
        cr_assert(ptt_has(r, "cursor.firstBatch.0.hourly.23"));
        bson_destroy(r);
        r = PTT_OK(&t, "{\"find\": \"stats.monthly\"}");
        cr_assert(ptt_has(r, "cursor.firstBatch.0.daily.31"));
        cr_assert_eq(ptt_i64(r, "cursor.firstBatch.0.daily.10"), 1);
        bson_destroy(r);
        /* Tomorrow's document, then its hits: the size never changes. */
        cr_assert_eq(ap_preagg_preallocate(t.db, OCT10 + DAY, "s", "/p", &err), 0);
        bson_t *q = BCON_NEW("_id", BCON_UTF8("20101011/s/p"));
        int64_t before = ap_doc_size(t.db, "stats.daily", q);
        for (int m = 0; m < 1440; m += 37)
            cr_assert_eq(ap_preagg_log_hit(t.db, OCT10 + DAY + m * 60000LL, "s", "/p", NULL,
                                           &err), 0);
        cr_assert_eq(ap_doc_size(t.db, "stats.daily", q), before, "[%s]", t.engine);
        bson_destroy(q);
        int64_t days, hits;
        cr_assert_eq(ap_preagg_create_indexes(t.db, &err), 0);
        cr_assert_eq(ap_preagg_range(t.db, OCT10, OCT10 + DAY, "s", "/p", &days, &hits, &err), 0);
        cr_assert_eq(days, 2);
        cr_assert_eq(hits, 1 + 39);
        ap_plan x;
        q = BCON_NEW("metadata.date", "{", "$gte", BCON_DATE_TIME(OCT10), "$lte",
                     BCON_DATE_TIME(OCT10 + DAY), "}", "metadata.site", BCON_UTF8("s"),
                     "metadata.page", BCON_UTF8("/p"));
        cr_assert_eq(ap_explain_find(t.db, "stats.daily", q, NULL, NULL, &x, &err), 0);
        cr_assert_str_eq(x.index, "metadata.site_1_metadata.page_1_metadata.date_1");
        bson_destroy(q);
    }
}

Test(ap_preagg, probabilistic_preallocation_of_tomorrow)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        md_error err;
        uint64_t rng = 42;
        bool pre;
        /* Probability 1: tomorrow's document exists, all zeros, before its first hit. */
        cr_assert_eq(ap_preagg_log_hit_prob(t.db, OCT10 + 5, "s", "/p", 1.0, &rng, &pre, &err),
                     0, "[%s] %s", t.engine, err.message);
        cr_assert(pre);
        cr_assert_eq(ptt_count(&t, "stats.daily", "{\"_id\": \"20101011/s/p\", "
                                                  "\"minute.23.59\": 0}"), 1);
        /* Probability 0: never. */
        cr_assert_eq(ap_preagg_log_hit_prob(t.db, OCT10 + DAY + 5, "s", "/p", 0.0, &rng, &pre,
                                            &err), 0);
        cr_assert_not(pre);
        cr_assert_eq(ptt_count(&t, "stats.daily", "{\"_id\": \"20101012/s/p\"}"), 0);
        cr_assert_eq(ptt_count(&t, "stats.daily", "{\"_id\": \"20101011/s/p\", "
                                                  "\"hourly.0\": 1}"), 1);
    }
}

Test(ap_preagg, usecase_claims)
{
    ap_args a = {.quick = true, .seed = 1};
    ap_result r;
    md_error err;
    cr_assert_eq(ap_run_usecase(&ap_usecase_preagg, "mmapv1", &a, &r, &err), 0);
    cr_assert_eq(r.rc, 0, "%s", r.error);
    cr_assert_gt(ap_get(&r, "growing_moves"), 0);
    cr_assert_eq(ap_get(&r, "prealloc_moves"), 0);
    cr_assert_eq(ap_get(&r, "prealloc_doc_bytes_first"), ap_get(&r, "prealloc_doc_bytes_last"));
    cr_assert_eq(ap_get(&r, "range_hits_ok"), 1);
    cr_assert_eq(ap_get(&r, "month_prealloc_moves"), 0);
    cr_assert_eq(ap_run_usecase(&ap_usecase_preagg, "btree", &a, &r, &err), 0);
    cr_assert_eq(r.rc, 0, "%s", r.error);
    /* btree rewrites: the preallocated document costs more bytes per hit. */
    cr_assert_gt(ap_get(&r, "prealloc_daily_bytes_per_hit"),
                 ap_get(&r, "growing_daily_bytes_per_hit"));
}
