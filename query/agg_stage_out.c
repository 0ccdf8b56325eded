/*
 * agg_stage_out.c -- $out (the pipeline's results replace a collection)
 * and the two statistics sources, $collStats and $indexStats.
 *
 * $out: an aggregate holding $out runs under the exclusive database lock
 * (q_cmd.c), so no other operation sees the target between its old and
 * its new contents.  The target keeps its indexes and options, as
 * MongoDB's: when it exists its documents are kept aside in memory, it is
 * emptied and the results are inserted; if an insert fails (a duplicate
 * _id, a unique index) it is emptied again and the old documents go back,
 * so the target ends as it was and the error is reported.  A missing
 * target is created (and dropped again on failure).  A capped target is
 * refused (17152), as MongoDB 4.0.  (MongoDB renames a temporary
 * collection over the target; minidoc has no rename, so a crash in the
 * middle of the replacement can leave the target partly written.)
 *
 * $collStats answers {ns, localTime, storageStats?, count?} from the
 * collStats command; latencyStats is refused (minidoc keeps no latency
 * histograms).  $indexStats answers one document per index with
 * accesses.ops = the index scans opened on it since the index (or the
 * database) was opened.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agg_int.h"

/* ---- $out ------------------------------------------------------------------------------- */

typedef struct st_out {
    agg_stage base;
    char *coll;
    bool done;
} st_out;

static void free_docs(bson_t **docs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        bson_destroy(docs[i]);
    free(docs);
}

/* The documents of c, in natural order. */
static int read_all(md_db *db, q_coll *c, bson_t ***docs, size_t *n, md_error *err)
{
    q_scan s;
    q_matcher *m = NULL;
    bson_t empty = BSON_INITIALIZER, view;
    eng_rid rid;
    size_t cap = 0;
    int rc = q_matcher_new(&empty, &m, err);
    if (rc)
        return rc;
    q_coll_lock(db, c, false);
    rc = q_scan_open(&s, db, c, &empty, m, err);
    if (rc == 0) {
        while ((rc = q_scan_next(&s, &rid, &view)) == 0) {
            if (*n == cap) {
                cap = cap ? 2 * cap : 64;
                *docs = realloc(*docs, cap * sizeof **docs);
                assert(*docs);
            }
            (*docs)[(*n)++] = bson_copy(&view);
        }
        rc = rc == MD_NOTFOUND ? q_scan_error(&s, err) : q_read_error(rc, err);
        q_scan_close(&s);
    }
    q_coll_unlock(db, c);
    q_matcher_destroy(m);
    return rc;
}

static int insert_all(md_db *db, q_coll *c, bson_t **docs, size_t n, md_error *err)
{
    for (size_t i = 0; i < n; i++) {
        int rc = q_insert_exec(db, c, docs[i], NULL, false, err);
        if (rc)
            return rc;
    }
    return 0;
}

static int out_write(st_out *s, bson_t **docs, size_t n, md_error *err)
{
    md_db *db = s->base.ctx->db;
    bson_t **old = NULL;
    size_t nold = 0;
    bool created = false;
    q_coll *c = q_coll_find(db, s->coll);
    int rc = q_write_allowed(db, err);
    if (rc)
        return rc;
    if (c && c->capped)
        return q_err(err, MD_EINVAL, 17152, "namespace '%s' is capped so it can't be used for "
                     "$out", c->ns);
    if (!c) {
        rc = q_coll_create(db, s->coll, NULL, &c, err);
        created = rc == 0;
    } else {
        rc = read_all(db, c, &old, &nold, err);
        if (rc == 0)
            rc = q_coll_empty(db, c, err);
    }
    if (rc) {
        free_docs(old, nold);
        return rc;
    }
    rc = insert_all(db, c, docs, n, err);
    if (rc) {
        md_error keep = *err, ignore;
        char msg[sizeof err->message + 32];
        md_error_clear(&ignore);
        if (created) {
            q_coll_drop(db, c, &ignore);
        } else if (q_coll_empty(db, c, &ignore) == 0) {
            insert_all(db, c, old, nold, &ignore);
        }
        *err = keep;
        snprintf(msg, sizeof msg, "insert for $out failed: %s", keep.message);
        snprintf(err->message, sizeof err->message, "%.1000s", msg);
    }
    free_docs(old, nold);
    return rc;
}

