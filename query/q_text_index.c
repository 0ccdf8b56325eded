/*
 * q_text_index.c -- text indexes as MongoDB 3.x/4.0 builds them
 * (FTSSpec::fixSpec, FTSIndexFormat::getKeys) and the TEXT plan that
 * answers $text from them (TEXT <- TEXT_MATCH <- TEXT_OR <- IXSCAN).
 *
 * Spec: {f: "text", g: "text"} becomes key {_fts: "text", _ftsx: 1}, with
 * the non-text fields before (the equality prefix) and after (suffix)
 * kept in place; weights {f: 1, g: 1, ...} (integers, a weights option
 * overriding, "$**" for every string), default_language ("english"),
 * language_override ("language"), textIndexVersion 3.
 *
 * Keys: one per distinct term of the document, laid out as
 *     prefix values | term | score (a number) | suffix values
 * in q_key.c's order-preserving encoding, so that the entries of one
 * (prefix, term) are adjacent.  A term longer than 32 bytes is kept as
 * its first 32 bytes and 32 hex digits of a hash of the whole term.
 *
 * The scan reads, for each term of the query, every entry of (prefix,
 * term), summing each record's scores (TEXT_OR), then fetches each record
 * in RecordId order, applies FTSMatcher (negations, phrases, case or
 * diacritic sensitivity: TEXT_MATCH) and the rest of the filter.
 *
 * Deviations: the long-term hash is MD5 where MongoDB uses MurmurHash3
 * (the keys are minidoc's own encoding anyway); textIndexVersion 1 and 2
 * are refused (minidoc builds version 3 only); explain reports the keys
 * examined on TEXT_OR, not per IXSCAN; a second text index is refused
 * with IndexOptionsConflict whatever its key.
 */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "q_path.h"
#include "q_text.h"

#define TERM_PREFIX 32
#define MAX_WORD_WEIGHT 1000000000

/* ---- the spec ------------------------------------------------------------------------- */

bool q_text_key_is_text(const bson_t *key)
{
    bson_iter_t it;
    if (!bson_iter_init(&it, key))
        return false;
    while (bson_iter_next(&it))
        if ((BSON_ITER_HOLDS_UTF8(&it) && !strcmp(bson_iter_utf8(&it, NULL), "text")) ||
            !strcmp(bson_iter_key(&it), "_fts"))
            return true;
    return false;
}

bool q_text_is_option(const char *name)
{
    return !strcmp(name, "weights") || !strcmp(name, "default_language") ||
           !strcmp(name, "language_override") || !strcmp(name, "textIndexVersion");
}

static int cant(md_error *err, const char *msg)
{
    return q_err(err, MD_EINVAL, MD_CODE_CANNOT_CREATE_INDEX, "%s", msg);
}

static bool reserved(const char *f)
{
    return !strcmp(f, "_fts") || !strcmp(f, "_ftsx");
}

/* A sorted map of weights (insertion replaces). */
typedef struct wmap {
    char **k;
    int64_t *v;
    size_t n;
} wmap;

static void wmap_set(wmap *m, const char *k, int64_t v)
{
    size_t i = 0;
    while (i < m->n && strcmp(m->k[i], k) < 0)
        i++;
    if (i < m->n && !strcmp(m->k[i], k)) {
        m->v[i] = v;
        return;
    }
    m->k = bson_realloc(m->k, (m->n + 1) * sizeof *m->k);
    m->v = bson_realloc(m->v, (m->n + 1) * sizeof *m->v);
    memmove(m->k + i + 1, m->k + i, (m->n - i) * sizeof *m->k);
    memmove(m->v + i + 1, m->v + i, (m->n - i) * sizeof *m->v);
    m->k[i] = bson_strdup(k);
    m->v[i] = v;
    m->n++;
}

static void wmap_free(wmap *m)
{
    for (size_t i = 0; i < m->n; i++)
        bson_free(m->k[i]);
    bson_free(m->k);
    bson_free(m->v);
}

