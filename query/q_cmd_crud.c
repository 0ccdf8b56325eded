/*
 * q_cmd_crud.c -- the write commands: insert, update, delete and
 * findAndModify, in MongoDB 3.6's shapes.
 *
 *   {insert: "c", documents: [...], ordered: true}   -> {n, writeErrors?, ok}
 *   {update: "c", updates: [{q, u, upsert, multi}]}  -> {n, nModified, upserted?, ...}
 *   {delete: "c", deletes: [{q, limit}]}             -> {n, writeErrors?, ok}
 *
 * The whole command is checked first (wrong types are command errors, as
 * with 3.6's IDL parser); then each statement runs, and one that fails
 * becomes a writeError {index, code, errmsg}; ordered: true stops there.
 * A multi update collects the matching RecordIds first, then updates each
 * after re-reading and re-matching it, skipping RecordIds its own moves
 * produced, so no document is updated twice.  A statement on {_id: v}
 * (IDHACK) finds its document inside the write's own transaction instead.
 *
 * Each statement runs through q_insert_exec / q_update_exec /
 * q_delete_exec / q_find_and_modify_exec, which the typed API (q_api.c)
 * calls with statements it builds itself: the rules live here once.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "q_int.h"

/* ---- shared pieces --------------------------------------------------------------- */

typedef struct write_errors {
    bson_t arr;
    int n;
} write_errors;

static void we_add(write_errors *we, int index, md_error *err)
{
    bson_t e;
    char key[16];
    snprintf(key, sizeof key, "%d", we->n++);
    bson_append_document_begin(&we->arr, key, -1, &e);
    BSON_APPEND_INT32(&e, "index", index);
    BSON_APPEND_INT32(&e, "code", err->code ? err->code : MD_CODE_UNKNOWN_ERROR);
    BSON_APPEND_UTF8(&e, "errmsg", err->message);
    bson_append_document_end(&we->arr, &e);
    md_error_clear(err);
}

static void we_finish(write_errors *we, bson_t *reply)
{
    if (we->n)
        BSON_APPEND_ARRAY(reply, "writeErrors", &we->arr);
    bson_destroy(&we->arr);
}

typedef struct cmd_common {
    const char *name;  /* collection */
    char ns[ENG_IDENT_MAX];
    bson_iter_t stmts; /* the statement array */
    bool ordered, durable;
} cmd_common;

/* Parse {<verb>: name, <array_field>: [...], ordered, writeConcern, ...}. */
static int parse_common(md_db *db, const bson_t *cmd, const char *verb, const char *array_field,
                        cmd_common *cc, md_error *err)
{
    bson_iter_t it;
    bool have_array = false;
    int rc = q_cmd_coll_name(db, cmd, true, &cc->name, cc->ns, err);
    cc->ordered = true;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    while (!rc && bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, array_field) == 0) {
            if (!BSON_ITER_HOLDS_ARRAY(&it))
                return q_err_field_type(err, verb, k, bson_iter_type(&it), "array");
            bson_iter_recurse(&it, &cc->stmts);
            have_array = true;
        } else if (strcmp(k, "ordered") == 0) {
            if (!BSON_ITER_HOLDS_BOOL(&it))
                return q_err_field_type(err, verb, k, bson_iter_type(&it), "bool");
            cc->ordered = bson_iter_bool(&it);
        } else if (strcmp(k, "bypassDocumentValidation") != 0 && !q_is_generic_arg(k)) {
            return q_err_field_unknown(err, verb, k);
        }
    }
    if (!rc && !have_array)
        rc = q_err_field_missing(err, verb, array_field);
    if (!rc)
        rc = q_write_concern(cmd, &cc->durable, err);
    return rc;
}

/* Every element of the statement array must be a document; count them. */
static int count_stmts(const cmd_common *cc, const char *verb, const char *field, int *n,
                       md_error *err)
{
    bson_iter_t it = cc->stmts;
    char path[64];
    *n = 0;
    while (bson_iter_next(&it)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&it)) {
            snprintf(path, sizeof path, "%s.%d", field, *n);
            return q_err_field_type(err, verb, path, bson_iter_type(&it), "object");
        }
        (*n)++;
    }
    if (*n < 1 || *n > 100000)
        return q_err(err, MD_EINVAL, Q_CODE_INVALID_LENGTH,
                     "Write batch sizes must be between 1 and 100000. Got %d operations.", *n);
    return 0;
}

