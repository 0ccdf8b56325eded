/*
 * ap_cms.c -- "Metadata and Asset Management" (Applied Design Patterns,
 * ch.6 pp.101-111): every content node of a Drupal-like CMS in one
 * polymorphic collection, edited under an optimistic nonce, and its
 * photos in GridFS (bucket cms.assets) with the same metadata, so a photo
 * looks like a node.
 *
 *   cms.nodes         {metadata: {nonce, parent_id, slug, type, title,
 *                      created, author: {id, name}, tags, published?,
 *                      detail: {...}}}
 *   cms.assets.files  GridFS: {length, chunkSize: 262144, uploadDate, md5,
 *                      contentType, metadata: {... as a node, locked}}
 *
 * Errata followed in their corrected form: the photo's lock lives in
 * metadata.locked and is cleared in cms.assets.files (the book's
 * top-level 'locked' in db.assets.files); tags are added to
 * metadata.tags (the book's node update names a top-level 'tags'); the
 * photo is found in cms.assets.files (the book's db.cms.assets).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ap.h"

#define FILES AP_CMS_BUCKET ".files"
#define LOCK_TIMEOUT_MS 300000 /* a lock older than 5 minutes is stale */

int ap_cms_create_indexes(md_db *db, md_error *err)
{
    int rc;
    bson_t *k, *o = BCON_NEW("unique", BCON_BOOL(true));
#define IX(coll, opts, ...)                                               \
    do {                                                                  \
        k = BCON_NEW(__VA_ARGS__);                                        \
        rc = pt_ensure_index(db, coll, k, opts, err);                     \
        bson_destroy(k);                                                  \
        if (rc)                                                           \
            goto out;                                                     \
    } while (0)
    IX(AP_CMS_NODES, o, "metadata.parent_id", BCON_INT32(1), "metadata.slug", BCON_INT32(1));
    IX(AP_CMS_NODES, NULL, "metadata.tags", BCON_INT32(1));
    IX(AP_CMS_NODES, NULL, "metadata.parent_id", BCON_INT32(1), "metadata.published",
       BCON_INT32(-1));
    IX(FILES, o, "metadata.parent_id", BCON_INT32(1), "metadata.slug", BCON_INT32(1));
    IX(FILES, NULL, "metadata.tags", BCON_INT32(1));
#undef IX
out:
    bson_destroy(o);
    return rc;
}

static void append_tags(bson_t *b, const char *key, const char *const *tags, int n)
{
    bson_t arr;
    BSON_APPEND_ARRAY_BEGIN(b, key, &arr);
    for (int i = 0; i < n; i++) {
        char k[16];
        snprintf(k, sizeof k, "%d", i);
        BSON_APPEND_UTF8(&arr, k, tags[i]);
    }
    bson_append_array_end(b, &arr);
}

int ap_cms_create_node(md_db *db, const char *parent_id, const char *slug, const char *type,
                       const char *title, const char *author, const char *const *tags,
                       int ntags, const char *text, int64_t published_ms, bson_oid_t *nonce,
                       md_error *err)
{
    bson_oid_t n;
    bson_oid_init(&n, NULL);
    int64_t now = pt_now_ms();
    bson_t doc = BSON_INITIALIZER, m, a, d;
    BSON_APPEND_DOCUMENT_BEGIN(&doc, "metadata", &m);
    BSON_APPEND_OID(&m, "nonce", &n);
    BSON_APPEND_UTF8(&m, "parent_id", parent_id);
    BSON_APPEND_UTF8(&m, "slug", slug);
    BSON_APPEND_UTF8(&m, "type", type);
    BSON_APPEND_UTF8(&m, "title", title);
    BSON_APPEND_DATE_TIME(&m, "created", now);
    BSON_APPEND_DOCUMENT_BEGIN(&m, "author", &a);
    BSON_APPEND_INT32(&a, "id", 1);
    BSON_APPEND_UTF8(&a, "name", author);
    bson_append_document_end(&m, &a);
    append_tags(&m, "tags", tags, ntags);
    if (published_ms >= 0)
        BSON_APPEND_DATE_TIME(&m, "published", published_ms);
    BSON_APPEND_DOCUMENT_BEGIN(&m, "detail", &d);
    BSON_APPEND_DATE_TIME(&d, "publish_on", published_ms >= 0 ? published_ms : now);
    BSON_APPEND_UTF8(&d, "text", text);
    bson_append_document_end(&m, &d);
    bson_append_document_end(&doc, &m);
    int rc = ap_insert(db, AP_CMS_NODES, &doc, NULL, err);
    bson_destroy(&doc);
    if (rc == 0 && nonce)
        bson_oid_copy(&n, nonce);
    return rc;
}

