/*
 * q_key.c -- index keys: a byte encoding of BSON values whose memcmp order
 * is q_value_cmp()'s order (after MongoDB's KeyString), and generation of a
 * document's keys for a key pattern (a transliteration of 3.6's
 * BtreeKeyGeneratorV1: one key per element of the one array a key may
 * expand, nested arrays indexed whole, numeric components positional, an
 * empty array keyed as undefined, parallel arrays refused).
 *
 * Keys over 1024 bytes -- measured, as MongoDB does, as the BSON object
 * {"": v1, "": v2} -- are KeyTooLong.  Numbers keep their exact value,
 * decimal128 included (q_decimal.c).  The format is below; an index's
 * catalog entry records the format its keys were written in (keyFormat,
 * Q_KEY_FORMAT in q_int.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "q.h"
#include "q_path.h"

/*
 * Key format.  One value: a type byte per canonical rank, then the value.
 *
 *   rank      byte  value bytes
 *   MinKey    0x0A  -
 *   undefined 0x0F  -                (also: an empty array's key)
 *   null      0x14  -                (also: a missing field)
 *   number    0x1E  class: 01 NaN, 02 -inf, 03 negative, 04 zero,
 *                   05 positive, 06 +inf; finite non-zero numbers add
 *                   exponent (u16 BE, +32768) and mantissa (u64 BE) of
 *                   |v| = m * 2^e, m in [0.5, 1); a decimal128 that is no
 *                   such number has its mantissa truncated to 63 bits, the
 *                   lowest bit set, and its decimal digits after it (the
 *                   exact layout is in q_decimal.c); every byte after the
 *                   class inverted when negative.  42, 42L, 42.0 and
 *                   NumberDecimal("42.00") encode equally.
 *                   (Key format 1, before decimals were exact, encoded a
 *                   decimal through long double; q_catalog.c rebuilds such
 *                   an index when it opens one.)
 *   string    0x3C  bytes (00 -> 01 01, 01 -> 01 02), then 00  (symbol alike)
 *   object    0x46  per field: type byte, name, 00, value; then 00
 *   array     0x50  per element: type byte, value; then 00
 *   binData   0x5A  length (u32 BE), subtype, bytes
 *   ObjectId  0x64  12 bytes        bool 0x6E  00 / 01
 *   date      0x78  i64 BE with the sign bit flipped
 *   timestamp 0x7D  seconds u32 BE, increment u32 BE
 *   regex     0x82  pattern 00 flags 00
 *   dbPointer 0x8C  ns length u32 BE, ns, oid     code 0x96  as string
 *   codeWScope 0xA0 code as string, scope as object body
 *   MaxKey    0xF0  -
 *
 * Example: {"": -1.5} -> 1E 03 7F FE 3F FF FF FF FF FF FF FF
 *   (exponent 1 -> 0x8001, mantissa 0.75 -> 0xC000..., inverted).
 *
 * No encoding is a proper prefix of another, so a compound key is the
 * concatenation of its fields and a descending field is its encoding with
 * every byte inverted.  Encoded keys are at most about twice the BSON size
 * of the key (escaped 00/01 bytes, 12-byte numbers), so under ~2 KB.
 */

#define Q_KEY_MAX_FIELDS 32
#define Q_KEY_MAX_BSON 1024

enum {
    QK_MINKEY = 0x0A, QK_UNDEFINED = 0x0F, QK_NULL = 0x14, QK_NUMBER = 0x1E,
    QK_STRING = 0x3C, QK_OBJECT = 0x46, QK_ARRAY = 0x50, QK_BINARY = 0x5A,
    QK_OID = 0x64, QK_BOOL = 0x6E, QK_DATE = 0x78, QK_TIMESTAMP = 0x7D,
    QK_REGEX = 0x82, QK_DBPOINTER = 0x8C, QK_CODE = 0x96, QK_CODEWSCOPE = 0xA0,
    QK_MAXKEY = 0xF0,
};

static uint8_t type_byte(bson_type_t t)
{
    switch (q_type_rank(t)) {
    case -1: return QK_MINKEY;
    case 5: return QK_NULL;
    case 10: return QK_NUMBER;
    case 15: return QK_STRING;
    case 20: return QK_OBJECT;
    case 25: return QK_ARRAY;
    case 30: return QK_BINARY;
    case 35: return QK_OID;
    case 40: return QK_BOOL;
    case 45: return QK_DATE;
    case 47: return QK_TIMESTAMP;
    case 50: return QK_REGEX;
    case 55: return QK_DBPOINTER;
    case 60: return QK_CODE;
    case 65: return QK_CODEWSCOPE;
    case 127: return QK_MAXKEY;
    default: return QK_UNDEFINED;
    }
}

