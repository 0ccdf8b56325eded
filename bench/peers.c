/*
 * peers.c -- minidoc's two engines against the real WiredTiger and LMDB,
 * the same workloads in one process run.
 *
 * Systems (each in a fresh directory under $TMPDIR or /tmp):
 *
 *   mmapv1      minidoc, engine mmapv1, through the public API
 *   btree       minidoc, engine btree, through the public API
 *   wiredtiger  libwiredtiger 3.2.1 with its snappy extension
 *   lmdb        liblmdb
 *
 * The peers are laid out as MongoDB lays a collection out on a key-value
 * engine: per collection a record table keyed by a 64-bit RecordId (1, 2,
 * 3, ... in insert order) whose value is the BSON document, and a unique _id
 * index table mapping the encoded _id to the RecordId.  Every operation is
 * one transaction (WiredTiger: begin_transaction/commit_transaction on one
 * session with cached cursors, as MongoDB's session cache keeps them; LMDB:
 * one write transaction, or a reset/renewed read-only one for reads):
 *
 *   insert  record put, then index insert that fails on a duplicate _id
 *   get     index lookup, record read, one field of the BSON read
 *   update  index lookup, record read, the BSON modified with libbson on a
 *           copy (bson_iter_find_descendant + bson_iter_overwrite_int32 for
 *           $inc; a scan for the field, then bson_copy_to + append for $set
 *           of a new field), the whole value written back
 *
 * _id keys on the peers: a type byte, then a memcmp-ordered value, the shape
 * of MongoDB's KeyString (not its exact bytes): int64 _id = 0x12 + 8 bytes
 * big-endian with the sign bit flipped; string _id = 0x02 + the bytes + 0x00.
 *
 * minidoc does what a user of its API does: md_collection_insert_one per
 * document, md_collection_find_with_opts({_id: X}, {limit: 1}) plus
 * md_cursor_next for a get, md_collection_update_one({_id: X}, {$inc|$set})
 * for an update.  So minidoc also pays for its command layer (building and
 * parsing the command document, the plan, the reply), which the peers,
 * being bare key-value stores, do not have: that is the comparison MongoDB
 * users make, and the ratios below include it.
 *
 * Workloads (a fixed-seed xorshift generator; every system sees the same
 * sequence):
 *
 *   insert    D documents of about 300 bytes, _id int64 0..D-1, one per op
 *   get       random lookups by _id
 *   inc       random {$inc: {n: 1}} (an int32)
 *   grow      random {$set: {gK: <16-byte string>}}, K the op number: a new
 *             field appended
 *   mms-flat  {$inc: {daily: 1, "hourly.H": 1, "minute.M": 1}} on random
 *             preallocated day documents (_id "20101010/metric-NNNN") whose
 *             minute field holds 1440 counters "0".."1439" (13.6 KB each)
 *   mms-hier  {$inc: {daily: 1, "hourly.H": 1, "minute.H.M": 1}} on day
 *             documents whose minute field holds 24 hours x 60 minutes
 *             (11.8 KB; the MMS schemas of "MongoDB Schema Design at Scale")
 *
 * All systems of a pair are open at once.  Each workload is cut into
 * --rounds slices (50) and the systems take turns slice by slice, the
 * first one changing each round, so that load from elsewhere on the machine
 * falls on all of them alike; a workload's time is the sum of its slices.
 * The day documents are inserted before the timed mms passes (not timed).
 * After the passes every system is scanned (not timed) and checked: the
 * document counts, the sum of n, the number of grown fields, the daily and
 * minute totals must all equal what the operations did.
 *
 * Durability pairs, printed at the start of each:
 *
 *   nojournal  mmapv1 {journal: false, syncdelay: 60}; btree {log: false,
 *              checkpointIntervalSecs: 60}; wiredtiger log=(enabled=false),
 *              checkpoint=(wait=60); lmdb MDB_NOSYNC with mdb_env_sync every
 *              60 s.  Durable as of the last flush or checkpoint.
 *   journal    mmapv1 {journal: true, journalCommitInterval: I}; btree
 *              {log: true, commitIntervalMs: I}; wiredtiger
 *              log=(enabled=true,compressor=snappy) and
 *              transaction_sync=(enabled=false), plus a thread calling
 *              session->log_flush("sync=on") every I ms (MongoDB's journal
 *              flusher; WiredTiger 3.2 has none of its own); lmdb, which has
 *              no log, MDB_NOSYNC plus a thread calling mdb_env_sync(force)
 *              every I ms.  Durable within I ms (default 100).
 *
 * Output: per pair and workload one line per system
 *   `name system ops seconds ops_per_s`, then the ratios of each minidoc
 * engine to each peer (ops_per_s over ops_per_s), then the speed targets.
 * At the end, machine-readable lines
 *   `peers WORKLOAD SYSTEM ops=N seconds=X ops_per_s=X`
 * for the journal pair (MongoDB's default settings) when it ran, else for
 * the nojournal pair; the other pair's lines start with `peers-nojournal`.
 *
 *   build/bench/peers [--quick] [--docs N] [--ops N] [--mms-docs N]
 *                     [--pair journal|nojournal|both] [--cache MB]
 *                     [--interval MS] [--rounds N] [--lmdb-writemap]
 *                     [--systems mmapv1,btree,wiredtiger,lmdb]
 *                     [--workloads insert,get,inc,grow,mms-flat,mms-hier]
 *
 * Defaults: 100000 documents, 100000 operations per workload, 100 day
 * documents, both pairs, cache 256 MB (minidoc btree cacheSizeMB and
 * WiredTiger cache_size), commit interval 100 ms.  --quick: 20000 documents
 * and operations, both pairs (about 15 s on an idle 2-core machine); the
 * journal pair runs first, and if it took more than 27 s (a busy machine)
 * the nojournal pair is skipped, and the output says so, to stay within
 * 60 s.
 * --lmdb-writemap opens LMDB with MDB_WRITEMAP too (faster writes; not the
 * default).  --systems and --workloads narrow a run, for profiling (insert
 * always runs).  The snappy extension is looked for at $PEERS_WT_SNAPPY,
 * then WT_SNAPPY_PATH (compile-time, default
 * /usr/lib/x86_64-linux-gnu/libwiredtiger_snappy.so); without it the run
 * stops with a clear message.
 */
#include <errno.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <wiredtiger.h>

#include "minidoc.h"

#define BENCH_NAME "peers"
#include "bench.h"
#include "peers_doc.h"

/* --quick: the second pair runs only if the first took at most this long */
#define QUICK_PAIR_BUDGET 27

#ifndef WT_SNAPPY_PATH
#define WT_SNAPPY_PATH "/usr/lib/x86_64-linux-gnu/libwiredtiger_snappy.so"
#endif

/* ---- settings, workloads, results ------------------------------------- */

enum { SYS_MMAPV1, SYS_BTREE, SYS_WT, SYS_LMDB, NSYS };
static const char *const sys_names[NSYS] = {"mmapv1", "btree", "wiredtiger", "lmdb"};

enum { W_INSERT, W_GET, W_INC, W_GROW, W_FLAT, W_HIER, NWORK };
static const char *const work_names[NWORK] = {"insert", "get",      "inc",
                                              "grow",   "mms-flat", "mms-hier"};

