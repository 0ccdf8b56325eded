/*
 * q_cmd_find.c -- the read commands: find, getMore, killCursors and count,
 * parsed as MongoDB 3.6's QueryRequest / GetMoreRequest / CountRequest do.
 *
 *   {find: "c", filter, projection, sort, skip, limit, batchSize, singleBatch,
 *    tailable, awaitData}
 *       -> {cursor: {firstBatch: [...], id: NumberLong, ns: "test.c"}, ok: 1}
 *   {getMore: NumberLong(id), collection: "c", batchSize, maxTimeMS}
 *       -> {cursor: {nextBatch: [...], id, ns}, ok: 1}
 *   {killCursors: "c", cursors: [ids]}
 *       -> {cursorsKilled, cursorsNotFound, cursorsAlive, cursorsUnknown, ok}
 *   {count: "c", query, skip, limit} -> {n, ok}
 *
 * Execution lives in q_cursor.c; this file only reads arguments.  A find on
 * a missing collection answers an empty, exhausted cursor, as mongod does.
 */
#include <string.h>

#include "q_int.h"

static int field_type_error(const bson_iter_t *it, const char *want, md_error *err)
{
    return q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE,
                 "Failed to parse: '%s' field must be of BSON type %s (got %s).",
                 bson_iter_key(it), want, q_type_name(bson_iter_type(it)));
}

static int get_doc(const bson_iter_t *it, bson_t *out, md_error *err)
{
    const uint8_t *data;
    uint32_t len;
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return field_type_error(it, "object", err);
    bson_iter_document(it, &len, &data);
    if (!bson_init_static(out, data, len))
        return q_err(err, MD_EINVAL, MD_CODE_INVALID_BSON, "invalid BSON in '%s'",
                     bson_iter_key(it));
    return 0;
}

/* skip / limit / batchSize: integral and non-negative ("Skip value must be
 * non-negative", 3.6's wording). */
static int get_count(const bson_iter_t *it, const char *label, int64_t *out, md_error *err)
{
    double d;
    if (!BSON_ITER_HOLDS_NUMBER(it))
        return q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE,
                     "Failed to parse: '%s' field must be numeric.", bson_iter_key(it));
    d = bson_iter_as_double(it);
    if (!q_iter_int64(it, out)) /* a fraction truncates; past int64 saturates */
        *out = d != d ? 0 : d > 9.2e18 ? INT64_MAX : d < -9.2e18 ? INT64_MIN : (int64_t)d;
    if (*out < 0 || d < 0)
        return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE, "%s value must be non-negative",
                     label);
    return 0;
}

static bool find_ignored(const char *k)
{
    static const char *const names[] = {"comment", "allowPartialResults",
                                        "maxScan", "snapshot", NULL};
    for (size_t i = 0; names[i]; i++)
        if (strcmp(k, names[i]) == 0)
            return true;
    return q_is_generic_arg(k);
}

static bool find_unsupported(const char *k)
{
    static const char *const names[] = {"returnKey", "showRecordId", "min", "max",
                                        "collation", "oplogReplay", NULL};
    for (size_t i = 0; names[i]; i++)
        if (strcmp(k, names[i]) == 0)
            return true;
    return false;
}

static int find_field(bson_iter_t *it, q_find_cmd *p, q_find_args *a, md_error *err)
{
    const char *k = bson_iter_key(it);
    if (strcmp(k, "filter") == 0)
        return (p->has_filter = true, get_doc(it, &p->filter, err));
    if (strcmp(k, "projection") == 0)
        return (p->has_projection = true, get_doc(it, &p->projection, err));
    if (strcmp(k, "sort") == 0)
        return (p->has_sort = true, get_doc(it, &p->sort, err));
    if (strcmp(k, "hint") == 0) {
        if (!BSON_ITER_HOLDS_UTF8(it) && !BSON_ITER_HOLDS_DOCUMENT(it))
            return field_type_error(it, "object", err);
        if (p->has_hint)
            bson_destroy(&p->hint);
        bson_init(&p->hint);
        bson_append_iter(&p->hint, "h", 1, it);
        p->has_hint = true;
        return 0;
    }
    if (strcmp(k, "skip") == 0)
        return get_count(it, "Skip", &a->skip, err);
    if (strcmp(k, "limit") == 0)
        return get_count(it, "Limit", &a->limit, err);
    if (strcmp(k, "batchSize") == 0)
        return get_count(it, "BatchSize", &a->batch_size, err);
    if (strcmp(k, "singleBatch") == 0 || strcmp(k, "noCursorTimeout") == 0 ||
        strcmp(k, "tailable") == 0 || strcmp(k, "awaitData") == 0) {
        if (!BSON_ITER_HOLDS_BOOL(it))
            return field_type_error(it, "bool", err);
        *(k[0] == 's' ? &a->single_batch
          : k[0] == 'n' ? &a->no_timeout
          : k[0] == 't' ? &a->tailable
                        : &a->await_data) = bson_iter_bool(it);
        return 0;
    }
    if (find_unsupported(k))
        return q_err(err, MD_ENOTSUP, MD_CODE_COMMAND_NOT_SUPPORTED,
                     "find option '%s' is not supported yet", k);
    if (find_ignored(k))
        return 0;
    return q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE,
                 "Failed to parse: find. Unrecognized field '%s'.", k);
}

