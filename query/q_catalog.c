/*
 * q_catalog.c -- collections and their indexes: the in-memory catalog of an
 * md_db and its persisted form in the engine's metadata (eng_meta_*).
 *
 * One catalog entry per collection, keyed by namespace ("test.c"):
 *
 *   { ns: "test.c", ident: "test.c", options: {...as given to create...},
 *     indexes: [ { spec: {v: 2, key: {_id: 1}, name: "_id_", ns: "test.c"},
 *                  ident: "test.c.$_id_", multikey: false, keyFormat: 2 },
 *                ... ] }
 *
 * keyFormat is the encoding of the index's keys (Q_KEY_FORMAT, q_int.h); an
 * entry without it was written before decimal128 keys were exact (format
 * 1), and q_catalog_upgrade rebuilds that index at open and records the
 * current format, so no key written the old way is ever compared with a
 * new one.  A format above Q_KEY_FORMAT (a newer build wrote it) is refused
 * with CannotCreateIndex; one below 1 or above Q_KEY_FORMAT_PLAUSIBLE is no
 * format at all: DataCorruptionDetected (mmapv1's catalog has no checksum).
 *
 * A hashed index's entry also has hash: "md5": its keys are MongoDB's hash
 * (q_hash.c).  Entries without it come from before that, when the keys were
 * FNV-1a over the key encoding; q_catalog_upgrade rebuilds them at open.
 *
 * Every change to an entry is written in the same engine transaction as
 * the storage change it describes, and memory follows only after the
 * commit, so an abort leaves memory and disk agreeing (q_int.h, inv. 2).
 */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "q_geo.h"
#include "q_int.h"
#include "q_path.h"
#include "q_text.h"

/* ---- names ----------------------------------------------------------------- */

/* MongoDB 3.6 NamespaceString rules, with "system." reserved, but for
 * admin.system.users, where `minidoc serve --auth` keeps its users. */
int q_ns_make(md_db *db, const char *name, char *ns, md_error *err)
{
    size_t n = strlen(name);
    bool users = strcmp(db->name, "admin") == 0 && strcmp(name, "system.users") == 0;
    bool bad = n == 0 || name[0] == '.' || strchr(name, '$') != NULL ||
               (strncmp(name, "system.", 7) == 0 && !users);
    if (bad)
        return q_err(err, MD_EINVAL, MD_CODE_INVALID_NAMESPACE,
                     "Invalid namespace specified '%s.%s'", db->name, name);
    if (strlen(db->name) + 1 + n > Q_NS_MAX)
        return q_err(err, MD_EINVAL, MD_CODE_INVALID_NAMESPACE,
                     "fully qualified namespace %s.%s is too long (max is %d bytes)",
                     db->name, name, Q_NS_MAX);
    size_t dl = strlen(db->name);
    assert(dl + 1 + n < ENG_IDENT_MAX);
    memcpy(ns, db->name, dl);
    ns[dl] = '.';
    memcpy(ns + dl + 1, name, n + 1);
    return 0;
}

/*
 * storageEngine.btree.configString, in WiredTiger's syntax as MongoDB passed
 * it through to WT_SESSION::create: "key=value[,key=value...]", blanks
 * around items ignored, a value optionally in double quotes.  The only key
 * known is block_compressor (none, snappy, zstd; an empty value is none, as
 * in WiredTiger); the last one wins.  *compressor (when not NULL) gets a
 * static name, or is left alone when the string names none.
 */
static int parse_config_string(const char *s, const char **compressor, md_error *err)
{
    static const char *const names[] = {"none", "snappy", "zstd"};
    while (*s) {
        const char *item = s, *eq, *end = strchr(s, ',');
        size_t n = end ? (size_t)(end - s) : strlen(s);
        s = end ? end + 1 : s + n;
        while (n && (*item == ' ' || *item == '\t'))
            item++, n--;
        while (n && (item[n - 1] == ' ' || item[n - 1] == '\t'))
            n--;
        if (n == 0)
            continue;
        eq = memchr(item, '=', n);
        size_t kl = eq ? (size_t)(eq - item) : n, vl = eq ? n - kl - 1 : 0;
        const char *v = eq ? eq + 1 : "";
        while (kl && item[kl - 1] == ' ')
            kl--;
        while (vl && *v == ' ')
            v++, vl--;
        if (vl >= 2 && v[0] == '"' && v[vl - 1] == '"')
            v++, vl -= 2;
        if (kl != 16 || strncmp(item, "block_compressor", 16) != 0)
            return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                         "storageEngine.btree.configString: unknown configuration key: '%.*s'",
                         (int)kl, item);
        if (!eq)
            return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                         "storageEngine.btree.configString: block_compressor needs a value");
        const char *found = vl == 0 ? "none" : NULL;
        for (size_t i = 0; !found && i < sizeof names / sizeof names[0]; i++)
            if (strlen(names[i]) == vl && strncmp(v, names[i], vl) == 0)
                found = names[i];
        if (!found)
            return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                         "storageEngine.btree.configString: unknown compressor '%.*s' "
                         "(block_compressor is one of none, snappy, zstd)",
                         (int)vl, v);
        if (compressor)
            *compressor = found;
    }
    return 0;
}

