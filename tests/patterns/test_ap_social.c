/*
 * test_ap_social.c -- "Social Networking" (patterns/ap_social.c) on every
 * engine: circling and uncircling keep both sides of the graph, a post
 * fans out to the right news feeds (public, *circles*, one circle, a
 * blocked author kept off the wall), comments reach the cached copies and
 * truncate_extra_comments keeps the last three, and get_posts pages
 * newest month first.
 */
#include "ap.h"
#include "pt_test_util.h"

static void users(ptt_db *t)
{
    md_error err;
    const char *ids[] = {"rick", "max", "jared", "bernie", "meghan"};
    cr_assert_eq(ap_social_create_indexes(t->db, &err), 0, "%s", err.message);
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(ap_social_create_user(t->db, ids[i], ids[i], &err), 0);
        cr_assert_eq(ap_social_ensure_month(t->db, ids[i], "201204", &err), 0, "%s",
                     err.message);
    }
    /* max, jared and bernie follow rick; rick circles jared as "python" */
    cr_assert_eq(ap_social_circle(t->db, "max", "max", "rick", "rick", "10gen", &err), 0);
    cr_assert_eq(ap_social_circle(t->db, "jared", "jared", "rick", "rick", "python", &err), 0);
    cr_assert_eq(ap_social_circle(t->db, "bernie", "bernie", "rick", "rick", "python", &err), 0);
    cr_assert_eq(ap_social_circle(t->db, "rick", "rick", "jared", "jared", "authors", &err), 0);
}

static int64_t news_posts(ptt_db *t, const char *user)
{
    int64_t n;
    md_error err;
    cr_assert_eq(ap_social_get_posts(t->db, AP_SOCIAL_NEWS, user, NULL, &n, NULL, &err), 0);
    return n;
}

Test(ap_social, graph)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        users(&t);
        cr_assert_eq(ptt_count(&t, AP_SOCIAL_USER, "{\"_id\": \"rick\", "
                                                   "\"followers.jared.circles\": \"python\", "
                                                   "\"followers.jared.name\": \"jared\"}"), 1);
        cr_assert_eq(ptt_count(&t, AP_SOCIAL_USER, "{\"_id\": \"jared\", "
                                                   "\"circles.python.rick.name\": \"rick\"}"), 1);
        cr_assert_eq(ap_social_circle(t.db, "jared", "jared", "rick", "rick", "friends", &err), 0);
        cr_assert_eq(ap_social_uncircle(t.db, "jared", "rick", "python", &err), 0);
        cr_assert_eq(ptt_count(&t, AP_SOCIAL_USER, "{\"_id\": \"rick\", "
                                                   "\"followers.jared\": {\"$exists\": true}}"), 1,
                     "still followed in another circle");
        cr_assert_eq(ap_social_uncircle(t.db, "jared", "rick", "friends", &err), 0);
        cr_assert_eq(ptt_count(&t, AP_SOCIAL_USER, "{\"_id\": \"rick\", "
                                                   "\"followers.jared\": {\"$exists\": true}}"), 0,
                     "uncircled completely: no longer a follower");
        cr_assert_eq(ptt_count(&t, AP_SOCIAL_USER, "{\"_id\": \"jared\", "
                                                   "\"circles.python.rick\": {\"$exists\": true}}"),
                     0);
        cr_assert_eq(ap_social_circle(t.db, "a.b", "x", "rick", "rick", "c", &err), MD_EINVAL);
    }
}

