/*
 * test_q_cmd_admin.c -- catalog and storage commands end to end on every
 * registered engine: create / drop / listCollections / collMod,
 * createIndexes over existing data (and a failed unique build that leaves
 * nothing), dropIndexes / listIndexes, collStats (with mmapv1's record
 * sizes), validate, compact, serverStatus, reopening a database, and the
 * handle that refuses writes after an engine failure.
 */
#include "q_int.h"
#include "test_q_util.h"

static bool t_true(const bson_t *r, const char *path)
{
    bson_iter_t it;
    return t_find(r, path, &it) && BSON_ITER_HOLDS_BOOL(&it) && bson_iter_bool(&it);
}

static void assert_valid(tdb *t, const char *coll)
{
    bson_t *r = T_OK(t, "{\"validate\": \"%s\", \"full\": true}", coll);
    char *j = t_json(r);
    cr_assert(t_true(r, "valid"), "[%s] validate: %s", t->engine, j);
    cr_assert_eq(t_len(r, "errors"), 0, "%s", j);
    bson_free(j);
    bson_destroy(r);
}

/* ---- create / drop / listCollections ------------------------------------------------ */

Test(q_cmd_admin, create_and_errors)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"create\": \"c\", \"writeConcern\": {\"w\": 1}}");
        T_ERR(&t, 48, "a collection 'test.c' already exists", "{\"create\": \"c\"}");
        T_ERR(&t, 72, "not a valid collection option", "{\"create\": \"d\", \"bogus\": 1}");
        T_ERR(&t, 73, NULL, "{\"create\": \"system.x\"}");
        T_ERR(&t, 73, NULL, "{\"create\": 12}");
        T_RUN(&t, "{\"create\": \"np\", \"noPadding\": true}");
        T_RUN(&t, "{\"create\": \"pf\", \"usePowerOf2Sizes\": false}");
        bson_t *r = T_OK(&t, "{\"listCollections\": 1}");
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 3);
        cr_assert_eq(t_i64(r, "cursor.id"), 0);
        cr_assert_str_eq(t_str(r, "cursor.ns"), "test.$cmd.listCollections");
        cr_assert_str_eq(t_str(r, "cursor.firstBatch.0.name"), "c");
        cr_assert_str_eq(t_str(r, "cursor.firstBatch.0.type"), "collection");
        cr_assert_not(t_true(r, "cursor.firstBatch.0.info.readOnly"));
        cr_assert_str_eq(t_str(r, "cursor.firstBatch.0.idIndex.name"), "_id_");
        cr_assert_str_eq(t_str(r, "cursor.firstBatch.0.idIndex.ns"), "test.c");
        cr_assert(t_true(r, "cursor.firstBatch.1.options.noPadding"));
        bson_destroy(r);
        r = T_OK(&t, "{\"listCollections\": 1, \"filter\": {\"name\": \"pf\"}}");
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 1);
        cr_assert_str_eq(t_str(r, "cursor.firstBatch.0.name"), "pf");
        bson_destroy(r);
    }
}

Test(q_cmd_admin, drop)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"a\": 1}]}");
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"a\": 1}, \"name\": "
                  "\"a_1\"}]}");
        bson_t *r = T_OK(&t, "{\"drop\": \"c\"}");
        cr_assert_str_eq(t_str(r, "ns"), "test.c");
        cr_assert_eq(t_i64(r, "nIndexesWas"), 2);
        bson_destroy(r);
        T_ERR(&t, 26, "ns not found", "{\"drop\": \"c\"}");
        r = T_OK(&t, "{\"count\": \"c\"}");
        cr_assert_eq(t_i64(r, "n"), 0);
        bson_destroy(r);
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"a\": 1}]}");
        r = T_OK(&t, "{\"listIndexes\": \"c\"}");
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 1, "a recreated collection starts over");
        bson_destroy(r);
        T_RUN(&t, "{\"dropDatabase\": 1}");
        r = T_OK(&t, "{\"listCollections\": 1}");
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 0);
        bson_destroy(r);
    }
}

/* ---- collMod ------------------------------------------------------------------------ */

