/*
 * fault_corrupt.c -- flipped bytes in every kind of file, on both engines.
 *
 * A child process builds a small database per engine: two collections with
 * secondary indexes (one unique), inserts, updates that move documents,
 * deletes, an {fsync: 1} (a checkpoint / a data file flush), then more
 * writes with {j: true} that only the log or the journal holds, and exits
 * without closing (as a crash would), so that every file kind is there:
 * mmapv1's .ns, data files, index buckets, journal and journal/lsn; btree's
 * table and index files, metadata, turtle and log.
 *
 * The reference is what a pristine copy shows after open: the documents of
 * both collections (by _id, and through each index) and the counts.  Each
 * round copies the directory, flips a byte or a short run of bytes in one
 * random file, and in a child process opens it, validates both
 * collections, reads them (a full scan and the index scans), counts, and
 * inserts one document.  It requires:
 *
 *   - no crash (the child exits normally; ASan builds catch bad reads);
 *   - every error is MongoDB-style: DataCorruptionDetected (300) naming the
 *     file and an offset, or an I/O error (FileStreamFailed, 39) naming the
 *     file; nothing else;
 *   - btree: when open, validate and the reads all succeed, the data is the
 *     reference (checksums cover every block and log record), or, for a
 *     flip in the log's last record, the reference without the last write
 *     (a damaged last record cannot be told from one a crash tore);
 *   - mmapv1: the same, except that a flip inside a document's bytes that
 *     leaves valid BSON changes a value undetectably (MongoDB's mmapv1 has
 *     no record checksum; README "Durability"): there every returned
 *     document must be valid BSON, and the index scans must agree with the
 *     full scan unless validate reported the damage.
 *
 * An mmapv1 catalog entry naming a collection or index the .ns file does
 * not hold, or malformed, fails open with DataCorruptionDetected naming
 * the catalog record; an index keyFormat a later build could write is
 * CannotCreateIndex naming the record too (it cannot be told from damage):
 * the mmapv1_catalog_* tests damage those fields one by one.
 *
 * The engines' messages are captured (t_log.h) and checked round by round:
 * only a round that flipped a byte in the mmapv1 journal may say "the
 * journal is damaged before its end", naming that file; a btree
 * checkpoint that fails at close must name the damaged directory.
 *
 * MINIDOC_CORRUPT_ROUNDS (default 300 per engine) and MINIDOC_CRASH_SEED.
 */
#include "../crash/crash_util.h"
#include "fault_io.h"
#include "../engine/t_log.h"

#include <dirent.h>
#include <execinfo.h>

#define NDOCS 120

typedef struct snap {
    char *docs;   /* both collections by _id, relaxed JSON */
    char *byidx;  /* both collections through their secondary indexes */
    long count;
} snap;

static bson_t *corrupt_opts(const char *engine)
{
    bson_t *o = bson_new(), sub;
    BSON_APPEND_UTF8(o, "engine", engine);
    if (strcmp(engine, "btree") == 0) {
        BSON_APPEND_DOCUMENT_BEGIN(o, "btree", &sub);
        BSON_APPEND_INT32(&sub, "checkpointIntervalSecs", 3600);
        BSON_APPEND_INT32(&sub, "commitIntervalMs", 1000);
        BSON_APPEND_INT64(&sub, "cacheSize", 256 * 1024);
        BSON_APPEND_UTF8(&sub, "blockCompressor", "none");
        bson_append_document_end(o, &sub);
    } else {
        BSON_APPEND_DOCUMENT_BEGIN(o, "mmapv1", &sub);
        BSON_APPEND_INT64(&sub, "firstFileSize", 128 * 1024);
        BSON_APPEND_INT64(&sub, "nsSize", 32768);
        BSON_APPEND_INT32(&sub, "syncdelay", 0);
        BSON_APPEND_INT32(&sub, "journalCommitInterval", 500);
        bson_append_document_end(o, &sub);
    }
    return o;
}

static void cmd_ok(md_db *db, const char *json)
{
    bson_t reply;
    md_error err;
    int rc = md_db_command_json(db, json, &reply, &err);
    bson_iter_t it;
    if (rc != 0 || bson_iter_init_find(&it, &reply, "writeErrors")) {
        fprintf(stderr, "build: %s failed: %s\n", json, err.message);
        _exit(3);
    }
    bson_destroy(&reply);
}