static void put_be(q_buf *b, uint64_t v, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--)
        q_buf_putc(b, (uint8_t)(v >> (8 * i)));
}

/* Bytes 00 and 01 become 01 01 and 01 02, so 00 only ever terminates: the
 * encoding stays order-preserving and no string's encoding is a prefix of
 * another's (which descending keys, being inverted, rely on). */
static void enc_string(q_buf *b, const char *s, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        uint8_t c = (uint8_t)s[i];
        if (c <= 0x01) {
            q_buf_putc(b, 0x01);
            c++;
        }
        q_buf_putc(b, c);
    }
    q_buf_putc(b, 0x00);
}

static void enc_body(q_buf *b, const bson_iter_t *it);

/* Elements of a document (with names) or array (without), then 00. */
static void enc_elements(q_buf *b, const uint8_t *data, uint32_t len, bool names)
{
    bson_iter_t x;
    if (bson_iter_init_from_data(&x, data, len)) {
        while (bson_iter_next(&x)) {
            q_buf_putc(b, type_byte(bson_iter_type(&x)));
            if (names) {
                q_buf_puts(b, bson_iter_key(&x));
                q_buf_putc(b, 0x00);
            }
            enc_body(b, &x);
        }
    }
    q_buf_putc(b, 0x00);
}

static void enc_misc(q_buf *b, const bson_iter_t *it)
{
    uint32_t n, t, i, sl;
    const uint8_t *p;
    const char *s, *opts;
    const bson_oid_t *oid;
    bson_subtype_t st;
    switch (bson_iter_type(it)) {
    case BSON_TYPE_BINARY:
        bson_iter_binary(it, &st, &n, &p);
        put_be(b, n, 4);
        q_buf_putc(b, (uint8_t)st);
        q_buf_append(b, p, n);
        break;
    case BSON_TYPE_TIMESTAMP:
        bson_iter_timestamp(it, &t, &i);
        put_be(b, t, 4);
        put_be(b, i, 4);
        break;
    case BSON_TYPE_REGEX:
        s = bson_iter_regex(it, &opts);
        q_buf_append(b, s, strlen(s) + 1);
        q_buf_append(b, opts, strlen(opts) + 1);
        break;
    case BSON_TYPE_DBPOINTER:
        bson_iter_dbpointer(it, &n, &s, &oid);
        put_be(b, n, 4);
        q_buf_append(b, s, n);
        q_buf_append(b, oid->bytes, 12);
        break;
    case BSON_TYPE_CODEWSCOPE:
        s = bson_iter_codewscope(it, &n, &sl, &p);
        enc_string(b, s, n);
        enc_elements(b, p, sl, true);
        break;
    default: break; /* MinKey, MaxKey, null, undefined: the type byte says it all */
    }
}

/* The value bytes that follow the type byte. */
static void enc_body(q_buf *b, const bson_iter_t *it)
{
    uint32_t n;
    const char *s;
    const uint8_t *p;
    switch (bson_iter_type(it)) {
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
    case BSON_TYPE_DECIMAL128: q_key_number(b, it); break;
    case BSON_TYPE_UTF8: s = bson_iter_utf8(it, &n); enc_string(b, s, n); break;
    case BSON_TYPE_SYMBOL: s = bson_iter_symbol(it, &n); enc_string(b, s, n); break;
    case BSON_TYPE_CODE: s = bson_iter_code(it, &n); enc_string(b, s, n); break;
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY:
        q_iter_sub(it, &p, &n);
        enc_elements(b, p, n, BSON_ITER_HOLDS_DOCUMENT(it));
        break;
    case BSON_TYPE_OID: q_buf_append(b, bson_iter_oid(it)->bytes, 12); break;
    case BSON_TYPE_BOOL: q_buf_putc(b, bson_iter_bool(it) ? 1 : 0); break;
    case BSON_TYPE_DATE_TIME:
        put_be(b, (uint64_t)bson_iter_date_time(it) ^ 0x8000000000000000ull, 8);
        break;
    default: enc_misc(b, it); break;
    }
}

