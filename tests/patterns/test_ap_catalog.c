/*
 * test_ap_catalog.c -- "Product Catalog" and "Category Hierarchy"
 * (patterns/ap_catalog.c, ap_category.c) on every engine: the catalog's
 * searches return the book's products in the book's order through the
 * chapter's indexes (explain's index choice, anchored against unanchored
 * and case-insensitive regexes), and the category tree's breadcrumbs,
 * re-parenting and renaming keep every descendant's ancestors right.
 */
#include "ap.h"
#include "pt_test_util.h"

#define DAY 86400000LL

/* The values of `field` in the cursor's documents, in order, joined by
 * ','; destroys the cursor. */
static const char *list(md_cursor *cur, const char *field)
{
    static char out[4096];
    const bson_t *doc;
    out[0] = '\0';
    while (md_cursor_next(cur, &doc)) {
        if (out[0])
            strcat(out, ",");
        strncat(out, ptt_str(doc, field), sizeof out - strlen(out) - 2);
    }
    md_error err;
    cr_assert(!md_cursor_error(cur, &err), "%s", err.message);
    md_cursor_destroy(cur);
    return out;
}

static void catalog(ptt_db *t)
{
    md_error err;
    const char *jazz[] = {"Jazz", "General"}, *rock[] = {"Rock"};
    const char *matrix[] = {"Keanu Reeves", "Carrie-Anne Moss"}, *few[] = {"Tom Cruise"};
    cr_assert_eq(ap_catalog_create_indexes(t->db, &err), 0, "%s", err.message);
    cr_assert_eq(ap_catalog_add_album(t->db, "00e8da9b", "A Love Supreme", "John Coltrane",
                                      jazz, 2, 100 * DAY, 1200, 1100, &err), 0, "%s",
                 err.message);
    cr_assert_eq(ap_catalog_add_album(t->db, "00e8da9c", "Kind of Blue", "Miles Davis", jazz,
                                      1, 300 * DAY, 1000, 500, &err), 0);
    cr_assert_eq(ap_catalog_add_album(t->db, "00e8da9e", "Abbey Road", "The Beatles", rock, 1,
                                      200 * DAY, 1000, 700, &err), 0);
    cr_assert_eq(ap_catalog_add_film(t->db, "00e8da9d", "The Matrix", matrix, 2, 400 * DAY,
                                     2000, 1500, &err), 0);
    cr_assert_eq(ap_catalog_add_film(t->db, "00e8da9f", "A Few Good Men", few, 1, 50 * DAY,
                                     1500, 1400, &err), 0);
    cr_assert_eq(ap_catalog_add_film(t->db, "00e8daa0", "Hackers", matrix + 1, 1, 500 * DAY,
                                     900, 900, &err), 0);
}

Test(ap_catalog, searches)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        catalog(&t);
        /* pct_savings: Kind of Blue 50, Abbey Road 30, Matrix 25 (not > 25) */
        cr_assert_str_eq(list(ap_catalog_discounted(t.db, 25), "sku"), "00e8da9c,00e8da9e");
        cr_assert_str_eq(list(ap_catalog_by_genre(t.db, "Jazz"), "title"),
                         "Kind of Blue,A Love Supreme");
        cr_assert_str_eq(list(ap_catalog_by_genre(t.db, "jazz"), "title"), "");
        cr_assert_str_eq(list(ap_catalog_by_actor(t.db, "Carrie-Anne Moss"), "title"),
                         "Hackers,The Matrix");
        cr_assert_str_eq(list(ap_catalog_title_regex(t.db, ".*hacker.*", "i"), "title"),
                         "Hackers");
        cr_assert_str_eq(list(ap_catalog_title_regex(t.db, ".*hacker.*", ""), "title"), "");
        cr_assert_str_eq(list(ap_catalog_title_regex(t.db, "^A Few Good.*", ""), "title"),
                         "A Few Good Men");
        /* the album "A Love Supreme" is not a film */
        cr_assert_str_eq(list(ap_catalog_title_regex(t.db, "^A ", ""), "title"),
                         "A Few Good Men");
    }
}

