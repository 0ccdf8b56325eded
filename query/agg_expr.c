/*
 * agg_expr.c -- aggregation expressions: the parser (Expression::parseOperand
 * of MongoDB 4.0), variables and their slots, field paths, expression
 * objects and arrays, $literal and $let, and the dispatch to the operator
 * tables of the family files (agg_expr_ops.c, agg_expr_string.c, ...).
 *
 * Field paths follow ExpressionFieldPath::evaluatePath: "$a.b" looks up a
 * in CURRENT; through a document it goes on, through an array it collects,
 * element by element, the value of the rest of the path in each element
 * that is a document (elements where it is missing are skipped, scalars
 * too), so "$a.b" of {a: [{b: 1}, {c: 2}, {b: [3]}, 4]} is [1, [3]].
 *
 * Variables are resolved to slots while parsing (agg_expr.h): a scope is a
 * stack of visible names over a count of slots that only grows, so that a
 * name a $let body defines goes out of sight after the body while its slot
 * stays valid for the agg_vars of every evaluation.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "agg_expr_int.h"

#define AGG_SLOT_REMOVE (-2)
#define AGG_MAX_DEPTH 150

/* ---- errors ------------------------------------------------------------------ */

int agg_err(md_error *err, int code, const char *fmt, ...)
{
    char msg[sizeof err->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    q_err(err, MD_EINVAL, code, "%s", msg);
    if (err && code == 168)
        snprintf(err->code_name, sizeof err->code_name, "InvalidPipelineOperator");
    else if (err && code == 15)
        snprintf(err->code_name, sizeof err->code_name, "Overflow");
    return MD_EINVAL;
}

/* ---- scopes ---------------------------------------------------------------------- */

struct agg_scope {
    char **name; /* visible names, innermost last */
    int *slot;
    size_t n, cap;
    size_t nslots;
    int depth; /* parse nesting, against runaway recursion */
};

static void scope_bind(agg_scope *s, const char *name, int slot)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 8;
        s->name = bson_realloc(s->name, s->cap * sizeof *s->name);
        s->slot = bson_realloc(s->slot, s->cap * sizeof *s->slot);
    }
    s->name[s->n] = bson_strdup(name);
    s->slot[s->n++] = slot;
}

agg_scope *agg_scope_new(void)
{
    agg_scope *s = bson_malloc0(sizeof *s);
    scope_bind(s, "ROOT", AGG_SLOT_ROOT);
    scope_bind(s, "CURRENT", AGG_SLOT_CURRENT);
    scope_bind(s, "REMOVE", AGG_SLOT_REMOVE);
    s->nslots = 2;
    return s;
}

void agg_scope_destroy(agg_scope *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        bson_free(s->name[i]);
    bson_free(s->name);
    bson_free(s->slot);
    bson_free(s);
}

size_t agg_scope_nslots(const agg_scope *s)
{
    return s->nslots;
}

static bool name_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || (c & 0x80);
}

/* Variables::uassertValidNameForUserWrite (CURRENT may be rebound). */
int agg_var_name_check(const char *name, md_error *err)
{
    if (!strcmp(name, "CURRENT"))
        return 0;
    if (!name[0])
        return agg_err(err, 16866, "empty variable names are not allowed");
    unsigned char c0 = (unsigned char)name[0];
    if (!((c0 >= 'a' && c0 <= 'z') || (c0 & 0x80)))
        return agg_err(err, 16867,
                       "'%s' starts with an invalid character for a user variable name", name);
    for (const char *p = name + 1; *p; p++)
        if (!name_char((unsigned char)*p))
            return agg_err(err, 16868,
                           "'%s' contains an invalid character for a variable name: '%c'",
                           name, *p);
    return 0;
}

/* Variables::uassertValidNameForUserRead. */
static int var_read_check(const char *name, size_t len, md_error *err)
{
    if (len == 0)
        return agg_err(err, 16869, "empty variable names are not allowed");
    unsigned char c0 = (unsigned char)name[0];
    if (!((c0 >= 'a' && c0 <= 'z') || (c0 >= 'A' && c0 <= 'Z') || (c0 & 0x80)))
        return agg_err(err, 16870,
                       "'%.*s' starts with an invalid character for a user variable name",
                       (int)len, name);
    for (size_t i = 1; i < len; i++)
        if (!name_char((unsigned char)name[i]))
            return agg_err(err, 16871,
                           "'%.*s' contains an invalid character for a variable name: '%c'",
                           (int)len, name, name[i]);
    return 0;
}