static void invert_from(q_buf *b, size_t start)
{
    for (size_t i = start; i < b->len; i++)
        b->data[i] = (uint8_t)~b->data[i];
}

void q_key_append_value(q_buf *b, const bson_iter_t *it, bool descending)
{
    assert(b && it);
    size_t start = b->len;
    q_buf_putc(b, type_byte(bson_iter_type(it)));
    enc_body(b, it);
    if (descending)
        invert_from(b, start);
}

void q_key_append_null(q_buf *b, bool descending)
{
    q_buf_putc(b, descending ? (uint8_t)~QK_NULL : QK_NULL);
}

/* ---- key sets ---------------------------------------------------------------- */

void q_keyset_init(q_keyset *ks)
{
    assert(ks);
    ks->keys = NULL;
    ks->n = ks->cap = 0;
    ks->multikey = false;
}

void q_keyset_cleanup(q_keyset *ks)
{
    if (!ks)
        return;
    for (size_t i = 0; i < ks->n; i++)
        q_buf_cleanup(&ks->keys[i]);
    bson_free(ks->keys);
    q_keyset_init(ks);
}

/* Takes ownership of *key. */
static void keyset_add(q_keyset *ks, q_buf *key)
{
    if (ks->n == ks->cap) {
        ks->cap = ks->cap ? 2 * ks->cap : 4;
        ks->keys = bson_realloc(ks->keys, ks->cap * sizeof *ks->keys);
    }
    ks->keys[ks->n++] = *key;
    q_buf_init(key);
}

static int key_cmp(const void *a, const void *b)
{
    const q_buf *x = a, *y = b;
    return eng_key_cmp(x->data, (uint32_t)x->len, 0, y->data, (uint32_t)y->len, 0);
}

static void keyset_sort_unique(q_keyset *ks)
{
    if (ks->n < 2)
        return;
    q_sort(ks->keys, ks->n, sizeof *ks->keys, key_cmp);
    size_t w = 1;
    for (size_t r = 1; r < ks->n; r++) {
        if (key_cmp(&ks->keys[w - 1], &ks->keys[r]) == 0)
            q_buf_cleanup(&ks->keys[r]);
        else
            ks->keys[w++] = ks->keys[r];
    }
    ks->n = w;
}

/* ---- key generation (BtreeKeyGeneratorV1) ------------------------------------ */

enum { KF_VALUE, KF_NULL, KF_UNDEF, KF_ARRAY_WHOLE };

/* One component of a key: an element of the document, null or undefined. */
typedef struct kfield {
    int kind;
    bson_iter_t it;
} kfield;

/* PositionalPathInfo: a numeric component indexing the array being expanded. */
typedef struct kpos {
    bool has;
    bool indexed_is_array;  /* positionallyIndexedElt is itself an array */
    const char *indexed_key;
    const char *remaining;  /* the path after that array's element */
    bool dotted_found;
    bson_iter_t dotted;     /* the element the remaining path leads to */
    const uint8_t *arr;     /* the array (for the ambiguity message) */
    uint32_t arrlen;
} kpos;

typedef struct kgen {
    size_t n;
    const char *field[Q_KEY_MAX_FIELDS];
    bool desc[Q_KEY_MAX_FIELDS];
    bool sparse;
    q_keyset *out;
    md_error *err;
    int rc;
} kgen;

static const uint8_t q_empty_doc[5] = {5, 0, 0, 0, 0};

static bool doc_find_n(const uint8_t *data, uint32_t len, const char *name, size_t n,
                       bson_iter_t *out)
{
    if (!bson_iter_init_from_data(out, data, len))
        return false;
    while (bson_iter_next(out)) {
        const char *k = bson_iter_key(out);
        if (strlen(k) == n && !memcmp(k, name, n))
            return true;
    }
    return false;
}

/* dotted_path_support::extractElementAtPathOrArrayAlongPath: *path is
 * advanced past the component that names an array. */
static bool extract_or_array(const uint8_t *data, uint32_t len, const char **path,
                             bson_iter_t *out)
{
    for (;;) {
        const char *name = *path, *dot = strchr(name, '.');
        size_t n = dot ? (size_t)(dot - name) : strlen(name);
        *path = dot ? dot + 1 : name + n;
        if (!doc_find_n(data, len, name, n, out))
            return false;
        if (BSON_ITER_HOLDS_ARRAY(out) || **path == '\0')
            return true;
        if (!BSON_ITER_HOLDS_DOCUMENT(out))
            return false;
        q_iter_sub(out, &data, &len);
    }
}

