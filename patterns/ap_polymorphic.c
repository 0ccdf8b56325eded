/*
 * ap_polymorphic.c -- Ch.2 "Polymorphic Schemas": one `nodes` collection
 * holding pages and photos of a wiki,
 *
 *   {_id: 1, title: "Welcome", url: "/", type: "page", text: "..."}
 *   {_id: 3, title: "Cool Photo", url: "/photo.jpg", type: "photo",
 *    content: BinData}
 *
 * found by one find_one({url}) whatever the type; the schema's evolution
 * three ways (eager: a multi update over everything; lazy: a default on
 * read; background: batches of 100 by $exists: false, $in and multi); the
 * cost of field names stored in every document; and semi-structured
 * properties as [name, value] pairs under a multikey index, queried by an
 * exact pair (the book's `['Seek Time': '5ms']` is an erratum for
 * `['Seek Time', '5ms']`).
 */
#include <stdio.h>
#include <string.h>

#include "ap.h"

int ap_poly_create_indexes(md_db *db, md_error *err)
{
    bson_t *k = BCON_NEW("url", BCON_INT32(1)), *o = BCON_NEW("unique", BCON_BOOL(true));
    int rc = pt_ensure_index(db, "nodes", k, o, err);
    bson_destroy(k);
    bson_destroy(o);
    if (rc == 0) {
        k = BCON_NEW("properties", BCON_INT32(1));
        rc = pt_ensure_index(db, "products", k, NULL, err);
        bson_destroy(k);
    }
    return rc;
}

int ap_poly_add_page(md_db *db, int64_t id, const char *title, const char *url,
                     const char *text, md_error *err)
{
    bson_t *d = BCON_NEW("_id", BCON_INT64(id), "title", BCON_UTF8(title), "url",
                         BCON_UTF8(url), "type", BCON_UTF8("page"), "text", BCON_UTF8(text));
    int rc = ap_insert(db, "nodes", d, NULL, err);
    bson_destroy(d);
    return rc;
}

int ap_poly_add_photo(md_db *db, int64_t id, const char *title, const char *url,
                      const void *content, size_t len, md_error *err)
{
    bson_t *d = BCON_NEW("_id", BCON_INT64(id), "title", BCON_UTF8(title), "url",
                         BCON_UTF8(url), "type", BCON_UTF8("photo"));
    BSON_APPEND_BINARY(d, "content", BSON_SUBTYPE_BINARY, content, (uint32_t)len);
    int rc = ap_insert(db, "nodes", d, NULL, err);
    bson_destroy(d);
    return rc;
}

/* node = db.nodes.find_one({'url': url}); node.setdefault('short_description', '') */
int ap_poly_find_by_url(md_db *db, const char *url, bson_t *node, md_error *err)
{
    bson_t *q = BCON_NEW("url", BCON_UTF8(url)), doc;
    bson_iter_t it;
    int rc = pt_find_one(db, "nodes", q, NULL, &doc, err);
    bson_destroy(q);
    if (rc == 0 && !bson_iter_init_find(&it, &doc, "short_description")) {
        BSON_APPEND_UTF8(&doc, "short_description", "");
    }
    bson_init(node);
    if (rc == 0) {
        bson_destroy(node);
        bson_copy_to(&doc, node);
    }
    bson_destroy(&doc);
    return rc;
}

/* db.nodes.update({}, {$set: {short_description: ''}}, false, true) */
int ap_poly_migrate_eager(md_db *db, int64_t *modified, md_error *err)
{
    bson_t q = BSON_INITIALIZER;
    bson_t *u = BCON_NEW("$set", "{", "short_description", BCON_UTF8(""), "}");
    int rc = ap_update(db, "nodes", &q, u, false, true, NULL, modified, NULL, NULL, err);
    bson_destroy(u);
    return rc;
}

/* node_ids_to_migrate = db.nodes.find({'short_description': {'$exists': False}}).limit(100)
 * db.nodes.update({'_id': {'$in': node_ids_to_migrate}}, {'$set': ...}, multi=True)
 * (the book passes the cursor to $in; its _ids are meant). */
