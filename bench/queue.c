/*
 * queue.c -- the Queue pattern of "The Little MongoDB Schema Design Book"
 * (simulation queue_fifo_simulation.js), on each engine.
 *
 * Publishers insert jobs
 *     {_id, startTime: null, endTime: null, createdOn: Date, priority: 1,
 *      payload: {type, source, output}}
 * while FIFO readers take the oldest one:
 *     findAndModify({query: {startTime: null}, sort: {createdOn: 1},
 *                    update: {$set: {startTime: Date}}, new: true})
 * with the index {startTime: 1, createdOn: 1}, as in the book.  Publishers
 * write with {w: 1, j: true} (a queue must not lose a job it acknowledged;
 * --no-j for w: 1 alone), readers with w: 1.
 *
 * The load is open: like the book's "slicetime" strategy, every iteration
 * (one resolution, 1000 ms) schedules P publish and F fetch operations
 * spread evenly across it, handed round-robin to the publisher and reader
 * threads.  A thread runs its operations in schedule order; an operation's
 * latency runs from its scheduled start to its end, so time spent behind a
 * lock (or behind the thread's own backlog) counts, as it did for the
 * book's connection pools.  Defaults: the book's 1000 publish and 300 fetch
 * users per iteration, 25 iterations, 8 publisher and 8 reader threads.
 *
 * Per engine and operation it prints the book's statistics (Runtime, Mean,
 * Standard Deviation, 75/95/99 percentiles, Min, Max, in ms), and at the
 * end one line per engine and operation:
 *     queue OPERATION ENGINE n=N mean_ms=X p95_ms=X p99_ms=X dup=N lost=N
 * dup counts jobs delivered more than once, lost jobs published but
 * neither delivered nor still waiting.  A last line per engine shows where
 * the time went: collection lock waits, write conflicts, latch waits.
 *
 * What decides the result: on mmapv1 a publisher holds the collection's
 * write lock until its journal commit (up to journalCommitInterval), and a
 * reader's findAndModify needs the same lock, so readers queue behind
 * writers.  On btree nothing is held while the log is synced and readers
 * take no collection lock.  With --no-j neither engine comes near
 * saturation at the book's rates on a current machine.
 *
 *   build/bench/queue [--quick] [--no-j] [--engine mmapv1|btree] [--publishers N]
 *                     [--readers N] [--publish N] [--fetch N] [--iterations N]
 *                     [--resolution-ms N] [--dir DIR]
 */
#include <ftw.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "minidoc.h"

#define BENCH_NAME "queue"
#include "bench.h"

#define MAX_THREADS 64

typedef struct cfg {
    int publishers, readers;   /* threads */
    int publish, fetch;        /* operations per iteration */
    int iterations, resolution_ms;
    const char *dir;
    bool journaled; /* publishers write with {w: 1, j: true} */
} cfg;

typedef struct op_stats {
    double *lat; /* ms */
    size_t n, cap;
} op_stats;

typedef struct run_state {
    const cfg *c;
    md_db *db;
    double t0;               /* start of the schedule */
    pthread_mutex_t mu;
    op_stats pub, fetch;     /* under mu */
    int *taken;              /* deliveries per job id, under mu */
    int njobs;               /* scheduled publishes */
    int published, errors;   /* under mu */
    double end;              /* last operation's end, under mu */
} run_state;

typedef struct worker {
    run_state *s;
    int id;
    bool publisher;
} worker;

static void sleep_until(double t)
{
    double d = t - now();
    if (d <= 0)
        return;
    struct timespec ts = {(time_t)d, (long)((d - (time_t)d) * 1e9)};
    nanosleep(&ts, NULL);
}

static void stats_add(op_stats *st, double ms)
{
    if (st->n == st->cap) {
        st->cap = st->cap ? st->cap * 2 : 4096;
        st->lat = realloc(st->lat, st->cap * sizeof *st->lat);
        if (!st->lat) {
            perror("queue");
            exit(1);
        }
    }
    st->lat[st->n++] = ms;
}