/* The builder (a child process): never closes the database. */
static void build(const char *dir, const char *engine)
{
    md_db *db;
    md_error err;
    bson_t *o = corrupt_opts(engine);
    if (md_db_open(dir, o, &db, &err) != 0) {
        fprintf(stderr, "build: open: %s\n", err.message);
        _exit(3);
    }
    char json[2048], pad[700];
    cmd_ok(db, "{\"createIndexes\": \"a\", \"indexes\": [{\"key\": {\"v\": 1}, \"name\": \"v_1\"}]}");
    cmd_ok(db, "{\"createIndexes\": \"b\", \"indexes\": [{\"key\": {\"s\": 1}, \"name\": \"s_1\", "
               "\"unique\": true}]}");
    for (int i = 0; i < NDOCS; i++) {
        int n = 20 + (i * 37) % 300;
        memset(pad, 'a' + i % 26, (size_t)n);
        pad[n] = '\0';
        snprintf(json, sizeof json,
                 "{\"insert\": \"%s\", \"documents\": [{\"_id\": %d, \"v\": %d, \"s\": \"k%05d\", "
                 "\"pad\": \"%s\", \"arr\": [%d, %d]}]}",
                 i % 3 ? "a" : "b", i, (i * 7919) % 1000, i, pad, i, i + 1);
        cmd_ok(db, json);
    }
    for (int i = 0; i < NDOCS; i += 4) { /* growing updates move documents */
        snprintf(json, sizeof json,
                 "{\"update\": \"%s\", \"updates\": [{\"q\": {\"_id\": %d}, \"u\": {\"$set\": "
                 "{\"grown\": \"%0400d\"}, \"$inc\": {\"v\": 1}}}]}",
                 i % 3 ? "a" : "b", i, i);
        cmd_ok(db, json);
    }
    for (int i = 1; i < NDOCS; i += 9) {
        snprintf(json, sizeof json, "{\"delete\": \"%s\", \"deletes\": [{\"q\": {\"_id\": %d}, "
                                    "\"limit\": 1}]}",
                 i % 3 ? "a" : "b", i);
        cmd_ok(db, json);
    }
    cmd_ok(db, "{\"fsync\": 1}");
    /* after the checkpoint / flush: only the log or the journal has these */
    for (int i = 2; i < NDOCS; i += 5) {
        snprintf(json, sizeof json,
                 "{\"update\": \"%s\", \"updates\": [{\"q\": {\"_id\": %d}, \"u\": {\"$set\": "
                 "{\"late\": %d}}}], \"writeConcern\": {\"j\": true}}",
                 i % 3 ? "a" : "b", i, i);
        cmd_ok(db, json);
    }
    cmd_ok(db, "{\"insert\": \"a\", \"documents\": [{\"_id\": \"last\", \"v\": -1, \"s\": \"z\"}], "
               "\"writeConcern\": {\"j\": true}}");
    _exit(0); /* a crash: nothing more is written */
}

static void sb_add(char **s, size_t *len, size_t *cap, const char *t)
{
    size_t n = strlen(t);
    if (*len + n + 2 > *cap) {
        *cap = (*len + n + 2) * 2;
        *s = realloc(*s, *cap);
    }
    memcpy(*s + *len, t, n + 1);
    *len += n;
}

/* Read one collection (hint: NULL for the _id order, else an index) into
 * the string; 0, or the error's code with its message in msg. */
static int read_coll(md_db *db, const char *name, const char *hint, char **s, size_t *len,
                     size_t *cap, long *count, char *msg, size_t msgn)
{
    md_collection *c = md_db_get_collection(db, name);
    bson_t opts = BSON_INITIALIZER, h;
    if (hint) {
        BSON_APPEND_DOCUMENT_BEGIN(&opts, "hint", &h);
        BSON_APPEND_INT32(&h, hint, 1);
        bson_append_document_end(&opts, &h);
    } else {
        BSON_APPEND_DOCUMENT_BEGIN(&opts, "sort", &h);
        BSON_APPEND_INT32(&h, "_id", 1);
        bson_append_document_end(&opts, &h);
    }
    md_cursor *cur = md_collection_find_with_opts(c, NULL, &opts);
    const bson_t *d;
    int code = 0;
    while (md_cursor_next(cur, &d)) {
        if (!bson_validate(d, BSON_VALIDATE_NONE, NULL)) {
            snprintf(msg, msgn, "%s returned invalid BSON", name);
            code = -1;
            break;
        }
        char *j = bson_as_relaxed_extended_json(d, NULL);
        /* NULL: a string that is not UTF-8 (structurally valid BSON; a
         * changed value, not a broken document) */
        sb_add(s, len, cap, j ? j : "<a string that is not UTF-8>");
        sb_add(s, len, cap, "\n");
        bson_free(j);
        (*count)++;
    }
    md_error err;
    if (!code && md_cursor_error(cur, &err)) {
        code = err.code ? err.code : -2;
        snprintf(msg, msgn, "%s", err.message);
    }
    md_cursor_destroy(cur);
    bson_destroy(&opts);
    md_collection_destroy(c);
    return code;
}

/* Both collections by _id, and through their indexes (sorted by the index,
 * compared as a multiset by sorting lines would be overkill: the index
 * order is deterministic for equal data). */
