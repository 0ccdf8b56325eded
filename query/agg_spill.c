/*
 * agg_spill.c -- the external sorter of the blocking stages ($sort, and
 * $group's spilled partial groups): documents are buffered in memory;
 * past the stage's memory limit (allowDiskUse only) the buffer is sorted
 * and written as a run to a temporary file under the database directory
 * (<dbpath>/_tmp, as MongoDB's), and the output merges the runs and what
 * is left in memory.
 *
 * A run file is a sequence of records, each
 *
 *   OFFSET SIZE FIELD
 *   0      8    seq: the document's input position (little endian), so that
 *               equal keys come out in input order from any run
 *   8      n    the BSON document (its first 4 bytes are n)
 *
 * The file is unlinked as soon as it is created: it lives as long as its
 * descriptor, so a crash leaves nothing behind.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agg_int.h"

#define ITEM_OVERHEAD 64 /* bytes counted per buffered document beyond its own */

typedef struct item {
    bson_t *doc;
    uint64_t seq;
} item;

typedef struct run {
    FILE *f;
    item head; /* head.doc NULL: exhausted */
} run;

struct agg_sorter {
    agg_ctx *ctx;
    agg_cmp_fn cmp;
    void *arg;
    int64_t limit, topk, mem;
    uint64_t seq;
    item *buf;
    size_t n, cap, pos;
    run *runs;
    size_t nruns;
    bool finished;
};

static int64_t spills;

int64_t agg_spill_count(void)
{
    return Q_LOAD(spills);
}

agg_sorter *agg_sorter_new(agg_ctx *ctx, agg_cmp_fn cmp, void *arg, int64_t limit)
{
    agg_sorter *s = calloc(1, sizeof *s);
    assert(s);
    s->ctx = ctx;
    s->cmp = cmp;
    s->arg = arg;
    s->limit = limit;
    return s;
}

void agg_sorter_set_topk(agg_sorter *s, int64_t k)
{
    s->topk = k;
}

int agg_sorter_runs(const agg_sorter *s)
{
    return (int)s->nruns;
}

static int item_cmp(const item *a, const item *b, const agg_sorter *s)
{
    int c = s->cmp(a->doc, b->doc, s->arg);
    if (c == 0)
        c = a->seq < b->seq ? -1 : a->seq > b->seq;
    return c;
}

static int item_cmp_r(const void *a, const void *b, void *s)
{
    return item_cmp(a, b, s);
}

static void sort_buf(agg_sorter *s)
{
    if (s->n > 1)
        qsort_r(s->buf, s->n, sizeof *s->buf, item_cmp_r, s);
}

static void free_items(item *v, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
        if (v[i].doc)
            bson_destroy(v[i].doc);
}

/* An unlinked temporary file under <dbpath>/_tmp. */
static FILE *temp_file(agg_ctx *ctx, md_error *err)
{
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/_tmp", ctx->db->path ? ctx->db->path : ".");
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        q_err(err, MD_EIO, MD_CODE_FILE_STREAM_FAILED, "cannot create %s: %s", dir,
              strerror(errno));
        return NULL;
    }
    snprintf(path, sizeof path, "%s/extsort.XXXXXX", dir);
    int fd = mkstemp(path);
    if (fd < 0) {
        q_err(err, MD_EIO, MD_CODE_FILE_STREAM_FAILED, "cannot create a file in %s: %s", dir,
              strerror(errno));
        return NULL;
    }
    unlink(path);
    FILE *f = fdopen(fd, "w+b");
    if (!f)
        close(fd);
    return f;
}

/* Write the sorted buffer as one run; the buffer empties. */
int agg_sorter_spill(agg_sorter *s, md_error *err)
{
    if (s->n == 0)
        return 0;
    sort_buf(s);
    FILE *f = temp_file(s->ctx, err);
    if (!f)
        return MD_EIO;
    bool ok = true;
    for (size_t i = 0; i < s->n && ok; i++) {
        uint8_t seq[8];
        for (int b = 0; b < 8; b++)
            seq[b] = (uint8_t)(s->buf[i].seq >> (8 * b));
        ok = fwrite(seq, 8, 1, f) == 1 &&
             fwrite(bson_get_data(s->buf[i].doc), s->buf[i].doc->len, 1, f) == 1;
    }
    ok = ok && fflush(f) == 0 && fseek(f, 0, SEEK_SET) == 0;
    free_items(s->buf, 0, s->n);
    s->n = 0;
    s->mem = 0;
    if (!ok) {
        fclose(f);
        return q_err(err, MD_EIO, MD_CODE_FILE_STREAM_FAILED,
                     "writing a sort run to disk failed: %s", strerror(errno));
    }
    s->runs = realloc(s->runs, (s->nruns + 1) * sizeof *s->runs);
    assert(s->runs);
    s->runs[s->nruns++] = (run){f, {NULL, 0}};
    Q_COUNT(spills, 1);
    return 0;
}

