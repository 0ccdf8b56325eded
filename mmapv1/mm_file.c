/*
 * mm_file.c -- the files of an mmapv1 database: the directory lock, the
 * data files (<db>.0, <db>.1, ...) and the .ns file, each mapped whole with
 * MAP_SHARED.
 *
 * Data files are created at their final size with ftruncate() (sparse, as
 * MongoDB without preallocation) and never grow or shrink, so a mapping
 * stays put for the life of the engine -- unless debugRemapOnGrow asks to
 * move every mapping whenever a file is added, to flush out stale views.
 * Opening checks every header and reports damage as MD_ECORRUPT naming the
 * file and the offset of the bad field.  (A full disk under a sparse file
 * shows up as SIGBUS on first write to the page; the journal step will
 * preallocate.)
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
    int saved = errno;
    if (saved == ENOSPC || saved == EDQUOT)
        return md_error_set(err, MD_ENOSPC, MD_CODE_OUT_OF_DISK_SPACE, "%s %s: %s", what,
                            path, strerror(saved));
    return md_error_set(err, MD_EIO, MD_CODE_FILE_STREAM_FAILED, "%s %s: %s", what, path,
                        strerror(saved));
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

static int map_file(mm_file *f, const char *path, md_error *err)
{
    void *p = mmap(NULL, (size_t)f->len, PROT_READ | PROT_WRITE, MAP_SHARED, f->fd, 0);
    if (p == MAP_FAILED)
        return io_error(err, "cannot mmap", path);
    f->map = p;
    return 0;
}

static void unmap_file(mm_file *f)
{
    if (f->map)
        munmap(f->map, (size_t)f->len);
    if (f->fd >= 0)
        close(f->fd);
    f->map = NULL;
    f->fd = -1;
}

uint8_t *mm_file_base(const mm_engine *e, int32_t file)
{
    if (file == MM_NS_FILENO)
        return e->ns.map;
    assert(file >= 0 && file < e->nfiles);
    return e->files[file].map;
}

uint8_t *mm_ptr(const mm_engine *e, mm_loc l, int64_t len)
{
    if (l.a < 0 || l.a >= e->nfiles || l.ofs < 0 || len < 0)
        return NULL;
    const mm_file *f = &e->files[l.a];
    if ((int64_t)l.ofs + len > f->len)
        return NULL;
    return f->map + l.ofs;
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

static int files_reserve(mm_engine *e)
{
    if (e->nfiles < e->files_cap)
        return 0;
    int cap = e->files_cap ? e->files_cap * 2 : 4;
    mm_file *v = realloc(e->files, (size_t)cap * sizeof *v);
    if (!v)
        return MD_ENOMEM;
    e->files = v;
    e->files_cap = cap;
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
        *f = (mm_file){.fd = fd, .map = NULL, .len = st.st_size};
        int rc = map_file(f, path, err);
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

/* Move every data file mapping to a new address (debugRemapOnGrow). */
static int remap_all(mm_engine *e, md_error *err)
{
    for (int i = 0; i < e->nfiles; i++) {
        mm_file *f = &e->files[i];
        void *p = mmap(NULL, (size_t)f->len, PROT_READ | PROT_WRITE, MAP_SHARED, f->fd, 0);
        if (p == MAP_FAILED)
            return io_error(err, "cannot remap", e->dir);
        munmap(f->map, (size_t)f->len);
        f->map = p;
    }
    e->nremaps++;
    return 0;
}

/* Initialize a new file's header (DataFileHeader::init): not a transactional
 * write -- an aborted transaction leaves an empty, valid file behind. */
static void dfh_init(mm_file *f, int n)
{
    mm_dfh *h = (mm_dfh *)f->map;
    memset(h, 0, sizeof *h);
    h->version = MM_FILE_VERSION;
    h->version_minor = MM_FILE_VERSION_MINOR;
    h->file_length = (int32_t)f->len;
    h->unused = mm_loc_make(n, MM_DFH_SIZE);
    h->unused_length = (int32_t)(f->len - MM_DFH_SIZE - 16);
    h->free_start = h->free_end = mm_loc_null();
    memcpy(h->magic, MM_DFH_MAGIC, 8);
    h->file_no = n;
}

/*
 * Create data file nfiles.  Its size is the default for its number, doubled
 * until an extent of ext_size bytes fits (DataFile::open), capped at the
 * maximum file size.
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
    if (files_reserve(e) != 0)
        return md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
    data_path(e, n, path, sizeof path);
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return io_error(err, "cannot create", path);
    if (ftruncate(fd, size) != 0) {
        int rc = io_error(err, "cannot size", path);
        close(fd);
        unlink(path);
        return rc;
    }
    mm_file nf = {.fd = fd, .map = NULL, .len = size};
    int rc = map_file(&nf, path, err);
    if (rc) {
        close(fd);
        unlink(path);
        return rc;
    }
    if (e->debug_remap && (rc = remap_all(e, err)) != 0) {
        unmap_file(&nf);
        unlink(path);
        return rc;
    }
    dfh_init(&nf, n);
    e->files[n] = nf;
    e->nfiles++;
    return 0;
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
    if (e->ns.map && msync(e->ns.map, (size_t)e->ns.len, flags) != 0)
        return io_error(err, "msync", e->dir);
    for (int i = 0; i < e->nfiles; i++)
        if (msync(e->files[i].map, (size_t)e->files[i].len, flags) != 0)
            return io_error(err, "msync", e->dir);
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

static void ns_init(mm_engine *e)
{
    mm_ns_header *h = (mm_ns_header *)e->ns.map;
    memset(h, 0, sizeof *h);
    memcpy(h->magic, MM_NS_MAGIC, 8);
    h->version = 1;
    h->slot_size = MM_NS_SLOT_SIZE;
    h->file_size = e->ns.len;
    h->nslots = (uint32_t)(e->ns.len / MM_NS_SLOT_SIZE - 1);
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
        fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd >= 0 && ftruncate(fd, ns_size) != 0) {
            int rc = io_error(err, "cannot size", path);
            close(fd);
            unlink(path);
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
    e->ns = (mm_file){.fd = fd, .map = NULL, .len = st.st_size};
    int rc = map_file(&e->ns, path, err);
    if (rc) {
        e->ns.fd = -1;
        close(fd);
        return rc;
    }
    if (*created)
        ns_init(e);
    if ((rc = ns_check_header(e, path, err)) != 0)
        return rc;
    e->nslots = ((mm_ns_header *)e->ns.map)->nslots;
    return 0;
}
