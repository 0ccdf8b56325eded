/*
 * mm_btree.c -- the mmapv1 index: a B+tree of fixed 8176-byte buckets in
 * the spirit of MongoDB's btree v1 (BtreeBucketV1), reached only through
 * the pager callbacks of mm_btree.h.
 *
 * Leaves hold every (key, rid) entry and are doubly linked; internal
 * buckets hold full (key, rid) separators, so one key repeated over any
 * number of rids splits like any other key.  A split moves about half of
 * the bytes to a new right sibling (90% stay left when the insert lands at
 * the end of a bucket, as MongoDB did for ascending keys); a root split
 * makes a new root.  A remove that empties a bucket unlinks and frees it
 * (no merging); a root left with a single child is replaced by it.  Nothing
 * lives outside buckets but the pager's root: the tree reopens from it.
 *
 * Every value read from a bucket is bounds-checked before use: corruption
 * gives MD_ECORRUPT (ENG_CORRUPT) or validate errors, never a crash, and
 * every walk is bounded (levels strictly decrease downwards; cursor steps
 * and leaf walks require strictly increasing keys, so no cycle can loop).
 *
 * The bucket format, with a worked example, is in mm_int.h.
 *
 * Invariants (checked by mm_bt_validate, in mm_bt_verify.c; the offsets
 * and the checked bucket readers are in mm_bt_int.h):
 *   1. Entries strictly increase (eng_key_cmp) inside every bucket.
 *   2. Child j of an internal bucket holds entries in [s(j-1), s(j)) and
 *      the right child those >= s(n-1), all within the parent's bounds.
 *   3. A child has level = parent level - 1 and parent = the parent's loc;
 *      an internal bucket's children are distinct.
 *   4. Leaves (level 0) are linked by next/prev in key order.
 *   5. No leaf but the root is empty; an empty tree has root 0.
 *   6. Keys lie in [top, 8176) without overlap; sum(klen) + garbage =
 *      8176 - top.
 */
#include <assert.h>
#include <endian.h>
#include <stdlib.h>
#include <string.h>

#include "mm_bt_int.h"

enum { CUR_UNSET, CUR_ON, CUR_BEFORE, CUR_AFTER, CUR_BAD };

struct mm_bt_cursor {
    mm_bt *bt;
    int state;
    mm_bt_loc loc; /* CUR_ON: leaf and slot */
    unsigned idx;
    bool saved;
    int saved_state;
    uint32_t sklen;
    eng_rid srid;
    uint8_t skey[MM_BT_KEY_MAX];
};

/* The key range a bucket's entries lie in, known from the separators its
 * parent chose it by: [lo, hi), either end missing (NULL) at an edge. */
typedef struct bt_bounds {
    const uint8_t *lo, *hi;
    uint32_t llen, hlen;
} bt_bounds;

/* Slot i's key, or false when it lies outside the bucket (slot_problem's
 * key checks; a child pointer is checked by node_child where followed). */
static inline bool slot_key(const bt_node *nd, unsigned i, const uint8_t **key, uint32_t *klen)
{
    const uint8_t *s = nd->p + BK_HDR + i * BK_SLOT;
    unsigned kofs = get16(s + S_KOFS), n = get16(s + S_KLEN);
    if (n > MM_BT_KEY_MAX || kofs < nd->top || kofs + n > MM_BUCKET_SIZE)
        return false;
    *key = nd->p + kofs;
    *klen = n;
    return true;
}

/* Is slot i's entry <= (upper) or < (lower) the target?  1 or 0; -1 when
 * the slot's key lies outside the bucket. */
static inline int probe(const bt_node *nd, unsigned i, const bt_target *tg, bool upper)
{
    const uint8_t *k;
    uint32_t klen;
    if (!slot_key(nd, i, &k, &klen))
        return -1;
    eng_rid rid = (eng_rid)get64(nd->p + BK_HDR + i * BK_SLOT + S_RID);
    int c = eng_key_cmp(k, klen, rid, tg->key, tg->klen, tg->rid);
    return upper ? c <= 0 : c < 0;
}

/* Bytes [at, at+8) of a key as a big-endian number, zeros past its end. */
static uint64_t key_word(const uint8_t *k, uint32_t klen, uint32_t at)
{
    uint64_t v = 0;
    for (uint32_t i = at; i < at + 8; i++)
        v = v << 8 | (i < klen ? k[i] : 0);
    return v;
}

/* Where the target should sit among n entries spread over [lo, hi), by
 * interpolating the first 8 bytes where lo and hi differ; n when the
 * bounds say nothing (an edge, or no difference in those bytes). */
static unsigned estimate(unsigned n, const bt_bounds *bd, const bt_target *tg)
{
    uint32_t at = 0, m;
    if (!bd->lo || !bd->hi)
        return n;
    m = bd->llen < bd->hlen ? bd->llen : bd->hlen;
    while (at < m && bd->lo[at] == bd->hi[at])
        at++;
    uint64_t a = key_word(bd->lo, bd->llen, at), b = key_word(bd->hi, bd->hlen, at);
    uint64_t t = key_word(tg->key, tg->klen, at);
    if (b <= a)
        return n;
    if (t <= a || (at > 0 && memcmp(tg->key, bd->lo, at < tg->klen ? at : tg->klen) < 0))
        return 0;
    if (t >= b || (at > 0 && memcmp(tg->key, bd->hi, at < tg->klen ? at : tg->klen) > 0))
        return n - 1;
    unsigned p = (unsigned)((double)(t - a) / (double)(b - a) * n);
    return p < n ? p : n - 1;
}

