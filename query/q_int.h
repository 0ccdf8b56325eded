/*
 * q_int.h -- private to query/: the in-memory catalog behind an md_db, the
 * one-document write path, plans and scans (q_plan.c, q_scan.c), the TTL
 * monitor, server-side cursors and the helpers shared by the command files.
 *
 *   md_db ---> q_coll "c" ---> eng_rs (records)
 *        |           |-------> q_index "_id_" ---> eng_ss (keys)
 *        |           `-------> q_index "x_1"  ---> eng_ss
 *        `---> q_cursor 7431... (find/getMore state, saved between batches)
 */

/*
 * Invariants:
 *   1. Every q_coll in db->colls has an open record store and every q_index
 *      an open sorted store; the list is sorted by collection name.
 *   2. The persisted catalog entry (key = ns) describes exactly the
 *      in-memory q_coll; both change in the same engine transaction as the
 *      storage they describe (memory is updated after commit).
 *   3. For every record and every index, the index holds exactly the keys
 *      q_index_keys() generates for the record, each with the record's rid.
 *   4. After an unexpected engine failure (I/O, corruption, no space) the
 *      handle is "failed": every later write answers MD_EREADONLY.
 */
#ifndef Q_INT_H
#define Q_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "q.h"

#define Q_BSON_MAX (16 * 1024 * 1024)     /* BSONObjMaxUserSize */
#define Q_BSON_MAX_INTERNAL (Q_BSON_MAX + 16 * 1024)
#define Q_NS_MAX 120                      /* MongoDB 3.x namespace limit */
#define Q_INDEXES_MAX 64
#define Q_SORT_MEM_MAX (32 * 1024 * 1024) /* internalQueryExecMaxBlockingSortBytes */
#define Q_DEFAULT_BATCH 101
#define Q_CURSOR_TIMEOUT_MS (10 * 60 * 1000) /* cursorTimeoutMillis default */
#define Q_CODE_OPERATION_FAILED 96
#define Q_CODE_UNAUTHORIZED 13
#define Q_CODE_INVALID_LENGTH 16
#define Q_CODE_IDL_UNKNOWN_FIELD 40415
#define Q_CODE_IDL_MISSING_FIELD 40414
#define Q_CODE_DOC_TOO_LARGE_AFTER_UPDATE 17419
#define Q_CODE_CAPPED_CANNOT_GROW 10003   /* CannotGrowDocumentInCappedNamespace */
#define Q_CODE_CAPPED_NEEDS_SIZE 14832    /* "specify size:<n> when capped is true" */
#define Q_CODE_QUERY_PLAN_KILLED 175
#define Q_AWAIT_DATA_MS 1000 /* an awaitData getMore's wait without maxTimeMS */

/* ---- catalog (q_catalog.c) ---------------------------------------------- */
/*
 * The index key format (q_key.c), recorded per index in the catalog as
 * keyFormat.  1 (no keyFormat in the entry): decimal128 keys encoded
 * through long double.  2: decimal128 keys exact.  Other numbers and types
 * encode alike in both; an index of format 1 is rebuilt when the database
 * opens (q_catalog_upgrade).
 */
#define Q_KEY_FORMAT 2

typedef struct q_index {
    char name[ENG_IDENT_MAX];
    char ident[ENG_IDENT_MAX];
    bson_t key;  /* key pattern, owned */
    bson_t spec; /* {v, key, name, ns, unique?, sparse?}, owned */
    bool unique, sparse;
    /* multikey: read and set with Q_MULTIKEY / q_multikey_set (threads see
     * it change); it turns true before the transaction that needs it
     * commits, and stays true.  multikey_saved: the catalog says so. */
    bool multikey, multikey_saved;
    int64_t expire_secs; /* TTL: expireAfterSeconds; -1 when not a TTL index */
    bool hashed;         /* {f: "hashed"}: one key, the hash of f's value */
    bool hash_stale;     /* hashed: keys from before MongoDB's hash (rebuilt
                            at open, q_catalog_upgrade) */
    int key_format;      /* the key encoding its keys are in (Q_KEY_FORMAT;
                            an older one is rebuilt at open, q_catalog_upgrade) */
    q_matcher *partial;  /* partialFilterExpression, owned; NULL: none */
    struct q_text_spec *text; /* a text index's spec (q_text.h), owned; else NULL */
    struct q_geo_params *gp; /* 2d / 2dsphere: the geo parameters, owned
                                (q_geo.h); NULL for other indexes */
    /* The key pattern is one top-level field ({f: 1} or {f: -1}) and no
     * other rule (hashed, text, geo, partial) applies: a document's key is
     * q_key_simple(simple, simple_desc, ...).  simple points into `key`;
     * NULL otherwise. */
    const char *simple;
    bool simple_desc;
    eng_ss *ss;
    uint64_t serial; /* unique in the process, never reused (q_index_new) */
    /* $indexStats: index scans opened on it (Q_COUNT) since since_ms (when
     * this handle was made: the index's creation or the database's open) */
    int64_t accesses, since_ms;
} q_index;

