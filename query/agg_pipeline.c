/*
 * agg_pipeline.c -- the aggregation pipeline: the stage registry, parsing
 * a pipeline into stage objects, the optimizations MongoDB 4.0 makes
 * before it runs, the sources (a collection through the planner, or a
 * feed of documents for $facet), and the stage plumbing (agg_int.h).
 *
 * Optimizations, in this order:
 *   1. adjacent $match stages merge into one ({$and: [a, b]});
 *   2. a $match right after the source becomes the source's filter, so the
 *      planner picks an index for it (a $match using $expr or another
 *      operator the planner's matcher refuses stays a stage);
 *   3. a $sort right after that is offered to the planner: when the chosen
 *      plan delivers the order (an index scan), the $sort only passes its
 *      documents on;
 *   4. $sort followed by $limit: the sort keeps only the first n (top-k);
 *   5. a final inclusion $project of top-level fields right after the
 *      source (or its pushed $match/$sort) is offered to the planner as the
 *      scan's projection, which can then be covered by the index.
 * A leading $geoNear is the source itself (it runs a near query through
 * the geo index, agg_stage_geonear.c): none of 2-5 apply, and a $limit
 * right after it becomes its limit.
 *
 * The collection source takes the collection's lock only while it pulls
 * (its scan saved and the lock released between documents), so that
 * $lookup and $graphLookup can read other collections in between.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "agg_int.h"

/* ---- the registry ------------------------------------------------------------------- */

static const struct {
    const char *name;
    agg_parse_fn parse;
} stages[] = {
    {"$match", agg_parse_match},
    {"$project", agg_parse_project},
    {"$addFields", agg_parse_add_fields},
    {"$set", agg_parse_add_fields},
    {"$unset", agg_parse_unset},
    {"$group", agg_parse_group},
    {"$sort", agg_parse_sort},
    {"$limit", agg_parse_limit},
    {"$skip", agg_parse_skip},
    {"$unwind", agg_parse_unwind},
    {"$count", agg_parse_count},
    {"$sortByCount", agg_parse_sort_by_count},
    {"$replaceRoot", agg_parse_replace_root},
    {"$replaceWith", agg_parse_replace_with},
    {"$sample", agg_parse_sample},
    {"$redact", agg_parse_redact},
    {"$bucket", agg_parse_bucket},
    {"$bucketAuto", agg_parse_bucket_auto},
    {"$facet", agg_parse_facet},
    {"$lookup", agg_parse_lookup},
    {"$graphLookup", agg_parse_graph_lookup},
    {"$out", agg_parse_out},
    {"$collStats", agg_parse_coll_stats},
    {"$indexStats", agg_parse_index_stats},
    {"$geoNear", agg_parse_geonear},
};

agg_parse_fn agg_stage_lookup_parser(const char *name)
{
    for (size_t i = 0; i < sizeof stages / sizeof stages[0]; i++)
        if (strcmp(stages[i].name, name) == 0)
            return stages[i].parse;
    return NULL;
}

/* ---- lists and the stage base ------------------------------------------------------ */

void agg_list_push(agg_list *l, agg_stage *s)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 8;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
        assert(l->v);
    }
    l->v[l->n++] = s;
}