/* The scheduled start of operation k of an iteration of n (slicetime). */
static double slot(const run_state *s, int iter, int k, int n)
{
    double res = s->c->resolution_ms / 1000.0;
    return s->t0 + iter * res + res * k / n;
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool publish(run_state *s, int job)
{
    bson_t reply;
    md_error err;
    bson_t *cmd = BCON_NEW(
        "insert", "queue", "documents", "[", "{", "_id", BCON_INT32(job), "startTime", BCON_NULL,
        "endTime", BCON_NULL, "createdOn", BCON_DATE_TIME(wall_ms()), "priority", BCON_INT32(1),
        "payload", "{", "type", "convertImage", "source", "/images/image.png", "output",
        "/images/image.jpg", "}", "}", "]");
    if (s->c->journaled)
        BCON_APPEND(cmd, "writeConcern", "{", "w", BCON_INT32(1), "j", BCON_BOOL(true), "}");
    bson_iter_t it;
    int rc = md_db_command(s->db, cmd, &reply, &err);
    bool ok = rc == 0 && !bson_iter_init_find(&it, &reply, "writeErrors");
    bson_destroy(&reply);
    bson_destroy(cmd);
    return ok;
}

/* Take the oldest job: its _id, -1 when the queue is empty, -2 on error. */
static int fetch(run_state *s)
{
    bson_t reply;
    md_error err;
    bson_t *cmd = BCON_NEW("findAndModify", "queue", "query", "{", "startTime", BCON_NULL, "}",
                           "sort", "{", "createdOn", BCON_INT32(1), "}", "update", "{", "$set",
                           "{", "startTime", BCON_DATE_TIME(wall_ms()), "}", "}", "new",
                           BCON_BOOL(true));
    int job = -2;
    if (md_db_command(s->db, cmd, &reply, &err) == 0) {
        bson_iter_t it, id;
        job = -1;
        if (bson_iter_init_find(&it, &reply, "value") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
            bson_iter_recurse(&it, &id) && bson_iter_find(&id, "_id"))
            job = bson_iter_int32(&id);
    } else {
        fprintf(stderr, "queue: findAndModify: %s\n", err.message);
    }
    bson_destroy(&reply);
    bson_destroy(cmd);
    return job;
}

static void *work(void *p)
{
    worker *w = p;
    run_state *s = w->s;
    const cfg *c = s->c;
    int n = w->publisher ? c->publish : c->fetch;
    int threads = w->publisher ? c->publishers : c->readers;
    for (int iter = 0; iter < c->iterations; iter++)
        for (int k = w->id; k < n; k += threads) {
            double at = slot(s, iter, k, n);
            sleep_until(at);
            int job = iter * c->publish + k;
            bool ok = true;
            int got = -1;
            if (w->publisher)
                ok = publish(s, job);
            else
                ok = (got = fetch(s)) != -2;
            double end = now();
            pthread_mutex_lock(&s->mu);
            stats_add(w->publisher ? &s->pub : &s->fetch, (end - at) * 1000);
            s->errors += !ok;
            s->published += w->publisher && ok;
            if (got >= 0 && got < s->njobs)
                s->taken[got]++;
            if (end > s->end)
                s->end = end;
            pthread_mutex_unlock(&s->mu);
        }
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct summary {
    size_t n;
    double mean, sd, p75, p95, p99, min, max;
} summary;

static summary summarize(op_stats *st)
{
    summary r = {.n = st->n};
    if (!st->n)
        return r;
    qsort(st->lat, st->n, sizeof *st->lat, cmp_double);
    double sum = 0, sq = 0;
    for (size_t i = 0; i < st->n; i++)
        sum += st->lat[i];
    r.mean = sum / st->n;
    for (size_t i = 0; i < st->n; i++)
        sq += (st->lat[i] - r.mean) * (st->lat[i] - r.mean);
    r.sd = sqrt(sq / st->n);
#define PCT(q) st->lat[(size_t)((q) * (st->n - 1))]
    r.p75 = PCT(0.75);
    r.p95 = PCT(0.95);
    r.p99 = PCT(0.99);
#undef PCT
    r.min = st->lat[0];
    r.max = st->lat[st->n - 1];
    return r;
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

typedef struct result {
    const char *engine;
    summary pub, fetch;
    int dup, lost;
} result;

static int64_t count_waiting(md_db *db)
{
    bson_t reply;
    md_error err;
    bson_iter_t it;
    int64_t n = -1;
    bson_t *cmd = BCON_NEW("count", "queue", "query", "{", "startTime", BCON_NULL, "}");
    if (md_db_command(db, cmd, &reply, &err) == 0 && bson_iter_init_find(&it, &reply, "n"))
        n = bson_iter_as_int64(&it);
    bson_destroy(&reply);
    bson_destroy(cmd);
    return n;
}

/* What the locks and the engine saw: waits, write conflicts. */
static void print_contention(md_db *db, const char *engine)
{
    bson_t reply;
    md_error err;
    bson_t *cmd = BCON_NEW("serverStatus", BCON_INT32(1));
    if (md_db_command(db, cmd, &reply, &err) == 0) {
        const char *paths[] = {"locks.Collection.acquireWaitCount.W",
                               "locks.Collection.timeAcquiringMicros.W",
                               "metrics.operation.writeConflicts",
                               "btree.transaction.latch.exclusiveWaitMicros",
                               "btree.transaction.latch.sharedWaitMicros"};
        printf("%-7s", engine);
        for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
            bson_iter_t it, f;
            if (bson_iter_init(&it, &reply) && bson_iter_find_descendant(&it, paths[i], &f) &&
                BSON_ITER_HOLDS_NUMBER(&f))
                printf(" %s=%lld", paths[i], (long long)bson_iter_as_int64(&f));
        }
        printf("\n");
    }
    bson_destroy(&reply);
    bson_destroy(cmd);
}

static void print_row(const char *engine, const char *op, double runtime, const summary *m)
{
    printf("%-7s %-26s %8.3f s %10.3f %10.3f %10.3f %10.3f %10.3f %8.3f %10.3f\n", engine, op,
           runtime, m->mean, m->sd, m->p75, m->p95, m->p99, m->min, m->max);
}

static result run_engine(const cfg *c, const char *engine)
{
    char dir[4096];
    md_db *db;
    md_error err;
    result res = {.engine = engine};
    snprintf(dir, sizeof dir, "%s/queue-%s-XXXXXX", c->dir, engine);
    if (!mkdtemp(dir)) {
        perror("queue: mkdtemp");
        exit(1);
    }
    bson_t *opts = BCON_NEW("engine", BCON_UTF8(engine));
    if (md_db_open(dir, opts, &db, &err) != 0) {
        fprintf(stderr, "queue: open %s: %s\n", engine, err.message);
        exit(1);
    }
    bson_destroy(opts);
    bson_t reply;
    bson_t *ix = BCON_NEW("createIndexes", "queue", "indexes", "[", "{", "key", "{",
                          "startTime", BCON_INT32(1), "createdOn", BCON_INT32(1), "}", "name",
                          "startTime_1_createdOn_1", "}", "]");
    if (md_db_command(db, ix, &reply, &err) != 0) {
        fprintf(stderr, "queue: createIndexes: %s\n", err.message);
        exit(1);
    }
    bson_destroy(&reply);
    bson_destroy(ix);

    run_state s = {.c = c, .db = db, .njobs = c->publish * c->iterations};
    pthread_mutex_init(&s.mu, NULL);
    s.taken = calloc((size_t)s.njobs, sizeof *s.taken);
    pthread_t th[2 * MAX_THREADS];
    worker w[2 * MAX_THREADS];
    int nt = 0;
    s.t0 = now() + 0.05;
    for (int i = 0; i < c->publishers; i++, nt++)
        w[nt] = (worker){&s, i, true};
    for (int i = 0; i < c->readers; i++, nt++)
        w[nt] = (worker){&s, i, false};
    for (int i = 0; i < nt; i++)
        pthread_create(&th[i], NULL, work, &w[i]);
    for (int i = 0; i < nt; i++)
        pthread_join(th[i], NULL);
    double runtime = s.end - s.t0;

    int64_t waiting = count_waiting(db);
    int delivered = 0;
    for (int j = 0; j < s.njobs; j++) {
        delivered += s.taken[j] > 0;
        res.dup += s.taken[j] > 1 ? s.taken[j] - 1 : 0;
    }
    res.lost = s.published - delivered - (int)waiting;
    res.pub = summarize(&s.pub);
    res.fetch = summarize(&s.fetch);
    print_row(engine, "publish_to_queues", runtime, &res.pub);
    print_row(engine, "fetch_from_queue_by_fifo", runtime, &res.fetch);
    printf("%-7s published %d, delivered %d, still waiting %lld, errors %d\n", engine,
           s.published, delivered, (long long)waiting, s.errors);
    print_contention(db, engine);
    fflush(stdout);
    md_db_close(db);
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    free(s.taken);
    free(s.pub.lat);
    free(s.fetch.lat);
    pthread_mutex_destroy(&s.mu);
    return res;
}

static int arg_int(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) {
        fprintf(stderr, "queue: %s needs a value\n", argv[*i]);
        exit(2);
    }
    int v = atoi(argv[++*i]);
    if (v <= 0) {
        fprintf(stderr, "queue: %s must be positive\n", argv[*i - 1]);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    cfg c = {.publishers = 8, .readers = 8, .publish = 1000, .fetch = 300, .iterations = 25,
             .resolution_ms = 1000, .dir = "/tmp", .journaled = true};
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            c.iterations = 10;
        else if (!strcmp(argv[i], "--engine") && i + 1 < argc)
            only = argv[++i];
        else if (!strcmp(argv[i], "--no-j"))
            c.journaled = false;
        else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
            c.dir = argv[++i];
        else if (!strcmp(argv[i], "--publishers"))
            c.publishers = arg_int(argc, argv, &i);
        else if (!strcmp(argv[i], "--readers"))
            c.readers = arg_int(argc, argv, &i);
        else if (!strcmp(argv[i], "--publish"))
            c.publish = arg_int(argc, argv, &i);
        else if (!strcmp(argv[i], "--fetch"))
            c.fetch = arg_int(argc, argv, &i);
        else if (!strcmp(argv[i], "--iterations"))
            c.iterations = arg_int(argc, argv, &i);
        else if (!strcmp(argv[i], "--resolution-ms"))
            c.resolution_ms = arg_int(argc, argv, &i);
        else {
            fprintf(stderr, "usage: %s [--quick] [--no-j] [--engine E] [--publishers N] "
                            "[--readers N] "
                            "[--publish N] [--fetch N] [--iterations N] [--resolution-ms N] "
                            "[--dir DIR]\n",
                    argv[0]);
            return 2;
        }
    }
    if (c.publishers > MAX_THREADS || c.readers > MAX_THREADS) {
        fprintf(stderr, "queue: at most %d threads of each kind\n", MAX_THREADS);
        return 2;
    }
    printf("queue: %d publisher and %d reader threads; per %d ms iteration %d publish and "
           "%d fetch operations; %d iterations; journal / log on (100 ms commit interval); "
           "publishers write with %s, readers with w:1\n",
           c.publishers, c.readers, c.resolution_ms, c.publish, c.fetch, c.iterations,
           c.journaled ? "j:true" : "w:1");
    printf("%-7s %-26s %10s %10s %10s %10s %10s %10s %8s %10s\n", "engine", "operation",
           "Runtime", "Mean", "StdDev", "75%", "95%", "99%", "Min", "Max");
    const char *engines[] = {"mmapv1", "btree"};
    result r[2];
    int nr = 0;
    for (int i = 0; i < 2; i++)
        if (!only || !strcmp(only, engines[i]))
            r[nr++] = run_engine(&c, engines[i]);
    if (!nr) {
        fprintf(stderr, "queue: unknown engine %s\n", only);
        return 2;
    }
    int bad = 0;
    for (int i = 0; i < nr; i++) {
        const summary *m[2] = {&r[i].pub, &r[i].fetch};
        const char *op[2] = {"publish_to_queues", "fetch_from_queue_by_fifo"};
        for (int k = 0; k < 2; k++)
            printf("queue %s %s n=%zu mean_ms=%.3f p95_ms=%.3f p99_ms=%.3f dup=%d lost=%d\n",
                   op[k], r[i].engine, m[k]->n, m[k]->mean, m[k]->p95, m[k]->p99, r[i].dup,
                   r[i].lost);
        bad += r[i].dup != 0 || r[i].lost != 0;
    }
    return bad ? 1 : 0;
}
