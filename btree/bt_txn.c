/*
 * bt_txn.c -- document-level concurrency, after WiredTiger: snapshots,
 * update chains, write conflicts, the engine latch, and the folds that
 * move committed versions into the pages.
 *
 * The B+tree pages (the "base") hold committed data only.  A write goes to
 * its tree's overlay: a skiplist from (key, rid) to an update chain, newest
 * version first, whose oldest entry is what the base held when the chain
 * was made.  Commit only stamps the transaction's versions (and counts
 * them into the trees' counters), under the shared latch and the commit
 * mutex; they stay in the overlay, pending, as WiredTiger's updates stay
 * in a page's update lists until reconciliation.  A fold applies every pending chain's newest
 * commit to the base in key order (a walk of the skiplist's level 0, each
 * put searching only the previous put's leaf when the key falls in it),
 * then drops the chains no snapshot needs and relinks the rest in the same
 * pass (a dropped chain's newest version, which every snapshot sees, is
 * given to the page as its entry rather than copied):
 *
 *   write  ──> overlay chain  [T7 uncommitted] -> [ts 12] -> [base image]
 *   commit ── shared latch + commit_mu ──> log record, ts = last_ts + 1,
 *              versions stamped (pending), then last_ts = ts published
 *              ──> unlatch ──> exclusive latch when a fold or checkpoint
 *              is due ──> fsync (j: true).  A create, drop or catalog
 *              write commits under the exclusive latch throughout.
 *   fold   ── exclusive latch: pending versions applied to the base in key
 *              order; a chain whose head is committed, applied and not
 *              newer than every open snapshot is dropped, older versions
 *              trimmed.  When a commit leaves its tree's overlay at
 *              fold_at chains (BT_FOLD_MIN, or twice what the last fold
 *              kept), for the metadata tree and creates/drops at once, at
 *              every checkpoint, before verify and collStats' page counts,
 *              and by a reader when no commit came for BT_FOLD_IDLE_MS (if the
 *              latch is free at once).
 *
 * A snapshot is {read_ts = last_ts at begin, own id}.  A version is
 * visible to it when it is its own or committed at ts <= read_ts; a key
 * without a chain is read from the base.  Reads outside a transaction see
 * the latest published commit: a chain's newest version committed at or
 * before last_ts, read once per hold of the shared latch (bt_read_ts),
 * else the base.  A
 * commit in progress has stamped some versions with a timestamp past
 * last_ts: no reader sees them until it publishes, so none sees half a
 * commit.
 * Writers conflict (MD_EWRITECONFLICT) on a chain whose head is another
 * transaction's uncommitted version or a commit after their snapshot; a
 * unique sorted-store insert also on any such chain with equal key bytes.
 *
 * Invariants:
 * 5. Only one transaction has an uncommitted version in a chain, and it is
 *    the chain's head.
 * 6. The oldest version of a chain is visible to every open snapshot; a
 *    key with no chain has, in the base, its latest commit, the value
 *    every open snapshot sees.  A chain's newest committed version is its
 *    key's latest commit; it is in the base unless the chain is pending,
 *    and a pending chain is never dropped (a chain stays until it is
 *    applied and no snapshot predates its newest commit).
 * 7. The base changes only under the exclusive latch; overlays change
 *    under the shared latch and their tree's ov.mu (writes, commits'
 *    stamps, aborts), or under the exclusive latch (fold, structural
 *    commits).  Readers take no ov.mu: links, heads and stamps are
 *    published with release stores, and what a writer takes out under the
 *    shared latch is retired, not freed, until the next fold (bt_overlay).
 *    Commits are stamped and published one at a time, in log order
 *    (commit_mu); a checkpoint, which takes the latch exclusively, never
 *    sees one in progress.
 * 8. A checkpoint folds every tree first: the pages it writes hold every
 *    commit before its log position.
 *
 * Each thread finds its open transaction (reads take none) in a small
 * thread-local table keyed by the engine's unique id.  Ended transactions
 * are kept (up to BT_SPARE, with their arrays) for the next begin.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bt_int.h"

#define ADD(x, v) __atomic_add_fetch(&(x), (v), __ATOMIC_RELAXED)
#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define TL_MAX 16

/* The read timestamp of the shared latch the calling thread holds (eid 0:
 * none), for bt_read_ts. */
static __thread struct {
    uint64_t eid, rts;
} hold;

/* The calling thread's open transactions, one per engine. */
static __thread struct {
    uint64_t eid;
    bt_txn *t;
} tl[TL_MAX];
static uint64_t engine_ids;

/* ---- latches ------------------------------------------------------------------- */

/* The latch lets readers in while a writer waits (a fold, a checkpoint,
 * eviction, a structural commit; commits took it exclusively once, and
 * still do when one of those is due): every read or write call takes it
 * shared, often several times per operation, and a writer-first lock made
 * each of those wait behind each waiting writer -- with many threads on
 * few cores the
 * operations convoyed (futex sleeps and wake-ups were most of the CPU
 * time at four times the Little Book's load; see docs/patterns.md).  So
 * that a stream of readers cannot starve a writer, one that has waited
 * BT_GATE_US closes the gate: new readers wait at it until the writer has
 * had the latch.  A thread therefore never takes the shared latch twice. */
#define BT_GATE_US 2000

int bt_conc_init(bt_engine *e)
{
    pthread_rwlockattr_t a;
    pthread_rwlockattr_init(&a);
    pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_READER_NP);
    pthread_rwlock_init(&e->latch, &a);
    pthread_rwlockattr_destroy(&a);
    pthread_mutex_init(&e->gate_mu, NULL);
    pthread_cond_init(&e->gate_cv, NULL);
    pthread_mutex_init(&e->page_mu, NULL);
    pthread_mutex_init(&e->commit_mu, NULL);
    pthread_mutex_init(&e->txn_mu, NULL);
    e->id = ADD(engine_ids, 1);
    e->next_txn = 1;
    e->last_ts = 1;
    return 0;
}

void bt_conc_cleanup(bt_engine *e)
{
    pthread_rwlock_destroy(&e->latch);
    pthread_mutex_destroy(&e->gate_mu);
    pthread_cond_destroy(&e->gate_cv);
    pthread_mutex_destroy(&e->page_mu);
    pthread_mutex_destroy(&e->commit_mu);
    pthread_mutex_destroy(&e->txn_mu);
}

void bt_latch_shared(bt_engine *e)
{
    if (__atomic_load_n(&e->gate, __ATOMIC_ACQUIRE) ||
        pthread_rwlock_tryrdlock(&e->latch) != 0) {
        int64_t t0 = eng_now_us();
        if (__atomic_load_n(&e->gate, __ATOMIC_ACQUIRE)) {
            pthread_mutex_lock(&e->gate_mu);
            while (__atomic_load_n(&e->gate, __ATOMIC_ACQUIRE))
                pthread_cond_wait(&e->gate_cv, &e->gate_mu);
            pthread_mutex_unlock(&e->gate_mu);
        }
        pthread_rwlock_rdlock(&e->latch);
        ADD(e->st.sh_us, eng_now_us() - t0);
    }
    static __thread unsigned stripe;
    static unsigned stripes;
    if (!stripe)
        stripe = __atomic_add_fetch(&stripes, 1, __ATOMIC_RELAXED) % BT_STRIPES + 1;
    ADD(e->sh_n[stripe - 1].n, 1);
    hold.eid = e->id;
    hold.rts = __atomic_load_n(&e->last_ts, __ATOMIC_ACQUIRE);
}

