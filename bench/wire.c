/*
 * wire.c -- bench/peers' insert, get and inc workloads through MongoDB's
 * wire protocol (libmongoc against `minidoc serve`) beside the same
 * operations embedded (minidoc's C API in this process), at 1, 8 and 64
 * connections, on both engines; the protocol's cost per operation is the
 * difference.
 *
 * Systems, for each engine (mmapv1, btree):
 *
 *   embedded  md_db_open() in this process; N threads, each with its own
 *             md_collection handle on the one md_db (md_db is thread safe)
 *   command   the same md_db, the same threads, but each operation is the
 *             command document a driver sends ({insert, documents: [doc]},
 *             {find, filter, limit: 1}, {update, updates: [{q, u}]}) run by
 *             md_db_command(), as the server runs what arrives: the part of
 *             the overhead that is building and parsing command documents
 *   mongoc    a `minidoc serve` child process (--engine E, the same --opts,
 *             the log to a file in its data directory); N threads, each with
 *             its own mongoc_client_t, so N connections (no compression)
 *
 * Operations, as bench/peers' minidoc rows do them:
 *
 *   insert  D documents of 304 bytes (bench/peers_doc.h), _id int64 0..D-1,
 *           insert_one each; thread t of N inserts the _ids i with i % N == t
 *   get     O random lookups by _id: find_with_opts({_id: X}, {limit: 1}),
 *           one cursor_next, the field n read
 *   inc     O random update_one({_id: X}, {$inc: {n: 1}})
 *
 * The O operations are split evenly between the N threads, each with its
 * own fixed-seed xorshift64* sequence.  A pass is the three workloads on a
 * fresh collection (created untimed).  For each connection count the
 * systems take turns, pass by pass (embedded, command, mongoc, then
 * again), and each workload's median pass is reported, so that load from
 * elsewhere on the machine falls on all of them alike.  The threads
 * connect (and ping) and wait at a barrier; each thread notes when it
 * starts and ends its share of a workload, and the workload's time runs
 * from the earliest start to the latest end (a thread preempted right
 * after the barrier cannot make it look shorter), so connecting, thread
 * start and the checks are not timed.  After the three workloads the
 * collection is checked (untimed): D documents and sum(n) = O, or the run
 * stops.
 *
 * Reported per engine, workload, connection count and system:
 *   ops_per_s   operations per second, all threads together
 *   us_per_op   1e6 / ops_per_s: the machine's time per operation
 *   lat_us      mean time one connection waits for one operation
 *               (N x us_per_op)
 * and the protocol's overhead: us_per_op(mongoc) - us_per_op(embedded) at
 * the same engine and connection count, cut into command documents
 * (command - embedded) and transport (mongoc - command: the driver, the
 * framing, the sockets and the server's thread hand-offs).  At the end, machine-readable lines
 *   `wire WORKLOAD ENGINE SYSTEM conns=N ops=N seconds=X ops_per_s=X
 *    us_per_op=X lat_us=X`
 * which bench/wire.py reads for its own embedded baseline.
 *
 *   build/bench/wire [--quick] [--docs N] [--ops N] [--repeat N] [--conns 1,8,64]
 *                    [--engines mmapv1,btree] [--systems embedded,command,mongoc]
 *                    [--minidoc PATH] [--opts JSON]
 *
 * Defaults: 20000 documents and 20000 operations per workload and
 * connection count, 3 passes of each (--repeat) of which the median is
 * reported (about 80 s on a busy 2-core machine); --quick: 5000 and 1
 * pass.  --minidoc: the server program (default $MINIDOC, else `minidoc`
 * beside this program's directory: build/bench/wire -> build/minidoc).
 * --opts: md_db_open() options for both sides (the engines' defaults when
 * not given: mmapv1's journal and btree's log on, as MongoDB's).  Scratch
 * directories go under $TMPDIR (else /tmp) and are removed.
 */
#include <errno.h>
#include <limits.h>
#include <mongoc/mongoc.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "minidoc.h"

#define BENCH_NAME "wire"
#include "bench.h"
#include "peers_doc.h"

