/*
 * js_duk.c -- js.h on Duktape 2.7 (Debian's duktape-dev): the heap, its
 * allocator and memory limit, the time limits, function definition and
 * calls, host functions, and MongoDB's environment (the classes are
 * written in JavaScript below, over the natives of js_duk_conv.c).
 *
 * Why Duktape and not MuJS (both are ES5 engines in Debian 12): neither
 * package is built with an interrupt hook (duktape's
 * DUK_USE_EXEC_TIMEOUT_CHECK / DUK_USE_INTERRUPT_COUNTER are off in its
 * duk_config.h, MuJS has none), so the time limit is enforced the same way
 * on either (see js.h: a timer signal that abandons the heap only while the
 * thread executes the engine's own code).  What decided is the call depth:
 * Duktape runs JavaScript-to-JavaScript calls without C recursion and stops
 * unbounded recursion at 10,000 frames with a RangeError, while Debian's
 * MuJS recurses in C and fails at 49 nested calls ("stack overflow"), too
 * shallow for a recursive finalize or $where.  Duktape also gives an
 * allocator with a user pointer (so a heap can be capped and thrown away
 * whole) and clearer messages ("TypeError: cannot read property 'y' of
 * null").
 *
 * Time-limit protocol (js_run):
 *
 *   call_start = now; in_js = 1          the tick may now abandon the call
 *   duk_safe_call(...)                   engine, our conversions, natives
 *   in_js = 0
 *
 *   The timer ticks from the first call until the context has been idle
 *   for three ticks (then the tick disarms itself; the next call re-arms).
 *
 *   tick (every JS_TICK_MS, on the owning thread): if a limit passed, set
 *   expired; if also in_js, native_depth == 0 and the interrupted PC lies
 *   in libduktape's text, siglongjmp back to js_run, which frees every
 *   block of the heap and marks the context dead.  Anywhere else (libc,
 *   malloc, our emit callback) the tick only waits for the next one.
 */

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "js_duk_int.h"

#define JS_SIGNAL (SIGRTMIN + 5)

/* ---- the allocator: every block on a list, so a heap can be dropped whole ----- */

typedef struct js_blk {
    struct js_blk *prev, *next;
    size_t size, pad; /* pad: 32-byte header keeps 16-byte alignment */
} js_blk;

static void blk_link(js_ctx *c, js_blk *b)
{
    b->prev = NULL;
    b->next = c->blocks;
    if (c->blocks)
        c->blocks->prev = b;
    c->blocks = b;
}

static void blk_unlink(js_ctx *c, js_blk *b)
{
    if (b->prev)
        b->prev->next = b->next;
    else
        c->blocks = b->next;
    if (b->next)
        b->next->prev = b->prev;
}

static void *js_alloc(void *u, duk_size_t n)
{
    js_ctx *c = u;
    if (c->mem_used + n > c->mem_limit)
        return NULL;
    js_blk *b = malloc(sizeof *b + n);
    if (!b)
        return NULL;
    b->size = n;
    blk_link(c, b);
    c->mem_used += n;
    return b + 1;
}

static void js_free(void *u, void *p)
{
    js_ctx *c = u;
    if (!p)
        return;
    js_blk *b = (js_blk *)p - 1;
    blk_unlink(c, b);
    c->mem_used -= b->size;
    free(b);
}

static void *js_realloc(void *u, void *p, duk_size_t n)
{
    js_ctx *c = u;
    if (!p)
        return js_alloc(u, n);
    if (n == 0) {
        js_free(u, p);
        return NULL;
    }
    js_blk *b = (js_blk *)p - 1;
    size_t old = b->size;
    if (n > old && c->mem_used + (n - old) > c->mem_limit)
        return NULL;
    blk_unlink(c, b);
    js_blk *nb = realloc(b, sizeof *nb + n);
    if (!nb) {
        blk_link(c, b);
        return NULL;
    }
    nb->size = n;
    blk_link(c, nb);
    c->mem_used = c->mem_used - old + n;
    return nb + 1;
}

/* Throw the heap away without running anything in it. */
static void heap_drop(js_ctx *c)
{
    js_blk *b = c->blocks;
    while (b) {
        js_blk *next = b->next;
        free(b);
        b = next;
    }
    c->blocks = NULL;
    c->mem_used = 0;
    c->duk = NULL;
}

