/*
 * q_geo.c -- geometries for the geo operators and indexes: GeoJSON and
 * legacy coordinate pairs parsed and validated as MongoDB 3.6's GeoParser
 * does, and the geometry the operators need (distances, containment,
 * intersection), on the sphere for GeoJSON and on the plane for legacy
 * shapes ($box, $center, $polygon).
 *
 * On the sphere every edge is a geodesic (as in S2).  A point is inside a
 * loop when the geodesic from it to a point known to be outside (just
 * beyond the loop's bounding cap) crosses the loop's edges an odd number of
 * times; loops are taken as the smaller of the two regions they bound, as
 * MongoDB normalizes them (big polygons with the custom CRS are not
 * supported).  Validation follows GeoParser and S2Loop::IsValid: closed
 * rings of at least 3 distinct vertices (consecutive duplicates removed),
 * no repeated vertex, no two crossing edges, holes inside the shell;
 * coordinates in [-180, 180] x [-90, 90].  Deviations: error messages
 * render coordinates in our own words after MongoDB's prefixes; loops
 * covering more than a hemisphere are refused instead of inverted.
 */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "q_geo.h"
#include "q_path.h"

#define DEG (M_PI / 180.0)
#define EPS_ON 1e-12 /* radians: a point this close to a line is on it */

void q_geo_free(q_geo *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->nkids; i++)
        q_geo_free(g->kids[i]);
    free(g->kids);
    free(g->pts);
    free(g->loop_end);
    free(g);
}

static q_geo *geo_new(int type, bool flat)
{
    q_geo *g = calloc(1, sizeof *g);
    assert(g);
    g->type = type;
    g->flat = flat;
    return g;
}

static void pts_push(q_geo *g, q_geo_pt p)
{
    if ((g->npts & (g->npts - 1)) == 0) {
        q_geo_pt *v = realloc(g->pts, (g->npts ? g->npts * 2 : 4) * sizeof *v);
        assert(v);
        g->pts = v;
    }
    g->pts[g->npts++] = p;
}

static void kid_push(q_geo *g, q_geo *k)
{
    q_geo **v = realloc(g->kids, (g->nkids + 1) * sizeof *v);
    assert(v);
    g->kids = v;
    g->kids[g->nkids++] = k;
}

/* ---- vectors ----------------------------------------------------------------- */

q_geo_vec q_geo_vec_of(q_geo_pt p)
{
    double lat = p.y * DEG, lng = p.x * DEG;
    return (q_geo_vec){cos(lat) * cos(lng), cos(lat) * sin(lng), sin(lat)};
}

