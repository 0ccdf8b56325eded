/*
 * agg_int.h -- private to the aggregation pipeline (agg_*.c): the stage
 * objects, the pipeline that chains them, the blocking stages' memory
 * limits and the external sorter they spill through.
 *
 * A pipeline is a source followed by stages; each stage pulls documents
 * from the one before it (next()), so a run is a chain of pulls from the
 * last stage:
 *
 *   $cursor (q_scan over the collection, with the leading $match and $sort
 *            pushed into the planner)  or  a feed ($facet's input)
 *     <- $unwind <- $group (blocking: drains its source first) <- $sort ...
 *
 * Every document handed from one stage to the next is a bson_t the
 * receiver owns (bson_destroy'ed by it).  Expressions (agg_expr.h) are
 * parsed once, in the one agg_scope of the whole pipeline (sub-pipelines
 * of $lookup and $facet included), and evaluated with the one agg_vars of
 * the run: a stage sets ROOT/CURRENT to its document right before it
 * evaluates, so nothing it reads survives a pull from its source.
 *
 * Stages hold parse-time state (their spec) and run-time state (buffers,
 * counters); reset() forgets the run-time state, so that $lookup can run
 * its sub-pipeline once per input document and $facet once per facet.
 */
#ifndef AGG_INT_H
#define AGG_INT_H

#include "agg_expr.h"
#include "q_int.h"

#define AGG_MEM_DEFAULT (100 * 1024 * 1024) /* MongoDB 4.0's 100 MB per blocking stage */
#define AGG_CODE_SORT_MEM 16819
#define AGG_CODE_GROUP_MEM 16945
#define AGG_CODE_UNKNOWN_STAGE 40324
#define AGG_CODE_INVALID_OPERATOR 168
#define AGG_CODE_MAX_TIME 50

typedef struct agg_stage agg_stage;
typedef struct agg_pipeline agg_pipeline;

/* What every stage of one aggregate command shares. */
typedef struct agg_ctx {
    md_db *db;
    const char *coll; /* the aggregate's collection name */
    agg_scope *scope;
    agg_vars vars;    /* sized once every expression is parsed (agg_ctx_ready) */
    bool vars_ready;
    bool allow_disk;
    int64_t deadline_ms; /* maxTimeMS: q_now_ms() limit, 0 for none */
    int64_t sort_mem, group_mem; /* the blocking stages' limits (bytes) */
    uint64_t spill_seq;
    int depth; /* sub-pipeline nesting */
} agg_ctx;

typedef struct agg_stage_ops {
    const char *name;
    /* 0: *out is the next document (owned by the caller); MD_NOTFOUND at
     * the end; another negative MD_* code with err filled. */
    int (*next)(agg_stage *s, bson_t **out, md_error *err);
    /* Forget the run-time state (NULL: the stage keeps none). */
    void (*reset)(agg_stage *s);
    void (*destroy)(agg_stage *s);
    /* Append the stage's explain form {$name: ...} to arr under key (NULL:
     * {$name: spec as given}). */
    void (*explain)(agg_stage *s, bson_t *arr, const char *key);
} agg_stage_ops;

struct agg_stage {
    const agg_stage_ops *ops;
    agg_stage *src; /* where next() pulls from (NULL for a source) */
    agg_ctx *ctx;
    bson_t spec;    /* {$name: <spec>} as parsed, for explain */
};

/* A growable list of stages (a pipeline being built). */
typedef struct agg_list {
    agg_stage **v;
    size_t n, cap;
} agg_list;
void agg_list_push(agg_list *l, agg_stage *s);
void agg_list_cleanup(agg_list *l); /* destroys the stages still in it */

/* A stage parser: read spec (the value of {$name: spec}) and push one or
 * more stages ($sortByCount is a $group and a $sort). */
typedef int (*agg_parse_fn)(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out,
                            md_error *err);

/* Allocate a zeroed stage of `size` bytes with ops and a copy of the spec
 * {name: value-at-spec}. */
void *agg_stage_alloc(size_t size, const agg_stage_ops *ops, agg_ctx *ctx, const char *name,
                      const bson_iter_t *spec);
void agg_stage_free_base(agg_stage *s); /* the spec; not the struct */
/* Pull from s->src, checking the time limit first. */
int agg_pull(agg_stage *s, bson_t **out, md_error *err);
void agg_stage_reset(agg_stage *s);      /* s and every stage before it */
void agg_stage_destroy(agg_stage *s);    /* s alone */
/* Append {$name: spec} (the default explain). */
void agg_stage_explain_spec(agg_stage *s, bson_t *arr, const char *key);

