/*
 * test_q_conformance.c -- the query-language conformance suite: every case
 * of every tests/query/conformance/<operator>.jsonl file, on every engine.
 *
 * One case per line (lines that are empty or start with '#' are skipped):
 *
 *   {"name": "...", "docs": [...], "before": [cmd, ...], "cmd": {...},
 *    "expect": {...} | "expectError": {"code": N, "errmsg"?: "..."},
 *    "expectDocs": [...]}
 *
 * Each case starts from an empty collection "c": the runner drops it,
 * inserts `docs` (if any), runs the `before` commands (createIndexes...),
 * then `cmd`.  Comparison of the reply with `expect`:
 *   - only the fields `expect` lists are compared, at the top level, inside
 *     "cursor" and inside each element of "writeErrors" (same length);
 *   - every other value is compared whole and exactly: same BSON type
 *     (int32 1 is not int64 1 nor 1.0), same fields in the same order
 *     (field order matters in MongoDB), arrays element by element; so
 *     cursor.firstBatch is compared whole.
 * `expectError` wants ok: 0 and that code (and errmsg, when given).
 * `expectDocs` is compared whole with the collection's documents afterwards,
 * in _id order; it is how update cases show what they wrote, and how
 * failing writes show that nothing was written.
 *
 * The cases are read with md_json_parse, the reader md_db_command_json and
 * the CLI use, so operator keys that share a name with legacy extended JSON
 * ({"$type": "string"}, {"$regex": "^a"}) are written as they are.  Files
 * written when the reader was libbson's (which took those for extended
 * JSON) spell them with a doubled dollar ("$$type"); the runner still
 * renames every key that starts with "$$" to its one-dollar form.
 */
#include <criterion/criterion.h>
#include <dirent.h>

#include "t_bson_eq.h"
#include "test_q_util.h"

#define CONF_DIR "tests/query/conformance"

typedef struct conf_run {
    int cases, failed;
    char *log;
    size_t loglen;
} conf_run;

