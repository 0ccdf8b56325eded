/*
 * cart_common.c -- what the two shopping-cart chapters (5.5, 5.6) share:
 * the add-to-cart upsert, the reservation release, the end of a checkout,
 * the background job that expires carts and finishes what dead clients
 * left (5.5 Ex 7; 5.6 Ex 6 is "identical"), the invariant check, seeding,
 * and the scenarios' setup (their user is the simulator's, cart_sim.c).
 *
 * Why the job is safe beside live clients (the book's is not):
 *
 *   1. The cart's state is the lock.  Expiry first marks a stale cart
 *      expired ({_id, state: 'active', modifiedOn <= cutoff}), and only
 *      the caller whose conditional update matched goes on to give the
 *      stock back.  The book gives the stock back first and then sets the
 *      state, so a checkout running between the two would sell stock that
 *      was also returned.  Checkout marks completed the same way (first).
 *   2. Every give-back is conditional on the very reservation it returns
 *      ($elemMatch {_id: cart, quantity: q}, with $pull in the same
 *      update), so two cleaners, or a cleaner and the owner's rollback,
 *      never return one reservation twice.  The book's filter
 *      {"reservations._id": c, "reservations.quantity": q} may match q on
 *      another cart's reservation and return the wrong amount.
 *   3. After marking, expiry sweeps inventories by {"reservations._id":
 *      cart} (the Ex 10 index) and releases what it finds at its own
 *      recorded quantity, so a line whose cart and reservation disagree
 *      (a client that died between the two writes) is still returned.
 *      An owner that reserved after that sweep finds its cart no longer
 *      active afterwards and returns its own reservation (see
 *      cart_reservation.c and cart_no_reservation.c).
 *   4. A completed cart is rolled forward, never back: the order has the
 *      cart's _id, so inserting it again is a duplicate key, not a second
 *      sale, and the reservations are pulled (multi) as the book does.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cart_common.h"

/* ---- small helpers -------------------------------------------------------- */

void pt_cart_steps_init(pt_cart_steps *s, const pt_cart_opts *o)
{
    s->done = 0;
    s->crash_after = o && o->crash_after > 0 ? o->crash_after : 0;
}

bool pt_cart_step(pt_cart_steps *s)
{
    s->done++;
    return s->crash_after > 0 && s->done >= s->crash_after;
}

int pt_cart_update(md_db *db, const char *coll, const bson_t *q, const bson_t *u, int flags,
                   int64_t *matched, md_error *err)
{
    md_collection *c = md_db_get_collection(db, coll);
    bson_t reply, *opts = (flags & CART_UPSERT) ? BCON_NEW("upsert", BCON_BOOL(true)) : NULL;
    int rc = (flags & CART_MULTI) ? md_collection_update_many(c, q, u, opts, &reply, err)
                                  : md_collection_update_one(c, q, u, opts, &reply, err);
    if (matched) {
        bson_iter_t it;
        *matched = 0;
        if (rc == 0 && (flags & CART_MODIFIED)) {
            if (bson_iter_init_find(&it, &reply, "modifiedCount"))
                *matched = bson_iter_as_int64(&it);
        } else if (rc == 0) {
            if (bson_iter_init_find(&it, &reply, "matchedCount"))
                *matched += bson_iter_as_int64(&it);
            if (bson_iter_init_find(&it, &reply, "upsertedCount"))
                *matched += bson_iter_as_int64(&it);
        }
    }
    bson_destroy(&reply);
    if (opts)
        bson_destroy(opts);
    md_collection_destroy(c);
    return rc;
}

int pt_cart_reserve(md_db *db, const bson_oid_t *cart, int64_t product, int32_t quantity,
                    const char *created, int flags, int64_t *n, md_error *err)
{
    bson_t *q = BCON_NEW("_id", BCON_INT64(product), "quantity", "{", "$gte",
                         BCON_INT32(quantity), "}");
    bson_t *u = BCON_NEW("$inc", "{", "quantity", BCON_INT32(-quantity), "}", "$push", "{",
                         "reservations", "{", "quantity", BCON_INT32(quantity), "_id",
                         BCON_OID(cart), created, BCON_DATE_TIME(pt_now_ms()), "}", "}");
    int rc = pt_cart_update(db, CART_INVENTORIES, q, u, flags, n, err);
    bson_destroy(q);
    bson_destroy(u);
    return rc;
}

static int64_t iter_i64(const bson_iter_t *it)
{
    return BSON_ITER_HOLDS_NUMBER(it) ? bson_iter_as_int64(it) : INT64_MIN;
}

int pt_cart_lines(const bson_t *cart, pt_cart_line **lines, int *n, md_error *err)
{
    bson_iter_t it, arr;
    *lines = NULL;
    *n = 0;
    if (!bson_iter_init_find(&it, cart, "products"))
        return 0;
    if (!BSON_ITER_HOLDS_ARRAY(&it) || !bson_iter_recurse(&it, &arr))
        return md_error_set(err, MD_ECORRUPT, MD_CODE_BAD_VALUE, "cart products is not an array");
    int cap = 8;
    *lines = bson_malloc(sizeof **lines * (size_t)cap);
    while (bson_iter_next(&arr)) {
        bson_iter_t f;
        pt_cart_line l = {INT64_MIN, 0};
        if (!BSON_ITER_HOLDS_DOCUMENT(&arr) || !bson_iter_recurse(&arr, &f))
            goto bad;
        while (bson_iter_next(&f)) {
            if (strcmp(bson_iter_key(&f), "_id") == 0)
                l.product = iter_i64(&f);
            else if (strcmp(bson_iter_key(&f), "quantity") == 0)
                l.quantity = (int32_t)iter_i64(&f);
        }
        if (l.product == INT64_MIN)
            goto bad;
        if (*n == cap) {
            cap *= 2;
            *lines = bson_realloc(*lines, sizeof **lines * (size_t)cap);
        }
        (*lines)[(*n)++] = l;
    }
    return 0;
bad:
    bson_free(*lines);
    *lines = NULL;
    *n = 0;
    return md_error_set(err, MD_ECORRUPT, MD_CODE_BAD_VALUE, "malformed cart line");
}

