/*
 * test_ap_inventory.c -- Ch.5 Inventory Management (patterns/
 * ap_inventory.c) on every engine: add, update_quantity and checkout with
 * their compensations (updatedExisting false -> CartInactive or
 * InadequateInventory), expiry and the inventory cleanup giving stock back
 * once only, every failure point of every operation followed by the
 * cleanup jobs, clients racing the jobs with failures injected (stock
 * conserved), and the use case's claims.
 */
#include "ap.h"
#include "pt_test_util.h"

static int64_t qty(ptt_db *t, const char *sku)
{
    char f[96];
    snprintf(f, sizeof f, "{\"_id\": \"%s\"}", sku);
    bson_t *r = PTT_OK(t, "{\"find\": \"product\", \"filter\": %s}", f);
    int64_t v = ptt_i64(r, "cursor.firstBatch.0.qty");
    bson_destroy(r);
    return v;
}

static void products(ptt_db *t, int n, int32_t each, int32_t *initial)
{
    md_error err;
    cr_assert_eq(ap_inv_create_indexes(t->db, &err), 0);
    for (int i = 0; i < n; i++) {
        char sku[16];
        snprintf(sku, sizeof sku, "sku%d", i);
        initial[i] = each;
        cr_assert_eq(ap_inv_add_product(t->db, sku, each, &err), 0);
    }
}

static void settle(ptt_db *t, int n, const int32_t *initial)
{
    md_error err;
    cr_assert_eq(ap_inv_cleanup(t->db, -1000, NULL, &err), 0, "%s", err.message);
    cr_assert_eq(ap_inv_expire_carts(t->db, -1000, NULL, &err), 0, "%s", err.message);
    cr_assert_eq(ap_inv_cleanup(t->db, -1000, NULL, &err), 0, "%s", err.message);
    cr_assert_eq(ap_inv_check(t->db, n, initial, true, &err), 0, "[%s] %s", t->engine,
                 err.message);
}

Test(ap_inventory, add_update_checkout)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        md_error err;
        int32_t init[2];
        products(&t, 2, 16, init);
        cr_assert_eq(ap_inv_new_cart(t.db, 42, &err), 0);
        cr_assert_eq(ap_inv_add_item(t.db, 42, "sku0", 1, NULL, &err), 0);
        cr_assert_eq(ap_inv_add_item(t.db, 42, "sku1", 4, NULL, &err), 0);
        cr_assert_eq(qty(&t, "sku0"), 15);
        cr_assert_eq(ptt_count(&t, "product", "{\"carted.cart_id\": 42}"), 2);
        cr_assert_eq(ap_inv_update_quantity(t.db, 42, "sku1", 4, 6, NULL, &err), 0);
        cr_assert_eq(qty(&t, "sku1"), 10);
        cr_assert_eq(ptt_count(&t, "product", "{\"carted\": {\"$elemMatch\": {\"cart_id\": 42, "
                                              "\"qty\": 6}}}"), 1);
        cr_assert_eq(ptt_count(&t, "cart", "{\"items\": {\"$elemMatch\": {\"sku\": \"sku1\", "
                                           "\"qty\": 6}}}"), 1);
        /* Too much: InadequateInventory, the cart's quantity put back. */
        cr_assert_eq(ap_inv_update_quantity(t.db, 42, "sku1", 6, 20, NULL, &err), MD_NOTFOUND);
        cr_assert(strstr(err.message, "InadequateInventory"));
        cr_assert_eq(ptt_count(&t, "cart", "{\"items.qty\": 6}"), 1);
        /* A failed payment unlocks the cart again. */
        ap_tx_opts fail = {.payment_fails = true};
        cr_assert_eq(ap_inv_checkout(t.db, 42, &fail, &err), MD_NOTFOUND);
        cr_assert_eq(ptt_count(&t, "cart", "{\"status\": \"active\"}"), 1);
        cr_assert_eq(ap_inv_checkout(t.db, 42, NULL, &err), 0, "[%s] %s", t.engine, err.message);
        cr_assert_eq(ptt_count(&t, "cart", "{\"status\": \"complete\"}"), 1);
        cr_assert_eq(ptt_count(&t, "product", "{\"carted.cart_id\": 42}"), 0);
        cr_assert_eq(ap_inv_add_item(t.db, 42, "sku0", 1, NULL, &err), MD_NOTFOUND);
        cr_assert(strstr(err.message, "CartInactive"));
        cr_assert_eq(ap_inv_checkout(t.db, 42, NULL, &err), MD_NOTFOUND);
        settle(&t, 2, init);
        cr_assert_eq(qty(&t, "sku0"), 15);
        cr_assert_eq(qty(&t, "sku1"), 10);
    }
}

Test(ap_inventory, inadequate_inventory_pulls_the_line)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        md_error err;
        int32_t init[1];
        products(&t, 1, 3, init);
        cr_assert_eq(ap_inv_new_cart(t.db, 1, &err), 0);
        cr_assert_eq(ap_inv_add_item(t.db, 1, "sku0", 4, NULL, &err), MD_NOTFOUND);
        cr_assert(strstr(err.message, "InadequateInventory"));
        cr_assert_eq(ptt_count(&t, "cart", "{\"items.sku\": \"sku0\"}"), 0);
        cr_assert_eq(qty(&t, "sku0"), 3);
        settle(&t, 1, init);
    }
}

