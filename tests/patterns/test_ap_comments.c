/*
 * test_ap_comments.c -- "Storing Comments" (patterns/ap_comments.c) on
 * every engine: the three approaches' post, paginate and direct-link
 * operations return the book's comments in the book's order, through the
 * book's indexes; the hybrid pages fill to 100 and the book's worked
 * example of find_comments (pages of 100, 102, 101 and 22 comments, skip
 * 300, limit 50) returns its 25; and posting from several threads at once
 * loses and duplicates no comment.
 */
#include "ap.h"
#include "pt_test_util.h"

static bson_oid_t new_node(ptt_db *t)
{
    md_error err;
    bson_oid_t node;
    bson_oid_init(&node, NULL);
    cr_assert_eq(ap_comments_create_indexes(t->db, &err), 0, "%s", err.message);
    cr_assert_eq(ap_comments_create_node(t->db, &node, &err), 0, "%s", err.message);
    return node;
}

static const char *text_of(const bson_t *c)
{
    return ptt_str(c, "text");
}

Test(ap_comments, one_document_per_comment)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        bson_oid_t node = new_node(&t);
        char s1[AP_COMMENT_SLUG_MAX], s2[AP_COMMENT_SLUG_MAX], s3[AP_COMMENT_SLUG_MAX],
            reply[AP_COMMENT_SLUG_MAX], first[64];
        int64_t t0 = 1328703668000LL; /* 2012-02-08 12:21:08 */
        cr_assert_eq(ap_comments_post_doc(t.db, &node, NULL, "Rick", "first", t0, s1, &err), 0,
                     "%s", err.message);
        cr_assert_eq(ap_comments_post_doc(t.db, &node, NULL, "Max", "second", t0 + 1000, s2,
                                          &err), 0);
        cr_assert_eq(ap_comments_post_doc(t.db, &node, NULL, "Jared", "third", t0 + 2000, s3,
                                          &err), 0);
        cr_assert_eq(ap_comments_post_doc(t.db, &node, s1, "Bernie", "reply to first",
                                          t0 + 3000, reply, &err), 0, "%s", err.message);
        /* slug = parent slug + '/' + own; full_slug sorts threaded order */
        cr_assert_eq(strncmp(reply, s1, strlen(s1)), 0);
        cr_assert_eq(reply[strlen(s1)], '/');
        bson_t c;
        cr_assert_eq(ap_comments_link_doc(t.db, &node, reply, &c, &err), 0);
        cr_assert_str_eq(text_of(&c), "reply to first");
        cr_assert(strstr(ptt_str(&c, "full_slug"), "2012.02.08.12.21.08:") == ptt_str(&c, "full_slug"),
                  "full_slug %s", ptt_str(&c, "full_slug"));
        bson_destroy(&c);
        cr_assert_eq(ap_comments_link_doc(t.db, &node, "nope", &c, &err), MD_NOTFOUND);
        bson_destroy(&c);
        int64_t n;
        /* chronological: first, second, third, reply */
        cr_assert_eq(ap_comments_page_doc(t.db, &node, false, 0, 10, &n, first, &err), 0);
        cr_assert_eq(n, 4);
        cr_assert_str_eq(first, s1);
        cr_assert_eq(ap_comments_page_doc(t.db, &node, false, 3, 10, &n, first, &err), 0);
        cr_assert_eq(n, 1);
        cr_assert_str_eq(first, reply);
        /* threaded: first, its reply, second, third */
        cr_assert_eq(ap_comments_page_doc(t.db, &node, true, 1, 1, &n, first, &err), 0);
        cr_assert_eq(n, 1);
        cr_assert_str_eq(first, reply);
        cr_assert_eq(ap_comments_page_doc(t.db, &node, true, 2, 1, &n, first, &err), 0);
        cr_assert_str_eq(first, s2);
        /* the book's indexes serve both orders without a sort in memory */
        ap_plan p;
        bson_t *f = BCON_NEW("node_id", BCON_OID(&node));
        bson_t *s = BCON_NEW("posted", BCON_INT32(1));
        cr_assert_eq(ap_explain_find(t.db, AP_COMMENTS, f, s, NULL, &p, &err), 0, "%s",
                     err.message);
        cr_assert_str_eq(p.index, "node_id_1_posted_1");
        cr_assert(!p.sort_in_memory);
        bson_destroy(s);
        s = BCON_NEW("full_slug", BCON_INT32(1));
        cr_assert_eq(ap_explain_find(t.db, AP_COMMENTS, f, s, NULL, &p, &err), 0);
        cr_assert_str_eq(p.index, "node_id_1_full_slug_1");
        cr_assert(!p.sort_in_memory);
        bson_destroy(s);
        bson_destroy(f);
        /* a reply to a comment that does not exist */
        cr_assert_eq(ap_comments_post_doc(t.db, &node, "missing", "x", "y", t0, NULL, &err),
                     MD_NOTFOUND);
    }
}

