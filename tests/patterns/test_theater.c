/*
 * test_theater.c -- 5.7 Theater Reservation (patterns/theater.c) on every
 * engine: each operation's effect on sessions, carts and receipts, the
 * book's indexes and the plans that use them, every failure point of
 * reserve / checkout / expire followed by expiry, a check that notices a
 * broken seat map, many threads reserving overlapping seats with injected
 * stops and a concurrent expiry, and the theater_checkout scenario (the
 * simulator's documents, requests and choice of session).
 */
#include <math.h>
#include <time.h>

#include "pt_test_util.h"

#define FAR_FUTURE (pt_now_ms() + 3600 * 1000)

static void setup_theater(ptt_db *t, int64_t nsessions, int rows, int cols)
{
    md_error err;
    cr_assert_eq(pt_theater_create_indexes(t->db, &err), 0, "[%s] %s", t->engine, err.message);
    cr_assert_eq(pt_theater_create(t->db, 1, "The Royal", rows, cols, &err), 0, "%s",
                 err.message);
    for (int64_t s = 1; s <= nsessions; s++)
        cr_assert_eq(pt_theater_add_session(t->db, 1, s, "Action Movie 5", "Another action movie",
                                            pt_now_ms(), pt_now_ms() + 3600000, 10, &err),
                     0, "%s", err.message);
}

static bson_t *find_one(ptt_db *t, const char *coll, int64_t id)
{
    char f[64];
    snprintf(f, sizeof f, "{\"_id\": {\"$numberLong\": \"%lld\"}}", (long long)id);
    return ptt_first_doc(t, coll, f);
}

static int seat_of(ptt_db *t, int64_t session, int r, int c)
{
    char path[64];
    bson_t *s = find_one(t, "sessions", session);
    snprintf(path, sizeof path, "seats.%d.%d", r, c);
    int v = (int)ptt_i64(s, path);
    bson_destroy(s);
    return v;
}

static int64_t field_of(ptt_db *t, const char *coll, int64_t id, const char *path)
{
    bson_t *d = find_one(t, coll, id);
    int64_t v = ptt_i64(d, path);
    bson_destroy(d);
    return v;
}

static void expect_check(ptt_db *t, bool settled)
{
    md_error err;
    md_error_clear(&err);
    int rc = pt_theater_check(t->db, settled, &err);
    cr_assert_eq(rc, 0, "[%s] invariants: %s", t->engine, err.message);
}

Test(pt_theater, session_copies_the_theater_and_reserve_takes_all_or_none)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        setup_theater(&t, 1, 5, 16);
        bson_t *s = find_one(&t, "sessions", 1);
        cr_assert_eq(ptt_i64(s, "seatsAvailable"), 80);
        cr_assert_eq(ptt_i64(s, "theaterId"), 1);
        cr_assert_eq(ptt_i64(s, "price"), 10);
        cr_assert_eq(ptt_i64(s, "seats.4.15"), 0);
        cr_assert(!ptt_has(s, "seats.5"));
        cr_assert(!ptt_has(s, "reservations.0"));
        bson_destroy(s);
        cr_assert_eq(pt_theater_add_session(t.db, 99, 2, "x", "y", 0, 0, 1, &err), MD_NOTFOUND);

        /* the book's example: the 6th and 7th seats of the 2nd row */
        pt_seat two[] = {{1, 5}, {1, 6}};
        cr_assert_eq(pt_theater_cart_create(t.db, 1, &err), 0);
        cr_assert_eq(pt_theater_reserve(t.db, 1, 1, two, 2, NULL, &err), 0, "[%s] %s", t.engine,
                     err.message);
        s = find_one(&t, "sessions", 1);
        cr_assert_eq(ptt_i64(s, "seatsAvailable"), 78, "[%s] seatsAvailable $inc is -n", t.engine);
        cr_assert_eq(ptt_i64(s, "seats.1.5"), 1);
        cr_assert_eq(ptt_i64(s, "seats.1.6"), 1);
        cr_assert_eq(ptt_i64(s, "seats.1.4"), 0);
        cr_assert_eq(ptt_i64(s, "reservations.0._id"), 1);
        cr_assert_eq(ptt_i64(s, "reservations.0.seats.1.1"), 6);
        cr_assert_eq(ptt_i64(s, "reservations.0.total"), 20);
        bson_destroy(s);
        bson_t *c = find_one(&t, "carts", 1);
        cr_assert_str_eq(ptt_str(c, "state"), "active");
        cr_assert_eq(ptt_i64(c, "total"), 20);
        cr_assert_eq(ptt_i64(c, "reservations.0.sessionId"), 1);
        cr_assert_eq(ptt_i64(c, "reservations.0.seats.0.1"), 5);
        bson_destroy(c);

        /* overlapping seats: none taken, nothing changes */
        pt_seat overlap[] = {{1, 4}, {1, 5}};
        cr_assert_eq(pt_theater_cart_create(t.db, 2, &err), 0);
        cr_assert_eq(pt_theater_reserve(t.db, 2, 1, overlap, 2, NULL, &err), MD_NOTFOUND);
        cr_assert_eq(seat_of(&t, 1, 1, 4), 0, "[%s] all or none", t.engine);
        cr_assert_eq(field_of(&t, "sessions", 1, "seatsAvailable"), 78);
        cr_assert_eq(field_of(&t, "carts", 2, "total"), 0);
        expect_check(&t, true);
    }
}

