/*
 * test_slice_cache.c -- 5.10 Array Slice Cache (patterns/slice_cache.c) on
 * every engine: adding a comment (insert + the corrected $push with $each
 * and $slice: -10), the cache keeping the ten newest with the newest last,
 * the book's $slice examples, no index beyond _id, both scenarios from
 * several threads with their check, and the engine-visible point: a
 * pre-allocated post never moves on mmapv1, one without pre-allocation
 * moves as its cache grows, and btree rewrites the whole post each push.
 */
#include "pt_test_util.h"

static bool in_place(const ptt_db *t)
{
    const eng_ops *ops = eng_find(t->engine);
    return ops && ops->has_damages;
}

static int64_t engine_stat(ptt_db *t, const bson_t *stats, const char *field)
{
    char path[128];
    snprintf(path, sizeof path, "%s.%s", t->engine, field);
    return ptt_i64(stats, path);
}

static bson_t *coll_stats(ptt_db *t, const char *coll)
{
    return PTT_OK(t, "{\"collStats\": \"%s\"}", coll);
}

/* The messages of the post's cache, in order, into msgs[] (returns n). */
static int cached_messages(ptt_db *t, const bson_oid_t *post, char msgs[][32], int max)
{
    md_error err;
    bson_t doc;
    bson_iter_t it, arr, f;
    int n = 0;
    cr_assert_eq(pt_slice_find_post(t->db, post, &doc, &err), 0, "%s", err.message);
    cr_assert(ptt_find(&doc, "latestComments", &it) && BSON_ITER_HOLDS_ARRAY(&it));
    bson_iter_recurse(&it, &arr);
    while (bson_iter_next(&arr)) {
        cr_assert_lt(n, max);
        cr_assert(bson_iter_recurse(&arr, &f) && bson_iter_find(&f, "message"));
        snprintf(msgs[n++], 32, "%s", bson_iter_utf8(&f, NULL));
    }
    bson_destroy(&doc);
    return n;
}

Test(slice_cache, add_comment_keeps_the_ten_newest_last)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        bson_oid_t post, blog, cid;
        char msgs[16][32];
        bson_oid_init(&post, NULL);
        bson_oid_init(&blog, NULL);
        cr_assert_eq(pt_slice_create_post(t.db, &post, &blog, "Awesome blog post",
                                          "Testing this blog software", NULL, &err), 0, "%s",
                     err.message);
        cr_assert_eq(cached_messages(&t, &post, msgs, 16), 0);
        for (int i = 0; i < 25; i++) {
            char m[32];
            snprintf(m, sizeof m, "message %02d", i);
            cr_assert_eq(pt_slice_add_comment(t.db, &post, m, 1426075422615LL + i, &cid, &err),
                         0, "[%s] %s", t.engine, err.message);
            int n = cached_messages(&t, &post, msgs, 16);
            cr_assert_eq(n, i + 1 < PT_SLICE_LATEST ? i + 1 : PT_SLICE_LATEST, "[%s]", t.engine);
            /* newest last, the ones before it in order */
            for (int k = 0; k < n; k++) {
                char want[32];
                snprintf(want, sizeof want, "message %02d", i - (n - 1) + k);
                cr_assert_str_eq(msgs[k], want, "[%s] slot %d after %d", t.engine, k, i);
            }
        }
        /* every comment is also in the comments collection, with its post */
        cr_assert_eq(ptt_count(&t, PT_SLICE_COMMENTS, "{}"), 25);
        char *pid = bson_malloc(25);
        bson_oid_to_string(&post, pid);
        char filter[128];
        snprintf(filter, sizeof filter, "{\"postId\": {\"$oid\": \"%s\"}}", pid);
        cr_assert_eq(ptt_count(&t, PT_SLICE_COMMENTS, filter), 25);
        bson_free(pid);
        /* the cached copy is the comment as inserted (_id, postId, ...) */
        bson_t doc;
        cr_assert_eq(pt_slice_find_post(t.db, &post, &doc, &err), 0);
        bson_iter_t it;
        cr_assert(ptt_find(&doc, "latestComments.9._id", &it) && BSON_ITER_HOLDS_OID(&it));
        cr_assert(bson_oid_equal(bson_iter_oid(&it), &cid));
        cr_assert(ptt_find(&doc, "latestComments.9.postId", &it) &&
                  bson_oid_equal(bson_iter_oid(&it), &post));
        cr_assert(ptt_find(&doc, "latestComments.9.publishedOn", &it) &&
                  bson_iter_date_time(&it) == 1426075422615LL + 24);
        cr_assert_str_eq(ptt_str(&doc, "title"), "Awesome blog post");
        bson_destroy(&doc);
        /* a missing post is reported */
        bson_oid_t none;
        bson_oid_init(&none, NULL);
        cr_assert_eq(pt_slice_add_comment(t.db, &none, "x", 0, NULL, &err), MD_NOTFOUND);
        cr_assert_eq(pt_slice_find_post(t.db, &none, &doc, &err), MD_NOTFOUND);
        bson_destroy(&doc);
    }
}

