/*
 * test_agg_geonear.c -- the $geoNear aggregation stage
 * (query/agg_stage_geonear.c) on every engine: order and distances against
 * brute force over random points (2d flat, 2dsphere in meters, legacy
 * pairs in radians), query / limit / minDistance / maxDistance /
 * distanceMultiplier / includeLocs, the index choice with and without
 * `key`, explain's geo index scan, and the option errors.
 */
#include <math.h>

#include "t_geo.h"
#include "test_q_util.h"

#define R_EARTH 6378100.0


/* Check an aggregate reply's first batch against the points sorted by d
 * (only those `keep` accepts, at most `want`): each _id's distance field
 * `dis` equals its d times mult, in non-decreasing order, and the count is
 * right. */
static void check(const bson_t *r, const pt *v, int np, bool (*keep)(const pt *), int want,
                  double mult, const char *what)
{
    pt *s = malloc(np * sizeof *s);
    int ns = 0;
    for (int i = 0; i < np; i++)
        if (!keep || keep(&v[i]))
            s[ns++] = v[i];
    qsort(s, ns, sizeof *s, cmp_pt);
    int expect = want < ns ? want : ns;
    cr_assert_eq(t_len(r, "cursor.firstBatch"), expect, "%s: %d results, expected %d", what,
                 t_len(r, "cursor.firstBatch"), expect);
    bson_iter_t it, x, f;
    cr_assert(t_find(r, "cursor.firstBatch", &it));
    bson_iter_recurse(&it, &x);
    for (int i = 0; bson_iter_next(&x); i++) {
        int id = -1;
        double dis = -1;
        bson_iter_recurse(&x, &f);
        while (bson_iter_next(&f)) {
            if (!strcmp(bson_iter_key(&f), "_id"))
                id = bson_iter_int32(&f);
            if (!strcmp(bson_iter_key(&f), "dis"))
                dis = bson_iter_double(&f);
        }
        cr_assert(id >= 0 && id < np && (!keep || keep(&v[id])), "%s: id %d", what, id);
        cr_assert(fabs(dis - v[id].d * mult) <= 1e-9 * (1 + v[id].d * mult),
                  "%s: id %d dis %.17g, expected %.17g", what, id, dis, v[id].d * mult);
        cr_assert(fabs(v[id].d - s[i].d) <= 1e-9 * (1 + s[i].d),
                  "%s: result %d at %g, brute force %g", what, i, v[id].d, s[i].d);
    }
    free(s);
}

static bool odd(const pt *p) { return p->id % 2 == 1; }

Test(agg_geonear, flat_2d_matches_brute_force)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        unsigned s = 3;
        pt v[300];
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"loc\": \"2d\"}, "
                  "\"name\": \"loc_2d\"}]}");
        for (int i = 0; i < 300; i++) {
            v[i] = (pt){i, rnd(&s, -180, 180), rnd(&s, -90, 90), 0};
            T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": %d, \"loc\": [%.17g, %.17g]}]}",
                  i, v[i].x, v[i].y);
        }
        for (int q = 0; q < 5; q++) {
            double cx = rnd(&s, -170, 170), cy = rnd(&s, -80, 80);
            for (int i = 0; i < 300; i++)
                v[i].d = hypot(v[i].x - cx, v[i].y - cy);
            /* the default limit is 100 */
            bson_t *r = T_OK(&t, "{\"aggregate\": \"c\", \"pipeline\": [{\"$geoNear\": {\"near\": "
                                 "[%.17g, %.17g], \"distanceField\": \"dis\"}}], \"cursor\": "
                                 "{\"batchSize\": 1000}}", cx, cy);
            check(r, v, 300, NULL, 100, 1, "2d default limit");
            bson_destroy(r);
            r = T_OK(&t, "{\"aggregate\": \"c\", \"pipeline\": [{\"$geoNear\": {\"near\": "
                         "[%.17g, %.17g], \"distanceField\": \"dis\", \"query\": {\"_id\": "
                         "{\"$mod\": [2, 1]}}, \"num\": 400, \"distanceMultiplier\": 3}}], "
                         "\"cursor\": {\"batchSize\": 1000}}", cx, cy);
            check(r, v, 300, odd, 400, 3, "2d query + multiplier");
            bson_destroy(r);
            /* a following $limit lowers the limit */
            r = T_OK(&t, "{\"aggregate\": \"c\", \"pipeline\": [{\"$geoNear\": {\"near\": "
                         "[%.17g, %.17g], \"distanceField\": \"dis\", \"maxDistance\": 40, "
                         "\"limit\": 1000}}, {\"$limit\": 7}], \"cursor\": {}}", cx, cy);
            int within = 0;
            for (int i = 0; i < 300; i++)
                within += v[i].d <= 40;
            check(r, v, 300, NULL, within < 7 ? within : 7, 1, "2d maxDistance + $limit");
            bson_destroy(r);
        }
    }
}

