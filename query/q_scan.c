/*
 * q_scan.c -- executing a plan (q_plan.c): COLLSCAN forwards or backwards,
 * or IXSCAN over a plan's intervals in either direction followed by FETCH
 * (read the record, let the matcher decide).  Index scans return each
 * RecordId once (multikey entries and overlapping intervals repeat them).
 *
 * Choosing (q_scan_open_opts): with one candidate plan it runs; with
 * several, each gets a trial of up to Q_TRIAL_RESULTS results or
 * Q_TRIAL_WORKS keys+documents examined, and the most productive
 * (results per work, then reaching the end, then providing the sort) wins,
 * as MongoDB's MultiPlanStage does.  The trial's results are discarded and
 * the winner starts over.
 *
 * Saving: an index scan remembers its last entry (key, rid).  restore
 * lands on it or, if it was removed, on its successor: going forward the
 * scan steps over the entry it already returned; going backward it always
 * steps back.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "q_int.h"
#include "q_path.h"
#include "q_text.h"

#define Q_TRIAL_RESULTS 101
#define Q_TRIAL_WORKS 10000

/* ---- a set of RecordIds (open addressing) --------------------------------------- */

static size_t rid_hash(eng_rid r, size_t cap)
{
    uint64_t z = (uint64_t)r * 0x9e3779b97f4a7c15ull;
    return (size_t)(z >> 17) & (cap - 1);
}

/* Add r; false if it was there already. */
static bool ridset_add(q_ridset *s, eng_rid r)
{
    if (2 * (s->n + 1) > s->cap) {
        q_ridset bigger = {.cap = s->cap ? s->cap * 2 : 64};
        bigger.v = calloc(bigger.cap, sizeof *bigger.v);
        assert(bigger.v);
        for (size_t i = 0; i < s->cap; i++)
            if (s->v[i])
                ridset_add(&bigger, s->v[i]);
        free(s->v);
        *s = bigger;
    }
    size_t i = rid_hash(r, s->cap);
    while (s->v[i]) {
        if (s->v[i] == r)
            return false;
        i = (i + 1) & (s->cap - 1);
    }
    s->v[i] = r;
    s->n++;
    return true;
}

/* ---- index scans -------------------------------------------------------------------- */

/* Compare key k with bound b on b's length (prefix semantics). */
static int prefix_cmp(const uint8_t *k, uint32_t kl, const q_buf *b)
{
    size_t n = kl < b->len ? kl : b->len;
    int c = n ? memcmp(k, b->data, n) : 0;
    return c ? c : (kl < b->len ? -1 : 0);
}

/* An engine failure other than "no more entries" ends the scan with it. */
static void note(q_scan *s, int rc)
{
    if (rc && rc != MD_NOTFOUND && !s->fail) {
        s->fail = rc;
        s->eof = true;
    }
}

/* Does s->m match doc?  An $expr that failed on it ends the scan with its
 * error (*failed set; q_scan_error reports it). */
static bool scan_match(q_scan *s, const bson_t *doc, bool *failed)
{
    md_error e;
    *failed = false;
    if (!s->m)
        return true;
    bool ok = q_matcher_matches(s->m, doc);
    if (q_matcher_take_error(&e)) {
        eng_note_error(MD_EINVAL, &e);
        note(s, MD_EINVAL);
        *failed = true;
        return false;
    }
    return ok;
}

/* Seek to the first entry whose prefix is > b (after) or >= b. */
static void seek_bound(q_scan *s, const q_buf *b, bool after)
{
    uint8_t tmp[4096], ff = 0xFF;
    size_t n = b->len;
    if (!after) {
        note(s, eng_ss_cursor_seek(s->sc, b->data, (uint32_t)b->len, ENG_RID_NONE));
        return;
    }
    while (n > 0 && b->data[n - 1] == 0xFF)
        n--;
    if (n == 0 || n > sizeof tmp) { /* past every key: none starts with FF */
        note(s, eng_ss_cursor_seek(s->sc, &ff, 1, ENG_RID_NONE));
        return;
    }
    memcpy(tmp, b->data, n);
    tmp[n - 1]++;
    note(s, eng_ss_cursor_seek(s->sc, tmp, (uint32_t)n, ENG_RID_NONE));
}

