/*
 * bt_int.h -- private structures and on-disk formats of the btree engine.
 *
 * Layers, bottom up:
 *   bt_block.c     files of 4 KB allocation units, checksummed blocks, extent
 *                  lists (alloc / avail / discard), best-fit allocation
 *   bt_compress.c  block compressors (none, snappy, zstd)
 *   bt_page.c      in-memory pages, reconciliation to disk images and back
 *   bt_tree.c      search, insert, delete, split, merge, positions, eviction
 *   bt_ckpt.c      checkpoints, the metadata tree, the turtle file, open
 *   bt_compact.c   compact: a tree rewritten into a new file at a checkpoint
 *   bt_log.c       the write-ahead log: commit records, group commit, recovery
 *   bt_txn.c       transactions: snapshots, update chains, conflicts, latch,
 *                  folds of committed versions into the pages
 *   bt_store.c     record and sorted stores, cursors over base + overlay
 *   bt_engine.c    the eng_ops table, catalog, create and drop
 *   bt_verify.c    the verifier
 *
 * ---- Concurrency (ops->concurrent, after WiredTiger) ------------------------
 * The pages (the "base") hold committed data only; a transaction's writes
 * are versions in per-tree overlays (bt_overlay: a skiplist of update
 * chains, newest first).  Commit stamps them under the engine latch held
 * shared and the commit mutex (one commit at a time: its log record, its
 * timestamp, its stamps, then the timestamp published) and leaves them
 * there, pending; a fold, under the exclusive latch, applies a tree's
 * pending versions to the base in key order (when the overlay reaches its
 * bound, at checkpoint, verify, and by an idle reader) and drops the
 * chains no snapshot needs; a version every snapshot sees becomes the page
 * entry itself (its allocation is laid out as one: key, then value), not a
 * copy.  Appends -- RecordIds, increasing index keys -- cost one
 * comparison where they are placed: an overlay's tails (bt_overlay.tail,
 * .last) and a write's page search (bt_search_write) check the end first.
 * Every read and write call holds the latch shared for its duration, so it
 * sees the base whole; readers resolve keys that have a chain through it
 * (their snapshot, or outside a transaction the latest published commit),
 * others read the base.  Nothing a reader returns points into a page
 * (copies), so eviction, splits, folds and checkpoints, all under the
 * exclusive latch, end no view.  Page-in happens under the shared latch
 * (e->page_mu, atomically published child pointers).  Creates, drops and
 * catalog writes commit under the exclusive latch.
 *
 *   thread ──shared latch──> base pages (read, page-in), overlays (read)
 *          ──+ t->ov.mu────> a tree's overlay (write: versions, conflicts)
 *   commit ──shared + commit_mu──> log record, ts, stamps, publish
 *          ──exclusive (when due)──> fold, checkpoint
 *
 * Invariants 5-8 are in bt_txn.c.
 *
 * ---- File ------------------------------------------------------------------
 * A file is a sequence of blocks, each a multiple of BT_ALLOC (4096) bytes.
 * Block 0 is the descriptor:
 *
 *   OFFSET SIZE FIELD
 *   0      4    magic 0x000ad1d0 ("minidoc btree")
 *   4      2    major version (1)
 *   6      2    minor version (0)
 *   8      4    crc32c of bytes [0, 16) with this field zeroed
 *   12     4    unused
 *
 * ---- Block (every page) ----------------------------------------------------
 * A 28-byte page header, a 12-byte block header, then the page body.  The 40
 * header bytes are never compressed; the body may be (flags).
 *
 *   OFFSET SIZE FIELD
 *   0      8    recno (unused, 0)
 *   8      8    write generation
 *   16     4    mem_size: 40 + uncompressed body length
 *   20     4    entries (overflow page: value length)
 *   24     1    type: 5 overflow, 6 internal, 7 leaf
 *   25     1    compressor of the body: 0 none, 1 snappy, 2 zstd
 *   26     2    unused
 *   28     4    disk_size: 40 + stored body length (block padded after it)
 *   32     4    crc32c of bytes [0, disk_size) with this field zeroed
 *   36     1    flags (1: checksum covers data)
 *   37     3    unused
 *   40     ...  body
 *
 * An address (in a parent cell, a metadata entry or the turtle) is 16 bytes:
 * offset u64, size u32 (allocated, a multiple of 4096), checksum u32.
 *
 * ---- Cells (uncompressed body) ---------------------------------------------
 * Every entry is (key bytes, rid) ordered by eng_key_cmp.  Record stores use
 * an empty key and rid = RecordId; sorted stores the encoded key and rid;
 * the metadata tree a string key and rid 0.  Integers are LEB128 varints.
 *
 *   leaf cell:     u8 type (0 no value, 1 inline value, 2 overflow value)
 *                  varint prefix (bytes shared with the previous key)
 *                  varint suffix length, suffix bytes
 *                  varint zigzag(rid delta from the previous cell's rid)
 *                  type 1: varint length, value bytes
 *                  type 2: 16-byte address, u32 value length
 *   internal cell: varint key length, key bytes, varint zigzag(rid),
 *                  16-byte child address
 *
 * Worked example: an index leaf holding ("abc", 7) and ("abd", 9):
 *   00 00 03 61 62 63 0e        type 0, prefix 0, "abc", zigzag(7) = 14
 *   00 02 01 64 04              type 0, prefix 2, "d", zigzag(9-7) = 4
 * 12 body bytes after the 40-byte header: mem_size 52, entries 2, type 7.
 *
 * ---- Log file (DIR/log/btlog.NNNNNNNNNN, bt_log.c) ---------------------------
 * A 32-byte file header, then records back to back.  A file ends where its
 * last record ends: a record that does not fit goes to the next file, and a
 * file is fsynced before the next one is created.
 *
 *   OFFSET SIZE FIELD
 *   0      8    magic "MDBTLOG1"
 *   8      4    file number (NNNNNNNNNN)
 *   12     4    version (1)
 *   16     8    file size limit when created
 *   24     4    crc32c of bytes [0, 24)
 *   28     4    unused
 *
 * ---- Log record: one committed transaction ----------------------------------
 *   OFFSET SIZE FIELD
 *   0      4    len: 24 + stored body length
 *   4      4    crc32c of bytes [0, len) with this field zeroed
 *   8      8    LSN: file number << 32 | offset of this record in the file
 *   16     4    uncompressed body length
 *   20     1    compressor of the body: 0 none, 1 snappy (raw if no shrink)
 *   21     3    unused
 *   24     ...  body: operations, in the order the transaction made them
 *
 *   op 1 put:    u8 1, varint identlen, ident, varint klen, key,
 *                varint zigzag(rid), u8 has_val, [varint vlen, value]
 *   op 2 delete: u8 2, varint identlen, ident, varint klen, key, varint zigzag(rid)
 *   op 3 create: u8 3, varint identlen, ident, u8 kind, varint n, compressor name
 *   op 4 drop:   u8 4, varint identlen, ident
 * The ident "" is the metadata tree (catalog entries "cat:<key>").
 *
 * Worked example: a txn inserting the 5-byte value 05 00 00 00 00 as rid 1
 * of "c", raw, at offset 32 of file 1 (LSN 0x0000000100000020):
 *   24 00 00 00  cc cc cc cc  20 00 00 00 01 00 00 00  0c 00 00 00  00 00 00 00
 *   01 01 63 00 02 01 05 05 00 00 00 00
 * (len 36, cc: the crc; body 12 bytes: put, ident "c", empty key,
 * zigzag(1) = 2, has_val 1, vlen 5, value).  All integers little-endian.
 *
 * ---- Invariants --------------------------------------------------------------
 * 1. A live block (reachable from the last checkpoint) is never overwritten:
 *    blocks freed since that checkpoint wait on `discard` until the turtle
 *    of the next one is written; blocks allocated and freed within one
 *    checkpoint interval go straight back to `avail`.
 * 2. reachable ∪ avail ∪ discard tiles [BT_ALLOC, file_size) exactly.
 * 3. Entries of a page are strictly increasing; a non-root page is never
 *    empty; an internal entry's key is <= every key below it.
 * 4. A dirty internal page's address is stale; a clean page's address holds
 *    its current image.  A page with an in-memory dirty child is not evicted.
 *    Pages change only under the exclusive latch (bt_txn.c invariant 7).
 */