static double g_min, g_max;
static bool in_ring(const pt *p) { return p->d >= g_min && p->d <= g_max; }

Test(agg_geonear, sphere_matches_brute_force)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        unsigned s = 17;
        pt v[300];
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"loc\": \"2dsphere\"}, "
                  "\"name\": \"loc_2dsphere\"}]}");
        for (int i = 0; i < 300; i++) {
            v[i] = (pt){i, rnd(&s, -180, 180), asin(rnd(&s, -1, 1)) * 180 / M_PI, 0};
            T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": %d, \"loc\": {\"type\": "
                      "\"Point\", \"coordinates\": [%.17g, %.17g]}}]}", i, v[i].x, v[i].y);
        }
        for (int q = 0; q < 4; q++) {
            double cx = rnd(&s, -180, 180), cy = rnd(&s, -89, 89);
            for (int i = 0; i < 300; i++)
                v[i].d = hav(cx, cy, v[i].x, v[i].y) * R_EARTH;
            bson_t *r = T_OK(&t, "{\"aggregate\": \"c\", \"pipeline\": [{\"$geoNear\": {\"near\": "
                                 "{\"type\": \"Point\", \"coordinates\": [%.17g, %.17g]}, "
                                 "\"distanceField\": \"dis\", \"spherical\": true, \"limit\": 25}}],"
                                 " \"cursor\": {}}", cx, cy);
            check(r, v, 300, NULL, 25, 1, "2dsphere meters");
            bson_destroy(r);
            g_min = 1e6, g_max = 4e6;
            r = T_OK(&t, "{\"aggregate\": \"c\", \"pipeline\": [{\"$geoNear\": {\"near\": "
                         "{\"type\": \"Point\", \"coordinates\": [%.17g, %.17g]}, "
                         "\"distanceField\": \"dis\", \"spherical\": true, \"minDistance\": 1e6, "
                         "\"maxDistance\": 4e6, \"limit\": 1000}}], \"cursor\": "
                         "{\"batchSize\": 1000}}", cx, cy);
            check(r, v, 300, in_ring, 1000, 1, "2dsphere min/maxDistance");
            bson_destroy(r);
            /* a legacy pair with spherical: radians; times the radius: meters */
            for (int i = 0; i < 300; i++)
                v[i].d /= R_EARTH;
            r = T_OK(&t, "{\"aggregate\": \"c\", \"pipeline\": [{\"$geoNear\": {\"near\": "
                         "[%.17g, %.17g], \"distanceField\": \"dis\", \"spherical\": true, "
                         "\"limit\": 12, \"distanceMultiplier\": 6378100}}], \"cursor\": {}}",
                     cx, cy);
            check(r, v, 300, NULL, 12, R_EARTH, "legacy spherical");
            bson_destroy(r);
        }
    }
}

Test(agg_geonear, include_locs_and_nested_fields)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"locs\": \"2d\"}, "
                  "\"name\": \"locs_2d\"}]}");
        /* several locations: the document comes once, with its nearest one */
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": 1, \"locs\": [[10, 0], [3, 4]]}, "
                  "{\"_id\": 2, \"locs\": [[0, 2]]}, {\"_id\": 3, \"locs\": {\"x\": 1, \"y\": 1}, "
                  "\"d\": 5}]}");
        bson_t *r = T_OK(&t, "{\"aggregate\": \"c\", \"pipeline\": [{\"$geoNear\": {\"near\": "
                             "[0, 0], \"distanceField\": \"d.dist\", \"includeLocs\": \"d.loc\", "
                             "\"uniqueDocs\": true}}], \"cursor\": {}}");
        char *j = t_json(r);
        cr_assert(strstr(j, "{ \"_id\" : 3, \"locs\" : { \"x\" : 1, \"y\" : 1 }, \"d\" : "
                            "{ \"dist\" : 1.4142135623730951455, \"loc\" : { \"x\" : 1, \"y\" : 1 "
                            "} } }, { \"_id\" : 2, \"locs\" : [ [ 0, 2 ] ], \"d\" : { \"dist\" "
                            ": 2.0, \"loc\" : [ 0, 2 ] } }, { \"_id\" : 1, \"locs\" : [ [ 10, 0 "
                            "], [ 3, 4 ] ], \"d\" : { \"dist\" : 5.0, \"loc\" : [ 3, 4 ] } }"),
                  "%s", j);
        bson_free(j);
        bson_destroy(r);
        /* limit 0: nothing */
        r = T_OK(&t, "{\"aggregate\": \"c\", \"pipeline\": [{\"$geoNear\": {\"near\": [0, 0], "
                     "\"distanceField\": \"x\", \"limit\": 0}}], \"cursor\": {}}");
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 0);
        bson_destroy(r);
        /* a missing collection: nothing */
        r = T_OK(&t, "{\"aggregate\": \"nope\", \"pipeline\": [{\"$geoNear\": {\"near\": [0, 0], "
                     "\"distanceField\": \"x\"}}], \"cursor\": {}}");
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 0);
        bson_destroy(r);
    }
}

