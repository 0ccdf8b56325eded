/*
 * mm_bt_verify.c -- validate for the mmapv1 index B-tree: a walk of every
 * bucket from the root checking the invariants listed in mm_btree.c
 * (order, parent/child and sibling links, bucket bounds, key overlap and
 * free-space accounting, entry counts), reporting each violation through
 * eng_validate_error instead of stopping at the first.
 */
#include <stdlib.h>

#include "mm_bt_int.h"


/* ---- validate ------------------------------------------------------------ */

typedef struct bt_bound {
    const uint8_t *key; /* NULL: unbounded */
    uint32_t klen;
    eng_rid rid;
} bt_bound;

typedef struct bt_vctx {
    mm_bt *bt;
    eng_validate *v;
    mm_bt_loc root;
    mm_bt_loc *leaves; /* in key order */
    size_t nleaves, cap;
    int64_t entries;
    int rc;
    uint8_t used[MM_BUCKET_SIZE]; /* key bytes claimed by a slot */
} bt_vctx;

static void val_bucket(bt_vctx *vc, mm_bt_loc loc, mm_bt_loc parent, int level,
                       const bt_bound *lo, const bt_bound *hi);

/* Header, level, parent and link fields; nonzero to stop at this bucket. */
static int val_header(bt_vctx *vc, mm_bt_loc loc, mm_bt_loc parent, int level, bt_node *nd)
{
    uint8_t *p = loc ? vc->bt->pg.page(vc->bt->pg.ctx, loc) : NULL;
    const char *why;

    if (!p) {
        eng_validate_error(vc->v, "btree: child %#llx of bucket %#llx is not a bucket",
                           LOC(loc), LOC(parent));
        return 1;
    }
    if ((why = hdr_problem(p)) != NULL) {
        eng_validate_error(vc->v, "btree bucket %#llx: %s", LOC(loc), why);
        return 1;
    }
    if (node_load(vc->bt, loc, nd, NULL) != 0) /* cannot fail: checked above */
        return 1;
    if ((level >= 0 && nd->level != (unsigned)level) || get64(p + H_PARENT) != parent) {
        eng_validate_error(vc->v, "btree bucket %#llx: level %u parent %#llx, expected "
                           "level %d parent %#llx", LOC(loc), nd->level,
                           LOC(get64(p + H_PARENT)), level, LOC(parent));
        return 1;
    }
    if (nd->level ? get64(p + H_NEXT) || get64(p + H_PREV) : get64(p + H_RIGHT) != 0)
        eng_validate_error(vc->v, "btree bucket %#llx: %s", LOC(loc),
                           nd->level ? "internal bucket with sibling links"
                                     : "leaf with a right child");
    return 0;
}

/* Slot bounds, key overlap and free-space accounting. */
static int val_slots(bt_vctx *vc, const bt_node *nd)
{
    size_t sum = 0;
    const char *why;

    memset(vc->used, 0, sizeof vc->used);
    for (unsigned i = 0; i < nd->n; i++) {
        const uint8_t *s = nd->p + BK_HDR + i * BK_SLOT;
        unsigned kofs = get16(s + S_KOFS), klen = get16(s + S_KLEN);
        if ((why = slot_problem(nd, i)) != NULL) {
            eng_validate_error(vc->v, "btree bucket %#llx slot %u: %s", LOC(nd->loc), i, why);
            return 1;
        }
        for (unsigned b = kofs; b < kofs + klen; b++) {
            if (vc->used[b]++) {
                eng_validate_error(vc->v, "btree bucket %#llx slot %u: key overlaps another",
                                   LOC(nd->loc), i);
                return 1;
            }
        }
        sum += klen;
    }
    if (sum + nd->garbage != MM_BUCKET_SIZE - nd->top)
        eng_validate_error(vc->v, "btree bucket %#llx: keys %zu + garbage %u != key area %u",
                           LOC(nd->loc), sum, nd->garbage, MM_BUCKET_SIZE - nd->top);
    return 0;
}

/* Entries strictly increasing and inside [lo, hi). */
static void val_order(bt_vctx *vc, const bt_node *nd, const bt_bound *lo, const bt_bound *hi)
{
    bt_item a = {NULL, 0, 0, 0}, b;

    for (unsigned i = 0; i < nd->n; i++) {
        if (node_ent(nd, i, &b, NULL) != 0) /* cannot fail: val_slots checked */
            return;
        if (i > 0 && item_cmp(&a, b.key, b.klen, b.rid) >= 0)
            eng_validate_error(vc->v, "btree bucket %#llx: slot %u out of order",
                               LOC(nd->loc), i);
        if ((i == 0 && lo->key && item_cmp(&b, lo->key, lo->klen, lo->rid) < 0) ||
            (i == nd->n - 1 && hi->key && item_cmp(&b, hi->key, hi->klen, hi->rid) >= 0))
            eng_validate_error(vc->v, "btree bucket %#llx: slot %u outside its "
                               "parent's separators", LOC(nd->loc), i);
        a = b;
    }
}