/* The book's two $slice examples, and erratum 1: the update as printed
 * (no $push) is a replacement that loses the post's fields. */
Test(slice_cache, slice_examples_and_the_missing_push)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        bson_destroy(PTT_OK(&t, "{\"insert\": \"s\", \"documents\": [{\"_id\": 1, \"array\": "
                                "[40, 50, 60]}, {\"_id\": 2, \"array\": [89, 90]}]}"));
        bson_destroy(PTT_OK(&t, "{\"update\": \"s\", \"updates\": [{\"q\": {\"_id\": 1}, \"u\": "
                                "{\"$push\": {\"array\": {\"$each\": [80, 78, 86], \"$slice\": "
                                "-5}}}}, {\"q\": {\"_id\": 2}, \"u\": {\"$push\": {\"array\": "
                                "{\"$each\": [100, 20], \"$slice\": 3}}}}]}"));
        bson_t *r = PTT_OK(&t, "{\"find\": \"s\", \"sort\": {\"_id\": 1}}");
        const int64_t want1[] = {50, 60, 80, 78, 86}, want2[] = {89, 90, 100};
        for (int i = 0; i < 5; i++) {
            char p[64];
            snprintf(p, sizeof p, "cursor.firstBatch.0.array.%d", i);
            cr_assert_eq(ptt_i64(r, p), want1[i]);
        }
        for (int i = 0; i < 3; i++) {
            char p[64];
            snprintf(p, sizeof p, "cursor.firstBatch.1.array.%d", i);
            cr_assert_eq(ptt_i64(r, p), want2[i]);
        }
        cr_assert(!ptt_has(r, "cursor.firstBatch.0.array.5"));
        cr_assert(!ptt_has(r, "cursor.firstBatch.1.array.3"));
        bson_destroy(r);
        /* the printed form: {latestComments: {$each: ...}} replaces the
         * document, and a $-prefixed field inside it is refused */
        int rc;
        bson_destroy(PTT_OK(&t, "{\"insert\": \"p\", \"documents\": [{\"_id\": 1, \"title\": "
                                "\"t\", \"latestComments\": []}]}"));
        r = ptt_cmd(&t, &rc, "{\"update\": \"p\", \"updates\": [{\"q\": {\"_id\": 1}, \"u\": "
                             "{\"latestComments\": {\"$each\": [{\"m\": 1}], \"$slice\": -10}}}]}");
        cr_assert(ptt_has(r, "writeErrors.0.code") || rc != 0, "[%s] printed update accepted",
                  t.engine);
        bson_destroy(r);
        cr_assert_eq(ptt_count(&t, "p", "{\"title\": \"t\"}"), 1, "post intact");
    }
}

Test(slice_cache, no_index_beyond_id)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        bson_oid_t post, blog;
        bson_oid_init(&post, NULL);
        bson_oid_init(&blog, NULL);
        cr_assert_eq(pt_slice_create_post(t.db, &post, &blog, "t", "c", NULL, &err), 0);
        cr_assert_eq(pt_slice_add_comment(t.db, &post, "m", 0, NULL, &err), 0);
        bson_t *r = PTT_OK(&t, "{\"listIndexes\": \"%s\"}", PT_SLICE_POSTS);
        cr_assert_str_eq(ptt_str(r, "cursor.firstBatch.0.name"), "_id_");
        cr_assert(!ptt_has(r, "cursor.firstBatch.1"));
        bson_destroy(r);
        /* the push finds its post by _id */
        char id[25], q[256];
        bson_oid_to_string(&post, id);
        snprintf(q, sizeof q, "{\"find\": \"posts\", \"filter\": {\"_id\": {\"$oid\": \"%s\"}}}",
                 id);
        bson_t *x = ptt_explain(&t, q);
        bson_t st;
        bool ix = ptt_plan_stage(x, "IDHACK", &st) || ptt_plan_stage(x, "IXSCAN", &st);
        cr_assert(ix, "[%s] _id lookup is not an index plan", t.engine);
        bson_destroy(&st);
        bson_destroy(x);
    }
}

/* A pre-allocated post starts with an empty cache but the room of a full
 * one: on mmapv1 pushing ten comments of the template's size never moves
 * it; without pre-allocation the same pushes move it. */
