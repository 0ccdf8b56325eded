/*
 * bt_tree.c -- the B+tree: search, insert, delete, split, merge of emptied
 * pages, positions (cursor paths), reconciliation of a whole tree and
 * eviction.
 *
 * Entries are (key, rid) pairs ordered by eng_key_cmp.  An internal page's
 * slot i covers keys >= its entry's key and < the next entry's key; slot 0
 * covers everything below slot 1 (its key is ignored by searches).
 *
 *        [ -inf | k5 | k9 ]          internal: children by slot
 *         /       |      \
 *   [k1 k3]   [k5 k7]   [k9 k11]     leaves: (key, rid) -> value
 *
 * A leaf larger than its page maximum splits in two (at 90% of the bytes
 * when the insert was an append, else in the middle) and the new right page
 * is linked into the parent, which may split in turn; a root split grows the
 * tree.  A leaf emptied by deletes is unlinked from its parent and its
 * block freed; one shrunk below a quarter of its maximum merges with a
 * sibling when both fit in three quarters; a root left with one child is
 * replaced by it.
 *
 * Positions (bt_pos) hold page pointers: they are valid until the tree's
 * engine generation changes (any write, split, eviction).  Cursors keep the
 * key and re-seek after that.
 *
 * Threads: searches and positions run under the engine's shared latch and
 * may only load pages (cached_page); everything that changes the tree's
 * shape or entries (put, delete, split, merge, reconcile, evict) runs under
 * the exclusive latch (bt_txn.c).
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "bt_int.h"

static void set_dirty(bt_tree *t, bt_page *p)
{
    if (!p->dirty) {
        p->dirty = true;
        t->eng->dirty_bytes += p->mem;
    }
    t->modified = true;
}

int bt_tree_init_empty(bt_tree *t)
{
    t->root = bt_page_new(BT_PAGE_LEAF);
    if (!t->root)
        return MD_ENOMEM;
    t->pages_leaf = 1;
    set_dirty(t, t->root);
    return 0;
}

/* The page at *a, read into *slot unless it is cached there already, and
 * marked as just used.  Readers under the shared latch may race to load
 * the same page: e->page_mu makes one of them read it, and the pointer is
 * published with release/acquire so the others see a complete page. */
static int cached_page(bt_tree *t, const bt_addr *a, bt_page **slot, bt_page **out,
                       md_error *err)
{
    bt_engine *e = t->eng;
    bt_page *p = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (!p) {
        int rc = 0;
        pthread_mutex_lock(&e->page_mu);
        if (!(p = __atomic_load_n(slot, __ATOMIC_ACQUIRE)) &&
            (rc = bt_page_read(t, a, &p, err)) == 0)
            __atomic_store_n(slot, p, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&e->page_mu);
        if (rc)
            return rc;
    }
    *out = p;
    return 0;
}

static int tree_root(bt_tree *t, bt_page **out, md_error *err)
{
    return cached_page(t, &t->root_addr, &t->root, out, err);
}

int bt_child(bt_tree *t, bt_ent *en, bt_page **out, md_error *err)
{
    return cached_page(t, &en->addr, &en->child, out, err);
}

static int ent_cmp(const bt_ent *en, const uint8_t *key, uint32_t klen, eng_rid rid)
{
    return eng_key_cmp(en->key, en->klen, en->rid, key, klen, rid);
}

/* First slot >= key (leaf), or the child slot covering key (internal).
 * With `tail` (writes, whose keys are mostly appends: RecordIds,
 * increasing index keys) the last entry is compared first: a key past it
 * is answered by that one comparison, as WiredTiger's append search does;
 * otherwise it bounds the binary search.  Reads, whose keys fall anywhere,
 * do not pay for that comparison. */
