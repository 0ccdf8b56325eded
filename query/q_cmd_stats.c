/*
 * q_cmd_stats.c -- commands that look at (or tidy) storage: collStats,
 * serverStatus, validate, compact and fsync.
 *
 * collStats reports the engine's numbers as MongoDB names them (size =
 * eng_rs_stats data_size, mmapv1's netLength semantics) plus the engine's
 * own subdocument under its name, which always carries the update counters
 * {inserts, updates, bytesWritten}, plus {allocationStrategy,
 * inPlaceUpdates, moves} on engines that can update in place.
 *
 * validate trusts nothing: the engine checks its structures first; only if
 * they are sound are the records walked (bounded), and with {full: true}
 * every index checked against the records both ways (each document's keys
 * found by exact seek, each entry naming a live record, equal counts).
 * Damage gives valid: false and errors, never a crash.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "q_int.h"

/* ---- collStats ---------------------------------------------------------------------- */

static void append_engine_stats(md_db *db, q_coll *c, const eng_rs_stats *st,
                                bson_t *reply)
{
    bson_t sub = BSON_INITIALIZER;
    /* Allocation strategies, in-place updates and moves only mean something
     * on an engine that can update in place; one that rewrites every update
     * (btree) reports its own write costs instead. */
    bool in_place = eng_rs_has_damages(c->rs);
    eng_rs_append_stats(c->rs, &sub);
    if (in_place && !bson_has_field(&sub, "allocationStrategy"))
        BSON_APPEND_UTF8(&sub, "allocationStrategy", eng_alloc_name(c->alloc));
    if (!bson_has_field(&sub, "inserts"))
        BSON_APPEND_INT64(&sub, "inserts", st->n_inserts);
    if (!bson_has_field(&sub, "updates"))
        BSON_APPEND_INT64(&sub, "updates", st->n_updates);
    if (in_place && !bson_has_field(&sub, "inPlaceUpdates"))
        BSON_APPEND_INT64(&sub, "inPlaceUpdates", st->n_inplace);
    if (in_place && !bson_has_field(&sub, "moves"))
        BSON_APPEND_INT64(&sub, "moves", st->n_moves);
    if (!bson_has_field(&sub, "bytesWritten"))
        BSON_APPEND_INT64(&sub, "bytesWritten", st->bytes_written);
    BSON_APPEND_DOCUMENT(reply, db->ops->name, &sub);
    bson_destroy(&sub);
}

static void coll_stats_reply(md_db *db, q_coll *c, int64_t scale, bson_t *reply)
{
    eng_rs_stats st;
    bson_t sizes;
    int64_t total = 0;
    q_coll_stats(c, &st);
    BSON_APPEND_UTF8(reply, "ns", c->ns);
    q_append_number(reply, "size", st.data_size / scale);
    q_append_number(reply, "count", st.count);
    q_append_number(reply, "avgObjSize", st.count ? st.data_size / st.count : 0);
    q_append_number(reply, "storageSize", st.storage_size / scale);
    BSON_APPEND_BOOL(reply, "capped", c->capped);
    if (c->capped) {
        /* unlimited: 3.x's mmapv1 says 2^31-1, WiredTiger -1 */
        int64_t max = c->capped_max > 0 ? c->capped_max
                      : strcmp(db->ops->name, "mmapv1") == 0 ? INT32_MAX : -1;
        q_append_number(reply, "max", max);
        q_append_number(reply, "maxSize", c->capped_size / scale);
    }
    append_engine_stats(db, c, &st, reply);
    q_append_number(reply, "nindexes", (int64_t)c->nidx);
    bson_init(&sizes);
    for (size_t i = 0; i < c->nidx; i++) {
        int64_t sz = eng_ss_size(c->idx[i]->ss);
        total += sz;
        q_append_number(&sizes, c->idx[i]->name, sz / scale);
    }
    q_append_number(reply, "totalIndexSize", total / scale);
    BSON_APPEND_DOCUMENT(reply, "indexSizes", &sizes);
    bson_destroy(&sizes);
    if (scale != 1)
        q_append_number(reply, "scaleFactor", scale);
}

