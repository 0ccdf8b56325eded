/*
 * js_duk_conv.c -- BSON values to Duktape values and back, without loss
 * (the table in js.h), and the natives the environment's classes use.
 *
 * BSON -> JavaScript pushes values onto the context's stack.  JavaScript ->
 * BSON writes BSON bytes into a buffer the context owns (js_wbuf) instead
 * of building libbson documents: a value may throw half-way (a getter, a
 * cycle, a Date that is not one), and the engine's error is a longjmp that
 * would leak anything allocated on the way; the buffer is simply reset by
 * the next conversion.
 *
 * The classes carry a tag the JavaScript code cannot reach or forge: a
 * hidden symbol ("\xFF" "t", an integer JS_T_*) on their prototypes
 * (MinKey and MaxKey on themselves, Date and RegExp on the built-in
 * prototypes).  Exact values live in hidden symbols of the instances:
 * NumberLong "\xFF" "v" (the decimal string), NumberInt "\xFF" "v"
 * (number), NumberDecimal "\xFF" "v" (string), BinData "\xFF" "s" and
 * "\xFF" "b" (subtype, base64), a RegExp from BSON "\xFF" "p" and
 * "\xFF" "f" (the original pattern and flags), an object from BSON
 * "\xFF" "i32" (the names of its int32 fields).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "js_duk_int.h"

#define HS(x) DUK_HIDDEN_SYMBOL(x)
#define JS_DEPTH_MAX 150
#define JS_BSON_MAX (16 * 1024 * 1024 + 16 * 1024)

enum {
    JS_T_NONE, JS_T_LONG, JS_T_INT, JS_T_DEC, JS_T_OID, JS_T_BIN, JS_T_TS, JS_T_CODE,
    JS_T_DBPTR, JS_T_BSONRE, JS_T_MINKEY, JS_T_MAXKEY, JS_T_DATE, JS_T_REGEXP
};

/* ---- base64 ---------------------------------------------------------------------- */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void push_base64(duk_context *d, const uint8_t *p, uint32_t n)
{
    char *s = duk_push_fixed_buffer(d, ((size_t)n + 2) / 3 * 4 + 1);
    size_t o = 0;
    for (uint32_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
                     (i + 2 < n ? p[i + 2] : 0);
        s[o++] = b64[v >> 18 & 63];
        s[o++] = b64[v >> 12 & 63];
        s[o++] = i + 1 < n ? b64[v >> 6 & 63] : '=';
        s[o++] = i + 2 < n ? b64[v & 63] : '=';
    }
    duk_push_lstring(d, s, o);
    duk_remove(d, -2);
}

static int b64val(char ch)
{
    const char *q = ch ? strchr(b64, ch) : NULL;
    return q ? (int)(q - b64) : -1;
}

/* Decode base64 s into out (room for len*3/4 bytes); -1 when malformed. */
static long base64_decode(const char *s, size_t len, uint8_t *out)
{
    long o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '=') {
            for (size_t j = i; j < len; j++)
                if (s[j] != '=')
                    return -1;
            break;
        }
        int v = b64val(s[i]);
        if (v < 0)
            return -1;
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (uint8_t)(acc >> bits);
        }
    }
    return o;
}

/* ---- BSON -> JavaScript ------------------------------------------------------------ */

static void push_slot(js_ctx *c, int slot)
{
    duk_push_heapptr(c->duk, c->slot[slot]);
}

static void push_instance(js_ctx *c, int slot)
{
    duk_push_object(c->duk);
    push_slot(c, slot);
    duk_set_prototype(c->duk, -2);
}

static void push_oid(js_ctx *c, const bson_oid_t *oid)
{
    char hex[25];
    bson_oid_to_string(oid, hex);
    push_instance(c, JS_SLOT_OID);
    duk_push_string(c->duk, hex);
    duk_put_prop_string(c->duk, -2, "str");
}

static void push_regex(js_ctx *c, const char *pattern, const char *flags)
{
    duk_context *d = c->duk;
    char jsf[3];
    size_t n = 0;
    if (strchr(flags, 'i'))
        jsf[n++] = 'i';
    if (strchr(flags, 'm'))
        jsf[n++] = 'm';
    jsf[n] = 0;
    push_slot(c, JS_SLOT_REGEXP);
    duk_push_string(d, pattern);
    duk_push_string(d, jsf);
    if (duk_pnew(d, 2) != DUK_EXEC_SUCCESS) {
        /* not ES5 syntax (lookbehind, possessive...): kept as a BSONRegExp */
        duk_pop(d);
        push_instance(c, JS_SLOT_BSONRE);
        duk_push_string(d, pattern);
        duk_put_prop_string(d, -2, "pattern");
        duk_push_string(d, flags);
        duk_put_prop_string(d, -2, "flags");
        return;
    }
    duk_push_string(d, pattern);
    duk_put_prop_string(d, -2, HS("p"));
    duk_push_string(d, flags);
    duk_put_prop_string(d, -2, HS("f"));
}

