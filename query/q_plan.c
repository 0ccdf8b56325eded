/*
 * q_plan.c -- the query planner: index bounds from a filter, the candidate
 * plans for a find (every index whose leading field the filter constrains
 * or that provides the sort, plus the hinted one), and the choice among
 * them (a short trial run of each, as MongoDB's MultiPlanStage does; the
 * choice is cached per query shape until the collection's indexes change).
 *
 * Bounds are intervals over encoded keys (q_key.c) with *prefix*
 * semantics: a key k is inside [lo, hi] when k's first |lo| bytes are >= lo
 * and its first |hi| bytes are <= hi.  A lone type byte therefore brackets a
 * whole type ("every number"), "3C 61 62" every string starting "ab", and
 * the empty string everything.  Bounds only narrow the candidates: the
 * matcher still decides on every fetched document, so a bound may be wider
 * than the predicate (never narrower).
 *
 *   per field:  {a: 5} -> [5, 5]      {a: {$gt: 5}} -> (5, <numbers>]
 *               {a: /^ab/} -> ["ab".., "ab"..] + [<regexes>]
 *               $ne $nin $not $exists:true $type ... -> no bounds
 *   compound:   point fields concatenate (cartesian product of $in lists,
 *               at most Q_PLAN_MAX_IVALS intervals); the first range field
 *               ends the bounds; a descending field contributes its bounds
 *               inverted and swapped.
 *
 * On a multikey index the bounds of two predicates on one field are not
 * intersected ({a: {$gt: 5, $lt: 3}} matches [1, 10]); only the first is
 * used, except inside $elemMatch, where one element must satisfy all.
 *
 * Index kinds: a sparse index serves only queries that exclude null on a
 * bounded field; a partial index only queries that contain each predicate
 * of its filter verbatim; a hashed index only equalities and $in (the
 * hashes of the values), never ranges or sorts.  An index provides a sort
 * when, its point-fixed fields set aside, the sort is a prefix of the key
 * pattern in one direction or the other.  A multikey index too, as in 3.x:
 * with each record returned once, at its first key, an ascending scan
 * orders records by their smallest element and a descending one by their
 * largest, which is the in-memory sort's order of arrays.
 * A hint uses the named index whatever its kind (a sparse or partial index
 * may then miss documents, as in MongoDB).
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "q_geo.h"
#include "q_int.h"
#include "q_path.h"
#include "q_text.h"

#define Q_PLAN_MAX_IVALS 200

enum { QK_UNDEF_BYTE = 0x0F, QK_NULL_BYTE = 0x14, QK_STRING_BYTE = 0x3C, QK_REGEX_BYTE = 0x82 };

/* ---- intervals ------------------------------------------------------------------ */

/* A field's ordered interval list, in ascending value space. */
typedef struct oil {
    q_ival *v;
    size_t n, cap;
    bool all;     /* unconstrained */
    bool nullish; /* some interval admits null / missing */
} oil;

static void ival_cleanup(q_ival *iv)
{
    q_buf_cleanup(&iv->lo);
    q_buf_cleanup(&iv->hi);
    q_buf_cleanup(&iv->los);
    q_buf_cleanup(&iv->his);
}

/* Set the rendering of iv's ends (NULL: keep). */
static void ival_show(q_ival *iv, const q_buf *los, const q_buf *his)
{
    if (los) {
        q_buf_reset(&iv->los);
        q_buf_append(&iv->los, los->data, los->len);
    }
    if (his) {
        q_buf_reset(&iv->his);
        q_buf_append(&iv->his, his->data, his->len);
    }
}

/* Render iv's ends from text. */
static void ival_show_s(q_ival *iv, const char *lo, const char *hi)
{
    q_buf_reset(&iv->los);
    q_buf_puts(&iv->los, lo);
    q_buf_reset(&iv->his);
    q_buf_puts(&iv->his, hi);
}

static void oil_init(oil *o, bool all)
{
    memset(o, 0, sizeof *o);
    o->all = all;
}

static void oil_cleanup(oil *o)
{
    for (size_t i = 0; i < o->n; i++)
        ival_cleanup(&o->v[i]);
    free(o->v);
    oil_init(o, true);
}

static q_ival *oil_add(oil *o, const void *lo, size_t lolen, bool loi, const void *hi,
                       size_t hilen, bool hii)
{
    if (o->n == o->cap) {
        o->cap = o->cap ? o->cap * 2 : 4;
        o->v = realloc(o->v, o->cap * sizeof *o->v);
        assert(o->v);
    }
    q_ival *iv = &o->v[o->n++];
    memset(iv, 0, sizeof *iv);
    q_buf_init(&iv->lo);
    q_buf_init(&iv->hi);
    q_buf_init(&iv->los);
    q_buf_init(&iv->his);
    q_buf_append(&iv->lo, lo, lolen);
    q_buf_append(&iv->hi, hi, hilen);
    iv->lo_incl = loi;
    iv->hi_incl = hii;
    iv->point = false; /* callers mark complete single-value encodings */
    o->all = false;
    return iv;
}

/* Compare two lower bounds (a shorter prefix is smaller). */
static int lo_cmp(const q_buf *a, const q_buf *b)
{
    size_t n = a->len < b->len ? a->len : b->len;
    int c = n ? memcmp(a->data, b->data, n) : 0;
    return c ? c : (a->len > b->len) - (a->len < b->len);
}

/* Compare two upper bounds (a prefix covers its extensions: larger). */
static int hi_cmp(const q_buf *a, const q_buf *b)
{
    size_t n = a->len < b->len ? a->len : b->len;
    int c = n ? memcmp(a->data, b->data, n) : 0;
    return c ? c : (a->len < b->len) - (a->len > b->len);
}

static int ival_cmp(const void *pa, const void *pb)
{
    const q_ival *a = pa, *b = pb;
    int c = lo_cmp(&a->lo, &b->lo);
    return c ? c : hi_cmp(&a->hi, &b->hi);
}

