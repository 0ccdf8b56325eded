/*
 * test_q_text.c -- text indexes and $text (query/q_text.c, q_text_index.c)
 * on every engine: the manual's examples with their scores, each
 * language's stemming on known word pairs, the index rules and errors,
 * and a property test comparing $text with a naive scan that uses the
 * same tokenizer.
 *
 * Expected scores come from the manual where it prints them (the $text
 * page's "cake" example: 0.75; the text search tutorial's stores sorted
 * by score: 2.25, 1.5, 1.5) and otherwise from MongoDB's formula
 * (FTSSpec::_scoreStringV2, quoted in q_text.c), worked out by hand in
 * the comments.
 */
#include <math.h>

#include <ctype.h>

#include "q_text.h"
#include "test_q_util.h"

/* The commands below are written in the shell's relaxed syntax (bare keys,
 * single-quoted strings); this turns them into JSON for t_cmd. */
static bson_t *tx_cmd(tdb *t, int *rc, const char *fmt, ...)
{
    static char in[16384], out[32768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(in, sizeof in, fmt, ap);
    va_end(ap);
    size_t o = 0;
    for (size_t i = 0; in[i] && o < sizeof out - 8;) {
        char c = in[i];
        if (c == '"' || c == '\'') {
            out[o++] = '"';
            for (i++; in[i] && in[i] != c && o < sizeof out - 8; i++) {
                if (in[i] == '\\' && in[i + 1]) {
                    out[o++] = in[i++];
                    out[o++] = in[i];
                } else if (in[i] == '"') {
                    out[o++] = '\\';
                    out[o++] = '"';
                } else {
                    out[o++] = in[i];
                }
            }
            out[o++] = '"';
            i += in[i] != 0;
        } else if (isalpha((unsigned char)c) || c == '_' || c == '$') {
            size_t j = i;
            while (isalnum((unsigned char)in[j]) || in[j] == '_' || in[j] == '$' || in[j] == '.')
                j++;
            size_t k = j;
            while (in[k] == ' ')
                k++;
            bool key = in[k] == ':';
            if (key)
                out[o++] = '"';
            memcpy(out + o, in + i, j - i);
            o += j - i;
            if (key)
                out[o++] = '"';
            i = j;
        } else {
            out[o++] = in[i++];
        }
    }
    out[o] = 0;
    return t_cmd(t, rc, "%s", out);
}
#define t_cmd tx_cmd

#define ARTICLES                                                                          \
    "{insert: 'articles', documents: ["                                                   \
    "{_id: 1, subject: 'coffee', author: 'xyz', views: 50},"                              \
    "{_id: 2, subject: 'Coffee Shopping', author: 'efg', views: 5},"                      \
    "{_id: 3, subject: 'Baking a cake', author: 'abc', views: 90},"                       \
    "{_id: 4, subject: 'baking', author: 'xyz', views: 100},"                             \
    "{_id: 5, subject: 'Caf\xc3\xa9 Con Leche', author: 'abc', views: 200},"              \
    "{_id: 6, subject: '\xd0\xa1\xd1\x8b\xd1\x80\xd0\xbd\xd0\xb8\xd0\xba\xd0\xb8', "      \
    "author: 'jkl', views: 80},"                                                          \
    "{_id: 7, subject: 'coffee and cream', author: 'efg', views: 10},"                    \
    "{_id: 8, subject: 'Cafe con Leche', author: 'xyz', views: 10}]}"

/* The _ids (and "score" fields, NAN when absent) of a find's first batch. */
static int batch(const bson_t *r, int64_t *ids, double *scores, int max)
{
    bson_iter_t it, arr, d;
    int n = 0;
    if (!t_find(r, "cursor.firstBatch", &it) || !bson_iter_recurse(&it, &arr))
        return -1;
    while (bson_iter_next(&arr) && n < max) {
        bson_iter_recurse(&arr, &d);
        ids[n] = -1;
        if (scores)
            scores[n] = NAN;
        while (bson_iter_next(&d)) {
            if (!strcmp(bson_iter_key(&d), "_id"))
                ids[n] = bson_iter_as_int64(&d);
            else if (scores && !strcmp(bson_iter_key(&d), "score"))
                scores[n] = bson_iter_as_double(&d);
        }
        n++;
    }
    return n;
}

/* Run a find (JSON) and compare its _ids, in order, with want (-1 ends). */
static void expect_ids(tdb *t, const int64_t *want, const char *fmt, ...)
{
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    bson_t *r = T_OK(t, "%s", buf);
    int64_t ids[64];
    int n = batch(r, ids, NULL, 64), k = 0;
    while (want[k] >= 0)
        k++;
    char *j = t_json(r);
    cr_assert_eq(n, k, "[%s] %s -> %s", t->engine, buf, j);
    for (int i = 0; i < n; i++)
        cr_assert_eq(ids[i], want[i], "[%s] %s -> %s", t->engine, buf, j);
    bson_free(j);
    bson_destroy(r);
}

static void articles(tdb *t)
{
    T_RUN(t, ARTICLES);
    T_RUN(t, "{createIndexes: 'articles', indexes: [{key: {subject: 'text'}, name: "
             "'subject_text'}]}");
}

/* ---- the manual's $text page -------------------------------------------------------- */

Test(q_text, manual_articles_examples)
{
    tdb t;
    FOR_EACH_ENGINE(t)
    {
        articles(&t);
        /* "Search for a Single Word": coffee -> 1, 2, 7 */
        expect_ids(&t, (int64_t[]){1, 2, 7, -1},
                   "{find: 'articles', filter: {$text: {$search: 'coffee'}}}");
        /* "Match Any of the Search Terms": bake coffee cake -> 1, 2, 3, 4, 7 */
        expect_ids(&t, (int64_t[]){1, 2, 3, 4, 7, -1},
                   "{find: 'articles', filter: {$text: {$search: 'bake coffee cake'}}}");
        /* "Search for a Phrase": "coffee shop" -> 2 */
        expect_ids(&t, (int64_t[]){2, -1},
                   "{find: 'articles', filter: {$text: {$search: '\\\"coffee shop\\\"'}}}");
        /* "Exclude Documents That Contain a Term": coffee -shop -> 1, 7 */
        expect_ids(&t, (int64_t[]){1, 7, -1},
                   "{find: 'articles', filter: {$text: {$search: 'coffee -shop'}}}");
        /* "Search a Different Language": leche in Spanish -> 5, 8 */
        expect_ids(&t, (int64_t[]){5, 8, -1},
                   "{find: 'articles', filter: {$text: {$search: 'leche', $language: 'es'}}}");
        /* "Case and Diacritic Insensitive Search": сы́рники CAFÉS -> 5, 6, 8 */
        expect_ids(&t, (int64_t[]){5, 6, 8, -1},
                   "{find: 'articles', filter: {$text: {$search: "
                   "'\xd1\x81\xd1\x8b\xcc\x81\xd1\x80\xd0\xbd\xd0\xb8\xd0\xba\xd0\xb8 "
                   "CAF\xc3\x89S'}}}");
        /* "Perform Case Sensitive Search": Coffee -> 2 */
        expect_ids(&t, (int64_t[]){2, -1},
                   "{find: 'articles', filter: {$text: {$search: 'Coffee', "
                   "$caseSensitive: true}}}");
        /* case-sensitive phrase "Café Con" -> 5 */
        expect_ids(&t, (int64_t[]){5, -1},
                   "{find: 'articles', filter: {$text: {$search: '\\\"Caf\xc3\xa9 Con\\\"', "
                   "$caseSensitive: true}}}");
        /* case-sensitive negation: the stem of "Shopping" is "Shop", so -Shop excludes
         * 2 and -shop does not */
        expect_ids(&t, (int64_t[]){-1},
                   "{find: 'articles', filter: {$text: {$search: 'Coffee -Shop', "
                   "$caseSensitive: true}}}");
        expect_ids(&t, (int64_t[]){2, -1},
                   "{find: 'articles', filter: {$text: {$search: 'Coffee -shop', "
                   "$caseSensitive: true}}}");
        /* "Diacritic Sensitive Search": CAFÉ -> 5 */
        expect_ids(&t, (int64_t[]){5, -1},
                   "{find: 'articles', filter: {$text: {$search: 'CAF\xc3\x89', "
                   "$diacriticSensitive: true}}}");
        /* diacritic-sensitive negation: leches -cafés -> 8 */
        expect_ids(&t, (int64_t[]){8, -1},
                   "{find: 'articles', filter: {$text: {$search: 'leches -caf\xc3\xa9s', "
                   "$diacriticSensitive: true}}}");
        /* with another predicate (AND) */
        expect_ids(&t, (int64_t[]){1, -1},
                   "{find: 'articles', filter: {$text: {$search: 'coffee'}, views: {$gt: 10}}}");
        bson_t *r = T_OK(&t, "{count: 'articles', query: {$text: {$search: 'coffee'}}}");
        cr_assert_eq(t_i64(r, "n"), 3);
        bson_destroy(r);
    }
}

Test(q_text, manual_scores)
{
    tdb t;
    FOR_EACH_ENGINE(t)
    {
        int64_t ids[16];
        double sc[16];
        articles(&t);
        /* "Return the Text Search Score": cake -> {_id: 3, ..., score: 0.75} */
        bson_t *r = T_OK(&t, "{find: 'articles', filter: {$text: {$search: 'cake'}}, "
                             "projection: {score: {$meta: 'textScore'}}}");
        cr_assert_eq(batch(r, ids, sc, 16), 1);
        cr_assert_eq(ids[0], 3);
        cr_assert_float_eq(sc[0], 0.75, 1e-12);
        cr_assert_str_eq(t_str(r, "cursor.firstBatch.0.subject"), "Baking a cake");
        bson_destroy(r);
        /* sorted: coffee alone -> coffe 1 token: coeff 1 (no 1.1: the stem is not the
         * string) = 1.0; "Coffee Shopping", "coffee and cream": 2 tokens: 0.75 */
        r = T_OK(&t, "{find: 'articles', filter: {$text: {$search: 'coffee'}}, projection: "
                     "{score: {$meta: 'textScore'}, _id: 1}, sort: {score: {$meta: "
                     "'textScore'}}}");
        cr_assert_eq(batch(r, ids, sc, 16), 3);
        cr_assert_eq(ids[0], 1);
        cr_assert_float_eq(sc[0], 1.0, 1e-12);
        cr_assert_float_eq(sc[1], 0.75, 1e-12);
        cr_assert_float_eq(sc[2], 0.75, 1e-12);
        bson_destroy(r);
        /* "baking" alone: the stem "bake" differs from the string -> 1.0; a term equal to
         * the whole string gets the 1.1 boost: "cream" only in doc 7, 2 tokens -> 0.75 */
        T_RUN(&t, "{insert: 'articles', documents: [{_id: 9, subject: 'cake'}]}");
        r = T_OK(&t, "{find: 'articles', filter: {$text: {$search: 'cake'}}, projection: "
                     "{score: {$meta: 'textScore'}}, sort: {score: {$meta: 'textScore'}}}");
        cr_assert_eq(batch(r, ids, sc, 16), 2);
        cr_assert_eq(ids[0], 9);
        cr_assert_float_eq(sc[0], 1.1, 1e-12); /* weight 1 * freq 1 * coeff 1 * 1.1 */
        cr_assert_eq(ids[1], 3);
        bson_destroy(r);
        /* a score field of the document is replaced by the $meta one */
        T_RUN(&t, "{insert: 'articles', documents: [{_id: 10, subject: 'cake cake', score: "
                  "'x'}]}");
        r = T_OK(&t, "{find: 'articles', filter: {$text: {$search: 'cake'}, _id: 10}, "
                     "projection: {score: {$meta: 'textScore'}}}");
        /* two tokens, the same term twice: freq 1 + 1/2, coeff 0.5*2/2+0.5 = 1 -> 1.5 */
        cr_assert_eq(batch(r, ids, sc, 16), 1);
        cr_assert_float_eq(sc[0], 1.5, 1e-12);
        bson_destroy(r);
        /* textScore outside a $text query projects 0 (3.x's ProjectionExec) */
        r = T_OK(&t, "{find: 'articles', filter: {_id: 1}, projection: {s: {$meta: "
                     "'textScore'}}}");
        cr_assert_float_eq(t_dbl(r, "cursor.firstBatch.0.s"), 0.0, 0);
        bson_destroy(r);
    }
}

/* The text search tutorial's stores, sorted by score: 3 (2.25), 1 (1.5), 5 (1.5). */
Test(q_text, manual_stores)
{
    tdb t;
    FOR_EACH_ENGINE(t)
    {
        int64_t ids[8];
        double sc[8];
        T_RUN(&t, "{insert: 'stores', documents: ["
                  "{_id: 1, name: 'Java Hut', description: 'Coffee and cakes'},"
                  "{_id: 2, name: 'Burger Buns', description: 'Gourmet hamburgers'},"
                  "{_id: 3, name: 'Coffee Shop', description: 'Just coffee'},"
                  "{_id: 4, name: 'Clothes Clothes Clothes', description: 'Discount clothing'},"
                  "{_id: 5, name: 'Java Shopping', description: 'Indonesian goods'}]}");
        T_RUN(&t, "{createIndexes: 'stores', indexes: [{key: {name: 'text', description: "
                  "'text'}, name: 'name_text_description_text'}]}");
        expect_ids(&t, (int64_t[]){1, 3, 5, -1},
                   "{find: 'stores', filter: {$text: {$search: 'java coffee shop'}}}");
        expect_ids(&t, (int64_t[]){3, -1},
                   "{find: 'stores', filter: {$text: {$search: 'java \\\"coffee shop\\\"'}}}");
        expect_ids(&t, (int64_t[]){5, -1},
                   "{find: 'stores', filter: {$text: {$search: 'java shop -coffee'}}}");
        bson_t *r = T_OK(&t, "{find: 'stores', filter: {$text: {$search: 'java coffee shop'}}, "
                             "projection: {score: {$meta: 'textScore'}}, sort: {score: "
                             "{$meta: 'textScore'}}}");
        cr_assert_eq(batch(r, ids, sc, 8), 3);
        cr_assert_eq(ids[0], 3);
        cr_assert_float_eq(sc[0], 2.25, 1e-12);
        cr_assert_eq(ids[1], 1);
        cr_assert_float_eq(sc[1], 1.5, 1e-12);
        cr_assert_eq(ids[2], 5);
        cr_assert_float_eq(sc[2], 1.5, 1e-12);
        bson_destroy(r);
        /* Clothes x3 in a 3-token name: freq 1 + 1/2 + 1/4, coeff 1 -> 1.75; "Discount
         * clothing": cloth 0.75 -> 2.5 */
        r = T_OK(&t, "{find: 'stores', filter: {$text: {$search: 'clothes'}}, projection: "
                     "{score: {$meta: 'textScore'}}}");
        cr_assert_eq(batch(r, ids, sc, 8), 1);
        cr_assert_float_eq(sc[0], 2.5, 1e-12);
        bson_destroy(r);
        /* explain: TEXT over TEXT_MATCH over TEXT_OR over IXSCAN */
        r = T_OK(&t, "{explain: {find: 'stores', filter: {$text: {$search: 'coffee'}}}}");
        cr_assert_str_eq(t_str(r, "queryPlanner.winningPlan.stage"), "TEXT");
        cr_assert_str_eq(t_str(r, "queryPlanner.winningPlan.indexName"),
                         "name_text_description_text");
        cr_assert_str_eq(t_str(r, "queryPlanner.winningPlan.parsedTextQuery.terms.0"), "coffe");
        cr_assert_str_eq(t_str(r, "queryPlanner.winningPlan.inputStage.stage"), "TEXT_MATCH");
        cr_assert_str_eq(t_str(r, "queryPlanner.winningPlan.inputStage.inputStage.stage"),
                         "TEXT_OR");
        cr_assert_str_eq(
            t_str(r, "queryPlanner.winningPlan.inputStage.inputStage.inputStage.stage"),
            "IXSCAN");
        cr_assert_eq(t_i64(r, "executionStats.nReturned"), 2);
        cr_assert_eq(t_i64(r, "executionStats.totalKeysExamined"), 2);
        bson_destroy(r);
    }
}

/* ---- index specs ---------------------------------------------------------------------- */

Test(q_text, list_indexes_shape_and_weights)
{
    tdb t;
    FOR_EACH_ENGINE(t)
    {
        T_RUN(&t, "{createIndexes: 'c', indexes: [{key: {a: 1, title: 'text', body: 'text', "
                  "z: -1}, name: 'ti', weights: {title: 10, 'meta.k': 2.9}, default_language: "
                  "'fr', language_override: 'lang'}]}");
        bson_t *r = T_OK(&t, "{listIndexes: 'c'}");
        char *j = t_json(r);
        cr_assert(strstr(j, "\"key\" : { \"a\" : 1, \"_fts\" : \"text\", \"_ftsx\" : 1, "
                            "\"z\" : -1 }") != NULL, "%s", j);
        cr_assert(strstr(j, "\"weights\" : { \"body\" : 1, \"meta.k\" : 2, \"title\" : 10 }, "
                            "\"default_language\" : \"fr\", \"language_override\" : \"lang\", "
                            "\"textIndexVersion\" : 3") != NULL, "%s", j);
        bson_free(j);
        bson_destroy(r);
        /* the same again: nothing new; another text index: 85 */
        r = T_OK(&t, "{createIndexes: 'c', indexes: [{key: {a: 1, title: 'text', body: "
                     "'text', z: -1}, name: 'ti', weights: {title: 10, 'meta.k': 2}, "
                     "default_language: 'fr', language_override: 'lang'}]}");
        cr_assert_eq(t_i64(r, "numIndexesAfter"), 2);
        bson_destroy(r);
        T_ERR(&t, 85, NULL, "{createIndexes: 'c', indexes: [{key: {other: 'text'}}]}");
        T_ERR(&t, 85, NULL,
              "{createIndexes: 'c', indexes: [{key: {a: 1, title: 'text', body: 'text', z: -1}, "
              "name: 'ti', weights: {title: 3}, default_language: 'fr', language_override: "
              "'lang'}]}");
        /* the normalized key pattern is accepted back (as a dump restores it) */
        T_RUN(&t, "{createIndexes: 'd', indexes: [{key: {_fts: 'text', _ftsx: 1}, name: 'x', "
                  "weights: {s: 1}}]}");
        /* reopen: the spec comes back from the catalog */
        T_RUN(&t, "{insert: 'd', documents: [{_id: 1, s: 'running dogs'}]}");
        if (t_persistent(&t)) {
            md_db_close(t.db);
            t_reopen(&t);
        }
        expect_ids(&t, (int64_t[]){1, -1}, "{find: 'd', filter: {$text: {$search: 'run'}}}");
        r = T_OK(&t, "{validate: 'd'}");
        cr_assert(t_has(r, "valid"));
        bson_destroy(r);
    }
}

Test(q_text, index_errors)
{
    tdb t;
    FOR_EACH_ENGINE(t)
    {
        const char *bad[][2] = {
            {"{a: 'text'}, weights: {a: 0}", "text index weight must be in the exclusive"},
            {"{a: 'text'}, weights: {a: 1000000000}", "exclusive interval"},
            {"{a: 'text'}, weights: {a: 'x'}", "weight for text index needs numeric type"},
            {"{a: 'text'}, weights: 5", "text index option 'weights' must be an object"},
            {"{a: 'text'}, weights: {'$x': 1}", "weight cannot have path component with $"},
            {"{a: 'text'}, weights: {'a..b': 1}", "weight cannot have empty path component"},
            {"{a: 'text'}, default_language: 'klingon'", "default_language is not valid"},
            {"{a: 'text'}, default_language: 1", "default_language needs a string type"},
            {"{a: 'text'}, language_override: 1", "language_override must be a string"},
            {"{a: 'text'}, language_override: '$l'", "language_override is not valid"},
            {"{a: 'text'}, textIndexVersion: 4", "bad textIndexVersion: 4"},
            {"{a: 'text'}, textIndexVersion: 2", "textIndexVersion 2 is not supported"},
            {"{a: 'text'}, textIndexVersion: 'x'", "'textIndexVersion' must be a number"},
            {"{a: 'text', b: 1, c: 'text'}", "'text' fields in index must all be adjacent"},
            {"{a: 'text', b: 2}", "expected value 1 or -1 for non-text key"},
            {"{a: 'text', b: 'hashed'}", "more than one index plugin"},
            {"{_fts: 'text', b: 1}", "expected _ftsx after _fts"},
            {"{_fts: 'x', _ftsx: 1}", "expecting _fts:\"text\""},
            {"{_fts: 'text', _ftsx: 2}", "expecting _ftsx:1"},
            {"{_ftsx: 1, a: 'text'}", "reserved fields"},
            {"{_fts: 1, a: 'text'}", "expecting _fts:\"text\""},
        };
        T_RUN(&t, "{insert: 'c', documents: [{_id: 1}]}");
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
            T_ERR(&t, 67, bad[i][1], "{createIndexes: 'c', indexes: [{key: %s, name: 'i'}]}",
                  bad[i][0]);
        /* nothing was created */
        bson_t *r = T_OK(&t, "{listIndexes: 'c'}");
        cr_assert_eq(t_len(r, "cursor.firstBatch"), 1);
        bson_destroy(r);
    }
}

/* ---- $text errors ---------------------------------------------------------------------- */

Test(q_text, query_errors)
{
    tdb t;
    FOR_EACH_ENGINE(t)
    {
        T_RUN(&t, "{insert: 'n', documents: [{_id: 1, a: 'x'}]}");
        T_ERR(&t, 27, "text index required for $text query",
              "{find: 'n', filter: {$text: {$search: 'x'}}}");
        articles(&t);
        T_ERR(&t, 2, "Too many text expressions",
              "{find: 'articles', filter: {$and: [{$text: {$search: 'a'}}, {$text: {$search: "
              "'b'}}]}}");
        T_ERR(&t, 2, "TEXT under OR",
              "{find: 'articles', filter: {$or: [{$text: {$search: 'a'}}, {views: 1}]}}");
        T_ERR(&t, 2, "text expression not allowed in nor",
              "{find: 'articles', filter: {$nor: [{$text: {$search: 'a'}}]}}");
        T_ERR(&t, 2, "$text can only be applied to the top-level document",
              "{find: 'articles', filter: {tags: {$elemMatch: {$text: {$search: 'a'}}}}}");
        T_ERR(&t, 14, "$search requires a string value",
              "{find: 'articles', filter: {$text: {$search: 1}}}");
        T_ERR(&t, 14, "$search requires a string value",
              "{find: 'articles', filter: {$text: {}}}");
        T_ERR(&t, 14, "$language requires a string value",
              "{find: 'articles', filter: {$text: {$search: 'a', $language: 1}}}");
        T_ERR(&t, 14, "$caseSensitive requires a boolean value",
              "{find: 'articles', filter: {$text: {$search: 'a', $caseSensitive: 1}}}");
        T_ERR(&t, 14, "$diacriticSensitive requires a boolean value",
              "{find: 'articles', filter: {$text: {$search: 'a', $diacriticSensitive: 'x'}}}");
        T_ERR(&t, 2, "extra fields in $text",
              "{find: 'articles', filter: {$text: {$search: 'a', $foo: 1}}}");
        T_ERR(&t, 2, "$text expects an object", "{find: 'articles', filter: {$text: 'a'}}");
        T_ERR(&t, 2, "unsupported language: \"xx\"",
              "{find: 'articles', filter: {$text: {$search: 'a', $language: 'xx'}}}");
        T_ERR(&t, 2, "must have $meta projection for all $meta sort keys",
              "{find: 'articles', filter: {$text: {$search: 'a'}}, sort: {s: {$meta: "
              "'textScore'}}}");
        T_ERR(&t, 2, "bad sort specification",
              "{find: 'articles', filter: {}, sort: {s: {$meta: 'other'}}}");
        T_ERR(&t, 2, "unsupported $meta operator: nope",
              "{find: 'articles', filter: {}, projection: {s: {$meta: 'nope'}}}");
        T_ERR(&t, 2, "field for $meta cannot be nested",
              "{find: 'articles', filter: {}, projection: {'s.t': {$meta: 'textScore'}}}");
        /* nothing but stop words or negations: no results, no error */
        expect_ids(&t, (int64_t[]){-1}, "{find: 'articles', filter: {$text: {$search: 'the "
                                        "and a'}}}");
        expect_ids(&t, (int64_t[]){-1}, "{find: 'articles', filter: {$text: {$search: "
                                        "'-coffee'}}}");
        expect_ids(&t, (int64_t[]){-1}, "{find: 'articles', filter: {$text: {$search: ''}}}");
    }
}

/* ---- documents ------------------------------------------------------------------------- */

Test(q_text, writes_keep_the_index)
{
    tdb t;
    FOR_EACH_ENGINE(t)
    {
        articles(&t);
        T_RUN(&t, "{update: 'articles', updates: [{q: {_id: 1}, u: {$set: {subject: 'tea "
                  "time'}}}]}");
        expect_ids(&t, (int64_t[]){2, 7, -1},
                   "{find: 'articles', filter: {$text: {$search: 'coffee'}}}");
        expect_ids(&t, (int64_t[]){1, -1}, "{find: 'articles', filter: {$text: {$search: "
                                           "'teas'}}}");
        T_RUN(&t, "{delete: 'articles', deletes: [{q: {$text: {$search: 'cream'}}, limit: "
                  "0}]}");
        expect_ids(&t, (int64_t[]){2, -1},
                   "{find: 'articles', filter: {$text: {$search: 'coffee'}}}");
        T_RUN(&t, "{update: 'articles', updates: [{q: {$text: {$search: 'baking'}}, u: {$inc: "
                  "{views: 1}}, multi: true}]}");
        bson_t *r = T_OK(&t, "{find: 'articles', filter: {_id: 4}}");
        cr_assert_eq(t_i64(r, "cursor.firstBatch.0.views"), 101);
        bson_destroy(r);
        r = T_OK(&t, "{validate: 'articles'}");
        bson_iter_t vi;
        cr_assert(t_find(r, "valid", &vi) && bson_iter_as_bool(&vi), "validate");
        bson_destroy(r);
    }
}

Test(q_text, language_override_wildcard_and_compound)
{
    tdb t;
    FOR_EACH_ENGINE(t)
    {
        /* per-document language, also in a sub-document */
        T_RUN(&t, "{insert: 'q', documents: [{_id: 1, language: 'spanish', t: 'corriendo'},"
                  "{_id: 2, t: 'corriendo'}, {_id: 3, t: 'x', sub: {language: 'es', t: "
                  "'corriendo'}}]}");
        T_RUN(&t, "{createIndexes: 'q', indexes: [{key: {'$**': 'text'}, name: 'all'}]}");
        expect_ids(&t, (int64_t[]){1, 3, -1},
                   "{find: 'q', filter: {$text: {$search: 'correr', $language: 'es'}}}");
        bson_t *r = T_OK(&t, "{insert: 'q', documents: [{_id: 4, language: 'klingon', t: "
                             "'x'}]}");
        cr_assert_eq(t_i64(r, "writeErrors.0.code"), 17262);
        cr_assert_str_eq(t_str(r, "writeErrors.0.errmsg"), "language override unsupported: "
                                                           "klingon");
        bson_destroy(r);
        r = T_OK(&t, "{insert: 'q', documents: [{_id: 4, language: 5, t: 'x'}]}");
        cr_assert_eq(t_i64(r, "writeErrors.0.code"), 17261);
        bson_destroy(r);
        /* weights: $** with title: 5 -> title scores five times as much */
        T_RUN(&t, "{insert: 'w', documents: [{_id: 1, title: 'kiwi', body: 'pear'}, {_id: 2, "
                  "title: 'pear', body: 'kiwi', tags: ['kiwi', 'lime']}]}");
        T_RUN(&t, "{createIndexes: 'w', indexes: [{key: {'$**': 'text'}, weights: {title: 5}, "
                  "name: 'w'}]}");
        int64_t ids[4];
        double sc[4];
        r = T_OK(&t, "{find: 'w', filter: {$text: {$search: 'kiwi'}}, projection: "
                             "{score: {$meta: 'textScore'}}, sort: {score: {$meta: "
                             "'textScore'}}}");
        cr_assert_eq(batch(r, ids, sc, 4), 2);
        cr_assert_eq(ids[0], 1);
        cr_assert_float_eq(sc[0], 5 * 1.1, 1e-12); /* the whole title is the term: 1.1 */
        cr_assert_eq(ids[1], 2);
        cr_assert_float_eq(sc[1], 1.1 + 1.1, 1e-12); /* body 'kiwi' and tag 'kiwi' */
        bson_destroy(r);
        /* compound: equality prefix required, suffix kept */
        T_RUN(&t, "{insert: 'k', documents: [{_id: 1, shop: 'a', s: 'red apple', n: 1}, "
                  "{_id: 2, shop: 'b', s: 'red apple', n: 2}, {_id: 3, shop: 'a', s: 'green', "
                  "n: 3}]}");
        T_RUN(&t, "{createIndexes: 'k', indexes: [{key: {shop: 1, s: 'text', n: 1}, name: "
                  "'k'}]}");
        expect_ids(&t, (int64_t[]){2, -1},
                   "{find: 'k', filter: {shop: 'b', $text: {$search: 'apples'}}}");
        T_ERR(&t, 2, "need have an equality filter on: shop",
              "{find: 'k', filter: {$text: {$search: 'apples'}}}");
        T_ERR(&t, 2, "need have an equality filter on: shop",
              "{find: 'k', filter: {shop: {$gt: 'a'}, $text: {$search: 'apples'}}}");
        r = T_OK(&t, "{insert: 'k', documents: [{_id: 4, shop: ['a', 'b'], s: 'x'}]}");
        cr_assert_eq(t_i64(r, "writeErrors.0.code"), 16675);
        bson_destroy(r);
        r = T_OK(&t, "{explain: {find: 'k', filter: {shop: 'a', $text: {$search: 'red'}}}}");
        cr_assert_str_eq(t_str(r, "queryPlanner.winningPlan.indexPrefix.shop"), "a");
        bson_destroy(r);
    }
}

/* ---- stemming per language -------------------------------------------------------------- */

typedef struct one_tok {
    char s[64];
    int n;
} one_tok;

static void grab(void *ctx, const char *t, size_t n)
{
    one_tok *o = ctx;
    if (o->n++ == 0)
        snprintf(o->s, sizeof o->s, "%.*s", (int)n, t);
}

static const char *stem(const char *lang, const char *w, char *out)
{
    one_tok o = {"", 0};
    int l = q_text_lang_find(lang);
    cr_assert_geq(l, 0, "%s", lang);
    q_text_tokenize(l, w, strlen(w), Q_TOK_STOP, grab, &o);
    snprintf(out, 64, "%s", o.s);
    return out;
}

/* Snowball's published behaviour for each algorithm: both words of a pair
 * reduce to the given stem (diacritics then stripped, as MongoDB does). */
Test(q_text, stemming_word_pairs)
{
    static const char *const v[][4] = {
        {"english", "running", "runs", "run"},
        {"english", "connection", "connected", "connect"},
        {"en", "ponies", "pony", "poni"},
        {"french", "continuation", "continuer", "continu"},
        {"fr", "chevaux", "cheval", "cheval"},
        {"german", "H\xc3\xa4user", "Haus", "haus"},
        {"de", "laufen", "Laufen", "lauf"},
        {"spanish", "corriendo", "correr", "corr"},
        {"es", "canciones", "canci\xc3\xb3n", "cancion"},
        {"portuguese", "gatos", "gato", "gat"},
        {"pt", "cantando", "cantar", "cant"},
        {"italian", "abbandonata", "abbandonare", "abbandon"},
        {"it", "gatti", "gatto", "gatt"},
        {"dutch", "katten", "kat", "kat"},
        {"nl", "lichamelijk", "lichamelijke", "licham"},
        {"russian", "\xd0\xba\xd0\xbd\xd0\xb8\xd0\xb3\xd0\xb8", "\xd0\xba\xd0\xbd\xd0\xb8\xd0\xb3\xd0\xb0",
         "\xd0\xba\xd0\xbd\xd0\xb8\xd0\xb3"},
        {"none", "Running", "running", "running"},
    };
    char a[64], b[64];
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        cr_assert_str_eq(stem(v[i][0], v[i][1], a), v[i][3], "%s %s", v[i][0], v[i][1]);
        cr_assert_str_eq(stem(v[i][0], v[i][2], b), v[i][3], "%s %s", v[i][0], v[i][2]);
    }
    /* stop words are dropped, per language (MongoDB's lists) */
    cr_assert_str_eq(stem("english", "the", a), "");
    cr_assert_str_eq(stem("french", "nous", a), "");
    cr_assert_str_eq(stem("german", "und", a), "");
    cr_assert_str_eq(stem("none", "the", a), "the");
    /* English keeps apostrophes inside words; other languages split there */
    cr_assert_str_eq(stem("english", "o'neill", a), "o'neil");
    cr_assert_str_eq(stem("french", "l'avion", a), "avion");
    /* every language through an index, with default_language */
    tdb t;
    FOR_EACH_ENGINE(t)
    {
        static const char *const lx[][3] = {
            {"english", "running", "runs"},     {"french", "continuation", "continuer"},
            {"german", "H\xc3\xa4user", "haus"}, {"spanish", "corriendo", "correr"},
            {"portuguese", "gatos", "gato"},    {"italian", "abbandonata", "abbandonare"},
            {"dutch", "katten", "kat"},
            {"russian", "\xd0\xba\xd0\xbd\xd0\xb8\xd0\xb3\xd0\xb8",
             "\xd0\xba\xd0\xbd\xd0\xb8\xd0\xb3\xd0\xb0"},
        };
        for (size_t i = 0; i < sizeof lx / sizeof lx[0]; i++) {
            T_RUN(&t, "{insert: 'l%zu', documents: [{_id: 1, s: '%s'}, {_id: 2, s: 'zzz'}]}", i,
                  lx[i][1]);
            T_RUN(&t, "{createIndexes: 'l%zu', indexes: [{key: {s: 'text'}, name: 's', "
                      "default_language: '%s'}]}", i, lx[i][0]);
            expect_ids(&t, (int64_t[]){1, -1}, "{find: 'l%zu', filter: {$text: {$search: '%s'}}}",
                       i, lx[i][2]);
            /* language none: the query is not stemmed, so the indexed word itself no
             * longer finds its stem */
            expect_ids(&t, (int64_t[]){-1}, "{find: 'l%zu', filter: {$text: {$search: '%s', "
                                            "$language: 'none'}}}", i, lx[i][1]);
        }
    }
}

