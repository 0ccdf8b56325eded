/*
 * agg_stage_group.c -- the grouping stages: $group, and what MongoDB 4.0
 * builds from it: $sortByCount ($group + $sort), $bucket ($group on a
 * $switch over the boundaries + $sort), and $bucketAuto (its own stage:
 * the input sorted by the groupBy value, cut into buckets of about equal
 * size).
 *
 * $group keeps its groups in a hash table keyed by the index-key encoding
 * of the _id value (q_key.c: 1, 1.0 and NumberLong(1) are one group, as
 * MongoDB's Value equality says).  Groups come out in the order they were
 * first seen.  Past the memory limit (100 MB, or
 * internalDocumentSourceGroupMaxMemoryBytes) the stage fails with 16945,
 * or, with allowDiskUse, writes every group's partial state
 * ({k: key, i: _id, p: {<field>: partial}}) as a run sorted by key
 * (agg_spill.c) and starts afresh; at the end the runs are merged and the
 * partials of one key folded together (agg_acc_merge), so the groups then
 * come out in key order.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "agg_int.h"

/* ---- accumulated fields ($group, $bucketAuto's output) ---------------------------------- */

typedef struct acc_field {
    char *name;
    const agg_acc_ops *ops;
    agg_expr *e;
} acc_field;

typedef struct acc_fields {
    acc_field *v;
    size_t n;
} acc_fields;

static void acc_fields_cleanup(acc_fields *f)
{
    for (size_t i = 0; i < f->n; i++) {
        free(f->v[i].name);
        agg_expr_destroy(f->v[i].e);
    }
    free(f->v);
    f->v = NULL;
    f->n = 0;
}

/* One field {name: {$acc: expr}}. */
static int acc_field_parse(agg_ctx *ctx, const bson_iter_t *it, acc_fields *f, md_error *err)
{
    const char *k = bson_iter_key(it);
    bson_iter_t sub;
    if (k[0] == '$')
        return q_err(err, MD_EINVAL, 15950,
                     "the group aggregate field name '%s' cannot be an operator name", k);
    if (strchr(k, '.'))
        return q_err(err, MD_EINVAL, 16414, "the group aggregate field name '%s' cannot be used "
                     "because $group's field names cannot contain '.'", k);
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return q_err(err, MD_EINVAL, 40234, "The field '%s' must be an accumulator object", k);
    bson_iter_recurse(it, &sub);
    if (!bson_iter_next(&sub))
        return q_err(err, MD_EINVAL, 40238, "The field '%s' must specify one accumulator", k);
    bson_iter_t arg = sub;
    if (bson_iter_next(&sub))
        return q_err(err, MD_EINVAL, 40238, "The field '%s' must specify one accumulator", k);
    const agg_acc_ops *ops = agg_acc_find(bson_iter_key(&arg));
    if (!ops)
        return q_err(err, MD_EINVAL, 15952, "unknown group operator '%s'", bson_iter_key(&arg));
    if (BSON_ITER_HOLDS_ARRAY(&arg))
        return q_err(err, MD_EINVAL, 40237, "The %s accumulator is a unary operator",
                     bson_iter_key(&arg));
    f->v = realloc(f->v, (f->n + 1) * sizeof *f->v);
    assert(f->v);
    acc_field *a = &f->v[f->n++];
    a->name = strdup(k);
    a->ops = ops;
    a->e = NULL;
    return agg_expr_parse(&arg, ctx->scope, &a->e, err);
}

/* Feed doc (ROOT already set) to one group's accumulators. */
static int acc_feed(agg_ctx *ctx, const acc_fields *f, agg_acc **accs, md_error *err)
{
    for (size_t i = 0; i < f->n; i++) {
        bson_value_t v;
        int rc = agg_expr_eval(f->v[i].e, &ctx->vars, &v, err);
        if (rc)
            return rc;
        rc = agg_acc_add(accs[i], &v, err);
        agg_value_destroy(&v);
        if (rc)
            return rc;
    }
    return 0;
}

static agg_acc **accs_new(const acc_fields *f)
{
    agg_acc **a = calloc(f->n ? f->n : 1, sizeof *a);
    assert(a);
    for (size_t i = 0; i < f->n; i++)
        a[i] = agg_acc_new(f->v[i].ops);
    return a;
}

static void accs_free(agg_acc **a, size_t n)
{
    for (size_t i = 0; a && i < n; i++)
        agg_acc_destroy(a[i]);
    free(a);
}

/* ---- the group table ------------------------------------------------------------------------ */

