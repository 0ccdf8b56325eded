/*
 * test_account.c -- 5.8 Account Transactions (patterns/account.c) on every
 * engine: the book's transfer of 100 from Joe to Peter, each of the
 * transfer's failure points and what recovery makes of it, rollback paths
 * (insufficient funds, a missing account, cancel), the book's concurrent
 * applications (findAndModify with $exists), the recovery timeout, the
 * indexes and their plans, a check that notices lost or double-applied
 * money, many threads with stops and concurrent recoveries, and the
 * account_transfer scenario: the simulator's accounts and index, the
 * documents and reads of one of its transfers, and its check.
 */
#include <time.h>

#include "pt_test_util.h"

#define FAR_FUTURE (pt_now_ms() + 3600 * 1000)
#define JOE "Joe Moneylender"
#define PETER "Peter Bum"

static void setup_bank(ptt_db *t, int64_t joe, int64_t peter)
{
    md_error err;
    cr_assert_eq(pt_account_create_indexes(t->db, &err), 0, "[%s] %s", t->engine, err.message);
    cr_assert_eq(pt_account_create(t->db, JOE, joe, &err), 0, "%s", err.message);
    cr_assert_eq(pt_account_create(t->db, PETER, peter, &err), 0, "%s", err.message);
}

static int64_t balance(ptt_db *t, const char *name)
{
    md_error err;
    int64_t b = -1;
    cr_assert_eq(pt_account_balance(t->db, name, &b, &err), 0, "[%s] %s", t->engine,
                 err.message);
    return b;
}

static bson_t *txn_doc(ptt_db *t, const bson_oid_t *id)
{
    char h[25], f[64];
    bson_oid_to_string(id, h);
    snprintf(f, sizeof f, "{\"_id\": {\"$oid\": \"%s\"}}", h);
    return ptt_first_doc(t, "transactions", f);
}

static void expect_state(ptt_db *t, const bson_oid_t *id, const char *state)
{
    bson_t *d = txn_doc(t, id);
    cr_assert_str_eq(ptt_str(d, "state"), state, "[%s] transaction state", t->engine);
    bson_destroy(d);
}

static int64_t pending_of(ptt_db *t, const char *name)
{
    char f[128];
    snprintf(f, sizeof f, "{\"name\": \"%s\", \"pendingTransactions.0\": {\"$exists\": true}}",
             name);
    return ptt_count(t, "accounts", f);
}

/* A macro, so that a failure names the line of the check. */
#define expect_check(t, total, initial, settled)                                    \
    do {                                                                          \
        md_error ce_;                                                             \
        md_error_clear(&ce_);                                                     \
        int rc_ = pt_account_check((t)->db, (total), (initial), (settled), &ce_);  \
        cr_assert_eq(rc_, 0, "[%s] invariants: %s", (t)->engine, ce_.message);   \
    } while (0)

Test(pt_account, the_books_transfer_from_joe_to_peter)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        bson_oid_t id;
        setup_bank(&t, 1000, 1000);
        bson_t *r = PTT_OK(&t, "{\"find\": \"accounts\", \"filter\": {\"name\": \"" JOE "\"}}");
        cr_assert_eq(ptt_i64(r, "cursor.firstBatch.0.balance"), 1000);
        cr_assert(ptt_has(r, "cursor.firstBatch.0.pendingTransactions"));
        bson_destroy(r);
        cr_assert_eq(pt_account_transfer(t.db, JOE, PETER, 100, NULL, &id, &err), 0, "[%s] %s",
                     t.engine, err.message);
        cr_assert_eq(balance(&t, JOE), 900);
        cr_assert_eq(balance(&t, PETER), 1100, "[%s] the destination is credited", t.engine);
        bson_t *d = txn_doc(&t, &id);
        cr_assert_str_eq(ptt_str(d, "state"), "done");
        cr_assert_str_eq(ptt_str(d, "source"), JOE);
        cr_assert_str_eq(ptt_str(d, "destination"), PETER);
        cr_assert_eq(ptt_i64(d, "amount"), 100);
        cr_assert(ptt_has(d, "createdAt") && ptt_has(d, "lastModified"));
        bson_destroy(d);
        cr_assert_eq(pending_of(&t, JOE) + pending_of(&t, PETER), 0);
        expect_check(&t, 2000, 1000, true);
        /* a transfer to oneself or of nothing is refused */
        cr_assert_eq(pt_account_transfer(t.db, JOE, JOE, 100, NULL, NULL, &err), MD_EINVAL);
        cr_assert_eq(pt_account_transfer(t.db, JOE, PETER, 0, NULL, NULL, &err), MD_EINVAL);
        /* a done transaction is not applied again */
        cr_assert_eq(pt_account_apply(t.db, &id, NULL, NULL, &err), MD_NOTFOUND);
        cr_assert_eq(balance(&t, JOE), 900);
    }
}