void agg_list_cleanup(agg_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        agg_stage_destroy(l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = l->cap = 0;
}

void *agg_stage_alloc(size_t size, const agg_stage_ops *ops, agg_ctx *ctx, const char *name,
                      const bson_iter_t *spec)
{
    agg_stage *s = q_zalloc(size);
    s->ops = ops;
    s->ctx = ctx;
    bson_init(&s->spec);
    if (spec)
        bson_append_iter(&s->spec, name, -1, spec);
    return s;
}

void agg_stage_free_base(agg_stage *s)
{
    bson_destroy(&s->spec);
}

void agg_stage_destroy(agg_stage *s)
{
    if (!s)
        return;
    s->ops->destroy(s);
    agg_stage_free_base(s);
    free(s);
}

void agg_stage_reset(agg_stage *s)
{
    for (; s; s = s->src)
        if (s->ops->reset)
            s->ops->reset(s);
}

int agg_check_time(agg_ctx *ctx, md_error *err)
{
    if (ctx->deadline_ms && q_now_ms() > ctx->deadline_ms)
        return q_err(err, MD_ERROR, AGG_CODE_MAX_TIME, "operation exceeded time limit");
    return 0;
}

int agg_pull(agg_stage *s, bson_t **out, md_error *err)
{
    int rc = agg_check_time(s->ctx, err);
    if (rc)
        return rc;
    return s->src->ops->next(s->src, out, err);
}

void agg_stage_explain_spec(agg_stage *s, bson_t *arr, const char *key)
{
    bson_append_document(arr, key, -1, &s->spec);
}

void agg_ctx_ready(agg_ctx *ctx)
{
    if (ctx->vars_ready)
        return;
    agg_vars_init(&ctx->vars, ctx->scope);
    ctx->vars_ready = true;
}

/* ---- the collection source ----------------------------------------------------------- */

typedef struct src_coll {
    agg_stage base;
    char name[ENG_IDENT_MAX];
    bson_t filter; /* the pushed $match ({} when none) */
    bson_t run;    /* filter AND the reset's extra condition */
    bson_t sort, proj;
    bool has_sort, has_proj;
    q_matcher *m;
    q_coll *c;
    q_scan scan;
    bool open, done, sort_provided;
    bool fresh; /* opened, not yet pulled: the collection lock is still held */
} src_coll;

static void src_coll_close(src_coll *s)
{
    if (s->open) {
        if (!s->fresh)
            q_coll_lock(s->base.ctx->db, s->c, false);
        q_scan_close(&s->scan);
        q_coll_unlock(s->base.ctx->db, s->c);
    }
    s->open = s->fresh = false;
    q_matcher_destroy(s->m);
    s->m = NULL;
}

static int src_coll_open(src_coll *s, md_error *err)
{
    md_db *db = s->base.ctx->db;
    s->c = q_coll_find(db, s->name);
    if (!s->c) {
        s->done = true;
        return 0;
    }
    int rc = q_matcher_new(&s->run, &s->m, err);
    if (rc)
        return rc;
    q_scan_opts o = {.sort = s->has_sort ? &s->sort : NULL, .proj = s->has_proj ? &s->proj : NULL};
    q_coll_lock(db, s->c, false);
    rc = q_scan_open_opts(&s->scan, db, s->c, &s->run, s->m, &o, err);
    if (rc) {
        q_coll_unlock(db, s->c);
        return rc;
    }
    /* the lock stays until the first pull, which comes next: every stage
     * pulls from its source before it touches another collection */
    s->open = s->fresh = true;
    s->sort_provided = s->has_sort && s->scan.plan.sort_provided;
    return 0;
}

static int src_coll_next(agg_stage *st, bson_t **out, md_error *err)
{
    src_coll *s = (src_coll *)st;
    md_db *db = st->ctx->db;
    eng_rid rid;
    bson_t view;
    int rc;
    if (s->done)
        return MD_NOTFOUND;
    if (!s->open && !s->m && (rc = src_coll_open(s, err)) != 0)
        return rc;
    if (s->done)
        return MD_NOTFOUND;
    if (s->fresh) {
        s->fresh = false;
        rc = 0;
    } else {
        q_coll_lock(db, s->c, false);
        rc = q_scan_restore(&s->scan);
    }
    if (rc == 0)
        rc = q_scan_next(&s->scan, &rid, &view);
    if (rc == 0) {
        *out = bson_copy(&view);
        q_scan_save(&s->scan);
    } else if (rc == MD_NOTFOUND) {
        s->done = true;
        rc = q_scan_error(&s->scan, err);
        rc = rc ? rc : MD_NOTFOUND;
        q_scan_close(&s->scan); /* at the end: nothing of the collection stays open */
        s->open = false;
    } else {
        q_read_error(rc, err);
    }
    q_coll_unlock(db, s->c);
    return rc;
}

static void src_coll_reset(agg_stage *st)
{
    src_coll *s = (src_coll *)st;
    src_coll_close(s);
    s->done = false;
}

static void src_coll_destroy(agg_stage *st)
{
    src_coll *s = (src_coll *)st;
    src_coll_close(s);
    bson_destroy(&s->filter);
    bson_destroy(&s->run);
    bson_destroy(&s->sort);
    bson_destroy(&s->proj);
}

static const agg_stage_ops src_coll_ops = {
    .name = "$cursor", .next = src_coll_next, .reset = src_coll_reset,
    .destroy = src_coll_destroy};

/* ---- the feed source ($facet) -------------------------------------------------------- */

typedef struct src_feed {
    agg_stage base;
    bson_t **docs;
    size_t n, pos;
} src_feed;

static int src_feed_next(agg_stage *st, bson_t **out, md_error *err)
{
    src_feed *s = (src_feed *)st;
    if (s->pos >= s->n)
        return MD_NOTFOUND;
    *out = bson_copy(s->docs[s->pos++]);
    return 0;
}

static void src_feed_reset(agg_stage *st)
{
    ((src_feed *)st)->pos = 0;
}

static void src_feed_destroy(agg_stage *st)
{
}

static const agg_stage_ops src_feed_ops = {
    .name = "$feed", .next = src_feed_next, .reset = src_feed_reset, .destroy = src_feed_destroy};

/* ---- the pipeline ----------------------------------------------------------------------- */

struct agg_pipeline {
    agg_ctx *ctx;
    agg_stage *src;
    agg_list stages; /* after the source, in order; stages.v[i]->src is the one before */
    int kind;
};

/* One stage document: {$name: spec} with exactly one field. */
static int parse_stage(agg_ctx *ctx, const bson_iter_t *el, bool sub, agg_list *out,
                       md_error *err)
{
    bson_iter_t it;
    if (!BSON_ITER_HOLDS_DOCUMENT(el))
        return q_err(err, MD_EINVAL, MD_CODE_TYPE_MISMATCH,
                     "Each element of the 'pipeline' array must be an object");
    bson_iter_recurse(el, &it);
    if (!bson_iter_next(&it))
        return q_err(err, MD_EINVAL, 40323,
                     "A pipeline stage specification object must contain exactly one field.");
    bson_iter_t spec = it;
    if (bson_iter_next(&it))
        return q_err(err, MD_EINVAL, 40323,
                     "A pipeline stage specification object must contain exactly one field.");
    const char *name = bson_iter_key(&spec);
    agg_parse_fn fn = agg_stage_lookup_parser(name);
    if (!fn)
        return q_err(err, MD_EINVAL, AGG_CODE_UNKNOWN_STAGE,
                     "Unrecognized pipeline stage name: '%s'", name);
    if (sub && (strcmp(name, "$out") == 0 || strcmp(name, "$geoNear") == 0))
        return q_err(err, MD_EINVAL, 40600, "%s is not allowed to be used within a %s stage",
                     name, ctx->depth > 0 ? "$lookup or $facet" : "sub-pipeline");
    return fn(ctx, &spec, out, err);
}

/* MongoDB's position rules: $out last, $collStats / $indexStats first. */
static int check_positions(const bson_iter_t *pipeline, md_error *err)
{
    bson_iter_t it, st;
    size_t i = 0, n = 0;
    bson_iter_recurse(pipeline, &it);
    while (bson_iter_next(&it))
        n++;
    bson_iter_recurse(pipeline, &it);
    for (; bson_iter_next(&it); i++) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &st) ||
            !bson_iter_next(&st))
            continue;
        const char *name = bson_iter_key(&st);
        if (strcmp(name, "$out") == 0 && i + 1 != n)
            return q_err(err, MD_EINVAL, 40601,
                         "$out can only be the final stage in the pipeline");
        if ((strcmp(name, "$collStats") == 0 || strcmp(name, "$indexStats") == 0 ||
             strcmp(name, "$geoNear") == 0) && i != 0)
            return q_err(err, MD_EINVAL, 40602, "%s is only valid as the first stage in a "
                         "pipeline.", name);
    }
    return 0;
}

