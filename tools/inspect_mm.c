/*
 * inspect_mm.c -- `minidoc inspect` for mmapv1: the .ns file and the data
 * files read as mm_int.h describes them, without the engine: every
 * namespace's extent chain and, in each extent, its record chain (used
 * bytes, padding), the deleted records of each bucket, each file's free
 * extent list and never-allocated tail.  The files are mapped PROT_READ
 * (MAP_PRIVATE), never written, and no lock is taken; run it on a closed
 * database to see what the last flush wrote (after an unclean stop the
 * journal's last commits are not in the files until the next open).
 * Every pointer is bounds-checked before it is followed and every walk is
 * bounded, so a damaged file is drawn up to the damage, which becomes a
 * damage region naming what did not check out.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bson/bson.h>

#include "inspect.h"
#include "mm_int.h"

#define WALK_MAX 10000000

typedef struct mmf {
    const uint8_t *p;
    uint64_t size;
    ins_file *f;
} mmf;

typedef struct mm_ctx {
    ins_db *db;
    mmf files[MM_MAX_FILES > 1024 ? 1024 : MM_MAX_FILES];
    int nfiles;
} mm_ctx;

static const uint8_t *map_ro(const char *path, uint64_t *size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0)
        return NULL;
    if (fstat(fd, &st) != 0 || st.st_size == 0) {
        close(fd);
        *size = 0;
        return NULL;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return NULL;
    *size = (uint64_t)st.st_size;
    return p;
}

/* The bytes [l.ofs, l.ofs + len) of file l.a, or NULL. */
static const void *at(mm_ctx *c, mm_loc l, uint64_t len)
{
    if (l.a < 0 || l.a >= c->nfiles || l.ofs < 0 || !c->files[l.a].p)
        return NULL;
    if ((uint64_t)l.ofs + len > c->files[l.a].size)
        return NULL;
    return c->files[l.a].p + l.ofs;
}

static ins_file *file_of(mm_ctx *c, mm_loc l)
{
    return l.a >= 0 && l.a < c->nfiles ? c->files[l.a].f : c->files[0].f;
}

/* The hex of the document's _id element (type, name, value), for --diff;
 * NULL when the document has none. */
static char *hex_id(const uint8_t *bson, int32_t len)
{
    bson_t doc;
    bson_iter_t it;
    if (!bson_init_static(&doc, bson, (size_t)len) || !bson_iter_init_find(&it, &doc, "_id"))
        return NULL;
    size_t n = it.next_off - it.off;
    if (n > 256)
        n = 256;
    char *s = malloc(n * 2 + 1);
    for (size_t k = 0; k < n; k++)
        sprintf(s + 2 * k, "%02x", bson[it.off + k]);
    return s;
}

typedef struct ns_stats {
    int64_t extents, ext_bytes, records, used, padding, deleted, deleted_bytes;
    int64_t per_bucket[MM_NBUCKETS];
} ns_stats;

