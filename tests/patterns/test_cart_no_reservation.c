/*
 * test_cart_no_reservation.c -- 5.6 Shopping Cart with No Product
 * Reservation (patterns/cart_no_reservation.c, cart_common.c) on every
 * engine: the cart operations leave the inventory alone, checkout takes
 * every line or none (giving back what it took when one line is short),
 * every failure point followed by the cleanup job, many clients racing
 * the cleanup job on a small stock, and the scenario (the simulator's
 * classes, patterns/cart_sim.c).  After each step
 * the invariants (pt_cart_check) must hold.
 */
#include <time.h>

#define CART_RESERVES false
#include "test_cart_util.h"

/* ---- helpers --------------------------------------------------------------- */

static int add(ptt_db *t, const bson_oid_t *cart, int64_t p, int32_t q, int crash_after)
{
    pt_cart_item it = item(p, q);
    pt_cart_opts o = {crash_after};
    md_error err;
    return pt_cart_nores_add(t->db, cart, &it, &o, &err);
}

/* ---- operations ------------------------------------------------------------ */

Test(cart_no_reservation, add_update_remove_touch_only_the_cart)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        int64_t initial[2];
        bson_oid_t cart, ghost;
        md_error err;
        seed(&t, 2, 5, initial);
        bson_oid_init(&cart, NULL);
        cr_assert_eq(add(&t, &cart, 0, 2, 0), 0, "[%s]", t.engine);
        cr_assert_eq(add(&t, &cart, 1, 9, 0), 0, "[%s] no stock check before checkout",
                     t.engine);
        cr_assert_eq(add(&t, &cart, 1, 1, 0), MD_EEXISTS);
        bson_t *c = cart_doc(&t, &cart);
        cr_assert_str_eq(ptt_str(c, "state"), "active");
        cr_assert_eq(count_array(c, "products"), 2);
        cr_assert_eq(ptt_i64(c, "products.1.quantity"), 9);
        bson_destroy(c);
        cr_assert_eq(pt_cart_nores_update(t.db, &cart, 1, 3, NULL, &err), 0, "[%s] %s", t.engine,
                     err.message);
        c = cart_doc(&t, &cart);
        cr_assert_eq(ptt_i64(c, "products.1.quantity"), 3);
        bson_destroy(c);
        cr_assert_eq(pt_cart_nores_remove(t.db, &cart, 0, NULL, &err), 0);
        c = cart_doc(&t, &cart);
        cr_assert_eq(count_array(c, "products"), 1);
        cr_assert_eq(ptt_i64(c, "products.0._id"), 1);
        bson_destroy(c);
        cr_assert_eq(pt_cart_nores_remove(t.db, &cart, 0, NULL, &err), MD_NOTFOUND);
        cr_assert_eq(pt_cart_nores_update(t.db, &cart, 0, 2, NULL, &err), MD_NOTFOUND);
        /* Ex 2 without the book's upsert: no cart appears for an unknown one. */
        bson_oid_init(&ghost, NULL);
        cr_assert_eq(pt_cart_nores_update(t.db, &ghost, 0, 2, NULL, &err), MD_NOTFOUND);
        cr_assert_null(cart_doc(&t, &ghost), "[%s] update created a cart", t.engine);
        cr_assert_eq(stock_of(&t, 0), 5);
        cr_assert_eq(stock_of(&t, 1), 5);
        cr_assert_eq(ptt_count(&t, "inventories", "{\"reservations._id\": {\"$exists\": true}}"),
                     0);
        must_hold(&t, 2, initial, NULL);
    }
}

Test(cart_no_reservation, checkout_takes_the_stock_then)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        int64_t initial[2];
        bson_oid_t cart;
        md_error err;
        pt_cart_totals tot;
        char st[32];
        seed(&t, 2, 5, initial);
        bson_oid_init(&cart, NULL);
        cr_assert_eq(add(&t, &cart, 0, 2, 0), 0);
        cr_assert_eq(add(&t, &cart, 1, 5, 0), 0);
        cr_assert_eq(pt_cart_nores_checkout(t.db, &cart, NULL, &err), 0, "[%s] %s", t.engine,
                     err.message);
        cr_assert_str_eq(cart_state(&t, &cart, st), "completed");
        cr_assert_eq(stock_of(&t, 0), 3);
        cr_assert_eq(stock_of(&t, 1), 0);
        cr_assert_eq(ptt_count(&t, "inventories", "{\"reservations._id\": {\"$exists\": true}}"),
                     0);
        must_hold(&t, 2, initial, &tot);
        cr_assert_eq(tot.orders, 1);
        cr_assert_eq(tot.sold, 7);
        cr_assert_eq(pt_cart_nores_checkout(t.db, &cart, NULL, &err), MD_NOTFOUND);
        cr_assert_eq(stock_of(&t, 0), 3);
    }
}