typedef struct q_coll {
    char name[ENG_IDENT_MAX];
    char ns[ENG_IDENT_MAX];
    bson_t options; /* as given to create (minus the command's own fields) */
    int alloc;      /* enum eng_alloc, derived from options */
    eng_rs *rs;
    q_index **idx;  /* idx[0] is _id_, unless created with autoIndexId: false
                       (then _id_ is missing, or where createIndexes put it) */
    size_t nidx;
    pthread_rwlock_t lock; /* the collection lock (q_lock.c) */
    /* Capped collections (options capped: true): the engine's ring limits
     * as create settled them, one writer at a time (cap_write_mu, held
     * around each capped write's transaction, as eng.h asks), and the count
     * of inserts committed, which awaitData getMores wait on (db->cap_cv). */
    bool capped;
    int64_t capped_size, capped_max; /* bytes; documents, 0 = no limit */
    pthread_mutex_t cap_write_mu;
    uint64_t cap_inserts; /* under db->cap_mu */
    pthread_mutex_t plan_mu; /* guards plan_cache */
    struct q_plan_cache_ent *plan_cache; /* q_plan.c: choices per query shape */
    int64_t plan_writes; /* writes since plan_cache was last emptied (atomic) */
    struct q_coll *next;
} q_coll;

typedef struct q_metrics {
    int64_t inserted, updated, deleted, returned;
    int64_t scanned, scanned_objects; /* index keys / documents examined */
} q_metrics;

struct q_cursor;

/* Lock statistics of one level, by MongoDB's mode letters: r and w are the
 * intent modes (IS, IX), R and W shared and exclusive. */
enum { Q_MODE_IS, Q_MODE_IX, Q_MODE_S, Q_MODE_X, Q_NMODES };
typedef struct q_lockstat {
    int64_t acquire[Q_NMODES];
    int64_t waits[Q_NMODES];
    int64_t wait_us[Q_NMODES];
} q_lockstat;

/* What a data lock covers (lockGranularity). */
enum { Q_GRAN_DOCUMENT, Q_GRAN_COLLECTION, Q_GRAN_DATABASE };

struct md_db {
    const eng_ops *ops;
    eng_engine *eng;
    char name[64];
    q_coll *colls;
    bool failed;          /* invariant 4 */
    md_error fail_err;    /* what made it fail */
    struct q_cursor *cursors;
    uint64_t cursor_seed;
    int64_t cursor_timeout_ms; /* idle cursors die after this; 0: the default */
    int64_t reap_last_ms;      /* the last look for idle cursors (q_op_enter) */
    q_metrics m;
    int64_t start_ms;
    int64_t ttl_sleep_ms; /* the TTL monitor's period (ttlMonitorSleepSecs) */
    int64_t ttl_last_ms;  /* its last pass */
    int64_t js_time_limit_ms; /* a JavaScript call's limit (jsTimeLimitMS); 0: js.h's */
    /* q_lock.c */
    pthread_rwlock_t db_lock;   /* every command: S, or X for catalog changes */
    pthread_rwlock_t data_lock; /* lockGranularity "database": the data lock */
    pthread_mutex_t txn_mu;     /* engines that are not concurrent: one write
                                   transaction at a time */
    pthread_mutex_t cur_mu;     /* guards cursors and cursor_seed */
    pthread_mutex_t fail_mu;    /* guards fail_err while failed is set */
    int gran;                   /* Q_GRAN_* */
    q_lockstat st_db, st_coll;  /* Database and Collection levels */
    int64_t write_conflicts;    /* each one retried (q_write.c) */
    /* awaitData: getMores with nothing to return wait on cap_cv (a
     * CLOCK_MONOTONIC condition variable) until an insert into a capped
     * collection commits or their time runs out; cap_waiters counts them so
     * that inserts broadcast only when someone waits.  Order: after every
     * other lock (nothing is taken while cap_mu is held). */
    pthread_mutex_t cap_mu;
    pthread_cond_t cap_cv;
    int cap_waiters;
    /* Open option internalQueryFastPaths: false turns off IDHACK
     * execution, in-place updates, the affected-index check and the typed
     * API's direct statements, so that tests can compare them with the
     * general path (the results must be identical). */
    bool no_fast;
    /* The aggregation pipeline's blocking stages' memory limits in bytes
     * (0: MongoDB's 100 MB): open options or setParameter
     * internalDocumentSourceSortMaxBlockingSortBytes and
     * internalDocumentSourceGroupMaxMemoryBytes (agg_cmd.c). */
    int64_t agg_sort_mem, agg_group_mem;
    char *path; /* the database directory (spilled sort runs go to path/_tmp) */
};

/* ---- locks (q_lock.c) ----------------------------------------------------- */
/* Relaxed atomic counters, for statistics shared by threads. */
#define Q_COUNT(x, n) __atomic_fetch_add(&(x), (n), __ATOMIC_RELAXED)
#define Q_LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define Q_MULTIKEY(ix) __atomic_load_n(&(ix)->multikey, __ATOMIC_RELAXED)
#define Q_SET(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
int q_lock_init(md_db *db, const bson_t *opts, md_error *err);
void q_lock_destroy(md_db *db);
/* The database lock, held by md_db_command around every command: mode
 * Q_MODE_IS (reads) and Q_MODE_IX (writes) share it, Q_MODE_X excludes. */