static inline size_t page_find(const bt_page *p, const uint8_t *key, uint32_t klen,
                               eng_rid rid, bool tail)
{
    size_t lo = p->type == BT_PAGE_INT ? 1 : 0, hi = p->n;
    uint64_t kp = bt_key_prefix(key, klen);
    if (tail && hi > lo) {
        const bt_ent *en = &p->e[hi - 1];
        int c = bt_key_cmp_p(en->kpfx, en->key, en->klen, en->rid, kp, key, klen, rid);
        if (c < 0 || (c == 0 && p->type == BT_PAGE_INT))
            return p->type == BT_PAGE_INT ? hi - 1 : hi;
        hi--; /* the last entry is >= key (leaf), > key (internal) */
    }
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const bt_ent *en = &p->e[mid];
        int c = bt_key_cmp_p(en->kpfx, en->key, en->klen, en->rid, kp, key, klen, rid);
        if (c < 0 || (c == 0 && p->type == BT_PAGE_INT))
            lo = mid + 1;
        else
            hi = mid;
    }
    return p->type == BT_PAGE_INT ? lo - 1 : lo;
}

/* Inlined into bt_search and bt_search_write, each with its page_find. */
static inline __attribute__((always_inline)) int search(bt_tree *t, const uint8_t *key,
                                                        uint32_t klen, eng_rid rid, bt_pos *pos,
                                                        bool *exact, bool tail, md_error *err)
{
    bt_page *p;
    int rc = tree_root(t, &p, err);
    if (rc)
        return rc;
    pos->depth = 0;
    for (;;) {
        if (pos->depth >= BT_MAX_DEPTH)
            return ENG_CORRUPT(err, "btree: %s: tree too deep", t->blk.path);
        size_t s = page_find(p, key, klen, rid, tail);
        pos->pg[pos->depth] = p;
        pos->slot[pos->depth++] = s;
        if (p->type == BT_PAGE_LEAF)
            break;
        if ((rc = bt_child(t, &p->e[s], &p, err)) != 0)
            return rc;
    }
    if (exact)
        *exact = pos->slot[pos->depth - 1] < p->n &&
                 ent_cmp(&p->e[pos->slot[pos->depth - 1]], key, klen, rid) == 0;
    return 0;
}

int bt_search(bt_tree *t, const uint8_t *key, uint32_t klen, eng_rid rid, bt_pos *pos,
              bool *exact, md_error *err)
{
    return search(t, key, klen, rid, pos, exact, false, err);
}

int bt_search_write(bt_tree *t, const uint8_t *key, uint32_t klen, eng_rid rid, bt_pos *pos,
                    bool *exact, md_error *err)
{
    return search(t, key, klen, rid, pos, exact, true, err);
}

bt_ent *bt_pos_ent(bt_pos *pos)
{
    bt_page *p = pos->pg[pos->depth - 1];
    size_t s = pos->slot[pos->depth - 1];
    return s < p->n ? &p->e[s] : NULL;
}

/* Descend from level d (slot already set) to a leaf, leftmost or rightmost. */
static int descend(bt_tree *t, bt_pos *pos, int d, bool right, md_error *err)
{
    while (pos->pg[d]->type == BT_PAGE_INT) {
        bt_page *c;
        int rc = bt_child(t, &pos->pg[d]->e[pos->slot[d]], &c, err);
        if (rc)
            return rc;
        if (++d >= BT_MAX_DEPTH)
            return ENG_CORRUPT(err, "btree: %s: tree too deep", t->blk.path);
        pos->pg[d] = c;
        pos->slot[d] = right && c->n ? c->n - 1 : 0;
        pos->depth = d + 1;
    }
    return 0;
}

/* If the leaf slot is past the leaf's end, move to the next leaf's first
 * entry; MD_NOTFOUND (position unchanged) at the end of the tree. */
int bt_pos_normalize(bt_tree *t, bt_pos *pos, md_error *err)
{
    int d = pos->depth - 1;
    if (pos->slot[d] < pos->pg[d]->n)
        return 0;
    while (--d >= 0 && pos->slot[d] + 1 >= pos->pg[d]->n)
        ;
    if (d < 0)
        return MD_NOTFOUND;
    pos->slot[d]++;
    return descend(t, pos, d, false, err);
}

int bt_pos_next(bt_tree *t, bt_pos *pos, md_error *err)
{
    pos->slot[pos->depth - 1]++;
    int rc = bt_pos_normalize(t, pos, err);
    if (rc == MD_NOTFOUND) /* rest past the end of the last leaf */
        pos->slot[pos->depth - 1] = pos->pg[pos->depth - 1]->n;
    return rc;
}

