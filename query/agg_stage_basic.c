/*
 * agg_stage_basic.c -- the pipeline's row stages: $match (the find
 * matcher, q_match.c; a top-level $expr evaluated in the pipeline's own
 * scope, so that $lookup's let variables reach it), $limit, $skip, $sort (through the external sorter,
 * agg_spill.c: top-k when a $limit follows, spilled runs past the memory
 * limit with allowDiskUse), $count, $unwind and $sample.  Errors carry
 * MongoDB 4.0's codes and messages.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agg_int.h"

/* ---- $match -------------------------------------------------------------------------- */

typedef struct st_match {
    agg_stage base;
    bson_t filter; /* without a top-level $expr */
    q_matcher *m;
    agg_expr *expr; /* a top-level $expr, in the pipeline's scope, or NULL */
} st_match;

static int match_next(agg_stage *st, bson_t **out, md_error *err)
{
    st_match *s = (st_match *)st;
    for (;;) {
        int rc = agg_pull(st, out, err);
        if (rc)
            return rc;
        bool ok = q_matcher_matches(s->m, *out);
        if (ok && s->expr) {
            bson_value_t v;
            agg_vars_set_root(&st->ctx->vars, *out);
            rc = agg_expr_eval(s->expr, &st->ctx->vars, &v, err);
            ok = rc == 0 && agg_value_truthy(&v);
            agg_value_destroy(&v);
        }
        if (ok)
            return 0;
        bson_destroy(*out);
        *out = NULL;
        if (rc)
            return rc;
    }
}

static void match_destroy(agg_stage *st)
{
    st_match *s = (st_match *)st;
    q_matcher_destroy(s->m);
    agg_expr_destroy(s->expr);
    bson_destroy(&s->filter);
}

static const agg_stage_ops match_ops = {
    .name = "$match", .next = match_next, .destroy = match_destroy};

int agg_match_new(agg_ctx *ctx, const bson_t *filter, agg_stage **out, md_error *err)
{
    bson_t spec = BSON_INITIALIZER;
    bson_iter_t it;
    BSON_APPEND_DOCUMENT(&spec, "$match", filter);
    bson_iter_init(&it, &spec);
    bson_iter_next(&it);
    st_match *s = agg_stage_alloc(sizeof *s, &match_ops, ctx, "$match", &it);
    bson_destroy(&spec);
    /* a top-level $expr is evaluated by the stage, in the pipeline's scope,
     * so that it sees $lookup's let variables; the rest is the matcher's */
    int rc = 0;
    bson_init(&s->filter);
    bson_iter_init(&it, filter);
    while (rc == 0 && bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), "$expr") != 0)
            bson_append_iter(&s->filter, NULL, 0, &it);
        else if (!s->expr)
            rc = agg_expr_parse(&it, ctx->scope, &s->expr, err);
    }
    if (rc == 0)
        rc = q_matcher_new(&s->filter, &s->m, err);
    if (rc) {
        agg_stage_destroy(&s->base);
        return rc;
    }
    *out = &s->base;
    return 0;
}

int agg_parse_match(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out, md_error *err)
{
    const uint8_t *data;
    uint32_t len;
    bson_t filter;
    agg_stage *s;
    if (!BSON_ITER_HOLDS_DOCUMENT(spec))
        return q_err(err, MD_EINVAL, 15959, "the match filter must be an expression in an object");
    bson_iter_document(spec, &len, &data);
    bson_init_static(&filter, data, len);
    int rc = agg_match_new(ctx, &filter, &s, err);
    if (rc == 0)
        agg_list_push(out, s);
    return rc;
}

const bson_t *agg_match_filter(agg_stage *s)
{
    /* a $match with $expr stays a stage: its variables live in the pipeline */
    return s->ops == &match_ops && !((st_match *)s)->expr ? &((st_match *)s)->filter : NULL;
}

/* ---- $limit / $skip ---------------------------------------------------------------------- */

typedef struct st_count_n {
    agg_stage base;
    int64_t n, seen;
} st_count_n;

static int limit_next(agg_stage *st, bson_t **out, md_error *err)
{
    st_count_n *s = (st_count_n *)st;
    if (s->seen >= s->n)
        return MD_NOTFOUND;
    int rc = agg_pull(st, out, err);
    if (rc == 0)
        s->seen++;
    return rc;
}

