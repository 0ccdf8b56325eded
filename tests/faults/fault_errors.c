/*
 * fault_errors.c -- ENOSPC and EIO while writing data files, the journal
 * and the log, injected by the I/O shim (fault_io.h), on both engines.
 *
 * Each case opens a database, runs the crash harness's write stream
 * (tests/crash/crash_util.h) with writeConcern {j: true} and an
 * {fsync: 1} every few writes, and makes the Nth write/sync/msync/
 * allocation of one kind of file fail, once or from then on.  It checks:
 *
 *   - the failure reaches the caller of the command that hit it, with a
 *     MongoDB code: OutOfDiskSpace (14031) for ENOSPC, FileStreamFailed
 *     (39) for EIO, and a message naming the file;
 *   - the process does not crash, and after the first failed write the
 *     handle refuses writes (or they succeed: never half-applied);
 *   - closing the database with the fault still active does not crash;
 *   - the engine's messages (captured, not printed) are a failed journal
 *     write or checkpoint naming the error; a fault the engine keeps (a
 *     journal or log write, or any sticky one) is said at least once;
 *   - after clearing the fault and reopening, validate is clean and the
 *     collection is the model after some prefix of the writes that holds
 *     every acknowledged one (the failed write is there entirely or not at
 *     all), and the index agrees with the records.
 */
#include <pthread.h>
#include <stdint.h>

#include "../crash/crash_util.h"
#include "fault_io.h"
#include "../engine/t_log.h"

typedef struct fcase {
    const char *engine;
    unsigned ops;
    const char *pat; /* path fragment of the files that fail */
    int err;
    bool sticky;
    long nth;
    bool must_fail; /* the workload must see an error */
} fcase;

static bson_t *fault_opts(const char *engine)
{
    bson_t *o = bson_new(), sub;
    BSON_APPEND_UTF8(o, "engine", engine);
    if (strcmp(engine, "btree") == 0) {
        BSON_APPEND_DOCUMENT_BEGIN(o, "btree", &sub);
        BSON_APPEND_INT32(&sub, "checkpointIntervalSecs", 3600); /* only {fsync: 1} */
        BSON_APPEND_INT64(&sub, "logFileSize", 65536);
        bson_append_document_end(o, &sub);
    } else {
        BSON_APPEND_DOCUMENT_BEGIN(o, "mmapv1", &sub);
        BSON_APPEND_INT64(&sub, "firstFileSize", 256 * 1024);
        BSON_APPEND_INT64(&sub, "nsSize", 65536);
        BSON_APPEND_INT32(&sub, "syncdelay", 0); /* only {fsync: 1} */
        BSON_APPEND_INT64(&sub, "journalFileSize", 65536);
        bson_append_document_end(o, &sub);
    }
    return o;
}

/* The MongoDB code of cmd's error (0 if none), its message in msg. */
static int cmd_code(md_db *db, const bson_t *cmd, char *msg, size_t n)
{
    int code = 0;
    if (command_code(db, cmd, &code, msg, n) != 0 && code == 0)
        code = 1;
    return code;
}

/* Collection coll of db holds n documents ({count}). */
static void expect_count(md_db *db, const char *coll, int64_t n)
{
    bson_t *cnt = BCON_NEW("count", BCON_UTF8(coll)), reply;
    bson_iter_t it;
    md_error err;
    cr_assert_eq(md_db_command(db, cnt, &reply, &err), 0, "%s", err.message);
    cr_assert(bson_iter_init_find(&it, &reply, "n") && bson_iter_as_int64(&it) == n,
              "count of %s: want %lld", coll, (long long)n);
    bson_destroy(&reply);
    bson_destroy(cnt);
}

static void check_code(const fcase *c, int code, const char *msg, const char *where)
{
    if (code == MD_CODE_ILLEGAL_OPERATION && strstr(where, "after"))
        cr_assert(strstr(msg, "refuses writes"), "%s %s: %s", c->engine, where, msg);
    else if (c->err == ENOSPC)
        cr_assert_eq(code, MD_CODE_OUT_OF_DISK_SPACE, "%s %s: ENOSPC gave code %d: %s",
                     c->engine, where, code, msg);
    else
        cr_assert_eq(code, MD_CODE_FILE_STREAM_FAILED, "%s %s: EIO gave code %d: %s", c->engine,
                     where, code, msg);
    cr_assert(strstr(msg, "/") || code == MD_CODE_ILLEGAL_OPERATION,
              "%s %s: the message does not name the file: %s", c->engine, where, msg);
}