static bool extract_next(kgen *g, const uint8_t *obj, uint32_t len, const kpos *pos,
                         const char **field, bson_iter_t *out, bool *nested)
{
    const char *dot = strchr(*field, '.');
    size_t n = dot ? (size_t)(dot - *field) : strlen(*field);
    bson_iter_t probe;
    bool have = doc_find_n(obj, len, *field, n, &probe);
    *nested = false;
    if (have && pos->has) {
        q_buf b;
        q_buf_init(&b);
        q_render_doc(&b, pos->arr, pos->arrlen, true);
        g->rc = md_error_set(g->err, MD_EINVAL, 16746,
                             "Ambiguous field name found in array (do not use numeric field "
                             "names in embedded elements in an array), field: '%s' for array: %s",
                             pos->indexed_key, q_buf_cstr(&b));
        q_buf_cleanup(&b);
        return false;
    }
    if (have)
        return extract_or_array(obj, len, field, out);
    if (!pos->has)
        return false;
    *nested = pos->indexed_is_array;
    *field = pos->remaining;
    if (pos->dotted_found)
        *out = pos->dotted;
    return pos->dotted_found;
}

/* Size of the key as a BSON object {"": v1, "": v2, ...}. */
static uint32_t key_bson_size(const kgen *g, const kfield *fx)
{
    uint32_t size = 5;
    for (size_t i = 0; i < g->n; i++)
        size += 2 + (fx[i].kind == KF_VALUE ? q_value_size(&fx[i].it) : 0);
    return size;
}

static void key_too_long(kgen *g, const kfield *fx, uint32_t size)
{
    q_buf b;
    q_buf_init(&b);
    q_buf_puts(&b, "{ ");
    for (size_t i = 0; i < g->n; i++) {
        q_buf_puts(&b, i ? ", : " : ": ");
        if (fx[i].kind == KF_VALUE)
            q_render_value(&b, &fx[i].it);
        else
            q_buf_puts(&b, fx[i].kind == KF_NULL ? "null" : "undefined");
    }
    q_buf_puts(&b, " }");
    g->rc = md_error_set(g->err, MD_ETOOBIG, MD_CODE_KEY_TOO_LONG,
                         "key too large to index, failing %" PRIu32 " %s", size,
                         q_buf_cstr(&b));
    q_buf_cleanup(&b);
}

static void emit_key(kgen *g, const kfield *fx)
{
    uint32_t size = key_bson_size(g, fx);
    if (size > Q_KEY_MAX_BSON) {
        key_too_long(g, fx, size);
        return;
    }
    q_buf key;
    q_buf_init(&key);
    for (size_t i = 0; i < g->n; i++) {
        if (fx[i].kind == KF_VALUE)
            q_key_append_value(&key, &fx[i].it, g->desc[i]);
        else if (fx[i].kind == KF_NULL)
            q_key_append_null(&key, g->desc[i]);
        else
            q_buf_putc(&key, g->desc[i] ? (uint8_t)~QK_UNDEFINED : QK_UNDEFINED);
    }
    keyset_add(g->out, &key);
}

static void keys_with_array(kgen *g, const char *const *names, const kfield *fixed,
                            const uint8_t *obj, uint32_t len, unsigned nnf, const kpos *pos);

/* _getKeysArrEltFixed: fix the fields that end at the array, then recurse. */
static void arr_elt_fixed(kgen *g, const char *const *names, const kfield *fixed,
                          const kfield *entry, const bson_iter_t *arr, const bool *arr_idx,
                          bool expand, unsigned nnf, const kpos *pos)
{
    const char *fn[Q_KEY_MAX_FIELDS];
    kfield fx[Q_KEY_MAX_FIELDS];
    memcpy(fn, names, g->n * sizeof *fn);
    memcpy(fx, fixed, g->n * sizeof *fx);
    for (size_t i = 0; i < g->n; i++) {
        if (arr_idx[i] && *fn[i] == '\0') {
            if (expand)
                fx[i] = *entry;
            else
                fx[i] = (kfield){KF_VALUE, *arr};
        }
    }
    const uint8_t *d = q_empty_doc;
    uint32_t l = sizeof q_empty_doc;
    if (entry->kind == KF_VALUE && BSON_ITER_HOLDS_DOCUMENT(&entry->it))
        q_iter_sub(&entry->it, &d, &l);
    keys_with_array(g, fn, fx, d, l, nnf, pos);
}

