/*
 * theater.c -- 5.7 Theater Reservation: seats of a screening held in a cart
 * until checkout or expiry (a variant of the reservation cart, 5.5).
 *
 *   sessions {_id, theaterId, name, description, start, end, price,
 *             seatsAvailable, seats: [[0,0,1,...], ...],
 *             reservations: [{_id: cartId, seats: [[r,c],...], price, total}]}
 *   carts    {_id, state: active|done|canceled|expired, total,
 *             reservations: [{sessionId, seats, price, total}], modifiedOn, createdOn}
 *   receipts {_id: cartId, createdOn, reservations, total}
 *
 * The protocols and their writes (crash_after = k stops after write k):
 *
 *   reserve   1 sessions.update({_id, $and: [{"seats.r.c": 0}, ...]},
 *                 {$set: {"seats.r.c": 1}, $inc: {seatsAvailable: -n},
 *                  $push: {reservations: {_id: cartId, ...}}})
 *             2 carts.update({_id, state: "active"}, {$push, $inc: {total}, $set: {modifiedOn}})
 *               (not modified: release the seats again)
 *   checkout  1 carts.findAndModify({_id, state: "active"} -> state "done")
 *             2 receipts.insert({_id: cartId, ...})
 *             3 sessions.update({"reservations._id": cartId}, {$pull}, multi)
 *   expire    per stale cart: claim it (active -> expired), release each
 *             reservation; then a sweep of every session reservation whose
 *             cart is not active: release it, or finish the checkout of a
 *             done cart (receipt, pull).
 *
 * Invariants (pt_theater_check):
 *   1. seatsAvailable == number of 0 seats in the session.
 *   2. A seat goes 0 -> 1 only in reserve's write 1 (guarded by "seats.r.c":
 *      0) and 1 -> 0 only in a release, which is guarded by the very
 *      reservation it pulls: so each taken seat has one holder cart.
 *   3. A receipt holds only reservations of a cart claimed "done"; nothing
 *      releases those, so a sold seat is never sold again.
 *
 * Corrections to the book (digest section 7, item 5), each said again where
 * it applies: $inc seatsAvailable is -n (the expanded example has +2);
 * release gives the seats back to seatsAvailable; checkout's update is on
 * sessions with cartId (the book has session.update and `id`); expiry
 * releases by reservation.sessionId (not reservation._id) and sets state
 * (not status); sessions.findOne where the book has find.  Two changes make
 * the protocol safe against clients dying between steps and expiry running
 * beside checkout: checkout claims the cart first (the book sets done last,
 * so an expiry between its findOne and its last update would release seats
 * the receipt had sold), and a release is guarded by the reservation it
 * removes (the book's, on {_id} alone, run twice would free seats someone
 * else had since taken).  Receipts use the cart's _id so a finished
 * checkout can be redone without a second receipt.
 *
 * One client per cart, as in the book: a cart's reserve and checkout do
 * not run at the same time (checkout's multi $pull would also take a
 * reservation whose reserve is between its two writes, leaving its seats
 * taken by nobody).  Expiry may run beside anything.
 *
 * The scenario (theater_checkout, theater_sim.c) runs what the book's
 * simulator ran instead: its documents, its seven requests a user and its
 * choice of session, a fresh one per user at the book's load.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "patterns.h"
#include "pt_sim.h"
#include "theater_int.h"


/* ---- small helpers over the public API ----------------------------------- */

/* One update (multi or not); *nmod gets modifiedCount. */
int th_update(md_db *db, const char *coll, const bson_t *q, const bson_t *u, bool multi,
             int64_t *nmod, md_error *err)
{
    md_collection *c = md_db_get_collection(db, coll);
    bson_t reply;
    bson_iter_t it;
    int rc = multi ? md_collection_update_many(c, q, u, NULL, &reply, err)
                   : md_collection_update_one(c, q, u, NULL, &reply, err);
    if (nmod)
        *nmod = (rc == 0 && bson_iter_init_find(&it, &reply, "modifiedCount"))
                    ? bson_iter_as_int64(&it) : 0;
    bson_destroy(&reply);
    md_collection_destroy(c);
    return rc;
}

void th_append_seats(bson_t *parent, const char *key, const pt_seat *s, int n)
{
    bson_t arr, pair;
    char k[16];
    bson_append_array_begin(parent, key, -1, &arr);
    for (int i = 0; i < n; i++) {
        snprintf(k, sizeof k, "%d", i);
        bson_append_array_begin(&arr, k, -1, &pair);
        BSON_APPEND_INT32(&pair, "0", s[i].row);
        BSON_APPEND_INT32(&pair, "1", s[i].col);
        bson_append_array_end(&arr, &pair);
    }
    bson_append_array_end(parent, &arr);
}

/* Parse [[r, c], ...] into a malloc'ed array (caller frees *out). */
int th_parse_seats(const bson_iter_t *arr_it, pt_seat **out, int *n)
{
    bson_iter_t a, p;
    int cap = 8, cnt = 0;
    pt_seat *s = malloc(sizeof *s * (size_t)cap);
    if (!s)
        return MD_ENOMEM;
    if (!BSON_ITER_HOLDS_ARRAY(arr_it) || !bson_iter_recurse(arr_it, &a))
        goto bad;
    while (bson_iter_next(&a)) {
        int v[2], k = 0;
        if (!BSON_ITER_HOLDS_ARRAY(&a) || !bson_iter_recurse(&a, &p))
            goto bad;
        while (bson_iter_next(&p) && k < 2)
            v[k++] = (int)bson_iter_as_int64(&p);
        if (k != 2)
            goto bad;
        if (cnt == cap) {
            pt_seat *g = realloc(s, sizeof *s * (size_t)(cap *= 2));
            if (!g)
                goto bad;
            s = g;
        }
        s[cnt].row = v[0];
        s[cnt].col = v[1];
        cnt++;
    }
    *out = s;
    *n = cnt;
    return 0;
bad:
    free(s);
    return MD_ECORRUPT;
}

