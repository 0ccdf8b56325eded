/*
 * ap_txn.c -- Ch.3 "Mimicking Transactional Behavior": complex updates
 * inside one document (an order's line and total changed by one update)
 * and, where two documents must change together, optimistic update with
 * compensation -- the book's application-level two-phase commit:
 *
 *   transactions {_id, state, ts, amt, src, dst}
 *   accounts     {_id, balance, txns: [pending transaction ids]}
 *
 *   prepare   insert txn (new); src: {balance >= amt} -amt, push id;
 *             dst: +amt, push id
 *   commit    txn {state new, ts > now - max}: state commit (else the
 *             transaction is left to the cleanup: TransactionError)
 *   retire    pull id from src and dst, remove txn (idempotent)
 *   cleanup   retire every commit; new ones older than max -> rollback;
 *             roll back every rollback: undo each side still holding the
 *             id, remove txn (idempotent: the id in the query guards it);
 *             then undo entries whose transaction is gone (below)
 *
 *       new ----commit----> commit ----retire----> (removed)
 *        |
 *        +--(timed out)--> rollback --rollback_transfer--> (removed)
 *
 * Errata followed corrected: `transaction`/`transactions`, `txnid`/
 * `txn_id` and `dest` are one name each; prepare pushes a subdocument
 * {_id: txn id, amt: the change it made}, which is what the book's own
 * guards ('txns._id': id) and rollback pulls ({txns: {_id: id}}) query
 * (its prepare pushes the bare id, which they never match); cleanup rolls
 * back every timed-out transaction (a multi update), not one `txnid`;
 * increase_qty adds `total_update`, not its literal 110.22.
 *
 * One addition, because the book's prepare assumes it finishes within
 * max_txn_time: a cleanup may roll a slow transaction back and remove it
 * between the client's debit and its credit, and the credit then lands
 * for a transaction that no longer exists (money created).  The cleanup
 * therefore also sweeps the accounts for entries whose transaction is
 * gone and undoes them by the amount the entry records (an entry is
 * pushed only after its transaction is inserted, and retire pulls both
 * entries before it removes the transaction, so such an entry is always a
 * late credit or debit of a rolled-back transfer).

 * What the protocol does not promise, measured rather than hidden: the
 * credit happens before the commit, so the destination may spend money
 * that a rollback later takes back (a balance may go below zero).
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "ap.h"

#define ACCOUNTS "accounts"
#define TXNS "transactions"

/* ---- complex updates ------------------------------------------------------------- */

int ap_order_increase_qty(md_db *db, const char *order_id, const char *sku, double price,
                          int32_t qty, md_error *err)
{
    double total_update = price * qty;
    for (int tries = 0; tries < 100; tries++) {
        bool ok;
        bson_t *q = BCON_NEW("_id", BCON_UTF8(order_id), "items.sku", BCON_UTF8(sku));
        bson_t *u = BCON_NEW("$inc", "{", "total", BCON_DOUBLE(total_update), "items.$.qty",
                             BCON_INT32(qty), "}");
        int rc = ap_update(db, "orders", q, u, false, false, &ok, NULL, NULL, NULL, err);
        bson_destroy(q);
        bson_destroy(u);
        if (rc || ok)
            return rc;
        q = BCON_NEW("_id", BCON_UTF8(order_id), "items.sku", "{", "$ne", BCON_UTF8(sku), "}");
        u = BCON_NEW("$inc", "{", "total", BCON_DOUBLE(total_update), "}", "$push", "{",
                     "items", "{", "sku", BCON_UTF8(sku), "qty", BCON_INT32(qty), "price",
                     BCON_DOUBLE(price), "}", "}");
        rc = ap_update(db, "orders", q, u, false, false, &ok, NULL, NULL, NULL, err);
        bson_destroy(q);
        bson_destroy(u);
        if (rc || ok)
            return rc;
        /* Neither matched: the order is gone (or a racer moved between). */
        int64_t n = 0;
        q = BCON_NEW("_id", BCON_UTF8(order_id));
        rc = ap_find(db, "orders", q, NULL, &n, NULL, err);
        bson_destroy(q);
        if (rc)
            return rc;
        if (n == 0)
            return md_error_set(err, MD_NOTFOUND, MD_CODE_BAD_VALUE, "no order %s", order_id);
    }
    return md_error_set(err, MD_ERROR, MD_CODE_INTERNAL_ERROR, "increase_qty kept racing");
}

