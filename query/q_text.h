/*
 * q_text.h -- text search as MongoDB 3.x/4.0's fts (textIndexVersion 3):
 * languages, the Unicode tokenizer (case and diacritic folding, stop
 * words, Snowball stemming), a document's terms with their scores, the
 * $text query (terms, phrases, negations) and its matcher (q_text.c);
 * text index specs, keys, the TEXT plan and its scan (q_text_index.c).
 */
#ifndef Q_TEXT_H
#define Q_TEXT_H

#include "q_int.h"

#define Q_TEXT_INDEX_VERSION 3
#define Q_TEXT_LANG_OVERRIDE_MAX 128

/* ---- languages ------------------------------------------------------------------ */
/* The language a name (or its two-letter alias, any case) means: >= 0, or -1. */
int q_text_lang_find(const char *name);
const char *q_text_lang_name(int lang);
/* "none": no stop words, no stemming. */
int q_text_lang_none(void);

/* ---- tokenizer ------------------------------------------------------------------- */
enum {
    Q_TOK_STOP = 1,      /* kFilterStopWords */
    Q_TOK_CASE = 2,      /* kGenerateCaseSensitiveTokens */
    Q_TOK_DIACRITIC = 4, /* kGenerateDiacriticSensitiveTokens */
};
typedef void (*q_text_tok_fn)(void *ctx, const char *term, size_t len);
/* UnicodeFTSTokenizer: each token of s (n bytes of UTF-8) in language lang,
 * lower-cased (unless Q_TOK_CASE), stop words dropped (Q_TOK_STOP; checked
 * on the lower-cased word), stemmed, then stripped of diacritics (unless
 * Q_TOK_DIACRITIC).  Invalid UTF-8 bytes count as letters. */
void q_text_tokenize(int lang, const char *s, size_t n, int opts, q_text_tok_fn fn, void *ctx);
/* Fold s for a phrase match: lower case unless case_sensitive, diacritics
 * stripped unless diacritic_sensitive.  Returns a bson_malloc'd string. */
char *q_text_fold(const char *s, size_t n, bool case_sensitive, bool diacritic_sensitive,
                  size_t *outlen);

/* ---- an index's text spec ------------------------------------------------------------- */
typedef struct q_text_weight {
    char *path;
    double w;
} q_text_weight;

typedef struct q_text_spec {
    char **prefix, **suffix; /* the non-text key fields before / after */
    bool *prefix_desc, *suffix_desc;
    size_t nprefix, nsuffix;
    q_text_weight *w; /* sorted by path */
    size_t nw;
    bool wildcard; /* "$**" */
    int lang;      /* default_language */
    char override[Q_TEXT_LANG_OVERRIDE_MAX]; /* language_override */
} q_text_spec;
/* Read a stored (normalized) text index spec: false if it is not one. */
bool q_text_spec_load(const bson_t *spec, q_text_spec *out);
void q_text_spec_cleanup(q_text_spec *s);
/* The same on the heap: NULL if spec is not a text index's. */
q_text_spec *q_text_spec_new(const bson_t *spec);
void q_text_spec_free(q_text_spec *s);

/* ---- a document's terms ----------------------------------------------------------------- */
typedef struct q_text_term {
    char *term;
    double score;
} q_text_term;
typedef struct q_text_terms {
    q_text_term *v; /* open addressing; term NULL: empty */
    size_t n, cap;
} q_text_terms;
void q_text_terms_init(q_text_terms *t);
void q_text_terms_cleanup(q_text_terms *t);
/* FTSSpec::scoreDocument: every distinct stemmed term of the indexed
 * strings of doc with its score (term frequency weighted by the field's
 * weight, with the coverage adjustment).  A language override that is not
 * a string is 17261, an unknown language 17262. */
int q_text_doc_terms(const q_text_spec *s, const bson_t *doc, q_text_terms *out,
                     md_error *err);

/* ---- $text ------------------------------------------------------------------------------- */
typedef struct q_strv {
    char **v;
    size_t n, cap;
} q_strv;

typedef struct q_text_query {
    int lang;
    bool case_sensitive, diacritic_sensitive;
    q_strv bounds;              /* the index terms to scan (positive, folded) */
    q_strv pos, neg;            /* terms the matcher checks */
    q_strv phrases, neg_phrases;
    char *search;               /* as given */
} q_text_query;
/* The syntax of a $text argument (the matcher's parse): TypeMismatch /
 * BadValue with MongoDB's words. */
int q_text_check(const bson_iter_t *arg, md_error *err);
/* Where filter's $text is: *found (and *arg, may be NULL) set; an error
 * for more than one, or one under $or / $nor. */
int q_text_filter_find(const bson_t *filter, bson_iter_t *arg, bool *found, md_error *err);
/* FTSQueryImpl::parse for a $text argument, with default_lang when no
 * $language. */
int q_text_query_parse(const bson_iter_t *arg, int default_lang, q_text_query *q,
                       md_error *err);
void q_text_query_cleanup(q_text_query *q);
/* FTSMatcher: the negated terms, the phrases, and (when case or diacritic
 * sensitive) the positive terms, checked against doc's indexed strings. */
bool q_text_query_matches(const q_text_query *q, const q_text_spec *s, const bson_t *doc);
/* Does the query need q_text_query_matches at all? */
bool q_text_query_needs_match(const q_text_query *q);
/* The parsedTextQuery of explain. */
void q_text_query_explain(const q_text_query *q, bson_t *out);

/* ---- the index (q_text_index.c) -------------------------------------------------------- */
/* Is this key pattern a text index's ({f: "text"}, {_fts: "text", _ftsx: 1}, compounds)? */
bool q_text_key_is_text(const bson_t *key);
/* createIndexes: check a text index request and build its normalized key
 * and its text options (weights, default_language, language_override,
 * textIndexVersion), both initialized by the call.  spec is the request
 * document. */
int q_text_index_prepare(const bson_t *key, const bson_t *spec, bson_t *norm_key,
                         bson_t *opts, md_error *err);
/* Is option `name` one of a text index's? */
bool q_text_is_option(const char *name);
/* createIndexes' conflicts for text index request (norm_key, opts, name)
 * against c's indexes: 1 exists identically, 0 new, < 0 error (85). */
int q_text_index_conflict(q_coll *c, const bson_t *norm_key, const bson_t *opts,
                          const char *name, md_error *err);
/* The keys of doc in text index ix. */
int q_text_index_keys(const q_index *ix, const bson_t *doc, q_keyset *out, md_error *err);

/* The TEXT plan of a filter holding $text (arg): IndexNotFound (27)
 * without a text index, BadValue when a compound index's prefix lacks an
 * equality. */
struct q_text_plan;
int q_text_plan_make(q_coll *c, const bson_t *filter, const bson_iter_t *arg, q_plan *p,
                     md_error *err);
struct q_text_plan *q_text_plan_dup(const struct q_text_plan *tp);
void q_text_plan_free(struct q_text_plan *tp);
/* The scan: open (every term's keys read, scores summed per record),
 * next (fetch, FTSMatcher, the filter), save/restore. */
int q_text_scan_open(q_scan *s, md_error *err);
int q_text_scan_next(q_scan *s, eng_rid *rid, bson_t *doc);
void q_text_scan_close(q_scan *s);
/* Explain's TEXT stage tree (TEXT <- TEXT_MATCH <- TEXT_OR <- IXSCAN). */
bson_t *q_text_explain(const q_plan *p, const bson_t *pq, int64_t keys, int64_t docs,
                       int64_t matched, bool exec);

#endif /* Q_TEXT_H */
