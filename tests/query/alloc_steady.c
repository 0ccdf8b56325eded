/*
 * alloc_steady.c -- steady-state `get`, `inc` and `insert` by _id allocate
 * nothing in the query layer.
 *
 * A standalone program (not Criterion: it replaces the process's
 * allocator).  malloc, calloc, realloc, free and the aligned allocators
 * are interposed and counted (calling glibc's own __libc_* functions);
 * after a warm-up, 2,000 finds by _id (md_collection_find_with_opts +
 * md_cursor_next + md_cursor_destroy) and 2,000 $inc by _id
 * (md_collection_update_one) must make no allocation at all on mmapv1,
 * whose in-place write needs none.  On btree the finds must make none
 * either; each $inc makes the engine's multi-version records (the new
 * version with its value, the overlay chain with its key and base image:
 * what WiredTiger's WT_UPDATE costs it too) and, when its overlay is
 * folded, the page entry, and no more than BTREE_INC_ALLOCS of them: the
 * query layer adds none (it added 13 per $inc before the lean query
 * layer; the engine made 9 before its versions were folded in batches).
 * 2,000 inserts of new documents with an _id (a view of the caller's
 * document is stored, its key made on the stack) must make none on
 * mmapv1 and only the engine's records on btree (BTREE_INSERT_ALLOCS
 * each): the query layer adds none.  With MINIDOC_ALLOC_TRACE=1 each
 * counted allocation prints its call stack.
 *
 * Sanitizers bring their own allocator, which this would replace: the
 * program then only says it was skipped.
 */
#include <bson/bson.h>
#include <execinfo.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng.h"
#include "minidoc.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ALLOC_SKIP 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define ALLOC_SKIP 1
#endif
#endif

#ifndef ALLOC_SKIP
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static __thread int counting;
static long allocations;
static bool trace;

static void note(void *caller)
{
    if (!counting)
        return;
    __atomic_fetch_add(&allocations, 1, __ATOMIC_RELAXED);
    if (trace) {
        void *bt[6];
        counting = 0;
        int n = backtrace(bt, 6);
        fprintf(stderr, "alloc:\n");
        backtrace_symbols_fd(bt + 2, n - 2, 2);
        counting = 1;
    }
}

void *malloc(size_t n)
{
    note(__builtin_return_address(0));
    return __libc_malloc(n);
}

void *calloc(size_t a, size_t b)
{
    note(__builtin_return_address(0));
    return __libc_calloc(a, b);
}

void *realloc(void *p, size_t n)
{
    note(__builtin_return_address(0));
    return __libc_realloc(p, n);
}

void *memalign(size_t al, size_t n)
{
    note(__builtin_return_address(0));
    return __libc_memalign(al, n);
}

void *aligned_alloc(size_t al, size_t n)
{
    note(__builtin_return_address(0));
    return __libc_memalign(al, n);
}

int posix_memalign(void **out, size_t al, size_t n)
{
    note(__builtin_return_address(0));
    *out = __libc_memalign(al, n);
    return *out ? 0 : 12;
}

void free(void *p)
{
    __libc_free(p);
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    return remove(p);
}

static int fail(const char *what, const md_error *err)
{
    fprintf(stderr, "alloc_steady: %s: %s\n", what, err ? err->message : "");
    return 1;
}

static void get_one(md_collection *c, int i, const bson_t *opts, long *found)
{
    bson_t f;
    const bson_t *doc;
    bson_init(&f);
    BSON_APPEND_INT32(&f, "_id", i);
    md_cursor *cur = md_collection_find_with_opts(c, &f, opts);
    *found += md_cursor_next(cur, &doc);
    md_cursor_destroy(cur);
    bson_destroy(&f);
}

static int inc_one(md_collection *c, int i, const bson_t *u, md_error *err)
{
    bson_t f;
    bson_init(&f);
    BSON_APPEND_INT32(&f, "_id", i);
    int rc = md_collection_update_one(c, &f, u, NULL, NULL, err);
    bson_destroy(&f);
    return rc;
}

#define BTREE_INC_ALLOCS 5
/* An insert into a collection with the _id index: on btree the versions
 * and chains of the record and of the index key (4: the fold gives the
 * versions to the pages as their entries), and now and then a split. */
#define BTREE_INSERT_ALLOCS 5
#define MMAPV1_INSERT_ALLOCS 0

