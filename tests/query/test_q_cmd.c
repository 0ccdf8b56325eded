/*
 * test_q_cmd.c -- the CRUD and cursor commands end to end through
 * md_db_command_json(), on every registered engine: insert / update /
 * delete reply shapes and writeErrors, E11000 text, upserts, multi updates
 * over moving documents, the IDHACK path, find options, getMore across
 * batches with writes in between, killCursors, count, findAndModify and
 * the dispatcher's own errors.
 */
#include <pthread.h>

#include "test_q_util.h"

/* ---- dispatcher ---------------------------------------------------------------- */

Test(q_cmd, dispatcher_errors)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_ERR(&t, 59, "no such command: 'foo'", "{\"foo\": 1}");
        T_ERR(&t, 9, NULL, "{\"insert\": ");
        T_ERR(&t, 9, NULL, "{}");
        bson_t *r = T_OK(&t, "{\"ping\": 1, \"$db\": \"test\", \"lsid\": {\"id\": 1}}");
        bson_destroy(r);
        r = T_OK(&t, "{\"isMaster\": 1}");
        cr_assert_eq(t_i64(r, "maxBsonObjectSize"), 16777216);
        cr_assert_eq(t_i64(r, "maxMessageSizeBytes"), 48000000);
        cr_assert_eq(t_i64(r, "maxWriteBatchSize"), 100000);
        bson_destroy(r);
        r = T_OK(&t, "{\"buildInfo\": 1}");
        cr_assert(strncmp(t_str(r, "version"), "3.6.0-minidoc-", 14) == 0);
        bson_destroy(r);
    }
}

Test(q_cmd, error_reply_shape)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        bson_t *r = t_cmd(&t, NULL, "{\"drop\": \"nope\"}");
        bson_iter_t it;
        const char *order[] = {"ok", "errmsg", "code", "codeName"};
        bson_iter_init(&it, r);
        for (int i = 0; i < 4; i++) {
            cr_assert(bson_iter_next(&it));
            cr_assert_str_eq(bson_iter_key(&it), order[i]);
        }
        cr_assert_str_eq(t_str(r, "codeName"), "NamespaceNotFound");
        bson_destroy(r);
    }
}

/* ---- insert ---------------------------------------------------------------------- */

Test(q_cmd, insert_reply_and_id_first)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        bson_t *r = T_OK(&t, "{\"insert\": \"c\", \"documents\": [{\"a\": 1, \"_id\": 7}, "
                             "{\"b\": 2}]}");
        cr_assert_eq(t_i64(r, "n"), 2);
        cr_assert_not(t_has(r, "writeErrors"));
        bson_destroy(r);
        r = T_OK(&t, "{\"find\": \"c\", \"filter\": {\"a\": 1}}");
        bson_iter_t it;
        cr_assert(t_find(r, "cursor.firstBatch.0", &it));
        bson_iter_t d;
        bson_iter_recurse(&it, &d);
        cr_assert(bson_iter_next(&d));
        cr_assert_str_eq(bson_iter_key(&d), "_id", "_id must be moved first");
        cr_assert_eq(bson_iter_as_int64(&d), 7);
        bson_destroy(r);
        r = T_OK(&t, "{\"find\": \"c\", \"filter\": {\"b\": 2}}");
        cr_assert(t_find(r, "cursor.firstBatch.0._id", &it) && BSON_ITER_HOLDS_OID(&it),
                  "a missing _id is generated as an ObjectId");
        bson_destroy(r);
    }
}

Test(q_cmd, insert_ordered_and_unordered_write_errors)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        bson_t *r = T_OK(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": 1}, {\"_id\": 1}, "
                             "{\"_id\": 2}]}");
        cr_assert_eq(t_i64(r, "n"), 1);
        cr_assert_eq(t_len(r, "writeErrors"), 1);
        cr_assert_eq(t_i64(r, "writeErrors.0.index"), 1);
        cr_assert_eq(t_i64(r, "writeErrors.0.code"), 11000);
        cr_assert_str_eq(t_str(r, "writeErrors.0.errmsg"),
                         "E11000 duplicate key error collection: test.c index: _id_ dup key: "
                         "{ _id: 1 }");
        bson_destroy(r);
        r = T_OK(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": 1}, {\"_id\": 3}, "
                     "{\"_id\": 3}, {\"_id\": 4}], \"ordered\": false}");
        cr_assert_eq(t_i64(r, "n"), 2);
        cr_assert_eq(t_len(r, "writeErrors"), 2);
        cr_assert_eq(t_i64(r, "writeErrors.0.index"), 0);
        cr_assert_eq(t_i64(r, "writeErrors.1.index"), 2);
        bson_destroy(r);
        r = T_OK(&t, "{\"count\": \"c\"}");
        cr_assert_eq(t_i64(r, "n"), 3, "a failed insert leaves nothing behind");
        bson_destroy(r);
    }
}