static void push_iter_doc(js_ctx *c, bson_iter_t *it, bool array);

/* A canonical array index ("0", "17"; not "01"), enumerated first by JS. */
static bool index_like(const char *k)
{
    size_t n = strlen(k);
    if (n == 0 || n > 10 || (n > 1 && k[0] == '0'))
        return false;
    for (size_t i = 0; i < n; i++)
        if (k[i] < '0' || k[i] > '9')
            return false;
    return strtoull(k, NULL, 10) < 4294967295ULL;
}

void js_push_bson_value(js_ctx *c, const bson_iter_t *it)
{
    duk_context *d = c->duk;
    duk_require_stack(d, 8);
    switch (bson_iter_type(it)) {
    case BSON_TYPE_DOUBLE: duk_push_number(d, bson_iter_double(it)); break;
    case BSON_TYPE_INT32: duk_push_int(d, bson_iter_int32(it)); break;
    case BSON_TYPE_UTF8: {
        uint32_t len;
        const char *s = bson_iter_utf8(it, &len);
        duk_push_lstring(d, s, len);
        break;
    }
    case BSON_TYPE_SYMBOL: {
        uint32_t len;
        const char *s = bson_iter_symbol(it, &len);
        duk_push_lstring(d, s, len);
        break;
    }
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY: {
        bson_iter_t child;
        if (!bson_iter_recurse(it, &child)) {
            duk_push_null(d);
            break;
        }
        push_iter_doc(c, &child, bson_iter_type(it) == BSON_TYPE_ARRAY);
        break;
    }
    case BSON_TYPE_BINARY: {
        bson_subtype_t st;
        uint32_t len;
        const uint8_t *p;
        bson_iter_binary(it, &st, &len, &p);
        push_instance(c, JS_SLOT_BIN);
        duk_push_int(d, (int)st);
        duk_put_prop_string(d, -2, HS("s"));
        push_base64(d, p, len);
        duk_put_prop_string(d, -2, HS("b"));
        break;
    }
    case BSON_TYPE_UNDEFINED: duk_push_undefined(d); break;
    case BSON_TYPE_OID: push_oid(c, bson_iter_oid(it)); break;
    case BSON_TYPE_BOOL: duk_push_boolean(d, bson_iter_bool(it)); break;
    case BSON_TYPE_DATE_TIME:
        push_slot(c, JS_SLOT_DATE);
        duk_push_number(d, (double)bson_iter_date_time(it));
        duk_new(d, 1);
        break;
    case BSON_TYPE_NULL: duk_push_null(d); break;
    case BSON_TYPE_REGEX: {
        const char *flags;
        const char *pattern = bson_iter_regex(it, &flags);
        push_regex(c, pattern, flags ? flags : "");
        break;
    }
    case BSON_TYPE_DBPOINTER: {
        uint32_t len;
        const char *ns;
        const bson_oid_t *oid;
        bson_iter_dbpointer(it, &len, &ns, &oid);
        push_instance(c, JS_SLOT_DBPTR);
        duk_push_lstring(d, ns, len);
        duk_put_prop_string(d, -2, "ns");
        push_oid(c, oid);
        duk_put_prop_string(d, -2, "id");
        break;
    }
    case BSON_TYPE_CODE:
    case BSON_TYPE_CODEWSCOPE: {
        uint32_t len, slen;
        const uint8_t *scope;
        const char *code = bson_iter_type(it) == BSON_TYPE_CODE
                               ? bson_iter_code(it, &len)
                               : bson_iter_codewscope(it, &len, &slen, &scope);
        push_instance(c, JS_SLOT_CODE);
        duk_push_lstring(d, code, len);
        duk_put_prop_string(d, -2, "code");
        if (bson_iter_type(it) == BSON_TYPE_CODEWSCOPE) {
            bson_t sc;
            if (bson_init_static(&sc, scope, slen)) {
                js_push_bson_doc(c, &sc, false);
                duk_put_prop_string(d, -2, "scope");
            }
        }
        break;
    }
    case BSON_TYPE_TIMESTAMP: {
        uint32_t t, i;
        bson_iter_timestamp(it, &t, &i);
        push_instance(c, JS_SLOT_TS);
        duk_push_number(d, t);
        duk_put_prop_string(d, -2, "t");
        duk_push_number(d, i);
        duk_put_prop_string(d, -2, "i");
        break;
    }
    case BSON_TYPE_INT64: {
        char s[32];
        int64_t v = bson_iter_int64(it);
        snprintf(s, sizeof s, "%lld", (long long)v);
        push_instance(c, JS_SLOT_LONG);
        duk_push_string(d, s);
        duk_put_prop_string(d, -2, HS("v"));
        duk_push_number(d, (double)v);
        duk_put_prop_string(d, -2, "floatApprox");
        break;
    }
    case BSON_TYPE_DECIMAL128: {
        bson_decimal128_t dec;
        char s[BSON_DECIMAL128_STRING];
        bson_iter_decimal128(it, &dec);
        bson_decimal128_to_string(&dec, s);
        push_instance(c, JS_SLOT_DEC);
        duk_push_string(d, s);
        duk_put_prop_string(d, -2, HS("v"));
        break;
    }
    case BSON_TYPE_MINKEY: push_slot(c, JS_SLOT_MINKEY); break;
    case BSON_TYPE_MAXKEY: push_slot(c, JS_SLOT_MAXKEY); break;
    default: duk_push_undefined(d); break;
    }
}

