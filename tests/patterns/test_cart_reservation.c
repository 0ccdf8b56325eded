/*
 * test_cart_reservation.c -- 5.5 Shopping Cart with Product Reservation
 * (patterns/cart_reservation.c, cart_common.c) on every engine: each
 * operation's effect on carts, inventories and orders, the rollback
 * paths, the book's two indexes in the plans, the expiry job, every
 * failure point of every protocol followed by the cleanup job, many
 * clients racing the expiry job on a small stock, and the scenario (the
 * simulator's classes, patterns/cart_sim.c).
 * After each step the invariants (pt_cart_check) must hold.
 */
#include <time.h>

#define CART_RESERVES true
#include "test_cart_util.h"

/* ---- helpers --------------------------------------------------------------- */

static int add(ptt_db *t, const bson_oid_t *cart, int64_t p, int32_t q, int crash_after)
{
    pt_cart_item it = item(p, q);
    pt_cart_opts o = {crash_after};
    md_error err;
    return pt_cart_res_add(t->db, cart, &it, &o, &err);
}

/* ---- operations ------------------------------------------------------------ */

Test(cart_reservation, add_reserves_the_stock)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        int64_t initial[3];
        pt_cart_totals tot;
        bson_oid_t cart;
        seed(&t, 3, 5, initial);
        bson_oid_init(&cart, NULL);
        cr_assert_eq(add(&t, &cart, 1, 2, 0), 0, "[%s]", t.engine);
        bson_t *c = cart_doc(&t, &cart);
        cr_assert_not_null(c);
        cr_assert_str_eq(ptt_str(c, "state"), "active");
        cr_assert_eq(ptt_i64(c, "products.0._id"), 1);
        cr_assert_eq(ptt_i64(c, "products.0.quantity"), 2);
        cr_assert_str_eq(ptt_str(c, "products.0.name"), "Simsong Mobile 1");
        cr_assert_eq(ptt_i64(c, "products.0.price"), 1000);
        bson_iter_t it;
        cr_assert(ptt_find(c, "modifiedOn", &it) && BSON_ITER_HOLDS_DATE_TIME(&it));
        bson_destroy(c);
        bson_t *inv = inventory(&t, 1);
        cr_assert_eq(ptt_i64(inv, "quantity"), 3, "[%s]", t.engine);
        cr_assert_eq(count_array(inv, "reservations"), 1);
        cr_assert(ptt_find(inv, "reservations.0._id", &it) && BSON_ITER_HOLDS_OID(&it));
        cr_assert(bson_oid_equal(bson_iter_oid(&it), &cart));
        cr_assert_eq(ptt_i64(inv, "reservations.0.quantity"), 2);
        cr_assert(ptt_find(inv, "reservations.0.createdOn", &it) &&
                  BSON_ITER_HOLDS_DATE_TIME(&it));
        bson_destroy(inv);
        cr_assert_eq(stock_of(&t, 0), 5);
        must_hold(&t, 3, initial, &tot);
        cr_assert_eq(tot.active, 1);
        cr_assert_eq(tot.reserved, 2);
        cr_assert_eq(tot.available, 13);
    }
}

Test(cart_reservation, add_without_stock_takes_the_line_out_again)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        int64_t initial[2];
        bson_oid_t cart;
        char st[32];
        seed(&t, 2, 5, initial);
        bson_oid_init(&cart, NULL);
        cr_assert_eq(add(&t, &cart, 0, 3, 0), 0);
        cr_assert_eq(add(&t, &cart, 1, 6, 0), MD_NOTFOUND, "[%s]", t.engine);
        bson_t *c = cart_doc(&t, &cart);
        cr_assert_eq(count_array(c, "products"), 1, "[%s] the line of product 1 is rolled back",
                     t.engine);
        cr_assert_eq(ptt_i64(c, "products.0._id"), 0);
        bson_destroy(c);
        cr_assert_eq(stock_of(&t, 1), 5);
        cr_assert_str_eq(cart_state(&t, &cart, st), "active");
        must_hold(&t, 2, initial, NULL);
        /* Exactly the remaining stock can still be taken. */
        cr_assert_eq(add(&t, &cart, 1, 5, 0), 0);
        cr_assert_eq(stock_of(&t, 1), 0);
        must_hold(&t, 2, initial, NULL);
    }
}