/* Positional info for each field still running through the array `arr`. */
static void positional_infos(kgen *g, const char *const *fn, const bool *arr_idx,
                             const bson_iter_t *arr, bool expand, kpos *sub)
{
    const uint8_t *ad;
    uint32_t al;
    q_iter_sub(arr, &ad, &al);
    memset(sub, 0, g->n * sizeof *sub);
    for (size_t i = 0; i < g->n; i++) {
        if (*fn[i] == '\0') {
            if (arr_idx[i] && expand)
                g->out->multikey = true;
            continue;
        }
        const char *dot = strchr(fn[i], '.');
        size_t n = dot ? (size_t)(dot - fn[i]) : strlen(fn[i]);
        bson_iter_t indexed;
        if (!doc_find_n(ad, al, fn[i], n, &indexed)) {
            g->out->multikey = true; /* expanded element by element */
            continue;
        }
        sub[i].has = true;
        sub[i].indexed_is_array = BSON_ITER_HOLDS_ARRAY(&indexed);
        sub[i].indexed_key = bson_iter_key(&indexed);
        sub[i].arr = ad;
        sub[i].arrlen = al;
        sub[i].remaining = fn[i];
        sub[i].dotted_found = extract_or_array(ad, al, &sub[i].remaining, &sub[i].dotted);
    }
}

/* _getKeysWithArray: extract every field; expand at most one array. */
static void keys_with_array(kgen *g, const char *const *names, const kfield *fixed,
                            const uint8_t *obj, uint32_t len, unsigned nnf, const kpos *pos)
{
    const char *fn[Q_KEY_MAX_FIELDS];
    kfield fx[Q_KEY_MAX_FIELDS];
    bool arr_idx[Q_KEY_MAX_FIELDS] = {false}, have_arr = false, expand = true;
    bson_iter_t arr, e;
    memcpy(fn, names, g->n * sizeof *fn);
    memcpy(fx, fixed, g->n * sizeof *fx);
    for (size_t i = 0; i < g->n && !g->rc; i++) {
        bool nested;
        if (*fn[i] == '\0')
            continue;
        if (!extract_next(g, obj, len, &pos[i], &fn[i], &e, &nested)) {
            fx[i].kind = KF_NULL;
            fn[i] = "";
            nnf++;
        } else if (BSON_ITER_HOLDS_ARRAY(&e)) {
            arr_idx[i] = true;
            if (!have_arr) {
                arr = e;
                have_arr = true;
            } else if (e.raw + e.off != arr.raw + arr.off) {
                g->rc = md_error_set(g->err, MD_EINVAL, MD_CODE_CANNOT_INDEX_PARALLEL_ARRAYS,
                                     "cannot index parallel arrays [%s] [%s]", bson_iter_key(&e),
                                     bson_iter_key(&arr));
            }
            expand = expand && !nested;
        } else {
            fx[i] = (kfield){KF_VALUE, e};
        }
    }
    if (g->rc)
        return;
    if (!have_arr) {
        if (!(g->sparse && nnf == g->n))
            emit_key(g, fx);
        return;
    }
    kpos sub[Q_KEY_MAX_FIELDS];
    bson_iter_t x;
    if (!bson_iter_recurse(&arr, &x) || !bson_iter_next(&x)) {
        kfield undef = {KF_UNDEF, arr};
        kpos none[Q_KEY_MAX_FIELDS];
        memset(none, 0, g->n * sizeof *none);
        g->out->multikey |= expand;
        arr_elt_fixed(g, fn, fx, &undef, &arr, arr_idx, true, nnf, none);
        return;
    }
    positional_infos(g, fn, arr_idx, &arr, expand, sub);
    do {
        kfield entry = {KF_VALUE, x};
        arr_elt_fixed(g, fn, fx, &entry, &arr, arr_idx, expand, nnf, sub);
    } while (!g->rc && bson_iter_next(&x));
}