/* ---- statements both chapters write the same way -------------------------- */

/*
 * 5.5 Ex 1 / 5.6 Ex 1:
 *   carts.update({_id: cart, state: 'active'},
 *                {$set: {modifiedOn: new Date()},
 *                 $push: {products: {_id, quantity, name, price}}}, true)
 * with one condition added, "products._id": {$ne: product}: the book's
 * filter pushes a second line for a product already in the cart, and its
 * rollback ($pull by _id) and expiry ($pull by cart) then remove both
 * lines or both reservations while returning one quantity.  With the
 * guard a cart that has the line, or is no longer active, matches nothing
 * and the upsert's insert hits the cart's _id (a duplicate key); one read
 * tells which.
 */
int pt_cart_add_line(md_db *db, const bson_oid_t *cart, const pt_cart_item *item, pt_cart_steps *s,
                     md_error *err)
{
    bson_t *q = BCON_NEW("_id", BCON_OID(cart), "state", BCON_UTF8("active"), "products._id",
                         "{", "$ne", BCON_INT64(item->product), "}");
    bson_t *u = BCON_NEW("$set", "{", "modifiedOn", BCON_DATE_TIME(pt_now_ms()), "}", "$push",
                         "{", "products", "{", "_id", BCON_INT64(item->product), "quantity",
                         BCON_INT32(item->quantity), "name", BCON_UTF8(item->name), "price",
                         BCON_INT32(item->price), "}", "}");
    md_error e2;
    int rc = pt_cart_update(db, CART_CARTS, q, u, CART_UPSERT, NULL, &e2);
    bson_destroy(q);
    bson_destroy(u);
    if (rc == MD_EDUPKEY) {
        bson_t doc;
        bson_t *q2 = BCON_NEW("_id", BCON_OID(cart), "state", BCON_UTF8("active"));
        int frc = pt_find_one(db, CART_CARTS, q2, NULL, &doc, err);
        bson_destroy(q2);
        bson_destroy(&doc);
        if (frc == 0)
            return md_error_set(err, MD_EEXISTS, MD_CODE_DUPLICATE_KEY,
                                "product %lld is already in the cart",
                                (long long)item->product);
        if (frc != MD_NOTFOUND)
            return frc;
        return md_error_set(err, MD_NOTFOUND, MD_CODE_OK, "the cart is no longer active");
    }
    if (rc != 0) {
        if (err)
            *err = e2;
        return rc;
    }
    return pt_cart_step(s) ? PT_CART_CRASHED : 0;
}

/*
 * 5.5 Ex 7's give-back, corrected (digest errata 7.4: the book updates
 * `products`, the stock is in `inventories`; "reservations.quantity" is
 * matched inside $elemMatch so it is this cart's reservation's quantity):
 *   inventories.update({_id: product,
 *                       reservations: {$elemMatch: {_id: cart, quantity: q}}},
 *                      {$inc: {quantity: q}, $pull: {reservations: {_id: cart}}})
 */
int pt_cart_release(md_db *db, int64_t product, const bson_oid_t *cart, int32_t quantity,
                    pt_cart_steps *s, bool *released, md_error *err)
{
    int64_t n = 0;
    bson_t *q = BCON_NEW("_id", BCON_INT64(product), "reservations", "{", "$elemMatch", "{",
                         "_id", BCON_OID(cart), "quantity", BCON_INT32(quantity), "}", "}");
    bson_t *u = BCON_NEW("$inc", "{", "quantity", BCON_INT32(quantity), "}", "$pull", "{",
                         "reservations", "{", "_id", BCON_OID(cart), "}", "}");
    int rc = pt_cart_update(db, CART_INVENTORIES, q, u, 0, &n, err);
    bson_destroy(q);
    bson_destroy(u);
    if (released)
        *released = rc == 0 && n > 0;
    if (rc != 0)
        return rc;
    return pt_cart_step(s) ? PT_CART_CRASHED : 0;
}

/*
 * 5.5 Ex 8 / 5.6 Ex 5, after the cart was marked completed:
 *   orders.insert({created_on: new Date(), shipping: {...}, payment: {...},
 *                  products: cart.products})
 *   inventories.update({"reservations._id": cart._id},
 *                      {$pull: {reservations: {_id: cart._id}}}, false, true)
 * The order's _id is the cart's (the book's examples give every document
 * the same ObjectId; here it makes the insert idempotent, which the
 * recovery relies on).  5.5 Ex 8's `productCol` is `inventories`.
 */