void bt_latch_excl(bt_engine *e)
{
    if (pthread_rwlock_trywrlock(&e->latch) != 0) {
        int64_t t0 = eng_now_us();
        struct timespec until = eng_deadline(CLOCK_REALTIME, BT_GATE_US);
        if (pthread_rwlock_timedwrlock(&e->latch, &until) != 0) {
            /* readers kept it: close the gate until this writer is in */
            pthread_mutex_lock(&e->gate_mu);
            __atomic_add_fetch(&e->gate, 1, __ATOMIC_ACQ_REL);
            pthread_mutex_unlock(&e->gate_mu);
            pthread_rwlock_wrlock(&e->latch);
            pthread_mutex_lock(&e->gate_mu);
            if (__atomic_sub_fetch(&e->gate, 1, __ATOMIC_ACQ_REL) == 0)
                pthread_cond_broadcast(&e->gate_cv);
            pthread_mutex_unlock(&e->gate_mu);
            ADD(e->st.gated, 1);
        }
        ADD(e->st.ex_us, eng_now_us() - t0);
    }
    ADD(e->st.ex_n, 1);
}

/* The exclusive latch if no one holds the latch now; false otherwise. */
static bool latch_try_excl(bt_engine *e)
{
    if (pthread_rwlock_trywrlock(&e->latch) != 0)
        return false;
    ADD(e->st.ex_n, 1);
    return true;
}

void bt_unlatch(bt_engine *e)
{
    hold.eid = 0;
    pthread_rwlock_unlock(&e->latch);
}

/* ---- per-thread transactions ---------------------------------------------------- */

bt_txn *bt_txn_mine(bt_engine *e)
{
    for (int i = 0; i < TL_MAX; i++)
        if (tl[i].eid == e->id)
            return tl[i].t;
    return NULL;
}

/* Set (t) or clear (NULL) the calling thread's transaction on e. */
static int tl_set(bt_engine *e, bt_txn *t)
{
    for (int i = 0; i < TL_MAX; i++)
        if (tl[i].eid == e->id) {
            tl[i].t = t;
            tl[i].eid = t ? e->id : 0;
            return 0;
        }
    for (int i = 0; t && i < TL_MAX; i++)
        if (tl[i].eid == 0) {
            tl[i].eid = e->id;
            tl[i].t = t;
            return 0;
        }
    return t ? MD_ENOMEM : 0;
}

/* The read timestamp of the oldest open snapshot; UINT64_MAX if none. */
static uint64_t oldest_locked(bt_engine *e)
{
    uint64_t o = UINT64_MAX;
    for (bt_txn *t = e->open; t; t = t->next)
        if (t->read_ts < o)
            o = t->read_ts;
    return o;
}

/* ---- the overlay skiplist -------------------------------------------------------- */

/* eng_key_cmp(chain, key) with kp = bt_key_prefix(key). */
static inline int chain_cmp_p(const bt_chain *c, uint64_t kp, const uint8_t *key,
                              uint32_t klen, eng_rid rid)
{
    return bt_key_cmp_p(c->kpfx, c->key, c->klen, c->rid, kp, key, klen, rid);
}

/* The chain whose next[0] is the link `l` (NULL: l is head[0]). */
static bt_chain *ov_owner0(bt_overlay *o, bt_chain **l)
{
    return l == &o->head[0] ? NULL : (bt_chain *)((char *)l - offsetof(bt_chain, next));
}

/* The first chain >= (key, rid), kp its bt_key_prefix; slot[i] (if
 * given) gets, for the levels in use (i < top), the link at level i that
 * points at or past it.  A key past the last chain is answered from the
 * tails, with one comparison. */
static bt_chain *ov_find(bt_overlay *o, uint64_t kp, const uint8_t *key, uint32_t klen,
                         eng_rid rid, bt_chain ***slot)
{
    bt_chain **links = o->head, *x, *last = BT_LD(o->last);
    if (last && chain_cmp_p(last, kp, key, klen, rid) < 0) {
        for (int i = 0; slot && i < o->top; i++)
            slot[i] = o->tail[i];
        return NULL;
    }
    x = NULL;
    for (int i = BT_LD(o->top) - 1; i >= 0; i--) {
        while ((x = BT_LD(links[i])) && chain_cmp_p(x, kp, key, klen, rid) < 0)
            links = x->next;
        if (slot)
            slot[i] = &links[i];
    }
    return x; /* as compared: a reader loading links[0] again could get a
               * chain inserted since, smaller than the key */
}

static bt_chain *ov_exact(bt_tree *t, const uint8_t *key, uint32_t klen, eng_rid rid,
                          bt_chain ***slot)
{
    uint64_t kp = bt_key_prefix(key, klen);
    bt_chain *c = ov_find(&t->ov, kp, key, klen, rid, slot);
    return c && chain_cmp_p(c, kp, key, klen, rid) == 0 ? c : NULL;
}

bt_chain *bt_ov_seek(bt_tree *t, const uint8_t *key, uint32_t klen, eng_rid rid, bool incl)
{
    uint64_t kp = bt_key_prefix(key, klen);
    bt_chain *c = ov_find(&t->ov, kp, key, klen, rid, NULL);
    if (c && !incl && chain_cmp_p(c, kp, key, klen, rid) == 0)
        c = BT_LD(c->next[0]);
    return c;
}

/* The last chain < (or <= when incl) (key, rid); the last of all when inf. */
bt_chain *bt_ov_seek_back(bt_tree *t, const uint8_t *key, uint32_t klen, eng_rid rid,
                          bool incl, bool inf)
{
    bt_chain **links = t->ov.head, *x, *last = NULL;
    uint64_t kp = inf ? 0 : bt_key_prefix(key, klen);
    for (int i = BT_LD(t->ov.top) - 1; i >= 0; i--) {
        int c;
        while ((x = BT_LD(links[i])) &&
               (inf || (c = chain_cmp_p(x, kp, key, klen, rid)) < 0 || (incl && c == 0))) {
            last = x;
            links = x->next;
        }
    }
    return last;
}

size_t bt_ov_count(bt_tree *t)
{
    return LOAD(t->ov.n);
}

static int rand_height(void)
{
    static __thread uint64_t s;
    int h = 1;
    if (!s)
        s = (uint64_t)(uintptr_t)&s | 1;
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    for (uint64_t r = s; h < BT_SKIP_MAX && (r & 3) == 0; r >>= 2)
        h++;
    return h;
}

