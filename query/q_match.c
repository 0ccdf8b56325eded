/*
 * q_match.c -- MongoDB 3.6 filters: parse a filter into an expression tree
 * (one node per operator, as MatchExpression) and evaluate it.
 *
 * AND / OR / NOR / NOT are interior nodes; each path predicate is a leaf
 * with its dotted path and argument.  {a: {$ne: v}} is NOT(EQ), $nin is
 * NOT(IN), {a: {$gt: 1, $lt: 5}} adds two leaves to the enclosing AND.  A
 * new operator is a node kind, a parse case and a case in leaf_single().
 * Leaves see documents through walk_obj()/walk_array(), a transliteration
 * of MongoDB's BSONElementIterator (arrays of documents, numeric
 * components, leaf arrays yielding their elements then themselves, a
 * missing path yielding "missing" once).  Regular expressions ($regex with
 * $options, regex literals, also inside $in/$nin/$all/$not) are compiled
 * once per node (q_regex.c).  $expr (MongoDB 3.6+) is a node holding an
 * aggregation expression (agg_expr.h) evaluated with ROOT = the document
 * and coerced to a bool; it is allowed at the top level and inside
 * $and/$or/$nor, not inside $elemMatch (BadValue, as MongoDB).  An
 * expression that fails on a document (a $divide by a field that is 0)
 * does not match it and leaves its error for q_matcher_take_error, which
 * scans (q_scan.c) check after each document so that the operation fails
 * with it, as MongoDB's does; one that fails whatever the document
 * (constants only) fails the parse.  $text is a node that matches every
 * document: the TEXT stage (q_text_index.c) applies it; it is refused
 * inside $elemMatch, under $or / $nor, and twice.  $where (a function or a
 * string) is a node that calls the JavaScript engine (js/js.h) with `this`
 * the document; its context is made at the first match, and a failure (an
 * error, a time limit) does not match and is left for q_matcher_take_error
 * the same way.  Geo operators are a QM_GEO leaf whose predicate q_geo.c
 * parses and evaluates; a $near / $nearSphere must be a top-level leaf, at
 * most one.
 */
#include <math.h>
#include <string.h>

#include "agg_expr.h"
#include "js.h"
#include "q.h"
#include "q_geo.h"
#include "q_path.h"
#include "q_regex.h"
#include "q_text.h"

#define Q_MATCH_MAX_DEPTH 100

typedef enum q_mkind {
    QM_AND, QM_OR, QM_NOR, QM_NOT,
    QM_EQ, QM_LT, QM_LTE, QM_GT, QM_GTE,
    QM_IN, QM_EXISTS, QM_SIZE, QM_TYPE, QM_MOD,
    QM_ELEM_OBJ, QM_ELEM_VAL, QM_REGEX, QM_EXPR, QM_TEXT, QM_WHERE, QM_GEO,
} q_mkind;

/* Where a filter document is parsed: the query's top level, inside
 * $and/$or/$nor, or an $elemMatch's sub-document. */
enum { QL_TOP, QL_NESTED, QL_ELEM };

/* A $where node's JavaScript (mutable behind the const matcher). */
typedef struct q_where {
    js_ctx *js;
    int fn;           /* -1 until defined */
    int64_t limit_ms; /* a call's time limit (0: js.h's default) */
    int rc;           /* the first failure, kept */
    md_error err;
} q_where;

typedef struct q_mnode q_mnode;
struct q_mnode {
    q_mkind kind;
    q_path path;        /* leaves (and ELEM_*) */
    bool has_path;
    bson_iter_t arg;    /* argument, pointing into the matcher's filter copy */
    bool in_has_null;   /* IN: the array holds null (so missing matches) */
    int64_t num[2];     /* SIZE: n; MOD: divisor, remainder */
    uint32_t types;     /* TYPE: bit per BSON type; bit 0 = "number" */
    q_regex **re;       /* REGEX: re[0]; IN: one per regex element */
    char *rx_pat, *rx_flags; /* REGEX: source, to compare regex values */
    size_t nre;
    agg_expr *expr;     /* EXPR: the expression */
    agg_scope *scope;   /* EXPR: its variables */
    q_geo_pred *geo;    /* GEO: the predicate (q_geo.c) */
    q_mnode **kid;
    size_t nkid, capkid;
    q_where *where;     /* WHERE */
};

struct q_matcher {
    bson_t *filter;
    q_mnode *root;
    bool has_where;
};

/* Positional details: the array offset recorded by the last leaf to match
 * through an array (MatchDetails::elemMatchKey). */
typedef struct q_details {
    char pos[32];
    bool have;
} q_details;

/* ---- nodes ------------------------------------------------------------------ */

static q_mnode *node_new(q_mkind kind)
{
    q_mnode *n = bson_aligned_alloc0(BSON_ALIGNOF(q_mnode), sizeof *n); /* holds a bson_iter_t */
    n->kind = kind;
    return n;
}

static void node_free(q_mnode *n)
{
    if (!n)
        return;
    for (size_t i = 0; i < n->nkid; i++)
        node_free(n->kid[i]);
    bson_free(n->kid);
    for (size_t i = 0; i < n->nre; i++)
        q_regex_free(n->re[i]);
    bson_free(n->re);
    bson_free(n->rx_pat);
    bson_free(n->rx_flags);
    agg_expr_destroy(n->expr);
    agg_scope_destroy(n->scope);
    if (n->where) {
        js_ctx_destroy(n->where->js);
        bson_free(n->where);
    }
    q_geo_pred_free(n->geo);
    if (n->has_path)
        q_path_cleanup(&n->path);
    bson_free(n);
}

static void node_add(q_mnode *parent, q_mnode *kid)
{
    if (parent->nkid == parent->capkid) {
        parent->capkid = parent->capkid ? parent->capkid * 2 : 4;
        parent->kid = bson_realloc(parent->kid, parent->capkid * sizeof *parent->kid);
    }
    parent->kid[parent->nkid++] = kid;
}

/* A leaf on `path`.  Paths with empty components ("a..b") are kept as given:
 * they simply never find a field. */
static q_mnode *leaf_new(q_mkind kind, const char *path, const bson_iter_t *arg)
{
    q_mnode *n = node_new(kind);
    if (!q_path_init(&n->path, path, -1)) {
        /* keep one component that no field can be named: the path itself */
        n->path.buf = bson_strdup(path);
        n->path.part = bson_malloc(sizeof *n->path.part);
        n->path.part[0] = n->path.buf;
        n->path.n = 1;
    }
    n->has_path = true;
    if (arg)
        n->arg = *arg;
    return n;
}