static void walk_records(mm_ctx *c, const mm_ns_slot *s, int owner_file_idx, mm_loc ext_loc,
                         const mm_extent *e, ns_stats *st)
{
    ins_file *f = c->files[ext_loc.a].f;
    int owner = ins_owner(f, s->name);
    mm_loc r = e->first_record;
    uint64_t lo = (uint64_t)ext_loc.ofs + MM_EXT_HDR, hi = (uint64_t)ext_loc.ofs + e->length;
    (void)owner_file_idx;
    for (long guard = 0; !mm_loc_is_null(r) && guard < WALK_MAX; guard++) {
        const mm_record *rec = at(c, r, MM_REC_HDR);
        if (r.a != ext_loc.a || (uint64_t)r.ofs < lo || (uint64_t)r.ofs + MM_REC_HDR > hi ||
            !rec) {
            ins_damage(c->db, f, r.a == ext_loc.a && r.ofs >= 0 ? (uint64_t)r.ofs : lo, 16,
                       "%s: record link %d:0x%x leaves its extent at 0x%x", s->name, r.a,
                       (unsigned)r.ofs, (unsigned)ext_loc.ofs);
            return;
        }
        if (rec->len < MM_MIN_REC_LEN || (uint64_t)r.ofs + (uint64_t)rec->len > hi ||
            rec->extent_ofs != ext_loc.ofs) {
            ins_damage(c->db, f, (uint64_t)r.ofs, 16,
                       "%s: record at 0x%x: length %d / extentOfs 0x%x do not fit its extent",
                       s->name, (unsigned)r.ofs, rec->len, (unsigned)rec->extent_ofs);
            return;
        }
        const uint8_t *data = (const uint8_t *)rec + MM_REC_HDR;
        int32_t blen;
        memcpy(&blen, data, 4);
        ins_region *g = ins_add(f, s->kind == MM_KIND_COLL ? INS_RECORD : INS_BUCKET,
                                (uint64_t)r.ofs, (uint64_t)rec->len);
        g->owner = owner;
        if (s->kind == MM_KIND_INDEX) {
            /* a B-tree bucket (mm_int.h): used = header, slots and live keys */
            uint16_t n, top, garbage;
            memcpy(&n, data + 6, 2);
            memcpy(&top, data + 8, 2);
            memcpy(&garbage, data + 10, 2);
            if (rec->len - MM_REC_HDR < MM_BUCKET_SIZE || memcmp(data, "MBT1", 4) != 0 ||
                top > MM_BUCKET_SIZE || 48u + 20u * n > top ||
                garbage > MM_BUCKET_SIZE - top) {
                g->kind = INS_DAMAGE;
                ins_appendf(&g->note, "%s: bucket at 0x%x: bad header (magic, n, top)", s->name,
                            (unsigned)r.ofs);
                c->db->damaged++;
            } else {
                g->used = MM_REC_HDR + 48u + 20u * n + (MM_BUCKET_SIZE - top - garbage);
                st->records++;
                st->used += (int64_t)g->used - MM_REC_HDR;
                st->padding += rec->len - (int64_t)g->used;
            }
        } else if (blen < 5 || blen > rec->len - MM_REC_HDR) {
            g->kind = INS_DAMAGE;
            ins_appendf(&g->note, "%s: record at 0x%x holds a BSON length %d that does not fit "
                        "its %d bytes", s->name, (unsigned)r.ofs, blen, rec->len);
            c->db->damaged++;
        } else {
            g->used = MM_REC_HDR + (uint64_t)blen;
            char *id = s->kind == MM_KIND_COLL ? hex_id(data, blen) : NULL;
            if (id) /* the namespace and the _id: one document */
                ins_appendf(&g->key, "%s:%s", s->name, id);
            free(id);
            st->records++;
            st->used += blen;
            st->padding += rec->len - MM_REC_HDR - blen;
        }
        if (rec->next_ofs == MM_NULL_OFS)
            break;
        r.ofs = rec->next_ofs;
    }
}