int q_cmd_coll_stats(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err)
{
    const char *name;
    char ns[ENG_IDENT_MAX];
    int64_t scale = 1;
    bson_iter_t it;
    int rc = q_cmd_coll_name(db, cmd, false, &name, ns, err);
    if (rc)
        return rc;
    if (bson_iter_init_find(&it, cmd, "scale") &&
        (!BSON_ITER_HOLDS_NUMBER(&it) || (scale = (int64_t)bson_iter_as_double(&it)) < 1))
        return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE, "scale has to be >= 1");
    q_coll *c = q_coll_find(db, name);
    if (!c)
        return q_err(err, MD_NOTFOUND, MD_CODE_NAMESPACE_NOT_FOUND,
                     "Collection [%s] not found.", ns);
    q_coll_lock(db, c, false);
    coll_stats_reply(db, c, scale, reply);
    q_coll_unlock(db, c);
    return 0;
}

/* ---- serverStatus --------------------------------------------------------------------- */

static void append_metrics(md_db *db, bson_t *reply)
{
    bson_t metrics, sub;
    int64_t moves = db->ops->total_moves ? db->ops->total_moves(db->eng) : 0;
    bson_t open;
    BSON_APPEND_DOCUMENT_BEGIN(reply, "metrics", &metrics);
    BSON_APPEND_DOCUMENT_BEGIN(&metrics, "cursor", &sub);
    BSON_APPEND_DOCUMENT_BEGIN(&sub, "open", &open);
    BSON_APPEND_INT64(&open, "total", q_cursor_count(db));
    bson_append_document_end(&sub, &open);
    bson_append_document_end(&metrics, &sub);
    BSON_APPEND_DOCUMENT_BEGIN(&metrics, "document", &sub);
    BSON_APPEND_INT64(&sub, "deleted", Q_LOAD(db->m.deleted));
    BSON_APPEND_INT64(&sub, "inserted", Q_LOAD(db->m.inserted));
    BSON_APPEND_INT64(&sub, "returned", Q_LOAD(db->m.returned));
    BSON_APPEND_INT64(&sub, "updated", Q_LOAD(db->m.updated));
    bson_append_document_end(&metrics, &sub);
    BSON_APPEND_DOCUMENT_BEGIN(&metrics, "queryExecutor", &sub);
    BSON_APPEND_INT64(&sub, "scanned", Q_LOAD(db->m.scanned));
    BSON_APPEND_INT64(&sub, "scannedObjects", Q_LOAD(db->m.scanned_objects));
    bson_append_document_end(&metrics, &sub);
    BSON_APPEND_DOCUMENT_BEGIN(&metrics, "operation", &sub);
    BSON_APPEND_INT64(&sub, "writeConflicts", Q_LOAD(db->write_conflicts));
    bson_append_document_end(&metrics, &sub);
    BSON_APPEND_DOCUMENT_BEGIN(&metrics, "record", &sub);
    BSON_APPEND_INT64(&sub, "moves", moves);
    bson_append_document_end(&metrics, &sub);
    bson_append_document_end(reply, &metrics);
}

int q_cmd_server_status(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err)
{
    char host[256];
    bson_t sub;
    int64_t now = q_now_ms(), up = now - db->start_ms;
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
    BSON_APPEND_UTF8(reply, "host", host);
    BSON_APPEND_UTF8(reply, "version", "3.6.0-minidoc-" MD_VERSION_STRING);
    BSON_APPEND_UTF8(reply, "process", "minidoc");
    BSON_APPEND_INT64(reply, "pid", (int64_t)getpid());
    BSON_APPEND_DOUBLE(reply, "uptime", (double)(up / 1000));
    BSON_APPEND_INT64(reply, "uptimeMillis", up);
    BSON_APPEND_INT64(reply, "uptimeEstimate", up / 1000);
    BSON_APPEND_DATE_TIME(reply, "localTime", now);
    BSON_APPEND_DOCUMENT_BEGIN(reply, "storageEngine", &sub);
    BSON_APPEND_UTF8(&sub, "name", db->ops->name);
    BSON_APPEND_BOOL(&sub, "readOnly", Q_LOAD(db->failed));
    BSON_APPEND_BOOL(&sub, "supportsDocumentLocking", db->ops->concurrent);
    bson_append_document_end(reply, &sub);
    q_lock_append_status(db, reply);
    append_metrics(db, reply);
    if (db->ops->append_status)
        db->ops->append_status(db->eng, reply);
    return 0;
}

