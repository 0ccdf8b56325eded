/*
 * cart_sim.c -- the user the two cart scenarios run: the simulator's own
 * Cart, Inventory, Product and Order classes (mongodb-schema-simulator as
 * the book ran it: lib/common/schemas/cart_reservation/ and
 * cart_no_reservation/, driven by lib/common/scenarios/carts_reservations.js
 * and carts_no_reservation.js), not the chapters' code, which stays in
 * cart_reservation.c and cart_no_reservation.c with its tests.
 *
 * One user, timed from before its first write to the end of its checkout
 * (the simulator's startTime .. endTime):
 *
 *   create    carts.updateOne({_id: cart}, {state: 'active', modified_on,
 *                             products: []}, {upsert: true})
 *             (a replacement; 5.6's also names the _id)
 *   add x 5   issued at once, without waiting for each other (the
 *             simulator's loop of async calls: pt_user_parallel), each:
 *               products.findOne({_id: p})
 *               carts.updateOne({_id: cart, state: 'active'},
 *                   {$set: {modified_on}, $push: {products: {_id: p,
 *                    quantity: 1, name, price}}}, {upsert: true})
 *             5.5 only, then:
 *               inventories.updateOne({_id: p, quantity: {$gte: 1}},
 *                   {$inc: {quantity: -1}, $push: {reservations:
 *                    {quantity: 1, _id: cart, created_on}}})
 *               and if that modified nothing: carts.updateOne({_id: cart,
 *                   state: 'active', 'products._id': p},
 *                   {$pull: {products: {_id: p}}})
 *   checkout  once all five are back:
 *               carts.findOne({_id: cart})
 *             5.6 only: the reservation above for every line, at once;
 *             if one modified nothing, the others given back, at once:
 *               inventories.updateOne({_id: p, 'reservations._id': cart},
 *                   {$inc: {quantity: q}, $pull: {reservations: {_id: cart}}})
 *             and the checkout fails; else, both chapters:
 *               orders.insertOne({_id, total, shipping: {}, payment: {},
 *                                 products: cart.products})
 *               carts.updateOne({_id: cart, state: 'active'},
 *                               {$set: {state: 'completed'}})
 *               inventories.updateMany({'reservations._id': cart},
 *                                      {$pull: {reservations: {_id: cart}}})
 *
 * A write "failed" where the simulator's did: when the reply's
 * modifiedCount is 0.  A failed add fails only that add (the simulator's
 * scenario read no add's error, and went on to the checkout); here it is
 * counted (pt_cart_scenario_refused).  A failed checkout fails the user.
 *
 * The five pushes meet on one cart document: on btree they collide as
 * write conflicts, which the query layer retries; on mmapv1 they queue on
 * the collection's lock.  5.6's checkout reservations go to five
 * inventory documents.
 *
 * Where this is not the simulator's, and why:
 *   - a cart's five products are distinct: the simulator's
 *     round(random() * N) % N drew one twice in about one cart in a
 *     hundred, pushing two lines of it, which the chapters' invariants (one
 *     line per product and cart, pt_cart_check) do not allow;
 *   - the order's _id is the cart's (the simulator's was a new ObjectId),
 *     so the check can pair every order with its cart; the insert is the
 *     same size and cost;
 *   - products have a price (the simulator's had none: its lines held no
 *     price and its order total was NaN);
 *   - a user keeps its client for its whole script and its other adds go
 *     to the run's helper threads (pt_user_parallel), so past saturation
 *     up to twice the simulator's 200 connections' operations can be in
 *     flight at once (its users' requests shared the 200).
 */
#include <stdatomic.h>
#include <string.h>

#include "cart_common.h"

/* A user's cart: what its sub-operations share.  Sub-operation i writes
 * only its own slot of ok[]. */
typedef struct sim_cart {
    bson_oid_t id;
    bool reserving;               /* 5.5 */
    pt_cart_scenario_state *st;
    int n;                        /* products drawn */
    int64_t products[CART_SCENARIO_ITEMS];
    /* the checkout's lines (5.6) and which of them were reserved */
    pt_cart_line *lines;
    bool ok[PT_PARALLEL_MAX];
} sim_cart;

/* updateOne / updateMany (CART_MULTI) with {upsert: true} (CART_UPSERT);
 * *modified gets the reply's modifiedCount: a write "failed" where it is
 * 0, as the simulator judged its writes. */
static int sim_update(md_db *db, const char *coll, const bson_t *q, const bson_t *u, int flags,
                      int64_t *modified, md_error *err)
{
    return pt_cart_update(db, coll, q, u, flags | CART_MODIFIED, modified, err);
}

