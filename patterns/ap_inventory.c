/*
 * ap_inventory.c -- Ch.5 "Inventory Management" (pp.91-100): chapter 3's
 * optimistic update with compensation in practice.  The product is the
 * collection of record; the stock a cart holds is kept twice, as the
 * cart's line and as the product's `carted` entry:
 *
 *   product {_id: sku, qty, carted: [{qty, cart_id, timestamp}]}
 *   cart    {_id, last_modified, status, items: [{sku, qty, details}]}
 *
 *   active --checkout--> pending --payment--> complete
 *     |  ^                  |
 *     |  +--payment fails---+   (and: pending left by a dead client,
 *     |                          after the timeout, by the cleanup)
 *     +--expire_carts--> expiring ----> expired
 *
 * The book's statements, in the order they run: add_item_to_cart (cart
 * $push, then product {qty $gte} $inc/-$push carted, else $pull the line
 * back), update_quantity (cart items.$.qty $inc, product carted.$ $set,
 * else the cart back), checkout (lock pending, pay, complete, $pull
 * carted, multi), expire_carts (multi lock, give back, expired) and
 * cleanup_inventory (refresh the entries of live carts, give back the
 * rest).  Indexes: product carted.cart_id and carted.timestamp, cart
 * {status, last_modified}.  Errata corrected: update_quantity's
 * `'timestamp'` is `carted.$.timestamp`; checkout's `$pull {'cart_id'}` is
 * `$pull {carted: {cart_id}}`; expire's `cart['id']` is `cart['_id']`.
 *
 * Where the book's code loses or invents stock when clients race or die,
 * the fix is here and said so (each found by the threaded invariant test):
 *  - giving stock back (expire_carts, cleanup_inventory) uses the carted
 *    entry's own qty, in the query ({carted: {$elemMatch: {cart_id, qty}}}),
 *    not the cart line's: an update_quantity caught between its cart and
 *    its product write leaves the two unequal;
 *  - checkout, once the cart is pending, makes the cart's lines agree with
 *    the carted entries (the product wins) and completes only a cart still
 *    pending ({_id, status: 'pending'});
 *  - cleanup_inventory also leaves pending carts' entries alone, takes a
 *    complete cart's entries as sold (the $pull its checkout did not get
 *    to), and returns a cart left pending past the timeout to active so
 *    that expire_carts can free it.
 * A cart holds one line per sku (the application adds a sku once, then
 * changes its quantity), since the book's compensations pull by sku.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "ap.h"

#define PRODUCT "product"
#define CART "cart"

int ap_inv_create_indexes(md_db *db, md_error *err)
{
    static const char *const pk[] = {"carted.cart_id", "carted.timestamp"};
    int rc = 0;
    for (int i = 0; i < 2 && rc == 0; i++) {
        bson_t *k = BCON_NEW(pk[i], BCON_INT32(1));
        rc = pt_ensure_index(db, PRODUCT, k, NULL, err);
        bson_destroy(k);
    }
    if (rc == 0) {
        bson_t *k = BCON_NEW("status", BCON_INT32(1), "last_modified", BCON_INT32(1));
        rc = pt_ensure_index(db, CART, k, NULL, err);
        bson_destroy(k);
    }
    return rc;
}

int ap_inv_add_product(md_db *db, const char *sku, int32_t qty, md_error *err)
{
    bson_t *d = BCON_NEW("_id", BCON_UTF8(sku), "qty", BCON_INT32(qty), "carted", "[", "]");
    int rc = ap_insert(db, PRODUCT, d, NULL, err);
    bson_destroy(d);
    return rc;
}

int ap_inv_new_cart(md_db *db, int64_t cart_id, md_error *err)
{
    bson_t *d = BCON_NEW("_id", BCON_INT64(cart_id), "last_modified",
                         BCON_DATE_TIME(pt_now_ms()), "status", BCON_UTF8("active"), "items",
                         "[", "]");
    int rc = ap_insert(db, CART, d, NULL, err);
    bson_destroy(d);
    return rc;
}

static int refused(md_error *err, const char *what)
{
    return md_error_set(err, MD_NOTFOUND, MD_CODE_BAD_VALUE, "%s", what);
}

/* Both cart operations as the book writes them: the cart update (q1, u1)
 * while the cart is active, the product's reservation (q2, u2) if the
 * stock is there, else the cart's compensation (q3, u3). */
