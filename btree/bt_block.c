/*
 * bt_block.c -- the block manager: files made of 4 KB allocation units,
 * blocks with a header carrying their size and a crc32c checksum, and the
 * per-file extent lists that implement no-overwrite (copy-on-write) space
 * management (format and invariants in bt_int.h):
 *
 *     avail    free and allocatable now (best fit, else the end of file)
 *     alloc    allocated since the last checkpoint
 *     discard  freed since the last checkpoint but still part of it;
 *              moved to avail once the next checkpoint's turtle is written
 *
 * Also the small shared helpers: crc32c (software, table-driven, Castagnoli
 * polynomial 0x82F63B78), varints and error reporting.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bt_int.h"

/* ---- small helpers ---------------------------------------------------------- */

/* An I/O failure, from errno: a full disk (or quota) is MD_ENOSPC with
 * OutOfDiskSpace (14031), anything else MD_EIO with FileStreamFailed. */
int bt_io_error(md_error *err, const char *what, const char *path)
{
    return eng_io_error(err, "btree: ", what, path);
}

int bt_nomem(md_error *err)
{
    return md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "btree: out of memory");
}

size_t bt_vpack(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    do {
        uint8_t b = v & 0x7f;
        v >>= 7;
        p[n++] = b | (v ? 0x80 : 0);
    } while (v);
    return n;
}

int bt_vunpack(const uint8_t **pp, const uint8_t *end, uint64_t *v)
{
    const uint8_t *p = *pp;
    uint64_t r = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (p >= end)
            return MD_ECORRUPT;
        uint8_t b = *p++;
        r |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *pp = p;
            *v = r;
            return 0;
        }
    }
    return MD_ECORRUPT;
}

void bt_addr_pack(uint8_t *p, const bt_addr *a)
{
    memcpy(p, &a->off, 8);
    memcpy(p + 8, &a->size, 4);
    memcpy(p + 12, &a->cksum, 4);
}

void bt_addr_unpack(const uint8_t *p, bt_addr *a)
{
    memcpy(&a->off, p, 8);
    memcpy(&a->size, p + 8, 4);
    memcpy(&a->cksum, p + 12, 4);
}

/* ---- extent lists ----------------------------------------------------------- */

