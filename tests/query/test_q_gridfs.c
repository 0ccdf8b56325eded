/*
 * test_q_gridfs.c -- GridFS (query/q_gridfs.c) on every engine: byte-exact
 * round trips across chunk boundaries, MongoDB's files/chunks layout and
 * md5, versions, streams, deletes, and damaged files (a missing, short or
 * extra chunk) reported instead of read short.
 */
#include "q_int.h"
#include "test_q_util.h"

static uint8_t *pattern_bytes(size_t n, uint32_t seed)
{
    uint8_t *p = malloc(n ? n : 1);
    cr_assert_not_null(p);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (uint8_t)(seed >> 16);
    }
    return p;
}

static void md5_hex(const uint8_t *p, size_t n, char out[33])
{
    q_md5 m;
    uint8_t d[16];
    q_md5_init(&m);
    q_md5_append(&m, p, n);
    q_md5_finish(&m, d);
    for (int i = 0; i < 16; i++)
        sprintf(out + 2 * i, "%02x", d[i]);
}

static md_gridfs *open_fs(tdb *t)
{
    md_gridfs *fs;
    md_error err;
    cr_assert_eq(md_gridfs_open(t->db, NULL, &fs, &err), 0, "%s", err.message);
    return fs;
}

Test(q_gridfs, round_trip_sizes_and_layout)
{
    static const size_t sizes[] = {0, 1, 1000, 262143, 262144, 262145, 3 * 262144 + 17};
    tdb t;
    FOR_EACH_ENGINE(t) {
        md_gridfs *fs = open_fs(&t);
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            char name[32], hex[33];
            size_t n = sizes[k];
            uint8_t *data = pattern_bytes(n, (uint32_t)k + 1);
            bson_value_t id;
            md_error err;
            snprintf(name, sizeof name, "f%zu", k);
            bson_t *opts = BCON_NEW("contentType", BCON_UTF8("application/octet-stream"),
                                    "metadata", "{", "k", BCON_INT64((int64_t)k), "}");
            cr_assert_eq(md_gridfs_put(fs, name, data, n, opts, &id, &err), 0, "%s",
                         err.message);
            bson_destroy(opts);
            cr_assert_eq(id.value_type, BSON_TYPE_OID);
            void *back;
            size_t blen;
            bson_t file;
            cr_assert_eq(md_gridfs_get(fs, name, -1, &back, &blen, &file, &err), 0, "[%s] %s",
                         t.engine, err.message);
            cr_assert_eq(blen, n, "[%s] %zu bytes back of %zu", t.engine, blen, n);
            cr_assert(n == 0 || memcmp(back, data, n) == 0, "[%s] bytes differ", t.engine);
            /* the files document, in MongoDB's layout */
            md5_hex(data, n, hex);
            cr_assert_str_eq(t_str(&file, "md5"), hex);
            cr_assert_eq(t_i64(&file, "length"), (int64_t)n);
            cr_assert_eq(t_i64(&file, "chunkSize"), 262144);
            cr_assert_str_eq(t_str(&file, "filename"), name);
            cr_assert_str_eq(t_str(&file, "contentType"), "application/octet-stream");
            cr_assert_eq(t_i64(&file, "metadata.k"), (int64_t)k);
            bson_iter_t it;
            cr_assert(t_find(&file, "uploadDate", &it) && BSON_ITER_HOLDS_DATE_TIME(&it));
            cr_assert(t_find(&file, "length", &it) && BSON_ITER_HOLDS_INT64(&it));
            bson_destroy(&file);
            /* one chunk per 256 KiB, numbered from 0 */
            bson_t *q = bson_new();
            BSON_APPEND_VALUE(q, "files_id", &id);
            int64_t chunks;
            md_collection *c = md_db_get_collection(t.db, "fs.chunks");
            cr_assert_eq(md_collection_count(c, q, NULL, &chunks, &err), 0);
            cr_assert_eq(chunks, (int64_t)((n + 262143) / 262144));
            md_collection_destroy(c);
            bson_destroy(q);
            bson_value_destroy(&id);
            free(back);
            free(data);
        }
        /* MongoDB's indexes, the chunks' one unique */
        bson_t *r = T_OK(&t, "{\"listIndexes\": \"fs.chunks\"}");
        cr_assert_str_eq(t_str(r, "cursor.firstBatch.1.name"), "files_id_1_n_1");
        cr_assert(t_has(r, "cursor.firstBatch.1.unique"));
        bson_destroy(r);
        r = T_OK(&t, "{\"listIndexes\": \"fs.files\"}");
        cr_assert_str_eq(t_str(r, "cursor.firstBatch.1.name"), "filename_1_uploadDate_1");
        bson_destroy(r);
        md_gridfs_destroy(fs);
    }
}