#ifndef BT_INT_H
#define BT_INT_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "bt.h"

#define BT_ALLOC 4096u
#define BT_HDR 40u
#define BT_DESC_MAGIC 0x000ad1d0u
#define BT_PAGE_OVFL 5
#define BT_PAGE_INT 6
#define BT_PAGE_LEAF 7
#define BT_MAX_DEPTH 32

enum bt_comp_id { BT_COMP_NONE = 0, BT_COMP_SNAPPY = 1, BT_COMP_ZSTD = 2 };
enum bt_kind { BT_RS = 0, BT_SS = 1, BT_META = 2 };

/* ---- blocks (bt_block.c) -------------------------------------------------- */

typedef struct bt_addr {
    uint64_t off;  /* 0: none */
    uint32_t size;
    uint32_t cksum;
} bt_addr;

typedef struct bt_ext {
    uint64_t off, size;
} bt_ext;

/* A sorted list of non-overlapping extents, merged when adjacent. */
typedef struct bt_extlist {
    bt_ext *v;
    size_t n, cap;
} bt_extlist;

typedef struct bt_block {
    int fd;
    char path[4200];
    uint64_t file_size; /* allocation end */
    bt_extlist avail, alloc, discard;
    int64_t bytes_written, blocks_written; /* since open */
} bt_block;

int bt_ext_add(bt_extlist *l, uint64_t off, uint64_t size);
bool bt_ext_remove(bt_extlist *l, uint64_t off, uint64_t size);
bool bt_ext_overlaps(const bt_extlist *l, uint64_t off, uint64_t size);
void bt_ext_free(bt_extlist *l);
int bt_block_create(bt_block *b, const char *path, md_error *err);
int bt_block_open(bt_block *b, const char *path, uint64_t size, const uint8_t *avail,
                  size_t avail_len, md_error *err);
void bt_block_close(bt_block *b);
int bt_block_write(bt_block *b, uint8_t *img, uint32_t disk_size, bt_addr *out, md_error *err);
int bt_block_read(bt_block *b, const bt_addr *a, uint8_t **out, md_error *err);
void bt_block_free(bt_block *b, const bt_addr *a);
void bt_block_ckpt_done(bt_block *b);
int bt_block_sync(bt_block *b, md_error *err);
/* avail ∪ discard as a byte string of (off u64, size u64) pairs; caller frees. */
uint8_t *bt_block_ckpt_avail(bt_block *b, size_t *len);
void bt_addr_pack(uint8_t *p, const bt_addr *a);
void bt_addr_unpack(const uint8_t *p, bt_addr *a);

/* ---- compressors (bt_compress.c) ------------------------------------------ */

typedef struct bt_compressor {
    const char *name;
    int id;
    size_t (*pre_size)(size_t src_len);
    /* 0, or nonzero when compression failed or did not shrink (store raw) */
    int (*compress)(const uint8_t *src, size_t src_len, uint8_t *dst, size_t dst_cap,
                    size_t *result_len);
    int (*decompress)(const uint8_t *src, size_t src_len, uint8_t *dst, size_t dst_len,
                      size_t *result_len);
} bt_compressor;