int agg_scope_push(agg_scope *s, const char *name, md_error *err)
{
    (void)err;
    int slot = (int)s->nslots++;
    scope_bind(s, name, slot);
    return slot;
}

size_t agg_scope_mark(const agg_scope *s)
{
    return s->n;
}

void agg_scope_pop(agg_scope *s, size_t mark)
{
    while (s->n > mark)
        bson_free(s->name[--s->n]);
}

int agg_scope_define(agg_scope *s, const char *name, md_error *err)
{
    /* $redact's own variables are defined by the stage, not by users */
    bool sys = !strcmp(name, "DESCEND") || !strcmp(name, "PRUNE") || !strcmp(name, "KEEP");
    if (!sys && agg_var_name_check(name, err))
        return -1;
    return agg_scope_push(s, name, err);
}

static bool scope_lookup(const agg_scope *s, const char *name, size_t len, int *slot)
{
    for (size_t i = s->n; i-- > 0;) {
        if (strlen(s->name[i]) == len && !memcmp(s->name[i], name, len)) {
            *slot = s->slot[i];
            return true;
        }
    }
    return false;
}

/* ---- variables at run time -------------------------------------------------------- */

void agg_vars_init(agg_vars *vars, const agg_scope *s)
{
    vars->n = s->nslots;
    vars->v = bson_malloc0(vars->n * sizeof *vars->v);
    vars->owned = bson_malloc0(vars->n * sizeof *vars->owned);
}

void agg_vars_cleanup(agg_vars *vars)
{
    for (size_t i = 0; i < vars->n; i++)
        if (vars->owned[i])
            agg_value_destroy(&vars->v[i]);
    bson_free(vars->v);
    bson_free(vars->owned);
    vars->v = NULL;
    vars->owned = NULL;
    vars->n = 0;
}

/* Make room for `slot` (expressions parsed after agg_vars_init). */
static void vars_room(agg_vars *vars, int slot)
{
    size_t need = (size_t)slot + 1;
    if (need <= vars->n)
        return;
    vars->v = bson_realloc(vars->v, need * sizeof *vars->v);
    vars->owned = bson_realloc(vars->owned, need * sizeof *vars->owned);
    memset(vars->v + vars->n, 0, (need - vars->n) * sizeof *vars->v);
    memset(vars->owned + vars->n, 0, (need - vars->n) * sizeof *vars->owned);
    vars->n = need;
}

static void vars_release(agg_vars *vars, int slot)
{
    vars_room(vars, slot);
    if (vars->owned[slot])
        agg_value_destroy(&vars->v[slot]);
    vars->owned[slot] = false;
    agg_set_missing(&vars->v[slot]);
}

void agg_vars_borrow(agg_vars *vars, int slot, const bson_value_t *v)
{
    vars_release(vars, slot);
    vars->v[slot] = *v;
}

void agg_vars_steal(agg_vars *vars, int slot, bson_value_t *v)
{
    vars_release(vars, slot);
    vars->v[slot] = *v;
    vars->owned[slot] = !agg_missing(v);
    agg_set_missing(v);
}

void agg_vars_set(agg_vars *vars, int slot, const bson_value_t *v)
{
    bson_value_t copy;
    agg_value_copy(v, &copy);
    agg_vars_steal(vars, slot, &copy);
}

void agg_vars_set_root(agg_vars *vars, const bson_t *doc)
{
    bson_value_t v;
    memset(&v, 0, sizeof v);
    v.value_type = BSON_TYPE_DOCUMENT;
    v.value.v_doc.data = (uint8_t *)bson_get_data(doc);
    v.value.v_doc.data_len = doc->len;
    agg_vars_borrow(vars, AGG_SLOT_ROOT, &v);
    agg_vars_borrow(vars, AGG_SLOT_CURRENT, &v);
}

/* ---- nodes ------------------------------------------------------------------------ */

agg_expr *agg_node_new(int kind)
{
    agg_expr *e = bson_malloc0(sizeof *e);
    e->kind = kind;
    e->slot[0] = e->slot[1] = e->slot[2] = -1;
    agg_set_missing(&e->cval);
    return e;
}