Test(ap_catalog, index_choice)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        catalog(&t);
        md_error err;
        ap_plan p;
        bson_t *f = BCON_NEW("pricing.pct_savings", "{", "$gt", BCON_INT32(25), "}");
        bson_t *s = BCON_NEW("pricing.pct_savings", BCON_INT32(-1));
        cr_assert_eq(ap_explain_find(t.db, AP_CATALOG_PRODUCTS, f, s, NULL, &p, &err), 0, "%s",
                     err.message);
        cr_assert_str_eq(p.index, "pricing.pct_savings_1");
        cr_assert(!p.sort_in_memory, "an index is read in either direction");
        cr_assert_eq(p.n_returned, 2);
        bson_destroy(f);
        bson_destroy(s);
        f = BCON_NEW("type", "Audio Album", "details.genre", "Jazz");
        s = BCON_NEW("details.issue_date", BCON_INT32(-1));
        cr_assert_eq(ap_explain_find(t.db, AP_CATALOG_PRODUCTS, f, s, NULL, &p, &err), 0);
        cr_assert_str_eq(p.index, "type_1_details.genre_1_details.issue_date_-1");
        cr_assert_eq(p.keys_examined, 2);
        bson_destroy(f);
        bson_destroy(s);
        /* The title regexes over the chapter's {type, issue_date, title}. */
        bson_t tf, ts;
        ap_catalog_title_query("^A Few Good.*", "", &tf, &ts);
        cr_assert_eq(ap_explain_find(t.db, AP_CATALOG_PRODUCTS, &tf, &ts, NULL, &p, &err), 0);
        cr_assert_str_eq(p.index, "type_1_details.issue_date_-1_title_1");
        cr_assert(!p.sort_in_memory);
        cr_assert_eq(p.n_returned, 1);
        bson_destroy(&tf);
        bson_destroy(&ts);
        /* An index led by the title: the anchored prefix seeks, the
         * unanchored and the case-insensitive one scan every key. */
        bson_t *k = BCON_NEW("title", BCON_INT32(1));
        cr_assert_eq(pt_ensure_index(t.db, AP_CATALOG_PRODUCTS, k, NULL, &err), 0);
        bson_destroy(k);
        f = BCON_NEW("title", "{", "$regex", "^A Few Good", "}");
        cr_assert_eq(ap_explain_find(t.db, AP_CATALOG_PRODUCTS, f, NULL, NULL, &p, &err), 0);
        cr_assert_str_eq(p.index, "title_1");
        cr_assert_leq(p.keys_examined, 2);
        cr_assert_eq(p.n_returned, 1);
        bson_destroy(f);
        f = BCON_NEW("title", "{", "$regex", "^a few good", "$options", "i", "}");
        cr_assert_eq(ap_explain_find(t.db, AP_CATALOG_PRODUCTS, f, NULL, NULL, &p, &err), 0);
        cr_assert_eq(p.n_returned, 1);
        cr_assert(p.collscan || p.keys_examined == 6, "keys %lld", (long long)p.keys_examined);
        bson_destroy(f);
    }
}

static bson_t read_cat(ptt_db *t, const char *slug)
{
    bson_t d;
    md_error err;
    cr_assert_eq(ap_category_read(t->db, slug, &d, &err), 0, "%s", err.message);
    return d;
}

Test(ap_category, breadcrumbs_reparent_rename)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        bson_oid_t ragtime, bop, modal, swing, x;
        cr_assert_eq(ap_category_create_indexes(t.db, &err), 0, "%s", err.message);
        cr_assert_eq(ap_category_add(t.db, "Ragtime", "ragtime", NULL, &ragtime, &err), 0);
        cr_assert_eq(ap_category_add(t.db, "Bop", "bop", &ragtime, &bop, &err), 0);
        cr_assert_eq(ap_category_add(t.db, "Modal Jazz", "modal-jazz", &bop, &modal, &err), 0);
        cr_assert_eq(ap_category_add(t.db, "Swing", "swing", &ragtime, &swing, &err), 0);
        cr_assert_eq(ap_category_add(t.db, "Dup", "bop", &ragtime, &x, &err), MD_EDUPKEY,
                     "the unique slug index");
        bson_t d = read_cat(&t, "modal-jazz");
        cr_assert_str_eq(ptt_str(&d, "name"), "Modal Jazz");
        cr_assert(!ptt_has(&d, "_id"), "the projection excludes _id");
        cr_assert(!ptt_has(&d, "ancestors.0._id"));
        cr_assert_str_eq(ptt_str(&d, "ancestors.0.slug"), "bop");
        cr_assert_str_eq(ptt_str(&d, "ancestors.1.name"), "Ragtime");
        cr_assert(!ptt_has(&d, "ancestors.2"));
        bson_destroy(&d);
        /* Re-parent Bop under Swing: Bop and Modal Jazz rewritten. */
        int64_t n = 0;
        cr_assert_eq(ap_category_reparent(t.db, &bop, &swing, &n, &err), 0, "%s", err.message);
        cr_assert_eq(n, 2);
        d = read_cat(&t, "modal-jazz");
        cr_assert_str_eq(ptt_str(&d, "ancestors.0.slug"), "bop");
        cr_assert_str_eq(ptt_str(&d, "ancestors.1.slug"), "swing");
        cr_assert_str_eq(ptt_str(&d, "ancestors.2.slug"), "ragtime");
        bson_destroy(&d);
        /* A cycle is refused. */
        cr_assert_eq(ap_category_reparent(t.db, &swing, &modal, NULL, &err), MD_EINVAL);
        cr_assert_eq(err.code, MD_CODE_GRAPH_CONTAINS_CYCLE);
        /* Rename: the positional multi update reaches the descendant. */
        cr_assert_eq(ap_category_rename(t.db, &bop, "BeBop", &n, &err), 0);
        cr_assert_eq(n, 1);
        d = read_cat(&t, "modal-jazz");
        cr_assert_str_eq(ptt_str(&d, "ancestors.0.name"), "BeBop");
        cr_assert_str_eq(ptt_str(&d, "ancestors.1.name"), "Swing");
        bson_destroy(&d);
        d = read_cat(&t, "bop");
        cr_assert_str_eq(ptt_str(&d, "name"), "BeBop");
        bson_destroy(&d);
        ap_plan p;
        bson_t *f = BCON_NEW("ancestors._id", BCON_OID(&bop));
        cr_assert_eq(ap_explain_find(t.db, AP_CATEGORIES, f, NULL, NULL, &p, &err), 0);
        cr_assert_str_eq(p.index, "ancestors._id_1");
        cr_assert_eq(p.n_returned, 1);
        bson_destroy(f);
        bson_oid_init(&x, NULL);
        cr_assert_eq(ap_category_rename(t.db, &x, "None", NULL, &err), MD_NOTFOUND);
    }
}