/* ---- time limits -------------------------------------------------------------------- */

static uintptr_t eng_lo, eng_hi; /* libduktape's executable segment */
static pthread_once_t sig_once = PTHREAD_ONCE_INIT;

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int find_engine(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    if (!info->dlpi_name || !strstr(info->dlpi_name, "libduktape"))
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            eng_lo = info->dlpi_addr + ph->p_vaddr;
            eng_hi = eng_lo + ph->p_memsz;
            return 1;
        }
    }
    return 0;
}

static bool pc_in_engine(void *ucv)
{
    ucontext_t *uc = ucv;
    uintptr_t pc;
#if defined(__x86_64__)
    pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
    pc = (uintptr_t)uc->uc_mcontext.pc;
#elif defined(__i386__)
    pc = (uintptr_t)uc->uc_mcontext.gregs[REG_EIP];
#else
    (void)uc;
    return false; /* unknown architecture: a runaway call is never abandoned */
#endif
    return pc >= eng_lo && pc < eng_hi;
}

static void on_tick(int sig, siginfo_t *si, void *ucv)
{
    (void)sig;
    if (si->si_code != SI_TIMER || !si->si_value.sival_ptr)
        return;
    js_ctx *c = si->si_value.sival_ptr;
    int saved = errno;
    int64_t now = mono_ns();
    bool over = (c->deadline_ns && now >= c->deadline_ns) ||
                (c->in_js && now - c->call_start_ns >= c->call_limit_ns);
    if (over) {
        c->expired = 1;
        if (c->in_js && !c->native_depth && pc_in_engine(ucv)) {
            c->in_js = 0;
            errno = saved;
            siglongjmp(c->jb, 1);
        }
    }
    if (!c->in_js && now - c->last_end_ns > 3 * JS_TICK_MS * 1000000LL) {
        /* idle (a cursor waiting for its getMore): stop ticking, so that
         * the thread's own system calls are left alone; js_run re-arms */
        struct itimerspec off;
        memset(&off, 0, sizeof off);
        c->armed = 0;
        timer_settime(c->timer, 0, &off, NULL);
    }
    errno = saved;
}

static void sig_setup(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_tick;
    sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(JS_SIGNAL, &sa, NULL);
    dl_iterate_phdr(find_engine, NULL);
}

/* A timer ticking on the calling thread. */
static int timer_bind(js_ctx *c)
{
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = JS_SIGNAL;
    sev.sigev_value.sival_ptr = c;
    sev._sigev_un._tid = gettid();
    if (timer_create(CLOCK_MONOTONIC, &sev, &c->timer) != 0)
        return -1;
    c->timer_ok = true;
    c->armed = 0;
    c->owner = pthread_self();
    return 0;
}

/* Start ticking (in_js is already set: the tick cannot disarm it now). */
static void timer_arm(js_ctx *c)
{
    struct itimerspec its;
    memset(&its, 0, sizeof its);
    its.it_value.tv_nsec = its.it_interval.tv_nsec = JS_TICK_MS * 1000000L;
    c->armed = 1;
    timer_settime(c->timer, 0, &its, NULL);
}

static void timer_unbind(js_ctx *c)
{
    if (c->timer_ok)
        timer_delete(c->timer);
    c->timer_ok = false;
}

int js_err_time_limit(md_error *err)
{
    return md_error_set(err, MD_ERROR, JS_CODE_TIME_LIMIT, "operation exceeded time limit");
}

bool js_ctx_expired(js_ctx *c)
{
    if (!c->expired && c->deadline_ns && mono_ns() >= c->deadline_ns)
        c->expired = 1;
    return c->expired || c->dead;
}

/* The fatal handler: only reachable inside js_run (every entry is a
 * protected call), where it abandons the heap like a time limit. */
static void on_fatal(void *u, const char *msg)
{
    js_ctx *c = u;
    snprintf(c->fatal, sizeof c->fatal, "%s", msg ? msg : "fatal error");
    if (c->in_js) {
        c->in_js = 0;
        siglongjmp(c->jb, 2);
    }
    abort();
}