typedef struct group {
    q_buf key;       /* q_key encoding of the _id */
    bson_value_t id; /* owned */
    agg_acc **accs;
    uint64_t hash;
} group;

typedef struct st_group {
    agg_stage base;
    agg_expr *id;
    acc_fields f;
    /* run-time */
    group **v;      /* in first-seen order */
    size_t n, cap;
    group **slots;  /* open addressing over v */
    size_t nslots;
    int64_t mem;
    agg_sorter *spilled;
    bool filled;
    size_t pos;
    bson_t *pending; /* the spilled merge's look-ahead */
} st_group;

static uint64_t fnv(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static void encode_value(const bson_value_t *v, q_buf *out)
{
    bson_t tmp = BSON_INITIALIZER;
    bson_iter_t it;
    if (v->value_type == BSON_TYPE_EOD)
        bson_append_null(&tmp, "k", 1);
    else
        agg_value_append(&tmp, "k", 1, v);
    bson_iter_init_find(&it, &tmp, "k");
    q_key_append_value(out, &it, false);
    bson_destroy(&tmp);
}

static void group_free(group *g, size_t nacc)
{
    q_buf_cleanup(&g->key);
    agg_value_destroy(&g->id);
    accs_free(g->accs, nacc);
    free(g);
}

static void table_clear(st_group *s)
{
    for (size_t i = 0; i < s->n; i++)
        group_free(s->v[i], s->f.n);
    free(s->v);
    free(s->slots);
    s->v = NULL;
    s->slots = NULL;
    s->n = s->cap = s->nslots = 0;
    s->mem = 0;
}

static void table_rehash(st_group *s)
{
    size_t ns = s->nslots ? 2 * s->nslots : 64;
    group **sl = calloc(ns, sizeof *sl);
    assert(sl);
    for (size_t i = 0; i < s->n; i++) {
        size_t j = s->v[i]->hash & (ns - 1);
        while (sl[j])
            j = (j + 1) & (ns - 1);
        sl[j] = s->v[i];
    }
    free(s->slots);
    s->slots = sl;
    s->nslots = ns;
}

/* The group of key (created with id when new). */
static group *table_get(st_group *s, q_buf *key, const bson_value_t *id)
{
    uint64_t h = fnv(key->data, key->len);
    if (s->nslots) {
        for (size_t j = h & (s->nslots - 1); s->slots[j]; j = (j + 1) & (s->nslots - 1)) {
            group *g = s->slots[j];
            if (g->hash == h && g->key.len == key->len &&
                memcmp(g->key.data, key->data, key->len) == 0)
                return g;
        }
    }
    if (2 * (s->n + 1) > s->nslots)
        table_rehash(s);
    group *g = calloc(1, sizeof *g);
    assert(g);
    g->key = *key;
    q_buf_init(key);
    g->hash = h;
    if (id->value_type == BSON_TYPE_EOD)
        g->id.value_type = BSON_TYPE_NULL;
    else
        agg_value_copy(id, &g->id);
    g->accs = accs_new(&s->f);
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->v = realloc(s->v, s->cap * sizeof *s->v);
        assert(s->v);
    }
    s->v[s->n++] = g;
    size_t j = h & (s->nslots - 1);
    while (s->slots[j])
        j = (j + 1) & (s->nslots - 1);
    s->slots[j] = g;
    s->mem += (int64_t)(sizeof *g + g->key.len + 64 * (s->f.n + 1));
    return g;
}

static int64_t groups_mem(const st_group *s)
{
    int64_t m = s->mem;
    for (size_t i = 0; i < s->n; i++)
        for (size_t k = 0; k < s->f.n; k++)
            m += (int64_t)agg_acc_mem(s->v[i]->accs[k]);
    return m;
}

/* ---- spilling ------------------------------------------------------------------------------- */

static int key_cmp(const bson_t *a, const bson_t *b, void *arg)
{
    bson_iter_t x, y;
    const uint8_t *da, *db;
    uint32_t la, lb;
    bson_subtype_t st;
    bson_iter_init_find(&x, a, "k");
    bson_iter_init_find(&y, b, "k");
    bson_iter_binary(&x, &st, &la, &da);
    bson_iter_binary(&y, &st, &lb, &db);
    int c = memcmp(da, db, la < lb ? la : lb);
    return c ? c : (la > lb) - (la < lb);
}

