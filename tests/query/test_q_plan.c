/*
 * test_q_plan.c -- the query planner on every engine: index bounds per
 * operator, compound prefixes, the sort an index provides (forwards and
 * backwards), hints, explain's shape, and a differential test: thousands
 * of random filters run with each index forced by hint and with
 * {$natural: 1} must return the same documents.
 */
#include <time.h>

#include "q_int.h"
#include "test_q_util.h"

/* ---- differential ------------------------------------------------------------------ */

static unsigned t_rand(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return (*s >> 16) & 0x7fff;
}

/* A random scalar as JSON. */
static void rand_scalar(unsigned *s, char *out, size_t n)
{
    static const char *const strs[] = {"\"a\"", "\"ab\"", "\"abc\"", "\"b\"", "\"ba\"", "\"\""};
    switch (t_rand(s) % 6) {
    case 0: case 1: case 2:
        snprintf(out, n, "%d", (int)(t_rand(s) % 11) - 5);
        break;
    case 3:
        snprintf(out, n, "%d.5", (int)(t_rand(s) % 11) - 5);
        break;
    case 4:
        snprintf(out, n, "%s", strs[t_rand(s) % 6]);
        break;
    default:
        snprintf(out, n, t_rand(s) % 2 ? "null" : "true");
    }
}

/* A random value: a scalar, or (if `arrays`) sometimes an array of them. */
static void rand_value(unsigned *s, bool arrays, char *out, size_t n)
{
    char a[64], b[64];
    if (arrays && t_rand(s) % 4 == 0) {
        rand_scalar(s, a, sizeof a);
        rand_scalar(s, b, sizeof b);
        int k = t_rand(s) % 3;
        snprintf(out, n, k == 0 ? "[]" : k == 1 ? "[%s]" : "[%s, %s]", a, b);
        return;
    }
    rand_scalar(s, out, n);
}

static void insert_random_docs(tdb *t, unsigned *s, int n)
{
    for (int i = 0; i < n; i++) {
        char doc[512], v[128];
        int len = snprintf(doc, sizeof doc, "{\"_id\": %d", i);
        static const char *const f[] = {"a", "b", "c"};
        for (int j = 0; j < 3; j++) {
            if (t_rand(s) % 5 == 0)
                continue; /* missing */
            rand_value(s, j == 0, v, sizeof v);
            len += snprintf(doc + len, sizeof doc - (size_t)len, ", \"%s\": %s", f[j], v);
        }
        if (t_rand(s) % 3) {
            rand_scalar(s, v, sizeof v);
            len += snprintf(doc + len, sizeof doc - (size_t)len,
                            t_rand(s) % 2 ? ", \"d\": {\"x\": %s}" : ", \"d\": [{\"x\": %s}, {\"x\": 3}]",
                            v);
        }
        snprintf(doc + len, sizeof doc - (size_t)len, "}");
        T_RUN(t, "{\"insert\": \"c\", \"documents\": [%s]}", doc);
    }
}

/* The random seed: `base`, or Q_PLAN_SEED from the environment. */
static unsigned t_seed(unsigned base)
{
    const char *e = getenv("Q_PLAN_SEED");
    return e ? (unsigned)strtoul(e, NULL, 10) : base;
}

/* One random predicate on a random field. */
static void rand_pred(unsigned *s, char *out, size_t n)
{
    static const char *const f[] = {"a", "b", "c", "d.x"};
    static const char *const cmp[] = {"$gt", "$gte", "$lt", "$lte"};
    const char *fld = f[t_rand(s) % 4];
    char v[64], w[64];
    rand_scalar(s, v, sizeof v);
    rand_scalar(s, w, sizeof w);
    switch (t_rand(s) % 13) {
    case 0: case 1: snprintf(out, n, "{\"%s\": %s}", fld, v); break;
    case 2: snprintf(out, n, "{\"%s\": {\"%s\": %s}}", fld, cmp[t_rand(s) % 4], v); break;
    case 3:
        snprintf(out, n, "{\"%s\": {\"%s\": %s, \"%s\": %s}}", fld, cmp[t_rand(s) % 2], v,
                 cmp[2 + t_rand(s) % 2], w);
        break;
    case 4: snprintf(out, n, "{\"%s\": {\"$in\": [%s, %s]}}", fld, v, w); break;
    case 5: snprintf(out, n, "{\"%s\": {\"$ne\": %s}}", fld, v); break;
    case 6: snprintf(out, n, "{\"%s\": {\"$nin\": [%s, %s]}}", fld, v, w); break;
    case 7: snprintf(out, n, "{\"%s\": null}", fld); break;
    case 8: snprintf(out, n, "{\"%s\": {\"$exists\": %s}}", fld, t_rand(s) % 2 ? "true" : "false"); break;
    case 9: snprintf(out, n, "{\"%s\": {\"$regex\": \"^%s\"}}", fld, t_rand(s) % 2 ? "a" : "ab"); break;
    case 10:
        snprintf(out, n, "{\"%s\": {\"$elemMatch\": {\"$gte\": %s, \"$lt\": %s}}}", fld, v, w);
        break;
    case 11: snprintf(out, n, "{\"%s\": [%s]}", fld, v); break;
    default:
        snprintf(out, n, "{\"d\": {\"$elemMatch\": {\"x\": {\"$gte\": %s, \"$lt\": %s}%s}}}", v,
                 w, t_rand(s) % 2 ? ", \"y\": {\"$exists\": false}" : "");
    }
}

static void rand_filter(unsigned *s, char *out, size_t n)
{
    char p[256], q[256];
    rand_pred(s, p, sizeof p);
    if (t_rand(s) % 2) {
        snprintf(out, n, "%s", p);
        return;
    }
    rand_pred(s, q, sizeof q);
    snprintf(out, n, "{\"$and\": [%s, %s]}", p, q);
}

/* The sorted _ids a find returns (at most 512); their count. */
static int find_ids(tdb *t, const char *filter, const char *hint, int *ids)
{
    int rc, n = 0;
    bson_t *r = t_cmd(t, &rc, "{\"find\": \"c\", \"filter\": %s, \"hint\": %s, \"batchSize\": 10000}",
                      filter, hint);
    char *j = t_json(r);
    cr_assert_eq(rc, 0, "[%s] %s hint %s: %s", t->engine, filter, hint, j);
    bson_free(j);
    bson_iter_t it, arr;
    cr_assert(t_find(r, "cursor.firstBatch", &it) && bson_iter_recurse(&it, &arr));
    while (bson_iter_next(&arr) && n < 512) {
        bson_iter_t d;
        bson_iter_recurse(&arr, &d);
        bson_iter_find(&d, "_id");
        int v = bson_iter_int32(&d), k = n++;
        while (k > 0 && ids[k - 1] > v) /* insertion sort */
            ids[k] = ids[k - 1], k--;
        ids[k] = v;
    }
    bson_destroy(r);
    return n;
}

static const char *const t_hints[] = {
    "{\"a\": 1}", "{\"b\": -1}", "{\"a\": 1, \"b\": 1}", "{\"b\": 1, \"c\": -1}",
    "{\"d.x\": 1}", "{\"c\": 1, \"a\": -1}", "{\"b\": \"hashed\"}", "\"_id_\"", NULL};

