/*
 * bt_page.c -- in-memory pages and reconciliation.
 *
 * In memory a page is a sorted array of bt_ent, each owning one allocation
 * for its key and value (leaf) or pointing at its child (internal).  Every
 * page is charged to the engine's cache by bt_page_charge().
 *
 * Reconciliation (bt_page_write) turns a page into a disk image (cells as
 * described in bt_int.h, keys prefix-compressed against the previous key),
 * writes values of ovfl_min bytes or more to overflow blocks first,
 * compresses the body and writes the image to a NEW block; the block it
 * replaces is freed through the extent lists (never overwritten).
 * bt_page_read is the reverse and checks everything it parses: a damaged
 * page is MD_ECORRUPT naming the file and the block's offset.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bt_int.h"

#define ENT_OVERHEAD 64
#define BT_CORRUPT_REPORTED 1 /* MD_ECORRUPT, message already in err */

bt_page *bt_page_new(int type)
{
    bt_page *p = calloc(1, sizeof *p);
    if (p) {
        p->type = type;
        p->disk_est = BT_HDR;
        p->leaf_size = BT_HDR;
    }
    return p;
}

void bt_page_charge(bt_tree *t, bt_page *p, long delta)
{
    p->mem = (size_t)((long)p->mem + delta);
    __atomic_add_fetch(&t->eng->cache_bytes, (size_t)delta, __ATOMIC_RELAXED); /* page-in */
    if (p->dirty)
        t->eng->dirty_bytes = (size_t)((long)t->eng->dirty_bytes + delta);
}

/* Free a page and its in-memory descendants (nothing is written). */
void bt_page_free(bt_tree *t, bt_page *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++) {
        if (p->type == BT_PAGE_INT)
            bt_page_free(t, p->e[i].child);
        free(p->e[i].key);
    }
    bt_page_charge(t, p, -(long)p->mem);
    free(p->e);
    free(p);
}

/* Fill an entry with copies of key and value (one allocation). */
int bt_ent_set(bt_ent *en, const uint8_t *key, uint32_t klen, eng_rid rid, const uint8_t *val,
               uint32_t vlen, bool has_val)
{
    size_t n = (size_t)klen + (has_val ? vlen : 0);
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf)
        return MD_ENOMEM;
    if (klen)
        memcpy(buf, key, klen);
    if (has_val && vlen && val)
        memcpy(buf + klen, val, vlen);
    memset(en, 0, sizeof *en);
    en->key = buf;
    en->klen = klen;
    en->kpfx = bt_key_prefix(buf, klen);
    en->rid = rid;
    en->has_val = has_val;
    en->val = has_val ? buf + klen : NULL;
    en->vlen = has_val ? vlen : 0;
    return 0;
}

/* A leaf cell's rid as the difference from the previous cell's, in two's
 * complement: any two rids have one (a damaged or extreme rid must not
 * overflow), and parse_cell adds it back the same way. */
static int64_t rid_delta(const bt_ent *en, const bt_ent *prev)
{
    return (int64_t)((uint64_t)en->rid - (uint64_t)(prev ? prev->rid : 0));
}

/* Upper bound of the entry's cell. */
size_t bt_ent_disk(const bt_page *p, const bt_ent *en, uint32_t ovfl_min)
{
    if (p->type == BT_PAGE_INT)
        return 5 + en->klen + 10 + 16;
    size_t v = !en->has_val ? 0 : en->vlen >= ovfl_min ? 20 : 5 + en->vlen;
    return 1 + 5 + 5 + en->klen + 10 + v;
}

/* The exact size of cell i as reconciliation will write it (prefix
 * compression included); internal cells as bt_ent_disk bounds them. */
static size_t cell_size(const bt_tree *t, const bt_page *p, const bt_ent *en,
                        const bt_ent *prev)
{
    uint8_t tmp[10];
    if (p->type == BT_PAGE_INT)
        return bt_ent_disk(p, en, t->ovfl_min);
    uint32_t pfx = 0;
    while (prev && pfx < en->klen && pfx < prev->klen && en->key[pfx] == prev->key[pfx])
        pfx++;
    int64_t d = rid_delta(en, prev);
    size_t n = 1 + bt_vpack(tmp, pfx) + bt_vpack(tmp, en->klen - pfx) + (en->klen - pfx) +
               bt_vpack(tmp, ((uint64_t)d << 1) ^ (uint64_t)(d >> 63));
    if (en->has_val)
        n += en->vlen >= t->ovfl_min ? 20 : bt_vpack(tmp, en->vlen) + en->vlen;
    return n;
}

size_t bt_cell_size(const bt_tree *t, const bt_page *p, size_t i)
{
    return cell_size(t, p, &p->e[i], i ? &p->e[i - 1] : NULL);
}

