/*
 * test_mm_btree.c -- unit tests of the mmapv1 index B+tree (mm_btree.c).
 *
 * The tree runs over an in-memory pager ("tp") that plays the transaction:
 * it keeps a pre-image (shadow) of every bucket, and checks that each
 * changed byte was declared through writing() before it changed (at
 * writing() time) and at all (at commit).  Abort restores only the declared
 * bytes, so a missing declaration shows up as a tree that does not roll
 * back.  Frees are deferred to commit and the freed memory is poisoned
 * under ASan; knobs fail the Nth allocation or move every bucket to new
 * memory on each allocation (a remap), so stale bucket pointers crash.
 *
 * Tests read bucket headers directly, with the offsets of the format table
 * at the top of mm_btree.c.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mm_btree.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define TP_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define TP_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define TP_POISON(p, n) ((void)(p), (void)(n))
#define TP_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

/* Bucket format offsets (see mm_btree.c). */
#define TB_LEVEL 4
#define TB_N 6
#define TB_TOP 8
#define TB_PARENT 16
#define TB_NEXT 24
#define TB_PREV 32
#define TB_RIGHT 40
#define TB_HDR 48
#define TB_SLOT 20
#define TS_KOFS 0
#define TS_KLEN 2
#define TS_RID 4
#define TS_CHILD 12

/* ---- the in-memory pager ------------------------------------------------- */

enum { TP_UNUSED, TP_LIVE, TP_FREED };

typedef struct tp_page {
    int state;
    bool fresh; /* allocated since the last commit */
    uint8_t *p, *shadow, *decl;
} tp_page;

typedef struct tpager {
    mm_bt_pager pager;
    tp_page *pg;
    size_t n, cap;
    mm_bt_loc root, shadow_root;
    int violations;
    char first_violation[256];
    long allocs, fail_at; /* fail_at < 0: never fail */
    bool remap;
} tpager;

static void tp_violation(tpager *tp, const char *what, size_t i, size_t ofs)
{
    if (tp->violations++ == 0)
        snprintf(tp->first_violation, sizeof tp->first_violation,
                 "%s (page %zu offset %zu)", what, i, ofs);
}

static mm_bt_loc tp_loc(size_t i)
{
    return (1ull << 32) | ((uint64_t)(i + 1) << 13);
}

static tp_page *tp_find(tpager *tp, mm_bt_loc loc, size_t *idx)
{
    uint64_t ofs = loc & 0xffffffffu;

    if (loc >> 32 != 1 || ofs % 8192 || ofs == 0 || ofs / 8192 - 1 >= tp->n)
        return NULL;
    *idx = ofs / 8192 - 1;
    return &tp->pg[*idx];
}

static void tp_drop(tp_page *pg)
{
    if (pg->state == TP_FREED)
        TP_UNPOISON(pg->p, MM_BUCKET_SIZE);
    free(pg->p);
    free(pg->shadow);
    free(pg->decl);
    memset(pg, 0, sizeof *pg);
}

/* Move every bucket to fresh memory, as a remap of the data files would. */
static void tp_move_all(tpager *tp)
{
    for (size_t i = 0; i < tp->n; i++) {
        tp_page *pg = &tp->pg[i];
        uint8_t *np;
        if (pg->state == TP_UNUSED)
            continue;
        np = malloc(MM_BUCKET_SIZE);
        cr_assert(np);
        if (pg->state == TP_FREED)
            TP_UNPOISON(pg->p, MM_BUCKET_SIZE);
        memcpy(np, pg->p, MM_BUCKET_SIZE);
        free(pg->p);
        pg->p = np;
        if (pg->state == TP_FREED)
            TP_POISON(np, MM_BUCKET_SIZE);
    }
}

static int tp_alloc(void *ctx, eng_txn *t, mm_bt_loc *loc, uint8_t **page)
{
    tpager *tp = ctx;
    size_t i;

    (void)t;
    if (tp->fail_at >= 0 && tp->allocs >= tp->fail_at)
        return MD_ENOSPC;
    tp->allocs++;
    if (tp->remap)
        tp_move_all(tp);
    for (i = 0; i < tp->n && tp->pg[i].state != TP_UNUSED; i++)
        ;
    if (i == tp->n) {
        if (tp->n == tp->cap) {
            tp->cap = tp->cap ? tp->cap * 2 : 64;
            tp->pg = realloc(tp->pg, tp->cap * sizeof *tp->pg);
            cr_assert(tp->pg);
        }
        memset(&tp->pg[tp->n++], 0, sizeof *tp->pg);
    }
    tp->pg[i].p = calloc(1, MM_BUCKET_SIZE);
    tp->pg[i].shadow = calloc(1, MM_BUCKET_SIZE);
    tp->pg[i].decl = malloc(MM_BUCKET_SIZE);
    cr_assert(tp->pg[i].p && tp->pg[i].shadow && tp->pg[i].decl);
    memset(tp->pg[i].decl, 1, MM_BUCKET_SIZE); /* "already declared" */
    tp->pg[i].state = TP_LIVE;
    tp->pg[i].fresh = true;
    *loc = tp_loc(i);
    *page = tp->pg[i].p;
    return 0;
}

static void tp_free(void *ctx, eng_txn *t, mm_bt_loc loc)
{
    tpager *tp = ctx;
    size_t i;
    tp_page *pg = tp_find(tp, loc, &i);

    (void)t;
    if (!pg || pg->state != TP_LIVE) {
        tp_violation(tp, "free of a bucket that is not live", 0, 0);
        return;
    }
    pg->state = TP_FREED;
    TP_POISON(pg->p, MM_BUCKET_SIZE);
}

static uint8_t *tp_page_of(void *ctx, mm_bt_loc loc)
{
    tpager *tp = ctx;
    size_t i;
    tp_page *pg = tp_find(tp, loc, &i);

    return pg && pg->state == TP_LIVE ? pg->p : NULL;
}

static void tp_writing(void *ctx, eng_txn *t, void *ptr, size_t len)
{
    tpager *tp = ctx;
    uintptr_t a = (uintptr_t)ptr;

    (void)t;
    for (size_t i = 0; i < tp->n; i++) {
        tp_page *pg = &tp->pg[i];
        uintptr_t b = (uintptr_t)pg->p;
        if (pg->state != TP_LIVE || a < b || a + len > b + MM_BUCKET_SIZE)
            continue;
        for (size_t o = a - b; o < a - b + len; o++) {
            if (!pg->decl[o] && pg->p[o] != pg->shadow[o])
                tp_violation(tp, "byte changed before writing() declared it", i, o);
            pg->decl[o] = 1;
        }
        return;
    }
    tp_violation(tp, "writing() outside every live bucket", 0, 0);
}

static mm_bt_loc tp_get_root(void *ctx)
{
    return ((tpager *)ctx)->root;
}

static void tp_set_root(void *ctx, eng_txn *t, mm_bt_loc root)
{
    (void)t;
    ((tpager *)ctx)->root = root;
}

static tpager *tp_new(void)
{
    tpager *tp = calloc(1, sizeof *tp);

    cr_assert(tp);
    tp->fail_at = -1;
    tp->pager = (mm_bt_pager){tp, tp_alloc, tp_free, tp_page_of, tp_writing, tp_get_root,
                              tp_set_root};
    return tp;
}

static void tp_destroy(tpager *tp)
{
    for (size_t i = 0; i < tp->n; i++)
        tp_drop(&tp->pg[i]);
    free(tp->pg);
    free(tp);
}

/* Every change since the last commit must have been declared. */
static void tp_commit(tpager *tp)
{
    for (size_t i = 0; i < tp->n; i++) {
        tp_page *pg = &tp->pg[i];
        if (pg->state == TP_FREED) {
            tp_drop(pg);
            continue;
        }
        if (pg->state != TP_LIVE)
            continue;
        for (size_t o = 0; o < MM_BUCKET_SIZE; o++)
            if (pg->p[o] != pg->shadow[o] && !pg->decl[o])
                tp_violation(tp, "byte changed without writing()", i, o);
        memcpy(pg->shadow, pg->p, MM_BUCKET_SIZE);
        memset(pg->decl, 0, MM_BUCKET_SIZE);
        pg->fresh = false;
    }
    tp->shadow_root = tp->root;
}