Test(q_cmd_admin, coll_mod_no_padding)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"create\": \"c\"}");
        bson_t *r = T_OK(&t, "{\"collMod\": \"c\", \"noPadding\": true}");
        cr_assert(t_has(r, "noPadding_old") && !t_true(r, "noPadding_old"));
        cr_assert(t_true(r, "noPadding_new"));
        bson_destroy(r);
        r = T_OK(&t, "{\"collStats\": \"c\"}");
        char path[64];
        snprintf(path, sizeof path, "%s.allocationStrategy", t.engine);
        if (t_in_place(&t))
            cr_assert_str_eq(t_str(r, path), "noPadding");
        else
            cr_assert_not(t_has(r, path), "no allocation strategy on a rewriting engine");
        bson_destroy(r);
        r = T_OK(&t, "{\"listCollections\": 1}");
        cr_assert(t_true(r, "cursor.firstBatch.0.options.noPadding"));
        bson_destroy(r);
        r = T_OK(&t, "{\"collMod\": \"c\", \"usePowerOf2Sizes\": true}");
        cr_assert_not(t_true(r, "usePowerOf2Sizes_old"));
        cr_assert(t_true(r, "usePowerOf2Sizes_new"));
        bson_destroy(r);
        T_ERR(&t, 26, NULL, "{\"collMod\": \"nope\", \"noPadding\": true}");
        T_ERR(&t, 72, NULL, "{\"collMod\": \"c\", \"zzz\": true}");
    }
}

/* collMod after a reopen (options loaded from the catalog) and with options
 * too large for an inline bson_t: the options must be replaced by copying,
 * never by assigning a bson_t (its buffer may point into the struct). */
Test(q_cmd_admin, coll_mod_after_reopen_and_with_large_options)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"create\": \"c\", \"noPadding\": true}");
        T_RUN(&t, "{\"create\": \"big\", \"storageEngine\": {\"wiredTiger\": {\"configString\": \"%0150d\"}}}",
              7);
        if (t_persistent(&t)) {
            md_db_close(t.db);
            t_reopen(&t);
        }
        for (int i = 0; i < 2; i++) {
            bson_t *r = T_OK(&t, "{\"collMod\": \"c\", \"noPadding\": %s}", i ? "true" : "false");
            cr_assert(t_true(r, "noPadding_old") == !i);
            bson_destroy(r);
            T_RUN(&t, "{\"collMod\": \"big\", \"noPadding\": %s}", i ? "false" : "true");
        }
        for (int pass = 0; pass < 2; pass++) {
            bson_t *r = T_OK(&t, "{\"listCollections\": 1, \"filter\": {\"name\": \"big\"}}");
            cr_assert_eq(t_len(r, "cursor.firstBatch"), 1);
            cr_assert_eq(strlen(t_str(r, "cursor.firstBatch.0.options.storageEngine.wiredTiger.configString")), 150);
            cr_assert_not(t_true(r, "cursor.firstBatch.0.options.noPadding"));
            bson_destroy(r);
            r = T_OK(&t, "{\"listCollections\": 1, \"filter\": {\"name\": \"c\"}}");
            cr_assert(t_true(r, "cursor.firstBatch.0.options.noPadding"));
            bson_destroy(r);
            if (t_persistent(&t)) {
                md_db_close(t.db);
                t_reopen(&t);
            }
        }
    }
}

/* ---- indexes ------------------------------------------------------------------------ */