/* The key pattern's fields and directions. */
static int pattern_parse(kgen *g, const bson_t *pattern, md_error *err)
{
    bson_iter_t it;
    g->n = 0;
    if (!bson_iter_init(&it, pattern))
        return md_error_set(err, MD_EINVAL, MD_CODE_INVALID_BSON, "invalid key pattern");
    while (bson_iter_next(&it)) {
        if (g->n == Q_KEY_MAX_FIELDS)
            return md_error_set(err, MD_EINVAL, MD_CODE_CANNOT_CREATE_INDEX,
                                "Index key pattern has more than %d fields", Q_KEY_MAX_FIELDS);
        if (BSON_ITER_HOLDS_UTF8(&it))
            return md_error_set(err, MD_ENOTSUP, MD_CODE_NOT_YET_IMPLEMENTED,
                                "index type '%s' is not supported yet",
                                bson_iter_utf8(&it, NULL));
        g->field[g->n] = bson_iter_key(&it);
        g->desc[g->n++] = q_is_number(bson_iter_type(&it)) && q_number_ld(&it) < 0;
    }
    if (g->n == 0)
        return md_error_set(err, MD_EINVAL, MD_CODE_CANNOT_CREATE_INDEX,
                            "Index keys cannot be empty.");
    return 0;
}

int q_index_keys(const bson_t *pattern, const bson_t *doc, bool sparse, q_keyset *out,
                 md_error *err)
{
    assert(pattern && doc && out);
    kgen g = {.sparse = sparse, .out = out, .err = err};
    q_keyset_cleanup(out);
    int rc = pattern_parse(&g, pattern, err);
    if (rc)
        return rc;
    kfield fx[Q_KEY_MAX_FIELDS];
    kpos none[Q_KEY_MAX_FIELDS];
    memset(none, 0, g.n * sizeof *none);
    for (size_t i = 0; i < g.n; i++)
        fx[i].kind = KF_NULL;
    keys_with_array(&g, g.field, fx, bson_get_data(doc), doc->len, 0, none);
    if (g.rc) {
        q_keyset_cleanup(out);
        return g.rc;
    }
    if (out->n == 0 && !sparse)
        emit_key(&g, fx);
    keyset_sort_unique(out);
    out->multikey |= out->n > 1;
    return 0;
}

int q_key_simple(const char *field, bool desc, bool sparse, const bson_t *doc, q_buf *out)
{
    bson_iter_t it;
    size_t n = strlen(field);
    if (!bson_iter_init(&it, doc))
        return -1;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (memcmp(k, field, n) != 0 || k[n] != '\0')
            continue;
        /* the first field of that name, as doc_find_n takes it */
        if (BSON_ITER_HOLDS_ARRAY(&it) || 5 + 2 + q_value_size(&it) > Q_KEY_MAX_BSON)
            return -1;
        q_key_append_value(out, &it, desc);
        return 1;
    }
    if (sparse)
        return 0;
    q_key_append_null(out, desc);
    return 1;
}

/* ---- describing keys ----------------------------------------------------------- */

/* dotted_path_support::extractElementAtPath (arrays index by position). */
static bool extract_at_path(const uint8_t *data, uint32_t len, const char *path,
                            bson_iter_t *out)
{
    if (doc_find_n(data, len, path, strlen(path), out))
        return true;
    const char *dot = strchr(path, '.');
    if (!dot || !doc_find_n(data, len, path, (size_t)(dot - path), out) ||
        !q_is_container(bson_iter_type(out)))
        return false;
    q_iter_sub(out, &data, &len);
    return extract_at_path(data, len, dot + 1, out);
}

void q_key_describe(const bson_t *pattern, const bson_t *doc, char *out, size_t outlen)
{
    bson_iter_t it, v;
    q_buf b;
    if (!out || outlen == 0)
        return;
    q_buf_init(&b);
    q_buf_puts(&b, "{ ");
    bool first = true;
    if (bson_iter_init(&it, pattern)) {
        while (bson_iter_next(&it)) {
            q_buf_printf(&b, "%s%s: ", first ? "" : ", ", bson_iter_key(&it));
            first = false;
            if (extract_at_path(bson_get_data(doc), doc->len, bson_iter_key(&it), &v))
                q_render_value(&b, &v);
            else
                q_buf_puts(&b, "null");
        }
    }
    q_buf_puts(&b, first ? "}" : " }");
    bson_strncpy(out, q_buf_cstr(&b), outlen);
    q_buf_cleanup(&b);
}

/* ---- decoding (covered queries) ---------------------------------------------- */

typedef struct kread {
    const uint8_t *p;
    uint32_t n, i;
    uint8_t x; /* 0xFF for a descending field */
} kread;