/* ---- validate --------------------------------------------------------------------------- */

typedef struct vstate {
    md_db *db;
    q_coll *c;
    eng_validate v;
    int64_t nrecords, invalid;
    int64_t *expected; /* keys per index, from the records */
} vstate;

/* Record -> index: every key of the document present as (key, rid). */
static void check_doc_keys(vstate *s, q_index *ix, eng_ss_cursor *sc, const q_keyset *ks,
                           eng_rid rid)
{
    for (size_t k = 0; k < ks->n; k++) {
        const uint8_t *key;
        uint32_t kl;
        eng_rid r;
        bool found = eng_ss_cursor_seek(sc, ks->keys[k].data, (uint32_t)ks->keys[k].len,
                                        rid) == 0 &&
                     eng_ss_cursor_get(sc, &key, &kl, &r) == 0 && r == rid &&
                     kl == ks->keys[k].len && memcmp(key, ks->keys[k].data, kl) == 0;
        if (!found)
            eng_validate_error(&s->v, "index %s is missing a key of record %lld", ix->name,
                               (long long)rid);
    }
}

static void check_record(vstate *s, eng_rid rid, const uint8_t *data, uint32_t len,
                         eng_ss_cursor **scs)
{
    bson_t doc;
    size_t off;
    s->nrecords++;
    if (!bson_init_static(&doc, data, len) || !bson_validate(&doc, BSON_VALIDATE_NONE, &off)) {
        s->invalid++;
        eng_validate_error(&s->v, "record %lld is not a valid BSON document", (long long)rid);
        return;
    }
    for (size_t i = 0; i < s->c->nidx; i++) {
        q_keyset ks;
        q_keyset_init(&ks);
        if (q_index_doc_keys(s->c->idx[i], &doc, &ks, NULL) == 0) {
            s->expected[i] += (int64_t)ks.n;
            if (scs[i])
                check_doc_keys(s, s->c->idx[i], scs[i], &ks, rid);
        }
        q_keyset_cleanup(&ks);
    }
}

static void walk_records(vstate *s, int64_t bound)
{
    eng_rs_cursor *rc = NULL;
    eng_ss_cursor **scs = calloc(s->c->nidx ? s->c->nidx : 1, sizeof *scs);
    const uint8_t *data;
    uint32_t len;
    eng_rid rid;
    for (size_t i = 0; s->v.full && i < s->c->nidx; i++)
        if (eng_ss_cursor_open(s->c->idx[i]->ss, &scs[i]) != 0)
            scs[i] = NULL;
    if (eng_rs_cursor_open(s->c->rs, true, &rc) != 0) {
        eng_validate_error(&s->v, "cannot open a cursor on %s", s->c->ns);
    } else {
        while (eng_rs_cursor_next(rc, &rid, &data, &len) == 0) {
            if (s->nrecords > bound) {
                eng_validate_error(&s->v, "record scan did not end after %lld records",
                                   (long long)bound);
                break;
            }
            check_record(s, rid, data, len, scs);
        }
    }
    eng_rs_cursor_close(rc);
    for (size_t i = 0; i < s->c->nidx; i++)
        eng_ss_cursor_close(scs[i]);
    free(scs);
}

/* Index -> record: every entry names a live record; counts agree. */
static int64_t walk_index(vstate *s, q_index *ix, int64_t bound)
{
    eng_ss_cursor *sc = NULL;
    const uint8_t *key, *data;
    uint32_t kl, len;
    eng_rid rid;
    int64_t n = 0;
    if (eng_ss_cursor_open(ix->ss, &sc) != 0)
        return -1;
    int rc = eng_ss_cursor_seek(sc, NULL, 0, ENG_RID_NONE);
    while (rc == 0 && eng_ss_cursor_get(sc, &key, &kl, &rid) == 0 && n <= bound) {
        if (eng_rs_get(s->c->rs, rid, &data, &len) != 0)
            eng_validate_error(&s->v, "index %s has an entry for missing record %lld",
                               ix->name, (long long)rid);
        n++;
        rc = eng_ss_cursor_next(sc);
    }
    eng_ss_cursor_close(sc);
    return n;
}