/* The state each failure point leaves, and what recovery makes of it. */
Test(pt_account, every_failure_point_then_recovery)
{
    static const char *const left[] = {"", "initial", "pending", "pending", "pending",
                                       "committed", "committed", "committed"};
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        for (int k = 1; k <= 7; k++) {
            md_error err;
            bson_oid_t id;
            char joe[32], peter[32];
            snprintf(joe, sizeof joe, "joe%d", k);
            snprintf(peter, sizeof peter, "peter%d", k);
            cr_assert_eq(pt_account_create(t.db, joe, 1000, &err), 0);
            cr_assert_eq(pt_account_create(t.db, peter, 1000, &err), 0);
            pt_account_opts stop = {k};
            cr_assert_eq(pt_account_transfer(t.db, joe, peter, 100, &stop, &id, &err),
                         PT_ACCOUNT_CRASHED, "[%s] k=%d", t.engine, k);
            expect_state(&t, &id, left[k]);
            cr_assert_eq(balance(&t, joe), k >= 3 ? 900 : 1000, "[%s] k=%d", t.engine, k);
            cr_assert_eq(balance(&t, peter), k >= 4 ? 1100 : 1000, "[%s] k=%d", t.engine, k);
            cr_assert_eq(pending_of(&t, joe), k >= 3 && k < 6, "[%s] k=%d", t.engine, k);
            cr_assert_eq(pending_of(&t, peter), k >= 4 && k < 7, "[%s] k=%d", t.engine, k);
            expect_check(&t, 2000 * k, 1000, false);
            /* a recovery that has not waited the timeout leaves it alone */
            int n = -1;
            cr_assert_eq(pt_account_recover(t.db, pt_now_ms() - 60000, NULL, &n, &err), 0);
            cr_assert_eq(n, 0);
            expect_state(&t, &id, left[k]);
            cr_assert_eq(pt_account_recover(t.db, FAR_FUTURE, NULL, &n, &err), 0, "[%s] k=%d %s",
                         t.engine, k, err.message);
            cr_assert_eq(n, 1);
            /* initial is canceled; pending and committed roll forward */
            expect_state(&t, &id, k == 1 ? "canceled" : "done");
            cr_assert_eq(balance(&t, joe), k == 1 ? 1000 : 900, "[%s] k=%d", t.engine, k);
            cr_assert_eq(balance(&t, peter), k == 1 ? 1000 : 1100);
            expect_check(&t, 2000 * k, 1000, true);
        }
    }
}

Test(pt_account, transfers_that_cannot_proceed_are_rolled_back)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        bson_oid_t id;
        setup_bank(&t, 1000, 1000);
        cr_assert_eq(pt_account_transfer(t.db, JOE, PETER, 5000, NULL, &id, &err), MD_NOTFOUND,
                     "[%s] insufficient funds", t.engine);
        expect_state(&t, &id, "canceled");
        cr_assert_eq(balance(&t, JOE), 1000);
        cr_assert_eq(pt_account_transfer(t.db, JOE, "nobody", 100, NULL, &id, &err),
                     MD_NOTFOUND);
        expect_state(&t, &id, "canceled");
        cr_assert_eq(balance(&t, JOE), 1000, "[%s] the debit was given back", t.engine);
        cr_assert_eq(pending_of(&t, JOE), 0);
        cr_assert_eq(pt_account_transfer(t.db, "nobody", JOE, 100, NULL, &id, &err),
                     MD_NOTFOUND);
        expect_state(&t, &id, "canceled");
        cr_assert_eq(balance(&t, JOE), 1000);
        expect_check(&t, 2000, 1000, true);
    }
}

