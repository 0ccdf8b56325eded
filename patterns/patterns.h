/*
 * patterns.h -- the schema-design patterns of "The Little MongoDB Schema
 * Design Book" (Kvalheim, chapters 5.1-5.11), as a library a reader can call,
 * and the scenarios that reproduce the book's performance tables.
 *
 * Every pattern lives in its own file (queue.c, topics.c, ...) and talks to
 * minidoc through the public API only (include/minidoc.h): the same
 * filters, sorts, update operators, findAndModify options, upserts and
 * indexes the book writes, in C.  Where the book's code has an erratum
 * (../shared/reference/little-book-digest.md section 7) the pattern follows
 * the corrected form and says so in a comment.
 *
 * Two layers per pattern:
 *
 *   operations   plain functions (pt_queue_publish, pt_cart_checkout, ...)
 *                taking an md_db and the operation's arguments; what an
 *                application embedding minidoc would call.  Return 0 or a
 *                negative MD_* code with `err` filled; MD_NOTFOUND is a
 *                status ("no job in the queue", "seat taken"), not a failure.
 *   scenarios    what mongodb-schema-simulator ran for the book's tables:
 *                a setup, one or two timed user operations, and a check of
 *                the pattern's invariants after the run.  build/patterns
 *                (patterns/runner.c) runs them; tests call them too.
 *
 *     pt_patterns[] ---> pt_pattern (one per book chapter, book order)
 *                          |-- scenarios[] ---> pt_scenario (one per table)
 *                                                 |-- setup / check / destroy
 *                                                 |-- ops[] ---> pt_op
 *                                                                 |-- run(user)
 *                                                                 |-- the book's
 *                                                                     figures
 *
 * Threads: a scenario's `run` is called by many client threads at once,
 * each with its own pt_user; they share the md_db (thread safe) and the
 * scenario state (which the scenario must make safe to share: read-only
 * after setup, or atomics).
 */
#ifndef PATTERNS_H
#define PATTERNS_H

#include <stdbool.h>
#include <stdint.h>

#include "minidoc.h"

/* ---- the scenario model --------------------------------------------------- */

/* Helper threads a user hands sub-operations to (pt_user_parallel). */
typedef struct pt_pool pt_pool;

/* One simulated user, as the simulator's "user" running a scenario once. */
typedef struct pt_user {
    md_db *db;
    void *state;     /* the scenario's shared state, from setup */
    uint64_t id;     /* 0, 1, 2 ... unique per op within a run, in start order */
    uint64_t rng;    /* private random state (pt_rand); never 0 */
    int client;      /* index of the client thread running this user */
    pt_pool *pool;   /* the run's helpers (NULL: none, see pt_user_parallel) */
} pt_user;

/* xorshift64*: the next pseudo-random number of stream *state (0 is taken
 * as a fixed seed). */
uint64_t pt_rand_next(uint64_t *state);
/* The next pseudo-random number of this user (pt_rand_next of u->rng). */
uint64_t pt_rand(pt_user *u);
/* Uniform in [0, n). */
uint64_t pt_rand_below(pt_user *u, uint64_t n);

/*
 * A user's sub-operations run at once, as the simulator's scenarios issued
 * several calls without waiting for each other (node's async calls, each
 * on a free connection of the driver's pool).  pt_user_parallel runs
 * fn(sub, i, arg, err) for i = 0 .. n-1 (n <= PT_PARALLEL_MAX): on the
 * helpers of u->pool that are free and on the calling thread, which takes
 * every sub-operation no helper has taken yet, so the call finishes even
 * when all helpers are busy.  Without a pool (u->pool NULL) they run one
 * after another on the calling thread.  It returns when all n are done:
 * 0, or the error of the lowest-numbered one that failed (copied to err).
 *
 * Each sub-operation gets a pt_user of its own: u's fields, with a random
 * stream of its own (drawn from u's, which advances once per call).  fn
 * may run on any thread: what it shares through arg it must share safely
 * (each sub-operation writing only its own slot is enough; the call's
 * return orders those writes before the caller's reads).  Sub-operations
 * may call pt_user_parallel themselves.
 */
#define PT_PARALLEL_MAX 16
typedef int (*pt_sub_fn)(pt_user *u, int i, void *arg, md_error *err);
int pt_user_parallel(pt_user *u, int n, pt_sub_fn fn, void *arg, md_error *err);

/* A pool of `nthreads` helper threads (0 is allowed: callers then run
 * their sub-operations themselves), started now and kept until
 * pt_pool_destroy, which waits for them; the runner makes one per run,
 * with as many helpers as clients.  Caller owns *out. */
int pt_pool_new(int nthreads, pt_pool **out, md_error *err);
/* Stop and join the helpers; no pt_user_parallel may be running on p. */
void pt_pool_destroy(pt_pool *p);

/* One listener of an op the simulator ran as a custom execution (below): a
 * long-lived reader, such as a tailable cursor, on its own thread. */
