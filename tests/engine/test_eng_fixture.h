/*
 * test_eng_fixture.h -- the fixture shared by the engine suites written once
 * and run on every engine (test_contract.c, test_eng_capped.c): a
 * Criterion parameter per engine name, the engine opened on a fresh mkdtemp
 * directory (tiny files for mmapv1), reopened in place, closed and removed
 * afterwards, and assertion macros whose messages start with the engine
 * name.
 *
 * The including file defines, before including it:
 *   ENG_FX_DIR            mkdtemp template, e.g. "/tmp/md_contract_XXXXXX"
 *   ENG_FX_FIRST_FILE     mmapv1 firstFileSize in bytes
 *   ENG_FX_CAPPED_EXTENT  mmapv1 debugCappedExtentSize in bytes (optional)
 * Each test file includes it once, so the fixture's state is per file.
 */
#ifndef TEST_ENG_FIXTURE_H
#define TEST_ENG_FIXTURE_H

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eng.h"

typedef struct eng_param {
    char name[32];
} eng_param;

static const eng_ops *OPS;
static const char *NAME = "?";
static char DIR_[64];
static eng_engine *E;
static md_error ERR;

/* One parameter per registered engine; with `only` (NULL-terminated names),
 * per registered engine among those. */
static struct criterion_test_params engine_params_of(const char *const *only)
{
    static eng_param params[16];
    size_t n = 0;
    for (const eng_ops *const *o = eng_engines(); *o && n < 16; o++) {
        bool in = only == NULL;
        for (const char *const *c = only; c && *c && !in; c++)
            in = strcmp(*c, (*o)->name) == 0;
        if (in)
            snprintf(params[n++].name, sizeof params[0].name, "%s", (*o)->name);
    }
    return cr_make_param_array(eng_param, params, n);
}

#define CHECK(cond, fmt, ...) cr_assert((cond), "[%s] " fmt, NAME, ##__VA_ARGS__)
#define RC(x, want) \
    do { \
        int rc_ = (x); \
        CHECK(rc_ == (want), "%s -> %s, want %s (%s)", #x, md_strerror(rc_), \
              md_strerror(want), ERR.message); \
    } while (0)
#define OK(x) RC(x, 0)
#define EQ(a, b) \
    do { \
        long long a_ = (long long)(a), b_ = (long long)(b); \
        CHECK(a_ == b_, "%s is %lld, want %s = %lld", #a, a_, #b, b_); \
    } while (0)

static void engine_open(void)
{
    bson_t opts = BSON_INITIALIZER, sub;
    BSON_APPEND_DOCUMENT_BEGIN(&opts, "mmapv1", &sub);
    BSON_APPEND_INT32(&sub, "firstFileSize", ENG_FX_FIRST_FILE);
    BSON_APPEND_INT32(&sub, "nsSize", 65536);
#ifdef ENG_FX_CAPPED_EXTENT
    BSON_APPEND_INT32(&sub, "debugCappedExtentSize", ENG_FX_CAPPED_EXTENT);
#endif
    bson_append_document_end(&opts, &sub);
    md_error_clear(&ERR);
    int rc = eng_open(OPS, DIR_, "test", &opts, &E, &ERR);
    bson_destroy(&opts);
    CHECK(rc == 0 && E, "open %s: %s (%s)", DIR_, md_strerror(rc), ERR.message);
}

static void fx_open(const eng_param *p)
{
    OPS = eng_find(p->name);
    cr_assert(OPS, "engine %s not found", p->name);
    NAME = OPS->name;
    snprintf(DIR_, sizeof DIR_, "%s", ENG_FX_DIR);
    cr_assert(mkdtemp(DIR_), "mkdtemp failed");
    engine_open();
}

static void fx_reopen(void)
{
    eng_close(E);
    E = NULL;
    engine_open();
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    return remove(path);
}

static void fx_fini(void)
{
    eng_close(E);
    E = NULL;
    if (DIR_[0])
        nftw(DIR_, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

#endif
