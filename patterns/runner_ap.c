/*
 * runner_ap.c -- build/patterns' part II: the use cases of "MongoDB
 * Applied Design Patterns" (patterns/ap_registry.c).  Each is measured on
 * each engine in a fresh database (journal / log on, as the Little Book's
 * runs), its rows printed beside the other engine's, and every claim of
 * its chapter judged per engine.  The same results become docs/patterns.md's
 * part II: per chapter, the claim, the measurement and whether it holds.
 */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runner.h"

bool rn_ap_wanted(const ap_usecase *uc, char **names, int n)
{
    if (n == 0)
        return true;
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], uc->name) == 0 || strcmp(names[i], "applied") == 0)
            return true;
    return false;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

static int measure(const ap_usecase *uc, const pt_run_opts *o, ap_result *r, md_error *err)
{
    char dir[4096];
    const char *tmp = o->tmpdir ? o->tmpdir : getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/minidoc_ap_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
        return md_error_set(err, MD_EIO, MD_CODE_FILE_STREAM_FAILED, "mkdtemp %s: %s", dir,
                            strerror(errno));
    bson_t opts = BSON_INITIALIZER, sub;
    BSON_APPEND_UTF8(&opts, "engine", o->engine);
    if (strcmp(o->engine, "mmapv1") == 0) {
        BSON_APPEND_DOCUMENT_BEGIN(&opts, "mmapv1", &sub);
        BSON_APPEND_BOOL(&sub, "journal", o->journal);
        bson_append_document_end(&opts, &sub);
    } else if (strcmp(o->engine, "btree") == 0) {
        BSON_APPEND_DOCUMENT_BEGIN(&opts, "btree", &sub);
        BSON_APPEND_BOOL(&sub, "log", o->journal);
        bson_append_document_end(&opts, &sub);
    }
    md_db *db = NULL;
    int rc = md_db_open(dir, &opts, &db, err);
    bson_destroy(&opts);
    if (rc == 0) {
        int64_t t = ap_now_ns();
        rc = uc->measure(db, o->engine, o->quick, r, err);
        r->seconds = (double)(ap_now_ns() - t) / 1e9;
        md_db_close(db);
    }
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return rc;
}

bool rn_ap_run_one(rn_run *run, rn_usecase *u, int e)
{
    pt_run_opts o = run->opts;
    o.engine = run->engines[e];
    fprintf(stderr, "%s on %s ...\n", u->uc->name, o.engine);
    ap_result *r = calloc(1, sizeof *r);
    if (!r) {
        fprintf(stderr, "out of memory\n");
        return false;
    }
    snprintf(r->engine, sizeof r->engine, "%s", o.engine);
    md_error err;
    md_error_clear(&err);
    r->rc = measure(u->uc, &o, r, &err);
    if (r->rc)
        snprintf(r->error, sizeof r->error, "%.200s (%s)", err.message, md_strerror(r->rc));
    u->r[run->engine_slot[e]] = r;
    printf("\n== %s %s on %s (%.1f s)%s%s\n", u->uc->section, u->uc->title, o.engine,
           r->seconds, r->rc ? ": FAILED: " : "", r->rc ? r->error : "");
    for (int i = 0; i < r->nrows; i++)
        printf("  %-72s %12.1f %s\n", r->rows[i].what, r->rows[i].value, r->rows[i].unit);
    fflush(stdout);
    return r->rc == 0;
}

static const char *verdict_word(const ap_result *r, int k)
{
    if (!r)
        return "not run";
    if (r->rc)
        return "failed";
    return r->claims[k].verdict == AP_HOLDS   ? "holds"
           : r->claims[k].verdict == AP_FAILS ? "does not hold"
                                              : "not decided";
}

/* "4 of 4 claims hold" for an engine, into buf. */
static const char *summary(const ap_usecase *uc, const ap_result *r, char *buf, size_t n)
{
    if (!r)
        return "not run";
    if (r->rc)
        return "failed";
    int holds = 0;
    for (int k = 0; k < uc->nclaims; k++)
        holds += r->claims[k].verdict == AP_HOLDS;
    snprintf(buf, n, "%d of %d claims hold", holds, uc->nclaims);
    return buf;
}

