/*
 * test_mm_engine.c -- opening and closing the mmapv1 engine: the directory
 * lock (DBPathInUse, in-process and from another process), option checks,
 * the files it creates, damaged .ns and data file headers (MD_ECORRUPT
 * naming file and offset, never a crash), and the status section.
 */
#include <sys/wait.h>

#include "test_mm_util.h"

Test(mm_engine, creates_directory_and_files)
{
    mmt t;
    mmt_open(&t);
    cr_assert_eq(mmt_file_size(&t, ".ns"), 65536);
    cr_assert_eq(mmt_file_size(&t, ".0"), 65536);
    char path[128], buf[32] = "";
    snprintf(path, sizeof path, "%s/mongod.lock", t.dir);
    FILE *f = fopen(path, "r");
    cr_assert(f && fgets(buf, sizeof buf, f));
    fclose(f);
    cr_assert_eq(atol(buf), (long)getpid());
    mm_engine *e = (mm_engine *)t.e;
    cr_assert_eq(e->nslots, 65536 / 640 - 1);
    const mm_dfh *h = mm_dfh_at(e, 0);
    cr_assert_eq(h->version, 4);
    cr_assert_eq(h->file_length, 65536);
    cr_assert_eq(h->unused.ofs, 8192);
    cr_assert_eq(h->unused_length, 65536 - 8192 - 16);
    mmt_close(&t);
}

