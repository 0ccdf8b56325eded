/*
 * pt_sim.c -- mongodb-schema-simulator's execution model in one process:
 * one scenario, one engine, a fresh database in a new temporary directory.
 *
 *   open (journal on) -> setup -> sample counters -> timed users ->
 *   sample counters -> check -> destroy -> close -> remove the directory
 *   [-> opts.service: the service time, on a second fresh database, of one
 *    iteration's users run back to back by this thread (service_times)]
 *
 * The timed part (model in pt_sim.h): every op's users of every iteration
 * get a start time (slicetime: evenly spread across the iteration), the
 * schedules of all ops are merged in start order, and C client threads
 * (processes x poolSize) take users from the front of that list, so a user
 * waits for a free client as a request waited for a free pooled connection.
 * Sub-operations a user issues at once (pt_user_parallel) go to a pool of
 * helper threads, as many as clients, started with them.
 * Each client records into its own histograms; they are merged after the
 * threads are joined, so measuring takes no lock the engines could feel.
 */
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "pt_sim.h"

typedef struct sim_user {
    int64_t t_ns; /* scheduled start, from t0 */
    int64_t id;   /* per op, in start order */
    int op;
} sim_user;

typedef struct sim_client {
    struct sim *sim;
    int index;
    pthread_t thread;
    int64_t last_end_ns;
    pt_op_result res[PT_MAX_OPS]; /* hist, users, errors, first error */
} sim_client;

/* A listener of a custom-execution op (pt_op.listen). */
typedef struct sim_listener {
    struct sim *sim;
    int op;
    pthread_t thread;
    pt_listener l;
    pt_op_result res; /* hist: the gaps; users: their count; errors */
} sim_listener;

