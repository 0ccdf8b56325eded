/*
 * inspect.c -- `minidoc inspect`: see the storage engine.  Reads a
 * database's files read-only (inspect_mm.c, inspect_bt.c; never opens the
 * database, takes no lock, writes nothing) and draws them:
 *
 *   minidoc inspect --dbpath DIR [--engine E] [--dbname NAME]
 *                   [--text] [--out FILE.svg] [--png FILE.png]
 *   minidoc inspect --diff A B [--text] [--out FILE.svg]
 *
 * The SVG has one map per file, rows of bytes left to right, top to
 * bottom, every region a <g class="KIND"> (header, extent, record,
 * bucket, deleted, freeext, unused, leaf, internal, overflow, avail,
 * damage) with its offset, length and a <title> tooltip; a record's
 * group holds its used bytes and its padding as two rects.  btree files
 * also get their tree drawn level by level, each page shaded by how full
 * it is.  --text prints the summary instead: fill, padding,
 * fragmentation, moves and deleted records per bucket (mmapv1); depth,
 * pages per level, leaf fill, overflow blocks, free extents, checkpoint
 * and write generations (btree).  --diff draws A and B side by side
 * (before and after an operation) and outlines in B every document found
 * at another place than in A (matched by _id: a growing update that
 * moved), and its text lists what changed.  --png converts the SVG with
 * rsvg-convert (Debian librsvg2-bin) or ImageMagick's convert when one is
 * installed.  A file that does not check out is drawn as far as it
 * reads, the damage in red with the reason; the exit status is then 3.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "inspect.h"
#include "tool.h"

#define PROG "minidoc inspect"
#define MAP_W 1000
#define ROW_H 12
#define MAX_ROWS 40

const char *const ins_kind_name[INS_NKINDS] = {
    "extent", "record", "bucket", "deleted", "freeext", "unused", "header",
    "leaf",   "internal", "overflow", "avail", "damage",
};

static const char *const kind_color[INS_NKINDS] = {
    "#dbe8f6", "#3c78d8", "#6aa84f", "#f6b26b", "#fff2cc", "#eeeeee", "#999999",
    "#3c78d8", "#674ea7", "#c27ba0", "#fff2cc", "#cc0000",
};

/* ---- the model -------------------------------------------------------------- */

void ins_appendf(char **s, const char *fmt, ...)
{
    va_list ap;
    char *add = NULL;
    va_start(ap, fmt);
    if (vasprintf(&add, fmt, ap) < 0)
        add = NULL;
    va_end(ap);
    if (!add)
        return;
    size_t a = *s ? strlen(*s) : 0, b = strlen(add);
    char *n = realloc(*s, a + b + 1);
    if (n) {
        memcpy(n + a, add, b + 1);
        *s = n;
    }
    free(add);
}

ins_file *ins_add_file(ins_db *db, const char *name, uint64_t size)
{
    if (db->n == db->cap) {
        db->cap = db->cap ? db->cap * 2 : 8;
        db->f = realloc(db->f, db->cap * sizeof *db->f);
    }
    ins_file *f = &db->f[db->n++];
    memset(f, 0, sizeof *f);
    f->name = strdup(name);
    f->size = size;
    return f;
}

ins_region *ins_add(ins_file *f, int kind, uint64_t off, uint64_t len)
{
    if (f->n == f->cap) {
        f->cap = f->cap ? f->cap * 2 : 64;
        f->r = realloc(f->r, f->cap * sizeof *f->r);
    }
    ins_region *g = &f->r[f->n++];
    memset(g, 0, sizeof *g);
    g->kind = kind;
    g->off = off;
    g->len = len;
    g->owner = -1;
    return g;
}

int ins_owner(ins_file *f, const char *name)
{
    for (size_t k = 0; k < f->nowners; k++)
        if (strcmp(f->owners[k], name) == 0)
            return (int)k;
    f->owners = realloc(f->owners, (f->nowners + 1) * sizeof *f->owners);
    f->owners[f->nowners] = strdup(name);
    return (int)f->nowners++;
}

