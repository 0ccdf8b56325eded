/*
 * test_ap_embed.c -- Ch.1 To Embed or Reference (patterns/ap_embed.c) and
 * Ch.2 Polymorphic Schemas (patterns/ap_polymorphic.c) on every engine:
 * the phone book both ways (read, grow, delete), one author's comments,
 * the many-to-many compromise, the wiki's nodes found by url, the three
 * migrations, the [name, value] properties through their index, and the
 * use cases' measured claims.
 */
#include "ap.h"
#include "pt_test_util.h"

Test(ap_embed, phone_book_both_ways)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        md_error err;
        int n;
        const char *nums[] = {"555-333-3456", "555-334-3411"};
        cr_assert_eq(ap_embed_create_indexes(t.db, &err), 0);
        cr_assert_eq(ap_embed_add_contact(t.db, 3, "Jenny", "01209", nums, 2, &err), 0);
        cr_assert_eq(ap_ref_add_contact(t.db, 3, "Jenny", "01209", nums, 2, &err), 0);
        cr_assert_eq(ap_embed_read_contact(t.db, 3, &n, &err), 0);
        cr_assert_eq(n, 2);
        cr_assert_eq(ap_ref_read_contact(t.db, 3, &n, &err), 0);
        cr_assert_eq(n, 2);
        cr_assert_eq(ap_embed_add_number(t.db, 3, "555-000-0000", &err), 0);
        cr_assert_eq(ap_ref_add_number(t.db, 3, "555-000-0000", &err), 0);
        cr_assert_eq(ap_embed_read_contact(t.db, 3, &n, &err), 0);
        cr_assert_eq(n, 3);
        cr_assert_eq(ap_ref_read_contact(t.db, 3, &n, &err), 0);
        cr_assert_eq(n, 3);
        cr_assert_eq(ap_embed_add_number(t.db, 4, "x", &err), MD_NOTFOUND);
        cr_assert_eq(ap_embed_read_contact(t.db, 4, &n, &err), MD_NOTFOUND);
        cr_assert_eq(ap_embed_delete_contact(t.db, 3, &err), 0);
        cr_assert_eq(ap_ref_delete_contact(t.db, 3, &err), 0);
        cr_assert_eq(ptt_count(&t, "contacts", "{}"), 0);
        cr_assert_eq(ptt_count(&t, "contacts_ref", "{}"), 0);
        cr_assert_eq(ptt_count(&t, "numbers", "{}"), 0);
    }
}

Test(ap_embed, comments_by_author_and_many_to_many)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        md_error err;
        int n;
        bson_destroy(PTT_OK(&t, "{\"insert\": \"posts\", \"documents\": ["
                                "{\"_id\": \"First Post\", \"author\": \"Rick\", \"text\": \"x\", "
                                "\"comments\": [{\"author\": \"Stuart\", \"text\": \"Nice post!\"}, "
                                "{\"author\": \"Mark\", \"text\": \"Meh\"}, {\"author\": \"Stuart\", "
                                "\"text\": \"Again\"}]}, {\"_id\": \"Second\", \"author\": \"Rick\", "
                                "\"comments\": [{\"author\": \"Mark\", \"text\": \"?\"}]}]}"));
        cr_assert_eq(ap_embed_comments_by(t.db, "Stuart", &n, &err), 0);
        cr_assert_eq(n, 2, "[%s]", t.engine);
        cr_assert_eq(ap_embed_comments_by(t.db, "Mark", &n, &err), 0);
        cr_assert_eq(n, 2);
        bson_destroy(PTT_OK(&t, "{\"insert\": \"product\", \"documents\": [{\"_id\": "
                                "\"My Product\", \"category_ids\": [\"My Category\", \"Other\"]}]}"));
        bson_destroy(PTT_OK(&t, "{\"insert\": \"category\", \"documents\": [{\"_id\": "
                                "\"My Category\"}, {\"_id\": \"Other\"}, {\"_id\": \"Third\"}]}"));
        cr_assert_eq(ap_embed_product_categories(t.db, "My Product", &n, &err), 0);
        cr_assert_eq(n, 2);
        cr_assert_eq(ap_embed_product_categories(t.db, "None", &n, &err), MD_NOTFOUND);
        /* Mutual embedding: saving the product updates each embedded copy. */
        bson_destroy(PTT_OK(&t, "{\"update\": \"category\", \"updates\": [{\"q\": {\"_id\": "
                                "{\"$in\": [\"My Category\", \"Other\"]}}, \"u\": {\"$set\": "
                                "{\"products\": [{\"_id\": \"Zed\"}, {\"_id\": \"My Product\", "
                                "\"price\": 1}]}}, \"multi\": true}]}"));
        bson_t *p = BCON_NEW("_id", BCON_UTF8("My Product"), "price", BCON_INT32(2),
                             "category_ids", "[", BCON_UTF8("My Category"), BCON_UTF8("Other"),
                             "]");
        int64_t cats = 0;
        cr_assert_eq(ap_embed_save_product(t.db, p, &cats, &err), 0, "[%s] %s", t.engine,
                     err.message);
        bson_destroy(p);
        cr_assert_eq(cats, 2);
        cr_assert_eq(ptt_count(&t, "category", "{\"products\": {\"$elemMatch\": {\"_id\": "
                                               "\"My Product\", \"price\": 2}}}"), 2);
        cr_assert_eq(ptt_count(&t, "product", "{\"price\": 2}"), 1);
    }
}