static int reserve(md_db *db, const bson_t *q1, const bson_t *u1, const bson_t *q2,
                   const bson_t *u2, const bson_t *q3, const bson_t *u3, const ap_tx_opts *o,
                   md_error *err)
{
    ap_steps s = {0, o ? o->crash_after : 0};
    bool ok;
    int rc;
    AP_WRITE(&s, ap_update(db, CART, q1, u1, false, false, &ok, NULL, NULL, NULL, err));
    if (!ok)
        return refused(err, "CartInactive");
    AP_WRITE(&s, ap_update(db, PRODUCT, q2, u2, false, false, &ok, NULL, NULL, NULL, err));
    if (!ok) {
        AP_WRITE(&s, ap_update(db, CART, q3, u3, false, false, NULL, NULL, NULL, NULL, err));
        rc = refused(err, "InadequateInventory");
    }
out:
    return rc;
}

/* reserve, then destroy the six documents (the callers build them for it). */
static int reserve_owned(md_db *db, bson_t *q1, bson_t *u1, bson_t *q2, bson_t *u2, bson_t *q3,
                         bson_t *u3, const ap_tx_opts *o, md_error *err)
{
    int rc = reserve(db, q1, u1, q2, u2, q3, u3, o, err);
    bson_t *docs[] = {q1, u1, q2, u2, q3, u3};
    for (size_t i = 0; i < sizeof docs / sizeof *docs; i++)
        bson_destroy(docs[i]);
    return rc;
}

int ap_inv_add_item(md_db *db, int64_t cart_id, const char *sku, int32_t qty,
                    const ap_tx_opts *o, md_error *err)
{
    int64_t now = pt_now_ms();
    bson_t *q1 = BCON_NEW("_id", BCON_INT64(cart_id), "status", BCON_UTF8("active"));
    bson_t *u1 = BCON_NEW("$set", "{", "last_modified", BCON_DATE_TIME(now), "}", "$push", "{",
                          "items", "{", "sku", BCON_UTF8(sku), "qty", BCON_INT32(qty),
                          "details", "{", "}", "}", "}");
    bson_t *q2 = BCON_NEW("_id", BCON_UTF8(sku), "qty", "{", "$gte", BCON_INT32(qty), "}");
    bson_t *u2 = BCON_NEW("$inc", "{", "qty", BCON_INT32(-qty), "}", "$push", "{", "carted",
                          "{", "qty", BCON_INT32(qty), "cart_id", BCON_INT64(cart_id),
                          "timestamp", BCON_DATE_TIME(now), "}", "}");
    bson_t *q3 = BCON_NEW("_id", BCON_INT64(cart_id));
    bson_t *u3 = BCON_NEW("$pull", "{", "items", "{", "sku", BCON_UTF8(sku), "}", "}");
    return reserve_owned(db, q1, u1, q2, u2, q3, u3, o, err);
}

int ap_inv_update_quantity(md_db *db, int64_t cart_id, const char *sku, int32_t old_qty,
                           int32_t new_qty, const ap_tx_opts *o, md_error *err)
{
    int64_t now = pt_now_ms();
    int32_t delta = new_qty - old_qty;
    bson_t *q1 = BCON_NEW("_id", BCON_INT64(cart_id), "status", BCON_UTF8("active"),
                          "items.sku", BCON_UTF8(sku));
    bson_t *u1 = BCON_NEW("$set", "{", "last_modified", BCON_DATE_TIME(now), "}", "$inc", "{",
                          "items.$.qty", BCON_INT32(delta), "}");
    bson_t *q2 = BCON_NEW("_id", BCON_UTF8(sku), "carted.cart_id", BCON_INT64(cart_id), "qty",
                          "{", "$gte", BCON_INT32(delta), "}");
    bson_t *u2 = BCON_NEW("$inc", "{", "qty", BCON_INT32(-delta), "}", "$set", "{",
                          "carted.$.qty", BCON_INT32(new_qty), "carted.$.timestamp",
                          BCON_DATE_TIME(now), "}");
    bson_t *q3 = BCON_NEW("_id", BCON_INT64(cart_id), "items.sku", BCON_UTF8(sku));
    bson_t *u3 = BCON_NEW("$inc", "{", "items.$.qty", BCON_INT32(-delta), "}");
    return reserve_owned(db, q1, u1, q2, u2, q3, u3, o, err);
}

/* The qty of the product's carted entry for the cart: 0 and *found false
 * when it has none. */
static int carted_qty(md_db *db, const char *sku, int64_t cart_id, bool *found, int32_t *qty,
                      md_error *err)
{
    bson_t *q = BCON_NEW("_id", BCON_UTF8(sku)), doc;
    bson_iter_t it, arr;
    int rc = pt_find_one(db, PRODUCT, q, NULL, &doc, err);
    bson_destroy(q);
    *found = false;
    *qty = 0;
    if (rc == 0 && bson_iter_init_find(&it, &doc, "carted") && bson_iter_recurse(&it, &arr))
        while (bson_iter_next(&arr)) {
            bson_iter_t f;
            if (!bson_iter_recurse(&arr, &f) || !bson_iter_find(&f, "cart_id") ||
                bson_iter_as_int64(&f) != cart_id)
                continue;
            bson_iter_recurse(&arr, &f);
            if (bson_iter_find(&f, "qty")) {
                *found = true;
                *qty = (int32_t)bson_iter_as_int64(&f);
                break;
            }
        }
    bson_destroy(&doc);
    return rc == MD_NOTFOUND ? 0 : rc;
}

