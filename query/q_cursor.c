/*
 * q_cursor.c -- reading: sort and the server-side cursors behind find /
 * getMore / killCursors (plans are q_plan.c, scans q_scan.c, projection
 * q_proj.c).  A find whose plan delivers the requested order (an index
 * scan, see q_plan.c) streams; otherwise the matches are sorted in memory.
 *
 * A cursor that outlives its first batch keeps its scan saved between
 * batches (eng.h) under a random 63-bit id.  Each batch looks one document
 * ahead, so an exhausted cursor answers id 0 at once; the look-ahead is
 * kept as a RecordId, fetched and re-matched by the next getMore.
 *
 * Sort keys follow MongoDB's rule for arrays: every value the dotted path
 * reaches (through arrays of documents, the elements of a final array)
 * competes, the smallest for an ascending key, the largest for a
 * descending one.  Cursors idle for longer than cursorTimeoutMillis (10
 * minutes by default, setParameter or the open option) are killed by the
 * next command (q_cursor_reap), unless opened with noCursorTimeout.
 *
 * Tailable cursors (find {tailable: true}, capped collections only) scan
 * the collection forward in insertion order and stay open at its end: the
 * engine cursor rests after the last record (eng.h, "Tailing"), and each
 * getMore asks it again for what was inserted since.  As MongoDB 3.x
 * (SERVER-13955), a tailable find on an empty collection answers id 0.
 * With awaitData, a getMore that finds nothing waits for an insert:
 *
 *   getMore -> nothing new -> link the cursor back, marked waiting
 *           -> release the collection and database locks
 *           -> sleep on db->cap_cv until c->cap_inserts moves, the cursor
 *              is killed, or maxTimeMS (default 1000) passes
 *           -> retake the locks, unlink, look again (repeat while time is left)
 *
 * A waiting cursor is in the registry but pinned: getMore and the reaper
 * pass it by; a drop (exclusive lock, nobody else running) unlinks it,
 * releases its scan and marks it killed; killCursors marks it killed and
 * leaves it linked; the waiter unlinks and frees it.  When the ring overwrites the record a cursor rests on, the
 * next getMore fails with CappedPositionLost (136) and the cursor dies.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "q_geo.h"
#include "q_int.h"
#include "q_path.h"

/* ---- sort ---------------------------------------------------------------------- */

/* {$meta: "textScore"}: a sort on the text score (QueryRequest::isTextScoreMeta). */
static bool is_meta_key(const bson_iter_t *it)
{
    bson_iter_t x;
    return BSON_ITER_HOLDS_DOCUMENT(it) && bson_iter_recurse(it, &x) && bson_iter_next(&x) &&
           !strcmp(bson_iter_key(&x), "$meta") && BSON_ITER_HOLDS_UTF8(&x) &&
           !strcmp(bson_iter_utf8(&x, NULL), "textScore") && !bson_iter_next(&x);
}

bool q_sort_has_meta(const bson_t *spec)
{
    bson_iter_t it;
    if (!spec || !bson_iter_init(&it, spec))
        return false;
    while (bson_iter_next(&it))
        if (BSON_ITER_HOLDS_DOCUMENT(&it))
            return true;
    return false;
}

int q_sort_check(const bson_t *spec, md_error *err)
{
    bson_iter_t it;
    if (!spec)
        return 0;
    bson_iter_init(&it, spec);
    while (bson_iter_next(&it)) {
        double d = BSON_ITER_HOLDS_NUMBER(&it) ? bson_iter_as_double(&it) : 0;
        if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
            if (!is_meta_key(&it))
                return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE, "bad sort specification");
            continue;
        }
        if (d != 1 && d != -1)
            return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                         "bad sort specification: '%s' must be 1 or -1", bson_iter_key(&it));
    }
    return 0;
}

typedef struct sort_acc {
    bool desc, have;
    bson_iter_t best;
} sort_acc;

/* {n: null, u: undefined}: what a missing path and an empty array give. */
static const uint8_t q_sort_consts[] = {0x0b, 0, 0, 0, 0x0a, 'n', 0, 0x06, 'u', 0, 0};

static void sort_consider(sort_acc *a, const bson_iter_t *e)
{
    int c = a->have ? q_value_cmp(e, &a->best) : 0;
    if (!a->have || (a->desc ? c > 0 : c < 0))
        a->best = *e;
    a->have = true;
}

/* Consider the constant "n" (null) or "u" (undefined). */
static void sort_consider_const(sort_acc *a, const char *which)
{
    bson_iter_t c;
    if (bson_iter_init_from_data(&c, q_sort_consts, sizeof q_sort_consts) &&
        bson_iter_find(&c, which))
        sort_consider(a, &c);
}