enum { C_MAIN, C_FLAT, C_HIER, NCOLL };
static const char *const coll_names[NCOLL] = {"c", "flat", "hier"};

typedef struct settings {
    int docs, ops, mms_docs, cache_mb, interval_ms;
    int journal; /* 1: the journal/log pair, 0: the no-journal pair */
    int rounds;  /* slices per workload; the systems take turns */
    int lmdb_writemap;
    int run[NWORK]; /* workloads to run (insert always runs) */
    const char *snappy;
} settings;

/* For minidoc's rows, the odd rounds run with md_engine_timing on:
 * acc_ops are those rounds' operations, call_ns the time inside the
 * minidoc calls (the benchmark's own document building left out), eng_ns
 * the engine's part of it.  Rates come from the even rounds alone, for
 * every system: the timers' own cost (four clock reads per engine call and
 * two per operation) stays out of them.  `ops` and `secs` are the even
 * rounds'; with one round, that is all of them. */
typedef struct result {
    int ran;
    long ops;
    double secs;
    long acc_ops;
    int64_t call_ns, eng_ns;
} result;


/* ---- documents and operations ---------------------------------------- */

/* An _id: int64 for the main collection, a string for the day documents. */
typedef struct key {
    int is_str;
    int64_t n;
    char s[32];
} key;

static void key_append(bson_t *b, const key *k)
{
    if (k->is_str)
        BSON_APPEND_UTF8(b, "_id", k->s);
    else
        BSON_APPEND_INT64(b, "_id", k->n);
}

/* The peers' index key (see the header comment). */
static size_t key_encode(const key *k, uint8_t *out)
{
    if (k->is_str) {
        size_t l = strlen(k->s);
        out[0] = BSON_TYPE_UTF8;
        memcpy(out + 1, k->s, l + 1);
        return l + 2;
    }
    uint64_t v = (uint64_t)k->n ^ (1ull << 63);
    out[0] = BSON_TYPE_INT64;
    for (int i = 0; i < 8; i++)
        out[1 + i] = (uint8_t)(v >> (56 - 8 * i));
    return 9;
}

static int key_from_doc(const bson_t *doc, key *k)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, doc, "_id"))
        return -1;
    memset(k, 0, sizeof *k);
    if (BSON_ITER_HOLDS_UTF8(&it)) {
        k->is_str = 1;
        snprintf(k->s, sizeof k->s, "%s", bson_iter_utf8(&it, NULL));
    } else if (BSON_ITER_HOLDS_INT64(&it)) {
        k->n = bson_iter_int64(&it);
    } else {
        return -1;
    }
    return 0;
}

static void main_key(key *k, int64_t i)
{
    memset(k, 0, sizeof *k);
    k->n = i;
}

static void day_key(key *k, int i)
{
    memset(k, 0, sizeof *k);
    k->is_str = 1;
    snprintf(k->s, sizeof k->s, "20101010/metric-%04d", i);
}

/* A preallocated MMS day document: daily, 24 hourly counters, and 1440
 * minute counters, flat ("minute.1439") or per hour ("minute.23.59"). */
static void make_day(bson_t *d, int i, int hier)
{
    key k;
    char metric[32], num[8];
    bson_t meta, hours, mins, hour;
    day_key(&k, i);
    snprintf(metric, sizeof metric, "metric-%04d", i);
    bson_init(d);
    key_append(d, &k);
    BSON_APPEND_DOCUMENT_BEGIN(d, "metadata", &meta);
    BSON_APPEND_DATE_TIME(&meta, "date", 1286668800000LL);
    BSON_APPEND_UTF8(&meta, "metric", metric);
    bson_append_document_end(d, &meta);
    BSON_APPEND_INT32(d, "daily", 0);
    BSON_APPEND_DOCUMENT_BEGIN(d, "hourly", &hours);
    for (int h = 0; h < 24; h++) {
        snprintf(num, sizeof num, "%d", h);
        BSON_APPEND_INT32(&hours, num, 0);
    }
    bson_append_document_end(d, &hours);
    BSON_APPEND_DOCUMENT_BEGIN(d, "minute", &mins);
    if (hier) {
        for (int h = 0; h < 24; h++) {
            snprintf(num, sizeof num, "%d", h);
            BSON_APPEND_DOCUMENT_BEGIN(&mins, num, &hour);
            for (int m = 0; m < 60; m++) {
                char mk[8];
                snprintf(mk, sizeof mk, "%d", m);
                BSON_APPEND_INT32(&hour, mk, 0);
            }
            bson_append_document_end(&mins, &hour);
        }
    } else {
        for (int m = 0; m < 1440; m++) {
            snprintf(num, sizeof num, "%d", m);
            BSON_APPEND_INT32(&mins, num, 0);
        }
    }
    bson_append_document_end(d, &mins);
}

/* One update: $inc by 1 of up to 3 int32 paths, or $set of a new field. */
typedef struct upd {
    int npaths;
    char paths[3][24];
    const char *set_field; /* non-NULL: $set {set_field: GROW_VALUE} */
    char field[24];
} upd;

#define GROW_VALUE "grown-0123456789"

static void upd_to_bson(const upd *u, bson_t *b)
{
    bson_t sub;
    bson_init(b);
    if (u->set_field) {
        BSON_APPEND_DOCUMENT_BEGIN(b, "$set", &sub);
        BSON_APPEND_UTF8(&sub, u->set_field, GROW_VALUE);
    } else {
        BSON_APPEND_DOCUMENT_BEGIN(b, "$inc", &sub);
        for (int i = 0; i < u->npaths; i++)
            BSON_APPEND_INT32(&sub, u->paths[i], 1);
    }
    bson_append_document_end(b, &sub);
}

/* The peers' side of an update: modify the BSON in buf (len bytes, cap
 * bytes allocated) as MongoDB's update would; returns the new length. */
static uint32_t peer_modify(const upd *u, uint8_t **buf, uint32_t len, uint32_t *cap)
{
    bson_t doc;
    bson_iter_t it, f;
    if (!bson_init_static(&doc, *buf, len))
        fail("peer update: bad BSON");
    if (u->set_field) {
        if (bson_iter_init_find(&it, &doc, u->set_field))
            fail("peer update: %s exists", u->set_field);
        bson_t nd;
        bson_copy_to(&doc, &nd);
        BSON_APPEND_UTF8(&nd, u->set_field, GROW_VALUE);
        if (nd.len > *cap) {
            *cap = nd.len * 2;
            *buf = realloc(*buf, *cap);
            if (!*buf)
                fail("out of memory");
        }
        memcpy(*buf, bson_get_data(&nd), nd.len);
        len = nd.len;
        bson_destroy(&nd);
        return len;
    }
    for (int i = 0; i < u->npaths; i++) {
        if (!bson_iter_init(&it, &doc) || !bson_iter_find_descendant(&it, u->paths[i], &f) ||
            !BSON_ITER_HOLDS_INT32(&f))
            fail("peer update: no int32 at %s", u->paths[i]);
        bson_iter_overwrite_int32(&f, bson_iter_int32(&f) + 1);
    }
    return len;
}

/* ---- verification (not timed) ---------------------------------------- */

typedef struct tally {
    long docs;
    int64_t sum_n, grown, daily, minutes;
} tally;

