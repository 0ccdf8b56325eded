/*
 * q_cmd_mapreduce.c -- the mapReduce command, MongoDB 4.0's shape and
 * semantics, on the JavaScript engine behind js/js.h:
 *
 *   {mapReduce: "events", map: <code>, reduce: <code>, out: <out>,
 *    query, sort, limit, finalize, scope, verbose, jsMode, maxTimeMS}
 *   out: "name" (= {replace: "name"}) | {inline: 1} | {replace | merge |
 *        reduce: "name", db?, sharded?, nonAtomic?}
 *
 *   -> {results: [{_id, value}...] | result: "name" | {db, collection},
 *       timeMillis, counts: {input, emit, reduce, output}, timing?, ok: 1}
 *
 * The phases, as MongoDB runs them: every input document (query, sort,
 * limit) is `this` of one map call; emit(key, value) collects values per
 * key (keys compare as BSON values: 1, 1.0 and NumberLong(1) are one key);
 * when the collected values pass MR_INMEM bytes, every key holding several
 * is reduced in memory, so reduce meets its own output again later
 * (re-reduce); at the end each key with more than one value is reduced
 * once more (a key with a single value is never reduced), finalize runs,
 * and the {_id: key, value} documents go out ordered by key.  out reduce
 * combines a key already in the output collection as MongoDB does:
 * finalize(reduce(key, [new, old])) with the new value already finalized.
 *
 * Deviations (README): emits are kept in memory (MongoDB spills to a
 * temporary collection past 100 MB); the output collection is written in
 * place, document by document (MongoDB builds a temporary collection and
 * renames it), so replace is not atomic and a failure leaves a partial
 * output; `db` must name this database (one md_db is one database); a
 * collection output holds the exclusive database lock for the whole
 * command; counts.reduce counts every reduce call (in memory, final, and
 * against the output collection); `timing` is in milliseconds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "js.h"
#include "q_int.h"

#define MR_INMEM (512 * 1024) /* emitted bytes that trigger an in-memory reduce */

enum { MR_INLINE, MR_REPLACE, MR_MERGE, MR_REDUCE };

typedef struct mr_cmd {
    const char *name; /* the input collection */
    bson_iter_t map, reduce, finalize;
    bool has_finalize;
    bson_t query, sort, scope;
    bool has_sort, has_scope;
    int64_t limit, max_time_ms;
    bool verbose, durable;
    int out;
    const char *out_name, *out_db;
} mr_cmd;

/* One key: its encoding (q_key order), and vals = {_id: key, "0": v0, ...}. */
typedef struct mr_ent {
    q_buf enc;
    bson_t *vals;
    uint32_t nvals;
} mr_ent;

typedef struct mr_state {
    md_db *db;
    const mr_cmd *cmd;
    js_ctx *js;
    int fmap, fred, ffin;
    mr_ent **ents;
    size_t n, cap;
    size_t *tab, tcap; /* open addressing: index + 1 into ents */
    size_t mem;
    bool want_reduce;
    int64_t input, emits, reduces, output;
    int64_t map_ms, reduce_ms;
} mr_state;

/* ---- parsing --------------------------------------------------------------------------- */

static bool is_code(const bson_iter_t *it)
{
    return BSON_ITER_HOLDS_UTF8(it) || BSON_ITER_HOLDS_CODE(it) || BSON_ITER_HOLDS_CODEWSCOPE(it);
}

static void iter_doc(const bson_iter_t *it, bson_t *out)
{
    uint32_t len;
    const uint8_t *p;
    if (BSON_ITER_HOLDS_ARRAY(it))
        bson_iter_array(it, &len, &p);
    else
        bson_iter_document(it, &len, &p);
    bson_init_static(out, p, len);
}

