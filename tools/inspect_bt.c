/*
 * inspect_bt.c -- `minidoc inspect` for btree: the turtle, the metadata
 * tree and every table's tree, read as bt_int.h and bt_ckpt.c describe
 * them, without the engine: from each root, every page (level, entries,
 * image bytes against the block, write generation), the overflow blocks
 * leaves point to, and the checkpoint's free extents (avail) of each
 * file.  Blocks are checked (crc32c) and decompressed with the engine's
 * own helpers (eng_crc32c, bt_compressor_by_id, bt_vunpack,
 * bt_addr_unpack); the files are opened O_RDONLY and only pread.  This
 * is the last checkpoint: commits since then live in the log until the
 * next one.  A page that does not check out becomes a damage region and
 * its subtree is not followed; the rest is still drawn.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bson/bson.h>

#include "bt_int.h"
#include "inspect.h"

typedef struct bt_stats {
    int depth;
    int64_t pages[BT_MAX_DEPTH + 1]; /* by level, 0 = leaves */
    int64_t leaf_img, leaf_cap, ovfl, ovfl_bytes, entries;
    int64_t gen_min, gen_max;
} bt_stats;

typedef struct bt_file_ctx {
    ins_db *db;
    ins_file *f;
    int fd;
    uint64_t size;
    uint32_t leaf_max;
    bt_stats st;
    /* metadata tree: its leaf values ("file:" entries) are collected */
    bool meta;
    bson_t *entries; /* array of {key, value} for the metadata tree */
    int nent;
} bt_file_ctx;

/* Read and check the block at a; the decompressed body in *body. */
static int read_page(bt_file_ctx *c, const bt_addr *a, uint8_t hdr[BT_HDR], uint8_t **body,
                     uint32_t *blen, const char **why)
{
    uint32_t disk_size, ck, zero = 0, mem_size;
    *why = NULL;
    if (a->off < BT_ALLOC || a->size < BT_ALLOC || a->off + a->size > c->size) {
        *why = "block address outside the file";
        return -1;
    }
    uint8_t *img = malloc(a->size);
    if (!img || pread(c->fd, img, a->size, (off_t)a->off) != (ssize_t)a->size) {
        free(img);
        *why = "cannot read the block";
        return -1;
    }
    memcpy(&disk_size, img + 28, 4);
    memcpy(&ck, img + 32, 4);
    memcpy(&mem_size, img + 16, 4);
    if (disk_size < BT_HDR || disk_size > a->size) {
        free(img);
        *why = "bad disk size in the block header";
        return -1;
    }
    memcpy(img + 32, &zero, 4);
    uint32_t got = eng_crc32c(0, img, disk_size);
    memcpy(img + 32, &ck, 4);
    if (got != ck || ck != a->cksum) {
        free(img);
        *why = "checksum mismatch";
        return -1;
    }
    const bt_compressor *comp = bt_compressor_by_id(img[25]);
    size_t out = 0;
    memcpy(hdr, img, BT_HDR);
    if (!comp || mem_size < BT_HDR) {
        free(img);
        *why = "unknown compressor or bad size";
        return -1;
    }
    *blen = mem_size - BT_HDR;
    *body = malloc(*blen ? *blen : 1);
    if (comp->decompress(img + BT_HDR, disk_size - BT_HDR, *body, *blen, &out) != 0 ||
        out != *blen) {
        free(img);
        free(*body);
        *why = "the body does not decompress";
        return -1;
    }
    free(img);
    return 0;
}

static void walk(bt_file_ctx *c, const bt_addr *a, int depth, int *leaf_depth);

/* Parse the cells of a page: children of internal pages are walked,
 * overflow blocks of leaves recorded; metadata leaf values collected. */