const bt_compressor *bt_compressor_find(const char *name);
const bt_compressor *bt_compressor_by_id(int id);

/* ---- pages (bt_page.c) ---------------------------------------------------- */

typedef struct bt_page bt_page;

/* A leaf entry (key, rid) -> value, or an internal entry (key, rid) -> child.
 * `key` and `val` share one allocation owned by the entry. */
/* The first 8 bytes of a key, big-endian, zero-padded: two keys whose
 * prefixes differ compare as their prefixes do (eng_key_cmp's order). */
static inline uint64_t bt_key_prefix(const uint8_t *key, uint32_t klen)
{
    uint64_t v = 0;
    if (klen >= 8) {
        for (uint32_t i = 0; i < 8; i++) /* compiles to a load and a byte swap */
            v = v << 8 | key[i];
        return v;
    }
    for (uint32_t i = 0; i < klen; i++)
        v = v << 8 | key[i];
    return klen ? v << (8 * (8 - klen)) : 0; /* zero-padded */
}

/* eng_key_cmp((a, alen, arid), (key, klen, rid)) given both prefixes
 * (apfx, kp: bt_key_prefix): the prefixes decide when they differ; keys
 * of at most 8 bytes with equal prefixes differ only in length (the
 * padding is zeros), then rid.  Page entries and overlay chains keep
 * their key's prefix for it. */
static inline int bt_key_cmp_p(uint64_t apfx, const uint8_t *a, uint32_t alen, eng_rid arid,
                               uint64_t kp, const uint8_t *key, uint32_t klen, eng_rid rid)
{
    if (apfx != kp)
        return apfx < kp ? -1 : 1;
    if (alen <= 8 && klen <= 8) {
        if (alen != klen)
            return alen < klen ? -1 : 1;
        return arid != rid ? (arid < rid ? -1 : 1) : 0;
    }
    return eng_key_cmp(a, alen, arid, key, klen, rid);
}

typedef struct bt_ent {
    uint8_t *key;
    uint8_t *val;
    uint64_t kpfx; /* bt_key_prefix(key): most comparisons end here, without
                      following the key pointer */
    uint32_t klen, vlen;
    eng_rid rid;
    bool has_val;
    bt_addr addr;   /* internal: child block; leaf: overflow block or 0 */
    bt_page *child; /* internal: the child in memory or NULL */
} bt_ent;

struct bt_page {
    int type; /* BT_PAGE_LEAF or BT_PAGE_INT */
    bool dirty;
    bt_ent *e;
    size_t n, cap;
    size_t disk_est; /* upper bound of the uncompressed image */
    size_t leaf_size; /* leaf: the exact image size (BT_HDR + every cell as
                         reconciliation writes it, prefix compression
                         included), kept by bt_page_insert_at/remove_at */
    size_t mem;      /* bytes charged to the cache */
};

typedef struct bt_engine bt_engine;

/* ---- versions (bt_txn.c) ------------------------------------------------------ */

/* One version of a key, in a chain newest first.  txn_id 0 marks the base
 * image the chain started from; ts is the commit timestamp, 0 while the
 * writer has not committed.  present = false is a tombstone (or "absent"
 * for a base image).  The oldest version of a chain is visible to every
 * open snapshot (invariant 6).  The value lies in the same allocation,
 * after the record (one malloc per version); a sorted store's version
 * written by a transaction has a copy of its key before the record (koff
 * bytes, padded), so that the allocation, led by the key and holding the
 * value, has a page entry's layout: a fold gives it to the page instead of
 * copying it when the chain goes (bt_apply_near's `own`). */
typedef struct bt_upd {
    struct bt_upd *older;
    uint64_t txn_id;
    uint64_t ts;
    bool present;
    uint32_t koff; /* the allocation starts koff bytes before the record */
    uint32_t vlen;
    uint8_t *val; /* into this allocation; NULL when there is no value */
    union {
        size_t mod;              /* uncommitted: the writer's bt_mod index */
        struct bt_upd *retired;  /* in its overlay's retired list */
    };
} bt_upd;

#define BT_SKIP_MAX 24

/* A key's update chain: a node of its tree's overlay skiplist.  The key
 * lies in the same allocation, after the links.  pending: the newest
 * committed version is not in the base yet (the next fold applies it). */
typedef struct bt_chain {
    bt_upd *head;
    uint8_t *key; /* into this allocation */
    uint64_t kpfx; /* bt_key_prefix(key) */
    uint32_t klen;
    eng_rid rid;
    bool pending;
    int height;
    struct bt_chain *retired; /* unlinked, in its overlay's retired list */
    struct bt_chain *next[]; /* height links */
} bt_chain;

/* Overlays are folded into the base when they reach fold_at chains (at
 * least BT_FOLD_MIN; twice what the last fold left, so that chains a long
 * snapshot keeps do not make every commit fold), at checkpoint and
 * verify, and by a reader when no commit came for BT_FOLD_IDLE_MS and the
 * latch is free (looked at every BT_FOLD_IDLE reads of the thread). */
#define BT_FOLD_MIN 16
#define BT_FOLD_IDLE 64
#define BT_SPARE 8
#define BT_STRIPES 16

/* A tree's overlay: (key, rid) -> chain, ordered as the tree.  Changed
 * under the shared latch and mu (writes, commits' stamps, aborts), or
 * under the exclusive latch (folds, structural commits).  Read under the
 * shared latch alone: writers publish a link, a chain's head and a
 * version's timestamp with release stores (BT_ST) and readers load them
 * with acquire loads (BT_LD).  A link is set only once what it points to
 * is complete; a version or chain taken out under the shared latch keeps
 * its own links and goes on a retired list, freed by the next fold under
 * the exclusive latch, when no reader can still stand on it. */