/* Position at the start of interval s->iv in the scan's direction. */
static void enter_interval(q_scan *s)
{
    const q_ival *iv = &s->plan.iv[s->iv];
    if (s->plan.dir > 0) {
        seek_bound(s, &iv->lo, !iv->lo_incl);
    } else {
        seek_bound(s, &iv->hi, iv->hi_incl);
        note(s, eng_ss_cursor_prev(s->sc));
    }
}

/* Move to the next interval; false when there is none. */
static bool next_interval(q_scan *s)
{
    if (s->plan.dir > 0 ? s->iv + 1 >= s->plan.niv : s->iv == 0)
        return false;
    s->iv += s->plan.dir > 0 ? 1 : -1;
    enter_interval(s);
    return true;
}

static void step(q_scan *s)
{
    note(s, s->plan.dir > 0 ? eng_ss_cursor_next(s->sc) : eng_ss_cursor_prev(s->sc));
}

/* Where the cursor should be before looking at the next entry. */
static void advance(q_scan *s)
{
    const uint8_t *k;
    uint32_t kl;
    eng_rid rid;
    if (!s->started) {
        s->started = true;
        s->iv = s->plan.dir > 0 ? 0 : s->plan.niv - 1;
        enter_interval(s);
    } else if (s->restored) {
        s->restored = false;
        if (s->plan.dir < 0 || (eng_ss_cursor_get(s->sc, &k, &kl, &rid) == 0 &&
                                rid == s->last && kl == s->last_key.len &&
                                memcmp(k, s->last_key.data, kl) == 0))
            step(s);
    } else {
        step(s);
    }
}

/* The next index entry inside the bounds; false at the end. */
static bool index_step(q_scan *s, eng_rid *rid)
{
    const uint8_t *k;
    uint32_t kl;
    if (s->plan.niv == 0)
        return false;
    advance(s);
    for (;;) {
        int rc = s->fail ? s->fail : eng_ss_cursor_get(s->sc, &k, &kl, rid);
        note(s, rc);
        if (s->fail)
            return false;
        if (rc != 0) {
            if (!next_interval(s))
                return false;
            continue;
        }
        const q_ival *iv = &s->plan.iv[s->iv];
        int cl = prefix_cmp(k, kl, &iv->lo), ch = prefix_cmp(k, kl, &iv->hi);
        bool below = cl < 0 || (cl == 0 && !iv->lo_incl);
        bool above = ch > 0 || (ch == 0 && !iv->hi_incl);
        if (s->plan.dir > 0 ? above : below) {
            if (!next_interval(s))
                return false;
            continue;
        }
        s->keys++;
        if (below || above) {
            step(s);
            continue;
        }
        q_buf_reset(&s->last_key);
        q_buf_append(&s->last_key, k, kl);
        s->last = *rid;
        return true;
    }
}

/* Let writers waiting for the data lock in (q_lock.c); the scan ends if
 * its cursor cannot be restored afterwards. */
static void maybe_yield(q_scan *s)
{
    if (!q_lock_should_yield(s->db, &s->yield))
        return;
    q_scan_save(s);
    q_lock_yield(s->db);
    int rc = q_scan_restore(s);
    if (rc == MD_ECAPPEDLOST)
        note(s, rc); /* the ring passed a capped scan: an error, not an end */
    else if (rc != 0)
        s->eof = true;
}

