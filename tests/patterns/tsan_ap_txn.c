/*
 * tsan_ap_txn.c -- "MongoDB Applied Design Patterns"' compensation
 * protocols under ThreadSanitizer (`make test-tsan`; Criterion cannot
 * start under TSan; test_ap_txn.c and test_ap_inventory.c run the same
 * workloads in the suite): ch.3's two-phase transfer (patterns/ap_txn.c)
 * and ch.5's carts and inventory (patterns/ap_inventory.c), many clients
 * with 15-20% of their operations stopped part-way and the periodic jobs
 * racing them with short timeouts; then the jobs run to the end and the
 * invariants are checked (money conserved and nothing pending; stock +
 * carted + sold equal to the start, nothing carted).  On mmapv1
 * (collection locks, journal on) and btree (document locks, log on).
 */
#include <stdio.h>
#include <stdlib.h>

#include "ap.h"
#include "pt_tsan_util.h"

static int accounts(md_db *db, const char *engine)
{
    md_error err;
    int n, rc = 0;
    for (int i = 0; i < 6 && rc == 0; i++)
        rc = ap_tx_create_account(db, i, 500, &err);
    ap_tx_stress st = {.threads = 6, .ops = 150, .crash_pct = 20, .cleanup_every = 7,
                       .naccounts = 6, .timeout_ms = 5, .seed = 11, .total = 3000};
    if (rc == 0)
        rc = ap_tx_stress_accounts(db, &st, &err);
    do
        rc = rc ? rc : ap_tx_cleanup(db, -1000, &n, &err);
    while (rc == 0 && n > 0);
    if (rc == 0)
        rc = ap_tx_check(db, 3000, true, &err);
    if (rc == 0 && (st.crashed == 0 || st.ok == 0)) {
        fprintf(stderr, "%s accounts: the workload did not exercise the protocol\n", engine);
        return 1;
    }
    if (rc) {
        fprintf(stderr, "%s accounts: %s\n", engine, err.message);
        return 1;
    }
    printf("%s accounts: %lld transfers, %lld refused, %lld stopped, %lld cleanups; money "
           "conserved\n",
           engine, (long long)st.ok, (long long)st.refused, (long long)st.crashed,
           (long long)st.cleanups);
    return 0;
}

static int inventory(md_db *db, const char *engine)
{
    md_error err;
    int32_t initial[4] = {30, 30, 30, 30};
    int rc = ap_inv_create_indexes(db, &err);
    for (int i = 0; i < 4 && rc == 0; i++) {
        char sku[16];
        snprintf(sku, sizeof sku, "sku%d", i);
        rc = ap_inv_add_product(db, sku, initial[i], &err);
    }
    ap_tx_stress st = {.threads = 6, .ops = 150, .crash_pct = 15, .cleanup_every = 8,
                       .nproducts = 4, .timeout_ms = 10, .seed = 13};
    if (rc == 0)
        rc = ap_tx_stress_inventory(db, &st, &err);
    if (rc == 0)
        rc = ap_inv_cleanup(db, -1000, NULL, &err);
    if (rc == 0)
        rc = ap_inv_expire_carts(db, -1000, NULL, &err);
    if (rc == 0)
        rc = ap_inv_cleanup(db, -1000, NULL, &err);
    if (rc == 0)
        rc = ap_inv_check(db, 4, initial, true, &err);
    if (rc) {
        fprintf(stderr, "%s inventory: %s\n", engine, err.message);
        return 1;
    }
    if (st.crashed == 0 || st.checkouts == 0) {
        fprintf(stderr, "%s inventory: the workload did not exercise the protocol\n", engine);
        return 1;
    }
    printf("%s inventory: %lld ops, %lld refused, %lld stopped, %lld checkouts; stock "
           "conserved\n",
           engine, (long long)st.ok, (long long)st.refused, (long long)st.crashed,
           (long long)st.checkouts);
    return 0;
}

static int run(const char *engine, int (*fn)(md_db *, const char *))
{
    char dir[64] = "/tmp/md_tsan_ap_XXXXXX";
    md_db *db;
    if (!(db = ptsan_open(engine, dir)))
        return 1;
    int bad = fn(db, engine);
    ptsan_close(db, dir);
    return bad;
}

int main(void)
{
    int bad = 0;
    static const char *const engines[] = {"mmapv1", "btree"};
    for (int e = 0; e < 2; e++) {
        bad += run(engines[e], accounts);
        bad += run(engines[e], inventory);
    }
    printf("tsan_ap_txn: %s\n", bad ? "FAILED" : "ok");
    return bad != 0;
}
