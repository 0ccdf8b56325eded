/*
 * crash_util.h -- the crash harness shared by tests/crash/test_crash.c
 * (SIGKILLed writers) and tests/faults/test_powerloss.c (simulated power
 * losses): the random write stream, the side file of acknowledged writes,
 * the model of the collection, and the checks after a reopen.
 *
 * A round forks a writer that opens the database and runs a random stream
 * of writes through md_db_command: inserts, updates that grow the document
 * (forcing moves), deletes and the creation of an index, most with
 * writeConcern {j: true} and some without.  Before each write it appends
 * "B n <op>" to a side file; once the database acknowledged the write it
 * appends "A n" and fsyncs the side file.  The writer is stopped (by
 * default SIGKILL at a random moment; crash_hooks can replace that), and
 * the parent reopens the database and checks:
 *
 *   - open succeeds (the journal or log replays) and validate {full: true}
 *     is clean;
 *   - the documents and the index set equal the model after some prefix
 *     of the operations, at least up to the last j:true write that was
 *     acknowledged and at most up to the one in flight: no acknowledged
 *     journaled write is lost, nothing that was never written appears,
 *     and commits are never torn or reordered;
 *   - the index on v agrees with the records (every document is found
 *     through it, and it holds nothing else).
 *
 * Without the journal, mmapv1 must only open and say the files are suspect;
 * btree without its log must come back clean at its last checkpoint: some
 * prefix of the operations, with no lower bound (j:true waits for nothing).
 */
#ifndef CRASH_UTIL_H
#define CRASH_UTIL_H

#define CU_FN static __attribute__((unused))

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "minidoc.h"

#define NIDS 64      /* _id values 0 .. NIDS-1 */
#define MAXPAD 6000  /* largest pad string */
#define MAXOPS 20000 /* per round */

typedef struct mdoc {
    bool live;
    int64_t v;
    int pad;
} mdoc;

typedef struct model {
    mdoc d[NIDS];
    bool index;
} model;

/* One operation: 'I' insert, 'U' update, 'D' delete, 'X' create index. */
typedef struct op {
    char kind;
    int id, pad;
    int64_t v;
    bool j;
} op;

static uint64_t rng_state __attribute__((unused));

CU_FN uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

CU_FN int rnd_int(int n)
{
    return (int)(rnd() % (uint64_t)n);
}

CU_FN int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

CU_FN bson_t *open_opts(const char *engine, bool journal)
{
    bson_t *o = bson_new(), sub;
    BSON_APPEND_UTF8(o, "engine", engine);
    if (strcmp(engine, "btree") == 0) {
        BSON_APPEND_DOCUMENT_BEGIN(o, "btree", &sub);
        BSON_APPEND_BOOL(&sub, "log", journal);
        BSON_APPEND_INT32(&sub, "commitIntervalMs", 20);
        BSON_APPEND_INT32(&sub, "checkpointIntervalMs", 100);
        BSON_APPEND_INT64(&sub, "logFileSize", 65536); /* many btlog files */
        BSON_APPEND_INT64(&sub, "cacheSize", 256 * 1024); /* evictions */
        bson_append_document_end(o, &sub);
        return o;
    }
    BSON_APPEND_DOCUMENT_BEGIN(o, "mmapv1", &sub);
    BSON_APPEND_INT64(&sub, "firstFileSize", 256 * 1024);
    BSON_APPEND_INT64(&sub, "nsSize", 65536);
    BSON_APPEND_BOOL(&sub, "journal", journal);
    BSON_APPEND_BOOL(&sub, "debugCheckViews", true);
    BSON_APPEND_INT32(&sub, "journalCommitInterval", 20);
    BSON_APPEND_INT32(&sub, "syncdelay", 1);
    BSON_APPEND_INT64(&sub, "journalFileSize", 65536); /* many j._N files */
    bson_append_document_end(o, &sub);
    return o;
}

CU_FN void apply(model *m, const op *o)
{
    switch (o->kind) {
    case 'I':
    case 'U':
        m->d[o->id] = (mdoc){true, o->v, o->pad};
        break;
    case 'D':
        m->d[o->id].live = false;
        break;
    case 'X':
        m->index = true;
        break;
    }
}