static q_geo_vec cross(q_geo_vec a, q_geo_vec b)
{
    return (q_geo_vec){a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x};
}
static double dot(q_geo_vec a, q_geo_vec b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
static double norm(q_geo_vec a) { return sqrt(dot(a, a)); }
static q_geo_vec unit(q_geo_vec a)
{
    double n = norm(a);
    return n > 0 ? (q_geo_vec){a.x / n, a.y / n, a.z / n} : (q_geo_vec){1, 0, 0};
}

double q_geo_angle(q_geo_vec a, q_geo_vec b) { return atan2(norm(cross(a, b)), dot(a, b)); }

/* Do geodesic arcs ab and cd cross at a point interior to both? */
static bool arcs_cross(q_geo_vec a, q_geo_vec b, q_geo_vec c, q_geo_vec d)
{
    q_geo_vec ab = cross(a, b);
    double acb = -dot(ab, c), bda = dot(ab, d);
    if (acb * bda <= 0)
        return false;
    q_geo_vec cd = cross(c, d);
    double cbd = -dot(cd, b), dac = dot(cd, a);
    return acb * cbd > 0 && acb * dac > 0;
}

/* Angle from p to arc ab. */
static double arc_dist(q_geo_vec p, q_geo_vec a, q_geo_vec b)
{
    q_geo_vec n = cross(a, b);
    if (norm(n) > 1e-300) {
        n = unit(n);
        q_geo_vec c = {p.x - dot(p, n) * n.x, p.y - dot(p, n) * n.y, p.z - dot(p, n) * n.z};
        if (norm(c) > 1e-300) {
            c = unit(c);
            if (dot(cross(a, c), n) >= 0 && dot(cross(c, b), n) >= 0)
                return q_geo_angle(p, c);
        }
    }
    double x = q_geo_angle(p, a), y = q_geo_angle(p, b);
    return x < y ? x : y;
}

/* ---- loops ---------------------------------------------------------------------- */

static size_t loop_start(const q_geo *g, size_t i) { return i ? g->loop_end[i - 1] : 0; }

/* A bounding cap of n vertices. */
static void pts_cap(const q_geo_pt *p, size_t n, q_geo_vec *c, double *r)
{
    q_geo_vec s = {0, 0, 0};
    for (size_t i = 0; i < n; i++) {
        q_geo_vec v = q_geo_vec_of(p[i]);
        s.x += v.x, s.y += v.y, s.z += v.z;
    }
    *c = unit(s);
    *r = 0;
    for (size_t i = 0; i < n; i++) {
        double a = q_geo_angle(*c, q_geo_vec_of(p[i]));
        if (a > *r)
            *r = a;
    }
}

/* Is point v inside the spherical loop of n vertices p (the smaller side)? */
static bool loop_contains(const q_geo_pt *p, size_t n, q_geo_vec v)
{
    q_geo_vec c;
    double r;
    pts_cap(p, n, &c, &r);
    if (q_geo_angle(c, v) > r + 1e-9)
        return false;
    /* a point outside: beyond the cap, in a direction unlikely to run
     * through a vertex */
    q_geo_vec t = unit(cross(c, (q_geo_vec){0.3183098861837907, 0.5772156649015329,
                                            0.7071067811865476}));
    double out = r + 1e-3 < M_PI ? r + 1e-3 : M_PI - 1e-3;
    q_geo_vec o = unit((q_geo_vec){c.x * cos(out) + t.x * sin(out), c.y * cos(out) + t.y * sin(out),
                                   c.z * cos(out) + t.z * sin(out)});
    bool in = false;
    for (size_t i = 0; i < n; i++) {
        q_geo_vec a = q_geo_vec_of(p[i]), b = q_geo_vec_of(p[(i + 1) % n]);
        if (arc_dist(v, a, b) < EPS_ON)
            return true; /* on the boundary */
        if (arcs_cross(v, o, a, b))
            in = !in;
    }
    return in;
}

/* Flat: is v inside (or on) the loop? */
static bool flat_loop_contains(const q_geo_pt *p, size_t n, q_geo_pt v)
{
    bool in = false;
    for (size_t i = 0, j = n - 1; i < n; j = i++) {
        q_geo_pt a = p[j], b = p[i];
        double cr = (b.x - a.x) * (v.y - a.y) - (b.y - a.y) * (v.x - a.x);
        if (fabs(cr) < 1e-12 && v.x >= fmin(a.x, b.x) && v.x <= fmax(a.x, b.x) &&
            v.y >= fmin(a.y, b.y) && v.y <= fmax(a.y, b.y))
            return true;
        if ((a.y > v.y) != (b.y > v.y) && v.x < (b.x - a.x) * (v.y - a.y) / (b.y - a.y) + a.x)
            in = !in;
    }
    return in;
}

static bool polygon_contains(const q_geo *g, q_geo_vec v)
{
    if (!loop_contains(g->pts, g->loop_end[0], v))
        return false;
    for (size_t i = 1; i < g->nloops; i++) {
        size_t s = loop_start(g, i);
        if (loop_contains(g->pts + s, g->loop_end[i] - s, v))
            return false; /* in a hole (its boundary belongs to the polygon) */
    }
    return true;
}

/* ---- parsing ---------------------------------------------------------------------- */

bool q_geo_legacy_point(const bson_iter_t *it, q_geo_pt *out)
{
    bson_iter_t x;
    double v[2];
    if (!(BSON_ITER_HOLDS_ARRAY(it) || BSON_ITER_HOLDS_DOCUMENT(it)) || !bson_iter_recurse(it, &x))
        return false;
    for (int i = 0; i < 2; i++) {
        if (!bson_iter_next(&x) || !BSON_ITER_HOLDS_NUMBER(&x))
            return false;
        v[i] = bson_iter_as_double(&x);
    }
    out->x = v[0], out->y = v[1];
    return true;
}

static int gerr(md_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int gerr(md_error *err, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE, "%s", msg);
}

static int parse_coord(const bson_iter_t *it, q_geo_pt *p, md_error *err)
{
    bson_iter_t x;
    double v[2];
    int n = 0;
    if (!BSON_ITER_HOLDS_ARRAY(it) || !bson_iter_recurse(it, &x))
        return gerr(err, "GeoJSON coordinates must be an array");
    while (bson_iter_next(&x)) {
        if (!BSON_ITER_HOLDS_NUMBER(&x))
            return gerr(err, "Point must only contain numeric elements");
        if (n == 2)
            return gerr(err, "Point must only contain two numeric elements");
        v[n++] = bson_iter_as_double(&x);
    }
    if (n != 2)
        return gerr(err, "Point must only contain two numeric elements");
    if (!(fabs(v[0]) <= 180 && fabs(v[1]) <= 90))
        return gerr(err, "longitude/latitude is out of bounds, lng: %g lat: %g", v[0], v[1]);
    p->x = v[0], p->y = v[1];
    return 0;
}

static int parse_coords(const bson_iter_t *it, q_geo *g, md_error *err)
{
    bson_iter_t x;
    if (!BSON_ITER_HOLDS_ARRAY(it) || !bson_iter_recurse(it, &x))
        return gerr(err, "GeoJSON coordinates must be an array of coordinates");
    while (bson_iter_next(&x)) {
        q_geo_pt p;
        int rc = parse_coord(&x, &p, err);
        if (rc)
            return rc;
        pts_push(g, p);
    }
    return 0;
}

static bool same_pt(q_geo_pt a, q_geo_pt b) { return a.x == b.x && a.y == b.y; }

/* Drop consecutive duplicates from pts[from..]. */
static void erase_dups(q_geo *g, size_t from)
{
    size_t w = from;
    for (size_t i = from; i < g->npts; i++)
        if (w == from || !same_pt(g->pts[w - 1], g->pts[i]))
            g->pts[w++] = g->pts[i];
    g->npts = w;
}

static int parse_line(const bson_iter_t *it, q_geo *g, md_error *err)
{
    int rc = parse_coords(it, g, err);
    if (rc)
        return rc;
    erase_dups(g, 0);
    if (g->npts < 2)
        return gerr(err, "GeoJSON LineString must have at least 2 vertices");
    for (size_t i = 0; i + 1 < g->npts; i++)
        for (size_t j = i + 2; j + 1 < g->npts; j++)
            (void)j; /* S2Polyline allows self-crossing lines */
    return 0;
}

/* One ring into g (appended as loop g->nloops). */
static int parse_ring(const bson_iter_t *it, q_geo *g, md_error *err)
{
    size_t from = g->npts;
    int rc = parse_coords(it, g, err);
    if (rc)
        return rc;
    size_t n = g->npts - from;
    if (n == 0 || !same_pt(g->pts[from], g->pts[g->npts - 1]))
        return gerr(err, "Loop is not closed, first vertex does not equal last vertex");
    if (n < 4)
        return gerr(err, "Loop must have at least 3 different vertices");
    erase_dups(g, from);
    g->npts--; /* the closing vertex */
    n = g->npts - from;
    if (n < 3)
        return gerr(err, "Loop must have at least 3 different vertices");
    const q_geo_pt *p = g->pts + from;
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            if (same_pt(p[i], p[j]))
                return gerr(err, "Loop is not valid: Duplicate vertices: %zu and %zu", i, j);
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 2; j < n; j++) {
            if (i == 0 && j == n - 1)
                continue;
            if (arcs_cross(q_geo_vec_of(p[i]), q_geo_vec_of(p[i + 1]), q_geo_vec_of(p[j]),
                           q_geo_vec_of(p[(j + 1) % n])))
                return gerr(err, "Loop is not valid: Edges %zu and %zu cross", i, j);
        }
    q_geo_vec c;
    double r;
    pts_cap(p, n, &c, &r);
    if (r >= M_PI / 2)
        return gerr(err, "Loop is not valid: loops larger than a hemisphere are not supported");
    g->loop_end = realloc(g->loop_end, (g->nloops + 1) * sizeof *g->loop_end);
    assert(g->loop_end);
    g->loop_end[g->nloops++] = g->npts;
    return 0;
}