static int scan_next_index(q_scan *s, eng_rid *rid, bson_t *doc)
{
    const uint8_t *data;
    uint32_t len;
    while (!s->eof) {
        maybe_yield(s);
        if (s->eof)
            break;
        if (!index_step(s, rid)) {
            s->eof = true;
            break;
        }
        Q_COUNT(s->db->m.scanned, 1);
        if (s->pre && !s->plan.covered) {
            /* a key that fails the prefilter needs no fetch (nor a place
             * in the dedup set: another key of the record may pass); one
             * that cannot be decoded (a null, a document) is fetched */
            bson_destroy(&s->kdoc);
            if (q_key_decode(&s->ix->key, s->last_key.data, (uint32_t)s->last_key.len,
                             &s->kdoc) &&
                !q_matcher_matches(s->pre, &s->kdoc))
                continue;
        }
        if (!ridset_add(&s->seen, *rid))
            continue;
        if (s->plan.covered) {
            bson_destroy(&s->kdoc);
            if (q_key_decode(&s->ix->key, s->last_key.data, (uint32_t)s->last_key.len,
                             &s->kdoc) &&
                bson_init_static(doc, bson_get_data(&s->kdoc), s->kdoc.len)) {
                bool failed;
                if (s->plan.key_filter && !scan_match(s, doc, &failed)) {
                    if (failed)
                        break;
                    continue;
                }
                return s->advanced++, 0;
            }
        }
        int rc = eng_rs_get(s->c->rs, *rid, &data, &len);
        note(s, rc);
        if (s->fail)
            break;
        if (rc != 0 || !bson_init_static(doc, data, len))
            continue; /* a stale entry: validate reports it */
        Q_COUNT(s->db->m.scanned_objects, 1);
        s->docs++;
        bool failed;
        if (scan_match(s, doc, &failed))
            return s->advanced++, 0;
        if (failed)
            break;
    }
    return MD_NOTFOUND;
}

static int scan_next_coll(q_scan *s, eng_rid *rid, bson_t *doc)
{
    const uint8_t *data;
    uint32_t len;
    while (!s->eof) {
        maybe_yield(s);
        int rc = s->eof ? MD_NOTFOUND : eng_rs_cursor_next(s->rc, rid, &data, &len);
        if (rc != 0) {
            note(s, rc);
            s->eof = true;
            break;
        }
        Q_COUNT(s->db->m.scanned_objects, 1);
        s->docs++;
        s->last = *rid;
        if (!bson_init_static(doc, data, len))
            continue;
        bool failed;
        if (scan_match(s, doc, &failed))
            return s->advanced++, 0;
        if (failed)
            break;
    }
    return MD_NOTFOUND;
}

int q_scan_next(q_scan *s, eng_rid *rid, bson_t *doc)
{
    int rc = s->kind == Q_SCAN_TEXT    ? q_text_scan_next(s, rid, doc)
             : s->kind == Q_SCAN_INDEX ? scan_next_index(s, rid, doc)
                                       : scan_next_coll(s, rid, doc);
    return s->fail ? s->fail : rc;
}

int q_read_error(int rc, md_error *err)
{
    md_error detail;
    if (eng_take_error(&detail) && err && !err->message[0]) {
        *err = detail; /* the engine's words: the file and the offset */
        return rc;
    }
    return q_err_engine(err, rc, "reading");
}

int q_scan_error(const q_scan *s, md_error *err)
{
    return s->fail ? q_read_error(s->fail, err) : 0;
}

/* ---- opening, choosing ---------------------------------------------------------------- */