static int64_t sum_int32s(bson_iter_t *it)
{
    int64_t s = 0;
    bson_iter_t sub;
    while (bson_iter_next(it)) {
        if (BSON_ITER_HOLDS_INT32(it))
            s += bson_iter_int32(it);
        else if (BSON_ITER_HOLDS_DOCUMENT(it) && bson_iter_recurse(it, &sub))
            s += sum_int32s(&sub);
    }
    return s;
}

static void tally_doc(tally *t, const uint8_t *data, size_t len)
{
    bson_t doc;
    bson_iter_t it, sub;
    if (!bson_init_static(&doc, data, len) || !bson_iter_init(&it, &doc))
        fail("verify: bad BSON");
    t->docs++;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "n") == 0)
            t->sum_n += bson_iter_as_int64(&it);
        else if (k[0] == 'g' && k[1] >= '0' && k[1] <= '9')
            t->grown++;
        else if (strcmp(k, "daily") == 0)
            t->daily += bson_iter_as_int64(&it);
        else if (strcmp(k, "minute") == 0 && bson_iter_recurse(&it, &sub))
            t->minutes += sum_int32s(&sub);
    }
}

/* ---- the systems ------------------------------------------------------ */

typedef struct sysops {
    void *(*open)(const char *dir, const settings *s);
    void (*close)(void *h);
    void (*insert)(void *h, int coll, const bson_t *doc);
    void (*get)(void *h, int coll, const key *k);
    void (*update)(void *h, int coll, const key *k, const upd *u);
    void (*scan)(void *h, int coll, tally *t);
    const char *(*describe)(const settings *s, char *buf, size_t n);
} sysops;

/* A background thread calling fn(arg, 1) every interval_ms: MongoDB's
 * journal flusher for WiredTiger, the periodic mdb_env_sync for LMDB
 * (minidoc's engines have their own commit threads). */
typedef struct flusher {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop, interval_ms;
    long flushes;
    void (*fn)(void *arg, int phase); /* phase 0: start, 1: flush, 2: end */
    void *arg;
} flusher;

static void *flusher_main(void *p)
{
    flusher *f = p;
    f->fn(f->arg, 0);
    pthread_mutex_lock(&f->mu);
    while (!f->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += (long)(f->interval_ms % 1000) * 1000000L;
        ts.tv_sec += f->interval_ms / 1000 + ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&f->cv, &f->mu, &ts);
        if (f->stop)
            break;
        pthread_mutex_unlock(&f->mu);
        f->fn(f->arg, 1);
        f->flushes++;
        pthread_mutex_lock(&f->mu);
    }
    pthread_mutex_unlock(&f->mu);
    f->fn(f->arg, 2);
    return NULL;
}

static void flusher_start(flusher *f, int interval_ms, void (*fn)(void *, int), void *arg)
{
    memset(f, 0, sizeof *f);
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    f->interval_ms = interval_ms;
    f->fn = fn;
    f->arg = arg;
    if (pthread_create(&f->thread, NULL, flusher_main, f) != 0)
        fail("pthread_create failed");
}

static void flusher_stop(flusher *f)
{
    pthread_mutex_lock(&f->mu);
    f->stop = 1;
    pthread_cond_signal(&f->cv);
    pthread_mutex_unlock(&f->mu);
    pthread_join(f->thread, NULL);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
}

/* ---- minidoc (both engines) ------------------------------------------- */

typedef struct mds_sys {
    md_db *db;
    md_collection *c[NCOLL];
} mds_sys;

/* The accounting rounds (see run_pair) time each minidoc call: the
 * "outside the engine" column is that time less the engine's. */
static bool acc_on;
static int64_t acc_call_ns;

static int64_t ns_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void mds_die(const char *what, const md_error *err)
{
    fail("minidoc: %s: %s (code %d)", what, err->message, err->code);
}

static void *mds_open_engine(const char *dir, const settings *s, int btree)
{
    mds_sys *m = calloc(1, sizeof *m);
    md_error err;
    bson_t *opts;
    if (btree)
        opts = BCON_NEW("engine", BCON_UTF8("btree"), "btree", "{", "log",
                        BCON_BOOL(s->journal), "commitIntervalMs", BCON_INT32(s->interval_ms),
                        "checkpointIntervalSecs", BCON_INT32(60), "blockCompressor",
                        BCON_UTF8("snappy"), "cacheSizeMB", BCON_INT32(s->cache_mb), "}");
    else
        opts = BCON_NEW("engine", BCON_UTF8("mmapv1"), "mmapv1", "{", "journal",
                        BCON_BOOL(s->journal), "journalCommitInterval",
                        BCON_INT32(s->interval_ms), "syncdelay", BCON_INT32(60), "}");
    if (md_db_open(dir, opts, &m->db, &err) != 0)
        mds_die("open", &err);
    bson_destroy(opts);
    /* the collections are created here, untimed, as the peers' tables are */
    for (int c = 0; c < NCOLL; c++) {
        bson_t *cmd = BCON_NEW("create", BCON_UTF8(coll_names[c])), reply;
        if (md_db_command(m->db, cmd, &reply, &err) != 0)
            mds_die("create", &err);
        bson_destroy(&reply);
        bson_destroy(cmd);
        m->c[c] = md_db_get_collection(m->db, coll_names[c]);
    }
    return m;
}

static void *mds_open_mmapv1(const char *dir, const settings *s)
{
    return mds_open_engine(dir, s, 0);
}

static void *mds_open_btree(const char *dir, const settings *s)
{
    return mds_open_engine(dir, s, 1);
}

static void mds_close_sys(void *h)
{
    mds_sys *m = h;
    for (int c = 0; c < NCOLL; c++)
        md_collection_destroy(m->c[c]);
    md_db_close(m->db);
    free(m);
}

static void mds_insert_call(void *h, int coll, const bson_t *doc);
static void mds_get_call(void *h, int coll, const key *k);
static void mds_update_call(void *h, int coll, const key *k, const upd *u);

static void mds_insert(void *h, int coll, const bson_t *doc)
{
    int64_t t0 = acc_on ? ns_now() : 0;
    mds_insert_call(h, coll, doc);
    if (acc_on)
        acc_call_ns += ns_now() - t0;
}

static void mds_get(void *h, int coll, const key *k)
{
    int64_t t0 = acc_on ? ns_now() : 0;
    mds_get_call(h, coll, k);
    if (acc_on)
        acc_call_ns += ns_now() - t0;
}

static void mds_update(void *h, int coll, const key *k, const upd *u)
{
    int64_t t0 = acc_on ? ns_now() : 0;
    mds_update_call(h, coll, k, u);
    if (acc_on)
        acc_call_ns += ns_now() - t0;
}

static void mds_insert_call(void *h, int coll, const bson_t *doc)
{
    mds_sys *m = h;
    md_error err;
    if (md_collection_insert_one(m->c[coll], doc, NULL, NULL, &err) != 0)
        mds_die("insert", &err);
}