/* The index: `key`, else the only 2d index, else the only 2dsphere index. */
Test(agg_geonear, index_choice)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": 1, \"a\": {\"type\": \"Point\", "
                  "\"coordinates\": [0, 0]}, \"b\": {\"type\": \"Point\", \"coordinates\": [50, "
                  "50]}}, {\"_id\": 2, \"a\": {\"type\": \"Point\", \"coordinates\": [50, 50]}, "
                  "\"b\": {\"type\": \"Point\", \"coordinates\": [0, 0]}}]}");
        T_ERR(&t, 27, "$geoNear requires a 2d or 2dsphere index, but none were found",
              "{\"aggregate\": \"c\", \"pipeline\": [{\"$geoNear\": {\"near\": [0, 0], "
              "\"distanceField\": \"d\", \"spherical\": true}}], \"cursor\": {}}");
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"a\": \"2dsphere\"}, "
                  "\"name\": \"a_s\"}, {\"key\": {\"b\": \"2dsphere\"}, \"name\": \"b_s\"}]}");
        T_ERR(&t, 27, "There is more than one 2dsphere index on test.c; unsure which to use",
              "{\"aggregate\": \"c\", \"pipeline\": [{\"$geoNear\": {\"near\": [0, 0], "
              "\"distanceField\": \"d\", \"spherical\": true}}], \"cursor\": {}}");
        const char *keys[2] = {"a", "b"};
        for (int k = 0; k < 2; k++) {
            bson_t *r = T_OK(&t, "{\"aggregate\": \"c\", \"pipeline\": [{\"$geoNear\": {\"near\": "
                                 "{\"type\": \"Point\", \"coordinates\": [0, 0]}, \"distanceField\": "
                                 "\"d\", \"spherical\": true, \"key\": \"%s\"}}], \"cursor\": {}}",
                             keys[k]);
            cr_assert_eq(t_i64(r, "cursor.firstBatch.0._id"), k + 1);
            cr_assert_eq(t_dbl(r, "cursor.firstBatch.0.d"), 0.0);
            bson_destroy(r);
            r = T_OK(&t, "{\"aggregate\": \"c\", \"pipeline\": [{\"$geoNear\": {\"near\": "
                         "[0, 0], \"distanceField\": \"d\", \"spherical\": true, \"key\": \"%s\"}}],"
                         " \"explain\": true}", keys[k]);
            cr_assert_str_eq(t_str(r, "stages.0.$geoNear.queryPlanner.winningPlan.stage"),
                             "GEO_NEAR_2DSPHERE");
            cr_assert_str_eq(t_str(r, "stages.0.$geoNear.queryPlanner.winningPlan.indexName"),
                             k ? "b_s" : "a_s");
            bson_destroy(r);
        }
        T_ERR(&t, 27, "no 2d or 2dsphere index on field 'z'",
              "{\"aggregate\": \"c\", \"pipeline\": [{\"$geoNear\": {\"near\": [0, 0], "
              "\"distanceField\": \"d\", \"spherical\": true, \"key\": \"z\"}}], \"cursor\": {}}");
        /* a 2d index comes before the 2dsphere ones */
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": 3, \"p\": [1, 1]}]}");
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"p\": \"2d\"}, "
                  "\"name\": \"p_2d\"}]}");
        bson_t *r = T_OK(&t, "{\"aggregate\": \"c\", \"pipeline\": [{\"$geoNear\": {\"near\": "
                             "[1, 2], \"distanceField\": \"d\"}}], \"cursor\": {}}");
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 1);
        cr_assert_eq(t_dbl(r, "cursor.firstBatch.0.d"), 1.0);
        bson_destroy(r);
        r = T_OK(&t, "{\"aggregate\": \"c\", \"pipeline\": [{\"$geoNear\": {\"near\": [1, 2], "
                     "\"distanceField\": \"d\"}}, {\"$project\": {\"d\": 1}}], \"explain\": true}");
        cr_assert_str_eq(t_str(r, "stages.0.$geoNear.queryPlanner.winningPlan.stage"),
                         "GEO_NEAR_2D");
        cr_assert(t_has(r, "stages.1.$project"));
        bson_destroy(r);
        T_ERR(&t, 17298, NULL, "{\"aggregate\": \"c\", \"pipeline\": [{\"$geoNear\": {\"near\": "
              "[1, 2], \"distanceField\": \"d\", \"minDistance\": 1}}], \"cursor\": {}}");
    }
}