void q_db_lock(md_db *db, int mode);
void q_db_unlock(md_db *db);
/* Around every operation (q_cmd.c): mode Q_MODE_IS, Q_MODE_IX, Q_MODE_X,
 * or Q_OP_CREATE for writes that may create collection `coll`; ttl: run
 * the TTL monitor if it is due. */
#define Q_OP_CREATE Q_NMODES
void q_op_enter(md_db *db, int mode, const char *coll, bool ttl);
void q_op_leave(md_db *db);
/* Does the calling thread hold the database lock exclusively? */
bool q_db_locked_x(const md_db *db);
/* Write transactions: begin waits for txn_mu on engines that are not
 * concurrent; end (after commit or abort) releases it. */
int q_txn_begin(md_db *db, eng_txn **t);
void q_txn_end(md_db *db);
/* After MD_EWRITECONFLICT: count it, forget its message (err), and back
 * off before retry number `attempt`. */
void q_write_conflict(md_db *db, int attempt, md_error *err);
/* Long operations ask every document whether to yield: every 128
 * documents or 10 ms the calling thread's data lock is released and taken
 * again, as MongoDB's yield policy does (only with data locks, never
 * inside a transaction).  Engine cursors must be saved around
 * q_lock_yield (q_scan does this); q_yield_point is for loops that hold
 * none. */
typedef struct q_yield {
    int since;
    int64_t last_ms;
    int64_t yields; /* how many times it yielded */
} q_yield;
bool q_lock_should_yield(md_db *db, q_yield *y);
void q_lock_yield(md_db *db);
static inline void q_yield_point(md_db *db, q_yield *y)
{
    if (q_lock_should_yield(db, y))
        q_lock_yield(db);
}
void q_lock_append_status(md_db *db, bson_t *status);
const char *q_gran_name(int gran);

int q_catalog_load(md_db *db, md_error *err);
void q_catalog_unload(md_db *db);
q_coll *q_coll_find(md_db *db, const char *name);
/* Validate a collection name as MongoDB does (InvalidNamespace, 73) and
 * write its namespace "db.name" into ns (ENG_IDENT_MAX bytes). */
int q_ns_make(md_db *db, const char *name, char *ns, md_error *err);
/* The allocation strategy `options` asks for. */
int q_options_alloc(const bson_t *options, int *alloc, md_error *err);
/* The capped settings `options` ask for, checked as MongoDB 3.x's
 * CollectionOptions and userCreateNS do: *capped false when not capped;
 * size rounded up to a multiple of 256 (0 becomes 4096, WiredTiger's
 * default), max 0 for no limit. */
int q_options_capped(const bson_t *options, bool *capped, int64_t *size, int64_t *max,
                     md_error *err);
/* Create collection `name` with its _id_ index (one transaction). */
int q_coll_create(md_db *db, const char *name, const bson_t *options, q_coll **out,
                  md_error *err);
/* The collection, created implicitly (empty options) when missing. */
int q_coll_get_or_create(md_db *db, const char *name, bool *created, q_coll **out,
                         md_error *err);
int q_coll_drop(md_db *db, q_coll *c, md_error *err);
/* convertToCapped: replace collection c (its records copied in natural
 * order into a new capped store of `size` bytes, size > 0 (the command
 * checks it before anything is dropped), its _id index rebuilt;
 * other indexes dropped, as MongoDB 3.x does).  Under the exclusive
 * database lock.  *out: the new collection (c is freed). */
int q_coll_convert_capped(md_db *db, q_coll *c, int64_t size, q_coll **out, md_error *err);
/* cloneCollectionAsCapped: a new capped collection `to` of `size` bytes
 * holding c's documents in natural order (the ring keeps the newest). */
int q_coll_clone_capped(md_db *db, q_coll *c, const char *to, int64_t size, md_error *err);
/* emptycapped: remove every record and index entry of capped c. */
int q_coll_empty(md_db *db, q_coll *c, md_error *err);
/* Persist c's catalog entry inside transaction t. */
int q_catalog_put(md_db *db, eng_txn *t, q_coll *c, md_error *err);
q_index *q_index_find(q_coll *c, const char *name);
q_index *q_index_find_key(q_coll *c, const bson_t *key);
/*
 * The keys of doc in ix: none if ix is partial and doc does not match its
 * filter; the hashed key for a hashed index (an array value is error
 * 16766); else q_index_keys().  Every write and validate goes through here.
 */
int q_index_doc_keys(const q_index *ix, const bson_t *doc, q_keyset *out, md_error *err);
/* ---- MongoDB's element hash (q_hash.c) ------------------------------------- */
typedef struct q_md5 {
    uint32_t h[4];
    uint64_t len;
    uint8_t buf[64];
} q_md5;
void q_md5_init(q_md5 *m);
void q_md5_append(q_md5 *m, const void *data, size_t n);
void q_md5_finish(q_md5 *m, uint8_t digest[16]);
/* BSONElementHasher::hash64 of the element at it (NULL: a missing field,
 * hashed as null) with `seed`: equal to MongoDB's for every type. */