int ap_poly_migrate_batch(md_db *db, int64_t *migrated, md_error *err)
{
    bson_t *q = BCON_NEW("short_description", "{", "$exists", BCON_BOOL(false), "}");
    bson_t *o = BCON_NEW("limit", BCON_INT32(100), "projection", "{", "_id", BCON_INT32(1),
                         "}");
    bson_t in = BSON_INITIALIZER, idd, arr;
    md_collection *c = md_db_get_collection(db, "nodes");
    md_cursor *cur = md_collection_find_with_opts(c, q, o);
    const bson_t *doc;
    int n = 0;
    BSON_APPEND_DOCUMENT_BEGIN(&in, "_id", &idd);
    BSON_APPEND_ARRAY_BEGIN(&idd, "$in", &arr);
    while (md_cursor_next(cur, &doc)) {
        bson_iter_t it;
        char k[16];
        snprintf(k, sizeof k, "%d", n++);
        if (bson_iter_init_find(&it, doc, "_id"))
            BSON_APPEND_VALUE(&arr, k, bson_iter_value(&it));
    }
    bson_append_array_end(&idd, &arr);
    bson_append_document_end(&in, &idd);
    int rc = md_cursor_error(cur, err) ? MD_ERROR : 0;
    md_cursor_destroy(cur);
    md_collection_destroy(c);
    *migrated = 0;
    if (rc == 0 && n > 0) {
        bson_t *u = BCON_NEW("$set", "{", "short_description", BCON_UTF8(""), "}");
        rc = ap_update(db, "nodes", &in, u, false, true, NULL, migrated, NULL, NULL, err);
        bson_destroy(u);
    }
    bson_destroy(&in);
    bson_destroy(q);
    bson_destroy(o);
    return rc;
}

int ap_poly_add_product(md_db *db, int64_t id, const char *const (*props)[2], int n,
                        md_error *err)
{
    bson_t d = BSON_INITIALIZER, arr, pair;
    char k[16];
    BSON_APPEND_INT64(&d, "_id", id);
    BSON_APPEND_ARRAY_BEGIN(&d, "properties", &arr);
    for (int i = 0; i < n; i++) {
        snprintf(k, sizeof k, "%d", i);
        BSON_APPEND_ARRAY_BEGIN(&arr, k, &pair);
        BSON_APPEND_UTF8(&pair, "0", props[i][0]);
        BSON_APPEND_UTF8(&pair, "1", props[i][1]);
        bson_append_array_end(&arr, &pair);
    }
    bson_append_array_end(&d, &arr);
    int rc = ap_insert(db, "products", &d, NULL, err);
    bson_destroy(&d);
    return rc;
}

/* db.products.find({'properties': ['Seek Time', '5ms']}) */
static bson_t *property_filter(const char *name, const char *value)
{
    return BCON_NEW("properties", "[", BCON_UTF8(name), BCON_UTF8(value), "]");
}

int ap_poly_find_by_property(md_db *db, const char *name, const char *value, int64_t *n,
                             md_error *err)
{
    bson_t *q = property_filter(name, value);
    int rc = ap_find(db, "products", q, NULL, n, NULL, err);
    bson_destroy(q);
    return rc;
}

/* ---- the measurement ----------------------------------------------------------- */

static const char *type_of(const bson_t *node)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, node, "type") && BSON_ITER_HOLDS_UTF8(&it))
        return bson_iter_utf8(&it, NULL);
    return "";
}