void ins_damage(ins_db *db, ins_file *f, uint64_t off, uint64_t len, const char *fmt, ...)
{
    va_list ap;
    ins_region *g = ins_add(f, INS_DAMAGE, off, len ? len : 1);
    va_start(ap, fmt);
    if (vasprintf(&g->note, fmt, ap) < 0)
        g->note = NULL;
    va_end(ap);
    db->damaged++;
}

void ins_free(ins_db *db)
{
    for (size_t k = 0; k < db->n; k++) {
        ins_file *f = &db->f[k];
        for (size_t j = 0; j < f->n; j++) {
            free(f->r[j].key);
            free(f->r[j].note);
        }
        for (size_t j = 0; j < f->nowners; j++)
            free(f->owners[j]);
        free(f->owners);
        free(f->r);
        free(f->name);
        free(f->summary);
    }
    free(db->f);
    free(db->dir);
    free(db->engine);
    free(db->summary);
    memset(db, 0, sizeof *db);
}

int ins_read(ins_db *db, const char *dir, const char *engine, const char *dbname)
{
    char path[4096];
    struct stat st;
    memset(db, 0, sizeof *db);
    db->dir = strdup(dir);
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "%s: %s: %s\n", PROG, dir,
                stat(dir, &st) != 0 ? strerror(errno) : "not a directory");
        return -1;
    }
    if (!engine) {
        snprintf(path, sizeof path, "%s/minidoc.turtle", dir);
        if (stat(path, &st) == 0)
            engine = "btree";
        snprintf(path, sizeof path, "%s/%s.ns", dir, dbname);
        if (!engine && stat(path, &st) == 0)
            engine = "mmapv1";
    }
    if (!engine) {
        fprintf(stderr, "%s: no minidoc data files in %s (neither minidoc.turtle nor %s.ns)\n",
                PROG, dir, dbname);
        return -1;
    }
    if (strcmp(engine, "mmapv1") == 0)
        return ins_read_mm(db, dir, dbname);
    if (strcmp(engine, "btree") == 0)
        return ins_read_bt(db, dir);
    fprintf(stderr, "%s: cannot inspect engine '%s' (mmapv1 or btree)\n", PROG, engine);
    return -1;
}

/* ---- --diff: documents at a new place --------------------------------------- */

typedef struct keyloc {
    const char *key, *file;
    uint64_t off;
} keyloc;

static int keyloc_cmp(const void *a, const void *b)
{
    return strcmp(((const keyloc *)a)->key, ((const keyloc *)b)->key);
}

static int64_t mark_moved(const ins_db *a, ins_db *b)
{
    size_t n = 0, cap = 0;
    keyloc *v = NULL;
    for (size_t i = 0; i < a->n; i++)
        for (size_t j = 0; j < a->f[i].n; j++) {
            const ins_region *g = &a->f[i].r[j];
            if (g->kind != INS_RECORD || !g->key)
                continue;
            if (n == cap)
                v = realloc(v, (cap = cap ? cap * 2 : 256) * sizeof *v);
            v[n++] = (keyloc){g->key, a->f[i].name, g->off};
        }
    qsort(v, n, sizeof *v, keyloc_cmp);
    int64_t moved = 0;
    for (size_t i = 0; i < b->n; i++)
        for (size_t j = 0; j < b->f[i].n; j++) {
            ins_region *g = &b->f[i].r[j];
            if (g->kind != INS_RECORD || !g->key)
                continue;
            keyloc k = {.key = g->key};
            keyloc *hit = bsearch(&k, v, n, sizeof *v, keyloc_cmp);
            if (hit && (hit->off != g->off || strcmp(hit->file, b->f[i].name) != 0)) {
                g->moved = true;
                moved++;
            }
        }
    free(v);
    return moved;
}

/* ---- SVG ------------------------------------------------------------------------ */

static void esc(FILE *o, const char *s)
{
    for (; s && *s; s++) {
        if (*s == '<')
            fputs("&lt;", o);
        else if (*s == '>')
            fputs("&gt;", o);
        else if (*s == '&')
            fputs("&amp;", o);
        else if (*s == '"')
            fputs("&quot;", o);
        else
            fputc(*s, o);
    }
}