static int parse_polygon(const bson_iter_t *it, q_geo *g, md_error *err)
{
    bson_iter_t x;
    if (!BSON_ITER_HOLDS_ARRAY(it) || !bson_iter_recurse(it, &x))
        return gerr(err, "Polygon coordinates must be an array");
    while (bson_iter_next(&x)) {
        int rc = parse_ring(&x, g, err);
        if (rc)
            return rc;
        if (g->nloops > 1) {
            size_t s = loop_start(g, g->nloops - 1);
            for (size_t i = s; i < g->npts; i++)
                if (!loop_contains(g->pts, g->loop_end[0], q_geo_vec_of(g->pts[i])))
                    return gerr(err, "Secondary loops not contained by first exterior loop - "
                                     "secondary loops must be holes");
        }
    }
    if (g->nloops == 0)
        return gerr(err, "Polygon has no loops.");
    return 0;
}

static const struct {
    const char *name;
    int type;
} gtypes[] = {{"Point", QG_POINT},           {"LineString", QG_LINE},
              {"Polygon", QG_POLYGON},       {"MultiPoint", QG_MPOINT},
              {"MultiLineString", QG_MLINE}, {"MultiPolygon", QG_MPOLYGON},
              {"GeometryCollection", QG_COLLECTION}};

static int parse_geojson_doc(const bson_iter_t *it, q_geo **out, int depth, md_error *err);

