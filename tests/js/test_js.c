/*
 * test_js.c -- js/js.h: BSON <-> JavaScript without loss, MongoDB's
 * environment (emit, Array.sum, NumberLong, ObjectId, ISODate, Date
 * getters, tojson), and the failures: syntax errors, throws, runaways
 * stopped by the time limits (also from another thread), deep recursion,
 * a capped heap, cyclic results; host functions (js_ctx_add_host) and the
 * int32_numbers option.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "js.h"

static bson_t *J(const char *json)
{
    bson_error_t e;
    bson_t *b = bson_new_from_json((const uint8_t *)json, -1, &e);
    cr_assert(b, "bad JSON %s: %s", json, e.message);
    return b;
}

static js_ctx *ctx(int64_t call_ms, int64_t total_ms, size_t mem)
{
    js_opts o = {total_ms, call_ms, mem, false};
    js_ctx *c;
    md_error err;
    cr_assert_eq(js_ctx_new(&o, &c, &err), 0, "%s", err.message);
    return c;
}

static int fn(js_ctx *c, const char *src)
{
    int f;
    md_error err;
    cr_assert_eq(js_func_new(c, src, strlen(src), &f, &err), 0, "%s: %s", src, err.message);
    return f;
}

/* Call src with this = self (JSON or NULL), args (JSON or NULL): the
 * result as {r: value} in out; returns the rc and err. */
static int call(js_ctx *c, const char *src, const char *self, const char *args, bson_t *out,
                md_error *err)
{
    int f;
    int rc = js_func_new(c, src, strlen(src), &f, err);
    if (rc)
        return rc;
    bson_t *s = self ? J(self) : NULL, *a = args ? J(args) : NULL;
    rc = js_func_call(c, f, s, a, out, "r", err);
    if (s)
        bson_destroy(s);
    if (a)
        bson_destroy(a);
    return rc;
}

static void expect_result(const char *src, const char *self, const char *args, const char *want)
{
    js_ctx *c = ctx(0, 0, 0);
    bson_t out = BSON_INITIALIZER;
    md_error err;
    cr_assert_eq(call(c, src, self, args, &out, &err), 0, "%s: %s", src, err.message);
    bson_t *w = J(want);
    char *got = bson_as_canonical_extended_json(&out, NULL);
    char *exp = bson_as_canonical_extended_json(w, NULL);
    cr_assert_str_eq(got, exp, "%s", src);
    bson_free(got);
    bson_free(exp);
    bson_destroy(w);
    bson_destroy(&out);
    js_ctx_destroy(c);
}

static void expect_error(js_ctx *c, const char *src, const char *self, int code,
                         const char *msg)
{
    bson_t out = BSON_INITIALIZER;
    md_error err;
    memset(&err, 0, sizeof err);
    cr_assert_neq(call(c, src, self, NULL, &out, &err), 0, "%s succeeded", src);
    cr_assert_eq(err.code, code, "%s: code %d (%s)", src, err.code, err.message);
    if (msg)
        cr_assert(strstr(err.message, msg), "%s: message '%s' lacks '%s'", src, err.message, msg);
    bson_destroy(&out);
}