Test(q_plan, differential_hint_vs_collscan, .timeout = 600)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        unsigned s = t_seed(12345);
        for (int i = 0; t_hints[i + 1]; i++)
            T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": %s, \"name\": \"i%d\"}]}",
                  t_hints[i], i);
        insert_random_docs(&t, &s, 300);
        int want[512], got[512];
        for (int q = 0; q < 400; q++) {
            char f[600];
            rand_filter(&s, f, sizeof f);
            int n = find_ids(&t, f, "{\"$natural\": 1}", want);
            for (int h = -1; t_hints[h < 0 ? 0 : h]; h++) {
                const char *hint = h < 0 ? "{\"$natural\": -1}" : t_hints[h];
                int m = find_ids(&t, f, hint, got);
                cr_assert_eq(m, n, "[%s] %s hint %s: %d docs, collscan %d", t.engine, f, hint, m, n);
                for (int k = 0; k < n; k++)
                    cr_assert_eq(got[k], want[k], "[%s] %s hint %s: differs", t.engine, f, hint);
            }
            int m = find_ids(&t, f, "{}", got); /* the planner's choice */
            cr_assert_eq(m, n, "[%s] %s unhinted: %d docs, collscan %d", t.engine, f, m, n);
            cr_assert(memcmp(got, want, (size_t)n * sizeof *got) == 0, "[%s] %s", t.engine, f);
        }
    }
}

/* ---- explain ------------------------------------------------------------------------ */

static bson_t *explain(tdb *t, const char *inner)
{
    return T_OK(t, "{\"explain\": %s, \"verbosity\": \"executionStats\"}", inner);
}

/* The winning plan as JSON (caller frees). */
static char *winning(const bson_t *r)
{
    bson_iter_t it;
    bson_t d;
    const uint8_t *data;
    uint32_t len;
    cr_assert(t_find(r, "queryPlanner.winningPlan", &it));
    bson_iter_document(&it, &len, &data);
    bson_init_static(&d, data, len);
    return t_json(&d);
}

static void assert_plan(tdb *t, const char *inner, const char *want, const char *not_want)
{
    bson_t *r = explain(t, inner);
    char *w = winning(r);
    cr_assert(strstr(w, want) != NULL, "[%s] %s: want %s in %s", t->engine, inner, want, w);
    if (not_want)
        cr_assert(strstr(w, not_want) == NULL, "[%s] %s: %s in %s", t->engine, inner, not_want, w);
    bson_free(w);
    bson_destroy(r);
}

Test(q_plan, queue_index_serves_null_equality_and_sort)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"createIndexes\": \"Queue\", \"indexes\": [{\"key\": {\"startTime\": 1, "
                  "\"priority\": -1, \"createdOn\": 1}, \"name\": \"q\"}]}");
        for (int i = 0; i < 50; i++)
            T_RUN(&t, "{\"insert\": \"Queue\", \"documents\": [{\"_id\": %d, %s\"priority\": %d, "
                      "\"createdOn\": %d}]}", i, i % 3 == 0 ? "\"startTime\": 5, " :
                      i % 3 == 1 ? "\"startTime\": null, " : "", i % 4, 100 - i);
        const char *q = "{\"find\": \"Queue\", \"filter\": {\"startTime\": null}, "
                        "\"sort\": {\"priority\": -1, \"createdOn\": 1}}";
        assert_plan(&t, q, "\"IXSCAN\"", "\"SORT\"");
        bson_t *r = explain(&t, q);
        cr_assert_eq(t_i64(r, "executionStats.nReturned"), 33);
        cr_assert_str_eq(t_str(r, "queryPlanner.winningPlan.inputStage.indexName"), "q");
        cr_assert_str_eq(t_str(r, "queryPlanner.winningPlan.inputStage.indexBounds.startTime.0"),
                         "[null, null]");
        bson_destroy(r);
        /* the order is the requested one */
        r = T_OK(&t, "{\"find\": \"Queue\", \"filter\": {\"startTime\": null}, \"sort\": "
                     "{\"priority\": -1, \"createdOn\": 1}, \"batchSize\": 100}");
        bson_iter_t it, arr;
        cr_assert(t_find(r, "cursor.firstBatch", &it) && bson_iter_recurse(&it, &arr));
        int prev_p = 99, prev_c = -1, n = 0;
        while (bson_iter_next(&arr)) {
            bson_iter_t d;
            bson_iter_recurse(&arr, &d);
            bson_iter_find(&d, "priority");
            int p = bson_iter_int32(&d);
            bson_iter_find(&d, "createdOn");
            int c = bson_iter_int32(&d);
            cr_assert(p < prev_p || (p == prev_p && c > prev_c), "[%s] order", t.engine);
            prev_p = p, prev_c = c, n++;
        }
        cr_assert_eq(n, 33);
        bson_destroy(r);
        /* reversed sort: the same index backwards */
        assert_plan(&t, "{\"find\": \"Queue\", \"filter\": {\"startTime\": null}, \"sort\": "
                        "{\"priority\": 1, \"createdOn\": -1}}", "\"backward\"", "\"SORT\"");
        /* a sort the index cannot give */
        assert_plan(&t, "{\"find\": \"Queue\", \"filter\": {\"startTime\": null}, \"sort\": "
                        "{\"priority\": 1, \"createdOn\": 1}}", "\"SORT\"", NULL);
    }
}

/* {a: [x, y]}: the field equal to the array (keys x, y) or an array
 * holding it as an element (key [x, y]); bounds on both, as MongoDB's. */
Test(q_plan, array_equality_uses_the_index)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"createIndexes\": \"p\", \"indexes\": [{\"key\": {\"props\": 1}, "
                  "\"name\": \"props_1\"}]}");
        T_RUN(&t, "{\"insert\": \"p\", \"documents\": ["
                  "{\"_id\": 1, \"props\": [[\"Seek Time\", \"5ms\"], [\"RPM\", \"15k\"]]},"
                  "{\"_id\": 2, \"props\": [\"Seek Time\", \"5ms\"]},"
                  "{\"_id\": 3, \"props\": [\"Seek Time\", \"9ms\"]},"
                  "{\"_id\": 4, \"props\": [[\"Seek Time\", \"9ms\"]]},"
                  "{\"_id\": 5, \"props\": [\"5ms\", \"Seek Time\"]},"
                  "{\"_id\": 6, \"props\": [[true, 1]]},"
                  "{\"_id\": 7, \"props\": [true, 1]},"
                  "{\"_id\": 8, \"props\": []}]}");
        const char *q = "{\"find\": \"p\", \"filter\": {\"props\": [\"Seek Time\", \"5ms\"]}}";
        assert_plan(&t, q, "\"props_1\"", "\"COLLSCAN\"");
        bson_t *r = explain(&t, q);
        cr_assert_eq(t_i64(r, "executionStats.nReturned"), 2, "[%s]", t.engine);
        bson_destroy(r);
        /* A first element above arrays in the key order (bool): bounds in order. */
        q = "{\"find\": \"p\", \"filter\": {\"props\": [true, 1]}}";
        assert_plan(&t, q, "\"props_1\"", "\"COLLSCAN\"");
        r = explain(&t, q);
        cr_assert_eq(t_i64(r, "executionStats.nReturned"), 2, "[%s]", t.engine);
        bson_destroy(r);
        /* The same answers without the index. */
        r = T_OK(&t, "{\"count\": \"p\", \"query\": {\"props\": [\"Seek Time\", \"5ms\"]}, "
                     "\"hint\": {\"$natural\": 1}}");
        cr_assert_eq(t_i64(r, "n"), 2);
        bson_destroy(r);
        /* [] and [null]: no bounds, a scan, still the right answer. */
        r = T_OK(&t, "{\"count\": \"p\", \"query\": {\"props\": []}}");
        cr_assert_eq(t_i64(r, "n"), 1, "[%s]", t.engine);
        bson_destroy(r);
    }
}

