/*
 * q_text.c -- MongoDB's text search (fts, textIndexVersion 3) without the
 * index: languages, the Unicode tokenizer, a document's scored terms
 * (FTSSpec::scoreDocument), the $text query (FTSQueryImpl) and its matcher
 * (FTSMatcher).  The index, the plan and the scan are q_text_index.c.
 *
 * Tokenizer (UnicodeFTSTokenizer): a token is a run of code points that
 * are not delimiters (white space, dashes, quotation marks, terminal
 * punctuation, pattern syntax; in English the apostrophe is a letter).
 * Each token is lower-cased, checked against the language's stop words
 * (MongoDB's lists, q_text_stop.c), taken in its original case when the
 * query is case sensitive, stemmed with Snowball (libstemmer, the
 * algorithms MongoDB links), and stripped of its diacritics unless the
 * query is diacritic sensitive.
 *
 * Score of a term in one string (FTSSpec::_scoreStringV2), over the n
 * tokens that are not stop words, the term occurring c times:
 *     freq  = sum over its occurrences k = 0..c-1 of 1 / 2^k
 *     coeff = 0.5 * c / n + 0.5
 *     adj   = 1.1 if the whole string is the term (case-insensitively), else 1
 *     score += weight * freq * coeff * adj
 * summed over every indexed string of the document.
 *
 * Deviations: case folding is Unicode's simple folding for Latin (Basic,
 * Latin-1, Extended-A, Extended Additional), Greek, Cyrillic, Armenian and
 * the full-width Latin letters, and diacritic removal covers the
 * combining marks and the precomposed letters of those blocks (MongoDB
 * generates both from the whole Unicode database); the delimiter set is
 * the same properties over the ASCII, Latin-1, general punctuation, CJK
 * punctuation and full-width blocks.  Turkish and the other languages
 * MongoDB lists beyond the eight here (danish, finnish, hungarian,
 * norwegian, romanian, swedish, turkish) are refused as unsupported.  The
 * stemmers are Debian's libstemmer (Snowball 2.x), which for a few words
 * stems differently from the older Snowball MongoDB ships.
 */
#include <libstemmer.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "q_path.h"
#include "q_text.h"
#include "q_text_stop.h"

/* ---- languages ------------------------------------------------------------------ */

typedef struct lang_def {
    const char *name, *alias, *stemmer;
    bool english;
} lang_def;

static const lang_def langs[] = {
    {"none", NULL, NULL, false},
    {"english", "en", "english", true},
    {"french", "fr", "french", false},
    {"german", "de", "german", false},
    {"spanish", "es", "spanish", false},
    {"portuguese", "pt", "portuguese", false},
    {"italian", "it", "italian", false},
    {"dutch", "nl", "dutch", false},
    {"russian", "ru", "russian", false},
};
#define NLANG (sizeof langs / sizeof langs[0])

int q_text_lang_find(const char *name)
{
    for (size_t i = 0; name && i < NLANG; i++)
        if (!strcasecmp(name, langs[i].name) || (langs[i].alias && !strcasecmp(name, langs[i].alias)))
            return (int)i;
    return -1;
}

const char *q_text_lang_name(int lang)
{
    return lang >= 0 && (size_t)lang < NLANG ? langs[lang].name : "none";
}

int q_text_lang_none(void)
{
    return 0;
}

/* Stop words: each language's list split once into a sorted array. */
typedef struct stop_list {
    char **w;
    size_t n;
    char *buf;
} stop_list;
static stop_list stops[NLANG];
static pthread_once_t stops_once = PTHREAD_ONCE_INIT;

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void stops_init(void)
{
    for (size_t i = 0; i < NLANG; i++) {
        const char *src = q_text_stop_words(langs[i].name);
        if (!src)
            continue;
        stop_list *l = &stops[i];
        l->buf = strdup(src);
        size_t cap = 1;
        for (const char *p = src; *p; p++)
            cap += *p == ' ';
        l->w = malloc(cap * sizeof *l->w);
        for (char *tok = strtok(l->buf, " "); tok; tok = strtok(NULL, " "))
            l->w[l->n++] = tok;
        qsort(l->w, l->n, sizeof *l->w, cmp_str);
    }
}

static bool is_stop_word(int lang, const char *w)
{
    pthread_once(&stops_once, stops_init);
    const stop_list *l = &stops[lang];
    return l->n && bsearch(&w, l->w, l->n, sizeof *l->w, cmp_str) != NULL;
}

/* Stemmers hold state: one per language per thread, freed with the thread. */
static pthread_key_t stem_key;
static pthread_once_t stem_once = PTHREAD_ONCE_INIT;

static void stem_free(void *p)
{
    struct sb_stemmer **v = p;
    for (size_t i = 0; i < NLANG; i++)
        if (v[i])
            sb_stemmer_delete(v[i]);
    free(v);
}

static void stem_key_init(void)
{
    (void)pthread_key_create(&stem_key, stem_free);
}

static struct sb_stemmer *stemmer(int lang)
{
    if (!langs[lang].stemmer)
        return NULL;
    pthread_once(&stem_once, stem_key_init);
    struct sb_stemmer **v = pthread_getspecific(stem_key);
    if (!v) {
        v = calloc(NLANG, sizeof *v);
        if (!v || pthread_setspecific(stem_key, v) != 0) {
            free(v);
            return NULL;
        }
    }
    if (!v[lang])
        v[lang] = sb_stemmer_new(langs[lang].stemmer, "UTF_8");
    return v[lang];
}