/* ---- property: $text == a naive scan with the same tokenizer ------------------------------- */

static const char *const vocab[] = {
    "apple", "apples", "Banana", "cherry", "cherries", "run", "running", "ran", "the", "and",
    "caf\xc3\xa9", "cafe", "CAFE", "jumping", "jumped", "quick", "brown", "fox", "lazy", "dogs",
    "dog", "don't", "o'clock", "x-ray", "e-mail", "na\xc3\xafve", "naive", "Zebra", "zebras"};
#define NV (sizeof vocab / sizeof vocab[0])

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void sentence(uint64_t *s, char *out, size_t cap, int words)
{
    size_t n = 0;
    out[0] = 0;
    for (int i = 0; i < words; i++)
        n += (size_t)snprintf(out + n, cap - n, "%s%s", i ? (rnd(s) % 5 ? " " : ", ") : "",
                              vocab[rnd(s) % NV]);
}

typedef struct tokset {
    char t[64][32];
    int n;
} tokset;

static void add_tok(void *ctx, const char *t, size_t n)
{
    tokset *s = ctx;
    if (s->n < 64 && n < 32)
        snprintf(s->t[s->n++], 32, "%.*s", (int)n, t);
}

static bool in_set(const tokset *s, const char *t)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->t[i], t))
            return true;
    return false;
}

