/*
 * test_ap_cms.c -- "Metadata and Asset Management" (patterns/ap_cms.c) on
 * every engine: the nonce edit (Alice's and Bob's collision), $addToSet
 * tags, the unique (parent_id, slug), the blog feed's order and index; and
 * the photos' GridFS round trips through the use case's streamed upload
 * and get_version read -- 0 B, 1 B, exactly one chunk, 256 KB + 1 and
 * 20 MB, byte-exact, with MongoDB's files document -- and the replacement
 * under the book's lock rules.
 */
#include "ap.h"
#include "pt_test_util.h"

Test(ap_cms, nodes)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        bson_oid_t n0, n1;
        const char *tags[] = {"news", "musings"};
        cr_assert_eq(ap_cms_create_indexes(t.db, &err), 0, "%s", err.message);
        cr_assert_eq(ap_cms_create_node(t.db, "site", "about", "basic-page", "About Us", "Rick",
                                        tags, 0, "# About Us", -1, &n0, &err), 0, "%s",
                     err.message);
        cr_assert_eq(ap_cms_create_node(t.db, "site", "about", "basic-page", "Again", "Bob",
                                        tags, 0, "", -1, NULL, &err), MD_EDUPKEY);
        cr_assert_eq(err.code, MD_CODE_DUPLICATE_KEY);
        /* Alice saves first; Bob's edit, from the same read, conflicts. */
        cr_assert_eq(ap_cms_update_text(t.db, "site", "about", &n0, "Alice's", &n1, &err), 0);
        cr_assert(!bson_oid_equal(&n0, &n1));
        cr_assert_eq(ap_cms_update_text(t.db, "site", "about", &n0, "Bob's", NULL, &err),
                     MD_NOTFOUND);
        cr_assert_eq(ptt_count(&t, AP_CMS_NODES, "{\"metadata.detail.text\": \"Alice's\"}"), 1);
        cr_assert_eq(ap_cms_update_text(t.db, "site", "about", &n1, "Bob's", NULL, &err), 0);
        /* $addToSet $each: no duplicates */
        const char *more[] = {"interesting", "funny", "news"};
        cr_assert_eq(ap_cms_add_tags(t.db, "site", "about", more, 3, &err), 0);
        cr_assert_eq(ap_cms_add_tags(t.db, "site", "about", more, 2, &err), 0);
        bson_t *r = PTT_OK(&t, "{\"find\": \"cms.nodes\", \"filter\": {\"metadata.slug\": "
                               "\"about\"}}");
        cr_assert_str_eq(ptt_str(r, "cursor.firstBatch.0.metadata.tags.0"), "interesting");
        cr_assert_str_eq(ptt_str(r, "cursor.firstBatch.0.metadata.tags.2"), "news");
        cr_assert(!ptt_has(r, "cursor.firstBatch.0.metadata.tags.3"));
        bson_destroy(r);
        cr_assert_eq(ap_cms_add_tags(t.db, "site", "none", more, 1, &err), MD_NOTFOUND);
        /* The feed: published posts of my-blog, newest first. */
        int64_t now = pt_now_ms();
        for (int i = 0; i < 5; i++) {
            char slug[32];
            snprintf(slug, sizeof slug, "post-%d", i);
            cr_assert_eq(ap_cms_create_node(t.db, i == 4 ? "other" : "my-blog", slug,
                                            "blog-entry", slug, "Rick", tags, 2, "text",
                                            i == 3 ? now + 3600000 : now - 1000 * (10 - i),
                                            NULL, &err), 0);
        }
        md_cursor *cur = ap_cms_blog_feed(t.db, "my-blog", now);
        const bson_t *doc;
        char got[256] = "";
        while (md_cursor_next(cur, &doc))
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s ",
                     ptt_str(doc, "metadata.slug"));
        md_cursor_destroy(cur);
        cr_assert_str_eq(got, "post-2 post-1 post-0 ");
        ap_plan p;
        bson_t *f = BCON_NEW("metadata.parent_id", "my-blog", "metadata.published", "{", "$lt",
                             BCON_DATE_TIME(now), "}");
        bson_t *s = BCON_NEW("metadata.published", BCON_INT32(-1));
        cr_assert_eq(ap_explain_find(t.db, AP_CMS_NODES, f, s, NULL, &p, &err), 0);
        cr_assert_str_eq(p.index, "metadata.parent_id_1_metadata.published_-1");
        cr_assert(!p.sort_in_memory);
        bson_destroy(s);
        bson_destroy(f);
    }
}

static unsigned char *bytes(size_t n, uint32_t seed)
{
    unsigned char *p = malloc(n ? n : 1);
    cr_assert_not_null(p);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (unsigned char)(seed >> 16);
    }
    return p;
}

