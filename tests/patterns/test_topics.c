/*
 * test_topics.c -- 5.2 Topics (patterns/topics.c) on every engine with
 * capped record stores: the book's capped collection and {time: 1} index,
 * publish, the consumer's tailable + awaitData cursor (only tickers newer
 * than its start, in order, waiting for the next one), the IXSCAN the
 * time index gives a plain query, and the "topics" scenario's publishers
 * and listeners from several threads, with a check that notices a lost,
 * duplicated or reordered ticker.
 */
#include <pthread.h>
#include <time.h>

#include "pt_sim.h"
#include "pt_test_util.h"

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static double price_of(const bson_t *doc)
{
    bson_iter_t it;
    cr_assert(bson_iter_init_find(&it, doc, "price") && BSON_ITER_HOLDS_DOUBLE(&it),
              "price is a number (the publisher's, not the schema's string)");
    return bson_iter_double(&it);
}

Test(pt_topics, create_is_the_books_capped_collection_and_index)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        cr_assert_eq(pt_topics_create(t.db, &err), 0, "[%s] %s", t.engine, err.message);
        bson_t *r = PTT_OK(&t, "{\"collStats\": \"ticker\"}");
        bson_iter_t it;
        cr_assert(ptt_find(r, "capped", &it) && bson_iter_as_bool(&it), "[%s]", t.engine);
        cr_assert_eq(ptt_i64(r, "max"), 100000);
        cr_assert_eq(ptt_i64(r, "maxSize"), 100096, "100000 rounded up to 256s");
        cr_assert_eq(ptt_i64(r, "nindexes"), 2);
        cr_assert(ptt_has(r, "indexSizes.time_1"));
        bson_destroy(r);
        /* the time index serves a plain (not tailable) query on time */
        bson_t *ex = ptt_explain(&t, "{\"find\": \"ticker\", \"filter\": {\"time\": {\"$gte\": "
                                     "{\"$date\": 0}}}}");
        bson_t ix;
        cr_assert(ptt_plan_stage(ex, "IXSCAN", &ix), "[%s] no IXSCAN", t.engine);
        cr_assert_str_eq(ptt_str(&ix, "indexName"), "time_1");
        bson_destroy(&ix);
        bson_destroy(ex);
        /* creating it twice is the shell's error */
        cr_assert_neq(pt_topics_create(t.db, &err), 0);
        cr_assert_eq(err.code, 48);
    }
}

Test(pt_topics, subscriber_gets_newer_tickers_in_order)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        cr_assert_eq(pt_topics_create(t.db, &err), 0, "%s", err.message);
        cr_assert_eq(pt_topics_publish(t.db, "OLD", 1.0, &err), 0, "%s", err.message);
        ptt_sleep_ms(5);
        int64_t since = pt_now_ms();
        md_cursor *cur = pt_topics_subscribe(t.db, since, 50);
        const bson_t *doc;
        cr_assert(!md_cursor_next(cur, &doc), "[%s] the old ticker is not sent", t.engine);
        cr_assert(md_cursor_more(cur), "[%s] the subscription stays open", t.engine);
        for (int i = 0; i < 5; i++)
            cr_assert_eq(pt_topics_publish(t.db, "PIP", 10.0 + i, &err), 0, "%s", err.message);
        for (int i = 0; i < 5; i++) {
            cr_assert(md_cursor_next(cur, &doc), "[%s] ticker %d", t.engine, i);
            cr_assert_str_eq(ptt_str(doc, "ticker"), "PIP");
            cr_assert_eq(price_of(doc), 10.0 + i, "[%s] in publishing order", t.engine);
            bson_iter_t it;
            cr_assert(bson_iter_init_find(&it, doc, "time") && BSON_ITER_HOLDS_DATE_TIME(&it));
            cr_assert(bson_iter_date_time(&it) >= since);
        }
        /* nothing new: md_cursor_next waits maxAwaitTimeMS, the cursor stays */
        int64_t t0 = mono_ms();
        cr_assert(!md_cursor_next(cur, &doc));
        cr_assert(mono_ms() - t0 >= 40, "[%s] awaitData waited", t.engine);
        cr_assert(md_cursor_more(cur) && !md_cursor_error(cur, NULL));
        md_cursor_destroy(cur);
    }
}