Test(pt_account, cancel_rolls_back_what_is_not_committed)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        bson_oid_t a, b, c;
        setup_bank(&t, 1000, 1000);
        /* initial: just canceled (the book's "cancel") */
        cr_assert_eq(pt_account_txn_create(t.db, JOE, PETER, 100, &a, &err), 0);
        cr_assert_eq(pt_account_cancel(t.db, &a, NULL, &err), 0, "[%s] %s", t.engine,
                     err.message);
        expect_state(&t, &a, "canceled");
        /* pending with both sides applied: both reversed */
        pt_account_opts stop4 = {4};
        cr_assert_eq(pt_account_transfer(t.db, JOE, PETER, 100, &stop4, &b, &err),
                     PT_ACCOUNT_CRASHED);
        cr_assert_eq(balance(&t, PETER), 1100);
        /* a cancel stopped after "canceling" and its first reversal */
        pt_account_opts stop2 = {2};
        cr_assert_eq(pt_account_cancel(t.db, &b, &stop2, &err), PT_ACCOUNT_CRASHED);
        expect_state(&t, &b, "canceling");
        cr_assert_eq(balance(&t, JOE), 1000);
        cr_assert_eq(balance(&t, PETER), 1100);
        expect_check(&t, 2000, 1000, false);
        cr_assert_eq(pt_account_cancel(t.db, &b, NULL, &err), 0, "[%s] %s", t.engine,
                     err.message);
        expect_state(&t, &b, "canceled");
        cr_assert_eq(balance(&t, JOE), 1000);
        cr_assert_eq(balance(&t, PETER), 1000);
        cr_assert_eq(pending_of(&t, JOE) + pending_of(&t, PETER), 0);
        /* committed and done ones are not rolled back */
        pt_account_opts stop5 = {5};
        cr_assert_eq(pt_account_transfer(t.db, JOE, PETER, 100, &stop5, &c, &err),
                     PT_ACCOUNT_CRASHED);
        expect_state(&t, &c, "committed");
        cr_assert_eq(pt_account_cancel(t.db, &c, NULL, &err), MD_NOTFOUND);
        cr_assert_eq(pt_account_cancel(t.db, &a, NULL, &err), MD_NOTFOUND);
        cr_assert_eq(pt_account_recover(t.db, FAR_FUTURE, NULL, NULL, &err), 0);
        expect_state(&t, &c, "done");
        expect_check(&t, 2000, 1000, true);
    }
}

Test(pt_account, applications_claim_initial_transactions_once)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        bson_oid_t x, y, c1, c2, c3;
        setup_bank(&t, 1000, 1000);
        cr_assert_eq(pt_account_txn_create(t.db, JOE, PETER, 100, &x, &err), 0);
        cr_assert_eq(pt_account_txn_create(t.db, PETER, JOE, 30, &y, &err), 0);
        cr_assert_eq(pt_account_claim(t.db, "A1", &c1, &err), 0, "[%s] %s", t.engine,
                     err.message);
        cr_assert_eq(pt_account_claim(t.db, "A2", &c2, &err), 0);
        cr_assert_eq(pt_account_claim(t.db, "A1", &c3, &err), MD_NOTFOUND);
        cr_assert(!bson_oid_equal(&c1, &c2), "[%s] one transaction claimed twice", t.engine);
        bson_t *d = txn_doc(&t, &c1);
        cr_assert_str_eq(ptt_str(d, "state"), "pending");
        cr_assert_str_eq(ptt_str(d, "application"), "A1");
        bson_destroy(d);
        cr_assert_eq(ptt_count(&t, "transactions", "{\"application\": \"A2\", "
                                                   "\"state\": \"pending\"}"), 1);
        /* only the application that claimed it applies a pending one */
        cr_assert_eq(pt_account_apply(t.db, &c1, NULL, NULL, &err), MD_NOTFOUND);
        cr_assert_eq(pt_account_apply(t.db, &c1, "A2", NULL, &err), MD_NOTFOUND);
        cr_assert_eq(pt_account_apply(t.db, &c1, "A1", NULL, &err), 0, "[%s] %s", t.engine,
                     err.message);
        cr_assert_eq(pt_account_apply(t.db, &c2, "A2", NULL, &err), 0);
        expect_state(&t, &x, "done");
        expect_state(&t, &y, "done");
        cr_assert_eq(balance(&t, JOE), 930);
        cr_assert_eq(balance(&t, PETER), 1070);
        expect_check(&t, 2000, 1000, true);
    }
}

Test(pt_account, indexes_as_the_book_creates_them)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        setup_bank(&t, 1, 1);
        bson_t *r = PTT_OK(&t, "{\"listIndexes\": \"accounts\"}");
        cr_assert_str_eq(ptt_str(r, "cursor.firstBatch.1.name"), "name_1");
        bson_destroy(r);
        r = PTT_OK(&t, "{\"listIndexes\": \"transactions\"}");
        cr_assert_str_eq(ptt_str(r, "cursor.firstBatch.1.name"), "state_1");
        bson_destroy(r);
        bson_t stage;
        r = ptt_explain(&t, "{\"find\": \"accounts\", \"filter\": {\"name\": \"" JOE "\", "
                            "\"pendingTransactions\": {\"$ne\": 1}, \"balance\": {\"$gte\": 1}}}");
        cr_assert(ptt_plan_stage(r, "IXSCAN", &stage), "[%s] the debit does not use name_1",
                  t.engine);
        cr_assert_str_eq(ptt_str(&stage, "indexName"), "name_1");
        bson_destroy(&stage);
        bson_destroy(r);
        r = ptt_explain(&t, "{\"find\": \"transactions\", \"filter\": {\"state\": \"pending\"}}");
        cr_assert(ptt_plan_stage(r, "IXSCAN", &stage));
        cr_assert_str_eq(ptt_str(&stage, "indexName"), "state_1");
        bson_destroy(&stage);
        bson_destroy(r);
        /* the simulator's account index is unique */
        md_error err;
        cr_assert_eq(pt_account_create(t.db, JOE, 5, &err), MD_EDUPKEY, "[%s]", t.engine);
    }
}

