/*
 * agg_stage_project.c -- the stages that reshape documents: $project
 * (inclusion, exclusion, computed fields, nested specs), $addFields and
 * its alias $set, $unset, $replaceRoot / $replaceWith and $redact, and the
 * dotted-path helpers other stages use ($unwind).
 *
 * A projection is parsed into a tree of field nodes ("a.b" and {a: {b: ..}}
 * give the same tree).  Applying it walks the input document in its own
 * field order: an inclusion keeps the included fields where they are,
 * then appends the computed ones in the spec's order; an exclusion copies
 * everything but the excluded fields; $addFields replaces a field in
 * place or appends it.  Arrays on a nested path are projected element by
 * element, as MongoDB 4.0 does (scalars inside them dropped by an
 * inclusion, kept by an exclusion).  Expressions are agg_expr.h's, with
 * ROOT and CURRENT the input document.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "agg_int.h"
#include "q_path.h"

/* ---- dotted paths ---------------------------------------------------------------------- */

bool agg_doc_get_path(const bson_t *doc, const char *path, bson_value_t *out)
{
    bson_iter_t it;
    const char *dot = strchr(path, '.');
    size_t n = dot ? (size_t)(dot - path) : strlen(path);
    if (!bson_iter_init(&it, doc))
        return false;
    while (bson_iter_next(&it)) {
        if (bson_iter_key_len(&it) != n || memcmp(bson_iter_key(&it), path, n) != 0)
            continue;
        if (!dot) {
            *out = *bson_iter_value(&it);
            return true;
        }
        if (!BSON_ITER_HOLDS_DOCUMENT(&it))
            return false;
        const uint8_t *data;
        uint32_t len;
        bson_t sub;
        bson_iter_document(&it, &len, &data);
        bson_init_static(&sub, data, len);
        return agg_doc_get_path(&sub, dot + 1, out);
    }
    return false;
}

static void set_path_in(const bson_t *doc, const char *path, const bson_value_t *v, bson_t *out)
{
    bson_iter_t it;
    const char *dot = strchr(path, '.');
    size_t n = dot ? (size_t)(dot - path) : strlen(path);
    bool done = false;
    if (doc && bson_iter_init(&it, doc)) {
        while (bson_iter_next(&it)) {
            bool hit = !done && bson_iter_key_len(&it) == n &&
                       memcmp(bson_iter_key(&it), path, n) == 0;
            if (!hit) {
                bson_append_iter(out, NULL, 0, &it);
                continue;
            }
            done = true;
            if (!dot) {
                agg_value_append(out, path, (int)n, v);
                continue;
            }
            bson_t sub, child;
            bool is_doc = BSON_ITER_HOLDS_DOCUMENT(&it);
            if (is_doc) {
                const uint8_t *data;
                uint32_t len;
                bson_iter_document(&it, &len, &data);
                bson_init_static(&sub, data, len);
            }
            bson_append_document_begin(out, path, (int)n, &child);
            set_path_in(is_doc ? &sub : NULL, dot + 1, v, &child);
            bson_append_document_end(out, &child);
        }
    }
    if (done || v->value_type == BSON_TYPE_EOD)
        return;
    if (!dot) {
        agg_value_append(out, path, (int)n, v);
        return;
    }
    bson_t child;
    bson_append_document_begin(out, path, (int)n, &child);
    set_path_in(NULL, dot + 1, v, &child);
    bson_append_document_end(out, &child);
}

void agg_doc_set_path(const bson_t *doc, const char *path, const bson_value_t *v, bson_t *out)
{
    bson_init(out);
    set_path_in(doc, path, v, out);
}

/* ---- the projection tree -------------------------------------------------------------------- */

enum { P_INCLUDE, P_EXCLUDE, P_COMPUTED, P_SUB };

