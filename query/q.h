/*
 * q.h -- the query layer: MongoDB's query and update language over the
 * engine contract (engine/eng.h).
 *
 * Pieces, each in its own file:
 *
 *   q_match.c    parse a filter into a matcher; match a document
 *   q_regex.c    $regex / regex literals over PCRE2, compiled once per node
 *   q_update.c   parse an update (operators or replacement); apply it to a
 *                document, producing the new document and, when the size is
 *                unchanged, the damage list (the byte ranges that changed)
 *   q_update_fast.c   the in-place shortcut (the damage list computed from the
 *                stored document, the new one never built), which indexes
 *                an update can affect, and the thread's last parsed update
 *   q_update_array.c  $push $addToSet $pop $pull $pullAll
 *   q_proj.c     find projections: fields, $slice, $elemMatch, "a.$"
 *   q_decimal.c  numbers compared exactly across int32 / int64 / double /
 *                decimal128, and the key bytes of a number
 *   q_key.c      index keys: a memcmp-comparable encoding of BSON values
 *                (after MongoDB's KeyString) and key generation from a key
 *                pattern, one key per array element for multikey paths
 *   q_catalog.c  collections and their indexes, persisted in the engine's
 *                catalog
 *   q_write.c    insert / update / delete of one document, keeping every
 *                index exact (including mmapv1 moves)
 *   q_idhack.c   the _id fast path: {_id: v} as one index lookup and one read
 *   q_hash.c     MongoDB's hash of an element (MD5), the hashed index key
 *   q_gridfs.c   GridFS (md_gridfs_*): files in fs.files / fs.chunks, over the
 *                public collection API as a driver would
 *   q_geo*.c     2d and 2dsphere indexes and the geo operators (q_geo.h):
 *                geometry, GeoHash, S2 cells, the near search
 *   q_arena.c    per-thread memory for one operation's temporary objects
 *   q_cmd*.c     the command dispatcher and each command's reply
 *   q_plan.c     the planner: index bounds, candidate plans, covered queries
 *   q_plan_cache.c  the winning plan per query shape
 *   q_scan.c     plan execution (COLLSCAN, IXSCAN + FETCH) and the trial
 *                run that picks among several candidate plans
 *   q_explain.c  the explain command
 *   q_ttl.c      the TTL monitor
 *   q_cursor.c   server-side cursors for find / getMore / killCursors
 *   q_api.c      include/minidoc.h: md_db, typed wrappers, md_cursor
 *   agg_expr.c   aggregation expressions (agg_expr.h): parse, variables,
 *                field paths, $literal, $let; the operator families in
 *                agg_expr_ops.c (comparison, boolean, conditional,
 *                arithmetic), agg_expr_string.c, agg_expr_array.c,
 *                agg_expr_set.c, agg_expr_type.c, agg_expr_date.c (time
 *                zones and tzfiles: agg_tz.c), agg_expr_acc.c ($sum ...
 *                over arrays); agg_value.c their values.  $expr in filters
 *                (q_match.c) evaluates one with ROOT = the document.
 *   agg_cmd.c    the aggregate command; its results go to a q_cursor
 *   agg_pipeline.c  the aggregation pipeline (agg_int.h): stage registry,
 *                parsing, the optimizations (leading $match / $sort into the
 *                planner, top-k, covered $project), the sources
 *   agg_stage_basic.c  $match $limit $skip $sort $count $unwind $sample
 *   agg_stage_project.c  $project $addFields/$set $unset $replaceRoot
 *                $replaceWith $redact
 *   agg_stage_group.c  $group $sortByCount $bucket $bucketAuto
 *   agg_stage_lookup.c  $lookup $graphLookup $facet
 *   agg_stage_out.c  $out $collStats $indexStats
 *   agg_accum.c  $group's accumulators, with partial states for spilling
 *   agg_spill.c  the external sorter: sorted runs under <dbpath>/_tmp
 *
 * The hot path (step 9): every operation, command or typed call, enters
 * through q_op_enter (the database lock).  The command parser and the typed
 * wrappers both produce the same parsed statements (q_upd_stmt,
 * q_find_args, a delete's filter) and run the same execution code
 * (q_update_exec, q_delete_exec, q_insert_exec, q_find_by_id); only the
 * parsing differs.  An _id equality skips the planner (q_idhack.c); a
 * size-preserving update is applied in place (q_update_fast.c); the memory
 * of both comes from per-thread arenas and caches, so that steady-state
 * finds and $inc by _id allocate nothing.  An insert's document is walked
 * once, where it enters (the validation notes what the insert checks:
 * eng_bson_well_formed_top), is stored as it is when _id leads it, and a
 * one-field index's key is made on the stack without the key generator
 * (q_key_simple): the query layer allocates nothing for it either.
 * internalQueryFastPaths: false (an open option) turns every shortcut off
 * for differential tests.
 *
 * query/ never knows which engine runs below it; where it matters it asks
 * the engine for a capability (eng_rs_has_damages, ops->collection_lock).
 */
