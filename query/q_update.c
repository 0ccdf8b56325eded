/*
 * q_update.c -- MongoDB 3.6 updates: parse an update document into a tree
 * keyed by path component, then rebuild a document from an old one in a
 * single pass, with the damage list of a size-preserving change.
 *
 *   {$set: {"a.b": 1}, $inc: {c: 2}}   root ─┬─ a ── b  [$set 1]
 *                                             └─ c      [$inc 2]
 *
 * Applying walks the old document in field order: fields with a tree child
 * are rebuilt by it, others are copied byte for byte; then the children
 * that found no field create theirs, in name order (3.6 keeps children in
 * a sorted map, so one update's new fields appear sorted).  $rename is a
 * placeholder at its source and a leaf at its target, as in 3.6.  The
 * array operators ($push $addToSet $pop $pull $pullAll) are leaves whose
 * work is done in q_update_array.c.  "$[]" and "$[id]" children (with
 * the update's arrayFilters, each parsed into a matcher run on {id: elem})
 * are kept apart from the named children and applied to every element, or
 * to the elements their filter matches.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "q.h"
#include "q_path.h"
#include "q_uarr.h"
#include "q_uint.h"

/* ---- tree ----------------------------------------------------------------- */

/* A node from u's arena (it holds a bson_iter_t: 128-byte alignment);
 * name and full may be NULL (set when the leaf is placed). */
static q_unode *unode_new(q_update *u, const char *name, const char *full)
{
    q_unode *n = q_arena_alloc_aligned(&u->arena, sizeof *n, BSON_ALIGNOF(q_unode));
    n->name = name ? q_arena_strdup(&u->arena, name) : NULL;
    n->full = full ? q_arena_strdup(&u->arena, full) : NULL;
    return n;
}

/* What a node holds outside the arena: its array operator's state. */
static void unode_free(q_unode *n)
{
    if (!n)
        return;
    for (size_t i = 0; i < n->nkid; i++)
        unode_free(n->kid[i]);
    unode_free(n->positional);
    for (size_t i = 0; i < n->naf; i++)
        unode_free(n->af[i]);
    q_uarr_destroy(n->arr);
    n->arr = NULL;
}

/* Grow an arena array of pointers from n to cap entries. */
static void *arena_grow(q_update *u, void *old, size_t n, size_t cap)
{
    void *p = q_arena_alloc(&u->arena, cap * sizeof(void *));
    if (n)
        memcpy(p, old, n * sizeof(void *));
    return p;
}

/* Index of the first child whose name is >= name. */
static size_t kid_lower(const q_unode *n, const char *name)
{
    size_t lo = 0, hi = n->nkid;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (strcmp(n->kid[mid]->name, name) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static q_unode *kid_get(const q_unode *n, const char *name)
{
    if (!strcmp(name, "$"))
        return n->positional;
    for (size_t j = 0; name[0] == '$' && name[1] == '[' && j < n->naf; j++)
        if (!strcmp(n->af[j]->name, name))
            return n->af[j];
    size_t i = kid_lower(n, name);
    return i < n->nkid && !strcmp(n->kid[i]->name, name) ? n->kid[i] : NULL;
}

static void kid_set(q_update *u, q_unode *n, q_unode *kid)
{
    if (!strcmp(kid->name, "$")) {
        assert(!n->positional);
        n->positional = kid;
        return;
    }
    if (kid->name[0] == '$' && kid->name[1] == '[') {
        n->af = arena_grow(u, n->af, n->naf, n->naf + 1);
        n->af[n->naf++] = kid;
        return;
    }
    if (n->nkid == n->capkid) {
        n->capkid = n->capkid ? 2 * n->capkid : 4;
        n->kid = arena_grow(u, n->kid, n->nkid, n->capkid);
    }
    size_t i = kid_lower(n, kid->name);
    memmove(n->kid + i + 1, n->kid + i, (n->nkid - i) * sizeof *n->kid);
    n->kid[i] = kid;
    n->nkid++;
}

/* UpdateObjectNode::parseAndMerge's tree part: interior nodes along p, the
 * leaf at its end; ConflictingUpdateOperators (40) when paths overlap. */
static int tree_add(q_update *u, const q_path *p, const char *dotted, q_unode *leaf,
                    md_error *err)
{
    q_unode *cur = u->root;
    uint8_t space[256];
    q_buf prefix;
    q_buf_init_fixed(&prefix, space, sizeof space);
    for (size_t i = 0; i + 1 < p->n; i++) {
        q_buf_reset(&prefix);
        q_path_join(&prefix, p, 0, i + 1);
        q_unode *kid = kid_get(cur, p->part[i]);
        if (kid && kid->leaf) {
            md_error_set(err, MD_EINVAL, MD_CODE_CONFLICTING_UPDATE_OPERATORS,
                         "Updating the path '%s' would create a conflict at '%s'", dotted,
                         q_buf_cstr(&prefix));
            goto out_fail;
        }
        if (!kid) {
            kid = unode_new(u, p->part[i], q_buf_cstr(&prefix));
            kid_set(u, cur, kid);
        }
        cur = kid;
    }
    if (kid_get(cur, p->part[p->n - 1])) {
        md_error_set(err, MD_EINVAL, MD_CODE_CONFLICTING_UPDATE_OPERATORS,
                     "Updating the path '%s' would create a conflict at '%s'", dotted, dotted);
        goto out_fail;
    }
    leaf->name = q_arena_strdup(&u->arena, p->part[p->n - 1]);
    leaf->full = q_arena_strdup(&u->arena, dotted);
    kid_set(u, cur, leaf);
    q_buf_cleanup(&prefix);
    return 0;
out_fail:
    q_buf_cleanup(&prefix);
    unode_free(leaf);
    return MD_EINVAL;
}

/* ---- parsing ---------------------------------------------------------------- */

/* The array filter named by component "$[id]" of `dotted`, marked used;
 * BadValue when there is none. */
static int af_resolve(q_update *u, const char *c, const char *dotted, md_error *err)
{
    if (!strcmp(c, "$[]"))
        return 0;
    size_t n = strlen(c);
    for (size_t i = 0; u && i < u->naf; i++) {
        if (n == strlen(u->af[i].name) + 3 && !strncmp(c + 2, u->af[i].name, n - 3)) {
            u->af[i].used = true;
            return 0;
        }
    }
    return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                        "No array filter found for identifier '%.*s' in path '%s'",
                        (int)(n > 3 ? n - 3 : 0), c + 2, dotted);
}

/* fieldchecker::isUpdatable plus the positional rules of parseAndMerge. */
static int check_path_af(q_update *u, const char *dotted, q_path *p, md_error *err);
static int check_path(const char *dotted, q_path *p, md_error *err)
{
    return check_path_af(NULL, dotted, p, err);
}

static int check_path_af(q_update *u, const char *dotted, q_path *p, md_error *err)
{
    if (!*dotted)
        return md_error_set(err, MD_EINVAL, MD_CODE_EMPTY_FIELD_NAME,
                            "An empty update path is not valid.");
    if (!(u ? q_path_init_arena(p, dotted, -1, &u->arena) : q_path_init(p, dotted, -1)))
        return md_error_set(err, MD_EINVAL, MD_CODE_EMPTY_FIELD_NAME,
                            "The update path '%s' contains an empty field name, which is not "
                            "allowed.", dotted);
    size_t npos = 0;
    for (size_t i = 0; i < p->n; i++) {
        const char *c = p->part[i];
        if (c[0] == '$' && c[1] == '[' && c[strlen(c) - 1] == ']') {
            if (af_resolve(u, c, dotted, err)) {
                q_path_cleanup(p);
                return MD_EINVAL;
            }
            continue;
        }
        npos += !strcmp(c, "$");
    }
    if (!strncmp(p->part[0], "$[", 2) && p->part[0][strlen(p->part[0]) - 1] == ']') {
        q_path_cleanup(p);
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                            "Cannot have array filter identifier (i.e. '$[<id>]') element in "
                            "the first position in path '%s'", dotted);
    }
    if (npos > 1 || (npos && !strcmp(p->part[0], "$"))) {
        q_path_cleanup(p);
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                            npos > 1 ? "Too many positional (i.e. '$') elements found in path "
                                       "'%s'"
                                     : "Cannot have positional (i.e. '$') element in the "
                                       "first position in path '%s'",
                            dotted);
    }
    return 0;
}