static uint64_t row_bytes_for(uint64_t size)
{
    uint64_t rb = (size + MAX_ROWS - 1) / MAX_ROWS;
    rb = (rb + 4095) / 4096 * 4096;
    return rb < 16384 ? 16384 : rb;
}

/* Rects covering [off, off+len) of the map at (x0, y0). */
static void spans(FILE *o, double x0, double y0, uint64_t rb, uint64_t off, uint64_t len,
                  const char *fill, const char *extra)
{
    uint64_t end = off + len;
    while (off < end) {
        uint64_t row = off / rb, row_end = (row + 1) * rb;
        uint64_t e = end < row_end ? end : row_end;
        double x = x0 + (double)(off - row * rb) * MAP_W / (double)rb;
        double w = (double)(e - off) * MAP_W / (double)rb;
        if (w < 0.6)
            w = 0.6;
        fprintf(o, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" fill=\"%s\"%s/>",
                x, y0 + (double)row * (ROW_H + 2), w, ROW_H, fill, extra ? extra : "");
        off = e;
    }
}

static int layer(int kind)
{
    switch (kind) {
    case INS_EXTENT: case INS_FREE_EXT: case INS_UNUSED: case INS_HEADER: case INS_AVAIL:
        return 0;
    case INS_DAMAGE:
        return 2;
    default:
        return 1;
    }
}

/* One file's map and, for btree, its tree; returns the height used. */
static double draw_file(FILE *o, const ins_db *db, const ins_file *f, double x0, double y0)
{
    uint64_t rb = row_bytes_for(f->size);
    uint64_t rows = f->size ? (f->size + rb - 1) / rb : 1;
    fputs("<g class=\"file\" data-name=\"", o);
    esc(o, f->name);
    fputs("\">\n", o);
    fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" class=\"fname\">", x0, y0 + 12);
    esc(o, f->name);
    fprintf(o, " &#8212; %llu bytes, %llu bytes per row</text>\n", (unsigned long long)f->size,
            (unsigned long long)rb);
    y0 += 18;
    fprintf(o, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%d\" height=\"%llu\" fill=\"none\" "
            "stroke=\"#bbb\"/>\n", x0 - 1, y0 - 1, MAP_W + 2,
            (unsigned long long)(rows * (ROW_H + 2) + 1));
    for (int l = 0; l < 3; l++)
        for (size_t k = 0; k < f->n; k++) {
            const ins_region *g = &f->r[k];
            if (layer(g->kind) != l)
                continue;
            uint64_t len = g->len;
            if (f->size && g->off >= f->size)
                continue;
            if (f->size && g->off + len > f->size)
                len = f->size - g->off;
            fprintf(o, "<g class=\"%s%s\" data-off=\"%llu\" data-len=\"%llu\"><title>",
                    ins_kind_name[g->kind], g->moved ? " moved" : "",
                    (unsigned long long)g->off, (unsigned long long)g->len);
            if (g->owner >= 0 && (size_t)g->owner < f->nowners) {
                esc(o, f->owners[g->owner]);
                fputs(": ", o);
            }
            fprintf(o, "%s at %llu, %llu bytes", ins_kind_name[g->kind],
                    (unsigned long long)g->off, (unsigned long long)g->len);
            if (g->kind == INS_RECORD || g->kind == INS_BUCKET)
                fprintf(o, ", %llu used, %llu padding", (unsigned long long)g->used,
                        (unsigned long long)(g->len - g->used));
            if (g->kind == INS_DELETED)
                fprintf(o, ", bucket %d", g->bucket);
            if (g->kind == INS_LEAF || g->kind == INS_INTERNAL)
                fprintf(o, ", level %d, %u entries, image %llu bytes, write generation %lld",
                        g->level, g->entries, (unsigned long long)g->used, (long long)g->gen);
            if (g->moved)
                fputs(", moved since A", o);
            if (g->note) {
                fputs(": ", o);
                esc(o, g->note);
            }
            fputs("</title>", o);
            const char *stroke = g->moved ? " stroke=\"#ff00ff\" stroke-width=\"1.5\"" : NULL;
            if ((g->kind == INS_RECORD || g->kind == INS_BUCKET) && g->used && g->used < len) {
                spans(o, x0, y0, rb, g->off, g->used, kind_color[g->kind], stroke);
                spans(o, x0, y0, rb, g->off + g->used, len - g->used, "#a4c2f4", stroke);
            } else if (g->kind == INS_LEAF || g->kind == INS_INTERNAL) {
                char extra[96];
                double fill = g->len ? (double)g->used / (double)g->len : 1;
                snprintf(extra, sizeof extra, " fill-opacity=\"%.2f\" stroke=\"#fff\"",
                         0.25 + 0.75 * (fill > 1 ? 1 : fill));
                spans(o, x0, y0, rb, g->off, len, kind_color[g->kind], extra);
            } else
                spans(o, x0, y0, rb, g->off, len ? len : 1, kind_color[g->kind], stroke);
            fputs("</g>\n", o);
        }
    double h = 18 + (double)rows * (ROW_H + 2) + 8;
    /* btree: the tree, level by level from the root */
    int maxlevel = -1;
    for (size_t k = 0; k < f->n; k++)
        if ((f->r[k].kind == INS_LEAF || f->r[k].kind == INS_INTERNAL) &&
            f->r[k].level > maxlevel)
            maxlevel = f->r[k].level;
    for (int lv = maxlevel; lv >= 0; lv--) {
        size_t cnt = 0, i = 0;
        for (size_t k = 0; k < f->n; k++)
            cnt += (f->r[k].kind == INS_LEAF || f->r[k].kind == INS_INTERNAL) &&
                   f->r[k].level == lv;
        double w = cnt ? (double)MAP_W / (double)cnt : MAP_W, y = y0 + h - 18 + 4;
        double bw = w > 40 ? 40 : w * 0.9;
        fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" class=\"lvl\">level %d: %zu page%s</text>\n",
                x0, y + 9, lv, cnt, cnt == 1 ? "" : "s");
        for (size_t k = 0; k < f->n; k++) {
            const ins_region *g = &f->r[k];
            if (!((g->kind == INS_LEAF || g->kind == INS_INTERNAL) && g->level == lv))
                continue;
            double fill = g->len ? (double)g->used / (double)g->len : 0;
            fprintf(o, "<rect class=\"tnode\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"10\" "
                    "fill=\"%s\" fill-opacity=\"%.2f\"><title>page at %llu: %u entries, "
                    "%.0f%% of its block</title></rect>\n",
                    x0 + 110 + (double)i * (MAP_W - 110) / (double)(cnt ? cnt : 1), y,
                    bw * (MAP_W - 110) / MAP_W, kind_color[g->kind],
                    0.25 + 0.75 * (fill > 1 ? 1 : fill), (unsigned long long)g->off,
                    g->entries, 100 * fill);
            i++;
        }
        h += 14;
    }
    fputs("</g><!--file-->\n", o);
    (void)db;
    return h + 6;
}

