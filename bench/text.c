/*
 * text.c -- $text through a text index against a collection scan with a
 * regular expression, measured.
 *
 * Inserts N documents (default 1,000,000; --quick: 20,000) whose `body`
 * holds 8 to 15 words drawn from a vocabulary of 20,000 made-up words
 * (Zipf-like: word k with weight 1/(k+10)), builds {body: "text"}, then
 * for each of a fixed list of words of falling frequency runs
 *
 *   text    find {$text: {$search: w}} (the TEXT plan over the index)
 *   regex   find {body: {$regex: "\\bw\\b", $options: "i"}} (COLLSCAN)
 *
 * reading every result through the cursor.  It prints the build time,
 * then one line per method: `method queries seconds queries_per_s
 * docs_returned`; the counts of the two may differ a little (the index
 * stems: "w" and "ws" are one term for it).
 *
 *   build/bench/text [--quick] [--docs N] [--engine btree|mmapv1] [--dir DIR]
 *   build/bench/text [--quick] [N] [engine]      (the older positional form)
 *
 * --dir: where the temporary database goes (default /tmp); it is removed
 * at the end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "minidoc.h"

#define BENCH_NAME "text"
#include "bench.h"

#define VOCAB 20000

static uint64_t rng = 88172645463325252ull;

static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Word k: syllables from its digits, so each is distinct and pronounceable. */
static void word(int k, char *out)
{
    static const char *const syl[] = {"ba", "ko", "ri", "tu", "me", "sa", "lo", "ni", "pe",
                                      "da", "gu", "fi", "zo", "ve", "ha", "ju"};
    int n = 0;
    k += 17;
    do {
        n += sprintf(out + n, "%s", syl[k % 16]);
        k /= 16;
    } while (k);
    out[n++] = 'x'; /* no English stop word or common stem is made this way */
    out[n] = 0;
}

static double cum[VOCAB];