/* ---- UTF-8 and the Unicode tables ------------------------------------------------------ */

/* Decode the code point at s[*i] (an invalid byte is itself, as Latin-1). */
static uint32_t u8_next(const unsigned char *s, size_t n, size_t *i)
{
    unsigned char c = s[*i];
    uint32_t cp;
    int more;
    if (c < 0x80) {
        (*i)++;
        return c;
    } else if ((c & 0xE0) == 0xC0) {
        cp = c & 0x1F, more = 1;
    } else if ((c & 0xF0) == 0xE0) {
        cp = c & 0x0F, more = 2;
    } else if ((c & 0xF8) == 0xF0) {
        cp = c & 0x07, more = 3;
    } else {
        (*i)++;
        return c;
    }
    if (*i + (size_t)more >= n) {
        (*i)++;
        return c;
    }
    for (int k = 1; k <= more; k++)
        if ((s[*i + (size_t)k] & 0xC0) != 0x80) {
            (*i)++;
            return c;
        }
    for (int k = 1; k <= more; k++)
        cp = cp << 6 | (s[*i + (size_t)k] & 0x3F);
    *i += (size_t)more + 1;
    return cp;
}

static void u8_put(q_buf *b, uint32_t cp)
{
    if (cp < 0x80) {
        q_buf_putc(b, (uint8_t)cp);
    } else if (cp < 0x800) {
        q_buf_putc(b, (uint8_t)(0xC0 | cp >> 6));
        q_buf_putc(b, (uint8_t)(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        q_buf_putc(b, (uint8_t)(0xE0 | cp >> 12));
        q_buf_putc(b, (uint8_t)(0x80 | ((cp >> 6) & 0x3F)));
        q_buf_putc(b, (uint8_t)(0x80 | (cp & 0x3F)));
    } else {
        q_buf_putc(b, (uint8_t)(0xF0 | cp >> 18));
        q_buf_putc(b, (uint8_t)(0x80 | ((cp >> 12) & 0x3F)));
        q_buf_putc(b, (uint8_t)(0x80 | ((cp >> 6) & 0x3F)));
        q_buf_putc(b, (uint8_t)(0x80 | (cp & 0x3F)));
    }
}

/* codepointIsDelimiter: White_Space, Dash, Hyphen, Quotation_Mark,
 * Terminal_Punctuation, Pattern_Syntax, STerm (see the deviation above). */
static bool is_delim(uint32_t c, bool english)
{
    if (c < 0x80) {
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '_')
            return false;
        if (c == '\'')
            return !english;
        return (c >= 0x09 && c <= 0x0D) || c >= 0x20;
    }
    if (c < 0x100)
        return c == 0x85 || c == 0xA0 || (c >= 0xA1 && c <= 0xA7) || c == 0xA9 || c == 0xAB ||
               c == 0xAC || c == 0xAE || c == 0xB0 || c == 0xB1 || c == 0xB6 || c == 0xB7 ||
               c == 0xBB || c == 0xBF || c == 0xD7 || c == 0xF7;
    return c == 0x37E || c == 0x387 || c == 0x55D || c == 0x589 || c == 0x58A || c == 0x5BE ||
           c == 0x5C3 || c == 0x60C || c == 0x61B || c == 0x61F || c == 0x6D4 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || (c >= 0x2010 && c <= 0x2029) ||
           (c >= 0x202F && c <= 0x203E) || (c >= 0x2041 && c <= 0x2053) ||
           (c >= 0x2055 && c <= 0x205F) || (c >= 0x2190 && c <= 0x245F) ||
           (c >= 0x2500 && c <= 0x2775) || (c >= 0x2794 && c <= 0x2BFF) ||
           (c >= 0x2E00 && c <= 0x2E7F) || (c >= 0x3000 && c <= 0x3003) ||
           (c >= 0x3008 && c <= 0x3020) || c == 0x3030 || c == 0xFD3E || c == 0xFD3F ||
           (c >= 0xFE10 && c <= 0xFE19) || (c >= 0xFE30 && c <= 0xFE52) ||
           (c >= 0xFE54 && c <= 0xFE66) || (c >= 0xFE68 && c <= 0xFE6B) ||
           (c >= 0xFF01 && c <= 0xFF0F) || (c >= 0xFF1A && c <= 0xFF20) ||
           (c >= 0xFF3B && c <= 0xFF3D) || c == 0xFF3F || (c >= 0xFF5B && c <= 0xFF65);
}

/* Unicode simple case folding (status C and S) for the blocks named above. */
static uint32_t fold_case(uint32_t c)
{
    if (c < 0x80)
        return c >= 'A' && c <= 'Z' ? c + 32 : c;
    if (c < 0x100) {
        if (c == 0xB5)
            return 0x3BC;
        return c >= 0xC0 && c <= 0xDE && c != 0xD7 ? c + 32 : c;
    }
    if (c < 0x180) {
        if ((c >= 0x100 && c <= 0x12F) || (c >= 0x132 && c <= 0x137) ||
            (c >= 0x14A && c <= 0x177))
            return c | 1;
        if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E))
            return c & 1 ? c + 1 : c;
        if (c == 0x178)
            return 0xFF;
        if (c == 0x17F)
            return 's';
        return c;
    }
    if (c >= 0x370 && c < 0x400) {
        if ((c >= 0x391 && c <= 0x3A1) || (c >= 0x3A3 && c <= 0x3AB))
            return c + 32;
        switch (c) {
        case 0x386: return 0x3AC;
        case 0x388: return 0x3AD;
        case 0x389: return 0x3AE;
        case 0x38A: return 0x3AF;
        case 0x38C: return 0x3CC;
        case 0x38E: return 0x3CD;
        case 0x38F: return 0x3CE;
        case 0x3C2: return 0x3C3;
        default: return c;
        }
    }
    if (c >= 0x400 && c < 0x530) {
        if (c <= 0x40F)
            return c + 80;
        if (c <= 0x42F)
            return c + 32;
        if ((c >= 0x460 && c <= 0x481) || (c >= 0x48A && c <= 0x4BF) ||
            (c >= 0x4D0 && c <= 0x52F))
            return c | 1;
        if (c == 0x4C0)
            return 0x4CF;
        if (c >= 0x4C1 && c <= 0x4CE)
            return c & 1 ? c + 1 : c;
        return c;
    }
    if (c >= 0x531 && c <= 0x556)
        return c + 48;
    if ((c >= 0x1E00 && c <= 0x1E95) || (c >= 0x1EA0 && c <= 0x1EFF))
        return c | 1;
    if (c == 0x1E9E)
        return 0xDF;
    if (c >= 0xFF21 && c <= 0xFF3A)
        return c + 32;
    return c;
}

