/*
 * i18n.c -- 5.11 Internationalization: a category's names keyed by locale,
 * with a copy of each of its categories cached in every product.
 *
 *     categories  {_id: 1, names: {"en-us": "car"}}
 *     products    {_id: 1, name: "car", cost: 100, currency: "usd",
 *                  categories: [{_id: 1, names: {"en-us": "car"}}]}
 *
 * Adding a locale sets "names.<locale>" on the category and
 * "categories.$.names.<locale>" on every product that caches it; removing
 * one $unset's the same two paths.  Each product update grows or shrinks
 * the product by one small field: mmapv1 rewrites it in place when the
 * record has room (or moves it when it has not), btree writes the whole
 * product again.  Only the first add (or remove) of a locale per category
 * changes anything; the rest match the documents and change nothing, as in
 * the simulator.
 *
 * Errata (digest section 7, item 3), corrected here:
 *   - the book updates the category with "categories.$.names.de-de"; a
 *     category has no categories array, so MongoDB refuses it ("The
 *     positional operator did not find the match needed from the query");
 *     the category's own path is "names.de-de".
 *   - the book means to update every product with the category but passes
 *     no multi flag, so only the first would change; we pass multi: true.
 *   - its Indexes section says "special indexes" and means none; we create
 *     products {"categories._id": 1}, the index the simulator the book
 *     measured with creates (Product.createOptimalIndexes), without which
 *     every locale change scans all products.
 *
 * Scenarios: the simulator's multilanguage/multilanguage_add_new_local_
 * scenario.js (each user adds "es-es": "coche" to a random category) and
 * multilanguage_remove_local_scenario.js (each user removes "de-de").
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "patterns.h"

/* ---- operations ----------------------------------------------------------- */

int pt_i18n_create_indexes(md_db *db, md_error *err)
{
    bson_t *keys = BCON_NEW("categories._id", BCON_INT32(1));
    int rc = pt_ensure_index(db, PT_I18N_PRODUCTS, keys, NULL, err);
    bson_destroy(keys);
    return rc;
}

int pt_i18n_create_category(md_db *db, int32_t id, const bson_t *names, md_error *err)
{
    md_collection *c = md_db_get_collection(db, PT_I18N_CATEGORIES);
    bson_t *doc = BCON_NEW("_id", BCON_INT32(id), "names", BCON_DOCUMENT(names));
    int rc = md_collection_insert_one(c, doc, NULL, NULL, err);
    bson_destroy(doc);
    md_collection_destroy(c);
    return rc;
}

int pt_i18n_create_product(md_db *db, int32_t id, const char *name, int32_t cost,
                           const char *currency, const bson_t *const *categories, int n,
                           md_error *err)
{
    bson_t doc = BSON_INITIALIZER, arr;
    char key[16];
    md_collection *c = md_db_get_collection(db, PT_I18N_PRODUCTS);
    BSON_APPEND_INT32(&doc, "_id", id);
    BSON_APPEND_UTF8(&doc, "name", name);
    BSON_APPEND_INT32(&doc, "cost", cost);
    BSON_APPEND_UTF8(&doc, "currency", currency);
    BSON_APPEND_ARRAY_BEGIN(&doc, "categories", &arr);
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "%d", i);
        BSON_APPEND_DOCUMENT(&arr, key, categories[i]);
    }
    bson_append_array_end(&doc, &arr);
    int rc = md_collection_insert_one(c, &doc, NULL, NULL, err);
    bson_destroy(&doc);
    md_collection_destroy(c);
    return rc;
}

/* A locale becomes a path component: no '.', no leading '$', not empty. */
static int check_locale(const char *locale, md_error *err)
{
    if (!locale || !*locale || strchr(locale, '.') || locale[0] == '$' ||
        strlen(locale) > 64)
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE, "bad locale \"%s\"",
                            locale ? locale : "(null)");
    return 0;
}

static int64_t reply_count(const bson_t *reply, const char *field)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, reply, field) ? bson_iter_as_int64(&it) : 0;
}

/*
 * The two updates of a locale change: `op` is "$set" (value `name`) or
 * "$unset" (value "", ignored).  The category first, then every product
 * caching it.  MD_NOTFOUND when there is no such category.
 */
