/*
 * mm_bt_int.h -- private header of the mmapv1 index B-tree (mm_btree.c,
 * mm_bt_verify.c): the bucket format's offsets (the format itself is
 * described in mm_int.h), the in-memory views of a bucket and of an entry,
 * and the checked readers both files use.  Every value read from a bucket
 * is bounds-checked before use (see mm_btree.c).
 */
#ifndef MM_BT_INT_H
#define MM_BT_INT_H

#include <assert.h>
#include <endian.h>
#include <string.h>

#include "mm_btree.h"


#define BK_MAGIC 0x3154424du /* "MBT1" */
#define BK_HDR 48
#define BK_SLOT 20
#define BK_CAP (MM_BUCKET_SIZE - BK_HDR)
#define BK_MAX_SLOTS (BK_CAP / BK_SLOT)
#define BK_FLAG_LEAF 0x01
#define BT_MAX_LEVEL 32

enum {
    H_MAGIC = 0,
    H_LEVEL = 4,
    H_FLAGS = 5,
    H_N = 6,
    H_TOP = 8,
    H_GARBAGE = 10,
    H_RESERVED = 12,
    H_PARENT = 16,
    H_NEXT = 24,
    H_PREV = 32,
    H_RIGHT = 40
};
enum { S_KOFS = 0, S_KLEN = 2, S_RID = 4, S_CHILD = 12 };

#define LOC(x) ((unsigned long long)(x))
/* ENG_CORRUPT, with a result the compiler can see is MD_ECORRUPT. */
#define BT_CORRUPT(err, ...) (ENG_CORRUPT((err), __VA_ARGS__), MD_ECORRUPT)

/* A bucket whose header passed hdr_problem(); fields cached from it.  p is
 * a view into the pager: it dies with the next alloc (which may remap). */
typedef struct bt_node {
    mm_bt_loc loc;
    uint8_t *p;
    unsigned level, n, top, garbage;
} bt_node;

/* The header fields a rebuilt bucket keeps. */
typedef struct bt_hdr {
    unsigned level;
    mm_bt_loc parent, next, prev, right;
} bt_hdr;

/* An entry or separator; key borrowed from a bucket or a buffer. */
typedef struct bt_item {
    const uint8_t *key;
    uint32_t klen;
    eng_rid rid;
    mm_bt_loc child;
} bt_item;

/* Root-to-leaf path: idx is the child taken (internal) or the lower bound
 * of the target (leaf). */
typedef struct bt_path {
    int depth;
    mm_bt_loc loc[BT_MAX_LEVEL];
    unsigned idx[BT_MAX_LEVEL];
} bt_path;

/* Where bt_descend goes: to a key, or along the left or right edge. */
typedef struct bt_target {
    const uint8_t *key;
    uint32_t klen;
    eng_rid rid;
    int edge; /* 0: key, -1: leftmost, +1: rightmost */
} bt_target;

struct mm_bt {
    mm_bt_pager pg;
    uint8_t scratch[MM_BUCKET_SIZE];   /* copy of a bucket being rebuilt */
    bt_item items[BK_MAX_SLOTS + 2];   /* its entries, plus the new one */
    uint8_t kbuf[MM_BT_KEY_MAX];       /* the caller's key */
    uint8_t sepkey[MM_BT_KEY_MAX];     /* a separator travelling upwards */
};

/* ---- little-endian access ------------------------------------------------ */

/* Unaligned little-endian loads, one instruction each on x86-64 and arm64
 * (every slot visited by a binary search reads three of them). */
static inline unsigned get16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return le16toh(v);
}

static inline uint32_t get32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return le32toh(v);
}

static inline uint64_t get64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return le64toh(v);
}