typedef struct sim {
    const pt_scenario *sc;
    md_db *db;
    void *state;
    uint64_t seed;
    sim_user *users;
    int64_t nusers;
    int64_t t0_ns; /* CLOCK_MONOTONIC */
    int64_t stop_ns; /* no user starts after this (INT64_MAX: none) */
    int64_t delay_ns, listen_ns; /* listeners: start after delay_ns, for listen_ns */
    atomic_llong next;
    atomic_llong done;
    pt_pool *pool; /* the users' helpers (pt_user_parallel) */
} sim;

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_until_ns(int64_t t)
{
    struct timespec ts = {.tv_sec = t / 1000000000, .tv_nsec = t % 1000000000};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

void pt_run_opts_book(pt_run_opts *o, const char *engine)
{
    memset(o, 0, sizeof *o);
    o->engine = engine;
    o->processes = PT_BOOK_PROCESSES;
    o->pool_size = PT_BOOK_POOL_SIZE;
    o->resolution_ms = PT_BOOK_RESOLUTION_MS;
    o->iterations = PT_BOOK_ITERATIONS;
    o->rate_scale = 1.0;
    o->journal = true;
    o->seed = 12;
}

int64_t pt_op_users_per_iteration(const pt_op *op, const pt_run_opts *o)
{
    /* The book's users per 1000 ms iteration, scaled by the rate and by a
     * shorter or longer resolution (the rate per second stays the book's
     * times rate_scale). */
    double u = (double)op->users * o->rate_scale * (double)o->resolution_ms / 1000.0;
    int64_t n = llround(u);
    return n < 1 ? 1 : n;
}

int64_t pt_op_listeners(const pt_op *op, const pt_run_opts *o)
{
    int64_t n = llround((double)op->users * o->rate_scale);
    return n < 1 ? 1 : n;
}

/* A user's context: its own random stream, from the seed, its op and id. */
static pt_user make_user(md_db *db, void *state, uint64_t seed, const sim_user *su, int client,
                         pt_pool *pool)
{
    return (pt_user){
        .db = db,
        .state = state,
        .id = (uint64_t)su->id,
        .rng = splitmix64(seed ^ ((uint64_t)su->op << 40) ^ (uint64_t)su->id) | 1,
        .client = client,
        .pool = pool,
    };
}

/* ---- a user's sub-operations at once (pt_user_parallel) -------------------------- */

/*
 * A call queues one job of n sub-operations on its pool, wakes up to n - 1
 * helpers, and takes sub-operations of its own job until none is left to
 * take; then it waits for those the helpers took.  A helper takes the next
 * sub-operation of the oldest job in the queue.
 *
 *   job:  queued --(its n sub-ops taken)--> off the queue --(n done)--> caller returns
 *
 * pool->lock guards the queue, every queued job's `taken` and `done`, and
 * `stop`; a sub-operation runs without it.  The job lives on the caller's
 * stack: a helper's last touch of it is the signal of `finished`, made
 * under the lock the caller must take to see done == n.
 */
typedef struct pt_job {
    struct pt_job *next;
    pt_user parent;           /* the caller's user */
    uint64_t base;            /* sub-op i's random stream: from base + i */
    pt_sub_fn fn;
    void *arg;
    int n, taken, done;
    pthread_cond_t finished;  /* signalled when done reaches n */
    int rc[PT_PARALLEL_MAX];
    md_error err[PT_PARALLEL_MAX];
} pt_job;

struct pt_pool {
    pthread_mutex_t lock;
    pthread_cond_t work;      /* a job was queued, or stop was set */
    pt_job *head, *tail;      /* jobs with sub-ops not yet taken, oldest first */
    bool stop;
    int nthreads;
    pthread_t threads[];
};

/* The next sub-op of j (-1: all taken); the last one takes j off the
 * queue.  Under p->lock when j is queued. */
static int job_take(pt_pool *p, pt_job *j)
{
    if (j->taken == j->n)
        return -1;
    int i = j->taken++;
    if (p && j->taken == j->n) {
        pt_job **pp = &p->head, *prev = NULL;
        while (*pp != j)
            prev = *pp, pp = &(*pp)->next;
        *pp = j->next;
        if (p->tail == j)
            p->tail = prev;
        j->next = NULL;
    }
    return i;
}

static void job_run(pt_job *j, int i)
{
    pt_user sub = j->parent;
    sub.rng = splitmix64(j->base + (uint64_t)i) | 1;
    md_error_clear(&j->err[i]);
    j->rc[i] = j->fn(&sub, i, j->arg, &j->err[i]);
}

static void *helper_main(void *arg)
{
    pt_pool *p = arg;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->head && !p->stop)
            pthread_cond_wait(&p->work, &p->lock);
        if (!p->head)
            break;
        pt_job *j = p->head;
        int i = job_take(p, j);
        pthread_mutex_unlock(&p->lock);
        job_run(j, i);
        pthread_mutex_lock(&p->lock);
        if (++j->done == j->n)
            pthread_cond_signal(&j->finished);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

int pt_user_parallel(pt_user *u, int n, pt_sub_fn fn, void *arg, md_error *err)
{
    if (n < 0 || n > PT_PARALLEL_MAX)
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                            "%d sub-operations (at most %d)", n, PT_PARALLEL_MAX);
    uint64_t base = pt_rand(u);
    pt_job j = {.parent = *u, .base = base, .fn = fn, .arg = arg, .n = n};
    pt_pool *p = n > 1 && u->pool && u->pool->nthreads > 0 ? u->pool : NULL;
    if (p) {
        pthread_cond_init(&j.finished, NULL);
        pthread_mutex_lock(&p->lock);
        if (p->tail)
            p->tail->next = &j;
        else
            p->head = &j;
        p->tail = &j;
        for (int k = 1; k < n && k <= p->nthreads; k++)
            pthread_cond_signal(&p->work);
        pthread_mutex_unlock(&p->lock);
    }
    for (;;) {
        if (p)
            pthread_mutex_lock(&p->lock);
        int i = job_take(p, &j);
        if (p)
            pthread_mutex_unlock(&p->lock);
        if (i < 0)
            break;
        job_run(&j, i);
        if (p)
            pthread_mutex_lock(&p->lock);
        j.done++;
        if (p)
            pthread_mutex_unlock(&p->lock);
    }
    if (p) {
        pthread_mutex_lock(&p->lock);
        while (j.done < n)
            pthread_cond_wait(&j.finished, &p->lock);
        pthread_mutex_unlock(&p->lock);
        pthread_cond_destroy(&j.finished);
    }
    for (int i = 0; i < n; i++) {
        if (j.rc[i] != 0) {
            if (err)
                *err = j.err[i];
            return j.rc[i];
        }
    }
    return 0;
}