static int change_local(md_db *db, int32_t category_id, const char *op, const char *locale,
                        const char *name, int64_t *products_modified, md_error *err)
{
    char cat_path[96], prod_path[128];
    bson_t reply;
    int rc = check_locale(locale, err);
    if (rc)
        return rc;
    snprintf(cat_path, sizeof cat_path, "names.%s", locale);
    snprintf(prod_path, sizeof prod_path, "categories.$.names.%s", locale);
    md_collection *cats = md_db_get_collection(db, PT_I18N_CATEGORIES);
    md_collection *prods = md_db_get_collection(db, PT_I18N_PRODUCTS);
    bson_t *q = BCON_NEW("_id", BCON_INT32(category_id));
    bson_t *u = BCON_NEW(op, "{", cat_path, BCON_UTF8(name), "}");
    rc = md_collection_update_one(cats, q, u, NULL, &reply, err);
    if (rc == 0 && reply_count(&reply, "matchedCount") == 0)
        rc = md_error_set(err, MD_NOTFOUND, MD_CODE_NO_SUCH_KEY, "no category %d", category_id);
    bson_destroy(&reply);
    bson_destroy(u);
    bson_destroy(q);
    if (rc == 0) {
        q = BCON_NEW("categories._id", BCON_INT32(category_id));
        u = BCON_NEW(op, "{", prod_path, BCON_UTF8(name), "}");
        rc = md_collection_update_many(prods, q, u, NULL, &reply, err);
        if (rc == 0 && products_modified)
            *products_modified = reply_count(&reply, "modifiedCount");
        bson_destroy(&reply);
        bson_destroy(u);
        bson_destroy(q);
    }
    md_collection_destroy(prods);
    md_collection_destroy(cats);
    return rc;
}

int pt_i18n_add_local(md_db *db, int32_t category_id, const char *locale, const char *name,
                      int64_t *products_modified, md_error *err)
{
    if (!name)
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE, "no name for %s", locale);
    return change_local(db, category_id, "$set", locale, name, products_modified, err);
}

int pt_i18n_remove_local(md_db *db, int32_t category_id, const char *locale,
                         int64_t *products_modified, md_error *err)
{
    return change_local(db, category_id, "$unset", locale, "", products_modified, err);
}

/* ---- the scenarios ---------------------------------------------------------- */

/*
 * Both scripts: numberOfCategories 128 with names {"en-us": word i,
 * "de-de": word i+1}, numberOfProducts 2048, product i caching category
 * i % 128, at quick scale too (setup takes a fraction of a second, and at
 * the runner's rate the changes per category depend on how many there
 * are).  The simulator takes its words from an English word list; ours
 * are generated.
 */
#define I18N_CATS 128
#define I18N_PRODS 2048
#define I18N_ADD_LOCALE "es-es"
#define I18N_ADD_NAME "coche"
#define I18N_REMOVE_LOCALE "de-de"

typedef struct i18n_state {
    int ncats, nprods;
    bool removing;           /* the remove scenario (else add) */
    atomic_int *changed;     /* per category: a user's change succeeded */
} i18n_state;

static void i18n_state_free(void *state)
{
    i18n_state *st = state;
    if (!st)
        return;
    free(st->changed);
    free(st);
}

/* A made-up word for index i, stable across runs. */
static void i18n_word(int i, char *buf, size_t n)
{
    static const char *const stems[] = {"auto", "bicycle", "camera", "desk", "engine",
                                        "fridge", "guitar", "helmet", "iron", "jacket",
                                        "kettle", "lamp", "mirror", "notebook", "oven",
                                        "piano"};
    snprintf(buf, n, "%s%d", stems[i % 16], i / 16);
}

static void i18n_category_doc(int i, bson_t *cat)
{
    char en[32], de[32];
    i18n_word(i, en, sizeof en);
    i18n_word(i + 1, de, sizeof de);
    bson_init(cat);
    BSON_APPEND_INT32(cat, "_id", i);
    bson_t names;
    BSON_APPEND_DOCUMENT_BEGIN(cat, "names", &names);
    BSON_APPEND_UTF8(&names, "en-us", en);
    BSON_APPEND_UTF8(&names, "de-de", de);
    bson_append_document_end(cat, &names);
}

