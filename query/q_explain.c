/*
 * q_explain.c -- the explain command over find, count, update, delete and
 * findAndModify, with verbosity "queryPlanner" or "executionStats"
 * ("allPlansExecution" answers as executionStats).  The reply has
 * MongoDB 3.6's shape:
 *
 *   {queryPlanner: {plannerVersion: 1, namespace, indexFilterSet: false,
 *                   parsedQuery, winningPlan: <stage tree>, rejectedPlans},
 *    executionStats: {executionSuccess, nReturned, executionTimeMillis,
 *                     totalKeysExamined, totalDocsExamined, executionStages},
 *    ok: 1}
 *
 * A stage tree nests from the top: [COUNT|UPDATE|DELETE] <- [PROJECTION]
 * <- [LIMIT] <- [SKIP] <- [SORT] <- FETCH <- IXSCAN | COLLSCAN | IDHACK.
 * executionStats runs the query to the end without writing anything (an
 * explained update or delete changes nothing, as in MongoDB).
 */
#include <string.h>
#include <strings.h>

#include "q_geo.h"
#include "q_int.h"
#include "q_text.h"

/* What to explain: one query, however the inner command spells it. */
typedef struct xq {
    const bson_t *filter, *sort, *proj;
    const bson_iter_t *hint;
    int64_t skip, limit;
    const char *top; /* COUNT, UPDATE, DELETE or NULL */
    bool exec;
} xq;

typedef struct xstats {
    int64_t keys, docs, matched, returned, yields;
} xstats;

/* MongoDB's parsedQuery: {a: 1} -> {a: {$eq: 1}}, several -> {$and: [..]}. */
static void parsed_query(const bson_t *filter, bson_t *out)
{
    bson_iter_t it;
    bson_t and, one, eq;
    uint32_t n = filter ? bson_count_keys(filter) : 0;
    char k[24];
    bson_init(out);
    if (n == 0 || !bson_iter_init(&it, filter))
        return;
    if (n > 1)
        bson_append_array_begin(out, "$and", 4, &and);
    for (uint32_t i = 0; bson_iter_next(&it); i++) {
        bson_t *dst = n > 1 ? &one : out;
        const char *key = bson_iter_key(&it);
        snprintf(k, sizeof k, "%u", i);
        if (n > 1)
            bson_append_document_begin(&and, k, -1, &one);
        bson_iter_t sub;
        bool ops = BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &sub) &&
                   bson_iter_next(&sub) && bson_iter_key(&sub)[0] == '$';
        if (key[0] == '$' || ops || BSON_ITER_HOLDS_REGEX(&it)) {
            bson_append_iter(dst, key, -1, &it);
        } else {
            bson_append_document_begin(dst, key, -1, &eq);
            bson_append_iter(&eq, "$eq", 3, &it);
            bson_append_document_end(dst, &eq);
        }
        if (n > 1)
            bson_append_document_end(&and, &one);
    }
    if (n > 1)
        bson_append_array_end(out, &and);
}

/* A new stage document {stage: name, ...} around `input` (destroyed). */
static bson_t *stage_wrap(bson_t *input, const char *name, const bson_t *extra,
                          int64_t nret, bool exec)
{
    bson_t *b = bson_new();
    BSON_APPEND_UTF8(b, "stage", name);
    if (extra)
        bson_concat(b, extra);
    if (exec)
        BSON_APPEND_INT64(b, "nReturned", nret);
    if (input) {
        BSON_APPEND_DOCUMENT(b, "inputStage", input);
        bson_destroy(input);
    }
    return b;
}

/* The scan part: COLLSCAN, IDHACK, or FETCH over IXSCAN.  The leaf
 * reports its yields as saveState / restoreState (q_lock.c). */