Test(mm_engine, nested_directory_is_created)
{
    char base[64], dir[128];
    snprintf(base, sizeof base, "/tmp/mmtest.XXXXXX");
    cr_assert(mkdtemp(base));
    snprintf(dir, sizeof dir, "%s/a/b", base);
    bson_t opts;
    mmt_options(&opts, 65536, 65536, false);
    eng_engine *e;
    md_error err;
    cr_assert_eq(eng_open(&mm_engine_ops, dir, "db", &opts, &e, &err), 0, "%s", err.message);
    eng_close(e);
    bson_destroy(&opts);
    nftw(base, mmt_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

Test(mm_engine, second_open_in_process_is_busy)
{
    mmt t;
    mmt_open(&t);
    eng_engine *e2 = NULL;
    md_error err;
    int rc = eng_open(&mm_engine_ops, t.dir, "test", &t.opts, &e2, &err);
    cr_assert_eq(rc, MD_EBUSY);
    cr_assert_null(e2);
    cr_assert_eq(err.code, 98);
    cr_assert_str_eq(err.code_name, "DBPathInUse");
    char want[256];
    snprintf(want, sizeof want,
             "Unable to lock file: %s/mongod.lock. Is a mongod instance already running?", t.dir);
    cr_assert_str_eq(err.message, want);
    /* the failed open touched nothing: the first one still works */
    eng_rs *rs = mmt_coll(&t, "test.c", ENG_ALLOC_POWEROF2);
    mmt_insert(&t, rs, 1, 100);
    eng_rs_close(rs);
    mmt_reopen(&t); /* the lock is released by close */
    mmt_close(&t);
}

Test(mm_engine, second_open_from_another_process_is_busy)
{
    mmt t;
    mmt_open(&t);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        eng_engine *e2;
        md_error err;
        int rc = eng_open(&mm_engine_ops, t.dir, "test", &t.opts, &e2, &err);
        _exit(rc == MD_EBUSY && err.code == 98 ? 0 : 1);
    }
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    mmt_close(&t);
}

static int open_with(const char *json, md_error *err)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/mmtest.XXXXXX");
    cr_assert(mkdtemp(dir));
    bson_error_t berr;
    bson_t *opts = bson_new_from_json((const uint8_t *)json, -1, &berr);
    cr_assert(opts, "%s", berr.message);
    eng_engine *e = NULL;
    int rc = eng_open(&mm_engine_ops, dir, "test", opts, &e, err);
    if (rc == 0)
        eng_close(e);
    bson_destroy(opts);
    nftw(dir, mmt_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    return rc;
}

Test(mm_engine, options_are_checked)
{
    md_error err;
    cr_assert_eq(open_with("{\"mmapv1\": {\"firstFileSize\": 1000}}", &err), MD_EINVAL);
    cr_assert_eq(err.code, MD_CODE_BAD_VALUE);
    cr_assert_eq(open_with("{\"mmapv1\": {\"firstFileSize\": 69632.5}}", &err), MD_EINVAL);
    cr_assert_eq(open_with("{\"mmapv1\": {\"nsSize\": 100}}", &err), MD_EINVAL);
    cr_assert_eq(open_with("{\"mmapv1\": {\"nsSize\": \"big\"}}", &err), MD_EINVAL);
    cr_assert_eq(open_with("{\"mmapv1\": 5}", &err), MD_EINVAL);
    cr_assert_eq(open_with("{\"smallFiles\": true, \"mmapv1\": {\"nsSize\": 65536}}", &err), 0,
                 "%s", err.message);
    md_error e2;
    eng_engine *e;
    cr_assert_eq(eng_open(&mm_engine_ops, "/tmp", "bad.name", NULL, &e, &e2), MD_EINVAL);
}

Test(mm_engine, small_files_sizes)
{
    mmt t;
    memset(&t, 0, sizeof t);
    snprintf(t.dir, sizeof t.dir, "/tmp/mmtest.XXXXXX");
    cr_assert(mkdtemp(t.dir));
    bson_t sub;
    bson_init(&t.opts);
    BSON_APPEND_BOOL(&t.opts, "smallFiles", true);
    BSON_APPEND_DOCUMENT_BEGIN(&t.opts, "mmapv1", &sub);
    BSON_APPEND_INT32(&sub, "nsSize", 65536);
    bson_append_document_end(&t.opts, &sub);
    cr_assert_eq(mmt_try_open(&t), 0, "%s", t.err.message);
    cr_assert_eq(mmt_file_size(&t, ".0"), 16 * 1024 * 1024);
    mm_engine *e = (mm_engine *)t.e;
    cr_assert_eq(mm_file_default_size(e, 4), 256 * 1024 * 1024);
    cr_assert_eq(mm_file_default_size(e, 5), 0x7ff00000 / 4);
    cr_assert_eq(mm_file_default_size(e, 9), 0x7ff00000 / 4);
    mmt_close(&t);
}

Test(mm_engine, default_file_sizes)
{
    mmt t;
    mmt_open(&t);
    mm_engine *e = (mm_engine *)t.e;
    int64_t first = e->first_file_size;
    e->first_file_size = 64 << 20; /* the sizes MongoDB uses without options */
    cr_assert_eq(mm_file_default_size(e, 0), 64 << 20);
    cr_assert_eq(mm_file_default_size(e, 4), 1024LL << 20);
    cr_assert_eq(mm_file_default_size(e, 5), 0x7ff00000);
    cr_assert_eq(mm_file_default_size(e, 100), 0x7ff00000);
    e->first_file_size = first;
    mmt_close(&t);
}

/* Close, damage the file, reopen: MD_ECORRUPT whose message names `want`. */
static void expect_corrupt(mmt *t, const char *file, int64_t ofs, int32_t v, const char *want)
{
    char path[128];
    eng_close(t->e);
    t->e = NULL;
    snprintf(path, sizeof path, "%s/%s", t->dir, file);
    int fd = open(path, O_RDWR);
    cr_assert(fd >= 0);
    cr_assert_eq(pwrite(fd, &v, 4, ofs), 4);
    close(fd);
    int rc = mmt_try_open(t);
    cr_assert_eq(rc, MD_ECORRUPT, "got %s", md_strerror(rc));
    cr_assert_eq(t->err.code, MD_CODE_DATA_CORRUPTION_DETECTED);
    cr_assert(strstr(t->err.message, want), "message: %s", t->err.message);
    cr_assert(strstr(t->err.message, file), "message: %s", t->err.message);
}

Test(mm_engine, damaged_ns_header_is_reported)
{
    mmt t;
    mmt_open(&t);
    expect_corrupt(&t, "test.ns", 0, 0x12345678, "offset 0");
    mmt_close(&t);
}

Test(mm_engine, damaged_ns_slot_is_reported)
{
    mmt t;
    mmt_open(&t);
    eng_rs *rs = mmt_coll(&t, "test.c", ENG_ALLOC_POWEROF2);
    eng_rs_close(rs);
    mm_engine *e = (mm_engine *)t.e;
    int32_t slot = mm_ns_find(e, "test.c");
    /* firstExtent.ofs pointing into the middle of nowhere */
    expect_corrupt(&t, "test.ns", (int64_t)slot * 640 + 136 + 4, 0x3000, "firstExtent");
    mmt_close(&t);
}

Test(mm_engine, damaged_data_header_is_reported)
{
    mmt t;
    mmt_open(&t);
    expect_corrupt(&t, "test.0", 8, 12345, "offset 8");
    mmt_close(&t);
}

Test(mm_engine, damaged_first_extent_is_reported)
{
    mmt t;
    mmt_open(&t);
    eng_rs *rs = mmt_coll(&t, "test.c", ENG_ALLOC_POWEROF2);
    eng_rs_close(rs);
    expect_corrupt(&t, "test.0", 8192, 0, "not an extent");
    mmt_close(&t);
}

Test(mm_engine, missing_ns_file_next_to_data_is_reported)
{
    mmt t;
    mmt_open(&t);
    eng_close(t.e);
    t.e = NULL;
    char path[128];
    snprintf(path, sizeof path, "%s/test.ns", t.dir);
    cr_assert_eq(unlink(path), 0);
    cr_assert_eq(mmt_try_open(&t), MD_ECORRUPT);
    cr_assert(strstr(t.err.message, "test.ns is missing"), "%s", t.err.message);
    mmt_close(&t);
}

Test(mm_engine, truncated_data_file_is_reported)
{
    mmt t;
    mmt_open(&t);
    eng_close(t.e);
    t.e = NULL;
    char path[128];
    snprintf(path, sizeof path, "%s/test.0", t.dir);
    cr_assert_eq(truncate(path, 40960), 0);
    cr_assert_eq(mmt_try_open(&t), MD_ECORRUPT);
    cr_assert(strstr(t.err.message, "fileLength"), "%s", t.err.message);
    mmt_close(&t);
}

Test(mm_engine, status_section)
{
    mmt t;
    mmt_open(&t);
    bson_t st = BSON_INITIALIZER;
    t.e->ops->append_status(t.e, &st);
    cr_assert_eq(mmt_bson_int(&st, "mmapv1.dataFiles"), 1);
    cr_assert_eq(mmt_bson_int(&st, "mmapv1.mappedBytes"), 65536 + 65536);
    cr_assert_eq(mmt_bson_int(&st, "mmapv1.fileSizes.0"), 65536);
    cr_assert_eq(mmt_bson_int(&st, "mmapv1.totalMoves"), 0);
    bson_destroy(&st);
    cr_assert_str_eq(mm_engine_ops.name, "mmapv1");
    cr_assert(mm_engine_ops.has_damages && mm_engine_ops.collection_lock);
    cr_assert_eq(eng_flush(t.e, true, NULL), 0);
    mmt_close(&t);
}

Test(mm_engine, ns_file_full_is_enospc)
{
    mmt t;
    memset(&t, 0, sizeof t);
    snprintf(t.dir, sizeof t.dir, "/tmp/mmtest.XXXXXX");
    cr_assert(mkdtemp(t.dir));
    mmt_options(&t.opts, 65536, 16384, false); /* 24 slots, one is the catalog */
    cr_assert_eq(mmt_try_open(&t), 0, "%s", t.err.message);
    eng_txn *x = mmt_begin(&t);
    int rc = 0, n = 0;
    char name[32];
    while (rc == 0 && n < 100) {
        snprintf(name, sizeof name, "test.i.$%d", n++);
        rc = eng_ss_create(t.e, x, name, &t.err);
    }
    cr_assert_eq(rc, MD_ENOSPC);
    cr_assert_eq(n, 16384 / 640 - 1 - 1 + 1);
    mmt_commit(x);
    mmt_reopen(&t);
    mmt_verify_clean(&t);
    mmt_close(&t);
}