/* Every BSON type through `this` and back is the same document, byte for byte. */
Test(js, round_trip_every_type)
{
    const char *doc =
        "{\"_id\": {\"$oid\": \"5f1b2c3d4e5f60718293a4b5\"},"
        " \"i\": {\"$numberInt\": \"7\"}, \"l\": {\"$numberLong\": \"9007199254740993\"},"
        " \"nl\": {\"$numberLong\": \"-9223372036854775808\"},"
        " \"d\": {\"$numberDouble\": \"2.5\"}, \"dz\": {\"$numberDouble\": \"-0.0\"},"
        " \"inf\": {\"$numberDouble\": \"Infinity\"},"
        " \"dec\": {\"$numberDecimal\": \"1.00000000000000000001\"},"
        " \"s\": \"h\\u00e9llo \\ud83d\\ude00\", \"t\": true, \"f\": false, \"n\": null,"
        " \"u\": {\"$undefined\": true},"
        " \"date\": {\"$date\": {\"$numberLong\": \"1286720242000\"}},"
        " \"neg\": {\"$date\": {\"$numberLong\": \"-5000\"}},"
        " \"sub\": {\"b\": 1, \"a\": [1, \"x\", {\"z\": {\"$numberLong\": \"3\"}}]},"
        " \"arr\": [], \"emp\": {},"
        " \"bin\": {\"$binary\": {\"base64\": \"AAECAwQ=\", \"subType\": \"00\"}},"
        " \"uuid\": {\"$binary\": {\"base64\": \"q83vEjRWeJCrze8SNFZ4kA==\", \"subType\": \"04\"}},"
        " \"old\": {\"$binary\": {\"base64\": \"AQI=\", \"subType\": \"02\"}},"
        " \"re\": {\"$regularExpression\": {\"pattern\": \"^a/b\", \"options\": \"im\"}},"
        " \"re2\": {\"$regularExpression\": {\"pattern\": \"(?<=x)y\", \"options\": \"s\"}},"
        " \"ts\": {\"$timestamp\": {\"t\": 1500000000, \"i\": 7}},"
        " \"min\": {\"$minKey\": 1}, \"max\": {\"$maxKey\": 1},"
        " \"code\": {\"$code\": \"function () {}\"},"
        " \"order\": {\"b\": 1, \"2\": 2, \"a\": 3, \"1\": 4}}";
    js_ctx *c = ctx(0, 0, 0);
    bson_t *d = J(doc);
    bson_t out = BSON_INITIALIZER;
    md_error err;
    int f = fn(c, "function () { return this; }");
    cr_assert_eq(js_func_call(c, f, d, NULL, &out, "r", &err), 0, "%s", err.message);
    bson_iter_t it, sub;
    cr_assert(bson_iter_init_find(&it, &out, "r") && BSON_ITER_HOLDS_DOCUMENT(&it));
    uint32_t len;
    const uint8_t *p;
    bson_iter_document(&it, &len, &p);
    bson_t back;
    bson_init_static(&back, p, len);
    char *a = bson_as_canonical_extended_json(d, NULL), *b = bson_as_canonical_extended_json(&back, NULL);
    cr_assert_str_eq(b, a);
    cr_assert_eq(len, d->len);
    cr_assert_eq(memcmp(p, bson_get_data(d), len), 0);
    (void)sub;
    bson_free(a);
    bson_free(b);
    bson_destroy(&out);
    /* the same through an argument, and through emit */
    bson_destroy(d);
    js_ctx_destroy(c);
}

Test(js, numbers_become_doubles_unless_int32_fields_stay)
{
    /* a bare number is a double (MongoDB's ValueWriter); a field of an
     * object from BSON that was int32 stays int32 while integral */
    expect_result("function () { return this.a; }", "{\"a\": 5}", NULL, "{\"r\": 5.0}");
    expect_result("function () { return this; }", "{\"a\": 5, \"b\": 2.0}", NULL,
                  "{\"r\": {\"a\": 5, \"b\": 2.0}}");
    expect_result("function () { this.a += 0.5; this.c = 1; return this; }", "{\"a\": 5}", NULL,
                  "{\"r\": {\"a\": 5.5, \"c\": 1.0}}");
    expect_result("function () { return [this.a, NumberInt(3), NumberLong(4)]; }", "{\"a\": 5}",
                  NULL, "{\"r\": [5.0, 3, {\"$numberLong\": \"4\"}]}");
    expect_result("function (x, y) { return {x: x, y: y}; }", NULL,
                  "{\"0\": {\"$numberLong\": \"-12345678901234567\"}, \"1\": [1, 2]}",
                  "{\"r\": {\"x\": {\"$numberLong\": \"-12345678901234567\"}, \"y\": [1, 2]}}");
}