/* The simulator's listener starts at the oldest ticker still in the ring,
 * and after the ring wraps, at the oldest one left. */
Test(pt_topics, listener_starts_at_the_oldest_ticker_in_the_ring)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        cr_assert_eq(pt_topics_create(t.db, &err), 0, "%s", err.message);
        for (int i = 0; i < 3; i++)
            cr_assert_eq(pt_topics_publish(t.db, "PIP", (double)i, &err), 0, "%s", err.message);
        md_cursor *cur = pt_topics_listen(t.db, 50);
        const bson_t *doc;
        cr_assert(md_cursor_next(cur, &doc), "[%s] an existing ticker at once", t.engine);
        cr_assert_eq(price_of(doc), 0.0, "[%s] the oldest first", t.engine);
        md_cursor_destroy(cur);
        /* 100,000 bytes hold far fewer than 5,000 tickers: the first three go */
        for (int i = 0; i < 5000; i++)
            cr_assert_eq(pt_topics_publish(t.db, "PIP", 100.0 + i, &err), 0, "%s",
                         err.message);
        bson_t *first = PTT_OK(&t, "{\"find\": \"ticker\", \"limit\": 1}");
        bson_iter_t it;
        cr_assert(ptt_find(first, "cursor.firstBatch.0.price", &it));
        double oldest = bson_iter_double(&it);
        bson_destroy(first);
        cr_assert(oldest > 100.0, "[%s] the ring wrapped", t.engine);
        cur = pt_topics_listen(t.db, 50);
        cr_assert(md_cursor_next(cur, &doc), "[%s]", t.engine);
        cr_assert_eq(price_of(doc), oldest, "[%s] the oldest left", t.engine);
        cr_assert(md_cursor_next(cur, &doc) && price_of(doc) == oldest + 1.0,
                  "[%s] then in order", t.engine);
        md_cursor_destroy(cur);
    }
}

typedef struct pub_arg {
    md_db *db;
    int n;
} pub_arg;

static void *publisher(void *arg)
{
    pub_arg *p = arg;
    for (int i = 0; i < p->n; i++) {
        md_error err;
        ptt_sleep_ms(2);
        cr_assert_eq(pt_topics_publish(p->db, "PIP", (double)i, &err), 0, "%s", err.message);
    }
    return NULL;
}

/* The book's consumer loop (hasNext called, erratum 8) against a publisher
 * thread: every ticker arrives once, in order, through several wraps of a
 * ring that holds far fewer. */
Test(pt_topics, consumer_follows_a_publisher_through_wraps)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        cr_assert_eq(pt_topics_create(t.db, &err), 0, "%s", err.message);
        bson_destroy(PTT_OK(&t, "{\"convertToCapped\": \"ticker\", \"size\": 4096}"));
        cr_assert_eq(pt_topics_publish(t.db, "START", -1.0, &err), 0, "%s", err.message);
        md_cursor *cur = pt_topics_subscribe(t.db, 0, 200);
        const bson_t *doc;
        cr_assert(md_cursor_next(cur, &doc));
        pub_arg p = {t.db, 300};
        pthread_t th;
        pthread_create(&th, NULL, publisher, &p);
        int next = 0;
        int64_t t0 = mono_ms();
        while (next < p.n && md_cursor_more(cur) && mono_ms() - t0 < 10000) {
            while (md_cursor_next(cur, &doc)) {
                cr_assert_eq(price_of(doc), (double)next, "[%s] got %g, want %d", t.engine,
                             price_of(doc), next);
                next++;
            }
        }
        pthread_join(th, NULL);
        md_error e;
        cr_assert(!md_cursor_error(cur, &e), "[%s] %s", t.engine, e.message);
        cr_assert_eq(next, p.n, "[%s] %d of %d tickers", t.engine, next, p.n);
        md_cursor_destroy(cur);
        cr_assert(ptt_count(&t, "ticker", "{}") < p.n, "[%s] the ring wrapped", t.engine);
    }
}