/* ---- walking a path (BSONElementIterator) --------------------------------- */

typedef bool (*q_visit_fn)(void *ctx, const bson_iter_t *e, const char *off);

typedef struct q_walk {
    const q_path *p;
    bool leaf_arrays; /* expand an array at the end of the path */
    q_visit_fn fn;
    void *ctx;
} q_walk;

static bool walk_array(const q_walk *w, const bson_iter_t *arr, size_t next, const char *off);

static bool walk_obj(const q_walk *w, const uint8_t *data, uint32_t len, size_t start,
                     const char *off)
{
    bson_iter_t e;
    size_t stop;
    if (!q_dotted_or_array(data, len, w->p, start, &e, &stop))
        return w->fn(w->ctx, NULL, off);
    if (!BSON_ITER_HOLDS_ARRAY(&e) || (stop + 1 == w->p->n && !w->leaf_arrays))
        return w->fn(w->ctx, &e, off);
    return walk_array(w, &e, stop + 1, off);
}

/* Visit what path parts [next..) produce inside array `arr`.  The outermost
 * array's element offset wins (`off`), as for the positional operator. */
static bool walk_array(const q_walk *w, const bson_iter_t *arr, size_t next, const char *off)
{
    bool more = next < w->p->n;
    const char *want = more && q_all_digits(w->p->part[next]) ? w->p->part[next] : NULL;
    bool last = next + 1 == w->p->n;
    bson_iter_t x;
    const uint8_t *d;
    uint32_t l;
    if (!bson_iter_recurse(arr, &x))
        return false;
    while (bson_iter_next(&x)) {
        const char *eoff = off ? off : bson_iter_key(&x);
        bool at = want && strcmp(want, bson_iter_key(&x)) == 0;
        if (!more) {
            if (w->fn(w->ctx, &x, eoff))
                return true;
        } else if (BSON_ITER_HOLDS_DOCUMENT(&x)) {
            q_iter_sub(&x, &d, &l);
            if (walk_obj(w, d, l, next, eoff))
                return true;
            if (at && (last ? w->fn(w->ctx, &x, off) : walk_obj(w, d, l, next + 1, off)))
                return true;
        } else if (at) {
            if (last ? w->fn(w->ctx, &x, off)
                     : BSON_ITER_HOLDS_ARRAY(&x) && walk_array(w, &x, next + 1, off))
                return true;
        }
    }
    return more ? false : w->fn(w->ctx, arr, off);
}

/* ---- evaluation ------------------------------------------------------------- */

static bool node_matches(const q_mnode *n, const uint8_t *data, uint32_t len, q_details *d);

/* ComparisonMatchExpression::matchesSingleElement; e == NULL is "missing". */
static bool cmp_single(q_mkind op, const bson_iter_t *rhs, const bson_iter_t *e)
{
    bson_type_t rt = bson_iter_type(rhs);
    int er = e ? q_type_rank(bson_iter_type(e)) : 0, rr = q_type_rank(rt);
    if (er != rr) {
        if (er + rr == 5) /* null vs undefined/missing */
            return op == QM_EQ || op == QM_LTE || op == QM_GTE;
        if (rt == BSON_TYPE_MAXKEY)
            return op == QM_LT || op == QM_LTE;
        if (rt == BSON_TYPE_MINKEY)
            return op == QM_GT || op == QM_GTE;
        return false;
    }
    if (e && q_is_number(rt)) {
        bool ln = isnan(q_number_ld(e)), rn = isnan(q_number_ld(rhs));
        if (ln || rn)
            return (op == QM_EQ || op == QM_LTE || op == QM_GTE) && ln && rn;
    }
    int c = e ? q_value_cmp(e, rhs) : 0;
    switch (op) {
    case QM_LT: return c < 0;
    case QM_LTE: return c <= 0;
    case QM_EQ: return c == 0;
    case QM_GT: return c > 0;
    default: return c >= 0;
    }
}

/* Does regex `re` match string or symbol e? */
static bool regex_string(const q_regex *re, const bson_iter_t *e)
{
    uint32_t len;
    const char *s;
    if (BSON_ITER_HOLDS_UTF8(e))
        s = bson_iter_utf8(e, &len);
    else if (BSON_ITER_HOLDS_SYMBOL(e))
        s = bson_iter_symbol(e, &len);
    else
        return false;
    return q_regex_match(re, s, len);
}

/* RegexMatchExpression::matchesSingleElement: strings and symbols by the
 * pattern, regex values by equal pattern and flags. */
static bool regex_single(const q_mnode *n, const bson_iter_t *e)
{
    if (!e)
        return false;
    if (BSON_ITER_HOLDS_REGEX(e)) {
        const char *flags;
        const char *pat = bson_iter_regex(e, &flags);
        return !strcmp(pat, n->rx_pat) && !strcmp(flags ? flags : "", n->rx_flags);
    }
    return regex_string(n->re[0], e);
}

static bool in_single(const q_mnode *n, const bson_iter_t *e)
{
    if (!e)
        return n->in_has_null;
    bson_iter_t v;
    if (!bson_iter_recurse(&n->arg, &v))
        return false;
    while (bson_iter_next(&v))
        if (q_value_cmp(e, &v) == 0)
            return true;
    for (size_t i = 0; i < n->nre; i++)
        if (regex_string(n->re[i], e))
            return true;
    return false;
}

static bool type_single(const q_mnode *n, const bson_iter_t *e)
{
    if (!e)
        return false;
    bson_type_t t = bson_iter_type(e);
    if ((n->types & 1) && q_is_number(t))
        return true;
    int bit = t == BSON_TYPE_MINKEY ? 30 : t == BSON_TYPE_MAXKEY ? 31 : (int)t;
    return bit < 32 && (n->types >> bit & 1);
}

static bool mod_single(const q_mnode *n, const bson_iter_t *e)
{
    if (!e || !q_is_number(bson_iter_type(e)))
        return false;
    long double v = q_number_ld(e);
    if (isnan(v) || v >= 9.3e18L || v <= -9.3e18L)
        return false;
    int64_t x = (int64_t)v;
    if (n->num[0] == -1)
        return n->num[1] == 0;
    return x % n->num[0] == n->num[1];
}

static uint32_t array_count(const bson_iter_t *e)
{
    bson_iter_t x;
    uint32_t k = 0;
    if (bson_iter_recurse(e, &x))
        while (bson_iter_next(&x))
            k++;
    return k;
}

