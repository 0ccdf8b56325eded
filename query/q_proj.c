/*
 * q_proj.c -- find projections as MongoDB 3.6's ProjectionExec: inclusion
 * and exclusion of (dotted) fields, _id: 0, $slice, $elemMatch and the
 * positional "a.$".
 *
 * The spec becomes a tree, one node per path component; each node says
 * whether fields it does not name are kept (`include`):
 *
 *   {a: 1, "b.c": 1}  root(include=0) ─┬─ a (1)
 *                                      └─ b (0) ── c (1)
 *
 * Applying walks the document: a field with no node follows its parent's
 * `include`; a document field recurses; an array field applies its node to
 * each element (document elements recurse, nested arrays keep their
 * documents projected, scalars follow `include`), after the node's $slice
 * (skip, limit).  $elemMatch keeps the first element matching; "a.$" keeps
 * the element the query matched (q_matcher_matches_pos), and, as in 3.6,
 * applies to every array field that has sub-fields in the projection.
 * {f: {$meta: "textScore"}} appends f (replacing a field of that name) with
 * the score the caller put in text_score (0 outside a $text query, as 3.x's
 * ProjectionExec); it does not make the projection an inclusion.
 * Deviation: when a positional projection finds no matched element the field
 * is left out (MongoDB fails the query).
 */
#include <string.h>

#include "q_int.h"
#include "q_path.h"

typedef struct q_pnode q_pnode;
struct q_pnode {
    char *name;
    bool include, special;
    int64_t skip, limit; /* $slice; limit -1: no limit */
    q_matcher *em;       /* $elemMatch on this top-level field */
    q_pnode **kid;
    size_t nkid;
};

static q_pnode *pnode_new(const char *name)
{
    q_pnode *n = bson_malloc0(sizeof *n);
    n->name = bson_strdup(name);
    n->include = true;
    n->limit = -1;
    return n;
}

static void pnode_free(q_pnode *n)
{
    if (!n)
        return;
    for (size_t i = 0; i < n->nkid; i++)
        pnode_free(n->kid[i]);
    q_matcher_destroy(n->em);
    bson_free(n->kid);
    bson_free(n->name);
    bson_free(n);
}

static q_pnode *pnode_kid(const q_pnode *n, const char *name)
{
    for (size_t i = 0; i < n->nkid; i++)
        if (!strcmp(n->kid[i]->name, name))
            return n->kid[i];
    return NULL;
}

static q_pnode *pnode_kid_make(q_pnode *n, const char *name)
{
    q_pnode *k = pnode_kid(n, name);
    if (!k) {
        k = pnode_new(name);
        n->kid = bson_realloc(n->kid, (n->nkid + 1) * sizeof *n->kid);
        n->kid[n->nkid++] = k;
    }
    return k;
}

/* ProjectionExec::add(field, include) and add(field, skip, limit). */
static q_pnode *pnode_add(q_pnode *root, const char *dotted, bool include, bool slice,
                          int64_t skip, int64_t limit)
{
    q_path p;
    q_pnode *n = root;
    if (!q_path_init(&p, dotted, -1))
        return NULL;
    for (size_t i = 0; i < p.n; i++) {
        if (slice)
            n->special = true;
        else
            n->include = !include;
        n = pnode_kid_make(n, p.part[i]);
    }
    if (slice) {
        n->special = true;
        n->skip = skip;
        n->limit = limit;
    } else {
        n->include = include;
    }
    q_path_cleanup(&p);
    return n;
}

static int proj_bad(md_error *err, const char *msg)
{
    return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE, "%s", msg);
}

/* BSONElement::numberInt, clamped (NaN: 0). */
static int64_t slice_int(long double d)
{
    return d != d ? 0 : d > 2147483647.0L ? 2147483647 : d < -2147483648.0L ? -2147483648LL
                                                                            : (int64_t)d;
}

