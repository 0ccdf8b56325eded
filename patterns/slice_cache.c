/*
 * slice_cache.c -- 5.10 Array Slice Cache: a blog post keeps its ten latest
 * comments embedded, trimmed by $push with $each and $slice.
 *
 *     posts     {_id, blogId, createdOn, publishedOn, title, content,
 *                latestComments: [{_id, postId, publishedOn, message}, ...]}
 *     comments  {_id, postId, publishedOn, message}
 *
 * Adding a comment inserts it into `comments` and pushes it onto the post's
 * cache, keeping the last PT_SLICE_LATEST (the new comment last).  Comments
 * of one size make the cache reach a fixed size after ten pushes; on
 * mmapv1 a post created with room for a full cache (the "pre-allocated"
 * form) never moves, one created with an empty cache moves each time it
 * outgrows its slot until the cache is full (three times for ten ~140-byte
 * comments).  While a cache grows both engines write the whole post on
 * each push; once it is full the post keeps its size, mmapv1 writes only
 * the bytes the shift changed and btree still the whole post.  The book
 * creates no index beyond _id.
 *
 * Two scenarios, the simulator's array_slice/pre_allocated_cache_slice_
 * scenario.js and array_slice/cache_slice_scenario.js: each user pushes one
 * comment onto a random post's cache.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "patterns.h"

/* ---- operations ----------------------------------------------------------- */

/* The book's comment document. */
static void comment_init(bson_t *c, const bson_oid_t *id, const bson_oid_t *post_id,
                         int64_t published_ms, const char *message)
{
    bson_init(c);
    BSON_APPEND_OID(c, "_id", id);
    BSON_APPEND_OID(c, "postId", post_id);
    BSON_APPEND_DATE_TIME(c, "publishedOn", published_ms);
    BSON_APPEND_UTF8(c, "message", message);
}

/*
 * The simulator's pre-allocation (SliceCache.create with an example
 * object): insert the post with its cache full of copies of the template,
 * then $set the cache to [].  The update shrinks the document, which
 * mmapv1 does in place, so the record keeps room for a full cache.
 */
int pt_slice_create_post(md_db *db, const bson_oid_t *post_id, const bson_oid_t *blog_id,
                         const char *title, const char *content,
                         const bson_t *template_comment, md_error *err)
{
    bson_t post = BSON_INITIALIZER, arr;
    char key[16];
    int64_t now = pt_now_ms();
    int rc;
    md_collection *c = md_db_get_collection(db, PT_SLICE_POSTS);
    BSON_APPEND_OID(&post, "_id", post_id);
    BSON_APPEND_OID(&post, "blogId", blog_id);
    BSON_APPEND_DATE_TIME(&post, "createdOn", now);
    BSON_APPEND_DATE_TIME(&post, "publishedOn", now);
    BSON_APPEND_UTF8(&post, "title", title);
    BSON_APPEND_UTF8(&post, "content", content);
    BSON_APPEND_ARRAY_BEGIN(&post, "latestComments", &arr);
    for (int i = 0; template_comment && i < PT_SLICE_LATEST; i++) {
        snprintf(key, sizeof key, "%d", i);
        BSON_APPEND_DOCUMENT(&arr, key, template_comment);
    }
    bson_append_array_end(&post, &arr);
    rc = md_collection_insert_one(c, &post, NULL, NULL, err);
    if (rc == 0 && template_comment) {
        bson_t *q = BCON_NEW("_id", BCON_OID(post_id));
        bson_t *u = BCON_NEW("$set", "{", "latestComments", "[", "]", "}");
        rc = md_collection_update_one(c, q, u, NULL, NULL, err);
        bson_destroy(u);
        bson_destroy(q);
    }
    bson_destroy(&post);
    md_collection_destroy(c);
    return rc;
}

/*
 * The book prints posts.update({_id: postId}, {latestComments: {$each:
 * [comment], $slice: -10}}), a replacement document that would store the
 * modifiers as data; the $push it means (erratum 1) is what we send.
 */
