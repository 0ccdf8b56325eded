/*
 * matpath.c -- 5.4 Materialized Path Category Hierarchy: a product
 * catalog's category tree where each category stores its own path and its
 * parent's, file-system style, so a subtree is a prefix query.
 *
 *   category  {_id, name: "embedded", parent: "/electronics",
 *              category: "/electronics/embedded"}   (parent "/" at the top)
 *   product   {_id, name: "Arduino", cost: 125, currency: "USD",
 *              categories: ["/electronics/embedded"]}
 *
 * The operations are the book's (collections "categories" and "products";
 * the book's db "catalog" is the md_db itself):
 *
 *   direct children     categories.find({parent: /^\/electronics$/})   Ex 1
 *   subtree             categories.find({parent: /^\/electronics/})    Ex 2
 *   products            products.find({categories: "/electronics/arduino"})
 *                                                                      Ex 3
 *   ancestors           categories.find({category: {$in: ["/",
 *                         "/electronics", "/electronics/embedded"]}})  Ex 4
 *   products of the     products.find({categories: {$in: <the category
 *   children / subtree    fields of Ex 1's / Ex 2's result>}})        Ex 4-5
 *   covered             the same two category queries projected on
 *                       {_id: 0, parent: 1, name: 1}                 Ex 10-11
 *   indexes             categories {category: 1}, categories {parent: 1},
 *                       products {categories: 1}                    Ex 6-8;
 *                       categories {parent: 1, name: 1} (covered)    Ex 9
 *
 * The regular expressions are anchored and case-sensitive, so the planner
 * turns them into index bounds on parent (the book's Notes say "case
 * insensitive"; it means case-sensitive: digest section 7 item 10).  A path
 * is escaped before it goes into a pattern, so "." or "+" in a category
 * name match only themselves.
 *
 * The scenarios are the simulator's retrieve_direct_child_categories and
 * retrieve_entire_sub_tree_by_category: setup builds a tree five wide and
 * five deep (3905 categories; four deep, 780, when quick) and 100 products,
 * each in one category; a user picks a random category and reads its
 * direct children or its subtree.  A user fails unless exactly the
 * expected categories come back; the check reads every category and
 * product back.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "patterns.h"

#define CATEGORIES_COLL "categories"
#define PRODUCTS_COLL "products"

/* ---- operations ---------------------------------------------------------- */

int pt_matpath_create_indexes(md_db *db, md_error *err)
{
    bson_t *category = BCON_NEW("category", BCON_INT32(1));
    bson_t *parent = BCON_NEW("parent", BCON_INT32(1));
    bson_t *categories = BCON_NEW("categories", BCON_INT32(1));
    int rc = pt_ensure_index(db, CATEGORIES_COLL, category, NULL, err);
    if (!rc)
        rc = pt_ensure_index(db, CATEGORIES_COLL, parent, NULL, err);
    if (!rc)
        rc = pt_ensure_index(db, PRODUCTS_COLL, categories, NULL, err);
    bson_destroy(category);
    bson_destroy(parent);
    bson_destroy(categories);
    return rc;
}

int pt_matpath_create_covered_index(md_db *db, md_error *err)
{
    bson_t *keys = BCON_NEW("parent", BCON_INT32(1), "name", BCON_INT32(1));
    int rc = pt_ensure_index(db, CATEGORIES_COLL, keys, NULL, err);
    bson_destroy(keys);
    return rc;
}

void pt_matpath_parent(const char *path, char *parent, size_t size)
{
    const char *slash = strrchr(path, '/');
    size_t n = slash ? (size_t)(slash - path) : 0;
    if (n == 0) {
        snprintf(parent, size, "/");
        return;
    }
    snprintf(parent, size, "%.*s", (int)n, path);
}

