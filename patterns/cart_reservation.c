/*
 * cart_reservation.c -- 5.5 Shopping Cart with Product Reservation: the
 * stock a shopper puts in the cart is taken from the inventory at once and
 * held as a reservation ({_id: cart, quantity, createdOn} in the
 * inventory's reservations array) until checkout sells it or the expiry
 * job gives it back.  Double bookkeeping: the cart's line and the
 * inventory's reservation say the same thing.
 *
 * The book's statements, in the order they run (collections in
 * cart_common.h; the background job, the check and the seeding are in
 * cart_common.c, shared with 5.6):
 *
 *   add        Ex 1  carts: upsert, $set modifiedOn, $push the line
 *              Ex 2  inventories: {_id, quantity: {$gte: n}}
 *                    $inc quantity -n, $push the reservation
 *              Ex 3  (Ex 2 matched nothing) carts: $pull the line
 *   update     Ex 4  carts.findOne, then $set "products.$.quantity"
 *              Ex 5  inventories: $inc quantity -delta,
 *                    $set "reservations.$.quantity"
 *              Ex 6  (Ex 5 matched nothing) carts: the old quantity back
 *   remove     (the simulator's) give the reservation back, $pull the line
 *   checkout   Ex 8  mark completed, insert the order, $pull reservations
 *
 * Two reads are added so that a live client and the expiry job may run at
 * any interleaving (cart_common.c's header has the argument): after add's
 * reservation, the cart must still be active, else the client gives its
 * reservation back itself (the expiry's sweep may have run before it).
 * update needs none: its Ex 5 matches only a reservation that is still
 * there.  Conditions "state: 'active'" everywhere the book writes
 * "status" (erratum), success judged by the matched count (the book's
 * nModified is 0 for an update that matched but changed nothing).
 *
 * The scenario "cart_reservation" is the simulator's
 * cart_5_item_reservation_successful_scenario.js with the simulator's own
 * Cart classes (cart_sim.c): each user creates its cart, adds 5 products
 * (quantity 1) at once and checks out; timed as one.  The statements
 * above, with their guard and extra read, are the library's and its
 * tests'; the scenario runs the simulator's.
 */
#include <string.h>

#include "cart_common.h"

/* Is the cart still active?  0 yes, MD_NOTFOUND no. */
static int still_active(md_db *db, const bson_oid_t *cart, md_error *err)
{
    bson_t doc;
    bson_t *q = BCON_NEW("_id", BCON_OID(cart), "state", BCON_UTF8("active"));
    bson_t *proj = BCON_NEW("_id", BCON_INT32(1));
    int rc = pt_find_one(db, CART_CARTS, q, proj, &doc, err);
    bson_destroy(q);
    bson_destroy(proj);
    bson_destroy(&doc);
    return rc;
}

#define STEP(s)                                                                   \
    do {                                                                          \
        if (pt_cart_step(s))                                                      \
            return PT_CART_CRASHED;                                               \
    } while (0)

int pt_cart_res_add(md_db *db, const bson_oid_t *cart, const pt_cart_item *item,
                    const pt_cart_opts *o, md_error *err)
{
    pt_cart_steps s;
    int64_t matched = 0;
    pt_cart_steps_init(&s, o);
    if (item->quantity <= 0)
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE, "quantity must be positive");
    int rc = pt_cart_add_line(db, cart, item, &s, err);
    if (rc != 0)
        return rc;
    rc = pt_cart_reserve(db, cart, item->product, item->quantity, "createdOn", 0, &matched,
                         err); /* Ex 2 */
    if (rc != 0)
        return rc;
    STEP(&s);
    if (matched == 0) {
        /* Ex 3: not enough stock, take the line out again. */
        bson_t *q = BCON_NEW("_id", BCON_OID(cart));
        bson_t *u = BCON_NEW("$set", "{", "modifiedOn", BCON_DATE_TIME(pt_now_ms()), "}",
                             "$pull", "{", "products", "{", "_id", BCON_INT64(item->product),
                             "}", "}");
        rc = pt_cart_update(db, CART_CARTS, q, u, 0, NULL, err);
        bson_destroy(q);
        bson_destroy(u);
        if (rc != 0)
            return rc;
        STEP(&s);
        return md_error_set(err, MD_NOTFOUND, MD_CODE_OK, "not enough of product %lld in stock",
                            (long long)item->product);
    }
    rc = still_active(db, cart, err);
    if (rc == MD_NOTFOUND) {
        rc = pt_cart_release(db, item->product, cart, item->quantity, &s, NULL, err);
        if (rc != 0)
            return rc;
        return md_error_set(err, MD_NOTFOUND, MD_CODE_OK, "the cart expired meanwhile");
    }
    return rc;
}

