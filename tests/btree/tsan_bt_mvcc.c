/*
 * tsan_bt_mvcc.c -- a standalone stress program for the btree engine's
 * document-level concurrency under ThreadSanitizer (Criterion cannot start
 * under TSan; `make test-tsan` builds and runs it).
 *
 * Eight threads share one record store of slot documents {slot, n, pad}
 * and one unique index "s<slot>" -> rid.  Each operation picks a slot and,
 * in a transaction, looks it up through the index: absent, it inserts the
 * document and the index entry; present, it updates n += 1 or removes
 * both.  Write conflicts (and the unique insert race, which must conflict
 * rather than commit twice) abort and retry.  Between writes the threads
 * read: gets and scans outside a transaction, and scans inside one that
 * check the snapshot is consistent (as many documents as index entries,
 * every entry's document there); a ninth thread holds snapshots open
 * across commits and checks that two scans in one read the same.  A small cache makes eviction and page-in
 * race the readers; flushes checkpoint under the latch.
 *
 * Each committed write is recorded in a model (a per-slot mutex orders the
 * model's updates like the commits); at the end the store, the index and
 * the model must agree exactly, and the verifier must pass.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bt.h"
#include "eng.h"

#define NTHREADS 8
#define NSLOTS 200
#define OPS 400
#define PAD 700

static eng_engine *E;
static eng_rs *RS;
static eng_ss *SS;
static struct {
    pthread_mutex_t mu;
    bool present;
    int n;
    eng_rid rid;
} model[NSLOTS];
static long conflicts, commits;

#define FAIL(...) \
    do { \
        fprintf(stderr, "tsan_bt_mvcc: " __VA_ARGS__); \
        fprintf(stderr, "\n"); \
        exit(2); \
    } while (0)

static int key_of(int slot, char *k)
{
    return snprintf(k, 16, "s%05d", slot);
}

static bson_t *slot_doc(int slot, int n)
{
    char pad[PAD];
    memset(pad, 'a' + slot % 26, sizeof pad - 1);
    pad[sizeof pad - 1] = 0;
    bson_t *b = bson_new();
    BSON_APPEND_INT32(b, "slot", slot);
    BSON_APPEND_INT32(b, "n", n);
    BSON_APPEND_UTF8(b, "pad", pad);
    return b;
}

/* slot and n of a stored document; false if it is not one. */
static bool parse(const uint8_t *p, uint32_t len, int *slot, int *n)
{
    bson_t v;
    bson_iter_t it;
    if (!bson_init_static(&v, p, len))
        return false;
    if (!bson_iter_init_find(&it, &v, "slot"))
        return false;
    *slot = bson_iter_int32(&it);
    if (!bson_iter_init_find(&it, &v, "n"))
        return false;
    *n = bson_iter_int32(&it);
    return *slot >= 0 && *slot < NSLOTS;
}

/* The rid the index holds for slot (in the calling thread's view). */
static eng_rid index_rid(int slot)
{
    char k[16];
    int kl = key_of(slot, k);
    eng_ss_cursor *c;
    const uint8_t *key;
    uint32_t klen;
    eng_rid rid = 0;
    if (eng_ss_cursor_open(SS, &c) != 0)
        FAIL("cursor open");
    if (eng_ss_cursor_seek(c, (const uint8_t *)k, (uint32_t)kl, 0) == 0 &&
        eng_ss_cursor_get(c, &key, &klen, &rid) == 0 &&
        (klen != (uint32_t)kl || memcmp(key, k, klen) != 0))
        rid = 0;
    eng_ss_cursor_close(c);
    return rid;
}

enum { OP_INSERT, OP_UPDATE, OP_REMOVE };

