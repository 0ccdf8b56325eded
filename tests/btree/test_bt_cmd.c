/*
 * test_bt_cmd.c -- the btree engine end to end through md_db_command(), as
 * a MongoDB user drives it: a cache a tenth of the data size (reads,
 * updates and validate still work), block compressors chosen with
 * create's storageEngine.btree.configString, collStats' btree statistics
 * (current page counts, compression ratio) across a reopen, and compact.
 */
#include <criterion/criterion.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "minidoc.h"

static char CDIR[64];
static md_db *DB;

static void open_db(const char *opts_json)
{
    bson_error_t berr;
    md_error err;
    bson_t *o = bson_new_from_json((const uint8_t *)opts_json, -1, &berr);
    cr_assert(o, "%s", berr.message);
    cr_assert_eq(md_db_open(CDIR, o, &DB, &err), 0, "md_db_open: %s", err.message);
    bson_destroy(o);
}

static void fx_init(void)
{
    snprintf(CDIR, sizeof CDIR, "/tmp/md_btcmd_XXXXXX");
    cr_assert(mkdtemp(CDIR));
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    return remove(p);
}

static void fx_fini(void)
{
    md_db_close(DB);
    DB = NULL;
    nftw(CDIR, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(bt_cmd, .init = fx_init, .fini = fx_fini);

/* Run a command that must succeed (no writeErrors); reply returned. */
static bson_t *ok(bson_t *cmd)
{
    md_error err;
    bson_iter_t it;
    bson_t tmp;
    int rc = md_db_command(DB, cmd, &tmp, &err);
    char *j = bson_as_relaxed_extended_json(cmd, NULL);
    cr_assert_eq(rc, 0, "%s: %s", j, err.message);
    cr_assert_not(bson_iter_init_find(&it, &tmp, "writeErrors"), "%s: write errors", j);
    bson_free(j);
    bson_t *r = bson_copy(&tmp);
    bson_destroy(&tmp);
    bson_destroy(cmd);
    return r;
}

static bson_t *okj(const char *fmt, ...)
{
    char buf[4096];
    bson_error_t berr;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    bson_t *cmd = bson_new_from_json((const uint8_t *)buf, -1, &berr);
    cr_assert(cmd, "%s: %s", buf, berr.message);
    return ok(cmd);
}

static double num(const bson_t *r, const char *path)
{
    bson_iter_t it, f;
    cr_assert(bson_iter_init(&it, r) && bson_iter_find_descendant(&it, path, &f), "no %s",
              path);
    return bson_iter_as_double(&f);
}

static const char *str(const bson_t *r, const char *path)
{
    bson_iter_t it, f;
    cr_assert(bson_iter_init(&it, r) && bson_iter_find_descendant(&it, path, &f) &&
                  BSON_ITER_HOLDS_UTF8(&f),
              "no string %s", path);
    return bson_iter_utf8(&f, NULL);
}

static void expect_valid(const char *coll)
{
    bson_t *r = okj("{\"validate\": \"%s\", \"full\": true}", coll);
    bson_iter_t it;
    char *j = bson_as_relaxed_extended_json(r, NULL);
    cr_assert(bson_iter_init_find(&it, r, "valid") && bson_iter_as_bool(&it), "%s", j);
    bson_free(j);
    bson_destroy(r);
}

/* Insert docs [from, to) of about `pad` + 40 bytes into coll. */
static void insert_range(const char *coll, int from, int to, int pad)
{
    char *s = malloc((size_t)pad + 1), key[16];
    for (int b = from; b < to; b += 500) {
        bson_t *cmd = bson_new(), arr, d;
        BSON_APPEND_UTF8(cmd, "insert", coll);
        BSON_APPEND_ARRAY_BEGIN(cmd, "documents", &arr);
        for (int i = b; i < b + 500 && i < to; i++) {
            for (int k = 0; k < pad; k++)
                s[k] = (char)('a' + (i + k / 7) % 26);
            s[pad] = '\0';
            snprintf(key, sizeof key, "%d", i - b);
            BSON_APPEND_DOCUMENT_BEGIN(&arr, key, &d);
            BSON_APPEND_INT32(&d, "_id", i);
            BSON_APPEND_INT32(&d, "n", 0);
            BSON_APPEND_UTF8(&d, "s", s);
            bson_append_document_end(&arr, &d);
        }
        bson_append_array_end(cmd, &arr);
        bson_destroy(ok(cmd));
    }
    free(s);
}

/* The data is ten times the cache: every read and write below goes through
 * eviction (clean pages dropped, dirty ones reconciled first). */
Test(bt_cmd, cache_a_tenth_of_the_data)
{
    enum { N = 22000, PAD = 480, CACHE = 1 << 20 };
    open_db("{\"engine\": \"btree\", \"btree\": {\"cacheSize\": 1048576, "
            "\"blockCompressor\": \"none\"}}");
    insert_range("c", 0, N, PAD);
    bson_t *r = okj("{\"collStats\": \"c\"}");
    cr_assert_geq(num(r, "size"), 10.0 * CACHE, "data %g is not 10x the cache",
                  num(r, "size"));
    bson_destroy(r);
    r = okj("{\"serverStatus\": 1}");
    cr_assert_gt(num(r, "btree.evictions"), 0);
    cr_assert_leq(num(r, "btree.cacheBytes"), 2.0 * CACHE, "cache %g", num(r, "btree.cacheBytes"));
    cr_assert_eq(num(r, "btree.cacheMaxBytes"), CACHE);
    bson_destroy(r);
    /* point reads all over the collection, and a full scan */
    for (int i = 0; i < N; i += 37) {
        r = okj("{\"find\": \"c\", \"filter\": {\"_id\": %d}}", i);
        cr_assert_eq(num(r, "cursor.firstBatch.0._id"), i);
        bson_destroy(r);
    }
    r = okj("{\"count\": \"c\", \"query\": {\"n\": 0}}");
    cr_assert_eq(num(r, "n"), N);
    bson_destroy(r);
    /* every document rewritten (and grown) under the same small cache */
    r = okj("{\"update\": \"c\", \"updates\": [{\"q\": {}, \"u\": {\"$inc\": {\"n\": 1}, "
            "\"$set\": {\"t\": \"grown\"}}, \"multi\": true}]}");
    cr_assert_eq(num(r, "nModified"), N);
    bson_destroy(r);
    r = okj("{\"count\": \"c\", \"query\": {\"n\": 1, \"t\": \"grown\"}}");
    cr_assert_eq(num(r, "n"), N);
    bson_destroy(r);
    r = okj("{\"serverStatus\": 1}");
    cr_assert_leq(num(r, "btree.cacheBytes"), 2.0 * CACHE, "cache %g", num(r, "btree.cacheBytes"));
    bson_destroy(r);
    expect_valid("c");
    md_db_close(DB);
    open_db("{\"btree\": {\"cacheSize\": 1048576}}");
    r = okj("{\"find\": \"c\", \"filter\": {\"_id\": %d}}", N - 1);
    cr_assert_eq(num(r, "cursor.firstBatch.0.n"), 1);
    bson_destroy(r);
    expect_valid("c");
}

static double ratio_after_fsync(const char *coll, const char *want_comp)
{
    bson_destroy(okj("{\"fsync\": 1}"));
    bson_t *r = okj("{\"collStats\": \"%s\"}", coll);
    cr_assert_str_eq(str(r, "btree.compressor"), want_comp);
    double ratio = num(r, "btree.compressionRatio");
    bson_destroy(r);
    return ratio;
}

Test(bt_cmd, compressors_from_config_string)
{
    static const char *const comps[] = {"none", "snappy", "zstd"};
    double ratio[3];
    open_db("{}");
    for (int k = 0; k < 3; k++) {
        char name[16];
        snprintf(name, sizeof name, "c_%s", comps[k]);
        bson_destroy(okj("{\"create\": \"%s\", \"storageEngine\": {\"btree\": "
                         "{\"configString\": \"block_compressor=%s\"}}}",
                         name, comps[k]));
        insert_range(name, 0, 3000, 200);
        ratio[k] = ratio_after_fsync(name, comps[k]);
        expect_valid(name);
    }
    cr_assert_float_eq(ratio[0], 1.0, 1e-9);
    cr_assert_gt(ratio[1], 1.5, "snappy %f", ratio[1]);
    cr_assert_gt(ratio[2], ratio[1], "zstd %f <= snappy %f", ratio[2], ratio[1]);
    /* the default is snappy; the setting and the ratio survive a reopen */
    bson_destroy(okj("{\"create\": \"d\"}"));
    insert_range("d", 0, 10, 20);
    cr_assert_gt(ratio_after_fsync("d", "snappy"), 1.0);
    md_db_close(DB);
    open_db("{}");
    bson_t *r = okj("{\"collStats\": \"c_zstd\"}");
    cr_assert_str_eq(str(r, "btree.compressor"), "zstd");
    cr_assert_float_eq(num(r, "btree.compressionRatio"), ratio[2], 1e-9);
    bson_destroy(r);
    r = okj("{\"listCollections\": 1, \"filter\": {\"name\": \"c_zstd\"}}");
    cr_assert_str_eq(str(r, "cursor.firstBatch.0.options.storageEngine.btree.configString"),
                     "block_compressor=zstd");
    bson_destroy(r);
    /* bad config strings are refused before anything is created */
    bson_t reply;
    md_error err;
    static const char *const bad[] = {"block_compressor=lz4", "leaf_page_max=64KB",
                                      "block_compressor", "block_compressor=zstd,foo=1"};
    for (int i = 0; i < 4; i++) {
        char cmd[256];
        snprintf(cmd, sizeof cmd,
                 "{\"create\": \"bad\", \"storageEngine\": {\"btree\": "
                 "{\"configString\": \"%s\"}}}",
                 bad[i]);
        cr_assert_lt(md_db_command_json(DB, cmd, &reply, &err), 0, "%s", bad[i]);
        cr_assert_eq(err.code, 2, "%s: %s", bad[i], err.message);
        bson_destroy(&reply);
    }
    cr_assert_lt(md_db_command_json(DB, "{\"collStats\": \"bad\"}", &reply, &err), 0);
    bson_destroy(&reply);
}

/* pages counts the tree as it is now: it grows with inserts (before any
 * checkpoint), shrinks with deletes, and is the same after a reopen. */
Test(bt_cmd, page_counts_are_the_current_tree)
{
    open_db("{\"engine\": \"btree\"}");
    insert_range("c", 0, 4000, 400);
    bson_t *r = okj("{\"collStats\": \"c\"}");
    double leaf = num(r, "btree.pages.leaf"), inner = num(r, "btree.pages.internal");
    cr_assert_gt(leaf, 40);
    cr_assert_geq(inner, 1);
    bson_destroy(r);
    bson_destroy(okj("{\"fsync\": 1}"));
    r = okj("{\"collStats\": \"c\"}");
    cr_assert_eq(num(r, "btree.pages.leaf"), leaf, "fsync changed no page");
    bson_destroy(r);
    bson_destroy(okj("{\"delete\": \"c\", \"deletes\": [{\"q\": {\"_id\": {\"$gte\": 100}}, "
                     "\"limit\": 0}]}"));
    r = okj("{\"collStats\": \"c\"}");
    double after = num(r, "btree.pages.leaf");
    cr_assert_lt(after, leaf / 4, "leaf pages %g after deleting most of %g", after, leaf);
    bson_destroy(r);
    expect_valid("c");
    md_db_close(DB);
    open_db("{}");
    r = okj("{\"collStats\": \"c\"}");
    cr_assert_eq(num(r, "btree.pages.leaf"), after);
    cr_assert_eq(num(r, "count"), 100);
    bson_destroy(r);
    expect_valid("c");
}

static int count_files(const char *suffix)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "ls %s | grep -c '%s$'", CDIR, suffix);
    FILE *f = popen(cmd, "r");
    int n = -1;
    cr_assert(f && fscanf(f, "%d", &n) == 1);
    pclose(f);
    return n;
}