int pt_cart_finish_checkout(md_db *db, const bson_t *cart, bool recovered, pt_cart_steps *s,
                            md_error *err)
{
    bson_iter_t it;
    const bson_oid_t *id;
    if (!bson_iter_init_find(&it, cart, "_id") || !BSON_ITER_HOLDS_OID(&it))
        return md_error_set(err, MD_ECORRUPT, MD_CODE_BAD_VALUE, "cart without an ObjectId");
    id = bson_iter_oid(&it);
    bson_t order = BSON_INITIALIZER, sub;
    BSON_APPEND_OID(&order, "_id", id);
    BSON_APPEND_DATE_TIME(&order, "created_on", pt_now_ms());
    BSON_APPEND_DOCUMENT_BEGIN(&order, "shipping", &sub);
    if (!recovered) {
        BSON_APPEND_UTF8(&sub, "name", "Joe Dow");
        BSON_APPEND_UTF8(&sub, "address", "Some street 1, NY 11223");
    }
    bson_append_document_end(&order, &sub);
    BSON_APPEND_DOCUMENT_BEGIN(&order, "payment", &sub);
    if (!recovered) {
        BSON_APPEND_UTF8(&sub, "method", "visa");
        BSON_APPEND_UTF8(&sub, "transaction_id", "2312213312XXXTD");
    }
    bson_append_document_end(&order, &sub);
    if (bson_iter_init_find(&it, cart, "products"))
        bson_append_iter(&order, "products", -1, &it);
    if (recovered)
        BSON_APPEND_BOOL(&order, "recovered", true);
    md_collection *orders = md_db_get_collection(db, CART_ORDERS);
    md_error e2;
    int rc = md_collection_insert_one(orders, &order, NULL, NULL, &e2);
    md_collection_destroy(orders);
    bson_destroy(&order);
    if (rc != 0 && rc != MD_EDUPKEY) {
        if (err)
            *err = e2;
        return rc;
    }
    if (pt_cart_step(s))
        return PT_CART_CRASHED;
    bson_t *q = BCON_NEW("reservations._id", BCON_OID(id));
    bson_t *u = BCON_NEW("$pull", "{", "reservations", "{", "_id", BCON_OID(id), "}", "}");
    rc = pt_cart_update(db, CART_INVENTORIES, q, u, CART_MULTI, NULL, err);
    bson_destroy(q);
    bson_destroy(u);
    if (rc != 0)
        return rc;
    return pt_cart_step(s) ? PT_CART_CRASHED : 0;
}

/* ---- indexes, seeding, products ------------------------------------------- */

static int create_index(md_db *db, const char *coll, const char *field, md_error *err)
{
    bson_t *keys = BCON_NEW(field, BCON_INT32(1));
    int rc = pt_ensure_index(db, coll, keys, NULL, err);
    bson_destroy(keys);
    return rc;
}

/* Ex 9 and Ex 10 (their getSisterDB("catalog") is the db "shop": erratum). */
int pt_cart_create_indexes(md_db *db, md_error *err)
{
    int rc = create_index(db, CART_CARTS, "state", err);
    if (rc == 0)
        rc = create_index(db, CART_INVENTORIES, "reservations._id", err);
    return rc;
}

int pt_cart_seed(md_db *db, int64_t n, const int64_t *stock, int product_bytes, md_error *err)
{
    enum { BATCH = 100 };
    md_collection *pc = md_db_get_collection(db, CART_PRODUCTS);
    md_collection *ic = md_db_get_collection(db, CART_INVENTORIES);
    uint8_t *bin = bson_malloc0(product_bytes > 0 ? (size_t)product_bytes : 1);
    bson_t prods[BATCH], invs[BATCH];
    const bson_t *pp[BATCH], *ip[BATCH];
    int rc = 0;
    for (int64_t base = 0; base < n && rc == 0; base += BATCH) {
        int k = 0;
        for (; k < BATCH && base + k < n; k++) {
            int64_t i = base + k;
            char name[64];
            snprintf(name, sizeof name, "product_%lld", (long long)i);
            bson_t props;
            bson_init(&prods[k]);
            BSON_APPEND_INT64(&prods[k], "_id", i);
            BSON_APPEND_UTF8(&prods[k], "name", name);
            BSON_APPEND_INT32(&prods[k], "price", (int32_t)(100 + i % 900));
            BSON_APPEND_DOCUMENT_BEGIN(&prods[k], "properties", &props);
            BSON_APPEND_BINARY(&props, "bin", BSON_SUBTYPE_BINARY, bin,
                               (uint32_t)(product_bytes > 0 ? product_bytes : 0));
            bson_append_document_end(&prods[k], &props);
            bson_t arr;
            bson_init(&invs[k]);
            BSON_APPEND_INT64(&invs[k], "_id", i);
            BSON_APPEND_INT32(&invs[k], "quantity", (int32_t)stock[i]);
            BSON_APPEND_ARRAY_BEGIN(&invs[k], "reservations", &arr);
            bson_append_array_end(&invs[k], &arr);
            pp[k] = &prods[k];
            ip[k] = &invs[k];
        }
        rc = md_collection_insert_many(pc, pp, (size_t)k, NULL, NULL, err);
        if (rc == 0)
            rc = md_collection_insert_many(ic, ip, (size_t)k, NULL, NULL, err);
        for (int j = 0; j < k; j++) {
            bson_destroy(&prods[j]);
            bson_destroy(&invs[j]);
        }
    }
    bson_free(bin);
    md_collection_destroy(pc);
    md_collection_destroy(ic);
    return rc;
}

int pt_cart_product(md_db *db, int64_t product, pt_cart_item *item, md_error *err)
{
    bson_t doc;
    bson_t *q = BCON_NEW("_id", BCON_INT64(product));
    int rc = pt_find_one(db, CART_PRODUCTS, q, NULL, &doc, err);
    bson_destroy(q);
    memset(item, 0, sizeof *item);
    item->product = product;
    if (rc == 0) {
        bson_iter_t it;
        if (bson_iter_init_find(&it, &doc, "name") && BSON_ITER_HOLDS_UTF8(&it))
            snprintf(item->name, sizeof item->name, "%s", bson_iter_utf8(&it, NULL));
        if (bson_iter_init_find(&it, &doc, "price") && BSON_ITER_HOLDS_NUMBER(&it))
            item->price = (int32_t)bson_iter_as_int64(&it);
    } else if (rc == MD_NOTFOUND) {
        md_error_set(err, MD_NOTFOUND, MD_CODE_OK, "no product %lld", (long long)product);
    }
    bson_destroy(&doc);
    return rc;
}

