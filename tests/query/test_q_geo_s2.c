/*
 * test_q_geo_s2.c -- minidoc's own S2 math (query/q_geo_s2.c): cell ids
 * against those published from Google's C++ S2 library, and the coverings
 * of non-point geometries (complete for sampled points of lines, polygons
 * with holes, multi-geometries, collections, around a pole and across the
 * antimeridian; index queries equal to collection scans; fewer keys read
 * than through a bounding cap; maxCellsInCovering).
 *
 * Reference values: the encode corpus of the s2cell Python package
 * (github.com/aaliddell/s2cell, tests/s2_encode_corpus.csv), written by
 * misc/s2_test_corpus/main.cpp there with Google's s2geometry:
 * S2CellId(S2LatLng::FromDegrees(lat, lon)).parent(level), its id() and
 * ToToken(), for a 30 x 30 grid of lat = i / 29 * 180 - 90, lon = j / 29 *
 * 360 - 180.  A sample of its rows is below, each with the grid indices so
 * that the coordinates are computed exactly as that program did.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "q_geo.h"
#include "test_q_util.h"

typedef struct s2row {
    int i, j, level;
    uint64_t id;
    const char *token;
} s2row;

static const s2row rows[] = {
    {0, 0, 0, 12682136550675316736ull, "b"},
    {0, 0, 1, 12970366926827028480ull, "b4"},
    {0, 0, 2, 12754194144713244672ull, "b1"},
    {0, 0, 16, 12682136550943752192ull, "b00000001"},
    {0, 0, 30, 12682136550675316737ull, "b000000000000001"},
    {7, 21, 30, 12885049611461876427ull, "b2d0e45a8c785acb"},
    {7, 22, 2, 12465963768561532928ull, "ad"},
    {7, 22, 10, 12487994683047280640ull, "ad4e45"},
    {7, 22, 16, 12487994316096012288ull, "ad4e44aa9"},
    {7, 22, 30, 12487994316285303099ull, "ad4e44aa9b48593b"},
    {7, 23, 16, 12449488028932505600ull, "acc57766f"},
    {7, 23, 30, 12449488028820954469ull, "acc57766e959dd65"},
    {7, 24, 30, 12349053001616615443ull, "ab60a646e1d46813"},
    {7, 25, 30, 12324292385180292005ull, "ab08aea09eb913a5"},
    {7, 26, 30, 12270266540623254795ull, "aa48be687535d50b"},
    {7, 27, 12, 12246509425275174912ull, "a9f4577"},
    {7, 27, 30, 12246509413806269383ull, "a9f4576d546663c7"},
    {15, 8, 30, 10361705609293037317ull, "8fcc2c5a5d157f05"},
    {15, 9, 16, 10234724995456565248ull, "8e090c285"},
    {15, 9, 30, 10234724995189283129ull, "8e090c2840119939"},
    {15, 10, 30, 10204722832527891071ull, "8d9e755968249a7f"},
    {15, 11, 0, 1152921504606846976ull, "1"},
    {15, 11, 1, 864691128455135232ull, "0c"},
    {15, 11, 30, 583524376937700807ull, "0819185445271dc7"},
    {15, 12, 30, 617420859346505369ull, "089185001643ce99"},
    {15, 13, 30, 1100092119264661145ull, "0f444ff434fa0e99"},
    {15, 14, 30, 1122466231904031895ull, "0f93cd174102d497"},
    {15, 15, 20, 1183376777308798976ull, "106c32e8bef"},
    {15, 15, 30, 1183376777309662057ull, "106c32e8befd2b69"},
    {23, 0, 3, 6323053876828176384ull, "57c"},
    {23, 0, 30, 6307290601708627851ull, "5787ff628200a78b"},
    {23, 1, 30, 6317473444442625541ull, "57ac2ca055f75605"},
    {23, 2, 30, 6224510362486323925ull, "5661e73220bc3ad5"},
    {23, 3, 30, 6063459936466245705ull, "5425bcafc6e21849"},
    {23, 4, 30, 6083757908541095631ull, "546dd995ae10becf"},
    {23, 5, 30, 6017604470215889835ull, "5382d3620e0553ab"},
    {23, 6, 30, 5981845013662616957ull, "5303c858c4cd4d7d"},
    {23, 7, 14, 5946248385836089344ull, "52855167"},
};

/* S2CellId::ToToken: the id in hex, trailing zero digits dropped. */
static void token_of(uint64_t id, char *out)
{
    if (id == 0) {
        strcpy(out, "X");
        return;
    }
    sprintf(out, "%016" PRIx64, id);
    size_t n = strlen(out);
    while (n > 1 && out[n - 1] == '0')
        n--;
    out[n] = '\0';
}

