/*
 * ap_social.c -- "Social Networking" (Applied Design Patterns, ch.8
 * pp.129-139): a Google+-like graph with circles and fan-out on write.
 * A post is written once to social.post (the system of record), to the
 * recipient's wall and, with one multi update, to the news feed of every
 * follower who may see it; a page of the feed is then one document per
 * user per month.
 *
 *   social.user {_id: "u0001", name, profile, blocked: [],
 *                followers: {<id>: {name, circles: [...]}},
 *                circles: {<circle>: {<id>: {name}}}}
 *   social.post {_id, by: {id, name}, circles, type, ts, detail, comments}
 *   social.wall / social.news {user_id, month: "201204",
 *                posts: [{id, ts, by, circles, type, detail,
 *                         comments_shown, comments: [the last few]}]}
 *
 * Errata followed in their corrected form: a cached post carries `id`
 * (what comment() and the indexes look up; the book pushes the inserted
 * dict, whose key is `_id`) and starts with comments_shown: 0;
 * comment() pushes to posts.$.comments and increments
 * posts.$.comments_shown (the book's top-level fields, and its upsert,
 * which cannot apply a positional update); the month documents are
 * created by ap_social_ensure_month (the book's $push without upsert
 * needs them and never shows them made).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ap.h"

int ap_social_create_indexes(md_db *db, md_error *err)
{
    const char *colls[] = {AP_SOCIAL_NEWS, AP_SOCIAL_WALL};
    for (int i = 0; i < 2; i++) {
        bson_t *k = BCON_NEW("user_id", BCON_INT32(1), "month", BCON_INT32(-1));
        int rc = pt_ensure_index(db, colls[i], k, NULL, err);
        bson_destroy(k);
        if (rc)
            return rc;
        k = BCON_NEW("posts.id", BCON_INT32(1));
        rc = pt_ensure_index(db, colls[i], k, NULL, err);
        bson_destroy(k);
        if (rc)
            return rc;
        k = BCON_NEW("posts.comments_shown", BCON_INT32(1));
        rc = pt_ensure_index(db, colls[i], k, NULL, err);
        bson_destroy(k);
        if (rc)
            return rc;
    }
    return 0;
}

int ap_social_create_user(md_db *db, const char *id, const char *name, md_error *err)
{
    bson_t *doc = BCON_NEW("_id", BCON_UTF8(id), "name", BCON_UTF8(name), "profile", "{", "}",
                           "followers", "{", "}", "circles", "{", "}", "blocked", "[", "]");
    int rc = ap_insert(db, AP_SOCIAL_USER, doc, NULL, err);
    bson_destroy(doc);
    return rc;
}

/* A user id or circle name used as a field name must be one. */
static int check_key(const char *k, md_error *err)
{
    if (!k[0] || strchr(k, '.') || k[0] == '$')
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                            "'%s' cannot be a field name (empty, '.' or a leading '$')", k);
    return 0;
}

static int update_user(md_db *db, const char *id, bson_t *extra_filter, bson_t *update,
                       md_error *err)
{
    bson_t filter = BSON_INITIALIZER;
    BSON_APPEND_UTF8(&filter, "_id", id);
    if (extra_filter)
        bson_concat(&filter, extra_filter);
    int rc = ap_update(db, AP_SOCIAL_USER, &filter, update, false, false, NULL, NULL, NULL, NULL,
                       err);
    bson_destroy(&filter);
    bson_destroy(update);
    if (extra_filter)
        bson_destroy(extra_filter);
    return rc;
}

int ap_social_circle(md_db *db, const char *self, const char *self_name, const char *other,
                     const char *other_name, const char *circle, md_error *err)
{
    char circles_path[256], follower_circles[256], follower_name[256];
    int rc;
    if ((rc = check_key(self, err)) || (rc = check_key(other, err)) ||
        (rc = check_key(circle, err)))
        return rc;
    snprintf(circles_path, sizeof circles_path, "circles.%s.%s", circle, other);
    rc = update_user(db, self, NULL,
                     BCON_NEW("$set", "{", circles_path, "{", "name", BCON_UTF8(other_name), "}",
                              "}"),
                     err);
    if (rc)
        return rc;
    snprintf(follower_circles, sizeof follower_circles, "followers.%s.circles", self);
    snprintf(follower_name, sizeof follower_name, "followers.%s.name", self);
    return update_user(db, other, NULL,
                       BCON_NEW("$push", "{", follower_circles, BCON_UTF8(circle), "}", "$set",
                                "{", follower_name, BCON_UTF8(self_name), "}"),
                       err);
}