/* Give the cart's carted entry of sku back to the stock (returned: true)
 * or, sold, just pull it; guarded by the entry's qty, retried if it
 * changed under us.  Idempotent: a second call finds no entry. */
static int release_carted(md_db *db, const char *sku, int64_t cart_id, bool returned,
                          bool *did, md_error *err)
{
    *did = false;
    for (int tries = 0; tries < 100; tries++) {
        bool found, ok;
        int32_t qty;
        int rc = carted_qty(db, sku, cart_id, &found, &qty, err);
        if (rc || !found)
            return rc;
        bson_t *q = BCON_NEW("_id", BCON_UTF8(sku), "carted", "{", "$elemMatch", "{",
                             "cart_id", BCON_INT64(cart_id), "qty", BCON_INT32(qty), "}", "}");
        bson_t *u = BCON_NEW("$inc", "{", "qty", BCON_INT32(returned ? qty : 0), "}", "$pull",
                             "{", "carted", "{", "cart_id", BCON_INT64(cart_id), "}", "}");
        rc = ap_update(db, PRODUCT, q, u, false, false, &ok, NULL, NULL, NULL, err);
        bson_destroy(q);
        bson_destroy(u);
        if (rc || ok) {
            *did = ok;
            return rc;
        }
    }
    return md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR, "carted entry kept changing");
}

/* The cart's lines as (sku, qty) pairs. */
typedef struct line {
    char sku[64];
    int32_t qty;
} line;

static int cart_lines(md_db *db, int64_t cart_id, line *lines, int max, int *n, md_error *err)
{
    bson_t *q = BCON_NEW("_id", BCON_INT64(cart_id)), doc;
    bson_iter_t it, arr;
    int rc = pt_find_one(db, CART, q, NULL, &doc, err);
    bson_destroy(q);
    *n = 0;
    if (rc == 0 && bson_iter_init_find(&it, &doc, "items") && bson_iter_recurse(&it, &arr))
        while (bson_iter_next(&arr) && *n < max) {
            bson_iter_t f;
            line *l = &lines[*n];
            if (!bson_iter_recurse(&arr, &f) || !bson_iter_find(&f, "sku") ||
                !BSON_ITER_HOLDS_UTF8(&f))
                continue;
            snprintf(l->sku, sizeof l->sku, "%s", bson_iter_utf8(&f, NULL));
            bson_iter_recurse(&arr, &f);
            l->qty = bson_iter_find(&f, "qty") ? (int32_t)bson_iter_as_int64(&f) : 0;
            (*n)++;
        }
    bson_destroy(&doc);
    return rc;
}

/* Checkout's reconciliation: the product wins. */
static int reconcile(md_db *db, int64_t cart_id, ap_steps *s, md_error *err)
{
    line lines[64];
    int n, rc = cart_lines(db, cart_id, lines, 64, &n, err);
    for (int i = 0; i < n && rc == 0; i++) {
        bool found;
        int32_t qty;
        if ((rc = carted_qty(db, lines[i].sku, cart_id, &found, &qty, err)))
            break;
        if (found && qty == lines[i].qty)
            continue;
        bson_t *q = BCON_NEW("_id", BCON_INT64(cart_id), "status", BCON_UTF8("pending"),
                             "items.sku", BCON_UTF8(lines[i].sku));
        bson_t *u = found ? BCON_NEW("$set", "{", "items.$.qty", BCON_INT32(qty), "}")
                          : BCON_NEW("$pull", "{", "items", "{", "sku",
                                     BCON_UTF8(lines[i].sku), "}", "}");
        rc = ap_update(db, CART, q, u, false, false, NULL, NULL, NULL, NULL, err);
        bson_destroy(q);
        bson_destroy(u);
        if (rc == 0 && ap_crash_now(s))
            rc = AP_CRASHED;
    }
    return rc;
}

