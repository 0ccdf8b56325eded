/*
 * test_cart_util.h -- helpers the two shopping-cart test files share
 * (test_cart_reservation.c, test_cart_no_reservation.c): seeding the
 * inventories, reading inventories and carts back, the invariant check,
 * the many-clients stress and the scenario's run.
 * The including file defines CART_RESERVES (does its chapter reserve stock
 * in the inventories?) before including it.
 */
#ifndef TEST_CART_UTIL_H
#define TEST_CART_UTIL_H

#include "cart_common.h"
#include "pt_test_util.h"

#ifndef CART_RESERVES
#error "define CART_RESERVES before including test_cart_util.h"
#endif

static inline void seed(ptt_db *t, int64_t n, int64_t stock, int64_t *initial)
{
    md_error err;
    for (int64_t i = 0; i < n; i++)
        initial[i] = stock;
    cr_assert_eq(pt_cart_create_indexes(t->db, &err), 0, "[%s] indexes: %s", t->engine,
                 err.message);
    cr_assert_eq(pt_cart_seed(t->db, n, initial, 16, &err), 0, "[%s] seed: %s", t->engine,
                 err.message);
}

/* The first document of `coll` matching the JSON filter, or NULL. */
static inline bson_t *get_doc(ptt_db *t, const char *coll, const char *filter)
{
    bson_t *r = PTT_OK(t, "{\"find\": \"%s\", \"filter\": %s, \"limit\": 1}", coll, filter);
    bson_iter_t it;
    bson_t *out = NULL;
    if (ptt_find(r, "cursor.firstBatch.0", &it) && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        const uint8_t *data;
        uint32_t len;
        bson_iter_document(&it, &len, &data);
        out = bson_new_from_data(data, len);
    }
    bson_destroy(r);
    return out;
}

static inline bson_t *inventory(ptt_db *t, int64_t p)
{
    char f[64];
    snprintf(f, sizeof f, "{\"_id\": %lld}", (long long)p);
    bson_t *d = get_doc(t, "inventories", f);
    cr_assert_not_null(d, "[%s] no inventory %lld", t->engine, (long long)p);
    return d;
}

static inline int64_t stock_of(ptt_db *t, int64_t p)
{
    bson_t *d = inventory(t, p);
    int64_t q = ptt_i64(d, "quantity");
    bson_destroy(d);
    return q;
}

static inline bson_t *cart_doc(ptt_db *t, const bson_oid_t *cart)
{
    char hex[25], f[96];
    bson_oid_to_string(cart, hex);
    snprintf(f, sizeof f, "{\"_id\": {\"$oid\": \"%s\"}}", hex);
    return get_doc(t, "carts", f);
}

static inline const char *cart_state(ptt_db *t, const bson_oid_t *cart, char *buf)
{
    bson_t *d = cart_doc(t, cart);
    snprintf(buf, 32, "%s", d ? ptt_str(d, "state") : "(none)");
    if (d)
        bson_destroy(d);
    return buf;
}

static inline int64_t count_array(const bson_t *d, const char *path)
{
    bson_iter_t it, a;
    int64_t n = 0;
    if (!ptt_find(d, path, &it) || !BSON_ITER_HOLDS_ARRAY(&it))
        return -1;
    bson_iter_recurse(&it, &a);
    while (bson_iter_next(&a))
        n++;
    return n;
}

static inline void must_hold(ptt_db *t, int64_t n, const int64_t *initial, pt_cart_totals *tot)
{
    md_error err;
    int rc = pt_cart_check(t->db, n, initial, CART_RESERVES, tot, &err);
    cr_assert_eq(rc, 0, "[%s] invariants: %s", t->engine, err.message);
}

static inline pt_cart_item item(int64_t p, int32_t q)
{
    pt_cart_item it = {.product = p, .quantity = q, .price = 1000};
    snprintf(it.name, sizeof it.name, "Simsong Mobile %lld", (long long)p);
    return it;
}

/* Three products of `stock` each (initial), then the stress s against
 * them, which must finish without an error. */
static inline void stress(ptt_db *t, int64_t stock, pt_cart_stress *s, int64_t *initial)
{
    md_error err;
    seed(t, 3, stock, initial);
    cr_assert_eq(pt_cart_stress_run(t->db, s, &err), 0, "[%s] %s", t->engine, err.message);
}

