/*
 * cart_no_reservation.c -- 5.6 Shopping Cart with No Product Reservation
 * ("Amazon style"): adding to the cart touches only the cart; the stock is
 * checked and taken at checkout, every line or none.
 *
 * The book's statements (collections, the background job, the check and
 * the seeding are 5.5's, in cart_common.c):
 *
 *   add        Ex 1  carts: upsert, $set modifiedOn, $push the line
 *   update     Ex 2  carts: {_id, "products._id", state: 'active'}
 *                    $set modifiedOn, "products.$.quantity"
 *   remove     (the simulator's) carts: $pull the line
 *   checkout   Ex 3  for each line, inventories: {_id, quantity: {$gte: n}}
 *                    $inc quantity -n, $push a reservation for the cart
 *              Ex 4  one failed: give back each that succeeded, stop
 *              Ex 5  mark the cart completed, insert the order, $pull
 *                    the cart's reservations from every inventory (multi)
 *   cleanup    Ex 6  the 5.5 expiry job (pt_cart_cleanup)
 *
 * Errata followed (digest 7.4): Ex 2's extra '}' and its upsert (an upsert
 * with "products.$.quantity" can only fail: the positional operator finds
 * no match in an inserted document), Ex 3's carts.find is findOne.  As in
 * 5.5, Ex 5's mark comes before the order (cart_common.c explains why),
 * and a checkout whose mark finds the cart expired (the expiry job took it
 * while the lines were being reserved) gives its reservations back itself.
 *
 * The scenario "cart_no_reservation" is the simulator's
 * cart_5_item_no_reservation_successful_scenario.js with the simulator's
 * own Cart classes (cart_sim.c): each user creates its cart, adds 5
 * products (quantity 1) at once and checks out, reserving the 5 lines at
 * once; timed as one.  The statements above are the library's and its
 * tests'; the scenario runs the simulator's.
 */
#include <string.h>

#include "cart_common.h"

int pt_cart_nores_add(md_db *db, const bson_oid_t *cart, const pt_cart_item *item,
                      const pt_cart_opts *o, md_error *err)
{
    pt_cart_steps s;
    pt_cart_steps_init(&s, o);
    if (item->quantity <= 0)
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE, "quantity must be positive");
    return pt_cart_add_line(db, cart, item, &s, err);
}

/* Ex 2 (corrected) or, with `pull`, the simulator's remove. */
static int change_line(md_db *db, const bson_oid_t *cart, int64_t product, int32_t quantity,
                       bool pull, const pt_cart_opts *o, md_error *err)
{
    pt_cart_steps s;
    pt_cart_steps_init(&s, o);
    int64_t matched = 0;
    bson_t *q = BCON_NEW("_id", BCON_OID(cart), "products._id", BCON_INT64(product), "state",
                         BCON_UTF8("active"));
    bson_t *u = pull ? BCON_NEW("$set", "{", "modifiedOn", BCON_DATE_TIME(pt_now_ms()), "}",
                                "$pull", "{", "products", "{", "_id", BCON_INT64(product), "}",
                                "}")
                     : BCON_NEW("$set", "{", "modifiedOn", BCON_DATE_TIME(pt_now_ms()),
                                "products.$.quantity", BCON_INT32(quantity), "}");
    int rc = pt_cart_update(db, CART_CARTS, q, u, 0, &matched, err);
    bson_destroy(q);
    bson_destroy(u);
    if (rc != 0)
        return rc;
    if (pt_cart_step(&s))
        return PT_CART_CRASHED;
    if (matched == 0)
        return md_error_set(err, MD_NOTFOUND, MD_CODE_OK, "no product %lld in an active cart",
                            (long long)product);
    return 0;
}

int pt_cart_nores_update(md_db *db, const bson_oid_t *cart, int64_t product, int32_t quantity,
                         const pt_cart_opts *o, md_error *err)
{
    if (quantity <= 0)
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                            "quantity must be positive (remove the product instead)");
    return change_line(db, cart, product, quantity, false, o, err);
}

int pt_cart_nores_remove(md_db *db, const bson_oid_t *cart, int64_t product, const pt_cart_opts *o,
                         md_error *err)
{
    return change_line(db, cart, product, 0, true, o, err);
}

/* Ex 4, for the lines reserved[0..n):
 *   inventories.update({_id: product, "reservations._id": cart},
 *                      {$inc: {quantity: q}, $pull: {reservations: {_id: cart}}}) */
static int give_back(md_db *db, const bson_oid_t *cart, const pt_cart_line *reserved, int n,
                     pt_cart_steps *s, md_error *err)
{
    for (int i = 0; i < n; i++) {
        bson_t *q = BCON_NEW("_id", BCON_INT64(reserved[i].product), "reservations._id",
                             BCON_OID(cart));
        bson_t *u = BCON_NEW("$inc", "{", "quantity", BCON_INT32(reserved[i].quantity), "}",
                             "$pull", "{", "reservations", "{", "_id", BCON_OID(cart), "}", "}");
        int rc = pt_cart_update(db, CART_INVENTORIES, q, u, 0, NULL, err);
        bson_destroy(q);
        bson_destroy(u);
        if (rc != 0)
            return rc;
        if (pt_cart_step(s))
            return PT_CART_CRASHED;
    }
    return 0;
}

/* Ex 3: reserve every line; the ones that succeeded are moved to the front
 * of lines[] and counted in *nok; *failed tells whether one did not. */
