/*
 * q_cmd_admin.c -- catalog commands: create, drop, dropDatabase,
 * listCollections, collMod, createIndexes, dropIndexes, listIndexes,
 * convertToCapped, cloneCollectionAsCapped, emptycapped.
 *
 * Each catalog change runs in one engine transaction together with the
 * storage it describes; an index build over existing documents is part of
 * that transaction too, so a unique build that meets a duplicate aborts and
 * leaves neither the index nor its catalog entry behind.
 *
 * Capped collections: create {capped: true, size, max} (checked by
 * q_catalog.c's q_options_capped), convertToCapped {size}, emptycapped.
 *
 * Allocation strategy options (mmapv1; other engines store and ignore them):
 *   create {noPadding: true}                       exact fit
 *   create {usePowerOf2Sizes: false}               paddingFactor (2.x meaning)
 *   create {storageEngine: {mmapv1: {allocationStrategy: "..."}}}
 *   collMod {noPadding: bool} / {usePowerOf2Sizes: bool}
 *
 * btree's block compressor, as MongoDB configured WiredTiger's (checked and
 * passed to the engine by q_catalog.c; kept in the options, so
 * listCollections shows it):
 *   create {storageEngine: {btree: {configString: "block_compressor=zstd"}}}
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "q_geo.h"
#include "q_int.h"
#include "q_text.h"

/* ---- create / drop -------------------------------------------------------------------- */

int q_cmd_create(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err)
{
    const char *name;
    char ns[ENG_IDENT_MAX];
    bson_t options = BSON_INITIALIZER;
    bson_iter_t it;
    int rc = q_cmd_coll_name(db, cmd, false, &name, ns, err);
    if (rc)
        return rc;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    while (bson_iter_next(&it))
        if (!q_is_generic_arg(bson_iter_key(&it)))
            bson_append_iter(&options, NULL, 0, &it);
    rc = q_coll_create(db, name, &options, NULL, err);
    bson_destroy(&options);
    if (!rc && bson_iter_init_find(&it, cmd, "autoIndexId"))
        BSON_APPEND_UTF8(reply, "note",
                         "the autoIndexId option is deprecated and will be removed in a future "
                         "release");
    return rc;
}

int q_cmd_drop(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err)
{
    const char *name;
    char ns[ENG_IDENT_MAX];
    int rc = q_cmd_coll_name(db, cmd, false, &name, ns, err);
    if (rc)
        return rc;
    q_coll *c = q_coll_find(db, name);
    if (!c)
        return q_err(err, MD_NOTFOUND, MD_CODE_NAMESPACE_NOT_FOUND, "ns not found");
    int64_t nidx = (int64_t)c->nidx;
    if ((rc = q_coll_drop(db, c, err)) != 0)
        return rc;
    BSON_APPEND_UTF8(reply, "ns", ns);
    q_append_number(reply, "nIndexesWas", nidx);
    return 0;
}

int q_cmd_drop_database(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err)
{
    int rc = 0;
    while (!rc && db->colls)
        rc = q_coll_drop(db, db->colls, err);
    if (!rc)
        BSON_APPEND_UTF8(reply, "dropped", db->name);
    return rc;
}

/* ---- convertToCapped / emptycapped ------------------------------------------------------ */

/* A capped size field: missing or 0 is 3.x's "invalid command spec". */
static int capped_size_arg(const bson_t *cmd, int64_t *size, md_error *err)
{
    bson_iter_t it;
    double d = bson_iter_init_find(&it, cmd, "size") && BSON_ITER_HOLDS_NUMBER(&it)
                   ? bson_iter_as_double(&it)
                   : 0;
    if (d == 0 || d != d)
        return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE, "invalid command spec");
    if (d < 0)
        return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE, "size has to be >= 0");
    *size = d > 9e18 ? INT64_MAX / 2 : (int64_t)d;
    return 0;
}

/* The collection convertToCapped / cloneCollectionAsCapped copy from. */
static int capped_source(md_db *db, const char *name, const char *ns, q_coll **out,
                         md_error *err)
{
    *out = q_coll_find(db, name);
    return *out ? 0
                : q_err(err, MD_NOTFOUND, MD_CODE_NAMESPACE_NOT_FOUND,
                        "source collection %s does not exist", ns);
}

/* {convertToCapped: "c", size: N}: see q_coll_convert_capped.  A missing or
 * zero size is 3.x's "invalid command spec" (errmsg only there; BadValue
 * here). */
int q_cmd_convert_to_capped(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err)
{
    const char *name;
    char ns[ENG_IDENT_MAX];
    int64_t size;
    int rc = q_cmd_coll_name(db, cmd, false, &name, ns, err);
    if (rc || (rc = capped_size_arg(cmd, &size, err)) != 0)
        return rc;
    q_coll *c;
    if ((rc = capped_source(db, name, ns, &c, err)) != 0)
        return rc;
    return q_coll_convert_capped(db, c, size, NULL, err);
}