/* The same small documents with long and with short field names. */
static int names_cost(md_db *db, int n, ap_result *r, md_error *err)
{
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        bson_t *l = BCON_NEW("_id", BCON_INT32(i), "short_description", BCON_UTF8("x"),
                             "last_modified_timestamp", BCON_DATE_TIME(1000000LL * i),
                             "number_of_page_views", BCON_INT32(i));
        bson_t *s = BCON_NEW("_id", BCON_INT32(i), "sd", BCON_UTF8("x"), "lm",
                             BCON_DATE_TIME(1000000LL * i), "pv", BCON_INT32(i));
        rc = ap_insert(db, "long_names", l, NULL, err);
        if (rc == 0)
            rc = ap_insert(db, "short_names", s, NULL, err);
        bson_destroy(l);
        bson_destroy(s);
    }
    ap_coll_stats a, b;
    if (rc == 0 && (rc = ap_coll_stats_get(db, "long_names", &a, err)) == 0 &&
        (rc = ap_coll_stats_get(db, "short_names", &b, err)) == 0) {
        ap_set(r, "long_names_data_bytes", (double)a.size, "bytes");
        ap_set(r, "short_names_data_bytes", (double)b.size, "bytes");
    }
    return rc;
}

static int measure(md_db *db, const ap_args *a, ap_result *r, md_error *err)
{
    int n = a->quick ? 2000 : 20000, rc;
    char url[64], title[64];
    static const unsigned char jpeg[64] = {0xff, 0xd8, 0xff, 0xe0};
    if ((rc = ap_poly_create_indexes(db, err)))
        return rc;
    for (int i = 0; i < n && rc == 0; i++) {
        snprintf(title, sizeof title, "Node %d", i);
        if (i % 2) {
            snprintf(url, sizeof url, "/photo%d.jpg", i);
            rc = ap_poly_add_photo(db, i, title, url, jpeg, sizeof jpeg, err);
        } else {
            snprintf(url, sizeof url, "/page%d", i);
            rc = ap_poly_add_page(db, i, title, url, "Welcome to my wonderful wiki.", err);
        }
    }
    /* One lookup per type through the same index. */
    bson_t node;
    int found = 0;
    if (rc == 0 && (rc = ap_poly_find_by_url(db, "/page0", &node, err)) == 0)
        found += strcmp(type_of(&node), "page") == 0;
    bson_destroy(&node);
    if (rc == 0 && (rc = ap_poly_find_by_url(db, "/photo1.jpg", &node, err)) == 0)
        found += strcmp(type_of(&node), "photo") == 0;
    bson_destroy(&node);
    if (rc)
        return rc;
    ap_set(r, "lookups_by_url_typed_right", found, "of 2");
    /* Background migration of half, then the eager one over all. */
    ap_coll_stats s0, s1, s2;
    int64_t m, batches = 0, migrated = 0;
    if ((rc = ap_coll_stats_get(db, "nodes", &s0, err)))
        return rc;
    double t0 = ap_now_s();
    do {
        rc = ap_poly_migrate_batch(db, &m, err);
        migrated += m;
        batches++;
    } while (rc == 0 && m > 0 && migrated < n / 2);
    double tb = ap_now_s() - t0;
    if (rc || (rc = ap_coll_stats_get(db, "nodes", &s1, err)))
        return rc;
    t0 = ap_now_s();
    if ((rc = ap_poly_migrate_eager(db, &m, err)) ||
        (rc = ap_coll_stats_get(db, "nodes", &s2, err)))
        return rc;
    double te = ap_now_s() - t0;
    ap_set(r, "batch_migrated", (double)migrated, "docs");
    ap_set(r, "batch_us_per_doc", tb * 1e6 / (double)migrated, "us/doc");
    ap_set(r, "batch_moves", (double)(s1.moves - s0.moves), "moves");
    ap_set(r, "eager_matched", (double)m, "docs");
    ap_set(r, "eager_us_per_doc", te * 1e6 / (double)n, "us/doc");
    ap_set(r, "eager_moves", (double)(s2.moves - s1.moves), "moves");
    ap_set(r, "eager_bytes_written", (double)(s2.bytes_written - s1.bytes_written), "bytes");
    /* Semi-structured properties under a multikey index. */
    static const char *const p1[][2] = {{"Seek Time", "5ms"}, {"Rotational Speed", "15k RPM"},
                                        {"Transfer Rate", "3 Gb/s"}};
    static const char *const p2[][2] = {{"Seek Time", "9ms"}, {"Rotational Speed", "7200 RPM"}};
    for (int i = 0; i < 200 && rc == 0; i++)
        rc = ap_poly_add_product(db, i, i % 2 ? p1 : p2, i % 2 ? 3 : 2, err);
    int64_t hits = 0;
    ap_plan x;
    bson_t *q = property_filter("Seek Time", "5ms");
    if (rc == 0)
        rc = ap_poly_find_by_property(db, "Seek Time", "5ms", &hits, err);
    if (rc == 0)
        rc = ap_explain_find(db, "products", q, NULL, NULL, &x, err);
    bson_destroy(q);
    if (rc)
        return rc;
    ap_set(r, "property_pair_matches", (double)hits, "products");
    ap_set(r, "property_index_used", strcmp(x.index, "properties_1") == 0, "bool");
    ap_set(r, "property_keys_examined", (double)x.keys_examined, "keys");
    return names_cost(db, n, r, err);
}

