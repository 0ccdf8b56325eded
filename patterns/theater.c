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
 * The scenario (theater_checkout, at the end of the file) runs what the
 * book's simulator ran instead: its documents, its seven requests a user
 * and its choice of session, a fresh one per user at the book's load.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "patterns.h"
#include "pt_sim.h"

#define TH_CARTS "carts"
#define TH_SESSIONS "sessions"
#define TH_THEATERS "theaters"
#define TH_RECEIPTS "receipts"

/* ---- small helpers over the public API ----------------------------------- */

/* One update (multi or not); *nmod gets modifiedCount. */
static int th_update(md_db *db, const char *coll, const bson_t *q, const bson_t *u, bool multi,
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

static void th_append_seats(bson_t *parent, const char *key, const pt_seat *s, int n)
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
static int th_parse_seats(const bson_iter_t *arr_it, pt_seat **out, int *n)
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

static int64_t th_i64(const bson_t *doc, const char *path, int64_t dflt)
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
static void th_append_plan(bson_t *doc, int rows, int cols)
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
    bson_t session, q = BSON_INITIALIZER, u = BSON_INITIALIZER, and, sel, set, inc, push, res;
    char path[64], k[16];
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
    BSON_APPEND_ARRAY_BEGIN(&q, "$and", &and);
    BSON_APPEND_DOCUMENT_BEGIN(&u, "$set", &set);
    for (int i = 0; i < n; i++) {
        snprintf(k, sizeof k, "%d", i);
        snprintf(path, sizeof path, "seats.%d.%d", seats[i].row, seats[i].col);
        bson_append_document_begin(&and, k, -1, &sel);
        bson_append_int32(&sel, path, -1, 0);
        bson_append_document_end(&and, &sel);
        bson_append_int32(&set, path, -1, 1);
    }
    bson_append_array_end(&q, &and);
    bson_append_document_end(&u, &set);
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

static int th_load_sessions(md_db *db, th_view *v, md_error *err)
{
    md_collection *c = md_db_get_collection(db, TH_SESSIONS);
    bson_t filter = BSON_INITIALIZER;
    md_cursor *cur = md_collection_find_with_opts(c, &filter, NULL);
    const bson_t *doc;
    size_t cap = 0;
    int rc = 0;
    while (rc == 0 && md_cursor_next(cur, &doc)) {
        if (v->n == cap) {
            th_sess *g = realloc(v->s, sizeof *g * (cap = cap ? cap * 2 : 64));
            if (!g) {
                rc = MD_ENOMEM;
                break;
            }
            v->s = g;
        }
        th_sess *s = &v->s[v->n++];
        memset(s, 0, sizeof *s);
        s->id = th_i64(doc, "_id", -1);
        s->seats_available = th_i64(doc, "seatsAvailable", -1);
        rc = th_load_seats(doc, s);
        if (rc != 0)
            md_error_set(err, rc, MD_CODE_BAD_VALUE, "session %lld: bad seat map",
                         (long long)s->id);
    }
    if (rc == 0 && md_cursor_error(cur, err))
        rc = MD_ERROR;
    md_cursor_destroy(cur);
    md_collection_destroy(c);
    if (rc == 0)
        qsort(v->s, v->n, sizeof *v->s, th_sess_cmp);
    return rc;
}

/* Holdings by session reservations (and, if settled, their carts active). */
static int th_check_session_holds(md_db *db, th_view *v, bool settled, md_error *err)
{
    md_collection *c = md_db_get_collection(db, TH_SESSIONS);
    bson_t filter = BSON_INITIALIZER;
    md_cursor *cur = md_collection_find_with_opts(c, &filter, NULL);
    const bson_t *doc;
    int rc = 0;
    while (rc == 0 && md_cursor_next(cur, &doc))
        rc = th_hold_array(v, doc, th_i64(doc, "_id", -1), -1, "a session reservation", err);
    if (rc == 0 && md_cursor_error(cur, err))
        rc = MD_ERROR;
    md_cursor_destroy(cur);
    md_collection_destroy(c);
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
    md_collection *c = md_db_get_collection(db, TH_RECEIPTS);
    bson_t filter = BSON_INITIALIZER;
    md_cursor *cur = md_collection_find_with_opts(c, &filter, NULL);
    const bson_t *doc;
    int rc = 0;
    while (rc == 0 && md_cursor_next(cur, &doc))
        rc = th_hold_array(v, doc, -1, th_i64(doc, "_id", -1), "a receipt", err);
    if (rc == 0 && md_cursor_error(cur, err))
        rc = MD_ERROR;
    md_cursor_destroy(cur);
    md_collection_destroy(c);
    return rc;
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

/* ---- the scenario: theater/theater_reserve_tickets_successfully.js -------- */

/*
 * The scenario runs what the book's simulator ran (its scenarios/theater.js
 * with its own Theater, Session, Cart and Receipt classes), not the
 * chapter's operations above:
 *
 *   setup, per process  indexes carts {state: 1}, sessions
 *                       {"reservations._id": 1}; 100 theaters {_id:
 *                       "<p>.<t>", name: the same, seats: 30 rows of 30
 *                       zeros, seatsAvailable: 900}; 100 sessions of each,
 *                       each theaters.findOne({_id: "<p>.<t>"}) then
 *                       sessions.insertOne({_id: "<p>.<t>.<s>", theaterId:
 *                       "<p>.<t>", name: s, description: s, start, end,
 *                       price: 10, seatsAvailable: 900, seats, reservations:
 *                       []}), about 7.3 KB
 *   one user            1 carts.insertOne({_id: cart, state: "active",
 *                         total: 0, reservations: [], modifiedOn, createdOn})
 *                       2 sessions.updateOne({_id, theaterId, $and:
 *                         [{"seats.r.c": 0} x 5]}, {$set: {"seats.r.c": 1
 *                         x 5}, $inc: {seatsAvailable: -5}, $push:
 *                         {reservations: {_id: cart, seats, price, total}}})
 *                       3 carts.updateOne({_id: cart}, {$push: {reservations:
 *                         {sessionId, seats, price, total}}, $inc: {total},
 *                         $set: {modifiedOn}})
 *                       4 carts.findOne({_id: cart})
 *                       5 receipts.insertOne({createdOn, reservations})
 *                       6 sessions.updateMany({"reservations._id": cart},
 *                         {$pull: {reservations: {_id: cart}}})
 *                       7 carts.updateOne({_id: cart}, {$set: {state: "done"}})
 *
 * The values are the simulator's: <p> stands for the process's pid (here
 * its number, 0-3); the cart's _id is Math.round(Number.MAX_VALUE *
 * Math.random()), a double anywhere up to DBL_MAX; whole numbers that fit
 * are int32, as the Node driver sends them; the user's Session is made
 * without a price, so every price is undefined (the driver sends null)
 * and every total undefined * 5, NaN, which the cart's total is $inc'ed
 * by.  The receipt has no total.  A refused step (2, 3 or 7 modifying
 * nothing, 4 finding no cart) is an error here; the simulator's user gave
 * up unlogged when 2 modified nothing, released the seats and checked out
 * anyway when 3 did, and logged its time whatever 4 and 7 found.  In this
 * scenario none can happen: every user has seats no one else takes, in a
 * cart no one else touches.
 *
 * Which session: each process keeps a (theater, session, row, seat) and
 * moves each user to the next theater; past the last one, back to theater
 * 0 with the next session and the next 5 seats of the row (after the row's
 * last, the next row).  A process's k-th user (k = 1, 2, ...) thus gets
 * theater k % 100 and, with w = k / 100, session w % 100 and seats
 * [w / 6][5 (w % 6) + i], i < 5.  Users go to the book's 4 processes in
 * turn (user n: process n % 4, k = n / 4 + 1), as the processes'
 * slicetime schedules interleave.  A theater's session comes back only
 * after 10,000 users of a process, so at the book's load (250 users a
 * second per process for 25 s: 6,250) every user works on a fresh session
 * of its own.
 *
 * Past the book's load: rows wrap ((w / 6) % 30; after 18,000 users of a
 * process the simulator's reservations would name rows the map does not
 * have), and should a theater's session and seats come back within the
 * run (w reaching lcm(S, 180) with S sessions a theater), setup makes the
 * fewest sessions a theater, from 100 up, at which they do not.  With
 * `quick` (--quick, the tests) setup makes only the theaters and sessions
 * the run's users reach.
 */
#define TH_SIM_THEATERS 100 /* numberOfTheaters, per process */
#define TH_SIM_SESSIONS 100 /* numberOfSessions, per theater */
#define TH_SIM_ROWS 30      /* rows */
#define TH_SIM_COLS 30      /* seats (in a row) */
#define TH_SIM_TICKETS 5    /* numberOfTickets */
#define TH_SIM_PRICE 10     /* addSession's price */
/* the blocks of TH_SIM_TICKETS seats a session has; w % TH_SIM_BLOCKS picks one */
#define TH_SIM_PER_ROW (TH_SIM_COLS / TH_SIM_TICKETS)
#define TH_SIM_BLOCKS (TH_SIM_ROWS * TH_SIM_PER_ROW)

typedef struct th_sim {
    int64_t per_process;  /* users a process gets, at most (the largest k) */
    int64_t theaters;     /* theaters a process has */
    int64_t sessions;     /* sessions a theater has */
    int64_t total;        /* session documents made */
    atomic_llong sold;    /* users whose checkout finished */
} th_sim;

/* A user's process, theater, session and first seat. */
typedef struct th_pick {
    int process, row, col;
    int64_t k, theater, session;
} th_pick;

static void th_sim_pick(const th_sim *st, uint64_t user, th_pick *p)
{
    int64_t w;
    p->process = (int)(user % PT_BOOK_PROCESSES);
    p->k = (int64_t)(user / PT_BOOK_PROCESSES) + 1;
    p->theater = p->k % TH_SIM_THEATERS;
    w = p->k / TH_SIM_THEATERS;
    p->session = w % st->sessions;
    p->row = (int)(w / TH_SIM_PER_ROW % TH_SIM_ROWS);
    p->col = (int)(w % TH_SIM_PER_ROW) * TH_SIM_TICKETS;
}

static int64_t th_gcd(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* The setup's sizes for a run of `a->users` users (the comment above). */
static void th_sim_size(const pt_setup_args *a, th_sim *st)
{
    int64_t users = a->users > 0 ? a->users : 1;
    int64_t kmax = (users + PT_BOOK_PROCESSES - 1) / PT_BOOK_PROCESSES;
    int64_t wmax = kmax / TH_SIM_THEATERS, s = TH_SIM_SESSIONS;
    while (s / th_gcd(s, TH_SIM_BLOCKS) * TH_SIM_BLOCKS <= wmax)
        s++;
    st->per_process = kmax;
    st->theaters = TH_SIM_THEATERS;
    st->sessions = s;
    if (a->quick) {
        if (kmax + 1 < st->theaters)
            st->theaters = kmax + 1;
        if (wmax + 1 < st->sessions)
            st->sessions = wmax + 1;
    }
    st->total = PT_BOOK_PROCESSES * st->theaters * st->sessions;
}

/*
 * Math.round(Number.MAX_VALUE * Math.random()) spreads the carts' _ids
 * over the doubles up to DBL_MAX.  Here a bijection of the user's id onto
 * 53 bits (xorshifts and odd multipliers mod 2^53) times 2^971, exact: as
 * spread out, and never the same for two users (the simulator's could
 * collide and fail the cart's insert).
 */
static double th_sim_cart_id(uint64_t user)
{
    const uint64_t m = (UINT64_C(1) << 53) - 1;
    uint64_t x = user & m;
    x ^= x >> 27;
    x = (x * UINT64_C(0x3c79ac492ba7b653)) & m;
    x ^= x >> 31;
    x = (x * UINT64_C(0x1c69b3f74ac4ae35)) & m;
    x ^= x >> 27;
    return (double)x * 0x1p971;
}

static int th_insert(md_db *db, const char *coll, const bson_t *doc, md_error *err)
{
    md_collection *c = md_db_get_collection(db, coll);
    int rc = md_collection_insert_one(c, doc, NULL, NULL, err);
    md_collection_destroy(c);
    return rc;
}

/* Theater.create: {_id, name, seats, seatsAvailable}. */
static int th_sim_theater(md_db *db, const char *id, md_error *err)
{
    bson_t doc = BSON_INITIALIZER;
    BSON_APPEND_UTF8(&doc, "_id", id);
    BSON_APPEND_UTF8(&doc, "name", id);
    th_append_plan(&doc, TH_SIM_ROWS, TH_SIM_COLS);
    BSON_APPEND_INT32(&doc, "seatsAvailable", TH_SIM_ROWS * TH_SIM_COLS);
    int rc = th_insert(db, TH_THEATERS, &doc, err);
    bson_destroy(&doc);
    return rc;
}

/* Theater.addSession(s, s, new Date(), new Date(), 10, {id}): Session.create
 * reads the theater and copies its seats and seatsAvailable. */
static int th_sim_session(md_db *db, const char *theater_id, const char *id, int32_t s,
                          md_error *err)
{
    bson_t theater, doc = BSON_INITIALIZER, empty;
    bson_iter_t it;
    bson_t *q = BCON_NEW("_id", BCON_UTF8(theater_id));
    int rc = pt_find_one(db, TH_THEATERS, q, NULL, &theater, err);
    bson_destroy(q);
    if (rc == 0) {
        int64_t now = pt_now_ms();
        BSON_APPEND_UTF8(&doc, "_id", id);
        BSON_APPEND_UTF8(&doc, "theaterId", theater_id);
        BSON_APPEND_INT32(&doc, "name", s);
        BSON_APPEND_INT32(&doc, "description", s);
        BSON_APPEND_DATE_TIME(&doc, "start", now);
        BSON_APPEND_DATE_TIME(&doc, "end", now);
        BSON_APPEND_INT32(&doc, "price", TH_SIM_PRICE);
        if (bson_iter_init_find(&it, &theater, "seatsAvailable"))
            bson_append_iter(&doc, "seatsAvailable", -1, &it);
        if (bson_iter_init_find(&it, &theater, "seats"))
            bson_append_iter(&doc, "seats", -1, &it);
        BSON_APPEND_ARRAY_BEGIN(&doc, "reservations", &empty);
        bson_append_array_end(&doc, &empty);
        rc = th_insert(db, TH_SESSIONS, &doc, err);
    }
    bson_destroy(&doc);
    bson_destroy(&theater);
    return rc;
}

static int th_sim_setup(md_db *db, const pt_setup_args *a, void **state, md_error *err)
{
    th_sim *st = calloc(1, sizeof *st);
    char tid[48], sid[80];
    int rc;
    if (!st)
        return md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
    th_sim_size(a, st);
    atomic_init(&st->sold, 0);
    rc = pt_theater_create_indexes(db, err);
    for (int p = 0; rc == 0 && p < PT_BOOK_PROCESSES; p++)
        for (int64_t t = 0; rc == 0 && t < st->theaters; t++) {
            snprintf(tid, sizeof tid, "%d.%lld", p, (long long)t);
            rc = th_sim_theater(db, tid, err);
            for (int64_t s = 0; rc == 0 && s < st->sessions; s++) {
                snprintf(sid, sizeof sid, "%s.%lld", tid, (long long)s);
                rc = th_sim_session(db, tid, sid, (int32_t)s, err);
            }
        }
    if (rc != 0) {
        free(st);
        return rc;
    }
    *state = st;
    return 0;
}

/* A reservation as Session.reserve and Cart.reserve write it: {<idkey>:
 * id, seats, price: undefined (null), total: undefined * n (NaN)}. */
static void th_sim_append_reservation(bson_t *parent, const char *key, const char *idkey,
                                      const bson_value_t *id, const pt_seat *seats, int n)
{
    bson_t res;
    bson_append_document_begin(parent, key, -1, &res);
    bson_append_value(&res, idkey, -1, id);
    th_append_seats(&res, "seats", seats, n);
    BSON_APPEND_NULL(&res, "price");
    BSON_APPEND_DOUBLE(&res, "total", NAN);
    bson_append_document_end(parent, &res);
}

/* Step 2, Session.reserve.  MD_NOTFOUND: not modified (a seat taken). */
static int th_sim_reserve(md_db *db, double cart, const char *sid, const char *tid,
                          const pt_seat *seats, int n, md_error *err)
{
    bson_t q = BSON_INITIALIZER, u = BSON_INITIALIZER, and, sel, set, inc, push;
    bson_value_t cart_id = {.value_type = BSON_TYPE_DOUBLE, .value.v_double = cart};
    char path[64], k[16];
    int64_t nmod = 0;
    BSON_APPEND_UTF8(&q, "_id", sid);
    BSON_APPEND_UTF8(&q, "theaterId", tid);
    BSON_APPEND_ARRAY_BEGIN(&q, "$and", &and);
    BSON_APPEND_DOCUMENT_BEGIN(&u, "$set", &set);
    for (int i = 0; i < n; i++) {
        snprintf(k, sizeof k, "%d", i);
        snprintf(path, sizeof path, "seats.%d.%d", seats[i].row, seats[i].col);
        bson_append_document_begin(&and, k, -1, &sel);
        bson_append_int32(&sel, path, -1, 0);
        bson_append_document_end(&and, &sel);
        bson_append_int32(&set, path, -1, 1);
    }
    bson_append_array_end(&q, &and);
    bson_append_document_end(&u, &set);
    BSON_APPEND_DOCUMENT_BEGIN(&u, "$inc", &inc);
    BSON_APPEND_INT32(&inc, "seatsAvailable", -n);
    bson_append_document_end(&u, &inc);
    BSON_APPEND_DOCUMENT_BEGIN(&u, "$push", &push);
    th_sim_append_reservation(&push, "reservations", "_id", &cart_id, seats, n);
    bson_append_document_end(&u, &push);
    int rc = th_update(db, TH_SESSIONS, &q, &u, false, &nmod, err);
    bson_destroy(&q);
    bson_destroy(&u);
    if (rc == 0 && nmod == 0)
        rc = md_error_set(err, MD_NOTFOUND, MD_CODE_OK, "could not reserve seats in session %s",
                          sid);
    return rc;
}

/* Step 3, the rest of Cart.reserve.  MD_NOTFOUND: the cart not modified. */
static int th_sim_add_to_cart(md_db *db, double cart, const char *sid, const pt_seat *seats,
                              int n, md_error *err)
{
    bson_t q = BSON_INITIALIZER, u = BSON_INITIALIZER, push, inc, set;
    bson_value_t session = {.value_type = BSON_TYPE_UTF8};
    int64_t nmod = 0;
    session.value.v_utf8.str = (char *)sid;
    session.value.v_utf8.len = (uint32_t)strlen(sid);
    BSON_APPEND_DOUBLE(&q, "_id", cart);
    BSON_APPEND_DOCUMENT_BEGIN(&u, "$push", &push);
    th_sim_append_reservation(&push, "reservations", "sessionId", &session, seats, n);
    bson_append_document_end(&u, &push);
    BSON_APPEND_DOCUMENT_BEGIN(&u, "$inc", &inc);
    BSON_APPEND_DOUBLE(&inc, "total", NAN);
    bson_append_document_end(&u, &inc);
    BSON_APPEND_DOCUMENT_BEGIN(&u, "$set", &set);
    BSON_APPEND_DATE_TIME(&set, "modifiedOn", pt_now_ms());
    bson_append_document_end(&u, &set);
    int rc = th_update(db, TH_CARTS, &q, &u, false, &nmod, err);
    bson_destroy(&q);
    bson_destroy(&u);
    if (rc == 0 && nmod == 0)
        rc = md_error_set(err, MD_NOTFOUND, MD_CODE_OK, "could not add seats to cart %g", cart);
    return rc;
}

/* Steps 4-7, Cart.checkout.  MD_NOTFOUND: the cart is gone. */
static int th_sim_checkout(md_db *db, double cart, md_error *err)
{
    bson_t doc, receipt = BSON_INITIALIZER;
    bson_iter_t it;
    bson_oid_t oid;
    int64_t nmod = 0;
    bson_t *q = BCON_NEW("_id", BCON_DOUBLE(cart));
    int rc = pt_find_one(db, TH_CARTS, q, NULL, &doc, err);
    if (rc == MD_NOTFOUND)
        md_error_set(err, MD_NOTFOUND, MD_CODE_OK, "could not locate cart with id %g", cart);
    if (rc == 0) {
        /* the driver gives the receipt its ObjectId */
        bson_oid_init(&oid, NULL);
        BSON_APPEND_OID(&receipt, "_id", &oid);
        BSON_APPEND_DATE_TIME(&receipt, "createdOn", pt_now_ms());
        if (bson_iter_init_find(&it, &doc, "reservations"))
            bson_append_iter(&receipt, "reservations", -1, &it);
        rc = th_insert(db, TH_RECEIPTS, &receipt, err);
    }
    if (rc == 0) {
        bson_t *f = BCON_NEW("reservations._id", BCON_DOUBLE(cart));
        bson_t *u = BCON_NEW("$pull", "{", "reservations", "{", "_id", BCON_DOUBLE(cart), "}",
                             "}");
        rc = th_update(db, TH_SESSIONS, f, u, true, NULL, err);
        bson_destroy(f);
        bson_destroy(u);
    }
    if (rc == 0) {
        bson_t *u = BCON_NEW("$set", "{", "state", BCON_UTF8("done"), "}");
        rc = th_update(db, TH_CARTS, q, u, false, &nmod, err);
        bson_destroy(u);
        if (rc == 0 && nmod == 0)
            rc = md_error_set(err, MD_NOTFOUND, MD_CODE_OK, "could not find cart with id %g",
                              cart);
    }
    bson_destroy(&receipt);
    bson_destroy(&doc);
    bson_destroy(q);
    return rc;
}

/* One user: a cart, 5 seats side by side in its session, checkout. */
static int th_sim_run(pt_user *u, md_error *err)
{
    th_sim *st = u->state;
    double cart = th_sim_cart_id(u->id);
    pt_seat seats[TH_SIM_TICKETS];
    char tid[48], sid[80];
    th_pick p;
    int rc;
    th_sim_pick(st, u->id, &p);
    if (p.k > st->per_process)
        return md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE,
                            "user %llu: more users than the setup made sessions for",
                            (unsigned long long)u->id);
    snprintf(tid, sizeof tid, "%d.%lld", p.process, (long long)p.theater);
    snprintf(sid, sizeof sid, "%s.%lld", tid, (long long)p.session);
    for (int i = 0; i < TH_SIM_TICKETS; i++)
        seats[i] = (pt_seat){p.row, p.col + i};
    bson_t *doc = BCON_NEW("_id", BCON_DOUBLE(cart), "state", BCON_UTF8("active"), "total",
                           BCON_INT32(0), "reservations", "[", "]", "modifiedOn",
                           BCON_DATE_TIME(pt_now_ms()), "createdOn", BCON_DATE_TIME(pt_now_ms()));
    rc = th_insert(u->db, TH_CARTS, doc, err);
    bson_destroy(doc);
    if (rc == 0)
        rc = th_sim_reserve(u->db, cart, sid, tid, seats, TH_SIM_TICKETS, err);
    if (rc == 0)
        rc = th_sim_add_to_cart(u->db, cart, sid, seats, TH_SIM_TICKETS, err);
    if (rc == 0)
        rc = th_sim_checkout(u->db, cart, err);
    if (rc == 0)
        atomic_fetch_add(&st->sold, 1);
    /* a seat taken or a cart gone: never here */
    return pt_user_refused(u, rc, "reservation failed", err);
}

/* ---- the scenario's check ---------------------------------------------------- */

/* A seat named by a cart or a receipt: its session's "<p>.<t>.<s>" as a
 * number (th_sim_key), row and column. */
typedef struct th_seat {
    int64_t session;
    int32_t row, col;
} th_seat;

typedef struct th_seats {
    th_seat *v;
    size_t n, cap;
} th_seats;

/* "<p>.<t>.<s>" as p << 40 | t << 20 | s; -1 if it is not one. */
static int64_t th_sim_key(const char *id)
{
    int p, t, s, end = -1;
    if (sscanf(id, "%d.%d.%d%n", &p, &t, &s, &end) != 3 || end < 0 || id[end] != '\0' ||
        p < 0 || t < 0 || s < 0 || p >= 1 << 20 || t >= 1 << 20 || s >= 1 << 20)
        return -1;
    return (int64_t)p << 40 | (int64_t)t << 20 | s;
}

static const char *th_sim_key_str(int64_t key, char *buf, size_t size)
{
    snprintf(buf, size, "%lld.%lld.%lld", (long long)(key >> 40),
             (long long)(key >> 20 & 0xfffff), (long long)(key & 0xfffff));
    return buf;
}

static int th_seat_cmp(const void *a, const void *b)
{
    const th_seat *x = a, *y = b;
    if (x->session != y->session)
        return x->session < y->session ? -1 : 1;
    if (x->row != y->row)
        return x->row < y->row ? -1 : 1;
    return (x->col > y->col) - (x->col < y->col);
}

/* The seats of one {sessionId, seats} reservation into *s. */
static int th_seats_add(th_seats *s, const bson_t *res, const char *coll, md_error *err)
{
    bson_iter_t it;
    pt_seat *seats;
    int n;
    int64_t key = -1;
    if (bson_iter_init_find(&it, res, "sessionId") && BSON_ITER_HOLDS_UTF8(&it))
        key = th_sim_key(bson_iter_utf8(&it, NULL));
    if (key < 0 || !bson_iter_init_find(&it, res, "seats") || th_parse_seats(&it, &seats, &n) != 0)
        return md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE,
                            "a reservation in %s without a session or seats", coll);
    if (s->n + (size_t)n > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 1024;
        while (cap < s->n + (size_t)n)
            cap *= 2;
        th_seat *g = realloc(s->v, sizeof *g * cap);
        if (!g) {
            free(seats);
            return md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
        }
        s->v = g;
        s->cap = cap;
    }
    for (int i = 0; i < n; i++)
        s->v[s->n++] = (th_seat){key, seats[i].row, seats[i].col};
    free(seats);
    return 0;
}

/* Every seat the reservations of coll's documents name, sorted; *ndocs
 * counts the documents. */
static int th_seats_collect(md_db *db, const char *coll, th_seats *s, int64_t *ndocs,
                            md_error *err)
{
    md_collection *c = md_db_get_collection(db, coll);
    bson_t filter = BSON_INITIALIZER;
    md_cursor *cur = md_collection_find_with_opts(c, &filter, NULL);
    const bson_t *doc;
    int rc = 0;
    while (rc == 0 && md_cursor_next(cur, &doc)) {
        bson_iter_t it, arr;
        ++*ndocs;
        if (!bson_iter_init_find(&it, doc, "reservations") || !BSON_ITER_HOLDS_ARRAY(&it) ||
            !bson_iter_recurse(&it, &arr)) {
            rc = md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE,
                              "a document in %s without reservations", coll);
            break;
        }
        while (rc == 0 && bson_iter_next(&arr)) {
            bson_t res;
            uint32_t len;
            const uint8_t *data;
            if (!BSON_ITER_HOLDS_DOCUMENT(&arr)) {
                rc = md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE,
                                  "a reservation in %s is not a document", coll);
                break;
            }
            bson_iter_document(&arr, &len, &data);
            bson_init_static(&res, data, len);
            rc = th_seats_add(s, &res, coll, err);
        }
    }
    if (rc == 0 && md_cursor_error(cur, err))
        rc = MD_ERROR;
    md_cursor_destroy(cur);
    md_collection_destroy(c);
    if (rc == 0)
        qsort(s->v, s->n, sizeof *s->v, th_seat_cmp);
    return rc;
}

