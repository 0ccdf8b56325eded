/*
 * eng.h -- the engine contract: what query/ may ask of a storage engine.
 *
 * An engine stores three things and knows nothing of queries:
 *
 *   record stores  one per collection: RecordId -> raw BSON bytes
 *   sorted stores  one per index: ordered (key bytes, RecordId) pairs; the
 *                  keys arrive already encoded so that memcmp orders them
 *   the catalog    small named metadata documents (collection options and
 *                  index specs), persisted by the engine so that a reopened
 *                  database is complete
 *
 * Every write happens inside a transaction (eng_txn): mmapv1 turns it into
 * write intents with pre-images (rollback now, journal later); btree turns
 * it into log records and versioned updates.  A failed write is aborted and
 * leaves no trace.
 *
 * Engines are objects with a table of operations (like WiredTiger's
 * WT_COMPRESSOR callbacks): each engine struct begins with `const
 * eng_ops *ops`.  The eng_* wrapper functions below are what callers use.
 *
 * Borrowed views: a pointer returned by eng_rs_get() or a cursor points into
 * engine memory (for mmapv1, into a file mapping).  It stays valid until the
 * next write by the same thread, the end of the enclosing transaction, or
 * the next read by the same thread through the same handle or cursor that
 * returned it, whichever comes first.  Another thread's reads and writes
 * never end it (mmapv1: the caller's collection lock keeps writers out;
 * btree: views are per-thread copies).  Copy what you need to keep.
 *
 * Threads.  Engine, handles (eng_rs, eng_ss) and the catalog may be shared
 * by threads; a transaction belongs to the thread that began it; a cursor
 * is used by one thread at a time (it may move between threads between
 * calls, as a server-side cursor continued by getMore does).  What may run
 * at once depends on ops->concurrent:
 *
 *   concurrent = false (mmapv1, ephemeralForTest): one write transaction at
 *     a time per engine (a second eng_txn_begin waits for the first to end);
 *     reads may run in other threads while it is open, provided the caller's
 *     locks keep them off the records it is changing (query/ takes the
 *     collection or database lock).
 *   concurrent = true (btree): document-level concurrency, after
 *     WiredTiger.  Any number of transactions, one per thread.  A
 *     transaction reads a snapshot taken at eng_txn_begin plus its own
 *     writes; reads by a thread with no transaction open see the latest
 *     committed state, each call atomically.  A write to a key that another
 *     transaction changed and has not committed, or committed after this
 *     snapshot began, fails with MD_EWRITECONFLICT; the caller aborts and
 *     retries the whole unit (query/ does, as MongoDB's writeConflictRetry).
 *     Readers never wait for a transaction to end.
 *
 * Structural operations (rs/ss create, drop, truncate, compact) and
 * eng_close run only while no other transaction is open: query/ holds its
 * database lock exclusively around them.
 *
 * Identifiers ("idents") name storage objects.  query/ derives them from
 * namespaces: collection "test.c", index "test.c.$x_1".  An ident is at most
 * ENG_IDENT_MAX - 1 bytes.
 */
#ifndef ENG_H
#define ENG_H

#include <endian.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "minidoc.h"

#define ENG_IDENT_MAX 128

/*
 * RecordId.  Never 0 for a live record (0 is "none").  mmapv1: the physical
 * location (file << 32 | offset), so a move changes it.  btree: a 64-bit
 * counter that never changes.
 */
typedef int64_t eng_rid;
#define ENG_RID_NONE ((eng_rid)0)

typedef struct eng_engine eng_engine;
typedef struct eng_txn eng_txn;
typedef struct eng_rs eng_rs;
typedef struct eng_ss eng_ss;
typedef struct eng_rs_cursor eng_rs_cursor;
typedef struct eng_ss_cursor eng_ss_cursor;
typedef struct eng_ops eng_ops;

/* A byte patch for an in-place update: copy `len` bytes from offset
 * `src_ofs` of the new document to offset `dst_ofs` of the stored one. */
typedef struct eng_damage {
    uint32_t src_ofs;
    uint32_t dst_ofs;
    uint32_t len;
} eng_damage;