static int cells(bt_file_ctx *c, int type, const uint8_t *p, const uint8_t *end,
                 uint32_t entries, int depth, int *leaf_depth, int *levels_below)
{
    uint8_t prevkey[2048];
    uint64_t prevlen = 0;
    int below = -1;
    for (uint32_t i = 0; i < entries; i++) {
        uint64_t pfx = 0, slen, zz, vlen = 0;
        uint8_t ct = 0;
        bt_addr a = {0};
        if (type == BT_PAGE_LEAF && (p >= end || (ct = *p++) > 2 || bt_vunpack(&p, end, &pfx)))
            return -1;
        if (bt_vunpack(&p, end, &slen) || pfx > prevlen || slen > (size_t)(end - p))
            return -1;
        const uint8_t *suffix = p;
        p += slen;
        if (bt_vunpack(&p, end, &zz))
            return -1;
        const uint8_t *val = NULL;
        if (type == BT_PAGE_INT || ct == 2) {
            if (end - p < (type == BT_PAGE_INT ? 16 : 20))
                return -1;
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
                return -1;
            val = p;
            p += vlen;
        }
        if (pfx + slen < sizeof prevkey) {
            memcpy(prevkey + pfx, suffix, slen);
            prevlen = pfx + slen;
        } else
            prevlen = 0;
        if (type == BT_PAGE_INT) {
            int d = *leaf_depth;
            walk(c, &a, depth + 1, leaf_depth);
            (void)d;
            below = 1;
        } else if (ct == 2) {
            ins_region *g = ins_add(c->f, INS_OVERFLOW, a.off, a.size);
            g->used = vlen;
            c->st.ovfl++;
            c->st.ovfl_bytes += a.size;
        }
        if (c->meta && type == BT_PAGE_LEAF && val && prevlen > 5 &&
            memcmp(prevkey, "file:", 5) == 0) {
            bson_t v, ent;
            char key[16];
            if (bson_init_static(&v, val, vlen)) {
                snprintf(key, sizeof key, "%d", c->nent++);
                bson_append_document_begin(c->entries, key, -1, &ent);
                bson_append_utf8(&ent, "ident", -1, (const char *)prevkey + 5,
                                 (int)prevlen - 5);
                BSON_APPEND_DOCUMENT(&ent, "v", &v);
                bson_append_document_end(c->entries, &ent);
            }
        }
    }
    *levels_below = below;
    return p == end ? 0 : -1;
}

static void walk(bt_file_ctx *c, const bt_addr *a, int depth, int *leaf_depth)
{
    uint8_t hdr[BT_HDR];
    uint8_t *body = NULL;
    uint32_t blen = 0;
    const char *why;
    if (depth > BT_MAX_DEPTH) {
        ins_damage(c->db, c->f, a->off, a->size, "%s: tree deeper than %d at offset %llu",
                   c->f->name, BT_MAX_DEPTH, (unsigned long long)a->off);
        return;
    }
    if (read_page(c, a, hdr, &body, &blen, &why) != 0) {
        ins_damage(c->db, c->f, a->off < c->size ? a->off : 0, a->size ? a->size : BT_ALLOC,
                   "%s: page at offset %llu: %s", c->f->name, (unsigned long long)a->off, why);
        return;
    }
    int type = hdr[24];
    uint32_t entries, mem_size;
    int64_t gen;
    memcpy(&entries, hdr + 20, 4);
    memcpy(&mem_size, hdr + 16, 4);
    memcpy(&gen, hdr + 8, 8);
    if (type != BT_PAGE_LEAF && type != BT_PAGE_INT) {
        ins_damage(c->db, c->f, a->off, a->size, "%s: block at %llu is not a page (type %d)",
                   c->f->name, (unsigned long long)a->off, type);
        free(body);
        return;
    }
    ins_region *g = ins_add(c->f, type == BT_PAGE_LEAF ? INS_LEAF : INS_INTERNAL, a->off,
                            a->size);
    size_t gi = c->f->n - 1;
    g->used = mem_size;
    g->entries = entries;
    g->gen = gen;
    g->level = -1;
    if (c->st.gen_min == 0 || gen < c->st.gen_min)
        c->st.gen_min = gen;
    if (gen > c->st.gen_max)
        c->st.gen_max = gen;
    c->st.entries += type == BT_PAGE_LEAF ? entries : 0;
    int below = -1;
    if (cells(c, type, body, body + blen, entries, depth, leaf_depth, &below) != 0) {
        g = &c->f->r[gi];
        g->kind = INS_DAMAGE;
        ins_appendf(&g->note, "%s: page at offset %llu: bad cell", c->f->name,
                    (unsigned long long)a->off);
        c->db->damaged++;
    }
    g = &c->f->r[gi]; /* the array may have grown */
    if (type == BT_PAGE_LEAF) {
        if (*leaf_depth < 0)
            *leaf_depth = depth;
        c->st.leaf_img += mem_size;
        c->st.leaf_cap += c->leaf_max;
    }
    g->level = depth; /* made a level above the leaves below */
    free(body);
}