/* The letter without its diacritics; 0 for a combining mark (dropped). */
static const char latin1_base[] =
    "AAAAAA.CEEEEIIII.NOOOOO..UUUUY..aaaaaa.ceeeeiiii.nooooo..uuuuy.y";
static const char latin_a_base[] =
    "AaAaAaCcCcCcCcDd..EeEeEeEeEeGgGgGgGgHh..IiIiIiIiI...JjKk.LlLlLl....NnNnNn...OoOo"
    "Oo..RrRrRrSsSsSsSsTtTt..UuUuUuUuUuUuWwYyYZzZzZz.";
_Static_assert(sizeof latin1_base == 0x40 + 1, "Latin-1 letters C0..FF");
_Static_assert(sizeof latin_a_base == 0x80 + 1, "Latin Extended-A 100..17F");

static uint32_t strip_diacritic(uint32_t c)
{
    if (c < 0xC0)
        return c;
    if (c < 0x100)
        return latin1_base[c - 0xC0] == '.' ? c : (uint32_t)latin1_base[c - 0xC0];
    if (c < 0x180)
        return latin_a_base[c - 0x100] == '.' ? c : (uint32_t)latin_a_base[c - 0x100];
    if (c >= 0x300 && c <= 0x36F)
        return 0;
    if (c >= 0x483 && c <= 0x489)
        return 0;
    switch (c) {
    /* Greek with tonos / dialytika */
    case 0x386: return 0x391;
    case 0x388: return 0x395;
    case 0x389: return 0x397;
    case 0x38A: case 0x3AA: return 0x399;
    case 0x38C: return 0x39F;
    case 0x38E: case 0x3AB: return 0x3A5;
    case 0x38F: return 0x3A9;
    case 0x390: case 0x3AF: case 0x3CA: return 0x3B9;
    case 0x3AC: return 0x3B1;
    case 0x3AD: return 0x3B5;
    case 0x3AE: return 0x3B7;
    case 0x3B0: case 0x3CB: case 0x3CD: return 0x3C5;
    case 0x3CC: return 0x3BF;
    case 0x3CE: return 0x3C9;
    /* Cyrillic */
    case 0x400: case 0x401: return 0x415;
    case 0x403: return 0x413;
    case 0x407: return 0x406;
    case 0x40C: return 0x41A;
    case 0x40D: case 0x419: return 0x418;
    case 0x40E: return 0x423;
    case 0x450: case 0x451: return 0x435;
    case 0x453: return 0x433;
    case 0x457: return 0x456;
    case 0x45C: return 0x43A;
    case 0x45D: case 0x439: return 0x438;
    case 0x45E: return 0x443;
    default: break;
    }
    if (c >= 0x1E00 && c <= 0x1EFF) { /* Latin Extended Additional: a few bases */
        static const struct { uint32_t lo, hi; char base[2]; } r[] = {
            {0x1E00, 0x1E01, "Aa"}, {0x1E02, 0x1E07, "Bb"}, {0x1E08, 0x1E09, "Cc"},
            {0x1E0A, 0x1E13, "Dd"}, {0x1E14, 0x1E1D, "Ee"}, {0x1E1E, 0x1E1F, "Ff"},
            {0x1E20, 0x1E21, "Gg"}, {0x1E22, 0x1E2B, "Hh"}, {0x1E2C, 0x1E2F, "Ii"},
            {0x1E30, 0x1E35, "Kk"}, {0x1E36, 0x1E3D, "Ll"}, {0x1E3E, 0x1E43, "Mm"},
            {0x1E44, 0x1E4B, "Nn"}, {0x1E4C, 0x1E53, "Oo"}, {0x1E54, 0x1E57, "Pp"},
            {0x1E58, 0x1E5F, "Rr"}, {0x1E60, 0x1E69, "Ss"}, {0x1E6A, 0x1E71, "Tt"},
            {0x1E72, 0x1E7B, "Uu"}, {0x1E7C, 0x1E7F, "Vv"}, {0x1E80, 0x1E89, "Ww"},
            {0x1E8A, 0x1E8D, "Xx"}, {0x1E8E, 0x1E8F, "Yy"}, {0x1E90, 0x1E95, "Zz"},
            {0x1EA0, 0x1EB7, "Aa"}, {0x1EB8, 0x1EC7, "Ee"}, {0x1EC8, 0x1ECB, "Ii"},
            {0x1ECC, 0x1EE3, "Oo"}, {0x1EE4, 0x1EF1, "Uu"}, {0x1EF2, 0x1EF9, "Yy"},
        };
        for (size_t i = 0; i < sizeof r / sizeof r[0]; i++)
            if (c >= r[i].lo && c <= r[i].hi)
                return (uint32_t)r[i].base[(c - r[i].lo) & 1];
    }
    return c;
}