typedef struct pt_listener {
    md_db *db;
    void *state;         /* the scenario's shared state, from setup */
    int id;              /* 0 .. listeners - 1 */
    int64_t until_ns;    /* CLOCK_MONOTONIC: listen until then */
    /* the runner's bookkeeping (pt_listener_got) */
    int64_t last_ns;     /* the previous document's arrival; 0: none yet */
    int64_t gaps;        /* gaps recorded */
    void *rec;           /* where the gaps go */
} pt_listener;

/* A document reached listener l now: the time since its previous one is
 * the op's latency sample (the first document only starts the clock). */
void pt_listener_got(pt_listener *l);
/* Milliseconds left until l->until_ns (0 when past). */
int64_t pt_listener_left_ms(const pt_listener *l);

/* A row of the book's statistics tables (milliseconds, runtime in seconds). */
typedef struct pt_figures {
    double runtime_s, mean, sd, p75, p95, p99, min, max;
} pt_figures;

/* One timed operation of a scenario: the book's "scenario" row. */
typedef struct pt_op {
    const char *name;      /* the book's row name, e.g. "publish_to_queues" */
    int users;             /* users starting this op per iteration (book) */
    bool decides;          /* counts toward the pattern's verdict (below) */
    /* One user's whole script; 0 or a negative MD_* code (an error: the
     * runner counts it and `--quick` fails on it). */
    int (*run)(pt_user *u, md_error *err);
    pt_figures book_mmap;  /* the book's figures on MMAPv1 */
    pt_figures book_wt;    /* ... and on WiredTiger */
    /* A user waits for other ops' users (a subscriber for a publisher), so
     * it has no service time (pt_sim.h) of its own. */
    bool needs_peers;
    /* The simulator's custom execution (Scenario.custom, as topics.js's
     * listeners): instead of users per iteration, `users` listeners (times
     * the rate scale) start once, one iteration into the run, and each
     * runs listen() for `iterations` iterations on a thread of its own.
     * listen() calls pt_listener_got() for every document it receives; the
     * op's latencies are the gaps between one listener's consecutive
     * documents, as the simulator logged them.  run is then unused. */
    int (*listen)(pt_listener *l, md_error *err);
} pt_op;

/* What the runner tells a scenario's setup about the coming run. */
typedef struct pt_setup_args {
    int64_t users;         /* total users the run will start, all ops */
    bool quick;            /* reduced scale (--quick, tests) */
} pt_setup_args;

#define PT_MAX_OPS 2

/* One of the book's simulator runs: one statistics table per engine. */
typedef struct pt_scenario {
    const char *name;      /* --scenario NAME, e.g. "queue_fifo" */
    const char *title;     /* the book's table title */
    const char *script;    /* the simulator's scenario file, for the report */
    /* Where the scenario follows the simulator rather than the chapter's
     * code, or corrects the book's figures: one paragraph for the report
     * (NULL: nothing to say). */
    const char *note;
    int nops;
    pt_op ops[PT_MAX_OPS];
    /* Create the collections, indexes and seed documents (timed runs
     * start after it).  *state: shared by every user; may stay NULL. */
    int (*setup)(md_db *db, const pt_setup_args *a, void **state, md_error *err);
    /* After the run: the pattern's invariants (no document lost, money or
     * inventory conserved, no seat sold twice).  0 when they hold. */
    int (*check)(md_db *db, void *state, md_error *err);
    /* Release the state; NULL: a plain free(state).  Call it through
     * pt_scenario_destroy. */
    void (*destroy)(void *state);
} pt_scenario;

/* Release a scenario's state: sc->destroy, or free() when it has none. */
void pt_scenario_destroy(const pt_scenario *sc, void *state);

#define PT_MAX_SCENARIOS 2

/* One chapter of the book. */
typedef struct pt_pattern {
    const char *name;        /* "queue", "cart_reservation", ... */
    const char *title;       /* "Queue", "Shopping Cart with Product Reservation" */
    const char *section;     /* "5.1" */
    /* The book's verdict: "mmapv1", "btree" or "tie", and why (quoted or
     * summarized from the chapter; digest section 6d). */
    const char *book_winner;
    const char *book_reason;
    int nscenarios;
    const pt_scenario *scenarios[PT_MAX_SCENARIOS];
} pt_pattern;

/*
 * The verdict: per engine, the sum of the mean latencies of the ops marked
 * `decides` across the pattern's scenarios; the engine with the lower sum
 * wins, a tie when the two are within 10% of each other.
 */

/* Every pattern, in the book's order; NULL-terminated. */
extern const pt_pattern *const pt_patterns[];

/* ---- shared helpers (patterns.c) ----------------------------------------- */

/* Milliseconds since the Unix epoch (for "new Date()"). */
int64_t pt_now_ms(void);
/* Run a command given as extended JSON; the reply is discarded. 0 or the
 * command's negative code with err filled. */
int pt_command_json(md_db *db, const char *json, md_error *err);
/* Run a write command (insert, update, delete; not consumed): 0, or its
 * failure -- a write error is one, with its code and message.  On success
 * *reply (NULL: not wanted) gets the reply; the caller destroys it. */
int pt_write(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err);
/* The shell's db.<coll>.ensureIndex(keys, opts): createIndexes with the
 * shell's default name ("startTime_1_createdOn_1") unless opts names it;
 * opts may be NULL. */