int ap_social_uncircle(md_db *db, const char *self, const char *other, const char *circle,
                       md_error *err)
{
    char circles_path[256], follower_circles[256], follower[256];
    int rc;
    if ((rc = check_key(self, err)) || (rc = check_key(other, err)) ||
        (rc = check_key(circle, err)))
        return rc;
    snprintf(circles_path, sizeof circles_path, "circles.%s.%s", circle, other);
    rc = update_user(db, self, NULL, BCON_NEW("$unset", "{", circles_path, BCON_INT32(1), "}"),
                     err);
    if (rc)
        return rc;
    snprintf(follower_circles, sizeof follower_circles, "followers.%s.circles", self);
    rc = update_user(db, other, NULL,
                     BCON_NEW("$pull", "{", follower_circles, BCON_UTF8(circle), "}"), err);
    if (rc)
        return rc;
    snprintf(follower, sizeof follower, "followers.%s", self);
    return update_user(db, other,
                       BCON_NEW(follower_circles, "{", "$size", BCON_INT32(0), "}"),
                       BCON_NEW("$unset", "{", follower, BCON_INT32(1), "}"), err);
}

int ap_social_ensure_month(md_db *db, const char *user_id, const char *month, md_error *err)
{
    const char *colls[] = {AP_SOCIAL_WALL, AP_SOCIAL_NEWS};
    for (int i = 0; i < 2; i++) {
        bson_t *filter = BCON_NEW("user_id", BCON_UTF8(user_id), "month", BCON_UTF8(month));
        bson_t *update = BCON_NEW("$setOnInsert", "{", "posts", "[", "]", "}");
        int rc = ap_update(db, colls[i], filter, update, true, false, NULL, NULL, NULL, NULL, err);
        bson_destroy(update);
        bson_destroy(filter);
        if (rc)
            return rc;
    }
    return 0;
}

/* A set of user ids (a sorted, deduplicated list). */
typedef struct idset {
    char **v;
    int n, cap;
} idset;