int ap_inv_checkout(md_db *db, int64_t cart_id, const ap_tx_opts *o, md_error *err)
{
    ap_steps s = {0, o ? o->crash_after : 0};
    bool ok;
    int rc;
    bson_t *q1 = BCON_NEW("_id", BCON_INT64(cart_id), "status", BCON_UTF8("active"));
    bson_t *u1 = BCON_NEW("$set", "{", "status", BCON_UTF8("pending"), "last_modified",
                          BCON_DATE_TIME(pt_now_ms()), "}");
    bson_t *qp = BCON_NEW("_id", BCON_INT64(cart_id), "status", BCON_UTF8("pending"));
    bson_t *ua = BCON_NEW("$set", "{", "status", BCON_UTF8("active"), "}");
    bson_t *uc = BCON_NEW("$set", "{", "status", BCON_UTF8("complete"), "}");
    bson_t *q4 = BCON_NEW("carted.cart_id", BCON_INT64(cart_id));
    bson_t *u4 = BCON_NEW("$pull", "{", "carted", "{", "cart_id", BCON_INT64(cart_id), "}", "}");
    AP_WRITE(&s, ap_update(db, CART, q1, u1, false, false, &ok, NULL, NULL, NULL, err));
    if (!ok) {
        rc = refused(err, "CartInactive");
        goto out;
    }
    if ((rc = reconcile(db, cart_id, &s, err)))
        goto out;
    if (o && o->payment_fails) { /* collect_payment raised */
        AP_WRITE(&s, ap_update(db, CART, qp, ua, false, false, NULL, NULL, NULL, NULL, err));
        rc = refused(err, "payment failed");
        goto out;
    }
    AP_WRITE(&s, ap_update(db, CART, qp, uc, false, false, &ok, NULL, NULL, NULL, err));
    if (!ok) {
        rc = refused(err, "CartInactive: no longer pending");
        goto out;
    }
    AP_WRITE(&s, ap_update(db, PRODUCT, q4, u4, false, true, NULL, NULL, NULL, NULL, err));
out:
    bson_destroy(q1);
    bson_destroy(u1);
    bson_destroy(qp);
    bson_destroy(ua);
    bson_destroy(uc);
    bson_destroy(q4);
    bson_destroy(u4);
    return rc;
}

int ap_inv_expire_carts(md_db *db, int64_t timeout_ms, int *n, md_error *err)
{
    int64_t threshold = pt_now_ms() - timeout_ms;
    bson_t *q = BCON_NEW("status", BCON_UTF8("active"), "last_modified", "{", "$lt",
                         BCON_DATE_TIME(threshold), "}");
    bson_t *u = BCON_NEW("$set", "{", "status", BCON_UTF8("expiring"), "}");
    int rc = ap_update(db, CART, q, u, false, true, NULL, NULL, NULL, NULL, err);
    bson_destroy(q);
    bson_destroy(u);
    int64_t ids[256];
    int k = 0;
    if (rc == 0) {
        q = BCON_NEW("status", BCON_UTF8("expiring"));
        md_collection *c = md_db_get_collection(db, CART);
        md_cursor *cur = md_collection_find_with_opts(c, q, NULL);
        const bson_t *d;
        bson_iter_t it;
        while (k < 256 && md_cursor_next(cur, &d))
            if (bson_iter_init_find(&it, d, "_id"))
                ids[k++] = bson_iter_as_int64(&it);
        if (md_cursor_error(cur, err))
            rc = MD_ERROR;
        md_cursor_destroy(cur);
        md_collection_destroy(c);
        bson_destroy(q);
    }
    for (int i = 0; i < k && rc == 0; i++) {
        line lines[64];
        int nl;
        bool did;
        rc = cart_lines(db, ids[i], lines, 64, &nl, err);
        for (int j = 0; j < nl && rc == 0; j++)
            rc = release_carted(db, lines[j].sku, ids[i], true, &did, err);
        if (rc == 0) {
            q = BCON_NEW("_id", BCON_INT64(ids[i]), "status", BCON_UTF8("expiring"));
            u = BCON_NEW("$set", "{", "status", BCON_UTF8("expired"), "}");
            rc = ap_update(db, CART, q, u, false, false, NULL, NULL, NULL, NULL, err);
            bson_destroy(q);
            bson_destroy(u);
        }
    }
    if (n)
        *n = k;
    return rc;
}

/* The status of a cart ("" when it does not exist). */
static int cart_status(md_db *db, int64_t cart_id, char *st, size_t n, md_error *err)
{
    bson_t *q = BCON_NEW("_id", BCON_INT64(cart_id)), doc;
    bson_iter_t it;
    int rc = pt_find_one(db, CART, q, NULL, &doc, err);
    bson_destroy(q);
    st[0] = '\0';
    if (rc == 0 && bson_iter_init_find(&it, &doc, "status") && BSON_ITER_HOLDS_UTF8(&it))
        snprintf(st, n, "%s", bson_iter_utf8(&it, NULL));
    bson_destroy(&doc);
    return rc == MD_NOTFOUND ? 0 : rc;
}