/*
 * First slot whose entry is > target (upper) or >= target (lower).
 *
 * A bucket of at least BT_INTERP_MIN entries whose key range the parent
 * gave is searched from an interpolated guess: one probe there, then
 * probes 1, 2, 4... slots away until the answer is bracketed, then a
 * binary search of the bracket.  Keys spread evenly over the range
 * (sequential ids, ObjectIds, timestamps) need two or three probes, close
 * together, where a binary search makes eight or nine across the slot
 * array and the key area (two cache misses each); a bad guess costs about
 * twice the bracket's logarithm.  The answer does not depend on the guess.
 */
#define BT_INTERP_MIN 16

static int node_search(const bt_node *nd, const bt_target *tg, bool upper,
                       const bt_bounds *bd, unsigned *pos, md_error *err)
{
    unsigned lo = 0, hi = nd->n, i = nd->n;
    bt_item e;
    int r;

    if (bd && nd->n >= BT_INTERP_MIN && (i = estimate(nd->n, bd, tg)) < nd->n) {
        if ((r = probe(nd, i, tg, upper)) < 0)
            goto bad;
        if (r) {
            lo = i + 1;
            for (unsigned step = 1, j; (j = i + step) < hi; step *= 2) {
                if ((r = probe(nd, j, tg, upper)) < 0) {
                    i = j;
                    goto bad;
                }
                if (!r) {
                    hi = j;
                    break;
                }
                lo = j + 1;
            }
        } else {
            hi = i;
            for (unsigned step = 1, j; i >= lo + step; step *= 2) {
                j = i - step;
                if ((r = probe(nd, j, tg, upper)) < 0) {
                    i = j;
                    goto bad;
                }
                if (r) {
                    lo = j + 1;
                    break;
                }
                hi = j;
            }
        }
    }
    while (lo < hi) {
        i = lo + (hi - lo) / 2;
        if ((r = probe(nd, i, tg, upper)) < 0)
            goto bad;
        if (r)
            lo = i + 1;
        else
            hi = i;
    }
    *pos = lo;
    return 0;
bad:
    r = node_ent(nd, i, &e, err); /* reports the bad slot */
    assert(r != 0);
    return r;
}

/*
 * Descend from the root towards tg, recording the path; *nd is the leaf.
 * MD_NOTFOUND for an empty tree.  Levels must decrease by one per step,
 * which bounds the loop.  The separators on either side of the child
 * taken bound the child's keys (bt_bounds, for node_search's guess).
 */
static int bt_descend(mm_bt *bt, const bt_target *tg, bt_path *path, bt_node *nd,
                      md_error *err)
{
    mm_bt_loc loc = bt->pg.get_root(bt->pg.ctx);
    unsigned pos, up = 0;
    bt_bounds bd = {NULL, NULL, 0, 0};
    int rc;

    path->depth = 0;
    if (!loc)
        return MD_NOTFOUND;
    for (int d = 0;; d++) {
        if ((rc = node_load(bt, loc, nd, err)) != 0)
            return rc;
        if (d > 0 && nd->level + 1 != up)
            return BT_CORRUPT(err, "btree bucket %#llx: level %u under level %u",
                               LOC(loc), nd->level, up);
        assert(d < BT_MAX_LEVEL);
        if (tg->edge)
            pos = tg->edge < 0 ? 0 : nd->n;
        else if ((rc = node_search(nd, tg, nd->level > 0, &bd, &pos, err)) != 0)
            return rc;
        path->loc[d] = loc;
        path->idx[d] = pos;
        path->depth = d + 1;
        if (nd->level == 0)
            return 0;
        if ((rc = node_child(nd, pos, &loc, err)) != 0)
            return rc;
        /* a separator whose key is out of bounds bounds nothing */
        if (pos > 0 && !slot_key(nd, pos - 1, &bd.lo, &bd.llen))
            bd.lo = NULL;
        if (pos < nd->n && !slot_key(nd, pos, &bd.hi, &bd.hlen))
            bd.hi = NULL;
        up = nd->level;
    }
}

/* The leaf next to nd (fwd: right), which must link back and be non-empty. */
static int leaf_sibling(mm_bt *bt, const bt_node *nd, bool fwd, bt_node *sib, md_error *err)
{
    mm_bt_loc s = get64(nd->p + (fwd ? H_NEXT : H_PREV));
    int rc;

    if (!s)
        return MD_NOTFOUND;
    if ((rc = node_load(bt, s, sib, err)) != 0)
        return rc;
    if (sib->level != 0 || sib->n == 0 ||
        get64(sib->p + (fwd ? H_PREV : H_NEXT)) != nd->loc)
        return BT_CORRUPT(err, "btree leaf %#llx: bad sibling %#llx", LOC(nd->loc), LOC(s));
    return 0;
}

/*
 * The first entry >= (key, rid): its leaf, slot and contents.  MD_NOTFOUND
 * when every entry is smaller (or the tree is empty).
 */
static int bt_lower_bound(mm_bt *bt, const bt_target *tg, mm_bt_loc *loc, unsigned *idx,
                          bt_item *e, md_error *err)
{
    bt_path path;
    bt_node nd, sib;
    unsigned pos;
    int rc;

    if ((rc = bt_descend(bt, tg, &path, &nd, err)) != 0)
        return rc;
    pos = path.idx[path.depth - 1];
    if (pos == nd.n) {
        if ((rc = leaf_sibling(bt, &nd, true, &sib, err)) != 0)
            return rc;
        nd = sib;
        pos = 0;
    }
    if ((rc = node_ent(&nd, pos, e, err)) != 0)
        return rc;
    if (item_cmp(e, tg->key, tg->klen, tg->rid) < 0)
        return BT_CORRUPT(err, "btree leaf %#llx: entry below its separator", LOC(nd.loc));
    *loc = nd.loc;
    *idx = pos;
    return 0;
}

/* ---- writing buckets ----------------------------------------------------- */

static void bt_declare(mm_bt *bt, eng_txn *t, uint8_t *p, size_t ofs, size_t len)
{
    assert(ofs + len <= MM_BUCKET_SIZE);
    if (len)
        bt->pg.writing(bt->pg.ctx, t, p + ofs, len);
}

