/*
 * test_q_geo.c -- geospatial indexes and operators (query/q_geo*.c) on
 * every engine: $near / $nearSphere order against a brute-force sort of
 * random points (2d and 2dsphere), $geoWithin polygons with holes with and
 * without the index against each other and known points, the antimeridian
 * and the poles, the Little Book's Indexes chapter examples (2.4), invalid
 * GeoJSON refused on insert, and the S2 cell ids' structure.
 */
#include <math.h>

#include "q_geo.h"
#include "t_geo.h"
#include "test_q_util.h"


/* The _ids of a find reply's first batch. */
static int batch_ids(const bson_t *r, int *ids, int max)
{
    bson_iter_t it, x, f;
    int n = 0;
    cr_assert(t_find(r, "cursor.firstBatch", &it));
    bson_iter_recurse(&it, &x);
    while (bson_iter_next(&x) && n < max) {
        bson_iter_recurse(&x, &f);
        cr_assert(bson_iter_find(&f, "_id"));
        ids[n++] = bson_iter_int32(&f);
    }
    return n;
}

/* The distances of the ids in order must not decrease and must be the
 * brute-force prefix (ties allowed in any order). */
static void check_order(const pt *v, int np, const int *ids, int n, int want, const char *what)
{
    pt *s = malloc(np * sizeof *s);
    memcpy(s, v, np * sizeof *s);
    qsort(s, np, sizeof *s, cmp_pt);
    cr_assert_eq(n, want < np ? want : np, "%s: %d results", what, n);
    for (int i = 0; i < n; i++) {
        double d = v[ids[i]].d;
        cr_assert(fabs(d - s[i].d) < 1e-9 * (1 + s[i].d), "%s: result %d id %d at %g, expected %g",
                  what, i, ids[i], d, s[i].d);
    }
    free(s);
}

Test(q_geo, near_2d_matches_brute_force)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        unsigned s = 7;
        pt v[400];
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"loc\": \"2d\"}, "
                  "\"name\": \"loc_2d\"}]}");
        for (int i = 0; i < 400; i++) {
            v[i] = (pt){i, rnd(&s, -180, 180), rnd(&s, -90, 90), 0};
            if (i % 2)
                T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": %d, \"loc\": [%.17g, %.17g]}]}",
                      i, v[i].x, v[i].y);
            else
                T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": %d, \"loc\": {\"x\": %.17g, "
                          "\"y\": %.17g}}]}", i, v[i].x, v[i].y);
        }
        for (int q = 0; q < 6; q++) {
            double cx = rnd(&s, -170, 170), cy = rnd(&s, -80, 80);
            for (int i = 0; i < 400; i++)
                v[i].d = hypot(v[i].x - cx, v[i].y - cy);
            int ids[400], lim = q % 2 ? 25 : 0;
            bson_t *r = T_OK(&t, "{\"find\": \"c\", \"filter\": {\"loc\": {\"$near\": [%.17g, %.17g]}}, "
                                 "\"limit\": %d, \"batchSize\": 1000}", cx, cy, lim);
            int n = batch_ids(r, ids, 400);
            check_order(v, 400, ids, n, lim ? lim : 400, "2d $near");
            bson_destroy(r);
            /* $maxDistance keeps exactly those within */
            r = T_OK(&t, "{\"find\": \"c\", \"filter\": {\"loc\": {\"$near\": [%.17g, %.17g], "
                         "\"$maxDistance\": 30}}, \"batchSize\": 1000}", cx, cy);
            n = batch_ids(r, ids, 400);
            int within = 0;
            for (int i = 0; i < 400; i++)
                within += v[i].d <= 30;
            check_order(v, 400, ids, n, within, "2d $near $maxDistance");
            bson_destroy(r);
        }
    }
}

