/*
 * q_path.h -- helpers private to the pure core of query/ (q_value.c,
 * q_match.c, q_update.c, q_key.c): dotted paths, field lookup, numbers, and
 * rendering values the way MongoDB's BSONElement::toString() does for error
 * messages ("{a: 1}", "_id: ObjectId('...')", "[ 1, 2 ]").
 *
 * Nothing here allocates except q_path_init() (freed by q_path_cleanup())
 * and the q_buf appends.  bson_iter_t values handed out point into the
 * caller's document and stay valid as long as that document does.
 */
#ifndef Q_PATH_H
#define Q_PATH_H

#include <assert.h>
#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "q.h"

/* ---- q_buf extras (q_buf.c) ---------------------------------------------- */
/* Room for n more bytes without moving (the buffer may move now). */
void q_buf_reserve(q_buf *b, size_t n);
void q_buf_puts(q_buf *b, const char *s);
void q_buf_printf(q_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* NUL-terminate (not counted in len) and return the text; valid until the
 * next append. */
const char *q_buf_cstr(q_buf *b);
void q_buf_reset(q_buf *b);

/* ---- dotted paths ---------------------------------------------------------- */
typedef struct q_path {
    char *buf;         /* copy of the path, each '.' replaced by NUL */
    const char **part; /* part[i] points into buf */
    size_t n;          /* number of components, >= 1 */
    bool in_arena;     /* buf and part belong to an arena (not freed here) */
} q_path;

/* Split `dotted` (len bytes, or -1 for strlen).  Returns false (and leaves p
 * empty) if the path or one of its components is empty. */
bool q_path_init(q_path *p, const char *dotted, int len);
/* Same, the copy drawn from arena a (q_path_cleanup only forgets it). */
bool q_path_init_arena(q_path *p, const char *dotted, int len, q_arena *a);
void q_path_cleanup(q_path *p);
/* "a.b.c" of parts [from, to). */
void q_path_join(q_buf *b, const q_path *p, size_t from, size_t to);

/* All ASCII digits (and not empty): MongoDB's isAllDigits. */
bool q_all_digits(const char *s);

/* ---- documents ----------------------------------------------------------- */
/* The first field of the document (or array) [data, len) named `name`. */
bool q_doc_find(const uint8_t *data, uint32_t len, const char *name, bson_iter_t *out);
/* The bytes of an embedded document or array element. */
void q_iter_sub(const bson_iter_t *it, const uint8_t **data, uint32_t *len);
/* True for BSON_TYPE_DOCUMENT and BSON_TYPE_ARRAY. */
bool q_is_container(bson_type_t t);
/*
 * MongoDB's getFieldDottedOrArray: follow p->part[start..] through embedded
 * documents, stopping early at an array.  Returns false if the path does not
 * exist (or runs into a scalar before its end); otherwise *out is the element
 * found and *stop the index of the part that named it.
 */
bool q_dotted_or_array(const uint8_t *data, uint32_t len, const q_path *p, size_t start,
                       bson_iter_t *out, size_t *stop);
/* Type and value bytes equal (field names ignored): binaryEqualValues. */
bool q_value_binary_equal(const bson_iter_t *a, const bson_iter_t *b);
/* Bytes of the element's value (after its field name). */
uint32_t q_value_size(const bson_iter_t *it);

/* ---- numbers --------------------------------------------------------------- */
bool q_is_number(bson_type_t t);
/*
 * The numeric value as a long double.  int32, int64 and double convert
 * exactly (long double has a 64-bit mantissa on the platforms we build on);
 * decimal128 goes through its string form and is rounded to long double,
 * so use it for conversions (a $mod operand, a $slice count), never to
 * compare numbers: q_number_cmp compares exactly.
 */
long double q_number_ld(const bson_iter_t *it);
long double q_decimal_ld(const bson_decimal128_t *d);
/* Compare two long doubles with NaN lowest and equal to itself. */
int q_ld_cmp(long double a, long double b);

/* ---- exact numbers (q_decimal.c) ------------------------------------------
 * Numbers of any two types compared exactly (decimal128 included): NaN
 * lowest and equal to any NaN, -0 equal to 0.  <0, 0, >0.
 */
int q_number_cmp(const bson_iter_t *a, const bson_iter_t *b);
int q_decimal_cmp(const bson_decimal128_t *a, const bson_decimal128_t *b);
/* The key bytes of a number after its type byte (format in q_decimal.c):
 * memcmp order is q_number_cmp's order; equal values encode equally. */
void q_key_number(q_buf *b, const bson_iter_t *it);
void q_key_number_decimal(q_buf *b, const bson_decimal128_t *d);
/* An int32, int64 or double given as the long double that holds it exactly. */
void q_key_number_ld(q_buf *b, long double v);

/* A number for arithmetic (MongoDB's SafeNum). */
typedef struct q_num {
    bson_type_t t; /* INT32, INT64, DOUBLE or DECIMAL128 */
    int32_t i32;
    int64_t i64;
    double d;
    bson_decimal128_t dec;
} q_num;
void q_num_get(const bson_iter_t *it, q_num *n);
/*
 * r = a + b (or a * b): int32 op int32 is int32, int64 if it overflows;
 * int64 overflow fails (false); a double operand makes a double, a decimal
 * one a decimal (exact when 34 digits suffice, else via long double).
 */
bool q_num_arith(bool mul, const q_num *a, const q_num *b, q_num *r);
/* Same type and equal value (SafeNum::isIdentical). */
bool q_num_identical(const q_num *a, const q_num *b);
/* "(NumberLong)5", as SafeNum prints itself in error messages. */
void q_num_debug(q_buf *b, const q_num *n);

/* ---- raw BSON writing (q_buf.c) -------------------------------------------
 * The update engine writes new documents as bytes so that untouched runs of
 * fields are copied with one memcpy.  q_bw_begin returns the offset to pass
 * to q_bw_end, which appends the terminator and patches the length.
 */
void q_bw_le(q_buf *b, uint64_t v, int nbytes);
void q_bw_head(q_buf *b, bson_type_t t, const char *key);
size_t q_bw_begin(q_buf *b, bson_type_t t, const char *key); /* document or array */
void q_bw_end(q_buf *b, size_t at);
/* An element with `key` and the value of `it`. */
void q_bw_iter(q_buf *b, const char *key, const bson_iter_t *it);
void q_bw_num(q_buf *b, const char *key, const q_num *n);
void q_bw_null(q_buf *b, const char *key);
void q_bw_date(q_buf *b, const char *key, int64_t ms);
void q_bw_timestamp(q_buf *b, const char *key, uint32_t t, uint32_t i);

/* ---- rendering (BSONElement::toString) ------------------------------------ */
/* The value alone, e.g. 1, "x", { a: 1 }, [ 1, 2 ], ObjectId('...'). */
void q_render_value(q_buf *b, const bson_iter_t *it);
/* "name: value" */
void q_render_elem(q_buf *b, const bson_iter_t *it);
/* "{ a: 1, b: 2 }" or "[ 1, 2 ]"; "{}" / "[]" when empty. */
void q_render_doc(q_buf *b, const uint8_t *data, uint32_t len, bool is_array);
/* MongoDB's typeName(): "string", "int", "objectId", ... */
const char *q_type_name(bson_type_t t);

#endif /* Q_PATH_H */