/* The key pattern: normalized into nk, text fields into m. */
static int fix_key(const bson_t *key, bson_t *nk, wmap *m, md_error *err)
{
    bson_iter_t it;
    bool added = false;
    int phase = 0; /* 0 prefix, 1 text, 2 suffix */
    bson_iter_init(&it, key);
    while (bson_iter_next(&it)) {
        const char *f = bson_iter_key(&it);
        bool text = BSON_ITER_HOLDS_UTF8(&it) && !strcmp(bson_iter_utf8(&it, NULL), "text");
        if (!strcmp(f, "_fts")) {
            if (!BSON_ITER_HOLDS_UTF8(&it) || strcmp(bson_iter_utf8(&it, NULL), "text"))
                return cant(err, "expecting _fts:\"text\"");
            if (phase != 0)
                return cant(err, "'text' fields in index must all be adjacent");
            bson_iter_t nx = it;
            if (!bson_iter_next(&nx) || strcmp(bson_iter_key(&nx), "_ftsx"))
                return cant(err, "expected _ftsx after _fts");
            added = true;
            phase = 1;
            BSON_APPEND_UTF8(nk, "_fts", "text");
            continue;
        }
        if (!strcmp(f, "_ftsx")) {
            if (!BSON_ITER_HOLDS_NUMBER(&it) || bson_iter_as_int64(&it) != 1)
                return cant(err, "expecting _ftsx:1");
            if (!added)
                return cant(err, "text index with reserved fields _fts/_ftsx not allowed");
            if (phase != 1)
                return cant(err, "expected _ftsx after _fts");
            BSON_APPEND_INT32(nk, "_ftsx", 1);
            phase = 2;
            continue;
        }
        if (text) {
            if (reserved(f))
                return cant(err, "text index with reserved fields _fts/_ftsx not allowed");
            if (phase == 2)
                return cant(err, "'text' fields in index must all be adjacent");
            if (!added) {
                BSON_APPEND_UTF8(nk, "_fts", "text");
                BSON_APPEND_INT32(nk, "_ftsx", 1);
                added = true;
            }
            phase = 1;
            wmap_set(m, f, 1);
            continue;
        }
        if (BSON_ITER_HOLDS_UTF8(&it))
            return cant(err, "Can't use more than one index plugin for a single index.");
        int64_t v = BSON_ITER_HOLDS_NUMBER(&it) ? (int64_t)bson_iter_as_double(&it) : 0;
        if (v != 1 && v != -1)
            return cant(err, "expected value 1 or -1 for non-text key in compound index");
        if (phase == 1)
            phase = 2;
        bson_append_iter(nk, f, -1, &it);
    }
    return added ? 0 : cant(err, "expected additional fields in text index key pattern");
}

static bool valid_override(const char *s)
{
    /* validateOverride: a field name, no '$' start, no '.' */
    return s[0] && s[0] != '$' && !strchr(s, '.');
}

