/*
 * minidoc.h -- the public API of minidoc, an embedded document database with
 * MongoDB's data model, query language and commands.
 *
 * The API reads as a small story:
 *
 *     md_db_open(dir, opts)            one database directory, one engine
 *       md_db_command(db, cmd, reply)  any MongoDB command document
 *       md_db_get_collection(db, name) a handle for the typed wrappers
 *         md_collection_insert_one / find_with_opts / update_one / ...
 *           md_cursor_next             borrowed documents, one at a time
 *     md_db_close(db)
 *
 * Everything goes through md_db_command(): the typed wrappers build the same
 * command document that a MongoDB driver would send and parse the reply, so
 * the CLI, the wrappers and a future wire server share one code path.
 *
 * Conventions (see STYLE.md):
 *   - Functions return int: 0 is success, library codes are negative
 *     (MD_NOTFOUND is a status, not a failure).  md_strerror() names them.
 *   - Functions that can fail in interesting ways take an optional last
 *     `md_error *`, filled with MongoDB's numeric code, codeName and message.
 *   - `reply` arguments are uninitialized bson_t that the call always
 *     initializes (also on failure); the caller must bson_destroy() them.
 *   - Ownership: md_*_open / md_*_new return objects the caller owns and
 *     frees with the matching close/destroy.  Documents handed out by a
 *     cursor are borrowed and stay valid until the next md_cursor_next() or
 *     md_cursor_destroy() on that cursor.
 *
 * Thread safety (in the style of libmongoc's notes):
 *   - md_db is thread safe: any number of threads may run commands and the
 *     typed wrappers on one handle at once.  md_db_open and md_db_close are
 *     not: close once, after every other thread has stopped using it.
 *   - md_collection holds only the handle and a name and never changes:
 *     threads may share one, or make their own; destroy it once.
 *   - md_cursor is not thread safe: one thread at a time may use it (it
 *     may move between threads).  A server-side cursor id (find/getMore)
 *     may be continued from any thread.
 *   - md_error and reply documents belong to the calling thread.
 *   What runs at the same time depends on the engine (open option
 *   lockGranularity, reported by serverStatus):
 *     "document"   (btree's default) writers to different documents of a
 *                  collection run at once; readers never wait for writers;
 *                  two writers to one document: one retries (WriteConflict,
 *                  invisible to the caller; metrics.operation.writeConflicts)
 *     "collection" (mmapv1's default, as MongoDB 3.0) readers of a
 *                  collection share its lock, a writer holds it alone;
 *                  writers to different collections take turns per
 *                  document write
 *     "database"   (MongoDB 2.6; ephemeralForTest's only mode) one lock
 *                  for every collection
 *   Catalog changes (create, drop, index builds, collMod, compact,
 *   validate, fsync) wait for every other command and hold the database
 *   alone.  Long scans yield their lock every 128 documents or 10 ms.
 */
#ifndef MINIDOC_H
#define MINIDOC_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MD_VERSION_STRING "0.1.0"

/* ---- library return codes (negative band, like LMDB's) ------------------ */
#define MD_OK 0
#define MD_NOTFOUND (-30800)  /* key/record/collection not found: a status */
#define MD_ERROR (-30801)     /* generic failure; details in md_error */
#define MD_EINVAL (-30802)    /* bad argument or malformed input */
#define MD_ENOMEM (-30803)    /* allocation failed */
#define MD_EIO (-30804)       /* read/write/mmap/fsync failed */
#define MD_ECORRUPT (-30805)  /* on-disk structure failed a check */
#define MD_EDUPKEY (-30806)   /* unique index violation */
#define MD_EBUSY (-30807)     /* directory locked by another process */
#define MD_ENOSPC (-30808)    /* no space left (disk or file limits) */
#define MD_ENOTSUP (-30809)   /* operation not supported by this engine */
#define MD_ETOOBIG (-30810)   /* document or key exceeds a size limit */
#define MD_EREADONLY (-30811) /* handle refuses writes after a failed write */
#define MD_EEXISTS (-30812)   /* object already exists */
#define MD_EWRITECONFLICT (-30813) /* another transaction changed the same key;
                                     the library retries these internally */
#define MD_ECAPPEDLOST (-30814) /* a capped collection's ring overwrote the
                                   position a cursor was saved at */

/* Name of a library return code, e.g. "MD_NOTFOUND: not found". */
const char *md_strerror(int rc);