/* Undo the declared bytes only; anything else that changed is a violation. */
static void tp_abort(tpager *tp)
{
    for (size_t i = 0; i < tp->n; i++) {
        tp_page *pg = &tp->pg[i];
        if (pg->state == TP_UNUSED)
            continue;
        if (pg->fresh) {
            tp_drop(pg);
            continue;
        }
        if (pg->state == TP_FREED)
            TP_UNPOISON(pg->p, MM_BUCKET_SIZE);
        pg->state = TP_LIVE;
        for (size_t o = 0; o < MM_BUCKET_SIZE; o++) {
            if (pg->decl[o])
                pg->p[o] = pg->shadow[o];
            else if (pg->p[o] != pg->shadow[o])
                tp_violation(tp, "undeclared change survived abort", i, o);
        }
        memset(pg->decl, 0, MM_BUCKET_SIZE);
    }
    tp->root = tp->shadow_root;
}

/* Accept the current bytes without checks (after a test corrupts them). */
static void tp_accept(tpager *tp)
{
    for (size_t i = 0; i < tp->n; i++)
        if (tp->pg[i].state == TP_LIVE)
            memset(tp->pg[i].decl, 1, MM_BUCKET_SIZE);
    tp_commit(tp);
}

static size_t tp_live(const tpager *tp)
{
    size_t live = 0;
    for (size_t i = 0; i < tp->n; i++)
        live += tp->pg[i].state == TP_LIVE;
    return live;
}

/* ---- harness ------------------------------------------------------------- */

static tpager *tp;
static mm_bt *bt;
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static uint32_t rndn(uint32_t n)
{
    return (uint32_t)(rnd() % n);
}

static void open_tree(void)
{
    tp = tp_new();
    cr_assert_eq(mm_bt_open(&tp->pager, &bt), 0);
}

static void close_tree(void)
{
    mm_bt_close(bt);
    tp_destroy(tp);
    bt = NULL;
    tp = NULL;
}

static void commit_ok(void)
{
    tp_commit(tp);
    cr_assert_eq(tp->violations, 0, "%s", tp->first_violation);
}

/* Number of validate errors; the first message goes to first[]. */
static int validate_errors(char *first, size_t cap)
{
    eng_validate v;
    bson_iter_t it;
    int n;

    eng_validate_init(&v, true);
    cr_assert_eq(mm_bt_validate(bt, &v), 0);
    n = v.nerrors;
    if (first && cap) {
        first[0] = '\0';
        if (n && bson_iter_init_find(&it, &v.errors, "0"))
            snprintf(first, cap, "%s", bson_iter_utf8(&it, NULL));
    }
    eng_validate_cleanup(&v);
    return n;
}

static void validate_ok(void)
{
    char msg[1024];
    int n = validate_errors(msg, sizeof msg);
    cr_assert_eq(n, 0, "validate: %d errors, first: %s", n, msg);
}

static void ins(const void *key, uint32_t klen, eng_rid rid)
{
    md_error err;
    int rc = mm_bt_insert(bt, NULL, key, klen, rid, false, NULL, &err);
    cr_assert_eq(rc, 0, "insert rid %lld: %d %s", (long long)rid, rc, err.message);
}

static void ins_str(const char *key, eng_rid rid)
{
    ins(key, (uint32_t)strlen(key), rid);
}

/* 8-byte big-endian key: memcmp order is numeric order. */
static uint32_t num_key(uint8_t *buf, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        buf[i] = (uint8_t)v;
    return 8;
}

static void expect_at(mm_bt_cursor *c, const void *key, uint32_t klen, eng_rid rid)
{
    const uint8_t *k;
    uint32_t kl;
    eng_rid r;

    cr_assert_eq(mm_bt_cursor_get(c, &k, &kl, &r), 0);
    cr_assert_eq(kl, klen);
    cr_assert(klen == 0 || memcmp(k, key, klen) == 0);
    cr_assert_eq(r, rid, "rid %lld, expected %lld", (long long)r, (long long)rid);
}

static unsigned hdr16(const uint8_t *p, size_t ofs)
{
    return p[ofs] | p[ofs + 1] << 8;
}

static uint64_t hdr64(const uint8_t *p, size_t ofs)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[ofs + i];
    return v;
}

static void put_hdr64(uint8_t *p, size_t ofs, uint64_t v)
{
    for (int i = 0; i < 8; i++, v >>= 8)
        p[ofs + i] = (uint8_t)v;
}

static uint8_t *page(mm_bt_loc loc)
{
    uint8_t *p = tp_page_of(tp, loc);
    cr_assert(p);
    return p;
}

static unsigned root_level(void)
{
    return tp->root ? page(tp->root)[TB_LEVEL] : 0;
}

/* The leaves in chain order, from the leftmost one. */
static size_t leaf_chain(mm_bt_loc *out, size_t cap)
{
    mm_bt_loc loc = tp->root;
    size_t n = 0;

    while (loc && page(loc)[TB_LEVEL] > 0) {
        uint8_t *p = page(loc);
        loc = hdr16(p, TB_N) ? hdr64(p, TB_HDR + TS_CHILD) : hdr64(p, TB_RIGHT);
    }
    for (; loc && n < cap; loc = hdr64(page(loc), TB_NEXT))
        out[n++] = loc;
    return n;
}

/* ---- the model: a sorted array of distinct (key, rid) pairs -------------- */

typedef struct ment {
    uint8_t *key;
    uint32_t klen;
    eng_rid rid;
    bool dead;
} ment;

static int ment_cmp(const void *a, const void *b)
{
    const ment *x = a, *y = b;
    return eng_key_cmp(x->key, x->klen, x->rid, y->key, y->klen, y->rid);
}

/* Sort and drop repeated pairs; returns the new count. */
static size_t model_sort(ment *m, size_t n)
{
    size_t k = 0;

    qsort(m, n, sizeof *m, ment_cmp);
    for (size_t i = 0; i < n; i++) {
        if (k && ment_cmp(&m[k - 1], &m[i]) == 0) {
            free(m[i].key);
            continue;
        }
        m[k++] = m[i];
    }
    return k;
}

static void model_free(ment *m, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(m[i].key);
    free(m);
}

/* Varied keys: a third one heavily duplicated key, short keys over a
 * three-letter alphabet (shared prefixes), binary keys, near-1024 keys. */
static uint32_t gen_key(uint8_t *buf, eng_rid *rid)
{
    uint32_t r = rndn(100), len;

    *rid = 1 + rndn(1000000);
    if (r < 33) {
        memcpy(buf, "the-duplicated-key", 18);
        *rid = 1 + rndn(3000);
        return 18;
    }
    if (r < 73) {
        len = 1 + rndn(10);
        for (uint32_t i = 0; i < len; i++)
            buf[i] = (uint8_t)("abc"[rndn(3)]);
        return len;
    }
    len = r < 95 ? rndn(200) : 900 + rndn(MM_BT_KEY_MAX - 900 + 1);
    for (uint32_t i = 0; i < len; i++)
        buf[i] = (uint8_t)rnd();
    if (len > 4)
        memcpy(buf, "LONG", 4);
    return len;
}

static ment *model_random(size_t n, size_t *out_n)
{
    ment *m = calloc(n, sizeof *m);
    uint8_t buf[MM_BT_KEY_MAX];

    cr_assert(m);
    for (size_t i = 0; i < n; i++) {
        m[i].klen = gen_key(buf, &m[i].rid);
        m[i].key = malloc(m[i].klen ? m[i].klen : 1);
        memcpy(m[i].key, buf, m[i].klen);
    }
    *out_n = n;
    return m;
}

