/*
 * mm_file.c -- the files of an mmapv1 database: the directory lock, the
 * data files (<db>.0, <db>.1, ...) and the .ns file, each mapped whole:
 * with the journal, a MAP_PRIVATE view the engine uses and a MAP_SHARED
 * view the journal applies committed bytes to (see mm_int.h, "Journal");
 * without it, one MAP_SHARED view.
 *
 * Data files and the .ns file are created at their final size and
 * allocated with posix_fallocate() (MongoDB preallocates them too), so that
 * a full disk is reported as ENOSPC (OutOfDiskSpace, 14031) when the file
 * is created, instead of as SIGBUS at the first write to a page of a sparse
 * mapping.  They never grow or shrink, so a mapping stays put for the life
 * of the engine -- unless debugRemapOnGrow asks to move every mapping
 * whenever a file is added, to flush out stale views.  A new file's header
 * is fdatasynced, with its directory, before the file is used (journal on
 * or off: without it a power loss could otherwise leave a data file with no
 * header).  Opening checks every header and reports damage as MD_ECORRUPT
 * naming the file and the offset of the bad field.
 */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mm_int.h"

static int io_error(md_error *err, const char *what, const char *path)
{
    return eng_io_error(err, "", what, path);
}

static char *path_of(const mm_engine *e, const char *suffix, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%s%s", e->dir, e->db, suffix);
    return buf;
}

static char *data_path(const mm_engine *e, int fileno, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%s.%d", e->dir, e->db, fileno);
    return buf;
}

/* ---- the directory lock --------------------------------------------------- */

/*
 * Take DIR/mongod.lock with flock(LOCK_EX | LOCK_NB) and write our pid in it.
 * flock locks belong to the open file description, so a second open in the
 * same process conflicts too.  On failure nothing else has been touched.
 */
int mm_lock_acquire(mm_engine *e, md_error *err)
{
    char path[4096], pid[32];
    snprintf(path, sizeof path, "%s/mongod.lock", e->dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return io_error(err, "cannot open lock file", path);
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int busy = errno == EWOULDBLOCK;
        close(fd);
        if (!busy)
            return io_error(err, "cannot lock", path);
        return md_error_set(err, MD_EBUSY, MD_CODE_DBPATH_IN_USE,
                            "Unable to lock file: %s. Is a mongod instance already running?",
                            path);
    }
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n) {
        int rc = io_error(err, "cannot write lock file", path);
        close(fd);
        return rc;
    }
    e->lock_fd = fd;
    return 0;
}

/* Empty the lock file (MongoDB's sign of a clean shutdown) and unlock. */
void mm_lock_release(mm_engine *e)
{
    if (e->lock_fd < 0)
        return;
    if (ftruncate(e->lock_fd, 0) != 0) {
        /* nothing to do: the lock goes away with the descriptor */
    }
    flock(e->lock_fd, LOCK_UN);
    close(e->lock_fd);
    e->lock_fd = -1;
}

/* ---- mapping helpers ------------------------------------------------------ */

/*
 * Map f whole.  Journal on: a MAP_PRIVATE view for the engine and a
 * MAP_SHARED one the journal writes committed bytes through; off: one
 * MAP_SHARED view for both.  MAP_NORESERVE: the private view only ever
 * holds copies of the pages changed since the last remap.
 */
static int map_file(const mm_engine *e, mm_file *f, const char *path, md_error *err)
{
    void *w = mmap(NULL, (size_t)f->len, PROT_READ | PROT_WRITE, MAP_SHARED, f->fd, 0);
    if (w == MAP_FAILED)
        return io_error(err, "cannot mmap", path);
    void *p = w;
    if (e->journal) {
        p = mmap(NULL, (size_t)f->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE,
                 f->fd, 0);
        if (p == MAP_FAILED) {
            int rc = io_error(err, "cannot mmap", path);
            munmap(w, (size_t)f->len);
            return rc;
        }
    }
    f->map = p;
    f->wmap = w;
    return 0;
}