/* {cloneCollectionAsCapped: "src", toCollection: "dst", size: N}. */
int q_cmd_clone_capped(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err)
{
    const char *name, *to = NULL;
    char ns[ENG_IDENT_MAX], to_ns[ENG_IDENT_MAX];
    bson_iter_t it;
    int64_t size = 0;
    int rc = q_cmd_coll_name(db, cmd, false, &name, ns, err);
    if (rc)
        return rc;
    if (bson_iter_init_find(&it, cmd, "toCollection") && BSON_ITER_HOLDS_UTF8(&it))
        to = bson_iter_utf8(&it, NULL);
    if (!to || !to[0])
        return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE, "invalid command spec");
    if ((rc = capped_size_arg(cmd, &size, err)) != 0 || (rc = q_ns_make(db, to, to_ns, err)))
        return rc;
    q_coll *c;
    if ((rc = capped_source(db, name, ns, &c, err)) != 0)
        return rc;
    return q_coll_clone_capped(db, c, to, size, err);
}

/* {emptycapped: "c"}: every document and index entry removed. */
int q_cmd_empty_capped(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err)
{
    const char *name;
    char ns[ENG_IDENT_MAX];
    int rc = q_cmd_coll_name(db, cmd, false, &name, ns, err);
    if (rc)
        return rc;
    q_coll *c = q_coll_find(db, name);
    if (!c)
        return q_err(err, MD_NOTFOUND, MD_CODE_NAMESPACE_NOT_FOUND, "no such collection");
    if (!c->capped)
        return q_err(err, MD_EINVAL, MD_CODE_ILLEGAL_OPERATION,
                     "Cannot truncate a non-capped collection");
    return q_coll_empty(db, c, err);
}

/* ---- listCollections ------------------------------------------------------------------ */

static bson_t *coll_info(q_coll *c, bool name_only)
{
    bson_t *d = bson_new(), sub;
    BSON_APPEND_UTF8(d, "name", c->name);
    BSON_APPEND_UTF8(d, "type", "collection");
    if (name_only)
        return d;
    BSON_APPEND_DOCUMENT(d, "options", &c->options);
    BSON_APPEND_DOCUMENT_BEGIN(d, "info", &sub);
    BSON_APPEND_BOOL(&sub, "readOnly", false);
    bson_append_document_end(d, &sub);
    q_index *id = q_index_find(c, "_id_");
    if (id)
        BSON_APPEND_DOCUMENT(d, "idIndex", &id->spec);
    return d;
}

int q_cmd_list_collections(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err)
{
    bson_iter_t it;
    bson_t filter = BSON_INITIALIZER;
    q_matcher *m = NULL;
    bool name_only = false;
    char ns[ENG_IDENT_MAX];
    if (bson_iter_init_find(&it, cmd, "filter") && !BSON_ITER_HOLDS_NULL(&it)) {
        const uint8_t *data;
        uint32_t len;
        if (!BSON_ITER_HOLDS_DOCUMENT(&it))
            return q_err(err, MD_EINVAL, MD_CODE_TYPE_MISMATCH, "\"filter\" must be an object");
        bson_iter_document(&it, &len, &data);
        bson_init_static(&filter, data, len);
    }
    if (bson_iter_init_find(&it, cmd, "nameOnly"))
        name_only = bson_iter_as_bool(&it);
    int rc = q_matcher_new(&filter, &m, err);
    if (rc)
        return rc;
    size_t n = 0, cap = 0;
    bson_t **docs = NULL;
    for (q_coll *c = db->colls; c; c = c->next) {
        bson_t *d = coll_info(c, name_only);
        if (!q_matcher_matches(m, d)) {
            bson_destroy(d);
            continue;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            docs = realloc(docs, cap * sizeof *docs);
            assert(docs);
        }
        docs[n++] = d;
    }
    snprintf(ns, sizeof ns, "%s.$cmd.listCollections", db->name);
    q_cursor_reply_array(reply, ns, docs, n);
    for (size_t i = 0; i < n; i++)
        bson_destroy(docs[i]);
    free(docs);
    q_matcher_destroy(m);
    return 0;
}

/* ---- collMod ----------------------------------------------------------------------- */

