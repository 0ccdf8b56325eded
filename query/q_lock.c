/*
 * q_lock.c -- the locks query/ takes, after MongoDB 3.0's lock hierarchy.
 *
 *   database lock  db->db_lock.  md_db_command holds it around every
 *                  command: shared by reads and CRUD writes, exclusive for
 *                  catalog changes (create, drop, index builds, collMod,
 *                  compact, validate, fsync, and a write that creates its
 *                  collection).  Catalog structures (db->colls, q_coll,
 *                  q_index) therefore change only while nobody else runs.
 *   data lock      what guards the documents, by lockGranularity:
 *                    "collection"  q_coll.lock, readers share, writers
 *                                  exclusive (mmapv1's default, as 3.0);
 *                    "database"    db->data_lock, one for all collections
 *                                  (2.6's database lock; the default of
 *                                  ephemeralForTest);
 *                    "document"    none: the engine isolates transactions
 *                                  itself (btree's default, as WiredTiger).
 *                                  The intent is still counted.
 *   txn mutex      db->txn_mu: an engine that is not concurrent runs one
 *                  write transaction at a time, so writers to different
 *                  collections of mmapv1 take turns at commit granularity.
 *
 *   capped writer  q_coll.cap_write_mu: writes to a capped collection take
 *                  turns whatever the granularity (eng.h's capped contract:
 *                  records commit in insertion order).
 *   capped notify  db->cap_mu + cap_cv: awaitData getMores sleep there.
 *
 * Lock order: database lock, data lock, capped writer, txn mutex,
 * engine-internal locks; cap_mu is a leaf (nothing is taken under it).
 * The rwlocks prefer writers, so a stream of readers cannot starve a
 * writer (MongoDB's lock manager queues requests in order).
 *
 * Yielding: a long scan holding a data lock releases and retakes it every
 * 128 documents or 10 ms (internalQueryExecYieldIterations and
 * internalQueryExecYieldPeriodMS), so writers waiting behind a collection
 * scan get in.  Never inside a transaction (the txn mutex would invert the
 * lock order) and never under an exclusive database lock (nobody waits).
 *
 * Each thread remembers what it holds (thread-local), which makes the data
 * lock reentrant and lets the yield find the lock to release.
 */
#include <assert.h>
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#include "q_int.h"

#define Q_YIELD_ITERATIONS 128
#define Q_YIELD_PERIOD_MS 10
#define Q_HELD_MAX 4

typedef struct held_lock {
    pthread_rwlock_t *lock; /* NULL: an intent only */
    q_lockstat *st;
    int mode;
    int depth;
} held_lock;

static __thread struct {
    const md_db *db; /* whose database lock this thread holds */
    bool db_x;
    bool in_txn;
    int nheld;
    held_lock held[Q_HELD_MAX];
} tls;

/* Take l in mode (S or X), counting the acquisition and any wait. */
static void acquire(pthread_rwlock_t *l, int mode, q_lockstat *st)
{
    bool x = mode == Q_MODE_X;
    Q_COUNT(st->acquire[mode], 1);
    if ((x ? pthread_rwlock_trywrlock(l) : pthread_rwlock_tryrdlock(l)) == 0)
        return;
    int64_t t0 = eng_now_us();
    if (x)
        pthread_rwlock_wrlock(l);
    else
        pthread_rwlock_rdlock(l);
    Q_COUNT(st->waits[mode], 1);
    Q_COUNT(st->wait_us[mode], eng_now_us() - t0);
}

const char *q_gran_name(int gran)
{
    return gran == Q_GRAN_DOCUMENT ? "document"
           : gran == Q_GRAN_COLLECTION ? "collection"
                                       : "database";
}