static void check_indexes(vstate *s, bson_t *keys_per_index)
{
    char key[ENG_IDENT_MAX + 8];
    for (size_t i = 0; i < s->c->nidx; i++) {
        q_index *ix = s->c->idx[i];
        int64_t entries = eng_ss_entries(ix->ss);
        if (s->v.full) {
            int64_t walked = walk_index(s, ix, s->expected[i] + 1000);
            if (walked != entries)
                eng_validate_error(&s->v, "index %s: %lld entries walked, %lld counted",
                                   ix->name, (long long)walked, (long long)entries);
        }
        if (entries != s->expected[i])
            eng_validate_error(&s->v, "index %s has %lld keys but the records give %lld",
                               ix->name, (long long)entries, (long long)s->expected[i]);
        snprintf(key, sizeof key, "%s", ix->ident);
        q_append_number(keys_per_index, key, entries);
    }
}

static void validate_storage(vstate *s)
{
    int rc = eng_rs_validate(s->c->rs, &s->v);
    if (rc && rc != MD_ENOTSUP)
        eng_validate_error(&s->v, "record store check failed: %s", md_strerror(rc));
    for (size_t i = 0; i < s->c->nidx; i++) {
        rc = eng_ss_validate(s->c->idx[i]->ss, &s->v);
        if (rc && rc != MD_ENOTSUP)
            eng_validate_error(&s->v, "index %s check failed: %s", s->c->idx[i]->name,
                               md_strerror(rc));
    }
}

static bool reserved_field(const char *k)
{
    static const char *const names[] = {"ns", "nInvalidDocuments", "nrecords", "nIndexes",
                                        "keysPerIndex", "valid", "errors", "warning", "ok",
                                        NULL};
    for (size_t i = 0; names[i]; i++)
        if (strcmp(k, names[i]) == 0)
            return true;
    return false;
}

static void validate_reply(vstate *s, bson_t *keys_per_index, bson_t *reply)
{
    bson_iter_t it;
    BSON_APPEND_UTF8(reply, "ns", s->c->ns);
    q_append_number(reply, "nInvalidDocuments", s->invalid);
    q_append_number(reply, "nrecords", s->nrecords);
    if (bson_iter_init(&it, &s->v.info))
        while (bson_iter_next(&it))
            if (!reserved_field(bson_iter_key(&it)))
                bson_append_iter(reply, NULL, 0, &it);
    q_append_number(reply, "nIndexes", (int64_t)s->c->nidx);
    BSON_APPEND_DOCUMENT(reply, "keysPerIndex", keys_per_index);
    BSON_APPEND_BOOL(reply, "valid", s->v.nerrors == 0);
    if (!s->v.full)
        BSON_APPEND_UTF8(reply, "warning",
                         "Some checks omitted for speed. use {full:true} option to do more "
                         "thorough scan.");
    BSON_APPEND_ARRAY(reply, "errors", &s->v.errors);
}

int q_cmd_validate(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err)
{
    const char *name;
    char ns[ENG_IDENT_MAX];
    bson_iter_t it;
    vstate s = {.db = db};
    bson_t kpi = BSON_INITIALIZER;
    eng_rs_stats st;
    int rc = q_cmd_coll_name(db, cmd, false, &name, ns, err);
    if (rc)
        return rc;
    if (!(s.c = q_coll_find(db, name)))
        return q_err(err, MD_NOTFOUND, MD_CODE_NAMESPACE_NOT_FOUND, "ns not found");
    eng_validate_init(&s.v, bson_iter_init_find(&it, cmd, "full") && bson_iter_as_bool(&it));
    s.expected = calloc(s.c->nidx + 1, sizeof *s.expected);
    q_coll_lock(db, s.c, false);
    validate_storage(&s);
    if (s.v.nerrors == 0) {
        q_coll_stats(s.c, &st);
        walk_records(&s, st.count * 2 + 1000);
        check_indexes(&s, &kpi);
    } else {
        eng_validate_error(&s.v, "records and indexes not checked: the storage is damaged");
    }
    q_coll_unlock(db, s.c);
    validate_reply(&s, &kpi, reply);
    bson_destroy(&kpi);
    free(s.expected);
    eng_validate_cleanup(&s.v);
    return 0;
}

/* ---- compact / fsync ------------------------------------------------------------------ */

