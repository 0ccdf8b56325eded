/*
 * q_geo_near.c -- $near and $nearSphere: results sorted by distance, found
 * through the geo index in growing rings (MongoDB's GEO_NEAR_2D and
 * GEO_NEAR_2DSPHERE stages).
 *
 *   r = a small radius
 *   loop: scan the index intervals of the region within r of the center
 *         (2d: a box of geohash cells; 2dsphere: a cap's S2 covering),
 *         fetch and match each new document, note its distance;
 *         every document within r has now been seen (the intervals cover
 *         the region), so those are final;
 *         stop when enough are final (skip + limit), or r reached
 *         $maxDistance or the whole index; else r *= 2
 *
 * Each round scans the inner region again (documents seen before are
 * skipped by record id); the area grows four times per round, so the
 * rescans cost about a third more keys.  A near query needs a geo index
 * on its field: 2d for $near on a legacy pair, 2dsphere for a GeoJSON
 * point, either for $nearSphere on a legacy pair; without one it is
 * MongoDB 3.6's BadValue "unable to find index for $geoNear query".  Only
 * one near predicate, at the top level (else BadValue, q_match.c).
 * Deviation: count, update and delete take the same index but not the
 * distance order (they do not need it).
 */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "q_geo.h"

typedef struct hit {
    eng_rid rid;
    double d;
} hit;

typedef struct ridhash {
    eng_rid *v;
    size_t cap, n;
} ridhash;

static bool rh_add(ridhash *h, eng_rid r)
{
    if (2 * (h->n + 1) > h->cap) {
        size_t nc = h->cap ? h->cap * 2 : 256;
        eng_rid *nv = calloc(nc, sizeof *nv);
        assert(nv);
        for (size_t i = 0; i < h->cap; i++)
            if (h->v[i]) {
                size_t j = ((uint64_t)h->v[i] * 0x9e3779b97f4a7c15ull) >> 20 & (nc - 1);
                while (nv[j])
                    j = (j + 1) & (nc - 1);
                nv[j] = h->v[i];
            }
        free(h->v);
        h->v = nv;
        h->cap = nc;
    }
    size_t j = ((uint64_t)r * 0x9e3779b97f4a7c15ull) >> 20 & (h->cap - 1);
    while (h->v[j]) {
        if (h->v[j] == r)
            return false;
        j = (j + 1) & (h->cap - 1);
    }
    h->v[j] = r;
    h->n++;
    return true;
}

static int cmp_hit(const void *a, const void *b)
{
    const hit *x = a, *y = b;
    if (x->d != y->d)
        return x->d < y->d ? -1 : 1;
    return (x->rid > y->rid) - (x->rid < y->rid);
}

int q_geo_near_index(q_coll *c, const q_geo_pred *p, const char *path, q_index **out,
                     md_error *err)
{
    q_index *pick = NULL;
    for (size_t i = 0; i < c->nidx && !pick; i++) {
        q_index *ix = c->idx[i];
        bson_iter_t first;
        if (!ix->gp || strcmp(ix->gp->field, path) != 0 || !bson_iter_init(&first, &ix->key) ||
            !bson_iter_next(&first) || strcmp(bson_iter_key(&first), path) != 0)
            continue;
        if (ix->gp->kind == Q_GEO_2DSPHERE ? p->geojson || p->near_sphere : !p->geojson)
            pick = ix;
    }
    if (!pick)
        return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                     "error processing query: ns=%s planner returned error: unable to find "
                     "index for $geoNear query", c->ns);
    *out = pick;
    return 0;
}

/* One round: scan the region within r, adding new hits. */
static int near_round(md_db *db, q_coll *c, q_index *ix, const q_matcher *m,
                      const q_geo_pred *p, double r, ridhash *seen, hit **v, size_t *n,
                      size_t *cap, int64_t *keys, int64_t *docs, md_error *err)
{
    q_plan pl;
    q_scan s;
    eng_rid rid;
    bson_t doc;
    memset(&pl, 0, sizeof pl);
    pl.ix = ix;
    pl.dir = 1;
    pl.nused = 1;
    pl.geo_near = true;
    if (!q_geo_region_ivals(ix, p, r, &pl.iv, &pl.niv))
        return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE, "unable to search the geo index");
    int rc = q_scan_open_plan(&s, db, c, m, &pl, err);
    if (rc) {
        q_scan_close(&s);
        return rc;
    }
    while (q_scan_next(&s, &rid, &doc) == 0) {
        if (!rh_add(seen, rid))
            continue;
        if (*n == *cap) {
            *cap = *cap ? *cap * 2 : 64;
            *v = realloc(*v, *cap * sizeof **v);
            assert(*v);
        }
        (*v)[(*n)++] = (hit){rid, q_geo_doc_distance(p, p->path, &doc)};
    }
    rc = q_scan_error(&s, err);
    *keys += s.keys;
    *docs += s.docs;
    q_scan_close(&s);
    return rc;
}

