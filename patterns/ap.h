/*
 * ap.h -- "MongoDB Applied Design Patterns" (Copeland, 2013): its design
 * rules (part I, chapters 1-3) and its use cases (part II, chapters 4-9),
 * as a library a reader can call, and the measurements that turn each
 * chapter's claims into numbers on both engines.
 *
 * One module per use case, patterns/ap_<name>.c, through the public API
 * only (include/minidoc.h): the book's schema, its Python translated
 * statement by statement (the same filters, updates, upserts, multi,
 * positional updates, $slice projections, sorts and indexes).  Where the
 * book's code has an erratum (../shared/reference/applied-patterns-digest.md
 * marks them [sic]) the module follows the corrected form and says so.
 *
 * Two layers per use case, as in patterns.h:
 *
 *   operations   plain functions (ap_logs_insert, ap_comments_post_embedded,
 *                ...) taking an md_db; 0 or a negative MD_* code with `err`
 *                filled; MD_NOTFOUND is a status (no such document, a
 *                guarded update that matched nothing: the book's "not
 *                updatedExisting").
 *   measurement  ap_usecase.measure: on a fresh database of one engine,
 *                runs the chapter's operations at the sizes it talks about
 *                and records named numbers (ap_result's metrics: bytes
 *                written, moves, keys examined, ops per second).  Each
 *                claim of the chapter is then decided in one of two ways:
 *                by its judge, a function of the metrics called afterwards
 *                (chapters 1-4 and inventory), or inside measure with
 *                ap_claim_set, the verdict and its evidence stored in the
 *                result (chapters 5-9; the claim's judge is NULL).
 *                ap_claim_verdict reads either.
 *
 *   ap_usecases[] (ap_registry.c, book order) ---> ap_usecase
 *                    |-- measure(db, args) -> ap_result (metrics, claims)
 *                    |-- claims[] ---> ap_claim
 *                                        |-- the book's words
 *                                        |-- judge(result) or NULL
 *
 * build/patterns (runner.c, runner_ap.c) runs every use case on mmapv1 and
 * btree after the Little Book's scenarios and writes the second part of
 * docs/patterns.md.
 */
#ifndef AP_H
#define AP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "minidoc.h"
#include "patterns.h"

/* ---- the measurement model ------------------------------------------------- */

#define AP_MAX_METRICS 64
#define AP_MAX_CLAIMS 12

/* One measured number: "inserts_per_s_w1" = 41234.5 "inserts/s", or "post,
 * embedded, 1000 comments: bytes written per comment" = 51234 "B". */
typedef struct ap_metric {
    char name[112];
    double value;
    char unit[16];
} ap_metric;

/* A claim's outcome on one engine.  AP_NA: not applicable there (or, for a
 * claim decided in measure, not decided). */
typedef enum ap_verdict { AP_NA = 0, AP_HOLDS, AP_FAILS } ap_verdict;
const char *ap_verdict_name(ap_verdict v); /* "holds", "does not hold", "n/a" */

/* A claim decided inside measure (ap_claim_set). */
typedef struct ap_claim_result {
    ap_verdict verdict;
    char evidence[320];    /* the numbers that decided it */
} ap_claim_result;

/* One use case measured on one engine. */
typedef struct ap_result {
    char engine[32];
    int nmetrics;
    ap_metric m[AP_MAX_METRICS];
    ap_claim_result claims[AP_MAX_CLAIMS]; /* for the claims without a judge */
    double seconds;        /* wall time of measure() */
    int rc;                /* measure()'s result (0: ran) */
    char error[256];       /* when rc != 0 */
} ap_result;

/* What measure is asked to do. */
typedef struct ap_args {
    const char *engine;    /* the database's engine ("mmapv1", "btree") */
    bool quick;            /* the reduced sizes: a few seconds per use case */
    uint64_t seed;
    bool no_journal;       /* ap_run_usecase: mmapv1 without its journal, btree
                            * without its log (build/patterns --no-journal) */
} ap_args;