int64_t th_i64(const bson_t *doc, const char *path, int64_t dflt)
{
    bson_iter_t it;
    if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, path, &it) &&
        BSON_ITER_HOLDS_NUMBER(&it))
        return bson_iter_as_int64(&it);
    return dflt;
}

static const char *th_str(const bson_t *doc, const char *key)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_UTF8(&it))
        return bson_iter_utf8(&it, NULL);
    return "";
}

/* Count one write against the failure point; true: stop here. */
static bool th_crash(const pt_theater_opts *o, int *writes)
{
    ++*writes;
    return o && o->crash_after > 0 && *writes >= o->crash_after;
}

/* ---- the book's operations ----------------------------------------------- */

int pt_theater_create_indexes(md_db *db, md_error *err)
{
    bson_t *k1 = BCON_NEW("state", BCON_INT32(1));
    bson_t *k2 = BCON_NEW("reservations._id", BCON_INT32(1));
    int rc = pt_ensure_index(db, TH_CARTS, k1, NULL, err);
    if (rc == 0)
        rc = pt_ensure_index(db, TH_SESSIONS, k2, NULL, err);
    bson_destroy(k1);
    bson_destroy(k2);
    return rc;
}

/* seats: rows arrays of cols free seats (int32 0s). */
void th_append_plan(bson_t *doc, int rows, int cols)
{
    bson_t seats, row;
    char k[16];
    BSON_APPEND_ARRAY_BEGIN(doc, "seats", &seats);
    for (int r = 0; r < rows; r++) {
        snprintf(k, sizeof k, "%d", r);
        bson_append_array_begin(&seats, k, -1, &row);
        for (int c = 0; c < cols; c++) {
            snprintf(k, sizeof k, "%d", c);
            bson_append_int32(&row, k, -1, 0);
        }
        bson_append_array_end(&seats, &row);
    }
    bson_append_array_end(doc, &seats);
}

void th_append_take_seats(bson_t *q, bson_t *u, const pt_seat *seats, int n)
{
    bson_t and, sel, set;
    char path[64], k[16];
    BSON_APPEND_ARRAY_BEGIN(q, "$and", &and);
    BSON_APPEND_DOCUMENT_BEGIN(u, "$set", &set);
    for (int i = 0; i < n; i++) {
        snprintf(k, sizeof k, "%d", i);
        snprintf(path, sizeof path, "seats.%d.%d", seats[i].row, seats[i].col);
        bson_append_document_begin(&and, k, -1, &sel);
        bson_append_int32(&sel, path, -1, 0);
        bson_append_document_end(&and, &sel);
        bson_append_int32(&set, path, -1, 1);
    }
    bson_append_array_end(q, &and);
    bson_append_document_end(u, &set);
}

int pt_theater_create(md_db *db, int64_t theater_id, const char *name, int rows, int cols,
                      md_error *err)
{
    if (rows <= 0 || cols <= 0)
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE, "bad theater size %dx%d", rows,
                            cols);
    bson_t doc = BSON_INITIALIZER;
    BSON_APPEND_INT64(&doc, "_id", theater_id);
    BSON_APPEND_UTF8(&doc, "name", name);
    th_append_plan(&doc, rows, cols);
    BSON_APPEND_INT64(&doc, "seatsAvailable", (int64_t)rows * cols);
    md_collection *c = md_db_get_collection(db, TH_THEATERS);
    int rc = md_collection_insert_one(c, &doc, NULL, NULL, err);
    md_collection_destroy(c);
    bson_destroy(&doc);
    return rc;
}

/*
 * Book op 1: the theater's seat map becomes the session's.  The book's
 * sessions.insert({ , "name" ...}) has a stray comma and no theaterId; the
 * simulator stores theaterId, as here.
 */
int pt_theater_add_session(md_db *db, int64_t theater_id, int64_t session_id, const char *name,
                           const char *description, int64_t start_ms, int64_t end_ms,
                           int64_t price, md_error *err)
{
    bson_t theater, doc = BSON_INITIALIZER, empty;
    bson_t *q = BCON_NEW("_id", BCON_INT64(theater_id));
    bson_iter_t it;
    int rc = pt_find_one(db, TH_THEATERS, q, NULL, &theater, err);
    bson_destroy(q);
    if (rc != 0)
        return rc == MD_NOTFOUND ? md_error_set(err, MD_NOTFOUND, MD_CODE_NO_SUCH_KEY,
                                                "no theater %lld", (long long)theater_id)
                                 : rc;
    BSON_APPEND_INT64(&doc, "_id", session_id);
    BSON_APPEND_INT64(&doc, "theaterId", theater_id);
    BSON_APPEND_UTF8(&doc, "name", name);
    BSON_APPEND_UTF8(&doc, "description", description);
    BSON_APPEND_DATE_TIME(&doc, "start", start_ms);
    BSON_APPEND_DATE_TIME(&doc, "end", end_ms);
    BSON_APPEND_INT64(&doc, "price", price);
    BSON_APPEND_INT64(&doc, "seatsAvailable", th_i64(&theater, "seatsAvailable", 0));
    if (bson_iter_init_find(&it, &theater, "seats"))
        bson_append_iter(&doc, "seats", -1, &it);
    BSON_APPEND_ARRAY_BEGIN(&doc, "reservations", &empty);
    bson_append_array_end(&doc, &empty);
    md_collection *c = md_db_get_collection(db, TH_SESSIONS);
    rc = md_collection_insert_one(c, &doc, NULL, NULL, err);
    md_collection_destroy(c);
    bson_destroy(&doc);
    bson_destroy(&theater);
    return rc;
}