Test(q_cmd_admin, create_indexes_over_existing_data)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        for (int i = 0; i < 50; i++)
            T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": %d, \"a\": %d, \"t\": "
                      "[%d, %d]}]}", i, i % 5, i, i + 100);
        bson_t *r = T_OK(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"a\": 1}, "
                             "\"name\": \"a_1\"}, {\"key\": {\"t\": -1}, \"name\": \"t_-1\"}]}");
        cr_assert_not(t_true(r, "createdCollectionAutomatically"));
        cr_assert_eq(t_i64(r, "numIndexesBefore"), 1);
        cr_assert_eq(t_i64(r, "numIndexesAfter"), 3);
        cr_assert_not(t_has(r, "note"));
        bson_destroy(r);
        r = T_OK(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"a\": 1}, "
                     "\"name\": \"a_1\"}]}");
        cr_assert_eq(t_i64(r, "numIndexesAfter"), 3);
        cr_assert_str_eq(t_str(r, "note"), "all indexes already exist");
        bson_destroy(r);
        r = T_OK(&t, "{\"count\": \"c\", \"query\": {\"a\": 3}}");
        cr_assert_eq(t_i64(r, "n"), 10, "found through the new index");
        bson_destroy(r);
        r = T_OK(&t, "{\"find\": \"c\", \"filter\": {\"t\": 120}}");
        cr_assert_eq(t_i64(r, "cursor.firstBatch.0._id"), 20, "multikey index");
        bson_destroy(r);
        r = T_OK(&t, "{\"listIndexes\": \"c\"}");
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 3);
        cr_assert_str_eq(t_str(r, "cursor.ns"), "test.$cmd.listIndexes.c");
        cr_assert_str_eq(t_str(r, "cursor.firstBatch.1.name"), "a_1");
        cr_assert_eq(t_i64(r, "cursor.firstBatch.1.key.a"), 1);
        cr_assert_str_eq(t_str(r, "cursor.firstBatch.1.ns"), "test.c");
        cr_assert_eq(t_i64(r, "cursor.firstBatch.1.v"), 2);
        bson_destroy(r);
        r = T_OK(&t, "{\"createIndexes\": \"fresh\", \"indexes\": [{\"key\": {\"z\": 1}}]}");
        cr_assert(t_true(r, "createdCollectionAutomatically"));
        bson_destroy(r);
        r = T_OK(&t, "{\"listIndexes\": \"fresh\"}");
        cr_assert_str_eq(t_str(r, "cursor.firstBatch.1.name"), "z_1", "default index name");
        bson_destroy(r);
        assert_valid(&t, "c");
        T_ERR(&t, 85, NULL, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"a\": 1}, "
                            "\"name\": \"other\"}]}");
        T_ERR(&t, 86, NULL, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"b\": 1}, "
                            "\"name\": \"a_1\"}]}");
        T_ERR(&t, 67, NULL, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {}, "
                            "\"name\": \"e\"}]}");
        T_ERR(&t, 2, NULL, "{\"createIndexes\": \"c\", \"indexes\": []}");
        T_ERR(&t, 26, "ns does not exist", "{\"listIndexes\": \"nope\"}");
    }
}

Test(q_cmd_admin, failed_unique_build_leaves_nothing)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": 1, \"u\": 1}, {\"_id\": 2, "
                  "\"u\": 2}, {\"_id\": 3, \"u\": 1}]}");
        bson_t *before = T_OK(&t, "{\"collStats\": \"c\"}");
        T_ERR(&t, 11000, "E11000 duplicate key error collection: test.c index: u_1 dup key: "
                         "{ u: 1 }",
              "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"w\": 1}, \"name\": \"w_1\"}, "
              "{\"key\": {\"u\": 1}, \"name\": \"u_1\", \"unique\": true}]}");
        bson_t *r = T_OK(&t, "{\"listIndexes\": \"c\"}");
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 1, "neither index was kept");
        bson_destroy(r);
        r = T_OK(&t, "{\"collStats\": \"c\"}");
        cr_assert_eq(t_i64(r, "nindexes"), 1);
        cr_assert_eq(t_i64(r, "totalIndexSize"), t_i64(before, "totalIndexSize"));
        bson_destroy(r);
        bson_destroy(before);
        assert_valid(&t, "c");
        r = T_OK(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"u\": 1}, \"name\": "
                     "\"u_1\"}]}");
        cr_assert_eq(t_i64(r, "numIndexesAfter"), 2, "the name is free again");
        bson_destroy(r);
        if (t_persistent(&t)) {
            md_db_close(t.db);
            t_reopen(&t);
            r = T_OK(&t, "{\"listIndexes\": \"c\"}");
            cr_assert_eq(t_len(r, "cursor.firstBatch"), 2);
            bson_destroy(r);
        }
    }
}