static int skip_next(agg_stage *st, bson_t **out, md_error *err)
{
    st_count_n *s = (st_count_n *)st;
    for (;;) {
        int rc = agg_pull(st, out, err);
        if (rc || s->seen >= s->n)
            return rc;
        s->seen++;
        bson_destroy(*out);
    }
}

static void count_n_reset(agg_stage *st)
{
    ((st_count_n *)st)->seen = 0;
}

static void nothing_destroy(agg_stage *st)
{
}

static const agg_stage_ops limit_ops = {
    .name = "$limit", .next = limit_next, .reset = count_n_reset, .destroy = nothing_destroy};
static const agg_stage_ops skip_ops = {
    .name = "$skip", .next = skip_next, .reset = count_n_reset, .destroy = nothing_destroy};

/* A number that is a 64-bit integer (4.0 takes 1.0 but not 1.5). */
static bool whole_number(const bson_iter_t *it, int64_t *out)
{
    if (bson_iter_type(it) == BSON_TYPE_DECIMAL128) {
        bson_decimal128_t d;
        char s[BSON_DECIMAL128_STRING];
        bson_iter_decimal128(it, &d);
        bson_decimal128_to_string(&d, s);
        char *end;
        long long v = strtoll(s, &end, 10);
        if (*end)
            return false;
        *out = v;
        return true;
    }
    return q_iter_int64(it, out);
}

int agg_parse_limit(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out, md_error *err)
{
    int64_t n;
    if (!BSON_ITER_HOLDS_NUMBER(spec) && bson_iter_type(spec) != BSON_TYPE_DECIMAL128)
        return q_err(err, MD_EINVAL, 15957, "the limit must be specified as a number");
    if (!whole_number(spec, &n))
        return q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE,
                     "invalid argument to $limit stage: Cannot represent as a 64-bit integer");
    if (n <= 0)
        return q_err(err, MD_EINVAL, 15958, "the limit must be positive");
    st_count_n *s = agg_stage_alloc(sizeof *s, &limit_ops, ctx, "$limit", spec);
    s->n = n;
    agg_list_push(out, &s->base);
    return 0;
}

int agg_parse_skip(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out, md_error *err)
{
    int64_t n;
    if (!BSON_ITER_HOLDS_NUMBER(spec) && bson_iter_type(spec) != BSON_TYPE_DECIMAL128)
        return q_err(err, MD_EINVAL, 15972, "Argument to $skip must be a number");
    if (!whole_number(spec, &n))
        return q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE,
                     "invalid argument to $skip stage: Cannot represent as a 64-bit integer");
    if (n < 0)
        return q_err(err, MD_EINVAL, 15956, "Argument to $skip cannot be negative");
    st_count_n *s = agg_stage_alloc(sizeof *s, &skip_ops, ctx, "$skip", spec);
    s->n = n;
    agg_list_push(out, &s->base);
    return 0;
}

int64_t agg_limit_value(agg_stage *s)
{
    return s->ops == &limit_ops ? ((st_count_n *)s)->n : -1;
}

/* ---- $sort ------------------------------------------------------------------------------- */

typedef struct st_sort {
    agg_stage base;
    bson_t key;
    int64_t limit; /* top-k (0: none) */
    bool provided; /* the source delivers this order */
    agg_sorter *so;
} st_sort;

static int sort_cmp(const bson_t *a, const bson_t *b, void *arg)
{
    return q_sort_cmp_docs(a, b, arg);
}

static int sort_fill(st_sort *s, md_error *err)
{
    agg_ctx *ctx = s->base.ctx;
    bson_t *d;
    int rc;
    s->so = agg_sorter_new(ctx, sort_cmp, &s->key, ctx->sort_mem);
    agg_sorter_set_topk(s->so, s->limit);
    while ((rc = agg_pull(&s->base, &d, err)) == 0)
        if ((rc = agg_sorter_add(s->so, d, err)) != 0)
            break;
    if (rc == MD_ETOOBIG)
        return q_err(err, MD_ETOOBIG, AGG_CODE_SORT_MEM,
                     "Sort exceeded memory limit of %lld bytes, but did not opt in to external "
                     "sorting. Aborting operation. Pass allowDiskUse:true to opt in.",
                     (long long)ctx->sort_mem);
    if (rc != MD_NOTFOUND)
        return rc;
    return agg_sorter_finish(s->so, err);
}