/* "Allows for any type of seated venue layout": a jagged theater. */
Test(pt_theater, jagged_layouts_and_seats_that_do_not_exist)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        bson_destroy(PTT_OK(&t, "{\"insert\": \"theaters\", \"documents\": [{\"_id\": "
                                "{\"$numberLong\": \"3\"}, \"name\": \"Jagged\", \"seats\": "
                                "[[0], [0, 0], [0, 0, 0]], \"seatsAvailable\": 6}]}"));
        cr_assert_eq(pt_theater_add_session(t.db, 3, 1, "Short", "A short film", 0, 0, 8, &err),
                     0, "[%s] %s", t.engine, err.message);
        cr_assert_eq(field_of(&t, "sessions", 1, "seatsAvailable"), 6);
        cr_assert_eq(pt_theater_cart_create(t.db, 1, &err), 0);
        pt_seat missing[] = {{0, 1}}, off[] = {{5, 0}}, back[] = {{2, 1}, {2, 2}};
        cr_assert_eq(pt_theater_reserve(t.db, 1, 1, missing, 1, NULL, &err), MD_NOTFOUND,
                     "[%s] a seat past the end of a short row", t.engine);
        cr_assert_eq(pt_theater_reserve(t.db, 1, 1, off, 1, NULL, &err), MD_NOTFOUND);
        cr_assert_eq(pt_theater_reserve(t.db, 1, 9, back, 2, NULL, &err), MD_NOTFOUND,
                     "[%s] no such session", t.engine);
        cr_assert_eq(pt_theater_reserve(t.db, 1, 1, back, 2, NULL, &err), 0);
        cr_assert_eq(field_of(&t, "sessions", 1, "seatsAvailable"), 4);
        bson_t *s = find_one(&t, "sessions", 1);
        cr_assert(!ptt_has(s, "seats.0.1"), "[%s] the layout grew", t.engine);
        cr_assert_eq(ptt_i64(s, "reservations.0.total"), 16);
        bson_destroy(s);
        expect_check(&t, true);
        cr_assert_eq(pt_theater_checkout(t.db, 1, NULL, &err), 0);
        expect_check(&t, true);
    }
}

Test(pt_theater, release_gives_seats_back_once)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        setup_theater(&t, 1, 5, 16);
        pt_seat three[] = {{1, 5}, {1, 6}, {1, 7}};
        cr_assert_eq(pt_theater_cart_create(t.db, 1, &err), 0);
        cr_assert_eq(pt_theater_reserve(t.db, 1, 1, three, 3, NULL, &err), 0);
        cr_assert_eq(pt_theater_release(t.db, 1, 1, three, 3, &err), 0, "[%s] %s", t.engine,
                     err.message);
        cr_assert_eq(field_of(&t, "sessions", 1, "seatsAvailable"), 80,
                     "[%s] release increments seatsAvailable", t.engine);
        cr_assert_eq(seat_of(&t, 1, 1, 6), 0);
        /* someone else takes a seat; a second release must not free it */
        pt_seat one[] = {{1, 6}};
        cr_assert_eq(pt_theater_cart_create(t.db, 2, &err), 0);
        cr_assert_eq(pt_theater_reserve(t.db, 2, 1, one, 1, NULL, &err), 0);
        cr_assert_eq(pt_theater_release(t.db, 1, 1, three, 3, &err), MD_NOTFOUND);
        cr_assert_eq(seat_of(&t, 1, 1, 6), 1, "[%s] a second release freed a seat of cart 2",
                     t.engine);
        cr_assert_eq(field_of(&t, "sessions", 1, "seatsAvailable"), 79);
        /* the cart still lists the released reservation (the book's release
         * touches only the session); a settled check wants cart 2 active */
        expect_check(&t, true);
    }
}

