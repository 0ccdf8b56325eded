/*
 * topics.c -- 5.2 Topics: publish/subscribe over a capped collection.  A
 * publisher inserts into the ring; every subscriber follows it with a
 * tailable, awaitData cursor and sees each message (as long as it keeps up
 * with the ring: one that falls a whole ring behind gets CappedPositionLost).
 *
 * The book's operations (db "finance"; one md_db is one database, so the
 * collection name is what remains), through the public API only:
 *
 *   create      createCollection("ticker", {capped: true, size: 100000,
 *               max: 100000})                                      Ex 1
 *   index       ticker.ensureIndex({time: 1})
 *   publish     ticker.insert({time: new Date(), ticker: "PIP",
 *               price: 100 * Math.random()})                       Ex 2
 *   subscribe   ticker.find({time: {$gte: new Date()}})
 *                   .addOption(tailable).addOption(awaitData)      Ex 3
 *
 * Errata (digest section 7 item 8): the consumer's loop tests
 * `cursor.hasNext` without calling it; the corrected loop calls it, which
 * here is md_cursor_more() around md_cursor_next() (include/minidoc.h).  The
 * schema shows price as the string "4.45" while the publisher stores a
 * number; the publisher's number is kept.
 *
 * The scenario "topics" is the simulator's topic_simulation.js: 1000
 * publish_to_topics users per iteration insert one ticker each, and
 * fetch_from_topics is its custom execution (scenarios/topics.js): 40
 * listeners (10 per process), opened once, one iteration (its
 * initialDelay, 1000 ms) into the run, each a Topic.listen() -- find({})
 * tailable + awaitData, from the oldest ticker in the ring -- kept open for
 * the run's 25 iterations.  The simulator logged, on every 'data' event of
 * a listener, the time since that listener's previous one: the gap between
 * consecutive tickers, which a steady 1000 publishes per second makes
 * about 1 ms.  Its report divided every logged time by 1000, taking it for
 * microseconds (microtime.now(), as the other scenarios log), but these
 * were milliseconds (new Date()): the book's fetch row is a thousand times
 * too small -- "Mean 0.001" is a mean gap of 1 ms, "Max 0.323" a gap of
 * 323 ms -- and is shown here in milliseconds, corrected.  The book's
 * consumer, which subscribes from its own start on (Ex 3), is
 * pt_topics_subscribe, tested on its own.  For the checks, the scenario's
 * tickers carry two fields the book's do not, the publishing user's id and
 * client (the simulator published its own workObject payload too).
 *
 * The check: every ticker in the ring was published by the run, once; the
 * ring holds, for each client, that client's newest tickers with none
 * missing between them, in the order the client published them (a client
 * runs its users one after another, so that order is known; across clients
 * it is not); and every ticker a listener received is one of the run's,
 * each client's in that client's order.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "patterns.h"

#define TOPICS_COLL "ticker"
#define TOPICS_SIZE 100000
#define TOPICS_MAX 100000
#define TOPICS_AWAIT_MS 100

/* ---- operations ------------------------------------------------------------ */

/* A write (pt_write); cmd is consumed. */
static int run_command(md_db *db, bson_t *cmd, md_error *err)
{
    int rc = pt_write(db, cmd, NULL, err);
    bson_destroy(cmd);
    return rc;
}

/* createCollection("ticker", {capped: true, size: 100000, max: 100000}) and
 * ensureIndex({time: 1}) (the shell names it "time_1"). */
int pt_topics_create(md_db *db, md_error *err)
{
    int rc = run_command(db,
                         BCON_NEW("create", BCON_UTF8(TOPICS_COLL), "capped", BCON_BOOL(true),
                                  "size", BCON_INT32(TOPICS_SIZE), "max",
                                  BCON_INT32(TOPICS_MAX)),
                         err);
    if (rc)
        return rc;
    return run_command(db,
                       BCON_NEW("createIndexes", BCON_UTF8(TOPICS_COLL), "indexes", "[", "{",
                                "key", "{", "time", BCON_INT32(1), "}", "name",
                                BCON_UTF8("time_1"), "}", "]"),
                       err);
}