/* One session: no reservation left, seatsAvailable its free seats, every
 * taken seat on a receipt (*matched counts them). */
static int th_sim_check_session(const bson_t *doc, const th_seats *sold, size_t *matched,
                                md_error *err)
{
    bson_iter_t it, rows, row;
    int64_t key = -1, zeros = 0, avail;
    char name[64];
    if (bson_iter_init_find(&it, doc, "_id") && BSON_ITER_HOLDS_UTF8(&it))
        key = th_sim_key(bson_iter_utf8(&it, NULL));
    if (key < 0)
        return md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE, "a session setup did not make");
    th_sim_key_str(key, name, sizeof name);
    if (!bson_iter_init_find(&it, doc, "reservations") || !BSON_ITER_HOLDS_ARRAY(&it) ||
        !bson_iter_recurse(&it, &rows))
        return md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE, "session %s has no reservations",
                            name);
    if (bson_iter_next(&rows))
        return md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE,
                            "session %s still holds a reservation", name);
    avail = th_i64(doc, "seatsAvailable", -1);
    if (!bson_iter_init_find(&it, doc, "seats") || !bson_iter_recurse(&it, &rows))
        return md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE, "session %s has no seats", name);
    for (int r = 0; bson_iter_next(&rows); r++) {
        if (!bson_iter_recurse(&rows, &row))
            return md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE, "session %s: row %d", name, r);
        for (int c = 0; bson_iter_next(&row); c++) {
            int64_t v = bson_iter_as_int64(&row);
            th_seat seat = {key, r, c};
            if (v == 0) {
                zeros++;
            } else if (v != 1) {
                return md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE,
                                    "session %s seat [%d,%d] is %lld", name, r, c, (long long)v);
            } else if (!bsearch(&seat, sold->v, sold->n, sizeof seat, th_seat_cmp)) {
                return md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE,
                                    "session %s seat [%d,%d] is taken but on no receipt", name,
                                    r, c);
            } else {
                ++*matched;
            }
        }
    }
    if (zeros != avail)
        return md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE,
                            "session %s: seatsAvailable %lld but %lld free seats", name,
                            (long long)avail, (long long)zeros);
    return 0;
}

