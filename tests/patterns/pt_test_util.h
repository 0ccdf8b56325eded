/*
 * pt_test_util.h -- helpers shared by the pattern tests (tests/patterns/):
 * a database on a named engine in a fresh temporary directory, commands as
 * printf-style JSON, field lookups by dotted path, the winning plan of an
 * explain, and a small harness that runs one scenario op from several
 * threads at once the way build/patterns does (shared md_db and state,
 * one pt_user per run, unique user ids).
 *
 * Everything here is static inline: each test file gets its own copy.
 */
#ifndef PT_TEST_UTIL_H
#define PT_TEST_UTIL_H

#include <criterion/criterion.h>
#include <ftw.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "eng.h"
#include "minidoc.h"
#include "patterns.h"
#include "pt_errors.h"

/* Sleep ms milliseconds. */
static inline void ptt_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

typedef struct ptt_db {
    md_db *db;
    char dir[256];
    const char *engine;
} ptt_db;

/* Open `engine` in a new temporary directory (small first files for mmapv1,
 * journal on as MongoDB 3.0 ran by default). */
static inline void ptt_open(ptt_db *t, const char *engine)
{
    md_error err;
    snprintf(t->dir, sizeof t->dir, "/tmp/md_pttest_XXXXXX");
    cr_assert_not_null(mkdtemp(t->dir));
    t->engine = engine;
    bson_t *o = BCON_NEW("engine", BCON_UTF8(engine), "mmapv1", "{", "firstFileSize",
                         BCON_INT32(1 << 20), "nsSize", BCON_INT32(65536), "}");
    int rc = md_db_open(t->dir, o, &t->db, &err);
    bson_destroy(o);
    cr_assert_eq(rc, 0, "md_db_open(%s) on %s: %s", t->dir, engine, err.message);
}