int q_geo_near_run(md_db *db, q_coll *c, const q_matcher *m, int64_t want, bson_t ***docs,
                   size_t *n, int64_t *keys, int64_t *nexamined, md_error *err)
{
    const q_geo_pred *p = q_matcher_near(m);
    q_index *ix;
    int64_t k = 0, d = 0;
    *docs = NULL;
    *n = 0;
    if (!p)
        return Q_GEO_NOT_NEAR;
    int rc = q_geo_near_index(c, p, p->path, &ix, err);
    if (rc)
        return rc;
    const q_geo_params *gp = ix->gp;
    double full = p->sphere ? (p->geojson ? M_PI * Q_GEO_EARTH_M : M_PI)
                            : (gp->max - gp->min) * 1.5;
    double r = p->sphere ? (p->geojson ? 1e-4 * Q_GEO_EARTH_M : 1e-4)
                         : ldexp(gp->max - gp->min, -12);
    ridhash seen = {0};
    hit *v = NULL;
    size_t nv = 0, cap = 0;
    double rr;
    for (;;) {
        rr = fmin(fmin(r, p->max_dist), full);
        if ((rc = near_round(db, c, ix, m, p, rr, &seen, &v, &nv, &cap, &k, &d, err)) != 0)
            goto out;
        size_t settled = 0;
        for (size_t i = 0; i < nv; i++)
            settled += v[i].d <= rr;
        if (rr >= p->max_dist || rr >= full || (want > 0 && settled >= (size_t)want))
            break;
        r *= 2;
    }
    q_sort(v, nv, sizeof *v, cmp_hit);
    size_t take = 0;
    while (take < nv && (v[take].d <= rr || rr >= full) && (want <= 0 || take < (size_t)want))
        take++;
    *docs = calloc(take ? take : 1, sizeof **docs);
    assert(*docs);
    for (size_t i = 0; i < take; i++) {
        const uint8_t *data;
        uint32_t len;
        if (eng_rs_get(c->rs, v[i].rid, &data, &len) == 0)
            (*docs)[(*n)++] = bson_new_from_data(data, len);
    }
out:
    if (keys)
        *keys = k;
    if (nexamined)
        *nexamined = d;
    free(v);
    free(seen.v);
    return rc;
}

/* Does the filter name $near / $nearSphere in a field's operators (at the
 * top level or one $and down)?  A cheap look before parsing it. */
static bool mentions_near(const bson_t *filter, int depth)
{
    bson_iter_t it, x;
    if (!filter || depth > 2 || !bson_iter_init(&it, filter))
        return false;
    while (bson_iter_next(&it)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&it) && !BSON_ITER_HOLDS_ARRAY(&it))
            continue;
        bson_iter_recurse(&it, &x);
        while (bson_iter_next(&x)) {
            const char *k = bson_iter_key(&x);
            if (!strcmp(k, "$near") || !strcmp(k, "$nearSphere"))
                return true;
            if (BSON_ITER_HOLDS_DOCUMENT(&x) && !strcmp(bson_iter_key(&it), "$and")) {
                const uint8_t *d;
                uint32_t l;
                bson_t sub;
                bson_iter_document(&x, &l, &d);
                if (bson_init_static(&sub, d, l) && mentions_near(&sub, depth + 1))
                    return true;
            }
        }
    }
    return false;
}

int q_geo_near_plan(q_coll *c, const bson_t *filter, q_plan **out, size_t *n, md_error *err)
{
    q_matcher *m = NULL;
    q_index *ix;
    if (!mentions_near(filter, 0) || q_matcher_new(filter, &m, NULL))
        return Q_GEO_NOT_NEAR;
    const q_geo_pred *p = q_matcher_near(m);
    int rc = p ? q_geo_near_index(c, p, p->path, &ix, err) : Q_GEO_NOT_NEAR;
    if (!rc) {
        q_plan *pl = calloc(1, sizeof *pl);
        assert(pl);
        pl->ix = ix;
        pl->dir = 1;
        pl->geo_near = true;
        pl->sort_provided = true;
        if (!q_geo_bounds(ix, filter, pl)) {
            free(pl);
            rc = q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE, "unable to search the geo index");
        } else {
            *out = pl;
            *n = 1;
        }
    }
    q_matcher_destroy(m);
    return rc;
}