static bool kr_get(kread *r, uint8_t *c)
{
    if (r->i >= r->n)
        return false;
    *c = r->p[r->i++] ^ r->x;
    return true;
}

static bool kr_be(kread *r, int bytes, uint64_t *v)
{
    uint8_t c;
    *v = 0;
    for (int i = 0; i < bytes; i++) {
        if (!kr_get(r, &c))
            return false;
        *v = *v << 8 | c;
    }
    return true;
}

/* A number back as int32 / int64 when integral and in range, else double:
 * the encoding does not keep the original numeric type.  A decimal that is
 * no binary number (mantissa's low bit set) is not decoded: fetch. */
static bool dec_number(kread *r, bson_t *out, const char *name)
{
    uint8_t cls;
    uint64_t ex, mant;
    double d;
    if (!kr_get(r, &cls))
        return false;
    if (cls == 0x03 || cls == 0x05) {
        if (!kr_be(r, 2, &ex) || !kr_be(r, 8, &mant))
            return false;
        if (cls == 0x03) {
            ex = ~ex & 0xFFFF;
            mant = ~mant;
        }
        if (mant & 1)
            return false;
        long double v = ldexpl((long double)mant, (int)ex - 32768 - 64);
        d = (double)(cls == 0x03 ? -v : v);
    } else if (cls == 0x04) {
        d = 0;
    } else {
        return false; /* NaN and infinities: fetch */
    }
    if (d == floor(d) && d >= INT32_MIN && d <= INT32_MAX)
        return bson_append_int32(out, name, -1, (int32_t)d);
    if (d == floor(d) && fabs(d) < 9.2e18)
        return bson_append_int64(out, name, -1, (int64_t)d);
    return bson_append_double(out, name, -1, d);
}

static bool dec_string(kread *r, bson_t *out, const char *name)
{
    q_buf s;
    uint8_t c;
    bool ok = false;
    q_buf_init(&s);
    while (kr_get(r, &c)) {
        if (c == 0) {
            ok = true;
            break;
        }
        if (c == 1 && !kr_get(r, &c))
            break;
        q_buf_putc(&s, c == 1 || c == 2 ? (uint8_t)(c - 1) : c);
    }
    ok = ok && bson_append_utf8(out, name, -1, s.len ? (const char *)s.data : "", (int)s.len);
    q_buf_cleanup(&s);
    return ok;
}

static bool dec_value(kread *r, bson_t *out, const char *name)
{
    uint8_t t, c;
    uint64_t v;
    if (!kr_get(r, &t))
        return false;
    switch (t) {
    case QK_NUMBER:
        return dec_number(r, out, name);
    case QK_STRING:
        return dec_string(r, out, name);
    case QK_BOOL:
        return kr_get(r, &c) && bson_append_bool(out, name, -1, c != 0);
    case QK_DATE:
        return kr_be(r, 8, &v) &&
               bson_append_date_time(out, name, -1, (int64_t)(v ^ (1ull << 63)));
    case QK_OID: {
        bson_oid_t oid;
        for (int i = 0; i < 12; i++)
            if (!kr_get(r, &oid.bytes[i]))
                return false;
        return bson_append_oid(out, name, -1, &oid);
    }
    default:
        return false; /* null (maybe missing), documents, ...: fetch */
    }
}

bool q_key_decode(const bson_t *pattern, const uint8_t *key, uint32_t klen, bson_t *out)
{
    bson_iter_t it;
    kread r = {.p = key, .n = klen};
    bson_init(out);
    if (!bson_iter_init(&it, pattern))
        return false;
    while (bson_iter_next(&it)) {
        r.x = BSON_ITER_HOLDS_NUMBER(&it) && bson_iter_as_double(&it) < 0 ? 0xFF : 0;
        if (!dec_value(&r, out, bson_iter_key(&it)))
            return false;
    }
    return r.i == r.n;
}

bool q_key_read_number(const uint8_t *key, uint32_t klen, double *out)
{
    kread r = {.p = key, .n = klen};
    uint8_t t;
    bson_t one = BSON_INITIALIZER;
    bson_iter_t it;
    bool ok = kr_get(&r, &t) && t == QK_NUMBER && dec_number(&r, &one, "n") &&
              bson_iter_init_find(&it, &one, "n");
    if (ok)
        *out = bson_iter_as_double(&it);
    bson_destroy(&one);
    return ok;
}
