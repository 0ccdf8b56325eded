/*
 * eng_util.c -- utilities shared by every layer: error reporting (md_error,
 * MongoDB code names, corruption reports), the validate accumulator, and
 * the allocation strategy names (the sorted stores' key order,
 * eng_key_cmp, is inline in eng.h).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "eng.h"

const char *md_strerror(int rc)
{
    switch (rc) {
    case MD_OK: return "MD_OK: success";
    case MD_NOTFOUND: return "MD_NOTFOUND: not found";
    case MD_ERROR: return "MD_ERROR: operation failed";
    case MD_EINVAL: return "MD_EINVAL: invalid argument";
    case MD_ENOMEM: return "MD_ENOMEM: out of memory";
    case MD_EIO: return "MD_EIO: I/O error";
    case MD_ECORRUPT: return "MD_ECORRUPT: data corruption detected";
    case MD_EDUPKEY: return "MD_EDUPKEY: duplicate key";
    case MD_EBUSY: return "MD_EBUSY: database directory in use";
    case MD_ENOSPC: return "MD_ENOSPC: no space left";
    case MD_ENOTSUP: return "MD_ENOTSUP: not supported by this engine";
    case MD_ETOOBIG: return "MD_ETOOBIG: size limit exceeded";
    case MD_EREADONLY: return "MD_EREADONLY: handle is read-only after a failed write";
    case MD_EEXISTS: return "MD_EEXISTS: already exists";
    case MD_EWRITECONFLICT: return "MD_EWRITECONFLICT: write conflict";
    case MD_ECAPPEDLOST: return "MD_ECAPPEDLOST: capped position lost";
    default: return "unknown minidoc error";
    }
}

const char *md_code_name(int code)
{
    static const struct {
        int code;
        const char *name;
    } names[] = {
        {0, "OK"},
        {1, "InternalError"},
        {2, "BadValue"},
        {4, "NoSuchKey"},
        {5, "GraphContainsCycle"},
        {8, "UnknownError"},
        {9, "FailedToParse"},
        {10, "CannotMutateObject"},
        {300, "DataCorruptionDetected"},
        {14, "TypeMismatch"},
        {15, "Overflow"},
        {20, "IllegalOperation"},
        {21, "EmptyArrayOperation"},
        {22, "InvalidBSON"},
        {24, "LockTimeout"},
        {26, "NamespaceNotFound"},
        {27, "IndexNotFound"},
        {28, "PathNotViable"},
        {29, "NonExistentPath"},
        {30, "InvalidPath"},
        {34, "CannotBackfillArray"},
        {39, "FileStreamFailed"},
        {40, "ConflictingUpdateOperators"},
        {43, "CursorNotFound"},
        {48, "NamespaceExists"},
        {50, "MaxTimeMSExpired"},
        {52, "DollarPrefixedFieldName"},
        {53, "InvalidIdField"},
        {54, "NotSingleValueField"},
        {56, "EmptyFieldName"},
        {57, "DottedFieldName"},
        {59, "CommandNotFound"},
        {66, "ImmutableField"},
        {67, "CannotCreateIndex"},
        {68, "IndexAlreadyExists"},
        {72, "InvalidOptions"},
        {73, "InvalidNamespace"},
        {85, "IndexOptionsConflict"},
        {86, "IndexKeySpecsConflict"},
        {98, "DBPathInUse"},
        {112, "WriteConflict"},
        {115, "CommandNotSupported"},
        {136, "CappedPositionLost"},
        {139, "JSInterpreterFailure"},
        {171, "CannotIndexParallelArrays"},
        {227, "CannotImplicitlyCreateCollection"},
        {238, "NotYetImplemented"},
        {10334, "BSONObjectTooLarge"},
        {11000, "DuplicateKey"},
        {14031, "OutOfDiskSpace"},
        {17280, "KeyTooLong"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].code == code)
            return names[i].name;
    return "UnknownError";
}

int eng_rc_to_code(int rc)
{
    switch (rc) {
    case MD_OK: return MD_CODE_OK;
    case MD_NOTFOUND: return MD_CODE_NO_SUCH_KEY;
    case MD_EINVAL: return MD_CODE_BAD_VALUE;
    case MD_ECORRUPT: return MD_CODE_DATA_CORRUPTION_DETECTED;
    case MD_EDUPKEY: return MD_CODE_DUPLICATE_KEY;
    case MD_EBUSY: return MD_CODE_DBPATH_IN_USE;
    case MD_ENOSPC: return MD_CODE_OUT_OF_DISK_SPACE;
    case MD_ENOTSUP: return MD_CODE_COMMAND_NOT_SUPPORTED;
    case MD_ETOOBIG: return MD_CODE_BSON_OBJECT_TOO_LARGE;
    case MD_EIO: return MD_CODE_FILE_STREAM_FAILED;
    case MD_EEXISTS: return MD_CODE_NAMESPACE_EXISTS;
    case MD_EWRITECONFLICT: return MD_CODE_WRITE_CONFLICT;
    case MD_ECAPPEDLOST: return MD_CODE_CAPPED_POSITION_LOST;
    default: return MD_CODE_INTERNAL_ERROR;
    }
}

static int error_vset(md_error *err, int rc, int code, const char *fmt, va_list ap)
{
    if (err) {
        err->code = code;
        snprintf(err->code_name, sizeof err->code_name, "%s", md_code_name(code));
        vsnprintf(err->message, sizeof err->message, fmt, ap);
    }
    return rc;
}

int md_error_set(md_error *err, int rc, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_vset(err, rc, code, fmt, ap);
    va_end(ap);
    return rc;
}

void md_error_clear(md_error *err)
{
    if (err) {
        err->code = 0;
        err->code_name[0] = '\0';
        err->message[0] = '\0';
    }
}

int eng_corrupt_at(md_error *err, const char *file, int line, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return md_error_set(err, MD_ECORRUPT, MD_CODE_DATA_CORRUPTION_DETECTED, "%s (detected at %s:%d)",
                        msg, file, line);
}

void eng_validate_init(eng_validate *v, bool full)
{
    v->full = full;
    v->nerrors = 0;
    bson_init(&v->errors);
    bson_init(&v->info);
}

void eng_validate_cleanup(eng_validate *v)
{
    bson_destroy(&v->errors);
    bson_destroy(&v->info);
}

void eng_validate_error(eng_validate *v, const char *fmt, ...)
{
    char msg[1024], key[16];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(key, sizeof key, "%d", v->nerrors++);
    bson_append_utf8(&v->errors, key, -1, msg, -1);
}

const char *eng_alloc_name(int alloc)
{
    switch (alloc) {
    case ENG_ALLOC_POWEROF2: return "powerOf2";
    case ENG_ALLOC_NOPADDING: return "noPadding";
    case ENG_ALLOC_PADDINGFACTOR: return "paddingFactor";
    default: return "unknown";
    }
}

int eng_alloc_parse(const char *name)
{
    for (int a = ENG_ALLOC_POWEROF2; a <= ENG_ALLOC_PADDINGFACTOR; a++)
        if (strcmp(name, eng_alloc_name(a)) == 0)
            return a;
    return -1;
}


/* One document at depth (embedded documents recurse, 100 levels at most):
 * eng_bson_next's extents, then each value's own rules.  top (depth 0
 * only, or NULL) notes the names an insert checks. */
