/*
 * q_ttl.c -- TTL indexes: the monitor that deletes documents whose indexed
 * date (the earliest one, for an array of dates) is more than
 * expireAfterSeconds in the past, through the ordinary delete path (so
 * every index stays exact and the deletes count in serverStatus).
 *
 * MongoDB runs the TTLMonitor in a thread every ttlMonitorSleepSecs (60).
 * minidoc has no background thread: the first command that arrives after
 * the period has passed runs a pass first (q_ttl_maybe), and the command
 * {ttlMonitor: 1} runs one at once (for tests and for callers that want
 * deterministic expiry).  The period is the open option
 * ttlMonitorSleepSecs.  Only single-field TTL indexes expire documents,
 * and only documents whose field holds dates, as in MongoDB.
 */
#include <stdlib.h>
#include <string.h>

#include "q_int.h"

/* Delete what TTL index ix has expired as of now_ms. */
static int ttl_index(md_db *db, q_coll *c, q_index *ix, int64_t now_ms, int64_t *deleted,
                     md_error *err)
{
    bson_iter_t it;
    bson_t f = BSON_INITIALIZER, lt;
    q_matcher *m = NULL;
    eng_rid *rids = NULL;
    size_t n = 0;
    if (bson_count_keys(&ix->key) != 1 || !bson_iter_init(&it, &ix->key) || !bson_iter_next(&it))
        return 0;
    BSON_APPEND_DOCUMENT_BEGIN(&f, bson_iter_key(&it), &lt);
    BSON_APPEND_DATE_TIME(&lt, "$lt", now_ms - ix->expire_secs * 1000);
    bson_append_document_end(&f, &lt);
    int rc = q_matcher_new(&f, &m, err);
    if (rc)
        goto out;
    q_coll_lock(db, c, true);
    rc = q_scan_collect(db, c, &f, m, 0, &rids, &n, err);
    q_yield y = {0};
    for (size_t i = 0; !rc && i < n; i++) {
        bool del = false;
        q_yield_point(db, &y);
        rc = q_write_delete(db, c, rids[i], m, false, &del, NULL, err);
        *deleted += del;
    }
    q_coll_unlock(db, c);
out:
    free(rids);
    q_matcher_destroy(m);
    bson_destroy(&f);
    return rc;
}

int q_ttl_pass(md_db *db, int64_t now_ms, int64_t *deleted, md_error *err)
{
    int rc = 0;
    *deleted = 0;
    Q_SET(db->ttl_last_ms, now_ms);
    /* capped collections are skipped, as MongoDB 3.x's TTL monitor does:
     * their documents cannot be deleted, the ring ages them out */
    for (q_coll *c = db->colls; c && !rc; c = c->next)
        for (size_t i = 0; i < c->nidx && !rc && !c->capped; i++)
            if (c->idx[i]->expire_secs >= 0)
                rc = ttl_index(db, c, c->idx[i], now_ms, deleted, err);
    return rc;
}

void q_ttl_maybe(md_db *db, int64_t now_ms)
{
    int64_t n;
    md_error err;
    int64_t last = Q_LOAD(db->ttl_last_ms);
    if (now_ms - last < db->ttl_sleep_ms)
        return;
    /* one thread runs the pass; the others go on with their commands */
    if (!__atomic_compare_exchange_n(&db->ttl_last_ms, &last, now_ms, false, __ATOMIC_RELAXED,
                                     __ATOMIC_RELAXED))
        return;
    md_error_clear(&err);
    if (q_write_allowed(db, &err) != 0)
        return;
    (void)q_ttl_pass(db, now_ms, &n, &err); /* a failed pass is retried next period */
}

/* {ttlMonitor: 1} -> {deleted: n}: one pass now. */
int q_cmd_ttl_monitor(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err)
{
    int64_t n = 0;
    (void)cmd;
    int rc = q_write_allowed(db, err);
    if (!rc)
        rc = q_ttl_pass(db, q_now_ms(), &n, err);
    if (!rc)
        q_append_number(reply, "deleted", n);
    return rc;
}
