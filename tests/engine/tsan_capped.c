/*
 * tsan_capped.c -- a standalone ThreadSanitizer stress program for capped
 * record stores on every engine (`make test-tsan` builds and runs it):
 * one writer inserts documents {i: 0, 1, 2 ...} into a small ring, one
 * transaction each, while three readers tail it with forward cursors,
 * saving between batches as a getMore does.
 *
 * Locks as query/ takes them: on engines without document-level
 * concurrency the writer holds a collection lock exclusively around each
 * transaction and readers hold it shared around each batch; on btree there
 * is no lock.  Every reader must see consecutive values of i, each once;
 * when the ring overtakes it, restore or next must say MD_ECAPPEDLOST (the
 * reader then starts again from the oldest record), never skip silently.
 * At the end a reader that catches up must have seen the last document.
 */
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eng.h"

#define NREADERS 3
#define NDOCS 3000

static eng_engine *E;
static eng_rs *RS;
static bool LOCKED; /* take the collection lock */
static pthread_rwlock_t LOCK = PTHREAD_RWLOCK_INITIALIZER;
static int DONE;    /* atomic: the writer finished */
static const char *NAME;

#define FAIL(...) \
    do { \
        fprintf(stderr, "tsan_capped [%s]: ", NAME); \
        fprintf(stderr, __VA_ARGS__); \
        fprintf(stderr, "\n"); \
        exit(2); \
    } while (0)

static void *writer(void *arg)
{
    char pad[400];
    for (int i = 0; i < NDOCS; i++) {
        bson_t b = BSON_INITIALIZER;
        eng_txn *t;
        eng_rid rid;
        md_error err;
        memset(pad, 'x', sizeof pad);
        pad[50 + (i * 37) % 340] = '\0';
        BSON_APPEND_INT32(&b, "i", i);
        BSON_APPEND_UTF8(&b, "p", pad);
        if (LOCKED)
            pthread_rwlock_wrlock(&LOCK);
        if (eng_txn_begin(E, &t) != 0)
            FAIL("txn_begin");
        int rc = eng_rs_insert(RS, t, bson_get_data(&b), b.len, &rid, &err);
        if (rc)
            FAIL("insert %d: %s", i, md_strerror(rc));
        if (eng_txn_commit(t, i % 97 == 0, &err) != 0)
            FAIL("commit %d", i);
        if (LOCKED)
            pthread_rwlock_unlock(&LOCK);
        bson_destroy(&b);
    }
    __atomic_store_n(&DONE, 1, __ATOMIC_RELEASE);
    return NULL;
}

typedef struct rstat {
    long seen, lost;
} rstat;

static void *reader(void *arg)
{
    rstat *st = arg;
    eng_rs_cursor *c = NULL;
    int expect = -1; /* -1: a fresh cursor starts anywhere */
    bool saved = false;
    for (;;) {
        bool done = __atomic_load_n(&DONE, __ATOMIC_ACQUIRE);
        if (LOCKED)
            pthread_rwlock_rdlock(&LOCK);
        if (!c) {
            if (eng_rs_cursor_open(RS, true, &c) != 0)
                FAIL("cursor_open");
            expect = -1;
            saved = false;
        }
        int rc = saved ? eng_rs_cursor_restore(c) : 0;
        eng_rid rid;
        const uint8_t *d;
        uint32_t len;
        for (int n = 0; rc == 0 && n < 50; n++) {
            rc = eng_rs_cursor_next(c, &rid, &d, &len);
            if (rc)
                break;
            bson_t b;
            bson_iter_t it;
            if (!bson_init_static(&b, d, len) || !bson_iter_init_find(&it, &b, "i"))
                FAIL("bad document");
            int i = bson_iter_int32(&it);
            if (expect >= 0 && i != expect)
                FAIL("read i = %d, expected %d", i, expect);
            expect = i + 1;
            st->seen++;
        }
        if (rc == MD_ECAPPEDLOST) {
            eng_rs_cursor_close(c);
            c = NULL;
            st->lost++;
        } else if (rc != 0 && rc != MD_NOTFOUND) {
            FAIL("next: %s", md_strerror(rc));
        } else {
            eng_rs_cursor_save(c);
            saved = true;
        }
        if (LOCKED)
            pthread_rwlock_unlock(&LOCK);
        if (done && rc == MD_NOTFOUND) {
            if (expect != NDOCS)
                FAIL("caught up at i = %d, expected %d", expect, NDOCS);
            break;
        }
        if (st->seen % 7 == 0)
            usleep(100); /* fall behind now and then */
    }
    if (c)
        eng_rs_cursor_close(c);
    return NULL;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    return remove(path);
}

static void run(const eng_ops *ops)
{
    char dir[64];
    md_error err;
    bson_t opts = BSON_INITIALIZER, sub;
    NAME = ops->name;
    snprintf(dir, sizeof dir, "/tmp/md_tsan_capped_XXXXXX");
    if (!mkdtemp(dir))
        FAIL("mkdtemp");
    BSON_APPEND_DOCUMENT_BEGIN(&opts, "mmapv1", &sub);
    BSON_APPEND_INT32(&sub, "firstFileSize", 262144);
    BSON_APPEND_INT32(&sub, "nsSize", 65536);
    BSON_APPEND_INT32(&sub, "debugCappedExtentSize", 8192);
    bson_append_document_end(&opts, &sub);
    if (eng_open(ops, dir, "test", &opts, &E, &err) != 0)
        FAIL("open: %s", err.message);
    bson_destroy(&opts);
    eng_rs_options o = {.capped = true, .capped_size = 32768};
    eng_txn *t;
    if (eng_txn_begin(E, &t) || eng_rs_create(E, t, "test.cap", &o, &err) ||
        eng_txn_commit(t, false, &err) || eng_rs_open(E, "test.cap", &RS, &err))
        FAIL("create: %s", err.message);
    LOCKED = !ops->concurrent;
    __atomic_store_n(&DONE, 0, __ATOMIC_RELEASE);
    pthread_t w, r[NREADERS];
    rstat st[NREADERS];
    memset(st, 0, sizeof st);
    for (int i = 0; i < NREADERS; i++)
        pthread_create(&r[i], NULL, reader, &st[i]);
    pthread_create(&w, NULL, writer, NULL);
    pthread_join(w, NULL);
    for (int i = 0; i < NREADERS; i++)
        pthread_join(r[i], NULL);
    eng_validate v;
    eng_validate_init(&v, true);
    if (eng_rs_validate(RS, &v) != 0 || v.nerrors)
        FAIL("validate: %d errors", v.nerrors);
    eng_validate_cleanup(&v);
    long seen = 0, lost = 0;
    for (int i = 0; i < NREADERS; i++)
        seen += st[i].seen, lost += st[i].lost;
    printf("tsan_capped [%s]: %d inserts, readers saw %ld documents, lost their place %ld "
           "times\n", NAME, NDOCS, seen, lost);
    eng_rs_close(RS);
    eng_close(E);
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int main(void)
{
    for (const eng_ops *const *o = eng_engines(); *o; o++)
        run(*o);
    return 0;
}
