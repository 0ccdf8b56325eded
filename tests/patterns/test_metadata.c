/*
 * test_metadata.c -- 5.3 Metadata (patterns/metadata.c) on every engine:
 * the book's image document with values of mixed types, lookups by one
 * pair ($elemMatch), by several ($all of $elemMatch) and by tags ($all),
 * the compound multikey index and its use in the plan, and the "metadata"
 * scenario from several threads with its check.
 */
#include "pt_test_util.h"

static pt_metadata_kv kv_str(const char *key, const char *value)
{
    pt_metadata_kv kv = {.key = key};
    kv.value.value_type = BSON_TYPE_UTF8;
    kv.value.value.v_utf8.str = (char *)value;
    kv.value.value.v_utf8.len = (uint32_t)strlen(value);
    return kv;
}

static pt_metadata_kv kv_int(const char *key, int32_t value)
{
    pt_metadata_kv kv = {.key = key};
    kv.value.value_type = BSON_TYPE_INT32;
    kv.value.value.v_int32 = value;
    return kv;
}

/* The book's example image (section 5.3's schema), as _id `id`. */
static void insert_image(ptt_db *t, int32_t id, const char *file, const char *mime)
{
    bson_t *size_doc = BCON_NEW("width", BCON_INT32(480), "height", BCON_INT32(360));
    pt_metadata_kv kvs[12] = {
        kv_str("File Name", file),
        kv_int("File size", 32764),
        kv_str("MIME type", mime),
        {.key = "Image size"},
        kv_str("Camera make", "Canon"),
        kv_str("Camera model", "Canon PowerShot S40"),
        {.key = "Image timestamp"},
        kv_str("Image number", "117-1771"),
        kv_str("Exposure time", "1/500 s"),
        kv_str("Aperture", "F4.9"),
        kv_str("Exposure bias", "0 EV"),
        kv_str("Flash", "No, auto"),
    };
    kvs[3].value.value_type = BSON_TYPE_DOCUMENT;
    kvs[3].value.value.v_doc.data = (uint8_t *)bson_get_data(size_doc);
    kvs[3].value.value.v_doc.data_len = size_doc->len;
    kvs[6].value.value_type = BSON_TYPE_DATE_TIME;
    kvs[6].value.value.v_datetime = 1388570460000; /* 2014-01-01T10:01:00Z */
    bson_value_t v = {.value_type = BSON_TYPE_INT32, .value.v_int32 = id};
    md_error err;
    cr_assert_eq(pt_metadata_insert(t->db, &v, kvs, 12, &err), 0, "[%s] insert: %s", t->engine,
                 err.message);
    bson_destroy(size_doc);
}

static int32_t id_of(const bson_t *doc)
{
    bson_iter_t it;
    cr_assert(bson_iter_init_find(&it, doc, "_id") && BSON_ITER_HOLDS_INT32(&it));
    return bson_iter_int32(&it);
}

/* The _ids a pt_metadata_find returns, as a bit mask (ids < 32). */
static uint32_t found_ids(ptt_db *t, const pt_metadata_kv *kvs, int n)
{
    md_cursor *cur = pt_metadata_find(t->db, kvs, n);
    const bson_t *doc;
    uint32_t mask = 0;
    while (md_cursor_next(cur, &doc))
        mask |= 1u << id_of(doc);
    md_error err;
    cr_assert(!md_cursor_error(cur, &err), "[%s] find: %s", t->engine, err.message);
    md_cursor_destroy(cur);
    return mask;
}