#define BT_LD(x) __atomic_load_n(&(x), __ATOMIC_ACQUIRE)
#define BT_ST(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELEASE)
typedef struct bt_overlay {
    pthread_mutex_t mu;
    bool mu_ok;              /* mu initialized (bt_ov_init) */
    bt_chain *head[BT_SKIP_MAX];
    /* The end of each level: the link that holds its NULL (head[i] when
     * the level is empty; set by bt_ov_init), and the last chain of level
     * 0 (NULL: none).  A key past the last chain (an append: RecordIds,
     * increasing index keys) is placed with one comparison, without a
     * search. */
    bt_chain **tail[BT_SKIP_MAX];
    bt_chain *last;
    int top;                 /* levels in use: no chain is taller */
    size_t n;                /* chains (atomic: read without mu) */
    size_t pending;          /* chains with a committed version to apply */
    size_t fold_at;          /* fold at commit when n reaches it */
    bt_upd *retired_u;       /* versions taken out under the shared latch */
    bt_chain *retired_c;     /* chains unlinked under the shared latch */
    size_t nretired;         /* both (atomic: read without mu) */
} bt_overlay;

/* One file: a record store, a sorted store or the metadata tree. */
typedef struct bt_tree {
    bt_engine *eng;
    char ident[ENG_IDENT_MAX];
    char fname[ENG_IDENT_MAX * 3 + 32];
    int kind;
    bool live;
    bool modified; /* changed since the last checkpoint */
    int refs;
    bt_block blk;
    bt_addr root_addr;
    bt_page *root;
    const bt_compressor *comp;
    uint32_t leaf_max, int_max, ovfl_min;
    eng_rid next_rid;
    int64_t count, data_size;
    int64_t n_inserts, n_updates, bytes_written;
    int64_t upd_bytes; /* document bytes written by updates */
    /* The tree as it is now (pages in memory included), kept by every
     * split, unlink and put; persisted in the checkpoint entry. */
    int64_t pages_leaf, pages_int, pages_ovfl;
    /* Blocks the tree references (a dirty page's old block until it is
     * rewritten): sums of their mem_size and disk_size, for
     * compressionRatio. */
    int64_t live_raw, live_disk;
    bool unlink_now; /* an aborted create: its file is in no checkpoint */
    bool compact;    /* rewrite into a new file at the next checkpoint */
    bt_overlay ov;   /* versions: uncommitted, committed and not yet folded
                        into the pages, or kept for older snapshots */
    /* Capped record stores (bt_capped.c): the options, from the metadata
     * entry "rsopt:<ident>" (set under the exclusive latch), and the
     * changes to count and data_size made by the one transaction writing
     * to the store (cap_txn; the caller lets one at a time write), which
     * the committed counters above do not show yet. */
    bool capped;
    int64_t capped_size, capped_max;
    uint64_t cap_txn;
    int64_t cap_dcount, cap_dbytes;
} bt_tree;

bt_page *bt_page_new(int type);
void bt_page_free(bt_tree *t, bt_page *p);
int bt_ent_set(bt_ent *en, const uint8_t *key, uint32_t klen, eng_rid rid, const uint8_t *val,
               uint32_t vlen, bool has_val);
size_t bt_ent_disk(const bt_page *p, const bt_ent *en, uint32_t ovfl_min);
size_t bt_ent_mem(const bt_ent *en);
size_t bt_cell_size(const bt_tree *t, const bt_page *p, size_t i);
/* BT_HDR + every cell's bt_cell_size, counted (O(n)); for a leaf it equals
 * leaf_size, which the tree's verify checks. */
size_t bt_page_image_size(const bt_tree *t, const bt_page *p);
int bt_page_insert_at(bt_tree *t, bt_page *p, size_t i, bt_ent *en);
void bt_page_remove_at(bt_tree *t, bt_page *p, size_t i);
void bt_page_charge(bt_tree *t, bt_page *p, long delta);
int bt_page_read(bt_tree *t, const bt_addr *a, bt_page **out, md_error *err);
int bt_page_write(bt_tree *t, bt_page *p, bt_addr *addr, md_error *err);
void bt_page_free_block(bt_tree *t, bt_addr *a);
bool bt_ent_is_ovfl(const bt_tree *t, const bt_ent *en);

/* ---- trees (bt_tree.c) ---------------------------------------------------- */

/* A position: the path from the root to a leaf slot. */
typedef struct bt_pos {
    int depth;
    bt_page *pg[BT_MAX_DEPTH];
    size_t slot[BT_MAX_DEPTH];
} bt_pos;

int bt_tree_init_empty(bt_tree *t);
int bt_child(bt_tree *t, bt_ent *en, bt_page **out, md_error *err);
int bt_search(bt_tree *t, const uint8_t *key, uint32_t klen, eng_rid rid, bt_pos *pos,
              bool *exact, md_error *err);
/* bt_search for a write: a key past a page's last entry (an append) is
 * found with one comparison per level. */
int bt_search_write(bt_tree *t, const uint8_t *key, uint32_t klen, eng_rid rid, bt_pos *pos,
                    bool *exact, md_error *err);
int bt_pos_normalize(bt_tree *t, bt_pos *pos, md_error *err);
int bt_pos_next(bt_tree *t, bt_pos *pos, md_error *err);
int bt_pos_prev(bt_tree *t, bt_pos *pos, md_error *err);
int bt_pos_last(bt_tree *t, bt_pos *pos, md_error *err);
bt_ent *bt_pos_ent(bt_pos *pos);
/* Put (replacing an equal key) or delete one entry, with one search.
 * *old (NULL: not wanted) receives the replaced or deleted entry's value
 * length, or -1 when bt_put found none; bt_del answers MD_NOTFOUND then. */