/* The intersection of a and b (ascending value space), moved into *a. */
static void oil_intersect(oil *a, oil *b)
{
    oil r;
    if (b->all)
        return;
    if (a->all) {
        *a = *b;
        oil_init(b, true);
        return;
    }
    oil_init(&r, false);
    for (size_t i = 0; i < a->n; i++)
        for (size_t j = 0; j < b->n; j++) {
            const q_ival *x = &a->v[i], *y = &b->v[j];
            int cl = lo_cmp(&x->lo, &y->lo), ch = hi_cmp(&x->hi, &y->hi);
            const q_ival *l = cl > 0 || (cl == 0 && !x->lo_incl) ? x : y;
            const q_ival *h = ch < 0 || (ch == 0 && !x->hi_incl) ? x : y;
            size_t n = l->lo.len < h->hi.len ? l->lo.len : h->hi.len;
            if (n && memcmp(l->lo.data, h->hi.data, n) > 0)
                continue; /* clearly empty */
            q_ival *iv = oil_add(&r, l->lo.data, l->lo.len, l->lo_incl, h->hi.data, h->hi.len,
                                 h->hi_incl);
            iv->point = l == h && l->point;
            ival_show(iv, &l->los, &h->his);
        }
    r.nullish = a->nullish && b->nullish;
    oil_cleanup(a);
    *a = r;
}

/* Append b's intervals to a (a union; overlaps are harmless: scans dedup). */
static void oil_union(oil *a, oil *b)
{
    if (a->all || b->all) {
        oil_cleanup(a);
        return;
    }
    for (size_t i = 0; i < b->n; i++) {
        q_ival *iv = oil_add(a, b->v[i].lo.data, b->v[i].lo.len, b->v[i].lo_incl,
                             b->v[i].hi.data, b->v[i].hi.len, b->v[i].hi_incl);
        iv->point = b->v[i].point;
        ival_show(iv, &b->v[i].los, &b->v[i].his);
    }
    a->nullish |= b->nullish;
}

/* ---- one predicate's bounds ----------------------------------------------------- */

static q_ival *oil_byte(oil *o, uint8_t lo, uint8_t hi)
{
    return oil_add(o, &lo, 1, true, &hi, 1, true);
}

static bool is_operator_doc(const bson_iter_t *v)
{
    bson_iter_t sub;
    return BSON_ITER_HOLDS_DOCUMENT(v) && bson_iter_recurse(v, &sub) && bson_iter_next(&sub) &&
           bson_iter_key(&sub)[0] == '$';
}

/* Render a regex's string interval: ["ab", "ac") for the prefix "ab" (its
 * encoded bytes, escapes undone), ["", {}) when there is none. */
static void regex_show(q_ival *iv, const uint8_t *p, size_t n, const char *pattern,
                       const char *flags)
{
    q_buf s;
    (void)pattern;
    (void)flags;
    q_buf_init(&s);
    for (size_t i = 0; i < n; i++)
        q_buf_putc(&s, p[i] == 1 && i + 1 < n ? (uint8_t)(p[++i] - 1) : p[i]);
    ival_show_s(iv, "[\"", "");
    q_buf_append(&iv->los, s.data, s.len);
    q_buf_puts(&iv->los, "\"");
    if (s.len == 0) {
        q_buf_puts(&iv->his, "{})");
    } else {
        s.data[s.len - 1]++;
        q_buf_puts(&iv->his, "\"");
        q_buf_append(&iv->his, s.data, s.len);
        q_buf_puts(&iv->his, "\")");
    }
    q_buf_cleanup(&s);
}

/* Bounds of a regex: the literal prefix of an anchored, case-sensitive,
 * single-line pattern, plus every stored regex value (which {a: /x/} also
 * matches).  Anything fancier: all strings. */
static void oil_regex(oil *o, const char *pattern, const char *flags)
{
    q_buf p;
    q_buf_init(&p);
    q_buf_putc(&p, QK_STRING_BYTE);
    bool simple = pattern[0] == '^' && !strchr(pattern, '|') && !strpbrk(flags, "imx");
    for (const char *s = pattern + 1; simple && *s; s++) {
        if (strchr(".[]()*+?{}\\^$", *s)) {
            if (strchr("*?{", *s) && p.len > 1)
                p.len--; /* the last literal is optional */
            break;
        }
        if ((uint8_t)*s <= 1) {
            q_buf_putc(&p, 1);
            q_buf_putc(&p, (uint8_t)(*s + 1));
        } else {
            q_buf_putc(&p, (uint8_t)*s);
        }
    }
    if (p.len > 1 && (uint8_t)p.data[p.len - 1] == 1)
        p.len--; /* never end inside an escape */
    q_ival *iv = oil_add(o, p.data, p.len, true, p.data, p.len, true);
    regex_show(iv, p.data + 1, p.len - 1, pattern, flags);
    iv = oil_byte(o, QK_REGEX_BYTE, QK_REGEX_BYTE);
    ival_show_s(iv, "[/", "/]");
    q_buf_puts(&iv->los, pattern);
    q_buf_printf(&iv->los, "/%s", flags);
    q_buf_reset(&iv->his);
    q_buf_printf(&iv->his, "/%s/%s]", pattern, flags);
    q_buf_cleanup(&p);
}