static void unmap_file(mm_file *f)
{
    if (f->wmap && f->wmap != f->map)
        munmap(f->wmap, (size_t)f->len);
    if (f->map)
        munmap(f->map, (size_t)f->len);
    if (f->fd >= 0)
        close(f->fd);
    f->map = f->wmap = NULL;
    f->fd = -1;
}

uint8_t *mm_file_base(const mm_engine *e, int32_t file)
{
    if (file == MM_NS_FILENO)
        return e->ns.map;
    assert(file >= 0 && file < e->nfiles);
    return e->files[file].map;
}

uint8_t *mm_file_wbase(const mm_engine *e, int32_t file)
{
    if (file == MM_NS_FILENO)
        return e->ns.wmap;
    assert(file >= 0 && file < e->nfiles);
    return e->files[file].wmap;
}

int64_t mm_file_len(const mm_engine *e, int32_t file)
{
    if (file == MM_NS_FILENO)
        return e->ns.len;
    return file >= 0 && file < e->nfiles ? e->files[file].len : -1;
}

mm_dfh *mm_dfh_at(const mm_engine *e, int n)
{
    assert(n >= 0 && n < e->nfiles);
    return (mm_dfh *)e->files[n].map;
}

bool mm_ptr_locate(const mm_engine *e, const void *p, int32_t *file, int64_t *ofs)
{
    const uint8_t *q = p;
    if (e->ns.map && q >= e->ns.map && q < e->ns.map + e->ns.len) {
        *file = MM_NS_FILENO;
        *ofs = q - e->ns.map;
        return true;
    }
    for (int i = 0; i < e->nfiles; i++) {
        const mm_file *f = &e->files[i];
        if (q >= f->map && q < f->map + f->len) {
            *file = i;
            *ofs = q - f->map;
            return true;
        }
    }
    return false;
}

int64_t mm_total_bytes(const mm_engine *e)
{
    int64_t n = 0;
    for (int i = 0; i < e->nfiles; i++)
        n += e->files[i].len;
    return n;
}

/* ---- data files ------------------------------------------------------------ */

/* DataFile::_defaultSize: first << n, capped (64, 128 ... 1024 MB, 2047 MB). */
int64_t mm_file_default_size(const mm_engine *e, int n)
{
    int64_t size = e->first_file_size;
    for (int i = 0; i < n && size < e->file_cap; i++)
        size <<= 1;
    return size < e->file_cap ? size : e->file_cap;
}