Test(pt_theater, checkout_writes_the_receipt_and_keeps_the_seats)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        setup_theater(&t, 2, 5, 16);
        pt_seat a[] = {{0, 0}, {0, 1}}, b[] = {{3, 3}};
        cr_assert_eq(pt_theater_cart_create(t.db, 7, &err), 0);
        cr_assert_eq(pt_theater_reserve(t.db, 7, 1, a, 2, NULL, &err), 0);
        cr_assert_eq(pt_theater_reserve(t.db, 7, 2, b, 1, NULL, &err), 0);
        cr_assert_eq(pt_theater_checkout(t.db, 7, NULL, &err), 0, "[%s] %s", t.engine,
                     err.message);
        bson_t *r = find_one(&t, "receipts", 7);
        cr_assert_eq(ptt_i64(r, "total"), 30);
        cr_assert_eq(ptt_i64(r, "reservations.1.sessionId"), 2);
        cr_assert(ptt_has(r, "createdOn"));
        bson_destroy(r);
        bson_t *c = find_one(&t, "carts", 7);
        cr_assert_str_eq(ptt_str(c, "state"), "done");
        bson_destroy(c);
        cr_assert_eq(ptt_count(&t, "sessions", "{\"reservations._id\": 7}"), 0,
                     "[%s] checkout pulls the cart's reservations from every session", t.engine);
        cr_assert_eq(seat_of(&t, 1, 0, 1), 1);
        cr_assert_eq(field_of(&t, "sessions", 2, "seatsAvailable"), 79);
        cr_assert_eq(pt_theater_checkout(t.db, 7, NULL, &err), MD_NOTFOUND);
        cr_assert_eq(pt_theater_checkout(t.db, 8, NULL, &err), MD_NOTFOUND);
        /* a done cart takes no more seats; the seats go back */
        pt_seat d[] = {{4, 4}};
        cr_assert_eq(pt_theater_reserve(t.db, 7, 1, d, 1, NULL, &err), MD_NOTFOUND);
        cr_assert_eq(seat_of(&t, 1, 4, 4), 0, "[%s] compensation released the seat", t.engine);
        cr_assert_eq(field_of(&t, "sessions", 1, "seatsAvailable"), 78);
        expect_check(&t, true);
    }
}

Test(pt_theater, expiry_releases_stale_carts_only)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        int n = -1;
        setup_theater(&t, 1, 5, 16);
        pt_seat a[] = {{2, 0}, {2, 1}}, b[] = {{2, 2}};
        cr_assert_eq(pt_theater_cart_create(t.db, 1, &err), 0);
        cr_assert_eq(pt_theater_reserve(t.db, 1, 1, a, 2, NULL, &err), 0);
        cr_assert_eq(pt_theater_cart_create(t.db, 2, &err), 0);
        cr_assert_eq(pt_theater_reserve(t.db, 2, 1, b, 1, NULL, &err), 0);
        /* nothing is 30 minutes old */
        cr_assert_eq(pt_theater_expire(t.db, pt_now_ms() - 30 * 60 * 1000, NULL, &n, &err), 0);
        cr_assert_eq(n, 0);
        cr_assert_eq(field_of(&t, "sessions", 1, "seatsAvailable"), 77);
        /* cart 2 is checked out; everything older than the future expires */
        cr_assert_eq(pt_theater_checkout(t.db, 2, NULL, &err), 0);
        cr_assert_eq(pt_theater_expire(t.db, FAR_FUTURE, NULL, &n, &err), 0, "[%s] %s", t.engine,
                     err.message);
        cr_assert_eq(n, 1);
        bson_t *c = find_one(&t, "carts", 1);
        cr_assert_str_eq(ptt_str(c, "state"), "expired", "[%s] expiry sets state", t.engine);
        bson_destroy(c);
        cr_assert_eq(seat_of(&t, 1, 2, 0), 0);
        cr_assert_eq(seat_of(&t, 1, 2, 2), 1, "[%s] expiry freed a sold seat", t.engine);
        cr_assert_eq(field_of(&t, "sessions", 1, "seatsAvailable"), 79);
        cr_assert_eq(pt_theater_checkout(t.db, 1, NULL, &err), MD_NOTFOUND);
        expect_check(&t, true);
    }
}

Test(pt_theater, indexes_as_the_book_creates_them)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        setup_theater(&t, 1, 2, 2);
        bson_t *r = PTT_OK(&t, "{\"listIndexes\": \"carts\"}");
        cr_assert_eq(ptt_i64(r, "cursor.firstBatch.1.key.state"), 1);
        cr_assert_str_eq(ptt_str(r, "cursor.firstBatch.1.name"), "state_1");
        bson_destroy(r);
        r = PTT_OK(&t, "{\"listIndexes\": \"sessions\"}");
        cr_assert_str_eq(ptt_str(r, "cursor.firstBatch.1.name"), "reservations._id_1");
        bson_destroy(r);
        bson_t stage;
        r = ptt_explain(&t, "{\"find\": \"sessions\", \"filter\": {\"reservations._id\": 5}}");
        cr_assert(ptt_plan_stage(r, "IXSCAN", &stage), "[%s] no IXSCAN for reservations._id",
                  t.engine);
        cr_assert_str_eq(ptt_str(&stage, "indexName"), "reservations._id_1");
        bson_destroy(&stage);
        bson_destroy(r);
        r = ptt_explain(&t, "{\"find\": \"carts\", \"filter\": {\"state\": \"active\", "
                            "\"modifiedOn\": {\"$lte\": {\"$date\": 0}}}}");
        cr_assert(ptt_plan_stage(r, "IXSCAN", &stage), "[%s] no IXSCAN for the expiry",
                  t.engine);
        cr_assert_str_eq(ptt_str(&stage, "indexName"), "state_1");
        bson_destroy(&stage);
        bson_destroy(r);
    }
}