int pt_slice_push_latest(md_db *db, const bson_oid_t *post_id, const bson_t *comment,
                         md_error *err)
{
    bson_t reply;
    bson_iter_t it;
    md_collection *c = md_db_get_collection(db, PT_SLICE_POSTS);
    bson_t *q = BCON_NEW("_id", BCON_OID(post_id));
    bson_t *u = BCON_NEW("$push", "{", "latestComments", "{", "$each", "[", BCON_DOCUMENT(comment),
                         "]", "$slice", BCON_INT32(-PT_SLICE_LATEST), "}", "}");
    int rc = md_collection_update_one(c, q, u, NULL, &reply, err);
    if (rc == 0 && (!bson_iter_init_find(&it, &reply, "matchedCount") ||
                    bson_iter_as_int64(&it) != 1))
        rc = md_error_set(err, MD_NOTFOUND, MD_CODE_NO_SUCH_KEY, "no post to cache the comment in");
    bson_destroy(&reply);
    bson_destroy(u);
    bson_destroy(q);
    md_collection_destroy(c);
    return rc;
}

int pt_slice_add_comment(md_db *db, const bson_oid_t *post_id, const char *message,
                         int64_t published_ms, bson_oid_t *comment_id, md_error *err)
{
    bson_t comment;
    bson_oid_t id;
    bson_oid_init(&id, NULL);
    comment_init(&comment, &id, post_id, published_ms, message);
    md_collection *c = md_db_get_collection(db, PT_SLICE_COMMENTS);
    int rc = md_collection_insert_one(c, &comment, NULL, NULL, err);
    md_collection_destroy(c);
    if (rc == 0)
        rc = pt_slice_push_latest(db, post_id, &comment, err);
    if (rc == 0 && comment_id)
        bson_oid_copy(&id, comment_id);
    bson_destroy(&comment);
    return rc;
}

int pt_slice_find_post(md_db *db, const bson_oid_t *post_id, bson_t *post, md_error *err)
{
    md_collection *c = md_db_get_collection(db, PT_SLICE_POSTS);
    bson_t *q = BCON_NEW("_id", BCON_OID(post_id));
    bson_t *opts = BCON_NEW("limit", BCON_INT64(1));
    md_cursor *cur = md_collection_find_with_opts(c, q, opts);
    const bson_t *doc;
    int rc = MD_NOTFOUND;
    bson_init(post);
    if (md_cursor_next(cur, &doc)) {
        bson_copy_to_excluding_noinit(doc, post, "", NULL);
        rc = 0;
    } else if (md_cursor_error(cur, err)) {
        rc = MD_ERROR;
    }
    md_cursor_destroy(cur);
    bson_destroy(opts);
    bson_destroy(q);
    md_collection_destroy(c);
    return rc;
}

/* ---- the scenarios ---------------------------------------------------------- */

/*
 * Both scripts keep numberOfCacheObjects = 1000 caches, at quick scale
 * too: setup takes a fraction of a second, and at the runner's rate the
 * pushes per post, so the write conflicts on each, depend on how many
 * posts there are.  The simulator pushes empty objects onto a 64-slot cache; we
 * push the book's comment documents onto its ten-slot cache.  Every
 * comment has the same size ("a uniform object size in this test"): the
 * message is padded to SLICE_MESSAGE_LEN characters.
 */
#define SLICE_POSTS 1000
#define SLICE_MESSAGE_LEN 64

typedef struct slice_state {
    int nposts;
    bson_oid_t *ids;             /* the posts' _ids (read-only after setup) */
    atomic_int_fast64_t *pushes; /* per post: pushes that succeeded */
} slice_state;

static void slice_state_free(void *state)
{
    slice_state *st = state;
    if (!st)
        return;
    free(st->ids);
    free(st->pushes);
    free(st);
}