static int idset_add(idset *s, const char *id)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->v[i], id) == 0)
            return 0;
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 64;
        char **v = realloc(s->v, (size_t)cap * sizeof *v);
        if (!v)
            return -1;
        s->v = v;
        s->cap = cap;
    }
    return (s->v[s->n] = strdup(id)) ? (s->n++, 0) : -1;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void idset_free(idset *s)
{
    for (int i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
}

/* The keys of the subdocument at `path` of doc into s. */
static int add_keys(idset *s, const bson_t *doc, const char *path)
{
    bson_iter_t it, sub;
    if (!bson_iter_init(&it, doc) || !bson_iter_find_descendant(&it, path, &sub) ||
        !BSON_ITER_HOLDS_DOCUMENT(&sub) || !bson_iter_recurse(&sub, &it))
        return 0;
    while (bson_iter_next(&it))
        if (idset_add(s, bson_iter_key(&it)))
            return -1;
    return 0;
}

/* append_post(collection, dest_userids, month, post). */
static int append_post(md_db *db, const char *coll, idset *dest, const char *month,
                       const bson_t *post, int64_t *modified, md_error *err)
{
    if (dest->n == 0) {
        if (modified)
            *modified = 0;
        return 0;
    }
    qsort(dest->v, (size_t)dest->n, sizeof *dest->v, cmp_str);
    bson_t filter = BSON_INITIALIZER, in, arr;
    BSON_APPEND_DOCUMENT_BEGIN(&filter, "user_id", &in);
    BSON_APPEND_ARRAY_BEGIN(&in, "$in", &arr);
    for (int i = 0; i < dest->n; i++) {
        char key[16];
        snprintf(key, sizeof key, "%d", i);
        BSON_APPEND_UTF8(&arr, key, dest->v[i]);
    }
    bson_append_array_end(&in, &arr);
    bson_append_document_end(&filter, &in);
    BSON_APPEND_UTF8(&filter, "month", month);
    bson_t *update = BCON_NEW("$push", "{", "posts", BCON_DOCUMENT(post), "}");
    int rc = ap_update(db, coll, &filter, update, false, true, NULL, NULL, modified, NULL, err);
    bson_destroy(update);
    bson_destroy(&filter);
    return rc;
}

static bool in_array(const bson_t *doc, const char *key, const char *value)
{
    bson_iter_t it, a;
    if (!bson_iter_init_find(&it, doc, key) || !bson_iter_recurse(&it, &a))
        return false;
    while (bson_iter_next(&a))
        if (BSON_ITER_HOLDS_UTF8(&a) && strcmp(bson_iter_utf8(&a, NULL), value) == 0)
            return true;
    return false;
}

int ap_social_post(md_db *db, const char *user, const char *dest_user, const char *month,
                   const char *text, const char *const *circles, int ncircles,
                   int64_t *fanout, bson_oid_t *post_id, md_error *err)
{
    bson_t author, dest;
    bson_t *f = BCON_NEW("_id", BCON_UTF8(user));
    int rc = pt_find_one(db, AP_SOCIAL_USER, f, NULL, &author, err);
    bson_destroy(f);
    f = BCON_NEW("_id", BCON_UTF8(dest_user));
    bson_init(&dest);
    if (rc == 0) {
        bson_destroy(&dest);
        rc = pt_find_one(db, AP_SOCIAL_USER, f, NULL, &dest, err);
    }
    bson_destroy(f);
    if (rc) {
        bson_destroy(&author);
        bson_destroy(&dest);
        return rc;
    }
    bson_iter_t it;
    const char *name = bson_iter_init_find(&it, &author, "name") && BSON_ITER_HOLDS_UTF8(&it)
                           ? bson_iter_utf8(&it, NULL)
                           : "";
    bson_oid_t id;
    bson_oid_init(&id, NULL);
    int64_t ts = pt_now_ms();
    bson_t carr = BSON_INITIALIZER;
    for (int i = 0; i < ncircles; i++) {
        char key[16];
        snprintf(key, sizeof key, "%d", i);
        BSON_APPEND_UTF8(&carr, key, circles[i]);
    }
    /* The system of record. */
    bson_t *post = BCON_NEW("_id", BCON_OID(&id), "ts", BCON_DATE_TIME(ts), "by", "{", "id",
                            BCON_UTF8(user), "name", BCON_UTF8(name), "}", "circles",
                            BCON_ARRAY(&carr), "type", "status", "detail", "{", "text",
                            BCON_UTF8(text), "}", "comments", "[", "]");
    rc = ap_insert(db, AP_SOCIAL_POST, post, NULL, err);
    bson_destroy(post);
    /* The cached copy for walls and feeds. */
    post = BCON_NEW("id", BCON_OID(&id), "ts", BCON_DATE_TIME(ts), "by", "{", "id",
                    BCON_UTF8(user), "name", BCON_UTF8(name), "}", "circles", BCON_ARRAY(&carr),
                    "type", "status", "detail", "{", "text", BCON_UTF8(text), "}",
                    "comments_shown", BCON_INT32(0), "comments", "[", "]");
    idset wall = {0}, news = {0};
    if (rc == 0 && !in_array(&dest, "blocked", user)) {
        if (idset_add(&wall, dest_user))
            rc = md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
        if (rc == 0)
            rc = append_post(db, AP_SOCIAL_WALL, &wall, month, post, NULL, err);
    }
    if (rc == 0) {
        int r2 = 0;
        if (ncircles == 1 && strcmp(circles[0], "*public*") == 0) {
            r2 = add_keys(&news, &author, "followers");
        } else if (ncircles == 1 && strcmp(circles[0], "*circles*") == 0) {
            bson_iter_t c, sub;
            if (bson_iter_init_find(&it, &author, "circles") && bson_iter_recurse(&it, &c))
                while (r2 == 0 && bson_iter_next(&c)) {
                    char path[256];
                    snprintf(path, sizeof path, "circles.%s", bson_iter_key(&c));
                    r2 = add_keys(&news, &author, path);
                }
            (void)sub;
        } else {
            for (int i = 0; i < ncircles && r2 == 0; i++) {
                char path[256];
                snprintf(path, sizeof path, "circles.%s", circles[i]);
                r2 = add_keys(&news, &author, path);
            }
        }
        rc = r2 ? md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory")
                : append_post(db, AP_SOCIAL_NEWS, &news, month, post, fanout, err);
    }
    idset_free(&wall);
    idset_free(&news);
    bson_destroy(post);
    bson_destroy(&carr);
    bson_destroy(&author);
    bson_destroy(&dest);
    if (rc == 0 && post_id)
        bson_oid_copy(&id, post_id);
    return rc;
}

int ap_social_comment(md_db *db, const bson_oid_t *post_id, const char *by, const char *name,
                      const char *text, md_error *err)
{
    bson_t *c = BCON_NEW("by", "{", "id", BCON_UTF8(by), "name", BCON_UTF8(name), "}", "ts",
                         BCON_DATE_TIME(pt_now_ms()), "text", BCON_UTF8(text));
    bson_t *filter = BCON_NEW("_id", BCON_OID(post_id));
    bson_t *update = BCON_NEW("$push", "{", "comments", BCON_DOCUMENT(c), "}");
    int64_t matched = 0;
    int rc = ap_update(db, AP_SOCIAL_POST, filter, update, false, false, NULL, &matched, NULL, NULL,
                       err);
    bson_destroy(update);
    bson_destroy(filter);
    if (rc == 0 && matched == 0)
        rc = md_error_set(err, MD_NOTFOUND, MD_CODE_NO_SUCH_KEY, "no such post");
    const char *colls[] = {AP_SOCIAL_WALL, AP_SOCIAL_NEWS};
    for (int i = 0; i < 2 && rc == 0; i++) {
        filter = BCON_NEW("posts.id", BCON_OID(post_id));
        update = BCON_NEW("$push", "{", "posts.$.comments", BCON_DOCUMENT(c), "}", "$inc", "{",
                          "posts.$.comments_shown", BCON_INT32(1), "}");
        rc = ap_update(db, colls[i], filter, update, false, true, NULL, NULL, NULL, NULL, err);
        bson_destroy(update);
        bson_destroy(filter);
    }
    bson_destroy(c);
    return rc;
}

int ap_social_truncate_comments(md_db *db, int64_t *modified, md_error *err)
{
    const char *colls[] = {AP_SOCIAL_NEWS, AP_SOCIAL_WALL};
    int64_t total = 0;
    int rc = 0;
    for (int i = 0; i < 2 && rc == 0; i++)
        for (;;) {
            int64_t n = 0;
            bson_t *filter = BCON_NEW("posts.comments_shown", "{", "$gt",
                                      BCON_INT32(AP_COMMENTS_SHOWN), "}");
            bson_t *update = BCON_NEW("$pop", "{", "posts.$.comments", BCON_INT32(-1), "}",
                                      "$inc", "{", "posts.$.comments_shown", BCON_INT32(-1), "}");
            rc = ap_update(db, colls[i], filter, update, false, true, NULL, NULL, &n, NULL, err);
            bson_destroy(update);
            bson_destroy(filter);
            total += n;
            if (rc || n == 0)
                break;
        }
    if (modified)
        *modified = total;
    return rc;
}

int ap_social_get_posts(md_db *db, const char *coll, const char *user, const char *month,
                        int64_t *n, char *first_text, md_error *err)
{
    bson_t *filter = month ? BCON_NEW("user_id", BCON_UTF8(user), "month", "{", "$lte",
                                      BCON_UTF8(month), "}")
                           : BCON_NEW("user_id", BCON_UTF8(user));
    bson_t *opts = BCON_NEW("sort", "{", "month", BCON_INT32(-1), "}");
    md_collection *c = md_db_get_collection(db, coll);
    md_cursor *cur = md_collection_find_with_opts(c, filter, opts);
    const bson_t *page;
    *n = 0;
    if (first_text)
        first_text[0] = '\0';
    while (md_cursor_next(cur, &page)) {
        bson_iter_t it, posts, p;
        if (!bson_iter_init_find(&it, page, "posts") || !bson_iter_recurse(&it, &posts))
            continue;
        int count = 0;
        bson_iter_t last = posts;
        while (bson_iter_next(&posts)) {
            count++;
            last = posts;
        }
        /* reversed(page['posts']): the newest is the last. */
        if (count && *n == 0 && first_text && BSON_ITER_HOLDS_DOCUMENT(&last) &&
            bson_iter_recurse(&last, &p) && bson_iter_find_descendant(&p, "detail.text", &it))
            snprintf(first_text, 64, "%s", bson_iter_utf8(&it, NULL));
        *n += count;
    }
    int rc = md_cursor_error(cur, err) ? MD_ERROR : 0;
    md_cursor_destroy(cur);
    md_collection_destroy(c);
    bson_destroy(opts);
    bson_destroy(filter);
    return rc;
}

/* ---- the measurement ----------------------------------------------------------- */

static int news_size(md_db *db, const char *user, const char *month, int64_t *size,
                     md_error *err)
{
    bson_t *f = BCON_NEW("user_id", BCON_UTF8(user), "month", BCON_UTF8(month));
    bson_t doc;
    int64_t n = 0;
    int rc = ap_find(db, AP_SOCIAL_NEWS, f, NULL, &n, &doc, err);
    *size = doc.len;
    bson_destroy(&doc);
    bson_destroy(f);
    return rc;
}

static int social_measure(md_db *db, const ap_args *args, ap_result *r, md_error *err)
{
    const char *engine = args->engine;
    bool quick = args->quick;
    static const int fans[] = {10, 100, 1000};
    const char *month = "201204";
    int posts = quick ? 10 : 20;
    const char *pub[] = {"*public*"};
    int rc = ap_social_create_indexes(db, err);
    double per_follower_bytes[3] = {0}, per_follower_us[3] = {0};
    int64_t sizes[3] = {0}, moves_last = 0;
    for (int s = 0; s < 3 && rc == 0; s++) {
        char author[32];
        snprintf(author, sizeof author, "A%d", fans[s]);
        rc = ap_social_create_user(db, author, author, err);
        if (rc == 0)
            rc = ap_social_ensure_month(db, author, month, err);
        for (int i = 0; i < fans[s] && rc == 0; i++) {
            char u[32];
            snprintf(u, sizeof u, "F%d-%04d", fans[s], i);
            if ((rc = ap_social_create_user(db, u, u, err)) ||
                (rc = ap_social_ensure_month(db, u, month, err)))
                break;
            rc = ap_social_circle(db, u, u, author, author, "friends", err);
        }
        ap_counters c0, c1;
        if (rc || (rc = ap_counters_read(db, &c0, err)))
            break;
        double t = ap_now_s();
        int64_t fanout = 0;
        for (int p = 0; p < posts && rc == 0; p++)
            rc = ap_social_post(db, author, author, month, "Loving MongoDB", pub, 1, &fanout,
                                NULL, err);
        double us = (ap_now_s() - t) * 1e6;
        if (rc || (rc = ap_counters_read(db, &c1, err)))
            break;
        ap_counters d = ap_counters_diff(&c0, &c1);
        if (fanout != fans[s])
            rc = md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR,
                              "a post reached %lld of %d followers", (long long)fanout, fans[s]);
        per_follower_bytes[s] = (double)d.bytes_written / posts / fans[s];
        per_follower_us[s] = us / posts / fans[s];
        char u0[32];
        snprintf(u0, sizeof u0, "F%d-0000", fans[s]);
        if (rc == 0)
            rc = news_size(db, u0, month, &sizes[s], err);
        moves_last = d.moves;
        ap_row_add(r, us / posts, "us", "post to %d followers: time per post", fans[s]);
        ap_row_add(r, per_follower_us[s], "us", "post to %d followers: time per follower",
                   fans[s]);
        ap_row_add(r, per_follower_bytes[s], "B",
                   "post to %d followers: bytes written per follower", fans[s]);
        ap_row_add(r, (double)d.moves, "", "post to %d followers: moves (%d posts)", fans[s],
                   posts);
    }
    if (rc)
        return rc;
    /* One follower's month document as it fills. */
    const char *solo = "solo";
    int64_t sz[4] = {0};
    int marks[4] = {0, 10, 50, quick ? 100 : 200}, done = 0;
    if ((rc = ap_social_create_user(db, "B", "B", err)) ||
        (rc = ap_social_ensure_month(db, "B", month, err)) ||
        (rc = ap_social_create_user(db, solo, solo, err)) ||
        (rc = ap_social_ensure_month(db, solo, month, err)) ||
        (rc = ap_social_circle(db, solo, solo, "B", "B", "friends", err)))
        return rc;
    ap_counters g0, g1;
    if ((rc = ap_counters_read(db, &g0, err)))
        return rc;
    for (int m = 0; m < 4 && rc == 0; m++) {
        for (; done < marks[m] && rc == 0; done++)
            rc = ap_social_post(db, "B", "B", month, "Loving MongoDB", pub, 1, NULL, NULL, err);
        if (rc == 0)
            rc = news_size(db, solo, month, &sz[m], err);
        ap_row_add(r, (double)sz[m], "B", "one follower's month document after %d posts",
                   marks[m]);
    }
    if (rc || (rc = ap_counters_read(db, &g1, err)))
        return rc;
    ap_counters g = ap_counters_diff(&g0, &g1);
    ap_row_add(r, (double)g.moves, "", "moves while it grew (wall, news and post of %d posts)",
               marks[3]);

    /* Reading a month of the feed. */
    ap_plan feed;
    bson_t *f = BCON_NEW("user_id", BCON_UTF8(solo), "month", "{", "$lte", BCON_UTF8(month), "}");
    bson_t *so = BCON_NEW("month", BCON_INT32(-1));
    rc = ap_explain_find(db, AP_SOCIAL_NEWS, f, so, NULL, &feed, err);
    bson_destroy(so);
    bson_destroy(f);
    if (rc)
        return rc;
    ap_row_add(r, (double)feed.docs_examined, "docs", "feed page: documents examined (index %s)",
               feed.index);

    /* Comments in the caches, truncated back to the last few. */
    bson_oid_t pid;
    if ((rc = ap_social_post(db, "B", "B", month, "So when do you crush Oracle?", pub, 1, NULL,
                             &pid, err)))
        return rc;
    for (int i = 0; i < 10 && rc == 0; i++)
        rc = ap_social_comment(db, &pid, solo, solo, "Right on!", err);
    int64_t before = 0, after = 0, truncated = 0;
    if (rc || (rc = news_size(db, solo, month, &before, err)) ||
        (rc = ap_social_truncate_comments(db, &truncated, err)) ||
        (rc = news_size(db, solo, month, &after, err)))
        return rc;
    ap_row_add(r, (double)before, "B", "month document with 10 comments on its last post");
    ap_row_add(r, (double)after, "B", "after truncate_extra_comments (last %d kept)",
               AP_COMMENTS_SHOWN);

    ap_claim_set(r, 0,
                 per_follower_bytes[2] < 2 * per_follower_bytes[0] + 1 &&
                     per_follower_bytes[2] * 2 + 1 > per_follower_bytes[0],
                 "bytes written per follower per post: %.0f (10 followers), %.0f (100), %.0f "
                 "(1,000); time per follower %.1f / %.1f / %.1f us",
                 per_follower_bytes[0], per_follower_bytes[1], per_follower_bytes[2],
                 per_follower_us[0], per_follower_us[1], per_follower_us[2]);
    ap_claim_set(r, 1,
                 feed.docs_examined == 1 && strcmp(feed.index, "user_id_1_month_-1") == 0 &&
                     !feed.sort_in_memory,
                 "the feed's month: %lld document examined through %s%s", (long long)feed.docs_examined,
                 feed.index, feed.sort_in_memory ? ", sorted in memory" : ", in index order");
    ap_claim_set(r, 2, sz[3] > sz[1] && sz[2] > sz[1] && after < before,
                 "the month document grew %lld -> %lld -> %lld -> %lld B over %d posts "
                 "(%lld moves); truncation took it from %lld to %lld B",
                 (long long)sz[0], (long long)sz[1], (long long)sz[2], (long long)sz[3],
                 marks[3], (long long)g.moves, (long long)before, (long long)after);
    (void)engine;
    (void)moves_last;
    return 0;
}

const ap_usecase ap_usecase_social = {
    .name = "ap_social",
    .chapter = "Ch.8 Social Networking",
    .title = "Fan-out on Write",
    .pages = "pp.129-139",
    .demonstrates = "a post copied into every follower's monthly news document by one "
                    "multi update, so a feed page is one read",
    .nclaims = 3,
    .claims = {
        {"Fan-out on write: a post costs one cached copy per follower, the same per follower "
         "whether there are 10 or 1,000", NULL},
        {"Reading the news feed loads one document per month ({user_id, month} index, no sort "
         "in memory)", NULL},
        {"The monthly bucket grows with every post it receives; comments cached in it are "
         "truncated to the last few to bound it", NULL},
    },
    .measure = social_measure,
};