/* The quantity of `product` in the cart the filter q finds (an active
 * cart holding that product), 0 if absent; MD_NOTFOUND if q finds none. */
static int res_line_quantity(md_db *db, const bson_t *q, int64_t product, int32_t *quantity,
                             md_error *err)
{
    bson_t doc;
    pt_cart_line *lines = NULL;
    int nl = 0;
    int rc = pt_find_one(db, CART_CARTS, q, NULL, &doc, err);
    if (rc == 0)
        rc = pt_cart_lines(&doc, &lines, &nl, err);
    bson_destroy(&doc);
    *quantity = 0;
    for (int i = 0; i < nl; i++)
        if (lines[i].product == product)
            *quantity = lines[i].quantity;
    bson_free(lines);
    return rc;
}

/*
 * Ex 4-6.  Ex 4 reads the cart by {_id, "products._id", state} (the book:
 * `db.findOne` and `status`, errata).  Ex 5 is written against
 * `inventories` (the book: `products`) without its stray comma, and names
 * the reservation by $elemMatch {_id: cart, quantity: old} instead of
 * "reservations._id": the positional $ then points at that element, and
 * the $inc by delta is right only if the reservation still holds the old
 * quantity.
 */
int pt_cart_res_update(md_db *db, const bson_oid_t *cart, int64_t product, int32_t quantity,
                       const pt_cart_opts *o, md_error *err)
{
    pt_cart_steps s;
    pt_cart_steps_init(&s, o);
    if (quantity <= 0)
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                            "quantity must be positive (remove the product instead)");
    bson_t *q = BCON_NEW("_id", BCON_OID(cart), "products._id", BCON_INT64(product), "state",
                         BCON_UTF8("active"));
    int32_t old;
    int rc = res_line_quantity(db, q, product, &old, err);
    if (rc != 0) {
        bson_destroy(q);
        if (rc == MD_NOTFOUND)
            md_error_set(err, MD_NOTFOUND, MD_CODE_OK, "no product %lld in an active cart",
                         (long long)product);
        return rc;
    }
    int32_t delta = quantity - old;
    int64_t matched = 0;
    bool stop;
    bson_t *u = BCON_NEW("$set", "{", "modifiedOn", BCON_DATE_TIME(pt_now_ms()),
                         "products.$.quantity", BCON_INT32(quantity), "}");
    rc = pt_cart_update(db, CART_CARTS, q, u, 0, &matched, err);
    bson_destroy(u);
    stop = rc == 0 && pt_cart_step(&s);
    if (rc != 0 || stop || matched == 0) {
        bson_destroy(q);
        if (rc != 0 || stop)
            return rc != 0 ? rc : PT_CART_CRASHED;
        return md_error_set(err, MD_NOTFOUND, MD_CODE_OK, "the cart expired meanwhile");
    }
    bson_t *iq = BCON_NEW("_id", BCON_INT64(product), "reservations", "{", "$elemMatch", "{",
                          "_id", BCON_OID(cart), "quantity", BCON_INT32(old), "}", "}",
                          "quantity", "{", "$gte", BCON_INT32(delta), "}");
    bson_t *iu = BCON_NEW("$inc", "{", "quantity", BCON_INT32(-delta), "}", "$set", "{",
                          "reservations.$.quantity", BCON_INT32(quantity), "modifiedOn",
                          BCON_DATE_TIME(pt_now_ms()), "}");
    rc = pt_cart_update(db, CART_INVENTORIES, iq, iu, 0, &matched, err);
    bson_destroy(iq);
    bson_destroy(iu);
    stop = rc == 0 && pt_cart_step(&s);
    if (rc != 0 || stop || matched > 0) {
        bson_destroy(q);
        return rc != 0 ? rc : stop ? PT_CART_CRASHED : 0;
    }
    /* Ex 6: not enough stock (or the reservation is gone): old quantity back. */
    u = BCON_NEW("$set", "{", "modifiedOn", BCON_DATE_TIME(pt_now_ms()), "products.$.quantity",
                 BCON_INT32(old), "}");
    rc = pt_cart_update(db, CART_CARTS, q, u, 0, NULL, err);
    bson_destroy(u);
    bson_destroy(q);
    if (rc != 0)
        return rc;
    STEP(&s);
    return md_error_set(err, MD_NOTFOUND, MD_CODE_OK, "not enough of product %lld in stock",
                        (long long)product);
}