size_t bt_page_image_size(const bt_tree *t, const bt_page *p)
{
    size_t n = BT_HDR;
    for (size_t i = 0; i < p->n; i++)
        n += bt_cell_size(t, p, i);
    return n;
}

/* How a leaf's exact image changes when `en` goes in at slot i (sign +1)
 * or slot i goes out (-1): its own cell, and the prefix compression of the
 * cell after it, which is taken against en instead of en's predecessor. */
static long leaf_delta(const bt_tree *t, const bt_page *p, size_t i, const bt_ent *en,
                       int sign)
{
    const bt_ent *prev = i ? &p->e[i - 1] : NULL;
    size_t ni = sign > 0 ? i : i + 1;
    const bt_ent *next = ni < p->n ? &p->e[ni] : NULL;
    long d = (long)cell_size(t, p, en, prev);
    if (next)
        d += (long)cell_size(t, p, next, en) - (long)cell_size(t, p, next, prev);
    return sign * d;
}

size_t bt_ent_mem(const bt_ent *en)
{
    return ENT_OVERHEAD + en->klen + en->vlen;
}

/* Insert *en at slot i (the page takes ownership of its allocation). */
int bt_page_insert_at(bt_tree *t, bt_page *p, size_t i, bt_ent *en)
{
    assert(i <= p->n);
    if (p->n == p->cap) {
        size_t ncap = p->cap ? p->cap * 2 : 16;
        bt_ent *nv = realloc(p->e, ncap * sizeof *nv);
        if (!nv)
            return MD_ENOMEM;
        p->e = nv;
        p->cap = ncap;
    }
    if (p->type == BT_PAGE_LEAF)
        p->leaf_size = (size_t)((long)p->leaf_size + leaf_delta(t, p, i, en, +1));
    memmove(&p->e[i + 1], &p->e[i], (p->n - i) * sizeof *p->e);
    p->e[i] = *en;
    p->n++;
    p->disk_est += bt_ent_disk(p, en, t->ovfl_min);
    bt_page_charge(t, p, (long)bt_ent_mem(en));
    return 0;
}

/* Remove slot i, freeing the entry's bytes (not its child or blocks). */
void bt_page_remove_at(bt_tree *t, bt_page *p, size_t i)
{
    assert(i < p->n);
    bt_ent *en = &p->e[i];
    if (p->type == BT_PAGE_LEAF)
        p->leaf_size = (size_t)((long)p->leaf_size + leaf_delta(t, p, i, en, -1));
    p->disk_est -= bt_ent_disk(p, en, t->ovfl_min);
    bt_page_charge(t, p, -(long)bt_ent_mem(en));
    free(en->key);
    memmove(&p->e[i], &p->e[i + 1], (p->n - i - 1) * sizeof *p->e);
    p->n--;
}

/* ---- writing ------------------------------------------------------------------ */

/* Compress `body` into a new block of the given type; frees the block *addr
 * named before (if any) and stores the new address there. */
static int write_image(bt_tree *t, int type, uint32_t entries, const uint8_t *body, size_t blen,
                       bt_addr *addr, md_error *err)
{
    const bt_compressor *c = t->comp;
    size_t cap = c->pre_size(blen);
    if (cap < blen)
        cap = blen;
    size_t alloc = (BT_HDR + cap + BT_ALLOC - 1) / BT_ALLOC * BT_ALLOC;
    uint8_t *img = calloc(1, alloc);
    size_t clen = 0;
    if (!img)
        return bt_nomem(err);
    uint64_t wgen = bt_gen_bump(t->eng);
    uint32_t mem_size = (uint32_t)(BT_HDR + blen);
    memcpy(img + 8, &wgen, 8);
    memcpy(img + 16, &mem_size, 4);
    memcpy(img + 20, &entries, 4);
    img[24] = (uint8_t)type;
    if (blen && c->compress(body, blen, img + BT_HDR, cap, &clen) == 0) {
        img[25] = (uint8_t)c->id;
    } else {
        img[25] = BT_COMP_NONE;
        memcpy(img + BT_HDR, body, blen);
        clen = blen;
    }
    bt_addr old = *addr;
    int rc = bt_block_write(&t->blk, img, (uint32_t)(BT_HDR + clen), addr, err);
    free(img);
    if (rc)
        return rc;
    bt_page_free_block(t, &old);
    t->live_raw += mem_size;
    t->live_disk += (int64_t)(BT_HDR + clen);
    return 0;
}

/* Free a block the tree references, taking its bytes off the live totals
 * (read from its header: the tree keeps no per-block sizes). */
