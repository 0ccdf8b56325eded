/*
 * tsan_carts.c -- the shopping-cart protocols (5.5 with reservation, 5.6
 * without; patterns/cart_*.c) under ThreadSanitizer (`make test-tsan`;
 * Criterion cannot start under TSan; test_cart_*.c run the same workload
 * in the suite): many clients adding, changing, removing and checking out
 * against three products with a small stock, the cleanup job racing them,
 * 15% of the operations stopped part-way as if the client died; then the
 * cleanup job and the invariants (inventory conserved, no negative stock,
 * carts and reservations agreeing, one order per completed cart).  Then
 * each chapter's scenario user (the simulator's classes: 5 adds at once on
 * one cart through pt_user_parallel's helpers) from 4 clients, and the
 * scenario's check; and both scenarios briefly through the runner
 * (pt_run_scenario, its clients and helpers).  On mmapv1 (collection
 * locks, journal on) and btree (document locks, log on).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "minidoc.h"
#include "pt_tsan_util.h"
#include "patterns.h"
#include "pt_sim.h"

static int run(const char *engine, bool reserving)
{
    char dir[64] = "/tmp/md_tsan_cart_XXXXXX";
    md_db *db;
    md_error err;
    int64_t initial[3] = {60, 60, 60};
    pt_cart_totals t;
    int bad = 0;
    if (!(db = ptsan_open(engine, dir)))
        return 1;
    if (pt_cart_create_indexes(db, &err) != 0 || pt_cart_seed(db, 3, initial, 64, &err) != 0) {
        fprintf(stderr, "%s: setup: %s\n", engine, err.message);
        bad = 1;
        goto out;
    }
    pt_cart_stress s = {.reserving = reserving, .threads = 8, .ops = 200, .nproducts = 3,
                        .crash_pct = 15, .expire_every = 12, .expire_age_ms = 3, .seed = 5};
    if (pt_cart_stress_run(db, &s, &err) != 0) {
        fprintf(stderr, "%s: stress: %s\n", engine, err.message);
        bad = 1;
        goto out;
    }
    if (pt_cart_cleanup(db, pt_now_ms(), NULL, &err) != 0 ||
        pt_cart_check(db, 3, initial, reserving, &t, &err) != 0) {
        fprintf(stderr, "%s: invariants: %s\n", engine, err.message);
        bad = 1;
        goto out;
    }
    if (s.crashed == 0 || s.checked_out == 0 || t.reserved != 0 ||
        t.available + t.sold != 180) {
        fprintf(stderr, "%s: workload did not exercise the protocols\n", engine);
        bad = 1;
    }
    printf("%s %s: %lld ops (%lld ok, %lld out of stock/not active, %lld stopped), "
           "%lld checkouts, %lld cleanups; after cleanup: %lld sold, %lld available, "
           "carts %lld completed / %lld expired\n",
           engine, reserving ? "reservation" : "no reservation",
           (long long)(s.adds + s.updates + s.removes + s.checkouts + s.cleanups),
           (long long)s.ok, (long long)s.notfound, (long long)s.crashed,
           (long long)s.checked_out, (long long)s.cleanups, (long long)t.sold,
           (long long)t.available, (long long)t.completed, (long long)t.expired);
out:
    ptsan_close(db, dir);
    return bad;
}

/* The scenario's users, SCN_USERS of them, from SCN_CLIENTS threads. */
enum { SCN_CLIENTS = 4, SCN_USERS = 40 };

typedef struct scn_run {
    md_db *db;
    void *state;
    const pt_op *op;
    pt_pool *pool;
    atomic_int next, failed;
} scn_run;

static void *scn_client(void *arg)
{
    scn_run *r = arg;
    int id;
    while ((id = atomic_fetch_add(&r->next, 1)) < SCN_USERS) {
        pt_user u = {.db = r->db, .state = r->state, .id = (uint64_t)id,
                     .rng = 0x9e3779b97f4a7c15ull * (uint64_t)(id + 1), .pool = r->pool};
        md_error err;
        if (r->op->run(&u, &err) != 0 && atomic_fetch_add(&r->failed, 1) == 0)
            fprintf(stderr, "%s: user %d: %s\n", r->op->name, id, err.message);
    }
    return NULL;
}