static bson_t *scan_stages(const q_plan *p, const bson_t *pq, const xstats *st, bool exec)
{
    if (p->text)
        return q_text_explain(p, pq, st->keys, st->docs, st->matched, exec);
    bson_t x = BSON_INITIALIZER;
    bson_t *b;
    const char *dir = p->dir < 0 ? "backward" : "forward";
    if (exec) {
        BSON_APPEND_INT64(&x, "saveState", st->yields);
        BSON_APPEND_INT64(&x, "restoreState", st->yields);
    }
    if (!p->ix) {
        if (!bson_empty(pq))
            BSON_APPEND_DOCUMENT(&x, "filter", pq);
        BSON_APPEND_UTF8(&x, "direction", dir);
        if (exec)
            BSON_APPEND_INT64(&x, "docsExamined", st->docs);
        b = stage_wrap(NULL, "COLLSCAN", &x, st->matched, exec);
    } else if (p->geo_near) { /* q_geo_near.c */
        BSON_APPEND_DOCUMENT(&x, "keyPattern", &p->ix->key);
        BSON_APPEND_UTF8(&x, "indexName", p->ix->name);
        if (p->bounds)
            BSON_APPEND_DOCUMENT(&x, "indexBounds", p->bounds);
        if (exec) {
            BSON_APPEND_INT64(&x, "keysExamined", st->keys);
            BSON_APPEND_INT64(&x, "docsExamined", st->docs);
        }
        b = stage_wrap(NULL, p->ix->gp->kind == Q_GEO_2D ? "GEO_NEAR_2D" : "GEO_NEAR_2DSPHERE",
                       &x, st->matched, exec);
    } else if (p->idhack) {
        if (exec) {
            BSON_APPEND_INT64(&x, "keysExamined", st->keys);
            BSON_APPEND_INT64(&x, "docsExamined", st->docs);
        }
        b = stage_wrap(NULL, "IDHACK", &x, st->matched, exec);
    } else {
        BSON_APPEND_DOCUMENT(&x, "keyPattern", &p->ix->key);
        BSON_APPEND_UTF8(&x, "indexName", p->ix->name);
        BSON_APPEND_BOOL(&x, "isMultiKey", Q_MULTIKEY(p->ix));
        BSON_APPEND_BOOL(&x, "isUnique", p->ix->unique);
        BSON_APPEND_BOOL(&x, "isSparse", p->ix->sparse);
        BSON_APPEND_BOOL(&x, "isPartial", p->ix->partial != NULL);
        BSON_APPEND_INT32(&x, "indexVersion", 2);
        BSON_APPEND_UTF8(&x, "direction", dir);
        if (p->bounds)
            BSON_APPEND_DOCUMENT(&x, "indexBounds", p->bounds);
        if (exec)
            BSON_APPEND_INT64(&x, "keysExamined", st->keys);
        b = stage_wrap(NULL, "IXSCAN", &x, p->covered ? st->matched : st->docs, exec);
        if (p->covered)
            goto out; /* PROJECTION_COVERED reads the keys */
        bson_reinit(&x);
        if (!bson_empty(pq))
            BSON_APPEND_DOCUMENT(&x, "filter", pq);
        if (exec)
            BSON_APPEND_INT64(&x, "docsExamined", st->docs);
        b = stage_wrap(b, "FETCH", &x, st->matched, exec);
    }
out:
    bson_destroy(&x);
    return b;
}