int64_t q_hash_element(const bson_iter_t *it, int32_t seed);
/* The hashed index key of it (NULL: missing): q_hash_element as a
 * NumberLong, in q_key_append_value form. */
void q_hash_key(const bson_iter_t *it, int32_t seed, q_buf *out);
/* Rebuild the hashed indexes whose keys predate MongoDB's hash (a catalog
 * entry without hash: "md5"; their keys were FNV-1a over the key
 * encoding).  Called by md_db_open after q_catalog_load. */
int q_catalog_upgrade(md_db *db, md_error *err);
/* Build a q_index from a validated spec (not yet opened). */
q_index *q_index_new(const bson_t *spec, const char *ident);
void q_index_free(q_index *ix);
void q_coll_stats(q_coll *c, eng_rs_stats *st);
/* The data lock of c (q_lock.c): c's collection lock, the database's data
 * lock, or only an intent (document-level engines), by lockGranularity.
 * Reentrant within a thread. */
void q_coll_lock(md_db *db, q_coll *c, bool write);
void q_coll_unlock(md_db *db, q_coll *c);

/* ---- the _id fast path (q_idhack.c) -------------------------------------- */
/* Is filter exactly {_id: v} with a v the _id index answers exactly?  *id
 * (may be NULL) gets v. */
bool q_idhack_query(const bson_t *filter, bson_iter_t *id);
/* c's "_id_" index, or NULL (then the general path runs; also when db's
 * fast paths are off). */
q_index *q_idhack_index(md_db *db, q_coll *c);
/* The rid the _id index holds for value id: 0, MD_NOTFOUND, or an engine
 * error.  Counts the key examined (serverStatus metrics.queryExecutor). */
int q_idhack_rid(md_db *db, q_index *ix, const bson_iter_t *id, eng_rid *rid);
/* The record with _id id as a borrowed view (eng_rs_get's lifetime),
 * checked on engines without checked reads: 0, MD_NOTFOUND, or an error
 * filled into err.  Caller holds c's data lock. */
int q_idhack_get(md_db *db, q_coll *c, q_index *ix, const bson_iter_t *id, eng_rid *rid,
                 bson_t *view, md_error *err);

/* ---- write path (q_write.c) --------------------------------------------- */
/* MD_EREADONLY (with a message) when the handle refuses writes. */
int q_write_allowed(md_db *db, md_error *err);
/* Mark the handle failed if rc is an unexpected engine failure. */
int q_write_failed(md_db *db, int rc, md_error *err);
/*
 * Check a document for insertion and build the stored form in `out`
 * (initialized by the call on success): _id generated if missing and moved
 * to the front, no top-level $-prefixed names, at most 16 MB.  The
 * document was validated where it entered; `top`, when that walk noted
 * the top-level names (eng_bson_well_formed_top), saves walking them
 * again (NULL: walked here).  When it is already in the stored form,
 * `out` is a view of it (valid as long as doc is).
 */
int q_doc_prepare_insert(const bson_t *doc, const eng_bson_top *top, bson_t *out,
                         md_error *err);
int q_write_insert(md_db *db, q_coll *c, const bson_t *doc, bool durable, eng_rid *rid,
                   md_error *err);

/* What a one-document write acts on: record rid if it (still) matches m
 * (NULL: no re-check), or, with id_index set, the record that index maps
 * _id value `id` to, looked up inside the write's own transaction
 * (IDHACK: no matcher, the key lookup is the match). */
typedef struct q_target {
    eng_rid rid;
    const q_matcher *m;
    q_index *id_index;
    bson_iter_t id;
} q_target;

typedef struct q_update_res {
    bool matched, modified, moved;
    eng_rid rid; /* the record's RecordId afterwards */
} q_update_res;
/* Update record `rid` if it (still) matches m (NULL: no re-check); the
 * document as it was and as it became are appended to before and after
 * (initialized documents, or NULL).  res->matched false: it is gone or no
 * longer matches (another writer got there first). */
int q_write_update(md_db *db, q_coll *c, eng_rid rid, const q_matcher *m,
                   const q_update *u, bool durable, q_update_res *res, bson_t *before,
                   bson_t *after, md_error *err);
int q_write_update_target(md_db *db, q_coll *c, const q_target *tg, const q_update *u,
                          bool durable, q_update_res *res, bson_t *before, bson_t *after,
                          md_error *err);
/* Delete record rid if it (still) matches m; *deleted says whether it did. */
int q_write_delete_target(md_db *db, q_coll *c, const q_target *tg, bool durable,
                          bool *deleted, bson_t *before, md_error *err);
int q_write_delete(md_db *db, q_coll *c, eng_rid rid, const q_matcher *m, bool durable,
                   bool *deleted, bson_t *before, md_error *err);