/* insert({time: new Date(), ticker, price}), plus `extra`'s fields (NULL:
 * none) for the scenario's bookkeeping. */
static int publish(md_db *db, const char *ticker, double price, const bson_t *extra,
                   md_error *err)
{
    bson_t *cmd = BCON_NEW("insert", BCON_UTF8(TOPICS_COLL));
    bson_t docs, doc;
    bson_iter_t it;
    BSON_APPEND_ARRAY_BEGIN(cmd, "documents", &docs);
    BSON_APPEND_DOCUMENT_BEGIN(&docs, "0", &doc);
    BSON_APPEND_DATE_TIME(&doc, "time", pt_now_ms());
    BSON_APPEND_UTF8(&doc, "ticker", ticker);
    BSON_APPEND_DOUBLE(&doc, "price", price);
    if (extra && bson_iter_init(&it, extra))
        while (bson_iter_next(&it))
            bson_append_iter(&doc, NULL, 0, &it);
    bson_append_document_end(&docs, &doc);
    bson_append_array_end(cmd, &docs);
    return run_command(db, cmd, err);
}

int pt_topics_publish(md_db *db, const char *ticker, double price, md_error *err)
{
    return publish(db, ticker, price, NULL, err);
}

/* find(filter) with tailable and awaitData; each getMore waits up to
 * max_await_ms for a new ticker.  Caller destroys. */
static md_cursor *tail(md_db *db, const bson_t *filter, int32_t max_await_ms)
{
    md_collection *coll = md_db_get_collection(db, TOPICS_COLL);
    bson_t *opts = BCON_NEW("tailable", BCON_BOOL(true), "awaitData", BCON_BOOL(true),
                            "maxAwaitTimeMS", BCON_INT32(max_await_ms));
    md_cursor *cur = md_collection_find_with_opts(coll, filter, opts);
    bson_destroy(opts);
    md_collection_destroy(coll);
    return cur;
}

/* The book's consumer (Ex 3): find({time: {$gte: since}}), tailing. */
md_cursor *pt_topics_subscribe(md_db *db, int64_t since_ms, int32_t max_await_ms)
{
    bson_t *filter = BCON_NEW("time", "{", "$gte", BCON_DATE_TIME(since_ms), "}");
    md_cursor *cur = tail(db, filter, max_await_ms);
    bson_destroy(filter);
    return cur;
}

/* The simulator's Topic.listen(): find({}), tailing from the oldest ticker
 * in the ring. */
md_cursor *pt_topics_listen(md_db *db, int32_t max_await_ms)
{
    return tail(db, NULL, max_await_ms);
}

/* ---- the scenario: topic_simulation.js --------------------------------------- */

typedef struct topics_state {
    int64_t nusers;     /* size of client_of */
    atomic_int *client_of; /* publish user id -> client + 1, once its insert succeeded */
    atomic_llong published, received, lost, stale, disorder;
} topics_state;

static int topics_setup(md_db *db, const pt_setup_args *a, void **state, md_error *err)
{
    *state = NULL;
    int rc = pt_drop_if_exists(db, TOPICS_COLL, err);
    if (!rc)
        rc = pt_topics_create(db, err);
    if (rc)
        return rc;
    topics_state *s = calloc(1, sizeof *s);
    if (s) {
        s->nusers = a->users > 0 ? a->users : 1;
        s->client_of = calloc((size_t)s->nusers, sizeof *s->client_of);
    }
    if (!s || !s->client_of) {
        free(s);
        return md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
    }
    *state = s;
    return 0;
}

static void topics_destroy(void *state)
{
    topics_state *s = state;
    if (!s)
        return;
    free(s->client_of);
    free(s);
}