/* Live clients of either cart (reserving or not) racing the expiry job,
 * which only expires (no recovery pass): whatever a client and the job do
 * at the same time must settle by itself, with the stock all accounted. */
static inline void race_expiry_job(bool reserving, uint64_t seed_value)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        int64_t initial[3];
        pt_cart_totals tot;
        pt_cart_stress s = {.reserving = reserving, .threads = 8, .ops = 150, .nproducts = 3,
                            .expire_every = 6, .expire_age_ms = 2, .expire_only = true,
                            .seed = seed_value};
        stress(&t, 60, &s, initial);
        must_hold(&t, 3, initial, &tot);
        cr_assert_gt(tot.expired, 0, "[%s] the job raced the clients", t.engine);
        cr_assert_gt(s.checked_out, 0, "[%s]", t.engine);
        cr_assert_eq(tot.available + tot.reserved + tot.sold, 180);
    }
}

/* The chapter's scenario, as the simulator ran it: setup, its one op by
 * 40 users on 4 clients (with 4 helpers for the adds issued at once) and
 * its check must all succeed, and leave 40 carts completed with 5 lines
 * each, under the simulator's field names (modified_on), 40 orders of 5
 * lines, no add refused, and 200 units sold, none left reserved, every
 * product conserved.  The caller destroys the returned state. */
static inline void *run_scenario(ptt_db *t, const pt_scenario *sc)
{
    md_error err;
    void *state = NULL;
    pt_setup_args a = {.users = 40, .quick = true};
    char first[256];
    cr_assert_eq(sc->setup(t->db, &a, &state, &err), 0, "[%s] %s", t->engine, err.message);
    int bad = ptt_run_op(t->db, state, &sc->ops[0], 4, 40, first);
    cr_assert_eq(bad, 0, "[%s] %s", t->engine, first);
    cr_assert_eq(sc->check(t->db, state, &err), 0, "[%s] %s", t->engine, err.message);
    cr_assert_eq(pt_cart_scenario_refused(state), 0, "[%s]", t->engine);
    cr_assert_eq(ptt_count(t, "carts", "{}"), 40, "[%s]", t->engine);
    cr_assert_eq(ptt_count(t, "carts",
                           "{\"state\": \"completed\", \"products\": {\"$size\": 5}, "
                           "\"modified_on\": {\"$exists\": true}}"),
                 40, "[%s] every cart completed with its 5 lines", t->engine);
    cr_assert_eq(ptt_count(t, "orders", "{}"), 40);
    cr_assert_eq(ptt_count(t, "orders", "{\"products\": {\"$size\": 5}}"), 40, "[%s]",
                 t->engine);
    pt_cart_scenario_state *st = state;
    pt_cart_totals tot;
    must_hold(t, st->nproducts, st->initial, &tot);
    cr_assert_eq(tot.sold, 200, "[%s] sold %lld", t->engine, (long long)tot.sold);
    cr_assert_eq(tot.reserved, 0, "[%s]", t->engine);
    cr_assert_eq(tot.reservations, 0, "[%s]", t->engine);
    cr_assert_eq(tot.available, st->nproducts * CART_SCENARIO_STOCK - 200, "[%s]", t->engine);
    return state;
}

/* The scenario's setup with every inventory emptied (the state's initial
 * stock too), then one user, which must fail with a message containing
 * `why`.  The caller destroys the returned state. */
static inline void *run_user_without_stock(ptt_db *t, const pt_scenario *sc, const char *why)
{
    md_error err;
    void *state = NULL;
    pt_setup_args a = {.users = 1, .quick = true};
    char first[256];
    cr_assert_eq(sc->setup(t->db, &a, &state, &err), 0, "[%s] %s", t->engine, err.message);
    pt_cart_scenario_state *st = state;
    for (int64_t i = 0; i < st->nproducts; i++)
        st->initial[i] = 0;
    bson_destroy(PTT_OK(t, "{\"update\": \"inventories\", \"updates\": [{\"q\": {}, "
                           "\"u\": {\"$set\": {\"quantity\": 0}}, \"multi\": true}]}"));
    int bad = ptt_run_op(t->db, state, &sc->ops[0], 1, 1, first);
    cr_assert_eq(bad, 1, "[%s] the user must fail", t->engine);
    cr_assert(strstr(first, why), "[%s] %s", t->engine, first);
    return state;
}

#endif /* TEST_CART_UTIL_H */