static int reserve_all(md_db *db, const bson_oid_t *cart, pt_cart_line *lines, int n, int *nok,
                       bool *failed, pt_cart_steps *s, md_error *err)
{
    *nok = 0;
    *failed = false;
    for (int i = 0; i < n; i++) {
        int64_t matched = 0;
        int rc = pt_cart_reserve(db, cart, lines[i].product, lines[i].quantity, "createdOn", 0,
                                 &matched, err);
        if (rc != 0)
            return rc;
        if (matched > 0)
            lines[(*nok)++] = lines[i];
        else
            *failed = true;
        if (pt_cart_step(s))
            return PT_CART_CRASHED;
    }
    return 0;
}

int pt_cart_nores_checkout(md_db *db, const bson_oid_t *cart, const pt_cart_opts *o, md_error *err)
{
    pt_cart_steps s;
    pt_cart_steps_init(&s, o);
    bson_t doc;
    bson_t *q = BCON_NEW("_id", BCON_OID(cart), "state", BCON_UTF8("active"));
    pt_cart_line *lines = NULL;
    int nl = 0, nok = 0;
    bool failed = false;
    int rc = pt_find_one(db, CART_CARTS, q, NULL, &doc, err);
    if (rc == 0)
        rc = pt_cart_lines(&doc, &lines, &nl, err);
    if (rc == 0 && nl == 0)
        rc = md_error_set(err, MD_NOTFOUND, MD_CODE_OK, "the cart is empty");
    else if (rc == MD_NOTFOUND)
        md_error_set(err, MD_NOTFOUND, MD_CODE_OK, "no active cart");
    if (rc == 0)
        rc = reserve_all(db, cart, lines, nl, &nok, &failed, &s, err);
    if (rc == 0 && failed) {
        rc = give_back(db, cart, lines, nok, &s, err);
        if (rc == 0)
            rc = md_error_set(err, MD_NOTFOUND, MD_CODE_OK, "not enough stock for the cart");
    } else if (rc == 0) {
        int64_t matched = 0;
        bson_t *u = BCON_NEW("$set", "{", "state", BCON_UTF8("completed"), "}");
        rc = pt_cart_update(db, CART_CARTS, q, u, 0, &matched, err);
        bson_destroy(u);
        if (rc == 0 && pt_cart_step(&s)) {
            rc = PT_CART_CRASHED;
        } else if (rc == 0 && matched == 0) {
            rc = give_back(db, cart, lines, nok, &s, err);
            if (rc == 0)
                rc = md_error_set(err, MD_NOTFOUND, MD_CODE_OK, "the cart expired meanwhile");
        } else if (rc == 0) {
            rc = pt_cart_finish_checkout(db, &doc, false, &s, err);
        }
    }
    bson_free(lines);
    bson_destroy(&doc);
    bson_destroy(q);
    return rc;
}

/* ---- the scenario ------------------------------------------------------------ */

static int user_checkout(pt_user *u, md_error *err)
{
    return pt_cart_scenario_user(u, false, err);
}

static int check(md_db *db, void *state, md_error *err)
{
    pt_cart_scenario_state *st = state;
    pt_cart_totals t;
    int rc = pt_cart_check(db, st->nproducts, st->initial, false, &t, err);
    if (rc == 0 && t.reservations != 0)
        rc = md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE,
                          "%lld reservations left after every checkout finished",
                          (long long)t.reservations);
    return rc;
}

static const pt_scenario scenario = {
    .name = "cart_no_reservation",
    .title = "successfully checkout cart",
    .script = "cart_no_reservation/cart_5_item_no_reservation_successful_scenario.js",
    .note = "As the simulator's own Cart class ran it (carts_no_reservation.js): each user "
            "creates its cart with an upsert, then issues its 5 adds at once, on other "
            "clients of the pool; each add reads the product and pushes the line into the "
            "cart (an upsert on {_id, state: 'active'}, no guard against a second line). "
            "Once all 5 are back it checks out: it reads the cart, reserves every line at "
            "once ({quantity: {$gte: q}}, $inc and $push; had one failed, the others would "
            "be given back at once and the checkout fail), inserts the order, marks the cart "
            "completed and pulls the cart's reservations from every inventory (updateMany). "
            "The 5 pushes meet on one cart document: write conflicts, retried, on btree; the "
            "collection lock on mmapv1. A cart's products are distinct and the order's _id "
            "is the cart's. The chapter's statements (a $ne guard on the push, the lines "
            "reserved one after another, the cart marked before the order is inserted) are "
            "in the library and its tests.",
    .nops = 1,
    .ops = {{
        .name = "cart_no_reservation_successful",
        .users = 1000,
        .decides = true,
        .run = user_checkout,
        .book_mmap = {61.878, 23696.635, 12515.697, 35072.337, 38497.619, 40150.439, 21.637,
                      43277.439},
        .book_wt = {62.607, 26075.901, 12410.047, 36122.769, 39481.372, 41308.47, 20.228,
                    44646.7},
    }},
    .setup = pt_cart_scenario_setup,
    .check = check,
    .destroy = pt_cart_scenario_destroy,
};

const pt_pattern pt_pattern_cart_no_reservation = {
    .name = "cart_no_reservation",
    .title = "Shopping Cart with No Product Reservation",
    .section = "5.6",
    .book_winner = "mmapv1",
    .book_reason = "\"This is an update heavy schema and this impacts WiredTiger more than "
                   "MMAP due to the need to rewrite the document on each update in "
                   "WiredTiger.\" (MMAP slightly ahead; both overloaded.)",
    .nscenarios = 1,
    .scenarios = {&scenario},
};