/* Append s[0..n) to out: lower-cased if `lower`, stripped if `strip`. */
static void fold_into(q_buf *out, const char *s, size_t n, bool lower, bool strip)
{
    size_t i = 0;
    while (i < n) {
        uint32_t c = u8_next((const unsigned char *)s, n, &i);
        if (lower)
            c = fold_case(c);
        if (strip && (c = strip_diacritic(c)) == 0)
            continue;
        u8_put(out, c);
    }
}

char *q_text_fold(const char *s, size_t n, bool case_sensitive, bool diacritic_sensitive,
                  size_t *outlen)
{
    q_buf b;
    q_buf_init(&b);
    fold_into(&b, s, n, !case_sensitive, !diacritic_sensitive);
    char *r = bson_malloc(b.len + 1);
    if (b.len)
        memcpy(r, b.data, b.len);
    r[b.len] = '\0';
    if (outlen)
        *outlen = b.len;
    q_buf_cleanup(&b);
    return r;
}

/* ---- tokenizer -------------------------------------------------------------------------- */

void q_text_tokenize(int lang, const char *s, size_t n, int opts, q_text_tok_fn fn, void *ctx)
{
    const unsigned char *u = (const unsigned char *)s;
    bool english = langs[lang].english;
    q_buf word, stem;
    q_buf_init(&word);
    q_buf_init(&stem);
    size_t i = 0;
    while (i < n) {
        size_t start = i, at = i;
        uint32_t c = u8_next(u, n, &at);
        if (is_delim(c, english)) {
            i = at;
            continue;
        }
        size_t end = at;
        while (end < n) {
            size_t nx = end;
            if (is_delim(u8_next(u, n, &nx), english))
                break;
            end = nx;
        }
        i = end;
        q_buf_reset(&word);
        fold_into(&word, s + start, end - start, true, false);
        q_buf_putc(&word, 0);
        if ((opts & Q_TOK_STOP) && is_stop_word(lang, (const char *)word.data))
            continue;
        word.len--;
        if (opts & Q_TOK_CASE) {
            q_buf_reset(&word);
            q_buf_append(&word, s + start, end - start);
        }
        const char *w = (const char *)word.data;
        size_t wl = word.len;
        struct sb_stemmer *st = stemmer(lang);
        if (st) {
            const sb_symbol *r = sb_stemmer_stem(st, (const sb_symbol *)w, (int)wl);
            if (r) {
                w = (const char *)r;
                wl = (size_t)sb_stemmer_length(st);
            }
        }
        if (!(opts & Q_TOK_DIACRITIC)) {
            q_buf_reset(&stem);
            fold_into(&stem, w, wl, false, true);
            w = (const char *)stem.data;
            wl = stem.len;
        }
        if (wl)
            fn(ctx, w, wl);
    }
    q_buf_cleanup(&word);
    q_buf_cleanup(&stem);
}

/* ---- string vectors and the term map --------------------------------------------------- */

static bool strv_has(const q_strv *v, const char *s, size_t n)
{
    for (size_t i = 0; i < v->n; i++)
        if (strlen(v->v[i]) == n && !memcmp(v->v[i], s, n))
            return true;
    return false;
}

static void strv_add(q_strv *v, const char *s, size_t n, bool unique)
{
    if (unique && strv_has(v, s, n))
        return;
    if (v->n == v->cap) {
        v->cap = v->cap ? v->cap * 2 : 8;
        v->v = bson_realloc(v->v, v->cap * sizeof *v->v);
    }
    v->v[v->n++] = bson_strndup(s, n);
}

static void strv_cleanup(q_strv *v)
{
    for (size_t i = 0; i < v->n; i++)
        bson_free(v->v[i]);
    bson_free(v->v);
    memset(v, 0, sizeof *v);
}

void q_text_terms_init(q_text_terms *t)
{
    memset(t, 0, sizeof *t);
}

void q_text_terms_cleanup(q_text_terms *t)
{
    for (size_t i = 0; i < t->cap; i++)
        bson_free(t->v[i].term);
    bson_free(t->v);
    memset(t, 0, sizeof *t);
}

static uint64_t str_hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

/* The slot of term s (inserted with score 0 when missing). */
static q_text_term *terms_get(q_text_terms *t, const char *s, size_t n)
{
    if (2 * (t->n + 1) > t->cap) {
        q_text_terms bigger = {.cap = t->cap ? t->cap * 2 : 32};
        bigger.v = bson_malloc0(bigger.cap * sizeof *bigger.v);
        for (size_t i = 0; i < t->cap; i++)
            if (t->v[i].term) {
                size_t l = strlen(t->v[i].term);
                size_t j = str_hash(t->v[i].term, l) & (bigger.cap - 1);
                while (bigger.v[j].term)
                    j = (j + 1) & (bigger.cap - 1);
                bigger.v[j] = t->v[i];
                bigger.n++;
            }
        bson_free(t->v);
        *t = bigger;
    }
    size_t j = str_hash(s, n) & (t->cap - 1);
    while (t->v[j].term) {
        if (strlen(t->v[j].term) == n && !memcmp(t->v[j].term, s, n))
            return &t->v[j];
        j = (j + 1) & (t->cap - 1);
    }
    t->v[j].term = bson_strndup(s, n);
    t->v[j].score = 0;
    t->n++;
    return &t->v[j];
}

