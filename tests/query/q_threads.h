/*
 * q_threads.h -- multi-threaded workloads on one shared md_db, used by the
 * Criterion tests (test_q_threads.c) and by the ThreadSanitizer program
 * (tsan_q_threads.c), which cannot use Criterion.  Each function returns
 * the number of problems it found (0: all good) and prints what they were.
 *
 *   qt_queue      the Queue pattern: publishers insert jobs while FIFO
 *                 readers take them with findAndModify; every job must be
 *                 taken exactly once.
 *   qt_counters   threads $inc counters in shared and own documents of one
 *                 and of several collections while readers scan; the sums
 *                 must be exact and validate (indexes against records)
 *                 clean.
 */
#ifndef Q_THREADS_H
#define Q_THREADS_H

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "minidoc.h"

#define QT_MAX_THREADS 16

static inline bson_t *qt_json(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline bson_t *qt_json(const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    bson_t *b = bson_new_from_json((const uint8_t *)buf, -1, NULL);
    if (!b) {
        fprintf(stderr, "q_threads: bad JSON %s\n", buf);
        abort();
    }
    return b;
}

/* Run a command; on failure print it and return nonzero. */
static inline int qt_cmd(md_db *db, bson_t *cmd, bson_t *reply)
{
    md_error err;
    bson_t r;
    bson_iter_t we;
    int rc = md_db_command(db, cmd, reply ? reply : &r, &err);
    if (!rc && bson_iter_init_find(&we, reply ? reply : &r, "writeErrors")) {
        snprintf(err.message, sizeof err.message, "writeErrors");
        rc = MD_ERROR;
    }
    if (rc) {
        char *j = bson_as_relaxed_extended_json(cmd, NULL);
        fprintf(stderr, "q_threads: %s -> %s\n", j, err.message);
        bson_free(j);
    }
    if (!reply)
        bson_destroy(&r);
    bson_destroy(cmd);
    return rc;
}

static inline int64_t qt_get_int(const bson_t *doc, const char *path)
{
    bson_iter_t it, f;
    if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, path, &f) &&
        BSON_ITER_HOLDS_NUMBER(&f))
        return bson_iter_as_int64(&f);
    return -1;
}

/* ---- the queue ------------------------------------------------------------------ */

typedef struct qt_queue_ctx {
    md_db *db;
    int jobs_per_publisher, publishers;
    int published;       /* publishers done, under mu */
    int *taken;          /* taken[job] counts deliveries, under mu */
    int errors;
    pthread_mutex_t mu;
} qt_queue_ctx;

typedef struct qt_arg {
    qt_queue_ctx *q;
    int id;
} qt_arg;