Test(q_cmd, insert_document_checks)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        bson_t *r = T_OK(&t, "{\"insert\": \"c\", \"documents\": [{\"$x\": 1}]}");
        cr_assert_eq(t_i64(r, "writeErrors.0.code"), 52);
        cr_assert_str_eq(t_str(r, "writeErrors.0.errmsg"),
                         "Document can't have $ prefixed field names: $x");
        bson_destroy(r);
        r = T_OK(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": [1, 2]}]}");
        cr_assert_eq(t_i64(r, "writeErrors.0.code"), 53);
        bson_destroy(r);
        T_ERR(&t, 14, "BSON field 'insert.documents' is the wrong type",
              "{\"insert\": \"c\", \"documents\": {\"a\": 1}}");
        T_ERR(&t, 40414, "is missing but a required field", "{\"insert\": \"c\"}");
        T_ERR(&t, 40415, "'insert.bogus' is an unknown field",
              "{\"insert\": \"c\", \"documents\": [{}], \"bogus\": 1}");
        T_ERR(&t, 14, NULL, "{\"insert\": 5, \"documents\": [{}]}");
        T_ERR(&t, 73, NULL, "{\"insert\": \"a$b\", \"documents\": [{}]}");
        T_ERR(&t, 73, NULL, "{\"insert\": \"system.users\", \"documents\": [{}]}");
        T_ERR(&t, 73, NULL, "{\"insert\": \"\", \"documents\": [{}]}");
        T_ERR(&t, 2, NULL, "{\"insert\": \"c\", \"documents\": [{}], \"writeConcern\": "
                           "{\"w\": 3}}");
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{}], \"writeConcern\": {\"w\": 1, "
                  "\"j\": true}}");
    }
}

Test(q_cmd, insert_too_large)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        size_t n = 17 * 1024 * 1024;
        char *big = malloc(n + 1);
        memset(big, 'x', n);
        big[n] = '\0';
        bson_t *doc = BCON_NEW("s", BCON_UTF8(big));
        bson_t cmd = BSON_INITIALIZER, arr, reply;
        BSON_APPEND_UTF8(&cmd, "insert", "c");
        BSON_APPEND_ARRAY_BEGIN(&cmd, "documents", &arr);
        BSON_APPEND_DOCUMENT(&arr, "0", doc);
        bson_append_array_end(&cmd, &arr);
        cr_assert_eq(md_db_command(t.db, &cmd, &reply, NULL), 0);
        cr_assert_eq(t_i64(&reply, "writeErrors.0.code"), 10334);
        bson_destroy(&reply);
        bson_destroy(&cmd);
        bson_destroy(doc);
        free(big);
    }
}

/* ---- update ---------------------------------------------------------------------- */

Test(q_cmd, update_counts_and_upsert)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": 1, \"n\": 0}, {\"_id\": 2, "
                  "\"n\": 0}]}");
        bson_t *r = T_OK(&t, "{\"update\": \"c\", \"updates\": [{\"q\": {\"_id\": 1}, \"u\": "
                             "{\"$inc\": {\"n\": 1}}}]}");
        cr_assert_eq(t_i64(r, "n"), 1);
        cr_assert_eq(t_i64(r, "nModified"), 1);
        cr_assert_not(t_has(r, "upserted"));
        bson_destroy(r);
        r = T_OK(&t, "{\"update\": \"c\", \"updates\": [{\"q\": {\"_id\": 1}, \"u\": {\"$set\": "
                     "{\"n\": 1}}}]}");
        cr_assert_eq(t_i64(r, "n"), 1);
        cr_assert_eq(t_i64(r, "nModified"), 0, "an update that changes nothing");
        bson_destroy(r);
        r = T_OK(&t, "{\"update\": \"c\", \"updates\": [{\"q\": {\"_id\": 1}, \"u\": {\"$inc\": "
                     "{\"n\": 1}}}, {\"q\": {\"_id\": 5}, \"u\": {\"$set\": {\"z\": 1}}, "
                     "\"upsert\": true}]}");
        cr_assert_eq(t_i64(r, "n"), 2);
        cr_assert_eq(t_i64(r, "nModified"), 1);
        cr_assert_eq(t_len(r, "upserted"), 1);
        cr_assert_eq(t_i64(r, "upserted.0.index"), 1);
        cr_assert_eq(t_i64(r, "upserted.0._id"), 5);
        bson_destroy(r);
        r = T_OK(&t, "{\"find\": \"c\", \"filter\": {\"_id\": 5}}");
        cr_assert_eq(t_i64(r, "cursor.firstBatch.0.z"), 1);
        bson_destroy(r);
        r = T_OK(&t, "{\"update\": \"c\", \"updates\": [{\"q\": {\"k\": \"v\"}, \"u\": "
                     "{\"$inc\": {\"n\": 1}}, \"upsert\": true}]}");
        cr_assert(t_has(r, "upserted.0._id"), "a generated _id is reported");
        bson_destroy(r);
        r = T_OK(&t, "{\"find\": \"c\", \"filter\": {\"k\": \"v\"}}");
        cr_assert_eq(t_i64(r, "cursor.firstBatch.0.n"), 1, "the seed gets the update");
        bson_destroy(r);
        T_RUN(&t, "{\"update\": \"c\", \"updates\": [{\"q\": {\"_id\": 77, \"d.e\": 5, "
                  "\"g\": {\"$gt\": 1}}, \"u\": {\"$set\": {\"z\": 2}}, \"upsert\": true}]}");
        r = T_OK(&t, "{\"find\": \"c\", \"filter\": {\"_id\": 77}}");
        cr_assert_eq(t_i64(r, "cursor.firstBatch.0.d.e"), 5, "dotted seed fields nest");
        cr_assert_eq(t_i64(r, "cursor.firstBatch.0.z"), 2);
        cr_assert_not(t_has(r, "cursor.firstBatch.0.g"), "no seed from a $gt");
        bson_destroy(r);
    }
}