Test(js, environment)
{
    expect_result("function () { return Array.sum([1, 2, 3.5]); }", NULL, NULL, "{\"r\": 6.5}");
    expect_result("function () { return Array.avg([1, 2, 3]); }", NULL, NULL, "{\"r\": 2.0}");
    expect_result("function () { return Array.sum([]); }", NULL, NULL, "{\"r\": null}");
    expect_result("function () { var t = 0; [1, 2, 3].forEach(function (v) { t += v; });"
                  " return t; }", NULL, NULL, "{\"r\": 6.0}");
    expect_result("function () { var d = this.ts; return [d.getUTCFullYear(), d.getUTCMonth(),"
                  " d.getUTCDate(), d.getUTCHours(), d.getUTCDay(), d.valueOf()]; }",
                  "{\"ts\": {\"$date\": \"2010-10-10T14:17:22Z\"}}", NULL,
                  "{\"r\": [2010.0, 9.0, 10.0, 14.0, 0.0, 1286720242000.0]}");
    expect_result("function () { return ISODate('2010-10-10T14:17:22Z'); }", NULL, NULL,
                  "{\"r\": {\"$date\": \"2010-10-10T14:17:22Z\"}}");
    expect_result("function () { return ISODate('2010-10-10T16:17:22.5+02:00'); }", NULL, NULL,
                  "{\"r\": {\"$date\": \"2010-10-10T14:17:22.500Z\"}}");
    expect_result("function () { return [NumberLong('9223372036854775807'), NumberLong(5) + 1,"
                  " NumberDecimal('1.10'), new NumberLong(NumberLong(-2))]; }", NULL, NULL,
                  "{\"r\": [{\"$numberLong\": \"9223372036854775807\"}, 6.0,"
                  " {\"$numberDecimal\": \"1.10\"}, {\"$numberLong\": \"-2\"}]}");
    expect_result("function () { return [this._id.str, this._id.getTimestamp(),"
                  " ObjectId('5f1b2c3d4e5f60718293a4b5').equals(this._id), tojson(this)]; }",
                  "{\"_id\": {\"$oid\": \"5f1b2c3d4e5f60718293a4b5\"}}", NULL,
                  "{\"r\": [\"5f1b2c3d4e5f60718293a4b5\", {\"$date\": {\"$numberLong\": \"1595616317000\"}},"
                  " true, \"{ \\\"_id\\\" : ObjectId(\\\"5f1b2c3d4e5f60718293a4b5\\\") }\"]}");
    expect_result("function () { return [typeof ObjectId().str, ObjectId().str.length,"
                  " tojson([NumberLong(1), MinKey, new Date(0), {a: 'x'}])]; }", NULL, NULL,
                  "{\"r\": [\"string\", 24.0, \"[ NumberLong(1), { \\\"$minKey\\\" : 1 },"
                  " ISODate(\\\"1970-01-01T00:00:00.000Z\\\"), { \\\"a\\\" : \\\"x\\\" } ]\"]}");
    expect_result("function () { return [BinData(0, 'AAECAwQ='), BinData(0, 'AAECAwQ=').length(),"
                  " Timestamp(5, 6), MaxKey, /ab+c/i]; }", NULL, NULL,
                  "{\"r\": [{\"$binary\": {\"base64\": \"AAECAwQ=\", \"subType\": \"00\"}}, 5.0,"
                  " {\"$timestamp\": {\"t\": 5, \"i\": 6}}, {\"$maxKey\": 1},"
                  " {\"$regularExpression\": {\"pattern\": \"ab+c\", \"options\": \"i\"}}]}");
    /* a $where string: an expression, or statements with a return */
    expect_result("this.a == 1", "{\"a\": 1}", NULL, "{\"r\": true}");
    expect_result("var x = this.a * 2; return x;", "{\"a\": 4}", NULL, "{\"r\": 8.0}");
    /* scope variables */
    js_ctx *c = ctx(0, 0, 0);
    bson_t *scope = J("{\"factor\": 3, \"names\": [\"a\"]}");
    md_error err;
    cr_assert_eq(js_ctx_set_globals(c, scope, &err), 0);
    bson_t out = BSON_INITIALIZER;
    cr_assert_eq(call(c, "function () { return factor * 2 + names.length; }", NULL, NULL, &out,
                      &err), 0, "%s", err.message);
    bson_iter_t it;
    cr_assert(bson_iter_init_find(&it, &out, "r") && bson_iter_double(&it) == 7.0);
    bson_destroy(&out);
    bson_destroy(scope);
    js_ctx_destroy(c);
}

typedef struct emits {
    int n;
    char last[256];
    bool fail;
} emits;

static int on_emit(void *arg, const bson_t *kv, md_error *err)
{
    emits *e = arg;
    e->n++;
    char *s = bson_as_relaxed_extended_json(kv, NULL);
    snprintf(e->last, sizeof e->last, "%s", s);
    bson_free(s);
    if (e->fail)
        return md_error_set(err, MD_ERROR, 10334, "emit refused");
    return 0;
}