static bool empty_doc(const bson_iter_t *it)
{
    const uint8_t *data;
    uint32_t len;
    bson_iter_document(it, &len, &data);
    return len <= 5;
}

/* QueryRequest::validate's tailable rules (3.6 wording).  A {$natural: 1}
 * sort is the order a tailable cursor has anyway, and is dropped. */
static int tailable_check(q_find_cmd *p, md_error *err)
{
    if (p->a.await_data && !p->a.tailable)
        return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE, "Cannot set awaitData without tailable");
    if (!p->a.tailable)
        return 0;
    if (p->has_sort && !bson_empty(&p->sort)) {
        if (!q_doc_is_one(&p->sort, "$natural"))
            return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                         "cannot use tailable option with a sort other than {$natural: 1}");
        p->has_sort = false;
    }
    if (p->a.single_batch)
        return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                     "cannot use tailable option with the 'singleBatch' option");
    return 0;
}

/* After the fields: the checks between them, and the views in p->a. */
static int find_finish(q_find_cmd *p, int rc, md_error *err)
{
    if (!rc)
        rc = tailable_check(p, err);
    p->a.filter = p->has_filter ? &p->filter : NULL;
    p->a.projection = p->has_projection ? &p->projection : NULL;
    p->a.sort = p->has_sort ? &p->sort : NULL;
    if (p->has_hint && bson_iter_init_find(&p->hint_it, &p->hint, "h") &&
        !(BSON_ITER_HOLDS_DOCUMENT(&p->hint_it) && empty_doc(&p->hint_it)))
        p->a.hint = &p->hint_it; /* an empty hint is none */
    return rc;
}

int q_find_parse(md_db *db, const bson_t *cmd, q_find_cmd *p, md_error *err)
{
    bson_iter_t it;
    memset(p, 0, sizeof *p);
    p->a.batch_size = -1;
    int rc = q_cmd_coll_name(db, cmd, false, &p->name, p->ns, err);
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    while (!rc && bson_iter_next(&it))
        rc = find_field(&it, p, &p->a, err);
    return find_finish(p, rc, err);
}

int q_find_parse_typed(md_db *db, const char *coll, const bson_t *filter, const bson_t *opts,
                       const char *const *skip, q_find_cmd *p, md_error *err)
{
    bson_iter_t it;
    memset(p, 0, sizeof *p);
    p->a.batch_size = -1;
    p->name = coll;
    int rc = q_ns_make(db, coll, p->ns, err);
    if (!rc && filter) {
        p->has_filter = true;
        bson_init_static(&p->filter, bson_get_data(filter), filter->len);
    }
    if (!rc && opts && bson_iter_init(&it, opts)) {
        while (!rc && bson_iter_next(&it)) {
            bool skipped = false;
            for (size_t i = 0; skip && skip[i] && !skipped; i++)
                skipped = strcmp(bson_iter_key(&it), skip[i]) == 0;
            if (!skipped)
                rc = find_field(&it, p, &p->a, err);
        }
    }
    return find_finish(p, rc, err);
}

void q_find_cmd_cleanup(q_find_cmd *p)
{
    if (p->has_hint)
        bson_destroy(&p->hint);
    p->has_hint = false;
}