/* A message of exactly SLICE_MESSAGE_LEN characters. */
static void slice_message(char *buf, uint64_t user, int post)
{
    snprintf(buf, SLICE_MESSAGE_LEN + 1, "comment %020llu on post %06d: Awesome post",
             (unsigned long long)user, post);
    size_t n = strlen(buf);
    memset(buf + n, '!', SLICE_MESSAGE_LEN - n);
    buf[SLICE_MESSAGE_LEN] = '\0';
}

static int slice_setup(md_db *db, const pt_setup_args *a, void **state, bool prealloc,
                       md_error *err)
{
    char title[64], message[SLICE_MESSAGE_LEN + 1];
    bson_oid_t blog;
    bson_t tmpl;
    int rc;
    slice_state *st = calloc(1, sizeof *st);
    if (!st)
        return md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
    st->nposts = SLICE_POSTS;
    st->ids = calloc((size_t)st->nposts, sizeof *st->ids);
    st->pushes = calloc((size_t)st->nposts, sizeof *st->pushes);
    if (!st->ids || !st->pushes) {
        slice_state_free(st);
        return md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
    }
    rc = pt_drop_if_exists(db, PT_SLICE_POSTS, err);
    if (!rc)
        rc = pt_drop_if_exists(db, PT_SLICE_COMMENTS, err);
    bson_oid_init(&blog, NULL);
    for (int p = 0; p < st->nposts && !rc; p++) {
        atomic_init(&st->pushes[p], 0);
        bson_oid_init(&st->ids[p], NULL);
        snprintf(title, sizeof title, "Awesome blog post %d", p);
        /* the template: a comment of the size every pushed comment has */
        slice_message(message, 0, p);
        comment_init(&tmpl, &st->ids[p], &st->ids[p], 0, message);
        rc = pt_slice_create_post(db, &st->ids[p], &blog, title, "Testing this blog software",
                                  prealloc ? &tmpl : NULL, err);
        bson_destroy(&tmpl);
    }
    if (rc) {
        slice_state_free(st);
        return rc;
    }
    *state = st;
    return 0;
}

static int slice_setup_prealloc(md_db *db, const pt_setup_args *a, void **state, md_error *err)
{
    return slice_setup(db, a, state, true, err);
}

static int slice_setup_no_prealloc(md_db *db, const pt_setup_args *a, void **state,
                                   md_error *err)
{
    return slice_setup(db, a, state, false, err);
}

/* One user: push one comment onto a random post's cache (the cache update
 * the simulator times; the comments collection is not part of it). */
static int slice_run(pt_user *u, md_error *err)
{
    slice_state *st = u->state;
    char message[SLICE_MESSAGE_LEN + 1];
    bson_oid_t id;
    bson_t comment;
    int p = (int)pt_rand_below(u, (uint64_t)st->nposts);
    bson_oid_init(&id, NULL);
    slice_message(message, u->id, p);
    comment_init(&comment, &id, &st->ids[p], pt_now_ms(), message);
    int rc = pt_slice_push_latest(u->db, &st->ids[p], &comment, err);
    bson_destroy(&comment);
    if (!rc)
        atomic_fetch_add(&st->pushes[p], 1);
    return rc;
}

/* One post's cache: min(pushes, 10) comments, all of this post, all
 * different.  (Which ten are kept follows the order the pushes were
 * applied in; under concurrent pushes to one post that is not the order
 * the users started in, so it is not checked here.) */