/* Record allocation strategies (mmapv1; other engines ignore them). */
enum eng_alloc {
    ENG_ALLOC_POWEROF2 = 0,     /* quantize record+header to a bucket size */
    ENG_ALLOC_NOPADDING = 1,    /* exact fit */
    ENG_ALLOC_PADDINGFACTOR = 2 /* adaptive 1.0..2.0 factor of MongoDB 2.x */
};
const char *eng_alloc_name(int alloc);
int eng_alloc_parse(const char *name); /* -1 if unknown */

/*
 * Capped record stores (eng_rs_options.capped), MongoDB's ring buffers.
 *
 *   - The engine keeps the store within capped_size bytes and capped_max
 *     documents (0: no limit on the count) by removing its OLDEST records.
 *     It does so inside the rs_insert that needs the room, in the caller's
 *     transaction.  What counts against capped_size is the engine's own
 *     measure (mmapv1: the ring of extents, allocated up front, as 3.0;
 *     btree and ephemeralForTest: the sum of document sizes, as
 *     WiredTiger's capped record store).  A record that cannot fit at all
 *     fails with MD_ETOOBIG.
 *   - Before removing a record to make room, the engine calls the store's
 *     capped-delete hook (eng_rs_set_capped_hook) with the record, so that
 *     query/ removes its index entries in the same transaction.  A nonzero
 *     return fails the insert with that code; the caller aborts.  Calls
 *     come oldest record first; `data` is a view valid during the call
 *     only; the hook may write to other stores (sorted stores) through `t`
 *     but not to the capped store itself.
 *   - Forward cursors return records in insertion order, oldest first
 *     (mmapv1 walks the ring from its oldest record, not the extent chain).
 *   - Tailing: a forward cursor that returned MD_NOTFOUND stays after the
 *     last record it returned; a later next() (after save/restore, or
 *     directly) returns the records inserted since.
 *   - A saved forward cursor whose last returned record the ring removed
 *     fails restore (and every later next) with MD_ECAPPEDLOST, even where
 *     a newer record now sits at the same location.  (Engines cannot tell
 *     the ring's removals from others: a record removed by rs_truncate
 *     loses the cursor the same way, as MongoDB's emptycapped kills
 *     cursors.)  Reverse cursors just end where the ring has removed.
 *   - The caller runs one write transaction at a time on a capped store
 *     (query/ holds its collection lock exclusively for capped writes, as
 *     MongoDB does), so records commit in insertion order and a tailing
 *     cursor never skips one still being written.
 *   - rs_update and rs_remove work as on any store, except that an
 *     update that would make a record longer fails with MD_ENOTSUP and
 *     code 10003 ("objects in a capped ns cannot grow": mmapv1's ring
 *     cannot move records); query/ enforces MongoDB's rules (no growth,
 *     no user deletes) before that.  rs_truncate empties the ring
 *     (emptycapped).  mmapv1 refuses rs_compact on a capped store.
 *   - Readers: on engines with collection_lock or without concurrent,
 *     a tailing reader holds the caller's lock shared around each batch
 *     (restore .. next .. save), as for any scan; btree needs no lock and
 *     checks at every next that the ring has not passed the cursor.
 *     mmapv1 marks a cursor lost when its record is removed, so a
 *     transaction that removed it and then aborted still loses it.
 *   - Stats: count and data_size are true for the ring (mmapv1's
 *     data_size counts netLength, documents rounded up to 4 bytes);
 *     storage_size is the ring's extents on mmapv1, capped_size on
 *     ephemeralForTest, the file on btree.
 */
typedef int (*eng_capped_delete_fn)(void *ctx, eng_txn *t, eng_rid rid, const uint8_t *data,
                                    uint32_t len);

typedef struct eng_rs_options {
    int alloc;           /* enum eng_alloc */
    bool capped;         /* see "Capped record stores" above */
    int64_t capped_size; /* bytes (> 0 when capped) */
    int64_t capped_max;  /* documents, 0 = no limit */
    const char *block_compressor; /* btree: "none" | "snappy" | "zstd"; NULL =
                                     the engine's default; others ignore it */
} eng_rs_options;

