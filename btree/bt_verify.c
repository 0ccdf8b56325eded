/*
 * bt_verify.c -- the verifier: walks a whole tree (reading pages that are
 * not in memory without keeping them) and checks
 *
 *   - key order: within pages, against the parent's bounds, across leaves;
 *   - no empty page below the root, and each leaf's kept image size
 *     (leaf_size) equal to its cells counted;
 *   - count and data size against the tree's counters, and the page
 *     counts and live block bytes (collStats) against theirs;
 *   - checksums: every reachable block is read back and checked;
 *   - blocks: every reachable block (pages and overflow values) is
 *     reachable exactly once, none overlaps the avail or discard extents,
 *     and reachable ∪ avail ∪ discard tiles the file (invariant 2).
 *
 * Problems are reported with eng_validate_error(); a checksum mismatch is
 * reported naming the file and offset, never a crash.
 */
#include <stdlib.h>
#include <string.h>

#include "bt_int.h"

typedef struct vctx {
    bt_tree *t;
    eng_validate *v;
    bt_extlist used;
    bool have_prev;
    uint8_t *prev;
    uint32_t plen;
    eng_rid prid;
    int64_t count, data;
    int64_t pages[3], raw, disk; /* leaf, internal, overflow; live bytes */
} vctx;

static void use_block(vctx *x, const bt_addr *a)
{
    uint8_t *img;
    md_error err;
    if (!a->off)
        return;
    if (bt_ext_overlaps(&x->used, a->off, a->size)) {
        eng_validate_error(x->v, "%s: block at %llu is reachable twice", x->t->blk.path,
                           (unsigned long long)a->off);
        return;
    }
    bt_ext_add(&x->used, a->off, a->size);
    if (bt_ext_overlaps(&x->t->blk.avail, a->off, a->size) ||
        bt_ext_overlaps(&x->t->blk.discard, a->off, a->size))
        eng_validate_error(x->v, "%s: block at %llu is in use and free", x->t->blk.path,
                           (unsigned long long)a->off);
    if (bt_block_read(&x->t->blk, a, &img, &err) != 0) {
        eng_validate_error(x->v, "%s", err.message);
    } else {
        uint32_t mem_size, disk_size;
        memcpy(&mem_size, img + 16, 4);
        memcpy(&disk_size, img + 28, 4);
        x->raw += mem_size;
        x->disk += disk_size;
        free(img);
    }
}

static void check_leaf_order(vctx *x, const bt_ent *en)
{
    if (x->have_prev &&
        eng_key_cmp(x->prev, x->plen, x->prid, en->key, en->klen, en->rid) >= 0)
        eng_validate_error(x->v, "%s: keys out of order at rid %lld", x->t->ident,
                           (long long)en->rid);
    free(x->prev);
    x->prev = malloc(en->klen + 1);
    if (x->prev)
        memcpy(x->prev, en->key, en->klen);
    x->plen = en->klen;
    x->prid = en->rid;
    x->have_prev = x->prev != NULL;
}

static void verify_page(vctx *x, bt_page *p, const bt_ent *lo, const bt_ent *hi, bool root);

static void verify_child(vctx *x, bt_page *p, size_t i, const bt_ent *lo, const bt_ent *hi)
{
    bt_ent *en = &p->e[i];
    bt_page *c = en->child;
    md_error err;
    if (en->addr.off && !(c && c->dirty))
        use_block(x, &en->addr);
    else if (en->addr.off)
        use_block(x, &en->addr); /* the stale image is still allocated */
    if (!c && bt_page_read(x->t, &en->addr, &c, &err) != 0) {
        eng_validate_error(x->v, "%s", err.message);
        return;
    }
    verify_page(x, c, i ? en : lo, i + 1 < p->n ? &p->e[i + 1] : hi, false);
    if (!en->child)
        bt_page_free(x->t, c);
}

static void verify_page(vctx *x, bt_page *p, const bt_ent *lo, const bt_ent *hi, bool root)
{
    if (!root && p->n == 0)
        eng_validate_error(x->v, "%s: empty non-root page", x->t->ident);
    x->pages[p->type == BT_PAGE_LEAF ? 0 : 1]++;
    if (p->type == BT_PAGE_LEAF && p->leaf_size != bt_page_image_size(x->t, p))
        eng_validate_error(x->v, "%s: leaf image size %zu kept, %zu counted", x->t->ident,
                           p->leaf_size, bt_page_image_size(x->t, p));
    for (size_t i = 0; i < p->n; i++) {
        bt_ent *en = &p->e[i];
        bool skip = p->type == BT_PAGE_INT && i == 0;
        if (!skip && lo && eng_key_cmp(en->key, en->klen, en->rid, lo->key, lo->klen,
                                       lo->rid) < 0)
            eng_validate_error(x->v, "%s: key below its parent's bound", x->t->ident);
        if (hi && eng_key_cmp(en->key, en->klen, en->rid, hi->key, hi->klen, hi->rid) >= 0)
            eng_validate_error(x->v, "%s: key above its parent's bound", x->t->ident);
        if (i > 1 && eng_key_cmp(p->e[i - 1].key, p->e[i - 1].klen, p->e[i - 1].rid, en->key,
                                 en->klen, en->rid) >= 0)
            eng_validate_error(x->v, "%s: page entries out of order", x->t->ident);
        if (p->type == BT_PAGE_INT) {
            verify_child(x, p, i, lo, hi);
            continue;
        }
        check_leaf_order(x, en);
        if (en->addr.off)
            use_block(x, &en->addr);
        x->pages[2] += bt_ent_is_ovfl(x->t, en);
        x->count++;
        x->data += x->t->kind == BT_RS ? en->vlen : en->klen + 8;
    }
}