static void mds_get_call(void *h, int coll, const key *k)
{
    mds_sys *m = h;
    bson_t filter, opts;
    const bson_t *doc;
    bson_iter_t it;
    bson_init(&filter);
    key_append(&filter, k);
    bson_init(&opts);
    BSON_APPEND_INT32(&opts, "limit", 1);
    md_cursor *cur = md_collection_find_with_opts(m->c[coll], &filter, &opts);
    if (!md_cursor_next(cur, &doc) || !bson_iter_init_find(&it, doc, "n")) {
        md_error err;
        if (md_cursor_error(cur, &err))
            mds_die("find", &err);
        fail("minidoc: find: _id %lld not found", (long long)k->n);
    }
    md_cursor_destroy(cur);
    bson_destroy(&filter);
    bson_destroy(&opts);
}

static void mds_update_call(void *h, int coll, const key *k, const upd *u)
{
    mds_sys *m = h;
    bson_t sel, ub;
    md_error err;
    bson_init(&sel);
    key_append(&sel, k);
    upd_to_bson(u, &ub);
    if (md_collection_update_one(m->c[coll], &sel, &ub, NULL, NULL, &err) != 0)
        mds_die("update", &err);
    bson_destroy(&sel);
    bson_destroy(&ub);
}

static void mds_scan(void *h, int coll, tally *t)
{
    mds_sys *m = h;
    bson_t filter = BSON_INITIALIZER;
    const bson_t *doc;
    md_error err;
    md_cursor *cur = md_collection_find_with_opts(m->c[coll], &filter, NULL);
    while (md_cursor_next(cur, &doc))
        tally_doc(t, bson_get_data(doc), doc->len);
    if (md_cursor_error(cur, &err))
        mds_die("scan", &err);
    md_cursor_destroy(cur);
}

static const char *mds_describe_mmapv1(const settings *s, char *buf, size_t n)
{
    if (s->journal)
        snprintf(buf, n, "{mmapv1: {journal: true, journalCommitInterval: %d, syncdelay: 60}}",
                 s->interval_ms);
    else
        snprintf(buf, n, "{mmapv1: {journal: false, syncdelay: 60}}");
    return buf;
}

static const char *mds_describe_btree(const settings *s, char *buf, size_t n)
{
    snprintf(buf, n,
             "{btree: {log: %s, commitIntervalMs: %d, checkpointIntervalSecs: 60, "
             "blockCompressor: \"snappy\", cacheSizeMB: %d}}",
             s->journal ? "true" : "false", s->interval_ms, s->cache_mb);
    return buf;
}

/* ---- WiredTiger -------------------------------------------------------- */

typedef struct wtp_sys {
    WT_CONNECTION *conn;
    WT_SESSION *s;
    WT_CURSOR *rec[NCOLL], *idx[NCOLL];
    int64_t next_rid[NCOLL];
    uint8_t *buf;
    uint32_t cap;
    int journal;
    flusher fl;
    WT_SESSION *fl_session;
} wtp_sys;

static void wtp_check(int ret, const char *what)
{
    if (ret != 0)
        fail("wiredtiger: %s: %s", what, wiredtiger_strerror(ret));
}

/* MongoDB 3.6's WiredTigerRecordStore and WiredTigerIndex table configs. */
#define WT_REC_CONFIG                                                                          \
    "type=file,memory_page_max=10m,split_pct=90,leaf_value_max=64MB,checksum=on,"            \
    "block_compressor=snappy,key_format=q,value_format=u"
#define WT_IDX_CONFIG                                                                          \
    "type=file,internal_page_max=16k,leaf_page_max=16k,checksum=on,prefix_compression=true," \
    "block_compressor=,key_format=u,value_format=q"

static void wtp_config(const settings *s, char *buf, size_t n, int with_ext)
{
    char ext[600] = "";
    if (with_ext)
        snprintf(ext, sizeof ext, ",extensions=[%s]", s->snappy);
    snprintf(buf, n,
             "create,cache_size=%dM,session_max=100,eviction=(threads_min=4,threads_max=4),"
             "config_base=false,statistics=(fast),checkpoint=(wait=60,log_size=2GB),"
             "%s,transaction_sync=(enabled=false)%s",
             s->cache_mb, s->journal
                              ? "log=(enabled=true,archive=true,path=journal,compressor=snappy)"
                              : "log=(enabled=false)",
             ext);
}

static void wtp_flush(void *arg, int phase)
{
    wtp_sys *w = arg;
    if (phase == 0)
        wtp_check(w->conn->open_session(w->conn, NULL, NULL, &w->fl_session), "open_session");
    else if (phase == 1)
        wtp_check(w->fl_session->log_flush(w->fl_session, "sync=on"), "log_flush");
    else
        w->fl_session->close(w->fl_session, NULL);
}

static void *wtp_open(const char *dir, const settings *s)
{
    wtp_sys *w = calloc(1, sizeof *w);
    char cfg[1024], jdir[4096], uri[64];
    w->journal = s->journal;
    snprintf(jdir, sizeof jdir, "%s/journal", dir);
    if (mkdir(jdir, 0755) != 0)
        fail("mkdir %s: %s", jdir, strerror(errno));
    wtp_config(s, cfg, sizeof cfg, 1);
    wtp_check(wiredtiger_open(dir, NULL, cfg, &w->conn), "wiredtiger_open");
    wtp_check(w->conn->open_session(w->conn, NULL, "isolation=snapshot", &w->s), "open_session");
    for (int c = 0; c < NCOLL; c++) {
        snprintf(uri, sizeof uri, "table:records_%s", coll_names[c]);
        wtp_check(w->s->create(w->s, uri, WT_REC_CONFIG), "create records");
        wtp_check(w->s->open_cursor(w->s, uri, NULL, NULL, &w->rec[c]), "open_cursor");
        snprintf(uri, sizeof uri, "table:_id_%s", coll_names[c]);
        wtp_check(w->s->create(w->s, uri, WT_IDX_CONFIG), "create _id");
        wtp_check(w->s->open_cursor(w->s, uri, NULL, "overwrite=false", &w->idx[c]),
                 "open_cursor");
        w->next_rid[c] = 1;
    }
    w->cap = 64 * 1024;
    w->buf = malloc(w->cap);
    if (s->journal)
        flusher_start(&w->fl, s->interval_ms, wtp_flush, w);
    return w;
}

static void wtp_close(void *h)
{
    wtp_sys *w = h;
    if (w->journal) {
        flusher_stop(&w->fl);
        fprintf(stderr, "peers: wiredtiger: %ld log flushes (sync=on)\n", w->fl.flushes);
    }
    wtp_check(w->conn->close(w->conn, NULL), "close");
    free(w->buf);
    free(w);
}

/* Reset the cursors (their pages unpinned), as MongoDB does when it
 * hands a cursor back to the session cache. */
static void wtp_release(wtp_sys *w, int coll)
{
    wtp_check(w->idx[coll]->reset(w->idx[coll]), "reset");
    wtp_check(w->rec[coll]->reset(w->rec[coll]), "reset");
}