int q_lock_init(md_db *db, const bson_t *opts, md_error *err)
{
    bson_iter_t it;
    db->gran = db->ops->concurrent        ? Q_GRAN_DOCUMENT
               : db->ops->collection_lock ? Q_GRAN_COLLECTION
                                          : Q_GRAN_DATABASE;
    if (opts && bson_iter_init_find(&it, opts, "lockGranularity")) {
        const char *v = BSON_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, NULL) : "";
        if (strcmp(v, "database") == 0)
            db->gran = Q_GRAN_DATABASE;
        else if (strcmp(v, "collection") == 0 && db->ops->collection_lock)
            db->gran = Q_GRAN_COLLECTION;
        else if (strcmp(v, "document") == 0 && db->ops->concurrent)
            db->gran = Q_GRAN_DOCUMENT;
        else
            return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                         "lockGranularity '%s' is not available on the %s engine "
                         "(database%s)",
                         v, db->ops->name,
                         db->ops->concurrent        ? ", document"
                         : db->ops->collection_lock ? ", collection"
                                                    : "");
    }
    eng_rwlock_init(&db->db_lock);
    eng_rwlock_init(&db->data_lock);
    pthread_mutex_init(&db->txn_mu, NULL);
    pthread_mutex_init(&db->cur_mu, NULL);
    pthread_mutex_init(&db->fail_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&db->cap_mu, NULL);
    pthread_cond_init(&db->cap_cv, &ca);
    pthread_condattr_destroy(&ca);
    return 0;
}

void q_lock_destroy(md_db *db)
{
    pthread_rwlock_destroy(&db->db_lock);
    pthread_rwlock_destroy(&db->data_lock);
    pthread_mutex_destroy(&db->txn_mu);
    pthread_mutex_destroy(&db->cur_mu);
    pthread_mutex_destroy(&db->fail_mu);
    pthread_mutex_destroy(&db->cap_mu);
    pthread_cond_destroy(&db->cap_cv);
}

/* ---- the database lock -------------------------------------------------------- */

void q_db_lock(md_db *db, int mode)
{
    acquire(&db->db_lock, mode, &db->st_db);
    tls.db = db;
    tls.db_x = mode == Q_MODE_X;
}

void q_db_unlock(md_db *db)
{
    tls.db = NULL;
    tls.db_x = false;
    pthread_rwlock_unlock(&db->db_lock);
}

bool q_db_locked_x(const md_db *db)
{
    return tls.db == db && tls.db_x;
}

/* ---- data locks ---------------------------------------------------------------- */

void q_coll_lock(md_db *db, q_coll *c, bool write)
{
    pthread_rwlock_t *l = NULL;
    q_lockstat *st = &db->st_coll;
    int mode = write ? Q_MODE_X : Q_MODE_S;
    if (!c)
        return;
    if (db->gran == Q_GRAN_COLLECTION) {
        l = &c->lock;
    } else if (db->gran == Q_GRAN_DATABASE) {
        l = &db->data_lock;
        st = &db->st_db;
    } else {
        mode = write ? Q_MODE_IX : Q_MODE_IS;
    }
    for (int i = 0; l && i < tls.nheld; i++)
        if (tls.held[i].lock == l) {
            /* reentrant; S cannot become X without a deadlock */
            assert(!write || tls.held[i].mode == Q_MODE_X);
            tls.held[i].depth++;
            return;
        }
    assert(tls.nheld < Q_HELD_MAX);
    if (l)
        acquire(l, mode, st);
    else
        Q_COUNT(st->acquire[mode], 1);
    tls.held[tls.nheld++] = (held_lock){l, st, mode, 1};
}

void q_coll_unlock(md_db *db, q_coll *c)
{
    if (!c || tls.nheld == 0)
        return;
    pthread_rwlock_t *l = db->gran == Q_GRAN_COLLECTION ? &c->lock
                          : db->gran == Q_GRAN_DATABASE ? &db->data_lock
                                                        : NULL;
    for (int i = tls.nheld; i-- > 0;)
        if (tls.held[i].lock == l) {
            if (--tls.held[i].depth > 0)
                return;
            tls.held[i] = tls.held[--tls.nheld];
            if (l)
                pthread_rwlock_unlock(l);
            return;
        }
}