Test(q_gridfs, versions_streams_and_delete)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        md_gridfs *fs = open_fs(&t);
        md_error err;
        /* three versions of one name, each a distinct size */
        for (int v = 0; v < 3; v++) {
            uint8_t *d = pattern_bytes((size_t)(v + 1) * 100, 7);
            bson_t *opts = BCON_NEW("chunkSizeBytes", BCON_INT32(64));
            cr_assert_eq(md_gridfs_put(fs, "doc.txt", d, (size_t)(v + 1) * 100, opts, NULL,
                                       &err),
                         0, "%s", err.message);
            bson_destroy(opts);
            free(d);
            t_sleep_ms(2); /* distinct uploadDates */
        }
        const int versions[][2] = {{0, 100}, {1, 200}, {2, 300}, {-1, 300}, {-2, 200}, {-3, 100}};
        for (size_t i = 0; i < 6; i++) {
            void *b;
            size_t n;
            cr_assert_eq(md_gridfs_get(fs, "doc.txt", versions[i][0], &b, &n, NULL, &err), 0,
                         "%s", err.message);
            cr_assert_eq(n, (size_t)versions[i][1], "[%s] version %d", t.engine, versions[i][0]);
            free(b);
        }
        void *b;
        size_t n;
        cr_assert_eq(md_gridfs_get(fs, "doc.txt", 3, &b, &n, NULL, &err), MD_NOTFOUND);
        cr_assert_eq(err.code, MD_CODE_NO_SUCH_KEY);
        cr_assert_eq(md_gridfs_get(fs, "nope", -1, &b, &n, NULL, &err), MD_NOTFOUND);

        /* a streamed upload in odd pieces reads back in other odd pieces */
        md_gridfs_file *up, *down;
        uint8_t *d = pattern_bytes(5000, 99);
        bson_t *opts = BCON_NEW("chunkSizeBytes", BCON_INT32(1000), "_id", BCON_UTF8("s1"));
        cr_assert_eq(md_gridfs_open_upload(fs, "stream.bin", opts, &up, &err), 0);
        bson_destroy(opts);
        for (size_t off = 0, step = 1; off < 5000; off += step, step = step * 7 % 997 + 1)
            cr_assert_eq(md_gridfs_write(up, d + off, off + step > 5000 ? 5000 - off : step,
                                         &err),
                         0);
        bson_value_t id;
        cr_assert_eq(md_gridfs_close(up, &id, &err), 0, "%s", err.message);
        cr_assert_eq(id.value_type, BSON_TYPE_UTF8);
        cr_assert_eq(md_gridfs_open_download_by_id(fs, &id, &down, &err), 0, "%s", err.message);
        cr_assert_str_eq(t_str(md_gridfs_file_doc(down), "filename"), "stream.bin");
        uint8_t back[5000];
        size_t got = 0;
        for (size_t step = 3; got < 5000; step = step * 5 % 1301 + 1) {
            int64_t r = md_gridfs_read(down, back + got, step > 5000 - got ? 5000 - got : step,
                                       &err);
            cr_assert_gt(r, 0, "%s", err.message);
            got += (size_t)r;
        }
        cr_assert_eq(md_gridfs_read(down, back, 10, &err), 0);
        cr_assert(memcmp(back, d, 5000) == 0);
        md_gridfs_close(down, NULL, NULL);

        /* an aborted upload leaves no chunks and no file */
        cr_assert_eq(md_gridfs_open_upload(fs, "gone", NULL, &up, &err), 0);
        uint8_t *big = pattern_bytes(600000, 5);
        cr_assert_eq(md_gridfs_write(up, big, 600000, &err), 0);
        md_gridfs_abort(up);
        free(big);
        bson_t *r = T_OK(&t, "{\"count\": \"fs.chunks\"}");
        int64_t chunks_before = t_i64(r, "n");
        bson_destroy(r);
        cr_assert_eq(chunks_before, 3 * 0 + 2 + 4 + 5 + 5, "[%s] chunks: %lld", t.engine,
                     (long long)chunks_before);

        /* delete by name removes every version and its chunks */
        int64_t deleted;
        cr_assert_eq(md_gridfs_delete(fs, "doc.txt", &deleted, &err), 0, "%s", err.message);
        cr_assert_eq(deleted, 3);
        r = T_OK(&t, "{\"count\": \"fs.chunks\"}");
        cr_assert_eq(t_i64(r, "n"), 5);
        bson_destroy(r);
        cr_assert_eq(md_gridfs_delete_by_id(fs, &id, &err), 0);
        cr_assert_eq(md_gridfs_delete_by_id(fs, &id, &err), MD_NOTFOUND);
        r = T_OK(&t, "{\"count\": \"fs.chunks\"}");
        cr_assert_eq(t_i64(r, "n"), 0);
        bson_destroy(r);
        bson_value_destroy(&id);
        free(d);
        md_gridfs_destroy(fs);
    }
}

