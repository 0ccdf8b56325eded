/*
 * agg_cmd.c -- the aggregate command (MongoDB 4.0's shape):
 *
 *   {aggregate: "c", pipeline: [...], cursor: {batchSize: n},
 *    explain: bool, allowDiskUse: bool, maxTimeMS: n, hint, comment,
 *    collation: {locale: "simple"} only}
 *
 * The pipeline runs to its end inside the command, and its results are
 * handed to the cursor machinery (q_cursor.c) as a materialized cursor:
 * the first batch comes back at once, getMore and killCursors work as for
 * find.  (MongoDB streams the results of a non-blocking pipeline batch by
 * batch; minidoc computes them all first, so a pipeline's results are
 * bounded by memory.  Documented in the README.)
 *
 * The memory limits of the blocking stages are MongoDB's 100 MB, or what
 * the open options / setParameter internalDocumentSourceGroupMaxMemoryBytes
 * and internalDocumentSourceSortMaxBlockingSortBytes say (so that tests can
 * force a spill with a small limit).
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "agg_int.h"

typedef struct agg_req {
    const char *coll;
    char ns[ENG_IDENT_MAX];
    bson_iter_t pipeline;
    int64_t batch_size; /* -1: default */
    bool explain, allow_disk, has_cursor;
    int64_t max_time_ms;
} agg_req;

static int parse_cursor(const bson_iter_t *it, agg_req *r, md_error *err)
{
    bson_iter_t c;
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return q_err(err, MD_EINVAL, MD_CODE_TYPE_MISMATCH,
                     "cursor field must be missing or an object");
    bson_iter_recurse(it, &c);
    while (bson_iter_next(&c)) {
        if (strcmp(bson_iter_key(&c), "batchSize") != 0)
            return q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE,
                         "cursor option can't contain fields other than batchSize");
        if (!BSON_ITER_HOLDS_NUMBER(&c))
            return q_err(err, MD_EINVAL, MD_CODE_TYPE_MISMATCH,
                         "cursor.batchSize must be a number");
        r->batch_size = bson_iter_as_int64(&c);
        if (r->batch_size < 0)
            return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                         "Cursor batchSize must not be negative");
    }
    r->has_cursor = true;
    return 0;
}

static int parse_bool(const bson_iter_t *it, const char *name, bool *out, md_error *err)
{
    if (!BSON_ITER_HOLDS_BOOL(it))
        return q_err(err, MD_EINVAL, MD_CODE_TYPE_MISMATCH, "%s must be a boolean, not a %s",
                     name, q_type_name(bson_iter_type(it)));
    *out = bson_iter_bool(it);
    return 0;
}

/* Collation: only the simple one (minidoc compares strings bytewise). */
static int parse_collation(const bson_iter_t *it, md_error *err)
{
    bson_iter_t c;
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return q_err(err, MD_EINVAL, MD_CODE_TYPE_MISMATCH,
                     "collation must be an object, not a %s", q_type_name(bson_iter_type(it)));
    bson_iter_recurse(it, &c);
    if (bson_iter_next(&c) && strcmp(bson_iter_key(&c), "locale") == 0 &&
        BSON_ITER_HOLDS_UTF8(&c) && strcmp(bson_iter_utf8(&c, NULL), "simple") == 0 &&
        !bson_iter_next(&c))
        return 0;
    return q_err(err, MD_EINVAL, MD_CODE_NOT_YET_IMPLEMENTED,
                 "collation other than {locale: \"simple\"} is not supported by minidoc");
}

static int parse_field(md_db *db, const bson_iter_t *it, agg_req *r, md_error *err)
{
    const char *k = bson_iter_key(it);
    if (strcmp(k, "pipeline") == 0) {
        r->pipeline = *it;
        if (!BSON_ITER_HOLDS_ARRAY(it))
            return q_err(err, MD_EINVAL, MD_CODE_TYPE_MISMATCH,
                         "'pipeline' option must be specified as an array");
        return 0;
    }
    if (strcmp(k, "cursor") == 0)
        return parse_cursor(it, r, err);
    if (strcmp(k, "explain") == 0)
        return parse_bool(it, "explain", &r->explain, err);
    if (strcmp(k, "allowDiskUse") == 0)
        return parse_bool(it, "allowDiskUse", &r->allow_disk, err);
    if (strcmp(k, "collation") == 0)
        return parse_collation(it, err);
    if (strcmp(k, "maxTimeMS") == 0) {
        if (!BSON_ITER_HOLDS_NUMBER(it) || !q_iter_int64(it, &r->max_time_ms) ||
            r->max_time_ms < 0)
            return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                         "maxTimeMS must be a non-negative integer");
        return 0;
    }
    if (strcmp(k, "hint") == 0 || strcmp(k, "comment") == 0 ||
        strcmp(k, "bypassDocumentValidation") == 0 || q_is_generic_arg(k))
        return 0;
    return q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE, "unrecognized field '%s'", k);
}