void bt_page_free_block(bt_tree *t, bt_addr *a)
{
    uint8_t h[16]; /* mem_size at 16, disk_size at 28 */
    uint32_t mem_size, disk_size;
    if (!a->off)
        return;
    if (pread(t->blk.fd, h, 16, (off_t)(a->off + 16)) == 16) {
        memcpy(&mem_size, h, 4);
        memcpy(&disk_size, h + 12, 4);
        t->live_raw -= mem_size;
        t->live_disk -= disk_size;
    }
    bt_block_free(&t->blk, a);
}

/* Does the entry's value live in an overflow block (when written)? */
bool bt_ent_is_ovfl(const bt_tree *t, const bt_ent *en)
{
    return en->has_val && en->vlen >= t->ovfl_min;
}

static uint8_t *put_leaf_cell(bt_tree *t, uint8_t *q, const bt_ent *en, const bt_ent *prev)
{
    uint32_t pfx = 0;
    if (prev)
        while (pfx < en->klen && pfx < prev->klen && en->key[pfx] == prev->key[pfx])
            pfx++;
    int64_t d = rid_delta(en, prev);
    uint64_t zz = ((uint64_t)d << 1) ^ (uint64_t)(d >> 63);
    *q++ = !en->has_val ? 0 : en->addr.off ? 2 : 1;
    q += bt_vpack(q, pfx);
    q += bt_vpack(q, en->klen - pfx);
    memcpy(q, en->key + pfx, en->klen - pfx);
    q += en->klen - pfx;
    q += bt_vpack(q, zz);
    if (en->has_val && en->addr.off) {
        bt_addr_pack(q, &en->addr);
        memcpy(q + 16, &en->vlen, 4);
        q += 20;
    } else if (en->has_val) {
        q += bt_vpack(q, en->vlen);
        memcpy(q, en->val, en->vlen);
        q += en->vlen;
    }
    return q;
}

static uint8_t *put_int_cell(uint8_t *q, const bt_ent *en)
{
    uint64_t zz = ((uint64_t)en->rid << 1) ^ (uint64_t)(en->rid >> 63);
    q += bt_vpack(q, en->klen);
    memcpy(q, en->key, en->klen);
    q += en->klen;
    q += bt_vpack(q, zz);
    bt_addr_pack(q, &en->addr);
    return q + 16;
}

/* Reconcile a page into a new block.  Internal pages must have no dirty
 * children in memory (invariant 4). */
int bt_page_write(bt_tree *t, bt_page *p, bt_addr *addr, md_error *err)
{
    int rc = 0;
    for (size_t i = 0; p->type == BT_PAGE_LEAF && i < p->n; i++) {
        bt_ent *en = &p->e[i];
        if (en->has_val && en->vlen >= t->ovfl_min && !en->addr.off &&
            (rc = write_image(t, BT_PAGE_OVFL, en->vlen, en->val, en->vlen, &en->addr, err)))
            return rc;
    }
    uint8_t *body = malloc(p->disk_est + 16), *q = body;
    if (!body)
        return bt_nomem(err);
    for (size_t i = 0; i < p->n; i++) {
        if (p->type == BT_PAGE_LEAF)
            q = put_leaf_cell(t, q, &p->e[i], i ? &p->e[i - 1] : NULL);
        else
            q = put_int_cell(q, &p->e[i]);
    }
    assert((size_t)(q - body) <= p->disk_est);
    rc = write_image(t, p->type, (uint32_t)p->n, body, (size_t)(q - body), addr, err);
    free(body);
    if (rc == 0 && p->dirty) {
        t->eng->dirty_bytes -= p->mem;
        p->dirty = false;
    }
    return rc;
}

/* ---- reading ------------------------------------------------------------------ */

/* Read a block and return its uncompressed body (malloc'd). */
static int read_image(bt_tree *t, const bt_addr *a, int *type, uint8_t **body,
                      uint32_t *blen, uint32_t *entries, md_error *err)
{
    uint8_t *img;
    uint32_t mem_size, disk_size;
    size_t got = 0;
    int rc = bt_block_read(&t->blk, a, &img, err);
    if (rc)
        return rc;
    memcpy(&mem_size, img + 16, 4);
    memcpy(entries, img + 20, 4);
    memcpy(&disk_size, img + 28, 4);
    const bt_compressor *c = bt_compressor_by_id(img[25]);
    bool type_ok = *type ? img[24] == *type
                         : img[24] == BT_PAGE_LEAF || img[24] == BT_PAGE_INT;
    if (!type_ok || mem_size < BT_HDR || !c)
        goto corrupt;
    *type = img[24];
    *blen = mem_size - BT_HDR;
    *body = malloc(*blen ? *blen : 1);
    if (!*body) {
        free(img);
        return bt_nomem(err);
    }
    if (c->decompress(img + BT_HDR, disk_size - BT_HDR, *body, *blen, &got) != 0 ||
        got != *blen) {
        free(*body);
        goto corrupt;
    }
    free(img);
    return 0;
corrupt:
    free(img);
    return ENG_CORRUPT(err, "btree: %s: bad page image at offset %llu", t->blk.path,
                       (unsigned long long)a->off);
}