Test(q_geo, near_2dsphere_matches_brute_force)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        unsigned s = 11;
        pt v[400];
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"loc\": \"2dsphere\"}, "
                  "\"name\": \"loc_2dsphere\"}]}");
        for (int i = 0; i < 400; i++) {
            v[i] = (pt){i, rnd(&s, -180, 180), asin(rnd(&s, -1, 1)) * 180 / M_PI, 0};
            T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": %d, \"loc\": {\"type\": "
                      "\"Point\", \"coordinates\": [%.17g, %.17g]}}]}", i, v[i].x, v[i].y);
        }
        for (int q = 0; q < 6; q++) {
            double cx = rnd(&s, -180, 180), cy = rnd(&s, -89, 89);
            for (int i = 0; i < 400; i++)
                v[i].d = hav(cx, cy, v[i].x, v[i].y) * 6378100.0;
            int ids[400], lim = q % 2 ? 20 : 0;
            bson_t *r = T_OK(&t, "{\"find\": \"c\", \"filter\": {\"loc\": {\"$near\": {\"$geometry\": "
                                 "{\"type\": \"Point\", \"coordinates\": [%.17g, %.17g]}}}}, "
                                 "\"limit\": %d, \"batchSize\": 1000}", cx, cy, lim);
            int n = batch_ids(r, ids, 400);
            for (int i = 1; i < n; i++)
                cr_assert(v[ids[i]].d >= v[ids[i - 1]].d - 1e-6);
            check_order(v, 400, ids, n, lim ? lim : 400, "2dsphere $near");
            bson_destroy(r);
            r = T_OK(&t, "{\"find\": \"c\", \"filter\": {\"loc\": {\"$nearSphere\": {\"$geometry\": "
                         "{\"type\": \"Point\", \"coordinates\": [%.17g, %.17g]}, \"$minDistance\": "
                         "1000000, \"$maxDistance\": 3000000}}}, \"batchSize\": 1000}", cx, cy);
            n = batch_ids(r, ids, 400);
            int in = 0;
            for (int i = 0; i < 400; i++)
                in += v[i].d >= 1000000 && v[i].d <= 3000000;
            cr_assert_eq(n, in, "$minDistance/$maxDistance: %d of %d", n, in);
            bson_destroy(r);
            /* legacy $nearSphere in radians on the same index */
            r = T_OK(&t, "{\"find\": \"c\", \"filter\": {\"loc\": {\"$nearSphere\": [%.17g, %.17g]}}, "
                         "\"limit\": 15}", cx, cy);
            n = batch_ids(r, ids, 400);
            check_order(v, 400, ids, n, 15, "legacy $nearSphere");
            bson_destroy(r);
        }
    }
}

/* A polygon with a hole (a box 0..40 x 0..40 less 10..20 x 10..20) against
 * a scan without the index and against points known to be in or out. */
Test(q_geo, within_polygon_with_hole)
{
    tdb t;
    const char *poly = "{\"type\": \"Polygon\", \"coordinates\": [[[0, 0], [40, 0], [40, 40], "
                       "[0, 40], [0, 0]], [[10, 10], [20, 10], [20, 20], [10, 20], [10, 10]]]}";
    FOR_EACH_ENGINE(t) {
        unsigned s = 3;
        for (int i = 0; i < 300; i++)
            T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": %d, \"loc\": {\"type\": "
                      "\"Point\", \"coordinates\": [%.6f, %.6f]}}]}", i, rnd(&s, -10, 50),
                  rnd(&s, -10, 50));
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": 1000, \"loc\": [15, 15]}, "
                  "{\"_id\": 1001, \"loc\": [30, 30]}, {\"_id\": 1002, \"loc\": [45, 5]}, "
                  "{\"_id\": 1003, \"loc\": {\"type\": \"LineString\", \"coordinates\": [[1, 1], "
                  "[5, 5]]}}, {\"_id\": 1004, \"loc\": {\"type\": \"LineString\", "
                  "\"coordinates\": [[5, 5], [15, 15]]}}]}");
        bson_t *a = T_OK(&t, "{\"find\": \"c\", \"filter\": {\"loc\": {\"$geoWithin\": {\"$geometry\": "
                             "%s}}}, \"sort\": {\"_id\": 1}, \"batchSize\": 1000}", poly);
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"loc\": \"2dsphere\"}, "
                  "\"name\": \"loc_2dsphere\"}]}");
        bson_t *b = T_OK(&t, "{\"find\": \"c\", \"filter\": {\"loc\": {\"$geoWithin\": {\"$geometry\": "
                             "%s}}}, \"sort\": {\"_id\": 1}, \"batchSize\": 1000}", poly);
        int ia[400], ib[400];
        int na = batch_ids(a, ia, 400), nb = batch_ids(b, ib, 400);
        cr_assert_eq(na, nb);
        cr_assert(na > 50 && na < 250, "%d inside", na);
        bool saw[5] = {0};
        for (int i = 0; i < na; i++) {
            cr_assert_eq(ia[i], ib[i]);
            if (ia[i] >= 1000)
                saw[ia[i] - 1000] = true;
        }
        cr_assert(!saw[0] && saw[1] && !saw[2] && saw[3] && !saw[4]);
        bson_destroy(a);
        bson_destroy(b);
        bson_t *x = T_OK(&t, "{\"explain\": {\"find\": \"c\", \"filter\": {\"loc\": {\"$geoWithin\": "
                             "{\"$geometry\": %s}}}}}", poly);
        char *j = t_json(x);
        cr_assert(strstr(j, "\"IXSCAN\"") && strstr(j, "loc_2dsphere"), "%s", j);
        bson_free(j);
        bson_destroy(x);
        /* $geoIntersects: the line crossing into the hole, the points inside */
        x = T_OK(&t, "{\"count\": \"c\", \"query\": {\"_id\": {\"$gte\": 1000}, \"loc\": "
                     "{\"$geoIntersects\": {\"$geometry\": %s}}}}", poly);
        cr_assert_eq(t_i64(x, "n"), 3); /* 1001, 1003, 1004 */
        bson_destroy(x);
    }
}

