/*
 * agg_stage_lookup.c -- the stages that read other collections or run
 * sub-pipelines: $lookup (localField/foreignField, and let/pipeline),
 * $graphLookup and $facet.
 *
 * $lookup with localField collects every value the local path reaches
 * (through arrays, as MongoDB 4.0's visitAllValuesAtPath) and asks the
 * foreign collection, through the planner (an index on foreignField is
 * used), for {foreignField: {$eq: v}} or {foreignField: {$in: [...]}}; a
 * missing local value matches null or missing foreign fields.  A missing
 * foreign collection gives empty arrays.  With let/pipeline, the let
 * variables are evaluated against the input document and the
 * sub-pipeline (parsed once) is reset and run again for every document.
 *
 * $graphLookup searches breadth first: the startWith values, then the
 * connectFromField values of each new document, each round one query
 * {connectToField: {$in: frontier}} (and restrictSearchWithMatch), every
 * document once (by _id), up to maxDepth rounds.
 *
 * $facet buffers its input once and feeds it to each facet's pipeline.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "agg_int.h"

/* ---- shared helpers ------------------------------------------------------------------- */

static void arr_push(bson_t *arr, uint32_t *n, const bson_iter_t *v)
{
    char k[24];
    snprintf(k, sizeof k, "%u", (*n)++);
    bson_append_iter(arr, k, -1, v);
}

/* Every value path reaches in data: through documents and arrays, a final
 * array giving its elements. */
static void visit_path(const uint8_t *data, uint32_t len, const char *path, bson_t *arr,
                       uint32_t *n)
{
    bson_iter_t it;
    const char *dot = strchr(path, '.');
    size_t plen = dot ? (size_t)(dot - path) : strlen(path);
    if (!bson_iter_init_from_data(&it, data, len))
        return;
    while (bson_iter_next(&it)) {
        if (bson_iter_key_len(&it) != plen || memcmp(bson_iter_key(&it), path, plen) != 0)
            continue;
        bson_iter_t sub;
        const uint8_t *d;
        uint32_t l;
        if (!dot) {
            if (BSON_ITER_HOLDS_ARRAY(&it) && bson_iter_recurse(&it, &sub)) {
                while (bson_iter_next(&sub))
                    arr_push(arr, n, &sub);
            } else {
                arr_push(arr, n, &it);
            }
        } else if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
            bson_iter_document(&it, &l, &d);
            visit_path(d, l, dot + 1, arr, n);
        } else if (BSON_ITER_HOLDS_ARRAY(&it) && bson_iter_recurse(&it, &sub)) {
            while (bson_iter_next(&sub))
                if (BSON_ITER_HOLDS_DOCUMENT(&sub)) {
                    bson_iter_document(&sub, &l, &d);
                    visit_path(d, l, dot + 1, arr, n);
                }
        }
        return;
    }
}

/* Every document of collection `coll` matching filter, into docs (grown). */
static int query_coll(agg_ctx *ctx, const char *coll, const bson_t *filter, bson_t ***docs,
                      size_t *n, size_t *cap, md_error *err)
{
    q_coll *c = q_coll_find(ctx->db, coll);
    q_matcher *m = NULL;
    q_scan s;
    eng_rid rid;
    bson_t view;
    if (!c)
        return 0;
    int rc = q_matcher_new(filter, &m, err);
    if (rc)
        return rc;
    q_coll_lock(ctx->db, c, false);
    rc = q_scan_open(&s, ctx->db, c, filter, m, err);
    if (rc == 0) {
        while ((rc = q_scan_next(&s, &rid, &view)) == 0) {
            if (*n == *cap) {
                *cap = *cap ? 2 * *cap : 16;
                *docs = realloc(*docs, *cap * sizeof **docs);
                assert(*docs);
            }
            (*docs)[(*n)++] = bson_copy(&view);
        }
        rc = rc == MD_NOTFOUND ? q_scan_error(&s, err) : q_read_error(rc, err);
        q_scan_close(&s);
    }
    q_coll_unlock(ctx->db, c);
    q_matcher_destroy(m);
    return rc;
}