static int parse_multi(const bson_iter_t *coords, int kid_type, q_geo *g, md_error *err)
{
    bson_iter_t x;
    if (!BSON_ITER_HOLDS_ARRAY(coords) || !bson_iter_recurse(coords, &x))
        return gerr(err, "GeoJSON coordinates must be an array");
    while (bson_iter_next(&x)) {
        q_geo *k = geo_new(kid_type, false);
        kid_push(g, k);
        int rc = kid_type == QG_POINT     ? (k->npts = 1, k->pts = malloc(sizeof *k->pts),
                                             parse_coord(&x, k->pts, err))
                 : kid_type == QG_LINE    ? parse_line(&x, k, err)
                                          : parse_polygon(&x, k, err);
        if (rc)
            return rc;
    }
    if (g->nkids == 0 && kid_type == QG_POINT)
        return gerr(err, "MultiPoint coordinates must have at least 1 element");
    return 0;
}

static int parse_geojson_doc(const bson_iter_t *it, q_geo **out, int depth, md_error *err)
{
    bson_iter_t t, c;
    int type = 0;
    *out = NULL;
    if (!BSON_ITER_HOLDS_DOCUMENT(it) || !bson_iter_recurse(it, &t) || !bson_iter_find(&t, "type") ||
        !BSON_ITER_HOLDS_UTF8(&t))
        return gerr(err, "unknown GeoJSON type");
    for (size_t i = 0; i < sizeof gtypes / sizeof gtypes[0]; i++)
        if (strcmp(bson_iter_utf8(&t, NULL), gtypes[i].name) == 0)
            type = gtypes[i].type;
    if (!type)
        return gerr(err, "unknown GeoJSON type: %s", bson_iter_utf8(&t, NULL));
    q_geo *g = geo_new(type, false);
    *out = g;
    bson_iter_recurse(it, &c);
    if (type == QG_COLLECTION) {
        if (!bson_iter_find(&c, "geometries") || !BSON_ITER_HOLDS_ARRAY(&c))
            return gerr(err, "GeometryCollection geometries must be an array");
        bson_iter_t x;
        bson_iter_recurse(&c, &x);
        while (bson_iter_next(&x)) {
            q_geo *k = NULL;
            int rc = depth > 8 ? gerr(err, "GeometryCollection nested too deeply")
                               : parse_geojson_doc(&x, &k, depth + 1, err);
            if (k)
                kid_push(g, k);
            if (rc)
                return rc;
        }
        return 0;
    }
    if (!bson_iter_find(&c, "coordinates"))
        return gerr(err, "coordinates not found in GeoJSON object");
    switch (type) {
    case QG_POINT:
        g->pts = malloc(sizeof *g->pts);
        g->npts = 1;
        return parse_coord(&c, g->pts, err);
    case QG_LINE: return parse_line(&c, g, err);
    case QG_POLYGON: return parse_polygon(&c, g, err);
    case QG_MPOINT: return parse_multi(&c, QG_POINT, g, err);
    case QG_MLINE: return parse_multi(&c, QG_LINE, g, err);
    default: return parse_multi(&c, QG_POLYGON, g, err);
    }
}

int q_geo_parse_geojson(const bson_iter_t *it, q_geo **out, md_error *err)
{
    int rc = parse_geojson_doc(it, out, 0, err);
    if (rc) {
        q_geo_free(*out);
        *out = NULL;
    }
    return rc;
}

static bool has_type_field(const bson_iter_t *it)
{
    bson_iter_t t;
    return BSON_ITER_HOLDS_DOCUMENT(it) && bson_iter_recurse(it, &t) && bson_iter_find(&t, "type");
}

int q_geo_parse(const bson_iter_t *it, q_geo **out, md_error *err)
{
    q_geo_pt p;
    *out = NULL;
    if (has_type_field(it))
        return q_geo_parse_geojson(it, out, err);
    if (!q_geo_legacy_point(it, &p))
        return gerr(err, "geo element must be an array or object");
    q_geo *g = geo_new(QG_POINT, true);
    pts_push(g, p);
    *out = g;
    return 0;
}

/* ---- measures ----------------------------------------------------------------------- */

static double flat_seg_dist(q_geo_pt p, q_geo_pt a, q_geo_pt b)
{
    double dx = b.x - a.x, dy = b.y - a.y, l = dx * dx + dy * dy;
    double t = l > 0 ? ((p.x - a.x) * dx + (p.y - a.y) * dy) / l : 0;
    t = t < 0 ? 0 : t > 1 ? 1 : t;
    return hypot(p.x - (a.x + t * dx), p.y - (a.y + t * dy));
}

