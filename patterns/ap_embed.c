/*
 * ap_embed.c -- Ch.1 "To Embed or Reference": the book's phone book, blog
 * comments and product/category examples, each both ways.
 *
 *   embedded    contacts     {_id: 3, name, zip_code, numbers: ["555-..."]}
 *   referenced  contacts_ref {_id: 3, name, zip_code}
 *               numbers      {contact_id: 3, number}        index contact_id
 *   embedded    posts        {_id: "First Post", author, text,
 *                             comments: [{author, text}]}
 *   referenced  comments     {post_id, author, text}          index author
 *   many-to-many (the compromise)  product {_id, category_ids: [...]}
 *                                  category {_id, name}
 *   many-to-many (mutual embedding) category {_id, products: [{_id, ...}]},
 *                                  every copy updated when a product is saved
 *
 * The rules it measures: embed for locality (one query, one document,
 * against two queries and 1 + N documents), embed for atomicity (one
 * remove), reference for flexibility (a query for one author's comments
 * returns whole embedded arrays), and the cost of high arity: a growing
 * embedded array must be moved (mmapv1) or rewritten whole (btree) as it
 * grows, where a referenced item is one small insert.
 */
#include <stdio.h>
#include <string.h>

#include "ap.h"

int ap_embed_create_indexes(md_db *db, md_error *err)
{
    bson_t *k = BCON_NEW("contact_id", BCON_INT32(1));
    int rc = pt_ensure_index(db, "numbers", k, NULL, err);
    bson_destroy(k);
    if (rc == 0) {
        k = BCON_NEW("author", BCON_INT32(1));
        rc = pt_ensure_index(db, "comments", k, NULL, err);
        bson_destroy(k);
    }
    return rc;
}

static void contact_doc(bson_t *d, int64_t id, const char *name, const char *zip)
{
    bson_init(d);
    BSON_APPEND_INT64(d, "_id", id);
    BSON_APPEND_UTF8(d, "name", name);
    BSON_APPEND_UTF8(d, "zip_code", zip);
}

int ap_embed_add_contact(md_db *db, int64_t id, const char *name, const char *zip,
                         const char *const *numbers, int n, md_error *err)
{
    bson_t d, arr;
    char k[16];
    contact_doc(&d, id, name, zip);
    BSON_APPEND_ARRAY_BEGIN(&d, "numbers", &arr);
    for (int i = 0; i < n; i++) {
        snprintf(k, sizeof k, "%d", i);
        BSON_APPEND_UTF8(&arr, k, numbers[i]);
    }
    bson_append_array_end(&d, &arr);
    int rc = ap_insert(db, "contacts", &d, NULL, err);
    bson_destroy(&d);
    return rc;
}

int ap_ref_add_number(md_db *db, int64_t id, const char *number, md_error *err)
{
    bson_t *d = BCON_NEW("contact_id", BCON_INT64(id), "number", BCON_UTF8(number));
    int rc = ap_insert(db, "numbers", d, NULL, err);
    bson_destroy(d);
    return rc;
}

int ap_ref_add_contact(md_db *db, int64_t id, const char *name, const char *zip,
                       const char *const *numbers, int n, md_error *err)
{
    bson_t d;
    contact_doc(&d, id, name, zip);
    int rc = ap_insert(db, "contacts_ref", &d, NULL, err);
    bson_destroy(&d);
    for (int i = 0; i < n && rc == 0; i++)
        rc = ap_ref_add_number(db, id, numbers[i], err);
    return rc;
}

static int array_len(const bson_t *doc, const char *field)
{
    bson_iter_t it, a;
    int n = 0;
    if (bson_iter_init_find(&it, doc, field) && BSON_ITER_HOLDS_ARRAY(&it) &&
        bson_iter_recurse(&it, &a))
        while (bson_iter_next(&a))
            n++;
    return n;
}

/* contact_info = db.contacts.find_one({'_id': 3}) */
int ap_embed_read_contact(md_db *db, int64_t id, int *nnumbers, md_error *err)
{
    bson_t *q = BCON_NEW("_id", BCON_INT64(id)), doc;
    int rc = pt_find_one(db, "contacts", q, NULL, &doc, err);
    *nnumbers = rc == 0 ? array_len(&doc, "numbers") : 0;
    bson_destroy(&doc);
    bson_destroy(q);
    return rc;
}

/* contact_info = db.contacts.find_one({'_id': 3})
 * number_info = list(db.numbers.find({'contact_id': 3})) */