/* The whole tree of plan p for query q. */
static bson_t *plan_tree(const q_plan *p, const xq *q, const bson_t *pq, const xstats *st,
                         bool exec)
{
    bson_t x = BSON_INITIALIZER;
    bson_t *b = scan_stages(p, pq, st, exec);
    int64_t after_skip = st->matched > q->skip ? st->matched - q->skip : 0;
    if (q->sort && !bson_empty(q->sort) && !p->sort_provided) {
        BSON_APPEND_DOCUMENT(&x, "sortPattern", q->sort);
        if (q->limit)
            BSON_APPEND_INT64(&x, "limitAmount", q->limit + q->skip);
        b = stage_wrap(b, "SORT", &x, st->matched, exec);
    }
    if (q->skip) {
        bson_reinit(&x);
        BSON_APPEND_INT64(&x, "skipAmount", q->skip);
        b = stage_wrap(b, "SKIP", &x, after_skip, exec);
    }
    if (q->limit && (!q->top || q->top[0] == 'C')) {
        bson_reinit(&x);
        BSON_APPEND_INT64(&x, "limitAmount", q->limit);
        b = stage_wrap(b, "LIMIT", &x, st->returned, exec);
    }
    if (q->proj && !bson_empty(q->proj)) {
        bson_reinit(&x);
        BSON_APPEND_DOCUMENT(&x, "transformBy", q->proj);
        /* a covered plan projects straight from the index keys (the stage
         * name of MongoDB 4.4's explain; 3.6 said PROJECTION for both) */
        b = stage_wrap(b, p->covered ? "PROJECTION_COVERED" : "PROJECTION", &x, st->returned,
                       exec);
    }
    if (q->top)
        b = stage_wrap(b, q->top, NULL, q->top[0] == 'C' ? 0 : st->returned, exec);
    bson_destroy(&x);
    return b;
}

/* Run the winning plan to the end (or the limit), counting. */
static void run_plan(q_scan *s, const xq *q, xstats *st)
{
    eng_rid rid;
    bson_t doc;
    bool streaming = s->plan.sort_provided;
    while (!(streaming && q->limit && st->matched >= q->skip + q->limit) &&
           q_scan_next(s, &rid, &doc) == 0)
        st->matched++;
    st->keys = s->keys;
    st->docs = s->docs;
    st->yields = s->yield.yields;
    st->returned = st->matched > q->skip ? st->matched - q->skip : 0;
    if (q->limit && st->returned > q->limit)
        st->returned = q->limit;
}

/* The queryPlanner section: the winning plan and the rejected ones. */
static void append_planner(bson_t *reply, const char *ns, const q_scan *s, bool have,
                           const xq *q, const bson_t *pq, const xstats *st)
{
    bson_t qp, rej;
    BSON_APPEND_DOCUMENT_BEGIN(reply, "queryPlanner", &qp);
    BSON_APPEND_INT32(&qp, "plannerVersion", 1);
    BSON_APPEND_UTF8(&qp, "namespace", ns);
    BSON_APPEND_BOOL(&qp, "indexFilterSet", false);
    BSON_APPEND_DOCUMENT(&qp, "parsedQuery", pq);
    bson_t *win = have ? plan_tree(&s->plan, q, pq, st, false)
                       : stage_wrap(NULL, "EOF", NULL, 0, false);
    BSON_APPEND_DOCUMENT(&qp, "winningPlan", win);
    bson_destroy(win);
    BSON_APPEND_ARRAY_BEGIN(&qp, "rejectedPlans", &rej);
    for (size_t i = 0; have && i < s->nrejected; i++) {
        char k[24];
        bson_t *t = plan_tree(&s->rejected[i], q, pq, st, false);
        snprintf(k, sizeof k, "%zu", i);
        BSON_APPEND_DOCUMENT(&rej, k, t);
        bson_destroy(t);
    }
    bson_append_array_end(&qp, &rej);
    bson_append_document_end(reply, &qp);
}

/* The executionStats section. */
static void append_stats(bson_t *reply, const q_scan *s, bool have, const xq *q,
                         const bson_t *pq, const xstats *st, int64_t t0)
{
    bson_t es;
    BSON_APPEND_DOCUMENT_BEGIN(reply, "executionStats", &es);
    BSON_APPEND_BOOL(&es, "executionSuccess", true);
    BSON_APPEND_INT64(&es, "nReturned", st->returned);
    BSON_APPEND_INT64(&es, "executionTimeMillis", q_now_ms() - t0);
    BSON_APPEND_INT64(&es, "totalKeysExamined", st->keys);
    BSON_APPEND_INT64(&es, "totalDocsExamined", st->docs);
    bson_t *ex = have ? plan_tree(&s->plan, q, pq, st, true)
                      : stage_wrap(NULL, "EOF", NULL, 0, true);
    BSON_APPEND_DOCUMENT(&es, "executionStages", ex);
    bson_destroy(ex);
    bson_append_document_end(reply, &es);
}