/* Every value the sort key path reaches, as index key generation finds
 * them: through documents and arrays of documents, an array at the end
 * giving its elements (an empty one: undefined, which sorts before null);
 * a path that stops early gives null. */
static void sort_walk(sort_acc *a, const uint8_t *data, uint32_t len, const q_path *p, size_t i)
{
    bson_iter_t e, x;
    const uint8_t *d;
    uint32_t l;
    if (!q_doc_find(data, len, p->part[i], &e)) {
        sort_consider_const(a, "n");
    } else if (i + 1 == p->n) {
        if (!BSON_ITER_HOLDS_ARRAY(&e) || !bson_iter_recurse(&e, &x)) {
            sort_consider(a, &e);
            return;
        }
        bool any = false;
        while (bson_iter_next(&x))
            sort_consider(a, &x), any = true;
        if (!any)
            sort_consider_const(a, "u");
    } else if (BSON_ITER_HOLDS_DOCUMENT(&e) ||
               (BSON_ITER_HOLDS_ARRAY(&e) && q_all_digits(p->part[i + 1]))) {
        q_iter_sub(&e, &d, &l);
        sort_walk(a, d, l, p, i + 1);
    } else if (BSON_ITER_HOLDS_ARRAY(&e) && bson_iter_recurse(&e, &x)) {
        while (bson_iter_next(&x)) {
            if (BSON_ITER_HOLDS_DOCUMENT(&x)) {
                q_iter_sub(&x, &d, &l);
                sort_walk(a, d, l, p, i + 1);
            } else {
                sort_consider_const(a, "n");
            }
        }
    } else {
        sort_consider_const(a, "n");
    }
}

/* A document's sort value on path: the smallest value the path reaches for
 * an ascending sort, the largest for a descending one (MongoDB's rule for
 * arrays).  False: null. */
static bool sort_value(const bson_t *doc, const char *path, bool desc, bson_iter_t *out)
{
    q_path p;
    sort_acc a = {.desc = desc};
    if (!q_path_init(&p, path, -1))
        return false;
    sort_walk(&a, bson_get_data(doc), doc->len, &p, 0);
    q_path_cleanup(&p);
    if (!a.have)
        return false;
    *out = a.best;
    return true;
}

typedef struct sort_item {
    bson_t *doc;
    size_t pos;
    double score;
} sort_item;

/* Order two documents (with their text scores) by spec (0: equal keys);
 * a {$meta: "textScore"} key puts the higher score first. */
static int sort_cmp_scored(const bson_t *a, double sa, const bson_t *b, double sb,
                           const bson_t *spec)
{
    bson_iter_t it, va, vb, nul;
    bson_t nulldoc = BSON_INITIALIZER;
    BSON_APPEND_NULL(&nulldoc, "n");
    bson_iter_init_find(&nul, &nulldoc, "n");
    bson_iter_init(&it, spec);
    int c = 0;
    while (c == 0 && bson_iter_next(&it)) {
        if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
            c = (sa < sb) - (sa > sb);
            continue;
        }
        bool desc = bson_iter_as_double(&it) < 0;
        if (!sort_value(a, bson_iter_key(&it), desc, &va))
            va = nul;
        if (!sort_value(b, bson_iter_key(&it), desc, &vb))
            vb = nul;
        c = q_value_cmp(&va, &vb);
        if (desc)
            c = -c;
    }
    bson_destroy(&nulldoc);
    return c;
}

/* Order two documents by spec alone (0: equal keys; text scores count as 0). */
int q_sort_cmp_docs(const bson_t *a, const bson_t *b, const bson_t *spec)
{
    return sort_cmp_scored(a, 0, b, 0, spec);
}

/* Equal keys keep their input order (a stable sort). */
static int sort_cmp(const void *pa, const void *pb, void *ctx)
{
    const sort_item *a = pa, *b = pb;
    int c = sort_cmp_scored(a->doc, a->score, b->doc, b->score, ctx);
    if (c == 0)
        c = a->pos < b->pos ? -1 : a->pos > b->pos;
    return c;
}

void q_sort_docs_scored(bson_t **docs, double *scores, size_t n, const bson_t *spec)
{
    sort_item *v = malloc((n ? n : 1) * sizeof *v);
    assert(v);
    for (size_t i = 0; i < n; i++)
        v[i] = (sort_item){docs[i], i, scores ? scores[i] : 0};
    qsort_r(v, n, sizeof *v, sort_cmp, (void *)spec);
    for (size_t i = 0; i < n; i++) {
        docs[i] = v[i].doc;
        if (scores)
            scores[i] = v[i].score;
    }
    free(v);
}

void q_sort_docs(bson_t **docs, size_t n, const bson_t *spec)
{
    q_sort_docs_scored(docs, NULL, n, spec);
}

/* ---- cursors ------------------------------------------------------------------ */

