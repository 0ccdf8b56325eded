/*
 * metadata.c -- 5.3 Metadata: arbitrary per-item metadata (a camera's EXIF
 * fields, say) stored as an array of {key, value} subdocuments, so that one
 * compound multikey index serves a query on any field.
 *
 * The operations are the book's (collection "images"; the book's db
 * "supershot" is the md_db itself):
 *
 *   insert        {metadata: [{key: "File Name", value: "img_1771.jpg"},
 *                  {key: "File size", value: 32764}, ...]}
 *   tags          findOne({tags: {$all: ["appliance", "school", "book"]}})
 *   one field     findOne({metadata: {$elemMatch: {key: "File Name",
 *                                                  value: "img_1771.jpg"}}})
 *   many fields   find({metadata: {$all: [{$elemMatch: {key: "MIME type",
 *                   value: "image/jpeg"}}, {$elemMatch: {key: "Flash",
 *                   value: "No, auto"}}]}})   (one $elemMatch per pair: the
 *                   book's point that several pairs in one $elemMatch
 *                   object keep only the last)
 *   index         ensureIndex({"metadata.key": 1, "metadata.value": 1})
 *
 * The scenario "metadata" is the simulator's metadata_access_scenario.js:
 * setup creates the index and numberOfObjects (100000; 2000 when quick)
 * documents {_id: i, metadata: [{key: "field_0_<i>", value: "<i>_value"},
 * {key: "field_1_<i>", value: "<i>_value"}]}; a user picks a random i and
 * finds its document by both fields ($all of two $elemMatch), reading the
 * whole result.  A user fails unless exactly document i comes back; the
 * check reads every document back and compares it with what setup wrote.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "patterns.h"

#define IMAGES_COLL "images"

/* ---- operations ---------------------------------------------------------- */

int pt_metadata_create_indexes(md_db *db, md_error *err)
{
    bson_t *keys = BCON_NEW("metadata.key", BCON_INT32(1), "metadata.value", BCON_INT32(1));
    int rc = pt_ensure_index(db, IMAGES_COLL, keys, NULL, err);
    bson_destroy(keys);
    return rc;
}