static int out_next(agg_stage *st, bson_t **out, md_error *err)
{
    st_out *s = (st_out *)st;
    bson_t **docs = NULL, *d;
    size_t n = 0, cap = 0;
    int rc;
    if (s->done)
        return MD_NOTFOUND;
    s->done = true;
    while ((rc = agg_pull(st, &d, err)) == 0) {
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            docs = realloc(docs, cap * sizeof *docs);
            assert(docs);
        }
        docs[n++] = d;
    }
    if (rc == MD_NOTFOUND)
        rc = out_write(s, docs, n, err);
    free_docs(docs, n);
    return rc ? rc : MD_NOTFOUND;
}

static void out_destroy(agg_stage *st)
{
    free(((st_out *)st)->coll);
}

static const agg_stage_ops out_ops = {.name = "$out", .next = out_next, .destroy = out_destroy};

int agg_parse_out(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out, md_error *err)
{
    char ns[ENG_IDENT_MAX];
    if (!BSON_ITER_HOLDS_UTF8(spec))
        return q_err(err, MD_EINVAL, 16990, "$out only supports a string argument, not %s",
                     q_type_name(bson_iter_type(spec)));
    const char *name = bson_iter_utf8(spec, NULL);
    if (strncmp(name, "system.", 7) == 0)
        return q_err(err, MD_EINVAL, 17385, "Can't $out to special collection: %s", name);
    int rc = q_ns_make(ctx->db, name, ns, err);
    if (rc)
        return rc;
    st_out *s = agg_stage_alloc(sizeof *s, &out_ops, ctx, "$out", spec);
    s->coll = strdup(name);
    agg_list_push(out, &s->base);
    return 0;
}

/* ---- $collStats ---------------------------------------------------------------------------- */

typedef struct st_stats {
    agg_stage base;
    bool storage, count, done;
    bson_t storage_opts;
    int pos; /* $indexStats: the next index */
} st_stats;

static int coll_stats_next(agg_stage *st, bson_t **out, md_error *err)
{
    st_stats *s = (st_stats *)st;
    md_db *db = st->ctx->db;
    char ns[ENG_IDENT_MAX];
    if (s->done)
        return MD_NOTFOUND;
    s->done = true;
    snprintf(ns, sizeof ns, "%s.%s", db->name, st->ctx->coll);
    *out = bson_new();
    BSON_APPEND_UTF8(*out, "ns", ns);
    bson_t *o = *out;
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    BSON_APPEND_UTF8(o, "host", host);
    BSON_APPEND_DATE_TIME(o, "localTime", q_now_ms());
    q_coll *c = q_coll_find(db, st->ctx->coll);
    if ((s->storage || s->count) && !c) {
        bson_destroy(o);
        *out = NULL;
        return q_err(err, MD_ERROR, MD_CODE_NAMESPACE_NOT_FOUND, "Unable to retrieve %s in "
                     "$collStats stage :: caused by :: Collection [%s] not found.",
                     s->storage ? "storageStats" : "count", ns);
    }
    if (s->storage) {
        bson_t cmd = BSON_INITIALIZER, r = BSON_INITIALIZER, ss;
        bson_iter_t it;
        BSON_APPEND_UTF8(&cmd, "collStats", st->ctx->coll);
        bson_concat(&cmd, &s->storage_opts);
        int rc = q_cmd_coll_stats(db, &cmd, &r, err);
        if (rc == 0) {
            BSON_APPEND_DOCUMENT_BEGIN(o, "storageStats", &ss);
            bson_iter_init(&it, &r);
            while (bson_iter_next(&it))
                if (strcmp(bson_iter_key(&it), "ns") && strcmp(bson_iter_key(&it), "ok"))
                    bson_append_iter(&ss, NULL, 0, &it);
            bson_append_document_end(o, &ss);
        }
        bson_destroy(&cmd);
        bson_destroy(&r);
        if (rc) {
            bson_destroy(o);
            *out = NULL;
            return rc;
        }
    }
    if (s->count) {
        eng_rs_stats rs;
        q_coll_lock(db, c, false);
        q_coll_stats(c, &rs);
        q_coll_unlock(db, c);
        BSON_APPEND_INT64(o, "count", rs.count);
    }
    return 0;
}