/* Text of the error at the top of the stack ("TypeError: ...": syntax
 * errors carry their line; a runtime error's lineNumber is left out, since
 * for errors thrown by natives it is a line of the C source). */
static void error_text(js_ctx *c)
{
    snprintf(c->errmsg, sizeof c->errmsg, "%s", duk_safe_to_string(c->duk, -1));
}

/*
 * Run fn(d, u) protected, under the time limits.  0, or MD_ERROR with err:
 * 139 and the engine's message, 50 when a limit passed, or the error an
 * emit callback returned.
 */
static int js_run(js_ctx *c, duk_safe_call_function fn, void *u, md_error *err)
{
    if (c->dead)
        return c->fatal[0] ? md_error_set(err, MD_ERROR, JS_CODE_INTERPRETER_FAILURE,
                                          "JavaScript engine failed: %s", c->fatal)
                           : js_err_time_limit(err);
    if (!c->timer_ok || !pthread_equal(c->owner, pthread_self())) {
        timer_unbind(c);
        if (timer_bind(c) != 0)
            return md_error_set(err, MD_ERROR, JS_CODE_INTERPRETER_FAILURE,
                                "cannot start the JavaScript time limit: %s", strerror(errno));
    }
    if (js_ctx_expired(c))
        return js_err_time_limit(err);
    c->emit_failed = false;
    c->errmsg[0] = 0;
    c->native_depth = 0;
    c->call_start_ns = mono_ns();
    if (sigsetjmp(c->jb, 0)) {
        c->in_js = 0;
        c->last_end_ns = mono_ns();
        c->native_depth = 0;
        heap_drop(c);
        c->dead = true;
        return c->fatal[0] ? md_error_set(err, MD_ERROR, JS_CODE_INTERPRETER_FAILURE,
                                          "JavaScript engine failed: %s", c->fatal)
                           : js_err_time_limit(err);
    }
    c->in_js = 1;
    if (!c->armed)
        timer_arm(c);
    duk_int_t rc = duk_safe_call(c->duk, fn, u, 0, 1);
    if (rc != DUK_EXEC_SUCCESS && !c->emit_failed && !c->errmsg[0])
        error_text(c);
    c->in_js = 0;
    c->last_end_ns = mono_ns();
    duk_pop(c->duk);
    if (rc == DUK_EXEC_SUCCESS && !c->errmsg[0])
        return 0;
    if (c->emit_failed) {
        if (err)
            *err = c->emit_err;
        return MD_ERROR;
    }
    return md_error_set(err, MD_ERROR, JS_CODE_INTERPRETER_FAILURE, "%s", c->errmsg);
}

/* ---- the environment ------------------------------------------------------------------ */