Test(q_cmd, update_replacement)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": 1, \"a\": 1}]}");
        T_RUN(&t, "{\"update\": \"c\", \"updates\": [{\"q\": {\"a\": 1}, \"u\": {\"b\": 2}}]}");
        bson_t *r = T_OK(&t, "{\"find\": \"c\", \"filter\": {}}");
        cr_assert_eq(t_i64(r, "cursor.firstBatch.0._id"), 1, "replacement keeps _id");
        cr_assert_eq(t_i64(r, "cursor.firstBatch.0.b"), 2);
        cr_assert_not(t_has(r, "cursor.firstBatch.0.a"));
        bson_destroy(r);
        r = T_OK(&t, "{\"update\": \"c\", \"updates\": [{\"q\": {\"_id\": 9, \"x\": 3}, \"u\": "
                     "{\"y\": 4}, \"upsert\": true}]}");
        cr_assert_eq(t_i64(r, "upserted.0._id"), 9, "replacement upsert takes the query _id");
        bson_destroy(r);
        r = T_OK(&t, "{\"find\": \"c\", \"filter\": {\"_id\": 9}}");
        cr_assert_eq(t_i64(r, "cursor.firstBatch.0.y"), 4);
        cr_assert_not(t_has(r, "cursor.firstBatch.0.x"));
        bson_destroy(r);
        r = T_OK(&t, "{\"update\": \"c\", \"updates\": [{\"q\": {}, \"u\": {\"b\": 3}, "
                     "\"multi\": true}]}");
        cr_assert_eq(t_i64(r, "writeErrors.0.code"), 9);
        cr_assert_str_eq(t_str(r, "writeErrors.0.errmsg"),
                         "multi update only works with $ operators");
        bson_destroy(r);
    }
}

Test(q_cmd, update_write_errors)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": 1, \"a\": 1}, {\"_id\": 2}]}");
        bson_t *r = T_OK(&t, "{\"update\": \"c\", \"updates\": [{\"q\": {\"_id\": 1}, \"u\": "
                             "{\"$bogus\": {\"a\": 1}}}, {\"q\": {\"_id\": 1}, \"u\": {\"$set\": "
                             "{\"a\": 2}}}], \"ordered\": false}");
        cr_assert_eq(t_i64(r, "n"), 1);
        cr_assert_eq(t_len(r, "writeErrors"), 1);
        cr_assert_eq(t_i64(r, "writeErrors.0.index"), 0);
        cr_assert_eq(t_i64(r, "writeErrors.0.code"), 9);
        bson_destroy(r);
        r = T_OK(&t, "{\"update\": \"c\", \"updates\": [{\"q\": {\"_id\": 1}, \"u\": {\"$set\": "
                     "{\"_id\": 5}}}]}");
        cr_assert_eq(t_i64(r, "writeErrors.0.code"), 66);
        bson_destroy(r);
        r = T_OK(&t, "{\"update\": \"c\", \"updates\": [{\"q\": {\"$foo\": 1}, \"u\": {\"$set\": "
                     "{\"a\": 2}}}]}");
        cr_assert_eq(t_i64(r, "writeErrors.0.code"), 2);
        bson_destroy(r);
        T_ERR(&t, 14, NULL, "{\"update\": \"c\", \"updates\": [{\"q\": 1, \"u\": {}}]}");
        T_ERR(&t, 40414, NULL, "{\"update\": \"c\", \"updates\": [{\"q\": {}}]}");
        T_ERR(&t, 40415, NULL, "{\"update\": \"c\", \"updates\": [{\"q\": {}, \"u\": {}, "
                               "\"zz\": 1}]}");
        r = T_OK(&t, "{\"update\": \"nocoll\", \"updates\": [{\"q\": {}, \"u\": {\"$set\": "
                     "{\"a\": 1}}}]}");
        cr_assert_eq(t_i64(r, "n"), 0);
        cr_assert_eq(t_i64(r, "nModified"), 0);
        bson_destroy(r);
    }
}

Test(q_cmd, update_positional)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": 1, \"arr\": [1, 2, 3]}]}");
        bson_t *r = T_OK(&t, "{\"update\": \"c\", \"updates\": [{\"q\": {\"arr\": 2}, \"u\": "
                             "{\"$set\": {\"arr.$\": 20}}}]}");
        cr_assert_eq(t_i64(r, "nModified"), 1);
        bson_destroy(r);
        r = T_OK(&t, "{\"find\": \"c\", \"filter\": {\"_id\": 1}}");
        cr_assert_eq(t_i64(r, "cursor.firstBatch.0.arr.1"), 20, "the matched element");
        cr_assert_eq(t_i64(r, "cursor.firstBatch.0.arr.2"), 3);
        bson_destroy(r);
        r = T_OK(&t, "{\"update\": \"c\", \"updates\": [{\"q\": {\"_id\": 1}, \"u\": "
                     "{\"$set\": {\"arr.$\": 0}}}]}");
        cr_assert_eq(t_i64(r, "n"), 0, "a failed statement matches nothing");
        cr_assert_eq(t_i64(r, "writeErrors.0.code"), 2);
        bson_destroy(r);
    }
}