Test(cart_no_reservation, checkout_short_of_one_line_gives_the_others_back)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        int64_t initial[3] = {5, 1, 5};
        bson_oid_t cart;
        md_error err;
        char st[32];
        cr_assert_eq(pt_cart_create_indexes(t.db, &err), 0);
        cr_assert_eq(pt_cart_seed(t.db, 3, initial, 16, &err), 0);
        bson_oid_init(&cart, NULL);
        cr_assert_eq(add(&t, &cart, 0, 2, 0), 0);
        cr_assert_eq(add(&t, &cart, 1, 2, 0), 0);
        cr_assert_eq(add(&t, &cart, 2, 1, 0), 0);
        cr_assert_eq(pt_cart_nores_checkout(t.db, &cart, NULL, &err), MD_NOTFOUND, "[%s]",
                     t.engine);
        cr_assert_eq(stock_of(&t, 0), 5, "[%s] Ex 4 gave product 0 back", t.engine);
        cr_assert_eq(stock_of(&t, 1), 1);
        cr_assert_eq(stock_of(&t, 2), 5);
        cr_assert_str_eq(cart_state(&t, &cart, st), "active");
        cr_assert_eq(ptt_count(&t, "orders", "{}"), 0);
        must_hold(&t, 3, initial, NULL);
        /* The shopper settles for what there is. */
        cr_assert_eq(pt_cart_nores_update(t.db, &cart, 1, 1, NULL, &err), 0);
        cr_assert_eq(pt_cart_nores_checkout(t.db, &cart, NULL, &err), 0, "[%s] %s", t.engine,
                     err.message);
        cr_assert_eq(stock_of(&t, 1), 0);
        must_hold(&t, 3, initial, NULL);
    }
}

Test(cart_no_reservation, expiry_marks_stale_carts_and_keeps_the_stock)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        int64_t initial[1], n = 0;
        bson_oid_t cart;
        md_error err;
        char st[32];
        seed(&t, 1, 5, initial);
        bson_oid_init(&cart, NULL);
        cr_assert_eq(add(&t, &cart, 0, 2, 0), 0);
        cr_assert_eq(pt_cart_expire(t.db, pt_now_ms(), NULL, &n, &err), 0);
        cr_assert_eq(n, 1);
        cr_assert_str_eq(cart_state(&t, &cart, st), "expired");
        cr_assert_eq(stock_of(&t, 0), 5);
        cr_assert_eq(pt_cart_nores_checkout(t.db, &cart, NULL, &err), MD_NOTFOUND);
        cr_assert_eq(stock_of(&t, 0), 5);
        must_hold(&t, 1, initial, NULL);
    }
}

Test(cart_no_reservation, the_books_indexes_exist)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        int64_t initial[1];
        seed(&t, 1, 5, initial);
        bson_t *r = PTT_OK(&t, "{\"listIndexes\": \"inventories\"}");
        char *j = bson_as_relaxed_extended_json(r, NULL);
        cr_assert(strstr(j, "\"reservations._id_1\""), "[%s] %s", t.engine, j);
        bson_free(j);
        bson_destroy(r);
        r = PTT_OK(&t, "{\"listIndexes\": \"carts\"}");
        j = bson_as_relaxed_extended_json(r, NULL);
        cr_assert(strstr(j, "\"state_1\""), "[%s] %s", t.engine, j);
        bson_free(j);
        bson_destroy(r);
    }
}

/* ---- failure points -------------------------------------------------------- */

enum proto { P_ADD, P_UPDATE, P_REMOVE, P_CHECKOUT, P_CHECKOUT_SHORT, NPROTO };
static const char *const proto_name[NPROTO] = {"add", "update", "remove", "checkout",
                                               "checkout (no stock)"};
/* checkout: 2 reservations, mark, order, pull; short: 2 reservations (the
 * second fails), 1 give-back. */
static const int proto_writes[NPROTO] = {1, 1, 1, 5, 3};

static int run_proto(ptt_db *t, enum proto p, int k)
{
    bson_oid_t cart;
    md_error err;
    pt_cart_opts o = {k};
    bson_oid_init(&cart, NULL);
    cr_assert_eq(add(t, &cart, 0, 2, 0), 0);
    switch (p) {
    case P_ADD:
        return add(t, &cart, 2, 1, k);
    case P_UPDATE:
        return pt_cart_nores_update(t->db, &cart, 0, 3, &o, &err);
    case P_REMOVE:
        return pt_cart_nores_remove(t->db, &cart, 0, &o, &err);
    case P_CHECKOUT:
        cr_assert_eq(add(t, &cart, 2, 1, 0), 0);
        return pt_cart_nores_checkout(t->db, &cart, &o, &err);
    case P_CHECKOUT_SHORT:
        cr_assert_eq(add(t, &cart, 1, 5, 0), 0);
        return pt_cart_nores_checkout(t->db, &cart, &o, &err);
    default:
        return MD_EINVAL;
    }
}