int pt_ensure_index(md_db *db, const char *coll, const bson_t *keys, const bson_t *opts,
                    md_error *err);
/* The shell's db.<coll>.findOne(filter, projection): a copy of the first
 * match in *out, which is always initialized (the caller destroys it);
 * MD_NOTFOUND if none matches, MD_ERROR with err filled if the find
 * failed.  projection may be NULL. */
int pt_find_one(md_db *db, const char *coll, const bson_t *filter, const bson_t *projection,
                bson_t *out, md_error *err);
/* Every document of coll, in natural order, through fn; *n (may be NULL)
 * counts the documents fn saw.  A non-zero return from fn stops the scan
 * and is returned; a cursor error is MD_ERROR with err filled.  For the
 * scenario checks, which read whole collections. */
typedef int (*pt_doc_fn)(const bson_t *doc, void *arg, md_error *err);
int pt_each_doc(md_db *db, const char *coll, pt_doc_fn fn, void *arg, int64_t *n,
                md_error *err);
/* Every document of coll read into the growing array *arr of *n elements
 * of elsize bytes, each zeroed and counted before add fills it (so one
 * that add fails on is still freed with the rest), then sorted by cmp.
 * The caller frees *arr (and what add put in its elements), also on an
 * error.  For the checks that look documents up by key. */
int pt_load_sorted(md_db *db, const char *coll, void **arr, size_t *n, size_t elsize,
                   int (*add)(const bson_t *doc, void *slot, md_error *err),
                   int (*cmp)(const void *, const void *), md_error *err);
/* The shell's db.<coll>.drop(), where a collection that does not exist is
 * not an error (a scenario's setup starts from nothing). */
int pt_drop_if_exists(md_db *db, const char *coll, md_error *err);
/* A scenario check: 0 if no document of coll matches filter, else MD_ERROR
 * with err saying "<count> <what>" (e.g. "3 carts not checked out"). */
int pt_expect_none(md_db *db, const char *coll, const bson_t *filter, const char *what,
                   md_error *err);
/* A user's run() of a scenario that must always succeed: turns MD_NOTFOUND
 * (the operation was refused) into MD_ERROR naming the user and the reason
 * in err (fallback if err is NULL); any other rc is returned unchanged. */
int pt_user_refused(const pt_user *u, int rc, const char *fallback, md_error *err);

/* ---- 5.1 Queue (queue.c) ------------------------------------------------- */
extern const pt_pattern pt_pattern_queue;

/* The book's indexes: queue {startTime: 1, createdOn: 1} (Ex 6), queue
 * {startTime: 1, priority: -1, createdOn: 1} (Ex 8), and the TTL index
 * expire {endTime: 1} with expireAfterSeconds 86400 (Ex 11). */
int pt_queue_create_indexes(md_db *db, md_error *err);
/* Insert a job {startTime: null, endTime: null, createdOn: now, priority,
 * payload} (payload NULL: {}); its new ObjectId in *id_out if not NULL. */
int pt_queue_publish(md_db *db, int32_t priority, const bson_t *payload, bson_oid_t *id_out,
                     md_error *err);
/* findAndModify {startTime: null} sorted {createdOn: 1} (FIFO) or
 * {priority: -1, createdOn: 1}, $set startTime: now, new: true.  `job` is
 * always initialized (caller destroys); it receives the started job, or
 * stays empty with MD_NOTFOUND when no job waits. */
int pt_queue_fetch_fifo(md_db *db, bson_t *job, md_error *err);
int pt_queue_fetch_priority(md_db *db, bson_t *job, md_error *err);
/* update {_id: id} with $set endTime: now; MD_NOTFOUND if no such job. */
int pt_queue_finish(md_db *db, const bson_value_t *id, md_error *err);
/* The queue_fifo scenario's counters (its state from setup): fetchers that
 * found the queue empty, and jobs fetched. */
int64_t pt_queue_empty_fetches(void *state);
int64_t pt_queue_jobs_fetched(void *state);

/* ---- 5.2 Topics (topics.c) ----------------------------------------------- */
extern const pt_pattern pt_pattern_topics;

/* createCollection("ticker", {capped: true, size: 100000, max: 100000}) and
 * ensureIndex({time: 1}). */
int pt_topics_create(md_db *db, md_error *err);
/* insert({time: new Date(), ticker, price}). */
int pt_topics_publish(md_db *db, const char *ticker, double price, md_error *err);
/* find({time: {$gte: since}}) tailable + awaitData; each getMore waits up
 * to max_await_ms for a new ticker.  Never NULL; caller destroys. */
md_cursor *pt_topics_subscribe(md_db *db, int64_t since_ms, int32_t max_await_ms);
/* The simulator's Topic.listen(): find({}) tailable + awaitData, from the
 * oldest ticker in the ring.  Never NULL; caller destroys. */
md_cursor *pt_topics_listen(md_db *db, int32_t max_await_ms);
/* The scenario's counts (state from its setup): tickers published,
 * tickers the listeners received, and the times a listener's place in the
 * ring was overwritten (CappedPositionLost: it listened again). */