int pt_pool_new(int nthreads, pt_pool **out, md_error *err)
{
    *out = NULL;
    if (nthreads < 0)
        nthreads = 0;
    pt_pool *p = calloc(1, sizeof *p + (size_t)nthreads * sizeof p->threads[0]);
    if (!p)
        return md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->work, NULL);
    for (; p->nthreads < nthreads; p->nthreads++) {
        if (pthread_create(&p->threads[p->nthreads], NULL, helper_main, p) != 0) {
            pt_pool_destroy(p);
            return md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR,
                                "could not start helper thread %d of %d", p->nthreads,
                                nthreads);
        }
    }
    *out = p;
    return 0;
}

void pt_pool_destroy(pt_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < p->nthreads; i++)
        pthread_join(p->threads[i], NULL);
    pthread_cond_destroy(&p->work);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

static void *client_main(void *arg)
{
    sim_client *c = arg;
    sim *s = c->sim;
    for (;;) {
        int64_t i = atomic_fetch_add(&s->next, 1);
        if (i >= s->nusers)
            break;
        const sim_user *su = &s->users[i];
        int64_t start = s->t0_ns + su->t_ns, picked = mono_ns();
        if (start > s->stop_ns || picked > s->stop_ns) {
            c->res[su->op].skipped++;
            atomic_fetch_add(&s->done, 1);
            continue;
        }
        /* The simulator took a user's start time when its timer fired, so a
         * free client's wake-up lateness is not the user's; time spent
         * waiting for a free client (picked up after start) is. */
        int64_t begin = start;
        if (picked < start) {
            sleep_until_ns(start);
            begin = mono_ns();
        }
        pt_user u = make_user(s->db, s->state, s->seed, su, c->index, s->pool);
        md_error err;
        md_error_clear(&err);
        int rc = s->sc->ops[su->op].run(&u, &err);
        int64_t end = mono_ns();
        pt_op_result *r = &c->res[su->op];
        r->users++;
        if (rc != 0) {
            if (r->errors++ == 0) {
                r->first_rc = rc;
                snprintf(r->first_error, sizeof r->first_error, "%s: %.200s", md_strerror(rc),
                         err.message);
            }
        } else {
            pt_hist_record(&r->hist, end - begin);
        }
        if (end > c->last_end_ns)
            c->last_end_ns = end;
        atomic_fetch_add(&s->done, 1);
    }
    return NULL;
}

/* ---- listeners (pt_op.listen) --------------------------------------------------- */

void pt_listener_got(pt_listener *l)
{
    int64_t now = mono_ns();
    if (l->last_ns) {
        pt_hist_record(l->rec, now - l->last_ns);
        l->gaps++;
    }
    l->last_ns = now;
}

int64_t pt_listener_left_ms(const pt_listener *l)
{
    int64_t left = l->until_ns - mono_ns();
    return left > 0 ? (left + 999999) / 1000000 : 0;
}

/* The simulator opened its listeners `initialDelay` (one iteration) into
 * the run and closed them `iterations` iterations later. */
