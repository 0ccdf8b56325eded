/*
 * mm_journal.c -- durability for mmapv1 (MongoDB 3.0's "dur"): group
 * commit of write intents into checksummed journal sections, the thread
 * that commits them every journalCommitInterval and flushes the data files
 * every syncdelay, and replay of the journal at open.
 *
 *   commit(t)    intents + the bytes they now hold --> pending buffer (mu)
 *                     |  every interval ms, at once for durable commits,
 *                     v  or when more than 16 MB are pending
 *   write        seal section (seq, crc32c) -> append to j._N -> fdatasync
 *                     |  (durable commits are acknowledged from here on)
 *                     v
 *   apply        memcpy each entry into the MAP_SHARED view of its file
 *                     |  every syncdelay s, at eng_flush and at close
 *                     v
 *   flush        msync shared views -> write journal/lsn = last seq ->
 *                start a new j._N+1, unlink the older ones
 *
 * The engine reads and writes a MAP_PRIVATE view (see mm_int.h, "Journal"),
 * so no byte reaches a data file before its section is in the journal.
 *
 * Locks: wmu (journal file, sequence numbers, the files array and shared
 * views, LSN) is taken before mu (pending buffer, cow counter, stop flag,
 * failure).  The engine's own thread and the flush thread both write
 * sections; whoever holds wmu writes everything pending.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "eng_log.h"
#include "mm_int.h"

struct mm_journal {
    pthread_mutex_t wmu;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    bool thread_on;
    /* under mu */
    mm_jbuf pend;
    int64_t cow_bytes;
    bool stop;
    int failed;     /* set under mu (atomic store); mm_journal_failed reads it without */
    char emsg[600]; /* what failed: "cannot write DIR/journal/j._3: ..." */
    /* under wmu */
    mm_jbuf spare;
    int fd;          /* current journal file, -1 when off */
    int first_no, cur_no;
    int64_t fsize;
    uint64_t file_id;
    uint64_t seq, lsn;
    int64_t last_flush_ns;
    int64_t n_commits, n_early, bytes_journaled, n_flushes, replayed;
    /* options (constant) */
    mm_jopts o;
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void jpath(const mm_engine *e, const char *name, char *buf, size_t n)
{
    snprintf(buf, n, "%s/journal/%s", e->dir, name);
}

static void jfile_path(const mm_engine *e, int no, char *buf, size_t n)
{
    snprintf(buf, n, "%s/journal/j._%d", e->dir, no);
}

int mm_fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return MD_EIO;
    int rc = fsync(fd) == 0 ? 0 : MD_EIO;
    close(fd);
    return rc;
}

/* MD_ENOSPC for a full disk (or quota), else MD_EIO, from errno. */
static int io_rc(void)
{
    return eng_errno_rc(errno);
}

/* Remember what failed, from errno, unless an earlier failure is kept
 * (j may be NULL during recovery).  Returns rc. */
static int jerr(mm_journal *j, int rc, const char *what, const char *path)
{
    int saved = errno;
    if (j) {
        pthread_mutex_lock(&j->mu);
        if (!j->failed)
            snprintf(j->emsg, sizeof j->emsg, "%s %s: %s", what, path, strerror(saved));
        pthread_mutex_unlock(&j->mu);
    }
    errno = saved;
    return rc;
}

static int write_all(int fd, const void *buf, size_t len, off_t ofs)
{
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = pwrite(fd, p, len, ofs);
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0)
            errno = ENOSPC; /* no progress: the disk is full */
        if (n <= 0)
            return io_rc();
        p += n, len -= (size_t)n, ofs += n;
    }
    return 0;
}

static int read_all(int fd, void *buf, size_t len, off_t ofs)
{
    uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = pread(fd, p, len, ofs);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return MD_NOTFOUND; /* short file: the end of the journal */
        p += n, len -= (size_t)n, ofs += n;
    }
    return 0;
}

/* ---- LSN file --------------------------------------------------------------- */