static void docs_free(bson_t **docs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        bson_destroy(docs[i]);
    free(docs);
}

/* {path: {$eq: v}} for one value, {path: {$in: [...]}} for several, and
 * {path: {$eq: null}} for none. */
static void eq_or_in(bson_t *filter, const char *path, bson_t *vals, uint32_t n)
{
    bson_t cond;
    bson_iter_t it;
    BSON_APPEND_DOCUMENT_BEGIN(filter, path, &cond);
    if (n == 0) {
        BSON_APPEND_NULL(&cond, "$eq");
    } else if (n == 1 && bson_iter_init(&it, vals) && bson_iter_next(&it) &&
               !BSON_ITER_HOLDS_REGEX(&it)) {
        bson_append_iter(&cond, "$eq", 3, &it);
    } else {
        BSON_APPEND_ARRAY(&cond, "$in", vals);
    }
    bson_append_document_end(filter, &cond);
}

static void append_docs_array(bson_t *doc, const char *as, bson_t **docs, size_t n, bson_t *out)
{
    bson_t arr = BSON_INITIALIZER;
    char k[24];
    for (size_t i = 0; i < n; i++) {
        snprintf(k, sizeof k, "%zu", i);
        BSON_APPEND_DOCUMENT(&arr, k, docs[i]);
    }
    bson_value_t v = {.value_type = BSON_TYPE_ARRAY};
    v.value.v_doc.data = (uint8_t *)bson_get_data(&arr);
    v.value.v_doc.data_len = arr.len;
    agg_doc_set_path(doc, as, &v, out);
    bson_destroy(&arr);
}

static int need_string(const bson_iter_t *it, const char *stage, int code, const char **out,
                       md_error *err)
{
    if (!BSON_ITER_HOLDS_UTF8(it))
        return q_err(err, MD_EINVAL, code, "%s argument '%s' must be a string, is type %s",
                     stage, bson_iter_key(it), q_type_name(bson_iter_type(it)));
    *out = bson_iter_utf8(it, NULL);
    return 0;
}

/* ---- $lookup ---------------------------------------------------------------------------------- */

typedef struct let_var {
    int slot;
    agg_expr *e;
} let_var;

typedef struct st_lookup {
    agg_stage base;
    char *from, *as, *local, *foreign;
    agg_pipeline *sub; /* the let/pipeline form */
    let_var *lets;
    size_t nlets;
} st_lookup;

static int lookup_equality(st_lookup *s, const bson_t *in, bson_t **out, md_error *err)
{
    bson_t vals = BSON_INITIALIZER, filter = BSON_INITIALIZER;
    uint32_t n = 0;
    bson_t **docs = NULL;
    size_t nd = 0, cap = 0;
    visit_path(bson_get_data(in), in->len, s->local, &vals, &n);
    eq_or_in(&filter, s->foreign, &vals, n);
    int rc = query_coll(s->base.ctx, s->from, &filter, &docs, &nd, &cap, err);
    if (rc == 0) {
        bson_t res;
        append_docs_array((bson_t *)in, s->as, docs, nd, &res);
        *out = bson_copy(&res);
        bson_destroy(&res);
    }
    docs_free(docs, nd);
    bson_destroy(&vals);
    bson_destroy(&filter);
    return rc;
}

static int lookup_pipeline(st_lookup *s, const bson_t *in, bson_t **out, md_error *err)
{
    agg_ctx *ctx = s->base.ctx;
    bson_t **docs = NULL, *d;
    size_t nd = 0, cap = 0;
    int rc = 0;
    for (size_t i = 0; i < s->nlets && rc == 0; i++) {
        bson_value_t v;
        agg_vars_set_root(&ctx->vars, in);
        rc = agg_expr_eval(s->lets[i].e, &ctx->vars, &v, err);
        if (rc == 0)
            agg_vars_set(&ctx->vars, s->lets[i].slot, &v);
        agg_value_destroy(&v);
    }
    if (rc)
        return rc;
    agg_pipeline_reset(s->sub, NULL);
    while ((rc = agg_pipeline_next(s->sub, &d, err)) == 0) {
        if (nd == cap) {
            cap = cap ? 2 * cap : 16;
            docs = realloc(docs, cap * sizeof *docs);
            assert(docs);
        }
        docs[nd++] = d;
    }
    if (rc == MD_NOTFOUND) {
        bson_t res;
        append_docs_array((bson_t *)in, s->as, docs, nd, &res);
        *out = bson_copy(&res);
        bson_destroy(&res);
        rc = 0;
    }
    docs_free(docs, nd);
    return rc;
}