int q_text_index_prepare(const bson_t *key, const bson_t *spec, bson_t *norm_key,
                         bson_t *opts, md_error *err)
{
    bson_iter_t it, w;
    wmap m = {0};
    bson_init(norm_key);
    bson_init(opts);
    int rc = fix_key(key, norm_key, &m, err);
    if (rc)
        goto out;
    if (bson_iter_init_find(&it, spec, "weights")) {
        if (BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &w)) {
            while (bson_iter_next(&w)) {
                if (!BSON_ITER_HOLDS_NUMBER(&w)) {
                    rc = cant(err, "weight for text index needs numeric type");
                    goto out;
                }
                double d = bson_iter_as_double(&w);
                wmap_set(&m, bson_iter_key(&w), d >= 2147483647.0 ? INT32_MAX
                                                 : d <= -2147483648.0 ? INT32_MIN
                                                 : isnan(d) ? 0 : (int64_t)d);
            }
        } else if (BSON_ITER_HOLDS_UTF8(&it) && !strcmp(bson_iter_utf8(&it, NULL), "$**")) {
            wmap_set(&m, "$**", 1);
        } else {
            rc = cant(err, "text index option 'weights' must be an object");
            goto out;
        }
    }
    if (m.n == 0) {
        rc = cant(err, "text index option 'weights' must specify fields or the wildcard");
        goto out;
    }
    bson_t wd;
    BSON_APPEND_DOCUMENT_BEGIN(opts, "weights", &wd);
    for (size_t i = 0; i < m.n; i++) {
        if (m.v[i] <= 0 || m.v[i] >= MAX_WORD_WEIGHT) {
            bson_append_document_end(opts, &wd);
            rc = q_err(err, MD_EINVAL, MD_CODE_CANNOT_CREATE_INDEX,
                       "text index weight must be in the exclusive interval (0,%d) but "
                       "found: %lld", MAX_WORD_WEIGHT, (long long)m.v[i]);
            goto out;
        }
        if (strcmp(m.k[i], "$**")) {
            const char *p = m.k[i];
            if (!p[0]) {
                bson_append_document_end(opts, &wd);
                rc = cant(err, "weight cannot be on an empty field");
                goto out;
            }
            for (const char *s = p; *s;) {
                size_t n = strcspn(s, ".");
                if (n == 0) {
                    bson_append_document_end(opts, &wd);
                    rc = cant(err, "weight cannot have empty path component");
                    goto out;
                }
                if (s[0] == '$') {
                    bson_append_document_end(opts, &wd);
                    rc = cant(err, "weight cannot have path component with $ prefix");
                    goto out;
                }
                s += n;
                if (*s == '.' && !*++s) {
                    bson_append_document_end(opts, &wd);
                    rc = cant(err, "weight cannot have empty path component");
                    goto out;
                }
            }
        }
        BSON_APPEND_INT32(&wd, m.k[i], (int32_t)m.v[i]);
    }
    bson_append_document_end(opts, &wd);
    const char *lang = "english";
    if (bson_iter_init_find(&it, spec, "default_language")) {
        if (!BSON_ITER_HOLDS_UTF8(&it)) {
            rc = cant(err, "default_language needs a string type");
            goto out;
        }
        lang = bson_iter_utf8(&it, NULL);
        if (q_text_lang_find(lang) < 0) {
            rc = cant(err, "default_language is not valid");
            goto out;
        }
    }
    BSON_APPEND_UTF8(opts, "default_language", lang);
    const char *ovr = "language";
    if (bson_iter_init_find(&it, spec, "language_override")) {
        if (!BSON_ITER_HOLDS_UTF8(&it)) {
            rc = cant(err, "language_override must be a string");
            goto out;
        }
        ovr = bson_iter_utf8(&it, NULL);
        if (!valid_override(ovr) || strlen(ovr) >= Q_TEXT_LANG_OVERRIDE_MAX) {
            rc = cant(err, "language_override is not valid");
            goto out;
        }
    }
    BSON_APPEND_UTF8(opts, "language_override", ovr);
    if (bson_iter_init_find(&it, spec, "textIndexVersion")) {
        if (!BSON_ITER_HOLDS_NUMBER(&it)) {
            rc = cant(err, "text index option 'textIndexVersion' must be a number");
            goto out;
        }
        int64_t v = bson_iter_as_int64(&it);
        if (v == 2) {
            rc = cant(err, "textIndexVersion 2 is not supported: minidoc builds version 3");
            goto out;
        }
        if (v != Q_TEXT_INDEX_VERSION) {
            rc = q_err(err, MD_EINVAL, MD_CODE_CANNOT_CREATE_INDEX, "bad textIndexVersion: %lld",
                       (long long)v);
            goto out;
        }
    }
    BSON_APPEND_INT32(opts, "textIndexVersion", Q_TEXT_INDEX_VERSION);
out:
    wmap_free(&m);
    return rc;
}

/* The text options of an existing index's spec, in q_text_index_prepare's form. */
static void opts_of(const bson_t *spec, bson_t *out)
{
    static const char *const names[] = {"weights", "default_language", "language_override",
                                        "textIndexVersion"};
    bson_iter_t it;
    bson_init(out);
    for (size_t i = 0; i < 4; i++)
        if (bson_iter_init_find(&it, spec, names[i]))
            bson_append_iter(out, names[i], -1, &it);
}

static bool same_doc(const bson_t *a, const bson_t *b)
{
    return a->len == b->len && !memcmp(bson_get_data(a), bson_get_data(b), a->len);
}