/* The level an id says: where its lowest set bit is. */
static int level_of(uint64_t id)
{
    int l = 30;
    while (!(id & 1))
        id >>= 2, l--;
    return l;
}

Test(q_geo_s2, cell_ids_match_google_s2)
{
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        const s2row *r = &rows[k];
        double lat = ((double)r->i / 29) * 180.0 - 90.0;
        double lon = ((double)r->j / 29) * 360.0 - 180.0;
        uint64_t id = q_s2_cell_of(q_geo_vec_of((q_geo_pt){lon, lat}), r->level);
        char tok[24];
        token_of(id, tok);
        cr_assert_eq(id, r->id, "lat %.17g lon %.17g level %d: %" PRIu64 ", S2 %" PRIu64, lat,
                     lon, r->level, id, r->id);
        cr_assert_str_eq(tok, r->token, "lat %.17g lon %.17g level %d", lat, lon, r->level);
        cr_assert_eq(level_of(id), r->level);
        cr_assert_eq((int)(id >> 61), (int)(r->id >> 61), "face");
    }
}

/* The face of each axis, as S2's FaceDefinitions test: (lat, lng) (0, 0)
 * is face 0, (0, 90) face 1, (90, 0) face 2, (0, 180) face 3, (0, -90) face
 * 4, (-90, 0) face 5. */
Test(q_geo_s2, faces_of_the_axes)
{
    static const double ll[6][2] = {{0, 0}, {0, 90}, {90, 0}, {0, 180}, {0, -90}, {-90, 0}};
    for (int f = 0; f < 6; f++) {
        uint64_t id = q_s2_cell_of(q_geo_vec_of((q_geo_pt){ll[f][1], ll[f][0]}), 30);
        cr_assert_eq((int)(id >> 61), f, "lat %g lng %g", ll[f][0], ll[f][1]);
    }
}

/* ---- coverings of non-point geometries ------------------------------------------ */

static double rnd(unsigned *s, double lo, double hi)
{
    *s = *s * 1103515245u + 12345u;
    return lo + (hi - lo) * ((*s >> 8) & 0xFFFFFF) / 16777216.0;
}

static q_geo *parse_json(const char *json)
{
    bson_t *b = bson_new_from_json((const uint8_t *)json, -1, NULL);
    bson_iter_t it;
    q_geo *g = NULL;
    cr_assert(b && bson_iter_init_find(&it, b, "g"));
    cr_assert_eq(q_geo_parse(&it, &g, NULL), 0, "%s", json);
    bson_destroy(b);
    return g;
}

static bool covered(const uint64_t *ids, size_t n, uint64_t leaf)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t l = ids[i] & (~ids[i] + 1);
        if (leaf >= ids[i] - (l - 1) && leaf <= ids[i] + (l - 1))
            return true;
    }
    return false;
}

/* The covering of a polygon holds every point of it (sampled), at most
 * maxCellsInCovering cells of the indexed levels, and leaves out points
 * of its bounding cap far from it. */