static int parse_out(mr_cmd *p, const bson_iter_t *it, md_error *err)
{
    if (BSON_ITER_HOLDS_UTF8(it)) {
        p->out = MR_REPLACE;
        p->out_name = bson_iter_utf8(it, NULL);
        return 0;
    }
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return q_err(err, MD_EINVAL, 13606, "'out' has to be a string or an object");
    bson_t o;
    bson_iter_t f;
    bool non_atomic = false;
    iter_doc(it, &o);
    bson_iter_init(&f, &o);
    if (!bson_iter_next(&f))
        return q_err(err, MD_EINVAL, 13522, "please specify one of "
                     "[replace|merge|reduce|inline]");
    const char *mode = bson_iter_key(&f);
    if (!strcmp(mode, "inline")) {
        p->out = MR_INLINE;
    } else {
        if (!strcmp(mode, "replace"))
            p->out = MR_REPLACE;
        else if (!strcmp(mode, "merge"))
            p->out = MR_MERGE;
        else if (!strcmp(mode, "reduce"))
            p->out = MR_REDUCE;
        else
            return q_err(err, MD_EINVAL, 13522, "please specify one of "
                         "[replace|merge|reduce|inline]");
        if (!BSON_ITER_HOLDS_UTF8(&f))
            return q_err(err, MD_EINVAL, 13606, "'out' has to be a string or an object");
        p->out_name = bson_iter_utf8(&f, NULL);
    }
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        if (!strcmp(k, "db")) {
            if (!BSON_ITER_HOLDS_UTF8(&f))
                return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE, "'out.db' must be a string");
            p->out_db = bson_iter_utf8(&f, NULL);
        } else if (!strcmp(k, "nonAtomic")) {
            non_atomic = bson_iter_as_bool(&f);
        } else if (strcmp(k, "sharded")) {
            return q_err(err, MD_EINVAL, 13522, "please specify one of "
                         "[replace|merge|reduce|inline]");
        }
    }
    if (non_atomic && p->out != MR_MERGE && p->out != MR_REDUCE)
        return q_err(err, MD_EINVAL, 15895,
                     "nonAtomic option cannot be used with this output type");
    return 0;
}

static int parse_doc_arg(const bson_iter_t *it, const char *field, bson_t *out, bool *has,
                         md_error *err)
{
    if (BSON_ITER_HOLDS_NULL(it) || BSON_ITER_HOLDS_UNDEFINED(it))
        return 0;
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return q_err_field_type(err, "mapReduce", field, bson_iter_type(it), "object");
    iter_doc(it, out);
    if (has)
        *has = true;
    return 0;
}

static int mr_parse(md_db *db, const bson_t *cmd, mr_cmd *p, md_error *err)
{
    bson_iter_t it;
    bool has_map = false, has_reduce = false, has_out = false;
    char ns[ENG_IDENT_MAX];
    int rc = q_cmd_coll_name(db, cmd, false, &p->name, ns, err);
    if (rc)
        return rc;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (!strcmp(k, "map") || !strcmp(k, "reduce") || !strcmp(k, "finalize")) {
            if (!strcmp(k, "finalize") && (BSON_ITER_HOLDS_NULL(&it) ||
                                           BSON_ITER_HOLDS_UNDEFINED(&it)))
                continue;
            if (!is_code(&it))
                return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                             "'%s' must be a JavaScript function (a string or code), not %s", k,
                             q_type_name(bson_iter_type(&it)));
            if (k[0] == 'm') {
                p->map = it;
                has_map = true;
            } else if (k[0] == 'r') {
                p->reduce = it;
                has_reduce = true;
            } else {
                p->finalize = it;
                p->has_finalize = true;
            }
        } else if (!strcmp(k, "out")) {
            rc = parse_out(p, &it, err);
            has_out = true;
        } else if (!strcmp(k, "query")) {
            rc = parse_doc_arg(&it, "query", &p->query, NULL, err);
        } else if (!strcmp(k, "sort")) {
            rc = parse_doc_arg(&it, "sort", &p->sort, &p->has_sort, err);
            if (!rc && p->has_sort)
                rc = q_sort_check(&p->sort, err);
        } else if (!strcmp(k, "scope")) {
            rc = parse_doc_arg(&it, "scope", &p->scope, &p->has_scope, err);
        } else if (!strcmp(k, "limit")) {
            if (!BSON_ITER_HOLDS_NUMBER(&it))
                return q_err_field_type(err, "mapReduce", "limit", bson_iter_type(&it),
                                        "number");
            p->limit = bson_iter_as_int64(&it);
        } else if (!strcmp(k, "maxTimeMS")) {
            if (!BSON_ITER_HOLDS_NUMBER(&it) || bson_iter_as_int64(&it) < 0)
                return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                             "maxTimeMS must be a non-negative number");
            p->max_time_ms = bson_iter_as_int64(&it);
        } else if (!strcmp(k, "verbose")) {
            p->verbose = bson_iter_as_bool(&it);
        } else if (!strcmp(k, "collation")) {
            return q_err(err, MD_ENOTSUP, MD_CODE_COMMAND_NOT_SUPPORTED,
                         "mapReduce option 'collation' is not supported yet");
        }
        /* jsMode, bypassDocumentValidation, readConcern and unknown fields
         * are accepted and ignored, as MongoDB 4.0's mapReduce does */
        if (rc)
            return rc;
    }
    if (!has_map || !has_reduce)
        return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE, "'%s' is required",
                     has_map ? "reduce" : "map");
    if (!has_out)
        return q_err(err, MD_EINVAL, 13606, "'out' has to be a string or an object");
    if (p->out != MR_INLINE && p->out_db && strcmp(p->out_db, db->name))
        return q_err(err, MD_ENOTSUP, MD_CODE_COMMAND_NOT_SUPPORTED,
                     "mapReduce output to another database ('%s') is not supported: this "
                     "database is '%s'", p->out_db, db->name);
    return q_write_concern(cmd, &p->durable, err);
}

