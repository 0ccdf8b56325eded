/*
 * q_geo_s2.c -- S2 cell ids and coverings for 2dsphere (version 3) indexes.
 *
 * Why our own S2 and not libs2-dev: the index needs only a small part of
 * S2 -- a point's cell id (cube face, quadratic projection, position on the
 * Hilbert curve) and coverings of caps and geometries -- which is a few
 * hundred lines of C; the Debian library would bring a C++ toolchain into
 * the build, an extern "C" wrapper, Abseil and OpenSSL as link
 * dependencies of a C library, for the same ids.  The ids are S2's exactly
 * (S2CellId::FromPoint: the same face, projection, lookup tables and bit
 * layout), so keys equal MongoDB's for points; tests/query/test_q_geo_s2.c
 * checks them against ids published from Google's library.
 *
 * Keys (as MongoDB's S2CellIdToIndexKey for version 3): the cell id with
 * its top bit flipped, as a NumberLong (so signed order is the ids' order).
 * A point is keyed by its leaf cell (level 30).  Other geometries by a
 * covering of the geometry itself: the cells that meet it, between
 * coarsestIndexedLevel (default 2, 2000 km) and finestIndexedLevel
 * (default 16, 110 m), at most maxCellsInCovering (20) where the levels
 * allow -- version 3's defaults.  A cell meets a geometry when the
 * matcher's own tests (q_geo.c) say the cell, as a polygon of its corners
 * widened by a millionth of its size, intersects it; cells the geometry
 * holds whole are not split.  Deviation: the coverer splits the coarsest
 * partly covered cell first, a simpler order than S2RegionCoverer's, so
 * the cells (and keys) can differ from MongoDB's for the same shape;
 * every covering holds the whole shape, so queries stay exact (the
 * matcher decides).
 *
 * A query region is covered the same way (a $geometry by its cells, a
 * $near ring or $centerSphere by its cap's), with up to 24 cells down to
 * 8 levels below the finest; its key intervals are, for each covering
 * cell, the range of its descendants' ids and each of its ancestors down
 * to the coarsest level as a point (coarser cells of indexed geometries
 * that contain it).
 */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "q_geo.h"
#include "q_path.h"

#define MAX_LEVEL 30
#define POS_BITS 61
#define LOOKUP_BITS 4
#define QUERY_CELLS 24 /* cells in a query region's covering */

static uint16_t lookup_pos[1 << (2 * LOOKUP_BITS + 2)];
static pthread_once_t lookup_once = PTHREAD_ONCE_INIT;

static const int pos_to_ij[4][4] = {{0, 1, 3, 2}, {0, 2, 3, 1}, {3, 2, 0, 1}, {3, 1, 0, 2}};
static const int pos_to_orientation[4] = {1, 0, 0, 3}; /* swap, 0, 0, invert|swap */

static void init_cell(int level, int i, int j, int orig, int pos, int orientation)
{
    if (level == LOOKUP_BITS) {
        int ij = (i << LOOKUP_BITS) + j;
        lookup_pos[(ij << 2) + orig] = (uint16_t)((pos << 2) + orientation);
        return;
    }
    level++, i <<= 1, j <<= 1, pos <<= 2;
    for (int k = 0; k < 4; k++) {
        int r = pos_to_ij[orientation][k];
        init_cell(level, i + (r >> 1), j + (r & 1), orig, pos + k,
                  orientation ^ pos_to_orientation[k]);
    }
}

static void init_lookup(void)
{
    for (int o = 0; o < 4; o++)
        init_cell(0, 0, 0, o, 0, o);
}