static void wtp_insert(void *h, int coll, const bson_t *doc)
{
    wtp_sys *w = h;
    key k;
    uint8_t kb[64];
    WT_ITEM v = {.data = bson_get_data(doc), .size = doc->len}, ki;
    WT_SESSION *s = w->s;
    if (key_from_doc(doc, &k) != 0)
        fail("wiredtiger: document without a usable _id");
    ki.data = kb;
    ki.size = key_encode(&k, kb);
    int64_t rid = w->next_rid[coll]++;
    wtp_check(s->begin_transaction(s, NULL), "begin_transaction");
    w->rec[coll]->set_key(w->rec[coll], rid);
    w->rec[coll]->set_value(w->rec[coll], &v);
    wtp_check(w->rec[coll]->insert(w->rec[coll]), "insert record");
    w->idx[coll]->set_key(w->idx[coll], &ki);
    w->idx[coll]->set_value(w->idx[coll], rid);
    wtp_check(w->idx[coll]->insert(w->idx[coll]), "insert _id"); /* WT_DUPLICATE_KEY fails */
    wtp_release(w, coll);
    wtp_check(s->commit_transaction(s, NULL), "commit_transaction");
}

/* Index lookup then record read, inside the caller's transaction. */
static int64_t wtp_find(wtp_sys *w, int coll, const key *k, WT_ITEM *v)
{
    uint8_t kb[64];
    WT_ITEM ki = {.data = kb};
    int64_t rid;
    ki.size = key_encode(k, kb);
    w->idx[coll]->set_key(w->idx[coll], &ki);
    wtp_check(w->idx[coll]->search(w->idx[coll]), "search _id");
    wtp_check(w->idx[coll]->get_value(w->idx[coll], &rid), "get_value");
    w->rec[coll]->set_key(w->rec[coll], rid);
    wtp_check(w->rec[coll]->search(w->rec[coll]), "search record");
    wtp_check(w->rec[coll]->get_value(w->rec[coll], v), "get_value");
    return rid;
}

static void wtp_get(void *h, int coll, const key *k)
{
    wtp_sys *w = h;
    WT_ITEM v;
    bson_t doc;
    bson_iter_t it;
    wtp_check(w->s->begin_transaction(w->s, NULL), "begin_transaction");
    wtp_find(w, coll, k, &v);
    if (!bson_init_static(&doc, v.data, v.size) || !bson_iter_init_find(&it, &doc, "n"))
        fail("wiredtiger: get: bad document");
    wtp_release(w, coll);
    wtp_check(w->s->commit_transaction(w->s, NULL), "commit_transaction");
}

static void wtp_update(void *h, int coll, const key *k, const upd *u)
{
    wtp_sys *w = h;
    WT_ITEM v;
    wtp_check(w->s->begin_transaction(w->s, NULL), "begin_transaction");
    int64_t rid = wtp_find(w, coll, k, &v);
    if (v.size > w->cap) {
        w->cap = (uint32_t)v.size * 2;
        if (!(w->buf = realloc(w->buf, w->cap)))
            fail("out of memory");
    }
    memcpy(w->buf, v.data, v.size);
    v.size = peer_modify(u, &w->buf, (uint32_t)v.size, &w->cap);
    v.data = w->buf;
    w->rec[coll]->set_key(w->rec[coll], rid);
    w->rec[coll]->set_value(w->rec[coll], &v);
    wtp_check(w->rec[coll]->update(w->rec[coll]), "update record");
    wtp_release(w, coll);
    wtp_check(w->s->commit_transaction(w->s, NULL), "commit_transaction");
}

static void wtp_scan(void *h, int coll, tally *t)
{
    wtp_sys *w = h;
    WT_CURSOR *c = w->rec[coll];
    WT_ITEM v;
    int ret;
    wtp_check(c->reset(c), "reset"); /* a positioned cursor's next goes on from there */
    wtp_check(w->s->begin_transaction(w->s, NULL), "begin_transaction");
    while ((ret = c->next(c)) == 0) {
        wtp_check(c->get_value(c, &v), "get_value");
        tally_doc(t, v.data, v.size);
    }
    if (ret != WT_NOTFOUND)
        wtp_check(ret, "next");
    wtp_check(w->s->commit_transaction(w->s, NULL), "commit_transaction");
}

static const char *wtp_describe(const settings *s, char *buf, size_t n)
{
    char cfg[700];
    wtp_config(s, cfg, sizeof cfg, 0);
    snprintf(buf, n, "wiredtiger_open \"%s,extensions=[snappy]\"%s; tables \"%s\" / \"%s\"", cfg,
             s->journal ? " + log_flush(sync=on) thread" : "", WT_REC_CONFIG, WT_IDX_CONFIG);
    return buf;
}

/* ---- LMDB -------------------------------------------------------------- */

typedef struct lmp_sys {
    MDB_env *env;
    MDB_dbi rec[NCOLL], idx[NCOLL];
    MDB_txn *rtxn; /* the reset read-only transaction gets renew */
    uint64_t next_rid[NCOLL];
    uint8_t *buf;
    uint32_t cap;
    flusher fl;
} lmp_sys;

static void lmp_check(int ret, const char *what)
{
    if (ret != 0)
        fail("lmdb: %s: %s", what, mdb_strerror(ret));
}

static void lmp_flush(void *arg, int phase)
{
    lmp_sys *l = arg;
    if (phase == 1)
        lmp_check(mdb_env_sync(l->env, 1), "mdb_env_sync");
}

static void *lmp_open(const char *dir, const settings *s)
{
    lmp_sys *l = calloc(1, sizeof *l);
    MDB_txn *txn;
    char name[32];
    lmp_check(mdb_env_create(&l->env), "mdb_env_create");
    lmp_check(mdb_env_set_maxdbs(l->env, 2 * NCOLL), "mdb_env_set_maxdbs");
    lmp_check(mdb_env_set_mapsize(l->env, (size_t)16 << 30), "mdb_env_set_mapsize");
    lmp_check(mdb_env_open(l->env, dir, MDB_NOSYNC | (s->lmdb_writemap ? MDB_WRITEMAP : 0), 0644),
             "mdb_env_open");
    lmp_check(mdb_txn_begin(l->env, NULL, 0, &txn), "mdb_txn_begin");
    for (int c = 0; c < NCOLL; c++) {
        snprintf(name, sizeof name, "records_%s", coll_names[c]);
        lmp_check(mdb_dbi_open(txn, name, MDB_CREATE | MDB_INTEGERKEY, &l->rec[c]), "dbi_open");
        snprintf(name, sizeof name, "_id_%s", coll_names[c]);
        lmp_check(mdb_dbi_open(txn, name, MDB_CREATE, &l->idx[c]), "dbi_open");
        l->next_rid[c] = 1;
    }
    lmp_check(mdb_txn_commit(txn), "mdb_txn_commit");
    lmp_check(mdb_txn_begin(l->env, NULL, MDB_RDONLY, &l->rtxn), "mdb_txn_begin");
    mdb_txn_reset(l->rtxn);
    l->cap = 64 * 1024;
    l->buf = malloc(l->cap);
    /* journal pair: sync every interval; nojournal pair: every 60 s, as
     * the others' syncdelay / checkpoint wait */
    flusher_start(&l->fl, s->journal ? s->interval_ms : 60000, lmp_flush, l);
    return l;
}

static void lmp_close(void *h)
{
    lmp_sys *l = h;
    flusher_stop(&l->fl);
    fprintf(stderr, "peers: lmdb: %ld mdb_env_sync calls\n", l->fl.flushes);
    mdb_txn_abort(l->rtxn);
    lmp_check(mdb_env_sync(l->env, 1), "mdb_env_sync");
    mdb_env_close(l->env);
    free(l->buf);
    free(l);
}