static inline void put16(uint8_t *p, unsigned v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline void put32(uint8_t *p, uint32_t v)
{
    put16(p, v & 0xffff);
    put16(p + 2, v >> 16);
}

static inline void put64(uint8_t *p, uint64_t v)
{
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}

/* ---- reading buckets ----------------------------------------------------- */

/* Why the header of bucket p is unusable, or NULL if it is sound. */
static inline const char *hdr_problem(const uint8_t *p)
{
    unsigned level = p[H_LEVEL], flags = p[H_FLAGS], n = get16(p + H_N);
    unsigned top = get16(p + H_TOP);

    if (get32(p + H_MAGIC) != BK_MAGIC)
        return "bad magic";
    if (level >= BT_MAX_LEVEL)
        return "level out of range";
    if ((flags & ~BK_FLAG_LEAF) || ((flags & BK_FLAG_LEAF) != 0) != (level == 0))
        return "flags disagree with level";
    if (get32(p + H_RESERVED) != 0)
        return "reserved bytes not zero";
    if (n > BK_MAX_SLOTS)
        return "slot count out of range";
    if (top > MM_BUCKET_SIZE || top < BK_HDR + n * BK_SLOT)
        return "key area overlaps the slots or leaves the bucket";
    if (get16(p + H_GARBAGE) > MM_BUCKET_SIZE - top)
        return "garbage larger than the key area";
    return NULL;
}

static inline int node_load(mm_bt *bt, mm_bt_loc loc, bt_node *nd, md_error *err)
{
    uint8_t *p = loc ? bt->pg.page(bt->pg.ctx, loc) : NULL;
    const char *why;

    if (!p)
        return BT_CORRUPT(err, "btree: %#llx is not a bucket address", LOC(loc));
    if ((why = hdr_problem(p)) != NULL)
        return BT_CORRUPT(err, "btree bucket %#llx: %s", LOC(loc), why);
    nd->loc = loc;
    nd->p = p;
    nd->level = p[H_LEVEL];
    nd->n = get16(p + H_N);
    nd->top = get16(p + H_TOP);
    nd->garbage = get16(p + H_GARBAGE);
    return 0;
}

static inline bt_hdr node_hdr(const bt_node *nd)
{
    bt_hdr h = {nd->level, get64(nd->p + H_PARENT), get64(nd->p + H_NEXT),
                get64(nd->p + H_PREV), get64(nd->p + H_RIGHT)};
    return h;
}

/* Why slot i (< n) of a sound bucket is unusable, or NULL. */
static inline const char *slot_problem(const bt_node *nd, unsigned i)
{
    const uint8_t *s = nd->p + BK_HDR + i * BK_SLOT;
    unsigned kofs = get16(s + S_KOFS), klen = get16(s + S_KLEN);

    assert(i < nd->n);
    if (klen > MM_BT_KEY_MAX)
        return "key longer than 1024 bytes";
    if (kofs < nd->top || kofs + klen > MM_BUCKET_SIZE)
        return "key outside the key area";
    if ((get64(s + S_CHILD) == 0) != (nd->level == 0))
        return nd->level ? "internal slot without a child" : "leaf slot with a child";
    if (get64(s + S_CHILD) == nd->loc && nd->level)
        return "bucket is its own child";
    return NULL;
}

static inline int node_ent(const bt_node *nd, unsigned i, bt_item *e, md_error *err)
{
    const uint8_t *s = nd->p + BK_HDR + i * BK_SLOT;
    const char *why;

    if (i >= nd->n)
        return BT_CORRUPT(err, "btree bucket %#llx: slot %u beyond n=%u", LOC(nd->loc), i,
                           nd->n);
    if ((why = slot_problem(nd, i)) != NULL)
        return BT_CORRUPT(err, "btree bucket %#llx slot %u: %s", LOC(nd->loc), i, why);
    e->key = nd->p + get16(s + S_KOFS);
    e->klen = get16(s + S_KLEN);
    e->rid = (eng_rid)get64(s + S_RID);
    e->child = get64(s + S_CHILD);
    return 0;
}

/* Child pointer j (0..n; n is the right child) of an internal bucket. */
static inline int node_child(const bt_node *nd, unsigned j, mm_bt_loc *child, md_error *err)
{
    bt_item e;
    int rc;

    assert(nd->level > 0);
    if (j < nd->n) {
        if ((rc = node_ent(nd, j, &e, err)) != 0)
            return rc;
        *child = e.child;
        return 0;
    }
    *child = get64(nd->p + H_RIGHT);
    if (j > nd->n || *child == 0 || *child == nd->loc)
        return BT_CORRUPT(err, "btree bucket %#llx: bad child %u", LOC(nd->loc), j);
    return 0;
}

static inline int item_cmp(const bt_item *a, const uint8_t *key, uint32_t klen, eng_rid rid)
{
    return eng_key_cmp(a->key, a->klen, a->rid, key, klen, rid);
}


/* Is child pointer j of nd equal to an earlier one? */
static inline int child_repeats(const bt_node *nd, unsigned j, mm_bt_loc child, bool *dup)
{
    mm_bt_loc other;
    int rc;

    *dup = false;
    for (unsigned i = 0; i < j; i++) {
        if ((rc = node_child(nd, i, &other, NULL)) != 0)
            return rc;
        if (other == child)
            *dup = true;
    }
    return 0;
}

#endif /* MM_BT_INT_H */