Test(pt_theater, check_notices_broken_seat_maps)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        setup_theater(&t, 1, 3, 3);
        pt_seat a[] = {{0, 0}};
        cr_assert_eq(pt_theater_cart_create(t.db, 1, &err), 0);
        cr_assert_eq(pt_theater_reserve(t.db, 1, 1, a, 1, NULL, &err), 0);
        expect_check(&t, true);
        /* a seat taken behind the protocol's back: held by nobody */
        bson_destroy(PTT_OK(&t, "{\"update\": \"sessions\", \"updates\": [{\"q\": {\"_id\": "
                                "{\"$numberLong\": \"1\"}}, \"u\": {\"$set\": {\"seats.2.2\": 1},"
                                " \"$inc\": {\"seatsAvailable\": -1}}}]}"));
        cr_assert_eq(pt_theater_check(t.db, false, &err), MD_ERROR, "[%s]", t.engine);
        cr_assert(strstr(err.message, "no cart"), "%s", err.message);
        /* seatsAvailable off by one */
        bson_destroy(PTT_OK(&t, "{\"update\": \"sessions\", \"updates\": [{\"q\": {}, \"u\": "
                                "{\"$set\": {\"seats.2.2\": 0}}}]}"));
        cr_assert_eq(pt_theater_check(t.db, false, &err), MD_ERROR);
        cr_assert(strstr(err.message, "seatsAvailable"), "%s", err.message);
        /* a seat sold twice: a receipt for cart 9 naming cart 1's seat */
        bson_destroy(PTT_OK(&t, "{\"update\": \"sessions\", \"updates\": [{\"q\": {}, \"u\": "
                                "{\"$inc\": {\"seatsAvailable\": 1}}}]}"));
        expect_check(&t, true);
        bson_destroy(PTT_OK(&t, "{\"insert\": \"receipts\", \"documents\": [{\"_id\": 9, "
                                "\"reservations\": [{\"sessionId\": 1, \"seats\": [[0, 0]]}]}]}"));
        cr_assert_eq(pt_theater_check(t.db, false, &err), MD_ERROR);
        cr_assert(strstr(err.message, "held by carts"), "%s", err.message);
    }
}

/* Every failure point of every protocol, then expiry: invariants hold and
 * the seats end up either sold (a receipt) or free. */
Test(pt_theater, every_failure_point_is_recovered_by_expiry)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        setup_theater(&t, 2, 4, 4);
        pt_seat a[] = {{0, 0}, {0, 1}}, b[] = {{1, 0}}, c[] = {{2, 2}, {2, 3}};
        pt_theater_opts stop1 = {1}, stop2 = {2};
        /* reserve stopped after the session write: an orphan reservation */
        cr_assert_eq(pt_theater_cart_create(t.db, 1, &err), 0);
        cr_assert_eq(pt_theater_reserve(t.db, 1, 1, a, 2, &stop1, &err), PT_THEATER_CRASHED);
        cr_assert_eq(field_of(&t, "carts", 1, "total"), 0);
        expect_check(&t, false);
        /* checkout stopped after the claim, and after the receipt */
        cr_assert_eq(pt_theater_cart_create(t.db, 2, &err), 0);
        cr_assert_eq(pt_theater_reserve(t.db, 2, 1, b, 1, NULL, &err), 0);
        cr_assert_eq(pt_theater_checkout(t.db, 2, &stop1, &err), PT_THEATER_CRASHED);
        cr_assert_eq(ptt_count(&t, "receipts", "{}"), 0);
        cr_assert_eq(pt_theater_cart_create(t.db, 3, &err), 0);
        cr_assert_eq(pt_theater_reserve(t.db, 3, 2, c, 2, NULL, &err), 0);
        cr_assert_eq(pt_theater_checkout(t.db, 3, &stop2, &err), PT_THEATER_CRASHED);
        cr_assert_eq(ptt_count(&t, "receipts", "{}"), 1);
        expect_check(&t, false);
        /* an active cart with a reservation, and an expiry that stops at once */
        cr_assert_eq(pt_theater_cart_create(t.db, 4, &err), 0);
        cr_assert_eq(pt_theater_reserve(t.db, 4, 2, a, 2, NULL, &err), 0);
        cr_assert_eq(pt_theater_expire(t.db, FAR_FUTURE, &stop1, NULL, &err), PT_THEATER_CRASHED);
        expect_check(&t, false);
        /* the next expiry finishes everything */
        cr_assert_eq(pt_theater_expire(t.db, FAR_FUTURE, NULL, NULL, &err), 0, "[%s] %s",
                     t.engine, err.message);
        expect_check(&t, true);
        cr_assert_eq(seat_of(&t, 1, 0, 0), 0, "[%s] the orphan reservation was released",
                     t.engine);
        cr_assert_eq(seat_of(&t, 1, 1, 0), 1, "[%s] cart 2's checkout was finished", t.engine);
        cr_assert_eq(seat_of(&t, 2, 2, 3), 1);
        cr_assert_eq(seat_of(&t, 2, 0, 1), 0, "[%s] cart 4 expired", t.engine);
        cr_assert_eq(ptt_count(&t, "receipts", "{}"), 2);
        cr_assert_eq(ptt_count(&t, "sessions", "{\"reservations.0\": {\"$exists\": true}}"), 0);
        cr_assert_eq(field_of(&t, "sessions", 1, "seatsAvailable"), 15);
        cr_assert_eq(field_of(&t, "sessions", 2, "seatsAvailable"), 14);
    }
}