static int bt_alloc(mm_bt *bt, eng_txn *t, mm_bt_loc *loc, uint8_t **p, md_error *err)
{
    int rc = bt->pg.alloc(bt->pg.ctx, t, loc, p);

    if (rc)
        return md_error_set(err, rc, eng_rc_to_code(rc), "btree: cannot allocate a bucket");
    assert(*loc && *p);
    return 0;
}

/* An empty key's kofs is 8176, so that moving top never strands it. */
static void slot_put(uint8_t *s, unsigned kofs, const bt_item *it)
{
    put16(s + S_KOFS, it->klen ? kofs : MM_BUCKET_SIZE);
    put16(s + S_KLEN, it->klen);
    put64(s + S_RID, (uint64_t)it->rid);
    put64(s + S_CHILD, it->child);
}

/* Write a whole bucket from items, whose keys must not point into p. */
static void node_build(uint8_t *p, const bt_hdr *h, const bt_item *items, unsigned count)
{
    unsigned top = MM_BUCKET_SIZE;

    assert(count <= BK_MAX_SLOTS && h->level < BT_MAX_LEVEL);
    memset(p, 0, MM_BUCKET_SIZE);
    put32(p + H_MAGIC, BK_MAGIC);
    p[H_LEVEL] = (uint8_t)h->level;
    p[H_FLAGS] = h->level ? 0 : BK_FLAG_LEAF;
    put16(p + H_N, count);
    put64(p + H_PARENT, h->parent);
    put64(p + H_NEXT, h->next);
    put64(p + H_PREV, h->prev);
    put64(p + H_RIGHT, h->right);
    for (unsigned i = 0; i < count; i++) {
        top -= items[i].klen;
        if (items[i].klen)
            memcpy(p + top, items[i].key, items[i].klen);
        slot_put(p + BK_HDR + i * BK_SLOT, top, &items[i]);
    }
    assert(top >= BK_HDR + count * BK_SLOT);
    put16(p + H_TOP, top);
}

static size_t items_bytes(const bt_item *it, unsigned a, unsigned b)
{
    size_t sum = 0;
    for (unsigned i = a; i < b; i++)
        sum += BK_SLOT + it[i].klen;
    return sum;
}

/* Copy nd into bt->scratch and its entries into bt->items (keys borrowed
 * from the scratch copy, so nd may then be rebuilt). */
static int node_snapshot(mm_bt *bt, const bt_node *nd, md_error *err)
{
    bt_node s = *nd;
    int rc;

    memcpy(bt->scratch, nd->p, MM_BUCKET_SIZE);
    s.p = bt->scratch;
    for (unsigned i = 0; i < s.n; i++)
        if ((rc = node_ent(&s, i, &bt->items[i], err)) != 0)
            return rc;
    if (items_bytes(bt->items, 0, s.n) > BK_CAP)
        return BT_CORRUPT(err, "btree bucket %#llx: keys overflow the bucket", LOC(nd->loc));
    return 0;
}

/* Repack the key area of nd, dropping the garbage. */
static int node_compact(mm_bt *bt, eng_txn *t, bt_node *nd, md_error *err)
{
    bt_hdr h = node_hdr(nd);
    int rc;

    if ((rc = node_snapshot(bt, nd, err)) != 0)
        return rc;
    bt_declare(bt, t, nd->p, 0, MM_BUCKET_SIZE);
    node_build(nd->p, &h, bt->items, nd->n);
    nd->top = get16(nd->p + H_TOP);
    nd->garbage = 0;
    return 0;
}

/*
 * Insert `it` as slot pos of nd in place.  In an internal bucket, the
 * pointer after it (slot pos+1's child, or the right child) becomes
 * right_of.  Returns 1 when it does not fit even after compaction.
 */
static int node_insert_at(mm_bt *bt, eng_txn *t, bt_node *nd, unsigned pos,
                          const bt_item *it, mm_bt_loc right_of, md_error *err)
{
    unsigned need = BK_SLOT + it->klen, gap = nd->top - (BK_HDR + nd->n * BK_SLOT);
    size_t so = BK_HDR + (size_t)pos * BK_SLOT;
    uint8_t *p;
    int rc;

    assert(pos <= nd->n && (right_of != 0) == (nd->level > 0));
    if (gap < need) {
        if (gap + nd->garbage < need)
            return 1;
        if ((rc = node_compact(bt, t, nd, err)) != 0)
            return rc;
        if (nd->top - (BK_HDR + nd->n * BK_SLOT) < need)
            return BT_CORRUPT(err, "btree bucket %#llx: bad free space", LOC(nd->loc));
    }
    p = nd->p;
    bt_declare(bt, t, p, H_N, 4);
    bt_declare(bt, t, p, so, (nd->n + 1 - pos) * BK_SLOT);
    bt_declare(bt, t, p, nd->top - it->klen, it->klen);
    if (right_of && pos == nd->n)
        bt_declare(bt, t, p, H_RIGHT, 8);
    memmove(p + so + BK_SLOT, p + so, (nd->n - pos) * BK_SLOT);
    nd->top -= it->klen;
    if (it->klen)
        memcpy(p + nd->top, it->key, it->klen);
    slot_put(p + so, nd->top, it);
    nd->n++;
    put16(p + H_N, nd->n);
    put16(p + H_TOP, nd->top);
    if (right_of)
        put64(pos + 1 < nd->n ? p + so + BK_SLOT + S_CHILD : p + H_RIGHT, right_of);
    return 0;
}

