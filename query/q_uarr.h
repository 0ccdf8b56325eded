/*
 * q_uarr.h -- the array update operators of q_update.c, kept in their own
 * file (q_update_array.c): $push (with $each $slice $sort $position),
 * $addToSet (with $each), $pop, $pull (values, operator conditions and
 * queries on document elements) and $pullAll; the update command's
 * arrayFilters; and $bit's arithmetic.
 */
#ifndef Q_UARR_H
#define Q_UARR_H

#include "q.h"
#include "q_path.h"

typedef enum q_uarr_kind {
    Q_UARR_PUSH, Q_UARR_ADD_TO_SET, Q_UARR_POP, Q_UARR_PULL, Q_UARR_PULL_ALL,
} q_uarr_kind;

typedef struct q_uarr q_uarr;

/* Parse the argument of one field of an array modifier (PushNode::init and
 * friends).  Errors as MongoDB 3.6's.  Caller owns *out. */
int q_uarr_new(q_uarr_kind kind, const bson_iter_t *arg, q_uarr **out, md_error *err);
void q_uarr_destroy(q_uarr *a);
/* The values $push / $addToSet store (an array), for storage checks. */
const bson_t *q_uarr_values(const q_uarr *a);
/*
 * Apply to element e (NULL: the field is missing), writing the field under
 * `key` into dst; writes nothing when the field is missing and stays so.
 * `path` (the dotted path) and `id` (the document's "_id: 1") are for
 * messages.
 */
int q_uarr_apply(const q_uarr *a, const bson_iter_t *e, const char *key, const char *path,
                 const char *id, q_buf *dst, md_error *err);

/* One arrayFilters entry: identifier `name`, matched against {name: elem}. */
typedef struct q_afilter {
    char name[64];
    q_matcher *m;
    bool used; /* some "$[name]" path refers to it */
} q_afilter;

/* Parse an arrayFilters array (3.6's errors: FailedToParse for two
 * identifiers in one filter or one identifier twice, BadValue for a name
 * not [a-z][a-zA-Z0-9]*).  *out (n entries) is the caller's to free with
 * q_afilters_free, also after an error. */
int q_afilters_parse(const bson_t *filters, q_afilter **out, size_t *n, md_error *err);
/* FailedToParse "The array filter for identifier 'x' was not used ..." */
int q_afilters_check_used(const q_afilter *af, size_t n, const bson_t *update, md_error *err);
void q_afilters_free(q_afilter *af, size_t n);

/* $bit's argument {and|or|xor: int32|int64, ...}: BadValue as BitNode::init. */
int q_bit_check(const bson_iter_t *arg, md_error *err);
/* Apply the operations of a checked argument to integer `in`. */
void q_bit_apply(const bson_iter_t *arg, const q_num *in, q_num *out);

#endif /* Q_UARR_H */
