/*
 * test_queue.c -- 5.1 Queue (patterns/queue.c) on every engine: each
 * operation's effect, the book's indexes and the plans the book shows for
 * them (IXSCAN over startTime_1_createdOn_1 and
 * startTime_1_priority_-1_createdOn_1, no SORT stage), and the queue_fifo
 * scenario from several threads: no job handed to two fetchers, none lost,
 * and a check that notices when that is not so.
 */
#include <time.h>

#include "pt_test_util.h"

static bool is_date(const bson_t *doc, const char *field)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, doc, field) && BSON_ITER_HOLDS_DATE_TIME(&it);
}

static bool is_null(const bson_t *doc, const char *field)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, doc, field) && BSON_ITER_HOLDS_NULL(&it);
}

static int32_t i32(const bson_t *doc, const char *field)
{
    bson_iter_t it;
    cr_assert(bson_iter_init_find(&it, doc, field) && BSON_ITER_HOLDS_INT32(&it));
    return bson_iter_int32(&it);
}

static const bson_oid_t *oid_of(const bson_t *doc)
{
    bson_iter_t it;
    cr_assert(bson_iter_init_find(&it, doc, "_id") && BSON_ITER_HOLDS_OID(&it));
    return bson_iter_oid(&it);
}

static void publish(ptt_db *t, int32_t priority, bson_oid_t *id)
{
    md_error err;
    bson_t *payload = BCON_NEW("type", BCON_UTF8("convertImage"), "source",
                               BCON_UTF8("/images/image.png"), "output",
                               BCON_UTF8("/images/image.jpg"));
    int rc = pt_queue_publish(t->db, priority, payload, id, &err);
    cr_assert_eq(rc, 0, "[%s] publish: %s", t->engine, err.message);
    bson_destroy(payload);
}

Test(pt_queue, operations_do_what_the_book_says)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        bson_oid_t a, b, c;
        cr_assert_eq(pt_queue_create_indexes(t.db, &err), 0, "%s", err.message);
        publish(&t, 1, &a);
        ptt_sleep_ms(3);
        publish(&t, 5, &b);
        ptt_sleep_ms(3);
        publish(&t, 3, &c);

        /* the stored job is the book's Ex 2 document */
        bson_t *r = PTT_OK(&t, "{\"find\": \"queue\", \"filter\": {\"priority\": 1}}");
        bson_iter_t f;
        cr_assert(ptt_find(r, "cursor.firstBatch.0.startTime", &f) && BSON_ITER_HOLDS_NULL(&f));
        cr_assert(ptt_find(r, "cursor.firstBatch.0.createdOn", &f) &&
                  BSON_ITER_HOLDS_DATE_TIME(&f));
        cr_assert_str_eq(ptt_str(r, "cursor.firstBatch.0.payload.type"), "convertImage");
        bson_destroy(r);
        cr_assert_eq(ptt_count(&t, "queue", "{\"startTime\": null, \"endTime\": null}"), 3);

        /* FIFO: the oldest, returned after the update (new: true) */
        bson_t job;
        cr_assert_eq(pt_queue_fetch_fifo(t.db, &job, &err), 0, "%s", err.message);
        cr_assert(bson_oid_equal(oid_of(&job), &a), "[%s] FIFO took another job", t.engine);
        cr_assert(is_date(&job, "startTime"), "[%s] new: true returns startTime set", t.engine);
        cr_assert(is_null(&job, "endTime"));
        bson_destroy(&job);

        /* priority: the highest first */
        cr_assert_eq(pt_queue_fetch_priority(t.db, &job, &err), 0, "%s", err.message);
        cr_assert(bson_oid_equal(oid_of(&job), &b), "[%s] priority took another job", t.engine);
        cr_assert_eq(i32(&job, "priority"), 5);
        cr_assert(is_date(&job, "startTime"));
        bson_value_t id;
        bson_iter_t it;
        cr_assert(bson_iter_init_find(&it, &job, "_id"));
        bson_value_copy(bson_iter_value(&it), &id);
        bson_destroy(&job);

        /* finish sets endTime on that job only */
        cr_assert_eq(pt_queue_finish(t.db, &id, &err), 0, "%s", err.message);
        bson_value_destroy(&id);
        cr_assert_eq(ptt_count(&t, "queue", "{\"endTime\": {\"$gt\": {\"$date\": 0}}}"), 1);
        cr_assert_eq(ptt_count(&t, "queue", "{\"priority\": 5, \"endTime\": {\"$gt\": "
                                            "{\"$date\": 0}}}"), 1);
        cr_assert_eq(ptt_count(&t, "queue", "{\"startTime\": null}"), 1);

        /* the last one, then an empty queue */
        cr_assert_eq(pt_queue_fetch_fifo(t.db, &job, &err), 0);
        cr_assert(bson_oid_equal(oid_of(&job), &c));
        bson_destroy(&job);
        cr_assert_eq(pt_queue_fetch_fifo(t.db, &job, &err), MD_NOTFOUND);
        cr_assert(bson_empty(&job));
        bson_destroy(&job);
        cr_assert_eq(pt_queue_fetch_priority(t.db, &job, &err), MD_NOTFOUND);
        bson_destroy(&job);

        /* finishing a job that does not exist */
        bson_value_t none = {.value_type = BSON_TYPE_INT32, .value.v_int32 = 42};
        cr_assert_eq(pt_queue_finish(t.db, &none, &err), MD_NOTFOUND);
    }
}