Test(ap_inventory, expiry_and_cleanup_give_back_once)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        md_error err;
        int32_t init[2];
        int n;
        products(&t, 2, 10, init);
        cr_assert_eq(ap_inv_new_cart(t.db, 7, &err), 0);
        cr_assert_eq(ap_inv_add_item(t.db, 7, "sku0", 3, NULL, &err), 0);
        cr_assert_eq(ap_inv_add_item(t.db, 7, "sku1", 2, NULL, &err), 0);
        cr_assert_eq(ap_inv_expire_carts(t.db, 60000, &n, &err), 0);
        cr_assert_eq(n, 0, "not idle long enough");
        cr_assert_eq(ap_inv_expire_carts(t.db, -1000, &n, &err), 0);
        cr_assert_eq(n, 1);
        cr_assert_eq(qty(&t, "sku0"), 10);
        cr_assert_eq(qty(&t, "sku1"), 10);
        cr_assert_eq(ptt_count(&t, "cart", "{\"status\": \"expired\"}"), 1);
        cr_assert_eq(ap_inv_expire_carts(t.db, -1000, &n, &err), 0);
        cr_assert_eq(ap_inv_cleanup(t.db, -1000, &n, &err), 0);
        cr_assert_eq(n, 0);
        cr_assert_eq(qty(&t, "sku0"), 10, "[%s] idempotent", t.engine);
        /* Trapped stock: the product was taken, the cart line never written
         * (a client that died), the cart expired; cleanup gives it back. */
        bson_destroy(PTT_OK(&t, "{\"update\": \"product\", \"updates\": [{\"q\": {\"_id\": "
                                "\"sku0\"}, \"u\": {\"$inc\": {\"qty\": -2}, \"$push\": {"
                                "\"carted\": {\"qty\": 2, \"cart_id\": 7, \"timestamp\": "
                                "{\"$date\": 0}}}}}]}"));
        cr_assert_eq(ap_inv_cleanup(t.db, 1000, &n, &err), 0);
        cr_assert_eq(n, 1);
        cr_assert_eq(qty(&t, "sku0"), 10);
        settle(&t, 2, init);
    }
}

Test(ap_inventory, every_failure_point_is_recovered)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        md_error err;
        int32_t init[2];
        products(&t, 2, 20, init);
        int64_t cart = 100;
        for (int k = 1; k <= 6; k++) {
            ap_tx_opts o = {.crash_after = k};
            /* add (2 writes, 3 when refused), update (2-3), checkout (3+) */
            cr_assert_eq(ap_inv_new_cart(t.db, ++cart, &err), 0);
            ap_inv_add_item(t.db, cart, "sku0", 2, &o, &err);
            cr_assert_eq(ap_inv_new_cart(t.db, ++cart, &err), 0);
            cr_assert_eq(ap_inv_add_item(t.db, cart, "sku0", 1, NULL, &err), 0);
            ap_inv_update_quantity(t.db, cart, "sku0", 1, 3, &o, &err);
            cr_assert_eq(ap_inv_new_cart(t.db, ++cart, &err), 0);
            cr_assert_eq(ap_inv_add_item(t.db, cart, "sku1", 1, NULL, &err), 0);
            ap_inv_add_item(t.db, cart, "sku0", 50, &o, &err); /* refused: 3 writes */
            ap_inv_checkout(t.db, cart, &o, &err);
            settle(&t, 2, init);
        }
    }
}

Test(ap_inventory, concurrent_clients_with_failures_conserve_stock)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        md_error err;
        int32_t init[4];
        products(&t, 4, 30, init);
        ap_tx_stress st = {.threads = 6, .ops = 150, .crash_pct = 15, .cleanup_every = 8,
                           .nproducts = 4, .timeout_ms = 10, .seed = 9};
        cr_assert_eq(ap_tx_stress_inventory(t.db, &st, &err), 0, "[%s] %s", t.engine,
                     err.message);
        cr_assert_gt(st.crashed, 0);
        cr_assert_gt(st.checkouts, 0);
        settle(&t, 4, init);
    }
}

Test(ap_inventory, usecase_claims)
{
    ap_args a = {.quick = true, .seed = 2};
    static const char *const engines[] = {"mmapv1", "btree"};
    for (int e = 0; e < 2; e++) {
        ap_result r;
        md_error err;
        char m[512];
        cr_assert_eq(ap_run_usecase(&ap_usecase_inventory, engines[e], &a, &r, &err), 0);
        cr_assert_eq(r.rc, 0, "[%s] %s", engines[e], r.error);
        for (int i = 0; i < ap_usecase_inventory.nclaims; i++)
            cr_assert_eq(ap_claim_verdict(&ap_usecase_inventory, i, &r, m, sizeof m), AP_HOLDS,
                         "[%s] claim %d: %s", engines[e], i + 1, m);
    }
}