/* A version; `key` (klen bytes, or none) is copied before the record. */
static bt_upd *upd_new(uint64_t txn_id, bool present, const uint8_t *val, uint32_t vlen,
                       bool has_val, const uint8_t *key, uint32_t klen)
{
    bool v = present && has_val;
    size_t off = ((size_t)klen + 7) & ~(size_t)7;
    uint8_t *mem = malloc(off + sizeof(bt_upd) + (v ? vlen : 0));
    if (!mem)
        return NULL;
    if (klen)
        memcpy(mem, key, klen);
    bt_upd *u = (bt_upd *)(mem + off);
    memset(u, 0, sizeof *u);
    u->koff = (uint32_t)off;
    u->txn_id = txn_id;
    u->present = present;
    if (v) {
        u->val = (uint8_t *)(u + 1);
        if (vlen)
            memcpy(u->val, val, vlen);
        u->vlen = vlen;
    }
    return u;
}

/* The base image "absent" (a chain made by an insert) is this one shared
 * record, never written and never freed: no allocation for it. */
static bt_upd absent_image;

static void upd_free(bt_upd *u)
{
    free((uint8_t *)u - u->koff);
}

static int64_t upd_free_list(bt_upd *u)
{
    int64_t n = 0;
    for (; u && u != &absent_image; n++) {
        bt_upd *o = u->older;
        upd_free(u);
        u = o;
    }
    return n;
}

/* A new chain at `slot` whose base image is `base` (NULL: absent). */
static bt_chain *ov_insert(bt_tree *t, bt_chain ***slot, const uint8_t *key, uint32_t klen,
                           eng_rid rid, const bt_ent *base)
{
    int h = rand_height();
    size_t links = sizeof(bt_chain) + (size_t)h * sizeof(bt_chain *);
    bt_chain *c = malloc(links + klen);
    if (!c)
        return NULL;
    memset(c, 0, links);
    c->key = (uint8_t *)c + links;
    c->head = base ? upd_new(0, true, base->val, base->vlen, base->has_val, NULL, 0)
                   : &absent_image;
    if (!c->head) {
        free(c);
        return NULL;
    }
    if (klen)
        memcpy(c->key, key, klen);
    c->kpfx = bt_key_prefix(c->key, klen);
    c->klen = klen;
    c->rid = rid;
    c->height = h;
    for (int i = 0; i < h; i++) {
        bt_chain **l = i < t->ov.top ? slot[i] : &t->ov.head[i]; /* no chain that tall */
        BT_ST(c->next[i], *l);
        BT_ST(*l, c); /* level 0 first: a reader that meets c can go on */
        if (!c->next[i])
            t->ov.tail[i] = &c->next[i];
    }
    if (!c->next[0])
        BT_ST(t->ov.last, c);
    if (h > t->ov.top)
        BT_ST(t->ov.top, h);
    __atomic_store_n(&t->ov.n, t->ov.n + 1, __ATOMIC_RELAXED);
    return c;
}

static void chain_free(bt_engine *e, bt_chain *c)
{
    ADD(e->st.freed, upd_free_list(c->head));
    free(c);
}

/* What a tree's overlay holds toward its fold bound: its chains and its
 * retired entries (atomic reads: commits look without mu). */
static size_t ov_weight(bt_tree *t)
{
    return bt_ov_count(t) + LOAD(t->ov.nretired);
}

/* Versions and chains taken out under the shared latch wait on their
 * overlay's retired lists (under mu) until the exclusive latch: a reader
 * may still stand on them. */
static void count_retired(bt_tree *t)
{
    __atomic_store_n(&t->ov.nretired, t->ov.nretired + 1, __ATOMIC_RELAXED);
    ADD(t->eng->retired, 1);
}

static void retire_upd(bt_tree *t, bt_upd *u)
{
    u->retired = t->ov.retired_u;
    t->ov.retired_u = u;
    count_retired(t);
}

/* Free what was retired.  Under the exclusive latch (or the tree is going
 * away): no reader is in the overlay. */
static void retired_free(bt_engine *e, bt_overlay *o)
{
    int64_t freed = 0;
    for (bt_upd *u = o->retired_u, *next; u; u = next, freed++) {
        next = u->retired;
        upd_free(u);
    }
    if (freed)
        ADD(e->st.freed, freed);
    for (bt_chain *c = o->retired_c, *next; c; c = next) {
        next = c->retired;
        chain_free(e, c);
    }
    o->retired_u = NULL;
    o->retired_c = NULL;
    ADD(e->retired, -o->nretired);
    __atomic_store_n(&o->nretired, 0, __ATOMIC_RELAXED);
}

/* Unlink a chain that never held a committed version (an abort, a failed
 * write): it has only its base image left.  Its own links stay, for a
 * reader standing on it; it is retired. */
static void ov_remove(bt_tree *t, bt_chain *c)
{
    bt_chain **slot[BT_SKIP_MAX];
    bt_chain *f = ov_find(&t->ov, c->kpfx, c->key, c->klen, c->rid, slot);
    assert(f == c && !c->pending);
    (void)f;
    for (int i = c->height; i-- > 0;) { /* level 0 last: c stays reachable below */
        BT_ST(*slot[i], c->next[i]);
        if (t->ov.tail[i] == &c->next[i])
            t->ov.tail[i] = slot[i];
    }
    if (t->ov.last == c)
        BT_ST(t->ov.last, ov_owner0(&t->ov, slot[0]));
    __atomic_store_n(&t->ov.n, t->ov.n - 1, __ATOMIC_RELAXED);
    c->retired = t->ov.retired_c;
    t->ov.retired_c = c;
    count_retired(t);
}

/* Every tree's overlay is initialized as the tree joins the engine
 * (bt_add_tree, bt_open for the trees of the checkpoint). */
void bt_ov_init(bt_tree *t)
{
    pthread_mutex_init(&t->ov.mu, NULL);
    t->ov.mu_ok = true;
    t->ov.fold_at = BT_FOLD_MIN;
    for (int i = 0; i < BT_SKIP_MAX; i++)
        t->ov.tail[i] = &t->ov.head[i]; /* every level empty */
}

/* Free a tree's whole overlay (the tree is going away: a drop, or the
 * engine closing after its last checkpoint). */
void bt_ov_free(bt_engine *e, bt_tree *t)
{
    retired_free(e, &t->ov);
    bt_chain *c = t->ov.head[0];
    while (c) {
        bt_chain *n = c->next[0];
        upd_free_list(c->head);
        free(c);
        c = n;
    }
    ADD(e->unfolded, -t->ov.pending);
    if (t->ov.mu_ok)
        pthread_mutex_destroy(&t->ov.mu);
    memset(&t->ov, 0, sizeof t->ov);
}

/* ---- folding committed versions into the base ------------------------------------- */

/* Fold t's overlay: apply every pending chain's newest committed version
 * to the base, in key order (the skiplist's level 0, so the puts walk the
 * leaves in order), then drop the chains no open snapshot needs (head
 * committed at or before `oldest`, nothing pending) and trim the others to
 * the version the oldest snapshot sees.  The survivors are relinked in the
 * same pass: no search per chain.  A put that fails leaves its chain
 * pending (readers still see the version through it) and is reported.
 * Under the exclusive latch: no reader is in the overlay. */
