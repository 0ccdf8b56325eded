/*
 * queue.c -- 5.1 Queue: a work queue where many publishers insert jobs and
 * each job goes to exactly one listener, FIFO (by createdOn) or by priority.
 *
 * The operations are the book's, as the shell sends them (collection
 * "queue"; the book's db "work" is the md_db itself):
 *
 *   publish          insert({startTime: null, endTime: null, createdOn:
 *                    new Date(), priority, payload})                  Ex 2
 *   fetch FIFO       findAndModify({query: {startTime: null}, sort:
 *                    {createdOn: 1}, update: {$set: {startTime: new
 *                    Date()}}, new: true})                            Ex 3
 *   fetch priority   the same with sort {priority: -1, createdOn: 1}   Ex 4
 *   finish           update({_id: job._id}, {$set: {endTime: new Date()}})
 *                                                                     Ex 5
 *   indexes          ensureIndex({startTime: 1, createdOn: 1})         Ex 6
 *                    ensureIndex({startTime: 1, priority: -1,
 *                                 createdOn: 1})                      Ex 8
 *                    expire.ensureIndex({endTime: 1},
 *                        {expireAfterSeconds: 60 * 60 * 24})           Ex 11
 *
 * findAndModify holds the collection's write lock for its query and its
 * update, which is the point of the chapter's performance section: on
 * mmapv1 (a collection lock, as MongoDB 3.0) the FIFO readers queue behind
 * the publishers; on btree (document locks) they do not.
 *
 * The scenario "queue_fifo" is the simulator's queue_fifo_simulation.js,
 * with the simulator's own Queue class (its differences from the chapter's
 * code are listed above the scenario below): publish_to_queues users
 * insert one job each (priority round(10 * random()), payload {} -- the
 * simulator's workObject), fetch_from_queue_by_fifo users take the next job
 * FIFO and "finish" it, both timed as one.  The check: every published job
 * is in the collection exactly once, and either still queued or taken by
 * exactly one fetcher.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "patterns.h"

#define QUEUE_COLL "queue"
#define EXPIRE_COLL "expire"

/* ---- operations ---------------------------------------------------------- */

int pt_queue_create_indexes(md_db *db, md_error *err)
{
    bson_t *fifo = BCON_NEW("startTime", BCON_INT32(1), "createdOn", BCON_INT32(1));
    bson_t *prio = BCON_NEW("startTime", BCON_INT32(1), "priority", BCON_INT32(-1),
                            "createdOn", BCON_INT32(1));
    bson_t *ttl = BCON_NEW("endTime", BCON_INT32(1));
    bson_t *ttl_opts = BCON_NEW("expireAfterSeconds", BCON_INT32(60 * 60 * 24));
    int rc = pt_ensure_index(db, QUEUE_COLL, fifo, NULL, err);
    if (!rc)
        rc = pt_ensure_index(db, QUEUE_COLL, prio, NULL, err);
    /* Ex 11 as the book writes it: on the collection "expire" (of the
     * book's db "data"; one md_db is one database, so only the collection
     * name remains).  The text means the finished jobs (digest section 7
     * item 7); the code names another collection, and we keep the code. */
    if (!rc)
        rc = pt_ensure_index(db, EXPIRE_COLL, ttl, ttl_opts, err);
    bson_destroy(fifo);
    bson_destroy(prio);
    bson_destroy(ttl);
    bson_destroy(ttl_opts);
    return rc;
}

int pt_queue_publish(md_db *db, int32_t priority, const bson_t *payload, bson_oid_t *id_out,
                     md_error *err)
{
    bson_oid_t oid;
    bson_t empty = BSON_INITIALIZER;
    /* The shell (like every driver) gives the document its _id before
     * sending it, so the publisher knows its job's id. */
    bson_oid_init(&oid, NULL);
    bson_t *cmd = BCON_NEW("insert", BCON_UTF8(QUEUE_COLL), "documents", "[", "{",
                           "_id", BCON_OID(&oid), "startTime", BCON_NULL, "endTime", BCON_NULL,
                           "createdOn", BCON_DATE_TIME(pt_now_ms()), "priority",
                           BCON_INT32(priority), "payload",
                           BCON_DOCUMENT(payload ? payload : &empty), "}", "]");
    int rc = pt_write(db, cmd, NULL, err);
    bson_destroy(cmd);
    if (!rc && id_out)
        bson_oid_copy(&oid, id_out);
    return rc;
}

