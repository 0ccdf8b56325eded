/*
 * test_agg_expr.c -- aggregation expressions evaluated directly
 * (query/agg_expr.h), case by case from tests/query/agg_expr/<family>.jsonl.
 *
 * One case per line (empty lines and lines starting with '#' skipped):
 *
 *   {"name": "...", "expr": <expression>, "doc": {...}?,
 *    "expect": <value> | "expectMissing": true | "expectError": {"code": N}}
 *
 * The expression is parsed in a fresh scope and evaluated with ROOT and
 * CURRENT = doc ({} when absent).  `expect` is compared exactly: same BSON
 * type (1, 1.0 and {"$numberLong": "1"} differ), same fields in the same
 * order, arrays element by element; doubles equal as numbers (NaN equals
 * NaN).  "$$ROOT" and the like are plain strings to libbson's JSON reader,
 * so the files need no escaping; the operator keys libbson takes for
 * legacy extended JSON ($type, $regex, $options) are written with a
 * doubled dollar ("$$type") and renamed back before the case runs.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "agg_expr.h"
#include "t_bson_eq.h"

#define CASE_DIR "tests/query/agg_expr"

/* Rename every "$$x" key to "$x" (recursively), into out. */
static void undouble(const bson_t *in, bson_t *out)
{
    bson_iter_t it;
    bson_iter_init(&it, in);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (k[0] == '$' && k[1] == '$')
            k++;
        if (BSON_ITER_HOLDS_DOCUMENT(&it) || BSON_ITER_HOLDS_ARRAY(&it)) {
            const uint8_t *d;
            uint32_t l;
            bson_t sub, child, conv;
            bool arr = BSON_ITER_HOLDS_ARRAY(&it);
            if (arr)
                bson_iter_array(&it, &l, &d);
            else
                bson_iter_document(&it, &l, &d);
            bson_init_static(&sub, d, l);
            bson_init(&conv);
            undouble(&sub, &conv);
            if (arr) {
                bson_append_array_begin(out, k, -1, &child);
            } else {
                bson_append_document_begin(out, k, -1, &child);
            }
            bson_concat(&child, &conv);
            if (arr)
                bson_append_array_end(out, &child);
            else
                bson_append_document_end(out, &child);
            bson_destroy(&conv);
        } else {
            bson_append_iter(out, k, -1, &it);
        }
    }
}

typedef struct run {
    int cases, failed;
    char log[16384];
    size_t loglen;
} run;

