/*
 * geo.c -- $near query rates on N random points (default 1,000,000) with a
 * geo index, against a collection scan answering the same question.
 *
 * Each document holds one random location twice: a legacy pair p: [lng,
 * lat] under a 2d index and a GeoJSON point g under a 2dsphere index.
 * Per engine it times:
 *   near2d      find {p: {$near: [x, y]}} limit 10 (GEO_NEAR_2D)
 *   nearSphere  find {g: {$near: {$geometry: point}}} limit 10
 *               (GEO_NEAR_2DSPHERE)
 *   geoNear     aggregate [{$geoNear: {near: point, distanceField, spherical,
 *               key: "g", limit: 10}}] (the pipeline stage, same index)
 *   scan        find {g: {$geoWithin: {$centerSphere: [[x, y], r]}}} with
 *               hint $natural: a collection scan testing every document,
 *               r the distance of the tenth nearest (so it returns the same
 *               documents, unsorted)
 * and prints one line per query kind:
 *     geo KIND ENGINE n=N queries=Q qps=X ms_per_query=X
 *
 *   build/bench/geo [--quick] [--engine mmapv1|btree] [--docs N] [--queries N]
 *                   [--dir DIR]
 *
 * --quick: 50,000 documents and fewer queries.  --dir: where the
 * temporary database goes (default /tmp; about 1 GB per engine at the
 * default 1,000,000 documents); it is removed at the end.
 */
#define BENCH_NAME "geo"
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

static double rnd(unsigned long long *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*s >> 11) / 9007199254740992.0;
}

static void load(md_db *db, long n)
{
    unsigned long long s = 42;
    for (long i = 0; i < n;) {
        bson_t *cmd = bson_new(), docs;
        BSON_APPEND_UTF8(cmd, "insert", "pts");
        BSON_APPEND_ARRAY_BEGIN(cmd, "documents", &docs);
        for (int k = 0; k < 1000 && i < n; k++, i++) {
            char key[16];
            double lng = rnd(&s) * 360 - 180, lat = asin(rnd(&s) * 2 - 1) * 180 / M_PI;
            bson_t d, p, g, c;
            snprintf(key, sizeof key, "%d", k);
            bson_append_document_begin(&docs, key, -1, &d);
            BSON_APPEND_INT64(&d, "_id", i);
            BSON_APPEND_ARRAY_BEGIN(&d, "p", &p);
            BSON_APPEND_DOUBLE(&p, "0", lng);
            BSON_APPEND_DOUBLE(&p, "1", lat);
            bson_append_array_end(&d, &p);
            BSON_APPEND_DOCUMENT_BEGIN(&d, "g", &g);
            BSON_APPEND_UTF8(&g, "type", "Point");
            BSON_APPEND_ARRAY_BEGIN(&g, "coordinates", &c);
            BSON_APPEND_DOUBLE(&c, "0", lng);
            BSON_APPEND_DOUBLE(&c, "1", lat);
            bson_append_array_end(&g, &c);
            bson_append_document_end(&d, &g);
            bson_append_document_end(&docs, &d);
        }
        bson_append_array_end(cmd, &docs);
        run(db, cmd, "insert", NULL);
    }
}

/* The number of documents in a find reply's first batch, and the last
 * one's g coordinates. */
static int batch(const bson_t *r, double *lng, double *lat)
{
    bson_iter_t it, x, c;
    int n = 0;
    if (!bson_iter_init(&it, r) || !bson_iter_find_descendant(&it, "cursor.firstBatch", &it))
        return 0;
    bson_iter_recurse(&it, &x);
    while (bson_iter_next(&x)) {
        n++;
        bson_iter_recurse(&x, &c);
        if (lng && bson_iter_find_descendant(&c, "g.coordinates.0", &c))
            *lng = bson_iter_as_double(&c);
        bson_iter_recurse(&x, &c);
        if (lat && bson_iter_find_descendant(&c, "g.coordinates.1", &c))
            *lat = bson_iter_as_double(&c);
    }
    return n;
}

static double dist(double lng1, double lat1, double lng2, double lat2)
{
    double r = M_PI / 180, dl = (lat2 - lat1) * r, dg = (lng2 - lng1) * r;
    double a = sin(dl / 2) * sin(dl / 2) + cos(lat1 * r) * cos(lat2 * r) * sin(dg / 2) * sin(dg / 2);
    return 2 * atan2(sqrt(a), sqrt(1 - a));
}

static void report(const char *kind, const char *engine, long n, int q, double secs)
{
    printf("geo %s %s n=%ld queries=%d qps=%.1f ms_per_query=%.3f\n", kind, engine, n, q,
           q / secs, secs * 1000 / q);
    fflush(stdout);
}