double q_geo_distance(q_geo_pt p, const q_geo *g, bool sphere)
{
    double best = INFINITY;
    q_geo_vec v = q_geo_vec_of(p);
    switch (g->type) {
    case QG_POINT:
        return sphere ? q_geo_angle(v, q_geo_vec_of(g->pts[0]))
                      : hypot(p.x - g->pts[0].x, p.y - g->pts[0].y);
    case QG_POLYGON:
        if (sphere && polygon_contains(g, v))
            return 0;
        if (!sphere && flat_loop_contains(g->pts, g->loop_end[0], p))
            return 0;
        /* outside: the distance to the nearest edge */
        __attribute__((fallthrough));
    case QG_LINE:
        for (size_t l = 0; l < (g->type == QG_POLYGON ? g->nloops : 1); l++) {
            size_t s = g->type == QG_POLYGON ? loop_start(g, l) : 0;
            size_t e = g->type == QG_POLYGON ? g->loop_end[l] : g->npts, n = e - s;
            size_t edges = g->type == QG_POLYGON ? n : n - 1;
            for (size_t i = 0; i < edges; i++) {
                q_geo_pt a = g->pts[s + i], b = g->pts[s + (i + 1) % n];
                double d = sphere ? arc_dist(v, q_geo_vec_of(a), q_geo_vec_of(b))
                                  : flat_seg_dist(p, a, b);
                best = d < best ? d : best;
            }
        }
        return best;
    default:
        for (size_t i = 0; i < g->nkids; i++) {
            double d = q_geo_distance(p, g->kids[i], sphere);
            best = d < best ? d : best;
        }
        return best;
    }
}

void q_geo_cap(const q_geo *g, q_geo_vec *center, double *angle)
{
    if (g->nkids) {
        q_geo_pt *all = NULL;
        size_t n = 0;
        /* gather every vertex of the kids */
        for (size_t i = 0; i < g->nkids; i++) {
            q_geo_vec c;
            double r;
            q_geo_cap(g->kids[i], &c, &r);
            /* the kid's cap as two antipodal-ish points is not a set of
             * vertices; use its center and widen below */
            all = realloc(all, (n + 1) * sizeof *all);
            all[n++] = (q_geo_pt){atan2(c.y, c.x) / DEG, asin(fmax(-1, fmin(1, c.z))) / DEG};
        }
        pts_cap(all, n, center, angle);
        double widen = 0;
        for (size_t i = 0; i < g->nkids; i++) {
            q_geo_vec c;
            double r;
            q_geo_cap(g->kids[i], &c, &r);
            double a = q_geo_angle(*center, c) + r;
            widen = a > widen ? a : widen;
        }
        *angle = widen;
        free(all);
        return;
    }
    if (g->type == QG_CENTER_SPHERE) {
        *center = q_geo_vec_of(g->pts[0]);
        *angle = g->radius;
        return;
    }
    pts_cap(g->pts, g->npts, center, angle);
}

void q_geo_bbox(const q_geo *g, q_geo_pt *lo, q_geo_pt *hi)
{
    lo->x = lo->y = INFINITY;
    hi->x = hi->y = -INFINITY;
    for (size_t i = 0; i < g->npts; i++) {
        lo->x = fmin(lo->x, g->pts[i].x), lo->y = fmin(lo->y, g->pts[i].y);
        hi->x = fmax(hi->x, g->pts[i].x), hi->y = fmax(hi->y, g->pts[i].y);
    }
    if (g->type == QG_CENTER) {
        lo->x -= g->radius, lo->y -= g->radius, hi->x += g->radius, hi->y += g->radius;
    }
    for (size_t i = 0; i < g->nkids; i++) {
        q_geo_pt a, b;
        q_geo_bbox(g->kids[i], &a, &b);
        lo->x = fmin(lo->x, a.x), lo->y = fmin(lo->y, a.y);
        hi->x = fmax(hi->x, b.x), hi->y = fmax(hi->y, b.y);
    }
}

/* ---- containment and intersection ------------------------------------------------- */

/* Every edge of g as (a, b) pairs through cb; false stops. */
typedef bool (*edge_fn)(void *ctx, q_geo_vec a, q_geo_vec b);
static bool each_edge(const q_geo *g, edge_fn cb, void *ctx)
{
    if (g->type == QG_LINE) {
        for (size_t i = 0; i + 1 < g->npts; i++)
            if (!cb(ctx, q_geo_vec_of(g->pts[i]), q_geo_vec_of(g->pts[i + 1])))
                return false;
    } else if (g->type == QG_POLYGON) {
        for (size_t l = 0; l < g->nloops; l++) {
            size_t s = loop_start(g, l), n = g->loop_end[l] - s;
            for (size_t i = 0; i < n; i++)
                if (!cb(ctx, q_geo_vec_of(g->pts[s + i]), q_geo_vec_of(g->pts[s + (i + 1) % n])))
                    return false;
        }
    }
    for (size_t i = 0; i < g->nkids; i++)
        if (!each_edge(g->kids[i], cb, ctx))
            return false;
    return true;
}

typedef struct xctx {
    q_geo_vec a, b;
    const q_geo *other;
    bool hit;
} xctx;