static bool iter_doc(const bson_iter_t *it, bson_t *out)
{
    const uint8_t *data;
    uint32_t len;
    if (!BSON_ITER_HOLDS_DOCUMENT(it) && !BSON_ITER_HOLDS_ARRAY(it))
        return false;
    if (BSON_ITER_HOLDS_DOCUMENT(it))
        bson_iter_document(it, &len, &data);
    else
        bson_iter_array(it, &len, &data);
    return bson_init_static(out, data, len);
}

/* ---- insert -------------------------------------------------------------------------- */

int q_insert_exec(md_db *db, q_coll *c, const bson_t *doc, const eng_bson_top *top,
                  bool durable, md_error *err)
{
    bson_t stored;
    int rc = q_doc_prepare_insert(doc, top, &stored, err);
    if (rc)
        return rc;
    rc = q_write_insert(db, c, &stored, durable, NULL, err);
    bson_destroy(&stored);
    return rc;
}

int q_cmd_insert(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err)
{
    cmd_common cc;
    write_errors we = {.n = 0};
    q_coll *c = NULL;
    int n, i = 0, ok = 0;
    int rc = parse_common(db, cmd, "insert", "documents", &cc, err);
    if (!rc)
        rc = count_stmts(&cc, "insert", "documents", &n, err);
    if (!rc)
        rc = q_write_allowed(db, err);
    if (!rc)
        rc = q_coll_get_or_create(db, cc.name, NULL, &c, err);
    if (rc)
        return rc;
    bson_init(&we.arr);
    /* {j: true} waits once for the batch, as MongoDB's does: only the last
     * document's commit is durable, and a durable commit makes every
     * earlier one durable too (the journal and the log are sequential).
     * When the batch ends on an error instead, an fsync covers the rest. */
    bool synced = !cc.durable;
    q_coll_lock(db, c, true);
    for (bson_iter_t it = cc.stmts; bson_iter_next(&it); i++) {
        bson_t doc;
        bool last = i == n - 1;
        if (!iter_doc(&it, &doc))
            rc = q_err(err, MD_EINVAL, MD_CODE_INVALID_BSON, "invalid document");
        else
            rc = q_insert_exec(db, c, &doc, NULL, cc.durable && last, err);
        if (!rc) {
            ok++;
            synced = synced || last;
            continue;
        }
        we_add(&we, i, err);
        if (cc.ordered || Q_LOAD(db->failed))
            break;
    }
    q_coll_unlock(db, c);
    bool wc_failed = !synced && ok > 0 && eng_flush(db->eng, true, NULL) != 0;
    q_append_number(reply, "n", ok);
    we_finish(&we, reply);
    if (wc_failed) {
        bson_t wce;
        BSON_APPEND_DOCUMENT_BEGIN(reply, "writeConcernError", &wce);
        BSON_APPEND_INT32(&wce, "code", 64); /* WriteConcernFailed */
        BSON_APPEND_UTF8(&wce, "errmsg", "the inserts could not be made durable");
        bson_append_document_end(reply, &wce);
    }
    return 0;
}

/* ---- RecordId set (multi updates) ------------------------------------------------------- */

typedef struct rid_set {
    eng_rid *v;
    size_t cap, n;
} rid_set;

static size_t rid_hash(eng_rid r, size_t cap)
{
    uint64_t z = (uint64_t)r * 0x9e3779b97f4a7c15ull;
    return (size_t)(z >> 17) & (cap - 1);
}

static bool rid_set_has(const rid_set *s, eng_rid r)
{
    if (!s->cap)
        return false;
    for (size_t i = rid_hash(r, s->cap); s->v[i]; i = (i + 1) & (s->cap - 1))
        if (s->v[i] == r)
            return true;
    return false;
}

static void rid_set_add(rid_set *s, eng_rid r)
{
    if (rid_set_has(s, r))
        return;
    if (2 * (s->n + 1) > s->cap) {
        rid_set old = *s;
        s->cap = s->cap ? s->cap * 2 : 64;
        s->v = calloc(s->cap, sizeof *s->v);
        assert(s->v);
        s->n = 0;
        for (size_t i = 0; i < old.cap; i++)
            if (old.v[i])
                rid_set_add(s, old.v[i]);
        free(old.v);
    }
    size_t i = rid_hash(r, s->cap);
    while (s->v[i])
        i = (i + 1) & (s->cap - 1);
    s->v[i] = r;
    s->n++;
}

/* ---- upsert ------------------------------------------------------------------------- */

/* The seed an upsert starts from: the query's equality fields (only its _id
 * for a replacement), _id first; dotted paths are expanded into embedded
 * documents by applying them as a $set. */