int pt_theater_cart_create(md_db *db, int64_t cart_id, md_error *err)
{
    int64_t now = pt_now_ms();
    bson_t *doc = BCON_NEW("_id", BCON_INT64(cart_id), "state", BCON_UTF8("active"), "total",
                           BCON_INT64(0), "reservations", "[", "]", "modifiedOn",
                           BCON_DATE_TIME(now), "createdOn", BCON_DATE_TIME(now));
    md_collection *c = md_db_get_collection(db, TH_CARTS);
    int rc = md_collection_insert_one(c, doc, NULL, NULL, err);
    md_collection_destroy(c);
    bson_destroy(doc);
    return rc;
}

/*
 * Book op 4, corrected: the book's release is
 *   sessions.update({_id: sessionId}, {$set: {"seats.r.c": 0}, $pull: {reservations: {_id: cartId}}})
 * and never gives the seats back to seatsAvailable; here $inc +n does.  The
 * filter also requires the reservation itself ({_id: cartId, seats}) so a
 * release that runs twice (a compensation racing an expiry, a rerun after
 * a stop) frees the seats once and never frees seats another cart has
 * taken since.
 */
int pt_theater_release(md_db *db, int64_t session_id, int64_t cart_id, const pt_seat *seats,
                       int n, md_error *err)
{
    bson_t q = BSON_INITIALIZER, u = BSON_INITIALIZER, em, in, set, inc, pull, pr;
    char path[64];
    int64_t nmod = 0;
    BSON_APPEND_INT64(&q, "_id", session_id);
    BSON_APPEND_DOCUMENT_BEGIN(&q, "reservations", &em);
    BSON_APPEND_DOCUMENT_BEGIN(&em, "$elemMatch", &in);
    BSON_APPEND_INT64(&in, "_id", cart_id);
    th_append_seats(&in, "seats", seats, n);
    bson_append_document_end(&em, &in);
    bson_append_document_end(&q, &em);

    BSON_APPEND_DOCUMENT_BEGIN(&u, "$set", &set);
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "seats.%d.%d", seats[i].row, seats[i].col);
        bson_append_int32(&set, path, -1, 0);
    }
    bson_append_document_end(&u, &set);
    BSON_APPEND_DOCUMENT_BEGIN(&u, "$inc", &inc);
    BSON_APPEND_INT64(&inc, "seatsAvailable", n);
    bson_append_document_end(&u, &inc);
    BSON_APPEND_DOCUMENT_BEGIN(&u, "$pull", &pull);
    BSON_APPEND_DOCUMENT_BEGIN(&pull, "reservations", &pr);
    BSON_APPEND_INT64(&pr, "_id", cart_id);
    th_append_seats(&pr, "seats", seats, n);
    bson_append_document_end(&pull, &pr);
    bson_append_document_end(&u, &pull);

    int rc = th_update(db, TH_SESSIONS, &q, &u, false, &nmod, err);
    bson_destroy(&q);
    bson_destroy(&u);
    if (rc == 0 && nmod == 0)
        rc = MD_NOTFOUND;
    return rc;
}

/*
 * Book ops 2 and 3.  The book reads the session with sessions.find (meant:
 * findOne) for its price; its expanded example has $inc seatsAvailable +2
 * where the generic code (followed here) has -seats.length.  The cart
 * update also requires state "active" so that a cart expired meanwhile
 * refuses the seats, which are then released (the book's "on failure,
 * release the seats").
 */