CU_FN void make_doc(bson_t *b, int id, int64_t v, int pad)
{
    static char s[MAXPAD + 1];
    memset(s, 'a' + id % 26, (size_t)pad);
    s[pad] = '\0';
    bson_init(b);
    BSON_APPEND_INT32(b, "_id", id);
    BSON_APPEND_INT64(b, "v", v);
    BSON_APPEND_UTF8(b, "pad", s);
}

CU_FN void append_wc(bson_t *cmd, bool j)
{
    bson_t wc;
    if (!j)
        return;
    BSON_APPEND_DOCUMENT_BEGIN(cmd, "writeConcern", &wc);
    BSON_APPEND_BOOL(&wc, "j", true);
    bson_append_document_end(cmd, &wc);
}

/* Run cmd; 0 when it succeeded with no write error, else MD_ERROR or the
 * command's code, with *code and msg (if given) the MongoDB code and
 * message of the command error or of the first writeError. */
CU_FN int command_code(md_db *db, const bson_t *cmd, int *code, char *msg, size_t msgn)
{
    bson_t reply;
    md_error err;
    int rc = md_db_command(db, cmd, &reply, &err);
    bson_iter_t it, we, e;
    if (code)
        *code = rc ? err.code : 0;
    if (msg && msgn)
        snprintf(msg, msgn, "%s", rc ? err.message : "");
    if (rc == 0 && bson_iter_init_find(&it, &reply, "writeErrors")) {
        rc = MD_ERROR;
        if (bson_iter_recurse(&it, &we) && bson_iter_next(&we)) {
            if (code && bson_iter_recurse(&we, &e) && bson_iter_find(&e, "code"))
                *code = (int)bson_iter_as_int64(&e);
            if (msg && msgn && bson_iter_recurse(&we, &e) && bson_iter_find(&e, "errmsg"))
                snprintf(msg, msgn, "%s", bson_iter_utf8(&e, NULL));
        }
    }
    bson_destroy(&reply);
    return rc;
}

/* Run o against db; 0 when acknowledged with no write error.  Otherwise
 * *code and msg (if given) receive the MongoDB code and message of the
 * command error or of the first writeError. */
CU_FN int run_op_code(md_db *db, const op *o, int *code, char *msg, size_t msgn)
{
    bson_t cmd = BSON_INITIALIZER, arr, el, q, u, set, doc, key;
    switch (o->kind) {
    case 'I':
        BSON_APPEND_UTF8(&cmd, "insert", "c");
        BSON_APPEND_ARRAY_BEGIN(&cmd, "documents", &arr);
        make_doc(&doc, o->id, o->v, o->pad);
        BSON_APPEND_DOCUMENT(&arr, "0", &doc);
        bson_destroy(&doc);
        bson_append_array_end(&cmd, &arr);
        break;
    case 'U':
        BSON_APPEND_UTF8(&cmd, "update", "c");
        BSON_APPEND_ARRAY_BEGIN(&cmd, "updates", &arr);
        BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &el);
        BSON_APPEND_DOCUMENT_BEGIN(&el, "q", &q);
        BSON_APPEND_INT32(&q, "_id", o->id);
        bson_append_document_end(&el, &q);
        make_doc(&doc, o->id, o->v, o->pad);
        BSON_APPEND_DOCUMENT_BEGIN(&el, "u", &u);
        BSON_APPEND_DOCUMENT_BEGIN(&u, "$set", &set);
        bson_iter_t it;
        bson_iter_init(&it, &doc);
        while (bson_iter_next(&it))
            if (strcmp(bson_iter_key(&it), "_id") != 0)
                bson_append_iter(&set, NULL, 0, &it);
        bson_append_document_end(&u, &set);
        bson_append_document_end(&el, &u);
        bson_destroy(&doc);
        bson_append_document_end(&arr, &el);
        bson_append_array_end(&cmd, &arr);
        break;
    case 'D':
        BSON_APPEND_UTF8(&cmd, "delete", "c");
        BSON_APPEND_ARRAY_BEGIN(&cmd, "deletes", &arr);
        BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &el);
        BSON_APPEND_DOCUMENT_BEGIN(&el, "q", &q);
        BSON_APPEND_INT32(&q, "_id", o->id);
        bson_append_document_end(&el, &q);
        BSON_APPEND_INT32(&el, "limit", 1);
        bson_append_document_end(&arr, &el);
        bson_append_array_end(&cmd, &arr);
        break;
    case 'X':
        BSON_APPEND_UTF8(&cmd, "createIndexes", "c");
        BSON_APPEND_ARRAY_BEGIN(&cmd, "indexes", &arr);
        BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &el);
        BSON_APPEND_DOCUMENT_BEGIN(&el, "key", &key);
        BSON_APPEND_INT32(&key, "v", 1);
        bson_append_document_end(&el, &key);
        BSON_APPEND_UTF8(&el, "name", "v_1");
        bson_append_document_end(&arr, &el);
        bson_append_array_end(&cmd, &arr);
        break;
    }
    append_wc(&cmd, o->j);
    int rc = command_code(db, &cmd, code, msg, msgn);
    bson_destroy(&cmd);
    return rc;
}