/* Forward and backward scans must list exactly the live model entries. */
static void check_scan(const ment *m, size_t n)
{
    mm_bt_cursor *c;
    size_t i = 0;
    int rc;

    cr_assert_eq(mm_bt_cursor_open(bt, &c), 0);
    for (rc = mm_bt_cursor_next(c); rc == 0; rc = mm_bt_cursor_next(c), i++) {
        while (i < n && m[i].dead)
            i++;
        cr_assert(i < n, "scan returned more entries than the model");
        expect_at(c, m[i].key, m[i].klen, m[i].rid);
    }
    cr_assert_eq(rc, MD_NOTFOUND);
    while (i < n && m[i].dead)
        i++;
    cr_assert_eq(i, n, "scan stopped at %zu of %zu", i, n);
    for (rc = mm_bt_cursor_prev(c); rc == 0; rc = mm_bt_cursor_prev(c)) {
        while (i > 0 && m[i - 1].dead)
            i--;
        cr_assert(i > 0, "backward scan returned too many entries");
        i--;
        expect_at(c, m[i].key, m[i].klen, m[i].rid);
    }
    cr_assert_eq(rc, MD_NOTFOUND);
    while (i > 0 && m[i - 1].dead)
        i--;
    cr_assert_eq(i, 0);
    mm_bt_cursor_close(c);
}

static int64_t live_count(const ment *m, size_t n)
{
    int64_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += !m[i].dead;
    return k;
}

