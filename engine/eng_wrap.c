/*
 * eng_wrap.c -- the engine contract's entry points.
 *
 * Each wrapper forwards to the engine's operations table.  Keeping the calls
 * behind functions (rather than letting query/ reach into ops tables) gives
 * one place to check arguments with asserts and to answer MD_ENOTSUP for
 * optional operations an engine leaves NULL.
 */
#include <assert.h>
#include <string.h>
#include <time.h>

#include "eng.h"

#define OPS(obj) ((obj)->engine->ops)
#define OPTIONAL(fn) \
    do { \
        if (!(fn)) \
            return MD_ENOTSUP; \
    } while (0)

/* ---- engine time accounting (md_engine_timing) ------------------------------
 * When on, the data-path wrappers below add the time spent inside the
 * engine to a per-thread total.  Calls made from inside an engine call (a
 * capped collection's delete hook reaching the indexes) are counted once,
 * by the outermost call. */
static bool timing_on;
static __thread int tm_depth;
static __thread int64_t tm_spent;

static int64_t tm_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* -1: not timing; 0: nested; else the start. */
static inline int64_t tm_in(void)
{
    if (!__atomic_load_n(&timing_on, __ATOMIC_RELAXED))
        return -1;
    return tm_depth++ ? 0 : tm_now();
}

static inline void tm_out(int64_t t0)
{
    if (t0 < 0)
        return;
    if (--tm_depth == 0)
        tm_spent += tm_now() - t0;
}

void md_engine_timing(bool on)
{
    tm_spent = 0;
    tm_depth = 0;
    __atomic_store_n(&timing_on, on, __ATOMIC_RELAXED);
}

int64_t md_engine_time_ns(void)
{
    return tm_spent;
}

int eng_open(const eng_ops *ops, const char *dir, const char *db_name, const bson_t *opts,
             eng_engine **out, md_error *err)
{
    assert(ops && dir && db_name && out);
    *out = NULL;
    return ops->open(dir, db_name, opts, out, err);
}

void eng_close(eng_engine *e)
{
    if (e)
        e->ops->close(e);
}

int eng_flush(eng_engine *e, bool sync, md_error *err)
{
    OPTIONAL(e->ops->flush);
    return e->ops->flush(e, sync, err);
}

int eng_txn_begin(eng_engine *e, eng_txn **out)
{
    *out = NULL;
    int64_t t0_ = tm_in();
    int rc_ = e->ops->txn_begin(e, out);
    tm_out(t0_);
    return rc_;
}

int eng_txn_commit(eng_txn *t, bool durable, md_error *err)
{
    int64_t t0_ = tm_in();
    int rc_ = t->engine->ops->txn_commit(t, durable, err);
    tm_out(t0_);
    return rc_;
}

void eng_txn_abort(eng_txn *t)
{
    if (t) {
        int64_t t0_ = tm_in();
        t->engine->ops->txn_abort(t);
        tm_out(t0_);
    }
}

int eng_meta_put(eng_engine *e, eng_txn *t, const char *key, const bson_t *value,
                 md_error *err)
{
    assert(key && strlen(key) < ENG_IDENT_MAX);
    return e->ops->meta_put(e, t, key, value, err);
}

int eng_meta_get(eng_engine *e, const char *key, bson_t *out)
{
    return e->ops->meta_get(e, key, out);
}

int eng_meta_del(eng_engine *e, eng_txn *t, const char *key)
{
    return e->ops->meta_del(e, t, key);
}

int eng_meta_list(eng_engine *e, eng_meta_fn fn, void *ctx)
{
    return e->ops->meta_list(e, fn, ctx);
}

const char *eng_meta_where(eng_engine *e, const char *key, char *buf, size_t n)
{
    if (n)
        buf[0] = '\0';
    if (n && e->ops->meta_where)
        e->ops->meta_where(e, key, buf, n);
    return buf;
}

int eng_rs_create(eng_engine *e, eng_txn *t, const char *ident, const eng_rs_options *o,
                  md_error *err)
{
    assert(ident && strlen(ident) < ENG_IDENT_MAX);
    return e->ops->rs_create(e, t, ident, o, err);
}

int eng_rs_open(eng_engine *e, const char *ident, eng_rs **out, md_error *err)
{
    *out = NULL;
    return e->ops->rs_open(e, ident, out, err);
}

void eng_rs_close(eng_rs *rs)
{
    if (rs)
        OPS(rs)->rs_close(rs);
}

int eng_rs_drop(eng_engine *e, eng_txn *t, const char *ident)
{
    return e->ops->rs_drop(e, t, ident);
}

int eng_rs_insert(eng_rs *rs, eng_txn *t, const uint8_t *data, uint32_t len, eng_rid *out,
                  md_error *err)
{
    assert(t && data && out);
    int64_t t0_ = tm_in();
    int rc_ = OPS(rs)->rs_insert(rs, t, data, len, out, err);
    tm_out(t0_);
    return rc_;
}

int eng_rs_get(eng_rs *rs, eng_rid rid, const uint8_t **data, uint32_t *len)
{
    int64_t t0_ = tm_in();
    int rc_ = OPS(rs)->rs_get(rs, rid, data, len);
    tm_out(t0_);
    return rc_;
}