Test(q_geo_s2, polygon_covering_is_complete_and_tight)
{
    q_geo_params gp;
    bson_t spec = BSON_INITIALIZER;
    q_geo_params_init(&gp, &spec);
    bson_destroy(&spec);
    /* a thin diagonal strip from (0, 0) to (20, 20), half a degree wide */
    q_geo *g = parse_json("{\"g\": {\"type\": \"Polygon\", \"coordinates\": [[[0, 0], [0.5, 0], "
                          "[20.5, 20], [20.5, 20.5], [20, 20.5], [0, 0.5], [0, 0]]]}}");
    uint64_t *ids;
    size_t n;
    q_s2_cover_geo(g, &gp, &ids, &n);
    cr_assert(n >= 1 && n <= (size_t)gp.max_cells, "%zu cells", n);
    for (size_t i = 0; i < n; i++) {
        uint64_t id = ids[i], l = id & (~id + 1);
        int level = 30;
        while (!(l & 1))
            l >>= 2, level--;
        cr_assert(level >= gp.coarsest && level <= gp.finest, "level %d", level);
    }
    unsigned s = 9;
    int inside = 0, far_out = 0;
    for (int k = 0; k < 20000; k++) {
        q_geo_pt p = {rnd(&s, -1, 21), rnd(&s, -1, 21)};
        q_geo pt = {.type = QG_POINT, .pts = &p, .npts = 1};
        uint64_t leaf = q_s2_cell_of(q_geo_vec_of(p), 30);
        if (q_geo_intersects(&pt, g)) {
            inside++;
            cr_assert(covered(ids, n, leaf), "(%.9g, %.9g) is in the polygon, not its covering",
                      p.x, p.y);
        } else if (fabs(p.x - p.y) > 6) {
            far_out += !covered(ids, n, leaf);
        }
    }
    cr_assert(inside > 100);
    /* the corners of the box, 6 degrees or more off the strip, are left out */
    cr_assert(far_out > 5000, "%d far points left out", far_out);
    free(ids);
    q_geo_free(g);
}

/* Lines, polygons with holes, multi-geometries and collections at random:
 * each sampled point of the geometry is in its covering. */
