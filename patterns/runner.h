/*
 * runner.h -- what build/patterns' command line (runner.c) hands its
 * report writers (runner_report.c): every scenario run, grouped by pattern,
 * and the options they ran under.  Private to runner*.c.
 */
#ifndef RUNNER_H
#define RUNNER_H

#include <stdio.h>

#include "ap.h"
#include "pt_sim.h"

#define RN_MMAPV1 0
#define RN_BTREE 1
#define RN_MAX_ENGINES 3

typedef struct rn_scenario {
    const pt_pattern *p;
    const pt_scenario *sc;
    pt_run_result *r[RN_MAX_ENGINES]; /* NULL: not run on that engine */
    double scale;            /* its rate scale (rn_saturating_scale; 0: the run's) */
    char scale_why[256];     /* how that scale was found, for the report */
} rn_scenario;

/*
 * Saturated runs.  Where the book's own run was past saturation (a mean
 * latency of an op over RN_BOOK_SATURATED_MS on either engine: its Queue,
 * both carts, Theater, Account, with means of seconds), the book's load
 * does not saturate minidoc, which is two orders of magnitude faster per
 * operation.  Such a scenario runs at the smallest scale 1, 2, 4, ...,
 * RN_SATURATE_MAX at which a short probe (RN_PROBE_ITERATIONS iterations)
 * has a deciding op's mean over RN_SATURATED_MS on either engine: past
 * saturation, as the book's was.  If none does, the book's load.  The rule
 * is fixed and the same for every such scenario; --rate-scale, or --quick,
 * turns it off (one scale for all).
 */
#define RN_BOOK_SATURATED_MS 100.0
#define RN_SATURATED_MS 10.0
#define RN_SATURATE_MAX 16.0
#define RN_PROBE_ITERATIONS 3


typedef struct rn_pattern {
    const pt_pattern *p;
    double sum_ms[2];        /* decisive means, mmapv1 and btree */
    double svc_ms[2];        /* their service times (pt_run_opts.service), where measured */
    const char *ours;        /* pt_verdict, or NULL when not measured on both */
} rn_pattern;

typedef struct rn_run {
    const char *engines[RN_MAX_ENGINES];
    int nengines;
    int engine_slot[RN_MAX_ENGINES];  /* RN_MMAPV1, RN_BTREE or 2 */
    rn_scenario *sc;
    int nsc;
    rn_pattern *pat;
    int npat;
    pt_run_opts opts;        /* as run (engine unset) */
    bool saturate;           /* the saturated-runs rule was on */
    const char *cmdline;
    double total_s;
    char started[64];        /* UTC time of the start */
    char load_before[64], load_after[64]; /* /proc/loadavg's 1/5/15 min */
} rn_run;

/* The figures the book gives for an op on an engine (NULL: none). */
const pt_figures *rn_book_figures(const pt_op *op, const char *engine);
/* Compute every pattern's verdict (needs mmapv1 and btree runs). */
void rn_verdicts(rn_run *run);
/* The number of the book's 11 patterns whose verdict agrees with the book's
 * call: its text's (pt_pattern.book_winner), or with `figures` the one its
 * own figures give (pt_book_figures_verdict). */
int rn_agree_count(const rn_run *run, bool figures);
/* One sentence: the count against the book's figures (pt_book_figures_verdict)
 * where they call a pattern otherwise than its text; nothing if they agree. */
void rn_print_figures_count(FILE *f, const rn_run *run);
/* Print the verdict line (and, when it disagrees, the measured causes). */
void rn_print_verdict(FILE *f, const rn_run *run, const rn_pattern *rp);
/* Print one run's table beside the book's. */
void rn_print_table(FILE *f, const rn_scenario *s, const pt_run_result *r);

/* The files: DIR/patterns.csv, DIR/patterns/<scenario>-<engine>.png and
 * DIR/patterns.md.  0 or -1 (message on stderr). */
int rn_write_csv(const rn_run *run, const char *dir);
int rn_write_plots(const rn_run *run, const char *dir);
int rn_write_markdown(const rn_run *run, const char *dir);

/* ---- the second book (runner_ap.c) ------------------------------------------ */

/* One "Applied Design Patterns" use case as run, per engine slot. */
typedef struct rn_ap {
    const ap_usecase *uc;
    ap_result r[RN_MAX_ENGINES];
    bool ran[RN_MAX_ENGINES];
} rn_ap;

/* Is the use case asked for (by its name, or "applied" for all)? */
bool rn_ap_wanted(const ap_usecase *uc, char **names, int n);
/* --list's lines for the use cases. */
void rn_ap_list(void);
/* Measure one use case on one engine into a->r[slot] and print it.
 * false: it failed. */
bool rn_ap_run_one(rn_ap *a, int slot, const char *engine, const ap_args *args);
/* Write (or, append: add to) DIR/patterns.md the second book's part. */
int rn_ap_write_markdown(const rn_run *run, const rn_ap *aps, int n, const char *dir,
                         bool append);

#endif /* RUNNER_H */
