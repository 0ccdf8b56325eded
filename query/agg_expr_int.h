/*
 * agg_expr_int.h -- private to the expression files (agg_expr*.c,
 * agg_value.c): the parsed tree, the operator tables each family file
 * exports, and the helpers they share.
 *
 *   agg_expr (OP "$add") --kid[0]--> agg_expr (FIELD CURRENT.a)
 *                        `-kid[1]--> agg_expr (CONST 1)
 *
 * An operator is a row {name, min, max, parse, eval}.  With parse NULL the
 * argument is MongoDB's "nary" form (an array of expressions, or one
 * expression standing for an array of one), checked against [min, max]
 * (fixed: 16020, ranged: 28667); a family with named arguments
 * ($cond's {if, then, else}, $map's {input, as, in}) gives its own parse,
 * which fills kid[] and, for named variables, slot[].
 */
#ifndef AGG_EXPR_INT_H
#define AGG_EXPR_INT_H

#include "agg_expr.h"
#include "q_int.h"
#include "q_path.h"

enum agg_kind {
    AGG_CONST,  /* cval */
    AGG_VAR,    /* slot[0] and path[] ("$$v.a.b", "$a.b" is CURRENT.a.b) */
    AGG_OBJECT, /* names[i]: kid[i] */
    AGG_ARRAY,  /* kid[] */
    AGG_OP,     /* op, kid[] */
};

typedef struct agg_op agg_op;

struct agg_expr {
    int kind;
    const agg_op *op;
    bson_value_t cval;  /* AGG_CONST (owned) */
    char *text;         /* AGG_VAR: the path after the variable ("a.b"), or NULL */
    char **path;        /* AGG_VAR: its components */
    size_t npath;
    agg_expr **kid;     /* NULL entries: an optional argument not given */
    char **names;       /* AGG_OBJECT: field names; ops: their own use */
    size_t nkid;
    int slot[3];        /* AGG_VAR: slot[0]; ops: the variables they define */
    int flag;           /* ops: their own use */
    void *data;         /* ops: their own use, freed by op->cleanup */
};

typedef int (*agg_parse_fn)(agg_expr *e, const bson_iter_t *arg, agg_scope *s, md_error *err);
typedef int (*agg_eval_fn)(const agg_expr *e, agg_vars *vars, bson_value_t *out,
                           md_error *err);

struct agg_op {
    const char *name;
    int min, max;       /* nary arity; max -1: no limit */
    agg_parse_fn parse; /* NULL: nary */
    agg_eval_fn eval;
    void (*cleanup)(agg_expr *e);
};

/* The families' tables, each ending with a row whose name is NULL. */
extern const agg_op agg_ops_var[];    /* agg_expr.c: $literal $let */
extern const agg_op agg_ops_core[];   /* agg_expr_ops.c: cmp, bool, cond, arithmetic */
extern const agg_op agg_ops_string[]; /* agg_expr_string.c */
extern const agg_op agg_ops_array[];  /* agg_expr_array.c */
extern const agg_op agg_ops_set[];    /* agg_expr_set.c */
extern const agg_op agg_ops_type[];   /* agg_expr_type.c */
extern const agg_op agg_ops_date[];   /* agg_expr_date.c */
extern const agg_op agg_ops_acc[];    /* agg_expr_acc.c: $sum $avg ... as expressions */

/* ---- parsing helpers (agg_expr.c) ------------------------------------------ */
agg_expr *agg_node_new(int kind);
/* Append kid (may be NULL) to e->kid. */
void agg_node_add(agg_expr *e, agg_expr *kid);
/* Parse arg as MongoDB's nary operand list into e->kid, arity checked. */
int agg_parse_nary(agg_expr *e, const bson_iter_t *arg, agg_scope *s, md_error *err);
/* The object form {name: <expr>, ...}: kid[i] is the field names[i] (NULL
 * when absent); an unknown field is unknown_code, its message
 * unknown_fmt formatted with the operator's name and the field. */