/* ---- MongoDB error codes used in replies (error_codes.err) -------------- */
enum md_code {
    MD_CODE_OK = 0,
    MD_CODE_INTERNAL_ERROR = 1,
    MD_CODE_BAD_VALUE = 2,
    MD_CODE_NO_SUCH_KEY = 4,
    MD_CODE_GRAPH_CONTAINS_CYCLE = 5,
    MD_CODE_UNKNOWN_ERROR = 8,
    MD_CODE_FAILED_TO_PARSE = 9,
    MD_CODE_CANNOT_MUTATE_OBJECT = 10,
    MD_CODE_TYPE_MISMATCH = 14,
    MD_CODE_OVERFLOW = 15,
    MD_CODE_ILLEGAL_OPERATION = 20,
    MD_CODE_EMPTY_ARRAY_OPERATION = 21,
    MD_CODE_INVALID_BSON = 22,
    MD_CODE_LOCK_TIMEOUT = 24,
    MD_CODE_NAMESPACE_NOT_FOUND = 26,
    MD_CODE_INDEX_NOT_FOUND = 27,
    MD_CODE_PATH_NOT_VIABLE = 28,
    MD_CODE_NON_EXISTENT_PATH = 29,
    MD_CODE_INVALID_PATH = 30,
    MD_CODE_CURSOR_NOT_FOUND = 43,
    MD_CODE_NAMESPACE_EXISTS = 48,
    MD_CODE_DOLLAR_PREFIXED_FIELD_NAME = 52,
    MD_CODE_INVALID_ID_FIELD = 53,
    MD_CODE_NOT_SINGLE_VALUE_FIELD = 54,
    MD_CODE_EMPTY_FIELD_NAME = 56,
    MD_CODE_DOTTED_FIELD_NAME = 57,
    MD_CODE_COMMAND_NOT_FOUND = 59,
    MD_CODE_IMMUTABLE_FIELD = 66,
    MD_CODE_CANNOT_CREATE_INDEX = 67,
    MD_CODE_INDEX_ALREADY_EXISTS = 68,
    MD_CODE_INVALID_OPTIONS = 72,
    MD_CODE_INVALID_NAMESPACE = 73,
    MD_CODE_INDEX_OPTIONS_CONFLICT = 85,
    MD_CODE_INDEX_KEY_SPECS_CONFLICT = 86,
    MD_CODE_DBPATH_IN_USE = 98,
    MD_CODE_CANNOT_IMPLICITLY_CREATE_COLLECTION = 227,
    MD_CODE_COMMAND_NOT_SUPPORTED = 115,
    MD_CODE_CONFLICTING_UPDATE_OPERATORS = 40,
    MD_CODE_FILE_STREAM_FAILED = 39,
    MD_CODE_CAPPED_POSITION_LOST = 136,
    MD_CODE_CANNOT_INDEX_PARALLEL_ARRAYS = 171,
    MD_CODE_DATA_CORRUPTION_DETECTED = 300, /* later MongoDB naming; 3.x used Location codes */
    MD_CODE_NOT_YET_IMPLEMENTED = 238,
    MD_CODE_KEY_TOO_LONG = 17280,
    MD_CODE_BSON_OBJECT_TOO_LARGE = 10334,
    MD_CODE_DUPLICATE_KEY = 11000,
    MD_CODE_OUT_OF_DISK_SPACE = 14031,
    MD_CODE_WRITE_CONFLICT = 112,
    MD_CODE_MAX_TIME_MS_EXPIRED = 50,
    MD_CODE_JS_INTERPRETER_FAILURE = 139,
};

/* The codeName MongoDB prints for a code ("BadValue"), or "Location<N>". */
const char *md_code_name(int code);

typedef struct md_error {
    int code;             /* MongoDB's numeric code (enum md_code) */
    char code_name[64];   /* MongoDB's codeName */
    char message[1024];   /* human-readable, MongoDB's wording when it has one */
} md_error;