/* {$slice: n} or {$slice: [skip, limit]} */
static int parse_slice(q_proj *p, const char *k, const bson_iter_t *v, md_error *err)
{
    int64_t skip = 0, limit = -1;
    if (q_is_number(bson_iter_type(v))) {
        int64_t i = slice_int(q_number_ld(v));
        skip = i < 0 ? i : 0;
        limit = i < 0 ? -i : i;
    } else if (BSON_ITER_HOLDS_ARRAY(v)) {
        bson_iter_t x;
        long double n[2];
        int k2 = 0;
        bson_iter_recurse(v, &x);
        while (bson_iter_next(&x)) {
            if (k2 == 2 || !q_is_number(bson_iter_type(&x)))
                return proj_bad(err, "$slice array wrong size");
            n[k2++] = q_number_ld(&x);
        }
        if (k2 != 2)
            return proj_bad(err, "$slice array wrong size");
        skip = slice_int(n[0]);
        limit = slice_int(n[1]);
        if (limit <= 0)
            return proj_bad(err, "$slice limit must be positive");
    } else {
        return proj_bad(err, "$slice only supports numbers and [skip, limit] arrays");
    }
    if (!pnode_add(p->root, k, true, true, skip, limit))
        return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                     "projection '%s' has an empty field name", k);
    return 0;
}

static int parse_elem_match(q_proj *p, const char *k, const bson_iter_t *field,
                            const bson_iter_t *v, md_error *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(v))
        return proj_bad(err, "elemMatch: Invalid argument, object required.");
    if (strchr(k, '.'))
        return proj_bad(err, "Cannot use $elemMatch projection on a nested field.");
    if (p->positional)
        return proj_bad(err, "Cannot specify positional operator and $elemMatch.");
    bson_t q = BSON_INITIALIZER;
    bson_append_iter(&q, k, -1, field);
    q_matcher *m;
    int rc = q_matcher_new(&q, &m, err);
    bson_destroy(&q);
    if (rc)
        return rc;
    q_pnode *n = pnode_add(p->root, k, true, false, 0, -1);
    if (!n) {
        q_matcher_destroy(m);
        return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                     "projection '%s' has an empty field name", k);
    }
    q_matcher_destroy(n->em);
    n->em = m;
    p->elem_match = true;
    return 0;
}

/* {k: {$meta: "textScore"}} (ParsedProjection's checks). */
static int parse_meta(q_proj *p, const char *k, const bson_iter_t *x, md_error *err)
{
    if (strchr(k, '.'))
        return proj_bad(err, "field for $meta cannot be nested");
    if (!BSON_ITER_HOLDS_UTF8(x))
        return proj_bad(err, "unexpected argument to $meta in proj");
    const char *what = bson_iter_utf8(x, NULL);
    if (strcmp(what, "textScore")) {
        static const char *const later[] = {"recordId", "indexKey", "geoNearDistance",
                                            "geoNearPoint", "sortKey"};
        for (size_t i = 0; i < sizeof later / sizeof later[0]; i++)
            if (!strcmp(what, later[i]))
                return q_err(err, MD_EINVAL, MD_CODE_NOT_YET_IMPLEMENTED,
                             "$meta \"%s\" is not supported yet", what);
        return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE, "unsupported $meta operator: %s", what);
    }
    p->meta = bson_realloc(p->meta, (p->nmeta + 1) * sizeof *p->meta);
    p->meta[p->nmeta++] = bson_strdup(k);
    return 0;
}

/* One field whose value is a document: {$slice}, {$elemMatch}, {$meta}. */
static int parse_special(q_proj *p, const bson_iter_t *field, md_error *err)
{
    bson_iter_t x;
    const char *k = bson_iter_key(field);
    if (bson_iter_recurse(field, &x) && bson_iter_next(&x)) {
        if (!strcmp(bson_iter_key(&x), "$slice"))
            return parse_slice(p, k, &x, err);
        if (!strcmp(bson_iter_key(&x), "$elemMatch"))
            return parse_elem_match(p, k, field, &x, err);
        if (!strcmp(bson_iter_key(&x), "$meta"))
            return parse_meta(p, k, &x, err);
    }
    q_buf b;
    q_buf_init(&b);
    q_render_elem(&b, field);
    q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE, "Unsupported projection option: %s",
          q_buf_cstr(&b));
    q_buf_cleanup(&b);
    return MD_EINVAL;
}

/* Does the filter have a predicate on a path whose first component is
 * `first` (top level, or inside $and/$or/$nor)? */