int agg_parse_named(agg_expr *e, const bson_iter_t *arg, agg_scope *s, const char *const *names,
                    size_t n, int unknown_code, const char *unknown_fmt, md_error *err);
/* Variables a body defines ($let, $map's as, $reduce's value/this): push
 * binds name to a fresh slot for the parse of the body; pop forgets the
 * names pushed since mark (slots stay allocated). */
size_t agg_scope_mark(const agg_scope *s);
int agg_scope_push(agg_scope *s, const char *name, md_error *err);
void agg_scope_pop(agg_scope *s, size_t mark);
/* MongoDB's user-write check of a variable name (16866/16867/16868). */
int agg_var_name_check(const char *name, md_error *err);

/* ---- evaluation helpers ------------------------------------------------------- */
/* Evaluate kid i (a missing optional kid evaluates to missing). */
int agg_eval_kid(const agg_expr *e, size_t i, agg_vars *vars, bson_value_t *out,
                 md_error *err);
/* Evaluate every kid into v[0..nkid) (each missing on error; release with
 * agg_values_destroy). */
int agg_eval_kids(const agg_expr *e, agg_vars *vars, bson_value_t *v, md_error *err);
void agg_values_destroy(bson_value_t *v, size_t n);
/* Set a slot to a borrowed value (not copied: it must outlive its use). */
void agg_vars_borrow(agg_vars *vars, int slot, const bson_value_t *v);
/* Set a slot to v, taking ownership (*v is left missing). */
void agg_vars_steal(agg_vars *vars, int slot, bson_value_t *v);