int q_scan_open_plan(q_scan *s, md_db *db, q_coll *c, const q_matcher *m, q_plan *p,
                     md_error *err)
{
    int rc;
    memset(s, 0, sizeof *s);
    eng_take_error(NULL); /* a read error noted earlier is not this scan's */
    q_matcher_take_error(NULL); /* nor an $expr failure */
    s->db = db;
    s->c = c;
    s->m = m;
    s->plan = *p;
    memset(p, 0, sizeof *p);
    q_buf_init(&s->last_key);
    bson_init(&s->kdoc);
    s->ix = s->plan.ix;
    s->kind = s->ix ? Q_SCAN_INDEX : Q_SCAN_COLL;
    if (s->ix) {
        Q_COUNT(s->ix->accesses, 1);
        if ((rc = eng_ss_cursor_open(s->ix->ss, &s->sc)) != 0)
            return q_err_engine(err, rc, "opening an index cursor");
        if (s->plan.text) {
            s->kind = Q_SCAN_TEXT;
            return q_text_scan_open(s, err);
        }
        return 0;
    }
    rc = eng_rs_cursor_open(c->rs, s->plan.dir >= 0, &s->rc);
    return rc ? q_err_engine(err, rc, "opening a collection cursor") : 0;
}

/* Results per work of plan p in a short trial (higher is better). */
static double trial(md_db *db, q_coll *c, const q_matcher *m, const q_plan *p, bool *eof)
{
    q_scan s;
    q_plan copy;
    eng_rid rid;
    bson_t doc;
    q_plan_copy(p, &copy);
    *eof = false;
    if (q_scan_open_plan(&s, db, c, m, &copy, NULL) != 0) {
        q_scan_close(&s);
        return -1;
    }
    /* A plan that leaves the sort to memory (MongoDB's blocking SORT
     * stage) returns nothing until its scan has ended, then one result per
     * work: it scans on past Q_TRIAL_RESULTS, and scores nothing unless the
     * scan ends within the trial. */
    while ((!p->sort_provided || s.advanced < Q_TRIAL_RESULTS) &&
           s.keys + s.docs < Q_TRIAL_WORKS)
        if (q_scan_next(&s, &rid, &doc) != 0) {
            *eof = true;
            break;
        }
    double adv = (double)s.advanced, works = (double)(s.keys + s.docs);
    if (!p->sort_provided) {
        adv = *eof ? (adv < Q_TRIAL_RESULTS ? adv : Q_TRIAL_RESULTS) : 0;
        works += adv;
    }
    double score = adv / (works + 1);
    q_scan_close(&s);
    return score;
}

static size_t choose(md_db *db, q_coll *c, const q_matcher *m, const q_plan *v, size_t n)
{
    size_t best = 0;
    double best_score = -2;
    for (size_t i = 0; i < n; i++) {
        bool eof;
        double sc = trial(db, c, m, &v[i], &eof) + (eof ? 1e-4 : 0) +
                    (v[i].sort_provided ? 1e-3 : 0);
        if (sc > best_score) {
            best_score = sc;
            best = i;
        }
    }
    return best;
}

/* The cached choice for this query's shape, else a trial (cached after). */
static size_t choose_cached(md_db *db, q_coll *c, const bson_t *filter, const q_matcher *m,
                            const q_scan_opts *o, const q_plan *v, size_t n)
{
    q_buf shape;
    size_t win = n;
    q_buf_init(&shape);
    q_plan_shape(filter, o->sort, o->proj, &shape);
    char cached[ENG_IDENT_MAX];
    const char *name = !o->explain && q_plan_cache_get(c, &shape, cached) ? cached : NULL;
    for (size_t i = 0; name && i < n && win == n; i++)
        if (v[i].ix ? strcmp(v[i].ix->name, name) == 0 : name[0] == 0)
            win = i;
    if (win == n) {
        win = choose(db, c, m, v, n);
        if (!o->explain)
            q_plan_cache_put(c, &shape, filter, o->sort, o->proj,
                             v[win].ix ? v[win].ix->name : "");
    }
    q_buf_cleanup(&shape);
    return win;
}