/* Plan (and with executionStats run) q over collection c (NULL: EOF). */
static int explain_query(md_db *db, q_coll *c, const char *ns, const xq *q, bson_t *reply,
                         md_error *err)
{
    bson_t pq, empty = BSON_INITIALIZER;
    q_matcher *m = NULL;
    q_scan s;
    xstats st = {0};
    int64_t t0 = q_now_ms();
    int rc = q_matcher_new(q->filter ? q->filter : &empty, &m, err);
    if (rc)
        return rc;
    q_coll_lock(db, c, false);
    q_scan_opts o = {.sort = q->sort, .hint = q->hint, .proj = q->proj, .explain = true};
    if (c && (rc = q_scan_open_opts(&s, db, c, q->filter, m, &o, err)) != 0)
        goto out_close;
    if (c && q->exec)
        run_plan(&s, q, &st);
    for (size_t i = 0; c && i <= s.nrejected; i++)
        q_plan_render_bounds(i ? &s.rejected[i - 1] : &s.plan,
                             q->filter ? q->filter : &empty);
    parsed_query(q->filter, &pq);
    append_planner(reply, ns, &s, c != NULL, q, &pq, &st);
    if (q->exec)
        append_stats(reply, &s, c != NULL, q, &pq, &st, t0);
    bson_destroy(&pq);
out_close:
    if (c)
        q_scan_close(&s);
    q_coll_unlock(db, c);
    q_matcher_destroy(m);
    return rc;
}

int q_explain_planner(md_db *db, q_coll *c, const char *ns, const bson_t *filter,
                      const bson_t *sort, const bson_t *proj, bson_t *out, md_error *err)
{
    xq q = {.filter = filter, .sort = sort && !bson_empty(sort) ? sort : NULL, .proj = proj};
    return explain_query(db, c, ns, &q, out, err);
}

/* ---- the inner commands -------------------------------------------------------------- */

/* A document field of d, viewed into `out`; false if absent or not one. */
static bool doc_field(const bson_t *d, const char *name, bson_t *out)
{
    bson_iter_t it;
    const uint8_t *data;
    uint32_t len;
    if (!bson_iter_init_find(&it, d, name) || !BSON_ITER_HOLDS_DOCUMENT(&it))
        return false;
    bson_iter_document(&it, &len, &data);
    return bson_init_static(out, data, len);
}

static int64_t int_field(const bson_t *d, const char *name)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, d, name) || !BSON_ITER_HOLDS_NUMBER(&it))
        return 0;
    int64_t v = bson_iter_as_int64(&it);
    return v < 0 ? -v : v;
}

/* The first statement of an update / delete command ("updates.0"). */
static bool first_statement(const bson_t *inner, const char *arr, bson_t *out)
{
    bson_iter_t it, sub;
    const uint8_t *data;
    uint32_t len;
    if (!bson_iter_init_find(&it, inner, arr) || !BSON_ITER_HOLDS_ARRAY(&it) ||
        !bson_iter_recurse(&it, &sub) || !bson_iter_next(&sub) ||
        !BSON_ITER_HOLDS_DOCUMENT(&sub))
        return false;
    bson_iter_document(&sub, &len, &data);
    return bson_init_static(out, data, len);
}