static int bad_header(md_error *err, const char *path, int ofs, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int bad_header(md_error *err, const char *path, int ofs, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ENG_CORRUPT(err, "%s: bad data file header at offset %d: %s", path, ofs, msg);
}

/* Check the DataFileHeader of file n against the file's real size. */
static int dfh_check(const mm_engine *e, int n, md_error *err)
{
    char path[4096];
    const mm_file *f = &e->files[n];
    const mm_dfh *h = (const mm_dfh *)f->map;
    data_path(e, n, path, sizeof path);
#define BAD(ofs, ...) bad_header(err, path, ofs, __VA_ARGS__)
    if (memcmp(h->magic, MM_DFH_MAGIC, 8) != 0)
        return BAD(40, "magic is not \"" MM_DFH_MAGIC "\"");
    if (h->version != MM_FILE_VERSION)
        return BAD(0, "version %d, expected %d", h->version, MM_FILE_VERSION);
    if (h->version_minor != 5 && h->version_minor != 6)
        return BAD(4, "versionMinor %d", h->version_minor);
    if (h->file_length != f->len || (h->file_length & 0xfff) != 0)
        return BAD(8, "fileLength %d, file has %lld bytes", h->file_length, (long long)f->len);
    if (h->file_no != n)
        return BAD(48, "fileNo %d in file number %d", h->file_no, n);
    if (h->unused.a != n || h->unused.ofs < MM_DFH_SIZE || h->unused.ofs > h->file_length)
        return BAD(12, "unused %d:0x%x out of range", h->unused.a, h->unused.ofs);
    if (h->unused_length < 0 ||
        (int64_t)h->unused.ofs + h->unused_length + 16 > h->file_length)
        return BAD(20, "unusedLength %d inconsistent with unused 0x%x", h->unused_length,
                   h->unused.ofs);
    const mm_loc *fl[2] = {&h->free_start, &h->free_end};
    for (int i = 0; i < 2; i++) {
        mm_loc l = *fl[i];
        if (!mm_loc_is_null(l) &&
            (l.a != n || l.ofs < MM_DFH_SIZE || l.ofs > h->unused.ofs - MM_EXT_HDR))
            return BAD(24 + 8 * i, "extent free list %s %d:0x%x out of range",
                       i ? "end" : "start", l.a, l.ofs);
    }
#undef BAD
    return 0;
}

/* The file table is allocated once, whole (MM_MAX_FILES * 32 bytes): a
 * writer adding a file must not move the entries readers of other
 * collections are using. */
static int files_reserve(mm_engine *e)
{
    if (e->files)
        return e->nfiles < e->files_cap ? 0 : MD_ENOSPC;
    if (!(e->files = calloc(MM_MAX_FILES, sizeof *e->files)))
        return MD_ENOMEM;
    e->files_cap = MM_MAX_FILES;
    return 0;
}

/* Open and check every existing data file, <db>.0 upwards. */
int mm_files_open(mm_engine *e, md_error *err)
{
    char path[4096];
    for (int n = 0; n < MM_MAX_FILES; n++) {
        data_path(e, n, path, sizeof path);
        int fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0) {
            if (errno == ENOENT)
                return 0;
            return io_error(err, "cannot open", path);
        }
        struct stat st;
        if (fstat(fd, &st) != 0 || files_reserve(e) != 0) {
            int rc = io_error(err, "cannot stat", path);
            close(fd);
            return rc;
        }
        if (st.st_size < MM_DFH_SIZE + MM_MIN_EXTENT || st.st_size > MM_MAX_FILE_SIZE) {
            close(fd);
            return ENG_CORRUPT(err, "%s: data file size %lld out of range", path,
                               (long long)st.st_size);
        }
        mm_file *f = &e->files[e->nfiles];
        *f = (mm_file){.fd = fd, .map = NULL, .wmap = NULL, .len = st.st_size};
        int rc = map_file(e, f, path, err);
        if (rc) {
            close(fd);
            return rc;
        }
        e->nfiles++;
        if ((rc = dfh_check(e, n, err)) != 0)
            return rc;
    }
    return 0;
}

/* Move every data file's engine view to a new address (debugRemapOnGrow).
 * mremap moves the pages themselves, so a private view keeps its not yet
 * applied changes. */