void agg_node_add(agg_expr *e, agg_expr *kid)
{
    e->kid = bson_realloc(e->kid, (e->nkid + 1) * sizeof *e->kid);
    e->kid[e->nkid++] = kid;
}

void agg_expr_destroy(agg_expr *e)
{
    if (!e)
        return;
    if (e->kind == AGG_OP && e->op->cleanup)
        e->op->cleanup(e);
    for (size_t i = 0; i < e->nkid; i++)
        agg_expr_destroy(e->kid[i]);
    bson_free(e->kid);
    if (e->names) {
        for (size_t i = 0; i < e->nkid; i++)
            bson_free(e->names[i]);
        bson_free(e->names);
    }
    for (size_t i = 0; i < e->npath; i++)
        bson_free(e->path[i]);
    bson_free(e->path);
    bson_free(e->text);
    agg_value_destroy(&e->cval);
    bson_free(e);
}

/* ---- parsing --------------------------------------------------------------------------- */

static const agg_op *const op_tables[] = {
    agg_ops_var,
    agg_ops_core,
    agg_ops_string,
    agg_ops_array,
    agg_ops_set,
    agg_ops_type,
    agg_ops_date,
    agg_ops_acc,
};

static const agg_op *op_find(const char *name)
{
    for (size_t t = 0; t < sizeof op_tables / sizeof *op_tables; t++)
        for (const agg_op *op = op_tables[t]; op->name; op++)
            if (!strcmp(op->name, name))
                return op;
    return NULL;
}

static int parse_operand(const bson_iter_t *it, agg_scope *s, agg_expr **out, md_error *err);

static agg_expr *const_new(const bson_iter_t *it)
{
    agg_expr *e = agg_node_new(AGG_CONST);
    agg_value_from_iter(it, &e->cval);
    return e;
}

/* FieldPath::uassertValidFieldName for one component. */
static int field_name_check(const char *p, size_t len, md_error *err)
{
    if (len == 0)
        return agg_err(err, 15998, "FieldPath field names may not be empty strings.");
    if (p[0] == '$')
        return agg_err(err, 16410, "FieldPath field names may not start with '$'.");
    if (memchr(p, '\0', len))
        return agg_err(err, 16411, "FieldPath field names may not contain '\\0'.");
    return 0;
}

/* ExpressionFieldPath::parse: "$a.b" (CURRENT.a.b) or "$$var.a.b". */
static int parse_field_path(const char *raw, uint32_t len, agg_scope *s, agg_expr **out,
                            md_error *err)
{
    if (len < 2)
        return agg_err(err, 16872, "'$' by itself is not a valid FieldPath");
    if (memchr(raw, '\0', len))
        return agg_err(err, 16411, "FieldPath field names may not contain '\\0'.");
    const char *p;
    int slot;
    if (raw[1] == '$') {
        const char *name = raw + 2;
        const char *dot = memchr(name, '.', len - 2);
        size_t nlen = dot ? (size_t)(dot - name) : len - 2;
        if (var_read_check(name, nlen, err))
            return MD_EINVAL;
        if (!scope_lookup(s, name, nlen, &slot))
            return agg_err(err, 17276, "Use of undefined variable: %.*s", (int)nlen, name);
        p = dot ? dot + 1 : NULL;
        if (dot && dot + 1 == raw + len)
            return agg_err(err, 40353, "FieldPath must not end with a '.'.");
    } else {
        if (!scope_lookup(s, "CURRENT", 7, &slot))
            slot = AGG_SLOT_CURRENT;
        p = raw + 1;
        if (raw[len - 1] == '.')
            return agg_err(err, 40353, "FieldPath must not end with a '.'.");
    }
    agg_expr *e = agg_node_new(AGG_VAR);
    e->slot[0] = slot;
    if (p) {
        const char *end = raw + len;
        e->text = bson_strndup(p, (size_t)(end - p));
        while (p <= end) {
            const char *dot = memchr(p, '.', (size_t)(end - p));
            size_t n = dot ? (size_t)(dot - p) : (size_t)(end - p);
            if (field_name_check(p, n, err)) {
                agg_expr_destroy(e);
                return MD_EINVAL;
            }
            e->path = bson_realloc(e->path, (e->npath + 1) * sizeof *e->path);
            e->path[e->npath++] = bson_strndup(p, n);
            if (!dot)
                break;
            p = dot + 1;
        }
    }
    *out = e;
    return 0;
}