typedef struct pnode {
    char *name;
    int kind;
    agg_expr *e;           /* P_COMPUTED */
    struct pnode **kids;   /* P_SUB */
    size_t n;
    bool has_computed;     /* P_SUB: some computed field below */
} pnode;

static void pnode_free(pnode *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++)
        pnode_free(p->kids[i]);
    free(p->kids);
    agg_expr_destroy(p->e);
    free(p->name);
    free(p);
}

static pnode *pnode_new(const char *name, size_t len, int kind)
{
    pnode *p = calloc(1, sizeof *p);
    assert(p);
    p->name = strndup(name, len);
    p->kind = kind;
    return p;
}

static pnode *pnode_child(pnode *p, const char *name, size_t len)
{
    for (size_t i = 0; i < p->n; i++)
        if (strlen(p->kids[i]->name) == len && memcmp(p->kids[i]->name, name, len) == 0)
            return p->kids[i];
    return NULL;
}

static void pnode_add(pnode *p, pnode *kid)
{
    p->kids = realloc(p->kids, (p->n + 1) * sizeof *p->kids);
    assert(p->kids);
    p->kids[p->n++] = kid;
}

typedef struct pparse {
    agg_ctx *ctx;
    const char *stage; /* "$project" / "$addFields" */
    bool add_fields;   /* numbers and bools are values, not inclusion flags */
    int mode;          /* -1 undecided, P_INCLUDE or P_EXCLUDE */
    bool id_excluded, id_set;
    q_buf path;        /* the dotted path being parsed, for messages */
} pparse;

static int field_name_check(const char *k, md_error *err)
{
    if (!*k)
        return q_err(err, MD_EINVAL, 40352, "FieldPath cannot be constructed with empty string");
    if (k[0] == '$')
        return q_err(err, MD_EINVAL, 16410, "FieldPath field names may not start with '$'.");
    if (strstr(k, "..") || k[strlen(k) - 1] == '.')
        return q_err(err, MD_EINVAL, 15998, "FieldPath field names may not be empty strings.");
    return 0;
}

static int parse_spec(pparse *pp, pnode *into, const bson_iter_t *spec, md_error *err);

/* The node for dotted key k under `at`, creating SUB nodes on the way. */
static int place(pparse *pp, pnode *at, const char *k, pnode **leaf_parent, const char **leaf,
                 md_error *err)
{
    const char *dot;
    while ((dot = strchr(k, '.'))) {
        pnode *c = pnode_child(at, k, (size_t)(dot - k));
        if (c && c->kind != P_SUB)
            return q_err(err, MD_EINVAL, 40176, "Invalid %s :: caused by :: specification "
                         "contains two conflicting paths. Cannot specify both '%s' and '%s'",
                         pp->stage, c->name, k);
        if (!c) {
            c = pnode_new(k, (size_t)(dot - k), P_SUB);
            pnode_add(at, c);
        }
        at = c;
        k = dot + 1;
    }
    if (pnode_child(at, k, strlen(k)))
        return q_err(err, MD_EINVAL, 40176, "Invalid %s :: caused by :: specification contains "
                     "two conflicting paths. Cannot specify both '%s' and '%s'",
                     pp->stage, k, k);
    *leaf_parent = at;
    *leaf = k;
    return 0;
}

static int set_mode(pparse *pp, int mode, const char *k, bool is_id, md_error *err)
{
    if (is_id)
        return 0;
    if (pp->mode >= 0 && pp->mode != mode)
        return q_err(err, MD_EINVAL, 40178, "Invalid %s :: caused by :: Cannot do %s on field %s "
                     "in %s projection", pp->stage, mode == P_EXCLUDE ? "exclusion" : "inclusion",
                     k, pp->mode == P_EXCLUDE ? "exclusion" : "inclusion");
    pp->mode = mode;
    return 0;
}

/* Is the document at it an expression ({$op: ...}) rather than a nested spec? */
static bool is_expression_doc(const bson_iter_t *it)
{
    bson_iter_t sub;
    return bson_iter_recurse(it, &sub) && bson_iter_next(&sub) && bson_iter_key(&sub)[0] == '$';
}