int q_scan_open_opts(q_scan *s, md_db *db, q_coll *c, const bson_t *filter,
                     const q_matcher *m, const q_scan_opts *o, md_error *err)
{
    q_plan *v;
    size_t n, win = 0;
    static const q_scan_opts none;
    if (!o)
        o = &none;
    q_matcher_set_js_limit(m, db->js_time_limit_ms);
    int rc = q_plan_enumerate(c, filter, o->sort, o->hint, &v, &n, err);
    if (rc) {
        memset(s, 0, sizeof *s);
        q_buf_init(&s->last_key);
        bson_init(&s->kdoc);
        return rc;
    }
    for (size_t i = 0; o->proj && i < n; i++)
        v[i].covered = q_plan_covers(&v[i], filter, o->proj);
    if (n > 1)
        win = choose_cached(db, c, filter, m, o, v, n);
    rc = q_scan_open_plan(s, db, c, m, &v[win], err);
    bson_t *pre = rc ? NULL : q_plan_key_prefilter(&s->plan, filter);
    if (pre) {
        md_error perr;
        if (q_matcher_new(pre, &s->pre, &perr) != 0)
            s->pre = NULL; /* the full matcher still decides every record */
        bson_destroy(pre);
    }
    if (o->explain) {
        for (size_t i = 0; i < n; i++)
            if (i != win)
                v[s->nrejected++] = v[i];
        s->rejected = v;
        return rc;
    }
    q_plans_free(v, n);
    return rc;
}

int q_scan_open(q_scan *s, md_db *db, q_coll *c, const bson_t *filter, const q_matcher *m,
                md_error *err)
{
    return q_scan_open_opts(s, db, c, filter, m, NULL, err);
}

const char *q_scan_plan_name(const q_scan *s)
{
    if (s->kind == Q_SCAN_COLL)
        return "COLLSCAN";
    if (s->kind == Q_SCAN_TEXT)
        return "TEXT";
    return s->plan.idhack ? "IDHACK" : "IXSCAN";
}

void q_scan_save(q_scan *s)
{
    if (s->kind == Q_SCAN_INDEX)
        eng_ss_cursor_save(s->sc);
    else if (s->kind == Q_SCAN_COLL)
        eng_rs_cursor_save(s->rc);
}

int q_scan_restore(q_scan *s)
{
    if (s->kind == Q_SCAN_TEXT) /* reads records by RecordId: nothing to restore */
        return 0;
    if (s->kind == Q_SCAN_COLL)
        return eng_rs_cursor_restore(s->rc);
    s->restored = s->started;
    return eng_ss_cursor_restore(s->sc);
}

void q_scan_close(q_scan *s)
{
    eng_rs_cursor_close(s->rc);
    eng_ss_cursor_close(s->sc);
    s->rc = NULL;
    s->sc = NULL;
    q_text_scan_close(s);
    q_matcher_destroy(s->pre);
    s->pre = NULL;
    q_buf_cleanup(&s->last_key);
    if (s->kdoc.len)
        bson_destroy(&s->kdoc);
    memset(&s->kdoc, 0, sizeof s->kdoc);
    q_plan_cleanup(&s->plan);
    q_plans_free(s->rejected, s->nrejected);
    s->rejected = NULL;
    s->nrejected = 0;
    free(s->seen.v);
    memset(&s->seen, 0, sizeof s->seen);
}

int q_scan_collect(md_db *db, q_coll *c, const bson_t *filter, const q_matcher *m,
                   int64_t limit, eng_rid **rids, size_t *n, md_error *err)
{
    q_scan s;
    eng_rid rid;
    bson_t doc;
    size_t cap = 0;
    *rids = NULL;
    *n = 0;
    int rc = q_scan_open(&s, db, c, filter, m, err);
    while (!rc && (limit == 0 || (int64_t)*n < limit) && q_scan_next(&s, &rid, &doc) == 0) {
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            eng_rid *v = realloc(*rids, cap * sizeof *v);
            assert(v);
            *rids = v;
        }
        (*rids)[(*n)++] = rid;
    }
    if (!rc)
        rc = q_scan_error(&s, err);
    q_scan_close(&s);
    return rc;
}