int ap_cms_update_text(md_db *db, const char *parent_id, const char *slug,
                       const bson_oid_t *nonce, const char *text, bson_oid_t *new_nonce,
                       md_error *err)
{
    bson_oid_t n;
    bson_oid_init(&n, NULL);
    bson_t *f = BCON_NEW("metadata.parent_id", BCON_UTF8(parent_id), "metadata.slug",
                         BCON_UTF8(slug), "metadata.nonce", BCON_OID(nonce));
    bson_t *u = BCON_NEW("$set", "{", "metadata.detail.text", BCON_UTF8(text), "metadata.nonce",
                         BCON_OID(&n), "}");
    int64_t matched = 0;
    int rc = ap_update(db, AP_CMS_NODES, f, u, false, false, NULL, &matched, NULL, NULL, err);
    bson_destroy(u);
    bson_destroy(f);
    if (rc == 0 && matched == 0)
        return md_error_set(err, MD_NOTFOUND, MD_CODE_NO_SUCH_KEY,
                            "ConflictError: the node was edited since it was read");
    if (rc == 0 && new_nonce)
        bson_oid_copy(&n, new_nonce);
    return rc;
}

int ap_cms_add_tags(md_db *db, const char *parent_id, const char *slug,
                    const char *const *tags, int ntags, md_error *err)
{
    bson_t *f = BCON_NEW("metadata.parent_id", BCON_UTF8(parent_id), "metadata.slug",
                         BCON_UTF8(slug));
    bson_t u = BSON_INITIALIZER, a, t;
    BSON_APPEND_DOCUMENT_BEGIN(&u, "$addToSet", &a);
    BSON_APPEND_DOCUMENT_BEGIN(&a, "metadata.tags", &t);
    append_tags(&t, "$each", tags, ntags);
    bson_append_document_end(&a, &t);
    bson_append_document_end(&u, &a);
    int64_t matched = 0;
    int rc = ap_update(db, AP_CMS_NODES, f, &u, false, false, NULL, &matched, NULL, NULL, err);
    bson_destroy(&u);
    bson_destroy(f);
    if (rc == 0 && matched == 0)
        rc = md_error_set(err, MD_NOTFOUND, MD_CODE_NO_SUCH_KEY, "no such node");
    return rc;
}

/* new_file(...) with the chunk loop, then the unlock. `metadata` is the
 * file's metadata with locked set to now. */
static int upload(md_db *db, const bson_t *metadata, const char *filename, const void *data,
                  size_t len, bson_oid_t *id, md_error *err)
{
    md_gridfs *fs = NULL;
    int rc = md_gridfs_open(db, AP_CMS_BUCKET, &fs, err);
    if (rc)
        return rc;
    bson_t *opts = BCON_NEW("contentType", "image/jpeg", "metadata", BCON_DOCUMENT(metadata));
    md_gridfs_file *f = NULL;
    rc = md_gridfs_open_upload(fs, filename, opts, &f, err);
    bson_destroy(opts);
    const size_t chunk = 262144; /* upload_file.chunk_size */
    for (size_t off = 0; rc == 0 && off < len; off += chunk)
        rc = md_gridfs_write(f, (const char *)data + off, len - off < chunk ? len - off : chunk,
                             err);
    bson_value_t fid = {0};
    if (rc == 0) {
        rc = md_gridfs_close(f, &fid, err);
    } else if (f) {
        md_gridfs_abort(f);
    }
    md_gridfs_destroy(fs);
    if (rc)
        return rc;
    bson_t *filter = bson_new();
    BSON_APPEND_VALUE(filter, "_id", &fid);
    bson_t *u = BCON_NEW("$set", "{", "metadata.locked", BCON_NULL, "}");
    rc = ap_update(db, FILES, filter, u, false, false, NULL, NULL, NULL, NULL, err);
    bson_destroy(u);
    bson_destroy(filter);
    if (rc == 0 && id && fid.value_type == BSON_TYPE_OID)
        bson_oid_copy(&fid.value.v_oid, id);
    bson_value_destroy(&fid);
    return rc;
}