static int fold_tree(bt_engine *e, bt_tree *t, uint64_t oldest, md_error *err)
{
    bt_overlay *o = &t->ov;
    bt_chain **tail[BT_SKIP_MAX];
    bt_pos hint;
    size_t n = 0, applied = 0;
    hint.depth = 0;
    int rc = 0;
    retired_free(e, o);
    if (!o->n)
        return 0;
    for (int i = 0; i < BT_SKIP_MAX; i++)
        tail[i] = &o->head[i];
    for (bt_chain *c = o->head[0], *next; c; c = next) {
        next = c->next[0];
        bt_upd *u = c->head;
        if (c->pending && rc == 0) {
            if (u->txn_id && !u->ts)
                u = u->older; /* an open transaction's version: below it */
            /* The chain's head, when every snapshot sees it, goes to the
             * page itself (its allocation has an entry's layout: the key,
             * then the value), and the chain is dropped below. */
            bool give = u == c->head && u->present && u->ts && u->ts <= oldest &&
                        u->koff >= c->klen;
            bool taken = false;
            bt_ent en;
            if (give) {
                memset(&en, 0, sizeof en);
                en.key = (uint8_t *)u - u->koff;
                en.klen = c->klen;
                en.kpfx = c->kpfx;
                en.rid = c->rid;
                en.has_val = t->kind != BT_SS;
                en.val = en.has_val ? u->val : NULL;
                en.vlen = en.has_val ? u->vlen : 0;
            }
            int r = bt_apply_near(t, &hint, c->key, c->klen, c->rid, u->val, u->vlen,
                                  t->kind != BT_SS, !u->present, give ? &en : NULL, &taken,
                                  err);
            if (taken) { /* the page has it: out of the chain */
                c->head = u->older;
                ADD(e->st.freed, 1);
            }
            if (r == 0 || taken) {
                c->pending = false;
                applied++;
            }
            if (r)
                rc = r;
        }
        u = c->head;
        if (!c->pending && (!u->txn_id || (u->ts && u->ts <= oldest))) {
            chain_free(e, c);
            continue;
        }
        while (u->older && !(u->ts && u->ts <= oldest) && u->txn_id)
            u = u->older;
        if (u->older) {
            ADD(e->st.freed, upd_free_list(u->older));
            u->older = NULL;
        }
        for (int i = 0; i < c->height; i++) {
            *tail[i] = c;
            tail[i] = &c->next[i];
        }
        n++;
    }
    o->top = 0;
    for (int i = 0; i < BT_SKIP_MAX; i++) {
        if (tail[i] != &o->head[i])
            o->top = i + 1;
        *tail[i] = NULL;
        o->tail[i] = tail[i];
    }
    o->last = ov_owner0(o, tail[0]);
    __atomic_store_n(&o->n, n, __ATOMIC_RELAXED);
    o->pending -= applied;
    o->fold_at = n * 2 > BT_FOLD_MIN ? n * 2 : BT_FOLD_MIN;
    ADD(e->unfolded, -applied);
    ADD(e->st.folds, 1);
    ADD(e->st.folded, (int64_t)applied);
    if (applied)
        bt_gen_bump(e);
    return rc;
}

static uint64_t oldest_snapshot(bt_engine *e)
{
    pthread_mutex_lock(&e->txn_mu);
    uint64_t o = oldest_locked(e);
    pthread_mutex_unlock(&e->txn_mu);
    return o;
}

int bt_fold_all(bt_engine *e, md_error *err)
{
    uint64_t oldest = oldest_snapshot(e);
    int rc = 0;
    for (size_t i = 0; i <= e->ntrees; i++) {
        int r = fold_tree(e, i < e->ntrees ? e->trees[i] : e->meta, oldest, err);
        if (r && !rc)
            rc = r;
    }
    return rc;
}

/* Reads call this before their shared latch.  When versions wait to be
 * folded (or retired entries to be freed: aborts that no commit followed)
 * and no commit has come for BT_FOLD_IDLE_MS, a reader folds them (the
 * evicting flag keeps it to one thread), so that a read-mostly workload
 * reads the base alone again -- if it can have the latch at once.  It
 * never waits for it: under many readers a waiting fold closes the gate
 * on all of them, and the stall that makes (no commit for a while) looked
 * like idleness to the next reader, which waited again.
 * The checkpoint folds what readers could not.  Counting reads instead
 * of time made readers scanning a backlog between two commits (a
 * queue's) fold every few hundred reads.  A thread looks at the engine
 * and the clock once per BT_FOLD_IDLE reads of its own: a counter every
 * reader wrote cost each read a cache-line transfer. */
#define BT_FOLD_IDLE_MS 2.0
void bt_fold_idle(bt_engine *e)
{
    static __thread struct {
        uint64_t eid;
        uint32_t reads;
        int64_t commits; /* e->st.commits at the last look */
        double since;    /* when a commit was last seen */
    } idle;
    if (idle.eid != e->id) {
        idle.eid = e->id;
        idle.reads = 0;
        idle.commits = LOAD(e->st.commits);
        idle.since = bt_now();
    }
    if (++idle.reads < BT_FOLD_IDLE)
        return;
    idle.reads = 0;
    int64_t commits = LOAD(e->st.commits);
    double now = bt_now();
    if (commits != idle.commits) {
        idle.commits = commits;
        idle.since = now;
        return;
    }
    if ((now - idle.since) * 1000.0 < BT_FOLD_IDLE_MS ||
        (!LOAD(e->unfolded) && !LOAD(e->retired)) ||
        __atomic_exchange_n(&e->evicting, true, __ATOMIC_ACQUIRE))
        return;
    if (latch_try_excl(e)) {
        if (!e->crashed)
            (void)bt_fold_all(e, NULL); /* a failed put stays pending; checkpoint reports it */
        bt_unlatch(e);
    }
    __atomic_store_n(&e->evicting, false, __ATOMIC_RELEASE);
}

/* ---- reads and writes ------------------------------------------------------------- */

uint64_t bt_read_ts(bt_engine *e, const bt_txn *x)
{
    if (x)
        return x->read_ts;
    return hold.eid == e->id ? hold.rts : __atomic_load_n(&e->last_ts, __ATOMIC_ACQUIRE);
}

const bt_upd *bt_visible(const bt_chain *c, const bt_txn *x, uint64_t rts)
{
    const bt_upd *u = BT_LD(c->head), *older;
    for (; (older = BT_LD(u->older)) != NULL; u = older) {
        uint64_t ts = BT_LD(u->ts);
        if (!u->txn_id || (x && u->txn_id == x->id) || (ts && ts <= rts))
            return u;
    }
    return u; /* invariant 6 */
}

/* Another transaction's uncommitted version, or a commit x cannot see. */
static bool conflicts(const bt_chain *c, const bt_txn *x)
{
    const bt_upd *h = c->head;
    return h->txn_id && h->txn_id != x->id && (!h->ts || h->ts > x->read_ts);
}