/* ---- the two-phase transfer --------------------------------------------------------- */

int ap_tx_create_account(md_db *db, int64_t id, int64_t balance, md_error *err)
{
    bson_t *d = BCON_NEW("_id", BCON_INT64(id), "balance", BCON_INT64(balance), "txns", "[",
                         "]");
    int rc = ap_insert(db, ACCOUNTS, d, NULL, err);
    bson_destroy(d);
    if (rc == 0) {
        bson_t *k = BCON_NEW("state", BCON_INT32(1));
        rc = pt_ensure_index(db, TXNS, k, NULL, err);
        bson_destroy(k);
    }
    return rc;
}

/* {_id: acct, 'txns._id': id} -> $inc balance by `delta`, $pull {txns: {_id: id}}. */
static int undo_side(md_db *db, int64_t acct, const bson_oid_t *id, int64_t delta,
                     md_error *err)
{
    bson_t *q = BCON_NEW("_id", BCON_INT64(acct), "txns._id", BCON_OID(id));
    bson_t *u = BCON_NEW("$inc", "{", "balance", BCON_INT64(delta), "}", "$pull", "{", "txns",
                         "{", "_id", BCON_OID(id), "}", "}");
    int rc = ap_update(db, ACCOUNTS, q, u, false, false, NULL, NULL, NULL, NULL, err);
    bson_destroy(q);
    bson_destroy(u);
    return rc;
}

static int remove_txn(md_db *db, const bson_oid_t *id, md_error *err)
{
    bson_t *q = BCON_NEW("_id", BCON_OID(id));
    int rc = ap_remove(db, TXNS, q, NULL, err);
    bson_destroy(q);
    return rc;
}

static int prepare(md_db *db, const bson_oid_t *id, int64_t amt, int64_t src, int64_t dst,
                   ap_steps *s, md_error *err)
{
    int rc;
    bool ok;
    bson_t *txn = BCON_NEW("_id", BCON_OID(id), "state", BCON_UTF8("new"), "ts",
                           BCON_DATE_TIME(pt_now_ms()), "amt", BCON_INT64(amt), "src",
                           BCON_INT64(src), "dst", BCON_INT64(dst));
    bson_t *q = BCON_NEW("_id", BCON_INT64(src), "balance", "{", "$gte", BCON_INT64(amt), "}");
    bson_t *u = BCON_NEW("$inc", "{", "balance", BCON_INT64(-amt), "}", "$push", "{", "txns",
                         "{", "_id", BCON_OID(id), "amt", BCON_INT64(-amt), "}", "}");
    bson_t *q2 = BCON_NEW("_id", BCON_INT64(dst));
    bson_t *u2 = BCON_NEW("$inc", "{", "balance", BCON_INT64(amt), "}", "$push", "{", "txns",
                          "{", "_id", BCON_OID(id), "amt", BCON_INT64(amt), "}", "}");
    AP_WRITE(s, ap_insert(db, TXNS, txn, NULL, err));
    AP_WRITE(s, ap_update(db, ACCOUNTS, q, u, false, false, &ok, NULL, NULL, NULL, err));
    if (!ok) {
        AP_WRITE(s, remove_txn(db, id, err));
        rc = md_error_set(err, MD_NOTFOUND, MD_CODE_BAD_VALUE,
                          "InsufficientFundsError: account %lld", (long long)src);
        goto out;
    }
    AP_WRITE(s, ap_update(db, ACCOUNTS, q2, u2, false, false, NULL, NULL, NULL, NULL, err));
out:
    bson_destroy(txn);
    bson_destroy(q);
    bson_destroy(u);
    bson_destroy(q2);
    bson_destroy(u2);
    return rc;
}

static int retire(md_db *db, const bson_oid_t *id, int64_t src, int64_t dst, ap_steps *s,
                  md_error *err)
{
    int rc;
    bson_t *q1 = BCON_NEW("_id", BCON_INT64(src), "txns._id", BCON_OID(id));
    bson_t *q2 = BCON_NEW("_id", BCON_INT64(dst), "txns._id", BCON_OID(id));
    bson_t *u = BCON_NEW("$pull", "{", "txns", "{", "_id", BCON_OID(id), "}", "}");
    AP_WRITE(s, ap_update(db, ACCOUNTS, q1, u, false, false, NULL, NULL, NULL, NULL, err));
    AP_WRITE(s, ap_update(db, ACCOUNTS, q2, u, false, false, NULL, NULL, NULL, NULL, err));
    AP_WRITE(s, remove_txn(db, id, err));
out:
    bson_destroy(q1);
    bson_destroy(q2);
    bson_destroy(u);
    return rc;
}

