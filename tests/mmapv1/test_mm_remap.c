/*
 * test_mm_remap.c -- the private view's remap (REMAPPRIVATEVIEW) seen from
 * a reader that runs beside it.
 *
 * With the journal on, every write goes to a MAP_PRIVATE view and the
 * group commit copies it to the files later; once enough bytes were copied
 * on write, the commit that crossed the limit replaces the private views by
 * fresh ones and writes the commits not yet in the files into them again.
 * That commit holds only its own collection's lock: a thread reading
 * another collection (query/q_lock.c) runs at the same time, and must see
 * every committed record throughout, never the files' older bytes.
 *
 * debugRemapPrivateViewBytes lowers the limit so that every commit remaps;
 * journalCommitInterval 500 keeps the reader's record out of the files for
 * as long as the option allows.
 */
#include <pthread.h>

#include "test_mm_util.h"

#define RR_ROUNDS 40
#define RR_COMMITS 40
#define RR_READS 20

typedef struct remap_race {
    pthread_mutex_t mu;  /* guards rid and want: the reader holds it per read */
    eng_rs *rs;
    const uint8_t *want; /* the committed bytes of the record at rid */
    uint32_t want_len;
    eng_rid rid;         /* 0: nothing to read yet */
    bool stop;
    int64_t reads, misses, round_reads;
    char first_miss[160];
} remap_race;

static void *reader_main(void *arg)
{
    remap_race *r = arg;
    while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&r->mu);
        if (r->rid != 0) {
            const uint8_t *p;
            uint32_t len;
            int rc = eng_rs_get(r->rs, r->rid, &p, &len);
            bool ok = rc == 0 && len == r->want_len && memcmp(p, r->want, len) == 0;
            r->reads++;
            r->round_reads++;
            if (!ok && r->misses++ == 0)
                snprintf(r->first_miss, sizeof r->first_miss,
                         "record %lld read rc %d, length %u (want %u)", (long long)r->rid, rc,
                         rc == 0 ? len : 0, r->want_len);
        }
        pthread_mutex_unlock(&r->mu);
    }
    return NULL;
}

static int64_t round_reads(remap_race *r)
{
    pthread_mutex_lock(&r->mu);
    int64_t n = r->round_reads;
    pthread_mutex_unlock(&r->mu);
    return n;
}

static void open_remapping(mmt *t)
{
    bson_t sub;
    memset(t, 0, sizeof *t);
    snprintf(t->dir, sizeof t->dir, "/tmp/mmtest.XXXXXX");
    cr_assert(mkdtemp(t->dir));
    bson_init(&t->opts);
    BSON_APPEND_DOCUMENT_BEGIN(&t->opts, "mmapv1", &sub);
    BSON_APPEND_INT64(&sub, "firstFileSize", 1 << 20);
    BSON_APPEND_INT64(&sub, "nsSize", 65536);
    BSON_APPEND_INT32(&sub, "journalCommitInterval", 500);
    BSON_APPEND_INT64(&sub, "debugRemapPrivateViewBytes", getenv("RR_NOREMAP") ? 0 : 1);
    bson_append_document_end(&t->opts, &sub);
    int rc = mmt_try_open(t);
    cr_assert_eq(rc, 0, "open: %s %s", md_strerror(rc), t->err.message);
}

Test(mm_remap, readers_of_another_collection_never_see_the_files_old_bytes)
{
    mmt t;
    open_remapping(&t);
    eng_rs *a = mmt_coll(&t, "test.a", ENG_ALLOC_POWEROF2);
    eng_rs *b = mmt_coll(&t, "test.b", ENG_ALLOC_POWEROF2);
    eng_rid brid = mmt_insert(&t, b, 0, 300);
    remap_race r = {.rs = a};
    pthread_mutex_init(&r.mu, NULL);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, reader_main, &r), 0);
    bson_t docs[RR_ROUNDS];
    for (int round = 1; round <= RR_ROUNDS; round++) {
        /* a new record in a: committed, not yet in the files */
        mmt_doc(&docs[round - 1], round, 200 + round);
        eng_rid rid;
        eng_txn *x = mmt_begin(&t);
        cr_assert_eq(eng_rs_insert(a, x, bson_get_data(&docs[round - 1]),
                                   docs[round - 1].len, &rid, &t.err), 0);
        mmt_commit(x);
        pthread_mutex_lock(&r.mu);
        r.want = bson_get_data(&docs[round - 1]);
        r.want_len = docs[round - 1].len;
        r.rid = rid;
        r.round_reads = 0;
        pthread_mutex_unlock(&r.mu);
        /* commits to b, each remapping every private view, until the
         * reader has read this round's record a few times */
        for (int i = 0; i < 100000 && (i < RR_COMMITS || round_reads(&r) < RR_READS); i++) {
            bool moved;
            cr_assert_eq(mmt_update(&t, b, brid, 0, 300, &brid, &moved), 0, "%s",
                         t.err.message);
        }
    }
    __atomic_store_n(&r.stop, true, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
    pthread_mutex_destroy(&r.mu);
    cr_assert_gt(r.reads, 0);
    cr_expect_eq(r.misses, 0, "%lld of %lld reads missed the committed record; first: %s",
                 (long long)r.misses, (long long)r.reads, r.first_miss);
    for (int i = 0; i < RR_ROUNDS; i++)
        bson_destroy(&docs[i]);
    eng_rs_close(a);
    eng_rs_close(b);
    mmt_close(&t);
}