/* ---- the pipeline (agg_pipeline.c) --------------------------------------- */
/* The source of a sub-pipeline. */
enum agg_src_kind {
    AGG_SRC_COLL, /* a collection, through the planner */
    AGG_SRC_FEED  /* documents given by the caller (agg_pipeline_feed) */
};
/*
 * Parse `pipeline` (an array of stage documents) over collection `coll`
 * (AGG_SRC_COLL) or a feed, optimize it (the leading $match and $sort go to
 * the planner, $sort + $limit become a top-k sort, adjacent $match stages
 * merge) and leave it ready to run.  `sub`: a $lookup / $facet pipeline
 * ($out is refused there).
 */
int agg_pipeline_new(agg_ctx *ctx, const char *coll, int kind, const bson_iter_t *pipeline,
                     bool sub, agg_pipeline **out, md_error *err);
void agg_pipeline_destroy(agg_pipeline *p);
/* The next result of the pipeline (see agg_stage_ops.next). */
int agg_pipeline_next(agg_pipeline *p, bson_t **out, md_error *err);
/* Start again: every stage reset; a collection source opens a new scan
 * with `filter` ANDed to the pushed $match (NULL: none); a feed source
 * takes docs (borrowed, n of them, valid until the next reset). */
void agg_pipeline_reset(agg_pipeline *p, const bson_t *filter);
void agg_pipeline_feed(agg_pipeline *p, bson_t **docs, size_t n);
/* Append explain's "stages" entries. */
int agg_pipeline_explain(agg_pipeline *p, bson_t *stages, md_error *err);
/* Does the pipeline end with $out (the command then needs the exclusive
 * lock)?  Looks at the command document only. */
bool agg_cmd_writes(const bson_t *cmd);
/* A context for one aggregate over collection coll (db's memory limits);
 * agg_ctx_cleanup() afterwards. */
void agg_ctx_init(agg_ctx *ctx, md_db *db, const char *coll);
void agg_ctx_cleanup(agg_ctx *ctx);
/* Make ctx->vars ready (after every expression is parsed). */
void agg_ctx_ready(agg_ctx *ctx);
/* The time limit (MaxTimeMSExpired, 50). */
int agg_check_time(agg_ctx *ctx, md_error *err);

/* The registry of stage names (agg_pipeline.c). */
agg_parse_fn agg_stage_lookup_parser(const char *name);

/* ---- stages, by family ---------------------------------------------------- */
/* agg_stage_basic.c */
int agg_parse_match(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out, md_error *err);
int agg_parse_limit(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out, md_error *err);
int agg_parse_skip(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out, md_error *err);
int agg_parse_sort(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out, md_error *err);
int agg_parse_count(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out, md_error *err);
int agg_parse_unwind(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out, md_error *err);
int agg_parse_sample(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out, md_error *err);
/* the $match stage's filter (a view), or NULL when s is no $match */
const bson_t *agg_match_filter(agg_stage *s);
/* $sort: its spec, or NULL when s is no $sort; set a top-k limit; tell it
 * its source delivers the order already */
const bson_t *agg_sort_spec(agg_stage *s);
void agg_sort_set_limit(agg_stage *s, int64_t limit);
void agg_sort_set_provided(agg_stage *s);
/* $limit: its value, or -1 when s is no $limit */
int64_t agg_limit_value(agg_stage *s);
/* Create a $match stage over filter (copied) / a $sort stage over spec. */
int agg_match_new(agg_ctx *ctx, const bson_t *filter, agg_stage **out, md_error *err);
agg_stage *agg_sort_new(agg_ctx *ctx, const bson_t *spec);

/* agg_stage_project.c */
int agg_parse_project(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out, md_error *err);
int agg_parse_add_fields(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out,
                         md_error *err);
int agg_parse_unset(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out, md_error *err);
int agg_parse_replace_root(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out,
                           md_error *err);
int agg_parse_replace_with(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out,
                           md_error *err);
int agg_parse_redact(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out, md_error *err);
/* The value at dotted path (through embedded documents only, as MongoDB's
 * Document::getNestedField): a view into doc.  False: missing. */
bool agg_doc_get_path(const bson_t *doc, const char *path, bson_value_t *out);
/* out (initialized by the call) = doc with the value at dotted path set to
 * v (BSON_TYPE_EOD: removed); a field in place keeps its position, a new
 * one goes last; a non-document on the way is replaced by a document. */