/* A multi update that grows every document (moving them on mmapv1) updates
 * each exactly once and leaves every index exact. */
Test(q_cmd, update_multi_moves_each_once)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        char pad[600];
        memset(pad, 'p', sizeof pad - 1);
        pad[sizeof pad - 1] = '\0';
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"g\": 1}, \"name\": "
                  "\"g_1\"}]}");
        for (int i = 0; i < 200; i++)
            T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": %d, \"g\": %d, \"n\": 0}]}",
                  i, i % 3);
        bson_t *r = T_OK(&t, "{\"update\": \"c\", \"updates\": [{\"q\": {}, \"u\": {\"$inc\": "
                             "{\"n\": 1}, \"$set\": {\"pad\": \"%s\"}}, \"multi\": true}]}", pad);
        cr_assert_eq(t_i64(r, "n"), 200);
        cr_assert_eq(t_i64(r, "nModified"), 200);
        bson_destroy(r);
        r = T_OK(&t, "{\"count\": \"c\", \"query\": {\"n\": 1}}");
        cr_assert_eq(t_i64(r, "n"), 200, "each document incremented exactly once");
        bson_destroy(r);
        r = T_OK(&t, "{\"update\": \"c\", \"updates\": [{\"q\": {\"g\": 1}, \"u\": {\"$inc\": "
                     "{\"n\": 1}, \"$set\": {\"pad2\": \"%s\"}}, \"multi\": true}]}", pad);
        cr_assert_eq(t_i64(r, "nModified"), 67, "multi through an index plan");
        bson_destroy(r);
        r = T_OK(&t, "{\"count\": \"c\", \"query\": {\"g\": 1, \"n\": 2}}");
        cr_assert_eq(t_i64(r, "n"), 67);
        bson_destroy(r);
        r = T_OK(&t, "{\"validate\": \"c\", \"full\": true}");
        cr_assert(t_has(r, "valid"));
        bson_iter_t it;
        cr_assert(t_find(r, "valid", &it) && bson_iter_as_bool(&it), "%s", t_json(r));
        bson_destroy(r);
        if (t_is_mmapv1(&t)) {
            r = T_OK(&t, "{\"collStats\": \"c\"}");
            cr_assert_gt(t_i64(r, "mmapv1.moves"), 0);
            bson_destroy(r);
        }
    }
}

/* ---- delete ------------------------------------------------------------------------ */

Test(q_cmd, delete_limits)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": 1, \"k\": 1}, {\"_id\": 2, "
                  "\"k\": 1}, {\"_id\": 3, \"k\": 1}, {\"_id\": 4, \"k\": 2}]}");
        bson_t *r = T_OK(&t, "{\"delete\": \"c\", \"deletes\": [{\"q\": {\"k\": 1}, "
                             "\"limit\": 1}]}");
        cr_assert_eq(t_i64(r, "n"), 1);
        bson_destroy(r);
        r = T_OK(&t, "{\"delete\": \"c\", \"deletes\": [{\"q\": {\"k\": 1}, \"limit\": 0}]}");
        cr_assert_eq(t_i64(r, "n"), 2);
        bson_destroy(r);
        r = T_OK(&t, "{\"delete\": \"c\", \"deletes\": [{\"q\": {\"_id\": 4}, \"limit\": 1}]}");
        cr_assert_eq(t_i64(r, "n"), 1);
        bson_destroy(r);
        r = T_OK(&t, "{\"count\": \"c\"}");
        cr_assert_eq(t_i64(r, "n"), 0);
        bson_destroy(r);
        T_ERR(&t, 9, "must be 0 or 1", "{\"delete\": \"c\", \"deletes\": [{\"q\": {}, "
                                       "\"limit\": 2}]}");
        T_ERR(&t, 40414, NULL, "{\"delete\": \"c\", \"deletes\": [{\"q\": {}}]}");
        r = T_OK(&t, "{\"delete\": \"none\", \"deletes\": [{\"q\": {}, \"limit\": 0}]}");
        cr_assert_eq(t_i64(r, "n"), 0);
        bson_destroy(r);
    }
}

/* ---- find ------------------------------------------------------------------------- */

static void insert_range(tdb *t, const char *coll, int from, int to)
{
    for (int i = from; i < to; i += 100) {
        char docs[16384];
        size_t o = 0;
        for (int j = i; j < to && j < i + 100; j++)
            o += (size_t)snprintf(docs + o, sizeof docs - o, "%s{\"_id\": %d, \"v\": %d}",
                                  j > i ? "," : "", j, j % 10);
        T_RUN(t, "{\"insert\": \"%s\", \"documents\": [%s]}", coll, docs);
    }
}

