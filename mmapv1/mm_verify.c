/*
 * mm_verify.c -- validate: walk every on-disk structure of a namespace (or
 * of the whole engine) and report what is wrong with file numbers and
 * offsets, never trusting a pointer read from disk before checking it.
 *
 * Per namespace: the extent chain (magic, myLoc, xprev/xnext both ways,
 * bounds, length), each extent's record chain (bounds, extentOfs,
 * lengthWithHeaders, prev/next, first/last), nrecords and datasize against
 * the details, and the 26 free lists (inside an extent of this namespace,
 * right bucket, no cycles, and in full mode no overlap with a live record).
 * Capped collections: their one free list, merged neighbours, and the ring
 * (mm_capped_verify: capExtent, capFirstNewRecord, a walk in ring order
 * both ways that must meet every record).
 * Every walk is bounded and uses Brent's cycle detection, so a damaged file
 * yields errors, never a crash or an endless loop.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "mm_int.h"

/* Brent's algorithm over a sequence of locations: true once a location
 * repeats. */
typedef struct cycle {
    mm_loc mark;
    uint64_t power, lam;
} cycle;

static void cycle_init(cycle *c, mm_loc start)
{
    c->mark = start;
    c->power = c->lam = 1;
}

static bool cycle_step(cycle *c, mm_loc l)
{
    if (mm_loc_eq(c->mark, l))
        return true;
    if (c->lam == c->power) {
        c->mark = l;
        c->power *= 2;
        c->lam = 0;
    }
    c->lam++;
    return false;
}

typedef struct range {
    int32_t a;
    int64_t lo, hi; /* [lo, hi) */
    bool live;
} range;

typedef struct vstate {
    const mm_engine *e;
    const mm_ns_slot *d;
    eng_validate *v;
    range *r; /* live records, then free records */
    size_t nr, rcap;
    range *x; /* extents of the namespace */
    size_t nx, xcap;
    int64_t nrecords, datasize, nquant, bytes_hdr, bytes_data;
    int64_t deleted_count, deleted_size;
} vstate;

static void push(range **v, size_t *n, size_t *cap, range r)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 64;
        range *nv = realloc(*v, c * sizeof *nv);
        if (!nv)
            return; /* validate degrades to fewer overlap checks */
        *v = nv;
        *cap = c;
    }
    (*v)[(*n)++] = r;
}