static const pt_scenario *topics_scenario(void)
{
    cr_assert_eq(pt_pattern_topics.nscenarios, 1);
    cr_assert_str_eq(pt_pattern_topics.book_winner, "tie");
    const pt_scenario *sc = pt_pattern_topics.scenarios[0];
    cr_assert_str_eq(sc->name, "topics");
    cr_assert_eq(sc->nops, 2);
    cr_assert_str_eq(sc->ops[0].name, "publish_to_topics");
    cr_assert_str_eq(sc->ops[1].name, "fetch_from_topics");
    cr_assert_eq(sc->ops[0].users, 1000);
    cr_assert_eq(sc->ops[1].users, 40);
    return sc;
}

typedef struct listen_arg {
    const pt_op *op;
    pt_listener l;
    pt_hist gaps;
    int rc;
    char msg[256];
} listen_arg;

static void *listener(void *arg)
{
    listen_arg *a = arg;
    md_error err;
    a->rc = a->op->listen(&a->l, &err);
    if (a->rc)
        snprintf(a->msg, sizeof a->msg, "%.200s", err.message);
    return NULL;
}

/* The scenario's publishers (8 threads) and four of its listeners at once;
 * the ring wraps (3000 tickers of about 90 bytes in 100000 bytes).  Every
 * ticker a listener reports is new to it and one of the run's; each gap
 * between two of them is one sample. */
Test(pt_topics, scenario_publishers_and_listeners_at_once)
{
    const pt_scenario *sc = topics_scenario();
    cr_assert(sc->ops[1].listen && !sc->ops[1].run, "fetch_from_topics is the custom execution");
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        void *state = NULL;
        pt_setup_args a = {.users = 3000, .quick = true};
        cr_assert_eq(sc->setup(t.db, &a, &state, &err), 0, "%s", err.message);
        listen_arg la[4];
        pthread_t th[4];
        int64_t until = (mono_ms() + 700) * 1000000;
        for (int i = 0; i < 4; i++) {
            la[i] = (listen_arg){.op = &sc->ops[1]};
            pt_hist_init(&la[i].gaps);
            la[i].l = (pt_listener){.db = t.db, .state = state, .id = i, .until_ns = until,
                                    .rec = &la[i].gaps};
            cr_assert_eq(pthread_create(&th[i], NULL, listener, &la[i]), 0);
        }
        ptt_sleep_ms(50);
        char msg[256];
        cr_assert_eq(ptt_run_op(t.db, state, &sc->ops[0], 8, 3000, msg), 0, "[%s] %s", t.engine,
                     msg);
        int64_t firsts = 0, gaps = 0;
        for (int i = 0; i < 4; i++) {
            pthread_join(th[i], NULL);
            cr_assert_eq(la[i].rc, 0, "[%s] listener %d: %s", t.engine, i, la[i].msg);
            cr_assert_gt(la[i].l.gaps, 0, "[%s] listener %d heard nothing", t.engine, i);
            cr_assert_eq(la[i].gaps.count, la[i].l.gaps);
            firsts++;
            gaps += la[i].l.gaps;
        }
        cr_assert_eq(pt_topics_published(state), 3000);
        cr_assert_eq(pt_topics_received(state), firsts + gaps,
                     "[%s] every ticker reported once: the first starts the clock", t.engine);
        cr_assert_leq(pt_topics_received(state), 4 * 3000, "[%s] nothing heard twice",
                      t.engine);
        cr_assert_eq(sc->check(t.db, state, &err), 0, "[%s] check: %s", t.engine, err.message);
        int64_t kept = ptt_count(&t, "ticker", "{}");
        cr_assert(kept > 0 && kept < 3000, "[%s] %lld kept", t.engine, (long long)kept);
        pt_scenario_destroy(sc, state);
    }
}

/* Empty the ring and insert back the tickers matching filter (JSON), in
 * natural order or reversed. */