bool q_mr_writes(const bson_t *cmd)
{
    bson_iter_t it, f;
    if (!bson_iter_init_find(&it, cmd, "out") || !BSON_ITER_HOLDS_DOCUMENT(&it) ||
        !bson_iter_recurse(&it, &f) || !bson_iter_next(&f))
        return true;
    return strcmp(bson_iter_key(&f), "inline") != 0;
}

/* ---- the emit store ----------------------------------------------------------------------- */

static uint64_t hash_bytes(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

static void tab_insert(mr_state *st, size_t idx)
{
    mr_ent *e = st->ents[idx];
    size_t m = st->tcap - 1, i = hash_bytes(e->enc.data, e->enc.len) & m;
    while (st->tab[i])
        i = (i + 1) & m;
    st->tab[i] = idx + 1;
}

static mr_ent *ent_get(mr_state *st, const q_buf *enc, const bson_iter_t *key)
{
    if (st->tcap) {
        size_t m = st->tcap - 1, i = hash_bytes(enc->data, enc->len) & m;
        for (; st->tab[i]; i = (i + 1) & m) {
            mr_ent *e = st->ents[st->tab[i] - 1];
            if (e->enc.len == enc->len && !memcmp(e->enc.data, enc->data, enc->len))
                return e;
        }
    }
    if (st->n == st->cap) {
        st->cap = st->cap ? 2 * st->cap : 64;
        st->ents = realloc(st->ents, st->cap * sizeof *st->ents);
        if (!st->ents)
            abort();
    }
    if ((st->n + 1) * 2 > st->tcap) {
        free(st->tab);
        st->tcap = st->tcap ? 2 * st->tcap : 128;
        st->tab = calloc(st->tcap, sizeof *st->tab);
        if (!st->tab)
            abort();
        for (size_t i = 0; i < st->n; i++)
            tab_insert(st, i);
    }
    mr_ent *e = calloc(1, sizeof *e);
    if (!e)
        abort();
    q_buf_init(&e->enc);
    q_buf_append(&e->enc, enc->data, enc->len);
    e->vals = bson_new();
    bson_append_iter(e->vals, "_id", 3, key);
    st->ents[st->n] = e;
    tab_insert(st, st->n++);
    return e;
}

static void ent_add(mr_ent *e, const bson_iter_t *v)
{
    char k[16];
    snprintf(k, sizeof k, "%u", e->nvals++);
    bson_append_iter(e->vals, k, -1, v);
}

static int mr_emit(void *arg, const bson_t *kv, md_error *err)
{
    mr_state *st = arg;
    bson_iter_t k, v;
    if (!bson_iter_init_find(&k, kv, "k") || !bson_iter_init_find(&v, kv, "v"))
        return q_err(err, MD_ERROR, JS_CODE_INTERPRETER_FAILURE, "emit: bad arguments");
    if (kv->len > Q_BSON_MAX)
        return q_err(err, MD_EINVAL, MD_CODE_BSON_OBJECT_TOO_LARGE,
                     "emit size is too large: %u bytes", kv->len);
    q_buf enc;
    uint8_t space[128];
    q_buf_init_fixed(&enc, space, sizeof space);
    q_key_append_value(&enc, &k, false);
    mr_ent *e = ent_get(st, &enc, &k);
    q_buf_cleanup(&enc);
    ent_add(e, &v);
    st->emits++;
    st->mem += kv->len;
    if (st->mem > MR_INMEM)
        st->want_reduce = true;
    return 0;
}

static void ent_free(mr_ent *e)
{
    q_buf_cleanup(&e->enc);
    bson_destroy(e->vals);
    free(e);
}

/* The key of e as a bson_iter_t. */
static void ent_key(const mr_ent *e, bson_iter_t *k)
{
    bson_iter_init_find(k, e->vals, "_id");
}

/* Call reduce(key, values) with values the elements of vals after _id (and
 * `extra`, when not NULL, before them); the result into r under "v". */
static int call_reduce(mr_state *st, const bson_t *vals, const bson_iter_t *first, bson_t *r,
                       md_error *err)
{
    bson_t args = BSON_INITIALIZER, arr;
    bson_iter_t it, k;
    bson_iter_init_find(&k, vals, "_id");
    bson_append_iter(&args, "0", 1, &k);
    bson_append_array_begin(&args, "1", 1, &arr);
    int i = 0;
    char key[16];
    if (first) {
        bson_append_iter(&arr, "0", 1, first);
        i++;
    }
    bson_iter_init(&it, vals);
    while (bson_iter_next(&it)) {
        if (!strcmp(bson_iter_key(&it), "_id"))
            continue;
        snprintf(key, sizeof key, "%d", i++);
        bson_append_iter(&arr, key, -1, &it);
    }
    bson_append_array_end(&args, &arr);
    int64_t t0 = q_now_ms();
    int rc = js_func_call(st->js, st->fred, NULL, &args, r, "v", err);
    st->reduce_ms += q_now_ms() - t0;
    st->reduces++;
    bson_destroy(&args);
    return rc;
}

/* Reduce e's values to one (re-reduce keeps the key's own output). */
static int ent_reduce(mr_state *st, mr_ent *e, md_error *err)
{
    bson_t r = BSON_INITIALIZER;
    bson_iter_t v, k;
    int rc = call_reduce(st, e->vals, NULL, &r, err);
    if (!rc) {
        bson_t *nv = bson_new();
        ent_key(e, &k);
        bson_append_iter(nv, "_id", 3, &k);
        bson_iter_init_find(&v, &r, "v");
        bson_append_iter(nv, "0", 1, &v);
        bson_destroy(e->vals);
        e->vals = nv;
        e->nvals = 1;
    }
    bson_destroy(&r);
    return rc;
}

static int reduce_in_memory(mr_state *st, md_error *err)
{
    st->mem = 0;
    for (size_t i = 0; i < st->n; i++) {
        mr_ent *e = st->ents[i];
        if (e->nvals > 1) {
            int rc = ent_reduce(st, e, err);
            if (rc)
                return rc;
        }
        st->mem += e->vals->len;
    }
    st->want_reduce = false;
    return 0;
}

/* ---- map ---------------------------------------------------------------------------------------- */

static int map_doc(mr_state *st, const bson_t *doc, md_error *err)
{
    int64_t t0 = q_now_ms();
    int rc = js_func_call(st->js, st->fmap, doc, NULL, NULL, NULL, err);
    st->map_ms += q_now_ms() - t0;
    st->input++;
    if (!rc && st->want_reduce)
        rc = reduce_in_memory(st, err);
    if (!rc && js_ctx_expired(st->js))
        rc = js_err_time_limit(err);
    return rc;
}

/* Run map over the input: query, then sort and limit. */
static int map_phase(mr_state *st, q_coll *c, md_error *err)
{
    const mr_cmd *p = st->cmd;
    q_matcher *m = NULL;
    q_scan s;
    eng_rid rid;
    bson_t doc;
    bson_t **docs = NULL;
    size_t nd = 0, capd = 0;
    int rc = q_matcher_new(&p->query, &m, err);
    if (rc)
        return rc;
    q_coll_lock(st->db, c, false);
    rc = q_scan_open(&s, st->db, c, &p->query, m, err);
    if (!rc) {
        while (q_scan_next(&s, &rid, &doc) == 0) {
            if (p->has_sort) {
                if (nd == capd) {
                    capd = capd ? 2 * capd : 64;
                    docs = realloc(docs, capd * sizeof *docs);
                    if (!docs)
                        abort();
                }
                docs[nd++] = bson_copy(&doc);
                continue;
            }
            if (p->limit > 0 && st->input >= p->limit)
                break;
            /* the view dies at the next write or yield: map a copy */
            bson_t *copy = bson_copy(&doc);
            rc = map_doc(st, copy, err);
            bson_destroy(copy);
            if (rc)
                break;
        }
        if (!rc)
            rc = q_scan_error(&s, err);
        q_scan_close(&s);
    }
    q_coll_unlock(st->db, c);
    if (!rc && p->has_sort) {
        q_sort_docs(docs, nd, &p->sort);
        for (size_t i = 0; !rc && i < nd && (p->limit <= 0 || (int64_t)i < p->limit); i++)
            rc = map_doc(st, docs[i], err);
    }
    for (size_t i = 0; i < nd; i++)
        bson_destroy(docs[i]);
    free(docs);
    q_matcher_destroy(m);
    return rc;
}

/* ---- reduce, finalize, output ------------------------------------------------------------------- */

static int ent_cmp(const void *a, const void *b)
{
    const mr_ent *x = *(mr_ent *const *)a, *y = *(mr_ent *const *)b;
    size_t n = x->enc.len < y->enc.len ? x->enc.len : y->enc.len;
    int c = memcmp(x->enc.data, y->enc.data, n);
    return c ? c : (x->enc.len > y->enc.len) - (x->enc.len < y->enc.len);
}

/* finalize(key, value at v) into out under "value" (or v copied). */
static int finalize_value(mr_state *st, const bson_iter_t *k, const bson_iter_t *v, bson_t *out,
                          md_error *err)
{
    if (st->ffin < 0) {
        bson_append_iter(out, "value", 5, v);
        return 0;
    }
    bson_t args = BSON_INITIALIZER;
    bson_append_iter(&args, "0", 1, k);
    bson_append_iter(&args, "1", 1, v);
    int64_t t0 = q_now_ms();
    int rc = js_func_call(st->js, st->ffin, NULL, &args, out, "value", err);
    st->reduce_ms += q_now_ms() - t0;
    bson_destroy(&args);
    return rc;
}

/* The final {_id, value} of e into out (initialized by the caller). */
static int ent_final(mr_state *st, mr_ent *e, bson_t *out, md_error *err)
{
    bson_iter_t k, v;
    int rc = 0;
    if (e->nvals > 1)
        rc = ent_reduce(st, e, err);
    if (rc)
        return rc;
    ent_key(e, &k);
    bson_append_iter(out, "_id", 3, &k);
    bson_iter_init_find(&v, e->vals, "0");
    return finalize_value(st, &k, &v, out, err);
}

/* out reduce: the old output document of key k, if any, into old. */
static int find_old(mr_state *st, const char *name, const bson_iter_t *k, bson_t *old,
                    bool *found, md_error *err)
{
    q_coll *c = q_coll_find(st->db, name);
    bson_t q = BSON_INITIALIZER;
    q_matcher *m = NULL;
    *found = false;
    if (!c)
        return 0;
    bson_append_iter(&q, "_id", 3, k);
    int rc = q_matcher_new(&q, &m, err);
    if (!rc) {
        q_scan s;
        eng_rid rid;
        bson_t doc;
        q_coll_lock(st->db, c, false);
        rc = q_scan_open(&s, st->db, c, &q, m, err);
        if (!rc) {
            if (q_scan_next(&s, &rid, &doc) == 0) {
                bson_copy_to(&doc, old);
                *found = true;
            }
            rc = q_scan_error(&s, err);
            q_scan_close(&s);
        }
        q_coll_unlock(st->db, c);
    }
    q_matcher_destroy(m);
    bson_destroy(&q);
    return rc;
}

/* out reduce with an old document: finalize(reduce(key, [new, old])). */
static int combine_old(mr_state *st, const bson_t *final, const bson_t *old, bson_t *out,
                       md_error *err)
{
    bson_iter_t k, nv, ov;
    bson_t vals = BSON_INITIALIZER, r = BSON_INITIALIZER;
    bson_iter_init_find(&k, final, "_id");
    bson_iter_init_find(&nv, final, "value");
    bson_append_iter(&vals, "_id", 3, &k);
    if (bson_iter_init_find(&ov, old, "value"))
        bson_append_iter(&vals, "1", 1, &ov);
    else
        bson_append_undefined(&vals, "1", 1);
    int rc = call_reduce(st, &vals, &nv, &r, err);
    if (!rc) {
        bson_iter_t rv;
        bson_iter_init_find(&rv, &r, "v");
        bson_append_iter(out, "_id", 3, &k);
        rc = finalize_value(st, &k, &rv, out, err);
    }
    bson_destroy(&vals);
    bson_destroy(&r);
    return rc;
}

static int upsert_doc(mr_state *st, const char *name, const bson_t *doc, md_error *err)
{
    q_upd_stmt s = {.upsert = true};
    q_upd_out o = {0};
    bson_iter_t k;
    bson_init(&s.q);
    bson_init(&o.id);
    bson_iter_init_find(&k, doc, "_id");
    bson_append_iter(&s.q, "_id", 3, &k);
    bson_init_static(&s.u, bson_get_data(doc), doc->len);
    int rc = q_update_exec(st->db, name, st->cmd->durable, &s, &o, err);
    bson_destroy(&s.q);
    bson_destroy(&o.id);
    return rc;
}

/* replace: empty the output collection (its indexes stay). */
static int empty_output(mr_state *st, const char *name, md_error *err)
{
    q_coll *c = q_coll_find(st->db, name);
    int64_t n = 0;
    if (!c)
        return 0;
    if (c->capped)
        return q_coll_drop(st->db, c, err);
    bson_t all = BSON_INITIALIZER;
    int rc = q_delete_exec(st->db, name, st->cmd->durable, &all, 0, &n, err);
    bson_destroy(&all);
    return rc;
}

static int write_output(mr_state *st, bson_t *reply, md_error *err)
{
    const mr_cmd *p = st->cmd;
    bson_t arr;
    char key[24];
    int rc = 0;
    q_coll *c = NULL;
    if (p->out == MR_INLINE) {
        bson_append_array_begin(reply, "results", 7, &arr);
    } else {
        rc = q_write_allowed(st->db, err);
        if (!rc && p->out == MR_REPLACE)
            rc = empty_output(st, p->out_name, err);
        if (!rc)
            rc = q_coll_get_or_create(st->db, p->out_name, NULL, &c, err);
        if (rc)
            return rc;
    }
    for (size_t i = 0; !rc && i < st->n; i++) {
        bson_t doc = BSON_INITIALIZER;
        rc = ent_final(st, st->ents[i], &doc, err);
        if (!rc && js_ctx_expired(st->js))
            rc = js_err_time_limit(err);
        if (!rc && p->out == MR_INLINE) {
            snprintf(key, sizeof key, "%zu", i);
            bson_append_document(&arr, key, -1, &doc);
            st->output++;
        } else if (!rc && p->out == MR_REPLACE) {
            q_coll_lock(st->db, c, true);
            rc = q_insert_exec(st->db, c, &doc, NULL, p->durable, err);
            q_coll_unlock(st->db, c);
        } else if (!rc && p->out == MR_MERGE) {
            rc = upsert_doc(st, p->out_name, &doc, err);
        } else if (!rc) {
            bson_t old, comb = BSON_INITIALIZER;
            bool found;
            bson_iter_t k;
            bson_iter_init_find(&k, &doc, "_id");
            rc = find_old(st, p->out_name, &k, &old, &found, err);
            if (!rc && found) {
                rc = combine_old(st, &doc, &old, &comb, err);
                bson_destroy(&old);
            }
            if (!rc)
                rc = upsert_doc(st, p->out_name, found ? &comb : &doc, err);
            bson_destroy(&comb);
        }
        bson_destroy(&doc);
    }
    if (p->out == MR_INLINE) {
        bson_append_array_end(reply, &arr);
        return rc;
    }
    if (rc)
        return rc;
    c = q_coll_find(st->db, p->out_name);
    if (c) {
        eng_rs_stats rs;
        q_coll_stats(c, &rs);
        st->output = rs.count;
    }
    if (p->out_db) {
        bson_t r;
        bson_append_document_begin(reply, "result", 6, &r);
        BSON_APPEND_UTF8(&r, "db", p->out_db);
        BSON_APPEND_UTF8(&r, "collection", p->out_name);
        bson_append_document_end(reply, &r);
    } else {
        BSON_APPEND_UTF8(reply, "result", p->out_name);
    }
    return 0;
}

/* ---- the command ----------------------------------------------------------------------------- */

static int define(mr_state *st, const bson_iter_t *it, int *fn, md_error *err)
{
    uint32_t len, slen;
    const uint8_t *scope;
    const char *src;
    if (BSON_ITER_HOLDS_UTF8(it)) {
        src = bson_iter_utf8(it, &len);
    } else if (BSON_ITER_HOLDS_CODE(it)) {
        src = bson_iter_code(it, &len);
    } else {
        src = bson_iter_codewscope(it, &len, &slen, &scope);
        bson_t sc;
        if (bson_init_static(&sc, scope, slen)) {
            int rc = js_ctx_set_globals(st->js, &sc, err);
            if (rc)
                return rc;
        }
    }
    return js_func_new(st->js, src, len, fn, err);
}

static int mr_setup(mr_state *st, md_error *err)
{
    const mr_cmd *p = st->cmd;
    js_opts o = {p->max_time_ms, st->db->js_time_limit_ms, 0, false};
    int rc = js_ctx_new(&o, &st->js, err);
    if (rc)
        return rc;
    js_ctx_set_emit(st->js, mr_emit, st);
    if (p->has_scope)
        rc = js_ctx_set_globals(st->js, &p->scope, err);
    if (!rc)
        rc = define(st, &p->map, &st->fmap, err);
    if (!rc)
        rc = define(st, &p->reduce, &st->fred, err);
    if (!rc && p->has_finalize)
        rc = define(st, &p->finalize, &st->ffin, err);
    return rc;
}

static void mr_reply_tail(mr_state *st, bson_t *reply, int64_t t0)
{
    bson_t counts, timing;
    int64_t total = q_now_ms() - t0;
    BSON_APPEND_INT32(reply, "timeMillis", (int32_t)total);
    bson_append_document_begin(reply, "counts", 6, &counts);
    q_append_number(&counts, "input", st->input);
    q_append_number(&counts, "emit", st->emits);
    q_append_number(&counts, "reduce", st->reduces);
    q_append_number(&counts, "output", st->output);
    bson_append_document_end(reply, &counts);
    if (st->cmd->verbose) {
        bson_append_document_begin(reply, "timing", 6, &timing);
        BSON_APPEND_INT64(&timing, "mapTime", st->map_ms);
        BSON_APPEND_INT64(&timing, "emitLoop", st->map_ms);
        BSON_APPEND_INT64(&timing, "reduceTime", st->reduce_ms);
        BSON_APPEND_UTF8(&timing, "mode", "mixed");
        BSON_APPEND_INT64(&timing, "total", total);
        bson_append_document_end(reply, &timing);
    }
}

int q_cmd_map_reduce(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err)
{
    int64_t t0 = q_now_ms();
    mr_cmd p;
    memset(&p, 0, sizeof p);
    bson_init(&p.query);
    mr_state st = {.db = db, .cmd = &p, .ffin = -1};
    int rc = mr_parse(db, cmd, &p, err);
    if (!rc)
        rc = mr_setup(&st, err);
    q_coll *c = rc ? NULL : q_coll_find(db, p.name);
    if (c)
        rc = map_phase(&st, c, err);
    if (!rc) {
        q_sort(st.ents, st.n, sizeof *st.ents, ent_cmp);
        rc = write_output(&st, reply, err);
    }
    if (!rc)
        mr_reply_tail(&st, reply, t0);
    js_ctx_destroy(st.js);
    for (size_t i = 0; i < st.n; i++)
        ent_free(st.ents[i]);
    free(st.ents);
    free(st.tab);
    return rc;
}