/* The first live model entry >= (key, rid), or n. */
static size_t model_lower(const ment *m, size_t n, const uint8_t *key, uint32_t klen, eng_rid rid)
{
    ment probe = {(uint8_t *)key, klen, rid, false};
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ment_cmp(&m[mid], &probe) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Seek to random points and compare with the model's lower bound. */
static void check_seeks(const ment *m, size_t n, int times)
{
    uint8_t buf[MM_BT_KEY_MAX];
    mm_bt_cursor *c;

    cr_assert_eq(mm_bt_cursor_open(bt, &c), 0);
    for (int s = 0; s < times; s++) {
        ment probe = {buf, 0, 0, false};
        int rc;
        probe.klen = gen_key(buf, &probe.rid);
        if (s % 3 == 0)
            probe.rid = 0;
        size_t lo = model_lower(m, n, probe.key, probe.klen, probe.rid);
        while (lo < n && m[lo].dead)
            lo++;
        rc = mm_bt_cursor_seek(c, buf, probe.klen, probe.rid);
        if (probe.klen == 0) {
            for (lo = 0; lo < n && m[lo].dead; lo++)
                ;
        }
        if (lo == n) {
            cr_assert_eq(rc, MD_NOTFOUND);
            continue;
        }
        cr_assert_eq(rc, 0);
        expect_at(c, m[lo].key, m[lo].klen, m[lo].rid);
    }
    mm_bt_cursor_close(c);
}

/* ---- basic behaviour ----------------------------------------------------- */

Test(mm_btree, empty_tree)
{
    mm_bt_cursor *c;

    open_tree();
    cr_assert_eq(mm_bt_entries(bt), 0);
    cr_assert_eq(mm_bt_buckets(bt), 0);
    validate_ok();
    cr_assert_eq(mm_bt_cursor_open(bt, &c), 0);
    cr_assert_eq(mm_bt_cursor_get(c, NULL, NULL, NULL), MD_NOTFOUND);
    cr_assert_eq(mm_bt_cursor_next(c), MD_NOTFOUND);
    cr_assert_eq(mm_bt_cursor_prev(c), MD_NOTFOUND);
    cr_assert_eq(mm_bt_cursor_seek(c, (const uint8_t *)"a", 1, 0), MD_NOTFOUND);
    cr_assert_eq(mm_bt_cursor_seek(c, NULL, 0, 0), MD_NOTFOUND);
    mm_bt_cursor_save(c);
    cr_assert_eq(mm_bt_cursor_restore(c), MD_NOTFOUND);
    mm_bt_cursor_close(c);
    cr_assert_eq(mm_bt_remove(bt, NULL, (const uint8_t *)"a", 1, 1), MD_NOTFOUND);
    cr_assert_eq(mm_bt_truncate(bt, NULL), 0);
    cr_assert_eq(tp->root, 0);
    commit_ok();
    cr_assert_eq(tp_live(tp), 0);
    close_tree();
}

Test(mm_btree, insert_and_lookup)
{
    mm_bt_cursor *c;

    open_tree();
    ins_str("banana", 3);
    ins_str("apple", 5);
    ins_str("apple", 2);
    ins_str("cherry", 1);
    ins_str("", 7);
    ins_str("ab", 9);
    ins_str("abc", 4);
    cr_assert_eq(mm_bt_entries(bt), 7);
    cr_assert_eq(mm_bt_buckets(bt), 1);
    cr_assert_eq(tp_live(tp), 1);
    validate_ok();
    commit_ok();

    cr_assert_eq(mm_bt_cursor_open(bt, &c), 0);
    cr_assert_eq(mm_bt_cursor_seek(c, (const uint8_t *)"apple", 5, 0), 0);
    expect_at(c, "apple", 5, 2);
    cr_assert_eq(mm_bt_cursor_next(c), 0);
    expect_at(c, "apple", 5, 5);
    cr_assert_eq(mm_bt_cursor_next(c), 0);
    expect_at(c, "banana", 6, 3);
    cr_assert_eq(mm_bt_cursor_seek(c, (const uint8_t *)"apple", 5, 3), 0);
    expect_at(c, "apple", 5, 5);
    /* shorter key first on a common prefix */
    cr_assert_eq(mm_bt_cursor_seek(c, (const uint8_t *)"ab", 2, 0), 0);
    expect_at(c, "ab", 2, 9);
    cr_assert_eq(mm_bt_cursor_next(c), 0);
    expect_at(c, "abc", 3, 4);
    cr_assert_eq(mm_bt_cursor_next(c), 0);
    expect_at(c, "apple", 5, 2);
    /* klen 0: the first entry of all, here the empty key */
    cr_assert_eq(mm_bt_cursor_seek(c, NULL, 0, 0), 0);
    expect_at(c, "", 0, 7);
    cr_assert_eq(mm_bt_cursor_seek(c, (const uint8_t *)"b", 1, 0), 0);
    expect_at(c, "banana", 6, 3);

    cr_assert_eq(mm_bt_remove(bt, NULL, (const uint8_t *)"apple", 5, 2), 0);
    cr_assert_eq(mm_bt_remove(bt, NULL, (const uint8_t *)"apple", 5, 2), MD_NOTFOUND);
    cr_assert_eq(mm_bt_remove(bt, NULL, (const uint8_t *)"apple", 5, 99), MD_NOTFOUND);
    cr_assert_eq(mm_bt_remove(bt, NULL, (const uint8_t *)"appl", 4, 5), MD_NOTFOUND);
    cr_assert_eq(mm_bt_entries(bt), 6);
    cr_assert_eq(mm_bt_cursor_seek(c, (const uint8_t *)"apple", 5, 0), 0);
    expect_at(c, "apple", 5, 5);
    mm_bt_cursor_close(c);
    validate_ok();
    commit_ok();
    close_tree();
}

/* An empty key next to a removed key: its slot must stay valid. */
Test(mm_btree, empty_key_survives_neighbour_removal)
{
    open_tree();
    ins_str("cherry", 1);
    ins_str("", 2);
    ins_str("", 3);
    cr_assert_eq(mm_bt_remove(bt, NULL, (const uint8_t *)"cherry", 6, 1), 0);
    validate_ok();
    ins_str("plum", 4);
    cr_assert_eq(mm_bt_remove(bt, NULL, (const uint8_t *)"", 0, 2), 0);
    validate_ok();
    cr_assert_eq(mm_bt_entries(bt), 2);
    commit_ok();
    close_tree();
}

/* The worked example in the header comment of mm_btree.c is real. */
Test(mm_btree, worked_example_matches_format_comment)
{
    static const uint8_t head[0x58] = {
        0x4d, 0x42, 0x54, 0x31, 0x00, 0x01, 0x02, 0x00, 0xed, 0x1f, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, [0x30] = 0xed, 0x1f, 0x02, 0x00, 0x00, 0x20, [0x44] = 0xef, 0x1f, 0x01,
        0x00, 0x00, 0x10};
    uint8_t *p;

    open_tree();
    ins_str("b", 0x1000);
    ins_str("ab", 0x2000);
    p = page(tp->root);
    cr_assert(memcmp(p, head, sizeof head) == 0);
    for (size_t o = sizeof head; o < 0x1fed; o++)
        cr_assert_eq(p[o], 0, "byte %#zx", o);
    cr_assert(memcmp(p + 0x1fed, "abb", 3) == 0);
    commit_ok();
    close_tree();
}

Test(mm_btree, key_too_long)
{
    uint8_t big[MM_BT_KEY_MAX + 100];
    md_error err;
    mm_bt_cursor *c;

    memset(big, 'k', sizeof big);
    open_tree();
    md_error_clear(&err);
    cr_assert_eq(mm_bt_insert(bt, NULL, big, MM_BT_KEY_MAX + 1, 1, false, NULL, &err),
                 MD_ETOOBIG);
    cr_assert_eq(err.code, MD_CODE_KEY_TOO_LONG);
    cr_assert_str_eq(err.code_name, "KeyTooLong");
    cr_assert(strstr(err.message, "key too large to index"), "%s", err.message);
    cr_assert(strstr(err.message, "1025"), "%s", err.message);
    cr_assert_eq(mm_bt_entries(bt), 0);
    cr_assert_eq(tp->root, 0);
    /* exactly MM_BT_KEY_MAX is accepted, eight of them need a split */
    for (int i = 0; i < 20; i++) {
        big[0] = (uint8_t)('a' + i);
        ins(big, MM_BT_KEY_MAX, i + 1);
    }
    cr_assert_eq(mm_bt_entries(bt), 20);
    cr_assert_gt(mm_bt_buckets(bt), 2);
    cr_assert_eq(mm_bt_remove(bt, NULL, big, MM_BT_KEY_MAX + 1, 20), MD_NOTFOUND);
    cr_assert_eq(mm_bt_cursor_open(bt, &c), 0);
    big[0] = 'a';
    cr_assert_eq(mm_bt_cursor_seek(c, big, MM_BT_KEY_MAX + 50, 0), 0);
    big[0] = 'b';
    expect_at(c, big, MM_BT_KEY_MAX, 2);
    mm_bt_cursor_close(c);
    validate_ok();
    commit_ok();
    close_tree();
}

Test(mm_btree, unique_detects_duplicates)
{
    md_error err;
    eng_rid dup = 0;

    open_tree();
    cr_assert_eq(mm_bt_insert(bt, NULL, (const uint8_t *)"k", 1, 10, true, &dup, &err), 0);
    cr_assert_eq(mm_bt_insert(bt, NULL, (const uint8_t *)"k", 1, 20, true, &dup, &err),
                 MD_EDUPKEY);
    cr_assert_eq(dup, 10);
    cr_assert_eq(err.code, MD_CODE_DUPLICATE_KEY);
    cr_assert_eq(mm_bt_insert(bt, NULL, (const uint8_t *)"k", 1, 5, true, &dup, &err),
                 MD_EDUPKEY);
    /* the same pair again is a no-op, unique or not */
    cr_assert_eq(mm_bt_insert(bt, NULL, (const uint8_t *)"k", 1, 10, true, &dup, &err), 0);
    cr_assert_eq(mm_bt_insert(bt, NULL, (const uint8_t *)"k", 1, 10, false, NULL, &err), 0);
    cr_assert_eq(mm_bt_entries(bt), 1);
    /* a prefix or an extension of the key is another key */
    cr_assert_eq(mm_bt_insert(bt, NULL, (const uint8_t *)"kk", 2, 20, true, &dup, &err), 0);
    cr_assert_eq(mm_bt_insert(bt, NULL, (const uint8_t *)"", 0, 20, true, &dup, &err), 0);
    cr_assert_eq(mm_bt_insert(bt, NULL, (const uint8_t *)"", 0, 21, true, &dup, &err),
                 MD_EDUPKEY);
    cr_assert_eq(dup, 20);
    /* non-unique inserts may add duplicates */
    cr_assert_eq(mm_bt_insert(bt, NULL, (const uint8_t *)"k", 1, 20, false, NULL, &err), 0);
    cr_assert_eq(mm_bt_entries(bt), 4);
    validate_ok();
    commit_ok();
    close_tree();
}

/* Every key of a multi-level unique tree is a duplicate for another rid,
 * wherever its entry sits relative to leaf boundaries. */
Test(mm_btree, unique_across_leaf_boundaries)
{
    uint8_t key[64];
    md_error err;
    eng_rid dup;
    const int n = 3000;

    open_tree();
    for (int i = 0; i < n; i++) {
        uint32_t kl = (uint32_t)snprintf((char *)key, sizeof key, "key-%08d-%030d", i * 2, i);
        cr_assert_eq(mm_bt_insert(bt, NULL, key, kl, 1000 + i, true, &dup, &err), 0);
    }
    cr_assert_geq(root_level(), 1);
    for (int i = 0; i < n; i++) {
        uint32_t kl = (uint32_t)snprintf((char *)key, sizeof key, "key-%08d-%030d", i * 2, i);
        dup = 0;
        cr_assert_eq(mm_bt_insert(bt, NULL, key, kl, 1, true, &dup, &err), MD_EDUPKEY);
        cr_assert_eq(dup, 1000 + i);
        cr_assert_eq(mm_bt_insert(bt, NULL, key, kl, 1 << 30, true, &dup, &err), MD_EDUPKEY);
        cr_assert_eq(dup, 1000 + i);
        cr_assert_eq(mm_bt_insert(bt, NULL, key, kl, 1000 + i, true, &dup, &err), 0);
        kl = (uint32_t)snprintf((char *)key, sizeof key, "key-%08d-%030d", i * 2 + 1, i);
        cr_assert_eq(mm_bt_insert(bt, NULL, key, kl, 1, true, &dup, &err), 0);
    }
    cr_assert_eq(mm_bt_entries(bt), 2 * n);
    validate_ok();
    commit_ok();
    close_tree();
}

/* ---- differential tests against the model -------------------------------- */

static void random_round_trip(bool remap)
{
    size_t n, order_n;
    ment *m = model_random(4000, &n);
    size_t *order;

    open_tree();
    tp->remap = remap;
    for (size_t i = 0; i < n; i++) {
        ins(m[i].key, m[i].klen, m[i].rid);
        if (i % 250 == 249)
            commit_ok();
        if (i % 1000 == 999)
            validate_ok();
    }
    n = model_sort(m, n);
    cr_assert_eq(mm_bt_entries(bt), (int64_t)n);
    cr_assert_geq(root_level(), 1);
    validate_ok();
    check_scan(m, n);
    check_seeks(m, n, 600);
    commit_ok();

    order = malloc(n * sizeof *order);
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    for (size_t i = n; i > 1; i--) {
        size_t j = rndn((uint32_t)i), x = order[i - 1];
        order[i - 1] = order[j];
        order[j] = x;
    }
    order_n = n;
    for (size_t i = 0; i < order_n; i++) {
        ment *e = &m[order[i]];
        cr_assert_eq(mm_bt_remove(bt, NULL, e->key, e->klen, e->rid), 0);
        cr_assert_eq(mm_bt_remove(bt, NULL, e->key, e->klen, e->rid), MD_NOTFOUND);
        e->dead = true;
        if (i % 300 == 299) {
            validate_ok();
            commit_ok();
            cr_assert_eq(mm_bt_entries(bt), live_count(m, n));
        }
        if (i % 1500 == 1499) {
            check_scan(m, n);
            check_seeks(m, n, 100);
        }
    }
    cr_assert_eq(mm_bt_entries(bt), 0);
    cr_assert_eq(mm_bt_buckets(bt), 0);
    cr_assert_eq(tp->root, 0);
    validate_ok();
    commit_ok();
    cr_assert_eq(tp_live(tp), 0, "%zu buckets leaked", tp_live(tp));
    free(order);
    model_free(m, n);
    close_tree();
}

/* Keys of a few shapes for the search's interpolated guess (node_search):
 * evenly spaced numbers, numbers spread over many powers of two, strings
 * sharing a long prefix with varying lengths, and numbers encoded as the
 * query layer's keys are (exponent bytes, then the mantissa). */
static uint32_t shaped_key(int shape, uint64_t i, uint8_t *buf)
{
    switch (shape) {
    case 0: return num_key(buf, i * 3);
    case 1: return num_key(buf, (uint64_t)1 << (i % 60) | i);
    case 2: return (uint32_t)snprintf((char *)buf, 64, "user/%llu", (unsigned long long)(i * 7919 % 5000));
    default: {
        uint64_t v = i * 37 + 1;
        int z = __builtin_clzll(v);
        unsigned e = (unsigned)(64 - z + 32768);
        buf[0] = 0x05;
        buf[1] = (uint8_t)(e >> 8);
        buf[2] = (uint8_t)e;
        return 3 + num_key(buf + 3, v << z);
    }
    }
}

Test(mm_btree, finds_and_seeks_match_the_model_for_shaped_keys)
{
    enum { N = 3000 };
    uint8_t buf[MM_BT_KEY_MAX];
    for (int shape = 0; shape < 4; shape++) {
        ment *m = calloc(N + N / 10, sizeof *m);
        size_t n = 0;
        cr_assert(m);
        for (uint64_t i = 0; i < N; i++) {
            uint32_t kl = shaped_key(shape, i, buf);
            for (int dup = 0; dup < (i % 10 == 0 ? 2 : 1); dup++) {
                m[n].klen = kl;
                m[n].key = malloc(kl);
                memcpy(m[n].key, buf, kl);
                m[n].rid = (eng_rid)(1 + i + 100000 * (uint64_t)dup);
                n++;
            }
        }
        for (size_t i = n; i > 1; i--) { /* insert in a random order */
            size_t j = rndn((uint32_t)i);
            ment x = m[i - 1];
            m[i - 1] = m[j];
            m[j] = x;
        }
        open_tree();
        for (size_t i = 0; i < n; i++)
            ins(m[i].key, m[i].klen, m[i].rid);
        n = model_sort(m, n);
        validate_ok();
        check_scan(m, n);
        mm_bt_cursor *c;
        cr_assert_eq(mm_bt_cursor_open(bt, &c), 0);
        for (int s = 0; s < 3000; s++) {
            uint32_t kl;
            if (s % 2 == 0) { /* a key present */
                const ment *e = &m[rndn((uint32_t)n)];
                memcpy(buf, e->key, e->klen);
                kl = e->klen;
            } else { /* mostly absent: beyond the keys, or between them */
                kl = shaped_key(shape, rndn(4 * N), buf);
                if (s % 6 == 1 && kl > 0)
                    buf[kl - 1] ^= 1;
            }
            size_t lo = model_lower(m, n, buf, kl, ENG_RID_NONE);
            eng_rid rid = 0;
            int rc = mm_bt_find(bt, buf, kl, &rid);
            if (lo < n && m[lo].klen == kl && memcmp(m[lo].key, buf, kl) == 0) {
                cr_assert_eq(rc, 0, "shape %d probe %d: not found", shape, s);
                cr_assert_eq(rid, m[lo].rid, "shape %d probe %d", shape, s);
            } else {
                cr_assert_eq(rc, MD_NOTFOUND, "shape %d probe %d: found %lld", shape, s,
                             (long long)rid);
            }
            eng_rid srid = (eng_rid)rndn(200000);
            lo = model_lower(m, n, buf, kl, srid);
            rc = mm_bt_cursor_seek(c, buf, kl, srid);
            if (lo == n) {
                cr_assert_eq(rc, MD_NOTFOUND, "shape %d probe %d", shape, s);
            } else {
                cr_assert_eq(rc, 0, "shape %d probe %d", shape, s);
                expect_at(c, m[lo].key, m[lo].klen, m[lo].rid);
            }
        }
        mm_bt_cursor_close(c);
        model_free(m, n);
        close_tree();
    }
}

Test(mm_btree, random_keys_match_sorted_model)
{
    random_round_trip(false);
}

Test(mm_btree, random_keys_with_remap_on_every_alloc)
{
    rng = 0x1234567887654321ull;
    random_round_trip(true);
}

/* Keys near 1 KB: 7 per bucket, so a few hundred give 3+ levels, and one
 * insert may split a leaf, its parent and the root at once.  Validate after
 * each of the first 120 inserts and every 25th one after that. */
Test(mm_btree, cascading_splits_three_levels)
{
    uint8_t key[1000];
    size_t n = 0;
    ment *m = calloc(700, sizeof *m);
    unsigned levels = 0, grew = 0;

    open_tree();
    memset(key, 'x', sizeof key);
    for (int i = 0; i < 700; i++) {
        uint32_t v = rndn(1u << 30);
        num_key(key, v);
        ins(key, sizeof key, i + 1);
        if (root_level() > levels) {
            levels = root_level();
            grew++;
        }
        if (i < 120 || i % 25 == 0)
            validate_ok();
        m[n].key = malloc(sizeof key);
        memcpy(m[n].key, key, sizeof key);
        m[n].klen = sizeof key;
        m[n++].rid = i + 1;
    }
    cr_assert_geq(levels, 2, "root level %u", levels);
    cr_assert_eq(grew, levels);
    n = model_sort(m, n);
    validate_ok();
    check_scan(m, n);
    commit_ok();
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(mm_bt_remove(bt, NULL, m[i].key, m[i].klen, m[i].rid), 0);
        m[i].dead = true;
        if (i % 20 == 0)
            validate_ok();
    }
    cr_assert_eq(tp->root, 0);
    commit_ok();
    cr_assert_eq(tp_live(tp), 0);
    model_free(m, n);
    close_tree();
}