static int run(const char *engine)
{
    char dir[] = "/tmp/md_alloc_XXXXXX";
    md_db *db;
    md_error err;
    long found = 0;
    int rc = 0;
    if (!mkdtemp(dir))
        return fail("mkdtemp", NULL);
    bson_t *o = BCON_NEW("engine", BCON_UTF8(engine), "mmapv1", "{", "journal",
                         BCON_BOOL(false), "}", "btree", "{", "log", BCON_BOOL(false), "}");
    if (md_db_open(dir, o, &db, &err))
        return fail("open", &err);
    md_collection *c = md_db_get_collection(db, "c");
    char pad[200];
    memset(pad, 'x', sizeof pad - 1);
    pad[sizeof pad - 1] = 0;
    for (int i = 0; i < 500 && !rc; i++) {
        bson_t *d = BCON_NEW("_id", BCON_INT32(i), "n", BCON_INT32(0), "pad", BCON_UTF8(pad));
        rc = md_collection_insert_one(c, d, NULL, NULL, &err);
        bson_destroy(d);
    }
    bson_t *u = BCON_NEW("$inc", "{", "n", BCON_INT32(1), "}");
    bson_t *lim = BCON_NEW("limit", BCON_INT32(1));
    for (int i = 0; i < 2000 && !rc; i++) { /* warm up: every cache filled */
        get_one(c, i % 500, lim, &found);
        rc = inc_one(c, i % 500, u, &err);
    }
    /* btree keeps committed versions in its overlay until a fold applies
     * them to the pages; a reader folds after a run of reads without a
     * commit (BT_FOLD_IDLE), and that fold, the warm-up's writes' work,
     * would fall among the finds.  The checkpoint of an fsync folds them
     * now. */
    bson_t *fs = BCON_NEW("fsync", BCON_INT32(1)), fsr;
    if (!rc)
        rc = md_db_command(db, fs, &fsr, &err);
    if (!rc)
        bson_destroy(&fsr);
    bson_destroy(fs);
    long before = allocations;
    counting = 1;
    for (int i = 0; i < 2000; i++)
        get_one(c, (i * 7) % 500, lim, &found);
    counting = 0;
    long gets = allocations - before;
    before = allocations;
    counting = 1;
    for (int i = 0; i < 2000 && !rc; i++)
        rc = inc_one(c, (i * 7) % 500, u, &err);
    counting = 0;
    long incs = allocations - before;
    /* inserts of new documents (built before counting) */
    bson_t *docs[2000];
    for (int i = 0; i < 2000; i++)
        docs[i] = BCON_NEW("_id", BCON_INT32(1000 + i), "n", BCON_INT32(0), "pad", BCON_UTF8(pad));
    before = allocations;
    counting = 1;
    for (int i = 0; i < 2000 && !rc; i++)
        rc = md_collection_insert_one(c, docs[i], NULL, NULL, &err);
    counting = 0;
    long inserts = allocations - before;
    for (int i = 0; i < 2000; i++)
        bson_destroy(docs[i]);
    if (rc)
        return fail("insert or update", &err);
    printf("alloc_steady: %s: %ld allocations in 2000 gets, %ld in 2000 incs, %ld in 2000 "
           "inserts (%ld found)\n",
           engine, gets, incs, inserts, found);
    bson_destroy(u);
    bson_destroy(lim);
    bson_destroy(o);
    md_collection_destroy(c);
    md_db_close(db);
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    if (found != 4000)
        return fail("not every document was found", NULL);
    bool btree = strcmp(engine, "btree") == 0;
    if (gets != 0 || incs > (btree ? BTREE_INC_ALLOCS * 2000L : 0) ||
        inserts > (btree ? BTREE_INSERT_ALLOCS : MMAPV1_INSERT_ALLOCS) * 2000L) {
        fprintf(stderr, "alloc_steady: %s: too many allocations (run with "
                        "MINIDOC_ALLOC_TRACE=1 to see where)\n", engine);
        return 1;
    }
    return 0;
}

int main(void)
{
    const char *engines[] = {"mmapv1", "btree"};
    int bad = 0;
    trace = getenv("MINIDOC_ALLOC_TRACE") != NULL;
    for (size_t i = 0; i < 2; i++)
        bad |= run(engines[i]);
    return bad;
}
#else
int main(void)
{
    printf("alloc_steady: skipped (a sanitizer's allocator is in use)\n");
    return 0;
}
#endif