/* storageEngine.btree: {configString: "..."}, nothing else. */
static int btree_options(const bson_iter_t *se, const char **compressor, md_error *err)
{
    bson_iter_t it;
    if (!BSON_ITER_HOLDS_DOCUMENT(se))
        return q_err_field_type(err, "create", "storageEngine.btree", bson_iter_type(se),
                                "object");
    bson_iter_recurse(se, &it);
    while (bson_iter_next(&it)) {
        int rc;
        if (strcmp(bson_iter_key(&it), "configString") != 0)
            return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                         "storageEngine.btree: unknown field '%s' (only configString)",
                         bson_iter_key(&it));
        if (!BSON_ITER_HOLDS_UTF8(&it))
            return q_err_field_type(err, "create", "storageEngine.btree.configString",
                                    bson_iter_type(&it), "string");
        if ((rc = parse_config_string(bson_iter_utf8(&it, NULL), compressor, err)) != 0)
            return rc;
    }
    return 0;
}

/* The block compressor the options name (storageEngine.btree.configString),
 * or NULL for the engine's default.  The options were checked at create. */
static const char *options_compressor(const bson_t *options)
{
    bson_iter_t it, se;
    const char *name = NULL;
    if (!options || !bson_iter_init(&it, options))
        return NULL;
    while (bson_iter_next(&it))
        if (strcmp(bson_iter_key(&it), "storageEngine") == 0 && BSON_ITER_HOLDS_DOCUMENT(&it) &&
            bson_iter_recurse(&it, &se))
            while (bson_iter_next(&se))
                if (strcmp(bson_iter_key(&se), "btree") == 0)
                    btree_options(&se, &name, NULL);
    return name;
}

static int alloc_from_storage_engine(const bson_iter_t *it, int *alloc, md_error *err)
{
    bson_iter_t se, mm;
    bool have_mm = false;
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return q_err_field_type(err, "create", "storageEngine", bson_iter_type(it), "object");
    bson_iter_recurse(it, &se);
    while (bson_iter_next(&se)) {
        int rc = 0;
        if (strcmp(bson_iter_key(&se), "btree") == 0)
            rc = btree_options(&se, NULL, err);
        else if (strcmp(bson_iter_key(&se), "mmapv1") == 0 && BSON_ITER_HOLDS_DOCUMENT(&se))
            have_mm = bson_iter_recurse(&se, &mm);
        if (rc)
            return rc; /* options for other engines are ignored */
    }
    if (!have_mm || !bson_iter_find(&mm, "allocationStrategy"))
        return 0;
    int a = BSON_ITER_HOLDS_UTF8(&mm) ? eng_alloc_parse(bson_iter_utf8(&mm, NULL)) : -1;
    if (a < 0)
        return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                     "storageEngine.mmapv1.allocationStrategy must be one of "
                     "\"powerOf2\", \"noPadding\" or \"paddingFactor\"");
    *alloc = a;
    return 0;
}

static bool option_unsupported(const char *k)
{
    static const char *const names[] = {"validator", "validationLevel", "validationAction",
                                        "viewOn", "pipeline", "collation",
                                        "indexOptionDefaults", "idIndex", NULL};
    for (size_t i = 0; names[i]; i++)
        if (strcmp(k, names[i]) == 0)
            return true;
    return false;
}

/*
 * Options are read in order and the last one naming a strategy wins:
 * noPadding: true -> noPadding; usePowerOf2Sizes: false -> paddingFactor
 * (MongoDB 2.x meaning); flags (1 = powerOf2, 2 = noPadding);
 * storageEngine.mmapv1.allocationStrategy names one directly.
 */
int q_options_alloc(const bson_t *options, int *alloc, md_error *err)
{
    bson_iter_t it;
    *alloc = ENG_ALLOC_POWEROF2;
    if (!options || !bson_iter_init(&it, options))
        return 0;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        int rc = 0;
        if (strcmp(k, "capped") == 0) {
            /* q_options_capped reads it */
        } else if (strcmp(k, "noPadding") == 0) {
            if (bson_iter_as_bool(&it))
                *alloc = ENG_ALLOC_NOPADDING;
        } else if (strcmp(k, "usePowerOf2Sizes") == 0) {
            *alloc = bson_iter_as_bool(&it) ? ENG_ALLOC_POWEROF2 : ENG_ALLOC_PADDINGFACTOR;
        } else if (strcmp(k, "flags") == 0) {
            int64_t f = 0;
            q_iter_int64(&it, &f);
            *alloc = (f & 2) ? ENG_ALLOC_NOPADDING
                             : (f & 1) ? ENG_ALLOC_POWEROF2 : ENG_ALLOC_PADDINGFACTOR;
        } else if (strcmp(k, "storageEngine") == 0) {
            rc = alloc_from_storage_engine(&it, alloc, err);
        } else if (option_unsupported(k)) {
            rc = q_err(err, MD_ENOTSUP, MD_CODE_COMMAND_NOT_SUPPORTED,
                       "collection option '%s' is not supported yet", k);
        } else if (strcmp(k, "size") && strcmp(k, "max") && strcmp(k, "autoIndexId")) {
            rc = q_err(err, MD_EINVAL, MD_CODE_INVALID_OPTIONS,
                       "The field '%s' is not a valid collection option.", k);
        }
        if (rc)
            return rc;
    }
    return 0;
}

/*
 * MongoDB 3.x's CollectionOptions::parse and userCreateNS: a size that is
 * not a number is ignored (for backwards compatibility, as 3.x says); a
 * negative one is BadValue; it is rounded up to a multiple of 256.  max
 * counts only on a capped collection; <= 0 means no limit; 2^31 or more is
 * BadValue.  capped without a numeric size is error 14832.  A size of 0
 * becomes 4096, the default WiredTiger's capped record store takes.
 */
