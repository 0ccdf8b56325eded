/*
 * test_q_threads.c -- many threads on one md_db (q_threads.h has the
 * workloads; tsan_q_threads.c runs them under ThreadSanitizer), and the
 * locking difference between the engines: a reader waits behind a writer's
 * collection lock on mmapv1 and reads past a writer's open transaction on
 * btree.
 */
#include <time.h>
#include <unistd.h>

#include "q_int.h"
#include "q_threads.h"
#include "test_q_util.h"

Test(threads, queue_each_job_taken_once)
{
    tdb t;
    FOR_EACH_ENGINE(t)
    {
        cr_assert_eq(qt_queue(t.db, 2, 8, 150), 0, "queue on %s", t.engine);
    }
}

Test(threads, counters_one_collection)
{
    tdb t;
    FOR_EACH_ENGINE(t)
    {
        cr_assert_eq(qt_counters(t.db, 6, 2, 1, 150), 0, "counters on %s", t.engine);
    }
}

Test(threads, counters_several_collections)
{
    tdb t;
    FOR_EACH_ENGINE(t)
    {
        cr_assert_eq(qt_counters(t.db, 6, 2, 3, 150), 0, "counters on %s", t.engine);
    }
}

Test(threads, mmapv1_database_lock_granularity)
{
    tdb t = {.engine = "mmapv1"};
    md_error err;
    snprintf(t.dir, sizeof t.dir, "/tmp/md_qtest_XXXXXX");
    cr_assert_not_null(mkdtemp(t.dir));
    bson_t *o = BCON_NEW("engine", "mmapv1", "lockGranularity", "database", "mmapv1", "{",
                         "firstFileSize", BCON_INT32(131072), "nsSize", BCON_INT32(65536), "}");
    cr_assert_eq(md_db_open(t.dir, o, &t.db, &err), 0, "%s", err.message);
    bson_destroy(o);
    cr_assert_eq(qt_counters(t.db, 4, 2, 3, 100), 0);
    int rc;
    bson_t *r = t_cmd(&t, &rc, "{\"serverStatus\": 1}");
    cr_assert_str_eq(t_str(r, "lockGranularity"), "database");
    cr_assert_gt(t_i64(r, "locks.Database.acquireCount.W"), 0);
    bson_destroy(r);
    t_close(&t);
}

Test(threads, bad_lock_granularity)
{
    char dir[64] = "/tmp/md_qtest_XXXXXX";
    md_db *db = NULL;
    md_error err;
    cr_assert_not_null(mkdtemp(dir));
    bson_t *o = BCON_NEW("engine", "mmapv1", "lockGranularity", "document");
    cr_assert_eq(md_db_open(dir, o, &db, &err), MD_EINVAL);
    cr_assert_eq(err.code, MD_CODE_BAD_VALUE);
    cr_assert(strstr(err.message, "lockGranularity") != NULL, "%s", err.message);
    bson_destroy(o);
    rmdir(dir);
}

/* ---- a writer holding its transaction open ---------------------------------------- */

typedef struct hold {
    md_db *db;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stage; /* 1: writer holds; 2: release; 3: writer done */
    int reader_done;
    int64_t reader_saw;
} hold;