/* Remove slot pos (entry e, read from nd) in place. */
static void node_remove_at(mm_bt *bt, eng_txn *t, bt_node *nd, unsigned pos, const bt_item *e)
{
    uint8_t *p = nd->p;
    size_t so = BK_HDR + (size_t)pos * BK_SLOT;
    unsigned kofs = (unsigned)(e->key - p);

    assert(pos < nd->n && kofs >= nd->top);
    bt_declare(bt, t, p, H_N, 6);
    bt_declare(bt, t, p, so, (nd->n - pos) * BK_SLOT);
    memmove(p + so, p + so + BK_SLOT, (nd->n - pos - 1) * BK_SLOT);
    memset(p + BK_HDR + (nd->n - 1) * BK_SLOT, 0, BK_SLOT);
    nd->n--;
    if (nd->n == 0) {
        nd->top = MM_BUCKET_SIZE;
        nd->garbage = 0;
    } else if (kofs == nd->top) {
        nd->top += e->klen;
    } else {
        nd->garbage += e->klen;
    }
    put16(p + H_N, nd->n);
    put16(p + H_TOP, nd->top);
    put16(p + H_GARBAGE, nd->garbage);
}

static int set_link(mm_bt *bt, eng_txn *t, mm_bt_loc loc, size_t field, mm_bt_loc v,
                    md_error *err)
{
    bt_node nd;
    int rc = node_load(bt, loc, &nd, err);

    if (rc)
        return rc;
    bt_declare(bt, t, nd.p, field, 8);
    put64(nd.p + field, v);
    return 0;
}

/* Point the parent field of every child of nd at nd. */
static int node_adopt(mm_bt *bt, eng_txn *t, const bt_node *nd, md_error *err)
{
    mm_bt_loc child;
    int rc;

    for (unsigned j = 0; j <= nd->n; j++) {
        if ((rc = node_child(nd, j, &child, err)) != 0)
            return rc;
        if ((rc = set_link(bt, t, child, H_PARENT, nd->loc, err)) != 0)
            return rc;
    }
    return 0;
}

/* ---- insert -------------------------------------------------------------- */

/*
 * Where to split cnt items (the new one at pos): the left bucket keeps
 * [0, m); a leaf's right one gets [m, cnt), an internal one's [m+1, cnt)
 * while item m moves up.  About half the bytes each, 90% left when
 * appending; both halves must fit.
 */
static unsigned split_point(const bt_item *it, unsigned cnt, unsigned pos, bool leaf)
{
    size_t total = items_bytes(it, 0, cnt), acc = 0;
    size_t want = pos == cnt - 1 ? total * 9 / 10 : total / 2;
    unsigned m = 0, lo = 1, hi = leaf ? cnt - 1 : cnt - 2;

    assert(cnt >= 3);
    while (m < cnt && acc < want)
        acc += BK_SLOT + it[m++].klen;
    m = m < lo ? lo : m > hi ? hi : m;
    while (m > lo && items_bytes(it, 0, m) > BK_CAP)
        m--;
    while (m < hi && items_bytes(it, leaf ? m : m + 1, cnt) > BK_CAP)
        m++;
    assert(items_bytes(it, 0, m) <= BK_CAP);
    assert(items_bytes(it, leaf ? m : m + 1, cnt) <= BK_CAP);
    return m;
}

/* bt->items[0..n] := nd's entries with `it` inserted at pos (and, for an
 * internal bucket, the pointer after it replaced by right_of). */
static int split_items(mm_bt *bt, const bt_node *nd, unsigned pos, const bt_item *it,
                       mm_bt_loc right_of, bt_hdr *h, md_error *err)
{
    int rc = node_snapshot(bt, nd, err);

    if (rc)
        return rc;
    *h = node_hdr(nd);
    memmove(&bt->items[pos + 1], &bt->items[pos], (nd->n - pos) * sizeof *bt->items);
    bt->items[pos] = *it;
    if (right_of && pos + 1 <= nd->n)
        bt->items[pos + 1].child = right_of;
    else if (right_of)
        h->right = right_of;
    return 0;
}

/*
 * nd cannot take `it` at pos: move the upper part of its entries into a new
 * right sibling.  *sep (key in bt->sepkey, child = nd) and *new_loc are
 * what the parent must receive.  nd is reloaded (alloc may remap).
 */
static int node_split(mm_bt *bt, eng_txn *t, bt_node *nd, unsigned pos, const bt_item *it,
                      mm_bt_loc right_of, bt_item *sep, mm_bt_loc *new_loc, md_error *err)
{
    bool leaf = nd->level == 0;
    unsigned cnt = nd->n + 1, m;
    bt_hdr h, rh;
    bt_node sib = {0}; /* (set when used: initialized for the compiler) */
    uint8_t *np;
    int rc;

    if ((rc = split_items(bt, nd, pos, it, right_of, &h, err)) != 0)
        return rc;
    if (items_bytes(bt->items, 0, cnt) <= BK_CAP)
        return BT_CORRUPT(err, "btree bucket %#llx: bad free space", LOC(nd->loc));
    m = split_point(bt->items, cnt, pos, leaf);
    if ((rc = bt_alloc(bt, t, new_loc, &np, err)) != 0)
        return rc;
    if ((rc = node_load(bt, nd->loc, nd, err)) != 0)
        return rc;
    if (leaf && h.next && (rc = node_load(bt, h.next, &sib, err)) != 0)
        return rc;
    rh = h;
    if (leaf) {
        rh.prev = nd->loc;
        h.next = *new_loc;
        node_build(np, &rh, bt->items + m, cnt - m);
    } else {
        h.right = bt->items[m].child;
        node_build(np, &rh, bt->items + m + 1, cnt - m - 1);
    }
    bt_declare(bt, t, nd->p, 0, MM_BUCKET_SIZE);
    node_build(nd->p, &h, bt->items, m);
    if (leaf && rh.next) {
        bt_declare(bt, t, sib.p, H_PREV, 8);
        put64(sib.p + H_PREV, *new_loc);
    }
    if (!leaf && (rc = node_load(bt, *new_loc, &sib, err)) == 0)
        rc = node_adopt(bt, t, &sib, err);
    memmove(bt->sepkey, bt->items[m].key, bt->items[m].klen);
    *sep = (bt_item){bt->sepkey, bt->items[m].klen, bt->items[m].rid, nd->loc};
    return rc;
}