/* Insert every key of doc (an owned copy, not a view) into ix, inside t. */
int q_index_add_doc(md_db *db, eng_txn *t, q_coll *c, q_index *ix, const bson_t *doc,
                    eng_rid rid, bool *multikey_changed, md_error *err);
/* Fill ix's sorted store with the keys of every record (inside t). */
int q_index_build(md_db *db, eng_txn *t, q_coll *c, q_index *ix, md_error *err);
/* The capped-delete hook (eng_rs_set_capped_hook; ctx is the q_coll):
 * removes the index entries of a record the ring is about to remove, in
 * the inserting transaction. */
int q_capped_hook(void *ctx, eng_txn *t, eng_rid rid, const uint8_t *data, uint32_t len);
/* IllegalOperation "cannot remove from a capped collection: db.c". */
int q_capped_refuse_delete(const q_coll *c, md_error *err);
/* Wake the awaitData getMores after an insert into capped c committed. */
void q_capped_notify(md_db *db, q_coll *c);

/* ---- plans (q_plan.c) ------------------------------------------------------ */
/* An interval of encoded keys with prefix semantics (see q_plan.c). */
typedef struct q_ival {
    q_buf lo, hi;
    q_buf los, his; /* explain's rendering of each end: "[1", "inf.0]" */
    bool lo_incl, hi_incl, point;
} q_ival;

typedef struct q_plan {
    q_index *ix;     /* NULL: collection scan */
    int dir;         /* 1 forward, -1 backward */
    q_ival *iv;      /* ascending, owned */
    size_t niv;
    uint32_t eqmask; /* key fields fixed to one point */
    size_t nused;    /* leading key fields the bounds constrain */
    bson_t *bounds;  /* explain's indexBounds ({a: ["[1, 1]"]}), owned */
    bool sort_provided, idhack, hinted;
    bool covered;    /* the projection comes from the keys: no FETCH */
    bool key_filter; /* covered, and the matcher runs on each decoded key
                        (a regex the bounds do not decide) */
    struct q_text_plan *text; /* $text: the TEXT plan over ix (q_text_index.c), owned */
    bool geo_near;   /* a $near over a geo index (explain: GEO_NEAR_*) */
} q_plan;
void q_plan_cleanup(q_plan *p);
void q_plan_copy(const q_plan *src, q_plan *dst);
/* Every plan that fits the query (the hinted one only; IDHACK alone; else
 * each usable index, or a collection scan).  Caller frees with q_plans_free.
 * A hint naming no index is BadValue "bad hint". */
int q_plan_enumerate(q_coll *c, const bson_t *filter, const bson_t *sort,
                     const bson_iter_t *hint, q_plan **out, size_t *n, md_error *err);
void q_plans_free(q_plan *v, size_t n);
/* Fill p->bounds (explain's indexBounds) if p scans an index. */
void q_plan_render_bounds(q_plan *p, const bson_t *filter);
/* Can index plan p answer the query from its keys alone: a non-multikey
 * index, bounds that decide the filter exactly (or regexes on key fields,
 * then p->key_filter is set and the scan matches each decoded key), and an
 * inclusion projection of top-level key fields that excludes _id (unless
 * keyed)? */
bool q_plan_covers(q_plan *p, const bson_t *filter, const bson_t *proj);
/* The predicates of filter an index scan on p can test on each key before
 * it fetches the record (MongoDB's IXSCAN filter): the regexes on
 * top-level key fields of a plain index that is not multikey, whose keys
 * hold the field's whole value.  NULL when there are none (caller
 * destroys). */
bson_t *q_plan_key_prefilter(const q_plan *p, const bson_t *filter);
/*
 * The plan cache: the index a trial chose for a query shape (the filter's
 * fields, operators and value types, the sort and the projection), until
 * c's indexes change.  get: the index name ("" for a collection scan) or
 * NULL; put copies shape.
 */
void q_plan_shape(const bson_t *filter, const bson_t *sort, const bson_t *proj, q_buf *out);
/* The cached index name for shape into name (ENG_IDENT_MAX bytes): false if none. */
bool q_plan_cache_get(q_coll *c, const q_buf *shape, char *name);
void q_plan_cache_put(q_coll *c, const q_buf *shape, const bson_t *filter, const bson_t *sort,
                      const bson_t *proj, const char *index);
void q_plan_cache_clear(q_coll *c);
void q_plan_cache_note_write(q_coll *c); /* after each committed write */
/* planCacheListQueryShapes / planCacheClear (q_plan.c). */
int q_cmd_plan_cache_list(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err);
int q_cmd_plan_cache_clear(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err);

/* ---- scans (q_scan.c) ------------------------------------------------------ */
typedef struct q_ridset {
    eng_rid *v;
    size_t n, cap;
} q_ridset;