int q_text_index_conflict(q_coll *c, const bson_t *norm_key, const bson_t *opts,
                          const char *name, md_error *err)
{
    for (size_t i = 0; i < c->nidx; i++) {
        q_index *ix = c->idx[i];
        if (!ix->text)
            continue;
        bson_t o;
        opts_of(&ix->spec, &o);
        bool same_key = same_doc(&ix->key, norm_key), same_opts = same_doc(&o, opts);
        bson_destroy(&o);
        if (!strcmp(ix->name, name)) {
            if (same_key && same_opts)
                return 1;
            if (!same_key)
                return q_err(err, MD_EINVAL, MD_CODE_INDEX_KEY_SPECS_CONFLICT,
                             "Index must have unique name.The existing index has the same "
                             "name as the requested index: %s", name);
            return q_err(err, MD_EINVAL, MD_CODE_INDEX_OPTIONS_CONFLICT,
                         "Index with name: %s already exists with different options", name);
        }
        if (same_key && same_opts)
            return q_err(err, MD_EINVAL, MD_CODE_INDEX_OPTIONS_CONFLICT,
                         "Index with name: %s already exists with a different name", ix->name);
        char *js = bson_as_relaxed_extended_json(&ix->spec, NULL);
        q_err(err, MD_EINVAL, MD_CODE_INDEX_OPTIONS_CONFLICT,
              same_key ? "Index: %s already exists with different options: %s"
                       : "only one text index per collection allowed, found existing text "
                         "index \"%s\"%.0s",
              same_key ? name : ix->name, js);
        bson_free(js);
        return MD_EINVAL;
    }
    return 2;
}

/* ---- keys ---------------------------------------------------------------------------------- */

static void enc_utf8(q_buf *b, const char *s, size_t n, bool desc)
{
    bson_t d = BSON_INITIALIZER;
    bson_iter_t it;
    bson_append_utf8(&d, "", 0, s, (int)n);
    bson_iter_init(&it, &d);
    bson_iter_next(&it);
    q_key_append_value(b, &it, desc);
    bson_destroy(&d);
}

static void enc_double(q_buf *b, double v)
{
    bson_t d = BSON_INITIALIZER;
    bson_iter_t it;
    bson_append_double(&d, "", 0, v);
    bson_iter_init(&it, &d);
    bson_iter_next(&it);
    q_key_append_value(b, &it, false);
    bson_destroy(&d);
}

/* A term as the index keeps it: at most 32 bytes, then a hash of the rest. */
static void enc_term(q_buf *b, const char *t)
{
    size_t n = strlen(t);
    if (n <= TERM_PREFIX) {
        enc_utf8(b, t, n, false);
        return;
    }
    q_md5 m;
    uint8_t dg[16];
    char s[TERM_PREFIX + 33];
    q_md5_init(&m);
    q_md5_append(&m, t, n);
    q_md5_finish(&m, dg);
    memcpy(s, t, TERM_PREFIX);
    for (int i = 0; i < 16; i++)
        snprintf(s + TERM_PREFIX + 2 * i, 3, "%02x", dg[i]);
    enc_utf8(b, s, TERM_PREFIX + 32, false);
}

/* The element at dotted path in doc (through documents), false if missing. */
static bool at_path(const bson_t *doc, const char *path, bson_iter_t *out)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, doc, path)) {
        *out = it;
        return true;
    }
    return bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, path, out);
}

static int extras(char **paths, bool *desc, size_t n, const bson_t *doc, bool prefix, q_buf *b,
                  md_error *err)
{
    for (size_t i = 0; i < n; i++) {
        bson_iter_t e;
        if (!at_path(doc, paths[i], &e)) {
            q_key_append_null(b, desc[i]);
            continue;
        }
        if (prefix && BSON_ITER_HOLDS_ARRAY(&e))
            return q_err(err, MD_EINVAL, 16675,
                         "cannot have a multi-key as a prefix to a text index");
        q_key_append_value(b, &e, desc[i]);
    }
    return 0;
}

static int key_cmp(const void *a, const void *b)
{
    const q_buf *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->data, y->data, n);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