static void fail(run *r, const char *file, int line, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void fail(run *r, const char *file, int line, const char *name, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    r->failed++;
    if (r->loglen < sizeof r->log - 1)
        r->loglen += (size_t)snprintf(r->log + r->loglen, sizeof r->log - r->loglen,
                                      "%s:%d %s: %s\n", file, line, name, msg);
}

static char *value_json(const bson_value_t *v)
{
    if (v->value_type == BSON_TYPE_EOD)
        return bson_strdup("(missing)");
    bson_t d = BSON_INITIALIZER;
    bson_append_value(&d, "v", 1, v);
    char *s = bson_as_canonical_extended_json(&d, NULL);
    bson_destroy(&d);
    return s;
}

static void run_case(run *r, const char *file, int line, const bson_t *tc)
{
    bson_iter_t it, expr, want;
    const char *name = "?";
    bson_t doc = BSON_INITIALIZER;
    if (bson_iter_init_find(&it, tc, "name") && BSON_ITER_HOLDS_UTF8(&it))
        name = bson_iter_utf8(&it, NULL);
    if (!bson_iter_init_find(&expr, tc, "expr")) {
        fail(r, file, line, name, "no expr");
        return;
    }
    if (bson_iter_init_find(&it, tc, "doc") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        const uint8_t *d;
        uint32_t l;
        bson_iter_document(&it, &l, &d);
        bson_destroy(&doc);
        bson_init_static(&doc, d, l);
    }
    r->cases++;
    agg_scope *s = agg_scope_new();
    agg_expr *e = NULL;
    md_error err;
    memset(&err, 0, sizeof err);
    bson_value_t out;
    out.value_type = BSON_TYPE_EOD;
    int rc = agg_expr_parse(&expr, s, &e, &err);
    if (!rc) {
        agg_vars vars;
        agg_vars_init(&vars, s);
        agg_vars_set_root(&vars, &doc);
        rc = agg_expr_eval(e, &vars, &out, &err);
        agg_vars_cleanup(&vars);
        if (rc && out.value_type != BSON_TYPE_EOD)
            fail(r, file, line, name, "a failed evaluation left a value");
    }
    if (bson_iter_init_find(&want, tc, "expectError")) {
        bson_iter_t c;
        int code = 0;
        if (bson_iter_recurse(&want, &c) && bson_iter_find(&c, "code"))
            code = (int)bson_iter_as_int64(&c);
        if (!rc) {
            char *got = value_json(&out);
            fail(r, file, line, name, "expected error %d, got %s", code, got);
            bson_free(got);
        } else if (err.code != code) {
            fail(r, file, line, name, "expected error %d, got %d (%s)", code, err.code,
                 err.message);
        }
    } else if (rc) {
        fail(r, file, line, name, "error %d: %s", err.code, err.message);
    } else if (bson_iter_init_find(&want, tc, "expectMissing")) {
        if (out.value_type != BSON_TYPE_EOD) {
            char *got = value_json(&out);
            fail(r, file, line, name, "expected missing, got %s", got);
            bson_free(got);
        }
    } else if (bson_iter_init_find(&want, tc, "expect")) {
        bson_t g = BSON_INITIALIZER;
        bson_iter_t gi;
        if (out.value_type != BSON_TYPE_EOD)
            bson_append_value(&g, "v", 1, &out);
        if (!bson_iter_init_find(&gi, &g, "v") || !t_value_equal(&want, &gi)) {
            char *got = value_json(&out);
            bson_value_t wv;
            bson_value_copy(bson_iter_value(&want), &wv);
            char *exp = value_json(&wv);
            fail(r, file, line, name, "expected %s, got %s", exp, got);
            bson_free(got);
            bson_free(exp);
            bson_value_destroy(&wv);
        }
        bson_destroy(&g);
    } else {
        fail(r, file, line, name, "no expect / expectMissing / expectError");
    }
    if (out.value_type != BSON_TYPE_EOD)
        agg_value_destroy(&out);
    agg_expr_destroy(e);
    agg_scope_destroy(s);
    bson_destroy(&doc);
}

static void run_file(run *r, const char *file)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", CASE_DIR, file);
    FILE *f = fopen(path, "r");
    cr_assert(f, "cannot open %s", path);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int lineno = 0;
    while ((n = getline(&line, &cap, f)) >= 0) {
        lineno++;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        if (n == 0 || line[0] == '#')
            continue;
        bson_error_t berr;
        bson_t *raw = bson_new_from_json((const uint8_t *)line, n, &berr);
        if (!raw) {
            fail(r, file, lineno, "?", "bad JSON: %s", berr.message);
            continue;
        }
        bson_t tc = BSON_INITIALIZER;
        undouble(raw, &tc);
        run_case(r, file, lineno, &tc);
        bson_destroy(&tc);
        bson_destroy(raw);
    }
    free(line);
    fclose(f);
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

Test(agg_expr, cases)
{
    DIR *d = opendir(CASE_DIR);
    cr_assert(d, "cannot open %s", CASE_DIR);
    char *names[64];
    size_t nn = 0;
    struct dirent *de;
    while ((de = readdir(d)) && nn < 64) {
        size_t l = strlen(de->d_name);
        if (l > 6 && !strcmp(de->d_name + l - 6, ".jsonl"))
            names[nn++] = strdup(de->d_name);
    }
    closedir(d);
    qsort(names, nn, sizeof *names, cmp_names);
    run r;
    memset(&r, 0, sizeof r);
    for (size_t i = 0; i < nn; i++) {
        run_file(&r, names[i]);
        free(names[i]);
    }
    cr_log_info("agg_expr: %d cases", r.cases);
    cr_assert(r.cases > 0);
    cr_assert(r.failed == 0, "%d of %d cases failed:\n%s", r.failed, r.cases, r.log);
}

static void collect(const char *path, void *arg)
{
    strcat(arg, path);
    strcat(arg, ",");
}

/* Variables defined by the caller, slots, deps and constants. */
Test(agg_expr, scope_and_deps)
{
    md_error err;
    agg_scope *s = agg_scope_new();
    int slot = agg_scope_define(s, "x", &err);
    cr_assert(slot >= 2);
    cr_assert(agg_scope_define(s, "Bad", &err) < 0);
    cr_assert_eq(err.code, 16867);
    cr_assert(agg_scope_define(s, "a-b", &err) < 0);
    cr_assert_eq(err.code, 16868);
    cr_assert(agg_scope_define(s, "", &err) < 0);
    cr_assert_eq(err.code, 16866);
    bson_t *spec = bson_new_from_json(
        (const uint8_t *)"{\"e\": {\"$add\": [\"$a.b\", \"$$x\", {\"$let\": {\"vars\": "
                         "{\"y\": 2}, \"in\": {\"$multiply\": [\"$$y\", \"$c\"]}}}]}}",
        -1, NULL);
    bson_iter_t it;
    cr_assert(bson_iter_init_find(&it, spec, "e"));
    agg_expr *e;
    cr_assert_eq(agg_expr_parse(&it, s, &e, &err), 0, "%s", err.message);
    cr_assert(!agg_expr_is_constant(e));
    char seen[64] = "";
    bool whole = false;
    agg_expr_deps(e, collect, seen, &whole);
    cr_assert_str_eq(seen, "a.b,c,");
    cr_assert(!whole);
    agg_vars vars;
    agg_vars_init(&vars, s);
    bson_t *doc = bson_new_from_json((const uint8_t *)"{\"a\": {\"b\": 5}, \"c\": 10}", -1, NULL);
    agg_vars_set_root(&vars, doc);
    bson_value_t x = {.value_type = BSON_TYPE_INT32, .value.v_int32 = 7};
    agg_vars_set(&vars, slot, &x);
    bson_value_t out;
    cr_assert_eq(agg_expr_eval(e, &vars, &out, &err), 0, "%s", err.message);
    cr_assert_eq(out.value_type, BSON_TYPE_INT32);
    cr_assert_eq(out.value.v_int32, 5 + 7 + 20);
    agg_value_destroy(&out);
    agg_vars_cleanup(&vars);
    agg_expr_destroy(e);
    bson_destroy(doc);
    bson_destroy(spec);
    agg_scope_destroy(s);
}