/* An object (or array) from the elements of it; the names of int32 fields
 * are kept in the hidden "i32" object (MongoDB writes them back as int32). */
static void push_iter_doc(js_ctx *c, bson_iter_t *it, bool array)
{
    duk_context *d = c->duk;
    duk_idx_t obj = array ? duk_push_array(d) : duk_push_object(d);
    duk_idx_t i32 = -1, ord = -1;
    duk_uarridx_t i = 0;
    if (!array) {
        /* JavaScript enumerates index-like keys ("2") first: keep the BSON
         * order of such a document in "ord" (rare; w_object follows it) */
        bson_iter_t k = *it;
        while (bson_iter_next(&k))
            if (index_like(bson_iter_key(&k))) {
                ord = duk_push_array(d);
                break;
            }
    }
    while (bson_iter_next(it)) {
        if (ord >= 0) {
            duk_push_lstring(d, bson_iter_key(it), bson_iter_key_len(it));
            duk_put_prop_index(d, ord, i);
        }
        js_push_bson_value(c, it);
        if (array)
            duk_put_prop_index(d, obj, i);
        else
            duk_put_prop_lstring(d, obj, bson_iter_key(it), bson_iter_key_len(it));
        if (BSON_ITER_HOLDS_INT32(it)) {
            if (i32 < 0)
                i32 = duk_push_bare_object(d);
            duk_push_true(d);
            if (array)
                duk_put_prop_index(d, i32, i);
            else
                duk_put_prop_lstring(d, i32, bson_iter_key(it), bson_iter_key_len(it));
        }
        i++;
    }
    if (i32 >= 0)
        duk_put_prop_string(d, obj, HS("i32"));
    if (ord >= 0)
        duk_put_prop_string(d, obj, HS("ord"));
}

void js_push_bson_doc(js_ctx *c, const bson_t *doc, bool array)
{
    bson_iter_t it;
    if (!bson_iter_init(&it, doc)) {
        duk_push_null(c->duk);
        return;
    }
    push_iter_doc(c, &it, array);
}

/* ---- JavaScript -> BSON ------------------------------------------------------------ */

static void w_reserve(js_ctx *c, js_wbuf *w, size_t n)
{
    if (w->len + n <= w->cap)
        return;
    if (w->len + n > JS_BSON_MAX)
        (void)duk_range_error(c->duk, "Converting from JavaScript to BSON failed: Object size "
                                      "exceeds limit of 16793600 bytes.");
    size_t cap = w->cap ? w->cap : 256;
    while (cap < w->len + n)
        cap *= 2;
    uint8_t *p = realloc(w->p, cap);
    if (!p)
        (void)duk_error(c->duk, DUK_ERR_RANGE_ERROR, "out of memory");
    w->p = p;
    w->cap = cap;
}

static void w_put(js_ctx *c, js_wbuf *w, const void *p, size_t n)
{
    w_reserve(c, w, n);
    memcpy(w->p + w->len, p, n);
    w->len += n;
}