int eng_rs_update(eng_rs *rs, eng_txn *t, eng_rid rid, const uint8_t *data, uint32_t len,
                  eng_rid *new_rid, bool *moved, md_error *err)
{
    assert(t && data && new_rid && moved);
    int64_t t0_ = tm_in();
    int rc_ = OPS(rs)->rs_update(rs, t, rid, data, len, new_rid, moved, err);
    tm_out(t0_);
    return rc_;
}

bool eng_rs_has_damages(eng_rs *rs)
{
    return OPS(rs)->has_damages && OPS(rs)->rs_update_damages;
}

int eng_rs_update_damages(eng_rs *rs, eng_txn *t, eng_rid rid, const uint8_t *src,
                          const eng_damage *d, size_t nd, md_error *err)
{
    if (!eng_rs_has_damages(rs))
        return MD_ENOTSUP;
    int64_t t0_ = tm_in();
    int rc_ = OPS(rs)->rs_update_damages(rs, t, rid, src, d, nd, err);
    tm_out(t0_);
    return rc_;
}

int eng_rs_remove(eng_rs *rs, eng_txn *t, eng_rid rid)
{
    int64_t t0_ = tm_in();
    int rc_ = OPS(rs)->rs_remove(rs, t, rid);
    tm_out(t0_);
    return rc_;
}

int eng_rs_truncate(eng_rs *rs, eng_txn *t)
{
    return OPS(rs)->rs_truncate(rs, t);
}

int eng_rs_set_alloc(eng_rs *rs, eng_txn *t, int alloc)
{
    OPTIONAL(OPS(rs)->rs_set_alloc);
    return OPS(rs)->rs_set_alloc(rs, t, alloc);
}

void eng_rs_get_stats(eng_rs *rs, eng_rs_stats *s)
{
    memset(s, 0, sizeof *s);
    OPS(rs)->rs_stats(rs, s);
}

void eng_rs_append_stats(eng_rs *rs, bson_t *sub)
{
    if (OPS(rs)->rs_append_stats)
        OPS(rs)->rs_append_stats(rs, sub);
}

int eng_rs_validate(eng_rs *rs, eng_validate *v)
{
    OPTIONAL(OPS(rs)->rs_validate);
    return OPS(rs)->rs_validate(rs, v);
}

int eng_rs_compact(eng_rs *rs, eng_txn *t, const eng_compact_opts *o, bson_t *info,
                   md_error *err)
{
    OPTIONAL(OPS(rs)->rs_compact);
    return OPS(rs)->rs_compact(rs, t, o, info, err);
}

void eng_rs_set_capped_hook(eng_rs *rs, eng_capped_delete_fn fn, void *ctx)
{
    rs->capped_hook = fn;
    rs->capped_ctx = ctx;
}

int eng_rs_capped_deleting(eng_rs *rs, eng_txn *t, eng_rid rid, const uint8_t *data,
                           uint32_t len, md_error *err)
{
    int rc = rs->capped_hook ? rs->capped_hook(rs->capped_ctx, t, rid, data, len) : 0;
    if (rc)
        md_error_set(err, rc, eng_rc_to_code(rc), "capped delete of RecordId %lld refused: %s",
                     (long long)rid, md_strerror(rc));
    return rc;
}

int eng_capped_cannot_grow(md_error *err)
{
    return md_error_set(err, MD_ENOTSUP, 10003, "objects in a capped ns cannot grow");
}

int eng_capped_check_len(int64_t size, uint32_t len, md_error *err)
{
    if ((int64_t)len <= size)
        return 0;
    return md_error_set(err, MD_ETOOBIG, MD_CODE_BAD_VALUE,
                        "object to insert exceeds cappedMaxSize (%u > %lld)", len,
                        (long long)size);
}

bool eng_capped_full(int64_t size, int64_t max, int64_t count, int64_t bytes, uint32_t len)
{
    return count > 0 && (bytes + (int64_t)len > size || (max > 0 && count >= max));
}

int eng_rs_cursor_open(eng_rs *rs, bool forward, eng_rs_cursor **out)
{
    *out = NULL;
    int64_t t0_ = tm_in();
    int rc_ = OPS(rs)->rs_cursor_open(rs, forward, out);
    tm_out(t0_);
    return rc_;
}

int eng_rs_cursor_next(eng_rs_cursor *c, eng_rid *rid, const uint8_t **data, uint32_t *len)
{
    int64_t t0_ = tm_in();
    int rc_ = OPS(c->rs)->rs_cursor_next(c, rid, data, len);
    tm_out(t0_);
    return rc_;
}

void eng_rs_cursor_save(eng_rs_cursor *c)
{
    OPS(c->rs)->rs_cursor_save(c);
}

int eng_rs_cursor_restore(eng_rs_cursor *c)
{
    int64_t t0_ = tm_in();
    int rc_ = OPS(c->rs)->rs_cursor_restore(c);
    tm_out(t0_);
    return rc_;
}