/* publish_to_topics: one PIP ticker at 100 * random(). */
static int topics_run_publish(pt_user *u, md_error *err)
{
    topics_state *s = u->state;
    if ((int64_t)u->id >= s->nusers)
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                            "user %llu beyond the %lld the setup was told of",
                            (unsigned long long)u->id, (long long)s->nusers);
    double price = 100.0 * (double)(pt_rand(u) >> 11) / 9007199254740992.0;
    bson_t *extra = BCON_NEW("user", BCON_INT64((int64_t)u->id), "client",
                             BCON_INT32(u->client));
    int rc = publish(u->db, "PIP", price, extra, err);
    bson_destroy(extra);
    if (!rc) {
        atomic_store(&s->client_of[u->id], u->client + 1);
        atomic_fetch_add(&s->published, 1);
    }
    return rc;
}

static bool doc_i64(const bson_t *doc, const char *key, int64_t *v)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, doc, key) || !BSON_ITER_HOLDS_NUMBER(&it))
        return false;
    *v = bson_iter_as_int64(&it);
    return true;
}

/* A listener's view of one ticker: is it one of the run's (user, client
 * fields), and new to this listener?  last[c]: client c's last user it
 * received (a client publishes its users in increasing id order). */
typedef struct seen {
    int64_t *last;
    size_t n;
} seen;

enum { TICKER_NEW, TICKER_AGAIN, TICKER_STALE, TICKER_NOMEM };

static int ticker_seen(const topics_state *s, seen *v, const bson_t *doc, bool reopened,
                       bool *disorder)
{
    bson_iter_t it;
    int64_t user, client;
    if (!bson_iter_init_find(&it, doc, "time") || !BSON_ITER_HOLDS_DATE_TIME(&it) ||
        !doc_i64(doc, "user", &user) || !doc_i64(doc, "client", &client) || user < 0 ||
        user >= s->nusers || client < 0 || client >= (1 << 20))
        return TICKER_STALE;
    if ((size_t)client >= v->n) {
        size_t n = (size_t)client + 64;
        int64_t *nl = realloc(v->last, n * sizeof *nl);
        if (!nl)
            return TICKER_NOMEM;
        for (size_t i = v->n; i < n; i++)
            nl[i] = -1;
        v->last = nl;
        v->n = n;
    }
    if (user <= v->last[client]) {
        /* a cursor opened again starts at the oldest ticker: those it
         * delivers up to the last one seen are not new; on the first
         * cursor, such a ticker came out of its client's order */
        if (!reopened)
            *disorder = true;
        return TICKER_AGAIN;
    }
    v->last[client] = user;
    return TICKER_NEW;
}

/* fetch_from_topics: one of the simulator's listeners.  Topic.listen() --
 * find({}) tailable + awaitData -- held open until the listener's time is
 * up; every new ticker is reported to the runner as it arrives.  A cursor
 * that ends (an empty ring closes a tailable cursor at once, MongoDB 3.x)
 * or loses its place to the ring (CappedPositionLost, counted) is opened
 * again. */
