/*
 * agg_stage_geonear.c -- the $geoNear stage: documents in order of their
 * distance from a point, each with its distance (and, with includeLocs,
 * the location that has it) added, as MongoDB 3.x's $geoNear.
 *
 * It must be the first stage, and it is the pipeline's source: the run
 * rewrites the spec into a near query over the collection's geo index
 *
 *   {<key>: {$near | $nearSphere: near, $maxDistance, $minDistance},
 *    ...query}
 *
 * and hands it to the $near machinery (q_geo_near.c), which scans the
 * index in growing rings and returns at most `limit` documents sorted by
 * distance.  The geo field is `key`, or (as MongoDB chooses without it)
 * the field of the collection's only 2d index, else of its only 2dsphere
 * index; more than one of the kind it falls on is IndexNotFound (27).
 * Units are the near query's: a GeoJSON point gives meters, a legacy pair
 * with spherical radians, without it flat units (2d only).
 *
 * Deviations (README, "The aggregation pipeline"): `key` is MongoDB 4.0's
 * option; maxDistance 0 is a bound (3.x dropped a maxDistance that is not
 * positive); a missing collection gives no documents (4.0), not 3.x's
 * "can't find ns"; an unknown option is BadValue (3.x ignored it); the
 * index-choice errors are 4.0's IndexNotFound (3.x: 16604); $geoNear
 * inside $lookup or $facet is refused.
 */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "agg_int.h"
#include "q_geo.h"

#define CODE_INDEX_NOT_FOUND 27

typedef struct st_geonear {
    agg_stage base;
    bson_t near;      /* {"near": the point as given} */
    bool near_geojson;
    char *dist_field, *locs_field, *key;
    bool spherical;
    bool has_max, has_min, has_num;
    double max_d, min_d, mult;
    int64_t limit;
    bson_t query;
    /* run-time */
    bool ran;
    bson_t **docs;
    size_t n, pos;
    double *dist;
    bson_value_t *locs;
} st_geonear;

static int bad(md_error *err, int code, const char *msg)
{
    return q_err(err, MD_EINVAL, code, "%s", msg);
}

/* FieldPath's rules for distanceField and includeLocs. */
static int check_path(const char *p, md_error *err)
{
    if (!*p)
        return bad(err, 40352, "FieldPath cannot be constructed with empty string");
    for (const char *c = p; c; c = strchr(c, '.') ? strchr(c, '.') + 1 : NULL) {
        if (*c == '.' || *c == '\0')
            return bad(err, 15998, "FieldPath field names may not be empty strings.");
        if (*c == '$')
            return bad(err, 16410, "FieldPath field names may not start with '$'.");
    }
    return 0;
}

static int parse_number(const bson_iter_t *it, int code, const char *msg, double *out,
                        md_error *err)
{
    if (!BSON_ITER_HOLDS_NUMBER(it))
        return bad(err, code, msg);
    *out = bson_iter_as_double(it);
    return 0;
}

