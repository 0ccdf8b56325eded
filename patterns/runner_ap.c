/*
 * runner_ap.c -- build/patterns' second part: the use cases of "MongoDB
 * Applied Design Patterns" (ap.h, ap_registry.c).  Each selected use case
 * is measured on every engine asked for (ap_run_usecase: a fresh database
 * each), its claims are judged per engine, and the results are printed
 * and written as the second part of patterns.md: a summary table, then one
 * section per chapter, one subsection per use case with what it
 * demonstrates, its numbers and a table of the chapter's claims, what was
 * measured and whether each holds (ap_claim_verdict: the claim's judge, or
 * the verdict measure stored).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

void rn_ap_list(void)
{
    for (const ap_usecase *const *u = ap_usecases; *u; u++) {
        printf("AP    %-24s %s: %s (%s), %d claims\n", (*u)->name, (*u)->chapter,
               (*u)->title, (*u)->pages, (*u)->nclaims);
        printf("      %s\n", (*u)->demonstrates);
        for (int k = 0; k < (*u)->nclaims; k++)
            printf("      claim %d: %s\n", k + 1, (*u)->claims[k].claim);
    }
}

static void print_metrics(FILE *f, const ap_result *r)
{
    for (int i = 0; i < r->nmetrics; i++)
        fprintf(f, "   %-*s %14.3f %s\n", strlen(r->m[i].name) > 34 ? 72 : 34, r->m[i].name,
                r->m[i].value, r->m[i].unit);
}

bool rn_ap_run_one(rn_ap *a, int slot, const char *engine, const ap_args *args)
{
    md_error err;
    md_error_clear(&err);
    fprintf(stderr, "%s on %s ...\n", a->uc->name, engine);
    ap_result *r = &a->r[slot];
    int rc = ap_run_usecase(a->uc, engine, args, r, &err);
    if (rc) {
        printf("\n== %s %s on %s: FAILED to open: %s\n", a->uc->chapter, a->uc->title, engine,
               err.message);
        return false;
    }
    a->ran[slot] = true;
    printf("\n== %s: %s / %s on %s, %.2f s\n", a->uc->chapter, a->uc->title, a->uc->name,
           engine, r->seconds);
    if (r->rc)
        printf("   ERROR: %s\n", r->error);
    print_metrics(stdout, r);
    char buf[512];
    for (int i = 0; i < a->uc->nclaims; i++) {
        ap_verdict v = ap_claim_verdict(a->uc, i, r, buf, sizeof buf);
        printf("   claim %d: %s -- %s\n      %s\n", i + 1, ap_verdict_name(v),
               a->uc->claims[i].claim, buf);
    }
    int held, judged;
    ap_verdict v = ap_usecase_verdict(a->uc, r, &held, &judged);
    printf("-- %s on %s: %d of %d claims hold -> %s\n", a->uc->name, engine, held, judged,
           ap_verdict_name(v));
    fflush(stdout);
    return r->rc == 0;
}

static void md_escape(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '|')
            fputs("\\|", f);
        else
            fputc(*s, f);
    }
}

/* One metric's row: its name, unit and value per engine ran. */
static void md_metric_row(FILE *f, const rn_run *run, const rn_ap *a, const ap_metric *m)
{
    fprintf(f, "| ");
    md_escape(f, m->name);
    fprintf(f, " | %s |", m->unit);
    for (int e = 0; e < run->nengines; e++) {
        int s = run->engine_slot[e];
        if (!a->ran[s])
            continue;
        double v = ap_get(&a->r[s], m->name);
        if (isnan(v))
            fprintf(f, " |");
        else if (fabs(v - llround(v)) < 1e-9 && fabs(v) < 1e15)
            fprintf(f, " %lld |", (long long)llround(v));
        else
            fprintf(f, " %.3f |", v);
    }
    fprintf(f, "\n");
}