static void render_doc(q_buf *b, const bson_iter_t *it)
{
    const uint8_t *d;
    uint32_t l;
    q_iter_sub(it, &d, &l);
    q_render_doc(b, d, l, bson_iter_type(it) == BSON_TYPE_ARRAY);
}

/* Expression::parseExpression: {$op: args}. */
static int parse_op(const bson_iter_t *doc, agg_scope *s, agg_expr **out, md_error *err)
{
    bson_iter_t x, arg;
    int rc;
    bson_iter_recurse(doc, &x);
    bson_iter_next(&x);
    arg = x;
    if (bson_iter_next(&x)) {
        q_buf b;
        q_buf_init(&b);
        render_doc(&b, doc);
        rc = agg_err(err, 15983,
                     "An object representing an expression must have exactly one field: %s",
                     q_buf_cstr(&b));
        q_buf_cleanup(&b);
        return rc;
    }
    const char *name = bson_iter_key(&arg);
    const agg_op *op = op_find(name);
    if (!op)
        return agg_err(err, 168, "Unrecognized expression '%s'", name);
    agg_expr *e = agg_node_new(AGG_OP);
    e->op = op;
    rc = op->parse ? op->parse(e, &arg, s, err) : agg_parse_nary(e, &arg, s, err);
    if (rc) {
        agg_expr_destroy(e);
        return rc;
    }
    *out = e;
    return 0;
}

/* ExpressionObject::parse: {a: <expr>, b: <expr>}. */
static int parse_object_fields(const uint8_t *data, uint32_t len, agg_scope *s, agg_expr **out,
                               md_error *err)
{
    bson_iter_t x;
    agg_expr *e = agg_node_new(AGG_OBJECT);
    int rc = 0;
    bson_iter_init_from_data(&x, data, len);
    while (bson_iter_next(&x)) {
        const char *k = bson_iter_key(&x);
        for (size_t i = 0; i < e->nkid; i++) {
            if (!strcmp(e->names[i], k)) {
                q_buf b;
                q_buf_init(&b);
                q_render_doc(&b, data, len, false);
                rc = agg_err(err, 16406,
                             "duplicate field name specified in object literal: %s",
                             q_buf_cstr(&b));
                q_buf_cleanup(&b);
                goto out_fail;
            }
        }
        if ((rc = field_name_check(k, strlen(k), err)))
            goto out_fail;
        if (strchr(k, '.')) {
            rc = agg_err(err, 16412, "FieldPath field names may not contain '.'.");
            goto out_fail;
        }
        agg_expr *kid;
        if ((rc = parse_operand(&x, s, &kid, err)))
            goto out_fail;
        e->names = bson_realloc(e->names, (e->nkid + 1) * sizeof *e->names);
        e->names[e->nkid] = bson_strdup(k);
        agg_node_add(e, kid);
    }
    *out = e;
    return 0;
out_fail:
    agg_expr_destroy(e);
    return rc;
}

static int parse_operand(const bson_iter_t *it, agg_scope *s, agg_expr **out, md_error *err)
{
    int rc = 0;
    *out = NULL;
    if (++s->depth > AGG_MAX_DEPTH) {
        s->depth--;
        return agg_err(err, 15983, "expression nested too deeply (over %d levels)",
                       AGG_MAX_DEPTH);
    }
    switch (bson_iter_type(it)) {
    case BSON_TYPE_UTF8: {
        uint32_t len;
        const char *str = bson_iter_utf8(it, &len);
        if (len && str[0] == '$')
            rc = parse_field_path(str, len, s, out, err);
        else
            *out = const_new(it);
        break;
    }
    case BSON_TYPE_DOCUMENT: {
        bson_iter_t x;
        const uint8_t *d;
        uint32_t l;
        bson_iter_recurse(it, &x);
        if (bson_iter_next(&x) && bson_iter_key(&x)[0] == '$') {
            rc = parse_op(it, s, out, err);
        } else {
            q_iter_sub(it, &d, &l);
            rc = parse_object_fields(d, l, s, out, err);
        }
        break;
    }
    case BSON_TYPE_ARRAY: {
        bson_iter_t x;
        agg_expr *e = agg_node_new(AGG_ARRAY);
        bson_iter_recurse(it, &x);
        while (bson_iter_next(&x)) {
            agg_expr *kid;
            if ((rc = parse_operand(&x, s, &kid, err))) {
                agg_expr_destroy(e);
                break;
            }
            agg_node_add(e, kid);
        }
        if (!rc)
            *out = e;
        break;
    }
    default: *out = const_new(it); break;
    }
    s->depth--;
    return rc;
}

