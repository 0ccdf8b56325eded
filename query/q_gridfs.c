/*
 * q_gridfs.c -- GridFS: files larger than a document, stored as MongoDB's
 * drivers and mongofiles store them, over the public collection API
 * (include/minidoc.h), as a driver would.
 *
 * Two collections per bucket ("fs" by default):
 *
 *   fs.files   {_id, length: int64, chunkSize: int32, uploadDate: Date,
 *               md5: "<32 hex digits>", filename, contentType?, aliases?,
 *               metadata?}                    index {filename: 1, uploadDate: 1}
 *   fs.chunks  {_id: ObjectId, files_id: <the file's _id>, n: int32,
 *               data: BinData(0)}             unique index {files_id: 1, n: 1}
 *
 * Chunk n holds bytes [n * chunkSize, min((n + 1) * chunkSize, length)):
 * every chunk is chunkSize bytes but the last.  The default chunk size is
 * 256 KiB (262144 bytes); files written with another chunkSize (drivers
 * use 255 KiB) read back the same way, from their own chunkSize field.
 *
 * Reading checks the chunks against the files document, as the GridFS
 * specification asks: a missing chunk (ChunkIsMissing), a chunk of the
 * wrong size (ChunkIsWrongSize) or one more than the length needs
 * (ExtraChunk) fails the read with MD_ECORRUPT and
 * DataCorruptionDetected (300), never a short file.  An upload writes its
 * chunks as they fill and the files document last, so a file is visible
 * only once whole; an upload destroyed before md_gridfs_close() removes
 * the chunks it wrote.
 *
 * Versions, as mongofiles and PyMongo's get_version: 0 is the first upload
 * of a name, 1 the second, ...; -1 the newest, -2 the one before.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "q_int.h"

#define GRIDFS_CHUNK_DEFAULT (256 * 1024)
#define GRIDFS_CHUNK_MAX (Q_BSON_MAX - 1024)

struct md_gridfs {
    md_db *db;
    md_collection *files, *chunks;
};

struct md_gridfs_file {
    md_gridfs *fs;
    bool upload, closed;
    bson_value_t id;
    int32_t chunk_size;
    int64_t length;  /* upload: bytes written; download: the file's length */
    int64_t pos;     /* download: bytes returned */
    int32_t n;       /* upload: chunks written; download: next chunk expected */
    uint8_t *buf;    /* upload: the chunk being filled; download: current chunk */
    size_t blen, boff;
    q_md5 md5;
    bson_t doc;      /* download: the files document; upload: the options */
    char *filename;
    md_cursor *cur;  /* download: the chunks in order */
};