/* Index of the first extent with off >= `off`. */
static size_t ext_lower(const bt_extlist *l, uint64_t off)
{
    size_t lo = 0, hi = l->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (l->v[mid].off < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

bool bt_ext_overlaps(const bt_extlist *l, uint64_t off, uint64_t size)
{
    size_t i = ext_lower(l, off);
    if (i < l->n && l->v[i].off < off + size)
        return true;
    return i > 0 && l->v[i - 1].off + l->v[i - 1].size > off;
}

/* Add [off, off+size), merging with neighbours.  The range must be new. */
int bt_ext_add(bt_extlist *l, uint64_t off, uint64_t size)
{
    assert(size > 0 && !bt_ext_overlaps(l, off, size));
    size_t i = ext_lower(l, off);
    bool left = i > 0 && l->v[i - 1].off + l->v[i - 1].size == off;
    bool right = i < l->n && off + size == l->v[i].off;
    if (left && right) {
        l->v[i - 1].size += size + l->v[i].size;
        memmove(&l->v[i], &l->v[i + 1], (l->n - i - 1) * sizeof *l->v);
        l->n--;
    } else if (left) {
        l->v[i - 1].size += size;
    } else if (right) {
        l->v[i].off = off;
        l->v[i].size += size;
    } else {
        if (l->n == l->cap) {
            size_t ncap = l->cap ? l->cap * 2 : 16;
            bt_ext *nv = realloc(l->v, ncap * sizeof *nv);
            if (!nv)
                return MD_ENOMEM;
            l->v = nv;
            l->cap = ncap;
        }
        memmove(&l->v[i + 1], &l->v[i], (l->n - i) * sizeof *l->v);
        l->v[i] = (bt_ext){off, size};
        l->n++;
    }
    return 0;
}

/* Remove [off, off+size) if it lies within one extent; false otherwise. */
bool bt_ext_remove(bt_extlist *l, uint64_t off, uint64_t size)
{
    size_t i = ext_lower(l, off + 1);
    if (i == 0)
        return false;
    bt_ext *x = &l->v[i - 1];
    if (x->off > off || x->off + x->size < off + size)
        return false;
    uint64_t tail_off = off + size, tail = x->off + x->size - tail_off;
    if (x->off == off) {
        x->off = tail_off;
        x->size = tail;
        if (tail == 0) {
            memmove(x, x + 1, (l->n - i) * sizeof *l->v);
            l->n--;
        }
        return true;
    }
    x->size = off - x->off;
    if (tail)
        bt_ext_add(l, tail_off, tail); /* a split: may grow; on ENOMEM space leaks */
    return true;
}

void bt_ext_free(bt_extlist *l)
{
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* ---- files ------------------------------------------------------------------ */

static void desc_image(uint8_t *d)
{
    uint32_t magic = BT_DESC_MAGIC, ck;
    uint16_t major = 1, minor = 0;
    memset(d, 0, BT_ALLOC);
    memcpy(d, &magic, 4);
    memcpy(d + 4, &major, 2);
    memcpy(d + 6, &minor, 2);
    ck = eng_crc32c(0, d, 16);
    memcpy(d + 8, &ck, 4);
}

int bt_block_create(bt_block *b, const char *path, md_error *err)
{
    static uint8_t d[BT_ALLOC];
    memset(b, 0, sizeof *b);
    snprintf(b->path, sizeof b->path, "%s", path);
    b->fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (b->fd < 0)
        return bt_io_error(err, "cannot create", path);
    desc_image(d);
    if (pwrite(b->fd, d, BT_ALLOC, 0) != (ssize_t)BT_ALLOC) {
        int rc = bt_io_error(err, "cannot write descriptor of", path);
        close(b->fd);
        b->fd = -1;
        return rc;
    }
    b->file_size = BT_ALLOC;
    return 0;
}

/* Open a file at its checkpoint: truncate what was written after it and
 * load the checkpoint's free extents. */
int bt_block_open(bt_block *b, const char *path, uint64_t size, const uint8_t *avail,
                  size_t avail_len, md_error *err)
{
    uint8_t d[16] = {0}, want[BT_ALLOC];
    memset(b, 0, sizeof *b);
    snprintf(b->path, sizeof b->path, "%s", path);
    b->fd = open(path, O_RDWR | O_CLOEXEC);
    if (b->fd < 0)
        return bt_io_error(err, "cannot open", path);
    desc_image(want);
    if (pread(b->fd, d, 16, 0) != 16 || memcmp(d, want, 16) != 0) {
        int at = 0;
        while (at < 15 && d[at] == want[at])
            at++;
        close(b->fd);
        b->fd = -1;
        return ENG_CORRUPT(err, "btree: %s: bad file descriptor block at offset %d", path, at);
    }
    if (ftruncate(b->fd, (off_t)size) != 0) {
        int rc = bt_io_error(err, "cannot truncate", path);
        close(b->fd);
        b->fd = -1;
        return rc;
    }
    b->file_size = size;
    for (size_t i = 0; i + 16 <= avail_len; i += 16) {
        uint64_t off, sz;
        memcpy(&off, avail + i, 8);
        memcpy(&sz, avail + i + 8, 8);
        if (off < BT_ALLOC || off + sz > size || bt_ext_overlaps(&b->avail, off, sz) ||
            bt_ext_add(&b->avail, off, sz)) {
            bt_block_close(b);
            return ENG_CORRUPT(err, "btree: %s: bad free extent at %llu", path,
                               (unsigned long long)off);
        }
    }
    return 0;
}

void bt_block_close(bt_block *b)
{
    if (b->fd >= 0)
        close(b->fd);
    b->fd = -1;
    bt_ext_free(&b->avail);
    bt_ext_free(&b->alloc);
    bt_ext_free(&b->discard);
}

/* Best fit from avail, else the end of the file. */
static uint64_t block_alloc(bt_block *b, uint32_t size)
{
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < b->avail.n; i++)
        if (b->avail.v[i].size >= size &&
            (best == SIZE_MAX || b->avail.v[i].size < b->avail.v[best].size))
            best = i;
    uint64_t off;
    if (best != SIZE_MAX) {
        off = b->avail.v[best].off;
        bt_ext_remove(&b->avail, off, size);
    } else {
        off = b->file_size;
        b->file_size += size;
    }
    bt_ext_add(&b->alloc, off, size);
    return off;
}

/* Write an image whose 40-byte header is filled in except disk_size and
 * checksum; pads it to the allocation unit.  `img` must have room for the
 * padding (a multiple of BT_ALLOC). */
int bt_block_write(bt_block *b, uint8_t *img, uint32_t disk_size, bt_addr *out, md_error *err)
{
    uint32_t size = (disk_size + BT_ALLOC - 1) / BT_ALLOC * BT_ALLOC, zero = 0, ck;
    memcpy(img + 28, &disk_size, 4);
    memcpy(img + 32, &zero, 4);
    img[36] = 1;
    ck = eng_crc32c(0, img, disk_size);
    memcpy(img + 32, &ck, 4);
    memset(img + disk_size, 0, size - disk_size);
    uint64_t off = block_alloc(b, size);
    size_t done = 0;
    while (done < size) {
        ssize_t w = pwrite(b->fd, img + done, size - done, (off_t)(off + done));
        if (w < 0 && errno == EINTR)
            continue;
        if (w == 0)
            errno = ENOSPC; /* no progress: the disk is full */
        if (w <= 0) {
            /* the block was never written: it goes back to avail, or the
             * next checkpoint's extent lists would not tile the file */
            int rc = bt_io_error(err, "cannot write block of", b->path);
            bt_ext_remove(&b->alloc, off, size);
            bt_ext_add(&b->avail, off, size);
            return rc;
        }
        done += (size_t)w;
    }
    b->bytes_written += size;
    b->blocks_written++;
    *out = (bt_addr){off, size, ck};
    return 0;
}

/* Read and check the block at `a`; *out is a malloc'd image of a->size
 * bytes.  A bad checksum is MD_ECORRUPT naming the file and offset. */
int bt_block_read(bt_block *b, const bt_addr *a, uint8_t **out, md_error *err)
{
    uint32_t disk_size, ck, zero = 0;
    if (a->off < BT_ALLOC || a->size < BT_ALLOC || a->off + a->size > b->file_size)
        return ENG_CORRUPT(err, "btree: %s: block address %llu+%u outside the file", b->path,
                           (unsigned long long)a->off, a->size);
    uint8_t *img = malloc(a->size);
    if (!img)
        return bt_nomem(err);
    if (pread(b->fd, img, a->size, (off_t)a->off) != (ssize_t)a->size) {
        free(img);
        return bt_io_error(err, "cannot read block of", b->path);
    }
    memcpy(&disk_size, img + 28, 4);
    memcpy(&ck, img + 32, 4);
    if (disk_size >= BT_HDR && disk_size <= a->size) {
        memcpy(img + 32, &zero, 4);
        uint32_t got = eng_crc32c(0, img, disk_size);
        memcpy(img + 32, &ck, 4);
        if (got == ck && ck == a->cksum) {
            *out = img;
            return 0;
        }
    }
    free(img);
    return ENG_CORRUPT(err, "btree: checksum mismatch in %s at offset %llu (block of %u bytes)",
                       b->path, (unsigned long long)a->off, a->size);
}

/* Free a block: straight to avail if allocated since the last checkpoint,
 * else to discard (invariant 1). */
void bt_block_free(bt_block *b, const bt_addr *a)
{
    if (a->off == 0)
        return;
    if (bt_ext_remove(&b->alloc, a->off, a->size))
        bt_ext_add(&b->avail, a->off, a->size);
    else
        bt_ext_add(&b->discard, a->off, a->size);
}

uint8_t *bt_block_ckpt_avail(bt_block *b, size_t *len)
{
    bt_extlist l = {0};
    for (size_t i = 0; i < b->avail.n; i++)
        bt_ext_add(&l, b->avail.v[i].off, b->avail.v[i].size);
    for (size_t i = 0; i < b->discard.n; i++)
        bt_ext_add(&l, b->discard.v[i].off, b->discard.v[i].size);
    uint8_t *p = malloc(l.n * 16 + 1);
    if (p)
        for (size_t i = 0; i < l.n; i++) {
            memcpy(p + i * 16, &l.v[i].off, 8);
            memcpy(p + i * 16 + 8, &l.v[i].size, 8);
        }
    *len = l.n * 16;
    bt_ext_free(&l);
    return p;
}

/* The checkpoint is durable: its discarded blocks become allocatable, and
 * free space at the end of the file goes back to the file system (as
 * WiredTiger does at a checkpoint).  The checkpoint just written still
 * records the longer size with that space free, which a reopen restores by
 * extending the file: both describe the same live blocks. */
void bt_block_ckpt_done(bt_block *b)
{
    for (size_t i = 0; i < b->discard.n; i++)
        bt_ext_add(&b->avail, b->discard.v[i].off, b->discard.v[i].size);
    b->discard.n = 0;
    b->alloc.n = 0;
    bt_ext *last = b->avail.n ? &b->avail.v[b->avail.n - 1] : NULL;
    if (last && last->off + last->size == b->file_size &&
        ftruncate(b->fd, (off_t)last->off) == 0) {
        b->file_size = last->off;
        b->avail.n--;
    }
}

int bt_block_sync(bt_block *b, md_error *err)
{
    if (fdatasync(b->fd) != 0)
        return bt_io_error(err, "cannot sync", b->path);
    return 0;
}
