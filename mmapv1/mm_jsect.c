/*
 * mm_jsect.c -- the journal's on-disk pieces, as pure functions: crc32c,
 * the group-commit buffer (entries appended at each commit), sealing it
 * into a section (header, footer with a checksum, padding to 8 KB), and
 * checking and walking a section read back from a journal file.
 *
 * Nothing here does I/O or takes locks, so tests/mmapv1/test_mm_journal.c
 * can encode, damage and decode sections in memory.  The format is the
 * table "Journal" in mm_int.h (MongoDB's dur_journalformat.h, with crc32c
 * in place of md5 and no compression).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "mm_int.h"

/* ---- little-endian helpers ---------------------------------------------------- */

static void put32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, 4);
}
static void put64(uint8_t *p, uint64_t v)
{
    memcpy(p, &v, 8);
}
static uint32_t get32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static uint64_t get64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* ---- the group-commit buffer -------------------------------------------------- */

static void jbuf_reserve(mm_jbuf *b, size_t need)
{
    if (need <= b->cap)
        return;
    size_t n = b->cap ? b->cap : 64 * 1024;
    while (n < need)
        n *= 2;
    uint8_t *p = realloc(b->p, n);
    if (!p) {
        /* a committed change that cannot be journaled: MongoDB fasserts */
        fprintf(stderr, "mmapv1: out of memory in the journal buffer; cannot continue\n");
        abort();
    }
    b->p = p;
    b->cap = n;
}

void mm_jbuf_reset(mm_jbuf *b)
{
    jbuf_reserve(b, MM_J_SECT_HDR);
    memset(b->p, 0, MM_J_SECT_HDR);
    b->len = MM_J_SECT_HDR;
    b->nentries = 0;
}

void mm_jbuf_free(mm_jbuf *b)
{
    free(b->p);
    *b = (mm_jbuf){0};
}

void mm_jbuf_entry(mm_jbuf *b, int32_t file, uint32_t ofs, const void *data, uint32_t len)
{
    if (b->len < MM_J_SECT_HDR)
        mm_jbuf_reset(b);
    jbuf_reserve(b, b->len + MM_J_ENTRY_HDR + len);
    uint8_t *p = b->p + b->len;
    put32(p, len);
    put32(p + 4, ofs);
    put32(p + 8, file == MM_NS_FILENO ? MM_J_NS_FILENO : (uint32_t)file);
    memcpy(p + MM_J_ENTRY_HDR, data, len);
    b->len += MM_J_ENTRY_HDR + len;
    b->nentries++;
}

/*
 * Turn the buffer into a section in place: fill the header, append the
 * footer (sentinel, crc32c of everything before the crc, "\n\n\n\n") and
 * zero padding up to MM_J_ALIGN.  Returns the padded length.
 */
size_t mm_jsect_seal(mm_jbuf *b, uint64_t seq, uint64_t file_id)
{
    if (b->len < MM_J_SECT_HDR)
        mm_jbuf_reset(b);
    size_t unpadded = b->len + MM_J_FOOTER;
    size_t padded = (unpadded + MM_J_ALIGN - 1) / MM_J_ALIGN * MM_J_ALIGN;
    jbuf_reserve(b, padded);
    put32(b->p, (uint32_t)unpadded);
    put32(b->p + 4, MM_J_SECT_MAGIC);
    put64(b->p + 8, seq);
    put64(b->p + 16, file_id);
    uint8_t *f = b->p + b->len;
    put32(f, MM_J_SENTINEL);
    put32(f + 4, eng_crc32c(0, b->p, b->len + 4));
    put32(f + 8, 0);
    memcpy(f + 12, "\n\n\n\n", 4);
    memset(b->p + unpadded, 0, padded - unpadded);
    b->len = padded;
    return padded;
}

/* Length of the padded section that begins with header bytes p (>= 24
 * bytes available), or 0 if the header cannot start a section. */
size_t mm_jsect_padded_len(const uint8_t *p)
{
    uint32_t len = get32(p);
    if (get32(p + 4) != MM_J_SECT_MAGIC || len < MM_J_SECT_HDR + MM_J_FOOTER ||
        len > MM_J_SECT_MAX)
        return 0;
    return ((size_t)len + MM_J_ALIGN - 1) / MM_J_ALIGN * MM_J_ALIGN;
}