static bool leaf_single(const q_mnode *n, const bson_iter_t *e);

/* $elemMatch over an array element e; *key (if given) receives the
 * matching element's offset, for the positional operator. */
static bool elem_single(const q_mnode *n, const bson_iter_t *e, const char **key)
{
    bson_iter_t x;
    const uint8_t *d;
    uint32_t l;
    if (!e || !BSON_ITER_HOLDS_ARRAY(e) || !bson_iter_recurse(e, &x))
        return false;
    while (bson_iter_next(&x)) {
        if (n->kind == QM_ELEM_OBJ) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&x))
                continue;
            q_iter_sub(&x, &d, &l);
            if (!node_matches(n->kid[0], d, l, NULL))
                continue;
        } else {
            size_t i = 0;
            while (i < n->nkid && leaf_single(n->kid[i], &x))
                i++;
            if (i < n->nkid)
                continue;
        }
        if (key)
            *key = bson_iter_key(&x); /* points into the document */
        return true;
    }
    return false;
}

/* matchesSingleElement for every node kind (interior kinds for $elemMatch
 * values and $not). */
static bool leaf_single(const q_mnode *n, const bson_iter_t *e)
{
    switch (n->kind) {
    case QM_EQ:
    case QM_LT:
    case QM_LTE:
    case QM_GT:
    case QM_GTE: return cmp_single(n->kind, &n->arg, e);
    case QM_IN: return in_single(n, e);
    case QM_EXISTS: return e != NULL;
    case QM_SIZE: return e && BSON_ITER_HOLDS_ARRAY(e) && array_count(e) == n->num[0];
    case QM_TYPE: return type_single(n, e);
    case QM_MOD: return mod_single(n, e);
    case QM_REGEX: return regex_single(n, e);
    case QM_GEO: return e && q_geo_pred_match(n->geo, e);
    case QM_ELEM_OBJ:
    case QM_ELEM_VAL: return elem_single(n, e, NULL);
    case QM_NOT: return !leaf_single(n->kid[0], e);
    case QM_AND:
        for (size_t i = 0; i < n->nkid; i++)
            if (!leaf_single(n->kid[i], e))
                return false;
        return true;
    default: return false;
    }
}

typedef struct leaf_ctx {
    const q_mnode *n;
    const char *off;
} leaf_ctx;

static bool leaf_visit(void *vctx, const bson_iter_t *e, const char *off)
{
    leaf_ctx *c = vctx;
    const char *elem = NULL;
    bool elem_match = c->n->kind == QM_ELEM_OBJ || c->n->kind == QM_ELEM_VAL;
    if (elem_match ? !elem_single(c->n, e, &elem) : !leaf_single(c->n, e))
        return false;
    c->off = off ? off : elem; /* an enclosing array's offset wins */
    return true;
}

/* LeafMatchExpression::matches: does any element on the path match? */
static bool leaf_matches(const q_mnode *n, const uint8_t *data, uint32_t len, q_details *d)
{
    leaf_ctx c = {n, NULL};
    bool leaf_arrays = n->kind != QM_SIZE && n->kind != QM_ELEM_OBJ && n->kind != QM_ELEM_VAL;
    q_walk w = {&n->path, leaf_arrays, leaf_visit, &c};
    if (!walk_obj(&w, data, len, 0, NULL))
        return false;
    if (d && c.off) {
        bson_strncpy(d->pos, c.off, sizeof d->pos);
        d->have = true;
    }
    return true;
}

/* The first $expr failure since the last q_matcher_take_error (per thread). */
static __thread bool expr_failed;
static __thread md_error expr_err;

bool q_matcher_take_error(md_error *err)
{
    bool had = expr_failed;
    if (had && err)
        *err = expr_err;
    expr_failed = false;
    return had;
}

/* ExprMatchExpression::matches: the expression's value as a bool; a
 * failure is kept for q_matcher_take_error (and does not match). */
static bool expr_matches(const q_mnode *n, const uint8_t *data, uint32_t len)
{
    bson_t doc;
    agg_vars vars;
    bson_value_t v;
    md_error err;
    if (!bson_init_static(&doc, data, len))
        return false;
    agg_vars_init(&vars, n->scope);
    agg_vars_set_root(&vars, &doc);
    int rc = agg_expr_eval(n->expr, &vars, &v, &err);
    bool ok = rc == 0 && agg_value_truthy(&v);
    if (rc && !expr_failed) {
        expr_err = err;
        expr_failed = true;
    }
    agg_value_destroy(&v);
    agg_vars_cleanup(&vars);
    return ok;
}

/* A $where that failed (sticky: its context may be gone) fails the
 * operation: its error goes where an $expr's does. */
static bool where_failed(const q_where *w)
{
    if (w->rc && !expr_failed) {
        expr_err = w->err;
        expr_failed = true;
    }
    return false;
}

/* $where: the function with `this` the document; false after a failure. */
static bool where_matches(const q_mnode *n, const uint8_t *data, uint32_t len)
{
    q_where *w = n->where;
    bson_t doc;
    bool truthy = false;
    if (w->rc || !bson_init_static(&doc, data, len))
        return where_failed(w);
    if (!w->js) {
        js_opts o = {0, w->limit_ms, 0, false};
        uint32_t sl = 0, scl;
        const uint8_t *scope = NULL;
        const char *src = BSON_ITER_HOLDS_UTF8(&n->arg) ? bson_iter_utf8(&n->arg, &sl)
                          : BSON_ITER_HOLDS_CODE(&n->arg)
                              ? bson_iter_code(&n->arg, &sl)
                              : bson_iter_codewscope(&n->arg, &sl, &scl, &scope);
        bson_t sc;
        w->rc = js_ctx_new(&o, &w->js, &w->err);
        if (!w->rc && scope && bson_init_static(&sc, scope, scl))
            w->rc = js_ctx_set_globals(w->js, &sc, &w->err);
        if (!w->rc)
            w->rc = js_func_new(w->js, src, sl, &w->fn, &w->err);
        if (w->rc)
            return where_failed(w);
    }
    w->rc = js_func_test(w->js, w->fn, &doc, &truthy, &w->err);
    return w->rc ? where_failed(w) : truthy;
}