/* Ascending inserts split 90/10, so leaves stay nearly full. */
Test(mm_btree, ascending_inserts_fill_buckets)
{
    uint8_t key[8];
    const int n = 20000;
    int64_t buckets;
    mm_bt_cursor *c;

    open_tree();
    for (int i = 0; i < n; i++)
        ins(key, num_key(key, (uint64_t)i * 7), i + 1);
    buckets = mm_bt_buckets(bt);
    /* 28 bytes an entry, 290 a bucket when full: about 77 leaves at 90% */
    cr_assert_leq(buckets, 90, "%lld buckets", (long long)buckets);
    cr_assert_eq((size_t)buckets, tp_live(tp));
    validate_ok();
    cr_assert_eq(mm_bt_cursor_open(bt, &c), 0);
    for (int i = 0; i < n; i++) {
        cr_assert_eq(mm_bt_cursor_next(c), 0);
        expect_at(c, key, num_key(key, (uint64_t)i * 7), i + 1);
    }
    cr_assert_eq(mm_bt_cursor_next(c), MD_NOTFOUND);
    mm_bt_cursor_close(c);
    /* descending inserts work too (a plain half split) */
    for (int i = n; i > 0; i--)
        ins(key, num_key(key, (uint64_t)i * 7 + 3), i);
    cr_assert_eq(mm_bt_entries(bt), 2 * n);
    validate_ok();
    commit_ok();
    close_tree();
}

/* A non-unique index with 10k entries of one key. */
Test(mm_btree, ten_thousand_duplicates_of_one_key)
{
    const char *k = "same-key-for-everyone";
    uint32_t kl = (uint32_t)strlen(k);
    const int n = 10000;
    eng_rid *rids = malloc(n * sizeof *rids), dup = 0;
    mm_bt_cursor *c;
    md_error err;

    open_tree();
    for (int i = 0; i < n; i++)
        rids[i] = i + 1;
    for (int i = n; i > 1; i--) {
        int j = (int)rndn((uint32_t)i);
        eng_rid x = rids[i - 1];
        rids[i - 1] = rids[j];
        rids[j] = x;
    }
    for (int i = 0; i < n; i++)
        ins(k, kl, rids[i]);
    cr_assert_eq(mm_bt_entries(bt), n);
    cr_assert_geq(root_level(), 1);
    validate_ok();
    commit_ok();
    cr_assert_eq(mm_bt_cursor_open(bt, &c), 0);
    cr_assert_eq(mm_bt_cursor_seek(c, (const uint8_t *)k, kl, 0), 0);
    for (int i = 1; i <= n; i++) {
        expect_at(c, k, kl, i);
        cr_assert_eq(mm_bt_cursor_next(c), i < n ? 0 : MD_NOTFOUND);
    }
    cr_assert_eq(mm_bt_cursor_seek(c, (const uint8_t *)k, kl, 5000), 0);
    expect_at(c, k, kl, 5000);
    mm_bt_cursor_close(c);
    cr_assert_eq(mm_bt_insert(bt, NULL, (const uint8_t *)k, kl, n + 1, true, &dup, &err),
                 MD_EDUPKEY);
    cr_assert_eq(dup, 1);
    for (int i = 0; i < n; i++) {
        cr_assert_eq(mm_bt_remove(bt, NULL, (const uint8_t *)k, kl, rids[i]), 0);
        if (i % 2000 == 0)
            validate_ok();
    }
    cr_assert_eq(tp->root, 0);
    commit_ok();
    cr_assert_eq(tp_live(tp), 0);
    free(rids);
    close_tree();
}