/* storageEngine without mmapv1.allocationStrategy (dropped when it empties). */
static void strip_storage_engine(const bson_iter_t *se, bson_t *out)
{
    bson_iter_t it, mm;
    bson_t se_out = BSON_INITIALIZER, mm_out = BSON_INITIALIZER;
    if (!BSON_ITER_HOLDS_DOCUMENT(se))
        return;
    bson_iter_recurse(se, &it);
    while (bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), "mmapv1") != 0 || !BSON_ITER_HOLDS_DOCUMENT(&it)) {
            bson_append_iter(&se_out, NULL, 0, &it);
            continue;
        }
        bson_iter_recurse(&it, &mm);
        while (bson_iter_next(&mm))
            if (strcmp(bson_iter_key(&mm), "allocationStrategy") != 0)
                bson_append_iter(&mm_out, NULL, 0, &mm);
        if (!bson_empty(&mm_out))
            BSON_APPEND_DOCUMENT(&se_out, "mmapv1", &mm_out);
    }
    if (!bson_empty(&se_out))
        BSON_APPEND_DOCUMENT(out, "storageEngine", &se_out);
    bson_destroy(&se_out);
    bson_destroy(&mm_out);
}

/* The options of a collection after collMod {field: value}: every other way
 * of naming a strategy is removed, so that the options say exactly one. */
static void options_with(const bson_t *old, const char *field, bool value, bson_t *out)
{
    bson_iter_t it;
    bson_init(out);
    bson_iter_init(&it, old);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "storageEngine") == 0)
            strip_storage_engine(&it, out);
        else if (strcmp(k, "noPadding") && strcmp(k, "usePowerOf2Sizes") && strcmp(k, "flags"))
            bson_append_iter(out, NULL, 0, &it);
    }
    BSON_APPEND_BOOL(out, field, value);
}

static int coll_mod_apply(md_db *db, q_coll *c, const char *field, bool value, md_error *err)
{
    bson_t opts;
    int alloc;
    eng_txn *t = NULL;
    options_with(&c->options, field, value, &opts);
    int rc = q_options_alloc(&opts, &alloc, err);
    if (!rc)
        rc = q_write_allowed(db, err);
    if (!rc && (rc = eng_txn_begin(db->eng, &t)) != 0)
        q_err_engine(err, rc, "starting a transaction");
    if (rc) {
        bson_destroy(&opts);
        return rc;
    }
    /* copy, never assign: a bson_t's buffer pointer may point into itself */
    bson_t old_opts;
    bson_copy_to(&c->options, &old_opts);
    bson_destroy(&c->options);
    bson_copy_to(&opts, &c->options);
    bson_destroy(&opts);
    int old_alloc = c->alloc;
    c->alloc = alloc;
    rc = eng_rs_set_alloc(c->rs, t, alloc);
    if (rc == MD_ENOTSUP)
        rc = 0; /* engines without allocation strategies keep the option only */
    if (rc)
        q_err_engine(err, rc, "changing the allocation strategy");
    if (!rc)
        rc = q_catalog_put(db, t, c, err);
    if (!rc && (rc = eng_txn_commit(t, false, err)) != 0)
        q_err_engine(err, rc, "committing");
    else if (rc)
        eng_txn_abort(t);
    if (rc) {
        bson_destroy(&c->options);
        bson_copy_to(&old_opts, &c->options);
        bson_destroy(&old_opts);
        c->alloc = old_alloc;
        return q_write_failed(db, rc, err);
    }
    bson_destroy(&old_opts);
    return 0;
}

int q_cmd_coll_mod(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err)
{
    const char *name, *field = NULL;
    char ns[ENG_IDENT_MAX], key[64];
    bson_iter_t it;
    bool value = false;
    int rc = q_cmd_coll_name(db, cmd, false, &name, ns, err);
    if (rc)
        return rc;
    q_coll *c = q_coll_find(db, name);
    if (!c)
        return q_err(err, MD_NOTFOUND, MD_CODE_NAMESPACE_NOT_FOUND, "ns does not exist");
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "noPadding") == 0 || strcmp(k, "usePowerOf2Sizes") == 0) {
            if (!BSON_ITER_HOLDS_BOOL(&it) && !BSON_ITER_HOLDS_NUMBER(&it))
                return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE, "%s must be a boolean", k);
            field = k;
            value = bson_iter_as_bool(&it);
        } else if (!q_is_generic_arg(k)) {
            return q_err(err, MD_EINVAL, MD_CODE_INVALID_OPTIONS, "unknown option to collMod: %s",
                         k);
        }
    }
    if (!field)
        return 0;
    bool np = strcmp(field, "noPadding") == 0;
    bool old = np ? c->alloc == ENG_ALLOC_NOPADDING : c->alloc == ENG_ALLOC_POWEROF2;
    q_coll_lock(db, c, true);
    rc = coll_mod_apply(db, c, field, value, err);
    q_coll_unlock(db, c);
    if (rc)
        return rc;
    snprintf(key, sizeof key, "%s_old", field);
    BSON_APPEND_BOOL(reply, key, old);
    snprintf(key, sizeof key, "%s_new", field);
    BSON_APPEND_BOOL(reply, key, value);
    return 0;
}

/* ---- createIndexes -------------------------------------------------------------------- */