int ap_ref_read_contact(md_db *db, int64_t id, int *nnumbers, md_error *err)
{
    bson_t *q = BCON_NEW("_id", BCON_INT64(id)), doc;
    int rc = pt_find_one(db, "contacts_ref", q, NULL, &doc, err);
    bson_destroy(&doc);
    bson_destroy(q);
    *nnumbers = 0;
    if (rc)
        return rc;
    int64_t n = 0;
    q = BCON_NEW("contact_id", BCON_INT64(id));
    rc = ap_find(db, "numbers", q, NULL, &n, NULL, err);
    bson_destroy(q);
    *nnumbers = (int)n;
    return rc;
}

int ap_embed_add_number(md_db *db, int64_t id, const char *number, md_error *err)
{
    bson_t *q = BCON_NEW("_id", BCON_INT64(id));
    bson_t *u = BCON_NEW("$push", "{", "numbers", BCON_UTF8(number), "}");
    bool found;
    int rc = ap_update(db, "contacts", q, u, false, false, &found, NULL, NULL, NULL, err);
    bson_destroy(q);
    bson_destroy(u);
    return rc ? rc : found ? 0 : MD_NOTFOUND;
}

int ap_embed_delete_contact(md_db *db, int64_t id, md_error *err)
{
    bson_t *q = BCON_NEW("_id", BCON_INT64(id));
    int rc = ap_remove(db, "contacts", q, NULL, err);
    bson_destroy(q);
    return rc;
}

/* Two statements; between them the contact is gone and its numbers are not. */
int ap_ref_delete_contact(md_db *db, int64_t id, md_error *err)
{
    bson_t *q = BCON_NEW("_id", BCON_INT64(id));
    int rc = ap_remove(db, "contacts_ref", q, NULL, err);
    bson_destroy(q);
    if (rc == 0) {
        q = BCON_NEW("contact_id", BCON_INT64(id));
        rc = ap_remove(db, "numbers", q, NULL, err);
        bson_destroy(q);
    }
    return rc;
}

/* for post in db.posts.find({'comments.author': author}, {'comments': 1}):
 *     for comment in post['comments']: if comment['author'] == author: yield */
static int comments_by(md_db *db, const char *author, int *n, int64_t *bytes, md_error *err)
{
    bson_t *q = BCON_NEW("comments.author", BCON_UTF8(author));
    bson_t *o = BCON_NEW("projection", "{", "comments", BCON_INT32(1), "}");
    md_collection *c = md_db_get_collection(db, "posts");
    md_cursor *cur = md_collection_find_with_opts(c, q, o);
    const bson_t *doc;
    *n = 0;
    *bytes = 0;
    while (md_cursor_next(cur, &doc)) {
        bson_iter_t it, arr, f;
        *bytes += doc->len;
        if (!bson_iter_init_find(&it, doc, "comments") || !bson_iter_recurse(&it, &arr))
            continue;
        while (bson_iter_next(&arr))
            if (BSON_ITER_HOLDS_DOCUMENT(&arr) && bson_iter_recurse(&arr, &f) &&
                bson_iter_find(&f, "author") && BSON_ITER_HOLDS_UTF8(&f) &&
                strcmp(bson_iter_utf8(&f, NULL), author) == 0)
                (*n)++;
    }
    int rc = md_cursor_error(cur, err) ? MD_ERROR : 0;
    md_cursor_destroy(cur);
    md_collection_destroy(c);
    bson_destroy(q);
    bson_destroy(o);
    return rc;
}

int ap_embed_comments_by(md_db *db, const char *author, int *n, md_error *err)
{
    int64_t bytes;
    return comments_by(db, author, n, &bytes, err);
}

/* product = db.product.find_one({"_id": product_id})
 * categories = list(db.category.find({'_id': {'$in': product['category_ids']}})) */
int ap_embed_product_categories(md_db *db, const char *product_id, int *n, md_error *err)
{
    bson_t *q = BCON_NEW("_id", BCON_UTF8(product_id)), doc, in, arr;
    bson_iter_t it;
    int rc = pt_find_one(db, "product", q, NULL, &doc, err);
    bson_destroy(q);
    *n = 0;
    if (rc) {
        bson_destroy(&doc);
        return rc;
    }
    bson_init(&in);
    BSON_APPEND_DOCUMENT_BEGIN(&in, "_id", &arr);
    if (bson_iter_init_find(&it, &doc, "category_ids"))
        BSON_APPEND_VALUE(&arr, "$in", bson_iter_value(&it));
    bson_append_document_end(&in, &arr);
    int64_t k = 0;
    rc = ap_find(db, "category", &in, NULL, &k, NULL, err);
    *n = (int)k;
    bson_destroy(&in);
    bson_destroy(&doc);
    return rc;
}

