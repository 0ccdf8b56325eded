/*
 * test_q_hash.c -- MongoDB's element hash (query/q_hash.c): MD5 against
 * RFC 1321's test suite, the hash against the values MongoDB publishes
 * for _hashBSONElement (jstests/core/hash.js, seed 1), and hashed indexes
 * built before the hash was MongoDB's being rebuilt at open.
 */
#include <math.h>

#include "q_int.h"
#include "test_q_util.h"

static void md5_hex(const char *s, char out[33])
{
    q_md5 m;
    uint8_t d[16];
    q_md5_init(&m);
    /* in uneven pieces, to cross block boundaries inside an append */
    for (size_t i = 0, n = strlen(s), step = 1; i < n; i += step, step = step * 3 % 71 + 1)
        q_md5_append(&m, s + i, i + step > n ? n - i : step);
    q_md5_finish(&m, d);
    for (int i = 0; i < 16; i++)
        sprintf(out + 2 * i, "%02x", d[i]);
}

Test(q_hash, md5_rfc1321_suite)
{
    static const char *const v[][2] = {
        {"", "d41d8cd98f00b204e9800998ecf8427e"},
        {"a", "0cc175b9c0f1b6a831c399e269772661"},
        {"abc", "900150983cd24fb0d6963f7d28e17f72"},
        {"message digest", "f96b697d7cb7938d525a2f31aaf161d0"},
        {"abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"},
        {"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
         "d174ab98d277d9f5a5611c2c9f419d9f"},
        {"1234567890123456789012345678901234567890123456789012345678901234567890123456"
         "7890",
         "57edf4a22be3c955ac49da2e2107b67a"},
    };
    char hex[33];
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        md5_hex(v[i][0], hex);
        cr_assert_str_eq(hex, v[i][1], "md5(\"%s\")", v[i][0]);
    }
}

static int64_t hash_of(bson_t *one, int32_t seed)
{
    bson_iter_t it;
    cr_assert(bson_iter_init(&it, one) && bson_iter_next(&it));
    int64_t h = q_hash_element(&it, seed);
    bson_destroy(one);
    return h;
}

/* MongoDB's own expected values: jstests/core/hash.js runs
 * {_hashBSONElement: key, seed: 1} on each. */
Test(q_hash, matches_mongodb_published_values)
{
    const int64_t max = 1136124329541638701LL, lowest = 5744114172487291558LL,
                  zero = 5574369198691456941LL;
    double p63 = ldexp(1, 63);
    cr_assert_eq(hash_of(BCON_NEW("k", BCON_UTF8("hashthis")), 1), 6271151123721111923LL);
    cr_assert_eq(hash_of(BCON_NEW("k", BCON_DOUBLE(p63)), 1), lowest);
    cr_assert_eq(hash_of(BCON_NEW("k", BCON_DOUBLE(p63 + ldexp(1, 11))), 1), max);
    cr_assert_eq(hash_of(BCON_NEW("k", BCON_DOUBLE(ldexp(1, 500))), 1), max);
    cr_assert_eq(hash_of(BCON_NEW("k", BCON_DOUBLE(INFINITY)), 1), max);
    cr_assert_eq(hash_of(BCON_NEW("k", BCON_DOUBLE(p63 - ldexp(1, 10))), 1),
                 -3954856262017896439LL);
    cr_assert_eq(hash_of(BCON_NEW("k", BCON_DOUBLE(-p63)), 1), lowest);
    cr_assert_eq(hash_of(BCON_NEW("k", BCON_DOUBLE(-(p63 - ldexp(1, 10)))), 1),
                 -1762411739488908479LL);
    cr_assert_eq(hash_of(BCON_NEW("k", BCON_DOUBLE(-(p63 + ldexp(1, 11)))), 1), lowest);
    cr_assert_eq(hash_of(BCON_NEW("k", BCON_DOUBLE(-INFINITY)), 1), lowest);
    cr_assert_eq(hash_of(BCON_NEW("k", BCON_DOUBLE(0)), 1), zero);
    cr_assert_eq(hash_of(BCON_NEW("k", BCON_INT64(0)), 1), zero);
    cr_assert_eq(hash_of(BCON_NEW("k", BCON_DOUBLE(NAN)), 1), zero);
    cr_assert_eq(hash_of(BCON_NEW("k", BCON_DOUBLE(-NAN)), 1), zero);
    cr_assert_eq(hash_of(BCON_NEW("k", "{", "a", BCON_DOUBLE(1), "b", BCON_DOUBLE(2), "}"), 1),
                 -7076810813311352857LL);
    cr_assert_eq(hash_of(BCON_NEW("k", "{", "a", BCON_DOUBLE(p63), "b", BCON_DOUBLE(NAN), "}"),
                         1),
                 1223292051903137684LL);
}