Test(q_cmd_admin, drop_indexes)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"a\": 1, \"b\": 2, \"c\": 3}]}");
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"a\": 1}, \"name\": "
                  "\"a_1\"}, {\"key\": {\"b\": 1}, \"name\": \"b_1\"}, {\"key\": {\"c\": 1}, "
                  "\"name\": \"c_1\"}]}");
        bson_t *r = T_OK(&t, "{\"dropIndexes\": \"c\", \"index\": \"a_1\"}");
        cr_assert_eq(t_i64(r, "nIndexesWas"), 4);
        bson_destroy(r);
        r = T_OK(&t, "{\"dropIndexes\": \"c\", \"index\": {\"b\": 1}}");
        cr_assert_eq(t_i64(r, "nIndexesWas"), 3);
        bson_destroy(r);
        T_ERR(&t, 72, "cannot drop _id index", "{\"dropIndexes\": \"c\", \"index\": \"_id_\"}");
        T_ERR(&t, 27, "index not found with name [zz]", "{\"dropIndexes\": \"c\", \"index\": "
                                                       "\"zz\"}");
        T_ERR(&t, 27, NULL, "{\"dropIndexes\": \"c\", \"index\": {\"q\": 1}}");
        T_ERR(&t, 26, NULL, "{\"dropIndexes\": \"nope\", \"index\": \"*\"}");
        r = T_OK(&t, "{\"dropIndexes\": \"c\", \"index\": \"*\"}");
        cr_assert_eq(t_i64(r, "nIndexesWas"), 2);
        bson_destroy(r);
        r = T_OK(&t, "{\"listIndexes\": \"c\"}");
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 1);
        cr_assert_str_eq(t_str(r, "cursor.firstBatch.0.name"), "_id_");
        bson_destroy(r);
        assert_valid(&t, "c");
    }
}

/* ---- collStats ----------------------------------------------------------------------- */

/* A document of exactly `size` bytes: {_id: n, s: "xxx..."}. */
static void insert_sized(tdb *t, const char *coll, int id, int size)
{
    int slen = size - 22; /* 4 len + 9 _id int32 + 3 "s" header + 4 strlen + NUL + EOO */
    char *s = malloc((size_t)slen + 1);
    memset(s, 's', (size_t)slen);
    s[slen] = '\0';
    bson_t *doc = BCON_NEW("_id", BCON_INT32(id), "s", BCON_UTF8(s));
    cr_assert_eq(doc->len, (uint32_t)size);
    md_collection *c = md_db_get_collection(t->db, coll);
    md_error err;
    cr_assert_eq(md_collection_insert_one(c, doc, NULL, NULL, &err), 0, "%s", err.message);
    md_collection_destroy(c);
    bson_destroy(doc);
    free(s);
}

Test(q_cmd_admin, coll_stats)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"create\": \"np\", \"noPadding\": true}");
        insert_sized(&t, "p2", 1, 100);
        insert_sized(&t, "np", 1, 100);
        bson_t *r = T_OK(&t, "{\"collStats\": \"p2\"}");
        cr_assert_str_eq(t_str(r, "ns"), "test.p2");
        cr_assert_eq(t_i64(r, "count"), 1);
        cr_assert_gt(t_i64(r, "storageSize"), 0);
        cr_assert(t_has(r, "avgObjSize") && t_has(r, "capped"));
        cr_assert_eq(t_i64(r, "nindexes"), 1);
        cr_assert_gt(t_i64(r, "totalIndexSize"), 0);
        cr_assert_eq(t_i64(r, "indexSizes._id_"), t_i64(r, "totalIndexSize"));
        char path[64];
        snprintf(path, sizeof path, "%s.%s", t.engine,
                 t_in_place(&t) ? "inPlaceUpdates" : "bytesWritten");
        cr_assert(t_has(r, path), "engine subdocument with update counters");
        if (t_is_mmapv1(&t))
            cr_assert_eq(t_i64(r, "size"), 112, "100 bytes + 16 header -> 128 slot");
        bson_destroy(r);
        r = T_OK(&t, "{\"collStats\": \"np\"}");
        if (t_is_mmapv1(&t))
            cr_assert_eq(t_i64(r, "size"), 100, "noPadding: exact fit");
        bson_destroy(r);
        r = T_OK(&t, "{\"collStats\": \"p2\", \"scale\": 1024}");
        cr_assert_eq(t_i64(r, "size"), 0);
        bson_destroy(r);
        T_ERR(&t, 26, "Collection [test.nope] not found.", "{\"collStats\": \"nope\"}");
        T_ERR(&t, 2, NULL, "{\"collStats\": \"p2\", \"scale\": 0}");
    }
}

/* ---- validate / compact / serverStatus -------------------------------------------------- */