/* Full mutual embedding, the book's second many-to-many option:
 *   db.product.save(product)
 *   db.category.update({'products._id': product['_id']},
 *                      {'$set': {'products.$': product}}, multi=True)
 * (the book's 'products.*' is an erratum for the positional 'products.$').
 * *categories (may be NULL) gets the categories whose copy was updated. */
int ap_embed_save_product(md_db *db, const bson_t *product, int64_t *categories,
                          md_error *err)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, product, "_id"))
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE, "the product has no _id");
    bson_t q = BSON_INITIALIZER, u = BSON_INITIALIZER, set;
    BSON_APPEND_VALUE(&q, "_id", bson_iter_value(&it));
    md_collection *c = md_db_get_collection(db, "product");
    bson_t *o = BCON_NEW("upsert", BCON_BOOL(true));
    int rc = md_collection_replace_one(c, &q, product, o, NULL, err);
    bson_destroy(o);
    md_collection_destroy(c);
    bson_reinit(&q);
    if (rc == 0) {
        BSON_APPEND_VALUE(&q, "products._id", bson_iter_value(&it));
        BSON_APPEND_DOCUMENT_BEGIN(&u, "$set", &set);
        BSON_APPEND_DOCUMENT(&set, "products.$", product);
        bson_append_document_end(&u, &set);
        rc = ap_update(db, "category", &q, &u, false, true, NULL, categories, NULL, NULL, err);
    }
    bson_destroy(&q);
    bson_destroy(&u);
    return rc;
}

/* ---- the measurement ----------------------------------------------------------- */

static void number_of(char *buf, size_t n, int64_t contact, int i)
{
    snprintf(buf, n, "555-%03d-%04d", (int)(contact % 1000), i);
}

/* Read every contact `reps` times each way; reads/s and documents per read. */
static int time_reads(md_db *db, int contacts, int per, int reps, ap_result *r, md_error *err)
{
    double t0 = ap_now_s();
    int rc = 0, got;
    for (int k = 0; k < reps && rc == 0; k++)
        for (int64_t id = 0; id < contacts && rc == 0; id++) {
            rc = ap_embed_read_contact(db, id, &got, err);
            if (rc == 0 && got != per)
                rc = md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE, "embedded contact "
                                  "%lld has %d numbers, not %d", (long long)id, got, per);
        }
    double emb = ap_now_s() - t0;
    t0 = ap_now_s();
    for (int k = 0; k < reps && rc == 0; k++)
        for (int64_t id = 0; id < contacts && rc == 0; id++) {
            rc = ap_ref_read_contact(db, id, &got, err);
            if (rc == 0 && got != per)
                rc = md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE, "referenced contact "
                                  "%lld has %d numbers, not %d", (long long)id, got, per);
        }
    double ref = ap_now_s() - t0;
    if (rc)
        return rc;
    double nreads = (double)contacts * reps;
    ap_set(r, "read_embedded_us", emb * 1e6 / nreads, "us/read");
    ap_set(r, "read_referenced_us", ref * 1e6 / nreads, "us/read");
    ap_set(r, "read_embedded_docs", 1, "docs/read");
    /* The referenced read's second query, explained. */
    ap_plan x;
    bson_t *q = BCON_NEW("contact_id", BCON_INT64(0));
    rc = ap_explain_find(db, "numbers", q, NULL, NULL, &x, err);
    bson_destroy(q);
    ap_set(r, "read_referenced_docs", 1 + (double)x.docs_examined, "docs/read");
    return rc;
}

/* Grow every contact's numbers from `per` to `grow` each way; the cost per
 * number added. */