Test(js, emit)
{
    js_ctx *c = ctx(0, 0, 0);
    emits e = {0};
    md_error err;
    bson_t *d = J("{\"k\": {\"u\": \"rick\"}, \"n\": 2}");
    int f = fn(c, "function () { for (var i = 0; i < this.n; i++) emit(this.k, {count: 1}); }");
    /* without a callback emit throws */
    cr_assert_neq(js_func_call(c, f, d, NULL, NULL, NULL, &err), 0);
    cr_assert_eq(err.code, 139);
    js_ctx_set_emit(c, on_emit, &e);
    cr_assert_eq(js_func_call(c, f, d, NULL, NULL, NULL, &err), 0, "%s", err.message);
    cr_assert_eq(e.n, 2);
    cr_assert_str_eq(e.last, "{ \"k\" : { \"u\" : \"rick\" }, \"v\" : { \"count\" : 1.0 } }");
    expect_error(c, "function () { emit(1); }", NULL, 139, "emit takes 2 args");
    /* the callback's error is the call's error, code and all */
    e.fail = true;
    cr_assert_neq(js_func_call(c, f, d, NULL, NULL, NULL, &err), 0);
    cr_assert_eq(err.code, 10334);
    cr_assert_str_eq(err.message, "emit refused");
    bson_destroy(d);
    js_ctx_destroy(c);
}

Test(js, bad_javascript_is_139_with_the_engine_message)
{
    js_ctx *c = ctx(0, 0, 0);
    expect_error(c, "function () { return 1 +; }", NULL, 139, "SyntaxError");
    expect_error(c, "function () { throw new Error('boom'); }", NULL, 139, "Error: boom");
    expect_error(c, "function () { throw {toString: function () { return 'odd'; }}; }", NULL,
                 139, "odd");
    expect_error(c, "function () { return this.x.y; }", "{}", 139, "TypeError");
    expect_error(c, "function () { return nosuch(); }", NULL, 139, "ReferenceError");
    /* the context still works after every error */
    bson_t out = BSON_INITIALIZER;
    md_error err;
    cr_assert_eq(call(c, "function () { return 1; }", NULL, NULL, &out, &err), 0);
    bson_destroy(&out);
    js_ctx_destroy(c);
}

Test(js, deep_recursion_and_cycles_and_memory)
{
    js_ctx *c = ctx(0, 0, 16u << 20);
    expect_error(c, "function () { function f(n) { return 1 + f(n + 1); } return f(0); }", NULL,
                 139, "RangeError");
    /* recursion through a native (forEach) nests C frames: Duktape's own
     * C depth limit stops it */
    expect_error(c, "function () { function g(n) { [1].forEach(function () { g(n + 1); }); }"
                    " g(0); }", NULL, 139, "RangeError");
    expect_error(c, "function () { var a = {}; a.self = a; return a; }", NULL, 139, "depth");
    expect_error(c, "function () { var a = []; for (;;) a.push(new Array(1000).join('x') +"
                    " a.length); }", NULL, 139, NULL);
    expect_error(c, "function () { var s = 'x'; for (;;) s = s + s; }", NULL, 139, NULL);
    bson_t out = BSON_INITIALIZER;
    md_error err;
    cr_assert_eq(call(c, "function () { return 'alive'; }", NULL, NULL, &out, &err), 0, "%s",
                 err.message);
    bson_destroy(&out);
    js_ctx_destroy(c);
}

Test(js, runaway_call_stopped_by_the_call_limit)
{
    js_ctx *c = ctx(200, 0, 0);
    expect_error(c, "function () { while (true) {} }", NULL, 50, "exceeded time limit");
    /* the heap was thrown away: the context answers 50 from now on */
    expect_error(c, "function () { return 1; }", NULL, 50, NULL);
    cr_assert(js_ctx_expired(c));
    js_ctx_destroy(c);
    /* a tail-recursive loop, a loop calling natives and catching errors */
    c = ctx(200, 0, 0);
    expect_error(c, "function () { function f() { return f(); } return f(); }", NULL, 50, NULL);
    js_ctx_destroy(c);
    c = ctx(200, 0, 0);
    expect_error(c, "function () { for (;;) { try { ObjectId('x'); } catch (e) {} } }", NULL, 50,
                 NULL);
    js_ctx_destroy(c);
}