enum { SYS_EMBEDDED, SYS_COMMAND, SYS_MONGOC, NSYS };
static const char *const sys_names[NSYS] = {"embedded", "command", "mongoc"};
enum { ENG_MMAPV1, ENG_BTREE, NENG };
static const char *const eng_names[NENG] = {"mmapv1", "btree"};
enum { W_INSERT, W_GET, W_INC, NWORK };
static const char *const work_names[NWORK] = {"insert", "get", "inc"};

#define MAX_CONNS 256
#define MAX_LEVELS 8
#define MAX_REPEAT 9
#define DB_NAME "bench"

typedef struct settings {
    int docs, ops;
    int repeat; /* passes per system and connection count; the median is kept */
    int conns[MAX_LEVELS], nconns;
    int want_eng[NENG], want_sys[NSYS];
    char minidoc[PATH_MAX];
    const char *opts_json; /* NULL: the engines' defaults */
} settings;

typedef struct result {
    int ran;
    long ops;
    double secs;
} result;


/* ---- the server -------------------------------------------------------------------- */

typedef struct server {
    pid_t pid;
    int port;
    char dir[PATH_MAX];
    char log[PATH_MAX + 16];
} server;

/* The port from the "Waiting for connections" log line, or 0. */
static int log_port(const char *path)
{
    FILE *f = fopen(path, "r");
    char line[4096];
    int port = 0;
    if (!f)
        return 0;
    while (!port && fgets(line, sizeof line, f)) {
        const char *p;
        if (!strstr(line, "Waiting for connections") || !(p = strstr(line, "\"port\"")))
            continue;
        p += 6;
        while (*p == ' ' || *p == ':')
            p++;
        port = atoi(p);
    }
    fclose(f);
    return port;
}

/* The running server, killed if the run stops on a failure (atexit). */
static pid_t live_pid;

static void kill_live_server(void)
{
    if (live_pid > 0) {
        kill(live_pid, SIGKILL);
        waitpid(live_pid, NULL, 0);
    }
}

static void server_start(server *sv, const settings *s, int eng, const char *dir)
{
    snprintf(sv->dir, sizeof sv->dir, "%s", dir);
    snprintf(sv->log, sizeof sv->log, "%s/server.log", dir);
    char dbpath[PATH_MAX + 8];
    snprintf(dbpath, sizeof dbpath, "%s/data", dir);
    sv->pid = fork();
    if (sv->pid < 0)
        fail("fork: %s", strerror(errno));
    if (sv->pid == 0) {
        const char *argv[16];
        int n = 0;
        argv[n++] = s->minidoc;
        argv[n++] = "serve";
        argv[n++] = "--dbpath";
        argv[n++] = dbpath;
        argv[n++] = "--port";
        argv[n++] = "0";
        argv[n++] = "--engine";
        argv[n++] = eng_names[eng];
        argv[n++] = "--logpath";
        argv[n++] = sv->log;
        if (s->opts_json) {
            argv[n++] = "--opts";
            argv[n++] = s->opts_json;
        }
        argv[n] = NULL;
        execv(s->minidoc, (char *const *)argv);
        fprintf(stderr, "wire: cannot run %s: %s\n", s->minidoc, strerror(errno));
        _exit(127);
    }
    live_pid = sv->pid;
    for (int i = 0; i < 200 && !(sv->port = log_port(sv->log)); i++) {
        int st;
        if (waitpid(sv->pid, &st, WNOHANG) == sv->pid && !(live_pid = 0))
            fail("the server (%s serve) exited before listening; see %s", s->minidoc, sv->log);
        usleep(50000);
    }
    if (!sv->port)
        fail("the server did not start listening within 10 s; see %s", sv->log);
}