/* ---- the background job --------------------------------------------------- */

/* A reservation as found in an inventory document. */
typedef struct cart_resv {
    int64_t product;
    bson_oid_t cart;
    int32_t quantity;
    int64_t created;
} cart_resv;

typedef struct resv_vec {
    cart_resv *v;
    size_t n, cap;
} resv_vec;

static void resv_push(resv_vec *r, const cart_resv *x)
{
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 16;
        r->v = bson_realloc(r->v, r->cap * sizeof *r->v);
    }
    r->v[r->n++] = *x;
}

/* Every reservation of every inventory matching `q` into *out; with `cart`
 * only that cart's; with cutoff >= 0 only those created at or before it. */
static int scan_reservations(md_db *db, const bson_t *q, const bson_oid_t *cart,
                             int64_t cutoff, resv_vec *out, md_error *err)
{
    md_collection *c = md_db_get_collection(db, CART_INVENTORIES);
    md_cursor *cur = md_collection_find_with_opts(c, q, NULL);
    const bson_t *doc;
    int rc = 0;
    while (md_cursor_next(cur, &doc)) {
        bson_iter_t it, arr;
        int64_t product;
        if (!bson_iter_init_find(&it, doc, "_id") || (product = iter_i64(&it)) == INT64_MIN)
            continue;
        if (!bson_iter_init_find(&it, doc, "reservations") || !BSON_ITER_HOLDS_ARRAY(&it) ||
            !bson_iter_recurse(&it, &arr))
            continue;
        while (bson_iter_next(&arr)) {
            bson_iter_t f;
            cart_resv r = {product, {{0}}, 0, 0};
            bool has_id = false;
            if (!BSON_ITER_HOLDS_DOCUMENT(&arr) || !bson_iter_recurse(&arr, &f))
                continue;
            while (bson_iter_next(&f)) {
                const char *k = bson_iter_key(&f);
                if (strcmp(k, "_id") == 0 && BSON_ITER_HOLDS_OID(&f))
                    bson_oid_copy(bson_iter_oid(&f), &r.cart), has_id = true;
                else if (strcmp(k, "quantity") == 0)
                    r.quantity = (int32_t)iter_i64(&f);
                else if (strcmp(k, "createdOn") == 0 && BSON_ITER_HOLDS_DATE_TIME(&f))
                    r.created = bson_iter_date_time(&f);
            }
            if (!has_id || (cart && !bson_oid_equal(cart, &r.cart)))
                continue;
            if (cutoff >= 0 && r.created > cutoff)
                continue;
            resv_push(out, &r);
        }
    }
    if (md_cursor_error(cur, err))
        rc = MD_ERROR;
    md_cursor_destroy(cur);
    md_collection_destroy(c);
    return rc;
}

/*
 * Give back every reservation `cart` still holds, each at its own recorded
 * quantity, found through the {"reservations._id": 1} index.  Repeats
 * until none is left (an owner's write in flight may change one between
 * the read and the conditional release; it can do so once, since its next
 * step finds the cart no longer active).
 */
static int release_all(md_db *db, const bson_oid_t *cart, pt_cart_steps *s, md_error *err)
{
    bson_t *q = BCON_NEW("reservations._id", BCON_OID(cart));
    int rc = 0;
    for (int pass = 0; pass < 16 && rc == 0; pass++) {
        resv_vec r = {0};
        rc = scan_reservations(db, q, cart, -1, &r, err);
        for (size_t i = 0; i < r.n && rc == 0; i++)
            rc = pt_cart_release(db, r.v[i].product, cart, r.v[i].quantity, s, NULL, err);
        size_t found = r.n;
        bson_free(r.v);
        if (found == 0)
            break;
    }
    bson_destroy(q);
    return rc;
}

/*
 * 5.5 Ex 7 (5.6 Ex 6), corrected and reordered:
 *   carts.find({modifiedOn: {$lte: cutOffDate}, state: 'active'})
 *   for each cart:
 *     carts.update({_id, state: 'active', modifiedOn: {$lte: cutOffDate}},
 *                  {$set: {state: 'expired'}})          (first; see above)
 *     for each line: the give-back of pt_cart_release()
 *     the sweep of release_all()
 * The book sets `status: 'expired'` (erratum: every query reads `state`)
 * and writes to `products` (erratum: `inventories`).  Carts are kept as
 * history, as in the book.
 */