/* The findAndModify of Ex 3 / Ex 4 with `sort`; *job receives the updated
 * document (new: true), or MD_NOTFOUND when no job waits. */
static int fetch(md_db *db, const bson_t *sort, bson_t *job, md_error *err)
{
    bson_init(job);
    bson_t *cmd = BCON_NEW("findAndModify", BCON_UTF8(QUEUE_COLL), "query", "{", "startTime",
                           BCON_NULL, "}", "sort", BCON_DOCUMENT(sort), "update", "{", "$set",
                           "{", "startTime", BCON_DATE_TIME(pt_now_ms()), "}", "}", "new",
                           BCON_BOOL(true));
    bson_t reply;
    bson_iter_t it;
    int rc = md_db_command(db, cmd, &reply, err);
    if (!rc) {
        if (bson_iter_init_find(&it, &reply, "value") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
            const uint8_t *data;
            uint32_t len;
            bson_t v;
            bson_iter_document(&it, &len, &data);
            if (bson_init_static(&v, data, len)) {
                bson_destroy(job);
                bson_copy_to(&v, job);
            }
        } else {
            rc = MD_NOTFOUND;
        }
    }
    bson_destroy(&reply);
    bson_destroy(cmd);
    return rc;
}

int pt_queue_fetch_fifo(md_db *db, bson_t *job, md_error *err)
{
    bson_t *sort = BCON_NEW("createdOn", BCON_INT32(1));
    int rc = fetch(db, sort, job, err);
    bson_destroy(sort);
    return rc;
}

int pt_queue_fetch_priority(md_db *db, bson_t *job, md_error *err)
{
    bson_t *sort = BCON_NEW("priority", BCON_INT32(-1), "createdOn", BCON_INT32(1));
    int rc = fetch(db, sort, job, err);
    bson_destroy(sort);
    return rc;
}

int pt_queue_finish(md_db *db, const bson_value_t *id, md_error *err)
{
    bson_t cmd = BSON_INITIALIZER, updates, u0, q, reply;
    BSON_APPEND_UTF8(&cmd, "update", QUEUE_COLL);
    BSON_APPEND_ARRAY_BEGIN(&cmd, "updates", &updates);
    BSON_APPEND_DOCUMENT_BEGIN(&updates, "0", &u0);
    BSON_APPEND_DOCUMENT_BEGIN(&u0, "q", &q);
    BSON_APPEND_VALUE(&q, "_id", id);
    bson_append_document_end(&u0, &q);
    BCON_APPEND(&u0, "u", "{", "$set", "{", "endTime", BCON_DATE_TIME(pt_now_ms()), "}", "}");
    bson_append_document_end(&updates, &u0);
    bson_append_array_end(&cmd, &updates);
    bson_iter_t it;
    int rc = pt_write(db, &cmd, &reply, err);
    if (!rc) {
        if (!bson_iter_init_find(&it, &reply, "n") || bson_iter_as_int64(&it) != 1)
            rc = MD_NOTFOUND;
        bson_destroy(&reply);
    }
    bson_destroy(&cmd);
    return rc;
}

/* ---- the scenario: queue_fifo_simulation.js ------------------------------- */

/*
 * The simulator's Queue (lib/common/schemas/queue/queue.js as of the
 * book's runs, March 2015) is not the chapter's code, and the book's table
 * is the simulator's:
 *
 *   indexes   createOptimalIndexes: {startTime: 1}, {createdOn: 1},
 *             {priority: -1, createdOn: 1}, {jobId: 1}.  None holds both
 *             startTime and createdOn, so a FIFO fetch either sorts every
 *             waiting job or walks createdOn past every job already taken:
 *             work that grows as the run goes on, done inside the
 *             findAndModify -- on mmapv1 under the collection's write lock.
 *   publish   insert({startTime: Date(0), endTime: Date(0), jobId:
 *             ObjectId("000000000000"), createdOn: new Date(), priority,
 *             payload: {}}): Date(0) instead of null "so documents cannot
 *             grow"; every job has the same jobId.
 *   fetch     findOneAndUpdate({startTime: Date(0)}, {$set: {startTime: new
 *             Date()}}, {sort: {createdOn: 1}}), returning the job as it was.
 *   done      updateOne({jobId: <the fetched job>}, {$set: {endTime: new
 *             Date()}}): Work was handed the whole document as its jobId, so
 *             the update matches nothing (its error went unread); it is
 *             timed with the fetch, as there.
 *
 * An empty queue made the simulator's fetch fail and log no time; here it
 * is counted (pt_queue_empty_fetches) and timed, which can only happen
 * before the first publish.
 */