Test(q_hash, numbers_hash_alike_and_types_apart)
{
    /* hasher.cpp's own start-up check, seed 0 */
    cr_assert_eq(hash_of(BCON_NEW("check", BCON_INT32(42)), 0), -944302157085130861LL);
    int64_t i = hash_of(BCON_NEW("k", BCON_INT32(42)), 0);
    cr_assert_eq(hash_of(BCON_NEW("k", BCON_INT64(42)), 0), i);
    cr_assert_eq(hash_of(BCON_NEW("k", BCON_DOUBLE(42.0)), 0), i);
    cr_assert_eq(hash_of(BCON_NEW("k", BCON_DOUBLE(42.9)), 0), i); /* truncated */
    bson_decimal128_t d;
    bson_decimal128_from_string("42.00", &d);
    cr_assert_eq(hash_of(BCON_NEW("k", BCON_DECIMAL128(&d)), 0), i);
    cr_assert_neq(hash_of(BCON_NEW("k", BCON_UTF8("42")), 0), i);
    cr_assert_neq(hash_of(BCON_NEW("k", BCON_INT32(42)), 1), i, "the seed changes the hash");
    /* a missing field hashes as null */
    cr_assert_eq(q_hash_element(NULL, 0), hash_of(BCON_NEW("k", BCON_NULL), 0));
    /* field names inside documents count, the top-level name does not */
    cr_assert_neq(hash_of(BCON_NEW("k", "{", "a", BCON_INT32(1), "}"), 0),
                  hash_of(BCON_NEW("k", "{", "b", BCON_INT32(1), "}"), 0));
    cr_assert_eq(hash_of(BCON_NEW("x", BCON_INT32(1)), 0), hash_of(BCON_NEW("y", BCON_INT32(1)), 0));
}

Test(q_hash, hash_command)
{
    tdb t;
    t_open(&t, "mmapv1");
    bson_t *r = T_OK(&t, "{\"_hashBSONElement\": \"hashthis\", \"seed\": 1}");
    cr_assert_eq(t_i64(r, "out"), 6271151123721111923LL);
    cr_assert_str_eq(t_str(r, "key"), "hashthis");
    cr_assert_eq(t_i64(r, "seed"), 1);
    bson_destroy(r);
    r = T_OK(&t, "{\"_hashBSONElement\": {\"a\": 1.0, \"b\": 2.0}, \"seed\": 1}");
    cr_assert_eq(t_i64(r, "out"), -7076810813311352857LL);
    bson_destroy(r);
    T_ERR(&t, 14, "seed", "{\"_hashBSONElement\": 1, \"seed\": \"x\"}");
    t_close(&t);
}

/* A hashed index whose catalog entry predates MongoDB's hash (no hash:
 * "md5") is rebuilt when the database opens: its old keys are replaced. */
Test(q_hash, stale_hashed_index_is_rebuilt_at_open)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        if (!t_persistent(&t))
            continue;
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"a\": \"hashed\"}, "
                  "\"name\": \"a_hashed\"}]}");
        for (int i = 0; i < 20; i++)
            T_RUN(&t, "{\"insert\": \"c\", \"documents\": [{\"_id\": %d, \"a\": %d}]}", i, i % 5);
        /* make the index look old: wrong keys, and an entry without the mark */
        q_coll *c = t.db->colls;
        while (c && strcmp(c->name, "c") != 0)
            c = c->next;
        cr_assert_not_null(c);
        q_index *ix = q_index_find(c, "a_hashed");
        cr_assert_not_null(ix);
        eng_txn *tx;
        md_error err;
        cr_assert_eq(eng_txn_begin(t.db->eng, &tx), 0);
        cr_assert_eq(eng_ss_truncate(ix->ss, tx), 0);
        ix->hash_stale = true;
        cr_assert_eq(q_catalog_put(t.db, tx, c, &err), 0, "%s", err.message);
        cr_assert_eq(eng_txn_commit(tx, true, &err), 0, "%s", err.message);
        md_db_close(t.db);
        t_reopen(&t);
        bson_t *r = T_OK(&t, "{\"explain\": {\"find\": \"c\", \"filter\": {\"a\": 3}}, "
                             "\"verbosity\": \"executionStats\"}");
        cr_assert_str_eq(t_str(r, "queryPlanner.winningPlan.inputStage.indexName"), "a_hashed",
                         "[%s]", t.engine);
        cr_assert_eq(t_i64(r, "executionStats.nReturned"), 4, "[%s]", t.engine);
        bson_destroy(r);
        r = T_OK(&t, "{\"validate\": \"c\", \"full\": true}");
        bson_iter_t it;
        cr_assert(t_find(r, "valid", &it) && bson_iter_as_bool(&it), "[%s] validate", t.engine);
        bson_destroy(r);
        /* the entry is marked again: the next open does not rebuild */
        c = t.db->colls;
        while (c && strcmp(c->name, "c") != 0)
            c = c->next;
        cr_assert(!q_index_find(c, "a_hashed")->hash_stale);
    }
}