static void w_u8(js_ctx *c, js_wbuf *w, uint8_t v) { w_put(c, w, &v, 1); }

static void w_i32(js_ctx *c, js_wbuf *w, int32_t v)
{
    uint32_t u = (uint32_t)v;
    uint8_t b[4] = {(uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16), (uint8_t)(u >> 24)};
    w_put(c, w, b, 4);
}

static void w_i64(js_ctx *c, js_wbuf *w, int64_t v)
{
    uint64_t u = (uint64_t)v;
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(u >> (8 * i));
    w_put(c, w, b, 8);
}

static void w_double(js_ctx *c, js_wbuf *w, double v)
{
    int64_t u;
    memcpy(&u, &v, 8);
    w_i64(c, w, u);
}

static void w_patch_len(js_wbuf *w, size_t at)
{
    uint32_t n = (uint32_t)(w->len - at);
    uint8_t b[4] = {(uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16), (uint8_t)(n >> 24)};
    memcpy(w->p + at, b, 4);
}

/* A BSON string: int32 length with the NUL, bytes, NUL. */
static void w_string(js_ctx *c, js_wbuf *w, const char *s, size_t n)
{
    w_i32(c, w, (int32_t)(n + 1));
    w_put(c, w, s, n);
    w_u8(c, w, 0);
}

/* Element header: type, key (a C string: a NUL inside is an error). */
static void w_head(js_ctx *c, js_wbuf *w, bson_type_t t, const char *k, size_t klen)
{
    if (memchr(k, 0, klen))
        (void)duk_type_error(c->duk, "Converting from JavaScript to BSON failed: field name "
                                     "contains a null character");
    w_u8(c, w, (uint8_t)t);
    w_put(c, w, k, klen);
    w_u8(c, w, 0);
}

static int get_tag(duk_context *d, duk_idx_t idx)
{
    duk_get_prop_string(d, idx, HS("t"));
    int t = duk_is_number(d, -1) ? duk_get_int(d, -1) : JS_T_NONE;
    duk_pop(d);
    return t;
}

/* The hidden string or number `name` of the object at idx (pushed). */
static void get_hidden(duk_context *d, duk_idx_t idx, const char *name)
{
    duk_get_prop_string(d, idx, name);
}

static void w_value(js_ctx *c, js_wbuf *w, duk_idx_t idx, const char *k, size_t klen,
                    duk_idx_t i32, int depth);

/* An object from BSON with index-like keys: write its fields that are
 * still there in their BSON order first.  Pushes [ord, seen] and returns
 * the index of seen (the keys written), or -1 (nothing pushed). */
static duk_idx_t w_ordered(js_ctx *c, js_wbuf *w, duk_idx_t idx, duk_idx_t i32, int depth)
{
    duk_context *d = c->duk;
    duk_get_prop_string(d, idx, HS("ord"));
    if (!duk_is_array(d, -1)) {
        duk_pop(d);
        return -1;
    }
    duk_idx_t ord = duk_get_top_index(d);
    duk_idx_t seen = duk_push_bare_object(d);
    duk_size_t n = duk_get_length(d, ord);
    for (duk_size_t i = 0; i < n; i++) {
        duk_get_prop_index(d, ord, (duk_uarridx_t)i);
        duk_dup_top(d);
        duk_get_prop_desc(d, idx, 0);
        bool live = duk_is_object(d, -1);
        if (live) {
            duk_get_prop_string(d, -1, "enumerable");
            live = duk_to_boolean(d, -1);
            duk_pop(d);
        }
        duk_pop(d);
        if (live) {
            duk_size_t kl;
            const char *key = duk_get_lstring(d, -1, &kl);
            duk_get_prop_lstring(d, idx, key, kl);
            w_value(c, w, duk_get_top_index(d), key, kl, i32, depth);
            duk_pop(d);
            duk_push_true(d);
            duk_put_prop_lstring(d, seen, key, kl);
        }
        duk_pop(d);
    }
    return seen;
}