static bool path_has_positional(const q_path *p)
{
    for (size_t i = 0; i < p->n; i++)
        if (!strcmp(p->part[i], "$") || !strncmp(p->part[i], "$[", 2))
            return true;
    return false;
}

/* Path a is a component-wise prefix of path b (or equal to it). */
static bool path_is_prefix(const q_path *a, const q_path *b)
{
    if (a->n > b->n)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->part[i], b->part[i]))
            return false;
    return true;
}

static int elem_error(md_error *err, int code, const char *fmt, const bson_iter_t *e)
{
    q_buf b;
    q_buf_init(&b);
    q_render_elem(&b, e);
    md_error_set(err, MD_EINVAL, code, fmt, q_buf_cstr(&b));
    q_buf_cleanup(&b);
    return MD_EINVAL;
}

/* $currentDate's argument: true/false, {$type: "date"} or {$type: "timestamp"}. */
static int parse_current_date(q_unode *leaf, const bson_iter_t *e, md_error *err)
{
    bson_iter_t x;
    if (BSON_ITER_HOLDS_BOOL(e))
        return 0;
    if (!BSON_ITER_HOLDS_DOCUMENT(e))
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                            "%s is not valid type for $currentDate. Please use a boolean "
                            "('true') or a $type expression ({$type: 'timestamp/date'}).",
                            q_type_name(bson_iter_type(e)));
    bool found = false;
    bson_iter_recurse(e, &x);
    while (bson_iter_next(&x)) {
        if (strcmp(bson_iter_key(&x), "$type"))
            return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                                "Unrecognized $currentDate option: %s", bson_iter_key(&x));
        const char *s = BSON_ITER_HOLDS_UTF8(&x) ? bson_iter_utf8(&x, NULL) : "";
        if (!strcmp(s, "date") || !strcmp(s, "timestamp")) {
            found = true;
            leaf->timestamp = s[0] == 't';
        }
    }
    if (!found)
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                            "The '$type' string field is required to be 'date' or "
                            "'timestamp': {$currentDate: {field : {$type: 'date'}}}");
    return 0;
}

/* Argument checks of the leaf nodes (UpdateLeafNode::init). */
static int leaf_init(q_unode *leaf, const bson_iter_t *e, md_error *err)
{
    switch (leaf->op) {
    case QU_INC:
    case QU_MUL:
        if (!q_is_number(bson_iter_type(e)))
            return elem_error(err, MD_CODE_TYPE_MISMATCH,
                              leaf->op == QU_INC
                                  ? "Cannot increment with non-numeric argument: {%s}"
                                  : "Cannot multiply with non-numeric argument: {%s}",
                              e);
        return 0;
    case QU_CURRENT_DATE: return parse_current_date(leaf, e, err);
    case QU_PUSH:
    case QU_ADD_TO_SET:
    case QU_POP:
    case QU_PULL:
    case QU_PULL_ALL:
        return q_uarr_new((q_uarr_kind)(leaf->op - QU_PUSH), e, &leaf->arr, err);
    case QU_BIT: return q_bit_check(e, err);
    default: return 0;
    }
}

/* One field of a modifier: {$op: {path: arg}}. */
static int parse_field(q_update *u, q_uop op, const bson_iter_t *e, size_t rename,
                       md_error *err)
{
    q_path p;
    const char *dotted = bson_iter_key(e);
    int rc = check_path_af(u, dotted, &p, err);
    if (rc)
        return rc;
    q_unode *leaf = unode_new(u, NULL, NULL);
    leaf->leaf = true;
    leaf->op = op;
    leaf->arg = *e;
    leaf->rename = rename;
    rc = leaf_init(leaf, e, err);
    if (rc) {
        unode_free(leaf);
        q_path_cleanup(&p);
        return rc;
    }
    rc = tree_add(u, &p, dotted, leaf, err);
    q_path_cleanup(&p);
    return rc;
}

static int rename_error(md_error *err, const char *fmt, const bson_iter_t *e)
{
    return elem_error(err, MD_CODE_BAD_VALUE, fmt, e);
}

/* RenameNode::init's checks, once both paths parsed. */
static int rename_check(const q_path *from, const q_path *to, const bson_iter_t *e,
                        md_error *err)
{
    if (from->n == to->n && path_is_prefix(from, to))
        return rename_error(err, "The source and target field for $rename must differ: %s", e);
    if (path_is_prefix(from, to) || path_is_prefix(to, from))
        return rename_error(err,
                            "The source and target field for $rename must not be on the "
                            "same path: %s", e);
    if (path_has_positional(from))
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                            "The source field for $rename may not be dynamic: %s",
                            bson_iter_key(e));
    if (path_has_positional(to))
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                            "The destination field for $rename may not be dynamic: %s",
                            bson_iter_utf8(e, NULL));
    return 0;
}