Test(q_cmd_admin, validate_shape)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        for (int i = 0; i < 30; i++)
            T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": %d, \"x\": [%d, %d]}]}", i,
                  i, -i);
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"x\": 1}, \"name\": "
                  "\"x_1\"}]}");
        bson_t *r = T_OK(&t, "{\"validate\": \"c\"}");
        cr_assert_str_eq(t_str(r, "ns"), "test.c");
        cr_assert_eq(t_i64(r, "nInvalidDocuments"), 0);
        cr_assert_eq(t_i64(r, "nrecords"), 30);
        cr_assert_eq(t_i64(r, "nIndexes"), 2);
        bson_iter_t it, k;
        cr_assert(t_find(r, "keysPerIndex", &it));
        bson_iter_recurse(&it, &k);
        cr_assert(bson_iter_find(&k, "test.c.$_id_") && bson_iter_as_int64(&k) == 30);
        bson_iter_recurse(&it, &k);
        cr_assert(bson_iter_find(&k, "test.c.$x_1") && bson_iter_as_int64(&k) == 59);
        cr_assert(t_true(r, "valid"));
        cr_assert(t_has(r, "warning"), "not full: a warning");
        bson_destroy(r);
        assert_valid(&t, "c");
        T_ERR(&t, 26, NULL, "{\"validate\": \"nope\"}");
    }
}

Test(q_cmd_admin, compact)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        char pad[400];
        memset(pad, 'c', sizeof pad - 1);
        pad[sizeof pad - 1] = '\0';
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"k\": 1}, \"name\": "
                  "\"k_1\"}]}");
        for (int i = 0; i < 400; i += 50) {
            char docs[50 * 512];
            size_t o = 0;
            for (int j = i; j < i + 50; j++)
                o += (size_t)snprintf(docs + o, sizeof docs - o, "%s{\"_id\": %d, \"k\": %d, "
                                      "\"p\": \"%s\"}", j > i ? "," : "", j, j, pad);
            T_RUN(&t, "{\"insert\": \"c\", \"documents\": [%s]}", docs);
        }
        T_RUN(&t, "{\"delete\": \"c\", \"deletes\": [{\"q\": {\"_id\": {\"$gte\": 20}}, "
                  "\"limit\": 0}]}");
        bson_t *before = T_OK(&t, "{\"collStats\": \"c\"}");
        int rc;
        bson_t *r = t_cmd(&t, &rc, "{\"compact\": \"c\"}");
        if (rc != 0) {
            cr_assert_eq(t_i64(r, "code"), 115, "compact either works or is not supported");
            bson_destroy(r);
            bson_destroy(before);
            continue;
        }
        bson_destroy(r);
        r = T_OK(&t, "{\"collStats\": \"c\"}");
        cr_assert_eq(t_i64(r, "count"), 20);
        if (t_is_mmapv1(&t))
            cr_assert_lt(t_i64(r, "storageSize"), t_i64(before, "storageSize"),
                         "compact gives space back");
        bson_destroy(r);
        bson_destroy(before);
        r = T_OK(&t, "{\"find\": \"c\", \"filter\": {\"k\": 7}}");
        cr_assert_eq(t_i64(r, "cursor.firstBatch.0._id"), 7, "indexes rebuilt");
        bson_destroy(r);
        assert_valid(&t, "c");
        T_ERR(&t, 2, NULL, "{\"compact\": \"c\", \"paddingFactor\": 9}");
        T_ERR(&t, 26, NULL, "{\"compact\": \"nope\"}");
    }
}

Test(q_cmd_admin, server_status_and_fsync)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": 1}, {\"_id\": 2}]}");
        T_RUN(&t, "{\"update\": \"c\", \"updates\": [{\"q\": {\"_id\": 1}, \"u\": {\"$set\": "
                  "{\"a\": 1}}}]}");
        T_RUN(&t, "{\"delete\": \"c\", \"deletes\": [{\"q\": {\"_id\": 2}, \"limit\": 1}]}");
        T_RUN(&t, "{\"find\": \"c\"}");
        bson_t *r = T_OK(&t, "{\"serverStatus\": 1}");
        cr_assert_str_eq(t_str(r, "process"), "minidoc");
        cr_assert(strncmp(t_str(r, "version"), "3.6.0-minidoc-", 14) == 0);
        cr_assert(t_has(r, "host") && t_has(r, "pid") && t_has(r, "uptime") &&
                  t_has(r, "uptimeMillis") && t_has(r, "localTime"));
        cr_assert_str_eq(t_str(r, "storageEngine.name"), t.engine);
        cr_assert_eq(t_i64(r, "metrics.document.inserted"), 2);
        cr_assert_eq(t_i64(r, "metrics.document.updated"), 1);
        cr_assert_eq(t_i64(r, "metrics.document.deleted"), 1);
        cr_assert_eq(t_i64(r, "metrics.document.returned"), 1);
        cr_assert(t_has(r, "metrics.record.moves"));
        bson_destroy(r);
        T_RUN(&t, "{\"fsync\": 1}");
    }
}