static void rebuild(ptt_db *t, const char *filter, bool reverse)
{
    bson_t *all = PTT_OK(t, "{\"find\": \"ticker\", \"filter\": %s, \"batchSize\": 1000}", filter);
    bson_t *docs[64];
    int n = 0;
    bson_iter_t it, arr;
    cr_assert(ptt_find(all, "cursor.firstBatch", &it));
    bson_iter_recurse(&it, &arr);
    while (bson_iter_next(&arr) && n < 64) {
        const uint8_t *data;
        uint32_t len;
        bson_iter_document(&arr, &len, &data);
        docs[n++] = bson_new_from_data(data, len);
    }
    bson_destroy(all);
    bson_destroy(PTT_OK(t, "{\"emptycapped\": \"ticker\"}"));
    md_collection *c = md_db_get_collection(t->db, "ticker");
    for (int i = 0; i < n; i++) {
        md_error err;
        bson_t *d = docs[reverse ? n - 1 - i : i];
        cr_assert_eq(md_collection_insert_one(c, d, NULL, NULL, &err), 0, "%s", err.message);
        bson_destroy(d);
    }
    md_collection_destroy(c);
}

Test(pt_topics, check_notices_lost_duplicated_or_reordered_tickers)
{
    const pt_scenario *sc = topics_scenario();
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        void *state = NULL;
        pt_setup_args a = {.users = 40, .quick = true};
        char msg[256];
        cr_assert_eq(sc->setup(t.db, &a, &state, &err), 0, "%s", err.message);
        cr_assert_eq(ptt_run_op(t.db, state, &sc->ops[0], 1, 10, msg), 0, "%s", msg);
        cr_assert_eq(sc->check(t.db, state, &err), 0, "[%s] %s", t.engine, err.message);
        /* the same tickers, rebuilt in order, still pass */
        rebuild(&t, "{}", false);
        cr_assert_eq(sc->check(t.db, state, &err), 0, "[%s] %s", t.engine, err.message);
        /* reordered */
        rebuild(&t, "{}", true);
        cr_assert_neq(sc->check(t.db, state, &err), 0, "[%s] reordered passed", t.engine);
        cr_assert(strstr(err.message, "reordered") != NULL, "%s", err.message);
        /* lost: user 7 gone while older ones stay (reversing the reversed
         * ring puts it back in order) */
        rebuild(&t, "{\"user\": {\"$ne\": 7}}", true);
        cr_assert_neq(sc->check(t.db, state, &err), 0, "[%s] a lost ticker passed", t.engine);
        cr_assert(strstr(err.message, "lost") != NULL, "%s", err.message);
        /* the oldest ones gone is what the ring does: fine */
        rebuild(&t, "{\"user\": {\"$gte\": 8}}", false);
        cr_assert_eq(sc->check(t.db, state, &err), 0, "[%s] %s", t.engine, err.message);
        /* a duplicate */
        bson_destroy(PTT_OK(&t, "{\"insert\": \"ticker\", \"documents\": [{\"time\": {\"$date\": "
                                "1}, \"ticker\": \"PIP\", \"price\": 1.0, \"user\": 9, "
                                "\"client\": 0}]}"));
        cr_assert_neq(sc->check(t.db, state, &err), 0, "[%s] a duplicate passed", t.engine);
        cr_assert(strstr(err.message, "twice") != NULL, "%s", err.message);
        /* a stranger */
        rebuild(&t, "{\"user\": {\"$gte\": 100}}", false);
        bson_destroy(PTT_OK(&t, "{\"insert\": \"ticker\", \"documents\": [{\"time\": {\"$date\": "
                                "1}, \"ticker\": \"PIP\", \"price\": 1.0, \"user\": 30, "
                                "\"client\": 0}]}"));
        cr_assert_neq(sc->check(t.db, state, &err), 0, "[%s] a stranger passed", t.engine);
        cr_assert(strstr(err.message, "not published") != NULL, "%s", err.message);
        pt_scenario_destroy(sc, state);
    }
}