/* compact rewrites the collection and its indexes into new files and gives
 * the free space back: storageSize shrinks, the data and RecordIds stay,
 * the old files are gone after the checkpoint, and a reopen finds it all. */
Test(bt_cmd, compact_releases_space)
{
    open_db("{\"engine\": \"btree\", \"btree\": {\"blockCompressor\": \"none\"}}");
    insert_range("c", 0, 8000, 300);
    bson_destroy(okj("{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"s\": 1}, "
                     "\"name\": \"s_1\"}]}"));
    bson_destroy(okj("{\"fsync\": 1}")); /* every page written: the file is full */
    bson_destroy(okj("{\"delete\": \"c\", \"deletes\": [{\"q\": {\"_id\": {\"$gte\": 400}}, "
                     "\"limit\": 0}]}"));
    bson_destroy(okj("{\"fsync\": 1}"));
    bson_t *r = okj("{\"collStats\": \"c\"}");
    double before = num(r, "storageSize"), ibefore = num(r, "indexSizes.s_1");
    bson_destroy(r);
    int files = count_files(".bt");
    bson_destroy(okj("{\"compact\": \"c\"}"));
    r = okj("{\"collStats\": \"c\"}");
    double after = num(r, "storageSize"), iafter = num(r, "indexSizes.s_1");
    cr_assert_eq(num(r, "count"), 400);
    cr_assert_lt(after, before / 5, "storageSize %g -> %g", before, after);
    cr_assert_lt(iafter, ibefore / 2, "index size %g -> %g", ibefore, iafter);
    bson_destroy(r);
    cr_assert_eq(count_files(".bt"), files, "old files are removed after the checkpoint");
    expect_valid("c");
    r = okj("{\"find\": \"c\", \"filter\": {\"_id\": 399}}");
    cr_assert_eq(num(r, "cursor.firstBatch.0._id"), 399);
    bson_destroy(r);
    md_db_close(DB);
    open_db("{}");
    r = okj("{\"count\": \"c\"}");
    cr_assert_eq(num(r, "n"), 400);
    bson_destroy(r);
    r = okj("{\"collStats\": \"c\"}");
    cr_assert_eq(num(r, "storageSize"), after);
    bson_destroy(r);
    expect_valid("c");
    insert_range("c", 400, 500, 300); /* and it takes writes again */
    expect_valid("c");
}