/* ---- many clients, overlapping seats, stops, a concurrent expiry ---------- */

#define ST_SESSIONS 3
#define ST_ROWS 4
#define ST_COLS 6

typedef struct st_shared {
    md_db *db;
    atomic_int_fast64_t next_cart;
    atomic_int stop_expiry;
    atomic_int sold, crashed;
    ptt_errors err;
    int carts_per_client;
} st_shared;

typedef struct st_client {
    st_shared *sh;
    uint64_t rng;
} st_client;

static uint64_t st_rand(st_client *c)
{
    return pt_rand_next(&c->rng);
}

static void st_fail(st_shared *sh, const char *what, int rc, const md_error *err)
{
    ptt_errors_add(&sh->err, what, rc, err);
}

/* One client: carts of 1-3 random seat pairs, some stopped, some abandoned. */
static void *st_client_main(void *arg)
{
    st_client *c = arg;
    st_shared *sh = c->sh;
    md_error err;
    for (int k = 0; k < sh->carts_per_client; k++) {
        int64_t cart = atomic_fetch_add(&sh->next_cart, 1);
        int rc = pt_theater_cart_create(sh->db, cart, &err);
        if (rc != 0) {
            st_fail(sh, "cart", rc, &err);
            continue;
        }
        int nres = 1 + (int)(st_rand(c) % 3);
        bool dead = false;
        for (int r = 0; r < nres && !dead; r++) {
            pt_seat s[2];
            int n = 1 + (int)(st_rand(c) % 2);
            int row = (int)(st_rand(c) % ST_ROWS), col = (int)(st_rand(c) % (ST_COLS - 1));
            for (int i = 0; i < n; i++)
                s[i] = (pt_seat){row, col + i};
            pt_theater_opts o = {st_rand(c) % 8 == 0 ? 1 : 0};
            rc = pt_theater_reserve(sh->db, cart, 1 + (int64_t)(st_rand(c) % ST_SESSIONS), s, n,
                                    &o, &err);
            if (rc == PT_THEATER_CRASHED) {
                atomic_fetch_add(&sh->crashed, 1);
                dead = true;
            } else if (rc != 0 && rc != MD_NOTFOUND) {
                st_fail(sh, "reserve", rc, &err);
            }
        }
        if (dead)
            continue;
        uint64_t fate = st_rand(c) % 10;
        if (fate < 2)
            continue; /* abandoned: expiry's job */
        pt_theater_opts o = {fate < 4 ? (int)(1 + st_rand(c) % 2) : 0};
        rc = pt_theater_checkout(sh->db, cart, &o, &err);
        if (rc == 0)
            atomic_fetch_add(&sh->sold, 1);
        else if (rc == PT_THEATER_CRASHED)
            atomic_fetch_add(&sh->crashed, 1);
        else if (rc != MD_NOTFOUND) /* MD_NOTFOUND: expired meanwhile */
            st_fail(sh, "checkout", rc, &err);
    }
    return NULL;
}