/* What the engine said while the fault was on (captured by t_log). */
static void check_log(const fcase *c, const char *dir, long injected)
{
    static const char *const forms[] = {"mmapv1: journal write failed (",
                                        "btree: checkpoint failed: ",
                                        "btree: checkpoint at close failed: ", NULL};
    char *log = t_log_end(), bad[1024], said[300];
    int lines = t_log_lines(log, forms, dir, bad, sizeof bad);
    cr_assert(!bad[0], "%s %s: unexpected engine message: %s", c->engine, c->pat, bad);
    snprintf(said, sizeof said, ": %s", strerror(c->err));
    bool kept = c->sticky || strcmp(c->engine, "mmapv1") == 0 || strstr(c->pat, "/log/");
    if (injected > 0 && kept && c->ops != FIO_ALLOC)
        cr_assert(lines > 0 && t_log_count(log, said) > 0,
                  "%s %s: the engine did not say '%s': %s", c->engine, c->pat, said, log);
    free(log);
}

static void run_case(const fcase *c)
{
    char dir[64], msg[1024];
    snprintf(dir, sizeof dir, "/tmp/mdfault.XXXXXX");
    cr_assert(mkdtemp(dir));
    uint64_t seed = (uint64_t)env_int("MINIDOC_CRASH_SEED", 0);
    if (!seed)
        seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16);
    rng_state = seed | 1;
    bson_t *o = fault_opts(c->engine);
    md_db *db;
    md_error err;
    cr_assert_eq(md_db_open(dir, o, &db, &err), 0, "open: %s", err.message);
    t_log_begin();

    op *ops = calloc(MAXOPS, sizeof *ops);
    int n = 0, acked = 0, failed_at = -1, fsync_failures = 0;
    model m;
    memset(&m, 0, sizeof m);
    /* a few clean writes first, then the fault */
    for (int i = 0; i < 600 && failed_at < 0; i++) {
        if (i == 10)
            fio_fail(c->ops, c->pat, c->nth, c->err, c->sticky);
        if (i % 7 == 6) {
            bson_t *f = BCON_NEW("fsync", BCON_INT32(1));
            int code = cmd_code(db, f, msg, sizeof msg);
            bson_destroy(f);
            if (code) {
                check_code(c, code, msg, "fsync");
                fsync_failures++;
                if (c->sticky)
                    break;
            }
            continue;
        }
        op x = next_op(&m, 1000 + n);
        x.j = true;
        ops[n++] = x;
        int code = 0;
        if (run_op_code(db, &x, &code, msg, sizeof msg) != 0) {
            failed_at = n - 1;
            check_code(c, code, msg, "write");
            break;
        }
        apply(&m, &x);
        acked = n;
    }
    long injected = fio_injected();
    if (c->must_fail)
        cr_assert_gt(injected, 0, "%s %s: the fault never fired", c->engine, c->pat);
    if (failed_at >= 0) {
        cr_assert_gt(injected, 0, "%s: write %d failed with no fault injected", c->engine,
                     failed_at);
        /* a second write either fails the same way, is refused by the
         * failed handle, or (the fault was once) succeeds */
        bson_t *probe = BCON_NEW("insert", "c", "documents", "[", "{", "_id", BCON_INT32(9999),
                                 "}", "]", "writeConcern", "{", "j", BCON_BOOL(true), "}");
        int code = cmd_code(db, probe, msg, sizeof msg);
        bson_destroy(probe);
        if (code)
            check_code(c, code, msg, "write after the failure");
        else
            cr_assert(!c->sticky, "%s: a write succeeded under a sticky fault", c->engine);
        if (!code) { /* it succeeded: remove it again so the model holds */
            bson_t *del = BCON_NEW("delete", "c", "deletes", "[", "{", "q", "{", "_id",
                                   BCON_INT32(9999), "}", "limit", BCON_INT32(1), "}", "]",
                                   "writeConcern", "{", "j", BCON_BOOL(true), "}");
            cmd_code(db, del, msg, sizeof msg);
            bson_destroy(del);
        }
    }
    if (injected > 0) /* every injected failure reaches some caller */
        cr_assert(failed_at >= 0 || fsync_failures > 0, "%s %s: no command reported the fault",
                  c->engine, c->pat);
    md_db_close(db); /* with the fault still on when sticky */
    fio_reset();
    check_log(c, dir, injected);

    cr_assert_eq(md_db_open(dir, o, &db, &err), 0, "%s: reopen after the fault: %s", c->engine,
                 err.message);
    check_validate(db, true, false, 0, seed);
    model got, want;
    load(db, &got);
    memset(&want, 0, sizeof want);
    int k = -1;
    for (int i = 0; i <= n; i++) {
        if (i >= acked && model_eq(&want, &got)) {
            k = i;
            break;
        }
        if (i < n)
            apply(&want, &ops[i]);
    }
    cr_assert_geq(k, 0,
                  "%s %s seed %llu: the reopened collection is no prefix holding all %d "
                  "acknowledged writes (%d begun)",
                  c->engine, c->pat, (unsigned long long)seed, acked, n);
    if (got.index)
        check_index(db, &got, 0);
    md_db_close(db);
    bson_destroy(o);
    free(ops);
    nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    cr_log_info("fault %s %s %s nth %ld%s: %d writes, %d acked, failed at %d, %d fsync "
                "failures, %ld injected",
                c->engine, c->pat, strerror(c->err), c->nth, c->sticky ? " sticky" : "", n, acked,
                failed_at, fsync_failures, injected);
}