static bool get_bin(const bson_t *d, const char *k, const uint8_t **p, uint32_t *n)
{
    bson_iter_t it;
    bson_subtype_t st;
    if (!bson_iter_init_find(&it, d, k) || !BSON_ITER_HOLDS_BINARY(&it))
        return false;
    bson_iter_binary(&it, &st, n, p);
    return true;
}

static int64_t get_i64(const bson_t *d, const char *k)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, d, k) ? bson_iter_as_int64(&it) : 0;
}

static const char *get_str(const bson_t *d, const char *k)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, d, k) && BSON_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, NULL)
                                                                       : "none";
}

/* One file: its tree from root, its avail list. */
static void one_file(ins_db *db, const char *dir, const char *fname, const bson_t *ck,
                     int kind, bt_file_ctx *meta_ctx, const char *label)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, fname);
    struct stat sb;
    bt_file_ctx c = {.db = db, .fd = -1};
    c.fd = open(path, O_RDONLY | O_CLOEXEC);
    c.size = c.fd >= 0 && fstat(c.fd, &sb) == 0 ? (uint64_t)sb.st_size : 0;
    c.f = ins_add_file(db, fname, c.size);
    c.leaf_max = kind == BT_RS ? 32768 : 16384;
    if (meta_ctx) {
        c.meta = true;
        c.entries = meta_ctx->entries;
    }
    if (c.fd < 0) {
        ins_damage(db, c.f, 0, 0, "%s: cannot open: %s", fname, strerror(errno));
        return;
    }
    ins_add(c.f, INS_HEADER, 0, BT_ALLOC);
    uint8_t desc[16];
    uint32_t magic;
    if (pread(c.fd, desc, 16, 0) != 16 || (memcpy(&magic, desc, 4), magic != BT_DESC_MAGIC))
        ins_damage(db, c.f, 0, BT_ALLOC, "%s: bad file descriptor block", fname);
    const uint8_t *root, *avail;
    uint32_t rlen = 0, alen = 0;
    int leaf_depth = -1;
    if (!get_bin(ck, "root", &root, &rlen) || rlen != 16) {
        ins_damage(db, c.f, 0, 0, "%s: its checkpoint has no root address", fname);
    } else {
        bt_addr a;
        bt_addr_unpack(root, &a);
        if (a.off != 0)
            walk(&c, &a, 0, &leaf_depth);
    }
    int64_t free_b = 0, free_n = 0;
    if (get_bin(ck, "avail", &avail, &alen))
        for (uint32_t k = 0; k + 16 <= alen; k += 16) {
            uint64_t off, size;
            memcpy(&off, avail + k, 8);
            memcpy(&size, avail + k + 8, 8);
            ins_add(c.f, INS_AVAIL, off, size);
            free_n++;
            free_b += (int64_t)size;
        }
    /* levels: depth from the root; the leaves are at leaf_depth */
    int depth = leaf_depth < 0 ? 0 : leaf_depth + 1;
    int64_t per[BT_MAX_DEPTH + 2] = {0};
    for (size_t k = 0; k < c.f->n; k++) {
        ins_region *g = &c.f->r[k];
        if ((g->kind == INS_LEAF || g->kind == INS_INTERNAL) && g->level >= 0 &&
            g->level <= BT_MAX_DEPTH) {
            per[g->level]++;
            g->level = leaf_depth >= g->level ? leaf_depth - g->level : 0;
        }
    }
    ins_appendf(&c.f->summary, "%s (%s, %s, compressor %s): %llu bytes, depth %d, pages per "
                "level from the root:", fname, label,
                kind == BT_RS ? "record store" : kind == BT_SS ? "index" : "metadata",
                get_str(ck, "compressor"),
                (unsigned long long)c.size, depth);
    for (int l = 0; l < depth && l <= BT_MAX_DEPTH; l++)
        ins_appendf(&c.f->summary, " %lld", (long long)per[l]);
    ins_appendf(&c.f->summary, "; %lld entries; leaf fill %.1f%% (page images / %u-byte leaf "
                "pages); overflow blocks %lld (%lld bytes); free extents %lld (%lld bytes, "
                "%.1f%% of the file); write generations %lld..%lld\n",
                (long long)c.st.entries,
                c.st.leaf_cap ? 100.0 * c.st.leaf_img / c.st.leaf_cap : 0.0, c.leaf_max,
                (long long)c.st.ovfl, (long long)c.st.ovfl_bytes, (long long)free_n,
                (long long)free_b, c.size ? 100.0 * free_b / c.size : 0.0,
                (long long)c.st.gen_min, (long long)c.st.gen_max);
    if (meta_ctx)
        meta_ctx->nent = c.nent;
    close(c.fd);
}