static int slice_check_post(const slice_state *st, int p, const bson_t *post, md_error *err)
{
    bson_iter_t it, arr, f;
    bson_oid_t seen[PT_SLICE_LATEST];
    int64_t pushes = atomic_load(&st->pushes[p]);
    int64_t want = pushes < PT_SLICE_LATEST ? pushes : PT_SLICE_LATEST;
    int n = 0;
    if (!bson_iter_init_find(&it, post, "latestComments") || !BSON_ITER_HOLDS_ARRAY(&it))
        return md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR, "post %d has no cache", p);
    bson_iter_recurse(&it, &arr);
    while (bson_iter_next(&arr)) {
        if (n >= PT_SLICE_LATEST)
            return md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR,
                                "post %d caches more than %d comments", p, PT_SLICE_LATEST);
        if (!BSON_ITER_HOLDS_DOCUMENT(&arr) || !bson_iter_recurse(&arr, &f) ||
            !bson_iter_find(&f, "_id") || !BSON_ITER_HOLDS_OID(&f))
            return md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR,
                                "post %d caches a malformed comment", p);
        bson_oid_copy(bson_iter_oid(&f), &seen[n]);
        for (int k = 0; k < n; k++)
            if (bson_oid_equal(&seen[k], &seen[n]))
                return md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR,
                                    "post %d caches a comment twice", p);
        bson_iter_recurse(&arr, &f);
        if (!bson_iter_find(&f, "postId") || !BSON_ITER_HOLDS_OID(&f) ||
            !bson_oid_equal(bson_iter_oid(&f), &st->ids[p]))
            return md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR,
                                "post %d caches another post's comment", p);
        n++;
    }
    if (n != want)
        return md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR,
                            "post %d caches %d comments after %lld pushes", p, n,
                            (long long)pushes);
    return 0;
}

static int slice_check(md_db *db, void *state, md_error *err)
{
    slice_state *st = state;
    int rc = 0;
    for (int p = 0; p < st->nposts && rc == 0; p++) {
        bson_t post;
        rc = pt_slice_find_post(db, &st->ids[p], &post, err);
        if (rc == MD_NOTFOUND)
            rc = md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR, "post %d is lost", p);
        if (rc == 0)
            rc = slice_check_post(st, p, &post, err);
        bson_destroy(&post);
    }
    return rc;
}

static const pt_scenario slice_prealloc_scenario = {
    .name = "slice_cache_preallocated",
    .title = "Pre-allocated slice cache",
    .script = "array_slice/pre_allocated_cache_slice_scenario.js",
    .nops = 1,
    .ops = {{
        .name = "pre_allocated_slice_cache",
        .users = 1000,
        .decides = true,
        .run = slice_run,
        .book_mmap = {30.98, 0.668, 0.163, 0.715, 0.874, 1.155, 0.361, 5.799},
        .book_wt = {30.606, 0.756, 0.199, 0.812, 1.085, 1.418, 0.408, 5.627},
    }},
    .setup = slice_setup_prealloc,
    .check = slice_check,
    .destroy = slice_state_free,
};

static const pt_scenario slice_no_prealloc_scenario = {
    .name = "slice_cache_no_preallocation",
    .title = "Slice cache no pre-allocation",
    .script = "array_slice/cache_slice_scenario.js",
    .nops = 1,
    .ops = {{
        .name = "slice_cache_no_pre_allocation",
        .users = 1000,
        .decides = true,
        .run = slice_run,
        .book_mmap = {30.507, 0.663, 0.155, 0.715, 0.86, 1.088, 0.365, 8.494},
        .book_wt = {30.033, 1.012, 0.4, 1.234, 1.783, 2.185, 0.417, 8.582},
    }},
    .setup = slice_setup_no_prealloc,
    .check = slice_check,
    .destroy = slice_state_free,
};

const pt_pattern pt_pattern_slice_cache = {
    .name = "slice_cache",
    .title = "Array Slice Cache",
    .section = "5.10",
    .book_winner = "mmapv1",
    .book_reason = "\"the variance between MMAP and WiredTiger is minor\", but MMAP is "
                   "faster, most of all without pre-allocation (means 0.663 vs 1.012 ms): "
                   "WiredTiger \"needs to rewrite more data on each update\"",
    .nscenarios = 2,
    .scenarios = {&slice_prealloc_scenario, &slice_no_prealloc_scenario},
};