static void hold_set(hold *h, int *field, int v)
{
    pthread_mutex_lock(&h->mu);
    *field = v;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

static void hold_wait(hold *h, int *field, int v)
{
    pthread_mutex_lock(&h->mu);
    while (*field < v)
        pthread_cond_wait(&h->cv, &h->mu);
    pthread_mutex_unlock(&h->mu);
}

/* What the update path holds while it writes: the database lock shared,
 * the data lock exclusive, an engine transaction with the change made. */
static void *holding_writer(void *p)
{
    hold *h = p;
    eng_txn *txn;
    bson_t *doc = BCON_NEW("_id", BCON_INT32(1), "v", BCON_INT32(2));
    q_db_lock(h->db, Q_MODE_IX);
    q_coll *c = q_coll_find(h->db, "c");
    q_coll_lock(h->db, c, true);
    cr_assert_eq(q_txn_begin(h->db, &txn), 0);
    eng_rid rid = ENG_RID_NONE, nrid;
    eng_rs_cursor *cur;
    const uint8_t *data;
    uint32_t len;
    bool moved;
    cr_assert_eq(eng_rs_cursor_open(c->rs, true, &cur), 0);
    cr_assert_eq(eng_rs_cursor_next(cur, &rid, &data, &len), 0);
    eng_rs_cursor_close(cur);
    cr_assert_eq(eng_rs_update(c->rs, txn, rid, bson_get_data(doc), doc->len, &nrid, &moved,
                               NULL),
                 0);
    hold_set(h, &h->stage, 1);
    hold_wait(h, &h->stage, 2);
    cr_assert_eq(eng_txn_commit(txn, false, NULL), 0);
    q_txn_end(h->db);
    q_coll_unlock(h->db, c);
    q_db_unlock(h->db);
    bson_destroy(doc);
    hold_set(h, &h->stage, 3);
    return NULL;
}

static void *reader(void *p)
{
    hold *h = p;
    bson_t *cmd = BCON_NEW("find", "c", "filter", "{", "_id", BCON_INT32(1), "}");
    bson_t reply;
    md_error err;
    cr_assert_eq(md_db_command(h->db, cmd, &reply, &err), 0, "%s", err.message);
    int64_t v = qt_get_int(&reply, "cursor.firstBatch.0.v");
    bson_destroy(&reply);
    bson_destroy(cmd);
    pthread_mutex_lock(&h->mu);
    h->reader_saw = v;
    h->reader_done = 1;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

/* Wait up to ms for the reader; true if it finished. */
static bool reader_finished(hold *h, int ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&h->mu);
    while (!h->reader_done && pthread_cond_timedwait(&h->cv, &h->mu, &ts) == 0)
        ;
    bool done = h->reader_done;
    pthread_mutex_unlock(&h->mu);
    return done;
}

static void reader_vs_open_writer(const char *engine, bool reader_waits)
{
    tdb t;
    int rc;
    t_open(&t, engine);
    bson_destroy(t_cmd(&t, &rc, "{\"insert\": \"c\", \"documents\": [{\"_id\": 1, \"v\": 1}]}"));
    cr_assert_eq(rc, 0);
    hold h = {.db = t.db, .reader_saw = -1};
    pthread_mutex_init(&h.mu, NULL);
    pthread_cond_init(&h.cv, NULL);
    pthread_t w, r;
    pthread_create(&w, NULL, holding_writer, &h);
    hold_wait(&h, &h.stage, 1);
    pthread_create(&r, NULL, reader, &h);
    if (reader_waits) {
        /* the collection lock is held: the find cannot finish */
        cr_assert(!reader_finished(&h, 300), "%s: the reader did not wait", engine);
        hold_set(&h, &h.stage, 2);
        cr_assert(reader_finished(&h, 10000));
        cr_assert_eq(h.reader_saw, 2, "%s: the reader saw v=%lld", engine,
                     (long long)h.reader_saw);
    } else {
        /* the find runs while the transaction is open and sees the
         * committed version */
        cr_assert(reader_finished(&h, 10000), "%s: the reader waited for the writer", engine);
        cr_assert_eq(h.reader_saw, 1, "%s: the reader saw v=%lld", engine,
                     (long long)h.reader_saw);
        hold_set(&h, &h.stage, 2);
    }
    pthread_join(w, NULL);
    pthread_join(r, NULL);
    pthread_mutex_destroy(&h.mu);
    pthread_cond_destroy(&h.cv);
    t_close(&t);
}

Test(threads, mmapv1_reader_waits_for_writer)
{
    reader_vs_open_writer("mmapv1", true);
}

Test(threads, btree_reader_not_blocked_by_open_transaction)
{
    reader_vs_open_writer("btree", false);
}

Test(threads, lock_and_conflict_stats)
{
    tdb t;
    FOR_EACH_ENGINE(t)
    {
        int rc;
        cr_assert_eq(qt_queue(t.db, 1, 4, 100), 0);
        bson_t *r = t_cmd(&t, &rc, "{\"serverStatus\": 1}");
        cr_assert_gt(t_i64(r, "locks.Database.acquireCount.w"), 100, "%s", t.engine);
        /* mmapv1: collection locks; btree: intents only; ephemeralForTest:
         * the database-wide data lock */
        if (t_is_mmapv1(&t))
            cr_assert_gt(t_i64(r, "locks.Collection.acquireCount.W"), 100);
        else if (strcmp(t.engine, "btree") == 0)
            cr_assert_gt(t_i64(r, "locks.Collection.acquireCount.w"), 100);
        else
            cr_assert_gt(t_i64(r, "locks.Database.acquireCount.W"), 100);
        cr_assert_str_eq(t_str(r, "lockGranularity"),
                         t_is_mmapv1(&t)                      ? "collection"
                         : strcmp(t.engine, "btree") == 0 ? "document"
                                                              : "database");
        cr_assert_geq(t_i64(r, "metrics.operation.writeConflicts"), 0);
        bson_destroy(r);
    }
}

/* A collection scan under a data lock yields every 128 documents (explain
 * shows the yields as saveState / restoreState); with document-level
 * concurrency there is no lock to yield. */
Test(threads, long_scans_yield_their_lock)
{
    tdb t;
    FOR_EACH_ENGINE(t)
    {
        int rc;
        bson_t docs = BSON_INITIALIZER, arr;
        char k[16];
        BSON_APPEND_ARRAY_BEGIN(&docs, "documents", &arr);
        for (int i = 0; i < 1000; i++) {
            snprintf(k, sizeof k, "%d", i);
            bson_t d;
            bson_append_document_begin(&arr, k, -1, &d);
            BSON_APPEND_INT32(&d, "_id", i);
            BSON_APPEND_INT32(&d, "v", i % 7);
            bson_append_document_end(&arr, &d);
        }
        bson_append_array_end(&docs, &arr);
        bson_t *cmd = BCON_NEW("insert", "big");
        bson_concat(cmd, &docs);
        bson_t reply;
        cr_assert_eq(md_db_command(t.db, cmd, &reply, NULL), 0);
        bson_destroy(&reply);
        bson_destroy(cmd);
        bson_destroy(&docs);
        bson_t *r = t_cmd(&t, &rc, "{\"explain\": {\"find\": \"big\", \"filter\": {\"v\": 3}}, "
                                   "\"verbosity\": \"executionStats\"}");
        cr_assert_eq(rc, 0);
        int64_t y = t_i64(r, "executionStats.executionStages.saveState");
        if (strcmp(t.engine, "btree") == 0)
            cr_assert_eq(y, 0, "btree yielded %lld times", (long long)y);
        else
            cr_assert_geq(y, 1000 / 128, "%s yielded %lld times", t.engine, (long long)y);
        cr_assert_eq(t_i64(r, "executionStats.nReturned"), 143);
        bson_destroy(r);
    }
}

/*
 * Updates by _id with more conditions (not IDHACK: a plan, a scan, then the
 * write) on documents that grow by $push and move, while another thread
 * commits to another collection.  mmapv1 lets the two run at once (one
 * lock per collection), and every commit here remaps the private views
 * (debugRemapPrivateViewBytes 1): the scans must still find each document
 * they are about.  Before the remap built the fresh views off to the side,
 * it showed such scans the data files' older bytes for a moment: the
 * Little Book's carts at four times its load lost about 3 adds in 100,000.
 */
#define RM_CARTS 4
#define RM_ADDS 150

typedef struct remap_ctx {
    md_db *db;
    int id;
    bool *stop;
    int misses;
    char first[200];
} remap_ctx;

static void *remap_cart_main(void *arg)
{
    remap_ctx *c = arg;
    if (qt_cmd(c->db,
               qt_json("{\"insert\": \"carts\", \"documents\": [{\"_id\": %d, \"state\": "
                       "\"active\", \"items\": []}]}",
                       c->id),
               NULL) != 0) {
        c->misses++;
        return NULL;
    }
    for (int k = 0; k < RM_ADDS; k++) {
        bson_t reply;
        int rc = qt_cmd(c->db,
                        qt_json("{\"update\": \"carts\", \"updates\": [{\"q\": {\"_id\": %d, "
                                "\"state\": \"active\", \"items.k\": {\"$ne\": %d}}, \"u\": "
                                "{\"$push\": {\"items\": {\"k\": %d, \"pad\": "
                                "\"................................................\"}}}}]}",
                                c->id, k, k),
                        &reply);
        int64_t n = rc == 0 ? qt_get_int(&reply, "n") : -1;
        bson_destroy(&reply);
        if (n != 1 && c->misses++ == 0)
            snprintf(c->first, sizeof c->first, "cart %d: add %d matched %lld", c->id, k,
                     (long long)n);
    }
    return NULL;
}

static void *remap_other_main(void *arg)
{
    remap_ctx *c = arg;
    qt_cmd(c->db, qt_json("{\"insert\": \"other\", \"documents\": [{\"_id\": 0, \"c\": 0}]}"),
           NULL);
    while (!__atomic_load_n(c->stop, __ATOMIC_ACQUIRE))
        if (qt_cmd(c->db,
                   qt_json("{\"update\": \"other\", \"updates\": [{\"q\": {\"_id\": 0}, "
                           "\"u\": {\"$inc\": {\"c\": 1}}}]}"),
                   NULL) != 0)
            c->misses++;
    return NULL;
}

Test(threads, mmapv1_update_finds_moved_documents_while_views_remap)
{
    tdb t = {.engine = "mmapv1"};
    md_error err;
    snprintf(t.dir, sizeof t.dir, "/tmp/md_qtest_XXXXXX");
    cr_assert_not_null(mkdtemp(t.dir));
    bson_t *o = BCON_NEW("engine", "mmapv1", "mmapv1", "{", "firstFileSize", BCON_INT32(1 << 20),
                         "nsSize", BCON_INT32(65536), "journalCommitInterval", BCON_INT32(500),
                         "debugRemapPrivateViewBytes", BCON_INT32(1), "}");
    cr_assert_eq(md_db_open(t.dir, o, &t.db, &err), 0, "%s", err.message);
    bson_destroy(o);
    int rc;
    bson_destroy(t_cmd(&t, &rc, "{\"createIndexes\": \"carts\", \"indexes\": [{\"key\": "
                                "{\"state\": 1}, \"name\": \"state_1\"}]}"));
    cr_assert_eq(rc, 0);
    bool stop = false;
    remap_ctx cc[RM_CARTS], oc = {.db = t.db, .stop = &stop};
    pthread_t th[RM_CARTS], other;
    cr_assert_eq(pthread_create(&other, NULL, remap_other_main, &oc), 0);
    for (int i = 0; i < RM_CARTS; i++) {
        cc[i] = (remap_ctx){.db = t.db, .id = i + 1, .stop = &stop};
        cr_assert_eq(pthread_create(&th[i], NULL, remap_cart_main, &cc[i]), 0);
    }
    int misses = 0;
    const char *first = "";
    for (int i = 0; i < RM_CARTS; i++) {
        pthread_join(th[i], NULL);
        if (cc[i].misses && !misses)
            first = cc[i].first;
        misses += cc[i].misses;
    }
    __atomic_store_n(&stop, true, __ATOMIC_RELEASE);
    pthread_join(other, NULL);
    cr_expect_eq(oc.misses, 0);
    cr_expect_eq(misses, 0, "%d of %d updates missed their cart; first: %s", misses,
                 RM_CARTS * RM_ADDS, first);
    bson_t *r = t_cmd(&t, &rc, "{\"collStats\": \"carts\"}");
    cr_expect_gt(t_i64(r, "count"), 0);
    bson_destroy(r);
    t_close(&t);
}