/* $rename {from: "to"}: a placeholder leaf at `from`, the work at `to`. */
static int parse_rename(q_update *u, const bson_iter_t *e, md_error *err)
{
    int rc = parse_field(u, QU_RENAME_SRC, e, u->nrename, err);
    if (rc)
        return rc;
    if (!BSON_ITER_HOLDS_UTF8(e))
        return rename_error(err, "The 'to' field for $rename must be a string: %s", e);
    uint32_t len;
    const char *to = bson_iter_utf8(e, &len);
    if (strlen(to) != len)
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                            "The 'to' field for $rename cannot contain an embedded null byte");
    q_path top;
    if ((rc = check_path(to, &top, err)))
        return rc;
    if (u->nrename == u->caprename) {
        u->caprename = u->caprename ? 2 * u->caprename : 4;
        u->rename = bson_realloc(u->rename, u->caprename * sizeof *u->rename);
    }
    q_rename *r = &u->rename[u->nrename];
    q_path_init(&r->from, bson_iter_key(e), -1);
    r->from_dotted = bson_iter_key(e);
    u->nrename++;
    rc = rename_check(&r->from, &top, e, err);
    if (!rc) {
        q_unode *leaf = unode_new(u, NULL, NULL);
        leaf->leaf = true;
        leaf->op = QU_RENAME_DST;
        leaf->arg = *e;
        leaf->rename = u->nrename - 1;
        rc = tree_add(u, &top, to, leaf, err);
    }
    q_path_cleanup(&top);
    return rc;
}

/* ---- storage validation (storage_validation::storageValid) ---------------- */

static bool dbref_field(const char *k)
{
    return !strcmp(k, "$ref") || !strcmp(k, "$id") || !strcmp(k, "$db");
}

static int dollar_error(md_error *err, const char *name, const char *full)
{
    return md_error_set(err, MD_ERROR, MD_CODE_DOLLAR_PREFIXED_FIELD_NAME,
                        "The dollar ($) prefixed field '%s' in '%s' is not valid for storage.",
                        name, full);
}

/* Field names inside the document [data, len) whose full path starts with
 * `path` (a q_buf holding "a.b" or ""). */
static int storage_check_doc(const uint8_t *data, uint32_t len, bool is_array, q_buf *path,
                             md_error *err)
{
    bson_iter_t it;
    int rc = 0;
    if (!bson_iter_init_from_data(&it, data, len))
        return 0;
    size_t mark = path->len;
    while (!rc && bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        path->len = mark;
        if (mark)
            q_buf_putc(path, '.');
        q_buf_puts(path, k);
        if (!is_array && k[0] == '$' && !dbref_field(k))
            rc = dollar_error(err, k, q_buf_cstr(path));
        else if (q_is_container(bson_iter_type(&it))) {
            const uint8_t *d;
            uint32_t l;
            q_iter_sub(&it, &d, &l);
            rc = storage_check_doc(d, l, BSON_ITER_HOLDS_ARRAY(&it), path, err);
        }
    }
    path->len = mark;
    return rc;
}

/* A value about to be stored at dotted path `full`. */
static int storage_check_value(const bson_iter_t *v, const char *full, md_error *err)
{
    if (!q_is_container(bson_iter_type(v)))
        return 0;
    q_buf path;
    q_buf_init(&path);
    q_buf_puts(&path, full);
    const uint8_t *d;
    uint32_t l;
    q_iter_sub(v, &d, &l);
    int rc = storage_check_doc(d, l, BSON_ITER_HOLDS_ARRAY(v), &path, err);
    q_buf_cleanup(&path);
    return rc;
}

/* ---- q_update_new ----------------------------------------------------------- */

static const struct {
    const char *name;
    int op; /* q_uop; -1 $rename; -2 not yet implemented */
} q_modifiers[] = {
    {"$set", QU_SET},       {"$unset", QU_UNSET},   {"$inc", QU_INC},
    {"$mul", QU_MUL},       {"$min", QU_MIN},       {"$max", QU_MAX},
    {"$rename", -1},        {"$setOnInsert", QU_SET_ON_INSERT},
    {"$currentDate", QU_CURRENT_DATE},
    {"$push", QU_PUSH},     {"$pull", QU_PULL},     {"$pullAll", QU_PULL_ALL},
    {"$addToSet", QU_ADD_TO_SET},                   {"$pop", QU_POP},
    {"$bit", QU_BIT},
};

/* One top-level modifier {$op: {...}} (UpdateDriver's validateMod). */
static int parse_modifier(q_update *u, const bson_iter_t *mod, md_error *err)
{
    const char *name = bson_iter_key(mod);
    int op = -3;
    for (size_t i = 0; i < sizeof q_modifiers / sizeof q_modifiers[0]; i++)
        if (!strcmp(name, q_modifiers[i].name))
            op = q_modifiers[i].op;
    if (op == -3)
        return md_error_set(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE, "Unknown modifier: %s",
                            name);
    if (op == -2)
        return md_error_set(err, MD_EINVAL, MD_CODE_NOT_YET_IMPLEMENTED,
                            "%s is not supported yet", name);
    if (!BSON_ITER_HOLDS_DOCUMENT(mod)) {
        q_buf b;
        q_buf_init(&b);
        q_render_elem(&b, mod);
        md_error_set(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE,
                     "Modifiers operate on fields but we found type %s instead. For example: "
                     "{$mod: {<field>: ...}} not {%s}",
                     q_type_name(bson_iter_type(mod)), q_buf_cstr(&b));
        q_buf_cleanup(&b);
        return MD_EINVAL;
    }
    bson_iter_t f;
    bson_iter_recurse(mod, &f);
    if (!bson_iter_next(&f))
        return md_error_set(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE,
                            "'%s' is empty. You must specify a field like so: {%s: "
                            "{<field_name>: ...}}", name, name);
    do {
        int rc = op == -1 ? parse_rename(u, &f, err) : parse_field(u, (q_uop)op, &f, 0, err);
        if (rc)
            return rc;
    } while (bson_iter_next(&f));
    return 0;
}

int q_update_new(const bson_t *update, q_update **out, md_error *err)
{
    return q_update_new_af(update, NULL, out, err);
}