/* S2CellId::FromFaceIJ: the leaf cell (level 30). */
static uint64_t from_face_ij(int face, uint32_t i, uint32_t j)
{
    pthread_once(&lookup_once, init_lookup);
    uint64_t n[2] = {0, (uint64_t)face << (POS_BITS - 33)};
    int bits = face & 1;
    for (int k = 7; k >= 0; k--) {
        int mask = (1 << LOOKUP_BITS) - 1;
        bits += (int)((i >> (k * LOOKUP_BITS)) & mask) << (LOOKUP_BITS + 2);
        bits += (int)((j >> (k * LOOKUP_BITS)) & mask) << 2;
        bits = lookup_pos[bits];
        n[k >> 2] |= (uint64_t)(bits >> 2) << ((k & 3) * 2 * LOOKUP_BITS);
        bits &= 3;
    }
    return ((n[1] << 32) + n[0]) * 2 + 1;
}

static uint64_t lsb_for(int level) { return 1ull << (2 * (MAX_LEVEL - level)); }

static uint64_t parent(uint64_t id, int level)
{
    uint64_t l = lsb_for(level);
    return (id & (~l + 1)) | l;
}

static double uv_to_st(double u)
{
    return u >= 0 ? 0.5 * sqrt(1 + 3 * u) : 1 - 0.5 * sqrt(1 - 3 * u);
}

static double st_to_uv(double s)
{
    return s >= 0.5 ? (1.0 / 3) * (4 * s * s - 1) : (1.0 / 3) * (1 - 4 * (1 - s) * (1 - s));
}

static int xyz_to_face_uv(q_geo_vec p, double *u, double *v)
{
    double ax = fabs(p.x), ay = fabs(p.y), az = fabs(p.z);
    int face = ax > ay ? (ax > az ? 0 : 2) : (ay > az ? 1 : 2);
    double c = face == 0 ? p.x : face == 1 ? p.y : p.z;
    if (c < 0)
        face += 3;
    switch (face) {
    case 0: *u = p.y / p.x, *v = p.z / p.x; break;
    case 1: *u = -p.x / p.y, *v = p.z / p.y; break;
    case 2: *u = -p.x / p.z, *v = -p.y / p.z; break;
    case 3: *u = p.z / p.x, *v = p.y / p.x; break;
    case 4: *u = p.z / p.y, *v = -p.x / p.y; break;
    default: *u = -p.y / p.z, *v = -p.x / p.z; break;
    }
    return face;
}

static q_geo_vec face_uv_to_xyz(int face, double u, double v)
{
    switch (face) {
    case 0: return (q_geo_vec){1, u, v};
    case 1: return (q_geo_vec){-u, 1, v};
    case 2: return (q_geo_vec){-u, -v, 1};
    case 3: return (q_geo_vec){-1, -v, -u};
    case 4: return (q_geo_vec){v, -1, -u};
    default: return (q_geo_vec){v, u, -1};
    }
}

static uint32_t st_to_ij(double s)
{
    double x = floor((double)(1u << MAX_LEVEL) * s);
    return x < 0 ? 0 : x > (double)((1u << MAX_LEVEL) - 1) ? (1u << MAX_LEVEL) - 1 : (uint32_t)x;
}

uint64_t q_s2_cell_of(q_geo_vec p, int level)
{
    double u, v;
    int face = xyz_to_face_uv(p, &u, &v);
    uint64_t id = from_face_ij(face, st_to_ij(uv_to_st(u)), st_to_ij(uv_to_st(v)));
    return level < MAX_LEVEL ? parent(id, level) : id;
}

/* ---- coverings ------------------------------------------------------------------ */

typedef struct cell {
    int face, level;
    uint32_t i, j; /* position at its level */
    int rel;       /* its relation to the region being covered (REL_*) */
} cell;

enum { REL_DISJOINT = 0, REL_PARTIAL = 1, REL_INSIDE = 2 };

static q_geo_vec unitv(q_geo_vec a)
{
    double n = sqrt(a.x * a.x + a.y * a.y + a.z * a.z);
    return (q_geo_vec){a.x / n, a.y / n, a.z / n};
}

static q_geo_vec cell_point(const cell *c, double di, double dj)
{
    double size = 1.0 / (double)(1u << c->level);
    return unitv(face_uv_to_xyz(c->face, st_to_uv((c->i + di) * size),
                                st_to_uv((c->j + dj) * size)));
}