/* ---- cursors ------------------------------------------------------------- */

static void fill_even(int n)
{
    uint8_t key[8];
    for (int i = 0; i < n; i++)
        ins(key, num_key(key, (uint64_t)i * 2), i + 1);
}

Test(mm_btree, cursor_ends_and_seeks)
{
    uint8_t key[8];
    const int n = 3000;
    mm_bt_cursor *c, *d;

    open_tree();
    fill_even(n);
    cr_assert_geq(mm_bt_buckets(bt), 3);
    cr_assert_eq(mm_bt_cursor_open(bt, &c), 0);
    /* between keys: the next greater one */
    for (int i = 0; i < n - 1; i += 97) {
        cr_assert_eq(mm_bt_cursor_seek(c, key, num_key(key, (uint64_t)i * 2 + 1), 0), 0);
        expect_at(c, key, num_key(key, (uint64_t)i * 2 + 2), i + 2);
    }
    /* exact key with a larger rid: the next key */
    cr_assert_eq(mm_bt_cursor_seek(c, key, num_key(key, 10), 999999), 0);
    expect_at(c, key, num_key(key, 12), 7);
    /* past the end: rests there; prev gives the last entry */
    cr_assert_eq(mm_bt_cursor_seek(c, key, num_key(key, (uint64_t)n * 2), 0), MD_NOTFOUND);
    cr_assert_eq(mm_bt_cursor_get(c, NULL, NULL, NULL), MD_NOTFOUND);
    cr_assert_eq(mm_bt_cursor_next(c), MD_NOTFOUND);
    cr_assert_eq(mm_bt_cursor_prev(c), 0);
    expect_at(c, key, num_key(key, (uint64_t)(n - 1) * 2), n);
    cr_assert_eq(mm_bt_cursor_next(c), MD_NOTFOUND);
    cr_assert_eq(mm_bt_cursor_prev(c), 0);
    expect_at(c, key, num_key(key, (uint64_t)(n - 1) * 2), n);
    /* off the start: next gives the first entry */
    cr_assert_eq(mm_bt_cursor_seek(c, NULL, 0, 0), 0);
    expect_at(c, key, num_key(key, 0), 1);
    cr_assert_eq(mm_bt_cursor_prev(c), MD_NOTFOUND);
    cr_assert_eq(mm_bt_cursor_get(c, NULL, NULL, NULL), MD_NOTFOUND);
    cr_assert_eq(mm_bt_cursor_prev(c), MD_NOTFOUND);
    cr_assert_eq(mm_bt_cursor_next(c), 0);
    expect_at(c, key, num_key(key, 0), 1);
    /* a fresh cursor: next gives the first entry, prev the last */
    cr_assert_eq(mm_bt_cursor_open(bt, &d), 0);
    cr_assert_eq(mm_bt_cursor_prev(d), 0);
    expect_at(d, key, num_key(key, (uint64_t)(n - 1) * 2), n);
    mm_bt_cursor_close(d);
    cr_assert_eq(mm_bt_cursor_open(bt, &d), 0);
    cr_assert_eq(mm_bt_cursor_next(d), 0);
    expect_at(d, key, num_key(key, 0), 1);
    mm_bt_cursor_close(d);
    /* a full backward walk crosses every leaf */
    cr_assert_eq(mm_bt_cursor_seek(c, key, num_key(key, 1ull << 40), 0), MD_NOTFOUND);
    for (int i = n; i >= 1; i--) {
        cr_assert_eq(mm_bt_cursor_prev(c), 0);
        expect_at(c, key, num_key(key, (uint64_t)(i - 1) * 2), i);
    }
    cr_assert_eq(mm_bt_cursor_prev(c), MD_NOTFOUND);
    mm_bt_cursor_close(c);
    commit_ok();
    close_tree();
}

/* Saved entry survives splits of its bucket. */
Test(mm_btree, save_restore_across_splits)
{
    uint8_t key[200];
    mm_bt_cursor *c;

    open_tree();
    memset(key, 'p', sizeof key);
    for (int i = 0; i < 200; i++)
        ins(key, num_key(key, (uint64_t)i * 1000) + 100, i + 1);
    cr_assert_eq(mm_bt_cursor_open(bt, &c), 0);
    cr_assert_eq(mm_bt_cursor_seek(c, key, num_key(key, 100 * 1000) + 100, 0), 0);
    mm_bt_cursor_save(c);
    /* pile entries on both sides of the saved one: its leaf splits often */
    for (int i = 1; i < 999; i++) {
        ins(key, num_key(key, 100 * 1000 - i) + 100, 5000 + i);
        ins(key, num_key(key, 100 * 1000 + i) + 100, 9000 + i);
    }
    cr_assert_gt(mm_bt_buckets(bt), 30);
    cr_assert_eq(mm_bt_cursor_restore(c), 0);
    expect_at(c, key, num_key(key, 100 * 1000) + 100, 101);
    cr_assert_eq(mm_bt_cursor_next(c), 0);
    expect_at(c, key, num_key(key, 100 * 1000 + 1) + 100, 9001);
    cr_assert_eq(mm_bt_cursor_prev(c), 0);
    cr_assert_eq(mm_bt_cursor_prev(c), 0);
    expect_at(c, key, num_key(key, 100 * 1000 - 1) + 100, 5001);
    mm_bt_cursor_close(c);
    validate_ok();
    commit_ok();
    close_tree();
}

/* Saved entry removed, its whole bucket freed and reused. */
Test(mm_btree, save_restore_across_removal_of_the_bucket)
{
    uint8_t key[8];
    const int n = 3000;
    mm_bt_cursor *c;
    int64_t buckets;

    open_tree();
    fill_even(n);
    commit_ok();
    cr_assert_eq(mm_bt_cursor_open(bt, &c), 0);
    /* removed entry: restore lands on the next greater one */
    cr_assert_eq(mm_bt_cursor_seek(c, key, num_key(key, 1000), 0), 0);
    mm_bt_cursor_save(c);
    cr_assert_eq(mm_bt_remove(bt, NULL, key, num_key(key, 1000), 501), 0);
    cr_assert_eq(mm_bt_cursor_restore(c), 0);
    expect_at(c, key, num_key(key, 1002), 502);
    /* remove a wide range around the saved entry: its buckets are freed */
    buckets = mm_bt_buckets(bt);
    mm_bt_cursor_save(c);
    for (int i = 300; i < 2000; i++)
        if (i != 500)
            cr_assert_eq(mm_bt_remove(bt, NULL, key, num_key(key, (uint64_t)i * 2), i + 1), 0);
    cr_assert_lt(mm_bt_buckets(bt), buckets - 3);
    /* and reuse the freed buckets for other keys */
    for (int i = 0; i < 2000; i++)
        ins(key, num_key(key, 1000000 + (uint64_t)i), 50000 + i);
    validate_ok();
    cr_assert_eq(mm_bt_cursor_restore(c), 0);
    expect_at(c, key, num_key(key, 4000), 2001);
    cr_assert_eq(mm_bt_cursor_prev(c), 0);
    expect_at(c, key, num_key(key, 598), 300);
    /* saved last entry removed with everything after it: rests past the end */
    cr_assert_eq(mm_bt_cursor_seek(c, key, num_key(key, 1000000 + 1999), 0), 0);
    mm_bt_cursor_save(c);
    for (int i = 1990; i < 2000; i++)
        cr_assert_eq(mm_bt_remove(bt, NULL, key, num_key(key, 1000000 + (uint64_t)i),
                                  50000 + i), 0);
    cr_assert_eq(mm_bt_cursor_restore(c), MD_NOTFOUND);
    cr_assert_eq(mm_bt_cursor_get(c, NULL, NULL, NULL), MD_NOTFOUND);
    cr_assert_eq(mm_bt_cursor_prev(c), 0);
    expect_at(c, key, num_key(key, 1000000 + 1989), 51989);
    /* saved while resting past either end */
    cr_assert_eq(mm_bt_cursor_next(c), MD_NOTFOUND);
    mm_bt_cursor_save(c);
    ins(key, num_key(key, 5), 77);
    cr_assert_eq(mm_bt_cursor_restore(c), MD_NOTFOUND);
    cr_assert_eq(mm_bt_cursor_prev(c), 0);
    expect_at(c, key, num_key(key, 1000000 + 1989), 51989);
    cr_assert_eq(mm_bt_cursor_seek(c, NULL, 0, 0), 0);
    cr_assert_eq(mm_bt_cursor_prev(c), MD_NOTFOUND);
    mm_bt_cursor_save(c);
    cr_assert_eq(mm_bt_remove(bt, NULL, key, num_key(key, 0), 1), 0);
    cr_assert_eq(mm_bt_cursor_restore(c), MD_NOTFOUND);
    cr_assert_eq(mm_bt_cursor_next(c), 0);
    expect_at(c, key, num_key(key, 2), 2);
    mm_bt_cursor_close(c);
    validate_ok();
    commit_ok();
    close_tree();
}