static void w_object(js_ctx *c, js_wbuf *w, duk_idx_t idx, bool array, int depth)
{
    duk_context *d = c->duk;
    if (depth > JS_DEPTH_MAX)
        (void)duk_range_error(d, "Converting from JavaScript to BSON failed: Object depth "
                                 "exceeds limit (a cyclic object?)");
    duk_require_stack(d, 8);
    size_t at = w->len;
    w_i32(c, w, 0);
    duk_idx_t i32 = -1;
    duk_get_prop_string(d, idx, HS("i32"));
    if (duk_is_object(d, -1))
        i32 = duk_get_top_index(d);
    else
        duk_pop(d);
    if (array) {
        duk_size_t n = duk_get_length(d, idx);
        for (duk_size_t i = 0; i < n; i++) {
            char key[24];
            int kl = snprintf(key, sizeof key, "%lu", (unsigned long)i);
            duk_get_prop_index(d, idx, (duk_uarridx_t)i);
            w_value(c, w, duk_get_top_index(d), key, (size_t)kl, i32, depth);
            duk_pop(d);
        }
    } else {
        duk_idx_t seen = w_ordered(c, w, idx, i32, depth);
        duk_enum(d, idx, DUK_ENUM_OWN_PROPERTIES_ONLY);
        while (duk_next(d, -1, 1)) {
            duk_size_t kl;
            const char *key = duk_get_lstring(d, -2, &kl);
            if (seen >= 0 && duk_get_prop_lstring(d, seen, key, kl)) {
                duk_pop_3(d);
                continue;
            }
            if (seen >= 0)
                duk_pop(d);
            w_value(c, w, duk_get_top_index(d), key, kl, i32, depth);
            duk_pop_2(d);
        }
        duk_pop(d);
        if (seen >= 0)
            duk_pop_2(d);
    }
    if (i32 >= 0)
        duk_pop(d);
    w_u8(c, w, 0);
    w_patch_len(w, at);
}

static void w_number(js_ctx *c, js_wbuf *w, double v, const char *k, size_t klen,
                     duk_idx_t i32)
{
    duk_context *d = c->duk;
    if (c->int32_numbers && v >= -2147483648.0 && v <= 2147483647.0 && v == (double)(int32_t)v &&
        !(v == 0 && signbit(v))) {
        w_head(c, w, BSON_TYPE_INT32, k, klen);
        w_i32(c, w, (int32_t)v);
        return;
    }
    if (i32 >= 0 && v >= -2147483648.0 && v <= 2147483647.0 && v == (double)(int32_t)v) {
        duk_get_prop_lstring(d, i32, k, klen);
        bool was_int = duk_get_boolean(d, -1);
        duk_pop(d);
        if (was_int) {
            w_head(c, w, BSON_TYPE_INT32, k, klen);
            w_i32(c, w, (int32_t)v);
            return;
        }
    }
    w_head(c, w, BSON_TYPE_DOUBLE, k, klen);
    w_double(c, w, v);
}

static int64_t parse_i64(js_ctx *c, const char *s)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end)
        (void)duk_type_error(c->duk, "NumberLong: bad value '%s'", s);
    return v;
}