Test(cart_reservation, add_of_a_product_already_in_the_cart_is_refused)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        int64_t initial[1];
        bson_oid_t cart;
        seed(&t, 1, 5, initial);
        bson_oid_init(&cart, NULL);
        cr_assert_eq(add(&t, &cart, 0, 1, 0), 0);
        cr_assert_eq(add(&t, &cart, 0, 1, 0), MD_EEXISTS, "[%s]", t.engine);
        cr_assert_eq(stock_of(&t, 0), 4);
        bson_t *c = cart_doc(&t, &cart);
        cr_assert_eq(count_array(c, "products"), 1);
        bson_destroy(c);
        must_hold(&t, 1, initial, NULL);
    }
}

Test(cart_reservation, update_quantity_moves_the_difference)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        int64_t initial[1];
        bson_oid_t cart;
        md_error err;
        seed(&t, 1, 5, initial);
        bson_oid_init(&cart, NULL);
        cr_assert_eq(add(&t, &cart, 0, 2, 0), 0);
        cr_assert_eq(pt_cart_res_update(t.db, &cart, 0, 4, NULL, &err), 0, "[%s] %s", t.engine,
                     err.message);
        cr_assert_eq(stock_of(&t, 0), 1);
        bson_t *inv = inventory(&t, 0);
        cr_assert_eq(ptt_i64(inv, "reservations.0.quantity"), 4);
        bson_destroy(inv);
        bson_t *c = cart_doc(&t, &cart);
        cr_assert_eq(ptt_i64(c, "products.0.quantity"), 4);
        bson_destroy(c);
        must_hold(&t, 1, initial, NULL);
        /* More than the stock: the cart goes back to 4 (Ex 6). */
        cr_assert_eq(pt_cart_res_update(t.db, &cart, 0, 9, NULL, &err), MD_NOTFOUND);
        c = cart_doc(&t, &cart);
        cr_assert_eq(ptt_i64(c, "products.0.quantity"), 4, "[%s]", t.engine);
        bson_destroy(c);
        cr_assert_eq(stock_of(&t, 0), 1);
        must_hold(&t, 1, initial, NULL);
        /* Less: the difference goes back to the stock. */
        cr_assert_eq(pt_cart_res_update(t.db, &cart, 0, 1, NULL, &err), 0);
        cr_assert_eq(stock_of(&t, 0), 4);
        must_hold(&t, 1, initial, NULL);
        cr_assert_eq(pt_cart_res_update(t.db, &cart, 7, 1, NULL, &err), MD_NOTFOUND);
        cr_assert_eq(pt_cart_res_update(t.db, &cart, 0, 0, NULL, &err), MD_EINVAL);
    }
}

Test(cart_reservation, remove_gives_the_stock_back)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        int64_t initial[2];
        bson_oid_t cart;
        md_error err;
        seed(&t, 2, 5, initial);
        bson_oid_init(&cart, NULL);
        cr_assert_eq(add(&t, &cart, 0, 2, 0), 0);
        cr_assert_eq(add(&t, &cart, 1, 3, 0), 0);
        cr_assert_eq(pt_cart_res_remove(t.db, &cart, 0, NULL, &err), 0, "[%s] %s", t.engine,
                     err.message);
        cr_assert_eq(stock_of(&t, 0), 5);
        bson_t *inv = inventory(&t, 0);
        cr_assert_eq(count_array(inv, "reservations"), 0);
        bson_destroy(inv);
        bson_t *c = cart_doc(&t, &cart);
        cr_assert_eq(count_array(c, "products"), 1);
        cr_assert_eq(ptt_i64(c, "products.0._id"), 1);
        bson_destroy(c);
        must_hold(&t, 2, initial, NULL);
        cr_assert_eq(pt_cart_res_remove(t.db, &cart, 0, NULL, &err), MD_NOTFOUND);
        cr_assert_eq(stock_of(&t, 1), 2);
    }
}