Test(js, runaway_stopped_by_the_context_deadline)
{
    js_ctx *c = ctx(0, 300, 0);
    int f = fn(c, "function () { var s = 0; for (var i = 0; i < 1e5; i++) s += i; return s; }");
    md_error err;
    cr_assert_eq(js_func_call(c, f, NULL, NULL, NULL, NULL, &err), 0);
    expect_error(c, "function () { for (;;) {} }", NULL, 50, NULL);
    cr_assert_neq(js_func_call(c, f, NULL, NULL, NULL, NULL, &err), 0);
    cr_assert_eq(err.code, 50);
    js_ctx_destroy(c);
}

static void *other_thread(void *arg)
{
    js_ctx *c = arg;
    int f;
    md_error err;
    static const char src[] = "function () { while (1) {} }";
    int rc = js_func_new(c, src, sizeof src - 1, &f, &err);
    if (rc == 0)
        rc = js_func_call(c, f, NULL, NULL, NULL, NULL, &err);
    return (void *)(intptr_t)(rc ? err.code : 0);
}

Test(js, the_time_limit_follows_the_context_to_another_thread)
{
    js_ctx *c = ctx(200, 0, 0);
    int f = fn(c, "function () { return 1; }");
    md_error err;
    cr_assert_eq(js_func_call(c, f, NULL, NULL, NULL, NULL, &err), 0);
    pthread_t t;
    void *res;
    cr_assert_eq(pthread_create(&t, NULL, other_thread, c), 0);
    pthread_join(t, &res);
    cr_assert_eq((intptr_t)res, 50);
    js_ctx_destroy(c);
}

Test(js, test_truthiness)
{
    js_ctx *c = ctx(0, 0, 0);
    bson_t *d = J("{\"a\": 0, \"b\": \"x\"}");
    bool t;
    md_error err;
    int f1 = fn(c, "this.a"), f2 = fn(c, "function () { return this.b; }");
    cr_assert_eq(js_func_test(c, f1, d, &t, &err), 0);
    cr_assert_not(t);
    cr_assert_eq(js_func_test(c, f2, d, &t, &err), 0);
    cr_assert(t);
    bson_destroy(d);
    js_ctx_destroy(c);
}

/* ---- host functions (js_ctx_add_host) and js_opts.int32_numbers ------------------ */

typedef struct host_log {
    int calls;
    char last[512]; /* the arguments of the last call, canonical JSON */
} host_log;

/* add(a, b) -> a + b as a double; echo(x) -> {got: x}; fail() -> an error;
 * nothing() -> no value. */
static int host_add(void *arg, const bson_t *args, bson_t *ret, md_error *err)
{
    host_log *l = arg;
    l->calls++;
    char *j = bson_as_canonical_extended_json(args, NULL);
    snprintf(l->last, sizeof l->last, "%s", j);
    bson_free(j);
    bson_iter_t a, b;
    if (!bson_iter_init_find(&a, args, "0") || !bson_iter_init_find(&b, args, "1"))
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE, "add takes two numbers");
    BSON_APPEND_DOUBLE(ret, "sum", bson_iter_as_double(&a) + bson_iter_as_double(&b));
    return 0;
}

static int host_echo(void *arg, const bson_t *args, bson_t *ret, md_error *err)
{
    bson_iter_t it;
    bson_t d;
    BSON_APPEND_DOCUMENT_BEGIN(ret, "x", &d);
    if (bson_iter_init_find(&it, args, "0"))
        bson_append_iter(&d, "got", -1, &it);
    bson_append_document_end(ret, &d);
    return 0;
}

static int host_fail(void *arg, const bson_t *args, bson_t *ret, md_error *err)
{
    return md_error_set(err, MD_EINVAL, 9, "host said no");
}

static int host_nothing(void *arg, const bson_t *args, bson_t *ret, md_error *err)
{
    return 0;
}