/* ---- the claims ----------------------------------------------------------------- */

static ap_verdict c_lookup(const ap_result *r, char *m, size_t n)
{
    double v = ap_get(r, "lookups_by_url_typed_right");
    snprintf(m, n, "find_one({url}) returned the page and the photo from the one collection "
                   "(%.0f of 2)", v);
    return v == 2 ? AP_HOLDS : AP_FAILS;
}

static ap_verdict c_eager(const ap_result *r, char *m, size_t n)
{
    double mv = ap_get(r, "eager_moves");
    snprintf(m, n, "the eager migration touched %.0f documents, %.1f us each, %.0f moves, "
                   "%.0f bytes written; batches of 100: %.0f documents, %.1f us each, %.0f "
                   "moves",
             ap_get(r, "eager_matched"), ap_get(r, "eager_us_per_doc"), mv,
             ap_get(r, "eager_bytes_written"), ap_get(r, "batch_migrated"),
             ap_get(r, "batch_us_per_doc"), ap_get(r, "batch_moves"));
    if (strcmp(r->engine, "mmapv1") != 0)
        return ap_get(r, "eager_bytes_written") > 0 ? AP_HOLDS : AP_FAILS;
    return mv + ap_get(r, "batch_moves") > 0 ? AP_HOLDS : AP_FAILS;
}

static ap_verdict c_names(const ap_result *r, char *m, size_t n)
{
    double l = ap_get(r, "long_names_data_bytes"), s = ap_get(r, "short_names_data_bytes");
    snprintf(m, n, "the same values under long field names: %.0f bytes of data, under "
                   "2-letter names %.0f (x%.2f)",
             l, s, l / s);
    return l > 1.5 * s ? AP_HOLDS : AP_FAILS;
}

static ap_verdict c_props(const ap_result *r, char *m, size_t n)
{
    double h = ap_get(r, "property_pair_matches"), u = ap_get(r, "property_index_used");
    snprintf(m, n, "{properties: ['Seek Time', '5ms']} matched %.0f of 200 products, %s the "
                   "properties index (%.0f keys examined)",
             h, u == 1 ? "through" : "WITHOUT", ap_get(r, "property_keys_examined"));
    return h == 100 && u == 1 ? AP_HOLDS : AP_FAILS;
}

const ap_usecase ap_usecase_polymorphic = {
    .name = "ap_polymorphic",
    .chapter = "Ch.2 Polymorphic Schemas",
    .title = "One collection, many shapes",
    .pages = "pp.17-24",
    .demonstrates = "one collection of differently shaped nodes; adding a field eagerly, "
                    "lazily or in batches; property lists as [name, value] pairs",
    .measure = measure,
    .nclaims = 4,
    .claims = {
        {"one collection serves every node type: as simple as single-table, as efficient "
         "as concrete-table", c_lookup},
        {"a migration adding a field rewrites every document, and on mmapv1 the grown "
         "documents that outgrow their record move", c_eager},
        {"long field names, stored in every document, use much more space than short ones",
         c_names},
        {"[name, value] pairs under one index query semi-structured properties", c_props},
    },
};