static int conflict(bt_engine *e, md_error *err)
{
    ADD(e->st.conflicts, 1);
    return md_error_set(err, MD_EWRITECONFLICT, MD_CODE_WRITE_CONFLICT,
                        "WriteConflict: another transaction changed this key");
}

/* Replace b's contents by a copy of p (a view's or cursor's buffer). */
int bt_buf_set(bt_buf *b, const uint8_t *p, size_t n)
{
    b->n = 0;
    b->oom = false;
    return bt_buf_put(b, p, n);
}

/* The value of (key, rid) as the calling thread sees it, copied into *val:
 * through the key's chain if it has one (outside a transaction: its newest
 * commit as of bt_read_ts), else from the base, starting from the leaf in
 * *near when given (bt_get_near).  The caller holds the shared latch. */
int bt_lookup(bt_engine *e, bt_txn *x, bt_tree *t, const uint8_t *key, uint32_t klen,
              eng_rid rid, bt_buf *val, bt_leaf_hint *near, md_error *err)
{
    bt_ent *en;
    int rc;
    if (bt_ov_count(t)) { /* no mu: see bt_overlay */
        bt_chain *c = ov_exact(t, key, klen, rid, NULL);
        if (c) {
            const bt_upd *u = bt_visible(c, x, bt_read_ts(e, x));
            return !u->present ? MD_NOTFOUND : bt_buf_set(val, u->val, u->vlen);
        }
    }
    if ((rc = bt_get_near(t, near, key, klen, rid, &en, err)) != 0)
        return rc;
    return bt_buf_set(val, en->val, en->vlen);
}

/* A unique insert's base entries with the key's bytes, from the one
 * search bt_write makes: up to BT_EQ_MAX other rids (more: there were
 * more, unique_check scans again). */
#define BT_EQ_MAX 4
typedef struct bt_equal {
    eng_rid other[BT_EQ_MAX];
    int n;
    bool more;
} bt_equal;

static inline bool same_bytes(const uint8_t *a, uint32_t alen, const uint8_t *key,
                              uint32_t klen)
{
    return alen == klen && (!klen || memcmp(a, key, klen) == 0);
}

/* pos at the first base entry with the key's bytes, or past them. */
static int base_first(bt_tree *t, const uint8_t *key, uint32_t klen, bt_pos *pos,
                      md_error *err)
{
    int rc = bt_search_write(t, key, klen, INT64_MIN, pos, NULL, err);
    return rc ? rc : bt_pos_normalize(t, pos, err);
}

/* (key, rid)'s own base entry into *own (NULL: none) and the others with
 * the same key bytes into q.  Under the shared latch. */
static int base_equal(bt_tree *t, const uint8_t *key, uint32_t klen, eng_rid rid,
                      bt_ent **own, bt_equal *q, md_error *err)
{
    bt_pos pos;
    int rc = base_first(t, key, klen, &pos, err);
    for (; rc == 0; rc = bt_pos_next(t, &pos, err)) {
        bt_ent *en = bt_pos_ent(&pos);
        if (!same_bytes(en->key, en->klen, key, klen))
            break;
        if (en->rid == rid)
            *own = en;
        else if (q->n < BT_EQ_MAX)
            q->other[q->n++] = en->rid;
        else
            q->more = true;
    }
    return rc == MD_NOTFOUND ? 0 : rc;
}

/* Unique sorted-store insert: another visible entry with equal key bytes
 * is a duplicate; one another transaction is changing, a conflict.  q is
 * base_equal's; when it overflowed the base is scanned again. */
static int unique_check(bt_engine *e, bt_txn *x, bt_tree *t, const uint8_t *key,
                        uint32_t klen, eng_rid rid, const bt_equal *q, eng_rid *dup_rid,
                        md_error *err)
{
    bt_pos pos;
    eng_rid dup = ENG_RID_NONE;
    for (bt_chain *c = bt_ov_seek(t, key, klen, INT64_MIN, true);
         c && same_bytes(c->key, c->klen, key, klen); c = c->next[0]) {
        if (c->rid == rid)
            continue;
        if (conflicts(c, x))
            return conflict(e, err);
        if (!dup && bt_visible(c, x, x->read_ts)->present)
            dup = c->rid;
    }
    int rc = 0;
    for (int i = 0; !q->more && i < q->n && !dup; i++)
        if (!ov_exact(t, key, klen, q->other[i], NULL))
            dup = q->other[i];
    if (q->more && !dup)
        rc = base_first(t, key, klen, &pos, err);
    for (; q->more && rc == 0 && !dup; rc = bt_pos_next(t, &pos, err)) {
        bt_ent *en = bt_pos_ent(&pos);
        if (!same_bytes(en->key, en->klen, key, klen))
            break;
        if (en->rid != rid && !ov_exact(t, key, klen, en->rid, NULL))
            dup = en->rid;
    }
    if (rc && rc != MD_NOTFOUND)
        return rc;
    if (!dup)
        return 0;
    if (dup_rid)
        *dup_rid = dup;
    return md_error_set(err, MD_EDUPKEY, MD_CODE_DUPLICATE_KEY, "duplicate key");
}

/* Put x's version on chain c: replace x's own head, or push a new one. */
static int push_version(bt_txn *x, bt_tree *t, bt_chain *c, bool present, const uint8_t *val,
                        uint32_t vlen, int mode)
{
    bt_upd *u = c->head;
    bool has_val = t->kind != BT_SS;
    /* a sorted store's key leads its version (a record store's key is empty) */
    const uint8_t *k = present ? c->key : NULL;
    uint32_t kl = present ? c->klen : 0;
    if (u->txn_id != x->id) {
        if (x->nm == x->capm) {
            size_t ncap = x->capm ? x->capm * 2 : 32;
            bt_mod *nv = realloc(x->m, ncap * sizeof *nv);
            if (!nv)
                return MD_ENOMEM;
            x->m = nv;
            x->capm = ncap;
        }
        if (!(u = upd_new(x->id, present, val, vlen, has_val, k, kl)))
            return MD_ENOMEM;
        u->older = c->head;
        u->mod = x->nm;
        BT_ST(c->head, u);
        x->m[x->nm++] = (bt_mod){.t = t, .c = c};
    } else {
        bt_upd *nu = upd_new(x->id, present, val, vlen, has_val, k, kl);
        if (!nu)
            return MD_ENOMEM;
        nu->older = u->older;
        nu->mod = u->mod;
        BT_ST(c->head, nu);
        retire_upd(t, u);
        u = nu;
    }
    bt_mod *m = &x->m[u->mod];
    m->d_ins += mode == BT_W_INSERT;
    m->d_upd += mode == BT_W_UPDATE;
    m->d_bytes += mode == BT_W_INSERT || mode == BT_W_UPDATE ? vlen : 0;
    m->d_ubytes += mode == BT_W_UPDATE ? vlen : 0;
    return 0;
}

/* One write by x: check what the key holds for x (mode), check for
 * conflicts, then make x's version the chain's head.  `en` is the key's
 * base entry or NULL, used when the key has no chain yet.  *noop: nothing
 * to log. */