Test(pt_account, check_notices_lost_and_double_applied_money)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        bson_oid_t id;
        char h[25];
        setup_bank(&t, 1000, 1000);
        cr_assert_eq(pt_account_transfer(t.db, JOE, PETER, 100, NULL, &id, &err), 0);
        expect_check(&t, 2000, 1000, true);
        /* the credit applied twice */
        bson_destroy(PTT_OK(&t, "{\"update\": \"accounts\", \"updates\": [{\"q\": {\"name\": \""
                                PETER "\"}, \"u\": {\"$inc\": {\"balance\": 100}}}]}"));
        cr_assert_eq(pt_account_check(t.db, -1, 1000, true, &err), MD_ERROR);
        cr_assert(strstr(err.message, PETER), "%s", err.message);
        cr_assert_eq(pt_account_check(t.db, 2000, -1, true, &err), MD_ERROR);
        cr_assert(strstr(err.message, "sum"), "%s", err.message);
        bson_destroy(PTT_OK(&t, "{\"update\": \"accounts\", \"updates\": [{\"q\": {\"name\": \""
                                PETER "\"}, \"u\": {\"$inc\": {\"balance\": -100}}}]}"));
        expect_check(&t, 2000, 1000, true);
        /* a done transaction left in a pendingTransactions list */
        bson_oid_to_string(&id, h);
        bson_destroy(PTT_OK(&t, "{\"update\": \"accounts\", \"updates\": [{\"q\": {\"name\": \""
                                JOE "\"}, \"u\": {\"$push\": {\"pendingTransactions\": "
                                "{\"$oid\": \"%s\"}}}}]}", h));
        cr_assert_eq(pt_account_check(t.db, 2000, 1000, false, &err), MD_ERROR);
        cr_assert(strstr(err.message, "still lists"), "%s", err.message);
    }
}

/* A recovery stopped at each of its writes, then run again. */
Test(pt_account, recovery_survives_its_own_stops)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        enum { N = 6 };
        char names[N][16];
        for (int i = 0; i < N; i++) {
            snprintf(names[i], sizeof names[i], "acct%d", i);
            cr_assert_eq(pt_account_create(t.db, names[i], 500, &err), 0);
        }
        /* one transaction stopped at every point, plus one canceling */
        for (int k = 1; k <= 7; k++) {
            pt_account_opts stop = {k};
            cr_assert_eq(pt_account_transfer(t.db, names[k % N], names[(k + 1) % N], 10 * k,
                                             &stop, NULL, &err), PT_ACCOUNT_CRASHED);
        }
        bson_oid_t c;
        pt_account_opts stop3 = {3};
        cr_assert_eq(pt_account_transfer(t.db, names[0], names[3], 7, &stop3, &c, &err),
                     PT_ACCOUNT_CRASHED);
        pt_account_opts stop1 = {1};
        cr_assert_eq(pt_account_cancel(t.db, &c, &stop1, &err), PT_ACCOUNT_CRASHED);
        expect_check(&t, 500 * N, 500, false);
        int stops = 0;
        for (int k = 1; k < 40; k++) {
            pt_account_opts stop = {k};
            int rc = pt_account_recover(t.db, FAR_FUTURE, &stop, NULL, &err);
            cr_assert(rc == 0 || rc == PT_ACCOUNT_CRASHED, "[%s] %s", t.engine, err.message);
            expect_check(&t, 500 * N, 500, false);
            stops += rc == PT_ACCOUNT_CRASHED;
            if (rc == 0)
                break;
        }
        cr_assert_gt(stops, 0);
        cr_assert_eq(pt_account_recover(t.db, FAR_FUTURE, NULL, NULL, &err), 0);
        expect_check(&t, 500 * N, 500, true);
        expect_state(&t, &c, "canceled");
    }
}

/* ---- many clients, stops, then concurrent recoveries ---------------------- */