int q_options_capped(const bson_t *options, bool *capped, int64_t *size, int64_t *max,
                     md_error *err)
{
    bson_iter_t it;
    bool have_size = false;
    *capped = false;
    *size = 0;
    *max = 0;
    if (!options)
        return 0;
    if (bson_iter_init_find(&it, options, "capped"))
        *capped = bson_iter_as_bool(&it);
    bson_iter_init(&it, options);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        bool is_size = strcmp(k, "size") == 0, is_max = strcmp(k, "max") == 0;
        if ((!is_size && !is_max) || !BSON_ITER_HOLDS_NUMBER(&it))
            continue;
        double d = bson_iter_as_double(&it);
        int64_t v = d != d ? 0 : d >= 9.2e18 ? INT64_MAX : bson_iter_as_int64(&it);
        if (is_size) {
            if (v < 0)
                return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE, "size has to be >= 0");
            if (v > INT64_MAX - 0xff)
                v = INT64_MAX - 0xff;
            *size = (v + 0xff) & ~(int64_t)0xff;
            have_size = true;
        } else if (*capped) {
            if (v <= 0 || v == INT64_MAX)
                v = 0;
            else if (v >= ((int64_t)1 << 31))
                return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                             "max in a capped collection has to be < 2^31 or not set");
            *max = v;
        }
    }
    if (*capped && !have_size)
        return q_err(err, MD_EINVAL, Q_CODE_CAPPED_NEEDS_SIZE,
                     "specify size:<n> when capped is true");
    if (*capped && *size == 0)
        *size = 4096;
    if (!*capped)
        *size = *max = 0;
    return 0;
}

/* The options a capped collection keeps: capped, the rounded size and max
 * (when set) first, as CollectionOptions::toBSON writes them, then the rest
 * as given. */
static void options_normalize_capped(const bson_t *in, int64_t size, int64_t max, bson_t *out)
{
    bson_iter_t it;
    bson_init(out);
    BSON_APPEND_BOOL(out, "capped", true);
    q_append_number(out, "size", size);
    if (max > 0)
        q_append_number(out, "max", max);
    if (!in || !bson_iter_init(&it, in))
        return;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "capped") && strcmp(k, "size") && strcmp(k, "max"))
            bson_append_iter(out, NULL, 0, &it);
    }
}

/* ---- in-memory structures ---------------------------------------------------- */

q_index *q_index_new(const bson_t *spec, const char *ident)
{
    bson_iter_t it;
    static uint64_t serials;
    q_index *ix = q_zalloc(sizeof *ix);
    assert(ix);
    ix->serial = __atomic_add_fetch(&serials, 1, __ATOMIC_RELAXED);
    ix->since_ms = q_now_ms();
    bson_copy_to(spec, &ix->spec);
    bson_init(&ix->key);
    if (bson_iter_init_find(&it, spec, "key") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        const uint8_t *data;
        uint32_t len;
        bson_t k;
        bson_iter_document(&it, &len, &data);
        if (bson_init_static(&k, data, len)) {
            bson_destroy(&ix->key);
            bson_copy_to(&k, &ix->key);
        }
    }
    if (bson_iter_init_find(&it, spec, "name") && BSON_ITER_HOLDS_UTF8(&it))
        snprintf(ix->name, sizeof ix->name, "%s", bson_iter_utf8(&it, NULL));
    ix->unique = strcmp(ix->name, "_id_") == 0 ||
                 (bson_iter_init_find(&it, spec, "unique") && bson_iter_as_bool(&it));
    ix->sparse = bson_iter_init_find(&it, spec, "sparse") && bson_iter_as_bool(&it);
    ix->expire_secs = -1;
    ix->key_format = Q_KEY_FORMAT;
    bson_iter_t kt;
    if (bson_iter_init(&kt, &ix->key) && bson_iter_next(&kt) && BSON_ITER_HOLDS_UTF8(&kt))
        ix->hashed = strcmp(bson_iter_utf8(&kt, NULL), "hashed") == 0;
    q_geo_params gp;
    q_geo_params_init(&gp, spec);
    if (gp.kind) {
        ix->gp = malloc(sizeof *ix->gp);
        assert(ix->gp);
        *ix->gp = gp;
    }
    if (bson_iter_init_find(&it, spec, "partialFilterExpression") &&
        BSON_ITER_HOLDS_DOCUMENT(&it)) {
        const uint8_t *data;
        uint32_t len;
        bson_t pf;
        bson_iter_document(&it, &len, &data);
        if (bson_init_static(&pf, data, len))
            (void)q_matcher_new(&pf, &ix->partial, NULL); /* validated at creation */
    }
    if (bson_iter_init_find(&it, spec, "expireAfterSeconds") && BSON_ITER_HOLDS_NUMBER(&it))
        ix->expire_secs = bson_iter_as_int64(&it);
    if (q_text_key_is_text(&ix->key))
        ix->text = q_text_spec_new(spec);
    snprintf(ix->ident, sizeof ix->ident, "%s", ident);
    if (bson_iter_init(&kt, &ix->key) && bson_iter_next(&kt) && !BSON_ITER_HOLDS_UTF8(&kt) &&
        bson_iter_key(&kt)[0] && !strchr(bson_iter_key(&kt), '.') && !ix->hashed &&
        !ix->text && !ix->gp && !ix->partial) {
        ix->simple = bson_iter_key(&kt);
        ix->simple_desc = q_is_number(bson_iter_type(&kt)) && q_number_ld(&kt) < 0;
        if (bson_iter_next(&kt))
            ix->simple = NULL; /* a compound key */
    }
    return ix;
}