Test(q_geo_s2, random_coverings_are_complete)
{
    q_geo_params gp;
    bson_t spec = BSON_INITIALIZER;
    q_geo_params_init(&gp, &spec);
    bson_destroy(&spec);
    unsigned s = 21;
    for (int k = 0; k < 60; k++) {
        double cx = rnd(&s, -140, 140), cy = rnd(&s, -60, 60), w = rnd(&s, 0.01, 30);
        char json[1024];
        switch (k % 4) {
        case 0:
            snprintf(json, sizeof json, "{\"g\": {\"type\": \"LineString\", \"coordinates\": "
                     "[[%.9f, %.9f], [%.9f, %.9f], [%.9f, %.9f]]}}", cx, cy, cx + w, cy + w / 3,
                     cx + w / 2, cy - w / 2);
            break;
        case 1:
            snprintf(json, sizeof json, "{\"g\": {\"type\": \"Polygon\", \"coordinates\": "
                     "[[[%.9f, %.9f], [%.9f, %.9f], [%.9f, %.9f], [%.9f, %.9f], [%.9f, %.9f]], "
                     "[[%.9f, %.9f], [%.9f, %.9f], [%.9f, %.9f], [%.9f, %.9f]]]}}",
                     cx - w, cy - w / 4, cx + w, cy - w / 4, cx + w, cy + w / 4, cx - w, cy + w / 4,
                     cx - w, cy - w / 4, cx - w / 4, cy - w / 16, cx + w / 4, cy - w / 16, cx,
                     cy + w / 16, cx - w / 4, cy - w / 16);
            break;
        case 2:
            snprintf(json, sizeof json, "{\"g\": {\"type\": \"MultiPolygon\", \"coordinates\": "
                     "[[[[%.9f, %.9f], [%.9f, %.9f], [%.9f, %.9f], [%.9f, %.9f]]], "
                     "[[[%.9f, %.9f], [%.9f, %.9f], [%.9f, %.9f], [%.9f, %.9f]]]]}}",
                     cx, cy, cx + w / 5, cy, cx, cy + w / 5, cx, cy, cx + w / 2, cy - w / 2,
                     cx + w / 2 + w / 7, cy - w / 2, cx + w / 2, cy - w / 2 + w / 7, cx + w / 2,
                     cy - w / 2);
            break;
        default:
            snprintf(json, sizeof json, "{\"g\": {\"type\": \"GeometryCollection\", "
                     "\"geometries\": [{\"type\": \"Point\", \"coordinates\": [%.9f, %.9f]}, "
                     "{\"type\": \"MultiLineString\", \"coordinates\": [[[%.9f, %.9f], [%.9f, "
                     "%.9f]]]}]}}", cx, cy, cx - w, cy + w / 2, cx + w / 3, cy + w / 2);
            break;
        }
        q_geo *g = parse_json(json);
        uint64_t *ids;
        size_t n;
        q_s2_cover_geo(g, &gp, &ids, &n);
        q_geo_pt lo, hi;
        q_geo_bbox(g, &lo, &hi);
        int hits = 0;
        for (int t = 0; t < 3000; t++) {
            q_geo_pt p;
            if (t % 3 == 0 && g->npts >= 2) {
                /* a point on an edge of a line or the shell */
                size_t e = (size_t)rnd(&s, 0, (double)(g->type == QG_LINE ? g->npts - 1
                                                                             : g->loop_end[0]));
                q_geo_vec a = q_geo_vec_of(g->pts[e]);
                q_geo_vec b = q_geo_vec_of(g->pts[(e + 1) % g->npts]);
                double f = rnd(&s, 0, 1);
                q_geo_vec m = {a.x + (b.x - a.x) * f, a.y + (b.y - a.y) * f, a.z + (b.z - a.z) * f};
                double len = sqrt(m.x * m.x + m.y * m.y + m.z * m.z);
                uint64_t leaf = q_s2_cell_of((q_geo_vec){m.x / len, m.y / len, m.z / len}, 30);
                cr_assert(covered(ids, n, leaf), "case %d: an edge point not covered: %s", k,
                          json);
                continue;
            }
            p = (q_geo_pt){rnd(&s, lo.x, hi.x), rnd(&s, lo.y, hi.y)};
            q_geo pt = {.type = QG_POINT, .pts = &p, .npts = 1};
            if (!q_geo_intersects(&pt, g))
                continue;
            hits++;
            cr_assert(covered(ids, n, q_s2_cell_of(q_geo_vec_of(p), 30)),
                      "case %d: (%.9g, %.9g) not covered: %s", k, p.x, p.y, json);
        }
        free(ids);
        q_geo_free(g);
    }
}

/* The index scan of a $geoIntersects / $geoWithin polygon reads only the
 * keys near the polygon, not those of its bounding cap; the results stay
 * those of a collection scan. */