static int rollback(md_db *db, const bson_oid_t *id, int64_t amt, int64_t src, int64_t dst,
                    ap_steps *s, md_error *err)
{
    int rc;
    AP_WRITE(s, undo_side(db, src, id, amt, err));
    AP_WRITE(s, undo_side(db, dst, id, -amt, err));
    AP_WRITE(s, remove_txn(db, id, err));
out:
    return rc;
}

int ap_tx_transfer(md_db *db, int64_t amt, int64_t src, int64_t dst, int64_t max_txn_ms,
                   const ap_tx_opts *o, md_error *err)
{
    ap_steps s = {0, o ? o->crash_after : 0};
    bson_oid_t id;
    bool ok;
    int rc;
    bson_oid_init(&id, NULL);
    rc = prepare(db, &id, amt, src, dst, &s, err);
    if (rc)
        return rc;
    bson_t *q = BCON_NEW("_id", BCON_OID(&id), "state", BCON_UTF8("new"), "ts", "{", "$gt",
                         BCON_DATE_TIME(pt_now_ms() - max_txn_ms), "}");
    bson_t *u = BCON_NEW("$set", "{", "state", BCON_UTF8("commit"), "}");
    AP_WRITE(&s, ap_update(db, TXNS, q, u, false, false, &ok, NULL, NULL, NULL, err));
    if (!ok)
        rc = md_error_set(err, MD_NOTFOUND, MD_CODE_BAD_VALUE,
                          "TransactionError: not committed within %lld ms",
                          (long long)max_txn_ms);
    else
        rc = retire(db, &id, src, dst, &s, err);
out:
    bson_destroy(q);
    bson_destroy(u);
    return rc;
}

/* The fields of a transaction document. */
static bool txn_fields(const bson_t *d, bson_oid_t *id, int64_t *amt, int64_t *src,
                       int64_t *dst)
{
    bson_iter_t it;
    bool ok = true;
    ok = ok && bson_iter_init_find(&it, d, "_id") && BSON_ITER_HOLDS_OID(&it);
    if (ok)
        bson_oid_copy(bson_iter_oid(&it), id);
    ok = ok && bson_iter_init_find(&it, d, "amt") && BSON_ITER_HOLDS_NUMBER(&it);
    if (ok)
        *amt = bson_iter_as_int64(&it);
    ok = ok && bson_iter_init_find(&it, d, "src") && BSON_ITER_HOLDS_NUMBER(&it);
    if (ok)
        *src = bson_iter_as_int64(&it);
    ok = ok && bson_iter_init_find(&it, d, "dst") && BSON_ITER_HOLDS_NUMBER(&it);
    if (ok)
        *dst = bson_iter_as_int64(&it);
    return ok;
}

/* Run retire or rollback on every transaction in `state`. */
static int each_in_state(md_db *db, const char *state, int *n, md_error *err)
{
    bson_t *q = BCON_NEW("state", BCON_UTF8(state));
    bson_t *batch[256];
    int k;
    int rc = ap_find_copies(db, TXNS, q, batch, 256, &k, err);
    bson_destroy(q);
    for (int i = 0; i < k; i++) {
        bson_oid_t id;
        int64_t amt, src, dst;
        ap_steps s = {0, 0};
        if (rc == 0 && txn_fields(batch[i], &id, &amt, &src, &dst)) {
            rc = strcmp(state, "commit") == 0 ? retire(db, &id, src, dst, &s, err)
                                              : rollback(db, &id, amt, src, dst, &s, err);
            (*n)++;
        }
        bson_destroy(batch[i]);
    }
    return rc;
}