static double draw_db(FILE *o, const ins_db *db, double x0, double y0)
{
    double y = y0;
    fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" class=\"title\">", x0, y + 16);
    const char *base = strrchr(db->dir, '/');
    base = base && base[1] ? base + 1 : db->dir;
    if (db->title) {
        esc(o, db->title);
        fputs(": ", o);
    }
    esc(o, base);
    fprintf(o, " (%s)</text>\n", db->engine);
    y += 26;
    for (size_t k = 0; k < db->n; k++)
        y = y + draw_file(o, db, &db->f[k], x0, y);
    return y - y0;
}

static double legend(FILE *o, double x0, double y)
{
    double x = x0;
    for (int k = 0; k < INS_NKINDS; k++) {
        fprintf(o, "<rect x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"10\" fill=\"%s\" "
                "stroke=\"#666\" stroke-width=\"0.5\"/><text x=\"%.1f\" y=\"%.1f\" "
                "class=\"lg\">%s</text>\n", x, y, kind_color[k], x + 13, y + 9,
                ins_kind_name[k]);
        x += 80;
    }
    fprintf(o, "<rect x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"10\" fill=\"#a4c2f4\"/>"
            "<text x=\"%.1f\" y=\"%.1f\" class=\"lg\">padding</text>\n", x, y, x + 13, y + 9);
    return 20;
}