/* {path: v} equality. */
static void oil_eq(oil *o, const bson_iter_t *v, bool dotted)
{
    q_buf k, r;
    q_ival *iv;
    switch (bson_iter_type(v)) {
    case BSON_TYPE_ARRAY: {
        /* A field equal to the array [x, ...] has x among its multikey
         * keys; an array holding the array as an element has the whole
         * array as a key: MongoDB's two point bounds, [x, x] and
         * [[x, ...], [x, ...]] (the filter stays; neither is exact).  An
         * empty array, or a first element that has no point bound of its
         * own (null, undefined, an array, a regex): no bounds. */
        bson_iter_t el;
        if (!bson_iter_recurse(v, &el) || !bson_iter_next(&el))
            return;
        switch (bson_iter_type(&el)) {
        case BSON_TYPE_NULL: case BSON_TYPE_UNDEFINED: case BSON_TYPE_ARRAY:
        case BSON_TYPE_REGEX:
            return;
        default:
            break;
        }
        /* In key order (an element of a type above arrays sorts after). */
        const bson_iter_t *both[2] = {&el, v};
        q_buf ka, kb;
        q_buf_init(&ka);
        q_buf_init(&kb);
        q_key_append_value(&ka, &el, false);
        q_key_append_value(&kb, v, false);
        size_t mn = ka.len < kb.len ? ka.len : kb.len;
        int c = memcmp(ka.data, kb.data, mn);
        if (c > 0 || (c == 0 && ka.len > kb.len)) {
            both[0] = v;
            both[1] = &el;
        }
        q_buf_cleanup(&ka);
        q_buf_cleanup(&kb);
        for (int i = 0; i < 2; i++) {
            q_buf_init(&k);
            q_key_append_value(&k, both[i], false);
            iv = oil_add(o, k.data, k.len, true, k.data, k.len, true);
            iv->point = true;
            q_buf_init(&r);
            q_render_value(&r, both[i]);
            ival_show_s(iv, "[", "");
            q_buf_append(&iv->los, r.data, r.len);
            q_buf_append(&iv->his, r.data, r.len);
            q_buf_putc(&iv->his, ']');
            q_buf_cleanup(&r);
            q_buf_cleanup(&k);
        }
        return;
    }
    case BSON_TYPE_NULL:
        if (dotted)
            return;
        iv = oil_byte(o, QK_NULL_BYTE, QK_NULL_BYTE);
        iv->point = true;
        ival_show_s(iv, "[null", "null]");
        o->nullish = true;
        return;
    case BSON_TYPE_UNDEFINED:
        return;
    case BSON_TYPE_REGEX: {
        const char *flags, *pat = bson_iter_regex(v, &flags);
        oil_regex(o, pat, flags ? flags : "");
        return;
    }
    default:
        q_buf_init(&k);
        q_key_append_value(&k, v, false);
        iv = oil_add(o, k.data, k.len, true, k.data, k.len, true);
        iv->point = true;
        q_buf_init(&r);
        q_render_value(&r, v);
        ival_show_s(iv, "[", "");
        q_buf_append(&iv->los, r.data, r.len);
        q_buf_append(&iv->his, r.data, r.len);
        q_buf_putc(&iv->his, ']');
        q_buf_cleanup(&r);
        q_buf_cleanup(&k);
    }
}

/* {$gt: v} and friends: bracketed by v's type. */
static void oil_range(oil *o, const char *op, const bson_iter_t *v)
{
    q_buf k, r;
    q_ival *iv;
    switch (bson_iter_type(v)) {
    case BSON_TYPE_ARRAY: case BSON_TYPE_DOCUMENT: case BSON_TYPE_NULL:
    case BSON_TYPE_UNDEFINED: case BSON_TYPE_MINKEY: case BSON_TYPE_MAXKEY:
    case BSON_TYPE_REGEX:
        return;
    default:
        break;
    }
    q_buf_init(&k);
    q_buf_init(&r);
    q_key_append_value(&k, v, false);
    q_render_value(&r, v);
    bool incl = op[3] == 'e', num = BSON_ITER_HOLDS_NUMBER(v), str = BSON_ITER_HOLDS_UTF8(v);
    if (op[1] == 'g') {
        iv = oil_add(o, k.data, k.len, incl, k.data, 1, true);
        ival_show_s(iv, incl ? "[" : "(", num ? "inf.0]" : str ? "{})" : "MaxKey]");
        q_buf_append(&iv->los, r.data, r.len);
    } else {
        iv = oil_add(o, k.data, 1, true, k.data, k.len, incl);
        ival_show_s(iv, num ? "[-inf.0" : str ? "[\"\"" : "[MinKey", "");
        q_buf_append(&iv->his, r.data, r.len);
        q_buf_putc(&iv->his, incl ? ']' : ')');
    }
    q_buf_cleanup(&r);
    q_buf_cleanup(&k);
}

static void oil_ops(oil *o, const bson_iter_t *doc, bool dotted, bool multikey);

/* One operator of an operator document. */
static void oil_op(oil *o, const bson_iter_t *op, const bson_iter_t *opdoc, bool dotted)
{
    const char *name = bson_iter_key(op);
    bson_iter_t sub, opt;
    if (strcmp(name, "$eq") == 0) {
        oil_eq(o, op, dotted);
    } else if (!strcmp(name, "$gt") || !strcmp(name, "$gte") || !strcmp(name, "$lt") ||
               !strcmp(name, "$lte")) {
        oil_range(o, name, op);
    } else if (strcmp(name, "$in") == 0 && BSON_ITER_HOLDS_ARRAY(op) &&
               bson_iter_recurse(op, &sub)) {
        oil_init(o, false);
        while (bson_iter_next(&sub)) {
            oil one;
            oil_init(&one, true);
            if (!is_operator_doc(&sub))
                oil_eq(&one, &sub, dotted);
            oil_union(o, &one);
            oil_cleanup(&one);
        }
        if (!o->all && o->n == 0)
            o->all = true; /* $in: [] matches nothing; keep it simple */
    } else if (strcmp(name, "$regex") == 0 && BSON_ITER_HOLDS_UTF8(op)) {
        const char *flags = "";
        opt = *opdoc;
        if (bson_iter_find(&opt, "$options") && BSON_ITER_HOLDS_UTF8(&opt))
            flags = bson_iter_utf8(&opt, NULL);
        oil_regex(o, bson_iter_utf8(op, NULL), flags);
    } else if (strcmp(name, "$regex") == 0 && BSON_ITER_HOLDS_REGEX(op)) {
        oil_eq(o, op, dotted);
    } else if (strcmp(name, "$exists") == 0 && !bson_iter_as_bool(op) && !dotted) {
        q_ival *iv = oil_byte(o, QK_NULL_BYTE, QK_NULL_BYTE);
        iv->point = true;
        ival_show_s(iv, "[null", "null]");
        o->nullish = true;
    } else if (strcmp(name, "$elemMatch") == 0 && is_operator_doc(op)) {
        oil_ops(o, op, dotted, false);
    } else if (strcmp(name, "$all") == 0 && BSON_ITER_HOLDS_ARRAY(op) &&
               bson_iter_recurse(op, &sub) && bson_iter_next(&sub) &&
               !BSON_ITER_HOLDS_ARRAY(&sub) && !BSON_ITER_HOLDS_DOCUMENT(&sub)) {
        oil_eq(o, &sub, dotted); /* an $and of equalities: the first bounds the scan */
    }
}