static const char js_env[] =
    "(function (g, N) {\n"
    "function def(o, k, v) { Object.defineProperty(o, k, {value: v, enumerable: false,"
    " writable: true, configurable: true}); }\n"
    "function NumberLong(v) { if (!(this instanceof NumberLong)) return new NumberLong(v);"
    " N.initLong(this, v); }\n"
    "def(NumberLong.prototype, 'valueOf', function () { return Number(N.hidden(this, 'v')); });\n"
    "def(NumberLong.prototype, 'toNumber', function () { return Number(N.hidden(this, 'v')); });\n"
    "def(NumberLong.prototype, 'toString', function () { var s = N.hidden(this, 'v');"
    " return Math.abs(Number(s)) <= 9007199254740991 ? 'NumberLong(' + s + ')'"
    " : 'NumberLong(\"' + s + '\")'; });\n"
    "def(NumberLong.prototype, 'tojson', function () { return this.toString(); });\n"
    "function NumberInt(v) { if (!(this instanceof NumberInt)) return new NumberInt(v);"
    " N.initInt(this, v); }\n"
    "def(NumberInt.prototype, 'valueOf', function () { return N.hidden(this, 'v'); });\n"
    "def(NumberInt.prototype, 'toNumber', function () { return N.hidden(this, 'v'); });\n"
    "def(NumberInt.prototype, 'toString', function () { return 'NumberInt(' +"
    " N.hidden(this, 'v') + ')'; });\n"
    "def(NumberInt.prototype, 'tojson', function () { return this.toString(); });\n"
    "function NumberDecimal(v) { if (!(this instanceof NumberDecimal))"
    " return new NumberDecimal(v); N.initDec(this, v); }\n"
    "def(NumberDecimal.prototype, 'valueOf', function () { return Number(N.hidden(this, 'v')); });\n"
    "def(NumberDecimal.prototype, 'toString', function () { return 'NumberDecimal(\"' +"
    " N.hidden(this, 'v') + '\")'; });\n"
    "def(NumberDecimal.prototype, 'tojson', function () { return this.toString(); });\n"
    "function ObjectId(h) { if (!(this instanceof ObjectId)) return new ObjectId(h);"
    " this.str = N.oid(h); }\n"
    "def(ObjectId.prototype, 'toString', function () { return 'ObjectId(\"' + this.str + '\")'; });\n"
    "def(ObjectId.prototype, 'tojson', function () { return this.toString(); });\n"
    "def(ObjectId.prototype, 'valueOf', function () { return this.str; });\n"
    "def(ObjectId.prototype, 'getTimestamp', function () {"
    " return new Date(parseInt(this.str.substr(0, 8), 16) * 1000); });\n"
    "def(ObjectId.prototype, 'equals', function (o) { return o instanceof ObjectId &&"
    " o.str === this.str; });\n"
    "function BinData(t, b) { if (!(this instanceof BinData)) return new BinData(t, b);"
    " N.initBin(this, t, b); }\n"
    "def(BinData.prototype, 'base64', function () { return N.hidden(this, 'b'); });\n"
    "def(BinData.prototype, 'subtype', function () { return N.hidden(this, 's'); });\n"
    "def(BinData.prototype, 'length', function () { var s = N.hidden(this, 'b');"
    " return s.length / 4 * 3 - (s.charAt(s.length - 1) == '=' ? 1 : 0) -"
    " (s.charAt(s.length - 2) == '=' ? 1 : 0); });\n"
    "def(BinData.prototype, 'toString', function () { return 'BinData(' + N.hidden(this, 's') +"
    " ',\"' + N.hidden(this, 'b') + '\")'; });\n"
    "def(BinData.prototype, 'tojson', function () { return this.toString(); });\n"
    "function Timestamp(t, i) { if (!(this instanceof Timestamp)) return new Timestamp(t, i);"
    " this.t = t || 0; this.i = i || 0; }\n"
    "def(Timestamp.prototype, 'toString', function () { return 'Timestamp(' + this.t + ', ' +"
    " this.i + ')'; });\n"
    "def(Timestamp.prototype, 'tojson', function () { return this.toString(); });\n"
    "function Code(code, scope) { if (!(this instanceof Code)) return new Code(code, scope);"
    " this.code = String(code); if (scope !== undefined) this.scope = scope; }\n"
    "def(Code.prototype, 'toString', function () { return this.code; });\n"
    "function DBPointer(ns, id) { if (!(this instanceof DBPointer)) return new DBPointer(ns, id);"
    " this.ns = ns; this.id = id; }\n"
    "def(DBPointer.prototype, 'tojson', function () { return 'DBPointer(\"' + this.ns + '\", ' +"
    " tojson(this.id) + ')'; });\n"
    "function BSONRegExp(p, f) { if (!(this instanceof BSONRegExp)) return new BSONRegExp(p, f);"
    " this.pattern = String(p); this.flags = f ? String(f) : ''; }\n"
    "def(BSONRegExp.prototype, 'toString', function () { return '/' + this.pattern + '/' +"
    " this.flags; });\n"
    "function MinKeyT() {} function MaxKeyT() {}\n"
    "def(MinKeyT.prototype, 'tojson', function () { return '{ \"$minKey\" : 1 }'; });\n"
    "def(MaxKeyT.prototype, 'tojson', function () { return '{ \"$maxKey\" : 1 }'; });\n"
    "var MinKey = new MinKeyT(), MaxKey = new MaxKeyT();\n"
    "def(Date.prototype, 'tojson', function () { return isNaN(this.getTime()) ?"
    " 'ISODate(\"Invalid Date\")' : 'ISODate(\"' + this.toISOString() + '\")'; });\n"
    "function ISODate(s) {\n"
    "  if (s === undefined) return new Date();\n"
    "  var m = /^(\\d{4})-?(\\d{2})-?(\\d{2})(?:[T ](\\d{2}):?(\\d{2})(?::?(\\d{2})"
    "(?:\\.(\\d+))?)?)?(Z|[+-]\\d{2}:?\\d{2})?$/.exec(String(s));\n"
    "  if (!m) throw new Error('invalid ISO date: ' + s);\n"
    "  var ms = Date.UTC(+m[1], +m[2] - 1, +m[3], +(m[4] || 0), +(m[5] || 0), +(m[6] || 0),"
    " m[7] ? +((m[7] + '00').substr(0, 3)) : 0);\n"
    "  if (m[8] && m[8] != 'Z') { var sg = m[8].charAt(0) == '-' ? -1 : 1;"
    " ms -= sg * (+m[8].substr(1, 2) * 60 + +m[8].substr(m[8].length - 2)) * 60000; }\n"
    "  return new Date(ms);\n"
    "}\n"
    "Array.sum = function (arr) { if (arr.length == 0) return null; var s = arr[0];"
    " for (var i = 1; i < arr.length; i++) s += arr[i]; return s; };\n"
    "Array.avg = function (arr) { if (arr.length == 0) return null;"
    " return Array.sum(arr) / arr.length; };\n"
    "function tojson(x) {\n"
    "  if (x === undefined) return 'undefined'; if (x === null) return 'null';\n"
    "  var t = typeof x;\n"
    "  if (t === 'string') return JSON.stringify(x);\n"
    "  if (t !== 'object') return String(x);\n"
    "  if (typeof x.tojson === 'function') return x.tojson();\n"
    "  if (x instanceof RegExp) return String(x);\n"
    "  var p = [];\n"
    "  if (Array.isArray(x)) { for (var i = 0; i < x.length; i++) p.push(tojson(x[i]));"
    " return p.length ? '[ ' + p.join(', ') + ' ]' : '[ ]'; }\n"
    "  for (var k in x) if (Object.prototype.hasOwnProperty.call(x, k))"
    " p.push(JSON.stringify(k) + ' : ' + tojson(x[k]));\n"
    "  return p.length ? '{ ' + p.join(', ') + ' }' : '{ }';\n"
    "}\n"
    "function print() {}\n"
    "function printjson(x) { print(tojson(x)); }\n"
    "g.NumberLong = NumberLong; g.NumberInt = NumberInt; g.NumberDecimal = NumberDecimal;\n"
    "g.ObjectId = ObjectId; g.BinData = BinData; g.Timestamp = Timestamp; g.Code = Code;\n"
    "g.DBPointer = DBPointer; g.BSONRegExp = BSONRegExp; g.MinKey = MinKey; g.MaxKey = MaxKey;\n"
    "g.ISODate = ISODate; g.tojson = tojson; g.print = print; g.printjson = printjson;\n"
    "return [NumberLong.prototype, NumberInt.prototype, NumberDecimal.prototype,"
    " ObjectId.prototype, BinData.prototype, Timestamp.prototype, Code.prototype,"
    " DBPointer.prototype, BSONRegExp.prototype, MinKey, MaxKey, Date, RegExp];\n"
    "})";

