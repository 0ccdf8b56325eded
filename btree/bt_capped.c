/*
 * bt_capped.c -- capped record stores, as WiredTiger's capped record store
 * in MongoDB 3.x: RecordIds come from the store's increasing counter, so
 * RecordId order is insertion order, and an insert first removes the
 * oldest records (the smallest RecordIds) while the store's document bytes
 * plus the new record's would exceed capped_size, or its count would reach
 * capped_max.  Each removal is announced to the capped-delete hook, and is
 * an ordinary versioned remove in the caller's transaction, so an abort
 * brings the records back and a crash replays the removals from the log
 * with the insert.
 *
 * The options live in the metadata tree under "rsopt:<ident>" as
 * {capped: true, size, max}, written in the creating transaction (logged
 * and checkpointed like a catalog entry) and read when a handle is opened.
 *
 * What the insert sees as the store's size is the committed count and
 * data_size plus what its own transaction changed (bt_tree.cap_*): the
 * caller lets one transaction at a time write to a capped store (eng.h),
 * so no other uncommitted change exists.
 *
 * Tailing needs nothing: a cursor steps to the record after the RecordId it
 * returned last.  A saved cursor whose record is gone at restore has lost
 * its place (RecordIds are never reused, so it cannot be mistaken for a
 * newer one).
 */
#include <stdlib.h>
#include <string.h>

#include "bt_int.h"

#define KEY_PREFIX "rsopt:"

static int opt_key(char *buf, size_t cap, const char *ident)
{
    return bt_meta_key(buf, cap, KEY_PREFIX, ident);
}

bool bt_capped_is(const bt_tree *t)
{
    return __atomic_load_n(&t->capped, __ATOMIC_ACQUIRE);
}

int bt_capped_create(bt_engine *e, eng_txn *t, const char *ident, const eng_rs_options *o,
                     md_error *err)
{
    char k[ENG_IDENT_MAX + 16];
    int n = opt_key(k, sizeof k, ident);
    if (o->capped_size <= 0)
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                            "a capped collection needs a size > 0, got %lld",
                            (long long)o->capped_size);
    if (n < 0)
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE, "ident too long: %s", ident);
    int rc = bt_obj_create(e, t, ident, BT_RS, o->block_compressor, err);
    if (rc)
        return rc;
    bson_t doc = BSON_INITIALIZER;
    BSON_APPEND_BOOL(&doc, "capped", true);
    BSON_APPEND_INT64(&doc, "size", o->capped_size);
    BSON_APPEND_INT64(&doc, "max", o->capped_max > 0 ? o->capped_max : 0);
    rc = bt_write(e, (bt_txn *)t, e->meta, (const uint8_t *)k, (uint32_t)n, 0,
                  bson_get_data(&doc), doc.len, BT_W_PUT, NULL, err);
    bson_destroy(&doc);
    if (rc)
        return rc;
    bt_latch_excl(e);
    bt_tree *tr = bt_find_tree(e, ident);
    if (tr) {
        tr->capped_size = o->capped_size;
        tr->capped_max = o->capped_max > 0 ? o->capped_max : 0;
        __atomic_store_n(&tr->capped, true, __ATOMIC_RELEASE);
    }
    bt_unlatch(e);
    return 0;
}

int bt_capped_load(bt_engine *e, bt_tree *t, md_error *err)
{
    char k[ENG_IDENT_MAX + 16];
    bt_buf val = {0};
    bson_t doc;
    bson_iter_t it;
    md_error lerr;
    int n = opt_key(k, sizeof k, t->ident);
    if (n < 0)
        return 0;
    bt_latch_shared(e);
    int rc = bt_lookup(e, bt_txn_mine(e), e->meta, (const uint8_t *)k, (uint32_t)n, 0, &val, NULL,
                       &lerr);
    bt_unlatch(e);
    if (rc == MD_NOTFOUND) {
        bt_buf_free(&val);
        return 0; /* not capped */
    }
    if (rc == 0 && (!val.p || !bson_init_static(&doc, val.p, val.n)))
        rc = ENG_CORRUPT(err, "btree: bad options entry for %s", t->ident);
    else if (rc)
        md_error_set(err, rc, eng_rc_to_code(rc), "btree: options of %s: %s", t->ident,
                     lerr.message);
    if (rc == 0) {
        int64_t size = bson_iter_init_find(&it, &doc, "size") ? bson_iter_as_int64(&it) : 0;
        int64_t max = bson_iter_init_find(&it, &doc, "max") ? bson_iter_as_int64(&it) : 0;
        bool capped = bson_iter_init_find(&it, &doc, "capped") && bson_iter_as_bool(&it);
        if (capped && size <= 0)
            rc = ENG_CORRUPT(err, "btree: capped %s with size %lld", t->ident,
                             (long long)size);
        bt_latch_excl(e);
        if (rc == 0 && capped && !t->capped) {
            t->capped_size = size;
            t->capped_max = max > 0 ? max : 0;
            __atomic_store_n(&t->capped, true, __ATOMIC_RELEASE);
        }
        bt_unlatch(e);
    }
    bt_buf_free(&val);
    return rc;
}