static int check_key_pattern(const bson_t *key, md_error *err)
{
    bson_iter_t it;
    if (bson_empty(key))
        return q_err(err, MD_EINVAL, MD_CODE_CANNOT_CREATE_INDEX, "Index keys cannot be empty.");
    if (q_text_key_is_text(key))
        return 0; /* q_text_index_prepare checks it with the options */
    bson_iter_init(&it, key);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (!k[0] || k[0] == '$')
            return q_err(err, MD_EINVAL, MD_CODE_CANNOT_CREATE_INDEX,
                         "Index key contains an illegal field name: '%s'", k);
        if (BSON_ITER_HOLDS_UTF8(&it) && strcmp(bson_iter_utf8(&it, NULL), "hashed") == 0) {
            if (bson_count_keys(key) != 1)
                return q_err(err, MD_EINVAL, MD_CODE_CANNOT_CREATE_INDEX,
                             "Currently only single field hashed index supported.");
            continue;
        }
        if (BSON_ITER_HOLDS_UTF8(&it) && q_geo_index_kind(bson_iter_utf8(&it, NULL)))
            continue;
        if (BSON_ITER_HOLDS_UTF8(&it))
            return q_err(err, MD_ENOTSUP, MD_CODE_CANNOT_CREATE_INDEX,
                         "index type '%s' is not supported yet", bson_iter_utf8(&it, NULL));
        if (!BSON_ITER_HOLDS_NUMBER(&it) || bson_iter_as_double(&it) == 0)
            return q_err(err, MD_EINVAL, MD_CODE_CANNOT_CREATE_INDEX,
                         "Values in the index key pattern can't be 0 or non-numbers: '%s'", k);
    }
    return 0;
}

/* The default name drivers give: {a: 1, b: -1} -> "a_1_b_-1". */
static void default_name(const bson_t *key, char *out, size_t n)
{
    bson_iter_t it;
    bson_string_t *s = bson_string_new("");
    bson_iter_init(&it, key);
    while (bson_iter_next(&it)) {
        if (BSON_ITER_HOLDS_UTF8(&it))
            bson_string_append_printf(s, "%s%s_%s", s->len ? "_" : "", bson_iter_key(&it),
                                      bson_iter_utf8(&it, NULL));
        else
            bson_string_append_printf(s, "%s%s_%g", s->len ? "_" : "", bson_iter_key(&it),
                                      bson_iter_as_double(&it));
    }
    size_t len = s->len < n - 1 ? s->len : n - 1;
    memcpy(out, s->str, len);
    out[len] = '\0';
    bson_string_free(s, true);
}

typedef struct idx_req {
    bson_t key;  /* a view (of the command, or of tkey) */
    bool text;   /* a text index: tkey and topts are owned (q_text.h) */
    bson_t tkey, topts;
    char name[ENG_IDENT_MAX];
    bool unique, sparse, has_partial;
    int64_t expire; /* expireAfterSeconds, -1: none */
    bson_t partial; /* partialFilterExpression (a view into the command) */
    bson_t whole;   /* the whole spec (a view into the command) */
} idx_req;

/* MongoDB 3.6's partial filters: equalities, $exists: true, ranges, $type,
 * and a top-level $and of those. */
static int check_partial(const bson_t *f, bool top, md_error *err)
{
    bson_iter_t it, op, sub;
    bson_iter_init(&it, f);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (top && strcmp(k, "$and") == 0 && BSON_ITER_HOLDS_ARRAY(&it)) {
            bson_iter_recurse(&it, &sub);
            while (bson_iter_next(&sub)) {
                bson_t d;
                const uint8_t *data;
                uint32_t len;
                if (!BSON_ITER_HOLDS_DOCUMENT(&sub))
                    goto bad;
                bson_iter_document(&sub, &len, &data);
                if (!bson_init_static(&d, data, len) || check_partial(&d, false, err))
                    return MD_EINVAL;
            }
            continue;
        }
        if (k[0] == '$')
            goto bad;
        if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &op))
            continue;
        while (bson_iter_next(&op)) {
            const char *o = bson_iter_key(&op);
            if (o[0] != '$')
                break;
            if (strcmp(o, "$eq") && strcmp(o, "$gt") && strcmp(o, "$gte") && strcmp(o, "$lt") &&
                strcmp(o, "$lte") && strcmp(o, "$type") &&
                !(strcmp(o, "$exists") == 0 && bson_iter_as_bool(&op)))
                goto bad;
        }
    }
    return 0;
bad:
    return q_err(err, MD_EINVAL, MD_CODE_CANNOT_CREATE_INDEX,
                 "unsupported expression in partial index");
}