/*
 * Remove a product (not in the book's text; the simulator's Cart.remove):
 * give the reservation back (the expiry's statement), then
 *   carts.update({_id, "products._id": product, state: 'active'},
 *                {$set: {modifiedOn}, $pull: {products: {_id: product}}})
 * In this order a stop between the two leaves a line without a
 * reservation, which expiry handles; the other order would leave a
 * reservation no cart line mentions.
 */
int pt_cart_res_remove(md_db *db, const bson_oid_t *cart, int64_t product, const pt_cart_opts *o,
                       md_error *err)
{
    pt_cart_steps s;
    pt_cart_steps_init(&s, o);
    bson_t *q = BCON_NEW("_id", BCON_OID(cart), "products._id", BCON_INT64(product), "state",
                         BCON_UTF8("active"));
    int32_t quantity;
    int rc = res_line_quantity(db, q, product, &quantity, err);
    if (rc == 0)
        rc = pt_cart_release(db, product, cart, quantity, &s, NULL, err);
    if (rc == 0) {
        int64_t matched = 0;
        bson_t *u = BCON_NEW("$set", "{", "modifiedOn", BCON_DATE_TIME(pt_now_ms()), "}",
                             "$pull", "{", "products", "{", "_id", BCON_INT64(product), "}",
                             "}");
        rc = pt_cart_update(db, CART_CARTS, q, u, 0, &matched, err);
        bson_destroy(u);
        if (rc == 0 && pt_cart_step(&s))
            rc = PT_CART_CRASHED;
        else if (rc == 0 && matched == 0)
            rc = MD_NOTFOUND;
    }
    bson_destroy(q);
    if (rc == MD_NOTFOUND)
        md_error_set(err, MD_NOTFOUND, MD_CODE_OK, "no product %lld in an active cart",
                     (long long)product);
    return rc;
}

/*
 * Ex 8, reordered and corrected:
 *   cart = carts.findOne({_id, state: 'active'})
 *   carts.update({_id, state: 'active'}, {$set: {state: 'completed'}})
 *   orders.insert({... products: cart.products})
 *   inventories.update({"reservations._id": cart}, {$pull: ...}, false, true)
 * The book inserts the order first and writes `{ { _id: userId } }` and
 * `status: 'complete'` (errata: syntax, status vs state; 'completed' as in
 * 5.6 Ex 5 and the simulator).  Marking first is what keeps the expiry job
 * from returning stock this checkout sells.  An empty cart is refused.
 */
