/*
 * theater_sim.c -- 5.7 Theater Reservation as the book's simulator ran it
 * (scenario theater_checkout) and the pattern's registration; the
 * chapter's operations are in theater.c.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "patterns.h"
#include "pt_sim.h"
#include "theater_int.h"

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
    bson_t q = BSON_INITIALIZER, u = BSON_INITIALIZER, inc, push;
    bson_value_t cart_id = {.value_type = BSON_TYPE_DOUBLE, .value.v_double = cart};
    int64_t nmod = 0;
    BSON_APPEND_UTF8(&q, "_id", sid);
    BSON_APPEND_UTF8(&q, "theaterId", tid);
    th_append_take_seats(&q, &u, seats, n);
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

/* th_seats_collect's scan: one document's reservations. */
typedef struct th_seats_scan {
    th_seats *s;
    const char *coll;
} th_seats_scan;

static int th_seats_doc(const bson_t *doc, void *arg, md_error *err)
{
    th_seats_scan *a = arg;
    bson_iter_t it, arr;
    int rc = 0;
    if (!bson_iter_init_find(&it, doc, "reservations") || !BSON_ITER_HOLDS_ARRAY(&it) ||
        !bson_iter_recurse(&it, &arr))
        return md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE,
                            "a document in %s without reservations", a->coll);
    while (rc == 0 && bson_iter_next(&arr)) {
        bson_t res;
        uint32_t len;
        const uint8_t *data;
        if (!BSON_ITER_HOLDS_DOCUMENT(&arr))
            return md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE,
                                "a reservation in %s is not a document", a->coll);
        bson_iter_document(&arr, &len, &data);
        bson_init_static(&res, data, len);
        rc = th_seats_add(a->s, &res, a->coll, err);
    }
    return rc;
}

/* Every seat the reservations of coll's documents name, sorted; *ndocs
 * counts the documents. */
static int th_seats_collect(md_db *db, const char *coll, th_seats *s, int64_t *ndocs,
                            md_error *err)
{
    th_seats_scan a = {s, coll};
    int rc = pt_each_doc(db, coll, th_seats_doc, &a, ndocs, err);
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

typedef struct th_sessions_scan {
    const th_seats *sold;
    size_t *matched;
} th_sessions_scan;

static int th_sim_session_doc(const bson_t *doc, void *arg, md_error *err)
{
    th_sessions_scan *a = arg;
    return th_sim_check_session(doc, a->sold, a->matched, err);
}

static int th_sim_check_sessions(md_db *db, const th_seats *sold, int64_t *nsessions,
                                 size_t *matched, md_error *err)
{
    th_sessions_scan a = {sold, matched};
    return pt_each_doc(db, TH_SESSIONS, th_sim_session_doc, &a, nsessions, err);
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