static int upsert_seed(const bson_t *q, bool replacement, bson_t *seed, md_error *err)
{
    bson_t eq = BSON_INITIALIZER, rest = BSON_INITIALIZER, set = BSON_INITIALIZER, base;
    bson_iter_t it;
    bool dotted = false, changed;
    q_update *u = NULL;
    bson_init(seed);
    int rc = q_matcher_upsert_seed(q, &eq, err);
    if (!rc && bson_iter_init_find(&it, &eq, "_id"))
        bson_append_iter(seed, "_id", 3, &it);
    if (!rc && !replacement)
        bson_copy_to_excluding_noinit(&eq, &rest, "_id", NULL);
    for (bson_iter_init(&it, &rest); bson_iter_next(&it);)
        dotted |= strchr(bson_iter_key(&it), '.') != NULL;
    if (!rc && !dotted)
        bson_concat(seed, &rest);
    if (!rc && dotted) {
        bson_append_document(&set, "$set", 4, &rest);
        rc = q_update_new(&set, &u, err);
        if (!rc) {
            bson_steal(&base, seed);
            rc = q_update_apply(u, &base, true, seed, &changed, NULL, err);
            bson_destroy(&base);
        }
    }
    q_update_destroy(u);
    bson_destroy(&eq);
    bson_destroy(&rest);
    bson_destroy(&set);
    return rc;
}

/* Insert the document an upsert of (q, u) creates; *inserted gets a copy. */
static int upsert(md_db *db, const char *name, const bson_t *q, const q_update *u,
                  bool durable, bson_t *inserted, md_error *err)
{
    bson_t seed, applied;
    bool changed;
    q_coll *c = NULL;
    bson_init(inserted);
    int rc = upsert_seed(q, q_update_is_replacement(u), &seed, err);
    if (rc) {
        bson_destroy(&seed);
        return rc;
    }
    rc = q_update_apply(u, &seed, true, &applied, &changed, NULL, err);
    bson_destroy(&seed);
    if (!rc) {
        bson_t stored;
        bson_destroy(inserted);
        rc = q_doc_prepare_insert(&applied, NULL, &stored, err);
        if (rc)
            bson_init(inserted);
        else
            bson_copy_to(&stored, inserted); /* stored may be a view of applied */
        if (!rc)
            bson_destroy(&stored);
    }
    bson_destroy(&applied);
    if (!rc)
        rc = q_coll_get_or_create(db, name, NULL, &c, err);
    if (!rc) {
        q_coll_lock(db, c, true);
        rc = q_write_insert(db, c, inserted, durable, NULL, err);
        q_coll_unlock(db, c);
    }
    return rc;
}

/* An upsert whose insert lost a race: another client inserted the document
 * the query names by _id between this one's search and its insert.
 * MongoDB 3.x returned E11000 there on WiredTiger (mmapv1 held the
 * collection lock across both); minidoc searches again, as MongoDB 4.2
 * does, when the query has an _id equality, up to UPSERT_RETRIES times. */
#define UPSERT_RETRIES 3

static bool upsert_lost_race(int rc, int attempt, const bson_t *q, md_error *err)
{
    bson_iter_t it, sub;
    if (rc != MD_EDUPKEY || attempt >= UPSERT_RETRIES || !bson_iter_init_find(&it, q, "_id"))
        return false;
    if (BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &sub) && bson_iter_next(&sub) &&
        bson_iter_key(&sub)[0] == '$')
        return false; /* {_id: {$op: ...}} is no equality */
    if (err)
        md_error_clear(err);
    return true;
}

/* ---- update -------------------------------------------------------------------------- */


/* One {q, u, upsert, multi} statement; upsert and multi are 3.6's "safeBool"
 * (a bool or a number). */