static void *listener_main(void *arg)
{
    sim_listener *sl = arg;
    sim *s = sl->sim;
    sleep_until_ns(s->t0_ns + s->delay_ns);
    md_error err;
    md_error_clear(&err);
    int rc = s->sc->ops[sl->op].listen(&sl->l, &err);
    sl->res.users = sl->l.gaps;
    if (rc != 0) {
        sl->res.errors = 1;
        sl->res.first_rc = rc;
        snprintf(sl->res.first_error, sizeof sl->res.first_error, "%s: %.200s",
                 md_strerror(rc), err.message);
    }
    return NULL;
}

static void merge_result(pt_op_result *dst, const pt_op_result *src)
{
    pt_hist_merge(&dst->hist, &src->hist);
    dst->users += src->users;
    dst->skipped += src->skipped;
    if (src->errors && dst->errors == 0) {
        dst->first_rc = src->first_rc;
        memcpy(dst->first_error, src->first_error, sizeof dst->first_error);
    }
    dst->errors += src->errors;
}

/* Start every custom-execution op's listeners; *n_out of them started. */
static sim_listener *start_listeners(sim *s, const pt_run_opts *o, int *n_out)
{
    int64_t total = 0;
    *n_out = 0;
    for (int j = 0; j < s->sc->nops; j++)
        if (s->sc->ops[j].listen)
            total += pt_op_listeners(&s->sc->ops[j], o);
    if (!total)
        return NULL;
    sim_listener *ls = calloc((size_t)total, sizeof *ls);
    if (!ls)
        return NULL;
    int64_t until = s->t0_ns + s->delay_ns + s->listen_ns;
    if (until > s->stop_ns)
        until = s->stop_ns;
    int k = 0;
    for (int j = 0; j < s->sc->nops; j++) {
        if (!s->sc->ops[j].listen)
            continue;
        for (int64_t i = 0; i < pt_op_listeners(&s->sc->ops[j], o); i++, k++) {
            sim_listener *sl = &ls[k];
            sl->sim = s;
            sl->op = j;
            pt_hist_init(&sl->res.hist);
            sl->l = (pt_listener){.db = s->db, .state = s->state, .id = (int)i,
                                  .until_ns = until, .rec = &sl->res.hist};
            if (pthread_create(&sl->thread, NULL, listener_main, sl) != 0)
                goto out;
            (*n_out)++;
        }
    }
out:
    return ls;
}

static int cmp_user(const void *a, const void *b)
{
    const sim_user *x = a, *y = b;
    if (x->t_ns != y->t_ns)
        return x->t_ns < y->t_ns ? -1 : 1;
    return x->op - y->op;
}

/* slicetime: user n of an op starts at n * resolution / users_per_iteration. */
static sim_user *build_schedule(const pt_scenario *sc, const pt_run_opts *o, int64_t *n_out)
{
    int64_t total = 0;
    for (int j = 0; j < sc->nops; j++)
        if (!sc->ops[j].listen)
            total += pt_op_users_per_iteration(&sc->ops[j], o) * o->iterations;
    sim_user *u = calloc((size_t)(total ? total : 1), sizeof *u);
    if (!u)
        return NULL;
    int64_t k = 0;
    for (int j = 0; j < sc->nops; j++) {
        if (sc->ops[j].listen)
            continue; /* its listeners are not users */
        int64_t per = pt_op_users_per_iteration(&sc->ops[j], o);
        double gap = (double)o->resolution_ms * 1e6 / (double)per;
        for (int64_t n = 0; n < per * o->iterations; n++) {
            u[k].t_ns = (int64_t)(gap * (double)n);
            u[k].id = n;
            u[k].op = j;
            k++;
        }
    }
    qsort(u, (size_t)total, sizeof *u, cmp_user);
    *n_out = total;
    return u;
}

/* ---- counters --------------------------------------------------------------- */