/* Every group's partial state into the sorter, as one run. */
static int spill_groups(st_group *s, md_error *err)
{
    char k[24];
    if (!s->spilled)
        s->spilled = agg_sorter_new(s->base.ctx, key_cmp, NULL, INT64_MAX);
    for (size_t i = 0; i < s->n; i++) {
        group *g = s->v[i];
        bson_t *d = bson_new(), p;
        bson_append_binary(d, "k", 1, BSON_SUBTYPE_BINARY, g->key.data, (uint32_t)g->key.len);
        agg_value_append(d, "i", 1, &g->id);
        bson_append_document_begin(d, "p", 1, &p);
        for (size_t a = 0; a < s->f.n; a++) {
            snprintf(k, sizeof k, "%zu", a);
            agg_acc_partial(g->accs[a], &p, k);
        }
        bson_append_document_end(d, &p);
        int rc = agg_sorter_add(s->spilled, d, err);
        if (rc)
            return rc;
    }
    table_clear(s);
    return agg_sorter_spill(s->spilled, err);
}

static void group_result(st_group *s, const bson_value_t *id, agg_acc **accs, bson_t **out)
{
    *out = bson_new();
    agg_value_append(*out, "_id", 3, id);
    for (size_t i = 0; i < s->f.n; i++)
        agg_acc_result(accs[i], *out, s->f.v[i].name);
}

/* The next group of the spilled merge: partials of equal keys folded. */
static int merged_next(st_group *s, bson_t **out, md_error *err)
{
    bson_t *d = s->pending;
    s->pending = NULL;
    int rc = d ? 0 : agg_sorter_next(s->spilled, &d, err);
    if (rc)
        return rc;
    agg_acc **accs = accs_new(&s->f);
    bson_iter_t it, p;
    bson_value_t id = {.value_type = BSON_TYPE_NULL};
    bool have_id = false;
    for (;;) {
        if (!have_id && bson_iter_init_find(&it, d, "i")) {
            agg_value_copy(bson_iter_value(&it), &id);
            have_id = true;
        }
        if (bson_iter_init_find(&it, d, "p") && bson_iter_recurse(&it, &p))
            for (size_t a = 0; a < s->f.n && bson_iter_next(&p); a++)
                if ((rc = agg_acc_merge(accs[a], &p, err)) != 0)
                    break;
        bson_t *nx = NULL;
        int r2 = rc ? rc : agg_sorter_next(s->spilled, &nx, err);
        if (r2 == 0 && key_cmp(d, nx, NULL) == 0) {
            bson_destroy(d);
            d = nx;
            continue;
        }
        bson_destroy(d);
        if (r2 == 0)
            s->pending = nx;
        else if (r2 != MD_NOTFOUND)
            rc = r2;
        break;
    }
    if (!rc)
        group_result(s, &id, accs, out);
    agg_value_destroy(&id);
    accs_free(accs, s->f.n);
    return rc;
}

/* ---- the stage ---------------------------------------------------------------------------------- */

static int group_fill(st_group *s, md_error *err)
{
    agg_ctx *ctx = s->base.ctx;
    bson_t *d;
    int rc;
    int64_t since = 0;
    while ((rc = agg_pull(&s->base, &d, err)) == 0) {
        bson_value_t id;
        q_buf key;
        agg_vars_set_root(&ctx->vars, d);
        rc = agg_expr_eval(s->id, &ctx->vars, &id, err);
        if (rc == 0) {
            q_buf_init(&key);
            encode_value(&id, &key);
            group *g = table_get(s, &key, &id);
            q_buf_cleanup(&key);
            rc = acc_feed(ctx, &s->f, g->accs, err);
            agg_value_destroy(&id);
        }
        bson_destroy(d);
        if (rc)
            return rc;
        /* the accumulators' memory is summed every 64 documents */
        if (++since < 64 && s->mem <= ctx->group_mem)
            continue;
        since = 0;
        if (groups_mem(s) <= ctx->group_mem)
            continue;
        if (!ctx->allow_disk)
            return q_err(err, MD_ETOOBIG, AGG_CODE_GROUP_MEM,
                         "Exceeded memory limit for $group, but didn't allow external sort. "
                         "Pass allowDiskUse:true to opt in.");
        if ((rc = spill_groups(s, err)) != 0)
            return rc;
    }
    if (rc != MD_NOTFOUND)
        return rc;
    if (s->spilled) {
        if ((rc = spill_groups(s, err)) != 0)
            return rc;
        if ((rc = agg_sorter_finish(s->spilled, err)) != 0)
            return rc;
    }
    s->filled = true;
    return 0;
}