#define ST_ACCOUNTS 8
#define ST_OPENING 1000
#define ST_LEASE_MS 300

typedef struct st_shared {
    md_db *db;
    atomic_int done, canceled, crashed;
    ptt_errors err;
    int transfers_per_client;
} st_shared;

typedef struct st_client {
    st_shared *sh;
    uint64_t rng;
    int index;
} st_client;

static uint64_t st_rand(st_client *c)
{
    return pt_rand_next(&c->rng);
}

static void st_fail(st_shared *sh, const char *what, int rc, const md_error *err)
{
    ptt_errors_add(&sh->err, what, rc, err);
}

static void st_count(st_shared *sh, const char *what, int rc, const md_error *err)
{
    if (rc == 0)
        atomic_fetch_add(&sh->done, 1);
    else if (rc == MD_NOTFOUND)
        atomic_fetch_add(&sh->canceled, 1);
    else if (rc == PT_ACCOUNT_CRASHED)
        atomic_fetch_add(&sh->crashed, 1);
    else
        st_fail(sh, what, rc, err);
}

/* Transfers between random accounts of random amounts (some cannot be
 * paid), a fifth stopped at a random point; every fourth goes through the
 * book's claim by application instead. */
static void *st_client_main(void *arg)
{
    st_client *c = arg;
    st_shared *sh = c->sh;
    md_error err;
    char app[16];
    snprintf(app, sizeof app, "A%d", c->index);
    for (int k = 0; k < sh->transfers_per_client; k++) {
        char a[16], b[16];
        int i = (int)(st_rand(c) % ST_ACCOUNTS), j = (int)(st_rand(c) % (ST_ACCOUNTS - 1));
        if (j >= i)
            j++;
        snprintf(a, sizeof a, "acct%d", i);
        snprintf(b, sizeof b, "acct%d", j);
        int64_t amount = 1 + (int64_t)(st_rand(c) % 400);
        pt_account_opts o = {st_rand(c) % 5 == 0 ? (int)(1 + st_rand(c) % 7) : 0};
        if (k % 4 == 3) {
            bson_oid_t id;
            int rc = pt_account_txn_create(sh->db, a, b, amount, NULL, &err);
            if (rc != 0) {
                st_fail(sh, "create", rc, &err);
                continue;
            }
            rc = pt_account_claim(sh->db, app, &id, &err);
            if (rc == MD_NOTFOUND) /* another application took it */
                continue;
            if (rc != 0) {
                st_fail(sh, "claim", rc, &err);
                continue;
            }
            st_count(sh, "apply", pt_account_apply(sh->db, &id, app, &o, &err), &err);
        } else {
            st_count(sh, "transfer", pt_account_transfer(sh->db, a, b, amount, &o, NULL, &err),
                     &err);
        }
    }
    return NULL;
}

/* Recovery passes with a lease of ST_LEASE_MS, some stopped. */
static void *st_recovery_main(void *arg)
{
    st_client *c = arg;
    st_shared *sh = c->sh;
    md_error err;
    for (int pass = 0; pass < 6; pass++) {
        pt_account_opts o = {st_rand(c) % 2 == 0 ? (int)(1 + st_rand(c) % 6) : 0};
        int rc = pt_account_recover(sh->db, pt_now_ms() - ST_LEASE_MS, &o, NULL, &err);
        if (rc != 0 && rc != PT_ACCOUNT_CRASHED)
            st_fail(sh, "recover", rc, &err);
    }
    return NULL;
}

static void st_threads(st_shared *sh, int n, void *(*fn)(void *), uint64_t seed)
{
    pthread_t th[16];
    st_client cl[16];
    for (int i = 0; i < n; i++) {
        cl[i] = (st_client){.sh = sh, .rng = seed * (uint64_t)(i + 1) + 77, .index = i};
        cr_assert_eq(pthread_create(&th[i], NULL, fn, &cl[i]), 0);
    }
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
}

