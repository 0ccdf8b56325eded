/*
 * q_write.c -- the write path: insert, update and delete of one document,
 * each in one engine transaction that also keeps every index exact
 * (q_int.h, invariant 3), and index builds over existing records.
 *
 * Keys are computed before the first write because an engine view dies at
 * the next write (eng.h).  Any failure aborts the transaction, so a
 * document is never half-written; an unexpected engine failure also puts
 * the handle into the failed state (invariant 4).
 */
#include <assert.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "q_int.h"

/* ---- the failed state --------------------------------------------------------- */

int q_write_allowed(md_db *db, md_error *err)
{
    if (!__atomic_load_n(&db->failed, __ATOMIC_ACQUIRE))
        return 0;
    return q_err(err, MD_EREADONLY, MD_CODE_ILLEGAL_OPERATION,
                 "this database handle refuses writes after a failed write (%s); "
                 "close and reopen the database",
                 db->fail_err.message);
}

int q_write_failed(md_db *db, int rc, md_error *err)
{
    bool fatal = rc == MD_EIO || rc == MD_ECORRUPT || rc == MD_ENOSPC;
    if (!fatal)
        return rc;
    /* fail_err is written once, before failed turns true (readers load
     * failed with acquire before they read fail_err) */
    pthread_mutex_lock(&db->fail_mu);
    if (!db->failed) {
        if (err && err->message[0])
            db->fail_err = *err;
        else
            md_error_set(&db->fail_err, rc, eng_rc_to_code(rc), "%s", md_strerror(rc));
        __atomic_store_n(&db->failed, true, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&db->fail_mu);
    return rc;
}

/* ---- documents ----------------------------------------------------------------- */

static int check_id(bson_type_t t, md_error *err)
{
    if (t == BSON_TYPE_ARRAY || t == BSON_TYPE_REGEX || t == BSON_TYPE_UNDEFINED)
        return q_err(err, MD_EINVAL, MD_CODE_INVALID_ID_FIELD, "can't use a%s %s for _id",
                     t == BSON_TYPE_ARRAY ? "n" : "", q_type_name(t));
    return 0;
}

static int too_large(const bson_t *doc, md_error *err)
{
    return q_err(err, MD_ETOOBIG, MD_CODE_BSON_OBJECT_TOO_LARGE,
                 "object to insert too large. size in bytes: %u, max size: %d", doc->len,
                 Q_BSON_MAX);
}

int q_doc_prepare_insert(const bson_t *doc, const eng_bson_top *top, bson_t *out,
                         md_error *err)
{
    bson_iter_t it, id;
    eng_bson_top walked = {.nid = 0};
    if (doc->len > Q_BSON_MAX)
        return too_large(doc, err);
    const uint8_t *p = bson_get_data(doc);
    if (!top) {
        /* validated where it entered (md_db_command), not again: the names
         * are walked over the bytes, not with bson_iter_next */
        eng_bson_elem e;
        uint32_t i = 4, end = doc->len - 1;
        bool first = true;
        while (!walked.dollar && eng_bson_next(p, end, &i, &e)) {
            bool is_id = e.klen == 3 && memcmp(e.key, "_id", 3) == 0;
            walked.id_first |= first && is_id;
            walked.nid += is_id;
            walked.dollar = e.key[0] == '$' ? e.key : NULL;
            first = false;
        }
        if (!walked.dollar && i != end)
            return q_err(err, MD_EINVAL, MD_CODE_INVALID_BSON,
                         "invalid BSON in document to insert");
        top = &walked;
    }
    if (top->dollar)
        return q_err(err, MD_EINVAL, MD_CODE_DOLLAR_PREFIXED_FIELD_NAME,
                     "Document can't have $ prefixed field names: %s", top->dollar);
    if (top->id_first && top->nid == 1) { /* already in the stored form: a view, no copy */
        if (check_id((bson_type_t)p[4], err))
            return MD_EINVAL;
        bson_init_static(out, p, doc->len);
        return 0;
    }
    bool has_id = top->nid > 0 && bson_iter_init_find(&id, doc, "_id");
    if (has_id && check_id(bson_iter_type(&id), err))
        return MD_EINVAL;
    bson_init(out);
    if (has_id) {
        bson_append_iter(out, "_id", 3, &id);
    } else {
        bson_oid_t oid;
        bson_oid_init(&oid, NULL);
        BSON_APPEND_OID(out, "_id", &oid);
    }
    bson_iter_init(&it, doc);
    while (bson_iter_next(&it))
        if (strcmp(bson_iter_key(&it), "_id") != 0)
            bson_append_iter(out, NULL, 0, &it);
    if (out->len > Q_BSON_MAX) {
        bson_destroy(out);
        return too_large(doc, err);
    }
    return 0;
}

/* ---- keys of one document for every index ------------------------------------------- */

static void keys_free(q_coll *c, q_keyset *ks)
{
    if (!ks)
        return;
    for (size_t i = 0; i < c->nidx; i++)
        q_keyset_cleanup(&ks[i]);
    free(ks);
}

static int keys_compute(q_coll *c, const bson_t *doc, q_keyset **out, md_error *err)
{
    q_keyset *ks = calloc(c->nidx ? c->nidx : 1, sizeof *ks);
    assert(ks && c->nidx <= Q_INDEXES_MAX);
    for (size_t i = 0; i < c->nidx; i++)
        q_keyset_init(&ks[i]);
    for (size_t i = 0; i < c->nidx; i++) {
        int rc = q_index_doc_keys(c->idx[i], doc, &ks[i], err);
        if (rc) {
            keys_free(c, ks);
            return rc;
        }
    }
    *out = ks;
    return 0;
}

static bool keyset_has(const q_keyset *ks, const q_buf *k)
{
    for (size_t i = 0; i < ks->n; i++)
        if (ks->keys[i].len == k->len && memcmp(ks->keys[i].data, k->data, k->len) == 0)
            return true;
    return false;
}

static bool keyset_equal(const q_keyset *a, const q_keyset *b)
{
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (!keyset_has(b, &a->keys[i]))
            return false;
    return true;
}

static int dup_key_error(q_coll *c, q_index *ix, const bson_t *doc, md_error *err)
{
    char desc[512];
    q_key_describe(&ix->key, doc, desc, sizeof desc);
    return q_err(err, MD_EDUPKEY, MD_CODE_DUPLICATE_KEY,
                 "E11000 duplicate key error collection: %s index: %s dup key: %s", c->ns,
                 ix->name, desc);
}

/* Insert keys[0, n) into ix (skipping those present in `except`). */
static int keys_insert_v(eng_txn *t, q_coll *c, q_index *ix, const q_buf *keys, size_t n,
                         const q_keyset *except, const bson_t *doc, eng_rid rid, md_error *err)
{
    for (size_t k = 0; k < n; k++) {
        eng_rid dup = ENG_RID_NONE;
        if (except && keyset_has(except, &keys[k]))
            continue;
        int rc = eng_ss_insert(ix->ss, t, keys[k].data, (uint32_t)keys[k].len, rid, ix->unique,
                               &dup, err);
        if (rc == MD_EDUPKEY)
            return dup_key_error(c, ix, doc, err);
        if (rc)
            return q_err_engine(err, rc, "inserting an index key");
    }
    return 0;
}

static int keys_insert(eng_txn *t, q_coll *c, q_index *ix, const q_keyset *ks,
                       const q_keyset *except, const bson_t *doc, eng_rid rid, md_error *err)
{
    return keys_insert_v(t, c, ix, ks->keys, ks->n, except, doc, rid, err);
}

/* Remove the keys of ks from ix (skipping those in `except`).  A key that is
 * already missing is not an error here; validate reports such damage. */
static int keys_remove(eng_txn *t, q_index *ix, const q_keyset *ks, const q_keyset *except,
                       eng_rid rid, md_error *err)
{
    for (size_t k = 0; k < ks->n; k++) {
        if (except && keyset_has(except, &ks->keys[k]))
            continue;
        int rc = eng_ss_remove(ix->ss, t, ks->keys[k].data, (uint32_t)ks->keys[k].len, rid);
        if (rc && rc != MD_NOTFOUND)
            return q_err_engine(err, rc, "removing an index key");
    }
    return 0;
}

/*
 * Multikey flags the new keys call for.  The in-memory flag turns true at
 * once (planners in other threads must stop trusting the index's bounds
 * before the keys land) and stays true; the catalog entry is rewritten in
 * this transaction unless it already says so.  flipped[] (nidx entries)
 * names the indexes whose catalog flag this transaction sets.
 */
static int multikey_note(md_db *db, eng_txn *t, q_coll *c, const q_keyset *ks, bool *flipped,
                         md_error *err)
{
    bool any = false;
    for (size_t i = 0; i < c->nidx; i++) {
        q_index *ix = c->idx[i];
        flipped[i] = ks[i].multikey && !__atomic_load_n(&ix->multikey_saved, __ATOMIC_ACQUIRE);
        if (flipped[i]) {
            Q_SET(ix->multikey, true);
            any = true;
        }
    }
    return any ? q_catalog_put(db, t, c, err) : 0;
}

/* After commit (ok) or abort.  An engine that runs one transaction at a
 * time may put a flag back after an abort: no other writer can have relied
 * on it. */
static void multikey_done(md_db *db, q_coll *c, const bool *flipped, bool ok)
{
    for (size_t i = 0; flipped && i < c->nidx; i++) {
        if (!flipped[i])
            continue;
        if (ok)
            __atomic_store_n(&c->idx[i]->multikey_saved, true, __ATOMIC_RELEASE);
        else if (!db->ops->concurrent)
            Q_SET(c->idx[i]->multikey, false);
    }
}

/* Abort t, end it, settle multikey flags, mark the handle failed if needed. */
static int write_abort(md_db *db, eng_txn *t, q_coll *c, const bool *flipped, int rc,
                       md_error *err)
{
    eng_txn_abort(t);
    q_txn_end(db);
    multikey_done(db, c, flipped, false);
    return q_write_failed(db, rc, err);
}

static int write_commit(md_db *db, eng_txn *t, q_coll *c, const bool *flipped, bool durable,
                        md_error *err)
{
    int rc = eng_txn_commit(t, durable, err);
    q_txn_end(db);
    multikey_done(db, c, flipped, rc == 0);
    if (rc) {
        q_err_engine(err, rc, "committing");
        return q_write_failed(db, rc, err);
    }
    q_plan_cache_note_write(c);
    return 0;
}

static int write_begin(md_db *db, eng_txn **t, md_error *err)
{
    int rc = q_txn_begin(db, t);
    return rc ? q_err_engine(err, rc, "starting a transaction") : 0;
}

/*
 * Each write below is an attempt in one transaction, run again until it
 * does not end in a write conflict, as MongoDB's writeConflictRetry: the
 * attempt has aborted its transaction, so trying again from the start (a
 * new snapshot, the document read again) is all there is to it.  Only
 * concurrent engines ever conflict.
 */

/* ---- insert ---------------------------------------------------------------------- */

/*
 * The keys of a document being inserted, for every index, made once
 * before the first attempt.  A one-field index (q_index.simple: the _id
 * index, and most secondary ones) has its one key made by q_key_simple
 * into `mem`, on the caller's stack: such an insert allocates nothing for
 * its keys.  The other indexes' keys, and a one-field key q_key_simple
 * leaves to the generator, are q_index_doc_keys' in ks[i].
 */
typedef struct ins_keys {
    q_keyset ks[Q_INDEXES_MAX]; /* every index: multikey_note reads them */
    q_buf one[Q_INDEXES_MAX];   /* the key when has_one[i] */
    bool has_one[Q_INDEXES_MAX];
    size_t used;                /* bytes of mem taken */
    uint8_t mem[512];
} ins_keys;

static void ins_keys_free(q_coll *c, ins_keys *ik)
{
    for (size_t i = 0; i < c->nidx; i++) {
        q_keyset_cleanup(&ik->ks[i]);
        if (ik->has_one[i])
            q_buf_cleanup(&ik->one[i]);
    }
}

/* simple: one-field indexes through q_key_simple (false with
 * internalQueryFastPaths: false, for the differential tests). */
static int ins_keys_compute(q_coll *c, const bson_t *doc, ins_keys *ik, bool simple,
                            md_error *err)
{
    assert(c->nidx <= Q_INDEXES_MAX);
    ik->used = 0;
    for (size_t i = 0; i < c->nidx; i++) {
        q_keyset_init(&ik->ks[i]);
        ik->has_one[i] = false;
    }
    for (size_t i = 0; i < c->nidx; i++) {
        q_index *ix = c->idx[i];
        if (simple && ix->simple) {
            q_buf *b = &ik->one[i];
            size_t room = sizeof ik->mem - ik->used;
            if (room >= 32)
                q_buf_init_fixed(b, ik->mem + ik->used, room);
            else
                q_buf_init(b);
            int r = q_key_simple(ix->simple, ix->simple_desc, ix->sparse, doc, b);
            if (r >= 0) { /* 0: no key (sparse), one[i] is empty */
                ik->has_one[i] = true;
                if (b->fixed && b->data == b->fixed)
                    ik->used += b->len + 1; /* and q_buf's spare byte */
                continue;
            }
            q_buf_cleanup(b);
        }
        int rc = q_index_doc_keys(ix, doc, &ik->ks[i], err);
        if (rc) {
            ins_keys_free(c, ik);
            return rc;
        }
    }
    return 0;
}

static int insert_attempt(md_db *db, q_coll *c, const bson_t *doc, const ins_keys *ik,
                          bool durable, eng_rid *rid, md_error *err)
{
    bool flipped[Q_INDEXES_MAX] = {false};
    eng_txn *t = NULL;
    int rc = write_begin(db, &t, err);
    if (rc)
        return rc;
    rc = eng_rs_insert(c->rs, t, bson_get_data(doc), doc->len, rid, err);
    if (rc)
        q_err_engine(err, rc, "inserting a record");
    for (size_t i = 0; !rc && i < c->nidx; i++) {
        if (ik->has_one[i])
            rc = keys_insert_v(t, c, c->idx[i], &ik->one[i], ik->one[i].len ? 1 : 0, NULL, doc,
                               *rid, err);
        else
            rc = keys_insert(t, c, c->idx[i], &ik->ks[i], NULL, doc, *rid, err);
    }
    if (!rc)
        rc = multikey_note(db, t, c, ik->ks, flipped, err);
    if (rc)
        return write_abort(db, t, c, flipped, rc, err);
    return write_commit(db, t, c, flipped, durable, err);
}

int q_write_insert(md_db *db, q_coll *c, const bson_t *doc, bool durable, eng_rid *rid_out,
                   md_error *err)
{
    ins_keys ik;
    eng_rid rid = ENG_RID_NONE;
    int rc = q_write_allowed(db, err);
    if (rc || (rc = ins_keys_compute(c, doc, &ik, !db->no_fast, err)) != 0)
        return rc;
    if (c->capped)
        pthread_mutex_lock(&c->cap_write_mu);
    for (int n = 0; (rc = insert_attempt(db, c, doc, &ik, durable, &rid, err)) == MD_EWRITECONFLICT;
         n++)
        q_write_conflict(db, n, err);
    if (c->capped) {
        pthread_mutex_unlock(&c->cap_write_mu);
        if (!rc)
            q_capped_notify(db, c);
    }
    if (!rc) {
        Q_COUNT(db->m.inserted, 1);
        if (rid_out)
            *rid_out = rid;
    }
    ins_keys_free(c, &ik);
    return rc;
}

/* ---- update ---------------------------------------------------------------------- */

/*
 * The state of one update attempt.  Two ways to the new document:
 *
 *   in place (q_update_inplace): the changed bytes are in `src`, `dmg`
 *     points into it; nd is built (a copy of the old document with the
 *     damages patched in) only when something needs it: keys of an index
 *     the update affects, an engine without in-place updates, or the
 *     caller's `after`.
 *   rebuilt (q_update_apply_pos): nd is the new document; dmg, when the
 *     size is unchanged, points into nd.
 *
 * skip[i]: index i's keys cannot change (q_update_affects said no for
 * every key path, and it is not partial), so its keys are neither computed
 * nor touched -- unless the record moves (see update_indexes).
 */
typedef struct upd_state {
    bson_t nd;
    q_arena mem;    /* nd's bytes when built by patching */
    bool has_nd, inplace;
    q_buf src;
    q_damages dmg;
    q_keyset *oldk, *newk;
    uint32_t old_len;
    bool skip[Q_INDEXES_MAX];
    uint8_t src_space[256];      /* a few changed fields need no heap */
    eng_damage dmg_space[16];
} upd_state;

static void upd_state_init(upd_state *s)
{
    memset(s, 0, offsetof(upd_state, src_space));
    bson_init(&s->nd);
    q_buf_init_fixed(&s->src, s->src_space, sizeof s->src_space);
    q_damages_init_fixed(&s->dmg, s->dmg_space, sizeof s->dmg_space / sizeof *s->dmg_space);
}

static void upd_state_cleanup(q_coll *c, upd_state *s)
{
    keys_free(c, s->oldk);
    keys_free(c, s->newk);
    q_damages_cleanup(&s->dmg);
    q_buf_cleanup(&s->src);
    bson_destroy(&s->nd);
    q_arena_release(&s->mem);
    memset(s, 0, offsetof(upd_state, src_space));
}

/* Could u change ix's keys?  A partial index's membership depends on
 * fields outside its key, so it always could; so do a text index's keys
 * (its weighted fields, "$**", the language override are not its key). */
static bool index_affected(const q_index *ix, const q_update *u)
{
    bson_iter_t it;
    if (ix->partial || ix->text || !bson_iter_init(&it, &ix->key))
        return true;
    while (bson_iter_next(&it))
        if (q_update_affects(u, bson_iter_key(&it)))
            return true;
    return false;
}

/*
 * skip[i] := index i cannot be affected by u (index_affected is false).
 * The answer depends only on the parsed update and the index definitions,
 * so the thread remembers the last one, keyed by serial numbers that are
 * never reused: the cached parse of a repeated update ({$inc: {n: 1}} a
 * million times) asks about the same indexes every time.
 */
static void update_skips(const q_update *u, const q_coll *c, bool *skip)
{
    static __thread struct {
        uint64_t u; /* 0: nothing remembered */
        size_t n;
        uint64_t ix[Q_INDEXES_MAX];
        bool skip[Q_INDEXES_MAX];
    } memo;
    uint64_t us = q_update_serial(u);
    bool hit = memo.u == us && memo.n == c->nidx;
    for (size_t i = 0; hit && i < c->nidx; i++)
        hit = memo.ix[i] == c->idx[i]->serial;
    if (!hit) {
        assert(c->nidx <= Q_INDEXES_MAX);
        memo.u = us;
        memo.n = c->nidx;
        for (size_t i = 0; i < c->nidx; i++) {
            memo.ix[i] = c->idx[i]->serial;
            memo.skip[i] = !index_affected(c->idx[i], u);
        }
    }
    memcpy(skip, memo.skip, c->nidx * sizeof *skip);
}

static int update_indexes(md_db *db, eng_txn *t, q_coll *c, upd_state *s, eng_rid old_rid,
                          eng_rid new_rid, bool moved, md_error *err)
{
    int rc = 0;
    for (size_t i = 0; !rc && i < c->nidx; i++) {
        q_index *ix = c->idx[i];
        q_keyset ks;
        if (s->skip[i] && moved) {
            /* unchanged keys, at a new RecordId: the old keys are the new
             * document's (the old bytes may be gone with the move) */
            q_keyset_init(&ks);
            rc = q_index_doc_keys(ix, &s->nd, &ks, err);
            if (!rc)
                rc = keys_remove(t, ix, &ks, NULL, old_rid, err);
            if (!rc)
                rc = keys_insert(t, c, ix, &ks, NULL, &s->nd, new_rid, err);
            q_keyset_cleanup(&ks);
        } else if (s->skip[i]) {
            continue;
        } else if (moved) {
            rc = keys_remove(t, ix, &s->oldk[i], NULL, old_rid, err);
            if (!rc)
                rc = keys_insert(t, c, ix, &s->newk[i], NULL, &s->nd, new_rid, err);
        } else if (!keyset_equal(&s->oldk[i], &s->newk[i])) {
            rc = keys_remove(t, ix, &s->oldk[i], &s->newk[i], old_rid, err);
            if (!rc)
                rc = keys_insert(t, c, ix, &s->newk[i], &s->oldk[i], &s->nd, new_rid, err);
        }
    }
    (void)db;
    return rc;
}

/* Store the new document over record rid: the damages when the engine
 * updates in place and the size is unchanged, else the whole document
 * (which may move the record). */
static int store_update(eng_txn *t, q_coll *c, eng_rid rid, const upd_state *s,
                        eng_rid *new_rid, bool *moved, md_error *err)
{
    int rc;
    *new_rid = rid;
    *moved = false;
    if (eng_rs_has_damages(c->rs) && s->dmg.n > 0 && (s->inplace || s->nd.len == s->old_len))
        rc = eng_rs_update_damages(c->rs, t, rid,
                                   s->inplace ? s->src.data : bson_get_data(&s->nd), s->dmg.v,
                                   s->dmg.n, err);
    else
        rc = eng_rs_update(c->rs, t, rid, bson_get_data(&s->nd), s->nd.len, new_rid, moved,
                           err);
    return rc ? q_err_engine(err, rc, "updating a record") : 0;
}

/* Keys of doc for the indexes not skipped (the others stay empty). */
static int keys_compute_some(q_coll *c, const bson_t *doc, const bool *skip, q_keyset **out,
                             md_error *err)
{
    q_keyset *ks = calloc(c->nidx ? c->nidx : 1, sizeof *ks);
    assert(ks && c->nidx <= Q_INDEXES_MAX);
    for (size_t i = 0; i < c->nidx; i++)
        q_keyset_init(&ks[i]);
    for (size_t i = 0; i < c->nidx; i++) {
        int rc = skip[i] ? 0 : q_index_doc_keys(c->idx[i], doc, &ks[i], err);
        if (rc) {
            keys_free(c, ks);
            return rc;
        }
    }
    *out = ks;
    return 0;
}

/* nd := old with the in-place damages patched in. */
static void build_patched(upd_state *s, const bson_t *old)
{
    uint8_t *buf = q_arena_alloc(&s->mem, old->len);
    memcpy(buf, bson_get_data(old), old->len);
    q_damages_patch(&s->dmg, s->src.data, buf);
    bson_init_static(&s->nd, buf, old->len);
}

/* Everything an update needs from the old document, computed while its
 * view is still valid.  0 with changed=false: nothing to write.  want_nd:
 * the caller needs the new document. */
static int update_prepare(md_db *db, q_coll *c, const bson_t *old, const q_update *u,
                          const char *pos, bool want_nd, upd_state *s, bool *changed,
                          md_error *err)
{
    bool dmg = eng_rs_has_damages(c->rs), any_keys = false;
    int rc;
    s->old_len = old->len;
    if (!db->no_fast)
        update_skips(u, c, s->skip);
    for (size_t i = 0; i < c->nidx; i++)
        any_keys |= !s->skip[i];
    if (!db->no_fast && q_update_inplace(u, old, &s->src, &s->dmg, changed) == 0) {
        s->inplace = true;
        if (!*changed)
            return 0;
        if (any_keys || !dmg || want_nd)
            build_patched(s, old);
    } else {
        bson_destroy(&s->nd);
        rc = q_update_apply_pos(u, old, pos, false, &s->nd, changed, dmg ? &s->dmg : NULL, err);
        if (rc || !*changed)
            return rc;
        if (s->nd.len > Q_BSON_MAX)
            return q_err(err, MD_ETOOBIG, Q_CODE_DOC_TOO_LARGE_AFTER_UPDATE,
                         "Resulting document after update is larger than %d", Q_BSON_MAX);
        if (c->capped && s->nd.len != old->len)
            return q_err(err, MD_EINVAL, Q_CODE_CAPPED_CANNOT_GROW,
                         "Cannot change the size of a document in a capped collection: %u != %u",
                         old->len, s->nd.len);
    }
    if (!any_keys)
        return 0;
    rc = keys_compute_some(c, old, s->skip, &s->oldk, err);
    if (!rc)
        rc = keys_compute_some(c, &s->nd, s->skip, &s->newk, err);
    return rc;
}

static int update_write(md_db *db, eng_txn *t, q_coll *c, eng_rid rid, upd_state *s,
                        bool durable, q_update_res *res, md_error *err)
{
    bool flipped[Q_INDEXES_MAX] = {false};
    eng_rid nrid;
    bool moved;
    int rc = store_update(t, c, rid, s, &nrid, &moved, err);
    if (!rc)
        rc = update_indexes(db, t, c, s, rid, nrid, moved, err);
    if (!rc && s->newk)
        rc = multikey_note(db, t, c, s->newk, flipped, err);
    if (rc)
        return write_abort(db, t, c, flipped, rc, err);
    if ((rc = write_commit(db, t, c, flipped, durable, err)) != 0)
        return rc;
    res->modified = true;
    res->moved = moved;
    res->rid = nrid;
    return 0;
}

/* Read record rid inside transaction t: 0 with *found false when it is gone. */
static int read_record(q_coll *c, eng_rid rid, bson_t *doc, bool *found, md_error *err)
{
    const uint8_t *data;
    uint32_t len;
    int rc = eng_rs_get(c->rs, rid, &data, &len);
    *found = rc == 0;
    if (rc == MD_NOTFOUND)
        return 0;
    if (rc || !bson_init_static(doc, data, len))
        return ENG_CORRUPT(err, "record %lld of %s is not a BSON document", (long long)rid,
                           c->ns);
    return 0;
}

/* The record a target names, inside the attempt's transaction: by rid, or
 * by _id through the _id index (IDHACK), so that lookup and write see the
 * same state.  0 with *found false when there is none. */
static int read_target(md_db *db, q_coll *c, const q_target *tg, eng_rid *rid, bson_t *doc, bool *found,
                       md_error *err)
{
    *found = false;
    if (tg->id_index) {
        int rc = q_idhack_rid(db, tg->id_index, &tg->id, rid);
        if (rc == MD_NOTFOUND)
            return 0;
        if (rc)
            return q_read_error(rc, err);
        Q_COUNT(db->m.scanned_objects, 1);
    } else {
        *rid = tg->rid;
    }
    return read_record(c, *rid, doc, found, err);
}

/*
 * One attempt, all inside one transaction so that the document read is the
 * one the write replaces (a concurrent engine's snapshot; a write conflict
 * if another transaction got there first):
 *
 *   begin -> locate -> get -> match? -> in place? damages : q_update_apply
 *     -> keys of the indexes the update can affect, old and new
 *     -> damages? rs_update_damages : rs_update
 *        -> moved?  every index: remove old keys @old rid, insert new @new rid
 *           else    per affected index: remove keys that went away, insert
 *                   new ones (an index whose keys did not change is not touched)
 *     -> multikey flags flipped? catalog entry rewritten -> commit
 */
static int update_attempt(md_db *db, q_coll *c, const q_target *tg, const q_update *u,
                          bool durable, q_update_res *res, bson_t *before, bson_t *after,
                          md_error *err)
{
    bson_t old;
    bool found, changed = false;
    char pos[64] = "";
    upd_state s;
    eng_txn *t = NULL;
    eng_rid rid = tg->rid;
    memset(res, 0, sizeof *res);
    res->rid = rid;
    if (before)
        bson_reinit(before);
    if (after)
        bson_reinit(after);
    int rc = write_begin(db, &t, err);
    if (rc)
        return rc;
    upd_state_init(&s);
    rc = read_target(db, c, tg, &rid, &old, &found, err);
    res->rid = rid;
    if (!rc && found && (!tg->m || q_matcher_matches_pos(tg->m, &old, pos, sizeof pos))) {
        res->matched = true;
        rc = update_prepare(db, c, &old, u, pos, after != NULL, &s, &changed, err);
        if (!rc && before)
            bson_concat(before, &old);
        if (!rc && after)
            bson_concat(after, changed ? &s.nd : &old);
    }
    if (!rc && changed) {
        rc = update_write(db, t, c, rid, &s, durable, res, err);
    } else {
        eng_txn_abort(t); /* nothing written: a read-only transaction */
        q_txn_end(db);
    }
    upd_state_cleanup(c, &s);
    return rc;
}

int q_write_update_target(md_db *db, q_coll *c, const q_target *tg, const q_update *u,
                          bool durable, q_update_res *res, bson_t *before, bson_t *after,
                          md_error *err)
{
    int rc = q_write_allowed(db, err);
    memset(res, 0, sizeof *res);
    res->rid = tg->rid;
    if (rc)
        return rc;
    if (c->capped)
        pthread_mutex_lock(&c->cap_write_mu);
    for (int n = 0;
         (rc = update_attempt(db, c, tg, u, durable, res, before, after, err)) ==
         MD_EWRITECONFLICT;
         n++)
        q_write_conflict(db, n, err);
    if (c->capped)
        pthread_mutex_unlock(&c->cap_write_mu);
    if (rc) {
        if (before)
            bson_reinit(before);
        if (after)
            bson_reinit(after);
    } else if (res->modified) {
        Q_COUNT(db->m.updated, 1);
    }
    return rc;
}

int q_write_update(md_db *db, q_coll *c, eng_rid rid, const q_matcher *m, const q_update *u,
                   bool durable, q_update_res *res, bson_t *before, bson_t *after,
                   md_error *err)
{
    q_target tg = {.rid = rid, .m = m};
    return q_write_update_target(db, c, &tg, u, durable, res, before, after, err);
}

/* ---- delete ---------------------------------------------------------------------- */

static int delete_attempt(md_db *db, q_coll *c, const q_target *tg, bool durable,
                          bool *deleted, bson_t *before, md_error *err)
{
    eng_rid rid = tg->rid;
    const q_matcher *m = tg->m;
    bson_t doc;
    bool found;
    q_keyset *ks = NULL;
    eng_txn *t = NULL;
    *deleted = false;
    if (before)
        bson_reinit(before);
    int rc = write_begin(db, &t, err);
    if (rc)
        return rc;
    rc = read_target(db, c, tg, &rid, &doc, &found, err);
    if (rc || !found || (m && !q_matcher_matches(m, &doc))) {
        eng_txn_abort(t);
        q_txn_end(db);
        return rc;
    }
    if (before)
        bson_concat(before, &doc);
    rc = keys_compute(c, &doc, &ks, err);
    for (size_t i = 0; !rc && i < c->nidx; i++)
        rc = keys_remove(t, c->idx[i], &ks[i], NULL, rid, err);
    if (!rc && (rc = eng_rs_remove(c->rs, t, rid)) != 0)
        q_err_engine(err, rc, "removing a record");
    keys_free(c, ks);
    if (rc)
        return write_abort(db, t, c, NULL, rc, err);
    if ((rc = write_commit(db, t, c, NULL, durable, err)) == 0)
        *deleted = true;
    return rc;
}

int q_write_delete_target(md_db *db, q_coll *c, const q_target *tg, bool durable,
                          bool *deleted, bson_t *before, md_error *err)
{
    *deleted = false;
    int rc = q_write_allowed(db, err);
    if (rc)
        return rc;
    if (c->capped)
        return q_capped_refuse_delete(c, err);
    for (int n = 0;
         (rc = delete_attempt(db, c, tg, durable, deleted, before, err)) == MD_EWRITECONFLICT;
         n++)
        q_write_conflict(db, n, err);
    if (rc && before)
        bson_reinit(before);
    if (!rc && *deleted)
        Q_COUNT(db->m.deleted, 1);
    return rc;
}

int q_write_delete(md_db *db, q_coll *c, eng_rid rid, const q_matcher *m, bool durable,
                   bool *deleted, bson_t *before, md_error *err)
{
    q_target tg = {.rid = rid, .m = m};
    return q_write_delete_target(db, c, &tg, durable, deleted, before, err);
}

/* ---- capped collections ------------------------------------------------------------ */

int q_capped_refuse_delete(const q_coll *c, md_error *err)
{
    return q_err(err, MD_EINVAL, MD_CODE_ILLEGAL_OPERATION,
                 "cannot remove from a capped collection: %s", c->ns);
}

/*
 * The ring is removing record rid inside an insert's transaction t: remove
 * its index entries in the same transaction.  The keys are computed from a
 * copy first, since the engine's view may die at the first index write.
 */
int q_capped_hook(void *ctx, eng_txn *t, eng_rid rid, const uint8_t *data, uint32_t len)
{
    q_coll *c = ctx;
    q_keyset *ks = NULL;
    md_error err;
    bson_t *copy = bson_new_from_data(data, len);
    if (!copy)
        return MD_ECORRUPT;
    md_error_clear(&err);
    int rc = keys_compute(c, copy, &ks, &err);
    for (size_t i = 0; !rc && i < c->nidx; i++)
        rc = keys_remove(t, c->idx[i], &ks[i], NULL, rid, &err);
    keys_free(c, ks);
    bson_destroy(copy);
    return rc;
}

void q_capped_notify(md_db *db, q_coll *c)
{
    pthread_mutex_lock(&db->cap_mu);
    c->cap_inserts++;
    if (db->cap_waiters > 0)
        pthread_cond_broadcast(&db->cap_cv);
    pthread_mutex_unlock(&db->cap_mu);
}

/* ---- index builds ------------------------------------------------------------------- */

int q_index_add_doc(md_db *db, eng_txn *t, q_coll *c, q_index *ix, const bson_t *doc,
                    eng_rid rid, bool *multikey_changed, md_error *err)
{
    q_keyset ks;
    q_keyset_init(&ks);
    int rc = q_index_doc_keys(ix, doc, &ks, err);
    if (!rc)
        rc = keys_insert(t, c, ix, &ks, NULL, doc, rid, err);
    if (!rc && ks.multikey && !ix->multikey) {
        ix->multikey = ix->multikey_saved = true; /* under the exclusive lock */
        *multikey_changed = true;
    }
    q_keyset_cleanup(&ks);
    return rc;
}

/* The rids are collected first; each document is copied out of the engine
 * before keys are written, since a write ends the life of a view. */
int q_index_build(md_db *db, eng_txn *t, q_coll *c, q_index *ix, md_error *err)
{
    eng_rid *rids = NULL;
    size_t n = 0;
    bool mk = false;
    int rc = q_scan_collect(db, c, NULL, NULL, 0, &rids, &n, err);
    for (size_t i = 0; !rc && i < n; i++) {
        const uint8_t *data;
        uint32_t len;
        bson_t view, *copy;
        if (eng_rs_get(c->rs, rids[i], &data, &len) != 0 ||
            !bson_init_static(&view, data, len)) {
            rc = ENG_CORRUPT(err, "record %lld of %s vanished or is not BSON",
                             (long long)rids[i], c->ns);
            break;
        }
        copy = bson_copy(&view);
        rc = q_index_add_doc(db, t, c, ix, copy, rids[i], &mk, err);
        bson_destroy(copy);
    }
    free(rids);
    return rc;
}
