/*
 * test_q_capped.c -- capped collections and tailable cursors through the
 * command interface and the typed API, on every engine: create and its
 * checks, collStats and listCollections, the ring (by size and by max)
 * removing index entries with the records, MongoDB 3.x's refusals (size
 * changes, deletes), tailable cursors across wraps, awaitData timing (the
 * wait ends at maxTimeMS, or early when another thread inserts),
 * CappedPositionLost, convertToCapped and emptycapped.
 */
#include <pthread.h>
#include <time.h>

#include "test_q_util.h"

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void insert_range(tdb *t, int from, int to)
{
    for (int i = from; i < to; i++)
        T_RUN(t, "{\"insert\": \"c\", \"documents\": [{\"_id\": %d, \"x\": %d}]}", i, i);
}

/* The _ids of a reply's batch array at path, into v (returns how many). */
static int batch_ids(const bson_t *r, const char *path, int *v, int max)
{
    bson_iter_t it, sub;
    int n = 0;
    if (!t_find(r, path, &it) || !BSON_ITER_HOLDS_ARRAY(&it))
        return -1;
    bson_iter_recurse(&it, &sub);
    while (bson_iter_next(&sub) && n < max) {
        bson_iter_t id;
        cr_assert(BSON_ITER_HOLDS_DOCUMENT(&sub));
        bson_iter_recurse(&sub, &id);
        cr_assert(bson_iter_find(&id, "_id"));
        v[n++] = (int)bson_iter_as_int64(&id);
    }
    return n;
}

/* All _ids a find returns (one batch is enough for these tests). */
static int find_ids(tdb *t, const char *find_json, int *v, int max)
{
    bson_t *r = T_OK(t, "%s", find_json);
    int n = batch_ids(r, "cursor.firstBatch", v, max);
    cr_assert_eq(t_i64(r, "cursor.id"), 0, "[%s] more than one batch", t->engine);
    bson_destroy(r);
    return n;
}

static int64_t get_more(tdb *t, int64_t id, const char *extra, int *v, int max, int *n)
{
    bson_t *r = T_OK(t, "{\"getMore\": {\"$numberLong\": \"%lld\"}, \"collection\": \"c\"%s}",
                     (long long)id, extra ? extra : "");
    *n = batch_ids(r, "cursor.nextBatch", v, max);
    int64_t next = t_i64(r, "cursor.id");
    bson_destroy(r);
    return next;
}

static void assert_valid(tdb *t)
{
    bson_t *r = T_OK(t, "{\"validate\": \"c\", \"full\": true}");
    char *j = t_json(r);
    bson_iter_t it;
    cr_assert(t_find(r, "valid", &it) && bson_iter_as_bool(&it), "[%s] %s", t->engine, j);
    bson_free(j);
    bson_destroy(r);
}

Test(q_capped, create_stats_and_list_collections)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"create\": \"c\", \"capped\": true, \"size\": 1000, \"max\": 5}");
        bson_t *r = T_OK(&t, "{\"collStats\": \"c\"}");
        bson_iter_t it;
        cr_assert(t_find(r, "capped", &it) && bson_iter_as_bool(&it), "[%s]", t.engine);
        cr_assert_eq(t_i64(r, "max"), 5);
        cr_assert_eq(t_i64(r, "maxSize"), 1024, "size rounds up to a multiple of 256");
        bson_destroy(r);
        r = T_OK(&t, "{\"listCollections\": 1, \"filter\": {\"name\": \"c\"}}");
        cr_assert(t_find(r, "cursor.firstBatch.0.options.capped", &it) && bson_iter_as_bool(&it));
        cr_assert_eq(t_i64(r, "cursor.firstBatch.0.options.size"), 1024);
        cr_assert_eq(t_i64(r, "cursor.firstBatch.0.options.max"), 5);
        bson_destroy(r);
        /* a plain collection says capped: false */
        T_RUN(&t, "{\"create\": \"plain\"}");
        r = T_OK(&t, "{\"collStats\": \"plain\"}");
        cr_assert(t_find(r, "capped", &it) && !bson_iter_as_bool(&it));
        cr_assert(!t_has(r, "maxSize"));
        bson_destroy(r);
        if (t_persistent(&t)) {
            md_db_close(t.db);
            t_reopen(&t);
            insert_range(&t, 0, 8);
            r = T_OK(&t, "{\"collStats\": \"c\"}");
            cr_assert(t_find(r, "capped", &it) && bson_iter_as_bool(&it), "[%s] reopened",
                      t.engine);
            cr_assert_eq(t_i64(r, "count"), 5, "[%s] max holds after a reopen", t.engine);
            bson_destroy(r);
        }
    }
}