static int sort_next(agg_stage *st, bson_t **out, md_error *err)
{
    st_sort *s = (st_sort *)st;
    if (s->provided)
        return agg_pull(st, out, err);
    if (!s->so) {
        int rc = sort_fill(s, err);
        if (rc)
            return rc;
    }
    return agg_sorter_next(s->so, out, err);
}

static void sort_reset(agg_stage *st)
{
    st_sort *s = (st_sort *)st;
    agg_sorter_destroy(s->so);
    s->so = NULL;
}

static void sort_destroy(agg_stage *st)
{
    st_sort *s = (st_sort *)st;
    sort_reset(st);
    bson_destroy(&s->key);
}

/* 4.0's explain: {$sort: {sortKey: {...}, limit: n}}. */
static void sort_explain(agg_stage *st, bson_t *arr, const char *key)
{
    st_sort *s = (st_sort *)st;
    bson_t d, x;
    bson_append_document_begin(arr, key, -1, &d);
    BSON_APPEND_DOCUMENT_BEGIN(&d, "$sort", &x);
    BSON_APPEND_DOCUMENT(&x, "sortKey", &s->key);
    if (s->limit)
        BSON_APPEND_INT64(&x, "limit", s->limit);
    bson_append_document_end(&d, &x);
    bson_append_document_end(arr, &d);
}

static const agg_stage_ops sort_ops = {.name = "$sort", .next = sort_next, .reset = sort_reset,
                                       .destroy = sort_destroy, .explain = sort_explain};

agg_stage *agg_sort_new(agg_ctx *ctx, const bson_t *spec)
{
    bson_t d = BSON_INITIALIZER;
    bson_iter_t it;
    BSON_APPEND_DOCUMENT(&d, "$sort", spec);
    bson_iter_init(&it, &d);
    bson_iter_next(&it);
    st_sort *s = agg_stage_alloc(sizeof *s, &sort_ops, ctx, "$sort", &it);
    bson_destroy(&d);
    bson_copy_to(spec, &s->key);
    return &s->base;
}

int agg_parse_sort(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out, md_error *err)
{
    bson_iter_t it;
    bson_t key;
    const uint8_t *data;
    uint32_t len;
    if (!BSON_ITER_HOLDS_DOCUMENT(spec))
        return q_err(err, MD_EINVAL, 15973, "the $sort key specification must be an object");
    bson_iter_recurse(spec, &it);
    int n = 0;
    while (bson_iter_next(&it)) {
        n++;
        if (BSON_ITER_HOLDS_DOCUMENT(&it))
            return q_err(err, MD_EINVAL, MD_CODE_NOT_YET_IMPLEMENTED,
                         "$meta sort keys are not supported by minidoc");
        double d = BSON_ITER_HOLDS_NUMBER(&it) ? bson_iter_as_double(&it) : 0;
        if (d != 1 && d != -1)
            return q_err(err, MD_EINVAL, 15975,
                         "$sort key ordering must be 1 (for ascending) or -1 (for descending)");
    }
    if (n == 0)
        return q_err(err, MD_EINVAL, 15976, "$sort stage must have at least one sort key");
    bson_iter_document(spec, &len, &data);
    bson_init_static(&key, data, len);
    agg_list_push(out, agg_sort_new(ctx, &key));
    return 0;
}

const bson_t *agg_sort_spec(agg_stage *s)
{
    return s->ops == &sort_ops ? &((st_sort *)s)->key : NULL;
}

void agg_sort_set_limit(agg_stage *s, int64_t limit)
{
    st_sort *so = (st_sort *)s;
    if (!so->limit || limit < so->limit)
        so->limit = limit;
}

void agg_sort_set_provided(agg_stage *s)
{
    if (s->ops == &sort_ops)
        ((st_sort *)s)->provided = true;
}

/* ---- $count --------------------------------------------------------------------------------- */

typedef struct st_count {
    agg_stage base;
    char *field;
    bool done;
} st_count;