static uint64_t cell_id(const cell *c)
{
    uint32_t shift = MAX_LEVEL - c->level, half = shift ? 1u << (shift - 1) : 0;
    uint64_t id = from_face_ij(c->face, (c->i << shift) + half, (c->j << shift) + half);
    return c->level < MAX_LEVEL ? parent(id, c->level) : id;
}

/* The cell's bounding cap: its center and the angle to its farthest corner. */
static void cell_cap(const cell *c, q_geo_vec *center, double *r)
{
    *center = cell_point(c, 0.5, 0.5);
    *r = 0;
    for (int k = 0; k < 4; k++) {
        double a = q_geo_angle(*center, cell_point(c, k >> 1, k & 1));
        *r = a > *r ? a : *r;
    }
    *r += 1e-12;
}

/* A region to cover: how a cell relates to it (REL_*, conservatively:
 * never DISJOINT for a cell that meets it, INSIDE only when it holds the
 * cell whole). */
typedef int (*relate_fn)(const cell *c, const void *region);

typedef struct cap_region {
    q_geo_vec c;
    double r;
} cap_region;

static int relate_cap(const cell *c, const void *region)
{
    const cap_region *q = region;
    q_geo_vec cc;
    double cr;
    cell_cap(c, &cc, &cr);
    double d = q_geo_angle(cc, q->c);
    if (d > q->r + cr)
        return REL_DISJOINT;
    return d + cr <= q->r ? REL_INSIDE : REL_PARTIAL;
}

typedef struct geo_region {
    const q_geo *g;
    q_geo_vec c; /* g's bounding cap, a quick test first */
    double r;
    bool area;   /* g can hold a cell whole (polygons) */
} geo_region;

/*
 * A cell against a geometry: the cell as a polygon of its four corners
 * (S2 cell edges are geodesics, as GeoJSON edges on the sphere), widened
 * by a millionth of its size so that a geometry touching an edge or a
 * corner counts, then the matcher's own intersection and containment
 * tests (q_geo.c).
 */
static int relate_geo(const cell *c, const void *region)
{
    const geo_region *q = region;
    q_geo_vec cc;
    double cr;
    cell_cap(c, &cc, &cr);
    if (q_geo_angle(cc, q->c) > q->r + cr + 1e-9)
        return REL_DISJOINT;
    double size = 1.0 / (double)(1u << c->level);
    double u0 = st_to_uv(c->i * size), u1 = st_to_uv((c->i + 1) * size);
    double v0 = st_to_uv(c->j * size), v1 = st_to_uv((c->j + 1) * size);
    double pu = (u1 - u0) * 1e-6, pv = (v1 - v0) * 1e-6;
    double us[4] = {u0 - pu, u1 + pu, u1 + pu, u0 - pu}, vs[4] = {v0 - pv, v0 - pv, v1 + pv, v1 + pv};
    q_geo_pt pts[4];
    for (int k = 0; k < 4; k++) {
        q_geo_vec p = unitv(face_uv_to_xyz(c->face, us[k], vs[k]));
        pts[k] = (q_geo_pt){atan2(p.y, p.x) * 180 / M_PI,
                            asin(p.z > 1 ? 1 : p.z < -1 ? -1 : p.z) * 180 / M_PI};
    }
    size_t ends[1] = {4};
    q_geo poly = {.type = QG_POLYGON, .pts = pts, .npts = 4, .loop_end = ends, .nloops = 1};
    if (q->area && q_geo_within(&poly, q->g))
        return REL_INSIDE;
    return q_geo_intersects(&poly, q->g) ? REL_PARTIAL : REL_DISJOINT;
}

typedef struct cellv {
    cell *v;
    size_t n, cap;
} cellv;