Test(pt_account, threads_with_stops_then_recovery_conserve_money, .timeout = 120)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        cr_assert_eq(pt_account_create_indexes(t.db, &err), 0);
        for (int i = 0; i < ST_ACCOUNTS; i++) {
            char a[16];
            snprintf(a, sizeof a, "acct%d", i);
            cr_assert_eq(pt_account_create(t.db, a, ST_OPENING, &err), 0);
        }
        st_shared sh = {.db = t.db, .transfers_per_client = 60};
        atomic_init(&sh.done, 0);
        atomic_init(&sh.canceled, 0);
        atomic_init(&sh.crashed, 0);
        ptt_errors_init(&sh.err);
        st_threads(&sh, 8, st_client_main, 0x9e3779b97f4a7c15ull);
        cr_assert_eq(atomic_load(&sh.err.n), 0, "[%s] %s", t.engine, sh.err.first);
        cr_assert_gt(atomic_load(&sh.done), 0, "[%s]", t.engine);
        cr_assert_gt(atomic_load(&sh.canceled), 0, "[%s] no transfer was short of money",
                     t.engine);
        cr_assert_gt(atomic_load(&sh.crashed), 0, "[%s] no failure point hit", t.engine);
        expect_check(&t, ST_ACCOUNTS * ST_OPENING, ST_OPENING, false);
        /* everything left is older than the lease: recoveries race for it */
        struct timespec ts = {0, (ST_LEASE_MS + 50) * 1000000L};
        nanosleep(&ts, NULL);
        st_threads(&sh, 3, st_recovery_main, 0xabcdefull);
        cr_assert_eq(atomic_load(&sh.err.n), 0, "[%s] %s", t.engine, sh.err.first);
        expect_check(&t, ST_ACCOUNTS * ST_OPENING, ST_OPENING, false);
        cr_assert_eq(pt_account_recover(t.db, FAR_FUTURE, NULL, NULL, &err), 0, "[%s] %s",
                     t.engine, err.message);
        expect_check(&t, ST_ACCOUNTS * ST_OPENING, ST_OPENING, true);
        ptt_errors_destroy(&sh.err);
    }
}

/* ---- the scenario ------------------------------------------------------------ */

/* Does doc hold exactly the keys `keys`, in that order? */
static bool keys_are(const bson_t *doc, const char *const *keys, int n)
{
    bson_iter_t it;
    int i = 0;
    if (!bson_iter_init(&it, doc))
        return false;
    while (bson_iter_next(&it))
        if (i >= n || strcmp(bson_iter_key(&it), keys[i++]) != 0)
            return false;
    return i == n;
}

static bool holds_int32(const bson_t *doc, const char *path, int32_t v)
{
    bson_iter_t it;
    return ptt_find(doc, path, &it) && BSON_ITER_HOLDS_INT32(&it) && bson_iter_int32(&it) == v;
}

static int64_t doc_metric(ptt_db *t, const char *what)
{
    char path[64];
    snprintf(path, sizeof path, "metrics.document.%s", what);
    bson_t *r = PTT_OK(t, "{\"serverStatus\": 1}");
    int64_t n = ptt_i64(r, path);
    bson_destroy(r);
    return n;
}

static void *scenario_setup(ptt_db *t, const pt_scenario *sc)
{
    md_error err;
    void *state = NULL;
    pt_setup_args a = {.users = 400, .quick = true};
    cr_assert_eq(sc->setup(t->db, &a, &state, &err), 0, "[%s] %s", t->engine, err.message);
    return state;
}

/* Account.create's 1000 (quick) numbered accounts in "account", indexed
 * {name: 1} unique, as Account.createOptimalIndexes made it. */
Test(pt_account, scenario_setup_makes_the_simulators_accounts_and_index)
{
    static const char *const acct_keys[] = {"_id", "name", "balance", "pendingTransactions"};
    const pt_scenario *sc = pt_pattern_account.scenarios[0];
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        void *state = scenario_setup(&t, sc);
        cr_assert_eq(ptt_count(&t, "account", "{}"), 1000, "[%s]", t.engine);
        cr_assert_eq(ptt_count(&t, "accounts", "{}"), 0, "[%s] the library's collection",
                     t.engine);
        cr_assert_eq(ptt_count(&t, "account", "{\"name\": {\"$type\": \"int\"}, "
                                              "\"balance\": {\"$type\": \"int\"}}"), 1000,
                     "[%s] names and balances are int32, as the driver sent them", t.engine);
        bson_t *d = ptt_first_doc(&t, "account", "{\"name\": 999}");
        cr_assert(keys_are(d, acct_keys, 4), "[%s] account 999 is not {_id, name, balance, "
                                             "pendingTransactions}", t.engine);
        cr_assert(holds_int32(d, "balance", 100000));
        cr_assert(!ptt_has(d, "pendingTransactions.0"));
        bson_destroy(d);
        bson_t *r = PTT_OK(&t, "{\"listIndexes\": \"account\"}");
        cr_assert_str_eq(ptt_str(r, "cursor.firstBatch.0.name"), "_id_");
        cr_assert_str_eq(ptt_str(r, "cursor.firstBatch.1.name"), "name_1", "[%s]", t.engine);
        bson_iter_t it;
        cr_assert(ptt_find(r, "cursor.firstBatch.1.unique", &it) && bson_iter_as_bool(&it),
                  "[%s] name_1 is not unique", t.engine);
        cr_assert_not(ptt_has(r, "cursor.firstBatch.2"), "[%s] an index the simulator did "
                                                         "not make", t.engine);
        bson_destroy(r);
        pt_scenario_destroy(sc, state);
    }
}