Test(q_cmd, find_options)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        insert_range(&t, "c", 0, 30);
        bson_t *r = T_OK(&t, "{\"find\": \"c\", \"filter\": {\"v\": 3}, \"projection\": "
                             "{\"v\": 0}}");
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 3);
        cr_assert_not(t_has(r, "cursor.firstBatch.0.v"));
        cr_assert_eq(t_i64(r, "cursor.id"), 0);
        cr_assert_str_eq(t_str(r, "cursor.ns"), "test.c");
        bson_destroy(r);
        r = T_OK(&t, "{\"find\": \"c\", \"filter\": {\"_id\": 4}, \"projection\": {\"v\": 1, "
                     "\"_id\": 0}}");
        cr_assert_eq(t_i64(r, "cursor.firstBatch.0.v"), 4);
        cr_assert_not(t_has(r, "cursor.firstBatch.0._id"));
        bson_destroy(r);
        r = T_OK(&t, "{\"find\": \"c\", \"sort\": {\"v\": -1, \"_id\": 1}, \"skip\": 2, "
                     "\"limit\": 4}");
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 4);
        cr_assert_eq(t_i64(r, "cursor.firstBatch.0._id"), 29);
        cr_assert_eq(t_i64(r, "cursor.firstBatch.1._id"), 8);
        cr_assert_eq(t_i64(r, "cursor.firstBatch.3._id"), 28);
        cr_assert_eq(t_i64(r, "cursor.id"), 0);
        bson_destroy(r);
        T_ERR(&t, 2, "Limit value must be non-negative", "{\"find\": \"c\", \"limit\": -1}");
        T_ERR(&t, 2, "Skip value must be non-negative", "{\"find\": \"c\", \"skip\": -1}");
        T_ERR(&t, 2, "mix of inclusion and exclusion",
              "{\"find\": \"c\", \"projection\": {\"a\": 1, \"b\": 0}}");
        T_ERR(&t, 9, "Unrecognized field 'bogus'", "{\"find\": \"c\", \"bogus\": 1}");
        T_ERR(&t, 9, NULL, "{\"find\": \"c\", \"filter\": 3}");
        T_ERR(&t, 2, "unknown operator", "{\"find\": \"c\", \"filter\": {\"v\": {\"$bad\": 1}}}");
        r = T_OK(&t, "{\"find\": \"nothing\", \"filter\": {}}");
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 0);
        cr_assert_eq(t_i64(r, "cursor.id"), 0);
        bson_destroy(r);
    }
}

Test(q_cmd, find_batches_and_single_batch)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        insert_range(&t, "c", 0, 150);
        bson_t *r = T_OK(&t, "{\"find\": \"c\"}");
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 101, "default first batch");
        int64_t id = t_i64(r, "cursor.id");
        cr_assert_neq(id, 0);
        bson_destroy(r);
        r = T_OK(&t, "{\"getMore\": {\"$numberLong\": \"%lld\"}, \"collection\": \"c\"}",
                 (long long)id);
        cr_assert_eq(t_len(r, "cursor.nextBatch"), 49);
        cr_assert_eq(t_i64(r, "cursor.id"), 0);
        bson_destroy(r);
        r = T_OK(&t, "{\"find\": \"c\", \"batchSize\": 10, \"singleBatch\": true}");
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 10);
        cr_assert_eq(t_i64(r, "cursor.id"), 0);
        bson_destroy(r);
        r = T_OK(&t, "{\"find\": \"c\", \"batchSize\": 150}");
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 150);
        cr_assert_eq(t_i64(r, "cursor.id"), 0, "exhausted exactly at the batch end");
        bson_destroy(r);
        r = T_OK(&t, "{\"find\": \"c\", \"limit\": 120, \"batchSize\": 100}");
        id = t_i64(r, "cursor.id");
        bson_destroy(r);
        r = T_OK(&t, "{\"getMore\": {\"$numberLong\": \"%lld\"}, \"collection\": \"c\", "
                     "\"batchSize\": 100}", (long long)id);
        cr_assert_eq(t_len(r, "cursor.nextBatch"), 20, "limit spans batches");
        cr_assert_eq(t_i64(r, "cursor.id"), 0);
        bson_destroy(r);
    }
}

/* Found by tests/fuzz/fuzz_command.c (UBSan): a skip, limit or batchSize
 * double past int64 was converted to int64_t, which is undefined; it
 * saturates now, as MongoDB's safeNumberLong. */
Test(q_cmd, find_counts_past_int64_saturate)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        insert_range(&t, "c", 0, 5);
        bson_t *r = T_OK(&t, "{\"find\": \"c\", \"batchSize\": 2.2e23, \"limit\": 1e300}");
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 5);
        cr_assert_eq(t_i64(r, "cursor.id"), 0);
        bson_destroy(r);
        r = T_OK(&t, "{\"find\": \"c\", \"skip\": 9.3e18}");
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 0);
        bson_destroy(r);
        r = T_OK(&t, "{\"find\": \"c\", \"skip\": 2.5, \"limit\": 1.9}");
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 1, "fractions truncate");
        bson_destroy(r);
        T_ERR(&t, 2, "Skip value must be non-negative", "{\"find\": \"c\", \"skip\": -1e300}");
    }
}

/* Documents written between batches: deleted ones vanish, untouched ones
 * are each returned exactly once. */