bool q_lock_should_yield(md_db *db, q_yield *y)
{
    if (db->gran == Q_GRAN_DOCUMENT || tls.in_txn || tls.db_x || tls.nheld == 0)
        return false;
    if (++y->since < Q_YIELD_ITERATIONS) {
        if (y->last_ms == 0)
            y->last_ms = q_now_ms();
        if ((y->since & 15) != 0 || q_now_ms() - y->last_ms < Q_YIELD_PERIOD_MS)
            return false;
    }
    y->since = 0;
    y->last_ms = q_now_ms();
    y->yields++;
    return true;
}

void q_lock_yield(md_db *db)
{
    for (int i = 0; i < tls.nheld; i++)
        if (tls.held[i].lock)
            pthread_rwlock_unlock(tls.held[i].lock);
    sched_yield();
    for (int i = 0; i < tls.nheld; i++)
        if (tls.held[i].lock)
            acquire(tls.held[i].lock, tls.held[i].mode, tls.held[i].st);
}

/* ---- transactions ---------------------------------------------------------------- */

int q_txn_begin(md_db *db, eng_txn **t)
{
    bool serial = !db->ops->concurrent && !tls.db_x;
    if (serial)
        pthread_mutex_lock(&db->txn_mu);
    int rc = eng_txn_begin(db->eng, t);
    if (rc) {
        if (serial)
            pthread_mutex_unlock(&db->txn_mu);
        return rc;
    }
    tls.in_txn = true;
    return 0;
}

void q_txn_end(md_db *db)
{
    tls.in_txn = false;
    if (!db->ops->concurrent && !tls.db_x)
        pthread_mutex_unlock(&db->txn_mu);
}

/* MongoDB's WriteConflictException::logAndBackoff: retry at once for the
 * first attempts (a yield here), then sleep 1 ms, 5 ms, and from the 100th
 * attempt on 10 ms. */
void q_write_conflict(md_db *db, int attempt, md_error *err)
{
    md_error_clear(err);
    Q_COUNT(db->write_conflicts, 1);
    if (attempt < 4) {
        sched_yield();
        return;
    }
    int ms = attempt < 10 ? 1 : attempt < 100 ? 5 : 10;
    struct timespec ts = {0, ms * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* ---- serverStatus ------------------------------------------------------------------ */

static void append_modes(bson_t *b, const char *key, const int64_t *v)
{
    static const char *const names[Q_NMODES] = {"r", "w", "R", "W"};
    bson_t sub;
    BSON_APPEND_DOCUMENT_BEGIN(b, key, &sub);
    for (int m = 0; m < Q_NMODES; m++) {
        int64_t n = __atomic_load_n(&v[m], __ATOMIC_RELAXED);
        if (n)
            BSON_APPEND_INT64(&sub, names[m], n);
    }
    bson_append_document_end(b, &sub);
}

static void append_level(bson_t *locks, const char *name, const q_lockstat *st)
{
    bson_t lv;
    BSON_APPEND_DOCUMENT_BEGIN(locks, name, &lv);
    append_modes(&lv, "acquireCount", st->acquire);
    append_modes(&lv, "acquireWaitCount", st->waits);
    append_modes(&lv, "timeAcquiringMicros", st->wait_us);
    bson_append_document_end(locks, &lv);
}

/* locks: {Database: {...}, Collection: {...}} as MongoDB 3.0 reports them;
 * lockGranularity and the write-conflict counters beside it. */
void q_lock_append_status(md_db *db, bson_t *status)
{
    bson_t locks;
    BSON_APPEND_DOCUMENT_BEGIN(status, "locks", &locks);
    append_level(&locks, "Database", &db->st_db);
    append_level(&locks, "Collection", &db->st_coll);
    bson_append_document_end(status, &locks);
    BSON_APPEND_UTF8(status, "lockGranularity", q_gran_name(db->gran));
}
