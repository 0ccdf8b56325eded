/*
 * q_cmd_distinct.c -- the distinct command, as MongoDB 3.6:
 *
 *   {distinct: "c", key: "a.b", query: {...}}  ->  {values: [...], ok: 1}
 *
 * Values are gathered along the dotted key with arrays unwound as
 * dotted_fields::extractAllElementsAlongPath does (arrays of documents on
 * the way, the elements of an array at the end of the path; a nested array
 * element stays one value), then deduplicated with MongoDB's comparison
 * (1, 1.0 and NumberLong(1) are one value) and returned in BSON order, as
 * 3.6's BSONElementSet yields them.  A missing collection has no values.
 */
#include <stdlib.h>
#include <string.h>

#include "q_int.h"
#include "q_path.h"

/* bson_iter_t is 128-byte aligned but 80 bytes long: array elements need a
 * struct around it (padded to its alignment). */
typedef struct dval {
    bson_iter_t it;
} dval;

typedef struct dvals {
    bson_t **own;     /* copies of every matched document (values point in) */
    size_t nown, capown;
    dval *v;
    size_t n, cap;
} dvals;

static void dvals_add(dvals *d, const bson_iter_t *e)
{
    if (d->n == d->cap) { /* bson_iter_t asks for 128-byte alignment */
        d->cap = d->cap ? 2 * d->cap : 64;
        dval *v = bson_aligned_alloc(BSON_ALIGNOF(dval), d->cap * sizeof *v);
        if (d->n)
            memcpy(v, d->v, d->n * sizeof *v);
        bson_free(d->v);
        d->v = v;
    }
    d->v[d->n++].it = *e;
}

/* extractAllElementsAlongPath over parts [i..) of p inside [data, len). */
static void extract(dvals *d, const uint8_t *data, uint32_t len, const q_path *p, size_t i)
{
    bson_iter_t e, x;
    const uint8_t *sd;
    uint32_t sl;
    if (!q_doc_find(data, len, p->part[i], &e))
        return;
    if (i + 1 == p->n) {
        if (BSON_ITER_HOLDS_ARRAY(&e) && bson_iter_recurse(&e, &x)) {
            while (bson_iter_next(&x))
                dvals_add(d, &x);
        } else {
            dvals_add(d, &e);
        }
        return;
    }
    if (BSON_ITER_HOLDS_DOCUMENT(&e) ||
        (BSON_ITER_HOLDS_ARRAY(&e) && q_all_digits(p->part[i + 1]))) {
        q_iter_sub(&e, &sd, &sl);
        extract(d, sd, sl, p, i + 1);
    } else if (BSON_ITER_HOLDS_ARRAY(&e) && bson_iter_recurse(&e, &x)) {
        while (bson_iter_next(&x)) {
            if (!q_is_container(bson_iter_type(&x)))
                continue;
            q_iter_sub(&x, &sd, &sl);
            extract(d, sd, sl, p, i + 1);
        }
    }
}

typedef struct dsort {
    bson_iter_t it;
    size_t i;
} dsort;

static int dsort_cmp(const void *a, const void *b)
{
    const dsort *x = a, *y = b;
    int c = q_value_cmp(&x->it, &y->it);
    return c ? c : (x->i < y->i ? -1 : x->i > y->i);
}

static void reply_values(bson_t *reply, const dvals *d)
{
    dsort *s = bson_aligned_alloc(BSON_ALIGNOF(dsort), (d->n + 1) * sizeof *s);
    bson_t arr;
    char key[24];
    size_t k = 0;
    for (size_t i = 0; i < d->n; i++)
        s[i] = (dsort){d->v[i].it, i};
    q_sort(s, d->n, sizeof *s, dsort_cmp);
    bson_append_array_begin(reply, "values", -1, &arr);
    for (size_t i = 0; i < d->n; i++) {
        if (i && q_value_cmp(&s[i - 1].it, &s[i].it) == 0)
            continue;
        snprintf(key, sizeof key, "%zu", k++);
        bson_append_iter(&arr, key, -1, &s[i].it);
    }
    bson_append_array_end(reply, &arr);
    bson_free(s);
}