Test(q_cmd, get_more_with_writes_between)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        insert_range(&t, "c", 0, 300);
        bson_t *r = T_OK(&t, "{\"find\": \"c\", \"batchSize\": 100}");
        int64_t id = t_i64(r, "cursor.id");
        char seen[300] = {0};
        int total = 0;
        bson_iter_t it, doc;
        cr_assert(t_find(r, "cursor.firstBatch", &it));
        bson_iter_recurse(&it, &doc);
        while (bson_iter_next(&doc)) {
            bson_iter_t f;
            bson_iter_recurse(&doc, &f);
            bson_iter_find(&f, "_id");
            seen[bson_iter_as_int64(&f)]++;
            total++;
        }
        bson_destroy(r);
        T_RUN(&t, "{\"delete\": \"c\", \"deletes\": [{\"q\": {\"_id\": {\"$gte\": 250}}, "
                  "\"limit\": 0}]}");
        T_RUN(&t, "{\"update\": \"c\", \"updates\": [{\"q\": {\"_id\": 5}, \"u\": {\"$set\": "
                  "{\"v\": 99}}}]}");
        while (id != 0) {
            r = T_OK(&t, "{\"getMore\": {\"$numberLong\": \"%lld\"}, \"collection\": \"c\", "
                         "\"batchSize\": 70}", (long long)id);
            id = t_i64(r, "cursor.id");
            cr_assert(t_find(r, "cursor.nextBatch", &it));
            bson_iter_recurse(&it, &doc);
            while (bson_iter_next(&doc)) {
                bson_iter_t f;
                bson_iter_recurse(&doc, &f);
                bson_iter_find(&f, "_id");
                int64_t v = bson_iter_as_int64(&f);
                cr_assert_lt(v, 250, "deleted document %lld returned", (long long)v);
                seen[v]++;
                total++;
            }
            bson_destroy(r);
        }
        for (int i = 0; i < 250; i++)
            cr_assert_eq(seen[i], 1, "[%s] _id %d seen %d times", t.engine, i, seen[i]);
        cr_assert_eq(total, 250);
    }
}

Test(q_cmd, cursor_not_found_and_kill)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        insert_range(&t, "c", 0, 20);
        T_ERR(&t, 43, "Cursor not found, cursor id: 12345",
              "{\"getMore\": {\"$numberLong\": \"12345\"}, \"collection\": \"c\"}");
        T_ERR(&t, 14, NULL, "{\"getMore\": \"x\", \"collection\": \"c\"}");
        bson_t *r = T_OK(&t, "{\"find\": \"c\", \"batchSize\": 5}");
        int64_t id = t_i64(r, "cursor.id");
        bson_destroy(r);
        r = T_OK(&t, "{\"serverStatus\": 1}");
        cr_assert_eq(t_i64(r, "metrics.cursor.open.total"), 1);
        bson_destroy(r);
        r = T_OK(&t, "{\"killCursors\": \"c\", \"cursors\": [{\"$numberLong\": \"%lld\"}, "
                     "{\"$numberLong\": \"77\"}]}", (long long)id);
        cr_assert_eq(t_len(r, "cursorsKilled"), 1);
        cr_assert_eq(t_i64(r, "cursorsKilled.0"), id);
        cr_assert_eq(t_len(r, "cursorsNotFound"), 1);
        cr_assert_eq(t_len(r, "cursorsAlive"), 0);
        cr_assert_eq(t_len(r, "cursorsUnknown"), 0);
        bson_destroy(r);
        T_ERR(&t, 43, NULL, "{\"getMore\": {\"$numberLong\": \"%lld\"}, \"collection\": \"c\"}",
              (long long)id);
        r = T_OK(&t, "{\"find\": \"c\", \"batchSize\": 5}");
        id = t_i64(r, "cursor.id");
        bson_destroy(r);
        T_RUN(&t, "{\"drop\": \"c\"}");
        T_ERR(&t, 43, NULL, "{\"getMore\": {\"$numberLong\": \"%lld\"}, \"collection\": \"c\"}",
              (long long)id);
    }
}

/* ---- plans -------------------------------------------------------------------------- */

static int64_t scanned_objects(tdb *t)
{
    bson_t *r = T_OK(t, "{\"serverStatus\": 1}");
    int64_t n = t_i64(r, "metrics.queryExecutor.scannedObjects");
    bson_destroy(r);
    return n;
}

/* find / update / delete by _id look at one document, not the collection. */
Test(q_cmd, idhack_touches_one_document)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        insert_range(&t, "c", 0, 200);
        int64_t before = scanned_objects(&t);
        bson_t *r = T_OK(&t, "{\"find\": \"c\", \"filter\": {\"_id\": 150}}");
        cr_assert_eq(t_i64(r, "cursor.firstBatch.0.v"), 0);
        bson_destroy(r);
        cr_assert_eq(scanned_objects(&t) - before, 1);
        before = scanned_objects(&t);
        T_RUN(&t, "{\"update\": \"c\", \"updates\": [{\"q\": {\"_id\": 151}, \"u\": {\"$inc\": "
                  "{\"v\": 1}}}]}");
        T_RUN(&t, "{\"delete\": \"c\", \"deletes\": [{\"q\": {\"_id\": 152}, \"limit\": 1}]}");
        cr_assert_eq(scanned_objects(&t) - before, 2);
        before = scanned_objects(&t);
        r = T_OK(&t, "{\"find\": \"c\", \"filter\": {\"_id\": 1.0}}");
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 1, "numeric types compare by value");
        bson_destroy(r);
        r = T_OK(&t, "{\"find\": \"c\", \"filter\": {\"_id\": 152}}");
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 0);
        bson_destroy(r);
        cr_assert_leq(scanned_objects(&t) - before, 1);
        before = scanned_objects(&t);
        r = T_OK(&t, "{\"count\": \"c\", \"query\": {\"v\": 3}}");
        cr_assert_eq(t_i64(r, "n"), 20);
        bson_destroy(r);
        cr_assert_geq(scanned_objects(&t) - before, 199, "no index on v: a collection scan");
    }
}

