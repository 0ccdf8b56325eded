/*
 * q_plan_cache.c -- the plan cache (MongoDB's PlanCache, simplified): when
 * several plans fit a query, the trial's winner is remembered per query
 * shape -- the filter with its values reduced to their type, the sort and
 * the projection -- and later queries of that shape skip the trial.  The
 * cache of a collection is emptied when its indexes change (createIndexes,
 * dropIndexes, drop) or by planCacheClear; planCacheListQueryShapes lists
 * it.  As MongoDB 3.0's PlanCache::notifyOfWriteOp, a collection's cache
 * is also emptied after every Q_PLAN_CACHE_WRITES writes to it
 * (internalQueryCacheWriteOpsBetweenFlush), so that a choice made when the
 * data looked different is tried again: the Queue pattern's FIFO fetch, for
 * one, is best walking createdOn while few jobs are taken and best reading
 * only the waiting jobs once many are.  MongoDB 3.0 also evicts an entry
 * whose plan turns out much worse than during its trial; minidoc does not.
 */
#include <stdlib.h>
#include <string.h>

#include "q_int.h"
#include "q_path.h"

#define Q_PLAN_CACHE_MAX 200
#define Q_PLAN_CACHE_WRITES 1000

typedef struct q_plan_cache_ent {
    char *shape;
    size_t shape_len;
    char index[ENG_IDENT_MAX]; /* "" for a collection scan */
    bson_t *query, *sort, *proj;
    struct q_plan_cache_ent *next;
} q_plan_cache_ent;

/* The shape of a document: names and operators kept, values as type codes. */
static void shape_doc(const bson_t *d, q_buf *out)
{
    bson_iter_t it;
    if (!d || !bson_iter_init(&it, d))
        return;
    q_buf_putc(out, '{');
    while (bson_iter_next(&it)) {
        q_buf_puts(out, bson_iter_key(&it));
        q_buf_putc(out, ':');
        if (BSON_ITER_HOLDS_DOCUMENT(&it) || BSON_ITER_HOLDS_ARRAY(&it)) {
            bson_t sub;
            const uint8_t *data;
            uint32_t len;
            if (BSON_ITER_HOLDS_DOCUMENT(&it))
                bson_iter_document(&it, &len, &data);
            else
                bson_iter_array(&it, &len, &data);
            if (bson_init_static(&sub, data, len))
                shape_doc(&sub, out);
        } else {
            q_buf_printf(out, "%d", (int)bson_iter_type(&it));
        }
        q_buf_putc(out, ',');
    }
    q_buf_putc(out, '}');
}

void q_plan_shape(const bson_t *filter, const bson_t *sort, const bson_t *proj, q_buf *out)
{
    q_buf_reset(out);
    shape_doc(filter, out);
    q_buf_putc(out, '|');
    if (sort) {
        char *j = bson_as_relaxed_extended_json(sort, NULL);
        q_buf_puts(out, j);
        bson_free(j);
    }
    q_buf_putc(out, '|');
    if (proj) {
        char *j = bson_as_relaxed_extended_json(proj, NULL);
        q_buf_puts(out, j);
        bson_free(j);
    }
}

bool q_plan_cache_get(q_coll *c, const q_buf *shape, char *name)
{
    bool found = false;
    pthread_mutex_lock(&c->plan_mu);
    for (q_plan_cache_ent *e = c->plan_cache; e && !found; e = e->next)
        if (e->shape_len == shape->len && memcmp(e->shape, shape->data, shape->len) == 0) {
            snprintf(name, ENG_IDENT_MAX, "%s", e->index);
            found = true;
        }
    pthread_mutex_unlock(&c->plan_mu);
    return found;
}

static void cache_clear(q_coll *c)
{
    __atomic_store_n(&c->plan_writes, 0, __ATOMIC_RELAXED);
    while (c->plan_cache) {
        q_plan_cache_ent *e = c->plan_cache;
        c->plan_cache = e->next;
        free(e->shape);
        bson_destroy(e->query);
        bson_destroy(e->sort);
        bson_destroy(e->proj);
        free(e);
    }
}

static bson_t *copy_or_empty(const bson_t *b)
{
    return b ? bson_copy(b) : bson_new();
}

void q_plan_cache_put(q_coll *c, const q_buf *shape, const bson_t *filter, const bson_t *sort,
                      const bson_t *proj, const char *index)
{
    size_t n = 0;
    q_plan_cache_ent *e = calloc(1, sizeof *e);
    if (!e || !(e->shape = malloc(shape->len ? shape->len : 1))) {
        free(e);
        return;
    }
    memcpy(e->shape, shape->data, shape->len);
    e->shape_len = shape->len;
    snprintf(e->index, sizeof e->index, "%s", index);
    e->query = copy_or_empty(filter);
    e->sort = copy_or_empty(sort);
    e->proj = copy_or_empty(proj);
    pthread_mutex_lock(&c->plan_mu);
    for (q_plan_cache_ent *o = c->plan_cache; o; o = o->next)
        n++;
    if (n >= Q_PLAN_CACHE_MAX)
        cache_clear(c);
    e->next = c->plan_cache;
    c->plan_cache = e;
    pthread_mutex_unlock(&c->plan_mu);
}

void q_plan_cache_clear(q_coll *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->plan_mu);
    cache_clear(c);
    pthread_mutex_unlock(&c->plan_mu);
}

void q_plan_cache_note_write(q_coll *c)
{
    if (Q_COUNT(c->plan_writes, 1) + 1 >= Q_PLAN_CACHE_WRITES)
        q_plan_cache_clear(c);
}

int q_cmd_plan_cache_list(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err)
{
    const char *name;
    char ns[ENG_IDENT_MAX], k[24];
    bson_t arr, one;
    int rc = q_cmd_coll_name(db, cmd, false, &name, ns, err);
    if (rc)
        return rc;
    q_coll *c = q_coll_find(db, name);
    BSON_APPEND_ARRAY_BEGIN(reply, "shapes", &arr);
    size_t i = 0;
    if (c)
        pthread_mutex_lock(&c->plan_mu);
    for (q_plan_cache_ent *e = c ? c->plan_cache : NULL; e; e = e->next, i++) {
        snprintf(k, sizeof k, "%zu", i);
        bson_append_document_begin(&arr, k, -1, &one);
        BSON_APPEND_DOCUMENT(&one, "query", e->query);
        BSON_APPEND_DOCUMENT(&one, "sort", e->sort);
        BSON_APPEND_DOCUMENT(&one, "projection", e->proj);
        BSON_APPEND_UTF8(&one, "indexName", e->index[0] ? e->index : "$natural");
        bson_append_document_end(&arr, &one);
    }
    if (c)
        pthread_mutex_unlock(&c->plan_mu);
    bson_append_array_end(reply, &arr);
    return 0;
}

int q_cmd_plan_cache_clear(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err)
{
    const char *name;
    char ns[ENG_IDENT_MAX];
    (void)reply;
    int rc = q_cmd_coll_name(db, cmd, false, &name, ns, err);
    if (!rc)
        q_plan_cache_clear(q_coll_find(db, name));
    return rc;
}