static void svg(FILE *o, const ins_db *a, const ins_db *b)
{
    /* measure with a dry run into /dev/null */
    FILE *null = fopen("/dev/null", "w");
    double ha = draw_db(null, a, 0, 0), hb = b ? draw_db(null, b, 0, 0) : 0;
    fclose(null);
    double h = (ha > hb ? ha : hb) + 40, w = (b ? 2 : 1) * (MAP_W + 30) + 10;
    fprintf(o, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\">\n"
            "<style>.title{font-size:15px;font-weight:bold}.fname{font-size:11px}"
            ".lvl,.lg{font-size:9px}</style>\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n<desc>",
            w, h, w, h);
    esc(o, a->summary);
    fputs("</desc>\n", o);
    draw_db(o, a, 15, 5);
    if (b)
        draw_db(o, b, 15 + MAP_W + 30, 5);
    legend(o, 15, h - 25);
    fputs("</svg>\n", o);
}

/* ---- text --------------------------------------------------------------------------- */

static void count(const ins_db *db, int64_t n[INS_NKINDS], int64_t bytes[INS_NKINDS])
{
    memset(n, 0, sizeof(int64_t) * INS_NKINDS);
    memset(bytes, 0, sizeof(int64_t) * INS_NKINDS);
    for (size_t i = 0; i < db->n; i++)
        for (size_t j = 0; j < db->f[i].n; j++) {
            n[db->f[i].r[j].kind]++;
            bytes[db->f[i].r[j].kind] += (int64_t)db->f[i].r[j].len;
        }
}

static void text(FILE *o, const ins_db *db)
{
    fputs(db->summary ? db->summary : "", o);
    for (size_t k = 0; k < db->n; k++)
        if (db->f[k].summary)
            fprintf(o, "  %s", db->f[k].summary);
    for (size_t k = 0; k < db->n; k++)
        for (size_t j = 0; j < db->f[k].n; j++)
            if (db->f[k].r[j].kind == INS_DAMAGE)
                fprintf(o, "  DAMAGE in %s at offset %llu: %s\n", db->f[k].name,
                        (unsigned long long)db->f[k].r[j].off,
                        db->f[k].r[j].note ? db->f[k].r[j].note : "");
    int64_t n[INS_NKINDS], b[INS_NKINDS];
    count(db, n, b);
    fputs("  regions:", o);
    for (int k = 0; k < INS_NKINDS; k++)
        if (n[k])
            fprintf(o, " %s %lld (%lld bytes)", ins_kind_name[k], (long long)n[k],
                    (long long)b[k]);
    fputc('\n', o);
}

/* ---- the command ------------------------------------------------------------------- */

static void ins_usage(FILE *f)
{
    fprintf(f, "usage: minidoc inspect --dbpath DIR [--engine E] [--dbname NAME] [--text]\n"
               "                       [--out FILE.svg] [--png FILE.png]\n"
               "       minidoc inspect --diff A B [--text] [--out FILE.svg]\n"
               "  reads the data files read-only and draws them (SVG on stdout by default)\n");
}

static int to_png(const char *svgpath, const char *png)
{
    const char *const tools[][4] = {{"rsvg-convert", "-o", NULL, NULL},
                                    {"convert", NULL, NULL, NULL}};
    for (int t = 0; t < 2; t++) {
        pid_t pid = fork();
        if (pid == 0) {
            int devnull = open("/dev/null", 1);
            if (devnull >= 0)
                dup2(devnull, 2);
            if (t == 0)
                execlp(tools[0][0], "rsvg-convert", "-o", png, svgpath, (char *)NULL);
            else
                execlp("convert", "convert", svgpath, png, (char *)NULL);
            _exit(127);
        }
        int st = 0;
        if (pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0)
            return 0;
    }
    fprintf(stderr, "%s: cannot make %s: neither rsvg-convert (Debian librsvg2-bin) nor "
            "ImageMagick's convert worked\n", PROG, png);
    return -1;
}