Test(q_capped, bad_inputs)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_ERR(&t, 14832, "specify size:<n> when capped is true",
              "{\"create\": \"a\", \"capped\": true}");
        T_ERR(&t, 14832, NULL, "{\"create\": \"a\", \"capped\": true, \"size\": \"big\"}");
        T_ERR(&t, 2, "size has to be >= 0", "{\"create\": \"a\", \"capped\": true, \"size\": -1}");
        T_ERR(&t, 2, "max in a capped collection has to be < 2^31",
              "{\"create\": \"a\", \"capped\": true, \"size\": 4096, \"max\": 3000000000}");
        T_RUN(&t, "{\"insert\": \"plain\", \"documents\": [{\"_id\": 1}]}");
        T_ERR(&t, 2, "tailable cursor requested on non capped collection",
              "{\"find\": \"plain\", \"tailable\": true}");
        T_ERR(&t, 2, "Cannot set awaitData without tailable",
              "{\"find\": \"plain\", \"awaitData\": true}");
        T_RUN(&t, "{\"create\": \"c\", \"capped\": true, \"size\": 4096}");
        T_ERR(&t, 2, "sort other than {$natural: 1}",
              "{\"find\": \"c\", \"tailable\": true, \"sort\": {\"x\": 1}}");
        T_ERR(&t, 2, "singleBatch",
              "{\"find\": \"c\", \"tailable\": true, \"singleBatch\": true}");
        T_ERR(&t, 2, "invalid command spec", "{\"convertToCapped\": \"plain\"}");
        T_ERR(&t, 26, "does not exist", "{\"convertToCapped\": \"nope\", \"size\": 4096}");
        T_ERR(&t, 20, "non-capped", "{\"emptycapped\": \"plain\"}");
        /* size 0 is WiredTiger's default 4096; max <= 0 is no limit */
        T_RUN(&t, "{\"create\": \"z\", \"capped\": true, \"size\": 0, \"max\": -5}");
        bson_t *r = T_OK(&t, "{\"collStats\": \"z\"}");
        cr_assert_eq(t_i64(r, "maxSize"), 4096);
        bson_destroy(r);
    }
}

/* The ring by count: index entries leave with their records. */
Test(q_capped, ring_wrap_by_max_removes_index_entries)
{
    tdb t;
    int v[64];
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"create\": \"c\", \"capped\": true, \"size\": 100000, \"max\": 5}");
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"x\": 1}, \"name\": "
                  "\"x_1\"}]}");
        insert_range(&t, 0, 23);
        int n = find_ids(&t, "{\"find\": \"c\"}", v, 64);
        cr_assert_eq(n, 5, "[%s] %d documents", t.engine, n);
        for (int i = 0; i < 5; i++)
            cr_assert_eq(v[i], 18 + i, "[%s] natural order keeps the newest", t.engine);
        n = find_ids(&t, "{\"find\": \"c\", \"filter\": {\"x\": {\"$gte\": 0}}, \"hint\": "
                         "\"x_1\"}", v, 64);
        cr_assert_eq(n, 5, "[%s] the x index holds only live documents (%d)", t.engine, n);
        cr_assert_eq(v[0], 18);
        n = find_ids(&t, "{\"find\": \"c\", \"filter\": {\"_id\": 3}}", v, 64);
        cr_assert_eq(n, 0, "[%s] _id 3 is gone from the _id index", t.engine);
        bson_t *r = T_OK(&t, "{\"collStats\": \"c\"}");
        cr_assert_eq(t_i64(r, "count"), 5);
        bson_destroy(r);
        assert_valid(&t);
    }
}