void q_index_free(q_index *ix)
{
    if (!ix)
        return;
    q_matcher_destroy(ix->partial);
    q_text_spec_free(ix->text);
    free(ix->gp);
    eng_ss_close(ix->ss);
    bson_destroy(&ix->key);
    bson_destroy(&ix->spec);
    free(ix);
}

static q_coll *coll_new(const char *name, const char *ns, const bson_t *options, int alloc)
{
    q_coll *c = q_zalloc(sizeof *c);
    assert(c);
    snprintf(c->name, sizeof c->name, "%s", name);
    snprintf(c->ns, sizeof c->ns, "%s", ns);
    if (options)
        bson_copy_to(options, &c->options);
    else
        bson_init(&c->options);
    c->alloc = alloc;
    (void)q_options_capped(&c->options, &c->capped, &c->capped_size, &c->capped_max, NULL);
    eng_rwlock_init(&c->lock);
    pthread_mutex_init(&c->plan_mu, NULL);
    pthread_mutex_init(&c->cap_write_mu, NULL);
    return c;
}

/* Open c's record store; a capped one tells c (q_capped_hook) before the
 * ring removes a record. */
static int coll_open_rs(md_db *db, q_coll *c, md_error *err)
{
    int rc = eng_rs_open(db->eng, c->ns, &c->rs, err);
    if (!rc && c->capped)
        eng_rs_set_capped_hook(c->rs, q_capped_hook, c);
    return rc;
}

static void coll_free(q_coll *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->nidx; i++)
        q_index_free(c->idx[i]);
    free(c->idx);
    q_plan_cache_clear(c);
    eng_rs_close(c->rs);
    bson_destroy(&c->options);
    pthread_rwlock_destroy(&c->lock);
    pthread_mutex_destroy(&c->plan_mu);
    pthread_mutex_destroy(&c->cap_write_mu);
    free(c);
}

static void coll_add_index(q_coll *c, q_index *ix)
{
    q_index **v = realloc(c->idx, (c->nidx + 1) * sizeof *v);
    assert(v);
    c->idx = v;
    c->idx[c->nidx++] = ix;
}

/* Link c into db->colls, keeping the list sorted by name. */
static void coll_link(md_db *db, q_coll *c)
{
    q_coll **p = &db->colls;
    while (*p && strcmp((*p)->name, c->name) < 0)
        p = &(*p)->next;
    c->next = *p;
    *p = c;
}

static void coll_unlink(md_db *db, q_coll *c)
{
    for (q_coll **p = &db->colls; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            return;
        }
}

q_coll *q_coll_find(md_db *db, const char *name)
{
    for (q_coll *c = db->colls; c; c = c->next)
        if (strcmp(c->name, name) == 0)
            return c;
    return NULL;
}

q_index *q_index_find(q_coll *c, const char *name)
{
    for (size_t i = 0; i < c->nidx; i++)
        if (strcmp(c->idx[i]->name, name) == 0)
            return c->idx[i];
    return NULL;
}

/* Key patterns compare by field names and numeric direction ({a: 1} == {a: 1.0}). */
static bool key_equal(const bson_t *a, const bson_t *b)
{
    bson_iter_t x, y;
    bson_iter_init(&x, a);
    bson_iter_init(&y, b);
    for (;;) {
        bool nx = bson_iter_next(&x), ny = bson_iter_next(&y);
        if (!nx || !ny)
            return nx == ny;
        if (strcmp(bson_iter_key(&x), bson_iter_key(&y)) != 0 ||
            q_value_cmp(&x, &y) != 0)
            return false;
    }
}

q_index *q_index_find_key(q_coll *c, const bson_t *key)
{
    for (size_t i = 0; i < c->nidx; i++)
        if (key_equal(&c->idx[i]->key, key))
            return c->idx[i];
    return NULL;
}

void q_coll_stats(q_coll *c, eng_rs_stats *st)
{
    eng_rs_get_stats(c->rs, st);
}

/* ---- persisted form -------------------------------------------------------- */

int q_catalog_put(md_db *db, eng_txn *t, q_coll *c, md_error *err)
{
    bson_t entry, arr, sub;
    char key[24];
    bson_init(&entry);
    BSON_APPEND_UTF8(&entry, "ns", c->ns);
    BSON_APPEND_UTF8(&entry, "ident", c->ns);
    BSON_APPEND_DOCUMENT(&entry, "options", &c->options);
    BSON_APPEND_ARRAY_BEGIN(&entry, "indexes", &arr);
    for (size_t i = 0; i < c->nidx; i++) {
        snprintf(key, sizeof key, "%zu", i);
        bson_append_document_begin(&arr, key, -1, &sub);
        BSON_APPEND_DOCUMENT(&sub, "spec", &c->idx[i]->spec);
        BSON_APPEND_UTF8(&sub, "ident", c->idx[i]->ident);
        BSON_APPEND_BOOL(&sub, "multikey", Q_MULTIKEY(c->idx[i]));
        if (c->idx[i]->hashed && !c->idx[i]->hash_stale)
            BSON_APPEND_UTF8(&sub, "hash", "md5");
        BSON_APPEND_INT32(&sub, "keyFormat", c->idx[i]->key_format);
        bson_append_document_end(&arr, &sub);
    }
    bson_append_array_end(&entry, &arr);
    int rc = eng_meta_put(db->eng, t, c->ns, &entry, err);
    bson_destroy(&entry);
    if (rc)
        q_err_engine(err, rc, "writing the catalog");
    return rc;
}