static int64_t sum_subdoc(const bson_t *doc, const char *path)
{
    bson_iter_t it, child;
    int64_t sum = 0;
    if (!bson_iter_init(&it, doc) || !bson_iter_find_descendant(&it, path, &child) ||
        !BSON_ITER_HOLDS_DOCUMENT(&child) || !bson_iter_recurse(&child, &it))
        return 0;
    while (bson_iter_next(&it))
        if (BSON_ITER_HOLDS_NUMBER(&it))
            sum += bson_iter_as_int64(&it);
    return sum;
}

static int64_t get_num(const bson_t *doc, const char *path)
{
    bson_iter_t it, child;
    if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, path, &child) &&
        BSON_ITER_HOLDS_NUMBER(&child))
        return bson_iter_as_int64(&child);
    return 0;
}

static int add_coll_stats(md_db *db, const char *engine, const char *name, pt_counters *c,
                          md_error *err)
{
    bson_t cmd = BSON_INITIALIZER, reply;
    char path[96];
    BSON_APPEND_UTF8(&cmd, "collStats", name);
    int rc = md_db_command(db, &cmd, &reply, err);
    bson_destroy(&cmd);
    if (rc == 0) {
        snprintf(path, sizeof path, "%s.inserts", engine);
        c->inserts += get_num(&reply, path);
        snprintf(path, sizeof path, "%s.updates", engine);
        c->updates += get_num(&reply, path);
        snprintf(path, sizeof path, "%s.inPlaceUpdates", engine);
        c->in_place += get_num(&reply, path);
        snprintf(path, sizeof path, "%s.bytesWritten", engine);
        c->bytes_written += get_num(&reply, path);
    }
    bson_destroy(&reply);
    return rc;
}