void eng_rs_cursor_close(eng_rs_cursor *c)
{
    if (c) {
        int64_t t0_ = tm_in();
        OPS(c->rs)->rs_cursor_close(c);
        tm_out(t0_);
    }
}

int eng_ss_create(eng_engine *e, eng_txn *t, const char *ident, md_error *err)
{
    assert(ident && strlen(ident) < ENG_IDENT_MAX);
    return e->ops->ss_create(e, t, ident, err);
}

int eng_ss_open(eng_engine *e, const char *ident, eng_ss **out, md_error *err)
{
    *out = NULL;
    return e->ops->ss_open(e, ident, out, err);
}

void eng_ss_close(eng_ss *ss)
{
    if (ss)
        OPS(ss)->ss_close(ss);
}

int eng_ss_drop(eng_engine *e, eng_txn *t, const char *ident)
{
    return e->ops->ss_drop(e, t, ident);
}

int eng_ss_insert(eng_ss *ss, eng_txn *t, const uint8_t *key, uint32_t klen, eng_rid rid,
                  bool unique, eng_rid *dup_rid, md_error *err)
{
    assert(t && rid != ENG_RID_NONE);
    int64_t t0_ = tm_in();
    int rc_ = OPS(ss)->ss_insert(ss, t, key, klen, rid, unique, dup_rid, err);
    tm_out(t0_);
    return rc_;
}

int eng_ss_remove(eng_ss *ss, eng_txn *t, const uint8_t *key, uint32_t klen, eng_rid rid)
{
    int64_t t0_ = tm_in();
    int rc_ = OPS(ss)->ss_remove(ss, t, key, klen, rid);
    tm_out(t0_);
    return rc_;
}

int eng_ss_truncate(eng_ss *ss, eng_txn *t)
{
    return OPS(ss)->ss_truncate(ss, t);
}

int64_t eng_ss_size(eng_ss *ss)
{
    return OPS(ss)->ss_size(ss);
}

int64_t eng_ss_entries(eng_ss *ss)
{
    return OPS(ss)->ss_entries(ss);
}

int eng_ss_validate(eng_ss *ss, eng_validate *v)
{
    OPTIONAL(OPS(ss)->ss_validate);
    return OPS(ss)->ss_validate(ss, v);
}

int eng_ss_cursor_open(eng_ss *ss, eng_ss_cursor **out)
{
    *out = NULL;
    int64_t t0_ = tm_in();
    int rc_ = OPS(ss)->ss_cursor_open(ss, out);
    tm_out(t0_);
    return rc_;
}

int eng_ss_find(eng_ss *ss, const uint8_t *key, uint32_t klen, eng_rid *rid)
{
    eng_ss_cursor *c;
    const uint8_t *k;
    uint32_t kl;
    assert(ss && key && rid);
    int64_t t0_ = tm_in();
    if (OPS(ss)->ss_find) {
        int rc_ = OPS(ss)->ss_find(ss, key, klen, rid);
        tm_out(t0_);
        return rc_;
    }
    int rc = OPS(ss)->ss_cursor_open(ss, &c);
    if (rc)
        return rc;
    rc = OPS(ss)->ss_cursor_seek(c, key, klen, ENG_RID_NONE);
    if (rc == 0)
        rc = OPS(ss)->ss_cursor_get(c, &k, &kl, rid);
    if (rc == 0 && (kl != klen || memcmp(k, key, klen) != 0))
        rc = MD_NOTFOUND;
    OPS(ss)->ss_cursor_close(c);
    tm_out(t0_);
    return rc;
}

int eng_ss_cursor_seek(eng_ss_cursor *c, const uint8_t *key, uint32_t klen, eng_rid rid)
{
    int64_t t0_ = tm_in();
    int rc_ = OPS(c->ss)->ss_cursor_seek(c, key, klen, rid);
    tm_out(t0_);
    return rc_;
}

int eng_ss_cursor_next(eng_ss_cursor *c)
{
    int64_t t0_ = tm_in();
    int rc_ = OPS(c->ss)->ss_cursor_next(c);
    tm_out(t0_);
    return rc_;
}

int eng_ss_cursor_prev(eng_ss_cursor *c)
{
    int64_t t0_ = tm_in();
    int rc_ = OPS(c->ss)->ss_cursor_prev(c);
    tm_out(t0_);
    return rc_;
}

int eng_ss_cursor_get(eng_ss_cursor *c, const uint8_t **key, uint32_t *klen, eng_rid *rid)
{
    int64_t t0_ = tm_in();
    int rc_ = OPS(c->ss)->ss_cursor_get(c, key, klen, rid);
    tm_out(t0_);
    return rc_;
}

void eng_ss_cursor_save(eng_ss_cursor *c)
{
    OPS(c->ss)->ss_cursor_save(c);
}

int eng_ss_cursor_restore(eng_ss_cursor *c)
{
    int64_t t0_ = tm_in();
    int rc_ = OPS(c->ss)->ss_cursor_restore(c);
    tm_out(t0_);
    return rc_;
}

void eng_ss_cursor_close(eng_ss_cursor *c)
{
    if (c) {
        int64_t t0_ = tm_in();
        OPS(c->ss)->ss_cursor_close(c);
        tm_out(t0_);
    }
}