static int lookup_next(agg_stage *st, bson_t **out, md_error *err)
{
    st_lookup *s = (st_lookup *)st;
    bson_t *in;
    int rc = agg_pull(st, &in, err);
    if (rc)
        return rc;
    rc = s->sub ? lookup_pipeline(s, in, out, err) : lookup_equality(s, in, out, err);
    bson_destroy(in);
    return rc;
}

static void lookup_destroy(agg_stage *st)
{
    st_lookup *s = (st_lookup *)st;
    free(s->from);
    free(s->as);
    free(s->local);
    free(s->foreign);
    agg_pipeline_destroy(s->sub);
    for (size_t i = 0; i < s->nlets; i++)
        agg_expr_destroy(s->lets[i].e);
    free(s->lets);
}

static const agg_stage_ops lookup_ops = {.name = "$lookup", .next = lookup_next,
                                         .destroy = lookup_destroy};

static int lookup_lets(agg_ctx *ctx, st_lookup *s, const bson_iter_t *let, md_error *err)
{
    bson_iter_t it;
    if (!BSON_ITER_HOLDS_DOCUMENT(let))
        return q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE,
                     "$lookup argument 'let' must be an object, is type %s",
                     q_type_name(bson_iter_type(let)));
    bson_iter_recurse(let, &it);
    while (bson_iter_next(&it)) {
        s->lets = realloc(s->lets, (s->nlets + 1) * sizeof *s->lets);
        assert(s->lets);
        let_var *lv = &s->lets[s->nlets++];
        lv->e = NULL;
        /* the value is parsed before the name is defined: it sees the outer scope */
        int rc = agg_expr_parse(&it, ctx->scope, &lv->e, err);
        if (rc)
            return rc;
        lv->slot = agg_scope_define(ctx->scope, bson_iter_key(&it), err);
        if (lv->slot < 0)
            return MD_EINVAL;
    }
    return 0;
}

typedef struct lookup_args {
    const char *from, *as, *local, *foreign;
    bson_iter_t let, pipeline;
    bool has_let, has_pipeline;
} lookup_args;

static int lookup_read(const bson_iter_t *spec, lookup_args *a, md_error *err)
{
    bson_iter_t it;
    int rc = 0;
    memset(a, 0, sizeof *a);
    if (!BSON_ITER_HOLDS_DOCUMENT(spec))
        return q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE,
                     "the $lookup specification must be an Object, but found %s",
                     q_type_name(bson_iter_type(spec)));
    bson_iter_recurse(spec, &it);
    while (rc == 0 && bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (!strcmp(k, "from"))
            rc = need_string(&it, "$lookup", MD_CODE_FAILED_TO_PARSE, &a->from, err);
        else if (!strcmp(k, "as"))
            rc = need_string(&it, "$lookup", MD_CODE_FAILED_TO_PARSE, &a->as, err);
        else if (!strcmp(k, "localField"))
            rc = need_string(&it, "$lookup", MD_CODE_FAILED_TO_PARSE, &a->local, err);
        else if (!strcmp(k, "foreignField"))
            rc = need_string(&it, "$lookup", MD_CODE_FAILED_TO_PARSE, &a->foreign, err);
        else if (!strcmp(k, "let"))
            a->let = it, a->has_let = true;
        else if (!strcmp(k, "pipeline"))
            a->pipeline = it, a->has_pipeline = true;
        else
            rc = q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE,
                       "unknown argument to $lookup: %s", k);
    }
    if (rc)
        return rc;
    if (!a->as || !*a->as)
        return q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE,
                     "must specify 'as' field for a $lookup");
    if (!a->from)
        return q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE,
                     "must specify 'from' field for a $lookup");
    if (a->has_pipeline && (a->local || a->foreign))
        return q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE,
                     "$lookup with 'pipeline' may not specify 'localField' or 'foreignField'");
    if (!a->has_pipeline && (!a->local || !a->foreign))
        return q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE,
                     "$lookup requires either 'pipeline' or both 'localField' and "
                     "'foreignField' to be specified");
    if (a->has_let && !a->has_pipeline)
        return q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE,
                     "$lookup with 'let' requires 'pipeline'");
    return 0;
}