/* The root split into old and right: put a new root above them. */
static int bt_grow(mm_bt *bt, eng_txn *t, mm_bt_loc old, unsigned level, const bt_item *sep,
                   mm_bt_loc right, md_error *err)
{
    bt_hdr h = {level + 1, 0, 0, 0, right};
    bt_item item = *sep;
    mm_bt_loc root;
    uint8_t *p;
    int rc;

    if (level + 1 >= BT_MAX_LEVEL)
        return md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR, "btree: too many levels");
    if ((rc = bt_alloc(bt, t, &root, &p, err)) != 0)
        return rc;
    item.child = old;
    node_build(p, &h, &item, 1);
    if ((rc = set_link(bt, t, old, H_PARENT, root, err)) != 0 ||
        (rc = set_link(bt, t, right, H_PARENT, root, err)) != 0)
        return rc;
    bt->pg.set_root(bt->pg.ctx, t, root);
    return 0;
}

/* Insert `it` at the leaf of path, splitting upwards as needed. */
static int bt_insert_path(mm_bt *bt, eng_txn *t, const bt_path *path, bt_item it,
                          md_error *err)
{
    mm_bt_loc right = 0;
    bt_node nd = {0, NULL, 0, 0, 0, 0};
    bt_item sep = {NULL, 0, 0, 0};
    int rc, d;

    assert(path->depth > 0);
    for (d = path->depth - 1; d >= 0; d--) {
        unsigned pos = path->idx[d];
        if ((rc = node_load(bt, path->loc[d], &nd, err)) != 0)
            return rc;
        if (pos > nd.n || (nd.level == 0) != (right == 0))
            return BT_CORRUPT(err, "btree bucket %#llx changed under insert", LOC(nd.loc));
        rc = node_insert_at(bt, t, &nd, pos, &it, right, err);
        if (rc <= 0)
            return rc;
        if ((rc = node_split(bt, t, &nd, pos, &it, right, &sep, &right, err)) != 0)
            return rc;
        it = sep;
    }
    return bt_grow(bt, t, nd.loc, nd.level, &it, right, err);
}

/* Create an empty root leaf for the first insert. */
static int bt_plant(mm_bt *bt, eng_txn *t, bt_path *path, bt_node *leaf, md_error *err)
{
    bt_hdr h = {0, 0, 0, 0, 0};
    mm_bt_loc loc;
    uint8_t *p;
    int rc;

    if ((rc = bt_alloc(bt, t, &loc, &p, err)) != 0)
        return rc;
    node_build(p, &h, NULL, 0);
    bt->pg.set_root(bt->pg.ctx, t, loc);
    path->depth = 1;
    path->loc[0] = loc;
    path->idx[0] = 0;
    return node_load(bt, loc, leaf, err);
}

/* MD_EDUPKEY if an entry has tg's key bytes (its rid differs: the caller
 * checked that the exact pair is absent). */
static int bt_check_unique(mm_bt *bt, const bt_target *tg, eng_rid *dup_rid, md_error *err)
{
    bt_target low = {tg->key, tg->klen, INT64_MIN, 0};
    mm_bt_loc loc;
    unsigned idx;
    bt_item e;
    int rc = bt_lower_bound(bt, &low, &loc, &idx, &e, err);

    if (rc == MD_NOTFOUND)
        return 0;
    if (rc)
        return rc;
    if (e.klen != tg->klen || (tg->klen && memcmp(e.key, tg->key, tg->klen) != 0))
        return 0;
    if (dup_rid)
        *dup_rid = e.rid;
    return md_error_set(err, MD_EDUPKEY, MD_CODE_DUPLICATE_KEY,
                        "E11000 duplicate key error dup key (RecordId %lld)",
                        (long long)e.rid);
}

/*
 * The exact pair already present is a no-op (even if unique and another rid
 * has the key).  Checks (size, duplicates) come before any write; after any
 * other failure the caller must abort the transaction.
 */
int mm_bt_insert(mm_bt *bt, eng_txn *t, const uint8_t *key, uint32_t klen, eng_rid rid,
                 bool unique, eng_rid *dup_rid, md_error *err)
{
    bt_target tg = {bt->kbuf, klen, rid, 0};
    bt_path path;
    bt_node leaf;
    bt_item e, it = {bt->kbuf, klen, rid, 0};
    unsigned pos;
    int rc;

    assert(bt && (key || !klen));
    if (klen > MM_BT_KEY_MAX)
        return md_error_set(err, MD_ETOOBIG, MD_CODE_KEY_TOO_LONG,
                            "Btree::insert: key too large to index, failing: key length "
                            "%u bytes exceeds %d",
                            klen, MM_BT_KEY_MAX);
    if (klen)
        memmove(bt->kbuf, key, klen);
    rc = bt_descend(bt, &tg, &path, &leaf, err);
    if (rc == MD_NOTFOUND)
        rc = bt_plant(bt, t, &path, &leaf, err);
    if (rc)
        return rc;
    pos = path.idx[path.depth - 1];
    if (pos < leaf.n) {
        if ((rc = node_ent(&leaf, pos, &e, err)) != 0)
            return rc;
        if (item_cmp(&e, bt->kbuf, klen, rid) == 0)
            return 0;
    }
    if (unique && (rc = bt_check_unique(bt, &tg, dup_rid, err)) != 0)
        return rc;
    return bt_insert_path(bt, t, &path, it, err);
}

/* ---- remove -------------------------------------------------------------- */