/* The index named `name` in listIndexes of `coll` (caller destroys), or NULL. */
static bson_t *index_spec(ptt_db *t, const char *coll, const char *name)
{
    bson_t *r = PTT_OK(t, "{\"listIndexes\": \"%s\"}", coll);
    bson_iter_t it, arr;
    bson_t *found = NULL;
    cr_assert(ptt_find(r, "cursor.firstBatch", &it) && bson_iter_recurse(&it, &arr));
    while (!found && bson_iter_next(&arr)) {
        const uint8_t *data;
        uint32_t len;
        bson_t spec;
        bson_iter_document(&arr, &len, &data);
        bson_init_static(&spec, data, len);
        if (strcmp(ptt_str(&spec, "name"), name) == 0)
            found = bson_copy(&spec);
    }
    bson_destroy(r);
    return found;
}

static void assert_key(ptt_db *t, const bson_t *spec, const char *want_json)
{
    bson_iter_t it;
    cr_assert(ptt_find(spec, "key", &it) && BSON_ITER_HOLDS_DOCUMENT(&it));
    const uint8_t *data;
    uint32_t len;
    bson_t key;
    bson_iter_document(&it, &len, &data);
    bson_init_static(&key, data, len);
    char *got = bson_as_relaxed_extended_json(&key, NULL);
    cr_assert_str_eq(got, want_json, "[%s] key %s, want %s", t->engine, got, want_json);
    bson_free(got);
}

Test(pt_queue, indexes_are_the_books)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        cr_assert_eq(pt_queue_create_indexes(t.db, &err), 0, "%s", err.message);
        bson_t *s = index_spec(&t, "queue", "startTime_1_createdOn_1");
        cr_assert_not_null(s, "[%s] no startTime_1_createdOn_1", t.engine);
        assert_key(&t, s, "{ \"startTime\" : 1, \"createdOn\" : 1 }");
        bson_destroy(s);
        s = index_spec(&t, "queue", "startTime_1_priority_-1_createdOn_1");
        cr_assert_not_null(s, "[%s] no startTime_1_priority_-1_createdOn_1", t.engine);
        assert_key(&t, s, "{ \"startTime\" : 1, \"priority\" : -1, \"createdOn\" : 1 }");
        bson_destroy(s);
        s = index_spec(&t, "expire", "endTime_1");
        cr_assert_not_null(s, "[%s] no TTL index endTime_1 on expire", t.engine);
        assert_key(&t, s, "{ \"endTime\" : 1 }");
        cr_assert_eq(ptt_i64(s, "expireAfterSeconds"), 86400);
        bson_destroy(s);
        /* creating them again is a no-op, as ensureIndex is */
        cr_assert_eq(pt_queue_create_indexes(t.db, &err), 0, "%s", err.message);
    }
}

/* The winning plan of `inner` reads index `index` in IXSCAN form and sorts
 * nothing in memory. */
static void assert_ixscan(ptt_db *t, const char *inner, const char *index)
{
    bson_t *r = ptt_explain(t, inner);
    bson_t ix, sort;
    char *json = bson_as_relaxed_extended_json(r, NULL);
    cr_assert(ptt_plan_stage(r, "IXSCAN", &ix), "[%s] no IXSCAN for %s: %s", t->engine, inner,
              json);
    cr_assert_str_eq(ptt_str(&ix, "indexName"), index, "[%s] %s: %s", t->engine, inner, json);
    cr_assert_str_eq(ptt_str(&ix, "indexBounds.startTime.0"), "[null, null]", "%s", json);
    bson_destroy(&ix);
    cr_assert(!ptt_plan_stage(r, "SORT", &sort), "[%s] %s sorts in memory: %s", t->engine, inner,
              json);
    bson_free(json);
    bson_destroy(r);
}