static duk_ret_t n_emit(duk_context *d)
{
    duk_memory_functions mf;
    duk_get_memory_functions(d, &mf);
    js_ctx *c = mf.udata;
    if (duk_get_top(d) != 2)
        return duk_error(d, DUK_ERR_ERROR, "emit takes 2 args");
    if (!c->emit)
        return duk_error(d, DUK_ERR_ERROR, "emit is only available in a map function");
    js_to_bson2(c, 0, 1, &c->ebuf);
    bson_t kv;
    if (!bson_init_static(&kv, c->ebuf.p, c->ebuf.len))
        return duk_error(d, DUK_ERR_ERROR, "emit: invalid BSON");
    c->native_depth++;
    int rc = c->emit(c->emit_arg, &kv, &c->emit_err);
    c->native_depth--;
    if (rc) {
        c->emit_failed = true;
        return duk_error(d, DUK_ERR_ERROR, "%s", c->emit_err.message);
    }
    return 0;
}

/* Keep the value at the top referenced from the heap stash (so that its
 * heap pointer stays valid), popping it; returns the pointer. */
static void *keep(duk_context *d)
{
    void *p = duk_get_heapptr(d, -1);
    duk_push_heap_stash(d);
    duk_get_prop_string(d, -1, "keep");
    duk_dup(d, -3);
    duk_put_prop_index(d, -2, (duk_uarridx_t)duk_get_length(d, -2));
    duk_pop_3(d);
    return p;
}