/* Expire carts older than a few ms, over and over, some passes stopped. */
static void *st_expiry_main(void *arg)
{
    st_client *c = arg;
    st_shared *sh = c->sh;
    md_error err;
    while (!atomic_load(&sh->stop_expiry)) {
        pt_theater_opts o = {st_rand(c) % 3 == 0 ? (int)(1 + st_rand(c) % 4) : 0};
        int rc = pt_theater_expire(sh->db, pt_now_ms() - 2, &o, NULL, &err);
        if (rc != 0 && rc != PT_THEATER_CRASHED)
            st_fail(sh, "expire", rc, &err);
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

Test(pt_theater, threads_with_stops_and_expiry_never_sell_a_seat_twice, .timeout = 120)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        enum { NCLIENTS = 8 };
        setup_theater(&t, ST_SESSIONS, ST_ROWS, ST_COLS);
        st_shared sh = {.db = t.db, .carts_per_client = 60};
        atomic_init(&sh.next_cart, 1);
        atomic_init(&sh.stop_expiry, 0);
        atomic_init(&sh.sold, 0);
        atomic_init(&sh.crashed, 0);
        ptt_errors_init(&sh.err);
        pthread_t th[NCLIENTS + 1];
        st_client cl[NCLIENTS + 1];
        for (int i = 0; i <= NCLIENTS; i++) {
            cl[i] = (st_client){.sh = &sh, .rng = 0x1234567ull * (uint64_t)(i + 1) + 99};
            cr_assert_eq(pthread_create(&th[i], NULL, i == NCLIENTS ? st_expiry_main
                                                                    : st_client_main, &cl[i]),
                         0);
        }
        for (int i = 0; i < NCLIENTS; i++)
            pthread_join(th[i], NULL);
        atomic_store(&sh.stop_expiry, 1);
        pthread_join(th[NCLIENTS], NULL);
        ptt_errors_destroy(&sh.err);
        cr_assert_eq(atomic_load(&sh.err.n), 0, "[%s] %s", t.engine, sh.err.first);
        cr_assert_gt(atomic_load(&sh.sold), 0, "[%s] nothing sold", t.engine);
        cr_assert_gt(atomic_load(&sh.crashed), 0, "[%s] no failure point hit", t.engine);
        expect_check(&t, false);
        cr_assert_eq(pt_theater_expire(t.db, FAR_FUTURE, NULL, NULL, &err), 0, "[%s] %s",
                     t.engine, err.message);
        expect_check(&t, true);
        /* settled: every taken seat is in exactly one receipt */
        cr_assert_eq(ptt_count(&t, "sessions", "{\"reservations.0\": {\"$exists\": true}}"), 0);
        cr_assert_eq(ptt_count(&t, "carts", "{\"state\": \"active\"}"), 0);
    }
}

/* ---- the scenario: what the simulator ran ----------------------------------- */

static const pt_scenario *scenario(void)
{
    return pt_pattern_theater.scenarios[0];
}

/* The scenario's setup for `users` users, reduced (quick) as the tests run it. */
static void *scenario_setup(ptt_db *t, int64_t users)
{
    md_error err;
    void *state = NULL;
    pt_setup_args a = {.users = users, .quick = true};
    cr_assert_eq(scenario()->setup(t->db, &a, &state, &err), 0, "[%s] %s", t->engine,
                 err.message);
    return state;
}

/* The document of coll with string _id `id` (caller destroys). */
static bson_t *find_str(ptt_db *t, const char *coll, const char *id)
{
    char f[128];
    snprintf(f, sizeof f, "{\"_id\": \"%s\"}", id);
    return ptt_first_doc(t, coll, f);
}

/* The only document of coll (caller destroys). */
static bson_t *find_only(ptt_db *t, const char *coll)
{
    cr_assert_eq(ptt_count(t, coll, "{}"), 1, "[%s] one %s", t->engine, coll);
    return ptt_first_doc(t, coll, "{}");
}

static bson_type_t type_of(const bson_t *doc, const char *path)
{
    bson_iter_t it;
    return ptt_find(doc, path, &it) ? bson_iter_type(&it) : BSON_TYPE_EOD;
}

static bool is_nan(const bson_t *doc, const char *path)
{
    bson_iter_t it;
    return ptt_find(doc, path, &it) && BSON_ITER_HOLDS_DOUBLE(&it) && isnan(bson_iter_double(&it));
}

static int run_user(ptt_db *t, void *state, uint64_t id)
{
    md_error err;
    md_error_clear(&err);
    pt_user u = {.db = t->db, .state = state, .id = id, .rng = id + 1};
    int rc = scenario()->ops[0].run(&u, &err);
    cr_assert_eq(rc, 0, "[%s] user %llu: %s", t->engine, (unsigned long long)id, err.message);
    return rc;
}

static void expect_seats(ptt_db *t, const char *session, int row, int col0, int n, int64_t avail)
{
    char path[32];
    bson_t *s = find_str(t, "sessions", session);
    for (int c = 0; c < 30; c++) {
        snprintf(path, sizeof path, "seats.%d.%d", row, c);
        cr_assert_eq(ptt_i64(s, path), c >= col0 && c < col0 + n, "[%s] %s %s", t->engine,
                     session, path);
    }
    cr_assert_eq(ptt_i64(s, "seatsAvailable"), avail, "[%s] %s", t->engine, session);
    cr_assert(!ptt_has(s, "reservations.0"), "[%s] %s keeps a reservation", t->engine, session);
    bson_destroy(s);
}

/* Per process, 100 theaters of 30 x 30 and as many of each theater's 100
 * sessions as the users reach (quick); string ids "<p>.<t>[.<s>]". */