Test(q_geo, antimeridian_and_poles)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"loc\": \"2dsphere\"}, "
                  "\"name\": \"g\"}]}");
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": ["
                  "{\"_id\": 1, \"loc\": {\"type\": \"Point\", \"coordinates\": [-179.9, 0]}},"
                  "{\"_id\": 2, \"loc\": {\"type\": \"Point\", \"coordinates\": [179.5, 0]}},"
                  "{\"_id\": 3, \"loc\": {\"type\": \"Point\", \"coordinates\": [170, 0]}},"
                  "{\"_id\": 4, \"loc\": {\"type\": \"Point\", \"coordinates\": [0, 89.9]}},"
                  "{\"_id\": 5, \"loc\": {\"type\": \"Point\", \"coordinates\": [120, 89.5]}},"
                  "{\"_id\": 6, \"loc\": {\"type\": \"Point\", \"coordinates\": [0, -90]}}]}");
        int ids[8];
        bson_t *r = T_OK(&t, "{\"find\": \"c\", \"filter\": {\"loc\": {\"$near\": {\"$geometry\": "
                             "{\"type\": \"Point\", \"coordinates\": [179.95, 0]}}}}, \"limit\": 3}");
        cr_assert_eq(batch_ids(r, ids, 8), 3);
        cr_assert(ids[0] == 1 && ids[1] == 2 && ids[2] == 3, "%d %d %d", ids[0], ids[1], ids[2]);
        bson_destroy(r);
        r = T_OK(&t, "{\"find\": \"c\", \"filter\": {\"loc\": {\"$near\": {\"$geometry\": "
                     "{\"type\": \"Point\", \"coordinates\": [45, 90]}}}}, \"limit\": 2}");
        cr_assert_eq(batch_ids(r, ids, 8), 2);
        cr_assert(ids[0] == 4 && ids[1] == 5);
        bson_destroy(r);
        /* a polygon across the antimeridian */
        r = T_OK(&t, "{\"find\": \"c\", \"filter\": {\"loc\": {\"$geoWithin\": {\"$geometry\": "
                     "{\"type\": \"Polygon\", \"coordinates\": [[[175, -5], [-175, -5], [-175, 5], "
                     "[175, 5], [175, -5]]]}}}}, \"sort\": {\"_id\": 1}}");
        cr_assert_eq(batch_ids(r, ids, 8), 2);
        cr_assert(ids[0] == 1 && ids[1] == 2);
        bson_destroy(r);
        /* $centerSphere around the south pole */
        r = T_OK(&t, "{\"count\": \"c\", \"query\": {\"loc\": {\"$geoWithin\": {\"$centerSphere\": "
                     "[[0, -90], 0.01]}}}}");
        cr_assert_eq(t_i64(r, "n"), 1);
        bson_destroy(r);
    }
}