int bt_put(bt_tree *t, const uint8_t *key, uint32_t klen, eng_rid rid, const uint8_t *val,
           uint32_t vlen, bool has_val, int64_t *old, md_error *err);
int bt_del(bt_tree *t, const uint8_t *key, uint32_t klen, eng_rid rid, int64_t *old,
           md_error *err);
int bt_get(bt_tree *t, const uint8_t *key, uint32_t klen, eng_rid rid, bt_ent **out,
           md_error *err);
/* Where a thread's last lookup in a tree ended: its leaf, valid while the
 * engine generation is still gen (bt_get_near). */
typedef struct bt_leaf_hint {
    const bt_tree *tree;
    bt_page *leaf;
    size_t slot; /* the entry found there: the next one is tried first */
    uint64_t gen;
} bt_leaf_hint;
int bt_get_near(bt_tree *t, bt_leaf_hint *h, const uint8_t *key, uint32_t klen, eng_rid rid,
                bt_ent **out, md_error *err);
/* A fold's put or delete, keys in increasing order: *hint (depth 0: none)
 * is the previous call's path, and a key within its leaf's range is
 * searched in that leaf alone.  A delete of an absent key does nothing.
 * Counters are the caller's (commit kept them).  A put with `own` puts
 * that entry, whose allocation (at own->key) it takes instead of copying
 * key and value; *taken (when own) tells whether the page has it. */
int bt_apply_near(bt_tree *t, bt_pos *hint, const uint8_t *key, uint32_t klen, eng_rid rid,
                  const uint8_t *val, uint32_t vlen, bool has_val, bool del, bt_ent *own,
                  bool *taken, md_error *err);
int bt_reconcile_tree(bt_tree *t, md_error *err);
void bt_tree_free_pages(bt_tree *t);
int bt_evict(bt_engine *e, size_t target);
/* A change of the base (under the exclusive latch), or a page image
 * written (its write generation): cursors re-find their place.  Atomic:
 * a cursor's get compares gen without the latch (ss_refresh); returns the
 * new value. */
#define bt_gen_bump(e) __atomic_add_fetch(&(e)->gen, 1, __ATOMIC_RELEASE)

/* ---- the engine (bt_engine.c, bt_ckpt.c) ---------------------------------- */

/* A create or drop, undone by abort (the base is never written before
 * commit otherwise). */
enum { U_CREATE, U_DROP };

typedef struct bt_undo {
    bt_tree *t;
    int kind;
} bt_undo;

/* A growable byte string. */
typedef struct bt_buf {
    uint8_t *p;
    size_t n, cap;
    bool oom; /* an append failed: the contents are incomplete */
} bt_buf;

/* A chain this transaction has its (one) uncommitted version in, with the
 * record-store counter deltas that commit applies. */
typedef struct bt_mod {
    bt_tree *t;
    bt_chain *c;
    int64_t d_ins, d_upd, d_bytes, d_ubytes;
} bt_mod;

typedef struct bt_txn {
    eng_txn hdr;
    uint64_t id;      /* never 0 */
    uint64_t wseq;    /* writes made: cursors re-read their entry after one */
    uint64_t read_ts; /* the snapshot: commits with ts <= read_ts */
    struct bt_txn *prev, *next; /* the engine's open list (e->txn_mu) */
    bt_mod *m;
    size_t nm, capm;
    bt_undo *u;
    size_t n, cap;
    bt_buf lg; /* the body of this transaction's log record */
} bt_txn;

/* The log (bt_log.c).  Fields after `mu` are under it; the flush thread
 * touches nothing else of the engine. */
typedef struct bt_log {
    bool on;
    char dir[4200];
    uint64_t file_max;  /* logFileSize */
    int interval_ms;    /* commitIntervalMs; 0: no flush thread */
    int64_t ckpt_bytes; /* checkpoint when the log since the last one exceeds it */
    bool no_recovery_ckpt; /* debugNoRecoveryCheckpoint: replay twice in tests */
    bool thr_on;
    pthread_t thr;
    pthread_mutex_t wmu; /* the file; taken before mu, held through I/O */
    pthread_mutex_t mu;  /* the buffer, LSNs, counters; no I/O under it */
    pthread_cond_t cv;
    bool stop;
    int fd;            /* the current file, -1 when none (changed under both) */
    uint32_t fnum;     /* its number (changed under both) */
    uint64_t written;  /* bytes of it written (wmu) */
    uint64_t synced;   /* bytes of it fdatasynced (wmu) */
    int64_t syncs;     /* fdatasyncs (wmu) */
    bt_buf buf;        /* records appended, not yet taken by a writer (mu) */
    bt_buf spare;      /* the buffer a writer swaps in (mu) */
    uint64_t next_lsn; /* the LSN of the next record (mu) */
    int io_err;        /* sticky: a failed write or fsync (mu) */
    int64_t since_ckpt, records, raw_bytes, stored_bytes; /* mu */
} bt_log;

enum { BT_LOG_PUT = 1, BT_LOG_DEL = 2, BT_LOG_CREATE = 3, BT_LOG_DROP = 4 };
#define BT_LOG_FHDR 32u
#define BT_LOG_RHDR 24u