static void stats_reset(agg_stage *st)
{
    st_stats *s = (st_stats *)st;
    s->done = false;
    s->pos = 0;
}

static void stats_destroy(agg_stage *st)
{
    bson_destroy(&((st_stats *)st)->storage_opts);
}

static const agg_stage_ops coll_stats_ops = {.name = "$collStats", .next = coll_stats_next,
                                             .reset = stats_reset, .destroy = stats_destroy};

int agg_parse_coll_stats(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out, md_error *err)
{
    bson_iter_t it;
    if (!BSON_ITER_HOLDS_DOCUMENT(spec))
        return q_err(err, MD_EINVAL, 40166, "$collStats must take a nested object but found: %s",
                     q_type_name(bson_iter_type(spec)));
    st_stats *s = agg_stage_alloc(sizeof *s, &coll_stats_ops, ctx, "$collStats", spec);
    bson_init(&s->storage_opts);
    bson_iter_recurse(spec, &it);
    int rc = 0;
    while (rc == 0 && bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (!BSON_ITER_HOLDS_DOCUMENT(&it) &&
            (!strcmp(k, "storageStats") || !strcmp(k, "count") || !strcmp(k, "latencyStats")))
            rc = q_err(err, MD_EINVAL, 40279, "%s argument must be an object, but got %s", k,
                       q_type_name(bson_iter_type(&it)));
        else if (!strcmp(k, "storageStats")) {
            bson_iter_t o;
            s->storage = true;
            bson_iter_recurse(&it, &o);
            while (bson_iter_next(&o))
                if (!strcmp(bson_iter_key(&o), "scale"))
                    bson_append_iter(&s->storage_opts, NULL, 0, &o);
        } else if (!strcmp(k, "count"))
            s->count = true;
        else if (!strcmp(k, "latencyStats"))
            rc = q_err(err, MD_EINVAL, MD_CODE_NOT_YET_IMPLEMENTED,
                       "$collStats latencyStats is not supported by minidoc (no latency "
                       "histograms are kept)");
        else
            rc = q_err(err, MD_EINVAL, 40168, "unrecognized option to $collStats: %s", k);
    }
    if (rc) {
        agg_stage_destroy(&s->base);
        return rc;
    }
    agg_list_push(out, &s->base);
    return 0;
}

/* ---- $indexStats -------------------------------------------------------------------------------- */

static int index_stats_next(agg_stage *st, bson_t **out, md_error *err)
{
    st_stats *s = (st_stats *)st;
    md_db *db = st->ctx->db;
    q_coll *c = q_coll_find(db, st->ctx->coll);
    if (!c || (size_t)s->pos >= c->nidx)
        return MD_NOTFOUND;
    q_index *ix = c->idx[s->pos++];
    bson_t acc;
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    *out = bson_new();
    BSON_APPEND_UTF8(*out, "name", ix->name);
    BSON_APPEND_DOCUMENT(*out, "key", &ix->key);
    BSON_APPEND_UTF8(*out, "host", host);
    BSON_APPEND_DOCUMENT_BEGIN(*out, "accesses", &acc);
    BSON_APPEND_INT64(&acc, "ops", Q_LOAD(ix->accesses));
    BSON_APPEND_DATE_TIME(&acc, "since", ix->since_ms);
    bson_append_document_end(*out, &acc);
    return 0;
}

static const agg_stage_ops index_stats_ops = {.name = "$indexStats", .next = index_stats_next,
                                              .reset = stats_reset, .destroy = stats_destroy};

int agg_parse_index_stats(agg_ctx *ctx, const bson_iter_t *spec, agg_list *out, md_error *err)
{
    bson_iter_t it;
    if (!BSON_ITER_HOLDS_DOCUMENT(spec) || (bson_iter_recurse(spec, &it), bson_iter_next(&it)))
        return q_err(err, MD_EINVAL, 28803,
                     "The $indexStats stage specification must be an empty object");
    st_stats *s = agg_stage_alloc(sizeof *s, &index_stats_ops, ctx, "$indexStats", spec);
    bson_init(&s->storage_opts);
    agg_list_push(out, &s->base);
    return 0;
}

bool agg_stage_is_source_like(agg_stage *s)
{
    return s->ops == &coll_stats_ops || s->ops == &index_stats_ops;
}