static bool node_matches(const q_mnode *n, const uint8_t *data, uint32_t len, q_details *d)
{
    switch (n->kind) {
    case QM_WHERE: return where_matches(n, data, len);
    case QM_AND:
        for (size_t i = 0; i < n->nkid; i++) {
            if (!node_matches(n->kid[i], data, len, d)) {
                if (d)
                    d->have = false;
                return false;
            }
        }
        return true;
    case QM_OR:
        for (size_t i = 0; i < n->nkid; i++)
            if (node_matches(n->kid[i], data, len, NULL))
                return true;
        return false;
    case QM_NOR:
        for (size_t i = 0; i < n->nkid; i++)
            if (node_matches(n->kid[i], data, len, NULL))
                return false;
        return true;
    case QM_NOT: return !node_matches(n->kid[0], data, len, NULL);
    case QM_EXPR: return expr_matches(n, data, len);
    case QM_TEXT: return true; /* the TEXT stage decides (q_text_index.c) */
    default: return leaf_matches(n, data, len, d);
    }
}

static void where_limit(const q_mnode *n, int64_t limit_ms)
{
    if (n->kind == QM_WHERE)
        n->where->limit_ms = limit_ms;
    for (size_t i = 0; i < n->nkid; i++)
        where_limit(n->kid[i], limit_ms);
}

void q_matcher_set_js_limit(const q_matcher *m, int64_t limit_ms)
{
    if (m && m->has_where)
        where_limit(m->root, limit_ms);
}

bool q_matcher_has_where(const q_matcher *m)
{
    return m && m->has_where;
}

bool q_matcher_matches(const q_matcher *m, const bson_t *doc)
{
    assert(m && doc);
    return node_matches(m->root, bson_get_data(doc), doc->len, NULL);
}

bool q_matcher_matches_pos(const q_matcher *m, const bson_t *doc, char *pos, size_t poslen)
{
    assert(m && doc && pos && poslen > 0);
    q_details d = {{0}, false};
    bool ok = node_matches(m->root, bson_get_data(doc), doc->len, &d);
    bson_strncpy(pos, ok && d.have ? d.pos : "", poslen);
    return ok;
}

/* ---- parsing ---------------------------------------------------------------- */

typedef struct q_parse {
    md_error *err;
} q_parse;

static int bad(md_error *err, const char *fmt, const char *arg)
{
    return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE, fmt, arg);
}

static int nyi(md_error *err, const char *what)
{
    return md_error_set(err, MD_EINVAL, MD_CODE_NOT_YET_IMPLEMENTED, "%s is not supported yet",
                        what);
}

static int parse_doc(const uint8_t *data, uint32_t len, q_mnode *and, int depth,
                     int level, md_error *err);
static int add_regex_literal(const char *path, const bson_iter_t *e, q_mnode *and,
                             md_error *err);
static int parse_ops(const char *path, const bson_iter_t *ops, q_mnode *and, int depth,
                     md_error *err);

/* isExpressionDocument: a non-empty document whose first field is $-prefixed
 * and that is not a DBRef ({$ref: .., $id: ..}). */
static bool is_expression_doc(const bson_iter_t *e)
{
    bson_iter_t x;
    if (!BSON_ITER_HOLDS_DOCUMENT(e) || !bson_iter_recurse(e, &x) || !bson_iter_next(&x))
        return false;
    const char *k = bson_iter_key(&x);
    return k[0] == '$' && strcmp(k, "$ref") != 0;
}

/* BSONElement::trueValue */
static bool true_value(const bson_iter_t *e)
{
    switch (bson_iter_type(e)) {
    case BSON_TYPE_BOOL: return bson_iter_bool(e);
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_DECIMAL128: return q_number_ld(e) != 0;
    case BSON_TYPE_NULL:
    case BSON_TYPE_UNDEFINED:
    case BSON_TYPE_EOD: return false;
    default: return true;
    }
}

/* $and / $or / $nor: a nonempty array of documents. */
static int parse_logical(q_mkind kind, const bson_iter_t *e, q_mnode *parent, int depth,
                         int level, md_error *err)
{
    bson_iter_t x;
    if (!BSON_ITER_HOLDS_ARRAY(e) || !bson_iter_recurse(e, &x) || !array_count(e))
        return bad(err, "%s must be a nonempty array", "$and/$or/$nor");
    q_mnode *n = node_new(kind);
    node_add(parent, n);
    while (bson_iter_next(&x)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&x))
            return bad(err, "%s entries need to be full objects", "$or/$and/$nor");
        const uint8_t *d;
        uint32_t l;
        q_iter_sub(&x, &d, &l);
        q_mnode *sub = node_new(QM_AND);
        node_add(n, sub);
        int rc = parse_doc(d, l, sub, depth + 1, level == QL_ELEM ? QL_ELEM : QL_NESTED, err);
        if (rc)
            return rc;
    }
    return 0;
}

/* {$expr: <aggregation expression>}.  A constant expression is evaluated
 * once here, so that one that always fails fails the query. */
static int parse_expr(const bson_iter_t *e, q_mnode *and, int level, md_error *err)
{
    if (level == QL_ELEM)
        return bad(err, "%s can only be applied to the top-level document", "$expr");
    q_mnode *n = node_new(QM_EXPR);
    node_add(and, n);
    n->scope = agg_scope_new();
    int rc = agg_expr_parse(e, n->scope, &n->expr, err);
    if (rc || !agg_expr_is_constant(n->expr))
        return rc;
    agg_vars vars;
    bson_value_t v;
    bson_t empty = BSON_INITIALIZER;
    agg_vars_init(&vars, n->scope);
    agg_vars_set_root(&vars, &empty);
    rc = agg_expr_eval(n->expr, &vars, &v, err);
    agg_value_destroy(&v);
    agg_vars_cleanup(&vars);
    bson_destroy(&empty);
    return rc;
}

static int parse_top_op(const char *op, const bson_iter_t *e, q_mnode *and, int depth, int level,
                        md_error *err)
{
    bool top = level == QL_TOP;
    if (!strcmp(op, "$and"))
        return parse_logical(QM_AND, e, and, depth, level, err);
    if (!strcmp(op, "$or"))
        return parse_logical(QM_OR, e, and, depth, level, err);
    if (!strcmp(op, "$nor"))
        return parse_logical(QM_NOR, e, and, depth, level, err);
    if (!strcmp(op, "$expr"))
        return parse_expr(e, and, level, err);
    if (!strcmp(op, "$comment"))
        return 0;
    if (!strcmp(op, "$atomic") || !strcmp(op, "$isolated"))
        return top ? 0 : bad(err, "%s has to be at the top level", "$atomic/$isolated");
    if (!strcmp(op, "$text")) {
        if (level == QL_ELEM)
            return bad(err, "%s can only be applied to the top-level document", op);
        int rc = q_text_check(e, err);
        if (!rc)
            node_add(and, node_new(QM_TEXT));
        return rc;
    }
    if (!strcmp(op, "$where")) {
        if (!BSON_ITER_HOLDS_UTF8(e) && !BSON_ITER_HOLDS_CODE(e) &&
            !BSON_ITER_HOLDS_CODEWSCOPE(e))
            return bad(err, "%s got bad type", "$where");
        if (level == QL_ELEM)
            return bad(err, "%s can only be applied to the top-level document", "$where");
        q_mnode *n = node_new(QM_WHERE);
        n->arg = *e;
        n->where = bson_malloc0(sizeof *n->where);
        n->where->fn = -1;
        node_add(and, n);
        return 0;
    }
    if (!strcmp(op, "$jsonSchema"))
        return nyi(err, op);
    return bad(err, "unknown top level operator: %s", op);
}