/* ---- lifetime ---------------------------------------------------------------------- */

Test(q_cmd_admin, reopen_keeps_everything)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        if (!t_persistent(&t))
            continue;
        T_RUN(&t, "{\"create\": \"np\", \"noPadding\": true}");
        for (int i = 0; i < 40; i++)
            T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": %d, \"a\": [%d, 1]}]}", i,
                  i);
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"a\": 1}, \"name\": "
                  "\"a_1\"}]}");
        md_db_close(t.db);
        t_reopen(&t);
        bson_t *r = T_OK(&t, "{\"listCollections\": 1}");
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 2);
        cr_assert(t_true(r, "cursor.firstBatch.1.options.noPadding"));
        bson_destroy(r);
        r = T_OK(&t, "{\"count\": \"c\", \"query\": {\"a\": 1}}");
        cr_assert_eq(t_i64(r, "n"), 40);
        bson_destroy(r);
        r = T_OK(&t, "{\"find\": \"c\", \"filter\": {\"a\": 17}}");
        cr_assert_eq(t_i64(r, "cursor.firstBatch.0._id"), 17);
        bson_destroy(r);
        assert_valid(&t, "c");
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": 100}]}");
        r = T_OK(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": 5}]}");
        cr_assert_eq(t_i64(r, "writeErrors.0.code"), 11000, "the unique _id index came back");
        bson_destroy(r);
    }
}

Test(q_cmd_admin, open_errors)
{
    md_db *db;
    md_error err;
    bson_t *o = BCON_NEW("engine", BCON_UTF8("wiredTiger"));
    cr_assert_lt(md_db_open("/tmp", o, &db, &err), 0);
    cr_assert_eq(err.code, 2);
    bson_destroy(o);
    o = BCON_NEW("engine", BCON_UTF8("ephemeralForTest"), "dbName", BCON_UTF8("a.b"));
    cr_assert_lt(md_db_open("/tmp", o, &db, &err), 0);
    cr_assert_eq(err.code, 73);
    bson_destroy(o);
    tdb t;
    t_open(&t, "mmapv1");
    o = t_open_opts("mmapv1");
    cr_assert_eq(md_db_open(t.dir, o, &db, &err), MD_EBUSY, "one process per directory");
    cr_assert_eq(err.code, 98);
    bson_destroy(o);
    t_close(&t);
}

/* After an engine failure the handle refuses writes but still reads. */
Test(q_cmd_admin, failed_handle_refuses_writes)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": 1}]}");
        md_error e;
        md_error_set(&e, MD_EIO, MD_CODE_FILE_STREAM_FAILED, "simulated write failure");
        q_write_failed(t.db, MD_EIO, &e);
        T_ERR(&t, 20, "simulated write failure", "{\"insert\": \"c\", \"documents\": [{}]}");
        T_ERR(&t, 20, NULL, "{\"update\": \"c\", \"updates\": [{\"q\": {}, \"u\": {\"$set\": "
                            "{\"a\": 1}}}]}");
        T_ERR(&t, 20, NULL, "{\"delete\": \"c\", \"deletes\": [{\"q\": {}, \"limit\": 0}]}");
        T_ERR(&t, 20, NULL, "{\"create\": \"d\"}");
        T_ERR(&t, 20, NULL, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"a\": 1}}]}");
        bson_t cmd = BSON_INITIALIZER, reply;
        BSON_APPEND_UTF8(&cmd, "drop", "c");
        cr_assert_eq(md_db_command(t.db, &cmd, &reply, &e), MD_EREADONLY);
        bson_destroy(&reply);
        bson_destroy(&cmd);
        bson_t *r = T_OK(&t, "{\"count\": \"c\"}");
        cr_assert_eq(t_i64(r, "n"), 1);
        bson_destroy(r);
    }
}