static int parse_upd_stmt(const bson_iter_t *el, q_upd_stmt *s, md_error *err)
{
    bson_t doc;
    bson_iter_t it;
    bool have_q = false, have_u = false;
    memset(s, 0, sizeof *s);
    iter_doc(el, &doc);
    bson_iter_init(&it, &doc);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        bool isdoc = BSON_ITER_HOLDS_DOCUMENT(&it);
        bool isbool = BSON_ITER_HOLDS_BOOL(&it) || BSON_ITER_HOLDS_NUMBER(&it);
        bool flag = strcmp(k, "upsert") == 0 || strcmp(k, "multi") == 0;
        if (strcmp(k, "q") == 0 && (have_q = isdoc)) {
            iter_doc(&it, &s->q);
        } else if (strcmp(k, "u") == 0 && (have_u = isdoc)) {
            iter_doc(&it, &s->u);
        } else if (flag && isbool) {
            *(k[0] == 'u' ? &s->upsert : &s->multi) = bson_iter_as_bool(&it);
        } else if (flag || !strcmp(k, "q") || !strcmp(k, "u")) {
            return q_err_field_type(err, "update.updates", k, bson_iter_type(&it),
                                    flag ? "bool" : "object");
        } else if (!strcmp(k, "arrayFilters")) {
            if (!BSON_ITER_HOLDS_ARRAY(&it))
                return q_err_field_type(err, "update.updates", k, bson_iter_type(&it), "array");
            s->has_af = iter_doc(&it, &s->af);
        } else if (!strcmp(k, "collation")) {
            return q_err(err, MD_ENOTSUP, MD_CODE_COMMAND_NOT_SUPPORTED,
                         "update option '%s' is not supported yet", k);
        } else if (!strcmp(k, "hint")) {
            continue; /* accepted as 4.2+ does; one plan per query anyway */
        } else {
            return q_err_field_unknown(err, "update.updates", k);
        }
    }
    if (!have_q || !have_u)
        return q_err_field_missing(err, "update.updates", have_q ? "u" : "q");
    return 0;
}


static int update_existing(md_db *db, q_coll *c, const q_upd_stmt *s, const q_matcher *m,
                           const q_update *u, bool durable, q_upd_out *o, md_error *err)
{
    eng_rid *rids = NULL;
    size_t n = 0;
    rid_set moved = {NULL, 0, 0};
    bool lost;
    int rc;
    q_coll_lock(db, c, true);
    do { /* a single update whose document changed under it looks again */
        lost = false;
        free(rids);
        rc = q_scan_collect(db, c, &s->q, m, s->multi ? 0 : 1, &rids, &n, err);
        q_yield y = {0};
        for (size_t i = 0; !rc && i < n; i++) {
            q_update_res res;
            if (rid_set_has(&moved, rids[i]))
                continue;
            q_yield_point(db, &y);
            rc = q_write_update(db, c, rids[i], m, u, durable, &res, NULL, NULL, err);
            o->n += !rc && res.matched;
            o->modified += !rc && res.modified;
            if (res.moved && s->multi)
                rid_set_add(&moved, res.rid);
            lost = !rc && !res.matched && !s->multi;
        }
    } while (lost);
    q_coll_unlock(db, c);
    free(rids);
    free(moved.v);
    return rc;
}

/* IDHACK: the one document {_id: v} names, found inside the write. */
static int update_by_id(md_db *db, q_coll *c, q_index *ix, const bson_iter_t *id,
                        const q_update *u, bool durable, q_upd_out *o, md_error *err)
{
    q_target tg = {.id_index = ix, .id = *id};
    q_update_res res;
    q_coll_lock(db, c, true);
    int rc = q_write_update_target(db, c, &tg, u, durable, &res, NULL, NULL, err);
    q_coll_unlock(db, c);
    o->n += !rc && res.matched;
    o->modified += !rc && res.modified;
    return rc;
}

int q_update_exec(md_db *db, const char *name, bool durable, const q_upd_stmt *s,
                  q_upd_out *o, md_error *err)
{
    q_matcher *m = NULL;
    q_update *u = NULL;
    bson_iter_t idv;
    bool idhack = q_idhack_query(&s->q, &idv);
    int rc = q_update_acquire(&s->u, s->has_af ? &s->af : NULL, !db->no_fast, &u, err);
    if (!rc && s->multi && q_update_is_replacement(u))
        rc = q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE,
                   "multi update only works with $ operators");
    for (int attempt = 0; !rc; attempt++) {
        q_coll *c = q_coll_find(db, name);
        q_index *idx = c && idhack ? q_idhack_index(db, c) : NULL;
        if (!idx && !m)
            rc = q_matcher_new(&s->q, &m, err);
        if (!rc && idx)
            rc = update_by_id(db, c, idx, &idv, u, durable, o, err);
        else if (!rc && c)
            rc = update_existing(db, c, s, m, u, durable, o, err);
        if (!rc && o->n == 0 && s->upsert) {
            bson_t doc;
            bson_iter_t id;
            rc = upsert(db, name, &s->q, u, durable, &doc, err);
            if (!rc && bson_iter_init_find(&id, &doc, "_id")) {
                o->upserted = true;
                o->n = 1;
                bson_append_iter(&o->id, "_id", 3, &id);
            }
            bson_destroy(&doc);
            if (upsert_lost_race(rc, attempt, &s->q, err)) {
                rc = 0;
                continue;
            }
        }
        break;
    }
    q_matcher_destroy(m);
    q_update_release(u);
    return rc;
}

