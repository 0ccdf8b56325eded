/*
 * ap_common.c -- what the Applied Design Patterns modules share (ap.h):
 * recording a measurement's rows and claims, the book's update / insert /
 * find through the public API, explain's verdict on a find, and the
 * engine counters (moves, in-place updates, bytes written) a write cost is
 * read from.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ap.h"
#include "pt_sim.h"

void ap_row_add(ap_result *r, double value, const char *unit, const char *fmt, ...)
{
    if (r->nrows >= AP_MAX_ROWS)
        return;
    ap_row *row = &r->rows[r->nrows++];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(row->what, sizeof row->what, fmt, ap);
    va_end(ap);
    row->value = value;
    snprintf(row->unit, sizeof row->unit, "%s", unit ? unit : "");
}

void ap_claim_set(ap_result *r, int k, bool holds, const char *fmt, ...)
{
    if (k < 0 || k >= AP_MAX_CLAIMS)
        return;
    r->claims[k].verdict = holds ? AP_HOLDS : AP_FAILS;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->claims[k].evidence, sizeof r->claims[k].evidence, fmt, ap);
    va_end(ap);
}

int64_t ap_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t reply_i64(const bson_t *b, const char *path)
{
    bson_iter_t it, f;
    if (bson_iter_init(&it, b) && bson_iter_find_descendant(&it, path, &f) &&
        BSON_ITER_HOLDS_NUMBER(&f))
        return bson_iter_as_int64(&f);
    return 0;
}

int ap_update(md_db *db, const char *coll, const bson_t *filter, const bson_t *update,
              bool upsert, bool multi, int64_t *matched, int64_t *modified, bool *upserted,
              md_error *err)
{
    md_collection *c = md_db_get_collection(db, coll);
    bson_t opts = BSON_INITIALIZER, reply;
    if (upsert)
        BSON_APPEND_BOOL(&opts, "upsert", true);
    int rc = multi ? md_collection_update_many(c, filter, update, &opts, &reply, err)
                   : md_collection_update_one(c, filter, update, &opts, &reply, err);
    if (rc == 0) {
        if (matched)
            *matched = reply_i64(&reply, "matchedCount");
        if (modified)
            *modified = reply_i64(&reply, "modifiedCount");
        if (upserted) {
            bson_iter_t it;
            *upserted = bson_iter_init_find(&it, &reply, "upsertedId");
        }
    }
    bson_destroy(&reply);
    bson_destroy(&opts);
    md_collection_destroy(c);
    return rc;
}

int ap_insert(md_db *db, const char *coll, const bson_t *doc, md_error *err)
{
    md_collection *c = md_db_get_collection(db, coll);
    int rc = md_collection_insert_one(c, doc, NULL, NULL, err);
    md_collection_destroy(c);
    return rc;
}

int ap_find(md_db *db, const char *coll, const bson_t *filter, const bson_t *opts, int64_t *n,
            bson_t *first, md_error *err)
{
    md_collection *c = md_db_get_collection(db, coll);
    md_cursor *cur = md_collection_find_with_opts(c, filter, opts);
    const bson_t *doc;
    int64_t k = 0;
    if (first)
        bson_init(first);
    while (md_cursor_next(cur, &doc)) {
        if (k == 0 && first) {
            bson_destroy(first);
            bson_copy_to(doc, first);
        }
        k++;
    }
    int rc = md_cursor_error(cur, err) ? MD_ERROR : 0;
    md_cursor_destroy(cur);
    md_collection_destroy(c);
    if (n)
        *n = k;
    return rc;
}

/* Walk a plan tree: the first IXSCAN's index, any COLLSCAN or SORT. */
static void walk_plan(bson_iter_t *plan, ap_plan *p)
{
    bson_iter_t it;
    if (!BSON_ITER_HOLDS_DOCUMENT(plan) || !bson_iter_recurse(plan, &it))
        return;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "stage") == 0 && BSON_ITER_HOLDS_UTF8(&it)) {
            const char *s = bson_iter_utf8(&it, NULL);
            if (strcmp(s, "COLLSCAN") == 0)
                p->collscan = true;
            else if (strcmp(s, "SORT") == 0)
                p->sort_in_memory = true;
        } else if (strcmp(k, "indexName") == 0 && BSON_ITER_HOLDS_UTF8(&it) && !p->index[0]) {
            snprintf(p->index, sizeof p->index, "%s", bson_iter_utf8(&it, NULL));
        } else if (strcmp(k, "inputStage") == 0) {
            walk_plan(&it, p);
        } else if (strcmp(k, "inputStages") == 0 && BSON_ITER_HOLDS_ARRAY(&it)) {
            bson_iter_t a;
            bson_iter_recurse(&it, &a);
            while (bson_iter_next(&a))
                walk_plan(&a, p);
        }
    }
}