/* The first writeError of an ok reply as an error, else 0. */
static int write_error(const bson_t *reply, md_error *err)
{
    bson_iter_t it;
    if (!bson_iter_init(&it, reply) ||
        !bson_iter_find_descendant(&it, "writeErrors.0.code", &it))
        return 0;
    int code = (int)bson_iter_as_int64(&it);
    const char *msg = "write error";
    if (bson_iter_init(&it, reply) && bson_iter_find_descendant(&it, "writeErrors.0.errmsg", &it))
        msg = bson_iter_utf8(&it, NULL);
    return md_error_set(err, code == MD_CODE_DUPLICATE_KEY ? MD_EDUPKEY : MD_ERROR, code, "%s",
                        msg);
}

static int insert_one(md_db *db, const char *coll, const bson_t *doc, md_error *err)
{
    bson_t *cmd = BCON_NEW("insert", BCON_UTF8(coll), "documents", "[", BCON_DOCUMENT(doc), "]");
    bson_t reply;
    int rc = md_db_command(db, cmd, &reply, err);
    if (!rc)
        rc = write_error(&reply, err);
    bson_destroy(&reply);
    bson_destroy(cmd);
    return rc;
}

/* {_id, name, category, parent} as `doc` (initialized here). */
static void category_doc(bson_t *doc, const bson_value_t *id, const char *name, const char *path)
{
    char parent[1024];
    pt_matpath_parent(path, parent, sizeof parent);
    bson_init(doc);
    if (id)
        BSON_APPEND_VALUE(doc, "_id", id);
    BSON_APPEND_UTF8(doc, "name", name);
    BSON_APPEND_UTF8(doc, "parent", parent);
    BSON_APPEND_UTF8(doc, "category", path);
}

int pt_matpath_add_category(md_db *db, const bson_value_t *id, const char *name,
                            const char *path, md_error *err)
{
    bson_t doc;
    category_doc(&doc, id, name, path);
    int rc = insert_one(db, CATEGORIES_COLL, &doc, err);
    bson_destroy(&doc);
    return rc;
}

/* {_id, name, cost, currency, categories} as `doc` (initialized here). */
static void product_doc(bson_t *doc, const bson_value_t *id, const char *name, double cost,
                        const char *currency, const char *const *categories, int n)
{
    bson_t arr;
    char idx[16];
    const char *k;
    bson_init(doc);
    if (id)
        BSON_APPEND_VALUE(doc, "_id", id);
    BSON_APPEND_UTF8(doc, "name", name);
    if (cost == (double)(int32_t)cost)
        BSON_APPEND_INT32(doc, "cost", (int32_t)cost);
    else
        BSON_APPEND_DOUBLE(doc, "cost", cost);
    BSON_APPEND_UTF8(doc, "currency", currency);
    BSON_APPEND_ARRAY_BEGIN(doc, "categories", &arr);
    for (int i = 0; i < n; i++) {
        bson_uint32_to_string((uint32_t)i, &k, idx, sizeof idx);
        bson_append_utf8(&arr, k, -1, categories[i], -1);
    }
    bson_append_array_end(doc, &arr);
}

int pt_matpath_add_product(md_db *db, const bson_value_t *id, const char *name, double cost,
                           const char *currency, const char *const *categories, int n,
                           md_error *err)
{
    bson_t doc;
    product_doc(&doc, id, name, cost, currency, categories, n);
    int rc = insert_one(db, PRODUCTS_COLL, &doc, err);
    bson_destroy(&doc);
    return rc;
}

/* "^<path escaped>" plus "$" when `exact`: the book's /^\/electronics$/ and
 * /^\/electronics/ for "/electronics".  Caller frees. */
static char *path_regex(const char *path, bool exact)
{
    size_t n = strlen(path);
    char *re = malloc(2 * n + 3), *p = re;
    if (!re)
        return NULL;
    *p++ = '^';
    for (const char *s = path; *s; s++) {
        if (strchr(".[]()*+?{}\\^$|", *s))
            *p++ = '\\';
        *p++ = *s;
    }
    if (exact)
        *p++ = '$';
    *p = '\0';
    return re;
}