static void append_upserted(bson_t *arr, int *nup, int index, const bson_t *id)
{
    bson_t e;
    bson_iter_t it;
    char key[16];
    snprintf(key, sizeof key, "%d", (*nup)++);
    bson_append_document_begin(arr, key, -1, &e);
    BSON_APPEND_INT32(&e, "index", index);
    if (bson_iter_init_find(&it, id, "_id"))
        bson_append_iter(&e, "_id", 3, &it);
    bson_append_document_end(arr, &e);
}

/* Check every statement's shape before running any (command-level errors). */
static int check_upd_stmts(const cmd_common *cc, md_error *err)
{
    int rc = 0;
    q_upd_stmt s;
    for (bson_iter_t it = cc->stmts; !rc && bson_iter_next(&it);)
        rc = parse_upd_stmt(&it, &s, err);
    return rc;
}

int q_cmd_update(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err)
{
    cmd_common cc;
    write_errors we = {.n = 0};
    bson_t upserted = BSON_INITIALIZER;
    int64_t n = 0, nmod = 0;
    int nstmt, i = 0, nup = 0;
    int rc = parse_common(db, cmd, "update", "updates", &cc, err);
    if (!rc)
        rc = count_stmts(&cc, "update", "updates", &nstmt, err);
    if (!rc)
        rc = check_upd_stmts(&cc, err);
    if (!rc)
        rc = q_write_allowed(db, err);
    if (rc) {
        bson_destroy(&upserted);
        return rc;
    }
    bson_init(&we.arr);
    for (bson_iter_t it = cc.stmts; bson_iter_next(&it); i++) {
        q_upd_stmt s;
        q_upd_out o = {0, 0, false, BSON_INITIALIZER};
        parse_upd_stmt(&it, &s, err);
        rc = q_update_exec(db, cc.name, cc.durable, &s, &o, err);
        n += o.n;
        nmod += o.modified;
        if (o.upserted)
            append_upserted(&upserted, &nup, i, &o.id);
        bson_destroy(&o.id);
        if (rc) {
            we_add(&we, i, err);
            if (cc.ordered || Q_LOAD(db->failed))
                break;
        }
    }
    q_append_number(reply, "n", n);
    q_append_number(reply, "nModified", nmod);
    if (nup)
        BSON_APPEND_ARRAY(reply, "upserted", &upserted);
    bson_destroy(&upserted);
    we_finish(&we, reply);
    return 0;
}

/* ---- delete -------------------------------------------------------------------------- */

static int parse_del_stmt(const bson_iter_t *el, bson_t *q, int64_t *limit, md_error *err)
{
    bson_t doc;
    bson_iter_t it;
    bool have_q = false, have_limit = false;
    iter_doc(el, &doc);
    bson_iter_init(&it, &doc);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "q") == 0) {
            if (!(have_q = iter_doc(&it, q)) || BSON_ITER_HOLDS_ARRAY(&it))
                return q_err_field_type(err, "delete.deletes", k, bson_iter_type(&it),
                                        "object");
        } else if (strcmp(k, "limit") == 0) {
            have_limit = true;
            if (!BSON_ITER_HOLDS_NUMBER(&it))
                return q_err_field_type(err, "delete.deletes", k, bson_iter_type(&it),
                                        "number");
            double d = bson_iter_as_double(&it);
            if (d != 0 && d != 1)
                return q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE,
                             "The limit field in delete objects must be 0 or 1. Got %g", d);
            *limit = (int64_t)d;
        } else if (strcmp(k, "collation") == 0) {
            return q_err(err, MD_ENOTSUP, MD_CODE_COMMAND_NOT_SUPPORTED,
                         "delete option 'collation' is not supported yet");
        } else if (strcmp(k, "hint") != 0) { /* hint: accepted, one plan anyway */
            return q_err_field_unknown(err, "delete.deletes", k);
        }
    }
    if (!have_q || !have_limit)
        return q_err_field_missing(err, "delete.deletes", have_q ? "limit" : "q");
    return 0;
}