static int remap_all(mm_engine *e, md_error *err)
{
    for (int i = 0; i < e->nfiles; i++) {
        mm_file *f = &e->files[i];
        void *to = mmap(NULL, (size_t)f->len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (to == MAP_FAILED)
            return io_error(err, "cannot remap", e->dir);
        void *p = mremap(f->map, (size_t)f->len, (size_t)f->len,
                         MREMAP_MAYMOVE | MREMAP_FIXED, to);
        if (p == MAP_FAILED) {
            munmap(to, (size_t)f->len);
            return io_error(err, "cannot remap", e->dir);
        }
        if (f->wmap == f->map)
            f->wmap = p;
        f->map = p;
    }
    e->nremaps++;
    return 0;
}

/*
 * Fresh private views at the same addresses, holding the pending commits
 * (journal on, no transaction open).
 *
 * The remapping commit holds only its own collection's lock: readers of
 * other collections run meanwhile (query/q_lock.c) and must never see the
 * files' bytes without the commits still pending.  So each fresh view is
 * built at a spare address -- the file mapped privately, the pending
 * commits written into it -- and only then moved over the old one with
 * mremap(MREMAP_FIXED), which replaces the mapping in one step: a reader
 * sees the old view or the new one, both with every commit.  (Mapping the
 * file over the old view in place and re-applying afterwards, as this did
 * first, showed readers the older bytes until the re-apply reached them.)
 */
typedef struct staged_views {
    const mm_engine *e;
    uint8_t **fresh; /* [0] the .ns file, [1 + n] data file n */
} staged_views;

static int apply_staged(void *ctx, int32_t file, uint32_t ofs, const uint8_t *data,
                        uint32_t len)
{
    const staged_views *sv = ctx;
    int i = file == MM_NS_FILENO ? 0 : 1 + file;
    if (file != MM_NS_FILENO && (file < 0 || file >= sv->e->nfiles))
        return MD_ECORRUPT;
    memcpy(sv->fresh[i] + ofs, data, len);
    return 0;
}

int mm_views_remap(mm_engine *e, const mm_jbuf *pend)
{
    if (!e->journal)
        return 0;
    int n = e->nfiles + 1, rc = 0;
    uint8_t **fresh = calloc((size_t)n, sizeof *fresh);
    if (!fresh)
        return MD_ENOMEM;
    for (int i = 0; i < n && rc == 0; i++) {
        const mm_file *f = i == 0 ? &e->ns : &e->files[i - 1];
        void *p = mmap(NULL, (size_t)f->len, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_NORESERVE, f->fd, 0);
        if (p == MAP_FAILED)
            rc = MD_ENOMEM; /* the old views stay: nothing changed yet */
        else
            fresh[i] = p;
    }
    staged_views sv = {e, fresh};
    if (rc == 0 && pend)
        rc = mm_jbuf_apply(pend, apply_staged, &sv);
    for (int i = 0; i < n && rc == 0; i++) {
        mm_file *f = i == 0 ? &e->ns : &e->files[i - 1];
        void *p = mremap(fresh[i], (size_t)f->len, (size_t)f->len,
                         MREMAP_MAYMOVE | MREMAP_FIXED, f->map);
        if (p == MAP_FAILED) {
            /* earlier files already have their new views, this one may
             * have lost its old one: nothing sane can continue (MongoDB
             * fasserts in remapPrivateView too) */
            fprintf(stderr, "mmapv1: remapping the private view failed: %s\n",
                    strerror(errno));
            abort();
        }
        fresh[i] = NULL;
    }
    for (int i = 0; i < n; i++)
        if (fresh[i]) {
            const mm_file *f = i == 0 ? &e->ns : &e->files[i - 1];
            munmap(fresh[i], (size_t)f->len);
        }
    free(fresh);
    return rc;
}

int64_t mm_views_diff(const mm_engine *e, int32_t *file)
{
    for (int i = -1; i < e->nfiles; i++) {
        const mm_file *f = i < 0 ? &e->ns : &e->files[i];
        if (f->map == f->wmap)
            continue;
        for (int64_t at = 0; at < f->len; at += 4096) {
            size_t n = (size_t)(f->len - at < 4096 ? f->len - at : 4096);
            if (memcmp(f->map + at, f->wmap + at, n) != 0) {
                while (f->map[at] == f->wmap[at])
                    at++;
                *file = i < 0 ? MM_NS_FILENO : i;
                return at;
            }
        }
    }
    return -1;
}

/* Initialize a new file's header (DataFileHeader::init): not a transactional
 * write -- an aborted transaction leaves an empty, valid file behind. */
static void dfh_init(mm_dfh *h, int64_t len, int n)
{
    memset(h, 0, sizeof *h);
    h->version = MM_FILE_VERSION;
    h->version_minor = MM_FILE_VERSION_MINOR;
    h->file_length = (int32_t)len;
    h->unused = mm_loc_make(n, MM_DFH_SIZE);
    h->unused_length = (int32_t)(len - MM_DFH_SIZE - 16);
    h->free_start = h->free_end = mm_loc_null();
    memcpy(h->magic, MM_DFH_MAGIC, 8);
    h->file_no = n;
}

/* Write hdr (len bytes) at offset 0 of a new file created as tmp, make it
 * durable, then give it its name and make the directory entry durable:
 * a crash leaves either no file or a complete one (at most a stray .tmp,
 * which the next creation truncates).  With the journal this is what
 * makes the file exist before any journal section can name it (MongoDB
 * journals FileCreated instead). */
static int file_init(const mm_engine *e, int fd, const void *hdr, size_t len,
                     const char *tmp, const char *path, md_error *err)
{
    ssize_t w = pwrite(fd, hdr, len, 0);
    if (w != (ssize_t)len) {
        if (w >= 0)
            errno = ENOSPC; /* a short write: the disk is full */
        return io_error(err, "cannot write", tmp);
    }
    if (fdatasync(fd) != 0)
        return io_error(err, "cannot sync", tmp);
    if (rename(tmp, path) != 0)
        return io_error(err, "cannot rename to", path);
    if (mm_fsync_dir(e->dir) != 0) {
        int rc = io_error(err, "cannot sync the directory of", path);
        unlink(path);
        return rc;
    }
    return 0;
}

/* Give a new file its size with allocated blocks (posix_fallocate), so a
 * full disk fails here and not as SIGBUS in a mapping; file systems that
 * cannot allocate get a sparse file (ftruncate). */
static int file_allocate(int fd, int64_t size, const char *path, md_error *err)
{
    int rc = posix_fallocate(fd, 0, (off_t)size);
    if (rc == EINVAL || rc == EOPNOTSUPP)
        rc = ftruncate(fd, (off_t)size) == 0 ? 0 : errno;
    if (rc == 0)
        return 0;
    errno = rc;
    return io_error(err, "cannot allocate", path);
}

/*
 * Create data file nfiles.  Its size is the default for its number, doubled
 * until an extent of ext_size bytes fits (DataFile::open), capped at the
 * maximum file size.  The header is written to the file before it is mapped
 * (not through the transaction: an aborted transaction leaves an empty,
 * valid file).  Holds the journal lock: the flush thread walks the files.
 */
int mm_file_add(mm_engine *e, int64_t ext_size, md_error *err)
{
    char path[4096];
    int n = e->nfiles;
    if (n >= MM_MAX_FILES)
        return md_error_set(err, MD_ENOSPC, MD_CODE_OUT_OF_DISK_SPACE,
                            "too many data files (%d)", n);
    int64_t size = mm_file_default_size(e, n);
    while (size < ext_size + MM_DFH_SIZE + 16) {
        if (size < e->file_cap / 2) {
            size *= 2;
        } else {
            size = e->file_cap;
            break;
        }
    }
    mm_dfh *h = malloc(sizeof *h);
    if (!h)
        return md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
    dfh_init(h, size, n);
    data_path(e, n, path, sizeof path);
    mm_journal_lock(e);
    int rc = files_reserve(e) != 0
                 ? md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory")
                 : 0;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (!rc && access(path, F_OK) == 0)
        rc = ENG_CORRUPT(err, "%s exists but is not data file %d of %s", path, n, e->dir);
    int fd = rc ? -1 : open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (!rc && fd < 0)
        rc = io_error(err, "cannot create", tmp);
    if (!rc)
        rc = file_allocate(fd, size, tmp, err);
    if (!rc)
        rc = file_init(e, fd, h, sizeof *h, tmp, path, err);
    mm_file nf = {.fd = fd, .map = NULL, .wmap = NULL, .len = size};
    if (!rc)
        rc = map_file(e, &nf, path, err);
    if (!rc && e->debug_remap)
        rc = remap_all(e, err);
    if (rc && fd >= 0) {
        if (nf.map)
            unmap_file(&nf); /* closes fd */
        else
            close(fd);
        unlink(tmp);
        if (nf.map)
            unlink(path);
    } else if (!rc) {
        e->files[n] = nf;
        e->nfiles++;
    }
    mm_journal_unlock(e);
    free(h);
    return rc;
}

void mm_files_close(mm_engine *e)
{
    for (int i = 0; i < e->nfiles; i++)
        unmap_file(&e->files[i]);
    free(e->files);
    e->files = NULL;
    e->nfiles = e->files_cap = 0;
    unmap_file(&e->ns);
}

int mm_files_flush(mm_engine *e, bool sync, md_error *err)
{
    int flags = sync ? MS_SYNC : MS_ASYNC;
    char path[4096];
    if (e->ns.wmap && msync(e->ns.wmap, (size_t)e->ns.len, flags) != 0)
        return io_error(err, "cannot flush (msync)", path_of(e, ".ns", path, sizeof path));
    for (int i = 0; i < e->nfiles; i++)
        if (msync(e->files[i].wmap, (size_t)e->files[i].len, flags) != 0)
            return io_error(err, "cannot flush (msync)", data_path(e, i, path, sizeof path));
    return 0;
}

/* ---- the .ns file ----------------------------------------------------------- */

static int ns_check_header(const mm_engine *e, const char *path, md_error *err)
{
    const mm_ns_header *h = (const mm_ns_header *)e->ns.map;
    if (memcmp(h->magic, MM_NS_MAGIC, 8) != 0)
        return ENG_CORRUPT(err, "%s: bad .ns header at offset 0: magic is not \"%s\"", path,
                           MM_NS_MAGIC);
    if (h->version != 1)
        return ENG_CORRUPT(err, "%s: bad .ns header at offset 8: version %u", path,
                           h->version);
    if (h->slot_size != MM_NS_SLOT_SIZE)
        return ENG_CORRUPT(err, "%s: bad .ns header at offset 12: slotSize %u", path,
                           h->slot_size);
    if (h->file_size != e->ns.len)
        return ENG_CORRUPT(err, "%s: bad .ns header at offset 16: fileSize %lld, file has %lld",
                           path, (long long)h->file_size, (long long)e->ns.len);
    if ((int64_t)h->nslots != e->ns.len / MM_NS_SLOT_SIZE - 1 || h->nslots == 0)
        return ENG_CORRUPT(err, "%s: bad .ns header at offset 24: nslots %u", path,
                           h->nslots);
    return 0;
}

static void ns_init(mm_ns_header *h, int64_t len)
{
    memset(h, 0, sizeof *h);
    memcpy(h->magic, MM_NS_MAGIC, 8);
    h->version = 1;
    h->slot_size = MM_NS_SLOT_SIZE;
    h->file_size = len;
    h->nslots = (uint32_t)(len / MM_NS_SLOT_SIZE - 1);
}

int mm_ns_set_flags(mm_engine *e, uint32_t flags)
{
    const off_t at = offsetof(mm_ns_header, flags);
    if (pwrite(e->ns.fd, &flags, sizeof flags, at) != (ssize_t)sizeof flags ||
        fdatasync(e->ns.fd) != 0)
        return MD_EIO;
    return 0;
}

/*
 * Open DIR/<db>.ns, or create it with ns_size bytes when it does not exist
 * and neither does <db>.0 (a .ns file missing next to data files is
 * damage, not a new database).  An existing file keeps its own size.
 */
int mm_ns_file_open(mm_engine *e, int64_t ns_size, bool *created, md_error *err)
{
    char path[4096], dpath[4096];
    path_of(e, ".ns", path, sizeof path);
    *created = false;
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
        if (access(data_path(e, 0, dpath, sizeof dpath), F_OK) == 0)
            return ENG_CORRUPT(err, "%s is missing but data file %s exists", path, dpath);
        char tmp[4200];
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        mm_ns_header h;
        ns_init(&h, ns_size);
        if (fd < 0)
            return io_error(err, "cannot create", tmp);
        int rc = file_allocate(fd, ns_size, tmp, err);
        if (!rc)
            rc = file_init(e, fd, &h, sizeof h, tmp, path, err);
        if (rc) {
            close(fd);
            unlink(tmp);
            return rc;
        }
        *created = true;
    }
    if (fd < 0)
        return io_error(err, "cannot open", path);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int rc = io_error(err, "cannot stat", path);
        close(fd);
        return rc;
    }
    if (st.st_size < MM_MIN_NS_SIZE || st.st_size > MM_MAX_FILE_SIZE) {
        close(fd);
        return ENG_CORRUPT(err, "%s: .ns file size %lld out of range", path,
                           (long long)st.st_size);
    }
    e->ns = (mm_file){.fd = fd, .map = NULL, .wmap = NULL, .len = st.st_size};
    int rc = map_file(e, &e->ns, path, err);
    if (rc) {
        e->ns.fd = -1;
        close(fd);
        return rc;
    }
    if ((rc = ns_check_header(e, path, err)) != 0)
        return rc;
    e->nslots = ((mm_ns_header *)e->ns.map)->nslots;
    return 0;
}