#define SIM_JOB_ID "000000000000"

static int sim_create_indexes(md_db *db, md_error *err)
{
    bson_t *keys[4] = {
        BCON_NEW("startTime", BCON_INT32(1)),
        BCON_NEW("createdOn", BCON_INT32(1)),
        BCON_NEW("priority", BCON_INT32(-1), "createdOn", BCON_INT32(1)),
        BCON_NEW("jobId", BCON_INT32(1)),
    };
    int rc = 0;
    for (int i = 0; i < 4; i++) {
        if (!rc)
            rc = pt_ensure_index(db, QUEUE_COLL, keys[i], NULL, err);
        bson_destroy(keys[i]);
    }
    return rc;
}

static int sim_publish(md_db *db, int32_t priority, bson_oid_t *id_out, md_error *err)
{
    bson_oid_t job_id;
    bson_oid_init_from_data(&job_id, (const uint8_t *)SIM_JOB_ID);
    bson_oid_init(id_out, NULL);
    bson_t *cmd = BCON_NEW("insert", BCON_UTF8(QUEUE_COLL), "documents", "[", "{", "_id",
                           BCON_OID(id_out), "startTime", BCON_DATE_TIME(0), "endTime",
                           BCON_DATE_TIME(0), "jobId", BCON_OID(&job_id), "createdOn",
                           BCON_DATE_TIME(pt_now_ms()), "priority", BCON_INT32(priority),
                           "payload", "{", "}", "}", "]");
    int rc = pt_write(db, cmd, NULL, err);
    bson_destroy(cmd);
    return rc;
}

/* fetchFIFO, then done(); *id gets the job's _id.  MD_NOTFOUND: empty. */
static int sim_fetch_and_done(md_db *db, bson_oid_t *id, md_error *err)
{
    bson_t *cmd = BCON_NEW("findAndModify", BCON_UTF8(QUEUE_COLL), "query", "{", "startTime",
                           BCON_DATE_TIME(0), "}", "sort", "{", "createdOn", BCON_INT32(1), "}",
                           "update", "{", "$set", "{", "startTime",
                           BCON_DATE_TIME(pt_now_ms()), "}", "}");
    bson_t reply, job;
    bson_iter_t it;
    int rc = md_db_command(db, cmd, &reply, err);
    bson_destroy(cmd);
    if (!rc && (!bson_iter_init_find(&it, &reply, "value") || !BSON_ITER_HOLDS_DOCUMENT(&it)))
        rc = MD_NOTFOUND;
    if (!rc) {
        const uint8_t *data;
        uint32_t len;
        bson_iter_t id_it;
        bson_iter_document(&it, &len, &data);
        if (!bson_init_static(&job, data, len) || !bson_iter_init_find(&id_it, &job, "_id") ||
            !BSON_ITER_HOLDS_OID(&id_it))
            rc = md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR,
                              "fetched job has no ObjectId");
        else
            bson_oid_copy(bson_iter_oid(&id_it), id);
    }
    if (!rc) {
        /* done(): {jobId: <the job>} matches no job */
        bson_t *upd = BCON_NEW("update", BCON_UTF8(QUEUE_COLL), "updates", "[", "{", "q", "{",
                               "jobId", BCON_DOCUMENT(&job), "}", "u", "{", "$set", "{",
                               "endTime", BCON_DATE_TIME(pt_now_ms()), "}", "}", "}", "]");
        rc = pt_write(db, upd, NULL, err);
        bson_destroy(upd);
    }
    bson_destroy(&reply);
    return rc;
}

/* The ids published and fetched during a run, for the check. */
typedef struct queue_state {
    pthread_mutex_t lock;
    bson_oid_t *published, *fetched;
    size_t npub, cap_pub, nfetched, cap_fetched;
    atomic_llong empty_fetches; /* fetchers that found the queue empty */
} queue_state;