static void val_leaf(bt_vctx *vc, const bt_node *nd)
{
    if (nd->n == 0 && nd->loc != vc->root)
        eng_validate_error(vc->v, "btree leaf %#llx: empty", LOC(nd->loc));
    vc->entries += nd->n;
    if (vc->nleaves == vc->cap) {
        size_t cap = vc->cap ? vc->cap * 2 : 64;
        mm_bt_loc *l = realloc(vc->leaves, cap * sizeof *l);
        if (!l) {
            vc->rc = MD_ENOMEM;
            return;
        }
        vc->leaves = l;
        vc->cap = cap;
    }
    vc->leaves[vc->nleaves++] = nd->loc;
}

static void val_children(bt_vctx *vc, const bt_node *nd, const bt_bound *lo,
                         const bt_bound *hi)
{
    mm_bt_loc child;
    bt_bound clo = *lo, chi;
    bt_item s;
    bool dup;

    for (unsigned j = 0; j <= nd->n && !vc->rc; j++) {
        if (node_child(nd, j, &child, NULL) != 0) {
            eng_validate_error(vc->v, "btree bucket %#llx: bad child %u", LOC(nd->loc), j);
            continue;
        }
        if (child_repeats(nd, j, child, &dup) != 0 || dup) {
            eng_validate_error(vc->v, "btree bucket %#llx: child %u repeats", LOC(nd->loc), j);
            continue;
        }
        chi = *hi;
        if (j < nd->n && node_ent(nd, j, &s, NULL) == 0) /* val_slots checked it */
            chi = (bt_bound){s.key, s.klen, s.rid};
        val_bucket(vc, child, nd->loc, (int)nd->level - 1, &clo, &chi);
        clo = chi;
    }
}

static void val_bucket(bt_vctx *vc, mm_bt_loc loc, mm_bt_loc parent, int level,
                       const bt_bound *lo, const bt_bound *hi)
{
    bt_node nd;

    if (val_header(vc, loc, parent, level, &nd) || val_slots(vc, &nd))
        return;
    val_order(vc, &nd, lo, hi);
    if (nd.level == 0)
        val_leaf(vc, &nd);
    else
        val_children(vc, &nd, lo, hi);
}

/* The sibling chain must list exactly the leaves, in key order. */
static void val_chain(bt_vctx *vc)
{
    for (size_t i = 0; i < vc->nleaves; i++) {
        const uint8_t *p = vc->bt->pg.page(vc->bt->pg.ctx, vc->leaves[i]);
        mm_bt_loc prev = i ? vc->leaves[i - 1] : 0;
        mm_bt_loc next = i + 1 < vc->nleaves ? vc->leaves[i + 1] : 0;
        if (get64(p + H_PREV) != prev || get64(p + H_NEXT) != next)
            eng_validate_error(vc->v, "btree leaf %#llx: sibling links %#llx/%#llx, expected "
                               "%#llx/%#llx", LOC(vc->leaves[i]), LOC(get64(p + H_PREV)),
                               LOC(get64(p + H_NEXT)), LOC(prev), LOC(next));
    }
}

int mm_bt_validate(mm_bt *bt, eng_validate *v)
{
    bt_bound none = {NULL, 0, 0};
    bt_vctx *vc;
    int rc, errors;

    assert(bt && v);
    if (!(vc = calloc(1, sizeof *vc)))
        return MD_ENOMEM;
    vc->bt = bt;
    vc->v = v;
    vc->root = bt->pg.get_root(bt->pg.ctx);
    errors = v->nerrors;
    if (vc->root)
        val_bucket(vc, vc->root, 0, -1, &none, &none);
    if (!vc->rc)
        val_chain(vc);
    if (!vc->rc && v->nerrors == errors && mm_bt_entries(bt) != vc->entries)
        eng_validate_error(v, "btree: leaf chain count differs from tree count %lld",
                           (long long)vc->entries);
    rc = vc->rc;
    free(vc->leaves);
    free(vc);
    return rc;
}