/* Undo every account entry whose transaction is gone (this file's header). */
static int sweep_orphans(md_db *db, int *n, md_error *err)
{
    bson_t *q = BCON_NEW("txns.0", "{", "$exists", BCON_BOOL(true), "}");
    bson_t *batch[256];
    int k;
    int rc = ap_find_copies(db, ACCOUNTS, q, batch, 256, &k, err);
    bson_destroy(q);
    for (int i = 0; i < k; i++) {
        bson_iter_t it, arr, f;
        int64_t acct = bson_iter_init_find(&it, batch[i], "_id") ? bson_iter_as_int64(&it) : 0;
        if (rc == 0 && bson_iter_init_find(&it, batch[i], "txns") &&
            bson_iter_recurse(&it, &arr))
            while (rc == 0 && bson_iter_next(&arr)) {
                bson_oid_t id;
                int64_t amt;
                if (!bson_iter_recurse(&arr, &f) || !bson_iter_find(&f, "_id") ||
                    !BSON_ITER_HOLDS_OID(&f))
                    continue;
                bson_oid_copy(bson_iter_oid(&f), &id);
                if (!bson_iter_recurse(&arr, &f) || !bson_iter_find(&f, "amt"))
                    continue;
                amt = bson_iter_as_int64(&f);
                bson_t doc, *tq = BCON_NEW("_id", BCON_OID(&id));
                rc = pt_find_one(db, TXNS, tq, NULL, &doc, err);
                bson_destroy(&doc);
                bson_destroy(tq);
                if (rc == MD_NOTFOUND) {
                    rc = undo_side(db, acct, &id, -amt, err);
                    (*n)++;
                }
            }
        bson_destroy(batch[i]);
    }
    return rc;
}

int ap_tx_cleanup(md_db *db, int64_t max_txn_ms, int *resolved, md_error *err)
{
    int n = 0;
    int rc = each_in_state(db, "commit", &n, err);
    if (rc == 0) {
        bson_t *q = BCON_NEW("state", BCON_UTF8("new"), "ts", "{", "$lt",
                             BCON_DATE_TIME(pt_now_ms() - max_txn_ms), "}");
        bson_t *u = BCON_NEW("$set", "{", "state", BCON_UTF8("rollback"), "}");
        rc = ap_update(db, TXNS, q, u, false, true, NULL, NULL, NULL, NULL, err);
        bson_destroy(q);
        bson_destroy(u);
    }
    if (rc == 0)
        rc = each_in_state(db, "rollback", &n, err);
    if (rc == 0)
        rc = sweep_orphans(db, &n, err);
    if (resolved)
        *resolved = n;
    return rc;
}

int ap_tx_check(md_db *db, int64_t total, bool settled, md_error *err)
{
    bson_t q = BSON_INITIALIZER;
    md_collection *c = md_db_get_collection(db, ACCOUNTS);
    md_cursor *cur = md_collection_find_with_opts(c, &q, NULL);
    const bson_t *d;
    int64_t sum = 0, pending = 0;
    int rc = 0;
    while (md_cursor_next(cur, &d)) {
        bson_iter_t it, a;
        if (bson_iter_init_find(&it, d, "balance") && BSON_ITER_HOLDS_NUMBER(&it))
            sum += bson_iter_as_int64(&it);
        if (bson_iter_init_find(&it, d, "txns") && bson_iter_recurse(&it, &a))
            while (bson_iter_next(&a))
                pending++;
    }
    if (md_cursor_error(cur, err))
        rc = MD_ERROR;
    md_cursor_destroy(cur);
    md_collection_destroy(c);
    if (rc)
        return rc;
    if (settled) {
        int64_t left = 0;
        rc = ap_find(db, TXNS, &q, NULL, &left, NULL, err);
        if (rc)
            return rc;
        if (left || pending)
            return md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE,
                                "not settled: %lld transactions, %lld pending ids in accounts",
                                (long long)left, (long long)pending);
        if (sum != total)
            return md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE,
                                "money not conserved: balances sum to %lld, not %lld",
                                (long long)sum, (long long)total);
    } else if (sum > total) {
        return md_error_set(err, MD_ERROR, MD_CODE_BAD_VALUE,
                            "money created: balances sum to %lld > %lld", (long long)sum,
                            (long long)total);
    }
    return 0;
}

/* ---- the concurrent workload --------------------------------------------------------- */