/* Merge adjacent $match stages. */
static int merge_matches(agg_pipeline *p, md_error *err)
{
    for (size_t i = 0; i + 1 < p->stages.n; i++) {
        const bson_t *a = agg_match_filter(p->stages.v[i]);
        const bson_t *b = agg_match_filter(p->stages.v[i + 1]);
        if (!a || !b)
            continue;
        bson_t f = BSON_INITIALIZER, arr;
        BSON_APPEND_ARRAY_BEGIN(&f, "$and", &arr);
        BSON_APPEND_DOCUMENT(&arr, "0", a);
        BSON_APPEND_DOCUMENT(&arr, "1", b);
        bson_append_array_end(&f, &arr);
        agg_stage *m;
        int rc = agg_match_new(p->ctx, &f, &m, err);
        bson_destroy(&f);
        if (rc)
            return rc;
        agg_stage_destroy(p->stages.v[i]);
        agg_stage_destroy(p->stages.v[i + 1]);
        p->stages.v[i] = m;
        memmove(&p->stages.v[i + 1], &p->stages.v[i + 2],
                (p->stages.n - i - 2) * sizeof p->stages.v[0]);
        p->stages.n--;
        i--;
    }
    return 0;
}

static void remove_stage(agg_pipeline *p, size_t i)
{
    agg_stage_destroy(p->stages.v[i]);
    memmove(&p->stages.v[i], &p->stages.v[i + 1], (p->stages.n - i - 1) * sizeof p->stages.v[0]);
    p->stages.n--;
}