static int count_next(agg_stage *st, bson_t **out, md_error *err)
{
    st_count *s = (st_count *)st;
    bson_t *d;
    int64_t n = 0;
    int rc;
    if (s->done)
        return MD_NOTFOUND;
    while ((rc = agg_pull(st, &d, err)) == 0) {
        bson_destroy(d);
        n++;
    }
    if (rc != MD_NOTFOUND)
        return rc;
    s->done = true;
    if (n == 0) /* $group over no documents has no group */
        return MD_NOTFOUND;
    *out = bson_new();
    q_append_number(*out, s->field, n);
    return 0;
}

static void count_reset(agg_stage *st)
{
    ((st_count *)st)->done = false;
}

static void count_destroy(agg_stage *st)
{
    free(((st_count *)st)->field);
}

static const agg_stage_ops count_ops = {
    .name = "$count", .next = count_next, .reset = count_reset, .destroy = count_destroy};

int agg_parse_count(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out, md_error *err)
{
    uint32_t len = 0;
    const char *f = BSON_ITER_HOLDS_UTF8(spec) ? bson_iter_utf8(spec, &len) : NULL;
    if (!f || len == 0)
        return q_err(err, MD_EINVAL, 40156, "the count field must be a non-empty string");
    if (f[0] == '$')
        return q_err(err, MD_EINVAL, 40158, "the count field cannot be a $-prefixed path");
    if (strchr(f, '.'))
        return q_err(err, MD_EINVAL, 40160, "the count field cannot contain '.'");
    if (strlen(f) != len)
        return q_err(err, MD_EINVAL, 40159, "the count field cannot contain a null byte");
    st_count *s = agg_stage_alloc(sizeof *s, &count_ops, ctx, "$count", spec);
    s->field = strdup(f);
    agg_list_push(out, &s->base);
    return 0;
}

/* ---- $unwind -------------------------------------------------------------------------------- */

typedef struct st_unwind {
    agg_stage base;
    char *path;  /* without the '$' */
    char *index; /* includeArrayIndex, or NULL */
    bool preserve;
    bson_t *doc; /* the document being unwound (owned) */
    bson_iter_t arr;
    int64_t i;
} st_unwind;

/* The document with path set to v (missing: removed) and the index field. */
static bson_t *unwind_emit(st_unwind *s, const bson_value_t *v, int64_t idx)
{
    /* agg_doc_set_path initializes its output in place: build on the stack
     * and copy, so that the caller's bson_destroy frees the whole document
     * (a bson_new() struct initialized again would be left behind) */
    bson_t tmp, built;
    agg_doc_set_path(s->doc, s->path, v, s->index ? &tmp : &built);
    if (s->index) {
        bson_value_t iv = {.value_type = idx < 0 ? BSON_TYPE_NULL : BSON_TYPE_INT64};
        iv.value.v_int64 = idx;
        agg_doc_set_path(&tmp, s->index, &iv, &built);
        bson_destroy(&tmp);
    }
    bson_t *out = bson_copy(&built);
    bson_destroy(&built);
    return out;
}

static int unwind_next(agg_stage *st, bson_t **out, md_error *err)
{
    st_unwind *s = (st_unwind *)st;
    bson_value_t v;
    for (;;) {
        if (s->doc && bson_iter_next(&s->arr)) {
            *out = unwind_emit(s, bson_iter_value(&s->arr), s->i++);
            return 0;
        }
        if (s->doc)
            bson_destroy(s->doc);
        s->doc = NULL;
        int rc = agg_pull(st, &s->doc, err);
        if (rc)
            return rc;
        bool found = agg_doc_get_path(s->doc, s->path, &v);
        if (found && v.value_type == BSON_TYPE_ARRAY) {
            bson_iter_init_from_data(&s->arr, v.value.v_doc.data, v.value.v_doc.data_len);
            bson_iter_t probe = s->arr;
            if (bson_iter_next(&probe)) {
                s->i = 0;
                continue;
            }
            if (!s->preserve)
                continue;
            /* an empty array: the field goes, the document stays */
            bson_value_t missing = {.value_type = BSON_TYPE_EOD};
            *out = unwind_emit(s, &missing, -1);
        } else if (!found || v.value_type == BSON_TYPE_NULL ||
                   v.value_type == BSON_TYPE_UNDEFINED) {
            if (!s->preserve)
                continue;
            *out = unwind_emit(s, found ? &v : &(bson_value_t){.value_type = BSON_TYPE_EOD},
                               -1);
        } else {
            *out = unwind_emit(s, &v, -1); /* a scalar: itself, once */
        }
        bson_destroy(s->doc);
        s->doc = NULL;
        return 0;
    }
}