/* One product's old carted entries: refresh, take as sold, or give back. */
static int cleanup_product(md_db *db, const bson_t *prod, int64_t threshold, int *n,
                           md_error *err)
{
    bson_iter_t it, arr;
    const char *sku;
    int64_t carts[256];
    int k = 0, rc = 0;
    if (!bson_iter_init_find(&it, prod, "_id") || !BSON_ITER_HOLDS_UTF8(&it))
        return 0;
    sku = bson_iter_utf8(&it, NULL);
    if (bson_iter_init_find(&it, prod, "carted") && bson_iter_recurse(&it, &arr))
        while (bson_iter_next(&arr) && k < 256) {
            bson_iter_t f;
            if (bson_iter_recurse(&arr, &f) && bson_iter_find(&f, "timestamp") &&
                bson_iter_date_time(&f) < threshold && bson_iter_recurse(&arr, &f) &&
                bson_iter_find(&f, "cart_id"))
                carts[k++] = bson_iter_as_int64(&f);
        }
    for (int i = 0; i < k && rc == 0; i++) {
        char st[32];
        bool did = false;
        if ((rc = cart_status(db, carts[i], st, sizeof st, err)))
            break;
        if (strcmp(st, "active") == 0 || strcmp(st, "pending") == 0) {
            bson_t *q = BCON_NEW("_id", BCON_UTF8(sku), "carted.cart_id", BCON_INT64(carts[i]));
            bson_t *u = BCON_NEW("$set", "{", "carted.$.timestamp",
                                 BCON_DATE_TIME(pt_now_ms()), "}");
            rc = ap_update(db, PRODUCT, q, u, false, false, NULL, NULL, NULL, NULL, err);
            bson_destroy(q);
            bson_destroy(u);
        } else {
            rc = release_carted(db, sku, carts[i], strcmp(st, "complete") != 0, &did, err);
            *n += did;
        }
    }
    return rc;
}

int ap_inv_cleanup(md_db *db, int64_t timeout_ms, int *n, md_error *err)
{
    int64_t threshold = pt_now_ms() - timeout_ms;
    int done = 0;
    /* A cart left pending past the timeout goes back to active. */
    bson_t *q = BCON_NEW("status", BCON_UTF8("pending"), "last_modified", "{", "$lt",
                         BCON_DATE_TIME(threshold), "}");
    bson_t *u = BCON_NEW("$set", "{", "status", BCON_UTF8("active"), "}");
    int rc = ap_update(db, CART, q, u, false, true, NULL, NULL, NULL, NULL, err);
    bson_destroy(q);
    bson_destroy(u);
    bson_t *batch[256];
    int k = 0;
    if (rc == 0) {
        q = BCON_NEW("carted.timestamp", "{", "$lt", BCON_DATE_TIME(threshold), "}");
        rc = ap_find_copies(db, PRODUCT, q, batch, 256, &k, err);
        bson_destroy(q);
    }
    for (int i = 0; i < k; i++) {
        if (rc == 0)
            rc = cleanup_product(db, batch[i], threshold, &done, err);
        bson_destroy(batch[i]);
    }
    if (n)
        *n = done;
    return rc;
}

/* ---- the invariant ---------------------------------------------------------------- */

static int sku_index(const char *sku, int nproducts)
{
    int i;
    if (sscanf(sku, "sku%d", &i) != 1 || i < 0 || i >= nproducts)
        return -1;
    return i;
}