/* Steps 2-5 of the header. */
static int optimize(agg_pipeline *p, md_error *err)
{
    int rc = merge_matches(p, err);
    if (rc)
        return rc;
    for (size_t i = 0; i + 1 < p->stages.n; i++) {
        int64_t lim = agg_limit_value(p->stages.v[i + 1]);
        if (agg_sort_spec(p->stages.v[i]) && lim > 0)
            agg_sort_set_limit(p->stages.v[i], lim);
    }
    if (p->kind != AGG_SRC_COLL)
        return 0;
    if (p->stages.n && agg_stage_is_geonear(p->stages.v[0])) {
        /* the source is $geoNear itself; a $limit after it becomes its limit */
        int64_t lim = p->stages.n > 1 ? agg_limit_value(p->stages.v[1]) : -1;
        if (lim >= 0) {
            agg_geonear_absorb_limit(p->stages.v[0], lim);
            remove_stage(p, 1);
        }
        return 0;
    }
    src_coll *s = (src_coll *)p->src;
    const bson_t *f = p->stages.n ? agg_match_filter(p->stages.v[0]) : NULL;
    q_matcher *m = NULL;
    if (f && q_matcher_new(f, &m, NULL) == 0) {
        bson_reinit(&s->filter);
        bson_concat(&s->filter, f);
        remove_stage(p, 0);
    }
    q_matcher_destroy(m);
    size_t next = 0;
    const bson_t *sort = p->stages.n ? agg_sort_spec(p->stages.v[0]) : NULL;
    if (sort) {
        bson_copy_to(sort, &s->sort);
        s->has_sort = true;
        next = 1;
    }
    if (next < p->stages.n && next + 1 == p->stages.n &&
        agg_project_simple(p->stages.v[next], &s->proj))
        s->has_proj = true;
    bson_copy_to(&s->filter, &s->run);
    return 0;
}

static void chain(agg_pipeline *p)
{
    agg_stage *prev = p->src;
    for (size_t i = 0; i < p->stages.n; i++) {
        p->stages.v[i]->src = prev;
        prev = p->stages.v[i];
    }
}

int agg_pipeline_new(agg_ctx *ctx, const char *coll, int kind, const bson_iter_t *pipeline,
                     bool sub, agg_pipeline **out, md_error *err)
{
    bson_iter_t it;
    *out = NULL;
    if (!BSON_ITER_HOLDS_ARRAY(pipeline))
        return q_err(err, MD_EINVAL, MD_CODE_TYPE_MISMATCH,
                     "'pipeline' option must be specified as an array");
    agg_pipeline *p = calloc(1, sizeof *p);
    assert(p);
    p->ctx = ctx;
    p->kind = kind;
    if (kind == AGG_SRC_COLL) {
        src_coll *s = agg_stage_alloc(sizeof *s, &src_coll_ops, ctx, "$cursor", NULL);
        snprintf(s->name, sizeof s->name, "%s", coll);
        bson_init(&s->filter);
        bson_init(&s->run);
        bson_init(&s->sort);
        bson_init(&s->proj);
        p->src = &s->base;
    } else {
        p->src = agg_stage_alloc(sizeof(src_feed), &src_feed_ops, ctx, "$feed", NULL);
    }
    int rc = check_positions(pipeline, err);
    bson_iter_recurse(pipeline, &it);
    while (rc == 0 && bson_iter_next(&it))
        rc = parse_stage(ctx, &it, sub, &p->stages, err);
    if (rc == 0)
        rc = optimize(p, err);
    if (rc) {
        agg_pipeline_destroy(p);
        return rc;
    }
    chain(p);
    *out = p;
    return 0;
}

void agg_pipeline_destroy(agg_pipeline *p)
{
    if (!p)
        return;
    agg_list_cleanup(&p->stages);
    agg_stage_destroy(p->src);
    free(p);
}