struct bt_engine {
    eng_engine hdr;
    char dir[4096];
    char db_name[128];
    int lock_fd;
    bt_tree *meta;
    bt_tree **trees; /* live and dropped */
    size_t ntrees, captrees;
    char **unlink_after; /* files of committed drops, removed after a checkpoint */
    size_t nunlink;
    bt_txn *txn; /* the transaction with a create or drop in flight: the
                    checkpoint waits for its end (ckpt_pending) */
    const bt_compressor *default_comp;
    size_t cache_max, cache_bytes, dirty_bytes; /* cache_bytes: atomic */
    uint64_t gen;        /* bumped on every change of the base (exclusive
                            latch; atomic adds, bt_gen_bump: a cursor's
                            get reads it without the latch); commits show
                            in last_ts instead */
    uint64_t next_file_id;
    int64_t checkpoints, evictions;
    double ckpt_interval; /* seconds */
    double last_ckpt;
    bool ckpt_pending;
    int crash_point;
    bool crashed;
    /* A checkpoint failed with an I/O error: pages it wrote may not be on
     * disk although they are clean in memory, so a later checkpoint could
     * name blocks the disk lost (WiredTiger panics here).  Writes are
     * refused until the database is reopened; the log and the previous
     * checkpoint still hold every commit.  Atomic: read without the latch. */
    bool ckpt_failed;
    md_error last_err;
    uint64_t ckpt_lsn; /* from the turtle: the log is replayed from here */
    bt_log log;
    /* Concurrency (bt_txn.c).  Lock order: latch, commit_mu, a tree's
     * ov.mu, page_mu; the log's mutexes after commit_mu; txn_mu and a
     * handle's mu are leaves. */
    uint64_t id;               /* unique per open, for the per-thread txn table */
    bool evicting;             /* a reader is evicting (atomic) */
    bool maint_waiting;        /* a commit waits for the exclusive latch
                                  to fold, checkpoint or evict (atomic) */
    char pad_latch0[64];       /* the latch, written by every read, on
                                  lines of its own */
    pthread_rwlock_t latch;    /* shared: a read or write call; exclusive:
                                  commit's apply, eviction, checkpoint,
                                  structural ops.  Readers first; see gate */
    char pad_latch1[64];
    int gate;                  /* writers that waited BT_GATE_US: new
                                  readers wait while > 0 (atomic; changed
                                  under gate_mu, waited on with gate_cv) */
    pthread_mutex_t gate_mu;
    pthread_cond_t gate_cv;
    pthread_mutex_t page_mu;   /* page-in under the shared latch */
    pthread_mutex_t commit_mu; /* a commit under the shared latch: its log
                                  record, timestamp and stamps, in order */
    pthread_mutex_t txn_mu;    /* open, next_txn; last_ts is published
                                  under it */
    bt_txn *open;              /* open transactions */
    bt_txn *spare;             /* ended transactions kept for reuse, with
                                  their arrays (txn_mu), at most BT_SPARE */
    int nspare;
    uint64_t last_ts;          /* the latest commit timestamp, published
                                  (atomic, release) once all its versions
                                  are stamped */
    uint64_t next_txn;
    size_t unfolded;           /* chains pending in every overlay (atomic) */
    size_t retired;            /* entries on every overlay's retired lists
                                  (atomic) */
    struct {                   /* statistics, atomic */
        int64_t begins, commits, aborts, conflicts, freed, folds, folded;
        int64_t sh_us, ex_n, ex_us, gated, cm_n, cm_us;
    } st;
    /* Shared latch acquisitions, counted in stripes on their own cache
     * lines: every read takes the latch, and one counter written by
     * every core cost each read a cache-line transfer. */
    struct {
        int64_t n;
        char pad[56];
    } sh_n[BT_STRIPES]; /* 64 bytes apart: never on one line */
};

/* A handle on a record or sorted store. */
typedef struct bt_handle {
    union {
        eng_rs rs;
        eng_ss ss;
    } h;
    bt_tree *t;
    uint64_t hid;       /* unique, for the threads' view caches */
    pthread_mutex_t mu; /* views */
    struct bt_view *views; /* one per thread that read through the handle */
} bt_handle;

/* A thread's copy of the last value read through a handle (eng.h: a view
 * lasts until that thread's next read through the handle). */
typedef struct bt_view {
    struct bt_view *next;
    pthread_t owner;
    bt_buf b;
    bt_leaf_hint near; /* where this thread's last eng_rs_get ended */
} bt_view;

#define BT_ENG(h) ((bt_engine *)(h)->engine)
#define BT_TREE(h) (((bt_handle *)(h))->t)

bt_tree *bt_find_tree(bt_engine *e, const char *ident);
int bt_cache_check(bt_engine *e);
void bt_read_check(bt_engine *e);
int bt_txn_check(bt_engine *e, eng_txn *t, md_error *err);
void bt_checkpoint_failed(bt_engine *e, int rc, const md_error *err);
void bt_sweep_trees(bt_engine *e);
bool bt_commit_due(bt_engine *e, bool want);
void bt_commit_checkpoint(bt_engine *e, bool want);
int bt_obj_create(bt_engine *e, eng_txn *t, const char *ident, int kind,
                  const char *compressor, md_error *err);
int bt_obj_drop(bt_engine *e, eng_txn *t, const char *ident, int kind);
int bt_obj_open(bt_engine *e, const char *ident, int kind, bt_handle **out, md_error *err);
void bt_obj_close(bt_handle *h);
int bt_obj_truncate(bt_engine *e, bt_tree *t, eng_txn *txn);
int64_t bt_file_size(bt_tree *t);
int bt_verify_tree(bt_tree *t, eng_validate *v);
int bt_tree_recount(bt_tree *t, md_error *err);