static md_cursor *find(md_db *db, const char *coll, const bson_t *filter, const bson_t *opts)
{
    md_collection *c = md_db_get_collection(db, coll);
    md_cursor *cur = md_collection_find_with_opts(c, filter, opts);
    md_collection_destroy(c);
    return cur;
}

/* categories.find({parent: <path regex>}), projected for the covered
 * queries of Ex 10-11. */
static md_cursor *find_by_parent(md_db *db, const char *path, bool exact, bool covered)
{
    char *re = path_regex(path, exact);
    bson_t *filter = BCON_NEW("parent", BCON_REGEX(re ? re : "^$", ""));
    bson_t *opts = covered ? BCON_NEW("projection", "{", "_id", BCON_INT32(0), "parent",
                                      BCON_INT32(1), "name", BCON_INT32(1), "}")
                           : NULL;
    md_cursor *cur = find(db, CATEGORIES_COLL, filter, opts);
    if (opts)
        bson_destroy(opts);
    bson_destroy(filter);
    free(re);
    return cur;
}

md_cursor *pt_matpath_direct_children(md_db *db, const char *path)
{
    return find_by_parent(db, path, true, false);
}

md_cursor *pt_matpath_subtree(md_db *db, const char *path)
{
    return find_by_parent(db, path, false, false);
}

md_cursor *pt_matpath_direct_children_covered(md_db *db, const char *path)
{
    return find_by_parent(db, path, true, true);
}

md_cursor *pt_matpath_subtree_covered(md_db *db, const char *path)
{
    return find_by_parent(db, path, false, true);
}

md_cursor *pt_matpath_products(md_db *db, const char *path)
{
    bson_t *filter = BCON_NEW("categories", BCON_UTF8(path));
    md_cursor *cur = find(db, PRODUCTS_COLL, filter, NULL);
    bson_destroy(filter);
    return cur;
}

/*
 * Ex 4's paths for "/electronics/embedded/arduino": "/", "/electronics",
 * "/electronics/embedded".  (The book's loop also yields "" once all
 * elements are popped; it matches nothing, and the book's stated result
 * leaves it out, as we do.)  The book then queries `name`, which holds a
 * category's last element ("embedded"), never a path; the paths are in
 * `category`, so that is the field queried here (digest 5.4 notes this).
 */
md_cursor *pt_matpath_ancestors(md_db *db, const char *path)
{
    bson_t filter = BSON_INITIALIZER, in, arr;
    char *buf = strdup(path);
    char idx[16];
    const char *k;
    uint32_t n = 0;
    BSON_APPEND_DOCUMENT_BEGIN(&filter, "category", &in);
    BSON_APPEND_ARRAY_BEGIN(&in, "$in", &arr);
    bson_uint32_to_string(n++, &k, idx, sizeof idx);
    bson_append_utf8(&arr, k, -1, "/", -1);
    /* the prefixes of path ending before each of its later slashes, from
     * the root down */
    for (char *s = buf ? buf + 1 : NULL; s && (s = strchr(s, '/')) != NULL; s++) {
        bson_uint32_to_string(n++, &k, idx, sizeof idx);
        bson_append_utf8(&arr, k, -1, buf, (int)(s - buf));
    }
    bson_append_array_end(&in, &arr);
    bson_append_document_end(&filter, &in);
    md_cursor *cur = find(db, CATEGORIES_COLL, &filter, NULL);
    bson_destroy(&filter);
    free(buf);
    return cur;
}

/* products.find({categories: {$in: <category of each document of cats>}}) */
static int products_in(md_db *db, md_cursor *cats, md_cursor **out, md_error *err)
{
    bson_t filter = BSON_INITIALIZER, in, arr;
    const bson_t *doc;
    bson_iter_t it;
    char idx[16];
    const char *k;
    uint32_t n = 0;
    *out = NULL;
    BSON_APPEND_DOCUMENT_BEGIN(&filter, "categories", &in);
    BSON_APPEND_ARRAY_BEGIN(&in, "$in", &arr);
    while (md_cursor_next(cats, &doc))
        if (bson_iter_init_find(&it, doc, "category") && BSON_ITER_HOLDS_UTF8(&it)) {
            bson_uint32_to_string(n++, &k, idx, sizeof idx);
            bson_append_iter(&arr, k, -1, &it);
        }
    bson_append_array_end(&in, &arr);
    bson_append_document_end(&filter, &in);
    int rc = md_cursor_error(cats, err) ? MD_ERROR : 0;
    if (!rc)
        *out = find(db, PRODUCTS_COLL, &filter, NULL);
    bson_destroy(&filter);
    md_cursor_destroy(cats);
    return rc;
}