/* Cart.create: the replacement upsert. */
static int sim_create(md_db *db, const sim_cart *c, md_error *err)
{
    md_collection *carts = md_db_get_collection(db, CART_CARTS);
    bson_t *q = BCON_NEW("_id", BCON_OID(&c->id));
    bson_t *opts = BCON_NEW("upsert", BCON_BOOL(true));
    bson_t doc = BSON_INITIALIZER, arr;
    if (!c->reserving)
        BSON_APPEND_OID(&doc, "_id", &c->id);
    BSON_APPEND_UTF8(&doc, "state", "active");
    BSON_APPEND_DATE_TIME(&doc, "modified_on", pt_now_ms());
    BSON_APPEND_ARRAY_BEGIN(&doc, "products", &arr);
    bson_append_array_end(&doc, &arr);
    int rc = md_collection_replace_one(carts, q, &doc, opts, NULL, err);
    bson_destroy(&doc);
    bson_destroy(opts);
    bson_destroy(q);
    md_collection_destroy(carts);
    return rc;
}

/* Inventory.reserve (5.5, one product) and the reservation of one line in
 * 5.6's Inventory.reserve: the same statement, the book's with the
 * simulator's field name, tested by modifiedCount. */
static int sim_reserve(md_db *db, const bson_oid_t *cart, int64_t product, int32_t quantity,
                       int64_t *modified, md_error *err)
{
    return pt_cart_reserve(db, cart, product, quantity, "created_on", CART_MODIFIED, modified,
                           err);
}

/* A failed add: the simulator's scenario went on without it. */
static int sim_refused(sim_cart *c)
{
    atomic_fetch_add(&c->st->refused, 1);
    return 0;
}

/* addProductToCart: Product.reload, then Cart.add (sub-operation i). */
static int sim_add(pt_user *u, int i, void *arg, md_error *err)
{
    sim_cart *c = arg;
    pt_cart_item item;
    int64_t modified = 0;
    int rc = pt_cart_product(u->db, c->products[i], &item, err);
    if (rc != 0)
        return rc == MD_NOTFOUND ? md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE,
                                                "product %lld is missing",
                                                (long long)c->products[i])
                                 : rc;
    bson_t *q = BCON_NEW("_id", BCON_OID(&c->id), "state", BCON_UTF8("active"));
    bson_t *up = BCON_NEW("$set", "{", "modified_on", BCON_DATE_TIME(pt_now_ms()), "}",
                          "$push", "{", "products", "{", "_id", BCON_INT64(item.product),
                          "quantity", BCON_INT32(1), "name", BCON_UTF8(item.name), "price",
                          BCON_INT32(item.price), "}", "}");
    rc = sim_update(u->db, CART_CARTS, q, up, CART_UPSERT, &modified, err);
    bson_destroy(q);
    bson_destroy(up);
    if (rc != 0)
        return rc;
    if (modified == 0)
        return sim_refused(c);
    if (!c->reserving)
        return 0;
    rc = sim_reserve(u->db, &c->id, item.product, 1, &modified, err);
    if (rc != 0 || modified > 0)
        return rc;
    q = BCON_NEW("_id", BCON_OID(&c->id), "state", BCON_UTF8("active"), "products._id",
                 BCON_INT64(item.product));
    up = BCON_NEW("$pull", "{", "products", "{", "_id", BCON_INT64(item.product), "}", "}");
    rc = sim_update(u->db, CART_CARTS, q, up, 0, &modified, err);
    bson_destroy(q);
    bson_destroy(up);
    return rc != 0 ? rc : sim_refused(c);
}

/* 5.6's Inventory.reserve, line i. */
static int sim_reserve_line(pt_user *u, int i, void *arg, md_error *err)
{
    sim_cart *c = arg;
    int64_t modified = 0;
    int rc = sim_reserve(u->db, &c->id, c->lines[i].product, c->lines[i].quantity, &modified,
                         err);
    c->ok[i] = rc == 0 && modified > 0;
    return rc;
}

/* 5.6's rollback of line i, if it was reserved. */
static int sim_give_back(pt_user *u, int i, void *arg, md_error *err)
{
    sim_cart *c = arg;
    int64_t modified = 0;
    if (!c->ok[i])
        return 0;
    bson_t *q = BCON_NEW("_id", BCON_INT64(c->lines[i].product), "reservations._id",
                         BCON_OID(&c->id));
    bson_t *up = BCON_NEW("$inc", "{", "quantity", BCON_INT32(c->lines[i].quantity), "}",
                          "$pull", "{", "reservations", "{", "_id", BCON_OID(&c->id), "}",
                          "}");
    int rc = sim_update(u->db, CART_INVENTORIES, q, up, 0, &modified, err);
    bson_destroy(q);
    bson_destroy(up);
    return rc;
}

/* 5.6's Inventory.reserve over the cart's nl lines: 0, or the checkout's
 * failure once what was reserved is given back. */
static int sim_reserve_all(pt_user *u, sim_cart *c, int nl, md_error *err)
{
    if (nl > PT_PARALLEL_MAX)
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE, "a cart of %d lines", nl);
    memset(c->ok, 0, sizeof c->ok);
    int rc = pt_user_parallel(u, nl, sim_reserve_line, c, err);
    bool all = true;
    for (int i = 0; i < nl; i++)
        all &= c->ok[i];
    if (rc == 0 && all)
        return 0;
    md_error e2;
    int rc2 = pt_user_parallel(u, nl, sim_give_back, c, &e2);
    if (rc != 0)
        return rc;
    if (rc2 != 0) {
        if (err)
            *err = e2;
        return rc2;
    }
    return md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE, "failed to checkout cart: a line "
                                                         "was out of stock");
}