int q_delete_exec(md_db *db, const char *name, bool durable, const bson_t *q, int64_t limit,
                  int64_t *n, md_error *err)
{
    q_matcher *m = NULL;
    eng_rid *rids = NULL;
    size_t nr = 0;
    q_coll *c = q_coll_find(db, name);
    q_index *idx = c ? q_idhack_index(db, c) : NULL;
    bson_iter_t id;
    bool idhack = idx && q_idhack_query(q, &id);
    int rc = idhack ? 0 : q_matcher_new(q, &m, err);
    if (!rc && c && c->capped)
        rc = q_capped_refuse_delete(c, err);
    if (rc || !c)
        goto out;
    q_coll_lock(db, c, true);
    if (idhack) { /* IDHACK: the lookup inside the delete's transaction */
        q_target tg = {.id_index = idx, .id = id};
        bool deleted;
        rc = q_write_delete_target(db, c, &tg, durable, &deleted, NULL, err);
        *n += !rc && deleted;
        q_coll_unlock(db, c);
        goto out;
    }
    rc = q_scan_collect(db, c, q, m, limit, &rids, &nr, err);
    q_yield y = {0};
    for (size_t i = 0; !rc && i < nr; i++) {
        bool deleted;
        q_yield_point(db, &y);
        rc = q_write_delete(db, c, rids[i], m, durable, &deleted, NULL, err);
        *n += deleted;
    }
    q_coll_unlock(db, c);
out:
    free(rids);
    q_matcher_destroy(m);
    return rc;
}

int q_cmd_delete(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err)
{
    cmd_common cc;
    write_errors we = {.n = 0};
    int64_t n = 0, limit;
    int nstmt, i = 0;
    bson_t q;
    int rc = parse_common(db, cmd, "delete", "deletes", &cc, err);
    if (!rc)
        rc = count_stmts(&cc, "delete", "deletes", &nstmt, err);
    for (bson_iter_t it = cc.stmts; !rc && bson_iter_next(&it);)
        rc = parse_del_stmt(&it, &q, &limit, err);
    if (!rc)
        rc = q_write_allowed(db, err);
    if (rc)
        return rc;
    bson_init(&we.arr);
    for (bson_iter_t it = cc.stmts; bson_iter_next(&it); i++) {
        parse_del_stmt(&it, &q, &limit, err);
        if (q_delete_exec(db, cc.name, cc.durable, &q, limit, &n, err) == 0)
            continue;
        we_add(&we, i, err);
        if (cc.ordered || Q_LOAD(db->failed))
            break;
    }
    q_append_number(reply, "n", n);
    we_finish(&we, reply);
    return 0;
}

/* ---- findAndModify ------------------------------------------------------------------- */

typedef struct fam_args {
    bson_t query, sort, update, fields, af;
    bool remove, new_, upsert, durable, has_update, has_af;
} fam_args;

static int fam_field(fam_args *a, bson_iter_t *it, md_error *err)
{
    const char *k = bson_iter_key(it);
    bson_t *docs[] = {&a->query, &a->sort, &a->update, &a->fields};
    const char *dnames[] = {"query", "sort", "update", "fields"};
    bool *flags[] = {&a->remove, &a->new_, &a->upsert};
    const char *fnames[] = {"remove", "new", "upsert"};
    for (int i = 0; i < 4; i++)
        if (strcmp(k, dnames[i]) == 0) {
            if (!BSON_ITER_HOLDS_DOCUMENT(it) || !iter_doc(it, docs[i]))
                return q_err_field_type(err, "findAndModify", k, bson_iter_type(it), "object");
            a->has_update |= i == 2;
            return 0;
        }
    for (int i = 0; i < 3; i++)
        if (strcmp(k, fnames[i]) == 0) {
            *flags[i] = bson_iter_as_bool(it);
            return 0;
        }
    if (!strcmp(k, "arrayFilters")) {
        if (!BSON_ITER_HOLDS_ARRAY(it))
            return q_err_field_type(err, "findAndModify", k, bson_iter_type(it), "array");
        a->has_af = iter_doc(it, &a->af);
        return 0;
    }
    if (!strcmp(k, "collation"))
        return q_err(err, MD_ENOTSUP, MD_CODE_COMMAND_NOT_SUPPORTED,
                     "findAndModify option '%s' is not supported yet", k);
    if (strcmp(k, "bypassDocumentValidation") && strcmp(k, "hint") && !q_is_generic_arg(k))
        return q_err_field_unknown(err, "findAndModify", k);
    return 0;
}