static void lmp_insert(void *h, int coll, const bson_t *doc)
{
    lmp_sys *l = h;
    key k;
    uint8_t kb[64];
    MDB_txn *txn;
    if (key_from_doc(doc, &k) != 0)
        fail("lmdb: document without a usable _id");
    uint64_t rid = l->next_rid[coll]++;
    MDB_val rk = {sizeof rid, &rid}, rv = {doc->len, (void *)bson_get_data(doc)};
    MDB_val ik = {key_encode(&k, kb), kb}, iv = {sizeof rid, &rid};
    lmp_check(mdb_txn_begin(l->env, NULL, 0, &txn), "mdb_txn_begin");
    lmp_check(mdb_put(txn, l->rec[coll], &rk, &rv, 0), "put record");
    lmp_check(mdb_put(txn, l->idx[coll], &ik, &iv, MDB_NOOVERWRITE), "put _id");
    lmp_check(mdb_txn_commit(txn), "mdb_txn_commit");
}

static uint64_t lmp_find(lmp_sys *l, MDB_txn *txn, int coll, const key *k, MDB_val *v)
{
    uint8_t kb[64];
    uint64_t rid;
    MDB_val ik = {key_encode(k, kb), kb}, iv, rk;
    lmp_check(mdb_get(txn, l->idx[coll], &ik, &iv), "get _id");
    memcpy(&rid, iv.mv_data, sizeof rid);
    rk.mv_size = sizeof rid;
    rk.mv_data = &rid;
    lmp_check(mdb_get(txn, l->rec[coll], &rk, v), "get record");
    return rid;
}

static void lmp_get(void *h, int coll, const key *k)
{
    lmp_sys *l = h;
    MDB_val v;
    bson_t doc;
    bson_iter_t it;
    lmp_check(mdb_txn_renew(l->rtxn), "mdb_txn_renew");
    lmp_find(l, l->rtxn, coll, k, &v);
    if (!bson_init_static(&doc, v.mv_data, v.mv_size) || !bson_iter_init_find(&it, &doc, "n"))
        fail("lmdb: get: bad document");
    mdb_txn_reset(l->rtxn);
}

static void lmp_update(void *h, int coll, const key *k, const upd *u)
{
    lmp_sys *l = h;
    MDB_txn *txn;
    MDB_val v;
    lmp_check(mdb_txn_begin(l->env, NULL, 0, &txn), "mdb_txn_begin");
    uint64_t rid = lmp_find(l, txn, coll, k, &v);
    if (v.mv_size > l->cap) {
        l->cap = (uint32_t)v.mv_size * 2;
        if (!(l->buf = realloc(l->buf, l->cap)))
            fail("out of memory");
    }
    memcpy(l->buf, v.mv_data, v.mv_size);
    v.mv_size = peer_modify(u, &l->buf, (uint32_t)v.mv_size, &l->cap);
    v.mv_data = l->buf;
    MDB_val rk = {sizeof rid, &rid};
    lmp_check(mdb_put(txn, l->rec[coll], &rk, &v, 0), "put record");
    lmp_check(mdb_txn_commit(txn), "mdb_txn_commit");
}

static void lmp_scan(void *h, int coll, tally *t)
{
    lmp_sys *l = h;
    MDB_cursor *cur;
    MDB_val k, v;
    int ret;
    lmp_check(mdb_txn_renew(l->rtxn), "mdb_txn_renew");
    lmp_check(mdb_cursor_open(l->rtxn, l->rec[coll], &cur), "mdb_cursor_open");
    while ((ret = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) == 0)
        tally_doc(t, v.mv_data, v.mv_size);
    if (ret != MDB_NOTFOUND)
        lmp_check(ret, "mdb_cursor_get");
    mdb_cursor_close(cur);
    mdb_txn_reset(l->rtxn);
}

static const char *lmp_describe(const settings *s, char *buf, size_t n)
{
    if (s->journal)
        snprintf(buf, n,
                 "%s, MDB_NOSYNC%s + mdb_env_sync(force) every %d ms (LMDB has no log); "
                 "records MDB_INTEGERKEY, mapsize 16 GB",
                 MDB_VERSION_STRING, s->lmdb_writemap ? "|MDB_WRITEMAP" : "", s->interval_ms);
    else
        snprintf(buf, n,
                 "%s, MDB_NOSYNC%s + mdb_env_sync(force) every 60 s; records MDB_INTEGERKEY, "
                 "mapsize 16 GB",
                 MDB_VERSION_STRING, s->lmdb_writemap ? "|MDB_WRITEMAP" : "");
    return buf;
}

static const sysops systems[NSYS] = {
    {mds_open_mmapv1, mds_close_sys, mds_insert, mds_get, mds_update, mds_scan,
     mds_describe_mmapv1},
    {mds_open_btree, mds_close_sys, mds_insert, mds_get, mds_update, mds_scan,
     mds_describe_btree},
    {wtp_open, wtp_close, wtp_insert, wtp_get, wtp_update, wtp_scan, wtp_describe},
    {lmp_open, lmp_close, lmp_insert, lmp_get, lmp_update, lmp_scan, lmp_describe},
};

/* ---- the run ----------------------------------------------------------- */

/* The i-th operation of workload w (the generator seeded by the caller):
 * the _id it touches and, for updates, the update. */
static void next_op(int w, int i, const settings *s, uint64_t *rng, key *k, upd *u)
{
    memset(u, 0, sizeof *u);
    if (w == W_FLAT || w == W_HIER) {
        day_key(k, (int)rng_below(rng, (uint32_t)s->mms_docs));
        int m = (int)rng_below(rng, 1440), h = m / 60;
        u->npaths = 3;
        snprintf(u->paths[0], sizeof u->paths[0], "daily");
        snprintf(u->paths[1], sizeof u->paths[1], "hourly.%d", h);
        if (w == W_HIER)
            snprintf(u->paths[2], sizeof u->paths[2], "minute.%d.%d", h, m % 60);
        else
            snprintf(u->paths[2], sizeof u->paths[2], "minute.%d", m);
        return;
    }
    main_key(k, rng_below(rng, (uint32_t)s->docs));
    if (w == W_INC) {
        u->npaths = 1;
        snprintf(u->paths[0], sizeof u->paths[0], "n");
    } else if (w == W_GROW) {
        snprintf(u->field, sizeof u->field, "g%d", i);
        u->set_field = u->field;
    }
}

/* One system in a pair's run. */
typedef struct sysrun {
    int sys;
    void *h;
    char dir[4096];
    uint64_t rng;
} sysrun;

static void sys_open(sysrun *r, int sys, const settings *s)
{
    const char *tmp = getenv("TMPDIR");
    r->sys = sys;
    snprintf(r->dir, sizeof r->dir, "%s/peers-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp",
             sys_names[sys]);
    if (!mkdtemp(r->dir))
        fail("mkdtemp %s: %s", r->dir, strerror(errno));
    r->h = systems[sys].open(r->dir, s);
}

/* Check that the system did exactly the work asked (not timed), close it,
 * remove its directory. */