/* Errors: q_err with rc MD_EINVAL. */
int agg_err(md_error *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- values (agg_value.c) ----------------------------------------------------- */
static inline bool agg_missing(const bson_value_t *v)
{
    return v->value_type == BSON_TYPE_EOD;
}
/* null, undefined or missing: what most operators answer null for. */
static inline bool agg_nullish(const bson_value_t *v)
{
    return v->value_type == BSON_TYPE_EOD || v->value_type == BSON_TYPE_NULL ||
           v->value_type == BSON_TYPE_UNDEFINED;
}
static inline bool agg_is_number(const bson_value_t *v)
{
    return q_is_number(v->value_type);
}
/* Value::compare: missing ranks with undefined, below null (the
 * comparison operators; agg_value_cmp takes missing as null). */
int agg_value_cmp_expr(const bson_value_t *a, const bson_value_t *b);
void agg_set_missing(bson_value_t *v);
void agg_set_null(bson_value_t *v);
void agg_set_bool(bson_value_t *v, bool b);
void agg_set_int32(bson_value_t *v, int32_t i);
void agg_set_int64(bson_value_t *v, int64_t i);
void agg_set_double(bson_value_t *v, double d);
void agg_set_decimal(bson_value_t *v, const bson_decimal128_t *d);
void agg_set_date(bson_value_t *v, int64_t ms);
/* A string value owning a copy of s[0..len). */
void agg_set_utf8(bson_value_t *v, const char *s, size_t len);
/* Take a built document (or array: is_array) into v; b is destroyed. */
void agg_set_doc_steal(bson_value_t *v, bson_t *b, bool is_array);
/* Iterate over a document or array value. */
bool agg_iter_init(bson_iter_t *it, const bson_value_t *v);
/* Number of elements of an array value. */
uint32_t agg_array_len(const bson_value_t *v);

/* Numbers: as double / long double; as a q_num (for q_num_arith). */
double agg_num_double(const bson_value_t *v);
long double agg_num_ld(const bson_value_t *v);
void agg_num_get(const bson_value_t *v, q_num *n);
void agg_num_set(bson_value_t *v, const q_num *n);
/* Decimal128 <-> long double / text. */
void agg_dec_from_ld(long double x, bson_decimal128_t *d);
void agg_dec_from_double(double x, bson_decimal128_t *d);
/* Exact decimal a / b (34 digits, half-even) and a % b (the dividend's
 * sign); false for infinities, NaN, a zero divisor or a remainder whose
 * operands' exponents are too far apart (then use long double). */
bool agg_dec_divide(const bson_decimal128_t *a, const bson_decimal128_t *b, bson_decimal128_t *r);
bool agg_dec_mod(const bson_decimal128_t *a, const bson_decimal128_t *b, bson_decimal128_t *r);
/* Is v an integral number that fits int64 (any numeric type)?  *out gets it. */
bool agg_num_int64(const bson_value_t *v, int64_t *out);
/* Is v an integral number that fits int32? (MongoDB's integral()) */
bool agg_num_int32(const bson_value_t *v, int32_t *out);
/* Same-type, same-value copy of a borrowed element. */
void agg_value_from_iter(const bson_iter_t *it, bson_value_t *out);

/* Rendering for messages (BSONElement::toString of the value). */
void agg_value_render(q_buf *b, const bson_value_t *v);

/* Arrays under construction: append owned values, then finish. */
typedef struct agg_arr {
    bson_t b;
    uint32_t n;
} agg_arr;
void agg_arr_init(agg_arr *a);
void agg_arr_push(agg_arr *a, const bson_value_t *v);
void agg_arr_finish(agg_arr *a, bson_value_t *out);

/* A running sum with $add's and $sum's result types: integers exactly
 * while they fit int64 (int32 when the result fits and only int32 were
 * added), doubles in long double, decimals exactly where 34 digits do. */
typedef struct agg_sum {
    int type;       /* widest seen: 0 int32, 1 int64, 2 double, 3 decimal */
    int64_t i;      /* integer part, while !ovf */
    bool ovf;       /* the integers overflowed int64 */
    long double ld; /* every non-decimal addend */
    bson_decimal128_t dec;
    bool has_dec;
    bool dbl;       /* a double was added */
} agg_sum;
void agg_sum_init(agg_sum *s);
/* v must be a number. */
void agg_sum_add(agg_sum *s, const bson_value_t *v);
void agg_sum_result(const agg_sum *s, bson_value_t *out);

/* Value::coerceToString appended to b (agg_expr_string.c): 16007 for
 * types without one; null and missing give "". */
int agg_coerce_string(const bson_value_t *v, q_buf *b, md_error *err);
/* "%Y-%m-%dT%H:%M:%S.%LZ" of a date, UTC (agg_expr_date.c). */
void agg_format_iso_date(int64_t ms, q_buf *b);

/* ---- time zones and the calendar (agg_tz.c) ----------------------------------- */
typedef struct agg_tz agg_tz;
const agg_tz *agg_tz_utc(void);
/* "UTC", "GMT", "+hh[:mm]", "-hhmm", or an Olson name read from the system's
 * tzfiles; 40485 "unrecognized time zone identifier" otherwise.  Zones live
 * as long as the process. */
int agg_tz_get(const char *name, size_t len, const agg_tz **out, md_error *err);
/* Seconds east of UTC at UTC instant ms. */
int32_t agg_tz_offset(const agg_tz *tz, int64_t ms);
/* The UTC instant of local time local_ms in tz. */
int64_t agg_tz_to_utc(const agg_tz *tz, int64_t local_ms);
/* Proleptic Gregorian day numbers (0 = 1970-01-01). */
int64_t agg_days_from_civil(int64_t y, int64_t m, int64_t d);
void agg_civil_from_days(int64_t days, int64_t *y, int *m, int *d);
/* An ISO 8601 date string -> ms (tz for strings without an offset; NULL:
 * UTC); *has_zone (may be NULL) says whether the string carried one.
 * False with a reason in why. */
bool agg_date_parse(const char *s, size_t n, const agg_tz *tz, int64_t *ms, bool *has_zone,
                    char *why, size_t whylen);

/* MongoDB's typeName of a value ("missing" for missing). */
const char *agg_type_name(const bson_value_t *v);

#endif /* AGG_EXPR_INT_H */