int agg_expr_parse(const bson_iter_t *it, agg_scope *s, agg_expr **out, md_error *err)
{
    return parse_operand(it, s, out, err);
}

int agg_expr_parse_object(const bson_t *doc, agg_scope *s, agg_expr **out, md_error *err)
{
    return parse_object_fields(bson_get_data(doc), doc->len, s, out, err);
}

/* Fill kid[i] for each field of the object arg named names[i] (kid gets n
 * slots, NULL where a name is absent).  An unknown field is unknown_code
 * with unknown_fmt, which formats the operator's name and the field. */
int agg_parse_named(agg_expr *e, const bson_iter_t *arg, agg_scope *s, const char *const *names,
                    size_t n, int unknown_code, const char *unknown_fmt, md_error *err)
{
    bson_iter_t x;
    for (size_t i = 0; i < n; i++)
        agg_node_add(e, NULL);
    bson_iter_recurse(arg, &x);
    while (bson_iter_next(&x)) {
        const char *k = bson_iter_key(&x);
        size_t i = 0;
        while (i < n && strcmp(names[i], k))
            i++;
        if (i == n)
            return agg_err(err, unknown_code, unknown_fmt, e->op->name, k);
        agg_expr *kid;
        int rc = agg_expr_parse(&x, s, &kid, err);
        if (rc)
            return rc;
        agg_expr_destroy(e->kid[i]);
        e->kid[i] = kid;
    }
    return 0;
}

/* The arguments of an nary operator: an array is the list, anything else a
 * list of one. */
int agg_parse_nary(agg_expr *e, const bson_iter_t *arg, agg_scope *s, md_error *err)
{
    const agg_op *op = e->op;
    int rc;
    if (BSON_ITER_HOLDS_ARRAY(arg)) {
        bson_iter_t x;
        bson_iter_recurse(arg, &x);
        while (bson_iter_next(&x)) {
            agg_expr *kid;
            if ((rc = parse_operand(&x, s, &kid, err)))
                return rc;
            agg_node_add(e, kid);
        }
    } else {
        agg_expr *kid;
        if ((rc = parse_operand(arg, s, &kid, err)))
            return rc;
        agg_node_add(e, kid);
    }
    int n = (int)e->nkid;
    if (op->min == op->max && n != op->min)
        return agg_err(err, 16020, "Expression %s takes exactly %d arguments. %d were passed in.",
                       op->name, op->min, n);
    if (op->max < 0 && n < op->min)
        return agg_err(err, 16020, "Expression %s takes at least %d arguments. %d were passed in.",
                       op->name, op->min, n);
    if (op->max >= 0 && (n < op->min || n > op->max))
        return agg_err(err, 28667,
                       "Expression %s takes at least %d arguments, and at most %d, but %d were "
                       "passed in.",
                       op->name, op->min, op->max, n);
    return 0;
}

/* ---- evaluation ------------------------------------------------------------------ */

static void path_eval(const agg_expr *e, size_t i, const uint8_t *data, uint32_t len,
                      bson_value_t *out);

/* evaluatePathArray: the rest of the path in each document element. */
static void path_array(const agg_expr *e, size_t i, const uint8_t *data, uint32_t len,
                       bson_value_t *out)
{
    bson_iter_t it;
    agg_arr a;
    agg_arr_init(&a);
    if (bson_iter_init_from_data(&it, data, len)) {
        while (bson_iter_next(&it)) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&it))
                continue;
            const uint8_t *d;
            uint32_t l;
            bson_value_t v;
            bson_iter_document(&it, &l, &d);
            path_eval(e, i, d, l, &v);
            if (!agg_missing(&v))
                agg_arr_push(&a, &v);
            agg_value_destroy(&v);
        }
    }
    agg_arr_finish(&a, out);
}