static int topics_listen_op(pt_listener *l, md_error *err)
{
    topics_state *s = l->state;
    seen v = {NULL, 0};
    int rc = 0;
    for (int opened = 0; !rc && pt_listener_left_ms(l) > 0; opened++) {
        int64_t left = pt_listener_left_ms(l);
        md_cursor *cur =
            pt_topics_listen(l->db, left < TOPICS_AWAIT_MS ? (int32_t)left : TOPICS_AWAIT_MS);
        const bson_t *doc;
        bool disorder = false;
        while (!rc && md_cursor_more(cur) && pt_listener_left_ms(l) > 0) {
            if (!md_cursor_next(cur, &doc))
                continue; /* an awaitData getMore that timed out */
            switch (ticker_seen(s, &v, doc, opened > 0, &disorder)) {
            case TICKER_NEW:
                pt_listener_got(l);
                atomic_fetch_add(&s->received, 1);
                break;
            case TICKER_STALE:
                atomic_fetch_add(&s->stale, 1);
                break;
            case TICKER_NOMEM:
                rc = md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
                break;
            }
        }
        if (disorder)
            atomic_fetch_add(&s->disorder, 1);
        md_error e;
        if (!rc && md_cursor_error(cur, &e)) {
            if (e.code == MD_CODE_CAPPED_POSITION_LOST) {
                atomic_fetch_add(&s->lost, 1);
            } else {
                rc = MD_ERROR;
                if (err)
                    *err = e;
            }
        }
        bool dead = !md_cursor_more(cur);
        md_cursor_destroy(cur);
        if (dead && !rc && pt_listener_left_ms(l) > 0) {
            struct timespec ts = {0, 2 * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    free(v.last);
    return rc;
}

/* Every ticker in natural order, as (user, client) pairs. */
static int read_ring(md_db *db, int64_t **users, int **clients, size_t *n, md_error *err)
{
    md_collection *coll = md_db_get_collection(db, TOPICS_COLL);
    bson_t *opts = BCON_NEW("batchSize", BCON_INT32(10000));
    md_cursor *cur = md_collection_find_with_opts(coll, NULL, opts);
    const bson_t *doc;
    size_t cap = 0;
    int rc = 0;
    *users = NULL;
    *clients = NULL;
    *n = 0;
    while (!rc && md_cursor_next(cur, &doc)) {
        int64_t user, client;
        if (!doc_i64(doc, "user", &user) || !doc_i64(doc, "client", &client)) {
            rc = md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR,
                              "a ticker without the run's user and client fields");
            break;
        }
        if (*n == cap) {
            cap = cap ? cap * 2 : 1024;
            int64_t *nu = realloc(*users, cap * sizeof *nu);
            if (nu)
                *users = nu;
            int *nc = realloc(*clients, cap * sizeof *nc);
            if (nc)
                *clients = nc;
            if (!nu || !nc) {
                rc = md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
                break;
            }
        }
        (*users)[*n] = user;
        (*clients)[*n] = (int)client;
        (*n)++;
    }
    if (!rc && md_cursor_error(cur, err))
        rc = MD_ERROR;
    md_cursor_destroy(cur);
    bson_destroy(opts);
    md_collection_destroy(coll);
    return rc;
}

/*
 * The ring against the run's record.  present[id] marks the tickers found;
 * for each client, walking its published users from the newest down, the
 * present ones must come first and without a gap (the ring drops the
 * oldest), and in the ring they must appear in that client's order.
 */
static int check_ring(const topics_state *s, const int64_t *users, const int *clients,
                      size_t n, md_error *err)
{
    int64_t nu = s->nusers;
    char *present = calloc((size_t)nu, 1);
    int64_t *last = NULL; /* per client: the last user seen in ring order */
    int maxc = 0;
    int rc = 0;
    if (!present)
        return md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
    for (int64_t id = 0; id < nu; id++)
        if (atomic_load(&s->client_of[id]) > maxc)
            maxc = atomic_load(&s->client_of[id]);
    last = malloc(((size_t)maxc + 1) * sizeof *last);
    for (int c = 0; last && c <= maxc; c++)
        last[c] = -1;
    for (size_t i = 0; !rc && last && i < n; i++) {
        int64_t id = users[i];
        int c = clients[i];
        if (id < 0 || id >= nu || atomic_load(&s->client_of[id]) != c + 1)
            rc = md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR,
                              "ticker of user %lld (client %d) was not published by the run",
                              (long long)id, c);
        else if (present[id]++)
            rc = md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR,
                              "ticker of user %lld is in the ring twice", (long long)id);
        else if (id < last[c])
            rc = md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR,
                              "client %d's tickers reordered: user %lld after %lld", c,
                              (long long)id, (long long)last[c]);
        else
            last[c] = id;
    }
    if (!last && !rc)
        rc = md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
    /* per client, newest first: present ones, then only absent ones */
    for (int c = 1; !rc && c <= maxc; c++) {
        bool gone = false;
        for (int64_t id = nu - 1; !rc && id >= 0; id--) {
            if (atomic_load(&s->client_of[id]) != c)
                continue;
            if (!present[id])
                gone = true;
            else if (gone)
                rc = md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR,
                                  "client %d's ticker of user %lld is in the ring but a newer "
                                  "one of the same client was lost",
                                  c - 1, (long long)id);
        }
    }
    free(last);
    free(present);
    return rc;
}

