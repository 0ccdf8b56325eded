/*
 * tsan_theater_account.c -- the protocol stress of 5.7 Theater Reservation
 * and 5.8 Account Transactions as a standalone program for ThreadSanitizer
 * (Criterion cannot start under TSan; `make test-tsan` builds and runs it).
 *
 * On mmapv1 and btree: client threads reserve overlapping seats, check
 * out or abandon carts, some stopped at a random failure point, while an
 * expiry thread releases stale carts; then a final expiry and the settled
 * seat invariants.  Then client threads transfer random amounts between a
 * few accounts (some short of money, some stopped, some through the
 * book's claim by application), then racing recoveries, a final recovery
 * and the money invariants.  Exit status 0 when every invariant holds and
 * no operation failed.
 */
#include <ftw.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "minidoc.h"
#include "patterns.h"
#include "pt_errors.h"

#define TH_SESSIONS 2
#define TH_ROWS 3
#define TH_COLS 6
#define AC_ACCOUNTS 6
#define AC_OPENING 1000
#define AC_LEASE_MS 400
#define NCLIENTS 6

typedef struct sx_shared {
    md_db *db;
    atomic_int_fast64_t next_cart;
    atomic_int stop, ok, crashed, refused;
    ptt_errors err;
} sx_shared;

typedef struct sx_thread {
    sx_shared *sh;
    uint64_t rng;
    int index;
} sx_thread;

static uint64_t sx_rand(sx_thread *t)
{
    return pt_rand_next(&t->rng);
}

static void sx_fail(sx_shared *sh, const char *what, int rc, const md_error *err)
{
    ptt_errors_add(&sh->err, what, rc, err);
}

static void sx_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void sx_run(sx_shared *sh, int n, void *(*fn)(void *), uint64_t seed)
{
    pthread_t th[NCLIENTS + 1];
    sx_thread t[NCLIENTS + 1];
    for (int i = 0; i < n; i++) {
        t[i] = (sx_thread){.sh = sh, .rng = seed * (uint64_t)(i + 3) + 1, .index = i};
        if (pthread_create(&th[i], NULL, fn, &t[i]) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            exit(2);
        }
    }
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
}

/* ---- theater ---------------------------------------------------------------- */

static void *th_client(void *arg)
{
    sx_thread *t = arg;
    sx_shared *sh = t->sh;
    md_error err;
    for (int k = 0; k < 20; k++) {
        int64_t cart = atomic_fetch_add(&sh->next_cart, 1);
        int rc = pt_theater_cart_create(sh->db, cart, &err);
        if (rc != 0) {
            sx_fail(sh, "cart", rc, &err);
            continue;
        }
        bool dead = false;
        for (int r = 0, nres = 1 + (int)(sx_rand(t) % 2); r < nres && !dead; r++) {
            pt_seat s[2];
            int n = 1 + (int)(sx_rand(t) % 2);
            int row = (int)(sx_rand(t) % TH_ROWS), col = (int)(sx_rand(t) % (TH_COLS - 1));
            for (int i = 0; i < n; i++)
                s[i] = (pt_seat){row, col + i};
            pt_theater_opts o = {sx_rand(t) % 6 == 0 ? 1 : 0};
            rc = pt_theater_reserve(sh->db, cart, 1 + (int64_t)(sx_rand(t) % TH_SESSIONS), s, n,
                                    &o, &err);
            if (rc == PT_THEATER_CRASHED)
                dead = true, atomic_fetch_add(&sh->crashed, 1);
            else if (rc == MD_NOTFOUND)
                atomic_fetch_add(&sh->refused, 1);
            else if (rc != 0)
                sx_fail(sh, "reserve", rc, &err);
        }
        uint64_t fate = sx_rand(t) % 10;
        if (dead || fate < 2)
            continue;
        pt_theater_opts o = {fate < 4 ? (int)(1 + sx_rand(t) % 2) : 0};
        rc = pt_theater_checkout(sh->db, cart, &o, &err);
        if (rc == 0)
            atomic_fetch_add(&sh->ok, 1);
        else if (rc == PT_THEATER_CRASHED)
            atomic_fetch_add(&sh->crashed, 1);
        else if (rc != MD_NOTFOUND)
            sx_fail(sh, "checkout", rc, &err);
    }
    return NULL;
}