int tool_inspect_main(int argc, char **argv)
{
    tool_db_opts dbo = {0};
    const char *out = NULL, *png = NULL, *diff_a = NULL, *diff_b = NULL;
    bool as_text = false;
    for (int i = 1; i < argc; i++) {
        const char *v;
        int r = tool_db_opt(argc, argv, &i, &dbo, PROG);
        if (r < 0)
            return 2;
        if (r > 0 || tool_is_name(argc, argv, i))
            continue;
        if ((v = tool_opt_value(argc, argv, &i, "--out")) ||
            (v = tool_opt_value(argc, argv, &i, "-o")))
            out = v;
        else if ((v = tool_opt_value(argc, argv, &i, "--png")))
            png = v;
        else if ((v = tool_opt_value(argc, argv, &i, "--diff"))) {
            diff_a = v;
            if (i + 1 >= argc || argv[i + 1][0] == '-') {
                fprintf(stderr, "%s: --diff needs two directories\n", PROG);
                ins_usage(stderr);
                return 2;
            }
            diff_b = argv[++i];
        } else if (strcmp(argv[i], "--text") == 0)
            as_text = true;
        else if (strcmp(argv[i], "--help") == 0) {
            ins_usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "%s: unexpected argument '%s'\n", PROG, argv[i]);
            ins_usage(stderr);
            return 2;
        }
    }
    if (!diff_a && !dbo.dbpath) {
        fprintf(stderr, "%s: --dbpath (or --diff A B) is required\n", PROG);
        ins_usage(stderr);
        return 2;
    }
    const char *dbname = dbo.dbname ? dbo.dbname : "test";
    ins_db a, b;
    if (ins_read(&a, diff_a ? diff_a : dbo.dbpath, dbo.engine, dbname) != 0) {
        ins_free(&a);
        return 1;
    }
    a.title = diff_a ? "A" : NULL;
    int64_t moved = 0;
    if (diff_b) {
        if (ins_read(&b, diff_b, dbo.engine, dbname) != 0) {
            ins_free(&a);
            ins_free(&b);
            return 1;
        }
        b.title = "B";
        moved = mark_moved(&a, &b);
    }
    FILE *o = stdout;
    char tmp[] = "/tmp/minidoc_inspect_XXXXXX.svg";
    if (png && !out) {
        int fd = mkstemps(tmp, 4);
        o = fd >= 0 ? fdopen(fd, "w") : NULL;
        out = tmp;
    } else if (out)
        o = fopen(out, "w");
    if (!o) {
        fprintf(stderr, "%s: cannot write %s: %s\n", PROG, out, strerror(errno));
        ins_free(&a);
        if (diff_b)
            ins_free(&b);
        return 1;
    }
    if (as_text) {
        if (diff_b)
            fputs("A: ", o);
        text(o, &a);
        if (diff_b) {
            fputs("B: ", o);
            text(o, &b);
            int64_t na[INS_NKINDS], ba[INS_NKINDS], nb[INS_NKINDS], bb[INS_NKINDS];
            count(&a, na, ba);
            count(&b, nb, bb);
            fputs("A -> B:", o);
            for (int k = 0; k < INS_NKINDS; k++)
                if (na[k] != nb[k] || ba[k] != bb[k])
                    fprintf(o, " %s %lld -> %lld (%+lld bytes);", ins_kind_name[k],
                            (long long)na[k], (long long)nb[k], (long long)(bb[k] - ba[k]));
            fprintf(o, " documents at a new place: %lld\n", (long long)moved);
        }
    } else
        svg(o, &a, diff_b ? &b : NULL);
    int rc = 0;
    if (o != stdout ? fclose(o) != 0 : fflush(o) != 0) {
        fprintf(stderr, "%s: cannot write %s: %s\n", PROG, out ? out : "stdout",
                strerror(errno));
        rc = 1;
    }
    if (rc == 0 && png && to_png(out, png) != 0)
        rc = 1;
    if (png && out == tmp)
        unlink(tmp);
    int damaged = a.damaged + (diff_b ? b.damaged : 0);
    if (damaged)
        fprintf(stderr, "%s: %d damaged region%s (drawn in red; --text lists them)\n", PROG,
                damaged, damaged == 1 ? "" : "s");
    ins_free(&a);
    if (diff_b)
        ins_free(&b);
    return rc ? rc : damaged ? 3 : 0;
}