/* IDHACK's one document as a first batch, else a cursor. */
static int find_run(md_db *db, const q_find_cmd *p, bson_t *reply, md_error *err)
{
    bool found;
    q_coll *c = q_coll_find(db, p->name);
    bson_t doc = BSON_INITIALIZER, *docs[1] = {&doc};
    int rc = c ? q_find_by_id(db, c, &p->a, &found, &doc, err) : Q_FIND_GENERAL;
    if (rc == Q_FIND_GENERAL)
        rc = q_cursor_find(db, c, p->ns, &p->a, reply, err);
    else if (rc == 0)
        q_cursor_reply_array(reply, p->ns, docs, found);
    bson_destroy(&doc);
    return rc;
}

int q_cmd_find(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err)
{
    q_find_cmd p;
    int rc = q_find_parse(db, cmd, &p, err);
    if (!rc)
        rc = find_run(db, &p, reply, err);
    q_find_cmd_cleanup(&p);
    return rc;
}

/* ---- getMore ------------------------------------------------------------------------- */

int q_cmd_get_more(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err)
{
    bson_iter_t it;
    int64_t id = 0, batch = 0, max_time = -1;
    const char *coll = NULL;
    char ns[ENG_IDENT_MAX];
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    if (!(BSON_ITER_HOLDS_INT64(&it) || BSON_ITER_HOLDS_INT32(&it)))
        return q_err(err, MD_EINVAL, MD_CODE_TYPE_MISMATCH,
                     "Field 'getMore' must be of type long");
    id = bson_iter_as_int64(&it);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "collection") == 0) {
            if (!BSON_ITER_HOLDS_UTF8(&it))
                return q_err(err, MD_EINVAL, MD_CODE_TYPE_MISMATCH,
                             "Field 'collection' must be of type string");
            coll = bson_iter_utf8(&it, NULL);
        } else if (strcmp(k, "batchSize") == 0) {
            if (!BSON_ITER_HOLDS_NUMBER(&it) || !q_iter_int64(&it, &batch) || batch <= 0)
                return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                             "Batch size for getMore must be positive");
        } else if (strcmp(k, "maxTimeMS") == 0) {
            /* an awaitData cursor's wait (q_cursor.c); 0 is no wait here */
            if (!BSON_ITER_HOLDS_NUMBER(&it))
                return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE, "maxTimeMS must be a number");
            double d = bson_iter_as_double(&it);
            if (d < 0 || d > INT32_MAX || d != d)
                return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE, "maxTimeMS out of range");
            max_time = (int64_t)d;
        } else if (strcmp(k, "term") && strcmp(k, "lastKnownCommittedOpTime") &&
                   !q_is_generic_arg(k)) {
            return q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE,
                         "Failed to parse: getMore. Unrecognized field '%s'.", k);
        }
    }
    if (!coll)
        return q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE,
                     "Field 'collection' must be specified");
    int rc = q_ns_make(db, coll, ns, err);
    return rc ? rc : q_cursor_get_more(db, id, ns, batch, max_time, reply, err);
}

/* ---- killCursors ------------------------------------------------------------------- */

int q_cmd_kill_cursors(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err)
{
    const char *name;
    char ns[ENG_IDENT_MAX], key[16];
    bson_iter_t it, ids;
    bson_t killed, notfound, empty;
    int nk = 0, nn = 0;
    int rc = q_cmd_coll_name(db, cmd, false, &name, ns, err);
    if (rc)
        return rc;
    if (!bson_iter_init_find(&it, cmd, "cursors") || !BSON_ITER_HOLDS_ARRAY(&it))
        return q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE,
                     "Field 'cursors' must be of type array");
    bson_iter_recurse(&it, &ids);
    for (bson_iter_t c = ids; bson_iter_next(&c);)
        if (!BSON_ITER_HOLDS_INT64(&c) && !BSON_ITER_HOLDS_INT32(&c))
            return q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE,
                         "Field 'cursors' contains an element that is not of type long");
    bson_init(&killed);
    bson_init(&notfound);
    bson_init(&empty);
    while (bson_iter_next(&ids)) {
        int64_t id = bson_iter_as_int64(&ids);
        bool ok = q_cursor_kill(db, id) == 0;
        snprintf(key, sizeof key, "%d", ok ? nk++ : nn++);
        BSON_APPEND_INT64(ok ? &killed : &notfound, key, id);
    }
    BSON_APPEND_ARRAY(reply, "cursorsKilled", &killed);
    BSON_APPEND_ARRAY(reply, "cursorsNotFound", &notfound);
    BSON_APPEND_ARRAY(reply, "cursorsAlive", &empty);
    BSON_APPEND_ARRAY(reply, "cursorsUnknown", &empty);
    bson_destroy(&killed);
    bson_destroy(&notfound);
    bson_destroy(&empty);
    return 0;
}