static void md_usecase(FILE *f, const rn_run *run, const rn_ap *a)
{
    fprintf(f, "\n### %s (%s, `%s`)\n\nDemonstrates: ", a->uc->title, a->uc->pages,
            a->uc->name);
    md_escape(f, a->uc->demonstrates);
    fprintf(f, ".\n\n");
    /* The numbers, one column per engine. */
    const ap_result *first = NULL;
    for (int e = 0; e < run->nengines; e++)
        if (a->ran[run->engine_slot[e]]) {
            first = &a->r[run->engine_slot[e]];
            break;
        }
    if (!first) {
        fprintf(f, "Not run.\n");
        return;
    }
    fprintf(f, "| measurement | unit |");
    for (int e = 0; e < run->nengines; e++)
        if (a->ran[run->engine_slot[e]])
            fprintf(f, " %s |", run->engines[e]);
    fprintf(f, "\n|---|---|");
    for (int e = 0; e < run->nengines; e++)
        if (a->ran[run->engine_slot[e]])
            fprintf(f, "---|");
    fprintf(f, "\n");
    /* Every engine's metrics, each once: the first engine's order, then
     * the names only a later engine recorded. */
    for (int e0 = 0; e0 < run->nengines; e0++) {
        const ap_result *src = &a->r[run->engine_slot[e0]];
        if (!a->ran[run->engine_slot[e0]])
            continue;
        for (int i = 0; i < src->nmetrics; i++) {
            bool seen = false;
            for (int p = 0; p < e0 && !seen; p++)
                seen = a->ran[run->engine_slot[p]] &&
                       !isnan(ap_get(&a->r[run->engine_slot[p]], src->m[i].name));
            if (!seen)
                md_metric_row(f, run, a, &src->m[i]);
        }
    }
    fprintf(f, "\n| claim (the book) | engine | measured | verdict |\n|---|---|---|---|\n");
    char buf[512];
    for (int i = 0; i < a->uc->nclaims; i++)
        for (int e = 0; e < run->nengines; e++) {
            const ap_result *r = &a->r[run->engine_slot[e]];
            if (!a->ran[run->engine_slot[e]])
                continue;
            ap_verdict v = ap_claim_verdict(a->uc, i, r, buf, sizeof buf);
            fprintf(f, "| ");
            if (e == 0)
                md_escape(f, a->uc->claims[i].claim);
            fprintf(f, " | %s | ", r->engine);
            md_escape(f, buf);
            fprintf(f, " | %s%s%s |\n", v == AP_FAILS ? "**" : "", ap_verdict_name(v),
                    v == AP_FAILS ? "**" : "");
        }
    fprintf(f, "\n");
    for (int e = 0; e < run->nengines; e++) {
        const ap_result *r = &a->r[run->engine_slot[e]];
        if (!a->ran[run->engine_slot[e]])
            continue;
        int held, judged;
        ap_verdict v = ap_usecase_verdict(a->uc, r, &held, &judged);
        fprintf(f, "%s: **%d of %d claims hold** (%s; measured in %.2f s).  ", r->engine,
                held, judged, ap_verdict_name(v), r->seconds);
    }
    fprintf(f, "\n");
}

int rn_ap_write_markdown(const rn_run *run, const rn_ap *aps, int n, const char *dir,
                         bool append)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/patterns.md", dir);
    FILE *f = fopen(path, append ? "a" : "w");
    if (!f) {
        perror(path);
        return -1;
    }
    if (!append)
        fprintf(f, "# Schema-design patterns, measured on minidoc\n\n"
                   "<!-- generated by build/patterns (patterns/runner*.c); do not edit -->\n\n"
                   "Generated by `%s` on %s.\n",
                run->cmdline, run->started);
    fprintf(f,
            "\n# Part II: MongoDB Applied Design Patterns, its claims measured\n\n"
            "<!-- generated by build/patterns (patterns/runner_ap.c); do not edit -->\n\n"
            "The second book (Copeland, 2013) gives no simulator tables: its chapters make "
            "claims (an index order examines fewer keys, a preallocated document never "
            "moves, a `j: true` write waits for the group commit...). Each use case below "
            "runs the book's operations (patterns/ap_*.c, its Python translated statement "
            "by statement) on a fresh database per engine, journal and log on, %s scale, "
            "and judges each claim on the numbers. Times are wall-clock on a machine shared "
            "with other work (load average %s before the run); counts (keys examined, "
            "moves, bytes) do not depend on the load. Measured by `%s` on %s.\n",
            run->opts.quick ? "the quick (`--quick`)" : "the full", run->load_before,
            run->cmdline, run->started);
    fprintf(f, "\n| chapter | use case | demonstrates | claims | verdict per engine |\n"
               "|---|---|---|---|---|\n");
    for (int i = 0; i < n; i++) {
        fprintf(f, "| %s | %s (`%s`) | ", aps[i].uc->chapter, aps[i].uc->title,
                aps[i].uc->name);
        md_escape(f, aps[i].uc->demonstrates);
        fprintf(f, " | %d |", aps[i].uc->nclaims);
        for (int e = 0; e < run->nengines; e++) {
            int s = run->engine_slot[e], held, judged;
            if (!aps[i].ran[s])
                continue;
            ap_verdict v = ap_usecase_verdict(aps[i].uc, &aps[i].r[s], &held, &judged);
            fprintf(f, " %s: %s (%d/%d);", run->engines[e], ap_verdict_name(v), held, judged);
        }
        fprintf(f, " |\n");
    }
    const char *chapter = NULL;
    for (int i = 0; i < n; i++) {
        if (!chapter || strcmp(chapter, aps[i].uc->chapter) != 0) {
            chapter = aps[i].uc->chapter;
            fprintf(f, "\n## %s\n", chapter);
        }
        md_usecase(f, run, &aps[i]);
    }
    return fclose(f) == 0 ? 0 : -1;
}
