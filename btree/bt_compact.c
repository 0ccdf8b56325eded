/*
 * bt_compact.c -- compact: give a collection's free space back to the file
 * system, as MongoDB's compact does on WiredTiger.
 *
 * Copy-on-write leaves a file with holes (freed blocks on avail) that only
 * new writes can fill.  Compaction rewrites a tree into a NEW file, depth
 * first (children before their parent, so the root comes last), with
 * nothing between the blocks, and switches to it at a checkpoint:
 *
 *   compact command ──> mark the collection's trees ──> commit
 *   ──> checkpoint: reconcile the tree, copy every page and overflow value
 *       to <ident>-<n>.bt, the tree now lives there ──> metadata entry
 *       names the new file ──> turtle ──> the old file is unlinked
 *
 * A crash before the turtle leaves the old checkpoint and the old file,
 * untouched (the new one is an orphan); after it, only the new file is
 * named.  RecordIds do not change.  Indexes are files of their own:
 * compact marks the collection's record store and every sorted store whose
 * ident is the collection's followed by ".$" (how query/ names indexes,
 * eng.h), which query/ rebuilds in the same transaction anyway.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bt_int.h"
#include "eng_log.h"

/* Copy the page at `from` (in t's file) and everything below it into nt's
 * file; *to gets the new address. */
static int copy_page(bt_tree *t, bt_tree *nt, const bt_addr *from, bt_addr *to, int depth,
                     md_error *err)
{
    bt_page *p;
    int rc;
    if (depth >= BT_MAX_DEPTH)
        return ENG_CORRUPT(err, "btree: %s: tree too deep", t->blk.path);
    if ((rc = bt_page_read(t, from, &p, err)) != 0)
        return rc;
    for (size_t i = 0; rc == 0 && i < p->n; i++) {
        bt_ent *en = &p->e[i];
        if (p->type == BT_PAGE_INT) {
            bt_addr na = {0};
            rc = copy_page(t, nt, &en->addr, &na, depth + 1, err);
            en->addr = na;
        } else {
            en->addr = (bt_addr){0}; /* bt_page_write writes the value anew */
        }
    }
    *to = (bt_addr){0};
    if (rc == 0)
        rc = bt_page_write(nt, p, to, err);
    bt_page_free(t, p);
    return rc;
}

/* Rewrite t into a new file; on failure t is unchanged (its pages may have
 * been written and dropped from memory, which changes nothing visible). */
static int tree_compact(bt_engine *e, bt_tree *t, md_error *err)
{
    bt_tree nt;
    bt_addr root = {0};
    int rc = bt_reconcile_tree(t, err);
    if (rc)
        return rc;
    bt_tree_free_pages(t); /* all clean now; the copy reads from disk */
    bt_gen_bump(e);
    nt = *t;
    nt.root = NULL;
    nt.live_raw = nt.live_disk = 0;
    if ((rc = bt_file_new(e, t, &nt.blk, nt.fname, sizeof nt.fname, err)) != 0)
        return rc;
    rc = copy_page(t, &nt, &t->root_addr, &root, 0, err);
    if (rc == 0)
        rc = bt_block_sync(&nt.blk, err);
    if (rc == 0)
        rc = bt_unlink_after_ckpt(e, t->fname, "") ? bt_nomem(err) : 0;
    if (rc) {
        unlink(nt.blk.path);
        bt_block_close(&nt.blk);
        return rc;
    }
    bt_block_close(&t->blk);
    t->blk = nt.blk;
    memcpy(t->fname, nt.fname, sizeof t->fname);
    t->root_addr = root;
    t->live_raw = nt.live_raw;
    t->live_disk = nt.live_disk;
    t->modified = true;
    return 0;
}

/* Called by a checkpoint before it writes anything: compact the marked
 * trees.  A failure leaves that tree as it was and is only reported. */
void bt_compact_pending(bt_engine *e)
{
    for (size_t i = 0; i < e->ntrees; i++) {
        bt_tree *t = e->trees[i];
        md_error err;
        if (!t->compact || !t->live)
            continue;
        t->compact = false;
        if (tree_compact(e, t, &err) != 0) {
            e->last_err = err;
            eng_log("btree: compact of %s failed: %s", t->ident, err.message);
        }
    }
}

/* Mark the collection and its indexes; the commit's checkpoint does the
 * work.  info gets nothing: MongoDB 3.x's reply was {ok: 1}. */
int bt_rs_compact(eng_rs *rs, eng_txn *txn, const eng_compact_opts *o, bson_t *info,
                  md_error *err)
{
    bt_engine *e = BT_ENG(rs);
    bt_tree *t = BT_TREE(rs);
    size_t il = strlen(t->ident);
    int rc = bt_txn_check(e, txn, err);
    if (rc)
        return rc;
    for (size_t i = 0; i < e->ntrees; i++) {
        bt_tree *x = e->trees[i];
        if (x == t || (x->kind == BT_SS && strncmp(x->ident, t->ident, il) == 0 &&
                       strncmp(x->ident + il, ".$", 2) == 0))
            x->compact = x->live;
    }
    e->ckpt_pending = true;
    return 0;
}