int pt_matpath_products_of_children(md_db *db, const char *path, md_cursor **out,
                                    md_error *err)
{
    return products_in(db, pt_matpath_direct_children(db, path), out, err);
}

int pt_matpath_products_of_subtree(md_db *db, const char *path, md_cursor **out, md_error *err)
{
    return products_in(db, pt_matpath_subtree(db, path), out, err);
}

/* ---- the scenarios: retrieve_direct_child_categories and
 *      retrieve_entire_sub_tree_by_category ------------------------------ */

#define MP_WIDTH 5        /* categories per parent, every level */
#define MP_LEVELS 5       /* the simulator's treeStructure */
#define MP_LEVELS_QUICK 4
#define MP_PRODUCTS 100   /* the scripts' numberOfProducts */
#define MP_BATCH 500

typedef struct mp_category {
    char path[64];
    int level; /* 0 at the top */
} mp_category;

/* Read-only after setup. */
typedef struct matpath_state {
    mp_category *cats; /* by _id, in creation order */
    int ncats, levels, nproducts;
    int64_t children[MP_LEVELS + 1]; /* expected direct children per level */
    int64_t subtree[MP_LEVELS + 1];  /* expected subtree size per level */
} matpath_state;

/* Category i's name, fixed width so that no name is a prefix of another
 * (the simulator's unique words): with "c1" and "c10" side by side, the
 * subtree regex /^\/c1/ would also match the children of "/c10", as the
 * book's own regular expression would. */
static void mp_name(int i, char name[16])
{
    snprintf(name, 16, "c%05d", i);
}

/* Depth-first, as the simulator's createCategories recursion names them. */
static void mp_build(matpath_state *s, const char *parent, int level)
{
    if (level >= s->levels)
        return;
    for (int w = 0; w < MP_WIDTH; w++) {
        int i = s->ncats++;
        char name[16];
        mp_name(i, name);
        snprintf(s->cats[i].path, sizeof s->cats[i].path, "%s/%s", parent, name);
        s->cats[i].level = level;
        mp_build(s, s->cats[i].path, level + 1);
    }
}

/* Insert the documents of `coll` built by `fill(s, i, doc)` for i in
 * [from, to), in one insert command. */
static int insert_range(md_db *db, const char *coll, matpath_state *s, int from, int to,
                        void (*fill)(matpath_state *, int, bson_t *), md_error *err)
{
    bson_t cmd = BSON_INITIALIZER, docs, doc, reply;
    char idx[16];
    const char *k;
    BSON_APPEND_UTF8(&cmd, "insert", coll);
    BSON_APPEND_ARRAY_BEGIN(&cmd, "documents", &docs);
    for (int i = from; i < to; i++) {
        fill(s, i, &doc);
        bson_uint32_to_string((uint32_t)(i - from), &k, idx, sizeof idx);
        bson_append_document(&docs, k, -1, &doc);
        bson_destroy(&doc);
    }
    bson_append_array_end(&cmd, &docs);
    int rc = md_db_command(db, &cmd, &reply, err);
    if (!rc)
        rc = write_error(&reply, err);
    bson_destroy(&reply);
    bson_destroy(&cmd);
    return rc;
}

static void fill_category(matpath_state *s, int i, bson_t *doc)
{
    char name[16];
    bson_value_t id = {.value_type = BSON_TYPE_INT32, .value.v_int32 = i};
    mp_name(i, name);
    category_doc(doc, &id, name, s->cats[i].path);
}