static int parse_field(pparse *pp, pnode *into, const bson_iter_t *it, bool top, md_error *err)
{
    const char *k = bson_iter_key(it);
    pnode *parent = NULL;
    const char *leaf = NULL;
    int rc = field_name_check(k, err);
    if (!rc)
        rc = place(pp, into, k, &parent, &leaf, err);
    if (rc)
        return rc;
    bool is_id = top && strcmp(k, "_id") == 0;
    bson_type_t t = bson_iter_type(it);
    if (!pp->add_fields && (t == BSON_TYPE_BOOL || BSON_ITER_HOLDS_NUMBER(it))) {
        bool incl = bson_iter_as_bool(it);
        if ((rc = set_mode(pp, incl ? P_INCLUDE : P_EXCLUDE, k, is_id, err)))
            return rc;
        if (is_id) {
            pp->id_set = true;
            pp->id_excluded = !incl;
        }
        pnode_add(parent, pnode_new(leaf, strlen(leaf), incl ? P_INCLUDE : P_EXCLUDE));
        return 0;
    }
    if (t == BSON_TYPE_DOCUMENT && !is_expression_doc(it)) {
        bson_iter_t sub;
        bson_iter_recurse(it, &sub);
        if (!bson_iter_next(&sub))
            return q_err(err, MD_EINVAL, 40180, "Invalid %s :: caused by :: An empty "
                         "sub-projection is not a valid value. Found empty object at path",
                         pp->stage);
        pnode *c = pnode_new(leaf, strlen(leaf), P_SUB);
        pnode_add(parent, c);
        return parse_spec(pp, c, it, err);
    }
    if (!pp->add_fields && (rc = set_mode(pp, P_INCLUDE, k, false, err)))
        return q_err(err, MD_EINVAL, 40178, "Invalid %s :: caused by :: Cannot use expression "
                     "other than $meta in exclusion projection", pp->stage);
    pnode *c = pnode_new(leaf, strlen(leaf), P_COMPUTED);
    pnode_add(parent, c);
    return agg_expr_parse(it, pp->ctx->scope, &c->e, err);
}

static int parse_spec(pparse *pp, pnode *into, const bson_iter_t *spec, md_error *err)
{
    bson_iter_t it;
    bson_iter_recurse(spec, &it);
    while (bson_iter_next(&it)) {
        int rc = parse_field(pp, into, &it, into->name[0] == 0, err);
        if (rc)
            return rc;
    }
    return 0;
}

static bool mark_computed(pnode *p)
{
    bool any = p->kind == P_COMPUTED;
    for (size_t i = 0; i < p->n; i++)
        any |= mark_computed(p->kids[i]);
    p->has_computed = any;
    return any;
}

/* ---- applying ----------------------------------------------------------------------------------- */

typedef struct papply {
    agg_ctx *ctx;
    int mode; /* P_INCLUDE, P_EXCLUDE, or P_COMPUTED for $addFields */
    md_error *err;
    int rc;
} papply;

static void apply_doc(papply *pa, const pnode *node, const bson_t *in, bson_t *out);

static void append_computed(papply *pa, const pnode *c, bson_t *out)
{
    bson_value_t v;
    if (pa->rc)
        return;
    pa->rc = agg_expr_eval(c->e, &pa->ctx->vars, &v, pa->err);
    if (pa->rc)
        return;
    agg_value_append(out, c->name, -1, &v);
    agg_value_destroy(&v);
}