int agg_parse_lookup(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out, md_error *err)
{
    lookup_args a;
    int rc = lookup_read(spec, &a, err);
    if (rc)
        return rc;
    char ns[ENG_IDENT_MAX];
    if ((rc = q_ns_make(ctx->db, a.from, ns, err)) != 0)
        return rc;
    st_lookup *s = agg_stage_alloc(sizeof *s, &lookup_ops, ctx, "$lookup", spec);
    s->from = strdup(a.from);
    s->as = strdup(a.as);
    if (!a.has_pipeline) {
        s->local = strdup(a.local);
        s->foreign = strdup(a.foreign);
    } else {
        if (a.has_let)
            rc = lookup_lets(ctx, s, &a.let, err);
        ctx->depth++;
        if (rc == 0)
            rc = agg_pipeline_new(ctx, a.from, AGG_SRC_COLL, &a.pipeline, true, &s->sub, err);
        ctx->depth--;
    }
    if (rc) {
        agg_stage_destroy(&s->base);
        return rc;
    }
    agg_list_push(out, &s->base);
    return 0;
}

/* ---- $graphLookup -------------------------------------------------------------------------------- */

typedef struct st_graph {
    agg_stage base;
    char *from, *as, *from_field, *to_field, *depth_field;
    agg_expr *start;
    bson_t restrict_match;
    int64_t max_depth; /* -1: none */
} st_graph;

/* Has the key of doc's _id been seen?  Adds it when not. */
static bool seen_add(q_buf **seen, size_t *n, const bson_t *doc)
{
    bson_iter_t id;
    q_buf k;
    q_buf_init(&k);
    if (bson_iter_init_find(&id, doc, "_id"))
        q_key_append_value(&k, &id, false);
    for (size_t i = 0; i < *n; i++)
        if ((*seen)[i].len == k.len && memcmp((*seen)[i].data, k.data, k.len) == 0) {
            q_buf_cleanup(&k);
            return true;
        }
    *seen = realloc(*seen, (*n + 1) * sizeof **seen);
    assert(*seen);
    (*seen)[(*n)++] = k;
    return false;
}

/* One round: the documents connected to the frontier, new ones appended to
 * results (with depthField), their connectFromField values the next
 * frontier. */
