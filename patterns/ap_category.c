/*
 * ap_category.c -- "Category Hierarchy" (Applied Design Patterns, ch.5
 * pp.84-91): each category keeps its parent and an embedded `ancestors`
 * array ({_id, slug, name}, nearest first) for breadcrumbs, so a page
 * reads one document; a re-parent or rename rewrites the subtree instead.
 *
 *   categories {_id: ObjectId, slug (unique), name, parent,
 *               ancestors: [{_id, slug, name}, ...]}
 *
 * Errata followed in their corrected form: build_subgraph's
 * nodes_py_parent is nodes_by_parent; update_node_and_descendants builds
 * the ancestors from the parent's own ancestors plus the parent, nearest
 * first as build_ancestors does (the book appends the parent last there,
 * which would reverse the breadcrumbs of a moved subtree).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ap.h"

int ap_category_create_indexes(md_db *db, md_error *err)
{
    bson_t *k = BCON_NEW("slug", BCON_INT32(1));
    bson_t *o = BCON_NEW("unique", BCON_BOOL(true));
    int rc = pt_ensure_index(db, AP_CATEGORIES, k, o, err);
    bson_destroy(o);
    bson_destroy(k);
    if (rc)
        return rc;
    k = BCON_NEW("ancestors._id", BCON_INT32(1));
    rc = pt_ensure_index(db, AP_CATEGORIES, k, NULL, err);
    bson_destroy(k);
    return rc;
}

/* The ancestors of a child of `parent` (a document with _id, slug, name,
 * ancestors): [{_id, slug, name} of parent] + parent.ancestors, into arr. */
static void ancestors_below(const bson_t *parent, bson_t *arr)
{
    bson_iter_t it, a;
    bson_t first;
    bson_init(arr);
    BSON_APPEND_DOCUMENT_BEGIN(arr, "0", &first);
    if (bson_iter_init_find(&it, parent, "_id"))
        BSON_APPEND_VALUE(&first, "_id", bson_iter_value(&it));
    if (bson_iter_init_find(&it, parent, "slug"))
        BSON_APPEND_VALUE(&first, "slug", bson_iter_value(&it));
    if (bson_iter_init_find(&it, parent, "name"))
        BSON_APPEND_VALUE(&first, "name", bson_iter_value(&it));
    bson_append_document_end(arr, &first);
    int i = 1;
    if (bson_iter_init_find(&it, parent, "ancestors") && bson_iter_recurse(&it, &a))
        while (bson_iter_next(&a)) {
            char key[16];
            snprintf(key, sizeof key, "%d", i++);
            BSON_APPEND_VALUE(arr, key, bson_iter_value(&a));
        }
}

/* build_ancestors(_id, parent_id). */
static int build_ancestors(md_db *db, const bson_oid_t *id, const bson_oid_t *parent_id,
                           md_error *err)
{
    bson_t *filter = BCON_NEW("_id", BCON_OID(parent_id));
    bson_t *proj = BCON_NEW("name", BCON_INT32(1), "slug", BCON_INT32(1), "ancestors",
                            BCON_INT32(1));
    bson_t parent, arr;
    int rc = pt_find_one(db, AP_CATEGORIES, filter, proj, &parent, err);
    bson_destroy(proj);
    bson_destroy(filter);
    if (rc == 0) {
        ancestors_below(&parent, &arr);
        filter = BCON_NEW("_id", BCON_OID(id));
        bson_t *update = BCON_NEW("$set", "{", "ancestors", BCON_ARRAY(&arr), "}");
        rc = ap_update(db, AP_CATEGORIES, filter, update, false, false, NULL, NULL, NULL, NULL,
                       err);
        bson_destroy(update);
        bson_destroy(filter);
        bson_destroy(&arr);
    }
    bson_destroy(&parent);
    return rc;
}

int ap_category_add(md_db *db, const char *name, const char *slug, const bson_oid_t *parent,
                    bson_oid_t *id, md_error *err)
{
    bson_oid_init(id, NULL);
    bson_t doc = BSON_INITIALIZER;
    BSON_APPEND_OID(&doc, "_id", id);
    BSON_APPEND_UTF8(&doc, "name", name);
    BSON_APPEND_UTF8(&doc, "slug", slug);
    if (parent)
        BSON_APPEND_OID(&doc, "parent", parent);
    else
        BSON_APPEND_NULL(&doc, "parent");
    int rc = ap_insert(db, AP_CATEGORIES, &doc, NULL, err);
    bson_destroy(&doc);
    if (rc == 0 && parent)
        rc = build_ancestors(db, id, parent, err);
    return rc;
}

