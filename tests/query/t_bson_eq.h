/*
 * t_bson_eq.h -- exact BSON value equality for the data-driven tests
 * (conformance cases, expression cases): the same type and the same value
 * bytes, documents and arrays key by key in order, and doubles by value
 * (NaN equal to NaN, 0.0 to -0.0).  1, 1.0 and NumberLong(1) differ.
 */
#ifndef T_BSON_EQ_H
#define T_BSON_EQ_H

#include <bson/bson.h>
#include <stdbool.h>
#include <string.h>

static bool t_value_equal(const bson_iter_t *a, const bson_iter_t *b);

/* Documents or arrays: the same keys in the same order, equal values. */
static inline bool t_doc_equal(const bson_iter_t *a, const bson_iter_t *b)
{
    bson_iter_t x, y;
    if (!bson_iter_recurse(a, &x) || !bson_iter_recurse(b, &y))
        return false;
    for (;;) {
        bool nx = bson_iter_next(&x), ny = bson_iter_next(&y);
        if (nx != ny)
            return false;
        if (!nx)
            return true;
        if (strcmp(bson_iter_key(&x), bson_iter_key(&y)) || !t_value_equal(&x, &y))
            return false;
    }
}

static inline bool t_value_equal(const bson_iter_t *a, const bson_iter_t *b)
{
    if (bson_iter_type(a) != bson_iter_type(b))
        return false;
    if (BSON_ITER_HOLDS_DOCUMENT(a) || BSON_ITER_HOLDS_ARRAY(a))
        return t_doc_equal(a, b);
    if (BSON_ITER_HOLDS_DOUBLE(a)) {
        double x = bson_iter_double(a), y = bson_iter_double(b);
        return x == y || (x != x && y != y);
    }
    /* the value's bytes: from its start to the next element */
    uint32_t la = a->next_off - a->d1, lb = b->next_off - b->d1;
    return la == lb && !memcmp(a->raw + a->d1, b->raw + b->d1, la);
}

#endif