int pt_theater_reserve(md_db *db, int64_t cart_id, int64_t session_id, const pt_seat *seats,
                       int n, const pt_theater_opts *o, md_error *err)
{
    bson_t session, q = BSON_INITIALIZER, u = BSON_INITIALIZER, set, inc, push, res;
    int64_t nmod = 0, price;
    int writes = 0, rc;
    if (n <= 0)
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE, "no seats to reserve");

    bson_t *sq = BCON_NEW("_id", BCON_INT64(session_id));
    bson_t *proj = BCON_NEW("price", BCON_INT32(1));
    rc = pt_find_one(db, TH_SESSIONS, sq, proj, &session, err);
    bson_destroy(sq);
    bson_destroy(proj);
    if (rc != 0)
        return rc;
    price = th_i64(&session, "price", 0);
    bson_destroy(&session);

    /* 1: take the seats, all or none */
    BSON_APPEND_INT64(&q, "_id", session_id);
    th_append_take_seats(&q, &u, seats, n);
    BSON_APPEND_DOCUMENT_BEGIN(&u, "$inc", &inc);
    BSON_APPEND_INT64(&inc, "seatsAvailable", -(int64_t)n);
    bson_append_document_end(&u, &inc);
    BSON_APPEND_DOCUMENT_BEGIN(&u, "$push", &push);
    BSON_APPEND_DOCUMENT_BEGIN(&push, "reservations", &res);
    BSON_APPEND_INT64(&res, "_id", cart_id);
    th_append_seats(&res, "seats", seats, n);
    BSON_APPEND_INT64(&res, "price", price);
    BSON_APPEND_INT64(&res, "total", price * n);
    bson_append_document_end(&push, &res);
    bson_append_document_end(&u, &push);
    rc = th_update(db, TH_SESSIONS, &q, &u, false, &nmod, err);
    bson_destroy(&q);
    bson_destroy(&u);
    if (rc != 0)
        return rc;
    if (nmod == 0)
        return md_error_set(err, MD_NOTFOUND, MD_CODE_OK, "seats taken in session %lld",
                            (long long)session_id);
    if (th_crash(o, &writes))
        return PT_THEATER_CRASHED;

    /* 2: put the reservation in the cart */
    bson_init(&q);
    bson_init(&u);
    BSON_APPEND_INT64(&q, "_id", cart_id);
    BSON_APPEND_UTF8(&q, "state", "active");
    BSON_APPEND_DOCUMENT_BEGIN(&u, "$push", &push);
    BSON_APPEND_DOCUMENT_BEGIN(&push, "reservations", &res);
    BSON_APPEND_INT64(&res, "sessionId", session_id);
    th_append_seats(&res, "seats", seats, n);
    BSON_APPEND_INT64(&res, "price", price);
    BSON_APPEND_INT64(&res, "total", price * n);
    bson_append_document_end(&push, &res);
    bson_append_document_end(&u, &push);
    BSON_APPEND_DOCUMENT_BEGIN(&u, "$inc", &inc);
    BSON_APPEND_INT64(&inc, "total", price * n);
    bson_append_document_end(&u, &inc);
    BSON_APPEND_DOCUMENT_BEGIN(&u, "$set", &set);
    BSON_APPEND_DATE_TIME(&set, "modifiedOn", pt_now_ms());
    bson_append_document_end(&u, &set);
    rc = th_update(db, TH_CARTS, &q, &u, false, &nmod, err);
    bson_destroy(&q);
    bson_destroy(&u);
    if (rc != 0)
        return rc;
    if (nmod == 0) {
        /* the cart is gone or no longer active: give the seats back (an
         * expiry sweep may have done it already: then MD_NOTFOUND) */
        rc = pt_theater_release(db, session_id, cart_id, seats, n, err);
        if (rc != 0 && rc != MD_NOTFOUND)
            return rc;
        return md_error_set(err, MD_NOTFOUND, MD_CODE_OK, "cart %lld is not active",
                            (long long)cart_id);
    }
    return 0;
}

/* receipts.insert({_id: cartId, createdOn, reservations, total}); a receipt
 * already there (a checkout finished twice) is fine. */
static int th_insert_receipt(md_db *db, const bson_t *cart, md_error *err)
{
    bson_t doc = BSON_INITIALIZER;
    bson_iter_t it;
    md_error e2;
    if (bson_iter_init_find(&it, cart, "_id"))
        bson_append_iter(&doc, "_id", 3, &it);
    BSON_APPEND_DATE_TIME(&doc, "createdOn", pt_now_ms());
    if (bson_iter_init_find(&it, cart, "reservations"))
        bson_append_iter(&doc, "reservations", -1, &it);
    BSON_APPEND_INT64(&doc, "total", th_i64(cart, "total", 0));
    md_collection *c = md_db_get_collection(db, TH_RECEIPTS);
    int rc = md_collection_insert_one(c, &doc, NULL, NULL, &e2);
    md_collection_destroy(c);
    bson_destroy(&doc);
    if (rc == MD_EDUPKEY || (rc != 0 && e2.code == MD_CODE_DUPLICATE_KEY))
        return 0;
    if (rc != 0 && err)
        *err = e2;
    return rc;
}

/*
 * Book op 5.  The book: findOne the cart, insert the receipt,
 * session.update({"reservations._id": cartId}, {$pull: {reservations: {_id:
 * id}}}, false, true) (meant: sessions and cartId), then set the cart done.
 * Here the cart is claimed first -- findAndModify active -> done -- so an
 * expiry cannot release what the receipt is about to sell.
 */
int pt_theater_checkout(md_db *db, int64_t cart_id, const pt_theater_opts *o, md_error *err)
{
    md_collection *carts = md_db_get_collection(db, TH_CARTS);
    bson_t reply, cart;
    bson_iter_t it;
    int writes = 0;
    int64_t now = pt_now_ms();
    bson_t *q = BCON_NEW("_id", BCON_INT64(cart_id), "state", BCON_UTF8("active"));
    bson_t *opts = BCON_NEW("update", "{", "$set", "{", "state", BCON_UTF8("done"), "modifiedOn",
                            BCON_DATE_TIME(now), "}", "}", "new", BCON_BOOL(true));
    int rc = md_collection_find_and_modify(carts, q, opts, &reply, err);
    bson_destroy(q);
    bson_destroy(opts);
    md_collection_destroy(carts);
    if (rc != 0) {
        bson_destroy(&reply);
        return rc;
    }
    if (!bson_iter_init_find(&it, &reply, "value") || !BSON_ITER_HOLDS_DOCUMENT(&it)) {
        bson_destroy(&reply);
        return md_error_set(err, MD_NOTFOUND, MD_CODE_OK, "cart %lld is not active",
                            (long long)cart_id);
    }
    {
        uint32_t len;
        const uint8_t *data;
        bson_iter_document(&it, &len, &data);
        bson_init_static(&cart, data, len);
    }
    if (th_crash(o, &writes))
        goto out_crashed;

    rc = th_insert_receipt(db, &cart, err);
    if (rc != 0)
        goto out;
    if (th_crash(o, &writes))
        goto out_crashed;

    q = BCON_NEW("reservations._id", BCON_INT64(cart_id));
    bson_t *u = BCON_NEW("$pull", "{", "reservations", "{", "_id", BCON_INT64(cart_id), "}", "}");
    rc = th_update(db, TH_SESSIONS, q, u, true, NULL, err);
    bson_destroy(q);
    bson_destroy(u);
out:
    bson_destroy(&reply);
    return rc;
out_crashed:
    bson_destroy(&reply);
    return PT_THEATER_CRASHED;
}