/* A sub-tree over an array: element by element. */
static void apply_array(papply *pa, const pnode *node, const bson_iter_t *arr, bson_t *out)
{
    bson_iter_t it;
    char key[24];
    uint32_t i = 0;
    bson_iter_recurse(arr, &it);
    while (bson_iter_next(&it)) {
        snprintf(key, sizeof key, "%u", i);
        if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
            const uint8_t *data;
            uint32_t len;
            bson_t sub, res;
            bson_iter_document(&it, &len, &data);
            bson_init_static(&sub, data, len);
            apply_doc(pa, node, &sub, &res);
            bson_append_document(out, key, -1, &res);
            bson_destroy(&res);
        } else if (BSON_ITER_HOLDS_ARRAY(&it)) {
            bson_t child;
            bson_append_array_begin(out, key, -1, &child);
            apply_array(pa, node, &it, &child);
            bson_append_array_end(out, &child);
        } else if (pa->mode != P_INCLUDE || node->has_computed) {
            if (pa->mode == P_EXCLUDE) {
                bson_append_iter(out, key, -1, &it);
            } else {
                bson_t res;
                apply_doc(pa, node, NULL, &res);
                bson_append_document(out, key, -1, &res);
                bson_destroy(&res);
            }
        } else {
            continue; /* an inclusion drops scalars inside arrays */
        }
        i++;
    }
}

/* One input field f under node's child c. */
static void apply_field(papply *pa, const pnode *c, const bson_iter_t *f, bson_t *out)
{
    const char *k = bson_iter_key(f);
    if (c->kind == P_INCLUDE) {
        bson_append_iter(out, k, -1, f);
    } else if (c->kind == P_COMPUTED) {
        append_computed(pa, c, out);
    } else if (c->kind == P_SUB) {
        if (BSON_ITER_HOLDS_DOCUMENT(f)) {
            const uint8_t *data;
            uint32_t len;
            bson_t sub, res;
            bson_iter_document(f, &len, &data);
            bson_init_static(&sub, data, len);
            apply_doc(pa, c, &sub, &res);
            bson_append_document(out, k, -1, &res);
            bson_destroy(&res);
        } else if (BSON_ITER_HOLDS_ARRAY(f)) {
            bson_t child;
            bson_append_array_begin(out, k, -1, &child);
            apply_array(pa, c, f, &child);
            bson_append_array_end(out, &child);
        } else if (pa->mode == P_EXCLUDE) {
            bson_append_iter(out, k, -1, f);
        } else if (c->has_computed) {
            bson_t res;
            apply_doc(pa, c, NULL, &res);
            bson_append_document(out, k, -1, &res);
            bson_destroy(&res);
        }
    }
}

static void apply_doc(papply *pa, const pnode *node, const bson_t *in, bson_t *out)
{
    bson_iter_t it;
    bool top = node->name[0] == 0;
    bool *seen = calloc(node->n ? node->n : 1, sizeof *seen);
    assert(seen);
    bson_init(out);
    if (in && bson_iter_init(&it, in)) {
        while (bson_iter_next(&it)) {
            const char *k = bson_iter_key(&it);
            pnode *c = pnode_child((pnode *)node, k, bson_iter_key_len(&it));
            size_t ci = 0;
            for (; c && ci < node->n && node->kids[ci] != c; ci++)
                ;
            if (!c) {
                /* an inclusion keeps _id unless told not to; the others keep all */
                if (pa->mode != P_INCLUDE || (top && strcmp(k, "_id") == 0))
                    bson_append_iter(out, k, -1, &it);
                continue;
            }
            seen[ci] = true;
            if (c->kind == P_EXCLUDE)
                continue;
            apply_field(pa, c, &it, out);
        }
    }
    if (pa->mode != P_EXCLUDE)
        for (size_t i = 0; i < node->n; i++) {
            const pnode *c = node->kids[i];
            if (seen[i])
                continue;
            if (c->kind == P_COMPUTED) {
                append_computed(pa, c, out);
            } else if (c->kind == P_SUB && c->has_computed) {
                bson_t res;
                apply_doc(pa, c, NULL, &res);
                bson_append_document(out, c->name, -1, &res);
                bson_destroy(&res);
            }
        }
    free(seen);
}