typedef struct q_cursor {
    int64_t id;
    md_db *db;
    q_coll *c;
    char ns[ENG_IDENT_MAX];
    bson_t filter;
    q_matcher *m;
    q_proj proj;
    q_scan scan;
    bool has_scan;
    bson_t **docs; /* materialized (sorted) results */
    double *scores; /* their text scores ($text), or NULL */
    size_t ndocs, pos;
    double score, stash_score; /* the text score of the last result / the stashed one */
    bson_t view;
    int64_t limit, returned;
    eng_rid stash;
    int fail;        /* a read failed (engine error, damaged BSON): so does the batch */
    int64_t used_ms; /* last find/getMore, for the idle timeout */
    bool no_timeout;
    bool tailable, await_data;
    /* awaitData (see the top): waiting and killed change under db->cur_mu,
     * killed also under db->cap_mu; released: a drop closed the scan */
    bool waiting, killed, released;
    struct q_cursor *next;
} q_cursor;

/* Everything but the struct itself (a killed waiting cursor's waiter frees that). */
static void cursor_release(q_cursor *cur)
{
    if (cur->released)
        return;
    cur->released = true;
    if (cur->has_scan)
        q_scan_close(&cur->scan);
    cur->has_scan = false;
    for (size_t i = 0; i < cur->ndocs; i++)
        bson_destroy(cur->docs[i]);
    free(cur->docs);
    free(cur->scores);
    cur->docs = NULL;
    cur->scores = NULL;
    cur->ndocs = 0;
    q_matcher_destroy(cur->m);
    cur->m = NULL;
    q_proj_cleanup(&cur->proj);
    bson_destroy(&cur->filter);
}

static void cursor_free(q_cursor *cur)
{
    if (!cur)
        return;
    cursor_release(cur);
    free(cur);
}