static void cv_push(cellv *v, cell c)
{
    if (v->n == v->cap) {
        v->cap = v->cap ? v->cap * 2 : 16;
        v->v = realloc(v->v, v->cap * sizeof *v->v);
        assert(v->v);
    }
    v->v[v->n++] = c;
}

/* The children of p that meet the region, with their relations. */
static size_t children(const cell *p, relate_fn rel, const void *region, cell kids[4])
{
    size_t nk = 0;
    for (int k = 0; k < 4; k++) {
        cell c = {p->face, p->level + 1, p->i * 2 + (k >> 1), p->j * 2 + (k & 1), 0};
        if ((c.rel = rel(&c, region)) != REL_DISJOINT)
            kids[nk++] = c;
    }
    return nk;
}

/*
 * Cover a region with cells of levels [minl, maxl]: start from the cells
 * at minl that meet it (all of them, however many: the covering must be
 * complete), and split the coarsest cell the region holds only in part
 * while the result stays under max_cells (S2RegionCoverer's strategy in
 * its simplest form).  Cells the region holds whole are not split.
 */
static void cover(relate_fn rel, const void *region, int minl, int maxl, size_t max_cells,
                  cellv *out)
{
    cellv todo = {0};
    for (int f = 0; f < 6; f++) {
        cell c = {f, 0, 0, 0, 0};
        if ((c.rel = rel(&c, region)) != REL_DISJOINT)
            cv_push(&todo, c);
    }
    /* down to minl */
    while (todo.n && todo.v[0].level < minl) {
        cellv next = {0};
        cell kids[4];
        for (size_t i = 0; i < todo.n; i++)
            for (size_t k = 0, nk = children(&todo.v[i], rel, region, kids); k < nk; k++)
                cv_push(&next, kids[k]);
        free(todo.v);
        todo = next;
    }
    /* split the coarsest partial cells while the count allows */
    for (;;) {
        size_t best = SIZE_MAX;
        for (size_t i = 0; i < todo.n; i++)
            if (todo.v[i].level < maxl && todo.v[i].rel == REL_PARTIAL &&
                (best == SIZE_MAX || todo.v[i].level < todo.v[best].level))
                best = i;
        if (best == SIZE_MAX)
            break;
        cell kids[4];
        size_t nk = children(&todo.v[best], rel, region, kids);
        if (todo.n - 1 + nk > max_cells)
            break;
        todo.v[best] = todo.v[--todo.n];
        for (size_t k = 0; k < nk; k++)
            cv_push(&todo, kids[k]);
    }
    *out = todo;
}

static void cover_cap(q_geo_vec qc, double qr, int minl, int maxl, size_t max_cells, cellv *out)
{
    cap_region q = {qc, qr};
    cover(relate_cap, &q, minl, maxl, max_cells, out);
}

static bool has_area(const q_geo *g)
{
    if (g->type == QG_POLYGON || g->type == QG_MPOLYGON)
        return true;
    for (size_t i = 0; i < g->nkids; i++)
        if (has_area(g->kids[i]))
            return true;
    return false;
}

static void cover_geo(const q_geo *g, int minl, int maxl, size_t max_cells, cellv *out)
{
    geo_region q = {.g = g, .area = has_area(g)};
    q_geo_cap(g, &q.c, &q.r);
    cover(relate_geo, &q, minl, maxl, max_cells, out);
}