static void sys_check_close(sysrun *r, const settings *s)
{
    const sysops *o = &systems[r->sys];
    char rm[4200];
    tally t[NCOLL];
    memset(t, 0, sizeof t);
    for (int c = 0; c < NCOLL; c++)
        o->scan(r->h, c, &t[c]);
    long inc = s->run[W_INC] ? s->ops : 0, grow = s->run[W_GROW] ? s->ops : 0;
    long fdocs = s->run[W_FLAT] ? s->mms_docs : 0, fops = s->run[W_FLAT] ? s->ops : 0;
    long hdocs = s->run[W_HIER] ? s->mms_docs : 0, hops = s->run[W_HIER] ? s->ops : 0;
    if (t[C_MAIN].docs != s->docs || t[C_MAIN].sum_n != inc || t[C_MAIN].grown != grow ||
        t[C_FLAT].docs != fdocs || t[C_FLAT].daily != fops || t[C_FLAT].minutes != fops ||
        t[C_HIER].docs != hdocs || t[C_HIER].daily != hops || t[C_HIER].minutes != hops)
        fail("%s: verification failed: docs %ld sum(n) %lld grown %lld; flat docs %ld daily "
             "%lld minutes %lld; hier docs %ld daily %lld minutes %lld",
             sys_names[r->sys], t[0].docs, (long long)t[0].sum_n, (long long)t[0].grown,
             t[1].docs, (long long)t[1].daily, (long long)t[1].minutes, t[2].docs,
             (long long)t[2].daily, (long long)t[2].minutes);
    o->close(r->h);
    snprintf(rm, sizeof rm, "rm -rf '%s'", r->dir);
    if (system(rm) != 0)
        fprintf(stderr, "peers: could not remove %s\n", r->dir);
}

/* Operations lo..hi-1 of workload w on one system. */
static void run_ops(sysrun *r, int w, long lo, long hi, const settings *s)
{
    const sysops *o = &systems[r->sys];
    int coll = w == W_FLAT ? C_FLAT : w == W_HIER ? C_HIER : C_MAIN;
    bson_t doc;
    key k;
    upd u;
    for (long i = lo; i < hi; i++) {
        if (w == W_INSERT) {
            make_doc(&doc, i);
            o->insert(r->h, C_MAIN, &doc);
            bson_destroy(&doc);
            continue;
        }
        next_op(w, (int)i, s, &r->rng, &k, &u);
        if (w == W_GET)
            o->get(r->h, coll, &k);
        else
            o->update(r->h, coll, &k, &u);
    }
}

/*
 * One durability pair: every wanted system open at once, each in its own
 * directory; each workload is cut into `rounds` slices and the systems take
 * turns slice by slice (the first one changes each round), so a burst of
 * load from elsewhere on the machine, or the page cache warming, falls on
 * all of them alike.  Each system sees the same operations in the same
 * order.  The time of a workload is the sum of its slices.
 */
static void run_pair(const settings *s, const int want[NSYS], result res[NWORK][NSYS])
{
    sysrun runs[NSYS];
    int n = 0;
    for (int y = 0; y < NSYS; y++)
        if (want[y])
            sys_open(&runs[n++], y, s);
    for (int w = 0; w < NWORK; w++) {
        if (!s->run[w])
            continue;
        long total = w == W_INSERT ? s->docs : s->ops;
        for (int j = 0; j < n; j++) {
            sysrun *r = &runs[j];
            int coll = w == W_FLAT ? C_FLAT : C_HIER;
            for (int i = 0; (w == W_FLAT || w == W_HIER) && i < s->mms_docs; i++) {
                bson_t doc;
                make_day(&doc, i, coll == C_HIER);
                systems[r->sys].insert(r->h, coll, &doc);
                bson_destroy(&doc);
            }
            r->rng = rng_seed((uint64_t)w);
            res[w][r->sys] = (result){.ran = 1};
        }
        for (int round = 0; round < s->rounds; round++) {
            long lo = total * round / s->rounds, hi = total * (round + 1) / s->rounds;
            for (int j = 0; j < n; j++) {
                sysrun *r = &runs[(j + round) % n];
                result *x = &res[w][r->sys];
                bool acc = round % 2 == 1 && (r->sys == SYS_MMAPV1 || r->sys == SYS_BTREE);
                if (acc) {
                    md_engine_timing(true);
                    acc_on = true;
                    acc_call_ns = 0;
                }
                double t0 = now();
                run_ops(r, w, lo, hi, s);
                if (round % 2 == 0) {
                    x->secs += now() - t0;
                    x->ops += hi - lo;
                }
                if (acc) {
                    x->acc_ops += hi - lo;
                    x->call_ns += acc_call_ns;
                    x->eng_ns += md_engine_time_ns();
                    md_engine_timing(false);
                    acc_on = false;
                }
            }
        }
        fprintf(stderr, "peers: %s %s done\n", s->journal ? "journal" : "nojournal",
                work_names[w]);
    }
    for (int j = 0; j < n; j++)
        sys_check_close(&runs[j], s);
}

static double rate(const result *r) { return r->secs > 0 ? r->ops / r->secs : 0; }

/* The speed targets: minidoc engine / peer >= min, per workload. */
static const struct target {
    int work, md, peer;
    double min;
} targets[] = {
    {W_INC, SYS_MMAPV1, SYS_WT, 3.0},   {W_INC, SYS_MMAPV1, SYS_LMDB, 2.0},
    {W_INSERT, SYS_BTREE, SYS_WT, 1.0}, {W_GET, SYS_BTREE, SYS_WT, 1.0},
    {W_INC, SYS_BTREE, SYS_WT, 1.0},
};

static void print_pair(const settings *s, result res[NWORK][NSYS])
{
    const char *pair = s->journal ? "journal" : "nojournal";
    for (int w = 0; w < NWORK; w++) {
        for (int y = 0; y < NSYS; y++) {
            const result *x = &res[w][y];
            if (!x->ran)
                continue;
            printf("%s %s %ld %.3f %.0f", work_names[w], sys_names[y], x->ops, x->secs, rate(x));
            if (x->acc_ops > 0)
                printf(" outside_engine_ns=%.0f engine_ns=%.0f",
                       (double)(x->call_ns - x->eng_ns) / (double)x->acc_ops,
                       (double)x->eng_ns / (double)x->acc_ops);
            printf("\n");
        }
        printf("  ratio %s", work_names[w]);
        for (int m = SYS_MMAPV1; m <= SYS_BTREE; m++)
            for (int p = SYS_WT; p <= SYS_LMDB; p++)
                if (res[w][m].ran && res[w][p].ran)
                    printf(" %s/%s=%.2f", sys_names[m], sys_names[p],
                           rate(&res[w][m]) / rate(&res[w][p]));
        printf("\n");
    }
    printf("# targets (durability=%s)\n", pair);
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) {
        const struct target *t = &targets[i];
        const result *a = &res[t->work][t->md], *b = &res[t->work][t->peer];
        if (!a->ran || !b->ran)
            continue;
        double r = rate(a) / rate(b);
        printf("target %s %s/%s >= %.1f: %.2f %s", work_names[t->work], sys_names[t->md],
               sys_names[t->peer], t->min, r, r >= t->min ? "met" : "MISSED");
        if (r < t->min)
            printf(" (%.0f%% of the target, %.2fx short)", 100 * r / t->min, t->min / r);
        printf("\n");
    }
    fflush(stdout);
}