int bt_pos_prev(bt_tree *t, bt_pos *pos, md_error *err)
{
    int d = pos->depth - 1;
    if (pos->slot[d] > 0) {
        pos->slot[d]--;
        return 0;
    }
    while (--d >= 0 && pos->slot[d] == 0)
        ;
    if (d < 0)
        return MD_NOTFOUND;
    pos->slot[d]--;
    return descend(t, pos, d, true, err);
}

/* The last entry of the tree. */
int bt_pos_last(bt_tree *t, bt_pos *pos, md_error *err)
{
    bt_page *p;
    int rc = tree_root(t, &p, err);
    if (rc)
        return rc;
    pos->pg[0] = p;
    pos->slot[0] = p->n ? p->n - 1 : 0;
    pos->depth = 1;
    if ((rc = descend(t, pos, 0, true, err)) != 0)
        return rc;
    return pos->pg[pos->depth - 1]->n ? 0 : MD_NOTFOUND;
}

int bt_get(bt_tree *t, const uint8_t *key, uint32_t klen, eng_rid rid, bt_ent **out,
           md_error *err)
{
    return bt_get_near(t, NULL, key, klen, rid, out, err);
}

/* bt_get, starting from the leaf the last search through h ended on: when
 * no page has changed or gone since (h->gen is still the engine's
 * generation) and the key lies within that leaf's entries, only the leaf
 * is searched -- an index scan fetches RecordIds in order, and neighbours
 * share leaves, as WiredTiger's cursor searches its current page first.
 * Else a full search, which leaves its leaf in h.  h NULL: only the full
 * search (bt_get).  Under the shared latch. */
int bt_get_near(bt_tree *t, bt_leaf_hint *h, const uint8_t *key, uint32_t klen, eng_rid rid,
                bt_ent **out, md_error *err)
{
    uint64_t gen = h ? __atomic_load_n(&t->eng->gen, __ATOMIC_ACQUIRE) : 0;
    bt_page *p = h ? h->leaf : NULL;
    if (p && h->tree == t && h->gen == gen) {
        size_t s = h->slot + 1;
        if (s < p->n && ent_cmp(&p->e[s], key, klen, rid) == 0) { /* the next one */
            h->slot = s;
            *out = &p->e[s];
            return 0;
        }
        if (p->n && ent_cmp(&p->e[0], key, klen, rid) <= 0 &&
            ent_cmp(&p->e[p->n - 1], key, klen, rid) >= 0) { /* in this leaf, if anywhere */
            h->slot = s = page_find(p, key, klen, rid, false);
            if (s >= p->n || ent_cmp(&p->e[s], key, klen, rid) != 0)
                return MD_NOTFOUND;
            *out = &p->e[s];
            return 0;
        }
    }
    bt_pos pos;
    bool exact;
    int rc = bt_search(t, key, klen, rid, &pos, &exact, err);
    if (rc)
        return rc;
    if (h)
        *h = (bt_leaf_hint){.tree = t, .leaf = pos.pg[pos.depth - 1],
                            .slot = pos.slot[pos.depth - 1], .gen = gen};
    if (!exact)
        return MD_NOTFOUND;
    *out = bt_pos_ent(&pos);
    return 0;
}

/* ---- split ------------------------------------------------------------------ */

/* Move p's entries [k, n) to a new page.  After an append the new page
 * will fill as p did: it gets p's capacity, so that it grows without a
 * realloc (an index leaf holds thousands of prefix-compressed keys).  For
 * a leaf, `left` is the size of cells [0, k): the cells that stay keep
 * their sizes, and of those that move only the first changes (it loses
 * its prefix and rid delta), so both exact sizes follow without counting
 * either half again. */