enum q_scan_kind { Q_SCAN_COLL, Q_SCAN_INDEX, Q_SCAN_TEXT };
typedef struct q_scan {
    md_db *db;
    q_coll *c;
    const q_matcher *m; /* borrowed; NULL matches everything */
    int kind;
    eng_rs_cursor *rc;
    eng_ss_cursor *sc;
    q_index *ix;
    q_plan plan;        /* owned */
    q_plan *rejected;   /* the plans the trial lost, for explain (owned) */
    size_t nrejected;
    size_t iv;          /* the interval being scanned */
    q_buf last_key;     /* the entry an index scan returned last */
    eng_rid last;
    bool started, restored, eof;
    int fail;               /* an engine error ended the scan (q_scan_error) */
    q_yield yield;
    q_ridset seen;      /* rids an index scan returned (dedup) */
    bson_t kdoc;        /* a covered scan's document, decoded from the key */
    q_matcher *pre;     /* owned: tested on each decoded key before a fetch
                           (q_plan_key_prefilter), or NULL */
    int64_t keys, docs, advanced; /* keys / documents examined, returned */
    struct q_text_run *text;  /* Q_SCAN_TEXT: the records and their scores */
    double text_score;        /* Q_SCAN_TEXT: the score of the last record returned */
    int64_t text_rejected;    /* Q_SCAN_TEXT: records TEXT_MATCH dropped */
} q_scan;

typedef struct q_scan_opts {
    const bson_t *sort;      /* the sort the plan should provide, or NULL */
    const bson_iter_t *hint; /* a find's hint value, or NULL */
    const bson_t *proj;      /* the projection (a covered plan needs it) */
    bool explain;            /* keep the rejected plans */
} q_scan_opts;
/* Choose a plan for filter and position before the first match. */
int q_scan_open(q_scan *s, md_db *db, q_coll *c, const bson_t *filter, const q_matcher *m,
                md_error *err);
int q_scan_open_opts(q_scan *s, md_db *db, q_coll *c, const bson_t *filter,
                     const q_matcher *m, const q_scan_opts *o, md_error *err);
/* Open a scan on plan p (stolen: *p is left empty). */
int q_scan_open_plan(q_scan *s, md_db *db, q_coll *c, const q_matcher *m, q_plan *p,
                     md_error *err);
/* Next matching record: 0, or MD_NOTFOUND at the end.  *doc is a borrowed
 * static view, valid until the next call or the next write. */
int q_scan_next(q_scan *s, eng_rid *rid, bson_t *doc);
/* After q_scan_next stopped: 0 at a normal end, else the engine error that
 * ended the scan (filled into err).  q_scan_next also returns it. */
int q_scan_error(const q_scan *s, md_error *err);
/* Report read failure rc in err, with the details the engine noted
 * (eng_note_error) when there are any. */
int q_read_error(int rc, md_error *err);
void q_scan_save(q_scan *s);
int q_scan_restore(q_scan *s);
void q_scan_close(q_scan *s);
const char *q_scan_plan_name(const q_scan *s);
/* Collect the rids of up to `limit` (0 = all) matches. */
int q_scan_collect(md_db *db, q_coll *c, const bson_t *filter, const q_matcher *m,
                   int64_t limit, eng_rid **rids, size_t *n, md_error *err);

/* ---- projection (q_proj.c) and sort (q_cursor.c) ------------------------ */
struct q_pnode;
typedef struct q_proj {
    bool active, id;
    bool positional, elem_match;
    struct q_pnode *root;
    const q_matcher *m; /* borrowed: the query, for "a.$"; set by the caller */
    char **meta;        /* {f: {$meta: "textScore"}}: the fields f, in order */
    size_t nmeta;
    double text_score;  /* what they get: set by the caller before q_proj_apply */
} q_proj;
/* Parse a projection; `filter` (may be NULL) is the query a positional
 * projection must refer to.  BadValue for the errors of 3.6's
 * ParsedProjection.  q_proj_cleanup() releases it (also after an error). */
int q_proj_init_query(q_proj *p, const bson_t *spec, const bson_t *filter, md_error *err);
/* Project doc into out (initialized by the call); a positional projection
 * uses p->m to find the matched array element. */
void q_proj_apply(const q_proj *p, const bson_t *doc, bson_t *out);
void q_proj_cleanup(q_proj *p);
/* Validate a sort spec ({f: 1, g: -1}). */
int q_sort_check(const bson_t *spec, md_error *err);
void q_sort_docs(bson_t **docs, size_t n, const bson_t *spec);
/* The same with each document's text score, for {f: {$meta: "textScore"}}
 * keys (highest first); scores are permuted along with docs. */
void q_sort_docs_scored(bson_t **docs, double *scores, size_t n, const bson_t *spec);
/* Does a sort spec ask for {$meta: "textScore"}? */
bool q_sort_has_meta(const bson_t *spec);
int q_sort_cmp_docs(const bson_t *a, const bson_t *b, const bson_t *spec);

/* ---- cursors (q_cursor.c) ------------------------------------------------- */
typedef struct q_find_args {
    const bson_t *filter, *projection, *sort;
    const bson_iter_t *hint; /* NULL: the planner chooses */
    int64_t skip, limit, batch_size; /* batch_size -1: default */
    bool single_batch;
    bool no_timeout; /* noCursorTimeout: never reaped for idleness */
    bool tailable, await_data; /* capped collections only (q_cursor.c) */
} q_find_args;
/* A parsed find command (views into the command, which must outlive it). */
typedef struct q_find_cmd {
    const char *name;
    char ns[ENG_IDENT_MAX];
    q_find_args a;
    bson_t filter, projection, sort;
    bson_t hint; /* {h: <the hint>}, owned */
    bson_iter_t hint_it;
    bool has_filter, has_projection, has_sort, has_hint;
} q_find_cmd;
/* Parse a find command (q_cmd_find.c); q_find_cmd_cleanup() afterwards,
 * also after an error. */