/* splitmix64: ids look random and are never 0 or negative. */
static int64_t cursor_new_id(md_db *db)
{
    for (;;) {
        uint64_t z = (db->cursor_seed += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        int64_t id = (int64_t)((z ^ (z >> 31)) >> 1);
        bool used = id == 0;
        for (q_cursor *c = db->cursors; c && !used; c = c->next)
            used = c->id == id;
        if (!used)
            return id;
    }
}

/* The next result: a borrowed view valid until the next call or write. */
static int cursor_next(q_cursor *cur, const bson_t **doc, eng_rid *rid)
{
    if (!cur->has_scan) {
        if (cur->pos >= cur->ndocs)
            return MD_NOTFOUND;
        *rid = ENG_RID_NONE;
        cur->score = cur->scores ? cur->scores[cur->pos] : 0;
        *doc = cur->docs[cur->pos++];
        return 0;
    }
    bool stashed = false;
    cur->score = 0;
    if (cur->stash) {
        cur->score = cur->stash_score;
        const uint8_t *data;
        uint32_t len;
        *rid = cur->stash;
        cur->stash = ENG_RID_NONE;
        stashed = eng_rs_get(cur->c->rs, *rid, &data, &len) == 0 &&
                  bson_init_static(&cur->view, data, len) &&
                  (!cur->m || q_matcher_matches(cur->m, &cur->view));
    }
    int rc = stashed ? 0 : q_scan_next(&cur->scan, rid, &cur->view);
    if (!stashed)
        cur->score = cur->scan.kind == Q_SCAN_TEXT ? cur->scan.text_score : 0;
    *doc = &cur->view;
    /* engines without a record checksum may hold damaged BSON: it must not
     * reach the caller (mmapv1's mm_int.h, "Damage detection") */
    if (rc == 0 && !cur->db->ops->checked_reads &&
        !eng_bson_well_formed(bson_get_data(&cur->view), cur->view.len)) {
        md_error e;
        md_error_clear(&e);
        eng_note_error(ENG_CORRUPT(&e, "record %lld of %s is not a well-formed BSON document",
                                   (long long)*rid, cur->ns),
                       &e);
        rc = MD_ECORRUPT;
    }
    if (rc && rc != MD_NOTFOUND)
        cur->fail = rc;
    return rc;
}

static void cursor_unread(q_cursor *cur, eng_rid rid)
{
    if (cur->has_scan) {
        cur->stash = rid;
        cur->stash_score = cur->score;
    } else
        cur->pos--;
}

/* Append up to max_docs (-1: no limit) results to arr; true when exhausted. */
static bool fill_batch(q_cursor *cur, bson_t *arr, int64_t max_docs)
{
    int64_t n = 0;
    size_t bytes = 0;
    char key[24];
    for (;;) {
        const bson_t *doc;
        eng_rid rid;
        bson_t out;
        if (cur->limit && cur->returned >= cur->limit)
            return true;
        if (cursor_next(cur, &doc, &rid) != 0)
            return true;
        cur->proj.text_score = cur->score;
        q_proj_apply(&cur->proj, doc, &out);
        if ((max_docs >= 0 && n >= max_docs) || (n > 0 && bytes + out.len > Q_BSON_MAX)) {
            bson_destroy(&out);
            cursor_unread(cur, rid);
            return false;
        }
        snprintf(key, sizeof key, "%lld", (long long)n++);
        bson_append_document(arr, key, -1, &out);
        bytes += out.len;
        bson_destroy(&out);
        cur->returned++;
        Q_COUNT(cur->db->m.returned, 1);
    }
}

static void reply_batch(q_cursor *cur, bson_t *reply, int64_t max_docs, bool first,
                        bool *exhausted)
{
    bson_t cs, arr;
    BSON_APPEND_DOCUMENT_BEGIN(reply, "cursor", &cs);
    bson_append_array_begin(&cs, first ? "firstBatch" : "nextBatch", -1, &arr);
    *exhausted = fill_batch(cur, &arr, max_docs);
    bson_append_array_end(&cs, &arr);
    BSON_APPEND_INT64(&cs, "id", *exhausted ? 0 : cur->id);
    BSON_APPEND_UTF8(&cs, "ns", cur->ns);
    bson_append_document_end(reply, &cs);
}

/* The registry: a cursor in use by getMore is unlinked, so no other thread
 * can find, reap or kill it meanwhile (MongoDB pins it). */
static void cursor_link(md_db *db, q_cursor *cur)
{
    pthread_mutex_lock(&db->cur_mu);
    cur->next = db->cursors;
    db->cursors = cur;
    pthread_mutex_unlock(&db->cur_mu);
}

static q_cursor *cursor_unlink(md_db *db, int64_t id)
{
    q_cursor *cur = NULL;
    pthread_mutex_lock(&db->cur_mu);
    for (q_cursor **p = &db->cursors; *p; p = &(*p)->next)
        if ((*p)->id == id && !(*p)->waiting) {
            cur = *p;
            *p = cur->next;
            break;
        }
    pthread_mutex_unlock(&db->cur_mu);
    return cur;
}

/* Free an unlinked cursor under its collection's lock: closing an engine
 * cursor touches the engine's state for that collection. */
static void cursor_free_locked(md_db *db, q_cursor *cur)
{
    q_coll *c = cur->c;
    q_coll_lock(db, c, false);
    cursor_free(cur);
    q_coll_unlock(db, c);
}

/* Has a tailable cursor more to wait for: no failure, limit not reached? */
static bool tail_live(const q_cursor *cur)
{
    return !cur->fail && !(cur->limit && cur->returned >= cur->limit);
}

/* A tailable cursor whose batch reached the end of its collection stays
 * open while tail_live, except on a find over an empty collection
 * (empty_dies; SERVER-13955).  True: it stays, and the reply's id (0 from
 * reply_batch) becomes the cursor's. */
static bool tail_stays(q_cursor *cur, bool empty_dies, bson_t *reply)
{
    bson_iter_t it;
    eng_rs_stats st;
    if (!tail_live(cur))
        return false;
    if (empty_dies) {
        q_coll_stats(cur->c, &st);
        if (st.count == 0)
            return false;
    }
    if (bson_iter_init(&it, reply) && bson_iter_find_descendant(&it, "cursor.id", &it))
        bson_iter_overwrite_int64(&it, cur->id);
    return true;
}

/* Run the scan to the end into cur->docs and sort them. */
static int materialize_sorted(q_cursor *cur, const bson_t *sort, md_error *err)
{
    const bson_t *doc;
    eng_rid rid;
    size_t cap = 0, bytes = 0;
    while (cursor_next(cur, &doc, &rid) == 0) {
        bytes += doc->len;
        if (bytes > Q_SORT_MEM_MAX)
            return q_err(err, MD_ETOOBIG, Q_CODE_OPERATION_FAILED,
                         "Sort operation used more than the maximum %d bytes of RAM. Add "
                         "an index, or specify a smaller limit.", Q_SORT_MEM_MAX);
        if (cur->ndocs == cap) {
            cap = cap ? cap * 2 : 64;
            bson_t **v = realloc(cur->docs, cap * sizeof *v);
            double *sc = realloc(cur->scores, cap * sizeof *sc);
            assert(v && sc);
            cur->docs = v;
            cur->scores = sc;
        }
        cur->scores[cur->ndocs] = cur->score;
        cur->docs[cur->ndocs++] = bson_copy(doc);
    }
    q_scan_close(&cur->scan);
    cur->has_scan = false;
    q_sort_docs_scored(cur->docs, cur->scores, cur->ndocs, sort);
    return 0;
}

/* A tailable cursor scans the collection forward, whatever the indexes
 * (MongoDB's planner gives tailable queries a collection scan only). */
static int tail_start(q_cursor *cur, md_error *err)
{
    q_plan p;
    if (!cur->c->capped)
        return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                     "error processing query: ns=%s tailable cursor requested on non capped "
                     "collection",
                     cur->ns);
    memset(&p, 0, sizeof p);
    p.dir = 1;
    p.sort_provided = true;
    int rc = q_scan_open_plan(&cur->scan, cur->db, cur->c, cur->m, &p, err);
    cur->has_scan = true;
    return rc;
}