typedef struct eng_rs_stats {
    int64_t count;         /* live records */
    int64_t data_size;     /* as MongoDB's collStats "size" for this engine */
    int64_t storage_size;  /* bytes reserved for the collection */
    int64_t n_inserts;
    int64_t n_updates;
    int64_t n_inplace;     /* updates that kept their location */
    int64_t n_moves;       /* updates that moved the record */
    int64_t bytes_written; /* document bytes written by inserts and updates */
} eng_rs_stats;

/* Options of mmapv1's compact; other engines may ignore them. */
typedef struct eng_compact_opts {
    enum { ENG_PAD_NONE, ENG_PAD_PRESERVE, ENG_PAD_MANUAL } padding;
    double padding_factor; /* MANUAL: 1.0 .. 4.0 */
    int32_t padding_bytes; /* MANUAL: 0 .. */
} eng_compact_opts;

/*
 * validate accumulates findings here.  Engines add errors with
 * eng_validate_error() and facts with BSON_APPEND_* on `info`, whose fields
 * end up at the top level of the validate reply (nrecords, deletedCount...).
 */
typedef struct eng_validate {
    bool full;
    int nerrors;
    bson_t errors; /* array of strings */
    bson_t info;
} eng_validate;
void eng_validate_init(eng_validate *v, bool full);
void eng_validate_cleanup(eng_validate *v);
void eng_validate_error(eng_validate *v, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Called once per catalog entry by eng_meta_list(); nonzero stops. */
typedef int (*eng_meta_fn)(void *ctx, const char *key, const bson_t *value);

/* -------------------------------------------------------------------------
 * The operations table.  Optional entries may be NULL; the wrappers then
 * return MD_ENOTSUP.
 * ---------------------------------------------------------------------- */
struct eng_ops {
    const char *name; /* "mmapv1", "btree" */
    /* capability flags */
    bool has_damages;     /* rs_update_damages is meaningful */
    bool collection_lock; /* query/ must take a collection rwlock */
    bool concurrent;      /* many transactions at once (see Threads above) */
    bool checked_reads;   /* a damaged record is an error, never returned
                             (checksums, or records only in memory); else
                             query/ checks documents on their way out */

    /* Does `dir` hold data files this engine created?  NULL: it never
     * creates files (eng_detect() then never names it). */
    bool (*owns_dir)(const char *dir);
    int (*open)(const char *dir, const char *db_name, const bson_t *opts,
                eng_engine **out, md_error *err);
    void (*close)(eng_engine *e);
    int (*flush)(eng_engine *e, bool sync, md_error *err);
    void (*append_status)(eng_engine *e, bson_t *status);
    int64_t (*total_moves)(eng_engine *e);

    int (*txn_begin)(eng_engine *e, eng_txn **out);
    int (*txn_commit)(eng_txn *t, bool durable, md_error *err);
    void (*txn_abort)(eng_txn *t);

    int (*meta_put)(eng_engine *e, eng_txn *t, const char *key, const bson_t *value,
                    md_error *err);
    int (*meta_get)(eng_engine *e, const char *key, bson_t *out);
    int (*meta_del)(eng_engine *e, eng_txn *t, const char *key);
    int (*meta_list)(eng_engine *e, eng_meta_fn fn, void *ctx);
    /* Optional: where entry key is stored ("DIR/test.0 offset 0x41b0"),
     * for messages about an entry whose content is damaged; NULL for
     * engines whose catalog is checksummed or only in memory. */
    void (*meta_where)(eng_engine *e, const char *key, char *buf, size_t n);

    int (*rs_create)(eng_engine *e, eng_txn *t, const char *ident,
                     const eng_rs_options *o, md_error *err);
    int (*rs_open)(eng_engine *e, const char *ident, eng_rs **out, md_error *err);
    void (*rs_close)(eng_rs *rs);
    int (*rs_drop)(eng_engine *e, eng_txn *t, const char *ident);
    int (*rs_insert)(eng_rs *rs, eng_txn *t, const uint8_t *data, uint32_t len,
                     eng_rid *out, md_error *err);
    int (*rs_get)(eng_rs *rs, eng_rid rid, const uint8_t **data, uint32_t *len);
    int (*rs_update)(eng_rs *rs, eng_txn *t, eng_rid rid, const uint8_t *data,
                     uint32_t len, eng_rid *new_rid, bool *moved, md_error *err);
    int (*rs_update_damages)(eng_rs *rs, eng_txn *t, eng_rid rid, const uint8_t *src,
                             const eng_damage *d, size_t nd, md_error *err);
    int (*rs_remove)(eng_rs *rs, eng_txn *t, eng_rid rid);
    int (*rs_truncate)(eng_rs *rs, eng_txn *t);
    int (*rs_set_alloc)(eng_rs *rs, eng_txn *t, int alloc);
    void (*rs_stats)(eng_rs *rs, eng_rs_stats *s);
    void (*rs_append_stats)(eng_rs *rs, bson_t *sub); /* the engine subdocument */
    int (*rs_validate)(eng_rs *rs, eng_validate *v);
    int (*rs_compact)(eng_rs *rs, eng_txn *t, const eng_compact_opts *o, bson_t *info,
                      md_error *err);

    int (*rs_cursor_open)(eng_rs *rs, bool forward, eng_rs_cursor **out);
    int (*rs_cursor_next)(eng_rs_cursor *c, eng_rid *rid, const uint8_t **data,
                          uint32_t *len);
    void (*rs_cursor_save)(eng_rs_cursor *c);
    int (*rs_cursor_restore)(eng_rs_cursor *c);
    void (*rs_cursor_close)(eng_rs_cursor *c);

    int (*ss_create)(eng_engine *e, eng_txn *t, const char *ident, md_error *err);
    int (*ss_open)(eng_engine *e, const char *ident, eng_ss **out, md_error *err);
    void (*ss_close)(eng_ss *ss);
    int (*ss_drop)(eng_engine *e, eng_txn *t, const char *ident);
    int (*ss_insert)(eng_ss *ss, eng_txn *t, const uint8_t *key, uint32_t klen, eng_rid rid,
                     bool unique, eng_rid *dup_rid, md_error *err);
    int (*ss_remove)(eng_ss *ss, eng_txn *t, const uint8_t *key, uint32_t klen, eng_rid rid);
    int (*ss_truncate)(eng_ss *ss, eng_txn *t);
    int64_t (*ss_size)(eng_ss *ss);    /* bytes on disk, for totalIndexSize */
    int64_t (*ss_entries)(eng_ss *ss); /* number of (key, rid) pairs */
    int (*ss_validate)(eng_ss *ss, eng_validate *v);
    /* Optional point lookup (see eng_ss_find); NULL: a cursor does it. */
    int (*ss_find)(eng_ss *ss, const uint8_t *key, uint32_t klen, eng_rid *rid);

    int (*ss_cursor_open)(eng_ss *ss, eng_ss_cursor **out);
    int (*ss_cursor_seek)(eng_ss_cursor *c, const uint8_t *key, uint32_t klen, eng_rid rid);
    int (*ss_cursor_next)(eng_ss_cursor *c);
    int (*ss_cursor_prev)(eng_ss_cursor *c);
    int (*ss_cursor_get)(eng_ss_cursor *c, const uint8_t **key, uint32_t *klen,
                         eng_rid *rid);
    void (*ss_cursor_save)(eng_ss_cursor *c);
    int (*ss_cursor_restore)(eng_ss_cursor *c);
    void (*ss_cursor_close)(eng_ss_cursor *c);
};

/* Every engine object begins with this header. */
struct eng_engine {
    const eng_ops *ops;
};
struct eng_txn {
    eng_engine *engine;
};
struct eng_rs {
    eng_engine *engine;
    eng_capped_delete_fn capped_hook; /* set by eng_rs_set_capped_hook */
    void *capped_ctx;
};
struct eng_ss {
    eng_engine *engine;
};
struct eng_rs_cursor {
    eng_rs *rs;
};
struct eng_ss_cursor {
    eng_ss *ss;
};

/* ---- registry (eng_registry.c) ------------------------------------------- */
/* The engine named `name`, or NULL.  eng_engines() is NULL-terminated. */
const eng_ops *eng_find(const char *name);
const eng_ops *const *eng_engines(void);
/* The engine whose data files are in `dir` (MongoDB refuses to open a
 * dbpath with another engine), or NULL when no engine's files are there. */
const eng_ops *eng_detect(const char *dir);

/* ---- wrappers -------------------------------------------------------------
 * Semantics of each (all return 0 or a negative MD_* code):
 *
 * eng_open           open or create the engine's files for database db_name
 *                    in dir.  Takes the directory lock (MD_EBUSY).
 * eng_flush          write everything to the data files; sync => fsync too.
 *
 * eng_txn_begin      start a unit of work for the calling thread (see
 *                    Threads above for how many may be open).
 *                    commit(durable) makes it permanent (durable: wait
 *                    until it would survive a crash, where the engine can);
 *                    abort undoes every change made through it.  Any write
 *                    may return MD_EWRITECONFLICT on a concurrent engine:
 *                    the transaction must then be aborted.
 *
 * eng_meta_*         the catalog: small BSON documents by key.  get copies
 *                    into an uninitialized `out` (bson_init'ed by the call
 *                    on success); MD_NOTFOUND when absent.  list visits
 *                    entries in key order.
 *
 * eng_rs_create      MD_EEXISTS if the ident exists.
 * eng_rs_insert      store a copy of data; *out gets the new RecordId.
 * eng_rs_get         borrowed view (see top); MD_NOTFOUND if no such record.
 * eng_rs_update      replace the record.  *new_rid is the RecordId now (may
 *                    differ where the engine moves records), *moved says
 *                    whether it did.  Counts an in-place update or a move.
 * eng_rs_update_damages
 *                    apply patches in place; the size must not change.
 *                    MD_ENOTSUP on engines without in-place updates.
 * eng_rs_remove      MD_NOTFOUND if absent.
 * eng_rs_truncate    remove every record.
 * eng_rs_compact     rewrite records into fresh space.  RecordIds change:
 *                    the caller must rebuild every index afterwards.
 *
 * rs cursors         next returns MD_NOTFOUND at the end.  save before any
 *                    write to the store; restore afterwards.  A record removed
 *                    or moved while saved is skipped; the cursor resumes at
 *                    the record that followed the last one returned.
 *
 * eng_ss_insert      entries are ordered by (key bytes by memcmp, then rid).
 *                    unique: if an entry with equal key bytes and another rid
 *                    exists, return MD_EDUPKEY with *dup_rid set.  Inserting
 *                    an existing (key, rid) pair is a no-op returning 0.
 * eng_ss_remove      MD_NOTFOUND if the pair is absent.
 * eng_ss_find        the rid of the first entry whose key bytes equal key
 *                    (a unique index's one entry), MD_NOTFOUND if none: the
 *                    point lookup of an _id query (IDHACK), read like a
 *                    cursor (the thread's transaction, or the latest state).
 * ss cursors         seek positions at the first entry >= (key, rid); use
 *                    rid 0 for "first entry with this key or after", and
 *                    klen 0 for the first entry of all.  next / prev / seek
 *                    return MD_NOTFOUND when they run off an end; the cursor
 *                    then rests past that end, so prev() after running off
 *                    the right end (or after a seek past every entry) gives
 *                    the last entry, and next() after running off the left
 *                    end gives the first.  get returns a borrowed view of the
 *                    current entry (MD_NOTFOUND when resting past an end).
 *                    save/restore: restore re-positions on the saved entry,
 *                    or on the next greater one if it was removed.
 * ------------------------------------------------------------------------ */
int eng_open(const eng_ops *ops, const char *dir, const char *db_name, const bson_t *opts,
             eng_engine **out, md_error *err);
void eng_close(eng_engine *e);
int eng_flush(eng_engine *e, bool sync, md_error *err);

int eng_txn_begin(eng_engine *e, eng_txn **out);
int eng_txn_commit(eng_txn *t, bool durable, md_error *err);
void eng_txn_abort(eng_txn *t);

int eng_meta_put(eng_engine *e, eng_txn *t, const char *key, const bson_t *value,
                 md_error *err);
int eng_meta_get(eng_engine *e, const char *key, bson_t *out);
int eng_meta_del(eng_engine *e, eng_txn *t, const char *key);
int eng_meta_list(eng_engine *e, eng_meta_fn fn, void *ctx);
/* Where entry key is stored, in buf (made "" when the engine has no such
 * place to name, or no such entry); returns buf. */
const char *eng_meta_where(eng_engine *e, const char *key, char *buf, size_t n);

int eng_rs_create(eng_engine *e, eng_txn *t, const char *ident, const eng_rs_options *o,
                  md_error *err);
int eng_rs_open(eng_engine *e, const char *ident, eng_rs **out, md_error *err);
void eng_rs_close(eng_rs *rs);
int eng_rs_drop(eng_engine *e, eng_txn *t, const char *ident);
int eng_rs_insert(eng_rs *rs, eng_txn *t, const uint8_t *data, uint32_t len, eng_rid *out,
                  md_error *err);
int eng_rs_get(eng_rs *rs, eng_rid rid, const uint8_t **data, uint32_t *len);
int eng_rs_update(eng_rs *rs, eng_txn *t, eng_rid rid, const uint8_t *data, uint32_t len,
                  eng_rid *new_rid, bool *moved, md_error *err);
bool eng_rs_has_damages(eng_rs *rs);
int eng_rs_update_damages(eng_rs *rs, eng_txn *t, eng_rid rid, const uint8_t *src,
                          const eng_damage *d, size_t nd, md_error *err);
int eng_rs_remove(eng_rs *rs, eng_txn *t, eng_rid rid);
int eng_rs_truncate(eng_rs *rs, eng_txn *t);
int eng_rs_set_alloc(eng_rs *rs, eng_txn *t, int alloc);
void eng_rs_get_stats(eng_rs *rs, eng_rs_stats *s);
void eng_rs_append_stats(eng_rs *rs, bson_t *sub);
int eng_rs_validate(eng_rs *rs, eng_validate *v);
int eng_rs_compact(eng_rs *rs, eng_txn *t, const eng_compact_opts *o, bson_t *info,
                   md_error *err);
/* Capped stores: who to tell before the ring removes a record (query/ sets
 * it once after rs_open, before any insert).  Engines call
 * eng_rs_capped_deleting() for each record they are about to remove; it
 * returns the hook's result (0 when no hook is set), describing a refusal
 * in err.  eng_capped_cannot_grow() is every engine's refusal of an update
 * that would make a capped record longer (MD_ENOTSUP, code 10003). */
void eng_rs_set_capped_hook(eng_rs *rs, eng_capped_delete_fn fn, void *ctx);
int eng_rs_capped_deleting(eng_rs *rs, eng_txn *t, eng_rid rid, const uint8_t *data,
                           uint32_t len, md_error *err);
int eng_capped_cannot_grow(md_error *err);
/* For engines whose ring counts document bytes (ephemeralForTest, btree):
 * MD_ETOOBIG when a len-byte record can never fit in size bytes; whether a
 * ring holding count records of bytes must remove its oldest first. */
int eng_capped_check_len(int64_t size, uint32_t len, md_error *err);
bool eng_capped_full(int64_t size, int64_t max, int64_t count, int64_t bytes, uint32_t len);

int eng_rs_cursor_open(eng_rs *rs, bool forward, eng_rs_cursor **out);
int eng_rs_cursor_next(eng_rs_cursor *c, eng_rid *rid, const uint8_t **data, uint32_t *len);
void eng_rs_cursor_save(eng_rs_cursor *c);
int eng_rs_cursor_restore(eng_rs_cursor *c);
void eng_rs_cursor_close(eng_rs_cursor *c);

int eng_ss_create(eng_engine *e, eng_txn *t, const char *ident, md_error *err);
int eng_ss_open(eng_engine *e, const char *ident, eng_ss **out, md_error *err);
void eng_ss_close(eng_ss *ss);
int eng_ss_drop(eng_engine *e, eng_txn *t, const char *ident);
int eng_ss_insert(eng_ss *ss, eng_txn *t, const uint8_t *key, uint32_t klen, eng_rid rid,
                  bool unique, eng_rid *dup_rid, md_error *err);
int eng_ss_remove(eng_ss *ss, eng_txn *t, const uint8_t *key, uint32_t klen, eng_rid rid);
int eng_ss_truncate(eng_ss *ss, eng_txn *t);
int64_t eng_ss_size(eng_ss *ss);
int64_t eng_ss_entries(eng_ss *ss);
int eng_ss_validate(eng_ss *ss, eng_validate *v);
int eng_ss_find(eng_ss *ss, const uint8_t *key, uint32_t klen, eng_rid *rid);

int eng_ss_cursor_open(eng_ss *ss, eng_ss_cursor **out);
int eng_ss_cursor_seek(eng_ss_cursor *c, const uint8_t *key, uint32_t klen, eng_rid rid);
int eng_ss_cursor_next(eng_ss_cursor *c);
int eng_ss_cursor_prev(eng_ss_cursor *c);
int eng_ss_cursor_get(eng_ss_cursor *c, const uint8_t **key, uint32_t *klen, eng_rid *rid);
void eng_ss_cursor_save(eng_ss_cursor *c);
int eng_ss_cursor_restore(eng_ss_cursor *c);
void eng_ss_cursor_close(eng_ss_cursor *c);

/* ---- shared utilities (eng_util.c) --------------------------------------- */
/* Compare (key, rid) pairs in sorted-store order: memcmp, shorter first, rid.
 * Inline, eight bytes at a time: the index searches compare ~16 keys per
 * lookup, most of them a few bytes long. */
static inline int eng_key_cmp(const uint8_t *a, uint32_t alen, eng_rid arid, const uint8_t *b,
                              uint32_t blen, eng_rid brid)
{
    uint32_t n = alen < blen ? alen : blen, i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t x, y;
        memcpy(&x, a + i, 8);
        memcpy(&y, b + i, 8);
        if (x != y)
            return be64toh(x) < be64toh(y) ? -1 : 1;
    }
    for (; i < n; i++)
        if (a[i] != b[i])
            return a[i] < b[i] ? -1 : 1;
    if (alen != blen)
        return alen < blen ? -1 : 1;
    if (arid != brid)
        return arid < brid ? -1 : 1;
    return 0;
}
/* Corruption report: fills err with DataCorruptionDetected naming file:line. */
#define ENG_CORRUPT(err, ...) eng_corrupt_at((err), __FILE__, __LINE__, __VA_ARGS__)
int eng_corrupt_at(md_error *err, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Map a negative MD_* code to the closest MongoDB code. */
int eng_rc_to_code(int rc);
/* Is p[0, len) a well-formed BSON document: every element's type known and
 * its size inside its document, every length and terminator right?
 * Strings are not checked for UTF-8.  One pass, a few ns per element
 * (bson_validate costs several times as much): for engines without a
 * checksum on records, before a document leaves the library. */
bool eng_bson_well_formed(const uint8_t *p, uint32_t len);
/* What an insert asks of a document's top-level names, noted by the same
 * walk (eng_bson_well_formed_top): the document is walked once where it
 * enters, not again to be checked for insertion. */
typedef struct eng_bson_top {
    bool id_first;      /* the first element is named _id */
    int nid;            /* elements named _id */
    const char *dollar; /* the first name starting with '$', or NULL */
} eng_bson_top;
bool eng_bson_well_formed_top(const uint8_t *p, uint32_t len, eng_bson_top *top);
/* One element of a document's bytes, as eng_bson_next reads it. */
typedef struct eng_bson_elem {
    uint8_t type;
    bool key_ascii;  /* no byte of the key has its high bit set */
    const char *key; /* NUL-terminated, klen bytes */
    uint32_t klen;
    const uint8_t *val; /* the value's vlen bytes */
    uint32_t vlen;
} eng_bson_elem;

static inline uint32_t eng_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The element at p[*i] of a document whose elements end at p[end] (its
 * terminating 00): type, key and the value's extent, *i moved past it.
 * Every length is checked against end, the values' contents are not
 * (eng_bson_well_formed checks those).  false at the end, or on bytes
 * that make no element.  Inline: it is on every insert's path twice. */
static inline bool eng_bson_next(const uint8_t *p, uint32_t end, uint32_t *i,
                                 eng_bson_elem *e)
{
    if (*i >= end)
        return false;
    uint32_t k = *i + 1;
    uint8_t high = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    /* the key's NUL eight bytes at a time: the lowest byte flagged by
     * (w - 0x01..) & ~w & 0x80.. is the first zero byte */
    while (k + 8 <= end) {
        uint64_t w, z;
        memcpy(&w, p + k, 8);
        z = (w - 0x0101010101010101ull) & ~w & 0x8080808080808080ull;
        if (z) {
            unsigned nb = (unsigned)__builtin_ctzll(z) / 8;
            uint64_t before = nb ? w & (~0ull >> (64 - 8 * nb)) : 0;
            high |= (before & 0x8080808080808080ull) ? 0x80 : 0;
            k += nb;
            goto key_end;
        }
        high |= (w & 0x8080808080808080ull) ? 0x80 : 0;
        k += 8;
    }
#endif
    while (k < end && p[k] != 0)
        high |= p[k++];
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
key_end:
#endif
    if (k == end)
        return false;
    uint32_t v = k + 1, left = end - v;
    uint64_t n;
    e->type = p[*i];
    switch (e->type) {
    case 0x06: case 0x0A: case 0x7F: case 0xFF: n = 0; break;
    case 0x08: n = 1; break;
    case 0x10: n = 4; break;
    case 0x01: case 0x09: case 0x11: case 0x12: n = 8; break;
    case 0x07: n = 12; break;
    case 0x13: n = 16; break;
    case 0x02: case 0x0D: case 0x0E: n = left < 4 ? UINT64_MAX : 4 + (uint64_t)eng_le32(p + v); break;
    case 0x0C: n = left < 4 ? UINT64_MAX : 16 + (uint64_t)eng_le32(p + v); break;
    case 0x05: n = left < 4 ? UINT64_MAX : 5 + (uint64_t)eng_le32(p + v); break;
    case 0x03: case 0x04: case 0x0F: n = left < 4 ? UINT64_MAX : eng_le32(p + v); break;
    case 0x0B: { /* pattern and options, each NUL-terminated */
        uint32_t q = v, nul = 0;
        while (q < end && nul < 2)
            nul += p[q++] == 0;
        n = nul == 2 ? q - v : UINT64_MAX;
        break;
    }
    default: return false;
    }
    if (n > left)
        return false;
    e->key_ascii = !(high & 0x80);
    e->key = (const char *)p + *i + 1;
    e->klen = k - *i - 1;
    e->val = p + v;
    e->vlen = (uint32_t)n;
    *i = v + (uint32_t)n;
    return true;
}
/* Reads (rs_get, cursors) take no md_error: an engine notes the details of
 * a failed read here (per thread), and the caller that reports the failure
 * takes them (false: none noted since the last take). */
void eng_note_error(int rc, const md_error *err);
bool eng_take_error(md_error *out);
/* A reader/writer lock that prefers writers, so a stream of readers cannot
 * starve one (MongoDB's lock manager queues requests in order).  A thread
 * must therefore never take it shared twice. */
void eng_rwlock_init(pthread_rwlock_t *l);
/* CRC-32C (Castagnoli) of buf, continuing crc (0 to start): the checksum of
 * btree blocks and log records and of mmapv1 journal sections. */
uint32_t eng_crc32c(uint32_t crc, const void *buf, size_t len);
/* A monotonic clock in microseconds, for lock-wait statistics. */
int64_t eng_now_us(void);
/* The time `us` microseconds from now on clock clk, for the timed waits
 * (pthread_cond_timedwait and friends take an absolute time). */
struct timespec eng_deadline(clockid_t clk, int64_t us);
/* A failed file operation, from errno: a full disk (or quota) is MD_ENOSPC
 * with OutOfDiskSpace (14031), anything else MD_EIO with FileStreamFailed;
 * the message is "<prefix><what> <path>: <strerror>".  eng_errno_rc is the
 * same choice without the message. */
int eng_io_error(md_error *err, const char *prefix, const char *what, const char *path);
int eng_errno_rc(int e);

#endif /* ENG_H */