/* ---- $project / $addFields / $unset ------------------------------------------------------------ */

typedef struct st_proj {
    agg_stage base;
    pnode *root;
    int mode;
    bool id_excluded;
} st_proj;

static int proj_next(agg_stage *st, bson_t **out, md_error *err)
{
    st_proj *s = (st_proj *)st;
    bson_t *in;
    int rc = agg_pull(st, &in, err);
    if (rc)
        return rc;
    papply pa = {st->ctx, s->mode, err, 0};
    agg_vars_set_root(&st->ctx->vars, in);
    bson_t res;
    apply_doc(&pa, s->root, in, &res);
    *out = bson_copy(&res);
    bson_destroy(&res);
    bson_destroy(in);
    if (pa.rc) {
        bson_destroy(*out);
        *out = NULL;
    }
    return pa.rc;
}

static void proj_destroy(agg_stage *st)
{
    pnode_free(((st_proj *)st)->root);
}

static const agg_stage_ops proj_ops = {.name = "$project", .next = proj_next,
                                       .destroy = proj_destroy};

static int proj_build(agg_ctx *ctx, const bson_iter_t *spec, const char *name, bool add_fields,
                      agg_list *out, md_error *err)
{
    pparse pp = {ctx, name, add_fields, -1, false, false, {0}};
    st_proj *s = agg_stage_alloc(sizeof *s, &proj_ops, ctx, name, spec);
    s->root = pnode_new("", 0, P_SUB);
    int rc = parse_spec(&pp, s->root, spec, err);
    if (rc) {
        agg_stage_destroy(&s->base);
        return rc;
    }
    mark_computed(s->root);
    if (add_fields)
        s->mode = P_COMPUTED;
    else
        s->mode = pp.mode == P_EXCLUDE || (pp.mode < 0 && pp.id_excluded) ? P_EXCLUDE : P_INCLUDE;
    s->id_excluded = pp.id_excluded;
    agg_list_push(out, &s->base);
    return 0;
}

int agg_parse_project(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out, md_error *err)
{
    bson_iter_t it;
    if (!BSON_ITER_HOLDS_DOCUMENT(spec))
        return q_err(err, MD_EINVAL, 15969, "$project specification must be an object");
    bson_iter_recurse(spec, &it);
    if (!bson_iter_next(&it))
        return q_err(err, MD_EINVAL, 40177,
                     "Invalid $project :: caused by :: specification must have at least one "
                     "field");
    return proj_build(ctx, spec, "$project", false, out, err);
}

int agg_parse_add_fields(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out, md_error *err)
{
    const char *name = bson_iter_key(spec);
    if (!BSON_ITER_HOLDS_DOCUMENT(spec))
        return q_err(err, MD_EINVAL, 40272, "%s specification stage must be an object, got %s",
                     name, q_type_name(bson_iter_type(spec)));
    return proj_build(ctx, spec, name, true, out, err);
}

/* {$unset: "a"} / {$unset: ["a", "b.c"]}: the exclusion {a: 0, "b.c": 0}. */
int agg_parse_unset(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out, md_error *err)
{
    bson_t ex = BSON_INITIALIZER;
    bson_iter_t it;
    int rc = 0;
    if (BSON_ITER_HOLDS_UTF8(spec)) {
        BSON_APPEND_INT32(&ex, bson_iter_utf8(spec, NULL), 0);
    } else if (BSON_ITER_HOLDS_ARRAY(spec)) {
        bson_iter_recurse(spec, &it);
        while (!rc && bson_iter_next(&it))
            if (!BSON_ITER_HOLDS_UTF8(&it))
                rc = q_err(err, MD_EINVAL, 31120,
                           "$unset specification must be a string or an array containing only "
                           "string values");
            else
                BSON_APPEND_INT32(&ex, bson_iter_utf8(&it, NULL), 0);
    } else {
        rc = q_err(err, MD_EINVAL, 31002,
                   "$unset specification must be a string or an array");
    }
    if (!rc && bson_empty(&ex))
        rc = q_err(err, MD_EINVAL, 31119,
                   "$unset specification must be a string or an array with at least one field");
    if (!rc) {
        bson_t wrap = BSON_INITIALIZER;
        BSON_APPEND_DOCUMENT(&wrap, "$unset", &ex);
        bson_iter_init(&it, &wrap);
        bson_iter_next(&it);
        rc = proj_build(ctx, &it, "$unset", false, out, err);
        bson_destroy(&wrap);
    }
    bson_destroy(&ex);
    return rc;
}