/* ---- the spec ---------------------------------------------------------------------------- */

void q_text_spec_cleanup(q_text_spec *s)
{
    for (size_t i = 0; i < s->nprefix; i++)
        bson_free(s->prefix[i]);
    for (size_t i = 0; i < s->nsuffix; i++)
        bson_free(s->suffix[i]);
    for (size_t i = 0; i < s->nw; i++)
        bson_free(s->w[i].path);
    bson_free(s->prefix);
    bson_free(s->suffix);
    bson_free(s->prefix_desc);
    bson_free(s->suffix_desc);
    bson_free(s->w);
    memset(s, 0, sizeof *s);
}

static int cmp_weight(const void *a, const void *b)
{
    return strcmp(((const q_text_weight *)a)->path, ((const q_text_weight *)b)->path);
}

bool q_text_spec_load(const bson_t *spec, q_text_spec *out)
{
    bson_iter_t it, k;
    memset(out, 0, sizeof *out);
    out->lang = q_text_lang_find("english");
    snprintf(out->override, sizeof out->override, "language");
    if (!bson_iter_init_find(&it, spec, "key") || !BSON_ITER_HOLDS_DOCUMENT(&it) ||
        !bson_iter_recurse(&it, &k))
        return false;
    bool seen = false;
    while (bson_iter_next(&k)) {
        const char *f = bson_iter_key(&k);
        if (!strcmp(f, "_fts") || !strcmp(f, "_ftsx")) {
            seen = true;
            continue;
        }
        bool desc = BSON_ITER_HOLDS_NUMBER(&k) && bson_iter_as_double(&k) < 0;
        char ***v = seen ? &out->suffix : &out->prefix;
        bool **d = seen ? &out->suffix_desc : &out->prefix_desc;
        size_t *n = seen ? &out->nsuffix : &out->nprefix;
        *v = bson_realloc(*v, (*n + 1) * sizeof **v);
        *d = bson_realloc(*d, (*n + 1) * sizeof **d);
        (*v)[*n] = bson_strdup(f);
        (*d)[(*n)++] = desc;
    }
    if (!seen)
        return false;
    if (bson_iter_init_find(&it, spec, "weights") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
        bson_iter_recurse(&it, &k))
        while (bson_iter_next(&k)) {
            if (!strcmp(bson_iter_key(&k), "$**")) {
                out->wildcard = true;
                continue;
            }
            out->w = bson_realloc(out->w, (out->nw + 1) * sizeof *out->w);
            out->w[out->nw].path = bson_strdup(bson_iter_key(&k));
            out->w[out->nw++].w = bson_iter_as_double(&k);
        }
    if (out->nw)
        qsort(out->w, out->nw, sizeof *out->w, cmp_weight);
    if (bson_iter_init_find(&it, spec, "default_language") && BSON_ITER_HOLDS_UTF8(&it) &&
        q_text_lang_find(bson_iter_utf8(&it, NULL)) >= 0)
        out->lang = q_text_lang_find(bson_iter_utf8(&it, NULL));
    if (bson_iter_init_find(&it, spec, "language_override") && BSON_ITER_HOLDS_UTF8(&it))
        snprintf(out->override, sizeof out->override, "%s", bson_iter_utf8(&it, NULL));
    return true;
}

q_text_spec *q_text_spec_new(const bson_t *spec)
{
    q_text_spec *s = bson_malloc0(sizeof *s);
    if (!q_text_spec_load(spec, s)) {
        q_text_spec_free(s);
        return NULL;
    }
    return s;
}

void q_text_spec_free(q_text_spec *s)
{
    if (!s)
        return;
    q_text_spec_cleanup(s);
    bson_free(s);
}

/* The weight of path (exact), or -1; *under: some weighted path is below it. */
static double weight_of(const q_text_spec *s, const char *path, bool *under)
{
    size_t n = strlen(path);
    double w = -1;
    *under = false;
    for (size_t i = 0; i < s->nw; i++) {
        if (!strcmp(s->w[i].path, path))
            w = s->w[i].w;
        else if (!strncmp(s->w[i].path, path, n) && s->w[i].path[n] == '.')
            *under = true;
    }
    return w;
}

/* ---- FTSElementIterator --------------------------------------------------------------- */

typedef void (*text_fn)(void *ctx, const char *s, size_t n, double weight, int lang);

typedef struct walk {
    const q_text_spec *s;
    text_fn fn;
    void *ctx;
    md_error *err;
    int rc;
} walk;

static void walk_doc(walk *w, const uint8_t *data, uint32_t len, const char *path, int lang,
                     int depth);