#ifndef Q_H
#define Q_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdlib.h>

#include "eng.h"
#include "minidoc.h"

/* ---- growable byte buffer ---------------------------------------------- */
typedef struct q_buf {
    uint8_t *data;
    size_t len, cap;
    uint8_t *fixed; /* caller's storage (q_buf_init_fixed), never freed */
} q_buf;
void q_buf_init(q_buf *b);
/* Start in `storage` (cap bytes, e.g. on the stack); the buffer moves to
 * the heap only if it outgrows it.  q_buf_cleanup() as usual. */
void q_buf_init_fixed(q_buf *b, uint8_t *storage, size_t cap);
void q_buf_cleanup(q_buf *b);
void q_buf_append(q_buf *b, const void *p, size_t n);
void q_buf_putc(q_buf *b, uint8_t c);

/* ---- per-thread operation memory (q_arena.c) ------------------------------ */
typedef struct q_arena {
    struct q_arena_chunk *head;
} q_arena; /* zero-initialized: empty */
/* Zeroed, 16-byte aligned; lives until q_arena_release(a).  Cannot fail
 * (libbson's allocator aborts on exhaustion). */
void *q_arena_alloc(q_arena *a, size_t n);
/* Same, aligned to `align` (a power of two; bson_t and bson_iter_t ask for
 * 128). */
void *q_arena_alloc_aligned(q_arena *a, size_t n, size_t align);
char *q_arena_strdup(q_arena *a, const char *s);
/* End every object of a; its chunks return to the thread's spares. */
void q_arena_release(q_arena *a);

/* qsort that accepts an empty or NULL array (qsort's pointer must not be
 * NULL, even for zero elements). */
static inline void q_sort(void *base, size_t n, size_t size,
                          int (*cmp)(const void *, const void *))
{
    if (n > 1)
        qsort(base, n, size, cmp);
}

/* ---- values (q_value.c) ------------------------------------------------- */
/*
 * Compare two BSON values in MongoDB's order: MinKey < null < numbers <
 * string < object < array < binData < ObjectId < bool < date < timestamp <
 * regex < MaxKey; numbers by numeric value across int32/int64/double/
 * decimal128.  Returns <0, 0, >0.
 */
int q_value_cmp(const bson_iter_t *a, const bson_iter_t *b);
/* The canonical type rank used by the order above (MinKey lowest). */
int q_type_rank(bson_type_t t);

/* ---- decimal128 (IEEE 754 BID) parts (q_decimal.c) ------------------------ */
typedef unsigned __int128 q_u128;
enum { Q_DEC_NAN, Q_DEC_NEG_INF, Q_DEC_FINITE, Q_DEC_POS_INF };
/* 10^34: every canonical coefficient is below it. */
static inline q_u128 q_dec_ten34(void)
{
    return (q_u128)100000000000000000ull * 100000000000000000ull;
}
/* The class of d and, when Q_DEC_FINITE, its value (-1)^neg * coef * 10^exp
 * (a non-canonical coefficient reads as 0, as IEEE 754 says). */
int q_dec_split(const bson_decimal128_t *d, bool *neg, q_u128 *coef, int *exp);
/* d = (-1)^neg * coef * 10^exp, the exponent brought into range by moving
 * zeros when the value allows; false when it does not fit 34 digits. */
bool q_dec_join(bool neg, q_u128 coef, int exp, bson_decimal128_t *d);

/* ---- matcher (q_match.c) ------------------------------------------------ */
typedef struct q_matcher q_matcher;