static void w_tagged(js_ctx *c, js_wbuf *w, duk_idx_t idx, int tag, const char *k, size_t klen,
                     int depth)
{
    duk_context *d = c->duk;
    switch (tag) {
    case JS_T_LONG:
        get_hidden(d, idx, HS("v"));
        w_head(c, w, BSON_TYPE_INT64, k, klen);
        w_i64(c, w, parse_i64(c, duk_safe_to_string(d, -1)));
        duk_pop(d);
        return;
    case JS_T_INT:
        get_hidden(d, idx, HS("v"));
        w_head(c, w, BSON_TYPE_INT32, k, klen);
        w_i32(c, w, duk_to_int32(d, -1));
        duk_pop(d);
        return;
    case JS_T_DEC: {
        bson_decimal128_t dec;
        get_hidden(d, idx, HS("v"));
        if (!bson_decimal128_from_string(duk_safe_to_string(d, -1), &dec))
            (void)duk_type_error(d, "NumberDecimal: bad value");
        duk_pop(d);
        w_head(c, w, BSON_TYPE_DECIMAL128, k, klen);
        w_i64(c, w, (int64_t)dec.low);
        w_i64(c, w, (int64_t)dec.high);
        return;
    }
    case JS_T_OID: {
        bson_oid_t oid;
        duk_get_prop_string(d, idx, "str");
        const char *hex = duk_safe_to_string(d, -1);
        if (strlen(hex) != 24 || !bson_oid_is_valid(hex, 24))
            (void)duk_type_error(d, "ObjectId: invalid str '%s'", hex);
        bson_oid_init_from_string(&oid, hex);
        duk_pop(d);
        w_head(c, w, BSON_TYPE_OID, k, klen);
        w_put(c, w, oid.bytes, 12);
        return;
    }
    case JS_T_BIN: {
        duk_size_t n;
        get_hidden(d, idx, HS("s"));
        int st = duk_to_int(d, -1);
        get_hidden(d, idx, HS("b"));
        const char *s = duk_safe_to_lstring(d, -1, &n);
        uint8_t *buf = duk_push_fixed_buffer(d, n * 3 / 4 + 3);
        long len = base64_decode(s, n, buf);
        if (len < 0)
            (void)duk_type_error(d, "BinData: invalid base64");
        w_head(c, w, BSON_TYPE_BINARY, k, klen);
        if (st == BSON_SUBTYPE_BINARY_DEPRECATED) {
            w_i32(c, w, (int32_t)len + 4);
            w_u8(c, w, (uint8_t)st);
            w_i32(c, w, (int32_t)len);
        } else {
            w_i32(c, w, (int32_t)len);
            w_u8(c, w, (uint8_t)st);
        }
        w_put(c, w, buf, (size_t)len);
        duk_pop_3(d);
        return;
    }
    case JS_T_TS: {
        duk_get_prop_string(d, idx, "t");
        duk_get_prop_string(d, idx, "i");
        uint32_t t = duk_to_uint32(d, -2), i = duk_to_uint32(d, -1);
        duk_pop_2(d);
        w_head(c, w, BSON_TYPE_TIMESTAMP, k, klen);
        w_i32(c, w, (int32_t)i);
        w_i32(c, w, (int32_t)t);
        return;
    }
    case JS_T_CODE: {
        duk_size_t n;
        duk_get_prop_string(d, idx, "code");
        const char *s = duk_safe_to_lstring(d, -1, &n);
        w_head(c, w, BSON_TYPE_CODE, k, klen);
        w_string(c, w, s, n);
        duk_pop(d);
        return;
    }
    case JS_T_DBPTR: {
        duk_size_t n;
        bson_oid_t oid;
        duk_get_prop_string(d, idx, "ns");
        const char *ns = duk_safe_to_lstring(d, -1, &n);
        duk_get_prop_string(d, idx, "id");
        duk_get_prop_string(d, -1, "str");
        const char *hex = duk_safe_to_string(d, -1);
        if (strlen(hex) != 24 || !bson_oid_is_valid(hex, 24))
            (void)duk_type_error(d, "DBPointer: invalid id");
        bson_oid_init_from_string(&oid, hex);
        w_head(c, w, BSON_TYPE_DBPOINTER, k, klen);
        w_string(c, w, ns, n);
        w_put(c, w, oid.bytes, 12);
        duk_pop_3(d);
        return;
    }
    case JS_T_BSONRE:
    case JS_T_REGEXP: {
        duk_size_t pn, fn;
        if (tag == JS_T_BSONRE) {
            duk_get_prop_string(d, idx, "pattern");
            duk_get_prop_string(d, idx, "flags");
        } else {
            get_hidden(d, idx, HS("p"));
            if (duk_is_string(d, -1)) {
                get_hidden(d, idx, HS("f"));
            } else {
                duk_pop(d);
                duk_get_prop_string(d, idx, "source");
                duk_get_prop_string(d, idx, "ignoreCase");
                duk_get_prop_string(d, idx, "multiline");
                bool m = duk_to_boolean(d, -1), i = duk_to_boolean(d, -2);
                duk_pop_2(d);
                duk_push_string(d, i ? (m ? "im" : "i") : (m ? "m" : ""));
            }
        }
        const char *p = duk_safe_to_lstring(d, -2, &pn);
        const char *f = duk_safe_to_lstring(d, -1, &fn);
        w_head(c, w, BSON_TYPE_REGEX, k, klen);
        if (memchr(p, 0, pn))
            (void)duk_type_error(d, "RegExp: pattern contains a null character");
        w_put(c, w, p, pn);
        w_u8(c, w, 0);
        w_put(c, w, f, strnlen(f, fn));
        w_u8(c, w, 0);
        duk_pop_2(d);
        return;
    }
    case JS_T_MINKEY: w_head(c, w, BSON_TYPE_MINKEY, k, klen); return;
    case JS_T_MAXKEY: w_head(c, w, BSON_TYPE_MAXKEY, k, klen); return;
    case JS_T_DATE: {
        duk_dup(d, idx);
        double ms = duk_to_number(d, -1);
        duk_pop(d);
        if (isnan(ms))
            (void)duk_range_error(d, "Converting from JavaScript to BSON failed: invalid Date");
        w_head(c, w, BSON_TYPE_DATE_TIME, k, klen);
        w_i64(c, w, (int64_t)ms);
        return;
    }
    default: break;
    }
    (void)depth;
}