static int write_locked(bt_engine *e, bt_txn *x, bt_tree *t, const uint8_t *key,
                        uint32_t klen, eng_rid rid, const uint8_t *val, uint32_t vlen,
                        int mode, const bt_ent *en, const bt_equal *q, eng_rid *dup_rid,
                        bool *noop, md_error *err)
{
    bt_chain **slot[BT_SKIP_MAX];
    bool present = en != NULL, del = mode == BT_W_REMOVE || mode == BT_W_DEL;
    int rc;
    bt_chain *c = ov_exact(t, key, klen, rid, slot);
    if (c) {
        if (conflicts(c, x))
            return conflict(e, err);
        present = c->head->present;
    }
    if ((mode == BT_W_UPDATE || mode == BT_W_REMOVE) && !present)
        return MD_NOTFOUND;
    if ((mode == BT_W_SSINSERT || mode == BT_W_UNIQUE) && present) {
        *noop = true; /* the pair exists */
        return 0;
    }
    if (mode == BT_W_UNIQUE && (rc = unique_check(e, x, t, key, klen, rid, q, dup_rid, err)) != 0)
        return rc;
    if (!c && !(c = ov_insert(t, slot, key, klen, rid, present ? en : NULL)))
        return bt_nomem(err);
    if ((rc = push_version(x, t, c, !del, val, vlen, mode)) != 0) {
        if (!c->head->older && !c->head->txn_id)
            ov_remove(t, c); /* only the base image: as if never made */
        return bt_nomem(err);
    }
    return 0;
}

/* BT_W_INSERT allocates the RecordId (under the latch, which keeps it
 * apart from the checkpoint that persists next_rid) into *rid_out;
 * BT_W_UNIQUE stores the duplicate's there. */
int bt_write(bt_engine *e, bt_txn *x, bt_tree *t, const uint8_t *key, uint32_t klen,
             eng_rid rid, const uint8_t *val, uint32_t vlen, int mode, eng_rid *rid_out,
             md_error *err)
{
    bool noop = false;
    bt_ent *en = NULL;
    bt_equal q = {.n = 0};
    int rc = 0;
    bt_latch_shared(e);
    /* the base is stable under the latch: read it before ov.mu */
    if (mode == BT_W_INSERT)
        *rid_out = rid = __atomic_fetch_add(&t->next_rid, 1, __ATOMIC_RELAXED);
    else if (mode == BT_W_UNIQUE)
        rc = base_equal(t, key, klen, rid, &en, &q, err); /* one search for both */
    else if ((rc = bt_get(t, key, klen, rid, &en, err)) == MD_NOTFOUND)
        rc = 0, en = NULL;
    if (rc == 0) {
        pthread_mutex_lock(&t->ov.mu);
        rc = write_locked(e, x, t, key, klen, rid, val, vlen, mode, en, &q, rid_out, &noop,
                          err);
        pthread_mutex_unlock(&t->ov.mu);
    }
    bt_unlatch(e);
    x->wseq++;
    if (rc == 0 && !noop && e->log.on)
        bt_log_op(&x->lg, mode == BT_W_REMOVE || mode == BT_W_DEL ? BT_LOG_DEL : BT_LOG_PUT,
                  t == e->meta ? "" : t->ident, key, klen, rid, val, vlen,
                  mode != BT_W_REMOVE && mode != BT_W_DEL && t->kind != BT_SS);
    return rc;
}

/* ---- begin, commit, abort ------------------------------------------------------------ */

static void txn_end_shared(bt_engine *e, bt_txn *x);

int bt_txn_begin(eng_engine *eh, eng_txn **out)
{
    bt_engine *e = (bt_engine *)eh;
    bt_txn *t;
    if (bt_txn_mine(e))
        return MD_EBUSY; /* one transaction per thread */
    pthread_mutex_lock(&e->txn_mu);
    if ((t = e->spare) != NULL) {
        e->spare = t->next;
        e->nspare--;
        t->next = NULL;
    }
    pthread_mutex_unlock(&e->txn_mu);
    if (!t && !(t = calloc(1, sizeof *t)))
        return MD_ENOMEM;
    t->hdr.engine = eh;
    if (tl_set(e, t) != 0) {
        free(t->m);
        free(t->u);
        bt_buf_free(&t->lg);
        free(t);
        return MD_ENOMEM;
    }
    pthread_mutex_lock(&e->txn_mu);
    t->id = e->next_txn++;
    t->read_ts = __atomic_load_n(&e->last_ts, __ATOMIC_ACQUIRE);
    t->next = e->open;
    if (e->open)
        e->open->prev = t;
    e->open = t;
    pthread_mutex_unlock(&e->txn_mu);
    ADD(e->st.begins, 1);
    *out = &t->hdr;
    return 0;
}

/* Leave the open list; returns the oldest snapshot that remains. */
static uint64_t txn_unlink(bt_engine *e, bt_txn *x)
{
    pthread_mutex_lock(&e->txn_mu);
    if (x->prev)
        x->prev->next = x->next;
    else
        e->open = x->next;
    if (x->next)
        x->next->prev = x->prev;
    uint64_t o = oldest_locked(e);
    pthread_mutex_unlock(&e->txn_mu);
    return o;
}

/* An ended transaction goes to the engine's spares with its arrays (the
 * next begin takes it: no allocation per transaction), or is freed. */
static void txn_free(bt_engine *e, bt_txn *x)
{
    if (bt_txn_mine(e) == x)
        tl_set(e, NULL);
    x->nm = x->n = 0;
    x->lg.n = 0;
    x->lg.oom = false;
    x->wseq = 0;
    x->prev = NULL;
    pthread_mutex_lock(&e->txn_mu);
    if (e->nspare < BT_SPARE && x->capm <= 1024 && x->lg.cap <= (1u << 20)) {
        x->next = e->spare;
        e->spare = x;
        e->nspare++;
        x = NULL;
    }
    pthread_mutex_unlock(&e->txn_mu);
    if (x) {
        free(x->m);
        free(x->u);
        bt_buf_free(&x->lg);
        free(x);
    }
}

void bt_txn_spares_free(bt_engine *e)
{
    while (e->spare) {
        bt_txn *x = e->spare;
        e->spare = x->next;
        free(x->m);
        free(x->u);
        bt_buf_free(&x->lg);
        free(x);
    }
    e->nspare = 0;
}

static int64_t ent_size(const bt_tree *t, const bt_chain *c, const bt_upd *u)
{
    return t->kind == BT_RS ? (int64_t)u->vlen : (int64_t)c->klen + 8;
}

/* Stamp x's versions with the next commit timestamp and count them into
 * their trees' counters (the version under each is the key's previous
 * commit, or its base image: invariant 5), each tree's under its ov.mu;
 * then publish the timestamp.  Until then no reader sees the versions
 * (their timestamp is past last_ts) and no writer can take them over (they
 * are newer than its snapshot).  A cursor notices the commit by the new
 * last_ts (bt_cur.rts), not by e->gen, which counts changes of the base.  They stay in the overlay, pending, until
 * a fold applies them to the base.  One commit at a time: under the commit
 * mutex and the shared latch, or the exclusive latch. */
