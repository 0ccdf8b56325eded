/*
 * test_matpath.c -- 5.4 Materialized Path Category Hierarchy
 * (patterns/matpath.c) on every engine: the category queries (direct
 * children, subtree, ancestors) and the product queries on a small catalog,
 * the book's indexes, the plans (the anchored case-sensitive regex is an
 * IXSCAN over parent_1 with prefix bounds; a case-insensitive one is not;
 * the covered queries), and both scenarios from several threads with their
 * check.
 */
#include "pt_test_util.h"

static void add_category(ptt_db *t, const char *path)
{
    md_error err;
    const char *name = strrchr(path, '/') + 1;
    cr_assert_eq(pt_matpath_add_category(t->db, NULL, name, path, &err), 0, "[%s] %s: %s",
                 t->engine, path, err.message);
}

static void add_product(ptt_db *t, int32_t id, const char *name, const char *category)
{
    md_error err;
    bson_value_t v = {.value_type = BSON_TYPE_INT32, .value.v_int32 = id};
    cr_assert_eq(pt_matpath_add_product(t->db, &v, name, 125, "USD", &category, 1, &err), 0,
                 "[%s] %s", t->engine, err.message);
}

/* A small catalog: two roots, a three-level branch, and a name with regex
 * metacharacters beside one that a bare "." would match. */
static void catalog(ptt_db *t)
{
    md_error err;
    cr_assert_eq(pt_matpath_create_indexes(t->db, &err), 0, "%s", err.message);
    const char *paths[] = {"/electronics", "/electronics/embedded", "/electronics/monitors",
                           "/electronics/embedded/arduino", "/electronics/embedded/raspberry",
                           "/electronics/monitors/lg", "/electronics/monitors/lg/led",
                           "/books", "/books/c++", "/books/c++/templates", "/books/cxx",
                           "/books/cxx/stl"};
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++)
        add_category(t, paths[i]);
    add_product(t, 1, "Arduino", "/electronics/embedded/arduino");
    add_product(t, 2, "Raspberry Pi", "/electronics/embedded/raspberry");
    add_product(t, 3, "LG 27\"", "/electronics/monitors/lg/led");
    add_product(t, 4, "Modern C++", "/books/c++/templates");
    add_product(t, 5, "Some board", "/electronics/embedded");
}

/* The sorted, comma-joined values of `field` in a cursor's documents
 * (destroys the cursor). */
static char *values(md_cursor *cur, const char *field)
{
    char *items[64];
    int n = 0;
    const bson_t *doc;
    bson_iter_t it;
    while (md_cursor_next(cur, &doc) && n < 64) {
        if (bson_iter_init_find(&it, doc, field) && BSON_ITER_HOLDS_UTF8(&it))
            items[n++] = strdup(bson_iter_utf8(&it, NULL));
        else
            items[n++] = strdup("?");
    }
    md_error err;
    cr_assert(!md_cursor_error(cur, &err), "%s", err.message);
    md_cursor_destroy(cur);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && strcmp(items[j - 1], items[j]) > 0; j--) {
            char *x = items[j];
            items[j] = items[j - 1];
            items[j - 1] = x;
        }
    static char out[4096];
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (i)
            strcat(out, ",");
        strncat(out, items[i], sizeof out - strlen(out) - 2);
        free(items[i]);
    }
    return out;
}