static void bench_engine(const char *base, const char *engine, long n, int queries, int scans)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/md_bench_geo_XXXXXX", base);
    md_db *db;
    md_error err;
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        exit(1);
    }
    bson_t *o = BCON_NEW("engine", BCON_UTF8(engine));
    if (md_db_open(dir, o, &db, &err))
        die("open", &err);
    bson_destroy(o);
    run(db, BCON_NEW("createIndexes", "pts", "indexes", "[", "{", "key", "{", "p", "2d", "}",
                     "name", "p_2d", "}", "{", "key", "{", "g", "2dsphere", "}", "name",
                     "g_2dsphere", "}", "]"),
        "createIndexes", NULL);
    double t0 = now();
    load(db, n);
    printf("geo load %s n=%ld secs=%.1f\n", engine, n, now() - t0);
    unsigned long long s = 7;
    double qx[1000], qy[1000], far[1000];
    int total = 0;
    for (int i = 0; i < queries; i++)
        qx[i] = rnd(&s) * 360 - 180, qy[i] = asin(rnd(&s) * 1.9 - 0.95) * 180 / M_PI;
    t0 = now();
    for (int i = 0; i < queries; i++) {
        bson_t r;
        run(db, BCON_NEW("find", "pts", "filter", "{", "p", "{", "$near", "[", BCON_DOUBLE(qx[i]),
                         BCON_DOUBLE(qy[i]), "]", "}", "}", "limit", BCON_INT32(10)),
            "near2d", &r);
        total += batch(&r, NULL, NULL);
        bson_destroy(&r);
    }
    report("near2d", engine, n, queries, now() - t0);
    t0 = now();
    for (int i = 0; i < queries; i++) {
        bson_t r;
        double lng = qx[i], lat = qy[i];
        run(db, BCON_NEW("find", "pts", "filter", "{", "g", "{", "$near", "{", "$geometry", "{",
                         "type", "Point", "coordinates", "[", BCON_DOUBLE(qx[i]),
                         BCON_DOUBLE(qy[i]), "]", "}", "}", "}", "}", "limit", BCON_INT32(10)),
            "nearSphere", &r);
        total += batch(&r, &lng, &lat);
        far[i] = dist(qx[i], qy[i], lng, lat) * 1.000001;
        bson_destroy(&r);
    }
    report("near2dsphere", engine, n, queries, now() - t0);
    t0 = now();
    for (int i = 0; i < queries; i++) {
        bson_t r;
        run(db, BCON_NEW("aggregate", "pts", "pipeline", "[", "{", "$geoNear", "{", "near", "{",
                         "type", "Point", "coordinates", "[", BCON_DOUBLE(qx[i]),
                         BCON_DOUBLE(qy[i]), "]", "}", "distanceField", "d", "spherical",
                         BCON_BOOL(true), "key", "g", "limit", BCON_INT32(10), "}", "}", "]",
                         "cursor", "{", "}"),
            "geoNear", &r);
        total += batch(&r, NULL, NULL);
        bson_destroy(&r);
    }
    report("geoNear", engine, n, queries, now() - t0);
    t0 = now();
    int same = 0;
    for (int i = 0; i < scans; i++) {
        bson_t r;
        run(db, BCON_NEW("find", "pts", "filter", "{", "g", "{", "$geoWithin", "{",
                         "$centerSphere", "[", "[", BCON_DOUBLE(qx[i]), BCON_DOUBLE(qy[i]), "]",
                         BCON_DOUBLE(far[i]), "]", "}", "}", "}", "hint", "{", "$natural",
                         BCON_INT32(1), "}", "batchSize", BCON_INT32(1000)),
            "scan", &r);
        same += batch(&r, NULL, NULL) == 10;
        bson_destroy(&r);
    }
    report("collscan", engine, n, scans, now() - t0);
    printf("geo check %s results=%d scans_with_the_same_10=%d/%d\n", engine, total, same, scans);
    md_db_close(db);
    char rm[1100];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    if (system(rm) != 0)
        fprintf(stderr, "geo: could not remove %s\n", dir);
}

int main(int argc, char **argv)
{
    long n = 1000000;
    int queries = 1000, scans = 5;
    const char *engine = NULL, *base = "/tmp";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            n = 50000, queries = 200, scans = 5;
        else if (!strcmp(argv[i], "--engine") && i + 1 < argc)
            engine = argv[++i];
        else if (!strcmp(argv[i], "--docs") && i + 1 < argc)
            n = atol(argv[++i]);
        else if (!strcmp(argv[i], "--queries") && i + 1 < argc)
            queries = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
            base = argv[++i];
        else {
            fprintf(stderr, "usage: geo [--quick] [--engine mmapv1|btree] [--docs N] "
                            "[--queries N] [--dir DIR]\n");
            return 2;
        }
    }
    queries = queries < 1 ? 1 : queries > 1000 ? 1000 : queries;
    scans = scans > queries ? queries : scans;
    if (engine)
        bench_engine(base, engine, n, queries, scans);
    else {
        bench_engine(base, "btree", n, queries, scans);
        bench_engine(base, "mmapv1", n, queries, scans);
    }
    return 0;
}