/* The bounds of an operator document; `multikey`: do not intersect. */
static void oil_ops(oil *o, const bson_iter_t *doc, bool dotted, bool multikey)
{
    bson_iter_t it, opdoc;
    bson_iter_recurse(doc, &it);
    opdoc = it;
    while (bson_iter_next(&it)) {
        oil one;
        oil_init(&one, true);
        oil_op(&one, &it, &opdoc, dotted);
        if (o->all || !multikey)
            oil_intersect(o, &one);
        oil_cleanup(&one);
    }
}

static void oil_field_in(oil *o, const bson_t *filter, const char *path, bool multikey,
                         bool dotted);

/* {a: {$elemMatch: {b: ...}}} constrains path "a.b": the bounds of the
 * inner filter on "b" (on a multikey index, still not intersected: b itself
 * may be an array). */
static void oil_elem_match(oil *o, const bson_iter_t *it, const char *path, bool multikey)
{
    bson_iter_t op, all;
    size_t kl = strlen(bson_iter_key(it));
    if (strncmp(path, bson_iter_key(it), kl) != 0 || path[kl] != '.' ||
        !BSON_ITER_HOLDS_DOCUMENT(it) || !bson_iter_recurse(it, &op) || !bson_iter_next(&op))
        return;
    /* {a: {$all: [{$elemMatch: {...}}, ...]}} is an $and of its $elemMatch
     * predicates (as MongoDB parses it): the first one bounds the scan. */
    if (strcmp(bson_iter_key(&op), "$all") == 0 && BSON_ITER_HOLDS_ARRAY(&op) &&
        bson_iter_recurse(&op, &all) && bson_iter_next(&all) && BSON_ITER_HOLDS_DOCUMENT(&all) &&
        bson_iter_recurse(&all, &op) && !bson_iter_next(&op))
        return;
    if (strcmp(bson_iter_key(&op), "$elemMatch") != 0 || is_operator_doc(&op) ||
        !BSON_ITER_HOLDS_DOCUMENT(&op))
        return;
    bson_t inner;
    const uint8_t *data;
    uint32_t len;
    bson_iter_document(&op, &len, &data);
    if (bson_init_static(&inner, data, len))
        oil_field_in(o, &inner, path + kl + 1, multikey, true);
}

/* Bounds for `path` from every top-level (and $and-nested) predicate on it. */
static void oil_field(oil *o, const bson_t *filter, const char *path, bool multikey)
{
    oil_field_in(o, filter, path, multikey, strchr(path, '.') != NULL);
}

static void oil_field_in(oil *o, const bson_t *filter, const char *path, bool multikey,
                         bool dotted)
{
    bson_iter_t it, sub;
    if (!filter || !bson_iter_init(&it, filter))
        return;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        oil one;
        oil_init(&one, true);
        if (strcmp(k, "$and") == 0 && BSON_ITER_HOLDS_ARRAY(&it) &&
            bson_iter_recurse(&it, &sub)) {
            while (bson_iter_next(&sub)) {
                bson_t d;
                const uint8_t *data;
                uint32_t len;
                if (!BSON_ITER_HOLDS_DOCUMENT(&sub))
                    continue;
                bson_iter_document(&sub, &len, &data);
                if (bson_init_static(&d, data, len))
                    oil_field_in(&one, &d, path, multikey, dotted);
                if (o->all || !multikey)
                    oil_intersect(o, &one);
                oil_cleanup(&one);
            }
            continue;
        }
        if (strcmp(k, path) != 0) {
            oil_elem_match(&one, &it, path, multikey);
            if (!one.all && (o->all || !multikey))
                oil_intersect(o, &one);
            oil_cleanup(&one);
            continue;
        }
        if (is_operator_doc(&it))
            oil_ops(&one, &it, dotted, multikey);
        else
            oil_eq(&one, &it, dotted);
        if (o->all || !multikey)
            oil_intersect(o, &one);
        oil_cleanup(&one);
    }
}

/* ---- compound bounds ------------------------------------------------------------ */

typedef struct kfield {
    const char *name;
    bool desc;
} kfield;

/* The fields of a key pattern (at most 32); 0 for a hashed/text pattern. */
static size_t key_fields(const bson_t *key, kfield *f)
{
    bson_iter_t it;
    size_t n = 0;
    if (!bson_iter_init(&it, key))
        return 0;
    while (bson_iter_next(&it) && n < 32) {
        if (!BSON_ITER_HOLDS_NUMBER(&it))
            return 0;
        f[n].name = bson_iter_key(&it);
        f[n++].desc = bson_iter_as_double(&it) < 0;
    }
    return n;
}

static void put_bound(q_buf *b, const q_buf *src, bool desc)
{
    size_t at = b->len;
    q_buf_append(b, src->data, src->len);
    for (size_t i = at; desc && i < b->len; i++)
        b->data[i] = (uint8_t)~b->data[i];
}

/* Extend every interval of *cur by every interval of `o` (desc: inverted,
 * swapped); *cur is replaced. */
static void extend(oil *cur, const oil *o, bool desc)
{
    oil r;
    oil_init(&r, false);
    for (size_t i = 0; i < cur->n; i++)
        for (size_t j = 0; j < o->n; j++) {
            const q_ival *p = &cur->v[i], *x = &o->v[j];
            q_ival *iv = oil_add(&r, p->lo.data, p->lo.len, true, p->hi.data, p->hi.len, true);
            put_bound(&iv->lo, desc ? &x->hi : &x->lo, desc);
            put_bound(&iv->hi, desc ? &x->lo : &x->hi, desc);
            iv->lo_incl = desc ? x->hi_incl : x->lo_incl;
            iv->hi_incl = desc ? x->lo_incl : x->hi_incl;
        }
    oil_cleanup(cur);
    *cur = r;
}