int64_t pt_topics_published(void *state);
int64_t pt_topics_received(void *state);
int64_t pt_topics_lost(void *state);

/* ---- 5.3 Metadata (metadata.c) ------------------------------------------- */
extern const pt_pattern pt_pattern_metadata;

/* One metadata pair; `value` is borrowed (any BSON type). */
typedef struct pt_metadata_kv {
    const char *key;
    bson_value_t value;
} pt_metadata_kv;

/* images.ensureIndex({"metadata.key": 1, "metadata.value": 1}) */
int pt_metadata_create_indexes(md_db *db, md_error *err);
/* Insert {_id: id (NULL: a new ObjectId), metadata: [{key, value}, ...]}. */
int pt_metadata_insert(md_db *db, const bson_value_t *id, const pt_metadata_kv *kvs, int n,
                       md_error *err);
/* findOne({tags: {$all: tags}}): *doc always initialized (caller destroys);
 * MD_NOTFOUND when nothing matches. */
int pt_metadata_find_one_by_tags(md_db *db, const char *const *tags, int n, bson_t *doc,
                                 md_error *err);
/* findOne({metadata: {$elemMatch: {key, value}}}), as above. */
int pt_metadata_find_one(md_db *db, const pt_metadata_kv *kv, bson_t *doc, md_error *err);
/* The filter for n pairs: {metadata: {$elemMatch: ...}} for one, else
 * {metadata: {$all: [{$elemMatch: ...}, ...]}}.  *filter is initialized
 * here; the caller destroys it. */
void pt_metadata_filter(const pt_metadata_kv *kvs, int n, bson_t *filter);
/* find() with that filter; never NULL, errors via md_cursor_error; the
 * caller destroys the cursor. */
md_cursor *pt_metadata_find(md_db *db, const pt_metadata_kv *kvs, int n);

/* ---- 5.4 Materialized Path Category Hierarchy (matpath.c) ---------------- */
extern const pt_pattern pt_pattern_matpath;

/* categories {category: 1}, categories {parent: 1}, products
 * {categories: 1} (Ex 6-8). */
int pt_matpath_create_indexes(md_db *db, md_error *err);
/* categories {parent: 1, name: 1}, for the covered queries (Ex 9). */
int pt_matpath_create_covered_index(md_db *db, md_error *err);
/* The parent path of `path` ("/" for a top-level category) into parent. */
void pt_matpath_parent(const char *path, char *parent, size_t size);
/* Insert {_id: id (NULL: a new ObjectId), name, parent, category: path}. */
int pt_matpath_add_category(md_db *db, const bson_value_t *id, const char *name,
                            const char *path, md_error *err);
/* Insert {_id, name, cost, currency, categories: [n paths]}. */
int pt_matpath_add_product(md_db *db, const bson_value_t *id, const char *name, double cost,
                           const char *currency, const char *const *categories, int n,
                           md_error *err);
/* The queries; each returns a cursor the caller destroys (never NULL;
 * errors via md_cursor_error):
 *   direct_children  categories.find({parent: /^path$/})           Ex 1
 *   subtree          categories.find({parent: /^path/})            Ex 2
 *   *_covered        the same, projected {_id: 0, parent: 1, name: 1}
 *   products         products.find({categories: path})             Ex 3
 *   ancestors        categories.find({category: {$in: [the paths above
 *                    path, from "/"]}})                            Ex 4 */
md_cursor *pt_matpath_direct_children(md_db *db, const char *path);
md_cursor *pt_matpath_subtree(md_db *db, const char *path);
md_cursor *pt_matpath_direct_children_covered(md_db *db, const char *path);
md_cursor *pt_matpath_subtree_covered(md_db *db, const char *path);
md_cursor *pt_matpath_products(md_db *db, const char *path);
md_cursor *pt_matpath_ancestors(md_db *db, const char *path);
/* products.find({categories: {$in: <the children's / subtree's category
 * paths>}}) into *out (caller destroys; NULL on error). */
int pt_matpath_products_of_children(md_db *db, const char *path, md_cursor **out,
                                    md_error *err);
int pt_matpath_products_of_subtree(md_db *db, const char *path, md_cursor **out, md_error *err);

/* ---- 5.5 Shopping Cart with Product Reservation (cart_reservation.c) ----- */
extern const pt_pattern pt_pattern_cart_reservation;

/*
 * Both cart chapters (5.5 and 5.6) use the collections (db "shop" is the
 * md_db itself; the book's "catalog" in its index examples is an erratum):
 *
 *   carts        {_id: ObjectId, state, modifiedOn,
 *                 products: [{_id: product, quantity, name, price}]}
 *   inventories  {_id: product, quantity,
 *                 reservations: [{_id: cart, quantity, createdOn}]}
 *   products     {_id: product, name, price, properties}
 *   orders       {_id: cart, created_on, shipping, payment, products}
 *
 * Products have int64 _ids (as the simulator's); carts ObjectIds (one per
 * shopping session, as the simulator's).  A cart holds at most one line per
 * product.  Cart states:
 *
 *   active --checkout--> completed      (an order with the cart's _id)
 *      \----expiry-----> expired        (its reservations given back)
 *
 * Failure points: every multi-step call takes an optional pt_cart_opts;
 * crash_after = k stops it right after its k-th write as if the client
 * died there, and the call returns PT_CART_CRASHED (a positive status: the
 * state is left as the dead client left it; the client does not come back
 * to that cart).  0: run to the end.  pt_cart_cleanup (expiry + recovery,
 * the book's background job) restores the invariants after any such stop;
 * the job itself may be stopped the same way and simply run again.
 */