/* The ring by size: what remains is the newest run, in insertion order. */
Test(q_capped, ring_wrap_by_size)
{
    tdb t;
    char pad[101];
    memset(pad, 'p', 100);
    pad[100] = 0;
    static int v[400];
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"create\": \"c\", \"capped\": true, \"size\": 4096}");
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"x\": 1}, \"name\": "
                  "\"x_1\"}]}");
        for (int i = 0; i < 300; i++)
            T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": %d, \"x\": %d, \"p\": "
                      "\"%s\"}]}", i, i, pad);
        int n = find_ids(&t, "{\"find\": \"c\", \"batchSize\": 1000}", v, 400);
        cr_assert(n > 0 && n < 300, "[%s] %d documents left", t.engine, n);
        for (int i = 0; i < n; i++)
            cr_assert_eq(v[i], 300 - n + i, "[%s] position %d holds %d", t.engine, i, v[i]);
        int m = find_ids(&t, "{\"find\": \"c\", \"filter\": {\"x\": {\"$gte\": 0}}, \"hint\": "
                             "\"x_1\", \"batchSize\": 1000}", v, 400);
        cr_assert_eq(m, n, "[%s] index %d vs records %d", t.engine, m, n);
        bson_t *r = T_OK(&t, "{\"collStats\": \"c\"}");
        cr_assert_eq(t_i64(r, "count"), n);
        if (!t_is_mmapv1(&t)) /* mmapv1 counts its extents, record headers included */
            cr_assert(t_i64(r, "size") <= 4096, "[%s] size %lld", t.engine,
                      (long long)t_i64(r, "size"));
        bson_destroy(r);
        assert_valid(&t);
    }
}

Test(q_capped, refused_updates_and_deletes)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"create\": \"c\", \"capped\": true, \"size\": 4096}");
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": 1, \"s\": \"Hello, World!\"}, "
                  "{\"_id\": 2, \"s\": \"abc\"}]}");
        /* same size: allowed (replacement and operator) */
        bson_t *r = T_OK(&t, "{\"update\": \"c\", \"updates\": [{\"q\": {\"_id\": 1}, \"u\": "
                             "{\"s\": \"Hello, Mongo!\"}}]}");
        cr_assert_eq(t_i64(r, "nModified"), 1, "[%s]", t.engine);
        bson_destroy(r);
        r = T_OK(&t, "{\"update\": \"c\", \"updates\": [{\"q\": {\"_id\": 2}, \"u\": "
                     "{\"$set\": {\"s\": \"xyz\"}}}]}");
        cr_assert_eq(t_i64(r, "nModified"), 1);
        bson_destroy(r);
        /* a change of size: 10003 in writeErrors */
        r = T_OK(&t, "{\"update\": \"c\", \"updates\": [{\"q\": {\"_id\": 1}, \"u\": "
                     "{\"$set\": {\"s\": \"Hello!\"}}}]}");
        cr_assert_eq(t_i64(r, "writeErrors.0.code"), 10003, "[%s] %s", t.engine, t_json(r));
        cr_assert(strstr(t_str(r, "writeErrors.0.errmsg"),
                         "Cannot change the size of a document in a capped collection") != NULL);
        bson_destroy(r);
        r = T_OK(&t, "{\"update\": \"c\", \"updates\": [{\"q\": {\"_id\": 2}, \"u\": "
                     "{\"$set\": {\"more\": 1}}}]}");
        cr_assert_eq(t_i64(r, "writeErrors.0.code"), 10003);
        bson_destroy(r);
        /* deletes: IllegalOperation, even when nothing matches */
        r = T_OK(&t, "{\"delete\": \"c\", \"deletes\": [{\"q\": {\"_id\": 1}, \"limit\": 1}]}");
        cr_assert_eq(t_i64(r, "writeErrors.0.code"), 20, "[%s] %s", t.engine, t_json(r));
        cr_assert_str_eq(t_str(r, "writeErrors.0.errmsg"),
                         "cannot remove from a capped collection: test.c");
        cr_assert_eq(t_i64(r, "n"), 0);
        bson_destroy(r);
        r = T_OK(&t, "{\"delete\": \"c\", \"deletes\": [{\"q\": {\"_id\": 99}, \"limit\": 0}]}");
        cr_assert_eq(t_i64(r, "writeErrors.0.code"), 20);
        bson_destroy(r);
        T_ERR(&t, 20, "cannot remove from a capped collection",
              "{\"findAndModify\": \"c\", \"query\": {\"_id\": 1}, \"remove\": true}");
        r = T_OK(&t, "{\"count\": \"c\"}");
        cr_assert_eq(t_i64(r, "n"), 2);
        bson_destroy(r);
        r = T_OK(&t, "{\"find\": \"c\", \"filter\": {\"_id\": 1}}");
        cr_assert_str_eq(t_str(r, "cursor.firstBatch.0.s"), "Hello, Mongo!");
        bson_destroy(r);
        T_ERR(&t, 115, "capped", "{\"compact\": \"c\"}");
        assert_valid(&t);
    }
}

