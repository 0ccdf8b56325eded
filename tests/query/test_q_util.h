/*
 * test_q_util.h -- helpers shared by the command tests (tests/query/test_q_*.c):
 * a database in a fresh temporary directory on a named engine, commands as
 * JSON, and field lookups by dotted path in replies.
 *
 * Every command test runs its body once per registered engine
 * (FOR_EACH_ENGINE); mmapv1 is opened with tiny files so tests stay fast.
 * Everything here is static: each test file gets its own copy.
 */
#ifndef TEST_Q_UTIL_H
#define TEST_Q_UTIL_H

#include <criterion/criterion.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "eng.h"
#include "minidoc.h"

typedef struct tdb {
    md_db *db;
    char dir[256];
    const char *engine;
} tdb;

/* Engines that update in place report allocationStrategy, inPlaceUpdates
 * and moves in collStats; engines that rewrite every update do not. */
static inline bool t_in_place(const tdb *t)
{
    const eng_ops *ops = eng_find(t->engine);
    return ops && ops->has_damages;
}

static inline bool t_is_mmapv1(const tdb *t)
{
    return strcmp(t->engine, "mmapv1") == 0;
}

/* Engines that keep data across close/reopen. */
static inline bool t_persistent(const tdb *t)
{
    return strcmp(t->engine, "ephemeralForTest") != 0;
}

static inline bson_t *t_open_opts(const char *engine)
{
    return BCON_NEW("engine", BCON_UTF8(engine), "mmapv1", "{", "firstFileSize",
                    BCON_INT32(131072), "nsSize", BCON_INT32(65536), "}");
}

static inline void t_reopen(tdb *t)
{
    md_error err;
    bson_t *o = t_open_opts(t->engine);
    int rc = md_db_open(t->dir, o, &t->db, &err);
    bson_destroy(o);
    cr_assert_eq(rc, 0, "md_db_open(%s) on %s: %s", t->dir, t->engine, err.message);
}

static inline void t_open(tdb *t, const char *engine)
{
    snprintf(t->dir, sizeof t->dir, "/tmp/md_qtest_XXXXXX");
    cr_assert_not_null(mkdtemp(t->dir));
    t->engine = engine;
    t_reopen(t);
}

static int t_rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static inline void t_close(tdb *t)
{
    md_db_close(t->db);
    t->db = NULL;
    nftw(t->dir, t_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Run the body once per registered engine, with `t` open on it. */
/* Sleep ms milliseconds (idle timeouts, awaitData waits). */
static inline void t_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

#define FOR_EACH_ENGINE(t)                                                        \
    for (const eng_ops *const *e_ = eng_engines(); *e_; e_++)                     \
        for (int once_ = (t_open(&(t), (*e_)->name), 1); once_; once_ = 0, t_close(&(t)))

/* Run a JSON command (printf-style); the reply is returned (caller destroys). */
static inline bson_t *t_cmd(tdb *t, int *rc_out, const char *fmt, ...)
{
    char buf[64 * 1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    bson_t r;
    md_error err;
    int rc = md_db_command_json(t->db, buf, &r, &err);
    bson_t *reply = bson_copy(&r);
    bson_destroy(&r);
    if (rc_out)
        *rc_out = rc;
    return reply;
}

static inline bool t_find(const bson_t *b, const char *path, bson_iter_t *it)
{
    return bson_iter_init(it, b) && bson_iter_find_descendant(it, path, it);
}

static inline int64_t t_i64(const bson_t *b, const char *path)
{
    bson_iter_t it;
    char *json = bson_as_relaxed_extended_json(b, NULL);
    cr_assert(t_find(b, path, &it), "no field %s in %s", path, json);
    cr_assert(BSON_ITER_HOLDS_NUMBER(&it), "field %s is not a number in %s", path, json);
    bson_free(json);
    return bson_iter_as_int64(&it);
}

static inline double t_dbl(const bson_t *b, const char *path)
{
    bson_iter_t it;
    cr_assert(t_find(b, path, &it) && BSON_ITER_HOLDS_NUMBER(&it), "no number %s", path);
    return bson_iter_as_double(&it);
}

static inline const char *t_str(const bson_t *b, const char *path)
{
    bson_iter_t it;
    if (!t_find(b, path, &it) || !BSON_ITER_HOLDS_UTF8(&it))
        return "";
    return bson_iter_utf8(&it, NULL);
}

static inline bool t_has(const bson_t *b, const char *path)
{
    bson_iter_t it;
    return t_find(b, path, &it);
}

static inline int t_len(const bson_t *b, const char *path)
{
    bson_iter_t it, sub;
    int n = 0;
    if (!t_find(b, path, &it) || !BSON_ITER_HOLDS_ARRAY(&it))
        return -1;
    bson_iter_recurse(&it, &sub);
    while (bson_iter_next(&sub))
        n++;
    return n;
}

static inline char *t_json(const bson_t *b)
{
    return bson_as_relaxed_extended_json(b, NULL);
}

/* Assert ok: 1 and return the reply. */
#define T_OK(t, ...)                                                              \
    ({                                                                            \
        int rc_;                                                                  \
        bson_t *r_ = t_cmd((t), &rc_, __VA_ARGS__);                               \
        char *j_ = t_json(r_);                                                    \
        cr_assert_eq(rc_, 0, "[%s] command failed: %s", (t)->engine, j_);         \
        cr_assert_eq(t_dbl(r_, "ok"), 1.0);                                       \
        bson_free(j_);                                                            \
        r_;                                                                       \
    })

/* Assert ok: 0 with `code` (and errmsg containing `msg` if not NULL). */
#define T_ERR(t, code, msg, ...)                                                  \
    do {                                                                          \
        int rc_;                                                                  \
        bson_t *r_ = t_cmd((t), &rc_, __VA_ARGS__);                               \
        char *j_ = t_json(r_);                                                    \
        cr_assert_lt(rc_, 0, "[%s] expected failure: %s", (t)->engine, j_);       \
        cr_assert_eq(t_dbl(r_, "ok"), 0.0, "%s", j_);                             \
        cr_assert_eq(t_i64(r_, "code"), (code), "[%s] code: %s", (t)->engine, j_); \
        cr_assert(t_has(r_, "codeName") && t_has(r_, "errmsg"), "%s", j_);        \
        if ((msg) != NULL)                                                        \
            cr_assert(strstr(t_str(r_, "errmsg"), (msg) ? (msg) : "") != NULL,    \
                      "[%s] errmsg: %s", (t)->engine, j_);                        \
        bson_free(j_);                                                            \
        bson_destroy(r_);                                                         \
    } while (0)

/* Run and discard an ok command. */
#define T_RUN(t, ...) bson_destroy(T_OK((t), __VA_ARGS__))

#endif /* TEST_Q_UTIL_H */