int agg_pipeline_next(agg_pipeline *p, bson_t **out, md_error *err)
{
    agg_stage *last = p->stages.n ? p->stages.v[p->stages.n - 1] : p->src;
    if (p->stages.n && p->kind == AGG_SRC_COLL && ((src_coll *)p->src)->has_sort) {
        src_coll *s = (src_coll *)p->src;
        /* the first pull opens the scan; a $sort the plan provides passes on */
        if (!s->open && !s->done && !s->m) {
            int rc = src_coll_open(s, err);
            if (rc)
                return rc;
            if (s->sort_provided)
                agg_sort_set_provided(p->stages.v[0]);
        }
    }
    return last->ops->next(last, out, err);
}

void agg_pipeline_reset(agg_pipeline *p, const bson_t *filter)
{
    agg_stage *last = p->stages.n ? p->stages.v[p->stages.n - 1] : p->src;
    agg_stage_reset(last);
    if (p->kind != AGG_SRC_COLL)
        return;
    src_coll *s = (src_coll *)p->src;
    bson_reinit(&s->run);
    if (!filter || bson_empty(filter)) {
        bson_concat(&s->run, &s->filter);
        return;
    }
    if (bson_empty(&s->filter)) {
        bson_concat(&s->run, filter);
        return;
    }
    bson_t arr;
    BSON_APPEND_ARRAY_BEGIN(&s->run, "$and", &arr);
    BSON_APPEND_DOCUMENT(&arr, "0", filter);
    BSON_APPEND_DOCUMENT(&arr, "1", &s->filter);
    bson_append_array_end(&s->run, &arr);
}

void agg_pipeline_feed(agg_pipeline *p, bson_t **docs, size_t n)
{
    src_feed *s = (src_feed *)p->src;
    agg_stage *last = p->stages.n ? p->stages.v[p->stages.n - 1] : p->src;
    agg_stage_reset(last);
    s->docs = docs;
    s->n = n;
    s->pos = 0;
}

/* ---- explain ------------------------------------------------------------------------------ */

int agg_pipeline_explain(agg_pipeline *p, bson_t *out, md_error *err)
{
    char key[24];
    size_t k = 0, first = 0;
    if (p->stages.n && agg_stage_is_geonear(p->stages.v[0])) {
        int rc = agg_geonear_explain(p->stages.v[0], out, "0", err);
        if (rc)
            return rc;
        k = first = 1;
    } else if (p->kind == AGG_SRC_COLL) {
        src_coll *s = (src_coll *)p->src;
        bson_t st, cur;
        char ns[2 * ENG_IDENT_MAX];
        snprintf(ns, sizeof ns, "%s.%s", p->ctx->db->name, s->name);
        BSON_APPEND_DOCUMENT_BEGIN(out, "0", &st);
        BSON_APPEND_DOCUMENT_BEGIN(&st, "$cursor", &cur);
        BSON_APPEND_DOCUMENT(&cur, "query", &s->filter);
        if (s->has_sort)
            BSON_APPEND_DOCUMENT(&cur, "sort", &s->sort);
        if (s->has_proj)
            BSON_APPEND_DOCUMENT(&cur, "fields", &s->proj);
        q_coll *c = q_coll_find(p->ctx->db, s->name);
        int rc = q_explain_planner(p->ctx->db, c, ns, &s->filter, s->has_sort ? &s->sort : NULL,
                                   s->has_proj ? &s->proj : NULL, &cur, err);
        bson_append_document_end(&st, &cur);
        bson_append_document_end(out, &st);
        if (rc)
            return rc;
        k = 1;
    }
    for (size_t i = first; i < p->stages.n; i++, k++) {
        agg_stage *s = p->stages.v[i];
        snprintf(key, sizeof key, "%zu", k);
        if (s->ops->explain)
            s->ops->explain(s, out, key);
        else
            agg_stage_explain_spec(s, out, key);
    }
    return 0;
}

bool agg_cmd_writes(const bson_t *cmd)
{
    bson_iter_t it, st, sub;
    if (!bson_iter_init_find(&it, cmd, "pipeline") || !BSON_ITER_HOLDS_ARRAY(&it))
        return false;
    bson_iter_recurse(&it, &st);
    while (bson_iter_next(&st))
        if (BSON_ITER_HOLDS_DOCUMENT(&st) && bson_iter_recurse(&st, &sub) &&
            bson_iter_next(&sub) && strcmp(bson_iter_key(&sub), "$out") == 0)
            return true;
    return false;
}
