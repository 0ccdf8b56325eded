/*
 * q_geo_index.c -- 2d and 2dsphere indexes: their specs (createIndexes'
 * checks and options), their keys, and the planner's bounds for
 * $geoWithin / $geoIntersects.
 *
 * Key of a geo index entry: the geo key (2d: the GeoHash as BinData 128;
 * 2dsphere: an S2 cell as NumberLong, q_geo_s2.c) followed by the
 * encodings of the other key fields, so that bounds on the geo key alone
 * (prefix semantics, q_plan.c) select entries.  A document without the
 * geo field gets no key (2d, and 2dsphere from version 2 on); a value
 * that is not a valid geometry is refused on write: 2dsphere with 16755
 * "Can't extract geo keys", 2d with get2DKeys' codes (q_geo_2d.c).  The
 * geo field must be the first of a 2d index (16801); a 2dsphere index may
 * have other fields before it, but then its bounds are not used.
 */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "q_geo.h"
#include "q_path.h"

int q_geo_index_kind(const char *type)
{
    return !strcmp(type, "2d") ? Q_GEO_2D : !strcmp(type, "2dsphere") ? Q_GEO_2DSPHERE : 0;
}

bool q_geo_is_option(const char *name)
{
    return !strcmp(name, "bits") || !strcmp(name, "min") || !strcmp(name, "max") ||
           !strcmp(name, "2dsphereIndexVersion") || !strcmp(name, "finestIndexedLevel") ||
           !strcmp(name, "coarsestIndexedLevel") || !strcmp(name, "maxCellsInCovering");
}

static int cant(md_error *err, int code, const char *msg)
{
    return q_err(err, MD_EINVAL, code, "%s", msg);
}

int q_geo_check_spec(const bson_t *key, const bson_t *opts, md_error *err)
{
    bson_iter_t it;
    int geo = 0, kind = 0, pos = 0, geo_pos = -1;
    bson_iter_init(&it, key);
    while (bson_iter_next(&it)) {
        int k = BSON_ITER_HOLDS_UTF8(&it) ? q_geo_index_kind(bson_iter_utf8(&it, NULL)) : 0;
        if (k) {
            if (geo++)
                return cant(err, 16800, "can't have 2 geo fields");
            kind = k, geo_pos = pos;
        }
        pos++;
    }
    if (!kind)
        return 0;
    if (kind == Q_GEO_2D && geo_pos != 0)
        return cant(err, 16801, "2d has to be first in index");
    double mn = -180, mx = 180;
    bson_iter_init(&it, opts);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (!q_geo_is_option(k))
            continue;
        if (!BSON_ITER_HOLDS_NUMBER(&it))
            return q_err(err, MD_EINVAL, MD_CODE_TYPE_MISMATCH, "%s must be a number", k);
        double v = bson_iter_as_double(&it);
        if (!strcmp(k, "bits") && !(v >= 1 && v <= 32))
            return cant(err, 13028, "bits in geo index must be between 1 and 32");
        if (!strcmp(k, "min"))
            mn = v;
        if (!strcmp(k, "max"))
            mx = v;
        if (!strcmp(k, "2dsphereIndexVersion") && v != 3)
            return q_err(err, MD_ENOTSUP, MD_CODE_CANNOT_CREATE_INDEX,
                         "2dsphereIndexVersion %g is not supported; only version 3", v);
        if (!strcmp(k, "coarsestIndexedLevel") && v < 0)
            return cant(err, 16747, "coarsestIndexedLevel must be >= 0");
        if (!strcmp(k, "finestIndexedLevel") && v > 30)
            return cant(err, 16748, "finestIndexedLevel must be <= 30");
        if (!strcmp(k, "maxCellsInCovering") && !(v >= 1 && v <= 1000))
            return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                         "maxCellsInCovering must be between 1 and 1000");
    }
    if (!(mx > mn))
        return cant(err, 13022, "region has to be greater than zero");
    q_geo_params gp;
    bson_t spec = BSON_INITIALIZER;
    bson_concat(&spec, opts);
    BSON_APPEND_DOCUMENT(&spec, "key", key);
    q_geo_params_init(&gp, &spec);
    bson_destroy(&spec);
    if (kind == Q_GEO_2DSPHERE && gp.finest < gp.coarsest)
        return cant(err, 16749, "finestIndexedLevel must be >= coarsestIndexedLevel");
    return 0;
}