static int take_snap(md_db *db, snap *s, char *msg, size_t msgn)
{
    size_t l1 = 0, c1 = 0, l2 = 0, c2 = 0;
    long n2 = 0;
    memset(s, 0, sizeof *s);
    int code = read_coll(db, "a", NULL, &s->docs, &l1, &c1, &s->count, msg, msgn);
    if (!code)
        code = read_coll(db, "b", NULL, &s->docs, &l1, &c1, &s->count, msg, msgn);
    if (!code)
        code = read_coll(db, "a", "v", &s->byidx, &l2, &c2, &n2, msg, msgn);
    if (!code)
        code = read_coll(db, "b", "s", &s->byidx, &l2, &c2, &n2, msg, msgn);
    if (!s->docs)
        s->docs = strdup("");
    if (!s->byidx)
        s->byidx = strdup("");
    return code;
}

static void snap_free(snap *s)
{
    free(s->docs);
    free(s->byidx);
}

static int validate_coll(md_db *db, const char *name, bool *valid, char *msg, size_t msgn)
{
    char cmd[128];
    bson_t reply;
    md_error err;
    snprintf(cmd, sizeof cmd, "{\"validate\": \"%s\", \"full\": true}", name);
    int rc = md_db_command_json(db, cmd, &reply, &err);
    bson_iter_t it;
    *valid = true;
    int code = 0;
    if (rc) {
        code = err.code;
        snprintf(msg, msgn, "%s", err.message);
    } else if (bson_iter_init_find(&it, &reply, "valid") && !bson_iter_as_bool(&it)) {
        *valid = false;
        char *s = bson_as_relaxed_extended_json(&reply, NULL);
        snprintf(msg, msgn, "%s", s);
        bson_free(s);
    }
    bson_destroy(&reply);
    return code;
}

static int copy_tree(const char *from, const char *to)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -a '%s' '%s'", to, from, to);
    return system(cmd);
}

/* Every regular file under dir except the lock file. */
static int list_files(const char *dir, const char *sub, char (*out)[256], int n, int max)
{
    char path[700];
    snprintf(path, sizeof path, "%s%s%s", dir, *sub ? "/" : "", sub);
    DIR *d = opendir(path);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL && n < max) {
        if (de->d_name[0] == '.' || strcmp(de->d_name, "mongod.lock") == 0)
            continue;
        char rel[300];
        snprintf(rel, sizeof rel, "%.40s%s%.250s", sub, *sub ? "/" : "", de->d_name);
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, rel);
        if (stat(path, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode))
            n = list_files(dir, rel, out, n, max);
        else if (st.st_size > 0)
            snprintf(out[n++], 256, "%.255s", rel);
    }
    if (d)
        closedir(d);
    return n;
}

typedef struct outcome {
    int open_err, read_err, validate_err, no_effect, last_lost, undetected;
} outcome;

/* A code is acceptable with a message naming the file (and an offset for
 * corruption). */
static bool good_error(int code, const char *msg, const char *file)
{
    const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
    if (code == MD_CODE_FILE_STREAM_FAILED || code == MD_CODE_OUT_OF_DISK_SPACE)
        return strstr(msg, "/") != NULL;
    if (code != MD_CODE_DATA_CORRUPTION_DETECTED)
        return false;
    (void)base;
    return strstr(msg, "/") != NULL && strstr(msg, "offset");
}

/* A round that loops on damaged data: say where, then fail. */
static void on_alarm(int sig)
{
    void *b[64];
    int n = backtrace(b, 64);
    fprintf(stderr, "round timed out (a loop on damaged data?); backtrace:\n");
    backtrace_symbols_fd(b, n, 2);
    _exit(3);
}

enum { R_OPEN = 10, R_READ, R_VALIDATE, R_SAME, R_LAST, R_UNDETECTED };