/* The language a (sub)document asks for through the override field. */
static int doc_lang(walk *w, const uint8_t *data, uint32_t len, int parent)
{
    bson_iter_t it;
    if (!bson_iter_init_from_data(&it, data, len) || !bson_iter_find(&it, w->s->override))
        return parent;
    if (!BSON_ITER_HOLDS_UTF8(&it)) {
        w->rc = q_err(w->err, MD_EINVAL, 17261,
                      "found language override field in document with non-string type");
        return parent;
    }
    int l = q_text_lang_find(bson_iter_utf8(&it, NULL));
    if (l < 0) {
        w->rc = q_err(w->err, MD_EINVAL, 17262, "language override unsupported: %s",
                      bson_iter_utf8(&it, NULL));
        return parent;
    }
    return l;
}

static void walk_value(walk *w, const bson_iter_t *e, const char *path, double weight,
                       bool under, int lang, int depth, bool in_array)
{
    const uint8_t *d;
    uint32_t l;
    bson_iter_t x;
    if (BSON_ITER_HOLDS_UTF8(e)) {
        if (weight > 0) {
            uint32_t n;
            const char *s = bson_iter_utf8(e, &n);
            w->fn(w->ctx, s, n, weight, lang);
        }
    } else if (BSON_ITER_HOLDS_DOCUMENT(e)) {
        if (w->s->wildcard || under) {
            bson_iter_document(e, &l, &d);
            walk_doc(w, d, l, path, lang, depth + 1);
        }
    } else if (BSON_ITER_HOLDS_ARRAY(e) && !in_array && bson_iter_recurse(e, &x)) {
        while (w->rc == 0 && bson_iter_next(&x))
            walk_value(w, &x, path, weight, under, lang, depth, true);
    }
}

static void walk_doc(walk *w, const uint8_t *data, uint32_t len, const char *path, int lang,
                     int depth)
{
    bson_iter_t it;
    if (depth > 100 || !bson_iter_init_from_data(&it, data, len))
        return;
    lang = doc_lang(w, data, len, lang);
    while (w->rc == 0 && bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (!strcmp(k, w->s->override))
            continue;
        char *full = path[0] ? bson_strdup_printf("%s.%s", path, k) : bson_strdup(k);
        bool under;
        double wt = weight_of(w->s, full, &under);
        if (wt < 0 && w->s->wildcard)
            wt = 1;
        if (wt > 0 || under)
            walk_value(w, &it, full, wt, under, lang, depth, false);
        bson_free(full);
    }
}

static int walk_strings(const q_text_spec *s, const bson_t *doc, text_fn fn, void *ctx,
                        md_error *err)
{
    walk w = {s, fn, ctx, err, 0};
    walk_doc(&w, bson_get_data(doc), doc->len, "", s->lang, 0);
    return w.rc;
}

/* ---- scoring ----------------------------------------------------------------------------- */

typedef struct one_term {
    char *term;
    double count, freq, exp;
} one_term;

typedef struct string_ctx {
    one_term *v;
    size_t n, cap;
    unsigned tokens;
} string_ctx;

static void on_token(void *ctx, const char *t, size_t n)
{
    string_ctx *c = ctx;
    c->tokens++;
    for (size_t i = 0; i < c->n; i++)
        if (strlen(c->v[i].term) == n && !memcmp(c->v[i].term, t, n)) {
            one_term *o = &c->v[i];
            o->exp *= 2;
            o->count += 1;
            o->freq += 1 / o->exp;
            return;
        }
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 16;
        c->v = bson_realloc(c->v, c->cap * sizeof *c->v);
    }
    c->v[c->n++] = (one_term){bson_strndup(t, n), 1, 1, 1};
}

typedef struct doc_ctx {
    q_text_terms *out;
} doc_ctx;

/* Case-insensitive equality of raw and term (ASCII letters, as
 * StringData::equalCaseInsensitive). */
static bool same_ci(const char *a, size_t an, const char *b, size_t bn)
{
    if (an != bn)
        return false;
    for (size_t i = 0; i < an; i++) {
        unsigned char x = (unsigned char)a[i], y = (unsigned char)b[i];
        if (x >= 'A' && x <= 'Z')
            x += 32;
        if (y >= 'A' && y <= 'Z')
            y += 32;
        if (x != y)
            return false;
    }
    return true;
}

static void score_string(void *ctx, const char *s, size_t n, double weight, int lang)
{
    doc_ctx *d = ctx;
    string_ctx c = {0};
    q_text_tokenize(lang, s, n, Q_TOK_STOP, on_token, &c);
    for (size_t i = 0; i < c.n; i++) {
        const one_term *o = &c.v[i];
        double coeff = (0.5 * o->count / c.tokens) + 0.5;
        double adj = 1;
        size_t tl = strlen(o->term);
        if (same_ci(s, n, o->term, tl))
            adj += 0.1;
        q_text_term *t = terms_get(d->out, o->term, tl);
        t->score += weight * o->freq * coeff * adj;
        bson_free(o->term);
    }
    bson_free(c.v);
}

int q_text_doc_terms(const q_text_spec *s, const bson_t *doc, q_text_terms *out,
                     md_error *err)
{
    doc_ctx d = {out};
    return walk_strings(s, doc, score_string, &d, err);
}

/* ---- the $text argument -------------------------------------------------------------------- */