static void walk_ns(mm_ctx *c, const mm_ns_slot *s, char **text)
{
    ns_stats st = {0};
    const char *kind = s->kind == MM_KIND_COLL    ? "collection"
                       : s->kind == MM_KIND_INDEX ? "index"
                                                  : "catalog";
    mm_loc l = s->first_extent;
    for (long guard = 0; !mm_loc_is_null(l) && guard < 100000; guard++) {
        const mm_extent *e = at(c, l, MM_EXT_HDR);
        if (!e || e->magic != MM_EXTENT_MAGIC || !mm_loc_eq(e->my_loc, l) ||
            e->length < MM_MIN_EXTENT || !at(c, l, (uint64_t)e->length)) {
            ins_damage(c->db, file_of(c, l), l.ofs >= 0 ? (uint64_t)l.ofs : 0, MM_EXT_HDR,
                       "%s: extent at %d:0x%x: bad header (magic, myLoc or length)", s->name,
                       l.a, (unsigned)l.ofs);
            break;
        }
        ins_file *f = c->files[l.a].f;
        ins_region *g = ins_add(f, INS_EXTENT, (uint64_t)l.ofs, (uint64_t)e->length);
        g->owner = ins_owner(f, s->name);
        g->used = MM_EXT_HDR;
        st.extents++;
        st.ext_bytes += e->length;
        walk_records(c, s, l.a, l, e, &st);
        l = e->xnext;
    }
    for (int b = 0; b < MM_NBUCKETS; b++) {
        mm_loc d = s->deleted[b];
        for (long guard = 0; !mm_loc_is_null(d) && guard < WALK_MAX; guard++) {
            const mm_deleted *dr = at(c, d, MM_REC_HDR);
            if (!dr || dr->len < MM_REC_HDR || !at(c, d, (uint64_t)dr->len)) {
                ins_damage(c->db, file_of(c, d), d.ofs >= 0 ? (uint64_t)d.ofs : 0, 16,
                           "%s: deleted record %d:0x%x in bucket %d is out of bounds", s->name,
                           d.a, (unsigned)d.ofs, b);
                break;
            }
            ins_region *g = ins_add(c->files[d.a].f, INS_DELETED, (uint64_t)d.ofs,
                                    (uint64_t)dr->len);
            g->bucket = b;
            g->owner = ins_owner(c->files[d.a].f, s->name);
            st.deleted++;
            st.deleted_bytes += dr->len;
            st.per_bucket[b]++;
            d = dr->next;
        }
    }
    int64_t space = st.ext_bytes - st.extents * MM_EXT_HDR;
    ins_appendf(text, "  %s %s%s: %lld extent%s (%lld bytes), %lld %s (%lld bytes used, "
                "%lld of padding), %lld deleted records (%lld bytes)\n",
                kind, s->name, s->is_capped ? " (capped)" : "", (long long)st.extents,
                st.extents == 1 ? "" : "s", (long long)st.ext_bytes, (long long)st.records,
                s->kind == MM_KIND_INDEX ? "buckets" : "records",
                (long long)st.used, (long long)st.padding, (long long)st.deleted,
                (long long)st.deleted_bytes);
    if (s->kind == MM_KIND_COLL)
        ins_appendf(text, "      fill %.1f%%, padding %.1f%% of records, fragmentation %.1f%% "
                    "(deleted / extent space), nrecords %lld, inserts %lld, updates %lld "
                    "(in place %lld, moves %lld), paddingFactor %.3f, flags 0x%x\n",
                    space > 0 ? 100.0 * (double)(st.used + st.records * MM_REC_HDR) / space : 0,
                    st.used + st.padding > 0 ? 100.0 * st.padding / (st.used + st.padding) : 0,
                    space > 0 ? 100.0 * st.deleted_bytes / space : 0, (long long)s->nrecords,
                    (long long)s->n_inserts, (long long)s->n_updates, (long long)s->n_inplace,
                    (long long)s->n_moves, s->padding_factor, (unsigned)s->user_flags);
    if (st.deleted) {
        ins_appendf(text, "      deleted records per bucket:");
        for (int b = 0; b < MM_NBUCKETS; b++)
            if (st.per_bucket[b])
                ins_appendf(text, " %d:%lld", mm_bucket_sizes[b], (long long)st.per_bucket[b]);
        ins_appendf(text, "\n");
    }
    if (st.records != s->nrecords && s->kind == MM_KIND_COLL)
        ins_appendf(text, "      note: the record chains hold %lld records, the namespace "
                    "says %lld\n", (long long)st.records, (long long)s->nrecords);
}