/* The checks of one round, in a child: exits with R_* or 2 on a violation. */
static void check_round(const char *dir, const char *engine, const char *file, const snap *ref,
                        const snap *ref_last)
{
    bool btree = strcmp(engine, "btree") == 0;
    bson_t *o = corrupt_opts(engine);
    md_db *db;
    md_error err;
    char msg[2048];
    if (md_db_open(dir, o, &db, &err) != 0) {
        /* mmapv1: an index's keyFormat changed to one a later build could
         * write cannot be told from that: CannotCreateIndex, naming the
         * catalog record as possibly damaged (an undetected change) */
        if (!btree && err.code == MD_CODE_CANNOT_CREATE_INDEX &&
            strstr(err.message, "key format") && good_error(MD_CODE_DATA_CORRUPTION_DETECTED,
                                                            err.message, file))
            _exit(R_UNDETECTED);
        if (!good_error(err.code, err.message, file)) {
            fprintf(stderr, "BADMSG open: code %d: %s\n", err.code, err.message);
            _exit(2);
        }
        _exit(R_OPEN);
    }
    bool valid_a = true, valid_b = true;
    /* mmapv1: a value changed undetectably in the catalog (a collection's
     * name, an index's key pattern) can make a command fail with an
     * ordinary error (NamespaceNotFound, BadValue for a hint): a MongoDB
     * code and message, counted as an undetected change */
    int vcode = validate_coll(db, "a", &valid_a, msg, sizeof msg);
    bool plain_v = !btree && vcode > 0 && vcode != MD_CODE_DATA_CORRUPTION_DETECTED && msg[0];
    if (vcode && !good_error(vcode, msg, file) && !plain_v) {
        fprintf(stderr, "validate a: code %d: %s\n", vcode, msg);
        _exit(2);
    }
    int vcode2 = validate_coll(db, "b", &valid_b, msg, sizeof msg);
    bool plain_v2 = !btree && vcode2 > 0 && vcode2 != MD_CODE_DATA_CORRUPTION_DETECTED && msg[0];
    if (vcode2 && !good_error(vcode2, msg, file) && !plain_v2) {
        fprintf(stderr, "validate b: code %d: %s\n", vcode2, msg);
        _exit(2);
    }
    if (plain_v || plain_v2) {
        md_db_close(db);
        _exit(R_UNDETECTED);
    }
    bool reported = vcode || vcode2 || !valid_a || !valid_b;
    if (getenv("MINIDOC_CORRUPT_DEBUG"))
        fprintf(stderr, "validate: a %d/%d b %d/%d: %s\n", vcode, valid_a, vcode2, valid_b, msg);
    snap got;
    int rcode = take_snap(db, &got, msg, sizeof msg);
    if (rcode == -1) {
        fprintf(stderr, "%s\n", msg);
        _exit(2);
    }
    /* mmapv1: the same for reads */
    bool plain = !btree && rcode > 0 && msg[0];
    if (rcode && !good_error(rcode, msg, file) && !plain) {
        fprintf(stderr, "read: code %d: %s\n", rcode, msg);
        _exit(2);
    }
    int64_t n = 0;
    md_collection *c = md_db_get_collection(db, "a");
    md_collection_count(c, NULL, NULL, &n, &err);
    bson_t *doc = BCON_NEW("_id", "new", "v", BCON_INT32(5), "s", "new");
    md_collection_insert_one(c, doc, NULL, NULL, &err);
    bson_destroy(doc);
    md_collection_destroy(c);
    md_db_close(db);
    if (rcode)
        _exit(good_error(rcode, msg, file) ? R_READ : R_UNDETECTED);
    bool same = strcmp(got.docs, ref->docs) == 0 && strcmp(got.byidx, ref->byidx) == 0;
    bool last = strcmp(got.docs, ref_last->docs) == 0 && strcmp(got.byidx, ref_last->byidx) == 0;
    if (same)
        _exit(reported ? R_VALIDATE : R_SAME);
    if (last && (strstr(file, "log/") || strstr(file, "journal/")))
        _exit(R_LAST);
    /* btree: checksums catch every flip, and a scan that meets a damaged
     * page fails with the engine's error (q_scan_error): different data
     * without an error is a failure, whatever validate says */
    if (btree) {
        fprintf(stderr, "btree returned different data with no error%s\n--- got\n%.3000s\n"
                        "--- want\n%.3000s\n", reported ? " (validate reported damage)" : "",
                got.docs, ref->docs);
        _exit(2);
    }
    if (reported)
        _exit(R_VALIDATE);
    /* mmapv1: values inside a document may change undetectably, but the
     * indexes must still find the documents the records hold */
    _exit(R_UNDETECTED);
}

/* The engine's messages in round r: "the journal is damaged" only when the
 * flip was in the journal, naming a journal file of the round's directory;
 * a failed checkpoint naming that directory; nothing else. */
static void check_round_log(long *pos, const char *work, const char *file, int r)
{
    static const char jdamage[] = "mmapv1: the journal is damaged before its end, in ";
    static const char *const ckpt[] = {"btree: checkpoint at close failed: ",
                                       "btree: checkpoint failed: ", NULL};
    char *log = t_log_next(pos), jdir[200];
    snprintf(jdir, sizeof jdir, "%s/journal/j._", work);
    cr_assert(!*log || log[strlen(log) - 1] == '\n');
    for (char *l = log, *nl; *l; l = nl + 1) {
        nl = strchr(l, '\n');
        *nl = '\0';
        bool ok;
        if (strncmp(l, jdamage, sizeof jdamage - 1) == 0)
            ok = strstr(l, jdir) && strstr(file, "journal/");
        else
            ok = t_log_lines(l, ckpt, work, NULL, 0) == 1 &&
                 (strncmp(l, ckpt[0], strlen(ckpt[0])) == 0 ||
                  strncmp(l, ckpt[1], strlen(ckpt[1])) == 0) &&
                 strstr(l, work);
        cr_assert(ok, "round %d (a flip in %s): unexpected engine message: %s", r, file, l);
    }
    free(log);
}