/* One option of the spec. */
static int parse_option(st_geonear *s, const bson_iter_t *it, md_error *err)
{
    const char *k = bson_iter_key(it);
    double v;
    int rc;
    if (!strcmp(k, "near")) {
        if (!BSON_ITER_HOLDS_ARRAY(it) && !BSON_ITER_HOLDS_DOCUMENT(it))
            return bad(err, 16605, "$geoNear requires a 'near' option as an Array");
        q_geo_pt pt;
        q_geo *g = NULL;
        bool legacy = q_geo_legacy_point(it, &pt);
        if (!legacy && (q_geo_parse_geojson(it, &g, NULL) || g->type != QG_POINT)) {
            q_geo_free(g);
            return bad(err, 17304, "'near' field must be point");
        }
        q_geo_free(g);
        s->near_geojson = !legacy;
        bson_reinit(&s->near);
        bson_append_iter(&s->near, "near", -1, it);
    } else if (!strcmp(k, "distanceField") || !strcmp(k, "includeLocs")) {
        bool dist = k[0] == 'd';
        if (!BSON_ITER_HOLDS_UTF8(it))
            return bad(err, dist ? 16606 : 16607,
                       dist ? "$geoNear requires a 'distanceField' option as a String"
                            : "$geoNear requires that 'includeLocs' option is a String");
        if ((rc = check_path(bson_iter_utf8(it, NULL), err)) != 0)
            return rc;
        char **dst = dist ? &s->dist_field : &s->locs_field;
        free(*dst);
        *dst = strdup(bson_iter_utf8(it, NULL));
    } else if (!strcmp(k, "key")) {
        if (!BSON_ITER_HOLDS_UTF8(it))
            return bad(err, MD_CODE_TYPE_MISMATCH, "$geoNear requires a 'key' option as a String");
        if (!*bson_iter_utf8(it, NULL))
            return bad(err, MD_CODE_BAD_VALUE,
                       "$geoNear parameter 'key' cannot be the empty string");
        free(s->key);
        s->key = strdup(bson_iter_utf8(it, NULL));
    } else if (!strcmp(k, "limit") || !strcmp(k, "num")) {
        if ((rc = parse_number(it, 17303, "limit must be number", &v, err)) != 0)
            return rc;
        if (v < 0)
            return bad(err, 17302, "limit must be >=0");
        /* num wins over limit, wherever each stands (as 3.x) */
        if (k[0] == 'n' || !s->has_num)
            s->limit = v >= 0x1p63 ? INT64_MAX : (int64_t)v;
        s->has_num |= k[0] == 'n';
    } else if (!strcmp(k, "maxDistance")) {
        if ((rc = parse_number(it, 17299, "maxDistance must be a number", &s->max_d, err)))
            return rc;
        s->has_max = true;
    } else if (!strcmp(k, "minDistance")) {
        if ((rc = parse_number(it, 17300, "minDistance must be a number", &s->min_d, err)))
            return rc;
        s->has_min = true;
    } else if (!strcmp(k, "distanceMultiplier")) {
        if ((rc = parse_number(it, 17296, "distanceMultiplier must be a number", &s->mult,
                               err)))
            return rc;
        if (!(s->mult >= 0))
            return bad(err, 17297, "distanceMultiplier must be non-negative");
    } else if (!strcmp(k, "query")) {
        if (!BSON_ITER_HOLDS_DOCUMENT(it))
            return bad(err, MD_CODE_TYPE_MISMATCH, "$geoNear query must be an object");
        const uint8_t *d;
        uint32_t l;
        bson_t view;
        bson_iter_document(it, &l, &d);
        bson_init_static(&view, d, l);
        bson_destroy(&s->query);
        bson_copy_to(&view, &s->query);
    } else if (!strcmp(k, "spherical")) {
        s->spherical = bson_iter_as_bool(it);
    } else if (!strcmp(k, "collation")) {
        return bad(err, 40227, "$geoNear does not accept the 'collation' parameter. Instead, "
                               "specify a collation for the entire aggregation command.");
    } else if (strcmp(k, "uniqueDocs") != 0) {
        /* uniqueDocs: accepted and ignored (each document comes once) */
        return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE, "unknown argument to $geoNear: %s", k);
    }
    return 0;
}

/* ---- the run ------------------------------------------------------------------------- */

/* The only index of `kind` (NULL: none), or IndexNotFound when there are
 * several. */
static int only_index(q_coll *c, int kind, q_index **out, md_error *err)
{
    *out = NULL;
    for (size_t i = 0; i < c->nidx; i++) {
        if (!c->idx[i]->gp || c->idx[i]->gp->kind != kind)
            continue;
        if (*out)
            return q_err(err, MD_EINVAL, CODE_INDEX_NOT_FOUND,
                         "There is more than one %s index on %s; unsure which to use for "
                         "$geoNear", kind == Q_GEO_2D ? "2d" : "2dsphere", c->ns);
        *out = c->idx[i];
    }
    return 0;
}

/* The geo field and whether its index is 2d (c locked). */
static int pick_field(st_geonear *s, q_coll *c, const char **field, bool *is2d, md_error *err)
{
    q_index *ix = NULL;
    if (s->key) {
        *field = s->key;
        *is2d = false;
        for (size_t i = 0; i < c->nidx; i++)
            if (c->idx[i]->gp && !strcmp(c->idx[i]->gp->field, s->key)) {
                ix = c->idx[i];
                /* a 2d index on the field serves a legacy pair without spherical */
                if (ix->gp->kind == Q_GEO_2D && !s->near_geojson)
                    break;
            }
        if (!ix)
            return q_err(err, MD_EINVAL, CODE_INDEX_NOT_FOUND,
                         "$geoNear found no 2d or 2dsphere index on field '%s'", s->key);
        *is2d = ix->gp->kind == Q_GEO_2D;
        return 0;
    }
    int rc = only_index(c, Q_GEO_2D, &ix, err);
    if (!rc && !ix && (rc = only_index(c, Q_GEO_2DSPHERE, &ix, err)) == 0 && !ix)
        rc = bad(err, CODE_INDEX_NOT_FOUND,
                 "$geoNear requires a 2d or 2dsphere index, but none were found");
    if (rc)
        return rc;
    *field = ix->gp->field;
    *is2d = ix->gp->kind == Q_GEO_2D;
    return 0;
}