Test(pt_queue, explain_shows_the_books_index_scans)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        cr_assert_eq(pt_queue_create_indexes(t.db, &err), 0, "%s", err.message);
        for (int i = 0; i < 40; i++)
            publish(&t, i % 7, NULL);
        for (int i = 0; i < 10; i++) {
            bson_t job;
            cr_assert_eq(pt_queue_fetch_fifo(t.db, &job, &err), 0);
            bson_destroy(&job);
        }
        /* Ex 7 and Ex 9 */
        assert_ixscan(&t, "{\"find\": \"queue\", \"filter\": {\"startTime\": null}, "
                          "\"sort\": {\"createdOn\": 1}}", "startTime_1_createdOn_1");
        assert_ixscan(&t, "{\"find\": \"queue\", \"filter\": {\"startTime\": null}, "
                          "\"sort\": {\"priority\": -1, \"createdOn\": 1}}",
                      "startTime_1_priority_-1_createdOn_1");
        /* the findAndModify commands themselves */
        assert_ixscan(&t, "{\"findAndModify\": \"queue\", \"query\": {\"startTime\": null}, "
                          "\"sort\": {\"createdOn\": 1}, \"update\": {\"$set\": {\"startTime\": "
                          "{\"$date\": 0}}}, \"new\": true}", "startTime_1_createdOn_1");
        assert_ixscan(&t, "{\"findAndModify\": \"queue\", \"query\": {\"startTime\": null}, "
                          "\"sort\": {\"priority\": -1, \"createdOn\": 1}, \"update\": {\"$set\": "
                          "{\"startTime\": {\"$date\": 0}}}, \"new\": true}",
                      "startTime_1_priority_-1_createdOn_1");
        /* explain wrote nothing */
        cr_assert_eq(ptt_count(&t, "queue", "{\"startTime\": null}"), 30);
    }
}

static const pt_scenario *queue_scenario(void)
{
    cr_assert_eq(pt_pattern_queue.nscenarios, 1);
    const pt_scenario *sc = pt_pattern_queue.scenarios[0];
    cr_assert_str_eq(sc->name, "queue_fifo");
    cr_assert_eq(sc->nops, 2);
    cr_assert_str_eq(sc->ops[0].name, "publish_to_queues");
    cr_assert_str_eq(sc->ops[1].name, "fetch_from_queue_by_fifo");
    cr_assert_eq(sc->ops[0].users, 1000);
    cr_assert_eq(sc->ops[1].users, 300);
    return sc;
}

Test(pt_queue, concurrent_fetchers_take_every_job_exactly_once)
{
    const pt_scenario *sc = queue_scenario();
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        void *state = NULL;
        pt_setup_args a = {.users = 800, .quick = true};
        cr_assert_eq(sc->setup(t.db, &a, &state, &err), 0, "%s", err.message);
        char msg[256];
        int n = ptt_run_op(t.db, state, &sc->ops[0], 4, 400, msg);
        cr_assert_eq(n, 0, "[%s] publish: %s", t.engine, msg);
        cr_assert_eq(ptt_count(&t, "queue", "{}"), 400);
        /* 8 fetchers race for 400 jobs */
        n = ptt_run_op(t.db, state, &sc->ops[1], 8, 400, msg);
        cr_assert_eq(n, 0, "[%s] fetch: %s", t.engine, msg);
        cr_assert_eq(pt_queue_jobs_fetched(state), 400, "[%s]", t.engine);
        cr_assert_eq(pt_queue_empty_fetches(state), 0, "[%s]", t.engine);
        cr_assert_eq(sc->check(t.db, state, &err), 0, "[%s] check: %s", t.engine, err.message);
        cr_assert_eq(ptt_count(&t, "queue", "{\"startTime\": {\"$date\": 0}}"), 0);
        /* the simulator's done() matched nothing: every endTime is Date(0) */
        cr_assert_eq(ptt_count(&t, "queue", "{\"endTime\": {\"$date\": 0}}"), 400);
        /* the queue is empty now: fetchers count that and do not fail */
        n = ptt_run_op(t.db, state, &sc->ops[1], 4, 20, msg);
        cr_assert_eq(n, 0, "[%s] %s", t.engine, msg);
        cr_assert_eq(pt_queue_empty_fetches(state), 20);
        pt_scenario_destroy(sc, state);
    }
}

Test(pt_queue, scenario_publishers_and_fetchers_at_once)
{
    const pt_scenario *sc = queue_scenario();
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        void *state = NULL;
        pt_setup_args a = {.users = 1300, .quick = true};
        cr_assert_eq(sc->setup(t.db, &a, &state, &err), 0, "%s", err.message);
        const pt_op *ops[2] = {&sc->ops[0], &sc->ops[1]};
        int64_t users[2] = {1000, 300};
        char msg[256];
        int n = ptt_run_ops(t.db, state, 2, ops, users, 8, msg);
        cr_assert_eq(n, 0, "[%s] %s", t.engine, msg);
        int64_t fetched = pt_queue_jobs_fetched(state);
        cr_assert_eq(fetched + pt_queue_empty_fetches(state), 300);
        cr_assert_eq(sc->check(t.db, state, &err), 0, "[%s] check: %s", t.engine, err.message);
        cr_assert_eq(ptt_count(&t, "queue", "{}"), 1000);
        cr_assert_eq(ptt_count(&t, "queue", "{\"startTime\": {\"$date\": 0}}"), 1000 - fetched);
        pt_scenario_destroy(sc, state);
    }
}