static void verify_tiling(vctx *x)
{
    bt_block *b = &x->t->blk;
    uint64_t total = 0;
    for (size_t i = 0; i < x->used.n; i++)
        total += x->used.v[i].size;
    for (size_t i = 0; i < b->avail.n; i++) {
        total += b->avail.v[i].size;
        if (bt_ext_overlaps(&b->discard, b->avail.v[i].off, b->avail.v[i].size))
            eng_validate_error(x->v, "%s: avail and discard overlap", b->path);
    }
    for (size_t i = 0; i < b->discard.n; i++)
        total += b->discard.v[i].size;
    if (total != b->file_size - BT_ALLOC)
        eng_validate_error(x->v, "%s: blocks cover %llu bytes of %llu", b->path,
                           (unsigned long long)total,
                           (unsigned long long)(b->file_size - BT_ALLOC));
}

/* Walk the whole tree into x; false if the root cannot be read. */
static bool walk(vctx *x)
{
    bt_tree *t = x->t;
    bt_page *root = t->root;
    md_error err;
    use_block(x, &t->root_addr);
    if (!root && bt_page_read(t, &t->root_addr, &root, &err) != 0) {
        eng_validate_error(x->v, "%s", err.message);
        return false;
    }
    verify_page(x, root, NULL, NULL, true);
    if (!t->root)
        bt_page_free(t, root);
    return true;
}

static void check_counters(vctx *x)
{
    bt_tree *t = x->t;
    if (x->count != t->count || (t->kind == BT_RS && x->data != t->data_size))
        eng_validate_error(x->v, "%s: %lld entries of %lld bytes, counters say %lld and %lld",
                           t->ident, (long long)x->count, (long long)x->data,
                           (long long)t->count, (long long)t->data_size);
    if (x->pages[0] != t->pages_leaf || x->pages[1] != t->pages_int ||
        x->pages[2] != t->pages_ovfl)
        eng_validate_error(x->v, "%s: %lld leaf, %lld internal, %lld overflow pages, "
                           "counters say %lld, %lld, %lld", t->ident,
                           (long long)x->pages[0], (long long)x->pages[1],
                           (long long)x->pages[2], (long long)t->pages_leaf,
                           (long long)t->pages_int, (long long)t->pages_ovfl);
    if (x->raw != t->live_raw || x->disk != t->live_disk)
        eng_validate_error(x->v, "%s: blocks hold %lld bytes in %lld, counters say %lld in %lld",
                           t->ident, (long long)x->raw, (long long)x->disk,
                           (long long)t->live_raw, (long long)t->live_disk);
}

int bt_verify_tree(bt_tree *t, eng_validate *v)
{
    vctx x = {.t = t, .v = v};
    int before = v->nerrors;
    if (walk(&x)) {
        check_counters(&x);
        verify_tiling(&x);
    }
    free(x.prev);
    bt_ext_free(&x.used);
    return v->nerrors - before;
}

/* Set the page counts and live bytes from a walk (for checkpoint entries
 * written before they were kept); a damaged tree is MD_ECORRUPT. */
int bt_tree_recount(bt_tree *t, md_error *err)
{
    eng_validate v;
    vctx x = {.t = t, .v = &v};
    eng_validate_init(&v, true);
    bool ok = walk(&x) && v.nerrors == 0;
    if (ok) {
        t->pages_leaf = x.pages[0], t->pages_int = x.pages[1], t->pages_ovfl = x.pages[2];
        t->live_raw = x.raw, t->live_disk = x.disk;
    }
    free(x.prev);
    bt_ext_free(&x.used);
    eng_validate_cleanup(&v);
    return ok ? 0 : ENG_CORRUPT(err, "btree: %s: damaged tree", t->ident);
}

int bt_verify_engine(eng_engine *eh, eng_validate *v)
{
    bt_engine *e = (bt_engine *)eh;
    int n = 0;
    /* as bt_rs_validate: nothing may move while the walk reads pages in,
     * so the exclusive latch is held across it, not only the fold */
    bt_latch_excl(e);
    (void)bt_fold_all(e, NULL); /* the counters include unfolded commits */
    for (size_t i = 0; i < e->ntrees; i++)
        if (e->trees[i]->live)
            n += bt_verify_tree(e->trees[i], v);
    bt_unlatch(e);
    return n;
}