static void *tx_client_main(void *arg)
{
    ap_tx_client *c = arg;
    ap_tx_stress *st = c->st;
    uint64_t rng = st->seed * 7919 + (uint64_t)c->index + 1;
    for (int i = 0; i < st->ops && c->rc == 0; i++) {
        if (st->cleanup_every && i % st->cleanup_every == st->cleanup_every - 1) {
            c->rc = ap_tx_cleanup(c->db, st->timeout_ms, NULL, &c->err);
            c->cleanups++;
            continue;
        }
        int64_t src = (int64_t)(pt_rand_next(&rng) % (uint64_t)st->naccounts);
        int64_t dst = (src + 1 + (int64_t)(pt_rand_next(&rng) % (uint64_t)(st->naccounts - 1))) %
                      st->naccounts;
        int64_t amt = 1 + (int64_t)(pt_rand_next(&rng) % 40);
        ap_tx_opts o = {0};
        if ((int)(pt_rand_next(&rng) % 100) < st->crash_pct)
            o.crash_after = 1 + (int)(pt_rand_next(&rng) % 6);
        md_error e;
        int rc = ap_tx_transfer(c->db, amt, src, dst, st->timeout_ms, &o, &e);
        if (rc == 0)
            c->ok++;
        else if (rc == MD_NOTFOUND)
            c->refused++;
        else if (rc == AP_CRASHED)
            c->crashed++;
        else {
            c->rc = rc;
            c->err = e;
        }
    }
    return NULL;
}

int ap_tx_run_clients(md_db *db, ap_tx_stress *st, void *(*client_main)(void *),
                      md_error *err)
{
    ap_tx_client cs[64];
    pthread_t th[64];
    int n = st->threads < 64 ? st->threads : 64, rc = 0;
    memset(cs, 0, sizeof cs);
    for (int i = 0; i < n; i++) {
        cs[i] = (ap_tx_client){.db = db, .st = st, .index = i};
        pthread_create(&th[i], NULL, client_main, &cs[i]);
    }
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        st->ok += cs[i].ok;
        st->refused += cs[i].refused;
        st->crashed += cs[i].crashed;
        st->cleanups += cs[i].cleanups;
        st->checkouts += cs[i].checkouts;
        if (cs[i].rc && rc == 0) {
            rc = cs[i].rc;
            if (err)
                *err = cs[i].err;
        }
    }
    return rc;
}

int ap_tx_stress_accounts(md_db *db, ap_tx_stress *st, md_error *err)
{
    if (st->naccounts < 2)
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE, "need two accounts");
    return ap_tx_run_clients(db, st, tx_client_main, err);
}

/* ---- the measurement ------------------------------------------------------------------ */

static int measure(md_db *db, const ap_args *a, ap_result *r, md_error *err)
{
    int rc = 0, naccounts = 8;
    for (int i = 0; i < naccounts && rc == 0; i++)
        rc = ap_tx_create_account(db, i, 1000, err);
    /* One document, one update: the order's line and total together. */
    bson_t *o = BCON_NEW("_id", BCON_UTF8("11223"), "total", BCON_DOUBLE(0), "items", "[", "]");
    if (rc == 0)
        rc = ap_insert(db, "orders", o, NULL, err);
    bson_destroy(o);
    double t0 = ap_now_s();
    int nq = a->quick ? 500 : 5000;
    for (int i = 0; i < nq && rc == 0; i++) {
        char sku[16];
        snprintf(sku, sizeof sku, "%d", i % 7);
        rc = ap_order_increase_qty(db, "11223", sku, 1.25, 2, err);
    }
    if (rc)
        return rc;
    ap_set(r, "increase_qty_us", (ap_now_s() - t0) * 1e6 / nq, "us/op");
    bson_t doc, *q = BCON_NEW("_id", BCON_UTF8("11223"));
    rc = pt_find_one(db, "orders", q, NULL, &doc, err);
    bson_destroy(q);
    if (rc == 0) {
        bson_iter_t it, arr;
        double total = 0;
        int lines = 0;
        int64_t qty = 0;
        if (bson_iter_init_find(&it, &doc, "total"))
            total = bson_iter_as_double(&it);
        if (bson_iter_init_find(&it, &doc, "items") && bson_iter_recurse(&it, &arr))
            while (bson_iter_next(&arr)) {
                bson_iter_t f;
                lines++;
                if (bson_iter_recurse(&arr, &f) && bson_iter_find(&f, "qty"))
                    qty += bson_iter_as_int64(&f);
            }
        ap_set(r, "order_lines", lines, "lines");
        ap_set(r, "order_total_consistent", total == qty * 1.25 && qty == 2 * nq, "bool");
    }
    bson_destroy(&doc);
    if (rc)
        return rc;
    /* The transfer, sequential: its writes and its time. */
    int nt = a->quick ? 300 : 3000;
    t0 = ap_now_s();
    for (int i = 0; i < nt && rc == 0; i++) {
        rc = ap_tx_transfer(db, 1, i % naccounts, (i + 1) % naccounts, 60000, NULL, err);
    }
    if (rc)
        return rc;
    ap_set(r, "transfer_us", (ap_now_s() - t0) * 1e6 / nt, "us/transfer");
    ap_set(r, "transfer_writes", 7, "writes");
    /* Concurrent clients with failures injected, then the cleanup. */
    ap_tx_stress st = {.threads = 6, .ops = a->quick ? 150 : 1500, .crash_pct = 15,
                       .cleanup_every = 10, .naccounts = naccounts, .timeout_ms = 20,
                       .seed = a->seed, .total = 1000LL * naccounts};
    t0 = ap_now_s();
    rc = ap_tx_stress_accounts(db, &st, err);
    if (rc)
        return rc;
    ap_set(r, "stress_s", ap_now_s() - t0, "s");
    int resolved;
    do {
        rc = ap_tx_cleanup(db, -1000, &resolved, err);
    } while (rc == 0 && resolved > 0);
    if (rc)
        return rc;
    ap_set(r, "stress_transfers_ok", (double)st.ok, "transfers");
    ap_set(r, "stress_refused", (double)st.refused, "transfers");
    ap_set(r, "stress_crashed", (double)st.crashed, "transfers");
    md_error cerr;
    ap_set(r, "stress_invariant_ok", ap_tx_check(db, st.total, true, &cerr) == 0, "bool");
    int64_t neg = 0;
    bson_t *nq2 = BCON_NEW("balance", "{", "$lt", BCON_INT32(0), "}");
    rc = ap_find(db, ACCOUNTS, nq2, NULL, &neg, NULL, err);
    bson_destroy(nq2);
    ap_set(r, "negative_balances", (double)neg, "accounts");
    return rc;
}

