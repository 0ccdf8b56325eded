/*
 * test_i18n.c -- 5.11 Internationalization (patterns/i18n.c) on every
 * engine: adding and removing a locale on a category and on every product
 * that caches it (the positional path into the products' categories array),
 * erratum 3 (the book's category path is refused, its missing multi flag
 * updates one product), the categories._id index in IXSCAN form, both
 * scenarios from several threads with their check, and the engine-visible
 * cost: mmapv1 changes the products where they lie, btree writes each
 * whole product again.
 */
#include "pt_test_util.h"

static bool in_place(const ptt_db *t)
{
    const eng_ops *ops = eng_find(t->engine);
    return ops && ops->has_damages;
}

static int64_t engine_stat(ptt_db *t, const bson_t *stats, const char *field)
{
    char path[128];
    snprintf(path, sizeof path, "%s.%s", t->engine, field);
    return ptt_i64(stats, path);
}

static void insert_category(ptt_db *t, int32_t id, const char *en)
{
    md_error err;
    bson_t *names = BCON_NEW("en-us", BCON_UTF8(en));
    cr_assert_eq(pt_i18n_create_category(t->db, id, names, &err), 0, "%s", err.message);
    bson_destroy(names);
}

static void insert_product(ptt_db *t, int32_t id, const int32_t *cats, int n)
{
    md_error err;
    bson_t docs[4];
    const bson_t *ptrs[4];
    for (int i = 0; i < n; i++) {
        bson_init(&docs[i]);
        BSON_APPEND_INT32(&docs[i], "_id", cats[i]);
        bson_t names;
        BSON_APPEND_DOCUMENT_BEGIN(&docs[i], "names", &names);
        BSON_APPEND_UTF8(&names, "en-us", cats[i] == 1 ? "car" : "boat");
        bson_append_document_end(&docs[i], &names);
        ptrs[i] = &docs[i];
    }
    cr_assert_eq(pt_i18n_create_product(t->db, id, "car", 100, "usd", ptrs, n, &err), 0, "%s",
                 err.message);
    for (int i = 0; i < n; i++)
        bson_destroy(&docs[i]);
}

/* The book's documents: category 1 "car" cached in products 1..3 (product
 * 3 also caches category 2 "boat", first), product 4 caches only 2. */
static void seed(ptt_db *t)
{
    insert_category(t, 1, "car");
    insert_category(t, 2, "boat");
    const int32_t one[] = {1}, two_one[] = {2, 1}, two[] = {2};
    insert_product(t, 1, one, 1);
    insert_product(t, 2, one, 1);
    insert_product(t, 3, two_one, 2);
    insert_product(t, 4, two, 1);
}

/* The product's (or category's, path "names") value at `path`. */
static const char *field_of(ptt_db *t, const char *coll, int id, const char *path, char *buf)
{
    bson_t *r = PTT_OK(t, "{\"find\": \"%s\", \"filter\": {\"_id\": %d}}", coll, id);
    char p[128];
    snprintf(p, sizeof p, "cursor.firstBatch.0.%s", path);
    bson_iter_t it;
    if (ptt_find(r, p, &it) && BSON_ITER_HOLDS_UTF8(&it))
        snprintf(buf, 64, "%s", bson_iter_utf8(&it, NULL));
    else
        snprintf(buf, 64, "<none>");
    bson_destroy(r);
    return buf;
}