/* Append to n a compiled regex (n->re grows by one). */
static int regex_push(q_mnode *n, const char *pat, uint32_t len, const char *flags,
                      md_error *err)
{
    q_regex *re;
    int rc = q_regex_compile(pat, len, flags, &re, err);
    if (rc)
        return rc;
    n->re = bson_realloc(n->re, (n->nre + 1) * sizeof *n->re);
    n->re[n->nre++] = re;
    return 0;
}

/* A REGEX leaf on path for pattern (len bytes) and flags. */
static int add_regex(const char *path, const char *pat, uint32_t len, const char *flags,
                     q_mnode *and, md_error *err)
{
    q_mnode *l = leaf_new(QM_REGEX, path, NULL);
    node_add(and, l);
    l->rx_pat = bson_strdup(pat);
    l->rx_flags = bson_strdup(flags ? flags : "");
    return regex_push(l, pat, len, flags, err);
}

/* {path: /pat/flags} */
static int add_regex_literal(const char *path, const bson_iter_t *e, q_mnode *and,
                             md_error *err)
{
    const char *flags;
    const char *pat = bson_iter_regex(e, &flags);
    return add_regex(path, pat, (uint32_t)strlen(pat), flags, and, err);
}

/* {path: {$regex: .., $options: ..}}: one leaf for the pair, whatever their
 * order; as in 3.6 the later of a literal's flags and $options wins. */
static int parse_regex_doc(const char *path, const bson_iter_t *ops, q_mnode *and,
                           md_error *err)
{
    bson_iter_t x;
    const char *pat = NULL, *flags = "";
    uint32_t len = 0;
    if (!bson_iter_recurse(ops, &x))
        return md_error_set(err, MD_EINVAL, MD_CODE_INVALID_BSON, "invalid BSON in filter");
    while (bson_iter_next(&x)) {
        const char *k = bson_iter_key(&x);
        if (!strcmp(k, "$regex")) {
            if (BSON_ITER_HOLDS_UTF8(&x)) {
                pat = bson_iter_utf8(&x, &len);
            } else if (BSON_ITER_HOLDS_REGEX(&x)) {
                pat = bson_iter_regex(&x, &flags);
                len = (uint32_t)strlen(pat);
            } else {
                return bad(err, "%s has to be a string", "$regex");
            }
        } else if (!strcmp(k, "$options")) {
            if (!BSON_ITER_HOLDS_UTF8(&x))
                return bad(err, "%s has to be a string", "$options");
            flags = bson_iter_utf8(&x, NULL);
        }
    }
    if (!pat)
        return bad(err, "%s needs a $regex", "$options");
    return add_regex(path, pat, len, flags, and, err);
}

/* A filter document: implicit AND of its fields. */
static int parse_doc(const uint8_t *data, uint32_t len, q_mnode *and, int depth, int level,
                     md_error *err)
{
    bson_iter_t e;
    if (depth > Q_MATCH_MAX_DEPTH)
        return bad(err, "exceeded maximum query tree depth of 100 at %s", "$and/$or/$nor");
    if (!bson_iter_init_from_data(&e, data, len))
        return md_error_set(err, MD_EINVAL, MD_CODE_INVALID_BSON, "invalid BSON in filter");
    while (bson_iter_next(&e)) {
        const char *k = bson_iter_key(&e);
        int rc;
        if (k[0] == '$')
            rc = parse_top_op(k, &e, and, depth, level, err);
        else if (is_expression_doc(&e))
            rc = parse_ops(k, &e, and, depth, err);
        else if (BSON_ITER_HOLDS_REGEX(&e))
            rc = add_regex_literal(k, &e, and, err);
        else {
            node_add(and, leaf_new(QM_EQ, k, &e));
            rc = 0;
        }
        if (rc)
            return rc;
    }
    return 0;
}

/* $eq $lt $lte $gt $gte (and the $eq inside $ne). */
static int parse_cmp(q_mkind kind, const char *path, const bson_iter_t *e, q_mnode *and,
                     md_error *err)
{
    if (BSON_ITER_HOLDS_UNDEFINED(e))
        return bad(err, "cannot compare to %s", "undefined");
    if (kind != QM_EQ && BSON_ITER_HOLDS_REGEX(e))
        return bad(err, "Can't have RegEx as arg to predicate over field '%s'.", path);
    node_add(and, leaf_new(kind, path, e));
    return 0;
}

/* $in / $nin: an array of values; regexes match strings by pattern. */
static int parse_in(const char *op, const char *path, const bson_iter_t *e, q_mnode *and,
                    md_error *err)
{
    bson_iter_t x;
    if (!BSON_ITER_HOLDS_ARRAY(e) || !bson_iter_recurse(e, &x))
        return bad(err, "%s needs an array", op);
    q_mnode *n = leaf_new(QM_IN, path, e);
    if (op[1] == 'n') {
        q_mnode *not = node_new(QM_NOT);
        node_add(not, n);
        node_add(and, not);
    } else {
        node_add(and, n);
    }
    while (bson_iter_next(&x)) {
        if (is_expression_doc(&x))
            return bad(err, "cannot nest $ under %s", "$in");
        if (BSON_ITER_HOLDS_REGEX(&x)) {
            const char *flags;
            const char *pat = bson_iter_regex(&x, &flags);
            int rc = regex_push(n, pat, (uint32_t)strlen(pat), flags, err);
            if (rc)
                return rc;
        }
        if (BSON_ITER_HOLDS_UNDEFINED(&x))
            return bad(err, "InMatchExpression equality cannot be %s", "undefined");
        n->in_has_null |= BSON_ITER_HOLDS_NULL(&x);
    }
    return 0;
}