/* ---- count ----------------------------------------------------------------------- */

typedef struct count_args {
    bson_t query;
    int64_t skip, limit;
    bson_iter_t hint;
    bool has_hint;
} count_args;

static int count_parse(const bson_t *cmd, count_args *a, md_error *err)
{
    bson_iter_t it;
    bson_init(&a->query);
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        int rc = 0;
        if (strcmp(k, "query") == 0) {
            if (!BSON_ITER_HOLDS_NULL(&it))
                rc = get_doc(&it, &a->query, err);
        } else if (strcmp(k, "skip") == 0 || strcmp(k, "limit") == 0) {
            if (!BSON_ITER_HOLDS_NUMBER(&it))
                return q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE,
                             "%s value is not a valid number", k);
            int64_t v = (int64_t)bson_iter_as_double(&it);
            if (k[0] == 's' && v < 0)
                return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                             "skip value is negative in count query");
            *(k[0] == 's' ? &a->skip : &a->limit) = v < 0 ? -v : v;
        } else if (strcmp(k, "collation") == 0) {
            rc = q_err(err, MD_ENOTSUP, MD_CODE_COMMAND_NOT_SUPPORTED,
                       "count option 'collation' is not supported yet");
        } else if (strcmp(k, "hint") == 0 && (BSON_ITER_HOLDS_UTF8(&it) ||
                                               (BSON_ITER_HOLDS_DOCUMENT(&it) &&
                                                !empty_doc(&it)))) {
            a->hint = it;
            a->has_hint = true;
        } else if (strcmp(k, "hint") && strcmp(k, "fields") && strcmp(k, "comment") &&
                   !q_is_generic_arg(k)) {
            rc = q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE,
                       "Failed to parse: count. Unrecognized field '%s'.", k);
        }
        if (rc)
            return rc;
    }
    return 0;
}

static int count_matches(md_db *db, q_coll *c, const count_args *a, int64_t *n,
                         md_error *err)
{
    q_matcher *m = NULL;
    q_scan s;
    eng_rid rid;
    bson_t doc;
    int64_t seen = 0;
    *n = 0;
    if (bson_empty(&a->query) && a->skip == 0 && a->limit == 0) {
        eng_rs_stats st;
        q_coll_stats(c, &st);
        *n = st.count;
        return 0;
    }
    q_scan_opts o = {.hint = a->has_hint ? &a->hint : NULL};
    int rc = q_matcher_new(&a->query, &m, err);
    if (!rc)
        rc = q_scan_open_opts(&s, db, c, &a->query, m, &o, err);
    if (rc) {
        q_matcher_destroy(m);
        return rc;
    }
    while ((a->limit == 0 || *n < a->limit) && q_scan_next(&s, &rid, &doc) == 0)
        if (seen++ >= a->skip)
            (*n)++;
    rc = q_scan_error(&s, err);
    q_scan_close(&s);
    q_matcher_destroy(m);
    return rc;
}

int q_cmd_count(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err)
{
    const char *name;
    char ns[ENG_IDENT_MAX];
    count_args a = {.skip = 0, .limit = 0};
    int64_t n = 0;
    int rc = q_cmd_coll_name(db, cmd, false, &name, ns, err);
    if (!rc)
        rc = count_parse(cmd, &a, err);
    q_coll *c = rc ? NULL : q_coll_find(db, name);
    if (c) {
        q_coll_lock(db, c, false);
        rc = count_matches(db, c, &a, &n, err);
        q_coll_unlock(db, c);
    } else if (!rc) {
        q_matcher *m = NULL; /* still report a malformed query */
        rc = q_matcher_new(&a.query, &m, err);
        q_matcher_destroy(m);
    }
    if (!rc)
        q_append_number(reply, "n", n);
    return rc;
}