static int group_next(agg_stage *st, bson_t **out, md_error *err)
{
    st_group *s = (st_group *)st;
    if (!s->filled) {
        int rc = group_fill(s, err);
        if (rc)
            return rc;
    }
    if (s->spilled)
        return merged_next(s, out, err);
    if (s->pos >= s->n)
        return MD_NOTFOUND;
    group *g = s->v[s->pos++];
    group_result(s, &g->id, g->accs, out);
    return 0;
}

static void group_reset(agg_stage *st)
{
    st_group *s = (st_group *)st;
    table_clear(s);
    agg_sorter_destroy(s->spilled);
    s->spilled = NULL;
    if (s->pending)
        bson_destroy(s->pending);
    s->pending = NULL;
    s->filled = false;
    s->pos = 0;
}

static void group_destroy(agg_stage *st)
{
    st_group *s = (st_group *)st;
    group_reset(st);
    agg_expr_destroy(s->id);
    acc_fields_cleanup(&s->f);
}

static const agg_stage_ops group_ops = {
    .name = "$group", .next = group_next, .reset = group_reset, .destroy = group_destroy};

int agg_parse_group(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out, md_error *err)
{
    bson_iter_t it;
    bool have_id = false;
    int rc = 0;
    if (!BSON_ITER_HOLDS_DOCUMENT(spec))
        return q_err(err, MD_EINVAL, 15947, "a group's fields must be specified in an object");
    st_group *s = agg_stage_alloc(sizeof *s, &group_ops, ctx, bson_iter_key(spec), spec);
    bson_iter_recurse(spec, &it);
    while (rc == 0 && bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), "_id") == 0) {
            if (have_id)
                rc = q_err(err, MD_EINVAL, 16411, "a group specification can only have one _id");
            else
                rc = agg_expr_parse(&it, ctx->scope, &s->id, err);
            have_id = true;
        } else {
            rc = acc_field_parse(ctx, &it, &s->f, err);
        }
    }
    if (rc == 0 && !have_id)
        rc = q_err(err, MD_EINVAL, 15955, "a group specification must include an _id");
    if (rc) {
        agg_stage_destroy(&s->base);
        return rc;
    }
    agg_list_push(out, &s->base);
    return 0;
}

/* Parse a $group from a document built here (the desugared stages). */
static int group_from(agg_ctx *ctx, const bson_t *g, agg_list *out, md_error *err)
{
    bson_iter_t it;
    bson_t wrap = BSON_INITIALIZER;
    BSON_APPEND_DOCUMENT(&wrap, "$group", g);
    bson_iter_init(&it, &wrap);
    bson_iter_next(&it);
    int rc = agg_parse_group(ctx, &it, out, err);
    bson_destroy(&wrap);
    return rc;
}

/* A "$path" string or an {$op: ...} document. */
static bool is_path_or_op(const bson_iter_t *it)
{
    bson_iter_t sub;
    if (BSON_ITER_HOLDS_UTF8(it))
        return bson_iter_utf8(it, NULL)[0] == '$';
    return BSON_ITER_HOLDS_DOCUMENT(it) && bson_iter_recurse(it, &sub) && bson_iter_next(&sub) &&
           bson_iter_key(&sub)[0] == '$';
}

/* {$sortByCount: e}: {$group: {_id: e, count: {$sum: 1}}}, {$sort: {count: -1}}. */
int agg_parse_sort_by_count(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out,
                            md_error *err)
{
    if (!is_path_or_op(spec))
        return q_err(err, MD_EINVAL, 40148,
                     "the sortByCount field must be defined as a $-prefixed path or an "
                     "expression");
    bson_t g = BSON_INITIALIZER, sum, sort = BSON_INITIALIZER;
    bson_append_iter(&g, "_id", 3, spec);
    BSON_APPEND_DOCUMENT_BEGIN(&g, "count", &sum);
    BSON_APPEND_INT32(&sum, "$sum", 1);
    bson_append_document_end(&g, &sum);
    int rc = group_from(ctx, &g, out, err);
    BSON_APPEND_INT32(&sort, "count", -1);
    if (rc == 0)
        agg_list_push(out, agg_sort_new(ctx, &sort));
    bson_destroy(&g);
    bson_destroy(&sort);
    return rc;
}

/* ---- $bucket ------------------------------------------------------------------------------------- */

typedef struct bucket_spec {
    bson_iter_t group_by, boundaries, def, output;
    bool has_group_by, has_boundaries, has_def, has_output;
} bucket_spec;