static int distinct_parse(const bson_t *cmd, const char **key, bson_t *query, md_error *err)
{
    bson_iter_t it;
    *key = NULL;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (!strcmp(k, "key")) {
            if (!BSON_ITER_HOLDS_UTF8(&it))
                return q_err_field_type(err, "distinct", "key", bson_iter_type(&it), "string");
            *key = bson_iter_utf8(&it, NULL);
        } else if (!strcmp(k, "query")) {
            if (BSON_ITER_HOLDS_NULL(&it))
                continue;
            if (!BSON_ITER_HOLDS_DOCUMENT(&it))
                return q_err_field_type(err, "distinct", "query", bson_iter_type(&it), "object");
            const uint8_t *d;
            uint32_t l;
            bson_iter_document(&it, &l, &d);
            bson_t q;
            bson_init_static(&q, d, l);
            bson_concat(query, &q);
        } else if (!strcmp(k, "collation")) {
            return q_err(err, MD_ENOTSUP, MD_CODE_COMMAND_NOT_SUPPORTED,
                         "distinct option 'collation' is not supported yet");
        } else if (strcmp(k, "hint") && strcmp(k, "readConcern") && strcmp(k, "comment") &&
                   !q_is_generic_arg(k)) {
            return q_err_field_unknown(err, "distinct", k);
        }
    }
    if (!*key)
        return q_err_field_missing(err, "distinct", "key");
    return 0;
}

/* Gather the key's values of every matching document of c into d. */
static int distinct_scan(md_db *db, q_coll *c, const bson_t *query, const q_matcher *m,
                         const q_path *p, dvals *d, md_error *err)
{
    q_scan s;
    eng_rid rid;
    bson_t doc;
    int rc = q_scan_open(&s, db, c, query, m, err);
    if (rc)
        return rc;
    while (q_scan_next(&s, &rid, &doc) == 0) {
        if (d->nown == d->capown) {
            d->capown = d->capown ? 2 * d->capown : 64;
            d->own = bson_realloc(d->own, d->capown * sizeof *d->own);
        }
        /* values point into the copies, which never move */
        bson_t *copy = d->own[d->nown++] = bson_copy(&doc);
        extract(d, bson_get_data(copy), copy->len, p, 0);
    }
    rc = q_scan_error(&s, err);
    q_scan_close(&s);
    return rc;
}

int q_cmd_distinct(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err)
{
    const char *name, *key;
    char ns[ENG_IDENT_MAX];
    bson_t query = BSON_INITIALIZER;
    q_matcher *m = NULL;
    dvals d = {0};
    q_path p = {0};
    int rc = q_cmd_coll_name(db, cmd, false, &name, ns, err);
    if (!rc)
        rc = distinct_parse(cmd, &key, &query, err);
    if (!rc)
        rc = q_matcher_new(&query, &m, err);
    if (!rc && !q_path_init(&p, key, -1))
        rc = q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE, "distinct key '%s' is not a valid path",
                   key);
    q_coll *c = rc ? NULL : q_coll_find(db, name);
    if (c) {
        q_coll_lock(db, c, false);
        rc = distinct_scan(db, c, &query, m, &p, &d, err);
        if (!rc)
            reply_values(reply, &d);
        q_coll_unlock(db, c);
    } else if (!rc) {
        reply_values(reply, &d);
    }
    for (size_t i = 0; i < d.nown; i++)
        bson_destroy(d.own[i]);
    bson_free(d.own);
    bson_free(d.v);
    if (p.n)
        q_path_cleanup(&p);
    q_matcher_destroy(m);
    bson_destroy(&query);
    return rc;
}
