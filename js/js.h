/*
 * js.h -- the embedded JavaScript engine behind mapReduce, $where and the
 * shell (tools/shell*.c): the only header the rest of minidoc includes
 * (query/ and the shell use it; nothing else sees the engine's own API, so
 * another ES5 engine can replace js/js_duk.c behind it).
 *
 * A context (js_ctx) is one JavaScript heap with MongoDB's environment:
 * emit, Array.sum, Array.avg, NumberLong, NumberInt, NumberDecimal,
 * ObjectId, ISODate, BinData, Timestamp, MinKey, MaxKey, tojson, printjson
 * (ES5 gives Array.prototype.forEach and Date).  Functions are defined from
 * source text and called with BSON arguments; results come back as BSON.
 * BSON maps to JavaScript and back without loss:
 *
 *   BSON                      JavaScript
 *   double                    number
 *   int32                     number; written back as int32 when it is a
 *                             field of an object that came from BSON whose
 *                             original was int32 and it is still integral
 *                             (MongoDB's ValueWriter rule), else double
 *   int64                     NumberLong (floatApprox; exact value kept)
 *   decimal128                NumberDecimal (the exact string)
 *   string / bool / null      string / boolean / null
 *   undefined                 undefined
 *   date                      Date
 *   ObjectId                  ObjectId (str)
 *   document / array          object / array (field order kept)
 *   binary                    BinData (subtype, base64)
 *   regex                     RegExp (original pattern and flags kept), or
 *                             BSONRegExp when ES5 cannot compile it
 *   timestamp                 Timestamp (t, i)
 *   MinKey / MaxKey           MinKey / MaxKey
 *   code, symbol, dbPointer   Code / string / DBPointer
 *   (a JS function)           code
 *
 * Host functions (js_ctx_add_host): a program gives JavaScript a named
 * global function implemented in C, which receives its arguments as BSON
 * and returns one BSON value; the shell (tools/shell*.c) builds its db
 * object on such functions.
 *
 * Errors: a JavaScript error (syntax, throw, a TypeError, out of memory, the
 * call stack limit) is JSInterpreterFailure (139) with the engine's message;
 * a call that runs past its time limit is MaxTimeMSExpired (50).
 *
 * Time limits.  The Debian engines (duktape 2.7, mujs 1.3) are built
 * without an interrupt hook, so the limit is enforced from outside: while a
 * context exists, a POSIX timer sends JS_SIGNAL (SIGRTMIN+5) to the thread
 * that uses it every JS_TICK_MS; when a limit has passed and the thread is
 * executing inside the engine's own code (not in libc, not in a callback of
 * ours), the handler abandons the call with siglongjmp.  The heap is then
 * thrown away whole (every block comes from this module's allocator), never
 * touched again: the context answers every later call with 50.  A context
 * belongs to one thread at a time; calling it from another thread moves the
 * timer there.  The calling thread needs about 1 MB of C stack.
 */
#ifndef JS_H
#define JS_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "minidoc.h"

#define JS_CODE_INTERPRETER_FAILURE 139 /* JSInterpreterFailure */
#define JS_CODE_TIME_LIMIT 50           /* MaxTimeMSExpired */
#define JS_CALL_LIMIT_MS 60000          /* a call's default time limit */
#define JS_MEM_LIMIT (256u << 20)       /* a heap's default size limit */
#define JS_TICK_MS 10

typedef struct js_ctx js_ctx;

typedef struct js_opts {
    int64_t time_limit_ms; /* the whole context, from js_ctx_new; 0: none */
    int64_t call_limit_ms; /* each call; 0: JS_CALL_LIMIT_MS */
    size_t mem_limit;      /* heap bytes; 0: JS_MEM_LIMIT */
    bool int32_numbers;    /* an integral number that fits is written as
                            * int32, not double (mongosh's rule; the
                            * default is MongoDB's server-side one above) */
} js_opts;

/* A new context (o may be NULL: the defaults).  Caller owns *out. */
int js_ctx_new(const js_opts *o, js_ctx **out, md_error *err);
void js_ctx_destroy(js_ctx *c);

/* Define every field of vars as a global variable (mapReduce's scope). */
int js_ctx_set_globals(js_ctx *c, const bson_t *vars, md_error *err);

/*
 * emit(key, value) calls fn with kv = {k: key, v: value} (a view valid
 * during the call).  fn returns 0, or an MD_* code with err filled: the
 * JavaScript call then fails with that error.  Without fn, emit throws.
 */
typedef int (*js_emit_fn)(void *arg, const bson_t *kv, md_error *err);
void js_ctx_set_emit(js_ctx *c, js_emit_fn fn, void *arg);

/*
 * A host function: JavaScript's name(a, b, ...) calls fn with args =
 * [a, b, ...] as a BSON array (a view valid during the call) and an empty
 * document ret.  fn appends at most one value to ret (under any key): it
 * is the JavaScript return value (nothing: undefined).  fn returns 0, or
 * an MD_* code with err filled: the call then throws an Error whose
 * message is err's message and whose `code` is err's code, which the
 * script may catch.  fn runs outside the time limits' reach (as emit
 * does) and must not call back into the context.
 */
typedef int (*js_host_fn)(void *arg, const bson_t *args, bson_t *ret, md_error *err);
/* Define global `name` as host function fn (called with arg). */
int js_ctx_add_host(js_ctx *c, const char *name, js_host_fn fn, void *arg, md_error *err);

/*
 * Define a function from source: "function (...) {...}", or an expression
 * or statements (a $where string), taken as the body of a function of no
 * arguments.  *fn names it in later calls.
 */
int js_func_new(js_ctx *c, const char *src, size_t len, int *fn, md_error *err);

/*
 * Call function fn with `this` bound to this_doc (NULL: the global
 * object) and the values of args as its arguments, in order (NULL: none).
 * The return value is appended to out under `key` (out may be NULL).
 */
int js_func_call(js_ctx *c, int fn, const bson_t *this_doc, const bson_t *args, bson_t *out,
                 const char *key, md_error *err);
/* The same, giving whether the return value is truthy ($where). */
int js_func_test(js_ctx *c, int fn, const bson_t *this_doc, bool *truthy, md_error *err);

/* Has the context's time limit passed (its calls now fail with 50)? */
bool js_ctx_expired(js_ctx *c);
/* MaxTimeMSExpired in MongoDB's words. */
int js_err_time_limit(md_error *err);

#endif /* JS_H */