static bt_page *page_split_off(bt_tree *t, bt_page *p, size_t k, bool append, size_t left)
{
    bt_page *r = bt_page_new(p->type);
    size_t cap = append && p->cap > p->n - k + 16 ? p->cap : p->n - k + 16;
    if (!r || !(r->e = malloc(cap * sizeof *r->e))) {
        free(r);
        return NULL;
    }
    r->cap = cap;
    size_t moved_disk = 0, moved_mem = 0, first = 0;
    for (size_t i = k; i < p->n; i++) {
        moved_disk += bt_ent_disk(p, &p->e[i], t->ovfl_min);
        moved_mem += bt_ent_mem(&p->e[i]);
    }
    if (p->type == BT_PAGE_LEAF)
        first = bt_cell_size(t, p, k);
    memcpy(r->e, &p->e[k], (p->n - k) * sizeof *r->e);
    r->n = p->n - k;
    p->n = k;
    if (p->type == BT_PAGE_LEAF) {
        r->leaf_size = p->leaf_size - left - first + bt_cell_size(t, r, 0);
        p->leaf_size = BT_HDR + left;
    }
    p->disk_est -= moved_disk;
    r->disk_est += moved_disk;
    bt_page_charge(t, p, -(long)moved_mem);
    set_dirty(t, r);
    bt_page_charge(t, r, (long)moved_mem);
    set_dirty(t, p);
    if (r->type == BT_PAGE_LEAF)
        t->pages_leaf++;
    else
        t->pages_int++;
    return r;
}

/* The exact image size of a page: kept for leaves, counted for internal
 * pages (whose cells bt_ent_disk bounds; they are measured only here). */
static size_t page_size(bt_tree *t, bt_page *p)
{
    return p->type == BT_PAGE_LEAF ? p->leaf_size : bt_page_image_size(t, p);
}

/* Where to split: the first k whose cells [0, k) hold at least 90% of
 * the bytes after an append, else half; *left gets their size.  After an
 * append of a leaf the walk goes back from the end, so only the tenth that
 * moves is measured (the same k: cells [k, n) then hold at most the rest). */
static size_t split_point(bt_tree *t, bt_page *p, bool append, size_t *left)
{
    size_t total = page_size(t, p) - BT_HDR;
    size_t want = total * (append ? 9 : 5) / 10, acc = 0, k = 0;
    if (append && p->type == BT_PAGE_LEAF) {
        size_t right = 0, c;
        for (k = p->n; k > 0 && right + (c = bt_cell_size(t, p, k - 1)) <= total - want; k--)
            right += c;
        acc = total - right;
    } else {
        while (k < p->n && acc < want)
            acc += bt_cell_size(t, p, k++);
    }
    if (k == 0)
        acc += bt_cell_size(t, p, k++);
    if (k >= p->n)
        acc -= bt_cell_size(t, p, --k);
    *left = acc;
    return k;
}

/* Split pos->pg[d] and link the new page into its parent (or a new root). */
static int split(bt_tree *t, bt_pos *pos, int d, md_error *err)
{
    bt_page *p = pos->pg[d];
    bool append = pos->slot[d] + 1 >= p->n;
    size_t kept;
    size_t k = split_point(t, p, append, &kept);
    bt_page *r = page_split_off(t, p, k, append, kept);
    bt_ent sep;
    if (!r)
        return bt_nomem(err);
    if (bt_ent_set(&sep, r->e[0].key, r->e[0].klen, r->e[0].rid, NULL, 0, false))
        goto nomem;
    sep.child = r;
    if (d == 0) {
        bt_page *root = bt_page_new(BT_PAGE_INT);
        bt_ent left;
        if (!root || bt_ent_set(&left, NULL, 0, 0, NULL, 0, false)) {
            free(root);
            free(sep.key);
            goto nomem;
        }
        left.child = p;
        left.addr = t->root_addr;
        t->root_addr = (bt_addr){0};
        set_dirty(t, root);
        bt_page_insert_at(t, root, 0, &left);
        bt_page_insert_at(t, root, 1, &sep);
        t->root = root;
        t->pages_int++;
        return 0;
    }
    bt_page *parent = pos->pg[d - 1];
    if (bt_page_insert_at(t, parent, pos->slot[d - 1] + 1, &sep)) {
        free(sep.key);
        goto nomem;
    }
    set_dirty(t, parent);
    if (parent->disk_est > t->int_max && parent->n >= 4)
        return split(t, pos, d - 1, err);
    return 0;
nomem:
    /* put the entries back so that nothing is lost */
    for (size_t i = 0; i < r->n; i++)
        bt_page_insert_at(t, p, p->n, &r->e[i]);
    bt_page_charge(t, r, -(long)r->mem);
    if (r->type == BT_PAGE_LEAF)
        t->pages_leaf--;
    else
        t->pages_int--;
    free(r->e);
    free(r);
    return bt_nomem(err);
}

/* ---- insert, update, delete ------------------------------------------------- */