static int graph_round(st_graph *s, bson_t *frontier, uint32_t nf, int64_t depth,
                       q_buf **seen, size_t *nseen, bson_t ***res, size_t *nres,
                       size_t *capres, bson_t *next, uint32_t *nn, md_error *err)
{
    bson_t filter = BSON_INITIALIZER, cond, and;
    bson_t **docs = NULL;
    size_t nd = 0, cap = 0;
    if (!bson_empty(&s->restrict_match)) {
        BSON_APPEND_ARRAY_BEGIN(&filter, "$and", &and);
        BSON_APPEND_DOCUMENT(&and, "0", &s->restrict_match);
        BSON_APPEND_DOCUMENT_BEGIN(&and, "1", &cond);
        eq_or_in(&cond, s->to_field, frontier, nf);
        bson_append_document_end(&and, &cond);
        bson_append_array_end(&filter, &and);
    } else {
        eq_or_in(&filter, s->to_field, frontier, nf);
    }
    int rc = query_coll(s->base.ctx, s->from, &filter, &docs, &nd, &cap, err);
    bson_destroy(&filter);
    for (size_t i = 0; rc == 0 && i < nd; i++) {
        if (seen_add(seen, nseen, docs[i]))
            continue;
        visit_path(bson_get_data(docs[i]), docs[i]->len, s->from_field, next, nn);
        bson_t *d = docs[i];
        if (s->depth_field) {
            bson_t out;
            bson_value_t dv = {.value_type = BSON_TYPE_INT64};
            dv.value.v_int64 = depth;
            agg_doc_set_path(d, s->depth_field, &dv, &out);
            d = bson_copy(&out);
            bson_destroy(&out);
            bson_destroy(docs[i]);
        }
        docs[i] = NULL;
        if (*nres == *capres) {
            *capres = *capres ? 2 * *capres : 16;
            *res = realloc(*res, *capres * sizeof **res);
            assert(*res);
        }
        (*res)[(*nres)++] = d;
    }
    for (size_t i = 0; i < nd; i++)
        if (docs[i])
            bson_destroy(docs[i]);
    free(docs);
    return rc;
}

static int graph_next(agg_stage *st, bson_t **out, md_error *err)
{
    st_graph *s = (st_graph *)st;
    bson_t *in;
    bson_value_t sv;
    int rc = agg_pull(st, &in, err);
    if (rc)
        return rc;
    agg_vars_set_root(&st->ctx->vars, in);
    if ((rc = agg_expr_eval(s->start, &st->ctx->vars, &sv, err)) != 0) {
        bson_destroy(in);
        return rc;
    }
    /* the start values: an array's elements, or the value */
    bson_t tmp = BSON_INITIALIZER, *frontier = bson_new();
    uint32_t nf = 0;
    agg_value_append(&tmp, "s", 1, &sv);
    visit_path(bson_get_data(&tmp), tmp.len, "s", frontier, &nf);
    bson_destroy(&tmp);
    agg_value_destroy(&sv);
    q_buf *seen = NULL;
    size_t nseen = 0, nres = 0, capres = 0;
    bson_t **res = NULL;
    for (int64_t depth = 0; rc == 0 && nf > 0 && (s->max_depth < 0 || depth <= s->max_depth);
         depth++) {
        bson_t *next = bson_new();
        uint32_t nn = 0;
        rc = graph_round(s, frontier, nf, depth, &seen, &nseen, &res, &nres, &capres, next, &nn,
                         err);
        bson_destroy(frontier);
        frontier = next;
        nf = nn;
    }
    bson_destroy(frontier);
    if (rc == 0) {
        bson_t o;
        append_docs_array(in, s->as, res, nres, &o);
        *out = bson_copy(&o);
        bson_destroy(&o);
    }
    docs_free(res, nres);
    for (size_t i = 0; i < nseen; i++)
        q_buf_cleanup(&seen[i]);
    free(seen);
    bson_destroy(in);
    return rc;
}

static void graph_destroy(agg_stage *st)
{
    st_graph *s = (st_graph *)st;
    free(s->from);
    free(s->as);
    free(s->from_field);
    free(s->to_field);
    free(s->depth_field);
    agg_expr_destroy(s->start);
    bson_destroy(&s->restrict_match);
}

static const agg_stage_ops graph_ops = {.name = "$graphLookup", .next = graph_next,
                                        .destroy = graph_destroy};