static void w_value(js_ctx *c, js_wbuf *w, duk_idx_t idx, const char *k, size_t klen,
                    duk_idx_t i32, int depth)
{
    duk_context *d = c->duk;
    switch (duk_get_type(d, idx)) {
    case DUK_TYPE_UNDEFINED: w_head(c, w, BSON_TYPE_UNDEFINED, k, klen); return;
    case DUK_TYPE_NULL: w_head(c, w, BSON_TYPE_NULL, k, klen); return;
    case DUK_TYPE_BOOLEAN:
        w_head(c, w, BSON_TYPE_BOOL, k, klen);
        w_u8(c, w, duk_get_boolean(d, idx) ? 1 : 0);
        return;
    case DUK_TYPE_NUMBER: w_number(c, w, duk_get_number(d, idx), k, klen, i32); return;
    case DUK_TYPE_STRING: {
        duk_size_t n;
        const char *s = duk_get_lstring(d, idx, &n);
        w_head(c, w, BSON_TYPE_UTF8, k, klen);
        w_string(c, w, s, n);
        return;
    }
    case DUK_TYPE_OBJECT: {
        if (duk_is_function(d, idx)) {
            duk_size_t n;
            duk_dup(d, idx);
            const char *s = duk_safe_to_lstring(d, -1, &n);
            w_head(c, w, BSON_TYPE_CODE, k, klen);
            w_string(c, w, s, n);
            duk_pop(d);
            return;
        }
        int tag = get_tag(d, idx);
        if (tag != JS_T_NONE) {
            w_tagged(c, w, idx, tag, k, klen, depth);
            return;
        }
        bool array = duk_is_array(d, idx);
        w_head(c, w, array ? BSON_TYPE_ARRAY : BSON_TYPE_DOCUMENT, k, klen);
        w_object(c, w, idx, array, depth + 1);
        return;
    }
    default: w_head(c, w, BSON_TYPE_NULL, k, klen); return;
    }
}

void js_to_bson1(js_ctx *c, duk_idx_t idx, js_wbuf *w)
{
    idx = duk_require_normalize_index(c->duk, idx);
    w->len = 0;
    w_i32(c, w, 0);
    w_value(c, w, idx, "", 0, -1, 0);
    w_u8(c, w, 0);
    w_patch_len(w, 0);
}

void js_to_bson2(js_ctx *c, duk_idx_t kidx, duk_idx_t vidx, js_wbuf *w)
{
    kidx = duk_require_normalize_index(c->duk, kidx);
    vidx = duk_require_normalize_index(c->duk, vidx);
    w->len = 0;
    w_i32(c, w, 0);
    w_value(c, w, kidx, "k", 1, -1, 0);
    w_value(c, w, vidx, "v", 1, -1, 0);
    w_u8(c, w, 0);
    w_patch_len(w, 0);
}

/* ---- natives of the environment ---------------------------------------------------- */

/* N.initLong(obj, v): obj's exact value from a number, a string or another
 * NumberLong; floatApprox beside it, as the shell's NumberLong has. */
static duk_ret_t n_init_long(duk_context *d)
{
    char s[32];
    if (duk_is_object(d, 1) && get_tag(d, 1) == JS_T_LONG) {
        get_hidden(d, 1, HS("v"));
        snprintf(s, sizeof s, "%s", duk_safe_to_string(d, -1));
    } else if (duk_is_string(d, 1)) {
        const char *in = duk_get_string(d, 1);
        char *end;
        errno = 0;
        long long v = strtoll(in, &end, 10);
        if (errno || end == in || *end)
            return duk_error(d, DUK_ERR_ERROR, "could not convert \"%s\" to NumberLong", in);
        snprintf(s, sizeof s, "%lld", v);
    } else {
        double v = duk_is_undefined(d, 1) ? 0 : duk_to_number(d, 1);
        if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0))
            return duk_error(d, DUK_ERR_RANGE_ERROR, "number passed to NumberLong must be "
                                                     "representable as an int64_t");
        snprintf(s, sizeof s, "%lld", (long long)v);
    }
    duk_push_string(d, s);
    duk_put_prop_string(d, 0, HS("v"));
    duk_push_number(d, strtod(s, NULL));
    duk_put_prop_string(d, 0, "floatApprox");
    return 0;
}

