/*
 * test_mm_util.h -- fixture and helpers shared by the mmapv1 unit tests
 * (test_mm_*.c): a fresh mkdtemp directory with tiny files (64 KiB first
 * data file, 64 KiB .ns), documents of an exact BSON size, and shortcuts
 * for transactions, collections and validate, and a writer child killed
 * by SIGKILL mid-run.  Tests may read the on-disk
 * format through mm_int.h and damage files with pwrite after mmt_settle():
 * with the journal the engine reads a MAP_PRIVATE view, which sees bytes
 * written to the file only on pages it has not changed since the last
 * flush (eng_flush applies every commit and remaps the private view).
 * debugCheckViews is on: every flush checks that no byte changed without
 * mm_writing().
 */
#ifndef TEST_MM_UTIL_H
#define TEST_MM_UTIL_H

#include <criterion/criterion.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "eng.h"
#include "mm.h"
#include "mm_int.h"

typedef struct mmt {
    char dir[64];
    eng_engine *e;
    md_error err;
    bson_t opts;
} mmt;

static inline int mmt_rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static inline void mmt_options(bson_t *opts, int64_t first, int64_t ns, bool remap)
{
    bson_t sub;
    bson_init(opts);
    BSON_APPEND_DOCUMENT_BEGIN(opts, "mmapv1", &sub);
    BSON_APPEND_INT64(&sub, "firstFileSize", first);
    BSON_APPEND_INT64(&sub, "nsSize", ns);
    BSON_APPEND_BOOL(&sub, "debugRemapOnGrow", remap);
    BSON_APPEND_BOOL(&sub, "debugCheckViews", true);
    bson_append_document_end(opts, &sub);
}

static inline int mmt_try_open(mmt *t)
{
    md_error_clear(&t->err);
    return eng_open(&mm_engine_ops, t->dir, "test", &t->opts, &t->e, &t->err);
}

/* Open a fresh database with tiny files (remap: debugRemapOnGrow). */
static inline void mmt_open_ex(mmt *t, bool remap)
{
    memset(t, 0, sizeof *t);
    snprintf(t->dir, sizeof t->dir, "/tmp/mmtest.XXXXXX");
    cr_assert(mkdtemp(t->dir));
    mmt_options(&t->opts, 65536, 65536, remap);
    int rc = mmt_try_open(t);
    cr_assert_eq(rc, 0, "open: %s %s", md_strerror(rc), t->err.message);
}

static inline void mmt_open(mmt *t)
{
    mmt_open_ex(t, false);
}

static inline void mmt_reopen(mmt *t)
{
    eng_close(t->e);
    t->e = NULL;
    int rc = mmt_try_open(t);
    cr_assert_eq(rc, 0, "reopen: %s %s", md_strerror(rc), t->err.message);
}