/* Fill q from a count / update / delete / findAndModify command. */
static int parse_other(const char *cmd, const bson_t *inner, xq *q, bson_t *filter,
                       bson_t *sort, bson_t *stmt, bson_iter_t *hint, md_error *err)
{
    const bson_t *src = inner;
    if (strcmp(cmd, "update") == 0 || strcmp(cmd, "delete") == 0) {
        bool upd = cmd[0] == 'u';
        if (!first_statement(inner, upd ? "updates" : "deletes", stmt))
            return q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE,
                         "Failed to parse: %s. '%s' must hold a statement", cmd,
                         upd ? "updates" : "deletes");
        src = stmt;
        q->top = upd ? "UPDATE" : "DELETE";
        bson_iter_t it;
        bool multi = bson_iter_init_find(&it, stmt, "multi") && bson_iter_as_bool(&it);
        q->limit = upd ? (multi ? 0 : 1) : int_field(stmt, "limit");
        if (doc_field(stmt, "q", filter))
            q->filter = filter;
    } else if (strcasecmp(cmd, "findAndModify") == 0) {
        bson_iter_t it;
        bool rm = bson_iter_init_find(&it, inner, "remove") && bson_iter_as_bool(&it);
        q->top = rm ? "DELETE" : "UPDATE";
        q->limit = 1;
        if (doc_field(inner, "query", filter))
            q->filter = filter;
        if (doc_field(inner, "sort", sort))
            q->sort = sort;
    } else { /* count */
        q->top = "COUNT";
        if (doc_field(inner, "query", filter))
            q->filter = filter;
        q->skip = int_field(inner, "skip");
        q->limit = int_field(inner, "limit");
    }
    if (bson_iter_init_find(hint, src, "hint") &&
        (BSON_ITER_HOLDS_UTF8(hint) || BSON_ITER_HOLDS_DOCUMENT(hint))) {
        bson_t h;
        if (!BSON_ITER_HOLDS_DOCUMENT(hint) || (doc_field(src, "hint", &h) && !bson_empty(&h)))
            q->hint = hint;
    }
    return 0;
}

static int explain_verbosity(const bson_t *cmd, bool *exec, md_error *err)
{
    bson_iter_t it;
    *exec = true;
    if (!bson_iter_init_find(&it, cmd, "verbosity"))
        return 0;
    const char *v = BSON_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, NULL) : "";
    if (strcmp(v, "queryPlanner") == 0)
        *exec = false;
    else if (strcmp(v, "executionStats") && strcmp(v, "allPlansExecution"))
        return q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE,
                     "verbosity string must be one of {'queryPlanner', 'executionStats', "
                     "'allPlansExecution'}");
    return 0;
}

int q_cmd_explain(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err)
{
    bson_t inner, filter, sort, stmt;
    bson_iter_t hint;
    char ns[ENG_IDENT_MAX];
    const char *name;
    xq q = {0};
    if (!doc_field(cmd, "explain", &inner) || bson_empty(&inner))
        return q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE,
                     "explain command requires a nested object");
    int rc = explain_verbosity(cmd, &q.exec, err);
    bson_iter_t it;
    bson_iter_init(&it, &inner);
    bson_iter_next(&it);
    const char *verb = bson_iter_key(&it);
    if (rc)
        return rc;
    if (strcmp(verb, "find") == 0) {
        q_find_cmd f;
        rc = q_find_parse(db, &inner, &f, err);
        q.filter = f.a.filter;
        q.sort = f.a.sort;
        q.proj = f.a.projection;
        q.hint = f.a.hint;
        q.skip = f.a.skip;
        q.limit = f.a.limit;
        if (!rc)
            rc = explain_query(db, q_coll_find(db, f.name), f.ns, &q, reply, err);
        q_find_cmd_cleanup(&f);
        return rc;
    }
    if (strcmp(verb, "count") && strcmp(verb, "update") && strcmp(verb, "delete") &&
        strcasecmp(verb, "findAndModify"))
        return q_err(err, MD_EINVAL, MD_CODE_COMMAND_NOT_FOUND,
                     "Explain failed due to unknown command: %s", verb);
    if ((rc = q_cmd_coll_name(db, &inner, false, &name, ns, err)) != 0 ||
        (rc = parse_other(verb, &inner, &q, &filter, &sort, &stmt, &hint, err)) != 0)
        return rc;
    return explain_query(db, q_coll_find(db, name), ns, &q, reply, err);
}