static int th_sim_check_sessions(md_db *db, const th_seats *sold, int64_t *nsessions,
                                 size_t *matched, md_error *err)
{
    md_collection *c = md_db_get_collection(db, TH_SESSIONS);
    bson_t filter = BSON_INITIALIZER;
    md_cursor *cur = md_collection_find_with_opts(c, &filter, NULL);
    const bson_t *doc;
    int rc = 0;
    while (rc == 0 && md_cursor_next(cur, &doc)) {
        ++*nsessions;
        rc = th_sim_check_session(doc, sold, matched, err);
    }
    if (rc == 0 && md_cursor_error(cur, err))
        rc = MD_ERROR;
    md_cursor_destroy(cur);
    md_collection_destroy(c);
    return rc;
}

/*
 * After the run: every cart done, one receipt per user who checked out,
 * the receipts' seats exactly the carts' (5 a cart), no seat on two
 * receipts, and in every session (all of setup's, none more) no
 * reservation left, every taken seat on a receipt, every receipt's seat
 * taken, and seatsAvailable its number of free seats.
 */
static int th_sim_check(md_db *db, void *state, md_error *err)
{
    th_sim *st = state;
    th_seats carts = {0}, sold = {0};
    int64_t ncarts = 0, nreceipts = 0, nsessions = 0, users = atomic_load(&st->sold);
    size_t matched = 0;
    char name[64];
    bson_t *f = BCON_NEW("state", "{", "$ne", BCON_UTF8("done"), "}");
    int rc = pt_expect_none(db, TH_CARTS, f, "carts not checked out", err);
    bson_destroy(f);
    if (rc == 0)
        rc = th_seats_collect(db, TH_CARTS, &carts, &ncarts, err);
    if (rc == 0)
        rc = th_seats_collect(db, TH_RECEIPTS, &sold, &nreceipts, err);
    if (rc == 0 && (ncarts != users || nreceipts != users))
        rc = md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE,
                          "%lld users checked out, %lld carts, %lld receipts", (long long)users,
                          (long long)ncarts, (long long)nreceipts);
    if (rc == 0 && (carts.n != (size_t)ncarts * TH_SIM_TICKETS || sold.n != carts.n))
        rc = md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE,
                          "%lld carts hold %zu seats, the receipts %zu", (long long)ncarts,
                          carts.n, sold.n);
    for (size_t i = 1; rc == 0 && i < sold.n; i++)
        if (th_seat_cmp(&sold.v[i - 1], &sold.v[i]) == 0)
            rc = md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE,
                              "seat [%d,%d] of session %s is on two receipts", sold.v[i].row,
                              sold.v[i].col, th_sim_key_str(sold.v[i].session, name, sizeof name));
    for (size_t i = 0; rc == 0 && i < carts.n; i++)
        if (th_seat_cmp(&carts.v[i], &sold.v[i]) != 0)
            rc = md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE,
                              "seat [%d,%d] of session %s: in a cart, not on its receipt",
                              carts.v[i].row, carts.v[i].col,
                              th_sim_key_str(carts.v[i].session, name, sizeof name));
    if (rc == 0)
        rc = th_sim_check_sessions(db, &sold, &nsessions, &matched, err);
    if (rc == 0 && matched != sold.n)
        rc = md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE,
                          "%zu seats on receipts are free or in no session", sold.n - matched);
    if (rc == 0 && nsessions != st->total)
        rc = md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE, "%lld sessions, setup made %lld",
                          (long long)nsessions, (long long)st->total);
    free(carts.v);
    free(sold.v);
    return rc;
}