/* One write on slot; 0 committed, 1 conflict (aborted). */
static int write_slot(int slot, int i, bool durable)
{
    eng_txn *t;
    char k[16];
    int kl = key_of(slot, k), op, n = 0, rc = 0, s;
    const uint8_t *p;
    uint32_t len;
    eng_rid rid, nr;
    bool moved;
    if (eng_txn_begin(E, &t) != 0)
        FAIL("begin");
    rid = index_rid(slot);
    if (!rid) {
        bson_t *d = slot_doc(slot, 0);
        op = OP_INSERT;
        rc = eng_rs_insert(RS, t, bson_get_data(d), d->len, &rid, NULL);
        if (rc == 0)
            rc = eng_ss_insert(SS, t, (const uint8_t *)k, (uint32_t)kl, rid, true, NULL, NULL);
        bson_destroy(d);
    } else {
        if (eng_rs_get(RS, rid, &p, &len) != 0 || !parse(p, len, &s, &n) || s != slot)
            FAIL("slot %d: the index names rid %lld, not its document", slot, (long long)rid);
        op = i % 4 == 0 ? OP_REMOVE : OP_UPDATE;
        if (op == OP_REMOVE) {
            rc = eng_rs_remove(RS, t, rid);
            if (rc == 0)
                rc = eng_ss_remove(SS, t, (const uint8_t *)k, (uint32_t)kl, rid);
        } else {
            bson_t *d = slot_doc(slot, ++n);
            rc = eng_rs_update(RS, t, rid, bson_get_data(d), d->len, &nr, &moved, NULL);
            bson_destroy(d);
        }
    }
    if (rc == MD_EWRITECONFLICT) {
        eng_txn_abort(t);
        __atomic_add_fetch(&conflicts, 1, __ATOMIC_RELAXED);
        return 1;
    }
    if (rc)
        FAIL("slot %d op %d: %s", slot, op, md_strerror(rc));
    pthread_mutex_lock(&model[slot].mu);
    if (eng_txn_commit(t, durable, NULL) != 0)
        FAIL("commit");
    model[slot].present = op != OP_REMOVE;
    model[slot].n = n;
    model[slot].rid = rid;
    pthread_mutex_unlock(&model[slot].mu);
    __atomic_add_fetch(&commits, 1, __ATOMIC_RELAXED);
    return 0;
}

/* Scan the store and the index; in a transaction they must agree. */
static void scan(bool in_txn)
{
    eng_txn *t = NULL;
    eng_rs_cursor *c;
    eng_ss_cursor *sc;
    eng_rid rid;
    const uint8_t *p;
    uint32_t len;
    int docs = 0, entries = 0, s, n;
    if (in_txn && eng_txn_begin(E, &t) != 0)
        FAIL("begin");
    if (eng_rs_cursor_open(RS, true, &c) != 0 || eng_ss_cursor_open(SS, &sc) != 0)
        FAIL("cursor open");
    for (eng_rid prev = 0; eng_rs_cursor_next(c, &rid, &p, &len) == 0; prev = rid, docs++)
        if (rid <= prev || !parse(p, len, &s, &n))
            FAIL("scan: bad record %lld", (long long)rid);
    for (int rc = eng_ss_cursor_seek(sc, NULL, 0, 0); rc == 0; rc = eng_ss_cursor_next(sc)) {
        const uint8_t *k;
        uint32_t kl;
        if (eng_ss_cursor_get(sc, &k, &kl, &rid) != 0)
            continue; /* outside a transaction the entry may have gone */
        entries++;
        if (in_txn && (eng_rs_get(RS, rid, &p, &len) != 0 || !parse(p, len, &s, &n)))
            FAIL("snapshot: index entry for a missing record %lld", (long long)rid);
    }
    eng_rs_cursor_close(c);
    eng_ss_cursor_close(sc);
    if (in_txn && docs != entries)
        FAIL("snapshot: %d documents, %d index entries", docs, entries);
    if (t && eng_txn_commit(t, false, NULL) != 0)
        FAIL("read-only commit");
}

/* A long snapshot: two scans of the store 2 ms apart, while the writers
 * commit, must read the same (rid, n) pairs. */
static int writers_done;

static int snapshot_scan(long *sig)
{
    eng_rs_cursor *c;
    eng_rid rid;
    const uint8_t *p;
    uint32_t len;
    int s, n, docs = 0;
    *sig = 0;
    if (eng_rs_cursor_open(RS, true, &c) != 0)
        FAIL("cursor open");
    while (eng_rs_cursor_next(c, &rid, &p, &len) == 0) {
        if (!parse(p, len, &s, &n))
            FAIL("snapshot scan: bad record");
        *sig = *sig * 1000003 + rid * 31 + n;
        docs++;
    }
    eng_rs_cursor_close(c);
    return docs;
}

static void *snapshot_reader(void *arg)
{
    int rounds = 0;
    while (!__atomic_load_n(&writers_done, __ATOMIC_ACQUIRE) || rounds < 3) {
        eng_txn *t;
        long a, b;
        if (eng_txn_begin(E, &t) != 0)
            FAIL("begin");
        int na = snapshot_scan(&a);
        usleep(2000);
        int nb = snapshot_scan(&b);
        if (na != nb || a != b)
            FAIL("repeatable read: %d then %d documents in one snapshot", na, nb);
        if (eng_txn_commit(t, false, NULL) != 0)
            FAIL("commit");
        rounds++;
    }
    return NULL;
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    uint32_t x = 2654435761u * (uint32_t)(id + 1);
    for (int i = 0; i < OPS; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        int slot = (int)(id % 2 ? x % NSLOTS : x % 16); /* even threads: hot slots */
        while (write_slot(slot % NSLOTS, i, i % 97 == 0))
            ;
        if (i % 10 == 0)
            scan(i % 20 == 0);
        if (i % 3 == 0) {
            const uint8_t *p;
            uint32_t len;
            int s, n;
            eng_rid r = index_rid(slot % NSLOTS);
            if (r && eng_rs_get(RS, r, &p, &len) == 0 && !parse(p, len, &s, &n))
                FAIL("get: bad document");
        }
        if (id == 0 && i % 100 == 50)
            eng_flush(E, false, NULL);
    }
    return NULL;
}