/* Split the leaf of pos when its exact image exceeds leaf_max. */
static int leaf_maybe_split(bt_tree *t, bt_pos *pos, md_error *err)
{
    bt_page *leaf = pos->pg[pos->depth - 1];
    if (leaf->leaf_size <= t->leaf_max || leaf->n < 2)
        return 0;
    return split(t, pos, pos->depth - 1, err);
}

/* Put entry *en at pos, found for its key (exact: the key is there).  The
 * page takes en's allocation when *taken turns true; before that the
 * caller keeps it. */
static int put_ent(bt_tree *t, bt_pos *pos, bool exact, bt_ent *en, int64_t *old,
                   bool *taken, md_error *err)
{
    *taken = false;
    bt_gen_bump(t->eng);
    bt_page *leaf = pos->pg[pos->depth - 1];
    size_t s = pos->slot[pos->depth - 1];
    if (old)
        *old = exact ? (int64_t)leaf->e[s].vlen : -1;
    if (exact) {
        t->pages_ovfl -= bt_ent_is_ovfl(t, &leaf->e[s]);
        bt_page_free_block(t, &leaf->e[s].addr); /* the old overflow value */
        bt_page_remove_at(t, leaf, s);
    }
    if (bt_page_insert_at(t, leaf, s, en))
        return bt_nomem(err);
    *taken = true;
    t->pages_ovfl += bt_ent_is_ovfl(t, en);
    set_dirty(t, leaf);
    return leaf_maybe_split(t, pos, err);
}

/* Put (key, rid) -> val at pos, a copy. */
static int put_at(bt_tree *t, bt_pos *pos, bool exact, const uint8_t *key, uint32_t klen,
                  eng_rid rid, const uint8_t *val, uint32_t vlen, bool has_val, int64_t *old,
                  md_error *err)
{
    bt_ent en;
    bool taken;
    if (bt_ent_set(&en, key, klen, rid, val, vlen, has_val))
        return bt_nomem(err);
    int rc = put_ent(t, pos, exact, &en, old, &taken, err);
    if (!taken)
        free(en.key);
    return rc;
}

int bt_put(bt_tree *t, const uint8_t *key, uint32_t klen, eng_rid rid, const uint8_t *val,
           uint32_t vlen, bool has_val, int64_t *old, md_error *err)
{
    bt_pos pos;
    bool exact;
    int rc = bt_search_write(t, key, klen, rid, &pos, &exact, err);
    if (rc)
        return rc;
    return put_at(t, &pos, exact, key, klen, rid, val, vlen, has_val, old, err);
}

static int shrink_root(bt_tree *t, md_error *err);

/* Unlink the empty page at level d from its parent, and so on upwards;
 * then shrink a root with a single child. */
static int unlink_empty(bt_tree *t, bt_pos *pos, int d, md_error *err)
{
    while (d > 0 && pos->pg[d]->n == 0) {
        bt_page *parent = pos->pg[d - 1];
        bt_ent *en = &parent->e[pos->slot[d - 1]];
        if (pos->pg[d]->type == BT_PAGE_LEAF)
            t->pages_leaf--;
        else
            t->pages_int--;
        bt_page_free_block(t, &en->addr);
        bt_page_free(t, en->child);
        bt_page_remove_at(t, parent, pos->slot[d - 1]);
        set_dirty(t, parent);
        d--;
    }
    return shrink_root(t, err);
}

/* Merge parent's leaves `left` and left + 1 when both fit in three
 * quarters of leaf_max (so the result does not split again soon): the
 * right page's entries move to the left page, the right page's block is
 * freed and its parent entry removed.  *merged says whether it happened. */
static int merge_pair(bt_tree *t, bt_page *parent, size_t left, bool *merged, md_error *err)
{
    bt_page *a, *b;
    int rc = bt_child(t, &parent->e[left], &a, err);
    *merged = false;
    if (rc == 0)
        rc = bt_child(t, &parent->e[left + 1], &b, err);
    if (rc)
        return rc;
    if (a->type != BT_PAGE_LEAF || b->type != BT_PAGE_LEAF ||
        page_size(t, a) + page_size(t, b) + 16 > t->leaf_max / 4 * 3)
        return 0;
    if (a->cap < a->n + b->n) {
        bt_ent *nv = realloc(a->e, (a->n + b->n) * sizeof *nv);
        if (!nv)
            return 0; /* no room to merge: the pages stay as they are */
        a->e = nv;
        a->cap = a->n + b->n;
    }
    for (size_t i = 0; i < b->n; i++)
        bt_page_insert_at(t, a, a->n, &b->e[i]); /* room reserved: cannot fail */
    b->n = 0;
    bt_page_free_block(t, &parent->e[left + 1].addr);
    bt_page_free(t, b);
    parent->e[left + 1].child = NULL;
    bt_page_remove_at(t, parent, left + 1);
    t->pages_leaf--;
    set_dirty(t, a);
    set_dirty(t, parent);
    *merged = true;
    return 0;
}