Test(ap_embed, usecase_claims)
{
    ap_args a = {.quick = true, .seed = 1};
    ap_result r;
    md_error err;
    cr_assert_eq(ap_run_usecase(&ap_usecase_embed, "mmapv1", &a, &r, &err), 0);
    cr_assert_eq(r.rc, 0, "%s", r.error);
    cr_assert_gt(ap_get(&r, "grow_embedded_moves"), 0);
    cr_assert_eq(ap_get(&r, "read_referenced_docs"), 11);
    cr_assert_eq(ap_get(&r, "comments_by_embedded_found"),
                 ap_get(&r, "comments_by_referenced_found"));
    cr_assert_eq(ap_run_usecase(&ap_usecase_embed, "btree", &a, &r, &err), 0);
    cr_assert_eq(r.rc, 0, "%s", r.error);
    cr_assert_gt(ap_get(&r, "grow_embedded_bytes"), ap_get(&r, "grow_referenced_bytes"));
}

Test(ap_polymorphic, nodes_migrations_and_properties)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t)
    {
        md_error err;
        bson_t node;
        int64_t m, n;
        static const unsigned char jpg[4] = {0xff, 0xd8, 0xff, 0xe0};
        cr_assert_eq(ap_poly_create_indexes(t.db, &err), 0);
        cr_assert_eq(ap_poly_add_page(t.db, 1, "Welcome", "/", "Welcome to my wiki.", &err), 0);
        cr_assert_eq(ap_poly_add_photo(t.db, 3, "Cool Photo", "/photo.jpg", jpg, 4, &err), 0);
        cr_assert_neq(ap_poly_add_page(t.db, 4, "Dup", "/", "x", &err), 0, "url is unique");
        cr_assert_eq(ap_poly_find_by_url(t.db, "/photo.jpg", &node, &err), 0);
        cr_assert_str_eq(ptt_str(&node, "type"), "photo");
        cr_assert_str_eq(ptt_str(&node, "short_description"), "", "lazy default");
        bson_destroy(&node);
        cr_assert_eq(ap_poly_find_by_url(t.db, "/nope", &node, &err), MD_NOTFOUND);
        bson_destroy(&node);
        for (int i = 10; i < 260; i++) {
            char url[32];
            snprintf(url, sizeof url, "/p%d", i);
            cr_assert_eq(ap_poly_add_page(t.db, i, "P", url, "text", &err), 0);
        }
        cr_assert_eq(ap_poly_migrate_batch(t.db, &m, &err), 0);
        cr_assert_eq(m, 100);
        cr_assert_eq(ptt_count(&t, "nodes", "{\"short_description\": {\"$exists\": false}}"), 152);
        cr_assert_eq(ap_poly_migrate_eager(t.db, &m, &err), 0);
        cr_assert_eq(m, 252);
        cr_assert_eq(ap_poly_migrate_batch(t.db, &m, &err), 0);
        cr_assert_eq(m, 0, "nothing left");
        static const char *const a[][2] = {{"Seek Time", "5ms"}, {"Rotational Speed", "15k RPM"}};
        static const char *const b[][2] = {{"Seek Time", "9ms"}};
        cr_assert_eq(ap_poly_add_product(t.db, 1, a, 2, &err), 0);
        cr_assert_eq(ap_poly_add_product(t.db, 2, b, 1, &err), 0);
        cr_assert_eq(ap_poly_find_by_property(t.db, "Seek Time", "5ms", &n, &err), 0);
        cr_assert_eq(n, 1);
        cr_assert_eq(ap_poly_find_by_property(t.db, "5ms", "Seek Time", &n, &err), 0);
        cr_assert_eq(n, 0, "a pair is ordered");
        ap_plan x;
        bson_t *q = BCON_NEW("properties", "[", BCON_UTF8("Seek Time"), BCON_UTF8("9ms"), "]");
        cr_assert_eq(ap_explain_find(t.db, "products", q, NULL, NULL, &x, &err), 0);
        cr_assert_str_eq(x.index, "properties_1", "[%s]", t.engine);
        cr_assert_eq(x.n_returned, 1);
        bson_destroy(q);
    }
}

Test(ap_polymorphic, usecase_claims)
{
    ap_args a = {.quick = true, .seed = 1};
    static const char *const engines[] = {"mmapv1", "btree"};
    for (int e = 0; e < 2; e++) {
        ap_result r;
        md_error err;
        char m[512];
        cr_assert_eq(ap_run_usecase(&ap_usecase_polymorphic, engines[e], &a, &r, &err), 0);
        cr_assert_eq(r.rc, 0, "[%s] %s", engines[e], r.error);
        for (int i = 0; i < ap_usecase_polymorphic.nclaims; i++)
            cr_assert_eq(ap_claim_verdict(&ap_usecase_polymorphic, i, &r, m, sizeof m), AP_HOLDS,
                         "[%s] claim %d: %s", engines[e], i + 1, m);
    }
}