static int lsn_read(const mm_engine *e, uint64_t *lsn)
{
    char path[4096];
    uint8_t b[MM_LSN_SIZE];
    *lsn = 0;
    jpath(e, "lsn", path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    if (read_all(fd, b, sizeof b, 0) != 0 || mm_lsn_decode(b, lsn) != 0)
        *lsn = 0; /* torn: replay every section still in the journal */
    close(fd);
    return 0;
}

static int lsn_write(const mm_engine *e, uint64_t lsn)
{
    char path[4096];
    uint8_t b[MM_LSN_SIZE];
    jpath(e, "lsn", path, sizeof path);
    mm_lsn_encode(b, lsn);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return jerr(e->j, io_rc(), "cannot open", path);
    int rc = write_all(fd, b, sizeof b, 0);
    if (rc)
        jerr(e->j, rc, "cannot write", path);
    else if (fdatasync(fd) != 0)
        rc = jerr(e->j, io_rc(), "cannot sync", path);
    close(fd);
    return rc;
}

/* ---- recovery --------------------------------------------------------------- */

typedef struct rstate {
    const mm_engine *e;
    int *fds; /* index file + 1; 0 is the .ns file */
    int64_t *sizes;
    int nfds;
    md_error *err;
    bool damaged; /* a valid section follows an invalid one */
    char stop[300]; /* where the replay stopped: "DIR/journal/j._0 at offset N" */
} rstate;

static int rfd(rstate *s, int32_t file, int *fd, int64_t *size)
{
    char path[4096];
    int i = file == MM_NS_FILENO ? 0 : file + 1;
    if (file != MM_NS_FILENO && (file < 0 || file >= MM_MAX_FILES))
        return ENG_CORRUPT(s->err, "journal entry for data file %d", file);
    if (i >= s->nfds) {
        int n = i + 8;
        int *f = realloc(s->fds, (size_t)n * sizeof *f);
        int64_t *z = f ? realloc(s->sizes, (size_t)n * sizeof *z) : NULL;
        if (f)
            s->fds = f;
        if (!f || !z)
            return md_error_set(s->err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
        s->sizes = z;
        for (int k = s->nfds; k < n; k++)
            s->fds[k] = -1;
        s->nfds = n;
    }
    if (s->fds[i] < 0) {
        if (file == MM_NS_FILENO)
            snprintf(path, sizeof path, "%s/%s.ns", s->e->dir, s->e->db);
        else
            snprintf(path, sizeof path, "%s/%s.%d", s->e->dir, s->e->db, file);
        struct stat st;
        int f = open(path, O_RDWR | O_CLOEXEC);
        if (f < 0 || fstat(f, &st) != 0) {
            if (f >= 0)
                close(f);
            return ENG_CORRUPT(s->err, "journal replay: cannot open %s: %s", path,
                               strerror(errno));
        }
        s->fds[i] = f;
        s->sizes[i] = st.st_size;
    }
    *fd = s->fds[i];
    *size = s->sizes[i];
    return 0;
}

static int replay_entry(void *ctx, int32_t file, uint32_t ofs, const uint8_t *data,
                        uint32_t len)
{
    rstate *s = ctx;
    int fd;
    int64_t size;
    int rc = rfd(s, file, &fd, &size);
    if (rc)
        return rc;
    if ((int64_t)ofs + len > size)
        return ENG_CORRUPT(s->err, "journal entry [%u, +%u) past the end of file %d", ofs,
                           len, file);
    if ((rc = write_all(fd, data, len, ofs)) != 0)
        return md_error_set(s->err, rc, eng_rc_to_code(rc),
                            "journal replay: write to data file %d at offset %u failed: %s",
                            file, ofs, strerror(errno));
    return 0;
}

static int cmp_int(const void *a, const void *b)
{
    return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

/* Numbers N of the journal/j._N files, sorted; *n = 0 if none. */
static int list_jfiles(const mm_engine *e, int **out, int *n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/journal", e->dir);
    *out = NULL;
    *n = 0;
    DIR *d = opendir(path);
    if (!d)
        return 0;
    struct dirent *de;
    int cap = 0;
    while ((de = readdir(d)) != NULL) {
        char *end;
        if (strncmp(de->d_name, "j._", 3) != 0 || !de->d_name[3])
            continue;
        long v = strtol(de->d_name + 3, &end, 10);
        if (*end || v < 0 || v > 1000000)
            continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 8;
            int *p = realloc(*out, (size_t)cap * sizeof *p);
            if (!p) {
                closedir(d);
                return MD_ENOMEM;
            }
            *out = p;
        }
        (*out)[(*n)++] = (int)v;
    }
    closedir(d);
    if (*n)
        qsort(*out, (size_t)*n, sizeof **out, cmp_int);
    return 0;
}

/*
 * After an invalid section at a crash, nothing valid can follow it: the
 * writer fdatasyncs each section before it writes the next.  A valid
 * section further on (at any 8 KB boundary) means the journal itself was
 * damaged.  buf has cap >= MM_J_ALIGN bytes.
 */
static bool valid_after(int fd, uint8_t *buf, size_t cap, off_t at, uint64_t file_id,
                        uint64_t last)
{
    mm_jsect_info in;
    for (;; at += MM_J_ALIGN) {
        if (read_all(fd, buf, MM_J_SECT_HDR, at) != 0)
            return false;
        size_t padded = mm_jsect_padded_len(buf);
        if (padded == 0 || padded > cap)
            continue;
        if (read_all(fd, buf, padded, at) == 0 && mm_jsect_check(buf, padded, file_id, &in) == 0 &&
            in.seq > last)
            return true;
    }
}

/* Replay one journal file's valid sections after *lsn; false once a torn
 * or invalid section (or header) ends the journal. */
static bool replay_file(rstate *s, int no, uint64_t lsn, uint64_t *last, int64_t *nrep,
                        int *rc)
{
    char path[4096];
    uint8_t *buf = NULL;
    size_t cap = 0;
    uint64_t file_id;
    bool more = true;
    jfile_path(s->e, no, path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    buf = malloc(MM_J_ALIGN);
    cap = MM_J_ALIGN;
    if (!buf || read_all(fd, buf, MM_J_FILE_HDR, 0) != 0 ||
        mm_jfile_header_check(buf, &file_id) != 0) {
        more = false;
        snprintf(s->stop, sizeof s->stop, "%.250s at offset 0 (file header)", path);
        goto out;
    }
    for (off_t at = MM_J_FILE_HDR;;) {
        mm_jsect_info in;
        if (read_all(fd, buf, MM_J_SECT_HDR, at) != 0) {
            break; /* clean end of this file */
        }
        size_t padded = mm_jsect_padded_len(buf);
        if (padded == 0) {
            more = false;
            snprintf(s->stop, sizeof s->stop, "%.250s at offset %lld", path, (long long)at);
            s->damaged = valid_after(fd, buf, cap, at + MM_J_ALIGN, file_id, *last);
            break;
        }
        if (padded > cap) {
            uint8_t *p = realloc(buf, padded);
            if (!p) {
                *rc = md_error_set(s->err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR,
                                   "out of memory");
                more = false;
                break;
            }
            buf = p, cap = padded;
        }
        if (read_all(fd, buf, padded, at) != 0 || mm_jsect_check(buf, padded, file_id, &in) ||
            in.seq <= *last) {
            more = false; /* torn, damaged, or out of sequence */
            snprintf(s->stop, sizeof s->stop, "%.250s at offset %lld", path, (long long)at);
            s->damaged = valid_after(fd, buf, cap, at + MM_J_ALIGN, file_id, *last);
            break;
        }
        *last = in.seq;
        if (in.seq > lsn) {
            if ((*rc = mm_jsect_apply(buf, &in, replay_entry, s)) != 0) {
                more = false;
                break;
            }
            (*nrep)++;
        }
        at += (off_t)padded;
    }
out:
    free(buf);
    close(fd);
    return more;
}

static void unlink_jfiles(const mm_engine *e, const int *nos, int n)
{
    char path[4096];
    for (int i = 0; i < n; i++) {
        jfile_path(e, nos[i], path, sizeof path);
        unlink(path);
    }
}

int mm_journal_recover(mm_engine *e, uint64_t *last_seq, int64_t *replayed, bool *damaged,
                       md_error *err)
{
    int *nos, n, rc;
    uint64_t lsn, last = 0;
    rstate s = {.e = e, .err = err};
    *last_seq = 0;
    *replayed = 0;
    if ((rc = list_jfiles(e, &nos, &n)) != 0)
        return md_error_set(err, rc, MD_CODE_INTERNAL_ERROR, "cannot list the journal");
    lsn_read(e, &lsn);
    rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        if (!replay_file(&s, nos[i], lsn, &last, replayed, &rc)) {
            s.damaged |= rc == 0 && i < n - 1; /* journal files after the end */
            break;
        }
    }
    *damaged = s.damaged;
    if (s.damaged) {
        snprintf(e->jdamage, sizeof e->jdamage, "%s", s.stop);
        eng_log("mmapv1: the journal is damaged before its end, in %s: replay stopped "
                "after section %llu; the data files may be inconsistent",
                s.stop, (unsigned long long)last);
    }
    for (int i = 0; i < s.nfds; i++) {
        if (s.fds[i] < 0)
            continue;
        if (rc == 0 && fsync(s.fds[i]) != 0) {
            int frc = io_rc();
            rc = md_error_set(err, frc, eng_rc_to_code(frc),
                              "journal replay: fsync of %s file %d failed: %s",
                              i ? "data" : ".ns", i - 1, strerror(errno));
        }
        close(s.fds[i]);
    }
    free(s.fds);
    free(s.sizes);
    if (rc == 0 && last > lsn && (rc = lsn_write(e, last)) != 0)
        md_error_set(err, rc, eng_rc_to_code(rc), "cannot write %s/journal/lsn: %s", e->dir,
                     strerror(errno));
    if (rc == 0 && n > 0) {
        char dir[4096];
        unlink_jfiles(e, nos, n);
        snprintf(dir, sizeof dir, "%s/journal", e->dir);
        mm_fsync_dir(dir);
    }
    free(nos);
    *last_seq = last > lsn ? last : lsn;
    return rc;
}

/* ---- journal files ---------------------------------------------------------- */

/* Create j._no with its header, durable (file and directory). */
static int jfile_create(mm_engine *e, int no)
{
    mm_journal *j = e->j;
    char path[4096], dir[4096];
    uint8_t *h = malloc(MM_J_FILE_HDR);
    if (!h)
        return MD_ENOMEM;
    jfile_path(e, no, path, sizeof path);
    snprintf(dir, sizeof dir, "%s/journal", e->dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    uint64_t id = ((uint64_t)now_ns() * 0x9e3779b97f4a7c15ull) ^ (uint64_t)getpid() ^
                  ((uint64_t)(unsigned)no << 40);
    mm_jfile_header(h, id, e->dir);
    int rc = fd < 0 ? jerr(j, io_rc(), "cannot create", path) : write_all(fd, h, MM_J_FILE_HDR, 0);
    if (rc && fd >= 0)
        jerr(j, rc, "cannot write", path);
    else if (rc == 0 && fdatasync(fd) != 0)
        rc = jerr(j, io_rc(), "cannot sync", path);
    else if (rc == 0 && mm_fsync_dir(dir) != 0)
        rc = jerr(j, io_rc(), "cannot sync the directory", dir);
    free(h);
    if (rc && fd >= 0) { /* never a journal file without a valid header */
        close(fd);
        fd = -1;
        unlink(path);
    }
    if (rc) {
        if (fd >= 0)
            close(fd);
        return rc;
    }
    if (j->fd >= 0)
        close(j->fd);
    j->fd = fd;
    j->cur_no = no;
    j->fsize = MM_J_FILE_HDR;
    j->file_id = id;
    return 0;
}

/* Remove j._first_no .. j._(cur_no - 1). */
static void jfiles_trim(mm_engine *e)
{
    mm_journal *j = e->j;
    char path[4096];
    for (int no = j->first_no; no < j->cur_no; no++) {
        jfile_path(e, no, path, sizeof path);
        unlink(path);
    }
    j->first_no = j->cur_no;
}

static void set_failed(mm_journal *j, int rc)
{
    pthread_mutex_lock(&j->mu);
    if (!j->failed) /* atomic: mm_journal_failed reads it without the lock */
        __atomic_store_n(&j->failed, rc, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&j->mu);
    eng_log("mmapv1: journal write failed (%s); refusing further writes", j->emsg);
}

static int apply_shared(void *ctx, int32_t file, uint32_t ofs, const uint8_t *data,
                        uint32_t len)
{
    const mm_engine *e = ctx;
    assert((int64_t)ofs + len <= mm_file_len(e, file));
    memcpy(mm_file_wbase(e, file) + ofs, data, len);
    return 0;
}

/* WRITETOJOURNAL + WRITETODATAFILES for everything pending (wmu held). */
static int write_pending(mm_engine *e)
{
    mm_journal *j = e->j;
    pthread_mutex_lock(&j->mu);
    int rc = j->failed;
    if (rc || j->pend.nentries == 0) {
        pthread_mutex_unlock(&j->mu);
        return rc;
    }
    mm_jbuf b = j->pend;
    j->pend = j->spare;
    mm_jbuf_reset(&j->pend);
    pthread_mutex_unlock(&j->mu);
    size_t body = b.len;
    size_t padded = mm_jsect_seal(&b, j->seq + 1, j->file_id);
    char path[4096];
    jfile_path(e, j->cur_no, path, sizeof path);
    rc = write_all(j->fd, b.p, padded, j->fsize);
    if (rc)
        jerr(j, rc, "cannot write", path);
    else if (fdatasync(j->fd) != 0)
        rc = jerr(j, io_rc(), "cannot sync", path);
    if (rc == 0) {
        j->seq++;
        j->fsize += (int64_t)padded;
        j->n_commits++;
        j->bytes_journaled += (int64_t)padded;
        mm_jsect_info in = {.len = (uint32_t)(body + MM_J_FOOTER), .padded = padded};
        mm_jsect_apply(b.p, &in, apply_shared, e);
        if (j->fsize >= j->o.file_limit)
            rc = jfile_create(e, j->cur_no + 1);
    }
    if (b.cap > 4 * (size_t)MM_J_EARLY_BYTES) /* after a huge transaction */
        mm_jbuf_free(&b);
    j->spare = b;
    if (rc)
        set_failed(j, rc);
    return rc;
}

/* Flush the data files: write what is pending, msync the shared views,
 * and (sync) record the LSN and recycle the journal files (wmu held). */
static int data_flush(mm_engine *e, bool sync, md_error *err)
{
    mm_journal *j = e->j;
    int rc = e->journal ? write_pending(e) : 0;
    if (rc)
        return md_error_set(err, rc, eng_rc_to_code(rc), "journal write failed: %s", j->emsg);
    md_error ferr;
    if ((rc = mm_files_flush(e, sync, &ferr)) != 0) {
        /* The data files may not hold what the journal says they do (after
         * a failed msync the kernel may have dropped the dirty pages): the
         * LSN must not move past it, so refuse every later write. */
        pthread_mutex_lock(&j->mu);
        if (!j->failed)
            snprintf(j->emsg, sizeof j->emsg, "%.500s", ferr.message);
        pthread_mutex_unlock(&j->mu);
        set_failed(j, rc);
        if (err)
            *err = ferr;
        return rc;
    }
    j->last_flush_ns = now_ns();
    j->n_flushes++;
    if (!e->journal || !sync || j->seq == j->lsn)
        return 0;
    if ((rc = lsn_write(e, j->seq)) != 0) {
        set_failed(j, rc);
        return md_error_set(err, rc, eng_rc_to_code(rc), "%s", j->emsg);
    }
    j->lsn = j->seq;
    if ((rc = jfile_create(e, j->cur_no + 1)) != 0) {
        set_failed(j, rc);
        return md_error_set(err, rc, eng_rc_to_code(rc), "cannot start a new journal file: %s",
                            j->emsg);
    }
    jfiles_trim(e);
    return 0;
}

/* ---- the flush thread --------------------------------------------------------- */

static void *jthread(void *arg)
{
    mm_engine *e = arg;
    mm_journal *j = e->j;
    pthread_mutex_lock(&j->mu);
    while (!j->stop) {
        struct timespec ts = eng_deadline(CLOCK_MONOTONIC, (int64_t)j->o.interval_ms * 1000);
        pthread_cond_timedwait(&j->cv, &j->mu, &ts);
        if (j->stop)
            break;
        pthread_mutex_unlock(&j->mu);
        pthread_mutex_lock(&j->wmu);
        if (e->journal)
            write_pending(e);
        if (j->o.syncdelay > 0 &&
            now_ns() - j->last_flush_ns >= j->o.syncdelay * 1000000000LL)
            data_flush(e, true, NULL);
        pthread_mutex_unlock(&j->wmu);
        pthread_mutex_lock(&j->mu);
    }
    pthread_mutex_unlock(&j->mu);
    return NULL;
}

/* ---- engine hooks ----------------------------------------------------------- */

static void check_views(mm_engine *e);

int mm_journal_open(mm_engine *e, const mm_jopts *o, uint64_t last_seq, int64_t replayed,
                    md_error *err)
{
    mm_journal *j = calloc(1, sizeof *j);
    if (!j)
        return md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
    pthread_mutex_init(&j->wmu, NULL);
    pthread_mutex_init(&j->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&j->cv, &ca);
    pthread_condattr_destroy(&ca);
    j->o = *o;
    j->fd = -1;
    j->seq = j->lsn = last_seq;
    j->replayed = replayed;
    j->last_flush_ns = now_ns();
    mm_jbuf_reset(&j->pend);
    mm_jbuf_reset(&j->spare);
    e->j = j;
    if (e->journal) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/journal", e->dir);
        if (mkdir(dir, 0755) != 0 && errno != EEXIST)
            return md_error_set(err, MD_EIO, MD_CODE_FILE_STREAM_FAILED,
                                "cannot create %s: %s", dir, strerror(errno));
        int rc = jfile_create(e, 0);
        if (rc)
            return md_error_set(err, rc, eng_rc_to_code(rc), "%s", j->emsg);
    }
    if (pthread_create(&j->thread, NULL, jthread, e) != 0)
        return md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR,
                            "cannot start the journal thread");
    j->thread_on = true;
    return 0;
}

void mm_journal_close(mm_engine *e)
{
    mm_journal *j = e->j;
    if (!j)
        return;
    if (j->thread_on) {
        pthread_mutex_lock(&j->mu);
        j->stop = true;
        pthread_cond_signal(&j->cv);
        pthread_mutex_unlock(&j->mu);
        pthread_join(j->thread, NULL);
    }
    pthread_mutex_lock(&j->wmu);
    bool clean = j->failed == 0 && data_flush(e, true, NULL) == 0;
    if (clean && e->journal && e->check_views)
        check_views(e);
    if (j->fd >= 0) {
        close(j->fd);
        j->fd = -1;
        if (clean) { /* a clean shutdown leaves no journal behind */
            char dir[4096];
            j->cur_no++;
            jfiles_trim(e);
            snprintf(dir, sizeof dir, "%s/journal", e->dir);
            mm_fsync_dir(dir);
        }
    }
    pthread_mutex_unlock(&j->wmu);
    mm_jbuf_free(&j->pend);
    mm_jbuf_free(&j->spare);
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->mu);
    pthread_mutex_destroy(&j->wmu);
    free(j);
    e->j = NULL;
}