int q_text_index_keys(const q_index *ix, const bson_t *doc, q_keyset *out, md_error *err)
{
    q_text_terms t;
    q_buf pre, suf;
    const q_text_spec *s = ix->text;
    q_keyset_cleanup(out);
    q_keyset_init(out);
    q_text_terms_init(&t);
    q_buf_init(&pre);
    q_buf_init(&suf);
    int rc = extras(s->prefix, s->prefix_desc, s->nprefix, doc, true, &pre, err);
    if (!rc)
        rc = extras(s->suffix, s->suffix_desc, s->nsuffix, doc, false, &suf, err);
    if (!rc)
        rc = q_text_doc_terms(s, doc, &t, err);
    if (!rc && t.n) {
        out->keys = bson_malloc0(t.n * sizeof *out->keys);
        out->cap = t.n;
        for (size_t i = 0; i < t.cap; i++) {
            if (!t.v[i].term)
                continue;
            q_buf *k = &out->keys[out->n++];
            q_buf_init(k);
            q_buf_append(k, pre.data, pre.len);
            enc_term(k, t.v[i].term);
            enc_double(k, t.v[i].score);
            q_buf_append(k, suf.data, suf.len);
        }
        qsort(out->keys, out->n, sizeof *out->keys, key_cmp);
        out->multikey = out->n > 1;
    }
    q_text_terms_cleanup(&t);
    q_buf_cleanup(&pre);
    q_buf_cleanup(&suf);
    if (rc) {
        q_keyset_cleanup(out);
        q_keyset_init(out);
    }
    return rc;
}

/* ---- the plan ------------------------------------------------------------------------------- */

struct q_text_plan {
    q_text_query q;
    q_buf prefix;      /* the encoded equality prefix */
    bson_t prefix_doc; /* explain's indexPrefix */
    bson_t arg;        /* {"": the $text argument}, to re-parse for a copy */
    int lang;
};

void q_text_plan_free(struct q_text_plan *tp)
{
    if (!tp)
        return;
    q_text_query_cleanup(&tp->q);
    q_buf_cleanup(&tp->prefix);
    bson_destroy(&tp->prefix_doc);
    bson_destroy(&tp->arg);
    bson_free(tp);
}

static struct q_text_plan *plan_new(const bson_iter_t *arg, int lang, md_error *err)
{
    struct q_text_plan *tp = bson_aligned_alloc0(BSON_ALIGNOF(struct q_text_plan), sizeof *tp);
    bson_iter_t a;
    q_buf_init(&tp->prefix);
    bson_init(&tp->prefix_doc);
    bson_init(&tp->arg);
    bson_append_iter(&tp->arg, "", 0, arg);
    tp->lang = lang;
    bson_iter_init(&a, &tp->arg);
    bson_iter_next(&a);
    if (q_text_query_parse(&a, lang, &tp->q, err) != 0) {
        q_text_plan_free(tp);
        return NULL;
    }
    return tp;
}

struct q_text_plan *q_text_plan_dup(const struct q_text_plan *tp)
{
    bson_iter_t a;
    if (!tp)
        return NULL;
    bson_iter_init(&a, &tp->arg);
    bson_iter_next(&a);
    struct q_text_plan *d = plan_new(&a, tp->lang, NULL);
    if (d) {
        q_buf_append(&d->prefix, tp->prefix.data, tp->prefix.len);
        bson_concat(&d->prefix_doc, &tp->prefix_doc);
    }
    return d;
}

int q_text_plan_make(q_coll *c, const bson_t *filter, const bson_iter_t *arg, q_plan *p,
                     md_error *err)
{
    q_index *ix = NULL;
    memset(p, 0, sizeof *p);
    for (size_t i = 0; i < c->nidx && !ix; i++)
        if (c->idx[i]->text)
            ix = c->idx[i];
    if (!ix)
        return q_err(err, MD_EINVAL, MD_CODE_INDEX_NOT_FOUND,
                     "text index required for $text query");
    const q_text_spec *s = ix->text;
    struct q_text_plan *tp = plan_new(arg, s->lang, err);
    if (!tp)
        return MD_EINVAL;
    for (size_t i = 0; i < s->nprefix; i++) {
        bson_iter_t e, x;
        bool ok = at_path(filter, s->prefix[i], &e);
        if (ok && BSON_ITER_HOLDS_DOCUMENT(&e) && bson_iter_recurse(&e, &x) &&
            bson_iter_next(&x) && bson_iter_key(&x)[0] == '$')
            ok = false;
        if (ok && (BSON_ITER_HOLDS_ARRAY(&e) || BSON_ITER_HOLDS_REGEX(&e)))
            ok = false;
        if (!ok) {
            q_text_plan_free(tp);
            return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                         "error processing query: planner returned error: failed to use text "
                         "index to satisfy $text query (if text index is compound, are "
                         "equality predicates given for all prefix fields?): need have an "
                         "equality filter on: %s", s->prefix[i]);
        }
        q_key_append_value(&tp->prefix, &e, s->prefix_desc[i]);
        bson_append_iter(&tp->prefix_doc, s->prefix[i], -1, &e);
    }
    p->ix = ix;
    p->dir = -1;
    p->text = tp;
    return 0;
}