Test(pt_metadata, lookups_by_one_or_several_pairs)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        cr_assert_eq(pt_metadata_create_indexes(t.db, &err), 0, "%s", err.message);
        insert_image(&t, 1, "img_1771.jpg", "image/jpeg");
        insert_image(&t, 2, "img_1772.png", "image/png");
        insert_image(&t, 3, "img_1773.jpg", "image/jpeg");

        /* findOne by one pair */
        bson_t doc;
        pt_metadata_kv kv = kv_str("File Name", "img_1771.jpg");
        cr_assert_eq(pt_metadata_find_one(t.db, &kv, &doc, &err), 0, "%s", err.message);
        cr_assert_eq(id_of(&doc), 1);
        bson_iter_t it;
        cr_assert(ptt_find(&doc, "metadata.3.value.width", &it) && bson_iter_int32(&it) == 480);
        bson_destroy(&doc);
        /* the pair must be one element: a key with another element's value */
        kv = kv_str("File Name", "image/jpeg");
        cr_assert_eq(pt_metadata_find_one(t.db, &kv, &doc, &err), MD_NOTFOUND, "[%s]", t.engine);
        cr_assert(bson_empty(&doc));
        bson_destroy(&doc);
        /* values of other types */
        kv = kv_int("File size", 32764);
        cr_assert_eq(pt_metadata_find_one(t.db, &kv, &doc, &err), 0);
        bson_destroy(&doc);

        /* several pairs: $all of $elemMatch */
        pt_metadata_kv two[2] = {kv_str("MIME type", "image/jpeg"), kv_str("Flash", "No, auto")};
        cr_assert_eq(found_ids(&t, two, 2), (1u << 1) | (1u << 3), "[%s]", t.engine);
        two[0] = kv_str("MIME type", "image/png");
        cr_assert_eq(found_ids(&t, two, 2), 1u << 2, "[%s]", t.engine);
        two[1] = kv_str("File Name", "img_1771.jpg");
        cr_assert_eq(found_ids(&t, two, 2), 0, "[%s] pairs of two documents matched", t.engine);
        /* the $all form is the one the book builds */
        bson_t filter;
        pt_metadata_filter(two, 2, &filter);
        char *json = bson_as_relaxed_extended_json(&filter, NULL);
        cr_assert_str_eq(json, "{ \"metadata\" : { \"$all\" : [ { \"$elemMatch\" : { \"key\" : "
                               "\"MIME type\", \"value\" : \"image/png\" } }, { \"$elemMatch\" : "
                               "{ \"key\" : \"File Name\", \"value\" : \"img_1771.jpg\" } } ] } }");
        bson_free(json);
        bson_destroy(&filter);
    }
}

Test(pt_metadata, find_one_by_tags)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        bson_destroy(PTT_OK(&t, "{\"insert\": \"images\", \"documents\": [{\"_id\": 1, \"tags\": "
                                "[\"appliance\", \"school\", \"book\", \"pen\"]}, {\"_id\": 2, "
                                "\"tags\": [\"appliance\", \"book\"]}]}"));
        const char *tags[] = {"appliance", "school", "book"};
        bson_t doc;
        cr_assert_eq(pt_metadata_find_one_by_tags(t.db, tags, 3, &doc, &err), 0, "%s",
                     err.message);
        cr_assert_eq(id_of(&doc), 1);
        bson_destroy(&doc);
        const char *none[] = {"appliance", "lamp"};
        cr_assert_eq(pt_metadata_find_one_by_tags(t.db, none, 2, &doc, &err), MD_NOTFOUND);
        bson_destroy(&doc);
    }
}

static void images_for_plans(ptt_db *t)
{
    md_error err;
    cr_assert_eq(pt_metadata_create_indexes(t->db, &err), 0, "%s", err.message);
    for (int i = 1; i <= 20; i++) {
        char file[32];
        snprintf(file, sizeof file, "img_%d.jpg", i);
        insert_image(t, i, file, i % 2 ? "image/jpeg" : "image/png");
    }
}

/* The winning plan of `query` reads the book's index, which is multikey. */
static void assert_metadata_ixscan(ptt_db *t, const char *query)
{
    bson_t *x = ptt_explain(t, query);
    bson_t ix;
    bson_iter_t it;
    char *json = bson_as_relaxed_extended_json(x, NULL);
    cr_assert(ptt_plan_stage(x, "IXSCAN", &ix), "[%s] no IXSCAN: %s", t->engine, json);
    cr_assert_str_eq(ptt_str(&ix, "indexName"), "metadata.key_1_metadata.value_1");
    cr_assert(ptt_find(&ix, "isMultiKey", &it) && bson_iter_as_bool(&it),
              "[%s] the index is multikey: %s", t->engine, json);
    bson_destroy(&ix);
    bson_free(json);
    bson_destroy(x);
}