int ap_category_read(md_db *db, const char *slug, bson_t *doc, md_error *err)
{
    bson_t *filter = BCON_NEW("slug", BCON_UTF8(slug));
    bson_t *proj = BCON_NEW("_id", BCON_INT32(0), "name", BCON_INT32(1), "ancestors.slug",
                            BCON_INT32(1), "ancestors.name", BCON_INT32(1));
    int rc = pt_find_one(db, AP_CATEGORIES, filter, proj, doc, err);
    bson_destroy(proj);
    bson_destroy(filter);
    return rc;
}

/* build_subgraph: every descendant of root, as read once. */
typedef struct subgraph {
    bson_t **nodes; /* pointers: a bson_t may point into itself, so never moved */
    int n, cap;
} subgraph;

static int build_subgraph(md_db *db, const bson_oid_t *root, subgraph *g, md_error *err)
{
    md_collection *c = md_db_get_collection(db, AP_CATEGORIES);
    bson_t *filter = BCON_NEW("ancestors._id", BCON_OID(root));
    bson_t *opts = BCON_NEW("projection", "{", "parent", BCON_INT32(1), "name", BCON_INT32(1),
                            "slug", BCON_INT32(1), "ancestors", BCON_INT32(1), "}");
    md_cursor *cur = md_collection_find_with_opts(c, filter, opts);
    const bson_t *doc;
    int rc = 0;
    while (md_cursor_next(cur, &doc)) {
        if (g->n == g->cap) {
            int cap = g->cap ? 2 * g->cap : 16;
            bson_t **nodes = realloc(g->nodes, (size_t)cap * sizeof *nodes);
            if (!nodes) {
                rc = md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
                break;
            }
            g->nodes = nodes;
            g->cap = cap;
        }
        if (!(g->nodes[g->n] = bson_copy(doc))) {
            rc = md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
            break;
        }
        g->n++;
    }
    if (rc == 0 && md_cursor_error(cur, err))
        rc = MD_ERROR;
    md_cursor_destroy(cur);
    bson_destroy(opts);
    bson_destroy(filter);
    md_collection_destroy(c);
    return rc;
}

static bool oid_field_is(const bson_t *doc, const char *key, const bson_oid_t *oid)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_OID(&it) &&
           bson_oid_equal(bson_iter_oid(&it), oid);
}

/* update_node_and_descendants(nodes_by_parent, node, parent): `node` gets
 * its ancestors below `parent` (both full documents); its children follow
 * with the node as updated. */
static int update_node_and_descendants(md_db *db, subgraph *g, const bson_t *node,
                                       const bson_t *parent, int depth, int64_t *updated,
                                       md_error *err)
{
    bson_iter_t it;
    bson_t arr;
    if (depth > 256)
        return md_error_set(err, MD_ERROR, MD_CODE_GRAPH_CONTAINS_CYCLE,
                            "the category graph contains a cycle");
    if (!bson_iter_init_find(&it, node, "_id") || !BSON_ITER_HOLDS_OID(&it))
        return md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE, "a category without an _id");
    bson_oid_t id;
    bson_oid_copy(bson_iter_oid(&it), &id);
    bson_iter_init_find(&it, parent, "_id");
    ancestors_below(parent, &arr);
    bson_t *filter = BCON_NEW("_id", BCON_OID(&id));
    bson_t *update = BCON_NEW("$set", "{", "ancestors", BCON_ARRAY(&arr), "parent",
                              BCON_OID(bson_iter_oid(&it)), "}");
    int rc = ap_update(db, AP_CATEGORIES, filter, update, false, false, NULL, NULL, NULL, NULL,
                       err);
    bson_destroy(update);
    bson_destroy(filter);
    if (rc == 0)
        (*updated)++;
    /* The node as it is now, for its children. */
    bson_t now = BSON_INITIALIZER;
    bson_iter_init(&it, node);
    while (bson_iter_next(&it))
        if (strcmp(bson_iter_key(&it), "ancestors") != 0)
            BSON_APPEND_VALUE(&now, bson_iter_key(&it), bson_iter_value(&it));
    BSON_APPEND_ARRAY(&now, "ancestors", &arr);
    bson_destroy(&arr);
    for (int i = 0; i < g->n && rc == 0; i++)
        if (oid_field_is(g->nodes[i], "parent", &id))
            rc = update_node_and_descendants(db, g, g->nodes[i], &now, depth + 1, updated,
                                             err);
    bson_destroy(&now);
    return rc;
}