static int i18n_setup(md_db *db, const pt_setup_args *a, void **state, bool removing,
                      md_error *err)
{
    char word[32];
    int rc;
    i18n_state *st = calloc(1, sizeof *st);
    if (!st)
        return md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
    st->ncats = I18N_CATS;
    st->nprods = I18N_PRODS;
    st->removing = removing;
    st->changed = calloc((size_t)st->ncats, sizeof *st->changed);
    if (!st->changed) {
        i18n_state_free(st);
        return md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
    }
    for (int i = 0; i < st->ncats; i++)
        atomic_init(&st->changed[i], 0);
    rc = pt_drop_if_exists(db, PT_I18N_CATEGORIES, err);
    if (!rc)
        rc = pt_drop_if_exists(db, PT_I18N_PRODUCTS, err);
    if (!rc)
        rc = pt_i18n_create_indexes(db, err);
    for (int i = 0; i < st->ncats && !rc; i++) {
        bson_t cat, names;
        bson_iter_t it;
        i18n_category_doc(i, &cat);
        bson_iter_init_find(&it, &cat, "names");
        const uint8_t *data;
        uint32_t len;
        bson_iter_document(&it, &len, &data);
        bson_init_static(&names, data, len);
        rc = pt_i18n_create_category(db, i, &names, err);
        bson_destroy(&cat);
    }
    for (int i = 0; i < st->nprods && !rc; i++) {
        bson_t cat;
        const bson_t *cats[1] = {&cat};
        i18n_category_doc(i % st->ncats, &cat);
        i18n_word(i, word, sizeof word);
        rc = pt_i18n_create_product(db, i, word, (int32_t)((i * 7919u) % 100000u), "usd", cats,
                                    1, err);
        bson_destroy(&cat);
    }
    if (rc) {
        i18n_state_free(st);
        return rc;
    }
    *state = st;
    return 0;
}

static int i18n_setup_add(md_db *db, const pt_setup_args *a, void **state, md_error *err)
{
    return i18n_setup(db, a, state, false, err);
}

static int i18n_setup_remove(md_db *db, const pt_setup_args *a, void **state, md_error *err)
{
    return i18n_setup(db, a, state, true, err);
}

/* One user: add the Spanish name to a random category. */
static int i18n_run_add(pt_user *u, md_error *err)
{
    i18n_state *st = u->state;
    int c = (int)pt_rand_below(u, (uint64_t)st->ncats);
    int rc = pt_i18n_add_local(u->db, c, I18N_ADD_LOCALE, I18N_ADD_NAME, NULL, err);
    if (!rc)
        atomic_store(&st->changed[c], 1);
    return rc;
}

/* One user: remove the German name from a random category. */
static int i18n_run_remove(pt_user *u, md_error *err)
{
    i18n_state *st = u->state;
    int c = (int)pt_rand_below(u, (uint64_t)st->ncats);
    int rc = pt_i18n_remove_local(u->db, c, I18N_REMOVE_LOCALE, NULL, err);
    if (!rc)
        atomic_store(&st->changed[c], 1);
    return rc;
}

/* Two names documents hold the same locales with the same names, in any
 * order. */
static bool names_equal(const bson_t *a, const bson_t *b)
{
    bson_iter_t ia, ib;
    int na = 0, nb = 0;
    if (!bson_iter_init(&ia, a) || !bson_iter_init(&ib, b))
        return false;
    while (bson_iter_next(&ib))
        nb++;
    while (bson_iter_next(&ia)) {
        na++;
        if (!BSON_ITER_HOLDS_UTF8(&ia) || !bson_iter_init_find(&ib, b, bson_iter_key(&ia)) ||
            !BSON_ITER_HOLDS_UTF8(&ib) ||
            strcmp(bson_iter_utf8(&ia, NULL), bson_iter_utf8(&ib, NULL)) != 0)
            return false;
    }
    return na == nb;
}

/* The names subdocument at `path` of doc, as a static view into doc. */
static bool names_at(const bson_t *doc, const char *path, bson_t *names)
{
    bson_iter_t it, d;
    const uint8_t *data;
    uint32_t len;
    if (!bson_iter_init(&it, doc) || !bson_iter_find_descendant(&it, path, &d) ||
        !BSON_ITER_HOLDS_DOCUMENT(&d))
        return false;
    bson_iter_document(&d, &len, &data);
    return bson_init_static(names, data, len);
}

/* What category i's names must be after the run. */
static void expected_names(const i18n_state *st, int i, bson_t *names)
{
    char en[32], de[32];
    bool changed = atomic_load(&st->changed[i]) != 0;
    i18n_word(i, en, sizeof en);
    i18n_word(i + 1, de, sizeof de);
    bson_init(names);
    BSON_APPEND_UTF8(names, "en-us", en);
    if (!(st->removing && changed))
        BSON_APPEND_UTF8(names, "de-de", de);
    if (!st->removing && changed)
        BSON_APPEND_UTF8(names, I18N_ADD_LOCALE, I18N_ADD_NAME);
}