Test(q_plan, covered_query_examines_no_documents)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"a\": 1, \"b\": -1}, "
                  "\"name\": \"ab\"}]}");
        for (int i = 0; i < 20; i++)
            T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": %d, \"a\": %d, \"b\": \"s%d\", "
                      "\"c\": 1}]}", i, i, i);
        const char *q = "{\"find\": \"c\", \"filter\": {\"a\": {\"$gte\": 5, \"$lt\": 15}}, "
                        "\"projection\": {\"a\": 1, \"b\": 1, \"_id\": 0}}";
        bson_t *r = explain(&t, q);
        cr_assert_eq(t_i64(r, "executionStats.totalDocsExamined"), 0);
        cr_assert_eq(t_i64(r, "executionStats.totalKeysExamined"), 10);
        cr_assert_eq(t_i64(r, "executionStats.nReturned"), 10);
        bson_destroy(r);
        assert_plan(&t, q, "\"PROJECTION_COVERED\"", "\"FETCH\"");
        r = T_OK(&t, "%s", q);
        bson_iter_t it;
        cr_assert(t_find(r, "cursor.firstBatch.0", &it));
        cr_assert_eq(t_i64(r, "cursor.firstBatch.0.a"), 5);
        cr_assert_str_eq(t_str(r, "cursor.firstBatch.0.b"), "s5");
        cr_assert(!t_has(r, "cursor.firstBatch.0._id") && !t_has(r, "cursor.firstBatch.0.c"));
        bson_destroy(r);
        /* _id included, a field outside the key, or a multikey index: FETCH */
        assert_plan(&t, "{\"find\": \"c\", \"filter\": {\"a\": 5}, \"projection\": {\"a\": 1}}",
                    "\"FETCH\"", NULL);
        assert_plan(&t, "{\"find\": \"c\", \"filter\": {\"a\": 5}, \"projection\": {\"c\": 1, "
                        "\"_id\": 0}}", "\"FETCH\"", NULL);
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"a\": [1, 2]}]}");
        assert_plan(&t, "{\"find\": \"c\", \"filter\": {\"a\": 5}, \"projection\": {\"a\": 1, "
                        "\"_id\": 0}}", "\"FETCH\"", NULL);
    }
}

/* A regex on a covering index is decided on each decoded key (MongoDB's
 * IXSCAN filter): no FETCH, and only the keys the regex matches return. */
Test(q_plan, covered_regex_filters_keys)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"p\": 1, \"n\": 1}, "
                  "\"name\": \"p_1_n_1\"}]}");
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"p\": \"/a\", \"n\": 1}, "
                  "{\"p\": \"/a/b\", \"n\": 2}, {\"p\": \"/ab\", \"n\": 3}, "
                  "{\"p\": \"/A\", \"n\": 4}, {\"p\": 5, \"n\": 5}]}");
        const char *q = "{\"find\": \"c\", \"filter\": {\"p\": {\"$regex\": \"^/a$\"}}, "
                        "\"projection\": {\"_id\": 0, \"p\": 1, \"n\": 1}}";
        bson_t *r = explain(&t, q);
        cr_assert_eq(t_i64(r, "executionStats.totalDocsExamined"), 0);
        cr_assert_eq(t_i64(r, "executionStats.nReturned"), 1);
        bson_destroy(r);
        assert_plan(&t, q, "\"PROJECTION_COVERED\"", "\"FETCH\"");
        r = T_OK(&t, "%s", q);
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 1);
        cr_assert_eq(t_i64(r, "cursor.firstBatch.0.n"), 1);
        bson_destroy(r);
        /* a case-insensitive regex scans every key and still filters them */
        r = T_OK(&t, "{\"find\": \"c\", \"filter\": {\"p\": {\"$regex\": \"^/a$\", \"$options\": \"i\"}}, "
                     "\"projection\": {\"_id\": 0, \"n\": 1}, \"sort\": {\"n\": 1}}");
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 2);
        cr_assert_eq(t_i64(r, "cursor.firstBatch.1.n"), 4);
        bson_destroy(r);
    }
}

/* A regex on a key field the bounds do not decide is tested on each key
 * before the fetch (an IXSCAN filter): only the matches are read.  (A
 * regex's bounds are every string, so the number and the missing title are
 * not even scanned.)  A multikey index is not prefiltered. */
Test(q_plan, regex_prefilters_keys_before_fetch)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"t\": 1, \"title\": 1}, "
                  "\"name\": \"t_1_title_1\"}]}");
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": 1, \"t\": \"film\", \"title\": \"The Hacker\"}, "
                  "{\"_id\": 2, \"t\": \"film\", \"title\": \"Heat\"}, "
                  "{\"_id\": 3, \"t\": \"film\", \"title\": \"hackers\"}, "
                  "{\"_id\": 4, \"t\": \"film\", \"title\": 7}, "
                  "{\"_id\": 5, \"t\": \"film\"}, {\"_id\": 6, \"t\": \"book\", \"title\": \"hacker\"}]}");
        const char *q = "{\"find\": \"c\", \"filter\": {\"t\": \"film\", "
                        "\"title\": {\"$regex\": \"hacker\", \"$options\": \"i\"}}}";
        bson_t *r = explain(&t, q);
        /* the three string titles of films examined, the two matches fetched */
        cr_assert_eq(t_i64(r, "executionStats.totalKeysExamined"), 3, "[%s] %lld keys", t.engine,
                     (long long)t_i64(r, "executionStats.totalKeysExamined"));
        cr_assert_eq(t_i64(r, "executionStats.totalDocsExamined"), 2, "[%s] %lld docs", t.engine,
                     (long long)t_i64(r, "executionStats.totalDocsExamined"));
        cr_assert_eq(t_i64(r, "executionStats.nReturned"), 2);
        bson_destroy(r);
        r = T_OK(&t, "%s", q);
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 2);
        /* the index order: "The Hacker" < "hackers" */
        cr_assert_eq(t_i64(r, "cursor.firstBatch.0._id"), 1);
        cr_assert_eq(t_i64(r, "cursor.firstBatch.1._id"), 3);
        bson_destroy(r);
        /* an array title makes the index multikey: no prefilter (every string
         * key's record is read, the array's once), the same answer */
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": 7, \"t\": \"film\", "
                  "\"title\": [\"Up\", \"HACKER 2\"]}]}");
        r = explain(&t, q);
        cr_assert_eq(t_i64(r, "executionStats.totalKeysExamined"), 5, "[%s]", t.engine);
        cr_assert_eq(t_i64(r, "executionStats.totalDocsExamined"), 4, "[%s]", t.engine);
        cr_assert_eq(t_i64(r, "executionStats.nReturned"), 3);
        bson_destroy(r);
    }
}

/* A multikey index provides a sort, as in MongoDB 3.x: after point-fixed
 * fields (the catalog's {genre: "jazz"} sorted by date), and on the array
 * field itself, where the index order with each record once is the order of
 * its smallest element ascending, its largest descending: the in-memory
 * sort's order. */