static bool filter_has_field(const bson_t *filter, const char *first)
{
    bson_iter_t it, x;
    size_t n = strlen(first);
    if (!filter || !bson_iter_init(&it, filter))
        return false;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (k[0] == '$' && BSON_ITER_HOLDS_ARRAY(&it) && bson_iter_recurse(&it, &x)) {
            while (bson_iter_next(&x)) {
                const uint8_t *d;
                uint32_t l;
                bson_t sub;
                if (!BSON_ITER_HOLDS_DOCUMENT(&x))
                    continue;
                q_iter_sub(&x, &d, &l);
                if (bson_init_static(&sub, d, l) && filter_has_field(&sub, first))
                    return true;
            }
        } else if (!strncmp(k, first, n) && (k[n] == '\0' || k[n] == '.')) {
            return true;
        }
    }
    return false;
}

/* "a.b.$": positional projection of array field a.b. */
static int parse_positional(q_proj *p, const char *k, const bson_t *filter, md_error *err)
{
    const char *dollar = strstr(k, ".$");
    if (p->positional)
        return proj_bad(err, "Cannot specify more than one positional proj. per query.");
    if (p->elem_match)
        return proj_bad(err, "Cannot specify positional operator and $elemMatch.");
    char first[256];
    size_t n = strcspn(k, ".");
    snprintf(first, sizeof first, "%.*s", (int)(n < sizeof first ? n : sizeof first - 1), k);
    if (!filter_has_field(filter, first))
        return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                     "Positional projection '%s' does not match the query document.", k);
    if (dollar[2] != '\0')
        return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                     "Positional projection '%s' must be at the end of the field path", k);
    p->positional = true;
    return 0;
}

static int parse_field(q_proj *p, const bson_iter_t *it, const bson_t *filter, int *mode,
                       md_error *err)
{
    const char *k = bson_iter_key(it);
    if (BSON_ITER_HOLDS_DOCUMENT(it))
        return parse_special(p, it, err);
    bool on = bson_iter_as_bool(it);
    if (!strcmp(k, "_id") && !on) {
        p->id = false;
        return 0;
    }
    if (*mode >= 0 && *mode != (int)on)
        return proj_bad(err, "Projection cannot have a mix of inclusion and exclusion.");
    *mode = on;
    if (strstr(k, ".$")) {
        int rc = parse_positional(p, k, filter, err);
        if (rc)
            return rc;
    }
    if (!pnode_add(p->root, k, on, false, 0, -1))
        return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                     "projection '%s' has an empty field name", k);
    return 0;
}

int q_proj_init_query(q_proj *p, const bson_t *spec, const bson_t *filter, md_error *err)
{
    bson_iter_t it;
    int mode = -1; /* -1 unknown, 0 exclusion, 1 inclusion */
    memset(p, 0, sizeof *p);
    p->id = true;
    if (!spec || bson_empty(spec))
        return 0;
    p->active = true;
    p->root = pnode_new("");
    bson_iter_init(&it, spec);
    while (bson_iter_next(&it)) {
        int rc = parse_field(p, &it, filter, &mode, err);
        if (rc) {
            q_proj_cleanup(p);
            return rc;
        }
    }
    return 0;
}

void q_proj_cleanup(q_proj *p)
{
    pnode_free(p->root);
    p->root = NULL;
    p->active = false;
    for (size_t i = 0; i < p->nmeta; i++)
        bson_free(p->meta[i]);
    bson_free(p->meta);
    p->meta = NULL;
    p->nmeta = 0;
}

static bool is_meta(const q_proj *p, const char *k)
{
    for (size_t i = 0; i < p->nmeta; i++)
        if (!strcmp(p->meta[i], k))
            return true;
    return false;
}

/* ---- applying ----------------------------------------------------------------- */

typedef struct proj_ctx {
    const q_proj *p;
    const char *pos; /* the query's matched array offset, for "a.$" */
} proj_ctx;

static void append_field(const proj_ctx *c, const q_pnode *n, bson_t *out,
                         const bson_iter_t *e, const char *key);