static void conf_fail(conf_run *r, const char *file, int line, const char *name,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void conf_fail(conf_run *r, const char *file, int line, const char *name,
                      const char *fmt, ...)
{
    char msg[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    r->failed++;
    if (r->failed > 60)
        return;
    char *s = bson_strdup_printf("%s:%d %s: %s\n", file, line, name, msg);
    size_t n = strlen(s);
    r->log = bson_realloc(r->log, r->loglen + n + 1);
    memcpy(r->log + r->loglen, s, n + 1);
    r->loglen += n;
    bson_free(s);
}

static bool conf_subset(const bson_iter_t *want, const bson_t *got, char *why, size_t whylen);

/* One listed field of a subset comparison. */
static bool conf_field(const bson_iter_t *w, const bson_iter_t *g, char *why, size_t whylen)
{
    const char *k = bson_iter_key(w);
    if ((!strcmp(k, "cursor") || !strcmp(k, "writeErrors")) && bson_iter_type(w) == bson_iter_type(g) &&
        (BSON_ITER_HOLDS_DOCUMENT(w) || BSON_ITER_HOLDS_ARRAY(w))) {
        const uint8_t *d;
        uint32_t l;
        bson_t sub;
        if (BSON_ITER_HOLDS_DOCUMENT(w)) {
            bson_iter_document(g, &l, &d);
            bson_init_static(&sub, d, l);
            return conf_subset(w, &sub, why, whylen);
        }
        bson_iter_t x, y;
        bson_iter_recurse(w, &x);
        bson_iter_recurse(g, &y);
        for (;;) {
            bool nx = bson_iter_next(&x), ny = bson_iter_next(&y);
            if (nx != ny) {
                snprintf(why, whylen, "%s: length differs", k);
                return false;
            }
            if (!nx)
                return true;
            if (!BSON_ITER_HOLDS_DOCUMENT(&x) || !BSON_ITER_HOLDS_DOCUMENT(&y))
                return t_value_equal(&x, &y);
            bson_iter_document(&y, &l, &d);
            bson_init_static(&sub, d, l);
            if (!conf_subset(&x, &sub, why, whylen))
                return false;
        }
    }
    if (!t_value_equal(w, g)) {
        snprintf(why, whylen, "field '%s' differs", k);
        return false;
    }
    return true;
}

/* Every field of document `want` is in `got` with an equal value. */
static bool conf_subset(const bson_iter_t *want, const bson_t *got, char *why, size_t whylen)
{
    bson_iter_t w, g;
    if (!bson_iter_recurse(want, &w))
        return false;
    while (bson_iter_next(&w)) {
        if (!bson_iter_init_find(&g, got, bson_iter_key(&w))) {
            snprintf(why, whylen, "field '%s' missing", bson_iter_key(&w));
            return false;
        }
        if (!conf_field(&w, &g, why, whylen))
            return false;
    }
    return true;
}

/* Run command doc `cmd` (an iterator on a document); the reply is returned. */
static bson_t *conf_cmd(md_db *db, const bson_iter_t *cmd)
{
    uint32_t l;
    const uint8_t *d;
    bson_t c, r;
    bson_iter_document(cmd, &l, &d);
    bson_init_static(&c, d, l);
    md_db_command(db, &c, &r, NULL);
    bson_t *out = bson_copy(&r);
    bson_destroy(&r);
    return out;
}

/* The collection's documents in _id order, as a document {docs: [...]}. */
static bson_t *conf_docs(md_db *db)
{
    bson_t *cmd = BCON_NEW("find", "c", "sort", "{", "_id", BCON_INT32(1), "}", "batchSize",
                           BCON_INT32(100000));
    bson_t r;
    md_db_command(db, cmd, &r, NULL);
    bson_destroy(cmd);
    bson_t *out = bson_new();
    bson_iter_t it;
    if (bson_iter_init(&it, &r) && bson_iter_find_descendant(&it, "cursor.firstBatch", &it))
        BSON_APPEND_VALUE(out, "docs", bson_iter_value(&it));
    else
        BSON_APPEND_ARRAY(out, "docs", &(bson_t)BSON_INITIALIZER);
    bson_destroy(&r);
    return out;
}

static void conf_prepare(md_db *db, const bson_t *tc)
{
    bson_iter_t it, x;
    bson_t *drop = BCON_NEW("drop", "c"), r;
    md_db_command(db, drop, &r, NULL);
    bson_destroy(&r);
    bson_destroy(drop);
    if (bson_iter_init_find(&it, tc, "docs") && BSON_ITER_HOLDS_ARRAY(&it)) {
        bson_t ins = BSON_INITIALIZER;
        BSON_APPEND_UTF8(&ins, "insert", "c");
        BSON_APPEND_VALUE(&ins, "documents", bson_iter_value(&it));
        md_db_command(db, &ins, &r, NULL);
        bson_destroy(&r);
        bson_destroy(&ins);
    }
    if (bson_iter_init_find(&it, tc, "before") && bson_iter_recurse(&it, &x))
        while (bson_iter_next(&x))
            bson_destroy(conf_cmd(db, &x));
}

static void conf_check(conf_run *r, md_db *db, const char *file, int line, const bson_t *tc,
                       const char *name, const bson_t *reply)
{
    bson_iter_t it, g;
    char why[512] = "";
    if (bson_iter_init_find(&it, tc, "expect")) {
        if (!conf_subset(&it, reply, why, sizeof why)) {
            char *js = bson_as_relaxed_extended_json(reply, NULL);
            conf_fail(r, file, line, name, "%s; reply %s", why, js);
            bson_free(js);
            return;
        }
    } else if (bson_iter_init_find(&it, tc, "expectError")) {
        bson_iter_t code, msg;
        bool ok = bson_iter_init_find(&g, reply, "ok") && bson_iter_as_double(&g) == 0.0;
        bson_iter_t w = it;
        ok = ok && bson_iter_recurse(&w, &code) && bson_iter_find(&code, "code") &&
             bson_iter_init_find(&g, reply, "code") &&
             bson_iter_as_int64(&g) == bson_iter_as_int64(&code);
        if (ok && bson_iter_recurse(&w, &msg) && bson_iter_find(&msg, "errmsg"))
            ok = bson_iter_init_find(&g, reply, "errmsg") &&
                 !strcmp(bson_iter_utf8(&g, NULL), bson_iter_utf8(&msg, NULL));
        if (!ok) {
            char *js = bson_as_relaxed_extended_json(reply, NULL);
            conf_fail(r, file, line, name, "expected error; reply %s", js);
            bson_free(js);
            return;
        }
    } else {
        conf_fail(r, file, line, name, "case has neither expect nor expectError");
        return;
    }
    if (bson_iter_init_find(&it, tc, "expectDocs")) {
        bson_t *docs = conf_docs(db);
        bson_iter_init_find(&g, docs, "docs");
        if (!t_value_equal(&it, &g)) {
            char *js = bson_as_relaxed_extended_json(docs, NULL);
            conf_fail(r, file, line, name, "documents afterwards differ: %s", js);
            bson_free(js);
        }
        bson_destroy(docs);
    }
}

/* Copy the elements of `it`'s container into out, "$$k" keys renamed "$k". */
static void conf_undollar(bson_iter_t *it, bson_t *out)
{
    while (bson_iter_next(it)) {
        const char *k = bson_iter_key(it);
        if (k[0] == '$' && k[1] == '$')
            k++;
        bson_iter_t sub;
        bson_t child;
        if (BSON_ITER_HOLDS_DOCUMENT(it) && bson_iter_recurse(it, &sub)) {
            bson_append_document_begin(out, k, -1, &child);
            conf_undollar(&sub, &child);
            bson_append_document_end(out, &child);
        } else if (BSON_ITER_HOLDS_ARRAY(it) && bson_iter_recurse(it, &sub)) {
            bson_append_array_begin(out, k, -1, &child);
            conf_undollar(&sub, &child);
            bson_append_array_end(out, &child);
        } else {
            bson_append_iter(out, k, -1, it);
        }
    }
}

static void conf_case(conf_run *r, md_db *db, const char *file, int line, const char *text)
{
    md_error jerr;
    bson_t raw;
    bson_iter_t it;
    if (md_json_parse(text, -1, &raw, &jerr) != 0) {
        bson_destroy(&raw);
        conf_fail(r, file, line, "?", "bad JSON: %s", jerr.message);
        return;
    }
    bson_t *tc = bson_new();
    bson_iter_init(&it, &raw);
    conf_undollar(&it, tc);
    bson_destroy(&raw);
    const char *name = bson_iter_init_find(&it, tc, "name") ? bson_iter_utf8(&it, NULL) : "?";
    r->cases++;
    conf_prepare(db, tc);
    if (!bson_iter_init_find(&it, tc, "cmd") || !BSON_ITER_HOLDS_DOCUMENT(&it)) {
        conf_fail(r, file, line, name, "no cmd");
    } else {
        bson_t *reply = conf_cmd(db, &it);
        conf_check(r, db, file, line, tc, name, reply);
        bson_destroy(reply);
    }
    bson_destroy(tc);
}

static void conf_file(conf_run *r, md_db *db, const char *file)
{
    char path[512], *line = NULL;
    size_t cap = 0;
    int lineno = 0;
    snprintf(path, sizeof path, "%s/%s", CONF_DIR, file);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "cannot open %s (tests run from the repository root)", path);
    while (getline(&line, &cap, f) > 0) {
        lineno++;
        if (line[0] == '#' || line[0] == '\n')
            continue;
        conf_case(r, db, file, lineno, line);
    }
    free(line);
    fclose(f);
}

static int conf_name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every case of every file on engine number `k` (skipped if there is none). */
static void conf_engine(size_t k)
{
    const eng_ops *const *e = eng_engines();
    for (size_t i = 0; i < k; i++)
        if (!e[i])
            return;
    if (!e[k])
        return;
    DIR *d = opendir(CONF_DIR);
    cr_assert_not_null(d, "cannot open %s (tests run from the repository root)", CONF_DIR);
    char *names[256];
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < 256) {
        size_t l = strlen(de->d_name);
        if (l > 6 && !strcmp(de->d_name + l - 6, ".jsonl"))
            names[n++] = bson_strdup(de->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof names[0], conf_name_cmp);
    conf_run r = {0};
    for (size_t i = 0; i < n; i++) {
        tdb t;
        t_open(&t, e[k]->name);
        conf_file(&r, t.db, names[i]);
        t_close(&t);
        bson_free(names[i]);
    }
    cr_log_info("conformance on %s: %d cases, %d failed", e[k]->name, r.cases, r.failed);
    cr_expect(r.cases > 0, "no conformance cases found");
    cr_assert_eq(r.failed, 0, "%s: %d of %d cases failed:\n%s", e[k]->name, r.failed, r.cases,
                 r.log ? r.log : "");
    bson_free(r.log);
}

Test(q_conformance, engine_0) { conf_engine(0); }
Test(q_conformance, engine_1) { conf_engine(1); }
Test(q_conformance, engine_2) { conf_engine(2); }
Test(q_conformance, engine_3) { conf_engine(3); }