Test(q_plan, multikey_index_provides_sort)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"g\": 1, \"d\": -1}, "
                  "\"name\": \"g_1_d_-1\"}, {\"key\": {\"tags\": 1}, \"name\": \"tags_1\"}]}");
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": ["
                  "{\"_id\": 1, \"g\": [\"jazz\", \"bop\"], \"d\": 3, \"tags\": [5, 1]}, "
                  "{\"_id\": 2, \"g\": [\"rock\"], \"d\": 9, \"tags\": [3]}, "
                  "{\"_id\": 3, \"g\": [\"jazz\"], \"d\": 7, \"tags\": [2, 9]}, "
                  "{\"_id\": 4, \"g\": \"jazz\", \"d\": 1, \"tags\": 4}]}");
        const char *q = "{\"find\": \"c\", \"filter\": {\"g\": \"jazz\"}, \"sort\": {\"d\": -1}}";
        assert_plan(&t, q, "\"g_1_d_-1\"", "\"SORT\"");
        bson_t *r = T_OK(&t, "%s", q);
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 3);
        cr_assert_eq(t_i64(r, "cursor.firstBatch.0._id"), 3);
        cr_assert_eq(t_i64(r, "cursor.firstBatch.1._id"), 1);
        cr_assert_eq(t_i64(r, "cursor.firstBatch.2._id"), 4);
        bson_destroy(r);
        static const struct {
            const char *sort;
            int ids[4];
        } cases[] = {{"{\"tags\": 1}", {1, 3, 2, 4}}, {"{\"tags\": -1}", {3, 1, 4, 2}}};
        for (int k = 0; k < 2; k++) {
            for (int h = 0; h < 2; h++) { /* the index, then a scan and an in-memory sort */
                char q2[256];
                snprintf(q2, sizeof q2, "{\"find\": \"c\", \"sort\": %s, \"hint\": %s, \"batchSize\": 2}",
                         cases[k].sort, h ? "{\"$natural\": 1}" : "\"tags_1\"");
                if (!h)
                    assert_plan(&t, q2, "\"tags_1\"", "\"SORT\"");
                r = T_OK(&t, "%s", q2);
                int64_t id = t_i64(r, "cursor.id");
                cr_assert_eq(t_len(r, "cursor.firstBatch"), 2);
                for (int i = 0; i < 2; i++) {
                    char path[64];
                    snprintf(path, sizeof path, "cursor.firstBatch.%d._id", i);
                    cr_assert_eq(t_i64(r, path), cases[k].ids[i], "[%s] %s", t.engine, q2);
                }
                bson_destroy(r);
                r = T_OK(&t, "{\"getMore\": {\"$numberLong\": \"%lld\"}, \"collection\": \"c\"}",
                         (long long)id);
                cr_assert_eq(t_len(r, "cursor.nextBatch"), 2);
                for (int i = 0; i < 2; i++) {
                    char path[64];
                    snprintf(path, sizeof path, "cursor.nextBatch.%d._id", i);
                    cr_assert_eq(t_i64(r, path), cases[k].ids[2 + i], "[%s] %s", t.engine, q2);
                }
                bson_destroy(r);
            }
        }
    }
}

/* $all bounds the scan by its first element, as an $and of equalities
 * (MongoDB 3.x); $all of $elemMatch by its first $elemMatch. */
Test(q_plan, all_gives_bounds)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"tags\": 1}, "
                  "\"name\": \"tags_1\"}, {\"key\": {\"m.k\": 1, \"m.v\": 1}, \"name\": \"mkv\"}]}");
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"tags\": [\"x\", \"y\"], "
                  "\"m\": [{\"k\": \"a\", \"v\": 1}, {\"k\": \"b\", \"v\": 2}]}, "
                  "{\"tags\": [\"x\"], \"m\": [{\"k\": \"a\", \"v\": 1}]}]}");
        const char *q1 = "{\"find\": \"c\", \"filter\": {\"tags\": {\"$all\": [\"y\", \"x\"]}}}";
        assert_plan(&t, q1, "[ \"[\\\"y\\\", \\\"y\\\"]\" ]", "\"COLLSCAN\"");
        bson_t *r = T_OK(&t, "%s", q1);
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 1);
        bson_destroy(r);
        const char *q2 = "{\"find\": \"c\", \"filter\": {\"m\": {\"$all\": ["
                         "{\"$elemMatch\": {\"k\": \"b\", \"v\": 2}}, "
                         "{\"$elemMatch\": {\"k\": \"a\", \"v\": 1}}]}}}";
        assert_plan(&t, q2, "\"mkv\"", "\"COLLSCAN\"");
        r = explain(&t, q2);
        cr_assert_eq(t_i64(r, "executionStats.totalDocsExamined"), 1);
        cr_assert_eq(t_i64(r, "executionStats.nReturned"), 1);
        bson_destroy(r);
    }
}

/* The indexes {a: 1} (a_1) and {b: 1} (b_1) on c. */
#define AB_INDEXES                                                                               \
    "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"a\": 1}, \"name\": \"a_1\"}, "        \
    "{\"key\": {\"b\": 1}, \"name\": \"b_1\"}]}"

/* How many query shapes c's plan cache holds (planCacheListQueryShapes). */
static int64_t cached_shapes(tdb *t)
{
    bson_t *r = T_OK(t, "{\"planCacheListQueryShapes\": \"c\"}");
    int64_t n = t_len(r, "shapes");
    bson_destroy(r);
    return n;
}

Test(q_plan, hints)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "%s", AB_INDEXES);
        for (int i = 0; i < 30; i++)
            T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": %d, \"a\": %d, \"b\": %d}]}",
                  i, i % 5, i % 7);
        assert_plan(&t, "{\"find\": \"c\", \"filter\": {\"a\": 1, \"b\": 2}, \"hint\": \"b_1\"}",
                    "\"b_1\"", "\"a_1\"");
        assert_plan(&t, "{\"find\": \"c\", \"filter\": {\"a\": 1, \"b\": 2}, \"hint\": {\"a\": 1}}",
                    "\"a_1\"", "\"b_1\"");
        assert_plan(&t, "{\"find\": \"c\", \"filter\": {\"a\": 1}, \"hint\": {\"$natural\": -1}}",
                    "\"COLLSCAN\"", "\"IXSCAN\"");
        assert_plan(&t, "{\"find\": \"c\", \"filter\": {\"a\": 1}, \"hint\": {\"$natural\": -1}}",
                    "\"backward\"", NULL);
        /* a hinted index with no predicate on it: the whole index */
        bson_t *r = explain(&t, "{\"find\": \"c\", \"filter\": {\"a\": 1}, \"hint\": \"b_1\"}");
        cr_assert_str_eq(t_str(r, "queryPlanner.winningPlan.inputStage.indexBounds.b.0"),
                         "[MinKey, MaxKey]");
        cr_assert_eq(t_i64(r, "executionStats.nReturned"), 6);
        cr_assert_eq(t_i64(r, "executionStats.totalKeysExamined"), 30);
        bson_destroy(r);
        for (int h = 0; h < 3; h++) {
            static const char *const ch[] = {"\"b_1\"", "{\"a\": 1}", "{\"$natural\": 1}"};
            r = T_OK(&t, "{\"count\": \"c\", \"query\": {\"a\": 1, \"b\": {\"$gte\": 2}}, "
                         "\"hint\": %s}", ch[h]);
            cr_assert_eq(t_i64(r, "n"), 4, "[%s] count hint %s", t.engine, ch[h]);
            bson_destroy(r);
        }
        T_ERR(&t, 2, "bad hint", "{\"count\": \"c\", \"query\": {\"a\": 1}, \"hint\": \"zz\"}");
        T_ERR(&t, 2, "bad hint", "{\"find\": \"c\", \"filter\": {}, \"hint\": \"nope\"}");
        T_ERR(&t, 2, "bad hint", "{\"find\": \"c\", \"filter\": {}, \"hint\": {\"z\": 1}}");
        /* two candidates: one wins, the other is rejected */
        r = explain(&t, "{\"find\": \"c\", \"filter\": {\"a\": 1, \"b\": 2}}");
        cr_assert_eq(t_len(r, "queryPlanner.rejectedPlans"), 1);
        cr_assert_eq(t_i64(r, "executionStats.nReturned"), 1);
        bson_destroy(r);
    }
}