static inline void mmt_close(mmt *t)
{
    eng_close(t->e);
    t->e = NULL;
    bson_destroy(&t->opts);
    nftw(t->dir, mmt_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static inline eng_txn *mmt_begin(mmt *t)
{
    eng_txn *x;
    cr_assert_eq(eng_txn_begin(t->e, &x), 0);
    return x;
}

static inline void mmt_commit(eng_txn *x)
{
    cr_assert_eq(eng_txn_commit(x, false, NULL), 0);
}

/* A document of exactly len (>= 22) bytes: {_id: id, s: "xxx..."}. */
static inline void mmt_doc(bson_t *b, int id, int len)
{
    cr_assert(len >= 22);
    char *s = malloc((size_t)len);
    memset(s, 'x', (size_t)len);
    s[len - 22] = '\0';
    bson_init(b);
    BSON_APPEND_INT32(b, "_id", id);
    BSON_APPEND_UTF8(b, "s", s);
    free(s);
    cr_assert_eq((int)b->len, len);
}

/* Create collection name with strategy alloc and open it. */
static inline eng_rs *mmt_coll(mmt *t, const char *name, int alloc)
{
    eng_rs_options o = {.alloc = alloc};
    eng_rs *rs;
    eng_txn *x = mmt_begin(t);
    int rc = eng_rs_create(t->e, x, name, &o, &t->err);
    cr_assert_eq(rc, 0, "create %s: %s", name, t->err.message);
    mmt_commit(x);
    cr_assert_eq(eng_rs_open(t->e, name, &rs, &t->err), 0);
    return rs;
}

static inline eng_rid mmt_insert(mmt *t, eng_rs *rs, int id, int len)
{
    bson_t b;
    eng_rid rid;
    mmt_doc(&b, id, len);
    eng_txn *x = mmt_begin(t);
    int rc = eng_rs_insert(rs, x, bson_get_data(&b), b.len, &rid, &t->err);
    cr_assert_eq(rc, 0, "insert %d bytes: %s", len, t->err.message);
    mmt_commit(x);
    bson_destroy(&b);
    return rid;
}

static inline int mmt_update(mmt *t, eng_rs *rs, eng_rid rid, int id, int len, eng_rid *out,
                             bool *moved)
{
    bson_t b;
    mmt_doc(&b, id, len);
    eng_txn *x = mmt_begin(t);
    int rc = eng_rs_update(rs, x, rid, bson_get_data(&b), b.len, out, moved, &t->err);
    if (rc == 0)
        mmt_commit(x);
    else
        eng_txn_abort(x);
    bson_destroy(&b);
    return rc;
}

static inline void mmt_remove(mmt *t, eng_rs *rs, eng_rid rid)
{
    eng_txn *x = mmt_begin(t);
    cr_assert_eq(eng_rs_remove(rs, x, rid), 0);
    mmt_commit(x);
}

/* Through the ops table: robust to how eng.h names the stats wrapper. */
static inline void mmt_stats(eng_rs *rs, struct eng_rs_stats *s)
{
    memset(s, 0, sizeof *s);
    mm_engine_ops.rs_stats(rs, s);
}

/* lengthWithHeaders of the record behind rid. */
static inline int32_t mmt_reclen(eng_rs *rs, eng_rid rid)
{
    const uint8_t *p;
    uint32_t len;
    cr_assert_eq(eng_rs_get(rs, rid, &p, &len), 0);
    return ((const mm_record *)(p - MM_REC_HDR))->len;
}

static inline int64_t mmt_bson_int(const bson_t *b, const char *path)
{
    bson_iter_t it, f;
    cr_assert(bson_iter_init(&it, b) && bson_iter_find_descendant(&it, path, &f), "no %s", path);
    return bson_iter_as_int64(&f);
}

static inline double mmt_bson_double(const bson_t *b, const char *path)
{
    bson_iter_t it, f;
    cr_assert(bson_iter_init(&it, b) && bson_iter_find_descendant(&it, path, &f), "no %s", path);
    return bson_iter_as_double(&f);
}

/* Validate rs (full) into v (caller cleans up); returns the error count. */
static inline int mmt_validate(eng_rs *rs, eng_validate *v)
{
    eng_validate_init(v, true);
    cr_assert_eq(eng_rs_validate(rs, v), 0);
    return v->nerrors;
}

static inline char *mmt_errors(const eng_validate *v)
{
    return bson_as_relaxed_extended_json(&v->errors, NULL);
}

/* mm_verify of the whole engine must be clean. */
static inline void mmt_verify_clean(mmt *t)
{
    eng_validate v;
    eng_validate_init(&v, true);
    cr_assert_eq(mm_verify(t->e, &v), 0);
    char *s = mmt_errors(&v);
    cr_assert_eq(v.nerrors, 0, "verify: %s", s);
    bson_free(s);
    eng_validate_cleanup(&v);
}

/* Does the validate error list mention `needle`? */
static inline bool mmt_has_error(const eng_validate *v, const char *needle)
{
    char *s = mmt_errors(v);
    bool found = strstr(s, needle) != NULL;
    bson_free(s);
    return found;
}

/* In a child: open t->dir, create `ident` with options o, insert n
 * documents {_id: i} of len bytes (len 0: 60 + i * 29 % 300 bytes, sizes
 * that vary), the commit of every durable_every-th and of the last one
 * durable (durable_every 0: none), then die by SIGKILL.  The caller has
 * closed t->e: the child owns the directory until it dies. */
static inline void mmt_crash_writer(mmt *t, const char *ident, const eng_rs_options *o, int n,
                                    int len, int durable_every)
{
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        mmt c = *t;
        c.e = NULL;
        if (mmt_try_open(&c) != 0)
            _exit(3);
        eng_rs *rs;
        eng_txn *x;
        if (eng_txn_begin(c.e, &x) || eng_rs_create(c.e, x, ident, o, NULL) ||
            eng_txn_commit(x, true, NULL) || eng_rs_open(c.e, ident, &rs, NULL))
            _exit(4);
        for (int i = 1; i <= n; i++) {
            bson_t b;
            eng_rid rid;
            mmt_doc(&b, i, len > 0 ? len : 60 + (i * 29) % 300);
            bool durable = durable_every > 0 && (i % durable_every == 0 || i == n);
            if (eng_txn_begin(c.e, &x) ||
                eng_rs_insert(rs, x, bson_get_data(&b), b.len, &rid, NULL) ||
                eng_txn_commit(x, durable, NULL))
                _exit(5);
            bson_destroy(&b);
        }
        kill(getpid(), SIGKILL);
        _exit(6);
    }
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "child status %d", st);
}

/* Apply every commit to the files and drop the private view's copies, so
 * that bytes written to the files from outside show through. */
static inline void mmt_settle(mmt *t)
{
    cr_assert_eq(eng_flush(t->e, false, NULL), 0);
}

/* Overwrite bytes of data file n at ofs, as damage from outside. */
static inline void mmt_poke(mmt *t, int n, int64_t ofs, const void *p, size_t len)
{
    char path[128];
    mmt_settle(t);
    snprintf(path, sizeof path, "%s/test.%d", t->dir, n);
    int fd = open(path, O_RDWR);
    cr_assert(fd >= 0);
    cr_assert_eq(pwrite(fd, p, len, ofs), (ssize_t)len);
    close(fd);
}

static inline void mmt_poke32(mmt *t, int n, int64_t ofs, int32_t v)
{
    mmt_poke(t, n, ofs, &v, sizeof v);
}

static inline int64_t mmt_file_size(mmt *t, const char *suffix)
{
    char path[128];
    struct stat st;
    snprintf(path, sizeof path, "%s/test%s", t->dir, suffix);
    return stat(path, &st) == 0 ? (int64_t)st.st_size : -1;
}

/* append_stats of rs into an initialized *sub. */
static inline void mmt_engine_stats(eng_rs *rs, bson_t *sub)
{
    bson_init(sub);
    eng_rs_append_stats(rs, sub);
}

#endif /* TEST_MM_UTIL_H */