static void unwind_reset(agg_stage *st)
{
    st_unwind *s = (st_unwind *)st;
    if (s->doc)
        bson_destroy(s->doc);
    s->doc = NULL;
}

static void unwind_destroy(agg_stage *st)
{
    st_unwind *s = (st_unwind *)st;
    unwind_reset(st);
    free(s->path);
    free(s->index);
}

/* 4.0's explain: {$unwind: {path: "$a", ...}}. */
static void unwind_explain(agg_stage *st, bson_t *arr, const char *key)
{
    st_unwind *s = (st_unwind *)st;
    bson_t d, x;
    char *p = bson_strdup_printf("$%s", s->path);
    bson_append_document_begin(arr, key, -1, &d);
    BSON_APPEND_DOCUMENT_BEGIN(&d, "$unwind", &x);
    BSON_APPEND_UTF8(&x, "path", p);
    if (s->preserve)
        BSON_APPEND_BOOL(&x, "preserveNullAndEmptyArrays", true);
    if (s->index)
        BSON_APPEND_UTF8(&x, "includeArrayIndex", s->index);
    bson_append_document_end(&d, &x);
    bson_append_document_end(arr, &d);
    bson_free(p);
}

static const agg_stage_ops unwind_ops = {.name = "$unwind", .next = unwind_next,
                                         .reset = unwind_reset, .destroy = unwind_destroy,
                                         .explain = unwind_explain};

static int unwind_option(const bson_iter_t *it, const char **path, const char **index,
                         bool *preserve, md_error *err)
{
    const char *k = bson_iter_key(it);
    if (strcmp(k, "path") == 0) {
        if (!BSON_ITER_HOLDS_UTF8(it))
            return q_err(err, MD_EINVAL, 28808,
                         "expected a string as the path for $unwind stage, got %s",
                         q_type_name(bson_iter_type(it)));
        *path = bson_iter_utf8(it, NULL);
    } else if (strcmp(k, "preserveNullAndEmptyArrays") == 0) {
        if (!BSON_ITER_HOLDS_BOOL(it))
            return q_err(err, MD_EINVAL, 28809,
                         "expected a boolean for the preserveNullAndEmptyArrays option to "
                         "$unwind stage, got %s", q_type_name(bson_iter_type(it)));
        *preserve = bson_iter_bool(it);
    } else if (strcmp(k, "includeArrayIndex") == 0) {
        if (!BSON_ITER_HOLDS_UTF8(it))
            return q_err(err, MD_EINVAL, 28810,
                         "expected a non-empty string for the includeArrayIndex  option to "
                         "$unwind stage, got %s", q_type_name(bson_iter_type(it)));
        *index = bson_iter_utf8(it, NULL);
        if (!**index)
            return q_err(err, MD_EINVAL, 28810,
                         "expected a non-empty string for the includeArrayIndex  option to "
                         "$unwind stage, got string");
        if (**index == '$')
            return q_err(err, MD_EINVAL, 28822,
                         "includeArrayIndex option to $unwind stage should not be prefixed "
                         "with a '$': %s", *index);
    } else {
        return q_err(err, MD_EINVAL, 28811, "unrecognized option to $unwind stage: %s", k);
    }
    return 0;
}

int agg_parse_unwind(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out, md_error *err)
{
    const char *path = NULL, *index = NULL;
    bool preserve = false;
    bson_iter_t it;
    if (BSON_ITER_HOLDS_UTF8(spec)) {
        path = bson_iter_utf8(spec, NULL);
    } else if (BSON_ITER_HOLDS_DOCUMENT(spec)) {
        bson_iter_recurse(spec, &it);
        while (bson_iter_next(&it)) {
            int rc = unwind_option(&it, &path, &index, &preserve, err);
            if (rc)
                return rc;
        }
        if (!path)
            return q_err(err, MD_EINVAL, 28812, "no path specified to $unwind stage");
    } else {
        return q_err(err, MD_EINVAL, 15981,
                     "expected either a string or an object as specification for $unwind "
                     "stage, got %s", q_type_name(bson_iter_type(spec)));
    }
    if (path[0] != '$')
        return q_err(err, MD_EINVAL, 28818,
                     "path option to $unwind stage should be prefixed with a '$': %s", path);
    if (!path[1] || path[1] == '$' || strstr(path, "..") || path[strlen(path) - 1] == '.')
        return q_err(err, MD_EINVAL, 40353, "FieldPath must not end with a '.'.");
    st_unwind *s = agg_stage_alloc(sizeof *s, &unwind_ops, ctx, "$unwind", spec);
    s->path = strdup(path + 1);
    s->index = index ? strdup(index) : NULL;
    s->preserve = preserve;
    agg_list_push(out, &s->base);
    return 0;
}