/* A tailing reader that keeps up sees every document once, in order, while
 * the ring wraps many times under it. */
Test(q_capped, tailable_across_wraps)
{
    tdb t;
    int v[16], n;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"create\": \"c\", \"capped\": true, \"size\": 100000, \"max\": 5}");
        insert_range(&t, 0, 3);
        bson_t *r = T_OK(&t, "{\"find\": \"c\", \"tailable\": true}");
        int64_t id = t_i64(r, "cursor.id");
        cr_assert_neq(id, 0, "[%s] a tailable cursor stays open at the end", t.engine);
        cr_assert_eq(batch_ids(r, "cursor.firstBatch", v, 16), 3);
        bson_destroy(r);
        cr_assert_eq(get_more(&t, id, NULL, v, 16, &n), id);
        cr_assert_eq(n, 0, "[%s] nothing new yet", t.engine);
        int next = 3;
        for (int round = 0; round < 12; round++) {
            insert_range(&t, next, next + 4);
            cr_assert_eq(get_more(&t, id, NULL, v, 16, &n), id);
            cr_assert_eq(n, 4, "[%s] round %d: %d new", t.engine, round, n);
            for (int i = 0; i < 4; i++)
                cr_assert_eq(v[i], next + i);
            next += 4;
        }
        /* the filter applies to what arrives */
        r = T_OK(&t, "{\"find\": \"c\", \"tailable\": true, \"filter\": {\"x\": {\"$gte\": %d}}}",
                 next + 2);
        int64_t id2 = t_i64(r, "cursor.id");
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 0);
        cr_assert_neq(id2, 0, "[%s] open although nothing matched", t.engine);
        bson_destroy(r);
        insert_range(&t, next, next + 4);
        cr_assert_eq(get_more(&t, id2, NULL, v, 16, &n), id2);
        cr_assert_eq(n, 2);
        cr_assert_eq(v[0], next + 2);
        /* empty collection: closed at once (SERVER-13955) */
        T_RUN(&t, "{\"create\": \"e\", \"capped\": true, \"size\": 4096}");
        r = T_OK(&t, "{\"find\": \"e\", \"tailable\": true}");
        cr_assert_eq(t_i64(r, "cursor.id"), 0);
        bson_destroy(r);
    }
}

Test(q_capped, capped_position_lost)
{
    tdb t;
    int v[16], n;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"create\": \"c\", \"capped\": true, \"size\": 100000, \"max\": 5}");
        insert_range(&t, 0, 5);
        bson_t *r = T_OK(&t, "{\"find\": \"c\", \"tailable\": true, \"batchSize\": 2}");
        int64_t id = t_i64(r, "cursor.id");
        bson_destroy(r);
        /* the cursor rests on _id 1; six more inserts overwrite it */
        insert_range(&t, 5, 11);
        T_ERR(&t, 136, "CollectionScan died",
              "{\"getMore\": {\"$numberLong\": \"%lld\"}, \"collection\": \"c\"}", (long long)id);
        T_ERR(&t, 43, NULL, "{\"getMore\": {\"$numberLong\": \"%lld\"}, \"collection\": \"c\"}",
              (long long)id);
        /* a plain (not tailable) scan of a capped collection dies the same way */
        r = T_OK(&t, "{\"find\": \"c\", \"batchSize\": 1}");
        id = t_i64(r, "cursor.id");
        bson_destroy(r);
        cr_assert_neq(id, 0);
        insert_range(&t, 11, 20);
        T_ERR(&t, 136, NULL, "{\"getMore\": {\"$numberLong\": \"%lld\"}, \"collection\": \"c\"}",
              (long long)id);
        /* a cursor that keeps up never loses its place */
        r = T_OK(&t, "{\"find\": \"c\", \"tailable\": true}");
        id = t_i64(r, "cursor.id");
        bson_destroy(r);
        insert_range(&t, 20, 24);
        cr_assert_eq(get_more(&t, id, NULL, v, 16, &n), id);
        cr_assert_eq(n, 4);
    }
}