int pt_cart_expire(md_db *db, int64_t cutoff_ms, const pt_cart_opts *o, int64_t *nexpired,
                   md_error *err)
{
    pt_cart_steps s;
    pt_cart_steps_init(&s, o);
    if (nexpired)
        *nexpired = 0;
    bson_t *q = BCON_NEW("modifiedOn", "{", "$lte", BCON_DATE_TIME(cutoff_ms), "}", "state",
                         BCON_UTF8("active"));
    md_collection *c = md_db_get_collection(db, CART_CARTS);
    md_cursor *cur = md_collection_find_with_opts(c, q, NULL);
    bson_t **carts = NULL;
    size_t n = 0, cap = 0;
    const bson_t *doc;
    int rc = 0;
    while (md_cursor_next(cur, &doc)) {
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            carts = bson_realloc(carts, cap * sizeof *carts);
        }
        carts[n++] = bson_copy(doc);
    }
    if (md_cursor_error(cur, err))
        rc = MD_ERROR;
    md_cursor_destroy(cur);
    md_collection_destroy(c);
    bson_destroy(q);

    for (size_t i = 0; i < n && rc == 0; i++) {
        bson_iter_t it;
        if (!bson_iter_init_find(&it, carts[i], "_id") || !BSON_ITER_HOLDS_OID(&it))
            continue;
        bson_oid_t id;
        bson_oid_copy(bson_iter_oid(&it), &id);
        int64_t matched = 0;
        bson_t *cq = BCON_NEW("_id", BCON_OID(&id), "state", BCON_UTF8("active"), "modifiedOn",
                              "{", "$lte", BCON_DATE_TIME(cutoff_ms), "}");
        bson_t *cu = BCON_NEW("$set", "{", "state", BCON_UTF8("expired"), "}");
        rc = pt_cart_update(db, CART_CARTS, cq, cu, 0, &matched, err);
        bson_destroy(cq);
        bson_destroy(cu);
        if (rc != 0)
            break;
        if (pt_cart_step(&s)) {
            rc = PT_CART_CRASHED;
            break;
        }
        if (matched == 0)
            continue; /* touched by its owner since, or taken by another job */
        if (nexpired)
            (*nexpired)++;
        pt_cart_line *lines;
        int nl;
        rc = pt_cart_lines(carts[i], &lines, &nl, err);
        for (int j = 0; j < nl && rc == 0; j++)
            rc = pt_cart_release(db, lines[j].product, &id, lines[j].quantity, &s, NULL, err);
        bson_free(lines);
        if (rc == 0)
            rc = release_all(db, &id, &s, err);
    }
    for (size_t i = 0; i < n; i++)
        bson_destroy(carts[i]);
    bson_free(carts);
    return rc;
}

static int cmp_resv_cart(const void *a, const void *b)
{
    return bson_oid_compare(&((const cart_resv *)a)->cart, &((const cart_resv *)b)->cart);
}

/*
 * Reservations created at or before cutoff_ms whose cart is not active: a
 * client or a job stopped between two writes.  Expired (or unknown) cart:
 * give it back.  Completed cart: finish its checkout (order, pull).
 * Active carts are their owners' (or the expiry's, once stale).
 */
int pt_cart_recover(md_db *db, int64_t cutoff_ms, const pt_cart_opts *o, int64_t *nrecovered,
                    md_error *err)
{
    pt_cart_steps s;
    pt_cart_steps_init(&s, o);
    if (nrecovered)
        *nrecovered = 0;
    resv_vec r = {0};
    bson_t *q = BCON_NEW("reservations", "{", "$elemMatch", "{", "createdOn", "{", "$lte",
                         BCON_DATE_TIME(cutoff_ms), "}", "}", "}");
    int rc = scan_reservations(db, q, NULL, cutoff_ms, &r, err);
    bson_destroy(q);
    if (r.n)
        qsort(r.v, r.n, sizeof *r.v, cmp_resv_cart);
    for (size_t i = 0; i < r.n && rc == 0; i++) {
        bson_t cart;
        if (i > 0 && bson_oid_equal(&r.v[i].cart, &r.v[i - 1].cart) && r.v[i - 1].created < 0) {
            r.v[i].created = -1; /* a completed cart, finished above with all of them */
            continue;
        }
        bson_t *cq = BCON_NEW("_id", BCON_OID(&r.v[i].cart));
        int frc = pt_find_one(db, CART_CARTS, cq, NULL, &cart, err);
        bson_destroy(cq);
        const char *state = "";
        bson_iter_t it;
        if (frc == 0 && bson_iter_init_find(&it, &cart, "state") && BSON_ITER_HOLDS_UTF8(&it))
            state = bson_iter_utf8(&it, NULL);
        if (frc != 0 && frc != MD_NOTFOUND) {
            rc = frc;
        } else if (strcmp(state, "active") == 0) {
            /* live */
        } else if (strcmp(state, "completed") == 0) {
            r.v[i].created = -1;
            rc = pt_cart_finish_checkout(db, &cart, true, &s, err);
            if (rc == 0 && nrecovered)
                (*nrecovered)++;
        } else {
            bool released = false;
            rc = pt_cart_release(db, r.v[i].product, &r.v[i].cart, r.v[i].quantity, &s, &released,
                                 err);
            if (rc == 0 && released && nrecovered)
                (*nrecovered)++;
        }
        bson_destroy(&cart);
    }
    bson_free(r.v);
    return rc;
}

int pt_cart_cleanup(md_db *db, int64_t cutoff_ms, const pt_cart_opts *o, md_error *err)
{
    int rc = pt_cart_expire(db, cutoff_ms, o, NULL, err);
    if (rc == 0)
        rc = pt_cart_recover(db, cutoff_ms, o, NULL, err);
    return rc;
}

/* ---- the invariants --------------------------------------------------------- */

/*
 * The book's accounting: a product's stock is its inventory's quantity plus
 * the quantities of its reservations ("the sum of the quantity field at the
 * top level of the document and all the quantity fields in the embedded
 * array reservations"; its worked figure, 99 + 1 for a document that shows
 * 999, is an erratum).  Stock leaves that sum only through an order.
 */

enum { CS_ACTIVE, CS_COMPLETED, CS_EXPIRED, CS_OTHER };

typedef struct check_cart {
    bson_oid_t id;
    int state;
    bool has_order;
    pt_cart_line *lines;
    int nlines;
} check_cart;

static int cmp_cart(const void *a, const void *b)
{
    return bson_oid_compare(&((const check_cart *)a)->id, &((const check_cart *)b)->id);
}

static int cmp_resv(const void *a, const void *b)
{
    const cart_resv *x = a, *y = b;
    int c = bson_oid_compare(&x->cart, &y->cart);
    if (c)
        return c;
    return (x->product > y->product) - (x->product < y->product);
}

static check_cart *find_cart(check_cart *v, size_t n, const bson_oid_t *id)
{
    check_cart key;
    bson_oid_copy(id, &key.id);
    return bsearch(&key, v, n, sizeof *v, cmp_cart);
}