static duk_ret_t env_body(duk_context *d, void *u)
{
    js_ctx *c = u;
    duk_push_heap_stash(d);
    duk_push_array(d);
    duk_put_prop_string(d, -2, "keep");
    duk_pop(d);
    duk_push_global_object(d);
    duk_push_c_function(d, n_emit, DUK_VARARGS);
    duk_put_prop_string(d, -2, "emit");
    duk_pop(d);
    duk_eval_string(d, js_env);
    duk_push_global_object(d);
    duk_push_object(d);
    js_conv_natives(d);
    duk_call(d, 2);
    for (int i = 0; i < JS_NSLOTS; i++) {
        duk_get_prop_index(d, -1, (duk_uarridx_t)i);
        c->slot[i] = keep(d);
    }
    duk_pop(d);
    js_conv_tag(c);
    duk_push_undefined(d);
    return 1;
}

int js_ctx_new(const js_opts *o, js_ctx **out, md_error *err)
{
    pthread_once(&sig_once, sig_setup);
    js_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
    c->mem_limit = o && o->mem_limit ? o->mem_limit : JS_MEM_LIMIT;
    c->int32_numbers = o && o->int32_numbers;
    int64_t call_ms = o && o->call_limit_ms > 0 ? o->call_limit_ms : JS_CALL_LIMIT_MS;
    c->call_limit_ns = call_ms * 1000000;
    if (o && o->time_limit_ms > 0)
        c->deadline_ns = mono_ns() + o->time_limit_ms * 1000000;
    c->duk = duk_create_heap(js_alloc, js_realloc, js_free, c, on_fatal);
    if (!c->duk) {
        heap_drop(c);
        free(c);
        return md_error_set(err, MD_ENOMEM, JS_CODE_INTERPRETER_FAILURE,
                            "cannot create a JavaScript heap");
    }
    int rc = js_run(c, env_body, c, err);
    if (rc) {
        js_ctx_destroy(c);
        return rc;
    }
    *out = c;
    return 0;
}

void js_ctx_destroy(js_ctx *c)
{
    if (!c)
        return;
    timer_unbind(c);
    /* never duk_destroy_heap: it could run finalizers (user code) outside
     * any time limit; the heap holds nothing but memory */
    heap_drop(c);
    free(c->fns);
    free(c->hosts);
    free(c->hbuf.p);
    free(c->out.p);
    free(c->ebuf.p);
    free(c);
}

void js_ctx_set_emit(js_ctx *c, js_emit_fn fn, void *arg)
{
    c->emit = fn;
    c->emit_arg = arg;
}

/* ---- globals, functions, calls ------------------------------------------------------ */

static duk_ret_t globals_body(duk_context *d, void *u)
{
    void **a = u;
    js_ctx *c = a[0];
    const bson_t *vars = a[1];
    bson_iter_t it;
    duk_push_global_object(d);
    if (bson_iter_init(&it, vars))
        while (bson_iter_next(&it)) {
            js_push_bson_value(c, &it);
            duk_put_prop_lstring(d, -2, bson_iter_key(&it), bson_iter_key_len(&it));
        }
    duk_pop(d);
    duk_push_undefined(d);
    return 1;
}

int js_ctx_set_globals(js_ctx *c, const bson_t *vars, md_error *err)
{
    void *a[2] = {c, (void *)vars};
    return js_run(c, globals_body, a, err);
}

typedef struct js_src {
    js_ctx *c;
    const char *src;
    size_t len;
} js_src;

/* Compile "(" src ")" as an eval program and run it: a function value. */
static bool compile_fn(duk_context *d, const char *pre, const char *src, size_t len,
                       const char *post)
{
    duk_push_string(d, pre);
    duk_push_lstring(d, src, len);
    duk_push_string(d, post);
    duk_concat(d, 3);
    duk_push_string(d, "");
    if (duk_pcompile(d, DUK_COMPILE_EVAL) != 0)
        return false;
    if (duk_pcall(d, 0) != 0)
        return false;
    return duk_is_function(d, -1);
}