/*
 * The hashes of the values a filter fixes `field` to: its equalities and
 * the members of its $eq and $in, at the top level or in a top-level $and
 * (a union there: the FETCH applies the whole filter).  Any other
 * predicate on the field (or a regex in $in, or an array value) is false.
 */
static bool hashed_points(const bson_t *filter, const char *field, int64_t *h, size_t *n,
                          size_t cap, int depth)
{
    bson_iter_t it, op, el;
    if (depth > 4 || !bson_iter_init(&it, filter))
        return false;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "$and") == 0 && BSON_ITER_HOLDS_ARRAY(&it)) {
            bson_iter_recurse(&it, &el);
            while (bson_iter_next(&el)) {
                const uint8_t *data;
                uint32_t len;
                bson_t sub;
                if (!BSON_ITER_HOLDS_DOCUMENT(&el))
                    return false;
                bson_iter_document(&el, &len, &data);
                if (!bson_init_static(&sub, data, len) ||
                    !hashed_points(&sub, field, h, n, cap, depth + 1))
                    return false;
            }
            continue;
        }
        if (strcmp(k, field) != 0)
            continue;
        bool ops = BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &op) &&
                   bson_iter_next(&op) && bson_iter_key(&op)[0] == '$';
        if (!ops) {
            if (BSON_ITER_HOLDS_ARRAY(&it) || BSON_ITER_HOLDS_REGEX(&it) || *n == cap)
                return false;
            h[(*n)++] = q_hash_element(&it, 0);
            continue;
        }
        do {
            const char *o = bson_iter_key(&op);
            if (strcmp(o, "$eq") == 0 && !BSON_ITER_HOLDS_ARRAY(&op) && *n < cap) {
                h[(*n)++] = q_hash_element(&op, 0);
            } else if (strcmp(o, "$in") == 0 && BSON_ITER_HOLDS_ARRAY(&op)) {
                bson_iter_recurse(&op, &el);
                while (bson_iter_next(&el)) {
                    if (BSON_ITER_HOLDS_ARRAY(&el) || BSON_ITER_HOLDS_REGEX(&el) || *n == cap)
                        return false;
                    h[(*n)++] = q_hash_element(&el, 0);
                }
            } else {
                return false;
            }
        } while (bson_iter_next(&op));
    }
    return true;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* A hashed index: the hashes of an equality or $in, else nothing.  Explain
 * shows the hashes, as MongoDB does. */
static void hashed_bounds(const q_index *ix, const bson_t *filter, q_plan *p, bool *leading)
{
    bson_iter_t it;
    oil o, h;
    int64_t hv[Q_PLAN_MAX_IVALS];
    size_t nh = 0;
    *leading = false;
    if (!bson_iter_init(&it, &ix->key) || !bson_iter_next(&it))
        return;
    oil_init(&o, true);
    oil_init(&h, false);
    oil_field(&o, filter, bson_iter_key(&it), true);
    bool points = !o.all && o.n > 0;
    for (size_t i = 0; i < o.n; i++)
        points &= o.v[i].point;
    points = points && hashed_points(filter, bson_iter_key(&it), hv, &nh, Q_PLAN_MAX_IVALS, 0) &&
             nh > 0;
    q_sort(hv, nh, sizeof *hv, cmp_i64);
    for (size_t i = 0; points && i < nh; i++) {
        if (i > 0 && hv[i] == hv[i - 1])
            continue;
        bson_t one = BSON_INITIALIZER;
        bson_iter_t v;
        q_buf k;
        char lo[32], hi[32];
        BSON_APPEND_INT64(&one, "h", hv[i]);
        bson_iter_init_find(&v, &one, "h");
        q_buf_init(&k);
        q_key_append_value(&k, &v, false);
        q_ival *iv = oil_add(&h, k.data, k.len, true, k.data, k.len, true);
        iv->point = true;
        snprintf(lo, sizeof lo, "[%lld", (long long)hv[i]);
        snprintf(hi, sizeof hi, "%lld]", (long long)hv[i]);
        ival_show_s(iv, lo, hi);
        q_buf_cleanup(&k);
        bson_destroy(&one);
    }
    if (points) {
        q_sort(h.v, h.n, sizeof *h.v, ival_cmp);
        p->iv = h.v;
        p->niv = h.n;
        p->nused = 1;
        p->eqmask = h.n == 1;
        *leading = true;
    } else {
        oil_cleanup(&h);
    }
    oil_cleanup(&o);
}

/*
 * Fill p->iv with ix's bounds for filter.  *leading: the first field is
 * constrained; *sparse_ok: some constrained field excludes null (so every
 * match has a key in a sparse index).  p->eqmask: fields fixed to one point.
 */
static void index_bounds(const q_index *ix, const bson_t *filter, q_plan *p, bool *leading,
                         bool *sparse_ok)
{
    kfield f[32];
    size_t nf = key_fields(&ix->key, f);
    oil cur;
    oil_init(&cur, false);
    oil_add(&cur, "", 0, true, "", 0, true);
    *leading = *sparse_ok = false;
    p->eqmask = 0;
    p->nused = 0;
    if (ix->hashed) {
        oil_cleanup(&cur);
        hashed_bounds(ix, filter, p, leading);
        *sparse_ok = *leading;
        return;
    }
    if (ix->gp) { /* q_geo_index.c */
        oil_cleanup(&cur);
        *leading = *sparse_ok = q_geo_bounds(ix, filter, p);
        return;
    }
    for (size_t i = 0; i < nf; i++) {
        oil o;
        oil_init(&o, true);
        oil_field(&o, filter, f[i].name, Q_MULTIKEY(ix));
        if (o.all || o.n == 0 || cur.n * o.n > Q_PLAN_MAX_IVALS) {
            oil_cleanup(&o);
            break;
        }
        *leading |= i == 0;
        *sparse_ok |= !o.nullish;
        bool points = true;
        for (size_t j = 0; j < o.n; j++)
            points &= o.v[j].point;
        if (points && o.n == 1)
            p->eqmask |= 1u << i;
        q_sort(o.v, o.n, sizeof *o.v, ival_cmp);
        extend(&cur, &o, f[i].desc);
        p->nused = i + 1;
        oil_cleanup(&o);
        if (!points)
            break;
    }
    q_sort(cur.v, cur.n, sizeof *cur.v, ival_cmp);
    p->iv = cur.v;
    p->niv = cur.n;
}