CU_FN int run_op(md_db *db, const op *o)
{
    return run_op_code(db, o, NULL, NULL, 0);
}

/* Read the collection into m (index: whether v_1 exists). */
CU_FN void load(md_db *db, model *m)
{
    memset(m, 0, sizeof *m);
    md_collection *c = md_db_get_collection(db, "c");
    md_cursor *cur = md_collection_find_with_opts(c, NULL, NULL);
    const bson_t *d;
    while (md_cursor_next(cur, &d)) {
        bson_iter_t it;
        cr_assert(bson_iter_init_find(&it, d, "_id"));
        int id = bson_iter_as_int64(&it) & 0xffff;
        cr_assert(id < NIDS, "unexpected _id %d", id);
        cr_assert_not(m->d[id].live, "_id %d twice", id);
        cr_assert(bson_iter_init_find(&it, d, "v"));
        int64_t v = bson_iter_as_int64(&it);
        uint32_t len = 0;
        cr_assert(bson_iter_init_find(&it, d, "pad"));
        const char *s = bson_iter_utf8(&it, &len);
        for (uint32_t i = 0; i < len; i++)
            cr_assert_eq(s[i], 'a' + id % 26, "_id %d: pad damaged", id);
        m->d[id] = (mdoc){true, v, (int)len};
    }
    md_error err;
    cr_assert_not(md_cursor_error(cur, &err), "find: %s", err.message);
    md_cursor_destroy(cur);
    bson_t reply;
    int rc = md_db_command_json(db, "{\"listIndexes\": \"c\"}", &reply, &err);
    if (rc == 0) {
        char *s = bson_as_relaxed_extended_json(&reply, NULL);
        m->index = strstr(s, "\"v_1\"") != NULL;
        bson_free(s);
    }
    bson_destroy(&reply);
    md_collection_destroy(c);
}

/* Read every document (errors allowed): for files known to be suspect. */
CU_FN void scan_all(md_db *db)
{
    md_collection *c = md_db_get_collection(db, "c");
    md_cursor *cur = md_collection_find_with_opts(c, NULL, NULL);
    const bson_t *d;
    while (md_cursor_next(cur, &d))
        cr_assert(bson_validate(d, BSON_VALIDATE_NONE, NULL));
    md_cursor_destroy(cur);
    md_collection_destroy(c);
}

CU_FN bool model_eq(const model *a, const model *b)
{
    if (a->index != b->index)
        return false;
    for (int i = 0; i < NIDS; i++) {
        if (a->d[i].live != b->d[i].live)
            return false;
        if (a->d[i].live && (a->d[i].v != b->d[i].v || a->d[i].pad != b->d[i].pad))
            return false;
    }
    return true;
}