#define PT_CART_CRASHED 1

typedef struct pt_cart_opts {
    int crash_after;  /* stop after this many writes (0: never) */
} pt_cart_opts;

/* A cart line: the product and the quantity wanted, with the name and the
 * price the book copies into the cart. */
typedef struct pt_cart_item {
    int64_t product;
    int32_t quantity;
    char name[64];
    int32_t price;
} pt_cart_item;

/* carts.ensureIndex({state: 1}) (Ex 9); inventories.ensureIndex(
 * {"reservations._id": 1}) (Ex 10, multikey).  Both chapters. */
int pt_cart_create_indexes(md_db *db, md_error *err);
/* Products 0..n-1 {_id, name "product_<i>", price, properties: {bin:
 * <product_bytes zero bytes>}} and inventories {_id, quantity: stock[i],
 * reservations: []}. */
int pt_cart_seed(md_db *db, int64_t n, const int64_t *stock, int product_bytes, md_error *err);
/* products.findOne({_id}) into *item (quantity left 0); MD_NOTFOUND. */
int pt_cart_product(md_db *db, int64_t product, pt_cart_item *item, md_error *err);

/* 5.5 operations.  MD_NOTFOUND: not enough stock, or the cart is not
 * active (any change made is rolled back first); MD_EEXISTS: add of a
 * product already in the cart. */
/* Ex 1 + Ex 2 (+ Ex 3 when the stock is short): 2 writes (3 on rollback). */
int pt_cart_res_add(md_db *db, const bson_oid_t *cart, const pt_cart_item *item,
                    const pt_cart_opts *o, md_error *err);
/* Ex 4 + Ex 5 (+ Ex 6 when the stock is short): 2 writes (3). */
int pt_cart_res_update(md_db *db, const bson_oid_t *cart, int64_t product, int32_t quantity,
                       const pt_cart_opts *o, md_error *err);
/* Release the reservation, then pull the line: 2 writes. */
int pt_cart_res_remove(md_db *db, const bson_oid_t *cart, int64_t product,
                       const pt_cart_opts *o, md_error *err);
/* Ex 8: mark completed, insert the order, pull the reservations: 3 writes. */
int pt_cart_res_checkout(md_db *db, const bson_oid_t *cart, const pt_cart_opts *o,
                         md_error *err);

/*
 * The background job, both chapters.  pt_cart_expire is Ex 7 (5.6 Ex 6):
 * every active cart not modified since cutoff_ms (the book: now - 30 min)
 * is marked expired and its reservations go back to the inventory.
 * pt_cart_recover finishes what a stopped client left, for reservations
 * created at or before cutoff_ms: those of expired carts are given back,
 * those of completed carts are rolled forward (order inserted if missing,
 * reservations pulled).  pt_cart_cleanup runs both.  Counts (may be NULL):
 * carts expired; reservations given back plus checkouts finished.
 */
int pt_cart_expire(md_db *db, int64_t cutoff_ms, const pt_cart_opts *o, int64_t *nexpired,
                   md_error *err);
int pt_cart_recover(md_db *db, int64_t cutoff_ms, const pt_cart_opts *o, int64_t *nrecovered,
                    md_error *err);
int pt_cart_cleanup(md_db *db, int64_t cutoff_ms, const pt_cart_opts *o, md_error *err);

/* What pt_cart_check counted. */
typedef struct pt_cart_totals {
    int64_t active, completed, expired; /* carts by state */
    int64_t orders, reservations;
    int64_t available, reserved, sold;  /* units, all products */
} pt_cart_totals;

/*
 * The invariants, products 0..n-1 started with initial[i] units:
 *   - inventory conserved: quantity + reserved + sold == initial for each
 *     product (reserved: its reservations' quantities; sold: the order lines);
 *   - no negative quantity, no empty reservation or line;
 *   - every reservation belongs to an active cart that has the same line,
 *     at most one per cart and product; with `reserving` (5.5) every line of
 *     an active cart holds its reservation too;
 *   - every order is a completed cart's and every completed cart has one.
 * Meant for a settled database (no client running; after a stopped client,
 * pt_cart_cleanup has run).  0 when they hold; MD_ERROR with the first
 * violation in err.  *out (may be NULL) gets the totals.
 */
int pt_cart_check(md_db *db, int64_t n, const int64_t *initial, bool reserving,
                  pt_cart_totals *out, md_error *err);

/* The two cart scenarios' count (their state from setup): adds the
 * simulator's classes would have failed (the cart's push or, in 5.5, the
 * reservation modified nothing), which their users go on without. */