Test(q_geo_s2, query_covering_skips_the_cap)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"g\": \"2dsphere\"}, "
                  "\"name\": \"g\"}]}");
        int on = 0, id = 0;
        /* small squares on a 1-degree grid over (0..20, 0..20); the query
         * strip runs along the diagonal */
        for (int x = 0; x < 20; x++)
            for (int y = 0; y < 20; y++, id++) {
                double a = x + 0.3, b = y + 0.3, d = 0.2;
                on += abs(x - y) <= 0;
                T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": %d, \"g\": {\"type\": "
                          "\"Polygon\", \"coordinates\": [[[%g, %g], [%g, %g], [%g, %g], [%g, %g], "
                          "[%g, %g]]]}}]}", id, a, b, a + d, b, a + d, b + d, a, b + d, a, b);
            }
        const char *strip = "{\"type\": \"Polygon\", \"coordinates\": [[[0, 0], [0.5, 0], "
                            "[20.5, 20], [20.5, 20.5], [20, 20.5], [0, 0.5], [0, 0]]]}";
        char gj[512];
        snprintf(gj, sizeof gj, "{\"g\": %s}", strip);
        q_geo *sg = parse_json(gj);
        q_geo_vec cc;
        double cr;
        q_geo_cap(sg, &cc, &cr);
        q_geo_free(sg);
        int in_cap = 0;
        for (int x = 0; x < 20; x++)
            for (int y = 0; y < 20; y++)
                in_cap += q_geo_angle(cc, q_geo_vec_of((q_geo_pt){x + 0.4, y + 0.4})) <= cr;
        cr_assert(in_cap > 200, "%d squares in the cap", in_cap);
        for (int w = 0; w < 2; w++) {
            const char *op = w ? "$geoWithin" : "$geoIntersects";
            bson_t *ix = T_OK(&t, "{\"find\": \"c\", \"filter\": {\"g\": {\"%s\": {\"$geometry\": "
                                  "%s}}}, \"batchSize\": 1000}", op, strip);
            bson_t *cs = T_OK(&t, "{\"find\": \"c\", \"filter\": {\"g\": {\"%s\": {\"$geometry\": "
                                  "%s}}}, \"hint\": {\"$natural\": 1}, \"batchSize\": 1000}", op,
                              strip);
            int n = t_len(ix, "cursor.firstBatch");
            cr_assert_eq(n, t_len(cs, "cursor.firstBatch"), "%s: index and scan differ", op);
            /* about the squares on the diagonal meet the strip (its
             * geodesic edges bow north of the lines on the map); some of
             * them it holds whole */
            cr_assert(n >= (w ? 1 : on / 2) && n <= 3 * on, "%s: %d results", op, n);
            bson_destroy(ix);
            bson_destroy(cs);
            bson_t *ex = T_OK(&t, "{\"explain\": {\"find\": \"c\", \"filter\": {\"g\": {\"%s\": "
                                  "{\"$geometry\": %s}}}}, \"verbosity\": \"executionStats\"}",
                              op, strip);
            int64_t docs = t_i64(ex, "executionStats.totalDocsExamined");
            int64_t keys = t_i64(ex, "executionStats.totalKeysExamined");
            /* before, the strip was searched through its bounding cap,
             * which holds (the centers of) in_cap squares: every one of
             * them was fetched */
            cr_assert(docs < in_cap / 2, "%s: %lld documents examined, %d in the cap", op,
                      (long long)docs, in_cap);
            cr_assert(keys > 0 && keys < 20 * in_cap / 2, "%s: %lld keys examined", op,
                      (long long)keys);
            bson_destroy(ex);
        }
    }
}

/* maxCellsInCovering: kept in the spec, bounds the covering (which stays
 * complete), refused out of range. */
Test(q_geo_s2, max_cells_in_covering)
{
    bson_t *spec = BCON_NEW("key", "{", "g", "2dsphere", "}", "maxCellsInCovering", BCON_INT32(4));
    q_geo_params gp;
    q_geo_params_init(&gp, spec);
    bson_destroy(spec);
    cr_assert_eq(gp.max_cells, 4);
    q_geo *g = parse_json("{\"g\": {\"type\": \"Polygon\", \"coordinates\": [[[0, 0], [0.5, 0], "
                          "[20.5, 20], [20.5, 20.5], [20, 20.5], [0, 0.5], [0, 0]]]}}");
    uint64_t *ids;
    size_t n;
    q_s2_cover_geo(g, &gp, &ids, &n);
    cr_assert(n >= 1 && n <= 4, "%zu cells", n);
    cr_assert(covered(ids, n, q_s2_cell_of(q_geo_vec_of((q_geo_pt){10.25, 10.25}), 30)));
    free(ids);
    q_geo_free(g);
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_ERR(&t, 2, "maxCellsInCovering", "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": "
              "{\"g\": \"2dsphere\"}, \"name\": \"g\", \"maxCellsInCovering\": 0}]}");
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"g\": \"2dsphere\"}, "
                  "\"name\": \"g\", \"maxCellsInCovering\": 4}]}");
        bson_t *r = T_OK(&t, "{\"listIndexes\": \"c\"}");
        cr_assert_eq(t_i64(r, "cursor.firstBatch.1.maxCellsInCovering"), 4);
        bson_destroy(r);
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": 1, \"g\": {\"type\": \"Polygon\", "
                  "\"coordinates\": [[[0, 0], [0.5, 0], [20.5, 20], [20.5, 20.5], [20, 20.5], "
                  "[0, 0.5], [0, 0]]]}}]}");
        r = T_OK(&t, "{\"find\": \"c\", \"filter\": {\"g\": {\"$geoIntersects\": {\"$geometry\": "
                     "{\"type\": \"Point\", \"coordinates\": [10.25, 10.25]}}}}}");
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 1);
        bson_destroy(r);
    }
}