static void corrupt_rounds(const char *engine, int rounds)
{
    char base[64], work[80];
    snprintf(base, sizeof base, "/tmp/mdcorrupt.XXXXXX");
    cr_assert(mkdtemp(base));
    snprintf(work, sizeof work, "%s.work", base);
    uint64_t seed = (uint64_t)env_int("MINIDOC_CRASH_SEED", 0);
    if (!seed)
        seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16);
    rng_state = seed | 1;

    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0)
        build(base, engine);
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "building the database failed");

    /* the references: open a pristine copy (replaying the log/journal) */
    snap ref, ref_last;
    char msg[1024];
    bson_t *o = corrupt_opts(engine);
    md_db *db;
    md_error err;
    cr_assert_eq(copy_tree(base, work), 0);
    cr_assert_eq(md_db_open(work, o, &db, &err), 0, "%s", err.message);
    cr_assert_eq(take_snap(db, &ref, msg, sizeof msg), 0, "%s", msg);
    bson_t reply;
    cr_assert_eq(md_db_command_json(db, "{\"delete\": \"a\", \"deletes\": [{\"q\": {\"_id\": "
                                        "\"last\"}, \"limit\": 1}]}",
                                    &reply, &err),
                 0);
    bson_destroy(&reply);
    cr_assert_eq(take_snap(db, &ref_last, msg, sizeof msg), 0, "%s", msg);
    md_db_close(db);
    bson_destroy(o);
    cr_assert_gt(ref.count, 50);

    char files[64][256];
    int nf = list_files(base, "", files, 0, 64);
    cr_assert_gt(nf, 3);
    outcome out = {0};
    long logpos = 0;
    t_log_begin();
    int only = env_int("MINIDOC_CORRUPT_ROUND", -1); /* rerun one round of a seed */
    for (int r = 0; r < rounds; r++) {
        if (only >= 0 && r != only)
            continue;
        /* each round has its own stream: MINIDOC_CORRUPT_ROUND replays one */
        rng_state = (seed + (uint64_t)r * 0x9e3779b97f4a7c15ull) | 1;
        for (int i = 0; i < 8; i++)
            rnd();
        cr_assert_eq(copy_tree(base, work), 0);
        const char *file = files[rnd_int(nf)];
        char path[512];
        snprintf(path, sizeof path, "%s/%s", work, file);
        struct stat sb;
        cr_assert_eq(stat(path, &sb), 0);
        /* a third of the flips in the first 8 KB (headers), a third
         * anywhere, a third on the next nonzero byte after a random offset
         * (the files are mostly free space) */
        int64_t size = sb.st_size, lim = rnd_int(3) == 0 && size > 8192 ? 8192 : size;
        int64_t at = (int64_t)(rnd() % (uint64_t)lim);
        int fd = open(path, O_RDWR);
        cr_assert_geq(fd, 0);
        if (rnd_int(3) == 0) {
            uint8_t *img = malloc((size_t)size);
            cr_assert(img && pread(fd, img, (size_t)size, 0) == size);
            for (int64_t k = 0; k < size && img[at] == 0; k++)
                at = (at + 1) % size;
            free(img);
        }
        int run = rnd_int(3) == 0 ? 2 + rnd_int(15) : 1;
        if (at + run > size)
            run = (int)(size - at);
        uint8_t b[16];
        cr_assert_eq(pread(fd, b, (size_t)run, at), run);
        for (int i = 0; i < run; i++)
            b[i] ^= (uint8_t)(1 + rnd_int(255));
        cr_assert_eq(pwrite(fd, b, (size_t)run, at), run);
        close(fd);

        fflush(NULL);
        pid = fork();
        cr_assert(pid >= 0);
        if (pid == 0) {
            signal(SIGALRM, on_alarm);
            alarm(60); /* a loop on damaged data is a failure too */
            check_round(work, engine, path, &ref, &ref_last);
            _exit(2);
        }
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        check_round_log(&logpos, work, file, r);
        if (!(WIFEXITED(st) && WEXITSTATUS(st) >= R_OPEN) && getenv("MINIDOC_CORRUPT_KEEPGOING")) {
            fprintf(stderr, "VIOLATION %s round %d: %d byte(s) flipped in %s at offset %lld: %s %d\n",
                    engine, r, run, file, (long long)at, WIFEXITED(st) ? "exit" : "signal",
                    WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
            continue;
        }
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) >= R_OPEN,
                  "%s round %d seed %llu (MINIDOC_CRASH_SEED=%llu MINIDOC_CORRUPT_ROUND=%d "
                  "replays it): %d byte(s) flipped in %s at offset %lld: %s %d (see stderr)",
                  engine, r, (unsigned long long)seed, (unsigned long long)seed, r, run, file,
                  (long long)at,
                  WIFEXITED(st) ? "exit" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
        switch (WEXITSTATUS(st)) {
        case R_OPEN: out.open_err++; break;
        case R_READ: out.read_err++; break;
        case R_VALIDATE: out.validate_err++; break;
        case R_SAME: out.no_effect++; break;
        case R_LAST: out.last_lost++; break;
        case R_UNDETECTED: out.undetected++; break;
        }
    }
    free(t_log_end());
    snap_free(&ref);
    snap_free(&ref_last);
    nftw(base, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    nftw(work, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    cr_log_info("corrupt (%s): %d rounds over %d files, seed %llu: open refused %d, read error "
                "%d, validate reported %d, no effect %d, last log/journal write lost %d, "
                "undetected value change (mmapv1) %d",
                engine, rounds, nf, (unsigned long long)seed, out.open_err, out.read_err,
                out.validate_err, out.no_effect, out.last_lost, out.undetected);
}

Test(corrupt, mmapv1_flipped_bytes, .timeout = 600)
{
    corrupt_rounds("mmapv1", env_int("MINIDOC_CORRUPT_ROUNDS", 300));
}

Test(corrupt, btree_flipped_bytes, .timeout = 600)
{
    corrupt_rounds("btree", env_int("MINIDOC_CORRUPT_ROUNDS", 300));
}

/* Build the database of the fuzz in dir (a crashed builder: the log or
 * the journal holds the writes after the checkpoint). */
static void build_crashed(const char *dir, const char *engine)
{
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0)
        build(dir, engine);
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "building the database failed");
}