static duk_ret_t func_body(duk_context *d, void *u)
{
    js_src *s = u;
    js_ctx *c = s->c;
    const char *p = s->src;
    size_t n = s->len;
    while (n && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) {
        p++;
        n--;
    }
    while (n && (p[n - 1] == ' ' || p[n - 1] == '\t' || p[n - 1] == '\n' || p[n - 1] == '\r' ||
                 p[n - 1] == ';'))
        n--;
    bool ok;
    if (n >= 8 && memcmp(p, "function", 8) == 0) {
        ok = compile_fn(d, "(", p, n, "\n)");
    } else {
        /* an expression ("this.a == 1"), else statements with a return */
        ok = compile_fn(d, "(function () { return (", p, n, "\n); })");
        if (!ok) {
            duk_pop(d);
            ok = compile_fn(d, "(function () {", p, n, "\n})");
        }
    }
    if (!ok) {
        if (duk_is_function(d, -1) || !duk_is_error(d, -1))
            return duk_error(d, DUK_ERR_TYPE_ERROR, "the code is not a function");
        return duk_throw(d);
    }
    if (c->nfn == c->fcap) {
        int cap = c->fcap ? 2 * c->fcap : 8;
        void **f = realloc(c->fns, (size_t)cap * sizeof *f);
        if (!f)
            return duk_error(d, DUK_ERR_RANGE_ERROR, "out of memory");
        c->fns = f;
        c->fcap = cap;
    }
    c->fns[c->nfn++] = keep(d);
    duk_push_undefined(d);
    return 1;
}

int js_func_new(js_ctx *c, const char *src, size_t len, int *fn, md_error *err)
{
    js_src s = {c, src, len};
    int rc = js_run(c, func_body, &s, err);
    if (rc == 0)
        *fn = c->nfn - 1;
    return rc;
}

typedef struct js_call {
    js_ctx *c;
    int fn;
    const bson_t *self, *args;
    bool test, truthy;
} js_call;

static duk_ret_t call_body(duk_context *d, void *u)
{
    js_call *k = u;
    js_ctx *c = k->c;
    duk_push_heapptr(d, c->fns[k->fn]);
    if (k->self)
        js_push_bson_doc(c, k->self, false);
    else
        duk_push_undefined(d);
    duk_idx_t n = 0;
    bson_iter_t it;
    if (k->args && bson_iter_init(&it, k->args))
        while (bson_iter_next(&it)) {
            js_push_bson_value(c, &it);
            n++;
        }
    if (duk_pcall_method(d, n) != 0) {
        error_text(c);
        return 1;
    }
    if (k->test)
        k->truthy = duk_to_boolean(d, -1);
    else
        js_to_bson1(c, -1, &c->out);
    return 1;
}

int js_func_call(js_ctx *c, int fn, const bson_t *this_doc, const bson_t *args, bson_t *out,
                 const char *key, md_error *err)
{
    if (fn < 0 || fn >= c->nfn)
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE, "no such JavaScript function");
    js_call k = {c, fn, this_doc, args, false, false};
    int rc = js_run(c, call_body, &k, err);
    if (rc || !out)
        return rc;
    bson_t r;
    bson_iter_t it;
    if (!bson_init_static(&r, c->out.p, c->out.len) || !bson_iter_init(&it, &r) ||
        !bson_iter_next(&it))
        return md_error_set(err, MD_ERROR, JS_CODE_INTERPRETER_FAILURE,
                            "JavaScript result could not be converted");
    bson_append_iter(out, key, -1, &it);
    return 0;
}

int js_func_test(js_ctx *c, int fn, const bson_t *this_doc, bool *truthy, md_error *err)
{
    if (fn < 0 || fn >= c->nfn)
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE, "no such JavaScript function");
    js_call k = {c, fn, this_doc, NULL, true, false};
    int rc = js_run(c, call_body, &k, err);
    if (rc == 0)
        *truthy = k.truthy;
    return rc;
}

/* ---- host functions ----------------------------------------------------------------- */

struct js_host {
    js_host_fn fn;
    void *arg;
};