int q_find_parse(md_db *db, const bson_t *cmd, q_find_cmd *p, md_error *err);
void q_find_cmd_cleanup(q_find_cmd *p);
/* The same for the typed API: the filter, then opts read field by field by
 * the command's own rules (fields named in `skip` left out); filter and
 * opts must outlive p. */
int q_find_parse_typed(md_db *db, const char *coll, const bson_t *filter, const bson_t *opts,
                       const char *const *skip, q_find_cmd *p, md_error *err);
/* IDHACK find (q_cursor.c): when a is {_id: v} (see q_idhack_query) with
 * no hint, skip, tailable or zero batch size, 0 with *found and `out` (an
 * initialized document, reused: bson_reinit keeps its buffer) holding the
 * projected document when found; Q_FIND_GENERAL (> 0)
 * when the general path must answer.  Under the database lock. */
#define Q_FIND_GENERAL 1
int q_find_by_id(md_db *db, q_coll *c, const q_find_args *a, bool *found, bson_t *out,
                 md_error *err);
/* Run a find through the planner, appending "cursor: {firstBatch, id,
 * ns}" to reply (callers try q_find_by_id first). */
int q_cursor_find(md_db *db, q_coll *c, const char *ns, const q_find_args *a, bson_t *reply,
                  md_error *err);
/* max_time_ms: the getMore's maxTimeMS, -1 when not given (awaitData
 * cursors then wait 1000 ms, as MongoDB). */
int q_cursor_get_more(md_db *db, int64_t id, const char *ns, int64_t batch_size,
                      int64_t max_time_ms, bson_t *reply, md_error *err);
/* Kill the cursors idle for longer than db->cursor_timeout_ms. */
void q_cursor_reap(md_db *db, int64_t now_ms);
/* Kill one cursor: 0 or MD_NOTFOUND. */
int q_cursor_kill(md_db *db, int64_t id);
/* Kill every cursor of collection c (NULL: all). */
void q_cursor_kill_coll(md_db *db, q_coll *c);
/* Number of open server-side cursors. */
int64_t q_cursor_count(md_db *db);
/* Kill every cursor scanning index ix. */
void q_cursor_kill_index(md_db *db, q_index *ix);
/* A cursor over materialized documents (docs and each document stolen),
 * for aggregate: the first batch (batch_size, -1: 101) is appended to
 * reply as "cursor: {firstBatch, id, ns}"; the rest waits for getMore.  c
 * (may be NULL) is the collection whose drop kills the cursor. */
int q_cursor_from_docs(md_db *db, q_coll *c, const char *ns, bson_t **docs, size_t n,
                       int64_t batch_size, bson_t *reply, md_error *err);
/* Append a "cursor" subdocument of already materialized documents (id 0). */
void q_cursor_reply_array(bson_t *reply, const char *ns, bson_t **docs, size_t n);

/* ---- TTL (q_ttl.c) ---------------------------------------------------------- */
#define Q_TTL_SLEEP_SECS 60 /* ttlMonitorSleepSecs default */
/* Delete every expired document of every TTL index now; *deleted counts. */
int q_ttl_pass(md_db *db, int64_t now_ms, int64_t *deleted, md_error *err);
/* Run a pass if the last one is older than the monitor's period. */
void q_ttl_maybe(md_db *db, int64_t now_ms);
int q_cmd_ttl_monitor(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err);

/* ---- command helpers (q_cmd.c) ------------------------------------------- */
typedef int (*q_cmd_fn)(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err);

/* md_error_set, with "Location<N>" / known names for codes md_code_name
 * does not list. */
