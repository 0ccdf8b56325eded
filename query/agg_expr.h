/*
 * agg_expr.h -- aggregation expressions (MongoDB 4.0): parsed once into a
 * tree, evaluated once per document.  Used by the pipeline's stages
 * (agg_*.c), by $expr in the matcher, and by the accumulators of $group.
 *
 * Values.  Every value is a bson_value_t.  A result of type BSON_TYPE_EOD
 * is MongoDB's "missing" Value (a field path that does not exist, $$REMOVE):
 * a stage that appends a missing value appends nothing.  A value returned
 * by agg_expr_eval() is owned by the caller, who releases it with
 * agg_value_destroy() (documents, arrays, strings and binaries own their
 * bytes; for the other types it does nothing).
 *
 * Variables.  Names are resolved when an expression is parsed: an
 * agg_scope maps each variable name to a slot, and at run time an agg_vars
 * holds one value per slot.  ROOT is slot AGG_SLOT_ROOT and CURRENT slot
 * AGG_SLOT_CURRENT; REMOVE is a constant (missing).  $let, and the "as" of
 * $map / $filter, and $reduce's $$value / $$this define their names while
 * their body is parsed, in the same scope (a name defined in an inner body
 * is a new slot: the scope only grows, so slots stay valid).  A pipeline's
 * own variables ($lookup's let) are defined with agg_scope_define() before
 * the expressions that use them are parsed.
 *
 * Errors are MongoDB 4.0's: an unknown operator is InvalidPipelineOperator
 * (168) "Unrecognized expression '$foo'"; an undefined variable 17276
 * "Use of undefined variable: foo"; a wrong argument count 16020
 * "Expression $x takes exactly N arguments. M were passed in."; evaluation
 * errors carry each operator's own code (16554 "$add only supports numeric
 * or date types", 16608 "can't $divide by zero", ...).
 */
#ifndef AGG_EXPR_H
#define AGG_EXPR_H

#include <bson/bson.h>
#include <stdbool.h>

#include "minidoc.h"

#define AGG_SLOT_ROOT 0
#define AGG_SLOT_CURRENT 1

/* ---- variables ---------------------------------------------------------- */
typedef struct agg_scope agg_scope;

/* A scope with ROOT, CURRENT and REMOVE defined.  Caller owns it. */
agg_scope *agg_scope_new(void);
void agg_scope_destroy(agg_scope *s);
/*
 * Define user variable `name` (without "$$") and return its slot (>= 2),
 * or -1 with err set: a name must start with a lowercase ASCII letter or a
 * non-ASCII byte and hold only letters, digits and '_' (MongoDB's 16866 /
 * 16867 / 16868 / 16869 / 16870 "... is not a valid user variable name").
 * Also accepted: CURRENT (a new slot that "$a.b" parsed afterwards reads,
 * as a $let may rebind it) and $redact's DESCEND, PRUNE and KEEP.
 */
int agg_scope_define(agg_scope *s, const char *name, md_error *err);
/* Slots needed by an agg_vars for every expression parsed in s so far. */
size_t agg_scope_nslots(const agg_scope *s);

/* One value per slot, for one evaluation thread. */
typedef struct agg_vars {
    bson_value_t *v; /* v[slot]; BSON_TYPE_EOD = not set (missing) */
    bool *owned;     /* owned[slot]: v[slot] is released by the vars */
    size_t n;
} agg_vars;
/* Room for every slot of s (all missing). */
void agg_vars_init(agg_vars *vars, const agg_scope *s);
void agg_vars_cleanup(agg_vars *vars);
/* ROOT and CURRENT become doc (not copied: doc must stay valid and unchanged
 * while expressions are evaluated against it). */
void agg_vars_set_root(agg_vars *vars, const bson_t *doc);
/* Set slot to a copy of v (BSON_TYPE_EOD: missing). */
void agg_vars_set(agg_vars *vars, int slot, const bson_value_t *v);

/* ---- expressions -------------------------------------------------------- */
typedef struct agg_expr agg_expr;

/*
 * Parse the expression at `it` (any BSON value: a literal, a "$field.path",
 * a "$$var.path", an {$op: args} document, an expression object
 * {a: <expr>, ...}, or an array of expressions).  Caller owns *out.
 */
int agg_expr_parse(const bson_iter_t *it, agg_scope *s, agg_expr **out, md_error *err);
/* Parse a whole document as an expression object (as $addFields and
 * $replaceRoot's {newRoot: {...}} literal documents are). */
int agg_expr_parse_object(const bson_t *doc, agg_scope *s, agg_expr **out, md_error *err);
/*
 * Evaluate e with the variables in vars (ROOT/CURRENT set by the caller).
 * *out receives a value owned by the caller (BSON_TYPE_EOD: missing).
 * On error *out is missing and err says why.
 */
int agg_expr_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err);
void agg_expr_destroy(agg_expr *e);
/* Does e depend on no document and no variable (a constant the stage may
 * evaluate once)? */
bool agg_expr_is_constant(const agg_expr *e);
/*
 * Call cb once for each field path of ROOT/CURRENT that e reads ("a.b"
 * for "$a.b"); *whole_doc set when e reads $$ROOT or $$CURRENT itself
 * (then every field is needed).  Used to decide whether a pipeline can be
 * covered by an index.
 */
void agg_expr_deps(const agg_expr *e, void (*cb)(const char *path, void *arg), void *arg,
                   bool *whole_doc);

/* ---- values -------------------------------------------------------------- */
/* MongoDB's comparison order across types (as q_value_cmp); missing sorts
 * before null only where MongoDB says so: here missing == null. */
int agg_value_cmp(const bson_value_t *a, const bson_value_t *b);
/* Coerce to bool as $and / $cond do: false, null, missing, 0 (any numeric
 * type) and undefined are false; everything else true. */
bool agg_value_truthy(const bson_value_t *v);
/* Deep copy (dst owned by the caller; missing copies as missing). */
void agg_value_copy(const bson_value_t *src, bson_value_t *dst);
/* Release a value returned by agg_expr_eval / agg_value_copy; sets it to
 * missing.  NULL or missing: nothing. */
void agg_value_destroy(bson_value_t *v);
/* Append v under key (keylen -1: NUL-terminated); missing appends nothing. */
void agg_value_append(bson_t *doc, const char *key, int keylen, const bson_value_t *v);
/*
 * Numeric addition with $add's and $sum's type rules: int32 + int32 is
 * int32 unless it overflows (then int64), int64 overflow gives double,
 * any double gives double, any decimal128 gives decimal128.  Both must be
 * numbers (the caller decides what to do with others).
 */
void agg_value_add_numbers(const bson_value_t *a, const bson_value_t *b, bson_value_t *out);

#endif /* AGG_EXPR_H */