/* SIGTERM: the server flushes and closes every database and exits 0. */
static void server_stop(server *sv)
{
    int st;
    kill(sv->pid, SIGTERM);
    pid_t w = waitpid(sv->pid, &st, 0);
    live_pid = 0;
    if (w != sv->pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail("the server did not shut down cleanly (status %d); see %s", st, sv->log);
}

/* ---- one workload pass with N threads ----------------------------------------------- */

typedef struct pass {
    const settings *s;
    int sys, nthreads;
    char coll[16];
    md_db *db;          /* embedded */
    const char *uri;    /* mongoc */
    pthread_barrier_t barrier;
    volatile int failed;
    char why[512];
    pthread_mutex_t mu;
} pass;

typedef struct worker {
    pass *r;
    int t;
    pthread_t thread;
    md_collection *mc;
    mongoc_client_t *client;
    mongoc_collection_t *coll;
    double start[NWORK], end[NWORK]; /* this thread's share of each workload */
} worker;

static void worker_fail(worker *w, const char *what, const char *msg)
{
    pthread_mutex_lock(&w->r->mu);
    if (!w->r->failed)
        snprintf(w->r->why, sizeof w->r->why, "%s %s thread %d: %s: %s",
                 sys_names[w->r->sys], w->r->coll, w->t, what, msg);
    w->r->failed = 1;
    pthread_mutex_unlock(&w->r->mu);
}

/* SYS_COMMAND: cmd (destroyed here) through md_db_command, as the server
 * runs what arrives; the reply must hold `want` (e.g. "n") equal to 1, or
 * for a find, a first batch whose document has n. */
static bool command_op(worker *w, bson_t *cmd, const char *what, const char *want)
{
    bson_t reply;
    bson_iter_t it, f;
    md_error err;
    bool ok = md_db_command(w->r->db, cmd, &reply, &err) == 0;
    if (!ok)
        worker_fail(w, what, err.message);
    else if (!bson_iter_init(&it, &reply) || !bson_iter_find_descendant(&it, want, &f) ||
             (strcmp(want, "n") == 0 && bson_iter_as_int64(&f) != 1) ||
             bson_iter_init_find(&it, &reply, "writeErrors")) {
        ok = false;
        worker_fail(w, what, "unexpected reply");
    }
    bson_destroy(&reply);
    bson_destroy(cmd);
    return ok;
}

static bool op_insert(worker *w, int64_t id)
{
    bson_t doc;
    bool ok;
    make_doc(&doc, id);
    if (w->r->sys == SYS_EMBEDDED) {
        md_error err;
        ok = md_collection_insert_one(w->mc, &doc, NULL, NULL, &err) == 0;
        if (!ok)
            worker_fail(w, "insert", err.message);
    } else if (w->r->sys == SYS_COMMAND) {
        ok = command_op(w, BCON_NEW("insert", BCON_UTF8(w->r->coll), "documents", "[",
                                    BCON_DOCUMENT(&doc), "]"),
                        "insert", "n");
    } else {
        bson_error_t err;
        ok = mongoc_collection_insert_one(w->coll, &doc, NULL, NULL, &err);
        if (!ok)
            worker_fail(w, "insert", err.message);
    }
    bson_destroy(&doc);
    return ok;
}

static bool op_get(worker *w, int64_t id)
{
    bson_t filter, opts;
    const bson_t *doc;
    bson_iter_t it;
    bool found;
    bson_init(&filter);
    BSON_APPEND_INT64(&filter, "_id", id);
    bson_init(&opts);
    BSON_APPEND_INT32(&opts, "limit", 1);
    if (w->r->sys == SYS_EMBEDDED) {
        md_error err;
        md_cursor *cur = md_collection_find_with_opts(w->mc, &filter, &opts);
        found = md_cursor_next(cur, &doc) && bson_iter_init_find(&it, doc, "n");
        if (!found)
            worker_fail(w, "get", md_cursor_error(cur, &err) ? err.message : "not found");
        md_cursor_destroy(cur);
    } else if (w->r->sys == SYS_COMMAND) {
        found = command_op(w, BCON_NEW("find", BCON_UTF8(w->r->coll), "filter",
                                       BCON_DOCUMENT(&filter), "limit", BCON_INT32(1)),
                           "get", "cursor.firstBatch.0.n");
    } else {
        bson_error_t err;
        mongoc_cursor_t *cur = mongoc_collection_find_with_opts(w->coll, &filter, &opts, NULL);
        found = mongoc_cursor_next(cur, &doc) && bson_iter_init_find(&it, doc, "n");
        if (!found)
            worker_fail(w, "get", mongoc_cursor_error(cur, &err) ? err.message : "not found");
        mongoc_cursor_destroy(cur);
    }
    bson_destroy(&filter);
    bson_destroy(&opts);
    return found;
}

static bool op_inc(worker *w, int64_t id)
{
    bson_t sel, upd, sub;
    bool ok;
    bson_init(&sel);
    BSON_APPEND_INT64(&sel, "_id", id);
    bson_init(&upd);
    BSON_APPEND_DOCUMENT_BEGIN(&upd, "$inc", &sub);
    BSON_APPEND_INT32(&sub, "n", 1);
    bson_append_document_end(&upd, &sub);
    if (w->r->sys == SYS_EMBEDDED) {
        md_error err;
        ok = md_collection_update_one(w->mc, &sel, &upd, NULL, NULL, &err) == 0;
        if (!ok)
            worker_fail(w, "inc", err.message);
    } else if (w->r->sys == SYS_COMMAND) {
        ok = command_op(w, BCON_NEW("update", BCON_UTF8(w->r->coll), "updates", "[", "{", "q",
                                    BCON_DOCUMENT(&sel), "u", BCON_DOCUMENT(&upd), "}", "]"),
                        "inc", "n");
    } else {
        bson_error_t err;
        ok = mongoc_collection_update_one(w->coll, &sel, &upd, NULL, NULL, &err);
        if (!ok)
            worker_fail(w, "inc", err.message);
    }
    bson_destroy(&sel);
    bson_destroy(&upd);
    return ok;
}

/* The worker: each workload after a barrier, noting when its share began
 * and ended.  After a failure it keeps meeting the barriers, doing nothing,
 * so that the main thread can report it. */
static void *worker_main(void *arg)
{
    worker *w = arg;
    pass *r = w->r;
    const settings *s = r->s;
    int n = r->nthreads;
    long lo = (long)s->ops * w->t / n, hi = (long)s->ops * (w->t + 1) / n;
    uint64_t rng;
    pthread_barrier_wait(&r->barrier);
    w->start[W_INSERT] = now();
    for (int64_t i = w->t; i < s->docs && !r->failed; i += n)
        if (!op_insert(w, i))
            break;
    w->end[W_INSERT] = now();
    pthread_barrier_wait(&r->barrier);
    w->start[W_GET] = now();
    rng = rng_seed(1000 + (uint64_t)w->t);
    for (long i = lo; i < hi && !r->failed; i++)
        if (!op_get(w, rng_below(&rng, (uint32_t)s->docs)))
            break;
    w->end[W_GET] = now();
    pthread_barrier_wait(&r->barrier);
    w->start[W_INC] = now();
    rng = rng_seed(2000 + (uint64_t)w->t);
    for (long i = lo; i < hi && !r->failed; i++)
        if (!op_inc(w, rng_below(&rng, (uint32_t)s->docs)))
            break;
    w->end[W_INC] = now();
    return NULL;
}

static void worker_connect(worker *w)
{
    pass *r = w->r;
    if (r->sys != SYS_MONGOC) {
        w->mc = md_db_get_collection(r->db, r->coll);
        return;
    }
    bson_error_t err;
    bson_t *ping = BCON_NEW("ping", BCON_INT32(1));
    w->client = mongoc_client_new(r->uri);
    if (!w->client)
        fail("mongoc_client_new(%s) failed", r->uri);
    mongoc_client_set_error_api(w->client, MONGOC_ERROR_API_VERSION_2);
    if (!mongoc_client_command_simple(w->client, "admin", ping, NULL, NULL, &err))
        fail("ping %s: %s", r->uri, err.message);
    bson_destroy(ping);
    w->coll = mongoc_client_get_collection(w->client, DB_NAME, r->coll);
}

static void worker_disconnect(worker *w)
{
    if (w->mc)
        md_collection_destroy(w->mc);
    if (w->coll)
        mongoc_collection_destroy(w->coll);
    if (w->client)
        mongoc_client_destroy(w->client);
}

/* Create the collection (untimed): through md_db_command, or a `create`
 * command on a connection of its own. */
static void create_coll(pass *r)
{
    bson_t *cmd = BCON_NEW("create", BCON_UTF8(r->coll));
    if (r->sys != SYS_MONGOC) {
        run(r->db, cmd, "create", NULL);
        return;
    }
    bson_error_t err;
    mongoc_client_t *c = mongoc_client_new(r->uri);
    if (!c || !mongoc_client_command_simple(c, DB_NAME, cmd, NULL, NULL, &err))
        fail("create %s over the wire: %s", r->coll, c ? err.message : "no client");
    mongoc_client_destroy(c);
    bson_destroy(cmd);
}

/* Count the documents and sum n (untimed): D and O, or the run stops. */
static void check_coll(pass *r)
{
    bson_t filter = BSON_INITIALIZER;
    const bson_t *doc;
    bson_iter_t it;
    long docs = 0;
    int64_t sum = 0;
    if (r->sys != SYS_MONGOC) {
        md_error err;
        md_collection *c = md_db_get_collection(r->db, r->coll);
        md_cursor *cur = md_collection_find_with_opts(c, &filter, NULL);
        while (md_cursor_next(cur, &doc))
            if (docs++, bson_iter_init_find(&it, doc, "n"))
                sum += bson_iter_as_int64(&it);
        if (md_cursor_error(cur, &err))
            fail("check: %s", err.message);
        md_cursor_destroy(cur);
        md_collection_destroy(c);
    } else {
        bson_error_t err;
        mongoc_client_t *c = mongoc_client_new(r->uri);
        mongoc_collection_t *coll = mongoc_client_get_collection(c, DB_NAME, r->coll);
        mongoc_cursor_t *cur = mongoc_collection_find_with_opts(coll, &filter, NULL, NULL);
        while (mongoc_cursor_next(cur, &doc))
            if (docs++, bson_iter_init_find(&it, doc, "n"))
                sum += bson_iter_as_int64(&it);
        if (mongoc_cursor_error(cur, &err))
            fail("check over the wire: %s", err.message);
        mongoc_cursor_destroy(cur);
        mongoc_collection_destroy(coll);
        mongoc_client_destroy(c);
    }
    if (docs != r->s->docs || sum != r->s->ops)
        fail("%s %s: verification failed: %ld documents (want %d), sum(n) %lld (want %d)",
             sys_names[r->sys], r->coll, docs, r->s->docs, (long long)sum, r->s->ops);
}

/* The three workloads with n threads on one system; res[w] gets each. */
static void run_level(const settings *s, int sys, int n, int round, md_db *db, const char *uri,
                      result res[NWORK])
{
    pass r = {.s = s, .sys = sys, .nthreads = n, .db = db, .uri = uri};
    worker *ws = calloc((size_t)n, sizeof *ws);
    if (!ws)
        fail("out of memory");
    /* e1_0, c8_1, m64_2, ...: a fresh collection for every pass */
    snprintf(r.coll, sizeof r.coll, "%c%d_%d", sys_names[sys][0], n, round);
    pthread_mutex_init(&r.mu, NULL);
    pthread_barrier_init(&r.barrier, NULL, (unsigned)n + 1);
    create_coll(&r);
    for (int t = 0; t < n; t++) {
        ws[t] = (worker){.r = &r, .t = t};
        worker_connect(&ws[t]);
    }
    for (int t = 0; t < n; t++)
        if (pthread_create(&ws[t].thread, NULL, worker_main, &ws[t]) != 0)
            fail("pthread_create failed");
    for (int k = 0; k < NWORK; k++)
        pthread_barrier_wait(&r.barrier);
    for (int t = 0; t < n; t++) {
        pthread_join(ws[t].thread, NULL);
        worker_disconnect(&ws[t]);
    }
    /* a workload's time: from the first thread's start to the last one's end */
    for (int w = 0; w < NWORK; w++) {
        double t0 = ws[0].start[w], t1 = ws[0].end[w];
        for (int t = 1; t < n; t++) {
            t0 = ws[t].start[w] < t0 ? ws[t].start[w] : t0;
            t1 = ws[t].end[w] > t1 ? ws[t].end[w] : t1;
        }
        res[w] = (result){.ran = 1, .ops = w == W_INSERT ? s->docs : s->ops, .secs = t1 - t0};
    }
    if (r.failed)
        fail("%s", r.why);
    check_coll(&r);
    pthread_barrier_destroy(&r.barrier);
    pthread_mutex_destroy(&r.mu);
    free(ws);
}

/* The pass with the median time of `k` passes (k <= MAX_REPEAT). */
static result median(const result *x, int k)
{
    result sorted[MAX_REPEAT];
    memcpy(sorted, x, sizeof *x * (size_t)k);
    for (int i = 1; i < k; i++)
        for (int j = i; j > 0 && sorted[j].secs < sorted[j - 1].secs; j--) {
            result t = sorted[j];
            sorted[j] = sorted[j - 1];
            sorted[j - 1] = t;
        }
    return sorted[k / 2];
}

/* ---- reporting ------------------------------------------------------------------------ */

static double rate(const result *x) { return x->secs > 0 ? x->ops / x->secs : 0; }
static double us_per_op(const result *x) { return x->ops ? 1e6 * x->secs / x->ops : 0; }

static void print_level(int eng, int n, result res[NSYS][NWORK])
{
    for (int w = 0; w < NWORK; w++) {
        for (int y = 0; y < NSYS; y++) {
            const result *x = &res[y][w];
            if (x->ran)
                printf("%-6s %-6s conns=%-3d %-8s %7ld ops %7.3f s %9.0f ops/s %8.2f us/op "
                       "lat %8.2f us\n",
                       eng_names[eng], work_names[w], n, sys_names[y], x->ops, x->secs,
                       rate(x), us_per_op(x), n * us_per_op(x));
        }
        const result *e = &res[SYS_EMBEDDED][w], *c = &res[SYS_COMMAND][w],
                     *m = &res[SYS_MONGOC][w];
        if (e->ran && m->ran) {
            printf("%-6s %-6s conns=%-3d overhead mongoc-embedded %.2f us/op (%.1fx the "
                   "embedded time)",
                   eng_names[eng], work_names[w], n, us_per_op(m) - us_per_op(e),
                   us_per_op(m) / us_per_op(e));
            if (c->ran)
                printf(": command documents %.2f, transport %.2f", us_per_op(c) - us_per_op(e),
                       us_per_op(m) - us_per_op(c));
            printf("\n");
        }
    }
    fflush(stdout);
}

/* ---- the command line ------------------------------------------------------------------- */

static void usage(void)
{
    fprintf(stderr,
            "usage: wire [--quick] [--docs N] [--ops N] [--repeat N] [--conns 1,8,64]\n"
            "            [--engines mmapv1,btree] [--systems embedded,command,mongoc]\n"
            "            [--minidoc PATH] [--opts JSON]\n");
    exit(2);
}

/* "a,b" against names: want[i] set for each name listed; false on an unknown one. */
static bool parse_names(const char *v, const char *const *names, int n, int *want)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", v);
    memset(want, 0, sizeof *want * (size_t)n);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        int i = 0;
        while (i < n && strcmp(tok, names[i]) != 0)
            i++;
        if (i == n)
            return false;
        want[i] = 1;
    }
    return true;
}

