/*
 * q_update_fast.c -- two shortcuts of the update path, each deciding from
 * the parsed update alone and falling back to the general rebuild
 * (q_update_apply_pos) whenever it cannot answer exactly:
 *
 *   q_update_inplace   an update that keeps every field it touches the same
 *                      size ($inc of an int32 that stays int32, $set of a
 *                      same-length string...) is applied where the fields
 *                      lie, as MongoDB's mutable BSON did: each leaf writes
 *                      its new element into a small source buffer, and the
 *                      bytes that differ become the damage list.  The new
 *                      document is never built.
 *   q_update_affects   can the update change the keys of an index on a path
 *                      (UpdateIndexData::mightBeIndexed)?  An index it
 *                      cannot affect is not touched by the write.
 *   q_update_acquire   the thread's last parsed update, reused for an
 *                      identical update document.
 *
 * Each leaf computes its new element with the same function the general
 * path uses (q_uleaf_existing; a $inc or $mul that keeps an int32, int64
 * or double's type writes only the value bytes, from the same q_num_arith:
 * ip_arith), so the two cannot disagree on a value; any
 * error, a missing field, an array on the way, a size change, or an
 * operator that is not size-preserving by nature sends the update to the
 * general path, which then reports exactly what it always did.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "q_uint.h"

/* ---- in place ------------------------------------------------------------------- */

typedef struct ip_state {
    q_uctx c;
    const bson_t *doc;
    bool id_known;       /* c.has_id and c.id are set */
    const uint8_t *base; /* the document's first byte */
    q_buf *src;
    q_damages *dmg;
} ip_state;

static bool ip_op(q_uop op)
{
    switch (op) {
    case QU_SET: case QU_INC: case QU_MUL: case QU_MIN: case QU_MAX: case QU_BIT:
    case QU_CURRENT_DATE:
        return true;
    default:
        return false;
    }
}

static void dmg_push(q_damages *d, uint32_t src, uint32_t dst, uint32_t len)
{
    eng_damage *last = d->n ? &d->v[d->n - 1] : NULL;
    if (last && last->src_ofs + last->len == src && last->dst_ofs + last->len == dst) {
        last->len += len;
        return;
    }
    q_damages_reserve1(d);
    d->v[d->n++] = (eng_damage){src, dst, len};
}

/* Record the bytes where the new element (src[s..s+len)) differs from the
 * old one at document offset dst. */
static void dmg_diff(ip_state *st, size_t s, uint32_t dst, uint32_t len)
{
    const uint8_t *a = st->base + dst, *b = st->src->data + s;
    for (uint32_t i = 0; i < len; i++)
        if (a[i] != b[i])
            dmg_push(st->dmg, (uint32_t)s + i, dst + i, 1);
}

/* An int32, int64 or double as a q_num (q_num_get); false for any other
 * type. */
static bool ip_num(const bson_iter_t *e, q_num *x)
{
    bson_type_t t = bson_iter_type(e);
    if (t != BSON_TYPE_INT32 && t != BSON_TYPE_INT64 && t != BSON_TYPE_DOUBLE)
        return false;
    q_num_get(e, x);
    return true;
}

/*
 * $inc / $mul of an int32, int64 or double by one of these, when the
 * result keeps the element's type: only the value bytes are written (into
 * src) and compared.  The arithmetic is the general leaf's own
 * (q_num_arith, with its operand order), so the two cannot disagree; a
 * type change, an overflow, a decimal or the _id path returns false, and
 * the general leaf (q_uleaf_existing) decides as it always did.
 */
static bool ip_arith(ip_state *st, const q_unode *k, const bson_iter_t *e)
{
    q_num a, x, r;
    if ((k->op != QU_INC && k->op != QU_MUL) || !ip_num(&k->arg, &a) || !ip_num(e, &x) ||
        (strncmp(k->full, "_id", 3) == 0 && (k->full[3] == '\0' || k->full[3] == '.')) ||
        !q_num_arith(k->op == QU_MUL, &a, &x, &r) || r.t != x.t)
        return false;
    if (q_num_identical(&r, &x))
        return true;
    size_t at = st->src->len;
    uint32_t n = x.t == BSON_TYPE_INT32 ? 4 : 8;
    uint64_t bits;
    if (x.t == BSON_TYPE_INT32)
        bits = (uint32_t)r.i32;
    else if (x.t == BSON_TYPE_INT64)
        bits = (uint64_t)r.i64;
    else
        memcpy(&bits, &r.d, sizeof bits);
    q_bw_le(st->src, bits, (int)n);
    dmg_diff(st, at, (uint32_t)(e->raw + e->d1 - st->base), n);
    return true;
}

/* Apply the children of n to the object whose elements `it` walks; false:
 * not in place. */
static bool ip_obj(ip_state *st, const q_unode *n, const bson_iter_t *obj)
{
    if (n->positional || n->naf)
        return false;
    for (size_t i = 0; i < n->nkid; i++) {
        const q_unode *k = n->kid[i];
        bson_iter_t e = *obj, sub;
        if (!bson_iter_find_w_len(&e, k->name, -1))
            return false;
        if (!k->leaf) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&e) || !bson_iter_recurse(&e, &sub) ||
                !ip_obj(st, k, &sub))
                return false;
            continue;
        }
        if (!ip_op(k->op))
            return false;
        if (ip_arith(st, k, &e))
            continue;
        /* the old _id is needed only by a leaf on the _id path (check_id);
         * error messages do not matter here (an error falls back) */
        if (!st->id_known && strncmp(k->full, "_id", 3) == 0) {
            st->c.has_id = bson_iter_init_find(&st->c.id, st->doc, "_id");
            st->id_known = true;
        }
        size_t at = st->src->len;
        md_error local;
        md_error_clear(&local);
        st->c.err = &local;
        if (q_uleaf_existing(&st->c, k, &e, bson_iter_key(&e), st->src, false) != 0)
            return false;
        uint32_t oldlen = e.next_off - e.off;
        if (st->src->len - at != oldlen)
            return false;
        dmg_diff(st, at, (uint32_t)(e.raw + e.off - st->base), oldlen);
    }
    return true;
}