int q_text_check(const bson_iter_t *arg, md_error *err)
{
    bson_iter_t it;
    bool search = false;
    if (!BSON_ITER_HOLDS_DOCUMENT(arg) || !bson_iter_recurse(arg, &it))
        return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE, "$text expects an object");
    int expected = 1, n = 0;
    bson_iter_t x = it;
    while (bson_iter_next(&x)) {
        const char *k = bson_iter_key(&x);
        n++;
        if (!strcmp(k, "$search")) {
            if (!BSON_ITER_HOLDS_UTF8(&x))
                return q_err(err, MD_EINVAL, MD_CODE_TYPE_MISMATCH,
                             "$search requires a string value");
            search = true;
        } else if (!strcmp(k, "$language")) {
            expected++;
            if (!BSON_ITER_HOLDS_UTF8(&x))
                return q_err(err, MD_EINVAL, MD_CODE_TYPE_MISMATCH,
                             "$language requires a string value");
        } else if (!strcmp(k, "$caseSensitive")) {
            expected++;
            if (!BSON_ITER_HOLDS_BOOL(&x))
                return q_err(err, MD_EINVAL, MD_CODE_TYPE_MISMATCH,
                             "$caseSensitive requires a boolean value");
        } else if (!strcmp(k, "$diacriticSensitive")) {
            expected++;
            if (!BSON_ITER_HOLDS_BOOL(&x))
                return q_err(err, MD_EINVAL, MD_CODE_TYPE_MISMATCH,
                             "$diacriticSensitive requires a boolean value");
        }
    }
    if (!search)
        return q_err(err, MD_EINVAL, MD_CODE_TYPE_MISMATCH, "$search requires a string value");
    if (n != expected)
        return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE, "extra fields in $text");
    return 0;
}

/* kind: 0 top / $and, 1 under $or, 2 under $nor. */
static int find_text(const bson_t *f, int kind, int depth, int *count, bson_iter_t *arg,
                     md_error *err)
{
    bson_iter_t it, x;
    if (depth > 100 || !bson_iter_init(&it, f))
        return 0;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (!strcmp(k, "$text")) {
            if (kind == 2)
                return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                             "text expression not allowed in nor");
            if (kind == 1)
                return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                             "error processing query: planner returned error: Failed to "
                             "produce a solution for TEXT under OR - other non-TEXT clauses "
                             "under OR have to be indexed as well.");
            if (++*count > 1)
                return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE, "Too many text expressions");
            if (arg)
                *arg = it;
            continue;
        }
        int sub = !strcmp(k, "$and") ? kind : !strcmp(k, "$or") ? (kind ? kind : 1)
                  : !strcmp(k, "$nor")                           ? 2
                                                                 : -1;
        if (sub < 0 || !BSON_ITER_HOLDS_ARRAY(&it) || !bson_iter_recurse(&it, &x))
            continue;
        while (bson_iter_next(&x)) {
            const uint8_t *d;
            uint32_t l;
            bson_t s;
            if (!BSON_ITER_HOLDS_DOCUMENT(&x))
                continue;
            bson_iter_document(&x, &l, &d);
            if (bson_init_static(&s, d, l)) {
                int rc = find_text(&s, sub, depth + 1, count, arg, err);
                if (rc)
                    return rc;
            }
        }
    }
    return 0;
}

int q_text_filter_find(const bson_t *filter, bson_iter_t *arg, bool *found, md_error *err)
{
    int count = 0;
    *found = false;
    if (!filter)
        return 0;
    int rc = find_text(filter, 0, 0, &count, arg, err);
    *found = rc == 0 && count > 0;
    return rc;
}

/* ---- FTSQueryImpl::parse ----------------------------------------------------------------- */

static bool q_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

typedef struct add_ctx {
    q_strv *v;
} add_ctx;

static void on_add(void *ctx, const char *t, size_t n)
{
    q_strv *v = ctx;
    strv_add(v, t, n, true);
}

static void add_terms(q_text_query *q, const char *sentence, size_t n, bool negated)
{
    q_strv *active = negated ? &q->neg : &q->pos;
    if (!negated)
        q_text_tokenize(q->lang, sentence, n, Q_TOK_STOP, on_add, &q->bounds);
    int opts = Q_TOK_STOP | (q->case_sensitive ? Q_TOK_CASE : 0) |
               (q->diacritic_sensitive ? Q_TOK_DIACRITIC : 0);
    q_text_tokenize(q->lang, sentence, n, opts, on_add, active);
}

int q_text_query_parse(const bson_iter_t *arg, int default_lang, q_text_query *q,
                       md_error *err)
{
    bson_iter_t it;
    memset(q, 0, sizeof *q);
    int rc = q_text_check(arg, err);
    if (rc)
        return rc;
    q->lang = default_lang;
    bson_iter_recurse(arg, &it);
    const char *search = "";
    uint32_t slen = 0;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (!strcmp(k, "$search")) {
            search = bson_iter_utf8(&it, &slen);
        } else if (!strcmp(k, "$language")) {
            int l = q_text_lang_find(bson_iter_utf8(&it, NULL));
            if (l < 0)
                return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                             "unsupported language: \"%s\" for text index version %d",
                             bson_iter_utf8(&it, NULL), Q_TEXT_INDEX_VERSION);
            q->lang = l;
        } else if (!strcmp(k, "$caseSensitive")) {
            q->case_sensitive = bson_iter_bool(&it);
        } else if (!strcmp(k, "$diacriticSensitive")) {
            q->diacritic_sensitive = bson_iter_bool(&it);
        }
    }
    q->search = bson_strndup(search, slen);
    /* FTSQueryParser: TEXT runs, '-' and '"' delimiters, white space */
    q_buf pos, neg;
    q_buf_init(&pos);
    q_buf_init(&neg);
    bool in_neg = false, in_phrase = false;
    size_t quote = 0, i = 0;
    bool prev_ws = true;
    while (i < slen && q_space(search[i]))
        i++;
    while (i < slen) {
        size_t start = i++;
        char c = search[start];
        bool delim = c == '-' || c == '"';
        if (!delim)
            while (i < slen && !q_space(search[i]) && search[i] != '-' && search[i] != '"')
                i++;
        bool preceded = prev_ws;
        prev_ws = false;
        while (i < slen && q_space(search[i]))
            i++, prev_ws = true;
        if (!delim) {
            if (in_phrase && in_neg)
                continue;
            if (in_neg && preceded)
                in_neg = false;
            q_buf *dst = in_neg ? &neg : &pos;
            q_buf_append(dst, search + start, i - start);
            q_buf_putc(dst, ' ');
        } else if (c == '-') {
            if (!in_phrase && preceded)
                in_neg = true;
        } else if (in_phrase) {
            size_t ps = quote + 1;
            strv_add(in_neg ? &q->neg_phrases : &q->phrases, search + ps, start - ps, false);
            in_phrase = false;
        } else {
            in_phrase = true;
            if (in_neg && preceded)
                in_neg = false;
            quote = start;
        }
    }
    add_terms(q, (const char *)pos.data, pos.len, false);
    add_terms(q, (const char *)neg.data, neg.len, true);
    q_buf_cleanup(&pos);
    q_buf_cleanup(&neg);
    return 0;
}