static void check_final(void)
{
    eng_rs_stats st;
    int present = 0;
    eng_rs_get_stats(RS, &st);
    for (int i = 0; i < NSLOTS; i++) {
        const uint8_t *p;
        uint32_t len;
        int s, n;
        if (!model[i].present) {
            if (index_rid(i))
                FAIL("slot %d: removed but indexed", i);
            continue;
        }
        present++;
        if (index_rid(i) != model[i].rid)
            FAIL("slot %d: index %lld, model %lld", i, (long long)index_rid(i),
                 (long long)model[i].rid);
        if (eng_rs_get(RS, model[i].rid, &p, &len) != 0 || !parse(p, len, &s, &n) || s != i ||
            n != model[i].n)
            FAIL("slot %d: document does not match the model (n %d)", i, model[i].n);
    }
    if (st.count != present || eng_ss_entries(SS) != present)
        FAIL("count %lld, entries %lld, model %d", (long long)st.count,
             (long long)eng_ss_entries(SS), present);
    eng_validate v;
    eng_validate_init(&v, true);
    if (bt_verify_engine(E, &v) != 0)
        FAIL("verify");
    eng_validate_cleanup(&v);
}

static long status_chains(void)
{
    bson_t st = BSON_INITIALIZER;
    bson_iter_t it, sub;
    long v = -1;
    E->ops->append_status(E, &st);
    if (bson_iter_init(&it, &st) &&
        bson_iter_find_descendant(&it, "btree.transaction.chains", &sub))
        v = (long)bson_iter_as_int64(&sub);
    bson_destroy(&st);
    return v;
}

int main(void)
{
    char dir[] = "/tmp/btmvcc.XXXXXX", cmd[64];
    bson_t o = BSON_INITIALIZER, sub;
    md_error err;
    eng_txn *t;
    pthread_t th[NTHREADS];
    if (!mkdtemp(dir))
        return 1;
    BSON_APPEND_DOCUMENT_BEGIN(&o, "btree", &sub);
    BSON_APPEND_INT64(&sub, "cacheSize", 96 * 1024);
    BSON_APPEND_INT32(&sub, "commitIntervalMs", 2);
    bson_append_document_end(&o, &sub);
    if (eng_open(&bt_engine_ops, dir, "test", &o, &E, &err) != 0)
        FAIL("open: %s", err.message);
    if (eng_txn_begin(E, &t) || eng_rs_create(E, t, "test.c", NULL, NULL) ||
        eng_ss_create(E, t, "test.c.$s_1", NULL) || eng_txn_commit(t, false, NULL) ||
        eng_rs_open(E, "test.c", &RS, NULL) || eng_ss_open(E, "test.c.$s_1", &SS, NULL))
        FAIL("setup");
    for (int i = 0; i < NSLOTS; i++)
        pthread_mutex_init(&model[i].mu, NULL);
    for (int i = 0; i < NTHREADS; i++)
        pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
    pthread_t reader;
    pthread_create(&reader, NULL, snapshot_reader, NULL);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    __atomic_store_n(&writers_done, 1, __ATOMIC_RELEASE);
    pthread_join(reader, NULL);
    check_final();
    if (status_chains() != 0)
        FAIL("%ld chains left with no transaction open", status_chains());
    long evictions = (long)bt_evictions(E);
    eng_rs_close(RS);
    eng_ss_close(SS);
    eng_close(E);
    /* reopen: the checkpoint at close and the log hold the same state */
    if (eng_open(&bt_engine_ops, dir, "test", &o, &E, &err) != 0 ||
        eng_rs_open(E, "test.c", &RS, NULL) || eng_ss_open(E, "test.c.$s_1", &SS, NULL))
        FAIL("reopen");
    check_final();
    eng_rs_close(RS);
    eng_ss_close(SS);
    eng_close(E);
    bson_destroy(&o);
    printf("tsan_bt_mvcc ok: %ld commits, %ld conflicts, %ld evictions\n", commits, conflicts,
           evictions);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : 6;
}