int ap_cms_upload_photo(md_db *db, const char *parent_id, const char *slug, const char *title,
                        const void *data, size_t len, bson_oid_t *id, md_error *err)
{
    bson_oid_t nonce;
    bson_oid_init(&nonce, NULL);
    int64_t now = pt_now_ms();
    char filename[256];
    snprintf(filename, sizeof filename, "%s.jpg", slug);
    bson_t *m = BCON_NEW("nonce", BCON_OID(&nonce), "type", "photo", "locked",
                         BCON_DATE_TIME(now), "parent_id", BCON_UTF8(parent_id), "slug",
                         BCON_UTF8(slug), "title", BCON_UTF8(title), "created",
                         BCON_DATE_TIME(now), "author", "{", "id", BCON_INT32(2), "name",
                         "Jared", "}", "tags", "[", "]", "detail", "{", "filename",
                         BCON_UTF8(filename), "resolution", "[", BCON_INT32(1600),
                         BCON_INT32(1600), "]", "}");
    int rc = upload(db, m, filename, data, len, id, err);
    bson_destroy(m);
    return rc;
}

int ap_cms_replace_photo(md_db *db, const char *parent_id, const char *slug, const void *data,
                         size_t len, md_error *err)
{
    bson_t *f = BCON_NEW("metadata.parent_id", BCON_UTF8(parent_id), "metadata.slug",
                         BCON_UTF8(slug), "metadata.locked", BCON_NULL);
    bson_t file;
    int rc = pt_find_one(db, FILES, f, NULL, &file, err);
    bson_destroy(f);
    if (rc == MD_NOTFOUND) {
        bson_destroy(&file);
        f = BCON_NEW("metadata.parent_id", BCON_UTF8(parent_id), "metadata.slug",
                     BCON_UTF8(slug), "metadata.locked", "{", "$lt",
                     BCON_DATE_TIME(pt_now_ms() - LOCK_TIMEOUT_MS), "}");
        rc = pt_find_one(db, FILES, f, NULL, &file, err);
        bson_destroy(f);
        if (rc == MD_NOTFOUND)
            md_error_set(err, rc, MD_CODE_NO_SUCH_KEY,
                         "FileDoesNotExist: no photo %s/%s, or it is locked", parent_id, slug);
    }
    bson_iter_t it;
    md_gridfs *fs = NULL;
    if (rc == 0)
        rc = md_gridfs_open(db, AP_CMS_BUCKET, &fs, err);
    if (rc == 0 && bson_iter_init_find(&it, &file, "_id"))
        rc = md_gridfs_delete_by_id(fs, bson_iter_value(&it), err); /* the chunks too */
    md_gridfs_destroy(fs);
    /* The same metadata, locked now, for the new upload. */
    bson_t m = BSON_INITIALIZER;
    char filename[256] = "photo.jpg";
    if (bson_iter_init_find(&it, &file, "filename") && BSON_ITER_HOLDS_UTF8(&it))
        snprintf(filename, sizeof filename, "%s", bson_iter_utf8(&it, NULL));
    bson_iter_t mi;
    if (rc == 0 && bson_iter_init_find(&it, &file, "metadata") && bson_iter_recurse(&it, &mi))
        while (bson_iter_next(&mi))
            if (strcmp(bson_iter_key(&mi), "locked") != 0)
                BSON_APPEND_VALUE(&m, bson_iter_key(&mi), bson_iter_value(&mi));
    BSON_APPEND_DATE_TIME(&m, "locked", pt_now_ms());
    if (rc == 0)
        rc = upload(db, &m, filename, data, len, NULL, err);
    bson_destroy(&m);
    bson_destroy(&file);
    return rc;
}

int ap_cms_read_photo(md_db *db, const char *parent_id, const char *slug, void **data,
                      size_t *len, md_error *err)
{
    *data = NULL;
    *len = 0;
    md_gridfs *fs = NULL;
    int rc = md_gridfs_open(db, AP_CMS_BUCKET, &fs, err);
    if (rc)
        return rc;
    bson_t *f = BCON_NEW("metadata.parent_id", BCON_UTF8(parent_id), "metadata.slug",
                         BCON_UTF8(slug));
    bson_t *o = BCON_NEW("sort", "{", "uploadDate", BCON_INT32(-1), "}", "limit",
                         BCON_INT32(1));
    md_cursor *cur = md_gridfs_find(fs, f, o);
    const bson_t *doc;
    bson_value_t id = {0};
    bson_iter_t it;
    if (md_cursor_next(cur, &doc) && bson_iter_init_find(&it, doc, "_id"))
        bson_value_copy(bson_iter_value(&it), &id);
    if (md_cursor_error(cur, err))
        rc = MD_ERROR;
    else if (id.value_type == BSON_TYPE_EOD)
        rc = md_error_set(err, MD_NOTFOUND, MD_CODE_NO_SUCH_KEY, "FileNotFound");
    md_cursor_destroy(cur);
    bson_destroy(o);
    bson_destroy(f);
    md_gridfs_file *file = NULL;
    if (rc == 0)
        rc = md_gridfs_open_download_by_id(fs, &id, &file, err);
    size_t cap = 0;
    char *buf = NULL;
    while (rc == 0) {
        if (*len + 262144 > cap) {
            cap = cap ? 2 * cap : 262144 * 2;
            char *nb = realloc(buf, cap);
            if (!nb) {
                rc = md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
                break;
            }
            buf = nb;
        }
        int64_t got = md_gridfs_read(file, buf + *len, cap - *len, err);
        if (got < 0)
            rc = (int)got;
        else if (got == 0)
            break;
        else
            *len += (size_t)got;
    }
    if (file)
        md_gridfs_close(file, NULL, NULL);
    md_gridfs_destroy(fs);
    bson_value_destroy(&id);
    if (rc) {
        free(buf);
        *len = 0;
    } else {
        *data = buf ? buf : malloc(1);
    }
    return rc;
}