int ap_explain_find(md_db *db, const char *coll, const bson_t *filter, const bson_t *sort,
                    ap_plan *plan, md_error *err)
{
    bson_t cmd = BSON_INITIALIZER, find, reply;
    memset(plan, 0, sizeof *plan);
    BSON_APPEND_DOCUMENT_BEGIN(&cmd, "explain", &find);
    BSON_APPEND_UTF8(&find, "find", coll);
    BSON_APPEND_DOCUMENT(&find, "filter", filter);
    if (sort)
        BSON_APPEND_DOCUMENT(&find, "sort", sort);
    bson_append_document_end(&cmd, &find);
    BSON_APPEND_UTF8(&cmd, "verbosity", "executionStats");
    int rc = md_db_command(db, &cmd, &reply, err);
    if (rc == 0) {
        bson_iter_t it, w;
        if (bson_iter_init(&it, &reply) &&
            bson_iter_find_descendant(&it, "queryPlanner.winningPlan", &w))
            walk_plan(&w, plan);
        plan->keys_examined = reply_i64(&reply, "executionStats.totalKeysExamined");
        plan->docs_examined = reply_i64(&reply, "executionStats.totalDocsExamined");
        plan->returned = reply_i64(&reply, "executionStats.nReturned");
    }
    bson_destroy(&reply);
    bson_destroy(&cmd);
    return rc;
}

int ap_counters_read(md_db *db, ap_counters *c, md_error *err)
{
    pt_counters pc;
    int rc = pt_counters_sample(db, &pc, err);
    c->moves = pc.moves;
    c->in_place = pc.in_place;
    c->bytes_written = pc.bytes_written;
    c->updates = pc.updates;
    return rc;
}

int ap_coll_counters_read(md_db *db, const char *coll, ap_counters *c, md_error *err)
{
    bson_t reply, cmd = BSON_INITIALIZER;
    char engine[32] = "", path[96];
    memset(c, 0, sizeof *c);
    int rc = md_db_command_json(db, "{\"serverStatus\": 1}", &reply, err);
    bson_iter_t it, f;
    if (rc == 0 && bson_iter_init(&it, &reply) &&
        bson_iter_find_descendant(&it, "storageEngine.name", &f) && BSON_ITER_HOLDS_UTF8(&f))
        snprintf(engine, sizeof engine, "%s", bson_iter_utf8(&f, NULL));
    bson_destroy(&reply);
    if (rc)
        return rc;
    BSON_APPEND_UTF8(&cmd, "collStats", coll);
    rc = md_db_command(db, &cmd, &reply, err);
    bson_destroy(&cmd);
    if (rc == 0) {
#define GET(field, name)                                            \
    snprintf(path, sizeof path, "%s." name, engine);                \
    c->field = reply_i64(&reply, path)
        GET(moves, "moves");
        GET(in_place, "inPlaceUpdates");
        GET(bytes_written, "bytesWritten");
        GET(updates, "updates");
#undef GET
    }
    bson_destroy(&reply);
    return rc;
}

ap_counters ap_counters_diff(const ap_counters *a, const ap_counters *b)
{
    ap_counters d = {
        .moves = b->moves - a->moves,
        .in_place = b->in_place - a->in_place,
        .bytes_written = b->bytes_written - a->bytes_written,
        .updates = b->updates - a->updates,
    };
    return d;
}

int ap_doc_size(md_db *db, const char *coll, const bson_value_t *id, int64_t *size,
                md_error *err)
{
    bson_t filter = BSON_INITIALIZER, doc;
    BSON_APPEND_VALUE(&filter, "_id", id);
    int64_t n = 0;
    int rc = ap_find(db, coll, &filter, NULL, &n, &doc, err);
    if (rc == 0 && n == 0)
        rc = md_error_set(err, MD_NOTFOUND, MD_CODE_NO_SUCH_KEY, "no document");
    if (rc == 0)
        *size = doc.len;
    bson_destroy(&doc);
    bson_destroy(&filter);
    return rc;
}