/* Choose the next operation from the writer's view of the database. */
CU_FN op next_op(const model *m, int64_t v)
{
    op o = {.v = v, .j = rnd_int(4) != 0};
    int id = rnd_int(NIDS);
    if (!m->index && rnd_int(200) == 0) {
        o.kind = 'X';
        o.j = true;
    } else if (!m->d[id].live) {
        o.kind = 'I';
        o.id = id;
        o.pad = 10 + rnd_int(300);
    } else if (rnd_int(4) == 0) {
        o.kind = 'D';
        o.id = id;
    } else {
        o.kind = 'U';
        o.id = id;
        int grow = rnd_int(3) == 0 ? 0 : 50 + rnd_int(600);
        o.pad = m->d[id].pad + grow > MAXPAD ? 10 + rnd_int(100) : m->d[id].pad + grow;
    }
    return o;
}

CU_FN void side_write(int fd, const char *line)
{
    size_t n = strlen(line);
    if (write(fd, line, n) != (ssize_t)n)
        _exit(20);
}

/* The writer: runs until killed. */
CU_FN void writer(const char *dir, const char *side, int round, const char *engine,
                   bool journal)
{
    md_db *db;
    md_error err;
    bson_t *o = open_opts(engine, journal);
    if (md_db_open(dir, o, &db, &err) != 0) {
        fprintf(stderr, "writer: open: %s\n", err.message);
        _exit(10);
    }
    model m;
    load(db, &m);
    int fd = open(side, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
    if (fd < 0)
        _exit(11);
    char line[128];
    for (int n = 0; n < MAXOPS; n++) {
        op x = next_op(&m, (int64_t)round * 1000000 + n);
        snprintf(line, sizeof line, "B %d %c %d %d %lld %d\n", n, x.kind, x.id, x.pad,
                 (long long)x.v, x.j);
        side_write(fd, line);
        if (run_op(db, &x) != 0) {
            fprintf(stderr, "writer: op %d (%c) failed\n", n, x.kind);
            _exit(12);
        }
        apply(&m, &x);
        snprintf(line, sizeof line, "A %d\n", n);
        side_write(fd, line);
        if (fsync(fd) != 0)
            _exit(13);
    }
    md_db_close(db);
    _exit(0);
}

typedef struct history {
    op *ops;
    int n;         /* operations begun */
    int acked;     /* operations acknowledged: ops[0 .. acked) */
    int last_j;    /* index of the last acknowledged j:true op, or -1 */
} history;

CU_FN void read_side(const char *side, history *h)
{
    FILE *f = fopen(side, "r");
    cr_assert(f, "side file %s", side);
    h->ops = calloc(MAXOPS, sizeof *h->ops);
    h->n = h->acked = 0;
    h->last_j = -1;
    char line[128];
    while (fgets(line, sizeof line, f)) {
        int n, id, pad, j;
        long long v;
        char kind;
        if (sscanf(line, "B %d %c %d %d %lld %d", &n, &kind, &id, &pad, &v, &j) == 6) {
            cr_assert_eq(n, h->n);
            h->ops[h->n++] = (op){kind, id, pad, v, j != 0};
        } else if (sscanf(line, "A %d", &n) == 1) {
            cr_assert_eq(n, h->acked);
            if (h->ops[n].j)
                h->last_j = n;
            h->acked++;
        }
    }
    fclose(f);
}

/* validate {full: true} must be clean (or, mmapv1 without the journal,
 * must not crash and must say the files are suspect, unless the writer got
 * through its whole stream and may have closed the database cleanly before
 * the cut: `finished`). */
CU_FN void check_validate(md_db *db, bool journal, bool finished, int round, uint64_t seed)
{
    bson_t reply;
    md_error err;
    int rc = md_db_command_json(db, "{\"validate\": \"c\", \"full\": true}", &reply, &err);
    if (rc != 0 && err.code == 26) { /* killed before the collection existed */
        bson_destroy(&reply);
        return;
    }
    char *s = bson_as_relaxed_extended_json(&reply, NULL);
    bson_iter_t it;
    bool valid = rc == 0 && bson_iter_init_find(&it, &reply, "valid") && bson_iter_as_bool(&it);
    if (journal)
        cr_assert(valid, "round %d seed %llu: validate: %s", round, (unsigned long long)seed, s);
    else if (!finished || !valid)
        cr_assert(!valid && strstr(s, "not shut down cleanly"),
                  "round %d: validate without journal: %s", round, s);
    bson_free(s);
    bson_destroy(&reply);
}

/* Every live document is found through v_1 and the index holds nothing
 * else. */
CU_FN void check_index(md_db *db, const model *m, int round)
{
    md_collection *c = md_db_get_collection(db, "c");
    int live = 0;
    for (int i = 0; i < NIDS; i++) {
        if (!m->d[i].live)
            continue;
        live++;
        bson_t f = BSON_INITIALIZER, opts = BSON_INITIALIZER, hint;
        BSON_APPEND_INT64(&f, "v", m->d[i].v);
        BSON_APPEND_DOCUMENT_BEGIN(&opts, "hint", &hint);
        BSON_APPEND_INT32(&hint, "v", 1);
        bson_append_document_end(&opts, &hint);
        md_cursor *cur = md_collection_find_with_opts(c, &f, &opts);
        const bson_t *d;
        int n = 0;
        while (md_cursor_next(cur, &d)) {
            bson_iter_t it;
            cr_assert(bson_iter_init_find(&it, d, "_id"));
            cr_assert_eq(bson_iter_as_int64(&it), i, "round %d: v_1 finds the wrong doc", round);
            n++;
        }
        md_error err;
        cr_assert_not(md_cursor_error(cur, &err), "round %d: %s", round, err.message);
        cr_assert_eq(n, 1, "round %d: _id %d found %d times through v_1", round, i, n);
        md_cursor_destroy(cur);
        bson_destroy(&f);
        bson_destroy(&opts);
    }
    bson_t opts = BSON_INITIALIZER, hint;
    BSON_APPEND_DOCUMENT_BEGIN(&opts, "hint", &hint);
    BSON_APPEND_INT32(&hint, "v", 1);
    bson_append_document_end(&opts, &hint);
    md_cursor *cur = md_collection_find_with_opts(c, NULL, &opts);
    const bson_t *d;
    int n = 0;
    while (md_cursor_next(cur, &d))
        n++;
    md_cursor_destroy(cur);
    bson_destroy(&opts);
    cr_assert_eq(n, live, "round %d: a full v_1 scan gives %d docs, %d live", round, n, live);
    md_collection_destroy(c);
}

CU_FN int env_int(const char *name, int dflt)
{
    const char *s = getenv(name);
    return s && *s ? atoi(s) : dflt;
}

CU_FN void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/*
 * How a round stops its writer.  With no hooks (NULL) the parent SIGKILLs
 * it 30..430 ms after the fork.  Otherwise prepare() runs in the parent
 * before the fork, child() in the writer before it opens the database, and
 * reap() in the parent: it must wait for the writer and leave in `dir` the
 * directory as the crash left it.
 */
typedef struct crash_hooks {
    const char *name;
    void (*prepare)(const char *dir, int round);
    void (*child)(const char *dir, int round, uint64_t seed);
    void (*reap)(pid_t pid, const char *dir, int round, uint64_t seed);
} crash_hooks;

/*
 * Run `rounds` kill/recover rounds on one directory.  The state found after
 * each recovery is the base the next writer starts from.
 */
CU_FN void crash_rounds_with(int rounds, const char *engine, bool journal,
                             const crash_hooks *hooks)
{
    bool btree = strcmp(engine, "btree") == 0;
    char dir[64], side[128];
    snprintf(dir, sizeof dir, "/tmp/mdcrash.XXXXXX");
    cr_assert(mkdtemp(dir));
    snprintf(side, sizeof side, "%s.side", dir);
    uint64_t seed = (uint64_t)env_int("MINIDOC_CRASH_SEED", 0);
    if (!seed)
        seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16);
    rng_state = seed | 1;
    bson_t *o = open_opts(engine, journal);
    model base;
    memset(&base, 0, sizeof base);
    int kills = 0, refused = 0;
    int64_t ops = 0, acked = 0, lost = 0, index_checks = 0;
    for (int r = 0; r < rounds; r++) {
        fflush(NULL);
        uint64_t child_seed = rnd();
        /* a writer stopped before it truncates the side file must not
         * leave the last round's there */
        int sfd = open(side, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        cr_assert_geq(sfd, 0);
        close(sfd);
        if (hooks)
            hooks->prepare(dir, r);
        pid_t pid = fork();
        cr_assert(pid >= 0);
        if (pid == 0) {
            rng_state = child_seed | 1;
            if (hooks)
                hooks->child(dir, r, child_seed);
            writer(dir, side, r + 1, engine, journal);
        }
        if (hooks) {
            hooks->reap(pid, dir, r, seed);
        } else {
            sleep_ms(30 + rnd_int(400));
            kill(pid, SIGKILL);
            int st;
            cr_assert_eq(waitpid(pid, &st, 0), pid);
            cr_assert(WIFSIGNALED(st), "round %d seed %llu: writer exited with %d", r,
                      (unsigned long long)seed, WEXITSTATUS(st));
        }
        kills++;

        history h;
        read_side(side, &h);
        md_db *db;
        md_error err;
        int rc = md_db_open(dir, o, &db, &err);
        if (rc != 0 && !journal && !btree && hooks) {
            /* mmapv1 without the journal after a power loss: the files may
             * be inconsistent, and open may refuse them (as mongod does after
             * an unclean shutdown without a journal), with a clear error */
            cr_assert(err.code == MD_CODE_DATA_CORRUPTION_DETECTED && strstr(err.message, "offset"),
                      "round %d seed %llu: reopen: %d %s", r, (unsigned long long)seed, err.code,
                      err.message);
            refused++;
            free(h.ops);
            nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
            cr_assert_eq(mkdir(dir, 0755), 0);
            continue;
        }
        cr_assert_eq(rc, 0, "round %d seed %llu: reopen: %s", r, (unsigned long long)seed,
                     err.message);
        check_validate(db, journal || btree, h.acked == MAXOPS, r, seed);
        model got;
        if (!journal && !btree) {
            /* mmapv1 without the journal: the files may be inconsistent
             * (validate said so) and reading them must not crash.  Even
             * after a SIGKILL, where the page cache kept every write, a
             * write cut in the middle stays half done: a move killed
             * between its insert and its delete leaves the document twice. */
            scan_all(db);
            memset(&got, 0, sizeof got);
        } else {
            load(db, &got);
        }
        if (!journal)
            h.last_j = -1; /* nothing waited for the disk */
        if (journal || btree) {
            /* the state must be the model after some prefix [0, k) with
             * last_j < k <= n */
            model m = base;
            int k = -1;
            for (int i = 0; i <= h.n; i++) {
                if (i > h.last_j && model_eq(&m, &got)) {
                    k = i;
                    break;
                }
                if (i < h.n)
                    apply(&m, &h.ops[i]);
            }
            cr_assert_geq(k, 0,
                          "round %d seed %llu: recovered state matches no prefix after the "
                          "last j:true ack (op %d; %d begun, %d acked)",
                          r, (unsigned long long)seed, h.last_j, h.n, h.acked);
            if (got.index) {
                check_index(db, &got, r);
                index_checks++;
            }
            lost += h.n - k;
        }
        ops += h.n;
        acked += h.acked;
        base = got;
        free(h.ops);
        md_db_close(db);
        if (hooks && !journal && !btree) {
            /* files a power loss left inconsistent are no base for the
             * next round: start it from an empty directory */
            nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
            cr_assert_eq(mkdir(dir, 0755), 0);
        }
    }
    bson_destroy(o);
    unlink(side);
    nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    cr_log_info("%s (%s, journal/log %s): %d rounds, %d kills, %lld ops begun, %lld acked, "
                "%lld begun but not recovered, %lld index checks, %d reopens refused as "
                "damaged, seed %llu",
                hooks ? hooks->name : "crash", engine, journal ? "on" : "off", rounds, kills,
                (long long)ops, (long long)acked, (long long)lost, (long long)index_checks,
                refused, (unsigned long long)seed);
}


#endif /* CRASH_UTIL_H */