static const pt_scenario th_scenario_checkout = {
    .name = "theater_checkout",
    .title = "Successfully Checkout Cart",
    .script = "theater/theater_reserve_tickets_successfully.js",
    .note = "As the simulator ran it, with its own Theater, Session, Cart and Receipt classes: "
            "setup makes, per process, 100 theaters of 30 x 30 seats and 100 sessions of each "
            "(with the book's 4 processes, 40,000 session documents of 7.3 KB, each with its "
            "own seat map), and each process moves every user on to the next theater, then "
            "the next session and the next 5 seats, so at the book's load every user reserves "
            "in a fresh session of its own. A user makes 7 requests: insert its cart (a random "
            "double _id), reserve 5 seats (updateOne with an $and of the 5 seats at 0, $set "
            "to 1, $inc seatsAvailable -5, $push the reservation), push the reservation into "
            "the cart, findOne the cart, insert the receipt, $pull the reservation from the "
            "session (updateMany) and set the cart done. It reads no price: the simulator's "
            "session object has none, so prices are null and totals NaN. The chapter's "
            "operations (a price read, a checkout that claims the cart first, guarded "
            "releases, expiry) are in the library and its tests.",
    .nops = 1,
    .ops = {{
        .name = "successfully_checkout_cart",
        .users = 1000,
        .decides = true,
        .run = th_sim_run,
        .book_mmap = {124.397, 2292.494, 1527.972, 2916.34, 5211.314, 7884.857, 149.741,
                      14779.998},
        .book_wt = {112.994, 2302.15, 2052.946, 3145.921, 6451.251, 9608.811, 19.081,
                    17122.854},
    }},
    .setup = th_sim_setup,
    .check = th_sim_check,
};

const pt_pattern pt_pattern_theater = {
    .name = "theater",
    .title = "Theater Reservation",
    .section = "5.7",
    .book_winner = "mmapv1",
    .book_reason = "The text calls the difference sizable, from WiredTiger rewriting the whole "
                   "document on every update of this update-heavy schema; its own figures show "
                   "equal means (2292 vs 2302 ms), a shorter WiredTiger runtime and WiredTiger "
                   "behind only at the tail (95%, 99%, max). Both engines were overloaded "
                   "(runtime above the 25 s of load).",
    .nscenarios = 1,
    .scenarios = {&th_scenario_checkout},
};