/* Unlink leaf nd from its siblings. */
static int leaf_unlink(mm_bt *bt, eng_txn *t, const bt_node *nd)
{
    mm_bt_loc prev = get64(nd->p + H_PREV), next = get64(nd->p + H_NEXT);
    bt_node a = {0}, b = {0}; /* (set when used: initialized for the compiler) */
    int rc;

    if (prev && (rc = node_load(bt, prev, &a, NULL)) != 0)
        return rc;
    if (next && (rc = node_load(bt, next, &b, NULL)) != 0)
        return rc;
    if (prev) {
        bt_declare(bt, t, a.p, H_NEXT, 8);
        put64(a.p + H_NEXT, next);
    }
    if (next) {
        bt_declare(bt, t, b.p, H_PREV, 8);
        put64(b.p + H_PREV, prev);
    }
    return 0;
}

/* Remove child pointer j (0..n) of internal nd along with a separator. */
static int node_drop_child(mm_bt *bt, eng_txn *t, bt_node *nd, unsigned j)
{
    bt_item e;
    int rc;

    if (nd->n == 0 || j > nd->n)
        return BT_CORRUPT(NULL, "btree bucket %#llx changed under remove", LOC(nd->loc));
    if (j == nd->n) {
        if ((rc = node_ent(nd, --j, &e, NULL)) != 0)
            return rc;
        bt_declare(bt, t, nd->p, H_RIGHT, 8);
        put64(nd->p + H_RIGHT, e.child);
    } else if ((rc = node_ent(nd, j, &e, NULL)) != 0) {
        return rc;
    }
    node_remove_at(bt, t, nd, j, &e);
    return 0;
}

/* While the root is internal with a single child, make the child the root. */
static int bt_shrink(mm_bt *bt, eng_txn *t)
{
    bt_node root, child;
    mm_bt_loc c;
    int rc;

    for (;;) {
        if ((rc = node_load(bt, bt->pg.get_root(bt->pg.ctx), &root, NULL)) != 0)
            return rc;
        if (root.level == 0 || root.n > 0)
            return 0;
        if ((rc = node_child(&root, 0, &c, NULL)) != 0 ||
            (rc = node_load(bt, c, &child, NULL)) != 0)
            return rc;
        if (child.level + 1 != root.level)
            return BT_CORRUPT(NULL, "btree bucket %#llx: bad child level", LOC(c));
        bt_declare(bt, t, child.p, H_PARENT, 8);
        put64(child.p + H_PARENT, 0);
        bt->pg.set_root(bt->pg.ctx, t, c);
        bt->pg.free(bt->pg.ctx, t, root.loc);
    }
}

/* The bucket at path depth d is empty: free it (and every ancestor left
 * without children), unlink it from its siblings, shrink the root. */
static int bt_drop(mm_bt *bt, eng_txn *t, const bt_path *path, int d)
{
    bt_node nd, par;
    int rc;

    for (;; d--) {
        if ((rc = node_load(bt, path->loc[d], &nd, NULL)) != 0)
            return rc;
        if (d == 0) {
            bt->pg.set_root(bt->pg.ctx, t, 0);
            bt->pg.free(bt->pg.ctx, t, nd.loc);
            return 0;
        }
        if (nd.level == 0 && (rc = leaf_unlink(bt, t, &nd)) != 0)
            return rc;
        if ((rc = node_load(bt, path->loc[d - 1], &par, NULL)) != 0)
            return rc;
        if (par.n > 0)
            break;
        bt->pg.free(bt->pg.ctx, t, nd.loc);
    }
    if ((rc = node_drop_child(bt, t, &par, path->idx[d - 1])) != 0)
        return rc;
    bt->pg.free(bt->pg.ctx, t, nd.loc);
    return d - 1 == 0 ? bt_shrink(bt, t) : 0;
}

int mm_bt_remove(mm_bt *bt, eng_txn *t, const uint8_t *key, uint32_t klen, eng_rid rid)
{
    bt_target tg = {bt->kbuf, klen, rid, 0};
    bt_path path;
    bt_node leaf;
    bt_item e;
    unsigned pos;
    int rc;

    assert(bt && (key || !klen));
    if (klen > MM_BT_KEY_MAX)
        return MD_NOTFOUND;
    if (klen)
        memmove(bt->kbuf, key, klen);
    if ((rc = bt_descend(bt, &tg, &path, &leaf, NULL)) != 0)
        return rc;
    pos = path.idx[path.depth - 1];
    if (pos >= leaf.n)
        return MD_NOTFOUND;
    if ((rc = node_ent(&leaf, pos, &e, NULL)) != 0)
        return rc;
    if (item_cmp(&e, bt->kbuf, klen, rid) != 0)
        return MD_NOTFOUND;
    node_remove_at(bt, t, &leaf, pos, &e);
    return leaf.n ? 0 : bt_drop(bt, t, &path, path.depth - 1);
}

/* ---- whole-tree walks ---------------------------------------------------- */

typedef struct bt_walker {
    mm_bt *bt;
    mm_bt_loc *locs; /* NULL: only count */
    size_t n, cap;
} bt_walker;


/* Visit every bucket once, children first.  A child must name its parent,
 * sit one level lower and be distinct from its siblings, so that no bucket
 * is reached twice and the walk ends. */