static ap_verdict c_complex(const ap_result *r, char *m, size_t n)
{
    double ok = ap_get(r, "order_total_consistent");
    snprintf(m, n, "increase_qty ($inc total and items.$.qty in one update, else $push the "
                   "line where items.sku $ne): %.0f lines, total %s, %.1f us per call",
             ap_get(r, "order_lines"), ok == 1 ? "consistent" : "INCONSISTENT",
             ap_get(r, "increase_qty_us"));
    return ok == 1 && ap_get(r, "order_lines") == 7 ? AP_HOLDS : AP_FAILS;
}

static ap_verdict c_2pc(const ap_result *r, char *m, size_t n)
{
    double ok = ap_get(r, "stress_invariant_ok");
    snprintf(m, n, "6 clients, %.0f transfers done, %.0f refused or rolled back, %.0f stopped "
                   "part-way; after the cleanup the balances %s and no transaction is left",
             ap_get(r, "stress_transfers_ok"), ap_get(r, "stress_refused"),
             ap_get(r, "stress_crashed"), ok == 1 ? "sum to the start" : "DO NOT sum up");
    return ok == 1 ? AP_HOLDS : AP_FAILS;
}

static ap_verdict c_cost(const ap_result *r, char *m, size_t n)
{
    double t = ap_get(r, "transfer_us"), q = ap_get(r, "increase_qty_us");
    snprintf(m, n, "a transfer (7 writes over 2 collections) took %.1f us, a one-document "
                   "update %.1f us (x%.1f)",
             t, q, t / q);
    return t > 2 * q ? AP_HOLDS : AP_FAILS;
}

static ap_verdict c_isolation(const ap_result *r, char *m, size_t n)
{
    double neg = ap_get(r, "negative_balances");
    snprintf(m, n, "%.0f accounts ended below zero: a rollback took back a credit already "
                   "spent (the protocol credits before it commits)",
             neg);
    return neg == 0 ? AP_HOLDS : AP_FAILS;
}

const ap_usecase ap_usecase_txn = {
    .name = "ap_txn",
    .chapter = "Ch.3 Mimicking Transactional Behavior",
    .title = "Complex updates and optimistic update with compensation",
    .pages = "pp.25-35",
    .demonstrates = "atomic updates inside one document, and a two-phase transfer between "
                    "documents made safe by a periodic cleanup",
    .measure = measure,
    .nclaims = 4,
    .claims = {
        {"structure updates inside one document: $inc, positional $ and $ne/$push keep an "
         "order's total consistent without transactions", c_complex},
        {"optimistic update with compensation: the periodic cleanup commits or rolls back "
         "whatever a crash left, conserving money", c_2pc},
        {"an application-level two-phase commit costs far more than a single-document "
         "update", c_cost},
        {"no balance goes below zero ($gte guard on the debit)", c_isolation},
    },
};