int q_err(md_error *err, int rc, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* End a command's reply as md_db_command does: ok: 1, or (rc != 0) the
 * reply replaced by {ok: 0, errmsg, code, codeName}.  Returns rc (a
 * positive rc becomes MD_ERROR). */
int q_reply_finish(bson_t *reply, int rc, const md_error *err);
/* Engine rc -> md_error when the engine left err empty. */
int q_err_engine(md_error *err, int rc, const char *what);
/* MongoDB's name for a BSON type ("double", "object", ...); defined in
 * q_value.c (also declared in q_path.h). */
const char *q_type_name(bson_type_t t);
/* Fields every command accepts and ignores ($db, lsid, writeConcern...). */
bool q_is_generic_arg(const char *name);
/* The collection name of a command's first field and its namespace.  A
 * non-string is TypeMismatch in IDL wording (idl: write commands) or
 * InvalidNamespace as 3.6's parseNsCollectionRequired says it. */
int q_cmd_coll_name(md_db *db, const bson_t *cmd, bool idl, const char **name, char *ns,
                    md_error *err);
/* Read an integral number (int32/int64/integral double) into *out. */
bool q_iter_int64(const bson_iter_t *it, int64_t *out);
/* Number as int32 when it fits, else int64 (BSONObjBuilder::appendNumber). */
void q_append_number(bson_t *b, const char *key, int64_t v);
/* Is doc exactly {field: 1} (any numeric type)? */
bool q_doc_is_one(const bson_t *doc, const char *field);
/* writeConcern: j -> *durable.  BadValue on malformed values.  cmd may be
 * NULL (no options: not durable). */
int q_write_concern(const bson_t *cmd, bool *durable, md_error *err);
/* IDL-style messages: "BSON field 'insert.documents' is the wrong type ..." */
int q_err_field_type(md_error *err, const char *cmd, const char *field, bson_type_t got,
                     const char *want);
int q_err_field_missing(md_error *err, const char *cmd, const char *field);
int q_err_field_unknown(md_error *err, const char *cmd, const char *field);
int64_t q_now_ms(void);
/* Zeroed memory aligned for structs that embed a bson_t (which asks for
 * 128-byte alignment); release with free(). */
void *q_zalloc(size_t size);

/* ---- write statements (q_cmd_crud.c) -----------------------------------------
 * One statement of insert / update / delete, executed the same way whether
 * the command parser or the typed API (q_api.c) built it; the caller holds
 * the database lock (q_op_enter) and has checked q_write_allowed. */
typedef struct q_upd_stmt {
    bson_t q, u, af; /* af: arrayFilters, when has_af (views) */
    bool upsert, multi, has_af;
} q_upd_stmt;
typedef struct q_upd_out {
    int64_t n, modified;
    bool upserted;
    bson_t id; /* the upserted _id, as {_id: value} (initialized by the caller) */
} q_upd_out;
int q_update_exec(md_db *db, const char *coll, bool durable, const q_upd_stmt *s,
                  q_upd_out *o, md_error *err);
/* Delete up to limit (0: all) documents matching q; *n counts them. */
int q_delete_exec(md_db *db, const char *coll, bool durable, const bson_t *q, int64_t limit,
                  int64_t *n, md_error *err);
/* findAndModify of the typed API: query, and opts holding the command's
 * other fields ({update, sort, new, fields, upsert, remove, ...}; a
 * "query" there is ignored), parsed field by field as the command is. */
int q_find_and_modify_exec(md_db *db, const char *coll, const bson_t *query,
                           const bson_t *opts, bson_t *reply, md_error *err);
/* Insert doc (checked and given an _id by q_doc_prepare_insert, with
 * `top` if the caller's validation noted it, else NULL) into c. */
int q_insert_exec(md_db *db, q_coll *c, const bson_t *doc, const eng_bson_top *top,
                  bool durable, md_error *err);

/* command handlers, one group per file */
int q_cmd_insert(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err);
int q_cmd_update(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err);
int q_cmd_delete(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err);
int q_cmd_find_and_modify(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err);
int q_cmd_find(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err);
int q_cmd_get_more(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err);
int q_cmd_kill_cursors(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err);
int q_cmd_explain(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err);
/* The queryPlanner section of a query's explain (c NULL: EOF), appended to
 * out; used by the aggregate's $cursor stage (q_explain.c). */
int q_explain_planner(md_db *db, q_coll *c, const char *ns, const bson_t *filter,
                      const bson_t *sort, const bson_t *proj, bson_t *out, md_error *err);
int q_cmd_aggregate(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err);
/* Does an aggregate command's pipeline hold $out (agg_pipeline.c)?  It then
 * takes the database lock exclusively. */
bool agg_cmd_writes(const bson_t *cmd);
int q_cmd_count(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err);
int q_cmd_distinct(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err);
int q_cmd_create(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err);
int q_cmd_drop(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err);
int q_cmd_convert_to_capped(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err);
int q_cmd_empty_capped(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err);
int q_cmd_clone_capped(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err);
int q_cmd_list_collections(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err);
int q_cmd_coll_mod(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err);
int q_cmd_create_indexes(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err);
int q_cmd_drop_indexes(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err);
int q_cmd_list_indexes(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err);
int q_cmd_coll_stats(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err);
int q_cmd_server_status(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err);
int q_cmd_validate(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err);
int q_cmd_compact(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err);
int q_cmd_fsync(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err);
int q_cmd_ping(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err);
int q_cmd_hash_element(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err);
int q_cmd_set_parameter(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err);
/* Apply the query layer's open options (cursorTimeoutMillis) to db; meant
 * to be called by md_db_open. */
int q_db_configure(md_db *db, const bson_t *opts, md_error *err);
int q_cmd_build_info(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err);
int q_cmd_is_master(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err);
int q_cmd_drop_database(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err);
/* mapReduce (q_cmd_mapreduce.c); q_mr_writes: does it write a collection
 * (then it runs under the exclusive database lock)? */
int q_cmd_map_reduce(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err);
bool q_mr_writes(const bson_t *cmd);

#endif /* Q_INT_H */