int ins_read_bt(ins_db *db, const char *dir)
{
    char path[4096];
    uint8_t hdr[16];
    db->engine = strdup("btree");
    snprintf(path, sizeof path, "%s/minidoc.turtle", dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "minidoc inspect: cannot read %s: %s\n", path, strerror(errno));
        return -1;
    }
    uint32_t len = 0, ck = 0;
    uint8_t *buf = NULL;
    bson_t turtle;
    bool good = read(fd, hdr, 16) == 16 && memcmp(hdr, "MDTURTL1", 8) == 0;
    if (good) {
        memcpy(&len, hdr + 8, 4);
        memcpy(&ck, hdr + 12, 4);
        buf = len < (1u << 24) ? malloc(len ? len : 1) : NULL;
        good = buf && read(fd, buf, len) == (ssize_t)len && eng_crc32c(0, buf, len) == ck &&
               bson_init_static(&turtle, buf, len);
    }
    close(fd);
    if (!good) {
        fprintf(stderr, "minidoc inspect: %s is damaged (magic, length or checksum); the "
                "checkpoint cannot be found\n", path);
        free(buf);
        return -1;
    }
    ins_appendf(&db->summary, "btree database in %s: checkpoint %lld, next file id %lld, log "
                "LSN %llu:%llu (the log since then is not in the tree)\n", dir,
                (long long)get_i64(&turtle, "checkpoint"),
                (long long)get_i64(&turtle, "nextFileId"),
                (unsigned long long)((uint64_t)get_i64(&turtle, "logLsn") >> 32),
                (unsigned long long)((uint64_t)get_i64(&turtle, "logLsn") & 0xffffffffu));
    bt_file_ctx meta = {0};
    bson_t entries = BSON_INITIALIZER;
    meta.entries = &entries;
    one_file(db, dir, "minidoc.meta.bt", &turtle, BT_META, &meta, "the metadata tree");
    bson_iter_t it;
    if (bson_iter_init(&it, &entries))
        while (bson_iter_next(&it)) {
            bson_t e, v;
            const uint8_t *d;
            uint32_t dl;
            bson_iter_t f;
            bson_iter_document(&it, &dl, &d);
            bson_init_static(&e, d, dl);
            if (!bson_iter_init_find(&f, &e, "v"))
                continue;
            bson_iter_document(&f, &dl, &d);
            bson_init_static(&v, d, dl);
            const char *ident = "", *file = NULL;
            if (bson_iter_init_find(&f, &e, "ident"))
                ident = bson_iter_utf8(&f, NULL);
            if (bson_iter_init_find(&f, &v, "file") && BSON_ITER_HOLDS_UTF8(&f))
                file = bson_iter_utf8(&f, NULL);
            if (!file || strchr(file, '/')) {
                ins_appendf(&db->summary, "  metadata entry for %s names no file\n", ident);
                continue;
            }
            one_file(db, dir, file, &v, (int)get_i64(&v, "kind"), NULL, ident);
            ins_appendf(&db->summary, "  %s: %lld documents/keys, %lld bytes of data, "
                        "%lld inserts, %lld updates (checkpointed counts)\n", ident,
                        (long long)get_i64(&v, "count"), (long long)get_i64(&v, "dataSize"),
                        (long long)get_i64(&v, "nInserts"), (long long)get_i64(&v, "nUpdates"));
        }
    bson_destroy(&entries);
    free(buf);
    return 0;
}