static int graph_option(agg_ctx *ctx, st_graph *s, const bson_iter_t *it, md_error *err)
{
    const char *k = bson_iter_key(it), *v;
    char **dst = !strcmp(k, "from")               ? &s->from
                 : !strcmp(k, "as")               ? &s->as
                 : !strcmp(k, "connectFromField") ? &s->from_field
                 : !strcmp(k, "connectToField")   ? &s->to_field
                 : !strcmp(k, "depthField")       ? &s->depth_field
                                                  : NULL;
    if (dst) {
        if (!BSON_ITER_HOLDS_UTF8(it))
            return q_err(err, MD_EINVAL, 40103, "expected string as value for %s, found: %s", k,
                         q_type_name(bson_iter_type(it)));
        v = bson_iter_utf8(it, NULL);
        free(*dst);
        *dst = strdup(v);
        return 0;
    }
    if (!strcmp(k, "startWith"))
        return agg_expr_parse(it, ctx->scope, &s->start, err);
    if (!strcmp(k, "maxDepth")) {
        if (!BSON_ITER_HOLDS_NUMBER(it))
            return q_err(err, MD_EINVAL, 40100, "maxDepth must be numeric, found type: %s",
                         q_type_name(bson_iter_type(it)));
        if (bson_iter_as_double(it) < 0)
            return q_err(err, MD_EINVAL, 40101, "maxDepth requires a nonnegative argument, found: "
                         "%g", bson_iter_as_double(it));
        if (!q_iter_int64(it, &s->max_depth))
            return q_err(err, MD_EINVAL, 40102, "maxDepth could not be represented as a long "
                         "long: %g", bson_iter_as_double(it));
        return 0;
    }
    if (!strcmp(k, "restrictSearchWithMatch")) {
        const uint8_t *d;
        uint32_t l;
        if (!BSON_ITER_HOLDS_DOCUMENT(it))
            return q_err(err, MD_EINVAL, 40185, "restrictSearchWithMatch must be an object, "
                         "found %s", q_type_name(bson_iter_type(it)));
        bson_t view;
        bson_iter_document(it, &l, &d);
        bson_init_static(&view, d, l);
        bson_destroy(&s->restrict_match);
        bson_copy_to(&view, &s->restrict_match);
        q_matcher *m;
        int rc = q_matcher_new(&s->restrict_match, &m, err);
        q_matcher_destroy(m);
        return rc;
    }
    return q_err(err, MD_EINVAL, 40104, "Unknown argument to $graphLookup: %s", k);
}

int agg_parse_graph_lookup(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out, md_error *err)
{
    bson_iter_t it;
    int rc = 0;
    if (!BSON_ITER_HOLDS_DOCUMENT(spec))
        return q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE,
                     "the $graphLookup stage specification must be an object, but found %s",
                     q_type_name(bson_iter_type(spec)));
    st_graph *s = agg_stage_alloc(sizeof *s, &graph_ops, ctx, "$graphLookup", spec);
    bson_init(&s->restrict_match);
    s->max_depth = -1;
    bson_iter_recurse(spec, &it);
    while (rc == 0 && bson_iter_next(&it))
        rc = graph_option(ctx, s, &it, err);
    if (rc == 0 && (!s->from || !s->as || !s->start || !s->from_field || !s->to_field))
        rc = q_err(err, MD_EINVAL, 40105, "$graphLookup requires 'from', 'as', 'startWith', "
                   "'connectFromField', and 'connectToField' to be specified.");
    char ns[ENG_IDENT_MAX];
    if (rc == 0)
        rc = q_ns_make(ctx->db, s->from, ns, err);
    if (rc) {
        agg_stage_destroy(&s->base);
        return rc;
    }
    agg_list_push(out, &s->base);
    return 0;
}

/* ---- $facet -------------------------------------------------------------------------------------- */

typedef struct facet {
    char *name;
    agg_pipeline *p;
} facet;

typedef struct st_facet {
    agg_stage base;
    facet *v;
    size_t n;
    bool done;
} st_facet;