/* ---- expiry and the recovery sweep ---------------------------------------- */

typedef struct th_hold {
    int64_t session_id, cart_id;
    pt_seat *seats;
    int n;
} th_hold;

/* Every reservation held by sessions matching `filter` (only those of
 * `cart_id` unless it is -1).  Caller frees with th_holds_free. */
static int th_collect_holds(md_db *db, const bson_t *filter, int64_t cart_id, th_hold **out,
                            size_t *nout, md_error *err)
{
    md_collection *c = md_db_get_collection(db, TH_SESSIONS);
    bson_t *opts = BCON_NEW("projection", "{", "reservations", BCON_INT32(1), "}");
    md_cursor *cur = md_collection_find_with_opts(c, filter, opts);
    const bson_t *doc;
    th_hold *h = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    while (rc == 0 && md_cursor_next(cur, &doc)) {
        bson_iter_t it, arr, r;
        int64_t sid = th_i64(doc, "_id", -1);
        if (!bson_iter_init_find(&it, doc, "reservations") || !bson_iter_recurse(&it, &arr))
            continue;
        while (rc == 0 && bson_iter_next(&arr)) {
            bson_t res;
            uint32_t len;
            const uint8_t *data;
            if (!BSON_ITER_HOLDS_DOCUMENT(&arr))
                continue;
            bson_iter_document(&arr, &len, &data);
            bson_init_static(&res, data, len);
            int64_t cid = th_i64(&res, "_id", -1);
            if (cart_id != -1 && cid != cart_id)
                continue;
            if (n == cap) {
                th_hold *g = realloc(h, sizeof *h * (cap = cap ? cap * 2 : 16));
                if (!g) {
                    rc = MD_ENOMEM;
                    break;
                }
                h = g;
            }
            h[n].session_id = sid;
            h[n].cart_id = cid;
            if (!bson_iter_init_find(&r, &res, "seats") ||
                th_parse_seats(&r, &h[n].seats, &h[n].n) != 0) {
                rc = md_error_set(err, MD_ECORRUPT, MD_CODE_BAD_VALUE,
                                  "session %lld: bad reservation", (long long)sid);
                break;
            }
            n++;
        }
    }
    if (rc == 0 && md_cursor_error(cur, err))
        rc = MD_ERROR;
    md_cursor_destroy(cur);
    bson_destroy(opts);
    md_collection_destroy(c);
    *out = h;
    *nout = n;
    return rc;
}

static void th_holds_free(th_hold *h, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(h[i].seats);
    free(h);
}

/* Does cart document `cart` list a reservation of `h`'s seats in its session? */
static bool th_cart_lists(const bson_t *cart, const th_hold *h)
{
    bson_iter_t it, arr, s;
    if (!bson_iter_init_find(&it, cart, "reservations") || !bson_iter_recurse(&it, &arr))
        return false;
    while (bson_iter_next(&arr)) {
        bson_t res;
        uint32_t len;
        const uint8_t *data;
        pt_seat *seats;
        int n;
        bool same;
        if (!BSON_ITER_HOLDS_DOCUMENT(&arr))
            continue;
        bson_iter_document(&arr, &len, &data);
        bson_init_static(&res, data, len);
        if (th_i64(&res, "sessionId", -1) != h->session_id ||
            !bson_iter_init_find(&s, &res, "seats") || th_parse_seats(&s, &seats, &n) != 0)
            continue;
        same = n == h->n && memcmp(seats, h->seats, sizeof *seats * (size_t)n) == 0;
        free(seats);
        if (same)
            return true;
    }
    return false;
}

/* Release every reservation in `h`; MD_NOTFOUND (already released) is fine. */
static int th_release_holds(md_db *db, th_hold *h, size_t n, const pt_theater_opts *o,
                            int *writes, md_error *err)
{
    for (size_t i = 0; i < n; i++) {
        int rc = pt_theater_release(db, h[i].session_id, h[i].cart_id, h[i].seats, h[i].n, err);
        if (rc != 0 && rc != MD_NOTFOUND)
            return rc;
        if (th_crash(o, writes))
            return PT_THEATER_CRASHED;
    }
    return 0;
}

/*
 * The book's expiry for one stale cart, corrected: claim it (active ->
 * expired; the book sets `status` after releasing), release each of its
 * reservations by sessionId (the book uses reservation._id, and its nested
 * loops share `i`), then any reservation of the cart the cart never
 * recorded (a client stopped between reserve's two writes).
 */