Test(i18n, add_and_remove_local_reach_every_product)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        char b[64];
        int64_t nmod = -1;
        seed(&t);
        cr_assert_eq(pt_i18n_add_local(t.db, 1, "de-de", "auto", &nmod, &err), 0, "[%s] %s",
                     t.engine, err.message);
        cr_assert_eq(nmod, 3, "[%s] every product with the car category", t.engine);
        cr_assert_str_eq(field_of(&t, "categories", 1, "names.de-de", b), "auto");
        cr_assert_str_eq(field_of(&t, "categories", 1, "names.en-us", b), "car");
        cr_assert_str_eq(field_of(&t, "categories", 2, "names.de-de", b), "<none>");
        cr_assert_str_eq(field_of(&t, "products", 1, "categories.0.names.de-de", b), "auto");
        cr_assert_str_eq(field_of(&t, "products", 2, "categories.0.names.de-de", b), "auto");
        /* the positional $ is the matched element, not the first */
        cr_assert_str_eq(field_of(&t, "products", 3, "categories.1.names.de-de", b), "auto");
        cr_assert_str_eq(field_of(&t, "products", 3, "categories.0.names.de-de", b), "<none>");
        cr_assert_str_eq(field_of(&t, "products", 4, "categories.0.names.de-de", b), "<none>");
        cr_assert_str_eq(field_of(&t, "products", 1, "categories.0.names.en-us", b), "car");
        /* the same name again changes nothing */
        cr_assert_eq(pt_i18n_add_local(t.db, 1, "de-de", "auto", &nmod, &err), 0);
        cr_assert_eq(nmod, 0);
        /* remove it again: the $unset's value is ignored */
        cr_assert_eq(pt_i18n_remove_local(t.db, 1, "de-de", &nmod, &err), 0, "%s", err.message);
        cr_assert_eq(nmod, 3);
        cr_assert_str_eq(field_of(&t, "categories", 1, "names.de-de", b), "<none>");
        cr_assert_str_eq(field_of(&t, "categories", 1, "names.en-us", b), "car");
        for (int p = 1; p <= 3; p++)
            cr_assert_eq(ptt_count(&t, "products", "{\"categories.names.de-de\": "
                                                   "{\"$exists\": true}}"), 0, "product %d", p);
        cr_assert_str_eq(field_of(&t, "products", 3, "categories.1.names.en-us", b), "car");
        cr_assert_eq(pt_i18n_remove_local(t.db, 1, "de-de", &nmod, &err), 0);
        cr_assert_eq(nmod, 0);
        /* no such category; a locale that is no path component */
        cr_assert_eq(pt_i18n_add_local(t.db, 99, "de-de", "auto", &nmod, &err), MD_NOTFOUND);
        cr_assert_eq(pt_i18n_add_local(t.db, 1, "de.de", "auto", &nmod, &err), MD_EINVAL);
        cr_assert_eq(pt_i18n_remove_local(t.db, 1, "$x", &nmod, &err), MD_EINVAL);
    }
}

/* Erratum 3 as the book prints it. */
Test(i18n, the_books_updates_as_printed)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        seed(&t);
        /* categories.update({_id: 1}, {$set: {"categories.$.names.de-de": 'auto'}}) */
        bson_t *r = PTT_OK(&t, "{\"update\": \"categories\", \"updates\": [{\"q\": {\"_id\": 1}, "
                               "\"u\": {\"$set\": {\"categories.$.names.de-de\": \"auto\"}}}]}");
        char *j = bson_as_relaxed_extended_json(r, NULL);
        cr_assert(ptt_has(r, "writeErrors.0"), "[%s] accepted: %s", t.engine, j);
        cr_assert_eq(ptt_i64(r, "writeErrors.0.code"), MD_CODE_BAD_VALUE, "[%s] %s", t.engine, j);
        cr_assert(strstr(ptt_str(r, "writeErrors.0.errmsg"),
                         "The positional operator did not find the match needed from the "
                         "query") != NULL, "[%s] %s", t.engine, j);
        bson_free(j);
        bson_destroy(r);
        cr_assert_eq(ptt_count(&t, "categories", "{\"categories\": {\"$exists\": true}}"), 0);
        /* products.update({"categories._id": 1}, {$set: ...}) without multi */
        r = PTT_OK(&t, "{\"update\": \"products\", \"updates\": [{\"q\": {\"categories._id\": 1}, "
                       "\"u\": {\"$set\": {\"categories.$.names.de-de\": \"auto\"}}}]}");
        cr_assert_eq(ptt_i64(r, "nModified"), 1, "[%s] one product of three", t.engine);
        bson_destroy(r);
        cr_assert_eq(ptt_count(&t, "products", "{\"categories.names.de-de\": \"auto\"}"), 1);
    }
}