void q_geo_params_init(q_geo_params *gp, const bson_t *spec)
{
    bson_iter_t it, k;
    memset(gp, 0, sizeof *gp);
    gp->bits = 26, gp->min = -180, gp->max = 180;
    gp->finest = 16, gp->coarsest = 2, gp->max_cells = 20; /* version 3's defaults */
    if (bson_iter_init_find(&it, spec, "key") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
        bson_iter_recurse(&it, &k))
        while (bson_iter_next(&k))
            if (BSON_ITER_HOLDS_UTF8(&k) && q_geo_index_kind(bson_iter_utf8(&k, NULL))) {
                gp->kind = q_geo_index_kind(bson_iter_utf8(&k, NULL));
                snprintf(gp->field, sizeof gp->field, "%s", bson_iter_key(&k));
                break;
            }
    bson_iter_init(&it, spec);
    while (bson_iter_next(&it)) {
        const char *n = bson_iter_key(&it);
        if (!BSON_ITER_HOLDS_NUMBER(&it))
            continue;
        double v = bson_iter_as_double(&it);
        if (!strcmp(n, "bits"))
            gp->bits = (int)v;
        else if (!strcmp(n, "min"))
            gp->min = v;
        else if (!strcmp(n, "max"))
            gp->max = v;
        else if (!strcmp(n, "finestIndexedLevel"))
            gp->finest = (int)v;
        else if (!strcmp(n, "coarsestIndexedLevel"))
            gp->coarsest = (int)v;
        else if (!strcmp(n, "maxCellsInCovering"))
            gp->max_cells = (int)v;
    }
}

void q_geo_spec_append(const bson_t *key, const bson_t *opts, bson_t *spec)
{
    bson_iter_t it;
    int kind = 0;
    bool version = false;
    bson_iter_init(&it, key);
    while (bson_iter_next(&it))
        if (BSON_ITER_HOLDS_UTF8(&it) && q_geo_index_kind(bson_iter_utf8(&it, NULL)))
            kind = q_geo_index_kind(bson_iter_utf8(&it, NULL));
    if (!kind)
        return;
    bson_iter_init(&it, opts);
    while (bson_iter_next(&it))
        if (q_geo_is_option(bson_iter_key(&it))) {
            bson_append_iter(spec, bson_iter_key(&it), -1, &it);
            version |= !strcmp(bson_iter_key(&it), "2dsphereIndexVersion");
        }
    if (kind == Q_GEO_2DSPHERE && !version)
        BSON_APPEND_INT32(spec, "2dsphereIndexVersion", 3);
}

/* ---- keys --------------------------------------------------------------------------- */

typedef bool (*value_fn)(void *ctx, const bson_iter_t *v);

/* Every value at dotted path in [data, len), through arrays of documents
 * on the way (getFieldsDotted). */
static bool walk(const uint8_t *data, uint32_t len, const char *path, value_fn cb, void *ctx,
                 int depth)
{
    const char *dot = strchr(path, '.');
    size_t n = dot ? (size_t)(dot - path) : strlen(path);
    bson_iter_t it;
    bson_t d;
    if (depth > 50 || !bson_init_static(&d, data, len) || !bson_iter_init(&it, &d))
        return true;
    if (!bson_iter_find_w_len(&it, path, (int)n))
        return true;
    if (!dot)
        return cb(ctx, &it);
    const uint8_t *sub;
    uint32_t sl;
    if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
        bson_iter_document(&it, &sl, &sub);
        return walk(sub, sl, dot + 1, cb, ctx, depth + 1);
    }
    if (BSON_ITER_HOLDS_ARRAY(&it)) {
        bson_iter_t x;
        bson_iter_recurse(&it, &x);
        while (bson_iter_next(&x))
            if (BSON_ITER_HOLDS_DOCUMENT(&x)) {
                bson_iter_document(&x, &sl, &sub);
                if (!walk(sub, sl, dot + 1, cb, ctx, depth + 1))
                    return false;
            }
    }
    return true;
}