Test(q_plan, bounds_per_operator)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"a\": 1}, \"name\": \"a_1\"}]}");
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"a\": 1}, {\"a\": \"abc\"}, {\"a\": [7, 8]}]}");
        static const char *const cases[][2] = {
            {"{\"a\": {\"$in\": [3, 1]}}", "[ \"[1, 1]\", \"[3, 3]\" ]"},
            {"{\"a\": {\"$gt\": 1}}", "[ \"(1, inf.0]\" ]"},
            {"{\"a\": {\"$lte\": \"b\"}}", "[ \"[\\\"\\\", \\\"b\\\"]\" ]"},
            {"{\"a\": {\"$regex\": \"^ab\"}}", "\"[\\\"ab\\\", \\\"ac\\\")\""},
            {"{\"a\": {\"$elemMatch\": {\"$gt\": 6, \"$lt\": 8}}}", "[ \"(6, 8)\" ]"},
            {"{\"a\": {\"$exists\": false}}", "[ \"[null, null]\" ]"},
        };
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            char q[256];
            snprintf(q, sizeof q, "{\"find\": \"c\", \"filter\": %s}", cases[i][0]);
            assert_plan(&t, q, cases[i][1], NULL);
        }
        /* multikey: two ranges on one field are not intersected */
        assert_plan(&t, "{\"find\": \"c\", \"filter\": {\"a\": {\"$gt\": 7.5, \"$lt\": 7.2}}}",
                    "[ \"(7.5, inf.0]\" ]", NULL);
        bson_t *r = T_OK(&t, "{\"count\": \"c\", \"query\": {\"a\": {\"$gt\": 7.5, \"$lt\": 7.2}}}");
        cr_assert_eq(t_i64(r, "n"), 1);
        bson_destroy(r);
        /* $ne and $nin give no bounds: a collection scan */
        assert_plan(&t, "{\"find\": \"c\", \"filter\": {\"a\": {\"$ne\": 1}}}", "\"COLLSCAN\"", NULL);
        assert_plan(&t, "{\"find\": \"c\", \"filter\": {\"a\": {\"$nin\": [1]}}}", "\"COLLSCAN\"", NULL);
    }
}

Test(q_plan, explain_other_commands)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"a\": 1}, \"name\": \"a_1\"}]}");
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": 1, \"a\": 1}, {\"_id\": 2, \"a\": 2}]}");
        assert_plan(&t, "{\"count\": \"c\", \"query\": {\"a\": 1}}", "\"COUNT\"", NULL);
        assert_plan(&t, "{\"update\": \"c\", \"updates\": [{\"q\": {\"a\": 1}, \"u\": {\"$set\": "
                        "{\"b\": 1}}}]}", "\"UPDATE\"", NULL);
        assert_plan(&t, "{\"delete\": \"c\", \"deletes\": [{\"q\": {\"a\": 2}, \"limit\": 0}]}",
                    "\"DELETE\"", NULL);
        assert_plan(&t, "{\"findAndModify\": \"c\", \"query\": {\"a\": 2}, \"remove\": true}",
                    "\"a_1\"", NULL);
        assert_plan(&t, "{\"find\": \"c\", \"filter\": {\"_id\": 2}}", "\"IDHACK\"", NULL);
        assert_plan(&t, "{\"find\": \"nope\", \"filter\": {\"_id\": 2}}", "\"EOF\"", NULL);
        /* explain writes nothing */
        bson_t *r = T_OK(&t, "{\"count\": \"c\"}");
        cr_assert_eq(t_i64(r, "n"), 2);
        bson_destroy(r);
        r = T_OK(&t, "{\"explain\": {\"find\": \"c\"}, \"verbosity\": \"queryPlanner\"}");
        cr_assert(!t_has(r, "executionStats"));
        cr_assert_eq(t_i64(r, "queryPlanner.plannerVersion"), 1);
        cr_assert_str_eq(t_str(r, "queryPlanner.namespace"), "test.c");
        bson_destroy(r);
        T_ERR(&t, 9, "verbosity", "{\"explain\": {\"find\": \"c\"}, \"verbosity\": \"x\"}");
        T_ERR(&t, 59, "unknown command", "{\"explain\": {\"nope\": \"c\"}}");
    }
}

/* ---- sorted differential, across getMore batches ------------------------------------ */

/* Append to out each document's values of b and (if nf == 2) c, missing as
 * null: what a sort on them must order (ties may come in any order). */
static void sort_keys_of(const bson_t *r, const char *arrpath, int nf, char *out, size_t n)
{
    bson_iter_t it, arr;
    size_t len = strlen(out);
    cr_assert(t_find(r, arrpath, &it) && bson_iter_recurse(&it, &arr));
    while (bson_iter_next(&arr)) {
        bson_t d;
        const uint8_t *data;
        uint32_t dl;
        bson_iter_document(&arr, &dl, &data);
        bson_init_static(&d, data, dl);
        static const char *const f[] = {"b", "c"};
        for (int i = 0; i < nf; i++) {
            bson_iter_t v;
            char *s = NULL;
            if (bson_iter_init_find(&v, &d, f[i]) && !BSON_ITER_HOLDS_NULL(&v)) {
                bson_t one = BSON_INITIALIZER;
                bson_append_iter(&one, "v", 1, &v);
                s = t_json(&one);
                bson_destroy(&one);
            }
            len += (size_t)snprintf(out + len, n - len, "%s|", s ? s : "null");
            bson_free(s);
            cr_assert_lt(len, n);
        }
    }
}

/* Run a sorted find in batches of 7, returning the sort keys in order. */
static void sorted_run(tdb *t, const char *filter, const char *sort, const char *hint,
                       char *out, size_t n)
{
    bson_t *r = T_OK(t, "{\"find\": \"c\", \"filter\": %s, \"sort\": %s, \"hint\": %s, "
                        "\"batchSize\": 7}", filter, sort, hint);
    int nf = strchr(sort, 'c') ? 2 : 1;
    out[0] = 0;
    sort_keys_of(r, "cursor.firstBatch", nf, out, n);
    int64_t id = t_i64(r, "cursor.id");
    bson_destroy(r);
    while (id) {
        r = T_OK(t, "{\"getMore\": {\"$numberLong\": \"%lld\"}, \"collection\": \"c\", "
                    "\"batchSize\": 7}", (long long)id);
        sort_keys_of(r, "cursor.nextBatch", nf, out, n);
        id = t_i64(r, "cursor.id");
        bson_destroy(r);
    }
}