int64_t pt_cart_scenario_refused(void *state);

/*
 * The concurrent workload the tests and tsan_carts run: `threads` clients,
 * each doing `ops` random operations of one chapter (add 1-3 units of a
 * random product, change a quantity, remove, check out; every
 * `expire_every`-th op (0: never) runs pt_cart_cleanup with a cutoff
 * 0..expire_age_ms back, racing the owners; with expire_only just
 * pt_cart_expire), each op stopped after 1-4 writes
 * with probability crash_pct% (the client then abandons that cart).
 * Products 0..nproducts-1 must be seeded.  Counts come back in `out`;
 * 0, or the first unexpected error (with err filled).
 */
typedef struct pt_cart_stress {
    bool reserving;                 /* 5.5 (true) or 5.6 operations */
    int threads, ops, nproducts, crash_pct, expire_every, expire_age_ms;
    bool expire_only;
    uint64_t seed;
    /* results */
    int64_t adds, updates, removes, checkouts, cleanups;
    int64_t ok, notfound, exists, crashed, checked_out;
} pt_cart_stress;
int pt_cart_stress_run(md_db *db, pt_cart_stress *st, md_error *err);

/* ---- 5.6 Shopping Cart with No Product Reservation (cart_no_reservation.c) */
extern const pt_pattern pt_pattern_cart_no_reservation;

/* 5.6 operations on the collections above (the cleanup, the check and the
 * indexes are 5.5's).  Nothing is reserved before the checkout. */
/* Ex 1 (5.5's Ex 1): 1 write.  MD_EEXISTS, MD_NOTFOUND as in 5.5. */
int pt_cart_nores_add(md_db *db, const bson_oid_t *cart, const pt_cart_item *item,
                      const pt_cart_opts *o, md_error *err);
/* Ex 2: 1 write.  MD_NOTFOUND: no such line in an active cart. */
int pt_cart_nores_update(md_db *db, const bson_oid_t *cart, int64_t product, int32_t quantity,
                         const pt_cart_opts *o, md_error *err);
/* Pull the line: 1 write.  MD_NOTFOUND as for update. */
int pt_cart_nores_remove(md_db *db, const bson_oid_t *cart, int64_t product,
                         const pt_cart_opts *o, md_error *err);
/* Ex 3-5: reserve every line, give back what was reserved if one fails
 * (MD_NOTFOUND), else mark completed, insert the order, pull the
 * reservations.  One write per line, then 3. */
int pt_cart_nores_checkout(md_db *db, const bson_oid_t *cart, const pt_cart_opts *o,
                           md_error *err);

/* ---- 5.7 Theater Reservation (theater.c) --------------------------------- */
extern const pt_pattern pt_pattern_theater;

/*
 * Collections theaters, sessions, carts, receipts.  Theaters, sessions and
 * carts are keyed by int64 _ids (the book's cart and theater use numbers;
 * its session ObjectId becomes a number too).  A seat is [row, column],
 * 0-indexed, into the session's 2-D `seats` array of 0 (free) / 1 (taken).
 *
 * Failure points: every multi-step operation takes an optional
 * pt_theater_opts; crash_after = k stops it right after its k-th write as
 * if the client died there, and the call returns PT_THEATER_CRASHED (a
 * positive status: the state is left as the dead client left it).  0 or a
 * negative k: run to the end.  pt_theater_expire restores the invariants
 * after any such stop (see theater.c's header for the steps and why).
 */
#define PT_THEATER_CRASHED 1

typedef struct pt_theater_opts {
    int crash_after;  /* stop after this many writes (0: never) */
} pt_theater_opts;

typedef struct pt_seat {
    int row, col;
} pt_seat;

/* carts.ensureIndex({state: 1}); sessions.ensureIndex({"reservations._id": 1}) */
int pt_theater_create_indexes(md_db *db, md_error *err);
/* A theater with rows x cols free seats (seatsAvailable = rows * cols). */
int pt_theater_create(md_db *db, int64_t theater_id, const char *name, int rows, int cols,
                      md_error *err);
/* A session of a theater: its seat map and seatsAvailable copied from the
 * theater template, no reservations.  MD_NOTFOUND: no such theater. */
int pt_theater_add_session(md_db *db, int64_t theater_id, int64_t session_id, const char *name,
                           const char *description, int64_t start_ms, int64_t end_ms,
                           int64_t price, md_error *err);
/* An empty active cart. */
int pt_theater_cart_create(md_db *db, int64_t cart_id, md_error *err);
/* Reserve all n seats or none (2 writes: the session, the cart).
 * MD_NOTFOUND: a seat was taken, or the cart is no longer active (the
 * seats are then released again). */
int pt_theater_reserve(md_db *db, int64_t cart_id, int64_t session_id, const pt_seat *seats,
                       int n, const pt_theater_opts *o, md_error *err);
/* Give back the seats a cart holds in a session (1 write).  MD_NOTFOUND:
 * the session holds no such reservation (already released). */
int pt_theater_release(md_db *db, int64_t session_id, int64_t cart_id, const pt_seat *seats,
                       int n, md_error *err);
