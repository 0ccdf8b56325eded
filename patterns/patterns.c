/*
 * patterns.c -- the few helpers every pattern shares (a per-user random
 * stream, the clock, a JSON command shortcut, the shell's collection
 * shortcuts, the checks a scenario's run and check share).  The registry
 * of patterns is registry.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "patterns.h"


uint64_t pt_rand_next(uint64_t *state)
{
    uint64_t x = *state ? *state : 0x9e3779b97f4a7c15ull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545f4914f6cdd1dull;
}

uint64_t pt_rand(pt_user *u)
{
    return pt_rand_next(&u->rng);
}

uint64_t pt_rand_below(pt_user *u, uint64_t n)
{
    return n ? pt_rand(u) % n : 0;
}

int64_t pt_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int pt_command_json(md_db *db, const char *json, md_error *err)
{
    bson_t reply;
    int rc = md_db_command_json(db, json, &reply, err);
    bson_destroy(&reply);
    return rc;
}

int pt_write(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err)
{
    bson_t r;
    bson_iter_t it, code;
    int rc = md_db_command(db, cmd, &r, err);
    if (!rc && bson_iter_init_find(&it, &r, "writeErrors")) {
        int c = bson_iter_init(&code, &r) &&
                        bson_iter_find_descendant(&code, "writeErrors.0.code", &code) &&
                        BSON_ITER_HOLDS_NUMBER(&code)
                    ? (int)bson_iter_as_int64(&code)
                    : MD_CODE_INTERNAL_ERROR;
        const char *msg = bson_iter_init(&it, &r) &&
                                  bson_iter_find_descendant(&it, "writeErrors.0.errmsg", &it) &&
                                  BSON_ITER_HOLDS_UTF8(&it)
                              ? bson_iter_utf8(&it, NULL)
                              : "write error";
        rc = md_error_set(err, MD_ERROR, c, "%s", msg);
    }
    if (!rc && reply)
        bson_steal(reply, &r);
    else
        bson_destroy(&r);
    return rc;
}

int pt_ensure_index(md_db *db, const char *coll, const bson_t *keys, const bson_t *opts,
                    md_error *err)
{
    md_collection *c = md_db_get_collection(db, coll);
    int rc = md_collection_create_index(c, keys, opts, NULL, err);
    md_collection_destroy(c);
    return rc;
}

int pt_find_one(md_db *db, const char *coll, const bson_t *filter, const bson_t *projection,
                bson_t *out, md_error *err)
{
    md_collection *c = md_db_get_collection(db, coll);
    bson_t opts = BSON_INITIALIZER;
    const bson_t *doc;
    int rc = MD_NOTFOUND;
    BSON_APPEND_INT32(&opts, "limit", 1);
    BSON_APPEND_BOOL(&opts, "singleBatch", true);
    if (projection)
        BSON_APPEND_DOCUMENT(&opts, "projection", projection);
    md_cursor *cur = md_collection_find_with_opts(c, filter, &opts);
    bson_init(out);
    if (md_cursor_next(cur, &doc)) {
        bson_destroy(out);
        bson_copy_to(doc, out);
        rc = 0;
    } else if (md_cursor_error(cur, err)) {
        rc = MD_ERROR;
    }
    md_cursor_destroy(cur);
    bson_destroy(&opts);
    md_collection_destroy(c);
    return rc;
}

int pt_each_doc(md_db *db, const char *coll, pt_doc_fn fn, void *arg, int64_t *n,
                md_error *err)
{
    md_collection *c = md_db_get_collection(db, coll);
    md_cursor *cur = md_collection_find_with_opts(c, NULL, NULL);
    const bson_t *doc;
    int rc = 0;
    if (n)
        *n = 0;
    while (rc == 0 && md_cursor_next(cur, &doc)) {
        if (n)
            ++*n;
        rc = fn(doc, arg, err);
    }
    if (rc == 0 && md_cursor_error(cur, err))
        rc = MD_ERROR;
    md_cursor_destroy(cur);
    md_collection_destroy(c);
    return rc;
}

typedef struct load_ctx {
    void **arr;
    size_t *n, cap, elsize;
    int (*add)(const bson_t *doc, void *slot, md_error *err);
} load_ctx;

static int load_one(const bson_t *doc, void *arg, md_error *err)
{
    load_ctx *l = arg;
    if (*l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        void *g = realloc(*l->arr, l->elsize * cap);
        if (!g)
            return MD_ENOMEM;
        *l->arr = g;
        l->cap = cap;
    }
    void *slot = (char *)*l->arr + l->elsize * (*l->n)++;
    memset(slot, 0, l->elsize);
    return l->add(doc, slot, err);
}

int pt_load_sorted(md_db *db, const char *coll, void **arr, size_t *n, size_t elsize,
                   int (*add)(const bson_t *doc, void *slot, md_error *err),
                   int (*cmp)(const void *, const void *), md_error *err)
{
    load_ctx l = {arr, n, *n, elsize, add};
    int rc = pt_each_doc(db, coll, load_one, &l, NULL, err);
    if (rc == 0)
        qsort(*arr, *n, elsize, cmp);
    return rc;
}

int pt_drop_if_exists(md_db *db, const char *coll, md_error *err)
{
    bson_t *cmd = BCON_NEW("drop", BCON_UTF8(coll));
    bson_t reply;
    md_error e;
    int rc = md_db_command(db, cmd, &reply, &e);
    bson_destroy(&reply);
    bson_destroy(cmd);
    if (rc && e.code != MD_CODE_NAMESPACE_NOT_FOUND) {
        if (err)
            *err = e;
        return rc;
    }
    return 0;
}

int pt_expect_none(md_db *db, const char *coll, const bson_t *filter, const char *what,
                   md_error *err)
{
    md_collection *c = md_db_get_collection(db, coll);
    int64_t n = 0;
    int rc = md_collection_count(c, filter, NULL, &n, err);
    md_collection_destroy(c);
    if (rc == 0 && n != 0)
        rc = md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE, "%lld %s", (long long)n, what);
    return rc;
}

int pt_user_refused(const pt_user *u, int rc, const char *fallback, md_error *err)
{
    if (rc != MD_NOTFOUND)
        return rc;
    char why[256];
    snprintf(why, sizeof why, "%.200s", err ? err->message : fallback);
    return md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE, "user %llu: %s",
                        (unsigned long long)u->id, why);
}

void pt_scenario_destroy(const pt_scenario *sc, void *state)
{
    if (sc->destroy)
        sc->destroy(state);
    else
        free(state);
}