/* ---- the scan ---------------------------------------------------------------------------------- */

typedef struct text_hit {
    eng_rid rid;
    double score;
} text_hit;

struct q_text_run {
    text_hit *v; /* open addressing while reading keys, then sorted by rid */
    size_t n, cap, pos;
};

static size_t hit_slot(struct q_text_run *r, eng_rid rid)
{
    if (2 * (r->n + 1) > r->cap) {
        struct q_text_run b = {.cap = r->cap ? r->cap * 2 : 64};
        b.v = calloc(b.cap, sizeof *b.v);
        assert(b.v);
        for (size_t i = 0; i < r->cap; i++)
            if (r->v[i].rid) {
                size_t j = hit_slot(&b, r->v[i].rid);
                b.v[j] = r->v[i];
                b.n++;
            }
        free(r->v);
        *r = b;
    }
    uint64_t z = (uint64_t)rid * 0x9e3779b97f4a7c15ull;
    size_t j = (size_t)(z >> 17) & (r->cap - 1);
    while (r->v[j].rid && r->v[j].rid != rid)
        j = (j + 1) & (r->cap - 1);
    return j;
}

static int hit_cmp(const void *a, const void *b)
{
    const text_hit *x = a, *y = b;
    return (x->rid > y->rid) - (x->rid < y->rid);
}

int q_text_scan_open(q_scan *s, md_error *err)
{
    struct q_text_plan *tp = s->plan.text;
    struct q_text_run *r = calloc(1, sizeof *r);
    assert(r);
    s->text = r;
    q_buf k;
    q_buf_init(&k);
    int rc = 0;
    for (size_t t = 0; !rc && t < tp->q.bounds.n; t++) {
        q_buf_reset(&k);
        q_buf_append(&k, tp->prefix.data, tp->prefix.len);
        enc_term(&k, tp->q.bounds.v[t]);
        int x = eng_ss_cursor_seek(s->sc, k.data, (uint32_t)k.len, 0);
        while (x == 0) {
            const uint8_t *key;
            uint32_t klen;
            eng_rid rid;
            double score;
            if ((x = eng_ss_cursor_get(s->sc, &key, &klen, &rid)) != 0)
                break;
            if (klen < k.len || memcmp(key, k.data, k.len) != 0)
                break;
            s->keys++;
            Q_COUNT(s->db->m.scanned, 1);
            if (q_key_read_number(key + k.len, klen - (uint32_t)k.len, &score)) {
                size_t j = hit_slot(r, rid);
                if (!r->v[j].rid) {
                    r->v[j].rid = rid;
                    r->n++;
                }
                r->v[j].score += score;
            }
            x = eng_ss_cursor_next(s->sc);
        }
        if (x != 0 && x != MD_NOTFOUND)
            rc = q_read_error(x, err);
    }
    q_buf_cleanup(&k);
    /* compact and order by RecordId */
    size_t n = 0;
    for (size_t i = 0; i < r->cap; i++)
        if (r->v[i].rid)
            r->v[n++] = r->v[i];
    r->n = n;
    if (n)
        qsort(r->v, n, sizeof *r->v, hit_cmp);
    eng_ss_cursor_close(s->sc);
    s->sc = NULL;
    return rc;
}