#define CASE(name, ...)                                                                       \
    Test(faults, name)                                                                        \
    {                                                                                         \
        fcase c = {__VA_ARGS__};                                                              \
        run_case(&c);                                                                         \
    }

/* mmapv1: the journal (every j:true commit writes and syncs it) */
CASE(mmapv1_journal_write_enospc, "mmapv1", FIO_WRITE, "/journal/j._", ENOSPC, true, 3, true)
CASE(mmapv1_journal_write_eio_once, "mmapv1", FIO_WRITE, "/journal/j._", EIO, false, 5, true)
CASE(mmapv1_journal_sync_eio, "mmapv1", FIO_SYNC, "/journal/j._", EIO, true, 4, true)
CASE(mmapv1_journal_sync_enospc_once, "mmapv1", FIO_SYNC, "/journal/j._", ENOSPC, false, 2,
     true)
/* mmapv1: data files (msync at {fsync: 1}, allocation of a new file) */
CASE(mmapv1_data_msync_eio, "mmapv1", FIO_MSYNC, "/test.", EIO, true, 1, true)
CASE(mmapv1_data_msync_eio_once, "mmapv1", FIO_MSYNC, "/test.", EIO, false, 2, true)
CASE(mmapv1_data_alloc_enospc, "mmapv1", FIO_ALLOC, "/test.1", ENOSPC, true, 1, false)
CASE(mmapv1_lsn_write_enospc, "mmapv1", FIO_WRITE | FIO_SYNC, "/journal/lsn", ENOSPC, true, 1,
     true)
/* btree: the log */
CASE(btree_log_write_enospc, "btree", FIO_WRITE, "/log/btlog.", ENOSPC, true, 3, true)
CASE(btree_log_write_eio_once, "btree", FIO_WRITE, "/log/btlog.", EIO, false, 5, true)
CASE(btree_log_sync_eio, "btree", FIO_SYNC, "/log/btlog.", EIO, true, 4, true)
CASE(btree_log_sync_enospc_once, "btree", FIO_SYNC, "/log/btlog.", ENOSPC, false, 2, true)
/* btree: data files and the turtle (written by the checkpoint of {fsync: 1}) */
CASE(btree_data_write_enospc, "btree", FIO_WRITE, ".bt", ENOSPC, true, 2, true)
CASE(btree_data_write_eio_once, "btree", FIO_WRITE, ".bt", EIO, false, 3, true)
CASE(btree_data_sync_eio, "btree", FIO_SYNC, ".bt", EIO, true, 2, true)
CASE(btree_turtle_write_enospc, "btree", FIO_WRITE | FIO_SYNC, "turtle", ENOSPC, true, 2, true)
CASE(btree_turtle_rename_eio_once, "btree", FIO_RENAME, "turtle", EIO, false, 2, true)

/* A checkpoint whose sync failed may have left clean pages in memory that
 * the disk lost: a later checkpoint must not be allowed to name them.  The
 * engine refuses writes from then on, even once the fault is gone, and the
 * reopened database has every acknowledged write (the log holds them). */