/*
 * Can ix deliver `sort` in order given the point-fixed fields eqmask?
 * 1 scanning forward, -1 backward, 0 no.  Point fields may be skipped in
 * both the pattern and the sort; the rest must match in order with one
 * consistent direction.  Never on a multikey index.
 */
static int sort_direction(const q_index *ix, const bson_t *sort, uint32_t eqmask)
{
    kfield f[32];
    size_t nf = key_fields(&ix->key, f), i = 0;
    bson_iter_t it;
    int dir = 0;
    if (!sort || bson_empty(sort))
        return 1;
    if (ix->hashed || nf == 0 || !bson_iter_init(&it, sort))
        return 0;
    while (bson_iter_next(&it)) {
        const char *name = bson_iter_key(&it);
        int d = bson_iter_as_double(&it) < 0 ? -1 : 1;
        while (i < nf && (eqmask & (1u << i)) && strcmp(f[i].name, name) != 0)
            i++;
        if (i < nf && strcmp(f[i].name, name) == 0) {
            int want = f[i].desc ? -d : d;
            if (!(eqmask & (1u << i)) && dir && want != dir)
                return 0;
            if (!(eqmask & (1u << i)))
                dir = want;
            i++;
            continue;
        }
        bool fixed = false;
        for (size_t j = 0; j < nf; j++)
            fixed |= (eqmask & (1u << j)) && strcmp(f[j].name, name) == 0;
        if (!fixed)
            return 0;
    }
    return dir ? dir : 1;
}

/* ---- plans ---------------------------------------------------------------------- */

void q_plan_cleanup(q_plan *p)
{
    q_text_plan_free(p->text);
    if (p->bounds)
        bson_destroy(p->bounds);
    for (size_t i = 0; i < p->niv; i++)
        ival_cleanup(&p->iv[i]);
    free(p->iv);
    memset(p, 0, sizeof *p);
}

void q_plan_copy(const q_plan *src, q_plan *dst)
{
    oil o;
    oil_init(&o, false);
    for (size_t i = 0; i < src->niv; i++)
        oil_add(&o, src->iv[i].lo.data, src->iv[i].lo.len, src->iv[i].lo_incl,
                src->iv[i].hi.data, src->iv[i].hi.len, src->iv[i].hi_incl)->point =
            src->iv[i].point;
    *dst = *src;
    dst->iv = o.v;
    dst->niv = o.n;
    dst->bounds = NULL;
    dst->text = q_text_plan_dup(src->text);
}

/* One interval as explain shows it; `rev`: read from the top down. */
static void show_ival(const q_ival *iv, bool rev, q_buf *out)
{
    q_buf_reset(out);
    if (!rev) {
        q_buf_append(out, iv->los.data, iv->los.len);
        q_buf_puts(out, ", ");
        q_buf_append(out, iv->his.data, iv->his.len);
        return;
    }
    if (iv->his.len == 0 || iv->los.len == 0)
        return;
    q_buf_putc(out, iv->his.data[iv->his.len - 1] == ']' ? '[' : '(');
    q_buf_append(out, iv->his.data, iv->his.len - 1);
    q_buf_puts(out, ", ");
    q_buf_append(out, iv->los.data + 1, iv->los.len - 1);
    q_buf_putc(out, iv->los.data[0] == '[' ? ']' : ')');
}

/* p->bounds: each key field's intervals in scan order, as explain shows.
 * Only explain asks: rendering costs more than an _id lookup. */
void q_plan_render_bounds(q_plan *p, const bson_t *filter)
{
    if (!p->ix || p->bounds || p->text)
        return;
    kfield f[32];
    size_t nf = key_fields(&p->ix->key, f);
    q_buf s;
    char k[24];
    q_buf_init(&s);
    p->bounds = bson_new();
    if (p->ix->hashed || p->ix->gp) { /* shown by hash / cell, as MongoDB shows them */
        bson_iter_t it;
        bson_t arr;
        bson_iter_init(&it, &p->ix->key);
        bson_iter_next(&it);
        bson_append_array_begin(p->bounds, bson_iter_key(&it), -1, &arr);
        for (size_t j = 0; j < p->niv; j++) {
            show_ival(&p->iv[j], false, &s);
            snprintf(k, sizeof k, "%zu", j);
            bson_append_utf8(&arr, k, -1, p->nused ? q_buf_cstr(&s) : "[MinKey, MaxKey]", -1);
        }
        bson_append_array_end(p->bounds, &arr);
    }
    for (size_t i = 0; i < nf; i++) {
        bson_t arr;
        bool rev = f[i].desc != (p->dir < 0);
        oil o;
        oil_init(&o, true);
        if (i < p->nused)
            oil_field(&o, filter, f[i].name, Q_MULTIKEY(p->ix));
        q_sort(o.v, o.n, sizeof *o.v, ival_cmp);
        bson_append_array_begin(p->bounds, f[i].name, -1, &arr);
        for (size_t j = 0; j < o.n; j++) {
            show_ival(&o.v[rev ? o.n - 1 - j : j], rev, &s);
            snprintf(k, sizeof k, "%zu", j);
            bson_append_utf8(&arr, k, -1, q_buf_cstr(&s), -1);
        }
        if (o.n == 0)
            bson_append_utf8(&arr, "0", 1, rev ? "[MaxKey, MinKey]" : "[MinKey, MaxKey]", -1);
        bson_append_array_end(p->bounds, &arr);
        oil_cleanup(&o);
    }
    q_buf_cleanup(&s);
}

