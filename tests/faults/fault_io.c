/*
 * fault_io.c -- the I/O shim of build/test_faults: fault injection and a
 * simulated disk for power losses (the model is in fault_io.h).
 *
 * Every __wrap_X passes through to __real_X unless a rule says to fail the
 * call or a power-loss shadow is being kept.  One mutex serializes the
 * bookkeeping; the real calls themselves run outside it, except that the
 * shadow is updated under it, so that a cut sees a consistent picture.
 * Nothing here calls a wrapped function by its plain name: this file is
 * linked with --wrap too.
 */
#include "fault_io.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

int __real_open(const char *path, int flags, ...);
int __real_close(int fd);
ssize_t __real_write(int fd, const void *buf, size_t n);
ssize_t __real_pwrite(int fd, const void *buf, size_t n, off_t off);
int __real_fsync(int fd);
int __real_fdatasync(int fd);
int __real_msync(void *addr, size_t len, int flags);
int __real_ftruncate(int fd, off_t len);
int __real_posix_fallocate(int fd, off_t off, off_t len);
int __real_rename(const char *from, const char *to);
int __real_unlink(const char *path);
void *__real_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int __real_munmap(void *addr, size_t len);
void *__real_mremap(void *old, size_t old_len, size_t new_len, int flags, ...);

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

/* ---- descriptors and mappings -------------------------------------------------- */

#define FD_MAX 65536

static char *fd_path[FD_MAX]; /* absolute path an fd was opened with */
static int fd_file[FD_MAX];   /* pfile index + 1 (0: not shadowed) */

typedef struct pmap {
    uint8_t *addr;
    size_t len;
    off_t off;
    int file; /* pfile index + 1, or 0 */
    char *path;
} pmap;

static pmap *maps;
static size_t nmaps, capmaps;

/* ---- rules ---------------------------------------------------------------------- */

typedef struct rule {
    unsigned ops;
    char pat[256];
    long nth, seen;
    int err;
    bool sticky;
} rule;

#define MAX_RULES 16
static rule rules[MAX_RULES];
static int nrules;
static long injected;

typedef struct counter {
    unsigned ops;
    char pat[256];
    long n;
} counter;

/* ---- the shadow ------------------------------------------------------------------ */

typedef struct pfile {
    char *rel;
    bool dead;   /* unlinked or replaced */
    bool mapped; /* has had a MAP_SHARED mapping */
} pfile;

typedef struct pend {
    int file;    /* pfile index */
    char kind;   /* 'W' write, 'T' truncate to off, 'A' extend to off */
    off_t off;
    size_t len;
    uint8_t data[];
} pend;

static bool pl_on;
static char pl_root[2048], pl_shadow[2048];
static size_t pl_rootlen;
static pfile *files;
static size_t nfiles, capfiles;
static pend **pends;
static size_t npends, cappends;
static uint64_t rng = 88172645463325252ull;
static long arm_ops; /* cut when it reaches 0 (if armed) */
static bool real_sync; /* pass fsync/fdatasync/msync(MS_SYNC) to the kernel */
static enum fio_cut_mode arm_mode;

static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (!q) {
        fprintf(stderr, "fault_io: out of memory\n");
        abort();
    }
    return q;
}

static const char *rel_of(const char *path)
{
    if (!pl_on || !path || strncmp(path, pl_root, pl_rootlen) != 0)
        return NULL;
    if (path[pl_rootlen] == '/')
        return path + pl_rootlen + 1;
    return NULL;
}

static void shadow_path(const char *rel, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%s", pl_shadow, rel);
}

static void mkdir_parents(const char *path)
{
    char tmp[8192];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *s = tmp + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            mkdir(tmp, 0755);
            *s = '/';
        }
}

static int pfile_find(const char *rel)
{
    for (size_t i = 0; i < nfiles; i++)
        if (!files[i].dead && strcmp(files[i].rel, rel) == 0)
            return (int)i;
    return -1;
}

static int pfile_get(const char *rel)
{
    int i = pfile_find(rel);
    if (i >= 0)
        return i;
    if (nfiles == capfiles) {
        capfiles = capfiles ? capfiles * 2 : 64;
        files = xrealloc(files, capfiles * sizeof *files);
    }
    files[nfiles] = (pfile){strdup(rel), false, false};
    return (int)nfiles++;
}