Test(pt_theater, scenario_sets_up_the_simulators_theaters_and_sessions, .timeout = 60)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        /* 400 users: 100 a process, the 100th on its theater 0's session 1 */
        void *state = scenario_setup(&t, 400);
        cr_assert_eq(ptt_count(&t, "theaters", "{}"), 400, "[%s]", t.engine);
        cr_assert_eq(ptt_count(&t, "sessions", "{}"), 800, "[%s]", t.engine);
        bson_t *th = find_str(&t, "theaters", "3.99");
        cr_assert_str_eq(ptt_str(th, "name"), "3.99");
        cr_assert_eq(type_of(th, "seatsAvailable"), BSON_TYPE_INT32);
        cr_assert_eq(ptt_i64(th, "seatsAvailable"), 900);
        bson_destroy(th);
        bson_t *s = find_str(&t, "sessions", "2.7.1");
        cr_assert_str_eq(ptt_str(s, "theaterId"), "2.7");
        cr_assert_eq(type_of(s, "name"), BSON_TYPE_INT32, "[%s] name is the number s", t.engine);
        cr_assert_eq(ptt_i64(s, "name"), 1);
        cr_assert_eq(ptt_i64(s, "description"), 1);
        cr_assert_eq(type_of(s, "start"), BSON_TYPE_DATE_TIME);
        cr_assert_eq(type_of(s, "end"), BSON_TYPE_DATE_TIME);
        cr_assert_eq(type_of(s, "price"), BSON_TYPE_INT32);
        cr_assert_eq(ptt_i64(s, "price"), 10);
        cr_assert_eq(ptt_i64(s, "seatsAvailable"), 900);
        cr_assert_eq(ptt_i64(s, "seats.29.29"), 0);
        cr_assert(!ptt_has(s, "seats.30") && !ptt_has(s, "seats.0.30"), "[%s] 30 x 30", t.engine);
        cr_assert(ptt_has(s, "reservations") && !ptt_has(s, "reservations.0"));
        cr_assert_gt(s->len, 7000, "[%s] a session of %u bytes", t.engine, s->len);
        bson_destroy(s);
        bson_t *r = PTT_OK(&t, "{\"listIndexes\": \"carts\"}");
        cr_assert_str_eq(ptt_str(r, "cursor.firstBatch.1.name"), "state_1");
        bson_destroy(r);
        r = PTT_OK(&t, "{\"listIndexes\": \"sessions\"}");
        cr_assert_str_eq(ptt_str(r, "cursor.firstBatch.1.name"), "reservations._id_1");
        bson_destroy(r);
        pt_scenario_destroy(scenario(), state);
    }
}

/* A user's seven requests, their documents as the simulator wrote them,
 * and the session each user gets. */
Test(pt_theater, scenario_user_makes_the_simulators_seven_requests, .timeout = 60)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        void *state = scenario_setup(&t, 400);
        bson_t *before = PTT_OK(&t, "{\"serverStatus\": 1}");
        run_user(&t, state, 0);
        bson_t *after = PTT_OK(&t, "{\"serverStatus\": 1}");
        /* the cart and the receipt; the session, the cart, the $pull, done; the cart read */
        cr_assert_eq(ptt_i64(after, "metrics.document.inserted") -
                         ptt_i64(before, "metrics.document.inserted"), 2, "[%s]", t.engine);
        cr_assert_eq(ptt_i64(after, "metrics.document.updated") -
                         ptt_i64(before, "metrics.document.updated"), 4, "[%s]", t.engine);
        cr_assert_eq(ptt_i64(after, "metrics.document.returned") -
                         ptt_i64(before, "metrics.document.returned"), 1,
                     "[%s] one read: the cart, no price", t.engine);
        bson_destroy(before);
        bson_destroy(after);

        /* user 0: process 0's first user, theater 1, session 0, row 0 seats 0-4 */
        expect_seats(&t, "0.1.0", 0, 0, 5, 895);
        bson_t *c = find_only(&t, "carts");
        cr_assert_eq(type_of(c, "_id"), BSON_TYPE_DOUBLE, "[%s] a double cart _id", t.engine);
        cr_assert_str_eq(ptt_str(c, "state"), "done");
        cr_assert(is_nan(c, "total"), "[%s] total $inc'ed by NaN", t.engine);
        cr_assert_str_eq(ptt_str(c, "reservations.0.sessionId"), "0.1.0");
        cr_assert_eq(type_of(c, "reservations.0.price"), BSON_TYPE_NULL);
        cr_assert(is_nan(c, "reservations.0.total"));
        cr_assert_eq(ptt_i64(c, "reservations.0.seats.4.1"), 4);
        cr_assert(ptt_has(c, "modifiedOn") && ptt_has(c, "createdOn"));
        bson_destroy(c);
        bson_t *r = find_only(&t, "receipts");
        cr_assert_eq(type_of(r, "_id"), BSON_TYPE_OID);
        cr_assert_eq(type_of(r, "createdOn"), BSON_TYPE_DATE_TIME);
        cr_assert(!ptt_has(r, "total"), "[%s] the simulator's receipt has no total", t.engine);
        cr_assert_str_eq(ptt_str(r, "reservations.0.sessionId"), "0.1.0");
        cr_assert_eq(ptt_i64(r, "reservations.0.seats.0.0"), 0);
        cr_assert_eq(ptt_i64(r, "reservations.0.seats.4.1"), 4);
        cr_assert(!ptt_has(r, "reservations.1"));
        bson_destroy(r);

        /* user 1: process 1's first; user 396: process 0's 100th, past its
         * last theater: theater 0, the next session and the next 5 seats */
        run_user(&t, state, 1);
        expect_seats(&t, "1.1.0", 0, 0, 5, 895);
        run_user(&t, state, 396);
        expect_seats(&t, "0.0.1", 0, 5, 5, 895);
        expect_seats(&t, "0.0.0", 0, 0, 0, 900);
        md_error err;
        cr_assert_eq(scenario()->check(t.db, state, &err), 0, "[%s] %s", t.engine, err.message);
        pt_scenario_destroy(scenario(), state);
    }
}