/* Append {key, value} pairs as the array `field` of `doc`. */
static void append_kvs(bson_t *doc, const char *field, const pt_metadata_kv *kvs, int n)
{
    bson_t arr, kv;
    char idx[16];
    const char *k;
    bson_append_array_begin(doc, field, -1, &arr);
    for (int i = 0; i < n; i++) {
        bson_uint32_to_string((uint32_t)i, &k, idx, sizeof idx);
        bson_append_document_begin(&arr, k, -1, &kv);
        BSON_APPEND_UTF8(&kv, "key", kvs[i].key);
        BSON_APPEND_VALUE(&kv, "value", &kvs[i].value);
        bson_append_document_end(&arr, &kv);
    }
    bson_append_array_end(doc, &arr);
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

int pt_metadata_insert(md_db *db, const bson_value_t *id, const pt_metadata_kv *kvs, int n,
                       md_error *err)
{
    bson_t cmd = BSON_INITIALIZER, docs, doc, reply;
    BSON_APPEND_UTF8(&cmd, "insert", IMAGES_COLL);
    BSON_APPEND_ARRAY_BEGIN(&cmd, "documents", &docs);
    BSON_APPEND_DOCUMENT_BEGIN(&docs, "0", &doc);
    if (id)
        BSON_APPEND_VALUE(&doc, "_id", id);
    append_kvs(&doc, "metadata", kvs, n);
    bson_append_document_end(&docs, &doc);
    bson_append_array_end(&cmd, &docs);
    int rc = md_db_command(db, &cmd, &reply, err);
    if (!rc)
        rc = write_error(&reply, err);
    bson_destroy(&reply);
    bson_destroy(&cmd);
    return rc;
}

int pt_metadata_find_one_by_tags(md_db *db, const char *const *tags, int n, bson_t *doc,
                                 md_error *err)
{
    bson_t filter = BSON_INITIALIZER, tg, all;
    char idx[16];
    const char *k;
    BSON_APPEND_DOCUMENT_BEGIN(&filter, "tags", &tg);
    BSON_APPEND_ARRAY_BEGIN(&tg, "$all", &all);
    for (int i = 0; i < n; i++) {
        bson_uint32_to_string((uint32_t)i, &k, idx, sizeof idx);
        bson_append_utf8(&all, k, -1, tags[i], -1);
    }
    bson_append_array_end(&tg, &all);
    bson_append_document_end(&filter, &tg);
    int rc = pt_find_one(db, IMAGES_COLL, &filter, NULL, doc, err);
    bson_destroy(&filter);
    return rc;
}

/* {$elemMatch: {key: kv->key, value: kv->value}} as `field` of `parent`. */
static void append_elem_match(bson_t *parent, const char *field, const pt_metadata_kv *kv)
{
    bson_t em, q;
    bson_append_document_begin(parent, field, -1, &em);
    BSON_APPEND_DOCUMENT_BEGIN(&em, "$elemMatch", &q);
    BSON_APPEND_UTF8(&q, "key", kv->key);
    BSON_APPEND_VALUE(&q, "value", &kv->value);
    bson_append_document_end(&em, &q);
    bson_append_document_end(parent, &em);
}

int pt_metadata_find_one(md_db *db, const pt_metadata_kv *kv, bson_t *doc, md_error *err)
{
    bson_t filter = BSON_INITIALIZER;
    append_elem_match(&filter, "metadata", kv);
    int rc = pt_find_one(db, IMAGES_COLL, &filter, NULL, doc, err);
    bson_destroy(&filter);
    return rc;
}

void pt_metadata_filter(const pt_metadata_kv *kvs, int n, bson_t *filter)
{
    bson_init(filter);
    if (n == 1) {
        append_elem_match(filter, "metadata", &kvs[0]);
        return;
    }
    bson_t md, all;
    char idx[16];
    const char *k;
    BSON_APPEND_DOCUMENT_BEGIN(filter, "metadata", &md);
    BSON_APPEND_ARRAY_BEGIN(&md, "$all", &all);
    for (int i = 0; i < n; i++) {
        bson_uint32_to_string((uint32_t)i, &k, idx, sizeof idx);
        append_elem_match(&all, k, &kvs[i]);
    }
    bson_append_array_end(&md, &all);
    bson_append_document_end(filter, &md);
}

md_cursor *pt_metadata_find(md_db *db, const pt_metadata_kv *kvs, int n)
{
    bson_t filter;
    pt_metadata_filter(kvs, n, &filter);
    md_collection *c = md_db_get_collection(db, IMAGES_COLL);
    md_cursor *cur = md_collection_find_with_opts(c, &filter, NULL);
    md_collection_destroy(c);
    bson_destroy(&filter);
    return cur;
}

/* ---- the scenario: metadata_access_scenario.js ---------------------------- */

#define MD_OBJECTS 100000
#define MD_OBJECTS_QUICK 2000
#define MD_BATCH 1000

typedef struct metadata_state {
    int64_t objects; /* documents _id 0 .. objects - 1 */
} metadata_state;

/* The two pairs of object i, in strings the caller provides. */
static void object_kvs(int64_t i, pt_metadata_kv kv[2], char key0[32], char key1[32],
                       char value[32])
{
    snprintf(key0, 32, "field_0_%lld", (long long)i);
    snprintf(key1, 32, "field_1_%lld", (long long)i);
    snprintf(value, 32, "%lld_value", (long long)i);
    for (int k = 0; k < 2; k++) {
        kv[k].key = k ? key1 : key0;
        kv[k].value.value_type = BSON_TYPE_UTF8;
        kv[k].value.value.v_utf8.str = value;
        kv[k].value.value.v_utf8.len = (uint32_t)strlen(value);
    }
}

/* Insert objects [from, to) in one insert command. */
static int seed_batch(md_db *db, int64_t from, int64_t to, md_error *err)
{
    bson_t cmd = BSON_INITIALIZER, docs, doc, reply;
    char idx[16], key0[32], key1[32], value[32];
    const char *k;
    pt_metadata_kv kv[2];
    BSON_APPEND_UTF8(&cmd, "insert", IMAGES_COLL);
    BSON_APPEND_ARRAY_BEGIN(&cmd, "documents", &docs);
    for (int64_t i = from; i < to; i++) {
        bson_uint32_to_string((uint32_t)(i - from), &k, idx, sizeof idx);
        bson_append_document_begin(&docs, k, -1, &doc);
        BSON_APPEND_INT32(&doc, "_id", (int32_t)i);
        object_kvs(i, kv, key0, key1, value);
        append_kvs(&doc, "metadata", kv, 2);
        bson_append_document_end(&docs, &doc);
    }
    bson_append_array_end(&cmd, &docs);
    int rc = md_db_command(db, &cmd, &reply, err);
    if (!rc)
        rc = write_error(&reply, err);
    bson_destroy(&reply);
    bson_destroy(&cmd);
    return rc;
}

static int metadata_setup(md_db *db, const pt_setup_args *a, void **state, md_error *err)
{
    *state = NULL;
    metadata_state *s = calloc(1, sizeof *s);
    if (!s)
        return md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
    s->objects = a->quick ? MD_OBJECTS_QUICK : MD_OBJECTS;
    int rc = pt_drop_if_exists(db, IMAGES_COLL, err);
    if (!rc)
        rc = pt_metadata_create_indexes(db, err);
    for (int64_t i = 0; !rc && i < s->objects; i += MD_BATCH)
        rc = seed_batch(db, i, i + MD_BATCH < s->objects ? i + MD_BATCH : s->objects, err);
    if (rc) {
        free(s);
        return rc;
    }
    *state = s;
    return 0;
}

/* metadata: find a random object by both of its fields. */
static int metadata_run(pt_user *u, md_error *err)
{
    metadata_state *s = u->state;
    int64_t id = (int64_t)pt_rand_below(u, (uint64_t)s->objects);
    char key0[32], key1[32], value[32];
    pt_metadata_kv kv[2];
    object_kvs(id, kv, key0, key1, value);
    md_cursor *cur = pt_metadata_find(u->db, kv, 2);
    const bson_t *doc;
    int n = 0, rc = 0;
    bool right = true;
    bson_iter_t it;
    while (md_cursor_next(cur, &doc)) {
        n++;
        right &= bson_iter_init_find(&it, doc, "_id") && BSON_ITER_HOLDS_INT32(&it) &&
                 bson_iter_int32(&it) == id;
    }
    if (md_cursor_error(cur, err))
        rc = MD_ERROR;
    else if (n != 1 || !right)
        rc = md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR,
                          "metadata query for object %lld returned %d documents%s",
                          (long long)id, n, right ? "" : " (the wrong one)");
    md_cursor_destroy(cur);
    return rc;
}

