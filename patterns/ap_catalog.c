/*
 * ap_catalog.c -- "Product Catalog" (Applied Design Patterns, ch.5
 * pp.75-84): one products collection for every kind of product, common
 * fields first and the kind's own in `details`, searched through the
 * chapter's compound indexes whose last field is the sort.
 *
 * The measurement seeds albums and films and asks explain (executionStats)
 * what each of the chapter's queries costs: whether it uses its index,
 * sorts in memory, and how many keys and documents it examines; the
 * regular-expression searches show what an anchored, case-sensitive
 * prefix can do that an unanchored or case-insensitive one cannot.
 */
#include <stdio.h>
#include <string.h>

#include "ap.h"

int ap_catalog_create_indexes(md_db *db, md_error *err)
{
    int rc;
    bson_t *k;
#define IX(...)                                                             \
    do {                                                                    \
        k = BCON_NEW(__VA_ARGS__);                                          \
        rc = pt_ensure_index(db, AP_CATALOG_PRODUCTS, k, NULL, err);        \
        bson_destroy(k);                                                    \
        if (rc)                                                             \
            return rc;                                                      \
    } while (0)
    IX("pricing.pct_savings", BCON_INT32(1));
    IX("type", BCON_INT32(1), "details.genre", BCON_INT32(1), "details.issue_date",
       BCON_INT32(-1));
    IX("type", BCON_INT32(1), "details.actor", BCON_INT32(1), "details.issue_date",
       BCON_INT32(-1));
    IX("type", BCON_INT32(1), "details.issue_date", BCON_INT32(-1), "title", BCON_INT32(1));
#undef IX
    return 0;
}

/* The common fields: sku, type, title, description, asin, shipping, pricing
 * (integer cents; pct_savings a whole percentage). */
static void common(bson_t *b, const char *sku, const char *type, const char *title,
                   int32_t list, int32_t retail)
{
    BSON_APPEND_UTF8(b, "sku", sku);
    BSON_APPEND_UTF8(b, "type", type);
    BSON_APPEND_UTF8(b, "title", title);
    BSON_APPEND_UTF8(b, "description", "by the catalog's generator");
    BSON_APPEND_UTF8(b, "asin", "B0000A118M");
    bson_t *ship = BCON_NEW("weight", BCON_INT32(6), "dimensions", "{", "width", BCON_INT32(10),
                            "height", BCON_INT32(10), "depth", BCON_INT32(1), "}");
    BSON_APPEND_DOCUMENT(b, "shipping", ship);
    bson_destroy(ship);
    int32_t savings = list - retail;
    bson_t *price = BCON_NEW("list", BCON_INT32(list), "retail", BCON_INT32(retail), "savings",
                             BCON_INT32(savings), "pct_savings",
                             BCON_INT32(list ? savings * 100 / list : 0));
    BSON_APPEND_DOCUMENT(b, "pricing", price);
    bson_destroy(price);
}

static void append_strings(bson_t *b, const char *key, const char *const *v, int n)
{
    bson_t arr;
    char idx[16];
    const char *k;
    BSON_APPEND_ARRAY_BEGIN(b, key, &arr);
    for (int i = 0; i < n; i++) {
        bson_uint32_to_string((uint32_t)i, &k, idx, sizeof idx);
        bson_append_utf8(&arr, k, -1, v[i], -1);
    }
    bson_append_array_end(b, &arr);
}

int ap_catalog_add_album(md_db *db, const char *sku, const char *title, const char *artist,
                         const char *const *genres, int ngenres, int64_t issue_ms,
                         int32_t list, int32_t retail, md_error *err)
{
    bson_t doc = BSON_INITIALIZER, d;
    common(&doc, sku, "Audio Album", title, list, retail);
    BSON_APPEND_DOCUMENT_BEGIN(&doc, "details", &d);
    BSON_APPEND_UTF8(&d, "title", title);
    BSON_APPEND_UTF8(&d, "artist", artist);
    append_strings(&d, "genre", genres, ngenres);
    BSON_APPEND_DATE_TIME(&d, "issue_date", issue_ms);
    const char *tracks[] = {"Part I: Acknowledgement", "Part II: Resolution",
                            "Part III: Pursuance", "Part IV: Psalm"};
    append_strings(&d, "tracks", tracks, 4);
    bson_append_document_end(&doc, &d);
    int rc = ap_insert(db, AP_CATALOG_PRODUCTS, &doc, NULL, err);
    bson_destroy(&doc);
    return rc;
}