void rn_ap_print_verdict(FILE *f, const rn_run *run, const rn_usecase *u)
{
    (void)run;
    fprintf(f, "\n-- %s %s: claims\n", u->uc->section, u->uc->title);
    for (int k = 0; k < u->uc->nclaims; k++) {
        fprintf(f, "  %d. %s\n", k + 1, u->uc->claims[k]);
        for (int e = 0; e < 2; e++) {
            const ap_result *r = u->r[e];
            if (!r)
                continue;
            fprintf(f, "     %-7s %s: %s\n", r->engine, verdict_word(r, k),
                    r->rc ? r->error : r->claims[k].evidence);
        }
    }
}

/* A row's value on engine slot e, by its label; NULL when absent. */
static const ap_row *find_row(const ap_result *r, const char *what)
{
    if (!r)
        return NULL;
    for (int i = 0; i < r->nrows; i++)
        if (strcmp(r->rows[i].what, what) == 0)
            return &r->rows[i];
    return NULL;
}

static void md_value(FILE *f, const ap_row *row)
{
    if (!row)
        fprintf(f, " |");
    else if (row->value == (double)(int64_t)row->value)
        fprintf(f, " %lld %s |", (long long)row->value, row->unit);
    else
        fprintf(f, " %.1f %s |", row->value, row->unit);
}

void rn_ap_write_markdown(FILE *f, const rn_run *run)
{
    if (run->nuc == 0)
        return;
    char b0[64], b1[64];
    fprintf(f,
            "\n# Part II: MongoDB Applied Design Patterns, its claims measured\n\n"
            "Each use case of the second book (Copeland, 2013; patterns/ap_*.c) runs the "
            "book's operations and indexes on a fresh database per engine (journal / log "
            "on) and judges each claim of its chapter from what it measured: bytes the "
            "engine wrote for documents (collStats `bytesWritten`), document moves "
            "(mmapv1), explain's plan and keys examined, and wall-clock rates and "
            "latencies on a machine shared with other work (compare the engines' "
            "directions, not the absolute numbers). Measured by `%s` on %s.%s\n\n",
            run->cmdline, run->started,
            run->opts.quick ? " This run used the reduced `--quick` sizes." : "");
    fprintf(f, "| Use case | demonstrates | mmapv1 | btree |\n|---|---|---|---|\n");
    for (int i = 0; i < run->nuc; i++) {
        const rn_usecase *u = &run->uc[i];
        fprintf(f, "| %s %s (`--scenario %s`) | %s | %s | %s |\n", u->uc->section,
                u->uc->title, u->uc->name, u->uc->demonstrates,
                summary(u->uc, u->r[RN_MMAPV1], b0, sizeof b0),
                summary(u->uc, u->r[RN_BTREE], b1, sizeof b1));
    }
    for (int i = 0; i < run->nuc; i++) {
        const rn_usecase *u = &run->uc[i];
        const ap_result *m = u->r[RN_MMAPV1], *w = u->r[RN_BTREE];
        fprintf(f, "\n## %s %s\n\nDemonstrates: %s.\n\n", u->uc->section, u->uc->title,
                u->uc->demonstrates);
        fprintf(f, "| claim | mmapv1 | btree |\n|---|---|---|\n");
        for (int k = 0; k < u->uc->nclaims; k++) {
            fprintf(f, "| %s |", u->uc->claims[k]);
            for (int e = 0; e < 2; e++) {
                const ap_result *r = e ? w : m;
                fprintf(f, " **%s**%s%s |", verdict_word(r, k),
                        r && !r->rc && r->claims[k].evidence[0] ? ": " : "",
                        r && !r->rc ? r->claims[k].evidence : "");
            }
            fprintf(f, "\n");
        }
        for (int e = 0; e < 2; e++) {
            const ap_result *r = e ? w : m;
            if (r && r->rc)
                fprintf(f, "\nOn %s the measurement failed: %s\n", r->engine, r->error);
        }
        /* The rows: the union of both engines' labels, in order. */
        const ap_result *base = m ? m : w;
        if (!base)
            continue;
        fprintf(f, "\n| measured | mmapv1 | btree |\n|---|---|---|\n");
        for (int j = 0; j < base->nrows; j++) {
            fprintf(f, "| %s |", base->rows[j].what);
            md_value(f, find_row(m, base->rows[j].what));
            md_value(f, find_row(w, base->rows[j].what));
            fprintf(f, "\n");
        }
        if (m && w)
            for (int j = 0; j < w->nrows; j++)
                if (!find_row(m, w->rows[j].what)) {
                    fprintf(f, "| %s | |", w->rows[j].what);
                    md_value(f, &w->rows[j]);
                    fprintf(f, "\n");
                }
    }
}