static bool well_formed(const uint8_t *p, uint32_t len, int depth, eng_bson_top *top)
{
    if (len < 5 || eng_le32(p) != len || p[len - 1] != 0 || depth > 100)
        return false;
    uint32_t i = 4, end = len - 1;
    eng_bson_elem e;
    while (i < end) {
        if (!eng_bson_next(p, end, &i, &e))
            return false;
        /* the key is UTF-8 (checked only when it is not plain ASCII, as
         * keys nearly always are) */
        if (!e.key_ascii && !bson_utf8_validate(e.key, e.klen, false))
            return false;
        if (top && (e.key[0] == '_' || e.key[0] == '$')) {
            bool is_id = e.klen == 3 && e.key[1] == 'i' && e.key[2] == 'd';
            top->id_first |= is_id && e.key == (const char *)p + 5;
            top->nid += is_id;
            if (e.key[0] == '$' && !top->dollar)
                top->dollar = e.key;
        }
        const uint8_t *v = e.val;
        uint32_t n = e.vlen;
        switch (e.type) {
        case 0x08: /* a bool is 0 or 1 */
            if (v[0] > 1)
                return false;
            break;
        case 0x02: case 0x0D: case 0x0E: case 0x0C: { /* a string: length >= 1, NUL-terminated */
            uint32_t sn = 4 + eng_le32(v);
            if (sn < 5 || v[sn - 1] != 0)
                return false;
            break;
        }
        case 0x05: /* subtype 2 (old binary) holds its own length again */
            if (v[4] == 0x02 && (n < 9 || eng_le32(v + 5) != n - 9))
                return false;
            break;
        case 0x03: case 0x04:
            if (!well_formed(v, n, depth + 1, NULL))
                return false;
            break;
        case 0x0F: /* code with scope: total, string, document */
            if (n < 14)
                return false;
            {
                uint32_t sl = eng_le32(v + 4);
                if (sl < 1 || (uint64_t)8 + sl + 5 > n || v[8 + sl - 1] != 0 ||
                    !well_formed(v + 8 + sl, n - 8 - sl, depth + 1, NULL))
                    return false;
            }
            break;
        default: break;
        }
    }
    return i == end;
}