/* The Little Book, Indexes chapter, 2.4: Ex 11-12 (2dsphere), Ex 13-14 (2d). */
Test(q_geo, little_book_examples)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"insert\": \"locations\", \"documents\": [{\"_id\": 1, \"loc\": {\"type\": "
                  "\"Point\", \"coordinates\": [60, 79]}, \"type\": \"house\"}, {\"_id\": 2, "
                  "\"loc\": {\"type\": \"Point\", \"coordinates\": [-60, 79]}, \"type\": \"house\"}]}");
        T_RUN(&t, "{\"createIndexes\": \"locations\", \"indexes\": [{\"key\": {\"loc\": "
                  "\"2dsphere\", \"house\": 1}, \"name\": \"loc_2dsphere_house_1\"}]}");
        bson_t *r = T_OK(&t, "{\"listIndexes\": \"locations\"}");
        char *j = t_json(r);
        cr_assert(strstr(j, "\"2dsphereIndexVersion\" : 3"), "%s", j);
        bson_free(j);
        bson_destroy(r);
        int ids[4];
        r = T_OK(&t, "{\"find\": \"locations\", \"filter\": {\"loc\": {\"$geoWithin\": {\"$geometry\": "
                     "{\"type\": \"Polygon\", \"coordinates\": [[[0, 0], [0, 80], [80, 80], [80, 0], "
                     "[0, 0]]]}}}}}");
        cr_assert_eq(batch_ids(r, ids, 4), 1);
        cr_assert_eq(ids[0], 1);
        bson_destroy(r);

        T_RUN(&t, "{\"insert\": \"houses\", \"documents\": [{\"_id\": 1, \"price_rooms\": [10000, 3], "
                  "\"type\": \"house\"}, {\"_id\": 2, \"price_rooms\": [30000, 4]}, {\"_id\": 3, "
                  "\"price_rooms\": [15000, 8]}]}");
        T_RUN(&t, "{\"createIndexes\": \"houses\", \"indexes\": [{\"key\": {\"price_rooms\": \"2d\"}, "
                  "\"name\": \"price_rooms_2d\", \"min\": 0, \"max\": 200000, \"bits\": 32}]}");
        r = T_OK(&t, "{\"find\": \"houses\", \"filter\": {\"price_rooms\": {\"$geoWithin\": {\"$box\": "
                     "[[2000, 0], [20000, 5]]}}}}");
        cr_assert_eq(batch_ids(r, ids, 4), 1);
        cr_assert_eq(ids[0], 1);
        bson_destroy(r);
        r = T_OK(&t, "{\"explain\": {\"find\": \"houses\", \"filter\": {\"price_rooms\": {\"$geoWithin\": "
                     "{\"$box\": [[2000, 0], [20000, 5]]}}}}}");
        j = t_json(r);
        cr_assert(strstr(j, "\"IXSCAN\"") && strstr(j, "price_rooms_2d") && strstr(j, "BinData(128"),
                  "%s", j);
        bson_free(j);
        bson_destroy(r);
        r = T_OK(&t, "{\"explain\": {\"find\": \"houses\", \"filter\": {\"price_rooms\": {\"$near\": "
                     "[10000, 3]}}}}");
        j = t_json(r);
        cr_assert(strstr(j, "GEO_NEAR_2D"), "%s", j);
        bson_free(j);
        bson_destroy(r);
        /* out of the index's range */
        static const char *const bad2d[][2] = {{"[300000, 1]", "13027"}, {"[\"a\", 1]", "13026"},
                                               {"[1]", "13068"}, {"[]", "13067"}};
        for (int i = 0; i < 4; i++) {
            r = T_OK(&t, "{\"insert\": \"houses\", \"documents\": [{\"price_rooms\": %s}]}",
                     bad2d[i][0]);
            cr_assert_eq(t_i64(r, "writeErrors.0.code"), atoi(bad2d[i][1]), "%s", bad2d[i][0]);
            bson_destroy(r);
        }
    }
}