static int range_cmp(const void *a, const void *b)
{
    const range *x = a, *y = b;
    if (x->a != y->a)
        return x->a < y->a ? -1 : 1;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static void verr(vstate *s, const char *ns, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Report an error about namespace ns, prefixed with its name. */
static void verr(vstate *s, const char *ns, const char *fmt, ...)
{
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    eng_validate_error(s->v, "%s: %s", ns, msg);
}

const char *mm_printable(const char *s, size_t n, char *buf, size_t bufn)
{
    size_t o = 0;
    assert(bufn >= 5);
    for (size_t i = 0; i < n && s[i] && o + 5 <= bufn; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '\\')
            buf[o++] = (char)c;
        else
            o += (size_t)snprintf(buf + o, bufn - o, "\\x%02x", c);
    }
    buf[o] = '\0';
    return buf;
}

/* Walk one extent's record chain. */
static void walk_records(vstate *s, mm_loc el, const mm_extent *x)
{
    const char *ns = s->d->name;
    int64_t end = (int64_t)el.ofs + x->length, guard = x->length / MM_REC_HDR + 1;
    mm_loc fr = x->first_record, lr = x->last_record;
    if (mm_loc_is_null(fr) != mm_loc_is_null(lr) ||
        (!mm_loc_is_null(fr) && (fr.a != el.a || lr.a != el.a))) {
        verr(s, ns, "extent %d:0x%x: firstRecord %d:0x%x and lastRecord %d:0x%x disagree", el.a,
             el.ofs, fr.a, fr.ofs, lr.a, lr.ofs);
        return;
    }
    int32_t prev = MM_NULL_OFS;
    cycle cy;
    cycle_init(&cy, mm_loc_null());
    for (int32_t ofs = mm_loc_is_null(fr) ? MM_NULL_OFS : fr.ofs; ofs != MM_NULL_OFS;) {
        if (ofs < el.ofs + MM_EXT_HDR || (ofs & 3) != 0 || ofs + MM_REC_HDR > end) {
            verr(s, ns, "record at file %d offset 0x%x is outside its extent 0x%x..0x%llx", el.a,
                 ofs, el.ofs, (long long)end);
            return;
        }
        if (cycle_step(&cy, mm_loc_make(el.a, ofs)) || --guard < 0) {
            verr(s, ns, "extent %d:0x%x: record chain loops at offset 0x%x", el.a, el.ofs, ofs);
            return;
        }
        const mm_record *r = (const mm_record *)(s->e->files[el.a].map + ofs);
        if (r->len < MM_MIN_REC_LEN || ofs + (int64_t)r->len > end) {
            verr(s, ns, "record at file %d offset 0x%x: lengthWithHeaders %d out of range "
                 "(extent ends at 0x%llx)", el.a, ofs, r->len, (long long)end);
            return;
        }
        if (r->extent_ofs != el.ofs)
            verr(s, ns, "record at file %d offset 0x%x: extentOfs 0x%x, expected 0x%x", el.a,
                 ofs, r->extent_ofs, el.ofs);
        if (r->prev_ofs != prev)
            verr(s, ns, "record at file %d offset 0x%x: prevOfs 0x%x, expected 0x%x", el.a, ofs,
                 r->prev_ofs, prev);
        int32_t bl = mm_le32((const uint8_t *)(r + 1));
        if (s->d->kind != MM_KIND_INDEX && (bl < 5 || bl > r->len - MM_REC_HDR))
            verr(s, ns, "record at file %d offset 0x%x: BSON length %d does not fit netLength %d",
                 el.a, ofs, bl, r->len - MM_REC_HDR);
        s->nrecords++;
        s->datasize += r->len - MM_REC_HDR;
        s->nquant += mm_is_quantized(r->len);
        s->bytes_hdr += r->len;
        s->bytes_data += s->d->kind == MM_KIND_INDEX ? r->len - MM_REC_HDR : bl;
        if (s->v->full)
            push(&s->r, &s->nr, &s->rcap, (range){el.a, ofs, ofs + r->len, true});
        prev = ofs;
        ofs = r->next_ofs;
    }
    if ((mm_loc_is_null(lr) ? MM_NULL_OFS : lr.ofs) != prev)
        verr(s, ns, "extent %d:0x%x: lastRecord 0x%x, but the chain ends at 0x%x", el.a, el.ofs,
             lr.ofs, prev);
}

/* Check the header of the extent at l; false if it cannot be walked. */
static bool check_extent(vstate *s, mm_loc l, mm_loc prev)
{
    const char *ns = s->d->name;
    const mm_engine *e = s->e;
    if (l.a < 0 || l.a >= e->nfiles || l.ofs < MM_DFH_SIZE || (l.ofs & 0xfff) != 0 ||
        (int64_t)l.ofs + MM_EXT_HDR > e->files[l.a].len) {
        verr(s, ns, "extent location %d:0x%x out of bounds", l.a, l.ofs);
        return false;
    }
    const mm_extent *x = (const mm_extent *)(e->files[l.a].map + l.ofs);
    const mm_dfh *h = mm_dfh_at(e, l.a);
    if (x->magic != MM_EXTENT_MAGIC) {
        verr(s, ns, "extent at file %d offset 0x%x: bad magic 0x%08x (expected 0x%08x)", l.a,
             l.ofs, x->magic, MM_EXTENT_MAGIC);
        return false;
    }
    if (!mm_loc_eq(x->my_loc, l))
        verr(s, ns, "extent at file %d offset 0x%x: myLoc is %d:0x%x", l.a, l.ofs,
             x->my_loc.a, x->my_loc.ofs);
    if (x->length < MM_MIN_EXTENT || (int64_t)l.ofs + x->length > h->unused.ofs ||
        (int64_t)l.ofs + x->length > e->files[l.a].len) {
        verr(s, ns, "extent at file %d offset 0x%x: length %d runs past the allocated area "
             "(0x%x)", l.a, l.ofs, x->length, h->unused.ofs);
        return false;
    }
    if (!mm_loc_eq(x->xprev, prev))
        verr(s, ns, "extent at file %d offset 0x%x: xprev %d:0x%x, expected %d:0x%x", l.a,
             l.ofs, x->xprev.a, x->xprev.ofs, prev.a, prev.ofs);
    if (strncmp(x->ns, ns, sizeof x->ns) != 0) {
        char pr[4 * sizeof x->ns + 1];
        verr(s, ns, "extent at file %d offset 0x%x: nsDiagnostic is \"%s\"", l.a, l.ofs,
             mm_printable(x->ns, sizeof x->ns, pr, sizeof pr));
    }
    return true;
}

static void walk_extents(vstate *s)
{
    mm_loc prev = mm_loc_null(), l = s->d->first_extent;
    int64_t guard = mm_max_chain(s->e);
    cycle cy;
    cycle_init(&cy, mm_loc_null());
    while (!mm_loc_is_null(l)) {
        if (cycle_step(&cy, l) || --guard < 0) {
            verr(s, s->d->name, "extent chain loops at %d:0x%x", l.a, l.ofs);
            return;
        }
        if (!check_extent(s, l, prev))
            return;
        /* not mm_extent_at(): that refuses an extent whose myLoc is damaged,
         * which check_extent() reported and which need not stop the walk */
        const mm_extent *x = (const mm_extent *)(s->e->files[l.a].map + l.ofs);
        push(&s->x, &s->nx, &s->xcap, (range){l.a, l.ofs, (int64_t)l.ofs + x->length, true});
        walk_records(s, l, x);
        prev = l;
        l = x->xnext;
    }
    if (!mm_loc_eq(s->d->last_extent, prev))
        verr(s, s->d->name, "lastExtent is %d:0x%x, but the chain ends at %d:0x%x",
             s->d->last_extent.a, s->d->last_extent.ofs, prev.a, prev.ofs);
}

/* The range of v (sorted) containing [a:lo, hi), or NULL. */
static const range *find_range(const range *v, size_t n, int32_t a, int64_t lo, int64_t hi)
{
    size_t i = 0, j = n;
    while (i < j) {
        size_t m = (i + j) / 2;
        if (v[m].a < a || (v[m].a == a && v[m].hi <= lo))
            i = m + 1;
        else
            j = m;
    }
    return i < n && v[i].a == a && v[i].lo <= lo && hi <= v[i].hi ? &v[i] : NULL;
}

static void walk_free_list(vstate *s, int b)
{
    const char *ns = s->d->name;
    int64_t guard = mm_total_bytes(s->e) / MM_REC_HDR + 1;
    cycle cy;
    cycle_init(&cy, mm_loc_null());
    for (mm_loc l = s->d->deleted[b]; !mm_loc_is_null(l);) {
        if (cycle_step(&cy, l) || --guard < 0) {
            verr(s, ns, "free list %d loops at %d:0x%x", b, l.a, l.ofs);
            return;
        }
        const mm_deleted *dr = (const mm_deleted *)mm_record_at(s->e, l);
        const range *x = dr ? find_range(s->x, s->nx, l.a, l.ofs, l.ofs + MM_REC_HDR) : NULL;
        if (!x) {
            verr(s, ns, "free list %d: entry %d:0x%x is not inside an extent of this namespace",
                 b, l.a, l.ofs);
            return;
        }
        if (dr->len < MM_REC_HDR || l.ofs + (int64_t)dr->len > x->hi) {
            verr(s, ns, "free record at file %d offset 0x%x: length %d runs past its extent",
                 l.a, l.ofs, dr->len);
            return;
        }
        if (dr->extent_ofs != x->lo)
            verr(s, ns, "free record at file %d offset 0x%x: extentOfs 0x%x, expected 0x%llx",
                 l.a, l.ofs, dr->extent_ofs, (long long)x->lo);
        if (!s->d->is_capped && mm_bucket(dr->len) != b)
            verr(s, ns, "free record at file %d offset 0x%x of %d bytes is in bucket %d, "
                 "expected %d", l.a, l.ofs, dr->len, b, mm_bucket(dr->len));
        s->deleted_count++;
        s->deleted_size += dr->len;
        if (s->v->full)
            push(&s->r, &s->nr, &s->rcap, (range){l.a, l.ofs, l.ofs + dr->len, false});
        l = dr->next;
    }
}

/* Full mode: no two records (live or free) may overlap. */
static void check_overlaps(vstate *s)
{
    if (s->nr > 1)
        qsort(s->r, s->nr, sizeof *s->r, range_cmp);
    for (size_t i = 1; i < s->nr; i++) {
        const range *p = &s->r[i - 1], *q = &s->r[i];
        if (p->a == q->a && q->lo < p->hi)
            verr(s, s->d->name, "%s record at file %d offset 0x%llx overlaps %s record at "
                 "0x%llx", q->live ? "live" : "free", q->a, (long long)q->lo,
                 p->live ? "live" : "free", (long long)p->lo);
    }
}

void mm_verify_ns(const mm_engine *e, int32_t slot, eng_validate *v, bool with_info)
{
    vstate s = {.e = e, .d = mm_ns_at(e, slot), .v = v};
    walk_extents(&s);
    if (s.nx > 1)
        qsort(s.x, s.nx, sizeof *s.x, range_cmp);
    for (int b = 0; b < MM_NBUCKETS; b++)
        walk_free_list(&s, b);
    if (v->full)
        check_overlaps(&s);
    if (s.nrecords != s.d->nrecords)
        verr(&s, s.d->name, "nrecords is %lld in the namespace details, %lld records found",
             (long long)s.d->nrecords, (long long)s.nrecords);
    if (s.datasize != s.d->datasize)
        verr(&s, s.d->name, "datasize is %lld in the namespace details, %lld found",
             (long long)s.d->datasize, (long long)s.datasize);
    if (s.d->is_capped)
        mm_capped_verify(e, slot, v, s.nrecords);
    if (with_info) {
        BSON_APPEND_INT64(&v->info, "nrecords", s.nrecords);
        BSON_APPEND_INT64(&v->info, "datasize", s.datasize);
        BSON_APPEND_INT64(&v->info, "extentCount", (int64_t)s.nx);
        BSON_APPEND_INT64(&v->info, "deletedCount", s.deleted_count);
        BSON_APPEND_INT64(&v->info, "deletedSize", s.deleted_size);
        BSON_APPEND_INT64(&v->info, "nQuantizedSize", s.nquant);
        BSON_APPEND_INT64(&v->info, "bytesWithHeaders", s.bytes_hdr);
        BSON_APPEND_INT64(&v->info, "bytesWithoutHeaders", s.bytes_data);
        if (s.d->is_capped) {
            BSON_APPEND_BOOL(&v->info, "capped", true);
            BSON_APPEND_INT64(&v->info, "max", s.d->capped_max);
        }
    }
    free(s.r);
    free(s.x);
}

/* journal: false and the last run did not close cleanly, or the journal
 * was damaged before its end: whatever the walk finds, the files cannot be
 * vouched for. */
static void note_unclean(const mm_engine *e, eng_validate *v)
{
    if (e->unclean_nojournal)
        eng_validate_error(v, "the database was not shut down cleanly while running without "
                              "a journal (journal: false): data files may be inconsistent "
                              "and writes since the last flush may be lost");
    if (e->journal_damaged)
        eng_validate_error(v, "journal replay stopped at a damaged section before the end of "
                              "the journal%s%s: data files may be inconsistent",
                           e->jdamage[0] ? ", in " : "", e->jdamage);
}

int mm_rs_validate(eng_rs *rs_, eng_validate *v)
{
    mm_rs *rs = (mm_rs *)rs_;
    if (!mm_rs_details(rs))
        return MD_NOTFOUND;
    note_unclean(rs->e, v);
    mm_verify_ns(rs->e, rs->slot, v, true);
    return 0;
}

/* ---- the whole engine --------------------------------------------------------- */

/* One file's extent free list: valid extents of this file, linked both ways. */
static void verify_free_extents(const mm_engine *e, int n, eng_validate *v, range **xs,
                                size_t *nx, size_t *xcap)
{
    const mm_dfh *h = mm_dfh_at(e, n);
    mm_loc prev = mm_loc_null();
    int64_t guard = mm_max_chain(e);
    cycle cy;
    cycle_init(&cy, mm_loc_null());
    for (mm_loc l = h->free_start; !mm_loc_is_null(l);) {
        const mm_extent *x = mm_extent_at(e, l);
        if (!x || l.a != n || cycle_step(&cy, l) || --guard < 0) {
            eng_validate_error(v, "data file %d: extent free list entry %d:0x%x is not a valid "
                               "extent of this file (or the list loops)", n, l.a, l.ofs);
            return;
        }
        if (!mm_loc_eq(x->xprev, prev))
            eng_validate_error(v, "data file %d: free extent 0x%x has xprev %d:0x%x, expected "
                               "%d:0x%x", n, l.ofs, x->xprev.a, x->xprev.ofs, prev.a, prev.ofs);
        push(xs, nx, xcap, (range){n, l.ofs, (int64_t)l.ofs + x->length, false});
        prev = l;
        l = x->xnext;
    }
    if (!mm_loc_eq(h->free_end, prev))
        eng_validate_error(v, "data file %d: freeListEnd is %d:0x%x, the list ends at %d:0x%x",
                           n, h->free_end.a, h->free_end.ofs, prev.a, prev.ofs);
}

/* Collect the extents of every namespace and free list; none may overlap. */
static void verify_extent_overlaps(const mm_engine *e, eng_validate *v, range *xs, size_t nx)
{
    for (uint32_t i = 1; i <= e->nslots; i++) {
        const mm_ns_slot *d = mm_ns_at(e, (int32_t)i);
        if (d->hash <= 1)
            continue;
        mm_loc *locs;
        int32_t n;
        if (mm_extent_chain(e, d->first_extent, &locs, &n) != 0)
            continue; /* reported by the namespace walk */
        for (int32_t k = 0; k < n; k++) {
            const mm_extent *x = mm_extent_at(e, locs[k]);
            size_t cap = nx + 1;
            range *nv = realloc(xs, cap * sizeof *nv);
            if (!nv)
                break;
            xs = nv;
            xs[nx++] = (range){locs[k].a, locs[k].ofs, (int64_t)locs[k].ofs + x->length, true};
        }
        free(locs);
    }
    if (nx > 1)
        qsort(xs, nx, sizeof *xs, range_cmp);
    for (size_t i = 1; i < nx; i++)
        if (xs[i].a == xs[i - 1].a && xs[i].lo < xs[i - 1].hi)
            eng_validate_error(v, "data file %d: extent at 0x%llx overlaps extent at 0x%llx",
                               xs[i].a, (long long)xs[i].lo, (long long)xs[i - 1].lo);
    free(xs);
}

int mm_verify(eng_engine *eng, eng_validate *v)
{
    mm_engine *e = mm_E(eng);
    range *xs = NULL;
    size_t nx = 0, xcap = 0;
    note_unclean(e, v);
    for (int n = 0; n < e->nfiles; n++) {
        const mm_dfh *h = mm_dfh_at(e, n);
        if (h->unused.a != n || (int64_t)h->unused.ofs + h->unused_length + 16 != h->file_length)
            eng_validate_error(v, "data file %d: header unused %d:0x%x / unusedLength %d do "
                               "not add up to fileLength %d", n, h->unused.a, h->unused.ofs,
                               h->unused_length, h->file_length);
        verify_free_extents(e, n, v, &xs, &nx, &xcap);
    }
    for (uint32_t i = 1; i <= e->nslots; i++)
        if (mm_ns_at(e, (int32_t)i)->hash > 1)
            mm_verify_ns(e, (int32_t)i, v, false);
    if (v->full)
        verify_extent_overlaps(e, v, xs, nx);
    else
        free(xs);
    return 0;
}