static void print_machine(const char *prefix, result res[NWORK][NSYS])
{
    for (int w = 0; w < NWORK; w++)
        for (int y = 0; y < NSYS; y++)
            if (res[w][y].ran)
                printf("%s %s %s ops=%ld seconds=%.3f ops_per_s=%.0f\n", prefix, work_names[w],
                       sys_names[y], res[w][y].ops, res[w][y].secs, rate(&res[w][y]));
}

static void usage(void)
{
    fprintf(stderr,
            "usage: peers [--quick] [--docs N] [--ops N] [--mms-docs N]\n"
            "             [--pair journal|nojournal|both] [--cache MB] [--interval MS]\n"
            "             [--rounds N]\n"
            "             [--systems mmapv1,btree,wiredtiger,lmdb] [--lmdb-writemap]\n"
            "             [--workloads insert,get,inc,grow,mms-flat,mms-hier]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    settings s = {.docs = 100000, .ops = 100000, .mms_docs = 100, .cache_mb = 256,
                  .interval_ms = 100, .rounds = 50};
    int quick = 0, pairs[2] = {1, 1}; /* [0] nojournal, [1] journal */
    int want[NSYS] = {1, 1, 1, 1}, docs = -1, ops = -1, workloads_given = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--quick") == 0) {
            quick = 1;
            continue;
        }
        if (strcmp(a, "--lmdb-writemap") == 0) {
            s.lmdb_writemap = 1;
            continue;
        }
        if (!v)
            usage();
        i++;
        if (strcmp(a, "--docs") == 0)
            docs = atoi(v);
        else if (strcmp(a, "--ops") == 0)
            ops = atoi(v);
        else if (strcmp(a, "--mms-docs") == 0)
            s.mms_docs = atoi(v);
        else if (strcmp(a, "--cache") == 0)
            s.cache_mb = atoi(v);
        else if (strcmp(a, "--interval") == 0)
            s.interval_ms = atoi(v);
        else if (strcmp(a, "--rounds") == 0)
            s.rounds = atoi(v);
        else if (strcmp(a, "--pair") == 0) {
            pairs[0] = strcmp(v, "journal") != 0;
            pairs[1] = strcmp(v, "nojournal") != 0;
            if (strcmp(v, "journal") && strcmp(v, "nojournal") && strcmp(v, "both"))
                usage();
        } else if (strcmp(a, "--systems") == 0) {
            for (int y = 0; y < NSYS; y++) {
                const char *p = strstr(v, sys_names[y]);
                size_t l = strlen(sys_names[y]);
                want[y] = p && (p == v || p[-1] == ',') && (p[l] == 0 || p[l] == ',');
            }
        } else if (strcmp(a, "--workloads") == 0) {
            for (int w = 0; w < NWORK; w++) {
                const char *p = strstr(v, work_names[w]);
                size_t l = strlen(work_names[w]);
                s.run[w] = w == W_INSERT ||
                           (p && (p == v || p[-1] == ',') && (p[l] == 0 || p[l] == ','));
            }
            workloads_given = 1;
        } else
            usage();
    }
    if (!workloads_given)
        for (int w = 0; w < NWORK; w++)
            s.run[w] = 1;
    if (quick) {
        s.docs = 20000;
        s.ops = 20000;
    }
    if (docs > 0)
        s.docs = docs;
    if (ops > 0)
        s.ops = ops;
    if (!want[0] && !want[1] && !want[2] && !want[3])
        usage();
    if (s.docs <= 0 || s.ops <= 0 || s.mms_docs <= 0 || s.cache_mb <= 0 ||
        s.interval_ms < 1 || s.interval_ms > 500 || s.rounds < 1)
        usage();

    /* the snappy extension: a clear failure, not a WiredTiger error later */
    s.snappy = getenv("PEERS_WT_SNAPPY");
    if (!s.snappy || !*s.snappy)
        s.snappy = WT_SNAPPY_PATH;
    if (want[SYS_WT] && access(s.snappy, R_OK) != 0)
        fail("WiredTiger's snappy extension %s: %s (install libwiredtiger-dev, or set "
             "PEERS_WT_SNAPPY)",
             s.snappy, strerror(errno));

    bson_t sample;
    make_doc(&sample, 12345);
    uint32_t doc_len = sample.len;
    bson_destroy(&sample);
    make_day(&sample, 1, 0);
    uint32_t flat_len = sample.len;
    bson_destroy(&sample);
    make_day(&sample, 1, 1);
    uint32_t hier_len = sample.len;
    bson_destroy(&sample);

    printf("# peers: minidoc %s (mmapv1, btree) against %s and %s, one process\n",
           MD_VERSION_STRING, WIREDTIGER_VERSION_STRING, MDB_VERSION_STRING);
    printf("# mode=%s docs=%d (%u bytes) ops=%d per workload, mms day documents=%d "
           "(flat %u bytes, hier %u bytes), cache=%d MB, commit interval=%d ms, seeds fixed, "
           "systems interleaved in %d rounds\n",
           quick ? "quick" : "full", s.docs, doc_len, s.ops, s.mms_docs, flat_len, hier_len,
           s.cache_mb, s.interval_ms, s.rounds);
    printf("# minidoc: insert_one per document; get = find_with_opts({_id}, {limit: 1}) + "
           "cursor_next; update_one({_id}, {$inc|$set})\n");
    printf("# peers: records table (RecordId -> BSON) + _id index (key -> RecordId); one "
           "transaction per op; libbson modifies a copy, the whole value is written back\n");
    printf("# mms preallocation and the final verification scans are not timed\n");
    fflush(stdout);

    result res[2][NWORK][NSYS];
    memset(res, 0, sizeof res);
    double start = now();
    /* the journal pair (MongoDB's defaults) first; --quick keeps to its
     * 60 s budget on a busy machine by dropping the second pair when the
     * first one took more than QUICK_PAIR_BUDGET seconds */
    for (int j = 1; j >= 0; j--) {
        if (!pairs[j])
            continue;
        if (quick && j == 0 && pairs[1] && now() - start > QUICK_PAIR_BUDGET) {
            printf("\n# durability=nojournal skipped: --quick time budget (the journal pair "
                   "took %.1f s > %d s)\n",
                   now() - start, QUICK_PAIR_BUDGET);
            pairs[0] = 0;
            continue;
        }
        s.journal = j;
        printf("\n# durability=%s\n", j ? "journal" : "nojournal");
        for (int y = 0; y < NSYS; y++) {
            char d[1200];
            if (want[y])
                printf("#   %s: %s\n", sys_names[y], systems[y].describe(&s, d, sizeof d));
        }
        fflush(stdout);
        run_pair(&s, want, res[j]);
        print_pair(&s, res[j]);
    }

    printf("\n# elapsed %.1f s (setup and checks included)\n", now() - start);
    printf("# machine-readable: `peers` lines are the %s pair%s\n",
           pairs[1] ? "journal" : "nojournal",
           pairs[0] && pairs[1] ? ", `peers-nojournal` lines the nojournal pair" : "");
    print_machine("peers", res[pairs[1] ? 1 : 0]);
    if (pairs[0] && pairs[1])
        print_machine("peers-nojournal", res[0]);
    return 0;
}
