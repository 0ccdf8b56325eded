/*
 * mm_ns.c -- the namespace index (MongoDB's NamespaceIndex over the .ns
 * file) and the catalog built on it.
 *
 * The .ns file is a hash table of 640-byte slots, each a namespace name and
 * its NamespaceDetails (extent chain, free list heads, stats, counters).
 * Slot 0 is a header.  Lookups hash the name as MongoDB's Namespace::hash
 * and probe linearly; a removed slot keeps hash 1 (a tombstone) so probe
 * chains stay intact, where MongoDB instead scanned a fixed maxChain.
 *
 * The catalog (eng_meta_*) lives in the internal namespace
 * "<db>.system.namespaces" as records {k: key, v: value}.  A sorted
 * key -> location array is built at open and rebuilt after an abort that
 * touched the catalog, so it never disagrees with the mapped records.
 */
#include <stdio.h>
#include <stdlib.h>

#include "mm_int.h"

uint32_t mm_ns_hash(const char *name)
{
    uint32_t x = 0;
    for (const char *p = name; *p; p++)
        x = x * 131 + (uint32_t)(int32_t)*p;
    return (x & 0x7fffffff) | 0x8000000;
}

mm_ns_header *mm_ns_header_of(const mm_engine *e)
{
    return (mm_ns_header *)e->ns.map;
}

static bool slot_live(const mm_ns_slot *d)
{
    return d->hash > 1;
}

/* Find `name`; *free_slot (if not NULL) gets the first reusable slot seen. */
static int32_t ns_probe(const mm_engine *e, const char *name, int32_t *free_slot)
{
    uint32_t h = mm_ns_hash(name);
    uint32_t i = h % e->nslots;
    if (free_slot)
        *free_slot = -1;
    for (uint32_t n = 0; n < e->nslots; n++, i = (i + 1) % e->nslots) {
        mm_ns_slot *d = mm_ns_at(e, (int32_t)i + 1);
        if (d->hash <= 1 && free_slot && *free_slot < 0)
            *free_slot = (int32_t)i + 1;
        if (d->hash == 0)
            return -1;
        if (d->hash == h && strncmp(d->name, name, sizeof d->name) == 0)
            return (int32_t)i + 1;
    }
    return -1;
}

int32_t mm_ns_find(const mm_engine *e, const char *name)
{
    if (strlen(name) >= sizeof(((mm_ns_slot *)0)->name))
        return -1;
    return ns_probe(e, name, NULL);
}

/* Add namespace `name` with empty details (NamespaceIndex::add_ns). */
int mm_ns_add(mm_engine *e, mm_txn *t, const char *name, int kind, int32_t *slot,
              md_error *err)
{
    int32_t free_slot;
    size_t len = strlen(name);
    if (len == 0 || len >= sizeof(((mm_ns_slot *)0)->name))
        return md_error_set(err, MD_EINVAL, MD_CODE_INVALID_NAMESPACE,
                            "invalid namespace name '%s'", name);
    if (ns_probe(e, name, &free_slot) >= 0)
        return md_error_set(err, MD_EEXISTS, MD_CODE_NAMESPACE_EXISTS,
                            "namespace %s already exists", name);
    if (free_slot < 0)
        return md_error_set(err, MD_ENOSPC, MD_CODE_OUT_OF_DISK_SPACE,
                            "namespace index (.ns file) is full: cannot add %s", name);
    mm_ns_slot *d = mm_ns_at(e, free_slot);
    mm_writing(t, d, sizeof *d);
    memset(d, 0, sizeof *d);
    d->hash = mm_ns_hash(name);
    d->kind = (uint32_t)kind;
    memcpy(d->name, name, len);
    d->first_extent = d->last_extent = d->index_head = mm_loc_null();
    for (int b = 0; b < MM_NBUCKETS; b++)
        d->deleted[b] = mm_loc_null();
    d->padding_factor = 1.0;
    d->user_flags = MM_FLAG_POWEROF2;
    *slot = free_slot;
    return 0;
}

void mm_ns_remove(mm_engine *e, mm_txn *t, int32_t slot)
{
    mm_ns_slot *d = mm_ns_at(e, slot);
    assert(slot_live(d));
    mm_writing(t, d, sizeof *d);
    memset(d, 0, sizeof *d);
    d->hash = 1;
}

/* ---- open-time checks ------------------------------------------------------ */

static bool loc_in_file(const mm_engine *e, mm_loc l, int64_t len)
{
    return l.ofs >= MM_DFH_SIZE && (l.ofs & 3) == 0 && mm_ptr(e, l, len) != NULL;
}

