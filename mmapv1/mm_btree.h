/*
 * mm_btree.h -- the mmapv1 index: a B+tree of 8 KB buckets.
 *
 * As in MongoDB's MMAPv1, index buckets are records in the data files,
 * allocated from the index's own namespace ("test.c.$x_1") exactly like
 * documents, so totalIndexSize and fragmentation are real.  The tree code
 * itself does not know about files: it reaches buckets through a pager (a
 * table of callbacks), which mm_rs.c / mm_engine.c wire to the extent and
 * record allocator, and which the unit tests replace by an in-memory pager.
 *
 * Entries are (key bytes, RecordId) pairs ordered by eng_key_cmp(): memcmp
 * on the key, shorter key first on a common prefix, then by RecordId.
 *
 * Every byte the tree changes inside a bucket is first declared through
 * pager->writing(), so that the transaction can roll it back (and, with the
 * journal, log it).  The bucket layout is described in mm_int.h.
 */
#ifndef MM_BTREE_H
#define MM_BTREE_H

#include "eng.h"

/* Usable bytes of one bucket: a 8192-byte record minus its 16-byte header. */
#define MM_BUCKET_SIZE 8176
/* Longest key the tree accepts (MongoDB 3.x: keys >= 1024 bytes fail). */
#define MM_BT_KEY_MAX 1024

/* A bucket address: the record's DiskLoc packed as (file << 32 | offset).
 * 0 is "no bucket". */
typedef uint64_t mm_bt_loc;

typedef struct mm_bt_pager {
    void *ctx;
    /* Allocate a bucket; *page points at its MM_BUCKET_SIZE bytes, zeroed
     * and already declared as written.  Returns 0 or a negative MD_ code. */
    int (*alloc)(void *ctx, eng_txn *t, mm_bt_loc *loc, uint8_t **page);
    /* Return a bucket to the free lists. */
    void (*free)(void *ctx, eng_txn *t, mm_bt_loc loc);
    /* The bucket's bytes, or NULL if loc is not a valid bucket address. */
    uint8_t *(*page)(void *ctx, mm_bt_loc loc);
    /* Declare that [p, p+len) inside a bucket is about to change. */
    void (*writing)(void *ctx, eng_txn *t, void *p, size_t len);
    /* The persisted root ("head") of the tree; 0 for an empty tree. */
    mm_bt_loc (*get_root)(void *ctx);
    void (*set_root)(void *ctx, eng_txn *t, mm_bt_loc root);
} mm_bt_pager;

typedef struct mm_bt mm_bt;
typedef struct mm_bt_cursor mm_bt_cursor;

/* The rid of the first entry whose key equals key (eng_ss_find), with no
 * cursor: 0 or MD_NOTFOUND. */
int mm_bt_find(mm_bt *bt, const uint8_t *key, uint32_t klen, eng_rid *rid);

/* The tree keeps a copy of *pager (ctx is borrowed).  Caller owns *out. */
int mm_bt_open(const mm_bt_pager *pager, mm_bt **out);
void mm_bt_close(mm_bt *bt);

/* Semantics as eng_ss_insert / eng_ss_remove in eng.h.  Keys longer than
 * MM_BT_KEY_MAX give MD_ETOOBIG (code KeyTooLong, 17280). */
int mm_bt_insert(mm_bt *bt, eng_txn *t, const uint8_t *key, uint32_t klen, eng_rid rid,
                 bool unique, eng_rid *dup_rid, md_error *err);
int mm_bt_remove(mm_bt *bt, eng_txn *t, const uint8_t *key, uint32_t klen, eng_rid rid);
/* Free every bucket; the tree is empty afterwards. */
int mm_bt_truncate(mm_bt *bt, eng_txn *t);
int64_t mm_bt_entries(mm_bt *bt);
int64_t mm_bt_buckets(mm_bt *bt);
/* Check order, parent/child and sibling links, bucket bounds, counts. */
int mm_bt_validate(mm_bt *bt, eng_validate *v);

/* Cursors: semantics as the eng_ss_cursor_* functions in eng.h. */
int mm_bt_cursor_open(mm_bt *bt, mm_bt_cursor **out);
int mm_bt_cursor_seek(mm_bt_cursor *c, const uint8_t *key, uint32_t klen, eng_rid rid);
int mm_bt_cursor_next(mm_bt_cursor *c);
int mm_bt_cursor_prev(mm_bt_cursor *c);
int mm_bt_cursor_get(mm_bt_cursor *c, const uint8_t **key, uint32_t *klen, eng_rid *rid);
void mm_bt_cursor_save(mm_bt_cursor *c);
int mm_bt_cursor_restore(mm_bt_cursor *c);
void mm_bt_cursor_close(mm_bt_cursor *c);

#endif /* MM_BTREE_H */