int bt_capped_drop(bt_engine *e, eng_txn *t, const char *ident)
{
    char k[ENG_IDENT_MAX + 16];
    md_error err;
    int n = opt_key(k, sizeof k, ident);
    if (n < 0)
        return 0;
    int rc = bt_write(e, (bt_txn *)t, e->meta, (const uint8_t *)k, (uint32_t)n, 0, NULL, 0,
                      BT_W_REMOVE, NULL, &err);
    return rc == MD_NOTFOUND ? 0 : rc; /* not capped */
}

/* Add to the transaction's changes of t's count and size. */
static void delta(bt_tree *t, bt_txn *x, int64_t dcount, int64_t dbytes)
{
    if (t->cap_txn != x->id) {
        t->cap_txn = x->id;
        t->cap_dcount = t->cap_dbytes = 0;
    }
    t->cap_dcount += dcount;
    t->cap_dbytes += dbytes;
}

int bt_capped_insert(eng_rs *rs, eng_txn *tx, const uint8_t *data, uint32_t len, eng_rid *out,
                     md_error *err)
{
    bt_engine *e = BT_ENG(rs);
    bt_tree *t = BT_TREE(rs);
    bt_txn *x = (bt_txn *)tx;
    bt_cur c = {0};
    eng_rid after = ENG_RID_NONE;
    int rc = bt_txn_check(e, tx, err);
    if (rc)
        return rc;
    bt_latch_shared(e);
    int64_t size = t->capped_size, max = t->capped_max;
    delta(t, x, 0, 0);
    /* commits count under the shared latch: atomic loads (a capped
     * store's own commits are serialized by the caller) */
    int64_t count = __atomic_load_n(&t->count, __ATOMIC_RELAXED) + t->cap_dcount,
            bytes = __atomic_load_n(&t->data_size, __ATOMIC_RELAXED) + t->cap_dbytes;
    bt_unlatch(e);
    if ((rc = eng_capped_check_len(size, len, err)) != 0)
        return rc;
    while (eng_capped_full(size, max, count, bytes, len)) {
        bt_latch_shared(e);
        rc = bt_cur_find(e, x, t, &c, NULL, 0, after, true, false, after == ENG_RID_NONE, err);
        bt_unlatch(e);
        if (rc == MD_NOTFOUND) {
            rc = 0; /* nothing older left to remove */
            break;
        }
        if (rc)
            goto out;
        rc = eng_rs_capped_deleting(rs, tx, c.rid, c.val.p ? c.val.p : (const uint8_t *)"",
                                    (uint32_t)c.val.n, err);
        if (rc)
            goto out;
        rc = bt_write(e, x, t, NULL, 0, c.rid, NULL, 0, BT_W_REMOVE, NULL, err);
        if (rc)
            goto out;
        count--;
        bytes -= (int64_t)c.val.n;
        delta(t, x, -1, -(int64_t)c.val.n);
        after = c.rid;
    }
    rc = bt_write(e, x, t, NULL, 0, 0, data, len, BT_W_INSERT, out, err);
    if (rc == 0)
        delta(t, x, 1, len);
out:
    bt_cur_cleanup(&c);
    return rc;
}

int bt_capped_changing(eng_rs *rs, eng_txn *tx, eng_rid rid, int64_t new_len, md_error *err)
{
    bt_engine *e = BT_ENG(rs);
    bt_tree *t = BT_TREE(rs);
    bt_buf val = {0};
    md_error lerr;
    bt_latch_shared(e);
    int rc = bt_lookup(e, (bt_txn *)tx, t, NULL, 0, rid, &val, NULL, &lerr);
    bt_unlatch(e);
    int64_t old = (int64_t)val.n;
    bt_buf_free(&val);
    if (rc == MD_NOTFOUND)
        return 0; /* the write itself reports it */
    if (rc)
        return md_error_set(err, rc, eng_rc_to_code(rc), "%s", lerr.message);
    if (new_len > old)
        return eng_capped_cannot_grow(err);
    delta(t, (bt_txn *)tx, new_len < 0 ? -1 : 0, new_len < 0 ? -old : new_len - old);
    return 0;
}

void bt_capped_truncated(bt_tree *t, eng_txn *tx)
{
    bt_engine *e = t->eng;
    bt_latch_shared(e);
    delta(t, (bt_txn *)tx, 0, 0);
    t->cap_dcount = -__atomic_load_n(&t->count, __ATOMIC_RELAXED);
    t->cap_dbytes = -__atomic_load_n(&t->data_size, __ATOMIC_RELAXED);
    bt_unlatch(e);
}

void bt_capped_validate(bt_tree *t, eng_validate *v)
{
    bt_engine *e = t->eng;
    bt_latch_shared(e);
    bool capped = t->capped;
    int64_t count = __atomic_load_n(&t->count, __ATOMIC_RELAXED),
            bytes = __atomic_load_n(&t->data_size, __ATOMIC_RELAXED), size = t->capped_size,
            max = t->capped_max;
    bt_unlatch(e);
    if (!capped)
        return;
    BSON_APPEND_BOOL(&v->info, "capped", true);
    BSON_APPEND_INT64(&v->info, "max", max);
    if (bytes > size)
        eng_validate_error(v, "%s: capped store holds %lld bytes, more than its size %lld",
                           t->ident, (long long)bytes, (long long)size);
    if (max > 0 && count > max)
        eng_validate_error(v, "%s: capped store holds %lld records, more than its max %lld",
                           t->ident, (long long)count, (long long)max);
}