static int oid_push(queue_state *s, bson_oid_t **arr, size_t *n, size_t *cap,
                    const bson_oid_t *oid, md_error *err)
{
    int rc = 0;
    pthread_mutex_lock(&s->lock);
    if (*n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 1024;
        bson_oid_t *p = realloc(*arr, ncap * sizeof *p);
        if (!p)
            rc = md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
        else
            *arr = p, *cap = ncap;
    }
    if (!rc)
        bson_oid_copy(oid, &(*arr)[(*n)++]);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* setup: the simulator drops the database and creates its indexes; the
 * queue starts empty (pt_setup_args.quick changes nothing: the scale of
 * this scenario is the number of users). */
static int queue_setup(md_db *db, const pt_setup_args *a, void **state, md_error *err)
{
    (void)a;
    *state = NULL;
    int rc = pt_drop_if_exists(db, QUEUE_COLL, err);
    if (!rc)
        rc = sim_create_indexes(db, err);
    if (rc)
        return rc;
    queue_state *s = calloc(1, sizeof *s);
    if (!s)
        return md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
    pthread_mutex_init(&s->lock, NULL);
    atomic_init(&s->empty_fetches, 0);
    *state = s;
    return 0;
}

static void queue_destroy(void *state)
{
    queue_state *s = state;
    if (!s)
        return;
    pthread_mutex_destroy(&s->lock);
    free(s->published);
    free(s->fetched);
    free(s);
}

/* publish_to_queues: one job, priority Math.round(10 * Math.random()). */
static int queue_run_publish(pt_user *u, md_error *err)
{
    queue_state *s = u->state;
    bson_oid_t oid;
    int32_t priority = (int32_t)pt_rand_below(u, 11);
    int rc = sim_publish(u->db, priority, &oid, err);
    if (!rc)
        rc = oid_push(s, &s->published, &s->npub, &s->cap_pub, &oid, err);
    return rc;
}

/* fetch_from_queue_by_fifo: take the next job and "finish" it. */
static int queue_run_fetch(pt_user *u, md_error *err)
{
    queue_state *s = u->state;
    bson_oid_t oid;
    int rc = sim_fetch_and_done(u->db, &oid, err);
    if (rc == MD_NOTFOUND) {
        atomic_fetch_add(&s->empty_fetches, 1);
        return 0;
    }
    if (!rc)
        rc = oid_push(s, &s->fetched, &s->nfetched, &s->cap_fetched, &oid, err);
    return rc;
}

static int oid_cmp(const void *a, const void *b)
{
    return bson_oid_compare(a, b);
}

/* One stored job against the run's record: published once, and started
 * (startTime past Date(0)) exactly when a fetcher took it; its endTime is
 * still Date(0), as the simulator's done() left it. */
static int check_job(const queue_state *s, const bson_t *doc, bool *seen, md_error *err)
{
    bson_iter_t it;
    char hex[25] = "?";
    if (!bson_iter_init_find(&it, doc, "_id") || !BSON_ITER_HOLDS_OID(&it))
        return md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR, "a job without ObjectId");
    const bson_oid_t *oid = bson_iter_oid(&it);
    bson_oid_to_string(oid, hex);
    const bson_oid_t *p = bsearch(oid, s->published, s->npub, sizeof *oid, oid_cmp);
    if (!p)
        return md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR,
                            "job %s was never published", hex);
    if (seen[p - s->published])
        return md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR, "job %s is stored twice", hex);
    seen[p - s->published] = true;
    bool fetched = bsearch(oid, s->fetched, s->nfetched, sizeof *oid, oid_cmp) != NULL;
    if (!bson_iter_init_find(&it, doc, "startTime") || !BSON_ITER_HOLDS_DATE_TIME(&it))
        return md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR,
                            "job %s has no startTime date", hex);
    bool started = bson_iter_date_time(&it) != 0;
    if (!bson_iter_init_find(&it, doc, "endTime") || !BSON_ITER_HOLDS_DATE_TIME(&it) ||
        bson_iter_date_time(&it) != 0)
        return md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR,
                            "job %s's endTime changed: done() matched it", hex);
    if (fetched && !started)
        return md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR,
                            "job %s was fetched but is not started", hex);
    if (!fetched && started)
        return md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR,
                            "job %s is started but no fetcher got it", hex);
    return 0;
}