Test(pt_theater, scenario_checkout_runs_and_checks, .timeout = 60)
{
    const pt_scenario *sc = scenario();
    cr_assert_eq(pt_pattern_theater.nscenarios, 1);
    cr_assert_str_eq(pt_pattern_theater.section, "5.7");
    cr_assert_str_eq(pt_pattern_theater.book_winner, "mmapv1");
    cr_assert_str_eq(sc->name, "theater_checkout");
    cr_assert_not_null(sc->note);
    cr_assert_eq(sc->ops[0].users, 1000);
    cr_assert_float_eq(sc->ops[0].book_mmap.mean, 2292.494, 1e-9);
    cr_assert_float_eq(sc->ops[0].book_wt.max, 17122.854, 1e-9);
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        char first[256];
        void *state = scenario_setup(&t, 400);
        int bad = ptt_run_op(t.db, state, &sc->ops[0], 6, 400, first);
        cr_assert_eq(bad, 0, "[%s] %s", t.engine, first);
        cr_assert_eq(sc->check(t.db, state, &err), 0, "[%s] %s", t.engine, err.message);
        cr_assert_eq(ptt_count(&t, "receipts", "{}"), 400);
        cr_assert_eq(ptt_count(&t, "carts", "{\"state\": \"done\"}"), 400);
        /* every user in a session of its own */
        cr_assert_eq(ptt_count(&t, "sessions", "{\"seatsAvailable\": 895}"), 400, "[%s]",
                     t.engine);
        cr_assert_eq(ptt_count(&t, "sessions", "{\"seatsAvailable\": 900}"), 400);

        /* the check notices: a seat taken behind the users' backs ... */
        const char *take = "{\"update\": \"sessions\", \"updates\": [{\"q\": {\"_id\": "
                           "\"0.5.1\"}, \"u\": {\"$set\": {\"seats.3.3\": %d}, "
                           "\"$inc\": {\"seatsAvailable\": %d}}}]}";
        bson_destroy(PTT_OK(&t, take, 1, -1));
        cr_assert_neq(sc->check(t.db, state, &err), 0, "[%s] missed a seat on no receipt",
                      t.engine);
        cr_assert(strstr(err.message, "on no receipt"), "%s", err.message);
        bson_destroy(PTT_OK(&t, take, 0, 1));
        cr_assert_eq(sc->check(t.db, state, &err), 0, "[%s] %s", t.engine, err.message);
        /* ... seatsAvailable off by one ... */
        bson_destroy(PTT_OK(&t, take, 0, 1));
        cr_assert_neq(sc->check(t.db, state, &err), 0);
        cr_assert(strstr(err.message, "seatsAvailable"), "%s", err.message);
        bson_destroy(PTT_OK(&t, take, 0, -1));
        /* ... a reservation left in a session ... */
        const char *hold = "{\"update\": \"sessions\", \"updates\": [{\"q\": {\"_id\": "
                           "\"0.5.1\"}, \"u\": {\"$set\": {\"reservations\": %s}}}]}";
        bson_destroy(PTT_OK(&t, hold, "[{\"_id\": 1}]"));
        cr_assert_neq(sc->check(t.db, state, &err), 0);
        cr_assert(strstr(err.message, "still holds"), "%s", err.message);
        bson_destroy(PTT_OK(&t, hold, "[]"));
        /* ... a cart not checked out ... */
        const char *cart = "{\"update\": \"carts\", \"updates\": [{\"q\": {}, \"u\": "
                           "{\"$set\": {\"state\": \"%s\"}}, \"multi\": %s}]}";
        bson_destroy(PTT_OK(&t, cart, "active", "false"));
        cr_assert_neq(sc->check(t.db, state, &err), 0);
        cr_assert(strstr(err.message, "not checked out"), "%s", err.message);
        bson_destroy(PTT_OK(&t, cart, "done", "true"));
        cr_assert_eq(sc->check(t.db, state, &err), 0, "[%s] %s", t.engine, err.message);
        /* ... and a lost receipt */
        bson_destroy(PTT_OK(&t, "{\"delete\": \"receipts\", \"deletes\": [{\"q\": {}, "
                                "\"limit\": 1}]}"));
        cr_assert_neq(sc->check(t.db, state, &err), 0, "[%s] check missed a lost receipt",
                      t.engine);
        pt_scenario_destroy(sc, state);
    }
}