static int pick(void)
{
    double r = (double)(next_rand() % 1000000007ull) / 1000000007.0 * cum[VOCAB - 1];
    int lo = 0, hi = VOCAB - 1;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (cum[mid] < r)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int64_t drain(md_db *db, bson_t *cmd, const char *what)
{
    bson_t reply;
    bson_iter_t it, b;
    int64_t n = 0, id = 0;
    run(db, cmd, what, &reply);
    for (;;) {
        if (bson_iter_init(&it, &reply) &&
            (bson_iter_find_descendant(&it, "cursor.firstBatch", &b) ||
             (bson_iter_init(&it, &reply) &&
              bson_iter_find_descendant(&it, "cursor.nextBatch", &b))) &&
            bson_iter_recurse(&b, &it))
            while (bson_iter_next(&it))
                n++;
        if (bson_iter_init(&it, &reply) && bson_iter_find_descendant(&it, "cursor.id", &b))
            id = bson_iter_as_int64(&b);
        bson_destroy(&reply);
        if (id == 0)
            return n;
        run(db, BCON_NEW("getMore", BCON_INT64(id), "collection", "c", "batchSize",
                         BCON_INT32(100000)),
            "getMore", &reply);
    }
}

int main(int argc, char **argv)
{
    int n = 1000000, pos = 0;
    const char *engine = "btree", *base = "/tmp";
    for (int ai = 1; ai < argc; ai++) {
        if (!strcmp(argv[ai], "--quick"))
            n = 20000;
        else if (!strcmp(argv[ai], "--docs") && ai + 1 < argc)
            n = atoi(argv[++ai]);
        else if (!strcmp(argv[ai], "--engine") && ai + 1 < argc)
            engine = argv[++ai];
        else if (!strcmp(argv[ai], "--dir") && ai + 1 < argc)
            base = argv[++ai];
        else if (argv[ai][0] != '-' && pos == 0 && atoi(argv[ai]) > 0)
            n = atoi(argv[ai]), pos++;
        else if (argv[ai][0] != '-' && pos == 1)
            engine = argv[ai], pos++;
        else {
            fprintf(stderr, "usage: text [--quick] [--docs N] [--engine btree|mmapv1] "
                            "[--dir DIR]\n");
            return 2;
        }
    }
    if (n < 1) {
        fprintf(stderr, "text: --docs must be positive\n");
        return 2;
    }
    for (int k = 0; k < VOCAB; k++)
        cum[k] = (k ? cum[k - 1] : 0) + 1.0 / (k + 10);

    char dir[1024];
    snprintf(dir, sizeof dir, "%s/md_bench_text_XXXXXX", base);
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    md_db *db;
    md_error err;
    bson_t *opts = BCON_NEW("engine", BCON_UTF8(engine));
    if (md_db_open(dir, opts, &db, &err) != 0)
        die("open", &err);
    bson_destroy(opts);

    double t0 = now();
    char w[64], body[1024];
    for (int i = 0; i < n;) {
        bson_t *cmd = bson_new(), docs;
        BSON_APPEND_UTF8(cmd, "insert", "c");
        bson_append_array_begin(cmd, "documents", -1, &docs);
        for (int j = 0; j < 1000 && i < n; j++, i++) {
            int words = 8 + (int)(next_rand() % 8), len = 0;
            for (int k = 0; k < words; k++) {
                word(pick(), w);
                len += sprintf(body + len, "%s%s", k ? " " : "", w);
            }
            bson_t d;
            char key[16];
            snprintf(key, sizeof key, "%d", j);
            bson_append_document_begin(&docs, key, -1, &d);
            BSON_APPEND_INT32(&d, "_id", i);
            BSON_APPEND_UTF8(&d, "body", body);
            bson_append_document_end(&docs, &d);
        }
        bson_append_array_end(cmd, &docs);
        run(db, cmd, "insert", NULL);
    }
    double t_ins = now() - t0;
    t0 = now();
    run(db, BCON_NEW("createIndexes", "c", "indexes", "[", "{", "key", "{", "body", "text", "}",
                     "name", "body_text", "}", "]"),
        "createIndexes", NULL);
    double t_idx = now() - t0;
    printf("# engine=%s documents=%d insert_s=%.2f text_index_build_s=%.2f\n", engine, n, t_ins,
           t_idx);

    /* words of falling frequency: ranks 0, 5, 20, 100, 500, 2000, 8000, 19000 */
    static const int ranks[] = {0, 5, 20, 100, 500, 2000, 8000, 19000};
    const int nr = sizeof ranks / sizeof ranks[0];
    int reps_text = n >= 200000 ? 5 : 20;
    int64_t got = 0;
    t0 = now();
    for (int r = 0; r < reps_text; r++)
        for (int q = 0; q < nr; q++) {
            word(ranks[q], w);
            got += drain(db, BCON_NEW("find", "c", "filter", "{", "$text", "{", "$search",
                                      BCON_UTF8(w), "}", "}", "batchSize", BCON_INT32(100000)),
                         "text find");
        }
    double dt = now() - t0;
    int nq = reps_text * nr;
    printf("text %d %.3f %.1f %lld\n", nq, dt, nq / dt, (long long)(got / reps_text));
    got = 0;
    t0 = now();
    for (int q = 0; q < nr; q++) {
        char re[80];
        word(ranks[q], w);
        snprintf(re, sizeof re, "\\b%s\\b", w);
        got += drain(db, BCON_NEW("find", "c", "filter", "{", "body", "{", "$regex", BCON_UTF8(re),
                                  "$options", "i", "}", "}", "batchSize", BCON_INT32(100000)),
                     "regex find");
    }
    dt = now() - t0;
    printf("regex %d %.3f %.2f %lld\n", nr, dt, nr / dt, (long long)got);
    md_db_close(db);
    char rm[1100];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    if (system(rm) != 0)
        fprintf(stderr, "text: could not remove %s\n", dir);
    return 0;
}