int ins_read_mm(ins_db *db, const char *dir, const char *dbname)
{
    mm_ctx *c = calloc(1, sizeof *c);
    char path[4096];
    uint64_t nssize = 0;
    c->db = db;
    db->engine = strdup("mmapv1");
    snprintf(path, sizeof path, "%s/%s.ns", dir, dbname);
    const uint8_t *ns = map_ro(path, &nssize);
    if (!ns) {
        fprintf(stderr, "minidoc inspect: cannot read %s: %s\n", path,
                errno ? strerror(errno) : "empty file");
        free(c);
        return -1;
    }
    for (int n = 0; n < (int)(sizeof c->files / sizeof c->files[0]); n++) {
        char name[300];
        snprintf(name, sizeof name, "%s.%d", dbname, n);
        snprintf(path, sizeof path, "%s/%s", dir, name);
        uint64_t size = 0;
        const uint8_t *p = map_ro(path, &size);
        if (!p && errno == ENOENT)
            break;
        c->files[n].p = p;
        c->files[n].size = size;
        c->files[n].f = ins_add_file(db, name, size);
        c->nfiles = n + 1;
    }
    ins_file *nsf = ins_add_file(db, "", nssize);
    free(nsf->name);
    nsf->name = malloc(strlen(dbname) + 4);
    sprintf(nsf->name, "%s.ns", dbname);
    const mm_ns_header *h = (const mm_ns_header *)ns;
    ins_add(nsf, INS_HEADER, 0, MM_NS_SLOT_SIZE);
    char *text = NULL;
    if (nssize < MM_NS_SLOT_SIZE || memcmp(h->magic, MM_NS_MAGIC, 8) != 0 ||
        h->slot_size != MM_NS_SLOT_SIZE ||
        (uint64_t)(h->nslots + 1) * MM_NS_SLOT_SIZE > nssize) {
        ins_damage(db, nsf, 0, MM_NS_SLOT_SIZE, "%s.ns: bad header (magic, slot size or slot "
                   "count)", dbname);
    } else {
        ins_appendf(&db->summary, "mmapv1 database '%s' in %s: %d data file%s, %u namespace "
                    "slots, %lld moves in all%s\n", dbname, dir, c->nfiles,
                    c->nfiles == 1 ? "" : "s", h->nslots, (long long)h->total_moves,
                    h->flags & MM_NSF_NOJOURNAL ? ", opened without a journal and not closed "
                                                  "cleanly"
                                                : "");
        for (int pass = 1; pass <= 3; pass++)
            for (uint32_t k = 1; k <= h->nslots; k++) {
                const mm_ns_slot *s = (const mm_ns_slot *)(ns + (uint64_t)k * MM_NS_SLOT_SIZE);
                if (s->hash <= 1 || (int)s->kind != pass)
                    continue;
                if (memchr(s->name, 0, sizeof s->name) == NULL || s->kind > 3) {
                    ins_damage(db, nsf, (uint64_t)k * MM_NS_SLOT_SIZE, MM_NS_SLOT_SIZE,
                               "%s.ns: slot %u is damaged", dbname, k);
                    continue;
                }
                ins_region *g = ins_add(nsf, INS_HEADER, (uint64_t)k * MM_NS_SLOT_SIZE,
                                        MM_NS_SLOT_SIZE);
                g->owner = ins_owner(nsf, s->name);
                walk_ns(c, s, &text);
            }
    }
    for (int n = 0; n < c->nfiles; n++) {
        ins_file *f = c->files[n].f;
        const mm_dfh *d = (const mm_dfh *)c->files[n].p;
        if (!d || c->files[n].size < MM_DFH_SIZE || memcmp(d->magic, MM_DFH_MAGIC, 8) != 0 ||
            d->version != MM_FILE_VERSION || (uint64_t)d->file_length > c->files[n].size) {
            ins_damage(db, f, 0, MM_DFH_SIZE, "%s: bad data file header", f->name);
            continue;
        }
        ins_add(f, INS_HEADER, 0, MM_DFH_SIZE);
        int64_t free_n = 0, free_b = 0;
        mm_loc l = d->free_start;
        for (long guard = 0; !mm_loc_is_null(l) && guard < 100000; guard++) {
            const mm_extent *e = at(c, l, MM_EXT_HDR);
            if (!e || e->magic != MM_EXTENT_MAGIC || e->length < MM_MIN_EXTENT ||
                !at(c, l, (uint64_t)e->length)) {
                ins_damage(db, file_of(c, l), l.ofs >= 0 ? (uint64_t)l.ofs : 0, MM_EXT_HDR,
                           "free extent list: bad extent at %d:0x%x", l.a, (unsigned)l.ofs);
                break;
            }
            ins_add(c->files[l.a].f, INS_FREE_EXT, (uint64_t)l.ofs, (uint64_t)e->length);
            free_n++;
            free_b += e->length;
            l = e->xnext;
        }
        uint64_t tail = 0;
        if (!mm_loc_is_null(d->unused) && d->unused.ofs > 0 &&
            (uint64_t)d->unused.ofs <= c->files[n].size) {
            tail = (uint64_t)d->file_length - (uint64_t)d->unused.ofs;
            if (tail)
                ins_add(f, INS_UNUSED, (uint64_t)d->unused.ofs, tail);
        }
        ins_appendf(&f->summary, "%s: %llu bytes, header %d, never allocated %llu (%.1f%%), "
                    "free extents %lld (%lld bytes)\n", f->name,
                    (unsigned long long)c->files[n].size, MM_DFH_SIZE,
                    (unsigned long long)tail,
                    c->files[n].size ? 100.0 * tail / c->files[n].size : 0.0,
                    (long long)free_n, (long long)free_b);
    }
    if (text) {
        ins_appendf(&db->summary, "%s", text);
        free(text);
    }
    for (int n = 0; n < c->nfiles; n++)
        if (c->files[n].p)
            munmap((void *)c->files[n].p, c->files[n].size);
    munmap((void *)ns, nssize);
    free(c);
    return 0;
}
