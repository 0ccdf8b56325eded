/*
 * test_q_fuzz.h -- random BSON for the matcher and update property tests:
 * a small LCG (reproducible from a seed on every platform) and a generator
 * of nested documents and arrays over a given set of field names, so that
 * operators, dotted paths and edge values meet in every combination.
 */
#ifndef TEST_Q_FUZZ_H
#define TEST_Q_FUZZ_H

#include <bson/bson.h>
#include <stdint.h>
#include <stdio.h>

static unsigned lcg(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return (*s >> 16) & 0x7FFF;
}

typedef struct q_fuzz {
    const char *const *keys; /* field names nested documents draw from */
    size_t nkeys;
    const char *str;         /* the string value besides "x" */
} q_fuzz;

/* Append a random value named k; below depth 4 it may nest. */
static void q_fuzz_value(const q_fuzz *f, bson_t *d, const char *k, unsigned *s, int depth)
{
    bson_t c;
    char key[8];
    switch (lcg(s) % (depth > 3 ? 6 : 10)) {
    case 0: bson_append_int32(d, k, -1, (int32_t)(lcg(s) % 5) - 2); break;
    case 1: bson_append_utf8(d, k, -1, lcg(s) % 2 ? f->str : "x", -1); break;
    case 2: bson_append_null(d, k, -1); break;
    case 3: bson_append_double(d, k, -1, lcg(s) % 2 ? 1.5 : -0.0); break;
    case 4: bson_append_int64(d, k, -1, lcg(s) % 2 ? INT64_MAX : INT64_MIN); break;
    case 5: bson_append_bool(d, k, -1, lcg(s) % 2); break;
    case 6:
    case 7:
        bson_append_document_begin(d, k, -1, &c);
        for (unsigned i = lcg(s) % 4; i > 0; i--)
            q_fuzz_value(f, &c, f->keys[lcg(s) % f->nkeys], s, depth + 1);
        bson_append_document_end(d, &c);
        break;
    default:
        bson_append_array_begin(d, k, -1, &c);
        for (unsigned i = 0, n = lcg(s) % 4; i < n; i++) {
            snprintf(key, sizeof key, "%u", i);
            q_fuzz_value(f, &c, key, s, depth + 1);
        }
        bson_append_array_end(d, &c);
        break;
    }
}

#endif /* TEST_Q_FUZZ_H */