Test(pt_matpath, category_and_product_queries)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        catalog(&t);
        bson_t *r = PTT_OK(&t, "{\"find\": \"categories\", \"filter\": {\"name\": \"embedded\"}}");
        cr_assert_str_eq(ptt_str(r, "cursor.firstBatch.0.parent"), "/electronics");
        cr_assert_str_eq(ptt_str(r, "cursor.firstBatch.0.category"), "/electronics/embedded");
        bson_destroy(r);
        r = PTT_OK(&t, "{\"find\": \"categories\", \"filter\": {\"name\": \"books\"}}");
        cr_assert_str_eq(ptt_str(r, "cursor.firstBatch.0.parent"), "/");
        bson_destroy(r);

        cr_assert_str_eq(values(pt_matpath_direct_children(t.db, "/electronics"), "category"),
                         "/electronics/embedded,/electronics/monitors");
        cr_assert_str_eq(values(pt_matpath_subtree(t.db, "/electronics"), "category"),
                         "/electronics/embedded,/electronics/embedded/arduino,"
                         "/electronics/embedded/raspberry,/electronics/monitors,"
                         "/electronics/monitors/lg,/electronics/monitors/lg/led");
        cr_assert_str_eq(values(pt_matpath_direct_children(t.db, "/"), "category"),
                         "/books,/electronics");
        cr_assert_str_eq(values(pt_matpath_direct_children(t.db, "/electronics/monitors/lg/led"),
                                "category"), "");
        /* "+" is itself, not a repetition: /^\/books\/c\+\+/ */
        cr_assert_str_eq(values(pt_matpath_subtree(t.db, "/books/c++"), "category"),
                         "/books/c++/templates");
        cr_assert_str_eq(values(pt_matpath_direct_children(t.db, "/books/cxx"), "category"),
                         "/books/cxx/stl");

        cr_assert_str_eq(values(pt_matpath_products(t.db, "/electronics/embedded/arduino"),
                                "name"), "Arduino");
        cr_assert_str_eq(values(pt_matpath_ancestors(t.db, "/electronics/embedded/arduino"),
                                "category"), "/electronics,/electronics/embedded");
        cr_assert_str_eq(values(pt_matpath_ancestors(t.db, "/books"), "category"), "");

        md_cursor *cur;
        cr_assert_eq(pt_matpath_products_of_children(t.db, "/electronics/embedded", &cur, &err), 0);
        cr_assert_str_eq(values(cur, "name"), "Arduino,Raspberry Pi");
        cr_assert_eq(pt_matpath_products_of_children(t.db, "/electronics", &cur, &err), 0);
        cr_assert_str_eq(values(cur, "name"), "Some board", "[%s]", t.engine);
        cr_assert_eq(pt_matpath_products_of_subtree(t.db, "/electronics", &cur, &err), 0);
        cr_assert_str_eq(values(cur, "name"), "Arduino,LG 27\",Raspberry Pi,Some board");
        cr_assert_eq(pt_matpath_products_of_subtree(t.db, "/books/cxx", &cur, &err), 0);
        cr_assert_str_eq(values(cur, "name"), "");
    }
}

Test(pt_matpath, parent_of_a_path)
{
    char p[64];
    pt_matpath_parent("/electronics/embedded", p, sizeof p);
    cr_assert_str_eq(p, "/electronics");
    pt_matpath_parent("/electronics", p, sizeof p);
    cr_assert_str_eq(p, "/");
    pt_matpath_parent("/a/b/c", p, sizeof p);
    cr_assert_str_eq(p, "/a/b");
}

/* The names of the indexes of `coll`, comma-joined in listIndexes order. */
static char *index_names(ptt_db *t, const char *coll)
{
    static char out[512];
    bson_t *r = PTT_OK(t, "{\"listIndexes\": \"%s\"}", coll);
    bson_iter_t it, arr;
    out[0] = '\0';
    cr_assert(ptt_find(r, "cursor.firstBatch", &it) && bson_iter_recurse(&it, &arr));
    while (bson_iter_next(&arr)) {
        bson_iter_t n;
        if (bson_iter_recurse(&arr, &n) && bson_iter_find(&n, "name")) {
            if (out[0])
                strcat(out, ",");
            strncat(out, bson_iter_utf8(&n, NULL), sizeof out - strlen(out) - 2);
        }
    }
    bson_destroy(r);
    return out;
}

