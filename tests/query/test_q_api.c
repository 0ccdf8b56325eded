/*
 * test_q_api.c -- the typed wrappers of include/minidoc.h on every engine:
 * libmongoc's reply fields (insertedCount, matchedCount, modifiedCount,
 * upsertedId, deletedCount), the first writeError turned into an error
 * return, md_cursor across getMore batches (and killCursors on destroy),
 * count, findAndModify, create_index, and md_db_open options.
 */
#include "test_q_util.h"

static int64_t reply_i64(const bson_t *r, const char *k)
{
    return t_i64(r, k);
}

Test(q_api, insert_one_and_many)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        md_collection *c = md_db_get_collection(t.db, "people");
        cr_assert_str_eq(md_collection_get_name(c), "people");
        bson_t *a = BCON_NEW("_id", BCON_INT32(1), "name", BCON_UTF8("Ada"));
        bson_t *b = BCON_NEW("_id", BCON_INT32(2), "name", BCON_UTF8("Bob"));
        bson_t reply;
        md_error err;
        cr_assert_eq(md_collection_insert_one(c, a, NULL, &reply, &err), 0);
        cr_assert_eq(reply_i64(&reply, "insertedCount"), 1);
        bson_destroy(&reply);
        const bson_t *docs[] = {b, a};
        int rc = md_collection_insert_many(c, docs, 2, NULL, &reply, &err);
        cr_assert_eq(rc, MD_EDUPKEY);
        cr_assert_eq(err.code, 11000);
        cr_assert(strstr(err.message, "E11000 duplicate key error") != NULL);
        cr_assert_eq(reply_i64(&reply, "insertedCount"), 1);
        cr_assert_eq(t_len(&reply, "writeErrors"), 1);
        bson_destroy(&reply);
        bson_t *unordered = BCON_NEW("ordered", BCON_BOOL(false));
        bson_t *dollar = BCON_NEW("$bad", BCON_INT32(1));
        const bson_t *docs2[] = {dollar, b};
        cr_assert_eq(md_collection_insert_many(c, docs2, 2, unordered, NULL, &err), MD_ERROR);
        cr_assert_eq(err.code, 52);
        int64_t n;
        cr_assert_eq(md_collection_count(c, NULL, NULL, &n, &err), 0);
        cr_assert_eq(n, 2);
        bson_destroy(dollar);
        bson_destroy(unordered);
        bson_destroy(a);
        bson_destroy(b);
        md_collection_destroy(c);
    }
}

/* A batch longer than the notes kept on the stack: every document's
 * top-level facts still come from its one validation (a $-name refused,
 * an _id that is not first moved to the front). */
Test(q_api, insert_many_long_batch_checks_every_document)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        md_collection *c = md_db_get_collection(t.db, "long");
        md_error err;
        bson_t reply;
        bson_t *docs[40];
        for (int i = 0; i < 40; i++)
            docs[i] = i == 30   ? BCON_NEW("x", BCON_INT32(i), "_id", BCON_INT32(i))
                      : i == 35 ? BCON_NEW("_id", BCON_INT32(i), "$bad", BCON_INT32(1))
                                : BCON_NEW("_id", BCON_INT32(i));
        cr_assert_eq(md_collection_insert_many(c, (const bson_t **)docs, 40, NULL, &reply, &err),
                     MD_ERROR, "[%s]", t.engine);
        cr_assert_eq(err.code, 52, "[%s] %s", t.engine, err.message);
        cr_assert_eq(reply_i64(&reply, "insertedCount"), 35, "[%s] ordered: stops at 35",
                     t.engine);
        bson_destroy(&reply);
        bson_t *r = T_OK(&t, "{\"find\": \"long\", \"filter\": {\"_id\": 30}}");
        bson_iter_t it;
        cr_assert(bson_iter_init(&it, r) &&
                  bson_iter_find_descendant(&it, "cursor.firstBatch.0", &it));
        bson_iter_t f;
        cr_assert(bson_iter_recurse(&it, &f) && bson_iter_next(&f));
        cr_assert_str_eq(bson_iter_key(&f), "_id", "[%s] _id stored first", t.engine);
        bson_destroy(r);
        for (int i = 0; i < 40; i++)
            bson_destroy(docs[i]);
        md_collection_destroy(c);
    }
}