int ap_category_reparent(md_db *db, const bson_oid_t *node, const bson_oid_t *new_parent,
                         int64_t *updated, md_error *err)
{
    int64_t n = 0;
    bson_t *filter = BCON_NEW("_id", BCON_OID(node));
    bson_t *update = BCON_NEW("$set", "{", "parent", BCON_OID(new_parent), "}");
    int64_t matched = 0;
    int rc = ap_update(db, AP_CATEGORIES, filter, update, false, false, NULL, &matched, NULL, NULL,
                       err);
    bson_destroy(update);
    if (rc == 0 && matched == 0)
        rc = md_error_set(err, MD_NOTFOUND, MD_CODE_NO_SUCH_KEY, "no such category");
    bson_t nodedoc, parentdoc;
    bson_init(&nodedoc);
    bson_init(&parentdoc);
    if (rc == 0) {
        bson_destroy(&nodedoc);
        rc = pt_find_one(db, AP_CATEGORIES, filter, NULL, &nodedoc, err);
    }
    bson_destroy(filter);
    if (rc == 0) {
        bson_destroy(&parentdoc);
        filter = BCON_NEW("_id", BCON_OID(new_parent));
        rc = pt_find_one(db, AP_CATEGORIES, filter, NULL, &parentdoc, err);
        bson_destroy(filter);
    }
    subgraph g = {0};
    if (rc == 0 && oid_field_is(&parentdoc, "_id", node))
        rc = md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE, "a category cannot be its own parent");
    if (rc == 0)
        rc = build_subgraph(db, node, &g, err);
    for (int i = 0; i < g.n && rc == 0; i++)
        if (oid_field_is(g.nodes[i], "_id", new_parent))
            rc = md_error_set(err, MD_EINVAL, MD_CODE_GRAPH_CONTAINS_CYCLE,
                              "the new parent is a descendant of the category");
    if (rc == 0)
        rc = update_node_and_descendants(db, &g, &nodedoc, &parentdoc, 0, &n, err);
    for (int i = 0; i < g.n; i++)
        bson_destroy(g.nodes[i]);
    free(g.nodes);
    bson_destroy(&parentdoc);
    bson_destroy(&nodedoc);
    if (updated)
        *updated = n;
    return rc;
}

int ap_category_rename(md_db *db, const bson_oid_t *id, const char *name,
                       int64_t *descendants, md_error *err)
{
    bson_t *filter = BCON_NEW("_id", BCON_OID(id));
    bson_t *update = BCON_NEW("$set", "{", "name", BCON_UTF8(name), "}");
    int64_t matched = 0;
    int rc = ap_update(db, AP_CATEGORIES, filter, update, false, false, NULL, &matched, NULL, NULL,
                       err);
    bson_destroy(update);
    bson_destroy(filter);
    if (rc == 0 && matched == 0)
        rc = md_error_set(err, MD_NOTFOUND, MD_CODE_NO_SUCH_KEY, "no such category");
    if (rc)
        return rc;
    filter = BCON_NEW("ancestors._id", BCON_OID(id));
    update = BCON_NEW("$set", "{", "ancestors.$.name", BCON_UTF8(name), "}");
    rc = ap_update(db, AP_CATEGORIES, filter, update, false, true, NULL, NULL, descendants, NULL,
                   err);
    bson_destroy(update);
    bson_destroy(filter);
    return rc;
}

/* ---- the measurement ----------------------------------------------------------- */

/* A tree of `fan` children per node, `depth` levels below one root. */
static int build_tree(md_db *db, const bson_oid_t *parent, const char *prefix, int fan,
                      int depth, int *count, md_error *err)
{
    for (int i = 0; i < fan; i++) {
        char slug[128];
        bson_oid_t id;
        snprintf(slug, sizeof slug, "%s-%d", prefix, i);
        int rc = ap_category_add(db, slug, slug, parent, &id, err);
        if (rc)
            return rc;
        (*count)++;
        if (depth > 1 && (rc = build_tree(db, &id, slug, fan, depth - 1, count, err)) != 0)
            return rc;
    }
    return 0;
}

