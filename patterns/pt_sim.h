/*
 * pt_sim.h -- the scenario runner's library: a latency histogram
 * (pt_hist.c), the statistics and the verdict rule (pt_stats.c) and the
 * simulator itself (pt_sim.c), which runs one pt_scenario on one engine the
 * way mongodb-schema-simulator ran the book's tables.  build/patterns
 * (runner.c, runner_report.c) is a command line around these; the tests
 * call them directly.
 *
 * The simulator's model, as this file implements it:
 *
 *   processes x poolSize   client threads sharing one open md_db (the
 *                          book: 4 x 50 = 200 connections)
 *   type linear            every op starts the same number of users in
 *                          every iteration
 *   resolution, iterations an iteration lasts `resolution` ms; `iterations`
 *                          of them are run
 *   slicetime              an op's users of one iteration are spread evenly
 *                          across it: user n starts at n * resolution/users
 *
 *   users of every op, merged in start order   u0 u1 u2 ... (scheduled times)
 *                   |
 *                   v  a free client takes the earliest user not yet taken,
 *   client 0..C-1      sleeps until its start time, runs op->run(user)
 *
 * A user may issue sub-operations at once (pt_user_parallel, patterns.h),
 * as the simulator's scripts issued several calls without waiting, each on
 * another pooled connection: a fixed set of helper threads, as many as
 * clients, started once per run, takes them, and the user's own client
 * takes any no helper is free for.
 *
 * An op the simulator ran as a custom execution (pt_op.listen: topics.js's
 * listeners) has no users: its listeners get threads of their own, start
 * one iteration into the run, listen for `iterations` iterations, and
 * each gap between one listener's consecutive documents is a sample.
 *
 * A user's latency runs from its start to the end of run(): from its
 * scheduled start when it had to wait for a free client (the driver's pool
 * queue), else from the moment its client woke up for it -- the simulator
 * read a user's start time when its timer fired, so a timer's lateness was
 * never the user's.  Waiting for a client or behind a lock counts, as it
 * did in the simulator.  Runtime is the wall time from the first scheduled
 * start to the last user's end (or a listener's last document).
 */
#ifndef PT_SIM_H
#define PT_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "patterns.h"

/* ---- pt_hist.c: log-linear latency histogram ------------------------------ */

/*
 * HdrHistogram's layout with 64 sub-buckets per power of two: values below
 * 128 are counted exactly; above, a value v with 2^(6+e) <= v < 2^(7+e)
 * falls in a bucket 2^e wide, so a bucket spans at most 1/64 of its lowest
 * value.  A percentile is reported as the midpoint of its bucket (clamped
 * to the exact min and max), within 1/128 < 1% of the exact order
 * statistic.  Values are nanoseconds, up to 2^40 ns (about 18 minutes);
 * larger ones are counted in the last bucket.
 *
 *   index:  0..127        v itself                       (width 1)
 *           128..191      v in [128, 256)    v >> 1 + 64 (width 2)
 *           e*64+64..     v in [2^(6+e), 2^(7+e))        (width 2^e)
 */
#define PT_HIST_SUB_BITS 6
#define PT_HIST_SUB (1 << PT_HIST_SUB_BITS)
#define PT_HIST_MAX_BITS 40
#define PT_HIST_BUCKETS ((PT_HIST_MAX_BITS - PT_HIST_SUB_BITS + 1) * PT_HIST_SUB + PT_HIST_SUB)
#define PT_HIST_REL_ERROR 0.01 /* the stated bound; the layout gives 1/128 */

typedef struct pt_hist {
    int64_t count;
    int64_t min, max;          /* exact, ns */
    double mean, m2;           /* Welford's running sums, ns */
    uint64_t counts[PT_HIST_BUCKETS];
} pt_hist;

void pt_hist_init(pt_hist *h);
void pt_hist_record(pt_hist *h, int64_t ns);
/* Add src's values to dst (Chan's merge of the running sums). */
void pt_hist_merge(pt_hist *dst, const pt_hist *src);
/* The bucket of a value, and the bounds [lo, hi] of a bucket. */
size_t pt_hist_index(int64_t ns);
int64_t pt_hist_bucket_lo(size_t i);
int64_t pt_hist_bucket_hi(size_t i);
/* The value at percentile pct (0 < pct <= 100) by nearest rank: the
 * ceil(pct/100 * count)-th smallest value, as its bucket's midpoint.  0 for
 * an empty histogram. */
int64_t pt_hist_percentile(const pt_hist *h, double pct);
double pt_hist_mean(const pt_hist *h);   /* ns, exact */
double pt_hist_sd(const pt_hist *h);     /* ns, sample standard deviation */

/* ---- pt_stats.c: a table row, the verdict ---------------------------------- */

/* One row of the book's table from a histogram (ms; runtime in seconds). */
void pt_figures_from_hist(const pt_hist *h, double runtime_s, pt_figures *f);

/* "mmapv1", "btree" or "tie": the lower sum of decisive mean latencies
 * wins unless the larger is within 10% of the smaller (a tie). */
const char *pt_verdict(double mmapv1_ms, double btree_ms);
#define PT_TIE_MARGIN 0.10
/* Does our verdict agree with the book's (both "mmapv1", "btree" or "tie")? */
bool pt_verdict_agrees(const char *ours, const char *book);
/* How many of n (ours, book) pairs agree; NULL entries (not measured)
 * count as disagreement. */
