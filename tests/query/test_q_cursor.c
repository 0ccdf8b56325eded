/*
 * test_q_cursor.c -- server-side cursors across commands, on every engine:
 * getMore batches, killCursors, and the idle timeout (cursorTimeoutMillis,
 * set with setParameter; checked lazily when the next command runs).
 */
#include <time.h>

#include "test_q_util.h"

static void insert_n(tdb *t, int n)
{
    for (int i = 0; i < n; i++)
        bson_destroy(t_cmd(t, NULL, "{\"insert\": \"c\", \"documents\": [{\"_id\": %d}]}", i));
}

static int64_t open_cursor(tdb *t)
{
    bson_t *r = t_cmd(t, NULL, "{\"find\": \"c\", \"sort\": {\"_id\": 1}, \"batchSize\": 2}");
    int64_t id = t_i64(r, "cursor.id");
    cr_assert_eq(t_len(r, "cursor.firstBatch"), 2);
    bson_destroy(r);
    cr_assert_neq(id, 0);
    return id;
}

Test(q_cursor, get_more_batches_then_exhausts)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        insert_n(&t, 5);
        int64_t id = open_cursor(&t);
        int rc;
        bson_t *r = t_cmd(&t, &rc, "{\"getMore\": {\"$numberLong\": \"%lld\"}, \"collection\": "
                          "\"c\", \"batchSize\": 2}", (long long)id);
        cr_assert_eq(rc, 0, "%s", t_json(r));
        cr_assert_eq(t_len(r, "cursor.nextBatch"), 2);
        cr_assert_eq(t_i64(r, "cursor.nextBatch.0._id"), 2);
        cr_assert_eq(t_i64(r, "cursor.id"), id);
        bson_destroy(r);
        r = t_cmd(&t, &rc, "{\"getMore\": {\"$numberLong\": \"%lld\"}, \"collection\": \"c\"}",
                  (long long)id);
        cr_assert_eq(t_len(r, "cursor.nextBatch"), 1);
        cr_assert_eq(t_i64(r, "cursor.id"), 0);
        bson_destroy(r);
        r = t_cmd(&t, &rc, "{\"getMore\": {\"$numberLong\": \"%lld\"}, \"collection\": \"c\"}",
                  (long long)id);
        cr_assert_eq(t_i64(r, "code"), 43, "%s", t_json(r));
        bson_destroy(r);
    }
}

Test(q_cursor, kill_cursors)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        insert_n(&t, 5);
        int64_t id = open_cursor(&t);
        bson_t *r = t_cmd(&t, NULL, "{\"killCursors\": \"c\", \"cursors\": [{\"$numberLong\": "
                          "\"%lld\"}]}", (long long)id);
        cr_assert_eq(t_len(r, "cursorsKilled"), 1, "%s", t_json(r));
        bson_destroy(r);
        r = t_cmd(&t, NULL, "{\"getMore\": {\"$numberLong\": \"%lld\"}, \"collection\": \"c\"}",
                  (long long)id);
        cr_assert_eq(t_i64(r, "code"), 43);
        bson_destroy(r);
    }
}

Test(q_cursor, idle_cursors_time_out)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        insert_n(&t, 5);
        bson_t *r = t_cmd(&t, NULL, "{\"setParameter\": 1, \"cursorTimeoutMillis\": 200}");
        cr_assert_eq(t_i64(r, "was"), 600000, "%s", t_json(r));
        bson_destroy(r);
        int64_t id = open_cursor(&t);
        /* used within the timeout: survives */
        t_sleep_ms(20);
        r = t_cmd(&t, NULL, "{\"getMore\": {\"$numberLong\": \"%lld\"}, \"collection\": \"c\", "
                  "\"batchSize\": 1}", (long long)id);
        cr_assert_eq(t_len(r, "cursor.nextBatch"), 1, "%s", t_json(r));
        bson_destroy(r);
        /* idle past the timeout: the next command reaps it */
        t_sleep_ms(450);
        r = t_cmd(&t, NULL, "{\"ping\": 1}");
        bson_destroy(r);
        r = t_cmd(&t, NULL, "{\"getMore\": {\"$numberLong\": \"%lld\"}, \"collection\": \"c\"}",
                  (long long)id);
        cr_assert_eq(t_i64(r, "code"), 43, "%s", t_json(r));
        bson_destroy(r);
        r = t_cmd(&t, NULL, "{\"serverStatus\": 1}");
        bson_destroy(r);
    }
}

/* The same limit given as an open option of md_db_open(). */
Test(q_cursor, timeout_from_open_option)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        md_db_close(t.db);
        md_error err;
        bson_t *o = t_open_opts(t.engine);
        BSON_APPEND_INT32(o, "cursorTimeoutMillis", 100);
        cr_assert_eq(md_db_open(t.dir, o, &t.db, &err), 0, "%s", err.message);
        bson_destroy(o);
        bson_t *r = t_cmd(&t, NULL, "{\"setParameter\": 1, \"cursorTimeoutMillis\": 100}");
        cr_assert_eq(t_i64(r, "was"), 100, "open option took effect: %s", t_json(r));
        bson_destroy(r);
        /* a bad value fails the open with BadValue */
        md_db_close(t.db);
        o = t_open_opts(t.engine);
        BSON_APPEND_INT32(o, "cursorTimeoutMillis", -1);
        cr_assert_lt(md_db_open(t.dir, o, &t.db, &err), 0);
        cr_assert_eq(err.code, MD_CODE_BAD_VALUE);
        bson_destroy(o);
        t_reopen(&t);
    }
}

Test(q_cursor, no_cursor_timeout_survives)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        insert_n(&t, 5);
        bson_destroy(t_cmd(&t, NULL, "{\"setParameter\": 1, \"cursorTimeoutMillis\": 50}"));
        bson_t *r = t_cmd(&t, NULL, "{\"find\": \"c\", \"batchSize\": 2, "
                          "\"noCursorTimeout\": true}");
        int64_t id = t_i64(r, "cursor.id");
        bson_destroy(r);
        t_sleep_ms(150);
        r = t_cmd(&t, NULL, "{\"getMore\": {\"$numberLong\": \"%lld\"}, \"collection\": \"c\"}",
                  (long long)id);
        cr_assert_eq(t_len(r, "cursor.nextBatch"), 3, "%s", t_json(r));
        bson_destroy(r);
    }
}

Test(q_cursor, set_parameter_errors)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        bson_t *r = t_cmd(&t, NULL, "{\"setParameter\": 1, \"cursorTimeoutMillis\": -5}");
        cr_assert_eq(t_i64(r, "code"), 2);
        bson_destroy(r);
        r = t_cmd(&t, NULL, "{\"setParameter\": 1, \"noSuchParameter\": 1}");
        cr_assert_eq(t_i64(r, "code"), 2);
        bson_destroy(r);
    }
}