static int category_measure(md_db *db, const ap_args *args, ap_result *r, md_error *err)
{
    const char *engine = args->engine;
    bool quick = args->quick;
    int fan = quick ? 4 : 6, count = 0;
    bson_oid_t ragtime, bop, swing, modal;
    int rc = ap_category_create_indexes(db, err);
    if (rc || (rc = ap_category_add(db, "Ragtime", "ragtime", NULL, &ragtime, err)) ||
        (rc = ap_category_add(db, "Bop", "bop", &ragtime, &bop, err)) ||
        (rc = ap_category_add(db, "Modal Jazz", "modal-jazz", &bop, &modal, err)) ||
        (rc = build_tree(db, &modal, "modal", fan, 3, &count, err)) ||
        (rc = ap_category_add(db, "Swing", "swing", &ragtime, &swing, err)))
        return rc;
    ap_row_add(r, count + 4, "docs", "categories (a %d-ary tree 3 deep under Modal Jazz)", fan);
    /* The read: one indexed document, breadcrumbs included. */
    ap_plan read;
    bson_t *f = BCON_NEW("slug", "modal-0-1-2");
    rc = ap_explain_find(db, AP_CATEGORIES, f, NULL, NULL, &read, err);
    bson_destroy(f);
    bson_t crumbs;
    if (rc == 0)
        rc = ap_category_read(db, "modal-0-1-2", &crumbs, err);
    if (rc) {
        bson_destroy(&crumbs);
        return rc;
    }
    bson_iter_t it, a;
    int depth = 0;
    if (bson_iter_init_find(&it, &crumbs, "ancestors") && bson_iter_recurse(&it, &a))
        while (bson_iter_next(&a))
            depth++;
    bson_destroy(&crumbs);
    ap_row_add(r, (double)read.docs_examined, "docs", "read with breadcrumbs: documents examined (index %s)",
               read.index);
    ap_row_add(r, depth, "", "read with breadcrumbs: ancestors in the one document");

    ap_counters c0, c1, c2;
    int64_t moved = 0, renamed = 0;
    double t = ap_now_s();
    if ((rc = ap_counters_read(db, &c0, err)) ||
        (rc = ap_category_reparent(db, &bop, &swing, &moved, err)) ||
        (rc = ap_counters_read(db, &c1, err)))
        return rc;
    double reparent_ms = (ap_now_s() - t) * 1e3;
    t = ap_now_s();
    if ((rc = ap_category_rename(db, &bop, "BeBop", &renamed, err)) ||
        (rc = ap_counters_read(db, &c2, err)))
        return rc;
    double rename_ms = (ap_now_s() - t) * 1e3;
    ap_counters d1 = ap_counters_diff(&c0, &c1), d2 = ap_counters_diff(&c1, &c2);
    ap_row_add(r, (double)moved, "docs", "re-parent Bop under Swing: documents rewritten");
    ap_row_add(r, (double)d1.bytes_written, "B", "re-parent: bytes written");
    ap_row_add(r, (double)d1.moves, "", "re-parent: moves");
    ap_row_add(r, reparent_ms, "ms", "re-parent: time");
    ap_row_add(r, (double)renamed, "docs", "rename Bop -> BeBop: descendants updated (multi)");
    ap_row_add(r, (double)d2.bytes_written, "B", "rename: bytes written");
    ap_row_add(r, (double)d2.moves, "", "rename: moves");
    ap_row_add(r, rename_ms, "ms", "rename: time");

    /* modal-0-1-2 < modal-0-1 < modal-0 < Modal Jazz < Bop < Ragtime */
    ap_claim_set(r, 0, read.docs_examined == 1 && depth == 5 &&
                           strcmp(read.index, "slug_1") == 0,
                 "one document examined through %s; it carries all %d ancestors",
                 read.index, depth);
    ap_claim_set(r, 1, moved == count + 2 && renamed == count + 1,
                 "the re-parent rewrote %lld documents (Bop and its %d descendants), the "
                 "rename %lld descendants in one multi update",
                 (long long)moved, count + 1, (long long)renamed);
    (void)engine;
    return 0;
}

const ap_usecase ap_usecase_category = {
    .name = "ap_category",
    .chapter = "Ch.5 Ecommerce",
    .title = "Category Hierarchy",
    .pages = "pp.84-91",
    .demonstrates = "embedded ancestors for one-document breadcrumbs; re-parenting and "
                    "renaming rewrite the subtree",
    .nclaims = 2,
    .claims = {
        {"A category page with its breadcrumbs is one indexed read", NULL},
        {"Re-parenting or renaming touches every descendant (the price of the fast read: "
         "updates of the whole subtree, the rename with positional $ and multi)", NULL},
    },
    .measure = category_measure,
};