Test(q_text, property_matches_naive_scan)
{
    tdb t;
    FOR_EACH_ENGINE(t)
    {
        uint64_t seed = 0x9e3779b97f4a7c15ull;
        enum { ND = 120, NQ = 60 };
        static char docs[ND][2][200];
        for (int i = 0; i < ND; i++) {
            sentence(&seed, docs[i][0], sizeof docs[i][0], 1 + (int)(rnd(&seed) % 4));
            sentence(&seed, docs[i][1], sizeof docs[i][1], (int)(rnd(&seed) % 8));
            T_RUN(&t, "{insert: 'p', documents: [{_id: %d, a: \"%s\", b: [\"%s\", 7]}]}", i,
                  docs[i][0], docs[i][1]);
        }
        T_RUN(&t, "{createIndexes: 'p', indexes: [{key: {a: 'text', b: 'text'}, name: 't', "
                  "weights: {a: 3}}]}");
        q_text_spec spec;
        bson_t *sp = BCON_NEW("key", "{", "_fts", "text", "_ftsx", BCON_INT32(1), "}",
                              "weights", "{", "a", BCON_INT32(3), "b", BCON_INT32(1), "}");
        cr_assert(q_text_spec_load(sp, &spec));
        int eng = q_text_lang_find("english");
        for (int qi = 0; qi < NQ; qi++) {
            /* a query: 1-3 words, maybe a negation, maybe a phrase of two words */
            char q[256], jq[300];
            int nw = 1 + (int)(rnd(&seed) % 3);
            const char *neg = rnd(&seed) % 3 == 0 ? vocab[rnd(&seed) % NV] : NULL;
            const char *ph = rnd(&seed) % 4 == 0 ? vocab[rnd(&seed) % NV] : NULL;
            size_t n = 0;
            for (int w = 0; w < nw; w++)
                n += (size_t)snprintf(q + n, sizeof q - n, "%s ", vocab[rnd(&seed) % NV]);
            if (neg)
                n += (size_t)snprintf(q + n, sizeof q - n, "-%s ", neg);
            if (ph)
                n += (size_t)snprintf(q + n, sizeof q - n, "\"%s\"", ph);
            size_t m = 0;
            for (size_t i = 0; q[i] && m < sizeof jq - 3; i++) {
                if (q[i] == '"')
                    jq[m++] = '\\';
                jq[m++] = q[i];
            }
            jq[m] = 0;
            bson_t *r = T_OK(&t, "{find: 'p', filter: {$text: {$search: \"%s\"}}, projection: "
                                 "{score: {$meta: 'textScore'}}, sort: {_id: 1}, batchSize: "
                                 "1000}", jq);
            int64_t ids[ND];
            double sc[ND];
            int got = batch(r, ids, sc, ND);
            bson_destroy(r);
            /* the naive scan, with the parsed query's own terms */
            bson_t *arg = BCON_NEW("t", "{", "$search", BCON_UTF8(q), "}");
            bson_iter_t ai;
            cr_assert(bson_iter_init_find(&ai, arg, "t"));
            q_text_query tq;
            cr_assert_eq(q_text_query_parse(&ai, eng, &tq, NULL), 0);
            int k = 0;
            for (int i = 0; i < ND; i++) {
                tokset ts = {.n = 0};
                for (int f = 0; f < 2; f++)
                    q_text_tokenize(eng, docs[i][f], strlen(docs[i][f]), Q_TOK_STOP, add_tok,
                                    &ts);
                bool pos = false, negd = false, phr = true;
                for (size_t x = 0; x < tq.bounds.n; x++)
                    pos = pos || in_set(&ts, tq.bounds.v[x]);
                for (size_t x = 0; x < tq.neg.n; x++)
                    negd = negd || in_set(&ts, tq.neg.v[x]);
                for (size_t x = 0; x < tq.phrases.n; x++) {
                    size_t pl, hl0, hl1;
                    char *p = q_text_fold(tq.phrases.v[x], strlen(tq.phrases.v[x]), false,
                                          false, &pl);
                    char *h0 = q_text_fold(docs[i][0], strlen(docs[i][0]), false, false, &hl0);
                    char *h1 = q_text_fold(docs[i][1], strlen(docs[i][1]), false, false, &hl1);
                    phr = phr && (strstr(h0, p) || strstr(h1, p));
                    bson_free(p);
                    bson_free(h0);
                    bson_free(h1);
                }
                if (!pos || negd || !phr)
                    continue;
                cr_assert_lt(k, got, "[%s] query '%s': doc %d missing", t.engine, q, i);
                cr_assert_eq(ids[k], i, "[%s] query '%s': got %lld, want %d", t.engine, q,
                             (long long)ids[k], i);
                /* the score: the document's term scores summed over the query's terms */
                q_text_terms dt;
                q_text_terms_init(&dt);
                bson_t *d = BCON_NEW("_id", BCON_INT32(i), "a", BCON_UTF8(docs[i][0]), "b",
                                     "[", BCON_UTF8(docs[i][1]), BCON_INT32(7), "]");
                cr_assert_eq(q_text_doc_terms(&spec, d, &dt, NULL), 0);
                double want = 0;
                for (size_t x = 0; x < tq.bounds.n; x++)
                    for (size_t y = 0; y < dt.cap; y++)
                        if (dt.v[y].term && !strcmp(dt.v[y].term, tq.bounds.v[x]))
                            want += dt.v[y].score;
                cr_assert_float_eq(sc[k], want, 1e-9, "[%s] '%s' doc %d", t.engine, q, i);
                q_text_terms_cleanup(&dt);
                bson_destroy(d);
                k++;
            }
            cr_assert_eq(k, got, "[%s] query '%s': %d extra results", t.engine, q, got - k);
            q_text_query_cleanup(&tq);
            bson_destroy(arg);
        }
        q_text_spec_cleanup(&spec);
        bson_destroy(sp);
    }
}