Test(cart_reservation, checkout_sells_the_reserved_stock)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        int64_t initial[2];
        bson_oid_t cart;
        md_error err;
        pt_cart_totals tot;
        char st[32], hex[25], f[96];
        seed(&t, 2, 5, initial);
        bson_oid_init(&cart, NULL);
        cr_assert_eq(add(&t, &cart, 0, 2, 0), 0);
        cr_assert_eq(add(&t, &cart, 1, 1, 0), 0);
        cr_assert_eq(pt_cart_res_checkout(t.db, &cart, NULL, &err), 0, "[%s] %s", t.engine,
                     err.message);
        cr_assert_str_eq(cart_state(&t, &cart, st), "completed");
        bson_oid_to_string(&cart, hex);
        snprintf(f, sizeof f, "{\"_id\": {\"$oid\": \"%s\"}}", hex);
        bson_t *o = get_doc(&t, "orders", f);
        cr_assert_not_null(o, "[%s] no order", t.engine);
        cr_assert_eq(count_array(o, "products"), 2);
        cr_assert_str_eq(ptt_str(o, "shipping.name"), "Joe Dow");
        cr_assert_str_eq(ptt_str(o, "payment.method"), "visa");
        bson_destroy(o);
        cr_assert_eq(stock_of(&t, 0), 3);
        cr_assert_eq(stock_of(&t, 1), 4);
        cr_assert_eq(ptt_count(&t, "inventories", "{\"reservations._id\": {\"$exists\": true}}"),
                     0);
        must_hold(&t, 2, initial, &tot);
        cr_assert_eq(tot.sold, 3);
        cr_assert_eq(tot.orders, 1);
        cr_assert_eq(tot.completed, 1);
        cr_assert_eq(tot.reserved, 0);
        /* Done carts take no more checkouts or products. */
        cr_assert_eq(pt_cart_res_checkout(t.db, &cart, NULL, &err), MD_NOTFOUND);
        cr_assert_eq(add(&t, &cart, 0, 1, 0), MD_NOTFOUND);
        cr_assert_eq(stock_of(&t, 0), 3);
        bson_oid_t empty;
        bson_oid_init(&empty, NULL);
        cr_assert_eq(pt_cart_res_checkout(t.db, &empty, NULL, &err), MD_NOTFOUND);
        must_hold(&t, 2, initial, NULL);
    }
}

Test(cart_reservation, expiry_returns_stale_carts_stock)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        int64_t initial[2], n = 0;
        bson_oid_t stale, fresh;
        md_error err;
        char st[32];
        seed(&t, 2, 5, initial);
        bson_oid_init(&stale, NULL);
        bson_oid_init(&fresh, NULL);
        cr_assert_eq(add(&t, &stale, 0, 2, 0), 0);
        cr_assert_eq(add(&t, &stale, 1, 1, 0), 0);
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
        int64_t cutoff = pt_now_ms() - 1;
        nanosleep(&ts, NULL);
        cr_assert_eq(add(&t, &fresh, 0, 1, 0), 0);
        cr_assert_eq(pt_cart_expire(t.db, cutoff, NULL, &n, &err), 0, "[%s] %s", t.engine,
                     err.message);
        cr_assert_eq(n, 1, "[%s]", t.engine);
        cr_assert_str_eq(cart_state(&t, &stale, st), "expired");
        cr_assert_str_eq(cart_state(&t, &fresh, st), "active");
        cr_assert_eq(stock_of(&t, 0), 4);
        cr_assert_eq(stock_of(&t, 1), 5);
        must_hold(&t, 2, initial, NULL);
        /* A second run finds nothing more to do. */
        cr_assert_eq(pt_cart_expire(t.db, cutoff, NULL, &n, &err), 0);
        cr_assert_eq(n, 0);
    }
}