/* QueryRequest::validate: every {f: {$meta}} sort key has the same $meta
 * projection. */
static int meta_sort_check(const q_proj *p, const bson_t *sort, md_error *err)
{
    bson_iter_t it;
    if (!q_sort_has_meta(sort) || !bson_iter_init(&it, sort))
        return 0;
    while (bson_iter_next(&it)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&it))
            continue;
        bool found = false;
        for (size_t i = 0; i < p->nmeta && !found; i++)
            found = !strcmp(p->meta[i], bson_iter_key(&it));
        if (!found)
            return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                         "must have $meta projection for all $meta sort keys");
    }
    return 0;
}

static int cursor_start(q_cursor *cur, const q_find_args *a, md_error *err)
{
    const bson_t *doc;
    eng_rid rid;
    int rc = q_proj_init_query(&cur->proj, a->projection, a->filter, err);
    if (!rc)
        rc = q_sort_check(a->sort, err);
    if (!rc)
        rc = meta_sort_check(&cur->proj, a->sort, err);
    if (!rc && a->filter)
        bson_copy_to(a->filter, &cur->filter);
    else
        bson_init(&cur->filter);
    if (!rc)
        rc = q_matcher_new(&cur->filter, &cur->m, err);
    cur->proj.m = cur->m;
    if (rc || !cur->c)
        return rc;
    if (a->tailable)
        return tail_start(cur, err);
    /* $near / $nearSphere: the near stage's results, sorted by distance
     * (all of them when another sort follows) */
    bool sorted = a->sort && !bson_empty(a->sort);
    rc = q_geo_near_run(cur->db, cur->c, cur->m, a->limit && !sorted ? a->limit + a->skip : 0,
                        &cur->docs, &cur->ndocs, NULL, NULL, err);
    if (rc != Q_GEO_NOT_NEAR) {
        if (!rc && sorted)
            q_sort_docs(cur->docs, cur->ndocs, a->sort);
        for (int64_t i = 0; !rc && i < a->skip && cursor_next(cur, &doc, &rid) == 0; i++)
            ;
        return rc;
    }
    q_scan_opts so = {.sort = a->sort, .hint = a->hint, .proj = a->projection};
    rc = q_scan_open_opts(&cur->scan, cur->db, cur->c, &cur->filter, cur->m, &so, err);
    cur->has_scan = true;
    if (rc)
        return rc;
    if (!cur->scan.plan.sort_provided && (rc = materialize_sorted(cur, a->sort, err)))
        return rc;
    if (cur->fail)
        return q_read_error(cur->fail, err);
    for (int64_t i = 0; i < a->skip && cursor_next(cur, &doc, &rid) == 0; i++)
        ;
    return 0;
}

/* Can the find take IDHACK: {_id: v} on a collection with an _id index,
 * no hint, skip, tailable, or zero batch (which keeps a cursor open)? */
static q_index *find_idhack(md_db *db, q_coll *c, const q_find_args *a, bson_iter_t *id)
{
    q_index *ix = c && !a->tailable && !a->hint && a->skip == 0 && a->batch_size != 0
                      ? q_idhack_index(db, c)
                      : NULL;
    return ix && q_idhack_query(a->filter, id) ? ix : NULL;
}

int q_find_by_id(md_db *db, q_coll *c, const q_find_args *a, bool *found, bson_t *out,
                 md_error *err)
{
    bson_iter_t id;
    bson_t view;
    eng_rid rid;
    q_proj proj;
    *found = false;
    q_index *ix = find_idhack(db, c, a, &id);
    if (!ix)
        return Q_FIND_GENERAL;
    int rc = q_proj_init_query(&proj, a->projection, a->filter, err);
    if (!rc && proj.positional) { /* "a.$" wants the matcher's array position */
        q_proj_cleanup(&proj);
        return Q_FIND_GENERAL;
    }
    if (!rc)
        rc = q_sort_check(a->sort, err);
    if (!rc) {
        q_coll_lock(db, c, false);
        rc = q_idhack_get(db, c, ix, &id, &rid, &view, err);
        if (rc == 0) {
            *found = true;
            bson_reinit(out);
            if (proj.active) {
                bson_t p;
                q_proj_apply(&proj, &view, &p);
                bson_concat(out, &p);
                bson_destroy(&p);
            } else {
                bson_concat(out, &view);
            }
            Q_COUNT(db->m.returned, 1);
        }
        q_coll_unlock(db, c);
        if (rc == MD_NOTFOUND)
            rc = 0;
    }
    q_proj_cleanup(&proj);
    return rc;
}