md_cursor *ap_cms_blog_feed(md_db *db, const char *parent_id, int64_t now_ms)
{
    md_collection *c = md_db_get_collection(db, AP_CMS_NODES);
    bson_t *f = BCON_NEW("metadata.parent_id", BCON_UTF8(parent_id), "metadata.published", "{",
                         "$lt", BCON_DATE_TIME(now_ms), "}");
    bson_t *o = BCON_NEW("sort", "{", "metadata.published", BCON_INT32(-1), "}");
    md_cursor *cur = md_collection_find_with_opts(c, f, o);
    bson_destroy(o);
    bson_destroy(f);
    md_collection_destroy(c);
    return cur;
}

/* ---- the measurement ----------------------------------------------------------- */

static int cms_measure(md_db *db, const ap_args *args, ap_result *r, md_error *err)
{
    const char *engine = args->engine;
    bool quick = args->quick;
    int rc = ap_cms_create_indexes(db, err);
    const char *tags[] = {"news", "musings"};
    int64_t now = pt_now_ms();
    int nposts = quick ? 200 : 2000;
    for (int i = 0; i < nposts && rc == 0; i++) {
        char slug[64];
        snprintf(slug, sizeof slug, "2012-03-post-%d", i);
        rc = ap_cms_create_node(db, i % 4 ? "my-blog" : "other-blog", slug, "blog-entry",
                                "Noticed in the News", "Rick", tags, 2,
                                "I noticed the news from Washington today...",
                                now - (int64_t)(nposts - i) * 3600000 + (i % 10 == 0 ? 86400000LL * 30 : 0),
                                NULL, err);
    }
    /* Alice and Bob edit the same page. */
    bson_oid_t n0, alice;
    if (rc == 0)
        rc = ap_cms_create_node(db, "site", "about", "basic-page", "About Us", "Rick", tags, 0,
                                "# About Us", -1, &n0, err);
    if (rc == 0)
        rc = ap_cms_update_text(db, "site", "about", &n0, "# About Us (Alice)", &alice, err);
    if (rc)
        return rc;
    md_error e2;
    int bob = ap_cms_update_text(db, "site", "about", &n0, "# About Us (Bob)", NULL, &e2);
    int dup = ap_cms_create_node(db, "site", "about", "basic-page", "About Us again", "Bob",
                                 tags, 0, "", -1, NULL, &e2);
    int dup_code = e2.code;

    /* The feed. */
    ap_plan feed;
    bson_t *f = BCON_NEW("metadata.parent_id", "my-blog", "metadata.published", "{", "$lt",
                         BCON_DATE_TIME(now), "}");
    bson_t *s = BCON_NEW("metadata.published", BCON_INT32(-1));
    rc = ap_explain_find(db, AP_CMS_NODES, f, s, NULL, &feed, err);
    bson_destroy(s);
    bson_destroy(f);
    if (rc)
        return rc;
    ap_row_add(r, (double)feed.keys_examined, "keys", "blog feed: keys examined (index %s%s)",
               feed.index, feed.sort_in_memory ? ", in-memory sort" : "");
    ap_row_add(r, (double)feed.n_returned, "docs", "blog feed: posts returned of %d nodes", nposts);

    /* Photos through GridFS: a 1 MB + 1 photo, uploaded, read back,
     * replaced. */
    size_t len = (quick ? 1 : 8) * 1048576 + 1;
    unsigned char *photo = malloc(len), *back = NULL;
    if (!photo)
        return md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
    for (size_t i = 0; i < len; i++)
        photo[i] = (unsigned char)(i * 2654435761u >> 13);
    ap_counters c0, c1;
    bson_oid_t pid;
    double t = ap_now_s();
    size_t blen = 0;
    if ((rc = ap_counters_read(db, &c0, err)) ||
        (rc = ap_cms_upload_photo(db, "gallery", "2012-03-invisible-bicycle", "Kitteh", photo,
                                  len, &pid, err)) ||
        (rc = ap_counters_read(db, &c1, err))) {
        free(photo);
        return rc;
    }
    double up_s = ap_now_s() - t;
    t = ap_now_s();
    rc = ap_cms_read_photo(db, "gallery", "2012-03-invisible-bicycle", (void **)&back, &blen,
                           err);
    double down_s = ap_now_s() - t;
    bool exact = rc == 0 && blen == len && memcmp(back, photo, len) == 0;
    free(back);
    int64_t chunks = 0;
    bson_t *cf = BCON_NEW("files_id", BCON_OID(&pid));
    if (rc == 0)
        rc = ap_find(db, AP_CMS_BUCKET ".chunks", cf, NULL, &chunks, NULL, err);
    bson_destroy(cf);
    if (rc == 0)
        rc = ap_cms_replace_photo(db, "gallery", "2012-03-invisible-bicycle", photo, len / 2,
                                  err);
    int64_t files = 0, all_chunks = 0;
    bson_t *empty = bson_new();
    if (rc == 0)
        rc = ap_find(db, FILES, empty, NULL, &files, NULL, err);
    if (rc == 0)
        rc = ap_find(db, AP_CMS_BUCKET ".chunks", empty, NULL, &all_chunks, NULL, err);
    bson_destroy(empty);
    free(photo);
    if (rc)
        return rc;
    ap_counters d = ap_counters_diff(&c0, &c1);
    ap_row_add(r, (double)len, "B", "photo uploaded");
    ap_row_add(r, (double)chunks, "chunks", "its chunks of 262144 B");
    ap_row_add(r, len / 1048576.0 / up_s, "MB/s", "upload (chunk loop + unlock)");
    ap_row_add(r, len / 1048576.0 / down_s, "MB/s", "read back (get_version)");
    ap_row_add(r, (double)d.bytes_written, "B", "bytes written by the upload");
    ap_row_add(r, (double)all_chunks, "chunks", "after replacing it with a half-size photo");

    ap_claim_set(r, 0, bob == MD_NOTFOUND,
                 "Alice's edit changed the nonce; Bob's edit with the old nonce: %s",
                 bob == MD_NOTFOUND ? "not updatedExisting -> ConflictError" : "applied (lost update)");
    ap_claim_set(r, 1, dup == MD_EDUPKEY || dup_code == MD_CODE_DUPLICATE_KEY,
                 "a second node at site/about: %s (code %d)",
                 dup ? "refused by the unique index" : "inserted", dup_code);
    ap_claim_set(r, 2,
                 exact && chunks == (int64_t)((len + 262143) / 262144) && files == 1 &&
                     all_chunks == (int64_t)((len / 2 + 262143) / 262144),
                 "%zu B in %lld chunks, read back %s; after the replacement %lld file, %lld "
                 "chunks (the old ones deleted)",
                 len, (long long)chunks, exact ? "byte-exact" : "DIFFERENT", (long long)files,
                 (long long)all_chunks);
    ap_claim_set(r, 3,
                 strcmp(feed.index, "metadata.parent_id_1_metadata.published_-1") == 0 &&
                     !feed.sort_in_memory,
                 "%lld posts through %s, %s", (long long)feed.n_returned, feed.index,
                 feed.sort_in_memory ? "sorted in memory" : "in index order");
    (void)engine;
    return 0;
}

const ap_usecase ap_usecase_cms = {
    .name = "ap_cms",
    .chapter = "Ch.6 Content Management Systems",
    .title = "Metadata and Asset Management",
    .pages = "pp.101-111",
    .demonstrates = "polymorphic nodes edited under an optimistic nonce; photos in GridFS "
                    "with node-shaped metadata",
    .nclaims = 4,
    .claims = {
        {"The nonce detects a lost update: an edit from a stale read matches nothing "
         "(updatedExisting false)", NULL},
        {"The unique {metadata.parent_id, metadata.slug} index prevents duplicate slugs", NULL},
        {"GridFS splits a photo into 256 kB chunks and reads it back whole; replacing it "
         "deletes the old chunks", NULL},
        {"The recent-posts feed is served by {metadata.parent_id, metadata.published: -1} "
         "without an in-memory sort", NULL},
    },
    .measure = cms_measure,
};
