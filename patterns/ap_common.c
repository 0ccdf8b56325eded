/*
 * ap_common.c -- what every "Applied Design Patterns" use case shares: the
 * metrics and claims of a measurement, the verdict of a claim and of a use
 * case, running one on a fresh database, and the pymongo-shaped helpers
 * the modules translate the book's Python into (update with upsert/multi
 * and updatedExisting, insert with a write concern, find, explain's plan
 * and counters, the engine counters a write's cost is read from).  The
 * list of use cases is ap_registry.c.
 */
#include <ftw.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ap.h"
#include "pt_sim.h"

void ap_set(ap_result *r, const char *name, double value, const char *unit)
{
    for (int i = 0; i < r->nmetrics; i++)
        if (strcmp(r->m[i].name, name) == 0) {
            r->m[i].value = value;
            snprintf(r->m[i].unit, sizeof r->m[i].unit, "%s", unit ? unit : "");
            return;
        }
    if (r->nmetrics == AP_MAX_METRICS)
        return;
    ap_metric *m = &r->m[r->nmetrics++];
    snprintf(m->name, sizeof m->name, "%s", name);
    m->value = value;
    snprintf(m->unit, sizeof m->unit, "%s", unit ? unit : "");
}

void ap_row_add(ap_result *r, double value, const char *unit, const char *fmt, ...)
{
    char name[sizeof r->m[0].name];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    ap_set(r, name, value, unit);
}