/* bt_txn.c: latches, transactions, update chains */
int bt_conc_init(bt_engine *e);
void bt_conc_cleanup(bt_engine *e);
void bt_latch_shared(bt_engine *e);
void bt_latch_excl(bt_engine *e);
void bt_unlatch(bt_engine *e);
bt_txn *bt_txn_mine(bt_engine *e);
int bt_txn_begin(eng_engine *e, eng_txn **out);
int bt_txn_commit(eng_txn *t, bool durable, md_error *err);
void bt_txn_abort(eng_txn *t);
void bt_txn_status(bt_engine *e, bson_t *sub);

/* What a write expects of the key's current version (bt_write). */
enum {
    BT_W_INSERT,   /* a new RecordId: nothing there */
    BT_W_UPDATE,   /* must be present (MD_NOTFOUND) */
    BT_W_REMOVE,   /* must be present (MD_NOTFOUND) */
    BT_W_PUT,      /* catalog put: either */
    BT_W_DEL,      /* catalog delete: either */
    BT_W_SSINSERT, /* present: a no-op */
    BT_W_UNIQUE,   /* as SSINSERT, and no other rid with equal key bytes */
};
int bt_write(bt_engine *e, bt_txn *x, bt_tree *t, const uint8_t *key, uint32_t klen,
             eng_rid rid, const uint8_t *val, uint32_t vlen, int mode, eng_rid *rid_out,
             md_error *err);
int bt_buf_set(bt_buf *b, const uint8_t *p, size_t n);
int bt_lookup(bt_engine *e, bt_txn *x, bt_tree *t, const uint8_t *key, uint32_t klen,
              eng_rid rid, bt_buf *val, bt_leaf_hint *near, md_error *err);
bt_chain *bt_ov_seek(bt_tree *t, const uint8_t *key, uint32_t klen, eng_rid rid, bool incl);
bt_chain *bt_ov_seek_back(bt_tree *t, const uint8_t *key, uint32_t klen, eng_rid rid,
                          bool incl, bool inf);
/* The version of chain c that x sees; outside a transaction (x NULL),
 * the newest committed at or before rts (bt_read_ts).  Under the shared
 * latch (ov.mu not needed: see bt_overlay). */
const bt_upd *bt_visible(const bt_chain *c, const bt_txn *x, uint64_t rts);
/* What a read by x sees: x's snapshot, or outside a transaction the
 * latest commit published when the calling thread took the shared latch
 * (so every read under one hold of it sees the same commits, as when
 * commits took the latch exclusively), else the latest published now. */
uint64_t bt_read_ts(bt_engine *e, const bt_txn *x);
size_t bt_ov_count(bt_tree *t);
void bt_ov_init(bt_tree *t);
void bt_ov_free(bt_engine *e, bt_tree *t);
/* Fold every tree's committed versions into the base (checkpoint, verify);
 * under the exclusive latch.  Fails only when a page put fails. */
int bt_fold_all(bt_engine *e, md_error *err);
/* A reader's turn: fold when commits have stopped (before its latch). */
void bt_fold_idle(bt_engine *e);
void bt_txn_spares_free(bt_engine *e);

/* bt_store.c: a position merging a tree's base with the caller's snapshot.
 * The current entry is a copy (key, val); pos is the base entry at or
 * after it, reused while gen is still the engine's. */
typedef struct bt_cur {
    bool have; /* key, rid and val hold an entry */
    bt_buf key, val;
    eng_rid rid;
    bool pos_ok;
    uint64_t gen; /* e->gen when pos was found: the base it points into */
    uint64_t rts; /* the read timestamp the entry was resolved at */
    bt_pos pos;
} bt_cur;
int bt_cur_find(bt_engine *e, bt_txn *x, bt_tree *t, bt_cur *c, const uint8_t *key,
                uint32_t klen, eng_rid rid, bool fwd, bool incl, bool inf, md_error *err);
void bt_cur_cleanup(bt_cur *c);

/* bt_store.c: record and sorted stores, their cursors */
int bt_rs_create(eng_engine *e, eng_txn *t, const char *ident, const eng_rs_options *o,
                 md_error *err);
int bt_rs_open(eng_engine *e, const char *ident, eng_rs **out, md_error *err);
void bt_rs_close(eng_rs *rs);
int bt_rs_drop(eng_engine *e, eng_txn *t, const char *ident);
int bt_rs_insert(eng_rs *rs, eng_txn *t, const uint8_t *data, uint32_t len, eng_rid *out,
                 md_error *err);
int bt_rs_get(eng_rs *rs, eng_rid rid, const uint8_t **data, uint32_t *len);
int bt_rs_update(eng_rs *rs, eng_txn *t, eng_rid rid, const uint8_t *data, uint32_t len,
                 eng_rid *new_rid, bool *moved, md_error *err);
int bt_rs_remove(eng_rs *rs, eng_txn *t, eng_rid rid);
int bt_rs_truncate(eng_rs *rs, eng_txn *t);
int bt_rs_set_alloc(eng_rs *rs, eng_txn *t, int alloc);
void bt_rs_stats(eng_rs *rs, struct eng_rs_stats *s);
void bt_rs_append_stats(eng_rs *rs, bson_t *sub);
int bt_rs_validate(eng_rs *rs, eng_validate *v);
int bt_rs_cursor_open(eng_rs *rs, bool forward, eng_rs_cursor **out);
int bt_rs_cursor_next(eng_rs_cursor *c, eng_rid *rid, const uint8_t **data, uint32_t *len);
void bt_rs_cursor_save(eng_rs_cursor *c);
int bt_rs_cursor_restore(eng_rs_cursor *c);
void bt_rs_cursor_close(eng_rs_cursor *c);
int bt_ss_create(eng_engine *e, eng_txn *t, const char *ident, md_error *err);
int bt_ss_open(eng_engine *e, const char *ident, eng_ss **out, md_error *err);
void bt_ss_close(eng_ss *ss);
int bt_ss_drop(eng_engine *e, eng_txn *t, const char *ident);
int bt_ss_insert(eng_ss *ss, eng_txn *t, const uint8_t *key, uint32_t klen, eng_rid rid,
                 bool unique, eng_rid *dup_rid, md_error *err);
