/*
 * ap.h -- "MongoDB Applied Design Patterns" (Copeland, 2013): its design
 * rules (part I, chapters 1-3) and its use cases (part II, chapters 4-9),
 * as a library a reader can call, and the measurements that turn each
 * chapter's claims into numbers on both engines.
 *
 * One module per use case, patterns/ap_<name>.c, through the public API
 * only (include/minidoc.h): the book's schema, its Python translated
 * statement by statement (the same filters, updates, upserts, multi,
 * positional updates, sorts and indexes).  Where the book's code has an
 * erratum (the digest marks them [sic]) the module follows the corrected
 * form and says so in a comment.
 *
 * The book has no simulator tables, so its use cases are not pt_scenarios:
 * each has a `measure` that runs the chapter's operations on a fresh
 * database and records named numbers (ap_result), and a list of the
 * chapter's claims, each judged on one engine's numbers:
 *
 *   ap_usecases[] ---> ap_usecase (one per use case, book order)
 *                        |-- measure(db, args) -> ap_result (metrics)
 *                        |-- claims[] ---> ap_claim
 *                                            |-- the book's words
 *                                            |-- judge(result) -> holds /
 *                                                does not hold / n.a.,
 *                                                with the numbers
 *
 * build/patterns (runner.c) runs every use case on mmapv1 and btree after
 * the Little Book's scenarios and writes the second part of patterns.md.
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

/* One measured number: "inserts_per_s_w1" = 41234.5 "inserts/s". */
typedef struct ap_metric {
    char name[48];
    double value;
    const char *unit; /* static string */
} ap_metric;

/* One use case measured on one engine. */
typedef struct ap_result {
    char engine[32];
    int nmetrics;
    ap_metric m[AP_MAX_METRICS];
    double seconds;        /* wall time of measure() */
    int rc;                /* measure()'s result (0: ran) */
    char error[256];       /* when rc != 0 */
} ap_result;

typedef struct ap_args {
    bool quick;            /* a few seconds per use case and engine */
    uint64_t seed;
} ap_args;

/* Record (or overwrite) a metric. */
void ap_set(ap_result *r, const char *name, double value, const char *unit);
/* A metric's value, NAN when it was not recorded. */
double ap_get(const ap_result *r, const char *name);

typedef enum ap_verdict { AP_NA = 0, AP_HOLDS, AP_FAILS } ap_verdict;
const char *ap_verdict_name(ap_verdict v); /* "holds", "does not hold", "n/a" */

/* One claim of the chapter. */
typedef struct ap_claim {
    const char *claim;     /* the book's statement, quoted or summarized */
    /* Judge it on one engine's numbers; `measured` gets a sentence with
     * the numbers that decide it (always filled). */
    ap_verdict (*judge)(const ap_result *r, char *measured, size_t n);
} ap_claim;

#define AP_MAX_CLAIMS 12

typedef struct ap_usecase {
    const char *name;      /* --scenario NAME, e.g. "ap_logs" */
    const char *chapter;   /* "Ch.4 Operational Intelligence" (its own part of the report) */
    const char *title;     /* "Storing Log Data" */
    const char *pages;     /* "pp.37-52" */
    int (*measure)(md_db *db, const ap_args *a, ap_result *r, md_error *err);
    int nclaims;
    ap_claim claims[AP_MAX_CLAIMS];
} ap_usecase;

/* Every use case, in the book's order; NULL-terminated (ap_registry.c). */
extern const ap_usecase *const ap_usecases[];

/* The verdict of a use case on one engine: AP_HOLDS when every applicable
 * claim holds, AP_FAILS when one does not, AP_NA when none applies. */
ap_verdict ap_usecase_verdict(const ap_usecase *uc, const ap_result *r, int *held, int *judged);

/*
 * Run one use case on `engine` in a fresh temporary database (journal and
 * log on, as MongoDB 3.x by default; removed after): r is filled.  0 when
 * it ran (r->rc tells whether measure succeeded), negative when the
 * database could not be opened.
 */
int ap_run_usecase(const ap_usecase *uc, const char *engine, const ap_args *a, ap_result *r,
                   md_error *err);

/* ---- shared helpers (ap_common.c) ------------------------------------------ */

/* Monotonic seconds, for timing. */
double ap_now_s(void);
/* An update as the book's pymongo writes it, through update_one or
 * update_many ({multi}) with {upsert}; *updated_existing (may be NULL)
 * gets getLastError's updatedExisting (an existing document matched),
 * *n (may be NULL) the matched or upserted count. */
int ap_update(md_db *db, const char *coll, const bson_t *q, const bson_t *u, bool upsert,
              bool multi, bool *updated_existing, int64_t *n, md_error *err);
/* insert(doc) with an optional writeConcern document (NULL: the default). */
int ap_insert(md_db *db, const char *coll, const bson_t *doc, const bson_t *wc, md_error *err);
/* remove(q) (all matches); *n (may be NULL) the deleted count. */
int ap_remove(md_db *db, const char *coll, const bson_t *q, int64_t *n, md_error *err);
/* Count the documents a find returns (opts as for find: sort, limit,
 * projection...). */
int ap_count_find(md_db *db, const char *coll, const bson_t *filter, const bson_t *opts,
                  int64_t *n, md_error *err);

/* What explain (executionStats) says about a find. */
typedef struct ap_explain {
    char index[128];        /* the winning plan's index name, "" for a COLLSCAN */
    int64_t keys_examined;  /* totalKeysExamined (the book's nscanned) */
    int64_t docs_examined;  /* totalDocsExamined (nscannedObjects) */
    int64_t n_returned;     /* nReturned (n) */
    int64_t millis;         /* executionTimeMillis */
} ap_explain;
/* explain({find: coll, filter, sort?, hint?}, "executionStats"); sort and
 * hint may be NULL. */
int ap_explain_find(md_db *db, const char *coll, const bson_t *filter, const bson_t *sort,
                    const bson_t *hint, ap_explain *out, md_error *err);
/* collStats' size (data bytes), count and the record moves counted so far
 * (serverStatus metrics.record.moves) and bytes the engine wrote (the
 * collection's stats). */
typedef struct ap_coll_stats {
    int64_t count, size, storage_size, moves, bytes_written, updates, in_place;
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

#endif /* AP_H */