Test(ap_comments, embedded)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        bson_oid_t node = new_node(&t);
        for (int i = 0; i < 25; i++) {
            char slug[16];
            snprintf(slug, sizeof slug, "s%02d", i);
            cr_assert_eq(ap_comments_post_embedded(t.db, &node, slug, "Rick", "bogus",
                                                   1000 + i, &err), 0, "%s", err.message);
        }
        int64_t n;
        char first[64];
        cr_assert_eq(ap_comments_page_embedded(t.db, &node, 10, 10, &n, first, &err), 0);
        cr_assert_eq(n, 10);
        cr_assert_str_eq(first, "s10");
        cr_assert_eq(ap_comments_page_embedded(t.db, &node, 20, 10, &n, first, &err), 0);
        cr_assert_eq(n, 5);
        cr_assert_str_eq(first, "s20");
        bson_t c;
        cr_assert_eq(ap_comments_link_embedded(t.db, &node, 7, &c, &err), 0);
        cr_assert_str_eq(ptt_str(&c, "slug"), "s07");
        bson_destroy(&c);
        cr_assert_eq(ap_comments_link_embedded(t.db, &node, 25, &c, &err), MD_NOTFOUND);
        bson_destroy(&c);
        bson_oid_t other;
        bson_oid_init(&other, NULL);
        cr_assert_eq(ap_comments_post_embedded(t.db, &other, "x", "R", "t", 1, &err),
                     MD_NOTFOUND);
    }
}

/* Threaded embedding: replies pushed by their path of positions, read
 * back by walking the same path. */
Test(ap_comments, embedded_threaded)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        bson_oid_t node = new_node(&t);
        int p0[] = {0}, p01[] = {0, 1}, p2[] = {2};
        cr_assert_eq(ap_comments_post_embedded_threaded(t.db, &node, NULL, 0, "a", "Rick", "a",
                                                        1, &err), 0, "%s", err.message);
        cr_assert_eq(ap_comments_post_embedded_threaded(t.db, &node, NULL, 0, "b", "Max", "b",
                                                        2, &err), 0);
        cr_assert_eq(ap_comments_post_embedded_threaded(t.db, &node, p0, 1, "a0", "Max", "a0",
                                                        3, &err), 0, "%s", err.message);
        cr_assert_eq(ap_comments_post_embedded_threaded(t.db, &node, p0, 1, "a1", "Jared",
                                                        "a1", 4, &err), 0);
        cr_assert_eq(ap_comments_post_embedded_threaded(t.db, &node, p01, 2, "a10", "Rick",
                                                        "a10", 5, &err), 0);
        bson_t c;
        cr_assert_eq(ap_comments_link_embedded_threaded(t.db, &node, p01, 2, &c, &err), 0);
        cr_assert_str_eq(ptt_str(&c, "slug"), "a1");
        cr_assert_str_eq(ptt_str(&c, "replies.0.slug"), "a10");
        bson_destroy(&c);
        int p010[] = {0, 1, 0};
        cr_assert_eq(ap_comments_link_embedded_threaded(t.db, &node, p010, 3, &c, &err), 0);
        cr_assert_str_eq(ptt_str(&c, "text"), "a10");
        bson_destroy(&c);
        cr_assert_eq(ap_comments_link_embedded_threaded(t.db, &node, p2, 1, &c, &err),
                     MD_NOTFOUND);
        bson_destroy(&c);
        cr_assert_eq(ap_comments_link_embedded_threaded(t.db, &node, NULL, 0, &c, &err),
                     MD_NOTFOUND);
        bson_destroy(&c);
        /* a reply below position 2 of 2 replies: as in MongoDB, the update
         * creates the path (the element {replies: [x]} at 2) */
        cr_assert_eq(ap_comments_post_embedded_threaded(t.db, &node, p2, 1, "x", "R", "x", 6,
                                                        &err), 0, "%s", err.message);
        cr_assert_eq(ptt_count(&t, AP_COMMENT_NODES, "{\"metadata.replies.2.replies.0.slug\": "
                                                     "\"x\"}"), 1);
    }
}