static void *th_expiry(void *arg)
{
    sx_thread *t = arg;
    sx_shared *sh = t->sh;
    md_error err;
    while (!atomic_load(&sh->stop)) {
        pt_theater_opts o = {sx_rand(t) % 3 == 0 ? (int)(1 + sx_rand(t) % 4) : 0};
        int rc = pt_theater_expire(sh->db, pt_now_ms() - 2, &o, NULL, &err);
        if (rc != 0 && rc != PT_THEATER_CRASHED)
            sx_fail(sh, "expire", rc, &err);
        sx_sleep_ms(2);
    }
    return NULL;
}

static int th_stress(md_db *db, const char *engine)
{
    md_error err;
    sx_shared sh = {.db = db};
    int rc = pt_theater_create_indexes(db, &err);
    if (rc == 0)
        rc = pt_theater_create(db, 1, "The Royal", TH_ROWS, TH_COLS, &err);
    for (int64_t s = 1; rc == 0 && s <= TH_SESSIONS; s++)
        rc = pt_theater_add_session(db, 1, s, "Action Movie 5", "Another action movie",
                                    pt_now_ms(), pt_now_ms() + 3600000, 10, &err);
    if (rc != 0) {
        fprintf(stderr, "[%s] theater setup: %s\n", engine, err.message);
        return 1;
    }
    atomic_init(&sh.next_cart, 1);
    ptt_errors_init(&sh.err);
    /* the expiry thread runs beside the clients until they are done */
    pthread_t ex;
    sx_thread ext = {.sh = &sh, .rng = 0xfeedull, .index = NCLIENTS};
    if (pthread_create(&ex, NULL, th_expiry, &ext) != 0)
        return 1;
    sx_run(&sh, NCLIENTS, th_client, 0x51ull);
    atomic_store(&sh.stop, 1);
    pthread_join(ex, NULL);
    ptt_errors_destroy(&sh.err);
    if (atomic_load(&sh.err.n)) {
        fprintf(stderr, "[%s] theater: %d errors, first: %s\n", engine, atomic_load(&sh.err.n),
                sh.err.first);
        return 1;
    }
    if ((rc = pt_theater_check(db, false, &err)) == 0 &&
        (rc = pt_theater_expire(db, pt_now_ms() + 3600000, NULL, NULL, &err)) == 0)
        rc = pt_theater_check(db, true, &err);
    printf("[%s] theater: %d checkouts, %d refused reservations, %d stops: %s\n", engine,
           atomic_load(&sh.ok), atomic_load(&sh.refused), atomic_load(&sh.crashed),
           rc == 0 ? "invariants hold" : err.message);
    return rc != 0 || atomic_load(&sh.ok) == 0 || atomic_load(&sh.crashed) == 0;
}

/* ---- account ------------------------------------------------------------------ */

static void ac_count(sx_shared *sh, const char *what, int rc, const md_error *err)
{
    if (rc == 0)
        atomic_fetch_add(&sh->ok, 1);
    else if (rc == MD_NOTFOUND)
        atomic_fetch_add(&sh->refused, 1);
    else if (rc == PT_ACCOUNT_CRASHED)
        atomic_fetch_add(&sh->crashed, 1);
    else
        sx_fail(sh, what, rc, err);
}

static void *ac_client(void *arg)
{
    sx_thread *t = arg;
    sx_shared *sh = t->sh;
    md_error err;
    char app[16];
    snprintf(app, sizeof app, "A%d", t->index);
    for (int k = 0; k < 30; k++) {
        char a[16], b[16];
        int i = (int)(sx_rand(t) % AC_ACCOUNTS), j = (int)(sx_rand(t) % (AC_ACCOUNTS - 1));
        if (j >= i)
            j++;
        snprintf(a, sizeof a, "acct%d", i);
        snprintf(b, sizeof b, "acct%d", j);
        int64_t amount = 1 + (int64_t)(sx_rand(t) % 400);
        pt_account_opts o = {sx_rand(t) % 5 == 0 ? (int)(1 + sx_rand(t) % 7) : 0};
        if (k % 4 == 3) {
            bson_oid_t id;
            int rc = pt_account_txn_create(sh->db, a, b, amount, NULL, &err);
            if (rc == 0)
                rc = pt_account_claim(sh->db, app, &id, &err);
            if (rc == 0)
                ac_count(sh, "apply", pt_account_apply(sh->db, &id, app, &o, &err), &err);
            else if (rc != MD_NOTFOUND)
                sx_fail(sh, "claim", rc, &err);
        } else {
            ac_count(sh, "transfer", pt_account_transfer(sh->db, a, b, amount, &o, NULL, &err),
                     &err);
        }
    }
    return NULL;
}