static int bucket_read(const bson_iter_t *spec, bucket_spec *b, md_error *err)
{
    bson_iter_t it;
    memset(b, 0, sizeof *b);
    if (!BSON_ITER_HOLDS_DOCUMENT(spec))
        return q_err(err, MD_EINVAL, 40201,
                     "Argument to $bucket stage must be an object, but found type: %s.",
                     q_type_name(bson_iter_type(spec)));
    bson_iter_recurse(spec, &it);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (!strcmp(k, "groupBy"))
            b->group_by = it, b->has_group_by = true;
        else if (!strcmp(k, "boundaries"))
            b->boundaries = it, b->has_boundaries = true;
        else if (!strcmp(k, "default"))
            b->def = it, b->has_def = true;
        else if (!strcmp(k, "output"))
            b->output = it, b->has_output = true;
        else
            return q_err(err, MD_EINVAL, 40197, "Unrecognized option to $bucket: %s.", k);
    }
    if (!b->has_group_by || !b->has_boundaries)
        return q_err(err, MD_EINVAL, 40198,
                     "$bucket requires 'groupBy' and 'boundaries' to be specified.");
    if (!is_path_or_op(&b->group_by))
        return q_err(err, MD_EINVAL, 40202, "The $bucket 'groupBy' field must be defined as a "
                     "$-prefixed path or an expression, but found: %s.",
                     q_type_name(bson_iter_type(&b->group_by)));
    if (!BSON_ITER_HOLDS_ARRAY(&b->boundaries))
        return q_err(err, MD_EINVAL, 40200, "The $bucket 'boundaries' field must be an array, "
                     "but found type: %s.", q_type_name(bson_iter_type(&b->boundaries)));
    if (b->has_output && !BSON_ITER_HOLDS_DOCUMENT(&b->output))
        return q_err(err, MD_EINVAL, 40196, "The $bucket 'output' field must be an object, but "
                     "found type: %s.", q_type_name(bson_iter_type(&b->output)));
    return 0;
}

/* Boundaries: at least two constants of one canonical type, ascending. */
static int bucket_bounds(const bucket_spec *b, md_error *err)
{
    bson_iter_t it, prev;
    int n = 0;
    bson_iter_recurse(&b->boundaries, &it);
    while (bson_iter_next(&it)) {
        if (is_path_or_op(&it))
            return q_err(err, MD_EINVAL, 40191, "The $bucket 'boundaries' field must be an array "
                         "of constant values, but found value: %s.", bson_iter_utf8(&it, NULL)
                             ? bson_iter_utf8(&it, NULL) : "an expression");
        if (n > 0) {
            if (q_type_rank(bson_iter_type(&it)) != q_type_rank(bson_iter_type(&prev)))
                return q_err(err, MD_EINVAL, 40193, "All values in the the 'boundaries' option "
                             "to $bucket must have the same type. Found conflicting types %s "
                             "and %s.", q_type_name(bson_iter_type(&prev)),
                             q_type_name(bson_iter_type(&it)));
            if (q_value_cmp(&prev, &it) >= 0)
                return q_err(err, MD_EINVAL, 40194, "The 'boundaries' option to $bucket must be "
                             "sorted, but elements %d and %d are not in ascending order", n - 1,
                             n);
        }
        prev = it;
        n++;
    }
    if (n < 2)
        return q_err(err, MD_EINVAL, 40192, "The $bucket 'boundaries' field must have at least "
                     "2 values, but found %d value(s).", n);
    if (!b->has_def)
        return 0;
    bson_iter_t first;
    bson_iter_recurse(&b->boundaries, &first);
    bson_iter_next(&first);
    if (is_path_or_op(&b->def))
        return q_err(err, MD_EINVAL, 40199, "The $bucket 'default' field must be a constant");
    if (q_type_rank(bson_iter_type(&b->def)) == q_type_rank(bson_iter_type(&first)) &&
        q_value_cmp(&b->def, &first) >= 0 && q_value_cmp(&b->def, &prev) < 0)
        return q_err(err, MD_EINVAL, 40195, "The $bucket 'default' field must be less than the "
                     "lowest boundary or greater than or equal to the highest boundary.");
    return 0;
}