/* A leaf below a quarter of leaf_max merges with its left sibling, else
 * with its right one, when the pair fits (merge_pair). */
static int merge_small(bt_tree *t, bt_pos *pos, md_error *err)
{
    int d = pos->depth - 1;
    bt_page *parent = d > 0 ? pos->pg[d - 1] : NULL;
    bool merged = false;
    int rc = 0;
    if (!parent || parent->n < 2 || pos->pg[d]->disk_est >= t->leaf_max / 4)
        return 0;
    size_t s = pos->slot[d - 1];
    if (s > 0)
        rc = merge_pair(t, parent, s - 1, &merged, err);
    if (rc == 0 && !merged && s + 1 < parent->n)
        rc = merge_pair(t, parent, s, &merged, err);
    return rc == 0 && merged ? shrink_root(t, err) : rc;
}

/* A root with a single child is replaced by it. */
static int shrink_root(bt_tree *t, md_error *err)
{
    while (t->root->type == BT_PAGE_INT && t->root->n == 1) {
        bt_page *old = t->root, *child;
        int rc = bt_child(t, &old->e[0], &child, err);
        if (rc)
            return rc;
        bt_page_free_block(t, &t->root_addr);
        t->pages_int--;
        t->root_addr = old->e[0].addr;
        old->e[0].child = NULL;
        bt_page_free(t, old);
        t->root = child;
        t->modified = true;
    }
    return 0;
}

/* Does the leaf of pos (a search's path) hold the key's place?  The key
 * is at or after the leaf's first entry, and before the next entry of the
 * lowest ancestor that has one: a search would take the same path. */
static bool pos_covers(const bt_pos *pos, const uint8_t *key, uint32_t klen, eng_rid rid)
{
    int d = pos->depth - 1;
    if (d < 0)
        return false; /* no path */
    const bt_page *leaf = pos->pg[d];
    if (leaf->n == 0 || ent_cmp(&leaf->e[0], key, klen, rid) > 0)
        return false;
    for (int l = d - 1; l >= 0; l--) {
        const bt_page *p = pos->pg[l];
        if (pos->slot[l] + 1 < p->n)
            return ent_cmp(&p->e[pos->slot[l] + 1], key, klen, rid) > 0;
    }
    return true;
}

int bt_apply_near(bt_tree *t, bt_pos *hint, const uint8_t *key, uint32_t klen, eng_rid rid,
                  const uint8_t *val, uint32_t vlen, bool has_val, bool del, bt_ent *own,
                  bool *taken, md_error *err)
{
    int64_t shape = t->pages_leaf + t->pages_int;
    bool exact;
    int rc;
    if (taken)
        *taken = false;
    if (del) {
        hint->depth = 0; /* an unlink or merge may follow */
        rc = bt_del(t, key, klen, rid, NULL, err);
        return rc == MD_NOTFOUND ? 0 : rc;
    }
    if (!pos_covers(hint, key, klen, rid)) {
        if ((rc = bt_search_write(t, key, klen, rid, hint, &exact, err)) != 0) {
            hint->depth = 0;
            return rc;
        }
    } else {
        int d = hint->depth - 1;
        bt_page *leaf = hint->pg[d];
        size_t s = page_find(leaf, key, klen, rid, true); /* an append: one comparison */
        hint->slot[d] = s;
        exact = s < leaf->n && ent_cmp(&leaf->e[s], key, klen, rid) == 0;
    }
    if (own)
        rc = put_ent(t, hint, exact, own, NULL, taken, err);
    else
        rc = put_at(t, hint, exact, key, klen, rid, val, vlen, has_val, NULL, err);
    if (rc || t->pages_leaf + t->pages_int != shape)
        hint->depth = 0; /* split: the path changed */
    return rc;
}