Test(cart_reservation, the_books_indexes_serve_expiry_and_reservations)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        int64_t initial[2];
        bson_oid_t cart;
        bson_t stage = BSON_INITIALIZER;
        seed(&t, 2, 5, initial);
        bson_oid_init(&cart, NULL);
        cr_assert_eq(add(&t, &cart, 0, 1, 0), 0);
        bson_t *r = PTT_OK(&t, "{\"listIndexes\": \"carts\"}");
        char *j = bson_as_relaxed_extended_json(r, NULL);
        cr_assert(strstr(j, "\"state_1\""), "[%s] %s", t.engine, j);
        bson_free(j);
        bson_destroy(r);
        bson_t *e = ptt_explain(&t, "{\"find\": \"carts\", \"filter\": {\"modifiedOn\": "
                                    "{\"$lte\": {\"$date\": 0}}, \"state\": \"active\"}}");
        cr_assert(ptt_plan_stage(e, "IXSCAN", &stage), "[%s] expiry query without IXSCAN",
                  t.engine);
        cr_assert_str_eq(ptt_str(&stage, "indexName"), "state_1");
        bson_destroy(&stage);
        bson_destroy(e);
        char hex[25], q[256];
        bson_oid_to_string(&cart, hex);
        snprintf(q, sizeof q,
                 "{\"find\": \"inventories\", \"filter\": {\"reservations._id\": "
                 "{\"$oid\": \"%s\"}}}",
                 hex);
        e = ptt_explain(&t, q);
        bson_init(&stage);
        cr_assert(ptt_plan_stage(e, "IXSCAN", &stage), "[%s] reservation lookup without IXSCAN",
                  t.engine);
        cr_assert_str_eq(ptt_str(&stage, "indexName"), "reservations._id_1");
        bson_iter_t it;
        cr_assert(ptt_find(&stage, "isMultiKey", &it) && bson_iter_as_bool(&it),
                  "[%s] reservations._id_1 is multikey", t.engine);
        bson_destroy(&stage);
        bson_destroy(e);
    }
}

/* ---- failure points -------------------------------------------------------- */

enum proto { P_ADD, P_ADD_SHORT, P_UPDATE, P_UPDATE_SHORT, P_REMOVE, P_CHECKOUT, P_EXPIRE, NPROTO };
static const char *const proto_name[NPROTO] = {"add", "add (no stock)", "update",
                                               "update (no stock)", "remove", "checkout",
                                               "expire"};
static const int proto_writes[NPROTO] = {2, 3, 2, 3, 2, 3, 3};

/* Product 0 has plenty, product 1 has 1 unit: prepare a cart holding 2 of
 * product 0, then run protocol p stopped after `k` writes. */
static int run_proto(ptt_db *t, enum proto p, int k, int64_t *cutoff)
{
    bson_oid_t cart;
    md_error err;
    pt_cart_opts o = {k};
    bson_oid_init(&cart, NULL);
    cr_assert_eq(add(t, &cart, 0, 2, 0), 0);
    switch (p) {
    case P_ADD:
        return add(t, &cart, 2, 1, k);
    case P_ADD_SHORT:
        return add(t, &cart, 1, 5, k);
    case P_UPDATE:
        return pt_cart_res_update(t->db, &cart, 0, 3, &o, &err);
    case P_UPDATE_SHORT:
        return pt_cart_res_update(t->db, &cart, 0, 100000, &o, &err);
    case P_REMOVE:
        return pt_cart_res_remove(t->db, &cart, 0, &o, &err);
    case P_CHECKOUT:
        return pt_cart_res_checkout(t->db, &cart, &o, &err);
    case P_EXPIRE:
        cr_assert_eq(add(t, &cart, 2, 1, 0), 0);
        *cutoff = pt_now_ms();
        return pt_cart_expire(t->db, *cutoff, &o, NULL, &err);
    default:
        return MD_EINVAL;
    }
}