/* One user: two reads, one insert and seven updates, leaving the documents
 * as the simulator's classes left them (no timestamps, no state index). */
Test(pt_account, scenario_transfer_writes_what_the_simulator_wrote)
{
    static const char *const txn_keys[] = {"_id", "source", "destination", "amount", "state"};
    const pt_scenario *sc = pt_pattern_account.scenarios[0];
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        void *state = scenario_setup(&t, sc);
        char first[256], f[64];
        int64_t returned = doc_metric(&t, "returned"), inserted = doc_metric(&t, "inserted"),
                updated = doc_metric(&t, "updated");
        cr_assert_eq(ptt_run_op(t.db, state, &sc->ops[0], 1, 1, first), 0, "[%s] %s",
                     t.engine, first);
        cr_assert_eq(doc_metric(&t, "returned") - returned, 2,
                     "[%s] the user reads the two accounts and nothing else", t.engine);
        cr_assert_eq(doc_metric(&t, "inserted") - inserted, 1, "[%s]", t.engine);
        cr_assert_eq(doc_metric(&t, "updated") - updated, 7, "[%s]", t.engine);
        cr_assert_eq(ptt_count(&t, "transactions", "{}"), 1);
        bson_t *x = ptt_first_doc(&t, "transactions", "{}");
        cr_assert(keys_are(x, txn_keys, 5), "[%s] the transaction is not {_id, source, "
                                            "destination, amount, state}", t.engine);
        cr_assert_str_eq(ptt_str(x, "state"), "done");
        cr_assert(holds_int32(x, "amount", 100), "[%s] amount", t.engine);
        bson_iter_t it;
        cr_assert(ptt_find(x, "source", &it) && BSON_ITER_HOLDS_INT32(&it));
        int32_t src = bson_iter_int32(&it);
        cr_assert(ptt_find(x, "destination", &it) && BSON_ITER_HOLDS_INT32(&it));
        int32_t dst = bson_iter_int32(&it);
        cr_assert(src != dst && src >= 0 && src < 1000 && dst >= 0 && dst < 1000);
        bson_destroy(x);
        snprintf(f, sizeof f, "{\"name\": %d}", src);
        bson_t *a = ptt_first_doc(&t, "account", f);
        snprintf(f, sizeof f, "{\"name\": %d}", dst);
        bson_t *b = ptt_first_doc(&t, "account", f);
        cr_assert(holds_int32(a, "balance", 99900), "[%s] the source is debited", t.engine);
        cr_assert(holds_int32(b, "balance", 100100), "[%s] the destination is credited",
                  t.engine);
        cr_assert(!ptt_has(a, "pendingTransactions.0") && !ptt_has(b, "pendingTransactions.0"),
                  "[%s] the transaction is left in an account", t.engine);
        bson_destroy(a);
        bson_destroy(b);
        bson_t *r = PTT_OK(&t, "{\"listIndexes\": \"transactions\"}");
        cr_assert_str_eq(ptt_str(r, "cursor.firstBatch.0.name"), "_id_");
        cr_assert_not(ptt_has(r, "cursor.firstBatch.1"), "[%s] transactions got an index "
                                                         "the simulator did not make",
                      t.engine);
        bson_destroy(r);
        md_error err;
        cr_assert_eq(sc->check(t.db, state, &err), 0, "[%s] %s", t.engine, err.message);
        pt_scenario_destroy(sc, state);
    }
}

