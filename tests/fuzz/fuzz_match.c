/*
 * fuzz_match.c -- libFuzzer harness for the query matcher (query/q_match.c
 * and what it calls: paths, value comparison, $regex, $expr, geo and text
 * predicates, $where).
 *
 * The input is a filter and a target document (fuzz_util.h: two JSON lines
 * or two BSON documents back to back; a third is matched too).  The filter
 * is parsed (q_matcher_new), matched against the documents with and
 * without the array position (the two must agree), an $expr error is
 * taken, and the upsert seed of the filter is built.  $where runs with a
 * 50 ms limit so that a loop in JavaScript costs 50 ms, not a minute.
 * Seeds: tests/fuzz/corpus/match/.
 */
#include "fuzz_util.h"
#include "q.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bson_t d[3];
    q_matcher *m = NULL;
    md_error err;
    if (size > (1u << 20))
        return 0;
    int n = fz_docs(data, size, d, 3);
    if (n >= 1 && q_matcher_new(&d[0], &m, &err) == 0) {
        q_matcher_set_js_limit(m, 50);
        for (int k = 1; k < n; k++) {
            char pos[64];
            bool a = q_matcher_matches(m, &d[k]);
            md_error e1;
            bool f1 = q_matcher_take_error(&e1);
            bool b = q_matcher_matches_pos(m, &d[k], pos, sizeof pos);
            bool f2 = q_matcher_take_error(NULL);
            if (a != b || f1 != f2) {
                fprintf(stderr, "matches %d, matches_pos %d (errors %d %d)\n", a, b, f1, f2);
                abort();
            }
        }
        q_matcher_destroy(m);
    }
    if (n >= 1) {
        bson_t seed;
        bson_init(&seed);
        q_matcher_upsert_seed(&d[0], &seed, NULL);
        bson_destroy(&seed);
    }
    for (int k = 0; k < 3; k++)
        bson_destroy(&d[k]);
    return 0;
}