Test(slice_cache, preallocation_keeps_posts_in_place)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        bson_oid_t blog, pre[20], plain[20];
        bson_oid_init(&blog, NULL);
        const char *msg = "a comment of the one size every comment has in this test....";
        bson_t tmpl = BSON_INITIALIZER;
        bson_oid_t tid;
        bson_oid_init(&tid, NULL);
        BSON_APPEND_OID(&tmpl, "_id", &tid);
        BSON_APPEND_OID(&tmpl, "postId", &tid);
        BSON_APPEND_DATE_TIME(&tmpl, "publishedOn", 0);
        BSON_APPEND_UTF8(&tmpl, "message", msg);
        for (int i = 0; i < 20; i++) {
            bson_oid_init(&pre[i], NULL);
            bson_oid_init(&plain[i], NULL);
            cr_assert_eq(pt_slice_create_post(t.db, &pre[i], &blog, "t", "c", &tmpl, &err), 0,
                         "%s", err.message);
        }
        char m[8][32];
        cr_assert_eq(cached_messages(&t, &pre[0], m, 8), 0, "pre-allocated cache starts empty");
        bson_t *s0 = coll_stats(&t, PT_SLICE_POSTS);
        for (int k = 0; k < PT_SLICE_LATEST + 5; k++)
            for (int i = 0; i < 20; i++)
                cr_assert_eq(pt_slice_add_comment(t.db, &pre[i], msg, k, NULL, &err), 0);
        bson_t *s1 = coll_stats(&t, PT_SLICE_POSTS);
        if (in_place(&t))
            cr_assert_eq(engine_stat(&t, s1, "moves"), engine_stat(&t, s0, "moves"),
                         "[%s] a pre-allocated post moved", t.engine);
        if (!in_place(&t)) {
            /* btree: every push writes the whole post again */
            bson_t doc;
            cr_assert_eq(pt_slice_find_post(t.db, &pre[0], &doc, &err), 0);
            int64_t full = doc.len;
            bson_destroy(&doc);
            int64_t upd = engine_stat(&t, s1, "updates") - engine_stat(&t, s0, "updates");
            int64_t bytes =
                engine_stat(&t, s1, "bytesWritten") - engine_stat(&t, s0, "bytesWritten");
            cr_assert_eq(upd, 20 * (PT_SLICE_LATEST + 5));
            cr_assert_geq(bytes, 20 * 5 * full, "[%s] %lld bytes", t.engine, (long long)bytes);
        }
        bson_destroy(s0);
        bson_destroy(s1);
        for (int i = 0; i < 20; i++)
            cr_assert_eq(pt_slice_create_post(t.db, &plain[i], &blog, "t", "c", NULL, &err), 0);
        s0 = coll_stats(&t, PT_SLICE_POSTS);
        for (int k = 0; k < PT_SLICE_LATEST + 5; k++)
            for (int i = 0; i < 20; i++)
                cr_assert_eq(pt_slice_add_comment(t.db, &plain[i], msg, k, NULL, &err), 0);
        s1 = coll_stats(&t, PT_SLICE_POSTS);
        if (strcmp(t.engine, "mmapv1") == 0)
            cr_assert_geq(engine_stat(&t, s1, "moves") - engine_stat(&t, s0, "moves"), 20,
                          "[%s] posts without pre-allocation should move", t.engine);
        bson_destroy(s0);
        bson_destroy(s1);
        bson_destroy(&tmpl);
    }
}

static void scenario_round(ptt_db *t, const pt_scenario *s, int64_t users, bool prealloc)
{
    md_error err;
    void *state = NULL;
    char first[256];
    pt_setup_args a = {.users = users, .quick = true};
    cr_assert_eq(s->setup(t->db, &a, &state, &err), 0, "[%s] %s", t->engine, err.message);
    int64_t posts = ptt_count(t, PT_SLICE_POSTS, "{}");
    cr_assert_geq(posts, 50);
    cr_assert_eq(ptt_count(t, PT_SLICE_POSTS, "{\"latestComments\": {\"$size\": 0}}"), posts,
                 "every cache starts empty");
    bson_t *s0 = coll_stats(t, PT_SLICE_POSTS);
    cr_assert_eq(ptt_run_op(t->db, state, &s->ops[0], 8, users, first), 0, "[%s] %s",
                 t->engine, first);
    bson_t *s1 = coll_stats(t, PT_SLICE_POSTS);
    cr_assert_eq(s->check(t->db, state, &err), 0, "[%s] %s: %s", t->engine, s->name,
                 err.message);
    cr_assert_eq(ptt_count(t, PT_SLICE_POSTS, "{}"), posts);
    int64_t used = ptt_count(t, PT_SLICE_POSTS, "{\"latestComments.0\": {\"$exists\": true}}");
    cr_assert_gt(used, posts / 2, "[%s] %lld of %lld caches used", t->engine, (long long)used,
                 (long long)posts);
    cr_assert_eq(engine_stat(t, s1, "updates") - engine_stat(t, s0, "updates"), users);
    if (strcmp(t->engine, "mmapv1") == 0) {
        int64_t moves = engine_stat(t, s1, "moves") - engine_stat(t, s0, "moves");
        if (prealloc)
            cr_assert_eq(moves, 0, "[%s] pre-allocated caches moved %lld times", t->engine,
                         (long long)moves);
        else /* an empty cache's post outgrows its slot with its first comment */
            cr_assert_geq(moves, used, "[%s] %lld moves for %lld used caches", t->engine,
                          (long long)moves, (long long)used);
    }
    bson_destroy(s0);
    bson_destroy(s1);
    /* the check notices a cache that lost a comment */
    bson_destroy(PTT_OK(t, "{\"update\": \"posts\", \"updates\": [{\"q\": {\"latestComments.0\": "
                           "{\"$exists\": true}}, \"u\": {\"$pop\": {\"latestComments\": -1}}}]}"));
    cr_assert_neq(s->check(t->db, state, &err), 0, "[%s] check missed a lost comment",
                  t->engine);
    s->destroy(state);
}