static int compact_parse(const bson_t *cmd, eng_compact_opts *o, md_error *err)
{
    bson_iter_t it;
    bool preserve = false, manual = false;
    o->padding = ENG_PAD_NONE;
    o->padding_factor = 1.0;
    o->padding_bytes = 0;
    if (bson_iter_init_find(&it, cmd, "preservePadding"))
        preserve = bson_iter_as_bool(&it);
    if (bson_iter_init_find(&it, cmd, "paddingFactor")) {
        o->padding_factor = BSON_ITER_HOLDS_NUMBER(&it) ? bson_iter_as_double(&it) : 0;
        if (o->padding_factor < 1.0 || o->padding_factor > 4.0)
            return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE, "invalid padding factor");
        manual = true;
    }
    if (bson_iter_init_find(&it, cmd, "paddingBytes")) {
        int64_t b = -1;
        if (!q_iter_int64(&it, &b) || b < 0 || b > 1024 * 1024)
            return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE, "invalid padding bytes");
        o->padding_bytes = (int32_t)b;
        manual = true;
    }
    if (preserve && manual)
        return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                     "cannot mix preservePadding and paddingFactor|paddingBytes");
    o->padding = preserve ? ENG_PAD_PRESERVE : manual ? ENG_PAD_MANUAL : ENG_PAD_NONE;
    return 0;
}

/* Rewrite the records, then rebuild every index from them (one txn). */
static int compact_run(md_db *db, q_coll *c, const eng_compact_opts *o, bson_t *info,
                       md_error *err)
{
    eng_txn *t = NULL;
    int rc = eng_txn_begin(db->eng, &t);
    if (rc)
        return q_err_engine(err, rc, "starting a transaction");
    rc = eng_rs_compact(c->rs, t, o, info, err);
    if (rc == MD_ENOTSUP) {
        eng_txn_abort(t);
        return q_err(err, MD_ENOTSUP, MD_CODE_COMMAND_NOT_SUPPORTED,
                     "compact is not supported by the %s storage engine", db->ops->name);
    }
    for (size_t i = 0; !rc && i < c->nidx; i++)
        rc = eng_ss_truncate(c->idx[i]->ss, t);
    for (size_t i = 0; !rc && i < c->nidx; i++)
        rc = q_index_build(db, t, c, c->idx[i], err);
    if (rc) {
        eng_txn_abort(t);
        q_err_engine(err, rc, "compacting");
        return q_write_failed(db, rc, err);
    }
    rc = eng_txn_commit(t, false, err);
    return rc ? q_write_failed(db, q_err_engine(err, rc, "committing"), err) : 0;
}

int q_cmd_compact(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err)
{
    const char *name;
    char ns[ENG_IDENT_MAX];
    eng_compact_opts o;
    bson_t info = BSON_INITIALIZER;
    bson_iter_t it;
    int rc = q_cmd_coll_name(db, cmd, false, &name, ns, err);
    if (!rc)
        rc = compact_parse(cmd, &o, err);
    if (rc)
        return rc;
    q_coll *c = q_coll_find(db, name);
    if (!c)
        return q_err(err, MD_NOTFOUND, MD_CODE_NAMESPACE_NOT_FOUND, "collection does not exist");
    /* 3.x answers with errmsg only; the code here is minidoc's choice */
    if (c->capped)
        return q_err(err, MD_ENOTSUP, MD_CODE_COMMAND_NOT_SUPPORTED,
                     "cannot compact a capped collection");
    if ((rc = q_write_allowed(db, err)) != 0)
        return rc;
    q_cursor_kill_coll(db, c);
    q_coll_lock(db, c, true);
    rc = compact_run(db, c, &o, &info, err);
    q_coll_unlock(db, c);
    if (!rc && bson_iter_init(&it, &info))
        while (bson_iter_next(&it))
            if (strcmp(bson_iter_key(&it), "ok") != 0)
                bson_append_iter(reply, NULL, 0, &it);
    bson_destroy(&info);
    return rc;
}

int q_cmd_fsync(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, cmd, "lock") && bson_iter_as_bool(&it))
        return q_err(err, MD_ENOTSUP, MD_CODE_COMMAND_NOT_SUPPORTED,
                     "fsync with lock is not supported");
    int rc = eng_flush(db->eng, true, err);
    if (rc == MD_ENOTSUP)
        rc = 0;
    return rc ? q_err_engine(err, rc, "fsync") : 0;
}