/* ---- count --------------------------------------------------------------------------- */

Test(q_cmd, count_options)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        insert_range(&t, "c", 0, 50);
        bson_t *r = T_OK(&t, "{\"count\": \"c\", \"query\": {\"v\": {\"$lt\": 5}}}");
        cr_assert_eq(t_i64(r, "n"), 25);
        bson_destroy(r);
        r = T_OK(&t, "{\"count\": \"c\", \"query\": {}, \"skip\": 45}");
        cr_assert_eq(t_i64(r, "n"), 5);
        bson_destroy(r);
        r = T_OK(&t, "{\"count\": \"c\", \"limit\": 7}");
        cr_assert_eq(t_i64(r, "n"), 7);
        bson_destroy(r);
        r = T_OK(&t, "{\"count\": \"missing\"}");
        cr_assert_eq(t_i64(r, "n"), 0);
        bson_destroy(r);
        T_ERR(&t, 2, NULL, "{\"count\": \"c\", \"skip\": -1}");
    }
}

/* ---- findAndModify ------------------------------------------------------------------- */

Test(q_cmd, find_and_modify)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        insert_range(&t, "c", 0, 10);
        bson_t *r = T_OK(&t, "{\"findAndModify\": \"c\", \"query\": {\"v\": {\"$gte\": 5}}, "
                             "\"sort\": {\"v\": -1}, \"update\": {\"$inc\": {\"v\": 100}}}");
        cr_assert_eq(t_i64(r, "value._id"), 9);
        cr_assert_eq(t_i64(r, "value.v"), 9, "the old document by default");
        cr_assert_eq(t_i64(r, "lastErrorObject.n"), 1);
        bson_destroy(r);
        r = T_OK(&t, "{\"findAndModify\": \"c\", \"query\": {\"_id\": 3}, \"update\": "
                     "{\"$inc\": {\"v\": 1}}, \"new\": true, \"fields\": {\"v\": 1}}");
        cr_assert_eq(t_i64(r, "value.v"), 4);
        bson_destroy(r);
        r = T_OK(&t, "{\"findAndModify\": \"c\", \"query\": {\"_id\": 4}, \"remove\": true}");
        cr_assert_eq(t_i64(r, "value._id"), 4);
        bson_destroy(r);
        r = T_OK(&t, "{\"findAndModify\": \"c\", \"query\": {\"_id\": 42}, \"update\": "
                     "{\"$set\": {\"w\": 1}}, \"upsert\": true, \"new\": true}");
        cr_assert_eq(t_i64(r, "value.w"), 1);
        cr_assert_eq(t_i64(r, "lastErrorObject.upserted"), 42);
        bson_destroy(r);
        r = T_OK(&t, "{\"findAndModify\": \"c\", \"query\": {\"_id\": 4}, \"remove\": true}");
        bson_iter_t it;
        cr_assert(t_find(r, "value", &it) && BSON_ITER_HOLDS_NULL(&it));
        cr_assert_eq(t_i64(r, "lastErrorObject.n"), 0);
        bson_destroy(r);
        T_ERR(&t, 9, NULL, "{\"findAndModify\": \"c\", \"query\": {}}");
        T_ERR(&t, 9, NULL, "{\"findAndModify\": \"c\", \"remove\": true, \"update\": {}}");
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"u\": 1}, \"name\": "
                  "\"u_1\", \"unique\": true, \"sparse\": true}]}");
        T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": 100, \"u\": 1}]}");
        T_ERR(&t, 11000, "index: u_1 dup key", "{\"findAndModify\": \"c\", \"query\": "
                                              "{\"_id\": 0}, \"update\": {\"$set\": {\"u\": 1}}}");
    }
}

/* The Queue pattern's FIFO take: with the {startTime, createdOn} index the
 * plan yields the sort order and only the first entry is looked at; without
 * it every match is sorted.  Both take the oldest job. */
Test(cmd, find_and_modify_fifo_order)
{
    tdb t;
    FOR_EACH_ENGINE(t)
    {
        for (int indexed = 0; indexed < 2; indexed++) {
            bson_destroy(t_cmd(&t, NULL, "{\"drop\": \"q\"}")); /* absent at first */
            T_RUN(&t, "{\"insert\": \"q\", \"documents\": [{\"_id\": 1, \"createdOn\": 30, "
                      "\"startTime\": null}, {\"_id\": 2, \"createdOn\": 10, \"startTime\": null},"
                      " {\"_id\": 3, \"createdOn\": 20}, {\"_id\": 4, \"createdOn\": 5, "
                      "\"startTime\": 1}]}");
            if (indexed)
                T_RUN(&t, "{\"createIndexes\": \"q\", \"indexes\": [{\"key\": {\"startTime\": 1, "
                          "\"createdOn\": 1}, \"name\": \"fifo\"}]}");
            int want[] = {2, 3, 1};
            for (int i = 0; i < 3; i++) {
                bson_t *r = T_OK(&t, "{\"findAndModify\": \"q\", \"query\": {\"startTime\": null},"
                                     " \"sort\": {\"createdOn\": 1}, \"update\": {\"$set\": "
                                     "{\"startTime\": 9}}, \"new\": true}");
                cr_assert_eq(t_i64(r, "value._id"), want[i], "%s indexed=%d take %d", t.engine,
                             indexed, i);
                cr_assert_eq(t_i64(r, "value.startTime"), 9);
                bson_destroy(r);
            }
            bson_t *r = T_OK(&t, "{\"findAndModify\": \"q\", \"query\": {\"startTime\": null}, "
                                 "\"sort\": {\"createdOn\": 1}, \"update\": {\"$set\": "
                                 "{\"startTime\": 9}}}");
            bson_iter_t it;
            cr_assert(t_find(r, "value", &it) && BSON_ITER_HOLDS_NULL(&it));
            bson_destroy(r);
        }
    }
}