/* Damage one file's chunks by command and expect the named failure. */
static void expect_damage(tdb *t, md_gridfs *fs, const char *damage, const char *what)
{
    md_error err;
    uint8_t *d = pattern_bytes(1000, 3);
    bson_t *opts = BCON_NEW("chunkSizeBytes", BCON_INT32(300), "_id", BCON_UTF8("dmg"));
    cr_assert_eq(md_gridfs_put(fs, "dmg", d, 1000, opts, NULL, &err), 0, "%s", err.message);
    bson_destroy(opts);
    T_RUN(t, "%s", damage);
    void *b = NULL;
    size_t n;
    int rc = md_gridfs_get(fs, "dmg", -1, &b, &n, NULL, &err);
    cr_assert_eq(rc, MD_ECORRUPT, "[%s] %s: rc %d", t->engine, what, rc);
    cr_assert_eq(err.code, MD_CODE_DATA_CORRUPTION_DETECTED);
    cr_assert(strstr(err.message, what), "[%s] message: %s", t->engine, err.message);
    cr_assert_null(b);
    bson_value_t id = {.value_type = BSON_TYPE_UTF8};
    id.value.v_utf8.str = (char *)"dmg";
    id.value.v_utf8.len = 3;
    cr_assert_eq(md_gridfs_delete_by_id(fs, &id, &err), 0);
    free(d);
}

Test(q_gridfs, damaged_files_are_reported)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        md_gridfs *fs = open_fs(&t);
        expect_damage(&t, fs,
                      "{\"delete\": \"fs.chunks\", \"deletes\": [{\"q\": {\"files_id\": \"dmg\", "
                      "\"n\": 2}, \"limit\": 1}]}",
                      "ChunkIsMissing");
        expect_damage(&t, fs,
                      "{\"delete\": \"fs.chunks\", \"deletes\": [{\"q\": {\"files_id\": \"dmg\", "
                      "\"n\": 3}, \"limit\": 1}]}",
                      "ChunkIsMissing");
        expect_damage(&t, fs,
                      "{\"update\": \"fs.chunks\", \"updates\": [{\"q\": {\"files_id\": \"dmg\", "
                      "\"n\": 1}, \"u\": {\"$set\": {\"data\": {\"$binary\": {\"base64\": "
                      "\"AAAA\", \"subType\": \"00\"}}}}}]}",
                      "ChunkIsWrongSize");
        expect_damage(&t, fs,
                      "{\"insert\": \"fs.chunks\", \"documents\": [{\"files_id\": \"dmg\", \"n\": "
                      "4, \"data\": {\"$binary\": {\"base64\": \"AA==\", \"subType\": "
                      "\"00\"}}}]}",
                      "ExtraChunk");
        md_error err;
        md_gridfs_file *f;
        bson_t *bad = BCON_NEW("chunkSizeBytes", BCON_INT32(0));
        cr_assert_eq(md_gridfs_open_upload(fs, "x", bad, &f, &err), MD_EINVAL);
        bson_destroy(bad);
        bad = BCON_NEW("colour", BCON_UTF8("red"));
        cr_assert_eq(md_gridfs_open_upload(fs, "x", bad, &f, &err), MD_EINVAL);
        bson_destroy(bad);
        md_gridfs_destroy(fs);
    }
}