Test(i18n, categories_id_index_serves_the_product_update)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        cr_assert_eq(pt_i18n_create_indexes(t.db, &err), 0, "%s", err.message);
        seed(&t);
        bson_t *r = PTT_OK(&t, "{\"listIndexes\": \"products\"}");
        cr_assert_str_eq(ptt_str(r, "cursor.firstBatch.1.name"), "categories._id_1");
        bson_iter_t it, key;
        cr_assert(ptt_find(r, "cursor.firstBatch.1.key", &it) && bson_iter_recurse(&it, &key));
        cr_assert(bson_iter_next(&key));
        cr_assert_str_eq(bson_iter_key(&key), "categories._id");
        cr_assert_eq(bson_iter_as_int64(&key), 1);
        cr_assert(!bson_iter_next(&key));
        bson_destroy(r);
        bson_t *x = ptt_explain(&t, "{\"find\": \"products\", \"filter\": "
                                    "{\"categories._id\": 1}}");
        bson_t ix;
        cr_assert(ptt_plan_stage(x, "IXSCAN", &ix), "[%s] no IXSCAN", t.engine);
        cr_assert_str_eq(ptt_str(&ix, "indexName"), "categories._id_1");
        bson_destroy(&ix);
        bson_destroy(x);
        /* the update's own plan, through explain of the update command */
        x = ptt_explain(&t, "{\"update\": \"products\", \"updates\": [{\"q\": "
                            "{\"categories._id\": 1}, \"u\": {\"$set\": "
                            "{\"categories.$.names.de-de\": \"auto\"}}, \"multi\": true}]}");
        cr_assert(ptt_plan_stage(x, "IXSCAN", &ix), "[%s] update not by index", t.engine);
        cr_assert_str_eq(ptt_str(&ix, "indexName"), "categories._id_1");
        bson_destroy(&ix);
        bson_destroy(x);
        cr_assert_eq(ptt_count(&t, "products", "{\"categories.names.de-de\": \"auto\"}"), 0,
                     "explain wrote nothing");
    }
}

/* What the pattern costs each engine: every product caching the category
 * is changed; mmapv1 keeps them where they lie (the added name fits the
 * record's power-of-2 slot), btree writes each whole product again. */
Test(i18n, locale_changes_in_place_on_mmapv1_rewrites_on_btree)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        const int32_t one[] = {1};
        int64_t nmod = 0;
        insert_category(&t, 1, "car");
        for (int p = 0; p < 50; p++)
            insert_product(&t, p, one, 1);
        bson_t *r = PTT_OK(&t, "{\"find\": \"products\", \"filter\": {\"_id\": 0}}");
        bson_iter_t it;
        cr_assert(ptt_find(r, "cursor.firstBatch.0", &it));
        uint32_t plen;
        const uint8_t *pdata;
        bson_iter_document(&it, &plen, &pdata);
        bson_destroy(r);
        bson_t *s0 = PTT_OK(&t, "{\"collStats\": \"products\"}");
        cr_assert_eq(pt_i18n_add_local(t.db, 1, "es-es", "coche", &nmod, &err), 0);
        cr_assert_eq(nmod, 50);
        cr_assert_eq(pt_i18n_remove_local(t.db, 1, "es-es", &nmod, &err), 0);
        cr_assert_eq(nmod, 50);
        bson_t *s1 = PTT_OK(&t, "{\"collStats\": \"products\"}");
        cr_assert_eq(engine_stat(&t, s1, "updates") - engine_stat(&t, s0, "updates"), 100);
        int64_t bytes = engine_stat(&t, s1, "bytesWritten") - engine_stat(&t, s0, "bytesWritten");
        if (in_place(&t)) {
            cr_assert_eq(engine_stat(&t, s1, "moves"), 0, "[%s] products moved", t.engine);
            cr_assert_eq(engine_stat(&t, s1, "inPlaceUpdates") -
                             engine_stat(&t, s0, "inPlaceUpdates"), 100, "[%s]", t.engine);
        } else {
            cr_assert_geq(bytes, 100 * (int64_t)plen, "[%s] %lld bytes for 100 updates of "
                          "%u-byte products", t.engine, (long long)bytes, plen);
        }
        bson_destroy(s0);
        bson_destroy(s1);
    }
}