/*
 * Check the section at p (avail readable bytes): header magic and length,
 * file id, footer sentinel and crc, and that the entries exactly fill the
 * space between header and footer.  MD_ECORRUPT for a torn, damaged or
 * foreign section (recovery stops there); 0 and *out filled otherwise.
 */
int mm_jsect_check(const uint8_t *p, size_t avail, uint64_t file_id, mm_jsect_info *out)
{
    if (avail < MM_J_SECT_HDR)
        return MD_ECORRUPT;
    size_t padded = mm_jsect_padded_len(p);
    if (padded == 0 || padded > avail)
        return MD_ECORRUPT;
    uint32_t len = get32(p);
    if (get64(p + 16) != file_id)
        return MD_ECORRUPT;
    const uint8_t *f = p + len - MM_J_FOOTER;
    if (get32(f) != MM_J_SENTINEL || get32(f + 8) != 0 ||
        memcmp(f + 12, "\n\n\n\n", 4) != 0 ||
        get32(f + 4) != eng_crc32c(0, p, (size_t)(f - p) + 4))
        return MD_ECORRUPT;
    size_t n = 0, at = MM_J_SECT_HDR, end = len - MM_J_FOOTER;
    while (at < end) {
        if (end - at < MM_J_ENTRY_HDR || get32(p + at) > end - at - MM_J_ENTRY_HDR)
            return MD_ECORRUPT;
        at += MM_J_ENTRY_HDR + get32(p + at);
        n++;
    }
    *out = (mm_jsect_info){.seq = get64(p + 8), .file_id = file_id, .len = len,
                           .padded = padded, .nentries = n};
    return 0;
}

/* Call fn for each entry of a checked section, in order; stops at the first
 * nonzero return and passes it on. */
int mm_jsect_apply(const uint8_t *p, const mm_jsect_info *in, mm_jentry_fn fn, void *ctx)
{
    size_t at = MM_J_SECT_HDR, end = in->len - MM_J_FOOTER;
    while (at < end) {
        uint32_t len = get32(p + at), ofs = get32(p + at + 4), fno = get32(p + at + 8);
        int32_t file = fno == MM_J_NS_FILENO ? MM_NS_FILENO : (int32_t)fno;
        int rc = fn(ctx, file, ofs, p + at + MM_J_ENTRY_HDR, len);
        if (rc)
            return rc;
        at += MM_J_ENTRY_HDR + len;
    }
    return 0;
}

/* Walk the unsealed entries of a buffer (for re-applying pending commits). */
int mm_jbuf_apply(const mm_jbuf *b, mm_jentry_fn fn, void *ctx)
{
    if (b->len <= MM_J_SECT_HDR)
        return 0;
    mm_jsect_info in = {.len = (uint32_t)(b->len + MM_J_FOOTER)};
    return mm_jsect_apply(b->p, &in, fn, ctx);
}

/* ---- journal file header and LSN file ---------------------------------------- */

void mm_jfile_header(uint8_t *h, uint64_t file_id, const char *dir)
{
    memset(h, 0, MM_J_FILE_HDR);
    memcpy(h, "j\n", 2);
    h[2] = 0x48, h[3] = 0x41; /* version 0x4148: uncompressed */
    put64(h + 8, file_id);
    snprintf((char *)h + 64, MM_J_FILE_HDR - 64 - 8, "%s", dir);
    put32(h + MM_J_FILE_HDR - 4, eng_crc32c(0, h, MM_J_FILE_HDR - 4));
}

int mm_jfile_header_check(const uint8_t *h, uint64_t *file_id)
{
    if (memcmp(h, "j\n", 2) != 0 || h[2] != 0x48 || h[3] != 0x41 ||
        get32(h + MM_J_FILE_HDR - 4) != eng_crc32c(0, h, MM_J_FILE_HDR - 4))
        return MD_ECORRUPT;
    *file_id = get64(h + 8);
    return 0;
}

void mm_lsn_encode(uint8_t *p, uint64_t lsn)
{
    memcpy(p, MM_LSN_MAGIC, 8);
    put64(p + 8, lsn);
    put64(p + 16, ~lsn);
}

int mm_lsn_decode(const uint8_t *p, uint64_t *lsn)
{
    if (memcmp(p, MM_LSN_MAGIC, 8) != 0 || get64(p + 16) != ~get64(p + 8))
        return MD_ECORRUPT;
    *lsn = get64(p + 8);
    return 0;
}