Test(cart_no_reservation, every_failure_point_is_repaired_by_the_cleanup_job)
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
                int rc = run_proto(&t, (enum proto)p, k);
                if (k <= proto_writes[p])
                    cr_assert_eq(rc, PT_CART_CRASHED, "[%s] %s stopped after %d: rc %d",
                                 t.engine, proto_name[p], k, rc);
                else
                    cr_assert(rc == 0 || rc == MD_NOTFOUND, "[%s] %s ran to the end: rc %d",
                              t.engine, proto_name[p], rc);
                broken += pt_cart_check(t.db, 3, initial, false, NULL, &err) != 0;
                cr_assert_eq(pt_cart_cleanup(t.db, pt_now_ms(), NULL, &err), 0, "[%s] %s",
                             t.engine, err.message);
                int rc2 = pt_cart_check(t.db, 3, initial, false, NULL, &err);
                cr_assert_eq(rc2, 0, "[%s] %s stopped after %d writes, then cleanup: %s",
                             t.engine, proto_name[p], k, err.message);
                cr_assert_eq(ptt_count(&t, "inventories",
                                       "{\"reservations._id\": {\"$exists\": true}}"),
                             0, "[%s] %s/%d left a reservation", t.engine, proto_name[p], k);
            }
        }
        cr_assert_gt(broken, 0, "[%s] no failure point ever showed", t.engine);
        pt_cart_totals tot;
        must_hold(&t, 3, initial, &tot);
        cr_assert_gt(tot.orders, 0);
        cr_assert_gt(tot.expired, 0);
    }
}

/* ---- many clients ---------------------------------------------------------- */

Test(cart_no_reservation, contention_without_failures_keeps_the_books_balanced)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        int64_t initial[3];
        pt_cart_totals tot;
        pt_cart_stress s = {.reserving = false, .threads = 6, .ops = 150, .nproducts = 3,
                            .seed = 3};
        stress(&t, 60, &s, initial);
        must_hold(&t, 3, initial, &tot);
        cr_assert_gt(s.checked_out, 0, "[%s]", t.engine);
        cr_assert_eq(tot.reservations, 0, "[%s] every checkout finished", t.engine);
        cr_assert_eq(tot.available + tot.sold, 180);
    }
}

Test(cart_no_reservation, contention_with_failures_and_expiry_keeps_the_books_balanced)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        int64_t initial[3];
        md_error err;
        pt_cart_totals tot;
        pt_cart_stress s = {.reserving = false, .threads = 8, .ops = 150, .nproducts = 3,
                            .crash_pct = 15, .expire_every = 12, .expire_age_ms = 3,
                            .seed = 13};
        stress(&t, 60, &s, initial);
        cr_assert_gt(s.crashed, 0, "[%s]", t.engine);
        cr_assert_gt(s.checked_out, 0, "[%s]", t.engine);
        cr_assert_eq(pt_cart_cleanup(t.db, pt_now_ms(), NULL, &err), 0, "[%s] %s", t.engine,
                     err.message);
        must_hold(&t, 3, initial, &tot);
        cr_assert_eq(tot.reservations, 0);
        cr_assert_gt(tot.sold, 0);
        cr_assert_eq(tot.available + tot.sold, 180);
    }
}

Test(cart_no_reservation, live_clients_racing_the_expiry_job_leave_nothing_to_repair)
{
    race_expiry_job(false, 19);
}

/* ---- the scenario ---------------------------------------------------------- */

Test(cart_no_reservation, scenario_checks_out_every_user)
{
    const pt_scenario *sc = pt_pattern_cart_no_reservation.scenarios[0];
    cr_assert_str_eq(pt_pattern_cart_no_reservation.section, "5.6");
    cr_assert_str_eq(pt_pattern_cart_no_reservation.book_winner, "mmapv1");
    cr_assert_not_null(sc->note);
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        void *state = run_scenario(&t, sc);
        pt_scenario_destroy(sc, state);
    }
}

/* The simulator's checkout without stock: the cart got its 5 lines, every
 * line's reservation modifies nothing, none is given back (none was
 * taken), and the checkout fails before the order: the cart stays active,
 * the inventories untouched. */
Test(cart_no_reservation, scenario_user_without_stock_fails_its_checkout_and_takes_nothing)
{
    const pt_scenario *sc = pt_pattern_cart_no_reservation.scenarios[0];
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        void *state = run_user_without_stock(&t, sc, "out of stock");
        md_error err;
        cr_assert_eq(pt_cart_scenario_refused(state), 0, "[%s]", t.engine);
        cr_assert_eq(ptt_count(&t, "carts",
                               "{\"state\": \"active\", \"products\": {\"$size\": 5}}"),
                     1, "[%s]", t.engine);
        cr_assert_eq(ptt_count(&t, "orders", "{}"), 0);
        cr_assert_eq(ptt_count(&t, "inventories", "{\"reservations.0\": {\"$exists\": true}}"),
                     0);
        cr_assert_eq(ptt_count(&t, "inventories", "{\"quantity\": {\"$ne\": 0}}"), 0);
        cr_assert_eq(sc->check(t.db, state, &err), 0, "[%s] %s", t.engine, err.message);
        pt_scenario_destroy(sc, state);
    }
}