/* Product i: the simulator's [i, words[i], round(100000 * random()), 'usd',
 * [category i % ncats]] (the cost from i, so the check knows it). */
static void fill_product(matpath_state *s, int i, bson_t *doc)
{
    char name[32];
    const char *cat = s->cats[i % s->ncats].path;
    bson_value_t id = {.value_type = BSON_TYPE_INT32, .value.v_int32 = i};
    snprintf(name, sizeof name, "product_%d", i);
    product_doc(doc, &id, name, (double)((i * 7919) % 100000), "usd", &cat, 1);
}

static int matpath_setup(md_db *db, const pt_setup_args *a, void **state, md_error *err)
{
    *state = NULL;
    matpath_state *s = calloc(1, sizeof *s);
    int total = 0, width = 1;
    if (!s)
        return md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
    s->levels = a->quick ? MP_LEVELS_QUICK : MP_LEVELS;
    s->nproducts = MP_PRODUCTS;
    for (int l = 0; l < s->levels; l++)
        total += (width *= MP_WIDTH);
    for (int l = s->levels - 1; l >= 0; l--) {
        s->children[l] = l + 1 < s->levels ? MP_WIDTH : 0;
        s->subtree[l] = s->children[l] * (1 + s->subtree[l + 1]);
    }
    s->cats = calloc((size_t)total, sizeof *s->cats);
    if (!s->cats) {
        free(s);
        return md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
    }
    mp_build(s, "", 0);
    int rc = pt_drop_if_exists(db, CATEGORIES_COLL, err);
    if (!rc)
        rc = pt_drop_if_exists(db, PRODUCTS_COLL, err);
    if (!rc)
        rc = pt_matpath_create_indexes(db, err);
    for (int i = 0; !rc && i < s->ncats; i += MP_BATCH)
        rc = insert_range(db, CATEGORIES_COLL, s, i,
                          i + MP_BATCH < s->ncats ? i + MP_BATCH : s->ncats, fill_category, err);
    if (!rc)
        rc = insert_range(db, PRODUCTS_COLL, s, 0, s->nproducts, fill_product, err);
    if (rc) {
        free(s->cats);
        free(s);
        return rc;
    }
    *state = s;
    return 0;
}

static void matpath_destroy(void *state)
{
    matpath_state *s = state;
    if (s)
        free(s->cats);
    free(s);
}

/* Read the whole result of a user's query; it must be `want` categories,
 * each with a parent inside `path` (equal to it when `exact`). */
static int read_categories(md_cursor *cur, const char *path, bool exact, int64_t want,
                           md_error *err)
{
    const bson_t *doc;
    bson_iter_t it;
    int64_t n = 0, stray = 0;
    size_t len = strlen(path);
    while (md_cursor_next(cur, &doc)) {
        n++;
        const char *parent = bson_iter_init_find(&it, doc, "parent") &&
                                     BSON_ITER_HOLDS_UTF8(&it)
                                 ? bson_iter_utf8(&it, NULL)
                                 : "";
        if (exact ? strcmp(parent, path) != 0 : strncmp(parent, path, len) != 0)
            stray++;
    }
    int rc = md_cursor_error(cur, err) ? MD_ERROR : 0;
    if (!rc && (n != want || stray))
        rc = md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR,
                          "%s of %s: %lld categories (%lld outside it), want %lld",
                          exact ? "children" : "subtree", path, (long long)n, (long long)stray,
                          (long long)want);
    md_cursor_destroy(cur);
    return rc;
}

/* A category chosen uniformly, as the simulator's categories[round(n *
 * random() + 1) % n] is (nearly). */
static const mp_category *mp_pick(pt_user *u)
{
    matpath_state *s = u->state;
    return &s->cats[pt_rand_below(u, (uint64_t)s->ncats)];
}

static int matpath_run_children(pt_user *u, md_error *err)
{
    matpath_state *s = u->state;
    const mp_category *c = mp_pick(u);
    return read_categories(pt_matpath_direct_children(u->db, c->path), c->path, true,
                           s->children[c->level], err);
}