static int time_growth(md_db *db, int contacts, int per, int grow, ap_result *r, md_error *err)
{
    char num[32];
    ap_coll_stats a, b, c, d;
    int rc = ap_coll_stats_get(db, "contacts", &a, err);
    double t0 = ap_now_s();
    for (int i = per; i < grow && rc == 0; i++)
        for (int64_t id = 0; id < contacts && rc == 0; id++) {
            number_of(num, sizeof num, id, i);
            rc = ap_embed_add_number(db, id, num, err);
        }
    double emb = ap_now_s() - t0;
    if (rc == 0)
        rc = ap_coll_stats_get(db, "contacts", &b, err);
    if (rc == 0)
        rc = ap_coll_stats_get(db, "numbers", &c, err);
    t0 = ap_now_s();
    for (int i = per; i < grow && rc == 0; i++)
        for (int64_t id = 0; id < contacts && rc == 0; id++) {
            number_of(num, sizeof num, id, i);
            rc = ap_ref_add_number(db, id, num, err);
        }
    double ref = ap_now_s() - t0;
    if (rc == 0)
        rc = ap_coll_stats_get(db, "numbers", &d, err);
    if (rc)
        return rc;
    double adds = (double)contacts * (grow - per);
    ap_set(r, "grow_embedded_us", emb * 1e6 / adds, "us/number");
    ap_set(r, "grow_referenced_us", ref * 1e6 / adds, "us/number");
    ap_set(r, "grow_embedded_moves", (double)(b.moves - a.moves), "moves");
    ap_set(r, "grow_embedded_bytes", (double)(b.bytes_written - a.bytes_written) / adds,
           "bytes/number");
    ap_set(r, "grow_referenced_bytes", (double)(d.bytes_written - c.bytes_written) / adds,
           "bytes/number");
    bson_t *q = BCON_NEW("_id", BCON_INT64(0));
    ap_set(r, "grown_contact_bytes", (double)ap_doc_size(db, "contacts", q), "bytes");
    bson_destroy(q);
    return 0;
}

static int blog(md_db *db, int posts, int per, ap_result *r, md_error *err)
{
    static const char *const authors[] = {"Stuart", "Rick", "Ann", "Bea", "Carl"};
    int rc = 0;
    for (int p = 0; p < posts && rc == 0; p++) {
        char id[32], text[64];
        snprintf(id, sizeof id, "Post %d", p);
        bson_t d = BSON_INITIALIZER, arr, c;
        BSON_APPEND_UTF8(&d, "_id", id);
        BSON_APPEND_UTF8(&d, "author", "Rick");
        BSON_APPEND_UTF8(&d, "text", "This is my post");
        BSON_APPEND_ARRAY_BEGIN(&d, "comments", &arr);
        for (int i = 0; i < per; i++) {
            char k[16];
            snprintf(k, sizeof k, "%d", i);
            snprintf(text, sizeof text, "Nice post! (%d)", i);
            BSON_APPEND_DOCUMENT_BEGIN(&arr, k, &c);
            BSON_APPEND_UTF8(&c, "author", authors[(p + i) % 5]);
            BSON_APPEND_UTF8(&c, "text", text);
            bson_append_document_end(&arr, &c);
            bson_t *ref = BCON_NEW("post_id", BCON_UTF8(id), "author",
                                   BCON_UTF8(authors[(p + i) % 5]), "text", BCON_UTF8(text));
            rc = rc ? rc : ap_insert(db, "comments", ref, NULL, err);
            bson_destroy(ref);
        }
        bson_append_array_end(&d, &arr);
        rc = rc ? rc : ap_insert(db, "posts", &d, NULL, err);
        bson_destroy(&d);
    }
    int n = 0;
    int64_t bytes = 0, nref = 0, bref = 0;
    if (rc == 0)
        rc = comments_by(db, "Stuart", &n, &bytes, err);
    if (rc == 0) {
        bson_t *q = BCON_NEW("author", BCON_UTF8("Stuart"));
        md_collection *c = md_db_get_collection(db, "comments");
        md_cursor *cur = md_collection_find_with_opts(c, q, NULL);
        const bson_t *doc;
        while (md_cursor_next(cur, &doc)) {
            nref++;
            bref += doc->len;
        }
        if (md_cursor_error(cur, err))
            rc = MD_ERROR;
        md_cursor_destroy(cur);
        md_collection_destroy(c);
        bson_destroy(q);
    }
    if (rc)
        return rc;
    ap_set(r, "comments_by_embedded_found", n, "comments");
    ap_set(r, "comments_by_referenced_found", (double)nref, "comments");
    ap_set(r, "comments_by_embedded_bytes", (double)bytes, "bytes returned");
    ap_set(r, "comments_by_referenced_bytes", (double)bref, "bytes returned");
    return 0;
}