/* A polygon around the north pole and one across the antimeridian: every
 * sampled point of them is in the covering, and an index query over
 * random points finds what a collection scan finds. */
Test(q_geo_s2, pole_and_antimeridian_coverings)
{
    static const char *shapes[] = {
        "{\"type\": \"Polygon\", \"coordinates\": [[[0, 80], [60, 80], [120, 80], [180, 80], "
        "[-120, 80], [-60, 80], [0, 80]]]}",
        "{\"type\": \"Polygon\", \"coordinates\": [[[170, -10], [-170, -10], [-170, 10], "
        "[170, 10], [170, -10]]]}",
        "{\"type\": \"LineString\", \"coordinates\": [[175, 5], [-175, -5], [-160, 60]]}",
    };
    q_geo_params gp;
    bson_t spec = BSON_INITIALIZER;
    q_geo_params_init(&gp, &spec);
    bson_destroy(&spec);
    unsigned s = 33;
    for (size_t k = 0; k < 3; k++) {
        char json[512];
        snprintf(json, sizeof json, "{\"g\": %s}", shapes[k]);
        q_geo *g = parse_json(json);
        uint64_t *ids;
        size_t n;
        q_s2_cover_geo(g, &gp, &ids, &n);
        int in = 0;
        for (int t = 0; t < 20000; t++) {
            q_geo_pt p = {rnd(&s, -180, 180), asin(rnd(&s, -1, 1)) * 180 / M_PI};
            q_geo pt = {.type = QG_POINT, .pts = &p, .npts = 1};
            if (!q_geo_intersects(&pt, g))
                continue;
            in++;
            cr_assert(covered(ids, n, q_s2_cell_of(q_geo_vec_of(p), 30)),
                      "shape %zu: (%.9g, %.9g) not covered", k, p.x, p.y);
        }
        cr_assert(k == 2 || in > 10, "shape %zu: %d points in", k, in);
        free(ids);
        q_geo_free(g);
    }
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"g\": \"2dsphere\"}, "
                  "\"name\": \"g\"}]}");
        for (int i = 0; i < 600; i++) {
            double lng = rnd(&s, -180, 180), lat = asin(rnd(&s, -1, 1)) * 180 / M_PI;
            if (i % 3 == 0) {
                lat = rnd(&s, 75, 90);
            } else if (i % 3 == 1) {
                lng = rnd(&s, 165, 195);
                lng = lng > 180 ? lng - 360 : lng;
                lat = rnd(&s, -15, 15);
            }
            T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": %d, \"g\": {\"type\": "
                      "\"Point\", \"coordinates\": [%.12f, %.12f]}}]}", i, lng, lat);
        }
        for (size_t k = 0; k < 3; k++) {
            bson_t *ix = T_OK(&t, "{\"find\": \"c\", \"filter\": {\"g\": {\"$geoIntersects\": "
                                  "{\"$geometry\": %s}}}, \"batchSize\": 1000}", shapes[k]);
            bson_t *cs = T_OK(&t, "{\"find\": \"c\", \"filter\": {\"g\": {\"$geoIntersects\": "
                                  "{\"$geometry\": %s}}}, \"hint\": {\"$natural\": 1}, "
                                  "\"batchSize\": 1000}", shapes[k]);
            cr_assert_eq(t_len(ix, "cursor.firstBatch"), t_len(cs, "cursor.firstBatch"),
                         "shape %zu", k);
            cr_assert(k == 2 || t_len(ix, "cursor.firstBatch") > 20, "shape %zu: %d", k,
                      t_len(ix, "cursor.firstBatch"));
            bson_destroy(ix);
            bson_destroy(cs);
        }
    }
}