int q_cursor_find(md_db *db, q_coll *c, const char *ns, const q_find_args *a, bson_t *reply,
                  md_error *err)
{
    bool exhausted;
    int rc;
    q_cursor *cur = q_zalloc(sizeof *cur);
    assert(cur);
    cur->db = db;
    cur->c = c;
    cur->limit = a->limit;
    snprintf(cur->ns, sizeof cur->ns, "%s", ns);
    q_coll_lock(db, c, false);
    rc = cursor_start(cur, a, err);
    if (rc) {
        q_coll_unlock(db, c);
        cursor_free(cur);
        return rc;
    }
    pthread_mutex_lock(&db->cur_mu);
    cur->id = a->single_batch ? 0 : cursor_new_id(db);
    pthread_mutex_unlock(&db->cur_mu);
    reply_batch(cur, reply, a->batch_size >= 0 ? a->batch_size : Q_DEFAULT_BATCH, true,
                &exhausted);
    cur->used_ms = q_now_ms();
    cur->no_timeout = a->no_timeout;
    cur->tailable = a->tailable;
    cur->await_data = a->await_data;
    if (cur->tailable && c && exhausted)
        exhausted = !tail_stays(cur, true, reply);
    if (exhausted || a->single_batch || !c || cur->fail) {
        rc = cur->fail ? q_read_error(cur->fail, err) : 0;
        q_coll_unlock(db, c);
        cursor_free(cur);
        return rc;
    }
    if (cur->has_scan)
        q_scan_save(&cur->scan);
    q_coll_unlock(db, c);
    cursor_link(db, cur);
    return 0;
}

/* The record a capped scan rested on is gone: MongoDB's words. */
static int capped_lost_error(q_cursor *cur, md_error *err)
{
    return q_err(err, MD_ECAPPEDLOST, MD_CODE_CAPPED_POSITION_LOST,
                 "CollectionScan died due to failure to restore tailable cursor position. "
                 "Last seen record id: RecordId(%lld)",
                 (long long)cur->scan.last);
}

static int batch_error(q_cursor *cur, md_error *err)
{
    if (cur->fail == MD_ECAPPEDLOST)
        return capped_lost_error(cur, err);
    return cur->fail ? q_read_error(cur->fail, err) : 0;
}

/* Restore the saved scan (under the collection lock); a tailable one asks
 * the engine again past its end. */
static void cursor_restore(q_cursor *cur)
{
    if (!cur->has_scan)
        return;
    int rc = q_scan_restore(&cur->scan);
    if (rc == MD_ECAPPEDLOST)
        cur->fail = cur->scan.fail = rc;
    else if (rc)
        cur->scan.eof = true;
    else if (cur->tailable && !cur->scan.fail)
        cur->scan.eof = false;
}

static struct timespec mono_deadline(int64_t ms)
{
    return eng_deadline(CLOCK_MONOTONIC, ms * 1000);
}

static bool mono_passed(const struct timespec *d)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec > d->tv_sec || (now.tv_sec == d->tv_sec && now.tv_nsec >= d->tv_nsec);
}

static uint64_t inserts_seen(md_db *db, q_coll *c)
{
    pthread_mutex_lock(&db->cap_mu);
    uint64_t n = c->cap_inserts;
    pthread_mutex_unlock(&db->cap_mu);
    return n;
}

/*
 * awaitData: with no lock held, wait until an insert into the cursor's
 * collection commits after `seen`, the deadline passes or the cursor is
 * killed.  Called holding the collection lock and the database lock
 * (shared, as getMore takes it), scan saved; returns holding both again,
 * the scan restored.  False: the cursor was killed meanwhile (by a drop,
 * which released it, or by killCursors) and no collection lock is held.
 */
static bool await_insert(md_db *db, q_cursor *cur, uint64_t seen, const struct timespec *dl)
{
    q_coll *c = cur->c;
    q_coll_unlock(db, c);
    pthread_mutex_lock(&db->cur_mu);
    cur->waiting = true;
    cur->next = db->cursors;
    db->cursors = cur;
    pthread_mutex_unlock(&db->cur_mu);
    q_db_unlock(db);

    pthread_mutex_lock(&db->cap_mu);
    db->cap_waiters++;
    /* killed is tested first: once it is set, c may be gone */
    while (!cur->killed && c->cap_inserts == seen)
        if (pthread_cond_timedwait(&db->cap_cv, &db->cap_mu, dl) == ETIMEDOUT)
            break;
    db->cap_waiters--;
    pthread_mutex_unlock(&db->cap_mu);

    q_db_lock(db, Q_MODE_IS);
    pthread_mutex_lock(&db->cur_mu);
    /* a drop unlinked it; killCursors left it linked (so that a drop
     * after it still finds and releases it) */
    bool killed = cur->killed;
    for (q_cursor **p = &db->cursors; *p; p = &(*p)->next)
        if (*p == cur) {
            *p = cur->next;
            break;
        }
    cur->waiting = false;
    pthread_mutex_unlock(&db->cur_mu);
    if (killed)
        return false;
    q_coll_lock(db, c, false);
    cursor_restore(cur);
    return true;
}

