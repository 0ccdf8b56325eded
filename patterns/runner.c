/*
 * runner.c -- build/patterns: the Little MongoDB Schema Design Book's
 * simulator runs (mongodb-schema-simulator) on minidoc's engines.
 *
 * For every registered pattern and scenario (patterns/registry.c) and every
 * engine asked for (mmapv1 and btree, journal and log on, as MongoDB
 * 3.0/3.2 ran by default), pt_run_scenario runs it on a fresh database;
 * this prints each table beside the book's figures and each pattern's
 * verdict, then writes the CSV, the latency plots and patterns.md
 * (runner_report.c).  Then the second book's use cases ("MongoDB Applied
 * Design Patterns", ap_registry.c): each measured on every engine and its
 * chapter's claims judged (runner_ap.c), in patterns.md's second part.
 * The exit status is 1 if any user's operation
 * returned an error or any scenario's check failed (lost documents,
 * money or seats not conserved): `make test` runs `--quick` for that.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "runner.h"

/*
 * The default rate scale: the book's own load (users per iteration as its
 * parameter tables give them), except for the scenarios the book ran past
 * saturation (runner.h, "Saturated runs").  --rate-scale X multiplies every
 * scenario's users by X, the same for all; the report states the scale
 * each scenario ran at.
 */
#define RN_DEFAULT_RATE_SCALE 1.0

/* --quick: every scenario for 4 iterations of 250 ms (the same rate per
 * second, a quarter of the users per iteration). */
/* A run stops starting users this long after its start (--max-run): a
 * scenario far past what an engine can serve would otherwise hold the
 * whole run for its backlog; the report says which runs were cut off. */
#define RN_DEFAULT_MAX_RUN_S 60.0
#define RN_QUICK_ITERATIONS 4
#define RN_QUICK_RESOLUTION_MS 250

static void usage(FILE *f)
{
    fprintf(f,
        "usage: patterns [options]\n"
        "\n"
        "Runs the Little MongoDB Schema Design Book's scenarios (mongodb-schema-\n"
        "simulator's model: processes x poolSize clients, linear, slicetime) on\n"
        "mmapv1 and btree with the journal on, prints each table beside the book's\n"
        "figures and a verdict per pattern; then measures the claims of MongoDB\n"
        "Applied Design Patterns' use cases (ap_*) on the same engines; and writes\n"
        "DIR/patterns.csv, DIR/patterns/*.png (gnuplot) and DIR/patterns.md.\n"
        "\n"
        "  --list              the patterns, their scenarios and ops, and exit\n"
        "  --scenario NAME     only this scenario, pattern or Applied Design Patterns\n"
        "                      use case (ap_*; \"applied\": all of them) (repeatable)\n"
        "  --engine NAME       mmapv1, btree or ephemeralForTest (repeatable;\n"
        "                      default mmapv1 and btree)\n"
        "  --quick             every scenario for %d x %d ms at the same rate\n"
        "  --rate-scale X      users per iteration = the book's x X, every scenario\n"
        "                      (default %g, the book's load; but a scenario the\n"
        "                      book ran past saturation runs at the smallest\n"
        "                      power of two that saturates minidoc, found by\n"
        "                      short probes, unless --rate-scale or --quick)\n"
        "  --iterations N      (default %d)\n"
        "  --resolution MS     iteration length (default %d)\n"
        "  --processes N       (default %d)\n"
        "  --pool-size N       clients = processes x pool size (default %d)\n"
        "  --max-run S         stop starting users S seconds into a run (default %g;\n"
        "                      0: never); the report marks such runs cut off\n"
        "  --no-journal        mmapv1 without journal, btree without log\n"
        "  --out DIR           where the files go (default build/patterns-out)\n"
        "  --no-files          print only\n"
        "  --seed N            the users' random streams\n"
        "  --help              this text\n"
        "\n"
        "Exit status 1 if an operation returned an error, a scenario's check or a\n"
        "use case's measurement failed, 2 on a usage error.\n",
        RN_QUICK_ITERATIONS, RN_QUICK_RESOLUTION_MS, RN_DEFAULT_RATE_SCALE,
        PT_BOOK_ITERATIONS, PT_BOOK_RESOLUTION_MS, PT_BOOK_PROCESSES, PT_BOOK_POOL_SIZE,
        RN_DEFAULT_MAX_RUN_S);
}