bool agg_project_simple(agg_stage *st, bson_t *proj)
{
    st_proj *s = (st_proj *)st;
    if (st->ops != &proj_ops || s->mode != P_INCLUDE || !s->id_excluded)
        return false;
    for (size_t i = 0; i < s->root->n; i++)
        if (s->root->kids[i]->kind != P_INCLUDE && strcmp(s->root->kids[i]->name, "_id") != 0)
            return false;
    bson_reinit(proj);
    for (size_t i = 0; i < s->root->n; i++)
        if (strcmp(s->root->kids[i]->name, "_id") != 0)
            BSON_APPEND_INT32(proj, s->root->kids[i]->name, 1);
    BSON_APPEND_INT32(proj, "_id", 0);
    return true;
}

/* ---- $replaceRoot / $replaceWith ------------------------------------------------------------------ */

typedef struct st_replace {
    agg_stage base;
    agg_expr *e;
} st_replace;

static int replace_next(agg_stage *st, bson_t **out, md_error *err)
{
    st_replace *s = (st_replace *)st;
    bson_t *in;
    bson_value_t v;
    int rc = agg_pull(st, &in, err);
    if (rc)
        return rc;
    agg_vars_set_root(&st->ctx->vars, in);
    rc = agg_expr_eval(s->e, &st->ctx->vars, &v, err);
    if (rc == 0 && v.value_type != BSON_TYPE_DOCUMENT) {
        q_buf b;
        q_buf_init(&b);
        q_render_doc(&b, bson_get_data(in), in->len, false);
        rc = q_err(err, MD_EINVAL, 40228,
                   "'newRoot' expression must evaluate to an object, but resulting value was: "
                   "%s. Type of resulting value: '%s'. Input document: %s",
                   v.value_type == BSON_TYPE_EOD ? "MISSING" : "a non-object",
                   v.value_type == BSON_TYPE_EOD ? "missing" : q_type_name(v.value_type),
                   q_buf_cstr(&b));
        q_buf_cleanup(&b);
    }
    if (rc == 0)
        *out = bson_new_from_data(v.value.v_doc.data, v.value.v_doc.data_len);
    agg_value_destroy(&v);
    bson_destroy(in);
    return rc;
}

static void replace_destroy(agg_stage *st)
{
    agg_expr_destroy(((st_replace *)st)->e);
}

static const agg_stage_ops replace_ops = {.name = "$replaceRoot", .next = replace_next,
                                          .destroy = replace_destroy};

static int replace_build(agg_ctx *ctx, const bson_iter_t *spec, const bson_iter_t *expr,
                         agg_list *out, md_error *err)
{
    st_replace *s = agg_stage_alloc(sizeof *s, &replace_ops, ctx, bson_iter_key(spec), spec);
    int rc = agg_expr_parse(expr, ctx->scope, &s->e, err);
    if (rc) {
        agg_stage_destroy(&s->base);
        return rc;
    }
    agg_list_push(out, &s->base);
    return 0;
}