static int parse_request(md_db *db, const bson_t *cmd, agg_req *r, md_error *err)
{
    bson_iter_t it;
    memset(r, 0, sizeof *r);
    r->batch_size = -1;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    if (!BSON_ITER_HOLDS_UTF8(&it))
        return q_err(err, MD_EINVAL, MD_CODE_INVALID_NAMESPACE,
                     "{aggregate: %s} is not valid: minidoc aggregates over a collection, "
                     "given by name", q_type_name(bson_iter_type(&it)));
    int rc = q_cmd_coll_name(db, cmd, false, &r->coll, r->ns, err);
    bool have_pipeline = false;
    while (rc == 0 && bson_iter_next(&it)) {
        rc = parse_field(db, &it, r, err);
        have_pipeline |= strcmp(bson_iter_key(&it), "pipeline") == 0;
    }
    if (rc)
        return rc;
    if (!have_pipeline)
        return q_err(err, MD_EINVAL, MD_CODE_TYPE_MISMATCH,
                     "'pipeline' option must be specified as an array");
    if (!r->has_cursor && !r->explain)
        return q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE,
                     "The 'cursor' option is required, except for aggregate with the explain "
                     "argument");
    if (r->explain && agg_cmd_writes(cmd))
        return q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE,
                     "Cannot use $out with explain");
    return 0;
}

void agg_ctx_init(agg_ctx *ctx, md_db *db, const char *coll)
{
    memset(ctx, 0, sizeof *ctx);
    ctx->db = db;
    ctx->coll = coll;
    ctx->scope = agg_scope_new();
    ctx->sort_mem = db->agg_sort_mem > 0 ? db->agg_sort_mem : AGG_MEM_DEFAULT;
    ctx->group_mem = db->agg_group_mem > 0 ? db->agg_group_mem : AGG_MEM_DEFAULT;
}

void agg_ctx_cleanup(agg_ctx *ctx)
{
    if (ctx->vars_ready)
        agg_vars_cleanup(&ctx->vars);
    agg_scope_destroy(ctx->scope);
}

/* Run p to its end into a growing array. */
static int drain(agg_pipeline *p, bson_t ***docs, size_t *n, md_error *err)
{
    size_t cap = 0;
    bson_t *d;
    int rc;
    *docs = NULL;
    *n = 0;
    while ((rc = agg_pipeline_next(p, &d, err)) == 0) {
        if (*n == cap) {
            cap = cap ? 2 * cap : 64;
            *docs = realloc(*docs, cap * sizeof **docs);
            assert(*docs);
        }
        (*docs)[(*n)++] = d;
    }
    return rc == MD_NOTFOUND ? 0 : rc;
}

static void free_docs(bson_t **docs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        bson_destroy(docs[i]);
    free(docs);
}

int q_cmd_aggregate(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err)
{
    agg_req r;
    agg_ctx ctx;
    agg_pipeline *p = NULL;
    int rc = parse_request(db, cmd, &r, err);
    if (rc)
        return rc;
    agg_ctx_init(&ctx, db, r.coll);
    ctx.allow_disk = r.allow_disk;
    if (r.max_time_ms > 0)
        ctx.deadline_ms = q_now_ms() + r.max_time_ms;
    rc = agg_pipeline_new(&ctx, r.coll, AGG_SRC_COLL, &r.pipeline, false, &p, err);
    if (rc)
        goto out;
    agg_ctx_ready(&ctx);
    if (r.explain) {
        bson_t stages;
        BSON_APPEND_ARRAY_BEGIN(reply, "stages", &stages);
        rc = agg_pipeline_explain(p, &stages, err);
        bson_append_array_end(reply, &stages);
        goto out;
    }
    bson_t **docs;
    size_t n;
    rc = drain(p, &docs, &n, err);
    agg_pipeline_destroy(p);
    p = NULL;
    if (rc) {
        free_docs(docs, n);
        goto out;
    }
    /* the cursor keeps c only to die with it (drop kills its cursors) */
    rc = q_cursor_from_docs(db, q_coll_find(db, r.coll), r.ns, docs, n, r.batch_size, reply,
                            err);
out:
    agg_pipeline_destroy(p);
    agg_ctx_cleanup(&ctx);
    return rc;
}