static int parse_partial(bson_iter_t *it, idx_req *r, md_error *err)
{
    const uint8_t *data;
    uint32_t len;
    q_matcher *m = NULL;
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return q_err(err, MD_EINVAL, MD_CODE_CANNOT_CREATE_INDEX,
                     "partialFilterExpression must be an object");
    bson_iter_document(it, &len, &data);
    bson_init_static(&r->partial, data, len);
    r->has_partial = true;
    int rc = q_matcher_new(&r->partial, &m, err);
    q_matcher_destroy(m);
    return rc ? rc : check_partial(&r->partial, true, err);
}

static int parse_spec_field(bson_iter_t *it, idx_req *r, bool *have_key, md_error *err)
{
    const char *k = bson_iter_key(it);
    if (strcmp(k, "key") == 0) {
        const uint8_t *data;
        uint32_t len;
        if (!BSON_ITER_HOLDS_DOCUMENT(it))
            return q_err(err, MD_EINVAL, MD_CODE_TYPE_MISMATCH, "'key' must be an object");
        bson_iter_document(it, &len, &data);
        bson_init_static(&r->key, data, len);
        *have_key = true;
        return check_key_pattern(&r->key, err);
    }
    if (strcmp(k, "name") == 0) {
        if (!BSON_ITER_HOLDS_UTF8(it) || !bson_iter_utf8(it, NULL)[0])
            return q_err(err, MD_EINVAL, MD_CODE_TYPE_MISMATCH,
                         "'name' must be a non-empty string");
        snprintf(r->name, sizeof r->name, "%s", bson_iter_utf8(it, NULL));
        return 0;
    }
    if (strcmp(k, "unique") == 0 || strcmp(k, "sparse") == 0) {
        *(k[0] == 'u' ? &r->unique : &r->sparse) = bson_iter_as_bool(it);
        return 0;
    }
    if (strcmp(k, "partialFilterExpression") == 0)
        return parse_partial(it, r, err);
    if (strcmp(k, "expireAfterSeconds") == 0) {
        if (!BSON_ITER_HOLDS_NUMBER(it))
            return q_err(err, MD_EINVAL, MD_CODE_CANNOT_CREATE_INDEX,
                         "TTL index 'expireAfterSeconds' option must be numeric, but received "
                         "a type of '%s'", q_type_name(bson_iter_type(it)));
        r->expire = bson_iter_as_int64(it);
        if (r->expire < 0)
            return q_err(err, MD_EINVAL, MD_CODE_CANNOT_CREATE_INDEX,
                         "TTL index 'expireAfterSeconds' option cannot be less than 0");
        return 0;
    }
    if (!strcmp(k, "v") || !strcmp(k, "ns") || !strcmp(k, "background") ||
        q_text_is_option(k) || q_geo_is_option(k))
        return 0;
    return q_err(err, MD_ENOTSUP, MD_CODE_CANNOT_CREATE_INDEX,
                 "index option '%s' is not supported yet", k);
}

static int parse_spec(const bson_iter_t *el, idx_req *r, md_error *err)
{
    bson_iter_t it;
    bool have_key = false;
    memset(r, 0, sizeof *r);
    r->expire = -1;
    bson_init(&r->key);
    if (!BSON_ITER_HOLDS_DOCUMENT(el))
        return q_err(err, MD_EINVAL, MD_CODE_TYPE_MISMATCH,
                     "The elements of 'indexes' must be objects");
    bson_iter_recurse(el, &it);
    {
        const uint8_t *data;
        uint32_t len;
        bson_iter_document(el, &len, &data);
        bson_init_static(&r->whole, data, len);
    }
    while (bson_iter_next(&it)) {
        int rc = parse_spec_field(&it, r, &have_key, err);
        if (rc)
            return rc;
    }
    if (have_key) {
        int rc = q_geo_check_spec(&r->key, &r->whole, err);
        if (rc)
            return rc;
    }
    if (!have_key)
        return q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE,
                     "The 'key' field is a required property of an index specification");
    if (r->has_partial && r->sparse)
        return q_err(err, MD_EINVAL, MD_CODE_CANNOT_CREATE_INDEX,
                     "cannot mix \"partialFilterExpression\" and \"sparse\" options");
    bson_iter_t kt;
    if (r->unique && bson_iter_init(&kt, &r->key) && bson_iter_next(&kt) &&
        BSON_ITER_HOLDS_UTF8(&kt) && !strcmp(bson_iter_utf8(&kt, NULL), "hashed"))
        return q_err(err, MD_EINVAL, MD_CODE_CANNOT_CREATE_INDEX,
                     "Currently hashed indexes cannot guarantee uniqueness. Use a regular "
                     "index.");
    if (!r->name[0])
        default_name(&r->key, r->name, sizeof r->name);
    if (q_text_key_is_text(&r->key)) {
        bson_t spec;
        const uint8_t *data;
        uint32_t len;
        bson_iter_document(el, &len, &data);
        bson_init_static(&spec, data, len);
        r->text = true;
        int rc = q_text_index_prepare(&r->key, &spec, &r->tkey, &r->topts, err);
        bson_init_static(&r->key, bson_get_data(&r->tkey), r->tkey.len);
        return rc;
    }
    return 0;
}