static int th_expire_cart(md_db *db, int64_t cart_id, int64_t cutoff_ms,
                          const pt_theater_opts *o, int *writes, bool *expired, md_error *err)
{
    md_collection *carts = md_db_get_collection(db, TH_CARTS);
    bson_t reply, cart;
    bson_iter_t it, arr;
    th_hold *h = NULL;
    size_t nh = 0, cap = 0;
    *expired = false;
    bson_t *q = BCON_NEW("_id", BCON_INT64(cart_id), "state", BCON_UTF8("active"), "modifiedOn",
                         "{", "$lte", BCON_DATE_TIME(cutoff_ms), "}");
    bson_t *opts = BCON_NEW("update", "{", "$set", "{", "state", BCON_UTF8("expired"), "}", "}",
                            "new", BCON_BOOL(true));
    int rc = md_collection_find_and_modify(carts, q, opts, &reply, err);
    bson_destroy(q);
    bson_destroy(opts);
    md_collection_destroy(carts);
    if (rc != 0 || !bson_iter_init_find(&it, &reply, "value") || !BSON_ITER_HOLDS_DOCUMENT(&it))
        goto out; /* an error, or someone else took the cart first */
    *expired = true;
    {
        uint32_t len;
        const uint8_t *data;
        bson_iter_document(&it, &len, &data);
        bson_init_static(&cart, data, len);
    }
    if (th_crash(o, writes)) {
        rc = PT_THEATER_CRASHED;
        goto out;
    }
    if (bson_iter_init_find(&it, &cart, "reservations") && bson_iter_recurse(&it, &arr)) {
        while (bson_iter_next(&arr)) {
            bson_t res;
            uint32_t len;
            const uint8_t *data;
            bson_iter_t s;
            if (!BSON_ITER_HOLDS_DOCUMENT(&arr))
                continue;
            bson_iter_document(&arr, &len, &data);
            bson_init_static(&res, data, len);
            if (nh == cap) {
                th_hold *g = realloc(h, sizeof *h * (cap = cap ? cap * 2 : 8));
                if (!g) {
                    rc = MD_ENOMEM;
                    goto out;
                }
                h = g;
            }
            h[nh].session_id = th_i64(&res, "sessionId", -1);
            h[nh].cart_id = cart_id;
            if (!bson_iter_init_find(&s, &res, "seats") ||
                th_parse_seats(&s, &h[nh].seats, &h[nh].n) != 0) {
                rc = md_error_set(err, MD_ECORRUPT, MD_CODE_BAD_VALUE, "cart %lld: bad reservation",
                                  (long long)cart_id);
                goto out;
            }
            nh++;
        }
    }
    rc = th_release_holds(db, h, nh, o, writes, err);
    th_holds_free(h, nh);
    h = NULL;
    nh = 0;
    if (rc != 0)
        goto out;
    /* reservations the cart never recorded */
    q = BCON_NEW("reservations._id", BCON_INT64(cart_id));
    rc = th_collect_holds(db, q, cart_id, &h, &nh, err);
    bson_destroy(q);
    if (rc == 0)
        rc = th_release_holds(db, h, nh, o, writes, err);
out:
    th_holds_free(h, nh);
    bson_destroy(&reply);
    return rc;
}

/*
 * The sweep: every reservation a session still holds whose cart is not
 * active.  A done cart's reservation that the cart lists was sold by a
 * checkout that stopped before pulling it: write the receipt if missing
 * and pull it.  Anything else (expired, canceled or unknown cart, or a
 * done cart that never recorded it) is released.
 */
static int th_sweep(md_db *db, const pt_theater_opts *o, int *writes, md_error *err)
{
    th_hold *h;
    size_t nh;
    bson_t *f = BCON_NEW("reservations.0", "{", "$exists", BCON_BOOL(true), "}");
    int rc = th_collect_holds(db, f, -1, &h, &nh, err);
    bson_destroy(f);
    for (size_t i = 0; rc == 0 && i < nh; i++) {
        bson_t cart;
        bson_t *q = BCON_NEW("_id", BCON_INT64(h[i].cart_id));
        rc = pt_find_one(db, TH_CARTS, q, NULL, &cart, err);
        bson_destroy(q);
        if (rc != 0 && rc != MD_NOTFOUND)
            break;
        bool found = rc == 0;
        const char *state = found ? th_str(&cart, "state") : "";
        rc = 0;
        if (strcmp(state, "active") == 0) {
            /* a live cart: stale ones were expired above */
        } else if (strcmp(state, "done") == 0 && th_cart_lists(&cart, &h[i])) {
            rc = th_insert_receipt(db, &cart, err);
            if (rc == 0 && th_crash(o, writes))
                rc = PT_THEATER_CRASHED;
            if (rc == 0) {
                bson_t *sq = BCON_NEW("_id", BCON_INT64(h[i].session_id));
                bson_t u = BSON_INITIALIZER, pull, pr;
                BSON_APPEND_DOCUMENT_BEGIN(&u, "$pull", &pull);
                BSON_APPEND_DOCUMENT_BEGIN(&pull, "reservations", &pr);
                BSON_APPEND_INT64(&pr, "_id", h[i].cart_id);
                th_append_seats(&pr, "seats", h[i].seats, h[i].n);
                bson_append_document_end(&pull, &pr);
                bson_append_document_end(&u, &pull);
                rc = th_update(db, TH_SESSIONS, sq, &u, false, NULL, err);
                bson_destroy(sq);
                bson_destroy(&u);
                if (rc == 0 && th_crash(o, writes))
                    rc = PT_THEATER_CRASHED;
            }
        } else {
            rc = th_release_holds(db, &h[i], 1, o, writes, err);
        }
        if (found)
            bson_destroy(&cart);
    }
    th_holds_free(h, nh);
    return rc;
}