static int parse_not(const char *path, const bson_iter_t *e, q_mnode *and, int depth,
                     md_error *err)
{
    if (BSON_ITER_HOLDS_REGEX(e)) {
        q_mnode *rnot = node_new(QM_NOT);
        node_add(and, rnot);
        return add_regex_literal(path, e, rnot, err);
    }
    if (!BSON_ITER_HOLDS_DOCUMENT(e))
        return bad(err, "%s needs a regex or a document", "$not");
    if (!array_count(e))
        return bad(err, "%s cannot be empty", "$not");
    q_mnode *not = node_new(QM_NOT), *sub = node_new(QM_AND);
    node_add(and, not);
    node_add(not, sub);
    return parse_ops(path, e, sub, depth + 1, err);
}

/* $size: an int32-representable count; a fractional double matches nothing. */
static int parse_size(const char *path, const bson_iter_t *e, q_mnode *and, md_error *err)
{
    int64_t n;
    if (BSON_ITER_HOLDS_INT32(e) || BSON_ITER_HOLDS_INT64(e)) {
        n = bson_iter_as_int64(e);
        if (n != (int32_t)n)
            return bad(err, "%s must be representable as a 32-bit integer", "$size");
    } else if (BSON_ITER_HOLDS_DOUBLE(e)) {
        double d = bson_iter_double(e);
        n = fabs(d) < 2147483648.0 && d == (double)(int32_t)d ? (int32_t)d : INT64_MAX;
    } else {
        return bad(err, "%s needs a number", "$size");
    }
    if (n < 0)
        return bad(err, "%s may not be negative", "$size");
    q_mnode *l = leaf_new(QM_SIZE, path, e);
    l->num[0] = n; /* INT64_MAX: no array is that long */
    node_add(and, l);
    return 0;
}

static const struct {
    const char *alias;
    int code;
} q_type_aliases[] = {
    {"double", 1}, {"string", 2}, {"object", 3}, {"array", 4}, {"binData", 5},
    {"undefined", 6}, {"objectId", 7}, {"bool", 8}, {"date", 9}, {"null", 10},
    {"regex", 11}, {"dbPointer", 12}, {"javascript", 13}, {"symbol", 14},
    {"javascriptWithScope", 15}, {"int", 16}, {"timestamp", 17}, {"long", 18},
    {"decimal", 19}, {"minKey", -1}, {"maxKey", 127}, {"number", 0},
};

/* One $type argument (number or alias) into the bit set. */
static int type_bit(const bson_iter_t *e, uint32_t *bits, md_error *err)
{
    int code = -2;
    if (BSON_ITER_HOLDS_UTF8(e)) {
        const char *s = bson_iter_utf8(e, NULL);
        for (size_t i = 0; i < sizeof q_type_aliases / sizeof q_type_aliases[0]; i++)
            if (!strcmp(s, q_type_aliases[i].alias))
                code = q_type_aliases[i].code;
        if (code == -2)
            return bad(err, "Unknown type name alias: %s", s);
    } else if (q_is_number(bson_iter_type(e))) {
        long double v = q_number_ld(e);
        code = v == (int)v ? (int)v : -3;
        if (!((code >= 1 && code <= 19) || code == -1 || code == 127)) {
            char s[64];
            snprintf(s, sizeof s, "%Lg", v);
            return bad(err, "Invalid numerical type code: %s", s);
        }
    } else {
        return md_error_set(err, MD_EINVAL, MD_CODE_TYPE_MISMATCH,
                            "type must be represented as a number or a string");
    }
    *bits |= 1u << (code == -1 ? 30 : code == 127 ? 31 : code);
    return 0;
}

static int parse_type(const char *path, const bson_iter_t *e, q_mnode *and, md_error *err)
{
    q_mnode *l = leaf_new(QM_TYPE, path, e);
    node_add(and, l);
    if (!BSON_ITER_HOLDS_ARRAY(e))
        return type_bit(e, &l->types, err);
    bson_iter_t x;
    if (!bson_iter_recurse(e, &x))
        return bad(err, "%s needs an array", "$type");
    while (bson_iter_next(&x)) {
        int rc = type_bit(&x, &l->types, err);
        if (rc)
            return rc;
    }
    return 0;
}

static int parse_mod(const char *path, const bson_iter_t *e, q_mnode *and, md_error *err)
{
    bson_iter_t x;
    int64_t v[2];
    int k = 0;
    if (!BSON_ITER_HOLDS_ARRAY(e) || !bson_iter_recurse(e, &x))
        return bad(err, "malformed mod, %s", "needs to be an array");
    while (bson_iter_next(&x)) {
        if (k == 2)
            return bad(err, "malformed mod, %s", "too many elements");
        if (!q_is_number(bson_iter_type(&x)))
            return bad(err, "malformed mod, %s not a number", k ? "remainder" : "divisor");
        long double d = q_number_ld(&x);
        v[k++] = isnan(d) || fabsl(d) >= 2147483648.0L ? 0 : (int32_t)d;
    }
    if (k < 2)
        return bad(err, "malformed mod, %s", "not enough elements");
    if (v[0] == 0)
        return bad(err, "%s cannot be 0", "divisor");
    q_mnode *l = leaf_new(QM_MOD, path, e);
    l->num[0] = v[0];
    l->num[1] = v[1];
    node_add(and, l);
    return 0;
}

static bool is_top_keyword(const char *k)
{
    return !strcmp(k, "$and") || !strcmp(k, "$or") || !strcmp(k, "$nor") ||
           !strcmp(k, "$where") || !strcmp(k, "$text") || !strcmp(k, "$comment") ||
           !strcmp(k, "$expr");
}

static int parse_elem_match(const char *path, const bson_iter_t *e, q_mnode *and, int depth,
                            md_error *err)
{
    bson_iter_t x;
    const uint8_t *d;
    uint32_t l;
    if (!BSON_ITER_HOLDS_DOCUMENT(e))
        return bad(err, "%s needs an Object", "$elemMatch");
    bool value_form = is_expression_doc(e) && bson_iter_recurse(e, &x) && bson_iter_next(&x) &&
                      !is_top_keyword(bson_iter_key(&x));
    q_mnode *n = leaf_new(value_form ? QM_ELEM_VAL : QM_ELEM_OBJ, path, e);
    node_add(and, n);
    if (value_form)
        return parse_ops("", e, n, depth + 1, err);
    q_mnode *sub = node_new(QM_AND);
    node_add(n, sub);
    q_iter_sub(e, &d, &l);
    return parse_doc(d, l, sub, depth + 1, QL_ELEM, err);
}