static bool parse_conns(const char *v, settings *s)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", v);
    s->nconns = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        int c = atoi(tok);
        if (c < 1 || c > MAX_CONNS || s->nconns == MAX_LEVELS)
            return false;
        s->conns[s->nconns++] = c;
    }
    return s->nconns > 0;
}

static void default_minidoc(settings *s, const char *argv0)
{
    const char *env = getenv("MINIDOC");
    char self[PATH_MAX];
    if (env && *env) {
        snprintf(s->minidoc, sizeof s->minidoc, "%s", env);
        return;
    }
    snprintf(self, sizeof self, "%s", argv0);
    char *slash = strrchr(self, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(self, sizeof self, ".");
    snprintf(s->minidoc, sizeof s->minidoc, "%.*s/../minidoc", (int)sizeof self - 16, self);
}

static void parse_args(int argc, char **argv, settings *s)
{
    int docs = -1, ops = -1, quick = 0, repeat = -1;
    *s = (settings){.docs = 20000, .ops = 20000, .repeat = 3, .conns = {1, 8, 64}, .nconns = 3,
                    .want_eng = {1, 1}, .want_sys = {1, 1, 1}};
    default_minidoc(s, argv[0]);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--quick") == 0) {
            quick = 1;
            continue;
        }
        if (!v)
            usage();
        i++;
        if (strcmp(a, "--docs") == 0)
            docs = atoi(v);
        else if (strcmp(a, "--ops") == 0)
            ops = atoi(v);
        else if (strcmp(a, "--repeat") == 0) {
            repeat = atoi(v);
            if (repeat < 1 || repeat > MAX_REPEAT)
                usage();
        }
        else if (strcmp(a, "--conns") == 0) {
            if (!parse_conns(v, s))
                usage();
        } else if (strcmp(a, "--engines") == 0) {
            if (!parse_names(v, eng_names, NENG, s->want_eng))
                usage();
        } else if (strcmp(a, "--systems") == 0) {
            if (!parse_names(v, sys_names, NSYS, s->want_sys))
                usage();
        } else if (strcmp(a, "--minidoc") == 0)
            snprintf(s->minidoc, sizeof s->minidoc, "%s", v);
        else if (strcmp(a, "--opts") == 0)
            s->opts_json = v;
        else
            usage();
    }
    if (quick) {
        s->docs = s->ops = 5000;
        s->repeat = 1;
    }
    if (repeat > 0)
        s->repeat = repeat;
    if (docs > 0)
        s->docs = docs;
    if (ops > 0)
        s->ops = ops;
    if (s->docs <= 0 || s->ops <= 0 || docs == 0 || ops == 0)
        usage();
    if (s->want_sys[SYS_MONGOC] && access(s->minidoc, X_OK) != 0)
        fail("the server program %s: %s (build it with make, or give --minidoc or $MINIDOC)",
             s->minidoc, strerror(errno));
}