static int facet_next(agg_stage *st, bson_t **out, md_error *err)
{
    st_facet *s = (st_facet *)st;
    bson_t **in = NULL, *d;
    size_t n = 0, cap = 0;
    int rc;
    if (s->done)
        return MD_NOTFOUND;
    s->done = true;
    while ((rc = agg_pull(st, &d, err)) == 0) {
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            in = realloc(in, cap * sizeof *in);
            assert(in);
        }
        in[n++] = d;
    }
    if (rc != MD_NOTFOUND) {
        docs_free(in, n);
        return rc;
    }
    rc = 0;
    *out = bson_new();
    for (size_t i = 0; i < s->n && rc == 0; i++) {
        bson_t arr;
        char k[24];
        uint32_t j = 0;
        agg_pipeline_feed(s->v[i].p, in, n);
        bson_append_array_begin(*out, s->v[i].name, -1, &arr);
        while ((rc = agg_pipeline_next(s->v[i].p, &d, err)) == 0) {
            snprintf(k, sizeof k, "%u", j++);
            bson_append_document(&arr, k, -1, d);
            bson_destroy(d);
        }
        bson_append_array_end(*out, &arr);
        if (rc == MD_NOTFOUND)
            rc = 0;
        agg_pipeline_feed(s->v[i].p, NULL, 0);
    }
    docs_free(in, n);
    if (rc) {
        bson_destroy(*out);
        *out = NULL;
    }
    return rc;
}

static void facet_reset(agg_stage *st)
{
    ((st_facet *)st)->done = false;
}

static void facet_destroy(agg_stage *st)
{
    st_facet *s = (st_facet *)st;
    for (size_t i = 0; i < s->n; i++) {
        free(s->v[i].name);
        agg_pipeline_destroy(s->v[i].p);
    }
    free(s->v);
}

static const agg_stage_ops facet_ops = {
    .name = "$facet", .next = facet_next, .reset = facet_reset, .destroy = facet_destroy};

/* Stages a facet may not hold (4.0: 40600). */
static int facet_check(const bson_iter_t *pipe, md_error *err)
{
    static const char *const banned[] = {"$facet", "$out", "$collStats", "$indexStats", NULL};
    bson_iter_t it, st;
    bson_iter_recurse(pipe, &it);
    while (bson_iter_next(&it)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &st) ||
            !bson_iter_next(&st))
            continue;
        for (int i = 0; banned[i]; i++)
            if (!strcmp(bson_iter_key(&st), banned[i]))
                return q_err(err, MD_EINVAL, 40600, "%s is not allowed to be used within a "
                             "$facet stage", banned[i]);
    }
    return 0;
}

int agg_parse_facet(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out, md_error *err)
{
    bson_iter_t it, probe;
    int rc = 0;
    if (!BSON_ITER_HOLDS_DOCUMENT(spec))
        return q_err(err, MD_EINVAL, 15947, "the $facet specification must be a non-empty "
                     "object, but found: %s", q_type_name(bson_iter_type(spec)));
    bson_iter_recurse(spec, &it);
    probe = it;
    if (!bson_iter_next(&probe))
        return q_err(err, MD_EINVAL, 40169, "the $facet specification must be a non-empty "
                     "object");
    st_facet *s = agg_stage_alloc(sizeof *s, &facet_ops, ctx, "$facet", spec);
    while (rc == 0 && bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        bson_iter_t sub;
        if (!BSON_ITER_HOLDS_ARRAY(&it)) {
            rc = q_err(err, MD_EINVAL, 40170, "arguments to $facet must be arrays, %s is type %s",
                       k, q_type_name(bson_iter_type(&it)));
            break;
        }
        if (!bson_iter_recurse(&it, &sub) || !bson_iter_next(&sub)) {
            rc = q_err(err, MD_EINVAL, 40171, "sub-pipeline in $facet stage cannot be empty");
            break;
        }
        if (!*k || k[0] == '$' || strchr(k, '.')) {
            rc = q_err(err, MD_EINVAL, 40174, "$facet output field '%s' is not a valid field "
                       "name", k);
            break;
        }
        if ((rc = facet_check(&it, err)) != 0)
            break;
        s->v = realloc(s->v, (s->n + 1) * sizeof *s->v);
        assert(s->v);
        facet *f = &s->v[s->n++];
        f->name = strdup(k);
        f->p = NULL;
        ctx->depth++;
        rc = agg_pipeline_new(ctx, NULL, AGG_SRC_FEED, &it, true, &f->p, err);
        ctx->depth--;
    }
    if (rc) {
        agg_stage_destroy(&s->base);
        return rc;
    }
    agg_list_push(out, &s->base);
    return 0;
}