static int bt_walk(bt_walker *w, mm_bt_loc loc, mm_bt_loc parent, int level)
{
    bt_node nd;
    mm_bt_loc child;
    bool dup;
    int rc;

    if ((rc = node_load(w->bt, loc, &nd, NULL)) != 0)
        return rc;
    if ((level >= 0 && nd.level != (unsigned)level) || get64(nd.p + H_PARENT) != parent)
        return BT_CORRUPT(NULL, "btree bucket %#llx: bad level or parent", LOC(loc));
    for (unsigned j = 0; nd.level && j <= nd.n; j++) {
        if ((rc = node_child(&nd, j, &child, NULL)) != 0 ||
            (rc = child_repeats(&nd, j, child, &dup)) != 0)
            return rc;
        if (dup)
            return BT_CORRUPT(NULL, "btree bucket %#llx: repeated child", LOC(loc));
        if ((rc = bt_walk(w, child, loc, (int)nd.level - 1)) != 0)
            return rc;
    }
    if (w->locs && w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 64;
        mm_bt_loc *v = realloc(w->locs, cap * sizeof *v);
        if (!v)
            return MD_ENOMEM;
        w->locs = v;
        w->cap = cap;
    }
    if (w->locs)
        w->locs[w->n] = loc;
    w->n++;
    return 0;
}

int mm_bt_truncate(mm_bt *bt, eng_txn *t)
{
    bt_walker w = {bt, NULL, 0, 0};
    mm_bt_loc root = bt->pg.get_root(bt->pg.ctx);
    int rc;

    assert(bt);
    if (!root)
        return 0;
    if (!(w.locs = malloc(64 * sizeof *w.locs)))
        return MD_ENOMEM;
    w.cap = 64;
    if ((rc = bt_walk(&w, root, 0, -1)) != 0)
        goto out_free;
    bt->pg.set_root(bt->pg.ctx, t, 0);
    for (size_t i = 0; i < w.n; i++)
        bt->pg.free(bt->pg.ctx, t, w.locs[i]);
out_free:
    free(w.locs);
    return rc;
}

int64_t mm_bt_buckets(mm_bt *bt)
{
    bt_walker w = {bt, NULL, 0, 0};
    mm_bt_loc root = bt->pg.get_root(bt->pg.ctx);
    int rc = root ? bt_walk(&w, root, 0, -1) : 0;

    return rc ? rc : (int64_t)w.n;
}

/* Walk the leaf chain; entries must keep increasing across leaves, which
 * (with first <= last inside each leaf) rules out cycles. */
int64_t mm_bt_entries(mm_bt *bt)
{
    bt_target left = {NULL, 0, 0, -1};
    bt_path path;
    bt_node nd, sib;
    bt_item first, last, next;
    int64_t count = 0;
    int rc;

    assert(bt);
    rc = bt_descend(bt, &left, &path, &nd, NULL);
    if (rc)
        return rc == MD_NOTFOUND ? 0 : rc;
    for (;;) {
        count += nd.n;
        if (nd.n == 0)
            return path.depth == 1 && !get64(nd.p + H_NEXT) ? 0 : MD_ECORRUPT;
        if ((rc = node_ent(&nd, 0, &first, NULL)) != 0 ||
            (rc = node_ent(&nd, nd.n - 1, &last, NULL)) != 0)
            return rc;
        if ((rc = leaf_sibling(bt, &nd, true, &sib, NULL)) == MD_NOTFOUND)
            return count;
        if (rc || (rc = node_ent(&sib, 0, &next, NULL)) != 0)
            return rc;
        if (item_cmp(&first, last.key, last.klen, last.rid) > 0 ||
            item_cmp(&last, next.key, next.klen, next.rid) >= 0)
            return BT_CORRUPT(NULL, "btree leaf %#llx: keys out of order", LOC(sib.loc));
        nd = sib;
    }
}

/* ---- open / close -------------------------------------------------------- */

int mm_bt_open(const mm_bt_pager *pager, mm_bt **out)
{
    mm_bt *bt;

    assert(pager && out);
    assert(pager->alloc && pager->free && pager->page && pager->writing);
    assert(pager->get_root && pager->set_root);
    if (!(bt = calloc(1, sizeof *bt)))
        return MD_ENOMEM;
    bt->pg = *pager;
    *out = bt;
    return 0;
}

void mm_bt_close(mm_bt *bt)
{
    free(bt);
}

/* ---- cursors ------------------------------------------------------------- */

int mm_bt_cursor_open(mm_bt *bt, mm_bt_cursor **out)
{
    mm_bt_cursor *c;

    assert(bt && out);
    if (!(c = calloc(1, sizeof *c)))
        return MD_ENOMEM;
    c->bt = bt;
    c->state = CUR_UNSET;
    *out = c;
    return 0;
}

void mm_bt_cursor_close(mm_bt_cursor *c)
{
    free(c);
}

/* Settle after a positioning attempt: on (loc, idx), or resting at `past`. */
static int cur_land(mm_bt_cursor *c, int rc, mm_bt_loc loc, unsigned idx, int past)
{
    if (rc == 0) {
        c->state = CUR_ON;
        c->loc = loc;
        c->idx = idx;
    } else if (rc == MD_NOTFOUND) {
        c->state = past;
    }
    return rc;
}

/* A step that found damage: the cursor leaves its entry for the end it was
 * heading to, so that a caller that ignores the error cannot be handed the
 * same entry again and again (a scan would never end). */
static int cur_broken(mm_bt_cursor *c, int rc, bool fwd)
{
    c->state = fwd ? CUR_AFTER : CUR_BEFORE;
    return rc;
}

/* Position on the first (first) or last entry of the tree. */
static int cur_edge(mm_bt_cursor *c, bool first)
{
    bt_target tg = {NULL, 0, 0, first ? -1 : 1};
    bt_path path;
    bt_node nd;
    int rc = bt_descend(c->bt, &tg, &path, &nd, NULL);

    if (rc == 0 && nd.n == 0)
        rc = get64(nd.p + H_NEXT) || get64(nd.p + H_PREV) ? MD_ECORRUPT : MD_NOTFOUND;
    if (rc)
        return cur_land(c, rc, 0, 0, first ? CUR_AFTER : CUR_BEFORE);
    return cur_land(c, 0, nd.loc, first ? 0 : nd.n - 1, 0);
}

/* One entry forwards or backwards; the entry reached must be strictly
 * beyond the one left, so a damaged tree cannot make a scan loop. */