/* The geometries a geo field's value holds: itself, or (an array whose
 * first element is an array or a document) each element, as get2DKeys
 * and getS2Keys tell one location from several. */
static bool each_geo_value(const bson_iter_t *v, value_fn cb, void *ctx)
{
    bson_iter_t x;
    if (BSON_ITER_HOLDS_ARRAY(v) && bson_iter_recurse(v, &x) && bson_iter_next(&x) &&
        (BSON_ITER_HOLDS_ARRAY(&x) || BSON_ITER_HOLDS_DOCUMENT(&x))) {
        bson_iter_recurse(v, &x);
        while (bson_iter_next(&x))
            if (!cb(ctx, &x))
                return false;
        return true;
    }
    return cb(ctx, v);
}

typedef struct kctx {
    const q_geo_params *gp;
    uint64_t *k;
    size_t n, cap;
    md_error *err;
    int rc;
    bool any;
    const bson_t *doc; /* for the error message */
} kctx;

static void kpush(kctx *c, uint64_t k)
{
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 8;
        c->k = realloc(c->k, c->cap * sizeof *c->k);
        assert(c->k);
    }
    c->k[c->n++] = k;
}

static bool key_of_value(void *vc, const bson_iter_t *v)
{
    kctx *c = vc;
    c->any = true;
    if (c->gp->kind == Q_GEO_2D) {
        q_geo_pt p;
        bson_iter_t x;
        uint64_t h;
        if (!BSON_ITER_HOLDS_ARRAY(v) && !BSON_ITER_HOLDS_DOCUMENT(v))
            return true;
        bson_iter_recurse(v, &x);
        if (!bson_iter_next(&x)) {
            c->rc = q_err(c->err, MD_EINVAL, 13067, "geo field is empty");
            return false;
        }
        if (!bson_iter_next(&x)) {
            c->rc = q_err(c->err, MD_EINVAL, 13068, "geo field only has 1 element");
            return false;
        }
        if (!q_geo_legacy_point(v, &p)) {
            c->rc = q_err(c->err, MD_EINVAL, 13026,
                          "geo values must be 'legacy coordinate pairs' for 2d indexes");
            return false;
        }
        if ((c->rc = q_geo2d_hash(c->gp, p.x, p.y, &h, c->err)) != 0)
            return false;
        kpush(c, h);
        return true;
    }
    q_geo *g = NULL;
    md_error e;
    md_error_clear(&e);
    int rc = q_geo_parse(v, &g, &e);
    if (!rc && g->flat && !(fabs(g->pts[0].x) <= 180 && fabs(g->pts[0].y) <= 90)) {
        q_err(&e, MD_EINVAL, MD_CODE_BAD_VALUE, "longitude/latitude is out of bounds, lng: %g lat: %g",
              g->pts[0].x, g->pts[0].y);
        rc = MD_EINVAL;
    }
    if (rc) {
        q_buf b;
        q_buf_init(&b);
        q_render_doc(&b, bson_get_data(c->doc), c->doc->len, false);
        c->rc = q_err(c->err, MD_EINVAL, Q_CODE_GEO_KEYS, "Can't extract geo keys: %s  %s",
                      q_buf_cstr(&b), e.message);
        q_buf_cleanup(&b);
        q_geo_free(g);
        return false;
    }
    uint64_t *ids;
    size_t n;
    q_s2_cover_geo(g, c->gp, &ids, &n);
    for (size_t i = 0; i < n; i++)
        kpush(c, ids[i]);
    free(ids);
    q_geo_free(g);
    return true;
}

static bool key_of_field(void *vc, const bson_iter_t *v) { return each_geo_value(v, key_of_value, vc); }

static int cmp_buf(const void *a, const void *b)
{
    const q_buf *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->data, y->data, n);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* The other fields of the key pattern as a pattern of their own. */
static void other_pattern(const bson_t *key, const char *geo, bson_t *out)
{
    bson_iter_t it;
    bson_init(out);
    bson_iter_init(&it, key);
    while (bson_iter_next(&it))
        if (strcmp(bson_iter_key(&it), geo) != 0)
            bson_append_iter(out, bson_iter_key(&it), -1, &it);
}