int ap_catalog_add_film(md_db *db, const char *sku, const char *title,
                        const char *const *actors, int nactors, int64_t issue_ms,
                        int32_t list, int32_t retail, md_error *err)
{
    bson_t doc = BSON_INITIALIZER, d;
    common(&doc, sku, "Film", title, list, retail);
    BSON_APPEND_DOCUMENT_BEGIN(&doc, "details", &d);
    BSON_APPEND_UTF8(&d, "title", title);
    const char *directors[] = {"Andy Wachowski", "Larry Wachowski"};
    append_strings(&d, "director", directors, 2);
    append_strings(&d, "actor", actors, nactors);
    BSON_APPEND_DATE_TIME(&d, "issue_date", issue_ms);
    BSON_APPEND_UTF8(&d, "aspect_ratio", "1.66:1");
    bson_append_document_end(&doc, &d);
    int rc = ap_insert(db, AP_CATALOG_PRODUCTS, &doc, NULL, err);
    bson_destroy(&doc);
    return rc;
}

static md_cursor *find_sorted(md_db *db, bson_t *filter, const char *sort_key)
{
    md_collection *c = md_db_get_collection(db, AP_CATALOG_PRODUCTS);
    bson_t *opts = BCON_NEW("sort", "{", sort_key, BCON_INT32(-1), "}");
    md_cursor *cur = md_collection_find_with_opts(c, filter, opts);
    bson_destroy(opts);
    bson_destroy(filter);
    md_collection_destroy(c); /* the cursor keeps what it needs */
    return cur;
}

md_cursor *ap_catalog_discounted(md_db *db, int32_t pct)
{
    return find_sorted(db, BCON_NEW("pricing.pct_savings", "{", "$gt", BCON_INT32(pct), "}"),
                       "pricing.pct_savings");
}

md_cursor *ap_catalog_by_genre(md_db *db, const char *genre)
{
    return find_sorted(db, BCON_NEW("type", "Audio Album", "details.genre", BCON_UTF8(genre)),
                       "details.issue_date");
}

md_cursor *ap_catalog_by_actor(md_db *db, const char *actor)
{
    return find_sorted(db, BCON_NEW("type", "Film", "details.actor", BCON_UTF8(actor)),
                       "details.issue_date");
}

void ap_catalog_title_query(const char *regex, const char *options, bson_t *filter,
                            bson_t *sort)
{
    bson_init(filter);
    bson_init(sort);
    BSON_APPEND_UTF8(filter, "type", "Film");
    bson_t r;
    BSON_APPEND_DOCUMENT_BEGIN(filter, "title", &r);
    BSON_APPEND_UTF8(&r, "$regex", regex);
    BSON_APPEND_UTF8(&r, "$options", options ? options : "");
    bson_append_document_end(filter, &r);
    BSON_APPEND_INT32(sort, "details.issue_date", -1);
}

md_cursor *ap_catalog_title_regex(md_db *db, const char *regex, const char *options)
{
    bson_t filter, sort;
    ap_catalog_title_query(regex, options, &filter, &sort);
    bson_destroy(&sort);
    bson_t *owned = bson_copy(&filter); /* find_sorted destroys it */
    bson_destroy(&filter);
    return find_sorted(db, owned, "details.issue_date");
}

/* ---- the measurement ------------------------------------------------------------ */

static const char *const genres[] = {"Jazz", "General", "Blues", "Rock", "Classical"};
static const char *const actors[] = {"Keanu Reeves", "Carrie-Anne Moss", "Laurence Fishburne",
                                     "Tom Cruise", "Jack Nicholson", "Demi Moore"};
static const char *const words[] = {"Love", "Supreme", "Matrix", "Hacker", "Night", "Blue",
                                    "Train", "Good", "Men", "Kind"};

static int seed(md_db *db, int n, int *nfilms, int *nfew, md_error *err)
{
    int rc = 0;
    *nfilms = *nfew = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        char sku[16], title[96];
        snprintf(sku, sizeof sku, "%08x", (unsigned)i * 2654435761u);
        int32_t list = 1000 + (i % 7) * 100, retail = list - (i % 10) * list / 20;
        int64_t issue = 946684800000LL + (int64_t)(i % 4000) * 86400000LL;
        if (i % 2) {
            if (i % 97 == 1) {
                snprintf(title, sizeof title, "A Few Good %s %d", words[i % 10], i);
                (*nfew)++;
            } else {
                snprintf(title, sizeof title, "The %s %s %d", words[i % 10], words[i / 10 % 10],
                         i);
            }
            const char *two[2] = {actors[i % 6], actors[(i / 6) % 6]};
            rc = ap_catalog_add_film(db, sku, title, two, 2, issue, list, retail, err);
            (*nfilms)++;
        } else {
            snprintf(title, sizeof title, "%s %s %d", words[i % 10], words[i / 10 % 10], i);
            const char *two[2] = {genres[i % 5], genres[(i / 5) % 5]};
            rc = ap_catalog_add_album(db, sku, title, "John Coltrane", two, 2, issue, list,
                                      retail, err);
        }
    }
    return rc;
}