static int cur_step(mm_bt_cursor *c, bool fwd)
{
    bt_node nd, sib;
    bt_item cur, e;
    unsigned idx;
    int rc;

    if ((rc = node_load(c->bt, c->loc, &nd, NULL)) != 0 ||
        (rc = node_ent(&nd, c->idx, &cur, NULL)) != 0)
        return cur_broken(c, rc, fwd);
    if (nd.level != 0)
        return cur_broken(c, BT_CORRUPT(NULL, "btree cursor on internal bucket %#llx",
                                        LOC(nd.loc)), fwd);
    if (fwd ? c->idx + 1 < nd.n : c->idx > 0) {
        sib = nd;
        idx = fwd ? c->idx + 1 : c->idx - 1;
    } else if ((rc = leaf_sibling(c->bt, &nd, fwd, &sib, NULL)) != 0) {
        return rc == MD_NOTFOUND ? cur_land(c, rc, 0, 0, fwd ? CUR_AFTER : CUR_BEFORE)
                                 : cur_broken(c, rc, fwd);
    } else {
        idx = fwd ? 0 : sib.n - 1;
    }
    if ((rc = node_ent(&sib, idx, &e, NULL)) != 0)
        return cur_broken(c, rc, fwd);
    rc = item_cmp(&e, cur.key, cur.klen, cur.rid);
    if (fwd ? rc <= 0 : rc >= 0)
        return cur_broken(c, BT_CORRUPT(NULL, "btree leaf %#llx: keys out of order",
                                        LOC(sib.loc)), fwd);
    return cur_land(c, 0, sib.loc, idx, 0);
}

int mm_bt_cursor_seek(mm_bt_cursor *c, const uint8_t *key, uint32_t klen, eng_rid rid)
{
    bt_target tg = {key, klen, rid, 0};
    mm_bt_loc loc = 0;
    unsigned idx = 0;
    bt_item e;
    int rc;

    assert(c && (key || !klen));
    c->saved = false;
    if (klen == 0)
        return cur_edge(c, true);
    rc = bt_lower_bound(c->bt, &tg, &loc, &idx, &e, NULL);
    return cur_land(c, rc, loc, idx, CUR_AFTER);
}

int mm_bt_find(mm_bt *bt, const uint8_t *key, uint32_t klen, eng_rid *rid)
{
    bt_target tg = {key, klen, ENG_RID_NONE, 0};
    mm_bt_loc loc = 0;
    unsigned idx = 0;
    bt_item e;

    assert(bt && key && rid);
    int rc = bt_lower_bound(bt, &tg, &loc, &idx, &e, NULL);
    if (rc)
        return rc;
    if (e.klen != klen || memcmp(e.key, key, klen) != 0)
        return MD_NOTFOUND;
    *rid = e.rid;
    return 0;
}

int mm_bt_cursor_next(mm_bt_cursor *c)
{
    assert(c);
    switch (c->state) {
    case CUR_ON: return cur_step(c, true);
    case CUR_AFTER: return MD_NOTFOUND;
    default: return cur_edge(c, true);
    }
}

int mm_bt_cursor_prev(mm_bt_cursor *c)
{
    assert(c);
    switch (c->state) {
    case CUR_ON: return cur_step(c, false);
    case CUR_BEFORE: return MD_NOTFOUND;
    default: return cur_edge(c, false);
    }
}

static int cur_entry(mm_bt_cursor *c, bt_item *e)
{
    bt_node nd;
    int rc;

    if (c->state != CUR_ON)
        return MD_NOTFOUND;
    if ((rc = node_load(c->bt, c->loc, &nd, NULL)) != 0)
        return rc;
    if (nd.level != 0)
        return BT_CORRUPT(NULL, "btree cursor on internal bucket %#llx", LOC(nd.loc));
    return node_ent(&nd, c->idx, e, NULL);
}

int mm_bt_cursor_get(mm_bt_cursor *c, const uint8_t **key, uint32_t *klen, eng_rid *rid)
{
    bt_item e;
    int rc;

    assert(c);
    if ((rc = cur_entry(c, &e)) != 0)
        return rc;
    if (key)
        *key = e.key;
    if (klen)
        *klen = e.klen;
    if (rid)
        *rid = e.rid;
    return 0;
}

void mm_bt_cursor_save(mm_bt_cursor *c)
{
    bt_item e;

    assert(c);
    c->saved = true;
    c->saved_state = c->state;
    if (c->state != CUR_ON)
        return;
    if (cur_entry(c, &e) != 0) {
        c->saved_state = CUR_BAD;
        return;
    }
    if (e.klen)
        memcpy(c->skey, e.key, e.klen);
    c->sklen = e.klen;
    c->srid = e.rid;
}

/*
 * Re-seek the saved (key, rid): the cursor lands on it, or on the next
 * greater entry if it was removed (as MongoDB 3.0's restorePosition; a
 * forward scanner compares get() with what it saved before calling next()).
 * 0 when on an entry, MD_NOTFOUND when resting past an end.
 */
int mm_bt_cursor_restore(mm_bt_cursor *c)
{
    bt_target tg = {c->skey, c->sklen, c->srid, 0};
    mm_bt_loc loc = 0;
    unsigned idx = 0;
    bt_item e;
    int rc;

    assert(c);
    if (!c->saved)
        return c->state == CUR_ON ? 0 : MD_NOTFOUND;
    c->saved = false;
    if (c->saved_state == CUR_BAD)
        return BT_CORRUPT(NULL, "btree cursor: saved position was unreadable");
    if (c->saved_state != CUR_ON) {
        c->state = c->saved_state;
        return MD_NOTFOUND;
    }
    rc = bt_lower_bound(c->bt, &tg, &loc, &idx, &e, NULL);
    return cur_land(c, rc, loc, idx, CUR_AFTER);
}
