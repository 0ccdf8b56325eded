/*
 * bt_log.c -- the btree engine's write-ahead log, shaped after WiredTiger's:
 * logical records, LSNs, snappy-compressed records, group commit, recovery
 * from the checkpoint's LSN and removal of the files a checkpoint covers.
 *
 * A transaction collects its operations (bt_log_op: put, delete, create,
 * drop; formats in bt_int.h) in its own buffer; commit turns them into one
 * record (all or nothing: one length, one crc32c) and appends it to the
 * in-memory log buffer.  The buffer is written and fsynced
 *   - at once for a durable commit ({j: true}),
 *   - every commitIntervalMs by the flush thread (group commit: every
 *     commit of the interval shares one write and one fsync),
 *   - at every checkpoint, and when a record goes to the next file.
 *
 *   commit ─> prepare (compress) ─> seal (LSN, crc) ─> [buffer]
 *          ──(j:true | 100 ms | ckpt)──> write, fdatasync
 *
 * Two mutexes, taken in this order: `wmu` guards the file (fd, the bytes
 * written and synced, the switch to the next file) and is held through
 * every write and fsync; `mu` guards the buffer, the next LSN and the
 * counters, and is never held through I/O except at a file switch.  A
 * writer takes the whole buffer under `mu` (swapping in the spare one)
 * and writes it under `wmu` alone, so commits keep appending while the
 * flush thread's write and fsync run, as WiredTiger's log slots and
 * mmapv1's journal (mm_journal.c) let them.  Commits append one at a
 * time, under the engine's commit mutex (or its exclusive latch), and are
 * stamped in the same order (bt_txn.c), so log order is commit order; the
 * record is compressed before either is taken.
 *
 * Recovery (bt_log_open, after the checkpoint is loaded): replay every
 * record from the turtle's logLsn on, file after file, stopping at the
 * first torn or invalid record (a file ends cleanly only at its last
 * byte); then start a new file, and checkpoint when anything was replayed
 * or cut, which removes the replayed files.  That checkpoint is what keeps
 * a cut tail from hiding the files written after it.  Every operation sets
 * a key's final value (or creates or drops a tree by name), so replaying
 * from the same checkpoint twice gives the same state.
 *
 * The engine never sees the log as a whole: a checkpoint runs between
 * transactions, so everything before the LSN it takes is in it
 * (bt_log_ckpt_begin), and everything after is replayed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <snappy-c.h>

#include "bt_int.h"

#define LOG_MAGIC "MDBTLOG1"
#define LSN(f, o) ((uint64_t)(f) << 32 | (uint64_t)(o))
#define LSN_FILE(l) ((uint32_t)((l) >> 32))
#define LSN_OFF(l) ((uint32_t)(l))

/* ---- byte strings ------------------------------------------------------------ */

static int buf_reserve(bt_buf *b, size_t n)
{
    if (b->oom)
        return MD_ENOMEM;
    if (b->n + n <= b->cap)
        return 0;
    size_t ncap = b->cap ? b->cap : 256;
    while (ncap < b->n + n)
        ncap *= 2;
    uint8_t *np = realloc(b->p, ncap);
    if (!np) {
        b->oom = true;
        return MD_ENOMEM;
    }
    b->p = np;
    b->cap = ncap;
    return 0;
}

int bt_buf_put(bt_buf *b, const void *p, size_t n)
{
    if (buf_reserve(b, n))
        return MD_ENOMEM;
    if (n)
        memcpy(b->p + b->n, p, n);
    b->n += n;
    return 0;
}