/* {$cond-free} $switch: one branch per [b_i, b_i+1). */
static void bucket_switch(const bucket_spec *b, bson_t *id)
{
    bson_t sw, branches, br, c, and, cmp, args;
    bson_iter_t it, prev;
    char k[24];
    int i = 0;
    BSON_APPEND_DOCUMENT_BEGIN(id, "$switch", &sw);
    BSON_APPEND_ARRAY_BEGIN(&sw, "branches", &branches);
    bson_iter_recurse(&b->boundaries, &it);
    bson_iter_next(&it);
    prev = it;
    while (bson_iter_next(&it)) {
        snprintf(k, sizeof k, "%d", i++);
        bson_append_document_begin(&branches, k, -1, &br);
        BSON_APPEND_DOCUMENT_BEGIN(&br, "case", &c);
        BSON_APPEND_ARRAY_BEGIN(&c, "$and", &and);
        BSON_APPEND_DOCUMENT_BEGIN(&and, "0", &cmp);
        BSON_APPEND_ARRAY_BEGIN(&cmp, "$gte", &args);
        bson_append_iter(&args, "0", 1, &b->group_by);
        bson_t lit;
        BSON_APPEND_DOCUMENT_BEGIN(&args, "1", &lit);
        bson_append_iter(&lit, "$literal", -1, &prev);
        bson_append_document_end(&args, &lit);
        bson_append_array_end(&cmp, &args);
        bson_append_document_end(&and, &cmp);
        BSON_APPEND_DOCUMENT_BEGIN(&and, "1", &cmp);
        BSON_APPEND_ARRAY_BEGIN(&cmp, "$lt", &args);
        bson_append_iter(&args, "0", 1, &b->group_by);
        BSON_APPEND_DOCUMENT_BEGIN(&args, "1", &lit);
        bson_append_iter(&lit, "$literal", -1, &it);
        bson_append_document_end(&args, &lit);
        bson_append_array_end(&cmp, &args);
        bson_append_document_end(&and, &cmp);
        bson_append_array_end(&c, &and);
        bson_append_document_end(&br, &c);
        BSON_APPEND_DOCUMENT_BEGIN(&br, "then", &lit);
        bson_append_iter(&lit, "$literal", -1, &prev);
        bson_append_document_end(&br, &lit);
        bson_append_document_end(&branches, &br);
        prev = it;
    }
    bson_append_array_end(&sw, &branches);
    if (b->has_def) {
        bson_t lit;
        BSON_APPEND_DOCUMENT_BEGIN(&sw, "default", &lit);
        bson_append_iter(&lit, "$literal", -1, &b->def);
        bson_append_document_end(&sw, &lit);
    }
    bson_append_document_end(id, &sw);
}

int agg_parse_bucket(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out, md_error *err)
{
    bucket_spec b;
    int rc = bucket_read(spec, &b, err);
    if (!rc)
        rc = bucket_bounds(&b, err);
    if (rc)
        return rc;
    bson_t g = BSON_INITIALIZER, id, sort = BSON_INITIALIZER;
    BSON_APPEND_DOCUMENT_BEGIN(&g, "_id", &id);
    bucket_switch(&b, &id);
    bson_append_document_end(&g, &id);
    if (b.has_output) {
        bson_iter_t o;
        bson_iter_recurse(&b.output, &o);
        while (bson_iter_next(&o))
            bson_append_iter(&g, NULL, 0, &o);
    } else {
        bson_t sum;
        BSON_APPEND_DOCUMENT_BEGIN(&g, "count", &sum);
        BSON_APPEND_INT32(&sum, "$sum", 1);
        bson_append_document_end(&g, &sum);
    }
    rc = group_from(ctx, &g, out, err);
    BSON_APPEND_INT32(&sort, "_id", 1);
    if (rc == 0)
        agg_list_push(out, agg_sort_new(ctx, &sort));
    bson_destroy(&g);
    bson_destroy(&sort);
    return rc;
}

/* ---- $bucketAuto ------------------------------------------------------------------------------- */

typedef struct st_bauto {
    agg_stage base;
    agg_expr *group_by;
    int32_t nbuckets;
    acc_fields f;
    bool default_output;
    /* run-time */
    agg_sorter *so;
    int64_t ndocs, taken;
    int32_t made;
    bson_t *next_item; /* the first item of the next bucket */
    bool filled;
} st_bauto;

static int item_value_cmp(const bson_t *a, const bson_t *b, void *arg)
{
    bson_iter_t x, y;
    bson_iter_init_find(&x, a, "k");
    bson_iter_init_find(&y, b, "k");
    return agg_value_cmp(bson_iter_value(&x), bson_iter_value(&y));
}