/* Saved across a truncate and a refill that reuses every bucket. */
Test(mm_btree, save_restore_across_truncate)
{
    uint8_t key[8];
    mm_bt_cursor *c;

    open_tree();
    fill_even(2000);
    cr_assert_eq(mm_bt_cursor_open(bt, &c), 0);
    cr_assert_eq(mm_bt_cursor_seek(c, key, num_key(key, 2000), 0), 0);
    mm_bt_cursor_save(c);
    cr_assert_eq(mm_bt_truncate(bt, NULL), 0);
    commit_ok();
    for (int i = 0; i < 2000; i++)
        ins(key, num_key(key, (uint64_t)i * 3), 100000 + i);
    cr_assert_eq(mm_bt_cursor_restore(c), 0);
    expect_at(c, key, num_key(key, 2001), 100667);
    mm_bt_cursor_close(c);
    commit_ok();
    close_tree();
}

/* ---- truncate, reopen, rollback ------------------------------------------ */

Test(mm_btree, truncate_frees_every_bucket)
{
    uint8_t key[600];

    open_tree();
    memset(key, 'q', sizeof key);
    for (int i = 0; i < 600; i++)
        ins(key, num_key(key, rndn(1u << 20)) + 592, i + 1);
    cr_assert_geq(root_level(), 2);
    commit_ok();
    cr_assert_gt(tp_live(tp), 50);
    cr_assert_eq(mm_bt_truncate(bt, NULL), 0);
    cr_assert_eq(tp->root, 0);
    cr_assert_eq(mm_bt_entries(bt), 0);
    cr_assert_eq(mm_bt_buckets(bt), 0);
    validate_ok();
    commit_ok();
    cr_assert_eq(tp_live(tp), 0);
    ins_str("again", 1);
    cr_assert_eq(mm_bt_entries(bt), 1);
    validate_ok();
    commit_ok();
    close_tree();
}

Test(mm_btree, reopen_from_root_alone)
{
    size_t n;
    ment *m = model_random(2500, &n);

    open_tree();
    for (size_t i = 0; i < n; i++)
        ins(m[i].key, m[i].klen, m[i].rid);
    commit_ok();
    mm_bt_close(bt);
    /* a fresh handle over the same pager: nothing but the root persists */
    cr_assert_eq(mm_bt_open(&tp->pager, &bt), 0);
    n = model_sort(m, n);
    cr_assert_eq(mm_bt_entries(bt), (int64_t)n);
    validate_ok();
    check_scan(m, n);
    for (size_t i = 0; i < n; i += 2) {
        cr_assert_eq(mm_bt_remove(bt, NULL, m[i].key, m[i].klen, m[i].rid), 0);
        m[i].dead = true;
    }
    validate_ok();
    check_scan(m, n);
    commit_ok();
    model_free(m, n);
    close_tree();
}

/* Abort restores only what was declared: the tree must come back whole. */
Test(mm_btree, abort_restores_tree_exactly)
{
    size_t n;
    ment *m = model_random(2000, &n);
    uint8_t key[MM_BT_KEY_MAX];
    mm_bt_loc root;

    open_tree();
    for (size_t i = 0; i < n; i++)
        ins(m[i].key, m[i].klen, m[i].rid);
    n = model_sort(m, n);
    commit_ok();
    root = tp->root;
    for (int i = 0; i < 1500; i++) {
        eng_rid rid;
        uint32_t kl = gen_key(key, &rid);
        ins(key, kl, rid + 2000000);
        if (i % 3 == 0) {
            size_t j = rndn((uint32_t)n);
            (void)mm_bt_remove(bt, NULL, m[j].key, m[j].klen, m[j].rid);
        }
    }
    cr_assert_gt(mm_bt_entries(bt), (int64_t)n);
    tp_abort(tp);
    cr_assert_eq(tp->violations, 0, "%s", tp->first_violation);
    cr_assert_eq(tp->root, root);
    validate_ok();
    check_scan(m, n);
    /* an abort of removes that empty the whole tree */
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(mm_bt_remove(bt, NULL, m[i].key, m[i].klen, m[i].rid), 0);
    cr_assert_eq(tp->root, 0);
    tp_abort(tp);
    cr_assert_eq(tp->violations, 0, "%s", tp->first_violation);
    validate_ok();
    check_scan(m, n);
    model_free(m, n);
    close_tree();
}

/* A failed allocation mid-split returns the pager's error; abort restores. */
Test(mm_btree, allocation_failure_then_abort)
{
    uint8_t key[900];
    md_error err;
    int failures = 0;

    open_tree();
    tp->fail_at = 0;
    cr_assert_eq(mm_bt_insert(bt, NULL, (const uint8_t *)"x", 1, 1, false, NULL, &err),
                 MD_ENOSPC);
    tp_abort(tp);
    cr_assert_eq(tp->root, 0);
    tp->fail_at = -1;
    memset(key, 'f', sizeof key);
    for (int i = 0; i < 300; i++)
        ins(key, num_key(key, rndn(1u << 24)) + 892, i + 1);
    commit_ok();
    cr_assert_geq(root_level(), 2);
    for (int round = 0; round < 40; round++) {
        int64_t entries = mm_bt_entries(bt);
        int rc = 0;
        tp->fail_at = tp->allocs + round % 3;
        for (int i = 0; i < 50 && rc == 0; i++)
            rc = mm_bt_insert(bt, NULL, key, num_key(key, rndn(1u << 24)) + 892,
                              1000 + round * 100 + i, false, NULL, &err);
        if (rc) {
            cr_assert_eq(rc, MD_ENOSPC);
            failures++;
        }
        tp_abort(tp);
        cr_assert_eq(tp->violations, 0, "%s", tp->first_violation);
        cr_assert_eq(mm_bt_entries(bt), entries);
        validate_ok();
    }
    cr_assert_gt(failures, 30);
    tp->fail_at = -1;
    close_tree();
}

/* The checker itself: an undeclared change is caught. */
Test(mm_btree, pager_catches_undeclared_writes)
{
    open_tree();
    ins_str("a", 1);
    commit_ok();
    page(tp->root)[100] ^= 1;
    tp_commit(tp);
    cr_assert_eq(tp->violations, 1);
    close_tree();
}

/* ---- corruption ---------------------------------------------------------- */

/* n ascending 200-byte keys: a handful of leaves under one root. */
static void build_small(int n)
{
    uint8_t key[200];
    memset(key, 'c', sizeof key);
    for (int i = 0; i < n; i++)
        ins(key, num_key(key, (uint64_t)i * 10) + 192, i + 1);
    commit_ok();
}

/* Scan both ways: must end (at an end or on corruption), never loop. */
static int scan_all(bool fwd)
{
    mm_bt_cursor *c;
    int rc, steps = 0;

    cr_assert_eq(mm_bt_cursor_open(bt, &c), 0);
    do {
        rc = fwd ? mm_bt_cursor_next(c) : mm_bt_cursor_prev(c);
        if (rc == 0)
            (void)mm_bt_cursor_get(c, NULL, NULL, NULL);
        cr_assert_lt(++steps, 100000, "scan does not end");
    } while (rc == 0);
    mm_bt_cursor_close(c);
    return rc;
}