void q_s2_key(uint64_t id, q_buf *out)
{
    bson_t one = BSON_INITIALIZER;
    bson_iter_t v;
    BSON_APPEND_INT64(&one, "k", (int64_t)(id ^ (1ull << 63)));
    bson_iter_init_find(&v, &one, "k");
    q_key_append_value(out, &v, false);
    bson_destroy(&one);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

void q_s2_cover_geo(const q_geo *g, const q_geo_params *gp, uint64_t **ids, size_t *n)
{
    if (g->type == QG_POINT) {
        *ids = malloc(sizeof **ids);
        (*ids)[0] = q_s2_cell_of(q_geo_vec_of(g->pts[0]), MAX_LEVEL);
        *n = 1;
        return;
    }
    cellv v;
    cover_geo(g, gp->coarsest, gp->finest, (size_t)gp->max_cells, &v);
    *ids = malloc((v.n ? v.n : 1) * sizeof **ids);
    for (size_t i = 0; i < v.n; i++)
        (*ids)[i] = cell_id(&v.v[i]);
    *n = v.n;
    free(v.v);
    q_sort(*ids, *n, sizeof **ids, cmp_u64);
}

typedef struct urange {
    uint64_t lo, hi;
} urange;

static int cmp_range(const void *a, const void *b)
{
    const urange *x = a, *y = b;
    return (x->lo > y->lo) - (x->lo < y->lo);
}

static void add_ival(q_ival **iv, size_t *n, size_t *cap, uint64_t lo, uint64_t hi)
{
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 16;
        *iv = realloc(*iv, *cap * sizeof **iv);
        assert(*iv);
    }
    q_ival *x = &(*iv)[(*n)++];
    memset(x, 0, sizeof *x);
    q_buf_init(&x->lo), q_buf_init(&x->hi), q_buf_init(&x->los), q_buf_init(&x->his);
    q_s2_key(lo, &x->lo);
    q_s2_key(hi, &x->hi);
    x->lo_incl = x->hi_incl = true;
    x->point = lo == hi;
    q_buf_printf(&x->los, "[%lld", (long long)(int64_t)(lo ^ (1ull << 63)));
    q_buf_printf(&x->his, "%lld]", (long long)(int64_t)(hi ^ (1ull << 63)));
}

/* The key intervals of a query covering v: each cell's descendants as a
 * range, and each of its ancestors down to the coarsest indexed level as
 * a point (coarser cells of indexed geometries that contain it). */
static void ranges_of(const cellv *v, const q_geo_params *gp, q_ival **iv, size_t *n)
{
    size_t nr = 0, cap = 0, rcap = 0;
    urange *r = NULL;
    for (size_t i = 0; i < v->n; i++) {
        uint64_t id = cell_id(&v->v[i]), l = id & (~id + 1);
        if (nr + MAX_LEVEL + 2 > rcap) {
            rcap = (nr + MAX_LEVEL + 2) * 2;
            r = realloc(r, rcap * sizeof *r);
            assert(r);
        }
        r[nr++] = (urange){id - (l - 1), id + (l - 1)};
        for (int lv = v->v[i].level - 1; lv >= gp->coarsest; lv--) {
            uint64_t p = parent(id, lv);
            r[nr++] = (urange){p, p};
        }
    }
    q_sort(r, nr, sizeof *r, cmp_range);
    *iv = NULL;
    *n = 0;
    for (size_t i = 0; i < nr;) {
        uint64_t lo = r[i].lo, hi = r[i].hi;
        for (i++; i < nr && r[i].lo <= hi + 1 && r[i].lo >= lo; i++)
            hi = r[i].hi > hi ? r[i].hi : hi;
        add_ival(iv, n, &cap, lo, hi);
    }
    free(r);
}

/* A query covering may go finer than the index's levels (points are
 * leaves); 8 levels below the finest keeps the count bounded. */
static int query_max_level(const q_geo_params *gp)
{
    return gp->finest + 8 > MAX_LEVEL ? MAX_LEVEL : gp->finest + 8;
}

void q_s2_cap_ranges(q_geo_vec c, double angle, const q_geo_params *gp, q_ival **iv, size_t *n)
{
    cellv v;
    cover_cap(c, angle, 0, query_max_level(gp), QUERY_CELLS, &v);
    ranges_of(&v, gp, iv, n);
    free(v.v);
}

void q_s2_geo_ranges(const q_geo *g, const q_geo_params *gp, q_ival **iv, size_t *n)
{
    cellv v;
    cover_geo(g, 0, query_max_level(gp), QUERY_CELLS, &v);
    ranges_of(&v, gp, iv, n);
    free(v.v);
}