/* btree is the default engine (as wiredTiger since MongoDB 3.2); a
 * directory keeps the engine that created it, and naming another one is
 * MongoDB's error 28662. */
Test(bt_cmd, default_engine_and_detection)
{
    md_error err;
    md_db *db2;
    open_db("{}");
    bson_t *r = okj("{\"serverStatus\": 1}");
    cr_assert_str_eq(str(r, "storageEngine.name"), "btree");
    bson_destroy(r);
    md_db_close(DB);
    DB = NULL;
    bson_t *o = BCON_NEW("engine", BCON_UTF8("mmapv1"));
    cr_assert_lt(md_db_open(CDIR, o, &db2, &err), 0);
    cr_assert_eq(err.code, 28662);
    cr_assert_str_eq(err.code_name, "Location28662");
    char want[256];
    snprintf(want, sizeof want,
             "Detected data files in %s created by the 'btree' storage engine, but the "
             "specified storage engine was 'mmapv1'.",
             CDIR);
    cr_assert_str_eq(err.message, want);
    bson_destroy(o);
    open_db("{\"engine\": \"btree\"}");
    md_db_close(DB);
    DB = NULL;
    /* an mmapv1 directory opens as mmapv1 when no engine is named */
    char dir2[64];
    snprintf(dir2, sizeof dir2, "/tmp/md_btcmd_XXXXXX");
    cr_assert(mkdtemp(dir2));
    o = BCON_NEW("engine", BCON_UTF8("mmapv1"), "mmapv1", "{", "firstFileSize",
                 BCON_INT32(131072), "nsSize", BCON_INT32(65536), "}");
    cr_assert_eq(md_db_open(dir2, o, &DB, &err), 0, "%s", err.message);
    md_db_close(DB);
    DB = NULL;
    bson_destroy(o);
    o = BCON_NEW("mmapv1", "{", "firstFileSize", BCON_INT32(131072), "}");
    cr_assert_eq(md_db_open(dir2, o, &DB, &err), 0, "%s", err.message);
    r = okj("{\"serverStatus\": 1}");
    cr_assert_str_eq(str(r, "storageEngine.name"), "mmapv1");
    bson_destroy(r);
    md_db_close(DB);
    DB = NULL;
    bson_destroy(o);
    o = BCON_NEW("engine", BCON_UTF8("btree"));
    cr_assert_lt(md_db_open(dir2, o, &db2, &err), 0);
    cr_assert_eq(err.code, 28662);
    bson_destroy(o);
    nftw(dir2, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}