/* Book op 6: carts.find({modifiedOn: {$lte: cutOffDate}, state: "active"}). */
int pt_theater_expire(md_db *db, int64_t cutoff_ms, const pt_theater_opts *o, int *nexpired,
                      md_error *err)
{
    md_collection *carts = md_db_get_collection(db, TH_CARTS);
    bson_t *f = BCON_NEW("modifiedOn", "{", "$lte", BCON_DATE_TIME(cutoff_ms), "}", "state",
                         BCON_UTF8("active"));
    bson_t *opts = BCON_NEW("projection", "{", "_id", BCON_INT32(1), "}");
    md_cursor *cur = md_collection_find_with_opts(carts, f, opts);
    const bson_t *doc;
    int64_t *ids = NULL;
    size_t n = 0, cap = 0;
    int rc = 0, writes = 0, count = 0;
    while (md_cursor_next(cur, &doc)) {
        if (n == cap) {
            int64_t *g = realloc(ids, sizeof *ids * (cap = cap ? cap * 2 : 64));
            if (!g) {
                rc = MD_ENOMEM;
                break;
            }
            ids = g;
        }
        ids[n++] = th_i64(doc, "_id", -1);
    }
    if (rc == 0 && md_cursor_error(cur, err))
        rc = MD_ERROR;
    md_cursor_destroy(cur);
    bson_destroy(f);
    bson_destroy(opts);
    md_collection_destroy(carts);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        bool expired;
        rc = th_expire_cart(db, ids[i], cutoff_ms, o, &writes, &expired, err);
        count += expired;
    }
    free(ids);
    if (rc == 0)
        rc = th_sweep(db, o, &writes, err);
    if (nexpired)
        *nexpired = count;
    return rc;
}

/* ---- the invariants --------------------------------------------------------- */

typedef struct th_sess {
    int64_t id, seats_available;
    int nrows, nseats;
    int *rowoff;       /* nrows + 1 offsets into val/holder/count */
    int *val;          /* 0 / 1 */
    int64_t *holder;   /* the cart holding the seat */
    int *count;        /* how many holdings name the seat */
} th_sess;

typedef struct th_view {
    th_sess *s;
    size_t n;
} th_view;

static void th_view_free(th_view *v)
{
    for (size_t i = 0; i < v->n; i++) {
        free(v->s[i].rowoff);
        free(v->s[i].val);
        free(v->s[i].holder);
        free(v->s[i].count);
    }
    free(v->s);
}

static int th_sess_cmp(const void *a, const void *b)
{
    int64_t x = ((const th_sess *)a)->id, y = ((const th_sess *)b)->id;
    return (x > y) - (x < y);
}

static th_sess *th_view_find(th_view *v, int64_t id)
{
    th_sess key = {.id = id};
    return bsearch(&key, v->s, v->n, sizeof *v->s, th_sess_cmp);
}

/* One session's seat map into s (rows may be jagged). */
static int th_load_seats(const bson_t *doc, th_sess *s)
{
    bson_iter_t it, rows, row;
    int cap = 0, nrows = 0, nseats = 0;
    if (!bson_iter_init_find(&it, doc, "seats") || !bson_iter_recurse(&it, &rows))
        return MD_ECORRUPT;
    while (bson_iter_next(&rows)) {
        nrows++;
        if (!bson_iter_recurse(&rows, &row))
            return MD_ECORRUPT;
        while (bson_iter_next(&row))
            nseats++;
    }
    cap = nseats ? nseats : 1;
    s->rowoff = calloc((size_t)nrows + 1, sizeof *s->rowoff);
    s->val = calloc((size_t)cap, sizeof *s->val);
    s->holder = calloc((size_t)cap, sizeof *s->holder);
    s->count = calloc((size_t)cap, sizeof *s->count);
    if (!s->rowoff || !s->val || !s->holder || !s->count)
        return MD_ENOMEM;
    s->nrows = nrows;
    s->nseats = nseats;
    bson_iter_init_find(&it, doc, "seats");
    bson_iter_recurse(&it, &rows);
    int r = 0, k = 0;
    while (bson_iter_next(&rows)) {
        s->rowoff[r++] = k;
        bson_iter_recurse(&rows, &row);
        while (bson_iter_next(&row))
            s->val[k++] = (int)bson_iter_as_int64(&row);
    }
    s->rowoff[r] = k;
    return 0;
}

/* Note that cart `cart` holds seats[0..n) of session `sid`. */
static int th_hold_seats(th_view *v, int64_t sid, int64_t cart, const pt_seat *seats, int n,
                         const char *what, md_error *err)
{
    th_sess *s = th_view_find(v, sid);
    if (!s)
        return md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE, "%s of cart %lld names session %lld,"
                            " which does not exist", what, (long long)cart, (long long)sid);
    for (int i = 0; i < n; i++) {
        int r = seats[i].row, c = seats[i].col;
        if (r < 0 || r >= s->nrows || c < 0 || c >= s->rowoff[r + 1] - s->rowoff[r])
            return md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE, "%s of cart %lld: no seat [%d,%d]"
                                " in session %lld", what, (long long)cart, r, c, (long long)sid);
        int k = s->rowoff[r] + c;
        if (s->val[k] != 1)
            return md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE, "%s of cart %lld holds seat [%d,%d]"
                                " of session %lld, which is free", what, (long long)cart, r, c,
                                (long long)sid);
        if (s->count[k] > 0 && s->holder[k] != cart)
            return md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE, "seat [%d,%d] of session %lld is"
                                " held by carts %lld and %lld", r, c, (long long)sid,
                                (long long)s->holder[k], (long long)cart);
        s->holder[k] = cart;
        s->count[k]++;
    }
    return 0;
}