static bool first_key_is(const bson_iter_t *e, const char *key)
{
    bson_iter_t x;
    return BSON_ITER_HOLDS_DOCUMENT(e) && bson_iter_recurse(e, &x) && bson_iter_next(&x) &&
           !strcmp(bson_iter_key(&x), key);
}

/* $all: an AND of equalities, or of $elemMatch nodes; [] matches nothing. */
static int parse_all(const char *path, const bson_iter_t *e, q_mnode *and, int depth,
                     md_error *err)
{
    bson_iter_t x, em;
    if (!BSON_ITER_HOLDS_ARRAY(e) || !bson_iter_recurse(e, &x))
        return bad(err, "%s needs an array", "$all");
    if (!array_count(e)) {
        node_add(and, node_new(QM_OR)); /* an empty OR is always false */
        return 0;
    }
    bool elem = false, first = true;
    while (bson_iter_next(&x)) {
        bool is_em = first_key_is(&x, "$elemMatch");
        if (first)
            elem = is_em;
        first = false;
        if (is_em != elem)
            return bad(err, "%s has to be consistent", "$all/$elemMatch");
        int rc = 0;
        if (BSON_ITER_HOLDS_REGEX(&x))
            rc = add_regex_literal(path, &x, and, err);
        else if (is_em && bson_iter_recurse(&x, &em) && bson_iter_next(&em))
            rc = parse_elem_match(path, &em, and, depth, err);
        else if (is_expression_doc(&x))
            rc = bad(err, "no $ expressions in %s", "$all");
        else
            node_add(and, leaf_new(QM_EQ, path, &x));
        if (rc)
            return rc;
    }
    return 0;
}

static int parse_exists(const char *path, const bson_iter_t *e, q_mnode *and)
{
    q_mnode *l = leaf_new(QM_EXISTS, path, e);
    if (true_value(e)) {
        node_add(and, l);
    } else {
        q_mnode *not = node_new(QM_NOT);
        node_add(not, l);
        node_add(and, not);
    }
    return 0;
}

/* One operator of a field's operator document. */
static int parse_op(const char *path, const bson_iter_t *e, q_mnode *and, int depth,
                    md_error *err)
{
    const char *op = bson_iter_key(e);
    if (!strcmp(op, "$eq"))
        return parse_cmp(QM_EQ, path, e, and, err);
    if (!strcmp(op, "$lt"))
        return parse_cmp(QM_LT, path, e, and, err);
    if (!strcmp(op, "$lte"))
        return parse_cmp(QM_LTE, path, e, and, err);
    if (!strcmp(op, "$gt"))
        return parse_cmp(QM_GT, path, e, and, err);
    if (!strcmp(op, "$gte"))
        return parse_cmp(QM_GTE, path, e, and, err);
    if (!strcmp(op, "$ne")) {
        if (BSON_ITER_HOLDS_REGEX(e))
            return bad(err, "Can't have regex as arg to %s.", "$ne");
        q_mnode *not = node_new(QM_NOT);
        node_add(and, not);
        return parse_cmp(QM_EQ, path, e, not, err);
    }
    if (!strcmp(op, "$in") || !strcmp(op, "$nin"))
        return parse_in(op, path, e, and, err);
    if (!strcmp(op, "$exists"))
        return parse_exists(path, e, and);
    if (!strcmp(op, "$not"))
        return parse_not(path, e, and, depth, err);
    if (!strcmp(op, "$size"))
        return parse_size(path, e, and, err);
    if (!strcmp(op, "$type"))
        return parse_type(path, e, and, err);
    if (!strcmp(op, "$mod"))
        return parse_mod(path, e, and, err);
    if (!strcmp(op, "$all"))
        return parse_all(path, e, and, depth, err);
    if (!strcmp(op, "$elemMatch"))
        return parse_elem_match(path, e, and, depth, err);
    if (!strcmp(op, "$where"))
        return bad(err, "%s cannot be applied to a field", "$where");
    static const char *const later[] = {
        "$bitsAllSet", "$bitsAllClear", "$bitsAnySet", "$bitsAnyClear",
        "$_internalSchemaType"};
    for (size_t i = 0; i < sizeof later / sizeof later[0]; i++)
        if (!strcmp(op, later[i]))
            return nyi(err, op);
    return bad(err, "unknown operator: %s", op);
}

/* An operator document holding a geo operator: one GEO leaf (q_geo.c
 * parses the whole document: $near takes its $maxDistance siblings). */
static int parse_geo(const char *path, const bson_iter_t *ops, q_mnode *and, md_error *err)
{
    q_geo_pred *g = NULL;
    int rc = q_geo_pred_parse(ops, &g, err);
    if (rc)
        return rc;
    q_mnode *n = leaf_new(QM_GEO, path, ops);
    n->geo = g;
    g->path = strdup(path);
    node_add(and, n);
    return 0;
}

/* Near predicates: at most one, a leaf of the top-level AND. */
static int count_near(const q_mnode *n, bool top, int *count, md_error *err)
{
    if (n->kind == QM_GEO && n->geo->op == QGP_NEAR) {
        if (!top)
            return bad(err, "%s", "geoNear must be top-level expr");
        if (++*count > 1)
            return bad(err, "%s", "Too many geoNear expressions");
    }
    for (size_t i = 0; i < n->nkid; i++) {
        int rc = count_near(n->kid[i], false, count, err);
        if (rc)
            return rc;
    }
    return 0;
}

const q_geo_pred *q_matcher_near(const q_matcher *m)
{
    for (size_t i = 0; m && i < m->root->nkid; i++)
        if (m->root->kid[i]->kind == QM_GEO && m->root->kid[i]->geo->op == QGP_NEAR)
            return m->root->kid[i]->geo;
    return NULL;
}

static int parse_ops(const char *path, const bson_iter_t *ops, q_mnode *and, int depth,
                     md_error *err)
{
    bson_iter_t x;
    if (depth > Q_MATCH_MAX_DEPTH)
        return bad(err, "exceeded maximum query tree depth of 100 at %s", path);
    bool regex_done = false;
    if (!bson_iter_recurse(ops, &x))
        return md_error_set(err, MD_EINVAL, MD_CODE_INVALID_BSON, "invalid BSON in filter");
    while (bson_iter_next(&x))
        if (q_geo_is_op(bson_iter_key(&x)))
            return parse_geo(path, ops, and, err);
    bson_iter_recurse(ops, &x);
    while (bson_iter_next(&x)) {
        const char *k = bson_iter_key(&x);
        int rc = 0;
        if (!strcmp(k, "$regex") || !strcmp(k, "$options")) {
            if (!regex_done)
                rc = parse_regex_doc(path, ops, and, err);
            regex_done = true;
        } else {
            rc = parse_op(path, &x, and, depth, err);
        }
        if (rc)
            return rc;
    }
    return 0;
}

