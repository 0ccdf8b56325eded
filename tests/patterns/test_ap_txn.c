/*
 * test_ap_txn.c -- Ch.3 of "MongoDB Applied Design Patterns"
 * (patterns/ap_txn.c) on every engine: increase_qty's two updates, the
 * two-phase transfer and its refusal, every failure point followed by the
 * cleanup, a transfer rolled back under a slow client, many clients with
 * failures injected (money conserved once the cleanup has run), and the
 * use case's claims.
 */
#include "ap.h"
#include "pt_test_util.h"

static void accounts(ptt_db *t, int n, int64_t balance)
{
    md_error err;
    for (int i = 0; i < n; i++)
        cr_assert_eq(ap_tx_create_account(t->db, i, balance, &err), 0, "[%s] %s", t->engine,
                     err.message);
}

static int64_t balance(ptt_db *t, int64_t id)
{
    char f[64];
    snprintf(f, sizeof f, "{\"_id\": %lld}", (long long)id);
    bson_t *r = PTT_OK(t, "{\"find\": \"accounts\", \"filter\": %s}", f);
    int64_t v = ptt_i64(r, "cursor.firstBatch.0.balance");
    bson_destroy(r);
    return v;
}

static void settle(ptt_db *t, int64_t total)
{
    md_error err;
    int n;
    do
        cr_assert_eq(ap_tx_cleanup(t->db, -1000, &n, &err), 0, "[%s] %s", t->engine,
                     err.message);
    while (n > 0);
    cr_assert_eq(ap_tx_check(t->db, total, true, &err), 0, "[%s] %s", t->engine, err.message);
}

Test(ap_txn, increase_qty_updates_the_line_or_pushes_it)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        md_error err;
        bson_t *r = PTT_OK(&t, "{\"insert\": \"orders\", \"documents\": [{\"_id\": \"11223\", "
                               "\"total\": 500.94, \"items\": [{\"sku\": \"123\", \"price\": "
                               "55.11, \"qty\": 2}]}]}");
        bson_destroy(r);
        cr_assert_eq(ap_order_increase_qty(t.db, "11223", "123", 55.11, 2, &err), 0);
        cr_assert_eq(ap_order_increase_qty(t.db, "11223", "456", 10.0, 3, &err), 0);
        r = PTT_OK(&t, "{\"find\": \"orders\"}");
        cr_assert_eq(ptt_i64(r, "cursor.firstBatch.0.items.0.qty"), 4, "[%s]", t.engine);
        cr_assert_str_eq(ptt_str(r, "cursor.firstBatch.0.items.1.sku"), "456");
        cr_assert_eq(ptt_i64(r, "cursor.firstBatch.0.items.1.qty"), 3);
        bson_iter_t it;
        cr_assert(ptt_find(r, "cursor.firstBatch.0.total", &it));
        cr_assert_float_eq(bson_iter_double(&it), 500.94 + 110.22 + 30.0, 1e-9);
        bson_destroy(r);
        cr_assert_eq(ap_order_increase_qty(t.db, "nope", "1", 1.0, 1, &err), MD_NOTFOUND);
    }
}

Test(ap_txn, transfer_moves_money_and_leaves_nothing_pending)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        md_error err;
        accounts(&t, 2, 100);
        cr_assert_eq(ap_tx_transfer(t.db, 55, 0, 1, 60000, NULL, &err), 0, "[%s] %s", t.engine,
                     err.message);
        cr_assert_eq(balance(&t, 0), 45);
        cr_assert_eq(balance(&t, 1), 155);
        cr_assert_eq(ptt_count(&t, "transactions", "{}"), 0);
        cr_assert_eq(ptt_count(&t, "accounts", "{\"txns\": {\"$size\": 0}}"), 2);
        /* InsufficientFundsError: nothing changes, the transaction is removed. */
        cr_assert_eq(ap_tx_transfer(t.db, 46, 0, 1, 60000, NULL, &err), MD_NOTFOUND);
        cr_assert(strstr(err.message, "InsufficientFunds"));
        cr_assert_eq(balance(&t, 0), 45);
        cr_assert_eq(ptt_count(&t, "transactions", "{}"), 0);
        settle(&t, 200);
    }
}