Test(faults, btree_failed_checkpoint_stops_writes)
{
    char dir[64] = "/tmp/mdfault.XXXXXX", msg[1024];
    md_db *db;
    md_error err;
    int code = 0;
    cr_assert(mkdtemp(dir));
    bson_t *o = fault_opts("btree");
    cr_assert_eq(md_db_open(dir, o, &db, &err), 0, "open: %s", err.message);
    bson_t *ins = BCON_NEW("insert", "c", "documents", "[", "{", "_id", BCON_INT32(1), "}", "]",
                           "writeConcern", "{", "j", BCON_BOOL(true), "}");
    cr_assert_eq(cmd_code(db, ins, msg, sizeof msg), 0, "%s", msg);
    bson_destroy(ins);
    fio_fail(FIO_SYNC, ".bt", 1, EIO, false);
    bson_t *f = BCON_NEW("fsync", BCON_INT32(1));
    cr_assert_eq(cmd_code(db, f, msg, sizeof msg), MD_CODE_FILE_STREAM_FAILED, "%s", msg);
    bson_destroy(f);
    fio_reset();
    ins = BCON_NEW("insert", "c", "documents", "[", "{", "_id", BCON_INT32(2), "}", "]");
    bson_t reply;
    cr_assert_eq(md_db_command(db, ins, &reply, &err), 0);
    bson_iter_t it;
    cr_assert(bson_iter_init(&it, &reply) &&
                  bson_iter_find_descendant(&it, "writeErrors.0.code", &it) &&
                  (code = (int)bson_iter_as_int64(&it)) != 0,
              "the write after a failed checkpoint was accepted");
    cr_assert(code == MD_CODE_FILE_STREAM_FAILED || code == MD_CODE_ILLEGAL_OPERATION,
              "code %d", code);
    bson_destroy(&reply);
    bson_destroy(ins);
    md_db_close(db);
    cr_assert_eq(md_db_open(dir, o, &db, &err), 0, "reopen: %s", err.message);
    expect_count(db, "c", 1);
    bson_t *v = BCON_NEW("validate", "c", "full", BCON_BOOL(true));
    cr_assert_eq(md_db_command(db, v, &reply, &err), 0, "%s", err.message);
    cr_assert(bson_iter_init_find(&it, &reply, "valid") && bson_iter_as_bool(&it));
    bson_destroy(&reply);
    bson_destroy(v);
    md_db_close(db);
    bson_destroy(o);
    nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* The log's flush thread writes and fsyncs outside the mutex commits append
 * under: with its fdatasync held, commits still go through (before, every
 * commit waited for the fsync under the engine's exclusive latch, a stall
 * of every reader and writer each commitIntervalMs). */
static void *release_later(void *arg)
{
    volatile int *done = arg;
    for (int i = 0; i < 1000 && !__atomic_load_n(done, __ATOMIC_ACQUIRE); i++)
        usleep(10000);
    bool late = !__atomic_load_n(done, __ATOMIC_ACQUIRE);
    fio_release_sync();
    return (void *)(intptr_t)late;
}

Test(faults, btree_commit_does_not_wait_for_the_log_fsync)
{
    char dir[64] = "/tmp/mdfault.XXXXXX", msg[1024];
    md_db *db;
    md_error err;
    cr_assert(mkdtemp(dir));
    bson_t *o = BCON_NEW("engine", "btree", "btree", "{", "commitIntervalMs", BCON_INT32(10),
                         "checkpointIntervalSecs", BCON_INT32(3600), "}");
    cr_assert_eq(md_db_open(dir, o, &db, &err), 0, "open: %s", err.message);
    fio_hold_sync("/log/btlog.");
    bson_t *ins = BCON_NEW("insert", "c", "documents", "[", "{", "_id", BCON_INT32(0), "}", "]");
    cr_assert_eq(cmd_code(db, ins, msg, sizeof msg), 0, "%s", msg);
    bson_destroy(ins);
    for (int i = 0; i < 1000 && !fio_sync_held(); i++)
        usleep(10000);
    cr_assert(fio_sync_held(), "the flush thread never synced the log");
    int done = 0;
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, release_later, &done), 0);
    for (int i = 1; i <= 50; i++) {
        ins = BCON_NEW("insert", "c", "documents", "[", "{", "_id", BCON_INT32(i), "}", "]");
        cr_assert_eq(cmd_code(db, ins, msg, sizeof msg), 0, "%s", msg);
        bson_destroy(ins);
    }
    bool still = fio_sync_held();
    __atomic_store_n(&done, 1, __ATOMIC_RELEASE);
    void *late;
    pthread_join(th, &late);
    cr_assert(!late, "the commits waited for the held fsync");
    cr_assert(still, "the fsync was released before the commits ended");
    md_db_close(db);
    /* and every commit is in the log */
    cr_assert_eq(md_db_open(dir, o, &db, &err), 0, "reopen: %s", err.message);
    expect_count(db, "c", 51);
    md_db_close(db);
    bson_destroy(o);
    nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}