void bt_buf_free(bt_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

static void put_u8(bt_buf *b, int v)
{
    uint8_t c = (uint8_t)v;
    bt_buf_put(b, &c, 1);
}

static void put_v(bt_buf *b, uint64_t v)
{
    uint8_t t[10];
    bt_buf_put(b, t, bt_vpack(t, v));
}

static void put_bytes(bt_buf *b, const void *p, size_t n)
{
    put_v(b, n);
    bt_buf_put(b, p, n);
}

static void wr32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void wr64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd64(const uint8_t *p)
{
    return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

/* ---- operations and records ----------------------------------------------------- */

/* Append one put or delete (op BT_LOG_PUT, BT_LOG_DEL) or drop to b; a
 * failed allocation leaves b->oom set, and the commit fails. */
void bt_log_op(bt_buf *b, int op, const char *ident, const uint8_t *key, uint32_t klen,
               eng_rid rid, const uint8_t *val, uint32_t vlen, bool has_val)
{
    put_u8(b, op);
    put_bytes(b, ident, strlen(ident));
    if (op == BT_LOG_DROP)
        return;
    put_bytes(b, key, klen);
    put_v(b, ((uint64_t)rid << 1) ^ (uint64_t)(rid >> 63));
    if (op != BT_LOG_PUT)
        return;
    put_u8(b, has_val);
    if (has_val)
        put_bytes(b, val, vlen);
}

void bt_log_op_create(bt_buf *b, const char *ident, int kind, const char *comp)
{
    put_u8(b, BT_LOG_CREATE);
    put_bytes(b, ident, strlen(ident));
    put_u8(b, kind);
    put_bytes(b, comp, strlen(comp));
}

/* The record at `lsn` for the body (the format in bt_int.h) into out,
 * replacing its contents; snappy when `compress` and it shrinks. */
/* A record is built in two steps: the body compressed under a header
 * (bt_log_prepare, outside every lock: snappy is the costly part), then
 * the LSN and the checksum filled in where the record's place in the log
 * is known (bt_log_seal, under the log's mutex). */
int bt_log_encode(uint64_t lsn, const uint8_t *body, size_t n, bool compress, bt_buf *out)
{
    int rc = bt_log_prepare(body, n, compress, out);
    if (rc == 0)
        bt_log_seal(out, lsn);
    return rc;
}

void bt_log_seal(bt_buf *rec, uint64_t lsn)
{
    uint8_t *h = rec->p;
    wr64(h + 8, lsn);
    memset(h + 4, 0, 4);
    wr32(h + 4, eng_crc32c(0, h, rec->n));
}

int bt_log_prepare(const uint8_t *body, size_t n, bool compress, bt_buf *out)
{
    const bt_compressor *c = bt_compressor_find("snappy");
    size_t stored = n, cap = compress ? c->pre_size(n) : n;
    int comp = BT_COMP_NONE;
    out->n = 0;
    if (n > UINT32_MAX - BT_LOG_RHDR - 64 || buf_reserve(out, BT_LOG_RHDR + (cap > n ? cap : n)))
        return MD_ENOMEM;
    if (compress && n && c->compress(body, n, out->p + BT_LOG_RHDR, cap, &stored) == 0)
        comp = BT_COMP_SNAPPY;
    else if (n)
        memcpy(out->p + BT_LOG_RHDR, body, n), stored = n;
    uint8_t *h = out->p;
    memset(h, 0, BT_LOG_RHDR);
    wr32(h, (uint32_t)(BT_LOG_RHDR + stored));
    wr32(h + 16, (uint32_t)n);
    h[20] = (uint8_t)comp;
    out->n = BT_LOG_RHDR + stored;
    return 0;
}

/* Check and decode the record at `lsn` (rec: the bytes from there to the
 * end of the file).  0 with the body in `body` and the record's length in
 * *rec_len; MD_NOTFOUND at the end of the file; MD_ECORRUPT for a torn,
 * damaged or misplaced record. */
int bt_log_decode(const uint8_t *rec, size_t avail, uint64_t lsn, bt_buf *body,
                  size_t *rec_len)
{
    uint8_t h[BT_LOG_RHDR];
    if (avail == 0)
        return MD_NOTFOUND;
    if (avail < BT_LOG_RHDR)
        return MD_ECORRUPT;
    uint32_t len = rd32(rec), mem = rd32(rec + 16);
    if (len < BT_LOG_RHDR || len > avail || rd64(rec + 8) != lsn ||
        mem > UINT32_MAX - BT_LOG_RHDR - 64)
        return MD_ECORRUPT;
    memcpy(h, rec, BT_LOG_RHDR);
    memset(h + 4, 0, 4);
    uint32_t ck = eng_crc32c(eng_crc32c(0, h, BT_LOG_RHDR), rec + BT_LOG_RHDR, len - BT_LOG_RHDR);
    if (ck != rd32(rec + 4))
        return MD_ECORRUPT;
    /* the body's length must be the one its bytes give before any memory
     * is reserved for it: a damaged mem (with a matching crc) could
     * otherwise ask for up to 4 GB */
    const uint8_t *src = rec + BT_LOG_RHDR;
    size_t stored = len - BT_LOG_RHDR, got = 0, ulen;
    if (rec[20] == BT_COMP_NONE) {
        if (stored != mem)
            return MD_ECORRUPT;
    } else if (rec[20] != BT_COMP_SNAPPY ||
               snappy_uncompressed_length((const char *)src, stored, &ulen) != SNAPPY_OK ||
               ulen != mem) {
        return MD_ECORRUPT;
    }
    body->n = 0;
    if (buf_reserve(body, mem + 1))
        return MD_ENOMEM;
    if (rec[20] == BT_COMP_NONE) {
        memcpy(body->p, src, mem);
    } else if (bt_compressor_by_id(BT_COMP_SNAPPY)->decompress(src, stored, body->p, mem,
                                                               &got) != 0 ||
               got != mem) {
        return MD_ECORRUPT;
    }
    body->n = mem;
    *rec_len = len;
    return 0;
}

/* ---- replay ------------------------------------------------------------------ */

static int get_bytes(const uint8_t **p, const uint8_t *end, const uint8_t **s, uint32_t *n)
{
    uint64_t v;
    if (bt_vunpack(p, end, &v) || v > (uint64_t)(end - *p))
        return MD_ECORRUPT;
    *s = *p;
    *n = (uint32_t)v;
    *p += v;
    return 0;
}

static int replay_put(bt_tree *t, int op, const uint8_t **p, const uint8_t *end,
                      md_error *err)
{
    const uint8_t *key, *val = NULL;
    uint32_t klen, vlen = 0;
    uint64_t z;
    bt_ent *old = NULL;
    bool has_val = false;
    if (get_bytes(p, end, &key, &klen) || bt_vunpack(p, end, &z))
        return ENG_CORRUPT(err, "btree: bad log operation");
    eng_rid rid = (eng_rid)(z >> 1) ^ -(eng_rid)(z & 1);
    if (op == BT_LOG_PUT) {
        if (*p >= end)
            return ENG_CORRUPT(err, "btree: bad log operation");
        has_val = *(*p)++ != 0;
        if (has_val && get_bytes(p, end, &val, &vlen))
            return ENG_CORRUPT(err, "btree: bad log operation");
    }
    int rc = bt_get(t, key, klen, rid, &old, err);
    if (rc && rc != MD_NOTFOUND)
        return rc;
    if (op == BT_LOG_DEL && !old)
        return 0;
    if (t->kind == BT_RS && op == BT_LOG_PUT) {
        if (rid >= t->next_rid)
            t->next_rid = rid + 1;
        t->n_inserts += !old, t->n_updates += !!old;
        t->bytes_written += vlen, t->upd_bytes += old ? vlen : 0;
    }
    return bt_tree_apply(t, key, klen, rid, val, vlen, has_val, op == BT_LOG_DEL, err);
}

/* Apply one record's operations. */
static int replay_body(bt_engine *e, const uint8_t *p, const uint8_t *end, md_error *err)
{
    while (p < end) {
        int op = *p++, rc = 0;
        const uint8_t *s;
        uint32_t n;
        char ident[ENG_IDENT_MAX], cname[32];
        if (get_bytes(&p, end, &s, &n) || n >= sizeof ident)
            return ENG_CORRUPT(err, "btree: bad log operation");
        memcpy(ident, s, n);
        ident[n] = '\0';
        bt_tree *t = n ? bt_find_tree(e, ident) : e->meta;
        if (op == BT_LOG_CREATE) {
            int kind = p < end ? *p++ : -1;
            if (get_bytes(&p, end, &s, &n) || n >= sizeof cname || kind < BT_RS || kind > BT_SS)
                return ENG_CORRUPT(err, "btree: bad log operation");
            memcpy(cname, s, n);
            cname[n] = '\0';
            const bt_compressor *c = bt_compressor_find(cname);
            if (!c)
                return ENG_CORRUPT(err, "btree: log: unknown compressor %s", cname);
            if (!t && (rc = bt_tree_new(e, ident, kind, c, &t, err)) == 0 &&
                bt_add_tree(e, t) != 0) {
                bt_tree_destroy(t);
                rc = bt_nomem(err);
            }
        } else if (op == BT_LOG_DROP) {
            if (t && t != e->meta) {
                t->live = false;
                rc = bt_unlink_after_ckpt(e, t->fname, t->ident);
            }
        } else if (op == BT_LOG_PUT || op == BT_LOG_DEL) {
            if (!t)
                return ENG_CORRUPT(err, "btree: log names an unknown store %s", ident);
            rc = replay_put(t, op, &p, end, err);
        } else {
            return ENG_CORRUPT(err, "btree: bad log operation %d", op);
        }
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- files -------------------------------------------------------------------- */

static void log_path(const bt_log *l, uint32_t fnum, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/btlog.%010u", l->dir, fnum);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* The numbers of the log files, ascending; caller frees *out. */
static int list_files(const bt_log *l, uint32_t **out, size_t *n)
{
    DIR *d = opendir(l->dir);
    struct dirent *de;
    size_t cap = 0;
    *out = NULL;
    *n = 0;
    if (!d)
        return errno == ENOENT ? 0 : MD_EIO;
    while ((de = readdir(d)) != NULL) {
        unsigned num;
        char tail;
        if (strlen(de->d_name) != 16 || sscanf(de->d_name, "btlog.%10u%c", &num, &tail) != 1)
            continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            uint32_t *nv = realloc(*out, cap * sizeof *nv);
            if (!nv) {
                closedir(d);
                return MD_ENOMEM;
            }
            *out = nv;
        }
        (*out)[(*n)++] = num;
    }
    closedir(d);
    if (*n)
        qsort(*out, *n, sizeof **out, cmp_u32);
    return 0;
}

static int sync_path(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int rc = fd >= 0 && fsync(fd) == 0 ? 0 : MD_EIO;
    if (fd >= 0)
        close(fd);
    return rc;
}

/* The code of a failed write or sync of the log (from errno): MD_ENOSPC
 * for a full disk.  The caller makes it sticky in io_err, under mu. */
static int log_failed(void)
{
    return errno == ENOSPC || errno == EDQUOT ? MD_ENOSPC : MD_EIO;
}

/* The caller's error for a failed log write (rc from l->io_err), naming
 * the log file. */
static int log_error(md_error *err, int rc, const char *dir, uint32_t fnum, const char *what)
{
    return md_error_set(err, rc, eng_rc_to_code(rc), "btree: %s the log file %s/btlog.%010u: %s",
                        what, dir, fnum, strerror(rc == MD_ENOSPC ? ENOSPC : EIO));
}

/* Write n bytes at the file's end and, when `sync`, fdatasync them.  Under
 * wmu.  A failure is returned (the caller makes it sticky in io_err): what
 * was written is in the file, the rest is lost, and nothing may follow. */
static int write_wmu(bt_log *l, const uint8_t *p, size_t n, bool sync)
{
    size_t done = 0;
    if (l->fd < 0)
        return MD_EIO;
    while (done < n) {
        ssize_t w = pwrite(l->fd, p + done, n - done, (off_t)(l->written + done));
        if (w < 0 && errno == EINTR)
            continue;
        if (w == 0)
            errno = ENOSPC; /* no progress: the disk is full */
        if (w <= 0) {
            l->written += done;
            return log_failed();
        }
        done += (size_t)w;
    }
    l->written += done;
    if (sync && l->written > l->synced) {
        if (fdatasync(l->fd) != 0)
            return log_failed();
        l->synced = l->written;
        l->syncs++;
    }
    return 0;
}

/* log_flush, with wmu already taken; releases it. */
static int flush_wmu(bt_log *l, bool sync, uint64_t *upto)
{
    pthread_mutex_lock(&l->mu);
    int rc = l->io_err;
    bt_buf b = {0};
    if (rc == 0 && l->fd >= 0) {
        b = l->buf;
        l->buf = l->spare;
        l->buf.n = 0;
        l->buf.oom = false;
        memset(&l->spare, 0, sizeof l->spare);
    }
    if (upto)
        *upto = l->next_lsn;
    pthread_mutex_unlock(&l->mu);
    if (rc == 0 && l->fd >= 0)
        rc = write_wmu(l, b.p, b.n, sync);
    pthread_mutex_lock(&l->mu);
    if (rc && !l->io_err)
        l->io_err = rc;
    b.n = 0;
    if (!l->spare.p)
        l->spare = b; /* reused by the next flush */
    else
        bt_buf_free(&b);
    pthread_mutex_unlock(&l->mu);
    pthread_mutex_unlock(&l->wmu);
    return rc;
}

/* Write out what the buffer holds and (sync) fdatasync the file.  Takes
 * wmu, then mu only to take the buffer (the spare one goes in its place):
 * commits append while the write and the sync run.  *upto (may be NULL):
 * everything before this LSN is now written (and synced). */
static int log_flush(bt_log *l, bool sync, uint64_t *upto)
{
    pthread_mutex_lock(&l->wmu);
    return flush_wmu(l, sync, upto);
}

/* Write and sync the buffer, close the current file and start file
 * fnum + 1.  Under wmu and mu (the only I/O under mu: one per logFileSize
 * of records, and at open). */
static int switch_locked(bt_log *l)
{
    char path[4300];
    uint8_t h[BT_LOG_FHDR] = {0};
    int rc = l->io_err;
    if (rc == 0 && l->fd >= 0)
        rc = write_wmu(l, l->buf.p, l->buf.n, true);
    l->buf.n = 0;
    if (rc)
        return l->io_err = rc;
    if (l->fd >= 0)
        close(l->fd);
    l->fnum++;
    log_path(l, l->fnum, path, sizeof path);
    l->fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    memcpy(h, LOG_MAGIC, 8);
    wr32(h + 8, l->fnum);
    wr32(h + 12, 1);
    wr64(h + 16, l->file_max);
    wr32(h + 24, eng_crc32c(0, h, 24));
    if (l->fd < 0 || pwrite(l->fd, h, sizeof h, 0) != (ssize_t)sizeof h || fsync(l->fd) != 0 ||
        sync_path(l->dir) != 0)
        return l->io_err = log_failed();
    l->written = l->synced = BT_LOG_FHDR;
    l->next_lsn = LSN(l->fnum, BT_LOG_FHDR);
    return 0;
}

/* ---- commit, checkpoint, the flush thread ----------------------------------------- */

/* Append the committed transaction's record; durable: written and synced
 * before returning.  *appended: the record is in the log (a later failure
 * to write or sync it leaves its fate unknown, and the log refuses every
 * later commit); *want_ckpt: the log since the last checkpoint passed
 * checkpointLogSizeMB. */
int bt_log_commit(bt_engine *e, const bt_buf *body, bt_buf *prepared, bool durable,
                  bool *appended, bool *want_ckpt, md_error *err)
{
    bt_log *l = &e->log;
    bt_buf own = {0}, *rec = prepared ? prepared : &own;
    int rc = 0;
    *want_ckpt = *appended = false;
    if (!l->on || body->n == 0)
        return 0;
    if (body->oom)
        return bt_nomem(err);
    if (!prepared && bt_log_prepare(body->p, body->n, true, &own) != 0)
        return bt_nomem(err);
    if (rec->n == 0) /* preparing it failed: out of memory */
        return bt_nomem(err);
    pthread_mutex_lock(&l->mu);
    if (l->fd < 0 || l->io_err)
        rc = l->fd < 0 ? MD_EIO : l->io_err;
    if (rc == 0 && LSN_OFF(l->next_lsn) + rec->n > l->file_max &&
        LSN_OFF(l->next_lsn) > BT_LOG_FHDR) {
        /* the record goes to the next file: wmu comes first */
        pthread_mutex_unlock(&l->mu);
        pthread_mutex_lock(&l->wmu);
        pthread_mutex_lock(&l->mu);
        rc = l->fd < 0 ? MD_EIO : l->io_err;
        if (rc == 0 && LSN_OFF(l->next_lsn) + rec->n > l->file_max &&
            LSN_OFF(l->next_lsn) > BT_LOG_FHDR)
            rc = switch_locked(l);
        pthread_mutex_unlock(&l->wmu);
    }
    if (rc == 0)
        bt_log_seal(rec, l->next_lsn);
    if (rc == 0 && (uint64_t)LSN_OFF(l->next_lsn) + rec->n > UINT32_MAX)
        rc = MD_ENOSPC;
    if (rc == 0)
        rc = bt_buf_put(&l->buf, rec->p, rec->n);
    int flush = 0; /* 2: write and sync now, 1: write now */
    if (rc == 0) {
        *appended = true;
        l->next_lsn += rec->n;
        l->since_ckpt += (int64_t)rec->n;
        l->records++;
        l->raw_bytes += (int64_t)body->n;
        l->stored_bytes += (int64_t)rec->n;
        if (durable || l->interval_ms <= 0)
            flush = 2;
        else if (l->buf.n >= (1u << 20))
            flush = 1; /* bound the buffer */
        *want_ckpt = l->ckpt_bytes > 0 && l->since_ckpt >= l->ckpt_bytes;
    }
    uint32_t fnum = l->fnum;
    pthread_mutex_unlock(&l->mu);
    if (flush == 2)
        rc = log_flush(l, true, NULL);
    else if (flush == 1 && pthread_mutex_trylock(&l->wmu) == 0)
        rc = flush_wmu(l, false, NULL); /* else a writer is at it: it takes the lot */
    bt_buf_free(&own);
    if (rc == MD_ENOMEM)
        return bt_nomem(err);
    if (rc)
        return log_error(err, rc, l->dir, fnum, "cannot write");
    return 0;
}

/* Before a checkpoint: write and sync the log; *lsn is the LSN the
 * checkpoint covers (everything before it), 0 when there is no log. */
int bt_log_ckpt_begin(bt_engine *e, uint64_t *lsn, md_error *err)
{
    bt_log *l = &e->log;
    int rc = log_flush(l, true, lsn);
    pthread_mutex_lock(&l->mu);
    uint32_t fnum = l->fnum;
    pthread_mutex_unlock(&l->mu);
    return rc ? log_error(err, rc, l->dir, fnum, "cannot sync") : 0;
}

/* After the turtle names a checkpoint covering `lsn`: remove the files
 * before lsn's. */
void bt_log_ckpt_done(bt_engine *e, uint64_t lsn)
{
    bt_log *l = &e->log;
    uint32_t *files;
    size_t n;
    char path[4300];
    pthread_mutex_lock(&l->mu);
    l->since_ckpt = 0;
    pthread_mutex_unlock(&l->mu);
    if (lsn == 0 || list_files(l, &files, &n) != 0)
        return;
    for (size_t i = 0; i < n && files[i] < LSN_FILE(lsn); i++) {
        log_path(l, files[i], path, sizeof path);
        unlink(path);
    }
    free(files);
}

static void *flush_main(void *arg)
{
    bt_log *l = arg;
    pthread_mutex_lock(&l->mu);
    while (!l->stop) {
        struct timespec ts = eng_deadline(CLOCK_REALTIME, (int64_t)l->interval_ms * 1000);
        pthread_cond_timedwait(&l->cv, &l->mu, &ts);
        if (!l->stop && l->buf.n) {
            pthread_mutex_unlock(&l->mu);
            (void)log_flush(l, true, NULL); /* a failure is sticky: commits report it */
            pthread_mutex_lock(&l->mu);
        }
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

/* ---- open, recovery, close --------------------------------------------------------- */

/* The "btree" open options of the log; others are left alone. */
int bt_log_parse_opts(bt_log *l, const char *k, bson_iter_t *it, md_error *err)
{
    if (strcmp(k, "log") == 0)
        l->on = bson_iter_as_bool(it);
    else if (strcmp(k, "commitIntervalMs") == 0)
        l->interval_ms = (int)bson_iter_as_int64(it);
    else if (strcmp(k, "logFileSize") == 0 || strcmp(k, "logFileSizeMB") == 0) {
        int64_t v = bson_iter_as_int64(it) << (k[11] ? 20 : 0);
        if (v < 4096 || v > (int64_t)UINT32_MAX)
            return md_error_set(err, MD_EINVAL, MD_CODE_INVALID_OPTIONS,
                                "btree: logFileSize must be 4 KB .. 4 GB");
        l->file_max = (uint64_t)v;
    } else if (strcmp(k, "checkpointLogSizeMB") == 0)
        l->ckpt_bytes = bson_iter_as_int64(it) << 20;
    else if (strcmp(k, "checkpointLogSize") == 0)
        l->ckpt_bytes = bson_iter_as_int64(it);
    else if (strcmp(k, "debugNoRecoveryCheckpoint") == 0)
        l->no_recovery_ckpt = bson_iter_as_bool(it);
    return 0;
}

/* The offset of the first valid record of file fnum after offset `from`
 * (its LSN field must name that very offset, and its checksum verify), or
 * 0.  A crash only tears the end of the log: records are appended in order
 * and the file is fdatasynced before the next one is created, so a valid
 * record after a bad one means the log itself was damaged. */
static size_t valid_after(const uint8_t *img, size_t size, uint32_t fnum, size_t from)
{
    bt_buf body = {0};
    size_t found = 0, len;
    for (size_t p = from < BT_LOG_FHDR ? BT_LOG_FHDR : from + 1; p + BT_LOG_RHDR <= size; p++) {
        if (rd64(img + p + 8) != LSN(fnum, p))
            continue;
        if (bt_log_decode(img + p, size - p, LSN(fnum, p), &body, &len) == 0) {
            found = p;
            break;
        }
    }
    bt_buf_free(&body);
    return found;
}

/* Replay one file from offset `off`; *torn: it ended in a bad record, at
 * *torn_at (0: a bad file header).  A bad record or header followed by a
 * valid record is damage: MD_ECORRUPT naming the file and the offset. */
static int replay_file(bt_engine *e, uint32_t fnum, uint32_t off, int64_t *records, bool *torn,
                       size_t *torn_at, md_error *err)
{
    char path[4300];
    struct stat st;
    uint8_t *img = NULL;
    bt_buf body = {0};
    int rc = 0, fd;
    log_path(&e->log, fnum, path, sizeof path);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 || fstat(fd, &st) != 0)
        rc = bt_io_error(err, "cannot open", path);
    else if (st.st_size > (off_t)UINT32_MAX)
        rc = ENG_CORRUPT(err, "btree: log file %s too large", path);
    else if (!(img = malloc((size_t)st.st_size + 1)))
        rc = bt_nomem(err);
    else if (pread(fd, img, (size_t)st.st_size, 0) != st.st_size)
        rc = bt_io_error(err, "cannot read", path);
    if (fd >= 0)
        close(fd);
    size_t size = rc ? 0 : (size_t)st.st_size;
    if (rc == 0 && (size < BT_LOG_FHDR || memcmp(img, LOG_MAGIC, 8) != 0 ||
                    rd32(img + 8) != fnum || rd32(img + 24) != eng_crc32c(0, img, 24))) {
        *torn = true; /* created, header not synced */
        *torn_at = 0;
        size_t next = valid_after(img, size, fnum, 0);
        if (next)
            rc = ENG_CORRUPT(err,
                             "btree: log file %s is damaged: bad file header at offset 0, "
                             "yet a valid record follows at offset %zu",
                             path, next);
    }
    for (size_t at = off < BT_LOG_FHDR ? BT_LOG_FHDR : off; rc == 0 && !*torn;) {
        size_t len = 0;
        int drc = bt_log_decode(img + at, at <= size ? size - at : 0, LSN(fnum, at), &body, &len);
        if (drc == MD_NOTFOUND)
            break;
        if (drc == MD_ENOMEM)
            rc = bt_nomem(err);
        else if (drc) {
            *torn = true;
            *torn_at = at;
            size_t next = valid_after(img, size, fnum, at);
            if (next)
                rc = ENG_CORRUPT(err,
                                 "btree: log file %s is damaged at offset %zu: the record there "
                                 "fails its checksum, yet a valid record follows at offset %zu",
                                 path, at, next);
        }
        else if ((rc = replay_body(e, body.p, body.p + body.n, err)) == 0) {
            (*records)++;
            at += len;
            bt_cache_check(e);
        }
    }
    free(img);
    bt_buf_free(&body);
    return rc;
}

/* Whether log file fnum starts with a valid record. */
static bool later_has_record(const bt_log *l, uint32_t fnum)
{
    char path[4300];
    uint8_t h[BT_LOG_FHDR + BT_LOG_RHDR];
    struct stat st;
    bool yes = false;
    log_path(l, fnum, path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    if (fstat(fd, &st) == 0 && st.st_size > (off_t)sizeof h && st.st_size <= (off_t)UINT32_MAX &&
        pread(fd, h, sizeof h, 0) == (ssize_t)sizeof h) {
        uint32_t len = rd32(h + BT_LOG_FHDR);
        uint8_t *img = len <= st.st_size - BT_LOG_FHDR ? malloc(len) : NULL;
        bt_buf body = {0};
        size_t rlen;
        if (img && pread(fd, img, len, BT_LOG_FHDR) == (ssize_t)len)
            yes = bt_log_decode(img, len, LSN(fnum, BT_LOG_FHDR), &body, &rlen) == 0;
        free(img);
        bt_buf_free(&body);
    }
    close(fd);
    return yes;
}

static int replay(bt_engine *e, uint32_t *last, bool *changed, md_error *err)
{
    uint32_t *files;
    size_t n;
    int64_t records = 0;
    bool torn = false;
    uint32_t from = LSN_FILE(e->ckpt_lsn), prev = 0;
    size_t torn_at = 0, i;
    int rc = list_files(&e->log, &files, &n);
    if (rc)
        return bt_io_error(err, "cannot list", e->log.dir);
    for (i = 0; i < n && rc == 0 && !torn; i++) {
        if (files[i] < from)
            continue;
        if (prev && files[i] != prev + 1)
            break; /* a gap: nothing after it can follow what came before */
        prev = files[i];
        rc = replay_file(e, files[i], files[i] == from ? LSN_OFF(e->ckpt_lsn) : 0, &records,
                         &torn, &torn_at, err);
    }
    /* a file is synced whole before the next one is created: a later file
     * holding a record means the one that stopped the replay is damaged */
    for (size_t k = i; rc == 0 && torn && k < n; k++)
        if (later_has_record(&e->log, files[k])) {
            char path[4300];
            log_path(&e->log, prev, path, sizeof path);
            rc = ENG_CORRUPT(err,
                             "btree: log file %s is damaged at offset %zu, yet the later log "
                             "file btlog.%010u holds records",
                             path, torn_at, files[k]);
        }
    *last = n ? files[n - 1] : 0;
    if (*last < from)
        *last = from;
    *changed = records > 0 || torn || (n && !e->log.on);
    free(files);
    bt_gen_bump(e);
    return rc;
}

/* Recover from the log, then start a new log file (log on) and the flush
 * thread.  Called once the checkpoint is loaded. */
int bt_log_open(bt_engine *e, md_error *err)
{
    bt_log *l = &e->log;
    uint32_t last = 0;
    bool changed = false;
    snprintf(l->dir, sizeof l->dir, "%s/log", e->dir);
    if (l->on && mkdir(l->dir, 0755) != 0 && errno != EEXIST)
        return bt_io_error(err, "cannot create directory", l->dir);
    int rc = replay(e, &last, &changed, err);
    if (rc)
        return rc;
    pthread_mutex_lock(&l->wmu);
    pthread_mutex_lock(&l->mu);
    l->fnum = last;
    l->next_lsn = LSN(last + 1, BT_LOG_FHDR);
    if (l->on && switch_locked(l) != 0)
        rc = bt_io_error(err, "cannot create a log file in", l->dir);
    pthread_mutex_unlock(&l->mu);
    pthread_mutex_unlock(&l->wmu);
    if (rc == 0 && changed && !l->no_recovery_ckpt)
        rc = bt_checkpoint(e, err);
    if (rc == 0 && l->on && l->interval_ms > 0) {
        if (pthread_create(&l->thr, NULL, flush_main, l) != 0)
            return md_error_set(err, MD_EIO, MD_CODE_INTERNAL_ERROR,
                                "btree: cannot start the log thread");
        l->thr_on = true;
    }
    return rc;
}

/* Stop the flush thread and close the file: what the buffer holds is
 * written unless the engine crashed (a test crash loses it, as a kill
 * would). */
void bt_log_close(bt_engine *e)
{
    bt_log *l = &e->log;
    pthread_mutex_lock(&l->mu);
    l->stop = true;
    pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&l->mu);
    if (l->thr_on)
        pthread_join(l->thr, NULL);
    l->thr_on = false;
    if (!e->crashed)
        (void)log_flush(l, true, NULL);
    if (l->fd >= 0)
        close(l->fd);
    l->fd = -1;
    bt_buf_free(&l->buf);
    bt_buf_free(&l->spare);
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
    pthread_mutex_destroy(&l->wmu);
}

/* A test crash: the buffer is lost and nothing more is written. */
void bt_test_crash_now(eng_engine *eh)
{
    bt_engine *e = (bt_engine *)eh;
    bt_log *l = &e->log;
    e->crashed = true;
    pthread_mutex_lock(&l->wmu);
    pthread_mutex_lock(&l->mu);
    l->buf.n = 0;
    if (l->fd >= 0)
        close(l->fd);
    l->fd = -1;
    pthread_mutex_unlock(&l->mu);
    pthread_mutex_unlock(&l->wmu);
}

void bt_log_status(bt_engine *e, bson_t *status)
{
    bt_log *l = &e->log;
    bson_t sub;
    pthread_mutex_lock(&l->wmu); /* syncs */
    pthread_mutex_lock(&l->mu);
    BSON_APPEND_DOCUMENT_BEGIN(status, "log", &sub);
    BSON_APPEND_BOOL(&sub, "enabled", l->on);
    BSON_APPEND_INT64(&sub, "file", l->fnum);
    BSON_APPEND_INT64(&sub, "lsn", (int64_t)l->next_lsn);
    BSON_APPEND_INT64(&sub, "records", l->records);
    BSON_APPEND_INT64(&sub, "rawBytes", l->raw_bytes);
    BSON_APPEND_INT64(&sub, "storedBytes", l->stored_bytes);
    BSON_APPEND_INT64(&sub, "syncs", l->syncs);
    BSON_APPEND_INT64(&sub, "bytesSinceCheckpoint", l->since_ckpt);
    bson_append_document_end(status, &sub);
    pthread_mutex_unlock(&l->mu);
    pthread_mutex_unlock(&l->wmu);
}