/* Check out (3 writes: claim the cart as done, insert the receipt, pull
 * the cart's reservations from the sessions).  MD_NOTFOUND: the cart is
 * not active (unknown, expired, already done). */
int pt_theater_checkout(md_db *db, int64_t cart_id, const pt_theater_opts *o, md_error *err);
/* Expire active carts not modified since cutoff_ms (the book uses now - 30
 * minutes), releasing their seats, and finish whatever a stopped client
 * left: releases of expired carts, checkouts of done carts.  *nexpired (may
 * be NULL) gets the number of carts this call expired. */
int pt_theater_expire(md_db *db, int64_t cutoff_ms, const pt_theater_opts *o, int *nexpired,
                      md_error *err);
/* The invariants: every session's seatsAvailable equals its number of 0
 * seats; every taken seat is held by one cart only (its session
 * reservation and/or its receipt), every free seat by none.  `settled`
 * (no client running, expire run since the last stop) also asks that every
 * taken seat is held exactly once and that no session still holds a
 * reservation of a cart that is not active.  0 when they hold; MD_ERROR
 * with the first violation in err. */
int pt_theater_check(md_db *db, bool settled, md_error *err);

/* ---- 5.8 Account Transactions (account.c) -------------------------------- */
extern const pt_pattern pt_pattern_account;

/*
 * Collections accounts {name, balance, pendingTransactions} and
 * transactions {source, destination, amount, state, createdAt,
 * lastModified}.  Transaction states (the book's, its "intital" and
 * "cancel" corrected):
 *
 *   initial -> pending -> committed -> done
 *      |          |
 *      v          v
 *   canceled <- canceling
 *
 * Failure points as in 5.7: crash_after = k stops a call right after its
 * k-th write and it returns PT_ACCOUNT_CRASHED; pt_account_recover
 * restores the invariants.
 */
#define PT_ACCOUNT_CRASHED 1

typedef struct pt_account_opts {
    int crash_after;  /* stop after this many writes (0: never) */
} pt_account_opts;

/* accounts.ensureIndex({name: 1}) (unique, as the simulator makes it);
 * transactions.ensureIndex({state: 1}) */
int pt_account_create_indexes(md_db *db, md_error *err);
/* {name, balance, pendingTransactions: []} */
int pt_account_create(md_db *db, const char *name, int64_t balance, md_error *err);
/* The account's balance (MD_NOTFOUND: no such account). */
int pt_account_balance(md_db *db, const char *name, int64_t *balance, md_error *err);
/* Insert a transaction in state initial; its _id in *id. */
int pt_account_txn_create(md_db *db, const char *source, const char *destination,
                          int64_t amount, bson_oid_t *id, md_error *err);
/* Apply an initial transaction: pending, debit, credit, committed, clear
 * both accounts, done (7 writes) -- or, given the `application` that
 * claimed it (pt_account_claim), a pending one tagged with it (6 writes:
 * no state change to pending).  MD_NOTFOUND: not ours to apply (another
 * state or application), or it could not proceed (an account missing,
 * insufficient funds) and was rolled back to canceled. */
int pt_account_apply(md_db *db, const bson_oid_t *id, const char *application,
                     const pt_account_opts *o, md_error *err);
/* create + apply (8 writes); *id (may be NULL) gets the transaction. */
int pt_account_transfer(md_db *db, const char *source, const char *destination,
                        int64_t amount, const pt_account_opts *o, bson_oid_t *id,
                        md_error *err);
/* Roll back a transaction that is pending or canceling: canceling,
 * reverse each side that holds it, canceled (up to 4 writes).  An initial
 * one is just canceled.  MD_NOTFOUND: in no state that can be rolled back
 * (committed ones are never rolled back: transfer the money back instead,
 * as the book says). */
int pt_account_cancel(md_db *db, const bson_oid_t *id, const pt_account_opts *o, md_error *err);
/* The book's concurrent applications: atomically tag one initial,
 * untagged transaction with `application` and move it to pending
 * (findAndModify).  *id gets it; MD_NOTFOUND: none left. */
int pt_account_claim(md_db *db, const char *application, bson_oid_t *id, md_error *err);
/* The background recovery: every transaction not done or canceled whose
 * lastModified <= cutoff_ms is claimed (lastModified bumped, so another
 * recovery leaves it alone) and finished: initial -> canceled, pending and
 * canceling rolled back, committed rolled forward to done.  *nrecovered
 * (may be NULL) counts them. */
int pt_account_recover(md_db *db, int64_t cutoff_ms, const pt_account_opts *o, int *nrecovered,
                       md_error *err);
/* The invariants: the balances sum to `total` (pass -1 to skip; less the
 * amounts half-applied transactions hold in flight, none when settled), none is
 * negative, and each account's balance is `initial` plus its done credits
 * minus its done debits (pass -1 to skip: accounts of mixed opening
 * balances) -- so no transaction was applied twice or half.  `settled`
 * (no client running, recover run since the last stop) also asks that
 * every transaction is done or canceled and no pendingTransactions entry
 * is left. 0 when they hold; MD_ERROR with the first violation in err. */