void q_text_query_cleanup(q_text_query *q)
{
    strv_cleanup(&q->bounds);
    strv_cleanup(&q->pos);
    strv_cleanup(&q->neg);
    strv_cleanup(&q->phrases);
    strv_cleanup(&q->neg_phrases);
    bson_free(q->search);
    memset(q, 0, sizeof *q);
}

bool q_text_query_needs_match(const q_text_query *q)
{
    return q->case_sensitive || q->diacritic_sensitive || q->neg.n || q->phrases.n ||
           q->neg_phrases.n;
}

static void append_strv(bson_t *out, const char *key, const q_strv *v)
{
    bson_t a;
    char k[24];
    bson_append_array_begin(out, key, -1, &a);
    for (size_t i = 0; i < v->n; i++) {
        snprintf(k, sizeof k, "%zu", i);
        bson_append_utf8(&a, k, -1, v->v[i], -1);
    }
    bson_append_array_end(out, &a);
}

void q_text_query_explain(const q_text_query *q, bson_t *out)
{
    append_strv(out, "terms", &q->pos);
    append_strv(out, "negatedTerms", &q->neg);
    append_strv(out, "phrases", &q->phrases);
    append_strv(out, "negatedPhrases", &q->neg_phrases);
}

/* ---- FTSMatcher ------------------------------------------------------------------------------ */

typedef struct match_ctx {
    const q_text_query *q;
    const q_strv *terms;  /* hasPositiveTerm / hasNegativeTerm: any of these */
    const char *phrase;   /* phraseMatch: this (folded) */
    size_t phrase_len;
    bool found;
} match_ctx;

static void on_match_token(void *ctx, const char *t, size_t n)
{
    match_ctx *m = ctx;
    if (!m->found && strv_has(m->terms, t, n))
        m->found = true;
}

static void match_terms(void *ctx, const char *s, size_t n, double weight, int lang)
{
    match_ctx *m = ctx;
    (void)weight;
    if (m->found)
        return;
    int opts = Q_TOK_STOP | (m->q->case_sensitive ? Q_TOK_CASE : 0) |
               (m->q->diacritic_sensitive ? Q_TOK_DIACRITIC : 0);
    q_text_tokenize(lang, s, n, opts, on_match_token, m);
}

static void match_phrase(void *ctx, const char *s, size_t n, double weight, int lang)
{
    match_ctx *m = ctx;
    (void)weight;
    (void)lang;
    if (m->found)
        return;
    size_t hl;
    char *hay = q_text_fold(s, n, m->q->case_sensitive, m->q->diacritic_sensitive, &hl);
    m->found = m->phrase_len == 0 || (hl >= m->phrase_len && memmem(hay, hl, m->phrase,
                                                                    m->phrase_len) != NULL);
    bson_free(hay);
}

static bool any_term(const q_text_query *q, const q_text_spec *s, const bson_t *doc,
                     const q_strv *terms)
{
    match_ctx m = {.q = q, .terms = terms};
    if (!terms->n)
        return false;
    (void)walk_strings(s, doc, match_terms, &m, NULL);
    return m.found;
}

static bool has_phrase(const q_text_query *q, const q_text_spec *s, const bson_t *doc,
                       const char *phrase)
{
    match_ctx m = {.q = q};
    char *p = q_text_fold(phrase, strlen(phrase), q->case_sensitive, q->diacritic_sensitive,
                          &m.phrase_len);
    m.phrase = p;
    (void)walk_strings(s, doc, match_phrase, &m, NULL);
    bson_free(p);
    return m.found;
}

bool q_text_query_matches(const q_text_query *q, const q_text_spec *s, const bson_t *doc)
{
    if ((q->case_sensitive || q->diacritic_sensitive) && !any_term(q, s, doc, &q->pos))
        return false;
    if (any_term(q, s, doc, &q->neg))
        return false;
    for (size_t i = 0; i < q->phrases.n; i++)
        if (!has_phrase(q, s, doc, q->phrases.v[i]))
            return false;
    for (size_t i = 0; i < q->neg_phrases.n; i++)
        if (has_phrase(q, s, doc, q->neg_phrases.v[i]))
            return false;
    return true;
}