bool eng_bson_well_formed(const uint8_t *p, uint32_t len)
{
    return p && well_formed(p, len, 0, NULL);
}

bool eng_bson_well_formed_top(const uint8_t *p, uint32_t len, eng_bson_top *top)
{
    *top = (eng_bson_top){.nid = 0};
    return p && well_formed(p, len, 0, top);
}

/* ---- read errors ------------------------------------------------------------ */

static __thread md_error tls_err;
static __thread bool tls_err_set;

void eng_note_error(int rc, const md_error *err)
{
    if (rc && rc != MD_NOTFOUND && err && err->message[0]) {
        tls_err = *err;
        tls_err_set = true;
    }
}

bool eng_take_error(md_error *out)
{
    bool had = tls_err_set;
    if (had && out)
        *out = tls_err;
    tls_err_set = false;
    return had;
}

void eng_rwlock_init(pthread_rwlock_t *l)
{
    pthread_rwlockattr_t a;
    pthread_rwlockattr_init(&a);
    pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(l, &a);
    pthread_rwlockattr_destroy(&a);
}

struct timespec eng_deadline(clockid_t clk, int64_t us)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    int64_t ns = (int64_t)ts.tv_nsec + (us % 1000000) * 1000;
    ts.tv_sec += (time_t)(us / 1000000 + ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);
    return ts;
}

int eng_errno_rc(int e)
{
    return e == ENOSPC || e == EDQUOT ? MD_ENOSPC : MD_EIO;
}

int eng_io_error(md_error *err, const char *prefix, const char *what, const char *path)
{
    int saved = errno, rc = eng_errno_rc(saved);
    return md_error_set(err, rc,
                        rc == MD_ENOSPC ? MD_CODE_OUT_OF_DISK_SPACE : MD_CODE_FILE_STREAM_FAILED,
                        "%s%s %s: %s", prefix, what, path, strerror(saved));
}

int64_t eng_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ---- crc32c (Castagnoli): SSE4.2 where the CPU has it, else a table ---------- */

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
static bool crc_has_hw; /* x86-64 with SSE4.2 */

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
        crc_table[i] = c;
    }
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    crc_has_hw = __builtin_cpu_supports("sse4.2");
#endif
}

static uint32_t crc_soft(uint32_t crc, const uint8_t *p, size_t len)
{
    while (len--)
        crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* The SSE4.2 crc32 instruction computes the same (Castagnoli) CRC. */
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const uint8_t *p,
                                                         size_t len)
{
    uint64_t c = crc;
    for (; len >= 8; p += 8, len -= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
    }
    crc = (uint32_t)c;
    for (; len > 0; p++, len--)
        crc = __builtin_ia32_crc32qi(crc, *p);
    return crc;
}
#endif

uint32_t eng_crc32c(uint32_t crc, const void *buf, size_t len)
{
    pthread_once(&crc_once, crc_init);
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (crc_has_hw)
        return ~crc_hw(~crc, buf, len);
#endif
    return ~crc_soft(~crc, buf, len);
}