static void plan_rows(ap_result *r, const char *what, const ap_plan *p)
{
    ap_row_add(r, (double)p->keys_examined, "keys", "%s: keys examined (index %s%s)", what,
               p->index[0] ? p->index : "none", p->sort_in_memory ? ", in-memory sort" : "");
    ap_row_add(r, (double)p->docs_examined, "docs", "%s: documents examined", what);
    ap_row_add(r, (double)p->n_returned, "docs", "%s: returned", what);
}

static int catalog_measure(md_db *db, const ap_args *args, ap_result *r, md_error *err)
{
    const char *engine = args->engine;
    bool quick = args->quick;
    int n = quick ? 2000 : 10000, nfilms, nfew;
    int rc = ap_catalog_create_indexes(db, err);
    if (rc || (rc = seed(db, n, &nfilms, &nfew, err)) != 0)
        return rc;
    ap_row_add(r, n, "docs", "products (%d films, %d titled \"A Few Good ...\")", nfilms, nfew);
    ap_plan disc, genre, actor, hacker, hacker_ci, prefix, prefix_ci;
    bson_t *f, *s;
#define EXPLAIN(plan, filter, sort)                                                   \
    do {                                                                              \
        f = filter;                                                                   \
        s = sort;                                                                     \
        rc = ap_explain_find(db, AP_CATALOG_PRODUCTS, f, s, NULL, &plan, err);              \
        bson_destroy(f);                                                              \
        bson_destroy(s);                                                              \
        if (rc)                                                                       \
            return rc;                                                                \
    } while (0)
    EXPLAIN(disc, BCON_NEW("pricing.pct_savings", "{", "$gt", BCON_INT32(25), "}"),
            BCON_NEW("pricing.pct_savings", BCON_INT32(-1)));
    EXPLAIN(genre, BCON_NEW("type", "Audio Album", "details.genre", "Jazz"),
            BCON_NEW("details.issue_date", BCON_INT32(-1)));
    EXPLAIN(actor, BCON_NEW("type", "Film", "details.actor", "Keanu Reeves"),
            BCON_NEW("details.issue_date", BCON_INT32(-1)));
#undef EXPLAIN
    bson_t tf, ts;
#define TITLE(plan, re, opt)                                                          \
    do {                                                                              \
        ap_catalog_title_query(re, opt, &tf, &ts);                                    \
        rc = ap_explain_find(db, AP_CATALOG_PRODUCTS, &tf, &ts, NULL, &plan, err);          \
        bson_destroy(&tf);                                                            \
        bson_destroy(&ts);                                                            \
        if (rc)                                                                       \
            return rc;                                                                \
    } while (0)
    TITLE(hacker, ".*hacker.*", "i");
    TITLE(hacker_ci, ".*Hacker.*", "");
    TITLE(prefix, "^A Few Good.*", "");
    TITLE(prefix_ci, "^a few good.*", "i");
#undef TITLE
    plan_rows(r, "pct_savings > 25 sorted", &disc);
    plan_rows(r, "albums by genre Jazz, newest first", &genre);
    plan_rows(r, "films by actor, newest first", &actor);
    plan_rows(r, "title /.*hacker.*/i", &hacker);
    plan_rows(r, "title /.*Hacker.*/", &hacker_ci);
    plan_rows(r, "title /^A Few Good.*/", &prefix);
    plan_rows(r, "title /^a few good.*/i", &prefix_ci);

    /* 0: the sort field last in the index: no in-memory sort. */
    bool c0 = !disc.sort_in_memory && !genre.sort_in_memory && !actor.sort_in_memory &&
              strcmp(genre.index, "type_1_details.genre_1_details.issue_date_-1") == 0 &&
              strcmp(actor.index, "type_1_details.actor_1_details.issue_date_-1") == 0 &&
              strcmp(disc.index, "pricing.pct_savings_1") == 0;
    ap_claim_set(r, 0, c0,
                 "indexes %s / %s / %s; in-memory sorts %d / %d / %d (genre and actor are "
                 "arrays: their indexes are multikey); genre: %lld keys for %lld albums returned",
                 disc.index, genre.index, actor.index, disc.sort_in_memory,
                 genre.sort_in_memory, actor.sort_in_memory, (long long)genre.keys_examined,
                 (long long)genre.n_returned);
    /* 1: an unanchored regex scans the titles (all films' keys), but in the
     * index: documents are fetched only for the titles that match. */
    bool c1 = hacker.keys_examined >= nfilms && !hacker.collscan &&
              hacker.docs_examined <= hacker.n_returned;
    ap_claim_set(r, 1, c1,
                 "/.*hacker.*/i over %d films: %lld keys, %lld documents examined, %lld "
                 "returned (index %s)",
                 nfilms, (long long)hacker.keys_examined, (long long)hacker.docs_examined,
                 (long long)hacker.n_returned, hacker.index[0] ? hacker.index : "none");
    /* 2: an anchored prefix regex seeks (examines about its matches) --
     * where the title can bound the scan.  In the chapter's index the
     * title comes after the unbounded issue_date, so it only filters
     * keys there; an index led by title (not the book's: added here,
     * after the chapter's queries were explained) shows the seek. */
    bson_t *k = BCON_NEW("title", BCON_INT32(1));
    rc = pt_ensure_index(db, AP_CATALOG_PRODUCTS, k, NULL, err);
    bson_destroy(k);
    ap_plan seek, noseek;
    bson_t *q = BCON_NEW("title", "{", "$regex", "^A Few Good.*", "}");
    if (rc == 0)
        rc = ap_explain_find(db, AP_CATALOG_PRODUCTS, q, NULL, NULL, &seek, err);
    bson_destroy(q);
    q = BCON_NEW("title", "{", "$regex", ".*hacker.*", "$options", "i", "}");
    if (rc == 0)
        rc = ap_explain_find(db, AP_CATALOG_PRODUCTS, q, NULL, NULL, &noseek, err);
    bson_destroy(q);
    if (rc)
        return rc;
    plan_rows(r, "{title: /^A Few Good.*/} with an index {title: 1}", &seek);
    plan_rows(r, "{title: /.*hacker.*/i} with an index {title: 1}", &noseek);
    bool c2 = strcmp(seek.index, "title_1") == 0 && seek.keys_examined <= seek.n_returned + 1 &&
              seek.n_returned == prefix.n_returned;
    ap_claim_set(r, 2, c2,
                 "on {title: 1}: /^A Few Good.*/ %lld keys for %lld matches, /.*hacker.*/i "
                 "%lld keys of %d products; in the chapter's index (title third, after "
                 "issue_date) the prefix examines %lld keys",
                 (long long)seek.keys_examined, (long long)seek.n_returned,
                 (long long)noseek.keys_examined, n, (long long)prefix.keys_examined);
    /* 3: case-insensitive defeats the index bounds. */
    bool c3 = prefix_ci.keys_examined >= nfilms && prefix_ci.n_returned == prefix.n_returned;
    ap_claim_set(r, 3, c3,
                 "/^a few good.*/i: %lld keys examined for %lld matches (case-sensitive "
                 "prefix: %lld keys)",
                 (long long)prefix_ci.keys_examined, (long long)prefix_ci.n_returned,
                 (long long)prefix.keys_examined);
    (void)engine;
    return 0;
}

const ap_usecase ap_usecase_catalog = {
    .name = "ap_catalog",
    .chapter = "Ch.5 Ecommerce",
    .title = "Product Catalog",
    .pages = "pp.75-84",
    .demonstrates = "one polymorphic products collection (details subdocument) searched "
                    "through compound indexes that end in the sort field",
    .nclaims = 4,
    .claims = {
        {"With the sort field last in the compound index, the searches need no in-memory sort",
         NULL},
        {"An unanchored regex (/.*hacker.*/i) cannot seek: it scans every film's title, in "
         "the index {type, details.issue_date, title}, fetching only the matches", NULL},
        {"An anchored, case-sensitive prefix regex (/^A Few Good.*/) uses an index on the "
         "title to seek directly; an unanchored one scans it", NULL},
        {"re.IGNORECASE defeats the index: a case-insensitive prefix scans every key", NULL},
    },
    .measure = catalog_measure,
};