Test(q_geo, invalid_geojson_refused_on_insert)
{
    static const char *const bad[] = {
        "{\"type\": \"Point\", \"coordinates\": [200, 0]}",
        "{\"type\": \"Point\", \"coordinates\": [0, 91]}",
        "{\"type\": \"Point\", \"coordinates\": [\"x\", 1]}",
        "{\"type\": \"Polygon\", \"coordinates\": [[[0, 0], [1, 0], [1, 1], [0, 1]]]}",
        "{\"type\": \"Polygon\", \"coordinates\": [[[0, 0], [1, 0], [0, 0]]]}",
        "{\"type\": \"Polygon\", \"coordinates\": [[[0, 0], [2, 2], [2, 0], [0, 2], [0, 0]]]}",
        "{\"type\": \"Polygon\", \"coordinates\": [[[0, 0], [2, 0], [1, 1], [2, 0], [2, 2], [0, 0]]]}",
        "{\"type\": \"Polygon\", \"coordinates\": [[[0, 0], [2, 0], [2, 2], [0, 2], [0, 0]], "
        "[[5, 5], [6, 5], [6, 6], [5, 5]]]}",
        "{\"type\": \"LineString\", \"coordinates\": [[0, 0]]}",
        "{\"type\": \"Triangle\", \"coordinates\": [[0, 0]]}",
        "[500, 0]",
    };
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"loc\": \"2dsphere\"}, "
                  "\"name\": \"g\"}]}");
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            bson_t *w = T_OK(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": 1, \"loc\": %s}]}",
                             bad[i]);
            cr_assert_eq(t_i64(w, "writeErrors.0.code"), 16755, "%s", bad[i]);
            cr_assert(strstr(t_str(w, "writeErrors.0.errmsg"), "Can't extract geo keys: { _id: 1"),
                      "%s", t_str(w, "writeErrors.0.errmsg"));
            bson_destroy(w);
        }
        bson_t *r = T_OK(&t, "{\"count\": \"c\"}");
        cr_assert_eq(t_i64(r, "n"), 0);
        bson_destroy(r);
        /* no geo field: not indexed, but stored */
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": 2, \"x\": 1}]}");
        /* $near without a geo index */
        T_RUN(&t, "{\"insert\": \"d\", \"documents\": [{\"loc\": [0, 0]}]}");
        T_ERR(&t, 2, "unable to find index for $geoNear query",
              "{\"find\": \"d\", \"filter\": {\"loc\": {\"$near\": [0, 0]}}}");
        T_ERR(&t, 2, "geoNear must be top-level expr",
              "{\"find\": \"c\", \"filter\": {\"$or\": [{\"loc\": {\"$near\": [0, 0]}}, {\"x\": 1}]}}");
        T_ERR(&t, 16800, NULL, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"a\": \"2d\", "
              "\"b\": \"2dsphere\"}, \"name\": \"two\"}]}");
        T_ERR(&t, 16801, NULL, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"a\": 1, "
              "\"b\": \"2d\"}, \"name\": \"two\"}]}");
        T_ERR(&t, 13028, NULL, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"a\": \"2d\"}, "
              "\"name\": \"a\", \"bits\": 40}]}");
    }
}

/* S2 ids: a point's cell at each level is the parent of its leaf, and the
 * level is where the lowest set bit says; face from the id's top bits. */
Test(q_geo, s2_cell_ids_nest)
{
    unsigned s = 5;
    for (int k = 0; k < 200; k++) {
        q_geo_pt p = {rnd(&s, -180, 180), rnd(&s, -90, 90)};
        q_geo_vec v = q_geo_vec_of(p);
        uint64_t leaf = q_s2_cell_of(v, 30);
        cr_assert(leaf & 1);
        for (int l = 0; l < 30; l++) {
            uint64_t c = q_s2_cell_of(v, l), lsb = c & (~c + 1);
            cr_assert_eq(lsb, 1ull << (2 * (30 - l)));
            cr_assert(leaf >= c - (lsb - 1) && leaf <= c + (lsb - 1), "level %d", l);
        }
    }
    /* the faces of the axes: +x is face 0, +z face 2, -x face 3 */
    cr_assert_eq(q_s2_cell_of((q_geo_vec){1, 0, 0}, 0) >> 61, 0);
    cr_assert_eq(q_s2_cell_of((q_geo_vec){0, 0, 1}, 0) >> 61, 2);
    cr_assert_eq(q_s2_cell_of((q_geo_vec){-1, 0, 0}, 0) >> 61, 3);
}