Test(ap_comments, hybrid_pages)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        bson_oid_t node = new_node(&t);
        int64_t pages = 0;
        for (int i = 0; i < 250; i++) {
            char slug[16];
            snprintf(slug, sizeof slug, "c%03d", i);
            cr_assert_eq(ap_comments_post_bucket(t.db, &node, &pages, slug, "Rick", "bogus",
                                                 1000 + i, &err), 0, "%s", err.message);
        }
        cr_assert_eq(pages, 3);
        char oid[25], q[256];
        bson_oid_to_string(&node, oid);
        snprintf(q, sizeof q, "{\"node_id\": {\"$oid\": \"%s\"}}", oid);
        cr_assert_eq(ptt_count(&t, AP_COMMENT_PAGES, q), 3, "pages, no duplicate page");
        snprintf(q, sizeof q, "{\"node_id\": {\"$oid\": \"%s\"}, \"page\": 3, \"count\": 50}", oid);
        cr_assert_eq(ptt_count(&t, AP_COMMENT_PAGES, q), 1);
        snprintf(q, sizeof q, "{\"_id\": {\"$oid\": \"%s\"}, \"num_comment_pages\": 3}", oid);
        cr_assert_eq(ptt_count(&t, AP_COMMENT_NODES, q), 1);
        int64_t n;
        char first[64];
        cr_assert_eq(ap_comments_page_bucket(t.db, &node, 195, 10, &n, first, &err), 0);
        cr_assert_eq(n, 10);
        cr_assert_str_eq(first, "c195");
        cr_assert_eq(ap_comments_page_bucket(t.db, &node, 245, 10, &n, first, &err), 0);
        cr_assert_eq(n, 5);
        cr_assert_str_eq(first, "c245");
        bson_t c;
        cr_assert_eq(ap_comments_link_bucket(t.db, &node, "c150", &c, &err), 0, "%s",
                     err.message);
        cr_assert_str_eq(ptt_str(&c, "slug"), "c150");
        bson_destroy(&c);
        cr_assert_eq(ap_comments_link_bucket(t.db, &node, "c999", &c, &err), MD_NOTFOUND);
        bson_destroy(&c);
        ap_plan p;
        bson_t *f = BCON_NEW("node_id", BCON_OID(&node), "comments.slug", "c150");
        cr_assert_eq(ap_explain_find(t.db, AP_COMMENT_PAGES, f, NULL, NULL, &p, &err), 0);
        cr_assert_str_eq(p.index, "node_id_1_comments.slug_1");
        cr_assert_eq(p.docs_examined, 1);
        bson_destroy(f);
    }
}

/* The book's worked example: pages of 100, 102, 101 and 22 comments;
 * find_comments(skip=300, limit=50) returns the last 3 of page 3 and all
 * 22 of page 4. */