typedef struct inserter {
    md_db *db;
    long delay_ms;
    int id;
} inserter;

static void *insert_later(void *arg)
{
    inserter *in = arg;
    char json[128];
    bson_t r;
    t_sleep_ms(in->delay_ms);
    snprintf(json, sizeof json, "{\"insert\": \"c\", \"documents\": [{\"_id\": %d, \"x\": 0}]}",
             in->id);
    md_db_command_json(in->db, json, &r, NULL);
    bson_destroy(&r);
    return NULL;
}

Test(q_capped, await_data_timing)
{
    tdb t;
    int v[16], n;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"create\": \"c\", \"capped\": true, \"size\": 4096}");
        insert_range(&t, 0, 1);
        bson_t *r = T_OK(&t, "{\"find\": \"c\", \"tailable\": true, \"awaitData\": true}");
        int64_t id = t_i64(r, "cursor.id");
        bson_destroy(r);
        cr_assert_neq(id, 0);
        /* nothing comes: the getMore waits about maxTimeMS, then answers empty */
        int64_t t0 = now_ms();
        cr_assert_eq(get_more(&t, id, ", \"maxTimeMS\": 300", v, 16, &n), id);
        int64_t took = now_ms() - t0;
        cr_assert_eq(n, 0);
        cr_assert(took >= 290 && took < 900, "[%s] waited %lld ms", t.engine, (long long)took);
        /* no maxTimeMS: MongoDB's 1000 ms */
        t0 = now_ms();
        cr_assert_eq(get_more(&t, id, NULL, v, 16, &n), id);
        took = now_ms() - t0;
        cr_assert(took >= 990 && took < 1800, "[%s] default wait %lld ms", t.engine,
                  (long long)took);
        /* an insert from another thread ends the wait early */
        pthread_t th;
        inserter in = {t.db, 100, 7};
        pthread_create(&th, NULL, insert_later, &in);
        t0 = now_ms();
        cr_assert_eq(get_more(&t, id, ", \"maxTimeMS\": 3000", v, 16, &n), id);
        took = now_ms() - t0;
        pthread_join(th, NULL);
        cr_assert_eq(n, 1, "[%s] the new document arrives", t.engine);
        cr_assert_eq(v[0], 7);
        cr_assert(took >= 80 && took < 1500, "[%s] woke after %lld ms", t.engine,
                  (long long)took);
        /* maxTimeMS on a cursor without awaitData: BadValue */
        r = T_OK(&t, "{\"find\": \"c\", \"tailable\": true}");
        int64_t plain = t_i64(r, "cursor.id");
        bson_destroy(r);
        T_ERR(&t, 2, "non-awaitData", "{\"getMore\": {\"$numberLong\": \"%lld\"}, \"collection\": "
              "\"c\", \"maxTimeMS\": 10}", (long long)plain);
        /* tailable without awaitData never waits */
        t0 = now_ms();
        cr_assert_eq(get_more(&t, plain, NULL, v, 16, &n), plain);
        cr_assert(now_ms() - t0 < 200);
    }
}

typedef struct waiter {
    md_db *db;
    int64_t id;
    int code;
    int64_t took;
} waiter;

static void *get_more_thread(void *arg)
{
    waiter *w = arg;
    char json[160];
    bson_t r;
    md_error err;
    snprintf(json, sizeof json, "{\"getMore\": {\"$numberLong\": \"%lld\"}, \"collection\": "
             "\"c\", \"maxTimeMS\": 5000}", (long long)w->id);
    int64_t t0 = now_ms();
    int rc = md_db_command_json(w->db, json, &r, &err);
    w->took = now_ms() - t0;
    w->code = rc ? err.code : 0;
    bson_destroy(&r);
    return NULL;
}