Test(q_plan, differential_sorted_in_batches, .timeout = 600)
{
    static const char *const sorts[] = {"{\"b\": 1, \"c\": -1}", "{\"b\": -1, \"c\": 1}",
                                        "{\"b\": -1}", "{\"b\": 1}"};
    static const char *const hints[] = {"{\"b\": 1, \"c\": -1}", "{\"b\": -1}", "{}", NULL};
    static char want[64 * 1024], got[64 * 1024];
    tdb t;
    FOR_EACH_ENGINE(t) {
        unsigned s = t_seed(777);
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"b\": 1, \"c\": -1}, "
                  "\"name\": \"bc\"}, {\"key\": {\"b\": -1}, \"name\": \"b\"}]}");
        insert_random_docs(&t, &s, 150);
        for (int q = 0; q < 60; q++) {
            char f[600];
            rand_filter(&s, f, sizeof f);
            const char *sort = sorts[t_rand(&s) % 4];
            sorted_run(&t, f, sort, "{\"$natural\": 1}", want, sizeof want);
            for (int h = 0; hints[h]; h++) {
                sorted_run(&t, f, sort, hints[h], got, sizeof got);
                cr_assert_str_eq(got, want, "[%s] %s sort %s hint %s", t.engine, f, sort, hints[h]);
            }
        }
    }
}

Test(q_plan, plan_cache_per_shape)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "%s", AB_INDEXES);
        for (int i = 0; i < 200; i++)
            T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"a\": %d, \"b\": %d}]}", i % 100, i % 2);
        /* one candidate: nothing to cache */
        bson_destroy(T_OK(&t, "{\"find\": \"c\", \"filter\": {\"a\": 3}}"));
        cr_assert_eq(cached_shapes(&t), 0);
        /* two: the trial picks a_1 (selective) and the shape is cached */
        bson_t *r = T_OK(&t, "{\"find\": \"c\", \"filter\": {\"a\": 3, \"b\": 1}}");
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 2);
        bson_destroy(r);
        r = T_OK(&t, "{\"find\": \"c\", \"filter\": {\"a\": 4, \"b\": 0}}");
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 2);
        bson_destroy(r);
        r = T_OK(&t, "{\"planCacheListQueryShapes\": \"c\"}");
        cr_assert_eq(t_len(r, "shapes"), 1);
        cr_assert_str_eq(t_str(r, "shapes.0.indexName"), "a_1");
        bson_destroy(r);
        bson_t *x = explain(&t, "{\"find\": \"c\", \"filter\": {\"a\": 3, \"b\": 1}}");
        cr_assert_str_eq(t_str(x, "queryPlanner.winningPlan.inputStage.indexName"), "a_1");
        bson_destroy(x);
        /* a new index empties the cache; so does planCacheClear */
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"b\": 1, \"a\": 1}, "
                  "\"name\": \"ba\"}]}");
        cr_assert_eq(cached_shapes(&t), 0);
        bson_destroy(T_OK(&t, "{\"find\": \"c\", \"filter\": {\"a\": 3, \"b\": 1}}"));
        T_RUN(&t, "{\"planCacheClear\": \"c\"}");
        cr_assert_eq(cached_shapes(&t), 0);
    }
}

/* MongoDB 3.0's PlanCache::notifyOfWriteOp: a collection's cached choices
 * go after 1000 writes to it (inserts, updates and deletes alike), so that
 * the next query of each shape is tried again on the data as it is. */
Test(q_plan, plan_cache_emptied_after_1000_writes)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "%s", AB_INDEXES);
        char docs[20000];
        size_t n = 0;
        n += (size_t)snprintf(docs + n, sizeof docs - n, "[");
        for (int i = 0; i < 499; i++)
            n += (size_t)snprintf(docs + n, sizeof docs - n, "%s{\"a\": %d, \"b\": %d}",
                                  i ? ", " : "", i % 100, i % 2);
        snprintf(docs + n, sizeof docs - n, "]");
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": %s}", docs);
        T_RUN(&t, "{\"planCacheClear\": \"c\"}"); /* and its write count */
        bson_destroy(T_OK(&t, "{\"find\": \"c\", \"filter\": {\"a\": 3, \"b\": 1}}"));
        cr_assert_eq(cached_shapes(&t), 1, "[%s]", t.engine);
        /* 499 inserts, 498 updates and two deletes: 999 writes, kept */
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": %s}", docs);
        bson_t *r = T_OK(&t, "{\"update\": \"c\", \"updates\": [{\"q\": {\"b\": 1}, \"u\": "
                     "{\"$inc\": {\"x\": 1}}, \"multi\": true}]}");
        cr_assert_eq(t_i64(r, "nModified"), 498, "[%s]", t.engine);
        bson_destroy(r);
        for (int i = 0; i < 2; i++)
            T_RUN(&t, "{\"delete\": \"c\", \"deletes\": [{\"q\": {\"a\": 0}, \"limit\": 1}]}");
        cr_assert_eq(cached_shapes(&t), 1, "[%s] after 999 writes", t.engine);
        /* the thousandth empties it */
        T_RUN(&t, "{\"delete\": \"c\", \"deletes\": [{\"q\": {\"a\": 0}, \"limit\": 1}]}");
        cr_assert_eq(cached_shapes(&t), 0, "[%s] after 1000 writes", t.engine);
    }
}

/* A plan that needs an in-memory sort returns nothing until its scan ends
 * (MongoDB's blocking SORT stage).  Here the {a} plan matches every key it
 * reads but would read 8000 keys and documents before its first result;
 * the {b} plan gives the order and every other document it reads matches.
 * Unsorted, {a} wins the trial; sorted by b, {b} does. */
Test(q_plan, trial_counts_a_blocking_sort_as_no_results)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "%s", AB_INDEXES);
        static char docs[64000];
        for (int k = 0; k < 16; k++) {
            size_t n = (size_t)snprintf(docs, sizeof docs, "[");
            for (int i = k * 1000; i < (k + 1) * 1000; i++)
                n += (size_t)snprintf(docs + n, sizeof docs - n, "%s{\"a\": %d, \"b\": %d}",
                                      i % 1000 ? ", " : "", i % 2 ? 1 : 2, (i * 7919) % 16000);
            snprintf(docs + n, sizeof docs - n, "]");
            T_RUN(&t, "{\"insert\": \"c\", \"documents\": %s}", docs);
        }
        assert_plan(&t, "{\"find\": \"c\", \"filter\": {\"a\": 1}}", "\"a_1\"", "\"b_1\"");
        assert_plan(&t, "{\"find\": \"c\", \"filter\": {\"a\": 1}, \"sort\": {\"b\": 1}}",
                    "\"b_1\"", "\"SORT\"");
        /* few enough to sort within the trial: {a} and a SORT */
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"a\": 3, \"b\": 5}, {\"a\": 3, "
                  "\"b\": 4}]}");
        assert_plan(&t, "{\"find\": \"c\", \"filter\": {\"a\": 3}, \"sort\": {\"b\": 1}}",
                    "\"SORT\"", "\"b_1\"");
    }
}