static void list(void)
{
    for (const pt_pattern *const *pp = pt_patterns; *pp; pp++) {
        const pt_pattern *p = *pp;
        printf("%-5s %-24s %s (book: %s)\n", p->section, p->name, p->title, p->book_winner);
        for (int i = 0; i < p->nscenarios; i++) {
            const pt_scenario *sc = p->scenarios[i];
            printf("      scenario %-28s %s\n", sc->name, sc->title);
            for (int j = 0; j < sc->nops; j++)
                printf("        op %-30s %5d %s%s\n", sc->ops[j].name, sc->ops[j].users,
                       sc->ops[j].listen ? "listeners, for the run" : "users/iteration",
                       sc->ops[j].decides ? ", decides" : "");
        }
    }
    int n = 0;
    for (const pt_pattern *const *pp = pt_patterns; *pp; pp++)
        n++;
    printf("%d of 11 patterns registered\n", n);
    rn_ap_list();
}

typedef struct progress_ctx {
    int k, n;
    const char *scenario, *engine;
    bool tty;
    double last_line;
} progress_ctx;

static void progress(void *arg, int64_t done, int64_t total, double elapsed)
{
    progress_ctx *c = arg;
    if (c->tty) {
        fprintf(stderr, "\r[%d/%d] %s on %s: %lld/%lld users, %.1f s   ", c->k, c->n,
                c->scenario, c->engine, (long long)done, (long long)total, elapsed);
    } else if (elapsed - c->last_line >= 10.0) {
        c->last_line = elapsed;
        fprintf(stderr, "[%d/%d] %s on %s: %lld/%lld users, %.1f s\n", c->k, c->n,
                c->scenario, c->engine, (long long)done, (long long)total, elapsed);
    }
}

static bool wanted(const pt_pattern *p, const pt_scenario *sc, char **names, int n)
{
    if (n == 0)
        return true;
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], sc->name) == 0 || strcmp(names[i], p->name) == 0)
            return true;
    return false;
}

/* The machine's load averages: the runs share its CPUs with whatever else runs. */
static void read_load(char *buf, size_t n)
{
    FILE *f = fopen("/proc/loadavg", "r");
    double a, b, c;
    if (f && fscanf(f, "%lf %lf %lf", &a, &b, &c) == 3)
        snprintf(buf, n, "%.2f %.2f %.2f", a, b, c);
    else
        snprintf(buf, n, "unknown");
    if (f)
        fclose(f);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int mkdirs(const char *dir)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *s = buf + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            mkdir(buf, 0777);
            *s = '/';
        }
    return mkdir(buf, 0777) == 0 || access(buf, W_OK) == 0 ? 0 : -1;
}