static int dmg_cmp(const void *a, const void *b)
{
    const eng_damage *x = a, *y = b;
    return x->dst_ofs < y->dst_ofs ? -1 : x->dst_ofs > y->dst_ofs;
}

int q_update_inplace(const q_update *u, const bson_t *doc, q_buf *src, q_damages *dmg,
                     bool *changed)
{
    bson_iter_t it;
    assert(u && doc && src && dmg && changed);
    *changed = false;
    dmg->n = 0;
    src->len = 0;
    if (u->replacement || u->nrename || !bson_iter_init(&it, doc))
        return Q_UPDATE_NOT_INPLACE;
    ip_state st = {.doc = doc, .base = bson_get_data(doc), .src = src, .dmg = dmg};
    st.c.u = u;
    if (!ip_obj(&st, u->root, &it)) {
        dmg->n = 0;
        return Q_UPDATE_NOT_INPLACE;
    }
    q_sort(dmg->v, dmg->n, sizeof *dmg->v, dmg_cmp);
    *changed = dmg->n > 0;
    return 0;
}

void q_damages_patch(const q_damages *d, const uint8_t *src, uint8_t *dst)
{
    for (size_t i = 0; i < d->n; i++)
        memcpy(dst + d->v[i].dst_ofs, src + d->v[i].src_ofs, d->v[i].len);
}

/* ---- which indexes an update affects ------------------------------------------- */

/* Path components an index key cannot tell apart from their parent: array
 * positions ("0"), and "$" / "$[]" / "$[id]".  They are skipped on both
 * sides, as UpdateIndexData canonicalizes paths. */
static bool comp_ignored(const char *c, size_t n)
{
    if (n && c[0] == '$')
        return true;
    for (size_t i = 0; i < n; i++)
        if (c[i] < '0' || c[i] > '9')
            return false;
    return n > 0;
}

static const char *comp_next(const char *p, size_t *n)
{
    for (;;) {
        if (!*p)
            return NULL;
        const char *dot = strchr(p, '.');
        *n = dot ? (size_t)(dot - p) : strlen(p);
        if (!comp_ignored(p, *n))
            return p;
        p += *n + (dot != NULL);
    }
}

/* Is one path a prefix of the other (component-wise, after skipping)? */
static bool paths_overlap(const char *a, const char *b)
{
    size_t na, nb;
    for (;;) {
        const char *ca = comp_next(a, &na), *cb = comp_next(b, &nb);
        if (!ca || !cb)
            return true;
        if (na != nb || memcmp(ca, cb, na) != 0)
            return false;
        a = ca + na + (ca[na] == '.');
        b = cb + nb + (cb[nb] == '.');
    }
}

static bool node_affects(const q_unode *n, const char *path)
{
    if (n->leaf && n->full && paths_overlap(n->full, path))
        return true;
    for (size_t i = 0; i < n->nkid; i++)
        if (node_affects(n->kid[i], path))
            return true;
    for (size_t i = 0; i < n->naf; i++)
        if (node_affects(n->af[i], path))
            return true;
    return n->positional && node_affects(n->positional, path);
}

bool q_update_affects(const q_update *u, const char *path)
{
    return u->replacement || node_affects(u->root, path);
}

uint64_t q_update_serial(const q_update *u)
{
    return u->serial;
}

/* ---- the per-thread cache of the last update parsed ----------------------------
 * Writes repeat their update documents ({$inc: {n: 1}} a million times):
 * each thread keeps the last one it parsed, and an identical document
 * (byte for byte, without arrayFilters) reuses it.  A parsed update is never
 * changed by applying it, so sharing it between statements is safe. */
static __thread q_update *cached;
static __thread bool cached_busy;
static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

static void cache_free(void *u)
{
    cached = NULL;
    cached_busy = false;
    q_update_destroy(u);
}

static void cache_key_make(void)
{
    pthread_key_create(&cache_key, cache_free);
}

int q_update_acquire(const bson_t *update, const bson_t *filters, bool cache, q_update **out,
                     md_error *err)
{
    if (cache && !filters && cached && !cached_busy && cached->doc->len == update->len &&
        memcmp(bson_get_data(cached->doc), bson_get_data(update), update->len) == 0) {
        cached_busy = true;
        *out = cached;
        return 0;
    }
    int rc = q_update_new_af(update, filters, out, err);
    if (!rc)
        (*out)->nocache = !cache;
    return rc;
}

void q_update_release(q_update *u)
{
    if (!u)
        return;
    if (u == cached) {
        cached_busy = false;
        return;
    }
    if (u->naf || cached_busy || u->nocache) {
        q_update_destroy(u);
        return;
    }
    pthread_once(&cache_once, cache_key_make);
    q_update_destroy(cached);
    cached = u;
    pthread_setspecific(cache_key, u);
}