static int bauto_fill(st_bauto *s, md_error *err)
{
    agg_ctx *ctx = s->base.ctx;
    bson_t *d;
    int rc;
    s->so = agg_sorter_new(ctx, item_value_cmp, NULL, ctx->sort_mem);
    while ((rc = agg_pull(&s->base, &d, err)) == 0) {
        bson_value_t v;
        agg_vars_set_root(&ctx->vars, d);
        rc = agg_expr_eval(s->group_by, &ctx->vars, &v, err);
        if (rc) {
            bson_destroy(d);
            return rc;
        }
        bson_t *item = bson_new();
        if (v.value_type == BSON_TYPE_EOD)
            bson_append_null(item, "k", 1);
        else
            agg_value_append(item, "k", 1, &v);
        BSON_APPEND_DOCUMENT(item, "d", d);
        agg_value_destroy(&v);
        bson_destroy(d);
        s->ndocs++;
        if ((rc = agg_sorter_add(s->so, item, err)) != 0)
            break;
    }
    if (rc == MD_ETOOBIG)
        return q_err(err, MD_ETOOBIG, AGG_CODE_SORT_MEM,
                     "Sort exceeded memory limit of %lld bytes, but did not opt in to external "
                     "sorting. Aborting operation. Pass allowDiskUse:true to opt in.",
                     (long long)ctx->sort_mem);
    if (rc != MD_NOTFOUND)
        return rc;
    s->filled = true;
    return agg_sorter_finish(s->so, err);
}

/* Add item (destroyed) to the bucket's accumulators; *last keeps its key. */
static int bauto_add(st_bauto *s, bson_t *item, agg_acc **accs, bson_value_t *last,
                     md_error *err)
{
    bson_iter_t k, d;
    const uint8_t *data;
    uint32_t len;
    bson_t doc;
    bson_iter_init_find(&k, item, "k");
    bson_iter_init_find(&d, item, "d");
    bson_iter_document(&d, &len, &data);
    bson_init_static(&doc, data, len);
    agg_vars_set_root(&s->base.ctx->vars, &doc);
    int rc = acc_feed(s->base.ctx, &s->f, accs, err);
    agg_value_destroy(last);
    agg_value_copy(bson_iter_value(&k), last);
    bson_destroy(item);
    s->taken++;
    return rc;
}

static int bauto_next(agg_stage *st, bson_t **out, md_error *err)
{
    st_bauto *s = (st_bauto *)st;
    int rc;
    if (!s->filled && (rc = bauto_fill(s, err)) != 0)
        return rc;
    if (s->made >= s->nbuckets)
        return MD_NOTFOUND;
    bson_t *item = s->next_item;
    s->next_item = NULL;
    if (!item && (rc = agg_sorter_next(s->so, &item, err)) != 0)
        return rc;
    int64_t approx = (int64_t)((double)s->ndocs / s->nbuckets + 0.5);
    if (approx < 1)
        approx = 1;
    bool last_bucket = ++s->made == s->nbuckets;
    agg_acc **accs = accs_new(&s->f);
    bson_value_t min = {.value_type = BSON_TYPE_EOD}, max = {.value_type = BSON_TYPE_EOD};
    bson_iter_t k;
    bson_iter_init_find(&k, item, "k");
    agg_value_copy(bson_iter_value(&k), &min);
    rc = bauto_add(s, item, accs, &max, err);
    for (int64_t j = 1; rc == 0 && (last_bucket || j < approx); j++) {
        if ((rc = agg_sorter_next(s->so, &item, err)) != 0)
            break;
        rc = bauto_add(s, item, accs, &max, err);
    }
    while (rc == 0 && !last_bucket && (rc = agg_sorter_next(s->so, &item, err)) == 0) {
        bson_iter_init_find(&k, item, "k");
        if (agg_value_cmp(bson_iter_value(&k), &max) != 0) {
            s->next_item = item;
            /* the bucket's max is the next bucket's min */
            agg_value_destroy(&max);
            agg_value_copy(bson_iter_value(&k), &max);
            break;
        }
        rc = bauto_add(s, item, accs, &max, err);
    }
    if (rc == MD_NOTFOUND)
        rc = 0;
    if (rc == 0) {
        bson_t id;
        *out = bson_new();
        BSON_APPEND_DOCUMENT_BEGIN(*out, "_id", &id);
        agg_value_append(&id, "min", 3, &min);
        agg_value_append(&id, "max", 3, &max);
        bson_append_document_end(*out, &id);
        for (size_t i = 0; i < s->f.n; i++)
            agg_acc_result(accs[i], *out, s->f.v[i].name);
    }
    if (!s->next_item && s->taken >= s->ndocs)
        s->made = s->nbuckets; /* the input is used up */
    agg_value_destroy(&min);
    agg_value_destroy(&max);
    accs_free(accs, s->f.n);
    return rc;
}

static void bauto_reset(agg_stage *st)
{
    st_bauto *s = (st_bauto *)st;
    agg_sorter_destroy(s->so);
    s->so = NULL;
    if (s->next_item)
        bson_destroy(s->next_item);
    s->next_item = NULL;
    s->ndocs = s->taken = 0;
    s->made = 0;
    s->filled = false;
}