/* A catalog entry whose content is malformed: DataCorruptionDetected,
 * naming where the engine stores it (mmapv1: the record's file and offset;
 * its catalog has no checksum, so a flipped byte there arrives here). */
#define Q_KEY_FORMAT_PLAUSIBLE 255 /* formats a later build could write */

#define ENTRY_CORRUPT(db, key, err, ...) \
    entry_corrupt_at((db), (key), (err), __FILE__, __LINE__, __VA_ARGS__)

static int entry_corrupt_at(md_db *db, const char *key, md_error *err, const char *file,
                            int line, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

static int entry_corrupt_at(md_db *db, const char *key, md_error *err, const char *file,
                            int line, const char *fmt, ...)
{
    char what[300], where[ENG_IDENT_MAX + 200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    eng_meta_where(db->eng, key, where, sizeof where);
    return eng_corrupt_at(err, file, line, "catalog entry %s: %s%s%s", key, what,
                          where[0] ? ", in the record at " : "", where);
}

static int load_indexes(md_db *db, q_coll *c, bson_iter_t *arr, md_error *err)
{
    bson_iter_t it;
    bson_iter_recurse(arr, &it);
    while (bson_iter_next(&it)) {
        bson_iter_t f;
        const uint8_t *data;
        uint32_t len;
        bson_t spec;
        if (!BSON_ITER_HOLDS_DOCUMENT(&it))
            return ENTRY_CORRUPT(db, c->ns, err, "bad index entry");
        bson_iter_recurse(&it, &f);
        if (!bson_iter_find(&f, "spec") || !BSON_ITER_HOLDS_DOCUMENT(&f))
            return ENTRY_CORRUPT(db, c->ns, err, "index without spec");
        bson_iter_document(&f, &len, &data);
        if (!bson_init_static(&spec, data, len))
            return ENTRY_CORRUPT(db, c->ns, err, "bad index spec");
        bson_iter_recurse(&it, &f);
        if (!bson_iter_find(&f, "ident") || !BSON_ITER_HOLDS_UTF8(&f))
            return ENTRY_CORRUPT(db, c->ns, err, "index without ident");
        q_index *ix = q_index_new(&spec, bson_iter_utf8(&f, NULL));
        coll_add_index(c, ix);
        bson_iter_recurse(&it, &f);
        ix->multikey = ix->multikey_saved =
            bson_iter_find(&f, "multikey") && bson_iter_as_bool(&f);
        bson_iter_recurse(&it, &f);
        ix->hash_stale = ix->hashed && !(bson_iter_find(&f, "hash") && BSON_ITER_HOLDS_UTF8(&f) &&
                                         strcmp(bson_iter_utf8(&f, NULL), "md5") == 0);
        bson_iter_recurse(&it, &f);
        ix->key_format = bson_iter_find(&f, "keyFormat") && BSON_ITER_HOLDS_INT32(&f)
                             ? bson_iter_int32(&f)
                             : 1;
        if (ix->key_format < 1 || ix->key_format > Q_KEY_FORMAT_PLAUSIBLE)
            return ENTRY_CORRUPT(db, c->ns, err, "index '%s' has key format %d, which no "
                                 "minidoc writes", ix->name, ix->key_format);
        if (ix->key_format > Q_KEY_FORMAT) {
            char where[ENG_IDENT_MAX + 200];
            eng_meta_where(db->eng, c->ns, where, sizeof where);
            return q_err(err, MD_ENOTSUP, MD_CODE_CANNOT_CREATE_INDEX,
                         "index '%s' of %s has key format %d; this build of minidoc reads "
                         "formats 1 to %d (a newer minidoc wrote it%s%s%s)",
                         ix->name, c->ns, ix->key_format, Q_KEY_FORMAT,
                         where[0] ? ", or the catalog record at " : "", where,
                         where[0] ? " is damaged" : "");
        }
        if (!ix->name[0] || bson_empty(&ix->key))
            return ENTRY_CORRUPT(db, c->ns, err, "malformed index spec");
        int rc = eng_ss_open(db->eng, ix->ident, &ix->ss, err);
        if (rc)
            return q_err_engine(err, rc, "opening an index");
    }
    return 0;
}

typedef struct load_ctx {
    md_db *db;
    md_error *err;
    int rc; /* the entry that stopped the listing (engines return 0 then) */
} load_ctx;

static int load_one(void *ctx, const char *key, const bson_t *value)
{
    load_ctx *lc = ctx;
    md_db *db = lc->db;
    size_t dl = strlen(db->name);
    bson_iter_t it;
    int alloc = ENG_ALLOC_POWEROF2;
    if (strncmp(key, db->name, dl) != 0 || key[dl] != '.' ||
        !bson_iter_init_find(&it, value, "ident"))
        return 0; /* not a collection entry of this database */
    bson_t options = BSON_INITIALIZER;
    if (bson_iter_init_find(&it, value, "options") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        const uint8_t *data;
        uint32_t len;
        bson_iter_document(&it, &len, &data);
        bson_destroy(&options);
        if (!bson_init_static(&options, data, len))
            bson_init(&options);
    }
    q_options_alloc(&options, &alloc, NULL);
    q_coll *c = coll_new(key + dl + 1, key, &options, alloc);
    bson_destroy(&options);
    int rc = coll_open_rs(db, c, lc->err);
    if (rc) {
        q_err_engine(lc->err, rc, "opening a collection");
    } else if (!bson_iter_init_find(&it, value, "indexes") || !BSON_ITER_HOLDS_ARRAY(&it)) {
        rc = ENTRY_CORRUPT(db, key, lc->err, "no indexes");
    } else {
        rc = load_indexes(db, c, &it, lc->err);
    }
    if (rc) {
        coll_free(c);
        return lc->rc = rc;
    }
    coll_link(db, c);
    return 0;
}

static bool index_stale(const q_index *ix)
{
    return ix->hash_stale || ix->key_format != Q_KEY_FORMAT;
}

/* Rebuild, in one transaction, the indexes of c whose keys an older build
 * wrote: hashed indexes from before MongoDB's hash (catalog entries without
 * hash: "md5") and indexes of an older key format (decimal128 keys through
 * long double); record them as current. */
static int upgrade_coll(md_db *db, q_coll *c, md_error *err)
{
    eng_txn *t = NULL;
    bool any = false;
    for (size_t i = 0; i < c->nidx; i++)
        any |= index_stale(c->idx[i]);
    if (!any)
        return 0;
    int rc = eng_txn_begin(db->eng, &t);
    if (rc)
        return q_err_engine(err, rc, "starting a transaction");
    for (size_t i = 0; !rc && i < c->nidx; i++) {
        q_index *ix = c->idx[i];
        if (!index_stale(ix))
            continue;
        if ((rc = eng_ss_truncate(ix->ss, t)) != 0) {
            q_err_engine(err, rc, "emptying an index to rebuild it");
            break;
        }
        ix->hash_stale = false; /* keys from now on are MongoDB's hash */
        ix->key_format = Q_KEY_FORMAT;
        rc = q_index_build(db, t, c, ix, err);
    }
    if (!rc)
        rc = q_catalog_put(db, t, c, err);
    if (!rc && (rc = eng_txn_commit(t, true, err)) != 0)
        q_err_engine(err, rc, "committing");
    else if (rc)
        eng_txn_abort(t);
    return rc;
}

int q_catalog_upgrade(md_db *db, md_error *err)
{
    for (q_coll *c = db->colls; c; c = c->next) {
        int rc = upgrade_coll(db, c, err);
        if (rc)
            return rc;
    }
    return 0;
}

int q_catalog_load(md_db *db, md_error *err)
{
    load_ctx lc = {db, err, 0};
    int rc = eng_meta_list(db->eng, load_one, &lc);
    if (!rc)
        rc = lc.rc;
    if (rc)
        q_catalog_unload(db);
    return rc;
}

void q_catalog_unload(md_db *db)
{
    while (db->colls) {
        q_coll *c = db->colls;
        db->colls = c->next;
        coll_free(c);
    }
}

/* ---- create / drop ------------------------------------------------------------ */

static q_index *id_index_new(const char *ns)
{
    bson_t spec, key;
    char ident[ENG_IDENT_MAX + 8];
    bson_init(&spec);
    BSON_APPEND_INT32(&spec, "v", 2);
    BSON_APPEND_DOCUMENT_BEGIN(&spec, "key", &key);
    BSON_APPEND_INT32(&key, "_id", 1);
    bson_append_document_end(&spec, &key);
    BSON_APPEND_UTF8(&spec, "name", "_id_");
    BSON_APPEND_UTF8(&spec, "ns", ns);
    snprintf(ident, sizeof ident, "%s.$_id_", ns);
    q_index *ix = q_index_new(&spec, ident);
    bson_destroy(&spec);
    return ix;
}

/* autoIndexId: false creates the collection without its _id index, as
 * MongoDB 3.x did (deprecated since 3.2; replicated capped collections in
 * "local" were its use).  Any other value, or none, keeps the index. */
static bool options_auto_index_id(const bson_t *options)
{
    bson_iter_t it;
    return !options || !bson_iter_init_find(&it, options, "autoIndexId") ||
           bson_iter_as_bool(&it);
}

static int create_storage(md_db *db, q_coll *c, bool durable, md_error *err)
{
    eng_txn *t = NULL;
    eng_rs_options o = {.alloc = c->alloc,
                        .capped = c->capped,
                        .capped_size = c->capped_size,
                        .capped_max = c->capped_max,
                        .block_compressor = options_compressor(&c->options)};
    int rc = eng_txn_begin(db->eng, &t);
    if (rc)
        return q_err_engine(err, rc, "starting a transaction");
    rc = eng_rs_create(db->eng, t, c->ns, &o, err);
    if (!rc && c->nidx > 0)
        rc = eng_ss_create(db->eng, t, c->idx[0]->ident, err);
    if (!rc)
        rc = q_catalog_put(db, t, c, err);
    if (rc) {
        eng_txn_abort(t);
        q_err_engine(err, rc, "creating a collection");
        return q_write_failed(db, rc, err);
    }
    rc = eng_txn_commit(t, durable, err);
    if (rc)
        return q_write_failed(db, q_err_engine(err, rc, "committing"), err);
    return 0;
}

int q_coll_create(md_db *db, const char *name, const bson_t *options, q_coll **out,
                  md_error *err)
{
    char ns[ENG_IDENT_MAX];
    int alloc, rc;
    if ((rc = q_ns_make(db, name, ns, err)) != 0)
        return rc;
    if (q_coll_find(db, name))
        return q_err(err, MD_EEXISTS, MD_CODE_NAMESPACE_EXISTS,
                     "a collection '%s' already exists", ns);
    bool capped;
    int64_t size, max;
    if ((rc = q_options_alloc(options, &alloc, err)) != 0 ||
        (rc = q_options_capped(options, &capped, &size, &max, err)) != 0)
        return rc;
    if ((rc = q_write_allowed(db, err)) != 0)
        return rc;
    bson_t norm;
    if (capped)
        options_normalize_capped(options, size, max, &norm);
    q_coll *c = coll_new(name, ns, capped ? &norm : options, alloc);
    if (capped)
        bson_destroy(&norm);
    if (options_auto_index_id(options))
        coll_add_index(c, id_index_new(ns));
    rc = create_storage(db, c, false, err);
    if (!rc && (rc = coll_open_rs(db, c, err)) != 0)
        q_err_engine(err, rc, "opening the new collection");
    if (!rc && c->nidx > 0 &&
        (rc = eng_ss_open(db->eng, c->idx[0]->ident, &c->idx[0]->ss, err)) != 0)
        q_err_engine(err, rc, "opening the new _id index");
    if (rc) {
        coll_free(c);
        return rc;
    }
    coll_link(db, c);
    if (out)
        *out = c;
    return 0;
}

int q_coll_get_or_create(md_db *db, const char *name, bool *created, q_coll **out,
                         md_error *err)
{
    if (created)
        *created = false;
    *out = q_coll_find(db, name);
    if (*out)
        return 0;
    int rc = q_coll_create(db, name, NULL, out, err);
    if (!rc && created)
        *created = true;
    return rc;
}

static int reopen_handles(md_db *db, q_coll *c, md_error *err)
{
    int rc = c->rs ? 0 : coll_open_rs(db, c, err);
    for (size_t i = 0; !rc && i < c->nidx; i++)
        if (!c->idx[i]->ss)
            rc = eng_ss_open(db->eng, c->idx[i]->ident, &c->idx[i]->ss, err);
    return rc;
}

static void close_handles(q_coll *c)
{
    for (size_t i = 0; i < c->nidx; i++) {
        eng_ss_close(c->idx[i]->ss);
        c->idx[i]->ss = NULL;
    }
    eng_rs_close(c->rs);
    c->rs = NULL;
}

/* Storage handles are closed before their objects are dropped; if the drop
 * fails, the transaction is aborted and the handles opened again. */
int q_coll_drop(md_db *db, q_coll *c, md_error *err)
{
    eng_txn *t = NULL;
    int rc = q_write_allowed(db, err);
    if (rc)
        return rc;
    q_cursor_kill_coll(db, c);
    close_handles(c);
    if ((rc = eng_txn_begin(db->eng, &t)) != 0)
        goto out_reopen;
    for (size_t i = 0; !rc && i < c->nidx; i++)
        rc = eng_ss_drop(db->eng, t, c->idx[i]->ident);
    if (!rc)
        rc = eng_rs_drop(db->eng, t, c->ns);
    if (!rc)
        rc = eng_meta_del(db->eng, t, c->ns);
    if (rc) {
        eng_txn_abort(t);
        goto out_reopen;
    }
    if ((rc = eng_txn_commit(t, false, err)) != 0)
        goto out_reopen;
    coll_unlink(db, c);
    coll_free(c);
    return 0;
out_reopen:
    q_err_engine(err, rc, "dropping a collection");
    q_write_failed(db, rc, err);
    reopen_handles(db, c, NULL);
    return rc;
}

/* ---- index keys per index type -------------------------------------------------- */

/*
 * Hashed keys: MongoDB's hash of the field's value (q_hash.c), a NumberLong
 * key; a missing field hashes as null.  An array anywhere on the path is
 * refused (16766), as dps::extractElementAtPathOrArrayAlongPath finds it.
 */
static int hashed_keys(const q_index *ix, const bson_t *doc, q_keyset *out, md_error *err)
{
    bson_iter_t kt, v;
    bson_iter_init(&kt, &ix->key);
    bson_iter_next(&kt);
    const char *path = bson_iter_key(&kt);
    bool found = false, arr = false;
    bson_t cur;
    bson_init_static(&cur, bson_get_data(doc), doc->len);
    for (const char *p = path;;) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        if (!bson_iter_init(&v, &cur) || !bson_iter_find_w_len(&v, p, (int)n))
            break;
        if (BSON_ITER_HOLDS_ARRAY(&v)) {
            arr = true;
            break;
        }
        if (!dot) {
            found = true;
            break;
        }
        const uint8_t *data;
        uint32_t len;
        if (!BSON_ITER_HOLDS_DOCUMENT(&v))
            break;
        bson_iter_document(&v, &len, &data);
        if (!bson_init_static(&cur, data, len))
            break;
        p = dot + 1;
    }
    q_keyset_cleanup(out);
    q_keyset_init(out);
    if (arr)
        return q_err(err, MD_EINVAL, 16766,
                     "Error: hashed indexes do not currently support array values");
    out->keys = bson_malloc0(sizeof *out->keys);
    out->cap = out->n = 1;
    q_buf_init(&out->keys[0]);
    q_hash_key(found ? &v : NULL, 0, &out->keys[0]);
    return 0;
}

int q_index_doc_keys(const q_index *ix, const bson_t *doc, q_keyset *out, md_error *err)
{
    q_keyset_cleanup(out);
    q_keyset_init(out);
    if (ix->partial && !q_matcher_matches(ix->partial, doc))
        return 0;
    if (ix->hashed)
        return hashed_keys(ix, doc, out, err);
    if (ix->text)
        return q_text_index_keys(ix, doc, out, err);
    if (ix->gp)
        return q_geo_doc_keys(ix, doc, out, err);
    return q_index_keys(&ix->key, doc, ix->sparse, out, err);
}

/* ---- capped conversions ------------------------------------------------------------- */

/* Copies of every document of c, in natural order (insertion order). */
static int collect_docs(md_db *db, q_coll *c, bson_t ***out, size_t *n, md_error *err)
{
    eng_rs_cursor *rc_ = NULL;
    eng_rid rid;
    const uint8_t *data;
    uint32_t len;
    size_t cap = 0;
    *out = NULL;
    *n = 0;
    int rc = eng_rs_cursor_open(c->rs, true, &rc_);
    if (rc)
        return q_err_engine(err, rc, "opening a collection cursor");
    while ((rc = eng_rs_cursor_next(rc_, &rid, &data, &len)) == 0) {
        if (*n == cap) {
            cap = cap ? cap * 2 : 64;
            bson_t **v = realloc(*out, cap * sizeof *v);
            assert(v);
            *out = v;
        }
        bson_t *d = bson_new_from_data(data, len);
        if (!d) {
            rc = ENG_CORRUPT(err, "record %lld of %s is not a BSON document", (long long)rid,
                             c->ns);
            break;
        }
        (*out)[(*n)++] = d;
    }
    eng_rs_cursor_close(rc_);
    if (rc == MD_NOTFOUND)
        return 0;
    for (size_t i = 0; i < *n; i++)
        bson_destroy((*out)[i]);
    free(*out);
    *out = NULL;
    *n = 0;
    return rc == MD_ECORRUPT ? rc : q_read_error(rc, err);
}

/* A new capped collection `name` of `size` bytes (with its _id index)
 * filled with docs in order: the ring keeps the newest when they do not
 * fit.  *out: the collection, if out is not NULL. */
static int create_capped_with(md_db *db, const char *name, int64_t size, bson_t **docs,
                              size_t n, q_coll **out, md_error *err)
{
    bson_t opts = BSON_INITIALIZER;
    q_coll *nc = NULL;
    BSON_APPEND_BOOL(&opts, "capped", true);
    BSON_APPEND_INT64(&opts, "size", size);
    int rc = q_coll_create(db, name, &opts, &nc, err);
    for (size_t i = 0; !rc && i < n; i++)
        rc = q_write_insert(db, nc, docs[i], false, NULL, err);
    bson_destroy(&opts);
    if (out)
        *out = rc ? NULL : nc;
    return rc;
}

static void docs_free(bson_t **docs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        bson_destroy(docs[i]);
    free(docs);
}

/*
 * convertToCapped as MongoDB 3.x: the documents are copied in natural order
 * into a new capped collection of the same name (the ring keeps the newest
 * when they do not fit), with its _id index; other indexes are not carried
 * over.  3.x copies into a temporary collection and renames it; minidoc has
 * no rename, so it keeps the copies in memory, drops the old collection and
 * creates the new one: not atomic across a crash (neither is 3.x's).  The
 * size is the command's, already checked positive (q_cmd_admin.c), so the
 * create after the drop does not fail on it.
 */
int q_coll_convert_capped(md_db *db, q_coll *c, int64_t size, q_coll **out, md_error *err)
{
    bson_t **docs = NULL;
    size_t n = 0;
    char name[ENG_IDENT_MAX];
    snprintf(name, sizeof name, "%s", c->name);
    int rc = q_write_allowed(db, err);
    if (!rc)
        rc = collect_docs(db, c, &docs, &n, err);
    if (!rc)
        rc = q_coll_drop(db, c, err);
    if (!rc)
        rc = create_capped_with(db, name, size, docs, n, out, err);
    else if (out)
        *out = NULL;
    docs_free(docs, n);
    return rc;
}

/* cloneCollectionAsCapped: c's documents in natural order into a new capped
 * collection `to` of `size` bytes (with its _id index), c unchanged. */
int q_coll_clone_capped(md_db *db, q_coll *c, const char *to, int64_t size, md_error *err)
{
    bson_t **docs = NULL;
    size_t n = 0;
    int rc = collect_docs(db, c, &docs, &n, err);
    if (!rc)
        rc = create_capped_with(db, to, size, docs, n, NULL, err);
    docs_free(docs, n);
    return rc;
}

int q_coll_empty(md_db *db, q_coll *c, md_error *err)
{
    eng_txn *t = NULL;
    int rc = q_write_allowed(db, err);
    if (rc)
        return rc;
    q_cursor_kill_coll(db, c);
    if ((rc = eng_txn_begin(db->eng, &t)) != 0)
        return q_err_engine(err, rc, "starting a transaction");
    rc = eng_rs_truncate(c->rs, t);
    for (size_t i = 0; !rc && i < c->nidx; i++)
        rc = eng_ss_truncate(c->idx[i]->ss, t);
    if (rc) {
        eng_txn_abort(t);
        q_err_engine(err, rc, "emptying a capped collection");
        return q_write_failed(db, rc, err);
    }
    if ((rc = eng_txn_commit(t, false, err)) != 0)
        return q_write_failed(db, q_err_engine(err, rc, "committing"), err);
    q_plan_cache_clear(c);
    return 0;
}