/* The scenario runs the simulator's Queue: its four single indexes (none
 * with both startTime and createdOn), Date(0) for "not yet", one jobId
 * for every job, and a done() that matches nothing. */
Test(pt_queue, scenario_uses_the_simulators_queue)
{
    const pt_scenario *sc = queue_scenario();
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        void *state = NULL;
        pt_setup_args a = {.users = 20, .quick = true};
        cr_assert_eq(sc->setup(t.db, &a, &state, &err), 0, "%s", err.message);
        bson_t *r = PTT_OK(&t, "{\"listIndexes\": \"queue\"}");
        char *json = bson_as_relaxed_extended_json(r, NULL);
        const char *names[] = {"startTime_1", "createdOn_1", "priority_-1_createdOn_1",
                               "jobId_1"};
        for (int i = 0; i < 4; i++)
            cr_assert(strstr(json, names[i]) != NULL, "[%s] no %s in %s", t.engine, names[i],
                      json);
        cr_assert(strstr(json, "startTime_1_createdOn_1") == NULL, "[%s] %s", t.engine, json);
        bson_free(json);
        bson_destroy(r);
        char msg[256];
        cr_assert_eq(ptt_run_op(t.db, state, &sc->ops[0], 1, 10, msg), 0, "%s", msg);
        cr_assert_eq(ptt_count(&t, "queue", "{\"startTime\": {\"$date\": 0}, \"jobId\": "
                                           "{\"$oid\": \"303030303030303030303030\"}}"),
                     10, "[%s] Date(0) and the one jobId", t.engine);
        cr_assert_eq(ptt_run_op(t.db, state, &sc->ops[1], 1, 4, msg), 0, "%s", msg);
        cr_assert_eq(pt_queue_jobs_fetched(state), 4);
        cr_assert_eq(ptt_count(&t, "queue", "{\"startTime\": {\"$gt\": {\"$date\": 0}}}"), 4);
        cr_assert_eq(ptt_count(&t, "queue", "{\"endTime\": {\"$date\": 0}}"), 10,
                     "[%s] done() changed nothing", t.engine);
        cr_assert_eq(sc->check(t.db, state, &err), 0, "[%s] %s", t.engine, err.message);
        pt_scenario_destroy(sc, state);
    }
}

Test(pt_queue, check_notices_a_lost_or_stray_job)
{
    const pt_scenario *sc = queue_scenario();
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        void *state = NULL;
        pt_setup_args a = {.users = 60, .quick = true};
        cr_assert_eq(sc->setup(t.db, &a, &state, &err), 0, "%s", err.message);
        char msg[256];
        cr_assert_eq(ptt_run_op(t.db, state, &sc->ops[0], 2, 50, msg), 0, "%s", msg);
        cr_assert_eq(ptt_run_op(t.db, state, &sc->ops[1], 2, 10, msg), 0, "%s", msg);
        cr_assert_eq(sc->check(t.db, state, &err), 0, "%s", err.message);
        /* a job started behind the fetchers' backs */
        bson_destroy(PTT_OK(&t, "{\"update\": \"queue\", \"updates\": [{\"q\": {\"startTime\": "
                                "{\"$date\": 0}}, \"u\": {\"$set\": {\"startTime\": {\"$date\": 5}}}}]}"));
        cr_assert_neq(sc->check(t.db, state, &err), 0, "[%s] a stray start passed", t.engine);
        cr_assert(strstr(err.message, "no fetcher") != NULL, "%s", err.message);
        bson_destroy(PTT_OK(&t, "{\"update\": \"queue\", \"updates\": [{\"q\": {\"startTime\": "
                                "{\"$date\": 5}}, \"u\": {\"$set\": {\"startTime\": {\"$date\": 0}}}}]}"));
        cr_assert_eq(sc->check(t.db, state, &err), 0, "%s", err.message);
        /* a job lost */
        bson_destroy(PTT_OK(&t, "{\"delete\": \"queue\", \"deletes\": [{\"q\": {\"startTime\": "
                                "{\"$date\": 0}}, \"limit\": 1}]}"));
        cr_assert_neq(sc->check(t.db, state, &err), 0, "[%s] a lost job passed", t.engine);
        cr_assert(strstr(err.message, "lost") != NULL, "%s", err.message);
        pt_scenario_destroy(sc, state);
    }
}