/*
 * Parse a filter.  Unknown operators give BadValue (2) "unknown operator:
 * $foo"; malformed arguments give MongoDB's codes.  Caller owns *out.
 */
int q_matcher_new(const bson_t *filter, q_matcher **out, md_error *err);
bool q_matcher_matches(const q_matcher *m, const bson_t *doc);
/*
 * Same, and when the match went through an array, `pos` receives the offset
 * of the matching element (MongoDB's elemMatchKey, what the positional "$"
 * of an update refers to); "" otherwise.  poslen >= 32 is always enough.
 */
bool q_matcher_matches_pos(const q_matcher *m, const bson_t *doc, char *pos, size_t poslen);
void q_matcher_destroy(q_matcher *m);
/*
 * Did an $expr fail (a $divide by zero, ...) in a q_matcher_matches* call
 * of this thread since the last take?  err (may be NULL) gets the first
 * such error; the failure is forgotten.  Scans take it after every
 * document and end with it.
 */
bool q_matcher_take_error(md_error *err);
/*
 * $where calls JavaScript, which can fail (139, or 50 past the time limit):
 * the document then does not match and the failure is left for
 * q_matcher_take_error, as an $expr's.  q_matcher_set_js_limit sets each
 * call's time limit (ms, 0: js.h's default); has_where: is there any?
 */
void q_matcher_set_js_limit(const q_matcher *m, int64_t limit_ms);
bool q_matcher_has_where(const q_matcher *m);
/*
 * Append to `out` the equality fields an upsert seeds its new document with
 * (top-level and dotted paths with plain values or $eq, also inside a
 * top-level $and), in filter order with _id first; dotted paths come out
 * expanded into embedded documents ({"a.b": 1} -> {a: {b: 1}}).  Paths that
 * overlap are NotSingleValueField (54), as in MongoDB.
 */
int q_matcher_upsert_seed(const bson_t *filter, bson_t *out, md_error *err);

/* ---- updates (q_update.c) ------------------------------------------------ */
typedef struct q_update q_update;

typedef struct q_damages {
    eng_damage *v;
    size_t n, cap;
    eng_damage *fixed; /* caller's storage (q_damages_init_fixed), never freed */
} q_damages;
void q_damages_init(q_damages *d);
/* Start in `space` (cap entries); moves to the heap only if outgrown. */
void q_damages_init_fixed(q_damages *d, eng_damage *space, size_t cap);
/* Room for one more entry. */
void q_damages_reserve1(q_damages *d);
void q_damages_cleanup(q_damages *d);

/*
 * Parse an update document: either all top-level fields are operators
 * ($set, $inc, ...) or none are (a replacement).  Errors as MongoDB's:
 * FailedToParse (9) for an unknown modifier, ConflictingUpdateOperators (40)
 * for conflicting paths, and so on.  Caller owns *out.
 */
int q_update_new(const bson_t *update, q_update **out, md_error *err);
/*
 * Same, with the update command's arrayFilters (an array of documents, or
 * NULL) for the "$[id]" path components.  A path naming no filter is
 * BadValue "No array filter found for identifier ..."; a filter no path
 * uses is FailedToParse, as in MongoDB 3.6.
 */
int q_update_new_af(const bson_t *update, const bson_t *filters, q_update **out,
                    md_error *err);
/* q_update_new_af through the calling thread's cache of its last parsed
 * update (an identical document without arrayFilters is not parsed
 * again; `cache` false: neither looked up nor kept); give it back with
 * q_update_release, not q_update_destroy. */
int q_update_acquire(const bson_t *update, const bson_t *filters, bool cache, q_update **out,
                     md_error *err);
void q_update_release(q_update *u);
bool q_update_is_replacement(const q_update *u);
void q_update_destroy(q_update *u);

/*
 * Apply `u` to `doc`, initializing `out` with the new document.
 * *changed says whether the result differs from doc.  If `dmg` is not NULL
 * and the new document has the same length as the old one, dmg receives the
 * byte ranges that differ (src_ofs == dst_ofs, offsets into the document);
 * otherwise dmg->n is left 0.  `inserting` is true when applying to the seed
 * document of an upsert ($setOnInsert applies then).  _id may not change
 * (ImmutableField, 66).  On error, `out` is left initialized and empty.
 */