/* Walk an array of reservations {<idkey>, seats} into the view. */
static int th_hold_array(th_view *v, const bson_t *doc, int64_t sid, int64_t cart,
                         const char *what, md_error *err)
{
    bson_iter_t it, arr, s;
    if (!bson_iter_init_find(&it, doc, "reservations") || !bson_iter_recurse(&it, &arr))
        return 0;
    while (bson_iter_next(&arr)) {
        bson_t res;
        uint32_t len;
        const uint8_t *data;
        pt_seat *seats;
        int n, rc;
        if (!BSON_ITER_HOLDS_DOCUMENT(&arr))
            return md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE, "%s: not a document", what);
        bson_iter_document(&arr, &len, &data);
        bson_init_static(&res, data, len);
        int64_t s_id = sid >= 0 ? sid : th_i64(&res, "sessionId", -1);
        int64_t c_id = cart >= 0 ? cart : th_i64(&res, "_id", -1);
        if (!bson_iter_init_find(&s, &res, "seats") || th_parse_seats(&s, &seats, &n) != 0)
            return md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE, "%s: bad seats", what);
        rc = th_hold_seats(v, s_id, c_id, seats, n, what, err);
        free(seats);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int th_load_session(const bson_t *doc, void *slot, md_error *err)
{
    th_sess *s = slot;
    s->id = th_i64(doc, "_id", -1);
    s->seats_available = th_i64(doc, "seatsAvailable", -1);
    int rc = th_load_seats(doc, s);
    if (rc != 0)
        md_error_set(err, rc, MD_CODE_BAD_VALUE, "session %lld: bad seat map", (long long)s->id);
    return rc;
}

static int th_load_sessions(md_db *db, th_view *v, md_error *err)
{
    void *arr = v->s;
    int rc = pt_load_sorted(db, TH_SESSIONS, &arr, &v->n, sizeof *v->s, th_load_session,
                            th_sess_cmp, err);
    v->s = arr;
    return rc;
}

static int th_session_holds(const bson_t *doc, void *arg, md_error *err)
{
    return th_hold_array(arg, doc, th_i64(doc, "_id", -1), -1, "a session reservation", err);
}

static int th_receipt_holds(const bson_t *doc, void *arg, md_error *err)
{
    return th_hold_array(arg, doc, -1, th_i64(doc, "_id", -1), "a receipt", err);
}

/* Holdings by session reservations (and, if settled, their carts active). */
static int th_check_session_holds(md_db *db, th_view *v, bool settled, md_error *err)
{
    int rc = pt_each_doc(db, TH_SESSIONS, th_session_holds, v, NULL, err);
    if (rc != 0 || !settled)
        return rc;
    th_hold *h;
    size_t nh;
    bson_t *f = BCON_NEW("reservations.0", "{", "$exists", BCON_BOOL(true), "}");
    rc = th_collect_holds(db, f, -1, &h, &nh, err);
    bson_destroy(f);
    for (size_t i = 0; rc == 0 && i < nh; i++) {
        bson_t cart;
        bson_t *q = BCON_NEW("_id", BCON_INT64(h[i].cart_id));
        int frc = pt_find_one(db, TH_CARTS, q, NULL, &cart, err);
        bson_destroy(q);
        if (frc != 0 && frc != MD_NOTFOUND) {
            rc = frc;
            break;
        }
        const char *state = frc == 0 ? th_str(&cart, "state") : "(no cart)";
        if (strcmp(state, "active") != 0)
            rc = md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE, "session %lld still holds a"
                              " reservation of cart %lld, which is %s",
                              (long long)h[i].session_id, (long long)h[i].cart_id, state);
        if (frc == 0)
            bson_destroy(&cart);
    }
    th_holds_free(h, nh);
    return rc;
}

static int th_check_receipts(md_db *db, th_view *v, md_error *err)
{
    return pt_each_doc(db, TH_RECEIPTS, th_receipt_holds, v, NULL, err);
}

int pt_theater_check(md_db *db, bool settled, md_error *err)
{
    th_view v = {0};
    int rc = th_load_sessions(db, &v, err);
    if (rc == 0)
        rc = th_check_session_holds(db, &v, settled, err);
    if (rc == 0)
        rc = th_check_receipts(db, &v, err);
    for (size_t i = 0; rc == 0 && i < v.n; i++) {
        th_sess *s = &v.s[i];
        int64_t zeros = 0;
        for (int r = 0; rc == 0 && r < s->nrows; r++)
            for (int k = s->rowoff[r]; rc == 0 && k < s->rowoff[r + 1]; k++) {
                int c = k - s->rowoff[r];
                if (s->val[k] == 0) {
                    zeros++;
                } else if (s->val[k] != 1) {
                    rc = md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE, "session %lld seat [%d,%d]"
                                      " is %d", (long long)s->id, r, c, s->val[k]);
                } else if (s->count[k] == 0) {
                    rc = md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE, "session %lld seat [%d,%d]"
                                      " is taken by no cart", (long long)s->id, r, c);
                } else if (settled && s->count[k] != 1) {
                    rc = md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE, "session %lld seat [%d,%d]"
                                      " is held %d times by cart %lld", (long long)s->id, r, c,
                                      s->count[k], (long long)s->holder[k]);
                }
            }
        if (rc == 0 && zeros != s->seats_available)
            rc = md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE, "session %lld: seatsAvailable %lld"
                              " but %lld free seats", (long long)s->id,
                              (long long)s->seats_available, (long long)zeros);
    }
    th_view_free(&v);
    return rc;
}