/* The native behind every host function: its index in c->hosts is the
 * function's magic.  Arguments go to BSON through c->hbuf (an error thrown
 * by the conversion leaks nothing); the result comes back in a libbson
 * document that is destroyed before anything can throw. */
static duk_ret_t n_host(duk_context *d)
{
    duk_memory_functions mf;
    duk_get_memory_functions(d, &mf);
    js_ctx *c = mf.udata;
    int h = duk_get_current_magic(d);
    duk_idx_t n = duk_get_top(d);
    duk_push_array(d);
    for (duk_idx_t i = 0; i < n; i++) {
        duk_dup(d, i);
        duk_put_prop_index(d, -2, (duk_uarridx_t)i);
    }
    js_to_bson1(c, -1, &c->hbuf);
    duk_pop(d);
    bson_t wrap, args;
    bson_iter_t it;
    const uint8_t *data;
    uint32_t len;
    if (!bson_init_static(&wrap, c->hbuf.p, c->hbuf.len) || !bson_iter_init(&it, &wrap) ||
        !bson_iter_next(&it) || !BSON_ITER_HOLDS_ARRAY(&it))
        return duk_error(d, DUK_ERR_ERROR, "host function: arguments not convertible");
    bson_iter_array(&it, &len, &data);
    if (!bson_init_static(&args, data, len))
        return duk_error(d, DUK_ERR_ERROR, "host function: arguments not convertible");
    bson_t ret;
    md_error err;
    md_error_clear(&err);
    bson_init(&ret);
    c->native_depth++;
    int rc = c->hosts[h].fn(c->hosts[h].arg, &args, &ret, &err);
    c->native_depth--;
    if (rc) {
        bson_destroy(&ret);
        duk_push_error_object(d, DUK_ERR_ERROR, "%s", err.message[0] ? err.message : "host error");
        duk_push_int(d, err.code);
        duk_put_prop_string(d, -2, "code");
        return duk_throw(d);
    }
    /* the value is pushed from a copy in hbuf, so that the libbson
     * document is gone before a conversion could throw */
    bool has = bson_iter_init(&it, &ret) && bson_iter_next(&it);
    if (has) {
        c->hbuf.len = 0;
        size_t need = ret.len;
        if (need > c->hbuf.cap) {
            uint8_t *p = realloc(c->hbuf.p, need);
            if (!p) {
                bson_destroy(&ret);
                return duk_error(d, DUK_ERR_RANGE_ERROR, "out of memory");
            }
            c->hbuf.p = p;
            c->hbuf.cap = need;
        }
        memcpy(c->hbuf.p, bson_get_data(&ret), ret.len);
        c->hbuf.len = ret.len;
    }
    bson_destroy(&ret);
    if (!has)
        return 0;
    if (!bson_init_static(&wrap, c->hbuf.p, c->hbuf.len) || !bson_iter_init(&it, &wrap) ||
        !bson_iter_next(&it))
        return duk_error(d, DUK_ERR_ERROR, "host function: result not convertible");
    js_push_bson_value(c, &it);
    return 1;
}

typedef struct js_host_def {
    js_ctx *c;
    const char *name;
    int index;
} js_host_def;

static duk_ret_t host_body(duk_context *d, void *u)
{
    js_host_def *h = u;
    duk_push_global_object(d);
    duk_push_c_function(d, n_host, DUK_VARARGS);
    duk_set_magic(d, -1, h->index);
    duk_put_prop_string(d, -2, h->name);
    duk_pop(d);
    duk_push_undefined(d);
    return 1;
}

int js_ctx_add_host(js_ctx *c, const char *name, js_host_fn fn, void *arg, md_error *err)
{
    if (c->nhost >= 32767)
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE, "too many host functions");
    if (c->nhost == c->hcap) {
        int cap = c->hcap ? 2 * c->hcap : 8;
        struct js_host *hs = realloc(c->hosts, (size_t)cap * sizeof *hs);
        if (!hs)
            return md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
        c->hosts = hs;
        c->hcap = cap;
    }
    c->hosts[c->nhost].fn = fn;
    c->hosts[c->nhost].arg = arg;
    js_host_def h = {c, name, c->nhost};
    int rc = js_run(c, host_body, &h, err);
    if (rc == 0)
        c->nhost++;
    return rc;
}