/* validate reports it; ops give MD_ECORRUPT or work, never crash. */
static void expect_detected(const char *what, bool scan_fails)
{
    char msg[1024];
    int n = validate_errors(msg, sizeof msg);

    cr_assert_gt(n, 0, "validate missed: %s", what);
    cr_log_info("%s -> %s", what, msg);
    if (scan_fails) {
        cr_assert_eq(scan_all(true), MD_ECORRUPT, "%s: forward scan", what);
        cr_assert_eq(scan_all(false), MD_ECORRUPT, "%s: backward scan", what);
    } else {
        (void)scan_all(true);
        (void)scan_all(false);
    }
    (void)mm_bt_entries(bt);
    (void)mm_bt_buckets(bt);
}

static uint8_t *slot(uint8_t *p, unsigned i)
{
    return p + TB_HDR + i * TB_SLOT;
}

Test(mm_btree, validate_detects_corruption)
{
    mm_bt_loc leaves[64];
    size_t nl;
    uint8_t *p, save[MM_BUCKET_SIZE], key[200];
    uint32_t klen;
    eng_rid rid;
    md_error err;

    open_tree();
    build_small(200);
    nl = leaf_chain(leaves, 64);
    cr_assert_geq(nl, 4);
    validate_ok();

#define CORRUPT(loc, stmt, what, scan_fails)                                              \
    do {                                                                                   \
        p = page(loc);                                                                     \
        memcpy(save, p, MM_BUCKET_SIZE);                                                   \
        stmt;                                                                              \
        expect_detected(what, scan_fails);                                                 \
        memcpy(page(loc), save, MM_BUCKET_SIZE);                                           \
        validate_ok();                                                                     \
    } while (0)

    CORRUPT(leaves[1], p[TB_N] = 0xff; p[TB_N + 1] = 0x7f, "bad n", true);
    CORRUPT(leaves[1], p[TB_N] = 0; p[TB_N + 1] = 0, "non-root leaf emptied", false);
    CORRUPT(leaves[1], slot(p, 3)[TS_KOFS] = 0xf0; slot(p, 3)[TS_KOFS + 1] = 0x1f,
            "key offset past the end", true);
    CORRUPT(leaves[1], slot(p, 3)[TS_KOFS] = 0x10; slot(p, 3)[TS_KOFS + 1] = 0,
            "key offset inside the header", true);
    CORRUPT(leaves[1], memcpy(slot(p, 3), slot(p, 4), 4), "overlapping keys", false);
    CORRUPT(leaves[1], slot(p, 3)[TS_KLEN + 1] = 0x20, "key length 8 KB", true);
    CORRUPT(leaves[1], memcpy(key, slot(p, 2), TB_SLOT);
            memcpy(slot(p, 2), slot(p, 5), TB_SLOT); memcpy(slot(p, 5), key, TB_SLOT),
            "keys out of order in a leaf", true);
    CORRUPT(leaves[2], p[hdr16(slot(p, 2), TS_KOFS)] ^= 0xff, "key bytes changed", true);
    CORRUPT(leaves[1], p[0] = 'X', "bad magic", true);
    CORRUPT(leaves[1], p[TB_LEVEL] = 3, "leaf with a level", true);
    CORRUPT(leaves[2], put_hdr64(p, TB_NEXT, leaves[0]), "sibling cycle", true);
    CORRUPT(leaves[2], put_hdr64(p, TB_NEXT, leaves[2]), "sibling self loop", true);
    CORRUPT(leaves[2], put_hdr64(p, TB_PREV, 0), "broken prev link", false);
    CORRUPT(leaves[2], put_hdr64(p, TB_PARENT, leaves[0]), "wrong parent", false);
    CORRUPT(tp->root, put_hdr64(slot(p, 0), TS_CHILD, tp->root), "child is itself", false);
    CORRUPT(tp->root, put_hdr64(slot(p, 0), TS_CHILD, 0xdead0000ull), "child not a bucket",
            false);
    CORRUPT(tp->root, put_hdr64(slot(p, 1), TS_CHILD, hdr64(p, TB_HDR + TS_CHILD)),
            "repeated child", false);
    CORRUPT(tp->root, memcpy(slot(p, 0) + TS_RID, slot(p, 1) + TS_RID, 8);
            memcpy(slot(p, 0), slot(p, 1), 4), "separators out of order", false);
    CORRUPT(tp->root, put_hdr64(p, TB_RIGHT, 0), "no right child", false);
    CORRUPT(tp->root, p[TB_LEVEL] = 0; p[TB_LEVEL + 1] = 1, "root says leaf", false);

    /* operations on a corrupted leaf report MD_ECORRUPT with the code */
    p = page(leaves[1]);
    memcpy(save, p, MM_BUCKET_SIZE);
    klen = hdr16(slot(p, 0), TS_KLEN);
    memcpy(key, p + hdr16(slot(p, 0), TS_KOFS), klen);
    rid = (eng_rid)hdr64(slot(p, 0), TS_RID);
    p[TB_N] = 0xff;
    p[TB_N + 1] = 0x7f;
    md_error_clear(&err);
    cr_assert_eq(mm_bt_insert(bt, NULL, key, klen, rid + 1, false, NULL, &err), MD_ECORRUPT);
    cr_assert_eq(err.code, MD_CODE_DATA_CORRUPTION_DETECTED);
    cr_assert(strstr(err.message, "btree"), "%s", err.message);
    cr_assert_eq(mm_bt_remove(bt, NULL, key, klen, rid), MD_ECORRUPT);
    cr_assert_lt(mm_bt_entries(bt), 0);
    cr_assert_eq(mm_bt_truncate(bt, NULL), MD_ECORRUPT);
    cr_assert_neq(tp->root, 0, "a failed truncate frees nothing");
    memcpy(p, save, MM_BUCKET_SIZE);
    validate_ok();
    commit_ok();
    close_tree();
}

/* Random byte damage: no crash, no endless loop, no undeclared write; and
 * damage to headers and slots is nearly always reported by validate. */
Test(mm_btree, random_damage_never_crashes)
{
    uint8_t key[300];
    int detected = 0;

    for (int round = 0; round < 150; round++) {
        open_tree();
        rng = 0xabcdef12345ull + (uint64_t)round * 7919;
        memset(key, 'z', sizeof key);
        for (int i = 0; i < 150; i++)
            ins(key, num_key(key, rndn(100000)) + rndn(280), i + 1);
        commit_ok();
        for (int k = 1 + (int)rndn(6); k > 0; k--) {
            size_t i = rndn((uint32_t)tp->n);
            uint32_t o = round % 2 ? rndn(MM_BUCKET_SIZE) : rndn(TB_HDR + 40 * TB_SLOT);
            if (tp->pg[i].state == TP_LIVE)
                tp->pg[i].p[o] ^= (uint8_t)(1 + rndn(255));
        }
        tp_accept(tp);
        detected += round % 2 == 0 && validate_errors(NULL, 0) > 0;
        (void)scan_all(true);
        (void)scan_all(false);
        (void)mm_bt_entries(bt);
        (void)mm_bt_buckets(bt);
        for (int i = 0; i < 60; i++) {
            uint32_t kl = num_key(key, rndn(100000)) + rndn(280);
            mm_bt_cursor *c;
            if (i % 3 == 0)
                (void)mm_bt_insert(bt, NULL, key, kl, 500 + i, i % 2, NULL, NULL);
            else if (i % 3 == 1)
                (void)mm_bt_remove(bt, NULL, key, kl, rndn(150));
            cr_assert_eq(mm_bt_cursor_open(bt, &c), 0);
            if (mm_bt_cursor_seek(c, key, kl, 0) == 0) {
                mm_bt_cursor_save(c);
                (void)mm_bt_cursor_restore(c);
                (void)mm_bt_cursor_next(c);
                (void)mm_bt_cursor_prev(c);
            }
            mm_bt_cursor_close(c);
        }
        (void)validate_errors(NULL, 0);
        (void)mm_bt_truncate(bt, NULL);
        tp_commit(tp);
        cr_assert_eq(tp->violations, 0, "round %d: %s", round, tp->first_violation);
        close_tree();
    }
    cr_assert_gt(detected, 50, "validate noticed %d of 75 damaged trees", detected);
}