int pt_agree_count(const char *const *ours, const char *const *book, int n);

/* ---- pt_sim.c: one scenario on one engine ---------------------------------- */

/* The book's simulator parameters (digest section 5: every table used them). */
#define PT_BOOK_PROCESSES 4
#define PT_BOOK_POOL_SIZE 50
#define PT_BOOK_RESOLUTION_MS 1000
#define PT_BOOK_ITERATIONS 25

typedef struct pt_run_opts {
    const char *engine;       /* "mmapv1", "btree", "ephemeralForTest" */
    const char *tmpdir;       /* parent of the run's fresh directory (NULL: $TMPDIR or /tmp) */
    int processes, pool_size; /* clients = processes * pool_size */
    int resolution_ms, iterations;
    double rate_scale;        /* users per iteration = book users * rate_scale */
    bool quick;               /* passed to setup */
    bool journal;             /* mmapv1 journal / btree log (MongoDB 3.x: on) */
    uint64_t seed;
    /* Stop starting users this many seconds after the first scheduled
     * start (0: never); those left are counted in pt_op_result.skipped. */
    double max_run_s;
    /* Called about every 250 ms from the running thread while users run. */
    void (*progress)(void *arg, int64_t done, int64_t total, double elapsed_s);
    void *progress_arg;
    /* Then measure the service time: on a second fresh database, one
     * iteration's users run back to back by one client, in their start
     * order (no waiting, no other client): what an op costs the engine and
     * the query layer with nothing around it.  false: skip it. */
    bool service;
} pt_run_opts;

/* The book's defaults (4 x 50 clients, 25 x 1000 ms, scale 1, journal on). */
void pt_run_opts_book(pt_run_opts *o, const char *engine);

/* Engine counters sampled after setup and after the run (their difference
 * explains a verdict): serverStatus and the sum of collStats over every
 * collection. */
typedef struct pt_counters {
    int64_t lock_waits;       /* locks.Collection + Database acquireWaitCount, all modes */
    int64_t lock_wait_us;     /* ... timeAcquiringMicros */
    int64_t write_conflicts;  /* metrics.operation.writeConflicts */
    int64_t latch_wait_us;    /* btree: its engine latch's shared + exclusive wait
                                 and its commit mutex's (btree.transaction.latch
                                 *WaitMicros, all threads) */
    int64_t moves;            /* metrics.record.moves */
    int64_t inserts, updates, in_place, bytes_written; /* collStats.<engine> sums */
    int64_t cpu_us;           /* the process's user + system CPU time (getrusage) */
} pt_counters;

typedef struct pt_op_result {
    const char *name;
    int64_t users;            /* started */
    int64_t skipped;          /* never started: the run hit max_run_s */
    int64_t errors;           /* run() returned nonzero */
    int first_rc;
    char first_error[256];
    pt_hist hist;             /* successful users' latencies */
    pt_figures fig;           /* from hist, ms */
    double service_ms;        /* mean service time (opts.service; 0: not measured) */
    int64_t service_users;
} pt_op_result;

typedef struct pt_run_result {
    const pt_scenario *sc;
    char engine[32];
    int clients, iterations, resolution_ms;
    double rate_scale;
    double runtime_s;
    double setup_s;
    int nops;
    pt_op_result ops[PT_MAX_OPS];
    pt_counters before, after, delta;
    int check_rc;             /* check()'s result (0: the invariants hold) */
    char check_error[256];
    char service_error[256];  /* the service-time run failed (it is left out) */
    bool ok;                  /* no op error, check passed */
    bool cut_off;             /* max_run_s stopped it before every user ran */
    double max_run_s;
} pt_run_result;

/* Did the book's run of sc go past saturation: an op's mean latency over
 * `ms` on either engine in the book's tables? */
bool pt_book_saturated(const pt_scenario *sc, double ms);
/* Does op j count toward its pattern's verdict: marked `decides`, or no op
 * of the scenario is marked (then every op counts). */
bool pt_op_decides(const pt_scenario *sc, int j);
/* pt_verdict applied to the book's own figures: the sums of the deciding
 * ops' book means on MMAPv1 and on WiredTiger.  Where the chapter's text
 * calls it otherwise (p->book_winner is the text's call), the report says
 * how the count would read against the figures. */
const char *pt_book_figures_verdict(const pt_pattern *p);

/* Users an op starts per iteration under these options (at least 1). */
int64_t pt_op_users_per_iteration(const pt_op *op, const pt_run_opts *o);
/* Listeners a custom-execution op (pt_op.listen) starts: its `users` times
 * the rate scale, at least 1. */
int64_t pt_op_listeners(const pt_op *op, const pt_run_opts *o);

/*
 * Run `sc` on a fresh database in a new temporary directory (removed after):
 * open, setup, the timed users, counters, check, destroy, close.  `r` is
 * filled (caller's storage; large: allocate it).  Returns 0 when the run
 * happened (r->ok then says whether every user and the check succeeded),
 * negative when it could not (open or setup failed; err says why).
 */
int pt_run_scenario(const pt_scenario *sc, const pt_run_opts *o, pt_run_result *r,
                    md_error *err);

/* Sample the counters of an open database. */
int pt_counters_sample(md_db *db, pt_counters *c, md_error *err);

#endif /* PT_SIM_H */