Test(q_api, update_replace_delete)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        md_collection *c = md_db_get_collection(t.db, "c");
        md_error err;
        bson_t reply;
        for (int i = 0; i < 5; i++) {
            bson_t *d = BCON_NEW("_id", BCON_INT32(i), "g", BCON_INT32(i % 2));
            cr_assert_eq(md_collection_insert_one(c, d, NULL, NULL, &err), 0);
            bson_destroy(d);
        }
        bson_t *q = BCON_NEW("g", BCON_INT32(0));
        bson_t *u = BCON_NEW("$set", "{", "x", BCON_INT32(1), "}");
        cr_assert_eq(md_collection_update_many(c, q, u, NULL, &reply, &err), 0);
        cr_assert_eq(reply_i64(&reply, "matchedCount"), 3);
        cr_assert_eq(reply_i64(&reply, "modifiedCount"), 3);
        cr_assert_eq(reply_i64(&reply, "upsertedCount"), 0);
        cr_assert_not(t_has(&reply, "upsertedId"));
        bson_destroy(&reply);
        cr_assert_eq(md_collection_update_one(c, q, u, NULL, &reply, &err), 0);
        cr_assert_eq(reply_i64(&reply, "matchedCount"), 1);
        cr_assert_eq(reply_i64(&reply, "modifiedCount"), 0);
        bson_destroy(&reply);
        bson_t *q9 = BCON_NEW("_id", BCON_INT32(9));
        bson_t *upsert = BCON_NEW("upsert", BCON_BOOL(true));
        cr_assert_eq(md_collection_update_one(c, q9, u, upsert, &reply, &err), 0);
        cr_assert_eq(reply_i64(&reply, "upsertedCount"), 1);
        cr_assert_eq(reply_i64(&reply, "upsertedId"), 9);
        cr_assert_eq(reply_i64(&reply, "matchedCount"), 0);
        bson_destroy(&reply);
        bson_t *repl = BCON_NEW("r", BCON_INT32(1));
        cr_assert_eq(md_collection_replace_one(c, q9, repl, NULL, &reply, &err), 0);
        cr_assert_eq(reply_i64(&reply, "modifiedCount"), 1);
        bson_destroy(&reply);
        cr_assert_lt(md_collection_update_one(c, q9, repl, NULL, NULL, &err), 0,
                     "update_one wants $ operators");
        cr_assert_lt(md_collection_replace_one(c, q9, u, NULL, NULL, &err), 0);
        cr_assert_eq(md_collection_delete_one(c, q, NULL, &reply, &err), 0);
        cr_assert_eq(reply_i64(&reply, "deletedCount"), 1);
        bson_destroy(&reply);
        bson_t *all = bson_new();
        cr_assert_eq(md_collection_delete_many(c, all, NULL, &reply, &err), 0);
        cr_assert_eq(reply_i64(&reply, "deletedCount"), 5);
        bson_destroy(&reply);
        bson_destroy(all);
        bson_destroy(repl);
        bson_destroy(upsert);
        bson_destroy(q9);
        bson_destroy(u);
        bson_destroy(q);
        md_collection_destroy(c);
    }
}

Test(q_api, cursor_batches_and_destroy)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        md_collection *c = md_db_get_collection(t.db, "c");
        md_error err;
        for (int i = 0; i < 35; i++) {
            bson_t *d = BCON_NEW("_id", BCON_INT32(i), "odd", BCON_BOOL(i % 2));
            cr_assert_eq(md_collection_insert_one(c, d, NULL, NULL, &err), 0);
            bson_destroy(d);
        }
        bson_t *f = BCON_NEW("odd", BCON_BOOL(true));
        bson_t *o = BCON_NEW("batchSize", BCON_INT32(4), "sort", "{", "_id", BCON_INT32(-1),
                             "}");
        md_cursor *cur = md_collection_find_with_opts(c, f, o);
        const bson_t *doc;
        int n = 0, last = 1000;
        while (md_cursor_next(cur, &doc)) {
            bson_iter_t it;
            cr_assert(bson_iter_init_find(&it, doc, "_id"));
            cr_assert_lt(bson_iter_int32(&it), last);
            last = bson_iter_int32(&it);
            n++;
        }
        cr_assert_not(md_cursor_error(cur, &err));
        cr_assert_eq(n, 17);
        md_cursor_destroy(cur);
        cur = md_collection_find_with_opts(c, NULL, o);
        cr_assert(md_cursor_next(cur, &doc));
        bson_t *r = T_OK(&t, "{\"serverStatus\": 1}");
        cr_assert_eq(t_i64(r, "metrics.cursor.open.total"), 1);
        bson_destroy(r);
        md_cursor_destroy(cur);
        r = T_OK(&t, "{\"serverStatus\": 1}");
        cr_assert_eq(t_i64(r, "metrics.cursor.open.total"), 0, "destroy kills the cursor");
        bson_destroy(r);
        bson_t *bad = BCON_NEW("limit", BCON_INT32(-3));
        cur = md_collection_find_with_opts(c, NULL, bad);
        cr_assert_not(md_cursor_next(cur, &doc));
        cr_assert(md_cursor_error(cur, &err));
        cr_assert_eq(err.code, 2);
        md_cursor_destroy(cur);
        bson_destroy(bad);
        bson_destroy(o);
        bson_destroy(f);
        md_collection_destroy(c);
    }
}