Test(ap_comments, find_comments_worked_example)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        bson_oid_t node = new_node(&t);
        static const int counts[] = {100, 102, 101, 22};
        md_error err;
        for (int p = 0; p < 4; p++) {
            bson_t doc = BSON_INITIALIZER, arr;
            BSON_APPEND_OID(&doc, "node_id", &node);
            BSON_APPEND_INT32(&doc, "page", p + 1);
            BSON_APPEND_INT32(&doc, "count", counts[p]);
            BSON_APPEND_ARRAY_BEGIN(&doc, "comments", &arr);
            for (int i = 0; i < counts[p]; i++) {
                char k[16], slug[16];
                snprintf(k, sizeof k, "%d", i);
                snprintf(slug, sizeof slug, "p%d-%d", p + 1, i);
                bson_t *c = BCON_NEW("slug", BCON_UTF8(slug));
                BSON_APPEND_DOCUMENT(&arr, k, c);
                bson_destroy(c);
            }
            bson_append_array_end(&doc, &arr);
            cr_assert_eq(ap_insert(t.db, AP_COMMENT_PAGES, &doc, NULL, &err), 0);
            bson_destroy(&doc);
        }
        int64_t n;
        char first[64];
        cr_assert_eq(ap_comments_page_bucket(t.db, &node, 300, 50, &n, first, &err), 0);
        cr_assert_eq(n, 25);
        cr_assert_str_eq(first, "p3-98");
    }
}

typedef struct poster {
    md_db *db;
    bson_oid_t node;
    int id, n, failed;
} poster;

static void *post_many(void *arg)
{
    poster *p = arg;
    int64_t pages = 0;
    for (int i = 0; i < p->n; i++) {
        char slug[32];
        md_error err;
        snprintf(slug, sizeof slug, "t%d-%d", p->id, i);
        if (ap_comments_post_bucket(p->db, &p->node, &pages, slug, "Rick", "x", i, &err))
            p->failed++;
    }
    return NULL;
}

/* Concurrent posters: every comment lands exactly once; pages hold 100
 * give or take the racers that passed the guard together. */
Test(ap_comments, hybrid_concurrent_posts)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        bson_oid_t node = new_node(&t);
        enum { THREADS = 4, EACH = 150 };
        pthread_t th[THREADS];
        poster ps[THREADS];
        for (int i = 0; i < THREADS; i++) {
            ps[i] = (poster){.db = t.db, .node = node, .id = i, .n = EACH};
            cr_assert_eq(pthread_create(&th[i], NULL, post_many, &ps[i]), 0);
        }
        for (int i = 0; i < THREADS; i++) {
            pthread_join(th[i], NULL);
            cr_assert_eq(ps[i].failed, 0);
        }
        bson_t *pipe = BCON_NEW("pipeline", "[", "{", "$unwind", "$comments", "}", "{",
                                "$group", "{", "_id", "$comments.slug", "n", "{", "$sum",
                                BCON_INT32(1), "}", "}", "}", "{", "$group", "{", "_id",
                                "$n", "slugs", "{", "$sum", BCON_INT32(1), "}", "}", "}", "]");
        md_collection *c = md_db_get_collection(t.db, AP_COMMENT_PAGES);
        md_cursor *cur = md_collection_aggregate(c, pipe, NULL);
        const bson_t *doc;
        int rows = 0;
        while (md_cursor_next(cur, &doc)) {
            rows++;
            cr_assert_eq(ptt_i64(doc, "_id"), 1, "[%s] a comment stored more than once",
                         t.engine);
            cr_assert_eq(ptt_i64(doc, "slugs"), THREADS * EACH);
        }
        md_error err;
        cr_assert(!md_cursor_error(cur, &err), "%s", err.message);
        cr_assert_eq(rows, 1);
        md_cursor_destroy(cur);
        md_collection_destroy(c);
        bson_destroy(pipe);
        char oid[25], q[256];
        bson_oid_to_string(&node, oid);
        snprintf(q, sizeof q,
                 "{\"node_id\": {\"$oid\": \"%s\"}, \"count\": {\"$gt\": %d}}", oid,
                 AP_COMMENTS_PER_PAGE + THREADS);
        cr_assert_eq(ptt_count(&t, AP_COMMENT_PAGES, q), 0, "an overfull page");
    }
}