/* mmapv1 has no record checksum: a document whose embedded part is no longer
 * well-formed BSON must fail the query with DataCorruptionDetected, not
 * reach the caller (the string's length is made to run past its document). */
Test(cmd, mmapv1_malformed_document_is_an_error)
{
    tdb t;
    int rc;
    char path[300];
    t_open(&t, "mmapv1");
    bson_destroy(t_cmd(&t, &rc, "{\"insert\": \"c\", \"documents\": [{\"_id\": 1, \"a\": "
                                "{\"b\": \"needle-needle\"}}]}"));
    cr_assert_eq(rc, 0);
    md_db_close(t.db);
    snprintf(path, sizeof path, "%s/test.0", t.dir);
    FILE *f = fopen(path, "r+b");
    cr_assert_not_null(f);
    static uint8_t buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    uint8_t *hit = memmem(buf, n, "needle-needle", 13);
    cr_assert_not_null(hit, "the document is not in the first MB of %s", path);
    hit[-4] = 0x7f; /* the string's int32 length, little-endian */
    cr_assert_eq(fseek(f, (long)(hit - 4 - buf), SEEK_SET), 0);
    cr_assert_eq(fwrite(hit - 4, 1, 1, f), 1);
    fclose(f);
    t_reopen(&t);
    bson_t *r = t_cmd(&t, &rc, "{\"find\": \"c\"}");
    cr_assert_neq(rc, 0, "a malformed document was returned: %s", t_json(r));
    cr_assert_eq(t_i64(r, "code"), MD_CODE_DATA_CORRUPTION_DETECTED);
    cr_assert(strstr(t_str(r, "errmsg"), "well-formed") != NULL, "%s", t_str(r, "errmsg"));
    bson_destroy(r);
    t_close(&t);
}

/* ---- upserts racing on one _id ------------------------------------------------------ */

typedef struct race_arg {
    md_db *db;
    int rounds;
    _Atomic int *errors;
} race_arg;

static void *upsert_racer(void *p)
{
    race_arg *a = p;
    char cmd[256];
    for (int i = 0; i < a->rounds; i++) {
        bson_t r;
        md_error err;
        bson_iter_t it;
        snprintf(cmd, sizeof cmd,
                 "{\"update\": \"u\", \"updates\": [{\"q\": {\"_id\": %d, \"tag\": \"t\"}, "
                 "\"u\": {\"$inc\": {\"n\": 1}}, \"upsert\": true}]}",
                 i);
        if (md_db_command_json(a->db, cmd, &r, &err) != 0 || bson_iter_init_find(&it, &r, "writeErrors"))
            (*a->errors)++;
        bson_destroy(&r);
        snprintf(cmd, sizeof cmd,
                 "{\"findAndModify\": \"f\", \"query\": {\"_id\": %d}, "
                 "\"update\": {\"$inc\": {\"n\": 1}}, \"upsert\": true, \"new\": true}",
                 i);
        if (md_db_command_json(a->db, cmd, &r, &err) != 0)
            (*a->errors)++;
        bson_destroy(&r);
    }
    return NULL;
}

/* Threads upserting the same new _id at once: the insert that loses the
 * race searches again and updates the winner's document (as MongoDB 4.2;
 * 3.x on WiredTiger answered E11000), for update and findAndModify. */
Test(q_cmd, upserts_racing_on_one_id_all_land)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        enum { THREADS = 6, ROUNDS = 150 };
        _Atomic int errors = 0;
        race_arg a = {t.db, ROUNDS, &errors};
        pthread_t th[THREADS];
        for (int i = 0; i < THREADS; i++)
            cr_assert_eq(pthread_create(&th[i], NULL, upsert_racer, &a), 0);
        for (int i = 0; i < THREADS; i++)
            pthread_join(th[i], NULL);
        cr_assert_eq(errors, 0, "[%s] %d upserts failed", t.engine, (int)errors);
        for (int c = 0; c < 2; c++) {
            bson_t *r = T_OK(&t, "{\"count\": \"%s\"}", c ? "f" : "u");
            cr_assert_eq(t_i64(r, "n"), ROUNDS, "[%s] one document per _id", t.engine);
            bson_destroy(r);
            r = T_OK(&t, "{\"count\": \"%s\", \"query\": {\"n\": %d}}", c ? "f" : "u", THREADS);
            cr_assert_eq(t_i64(r, "n"), ROUNDS, "[%s] every increment landed", t.engine);
            bson_destroy(r);
        }
    }
}