static int topics_check(md_db *db, void *state, md_error *err)
{
    topics_state *s = state;
    int64_t *users;
    int *clients;
    size_t n;
    int rc = read_ring(db, &users, &clients, &n, err);
    if (!rc)
        rc = check_ring(s, users, clients, n, err);
    if (!rc && atomic_load(&s->published) > 0 && n == 0)
        rc = md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR,
                          "%lld tickers published, the ring is empty",
                          (long long)atomic_load(&s->published));
    if (!rc && n > TOPICS_MAX)
        rc = md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR,
                          "the ring holds %zu tickers, more than max %d", n, TOPICS_MAX);
    if (!rc && atomic_load(&s->stale) > 0)
        rc = md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR,
                          "listeners received %lld tickers that are not the run's",
                          (long long)atomic_load(&s->stale));
    if (!rc && atomic_load(&s->disorder) > 0)
        rc = md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR,
                          "%lld listeners received a client's tickers out of its order",
                          (long long)atomic_load(&s->disorder));
    free(users);
    free(clients);
    return rc;
}

/* For the tests and the report: tickers published, tickers the listeners
 * received, and the times a listener lost its place in the ring. */
int64_t pt_topics_published(void *state)
{
    topics_state *s = state;
    return s ? (int64_t)atomic_load(&s->published) : 0;
}

int64_t pt_topics_received(void *state)
{
    topics_state *s = state;
    return s ? (int64_t)atomic_load(&s->received) : 0;
}

int64_t pt_topics_lost(void *state)
{
    topics_state *s = state;
    return s ? (int64_t)atomic_load(&s->lost) : 0;
}

static const pt_scenario topics_scenario = {
    .name = "topics",
    .title = "Topics Simulation",
    .script = "examples/simulations/topic_simulation.js",
    .note = "fetch_from_topics is the simulator's custom execution: 40 tailable cursors held "
            "open for the run, each gap between a cursor's consecutive tickers one sample. The "
            "simulator timed those gaps with new Date() (milliseconds) and its report divided "
            "every time by 1000, as if microseconds: the book printed a mean of 0.001 ms for a "
            "1 ms gap. Its fetch rows are shown here multiplied by 1000, in milliseconds.",
    .nops = 2,
    .ops = {
        {.name = "publish_to_topics",
         .users = 1000,
         .decides = true,
         .run = topics_run_publish,
         .book_mmap = {44.39, 2.616, 7.824, 2.318, 5.523, 21.792, 0.703, 420.747},
         .book_wt = {45.39, 2.848, 11.15, 2.432, 5.699, 22.597, 0.740, 522.21}},
        {.name = "fetch_from_topics",
         .users = 40,
         .decides = true,
         .listen = topics_listen_op,
         /* The book's figures times 1000 (its report took these
          * milliseconds for microseconds; see the top of this file): whole
          * milliseconds, as new Date() measured them.  The book prints the
          * minimum as "~0.00". */
         .book_mmap = {44.39, 1, 3, 2, 4, 20, 0, 323},
         .book_wt = {45.39, 1, 4, 2, 4, 20, 0, 363}},
    },
    .setup = topics_setup,
    .check = topics_check,
    .destroy = topics_destroy,
};

const pt_pattern pt_pattern_topics = {
    .name = "topics",
    .title = "Topics",
    .section = "5.2",
    .book_winner = "tie",
    .book_reason = "the capped collection lives in memory, so writes are limited by lock "
                   "handling and memory speed on both engines; before 3.0 MMAP needed the "
                   "capped collection in its own database because of its lock, WiredTiger "
                   "does not",
    .nscenarios = 1,
    .scenarios = {&topics_scenario},
};