/* The near query the spec stands for (c locked); out initialized by the
 * call on success. */
static int build_filter(st_geonear *s, q_coll *c, bson_t *out, md_error *err)
{
    const char *field;
    bool is2d;
    int rc = pick_field(s, c, &field, &is2d, err);
    if (rc)
        return rc;
    if (!is2d && !s->spherical)
        return bad(err, 17301, "2dsphere index must have spherical: true");
    if (is2d && s->has_min)
        return bad(err, 17298, "minDistance doesn't work on 2d index");
    bson_iter_t it;
    bson_t near;
    bson_init(out);
    BSON_APPEND_DOCUMENT_BEGIN(out, field, &near);
    bson_iter_init_find(&it, &s->near, "near");
    if (s->near_geojson) {
        bson_t geo;
        BSON_APPEND_DOCUMENT_BEGIN(&near, s->spherical ? "$nearSphere" : "$near", &geo);
        bson_append_iter(&geo, "$geometry", -1, &it);
        bson_append_document_end(&near, &geo);
    } else {
        bson_append_iter(&near, s->spherical ? "$nearSphere" : "$near", -1, &it);
    }
    if (s->has_max)
        BSON_APPEND_DOUBLE(&near, "$maxDistance", s->max_d);
    if (s->has_min)
        BSON_APPEND_DOUBLE(&near, "$minDistance", s->min_d);
    bson_append_document_end(out, &near);
    bson_concat(out, &s->query);
    return 0;
}

/* Run the near query: docs, their distances and locations. */
static int geonear_run(st_geonear *s, md_error *err)
{
    md_db *db = s->base.ctx->db;
    q_coll *c = q_coll_find(db, s->base.ctx->coll);
    q_matcher *m = NULL;
    bson_t filter;
    s->ran = true;
    if (!c)
        return 0;
    q_coll_lock(db, c, false);
    int rc = build_filter(s, c, &filter, err);
    if (rc)
        goto out_unlock;
    rc = q_matcher_new(&filter, &m, err);
    bson_destroy(&filter);
    if (!rc && s->limit > 0)
        rc = q_geo_near_run(db, c, m, s->limit, &s->docs, &s->n, NULL, NULL, err);
    if (rc)
        goto out_unlock;
    const q_geo_pred *p = q_matcher_near(m);
    s->dist = calloc(s->n ? s->n : 1, sizeof *s->dist);
    s->locs = calloc(s->n ? s->n : 1, sizeof *s->locs);
    assert(s->dist && s->locs);
    for (size_t i = 0; i < s->n; i++)
        s->dist[i] = q_geo_doc_nearest(p, p->path, s->docs[i], &s->locs[i]) * s->mult;
out_unlock:
    q_matcher_destroy(m);
    q_coll_unlock(db, c);
    return rc;
}

static int geonear_next(agg_stage *st, bson_t **out, md_error *err)
{
    st_geonear *s = (st_geonear *)st;
    int rc;
    if (!s->ran && (rc = geonear_run(s, err)) != 0)
        return rc;
    if ((rc = agg_check_time(st->ctx, err)) != 0)
        return rc;
    if (s->pos >= s->n)
        return MD_NOTFOUND;
    size_t i = s->pos++;
    bson_value_t d = {.value_type = BSON_TYPE_DOUBLE, .value.v_double = s->dist[i]};
    bson_t a, b;
    agg_doc_set_path(s->docs[i], s->dist_field, &d, &a);
    if (s->locs_field && s->locs[i].value_type != BSON_TYPE_EOD) {
        agg_doc_set_path(&a, s->locs_field, &s->locs[i], &b);
        bson_destroy(&a);
        a = b;
    }
    *out = bson_copy(&a);
    bson_destroy(&a);
    return 0;
}

