/*
 * js_duk_int.h -- private to js/: the Duktape context behind js.h, shared by
 * js_duk.c (heap, allocator, time limits, calls, the environment) and
 * js_duk_conv.c (BSON <-> JavaScript values).
 *
 * The class prototypes (JS_SLOT_*) and the defined functions are kept as
 * heap pointers (duk_push_heapptr works in any call frame), referenced from
 * the heap stash so that they are never collected.
 */
#ifndef JS_DUK_INT_H
#define JS_DUK_INT_H

#include <duktape.h>
#include <setjmp.h>
#include <signal.h>
#include <pthread.h>
#include <time.h>

#include "js.h"

enum {
    JS_SLOT_LONG,    /* NumberLong.prototype */
    JS_SLOT_INT,     /* NumberInt.prototype */
    JS_SLOT_DEC,     /* NumberDecimal.prototype */
    JS_SLOT_OID,     /* ObjectId.prototype */
    JS_SLOT_BIN,     /* BinData.prototype */
    JS_SLOT_TS,      /* Timestamp.prototype */
    JS_SLOT_CODE,    /* Code.prototype */
    JS_SLOT_DBPTR,   /* DBPointer.prototype */
    JS_SLOT_BSONRE,  /* BSONRegExp.prototype */
    JS_SLOT_MINKEY,  /* the MinKey object */
    JS_SLOT_MAXKEY,  /* the MaxKey object */
    JS_SLOT_DATE,    /* the Date constructor */
    JS_SLOT_REGEXP,  /* the RegExp constructor */
    JS_NSLOTS
};

/* A growable byte buffer owned by the context: conversions write BSON into
 * it, so that an error thrown half-way (a longjmp) leaks nothing. */
typedef struct js_wbuf {
    uint8_t *p;
    size_t len, cap;
} js_wbuf;

struct js_ctx {
    duk_context *duk;
    struct js_blk *blocks; /* every live allocation of the heap */
    size_t mem_used, mem_limit;
    /* time limits, in CLOCK_MONOTONIC nanoseconds (0: none) */
    int64_t deadline_ns, call_limit_ns;
    volatile int64_t call_start_ns;
    volatile sig_atomic_t in_js;        /* inside the engine (signal may abandon) */
    volatile sig_atomic_t native_depth; /* inside a callback of ours */
    volatile sig_atomic_t expired;      /* a limit passed */
    volatile sig_atomic_t armed;        /* the timer ticks */
    volatile int64_t last_end_ns;       /* when the last call ended */
    sigjmp_buf jb;
    bool dead;                          /* heap abandoned */
    bool timer_ok;
    timer_t timer;
    pthread_t owner;
    void *slot[JS_NSLOTS];
    void **fns; /* js_func_new's functions */
    int nfn, fcap;
    char errmsg[900]; /* a JavaScript error's text */
    js_emit_fn emit;
    void *emit_arg;
    md_error emit_err; /* the error an emit callback returned */
    bool emit_failed;
    char fatal[256];   /* a fatal engine error's message */
    js_wbuf out, ebuf; /* results; emit's {k, v} */
    js_wbuf hbuf;      /* a host function's arguments */
    struct js_host *hosts; /* js_ctx_add_host's functions */
    int nhost, hcap;
    bool int32_numbers; /* js_opts.int32_numbers */
};

/* js_duk_conv.c */
/* Push the JavaScript value of BSON value it. */
void js_push_bson_value(js_ctx *c, const bson_iter_t *it);
/* Push a document (array: as an array) as a JavaScript object. */
void js_push_bson_doc(js_ctx *c, const bson_t *doc, bool array);
/* Write {"": value at idx} as BSON into w (reset first); throws a JS error
 * on values that cannot be converted (cycles, depth, size). */
void js_to_bson1(js_ctx *c, duk_idx_t idx, js_wbuf *w);
/* Write {k: value at kidx, v: value at vidx} into w. */
void js_to_bson2(js_ctx *c, duk_idx_t kidx, duk_idx_t vidx, js_wbuf *w);
/* The natives of the environment (NumberLong checks, ObjectId, ...) on
 * the object at the top of the stack. */
void js_conv_natives(duk_context *d);
/* Tag the classes' prototypes (once the slots are filled). */
void js_conv_tag(js_ctx *c);

#endif /* JS_DUK_INT_H */