static void *ac_recovery(void *arg)
{
    sx_thread *t = arg;
    sx_shared *sh = t->sh;
    md_error err;
    for (int pass = 0; pass < 4; pass++) {
        pt_account_opts o = {sx_rand(t) % 2 == 0 ? (int)(1 + sx_rand(t) % 6) : 0};
        int rc = pt_account_recover(sh->db, pt_now_ms() - AC_LEASE_MS, &o, NULL, &err);
        if (rc != 0 && rc != PT_ACCOUNT_CRASHED)
            sx_fail(sh, "recover", rc, &err);
    }
    return NULL;
}

static int ac_stress(md_db *db, const char *engine)
{
    md_error err;
    sx_shared sh = {.db = db};
    int rc = pt_account_create_indexes(db, &err);
    for (int i = 0; rc == 0 && i < AC_ACCOUNTS; i++) {
        char a[16];
        snprintf(a, sizeof a, "acct%d", i);
        rc = pt_account_create(db, a, AC_OPENING, &err);
    }
    if (rc != 0) {
        fprintf(stderr, "[%s] account setup: %s\n", engine, err.message);
        return 1;
    }
    ptt_errors_init(&sh.err);
    sx_run(&sh, NCLIENTS, ac_client, 0x77ull);
    if (atomic_load(&sh.err.n) == 0 &&
        (rc = pt_account_check(db, AC_ACCOUNTS * AC_OPENING, AC_OPENING, false, &err)) == 0) {
        sx_sleep_ms(AC_LEASE_MS + 50);
        sx_run(&sh, 3, ac_recovery, 0x99ull);
        if ((rc = pt_account_check(db, AC_ACCOUNTS * AC_OPENING, AC_OPENING, false, &err)) == 0 &&
            (rc = pt_account_recover(db, pt_now_ms() + 3600000, NULL, NULL, &err)) == 0)
            rc = pt_account_check(db, AC_ACCOUNTS * AC_OPENING, AC_OPENING, true, &err);
    }
    ptt_errors_destroy(&sh.err);
    if (atomic_load(&sh.err.n)) {
        fprintf(stderr, "[%s] account: %d errors, first: %s\n", engine, atomic_load(&sh.err.n),
                sh.err.first);
        return 1;
    }
    printf("[%s] account: %d done, %d canceled or not ours, %d stops: %s\n", engine,
           atomic_load(&sh.ok), atomic_load(&sh.refused), atomic_load(&sh.crashed),
           rc == 0 ? "invariants hold" : err.message);
    return rc != 0 || atomic_load(&sh.ok) == 0 || atomic_load(&sh.crashed) == 0;
}

/* ---- main ----------------------------------------------------------------------- */

static int sx_rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static int sx_engine(const char *engine, int (*stress)(md_db *, const char *))
{
    char dir[] = "/tmp/md_tsan_pt_XXXXXX";
    md_error err;
    md_db *db;
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    bson_t *o = BCON_NEW("engine", BCON_UTF8(engine), "mmapv1", "{", "firstFileSize",
                         BCON_INT32(1 << 20), "nsSize", BCON_INT32(65536), "}");
    int rc = md_db_open(dir, o, &db, &err);
    bson_destroy(o);
    if (rc != 0) {
        fprintf(stderr, "[%s] open: %s\n", engine, err.message);
        return 1;
    }
    int bad = stress(db, engine);
    md_db_close(db);
    nftw(dir, sx_rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return bad;
}

int main(void)
{
    static const char *const engines[] = {"mmapv1", "btree"};
    int bad = 0;
    for (size_t i = 0; i < sizeof engines / sizeof *engines; i++) {
        bad |= sx_engine(engines[i], th_stress);
        bad |= sx_engine(engines[i], ac_stress);
    }
    printf("tsan_theater_account: %s\n", bad ? "FAILED" : "ok");
    return bad;
}
