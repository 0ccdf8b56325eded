/*
 * mm_txn.c -- transactions as write intents with pre-images (MongoDB's
 * recoveryUnit()->writing()); commit hands them to the journal.
 *
 * Each mm_writing(t, p, len) locates p in a mapping, records the intent
 * (file number or MM_NS_FILENO, offset, length) and saves the bytes it
 * covers.  Abort copies the pre-images back in reverse order, so the first
 * pre-image of a byte wins; commit passes the intents to mm_journal.c and
 * drops the pre-images.  Intents hold (file, offset), not pointers, so they
 * survive remapping and are exactly what the journal logs.
 *
 * Running out of memory while saving a pre-image would leave a change that
 * cannot be undone, so it stops the process, as MongoDB's fassert does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mm_int.h"

mm_txn *mm_T(eng_txn *t, mm_engine *e)
{
    assert(t && t->engine == &e->base);
    mm_txn *mt = (mm_txn *)t;
    assert(e->txn == mt);
    return mt;
}

static void *grow(void *p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return p;
    size_t n = *cap ? *cap : 64;
    while (n < need)
        n *= 2;
    void *q = realloc(p, n * elem);
    if (!q) {
        fprintf(stderr, "mmapv1: out of memory saving a pre-image; cannot continue\n");
        abort();
    }
    *cap = n;
    return q;
}

/* Is [ofs, ofs+len) of file already covered by one of the last intents? */
static bool covered(const mm_txn *t, int32_t file, int64_t ofs, size_t len)
{
    size_t lo = t->n > 8 ? t->n - 8 : 0;
    for (size_t i = t->n; i-- > lo;) {
        const mm_intent *w = &t->v[i];
        if (w->file == file && w->ofs <= ofs && ofs + (int64_t)len <= w->ofs + w->len)
            return true;
    }
    return false;
}

void mm_writing(mm_txn *t, void *p, size_t len)
{
    int32_t file;
    int64_t ofs;
    assert(t && t->e->txn == t);
    if (len == 0)
        return;
    bool ok = mm_ptr_locate(t->e, p, &file, &ofs);
    assert(ok);
    (void)ok;
    assert(len <= UINT32_MAX);
    if (covered(t, file, ofs, len))
        return;
    t->v = grow(t->v, &t->cap, t->n + 1, sizeof *t->v);
    t->buf = grow(t->buf, &t->bcap, t->blen + len, 1);
    t->v[t->n++] = (mm_intent){file, (uint32_t)len, ofs, t->blen};
    memcpy(t->buf + t->blen, p, len);
    t->blen += len;
}

void mm_w32(mm_txn *t, int32_t *p, int32_t v)
{
    mm_writing(t, p, sizeof *p);
    *p = v;
}

void mm_w64(mm_txn *t, int64_t *p, int64_t v)
{
    mm_writing(t, p, sizeof *p);
    *p = v;
}

void mm_wloc(mm_txn *t, mm_loc *p, mm_loc v)
{
    mm_writing(t, p, sizeof *p);
    *p = v;
}

void mm_wdbl(mm_txn *t, double *p, double v)
{
    mm_writing(t, p, sizeof *p);
    *p = v;
}

__thread mm_txn *mm_txn_mine;

int mm_txn_begin(eng_engine *eng, eng_txn **out)
{
    mm_engine *e = mm_E(eng);
    if (e->txn)
        return MD_EBUSY; /* one transaction at a time in this version */
    if (e->j && mm_journal_failed(e))
        return MD_EIO; /* the journal failed: refuse further writes */
    mm_txn *t = e->spare_txn;
    e->spare_txn = NULL;
    if (!t && !(t = calloc(1, sizeof *t)))
        return MD_ENOMEM;
    t->n = t->blen = 0;
    t->serial = ++e->txn_serial;
    mm_txn_mine = t;
    t->base.engine = eng;
    t->e = e;
    e->txn = t;
    e->meta_dirty = false;
    *out = &t->base;
    return 0;
}

/* End t: kept as the engine's spare, or freed (mm_txn_spare_free at close). */
static void txn_free(mm_txn *t)
{
    mm_engine *e = t->e;
    e->txn = NULL;
    if (mm_txn_mine == t)
        mm_txn_mine = NULL;
    if (!e->spare_txn) {
        e->spare_txn = t;
        return;
    }
    free(t->v);
    free(t->buf);
    free(t);
}

void mm_txn_spare_free(mm_engine *e)
{
    mm_txn *t = e->spare_txn;
    e->spare_txn = NULL;
    if (t) {
        free(t->v);
        free(t->buf);
        free(t);
    }
}

/* msync the span of pages each file's intents touched. */
static int sync_intents(mm_txn *t, md_error *err)
{
    mm_engine *e = t->e;
    long page = sysconf(_SC_PAGESIZE);
    for (int32_t f = MM_NS_FILENO; f < e->nfiles; f++) {
        int64_t lo = INT64_MAX, hi = -1;
        for (size_t i = 0; i < t->n; i++) {
            if (t->v[i].file != f)
                continue;
            if (t->v[i].ofs < lo)
                lo = t->v[i].ofs;
            if (t->v[i].ofs + t->v[i].len > hi)
                hi = t->v[i].ofs + t->v[i].len;
        }
        if (hi < 0)
            continue;
        lo -= lo % page;
        if (msync(mm_file_base(e, f) + lo, (size_t)(hi - lo), MS_SYNC) != 0)
            return md_error_set(err, MD_EIO, MD_CODE_FILE_STREAM_FAILED,
                                "msync of data file %d failed", f);
    }
    return 0;
}

/*
 * Journal on: hand the intents (with the bytes they now hold) to the group
 * commit; durable waits for the section to be fsynced.  Journal off:
 * durable msyncs the touched ranges in place (no atomicity across a crash).
 * A journal that cannot be written refuses the commit; the changes then
 * stay only in the private view, and every later begin fails.
 */
int mm_txn_commit(eng_txn *tx, bool durable, md_error *err)
{
    mm_engine *e = mm_E(tx->engine);
    mm_txn *t = mm_T(tx, e);
    int rc;
    bool remap = false;
    if (e->journal)
        rc = t->n ? mm_journal_commit(e, t, durable, &remap, err) : 0;
    else
        rc = durable ? sync_intents(t, err) : 0;
    e->meta_dirty = false;
    txn_free(t);
    if (remap)
        mm_journal_after_commit(e);
    return rc;
}

void mm_txn_abort(eng_txn *tx)
{
    mm_engine *e = mm_E(tx->engine);
    mm_txn *t = mm_T(tx, e);
    for (size_t i = t->n; i-- > 0;) {
        const mm_intent *w = &t->v[i];
        memcpy(mm_file_base(e, w->file) + w->ofs, t->buf + w->pre, w->len);
    }
    bool reload = e->meta_dirty;
    txn_free(t);
    if (reload) /* the restored bytes are the committed state */
        (void)mm_meta_load(e, NULL);
    e->meta_dirty = false;
}