int q_geo_doc_keys(const q_index *ix, const bson_t *doc, q_keyset *out, md_error *err)
{
    const q_geo_params *gp = ix->gp;
    kctx c = {.gp = gp, .err = err, .doc = doc};
    walk(bson_get_data(doc), doc->len, gp->field, key_of_field, &c, 0);
    if (c.rc) {
        free(c.k);
        return c.rc;
    }
    q_keyset rest;
    q_keyset_init(&rest);
    bson_t pat;
    other_pattern(&ix->key, gp->field, &pat);
    int rc = 0;
    if (c.n && !bson_empty(&pat))
        rc = q_index_keys(&pat, doc, false, &rest, err);
    bson_destroy(&pat);
    if (rc || c.n == 0) {
        free(c.k);
        q_keyset_cleanup(&rest);
        return rc;
    }
    size_t nr = rest.n ? rest.n : 1, total = c.n * nr;
    out->keys = bson_malloc0(total * sizeof *out->keys);
    out->cap = total;
    out->n = 0;
    for (size_t i = 0; i < c.n; i++)
        for (size_t j = 0; j < nr; j++) {
            q_buf *k = &out->keys[out->n++];
            q_buf_init(k);
            if (gp->kind == Q_GEO_2D)
                q_geo2d_key(c.k[i], k);
            else
                q_s2_key(c.k[i], k);
            if (rest.n)
                q_buf_append(k, rest.keys[j].data, rest.keys[j].len);
        }
    q_sort(out->keys, out->n, sizeof *out->keys, cmp_buf);
    size_t w = 0;
    for (size_t i = 0; i < out->n; i++) {
        if (w && cmp_buf(&out->keys[w - 1], &out->keys[i]) == 0) {
            q_buf_cleanup(&out->keys[i]);
            continue;
        }
        out->keys[w++] = out->keys[i];
    }
    out->n = w;
    out->multikey = c.n > 1 || rest.multikey;
    free(c.k);
    q_keyset_cleanup(&rest);
    return 0;
}

/* ---- distances of documents (the near stage) -------------------------------------- */

typedef struct dctx {
    const q_geo_pred *p;
    double best;
    bson_value_t *loc; /* the nearest location, when wanted */
} dctx;

static bool dist_of_value(void *vc, const bson_iter_t *v)
{
    dctx *d = vc;
    double x = q_geo_pred_distance(d->p, v);
    if (x >= 0 && (d->best < 0 || x < d->best)) {
        d->best = x;
        if (d->loc) {
            if (d->loc->value_type != BSON_TYPE_EOD)
                bson_value_destroy(d->loc);
            bson_value_copy(bson_iter_value((bson_iter_t *)v), d->loc);
        }
    }
    return true;
}

static bool dist_of_field(void *vc, const bson_iter_t *v)
{
    return each_geo_value(v, dist_of_value, vc);
}

double q_geo_doc_nearest(const q_geo_pred *p, const char *path, const bson_t *doc,
                         bson_value_t *loc)
{
    dctx d = {p, -1, loc};
    if (loc)
        loc->value_type = BSON_TYPE_EOD;
    walk(bson_get_data(doc), doc->len, path, dist_of_field, &d, 0);
    return d.best;
}

double q_geo_doc_distance(const q_geo_pred *p, const char *path, const bson_t *doc)
{
    return q_geo_doc_nearest(p, path, doc, NULL);
}

/* ---- bounds -------------------------------------------------------------------------- */

static int cmp_ival(const void *a, const void *b)
{
    return cmp_buf(&((const q_ival *)a)->lo, &((const q_ival *)b)->lo);
}

/* Key intervals of ix for the region within `r` (query units) of p's
 * center, or of region g; false when the index cannot serve. */