int ap_inv_check(md_db *db, int nproducts, const int32_t *initial, bool settled,
                 md_error *err)
{
    int64_t have[256] = {0}, carted_total = 0, unsettled = 0;
    bson_t q = BSON_INITIALIZER;
    const bson_t *d;
    int rc = 0;
    if (nproducts > 256)
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE, "too many products");
    md_collection *c = md_db_get_collection(db, PRODUCT);
    md_cursor *cur = md_collection_find_with_opts(c, &q, NULL);
    while (rc == 0 && md_cursor_next(cur, &d)) {
        bson_iter_t it, arr;
        int i = bson_iter_init_find(&it, d, "_id") && BSON_ITER_HOLDS_UTF8(&it)
                    ? sku_index(bson_iter_utf8(&it, NULL), nproducts)
                    : -1;
        if (i < 0)
            continue;
        int64_t qty = bson_iter_init_find(&it, d, "qty") ? bson_iter_as_int64(&it) : 0;
        if (qty < 0)
            rc = md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE, "sku%d: qty %lld < 0", i,
                              (long long)qty);
        have[i] += qty;
        if (bson_iter_init_find(&it, d, "carted") && bson_iter_recurse(&it, &arr))
            while (bson_iter_next(&arr)) {
                bson_iter_t f;
                if (bson_iter_recurse(&arr, &f) && bson_iter_find(&f, "qty")) {
                    have[i] += bson_iter_as_int64(&f);
                    carted_total++;
                }
            }
    }
    if (rc == 0 && md_cursor_error(cur, err))
        rc = MD_ERROR;
    md_cursor_destroy(cur);
    md_collection_destroy(c);
    /* Sold: the lines of complete carts. */
    c = md_db_get_collection(db, CART);
    cur = md_collection_find_with_opts(c, &q, NULL);
    while (rc == 0 && md_cursor_next(cur, &d)) {
        bson_iter_t it, arr;
        const char *st = bson_iter_init_find(&it, d, "status") && BSON_ITER_HOLDS_UTF8(&it)
                             ? bson_iter_utf8(&it, NULL)
                             : "";
        bool complete = strcmp(st, "complete") == 0;
        int lines = 0;
        if (bson_iter_init_find(&it, d, "items") && bson_iter_recurse(&it, &arr))
            while (bson_iter_next(&arr)) {
                bson_iter_t f;
                lines++;
                if (!complete || !bson_iter_recurse(&arr, &f) || !bson_iter_find(&f, "sku") ||
                    !BSON_ITER_HOLDS_UTF8(&f))
                    continue;
                int i = sku_index(bson_iter_utf8(&f, NULL), nproducts);
                bson_iter_recurse(&arr, &f);
                if (i >= 0 && bson_iter_find(&f, "qty"))
                    have[i] += bson_iter_as_int64(&f);
            }
        if (strcmp(st, "pending") == 0 || strcmp(st, "expiring") == 0 ||
            (strcmp(st, "active") == 0 && lines > 0))
            unsettled++;
    }
    if (rc == 0 && md_cursor_error(cur, err))
        rc = MD_ERROR;
    md_cursor_destroy(cur);
    md_collection_destroy(c);
    bson_destroy(&q);
    if (rc)
        return rc;
    if (settled && (carted_total || unsettled))
        return md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE,
                            "not settled: %lld carted entries, %lld carts in flight",
                            (long long)carted_total, (long long)unsettled);
    for (int i = 0; i < nproducts; i++)
        if (settled ? have[i] != initial[i] : have[i] > initial[i])
            return md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE,
                                "sku%d: stock + carted + sold = %lld, started with %d", i,
                                (long long)have[i], initial[i]);
    return 0;
}

/* ---- the concurrent workload --------------------------------------------------------- */

typedef struct client_cart {
    int64_t id;
    int n;
    int sku[64];
    int32_t qty[64];
} client_cart;

static bool in_cart(const client_cart *c, int sku)
{
    for (int i = 0; i < c->n; i++)
        if (c->sku[i] == sku)
            return true;
    return false;
}

/* One random operation on the client's cart; false: drop the cart. */
static bool inv_op(ap_tx_client *c, client_cart *cart, uint64_t *rng)
{
    ap_tx_stress *st = c->st;
    ap_tx_opts o = {0};
    md_error e;
    char sku[32];
    int rc, r = (int)(pt_rand_next(rng) % 100);
    if ((int)(pt_rand_next(rng) % 100) < st->crash_pct)
        o.crash_after = 1 + (int)(pt_rand_next(rng) % 4);
    if ((r < 55 || cart->n == 0) && cart->n < st->nproducts && cart->n < 64) {
        int s;
        do
            s = (int)(pt_rand_next(rng) % (uint64_t)st->nproducts);
        while (in_cart(cart, s));
        int32_t q = 1 + (int32_t)(pt_rand_next(rng) % 3);
        snprintf(sku, sizeof sku, "sku%d", s);
        rc = ap_inv_add_item(c->db, cart->id, sku, q, &o, &e);
        if (rc == 0) {
            cart->sku[cart->n] = s;
            cart->qty[cart->n++] = q;
        }
    } else if (r < 75 && cart->n > 0) {
        int l = (int)(pt_rand_next(rng) % (uint64_t)cart->n);
        int32_t q = 1 + (int32_t)(pt_rand_next(rng) % 4);
        snprintf(sku, sizeof sku, "sku%d", cart->sku[l]);
        rc = ap_inv_update_quantity(c->db, cart->id, sku, cart->qty[l], q, &o, &e);
        if (rc == 0)
            cart->qty[l] = q;
    } else {
        o.payment_fails = pt_rand_next(rng) % 5 == 0;
        rc = ap_inv_checkout(c->db, cart->id, &o, &e);
        if (rc == 0) {
            c->checkouts++;
            c->ok++;
            return false;
        }
        if (rc == MD_NOTFOUND && strstr(e.message, "payment")) {
            c->refused++;
            return true;
        }
    }
    if (rc == 0) {
        c->ok++;
        return true;
    }
    if (rc == AP_CRASHED) {
        c->crashed++;
        return false;
    }
    if (rc == MD_NOTFOUND) {
        c->refused++;
        return strstr(e.message, "CartInactive") == NULL;
    }
    c->rc = rc;
    c->err = e;
    return false;
}