int agg_parse_replace_root(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out, md_error *err)
{
    bson_iter_t it, nr;
    bool have = false;
    if (!BSON_ITER_HOLDS_DOCUMENT(spec))
        return q_err(err, MD_EINVAL, 40229,
                     "expected an object as specification for $replaceRoot stage, got %s",
                     q_type_name(bson_iter_type(spec)));
    bson_iter_recurse(spec, &it);
    while (bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), "newRoot") != 0)
            return q_err(err, MD_EINVAL, 40230, "unrecognized option to $replaceRoot stage: %s, "
                         "only valid option is 'newRoot'.", bson_iter_key(&it));
        nr = it;
        have = true;
    }
    if (!have)
        return q_err(err, MD_EINVAL, 40231, "no newRoot specified for the $replaceRoot stage");
    return replace_build(ctx, spec, &nr, out, err);
}

int agg_parse_replace_with(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out, md_error *err)
{
    return replace_build(ctx, spec, spec, out, err);
}

/* ---- $redact ---------------------------------------------------------------------------------------- */

typedef struct st_redact {
    agg_stage base;
    agg_expr *e;
} st_redact;

/* $$DESCEND / $$PRUNE / $$KEEP are system variables holding the strings
 * "descend", "prune" and "keep": the spec is rewritten with those strings
 * as literals before it is parsed, which is what they evaluate to. */
static void redact_rewrite(bson_iter_t *it, bson_t *out)
{
    while (bson_iter_next(it)) {
        const char *k = bson_iter_key(it);
        bson_iter_t sub;
        bson_t child;
        if (BSON_ITER_HOLDS_UTF8(it)) {
            const char *v = bson_iter_utf8(it, NULL);
            const char *lit = !strcmp(v, "$$DESCEND") ? "descend"
                              : !strcmp(v, "$$PRUNE") ? "prune"
                              : !strcmp(v, "$$KEEP")  ? "keep"
                                                      : NULL;
            if (lit) {
                bson_append_document_begin(out, k, -1, &child);
                BSON_APPEND_UTF8(&child, "$literal", lit);
                bson_append_document_end(out, &child);
                continue;
            }
        }
        if (BSON_ITER_HOLDS_DOCUMENT(it) && bson_iter_recurse(it, &sub)) {
            bson_append_document_begin(out, k, -1, &child);
            redact_rewrite(&sub, &child);
            bson_append_document_end(out, &child);
        } else if (BSON_ITER_HOLDS_ARRAY(it) && bson_iter_recurse(it, &sub)) {
            bson_append_array_begin(out, k, -1, &child);
            redact_rewrite(&sub, &child);
            bson_append_array_end(out, &child);
        } else {
            bson_append_iter(out, k, -1, it);
        }
    }
}

/* 0 with *keep: -1 prune, 0 descend, 1 keep. */
static int redact_decide(st_redact *s, const bson_t *cur, int *keep, md_error *err)
{
    bson_value_t v, cv = {.value_type = BSON_TYPE_DOCUMENT};
    cv.value.v_doc.data = (uint8_t *)bson_get_data(cur);
    cv.value.v_doc.data_len = cur->len;
    agg_vars_set(&s->base.ctx->vars, AGG_SLOT_CURRENT, &cv);
    int rc = agg_expr_eval(s->e, &s->base.ctx->vars, &v, err);
    if (rc)
        return rc;
    const char *str = v.value_type == BSON_TYPE_UTF8 ? v.value.v_utf8.str : "";
    if (!strcmp(str, "prune"))
        *keep = -1;
    else if (!strcmp(str, "descend"))
        *keep = 0;
    else if (!strcmp(str, "keep"))
        *keep = 1;
    else
        rc = q_err(err, MD_EINVAL, 17053, "$redact's expression should not return anything "
                   "aside from the variables $$KEEP, $$DESCEND, and $$PRUNE, but returned %s",
                   v.value_type == BSON_TYPE_UTF8 ? str : q_type_name(v.value_type));
    agg_value_destroy(&v);
    return rc;
}

static int redact_doc(st_redact *s, const bson_t *in, bson_t *out, bool *kept, md_error *err);