Test(pt_matpath, indexes_are_the_books)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        cr_assert_eq(pt_matpath_create_indexes(t.db, &err), 0, "%s", err.message);
        cr_assert_str_eq(index_names(&t, "categories"), "_id_,category_1,parent_1");
        cr_assert_str_eq(index_names(&t, "products"), "_id_,categories_1");
        cr_assert_eq(pt_matpath_create_covered_index(t.db, &err), 0, "%s", err.message);
        cr_assert_str_eq(index_names(&t, "categories"), "_id_,category_1,parent_1,parent_1_name_1");
    }
}

/* The IXSCAN of the winning plan of `inner` (false if there is none). */
static bool ixscan(ptt_db *t, const char *inner, bson_t *ix, char **json)
{
    bson_t *x = PTT_OK(t, "{\"explain\": %s, \"verbosity\": \"executionStats\"}", inner);
    *json = bson_as_relaxed_extended_json(x, NULL);
    bool found = ptt_plan_stage(x, "IXSCAN", ix);
    bson_destroy(x);
    return found;
}

Test(pt_matpath, anchored_case_sensitive_regex_uses_the_parent_index)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        catalog(&t);
        bson_t ix;
        char *json;
        /* Ex 2: /^\/electronics/ -- prefix bounds on parent_1 */
        cr_assert(ixscan(&t, "{\"find\": \"categories\", \"filter\": {\"parent\": {\"$regex\": "
                             "\"^/electronics\"}}}", &ix, &json),
                  "[%s] no IXSCAN: %s", t.engine, json);
        cr_assert_str_eq(ptt_str(&ix, "indexName"), "parent_1", "[%s] %s", t.engine, json);
        cr_assert_str_eq(ptt_str(&ix, "indexBounds.parent.0"),
                         "[\"/electronics\", \"/electronict\")", "[%s] %s", t.engine, json);
        bson_destroy(&ix);
        bson_free(json);
        /* Ex 1: /^\/electronics$/ -- the same prefix bounds */
        cr_assert(ixscan(&t, "{\"find\": \"categories\", \"filter\": {\"parent\": {\"$regex\": "
                             "\"^/electronics$\"}}}", &ix, &json),
                  "[%s] no IXSCAN: %s", t.engine, json);
        cr_assert_str_eq(ptt_str(&ix, "indexName"), "parent_1");
        cr_assert_str_eq(ptt_str(&ix, "indexBounds.parent.0"),
                         "[\"/electronics\", \"/electronict\")", "[%s] %s", t.engine, json);
        bson_destroy(&ix);
        bson_free(json);
        /* the book's Notes: /^\/electronics/i cannot bound the scan */
        bool any = ixscan(&t, "{\"find\": \"categories\", \"filter\": {\"parent\": {\"$regex\": "
                              "\"^/electronics\", \"$options\": \"i\"}}}", &ix, &json);
        if (any) {
            cr_assert_str_eq(ptt_str(&ix, "indexBounds.parent.0"), "[\"\", {})",
                             "[%s] case-insensitive bounded: %s", t.engine, json);
            bson_destroy(&ix);
        }
        bson_free(json);
        /* the products' multikey equality */
        cr_assert(ixscan(&t, "{\"find\": \"products\", \"filter\": {\"categories\": "
                             "\"/electronics/embedded/arduino\"}}", &ix, &json),
                  "[%s] %s", t.engine, json);
        cr_assert_str_eq(ptt_str(&ix, "indexName"), "categories_1");
        bson_destroy(&ix);
        bson_free(json);
    }
}

Test(pt_matpath, covered_operations_return_the_projection)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        catalog(&t);
        cr_assert_eq(pt_matpath_create_covered_index(t.db, &err), 0, "%s", err.message);
        md_cursor *cur = pt_matpath_direct_children_covered(t.db, "/electronics");
        const bson_t *doc;
        int n = 0;
        while (md_cursor_next(cur, &doc)) {
            n++;
            cr_assert(!ptt_has(doc, "_id") && !ptt_has(doc, "category"));
            cr_assert_str_eq(ptt_str(doc, "parent"), "/electronics");
        }
        md_cursor_destroy(cur);
        cr_assert_eq(n, 2);
        cr_assert_str_eq(values(pt_matpath_subtree_covered(t.db, "/electronics"), "name"),
                         "arduino,embedded,led,lg,monitors,raspberry");
    }
}