Test(agg_geonear, option_errors)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"loc\": \"2dsphere\"}, "
                  "\"name\": \"s\"}]}");
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": 1, \"loc\": [1, 1]}]}");
        static const struct {
            int code;
            const char *stage;
        } cases[] = {
            {10065, "5"},
            {16605, "{\"distanceField\": \"d\"}"},
            {16605, "{\"near\": 5, \"distanceField\": \"d\"}"},
            {17304, "{\"near\": [\"a\", 1], \"distanceField\": \"d\"}"},
            {17304, "{\"near\": {\"type\": \"LineString\", \"coordinates\": [[0, 0], [1, 1]]}, "
                    "\"distanceField\": \"d\"}"},
            {16606, "{\"near\": [0, 0]}"},
            {16606, "{\"near\": [0, 0], \"distanceField\": 1}"},
            {16410, "{\"near\": [0, 0], \"distanceField\": \"$d\"}"},
            {15998, "{\"near\": [0, 0], \"distanceField\": \"a..b\"}"},
            {16607, "{\"near\": [0, 0], \"distanceField\": \"d\", \"includeLocs\": true}"},
            {17303, "{\"near\": [0, 0], \"distanceField\": \"d\", \"limit\": \"x\"}"},
            {17302, "{\"near\": [0, 0], \"distanceField\": \"d\", \"num\": -1}"},
            {17299, "{\"near\": [0, 0], \"distanceField\": \"d\", \"maxDistance\": \"x\"}"},
            {17300, "{\"near\": [0, 0], \"distanceField\": \"d\", \"minDistance\": null}"},
            {17296, "{\"near\": [0, 0], \"distanceField\": \"d\", \"distanceMultiplier\": \"x\"}"},
            {17297, "{\"near\": [0, 0], \"distanceField\": \"d\", \"distanceMultiplier\": -1}"},
            {14, "{\"near\": [0, 0], \"distanceField\": \"d\", \"query\": 1}"},
            {14, "{\"near\": [0, 0], \"distanceField\": \"d\", \"key\": 1}"},
            {2, "{\"near\": [0, 0], \"distanceField\": \"d\", \"key\": \"\"}"},
            {40227, "{\"near\": [0, 0], \"distanceField\": \"d\", \"collation\": {}}"},
            {2, "{\"near\": [0, 0], \"distanceField\": \"d\", \"bogus\": 1}"},
            {17301, "{\"near\": [0, 0], \"distanceField\": \"d\"}"},
            {2, "{\"near\": [0, 0], \"distanceField\": \"d\", \"spherical\": true, "
                "\"maxDistance\": -1}"},
        };
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            T_ERR(&t, cases[i].code, NULL, "{\"aggregate\": \"c\", \"pipeline\": [{\"$geoNear\": "
                  "%s}], \"cursor\": {}}", cases[i].stage);
        T_ERR(&t, 40602, "$geoNear is only valid as the first stage",
              "{\"aggregate\": \"c\", \"pipeline\": [{\"$match\": {}}, {\"$geoNear\": {\"near\": "
              "[0, 0], \"distanceField\": \"d\", \"spherical\": true}}], \"cursor\": {}}");
        T_ERR(&t, 40600, NULL, "{\"aggregate\": \"c\", \"pipeline\": [{\"$facet\": {\"a\": "
              "[{\"$geoNear\": {\"near\": [0, 0], \"distanceField\": \"d\", \"spherical\": "
              "true}}]}}], \"cursor\": {}}");
    }
}