int q_update_new_af(const bson_t *update, const bson_t *filters, q_update **out,
                    md_error *err)
{
    assert(update && out);
    *out = NULL;
    q_arena a = {NULL};
    static uint64_t serials;
    q_update *u = q_arena_alloc_aligned(&a, sizeof *u, BSON_ALIGNOF(bson_t));
    u->arena = a;
    u->serial = __atomic_add_fetch(&serials, 1, __ATOMIC_RELAXED);
    uint8_t *copy = q_arena_alloc(&u->arena, update->len);
    memcpy(copy, bson_get_data(update), update->len);
    u->doc = q_arena_alloc_aligned(&u->arena, sizeof *u->doc, BSON_ALIGNOF(bson_t));
    bson_init_static(u->doc, copy, update->len);
    u->root = unode_new(u, "", "");
    bson_iter_t it;
    int rc = filters ? q_afilters_parse(filters, &u->af, &u->naf, err) : 0;
    if (rc)
        goto out_fail;
    if (!bson_iter_init(&it, u->doc)) {
        rc = md_error_set(err, MD_EINVAL, MD_CODE_INVALID_BSON, "invalid BSON in update");
        goto out_fail;
    }
    u->replacement = !bson_iter_next(&it) || bson_iter_key(&it)[0] != '$';
    if (u->replacement) {
        q_buf path;
        q_buf_init(&path);
        rc = storage_check_doc(bson_get_data(u->doc), u->doc->len, false, &path, err);
        q_buf_cleanup(&path);
        if (rc)
            rc = MD_EINVAL;
    } else {
        do
            rc = parse_modifier(u, &it, err);
        while (!rc && bson_iter_next(&it));
        if (!rc)
            rc = q_afilters_check_used(u->af, u->naf, u->doc, err);
    }
    if (rc)
        goto out_fail;
    *out = u;
    return 0;
out_fail:
    q_update_destroy(u);
    return rc;
}

bool q_update_is_replacement(const q_update *u)
{
    assert(u);
    return u->replacement;
}

void q_update_destroy(q_update *u)
{
    if (!u)
        return;
    unode_free(u->root);
    q_afilters_free(u->af, u->naf);
    for (size_t i = 0; i < u->nrename; i++)
        q_path_cleanup(&u->rename[i].from);
    bson_free(u->rename);
    q_arena a = u->arena; /* u lives in it */
    q_arena_release(&a);
}

/* ---- applying -----------------------------------------------------------------
 * The new document is written as raw BSON into a q_buf (q_bw_* in q_buf.c):
 * runs of fields no tree child touches are copied with one memcpy.
 */

typedef struct q_kref {
    const char *name;
    const q_unode *n;
    bool done;
} q_kref;

static int apply_obj(q_uctx *c, const q_unode *n, const uint8_t *data, uint32_t len,
                     q_buf *dst);
static int apply_arr(q_uctx *c, const q_unode *n, const bson_iter_t *arr, q_buf *dst);

/* "_id: 1" (or "no id") for messages. */
static const char *id_text(const q_uctx *c, q_buf *b)
{
    if (c->has_id)
        q_render_elem(b, &c->id);
    else
        q_buf_puts(b, "no id");
    return q_buf_cstr(b);
}

/* Could applying n (to a missing field) create anything? */
static bool may_create(const q_uctx *c, const q_unode *n)
{
    if (n->leaf) {
        switch (n->op) {
        case QU_UNSET:
        case QU_POP:
        case QU_PULL:
        case QU_PULL_ALL:
        case QU_RENAME_SRC: return false;
        case QU_SET_ON_INSERT: return c->inserting;
        case QU_RENAME_DST: return c->rs[n->rename].found;
        default: return true;
        }
    }
    for (size_t i = 0; i < n->nkid; i++)
        if (may_create(c, n->kid[i]))
            return true;
    for (size_t i = 0; i < n->naf; i++)
        if (may_create(c, n->af[i]))
            return true;
    return n->positional && may_create(c, n->positional);
}

/* The children of n in the order they apply, "$" standing for c->pos. */
static int kids_list(q_uctx *c, const q_unode *n, q_kref **out, size_t *count)
{
    size_t k = n->nkid;
    q_kref *v = bson_malloc((k + 1) * sizeof *v);
    for (size_t i = 0; i < k; i++)
        v[i] = (q_kref){n->kid[i]->name, n->kid[i], false};
    if (n->positional) {
        if (!c->pos || !*c->pos) {
            bson_free(v);
            return md_error_set(c->err, MD_ERROR, MD_CODE_BAD_VALUE,
                                "The positional operator did not find the match needed from "
                                "the query.");
        }
        if (kid_get(n, c->pos)) {
            bson_free(v);
            return md_error_set(c->err, MD_ERROR, MD_CODE_CONFLICTING_UPDATE_OPERATORS,
                                "Update created a conflict at '%s.%s'", n->full, c->pos);
        }
        size_t at = kid_lower(n, c->pos);
        memmove(v + at + 1, v + at, (k - at) * sizeof *v);
        v[at] = (q_kref){c->pos, n->positional, false};
        k++;
    }
    *out = v;
    *count = k;
    return 0;
}

/* Binary search: kids_list() keeps the list sorted by name.  The first
 * bytes are compared before strcmp: most fields have no child. */