Test(ap_cms, photo_round_trips, .timeout = 300)
{
    static const size_t sizes[] = {0, 1, 262144, 262145, 20 * 1048576};
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        if (strcmp(t.engine, "mmapv1") && strcmp(t.engine, "btree"))
            continue;
        md_error err;
        cr_assert_eq(ap_cms_create_indexes(t.db, &err), 0, "%s", err.message);
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
            char slug[32];
            size_t n = sizes[k];
            snprintf(slug, sizeof slug, "photo-%zu", n);
            unsigned char *data = bytes(n, (uint32_t)k + 7);
            bson_oid_t id;
            cr_assert_eq(ap_cms_upload_photo(t.db, "gallery", slug, "Kitteh", data, n, &id,
                                             &err), 0, "[%s] %zu B: %s", t.engine, n,
                         err.message);
            void *back;
            size_t blen;
            cr_assert_eq(ap_cms_read_photo(t.db, "gallery", slug, &back, &blen, &err), 0,
                         "[%s] %zu B: %s", t.engine, n, err.message);
            cr_assert_eq(blen, n, "[%s] read %zu of %zu B", t.engine, blen, n);
            cr_assert(n == 0 || memcmp(back, data, n) == 0, "[%s] %zu B differ", t.engine, n);
            free(back);
            free(data);
            /* MongoDB's files document, the photo's metadata unlocked */
            char oid[25], q[512];
            bson_oid_to_string(&id, oid);
            snprintf(q, sizeof q,
                     "{\"find\": \"cms.assets.files\", \"filter\": {\"_id\": {\"$oid\": "
                     "\"%s\"}}}", oid);
            bson_t *r = PTT_OK(&t, "%s", q);
            cr_assert_eq(ptt_i64(r, "cursor.firstBatch.0.length"), (int64_t)n);
            cr_assert_eq(ptt_i64(r, "cursor.firstBatch.0.chunkSize"), 262144);
            cr_assert_str_eq(ptt_str(r, "cursor.firstBatch.0.contentType"), "image/jpeg");
            cr_assert_eq(strlen(ptt_str(r, "cursor.firstBatch.0.md5")), 32);
            cr_assert(ptt_has(r, "cursor.firstBatch.0.uploadDate"));
            cr_assert_str_eq(ptt_str(r, "cursor.firstBatch.0.metadata.slug"), slug);
            cr_assert_str_eq(ptt_str(r, "cursor.firstBatch.0.metadata.type"), "photo");
            bson_iter_t it;
            cr_assert(ptt_find(r, "cursor.firstBatch.0.metadata.locked", &it) &&
                          BSON_ITER_HOLDS_NULL(&it),
                      "unlocked after the upload");
            bson_destroy(r);
            snprintf(q, sizeof q, "{\"files_id\": {\"$oid\": \"%s\"}}", oid);
            cr_assert_eq(ptt_count(&t, "cms.assets.chunks", q), (int64_t)((n + 262143) / 262144),
                         "[%s] chunks of %zu B", t.engine, n);
        }
    }
}

Test(ap_cms, replace_photo_and_locks)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        cr_assert_eq(ap_cms_create_indexes(t.db, &err), 0);
        unsigned char *a = bytes(600000, 1), *b = bytes(300000, 2);
        bson_oid_t id;
        cr_assert_eq(ap_cms_upload_photo(t.db, "g", "p", "T", a, 600000, &id, &err), 0);
        cr_assert_eq(ap_cms_replace_photo(t.db, "g", "p", b, 300000, &err), 0, "%s",
                     err.message);
        void *back;
        size_t blen;
        cr_assert_eq(ap_cms_read_photo(t.db, "g", "p", &back, &blen, &err), 0);
        cr_assert_eq(blen, 300000);
        cr_assert(memcmp(back, b, blen) == 0);
        free(back);
        cr_assert_eq(ptt_count(&t, "cms.assets.files", "{}"), 1);
        cr_assert_eq(ptt_count(&t, "cms.assets.chunks", "{}"), 2, "the old chunks deleted");
        cr_assert_eq(ptt_count(&t, "cms.assets.files", "{\"metadata.title\": \"T\"}"), 1,
                     "the metadata carried over");
        /* Locked by an upload in progress: not replaceable ... */
        int64_t now = pt_now_ms();
        bson_t *r = PTT_OK(&t, "{\"update\": \"cms.assets.files\", \"updates\": [{\"q\": {}, "
                               "\"u\": {\"$set\": {\"metadata.locked\": {\"$date\": %lld}}}}]}",
                           (long long)now);
        bson_destroy(r);
        cr_assert_eq(ap_cms_replace_photo(t.db, "g", "p", a, 10, &err), MD_NOTFOUND);
        /* ... unless the lock is over 5 minutes old. */
        r = PTT_OK(&t, "{\"update\": \"cms.assets.files\", \"updates\": [{\"q\": {}, "
                       "\"u\": {\"$set\": {\"metadata.locked\": {\"$date\": %lld}}}}]}",
                   (long long)(now - 301000));
        bson_destroy(r);
        cr_assert_eq(ap_cms_replace_photo(t.db, "g", "p", a, 10, &err), 0, "%s", err.message);
        cr_assert_eq(ap_cms_read_photo(t.db, "g", "p", &back, &blen, &err), 0);
        cr_assert_eq(blen, 10);
        free(back);
        cr_assert_eq(ap_cms_read_photo(t.db, "g", "none", &back, &blen, &err), MD_NOTFOUND);
        cr_assert_eq(ap_cms_replace_photo(t.db, "g", "none", a, 10, &err), MD_NOTFOUND);
        free(a);
        free(b);
    }
}