/* Does filter (top level, through $and) hold element e verbatim? */
static bool filter_has(const bson_t *filter, const bson_iter_t *e)
{
    bson_iter_t it, sub;
    const uint8_t *a, *b;
    uint32_t al, bl;
    if (!filter || !bson_iter_init(&it, filter))
        return false;
    while (bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), "$and") == 0 && BSON_ITER_HOLDS_ARRAY(&it) &&
            bson_iter_recurse(&it, &sub)) {
            while (bson_iter_next(&sub)) {
                bson_t d;
                if (!BSON_ITER_HOLDS_DOCUMENT(&sub))
                    continue;
                bson_iter_document(&sub, &al, &a);
                if (bson_init_static(&d, a, al) && filter_has(&d, e))
                    return true;
            }
            continue;
        }
        if (strcmp(bson_iter_key(&it), bson_iter_key(e)) || bson_iter_type(&it) != bson_iter_type(e))
            continue;
        a = it.raw + it.d1; /* the value's bytes: [d1, next_off) */
        b = e->raw + e->d1;
        al = it.next_off - it.d1;
        bl = e->next_off - e->d1;
        if (al == bl && memcmp(a, b, al) == 0)
            return true;
    }
    return false;
}

/* Does the query imply ix's partialFilterExpression?  minidoc's rule: each
 * of its predicates (top level or in a top-level $and) appears verbatim in
 * the query.  MongoDB also proves range implications ({a: {$gt: 10}}
 * implies {a: {$gt: 5}}). */
static bool implies_partial(const q_index *ix, const bson_t *filter)
{
    bson_iter_t it, pf, sub;
    bson_t d, pd;
    const uint8_t *data;
    uint32_t len;
    if (!bson_iter_init_find(&pf, &ix->spec, "partialFilterExpression"))
        return true;
    bson_iter_document(&pf, &len, &data);
    if (!bson_init_static(&pd, data, len) || !bson_iter_init(&it, &pd))
        return false;
    while (bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), "$and") == 0 && bson_iter_recurse(&it, &sub)) {
            while (bson_iter_next(&sub)) {
                bson_iter_t e;
                bson_iter_document(&sub, &len, &data);
                if (!bson_init_static(&d, data, len) || !bson_iter_init(&e, &d))
                    return false;
                while (bson_iter_next(&e))
                    if (!filter_has(filter, &e))
                        return false;
            }
        } else if (!filter_has(filter, &it)) {
            return false;
        }
    }
    return true;
}

/* The plan of index ix for the query, or false when ix does not fit. */
static bool index_plan(q_index *ix, const bson_t *filter, const bson_t *sort, bool hinted,
                       q_plan *p)
{
    bool leading, sparse_ok;
    memset(p, 0, sizeof *p);
    p->ix = ix;
    index_bounds(ix, filter, p, &leading, &sparse_ok);
    int sd = sort_direction(ix, sort, p->eqmask);
    bool sorts = sort && !bson_empty(sort) && sd != 0;
    p->dir = sd ? sd : 1;
    p->sort_provided = sd != 0;
    bool whole = !ix->sparse && !ix->partial; /* every document has keys */
    if (!hinted && ix->partial && !implies_partial(ix, filter))
        leading = sorts = false;
    if (!hinted && !((leading && (!ix->sparse || sparse_ok)) || (sorts && whole))) {
        q_plan_cleanup(p);
        return false;
    }
    if (!leading) { /* the whole index */
        q_plan_cleanup(p);
        p->ix = ix;
        p->dir = sd ? sd : 1;
        p->sort_provided = sd != 0;
        oil o;
        oil_init(&o, false);
        oil_add(&o, "", 0, true, "", 0, true);
        p->iv = o.v;
        p->niv = o.n;
        p->nused = 0;
    }
    return true;
}

static void plans_push(q_plan **v, size_t *n, const q_plan *p)
{
    q_plan *nv = realloc(*v, (*n + 1) * sizeof *nv);
    assert(nv);
    *v = nv;
    nv[(*n)++] = *p;
}

static int hint_plan(q_coll *c, const bson_t *filter, const bson_t *sort, const bson_iter_t *h,
                     q_plan **v, size_t *n, md_error *err)
{
    q_plan p;
    q_index *ix = NULL;
    bson_iter_t f;
    if (BSON_ITER_HOLDS_UTF8(h)) {
        ix = q_index_find(c, bson_iter_utf8(h, NULL));
    } else if (BSON_ITER_HOLDS_DOCUMENT(h)) {
        bson_t d;
        const uint8_t *data;
        uint32_t len;
        bson_iter_document(h, &len, &data);
        if (bson_init_static(&d, data, len) && bson_iter_init_find(&f, &d, "$natural")) {
            memset(&p, 0, sizeof p);
            p.dir = bson_iter_as_double(&f) < 0 ? -1 : 1;
            p.hinted = true;
            p.sort_provided = !sort || bson_empty(sort);
            plans_push(v, n, &p);
            return 0;
        }
        ix = bson_init_static(&d, data, len) ? q_index_find_key(c, &d) : NULL;
    }
    if (!ix)
        return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                     "error processing query: planner returned error: bad hint");
    index_plan(ix, filter, sort, true, &p);
    p.hinted = true;
    plans_push(v, n, &p);
    return 0;
}

int q_plan_enumerate(q_coll *c, const bson_t *filter, const bson_t *sort,
                     const bson_iter_t *hint, q_plan **out, size_t *n, md_error *err)
{
    q_plan p;
    bson_iter_t text;
    bool has_text;
    *out = NULL;
    *n = 0;
    int rc = q_text_filter_find(filter, &text, &has_text, err);
    if (rc || has_text) { /* $text: the TEXT plan, whatever the hint */
        if (!rc && (rc = q_text_plan_make(c, filter, &text, &p, err)) == 0) {
            p.sort_provided = !sort || bson_empty(sort);
            plans_push(out, n, &p);
        }
        return rc;
    }
    int g = q_geo_near_plan(c, filter, out, n, err);
    if (g != Q_GEO_NOT_NEAR)
        return g;
    if (hint)
        return hint_plan(c, filter, sort, hint, out, n, err);
    q_index *id = c->nidx > 0 && strcmp(c->idx[0]->name, "_id_") == 0
                      ? c->idx[0]
                      : q_index_find(c, "_id_"); /* autoIndexId: false */
    if (id && q_idhack_query(filter, NULL) && index_plan(id, filter, NULL, false, &p)) {
        p.idhack = true;
        p.sort_provided = !sort || bson_empty(sort);
        plans_push(out, n, &p);
        return 0;
    }
    for (size_t i = 0; i < c->nidx; i++)
        if (index_plan(c->idx[i], filter, sort, false, &p))
            plans_push(out, n, &p);
    if (*n == 0) {
        memset(&p, 0, sizeof p);
        p.dir = 1;
        p.sort_provided = !sort || bson_empty(sort);
        plans_push(out, n, &p);
    }
    return 0;
}