static void stamp(bt_engine *e, bt_txn *x)
{
    uint64_t ts = __atomic_load_n(&e->last_ts, __ATOMIC_RELAXED) + 1;
    bt_tree *locked = NULL;
    for (size_t i = 0; i < x->nm; i++) {
        bt_mod *m = &x->m[i];
        bt_chain *c = m->c;
        bt_tree *t = m->t;
        if (t != locked) {
            if (locked)
                pthread_mutex_unlock(&locked->ov.mu);
            pthread_mutex_lock(&(locked = t)->ov.mu);
        }
        bt_upd *u = c->head;
        const bt_upd *was = u->older;
        assert(u->txn_id == x->id && u->ts == 0);
        BT_ST(u->ts, ts);
        /* atomic: collStats and the capped checks read them under the
         * shared latch while other commits count theirs */
        ADD(t->count, (int64_t)u->present - (int64_t)was->present);
        ADD(t->data_size, (u->present ? ent_size(t, c, u) : 0) -
                              (was->present ? ent_size(t, c, was) : 0));
        ADD(t->n_inserts, m->d_ins);
        ADD(t->n_updates, m->d_upd);
        ADD(t->bytes_written, m->d_bytes);
        ADD(t->upd_bytes, m->d_ubytes);
        __atomic_store_n(&t->modified, true, __ATOMIC_RELAXED);
        if (!c->pending) {
            c->pending = true;
            t->ov.pending++;
            ADD(e->unfolded, 1);
        }
    }
    if (locked)
        pthread_mutex_unlock(&locked->ov.mu);
    /* under txn_mu: a begin (which takes no latch) reads last_ts and joins
     * the open list in one step under it, so a snapshot older than this
     * commit is on the list before the commit is published, and a fold
     * that follows keeps the versions it needs */
    pthread_mutex_lock(&e->txn_mu);
    __atomic_store_n(&e->last_ts, ts, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&e->txn_mu);
}

/* How far past its fold bound (fold_touched's test) the fullest tree x
 * wrote is: 0 not there, 1 due, 2 overdue (BT_FOLD_OVERDUE times it).  One
 * pass over x's writes; consecutive writes to one tree count once.
 *
 * A due fold only tries for the latch; an overdue one waits for it, and
 * under many writers that wait closed the gate on every reader while
 * others held the latch descheduled: with 4 times the bound, the carts'
 * concurrent adds on btree (build/patterns --scenario cart_no_reservation
 * --engine btree --rate-scale 2 --iterations 5) waited 1,557 s on the
 * latch, met 214,848 write conflicts (transactions stayed open through the
 * convoy) and took 959 ms a user; with 64 times it, 2.5-5.5 s, 6,000-7,000
 * and 1.5-2.6 ms.  The overlays stay bounded (1,024 chains a tree at the
 * least bound) and every checkpoint folds them all. */
#define BT_FOLD_OVERDUE 64
static int fold_due(const bt_txn *x)
{
    int due = 0;
    const bt_tree *last = NULL;
    for (size_t i = 0; i < x->nm && due < 2; i++) {
        bt_tree *t = x->m[i].t;
        if (t == last)
            continue;
        last = t;
        size_t n = ov_weight(t);
        if (n >= t->ov.fold_at * BT_FOLD_OVERDUE)
            due = 2;
        else if (n >= t->ov.fold_at)
            due = 1;
    }
    return due;
}

/* A create or drop, or a catalog write: committed under the exclusive
 * latch throughout (the catalog is folded at once). */
static bool structural(const bt_engine *e, const bt_txn *x)
{
    if (x->n)
        return true;
    for (size_t i = 0; i < x->nm; i++)
        if (x->m[i].t == e->meta)
            return true;
    return false;
}

/* After a commit: fold the trees it wrote whose overlay reached its bound;
 * the metadata tree, and every tree of a create or drop, at once.  A fold
 * that fails leaves its versions pending (visible through their chains;
 * the checkpoint, which needs them in the base, reports the error). */
static bool tree_known(const bt_engine *e, const bt_tree *t)
{
    for (size_t i = 0; i < e->ntrees; i++)
        if (e->trees[i] == t)
            return true;
    return t == e->meta;
}

/* gap: x's commit let go of the latch before this fold, so a drop may
 * have swept one of its trees meanwhile: only trees still known count. */
static void fold_touched(bt_engine *e, bt_txn *x, uint64_t oldest, bool gap)
{
    bt_tree *done[8];
    size_t nd = 0;
    for (size_t i = 0; i < x->nm; i++) {
        bt_tree *t = x->m[i].t;
        bool seen = false;
        for (size_t j = 0; j < nd && !seen; j++)
            seen = done[j] == t;
        if (seen || (gap && !tree_known(e, t)) ||
            (t != e->meta && !x->n && ov_weight(t) < t->ov.fold_at))
            continue;
        (void)fold_tree(e, t, oldest, NULL);
        if (nd < 8)
            done[nd++] = t;
    }
}

/* Creates and drops: a committed drop's file goes after the next
 * checkpoint; an aborted create's file at once, an aborted drop lives. */
static void structural_end(bt_engine *e, bt_txn *x, bool abort)
{
    for (size_t i = x->n; i-- > 0;) {
        bt_undo *u = &x->u[i];
        if (abort && u->kind == U_CREATE)
            u->t->live = false, u->t->unlink_now = true;
        else if (abort && u->kind == U_DROP)
            u->t->live = true;
        else if (u->kind == U_DROP && !u->t->live)
            bt_unlink_after_ckpt(e, u->t->fname, u->t->ident);
    }
    if (e->txn == x)
        e->txn = NULL;
    bt_sweep_trees(e);
}

/* A checkpoint was deferred or asked for (compact): commit takes it. */
static bool ckpt_pending(bt_engine *e)
{
    bt_latch_shared(e);
    bool p = e->ckpt_pending;
    bt_unlatch(e);
    return p;
}

/* The log record is appended, and the versions stamped and published,
 * under the shared latch and the commit mutex (log order is commit order,
 * and a checkpoint, which takes the latch exclusively, never sees half a
 * commit); the exclusive latch is taken after, only when a fold or a
 * checkpoint is due.  A create, drop or catalog write commits under the
 * exclusive latch throughout.  If appending fails the transaction is
 * aborted.  durable = true then waits for the fsync outside the latch
 * (when the log has a flush thread; without one bt_log_commit syncs at
 * once, under the commit mutex).  If only writing or syncing fails, the
 * commit stands and the error is returned.  A transaction that wrote
 * nothing ends as an abort does, under the shared latch: readers' commits
 * do not serialize (the periodic checkpoint waits for a writer's, a
 * pending one, as compact's, does not). */