static bson_t *spec_doc(const idx_req *r, const char *ns)
{
    bson_t *s = bson_new();
    BSON_APPEND_INT32(s, "v", 2);
    if (r->unique)
        BSON_APPEND_BOOL(s, "unique", true);
    BSON_APPEND_DOCUMENT(s, "key", &r->key);
    BSON_APPEND_UTF8(s, "name", r->name);
    BSON_APPEND_UTF8(s, "ns", ns);
    if (r->sparse)
        BSON_APPEND_BOOL(s, "sparse", true);
    if (r->expire >= 0)
        q_append_number(s, "expireAfterSeconds", r->expire);
    if (r->has_partial)
        BSON_APPEND_DOCUMENT(s, "partialFilterExpression", &r->partial);
    if (r->text)
        bson_concat(s, &r->topts);
    q_geo_spec_append(&r->key, &r->whole, s);
    return s;
}

static bool same_partial(const q_index *ix, const idx_req *r)
{
    bson_iter_t it;
    bool has = bson_iter_init_find(&it, &ix->spec, "partialFilterExpression");
    if (!has || !r->has_partial)
        return has == r->has_partial;
    const uint8_t *data;
    uint32_t len;
    bson_iter_document(&it, &len, &data);
    return len == r->partial.len && memcmp(data, bson_get_data(&r->partial), len) == 0;
}

/* 1: already exists (identically), 0: new, <0: conflict. */
static int index_conflict(q_coll *c, const idx_req *r, md_error *err)
{
    if (r->text) {
        int t = q_text_index_conflict(c, &r->key, &r->topts, r->name, err);
        if (t != 2)
            return t;
    }
    q_index *by_name = q_index_find(c, r->name), *by_key = q_index_find_key(c, &r->key);
    bool id_index = strcmp(r->name, "_id_") == 0;
    if (by_name && by_name == by_key) {
        if (by_name->unique == r->unique || id_index)
            if (by_name->sparse == r->sparse && by_name->expire_secs == r->expire &&
                same_partial(by_name, r))
                return 1;
        return q_err(err, MD_EINVAL, MD_CODE_INDEX_OPTIONS_CONFLICT,
                     "Index with name: %s already exists with different options", r->name);
    }
    if (by_name)
        return q_err(err, MD_EINVAL, MD_CODE_INDEX_KEY_SPECS_CONFLICT,
                     "Index must have unique name.The existing index has the same name as "
                     "the requested index: %s", r->name);
    if (by_key)
        return q_err(err, MD_EINVAL, MD_CODE_INDEX_OPTIONS_CONFLICT,
                     "Index with name: %s already exists with a different name",
                     by_key->name);
    /* {_id: 1}: the _id index of a collection created with autoIndexId:
     * false may be given later */
    if (id_index && !q_doc_is_one(&r->key, "_id"))
        return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE, "The _id_ index must have key {_id: 1}");
    return 0;
}

static int add_new_index(md_db *db, eng_txn *t, q_coll *c, const idx_req *r, md_error *err)
{
    char ident[2 * ENG_IDENT_MAX + 4];
    snprintf(ident, sizeof ident, "%s.$%s", c->ns, r->name);
    if (strlen(ident) >= ENG_IDENT_MAX)
        return q_err(err, MD_EINVAL, MD_CODE_CANNOT_CREATE_INDEX,
                     "namespace name generated from index name \"%s\" is too long (127 byte "
                     "max)", ident);
    if (c->nidx >= Q_INDEXES_MAX)
        return q_err(err, MD_EINVAL, MD_CODE_CANNOT_CREATE_INDEX,
                     "add index fails, too many indexes for %s (max %d)", c->ns,
                     Q_INDEXES_MAX);
    bson_t *spec = spec_doc(r, c->ns);
    q_index *ix = q_index_new(spec, ident);
    bson_destroy(spec);
    int rc = eng_ss_create(db->eng, t, ident, err);
    if (!rc && (rc = eng_ss_open(db->eng, ident, &ix->ss, err)) != 0)
        q_err_engine(err, rc, "opening the new index");
    if (rc) {
        q_index_free(ix);
        return q_err_engine(err, rc, "creating an index");
    }
    q_index **v = realloc(c->idx, (c->nidx + 1) * sizeof *v);
    assert(v);
    c->idx = v;
    c->idx[c->nidx++] = ix;
    return q_index_build(db, t, c, ix, err);
}

/* Create and build every requested index that does not exist yet, in one
 * transaction; on failure the new indexes vanish from memory and disk. */