Test(slice_cache, scenarios_from_many_threads)
{
    cr_assert_eq(pt_pattern_slice_cache.nscenarios, 2);
    const pt_scenario *pre = pt_pattern_slice_cache.scenarios[0];
    const pt_scenario *none = pt_pattern_slice_cache.scenarios[1];
    cr_assert_str_eq(pre->name, "slice_cache_preallocated");
    cr_assert_str_eq(none->name, "slice_cache_no_preallocation");
    cr_assert_float_eq(pre->ops[0].book_mmap.mean, 0.668, 1e-9);
    cr_assert_float_eq(none->ops[0].book_wt.mean, 1.012, 1e-9);
    cr_assert_eq(pre->ops[0].users, 1000);
    cr_assert_str_eq(pt_pattern_slice_cache.book_winner, "mmapv1");
    bool listed = false;
    for (const pt_pattern *const *p = pt_patterns; *p; p++)
        listed |= *p == &pt_pattern_slice_cache;
    cr_assert(listed, "slice_cache is in pt_patterns[]");
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        scenario_round(&t, pre, 3000, true);
        scenario_round(&t, none, 3000, false);
    }
}

/* Once a cache is full, each push of a same-sized comment leaves the post's
 * size unchanged: mmapv1 writes only the bytes that differ (the shifted
 * comments' ids, dates and numbers), btree the whole post. */
Test(slice_cache, full_cache_push_bytes_written)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        bson_oid_t post, blog;
        bson_oid_init(&post, NULL);
        bson_oid_init(&blog, NULL);
        cr_assert_eq(pt_slice_create_post(t.db, &post, &blog, "t", "c", NULL, &err), 0);
        char m[64];
        for (int i = 0; i < PT_SLICE_LATEST; i++) {
            snprintf(m, sizeof m, "comment number %04d of this post, all the same size", i);
            cr_assert_eq(pt_slice_add_comment(t.db, &post, m, 1000 + i, NULL, &err), 0);
        }
        bson_t doc;
        cr_assert_eq(pt_slice_find_post(t.db, &post, &doc, &err), 0);
        int64_t full = doc.len;
        bson_destroy(&doc);
        bson_t *s0 = coll_stats(&t, PT_SLICE_POSTS);
        for (int i = PT_SLICE_LATEST; i < PT_SLICE_LATEST + 20; i++) {
            snprintf(m, sizeof m, "comment number %04d of this post, all the same size", i);
            cr_assert_eq(pt_slice_add_comment(t.db, &post, m, 1000 + i, NULL, &err), 0);
        }
        bson_t *s1 = coll_stats(&t, PT_SLICE_POSTS);
        cr_assert_eq(pt_slice_find_post(t.db, &post, &doc, &err), 0);
        cr_assert_eq(doc.len, full, "a full cache keeps its size");
        bson_destroy(&doc);
        int64_t bytes = engine_stat(&t, s1, "bytesWritten") - engine_stat(&t, s0, "bytesWritten");
        cr_assert_eq(engine_stat(&t, s1, "updates") - engine_stat(&t, s0, "updates"), 20);
        if (strcmp(t.engine, "mmapv1") == 0) {
            cr_assert_eq(engine_stat(&t, s1, "moves"), engine_stat(&t, s0, "moves"));
            cr_assert_lt(bytes, 20 * full / 2, "[%s] %lld bytes for 20 pushes of a %lld-byte post",
                         t.engine, (long long)bytes, (long long)full);
        } else if (!in_place(&t)) {
            cr_assert_geq(bytes, 20 * full, "[%s] %lld bytes for 20 pushes of a %lld-byte post",
                          t.engine, (long long)bytes, (long long)full);
        }
        bson_destroy(s0);
        bson_destroy(s1);
    }
}