static void geonear_reset(agg_stage *st)
{
    st_geonear *s = (st_geonear *)st;
    for (size_t i = 0; i < s->n; i++) {
        bson_destroy(s->docs[i]);
        if (s->locs && s->locs[i].value_type != BSON_TYPE_EOD)
            bson_value_destroy(&s->locs[i]);
    }
    free(s->docs);
    free(s->dist);
    free(s->locs);
    s->docs = NULL;
    s->dist = NULL;
    s->locs = NULL;
    s->n = s->pos = 0;
    s->ran = false;
}

static void geonear_destroy(agg_stage *st)
{
    st_geonear *s = (st_geonear *)st;
    geonear_reset(st);
    bson_destroy(&s->near);
    bson_destroy(&s->query);
    free(s->dist_field);
    free(s->locs_field);
    free(s->key);
}

/* The spec as MongoDB serializes it (every option, defaults filled in). */
static void serialize(st_geonear *s, bson_t *o)
{
    bson_iter_t it;
    bson_iter_init_find(&it, &s->near, "near");
    bson_append_iter(o, "near", -1, &it);
    BSON_APPEND_UTF8(o, "distanceField", s->dist_field);
    BSON_APPEND_INT64(o, "limit", s->limit);
    if (s->has_max)
        BSON_APPEND_DOUBLE(o, "maxDistance", s->max_d);
    if (s->has_min)
        BSON_APPEND_DOUBLE(o, "minDistance", s->min_d);
    BSON_APPEND_DOCUMENT(o, "query", &s->query);
    BSON_APPEND_BOOL(o, "spherical", s->spherical);
    BSON_APPEND_DOUBLE(o, "distanceMultiplier", s->mult);
    if (s->locs_field)
        BSON_APPEND_UTF8(o, "includeLocs", s->locs_field);
    if (s->key)
        BSON_APPEND_UTF8(o, "key", s->key);
}

static const agg_stage_ops geonear_ops = {.name = "$geoNear", .next = geonear_next,
                                          .reset = geonear_reset, .destroy = geonear_destroy};

bool agg_stage_is_geonear(agg_stage *s)
{
    return s && s->ops == &geonear_ops;
}

void agg_geonear_absorb_limit(agg_stage *st, int64_t limit)
{
    st_geonear *s = (st_geonear *)st;
    assert(st->ops == &geonear_ops);
    if (limit >= 0 && limit < s->limit)
        s->limit = limit;
}

int agg_geonear_explain(agg_stage *st, bson_t *arr, const char *key, md_error *err)
{
    st_geonear *s = (st_geonear *)st;
    md_db *db = st->ctx->db;
    q_coll *c = q_coll_find(db, st->ctx->coll);
    bson_t o, spec, filter;
    char ns[2 * ENG_IDENT_MAX];
    int rc = 0;
    snprintf(ns, sizeof ns, "%s.%s", db->name, st->ctx->coll);
    BSON_APPEND_DOCUMENT_BEGIN(arr, key, &o);
    BSON_APPEND_DOCUMENT_BEGIN(&o, "$geoNear", &spec);
    serialize(s, &spec);
    if (c) {
        q_coll_lock(db, c, false);
        rc = build_filter(s, c, &filter, err);
        q_coll_unlock(db, c);
        if (!rc) {
            rc = q_explain_planner(db, c, ns, &filter, NULL, NULL, &spec, err);
            bson_destroy(&filter);
        }
    }
    bson_append_document_end(&o, &spec);
    bson_append_document_end(arr, &o);
    return rc;
}

int agg_parse_geonear(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out, md_error *err)
{
    bson_iter_t it;
    if (!BSON_ITER_HOLDS_DOCUMENT(spec))
        return bad(err, 10065, "invalid parameter: expected an object ($geoNear)");
    st_geonear *s = agg_stage_alloc(sizeof *s, &geonear_ops, ctx, "$geoNear", spec);
    bson_init(&s->near);
    bson_init(&s->query);
    s->limit = 100; /* MongoDB 3.x's default */
    s->mult = 1;
    int rc = 0;
    bson_iter_recurse(spec, &it);
    while (!rc && bson_iter_next(&it))
        rc = parse_option(s, &it, err);
    if (!rc && bson_empty(&s->near))
        rc = bad(err, 16605, "$geoNear requires a 'near' option as an Array");
    if (!rc && !s->dist_field)
        rc = bad(err, 16606, "$geoNear requires a 'distanceField' option as a String");
    if (rc) {
        agg_stage_destroy(&s->base);
        return rc;
    }
    agg_list_push(out, &s->base);
    return 0;
}