int bt_txn_commit(eng_txn *th, bool durable, md_error *err)
{
    bt_txn *x = (bt_txn *)th;
    bt_engine *e = (bt_engine *)th->engine;
    bool want = false, appended = false, later = durable && e->log.interval_ms > 0;
    bool excl = structural(e, x);
    uint64_t lsn;
    if (!x->nm && !x->n && !x->lg.n && !ckpt_pending(e)) {
        txn_end_shared(e, x);
        ADD(e->st.commits, 1);
        txn_free(e, x);
        return 0;
    }
    /* the record is compressed before the latch: only its LSN and checksum
     * are filled in under it */
    bt_buf rec = {0};
    if (e->log.on && x->lg.n && !x->lg.oom)
        (void)bt_log_prepare(x->lg.p, x->lg.n, true, &rec);
    if (excl) {
        bt_latch_excl(e);
    } else {
        bt_latch_shared(e);
        if (pthread_mutex_trylock(&e->commit_mu) != 0) {
            int64_t t0 = eng_now_us();
            pthread_mutex_lock(&e->commit_mu);
            ADD(e->st.cm_us, eng_now_us() - t0);
        }
        ADD(e->st.cm_n, 1);
    }
    int rc = e->crashed ? 0
                        : bt_log_commit(e, &x->lg, &rec, durable && !later, &appended, &want,
                                        err);
    bt_buf_free(&rec);
    if (rc && !appended) {
        if (!excl)
            pthread_mutex_unlock(&e->commit_mu);
        bt_unlatch(e);
        bt_txn_abort(th);
        return rc;
    }
    stamp(e, x);
    if (!excl) {
        pthread_mutex_unlock(&e->commit_mu);
        int fold = fold_due(x);
        bool must = fold == 2 || (!e->crashed && bt_commit_due(e, want));
        txn_unlink(e, x);
        bt_unlatch(e);
        /* A fold that is due but not overdue waits for no reader: if the
         * latch is busy, a later commit (or an idle reader) folds.  What
         * must be done (a checkpoint, eviction or overdue fold) is waited
         * for by one commit at a time: every commit sees the same overdue
         * overlay or elapsed interval until it is handled, and each of
         * them waiting in turn for the exclusive latch made a queue of
         * exclusive holders, each stopping every reader (Account at 16
         * times the Little Book's load: 2,035 such waits in 17 s; one
         * waiter at a time: 45).  The others only try, as for a due
         * fold; the conditions hold until the waiter has handled them. */
        if (must && !__atomic_exchange_n(&e->maint_waiting, true, __ATOMIC_ACQUIRE)) {
            bt_latch_excl(e);
            __atomic_store_n(&e->maint_waiting, false, __ATOMIC_RELEASE);
        } else if (!(fold || must) || !latch_try_excl(e)) {
            goto done;
        }
    } else {
        txn_unlink(e, x);
    }
    fold_touched(e, x, oldest_snapshot(e), !excl);
    if (x->n)
        structural_end(e, x, false);
    if (!e->crashed)
        bt_commit_checkpoint(e, want);
    bt_unlatch(e);
done:
    if (rc == 0 && later && appended && !e->crashed)
        rc = bt_log_ckpt_begin(e, &lsn, err); /* write and fsync the log */
    ADD(e->st.commits, 1);
    txn_free(e, x);
    return rc;
}

/* Remove x's versions (a chain left with only its base image goes) and
 * leave the open list.  Under the shared latch, each tree's ov.mu in
 * turn; a transaction that wrote nothing takes no latch.  Chains kept for
 * x's snapshot go at the next fold. */
static void txn_end_shared(bt_engine *e, bt_txn *x)
{
    bt_tree *locked = NULL;
    if (!x->nm) {
        txn_unlink(e, x);
        return;
    }
    bt_latch_shared(e);
    for (size_t i = x->nm; i-- > 0;) {
        bt_chain *c = x->m[i].c;
        bt_tree *t = x->m[i].t;
        bt_upd *u = c->head;
        if (t != locked) {
            if (locked)
                pthread_mutex_unlock(&locked->ov.mu);
            pthread_mutex_lock(&(locked = t)->ov.mu);
        }
        assert(u->txn_id == x->id && u->ts == 0);
        BT_ST(c->head, u->older);
        retire_upd(t, u);
        if (!c->head->older && !c->head->txn_id)
            ov_remove(t, c);
    }
    if (locked)
        pthread_mutex_unlock(&locked->ov.mu);
    txn_unlink(e, x);
    bt_unlatch(e);
}

void bt_txn_abort(eng_txn *th)
{
    bt_txn *x = (bt_txn *)th;
    bt_engine *e = (bt_engine *)th->engine;
    txn_end_shared(e, x);
    if (x->n) {
        bt_latch_excl(e);
        structural_end(e, x, true);
        bt_unlatch(e);
    }
    ADD(e->st.aborts, 1);
    txn_free(e, x);
}

/* ---- statistics --------------------------------------------------------------------- */

void bt_txn_status(bt_engine *e, bson_t *status)
{
    bson_t sub, latch;
    int64_t chains = 0;
    for (size_t i = 0; i <= e->ntrees; i++)
        chains += (int64_t)bt_ov_count(i < e->ntrees ? e->trees[i] : e->meta);
    BSON_APPEND_DOCUMENT_BEGIN(status, "transaction", &sub);
    BSON_APPEND_INT64(&sub, "begins", LOAD(e->st.begins));
    BSON_APPEND_INT64(&sub, "commits", LOAD(e->st.commits));
    BSON_APPEND_INT64(&sub, "aborts", LOAD(e->st.aborts));
    BSON_APPEND_INT64(&sub, "writeConflicts", LOAD(e->st.conflicts));
    BSON_APPEND_INT64(&sub, "chains", chains);
    BSON_APPEND_INT64(&sub, "versionsFreed", LOAD(e->st.freed));
    BSON_APPEND_INT64(&sub, "folds", LOAD(e->st.folds));
    BSON_APPEND_INT64(&sub, "versionsFolded", LOAD(e->st.folded));
    BSON_APPEND_INT64(&sub, "versionsPending", (int64_t)LOAD(e->unfolded));
    BSON_APPEND_INT64(&sub, "retired", (int64_t)LOAD(e->retired));
    BSON_APPEND_DOCUMENT_BEGIN(&sub, "latch", &latch);
    int64_t shared = 0;
    for (int i = 0; i < BT_STRIPES; i++)
        shared += LOAD(e->sh_n[i].n);
    BSON_APPEND_INT64(&latch, "sharedAcquired", shared);
    BSON_APPEND_INT64(&latch, "sharedWaitMicros", LOAD(e->st.sh_us));
    BSON_APPEND_INT64(&latch, "exclusiveAcquired", LOAD(e->st.ex_n));
    BSON_APPEND_INT64(&latch, "exclusiveWaitMicros", LOAD(e->st.ex_us));
    BSON_APPEND_INT64(&latch, "readersHeldBack", LOAD(e->st.gated));
    BSON_APPEND_INT64(&latch, "commitAcquired", LOAD(e->st.cm_n));
    BSON_APPEND_INT64(&latch, "commitWaitMicros", LOAD(e->st.cm_us));
    bson_append_document_end(&sub, &latch);
    bson_append_document_end(status, &sub);
}