/* Read without the lock (every write transaction's begin asks): failed is
 * set once, under it, with an atomic store, and never cleared. */
int mm_journal_failed(mm_engine *e)
{
    return __atomic_load_n(&e->j->failed, __ATOMIC_ACQUIRE);
}

int mm_journal_commit(mm_engine *e, mm_txn *t, bool durable, bool *remap, md_error *err)
{
    mm_journal *j = e->j;
    pthread_mutex_lock(&j->mu);
    int rc = j->failed;
    if (rc == 0) {
        for (size_t i = 0; i < t->n; i++) {
            const mm_intent *w = &t->v[i];
            mm_jbuf_entry(&j->pend, w->file, (uint32_t)w->ofs,
                          mm_file_base(e, w->file) + w->ofs, w->len);
            j->cow_bytes += w->len;
        }
    }
    *remap = j->cow_bytes > e->remap_bytes;
    bool now = durable || j->pend.len > MM_J_EARLY_BYTES;
    pthread_mutex_unlock(&j->mu);
    if (rc)
        return md_error_set(err, rc, eng_rc_to_code(rc),
                            "the journal failed earlier (%s): writes are refused", j->emsg);
    if (now) {
        pthread_mutex_lock(&j->wmu);
        j->n_early++;
        rc = write_pending(e);
        pthread_mutex_unlock(&j->wmu);
        if (rc)
            return md_error_set(err, rc, eng_rc_to_code(rc), "journal write failed: %s",
                                j->emsg);
    }
    return 0;
}