/* Fill `err` (if not NULL) and return `rc`.  Safe to call with err == NULL. */
int md_error_set(md_error *err, int rc, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Reset an md_error to "no error". */
void md_error_clear(md_error *err);

/* ---- database ----------------------------------------------------------- */
typedef struct md_db md_db;

/*
 * Open (creating if needed) the database in directory `path`.
 *
 * `opts` may be NULL.  Recognised fields:
 *   engine        "btree", "mmapv1" or "ephemeralForTest" (in memory,
 *                 for tests)  (default: the engine whose files are in
 *                 path, else "btree"; naming another one than the files'
 *                 is an error, code 28662, as in MongoDB)
 *   dbName        database name, used in file names and "ns" (default "test")
 *   create        bool, create the directory and files if missing (true)
 *   smallFiles    bool, data file sizes divided by 4 (mmapv1)
 *   cursorTimeoutMillis  idle cursors are closed after this long (600000,
 *                 MongoDB's 10 minutes); also settable with setParameter
 *   mmapv1        {journal: bool (true), journalCommitInterval: ms
 *                  (100, 1..500), syncdelay: s (60; 0 = only at fsync and
 *                  close), journalFileSize: bytes (1 GB)}   (mmapv1)
 *                 {firstFileSize: bytes, nsSize: bytes, debugRemapOnGrow,
 *                  debugCheckViews: bool, debugRemapPrivateViewBytes:
 *                  bytes}                         test knobs (mmapv1)
 *   btree         {cacheSizeMB (half of RAM - 1 GB, at least 256),
 *                  blockCompressor: "snappy"|"zstd"|"none",
 *                  checkpointIntervalSecs, log: bool (true),
 *                  commitIntervalMs (100), logFileSizeMB (100),
 *                  checkpointLogSizeMB (2048)}  (btree; see btree/bt.h)
 *   ttlMonitorSleepSecs  seconds between TTL passes (60)
 *   internalQueryFastPaths  bool (true): false runs every operation the
 *                 general way (no _id fast path, no in-place update, no
 *                 direct typed statements); results are identical, only
 *                 slower -- for tests that compare the two
 *   lockGranularity  "document" | "collection" | "database": what a write
 *                 locks (see Thread safety above); each engine accepts its
 *                 default and "database"
 *
 * Only one process may open a directory at a time: a second one gets
 * MD_EBUSY with code DBPathInUse (98).
 */
int md_db_open(const char *path, const bson_t *opts, md_db **out, md_error *err);

/* Flush and close.  NULL is a no-op.  The handle is freed. */
void md_db_close(md_db *db);

/*
 * Run one MongoDB command document, e.g. {insert: "c", documents: [...]}.
 * `reply` is always initialized.  Returns 0 when the reply has ok: 1 (write
 * commands may still carry writeErrors, as in MongoDB); otherwise a negative
 * code, with `err` and the reply's errmsg/code/codeName filled in.
 */
int md_db_command(md_db *db, const bson_t *command, bson_t *reply, md_error *err);

/* Same as md_db_command, with the command given as extended JSON (read by
 * md_json_parse; text that does not parse gets FailedToParse, 9). */
int md_db_command_json(md_db *db, const char *json, bson_t *reply, md_error *err);

/*
 * Read one JSON object -- canonical or relaxed Extended JSON v2, or legacy
 * (v1) extended JSON -- into `out`, which the call always initializes
 * (empty on failure).  `len` is the text's length, or -1 when it is
 * NUL-terminated; blanks may surround the object, nothing else.
 *
 * A type wrapper ({"$oid": ...}, {"$date": ...}, {"$binary": ...,
 * "$type": ...}, {"$regex": ..., "$options": ...}, ...) becomes its BSON
 * type only when it has exactly the wrapper's keys and valid values;
 * otherwise it stays an ordinary document, so query operators that share
 * the names ({"$type": "string"}, {"$regex": 1}) reach the query parser as
 * written.  Returns 0, or MD_EINVAL with FailedToParse (9) and the byte
 * position in `err`.
 */
int md_json_parse(const char *json, ssize_t len, bson_t *out, md_error *err);

/* The database name given at open ("test" by default).  Valid until close. */
const char *md_db_name(const md_db *db);

/* ---- collections and the typed wrappers (libmongoc's shape) ------------- */
typedef struct md_collection md_collection;
typedef struct md_cursor md_cursor;

/* A handle naming collection `name`; it need not exist yet.  Caller owns. */
md_collection *md_db_get_collection(md_db *db, const char *name);
void md_collection_destroy(md_collection *coll);
const char *md_collection_get_name(const md_collection *coll);

/*
 * The write wrappers return 0 when the write succeeded.  When the command
 * succeeded but reported a write error (a duplicate key, say), they return
 * MD_ERROR (or MD_EDUPKEY) and fill `err` from the first writeError, exactly
 * as libmongoc's wrappers do.  `reply`, if not NULL, receives libmongoc's
 * reply fields (insertedCount, matchedCount, modifiedCount, deletedCount,
 * upsertedId, upsertedCount).  `opts` carries command options such as
 * {upsert: true} or {ordered: false}.
 */
int md_collection_insert_one(md_collection *coll, const bson_t *doc, const bson_t *opts,
                             bson_t *reply, md_error *err);
int md_collection_insert_many(md_collection *coll, const bson_t **docs, size_t n,
                              const bson_t *opts, bson_t *reply, md_error *err);
int md_collection_update_one(md_collection *coll, const bson_t *selector,
                             const bson_t *update, const bson_t *opts, bson_t *reply,
                             md_error *err);
int md_collection_update_many(md_collection *coll, const bson_t *selector,
                              const bson_t *update, const bson_t *opts, bson_t *reply,
                              md_error *err);
int md_collection_replace_one(md_collection *coll, const bson_t *selector,
                              const bson_t *replacement, const bson_t *opts,
                              bson_t *reply, md_error *err);
int md_collection_delete_one(md_collection *coll, const bson_t *selector,
                             const bson_t *opts, bson_t *reply, md_error *err);
int md_collection_delete_many(md_collection *coll, const bson_t *selector,
                              const bson_t *opts, bson_t *reply, md_error *err);
/* Count matching documents into *count (options: skip, limit). */
int md_collection_count(md_collection *coll, const bson_t *filter, const bson_t *opts,
                        int64_t *count, md_error *err);
/*
 * findAndModify.  `opts` holds the command's fields (sort, update, remove,
 * new, upsert, fields).  `reply` receives the command reply ({value, ok,
 * lastErrorObject}).
 */
int md_collection_find_and_modify(md_collection *coll, const bson_t *query,
                                  const bson_t *opts, bson_t *reply, md_error *err);
/* createIndexes with one index: keys such as {a: 1}; opts such as
 * {unique: true}.  Without a "name" in opts the index gets the drivers'
 * default name, keys and directions joined by '_' ("a_1_b_-1"). */
int md_collection_create_index(md_collection *coll, const bson_t *keys, const bson_t *opts,
                               bson_t *reply, md_error *err);

/*
 * Find documents matching `filter` (opts: the find command's fields, e.g.
 * {limit: 5, batchSize: 10}).  Never returns NULL; errors surface through
 * md_cursor_error().  Caller owns the cursor.
 *
 * Tailable cursors (capped collections only), as libmongoc's: opts
 * {tailable: true, awaitData: true, maxAwaitTimeMS: N}.  maxAwaitTimeMS is
 * the cursor's, not the find's: it becomes each getMore's maxTimeMS, how
 * long the server waits for a new document (default 1000 ms, 0: no wait).
 */
md_cursor *md_collection_find_with_opts(md_collection *coll, const bson_t *filter,
                                        const bson_t *opts);

/*
 * Run an aggregation pipeline over the collection, as libmongoc's
 * mongoc_collection_aggregate: `pipeline` is either an array document
 * ({"0": {$match: ...}, "1": ...}) or {pipeline: [...]}; opts holds the
 * aggregate command's other fields ({allowDiskUse: true, batchSize: 10,
 * maxTimeMS: 100, ...}; batchSize becomes cursor.batchSize).  Never
 * returns NULL; errors (40324 for an unknown stage, ...) surface through
 * md_cursor_error().  Caller owns the cursor.
 */
md_cursor *md_collection_aggregate(md_collection *coll, const bson_t *pipeline,
                                   const bson_t *opts);

/*
 * Advance.  Returns true and sets *doc to a borrowed document, valid until
 * the next call or md_cursor_destroy(); false at the end or on error.
 *
 * On a tailable cursor, false also means "nothing new yet": each call asks
 * the server at most once (with awaitData, a getMore that waits up to
 * maxAwaitTimeMS for an insert), and when that brings nothing the cursor
 * stays open; call again later.  md_cursor_more() tells the two apart:
 *
 *     while (md_cursor_more(cur)) {
 *         while (md_cursor_next(cur, &doc))
 *             use(doc);
 *     }
 *     if (md_cursor_error(cur, &err)) ...   (e.g. CappedPositionLost, 136)
 *
 * A tailable cursor over an empty collection is closed at once (id 0, as
 * MongoDB 3.x does); so is one whose place the ring overwrote (an error).
 */
bool md_cursor_next(md_cursor *cursor, const bson_t **doc);
/* False once the cursor is exhausted, closed by the server or failed; true
 * before the first md_cursor_next() and while a tailable cursor is open. */
bool md_cursor_more(const md_cursor *cursor);
/* True (and err filled, if not NULL) if the cursor failed. */
bool md_cursor_error(const md_cursor *cursor, md_error *err);
void md_cursor_destroy(md_cursor *cursor);

/* ---- GridFS (files larger than a document), as MongoDB's drivers --------- */
/*
 * A bucket: collections <bucket>.files and <bucket>.chunks ("fs" when
 * bucket is NULL), with MongoDB's layout and indexes (created here if
 * missing).  Chunks are 256 KiB unless the upload says otherwise.  Caller
 * owns *out (md_gridfs_destroy); it must not outlive db.
 */
typedef struct md_gridfs md_gridfs;
typedef struct md_gridfs_file md_gridfs_file;
int md_gridfs_open(md_db *db, const char *bucket, md_gridfs **out, md_error *err);
void md_gridfs_destroy(md_gridfs *fs);
/* The files documents matching filter (opts as md_collection_find_with_opts). */
md_cursor *md_gridfs_find(md_gridfs *fs, const bson_t *filter, const bson_t *opts);
/*
 * Store a whole file.  opts: {_id (default a new ObjectId), chunkSizeBytes,
 * contentType, metadata, aliases}.  *id (if not NULL) receives the file's
 * _id (bson_value_destroy it).
 */
int md_gridfs_put(md_gridfs *fs, const char *filename, const void *data, size_t len,
                  const bson_t *opts, bson_value_t *id, md_error *err);
/*
 * Read a whole file by name and version (0: the first upload of that name,
 * 1: the second, ...; -1: the newest, -2: the one before).  *data is
 * malloc'ed (free it); *file (if not NULL) is initialized with the files
 * document.  A missing, short or extra chunk fails (MD_ECORRUPT, code 300,
 * "ChunkIsMissing" / "ChunkIsWrongSize" / "ExtraChunk"); no such file is
 * MD_NOTFOUND (code 4, "FileNotFound").
 */
int md_gridfs_get(md_gridfs *fs, const char *filename, int version, void **data, size_t *len,
                  bson_t *file, md_error *err);
/* Streams.  An upload writes chunks as they fill and the files document at
 * md_gridfs_close (which gives *id); md_gridfs_abort drops the chunks. */
int md_gridfs_open_upload(md_gridfs *fs, const char *filename, const bson_t *opts,
                          md_gridfs_file **out, md_error *err);
int md_gridfs_write(md_gridfs_file *f, const void *data, size_t len, md_error *err);
int md_gridfs_open_download(md_gridfs *fs, const char *filename, int version,
                            md_gridfs_file **out, md_error *err);
int md_gridfs_open_download_by_id(md_gridfs *fs, const bson_value_t *id, md_gridfs_file **out,
                                  md_error *err);
/* Up to n bytes into buf: how many (0 at the end), or a negative code. */
int64_t md_gridfs_read(md_gridfs_file *f, void *buf, size_t n, md_error *err);
/* A download's files document (valid until close); NULL for an upload. */
const bson_t *md_gridfs_file_doc(const md_gridfs_file *f);
/* Finish (an upload: flush and write the files document) and free f. */
int md_gridfs_close(md_gridfs_file *f, bson_value_t *id, md_error *err);
void md_gridfs_abort(md_gridfs_file *f);
/* Delete one file (its files document, then its chunks; the chunks go even
 * when the document is already gone) or every version of a name. */
int md_gridfs_delete_by_id(md_gridfs *fs, const bson_value_t *id, md_error *err);
int md_gridfs_delete(md_gridfs *fs, const char *filename, int64_t *deleted, md_error *err);

/*
 * Engine time accounting, for benchmarks (bench/peers): while on, every
 * call from the query layer into the storage engine is timed, and
 * md_engine_time_ns() returns the calling thread's total in nanoseconds
 * since md_engine_timing() was last called from it.  Off by default: it
 * costs two clock reads per engine call.
 */
void md_engine_timing(bool on);
int64_t md_engine_time_ns(void);

#ifdef __cplusplus
}
#endif
#endif /* MINIDOC_H */