/* The runner.h rule: probe s at 1, 2, 4, ... on mmapv1 and btree. */
static void find_saturating_scale(rn_run *run, rn_scenario *s)
{
    double scale = 1;
    char got[128] = "";
    for (double x = 1; x <= RN_SATURATE_MAX; x *= 2) {
        double worst = 0;
        char line[128] = "";
        for (int e = 0; e < run->nengines; e++) {
            if (run->engine_slot[e] > RN_BTREE)
                continue;
            pt_run_opts o = run->opts;
            o.engine = run->engines[e];
            o.rate_scale = x;
            o.iterations = RN_PROBE_ITERATIONS;
            pt_run_result *r = calloc(1, sizeof *r);
            md_error err;
            md_error_clear(&err);
            if (!r || pt_run_scenario(s->sc, &o, r, &err) != 0) {
                free(r);
                continue;
            }
            double mean = 0;
            for (int j = 0; j < s->sc->nops; j++)
                if (s->sc->ops[j].decides && r->ops[j].fig.mean > mean)
                    mean = r->ops[j].fig.mean;
            snprintf(line + strlen(line), sizeof line - strlen(line), "%s%s %.3f ms",
                     *line ? ", " : "", o.engine, mean);
            if (mean > worst)
                worst = mean;
            free(r);
        }
        fprintf(stderr, "   probe %s x%g: %s\n", s->sc->name, x, line);
        if (worst > RN_SATURATED_MS) {
            scale = x;
            snprintf(got, sizeof got, "%s", line);
            break;
        }
    }
    s->scale = scale;
    if (*got)
        snprintf(s->scale_why, sizeof s->scale_why,
                 "x%g: the smallest scale at which a %d-iteration probe passed %g ms "
                 "(%s), as the book's run was past saturation",
                 scale, RN_PROBE_ITERATIONS, RN_SATURATED_MS, got);
    else
        snprintf(s->scale_why, sizeof s->scale_why,
                 "x1: the book ran it past saturation, but no probe up to x%g passed %g ms",
                 RN_SATURATE_MAX, RN_SATURATED_MS);
}

/* Run one scenario on one engine and print its table. false: an error. */
static bool run_one(rn_run *run, rn_scenario *s, int e, progress_ctx *pc)
{
    pt_run_opts o = run->opts;
    o.engine = run->engines[e];
    if (s->scale > 0)
        o.rate_scale = s->scale;
    o.progress = progress;
    o.progress_arg = pc;
    o.service = true;
    pc->scenario = s->sc->name;
    pc->engine = o.engine;
    pc->last_line = 0;
    fprintf(stderr, "[%d/%d] %s on %s ...\n", pc->k, pc->n, s->sc->name, o.engine);
    pt_run_result *r = calloc(1, sizeof *r);
    if (!r) {
        fprintf(stderr, "out of memory\n");
        return false;
    }
    md_error err;
    md_error_clear(&err);
    int rc = pt_run_scenario(s->sc, &o, r, &err);
    if (pc->tty)
        fprintf(stderr, "\r%*s\r", 78, "");
    if (rc) {
        printf("\n== %s %s / %s on %s: FAILED before the run: %s (%s)\n", s->p->section,
               s->p->title, s->sc->name, o.engine, err.message, md_strerror(rc));
        free(r);
        return false;
    }
    s->r[run->engine_slot[e]] = r;
    rn_print_table(stdout, s, r);
    fflush(stdout);
    return r->ok;
}

int main(int argc, char **argv)
{
    rn_run run = {0};
    char *names[64];
    int nnames = 0;
    bool quick = false, files = true, journal = true;
    double rate = RN_DEFAULT_RATE_SCALE;
    bool rate_given = false;
    int iterations = 0, resolution = 0, processes = PT_BOOK_PROCESSES, pool = PT_BOOK_POOL_SIZE;
    unsigned long long seed = 12;
    double max_run = RN_DEFAULT_MAX_RUN_S;
    const char *out = "build/patterns-out";
    char cmdline[1024] = "";

    for (int i = 0; i < argc; i++)
        snprintf(cmdline + strlen(cmdline), sizeof cmdline - strlen(cmdline), "%s%s",
                 i ? " " : "", argv[i]);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_ARG()                                                   \
    do {                                                             \
        if (!v) {                                                    \
            fprintf(stderr, "patterns: %s needs a value\n", a);      \
            return 2;                                                \
        }                                                            \
        i++;                                                         \
    } while (0)
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--list") == 0) {
            list();
            return 0;
        } else if (strcmp(a, "--quick") == 0) {
            quick = true;
        } else if (strcmp(a, "--no-files") == 0) {
            files = false;
        } else if (strcmp(a, "--no-journal") == 0) {
            journal = false;
        } else if (strcmp(a, "--scenario") == 0) {
            NEED_ARG();
            if (nnames < 64)
                names[nnames++] = argv[i];
        } else if (strcmp(a, "--engine") == 0) {
            NEED_ARG();
            if (strcmp(v, "mmapv1") && strcmp(v, "btree") && strcmp(v, "ephemeralForTest")) {
                fprintf(stderr, "patterns: unknown engine %s\n", v);
                return 2;
            }
            if (run.nengines < RN_MAX_ENGINES)
                run.engines[run.nengines++] = argv[i];
        } else if (strcmp(a, "--rate-scale") == 0) {
            NEED_ARG();
            rate = atof(v);
            rate_given = true;
            if (!(rate > 0)) {
                fprintf(stderr, "patterns: --rate-scale must be > 0\n");
                return 2;
            }
        } else if (strcmp(a, "--iterations") == 0) {
            NEED_ARG();
            iterations = atoi(v);
        } else if (strcmp(a, "--resolution") == 0) {
            NEED_ARG();
            resolution = atoi(v);
        } else if (strcmp(a, "--processes") == 0) {
            NEED_ARG();
            processes = atoi(v);
        } else if (strcmp(a, "--pool-size") == 0) {
            NEED_ARG();
            pool = atoi(v);
        } else if (strcmp(a, "--max-run") == 0) {
            NEED_ARG();
            max_run = atof(v);
        } else if (strcmp(a, "--out") == 0) {
            NEED_ARG();
            out = argv[i];
        } else if (strcmp(a, "--seed") == 0) {
            NEED_ARG();
            seed = strtoull(v, NULL, 0);
        } else {
            fprintf(stderr, "patterns: unknown option %s (try --help)\n", a);
            return 2;
        }