static duk_ret_t n_init_int(duk_context *d)
{
    duk_push_int(d, duk_is_undefined(d, 1) ? 0 : duk_to_int32(d, 1));
    duk_put_prop_string(d, 0, HS("v"));
    return 0;
}

static duk_ret_t n_init_dec(duk_context *d)
{
    bson_decimal128_t dec;
    char s[BSON_DECIMAL128_STRING];
    const char *in = duk_is_undefined(d, 1) ? "0" : duk_to_string(d, 1);
    if (!bson_decimal128_from_string(in, &dec))
        return duk_error(d, DUK_ERR_ERROR, "Invalid NumberDecimal string: %s", in);
    bson_decimal128_to_string(&dec, s);
    duk_push_string(d, s);
    duk_put_prop_string(d, 0, HS("v"));
    return 0;
}

/* N.oid(hex?): a new ObjectId's hex, or hex checked. */
static duk_ret_t n_oid(duk_context *d)
{
    bson_oid_t oid;
    char hex[25];
    if (duk_is_undefined(d, 0)) {
        bson_oid_init(&oid, NULL);
    } else {
        const char *in = duk_to_string(d, 0);
        if (strlen(in) != 24 || !bson_oid_is_valid(in, 24))
            return duk_error(d, DUK_ERR_ERROR, "invalid object id: length");
        bson_oid_init_from_string(&oid, in);
    }
    bson_oid_to_string(&oid, hex);
    duk_push_string(d, hex);
    return 1;
}

/* N.initBin(obj, subtype, base64) */
static duk_ret_t n_init_bin(duk_context *d)
{
    duk_size_t n;
    int st = duk_to_int(d, 1);
    const char *s = duk_to_lstring(d, 2, &n);
    uint8_t *tmp = duk_push_fixed_buffer(d, n * 3 / 4 + 3);
    if (st < 0 || st > 255 || base64_decode(s, n, tmp) < 0)
        return duk_error(d, DUK_ERR_ERROR, "BinData: invalid subtype or base64 string");
    duk_pop(d);
    duk_push_int(d, st);
    duk_put_prop_string(d, 0, HS("s"));
    duk_dup(d, 2);
    duk_put_prop_string(d, 0, HS("b"));
    return 0;
}

/* N.hidden(obj, name): the hidden value `name` ("v", "s", "b"). */
static duk_ret_t n_hidden(duk_context *d)
{
    char name[8];
    snprintf(name, sizeof name, "\xFF%s", duk_to_string(d, 1));
    duk_get_prop_string(d, 0, name);
    return 1;
}

void js_conv_natives(duk_context *d)
{
    static const duk_function_list_entry fns[] = {
        {"initLong", n_init_long, 2}, {"initInt", n_init_int, 2},
        {"initDec", n_init_dec, 2},   {"oid", n_oid, 1},
        {"initBin", n_init_bin, 3},   {"hidden", n_hidden, 2},
        {NULL, NULL, 0},
    };
    duk_put_function_list(d, -1, fns);
}

void js_conv_tag(js_ctx *c)
{
    static const struct {
        int slot, tag;
    } t[] = {
        {JS_SLOT_LONG, JS_T_LONG},     {JS_SLOT_INT, JS_T_INT},       {JS_SLOT_DEC, JS_T_DEC},
        {JS_SLOT_OID, JS_T_OID},       {JS_SLOT_BIN, JS_T_BIN},       {JS_SLOT_TS, JS_T_TS},
        {JS_SLOT_CODE, JS_T_CODE},     {JS_SLOT_DBPTR, JS_T_DBPTR},   {JS_SLOT_BSONRE, JS_T_BSONRE},
        {JS_SLOT_MINKEY, JS_T_MINKEY}, {JS_SLOT_MAXKEY, JS_T_MAXKEY},
    };
    duk_context *d = c->duk;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        push_slot(c, t[i].slot);
        duk_push_int(d, t[i].tag);
        duk_put_prop_string(d, -2, HS("t"));
        duk_pop(d);
    }
    push_slot(c, JS_SLOT_DATE);
    duk_get_prop_string(d, -1, "prototype");
    duk_push_int(d, JS_T_DATE);
    duk_put_prop_string(d, -2, HS("t"));
    duk_pop_2(d);
    push_slot(c, JS_SLOT_REGEXP);
    duk_get_prop_string(d, -1, "prototype");
    duk_push_int(d, JS_T_REGEXP);
    duk_put_prop_string(d, -2, HS("t"));
    duk_pop_2(d);
}