static void bauto_destroy(agg_stage *st)
{
    st_bauto *s = (st_bauto *)st;
    bauto_reset(st);
    agg_expr_destroy(s->group_by);
    acc_fields_cleanup(&s->f);
}

static const agg_stage_ops bauto_ops = {
    .name = "$bucketAuto", .next = bauto_next, .reset = bauto_reset, .destroy = bauto_destroy};

static int bauto_option(agg_ctx *ctx, st_bauto *s, const bson_iter_t *it, bool *have_gb,
                        bool *have_n, md_error *err)
{
    const char *k = bson_iter_key(it);
    if (!strcmp(k, "groupBy")) {
        if (!is_path_or_op(it))
            return q_err(err, MD_EINVAL, 40239, "The $bucketAuto 'groupBy' field must be defined "
                         "as a $-prefixed path or an expression object, but found: %s.",
                         q_type_name(bson_iter_type(it)));
        *have_gb = true;
        return agg_expr_parse(it, ctx->scope, &s->group_by, err);
    }
    if (!strcmp(k, "buckets")) {
        int64_t n;
        if (!BSON_ITER_HOLDS_NUMBER(it))
            return q_err(err, MD_EINVAL, 40241, "The $bucketAuto 'buckets' field must be a "
                         "numeric value, but found type: %s.", q_type_name(bson_iter_type(it)));
        if (!q_iter_int64(it, &n) || n > INT32_MAX || n < INT32_MIN)
            return q_err(err, MD_EINVAL, 40242, "The $bucketAuto 'buckets' field must be "
                         "representable as a 32-bit integer, but found %g",
                         bson_iter_as_double(it));
        if (n <= 0)
            return q_err(err, MD_EINVAL, 40243, "The $bucketAuto 'buckets' field must be greater "
                         "than 0, but found: %lld", (long long)n);
        s->nbuckets = (int32_t)n;
        *have_n = true;
        return 0;
    }
    if (!strcmp(k, "output")) {
        bson_iter_t o;
        if (!BSON_ITER_HOLDS_DOCUMENT(it))
            return q_err(err, MD_EINVAL, 40244, "The $bucketAuto 'output' field must be an "
                         "object, but found type: %s.", q_type_name(bson_iter_type(it)));
        s->default_output = false;
        acc_fields_cleanup(&s->f);
        bson_iter_recurse(it, &o);
        while (bson_iter_next(&o)) {
            int rc = acc_field_parse(ctx, &o, &s->f, err);
            if (rc)
                return rc;
        }
        return 0;
    }
    if (!strcmp(k, "granularity"))
        return q_err(err, MD_EINVAL, MD_CODE_NOT_YET_IMPLEMENTED,
                     "$bucketAuto's granularity is not supported by minidoc");
    return q_err(err, MD_EINVAL, 40245, "Unrecognized option to $bucketAuto: %s.", k);
}

int agg_parse_bucket_auto(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out, md_error *err)
{
    bson_iter_t it;
    bool have_gb = false, have_n = false;
    int rc = 0;
    if (!BSON_ITER_HOLDS_DOCUMENT(spec))
        return q_err(err, MD_EINVAL, 40240, "The argument to $bucketAuto must be an object, but "
                     "found type: %s.", q_type_name(bson_iter_type(spec)));
    st_bauto *s = agg_stage_alloc(sizeof *s, &bauto_ops, ctx, "$bucketAuto", spec);
    s->default_output = true;
    bson_iter_recurse(spec, &it);
    while (rc == 0 && bson_iter_next(&it))
        rc = bauto_option(ctx, s, &it, &have_gb, &have_n, err);
    if (rc == 0 && (!have_gb || !have_n))
        rc = q_err(err, MD_EINVAL, 40246,
                   "$bucketAuto requires 'groupBy' and 'buckets' to be specified");
    if (rc == 0 && s->default_output) {
        /* {count: {$sum: 1}} */
        bson_t d = BSON_INITIALIZER, sum;
        BSON_APPEND_DOCUMENT_BEGIN(&d, "count", &sum);
        BSON_APPEND_INT32(&sum, "$sum", 1);
        bson_append_document_end(&d, &sum);
        bson_iter_init(&it, &d);
        bson_iter_next(&it);
        rc = acc_field_parse(ctx, &it, &s->f, err);
        bson_destroy(&d);
    }
    if (rc) {
        agg_stage_destroy(&s->base);
        return rc;
    }
    agg_list_push(out, &s->base);
    return 0;
}