#undef NEED_ARG
    }
    if (iterations < 0 || resolution < 0 || processes < 1 || pool < 1) {
        fprintf(stderr, "patterns: iterations, resolution, processes and pool size must be positive\n");
        return 2;
    }
    if (run.nengines == 0) {
        run.engines[run.nengines++] = "mmapv1";
        run.engines[run.nengines++] = "btree";
    }
    for (int e = 0; e < run.nengines; e++) {
        run.engine_slot[e] = strcmp(run.engines[e], "mmapv1") == 0  ? RN_MMAPV1
                             : strcmp(run.engines[e], "btree") == 0 ? RN_BTREE
                                                                    : 2;
        for (int f = 0; f < e; f++)
            if (run.engine_slot[f] == run.engine_slot[e]) {
                fprintf(stderr, "patterns: engine %s given twice\n", run.engines[e]);
                return 2;
            }
    }

    pt_run_opts_book(&run.opts, NULL);
    run.opts.rate_scale = rate;
    run.opts.quick = quick;
    run.opts.journal = journal;
    run.opts.seed = seed;
    run.opts.max_run_s = max_run;
    run.opts.processes = processes;
    run.opts.pool_size = pool;
    if (quick) {
        run.opts.iterations = RN_QUICK_ITERATIONS;
        run.opts.resolution_ms = RN_QUICK_RESOLUTION_MS;
    }
    if (iterations)
        run.opts.iterations = iterations;
    if (resolution)
        run.opts.resolution_ms = resolution;
    run.cmdline = cmdline;
    time_t t = time(NULL);
    strftime(run.started, sizeof run.started, "%Y-%m-%d %H:%M UTC", gmtime(&t));

    /* The scenarios asked for, grouped by pattern in the book's order. */
    int np = 0, nsc = 0;
    for (const pt_pattern *const *pp = pt_patterns; *pp; pp++, np++)
        nsc += (*pp)->nscenarios;
    run.sc = calloc((size_t)(nsc ? nsc : 1), sizeof *run.sc);
    run.pat = calloc((size_t)(np ? np : 1), sizeof *run.pat);
    for (const pt_pattern *const *pp = pt_patterns; *pp; pp++) {
        bool any = false;
        for (int i = 0; i < (*pp)->nscenarios; i++)
            if (wanted(*pp, (*pp)->scenarios[i], names, nnames)) {
                run.sc[run.nsc].p = *pp;
                run.sc[run.nsc++].sc = (*pp)->scenarios[i];
                any = true;
            }
        if (any)
            run.pat[run.npat++].p = *pp;
    }
    int nap = 0, nap_all = 0;
    for (const ap_usecase *const *u = ap_usecases; *u; u++)
        nap_all++;
    rn_ap *aps = calloc((size_t)(nap_all ? nap_all : 1), sizeof *aps);
    for (const ap_usecase *const *u = ap_usecases; *u; u++)
        if (rn_ap_wanted(*u, names, nnames))
            aps[nap++].uc = *u;
    if (run.nsc == 0 && nap == 0) {
        if (nnames) {
            fprintf(stderr, "patterns: no scenario or pattern named");
            for (int i = 0; i < nnames; i++)
                fprintf(stderr, " %s", names[i]);
            fprintf(stderr, " (see --list)\n");
            return 2;
        }
        printf("no pattern is registered yet (patterns/registry.c): nothing to run\n");
    }

    printf("minidoc patterns: %d scenario(s) of %d pattern(s) on %d engine(s); "
           "rate scale %g (users per iteration = the book's x %g), %d clients "
           "(%d processes x %d pool), %d iterations x %d ms, slicetime; journal %s\n",
           run.nsc, run.npat, run.nengines, rate,
           rate, processes * pool, processes, pool,
           run.opts.iterations, run.opts.resolution_ms, journal ? "on" : "off");

    progress_ctx pc = {.n = run.nsc * run.nengines, .tty = isatty(2)};
    bool ok = true;
    double t0 = now_s();
    read_load(run.load_before, sizeof run.load_before);
    int si = 0;
    run.saturate = !rate_given && !quick;
    for (int pi = 0; pi < run.npat; pi++) {
        for (; si < run.nsc && run.sc[si].p == run.pat[pi].p; si++) {
            if (run.saturate && pt_book_saturated(run.sc[si].sc, RN_BOOK_SATURATED_MS))
                find_saturating_scale(&run, &run.sc[si]);
            for (int e = 0; e < run.nengines; e++) {
                pc.k++;
                if (!run_one(&run, &run.sc[si], e, &pc))
                    ok = false;
            }
        }
        rn_verdicts(&run);
        rn_print_verdict(stdout, &run, &run.pat[pi]);
        fflush(stdout);
    }
    ap_args aargs = {.quick = quick, .seed = seed, .no_journal = !journal};
    for (int i = 0; i < nap; i++)
        for (int e = 0; e < run.nengines; e++)
            if (!rn_ap_run_one(&aps[i], run.engine_slot[e], run.engines[e], &aargs))
                ok = false;
    run.total_s = now_s() - t0;
    read_load(run.load_after, sizeof run.load_after);
    rn_verdicts(&run);
    int measured = 0;
    for (int i = 0; i < run.npat; i++)
        measured += run.pat[i].ours != NULL;
    if (run.npat)
        printf("\n%d of 11 verdicts agree with the book (%d of 11 patterns measured "
               "on both engines)\n",
               rn_agree_count(&run, false), measured);
    if (run.npat)
        rn_print_figures_count(stdout, &run);
    printf("total %.1f s%s\n", run.total_s, ok ? "" : "; SOME SCENARIOS FAILED (above)");

    if (files && (run.nsc || nap)) {
        char sub[4096];
        snprintf(sub, sizeof sub, "%s/patterns", out);
        if (mkdirs(sub) != 0) {
            fprintf(stderr, "patterns: cannot create %s\n", sub);
            return 1;
        }
        if (run.nsc && (rn_write_csv(&run, out) || rn_write_plots(&run, out) ||
                        rn_write_markdown(&run, out)))
            ok = false;
        else if (nap && rn_ap_write_markdown(&run, aps, nap, out, run.nsc > 0))
            ok = false;
        else
            printf("wrote %s/patterns.csv, %s/patterns.md and the plots in %s/patterns/\n",
                   out, out, out);
    }
    for (int i = 0; i < run.nsc; i++)
        for (int e = 0; e < RN_MAX_ENGINES; e++)
            free(run.sc[i].r[e]);
    free(run.sc);
    free(run.pat);
    free(aps);
    return ok ? 0 : 1;
}