Test(ap_txn, every_failure_point_is_recovered_by_the_cleanup)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        md_error err;
        accounts(&t, 2, 100);
        for (int k = 1; k <= 7; k++) {
            ap_tx_opts o = {.crash_after = k};
            int rc = ap_tx_transfer(t.db, 10, 0, 1, 60000, &o, &err);
            cr_assert(rc == AP_CRASHED || (k == 7 && rc == 0), "[%s] k=%d rc=%d", t.engine, k,
                      rc);
            cr_assert_eq(ap_tx_check(t.db, 200, false, &err), 0, "[%s] k=%d %s", t.engine, k,
                         err.message);
            settle(&t, 200);
        }
        /* Stopped after prepare (3 writes): the cleanup rolls it back; after
         * the commit (4): the cleanup retires it, the money stays moved. */
        int64_t b0 = balance(&t, 0);
        ap_tx_opts o3 = {.crash_after = 3}, o4 = {.crash_after = 4};
        cr_assert_eq(ap_tx_transfer(t.db, 10, 0, 1, 60000, &o3, &err), AP_CRASHED);
        settle(&t, 200);
        cr_assert_eq(balance(&t, 0), b0, "[%s] rolled back", t.engine);
        cr_assert_eq(ap_tx_transfer(t.db, 10, 0, 1, 60000, &o4, &err), AP_CRASHED);
        settle(&t, 200);
        cr_assert_eq(balance(&t, 0), b0 - 10, "[%s] committed", t.engine);
    }
}

Test(ap_txn, a_transaction_past_its_time_is_not_committed)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        md_error err;
        accounts(&t, 2, 100);
        /* max_txn_time already over: commit refuses (TransactionError) and
         * the cleanup rolls the prepared transfer back. */
        cr_assert_eq(ap_tx_transfer(t.db, 30, 0, 1, -1000, NULL, &err), MD_NOTFOUND);
        cr_assert(strstr(err.message, "TransactionError"), "%s", err.message);
        cr_assert_eq(ptt_count(&t, "transactions", "{\"state\": \"new\"}"), 1);
        settle(&t, 200);
        cr_assert_eq(balance(&t, 0), 100);
        cr_assert_eq(balance(&t, 1), 100);
    }
}

Test(ap_txn, concurrent_clients_with_failures_conserve_money)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        md_error err;
        accounts(&t, 6, 500);
        ap_tx_stress st = {.threads = 6, .ops = 120, .crash_pct = 20, .cleanup_every = 7,
                           .naccounts = 6, .timeout_ms = 5, .seed = 3, .total = 3000};
        cr_assert_eq(ap_tx_stress_accounts(t.db, &st, &err), 0, "[%s] %s", t.engine,
                     err.message);
        cr_assert_gt(st.ok, 0);
        cr_assert_gt(st.crashed, 0);
        settle(&t, 3000);
    }
}

Test(ap_txn, usecase_claims)
{
    ap_args a = {.quick = true, .seed = 5};
    static const char *const engines[] = {"mmapv1", "btree"};
    for (int e = 0; e < 2; e++) {
        ap_result r;
        md_error err;
        cr_assert_eq(ap_run_usecase(&ap_usecase_txn, engines[e], &a, &r, &err), 0);
        cr_assert_eq(r.rc, 0, "[%s] %s", engines[e], r.error);
        cr_assert_eq(ap_get(&r, "stress_invariant_ok"), 1, "[%s]", engines[e]);
        cr_assert_eq(ap_get(&r, "order_total_consistent"), 1, "[%s]", engines[e]);
    }
}