static void *inv_client_main(void *arg)
{
    ap_tx_client *c = arg;
    ap_tx_stress *st = c->st;
    uint64_t rng = st->seed * 104729 + (uint64_t)c->index + 1;
    client_cart cart = {.id = -1};
    int64_t next = (int64_t)(c->index + 1) * 1000000; /* clear of the story's carts */
    for (int i = 0; i < st->ops && c->rc == 0; i++) {
        if (st->cleanup_every && i % st->cleanup_every == st->cleanup_every - 1) {
            c->rc = i / st->cleanup_every % 2
                        ? ap_inv_cleanup(c->db, 2 * st->timeout_ms, NULL, &c->err)
                        : ap_inv_expire_carts(c->db, st->timeout_ms, NULL, &c->err);
            c->cleanups++;
            continue;
        }
        if (cart.id < 0) {
            cart = (client_cart){.id = next++};
            if ((c->rc = ap_inv_new_cart(c->db, cart.id, &c->err)))
                break;
        }
        if (!inv_op(c, &cart, &rng))
            cart.id = -1;
    }
    return NULL;
}

int ap_tx_stress_inventory(md_db *db, ap_tx_stress *st, md_error *err)
{
    if (st->nproducts < 1 || st->nproducts > 64)
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE, "1 to 64 products");
    return ap_tx_run_clients(db, st, inv_client_main, err);
}

/* ---- the measurement ------------------------------------------------------------------ */

static int64_t product_qty(md_db *db, const char *sku)
{
    bson_t *q = BCON_NEW("_id", BCON_UTF8(sku)), doc;
    bson_iter_t it;
    int64_t v = -1;
    if (pt_find_one(db, PRODUCT, q, NULL, &doc, NULL) == 0 &&
        bson_iter_init_find(&it, &doc, "qty"))
        v = bson_iter_as_int64(&it);
    bson_destroy(&doc);
    bson_destroy(q);
    return v;
}

/* The book's single-client story on one product of 5. */
static int story(md_db *db, ap_result *r, md_error *err)
{
    int rc, nl;
    line lines[4];
    if ((rc = ap_inv_add_product(db, "00e8da9b", 5, err)) || (rc = ap_inv_new_cart(db, 42, err)) ||
        (rc = ap_inv_new_cart(db, 43, err)) ||
        (rc = ap_inv_add_item(db, 42, "00e8da9b", 3, NULL, err)))
        return rc;
    int64_t after_add = product_qty(db, "00e8da9b");
    rc = ap_inv_add_item(db, 43, "00e8da9b", 3, NULL, err);
    bool inadequate = rc == MD_NOTFOUND && strstr(err->message, "InadequateInventory");
    if (rc && !inadequate)
        return rc;
    if ((rc = cart_lines(db, 43, lines, 4, &nl, err)))
        return rc;
    ap_set(r, "add_refused_and_compensated", inadequate && nl == 0 && after_add == 2, "bool");
    if ((rc = ap_inv_update_quantity(db, 42, "00e8da9b", 3, 4, NULL, err)))
        return rc;
    ap_set(r, "update_quantity_qty_left", (double)product_qty(db, "00e8da9b"), "units");
    /* Expire cart 42 (timeout 0 ms back from a clock that has moved on). */
    int n1 = 0, n2 = 0, n3 = 0;
    rc = ap_inv_expire_carts(db, -1000, &n1, err);
    int64_t back = product_qty(db, "00e8da9b");
    if (rc == 0)
        rc = ap_inv_expire_carts(db, -1000, &n2, err);
    if (rc == 0)
        rc = ap_inv_cleanup(db, -1000, &n3, err);
    if (rc)
        return rc;
    ap_set(r, "expired_returned_qty", (double)back, "units");
    ap_set(r, "return_idempotent", back == 5 && product_qty(db, "00e8da9b") == 5 && n3 == 0,
           "bool");
    ap_plan x;
    bson_t *q = BCON_NEW("status", BCON_UTF8("active"), "last_modified", "{", "$lt",
                         BCON_DATE_TIME(pt_now_ms()), "}");
    rc = ap_explain_find(db, CART, q, NULL, NULL, &x, err);
    bson_destroy(q);
    if (rc == 0)
        ap_set(r, "expire_uses_status_index",
               strcmp(x.index, "status_1_last_modified_1") == 0, "bool");
    return rc;
}