int bt_ss_remove(eng_ss *ss, eng_txn *t, const uint8_t *key, uint32_t klen, eng_rid rid);
int bt_ss_truncate(eng_ss *ss, eng_txn *t);
int64_t bt_ss_size(eng_ss *ss);
int64_t bt_ss_entries(eng_ss *ss);
int bt_ss_validate(eng_ss *ss, eng_validate *v);
int bt_ss_find(eng_ss *ss, const uint8_t *key, uint32_t klen, eng_rid *rid);
int bt_ss_cursor_open(eng_ss *ss, eng_ss_cursor **out);
int bt_ss_cursor_seek(eng_ss_cursor *c, const uint8_t *key, uint32_t klen, eng_rid rid);
int bt_ss_cursor_next(eng_ss_cursor *c);
int bt_ss_cursor_prev(eng_ss_cursor *c);
int bt_ss_cursor_get(eng_ss_cursor *c, const uint8_t **key, uint32_t *klen, eng_rid *rid);
void bt_ss_cursor_save(eng_ss_cursor *c);
int bt_ss_cursor_restore(eng_ss_cursor *c);
void bt_ss_cursor_close(eng_ss_cursor *c);

int bt_ckpt_open(bt_engine *e, md_error *err);
int bt_checkpoint(bt_engine *e, md_error *err);
int bt_tree_new(bt_engine *e, const char *ident, int kind, const bt_compressor *comp,
                bt_tree **out, md_error *err);
int bt_file_new(bt_engine *e, const bt_tree *t, bt_block *b, char *fname, size_t cap,
                md_error *err);
int bt_unlink_after_ckpt(bt_engine *e, const char *fname, const char *ident);
void bt_tree_destroy(bt_tree *t);
int bt_meta_key(char *buf, size_t cap, const char *prefix, const char *key);
double bt_now(void);

/* bt_engine.c, for replay */
int bt_add_tree(bt_engine *e, bt_tree *t);
int bt_tree_apply(bt_tree *t, const uint8_t *key, uint32_t klen, eng_rid rid,
                  const uint8_t *val, uint32_t vlen, bool has_val, bool del, md_error *err);

/* bt_log.c */
int bt_buf_put(bt_buf *b, const void *p, size_t n);
void bt_buf_free(bt_buf *b);
void bt_log_op(bt_buf *b, int op, const char *ident, const uint8_t *key, uint32_t klen,
               eng_rid rid, const uint8_t *val, uint32_t vlen, bool has_val);
void bt_log_op_create(bt_buf *b, const char *ident, int kind, const char *comp);
int bt_log_encode(uint64_t lsn, const uint8_t *body, size_t n, bool compress, bt_buf *out);
int bt_log_prepare(const uint8_t *body, size_t n, bool compress, bt_buf *out);
void bt_log_seal(bt_buf *rec, uint64_t lsn);
int bt_log_decode(const uint8_t *rec, size_t avail, uint64_t lsn, bt_buf *body,
                  size_t *rec_len);
int bt_log_parse_opts(bt_log *l, const char *k, bson_iter_t *it, md_error *err);
int bt_log_open(bt_engine *e, md_error *err);
/* prepared: body already through bt_log_prepare (NULL: done here) */
int bt_log_commit(bt_engine *e, const bt_buf *body, bt_buf *prepared, bool durable,
                  bool *appended, bool *want_ckpt, md_error *err);
int bt_log_ckpt_begin(bt_engine *e, uint64_t *lsn, md_error *err);
void bt_log_ckpt_done(bt_engine *e, uint64_t lsn);
void bt_log_close(bt_engine *e);
void bt_log_status(bt_engine *e, bson_t *sub);

/* bt_capped.c: capped record stores (eng.h), as WiredTiger's capped
 * record store: RecordIds increase, the oldest go first. */
int bt_capped_create(bt_engine *e, eng_txn *t, const char *ident, const eng_rs_options *o,
                     md_error *err);
int bt_capped_load(bt_engine *e, bt_tree *t, md_error *err);
bool bt_capped_is(const bt_tree *t); /* without the latch */
int bt_capped_drop(bt_engine *e, eng_txn *t, const char *ident);
int bt_capped_insert(eng_rs *rs, eng_txn *t, const uint8_t *data, uint32_t len, eng_rid *out,
                     md_error *err);
/* Before an update or remove of rid (new_len < 0: a remove): refuse growth
 * and keep the transaction's count and size deltas. */
int bt_capped_changing(eng_rs *rs, eng_txn *t, eng_rid rid, int64_t new_len, md_error *err);
void bt_capped_truncated(bt_tree *t, eng_txn *tx);
void bt_capped_validate(bt_tree *t, eng_validate *v);

/* bt_compact.c */
int bt_rs_compact(eng_rs *rs, eng_txn *t, const eng_compact_opts *o, bson_t *info,
                  md_error *err);
void bt_compact_pending(bt_engine *e);

/* Errors */
int bt_io_error(md_error *err, const char *what, const char *path);
int bt_nomem(md_error *err);

/* Varints */
size_t bt_vpack(uint8_t *p, uint64_t v);
int bt_vunpack(const uint8_t **p, const uint8_t *end, uint64_t *v);

#endif /* BT_INT_H */