static bool inner_cross(void *vc, q_geo_vec c, q_geo_vec d)
{
    xctx *x = vc;
    if (arcs_cross(x->a, x->b, c, d))
        x->hit = true;
    return !x->hit;
}

static bool outer_cross(void *vc, q_geo_vec a, q_geo_vec b)
{
    xctx *x = vc;
    x->a = a, x->b = b;
    each_edge(x->other, inner_cross, x);
    return !x->hit;
}

static bool edges_cross(const q_geo *a, const q_geo *b)
{
    xctx x = {.other = b};
    each_edge(a, outer_cross, &x);
    return x.hit;
}

/* Is vertex v of some geometry inside/on simple geometry r (sphere)? */
static bool simple_contains_pt(const q_geo *r, q_geo_vec v)
{
    switch (r->type) {
    case QG_POINT: return q_geo_angle(v, q_geo_vec_of(r->pts[0])) < EPS_ON;
    case QG_LINE:
        for (size_t i = 0; i + 1 < r->npts; i++)
            if (arc_dist(v, q_geo_vec_of(r->pts[i]), q_geo_vec_of(r->pts[i + 1])) < EPS_ON)
                return true;
        return false;
    case QG_POLYGON: return polygon_contains(r, v);
    case QG_CENTER_SPHERE: return q_geo_angle(v, q_geo_vec_of(r->pts[0])) <= r->radius;
    default:
        for (size_t i = 0; i < r->nkids; i++)
            if (simple_contains_pt(r->kids[i], v))
                return true;
        return false;
    }
}

static bool any_vertex_in(const q_geo *g, const q_geo *r)
{
    for (size_t i = 0; i < g->npts; i++)
        if (simple_contains_pt(r, q_geo_vec_of(g->pts[i])))
            return true;
    for (size_t i = 0; i < g->nkids; i++)
        if (any_vertex_in(g->kids[i], r))
            return true;
    return false;
}

static bool all_vertices_in(const q_geo *g, const q_geo *r)
{
    for (size_t i = 0; i < g->npts; i++)
        if (!simple_contains_pt(r, q_geo_vec_of(g->pts[i])))
            return false;
    for (size_t i = 0; i < g->nkids; i++)
        if (!all_vertices_in(g->kids[i], r))
            return false;
    return true;
}

bool q_geo_intersects(const q_geo *a, const q_geo *b)
{
    if (a->nkids || b->nkids) {
        const q_geo *m = a->nkids ? a : b, *o = a->nkids ? b : a;
        for (size_t i = 0; i < m->nkids; i++)
            if (q_geo_intersects(m->kids[i], o))
                return true;
        return false;
    }
    return any_vertex_in(a, b) || any_vertex_in(b, a) || edges_cross(a, b);
}

static bool flat_point_in(q_geo_pt p, const q_geo *r)
{
    switch (r->type) {
    case QG_BOX:
        return p.x >= r->pts[0].x && p.x <= r->pts[1].x && p.y >= r->pts[0].y &&
               p.y <= r->pts[1].y;
    case QG_CENTER: return hypot(p.x - r->pts[0].x, p.y - r->pts[0].y) <= r->radius;
    default: return flat_loop_contains(r->pts, r->npts, p);
    }
}

bool q_geo_within(const q_geo *g, const q_geo *r)
{
    if (r->type == QG_BOX || r->type == QG_CENTER || r->type == QG_LPOLYGON) {
        if (g->type == QG_POINT)
            return flat_point_in(g->pts[0], r);
        if (g->type == QG_MPOINT) {
            for (size_t i = 0; i < g->nkids; i++)
                if (!flat_point_in(g->kids[i]->pts[0], r))
                    return false;
            return g->nkids > 0;
        }
        return false;
    }
    if (g->nkids && g->type != QG_MPOLYGON) {
        for (size_t i = 0; i < g->nkids; i++)
            if (!q_geo_within(g->kids[i], r))
                return false;
        return g->nkids > 0;
    }
    if (r->type == QG_CENTER_SPHERE)
        return all_vertices_in(g, r);
    if (r->type == QG_MPOLYGON && g->type != QG_POINT) {
        for (size_t i = 0; i < r->nkids; i++)
            if (q_geo_within(g, r->kids[i]))
                return true;
        return false;
    }
    if (g->type == QG_MPOLYGON) {
        for (size_t i = 0; i < g->nkids; i++)
            if (!q_geo_within(g->kids[i], r))
                return false;
        return true;
    }
    return all_vertices_in(g, r) && !edges_cross(g, r);
}

/* ---- the operators ------------------------------------------------------------------- */

bool q_geo_is_op(const char *op)
{
    return !strcmp(op, "$geoWithin") || !strcmp(op, "$within") || !strcmp(op, "$geoIntersects") ||
           !strcmp(op, "$near") || !strcmp(op, "$nearSphere");
}