Test(ap_social, fan_out_comments_truncate)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        users(&t);
        const char *pub[] = {"*public*"}, *py[] = {"python"}, *all[] = {"*circles*"};
        int64_t fan = -1;
        bson_oid_t p1;
        cr_assert_eq(ap_social_post(t.db, "rick", "rick", "201204", "Loving MongoDB", pub, 1,
                                    &fan, &p1, &err), 0, "%s", err.message);
        cr_assert_eq(fan, 3, "rick's three followers");
        cr_assert_eq(news_posts(&t, "max"), 1);
        cr_assert_eq(news_posts(&t, "meghan"), 0);
        cr_assert_eq(ptt_count(&t, AP_SOCIAL_WALL, "{\"user_id\": \"rick\", "
                                                   "\"posts.detail.text\": \"Loving MongoDB\"}"), 1);
        /* jared circled rick in "python": a post to python reaches rick */
        cr_assert_eq(ap_social_post(t.db, "jared", "jared", "201204", "py", py, 1, &fan, NULL,
                                    &err), 0);
        cr_assert_eq(fan, 1);
        cr_assert_eq(news_posts(&t, "rick"), 1);
        cr_assert_eq(ap_social_post(t.db, "max", "max", "201204", "circles", all, 1, &fan, NULL,
                                    &err), 0);
        cr_assert_eq(fan, 1, "max's circles hold rick only");
        /* a blocked author stays off the wall */
        bson_t *r = PTT_OK(&t, "{\"update\": \"social.user\", \"updates\": [{\"q\": {\"_id\": "
                               "\"meghan\"}, \"u\": {\"$push\": {\"blocked\": \"rick\"}}}]}");
        bson_destroy(r);
        cr_assert_eq(ap_social_post(t.db, "rick", "meghan", "201204", "hi meghan", pub, 1, NULL,
                                    NULL, &err), 0);
        cr_assert_eq(ptt_count(&t, AP_SOCIAL_WALL, "{\"user_id\": \"meghan\", "
                                                   "\"posts.0\": {\"$exists\": true}}"), 0);
        /* comments: into the post and every cached copy, then truncated */
        for (int i = 0; i < 5; i++) {
            char text[16];
            snprintf(text, sizeof text, "c%d", i);
            cr_assert_eq(ap_social_comment(t.db, &p1, "max", "max", text, &err), 0, "%s",
                         err.message);
        }
        cr_assert_eq(ptt_count(&t, AP_SOCIAL_NEWS, "{\"posts.comments_shown\": 5}"), 3);
        cr_assert_eq(ptt_count(&t, AP_SOCIAL_WALL, "{\"posts.comments_shown\": 5}"), 1);
        int64_t mod = 0;
        cr_assert_eq(ap_social_truncate_comments(t.db, &mod, &err), 0, "%s", err.message);
        cr_assert_eq(mod, 8, "two rounds over three feeds and one wall");
        cr_assert_eq(ptt_count(&t, AP_SOCIAL_NEWS, "{\"posts.comments_shown\": 3, "
                                                   "\"posts.comments.0.text\": \"c2\", "
                                                   "\"posts.comments.3\": {\"$exists\": false}}"),
                     3, "the last three kept");
        cr_assert_eq(ptt_count(&t, AP_SOCIAL_POST, "{\"comments.4.text\": \"c4\"}"), 1,
                     "the system of record keeps them all");
        bson_oid_t none;
        bson_oid_init(&none, NULL);
        cr_assert_eq(ap_social_comment(t.db, &none, "max", "max", "x", &err), MD_NOTFOUND);
    }
}

Test(ap_social, get_posts_by_month)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        users(&t);
        const char *pub[] = {"*public*"};
        const char *months[] = {"201202", "201203", "201204"};
        for (int m = 0; m < 3; m++) {
            cr_assert_eq(ap_social_ensure_month(t.db, "max", months[m], &err), 0);
            cr_assert_eq(ap_social_ensure_month(t.db, "rick", months[m], &err), 0);
            for (int i = 0; i < 2; i++) {
                char text[32];
                snprintf(text, sizeof text, "%s-%d", months[m], i);
                cr_assert_eq(ap_social_post(t.db, "rick", "rick", months[m], text, pub, 1, NULL,
                                            NULL, &err), 0);
            }
        }
        int64_t n;
        char first[64];
        cr_assert_eq(ap_social_get_posts(t.db, AP_SOCIAL_NEWS, "max", NULL, &n, first, &err), 0);
        cr_assert_eq(n, 6);
        cr_assert_str_eq(first, "201204-1", "the newest month, its newest post");
        cr_assert_eq(ap_social_get_posts(t.db, AP_SOCIAL_NEWS, "max", "201203", &n, first, &err),
                     0);
        cr_assert_eq(n, 4);
        cr_assert_str_eq(first, "201203-1");
        ap_plan p;
        bson_t *f = BCON_NEW("user_id", "max", "month", "{", "$lte", "201203", "}");
        bson_t *s = BCON_NEW("month", BCON_INT32(-1));
        cr_assert_eq(ap_explain_find(t.db, AP_SOCIAL_NEWS, f, s, NULL, &p, &err), 0);
        cr_assert_str_eq(p.index, "user_id_1_month_-1");
        cr_assert(!p.sort_in_memory);
        cr_assert_eq(p.docs_examined, 2);
        bson_destroy(s);
        bson_destroy(f);
    }
}