int q_update_apply(const q_update *u, const bson_t *doc, bool inserting, bson_t *out,
                   bool *changed, q_damages *dmg, md_error *err);
/*
 * Same, with the positional "$" of update paths standing for array offset
 * `pos` (from q_matcher_matches_pos; NULL or "" when the filter matched no
 * array, which makes a "$" path BadValue, as in MongoDB).
 */
int q_update_apply_pos(const q_update *u, const bson_t *doc, const char *pos, bool inserting,
                       bson_t *out, bool *changed, q_damages *dmg, md_error *err);

/*
 * The in-place shortcut (q_update_fast.c): apply u to doc where its fields
 * lie.  0: done, dmg holds the changed byte ranges (src_ofs into `src`,
 * dst_ofs into the document) and *changed whether there are any;
 * Q_UPDATE_NOT_INPLACE: the update must take q_update_apply_pos (nothing
 * reported: that path gives any error).
 */
#define Q_UPDATE_NOT_INPLACE 1
int q_update_inplace(const q_update *u, const bson_t *doc, q_buf *src, q_damages *dmg,
                     bool *changed);
/* Copy the damaged ranges from src into dst (a copy of the old document). */
void q_damages_patch(const q_damages *d, const uint8_t *src, uint8_t *dst);
/* Can u change the value at dotted `path` (or under it, or above it)? */
bool q_update_affects(const q_update *u, const char *path);
/* A number no other parsed update in the process has (or had). */
uint64_t q_update_serial(const q_update *u);

/* ---- index keys (q_key.c) ------------------------------------------------ */
/*
 * Encode one BSON value so that memcmp of two encodings orders them as
 * q_value_cmp() does (numbers normalized: 42, 42L and 42.0 encode equally).
 * `descending` inverts every byte of the value's encoding.
 */
void q_key_append_value(q_buf *b, const bson_iter_t *it, bool descending);
/* Encode a missing field (sorts as null, as in MongoDB). */
void q_key_append_null(q_buf *b, bool descending);

/* A set of encoded keys for one document, deduplicated, in sorted order. */
typedef struct q_keyset {
    q_buf *keys;
    size_t n, cap;
    bool multikey; /* some key path went through an array */
} q_keyset;
void q_keyset_init(q_keyset *ks);
void q_keyset_cleanup(q_keyset *ks);

/*
 * Generate the keys of `doc` for index key pattern `pattern` ({a: 1, b.c: -1}).
 * An array on an indexed path gives one key per element; two array paths in
 * one compound key are CannotIndexParallelArrays (171).  A key over 1024
 * bytes is KeyTooLong (17280) with MongoDB 3.x's message.  `sparse`: a
 * document missing every indexed field gets no key.  Any keys already in
 * `out` are dropped first; on error `out` is left empty.
 */
int q_index_keys(const bson_t *pattern, const bson_t *doc, bool sparse, q_keyset *out,
                 md_error *err);
/*
 * The key of `doc` for the one-field pattern {field: 1} (desc: -1) with a
 * top-level field (no dot, not empty), made without the key generator:
 * appended to `out`, 1; 0 when a sparse index takes no key (the field is
 * missing); -1 when only q_index_keys can say (the value is an array, or
 * the key is too long: its error), `out` then unchanged.  Whenever it
 * answers, its key is q_index_keys' one key.
 */
int q_key_simple(const char *field, bool desc, bool sparse, const bson_t *doc, q_buf *out);
/*
 * Decode key `key` of a non-multikey index with pattern `pattern` back into
 * {field: value, ...} (out initialized by the call).  Numbers come back as
 * int32 / int64 when integral, else double (the encoding keeps no numeric
 * type); strings, bools, dates and ObjectIds exactly.  False for any other
 * value (null -- possibly a missing field --, NaN, documents...): the
 * caller must read the document instead.
 */
bool q_key_decode(const bson_t *pattern, const uint8_t *key, uint32_t klen, bson_t *out);
/* The ascending number encoded at the start of key (a text index's score). */
bool q_key_read_number(const uint8_t *key, uint32_t klen, double *out);
/* Render an encoded key back as the "{ x: 1 }" text of an E11000 message. */
void q_key_describe(const bson_t *pattern, const bson_t *doc, char *out, size_t outlen);

#endif /* Q_H */