int pt_account_check(md_db *db, int64_t total, int64_t initial, bool settled, md_error *err);

/* ---- 5.9 Time Series (timeseries.c) -------------------------------------- */
/* One bucket per page per minute: {page, timestamp, seconds: {"0".."59"}}. */
#define PT_TS_COLLECTION "pageViews"
/* Example 4: {page: 1, timestamp: 1} (name "page_1_timestamp_1"). */
int pt_ts_create_indexes(md_db *db, md_error *err);
/* Example 6, preAllocateHour: 60 inserts, one bucket per minute from
 * `hour_ms` (ms since the epoch), every second's counter at 0. */
int pt_ts_preallocate_hour(md_db *db, const char *page, int64_t hour_ms, md_error *err);
/* Example 2: update({page, timestamp: minute}, {$inc: {"seconds.<second>": 1}},
 * upsert).  MD_EINVAL unless 0 <= second <= 59. */
int pt_ts_record_view(md_db *db, const char *page, int64_t minute_ms, int second,
                      md_error *err);
/* Example 3: findOne({page, timestamp: minute}) copied into `bucket`
 * (always initialized; caller destroys).  MD_NOTFOUND if there is none. */
int pt_ts_find_bucket(md_db *db, const char *page, int64_t minute_ms, bson_t *bucket,
                      md_error *err);
/* Example 8, corrected (erratum 2): count {timestamp: {$gte: hour, $lt: hour + 1h}}. */
int pt_ts_count_hour(md_db *db, int64_t hour_ms, int64_t *count, md_error *err);
extern const pt_pattern pt_pattern_timeseries;

/* ---- 5.10 Array Slice Cache (slice_cache.c) ------------------------------ */
/* posts {_id, blogId, createdOn, publishedOn, title, content, latestComments:
 * [comment]}; comments {_id, postId, publishedOn, message}. */
#define PT_SLICE_POSTS "posts"
#define PT_SLICE_COMMENTS "comments"
#define PT_SLICE_LATEST 10 /* comments a post's cache keeps ($slice: -10) */
/* Insert a post with an empty cache.  With `template_comment` (a comment of
 * the size later comments will have) the post is pre-allocated: inserted
 * with PT_SLICE_LATEST copies of it, then {$set: {latestComments: []}}. */
int pt_slice_create_post(md_db *db, const bson_oid_t *post_id, const bson_oid_t *blog_id,
                         const char *title, const char *content,
                         const bson_t *template_comment, md_error *err);
/* The cache update: update({_id: post}, {$push: {latestComments: {$each:
 * [comment], $slice: -10}}}) (erratum 1 corrected).  MD_NOTFOUND: no post. */
int pt_slice_push_latest(md_db *db, const bson_oid_t *post_id, const bson_t *comment,
                         md_error *err);
/* Add a comment: comments.insert(comment), then the cache update.  The new
 * comment's _id in *comment_id (may be NULL). */
int pt_slice_add_comment(md_db *db, const bson_oid_t *post_id, const char *message,
                         int64_t published_ms, bson_oid_t *comment_id, md_error *err);
/* findOne({_id: post}) into `post` (always initialized; caller destroys);
 * MD_NOTFOUND if there is none.  The cache is oldest first: reverse it on
 * display for newest first, as the book says. */
int pt_slice_find_post(md_db *db, const bson_oid_t *post_id, bson_t *post, md_error *err);
extern const pt_pattern pt_pattern_slice_cache;

/* ---- 5.11 Internationalization (i18n.c) ---------------------------------- */
/* categories {_id, names: {"en-us": "car", ...}}; products {_id, name, cost,
 * currency, categories: [a copy of each category document]}. */
#define PT_I18N_CATEGORIES "categories"
#define PT_I18N_PRODUCTS "products"
/* products {"categories._id": 1}: the simulator's index (the book names
 * none; erratum 3). */
int pt_i18n_create_indexes(md_db *db, md_error *err);
int pt_i18n_create_category(md_db *db, int32_t id, const bson_t *names, md_error *err);
/* Insert a product caching the n category documents `categories`. */
int pt_i18n_create_product(md_db *db, int32_t id, const char *name, int32_t cost,
                           const char *currency, const bson_t *const *categories, int n,
                           md_error *err);
/* categories.update({_id}, {$set: {"names.<locale>": name}}), then
 * products.update({"categories._id": id}, {$set: {"categories.$.names.<locale>":
 * name}}, {multi: true}) (erratum 3 corrected: the category's own path, and
 * the multi flag).  *products_modified (may be NULL): the products changed.
 * MD_NOTFOUND: no such category; MD_EINVAL: a locale with '.' or '$'. */
int pt_i18n_add_local(md_db *db, int32_t category_id, const char *locale, const char *name,
                      int64_t *products_modified, md_error *err);
/* The same two updates with $unset. */
int pt_i18n_remove_local(md_db *db, int32_t category_id, const char *locale,
                         int64_t *products_modified, md_error *err);
extern const pt_pattern pt_pattern_i18n;

#endif /* PATTERNS_H */