void q_geo_pred_free(q_geo_pred *p)
{
    if (p) {
        q_geo_free(p->region);
        free(p->path);
        free(p);
    }
}

/* A legacy shape of $geoWithin: $box, $center, $centerSphere, $polygon. */
static int parse_legacy_shape(const bson_iter_t *e, q_geo **out, md_error *err)
{
    const char *k = bson_iter_key(e);
    bson_iter_t x;
    q_geo_pt p[2];
    q_geo *g = NULL;
    if (!strcmp(k, "$box")) {
        if (!BSON_ITER_HOLDS_ARRAY(e) || !bson_iter_recurse(e, &x) || !bson_iter_next(&x) ||
            !q_geo_legacy_point(&x, &p[0]) || !bson_iter_next(&x) ||
            !q_geo_legacy_point(&x, &p[1]))
            return gerr(err, "Point must only contain numeric elements");
        g = geo_new(QG_BOX, true);
        pts_push(g, (q_geo_pt){fmin(p[0].x, p[1].x), fmin(p[0].y, p[1].y)});
        pts_push(g, (q_geo_pt){fmax(p[0].x, p[1].x), fmax(p[0].y, p[1].y)});
    } else if (!strcmp(k, "$center") || !strcmp(k, "$centerSphere")) {
        bool sph = k[7] == 'S';
        if (!BSON_ITER_HOLDS_ARRAY(e) || !bson_iter_recurse(e, &x) || !bson_iter_next(&x) ||
            !q_geo_legacy_point(&x, &p[0]))
            return gerr(err, "Point must only contain numeric elements");
        if (!bson_iter_next(&x) || !BSON_ITER_HOLDS_NUMBER(&x) || bson_iter_as_double(&x) < 0 ||
            isnan(bson_iter_as_double(&x)))
            return gerr(err, "radius must be a non-negative number");
        if (sph && !(fabs(p[0].x) <= 180 && fabs(p[0].y) <= 90))
            return gerr(err, "longitude/latitude is out of bounds, lng: %g lat: %g", p[0].x,
                        p[0].y);
        g = geo_new(sph ? QG_CENTER_SPHERE : QG_CENTER, !sph);
        g->radius = bson_iter_as_double(&x);
        pts_push(g, p[0]);
    } else if (!strcmp(k, "$polygon")) {
        if (!BSON_ITER_HOLDS_ARRAY(e) || !bson_iter_recurse(e, &x))
            return gerr(err, "Polygon must be an array");
        g = geo_new(QG_LPOLYGON, true);
        while (bson_iter_next(&x)) {
            if (!q_geo_legacy_point(&x, &p[0])) {
                q_geo_free(g);
                return gerr(err, "Point must only contain numeric elements");
            }
            pts_push(g, p[0]);
        }
        if (g->npts < 3) {
            q_geo_free(g);
            return gerr(err, "Polygon must have at least 3 points");
        }
    } else {
        return gerr(err, "unknown geo specifier: %s", k);
    }
    *out = g;
    return 0;
}

/* {$geometry: GeoJSON} or a legacy shape document. */
static int parse_region(const bson_iter_t *arg, bool within, q_geo **out, md_error *err)
{
    bson_iter_t x;
    if (!BSON_ITER_HOLDS_DOCUMENT(arg) || !bson_iter_recurse(arg, &x) || !bson_iter_next(&x))
        return gerr(err, "%s", within ? "$geoWithin not followed by an object"
                                      : "$geoIntersect not followed by an object");
    if (!strcmp(bson_iter_key(&x), "$geometry")) {
        int rc = q_geo_parse_geojson(&x, out, err);
        if (rc)
            return rc;
        if (within && (*out)->type != QG_POLYGON && (*out)->type != QG_MPOLYGON) {
            q_geo_free(*out);
            *out = NULL;
            return gerr(err, "$geoWithin not supported with provided geometry: %s",
                        "only Polygon and MultiPolygon");
        }
        return 0;
    }
    if (!within)
        return gerr(err, "$geoIntersect not followed by an object with $geometry");
    return parse_legacy_shape(&x, out, err);
}

static int parse_dist(const bson_iter_t *it, double *out, md_error *err)
{
    if (!BSON_ITER_HOLDS_NUMBER(it))
        return gerr(err, "%s must be a number", bson_iter_key(it));
    *out = bson_iter_as_double(it);
    if (*out < 0 || isnan(*out))
        return gerr(err, "%s must be non-negative", bson_iter_key(it));
    return 0;
}

/* The point of $near / $nearSphere: [x, y], {x, y} or {$geometry: Point}
 * (with $maxDistance / $minDistance inside in that form). */