void agg_doc_set_path(const bson_t *doc, const char *path, const bson_value_t *v, bson_t *out);
/* A plain inclusion $project of top-level fields (_id excluded unless
 * listed): its find-style projection into proj, for a covered scan. */
bool agg_project_simple(agg_stage *s, bson_t *proj);

/* agg_stage_group.c */
int agg_parse_group(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out, md_error *err);
int agg_parse_sort_by_count(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out,
                            md_error *err);
int agg_parse_bucket(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out, md_error *err);
int agg_parse_bucket_auto(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out,
                          md_error *err);

/* agg_stage_lookup.c */
int agg_parse_lookup(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out, md_error *err);
int agg_parse_graph_lookup(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out,
                           md_error *err);
int agg_parse_facet(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out, md_error *err);

/* agg_stage_out.c */
int agg_parse_out(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out, md_error *err);
int agg_parse_coll_stats(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out,
                         md_error *err);
int agg_parse_index_stats(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out,
                          md_error *err);
/* $collStats / $indexStats must be the first stage: is s one of them? */
bool agg_stage_is_source_like(agg_stage *s);

/* agg_stage_geonear.c: $geoNear, the first stage and the pipeline's
 * source (it runs the near query itself) */
int agg_parse_geonear(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out, md_error *err);
bool agg_stage_is_geonear(agg_stage *s);
/* A $limit right after it lowers its limit. */
void agg_geonear_absorb_limit(agg_stage *s, int64_t limit);
/* Its explain entry {$geoNear: {spec..., queryPlanner}} under key. */
int agg_geonear_explain(agg_stage *s, bson_t *arr, const char *key, md_error *err);

/* ---- accumulators (agg_accum.c) ------------------------------------------ */
typedef struct agg_acc_ops agg_acc_ops;
/* The accumulator named op ("$sum"), or NULL. */
const agg_acc_ops *agg_acc_find(const char *op);
/* One group's running state for one accumulator. */
typedef struct agg_acc agg_acc;
agg_acc *agg_acc_new(const agg_acc_ops *ops);
void agg_acc_destroy(agg_acc *a);
/* Take one input value (missing: BSON_TYPE_EOD). */
int agg_acc_add(agg_acc *a, const bson_value_t *v, md_error *err);
/* The partial state as one value (spilled), and folded back in. */
void agg_acc_partial(const agg_acc *a, bson_t *doc, const char *key);
int agg_acc_merge(agg_acc *a, const bson_iter_t *partial, md_error *err);
/* The result, appended under key. */
void agg_acc_result(const agg_acc *a, bson_t *doc, const char *key);
/* Approximate bytes held (for the memory limit). */
size_t agg_acc_mem(const agg_acc *a);

/* ---- the external sorter (agg_spill.c) ------------------------------------
 * Documents in, documents out in the order of cmp (ties: input order).
 * Past `limit` bytes in memory, the buffer is sorted and written as a run
 * to a temporary file under the database directory (only with
 * allowDiskUse; else the caller's error); the output merges the runs. */
typedef int (*agg_cmp_fn)(const bson_t *a, const bson_t *b, void *arg);
typedef struct agg_sorter agg_sorter;
agg_sorter *agg_sorter_new(agg_ctx *ctx, agg_cmp_fn cmp, void *arg, int64_t limit);
/* Add doc (stolen).  MD_ETOOBIG when over the limit and disk use is not
 * allowed (the caller reports its stage's error); else 0 or an I/O error. */
int agg_sorter_add(agg_sorter *s, bson_t *doc, md_error *err);
/* Keep only the first k in memory (top-k; 0: all).  With k set nothing
 * spills: memory holds at most 2k documents. */
void agg_sorter_set_topk(agg_sorter *s, int64_t k);
/* Write what is in memory as a run now (allowDiskUse or not: $group
 * decides). */
int agg_sorter_spill(agg_sorter *s, md_error *err);
/* Done adding: sort and prepare the merge. */
int agg_sorter_finish(agg_sorter *s, md_error *err);
/* The next document (owned by the caller): 0 or MD_NOTFOUND. */
int agg_sorter_next(agg_sorter *s, bson_t **out, md_error *err);
/* How many runs went to disk so far (tests, explain). */
int agg_sorter_runs(const agg_sorter *s);
void agg_sorter_destroy(agg_sorter *s);
/* Spills counted for serverStatus-like checks in tests: every run written
 * by any sorter of this process. */
int64_t agg_spill_count(void);

#endif /* AGG_INT_H */