/* ProjectionExec::appendArray */
static void append_array(const proj_ctx *c, const q_pnode *n, bson_t *out,
                         const bson_iter_t *arr, bool nested)
{
    int64_t skip = nested ? 0 : n->skip, limit = nested ? -1 : n->limit;
    bson_iter_t x, y;
    char key[24];
    int64_t idx = 0, count = 0;
    if (skip < 0) {
        bson_iter_recurse(arr, &x);
        while (bson_iter_next(&x))
            count++;
        skip = skip + count < 0 ? 0 : skip + count;
    }
    bson_iter_recurse(arr, &x);
    while (bson_iter_next(&x)) {
        if (skip) {
            skip--;
            continue;
        }
        if (limit != -1 && limit-- == 0)
            break;
        snprintf(key, sizeof key, "%lld", (long long)idx);
        bson_t sub;
        if (BSON_ITER_HOLDS_ARRAY(&x)) {
            bson_append_array_begin(out, key, -1, &sub);
            append_array(c, n, &sub, &x, true);
            bson_append_array_end(out, &sub);
            idx++;
        } else if (BSON_ITER_HOLDS_DOCUMENT(&x)) {
            bson_append_document_begin(out, key, -1, &sub);
            bson_iter_recurse(&x, &y);
            while (bson_iter_next(&y))
                append_field(c, n, &sub, &y, bson_iter_key(&y));
            bson_append_document_end(out, &sub);
            idx++;
        } else if (n->include) {
            bson_append_iter(out, key, -1, &x);
            idx++;
        }
    }
}

/* ProjectionExec::append: element e of a document projected by parent n. */
static void append_field(const proj_ctx *c, const q_pnode *n, bson_t *out,
                         const bson_iter_t *e, const char *key)
{
    const q_pnode *f = pnode_kid(n, bson_iter_key(e));
    bson_t sub;
    bson_iter_t x;
    if (!f) {
        if (n->include)
            bson_append_iter(out, key, -1, e);
        return;
    }
    if ((!f->nkid && !f->special) || !q_is_container(bson_iter_type(e))) {
        if (f->include)
            bson_append_iter(out, key, -1, e);
    } else if (BSON_ITER_HOLDS_DOCUMENT(e)) {
        bson_append_document_begin(out, key, -1, &sub);
        bson_iter_recurse(e, &x);
        while (bson_iter_next(&x))
            append_field(c, f, &sub, &x, bson_iter_key(&x));
        bson_append_document_end(out, &sub);
    } else if (c->p->positional) {
        if (!c->pos || !*c->pos || !bson_iter_recurse(e, &x) || !bson_iter_find(&x, c->pos))
            return;
        bson_append_array_begin(out, key, -1, &sub);
        bson_append_iter(&sub, "0", 1, &x);
        bson_append_array_end(out, &sub);
    } else {
        bson_append_array_begin(out, key, -1, &sub);
        append_array(c, f, &sub, e, false);
        bson_append_array_end(out, &sub);
    }
}

/* $elemMatch on top-level field e: {name: [first matching element]}. */
static void append_elem_match(const proj_ctx *c, const q_pnode *f, const bson_t *doc,
                              const bson_iter_t *e, bson_t *out)
{
    char pos[32];
    bson_iter_t x;
    if (!BSON_ITER_HOLDS_ARRAY(e) || !q_matcher_matches_pos(f->em, doc, pos, sizeof pos) ||
        !bson_iter_recurse(e, &x) || !bson_iter_find(&x, pos))
        return;
    bson_t sub;
    bson_append_array_begin(out, bson_iter_key(e), -1, &sub);
    bson_append_iter(&sub, "0", 1, &x);
    bson_append_array_end(out, &sub);
}

void q_proj_apply(const q_proj *p, const bson_t *doc, bson_t *out)
{
    bson_iter_t it;
    char pos[32] = "";
    bson_init(out);
    if (!p->active) {
        bson_concat(out, doc);
        return;
    }
    if (p->positional && p->m)
        q_matcher_matches_pos(p->m, doc, pos, sizeof pos);
    proj_ctx c = {p, pos};
    bson_iter_init(&it, doc);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        const q_pnode *f = pnode_kid(p->root, k);
        if (p->nmeta && is_meta(p, k))
            continue; /* the $meta value replaces it */
        if (!strcmp(k, "_id")) {
            if (p->id)
                bson_append_iter(out, NULL, 0, &it);
        } else if (f && f->em) {
            append_elem_match(&c, f, doc, &it, out);
        } else {
            append_field(&c, p->root, out, &it, k);
        }
    }
    for (size_t i = 0; i < p->nmeta; i++)
        BSON_APPEND_DOUBLE(out, p->meta[i], p->text_score);
}