static int measure(md_db *db, const ap_args *a, ap_result *r, md_error *err)
{
    int contacts = a->quick ? 200 : 1000, per = 10, grow = a->quick ? 100 : 300;
    int reps = a->quick ? 5 : 20, rc;
    if ((rc = ap_embed_create_indexes(db, err)))
        return rc;
    for (int64_t id = 0; id < contacts && rc == 0; id++) {
        char nums[10][32];
        const char *p[10];
        for (int i = 0; i < per; i++) {
            number_of(nums[i], sizeof nums[i], id, i);
            p[i] = nums[i];
        }
        rc = ap_embed_add_contact(db, id, "Jenny", "01209", p, per, err);
        if (rc == 0)
            rc = ap_ref_add_contact(db, id, "Jenny", "01209", p, per, err);
    }
    if (rc || (rc = time_reads(db, contacts, per, reps, r, err)))
        return rc;
    ap_set(r, "numbers_per_contact", per, "numbers");
    if ((rc = time_growth(db, contacts / 4, per, grow, r, err)))
        return rc;
    ap_set(r, "grown_to_numbers", grow, "numbers");
    return blog(db, a->quick ? 50 : 200, 100, r, err);
}

/* ---- the claims ----------------------------------------------------------------- */

static ap_verdict c_locality(const ap_result *r, char *m, size_t n)
{
    double e = ap_get(r, "read_embedded_us"), f = ap_get(r, "read_referenced_us");
    snprintf(m, n, "a contact with %.0f numbers: embedded 1 query, %.0f document, %.1f us; "
                   "referenced 2 queries, %.0f documents, %.1f us (x%.1f)",
             ap_get(r, "numbers_per_contact"), ap_get(r, "read_embedded_docs"), e,
             ap_get(r, "read_referenced_docs"), f, f / e);
    return e < f ? AP_HOLDS : AP_FAILS;
}

static ap_verdict c_moves(const ap_result *r, char *m, size_t n)
{
    double mv = ap_get(r, "grow_embedded_moves");
    snprintf(m, n, "growing embedded arrays from %.0f to %.0f numbers: %.0f moves; the "
                   "contact document is %.0f bytes",
             ap_get(r, "numbers_per_contact"), ap_get(r, "grown_to_numbers"), mv,
             ap_get(r, "grown_contact_bytes"));
    if (strcmp(r->engine, "mmapv1") != 0)
        return AP_NA;
    return mv > 0 ? AP_HOLDS : AP_FAILS;
}

static ap_verdict c_write(const ap_result *r, char *m, size_t n)
{
    double eb = ap_get(r, "grow_embedded_bytes"), rb = ap_get(r, "grow_referenced_bytes"),
           eu = ap_get(r, "grow_embedded_us"), ru = ap_get(r, "grow_referenced_us");
    snprintf(m, n, "per number added: embedded $push %.0f bytes written, %.1f us; "
                   "referenced insert %.0f bytes, %.1f us",
             eb, eu, rb, ru);
    return eb > rb ? AP_HOLDS : AP_FAILS;
}

static ap_verdict c_flex(const ap_result *r, char *m, size_t n)
{
    double eb = ap_get(r, "comments_by_embedded_bytes"),
           rb = ap_get(r, "comments_by_referenced_bytes");
    double ef = ap_get(r, "comments_by_embedded_found"),
           rf = ap_get(r, "comments_by_referenced_found");
    snprintf(m, n, "one author's %.0f comments: embedded query returned %.0f bytes of whole "
                   "comment arrays (filtered in the application), referenced %.0f bytes "
                   "(%.0f comments)",
             ef, eb, rb, rf);
    return ef == rf && eb > rb ? AP_HOLDS : AP_FAILS;
}

const ap_usecase ap_usecase_embed = {
    .name = "ap_embed",
    .chapter = "Ch.1 To Embed or Reference",
    .title = "Embedding against referencing",
    .pages = "pp.1-16",
    .demonstrates = "embedded contacts, numbers and comments against referenced ones: one "
                    "read and one statement against growth and flexible queries",
    .measure = measure,
    .nclaims = 4,
    .claims = {
        {"embed for locality: one document is one read away, references cost more "
         "queries and documents", c_locality},
        {"growing documents must eventually be moved, which slows updates", c_moves},
        {"appending to an embedded array costs more per item than a referenced insert "
         "(high arity)", c_write},
        {"reference for flexibility: querying one author's comments returns whole "
         "embedded arrays", c_flex},
    },
};