/* Carts completed with all 5 items (-1 if the count failed). */
static int64_t full_carts(md_db *db)
{
    md_collection *c = md_db_get_collection(db, "carts");
    bson_t *q = BCON_NEW("state", BCON_UTF8("completed"), "products", "{", "$size",
                         BCON_INT32(5), "}");
    int64_t n = -1;
    if (md_collection_count(c, q, NULL, &n, NULL) != 0)
        n = -1;
    bson_destroy(q);
    md_collection_destroy(c);
    return n;
}

static int run_scenario(const char *engine, const pt_scenario *sc)
{
    char dir[64] = "/tmp/md_tsan_cart_XXXXXX";
    md_db *db;
    md_error err;
    int bad = 0;
    if (!(db = ptsan_open(engine, dir)))
        return 1;
    pt_setup_args a = {.users = SCN_USERS, .quick = true};
    scn_run r = {.db = db, .op = &sc->ops[0]};
    pthread_t th[SCN_CLIENTS];
    int started = 0;
    if (sc->setup(db, &a, &r.state, &err) != 0 || pt_pool_new(SCN_CLIENTS, &r.pool, &err) != 0) {
        fprintf(stderr, "%s %s: setup: %s\n", engine, sc->name, err.message);
        bad = 1;
        goto out;
    }
    for (; started < SCN_CLIENTS; started++)
        if (pthread_create(&th[started], NULL, scn_client, &r) != 0)
            break;
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    if (started < SCN_CLIENTS || atomic_load(&r.failed) != 0 ||
        pt_cart_scenario_refused(r.state) != 0) {
        fprintf(stderr, "%s %s: %d clients, %d users failed, %lld adds refused\n", engine,
                sc->name, started, atomic_load(&r.failed),
                (long long)pt_cart_scenario_refused(r.state));
        bad = 1;
    } else if (sc->check(db, r.state, &err) != 0) {
        fprintf(stderr, "%s %s: check: %s\n", engine, sc->name, err.message);
        bad = 1;
    } else if (full_carts(db) != SCN_USERS) {
        fprintf(stderr, "%s %s: %lld of %d carts completed with 5 items\n", engine, sc->name,
                (long long)full_carts(db), SCN_USERS);
        bad = 1;
    } else {
        printf("%s %s: %d users checked out 5 items each\n", engine, sc->name, SCN_USERS);
    }
out:
    pt_pool_destroy(r.pool);
    if (r.state)
        pt_scenario_destroy(sc, r.state);
    ptsan_close(db, dir);
    return bad;
}

/* The same scenario through the runner (pt_run_scenario: its clients and
 * its pool of helpers, then the service-time run), briefly: 4 clients,
 * 2 iterations of 100 ms, 5 users each. */
static int run_runner(const char *engine, const pt_scenario *sc)
{
    pt_run_opts o;
    pt_run_opts_book(&o, engine);
    o.processes = 1;
    o.pool_size = 4;
    o.resolution_ms = 100;
    o.iterations = 2;
    o.rate_scale = 0.05;
    o.quick = true;
    o.service = true;
    pt_run_result *r = calloc(1, sizeof *r);
    md_error err;
    int bad = 0;
    if (!r)
        return 1;
    if (pt_run_scenario(sc, &o, r, &err) != 0) {
        fprintf(stderr, "%s %s: runner: %s\n", engine, sc->name, err.message);
        bad = 1;
    } else if (!r->ok || r->ops[0].users != 10 || r->ops[0].service_users != 5) {
        fprintf(stderr, "%s %s: runner: %lld users, %lld errors (%s), check: %s, service: %s\n",
                engine, sc->name, (long long)r->ops[0].users, (long long)r->ops[0].errors,
                r->ops[0].first_error, r->check_error, r->service_error);
        bad = 1;
    } else {
        printf("%s %s: runner ran %lld users and the service run\n", engine, sc->name,
               (long long)r->ops[0].users);
    }
    free(r);
    return bad;
}

int main(void)
{
    int bad = 0;
    static const char *const engines[] = {"mmapv1", "btree"};
    for (int e = 0; e < 2; e++) {
        bad += run(engines[e], true);
        bad += run(engines[e], false);
        bad += run_scenario(engines[e], pt_pattern_cart_reservation.scenarios[0]);
        bad += run_scenario(engines[e], pt_pattern_cart_no_reservation.scenarios[0]);
        bad += run_runner(engines[e], pt_pattern_cart_reservation.scenarios[0]);
        bad += run_runner(engines[e], pt_pattern_cart_no_reservation.scenarios[0]);
    }
    printf("tsan_carts: %s\n", bad ? "FAILED" : "ok");
    return bad != 0;
}