Test(q_plan, index_cursor_survives_deletes_between_batches)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"a\": -1}, \"name\": \"a\"}]}");
        for (int i = 0; i < 20; i++)
            T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": %d, \"a\": %d}]}", i, i);
        for (int dir = -1; dir <= 1; dir += 2) {
            bson_t *r = T_OK(&t, "{\"find\": \"c\", \"filter\": {\"a\": {\"$gte\": 0}}, \"sort\": "
                                 "{\"a\": %d}, \"batchSize\": 3}", dir);
            int64_t id = t_i64(r, "cursor.id");
            int last = (int)t_i64(r, "cursor.firstBatch.2.a"), seen = 3;
            bson_destroy(r);
            /* remove the next few and the one just returned */
            T_RUN(&t, "{\"delete\": \"c\", \"deletes\": [{\"q\": {\"a\": {\"$in\": [%d, %d, %d]}}, "
                      "\"limit\": 0}]}", last, last + dir, last + 2 * dir);
            while (id) {
                r = T_OK(&t, "{\"getMore\": {\"$numberLong\": \"%lld\"}, \"collection\": \"c\", "
                             "\"batchSize\": 3}", (long long)id);
                bson_iter_t it, arr;
                cr_assert(t_find(r, "cursor.nextBatch", &it) && bson_iter_recurse(&it, &arr));
                while (bson_iter_next(&arr)) {
                    bson_iter_t d;
                    bson_iter_recurse(&arr, &d);
                    bson_iter_find(&d, "a");
                    int a = bson_iter_int32(&d);
                    cr_assert(dir > 0 ? a > last : a < last, "[%s] order %d after %d", t.engine, a, last);
                    last = a;
                    seen++;
                }
                id = t_i64(r, "cursor.id");
                bson_destroy(r);
            }
            cr_assert_eq(seen, 20 - 2, "[%s] dir %d saw %d", t.engine, dir, seen);
            T_RUN(&t, "{\"delete\": \"c\", \"deletes\": [{\"q\": {}, \"limit\": 0}]}");
            for (int i = 0; i < 20; i++)
                T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": %d, \"a\": %d}]}", i, i);
        }
    }
}

/* ---- TTL ------------------------------------------------------------------------------ */

Test(q_plan, ttl_monitor_expires_dates)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        int64_t now = (int64_t)time(NULL) * 1000;
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"at\": 1}, \"name\": \"at\", "
                  "\"expireAfterSeconds\": 3600}]}");
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": ["
                  "{\"_id\": 1, \"at\": {\"$date\": {\"$numberLong\": \"%lld\"}}},"
                  "{\"_id\": 2, \"at\": {\"$date\": {\"$numberLong\": \"%lld\"}}},"
                  "{\"_id\": 3, \"at\": [{\"$date\": {\"$numberLong\": \"%lld\"}}, 5]},"
                  "{\"_id\": 4, \"at\": \"not a date\"}, {\"_id\": 5}]}",
                  (long long)(now - 7200 * 1000), (long long)now, (long long)(now - 4000 * 1000));
        bson_t *r = T_OK(&t, "{\"listIndexes\": \"c\"}");
        cr_assert_eq(t_i64(r, "cursor.firstBatch.1.expireAfterSeconds"), 3600);
        bson_destroy(r);
        r = T_OK(&t, "{\"ttlMonitor\": 1}");
        cr_assert_eq(t_i64(r, "deleted"), 2);
        bson_destroy(r);
        r = T_OK(&t, "{\"count\": \"c\"}");
        cr_assert_eq(t_i64(r, "n"), 3);
        bson_destroy(r);
        r = T_OK(&t, "{\"validate\": \"c\"}");
        cr_assert(t_has(r, "valid"));
        bson_iter_t it;
        cr_assert(t_find(r, "valid", &it) && bson_iter_as_bool(&it));
        bson_destroy(r);
        T_ERR(&t, 67, "numeric", "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"b\": 1}, "
                                 "\"name\": \"b\", \"expireAfterSeconds\": \"x\"}]}");
        T_ERR(&t, 85, NULL, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"at\": 1}, "
                            "\"name\": \"at\", \"expireAfterSeconds\": 10}]}");
    }
}

/* ttlMonitorSleepSecs: 0 runs the monitor lazily before every command. */
Test(q_plan, ttl_monitor_runs_lazily)
{
    char dir[] = "/tmp/md_qttl_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    bson_t *o = BCON_NEW("engine", BCON_UTF8("ephemeralForTest"), "ttlMonitorSleepSecs",
                         BCON_INT32(0));
    tdb t = {.engine = "ephemeralForTest"};
    snprintf(t.dir, sizeof t.dir, "%s", dir);
    md_error err;
    cr_assert_eq(md_db_open(dir, o, &t.db, &err), 0, "%s", err.message);
    bson_destroy(o);
    T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"at\": 1}, \"name\": \"at\", "
              "\"expireAfterSeconds\": 0}]}");
    T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"at\": {\"$date\": {\"$numberLong\": \"1000\"}}}]}");
    bson_t *r = T_OK(&t, "{\"count\": \"c\"}");
    cr_assert_eq(t_i64(r, "n"), 0);
    bson_destroy(r);
    t_close(&t);
}

/* ---- index types ---------------------------------------------------------------------- */

Test(q_plan, hashed_index)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"a\": \"hashed\"}}]}");
        bson_t *r = T_OK(&t, "{\"listIndexes\": \"c\"}");
        cr_assert_str_eq(t_str(r, "cursor.firstBatch.1.name"), "a_hashed");
        bson_destroy(r);
        for (int i = 0; i < 30; i++)
            T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": %d, \"a\": %d}]}", i, i % 10);
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": 100, \"a\": 3.0}, {\"_id\": 101}]}");
        r = T_OK(&t, "{\"insert\": \"c\", \"documents\": [{\"a\": [1]}]}");
        cr_assert_eq(t_i64(r, "writeErrors.0.code"), 16766);
        cr_assert_eq(t_i64(r, "n"), 0);
        bson_destroy(r);
        r = explain(&t, "{\"find\": \"c\", \"filter\": {\"a\": 3}}");
        cr_assert_str_eq(t_str(r, "queryPlanner.winningPlan.inputStage.indexName"), "a_hashed");
        /* the bounds are the hash of 3, as MongoDB shows them */
        bson_t *three = BCON_NEW("a", BCON_INT32(3));
        bson_iter_t ti;
        char want[64];
        bson_iter_init_find(&ti, three, "a");
        int64_t h3 = q_hash_element(&ti, 0);
        snprintf(want, sizeof want, "[%lld, %lld]", (long long)h3, (long long)h3);
        bson_destroy(three);
        cr_assert_str_eq(t_str(r, "queryPlanner.winningPlan.inputStage.indexBounds.a.0"), want);
        cr_assert_eq(t_i64(r, "executionStats.nReturned"), 4); /* 3, 13, 23 and 3.0 */
        cr_assert_eq(t_i64(r, "executionStats.totalKeysExamined"), 4);
        bson_destroy(r);
        r = explain(&t, "{\"find\": \"c\", \"filter\": {\"a\": {\"$in\": [1, 2]}}}");
        cr_assert_eq(t_i64(r, "executionStats.nReturned"), 6);
        bson_destroy(r);
        r = explain(&t, "{\"find\": \"c\", \"filter\": {\"a\": null}}");
        cr_assert_eq(t_i64(r, "executionStats.nReturned"), 1);
        bson_destroy(r);
        /* ranges and sorts cannot use a hashed index */
        assert_plan(&t, "{\"find\": \"c\", \"filter\": {\"a\": {\"$gt\": 3}}}", "\"COLLSCAN\"", NULL);
        assert_plan(&t, "{\"find\": \"c\", \"sort\": {\"a\": 1}}", "\"SORT\"", NULL);
        T_ERR(&t, 67, "single field", "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": "
                                       "{\"a\": \"hashed\", \"b\": 1}, \"name\": \"x\"}]}");
        T_ERR(&t, 67, "uniqueness", "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": "
                                    "{\"b\": \"hashed\"}, \"name\": \"x\", \"unique\": true}]}");
        /* a build over an array value fails and leaves nothing */
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": 200, \"b\": [1, 2]}]}");
        T_ERR(&t, 16766, "array", "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": "
                                  "{\"b\": \"hashed\"}, \"name\": \"x\"}]}");
        r = T_OK(&t, "{\"listIndexes\": \"c\"}");
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 2);
        bson_destroy(r);
        r = T_OK(&t, "{\"validate\": \"c\", \"full\": true}");
        bson_iter_t it;
        cr_assert(t_find(r, "valid", &it) && bson_iter_as_bool(&it), "[%s] validate", t.engine);
        bson_destroy(r);
    }
}