Test(q_api, find_and_modify_and_create_index)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        md_collection *c = md_db_get_collection(t.db, "c");
        md_error err;
        bson_t reply;
        bson_t *keys = BCON_NEW("email", BCON_INT32(1));
        bson_t *uniq = BCON_NEW("unique", BCON_BOOL(true));
        cr_assert_eq(md_collection_create_index(c, keys, uniq, &reply, &err), 0);
        cr_assert_eq(reply_i64(&reply, "numIndexesAfter"), 2);
        bson_destroy(&reply);
        bson_t *d1 = BCON_NEW("_id", BCON_INT32(1), "email", BCON_UTF8("a@x"));
        bson_t *d2 = BCON_NEW("_id", BCON_INT32(2), "email", BCON_UTF8("a@x"));
        cr_assert_eq(md_collection_insert_one(c, d1, NULL, NULL, &err), 0);
        cr_assert_eq(md_collection_insert_one(c, d2, NULL, NULL, &err), MD_EDUPKEY);
        cr_assert(strstr(err.message, "index: email_1 dup key") != NULL, "%s", err.message);
        bson_t *q = BCON_NEW("_id", BCON_INT32(1));
        bson_t *o = BCON_NEW("update", "{", "$set", "{", "v", BCON_INT32(5), "}", "}", "new",
                             BCON_BOOL(true));
        cr_assert_eq(md_collection_find_and_modify(c, q, o, &reply, &err), 0);
        cr_assert_eq(t_i64(&reply, "value.v"), 5);
        cr_assert_eq(t_i64(&reply, "lastErrorObject.n"), 1);
        bson_destroy(&reply);
        bson_destroy(o);
        bson_destroy(q);
        bson_destroy(d1);
        bson_destroy(d2);
        bson_destroy(uniq);
        bson_destroy(keys);
        md_collection_destroy(c);
    }
}

Test(q_api, open_options)
{
    char dir[] = "/tmp/md_qapi_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    md_db *db;
    md_error err;
    bson_t *o = BCON_NEW("engine", BCON_UTF8("ephemeralForTest"), "dbName", BCON_UTF8("shop"));
    cr_assert_eq(md_db_open(dir, o, &db, &err), 0, "%s", err.message);
    cr_assert_str_eq(md_db_name(db), "shop");
    bson_t reply;
    cr_assert_eq(md_db_command_json(db, "{\"insert\": \"c\", \"documents\": [{}]}", &reply,
                                    &err), 0);
    bson_destroy(&reply);
    cr_assert_eq(md_db_command_json(db, "{\"find\": \"c\"}", &reply, &err), 0);
    cr_assert_str_eq(t_str(&reply, "cursor.ns"), "shop.c");
    bson_destroy(&reply);
    cr_assert_lt(md_db_command_json(db, "not json", &reply, &err), 0);
    cr_assert_eq(err.code, 9);
    cr_assert_str_eq(err.code_name, "FailedToParse");
    cr_assert_eq(t_dbl(&reply, "ok"), 0.0);
    bson_destroy(&reply);
    md_db_close(db);
    md_db_close(NULL);
    bson_destroy(o);
    nftw(dir, t_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}