/* ---- $sample ---------------------------------------------------------------------------------- */

typedef struct st_sample {
    agg_stage base;
    int64_t size;
    bson_t **v;
    size_t n, pos;
    bool filled;
    unsigned seed;
} st_sample;

/* Reservoir sampling (Algorithm R), then the reservoir shuffled. */
static int sample_fill(st_sample *s, md_error *err)
{
    bson_t *d;
    int rc;
    int64_t seen = 0;
    size_t cap = 0;
    while ((rc = agg_pull(&s->base, &d, err)) == 0) {
        if (seen < s->size) {
            if (s->n == cap) {
                cap = cap ? 2 * cap : 16;
                s->v = realloc(s->v, cap * sizeof *s->v);
                assert(s->v);
            }
            s->v[s->n++] = d;
        } else {
            int64_t j = (int64_t)(((uint64_t)rand_r(&s->seed) << 31 ^ rand_r(&s->seed)) %
                                  (uint64_t)(seen + 1));
            if (j < s->size) {
                bson_destroy(s->v[j]);
                s->v[j] = d;
            } else {
                bson_destroy(d);
            }
        }
        seen++;
    }
    if (rc != MD_NOTFOUND)
        return rc;
    for (size_t i = s->n; i > 1; i--) {
        size_t j = (size_t)rand_r(&s->seed) % i;
        bson_t *t = s->v[i - 1];
        s->v[i - 1] = s->v[j];
        s->v[j] = t;
    }
    s->filled = true;
    return 0;
}

static int sample_next(agg_stage *st, bson_t **out, md_error *err)
{
    st_sample *s = (st_sample *)st;
    if (!s->filled) {
        int rc = sample_fill(s, err);
        if (rc)
            return rc;
    }
    if (s->pos >= s->n)
        return MD_NOTFOUND;
    *out = s->v[s->pos];
    s->v[s->pos++] = NULL;
    return 0;
}

static void sample_reset(agg_stage *st)
{
    st_sample *s = (st_sample *)st;
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i])
            bson_destroy(s->v[i]);
    free(s->v);
    s->v = NULL;
    s->n = s->pos = 0;
    s->filled = false;
}

static const agg_stage_ops sample_ops = {
    .name = "$sample", .next = sample_next, .reset = sample_reset, .destroy = sample_reset};

int agg_parse_sample(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out, md_error *err)
{
    bson_iter_t it;
    int64_t size = -1;
    if (!BSON_ITER_HOLDS_DOCUMENT(spec))
        return q_err(err, MD_EINVAL, 28745, "the $sample stage specification must be an object");
    bson_iter_recurse(spec, &it);
    while (bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), "size") != 0)
            return q_err(err, MD_EINVAL, 28748, "unrecognized option to $sample: %s",
                         bson_iter_key(&it));
        if (!BSON_ITER_HOLDS_NUMBER(&it))
            return q_err(err, MD_EINVAL, 28746, "size argument to $sample must be a number");
        size = (int64_t)bson_iter_as_double(&it);
        if (bson_iter_as_double(&it) < 0)
            return q_err(err, MD_EINVAL, 28747, "size argument to $sample must not be negative");
    }
    if (size < 0)
        return q_err(err, MD_EINVAL, 28749, "$sample stage must specify a size");
    st_sample *s = agg_stage_alloc(sizeof *s, &sample_ops, ctx, "$sample", spec);
    s->size = size;
    s->seed = (unsigned)(q_now_ms() ^ (uintptr_t)s);
    agg_list_push(out, &s->base);
    return 0;
}