int pt_cart_res_checkout(md_db *db, const bson_oid_t *cart, const pt_cart_opts *o, md_error *err)
{
    pt_cart_steps s;
    pt_cart_steps_init(&s, o);
    bson_t doc;
    bson_t *q = BCON_NEW("_id", BCON_OID(cart), "state", BCON_UTF8("active"));
    int rc = pt_find_one(db, CART_CARTS, q, NULL, &doc, err);
    pt_cart_line *lines = NULL;
    int nl = 0;
    if (rc == 0)
        rc = pt_cart_lines(&doc, &lines, &nl, err);
    bson_free(lines);
    if (rc == 0 && nl == 0)
        rc = md_error_set(err, MD_NOTFOUND, MD_CODE_OK, "the cart is empty");
    else if (rc == MD_NOTFOUND)
        md_error_set(err, MD_NOTFOUND, MD_CODE_OK, "no active cart");
    if (rc == 0) {
        int64_t matched = 0;
        bson_t *u = BCON_NEW("$set", "{", "state", BCON_UTF8("completed"), "}");
        rc = pt_cart_update(db, CART_CARTS, q, u, 0, &matched, err);
        bson_destroy(u);
        if (rc == 0 && pt_cart_step(&s))
            rc = PT_CART_CRASHED;
        else if (rc == 0 && matched == 0)
            rc = md_error_set(err, MD_NOTFOUND, MD_CODE_OK, "the cart expired meanwhile");
        else if (rc == 0)
            rc = pt_cart_finish_checkout(db, &doc, false, &s, err);
    }
    bson_destroy(&doc);
    bson_destroy(q);
    return rc;
}

/* ---- the scenario ------------------------------------------------------------ */

static int user_checkout(pt_user *u, md_error *err)
{
    return pt_cart_scenario_user(u, true, err);
}

static int check(md_db *db, void *state, md_error *err)
{
    pt_cart_scenario_state *st = state;
    pt_cart_totals t;
    int rc = pt_cart_check(db, st->nproducts, st->initial, true, &t, err);
    if (rc == 0 && t.active != 0)
        rc = md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE,
                          "%lld carts still active after every user checked out",
                          (long long)t.active);
    return rc;
}

static const pt_scenario scenario = {
    .name = "cart_reservation",
    .title = "successfully checkout cart",
    .script = "cart_reservation/cart_5_item_reservation_successful_scenario.js",
    .note = "As the simulator's own Cart class ran it (carts_reservations.js): each user "
            "creates its cart with an upsert, then issues its 5 adds at once, on other "
            "clients of the pool; each add reads the product, pushes the line into the cart "
            "(an upsert on {_id, state: 'active'}, no guard against a second line) and "
            "reserves one unit in the inventory ({quantity: {$gte: 1}}, $inc and $push; the "
            "line pulled again if that modified nothing). Once all 5 are back it checks out: "
            "it reads the cart, inserts the order, marks the cart completed and pulls the "
            "cart's reservations from every inventory (updateMany). The 5 pushes meet on one "
            "cart document: write conflicts, retried, on btree; the collection lock on "
            "mmapv1. A cart's products are distinct and the order's _id is the cart's. The "
            "chapter's statements (a $ne guard on the push, a read after each reservation, "
            "the cart marked before the order is inserted) are in the library and its tests.",
    .nops = 1,
    .ops = {{
        .name = "cart_reservation_successful",
        .users = 1000,
        .decides = true,
        .run = user_checkout,
        .book_mmap = {88.241, 46416.268, 21937.134, 62873.337, 67818.018, 70497.126, 20.034,
                      74220.014},
        .book_wt = {108.916, 63597.036, 27672.244, 83614.989, 87405.772, 89546.218, 41.414,
                    93681.381},
    }},
    .setup = pt_cart_scenario_setup,
    .check = check,
    .destroy = pt_cart_scenario_destroy,
};

const pt_pattern pt_pattern_cart_reservation = {
    .name = "cart_reservation",
    .title = "Shopping Cart with Product Reservation",
    .section = "5.5",
    .book_winner = "mmapv1",
    .book_reason = "\"This is an update heavy schema and this impacts WiredTiger more than "
                   "MMAP due to a lack of in place updates in WiredTiger.\" Both engines "
                   "overloaded (runtime above the 25 s of load).",
    .nscenarios = 1,
    .scenarios = {&scenario},
};