/* A waiting getMore holds no lock: a drop or killCursors ends it at once. */
Test(q_capped, waiting_cursor_killed)
{
    tdb t;
    bson_t *r;
    FOR_EACH_ENGINE(t) {
        for (int how = 0; how < 3; how++) {
            T_RUN(&t, "{\"create\": \"c\", \"capped\": true, \"size\": 4096}");
            insert_range(&t, 0, 1);
            r = T_OK(&t, "{\"find\": \"c\", \"tailable\": true, \"awaitData\": true}");
            waiter w = {t.db, t_i64(r, "cursor.id"), -1, 0};
            bson_destroy(r);
            pthread_t th;
            pthread_create(&th, NULL, get_more_thread, &w);
            t_sleep_ms(150);
            if (how != 0)
                T_RUN(&t, "{\"killCursors\": \"c\", \"cursors\": [{\"$numberLong\": \"%lld\"}]}",
                      (long long)w.id);
            if (how != 1) /* 2: a drop right after the kill, racing the waiter */
                T_RUN(&t, "{\"drop\": \"c\"}");
            pthread_join(th, NULL);
            if (how == 2)
                cr_assert(w.code == 175 || w.code == 43, "[%s] code %d", t.engine, w.code);
            else
                cr_assert_eq(w.code, how == 0 ? 175 : 43, "[%s] code %d", t.engine, w.code);
            cr_assert(w.took < 2500, "[%s] the waiter woke after %lld ms", t.engine,
                      (long long)w.took);
            if (how == 1)
                T_RUN(&t, "{\"drop\": \"c\"}");
            r = T_OK(&t, "{\"serverStatus\": 1}");
            cr_assert_eq(t_i64(r, "metrics.cursor.open.total"), 0, "[%s] no cursor left",
                         t.engine);
            bson_destroy(r);
        }
    }
}

Test(q_capped, typed_api_tailable_cursor)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"create\": \"c\", \"capped\": true, \"size\": 4096}");
        insert_range(&t, 0, 2);
        md_collection *coll = md_db_get_collection(t.db, "c");
        bson_t *opts = BCON_NEW("tailable", BCON_BOOL(true), "awaitData", BCON_BOOL(true),
                                "maxAwaitTimeMS", BCON_INT32(50));
        md_cursor *cur = md_collection_find_with_opts(coll, NULL, opts);
        const bson_t *doc;
        int seen = 0;
        cr_assert(md_cursor_more(cur));
        while (md_cursor_next(cur, &doc))
            seen++;
        cr_assert_eq(seen, 2, "[%s]", t.engine);
        cr_assert(md_cursor_more(cur), "[%s] the tailable cursor stays open", t.engine);
        int64_t t0 = now_ms();
        cr_assert(!md_cursor_next(cur, &doc), "nothing new");
        cr_assert(now_ms() - t0 >= 40, "md_cursor_next waited maxAwaitTimeMS");
        cr_assert(!md_cursor_error(cur, NULL));
        insert_range(&t, 2, 3);
        cr_assert(md_cursor_next(cur, &doc), "[%s] the new document", t.engine);
        bson_iter_t it;
        cr_assert(bson_iter_init_find(&it, doc, "_id") && bson_iter_as_int64(&it) == 2);
        md_cursor_destroy(cur);
        /* tailable on a plain collection: an error, no documents */
        T_RUN(&t, "{\"insert\": \"plain\", \"documents\": [{}]}");
        md_collection *pc = md_db_get_collection(t.db, "plain");
        cur = md_collection_find_with_opts(pc, NULL, opts);
        md_error err;
        cr_assert(!md_cursor_next(cur, &doc));
        cr_assert(md_cursor_error(cur, &err));
        cr_assert_eq(err.code, 2);
        cr_assert(!md_cursor_more(cur));
        md_cursor_destroy(cur);
        md_collection_destroy(pc);
        bson_destroy(opts);
        md_collection_destroy(coll);
    }
}