/* Document i holds exactly the two pairs setup wrote. */
static bool object_intact(const bson_t *doc, int64_t i)
{
    char key0[32], key1[32], value[32], want[256];
    pt_metadata_kv kv[2];
    object_kvs(i, kv, key0, key1, value);
    snprintf(want, sizeof want,
             "{ \"_id\" : %lld, \"metadata\" : [ { \"key\" : \"%s\", \"value\" : \"%s\" }, "
             "{ \"key\" : \"%s\", \"value\" : \"%s\" } ] }",
             (long long)i, key0, value, key1, value);
    char *got = bson_as_relaxed_extended_json(doc, NULL);
    bool ok = got && strcmp(got, want) == 0;
    bson_free(got);
    return ok;
}

static int metadata_check(md_db *db, void *state, md_error *err)
{
    metadata_state *s = state;
    bool *seen = calloc((size_t)s->objects, sizeof *seen);
    if (!seen)
        return md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
    md_collection *c = md_db_get_collection(db, IMAGES_COLL);
    md_cursor *cur = md_collection_find_with_opts(c, NULL, NULL);
    const bson_t *doc;
    bson_iter_t it;
    int rc = 0;
    while (!rc && md_cursor_next(cur, &doc)) {
        int64_t i = -1;
        if (bson_iter_init_find(&it, doc, "_id") && BSON_ITER_HOLDS_INT32(&it))
            i = bson_iter_int32(&it);
        if (i < 0 || i >= s->objects || seen[i] || !object_intact(doc, i))
            rc = md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR,
                              "object %lld is not what setup wrote", (long long)i);
        else
            seen[i] = true;
    }
    if (!rc && md_cursor_error(cur, err))
        rc = MD_ERROR;
    for (int64_t i = 0; !rc && i < s->objects; i++)
        if (!seen[i])
            rc = md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR, "object %lld is lost",
                              (long long)i);
    md_cursor_destroy(cur);
    md_collection_destroy(c);
    free(seen);
    return rc;
}

static const pt_scenario metadata_scenario = {
    .name = "metadata",
    .title = "Metadata Read Simulation",
    .script = "examples/scripts/single_or_replset/metadata/metadata_access_scenario.js",
    .nops = 1,
    .ops = {
        {.name = "metadata",
         .users = 1000,
         .decides = true,
         .run = metadata_run,
         .book_mmap = {40.874, 0.954, 0.291, 1.187, 1.367, 1.619, 0.441, 4.885},
         .book_wt = {40.01, 0.992, 0.318, 1.232, 1.431, 1.706, 0.484, 9.827}},
    },
    .setup = metadata_setup,
    .check = metadata_check,
};

const pt_pattern pt_pattern_metadata = {
    .name = "metadata",
    .title = "Metadata",
    .section = "5.3",
    .book_winner = "tie",
    .book_reason = "\"not much difference between the MMAP and WiredTiger storage engines "
                   "since this is mainly a read only workload\" (MMAP marginally ahead: "
                   "0.954 vs 0.992 ms)",
    .nscenarios = 1,
    .scenarios = {&metadata_scenario},
};