void q_plans_free(q_plan *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        q_plan_cleanup(&v[i]);
    free(v);
}

/* ---- covered queries ------------------------------------------------------------- */

/* A value whose bounds are exact: a plain scalar (not null, NaN, array,
 * document, regex, MinKey/MaxKey). */
static bool exact_value(const bson_iter_t *v)
{
    switch (bson_iter_type(v)) {
    case BSON_TYPE_ARRAY: case BSON_TYPE_DOCUMENT: case BSON_TYPE_NULL:
    case BSON_TYPE_UNDEFINED: case BSON_TYPE_MINKEY: case BSON_TYPE_MAXKEY:
    case BSON_TYPE_REGEX:
        return false;
    case BSON_TYPE_DOUBLE:
        return bson_iter_double(v) == bson_iter_double(v);
    default:
        return true;
    }
}

/* A regex predicate ({a: /re/} or {a: {$regex: ..}}): not decided by the
 * bounds, but decidable on the key's value, which a covered scan has. */
static bool is_regex_pred(const bson_iter_t *v)
{
    bson_iter_t op;
    if (BSON_ITER_HOLDS_REGEX(v))
        return true;
    if (!BSON_ITER_HOLDS_DOCUMENT(v) || !bson_iter_recurse(v, &op))
        return false;
    bool any = false;
    while (bson_iter_next(&op)) {
        const char *name = bson_iter_key(&op);
        if (strcmp(name, "$regex") != 0 && strcmp(name, "$options") != 0)
            return false;
        any = true;
    }
    return any;
}

/* Is every predicate of `filter` decided by p's index keys?  Exactly by
 * the bounds, or (*key_filter set) by the matcher run on the decoded key,
 * as MongoDB filters a covered IXSCAN's keys for a regex. */
static bool filter_exact(const q_plan *p, const bson_t *filter, bool *key_filter)
{
    kfield f[32];
    size_t nf = key_fields(&p->ix->key, f);
    bson_iter_t it, op, e;
    *key_filter = false;
    if (!filter || !bson_iter_init(&it, filter))
        return true;
    while (bson_iter_next(&it)) {
        size_t i = 0;
        while (i < nf && strcmp(f[i].name, bson_iter_key(&it)) != 0)
            i++;
        if (i < nf && is_regex_pred(&it)) {
            *key_filter = true;
            continue;
        }
        if (i >= p->nused)
            return false;
        if (!is_operator_doc(&it)) {
            if (!exact_value(&it))
                return false;
            continue;
        }
        bson_iter_recurse(&it, &op);
        while (bson_iter_next(&op)) {
            const char *name = bson_iter_key(&op);
            if (strcmp(name, "$in") == 0 && BSON_ITER_HOLDS_ARRAY(&op) &&
                bson_iter_recurse(&op, &e)) {
                while (bson_iter_next(&e))
                    if (!exact_value(&e))
                        return false;
            } else if (strcmp(name, "$eq") && strcmp(name, "$gt") && strcmp(name, "$gte") &&
                       strcmp(name, "$lt") && strcmp(name, "$lte")) {
                return false;
            } else if (!exact_value(&op)) {
                return false;
            }
        }
    }
    return true;
}

bson_t *q_plan_key_prefilter(const q_plan *p, const bson_t *filter)
{
    kfield f[32];
    bson_iter_t it;
    bson_t *pre = NULL;
    if (!p->ix || p->idhack || p->covered || p->text || p->geo_near || Q_MULTIKEY(p->ix) ||
        p->ix->hashed || p->ix->gp || p->ix->text || !filter || !bson_iter_init(&it, filter))
        return NULL;
    size_t nf = key_fields(&p->ix->key, f);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        size_t i = 0;
        while (i < nf && strcmp(f[i].name, k) != 0)
            i++;
        if (i == nf || strchr(k, '.') || !is_regex_pred(&it))
            continue;
        if (!pre)
            pre = bson_new();
        bson_append_iter(pre, k, -1, &it);
    }
    return pre;
}

bool q_plan_covers(q_plan *p, const bson_t *filter, const bson_t *proj)
{
    kfield f[32];
    bson_iter_t it;
    bool id_out = false, any = false;
    if (!p->ix || p->idhack || Q_MULTIKEY(p->ix) || p->ix->hashed || p->ix->gp || !proj || !bson_iter_init(&it, proj))
        return false;
    size_t nf = key_fields(&p->ix->key, f);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        bool on = BSON_ITER_HOLDS_BOOL(&it) ? bson_iter_bool(&it)
                  : BSON_ITER_HOLDS_NUMBER(&it) ? bson_iter_as_double(&it) != 0 : true;
        if (!BSON_ITER_HOLDS_BOOL(&it) && !BSON_ITER_HOLDS_NUMBER(&it))
            return false;
        bool keyed = false;
        for (size_t i = 0; i < nf; i++)
            keyed |= strcmp(f[i].name, k) == 0;
        if (strcmp(k, "_id") == 0 && !on) {
            id_out = true;
            continue;
        }
        if (!on || strchr(k, '.') || !keyed)
            return false;
        any = true;
    }
    bool id_keyed = false;
    for (size_t i = 0; i < nf; i++)
        id_keyed |= strcmp(f[i].name, "_id") == 0;
    return any && (id_out || id_keyed) && filter_exact(p, filter, &p->key_filter);
}