Test(q_capped, convert_to_capped_and_emptycapped)
{
    tdb t;
    int v[64];
    char pad[301];
    memset(pad, 'p', 300);
    pad[300] = 0;
    FOR_EACH_ENGINE(t) {
        for (int i = 0; i < 20; i++)
            T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": %d, \"x\": %d, \"p\": "
                      "\"%s\"}]}", i, i, pad);
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"x\": 1}, \"name\": "
                  "\"x_1\"}]}");
        T_RUN(&t, "{\"convertToCapped\": \"c\", \"size\": 100000}");
        bson_t *r = T_OK(&t, "{\"collStats\": \"c\"}");
        bson_iter_t it;
        cr_assert(t_find(r, "capped", &it) && bson_iter_as_bool(&it), "[%s]", t.engine);
        cr_assert_eq(t_i64(r, "count"), 20);
        cr_assert_eq(t_i64(r, "nindexes"), 1, "[%s] only _id_ is kept", t.engine);
        bson_destroy(r);
        int n = find_ids(&t, "{\"find\": \"c\"}", v, 64);
        cr_assert_eq(n, 20);
        for (int i = 0; i < 20; i++)
            cr_assert_eq(v[i], i, "[%s] natural order kept", t.engine);
        n = find_ids(&t, "{\"find\": \"c\", \"filter\": {\"_id\": 13}}", v, 64);
        cr_assert_eq(n, 1);
        r = T_OK(&t, "{\"delete\": \"c\", \"deletes\": [{\"q\": {}, \"limit\": 0}]}");
        cr_assert_eq(t_i64(r, "writeErrors.0.code"), 20, "[%s] now capped", t.engine);
        bson_destroy(r);
        assert_valid(&t);
        /* a smaller ring keeps the newest (20 documents of 330 bytes) */
        T_RUN(&t, "{\"convertToCapped\": \"c\", \"size\": 4096}");
        n = find_ids(&t, "{\"find\": \"c\"}", v, 64);
        cr_assert(n > 0 && n < 20, "[%s] %d left", t.engine, n);
        cr_assert_eq(v[n - 1], 19);
        T_RUN(&t, "{\"emptycapped\": \"c\"}");
        n = find_ids(&t, "{\"find\": \"c\"}", v, 64);
        cr_assert_eq(n, 0);
        n = find_ids(&t, "{\"find\": \"c\", \"filter\": {\"_id\": 19}}", v, 64);
        cr_assert_eq(n, 0, "[%s] the _id index is empty too", t.engine);
        insert_range(&t, 100, 101);
        n = find_ids(&t, "{\"find\": \"c\", \"filter\": {\"_id\": 100}}", v, 64);
        cr_assert_eq(n, 1);
        assert_valid(&t);
    }
}

/* autoIndexId: false (3.x, deprecated since 3.2): no _id index, so no
 * uniqueness; the index can be created later. */
Test(q_capped, auto_index_id_false)
{
    tdb t;
    int v[16];
    FOR_EACH_ENGINE(t) {
        bson_t *r = T_OK(&t, "{\"create\": \"c\", \"capped\": true, \"size\": 4096, "
                             "\"max\": 3, \"autoIndexId\": false}");
        cr_assert(strstr(t_str(r, "note"), "autoIndexId option is deprecated") != NULL);
        bson_destroy(r);
        r = T_OK(&t, "{\"listIndexes\": \"c\"}");
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 0, "[%s] no _id index", t.engine);
        bson_destroy(r);
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": 1, \"x\": 1}, {\"_id\": 1, "
                  "\"x\": 2}]}");
        int n = find_ids(&t, "{\"find\": \"c\", \"filter\": {\"_id\": 1}}", v, 16);
        cr_assert_eq(n, 2, "[%s] duplicates are allowed without the index", t.engine);
        insert_range(&t, 10, 13);
        n = find_ids(&t, "{\"find\": \"c\"}", v, 16);
        cr_assert_eq(n, 3);
        cr_assert_eq(v[0], 10, "[%s] the ring works without indexes", t.engine);
        assert_valid(&t);
        /* a plain collection gets its _id index later */
        T_RUN(&t, "{\"create\": \"p\", \"autoIndexId\": false}");
        T_RUN(&t, "{\"insert\": \"p\", \"documents\": [{\"_id\": 5}, {\"_id\": 6}]}");
        T_RUN(&t, "{\"createIndexes\": \"p\", \"indexes\": [{\"key\": {\"_id\": 1}, \"name\": "
                  "\"_id_\"}]}");
        r = T_OK(&t, "{\"insert\": \"p\", \"documents\": [{\"_id\": 5}]}");
        cr_assert_eq(t_i64(r, "writeErrors.0.code"), 11000, "[%s] unique now", t.engine);
        bson_destroy(r);
        r = T_OK(&t, "{\"find\": \"p\", \"filter\": {\"_id\": 6}}");
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 1);
        bson_destroy(r);
        if (t_persistent(&t)) {
            md_db_close(t.db);
            t_reopen(&t);
            r = T_OK(&t, "{\"listIndexes\": \"c\"}");
            cr_assert_eq(t_len(r, "cursor.firstBatch"), 0, "[%s] after a reopen", t.engine);
            bson_destroy(r);
            insert_range(&t, 20, 21);
            n = find_ids(&t, "{\"find\": \"c\"}", v, 16);
            cr_assert_eq(n, 3);
            cr_assert_eq(v[2], 20);
        }
    }
}