/* The order's total: quantity * price over the cart's lines. */
static int64_t sim_total(const bson_t *cart)
{
    bson_iter_t it, arr, f;
    int64_t total = 0;
    if (!bson_iter_init_find(&it, cart, "products") || !BSON_ITER_HOLDS_ARRAY(&it) ||
        !bson_iter_recurse(&it, &arr))
        return 0;
    while (bson_iter_next(&arr)) {
        int64_t q = 0, p = 0;
        if (!BSON_ITER_HOLDS_DOCUMENT(&arr) || !bson_iter_recurse(&arr, &f))
            continue;
        while (bson_iter_next(&f)) {
            if (!BSON_ITER_HOLDS_NUMBER(&f))
                continue;
            if (strcmp(bson_iter_key(&f), "quantity") == 0)
                q = bson_iter_as_int64(&f);
            else if (strcmp(bson_iter_key(&f), "price") == 0)
                p = bson_iter_as_int64(&f);
        }
        total += q * p;
    }
    return total;
}

/* Order.create. */
static int sim_order(md_db *db, const sim_cart *c, const bson_t *cart, md_error *err)
{
    bson_t order = BSON_INITIALIZER, sub;
    bson_iter_t it;
    BSON_APPEND_OID(&order, "_id", &c->id);
    BSON_APPEND_INT64(&order, "total", sim_total(cart));
    BSON_APPEND_DOCUMENT_BEGIN(&order, "shipping", &sub);
    bson_append_document_end(&order, &sub);
    BSON_APPEND_DOCUMENT_BEGIN(&order, "payment", &sub);
    bson_append_document_end(&order, &sub);
    if (bson_iter_init_find(&it, cart, "products"))
        bson_append_iter(&order, "products", -1, &it);
    md_collection *orders = md_db_get_collection(db, CART_ORDERS);
    int rc = md_collection_insert_one(orders, &order, NULL, NULL, err);
    md_collection_destroy(orders);
    bson_destroy(&order);
    return rc;
}

/* Cart.checkout. */
static int sim_checkout(pt_user *u, sim_cart *c, md_error *err)
{
    bson_t cart;
    int64_t modified = 0;
    int nl = 0;
    bson_t *q = BCON_NEW("_id", BCON_OID(&c->id));
    int rc = pt_find_one(u->db, CART_CARTS, q, NULL, &cart, err);
    bson_destroy(q);
    if (rc == MD_NOTFOUND)
        rc = md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE, "could not locate the cart");
    if (rc == 0 && !c->reserving) {
        rc = pt_cart_lines(&cart, &c->lines, &nl, err);
        if (rc == 0 && nl > 0)
            rc = sim_reserve_all(u, c, nl, err);
    }
    if (rc == 0)
        rc = sim_order(u->db, c, &cart, err);
    bson_destroy(&cart);
    if (rc == 0) {
        q = BCON_NEW("_id", BCON_OID(&c->id), "state", BCON_UTF8("active"));
        bson_t *up = BCON_NEW("$set", "{", "state", BCON_UTF8("completed"), "}");
        rc = sim_update(u->db, CART_CARTS, q, up, 0, &modified, err);
        bson_destroy(q);
        bson_destroy(up);
        if (rc == 0 && modified == 0)
            rc = md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE,
                              "failed to set the cart to completed");
    }
    if (rc == 0) {
        q = BCON_NEW("reservations._id", BCON_OID(&c->id));
        bson_t *up = BCON_NEW("$pull", "{", "reservations", "{", "_id", BCON_OID(&c->id), "}",
                              "}");
        rc = sim_update(u->db, CART_INVENTORIES, q, up, CART_MULTI, &modified, err);
        bson_destroy(q);
        bson_destroy(up);
        if (rc == 0 && c->reserving && modified == 0)
            rc = md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE,
                              "no reservations of the cart found in inventory");
    }
    bson_free(c->lines);
    c->lines = NULL;
    return rc;
}

int pt_cart_scenario_user(pt_user *u, bool reserving, md_error *err)
{
    sim_cart c = {.reserving = reserving, .st = u->state};
    bson_oid_init(&c.id, NULL);
    while (c.n < CART_SCENARIO_ITEMS && c.n < c.st->nproducts) {
        int64_t p = (int64_t)pt_rand_below(u, (uint64_t)c.st->nproducts);
        bool dup = false;
        for (int i = 0; i < c.n; i++)
            dup |= c.products[i] == p;
        if (!dup)
            c.products[c.n++] = p;
    }
    int rc = sim_create(u->db, &c, err);
    if (rc == 0)
        rc = pt_user_parallel(u, c.n, sim_add, &c, err);
    if (rc == 0)
        rc = sim_checkout(u, &c, err);
    return rc;
}

int64_t pt_cart_scenario_refused(void *state)
{
    pt_cart_scenario_state *st = state;
    return st ? atomic_load(&st->refused) : 0;
}