/* Why l is not a valid extent, naming the data file and offset. */
static const char *why_not_extent(const mm_engine *e, mm_loc l, char *buf, size_t n)
{
    if (l.a < 0 || l.a >= e->nfiles) {
        snprintf(buf, n, "there is no data file %d", l.a);
        return buf;
    }
    const mm_extent *x = (const mm_extent *)mm_ptr(e, l, MM_EXT_HDR);
    if (!x || l.ofs < MM_DFH_SIZE || (l.ofs & 0xfff) != 0)
        snprintf(buf, n, "%s.%d offset 0x%x is out of bounds or misaligned", e->db, l.a, l.ofs);
    else if (x->magic != MM_EXTENT_MAGIC)
        snprintf(buf, n, "%s.%d offset 0x%x: bad magic 0x%08x", e->db, l.a, l.ofs, x->magic);
    else
        snprintf(buf, n, "%s.%d offset 0x%x: bad myLoc or length", e->db, l.a, l.ofs);
    return buf;
}

static int check_slot(const mm_engine *e, int32_t i, const char *path, md_error *err)
{
    const mm_ns_slot *d = mm_ns_at(e, i);
    long long at = (long long)i * MM_NS_SLOT_SIZE;
    if (d->hash <= 1)
        return 0;
    if (!(d->hash & 0x8000000) || memchr(d->name, 0, sizeof d->name) == NULL)
        return ENG_CORRUPT(err, "%s: namespace slot %d at offset 0x%llx is garbage", path, i,
                           at);
    char pr[4 * sizeof d->name + 1];
    if (d->hash != mm_ns_hash(d->name))
        return ENG_CORRUPT(err, "%s: namespace slot %d at offset 0x%llx: hash 0x%x does not "
                           "match name \"%s\"", path, i, at, d->hash,
                           mm_printable(d->name, sizeof d->name, pr, sizeof pr));
    if (d->kind < MM_KIND_COLL || d->kind > MM_KIND_CATALOG)
        return ENG_CORRUPT(err, "%s: namespace %s at offset 0x%llx: bad kind %u", path,
                           d->name, at + 4, d->kind);
    if (mm_loc_is_null(d->first_extent) != mm_loc_is_null(d->last_extent))
        return ENG_CORRUPT(err, "%s: namespace %s at offset 0x%llx: firstExtent and "
                           "lastExtent disagree on emptiness", path, d->name, at + 136);
    const mm_loc *ex[2] = {&d->first_extent, &d->last_extent};
    char why[256];
    for (int k = 0; k < 2; k++)
        if (!mm_loc_is_null(*ex[k]) && !mm_extent_at(e, *ex[k]))
            return ENG_CORRUPT(err, "%s: namespace %s at offset 0x%llx: %s %d:0x%x is not "
                               "an extent (%s)", path, d->name, at + 136 + 8 * k,
                               k ? "lastExtent" : "firstExtent", ex[k]->a, ex[k]->ofs,
                               why_not_extent(e, *ex[k], why, sizeof why));
    for (int b = 0; b < MM_NBUCKETS; b++)
        if (!mm_loc_is_null(d->deleted[b]) && !loc_in_file(e, d->deleted[b], MM_REC_HDR))
            return ENG_CORRUPT(err, "%s: namespace %s at offset 0x%llx: free list %d head "
                               "%d:0x%x out of bounds", path, d->name, at + 152 + 8 * b, b,
                               d->deleted[b].a, d->deleted[b].ofs);
    if (!(d->padding_factor >= 1.0 && d->padding_factor <= 2.0))
        return ENG_CORRUPT(err, "%s: namespace %s at offset 0x%llx: paddingFactor out of "
                           "range", path, d->name, at + 384);
    return 0;
}