static int build_indexes(md_db *db, q_coll *c, idx_req *reqs, int n, bool durable,
                         md_error *err)
{
    size_t before = c->nidx;
    eng_txn *t = NULL;
    int rc = eng_txn_begin(db->eng, &t);
    if (rc)
        return q_err_engine(err, rc, "starting a transaction");
    for (int i = 0; !rc && i < n; i++) {
        int ex = index_conflict(c, &reqs[i], err);
        rc = ex < 0 ? ex : ex == 1 ? 0 : add_new_index(db, t, c, &reqs[i], err);
    }
    if (!rc && c->nidx > before)
        rc = q_catalog_put(db, t, c, err);
    q_plan_cache_clear(c);
    if (!rc && (rc = eng_txn_commit(t, durable, err)) != 0)
        q_err_engine(err, rc, "committing");
    else if (rc)
        eng_txn_abort(t);
    if (rc) {
        while (c->nidx > before)
            q_index_free(c->idx[--c->nidx]);
        q_write_failed(db, rc, err);
    }
    return rc;
}

static int parse_indexes(const bson_t *cmd, idx_req **reqs, int *n, md_error *err)
{
    bson_iter_t it, el;
    *reqs = NULL;
    *n = 0;
    if (!bson_iter_init_find(&it, cmd, "indexes"))
        return q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE, "no indexes to add");
    if (!BSON_ITER_HOLDS_ARRAY(&it))
        return q_err(err, MD_EINVAL, MD_CODE_TYPE_MISMATCH, "indexes has to be an array");
    bson_iter_recurse(&it, &el);
    for (bson_iter_t c = el; bson_iter_next(&c);)
        (*n)++;
    if (*n == 0)
        return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                     "Must specify at least one index to create");
    *reqs = q_zalloc((size_t)*n * sizeof **reqs);
    assert(*reqs);
    for (int i = 0; bson_iter_next(&el); i++) {
        int rc = parse_spec(&el, &(*reqs)[i], err);
        if (rc)
            return rc;
    }
    return 0;
}

int q_cmd_create_indexes(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err)
{
    const char *name;
    char ns[ENG_IDENT_MAX];
    idx_req *reqs = NULL;
    int n = 0;
    size_t before;
    bool created = false, durable = false;
    q_coll *c = NULL;
    int rc = q_cmd_coll_name(db, cmd, false, &name, ns, err);
    if (!rc)
        rc = parse_indexes(cmd, &reqs, &n, err);
    if (!rc)
        rc = q_write_concern(cmd, &durable, err);
    if (!rc)
        rc = q_write_allowed(db, err);
    if (!rc)
        rc = q_coll_get_or_create(db, name, &created, &c, err);
    if (rc)
        goto out;
    before = c->nidx;
    q_coll_lock(db, c, true);
    rc = build_indexes(db, c, reqs, n, durable, err);
    q_coll_unlock(db, c);
    if (rc)
        goto out;
    BSON_APPEND_BOOL(reply, "createdCollectionAutomatically", created);
    q_append_number(reply, "numIndexesBefore", (int64_t)before);
    q_append_number(reply, "numIndexesAfter", (int64_t)c->nidx);
    if (before == c->nidx)
        BSON_APPEND_UTF8(reply, "note", "all indexes already exist");
out:
    for (int i = 0; reqs && i < n; i++)
        if (reqs[i].text) {
            bson_destroy(&reqs[i].tkey);
            bson_destroy(&reqs[i].topts);
        }
    free(reqs);
    return rc;
}

/* ---- dropIndexes / listIndexes -------------------------------------------------------- */

/* Which indexes {index: ...} names; victims[] gets flags per index. */
static int drop_targets(q_coll *c, const bson_iter_t *it, bool *victims, md_error *err)
{
    if (BSON_ITER_HOLDS_UTF8(it) && strcmp(bson_iter_utf8(it, NULL), "*") == 0) {
        for (size_t i = 0; i < c->nidx; i++)
            victims[i] = strcmp(c->idx[i]->name, "_id_") != 0;
        return 0;
    }
    q_index *ix = NULL;
    if (BSON_ITER_HOLDS_UTF8(it)) {
        ix = q_index_find(c, bson_iter_utf8(it, NULL));
        if (!ix)
            return q_err(err, MD_NOTFOUND, MD_CODE_INDEX_NOT_FOUND,
                         "index not found with name [%s]", bson_iter_utf8(it, NULL));
    } else if (BSON_ITER_HOLDS_DOCUMENT(it)) {
        const uint8_t *data;
        uint32_t len;
        bson_t key;
        bson_iter_document(it, &len, &data);
        bson_init_static(&key, data, len);
        if (!(ix = q_index_find_key(c, &key))) {
            char *json = bson_as_relaxed_extended_json(&key, NULL);
            q_err(err, MD_NOTFOUND, MD_CODE_INDEX_NOT_FOUND, "can't find index with key: %s",
                  json);
            bson_free(json);
            return MD_NOTFOUND;
        }
    } else {
        return q_err(err, MD_EINVAL, MD_CODE_TYPE_MISMATCH,
                     "invalid index name spec: 'index' must be a string or an object");
    }
    if (strcmp(ix->name, "_id_") == 0)
        return q_err(err, MD_EINVAL, MD_CODE_INVALID_OPTIONS, "cannot drop _id index");
    for (size_t i = 0; i < c->nidx; i++)
        victims[i] = c->idx[i] == ix;
    return 0;
}