Test(cart_reservation, every_failure_point_is_repaired_by_the_cleanup_job)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        int64_t initial[3] = {1000, 1, 1000};
        md_error err;
        cr_assert_eq(pt_cart_create_indexes(t.db, &err), 0);
        cr_assert_eq(pt_cart_seed(t.db, 3, initial, 16, &err), 0);
        int broken = 0;
        for (int p = 0; p < NPROTO; p++) {
            for (int k = 1; k <= proto_writes[p] + 1; k++) {
                int64_t cutoff = 0;
                int rc = run_proto(&t, (enum proto)p, k, &cutoff);
                if (k <= proto_writes[p])
                    cr_assert_eq(rc, PT_CART_CRASHED, "[%s] %s stopped after %d: rc %d",
                                 t.engine, proto_name[p], k, rc);
                else
                    cr_assert(rc == 0 || rc == MD_NOTFOUND, "[%s] %s ran to the end: rc %d",
                              t.engine, proto_name[p], rc);
                /* Stopped clients leave the books unbalanced until the job runs. */
                broken += pt_cart_check(t.db, 3, initial, true, NULL, &err) != 0;
                cr_assert_eq(pt_cart_cleanup(t.db, pt_now_ms(), NULL, &err), 0, "[%s] %s",
                             t.engine, err.message);
                int rc2 = pt_cart_check(t.db, 3, initial, true, NULL, &err);
                cr_assert_eq(rc2, 0, "[%s] %s stopped after %d writes, then cleanup: %s",
                             t.engine, proto_name[p], k, err.message);
            }
        }
        cr_assert_gt(broken, 0, "[%s] no failure point ever showed", t.engine);
        /* The job itself stopped at each of its writes, then run again. */
        for (int k = 1; k <= 4; k++) {
            bson_oid_t a, b;
            bson_oid_init(&a, NULL);
            bson_oid_init(&b, NULL);
            cr_assert_eq(add(&t, &a, 0, 2, 0), 0);
            cr_assert_eq(add(&t, &a, 2, 2, 0), 0);
            cr_assert_eq(add(&t, &b, 0, 1, 0), 0);
            cr_assert_eq(pt_cart_res_checkout(t.db, &b, &(pt_cart_opts){1}, &err),
                         PT_CART_CRASHED);
            pt_cart_opts o = {k};
            int rc = pt_cart_cleanup(t.db, pt_now_ms(), &o, &err);
            cr_assert(rc == 0 || rc == PT_CART_CRASHED, "[%s] %d", t.engine, rc);
            cr_assert_eq(pt_cart_cleanup(t.db, pt_now_ms(), NULL, &err), 0);
            cr_assert_eq(pt_cart_check(t.db, 3, initial, true, NULL, &err), 0,
                         "[%s] job stopped after %d, run again: %s", t.engine, k, err.message);
        }
        pt_cart_totals tot;
        must_hold(&t, 3, initial, &tot);
        cr_assert_gt(tot.orders, 0, "[%s] recovered checkouts left orders", t.engine);
        cr_assert_gt(tot.expired, 0);
    }
}

Test(cart_reservation, a_stopped_checkout_is_rolled_forward_and_a_stopped_expiry_finished)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        int64_t initial[2], n = 0;
        bson_oid_t cart, stale;
        md_error err;
        pt_cart_totals tot;
        char st[32], hex[25], f[96];
        seed(&t, 2, 5, initial);
        bson_oid_init(&cart, NULL);
        bson_oid_init(&stale, NULL);
        cr_assert_eq(add(&t, &cart, 0, 2, 0), 0);
        cr_assert_eq(add(&t, &cart, 1, 1, 0), 0);
        cr_assert_eq(add(&t, &stale, 1, 3, 0), 0);
        /* The checkout's client dies right after marking the cart. */
        cr_assert_eq(pt_cart_res_checkout(t.db, &cart, &(pt_cart_opts){1}, &err),
                     PT_CART_CRASHED);
        cr_assert_str_eq(cart_state(&t, &cart, st), "completed");
        cr_assert_neq(pt_cart_check(t.db, 2, initial, true, NULL, &err), 0);
        cr_assert(strstr(err.message, "no order"), "[%s] %s", t.engine, err.message);
        /* The expiry job dies right after marking the stale cart. */
        cr_assert_eq(pt_cart_expire(t.db, pt_now_ms(), &(pt_cart_opts){1}, &n, &err),
                     PT_CART_CRASHED);
        cr_assert_str_eq(cart_state(&t, &stale, st), "expired");
        cr_assert_eq(stock_of(&t, 1), 1);
        cr_assert_eq(pt_cart_recover(t.db, pt_now_ms(), NULL, &n, &err), 0, "[%s] %s", t.engine,
                     err.message);
        cr_assert_eq(n, 2, "[%s] one checkout finished, one reservation given back", t.engine);
        bson_oid_to_string(&cart, hex);
        snprintf(f, sizeof f, "{\"_id\": {\"$oid\": \"%s\"}, \"recovered\": true}", hex);
        bson_t *o = get_doc(&t, "orders", f);
        cr_assert_not_null(o, "[%s] the recovery inserted the order", t.engine);
        cr_assert_eq(count_array(o, "products"), 2);
        bson_destroy(o);
        cr_assert_eq(stock_of(&t, 0), 3);
        cr_assert_eq(stock_of(&t, 1), 4);
        must_hold(&t, 2, initial, &tot);
        cr_assert_eq(tot.sold, 3);
        cr_assert_eq(tot.reservations, 0);
        /* Nothing left for a second run. */
        cr_assert_eq(pt_cart_recover(t.db, pt_now_ms(), NULL, &n, &err), 0);
        cr_assert_eq(n, 0);
    }
}