/* REMAPPRIVATEVIEW: fresh private views holding the pending commits.
 * Asked by a commit that saw cow_bytes past the limit; another commit (of
 * another collection) or a flush may have remapped since, so the limit is
 * looked at again under the lock rather than remapping twice. */
static void remap_private(mm_engine *e)
{
    mm_journal *j = e->j;
    pthread_mutex_lock(&j->wmu);
    pthread_mutex_lock(&j->mu);
    if (j->cow_bytes > e->remap_bytes && mm_views_remap(e, &j->pend) == 0)
        j->cow_bytes = (int64_t)j->pend.len;
    pthread_mutex_unlock(&j->mu);
    pthread_mutex_unlock(&j->wmu);
}

void mm_journal_after_commit(mm_engine *e)
{
    assert(!e->txn);
    if (e->journal)
        remap_private(e);
}

/* debugCheckViews: every changed byte must have been declared, so once all
 * commits are applied the private and shared views agree. */
static void check_views(mm_engine *e)
{
    int32_t file;
    int64_t at = mm_views_diff(e, &file);
    if (at >= 0) {
        fprintf(stderr,
                "mmapv1: byte %lld of file %d changed without mm_writing() (not journaled)\n",
                (long long)at, file);
        abort();
    }
}

int mm_journal_flush(mm_engine *e, bool sync, md_error *err)
{
    mm_journal *j = e->j;
    pthread_mutex_lock(&j->wmu);
    int rc = data_flush(e, sync, err);
    if (rc == 0 && e->journal && !e->txn) {
        pthread_mutex_lock(&j->mu);
        if (e->check_views && j->pend.nentries == 0)
            check_views(e);
        if (mm_views_remap(e, &j->pend) == 0)
            j->cow_bytes = (int64_t)j->pend.len;
        pthread_mutex_unlock(&j->mu);
    }
    pthread_mutex_unlock(&j->wmu);
    return rc;
}