static void flip_at(const char *path, int64_t at)
{
    int fd = open(path, O_RDWR);
    uint8_t b;
    cr_assert_geq(fd, 0, "%s", path);
    cr_assert_eq(pread(fd, &b, 1, at), 1);
    b ^= 0x5a;
    cr_assert_eq(pwrite(fd, &b, 1, at), 1);
    close(fd);
}

/* The offsets of the records of a btree log file (after its header). */
static int log_records(const char *path, int64_t *offs, int max)
{
    int fd = open(path, O_RDONLY), n = 0;
    cr_assert_geq(fd, 0, "%s", path);
    uint32_t len;
    for (int64_t at = 32; n < max && pread(fd, &len, 4, at) == 4 && len >= 24; at += len)
        offs[n++] = at;
    close(fd);
    return n;
}

/* A damaged record in the middle of the btree log: open refuses, naming
 * the log file and the offset; damage to the last record loses only the
 * last commit (it cannot be told from a torn write). */
Test(corrupt, btree_log_damage_is_reported)
{
    char dir[64], path[200];
    snprintf(dir, sizeof dir, "/tmp/mdcorrupt.XXXXXX");
    cr_assert(mkdtemp(dir));
    build_crashed(dir, "btree");
    snprintf(path, sizeof path, "%s/log/btlog.0000000001", dir);
    int64_t offs[4096];
    int n = log_records(path, offs, 4096);
    cr_assert_gt(n, 10, "%d log records", n);
    char save[80];
    snprintf(save, sizeof save, "%s.save", dir);
    cr_assert_eq(copy_tree(dir, save), 0);

    flip_at(path, offs[n - 3] + 30);
    bson_t *o = corrupt_opts("btree");
    md_db *db;
    md_error err;
    cr_assert_neq(md_db_open(dir, o, &db, &err), 0);
    cr_assert_eq(err.code, MD_CODE_DATA_CORRUPTION_DETECTED, "%d: %s", err.code, err.message);
    char want[64];
    snprintf(want, sizeof want, "offset %lld", (long long)offs[n - 3]);
    cr_assert(strstr(err.message, "btlog.0000000001") && strstr(err.message, want), "%s",
              err.message);

    cr_assert_eq(copy_tree(save, dir), 0);
    flip_at(path, offs[n - 1] + 30);
    cr_assert_eq(md_db_open(dir, o, &db, &err), 0, "%s", err.message);
    md_collection *c = md_db_get_collection(db, "a");
    bson_t *q = BCON_NEW("_id", "last");
    int64_t cnt = -1;
    cr_assert_eq(md_collection_count(c, q, NULL, &cnt, &err), 0);
    cr_assert_eq(cnt, 0, "the commit in the damaged last record was replayed");
    bson_destroy(q);
    md_collection_destroy(c);
    md_db_close(db);
    bson_destroy(o);
    nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    nftw(save, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* A damaged section in the middle of the mmapv1 journal: open replays up
 * to it and validate reports it, naming the journal file and the offset. */
Test(corrupt, mmapv1_journal_damage_is_reported)
{
    char dir[64], path[200];
    snprintf(dir, sizeof dir, "/tmp/mdcorrupt.XXXXXX");
    cr_assert(mkdtemp(dir));
    build_crashed(dir, "mmapv1");
    int64_t at = 0;
    struct stat st;
    for (int no = 0; no < 8 && !at; no++) { /* the file with several sections */
        snprintf(path, sizeof path, "%s/journal/j._%d", dir, no);
        if (stat(path, &st) == 0 && st.st_size >= 4 * 8192)
            at = 8192;
    }
    cr_assert_gt(at, 0, "no journal file with sections");
    flip_at(path, at + 40);
    bson_t *o = corrupt_opts("mmapv1");
    md_db *db;
    md_error err;
    t_log_begin();
    cr_assert_eq(md_db_open(dir, o, &db, &err), 0, "%s", err.message);
    char *log = t_log_end(), said[300];
    snprintf(said, sizeof said, "mmapv1: the journal is damaged before its end, in %s at offset %lld: ",
             path, (long long)at);
    cr_assert(strncmp(log, said, strlen(said)) == 0 && t_log_count(log, "") == 1,
              "open says where the journal is damaged, once: %s", log);
    free(log);
    bool valid = true;
    char msg[2048];
    cr_assert_eq(validate_coll(db, "a", &valid, msg, sizeof msg), 0);
    cr_assert_not(valid, "%s", msg);
    char want[300];
    snprintf(want, sizeof want, "%s at offset %lld", strrchr(path, '/') + 1, (long long)at);
    cr_assert(strstr(msg, want), "validate does not name %s: %s", want, msg);
    md_db_close(db);
    bson_destroy(o);
    nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* Write len bytes at offset k of every occurrence of pat in data file 0
 * (a catalog field: the live record and any deleted earlier version of
 * it); returns the offset of the last write. */
static int64_t patch_data_file(const char *dir, const uint8_t *pat, size_t pn, size_t k,
                               const void *bytes, size_t len)
{
    char path[200];
    snprintf(path, sizeof path, "%s/test.0", dir);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    uint8_t *img = malloc((size_t)st.st_size);
    int fd = open(path, O_RDWR);
    cr_assert(img && fd >= 0 && pread(fd, img, (size_t)st.st_size, 0) == st.st_size);
    int64_t last = -1;
    for (int64_t at = 0; at + (int64_t)pn <= st.st_size; at++)
        if (memcmp(img + at, pat, pn) == 0) {
            last = at + (int64_t)k;
            cr_assert_eq(pwrite(fd, bytes, len, last), (ssize_t)len);
        }
    close(fd);
    free(img);
    cr_assert_geq(last, 0, "pattern not found in %s", path);
    return last;
}

/* The bytes of a BSON element: type, field name, then val (vn bytes). */
static size_t bson_elem(uint8_t *out, uint8_t type, const char *field, const void *val,
                        size_t vn)
{
    size_t fn = strlen(field) + 1;
    out[0] = type;
    memcpy(out + 1, field, fn);
    memcpy(out + 1 + fn, val, vn);
    return 1 + fn + vn;
}

/* Flip byte k of the string of every catalog field `field: name`. */
static int64_t flip_catalog_string(const char *dir, const char *field, const char *name, size_t k)
{
    uint8_t val[64], pat[96];
    uint32_t sl = (uint32_t)strlen(name) + 1;
    memcpy(val, &sl, 4);
    memcpy(val + 4, name, sl);
    size_t pn = bson_elem(pat, BSON_TYPE_UTF8, field, val, 4 + sl);
    size_t at = pn - sl + k;
    uint8_t b = pat[at] ^ 0x5a;
    return patch_data_file(dir, pat, pn, at, &b, 1);
}

/* A small clean mmapv1 database: collection a with the index v_1. */
static bson_t *catalog_db(char *dir, size_t dirn)
{
    snprintf(dir, dirn, "/tmp/mdcorrupt.XXXXXX");
    cr_assert(mkdtemp(dir));
    bson_t *o = corrupt_opts("mmapv1");
    md_db *db;
    md_error err;
    cr_assert_eq(md_db_open(dir, o, &db, &err), 0, "%s", err.message);
    cmd_ok(db, "{\"createIndexes\": \"a\", \"indexes\": [{\"key\": {\"v\": 1}, \"name\": \"v_1\"}]}");
    cmd_ok(db, "{\"insert\": \"a\", \"documents\": [{\"_id\": 1, \"v\": 1}, {\"_id\": 2, \"v\": 2}]}");
    md_db_close(db);
    return o;
}

/* Open fails with code, naming the catalog record of data file 0 that
 * holds offset at, and saying want. */
static void open_names_record(const char *dir, bson_t *o, int code, int64_t at, const char *want)
{
    md_db *db;
    md_error err;
    char path[200];
    cr_assert_neq(md_db_open(dir, o, &db, &err), 0, "open accepted a damaged catalog");
    cr_assert_eq(err.code, code, "%d: %s", err.code, err.message);
    snprintf(path, sizeof path, "%s/test.0 offset 0x", dir);
    const char *p = strstr(err.message, path);
    cr_assert(p, "the message does not name %s: %s", path, err.message);
    unsigned rec = 0;
    cr_assert_eq(sscanf(p + strlen(path), "%x", &rec), 1, "%s", err.message);
    /* the named record is the one holding the damaged byte */
    snprintf(path, sizeof path, "%s/test.0", dir);
    int fd = open(path, O_RDONLY);
    int32_t len = 0;
    cr_assert(fd >= 0 && pread(fd, &len, 4, rec) == 4);
    close(fd);
    cr_assert(at > (int64_t)rec + 16 && at < (int64_t)rec + len,
              "the record at 0x%x (%d bytes) does not hold offset 0x%llx: %s", rec, len,
              (unsigned long long)at, err.message);
    cr_assert(strstr(err.message, want), "want \"%s\" in: %s", want, err.message);
}

/* A catalog entry that names a collection or an index the .ns file does
 * not hold (one flipped byte in the entry's key, the collection's
 * namespace, or in an index's ident): open refuses with
 * DataCorruptionDetected naming the catalog record that holds the name --
 * not NamespaceNotFound / IndexNotFound, which say nothing of damage. */
static void catalog_name_case(const char *field, const char *name, size_t k)
{
    char dir[64], want[64];
    bson_t *o = catalog_db(dir, sizeof dir);
    int64_t at = flip_catalog_string(dir, field, name, k);
    snprintf(want, sizeof want, "%s\"", name + k + 1); /* the name after the flipped byte */
    open_names_record(dir, o, MD_CODE_DATA_CORRUPTION_DETECTED, at, want);
    open_names_record(dir, o, MD_CODE_DATA_CORRUPTION_DETECTED, at, "test.ns");
    bson_destroy(o);
    nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

Test(corrupt, mmapv1_catalog_index_ident_damage_is_reported)
{
    catalog_name_case("ident", "test.a.$v_1", 0); /* the first byte, as found by the fuzz */
}

/* The key "test.a" becomes "test.;": still a name of this database, so a
 * collection to open, which test.ns does not hold.  (A flip that leaves
 * no "test." prefix makes the entry no collection of this database: the
 * collection is gone without an error, an undetected change.) */
Test(corrupt, mmapv1_catalog_collection_key_damage_is_reported)
{
    catalog_name_case("k", "test.a", 5);
}

/* An index entry whose field name "ident" is damaged: the entry has no
 * ident; open names the catalog record (query/ checks the entry, the
 * engine says where it is stored). */
Test(corrupt, mmapv1_catalog_index_entry_damage_is_reported)
{
    char dir[64];
    bson_t *o = catalog_db(dir, sizeof dir);
    uint8_t val[32], pat[64];
    uint32_t sl = 12;
    memcpy(val, &sl, 4);
    memcpy(val + 4, "test.a.$v_1", 12);
    size_t pn = bson_elem(pat, BSON_TYPE_UTF8, "ident", val, 16);
    uint8_t b = 'i' ^ 0x20; /* "Ident" */
    int64_t at = patch_data_file(dir, pat, pn, 1, &b, 1);
    open_names_record(dir, o, MD_CODE_DATA_CORRUPTION_DETECTED, at, "index without ident");
    bson_destroy(o);
    nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* keyFormat: a value no minidoc writes is damage; one a later build could
 * write is CannotCreateIndex, which on mmapv1 (no checksum) also names the
 * catalog record as possibly damaged. */
Test(corrupt, mmapv1_catalog_key_format_damage)
{
    char dir[64];
    bson_t *o = catalog_db(dir, sizeof dir);
    char save[80];
    snprintf(save, sizeof save, "%s.save", dir);
    cr_assert_eq(copy_tree(dir, save), 0);
    int32_t two = 2, bad = 0x10000002, later = 7;
    uint8_t pat[32];
    size_t pn = bson_elem(pat, BSON_TYPE_INT32, "keyFormat", &two, 4);
    int64_t at = patch_data_file(dir, pat, pn, pn - 4, &bad, 4);
    open_names_record(dir, o, MD_CODE_DATA_CORRUPTION_DETECTED, at,
                      "has key format 268435458, which no minidoc writes");

    cr_assert_eq(copy_tree(save, dir), 0);
    at = patch_data_file(dir, pat, pn, pn - 4, &later, 4);
    open_names_record(dir, o, MD_CODE_CANNOT_CREATE_INDEX, at, "(a newer minidoc wrote it, or "
                                                               "the catalog record at ");
    bson_destroy(o);
    nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    nftw(save, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}