/* Parse one cell into *en (which then owns its bytes). */
static int parse_cell(bt_tree *t, int type, const uint8_t **pp, const uint8_t *end,
                      const bt_ent *prev, bt_ent *en, md_error *err)
{
    const uint8_t *p = *pp;
    uint64_t pfx = 0, slen, zz, vlen = 0;
    uint8_t ct = 0;
    bt_addr a = {0};
    if (type == BT_PAGE_LEAF) {
        if (p >= end || (ct = *p++) > 2 || bt_vunpack(&p, end, &pfx))
            return MD_ECORRUPT;
    }
    if (bt_vunpack(&p, end, &slen) || pfx > (prev ? prev->klen : 0) || slen > (size_t)(end - p))
        return MD_ECORRUPT;
    const uint8_t *suffix = p;
    p += slen;
    if (bt_vunpack(&p, end, &zz))
        return MD_ECORRUPT;
    int64_t rid = (int64_t)(zz >> 1) ^ -(int64_t)(zz & 1);
    if (type == BT_PAGE_LEAF && prev) /* the delta wraps, as rid_delta made it */
        rid = (int64_t)((uint64_t)rid + (uint64_t)prev->rid);
    const uint8_t *val = NULL;
    if (type == BT_PAGE_INT || ct == 2) {
        if (end - p < (type == BT_PAGE_INT ? 16 : 20))
            return MD_ECORRUPT;
        bt_addr_unpack(p, &a);
        p += 16;
        if (ct == 2) {
            uint32_t l;
            memcpy(&l, p, 4);
            vlen = l;
            p += 4;
        }
    } else if (ct == 1) {
        if (bt_vunpack(&p, end, &vlen) || vlen > (size_t)(end - p))
            return MD_ECORRUPT;
        val = p;
        p += vlen;
    }
    uint8_t *key = malloc(pfx + slen + 1);
    if (!key)
        return bt_nomem(err);
    if (pfx)
        memcpy(key, prev->key, pfx);
    memcpy(key + pfx, suffix, slen);
    int rc = bt_ent_set(en, key, (uint32_t)(pfx + slen), rid, val, (uint32_t)vlen, ct != 0);
    free(key);
    if (rc)
        return bt_nomem(err);
    en->addr = a;
    if (ct == 2) { /* the value lives in an overflow block */
        uint8_t *ob = NULL;
        uint32_t olen, oent;
        int otype = BT_PAGE_OVFL;
        if ((rc = read_image(t, &a, &otype, &ob, &olen, &oent, err)) != 0)
            ob = NULL;
        else if (
            olen != vlen)
            rc = ENG_CORRUPT(err, "btree: %s: overflow block at %llu has %u bytes, want %llu",
                             t->blk.path, (unsigned long long)a.off, olen,
                             (unsigned long long)vlen);
        if (rc == 0)
            memcpy(en->val, ob, vlen);
        free(ob);
        if (rc) {
            free(en->key);
            return rc == MD_ECORRUPT ? BT_CORRUPT_REPORTED : rc;
        }
    }
    *pp = p;
    return 0;
}

/* Read the page at `a` into memory (clean, charged to the cache). */
int bt_page_read(bt_tree *t, const bt_addr *a, bt_page **out, md_error *err)
{
    uint8_t *body;
    uint32_t blen, entries;
    int type = 0;
    int rc = read_image(t, a, &type, &body, &blen, &entries, err);
    if (rc)
        return rc;
    bt_page *p = bt_page_new(type);
    if (!p) {
        free(body);
        return bt_nomem(err);
    }
    const uint8_t *q = body, *end = body + blen;
    for (uint32_t i = 0; i < entries && rc == 0; i++) {
        bt_ent en;
        rc = parse_cell(t, type, &q, end, p->n ? &p->e[p->n - 1] : NULL, &en, err);
        if (rc == MD_ECORRUPT)
            ENG_CORRUPT(err, "btree: %s: bad cell %u in page at offset %llu", t->blk.path, i,
                        (unsigned long long)a->off);
        else if (rc == BT_CORRUPT_REPORTED)
            rc = MD_ECORRUPT;
        if (rc == 0 && (rc = bt_page_insert_at(t, p, p->n, &en)) != 0) {
            free(en.key);
            rc = bt_nomem(err);
        }
    }
    if (rc == 0 && q != end)
        rc = ENG_CORRUPT(err, "btree: %s: trailing bytes in page at offset %llu", t->blk.path,
                         (unsigned long long)a->off);
    free(body);
    if (rc) {
        bt_page_free(t, p);
        return rc;
    }
    *out = p;
    return 0;
}