/*
 * Ex 10: with {parent: 1, name: 1}, the regex query projected on {_id: 0,
 * parent: 1, name: 1} is covered in MongoDB 3.x ("indexOnly": true; the
 * regex is applied to the index key inside the IXSCAN), and so in minidoc:
 * the covered scan runs the matcher on each decoded key, no FETCH.
 */
Test(pt_matpath, covered_regex_query_examines_no_document)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        catalog(&t);
        cr_assert_eq(pt_matpath_create_covered_index(t.db, &err), 0, "%s", err.message);
        bson_t *x = PTT_OK(&t, "{\"explain\": {\"find\": \"categories\", \"filter\": {\"parent\": "
                               "{\"$regex\": \"^/electronics$\"}}, \"projection\": {\"_id\": 0, "
                               "\"parent\": 1, \"name\": 1}}, \"verbosity\": \"executionStats\"}");
        char *json = bson_as_relaxed_extended_json(x, NULL);
        bson_t ix, fetch;
        cr_assert(ptt_plan_stage(x, "IXSCAN", &ix), "[%s] %s", t.engine, json);
        cr_assert_str_eq(ptt_str(&ix, "indexName"), "parent_1_name_1", "[%s] %s", t.engine, json);
        bson_destroy(&ix);
        cr_assert(!ptt_plan_stage(x, "FETCH", &fetch), "[%s] fetches: %s", t.engine, json);
        cr_assert_eq(ptt_i64(x, "executionStats.totalDocsExamined"), 0, "[%s] %s", t.engine,
                     json);
        cr_assert_eq(ptt_i64(x, "executionStats.nReturned"), 2);
        bson_free(json);
        bson_destroy(x);
    }
}

static void run_scenario(const pt_scenario *sc)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        void *state = NULL;
        pt_setup_args a = {.users = 500, .quick = true};
        cr_assert_eq(sc->setup(t.db, &a, &state, &err), 0, "[%s] setup: %s", t.engine,
                     err.message);
        cr_assert_eq(ptt_count(&t, "categories", "{}"), 5 + 25 + 125 + 625);
        cr_assert_eq(ptt_count(&t, "products", "{}"), 100);
        cr_assert_eq(ptt_count(&t, "categories", "{\"parent\": \"/\"}"), 5);
        char msg[256];
        int n = ptt_run_op(t.db, state, &sc->ops[0], 8, 500, msg);
        cr_assert_eq(n, 0, "[%s] %s: %s", t.engine, sc->name, msg);
        cr_assert_eq(sc->check(t.db, state, &err), 0, "[%s] check: %s", t.engine, err.message);
        /* a moved category fails the check */
        bson_destroy(PTT_OK(&t, "{\"update\": \"categories\", \"updates\": [{\"q\": {\"_id\": 3}, "
                                "\"u\": {\"$set\": {\"parent\": \"/elsewhere\"}}}]}"));
        cr_assert_neq(sc->check(t.db, state, &err), 0, "[%s] a moved category passed", t.engine);
        cr_assert(strstr(err.message, "categories 3") != NULL, "%s", err.message);
        pt_scenario_destroy(sc, state);
    }
}

Test(pt_matpath, scenario_direct_children_from_many_threads)
{
    cr_assert_eq(pt_pattern_matpath.nscenarios, 2);
    const pt_scenario *sc = pt_pattern_matpath.scenarios[0];
    cr_assert_str_eq(sc->ops[0].name, "direct children");
    cr_assert_eq(sc->ops[0].users, 1000);
    run_scenario(sc);
}

Test(pt_matpath, scenario_subtree_from_many_threads)
{
    const pt_scenario *sc = pt_pattern_matpath.scenarios[1];
    cr_assert_str_eq(sc->ops[0].name, "category subtree");
    cr_assert_eq(sc->ops[0].users, 1000);
    run_scenario(sc);
}