/* All carts, sorted by _id. */
static int load_carts(md_db *db, check_cart **out, size_t *nout, md_error *err)
{
    md_collection *c = md_db_get_collection(db, CART_CARTS);
    bson_t q = BSON_INITIALIZER;
    md_cursor *cur = md_collection_find_with_opts(c, &q, NULL);
    const bson_t *doc;
    check_cart *v = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    while (rc == 0 && md_cursor_next(cur, &doc)) {
        bson_iter_t it;
        check_cart cc = {.state = CS_OTHER};
        if (!bson_iter_init_find(&it, doc, "_id") || !BSON_ITER_HOLDS_OID(&it)) {
            rc = md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE, "a cart without an ObjectId");
            break;
        }
        bson_oid_copy(bson_iter_oid(&it), &cc.id);
        if (bson_iter_init_find(&it, doc, "state") && BSON_ITER_HOLDS_UTF8(&it)) {
            const char *st = bson_iter_utf8(&it, NULL);
            cc.state = !strcmp(st, "active")      ? CS_ACTIVE
                       : !strcmp(st, "completed") ? CS_COMPLETED
                       : !strcmp(st, "expired")   ? CS_EXPIRED
                                                  : CS_OTHER;
        }
        rc = pt_cart_lines(doc, &cc.lines, &cc.nlines, err);
        if (rc != 0)
            break;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            v = bson_realloc(v, cap * sizeof *v);
        }
        v[n++] = cc;
    }
    if (rc == 0 && md_cursor_error(cur, err))
        rc = MD_ERROR;
    md_cursor_destroy(cur);
    md_collection_destroy(c);
    if (n)
        qsort(v, n, sizeof *v, cmp_cart);
    *out = v;
    *nout = n;
    return rc;
}

/* Orders: each a completed cart's, once; their lines add to sold[]. */
static int load_orders(md_db *db, check_cart *carts, size_t ncarts, int64_t n, int64_t *sold,
                       pt_cart_totals *t, md_error *err)
{
    md_collection *c = md_db_get_collection(db, CART_ORDERS);
    bson_t q = BSON_INITIALIZER;
    md_cursor *cur = md_collection_find_with_opts(c, &q, NULL);
    const bson_t *doc;
    int rc = 0;
    while (rc == 0 && md_cursor_next(cur, &doc)) {
        bson_iter_t it;
        char hex[25];
        if (!bson_iter_init_find(&it, doc, "_id") || !BSON_ITER_HOLDS_OID(&it)) {
            rc = md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE, "an order without a cart _id");
            break;
        }
        bson_oid_to_string(bson_iter_oid(&it), hex);
        check_cart *cc = find_cart(carts, ncarts, bson_iter_oid(&it));
        if (!cc || cc->state != CS_COMPLETED) {
            rc = md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE,
                              "order %s has no completed cart", hex);
            break;
        }
        cc->has_order = true;
        t->orders++;
        pt_cart_line *lines;
        int nl;
        rc = pt_cart_lines(doc, &lines, &nl, err);
        for (int j = 0; j < nl && rc == 0; j++) {
            if (lines[j].product < 0 || lines[j].product >= n || lines[j].quantity <= 0)
                rc = md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE,
                                  "order %s has a bad line (product %lld, quantity %d)", hex,
                                  (long long)lines[j].product, lines[j].quantity);
            else
                sold[lines[j].product] += lines[j].quantity;
        }
        bson_free(lines);
    }
    if (rc == 0 && md_cursor_error(cur, err))
        rc = MD_ERROR;
    md_cursor_destroy(cur);
    md_collection_destroy(c);
    return rc;
}

/* Inventories: quantities into avail[], reservations into *r. */
static int load_inventories(md_db *db, int64_t n, int64_t *avail, bool *seen, resv_vec *r,
                            md_error *err)
{
    md_collection *c = md_db_get_collection(db, CART_INVENTORIES);
    bson_t q = BSON_INITIALIZER;
    md_cursor *cur = md_collection_find_with_opts(c, &q, NULL);
    const bson_t *doc;
    int rc = 0;
    while (rc == 0 && md_cursor_next(cur, &doc)) {
        bson_iter_t it;
        int64_t p = bson_iter_init_find(&it, doc, "_id") ? iter_i64(&it) : INT64_MIN;
        if (p < 0 || p >= n) {
            rc = md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE, "unknown inventory %lld",
                              (long long)p);
            break;
        }
        seen[p] = true;
        avail[p] = bson_iter_init_find(&it, doc, "quantity") ? iter_i64(&it) : INT64_MIN;
    }
    if (rc == 0 && md_cursor_error(cur, err))
        rc = MD_ERROR;
    md_cursor_destroy(cur);
    md_collection_destroy(c);
    if (rc == 0)
        rc = scan_reservations(db, &q, NULL, -1, r, err);
    return rc;
}

static bool cart_has_line(const check_cart *cc, int64_t product, int32_t quantity)
{
    for (int j = 0; j < cc->nlines; j++)
        if (cc->lines[j].product == product)
            return cc->lines[j].quantity == quantity;
    return false;
}

/* The cross references: reservations <-> active carts' lines; orders <->
 * completed carts. */