/* One batch into reply (empty on entry: the getMore's own); an awaitData
 * cursor with nothing to return waits (await_insert) and looks again until
 * its time runs out.  The batch goes straight into reply: only an empty
 * one is ever discarded, so other cursors pay no copy and no clock.
 * *gone: the cursor was killed while it waited (no collection lock is held
 * then). */
static void get_more_batch(md_db *db, q_cursor *cur, int64_t max_docs, int64_t wait_ms,
                           bson_t *reply, bool *exhausted, bool *gone)
{
    bool await = cur->tailable && cur->await_data && wait_ms > 0;
    struct timespec dl = {0, 0};
    if (await)
        dl = mono_deadline(wait_ms);
    *gone = false;
    for (;;) {
        uint64_t seen = await ? inserts_seen(db, cur->c) : 0;
        int64_t before = cur->returned;
        reply_batch(cur, reply, max_docs, false, exhausted);
        bool again = await && *exhausted && cur->returned == before && tail_live(cur) &&
                     !mono_passed(&dl);
        if (!again)
            break;
        bson_reinit(reply);
        q_scan_save(&cur->scan);
        if (!await_insert(db, cur, seen, &dl)) {
            *gone = true;
            return;
        }
    }
    if (cur->tailable && *exhausted && tail_stays(cur, false, reply))
        *exhausted = false; /* at the end for now: the cursor stays */
}

int q_cursor_get_more(md_db *db, int64_t id, const char *ns, int64_t batch_size,
                      int64_t max_time_ms, bson_t *reply, md_error *err)
{
    bool exhausted, gone;
    q_cursor *cur = cursor_unlink(db, id);
    if (!cur)
        return q_err(err, MD_NOTFOUND, MD_CODE_CURSOR_NOT_FOUND,
                     "Cursor not found, cursor id: %lld", (long long)id);
    if (strcmp(cur->ns, ns) != 0) {
        cursor_link(db, cur);
        return q_err(err, MD_EINVAL, Q_CODE_UNAUTHORIZED,
                     "Requested getMore on namespace '%s', but cursor belongs to a "
                     "different namespace %s", ns, cur->ns);
    }
    if (max_time_ms >= 0 && !cur->await_data) {
        cursor_link(db, cur);
        return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                     "cannot set maxTimeMS on getMore command for a non-awaitData cursor");
    }
    q_coll *c = cur->c;
    q_coll_lock(db, c, false);
    cursor_restore(cur);
    get_more_batch(db, cur, batch_size > 0 ? batch_size : -1,
                   max_time_ms >= 0 ? max_time_ms : Q_AWAIT_DATA_MS, reply, &exhausted, &gone);
    if (gone) {
        bool released = cur->released;
        if (released) {
            free(cur); /* a drop released the rest; c is gone */
        } else {
            q_coll_lock(db, c, false);
            cursor_free(cur);
            q_coll_unlock(db, c);
        }
        bson_reinit(reply);
        if (released)
            return q_err(err, MD_NOTFOUND, Q_CODE_QUERY_PLAN_KILLED,
                         "PlanExecutor killed: collection dropped while getMore awaited data");
        return q_err(err, MD_NOTFOUND, MD_CODE_CURSOR_NOT_FOUND,
                     "Cursor not found (killed while awaiting data), cursor id: %lld",
                     (long long)id);
    }
    int rc = batch_error(cur, err);
    exhausted |= rc != 0;
    if (!exhausted && cur->has_scan)
        q_scan_save(&cur->scan);
    if (exhausted)
        cursor_free(cur);
    q_coll_unlock(db, c);
    if (!exhausted) {
        cur->used_ms = q_now_ms();
        cursor_link(db, cur);
    }
    return rc;
}

/* Cursors idle longer than the timeout are killed, as MongoDB's
 * ClientCursorMonitor does every few seconds; minidoc has no background
 * thread, so every command runs this first (a linear pass). */