static int parse_near_arg(const bson_iter_t *arg, q_geo_pred *p, md_error *err)
{
    bson_iter_t x;
    if (q_geo_legacy_point(arg, &p->center) &&
        !(BSON_ITER_HOLDS_DOCUMENT(arg) && bson_iter_recurse(arg, &x) && bson_iter_next(&x) &&
          bson_iter_key(&x)[0] == '$'))
        return 0;
    if (!BSON_ITER_HOLDS_DOCUMENT(arg) || !bson_iter_recurse(arg, &x))
        return gerr(err, "near must be first in: { %s }", bson_iter_key(arg));
    bool have = false;
    while (bson_iter_next(&x)) {
        const char *k = bson_iter_key(&x);
        int rc = 0;
        if (!strcmp(k, "$geometry")) {
            q_geo *g = NULL;
            if ((rc = q_geo_parse_geojson(&x, &g, err)) == 0 && g->type != QG_POINT)
                rc = gerr(err, "invalid point in geo near query $geometry argument");
            if (!rc)
                p->center = g->pts[0], have = true, p->geojson = p->sphere = true;
            q_geo_free(g);
        } else if (!strcmp(k, "$maxDistance")) {
            rc = parse_dist(&x, &p->max_dist, err);
        } else if (!strcmp(k, "$minDistance")) {
            rc = parse_dist(&x, &p->min_dist, err);
        } else {
            rc = gerr(err, "invalid argument in geo near query: %s", k);
        }
        if (rc)
            return rc;
    }
    return have ? 0 : gerr(err, "invalid point in geo near query $geometry argument");
}

int q_geo_pred_parse(const bson_iter_t *ops, q_geo_pred **out, md_error *err)
{
    bson_iter_t x;
    q_geo_pred *p = calloc(1, sizeof *p);
    assert(p);
    p->max_dist = INFINITY;
    int rc = 0;
    bool have_max = false, have_min = false;
    bson_iter_recurse(ops, &x);
    while (!rc && bson_iter_next(&x)) {
        const char *k = bson_iter_key(&x);
        if (!strcmp(k, "$geoWithin") || !strcmp(k, "$within") || !strcmp(k, "$geoIntersects")) {
            if (p->op)
                rc = gerr(err, "can't have 2 geo operators: %s", k);
            else {
                p->op = k[4] == 'I' ? QGP_INTERSECTS : QGP_WITHIN;
                rc = parse_region(&x, p->op == QGP_WITHIN, &p->region, err);
            }
        } else if (!strcmp(k, "$near") || !strcmp(k, "$nearSphere")) {
            if (p->op)
                rc = gerr(err, "can't have 2 geo operators: %s", k);
            p->op = QGP_NEAR;
            p->near_sphere = p->sphere = k[5] == 'S';
            if (!rc)
                rc = parse_near_arg(&x, p, err);
        } else if (!strcmp(k, "$maxDistance") || !strcmp(k, "$minDistance")) {
            double d;
            rc = parse_dist(&x, &d, err);
            if (k[1] == 'm' && k[2] == 'a')
                p->max_dist = d, have_max = true;
            else
                p->min_dist = d, have_min = true;
        } else {
            rc = gerr(err, "geo operator %s cannot be combined with %s", "$near", k);
        }
    }
    if (!rc && !p->op)
        rc = gerr(err, "%s", "$maxDistance / $minDistance must be in a $near / $nearSphere query");
    if (!rc && p->op != QGP_NEAR && (have_max || have_min))
        rc = gerr(err, "%s", "$maxDistance / $minDistance only apply to $near / $nearSphere");
    if (!rc && p->op == QGP_NEAR && !p->geojson &&
        !(fabs(p->center.x) <= 180 && fabs(p->center.y) <= 90) && p->sphere)
        rc = gerr(err, "longitude/latitude is out of bounds, lng: %g lat: %g", p->center.x,
                  p->center.y);
    if (rc) {
        q_geo_pred_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

/* A query distance of p's units from radians on the sphere / flat units. */
double q_geo_pred_distance(const q_geo_pred *p, const bson_iter_t *it)
{
    q_geo *g = NULL;
    if (q_geo_parse(it, &g, NULL))
        return -1;
    double d;
    if (p->sphere) {
        d = q_geo_distance(p->center, g, true);
        if (p->geojson)
            d *= Q_GEO_EARTH_M;
    } else {
        d = g->flat ? q_geo_distance(p->center, g, false) : -1;
    }
    q_geo_free(g);
    return d;
}

bool q_geo_pred_match(const q_geo_pred *p, const bson_iter_t *it)
{
    if (p->op == QGP_NEAR) {
        double d = q_geo_pred_distance(p, it);
        return d >= 0 && d >= p->min_dist && d <= p->max_dist;
    }
    q_geo *g = NULL;
    if (q_geo_parse(it, &g, NULL))
        return false;
    bool r = p->op == QGP_WITHIN ? q_geo_within(g, p->region) : q_geo_intersects(g, p->region);
    q_geo_free(g);
    return r;
}