static int check_refs(check_cart *carts, size_t ncarts, resv_vec *r, bool reserving,
                      pt_cart_totals *t, md_error *err)
{
    char hex[25];
    int64_t active_lines = 0;
    for (size_t i = 0; i < ncarts; i++) {
        check_cart *cc = &carts[i];
        bson_oid_to_string(&cc->id, hex);
        t->active += cc->state == CS_ACTIVE;
        t->completed += cc->state == CS_COMPLETED;
        t->expired += cc->state == CS_EXPIRED;
        if (cc->state == CS_OTHER)
            return md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE, "cart %s in no known state",
                                hex);
        if (cc->state == CS_COMPLETED && !cc->has_order)
            return md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE,
                                "completed cart %s has no order", hex);
        for (int j = 0; j < cc->nlines; j++) {
            if (cc->lines[j].quantity <= 0)
                return md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE,
                                    "cart %s: product %lld with quantity %d", hex,
                                    (long long)cc->lines[j].product, cc->lines[j].quantity);
            for (int k = 0; k < j; k++)
                if (cc->lines[k].product == cc->lines[j].product)
                    return md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE,
                                        "cart %s: product %lld twice", hex,
                                        (long long)cc->lines[j].product);
        }
        if (cc->state == CS_ACTIVE)
            active_lines += cc->nlines;
    }
    if (r->n)
        qsort(r->v, r->n, sizeof *r->v, cmp_resv);
    for (size_t i = 0; i < r->n; i++) {
        const cart_resv *x = &r->v[i];
        bson_oid_to_string(&x->cart, hex);
        if (i > 0 && cmp_resv(&r->v[i - 1], x) == 0)
            return md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE,
                                "inventory %lld holds two reservations of cart %s",
                                (long long)x->product, hex);
        check_cart *cc = find_cart(carts, ncarts, &x->cart);
        if (!cc || cc->state != CS_ACTIVE)
            return md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE,
                                "inventory %lld holds a reservation of cart %s, which is %s",
                                (long long)x->product, hex, cc ? "not active" : "missing");
        if (!cart_has_line(cc, x->product, x->quantity))
            return md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE,
                                "inventory %lld reserves %d for cart %s, which has no such line",
                                (long long)x->product, x->quantity, hex);
    }
    /* Each reservation matched a distinct line (one per cart and product),
     * so equal counts mean every active line is reserved. */
    if (reserving && (int64_t)r->n != active_lines)
        return md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE,
                            "active carts hold %lld lines but inventories %zu reservations",
                            (long long)active_lines, r->n);
    return 0;
}

int pt_cart_check(md_db *db, int64_t n, const int64_t *initial, bool reserving, pt_cart_totals *out,
                  md_error *err)
{
    pt_cart_totals t = {0};
    int64_t *avail = bson_malloc0(sizeof *avail * (size_t)(n ? n : 1));
    int64_t *held = bson_malloc0(sizeof *held * (size_t)(n ? n : 1));
    int64_t *sold = bson_malloc0(sizeof *sold * (size_t)(n ? n : 1));
    bool *seen = bson_malloc0(sizeof *seen * (size_t)(n ? n : 1));
    check_cart *carts = NULL;
    size_t ncarts = 0;
    resv_vec r = {0};
    int rc = load_carts(db, &carts, &ncarts, err);
    if (rc == 0)
        rc = load_orders(db, carts, ncarts, n, sold, &t, err);
    if (rc == 0)
        rc = load_inventories(db, n, avail, seen, &r, err);
    for (size_t i = 0; i < r.n && rc == 0; i++) {
        if (r.v[i].quantity <= 0)
            rc = md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE,
                              "inventory %lld: a reservation of %d", (long long)r.v[i].product,
                              r.v[i].quantity);
        else
            held[r.v[i].product] += r.v[i].quantity;
    }
    if (rc == 0)
        rc = check_refs(carts, ncarts, &r, reserving, &t, err);
    for (int64_t p = 0; p < n && rc == 0; p++) {
        if (!seen[p] || avail[p] < 0)
            rc = md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE,
                              "inventory %lld: %s quantity %lld", (long long)p,
                              seen[p] ? "negative" : "missing", (long long)avail[p]);
        else if (avail[p] + held[p] + sold[p] != initial[p])
            rc = md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE,
                              "product %lld not conserved: available %lld + reserved %lld + "
                              "sold %lld != initial %lld",
                              (long long)p, (long long)avail[p], (long long)held[p],
                              (long long)sold[p], (long long)initial[p]);
        t.available += avail[p];
        t.reserved += held[p];
        t.sold += sold[p];
    }
    t.reservations = (int64_t)r.n;
    if (out)
        *out = t;
    for (size_t i = 0; i < ncarts; i++)
        bson_free(carts[i].lines);
    bson_free(carts);
    bson_free(r.v);
    bson_free(avail);
    bson_free(held);
    bson_free(sold);
    bson_free(seen);
    return rc;
}

/* ---- the scenario ----------------------------------------------------------- */

int pt_cart_scenario_setup(md_db *db, const pt_setup_args *a, void **state, md_error *err)
{
    static const char *const colls[] = {CART_CARTS, CART_INVENTORIES, CART_PRODUCTS, CART_ORDERS};
    for (size_t i = 0; i < sizeof colls / sizeof *colls; i++) {
        char cmd[96];
        md_error e2;
        snprintf(cmd, sizeof cmd, "{\"drop\": \"%s\"}", colls[i]);
        int rc = pt_command_json(db, cmd, &e2);
        if (rc != 0 && e2.code != MD_CODE_NAMESPACE_NOT_FOUND) {
            if (err)
                *err = e2;
            return rc;
        }
    }
    int rc = pt_cart_create_indexes(db, err);
    if (rc != 0)
        return rc;
    pt_cart_scenario_state *st = bson_malloc0(sizeof *st);
    st->nproducts = CART_SCENARIO_PRODUCTS;
    st->initial = bson_malloc(sizeof *st->initial * (size_t)st->nproducts);
    for (int64_t i = 0; i < st->nproducts; i++)
        st->initial[i] = CART_SCENARIO_STOCK;
    rc = pt_cart_seed(db, st->nproducts, st->initial, CART_SCENARIO_PRODUCT_BYTES, err);
    if (rc != 0) {
        pt_cart_scenario_destroy(st);
        return rc;
    }
    *state = st;
    return 0;
}