static int measure(md_db *db, const ap_args *a, ap_result *r, md_error *err)
{
    int rc, np = 4;
    int32_t initial[4] = {40, 40, 40, 40};
    if ((rc = ap_inv_create_indexes(db, err)) || (rc = story(db, r, err)))
        return rc;
    for (int i = 0; i < np && rc == 0; i++) {
        char sku[16];
        snprintf(sku, sizeof sku, "sku%d", i);
        rc = ap_inv_add_product(db, sku, initial[i], err);
    }
    if (rc)
        return rc;
    ap_coll_stats s0, s1;
    ap_tx_stress st = {.threads = 6, .ops = a->quick ? 150 : 1500, .crash_pct = 15,
                       .cleanup_every = 8, .nproducts = np, .timeout_ms = 30,
                       .seed = a->seed};
    double t0 = ap_now_s();
    if ((rc = ap_coll_stats_get(db, PRODUCT, &s0, err)) ||
        (rc = ap_tx_stress_inventory(db, &st, err)) ||
        (rc = ap_coll_stats_get(db, PRODUCT, &s1, err)))
        return rc;
    ap_set(r, "stress_s", ap_now_s() - t0, "s");
    /* Settle: free stale pending carts, expire the rest, free what is left. */
    if ((rc = ap_inv_cleanup(db, -1000, NULL, err)) ||
        (rc = ap_inv_expire_carts(db, -1000, NULL, err)) ||
        (rc = ap_inv_cleanup(db, -1000, NULL, err)))
        return rc;
    md_error cerr;
    md_error_clear(&cerr);
    int ok = ap_inv_check(db, np, initial, true, &cerr) == 0;
    ap_set(r, "stress_invariant_ok", ok, "bool");
    ap_set(r, "stress_ops_ok", (double)st.ok, "ops");
    ap_set(r, "stress_refused", (double)st.refused, "ops");
    ap_set(r, "stress_crashed", (double)st.crashed, "ops");
    ap_set(r, "stress_checkouts", (double)st.checkouts, "carts");
    ap_set(r, "product_moves", (double)(s1.moves - s0.moves), "moves");
    ap_set(r, "product_updates", (double)(s1.updates - s0.updates), "updates");
    ap_set(r, "product_bytes_per_update",
           s1.updates > s0.updates
               ? (double)(s1.bytes_written - s0.bytes_written) / (double)(s1.updates - s0.updates)
               : 0,
           "bytes");
    return 0;
}

/* ---- the claims ----------------------------------------------------------------- */

static ap_verdict c_add(const ap_result *r, char *m, size_t n)
{
    double v = ap_get(r, "add_refused_and_compensated");
    snprintf(m, n, "5 in stock, cart 42 takes 3, cart 43 asks 3: %s; update_quantity 3 -> 4 "
                   "leaves %.0f",
             v == 1 ? "InadequateInventory and cart 43's line pulled back"
                    : "NOT refused and compensated",
             ap_get(r, "update_quantity_qty_left"));
    return v == 1 && ap_get(r, "update_quantity_qty_left") == 1 ? AP_HOLDS : AP_FAILS;
}

static ap_verdict c_idem(const ap_result *r, char *m, size_t n)
{
    double v = ap_get(r, "return_idempotent");
    snprintf(m, n, "expire gave the 4 units back (stock %.0f); a second expire and a cleanup "
                   "%s",
             ap_get(r, "expired_returned_qty"), v == 1 ? "changed nothing" : "CHANGED IT AGAIN");
    return v == 1 ? AP_HOLDS : AP_FAILS;
}

static ap_verdict c_record(const ap_result *r, char *m, size_t n)
{
    double v = ap_get(r, "stress_invariant_ok");
    snprintf(m, n, "6 clients: %.0f operations done, %.0f refused, %.0f stopped part-way, "
                   "%.0f carts checked out; after the cleanup stock + sold %s the start "
                   "(%.0f product updates, %.0f moves, %.0f bytes each)",
             ap_get(r, "stress_ops_ok"), ap_get(r, "stress_refused"),
             ap_get(r, "stress_crashed"), ap_get(r, "stress_checkouts"),
             v == 1 ? "equals" : "DOES NOT equal", ap_get(r, "product_updates"),
             ap_get(r, "product_moves"), ap_get(r, "product_bytes_per_update"));
    return v == 1 ? AP_HOLDS : AP_FAILS;
}

static ap_verdict c_index(const ap_result *r, char *m, size_t n)
{
    double v = ap_get(r, "expire_uses_status_index");
    snprintf(m, n, "expire_carts' query %s {status: 1, last_modified: 1}",
             v == 1 ? "uses" : "DOES NOT use");
    return v == 1 ? AP_HOLDS : AP_FAILS;
}

const ap_usecase ap_usecase_inventory = {
    .name = "ap_inventory",
    .chapter = "Ch.5 Ecommerce",
    .title = "Inventory Management",
    .pages = "pp.91-100",
    .demonstrates = "stock held in the product document, carted by guarded updates, given "
                    "back by the cart expiry and the cleanup",
    .measure = measure,
    .nclaims = 4,
    .claims = {
        {"add_item_to_cart takes stock only if enough is left, else compensates the cart",
         c_add},
        {"the 'carted.cart_id' guard makes giving stock back idempotent", c_idem},
        {"product is the collection of record: with clients racing, dying and the cleanup "
         "jobs, no stock is lost or invented", c_record},
        {"the cart index {status, last_modified} (inequality last) serves expire_carts",
         c_index},
    },
};