void mm_journal_lock(mm_engine *e)
{
    if (e->j)
        pthread_mutex_lock(&e->j->wmu);
}

void mm_journal_unlock(mm_engine *e)
{
    if (e->j)
        pthread_mutex_unlock(&e->j->wmu);
}

/* serverStatus: MongoDB's "dur" section, in minidoc's words. */
void mm_journal_status(mm_engine *e, bson_t *sub)
{
    mm_journal *j = e->j;
    bson_t d;
    pthread_mutex_lock(&j->wmu);
    bson_append_document_begin(sub, "dur", -1, &d);
    BSON_APPEND_BOOL(&d, "journal", e->journal);
    BSON_APPEND_INT32(&d, "journalCommitIntervalMs", j->o.interval_ms);
    BSON_APPEND_INT64(&d, "syncdelaySecs", j->o.syncdelay);
    BSON_APPEND_INT64(&d, "commits", j->n_commits);
    BSON_APPEND_INT64(&d, "earlyCommits", j->n_early);
    BSON_APPEND_INT64(&d, "journaledBytes", j->bytes_journaled);
    BSON_APPEND_INT64(&d, "dataFlushes", j->n_flushes);
    BSON_APPEND_INT64(&d, "lastSeq", (int64_t)j->seq);
    BSON_APPEND_INT64(&d, "lsn", (int64_t)j->lsn);
    BSON_APPEND_INT64(&d, "sectionsReplayed", j->replayed);
    BSON_APPEND_INT32(&d, "journalFile", e->journal ? j->cur_no : -1);
    bson_append_document_end(sub, &d);
    pthread_mutex_unlock(&j->wmu);
}