static q_kref *kref_find(q_kref *v, size_t n, const char *name)
{
    if (n == 0 || (uint8_t)name[0] < (uint8_t)v[0].name[0] ||
        (uint8_t)name[0] > (uint8_t)v[n - 1].name[0])
        return NULL;
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(v[mid].name, name);
        if (c == 0)
            return &v[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* An array index as parseUnsignedBase10Integer reads one ("7", "07"). */
static bool kref_index(const char *name, uint32_t *idx)
{
    if (!q_all_digits(name) || strlen(name) > 9)
        return false;
    *idx = (uint32_t)strtoul(name, NULL, 10);
    return true;
}

/* The child for array element i: by its canonical name, else (rarely) by a
 * non-canonical numeric name such as "01". */
static q_kref *kref_find_index(q_kref *v, size_t n, uint32_t i, const char *key)
{
    q_kref *r = kref_find(v, n, key);
    uint32_t idx;
    for (size_t j = 0; !r && j < n; j++)
        if (!v[j].done && v[j].name[0] == '0' && kref_index(v[j].name, &idx) && idx == i)
            r = &v[j];
    return r;
}

static int check_id(q_uctx *c, const q_unode *n)
{
    if (!c->has_id || strncmp(n->full, "_id", 3) || (n->full[3] && n->full[3] != '.'))
        return 0;
    return md_error_set(c->err, MD_ERROR, MD_CODE_IMMUTABLE_FIELD,
                        "Performing an update on the path '%s' would modify the immutable "
                        "field '_id'", n->full);
}

static int not_viable(q_uctx *c, const char *field, const char *key, const bson_iter_t *e)
{
    q_buf b;
    q_buf_init(&b);
    q_render_value(&b, e);
    md_error_set(c->err, MD_ERROR, MD_CODE_PATH_NOT_VIABLE,
                 "Cannot create field '%s' in element {%s: %s}", field, key, q_buf_cstr(&b));
    q_buf_cleanup(&b);
    return MD_ERROR;
}

/* Checks before leaf n writes field `key`: _id, a $-prefixed name. */
static int check_write(q_uctx *c, const q_unode *n, const char *key)
{
    int rc = check_id(c, n);
    if (!rc && key[0] == '$')
        rc = dollar_error(c->err, key, n->full);
    return rc;
}

/* Store v as field `key` for leaf n. */
static int write_value(q_uctx *c, const q_unode *n, const char *key, const bson_iter_t *v,
                       q_buf *dst)
{
    int rc = check_write(c, n, key);
    if (!rc)
        rc = storage_check_value(v, n->full, c->err);
    if (!rc)
        q_bw_iter(dst, key, v);
    return rc;
}

static void write_now(q_buf *dst, const char *key, bool timestamp)
{
    static uint64_t last_ts; /* (seconds << 32 | increment), strictly increasing */
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    if (!timestamp) {
        q_bw_date(dst, key, (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000);
        return;
    }
    uint64_t now = (uint64_t)t.tv_sec << 32 | 1, prev = __atomic_load_n(&last_ts, __ATOMIC_RELAXED);
    uint64_t next;
    do
        next = prev >= now ? prev + 1 : now;
    while (!__atomic_compare_exchange_n(&last_ts, &prev, next, false, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED));
    q_bw_timestamp(dst, key, (uint32_t)(next >> 32), (uint32_t)next);
}

static int rename_dest_check(q_uctx *c, const q_unode *n)
{
    if (!c->array_name)
        return 0;
    q_buf b;
    q_buf_init(&b);
    md_error_set(c->err, MD_ERROR, MD_CODE_BAD_VALUE,
                 "The destination field cannot be an array element, '%s' in doc with %s has "
                 "an array field called '%s'", n->full, id_text(c, &b), c->array_name);
    q_buf_cleanup(&b);
    return MD_ERROR;
}

/* $inc / $mul on an existing element. */
static int leaf_arith(q_uctx *c, const q_unode *n, const bson_iter_t *e, const char *key,
                      q_buf *dst)
{
    const char *op = n->op == QU_INC ? "$inc" : "$mul";
    q_buf b;
    q_num a, x, r;
    int rc = 0;
    q_buf_init(&b);
    if (!q_is_number(bson_iter_type(e))) {
        rc = md_error_set(c->err, MD_ERROR, MD_CODE_TYPE_MISMATCH,
                          "Cannot apply %s to a value of non-numeric type. {%s} has the field "
                          "'%s' of non-numeric type %s", op, id_text(c, &b), key,
                          q_type_name(bson_iter_type(e)));
        goto out;
    }
    q_num_get(&n->arg, &a);
    q_num_get(e, &x);
    if (!q_num_arith(n->op == QU_MUL, &a, &x, &r)) {
        q_num_debug(&b, &x);
        char *cur = bson_strdup(q_buf_cstr(&b));
        q_buf_reset(&b);
        rc = md_error_set(c->err, MD_ERROR, MD_CODE_BAD_VALUE,
                          "Failed to apply %s operations to current value (%s) for document "
                          "{%s}", op, cur, id_text(c, &b));
        bson_free(cur);
        goto out;
    }
    if (q_num_identical(&r, &x))
        q_bw_iter(dst, key, e);
    else if (!(rc = check_id(c, n)))
        q_bw_num(dst, key, &r);
out:
    q_buf_cleanup(&b);
    return rc;
}

/* An array operator on element e (NULL: missing).  The array is rebuilt
 * into a scratch buffer so that an unchanged one is copied as it was. */
static int leaf_array(q_uctx *c, const q_unode *n, const bson_iter_t *e, const char *key,
                      q_buf *dst)
{
    q_buf b, tmp;
    q_buf_init(&b);
    q_buf_init(&tmp);
    int rc = 0;
    if (n->op == QU_PUSH || n->op == QU_ADD_TO_SET) {
        bson_iter_t v;
        bson_iter_init(&v, q_uarr_values(n->arr));
        while (!rc && bson_iter_next(&v))
            rc = storage_check_value(&v, n->full, c->err);
    }
    if (!rc)
        rc = q_uarr_apply(n->arr, e, key, n->full, id_text(c, &b), &tmp, c->err);
    if (!rc && e && (tmp.len != e->next_off - e->off ||
                     memcmp(tmp.data, e->raw + e->off, tmp.len))) {
        rc = check_id(c, n);
    }
    if (!rc)
        q_buf_append(dst, tmp.data, tmp.len);
    q_buf_cleanup(&tmp);
    q_buf_cleanup(&b);
    return rc;
}

/* $bit on an existing element: integers only (BitNode). */
static int leaf_bit(q_uctx *c, const q_unode *n, const bson_iter_t *e, const char *key,
                    q_buf *dst)
{
    q_num x, r;
    if (!BSON_ITER_HOLDS_INT32(e) && !BSON_ITER_HOLDS_INT64(e)) {
        q_buf b;
        q_buf_init(&b);
        md_error_set(c->err, MD_ERROR, MD_CODE_BAD_VALUE, "Cannot apply $bit to a value of "
                     "non-integral type.%s has the field %s of non-integer type %s",
                     id_text(c, &b), key, q_type_name(bson_iter_type(e)));
        q_buf_cleanup(&b);
        return MD_ERROR;
    }
    q_num_get(e, &x);
    q_bit_apply(&n->arg, &x, &r);
    if (q_num_identical(&r, &x)) {
        q_bw_iter(dst, key, e);
        return 0;
    }
    int rc = check_id(c, n);
    if (!rc)
        q_bw_num(dst, key, &r);
    return rc;
}

/* A leaf applied to an existing element e, written as `key` into dst. */
int q_uleaf_existing(q_uctx *c, const q_unode *n, const bson_iter_t *e, const char *key,
                         q_buf *dst, bool in_array)
{
    int rc, cmp;
    switch (n->op) {
    case QU_SET_ON_INSERT:
        if (!c->inserting)
            break;
        /* fall through */
    case QU_SET:
        if (q_value_binary_equal(e, &n->arg))
            break;
        return write_value(c, n, key, &n->arg, dst);
    case QU_UNSET:
        if ((rc = check_id(c, n)) == 0 && in_array)
            q_bw_null(dst, key);
        return rc;
    case QU_INC:
    case QU_MUL: return leaf_arith(c, n, e, key, dst);
    case QU_MIN:
    case QU_MAX:
        cmp = q_value_cmp(e, &n->arg);
        if (n->op == QU_MIN ? cmp <= 0 : cmp >= 0)
            break;
        return write_value(c, n, key, &n->arg, dst);
    case QU_CURRENT_DATE:
        if ((rc = check_id(c, n)) == 0)
            write_now(dst, key, n->timestamp);
        return rc;
    case QU_RENAME_SRC:
        if (!c->rs[n->rename].found)
            break;
        return check_id(c, n);
    case QU_RENAME_DST:
        if (!c->rs[n->rename].found)
            break;
        if ((rc = rename_dest_check(c, n)))
            return rc;
        return write_value(c, n, key, &c->rs[n->rename].val, dst);
    case QU_PUSH:
    case QU_ADD_TO_SET:
    case QU_POP:
    case QU_PULL:
    case QU_PULL_ALL: return leaf_array(c, n, e, key, dst);
    case QU_BIT: return leaf_bit(c, n, e, key, dst);
    }
    q_bw_iter(dst, key, e);
    return 0;
}

/* A leaf whose field does not exist: create it (or not). */
static int leaf_missing(q_uctx *c, const q_unode *n, const char *key, q_buf *dst)
{
    int rc;
    q_num a, zero = {.t = BSON_TYPE_INT32}, r;
    switch (n->op) {
    case QU_SET_ON_INSERT:
        if (!c->inserting)
            return 0;
        /* fall through */
    case QU_SET:
    case QU_MIN:
    case QU_MAX:
    case QU_INC: return write_value(c, n, key, &n->arg, dst);
    case QU_MUL:
        /* the multiplier's type, value zero (valueToSet *= 0) */
        if ((rc = check_write(c, n, key)))
            return rc;
        q_num_get(&n->arg, &a);
        q_num_arith(true, &a, &zero, &r);
        q_bw_num(dst, key, &r);
        return 0;
    case QU_CURRENT_DATE:
        if ((rc = check_write(c, n, key)) == 0)
            write_now(dst, key, n->timestamp);
        return rc;
    case QU_RENAME_DST:
        if (!c->rs[n->rename].found)
            return 0;
        if ((rc = rename_dest_check(c, n)))
            return rc;
        return write_value(c, n, key, &c->rs[n->rename].val, dst);
    case QU_PUSH:
    case QU_ADD_TO_SET:
        if ((rc = check_write(c, n, key)))
            return rc;
        return leaf_array(c, n, NULL, key, dst);
    case QU_BIT:
        if ((rc = check_write(c, n, key)))
            return rc;
        q_bit_apply(&n->arg, &zero, &r); /* from int32 0 */
        q_bw_num(dst, key, &r);
        return 0;
    default: return 0;
    }
}

/* A scalar where n wants to descend: PathNotViable if n would create. */
static int scalar_in_path(q_uctx *c, const q_unode *n, const bson_iter_t *e, const char *key)
{
    for (size_t i = 0; i < n->nkid; i++)
        if (may_create(c, n->kid[i]))
            return not_viable(c, n->kid[i]->name, key, e);
    if (n->positional && may_create(c, n->positional))
        return not_viable(c, c->pos && *c->pos ? c->pos : "$", key, e);
    return 0;
}

/* n has "$[..]" children but e is no array (UpdateArrayNode::apply). */
static int not_array_update(q_uctx *c, const bson_iter_t *e)
{
    q_buf b;
    q_buf_init(&b);
    q_render_elem(&b, e);
    md_error_set(c->err, MD_ERROR, MD_CODE_BAD_VALUE,
                 "Cannot apply array updates to non-array element %s", q_buf_cstr(&b));
    q_buf_cleanup(&b);
    return MD_ERROR;
}

/* Node n applied to the existing element e, written as `key` into dst. */
static int apply_existing(q_uctx *c, const q_unode *n, const bson_iter_t *e, const char *key,
                          q_buf *dst, bool in_array)
{
    const uint8_t *d;
    uint32_t l;
    size_t at;
    int rc;
    if (n->leaf)
        return q_uleaf_existing(c, n, e, key, dst, in_array);
    if (n->naf && !BSON_ITER_HOLDS_ARRAY(e))
        return not_array_update(c, e);
    switch (bson_iter_type(e)) {
    case BSON_TYPE_DOCUMENT:
        q_iter_sub(e, &d, &l);
        at = q_bw_begin(dst, BSON_TYPE_DOCUMENT, key);
        rc = apply_obj(c, n, d, l, dst);
        q_bw_end(dst, at);
        return rc;
    case BSON_TYPE_ARRAY:
        at = q_bw_begin(dst, BSON_TYPE_ARRAY, key);
        rc = apply_arr(c, n, e, dst);
        q_bw_end(dst, at);
        return rc;
    default:
        if ((rc = scalar_in_path(c, n, e, key)))
            return rc;
        q_bw_iter(dst, key, e);
        return 0;
    }
}

/* Node n applied where its field does not exist. */
static int apply_missing(q_uctx *c, const q_unode *n, const char *key, q_buf *dst)
{
    if (n->leaf)
        return leaf_missing(c, n, key, dst);
    if (n->naf)
        return md_error_set(c->err, MD_ERROR, MD_CODE_BAD_VALUE, "The path '%s' must exist in "
                            "the document in order to apply array updates.", n->full);
    if (!may_create(c, n))
        return 0;
    if (key[0] == '$')
        return dollar_error(c->err, key, n->full);
    size_t at = q_bw_begin(dst, BSON_TYPE_DOCUMENT, key);
    int rc = apply_obj(c, n, NULL, 0, dst);
    q_bw_end(dst, at);
    return rc;
}

/* Rebuild a document: its fields in order, then the fields n creates. */
static int apply_obj(q_uctx *c, const q_unode *n, const uint8_t *data, uint32_t len,
                     q_buf *dst)
{
    q_kref *k;
    size_t nk;
    bson_iter_t it;
    int rc = kids_list(c, n, &k, &nk);
    if (rc)
        return rc;
    if (data && bson_iter_init_from_data(&it, data, len)) {
        uint32_t run = 4; /* start of the fields not yet copied */
        size_t left = nk; /* once 0, the rest is copied in one piece */
        while (!rc && left && bson_iter_next(&it)) {
            q_kref *r = kref_find(k, nk, (const char *)it.raw + it.key);
            if (!r || r->done)
                continue;
            r->done = true;
            left--;
            q_buf_append(dst, data + run, it.off - run);
            rc = apply_existing(c, r->n, &it, bson_iter_key(&it), dst, false);
            run = it.next_off;
        }
        if (!rc)
            q_buf_append(dst, data + run, len - 1 - run);
    }
    for (size_t i = 0; !rc && i < nk; i++)
        if (!k[i].done)
            rc = apply_missing(c, k[i].n, k[i].name, dst);
    bson_free(k);
    return rc;
}

/* Append the element in slot (written under any key) as array index i. */
static void emit_slot(q_buf *dst, const q_buf *slot, uint32_t i)
{
    char key[16];
    snprintf(key, sizeof key, "%" PRIu32, i);
    if (!slot || slot->len == 0) {
        q_bw_null(dst, key);
        return;
    }
    size_t klen = strlen((const char *)slot->data + 1);
    q_bw_head(dst, (bson_type_t)slot->data[0], key);
    q_buf_append(dst, slot->data + 2 + klen, slot->len - 2 - klen);
}

/*
 * Children naming indexes past the end of an array, in tree order: each
 * creation pads with nulls up to its index; a later child that lands on a
 * padding null applies to that null (as it would in MongoDB's in-place
 * mutable document).  slot[j] holds index len + j (empty: a padding null).
 * More than Q_MAX_ARRAY_PADDING nulls at once is CannotBackfillArray.
 */
static int apply_beyond(q_uctx *c, q_kref *k, size_t nk, uint32_t len, q_buf *dst)
{
    q_buf *slot = NULL;
    bson_t nulldoc = BSON_INITIALIZER;
    uint32_t vlen = len, idx;
    bson_iter_t null_it;
    int rc = 0;
    bson_append_null(&nulldoc, "", 0);
    bson_iter_init_find(&null_it, &nulldoc, "");
    for (size_t i = 0; !rc && i < nk; i++) {
        if (k[i].done || !kref_index(k[i].name, &idx))
            continue;
        if (idx >= vlen && idx - vlen > Q_MAX_ARRAY_PADDING) {
            rc = md_error_set(c->err, MD_EINVAL, Q_CODE_CANNOT_BACKFILL_ARRAY,
                              "can't backfill more than %u elements", Q_MAX_ARRAY_PADDING);
            break;
        }
        q_buf tmp;
        q_buf_init(&tmp);
        if (idx < vlen)
            rc = apply_existing(c, k[i].n, &null_it, k[i].name, &tmp, true);
        else
            rc = apply_missing(c, k[i].n, k[i].name, &tmp);
        if (idx >= vlen && !rc && tmp.len) {
            slot = bson_realloc(slot, (idx - len + 1) * sizeof *slot);
            for (uint32_t j = vlen; j <= idx; j++)
                q_buf_init(&slot[j - len]);
            vlen = idx + 1;
        }
        if (idx < vlen) {
            q_buf_cleanup(&slot[idx - len]);
            slot[idx - len] = tmp;
        } else {
            q_buf_cleanup(&tmp);
        }
    }
    for (uint32_t j = len; j < vlen; j++) {
        if (!rc)
            emit_slot(dst, &slot[j - len], j);
        q_buf_cleanup(&slot[j - len]);
    }
    bson_free(slot);
    bson_destroy(&nulldoc);
    return rc;
}

/* Does "$[..]" child a apply to array element x? */
static bool af_applies(const q_uctx *c, const q_unode *a, const bson_iter_t *x)
{
    if (!strcmp(a->name, "$[]"))
        return true;
    size_t n = strlen(a->name) - 3;
    for (size_t i = 0; i < c->u->naf; i++) {
        const q_afilter *f = &c->u->af[i];
        if (strlen(f->name) != n || strncmp(f->name, a->name + 2, n))
            continue;
        bson_t w = BSON_INITIALIZER;
        bson_append_iter(&w, f->name, -1, x);
        bool m = q_matcher_matches(f->m, &w);
        bson_destroy(&w);
        return m;
    }
    return false;
}

/* The one child that applies to element x (key): *use (already the child
 * naming the index, or NULL) and every matching "$[..]" child; two that
 * apply are a conflict, as in MongoDB. */
static int af_pick(q_uctx *c, const q_unode *n, const bson_iter_t *x, const char *key,
                   const q_unode **use)
{
    for (size_t i = 0; i < n->naf; i++) {
        if (!af_applies(c, n->af[i], x))
            continue;
        if (*use)
            return md_error_set(c->err, MD_ERROR, MD_CODE_CONFLICTING_UPDATE_OPERATORS,
                                "Update created a conflict at '%s.%s'", n->full, key);
        *use = n->af[i];
    }
    return 0;
}

static int apply_arr(q_uctx *c, const q_unode *n, const bson_iter_t *arr, q_buf *dst)
{
    q_kref *k;
    size_t nk;
    bson_iter_t x;
    const uint8_t *data;
    uint32_t len, idx, i = 0, run = 4;
    char key[16];
    int rc = kids_list(c, n, &k, &nk);
    if (rc)
        return rc;
    const char *saved = c->array_name;
    c->array_name = bson_iter_key(arr);
    for (size_t j = 0; !rc && j < nk; j++)
        if (!kref_index(k[j].name, &idx) && may_create(c, k[j].n))
            rc = not_viable(c, k[j].name, bson_iter_key(arr), arr);
    q_iter_sub(arr, &data, &len);
    if (!rc && bson_iter_init_from_data(&x, data, len)) {
        for (; !rc && bson_iter_next(&x); i++) {
            snprintf(key, sizeof key, "%" PRIu32, i);
            q_kref *r = kref_find_index(k, nk, i, key);
            const q_unode *use = r && !r->done ? r->n : NULL;
            if (n->naf && (rc = af_pick(c, n, &x, key, &use)) != 0)
                break;
            if (!use)
                continue;
            if (r)
                r->done = true;
            q_buf_append(dst, data + run, x.off - run);
            rc = apply_existing(c, use, &x, key, dst, true);
            run = x.next_off;
        }
        if (!rc)
            q_buf_append(dst, data + run, len - 1 - run);
    }
    if (!rc)
        rc = apply_beyond(c, k, nk, i, dst);
    c->array_name = saved;
    bson_free(k);
    return rc;
}

/* Element `part` of array element `arr` (by position, as findNthChild). */
static bool array_nth(const bson_iter_t *arr, const char *part, bson_iter_t *out)
{
    if (!q_all_digits(part) || strlen(part) > 9)
        return false;
    unsigned long want = strtoul(part, NULL, 10), i = 0;
    if (!bson_iter_recurse(arr, out))
        return false;
    while (bson_iter_next(out))
        if (i++ == want)
            return true;
    return false;
}

/*
 * Find each $rename source in the old document (pathsupport::
 * findLongestPrefix): a path through a scalar is PathNotViable, a found
 * source below an array is BadValue, a missing one makes the rename a no-op.
 */
static int resolve_rename(q_uctx *c, const bson_t *doc, size_t r)
{
    const q_path *p = &c->u->rename[r].from;
    const char *arr = NULL, *dotted = c->u->rename[r].from_dotted;
    bson_iter_t cur, next;
    q_buf b;
    int rc = 0;
    q_buf_init(&b);
    for (size_t k = 0; k < p->n; k++) {
        bool found, viable = true;
        if (k == 0)
            found = q_doc_find(bson_get_data(doc), doc->len, p->part[0], &next);
        else if (BSON_ITER_HOLDS_DOCUMENT(&cur)) {
            const uint8_t *d;
            uint32_t l;
            q_iter_sub(&cur, &d, &l);
            found = q_doc_find(d, l, p->part[k], &next);
        } else if (BSON_ITER_HOLDS_ARRAY(&cur) && q_all_digits(p->part[k])) {
            found = array_nth(&cur, p->part[k], &next);
        } else {
            found = viable = false;
        }
        if (!viable) {
            q_render_elem(&b, &cur);
            rc = md_error_set(c->err, MD_ERROR, MD_CODE_PATH_NOT_VIABLE,
                              "cannot use the part (%s of %s) to traverse the element ({%s})",
                              p->part[k - 1], dotted, q_buf_cstr(&b));
            goto out;
        }
        if (!found)
            goto out;
        if (k + 1 < p->n && BSON_ITER_HOLDS_ARRAY(&next))
            arr = bson_iter_key(&next);
        cur = next;
    }
    if (arr) {
        rc = md_error_set(c->err, MD_ERROR, MD_CODE_BAD_VALUE,
                          "The source field cannot be an array element, '%s' in doc with %s has "
                          "an array field called '%s'", dotted, id_text(c, &b), arr);
        goto out;
    }
    c->rs[r].found = true;
    c->rs[r].val = cur;
out:
    q_buf_cleanup(&b);
    return rc;
}

/* ObjectReplaceNode: the replacement's fields, the old _id kept first. */
static int apply_replacement(q_uctx *c, q_buf *dst)
{
    const bson_t *r = c->u->doc;
    bson_iter_t it, rid;
    bool r_has_id = bson_iter_init_find(&rid, r, "_id");
    if (c->has_id && r_has_id && q_value_cmp(&rid, &c->id) != 0) {
        q_buf b;
        q_buf_init(&b);
        q_render_elem(&b, &rid);
        md_error_set(c->err, MD_ERROR, MD_CODE_IMMUTABLE_FIELD,
                     "After applying the update, the (immutable) field '_id' was found to "
                     "have been altered to %s", q_buf_cstr(&b));
        q_buf_cleanup(&b);
        return MD_ERROR;
    }
    if (c->has_id || r_has_id)
        q_bw_iter(dst, "_id", c->has_id ? &c->id : &rid);
    bson_iter_init(&it, r);
    while (bson_iter_next(&it))
        if (strcmp(bson_iter_key(&it), "_id"))
            q_bw_iter(dst, bson_iter_key(&it), &it);
    return 0;
}

void q_damages_init(q_damages *d)
{
    assert(d);
    d->v = d->fixed = NULL;
    d->n = d->cap = 0;
}

void q_damages_init_fixed(q_damages *d, eng_damage *space, size_t cap)
{
    d->v = d->fixed = space;
    d->n = 0;
    d->cap = cap;
}

void q_damages_reserve1(q_damages *d)
{
    if (d->n < d->cap)
        return;
    size_t cap = d->cap ? 2 * d->cap : 8;
    if (d->v && d->v == d->fixed) {
        d->v = bson_malloc(cap * sizeof *d->v);
        memcpy(d->v, d->fixed, d->n * sizeof *d->v);
    } else {
        d->v = bson_realloc(d->v, cap * sizeof *d->v);
    }
    d->cap = cap;
}

void q_damages_cleanup(q_damages *d)
{
    if (!d)
        return;
    if (d->v != d->fixed)
        bson_free(d->v);
    q_damages_init(d);
}

/* The byte ranges where a and b differ; ranges closer than Q_DAMAGE_GAP
 * equal bytes are joined.  Equal 64-byte blocks are skipped with memcmp. */
static void damages_compute(q_damages *d, const uint8_t *a, const uint8_t *b, uint32_t len)
{
    d->n = 0;
    for (uint32_t i = 0; i < len; i++) {
        if ((i & 63) == 0 && len - i >= 64 && !memcmp(a + i, b + i, 64)) {
            i += 63;
            continue;
        }
        if (a[i] == b[i])
            continue;
        eng_damage *last = d->n ? &d->v[d->n - 1] : NULL;
        if (last && i - (last->src_ofs + last->len) < Q_DAMAGE_GAP) {
            last->len = i + 1 - last->src_ofs;
            continue;
        }
        q_damages_reserve1(d);
        d->v[d->n++] = (eng_damage){i, i, 1};
    }
}

/* Build the new document's bytes into b (length-prefixed, terminated). */
static int apply_all(q_uctx *c, const bson_t *doc, q_buf *b)
{
    int rc = 0;
    q_bw_le(b, 0, 4);
    if (c->u->replacement) {
        rc = apply_replacement(c, b);
    } else {
        c->rs = bson_aligned_alloc0(BSON_ALIGNOF(q_rstate), (c->u->nrename + 1) * sizeof *c->rs);
        for (size_t i = 0; !rc && i < c->u->nrename; i++)
            rc = resolve_rename(c, doc, i);
        if (!rc)
            rc = apply_obj(c, c->u->root, bson_get_data(doc), doc->len, b);
        bson_free(c->rs);
    }
    q_buf_putc(b, 0);
    if (!rc && b->len > INT32_MAX)
        rc = md_error_set(c->err, MD_ETOOBIG, MD_CODE_BSON_OBJECT_TOO_LARGE,
                          "document too large after the update");
    for (int i = 0; i < 4; i++)
        b->data[i] = (uint8_t)(b->len >> (8 * i));
    return rc;
}

int q_update_apply_pos(const q_update *u, const bson_t *doc, const char *pos, bool inserting,
                       bson_t *out, bool *changed, q_damages *dmg, md_error *err)
{
    assert(u && doc && out && changed);
    *changed = false;
    if (dmg)
        dmg->n = 0;
    q_uctx c = {.u = u, .inserting = inserting, .pos = pos, .err = err};
    c.has_id = bson_iter_init_find(&c.id, doc, "_id");
    q_buf b;
    q_buf_init(&b);
    q_buf_reserve(&b, doc->len + 64);
    int rc = apply_all(&c, doc, &b);
    bson_t view;
    if (rc || !bson_init_static(&view, b.data, b.len)) {
        bson_init(out);
        q_buf_cleanup(&b);
        return rc ? rc : md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR,
                                      "update produced an invalid document");
    }
    const uint8_t *old = bson_get_data(doc);
    bool same_len = b.len == doc->len;
    if (dmg && same_len) {
        damages_compute(dmg, old, b.data, doc->len);
        *changed = dmg->n > 0;
    } else {
        *changed = !same_len || memcmp(old, b.data, doc->len) != 0;
    }
    bson_copy_to(&view, out);
    q_buf_cleanup(&b);
    return 0;
}

int q_update_apply(const q_update *u, const bson_t *doc, bool inserting, bson_t *out,
                   bool *changed, q_damages *dmg, md_error *err)
{
    return q_update_apply_pos(u, doc, NULL, inserting, out, changed, dmg, err);
}