int q_text_scan_next(q_scan *s, eng_rid *rid, bson_t *doc)
{
    struct q_text_run *r = s->text;
    const q_text_query *q = &s->plan.text->q;
    const uint8_t *data;
    uint32_t len;
    while (r && r->pos < r->n && !s->eof) {
        q_yield_point(s->db, &s->yield);
        text_hit h = r->v[r->pos++];
        int rc = eng_rs_get(s->c->rs, h.rid, &data, &len);
        if (rc == MD_NOTFOUND || (rc == 0 && !bson_init_static(doc, data, len)))
            continue;
        if (rc) {
            s->fail = rc;
            return rc;
        }
        Q_COUNT(s->db->m.scanned_objects, 1);
        s->docs++;
        if (q_text_query_needs_match(q) && !q_text_query_matches(q, s->ix->text, doc)) {
            s->text_rejected++;
            continue;
        }
        if (s->m && !q_matcher_matches(s->m, doc)) {
            md_error e;
            if (q_matcher_take_error(&e)) { /* an $expr failed: so does the scan */
                eng_note_error(MD_EINVAL, &e);
                s->fail = MD_EINVAL;
                s->eof = true;
                return MD_EINVAL;
            }
            continue;
        }
        *rid = h.rid;
        s->text_score = h.score;
        s->advanced++;
        return 0;
    }
    s->eof = true;
    return MD_NOTFOUND;
}

void q_text_scan_close(q_scan *s)
{
    if (s->text) {
        free(s->text->v);
        free(s->text);
    }
    s->text = NULL;
}

/* ---- explain ------------------------------------------------------------------------------------ */

static bson_t *stage(const char *name)
{
    bson_t *b = bson_new();
    BSON_APPEND_UTF8(b, "stage", name);
    return b;
}

static void wrap_input(bson_t *b, bson_t *input)
{
    BSON_APPEND_DOCUMENT(b, "inputStage", input);
    bson_destroy(input);
}

static bson_t *ixscan(const q_plan *p)
{
    bson_t *x = stage("IXSCAN");
    bson_t empty = BSON_INITIALIZER;
    BSON_APPEND_DOCUMENT(x, "keyPattern", &p->ix->key);
    BSON_APPEND_UTF8(x, "indexName", p->ix->name);
    BSON_APPEND_BOOL(x, "isMultiKey", Q_MULTIKEY(p->ix));
    BSON_APPEND_BOOL(x, "isUnique", p->ix->unique);
    BSON_APPEND_BOOL(x, "isSparse", p->ix->sparse);
    BSON_APPEND_BOOL(x, "isPartial", p->ix->partial != NULL);
    BSON_APPEND_INT32(x, "indexVersion", 2);
    BSON_APPEND_UTF8(x, "direction", "backward");
    BSON_APPEND_DOCUMENT(x, "indexBounds", &empty);
    bson_destroy(&empty);
    return x;
}

bson_t *q_text_explain(const q_plan *p, const bson_t *pq, int64_t keys, int64_t docs,
                       int64_t matched, bool exec)
{
    const struct q_text_plan *tp = p->text;
    size_t nt = tp->q.bounds.n;
    /* TEXT_OR over one IXSCAN per term */
    bson_t *or = stage("TEXT_OR");
    if (pq && !bson_empty(pq))
        BSON_APPEND_DOCUMENT(or, "filter", pq);
    if (exec) {
        BSON_APPEND_INT64(or, "keysExamined", keys);
        BSON_APPEND_INT64(or, "docsExamined", docs);
    }
    if (nt == 1) {
        wrap_input(or, ixscan(p));
    } else if (nt > 1) {
        bson_t arr;
        char k[24];
        bson_append_array_begin(or, "inputStages", -1, &arr);
        for (size_t i = 0; i < nt; i++) {
            bson_t *x = ixscan(p);
            snprintf(k, sizeof k, "%zu", i);
            BSON_APPEND_DOCUMENT(&arr, k, x);
            bson_destroy(x);
        }
        bson_append_array_end(or, &arr);
    }
    bson_t *m = stage("TEXT_MATCH");
    if (exec) {
        BSON_APPEND_INT64(m, "nReturned", matched);
    }
    wrap_input(m, or);
    bson_t *t = stage("TEXT");
    if (exec)
        BSON_APPEND_INT64(t, "nReturned", matched);
    BSON_APPEND_DOCUMENT(t, "indexPrefix", &tp->prefix_doc);
    BSON_APPEND_UTF8(t, "indexName", p->ix->name);
    bson_t ptq;
    BSON_APPEND_DOCUMENT_BEGIN(t, "parsedTextQuery", &ptq);
    q_text_query_explain(&tp->q, &ptq);
    bson_append_document_end(t, &ptq);
    BSON_APPEND_INT32(t, "textIndexVersion", Q_TEXT_INDEX_VERSION);
    wrap_input(t, m);
    return t;
}