static void pend_drop_file(int fi)
{
    size_t j = 0;
    for (size_t i = 0; i < npends; i++) {
        if (pends[i]->file == fi)
            free(pends[i]);
        else
            pends[j++] = pends[i];
    }
    npends = j;
}

static void pend_add(int fi, char kind, off_t off, const void *data, size_t len)
{
    pend *p = xrealloc(NULL, sizeof *p + (kind == 'W' ? len : 0));
    p->file = fi;
    p->kind = kind;
    p->off = off;
    p->len = len;
    if (kind == 'W')
        memcpy(p->data, data, len);
    if (npends == cappends) {
        cappends = cappends ? cappends * 2 : 256;
        pends = xrealloc(pends, cappends * sizeof *pends);
    }
    pends[npends++] = p;
}

static int shadow_open(int fi)
{
    char sp[8192];
    shadow_path(files[fi].rel, sp, sizeof sp);
    int sfd = __real_open(sp, O_RDWR | O_CLOEXEC);
    if (sfd < 0) {
        mkdir_parents(sp);
        sfd = __real_open(sp, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    }
    return sfd;
}

/* fsync: the whole file as it is now becomes what the disk holds. */
static void shadow_sync(int fi)
{
    struct stat st;
    char rp[8192];
    if (fi < 0 || files[fi].dead)
        return;
    snprintf(rp, sizeof rp, "%s/%s", pl_root, files[fi].rel);
    int fd = __real_open(rp, O_RDONLY | O_CLOEXEC); /* the engine's fd may be O_WRONLY */
    if (fd < 0)
        return;
    int sfd = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? shadow_open(fi) : -1;
    if (sfd < 0) {
        __real_close(fd);
        return;
    }
    static uint8_t a[65536], b[65536];
    if (__real_ftruncate(sfd, st.st_size) != 0) {
        /* ignored: the shadow is scratch space */
    }
    for (off_t at = 0; at < st.st_size; at += (off_t)sizeof a) {
        size_t n = (size_t)(st.st_size - at < (off_t)sizeof a ? st.st_size - at : (off_t)sizeof a);
        ssize_t ra = pread(fd, a, n, at), rb = pread(sfd, b, n, at);
        if (ra != (ssize_t)n)
            break;
        if (rb != ra || memcmp(a, b, n) != 0)
            if (__real_pwrite(sfd, a, n, at) != (ssize_t)n)
                break;
    }
    __real_close(sfd);
    __real_close(fd);
    pend_drop_file(fi);
}

static void shadow_write(int fi, const void *data, size_t len, off_t off)
{
    if (files[fi].dead)
        return;
    int sfd = shadow_open(fi);
    if (sfd < 0)
        return;
    if (__real_pwrite(sfd, data, len, off) != (ssize_t)len) {
        /* ignored: the shadow is scratch space */
    }
    __real_close(sfd);
}

static void apply_pend(const pend *p, size_t len)
{
    if (files[p->file].dead)
        return;
    int sfd = shadow_open(p->file);
    if (sfd < 0)
        return;
    struct stat st;
    if (p->kind == 'W') {
        if (__real_pwrite(sfd, p->data, len, p->off) != (ssize_t)len) {
            /* ignored */
        }
    } else if (p->kind == 'T' || (fstat(sfd, &st) == 0 && st.st_size < p->off)) {
        if (__real_ftruncate(sfd, p->off) != 0) {
            /* ignored */
        }
    }
    __real_close(sfd);
}

/* Dirty pages of shared mappings that were never synced: each lands or not. */
static void land_mapped_pages(void)
{
    static uint8_t a[4096], b[4096];
    char rp[8192];
    for (size_t i = 0; i < nfiles; i++) {
        if (files[i].dead || !files[i].mapped)
            continue;
        snprintf(rp, sizeof rp, "%s/%s", pl_root, files[i].rel);
        int fd = __real_open(rp, O_RDONLY | O_CLOEXEC);
        int sfd = fd < 0 ? -1 : shadow_open((int)i);
        struct stat st;
        if (fd >= 0 && sfd >= 0 && fstat(fd, &st) == 0) {
            for (off_t at = 0; at < st.st_size; at += 4096) {
                size_t n = (size_t)(st.st_size - at < 4096 ? st.st_size - at : 4096);
                ssize_t ra = pread(fd, a, n, at), rb = pread(sfd, b, n, at);
                if (ra != (ssize_t)n)
                    break;
                if ((rb != ra || memcmp(a, b, n) != 0) && rnd() % 2 == 0)
                    if (__real_pwrite(sfd, a, n, at) != (ssize_t)n)
                        break;
            }
        }
        if (fd >= 0)
            __real_close(fd);
        if (sfd >= 0)
            __real_close(sfd);
    }
}

static void __attribute__((noreturn)) cut_locked(enum fio_cut_mode mode)
{
    if (mode == FIO_CUT_RANDOM)
        mode = (enum fio_cut_mode)(rnd() % 3);
    size_t k = 0;
    if (mode == FIO_CUT_PREFIX)
        k = (size_t)(rnd() % (npends + 1));
    else if (mode == FIO_CUT_ALL)
        k = npends;
    for (size_t i = 0; i < k; i++) {
        size_t len = pends[i]->len;
        if (i + 1 == k && pends[i]->kind == 'W' && rnd() % 4 != 0)
            len = (size_t)(rnd() % (len + 1)); /* torn */
        apply_pend(pends[i], len);
    }
    if (mode != FIO_CUT_DROP)
        land_mapped_pages();
    _exit(FIO_CUT_EXIT);
}

void fio_powerloss_cut(enum fio_cut_mode mode)
{
    pthread_mutex_lock(&mu);
    cut_locked(mode);
}

/* A tracked write or sync happened (mu held): count down to an armed cut. */
static void tick_locked(void)
{
    if (arm_ops > 0 && --arm_ops == 0)
        cut_locked(arm_mode);
}

typedef struct timer_arg {
    int ms;
    enum fio_cut_mode mode;
} timer_arg;

static void *timer_main(void *p)
{
    timer_arg a = *(timer_arg *)p;
    free(p);
    struct timespec ts = {a.ms / 1000, (long)(a.ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
    fio_powerloss_cut(a.mode);
}

void fio_powerloss_begin(const char *root, const char *shadow, uint64_t seed)
{
    pthread_mutex_lock(&mu);
    snprintf(pl_root, sizeof pl_root, "%s", root);
    snprintf(pl_shadow, sizeof pl_shadow, "%s", shadow);
    pl_rootlen = strlen(pl_root);
    rng = seed | 1;
    pl_on = true;
    pthread_mutex_unlock(&mu);
}

void fio_powerloss_arm(long ops, int ms, enum fio_cut_mode mode)
{
    pthread_mutex_lock(&mu);
    arm_ops = ops;
    arm_mode = mode;
    pthread_mutex_unlock(&mu);
    if (ms > 0) {
        timer_arg *a = xrealloc(NULL, sizeof *a);
        *a = (timer_arg){ms, mode};
        pthread_t t;
        if (pthread_create(&t, NULL, timer_main, a) == 0)
            pthread_detach(t);
    }
}

void fio_real_sync(bool on)
{
    real_sync = on;
}

long fio_pending(void)
{
    pthread_mutex_lock(&mu);
    long n = (long)npends;
    pthread_mutex_unlock(&mu);
    return n;
}

/* ---- rules ------------------------------------------------------------------------ */

void fio_reset(void)
{
    pthread_mutex_lock(&mu);
    nrules = 0;
    injected = 0;
    pthread_mutex_unlock(&mu);
}

int fio_fail(unsigned ops, const char *pattern, long nth, int err, bool sticky)
{
    pthread_mutex_lock(&mu);
    int i = nrules < MAX_RULES ? nrules++ : MAX_RULES - 1;
    rules[i] = (rule){.ops = ops, .nth = nth < 1 ? 1 : nth, .err = err, .sticky = sticky};
    snprintf(rules[i].pat, sizeof rules[i].pat, "%s", pattern ? pattern : "");
    pthread_mutex_unlock(&mu);
    return i;
}

long fio_injected(void)
{
    pthread_mutex_lock(&mu);
    long n = injected;
    pthread_mutex_unlock(&mu);
    return n;
}

static counter counters[MAX_RULES];
static int ncounters;

long fio_calls(unsigned ops, const char *pattern)
{
    pthread_mutex_lock(&mu);
    long n = -1;
    for (int i = 0; i < ncounters; i++)
        if (counters[i].ops == ops && strcmp(counters[i].pat, pattern ? pattern : "") == 0)
            n = counters[i].n;
    if (n < 0 && ncounters < MAX_RULES) { /* start counting from now */
        counters[ncounters] = (counter){.ops = ops};
        snprintf(counters[ncounters].pat, sizeof counters[ncounters].pat, "%s",
                 pattern ? pattern : "");
        ncounters++;
        n = 0;
    }
    pthread_mutex_unlock(&mu);
    return n;
}

/* 0, or the errno a rule gives this call (mu held). */
static int check_locked(unsigned op, const char *path)
{
    int e = 0;
    if (!path)
        return 0;
    for (int i = 0; i < ncounters; i++)
        if ((counters[i].ops & op) && strstr(path, counters[i].pat))
            counters[i].n++;
    for (int i = 0; i < nrules; i++) {
        rule *r = &rules[i];
        if (!(r->ops & op) || !strstr(path, r->pat))
            continue;
        r->seen++;
        if (!e && (r->seen == r->nth || (r->sticky && r->seen > r->nth)))
            e = r->err;
    }
    if (e)
        injected++;
    return e;
}

static const char *fdp(int fd)
{
    return fd >= 0 && fd < FD_MAX ? fd_path[fd] : NULL;
}

static int fdf(int fd)
{
    return fd >= 0 && fd < FD_MAX ? fd_file[fd] - 1 : -1;
}

/* ---- the wrappers ------------------------------------------------------------------ */

int __wrap_open(const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (flags & (O_CREAT | __O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    pthread_mutex_lock(&mu);
    int e = (flags & O_CREAT) ? check_locked(FIO_OPEN, path) : 0;
    pthread_mutex_unlock(&mu);
    if (e) {
        errno = e;
        return -1;
    }
    int fd = __real_open(path, flags, mode);
    if (fd < 0 || fd >= FD_MAX)
        return fd;
    pthread_mutex_lock(&mu);
    free(fd_path[fd]);
    fd_path[fd] = strdup(path);
    fd_file[fd] = 0;
    const char *rel = rel_of(path);
    struct stat st;
    if (rel && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        int fi = pfile_get(rel);
        fd_file[fd] = fi + 1;
        char sp[8192];
        shadow_path(rel, sp, sizeof sp);
        if (flags & O_TRUNC) { /* durable at once, like the creation */
            pend_drop_file(fi);
            mkdir_parents(sp);
            int sfd = __real_open(sp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
            if (sfd >= 0)
                __real_close(sfd);
        } else if (flags & O_CREAT) {
            int sfd = shadow_open(fi);
            if (sfd >= 0)
                __real_close(sfd);
        }
    }
    pthread_mutex_unlock(&mu);
    return fd;
}

int __wrap_close(int fd)
{
    if (fd >= 0 && fd < FD_MAX) {
        pthread_mutex_lock(&mu);
        free(fd_path[fd]);
        fd_path[fd] = NULL;
        fd_file[fd] = 0;
        pthread_mutex_unlock(&mu);
    }
    return __real_close(fd);
}

static ssize_t do_write(int fd, const void *buf, size_t n, off_t off, bool positional)
{
    pthread_mutex_lock(&mu);
    int e = check_locked(FIO_WRITE, fdp(fd));
    pthread_mutex_unlock(&mu);
    if (e) {
        errno = e;
        return -1;
    }
    int fi = fdf(fd);
    if (fi < 0)
        return positional ? __real_pwrite(fd, buf, n, off) : __real_write(fd, buf, n);
    pthread_mutex_lock(&mu);
    if (!positional)
        off = lseek(fd, 0, SEEK_CUR);
    ssize_t w = positional ? __real_pwrite(fd, buf, n, off) : __real_write(fd, buf, n);
    if (w > 0 && pl_on) {
        pend_add(fi, 'W', off, buf, (size_t)w);
        tick_locked();
    }
    pthread_mutex_unlock(&mu);
    return w;
}

ssize_t __wrap_write(int fd, const void *buf, size_t n)
{
    return do_write(fd, buf, n, 0, false);
}

ssize_t __wrap_pwrite(int fd, const void *buf, size_t n, off_t off)
{
    return do_write(fd, buf, n, off, true);
}

/* fio_hold_sync: a sync of a matching path waits here until released. */
static pthread_mutex_t hold_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cv = PTHREAD_COND_INITIALIZER;
static char hold_pat[256];
static bool hold_on, hold_in;

void fio_hold_sync(const char *pattern)
{
    pthread_mutex_lock(&hold_mu);
    snprintf(hold_pat, sizeof hold_pat, "%s", pattern);
    hold_on = true;
    pthread_mutex_unlock(&hold_mu);
}

bool fio_sync_held(void)
{
    pthread_mutex_lock(&hold_mu);
    bool in = hold_in;
    pthread_mutex_unlock(&hold_mu);
    return in;
}

void fio_release_sync(void)
{
    pthread_mutex_lock(&hold_mu);
    hold_on = false;
    pthread_cond_broadcast(&hold_cv);
    pthread_mutex_unlock(&hold_mu);
}

static void hold_point(int fd)
{
    char path[512] = "";
    pthread_mutex_lock(&hold_mu);
    bool on = hold_on;
    pthread_mutex_unlock(&hold_mu);
    if (!on)
        return;
    pthread_mutex_lock(&mu);
    if (fdp(fd))
        snprintf(path, sizeof path, "%s", fdp(fd));
    pthread_mutex_unlock(&mu);
    pthread_mutex_lock(&hold_mu);
    if (hold_on && strstr(path, hold_pat)) {
        hold_in = true;
        while (hold_on)
            pthread_cond_wait(&hold_cv, &hold_mu);
        hold_in = false;
    }
    pthread_mutex_unlock(&hold_mu);
}

static int do_sync(int fd, bool data)
{
    hold_point(fd);
    pthread_mutex_lock(&mu);
    int e = check_locked(FIO_SYNC, fdp(fd));
    if (!e && fdf(fd) >= 0 && pl_on) {
        shadow_sync(fdf(fd));
        tick_locked();
    }
    pthread_mutex_unlock(&mu);
    if (e) {
        errno = e;
        return -1;
    }
    if (!real_sync)
        return 0; /* see fio_real_sync() */
    return data ? __real_fdatasync(fd) : __real_fsync(fd);
}

int __wrap_fsync(int fd)
{
    return do_sync(fd, false);
}

int __wrap_fdatasync(int fd)
{
    return do_sync(fd, true);
}

int __wrap_ftruncate(int fd, off_t len)
{
    pthread_mutex_lock(&mu);
    int e = check_locked(FIO_TRUNC, fdp(fd));
    int r = -1;
    if (!e) {
        r = __real_ftruncate(fd, len);
        if (r == 0 && fdf(fd) >= 0 && pl_on) {
            pend_add(fdf(fd), 'T', len, NULL, 0);
            tick_locked();
        }
    }
    pthread_mutex_unlock(&mu);
    if (e)
        errno = e;
    return r;
}

int __wrap_posix_fallocate(int fd, off_t off, off_t len)
{
    pthread_mutex_lock(&mu);
    int e = check_locked(FIO_ALLOC, fdp(fd));
    if (!e) {
        e = __real_posix_fallocate(fd, off, len);
        if (e == 0 && fdf(fd) >= 0 && pl_on) {
            pend_add(fdf(fd), 'A', off + len, NULL, 0);
            tick_locked();
        }
    }
    pthread_mutex_unlock(&mu);
    return e;
}

int __wrap_rename(const char *from, const char *to)
{
    pthread_mutex_lock(&mu);
    int e = check_locked(FIO_RENAME, from);
    pthread_mutex_unlock(&mu);
    if (e) {
        errno = e;
        return -1;
    }
    int r = __real_rename(from, to);
    const char *rf = rel_of(from), *rt = rel_of(to);
    if (r == 0 && rf && rt) {
        pthread_mutex_lock(&mu);
        int fi = pfile_find(rf), old = pfile_find(rt);
        if (old >= 0) {
            pend_drop_file(old);
            files[old].dead = true;
        }
        char a[8192], b[8192];
        shadow_path(rf, a, sizeof a);
        shadow_path(rt, b, sizeof b);
        if (__real_rename(a, b) != 0) {
            /* the shadow never had it */
        }
        if (fi >= 0) {
            free(files[fi].rel);
            files[fi].rel = strdup(rt);
        }
        pthread_mutex_unlock(&mu);
    }
    return r;
}

int __wrap_unlink(const char *path)
{
    int r = __real_unlink(path);
    const char *rel = rel_of(path);
    if (r == 0 && rel) {
        pthread_mutex_lock(&mu);
        int fi = pfile_find(rel);
        if (fi >= 0) {
            pend_drop_file(fi);
            files[fi].dead = true;
            for (int fd = 0; fd < FD_MAX; fd++)
                if (fd_file[fd] == fi + 1)
                    fd_file[fd] = 0;
        }
        char sp[8192];
        shadow_path(rel, sp, sizeof sp);
        __real_unlink(sp);
        pthread_mutex_unlock(&mu);
    }
    return r;
}

static void maps_forget(const uint8_t *addr, size_t len)
{
    size_t j = 0;
    for (size_t i = 0; i < nmaps; i++) {
        if (maps[i].addr < addr + len && addr < maps[i].addr + maps[i].len)
            free(maps[i].path);
        else
            maps[j++] = maps[i];
    }
    nmaps = j;
}

void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    void *p = __real_mmap(addr, len, prot, flags, fd, off);
    if (p == MAP_FAILED)
        return p;
    pthread_mutex_lock(&mu);
    maps_forget(p, len);
    if ((flags & MAP_SHARED) && fdp(fd)) {
        if (nmaps == capmaps) {
            capmaps = capmaps ? capmaps * 2 : 64;
            maps = xrealloc(maps, capmaps * sizeof *maps);
        }
        int fi = fdf(fd);
        maps[nmaps++] = (pmap){p, len, off, fi + 1, strdup(fdp(fd))};
        if (fi >= 0)
            files[fi].mapped = true;
    }
    pthread_mutex_unlock(&mu);
    return p;
}

int __wrap_munmap(void *addr, size_t len)
{
    pthread_mutex_lock(&mu);
    maps_forget(addr, len);
    pthread_mutex_unlock(&mu);
    return __real_munmap(addr, len);
}

void *__wrap_mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
    void *to = NULL;
    if (flags & MREMAP_FIXED) {
        va_list ap;
        va_start(ap, flags);
        to = va_arg(ap, void *);
        va_end(ap);
    }
    void *p = __real_mremap(old, old_len, new_len, flags, to);
    if (p == MAP_FAILED)
        return p;
    pthread_mutex_lock(&mu);
    if (to)
        maps_forget(to, new_len);
    for (size_t i = 0; i < nmaps; i++)
        if (maps[i].addr == old) {
            maps[i].addr = p;
            maps[i].len = new_len;
        }
    pthread_mutex_unlock(&mu);
    return p;
}

int __wrap_msync(void *addr, size_t len, int flags)
{
    uint8_t *a = addr;
    pthread_mutex_lock(&mu);
    int e = 0;
    for (size_t i = 0; i < nmaps && !e; i++)
        if (maps[i].addr < a + len && a < maps[i].addr + maps[i].len)
            e = check_locked(FIO_MSYNC, maps[i].path);
    if (!e && (flags & MS_SYNC) && pl_on) {
        for (size_t i = 0; i < nmaps; i++) {
            pmap *m = &maps[i];
            if (!m->file || !(m->addr < a + len && a < m->addr + m->len))
                continue;
            uint8_t *lo = a > m->addr ? a : m->addr;
            uint8_t *hi = a + len < m->addr + m->len ? a + len : m->addr + m->len;
            shadow_write(m->file - 1, lo, (size_t)(hi - lo), m->off + (lo - m->addr));
        }
        tick_locked();
    }
    pthread_mutex_unlock(&mu);
    if (e) {
        errno = e;
        return -1;
    }
    if (!real_sync && (flags & MS_SYNC))
        flags = (flags & ~MS_SYNC) | MS_ASYNC;
    return __real_msync(addr, len, flags);
}