/* evaluatePath: component i of e->path in document [data, len). */
static void path_eval(const agg_expr *e, size_t i, const uint8_t *data, uint32_t len,
                      bson_value_t *out)
{
    bson_iter_t it;
    agg_set_missing(out);
    if (!q_doc_find(data, len, e->path[i], &it))
        return;
    if (i + 1 == e->npath) {
        agg_value_from_iter(&it, out);
        return;
    }
    const uint8_t *d;
    uint32_t l;
    switch (bson_iter_type(&it)) {
    case BSON_TYPE_DOCUMENT:
        bson_iter_document(&it, &l, &d);
        path_eval(e, i + 1, d, l, out);
        break;
    case BSON_TYPE_ARRAY:
        bson_iter_array(&it, &l, &d);
        path_array(e, i + 1, d, l, out);
        break;
    default: break;
    }
}

static int eval_var(const agg_expr *e, agg_vars *vars, bson_value_t *out)
{
    agg_set_missing(out);
    if (e->slot[0] < 0 || (size_t)e->slot[0] >= vars->n)
        return 0; /* $$REMOVE, or a variable never set */
    const bson_value_t *v = &vars->v[e->slot[0]];
    if (e->npath == 0) {
        agg_value_copy(v, out);
        return 0;
    }
    if (v->value_type == BSON_TYPE_DOCUMENT)
        path_eval(e, 0, v->value.v_doc.data, v->value.v_doc.data_len, out);
    else if (v->value_type == BSON_TYPE_ARRAY)
        path_array(e, 0, v->value.v_doc.data, v->value.v_doc.data_len, out);
    return 0;
}

static int eval_object(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    bson_t b;
    bson_init(&b);
    for (size_t i = 0; i < e->nkid; i++) {
        bson_value_t v;
        int rc = agg_expr_eval(e->kid[i], vars, &v, err);
        if (rc) {
            bson_destroy(&b);
            return rc;
        }
        agg_value_append(&b, e->names[i], -1, &v);
        agg_value_destroy(&v);
    }
    agg_set_doc_steal(out, &b, false);
    return 0;
}

static int eval_array(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    agg_arr a;
    agg_arr_init(&a);
    for (size_t i = 0; i < e->nkid; i++) {
        bson_value_t v;
        int rc = agg_expr_eval(e->kid[i], vars, &v, err);
        if (rc) {
            bson_destroy(&a.b);
            return rc;
        }
        agg_arr_push(&a, &v);
        agg_value_destroy(&v);
    }
    agg_arr_finish(&a, out);
    return 0;
}

int agg_expr_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    agg_set_missing(out);
    switch (e->kind) {
    case AGG_CONST: agg_value_copy(&e->cval, out); return 0;
    case AGG_VAR: return eval_var(e, vars, out);
    case AGG_OBJECT: return eval_object(e, vars, out, err);
    case AGG_ARRAY: return eval_array(e, vars, out, err);
    default: {
        int rc = e->op->eval(e, vars, out, err);
        if (rc)
            agg_value_destroy(out);
        return rc;
    }
    }
}

int agg_eval_kid(const agg_expr *e, size_t i, agg_vars *vars, bson_value_t *out, md_error *err)
{
    if (i >= e->nkid || !e->kid[i]) {
        agg_set_missing(out);
        return 0;
    }
    return agg_expr_eval(e->kid[i], vars, out, err);
}

int agg_eval_kids(const agg_expr *e, agg_vars *vars, bson_value_t *v, md_error *err)
{
    for (size_t i = 0; i < e->nkid; i++)
        agg_set_missing(&v[i]);
    for (size_t i = 0; i < e->nkid; i++) {
        int rc = agg_eval_kid(e, i, vars, &v[i], err);
        if (rc) {
            agg_values_destroy(v, e->nkid);
            return rc;
        }
    }
    return 0;
}

/* ---- properties ---------------------------------------------------------------------- */

bool agg_expr_is_constant(const agg_expr *e)
{
    if (!e)
        return true;
    switch (e->kind) {
    case AGG_CONST: return true;
    case AGG_VAR: return e->slot[0] == AGG_SLOT_REMOVE;
    default:
        for (size_t i = 0; i < e->nkid; i++)
            if (!agg_expr_is_constant(e->kid[i]))
                return false;
        return true;
    }
}