/* ---- many clients ---------------------------------------------------------- */

Test(cart_reservation, contention_without_failures_keeps_the_books_balanced)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        int64_t initial[3];
        md_error err;
        pt_cart_totals tot;
        pt_cart_stress s = {.reserving = true, .threads = 6, .ops = 150, .nproducts = 3,
                            .seed = 7};
        stress(&t, 30, &s, initial);
        /* No client stopped: the live carts are consistent as they are. */
        must_hold(&t, 3, initial, &tot);
        cr_assert_gt(s.checked_out, 0, "[%s]", t.engine);
        cr_assert_gt(s.notfound, 0, "[%s] the small stock ran out sometimes", t.engine);
        cr_assert_gt(tot.active + tot.completed, 0);
        cr_assert_eq(pt_cart_cleanup(t.db, pt_now_ms(), NULL, &err), 0);
        must_hold(&t, 3, initial, &tot);
        cr_assert_eq(tot.active, 0);
        cr_assert_eq(tot.reserved, 0);
        cr_assert_eq(tot.available + tot.sold, 90);
    }
}

Test(cart_reservation, contention_with_failures_and_expiry_keeps_the_books_balanced)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        int64_t initial[3];
        md_error err;
        pt_cart_totals tot;
        pt_cart_stress s = {.reserving = true, .threads = 8, .ops = 150, .nproducts = 3,
                            .crash_pct = 15, .expire_every = 12, .expire_age_ms = 3,
                            .seed = 11};
        stress(&t, 20, &s, initial);
        cr_assert_gt(s.crashed, 0, "[%s]", t.engine);
        cr_assert_gt(s.cleanups, 0);
        cr_assert_gt(s.checked_out, 0, "[%s]", t.engine);
        cr_assert_eq(pt_cart_cleanup(t.db, pt_now_ms(), NULL, &err), 0, "[%s] %s", t.engine,
                     err.message);
        must_hold(&t, 3, initial, &tot);
        cr_assert_eq(tot.reserved, 0);
        cr_assert_gt(tot.sold, 0);
        cr_assert_gt(tot.expired, 0);
    }
}

Test(cart_reservation, live_clients_racing_the_expiry_job_leave_nothing_to_repair)
{
    race_expiry_job(true, 17);
}

/* ---- the scenario ---------------------------------------------------------- */

Test(cart_reservation, scenario_checks_out_every_user)
{
    const pt_scenario *sc = pt_pattern_cart_reservation.scenarios[0];
    cr_assert_str_eq(pt_pattern_cart_reservation.section, "5.5");
    cr_assert_str_eq(pt_pattern_cart_reservation.book_winner, "mmapv1");
    cr_assert_eq(sc->ops[0].users, 1000);
    cr_assert_not_null(sc->note);
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        void *state = run_scenario(&t, sc);
        cr_assert_eq(ptt_count(&t, "carts", "{\"state\": \"completed\"}"), 40);
        pt_scenario_destroy(sc, state);
    }
}

/* The simulator's Cart.add without stock: every reservation modifies
 * nothing, so each add pulls its line again and counts as refused; the
 * checkout then inserts an empty order and marks the cart completed, and
 * fails where the simulator's did, finding no reservation to commit. */
Test(cart_reservation, scenario_user_without_stock_keeps_no_line_and_fails_at_commit)
{
    const pt_scenario *sc = pt_pattern_cart_reservation.scenarios[0];
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        void *state = run_user_without_stock(&t, sc, "no reservations");
        md_error err;
        cr_assert_eq(pt_cart_scenario_refused(state), 5, "[%s]", t.engine);
        cr_assert_eq(ptt_count(&t, "carts", "{\"products\": {\"$size\": 0}}"), 1);
        cr_assert_eq(ptt_count(&t, "orders", "{\"products\": {\"$size\": 0}}"), 1);
        cr_assert_eq(ptt_count(&t, "inventories", "{\"quantity\": {\"$ne\": 0}}"), 0);
        cr_assert_eq(sc->check(t.db, state, &err), 0, "[%s] %s", t.engine, err.message);
        pt_scenario_destroy(sc, state);
    }
}