/* The rules between fields, once all are read; writeConcern from `wc`. */
static int fam_check(fam_args *a, const bson_t *wc, md_error *err)
{
    int rc = 0;
    if (a->remove && a->has_update)
        rc = q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE,
                   "Cannot specify both an update and remove=true");
    if (!rc && !a->remove && !a->has_update)
        rc = q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE,
                   "Either an update or remove=true must be specified");
    if (!rc && a->remove && a->upsert)
        rc = q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE,
                   "Cannot specify both upsert=true and remove=true");
    if (!rc && a->remove && a->new_)
        rc = q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE,
                   "Cannot specify both new=true and remove=true; 'remove' always returns "
                   "the deleted document");
    if (!rc)
        rc = q_write_concern(wc, &a->durable, err);
    return rc;
}

static int fam_parse(const bson_t *cmd, fam_args *a, md_error *err)
{
    bson_iter_t it;
    int rc = 0;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    while (!rc && bson_iter_next(&it))
        rc = fam_field(a, &it, err);
    return rc ? rc : fam_check(a, cmd, err);
}

static void fam_args_init(fam_args *a)
{
    memset(a, 0, sizeof *a);
    bson_init(&a->query);
    bson_init(&a->sort);
    bson_init(&a->update);
    bson_init(&a->fields);
}

static int fam_run(md_db *db, const char *name, const fam_args *a, const q_matcher *m,
                   const q_update *u, const q_proj *proj, bson_t *reply, md_error *err);

/* Everything after parsing, the command's and the typed call's. */
static int fam_exec(md_db *db, const char *name, fam_args *a, bson_t *reply, md_error *err)
{
    q_matcher *m = NULL;
    q_update *u = NULL;
    q_proj proj;
    int rc = q_write_allowed(db, err);
    if (rc)
        return rc;
    rc = q_proj_init_query(&proj, &a->fields, &a->query, err);
    if (!rc)
        rc = q_matcher_new(&a->query, &m, err);
    proj.m = m;
    if (!rc && a->has_update)
        rc = q_update_acquire(&a->update, a->has_af ? &a->af : NULL, !db->no_fast, &u, err);
    if (!rc)
        rc = fam_run(db, name, a, m, u, &proj, reply, err);
    q_update_release(u);
    q_matcher_destroy(m);
    q_proj_cleanup(&proj);
    return rc;
}

int q_find_and_modify_exec(md_db *db, const char *name, const bson_t *query,
                           const bson_t *opts, bson_t *reply, md_error *err)
{
    fam_args a;
    bson_iter_t it;
    char ns[ENG_IDENT_MAX];
    int rc = q_ns_make(db, name, ns, err);
    fam_args_init(&a);
    if (!rc && query)
        bson_init_static(&a.query, bson_get_data(query), query->len);
    if (!rc && opts && bson_iter_init(&it, opts))
        while (!rc && bson_iter_next(&it))
            rc = strcmp(bson_iter_key(&it), "query") ? fam_field(&a, &it, err) : 0;
    if (!rc)
        rc = fam_check(&a, opts, err);
    return rc ? rc : fam_exec(db, name, &a, reply, err);
}

/*
 * The RecordId of the first match in sort order; ENG_RID_NONE if none.  One
 * scan: when its plan yields the order (an index such as the Queue
 * pattern's {startTime: 1, createdOn: 1}), or there is no sort, its first
 * match is the answer; else the smallest match is kept as the scan goes
 * (the first of equals, as a stable sort would give).
 */
static int fam_target(md_db *db, q_coll *c, const fam_args *a, const q_matcher *m,
                      eng_rid *target, md_error *err)
{
    q_scan s;
    bson_t doc, *best = NULL;
    eng_rid rid;
    bool sorted = !bson_empty(&a->sort);
    q_scan_opts o = {.sort = sorted ? &a->sort : NULL};
    *target = ENG_RID_NONE;
    int rc = q_sort_check(&a->sort, err);
    if (rc)
        return rc;
    rc = q_scan_open_opts(&s, db, c, &a->query, m, &o, err);
    bool first_wins = !sorted || s.plan.sort_provided;
    while (!rc && q_scan_next(&s, &rid, &doc) == 0) {
        if (first_wins) {
            *target = rid;
            break;
        }
        if (!best || q_sort_cmp_docs(&doc, best, &a->sort) < 0) {
            if (best)
                bson_destroy(best);
            best = bson_copy(&doc);
            *target = rid;
        }
    }
    if (best)
        bson_destroy(best);
    if (!rc)
        rc = q_scan_error(&s, err);
    q_scan_close(&s);
    return rc;
}