Test(js, host_functions_take_and_return_bson)
{
    js_ctx *c = ctx(0, 0, 0);
    host_log l = {0};
    md_error err;
    cr_assert_eq(js_ctx_add_host(c, "add", host_add, &l, &err), 0, "%s", err.message);
    cr_assert_eq(js_ctx_add_host(c, "echo", host_echo, NULL, &err), 0, "%s", err.message);
    cr_assert_eq(js_ctx_add_host(c, "fail", host_fail, NULL, &err), 0, "%s", err.message);
    cr_assert_eq(js_ctx_add_host(c, "nothing", host_nothing, NULL, &err), 0, "%s", err.message);
    bson_t out = BSON_INITIALIZER;
    cr_assert_eq(call(c, "function () { return add(2, 3.5) * 2; }", NULL, NULL, &out, &err), 0,
                 "%s", err.message);
    bson_iter_t it;
    cr_assert(bson_iter_init_find(&it, &out, "r"));
    cr_assert_float_eq(bson_iter_double(&it), 11.0, 1e-9);
    cr_assert_eq(l.calls, 1);
    cr_assert(strstr(l.last, "\"0\" : { \"$numberDouble\" : \"2.0\" }"), "%s", l.last);

    /* the BSON types go through whole, both ways, in field order */
    bson_reinit(&out);
    cr_assert_eq(call(c,
                      "function () { return echo({b: NumberLong('9007199254740993'),"
                      " a: ObjectId('5f1d7c3e9b1e8a2b3c4d5e6f'), d: new Date(5), r: /x/i}); }",
                      NULL, NULL, &out, &err),
                 0, "%s", err.message);
    char *j = bson_as_canonical_extended_json(&out, NULL);
    cr_assert_str_eq(j, "{ \"r\" : { \"got\" : { \"b\" : { \"$numberLong\" : \"9007199254740993\" }, "
                        "\"a\" : { \"$oid\" : \"5f1d7c3e9b1e8a2b3c4d5e6f\" }, "
                        "\"d\" : { \"$date\" : { \"$numberLong\" : \"5\" } }, "
                        "\"r\" : { \"$regularExpression\" : { \"pattern\" : \"x\", "
                        "\"options\" : \"i\" } } } } }");
    bson_free(j);

    /* an error is a JavaScript Error the script can catch, with its code */
    bson_reinit(&out);
    cr_assert_eq(call(c, "function () { try { fail(); } catch (e) { return [e.message, e.code]; } }",
                      NULL, NULL, &out, &err),
                 0, "%s", err.message);
    j = bson_as_canonical_extended_json(&out, NULL);
    cr_assert(strstr(j, "\"host said no\", { \"$numberInt\" : \"9\" }") ||
                  strstr(j, "\"host said no\", { \"$numberDouble\" : \"9.0\" }"),
              "%s", j);
    bson_free(j);
    /* uncaught, it fails the call (139) with the message */
    expect_error(c, "function () { fail(); }", NULL, JS_CODE_INTERPRETER_FAILURE,
                 "host said no");
    /* no value: undefined */
    bson_reinit(&out);
    cr_assert_eq(call(c, "function () { return nothing() === undefined; }", NULL, NULL, &out,
                      &err),
                 0, "%s", err.message);
    cr_assert(bson_iter_init_find(&it, &out, "r") && bson_iter_bool(&it));
    /* arguments that cannot be converted (a cycle) throw before the host runs */
    int before = l.calls;
    expect_error(c, "function () { var o = {}; o.o = o; add(o, 1); }", NULL,
                 JS_CODE_INTERPRETER_FAILURE, NULL);
    cr_assert_eq(l.calls, before);
    bson_destroy(&out);
    js_ctx_destroy(c);
}

Test(js, int32_numbers_writes_integral_numbers_as_int32)
{
    js_opts o = {0, 0, 0, true};
    js_ctx *c;
    md_error err;
    cr_assert_eq(js_ctx_new(&o, &c, &err), 0, "%s", err.message);
    bson_t out = BSON_INITIALIZER;
    cr_assert_eq(call(c, "function () { return {a: 1, b: 1.5, c: -0, d: 3000000000, e: -7}; }",
                      NULL, NULL, &out, &err),
                 0, "%s", err.message);
    bson_t *w = J("{\"r\": {\"a\": 1, \"b\": 1.5, \"c\": {\"$numberDouble\": \"-0.0\"},"
                  " \"d\": 3000000000.0, \"e\": -7}}");
    char *got = bson_as_canonical_extended_json(&out, NULL);
    char *exp = bson_as_canonical_extended_json(w, NULL);
    cr_assert_str_eq(got, exp);
    bson_free(got);
    bson_free(exp);
    bson_destroy(w);
    bson_destroy(&out);
    js_ctx_destroy(c);
}