void q_cursor_reap(md_db *db, int64_t now_ms)
{
    int64_t limit = db->cursor_timeout_ms > 0 ? db->cursor_timeout_ms : Q_CURSOR_TIMEOUT_MS;
    q_cursor *dead = NULL;
    pthread_mutex_lock(&db->cur_mu);
    q_cursor **p = &db->cursors;
    while (*p) {
        q_cursor *cur = *p;
        if (!cur->no_timeout && !cur->waiting && now_ms - cur->used_ms > limit) {
            *p = cur->next;
            cur->next = dead;
            dead = cur;
        } else {
            p = &cur->next;
        }
    }
    pthread_mutex_unlock(&db->cur_mu);
    while (dead) {
        q_cursor *cur = dead;
        dead = cur->next;
        cursor_free_locked(db, cur);
    }
}

/* Mark a waiting cursor killed and wake its waiter (under cur_mu). */
static void kill_waiting(md_db *db, q_cursor *cur)
{
    pthread_mutex_lock(&db->cap_mu);
    cur->killed = true;
    pthread_cond_broadcast(&db->cap_cv);
    pthread_mutex_unlock(&db->cap_mu);
}

int q_cursor_kill(md_db *db, int64_t id)
{
    q_cursor *cur = NULL;
    pthread_mutex_lock(&db->cur_mu);
    for (q_cursor **p = &db->cursors; *p; p = &(*p)->next)
        if ((*p)->id == id) {
            cur = *p;
            if (cur->waiting) {
                /* its waiter unlinks and frees it; it stays linked till then,
                 * so that a drop meanwhile releases its scan */
                kill_waiting(db, cur);
                pthread_mutex_unlock(&db->cur_mu);
                return 0;
            }
            *p = cur->next;
            break;
        }
    pthread_mutex_unlock(&db->cur_mu);
    if (!cur)
        return MD_NOTFOUND;
    cursor_free_locked(db, cur);
    return 0;
}

/* Under the exclusive database lock: no getMore runs, no lock is needed but
 * the registry's. */
static void kill_where(md_db *db, q_coll *c, q_index *ix)
{
    pthread_mutex_lock(&db->cur_mu);
    q_cursor **p = &db->cursors;
    while (*p) {
        q_cursor *cur = *p;
        bool kill = ix ? cur->has_scan && cur->scan.kind == Q_SCAN_INDEX && cur->scan.ix == ix
                       : !c || cur->c == c;
        if (kill) {
            *p = cur->next;
            if (cur->waiting) {
                cursor_release(cur); /* the waiter frees the rest */
                kill_waiting(db, cur);
            } else {
                cursor_free(cur);
            }
        } else {
            p = &cur->next;
        }
    }
    pthread_mutex_unlock(&db->cur_mu);
}

void q_cursor_kill_coll(md_db *db, q_coll *c)
{
    kill_where(db, c, NULL);
}

void q_cursor_kill_index(md_db *db, q_index *ix)
{
    kill_where(db, NULL, ix);
}

int64_t q_cursor_count(md_db *db)
{
    int64_t n = 0;
    pthread_mutex_lock(&db->cur_mu);
    for (q_cursor *c = db->cursors; c; c = c->next)
        n++;
    pthread_mutex_unlock(&db->cur_mu);
    return n;
}

int q_cursor_from_docs(md_db *db, q_coll *c, const char *ns, bson_t **docs, size_t n,
                       int64_t batch_size, bson_t *reply, md_error *err)
{
    bool exhausted;
    q_cursor *cur = q_zalloc(sizeof *cur);
    cur->db = db;
    cur->c = c;
    cur->docs = docs;
    cur->ndocs = n;
    bson_init(&cur->filter);
    snprintf(cur->ns, sizeof cur->ns, "%s", ns);
    pthread_mutex_lock(&db->cur_mu);
    cur->id = cursor_new_id(db);
    pthread_mutex_unlock(&db->cur_mu);
    reply_batch(cur, reply, batch_size >= 0 ? batch_size : Q_DEFAULT_BATCH, true, &exhausted);
    cur->used_ms = q_now_ms();
    if (exhausted) {
        cursor_free(cur);
        return 0;
    }
    cursor_link(db, cur);
    return 0;
}

void q_cursor_reply_array(bson_t *reply, const char *ns, bson_t **docs, size_t n)
{
    bson_t cs, arr;
    char key[24];
    BSON_APPEND_DOCUMENT_BEGIN(reply, "cursor", &cs);
    BSON_APPEND_ARRAY_BEGIN(&cs, "firstBatch", &arr);
    for (size_t i = 0; i < n; i++) {
        snprintf(key, sizeof key, "%zu", i);
        bson_append_document(&arr, key, -1, docs[i]);
    }
    bson_append_array_end(&cs, &arr);
    BSON_APPEND_INT64(&cs, "id", 0);
    BSON_APPEND_UTF8(&cs, "ns", ns);
    bson_append_document_end(reply, &cs);
}
