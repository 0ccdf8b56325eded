/*
 * cart_common.h -- what the two shopping-cart patterns (5.5 with product
 * reservation, cart_reservation.c; 5.6 without, cart_no_reservation.c)
 * share, private to patterns/: the collection names, the write counter
 * behind the failure points, single statements both chapters write the
 * same way (add to cart, release a reservation, finish a checkout), and
 * the scenario scaffolding (setup here; the simulator's 5-item checkout
 * user in cart_sim.c).
 *
 * The public side (expiry, recovery, invariants, seeding) is declared in
 * patterns.h under 5.5.
 */
#ifndef CART_COMMON_H
#define CART_COMMON_H

#include <stdatomic.h>

#include "patterns.h"

#define CART_CARTS "carts"
#define CART_INVENTORIES "inventories"
#define CART_PRODUCTS "products"
#define CART_ORDERS "orders"

/* Writes done so far by one call, and where it is to stop (a dead client). */
typedef struct pt_cart_steps {
    int done;
    int crash_after; /* 0: never */
} pt_cart_steps;

void pt_cart_steps_init(pt_cart_steps *s, const pt_cart_opts *o);
/* Count one write; true when the call must stop here (crash_after hit). */
bool pt_cart_step(pt_cart_steps *s);

/* update/updateMany (CART_MULTI), with {upsert: true} (CART_UPSERT);
 * *matched (may be NULL; 0 on an error) gets matched + upserted, or with
 * CART_MODIFIED the reply's modifiedCount (the simulator's test of a
 * write, cart_sim.c). */
#define CART_UPSERT 1
#define CART_MULTI 2
#define CART_MODIFIED 4
int pt_cart_update(md_db *db, const char *coll, const bson_t *q, const bson_t *u, int flags,
                   int64_t *matched, md_error *err);

/* The reservation of `quantity` of `product` for `cart` (Ex 2 of 5.5, Ex 3
 * of 5.6, the simulator's Inventory.reserve): take the quantity if the
 * inventory still has it and push {quantity, _id: cart, <created>: now}
 * onto its reservations.  `created` is the timestamp's field: the book
 * writes createdOn, the simulator created_on.  flags and *n as for
 * pt_cart_update (0 in *n: not enough stock). */
int pt_cart_reserve(md_db *db, const bson_oid_t *cart, int64_t product, int32_t quantity,
                    const char *created, int flags, int64_t *n, md_error *err);

/* A cart's product lines, read from a cart document. */
typedef struct pt_cart_line {
    int64_t product;
    int32_t quantity;
} pt_cart_line;
/* The lines of `cart` (its "products" array) into a new array *lines
 * (caller frees with bson_free), count in *n.  MD_ECORRUPT if malformed. */
int pt_cart_lines(const bson_t *cart, pt_cart_line **lines, int *n, md_error *err);

/*
 * Ex 1 of both chapters: the upsert that adds a line to the active cart
 * (creating it).  MD_EEXISTS: the product is already in the cart;
 * MD_NOTFOUND: the cart exists but is no longer active.
 */
int pt_cart_add_line(md_db *db, const bson_oid_t *cart, const pt_cart_item *item, pt_cart_steps *s,
                     md_error *err);

/*
 * Give back a reservation of `cart` on `product` holding `quantity` (the
 * expiry statement of 5.5 Ex 7, corrected): $inc quantity, $pull the
 * reservation, only if that very reservation is still there.  *released
 * (may be NULL) tells whether it was.
 */
int pt_cart_release(md_db *db, int64_t product, const bson_oid_t *cart, int32_t quantity,
                    pt_cart_steps *s, bool *released, md_error *err);

/*
 * The end of a checkout once the cart is marked completed (5.5 Ex 8, 5.6
 * Ex 5): insert the order (its _id the cart's, so doing it twice is
 * harmless) and pull the cart's reservations from every inventory (multi).
 * `cart` is the cart document; `recovered` leaves shipping and payment
 * empty (the recovery job does not know them).
 */
int pt_cart_finish_checkout(md_db *db, const bson_t *cart, bool recovered, pt_cart_steps *s,
                            md_error *err);

/* ---- the scenario (both chapters) ----------------------------------- */

/* The scenario's shared state: the stock every product started with, and
 * the adds the simulator's code would have called failed (cart_sim.c). */
typedef struct pt_cart_scenario_state {
    int64_t nproducts;
    int64_t *initial;
    atomic_llong refused;
} pt_cart_scenario_state;

/* Drop the four collections, create the book's indexes, seed the
 * products (1024-byte properties, as the simulator) and inventories. */
int pt_cart_scenario_setup(md_db *db, const pt_setup_args *a, void **state, md_error *err);
void pt_cart_scenario_destroy(void *state);

/* One simulated user, as the simulator's Cart classes ran it (cart_sim.c):
 * create the cart, add 5 distinct random products at once (quantity 1),
 * check out; 5.5's classes with `reserving`, else 5.6's.  0, or the
 * first error (a failed checkout is one; a failed add is counted). */
int pt_cart_scenario_user(pt_user *u, bool reserving, md_error *err);

#define CART_SCENARIO_ITEMS 5
#define CART_SCENARIO_PRODUCTS 1000
#define CART_SCENARIO_STOCK 1000000
#define CART_SCENARIO_PRODUCT_BYTES 1024

#endif /* CART_COMMON_H */