double ap_get(const ap_result *r, const char *name)
{
    for (int i = 0; i < r->nmetrics; i++)
        if (strcmp(r->m[i].name, name) == 0)
            return r->m[i].value;
    return NAN;
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

const char *ap_verdict_name(ap_verdict v)
{
    return v == AP_HOLDS ? "holds" : v == AP_FAILS ? "does not hold" : "n/a";
}

ap_verdict ap_claim_verdict(const ap_usecase *uc, int k, const ap_result *r, char *measured,
                            size_t n)
{
    if (r->rc) {
        snprintf(measured, n, "the measurement failed: %s", r->error);
        return AP_FAILS;
    }
    if (uc->claims[k].judge)
        return uc->claims[k].judge(r, measured, n);
    if (r->claims[k].verdict == AP_NA)
        snprintf(measured, n, "not decided by the measurement");
    else
        snprintf(measured, n, "%s", r->claims[k].evidence);
    return r->claims[k].verdict;
}

ap_verdict ap_usecase_verdict(const ap_usecase *uc, const ap_result *r, int *held, int *judged)
{
    char buf[512];
    int h = 0, j = 0;
    for (int i = 0; i < uc->nclaims; i++) {
        ap_verdict v = ap_claim_verdict(uc, i, r, buf, sizeof buf);
        if (v == AP_NA)
            continue;
        j++;
        h += v == AP_HOLDS;
    }
    if (held)
        *held = h;
    if (judged)
        *judged = j;
    return j == 0 ? AP_NA : h == j ? AP_HOLDS : AP_FAILS;
}

double ap_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

int ap_run_usecase(const ap_usecase *uc, const char *engine, const ap_args *a, ap_result *r,
                   md_error *err)
{
    char dir[4096];
    const char *tmp = getenv("TMPDIR");
    md_db *db;
    memset(r, 0, sizeof *r);
    snprintf(r->engine, sizeof r->engine, "%s", engine);
    snprintf(dir, sizeof dir, "%s/md_ap_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
        return md_error_set(err, MD_EIO, MD_CODE_INTERNAL_ERROR, "mkdtemp %s failed", dir);
    bson_t o = BSON_INITIALIZER, sub;
    BSON_APPEND_UTF8(&o, "engine", engine);
    if (strcmp(engine, "mmapv1") == 0) {
        BSON_APPEND_DOCUMENT_BEGIN(&o, "mmapv1", &sub);
        BSON_APPEND_INT32(&sub, "firstFileSize", 16 << 20);
        BSON_APPEND_BOOL(&sub, "journal", !a->no_journal);
        bson_append_document_end(&o, &sub);
    } else if (strcmp(engine, "btree") == 0) {
        BSON_APPEND_DOCUMENT_BEGIN(&o, "btree", &sub);
        BSON_APPEND_BOOL(&sub, "log", !a->no_journal);
        bson_append_document_end(&o, &sub);
    }
    int rc = md_db_open(dir, &o, &db, err);
    bson_destroy(&o);
    if (rc) {
        nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
        return rc;
    }
    ap_args args = *a;
    args.engine = r->engine;
    md_error merr;
    md_error_clear(&merr);
    double t0 = ap_now_s();
    r->rc = uc->measure(db, &args, r, &merr);
    r->seconds = ap_now_s() - t0;
    if (r->rc)
        snprintf(r->error, sizeof r->error, "%.200s (%s)", merr.message, md_strerror(r->rc));
    md_db_close(db);
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

/* ---- pymongo's shapes ------------------------------------------------------ */

static int64_t path_int(const bson_t *b, const char *path)
{
    bson_iter_t it, d;
    if (bson_iter_init(&it, b) && bson_iter_find_descendant(&it, path, &d) &&
        BSON_ITER_HOLDS_NUMBER(&d))
        return bson_iter_as_int64(&d);
    return 0;
}

int ap_update(md_db *db, const char *coll, const bson_t *q, const bson_t *u, bool upsert,
              bool multi, bool *updated_existing, int64_t *matched, int64_t *modified,
              bool *upserted, md_error *err)
{
    md_collection *c = md_db_get_collection(db, coll);
    bson_t opts = BSON_INITIALIZER, reply;
    if (upsert)
        BSON_APPEND_BOOL(&opts, "upsert", true);
    bson_init(&reply);
    int rc = multi ? md_collection_update_many(c, q, u, &opts, &reply, err)
                   : md_collection_update_one(c, q, u, &opts, &reply, err);
    int64_t m = rc == 0 ? path_int(&reply, "matchedCount") : 0;
    if (updated_existing)
        *updated_existing = m > 0;
    if (matched)
        *matched = m;
    if (modified)
        *modified = rc == 0 ? path_int(&reply, "modifiedCount") : 0;
    if (upserted) {
        bson_iter_t it;
        *upserted = rc == 0 && bson_iter_init_find(&it, &reply, "upsertedId");
    }
    bson_destroy(&reply);
    bson_destroy(&opts);
    md_collection_destroy(c);
    return rc;
}

int ap_insert(md_db *db, const char *coll, const bson_t *doc, const bson_t *wc, md_error *err)
{
    md_collection *c = md_db_get_collection(db, coll);
    bson_t opts = BSON_INITIALIZER;
    if (wc)
        BSON_APPEND_DOCUMENT(&opts, "writeConcern", wc);
    int rc = md_collection_insert_one(c, doc, &opts, NULL, err);
    bson_destroy(&opts);
    md_collection_destroy(c);
    return rc;
}

int ap_remove(md_db *db, const char *coll, const bson_t *q, int64_t *n, md_error *err)
{
    md_collection *c = md_db_get_collection(db, coll);
    bson_t reply;
    bson_init(&reply);
    int rc = md_collection_delete_many(c, q, NULL, &reply, err);
    if (n)
        *n = rc == 0 ? path_int(&reply, "deletedCount") : 0;
    bson_destroy(&reply);
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

int ap_find_copies(md_db *db, const char *coll, const bson_t *filter, bson_t **out, int max,
                   int *n, md_error *err)
{
    md_collection *c = md_db_get_collection(db, coll);
    md_cursor *cur = md_collection_find_with_opts(c, filter, NULL);
    const bson_t *d;
    int k = 0;
    while (k < max && md_cursor_next(cur, &d))
        out[k++] = bson_copy(d);
    int rc = md_cursor_error(cur, err) ? MD_ERROR : 0;
    md_cursor_destroy(cur);
    md_collection_destroy(c);
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
                    const bson_t *hint, ap_plan *plan, md_error *err)
{
    bson_t cmd = BSON_INITIALIZER, find, reply;
    memset(plan, 0, sizeof *plan);
    BSON_APPEND_DOCUMENT_BEGIN(&cmd, "explain", &find);
    BSON_APPEND_UTF8(&find, "find", coll);
    BSON_APPEND_DOCUMENT(&find, "filter", filter);
    if (sort)
        BSON_APPEND_DOCUMENT(&find, "sort", sort);
    if (hint)
        BSON_APPEND_DOCUMENT(&find, "hint", hint);
    bson_append_document_end(&cmd, &find);
    BSON_APPEND_UTF8(&cmd, "verbosity", "executionStats");
    int rc = md_db_command(db, &cmd, &reply, err);
    if (rc == 0) {
        bson_iter_t it, w;
        if (bson_iter_init(&it, &reply) &&
            bson_iter_find_descendant(&it, "queryPlanner.winningPlan", &w))
            walk_plan(&w, plan);
        plan->keys_examined = path_int(&reply, "executionStats.totalKeysExamined");
        plan->docs_examined = path_int(&reply, "executionStats.totalDocsExamined");
        plan->n_returned = path_int(&reply, "executionStats.nReturned");
        plan->millis = path_int(&reply, "executionStats.executionTimeMillis");
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

int ap_coll_stats_get(md_db *db, const char *coll, ap_coll_stats *out, md_error *err)
{
    bson_t cmd = BSON_INITIALIZER, reply;
    bson_iter_t it;
    char engine[32] = "", path[96];
    memset(out, 0, sizeof *out);
    int rc = md_db_command_json(db, "{\"serverStatus\": 1}", &reply, err);
    if (rc == 0) {
        out->moves = path_int(&reply, "metrics.record.moves");
        if (bson_iter_init(&it, &reply) &&
            bson_iter_find_descendant(&it, "storageEngine.name", &it) &&
            BSON_ITER_HOLDS_UTF8(&it))
            snprintf(engine, sizeof engine, "%s", bson_iter_utf8(&it, NULL));
    }
    bson_destroy(&reply);
    if (rc)
        return rc;
    BSON_APPEND_UTF8(&cmd, "collStats", coll);
    rc = md_db_command(db, &cmd, &reply, err);
    if (rc == 0) {
        out->count = path_int(&reply, "count");
        out->size = path_int(&reply, "size");
        out->storage_size = path_int(&reply, "storageSize");
        snprintf(path, sizeof path, "%s.bytesWritten", engine);
        out->bytes_written = path_int(&reply, path);
        snprintf(path, sizeof path, "%s.updates", engine);
        out->updates = path_int(&reply, path);
        snprintf(path, sizeof path, "%s.inPlaceUpdates", engine);
        out->in_place = path_int(&reply, path);
        snprintf(path, sizeof path, "%s.moves", engine);
        out->coll_moves = path_int(&reply, path);
    }
    bson_destroy(&reply);
    bson_destroy(&cmd);
    return rc;
}

int64_t ap_doc_size(md_db *db, const char *coll, const bson_t *q)
{
    bson_t doc;
    int64_t n = 0;
    if (pt_find_one(db, coll, q, NULL, &doc, NULL) == 0)
        n = doc.len;
    bson_destroy(&doc);
    return n;
}