bool q_geo_region_ivals(const q_index *ix, const q_geo_pred *p, double r, q_ival **iv,
                        size_t *n)
{
    const q_geo_params *gp = ix->gp;
    *iv = NULL;
    *n = 0;
    if (p->op == QGP_NEAR) {
        if (gp->kind == Q_GEO_2DSPHERE) {
            double a = p->geojson ? r / Q_GEO_EARTH_M : r;
            q_s2_cap_ranges(q_geo_vec_of(p->center), a > M_PI ? M_PI : a, gp, iv, n);
        } else if (p->sphere) {
            double dy = r * 180 / M_PI, c = cos(fmin(89.9, fabs(p->center.y) + dy) * M_PI / 180);
            double dx = dy / (c > 1e-6 ? c : 1e-6);
            q_geo2d_box_ranges(gp, (q_geo_pt){p->center.x - dx, p->center.y - dy},
                               (q_geo_pt){p->center.x + dx, p->center.y + dy}, iv, n);
        } else {
            q_geo2d_box_ranges(gp, (q_geo_pt){p->center.x - r, p->center.y - r},
                               (q_geo_pt){p->center.x + r, p->center.y + r}, iv, n);
        }
    } else {
        const q_geo *g = p->region;
        bool flat = g->type == QG_BOX || g->type == QG_CENTER || g->type == QG_LPOLYGON;
        if (gp->kind == Q_GEO_2DSPHERE) {
            if (flat)
                return false;
            if (g->type == QG_CENTER_SPHERE) {
                q_s2_cap_ranges(q_geo_vec_of(g->pts[0]), fmin(g->radius, M_PI), gp, iv, n);
            } else {
                q_s2_geo_ranges(g, gp, iv, n);
            }
        } else {
            if (p->op != QGP_WITHIN)
                return false;
            if (g->type == QG_CENTER_SPHERE) {
                q_geo_pred np = {.op = QGP_NEAR, .center = g->pts[0], .sphere = true};
                return q_geo_region_ivals(ix, &np, g->radius, iv, n);
            }
            if (!flat)
                return false;
            q_geo_pt lo, hi;
            q_geo_bbox(g, &lo, &hi);
            q_geo2d_box_ranges(gp, lo, hi, iv, n);
        }
    }
    q_sort(*iv, *n, sizeof **iv, cmp_ival);
    return true;
}

/* The geo operator document of `field` at the filter's top level or in a
 * top-level $and. */
static bool find_geo_ops(const bson_t *filter, const char *field, bson_iter_t *out, int depth)
{
    bson_iter_t it, x;
    if (depth > 2 || !bson_iter_init(&it, filter))
        return false;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (!strcmp(k, "$and") && BSON_ITER_HOLDS_ARRAY(&it)) {
            bson_iter_recurse(&it, &x);
            while (bson_iter_next(&x)) {
                const uint8_t *d;
                uint32_t l;
                bson_t sub;
                if (!BSON_ITER_HOLDS_DOCUMENT(&x))
                    continue;
                bson_iter_document(&x, &l, &d);
                if (bson_init_static(&sub, d, l) && find_geo_ops(&sub, field, out, depth + 1))
                    return true;
            }
            continue;
        }
        if (strcmp(k, field) != 0 || !BSON_ITER_HOLDS_DOCUMENT(&it))
            continue;
        bson_iter_recurse(&it, &x);
        while (bson_iter_next(&x))
            if (q_geo_is_op(bson_iter_key(&x))) {
                *out = it;
                return true;
            }
    }
    return false;
}

bool q_geo_bounds(const q_index *ix, const bson_t *filter, q_plan *p)
{
    bson_iter_t ops, first;
    q_geo_pred *pred = NULL;
    bson_iter_init(&first, &ix->key);
    bson_iter_next(&first);
    if (!ix->gp || !filter || strcmp(bson_iter_key(&first), ix->gp->field) != 0 ||
        !find_geo_ops(filter, ix->gp->field, &ops, 0) || q_geo_pred_parse(&ops, &pred, NULL))
        return false;
    double r = pred->op == QGP_NEAR ? pred->max_dist : 0;
    if (pred->op == QGP_NEAR && !isfinite(r))
        r = ix->gp->kind == Q_GEO_2DSPHERE ? (pred->geojson ? M_PI * Q_GEO_EARTH_M : M_PI)
                                           : (ix->gp->max - ix->gp->min) * 2;
    bool ok = q_geo_region_ivals(ix, pred, r, &p->iv, &p->niv);
    q_geo_pred_free(pred);
    if (ok) {
        p->nused = 1;
        p->eqmask = 0;
    }
    return ok;
}