Test(q_plan, partial_index)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"a\": 1}, \"name\": \"pa\", "
                  "\"partialFilterExpression\": {\"s\": {\"$exists\": true}}}]}");
        for (int i = 0; i < 40; i++)
            T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": %d, \"a\": %d%s}]}", i, i % 4,
                  i % 2 ? ", \"s\": 1" : "");
        bson_t *r = T_OK(&t, "{\"collStats\": \"c\"}");
        cr_assert(t_has(r, "indexSizes.pa"));
        bson_destroy(r);
        /* the query implies the filter: the partial index */
        r = explain(&t, "{\"find\": \"c\", \"filter\": {\"a\": 1, \"s\": {\"$exists\": true}}}");
        cr_assert_str_eq(t_str(r, "queryPlanner.winningPlan.inputStage.indexName"), "pa");
        cr_assert_eq(t_i64(r, "executionStats.nReturned"), 10);
        cr_assert_eq(t_i64(r, "executionStats.totalKeysExamined"), 10);
        bson_destroy(r);
        /* it does not: a collection scan finds the documents outside the index */
        assert_plan(&t, "{\"find\": \"c\", \"filter\": {\"a\": 1}}", "\"COLLSCAN\"", NULL);
        r = T_OK(&t, "{\"count\": \"c\", \"query\": {\"a\": 1}}");
        cr_assert_eq(t_i64(r, "n"), 10);
        bson_destroy(r);
        /* updates move documents in and out of the index */
        T_RUN(&t, "{\"update\": \"c\", \"updates\": [{\"q\": {\"_id\": 0}, \"u\": {\"$set\": {\"s\": 2}}}]}");
        T_RUN(&t, "{\"update\": \"c\", \"updates\": [{\"q\": {\"_id\": 1}, \"u\": {\"$unset\": {\"s\": 1}}}]}");
        r = T_OK(&t, "{\"validate\": \"c\", \"full\": true}");
        bson_iter_t it;
        cr_assert(t_find(r, "valid", &it) && bson_iter_as_bool(&it), "[%s] validate", t.engine);
        bson_iter_t kp;
        cr_assert(t_find(r, "keysPerIndex", &it) && bson_iter_recurse(&it, &kp) &&
                  bson_iter_find(&kp, "test.c.$pa"));
        cr_assert_eq(bson_iter_as_int64(&kp), 20, "[%s]", t.engine);
        bson_destroy(r);
        T_ERR(&t, 67, "unsupported", "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"b\": 1}, "
                                     "\"name\": \"x\", \"partialFilterExpression\": {\"b\": {\"$ne\": 1}}}]}");
        T_ERR(&t, 67, "sparse", "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"b\": 1}, "
                                "\"name\": \"x\", \"sparse\": true, \"partialFilterExpression\": {\"b\": 1}}]}");
    }
}

Test(q_plan, unique_compound_mid_batch_and_sparse)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"a\": 1, \"b\": -1}, "
                  "\"name\": \"ab\", \"unique\": true}, {\"key\": {\"s\": 1}, \"name\": \"s\", "
                  "\"sparse\": true}]}");
        /* ordered insert: the third document is a duplicate, the fourth is not tried */
        bson_t *r = T_OK(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": 1, \"a\": 1, \"b\": 1}, "
                             "{\"_id\": 2, \"a\": 1, \"b\": 2}, {\"_id\": 3, \"a\": 1, \"b\": 1}, "
                             "{\"_id\": 4, \"a\": 2, \"b\": 1}]}");
        cr_assert_eq(t_i64(r, "n"), 2);
        cr_assert_eq(t_i64(r, "writeErrors.0.code"), 11000);
        cr_assert_eq(t_i64(r, "writeErrors.0.index"), 2);
        cr_assert(strstr(t_str(r, "writeErrors.0.errmsg"), "index: ab dup key: { a: 1, b: 1 }"),
                  "[%s] %s", t.engine, t_str(r, "writeErrors.0.errmsg"));
        bson_destroy(r);
        /* sparse: documents without s are not indexed, and {s: null} does not use it */
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": 5, \"a\": 5, \"s\": 1}]}");
        assert_plan(&t, "{\"find\": \"c\", \"filter\": {\"s\": 1}}", "\"indexName\" : \"s\"", NULL);
        assert_plan(&t, "{\"find\": \"c\", \"filter\": {\"s\": null}}", "\"COLLSCAN\"", NULL);
        r = T_OK(&t, "{\"count\": \"c\", \"query\": {\"s\": null}}");
        cr_assert_eq(t_i64(r, "n"), 2);
        bson_destroy(r);
        /* the index options survive a reopen */
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"h\": \"hashed\"}, "
                  "\"name\": \"h\"}, {\"key\": {\"p\": 1}, \"name\": \"p\", "
                  "\"partialFilterExpression\": {\"q\": {\"$gt\": 1}}}, {\"key\": {\"d\": 1}, "
                  "\"name\": \"d\", \"expireAfterSeconds\": 5}]}");
        if (t_persistent(&t)) {
            md_db_close(t.db);
            t_reopen(&t);
        }
        assert_plan(&t, "{\"find\": \"c\", \"filter\": {\"h\": 7}}", "\"indexName\" : \"h\"", NULL);
        assert_plan(&t, "{\"find\": \"c\", \"filter\": {\"p\": 7, \"q\": {\"$gt\": 1}}}",
                    "\"isPartial\" : true", NULL);
        r = T_OK(&t, "{\"listIndexes\": \"c\"}");
        cr_assert_eq(t_i64(r, "cursor.firstBatch.5.expireAfterSeconds"), 5);
        bson_destroy(r);
        r = T_OK(&t, "{\"validate\": \"c\", \"full\": true}");
        bson_iter_t it;
        cr_assert(t_find(r, "valid", &it) && bson_iter_as_bool(&it), "[%s] validate", t.engine);
        bson_destroy(r);
    }
}