static inline void *qt_publisher(void *p)
{
    qt_arg *a = p;
    qt_queue_ctx *q = a->q;
    for (int i = 0; i < q->jobs_per_publisher; i++) {
        int job = a->id * q->jobs_per_publisher + i;
        if (qt_cmd(q->db,
                   qt_json("{\"insert\": \"queue\", \"documents\": [{\"_id\": %d, "
                           "\"createdOn\": %d, \"startTime\": null, \"msg\": \"job %d\"}]}",
                           job, job, job),
                   NULL) != 0) {
            pthread_mutex_lock(&q->mu);
            q->errors++;
            pthread_mutex_unlock(&q->mu);
        }
    }
    pthread_mutex_lock(&q->mu);
    q->published++;
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

static inline void *qt_reader(void *p)
{
    qt_arg *a = p;
    qt_queue_ctx *q = a->q;
    for (;;) {
        bson_t reply;
        pthread_mutex_lock(&q->mu);
        bool all_published = q->published == q->publishers;
        pthread_mutex_unlock(&q->mu);
        int rc = qt_cmd(q->db,
                        qt_json("{\"findAndModify\": \"queue\", \"query\": {\"startTime\": null},"
                                " \"sort\": {\"createdOn\": 1}, \"update\": {\"$set\": "
                                "{\"startTime\": %d}}, \"new\": true}",
                                a->id + 1),
                        &reply);
        int64_t job = rc ? -1 : qt_get_int(&reply, "value._id");
        int64_t who = rc ? -1 : qt_get_int(&reply, "value.startTime");
        bson_destroy(&reply);
        pthread_mutex_lock(&q->mu);
        if (rc || (job >= 0 && who != a->id + 1))
            q->errors++;
        else if (job >= 0)
            q->taken[job]++;
        pthread_mutex_unlock(&q->mu);
        if (rc || (job < 0 && all_published))
            return NULL;
    }
}

/* Publishers and readers on collection "queue" of db; problems found. */
static inline int qt_queue(md_db *db, int publishers, int readers, int jobs_per_publisher)
{
    qt_queue_ctx q = {.db = db, .jobs_per_publisher = jobs_per_publisher,
                      .publishers = publishers};
    pthread_t th[2 * QT_MAX_THREADS];
    qt_arg args[2 * QT_MAX_THREADS];
    int njobs = publishers * jobs_per_publisher, bad = 0;
    if (publishers > QT_MAX_THREADS || readers > QT_MAX_THREADS)
        return 1;
    q.taken = calloc((size_t)njobs, sizeof *q.taken);
    pthread_mutex_init(&q.mu, NULL);
    if (qt_cmd(db,
               qt_json("{\"createIndexes\": \"queue\", \"indexes\": [{\"key\": "
                       "{\"startTime\": 1, \"createdOn\": 1}, \"name\": \"fifo\"}]}"),
               NULL) != 0)
        bad++;
    for (int i = 0; i < publishers + readers; i++) {
        args[i] = (qt_arg){&q, i < publishers ? i : i - publishers};
        pthread_create(&th[i], NULL, i < publishers ? qt_publisher : qt_reader, &args[i]);
    }
    for (int i = 0; i < publishers + readers; i++)
        pthread_join(th[i], NULL);
    for (int j = 0; j < njobs; j++)
        if (q.taken[j] != 1) {
            if (bad++ < 10)
                fprintf(stderr, "q_threads: job %d taken %d times\n", j, q.taken[j]);
        }
    if (q.errors)
        fprintf(stderr, "q_threads: %d command errors in the queue\n", q.errors);
    bad += q.errors;
    pthread_mutex_destroy(&q.mu);
    free(q.taken);
    return bad;
}

/* ---- counters and readers ------------------------------------------------------------ */

typedef struct qt_count_ctx {
    md_db *db;
    int ncolls, ops;
    int errors; /* atomic */
    int stop;   /* atomic: readers stop */
} qt_count_ctx;

typedef struct qt_count_arg {
    qt_count_ctx *c;
    int id;
} qt_count_arg;

/* Each op: $inc the shared document of a collection and this thread's own
 * one (an upsert the first time), and move the "n" index key. */
static inline void *qt_counter(void *p)
{
    qt_count_arg *a = p;
    qt_count_ctx *c = a->c;
    for (int i = 0; i < c->ops; i++) {
        int coll = (a->id + i) % c->ncolls;
        int e = qt_cmd(c->db,
                       qt_json("{\"update\": \"c%d\", \"updates\": ["
                               "{\"q\": {\"_id\": \"shared\"}, \"u\": {\"$inc\": {\"n\": 1}}, "
                               "\"upsert\": true},"
                               "{\"q\": {\"_id\": \"t%d\"}, \"u\": {\"$inc\": {\"n\": 1}, "
                               "\"$push\": {\"log\": %d}}, \"upsert\": true}]}",
                               coll, a->id, i),
                       NULL);
        if (e)
            __atomic_fetch_add(&c->errors, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

/* Readers: a sum over each collection by index scan must never exceed what
 * was written and documents must always be whole. */
static inline void *qt_scanner(void *p)
{
    qt_count_arg *a = p;
    qt_count_ctx *c = a->c;
    while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE)) {
        for (int coll = 0; coll < c->ncolls; coll++) {
            bson_t reply;
            if (qt_cmd(c->db,
                       qt_json("{\"find\": \"c%d\", \"filter\": {\"n\": {\"$gte\": 0}}, "
                               "\"batchSize\": 1000}",
                               coll),
                       &reply) != 0) {
                __atomic_fetch_add(&c->errors, 1, __ATOMIC_RELAXED);
                continue;
            }
            bson_iter_t it, d;
            if (bson_iter_init(&it, &reply) &&
                bson_iter_find_descendant(&it, "cursor.firstBatch", &d) &&
                bson_iter_recurse(&d, &it))
                while (bson_iter_next(&it)) {
                    bson_t doc;
                    uint32_t len;
                    const uint8_t *data;
                    bson_iter_document(&it, &len, &data);
                    if (!bson_init_static(&doc, data, len) || qt_get_int(&doc, "n") < 0)
                        __atomic_fetch_add(&c->errors, 1, __ATOMIC_RELAXED);
                }
            bson_destroy(&reply);
        }
    }
    return NULL;
}

/* writers threads $inc, readers scan, over ncolls collections; problems. */
static inline int qt_counters(md_db *db, int writers, int readers, int ncolls, int ops)
{
    qt_count_ctx c = {.db = db, .ncolls = ncolls, .ops = ops};
    pthread_t w[QT_MAX_THREADS], r[QT_MAX_THREADS];
    qt_count_arg wa[QT_MAX_THREADS], ra[QT_MAX_THREADS];
    int bad = 0;
    if (writers > QT_MAX_THREADS || readers > QT_MAX_THREADS)
        return 1;
    for (int i = 0; i < ncolls; i++)
        bad += qt_cmd(db,
                      qt_json("{\"createIndexes\": \"c%d\", \"indexes\": [{\"key\": {\"n\": 1},"
                              " \"name\": \"n_1\"}]}",
                              i),
                      NULL) != 0;
    /* the documents exist first: two upserts of one missing _id may race to
     * a duplicate key error, in MongoDB 3.x too */
    for (int i = 0; i < ncolls; i++)
        for (int t = -1; t < writers; t++)
            bad += qt_cmd(db,
                          t < 0 ? qt_json("{\"insert\": \"c%d\", \"documents\": "
                                          "[{\"_id\": \"shared\", \"n\": 0}]}",
                                          i)
                                : qt_json("{\"insert\": \"c%d\", \"documents\": "
                                          "[{\"_id\": \"t%d\", \"n\": 0}]}",
                                          i, t),
                          NULL) != 0;
    for (int i = 0; i < readers; i++) {
        ra[i] = (qt_count_arg){&c, i};
        pthread_create(&r[i], NULL, qt_scanner, &ra[i]);
    }
    for (int i = 0; i < writers; i++) {
        wa[i] = (qt_count_arg){&c, i};
        pthread_create(&w[i], NULL, qt_counter, &wa[i]);
    }
    for (int i = 0; i < writers; i++)
        pthread_join(w[i], NULL);
    __atomic_store_n(&c.stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < readers; i++)
        pthread_join(r[i], NULL);
    if (c.errors)
        fprintf(stderr, "q_threads: %d errors in the counters run\n", c.errors);
    bad += c.errors;
    /* exact sums: each writer did ops ops, each on one collection */
    int64_t shared = 0, own = 0;
    for (int coll = 0; coll < ncolls; coll++) {
        bson_t reply;
        if (qt_cmd(db, qt_json("{\"find\": \"c%d\", \"batchSize\": 1000}", coll), &reply)) {
            bad++;
            continue;
        }
        bson_iter_t it, d;
        if (bson_iter_init(&it, &reply) &&
            bson_iter_find_descendant(&it, "cursor.firstBatch", &d) && bson_iter_recurse(&d, &it))
            while (bson_iter_next(&it)) {
                bson_t doc;
                uint32_t len;
                const uint8_t *data;
                bson_iter_document(&it, &len, &data);
                bson_init_static(&doc, data, len);
                bson_iter_t id;
                bool is_shared = bson_iter_init_find(&id, &doc, "_id") &&
                                 BSON_ITER_HOLDS_UTF8(&id) &&
                                 strcmp(bson_iter_utf8(&id, NULL), "shared") == 0;
                *(is_shared ? &shared : &own) += qt_get_int(&doc, "n");
            }
        bson_destroy(&reply);
        if (qt_cmd(db, qt_json("{\"validate\": \"c%d\", \"full\": true}", coll), &reply) == 0) {
            bson_iter_t v;
            if (!bson_iter_init_find(&v, &reply, "valid") || !bson_iter_as_bool(&v)) {
                char *j = bson_as_relaxed_extended_json(&reply, NULL);
                fprintf(stderr, "q_threads: validate c%d: %s\n", coll, j);
                bson_free(j);
                bad++;
            }
        } else {
            bad++;
        }
        bson_destroy(&reply);
    }
    int64_t want = (int64_t)writers * ops;
    if (shared != want || own != want) {
        fprintf(stderr, "q_threads: sums shared=%lld own=%lld, want %lld each\n",
                (long long)shared, (long long)own, (long long)want);
        bad++;
    }
    return bad;
}

#endif /* Q_THREADS_H */