static int redact_array(st_redact *s, bson_iter_t *arr, bson_t *out, md_error *err)
{
    bson_iter_t it;
    char key[24];
    uint32_t i = 0;
    bson_iter_recurse(arr, &it);
    while (bson_iter_next(&it)) {
        snprintf(key, sizeof key, "%u", i);
        if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
            const uint8_t *data;
            uint32_t len;
            bson_t sub, res;
            bool kept;
            bson_iter_document(&it, &len, &data);
            bson_init_static(&sub, data, len);
            int rc = redact_doc(s, &sub, &res, &kept, err);
            if (rc)
                return rc;
            if (kept)
                bson_append_document(out, key, -1, &res), i++;
            bson_destroy(&res);
        } else if (BSON_ITER_HOLDS_ARRAY(&it)) {
            bson_t child;
            bson_append_array_begin(out, key, -1, &child);
            int rc = redact_array(s, &it, &child, err);
            bson_append_array_end(out, &child);
            if (rc)
                return rc;
            i++;
        } else {
            bson_append_iter(out, key, -1, &it);
            i++;
        }
    }
    return 0;
}

static int redact_doc(st_redact *s, const bson_t *in, bson_t *out, bool *kept, md_error *err)
{
    int keep = -1;
    bson_iter_t it;
    bson_init(out);
    *kept = false;
    int rc = redact_decide(s, in, &keep, err);
    if (rc || keep < 0)
        return rc;
    *kept = true;
    if (keep > 0) {
        bson_concat(out, in);
        return 0;
    }
    bson_iter_init(&it, in);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
            const uint8_t *data;
            uint32_t len;
            bson_t sub, res;
            bool sub_kept;
            bson_iter_document(&it, &len, &data);
            bson_init_static(&sub, data, len);
            rc = redact_doc(s, &sub, &res, &sub_kept, err);
            if (!rc && sub_kept)
                bson_append_document(out, k, -1, &res);
            bson_destroy(&res);
        } else if (BSON_ITER_HOLDS_ARRAY(&it)) {
            bson_t child;
            bson_append_array_begin(out, k, -1, &child);
            rc = redact_array(s, &it, &child, err);
            bson_append_array_end(out, &child);
        } else {
            bson_append_iter(out, k, -1, &it);
        }
        if (rc)
            return rc;
    }
    return 0;
}

static int redact_next(agg_stage *st, bson_t **out, md_error *err)
{
    st_redact *s = (st_redact *)st;
    for (;;) {
        bson_t *in, res;
        bool kept;
        int rc = agg_pull(st, &in, err);
        if (rc)
            return rc;
        agg_vars_set_root(&st->ctx->vars, in);
        rc = redact_doc(s, in, &res, &kept, err);
        bson_destroy(in);
        if (rc || !kept) {
            bson_destroy(&res);
            if (rc)
                return rc;
            continue;
        }
        *out = bson_copy(&res);
        bson_destroy(&res);
        return 0;
    }
}

static void redact_destroy(agg_stage *st)
{
    agg_expr_destroy(((st_redact *)st)->e);
}

static const agg_stage_ops redact_ops = {.name = "$redact", .next = redact_next,
                                         .destroy = redact_destroy};

int agg_parse_redact(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out, md_error *err)
{
    bson_t src = BSON_INITIALIZER, dst = BSON_INITIALIZER;
    bson_iter_t it;
    bson_append_iter(&src, "e", 1, spec);
    bson_iter_init(&it, &src);
    redact_rewrite(&it, &dst);
    bson_iter_init_find(&it, &dst, "e");
    st_redact *s = agg_stage_alloc(sizeof *s, &redact_ops, ctx, "$redact", spec);
    int rc = agg_expr_parse(&it, ctx->scope, &s->e, err);
    bson_destroy(&src);
    bson_destroy(&dst);
    if (rc) {
        agg_stage_destroy(&s->base);
        return rc;
    }
    agg_list_push(out, &s->base);
    return 0;
}