static bool tree_has_where(const q_mnode *n)
{
    if (n->kind == QM_WHERE)
        return true;
    for (size_t i = 0; i < n->nkid; i++)
        if (tree_has_where(n->kid[i]))
            return true;
    return false;
}

int q_matcher_new(const bson_t *filter, q_matcher **out, md_error *err)
{
    assert(out);
    *out = NULL;
    q_matcher *m = bson_malloc0(sizeof *m);
    m->filter = filter ? bson_copy(filter) : bson_new();
    m->root = node_new(QM_AND);
    int rc = parse_doc(bson_get_data(m->filter), m->filter->len, m->root, 0, QL_TOP, err);
    bool text;
    if (!rc) /* one $text at most, and not under $or / $nor */
        rc = q_text_filter_find(m->filter, NULL, &text, err);
    int near = 0;
    for (size_t i = 0; !rc && i < m->root->nkid; i++)
        rc = count_near(m->root->kid[i], m->root->kid[i]->kind == QM_GEO, &near, err);
    if (rc) {
        q_matcher_destroy(m);
        return rc;
    }
    m->has_where = tree_has_where(m->root);
    *out = m;
    return 0;
}

void q_matcher_destroy(q_matcher *m)
{
    if (!m)
        return;
    node_free(m->root);
    bson_destroy(m->filter);
    bson_free(m);
}

/* ---- upsert seed ------------------------------------------------------------ */

typedef struct seed_eq {
    char *path;
    const q_path *parts;
    const bson_iter_t *val;
} seed_eq;

typedef struct seed_node {
    const char *name;
    int parent;
    const bson_iter_t *val;
} seed_node;

typedef struct seed {
    seed_eq *eq;
    size_t neq, capeq;
    seed_node *node;
    size_t nnode, capnode;
} seed;

/* Equalities of the top-level AND and of ANDs nested in it ($and). */
static void seed_collect(seed *s, const q_mnode *n)
{
    for (size_t i = 0; i < n->nkid; i++) {
        const q_mnode *k = n->kid[i];
        if (k->kind == QM_AND) {
            seed_collect(s, k);
        } else if (k->kind == QM_EQ) {
            if (s->neq == s->capeq) {
                s->capeq = s->capeq ? 2 * s->capeq : 8;
                s->eq = bson_realloc(s->eq, s->capeq * sizeof *s->eq);
            }
            q_buf b;
            q_buf_init(&b);
            q_path_join(&b, &k->path, 0, k->path.n);
            s->eq[s->neq].path = bson_strdup(q_buf_cstr(&b));
            s->eq[s->neq].parts = &k->path;
            s->eq[s->neq++].val = &k->arg;
            q_buf_cleanup(&b);
        }
    }
}

/* Is path a a component-wise prefix of (or equal to) path b? */
static bool path_prefix(const q_path *a, const q_path *b)
{
    if (a->n > b->n)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->part[i], b->part[i]))
            return false;
    return true;
}

static int seed_check(const seed *s, md_error *err)
{
    for (size_t j = 0; j < s->neq; j++) {
        for (size_t i = 0; i < j; i++) {
            const q_path *a = s->eq[i].parts, *b = s->eq[j].parts;
            if (a->n == b->n && path_prefix(a, b))
                return md_error_set(err, MD_EINVAL, MD_CODE_NOT_SINGLE_VALUE_FIELD,
                                    "cannot infer query fields to set, path '%s' is matched "
                                    "twice", s->eq[j].path);
            if (path_prefix(a, b) || path_prefix(b, a))
                return md_error_set(err, MD_EINVAL, MD_CODE_NOT_SINGLE_VALUE_FIELD,
                                    "cannot infer query fields to set, both paths '%s' and "
                                    "'%s' are matched", s->eq[j].path, s->eq[i].path);
        }
    }
    return 0;
}

static int seed_child(seed *s, int parent, const char *name)
{
    for (size_t i = 0; i < s->nnode; i++)
        if (s->node[i].parent == parent && !strcmp(s->node[i].name, name))
            return (int)i;
    if (s->nnode == s->capnode) {
        s->capnode = s->capnode ? 2 * s->capnode : 8;
        s->node = bson_realloc(s->node, s->capnode * sizeof *s->node);
    }
    s->node[s->nnode] = (seed_node){name, parent, NULL};
    return (int)s->nnode++;
}

static void seed_insert(seed *s, const seed_eq *eq)
{
    int at = -1;
    for (size_t i = 0; i < eq->parts->n; i++)
        at = seed_child(s, at, eq->parts->part[i]);
    s->node[at].val = eq->val;
}

static void seed_emit(const seed *s, int parent, bson_t *out)
{
    for (size_t i = 0; i < s->nnode; i++) {
        const seed_node *n = &s->node[i];
        if (n->parent != parent)
            continue;
        if (n->val) {
            bson_append_iter(out, n->name, -1, n->val);
        } else {
            bson_t child;
            bson_append_document_begin(out, n->name, -1, &child);
            seed_emit(s, (int)i, &child);
            bson_append_document_end(out, &child);
        }
    }
}

/*
 * Equality fields in filter order, _id (and paths under it) first since an
 * inserted document starts with _id; dotted paths become embedded documents.
 * Conflicting equalities are NotSingleValueField (54), as in MongoDB.
 */
int q_matcher_upsert_seed(const bson_t *filter, bson_t *out, md_error *err)
{
    assert(out);
    q_matcher *m;
    seed s = {0};
    int rc = q_matcher_new(filter, &m, err);
    if (rc)
        return rc;
    seed_collect(&s, m->root);
    rc = seed_check(&s, err);
    if (rc)
        goto out_free;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < s.neq; i++)
            if ((strcmp(s.eq[i].parts->part[0], "_id") == 0) == (pass == 0))
                seed_insert(&s, &s.eq[i]);
    seed_emit(&s, -1, out);
out_free:
    for (size_t i = 0; i < s.neq; i++)
        bson_free(s.eq[i].path);
    bson_free(s.eq);
    bson_free(s.node);
    q_matcher_destroy(m);
    return rc;
}