/* Check every live slot's pointers against the data files (after open). */
int mm_ns_check_all(mm_engine *e, md_error *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.ns", e->dir, e->db);
    for (uint32_t i = 1; i <= e->nslots; i++) {
        int rc = check_slot(e, (int32_t)i, path, err);
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- the catalog ----------------------------------------------------------- */

static int meta_cmp(const void *a, const void *b)
{
    return strcmp(((const mm_meta_ent *)a)->key, ((const mm_meta_ent *)b)->key);
}

void mm_meta_free(mm_engine *e)
{
    for (size_t i = 0; i < e->nmeta; i++)
        free(e->meta[i].key);
    free(e->meta);
    e->meta = NULL;
    e->nmeta = e->meta_cap = 0;
}

static int meta_push(mm_engine *e, const char *key, mm_loc l)
{
    if (e->nmeta == e->meta_cap) {
        size_t cap = e->meta_cap ? e->meta_cap * 2 : 16;
        mm_meta_ent *v = realloc(e->meta, cap * sizeof *v);
        if (!v)
            return MD_ENOMEM;
        e->meta = v;
        e->meta_cap = cap;
    }
    char *k = strdup(key);
    if (!k)
        return MD_ENOMEM;
    e->meta[e->nmeta++] = (mm_meta_ent){k, l};
    return 0;
}

/* Read a catalog record: its key ("k") and the value document ("v"). */
static bool meta_parse(const uint8_t *data, uint32_t len, const char **key, bson_t *value)
{
    bson_t doc;
    bson_iter_t it;
    const uint8_t *vdata;
    uint32_t vlen;
    if (!bson_init_static(&doc, data, len) || !bson_iter_init_find(&it, &doc, "k") ||
        !BSON_ITER_HOLDS_UTF8(&it))
        return false;
    *key = bson_iter_utf8(&it, NULL);
    if (!bson_iter_init_find(&it, &doc, "v") || !BSON_ITER_HOLDS_DOCUMENT(&it))
        return false;
    bson_iter_document(&it, &vlen, &vdata);
    return value == NULL || bson_init_static(value, vdata, vlen);
}

/* (Re)build the key -> record map from the catalog namespace. */
int mm_meta_load(mm_engine *e, md_error *err)
{
    mm_meta_free(e);
    mm_loc l = mm_loc_null();
    int64_t guard = mm_total_bytes(e) / 24 + 1;
    for (;;) {
        mm_loc prev = l;
        int rc = mm_rec_step(e, e->meta_slot, prev, true, &l);
        if (rc && mm_loc_is_null(prev))
            return ENG_CORRUPT(err, "catalog %s.system.namespaces: broken extent chain (%s/%s.ns "
                                    "slot at offset 0x%llx)",
                               e->db, e->dir, e->db,
                               (unsigned long long)e->meta_slot * MM_NS_SLOT_SIZE);
        if (rc)
            return ENG_CORRUPT(err, "catalog %s.system.namespaces: broken record chain after "
                                    "%s/%s.%d offset 0x%x",
                               e->db, e->dir, e->db, prev.a, (unsigned)prev.ofs);
        if (mm_loc_is_null(l))
            break;
        const mm_record *r = mm_rs_locate(e, e->meta_slot, l);
        const char *key;
        if (!r || !meta_parse((const uint8_t *)(r + 1), (uint32_t)mm_le32((const uint8_t *)(r + 1)),
                              &key, NULL) || --guard < 0)
            return ENG_CORRUPT(err, "catalog %s.system.namespaces: bad record at %s/%s.%d offset "
                                    "0x%x",
                               e->db, e->dir, e->db, l.a, (unsigned)l.ofs);
        if (meta_push(e, key, l) != 0)
            return md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
    }
    if (e->nmeta > 1)
        qsort(e->meta, e->nmeta, sizeof *e->meta, meta_cmp);
    for (size_t i = 1; i < e->nmeta; i++)
        if (strcmp(e->meta[i - 1].key, e->meta[i].key) == 0)
            return ENG_CORRUPT(err, "catalog %s.system.namespaces: key \"%s\" stored twice",
                               e->db, e->meta[i].key);
    e->meta_dirty = false;
    return 0;
}

static mm_meta_ent *meta_find(mm_engine *e, const char *key)
{
    mm_meta_ent probe = {(char *)key, {0, 0}};
    if (e->nmeta == 0)
        return NULL;
    return bsearch(&probe, e->meta, e->nmeta, sizeof *e->meta, meta_cmp);
}

/* An ident with no namespace of its kind: the catalog record that names
 * it (its bytes, NUL included, inside the record's document) disagrees with
 * the .ns file, one of them damaged: MD_ECORRUPT naming that record.  Not
 * named by any record: MD_NOTFOUND with the caller's plain error (code,
 * "<what> not found: ident").  Only on open's failure path. */
int mm_meta_missing(const mm_engine *e, const char *ident, int code, const char *what,
                    md_error *err)
{
    size_t n = strlen(ident) + 1;
    for (size_t i = 0; i < e->nmeta; i++) {
        mm_loc l = e->meta[i].loc;
        const mm_record *r = mm_rs_locate(e, e->meta_slot, l);
        if (!r)
            continue;
        const uint8_t *doc = (const uint8_t *)(r + 1);
        uint32_t len = (uint32_t)mm_le32(doc);
        if (len >= n && memmem(doc, len, ident, n)) {
            char pr[ENG_IDENT_MAX * 4 + 8];
            return ENG_CORRUPT(err, "catalog %s.system.namespaces: the record at %s/%s.%d offset "
                                    "0x%x names %s \"%s\", not a namespace of that kind in %s/%s.ns",
                               e->db, e->dir, e->db, l.a, (unsigned)l.ofs,
                               code == MD_CODE_INDEX_NOT_FOUND ? "index" : "collection",
                               mm_printable(ident, n, pr, sizeof pr), e->dir, e->db);
        }
    }
    return md_error_set(err, MD_NOTFOUND, code, "%s not found: %s", what, ident);
}

int mm_meta_put(eng_engine *eng, eng_txn *tx, const char *key, const bson_t *value,
                md_error *err)
{
    mm_engine *e = mm_E(eng);
    mm_txn *t = mm_T(tx, e);
    bson_t doc = BSON_INITIALIZER;
    BSON_APPEND_UTF8(&doc, "k", key);
    BSON_APPEND_DOCUMENT(&doc, "v", value);
    mm_meta_ent *m = meta_find(e, key);
    mm_loc l;
    bool moved;
    int rc;
    e->meta_dirty = true;
    if (m) {
        rc = mm_do_update(e, t, e->meta_slot, m->loc, bson_get_data(&doc), doc.len, &l,
                          &moved, err);
        if (rc == 0)
            m->loc = l;
    } else {
        rc = mm_do_insert(e, t, e->meta_slot, bson_get_data(&doc), doc.len, &l, err);
        if (rc == 0 && (rc = meta_push(e, key, l)) == 0)
            qsort(e->meta, e->nmeta, sizeof *e->meta, meta_cmp);
    }
    bson_destroy(&doc);
    return rc;
}

int mm_meta_get(eng_engine *eng, const char *key, bson_t *out)
{
    mm_engine *e = mm_E(eng);
    mm_meta_ent *m = meta_find(e, key);
    if (!m)
        return MD_NOTFOUND;
    const mm_record *r = mm_rs_locate(e, e->meta_slot, m->loc);
    const char *k;
    bson_t v;
    if (!r || !meta_parse((const uint8_t *)(r + 1), (uint32_t)mm_le32((const uint8_t *)(r + 1)),
                          &k, &v))
        return MD_ECORRUPT;
    bson_copy_to(&v, out);
    return 0;
}

int mm_meta_del(eng_engine *eng, eng_txn *tx, const char *key)
{
    mm_engine *e = mm_E(eng);
    mm_txn *t = mm_T(tx, e);
    mm_meta_ent *m = meta_find(e, key);
    if (!m)
        return MD_NOTFOUND;
    if (!mm_rs_locate(e, e->meta_slot, m->loc))
        return MD_ECORRUPT;
    e->meta_dirty = true;
    mm_record_delete(e, t, e->meta_slot, m->loc);
    free(m->key);
    size_t i = (size_t)(m - e->meta);
    memmove(m, m + 1, (e->nmeta - i - 1) * sizeof *m);
    e->nmeta--;
    return 0;
}

/* The catalog record of key: "DIR/test.N offset 0x..." ("" if none). */
void mm_meta_where(eng_engine *eng, const char *key, char *buf, size_t n)
{
    mm_engine *e = mm_E(eng);
    mm_meta_ent *m = meta_find(e, key);
    if (m)
        snprintf(buf, n, "%s/%s.%d offset 0x%x", e->dir, e->db, m->loc.a,
                 (unsigned)m->loc.ofs);
    else if (n)
        buf[0] = '\0';
}

int mm_meta_list(eng_engine *eng, eng_meta_fn fn, void *ctx)
{
    mm_engine *e = mm_E(eng);
    for (size_t i = 0; i < e->nmeta; i++) {
        const mm_record *r = mm_rs_locate(e, e->meta_slot, e->meta[i].loc);
        const char *k;
        bson_t v;
        if (!r || !meta_parse((const uint8_t *)(r + 1),
                              (uint32_t)mm_le32((const uint8_t *)(r + 1)), &k, &v))
            return MD_ECORRUPT;
        if (fn(ctx, e->meta[i].key, &v) != 0)
            break;
    }
    return 0;
}
