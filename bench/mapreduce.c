/*
 * mapreduce.c -- mapReduce on the embedded JavaScript engine against the
 * aggregation pipeline's $group, on the same documents.
 *
 * Inserts N documents {_id, cust: "c<i % K>", amount: i % 100}, then:
 *
 *   scan        a count whose filter matches nothing: the cost of reading
 *               every document, with no JavaScript
 *   mapreduce   map emit(this.cust, this.amount), reduce Array.sum, out
 *               inline: one map call per document, re-reduce per batch
 *   group       {$group: {_id: "$cust", value: {$sum: "$amount"}}} through
 *               the aggregate command (reported as unavailable when this
 *               build has no aggregate command)
 *
 * One line per workload, `name docs seconds docs_per_s`, and the JavaScript
 * cost per emitted document: (mapreduce - scan) / emits, in microseconds.
 * Both answers are checked to agree.
 *
 *   build/bench/mapreduce [N] [engine] [K]     (1000000 btree 1000)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "minidoc.h"

#define BENCH_NAME "mapreduce"
#include "bench.h"

static void load(md_db *db, int n, int k)
{
    for (int b = 0; b < n; b += 1000) {
        bson_t *cmd = bson_new(), arr;
        BSON_APPEND_UTF8(cmd, "insert", "c");
        bson_append_array_begin(cmd, "documents", -1, &arr);
        for (int i = b; i < b + 1000 && i < n; i++) {
            char key[16], cust[24];
            bson_t d;
            snprintf(key, sizeof key, "%d", i - b);
            snprintf(cust, sizeof cust, "c%d", i % k);
            bson_append_document_begin(&arr, key, -1, &d);
            BSON_APPEND_INT32(&d, "_id", i);
            BSON_APPEND_UTF8(&d, "cust", cust);
            BSON_APPEND_INT32(&d, "amount", i % 100);
            bson_append_document_end(&arr, &d);
        }
        bson_append_array_end(cmd, &arr);
        run(db, cmd, "insert", NULL);
    }
}

/* The sum of the "value" fields of an array of {_id, value} documents. */
static double sum_values(const bson_t *reply, const char *path, int *n)
{
    bson_iter_t it, sub, f;
    double s = 0;
    *n = 0;
    if (!bson_iter_init(&it, reply) || !bson_iter_find_descendant(&it, path, &it) ||
        !bson_iter_recurse(&it, &sub))
        return -1;
    while (bson_iter_next(&sub))
        if (bson_iter_recurse(&sub, &f) && bson_iter_find(&f, "value")) {
            s += bson_iter_as_double(&f);
            (*n)++;
        }
    return s;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1000000;
    const char *engine = argc > 2 ? argv[2] : "btree";
    int k = argc > 3 ? atoi(argv[3]) : 1000;
    char dir[] = "/tmp/minidoc-bench-XXXXXX";
    if (n <= 0 || k <= 0 || !mkdtemp(dir)) {
        fprintf(stderr, "usage: mapreduce [N>0] [engine] [K>0]\n");
        return 2;
    }
    md_db *db;
    md_error err;
    bson_t *opts = BCON_NEW("engine", BCON_UTF8(engine));
    if (md_db_open(dir, opts, &db, &err) != 0)
        die("open", &err);
    bson_destroy(opts);
    printf("# engine=%s documents=%d keys=%d\n", engine, n, k);
    double t0 = now();
    load(db, n, k);
    printf("insert %d %.3f %.0f\n", n, now() - t0, n / (now() - t0));

    bson_t reply;
    t0 = now();
    run(db, BCON_NEW("count", "c", "query", "{", "amount", "{", "$lt", BCON_INT32(-1), "}", "}"),
        "count", NULL);
    double scan = now() - t0;
    printf("scan %d %.3f %.0f\n", n, scan, n / scan);

    t0 = now();
    run(db, BCON_NEW("mapReduce", "c", "map", BCON_UTF8("function () { emit(this.cust, this.amount); }"),
                     "reduce", BCON_UTF8("function (k, vs) { return Array.sum(vs); }"),
                     "out", "{", "inline", BCON_INT32(1), "}"),
        "mapReduce", &reply);
    double mr = now() - t0;
    int nk;
    double total = sum_values(&reply, "results", &nk);
    bson_iter_t it;
    int64_t emits = bson_iter_init(&it, &reply) &&
                            bson_iter_find_descendant(&it, "counts.emit", &it)
                        ? bson_iter_as_int64(&it)
                        : n;
    printf("mapreduce %d %.3f %.0f keys=%d emits=%lld\n", n, mr, n / mr, nk, (long long)emits);
    printf("js_cost_per_emit_us %.2f\n", (mr - scan) / (double)emits * 1e6);
    bson_destroy(&reply);

    t0 = now();
    bson_t *agg = BCON_NEW("aggregate", "c", "pipeline", "[", "{", "$group", "{", "_id",
                           BCON_UTF8("$cust"), "value", "{", "$sum", BCON_UTF8("$amount"), "}",
                           "}", "}", "]", "cursor", "{", "batchSize", BCON_INT32(1000000), "}");
    int rc = md_db_command(db, agg, &reply, &err);
    double g = now() - t0;
    bson_destroy(agg);
    if (rc != 0) {
        printf("group unavailable: %s (code %d)\n", err.message, err.code);
    } else {
        int ng;
        double gt = sum_values(&reply, "cursor.firstBatch", &ng);
        printf("group %d %.3f %.0f keys=%d\n", n, g, n / g, ng);
        printf("mapreduce_over_group %.2f\n", mr / g);
        if (ng != nk || gt != total) {
            fprintf(stderr, "mapreduce: $group and mapReduce disagree: %d keys %.0f, %d keys %.0f\n",
                    ng, gt, nk, total);
            return 1;
        }
    }
    bson_destroy(&reply);
    md_db_close(db);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        return 1;
    return 0;
}