static int matpath_run_subtree(pt_user *u, md_error *err)
{
    matpath_state *s = u->state;
    const mp_category *c = mp_pick(u);
    return read_categories(pt_matpath_subtree(u->db, c->path), c->path, false,
                           s->subtree[c->level], err);
}

/* Every document of `coll` equals fill(s, _id) and every _id below `n` is
 * there once. */
static int check_coll(md_db *db, matpath_state *s, const char *coll, int n,
                      void (*fill)(matpath_state *, int, bson_t *), md_error *err)
{
    bool *seen = calloc((size_t)n + 1, sizeof *seen);
    if (!seen)
        return md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
    md_cursor *cur = find(db, coll, NULL, NULL);
    const bson_t *doc;
    bson_iter_t it;
    int rc = 0;
    while (!rc && md_cursor_next(cur, &doc)) {
        int i = -1;
        if (bson_iter_init_find(&it, doc, "_id") && BSON_ITER_HOLDS_INT32(&it))
            i = bson_iter_int32(&it);
        bson_t want;
        bool ok = i >= 0 && i < n && !seen[i];
        if (ok) {
            fill(s, i, &want);
            ok = bson_equal(&want, doc);
            bson_destroy(&want);
        }
        if (!ok)
            rc = md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR,
                              "%s %d is not what setup wrote", coll, i);
        else
            seen[i] = true;
    }
    if (!rc && md_cursor_error(cur, err))
        rc = MD_ERROR;
    for (int i = 0; !rc && i < n; i++)
        if (!seen[i])
            rc = md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR, "%s %d is lost", coll, i);
    md_cursor_destroy(cur);
    free(seen);
    return rc;
}

static int matpath_check(md_db *db, void *state, md_error *err)
{
    matpath_state *s = state;
    int rc = check_coll(db, s, CATEGORIES_COLL, s->ncats, fill_category, err);
    if (!rc)
        rc = check_coll(db, s, PRODUCTS_COLL, s->nproducts, fill_product, err);
    return rc;
}

static const pt_scenario matpath_children = {
    .name = "matpath_direct_children",
    .title = "Direct Category Children",
    .script = "examples/scripts/single_or_replset/materialized_path_category_hierarchy/"
              "retrieve_direct_child_categories_scenario.js",
    .nops = 1,
    .ops = {
        {.name = "direct children",
         .users = 1000,
         .decides = true,
         .run = matpath_run_children,
         .book_mmap = {31.773, 0.954, 0.357, 1.162, 1.630, 1.998, 0.394, 7.196},
         .book_wt = {31.187, 0.998, 0.417, 1.187, 1.874, 2.247, 0.399, 7.093}},
    },
    .setup = matpath_setup,
    .check = matpath_check,
    .destroy = matpath_destroy,
};

static const pt_scenario matpath_subtree = {
    .name = "matpath_subtree",
    .title = "Category Subtree",
    .script = "examples/scripts/single_or_replset/materialized_path_category_hierarchy/"
              "retrieve_entire_sub_tree_by_category_scenario.js",
    .nops = 1,
    .ops = {
        {.name = "category subtree",
         .users = 1000,
         .decides = true,
         .run = matpath_run_subtree,
         .book_mmap = {31.617, 0.963, 0.413, 1.159, 1.669, 2.104, 0.379, 8.818},
         .book_wt = {30.584, 0.992, 0.495, 1.183, 1.886, 2.386, 0.394, 19.589}},
    },
    .setup = matpath_setup,
    .check = matpath_check,
    .destroy = matpath_destroy,
};

const pt_pattern pt_pattern_matpath = {
    .name = "matpath",
    .title = "Materialized Path Category Hierarchy",
    .section = "5.4",
    .book_winner = "tie",
    .book_reason = "\"As this is a read only workload the two storage engines are close in "
                   "performance for the amount of load we applied\"",
    .nscenarios = 2,
    .scenarios = {&matpath_children, &matpath_subtree},
};