int agg_sorter_add(agg_sorter *s, bson_t *doc, md_error *err)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 256;
        s->buf = realloc(s->buf, s->cap * sizeof *s->buf);
        assert(s->buf);
    }
    s->buf[s->n++] = (item){doc, s->seq++};
    s->mem += doc->len + ITEM_OVERHEAD;
    if (s->topk > 0) {
        if ((int64_t)s->n >= 2 * s->topk) {
            sort_buf(s);
            free_items(s->buf, (size_t)s->topk, s->n);
            s->n = (size_t)s->topk;
        }
        return 0;
    }
    if (s->mem <= s->limit)
        return 0;
    if (!s->ctx->allow_disk)
        return MD_ETOOBIG;
    return agg_sorter_spill(s, err);
}

/* Read the next record of r into r->head (doc NULL at the end). */
static int run_advance(run *r, md_error *err)
{
    uint8_t seq[8], len4[4];
    r->head.doc = NULL;
    if (fread(seq, 8, 1, r->f) != 1)
        return 0;
    if (fread(len4, 4, 1, r->f) != 1)
        goto bad;
    uint32_t len = (uint32_t)len4[0] | (uint32_t)len4[1] << 8 | (uint32_t)len4[2] << 16 |
                   (uint32_t)len4[3] << 24;
    if (len < 5 || len > Q_BSON_MAX_INTERNAL * 2)
        goto bad;
    uint8_t *data = malloc(len);
    assert(data);
    memcpy(data, len4, 4);
    if (fread(data + 4, len - 4, 1, r->f) != 1) {
        free(data);
        goto bad;
    }
    r->head.doc = bson_new_from_data(data, len);
    free(data);
    if (!r->head.doc)
        goto bad;
    r->head.seq = 0;
    for (int b = 0; b < 8; b++)
        r->head.seq |= (uint64_t)seq[b] << (8 * b);
    return 0;
bad:
    return q_err(err, MD_ECORRUPT, MD_CODE_FILE_STREAM_FAILED,
                 "a sort run read back from disk is damaged");
}

int agg_sorter_finish(agg_sorter *s, md_error *err)
{
    int rc = 0;
    sort_buf(s);
    if (s->topk > 0 && (int64_t)s->n > s->topk) {
        free_items(s->buf, (size_t)s->topk, s->n);
        s->n = (size_t)s->topk;
    }
    for (size_t i = 0; i < s->nruns && !rc; i++)
        rc = run_advance(&s->runs[i], err);
    s->finished = true;
    return rc;
}

int agg_sorter_next(agg_sorter *s, bson_t **out, md_error *err)
{
    assert(s->finished);
    /* the smallest head among the runs and the memory buffer */
    item *best = s->pos < s->n ? &s->buf[s->pos] : NULL;
    run *from = NULL;
    for (size_t i = 0; i < s->nruns; i++) {
        run *r = &s->runs[i];
        if (r->head.doc && (!best || item_cmp(&r->head, best, s) < 0)) {
            best = &r->head;
            from = r;
        }
    }
    if (!best)
        return MD_NOTFOUND;
    *out = best->doc;
    best->doc = NULL;
    if (!from) {
        s->pos++;
        return 0;
    }
    return run_advance(from, err);
}

void agg_sorter_destroy(agg_sorter *s)
{
    if (!s)
        return;
    free_items(s->buf, s->pos, s->n);
    free(s->buf);
    for (size_t i = 0; i < s->nruns; i++) {
        if (s->runs[i].head.doc)
            bson_destroy(s->runs[i].head.doc);
        fclose(s->runs[i].f);
    }
    free(s->runs);
    free(s);
}