int pt_counters_sample(md_db *db, pt_counters *c, md_error *err)
{
    bson_t reply;
    bson_iter_t it, batch, coll, name;
    char engine[32] = "";
    struct rusage ru;
    memset(c, 0, sizeof *c);
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        c->cpu_us = (int64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 +
                    ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
    int rc = md_db_command_json(db, "{\"serverStatus\": 1}", &reply, err);
    if (rc == 0) {
        c->lock_waits = sum_subdoc(&reply, "locks.Collection.acquireWaitCount") +
                        sum_subdoc(&reply, "locks.Database.acquireWaitCount");
        c->lock_wait_us = sum_subdoc(&reply, "locks.Collection.timeAcquiringMicros") +
                          sum_subdoc(&reply, "locks.Database.timeAcquiringMicros");
        c->write_conflicts = get_num(&reply, "metrics.operation.writeConflicts");
        c->moves = get_num(&reply, "metrics.record.moves");
        c->latch_wait_us = get_num(&reply, "btree.transaction.latch.sharedWaitMicros") +
                           get_num(&reply, "btree.transaction.latch.exclusiveWaitMicros") +
                           get_num(&reply, "btree.transaction.latch.commitWaitMicros");
        if (bson_iter_init(&it, &reply) &&
            bson_iter_find_descendant(&it, "storageEngine.name", &name) &&
            BSON_ITER_HOLDS_UTF8(&name))
            snprintf(engine, sizeof engine, "%s", bson_iter_utf8(&name, NULL));
    }
    bson_destroy(&reply);
    if (rc)
        return rc;
    rc = md_db_command_json(db, "{\"listCollections\": 1}", &reply, err);
    if (rc == 0 && bson_iter_init(&it, &reply) &&
        bson_iter_find_descendant(&it, "cursor.firstBatch", &batch) &&
        BSON_ITER_HOLDS_ARRAY(&batch) && bson_iter_recurse(&batch, &coll)) {
        while (bson_iter_next(&coll)) {
            bson_iter_t f;
            if (BSON_ITER_HOLDS_DOCUMENT(&coll) && bson_iter_recurse(&coll, &f) &&
                bson_iter_find(&f, "name") && BSON_ITER_HOLDS_UTF8(&f))
                add_coll_stats(db, engine, bson_iter_utf8(&f, NULL), c, NULL);
        }
    }
    bson_destroy(&reply);
    return rc;
}

static void counters_sub(const pt_counters *a, const pt_counters *b, pt_counters *d)
{
    d->lock_waits = a->lock_waits - b->lock_waits;
    d->lock_wait_us = a->lock_wait_us - b->lock_wait_us;
    d->write_conflicts = a->write_conflicts - b->write_conflicts;
    d->latch_wait_us = a->latch_wait_us - b->latch_wait_us;
    d->moves = a->moves - b->moves;
    d->inserts = a->inserts - b->inserts;
    d->updates = a->updates - b->updates;
    d->in_place = a->in_place - b->in_place;
    d->bytes_written = a->bytes_written - b->bytes_written;
    d->cpu_us = a->cpu_us - b->cpu_us;
}

/* ---- the run -------------------------------------------------------------------- */

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

static int open_db(const char *dir, const pt_run_opts *o, md_db **db, md_error *err)
{
    bson_t opts = BSON_INITIALIZER, sub;
    BSON_APPEND_UTF8(&opts, "engine", o->engine);
    if (strcmp(o->engine, "mmapv1") == 0) {
        BSON_APPEND_DOCUMENT_BEGIN(&opts, "mmapv1", &sub);
        BSON_APPEND_BOOL(&sub, "journal", o->journal);
        bson_append_document_end(&opts, &sub);
    } else if (strcmp(o->engine, "btree") == 0) {
        BSON_APPEND_DOCUMENT_BEGIN(&opts, "btree", &sub);
        BSON_APPEND_BOOL(&sub, "log", o->journal);
        bson_append_document_end(&opts, &sub);
    }
    int rc = md_db_open(dir, &opts, db, err);
    bson_destroy(&opts);
    return rc;
}

/* Start the clients, wait for them (reporting progress), merge their results. */
static int run_users(sim *s, const pt_run_opts *o, pt_run_result *r)
{
    int nclients = o->processes * o->pool_size;
    if (nclients < 1)
        nclients = 1;
    if (nclients > s->nusers)
        nclients = (int)(s->nusers ? s->nusers : 1);
    r->clients = nclients;
    sim_client *cl = calloc((size_t)nclients, sizeof *cl);
    if (!cl)
        return MD_ENOMEM;
    /* As many helpers as clients: the pool's connections a user's
     * sub-operations may take besides its own. */
    if (pt_pool_new(nclients, &s->pool, NULL) != 0) {
        free(cl);
        return MD_ERROR;
    }
    s->t0_ns = mono_ns() + 20 * 1000000; /* let the clients start first */
    s->stop_ns = o->max_run_s > 0 ? s->t0_ns + (int64_t)(o->max_run_s * 1e9) : INT64_MAX;
    s->delay_ns = (int64_t)o->resolution_ms * 1000000;
    s->listen_ns = s->delay_ns * o->iterations;
    int started = 0, nlisteners = 0, rc = 0;
    int64_t nlisteners_wanted = 0;
    sim_listener *ls = start_listeners(s, o, &nlisteners);
    for (int j = 0; j < s->sc->nops; j++)
        if (s->sc->ops[j].listen)
            nlisteners_wanted += pt_op_listeners(&s->sc->ops[j], o);
    if (nlisteners < nlisteners_wanted)
        rc = MD_ERROR; /* the run goes on; the caller reports it */
    for (int i = 0; i < nclients; i++) {
        cl[i].sim = s;
        cl[i].index = i;
        for (int j = 0; j < PT_MAX_OPS; j++)
            pt_hist_init(&cl[i].res[j].hist);
        if (pthread_create(&cl[i].thread, NULL, client_main, &cl[i]) != 0) {
            rc = MD_ERROR;
            break;
        }
        started++;
    }
    if (started == 0) {
        for (int i = 0; i < nlisteners; i++)
            pthread_join(ls[i].thread, NULL);
        free(ls);
        free(cl);
        pt_pool_destroy(s->pool);
        s->pool = NULL;
        return MD_ERROR;
    }
    while (atomic_load(&s->done) < s->nusers && started == nclients) {
        sleep_until_ns(mono_ns() + 250 * 1000000);
        if (o->progress)
            o->progress(o->progress_arg, atomic_load(&s->done), s->nusers,
                        (double)(mono_ns() - s->t0_ns) / 1e9);
    }
    int64_t last_end = s->t0_ns;
    for (int i = 0; i < started; i++) {
        pthread_join(cl[i].thread, NULL);
        if (cl[i].last_end_ns > last_end)
            last_end = cl[i].last_end_ns;
        for (int j = 0; j < s->sc->nops; j++) {
            merge_result(&r->ops[j], &cl[i].res[j]);
            if (cl[i].res[j].skipped)
                r->cut_off = true;
        }
    }
    for (int i = 0; i < nlisteners; i++) {
        pthread_join(ls[i].thread, NULL);
        merge_result(&r->ops[ls[i].op], &ls[i].res);
        if (ls[i].l.last_ns > last_end)
            last_end = ls[i].l.last_ns;
    }
    free(ls);
    pt_pool_destroy(s->pool);
    s->pool = NULL;
    r->runtime_s = (double)(last_end - s->t0_ns) / 1e9;
    free(cl);
    return rc;
}

/* One iteration's users of sc, back to back by this thread, on a fresh
 * database in a new directory under `parent`: each op's mean time.  A
 * user's sub-operations (pt_user_parallel) still run at once, on helpers
 * of its own. */
static int service_times(const pt_scenario *sc, const pt_run_opts *o, const char *parent,
                         pt_run_result *r, md_error *err)
{
    char dir[4096];
    md_db *db = NULL;
    void *state = NULL;
    pt_pool *pool = NULL;
    pt_run_opts one = *o;
    int64_t n, sum_ns[PT_MAX_OPS] = {0};
    one.iterations = 1;
    snprintf(dir, sizeof dir, "%s/minidoc_service_XXXXXX", parent);
    if (!mkdtemp(dir))
        return md_error_set(err, MD_EIO, MD_CODE_FILE_STREAM_FAILED, "mkdtemp %s: %s", dir,
                            strerror(errno));
    sim_user *users = build_schedule(sc, &one, &n);
    int rc = users ? open_db(dir, o, &db, err)
                   : md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
    if (rc == 0)
        rc = pt_pool_new(PT_PARALLEL_MAX - 1, &pool, err);
    pt_setup_args args = {.users = n, .quick = o->quick};
    if (rc == 0 && sc->setup)
        rc = sc->setup(db, &args, &state, err);
    bool set_up = rc == 0 && db;
    for (int64_t i = 0; rc == 0 && i < n; i++) {
        const sim_user *su = &users[i];
        if (sc->ops[su->op].needs_peers)
            continue;
        pt_user u = make_user(db, state, o->seed, su, 0, pool);
        md_error uerr;
        int64_t t = mono_ns();
        if (sc->ops[su->op].run(&u, &uerr) == 0) {
            sum_ns[su->op] += mono_ns() - t;
            r->ops[su->op].service_users++;
        }
    }
    for (int j = 0; j < sc->nops; j++)
        if (r->ops[j].service_users)
            r->ops[j].service_ms = (double)sum_ns[j] / (double)r->ops[j].service_users / 1e6;
    if (set_up)
        pt_scenario_destroy(sc, state);
    pt_pool_destroy(pool);
    md_db_close(db);
    free(users);
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return rc;
}

bool pt_op_decides(const pt_scenario *sc, int j)
{
    for (int k = 0; k < sc->nops; k++)
        if (sc->ops[k].decides)
            return sc->ops[j].decides;
    return true;
}

const char *pt_book_figures_verdict(const pt_pattern *p)
{
    double mmap = 0, wt = 0;
    for (int i = 0; i < p->nscenarios; i++)
        for (int j = 0; j < p->scenarios[i]->nops; j++)
            if (pt_op_decides(p->scenarios[i], j)) {
                mmap += p->scenarios[i]->ops[j].book_mmap.mean;
                wt += p->scenarios[i]->ops[j].book_wt.mean;
            }
    return pt_verdict(mmap, wt);
}

bool pt_book_saturated(const pt_scenario *sc, double ms)
{
    for (int j = 0; j < sc->nops; j++)
        if (sc->ops[j].book_mmap.mean > ms || sc->ops[j].book_wt.mean > ms)
            return true;
    return false;
}

static void result_init(const pt_scenario *sc, const pt_run_opts *o, pt_run_result *r)
{
    memset(r, 0, sizeof *r);
    r->sc = sc;
    snprintf(r->engine, sizeof r->engine, "%s", o->engine);
    r->iterations = o->iterations;
    r->resolution_ms = o->resolution_ms;
    r->rate_scale = o->rate_scale;
    r->max_run_s = o->max_run_s;
    r->nops = sc->nops;
    for (int j = 0; j < sc->nops; j++) {
        r->ops[j].name = sc->ops[j].name;
        pt_hist_init(&r->ops[j].hist);
    }
}

int pt_run_scenario(const pt_scenario *sc, const pt_run_opts *o, pt_run_result *r,
                    md_error *err)
{
    char dir[4096];
    const char *tmp = o->tmpdir ? o->tmpdir : getenv("TMPDIR");
    md_db *db = NULL;
    sim s = {.sc = sc, .seed = o->seed};
    int rc;

    result_init(sc, o, r);
    if (sc->nops < 1 || sc->nops > PT_MAX_OPS)
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE, "scenario %s has %d ops",
                            sc->name, sc->nops);
    snprintf(dir, sizeof dir, "%s/minidoc_patterns_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
        return md_error_set(err, MD_EIO, MD_CODE_FILE_STREAM_FAILED, "mkdtemp %s: %s", dir,
                            strerror(errno));
    rc = open_db(dir, o, &db, err);
    if (rc)
        goto out_rmdir;
    s.db = db;
    s.users = build_schedule(sc, o, &s.nusers);
    if (!s.users) {
        rc = md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
        goto out_close;
    }
    pt_setup_args args = {.users = s.nusers, .quick = o->quick};
    int64_t t = mono_ns();
    if (sc->setup && (rc = sc->setup(db, &args, &s.state, err)) != 0)
        goto out_free;
    r->setup_s = (double)(mono_ns() - t) / 1e9;
    pt_counters_sample(db, &r->before, NULL);
    rc = run_users(&s, o, r);
    if (rc) {
        md_error_set(err, rc, MD_CODE_INTERNAL_ERROR, "could not start the client threads");
        goto out_destroy;
    }
    pt_counters_sample(db, &r->after, NULL);
    counters_sub(&r->after, &r->before, &r->delta);
    r->ok = true;
    for (int j = 0; j < sc->nops; j++) {
        pt_figures_from_hist(&r->ops[j].hist, r->runtime_s, &r->ops[j].fig);
        if (r->ops[j].errors)
            r->ok = false;
    }
    if (sc->check) {
        md_error cerr;
        md_error_clear(&cerr);
        r->check_rc = sc->check(db, s.state, &cerr);
        if (r->check_rc) {
            r->ok = false;
            snprintf(r->check_error, sizeof r->check_error, "%s: %.200s",
                     md_strerror(r->check_rc), cerr.message);
        }
    }
out_destroy:
    pt_scenario_destroy(sc, s.state);
out_free:
    free(s.users);
out_close:
    md_db_close(db);
out_rmdir:
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    if (rc == 0 && o->service) {
        md_error serr;
        md_error_clear(&serr);
        if (service_times(sc, o, tmp && *tmp ? tmp : "/tmp", r, &serr) != 0)
            snprintf(r->service_error, sizeof r->service_error, "%.200s", serr.message);
    }
    return rc;
}