/* check_names' scan: one document's names at `path` must be the expected
 * ones of the category whose _id is at `id_path`. */
typedef struct names_scan {
    const i18n_state *st;
    const char *coll, *id_path, *path;
} names_scan;

static int names_doc(const bson_t *doc, void *arg, md_error *err)
{
    const names_scan *a = arg;
    bson_iter_t it;
    bson_t names, want;
    int cat = -1, rc = 0;
    if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, a->id_path, &it) &&
        BSON_ITER_HOLDS_INT32(&it))
        cat = bson_iter_int32(&it);
    if (cat < 0 || cat >= a->st->ncats || !names_at(doc, a->path, &names))
        return md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR,
                            "%s: a document lost its category", a->coll);
    expected_names(a->st, cat, &want);
    if (!names_equal(&names, &want)) {
        char *got = bson_as_relaxed_extended_json(&names, NULL);
        rc = md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR, "%s: category %d's names are %s",
                          a->coll, cat, got);
        bson_free(got);
    }
    bson_destroy(&want);
    return rc;
}

/* Scan `coll` with names_doc; *n counts the documents. */
static int check_names(md_db *db, const i18n_state *st, const char *coll, const char *id_path,
                       const char *path, int64_t *n, md_error *err)
{
    names_scan a = {st, coll, id_path, path};
    return pt_each_doc(db, coll, names_doc, &a, n, err);
}

/* Every category has the names the run leaves (the locale added, or
 * removed, exactly where a user's change succeeded), every product's cached
 * copy agrees with its category, and none is lost. */
static int i18n_check(md_db *db, void *state, md_error *err)
{
    i18n_state *st = state;
    int64_t n = 0;
    int rc = check_names(db, st, PT_I18N_CATEGORIES, "_id", "names", &n, err);
    if (rc == 0 && n != st->ncats)
        rc = md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR, "%lld categories of %d",
                          (long long)n, st->ncats);
    if (rc == 0)
        rc = check_names(db, st, PT_I18N_PRODUCTS, "categories.0._id", "categories.0.names",
                         &n, err);
    if (rc == 0 && n != st->nprods)
        rc = md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR, "%lld products of %d",
                          (long long)n, st->nprods);
    return rc;
}

static const pt_scenario i18n_add_scenario = {
    .name = "i18n_add_local",
    .title = "Add Local to Category Simulation",
    .script = "multilanguage/multilanguage_add_new_local_scenario.js",
    .nops = 1,
    .ops = {{
        .name = "add_local_to_category",
        .users = 1000,
        .decides = true,
        .run = i18n_run_add,
        .book_mmap = {30.898, 0.676, 0.202, 0.716, 0.865, 1.446, 0.391, 6.839},
        .book_wt = {30.681, 0.693, 0.219, 0.73, 0.889, 1.582, 0.409, 7.157},
    }},
    .setup = i18n_setup_add,
    .check = i18n_check,
    .destroy = i18n_state_free,
};

static const pt_scenario i18n_remove_scenario = {
    .name = "i18n_remove_local",
    .title = "Remove Local from Category Simulation",
    .script = "multilanguage/multilanguage_remove_local_scenario.js",
    .nops = 1,
    .ops = {{
        .name = "remove_local_from_category",
        .users = 1000,
        .decides = true,
        .run = i18n_run_remove,
        .book_mmap = {31.037, 0.675, 0.185, 0.715, 0.867, 1.418, 0.403, 5.882},
        .book_wt = {30.404, 0.913, 0.337, 1.145, 1.316, 1.763, 0.409, 7.938},
    }},
    .setup = i18n_setup_remove,
    .check = i18n_check,
    .destroy = i18n_state_free,
};

const pt_pattern pt_pattern_i18n = {
    .name = "i18n",
    .title = "Internationalization",
    .section = "5.11",
    .book_winner = "mmapv1",
    .book_reason = "\"WiredTiger is a bit slower than MMAP for this schema as it involves a "
                   "lot of in place updates that causes the storage engine to rewrite the "
                   "entire document\" (visible on remove: 0.913 vs 0.675 ms)",
    .nscenarios = 2,
    .scenarios = {&i18n_add_scenario, &i18n_remove_scenario},
};