static int gridfs_err(md_error *err, int rc, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int gridfs_err(md_error *err, int rc, int code, const char *fmt, ...)
{
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return md_error_set(err, rc, code, "%s", msg);
}

static void id_describe(const bson_value_t *id, char *out, size_t n)
{
    if (id->value_type == BSON_TYPE_OID)
        bson_oid_to_string(&id->value.v_oid, out);
    else if (id->value_type == BSON_TYPE_UTF8)
        snprintf(out, n, "\"%s\"", id->value.v_utf8.str);
    else
        snprintf(out, n, "(a %s)", q_type_name(id->value_type));
}

/* ---- the bucket ------------------------------------------------------------------ */

static int ensure_index(md_collection *c, const bson_t *keys, bool unique, md_error *err)
{
    bson_t *opts = BCON_NEW("unique", BCON_BOOL(unique));
    int rc = md_collection_create_index(c, keys, unique ? opts : NULL, NULL, err);
    bson_destroy(opts);
    return rc;
}

int md_gridfs_open(md_db *db, const char *bucket, md_gridfs **out, md_error *err)
{
    char name[ENG_IDENT_MAX];
    const char *b = bucket && bucket[0] ? bucket : "fs";
    *out = NULL;
    if (strlen(b) + sizeof ".chunks" > sizeof name)
        return gridfs_err(err, MD_EINVAL, MD_CODE_INVALID_NAMESPACE,
                          "GridFS bucket name too long: %s", b);
    md_gridfs *fs = calloc(1, sizeof *fs);
    if (!fs)
        return gridfs_err(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
    fs->db = db;
    snprintf(name, sizeof name, "%s.files", b);
    fs->files = md_db_get_collection(db, name);
    snprintf(name, sizeof name, "%s.chunks", b);
    fs->chunks = md_db_get_collection(db, name);
    bson_t *fk = BCON_NEW("filename", BCON_INT32(1), "uploadDate", BCON_INT32(1));
    bson_t *ck = BCON_NEW("files_id", BCON_INT32(1), "n", BCON_INT32(1));
    int rc = ensure_index(fs->files, fk, false, err);
    if (!rc)
        rc = ensure_index(fs->chunks, ck, true, err);
    bson_destroy(fk);
    bson_destroy(ck);
    if (rc) {
        md_gridfs_destroy(fs);
        return rc;
    }
    *out = fs;
    return 0;
}

void md_gridfs_destroy(md_gridfs *fs)
{
    if (!fs)
        return;
    md_collection_destroy(fs->files);
    md_collection_destroy(fs->chunks);
    free(fs);
}

md_cursor *md_gridfs_find(md_gridfs *fs, const bson_t *filter, const bson_t *opts)
{
    bson_t empty = BSON_INITIALIZER;
    return md_collection_find_with_opts(fs->files, filter ? filter : &empty, opts);
}

/* ---- upload ------------------------------------------------------------------------ */

static int chunk_insert(md_gridfs_file *f, md_error *err)
{
    bson_oid_t oid;
    bson_t chunk = BSON_INITIALIZER;
    bson_oid_init(&oid, NULL);
    BSON_APPEND_OID(&chunk, "_id", &oid);
    BSON_APPEND_VALUE(&chunk, "files_id", &f->id);
    BSON_APPEND_INT32(&chunk, "n", f->n);
    BSON_APPEND_BINARY(&chunk, "data", BSON_SUBTYPE_BINARY, f->buf, (uint32_t)f->blen);
    int rc = md_collection_insert_one(f->fs->chunks, &chunk, NULL, NULL, err);
    bson_destroy(&chunk);
    if (rc == 0) {
        f->n++;
        f->blen = 0;
    }
    return rc;
}

static void file_free(md_gridfs_file *f)
{
    md_cursor_destroy(f->cur);
    bson_value_destroy(&f->id);
    bson_destroy(&f->doc);
    free(f->filename);
    free(f->buf);
    free(f);
}

int md_gridfs_open_upload(md_gridfs *fs, const char *filename, const bson_t *opts,
                          md_gridfs_file **out, md_error *err)
{
    bson_iter_t it;
    *out = NULL;
    if (!filename)
        return gridfs_err(err, MD_EINVAL, MD_CODE_BAD_VALUE, "a GridFS file needs a filename");
    /* holds a bson_t: its alignment, not calloc's */
    md_gridfs_file *f = bson_aligned_alloc0(BSON_ALIGNOF(md_gridfs_file), sizeof *f);
    if (!f)
        return gridfs_err(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
    f->fs = fs;
    f->upload = true;
    f->chunk_size = GRIDFS_CHUNK_DEFAULT;
    f->filename = strdup(filename);
    bson_init(&f->doc);
    q_md5_init(&f->md5);
    if (opts && bson_iter_init(&it, opts)) {
        while (bson_iter_next(&it)) {
            const char *k = bson_iter_key(&it);
            if (strcmp(k, "chunkSizeBytes") == 0) {
                int64_t cs = BSON_ITER_HOLDS_NUMBER(&it) ? bson_iter_as_int64(&it) : 0;
                if (cs <= 0 || cs > GRIDFS_CHUNK_MAX) {
                    file_free(f);
                    return gridfs_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                                      "chunkSizeBytes must be a number in 1..%d",
                                      GRIDFS_CHUNK_MAX);
                }
                f->chunk_size = (int32_t)cs;
            } else if (strcmp(k, "_id") == 0) {
                bson_value_copy(bson_iter_value(&it), &f->id);
            } else if (strcmp(k, "contentType") == 0 || strcmp(k, "metadata") == 0 ||
                       strcmp(k, "aliases") == 0) {
                bson_append_iter(&f->doc, k, -1, &it);
            } else {
                file_free(f);
                return gridfs_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                                  "unknown GridFS upload option: %s", k);
            }
        }
    }
    if (f->id.value_type == BSON_TYPE_EOD) {
        f->id.value_type = BSON_TYPE_OID;
        bson_oid_init(&f->id.value.v_oid, NULL);
    }
    if (!(f->buf = malloc((size_t)f->chunk_size))) {
        file_free(f);
        return gridfs_err(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
    }
    *out = f;
    return 0;
}

int md_gridfs_write(md_gridfs_file *f, const void *data, size_t len, md_error *err)
{
    const uint8_t *p = data;
    if (!f->upload || f->closed)
        return gridfs_err(err, MD_EINVAL, MD_CODE_ILLEGAL_OPERATION,
                          "not a GridFS upload stream, or already closed");
    q_md5_append(&f->md5, p, len);
    while (len > 0) {
        size_t take = (size_t)f->chunk_size - f->blen;
        if (take > len)
            take = len;
        memcpy(f->buf + f->blen, p, take);
        f->blen += take, p += take, len -= take;
        f->length += (int64_t)take;
        if (f->blen == (size_t)f->chunk_size) {
            int rc = chunk_insert(f, err);
            if (rc)
                return rc;
        }
    }
    return 0;
}

/* Remove every chunk of file id (an abandoned upload, or a delete). */
static int chunks_delete(md_gridfs *fs, const bson_value_t *id, md_error *err)
{
    bson_t sel = BSON_INITIALIZER;
    BSON_APPEND_VALUE(&sel, "files_id", id);
    int rc = md_collection_delete_many(fs->chunks, &sel, NULL, NULL, err);
    bson_destroy(&sel);
    return rc;
}

static int upload_finish(md_gridfs_file *f, md_error *err)
{
    uint8_t d[16];
    char hex[33];
    int rc = f->blen ? chunk_insert(f, err) : 0;
    if (rc)
        return rc;
    q_md5_finish(&f->md5, d);
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
    bson_t file = BSON_INITIALIZER;
    bson_iter_t it;
    BSON_APPEND_VALUE(&file, "_id", &f->id);
    BSON_APPEND_INT64(&file, "length", f->length);
    BSON_APPEND_INT32(&file, "chunkSize", f->chunk_size);
    BSON_APPEND_DATE_TIME(&file, "uploadDate", q_now_ms());
    BSON_APPEND_UTF8(&file, "md5", hex);
    BSON_APPEND_UTF8(&file, "filename", f->filename);
    if (bson_iter_init(&it, &f->doc))
        while (bson_iter_next(&it))
            bson_append_iter(&file, NULL, 0, &it);
    rc = md_collection_insert_one(f->fs->files, &file, NULL, NULL, err);
    bson_destroy(&file);
    return rc;
}

/* ---- download ---------------------------------------------------------------------- */

static int download_open(md_gridfs *fs, const bson_t *file, md_gridfs_file **out,
                         md_error *err)
{
    bson_iter_t it;
    md_gridfs_file *f = bson_aligned_alloc0(BSON_ALIGNOF(md_gridfs_file), sizeof *f);
    if (!f)
        return gridfs_err(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
    f->fs = fs;
    bson_copy_to(file, &f->doc);
    if (bson_iter_init_find(&it, file, "_id"))
        bson_value_copy(bson_iter_value(&it), &f->id);
    int64_t cs = bson_iter_init_find(&it, file, "chunkSize") && BSON_ITER_HOLDS_NUMBER(&it)
                     ? bson_iter_as_int64(&it)
                     : 0;
    f->length = bson_iter_init_find(&it, file, "length") && BSON_ITER_HOLDS_NUMBER(&it)
                    ? bson_iter_as_int64(&it)
                    : -1;
    char ids[64];
    id_describe(&f->id, ids, sizeof ids);
    if (f->id.value_type == BSON_TYPE_EOD || cs <= 0 || cs > GRIDFS_CHUNK_MAX || f->length < 0) {
        file_free(f);
        return gridfs_err(err, MD_ECORRUPT, MD_CODE_DATA_CORRUPTION_DETECTED,
                          "GridFS file %s: files document without a valid _id, chunkSize "
                          "and length",
                          ids);
    }
    f->chunk_size = (int32_t)cs;
    bson_t filter = BSON_INITIALIZER;
    BSON_APPEND_VALUE(&filter, "files_id", &f->id);
    bson_t *opts = BCON_NEW("sort", "{", "n", BCON_INT32(1), "}");
    f->cur = md_collection_find_with_opts(fs->chunks, &filter, opts);
    bson_destroy(&filter);
    bson_destroy(opts);
    *out = f;
    return 0;
}

int md_gridfs_open_download_by_id(md_gridfs *fs, const bson_value_t *id, md_gridfs_file **out,
                                  md_error *err)
{
    bson_t filter = BSON_INITIALIZER;
    const bson_t *doc;
    md_error cerr;
    char ids[64];
    *out = NULL;
    BSON_APPEND_VALUE(&filter, "_id", id);
    md_cursor *cur = md_collection_find_with_opts(fs->files, &filter, NULL);
    bson_destroy(&filter);
    int rc;
    if (md_cursor_next(cur, &doc)) {
        rc = download_open(fs, doc, out, err);
    } else if (md_cursor_error(cur, &cerr)) {
        if (err)
            *err = cerr;
        rc = MD_ERROR;
    } else {
        id_describe(id, ids, sizeof ids);
        rc = gridfs_err(err, MD_NOTFOUND, MD_CODE_NO_SUCH_KEY,
                        "FileNotFound: no GridFS file with _id %s", ids);
    }
    md_cursor_destroy(cur);
    return rc;
}

int md_gridfs_open_download(md_gridfs *fs, const char *filename, int version,
                            md_gridfs_file **out, md_error *err)
{
    const bson_t *doc;
    md_error cerr;
    *out = NULL;
    if (!filename)
        return gridfs_err(err, MD_EINVAL, MD_CODE_BAD_VALUE, "a filename is required");
    bson_t *filter = BCON_NEW("filename", BCON_UTF8(filename));
    bson_t *opts = BCON_NEW("sort", "{", "uploadDate", BCON_INT32(version < 0 ? -1 : 1), "_id",
                            BCON_INT32(version < 0 ? -1 : 1), "}", "skip",
                            BCON_INT64(version < 0 ? -(int64_t)version - 1 : version),
                            "limit", BCON_INT64(1));
    md_cursor *cur = md_collection_find_with_opts(fs->files, filter, opts);
    bson_destroy(filter);
    bson_destroy(opts);
    int rc;
    if (md_cursor_next(cur, &doc)) {
        rc = download_open(fs, doc, out, err);
    } else if (md_cursor_error(cur, &cerr)) {
        if (err)
            *err = cerr;
        rc = MD_ERROR;
    } else {
        rc = gridfs_err(err, MD_NOTFOUND, MD_CODE_NO_SUCH_KEY,
                        "FileNotFound: no GridFS file named \"%s\" with version %d", filename,
                        version);
    }
    md_cursor_destroy(cur);
    return rc;
}

/* The next chunk into f->buf, checked against the files document. */
static int next_chunk(md_gridfs_file *f, md_error *err)
{
    const bson_t *doc;
    bson_iter_t it;
    md_error cerr;
    char ids[64];
    int64_t nchunks = (f->length + f->chunk_size - 1) / f->chunk_size;
    int64_t want = f->n + 1 < nchunks ? f->chunk_size
                                      : f->length - (int64_t)f->n * f->chunk_size;
    id_describe(&f->id, ids, sizeof ids);
    if (!md_cursor_next(f->cur, &doc)) {
        if (md_cursor_error(f->cur, &cerr)) {
            if (err)
                *err = cerr;
            return MD_ERROR;
        }
        return gridfs_err(err, MD_ECORRUPT, MD_CODE_DATA_CORRUPTION_DETECTED,
                          "ChunkIsMissing: GridFS file %s: chunk %d of %lld is missing", ids,
                          f->n, (long long)nchunks);
    }
    int64_t n = bson_iter_init_find(&it, doc, "n") && BSON_ITER_HOLDS_NUMBER(&it)
                    ? bson_iter_as_int64(&it)
                    : -1;
    if (n != f->n)
        return gridfs_err(err, MD_ECORRUPT, MD_CODE_DATA_CORRUPTION_DETECTED,
                          "ChunkIsMissing: GridFS file %s: expected chunk %d, found %lld", ids,
                          f->n, (long long)n);
    const uint8_t *data;
    uint32_t len;
    bson_subtype_t st;
    if (!bson_iter_init_find(&it, doc, "data") || !BSON_ITER_HOLDS_BINARY(&it))
        return gridfs_err(err, MD_ECORRUPT, MD_CODE_DATA_CORRUPTION_DETECTED,
                          "GridFS file %s: chunk %d has no binary data", ids, f->n);
    bson_iter_binary(&it, &st, &len, &data);
    if ((int64_t)len != want)
        return gridfs_err(err, MD_ECORRUPT, MD_CODE_DATA_CORRUPTION_DETECTED,
                          "ChunkIsWrongSize: GridFS file %s: chunk %d holds %u bytes, expected "
                          "%lld",
                          ids, f->n, len, (long long)want);
    uint8_t *nb = realloc(f->buf, len ? len : 1);
    if (!nb)
        return gridfs_err(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
    f->buf = nb;
    memcpy(f->buf, data, len);
    f->blen = len;
    f->boff = 0;
    f->n++;
    return 0;
}

int64_t md_gridfs_read(md_gridfs_file *f, void *buf, size_t n, md_error *err)
{
    uint8_t *out = buf;
    size_t got = 0;
    if (f->upload || f->closed)
        return gridfs_err(err, MD_EINVAL, MD_CODE_ILLEGAL_OPERATION,
                          "not a GridFS download stream, or already closed");
    while (got < n && f->pos < f->length) {
        if (f->boff == f->blen) {
            int rc = next_chunk(f, err);
            if (rc)
                return rc;
        }
        size_t take = f->blen - f->boff;
        if (take > n - got)
            take = n - got;
        memcpy(out + got, f->buf + f->boff, take);
        f->boff += take, got += take;
        f->pos += (int64_t)take;
    }
    if (got == 0 && n > 0 && f->pos == f->length) {
        /* the end: no chunk may follow the last one */
        const bson_t *doc;
        char ids[64];
        if (md_cursor_next(f->cur, &doc)) {
            id_describe(&f->id, ids, sizeof ids);
            return gridfs_err(err, MD_ECORRUPT, MD_CODE_DATA_CORRUPTION_DETECTED,
                              "ExtraChunk: GridFS file %s has a chunk beyond its length %lld",
                              ids, (long long)f->length);
        }
    }
    return (int64_t)got;
}

const bson_t *md_gridfs_file_doc(const md_gridfs_file *f)
{
    return f->upload ? NULL : &f->doc;
}

int md_gridfs_close(md_gridfs_file *f, bson_value_t *id, md_error *err)
{
    int rc = 0;
    if (!f)
        return 0;
    if (f->upload && !f->closed) {
        rc = upload_finish(f, err);
        if (rc)
            chunks_delete(f->fs, &f->id, NULL);
        else if (id)
            bson_value_copy(&f->id, id);
        f->closed = true;
    }
    file_free(f);
    return rc;
}

void md_gridfs_abort(md_gridfs_file *f)
{
    if (!f)
        return;
    if (f->upload && !f->closed && f->n > 0)
        chunks_delete(f->fs, &f->id, NULL);
    file_free(f);
}

/* ---- whole files ------------------------------------------------------------------ */

int md_gridfs_put(md_gridfs *fs, const char *filename, const void *data, size_t len,
                  const bson_t *opts, bson_value_t *id, md_error *err)
{
    md_gridfs_file *f;
    int rc = md_gridfs_open_upload(fs, filename, opts, &f, err);
    if (rc)
        return rc;
    if ((rc = md_gridfs_write(f, data, len, err)) != 0) {
        md_gridfs_abort(f);
        return rc;
    }
    return md_gridfs_close(f, id, err);
}

int md_gridfs_get(md_gridfs *fs, const char *filename, int version, void **data, size_t *len,
                  bson_t *file, md_error *err)
{
    md_gridfs_file *f;
    *data = NULL;
    *len = 0;
    int rc = md_gridfs_open_download(fs, filename, version, &f, err);
    if (rc)
        return rc;
    uint8_t *buf = malloc(f->length ? (size_t)f->length : 1);
    int64_t got = buf ? md_gridfs_read(f, buf, (size_t)f->length, err)
                      : gridfs_err(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR,
                                   "no memory for a %lld-byte file", (long long)f->length);
    if (got >= 0) { /* a read at the end checks that no extra chunk follows */
        uint8_t one;
        int64_t end = md_gridfs_read(f, &one, 1, err);
        if (end < 0)
            got = end;
    }
    if (got < 0) {
        free(buf);
        md_gridfs_close(f, NULL, NULL);
        return (int)got;
    }
    if (file)
        bson_copy_to(&f->doc, file);
    *data = buf;
    *len = (size_t)got;
    md_gridfs_close(f, NULL, NULL);
    return 0;
}

int md_gridfs_delete_by_id(md_gridfs *fs, const bson_value_t *id, md_error *err)
{
    bson_t sel = BSON_INITIALIZER, reply;
    bson_iter_t it;
    char ids[64];
    BSON_APPEND_VALUE(&sel, "_id", id);
    int rc = md_collection_delete_one(fs->files, &sel, NULL, &reply, err);
    bson_destroy(&sel);
    int64_t n = rc == 0 && bson_iter_init_find(&it, &reply, "deletedCount")
                    ? bson_iter_as_int64(&it)
                    : 0;
    bson_destroy(&reply);
    if (rc)
        return rc;
    /* the chunks go even when the files document was already gone */
    if ((rc = chunks_delete(fs, id, err)) != 0)
        return rc;
    if (n == 0) {
        id_describe(id, ids, sizeof ids);
        return gridfs_err(err, MD_NOTFOUND, MD_CODE_NO_SUCH_KEY,
                          "FileNotFound: no GridFS file with _id %s", ids);
    }
    return 0;
}

int md_gridfs_delete(md_gridfs *fs, const char *filename, int64_t *deleted, md_error *err)
{
    bson_t *filter = BCON_NEW("filename", BCON_UTF8(filename));
    bson_t *opts = BCON_NEW("projection", "{", "_id", BCON_INT32(1), "}");
    md_cursor *cur = md_collection_find_with_opts(fs->files, filter, opts);
    const bson_t *doc;
    bson_value_t *ids = NULL;
    size_t n = 0, cap = 0;
    md_error cerr;
    int rc = 0;
    bson_destroy(filter);
    bson_destroy(opts);
    while (md_cursor_next(cur, &doc)) {
        bson_iter_t it;
        if (!bson_iter_init_find(&it, doc, "_id"))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 8;
            bson_value_t *v = realloc(ids, cap * sizeof *v);
            if (!v) {
                rc = gridfs_err(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
                break;
            }
            ids = v;
        }
        bson_value_copy(bson_iter_value(&it), &ids[n++]);
    }
    if (!rc && md_cursor_error(cur, &cerr)) {
        if (err)
            *err = cerr;
        rc = MD_ERROR;
    }
    md_cursor_destroy(cur);
    size_t done = 0;
    for (size_t i = 0; i < n; i++) {
        if (!rc && (rc = md_gridfs_delete_by_id(fs, &ids[i], err)) == 0)
            done++;
        bson_value_destroy(&ids[i]);
    }
    free(ids);
    if (deleted)
        *deleted = (int64_t)done;
    return rc;
}