/* md_db_open() options for the embedded side: --opts, the engine and the
 * database name, as the server builds them (server/srv_db.c). */
static md_db *embedded_open(const settings *s, int eng, const char *dir)
{
    bson_t opts, parsed;
    md_error err;
    md_db *db;
    bson_init(&opts);
    if (s->opts_json) {
        if (md_json_parse(s->opts_json, -1, &parsed, &err) != 0)
            fail("--opts is not valid JSON: %s", err.message);
        bson_copy_to_excluding_noinit(&parsed, &opts, "engine", "dbName", NULL);
        bson_destroy(&parsed);
    }
    BSON_APPEND_UTF8(&opts, "engine", eng_names[eng]);
    BSON_APPEND_UTF8(&opts, "dbName", DB_NAME);
    if (md_db_open(dir, &opts, &db, &err) != 0)
        die("open", &err);
    bson_destroy(&opts);
    return db;
}

static void rm_rf(const char *dir)
{
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "wire: could not remove %s\n", dir);
}

int main(int argc, char **argv)
{
    settings s;
    parse_args(argc, argv, &s);
    signal(SIGPIPE, SIG_IGN);
    atexit(kill_live_server);
    mongoc_init();

    bson_t sample;
    make_doc(&sample, 12345);
    printf("# wire: minidoc %s embedded against `minidoc serve` through libmongoc %s\n",
           MD_VERSION_STRING, MONGOC_VERSION_S);
    printf("# docs=%d (%u bytes) ops=%d per workload and connection count, median of %d "
           "passes, conns=", s.docs, sample.len, s.ops, s.repeat);
    bson_destroy(&sample);
    for (int i = 0; i < s.nconns; i++)
        printf("%s%d", i ? "," : "", s.conns[i]);
    printf(", md_db_open options: %s\n", s.opts_json ? s.opts_json : "the engines' defaults");
    printf("# embedded: N threads on one md_db, typed calls; command: the same through "
           "md_db_command with the command documents a driver sends; mongoc: N threads, one "
           "mongoc_client_t (one connection, no compression) each; the server: %s serve\n",
           s.minidoc);
    printf("# us/op = 1e6 / (ops/s of all threads); lat = conns x us/op; overhead = "
           "us/op(mongoc) - us/op(embedded) = command documents (command - embedded) + "
           "transport (mongoc - command)\n");
    fflush(stdout);

    static result all[NENG][MAX_LEVELS][NSYS][NWORK];
    const char *tmp = getenv("TMPDIR");
    double start = now();
    for (int e = 0; e < NENG; e++) {
        if (!s.want_eng[e])
            continue;
        char dir[PATH_MAX - 64];
        snprintf(dir, sizeof dir, "%s/wire-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp",
                 eng_names[e]);
        if (!mkdtemp(dir))
            fail("mkdtemp %s: %s", dir, strerror(errno));
        char edir[PATH_MAX], sdir[PATH_MAX], uri[128] = "";
        snprintf(edir, sizeof edir, "%s/embedded", dir);
        snprintf(sdir, sizeof sdir, "%s/server", dir);
        if (mkdir(sdir, 0755) != 0)
            fail("mkdir %s: %s", sdir, strerror(errno));
        md_db *db = s.want_sys[SYS_EMBEDDED] || s.want_sys[SYS_COMMAND]
                        ? embedded_open(&s, e, edir)
                        : NULL;
        server sv = {0};
        if (s.want_sys[SYS_MONGOC]) {
            server_start(&sv, &s, e, sdir);
            snprintf(uri, sizeof uri, "mongodb://127.0.0.1:%d/?appname=bench-wire", sv.port);
        }
        printf("\n# engine=%s\n", eng_names[e]);
        for (int l = 0; l < s.nconns; l++) {
            static result passes[NSYS][NWORK][MAX_REPEAT];
            for (int k = 0; k < s.repeat; k++) {
                result one[NWORK];
                for (int y = 0; y < NSYS; y++) {
                    if (!s.want_sys[y])
                        continue;
                    run_level(&s, y, s.conns[l], k, db, uri, one);
                    for (int w = 0; w < NWORK; w++)
                        passes[y][w][k] = one[w];
                }
            }
            for (int y = 0; y < NSYS; y++)
                for (int w = 0; w < NWORK; w++)
                    if (s.want_sys[y])
                        all[e][l][y][w] = median(passes[y][w], s.repeat);
            print_level(e, s.conns[l], all[e][l]);
            fprintf(stderr, "wire: %s conns=%d done\n", eng_names[e], s.conns[l]);
        }
        if (db)
            md_db_close(db);
        if (s.want_sys[SYS_MONGOC])
            server_stop(&sv);
        rm_rf(dir);
    }

    printf("\n# elapsed %.1f s (setup and checks included)\n", now() - start);
    printf("# machine-readable\n");
    for (int e = 0; e < NENG; e++)
        for (int l = 0; l < s.nconns; l++)
            for (int y = 0; y < NSYS; y++)
                for (int w = 0; w < NWORK; w++) {
                    const result *x = &all[e][l][y][w];
                    if (x->ran)
                        printf("wire %s %s %s conns=%d ops=%ld seconds=%.6f ops_per_s=%.0f "
                               "us_per_op=%.2f lat_us=%.2f\n",
                               work_names[w], eng_names[e], sys_names[y], s.conns[l], x->ops,
                               x->secs, rate(x), us_per_op(x), s.conns[l] * us_per_op(x));
                }
    mongoc_cleanup();
    return 0;
}