Test(pt_metadata, the_compound_multikey_index_serves_elem_match)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        images_for_plans(&t);
        bson_t *r = PTT_OK(&t, "{\"listIndexes\": \"images\"}");
        cr_assert_str_eq(ptt_str(r, "cursor.firstBatch.1.name"), "metadata.key_1_metadata.value_1");
        bson_iter_t kit;
        cr_assert(ptt_find(r, "cursor.firstBatch.1.key", &kit) && BSON_ITER_HOLDS_DOCUMENT(&kit));
        const uint8_t *kdata;
        uint32_t klen;
        bson_t key;
        bson_iter_document(&kit, &klen, &kdata);
        bson_init_static(&key, kdata, klen);
        char *kjson = bson_as_relaxed_extended_json(&key, NULL);
        cr_assert_str_eq(kjson, "{ \"metadata.key\" : 1, \"metadata.value\" : 1 }");
        bson_free(kjson);
        bson_destroy(r);
        assert_metadata_ixscan(&t, "{\"find\": \"images\", \"filter\": {\"metadata\": "
                                   "{\"$elemMatch\": {\"key\": \"File Name\", \"value\": "
                                   "\"img_7.jpg\"}}}}");
    }
}

/*
 * The book's several-field query, {metadata: {$all: [{$elemMatch: ...},
 * {$elemMatch: ...}]}}, is index-served in MongoDB 3.x (the $all becomes an
 * $and of the $elemMatch predicates, and the first gives the bounds), and
 * so in minidoc's planner.
 */
Test(pt_metadata, the_index_serves_all_of_elem_match)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        images_for_plans(&t);
        assert_metadata_ixscan(&t, "{\"find\": \"images\", \"filter\": {\"metadata\": "
                                   "{\"$all\": [{\"$elemMatch\": {\"key\": \"MIME type\", "
                                   "\"value\": \"image/jpeg\"}}, {\"$elemMatch\": {\"key\": "
                                   "\"Flash\", \"value\": \"No, auto\"}}]}}}");
    }
}

static const pt_scenario *metadata_scenario(void)
{
    cr_assert_eq(pt_pattern_metadata.nscenarios, 1);
    const pt_scenario *sc = pt_pattern_metadata.scenarios[0];
    cr_assert_str_eq(sc->name, "metadata");
    cr_assert_eq(sc->nops, 1);
    cr_assert_str_eq(sc->ops[0].name, "metadata");
    cr_assert_eq(sc->ops[0].users, 1000);
    return sc;
}

Test(pt_metadata, scenario_from_many_threads)
{
    const pt_scenario *sc = metadata_scenario();
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        void *state = NULL;
        pt_setup_args a = {.users = 600, .quick = true};
        cr_assert_eq(sc->setup(t.db, &a, &state, &err), 0, "[%s] setup: %s", t.engine,
                     err.message);
        cr_assert_eq(ptt_count(&t, "images", "{}"), 2000);
        char msg[256];
        int n = ptt_run_op(t.db, state, &sc->ops[0], 8, 600, msg);
        cr_assert_eq(n, 0, "[%s] %s", t.engine, msg);
        cr_assert_eq(sc->check(t.db, state, &err), 0, "[%s] check: %s", t.engine, err.message);
        /* a changed document fails the check, and a user looking for it */
        bson_destroy(PTT_OK(&t, "{\"update\": \"images\", \"updates\": [{\"q\": {\"_id\": 17}, "
                                "\"u\": {\"$set\": {\"metadata.1.value\": \"x\"}}}]}"));
        cr_assert_neq(sc->check(t.db, state, &err), 0, "[%s] a changed object passed", t.engine);
        cr_assert(strstr(err.message, "object 17") != NULL, "%s", err.message);
        bson_destroy(PTT_OK(&t, "{\"delete\": \"images\", \"deletes\": [{\"q\": {\"_id\": 17}, "
                                "\"limit\": 1}]}"));
        cr_assert_neq(sc->check(t.db, state, &err), 0);
        cr_assert(strstr(err.message, "lost") != NULL, "%s", err.message);
        pt_scenario_destroy(sc, state);
    }
}