static int drop_in_txn(md_db *db, q_coll *c, q_index **all, size_t nall,
                       const bool *victims, md_error *err)
{
    eng_txn *t = NULL;
    int rc = eng_txn_begin(db->eng, &t);
    if (rc)
        return q_err_engine(err, rc, "starting a transaction");
    for (size_t i = 0; !rc && i < nall; i++)
        if (victims[i])
            rc = eng_ss_drop(db->eng, t, all[i]->ident);
    if (!rc)
        rc = q_catalog_put(db, t, c, err);
    if (rc) {
        eng_txn_abort(t);
        return q_err_engine(err, rc, "dropping an index");
    }
    rc = eng_txn_commit(t, false, err);
    return rc ? q_err_engine(err, rc, "committing") : 0;
}

/* Close the victims' handles, drop them and rewrite the catalog entry; on
 * failure the old index list comes back with its handles reopened. */
static int drop_marked(md_db *db, q_coll *c, const bool *victims, md_error *err)
{
    q_index **all = c->idx, **keep = calloc(c->nidx, sizeof *keep);
    size_t nall = c->nidx, nkeep = 0;
    assert(keep);
    for (size_t i = 0; i < nall; i++) {
        if (!victims[i]) {
            keep[nkeep++] = all[i];
            continue;
        }
        q_cursor_kill_index(db, all[i]);
        eng_ss_close(all[i]->ss);
        all[i]->ss = NULL;
    }
    c->idx = keep;
    c->nidx = nkeep;
    q_plan_cache_clear(c);
    int rc = drop_in_txn(db, c, all, nall, victims, err);
    if (!rc) {
        for (size_t i = 0; i < nall; i++)
            if (victims[i])
                q_index_free(all[i]);
        free(all);
        return 0;
    }
    c->idx = all;
    c->nidx = nall;
    free(keep);
    for (size_t i = 0; i < nall; i++)
        if (victims[i])
            eng_ss_open(db->eng, all[i]->ident, &all[i]->ss, NULL);
    return q_write_failed(db, rc, err);
}

int q_cmd_drop_indexes(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err)
{
    const char *name;
    char ns[ENG_IDENT_MAX];
    bool victims[Q_INDEXES_MAX] = {false};
    bson_iter_t it;
    int rc = q_cmd_coll_name(db, cmd, false, &name, ns, err);
    if (rc)
        return rc;
    q_coll *c = q_coll_find(db, name);
    if (!c)
        return q_err(err, MD_NOTFOUND, MD_CODE_NAMESPACE_NOT_FOUND, "ns not found");
    if (!bson_iter_init_find(&it, cmd, "index"))
        return q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE, "no index name specified");
    if ((rc = drop_targets(c, &it, victims, err)) != 0 || (rc = q_write_allowed(db, err)))
        return rc;
    int64_t was = (int64_t)c->nidx;
    q_coll_lock(db, c, true);
    rc = drop_marked(db, c, victims, err);
    q_coll_unlock(db, c);
    if (rc)
        return rc;
    q_append_number(reply, "nIndexesWas", was);
    if (BSON_ITER_HOLDS_UTF8(&it) && strcmp(bson_iter_utf8(&it, NULL), "*") == 0)
        BSON_APPEND_UTF8(reply, "msg", "non-_id indexes dropped for collection");
    return 0;
}

int q_cmd_list_indexes(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err)
{
    const char *name;
    char ns[ENG_IDENT_MAX], cns[ENG_IDENT_MAX + 32];
    int rc = q_cmd_coll_name(db, cmd, false, &name, ns, err);
    if (rc)
        return rc;
    q_coll *c = q_coll_find(db, name);
    if (!c)
        return q_err(err, MD_NOTFOUND, MD_CODE_NAMESPACE_NOT_FOUND, "ns does not exist: %s", ns);
    bson_t **docs = calloc(c->nidx ? c->nidx : 1, sizeof *docs);
    assert(docs);
    for (size_t i = 0; i < c->nidx; i++)
        docs[i] = &c->idx[i]->spec;
    snprintf(cns, sizeof cns, "%s.$cmd.listIndexes.%s", db->name, name);
    q_cursor_reply_array(reply, cns, docs, c->nidx);
    free(docs);
    return 0;
}