int bt_del(bt_tree *t, const uint8_t *key, uint32_t klen, eng_rid rid, int64_t *old,
           md_error *err)
{
    bt_pos pos;
    bool exact;
    int rc = bt_search(t, key, klen, rid, &pos, &exact, err);
    if (rc)
        return rc;
    if (!exact)
        return MD_NOTFOUND;
    bt_gen_bump(t->eng);
    int d = pos.depth - 1;
    bt_page *leaf = pos.pg[d];
    if (old)
        *old = leaf->e[pos.slot[d]].vlen;
    t->pages_ovfl -= bt_ent_is_ovfl(t, &leaf->e[pos.slot[d]]);
    bt_page_free_block(t, &leaf->e[pos.slot[d]].addr);
    bt_page_remove_at(t, leaf, pos.slot[d]);
    set_dirty(t, leaf);
    if (leaf->n == 0)
        return unlink_empty(t, &pos, d, err);
    return merge_small(t, &pos, err);
}

/* ---- reconciliation and eviction -------------------------------------------- */

/* Write the dirty pages under p bottom-up; *written says whether p got a
 * new block (its parent is then dirty). */
static int reconcile(bt_tree *t, bt_page *p, bt_addr *addr, bool *written, md_error *err)
{
    int rc;
    *written = false;
    for (size_t i = 0; p->type == BT_PAGE_INT && i < p->n; i++) {
        bool w;
        if (p->e[i].child &&
            (rc = reconcile(t, p->e[i].child, &p->e[i].addr, &w, err)) != 0)
            return rc;
        if (p->e[i].child && w)
            set_dirty(t, p);
    }
    if (!p->dirty && addr->off)
        return 0;
    if ((rc = bt_page_write(t, p, addr, err)) != 0)
        return rc;
    *written = true;
    return 0;
}

int bt_reconcile_tree(bt_tree *t, md_error *err)
{
    bool w;
    if (!t->root)
        return 0;
    return reconcile(t, t->root, &t->root_addr, &w, err);
}

void bt_tree_free_pages(bt_tree *t)
{
    bt_page_free(t, t->root);
    t->root = NULL;
}

static bool has_children(const bt_page *p)
{
    for (size_t i = 0; p->type == BT_PAGE_INT && i < p->n; i++)
        if (p->e[i].child)
            return true;
    return false;
}

/* Evict children of p bottom-up until the cache is at `target`; dirty pages
 * only when `dirty_ok` (they are reconciled to new blocks first). */
static int evict_walk(bt_tree *t, bt_page *p, size_t target, bool dirty_ok, md_error *err)
{
    for (size_t i = 0; i < p->n && bt_cache_bytes(&t->eng->hdr) > (int64_t)target; i++) {
        bt_ent *en = &p->e[i];
        bt_page *c = en->child;
        if (!c)
            continue;
        int rc = c->type == BT_PAGE_INT ? evict_walk(t, c, target, dirty_ok, err) : 0;
        if (rc)
            return rc;
        if (has_children(c) || (c->dirty && !dirty_ok))
            continue;
        if (c->dirty) {
            if ((rc = bt_page_write(t, c, &en->addr, err)) != 0)
                return rc;
            set_dirty(t, p);
        }
        bt_page_free(t, c);
        en->child = NULL;
        t->eng->evictions++;
        bt_gen_bump(t->eng);
    }
    return 0;
}

/* Bring the cache down to `target` bytes: clean pages first, then dirty. */
int bt_evict(bt_engine *e, size_t target)
{
    md_error err;
    for (int pass = 0; pass < 2 && bt_cache_bytes(&e->hdr) > (int64_t)target; pass++) {
        for (size_t i = 0; i <= e->ntrees && bt_cache_bytes(&e->hdr) > (int64_t)target; i++) {
            bt_tree *t = i < e->ntrees ? e->trees[i] : e->meta;
            if (!t->root || t->root->type != BT_PAGE_INT)
                continue;
            int rc = evict_walk(t, t->root, target, pass == 1, &err);
            if (rc) {
                e->last_err = err;
                return rc;
            }
        }
    }
    return 0;
}