static int queue_check(md_db *db, void *state, md_error *err)
{
    queue_state *s = state;
    qsort(s->published, s->npub, sizeof *s->published, oid_cmp);
    qsort(s->fetched, s->nfetched, sizeof *s->fetched, oid_cmp);
    for (size_t i = 1; i < s->nfetched; i++)
        if (bson_oid_equal(&s->fetched[i - 1], &s->fetched[i])) {
            char hex[25];
            bson_oid_to_string(&s->fetched[i], hex);
            return md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR,
                                "job %s was handed to two fetchers", hex);
        }
    bool *seen = calloc(s->npub ? s->npub : 1, sizeof *seen);
    if (!seen)
        return md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
    md_collection *c = md_db_get_collection(db, QUEUE_COLL);
    md_cursor *cur = md_collection_find_with_opts(c, NULL, NULL);
    const bson_t *doc;
    int rc = 0;
    size_t stored = 0;
    while (!rc && md_cursor_next(cur, &doc)) {
        rc = check_job(s, doc, seen, err);
        stored++;
    }
    if (!rc && md_cursor_error(cur, err))
        rc = MD_ERROR;
    for (size_t i = 0; !rc && i < s->npub; i++)
        if (!seen[i]) {
            char hex[25];
            bson_oid_to_string(&s->published[i], hex);
            rc = md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR,
                              "job %s was published and is lost (%zu of %zu stored)", hex,
                              stored, s->npub);
        }
    md_cursor_destroy(cur);
    md_collection_destroy(c);
    free(seen);
    return rc;
}

int64_t pt_queue_empty_fetches(void *state)
{
    queue_state *s = state;
    return s ? (int64_t)atomic_load(&s->empty_fetches) : 0;
}

int64_t pt_queue_jobs_fetched(void *state)
{
    queue_state *s = state;
    if (!s)
        return 0;
    pthread_mutex_lock(&s->lock);
    int64_t n = (int64_t)s->nfetched;
    pthread_mutex_unlock(&s->lock);
    return n;
}

static const pt_scenario queue_fifo = {
    .name = "queue_fifo",
    .title = "Queue Simulation",
    .script = "examples/simulations/queue_fifo_simulation.js",
    .note = "With the simulator's own Queue class: four single-field indexes ({startTime}, "
            "{createdOn}, {priority: -1, createdOn}, {jobId}; none holds both startTime and "
            "createdOn, so each FIFO findAndModify reads the whole backlog), Date(0) for "
            "\"not yet\", one jobId for every job, and a done() that matches nothing. The "
            "chapter's compound indexes and operations are in the library and its tests.",
    .nops = 2,
    .ops = {
        {.name = "publish_to_queues",
         .users = 1000,
         .decides = true,
         .run = queue_run_publish,
         .book_mmap = {52.289, 31.288, 21.479, 48.616, 55.736, 59.138, 0.401, 77.987},
         .book_wt = {31.113, 32.455, 44.732, 51.322, 127.275, 188.452, 0.412, 312.698}},
        {.name = "fetch_from_queue_by_fifo",
         .users = 300,
         .decides = true,
         .run = queue_run_fetch,
         .book_mmap = {52.289, 15195.361, 13526.237, 28049.003, 33552.295, 35403.374, 1.233,
                       37248.023},
         .book_wt = {31.113, 48.493, 718.43, 5.873, 10.658, 29.38, 1.329, 19499.33}},
    },
    .setup = queue_setup,
    .check = queue_check,
    .destroy = queue_destroy,
};

const pt_pattern pt_pattern_queue = {
    .name = "queue",
    .title = "Queue",
    .section = "5.1",
    .book_winner = "btree",
    .book_reason = "document-level locking lets the FIFO readers through; MMAP's collection "
                   "write lock lets the publishers swamp them (fetch mean 15.2 s vs 48 ms); "
                   "WiredTiger is \"somewhat faster\" at a higher CPU cost, copying the "
                   "document on every findAndModify",
    .nscenarios = 1,
    .scenarios = {&queue_fifo},
};