Test(q_capped, clone_collection_as_capped)
{
    tdb t;
    int v[64];
    FOR_EACH_ENGINE(t) {
        insert_range(&t, 0, 30);
        T_RUN(&t, "{\"cloneCollectionAsCapped\": \"c\", \"toCollection\": \"d\", \"size\": "
                  "100000, \"writeConcern\": {\"w\": 1}}");
        bson_t *r = T_OK(&t, "{\"collStats\": \"d\"}");
        bson_iter_t it;
        cr_assert(t_find(r, "capped", &it) && bson_iter_as_bool(&it), "[%s]", t.engine);
        cr_assert_eq(t_i64(r, "count"), 30);
        bson_destroy(r);
        r = T_OK(&t, "{\"find\": \"d\", \"batchSize\": 100}");
        int n = batch_ids(r, "cursor.firstBatch", v, 64);
        bson_destroy(r);
        cr_assert_eq(n, 30);
        for (int i = 0; i < n; i++)
            cr_assert_eq(v[i], i, "[%s] natural order", t.engine);
        r = T_OK(&t, "{\"collStats\": \"c\"}");
        cr_assert(t_find(r, "capped", &it) && !bson_iter_as_bool(&it), "the source stays");
        cr_assert_eq(t_i64(r, "count"), 30);
        bson_destroy(r);
        T_ERR(&t, 48, NULL, "{\"cloneCollectionAsCapped\": \"c\", \"toCollection\": \"d\", "
              "\"size\": 4096}");
        T_ERR(&t, 26, "does not exist", "{\"cloneCollectionAsCapped\": \"x\", \"toCollection\": "
              "\"y\", \"size\": 4096}");
        T_ERR(&t, 2, "invalid command spec", "{\"cloneCollectionAsCapped\": \"c\", \"size\": 4096}");
        T_ERR(&t, 2, "invalid command spec", "{\"cloneCollectionAsCapped\": \"c\", "
              "\"toCollection\": \"y\"}");
    }
}

/* The TTL monitor passes capped collections by (their documents cannot be
 * deleted) and goes on with the others. */
Test(q_capped, ttl_monitor_skips_capped_collections)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"create\": \"a\", \"capped\": true, \"size\": 4096}");
        T_RUN(&t, "{\"createIndexes\": \"a\", \"indexes\": [{\"key\": {\"at\": 1}, \"name\": "
                  "\"at\", \"expireAfterSeconds\": 1}]}");
        T_RUN(&t, "{\"createIndexes\": \"z\", \"indexes\": [{\"key\": {\"at\": 1}, \"name\": "
                  "\"at\", \"expireAfterSeconds\": 1}]}");
        T_RUN(&t, "{\"insert\": \"a\", \"documents\": [{\"at\": {\"$date\": 0}}]}");
        T_RUN(&t, "{\"insert\": \"z\", \"documents\": [{\"at\": {\"$date\": 0}}]}");
        bson_t *r = T_OK(&t, "{\"ttlMonitor\": 1}");
        cr_assert_eq(t_i64(r, "deleted"), 1, "[%s] only the plain collection's", t.engine);
        bson_destroy(r);
        r = T_OK(&t, "{\"count\": \"a\"}");
        cr_assert_eq(t_i64(r, "n"), 1);
        bson_destroy(r);
    }
}