void pt_cart_scenario_destroy(void *state)
{
    pt_cart_scenario_state *st = state;
    if (!st)
        return;
    bson_free(st->initial);
    bson_free(st);
}

/* ---- the concurrent workload with failure points ----------------------------- */

typedef struct stress_client {
    md_db *db;
    pt_cart_stress *st;
    pt_user u;
    int64_t adds, updates, removes, checkouts, cleanups;
    int64_t ok, notfound, exists, crashed, checked_out;
    int rc;
    md_error err;
} stress_client;

static bool cart_is_active(md_db *db, const bson_oid_t *cart)
{
    bson_t doc;
    bson_t *q = BCON_NEW("_id", BCON_OID(cart), "state", BCON_UTF8("active"));
    int rc = pt_find_one(db, CART_CARTS, q, NULL, &doc, NULL);
    bson_destroy(q);
    bson_destroy(&doc);
    return rc == 0;
}

static void *stress_main(void *arg)
{
    stress_client *c = arg;
    pt_cart_stress *st = c->st;
    bson_oid_t cart;
    bson_oid_init(&cart, NULL);
    for (int i = 0; i < st->ops && c->rc == 0; i++) {
        pt_cart_opts o = {0};
        if (st->crash_pct > 0 && (int)pt_rand_below(&c->u, 100) < st->crash_pct)
            o.crash_after = 1 + (int)pt_rand_below(&c->u, 4);
        int64_t product = (int64_t)pt_rand_below(&c->u, (uint64_t)st->nproducts);
        int32_t qty = 1 + (int32_t)pt_rand_below(&c->u, 3);
        int pick = (int)pt_rand_below(&c->u, 100);
        bool checkout = false;
        md_error err;
        int rc;
        md_error_clear(&err);
        if (st->expire_every > 0 && i % st->expire_every == st->expire_every - 1) {
            c->cleanups++;
            int64_t age = (int64_t)pt_rand_below(&c->u, (uint64_t)st->expire_age_ms + 1);
            rc = st->expire_only ? pt_cart_expire(c->db, pt_now_ms() - age, &o, NULL, &err)
                                 : pt_cart_cleanup(c->db, pt_now_ms() - age, &o, &err);
        } else if (pick < 45) {
            pt_cart_item item = {.product = product, .quantity = qty, .price = 100};
            snprintf(item.name, sizeof item.name, "product_%lld", (long long)product);
            c->adds++;
            rc = st->reserving ? pt_cart_res_add(c->db, &cart, &item, &o, &err)
                               : pt_cart_nores_add(c->db, &cart, &item, &o, &err);
        } else if (pick < 65) {
            c->updates++;
            rc = st->reserving ? pt_cart_res_update(c->db, &cart, product, qty + 1, &o, &err)
                               : pt_cart_nores_update(c->db, &cart, product, qty + 1, &o, &err);
        } else if (pick < 80) {
            c->removes++;
            rc = st->reserving ? pt_cart_res_remove(c->db, &cart, product, &o, &err)
                               : pt_cart_nores_remove(c->db, &cart, product, &o, &err);
        } else {
            c->checkouts++;
            checkout = true;
            rc = st->reserving ? pt_cart_res_checkout(c->db, &cart, &o, &err)
                               : pt_cart_nores_checkout(c->db, &cart, &o, &err);
        }
        if (rc == 0) {
            c->ok++;
            c->checked_out += checkout;
        } else if (rc == MD_NOTFOUND) {
            c->notfound++;
        } else if (rc == MD_EEXISTS) {
            c->exists++;
        } else if (rc == PT_CART_CRASHED) {
            c->crashed++;
        } else {
            c->rc = rc;
            c->err = err;
            break;
        }
        /* A dead client's cart is abandoned; a finished or expired one is
         * replaced by a new session's. */
        if (rc == PT_CART_CRASHED || (checkout && rc == 0) ||
            (rc == MD_NOTFOUND && !cart_is_active(c->db, &cart) && pick < 45))
            bson_oid_init(&cart, NULL);
    }
    return NULL;
}

int pt_cart_stress_run(md_db *db, pt_cart_stress *st, md_error *err)
{
    int n = st->threads > 0 ? st->threads : 1;
    stress_client *cl = bson_malloc0(sizeof *cl * (size_t)n);
    pthread_t *th = bson_malloc0(sizeof *th * (size_t)n);
    int rc = 0;
    for (int i = 0; i < n; i++) {
        cl[i].db = db;
        cl[i].st = st;
        cl[i].u.db = db;
        cl[i].u.client = i;
        cl[i].u.rng = (st->seed + 1) * 0x9e3779b97f4a7c15ull ^ ((uint64_t)(i + 1) << 32);
        if (cl[i].u.rng == 0)
            cl[i].u.rng = 1;
    }
    int started = 0;
    for (; started < n; started++)
        if (pthread_create(&th[started], NULL, stress_main, &cl[started]) != 0)
            break;
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    if (started < n)
        rc = md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR, "pthread_create failed");
    for (int i = 0; i < started; i++) {
        st->adds += cl[i].adds;
        st->updates += cl[i].updates;
        st->removes += cl[i].removes;
        st->checkouts += cl[i].checkouts;
        st->cleanups += cl[i].cleanups;
        st->ok += cl[i].ok;
        st->notfound += cl[i].notfound;
        st->exists += cl[i].exists;
        st->crashed += cl[i].crashed;
        st->checked_out += cl[i].checked_out;
        if (rc == 0 && cl[i].rc != 0) {
            rc = cl[i].rc;
            if (err)
                *err = cl[i].err;
        }
    }
    bson_free(cl);
    bson_free(th);
    return rc;
}