static int ptt_rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static inline void ptt_close(ptt_db *t)
{
    md_db_close(t->db);
    t->db = NULL;
    nftw(t->dir, ptt_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Run the body once per registered engine (mmapv1, btree, ephemeralForTest),
 * with `t` open on it. */
#define PTT_FOR_EACH_ENGINE(t)                                                    \
    for (const eng_ops *const *e_ = eng_engines(); *e_; e_++)                     \
        for (int once_ = (ptt_open(&(t), (*e_)->name), 1); once_;                  \
             once_ = 0, ptt_close(&(t)))

/* Run a command given as printf-style JSON; returns the reply, which the
 * caller frees with bson_destroy (*rc_out: the command's return code). */
static inline bson_t *ptt_cmd(ptt_db *t, int *rc_out, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline bson_t *ptt_cmd(ptt_db *t, int *rc_out, const char *fmt, ...)
{
    char buf[16 * 1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    bson_t r;
    md_error err;
    int rc = md_db_command_json(t->db, buf, &r, &err);
    bson_t *reply = bson_copy(&r);
    bson_destroy(&r);
    if (rc_out)
        *rc_out = rc;
    return reply;
}

/* Run a command that must succeed; returns its reply (caller destroys). */
#define PTT_OK(t, ...)                                                            \
    ({                                                                            \
        int rc_;                                                                  \
        bson_t *r_ = ptt_cmd((t), &rc_, __VA_ARGS__);                             \
        if (rc_ != 0) {                                                           \
            char *j_ = bson_as_relaxed_extended_json(r_, NULL);                   \
            cr_assert_fail("[%s] command failed: %s", (t)->engine, j_);           \
        }                                                                         \
        r_;                                                                       \
    })

static inline bool ptt_find(const bson_t *b, const char *path, bson_iter_t *it)
{
    return bson_iter_init(it, b) && bson_iter_find_descendant(it, path, it);
}

static inline bool ptt_has(const bson_t *b, const char *path)
{
    bson_iter_t it;
    return ptt_find(b, path, &it);
}

/* A string field by dotted path, "" when absent or not a string. */
static inline const char *ptt_str(const bson_t *b, const char *path)
{
    bson_iter_t it;
    if (!ptt_find(b, path, &it) || !BSON_ITER_HOLDS_UTF8(&it))
        return "";
    return bson_iter_utf8(&it, NULL);
}

static inline int64_t ptt_i64(const bson_t *b, const char *path)
{
    bson_iter_t it;
    cr_assert(ptt_find(b, path, &it) && BSON_ITER_HOLDS_NUMBER(&it), "no number %s", path);
    return bson_iter_as_int64(&it);
}

/* Count the documents of `coll` matching the JSON `filter`. */
static inline int64_t ptt_count(ptt_db *t, const char *coll, const char *filter)
{
    bson_t *r = PTT_OK(t, "{\"count\": \"%s\", \"query\": %s}", coll, filter);
    int64_t n = ptt_i64(r, "n");
    bson_destroy(r);
    return n;
}

/* The first document of `coll` matching the JSON `filter`, which must
 * exist; the caller destroys it. */
static inline bson_t *ptt_first_doc(ptt_db *t, const char *coll, const char *filter)
{
    bson_t *r = PTT_OK(t, "{\"find\": \"%s\", \"filter\": %s}", coll, filter);
    bson_iter_t it;
    const uint8_t *data;
    uint32_t len;
    cr_assert(ptt_find(r, "cursor.firstBatch.0", &it) && BSON_ITER_HOLDS_DOCUMENT(&it),
              "[%s] nothing in %s matches %s", t->engine, coll, filter);
    bson_iter_document(&it, &len, &data);
    bson_t *doc = bson_new_from_data(data, len);
    bson_destroy(r);
    return doc;
}

/* The explain (queryPlanner) of the command `inner`, e.g. a find with a sort;
 * the caller destroys it. */
static inline bson_t *ptt_explain(ptt_db *t, const char *inner)
{
    return PTT_OK(t, "{\"explain\": %s, \"verbosity\": \"queryPlanner\"}", inner);
}

/* The stage named `stage` in the winning plan's chain (winningPlan,
 * winningPlan.inputStage, ...), copied into *out; false when absent. */
static inline bool ptt_plan_stage(const bson_t *explain, const char *stage, bson_t *out)
{
    char path[256] = "queryPlanner.winningPlan";
    for (int depth = 0; depth < 8; depth++) {
        bson_iter_t it;
        if (!ptt_find(explain, path, &it) || !BSON_ITER_HOLDS_DOCUMENT(&it))
            return false;
        const uint8_t *data;
        uint32_t len;
        bson_t d;
        bson_iter_document(&it, &len, &data);
        bson_init_static(&d, data, len);
        if (strcmp(ptt_str(&d, "stage"), stage) == 0) {
            bson_copy_to(&d, out);
            return true;
        }
        strncat(path, ".inputStage", sizeof path - strlen(path) - 1);
    }
    return false;
}

/* ---- running scenario ops from several threads ------------------------ */

#define PTT_MAX_OPS 2

typedef struct ptt_run {
    md_db *db;
    void *state;
    int nops;
    const pt_op *ops[PTT_MAX_OPS];
    int64_t users[PTT_MAX_OPS];             /* users to run, per op */
    atomic_int_fast64_t next_id[PTT_MAX_OPS]; /* user ids handed out, per op */
    ptt_errors err;
    pt_pool *pool;                           /* the users' helpers, one per client */
} ptt_run;

typedef struct ptt_client {
    ptt_run *run;
    int client;
} ptt_client;

/* The op whose share of users started is smallest (so ops interleave in
 * their proportions), with its next user id; -1 when every op is done. */
static inline int ptt_next_user(ptt_run *r, int64_t *id)
{
    for (;;) {
        int best = -1;
        double best_frac = 2.0;
        for (int k = 0; k < r->nops; k++) {
            int64_t started = atomic_load(&r->next_id[k]);
            if (started >= r->users[k])
                continue;
            double frac = (double)started / (double)r->users[k];
            if (frac < best_frac)
                best = k, best_frac = frac;
        }
        if (best < 0)
            return -1;
        *id = atomic_fetch_add(&r->next_id[best], 1);
        if (*id < r->users[best])
            return best;
    }
}

static inline void *ptt_client_main(void *arg)
{
    ptt_client *c = arg;
    ptt_run *r = c->run;
    int64_t id;
    int k;
    while ((k = ptt_next_user(r, &id)) >= 0) {
        pt_user u = {.db = r->db, .state = r->state, .id = (uint64_t)id,
                     .rng = 0x9e3779b97f4a7c15ull ^ ((uint64_t)(id + 1) * 0xbf58476d1ce4e5b9ull) ^
                            ((uint64_t)k << 62),
                     .client = c->client, .pool = r->pool};
        if (u.rng == 0)
            u.rng = 1;
        md_error err;
        md_error_clear(&err);
        int rc = r->ops[k]->run(&u, &err);
        if (rc != 0)
            ptt_errors_add(&r->err, r->ops[k]->name, rc, &err);
    }
    return NULL;
}

/* Run users[k] users of ops[k] (k < nops) interleaved, from `nthreads`
 * client threads sharing `db` and `state` and a pool of `nthreads`
 * helpers for their sub-operations, as the runner's; returns the number of users
 * whose run failed (the first failure's message in first_error, a buffer
 * of 256 bytes, if not NULL). */
static inline int ptt_run_ops(md_db *db, void *state, int nops, const pt_op *const *ops,
                              const int64_t *users, int nthreads, char *first_error)
{
    ptt_run r = {.db = db, .state = state, .nops = nops};
    cr_assert(nops >= 1 && nops <= PTT_MAX_OPS);
    for (int k = 0; k < nops; k++) {
        r.ops[k] = ops[k];
        r.users[k] = users[k];
        atomic_init(&r.next_id[k], 0);
    }
    ptt_errors_init(&r.err);
    pthread_t th[64];
    ptt_client cl[64];
    if (nthreads > 64)
        nthreads = 64;
    md_error perr;
    cr_assert_eq(pt_pool_new(nthreads, &r.pool, &perr), 0, "%s", perr.message);
    for (int i = 0; i < nthreads; i++) {
        cl[i] = (ptt_client){.run = &r, .client = i};
        cr_assert_eq(pthread_create(&th[i], NULL, ptt_client_main, &cl[i]), 0);
    }
    for (int i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
    pt_pool_destroy(r.pool);
    ptt_errors_destroy(&r.err);
    if (first_error)
        snprintf(first_error, 256, "%s", r.err.first);
    return atomic_load(&r.err.n);
}

/* One op, `users` users. */
static inline int ptt_run_op(md_db *db, void *state, const pt_op *op, int nthreads,
                             int64_t users, char *first_error)
{
    const pt_op *ops[1] = {op};
    return ptt_run_ops(db, state, 1, ops, &users, nthreads, first_error);
}

#endif /* PT_TEST_UTIL_H */