void agg_expr_deps(const agg_expr *e, void (*cb)(const char *path, void *arg), void *arg,
                   bool *whole_doc)
{
    if (!e)
        return;
    if (e->kind == AGG_VAR) {
        if (e->slot[0] == AGG_SLOT_ROOT || e->slot[0] == AGG_SLOT_CURRENT) {
            if (e->npath == 0)
                *whole_doc = true;
            else
                cb(e->text, arg);
        }
        return;
    }
    for (size_t i = 0; i < e->nkid; i++)
        agg_expr_deps(e->kid[i], cb, arg, whole_doc);
}

/* ---- $literal and $let ------------------------------------------------------------ */

static int literal_parse(agg_expr *e, const bson_iter_t *arg, agg_scope *s, md_error *err)
{
    agg_node_add(e, const_new(arg));
    return 0;
}

static int literal_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    agg_value_copy(&e->kid[0]->cval, out);
    return 0;
}

/*
 * {$let: {vars: {name: <expr>, ...}, in: <expr>}}: the variables' expressions
 * see the outer scope only; `in` sees them.  kid[0..n) are the values,
 * kid[n] the body; names[] unused, the slots in data (int[n]).
 */
static int let_parse(agg_expr *e, const bson_iter_t *arg, agg_scope *s, md_error *err)
{
    bson_iter_t x, vars_it, in_it;
    bool have_vars = false, have_in = false;
    int rc;
    if (!BSON_ITER_HOLDS_DOCUMENT(arg))
        return agg_err(err, 16874, "$let only supports an object as its argument");
    bson_iter_recurse(arg, &x);
    while (bson_iter_next(&x)) {
        const char *k = bson_iter_key(&x);
        if (!strcmp(k, "vars")) {
            vars_it = x;
            have_vars = true;
        } else if (!strcmp(k, "in")) {
            in_it = x;
            have_in = true;
        } else {
            return agg_err(err, 16875, "Unrecognized parameter to $let: %s", k);
        }
    }
    if (!have_vars)
        return agg_err(err, 16876, "Missing 'vars' parameter to $let");
    if (!have_in)
        return agg_err(err, 16877, "Missing 'in' parameter to $let");
    if (!BSON_ITER_HOLDS_DOCUMENT(&vars_it))
        return agg_err(err, 10065, "invalid parameter: expected an object (vars)");
    /* the values first, in the outer scope */
    bson_iter_recurse(&vars_it, &x);
    size_t n = 0;
    while (bson_iter_next(&x)) {
        if ((rc = agg_var_name_check(bson_iter_key(&x), err)))
            return rc;
        agg_expr *kid;
        if ((rc = parse_operand(&x, s, &kid, err)))
            return rc;
        agg_node_add(e, kid);
        n++;
    }
    size_t mark = agg_scope_mark(s);
    int *slots = bson_malloc0((n ? n : 1) * sizeof *slots);
    e->data = slots;
    e->flag = (int)n;
    bson_iter_recurse(&vars_it, &x);
    for (size_t i = 0; bson_iter_next(&x); i++)
        slots[i] = agg_scope_push(s, bson_iter_key(&x), err);
    agg_expr *body;
    rc = parse_operand(&in_it, s, &body, err);
    agg_scope_pop(s, mark);
    if (rc)
        return rc;
    agg_node_add(e, body);
    return 0;
}

static void let_cleanup(agg_expr *e)
{
    bson_free(e->data);
}

static int let_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    size_t n = (size_t)e->flag;
    const int *slots = e->data;
    bson_value_t *v = bson_malloc0((n ? n : 1) * sizeof *v);
    int rc = 0;
    for (size_t i = 0; i < n; i++)
        agg_set_missing(&v[i]);
    for (size_t i = 0; i < n && !rc; i++)
        rc = agg_expr_eval(e->kid[i], vars, &v[i], err);
    if (!rc) {
        for (size_t i = 0; i < n; i++)
            agg_vars_steal(vars, slots[i], &v[i]);
        rc = agg_expr_eval(e->kid[n], vars, out, err);
    }
    agg_values_destroy(v, n);
    bson_free(v);
    return rc;
}

const agg_op agg_ops_var[] = {
    {"$literal", 1, 1, literal_parse, literal_eval, NULL},
    {"$let", 1, 1, let_parse, let_eval, let_cleanup},
    {NULL, 0, 0, NULL, NULL, NULL},
};