/* Record (or overwrite) a metric by name (dropped past AP_MAX_METRICS). */
void ap_set(ap_result *r, const char *name, double value, const char *unit);
/* The same with a formatted name. */
void ap_row_add(ap_result *r, double value, const char *unit, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* A metric's value, NAN when it was not recorded. */
double ap_get(const ap_result *r, const char *name);
/* Decide claim k inside measure: holds or not, and why. */
void ap_claim_set(ap_result *r, int k, bool holds, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* One claim of the chapter. */
typedef struct ap_claim {
    const char *claim;     /* the book's statement, quoted or summarized */
    /* Judge it on one engine's numbers; `measured` gets a sentence with
     * the numbers that decide it (always filled).  NULL: measure decides
     * it with ap_claim_set. */
    ap_verdict (*judge)(const ap_result *r, char *measured, size_t n);
} ap_claim;

typedef struct ap_usecase {
    const char *name;      /* --scenario NAME, e.g. "ap_logs" */
    const char *chapter;   /* "Ch.4 Operational Intelligence" (its own part of the report) */
    const char *title;     /* "Storing Log Data" */
    const char *pages;     /* "pp.37-52" */
    const char *demonstrates; /* one line: the schema decision it shows */
    /* Measure on `db` (fresh, of engine a->engine); fills r; 0 or an error. */
    int (*measure)(md_db *db, const ap_args *a, ap_result *r, md_error *err);
    int nclaims;
    ap_claim claims[AP_MAX_CLAIMS];
} ap_usecase;

/* Every use case, in the book's order; NULL-terminated (ap_registry.c). */
extern const ap_usecase *const ap_usecases[];

/* Claim k of uc on one engine's result: its judge's verdict, or the one
 * measure stored; `measured` gets the evidence.  A failed measurement
 * (r->rc) fails every claim. */
ap_verdict ap_claim_verdict(const ap_usecase *uc, int k, const ap_result *r, char *measured,
                            size_t n);
/* The verdict of a use case on one engine: AP_HOLDS when every applicable
 * claim holds, AP_FAILS when one does not, AP_NA when none applies. */
ap_verdict ap_usecase_verdict(const ap_usecase *uc, const ap_result *r, int *held, int *judged);

/*
 * Run one use case on `engine` in a fresh temporary database (journal and
 * log on, as MongoDB 3.x by default, unless a->no_journal; removed after): r is filled.  0 when
 * it ran (r->rc tells whether measure succeeded), negative when the
 * database could not be opened.  a->engine is ignored (engine is used).
 */
int ap_run_usecase(const ap_usecase *uc, const char *engine, const ap_args *a, ap_result *r,
                   md_error *err);

/* ---- shared helpers (ap_common.c) ------------------------------------------ */

/* Monotonic seconds, for timing. */
double ap_now_s(void);
/* An update as the book's pymongo writes it, through update_one or
 * update_many ({multi}) with {upsert}.  Outputs, each may be NULL:
 * *updated_existing, getLastError's updatedExisting (an existing document
 * matched); *matched and *modified, the reply's counts; *upserted, whether
 * a document was inserted. */
int ap_update(md_db *db, const char *coll, const bson_t *q, const bson_t *u, bool upsert,
              bool multi, bool *updated_existing, int64_t *matched, int64_t *modified,
              bool *upserted, md_error *err);
/* insert(doc) with an optional writeConcern document (NULL: the default). */
int ap_insert(md_db *db, const char *coll, const bson_t *doc, const bson_t *wc, md_error *err);
/* remove(q) (all matches); *n (may be NULL) the deleted count. */
int ap_remove(md_db *db, const char *coll, const bson_t *q, int64_t *n, md_error *err);
/* find(filter, opts) on coll (opts as for find: sort, limit, projection):
 * the number of documents in *n (may be NULL) and, when first is not NULL,
 * a copy of the first (always initialized). */
int ap_find(md_db *db, const char *coll, const bson_t *filter, const bson_t *opts, int64_t *n,
            bson_t *first, md_error *err);
/* Copies of the first `max` documents find(filter) returns on coll, into
 * out[0..*n) (the caller destroys them), for jobs that then update what
 * they read.  The copies are made even when the cursor fails (*n says how
 * many); the cursor's error is returned. */
int ap_find_copies(md_db *db, const char *coll, const bson_t *filter, bson_t **out, int max,
                   int *n, md_error *err);

/* What explain (executionStats) says about a find. */
typedef struct ap_plan {
    char index[128];        /* the winning plan's IXSCAN index name, "" for none */
    bool collscan;          /* a COLLSCAN in the winning plan */
    bool sort_in_memory;    /* a SORT stage in the winning plan */
    int64_t keys_examined;  /* totalKeysExamined (the book's nscanned) */
    int64_t docs_examined;  /* totalDocsExamined (nscannedObjects) */
    int64_t n_returned;     /* nReturned (n) */
    int64_t millis;         /* executionTimeMillis */
} ap_plan;
/* explain({find: coll, filter, sort?, hint?}, "executionStats"); sort and
 * hint may be NULL. */
int ap_explain_find(md_db *db, const char *coll, const bson_t *filter, const bson_t *sort,
                    const bson_t *hint, ap_plan *out, md_error *err);

/* The storage counters of the whole database (serverStatus + collStats):
 * moves, in-place updates, bytes written by document writes. */
typedef struct ap_counters {
    int64_t moves, in_place, bytes_written, updates;
} ap_counters;
int ap_counters_read(md_db *db, ap_counters *c, md_error *err);
/* b - a, field by field. */
ap_counters ap_counters_diff(const ap_counters *a, const ap_counters *b);
/* One collection: collStats' count, size (data bytes), storageSize and
 * its engine's counters (coll_moves: the collection's document moves,
 * bytes written, updates, in-place updates), and the record moves of the
 * whole server so far (serverStatus metrics.record.moves). */
typedef struct ap_coll_stats {
    int64_t count, size, storage_size, moves, coll_moves, bytes_written, updates, in_place;
} ap_coll_stats;
int ap_coll_stats_get(md_db *db, const char *coll, ap_coll_stats *out, md_error *err);
/* The size in bytes of the first document matching q (0 if none). */
int64_t ap_doc_size(md_db *db, const char *coll, const bson_t *q);

/* ---- Ch.1 To Embed or Reference (ap_embed.c) ------------------------------ */
extern const ap_usecase ap_usecase_embed;

/* The phone book, embedded: contacts {_id, name, zip_code, numbers: [...]};
 * referenced: contacts_ref {_id, name, zip_code} + numbers {contact_id,
 * number} (index {contact_id: 1}). */
int ap_embed_create_indexes(md_db *db, md_error *err);
int ap_embed_add_contact(md_db *db, int64_t id, const char *name, const char *zip,
                         const char *const *numbers, int n, md_error *err);
int ap_ref_add_contact(md_db *db, int64_t id, const char *name, const char *zip,
                       const char *const *numbers, int n, md_error *err);
/* Read a contact with its numbers: find_one contacts (1 query), or
 * find_one contacts_ref + find numbers {contact_id} (2 queries).  *nnumbers
 * gets the numbers seen; MD_NOTFOUND: no such contact. */
int ap_embed_read_contact(md_db *db, int64_t id, int *nnumbers, md_error *err);
int ap_ref_read_contact(md_db *db, int64_t id, int *nnumbers, md_error *err);
/* Add one number: $push to the embedded array, or insert into numbers. */
int ap_embed_add_number(md_db *db, int64_t id, const char *number, md_error *err);
int ap_ref_add_number(md_db *db, int64_t id, const char *number, md_error *err);
/* Delete: remove({_id}) (one statement), or the two removes. */
int ap_embed_delete_contact(md_db *db, int64_t id, md_error *err);
int ap_ref_delete_contact(md_db *db, int64_t id, md_error *err);
/* get_comments_by(author) over posts {_id, author, text, comments: [{author,
 * text}]}: find({"comments.author": a}, {comments: 1}) filtered in the
 * application; *n gets the comments found. */
int ap_embed_comments_by(md_db *db, const char *author, int *n, md_error *err);
/* The many-to-many compromise: product {_id, category_ids: [...]}, then
 * category.find({_id: {$in: ids}}); *n gets the categories. */
int ap_embed_product_categories(md_db *db, const char *product_id, int *n, md_error *err);

/* Full mutual embedding: save the product (replace, upsert), then $set
 * every copy embedded in category.products ('products.$', multi).
 * *categories (may be NULL): the categories updated. */
int ap_embed_save_product(md_db *db, const bson_t *product, int64_t *categories,
                          md_error *err);

/* ---- Ch.2 Polymorphic Schemas (ap_polymorphic.c) -------------------------- */
extern const ap_usecase ap_usecase_polymorphic;

/* nodes {_id, title, url, type: "page"|"photo", text | content};
 * index {url: 1} unique. */
int ap_poly_create_indexes(md_db *db, md_error *err);
int ap_poly_add_page(md_db *db, int64_t id, const char *title, const char *url,
                     const char *text, md_error *err);
int ap_poly_add_photo(md_db *db, int64_t id, const char *title, const char *url,
                      const void *content, size_t len, md_error *err);
/* find_one({url}) into *node (always initialized; caller destroys); the
 * lazy migration's setdefault('short_description', '') is applied to the
 * copy.  MD_NOTFOUND: no such url. */
int ap_poly_find_by_url(md_db *db, const char *url, bson_t *node, md_error *err);
/* The eager migration: update({}, {$set: {short_description: ''}}, multi). */
int ap_poly_migrate_eager(md_db *db, int64_t *modified, md_error *err);
/* One batch of the background migration: the _ids of 100 nodes without
 * short_description, then update({_id: {$in: ids}}, {$set}, multi).
 * *migrated gets the batch's size (0: done). */
int ap_poly_migrate_batch(md_db *db, int64_t *migrated, md_error *err);
/* Semi-structured properties as [name, value] pairs: products {_id,
 * properties: [[name, value], ...]}, index {properties: 1}; find the
 * products having the pair exactly. */
int ap_poly_add_product(md_db *db, int64_t id, const char *const (*props)[2], int n,
                        md_error *err);
int ap_poly_find_by_property(md_db *db, const char *name, const char *value, int64_t *n,
                             md_error *err);

/* ---- Ch.3 Mimicking Transactional Behavior (ap_txn.c) --------------------- */
extern const ap_usecase ap_usecase_txn;

/*
 * Failure points, as the Little Book's protocols have them: a call given
 * ap_tx_opts with crash_after = k stops right after its k-th write, as if
 * the client died there, and returns AP_CRASHED (a positive status).  The
 * periodic jobs (ap_tx_cleanup, ap_inv_expire_carts, ap_inv_cleanup)
 * restore the invariants after any such stop.
 */
#define AP_CRASHED 1
typedef struct ap_tx_opts {
    int crash_after;        /* stop after this many writes (0: never) */
    bool payment_fails;     /* checkout: collect_payment raises */
} ap_tx_opts;

/* A protocol's writes, counted for its failure point. */
typedef struct ap_steps {
    int done, crash_after;
} ap_steps;

/* Count one write: true when the client "dies" after it. */
static inline bool ap_crash_now(ap_steps *s)
{
    return s->crash_after > 0 && ++s->done >= s->crash_after;
}

/* Run one write of a protocol (expr sets nothing but its status): on an
 * error, or when the failure point is reached (rc = AP_CRASHED), go to the
 * caller's `out` label with `rc` set. */
#define AP_WRITE(s, expr)                                                             \
    do {                                                                              \
        rc = (expr);                                                                  \
        if (rc)                                                                       \
            goto out;                                                                 \
        if (ap_crash_now(s)) {                                                        \
            rc = AP_CRASHED;                                                          \
            goto out;                                                                 \
        }                                                                             \
    } while (0)

/* Complex updates: orders {_id, total, items: [{sku, price, qty}]}. */
int ap_order_increase_qty(md_db *db, const char *order_id, const char *sku, double price,
                          int32_t qty, md_error *err);

/* Optimistic update with compensation: accounts {_id, balance, txns:
 * [{_id: txn, amt: the change it made}]}, transactions {_id, state:
 * new|commit|rollback, ts, amt, src, dst}.
 * MD_NOTFOUND: insufficient funds (InsufficientFundsError) or the
 * transaction could not commit in time (TransactionError; it is rolled
 * back by the cleanup). */
int ap_tx_create_account(md_db *db, int64_t id, int64_t balance, md_error *err);
int ap_tx_transfer(md_db *db, int64_t amt, int64_t src, int64_t dst, int64_t max_txn_ms,
                   const ap_tx_opts *o, md_error *err);
/* cleanup_transactions: retire committed ones, roll back those still new
 * after max_txn_ms, undo account entries whose transaction is gone (a
 * late write of a rolled-back transfer).  *resolved (may be NULL) counts
 * them; run it until it resolves none to settle. */
int ap_tx_cleanup(md_db *db, int64_t max_txn_ms, int *resolved, md_error *err);
/* `settled` (no client running, cleanup run to the end): no transaction
 * left, no account holding a pending txn id, and the balances sum to
 * total.  Not settled: only that no money was created (sum <= total);
 * meaningful only while no client runs, since the accounts are read one
 * by one. */
int ap_tx_check(md_db *db, int64_t total, bool settled, md_error *err);

/* ---- Ch.5 Inventory Management (ap_inventory.c) --------------------------- */
extern const ap_usecase ap_usecase_inventory;

/* Inventory (2.6): product {_id: sku, qty, carted: [{qty, cart_id,
 * timestamp}]}, cart {_id, last_modified, status: active|pending|complete|
 * expiring|expired, items: [{sku, qty, details}]}.  Indexes
 * product {carted.cart_id: 1}, {carted.timestamp: 1}; cart {status: 1,
 * last_modified: 1}.  MD_NOTFOUND: CartInactive or InadequateInventory. */
int ap_inv_create_indexes(md_db *db, md_error *err);
int ap_inv_add_product(md_db *db, const char *sku, int32_t qty, md_error *err);
int ap_inv_new_cart(md_db *db, int64_t cart_id, md_error *err);
int ap_inv_add_item(md_db *db, int64_t cart_id, const char *sku, int32_t qty,
                    const ap_tx_opts *o, md_error *err);
int ap_inv_update_quantity(md_db *db, int64_t cart_id, const char *sku, int32_t old_qty,
                           int32_t new_qty, const ap_tx_opts *o, md_error *err);
int ap_inv_checkout(md_db *db, int64_t cart_id, const ap_tx_opts *o, md_error *err);
/* expire_carts(timeout): carts active and idle since now - timeout_ms go
 * expiring, give their stock back, go expired.  *n (may be NULL). */
int ap_inv_expire_carts(md_db *db, int64_t timeout_ms, int *n, md_error *err);
/* cleanup_inventory(timeout): carted entries older than now - timeout_ms
 * whose cart is not active are given back (or, for a complete cart,
 * pulled as sold).  *n (may be NULL) counts the entries resolved. */
int ap_inv_cleanup(md_db *db, int64_t timeout_ms, int *n, md_error *err);
/* Stock conserved: per product, qty + carted + sold (in complete carts)
 * equals initial[i] for skus "sku<i>"; no qty negative; `settled` also asks
 * that nothing is carted and no cart is pending, expiring or active with
 * items. */
int ap_inv_check(md_db *db, int nproducts, const int32_t *initial, bool settled,
                 md_error *err);

/* The concurrent workloads (tests, tsan_ap_txn.c): `threads` clients
 * each running `ops` random operations (transfers, or cart add / update /
 * checkout) with crash_pct% of them stopped part-way, every
 * `cleanup_every`-th op running the periodic job with a short timeout. */
typedef struct ap_tx_stress {
    int threads, ops, crash_pct, cleanup_every, naccounts, nproducts;
    int64_t timeout_ms;     /* max_txn_time / the cart and inventory timeouts */
    int64_t total;          /* accounts: the money in them (for reports) */
    uint64_t seed;
    int64_t ok, refused, crashed, cleanups, checkouts; /* results */
} ap_tx_stress;
int ap_tx_stress_accounts(md_db *db, ap_tx_stress *st, md_error *err);
int ap_tx_stress_inventory(md_db *db, ap_tx_stress *st, md_error *err);

/* One client thread of a stress run and its tallies. */
typedef struct ap_tx_client {
    md_db *db;
    ap_tx_stress *st;
    int index;
    int rc;
    md_error err;
    int64_t ok, refused, crashed, cleanups, checkouts;
} ap_tx_client;
/* Run min(st->threads, 64) clients, each client_main(ap_tx_client *), add
 * their tallies into st; the first client's error is returned. */
int ap_tx_run_clients(md_db *db, ap_tx_stress *st, void *(*client_main)(void *),
                      md_error *err);

/* ---- Ch.4 Storing Log Data (ap_logs.c) ------------------------------------ */
extern const ap_usecase ap_usecase_logs;

/* events {_id, host, time, path, referer, user_agent}. */
typedef struct ap_event {
    const char *host, *path, *referer, *user_agent;
    int64_t time_ms;
} ap_event;
/* insert(event, w=..., j=...): wc NULL for the default (w: 1). */
int ap_logs_insert(md_db *db, const ap_event *ev, const bson_t *wc, md_error *err);
/* insert([events]) in one batch (continue_on_error: ordered false). */
int ap_logs_insert_bulk(md_db *db, const ap_event *evs, int n, const bson_t *wc,
                        md_error *err);
/* find({path}); find({time: {$gte, $lt}}); find({host, time: {$gte, $lt}}):
 * *n gets the documents returned. */
int ap_logs_by_path(md_db *db, const char *path, int64_t *n, md_error *err);
int ap_logs_by_date(md_db *db, int64_t from_ms, int64_t to_ms, int64_t *n, md_error *err);
int ap_logs_by_host_date(md_db *db, const char *host, int64_t from_ms, int64_t to_ms,
                         int64_t *n, md_error *err);
/* The aggregate: hits per (path, y, m, d) in [from, to); *groups gets the
 * number of groups, *hits the sum of hits. */
int ap_logs_hits_by_day(md_db *db, int64_t from_ms, int64_t to_ms, int64_t *groups,
                        int64_t *hits, md_error *err);

/* Managing the growth: a capped collection of size_bytes; the TTL index
 * {time: 1} with expireAfterSeconds; rotation: with each period written to
 * events.<generation>, drop events.<generation - keep> (the book renames
 * instead; minidoc has no renameCollection). */
int ap_logs_create_capped(md_db *db, const char *coll, int64_t size_bytes, md_error *err);
int ap_logs_ttl_index(md_db *db, int32_t seconds, md_error *err);
int ap_logs_rotate(md_db *db, int generation, int keep, md_error *err);

/* ---- Ch.4 Pre-Aggregated Reports (ap_preagg.c) ---------------------------- */
extern const ap_usecase ap_usecase_preagg;

/* stats.daily {_id: "YYYYMMDD/site/page", metadata: {date, site, page},
 * hourly: {"0".."23"}, minute: {"0".."23": {"0".."59"}}}, stats.monthly
 * {_id: "YYYYMM/site/page", metadata, daily: {"1".."31"}}; indexes
 * {metadata.site, metadata.page, metadata.date} on both. */
int ap_preagg_create_indexes(md_db *db, md_error *err);
/* log_hit: the two upserts with $inc.  *daily_existed (may be NULL) gets
 * the daily update's updatedExisting. */
int ap_preagg_log_hit(md_db *db, int64_t t_ms, const char *site, const char *page,
                      bool *daily_existed, md_error *err);
/* preallocate: both documents with every counter at 0 ($inc by 0, upsert). */
int ap_preagg_preallocate(md_db *db, int64_t t_ms, const char *site, const char *page,
                          md_error *err);
/* log_hit preceded, with probability prob (the book's 1/500,000 per hit),
 * by preallocate of the next day's documents: spreads the preallocation
 * over the day instead of a spike at midnight.  *rng: the caller's
 * pt_rand_next stream; *preallocated (may be NULL): whether it did. */
int ap_preagg_log_hit_prob(md_db *db, int64_t t_ms, const char *site, const char *page,
                           double prob, uint64_t *rng, bool *preallocated, md_error *err);
/* find_one({metadata: {...}}, {hourly: 1}) of day t: the hour's counter in
 * *hits (0 if none). */
int ap_preagg_hourly(md_db *db, int64_t t_ms, const char *site, const char *page, int hour,
                     int64_t *hits, md_error *err);
/* find({metadata.date: {$gte, $lte}, metadata.site, metadata.page},
 * {metadata.date: 1, hourly: 1}) sorted by date: *days gets the
 * documents, *hits the sum of every hourly counter. */
int ap_preagg_range(md_db *db, int64_t from_ms, int64_t to_ms, const char *site,
                    const char *page, int64_t *days, int64_t *hits, md_error *err);
/* The month's daily counter of day t. */
int ap_preagg_monthly_day(md_db *db, int64_t t_ms, const char *site, const char *page,
                          int64_t *hits, md_error *err);

/* ---- Ch.4 Hierarchical Aggregation (ap_hieragg.c) ------------------------- */
extern const ap_usecase ap_usecase_hieragg;

/* events {userid, ts, length}; the cascade events -> stats.hourly ->
 * stats.daily -> stats.weekly, stats.monthly -> stats.yearly, each a
 * mapReduce with out {reduce}, over documents with last_run < ts (or
 * value.ts) < cutoff.  Indexes events {ts: 1}, stats.* {value.ts: 1}. */
int ap_hieragg_create_indexes(md_db *db, md_error *err);
int ap_hieragg_log(md_db *db, const char *userid, int64_t ts_ms, int32_t length,
                   md_error *err);
/* The book's other way to track what was aggregated: ids reserved 50 at a
 * time from a sequence document (findAndModify, $inc, upsert, new);
 * [*first, *end) are this caller's. */
int ap_hieragg_reserve_ids(md_db *db, int64_t *first, int64_t *end, md_error *err);
/* One run of the whole cascade with the book's last_run and cutoff. */
int ap_hieragg_run(md_db *db, int64_t last_run_ms, int64_t cutoff_ms, md_error *err);
/* Sum of value.total and value.count over a stats collection ("stats.daily"),
 * optionally one user's (NULL: all). */
int ap_hieragg_totals(md_db *db, const char *coll, const char *userid, int64_t *total,
                      int64_t *count, int64_t *docs, md_error *err);

/* ---- Ch.5 Product Catalog (ap_catalog.c) ---------------------------------- */
extern const ap_usecase ap_usecase_catalog;
#define AP_CATALOG_PRODUCTS "products"
/* The chapter's four indexes: pricing.pct_savings; {type, details.genre,
 * details.issue_date: -1}; {type, details.actor, details.issue_date: -1};
 * {type, details.issue_date: -1, title}. */
int ap_catalog_create_indexes(md_db *db, md_error *err);
/* An album or a film: {sku, type, title, description, asin, shipping,
 * pricing: {list, retail, savings, pct_savings}, details: {...}}; genre /
 * actors: n strings; issue_ms: details.issue_date. */
int ap_catalog_add_album(md_db *db, const char *sku, const char *title, const char *artist,
                         const char *const *genres, int ngenres, int64_t issue_ms,
                         int32_t list, int32_t retail, md_error *err);
int ap_catalog_add_film(md_db *db, const char *sku, const char *title,
                        const char *const *actors, int nactors, int64_t issue_ms,
                        int32_t list, int32_t retail, md_error *err);
/* The chapter's queries; each returns a cursor the caller destroys (never
 * NULL; errors via md_cursor_error):
 *   discounted   find({pricing.pct_savings: {$gt: pct}}).sort({pricing.pct_savings: -1})
 *   by_genre     find({type: 'Audio Album', details.genre}).sort({details.issue_date: -1})
 *   by_actor     find({type: 'Film', details.actor}).sort({details.issue_date: -1})
 *   title_regex  find({type: 'Film', title: {$regex, $options}}).sort({details.issue_date: -1}) */
md_cursor *ap_catalog_discounted(md_db *db, int32_t pct);
md_cursor *ap_catalog_by_genre(md_db *db, const char *genre);
md_cursor *ap_catalog_by_actor(md_db *db, const char *actor);
md_cursor *ap_catalog_title_regex(md_db *db, const char *regex, const char *options);
/* The filter and sort of those queries, for explain (both initialized here). */
void ap_catalog_title_query(const char *regex, const char *options, bson_t *filter,
                            bson_t *sort);

/* ---- Ch.5 Category Hierarchy (ap_category.c) ------------------------------ */
extern const ap_usecase ap_usecase_category;
#define AP_CATEGORIES "categories"
/* slug (unique) and ancestors._id. */
int ap_category_create_indexes(md_db *db, md_error *err);
/* Insert {name, slug, parent} (parent NULL: a root), then build_ancestors;
 * the new ObjectId in *id. */
int ap_category_add(md_db *db, const char *name, const char *slug, const bson_oid_t *parent,
                    bson_oid_t *id, md_error *err);
/* find({slug}, {_id: 0, name: 1, ancestors.slug: 1, ancestors.name: 1}):
 * the breadcrumbs into *doc (always initialized); MD_NOTFOUND. */
int ap_category_read(md_db *db, const char *slug, bson_t *doc, md_error *err);
/* Re-parent node under new_parent: $set parent, then rebuild the ancestors
 * of the node and of every descendant (build_subgraph +
 * update_node_and_descendants).  *updated (may be NULL): documents written. */
int ap_category_reparent(md_db *db, const bson_oid_t *node, const bson_oid_t *new_parent,
                         int64_t *updated, md_error *err);
/* Rename: $set name, then {ancestors._id: id} $set ancestors.$.name, multi.
 * *descendants (may be NULL): the multi update's modified count. */
int ap_category_rename(md_db *db, const bson_oid_t *id, const char *name,
                       int64_t *descendants, md_error *err);

/* ---- Ch.6 CMS: Metadata and Asset Management (ap_cms.c) ------------------- */
extern const ap_usecase ap_usecase_cms;
#define AP_CMS_NODES "cms.nodes"
#define AP_CMS_BUCKET "cms.assets"
/* cms.nodes {metadata.parent_id, metadata.slug} unique, {metadata.tags},
 * {metadata.parent_id, metadata.published: -1}; cms.assets.files
 * {metadata.parent_id, metadata.slug} unique and {metadata.tags}. */
int ap_cms_create_indexes(md_db *db, md_error *err);
/* Insert a node {metadata: {nonce, parent_id, slug, type, title, created,
 * author: {id, name}, tags, published, detail: {publish_on, text}}};
 * published_ms < 0 leaves metadata.published out.  *nonce (may be NULL):
 * the node's first nonce. */
int ap_cms_create_node(md_db *db, const char *parent_id, const char *slug, const char *type,
                       const char *title, const char *author, const char *const *tags,
                       int ntags, const char *text, int64_t published_ms, bson_oid_t *nonce,
                       md_error *err);
/* update_text: {parent_id, slug, nonce} $set text and a new nonce (in
 * *new_nonce).  MD_NOTFOUND: the book's ConflictError (another edit won). */
int ap_cms_update_text(md_db *db, const char *parent_id, const char *slug,
                       const bson_oid_t *nonce, const char *text, bson_oid_t *new_nonce,
                       md_error *err);
/* $addToSet: {metadata.tags: {$each: tags}} (the book's top-level "tags" is
 * an erratum: the node keeps its tags in metadata). */
int ap_cms_add_tags(md_db *db, const char *parent_id, const char *slug,
                    const char *const *tags, int ntags, md_error *err);
/* upload_new_photo: a GridFS file in cms.assets with contentType
 * image/jpeg and metadata {nonce, type: photo, locked: now, parent_id,
 * slug, title, ...}, streamed chunk by chunk, then unlocked ($set
 * metadata.locked: null).  *id (may be NULL) gets the file's _id. */
int ap_cms_upload_photo(md_db *db, const char *parent_id, const char *slug, const char *title,
                        const void *data, size_t len, bson_oid_t *id, md_error *err);
/* update_photo_content: the unlocked file (or one locked more than 300 s
 * ago) is deleted with its chunks and uploaded again with the same
 * metadata.  MD_NOTFOUND: the book's FileDoesNotExist (none, or locked). */
int ap_cms_replace_photo(md_db *db, const char *parent_id, const char *slug, const void *data,
                         size_t len, md_error *err);
/* get_version({metadata.parent_id, metadata.slug}): the photo's bytes
 * (malloc'ed, free them). */
int ap_cms_read_photo(md_db *db, const char *parent_id, const char *slug, void **data,
                      size_t *len, md_error *err);
/* The recent blog feed: {metadata.parent_id, metadata.published: {$lt:
 * now}} sorted {metadata.published: -1}; a cursor (never NULL). */
md_cursor *ap_cms_blog_feed(md_db *db, const char *parent_id, int64_t now_ms);

/* ---- Ch.6 CMS: Storing Comments (ap_comments.c) --------------------------- */
extern const ap_usecase ap_usecase_comments;
#define AP_COMMENTS "comments"
#define AP_COMMENT_PAGES "comment_pages"
#define AP_COMMENT_NODES "cms.nodes"
#define AP_COMMENTS_PER_PAGE 100
#define AP_COMMENT_SLUG_MAX 512 /* a threaded slug: parent slugs + 9 bytes a level */
int ap_comments_create_indexes(md_db *db, md_error *err);
/* The discussion's node: {_id: node, metadata: {comments: []},
 * num_comment_pages: 0}. */
int ap_comments_create_node(md_db *db, const bson_oid_t *node, md_error *err);
/* Approach 1, one document per comment.  post: threaded (parent_slug NULL
 * for a top-level comment); the comment's slug goes to slug_out
 * (AP_COMMENT_SLUG_MAX bytes; may be NULL).  MD_EINVAL: the thread is too
 * deep for that. */
int ap_comments_post_doc(md_db *db, const bson_oid_t *node, const char *parent_slug,
                         const char *author, const char *text, int64_t posted_ms,
                         char *slug_out, md_error *err);
/* paginate: find({node_id}).sort({posted: 1} or {full_slug: 1}).skip.limit
 * into *n documents; the first's slug into first_slug (64 B, may be NULL). */
int ap_comments_page_doc(md_db *db, const bson_oid_t *node, bool threaded, int64_t skip,
                         int64_t limit, int64_t *n, char *first_slug, md_error *err);
/* direct link: find_one({node_id, slug}) into *comment (always initialized). */
int ap_comments_link_doc(md_db *db, const bson_oid_t *node, const char *slug, bson_t *comment,
                         md_error *err);
/* Approach 2, embedded: $push metadata.comments. */
int ap_comments_post_embedded(md_db *db, const bson_oid_t *node, const char *slug,
                              const char *author, const char *text, int64_t posted_ms,
                              md_error *err);
/* paginate: find_one({_id}, {metadata.comments: {$slice: [skip, limit]}});
 * the page's size in *n and its first slug in first_slug (may be NULL). */
int ap_comments_page_embedded(md_db *db, const bson_oid_t *node, int64_t skip, int64_t limit,
                              int64_t *n, char *first_slug, md_error *err);
/* direct link by position: $slice [position, 1] (the book's [position,
 * position] is an erratum). */
int ap_comments_link_embedded(md_db *db, const bson_oid_t *node, int64_t position,
                              bson_t *comment, md_error *err);
/* Approach 2, threaded: the reply's path of positions (path[0] among the
 * top-level replies, path[1] among its replies, ...; n = 0: a top-level
 * comment) becomes the dotted field metadata.replies.<p0>.replies...
 * .replies, and the comment {slug, posted, author, text, replies: []} is
 * $pushed there. */
int ap_comments_post_embedded_threaded(md_db *db, const bson_oid_t *node, const int *path,
                                       int n, const char *slug, const char *author,
                                       const char *text, int64_t posted_ms, md_error *err);
/* The threaded direct link: the node's replies walked along path in the
 * application (MD_NOTFOUND: no comment there); *comment always initialized. */
int ap_comments_link_embedded_threaded(md_db *db, const bson_oid_t *node, const int *path,
                                       int n, bson_t *comment, md_error *err);
/* Approach 3, hybrid pages of ~100: post_comment with the node's
 * num_comment_pages as the caller last read it (*num_pages, updated). */
int ap_comments_post_bucket(md_db *db, const bson_oid_t *node, int64_t *num_pages,
                            const char *slug, const char *author, const char *text,
                            int64_t posted_ms, md_error *err);
/* find_comments(skip, limit): pages sorted by page, skipped in the
 * application; *n comments, the first's slug in first_slug (may be NULL). */
int ap_comments_page_bucket(md_db *db, const bson_oid_t *node, int64_t skip, int64_t limit,
                            int64_t *n, char *first_slug, md_error *err);
/* direct link: find_one({node_id, comments.slug}, {comments: 1}), then the
 * scan in the application. */
int ap_comments_link_bucket(md_db *db, const bson_oid_t *node, const char *slug,
                            bson_t *comment, md_error *err);

/* ---- Ch.7 Online Advertising (ap_ads.c) ----------------------------------- */
extern const ap_usecase ap_usecase_ads;
#define AP_AD_ZONE "ad.zone"
#define AP_AD_USER "ad.user"
/* ad.zone {site_id, zone_id} and {ads.campaign_id}. */
int ap_ads_create_indexes(md_db *db, md_error *err);
typedef struct ap_ad {
    const char *campaign_id, *ad_unit_id;
    int32_t ecpm;
    const char *const *keywords; /* design 3; may be NULL */
    int nkeywords;
} ap_ad;
/* A zone {site_id, zone_id, ads: [...]} (the ads sorted by ecpm desc here). */
int ap_ads_create_zone(md_db *db, const char *site_id, const char *zone_id, const ap_ad *ads,
                       int n, md_error *err);
/* Design 1 and 2: the chosen ad's ad_unit_id and campaign into the
 * buffers (64 B each); MD_NOTFOUND: no zone, no ad, or every ad capped for
 * this user (user_id NULL: design 1).  rng: the random tie-break stream. */
int ap_ads_choose(md_db *db, const char *site_id, const char *zone_id, const char *user_id,
                  int64_t now_ms, uint64_t *rng, char *ad_unit, char *campaign,
                  md_error *err);
/* Design 3: the best ad by ecpm * log(1.1 + matching keywords), capped as
 * design 2. */
int ap_ads_choose_keywords(md_db *db, const char *site_id, const char *zone_id,
                           const char *user_id, const char *const *keywords, int nkeywords,
                           int64_t now_ms, uint64_t *rng, char *ad_unit, md_error *err);
/* The impression log the book implies: update({_id: user}, {$push:
 * {advertisers.<adv>.impressions: {date, campaign, ad_unit_id, site_id,
 * zone_id}}}, upsert). */
int ap_ads_log_impression(md_db *db, const char *user_id, const char *campaign_id,
                          const char *ad_unit_id, const char *site_id, const char *zone_id,
                          int64_t now_ms, md_error *err);
/* deactivate_campaign: {ads.campaign_id} $pull, multi; *zones modified. */
int ap_ads_deactivate_campaign(md_db *db, const char *campaign_id, int64_t *zones,
                               md_error *err);

/* ---- Ch.8 Social Networking (ap_social.c) --------------------------------- */
extern const ap_usecase ap_usecase_social;
#define AP_SOCIAL_USER "social.user"
#define AP_SOCIAL_POST "social.post"
#define AP_SOCIAL_WALL "social.wall"
#define AP_SOCIAL_NEWS "social.news"
#define AP_COMMENTS_SHOWN 3
/* wall and news: {user_id, month: -1}, {posts.id}, {posts.comments_shown}. */
int ap_social_create_indexes(md_db *db, md_error *err);
/* {_id: id, name, profile: {}, followers: {}, circles: {}, blocked: []}. */
int ap_social_create_user(md_db *db, const char *id, const char *name, md_error *err);
/* circle_user / uncircle_user (both sides of the graph). */
int ap_social_circle(md_db *db, const char *self, const char *self_name, const char *other,
                     const char *other_name, const char *circle, md_error *err);
int ap_social_uncircle(md_db *db, const char *self, const char *other, const char *circle,
                       md_error *err);
/* The month documents a user's wall and news need ({user_id, month,
 * posts: []}, upserted: the book never shows their creation). */
int ap_social_ensure_month(md_db *db, const char *user_id, const char *month, md_error *err);
/* post(user, dest_user, type, text, circles): social.post insert, the
 * recipient's wall, and the fan-out to the followers' (or circles')
 * news: one multi update {user_id: {$in}, month} $push.  *fanout (may be
 * NULL): news documents modified.  *post_id (may be NULL): the post. */
int ap_social_post(md_db *db, const char *user, const char *dest_user, const char *month,
                   const char *text, const char *const *circles, int ncircles,
                   int64_t *fanout, bson_oid_t *post_id, md_error *err);
/* comment: social.post $push comments; wall and news {posts.id} $push
 * posts.$.comments, $inc posts.$.comments_shown, multi (the book's
 * top-level "comments" and its upsert are errata). */
int ap_social_comment(md_db *db, const bson_oid_t *post_id, const char *by, const char *name,
                      const char *text, md_error *err);
/* truncate_extra_comments on news and wall: rounds of $pop -1 until no
 * post shows more than AP_COMMENTS_SHOWN; *modified (may be NULL). */
int ap_social_truncate_comments(md_db *db, int64_t *modified, md_error *err);
/* get_posts(collection, user, month or NULL): the posts, newest month
 * first and each month reversed; *n posts, the first's text (64 B). */
int ap_social_get_posts(md_db *db, const char *coll, const char *user, const char *month,
                        int64_t *n, char *first_text, md_error *err);

/* ---- Ch.9 Online Gaming (ap_gaming.c) ------------------------------------- */
extern const ap_usecase ap_usecase_gaming;
#define AP_GAME_CHARACTER "character"
#define AP_GAME_LOCATION "location"
#define AP_GAME_ITEM "item"
/* The book's world: rooms maze-1..3, items (a backpack with its potions,
 * a hat, a robe, boots, a quarterstaff, a scroll in maze-1), the
 * character Tim in maze-1 with 523 gold, and a shopkeeper. */
int ap_gaming_seed(md_db *db, bson_oid_t *tim, bson_oid_t *shopkeeper, bson_oid_t *scroll,
                   bson_oid_t *backpack, bson_oid_t *potion, md_error *err);
/* pick_up_item (the multi-player-safe version): MD_NOTFOUND is the book's
 * Conflict (the item is no longer in the room). */
int ap_gaming_pick_up(md_db *db, const bson_oid_t *character, const bson_oid_t *item,
                      md_error *err);
/* move_to_active_inventory: out of a container. MD_NOTFOUND: Conflict. */
int ap_gaming_move_to_active(md_db *db, const bson_oid_t *character,
                             const bson_oid_t *container, const bson_oid_t *item,
                             md_error *err);
/* move(character, direction): MD_NOTFOUND if there is no such exit. */
int ap_gaming_move(md_db *db, const bson_oid_t *character, const char *direction,
                   md_error *err);
/* buy: guarded debit, pick up (rolled back on failure), credit the
 * shopkeeper.  MD_NOTFOUND: InsufficientFunds or Conflict (gold restored). */
int ap_gaming_buy(md_db *db, const bson_oid_t *character, const bson_oid_t *shopkeeper,
                  const bson_oid_t *item, md_error *err);
/* The display data: armor by region and weapons by hand, described
 * ("+3 wizard's hat"), from the item index over the character's and the
 * room's inventories.  Writes e.g. "head=+3 wizard's hat;body=...;both=+2
 * quarterstaff" into buf. */
int ap_gaming_display(md_db *db, const bson_oid_t *character, char *buf, size_t size,
                      md_error *err);

#endif /* AP_H */