static void fam_reply(bson_t *reply, int64_t n, int upd_existing, const bson_t *upserted,
                      const bson_t *value, const q_proj *proj)
{
    bson_t leo, projected;
    bson_iter_t it;
    BSON_APPEND_DOCUMENT_BEGIN(reply, "lastErrorObject", &leo);
    q_append_number(&leo, "n", n);
    if (upd_existing >= 0)
        BSON_APPEND_BOOL(&leo, "updatedExisting", upd_existing);
    if (upserted && bson_iter_init_find(&it, upserted, "_id"))
        bson_append_iter(&leo, "upserted", -1, &it);
    bson_append_document_end(reply, &leo);
    if (!value) {
        BSON_APPEND_NULL(reply, "value");
        return;
    }
    q_proj_apply(proj, value, &projected);
    BSON_APPEND_DOCUMENT(reply, "value", &projected);
    bson_destroy(&projected);
}

/* Remove or update the target (found under the collection's write lock).
 * When another writer changed the target between the query and the write
 * (the write finds it gone or no longer matching), the query runs again:
 * two findAndModify calls never take the same document. */
static int fam_existing(md_db *db, q_coll *c, const fam_args *a, const q_matcher *m,
                        const q_update *u, const q_proj *proj, bool *found, bson_t *reply,
                        md_error *err)
{
    bson_t before = BSON_INITIALIZER, after = BSON_INITIALIZER;
    bool done = false;
    int rc = 0;
    q_index *idx = q_idhack_index(db, c);
    q_target tg = {.id_index = idx};
    if (idx && q_idhack_query(&a->query, &tg.id)) { /* IDHACK, inside the write */
        q_update_res res;
        bool deleted;
        if (a->remove)
            rc = q_write_delete_target(db, c, &tg, a->durable, &deleted, &before, err);
        else
            rc = q_write_update_target(db, c, &tg, u, a->durable, &res, &before, &after, err);
        *found = !rc && (a->remove ? deleted : res.matched);
        if (*found)
            fam_reply(reply, 1, a->remove ? -1 : 1, NULL,
                      a->remove || !a->new_ ? &before : &after, proj);
        done = true;
    }
    while (!rc && !done) {
        eng_rid rid = ENG_RID_NONE;
        rc = fam_target(db, c, a, m, &rid, err);
        *found = !rc && rid != ENG_RID_NONE;
        done = !*found;
        if (*found && a->remove) {
            bool deleted;
            rc = q_write_delete(db, c, rid, m, a->durable, &deleted, &before, err);
            done = !rc && deleted;
            if (done)
                fam_reply(reply, 1, -1, NULL, &before, proj);
        } else if (*found) {
            q_update_res res;
            rc = q_write_update(db, c, rid, m, u, a->durable, &res, &before, &after, err);
            done = !rc && res.matched;
            if (done)
                fam_reply(reply, 1, 1, NULL, a->new_ ? &after : &before, proj);
        }
    }
    bson_destroy(&before);
    bson_destroy(&after);
    return rc;
}

static int fam_run(md_db *db, const char *name, const fam_args *a, const q_matcher *m,
                   const q_update *u, const q_proj *proj, bson_t *reply, md_error *err)
{
    int rc = 0;
    for (int attempt = 0;; attempt++) {
        q_coll *c = q_coll_find(db, name);
        bool found = false;
        if (c && c->capped && a->remove)
            return q_capped_refuse_delete(c, err);
        if (c) {
            q_coll_lock(db, c, true);
            rc = fam_existing(db, c, a, m, u, proj, &found, reply, err);
            q_coll_unlock(db, c);
        }
        if (!rc && !found && a->upsert) {
            bson_t doc;
            rc = upsert(db, name, &a->query, u, a->durable, &doc, err);
            if (!rc)
                fam_reply(reply, 1, 0, &doc, a->new_ ? &doc : NULL, proj);
            bson_destroy(&doc);
            if (upsert_lost_race(rc, attempt, &a->query, err))
                continue;
        } else if (!rc && !found) {
            fam_reply(reply, 0, a->remove ? -1 : 0, NULL, NULL, proj);
        }
        return rc;
    }
}

int q_cmd_find_and_modify(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err)
{
    const char *name;
    char ns[ENG_IDENT_MAX];
    fam_args a;
    fam_args_init(&a);
    int rc = q_cmd_coll_name(db, cmd, false, &name, ns, err);
    if (!rc)
        rc = fam_parse(cmd, &a, err);
    return rc ? rc : fam_exec(db, name, &a, reply, err);
}