Test(pt_account, scenario_transfer_runs_and_checks, .timeout = 60)
{
    const pt_scenario *sc = pt_pattern_account.scenarios[0];
    cr_assert_eq(pt_pattern_account.nscenarios, 1);
    cr_assert_str_eq(pt_pattern_account.section, "5.8");
    cr_assert_str_eq(pt_pattern_account.book_winner, "tie");
    cr_assert_eq(sc->ops[0].users, 1000);
    cr_assert_float_eq(sc->ops[0].book_mmap.mean, 9951.659, 1e-9);
    cr_assert_float_eq(sc->ops[0].book_wt.mean, 8655.022, 1e-9);
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        char first[256];
        void *state = scenario_setup(&t, sc);
        int bad = ptt_run_op(t.db, state, &sc->ops[0], 6, 400, first);
        cr_assert_eq(bad, 0, "[%s] %s", t.engine, first);
        cr_assert_eq(sc->check(t.db, state, &err), 0, "[%s] %s", t.engine, err.message);
        cr_assert_eq(ptt_count(&t, "transactions", "{\"state\": \"done\"}"), 400);
        /* the check notices a transaction left pending, half applied */
        bson_destroy(PTT_OK(&t, "{\"update\": \"account\", \"updates\": [{\"q\": {\"name\": 1}, "
                                "\"u\": {\"$inc\": {\"balance\": -100}, \"$push\": "
                                "{\"pendingTransactions\": {\"$oid\": "
                                "\"000000000000000000000001\"}}}}]}"));
        bson_destroy(PTT_OK(&t, "{\"insert\": \"transactions\", \"documents\": [{\"_id\": "
                                "{\"$oid\": \"000000000000000000000001\"}, \"source\": 1, "
                                "\"destination\": 2, \"amount\": 100, \"state\": "
                                "\"pending\"}]}"));
        cr_assert_neq(sc->check(t.db, state, &err), 0, "[%s] check missed it", t.engine);
        cr_assert(strstr(err.message, "pending"), "[%s] %s", t.engine, err.message);
        bson_destroy(PTT_OK(&t, "{\"update\": \"account\", \"updates\": [{\"q\": {\"name\": 1}, "
                                "\"u\": {\"$inc\": {\"balance\": 100}, \"$pull\": "
                                "{\"pendingTransactions\": {\"$oid\": "
                                "\"000000000000000000000001\"}}}}]}"));
        bson_destroy(PTT_OK(&t, "{\"delete\": \"transactions\", \"deletes\": [{\"q\": {\"state\": "
                                "\"pending\"}, \"limit\": 1}]}"));
        cr_assert_eq(sc->check(t.db, state, &err), 0, "[%s] %s", t.engine, err.message);
        /* ... and money created out of nothing */
        bson_destroy(PTT_OK(&t, "{\"update\": \"account\", \"updates\": [{\"q\": {}, "
                                "\"u\": {\"$inc\": {\"balance\": 1}}}]}"));
        cr_assert_neq(sc->check(t.db, state, &err), 0, "[%s] check missed it", t.engine);
        pt_scenario_destroy(sc, state);
    }
}

/* ---- the claim under threads ------------------------------------------------- */

typedef struct cl_shared {
    md_db *db;
    atomic_int claimed, errors;
    bson_oid_t ids[4][400];
    int n[4];
} cl_shared;

typedef struct cl_arg {
    cl_shared *sh;
    int index;
} cl_arg;

static void *cl_main(void *arg)
{
    cl_arg *a = arg;
    char app[8];
    md_error err;
    snprintf(app, sizeof app, "A%d", a->index);
    for (;;) {
        bson_oid_t id;
        int rc = pt_account_claim(a->sh->db, app, &id, &err);
        if (rc == MD_NOTFOUND)
            break;
        if (rc != 0 || a->sh->n[a->index] == 400) {
            atomic_fetch_add(&a->sh->errors, 1);
            break;
        }
        a->sh->ids[a->index][a->sh->n[a->index]++] = id;
        atomic_fetch_add(&a->sh->claimed, 1);
    }
    return NULL;
}

Test(pt_account, concurrent_claims_take_each_transaction_once)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        enum { NTXN = 300 };
        setup_bank(&t, 1000, 1000);
        for (int i = 0; i < NTXN; i++)
            cr_assert_eq(pt_account_txn_create(t.db, JOE, PETER, 1, NULL, &err), 0);
        static cl_shared sh;
        memset(&sh, 0, sizeof sh);
        sh.db = t.db;
        pthread_t th[4];
        cl_arg args[4];
        for (int i = 0; i < 4; i++) {
            args[i] = (cl_arg){&sh, i};
            cr_assert_eq(pthread_create(&th[i], NULL, cl_main, &args[i]), 0);
        }
        for (int i = 0; i < 4; i++)
            pthread_join(th[i], NULL);
        cr_assert_eq(atomic_load(&sh.errors), 0);
        cr_assert_eq(atomic_load(&sh.claimed), NTXN, "[%s] %d claims for %d transactions",
                     t.engine, atomic_load(&sh.claimed), NTXN);
        cr_assert_eq(ptt_count(&t, "transactions", "{\"state\": \"pending\"}"), NTXN);
        for (int i = 0; i < 4; i++) {
            char f[96];
            snprintf(f, sizeof f, "{\"application\": \"A%d\"}", i);
            cr_assert_eq(ptt_count(&t, "transactions", f), sh.n[i],
                         "[%s] A%d claimed %d but %lld are tagged with it", t.engine, i, sh.n[i],
                         (long long)ptt_count(&t, "transactions", f));
        }
    }
}
