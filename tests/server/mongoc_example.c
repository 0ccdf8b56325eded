/*
 * mongoc_example.c -- libmongoc (Debian's libmongoc-dev) against
 * `minidoc serve`: connect, insert, query with a cursor that needs getMore,
 * update, count, print, and check every answer.  Exit status 0 when all is
 * as expected.  Built by make when libmongoc-1.0 is installed and run by
 * tests/server/test_drivers.sh:
 *
 *   mongoc_example mongodb://127.0.0.1:PORT/?compressors=zstd  DBNAME
 */
#include <mongoc/mongoc.h>
#include <stdio.h>

static int failures;

#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "mongoc_example: FAIL %s:%d: ", __FILE__, __LINE__);           \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fprintf(stderr, "\n");                                                         \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

int main(int argc, char **argv)
{
    bson_error_t err;
    if (argc != 3) {
        fprintf(stderr, "usage: mongoc_example URI DBNAME\n");
        return 2;
    }
    mongoc_init();
    mongoc_client_t *client = mongoc_client_new(argv[1]);
    CHECK(client, "bad URI %s", argv[1]);
    if (!client)
        return 1;
    mongoc_collection_t *coll = mongoc_client_get_collection(client, argv[2], "people");
    mongoc_collection_drop(coll, NULL);

    /* insert 300 documents in one insert_many (an OP_MSG document sequence) */
    bson_t *docs[300];
    for (int i = 0; i < 300; i++)
        docs[i] = BCON_NEW("_id", BCON_INT32(i), "name", BCON_UTF8("person"), "age",
                           BCON_INT32(20 + i % 50));
    bool ok = mongoc_collection_insert_many(coll, (const bson_t **)docs, 300, NULL, NULL, &err);
    CHECK(ok, "insert_many: %s", err.message);
    for (int i = 0; i < 300; i++)
        bson_destroy(docs[i]);

    /* a duplicate _id: code 11000 */
    bson_t *dup = BCON_NEW("_id", BCON_INT32(7));
    ok = mongoc_collection_insert_one(coll, dup, NULL, NULL, &err);
    CHECK(!ok && err.code == 11000, "duplicate insert: ok=%d code=%u %s", ok, err.code,
          err.message);
    bson_destroy(dup);

    /* update and query: the cursor needs several getMores with batchSize 40 */
    bson_t *sel = BCON_NEW("age", "{", "$gte", BCON_INT32(60), "}");
    bson_t *upd = BCON_NEW("$set", "{", "senior", BCON_BOOL(true), "}");
    bson_t reply;
    ok = mongoc_collection_update_many(coll, sel, upd, NULL, &reply, &err);
    CHECK(ok, "update_many: %s", err.message);
    bson_iter_t it;
    CHECK(bson_iter_init_find(&it, &reply, "modifiedCount") && bson_iter_as_int64(&it) == 60,
          "modifiedCount");
    bson_destroy(&reply);
    bson_destroy(upd);
    bson_t *filter = BCON_NEW("senior", BCON_BOOL(true));
    bson_t *opts = BCON_NEW("batchSize", BCON_INT32(40), "sort", "{", "_id", BCON_INT32(1), "}");
    mongoc_cursor_t *cur = mongoc_collection_find_with_opts(coll, filter, opts, NULL);
    const bson_t *doc;
    int n = 0, last = -1;
    while (mongoc_cursor_next(cur, &doc)) {
        if (bson_iter_init_find(&it, doc, "_id")) {
            CHECK(bson_iter_int32(&it) > last, "order");
            last = bson_iter_int32(&it);
        }
        if (n == 0) {
            char *j = bson_as_relaxed_extended_json(doc, NULL);
            printf("mongoc_example: first senior: %s\n", j);
            bson_free(j);
        }
        n++;
    }
    CHECK(!mongoc_cursor_error(cur, &err), "cursor: %s", err.message);
    CHECK(n == 60, "found %d seniors, expected 60", n);
    mongoc_cursor_destroy(cur);
    bson_destroy(opts);
    bson_destroy(filter);
    bson_destroy(sel);

    int64_t count = mongoc_collection_count_documents(coll, &(bson_t)BSON_INITIALIZER, NULL,
                                                      NULL, NULL, &err);
    if (count < 0 && err.code == 59)
        printf("mongoc_example: count_documents needs aggregate, which this server lacks\n");
    else
        CHECK(count == 300, "count_documents: %lld %s", (long long)count, err.message);
    printf("mongoc_example: %d seniors of 300 people\n", n);

    mongoc_collection_destroy(coll);
    mongoc_client_destroy(client);
    mongoc_cleanup();
    return failures ? 1 : 0;
}