static void scenario_round(ptt_db *t, const pt_scenario *s, int64_t users)
{
    md_error err;
    void *state = NULL;
    char first[256];
    pt_setup_args a = {.users = users, .quick = true};
    cr_assert_eq(s->setup(t->db, &a, &state, &err), 0, "[%s] %s", t->engine, err.message);
    int64_t cats = ptt_count(t, "categories", "{}"), prods = ptt_count(t, "products", "{}");
    cr_assert_geq(cats, 16);
    cr_assert_eq(prods, cats * 16);
    cr_assert_eq(ptt_count(t, "products", "{\"categories.names.de-de\": {\"$exists\": true}}"),
                 prods);
    cr_assert_eq(s->check(t->db, state, &err), 0, "[%s] before the run: %s", t->engine,
                 err.message);
    cr_assert_eq(ptt_run_op(t->db, state, &s->ops[0], 8, users, first), 0, "[%s] %s",
                 t->engine, first);
    cr_assert_eq(s->check(t->db, state, &err), 0, "[%s] %s: %s", t->engine, s->name,
                 err.message);
    /* users >> categories: nearly every category was changed */
    bool removing = strstr(s->name, "remove") != NULL;
    int64_t changed = removing
        ? ptt_count(t, "categories", "{\"names.de-de\": {\"$exists\": false}}")
        : ptt_count(t, "categories", "{\"names.es-es\": \"coche\"}");
    cr_assert_geq(changed, cats * 3 / 4, "[%s] %lld of %lld categories changed", t->engine,
                  (long long)changed, (long long)cats);
    cr_assert_eq(ptt_count(t, "products", "{}"), prods);
    /* the check notices a product whose cached copy disagrees */
    bson_destroy(PTT_OK(t, "{\"update\": \"products\", \"updates\": [{\"q\": {\"_id\": 5}, "
                           "\"u\": {\"$set\": {\"categories.0.names.en-us\": \"stale\"}}}]}"));
    cr_assert_neq(s->check(t->db, state, &err), 0, "[%s] check missed a stale product",
                  t->engine);
    s->destroy(state);
}

Test(i18n, scenarios_from_many_threads)
{
    cr_assert_eq(pt_pattern_i18n.nscenarios, 2);
    const pt_scenario *add = pt_pattern_i18n.scenarios[0];
    const pt_scenario *rem = pt_pattern_i18n.scenarios[1];
    cr_assert_str_eq(add->name, "i18n_add_local");
    cr_assert_str_eq(rem->name, "i18n_remove_local");
    cr_assert_eq(add->ops[0].users, 1000);
    cr_assert_float_eq(add->ops[0].book_mmap.mean, 0.676, 1e-9);
    cr_assert_float_eq(rem->ops[0].book_wt.mean, 0.913, 1e-9);
    cr_assert_str_eq(pt_pattern_i18n.book_winner, "mmapv1");
    bool listed = false;
    for (const pt_pattern *const *p = pt_patterns; *p; p++)
        listed |= *p == &pt_pattern_i18n;
    cr_assert(listed, "i18n is in pt_patterns[]");
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        scenario_round(&t, add, 400);
        scenario_round(&t, rem, 400);
    }
}
