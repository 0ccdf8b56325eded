/*
 * runner_report.c -- build/patterns' output: each run's table beside the
 * book's figures, the verdict per pattern with the measured causes when it
 * disagrees with the book, and the files: patterns.csv (one row per
 * scenario, op and engine), gnuplot latency-distribution plots
 * (patterns/<scenario>-<engine>.png; skipped with a message when gnuplot
 * is missing) and patterns.md, the report docs/patterns.md is (its part
 * II, the Applied Design Patterns use cases, is appended by runner_ap.c;
 * they have no rows in patterns.csv).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runner.h"

static void print_queue(FILE *f, const rn_run *run);

static const char *const col_names[] = {"Runtime", "Mean", "Std Dev", "75%", "95%",
                                        "99%", "Min", "Max"};

const pt_figures *rn_book_figures(const pt_op *op, const char *engine)
{
    const pt_figures *f = NULL;
    if (strcmp(engine, "mmapv1") == 0)
        f = &op->book_mmap;
    else if (strcmp(engine, "btree") == 0)
        f = &op->book_wt;
    if (f && f->runtime_s == 0 && f->mean == 0 && f->max == 0)
        return NULL;
    return f;
}

void rn_verdicts(rn_run *run)
{
    for (int i = 0; i < run->npat; i++) {
        rn_pattern *rp = &run->pat[i];
        bool complete = true;
        int seen = 0;
        rp->sum_ms[0] = rp->sum_ms[1] = rp->svc_ms[0] = rp->svc_ms[1] = 0;
        for (int k = 0; k < run->nsc; k++) {
            rn_scenario *s = &run->sc[k];
            if (s->p != rp->p)
                continue;
            seen++;
            for (int e = 0; e < 2; e++) {
                if (!s->r[e]) {
                    complete = false;
                    continue;
                }
                for (int j = 0; j < s->sc->nops; j++)
                    if (pt_op_decides(s->sc, j)) {
                        rp->sum_ms[e] += s->r[e]->ops[j].fig.mean;
                        rp->svc_ms[e] += s->r[e]->ops[j].service_ms;
                    }
            }
        }
        rp->ours = complete && seen == rp->p->nscenarios
                       ? pt_verdict(rp->sum_ms[0], rp->sum_ms[1])
                       : NULL;
    }
}

int rn_agree_count(const rn_run *run, bool figures)
{
    const char *ours[64], *book[64];
    int n = 0;
    for (int i = 0; i < run->npat && n < 64; i++, n++) {
        ours[n] = run->pat[i].ours;
        book[n] = figures ? pt_book_figures_verdict(run->pat[i].p) : run->pat[i].p->book_winner;
    }
    return pt_agree_count(ours, book, n);
}

void rn_print_figures_count(FILE *f, const rn_run *run)
{
    int changed = 0;
    for (int i = 0; i < run->npat; i++) {
        const pt_pattern *p = run->pat[i].p;
        const char *fig = pt_book_figures_verdict(p);
        if (strcmp(fig, p->book_winner) == 0)
            continue;
        fprintf(f, "%s%s %s: %s", changed ? "; " : "Judged against the book's own figures "
                "instead of its text (the same rule applied to the book's mean latencies "
                "calls ", p->section, p->title, fig);
        changed++;
    }
    if (changed)
        fprintf(f, ", where its text says otherwise), %d of 11 would agree.\n",
                rn_agree_count(run, true));
}

static void fig_values(const pt_figures *f, double v[8])
{
    v[0] = f->runtime_s;
    v[1] = f->mean;
    v[2] = f->sd;
    v[3] = f->p75;
    v[4] = f->p95;
    v[5] = f->p99;
    v[6] = f->min;
    v[7] = f->max;
}

static double per_write(const pt_counters *c)
{
    int64_t w = c->inserts + c->updates;
    return w ? (double)c->bytes_written / (double)w : 0.0;
}

static void print_counters(FILE *f, const char *lead, const pt_counters *c)
{
    fprintf(f,
            "%slock waits %lld (%.1f ms waited), engine latch waited %.1f ms, write "
            "conflicts %lld, inserts %lld, updates %lld (in place %lld, moves %lld), bytes "
            "written %lld (%.0f per write), CPU %.2f s\n",
            lead, (long long)c->lock_waits, (double)c->lock_wait_us / 1000.0,
            (double)c->latch_wait_us / 1000.0, (long long)c->write_conflicts,
            (long long)c->inserts, (long long)c->updates,
            (long long)c->in_place, (long long)c->moves, (long long)c->bytes_written,
            per_write(c), (double)c->cpu_us / 1e6);
}

void rn_print_table(FILE *f, const rn_scenario *s, const pt_run_result *r)
{
    fprintf(f, "\n== %s %s / %s on %s: %d x %d ms, rate x%g, %d clients, setup %.2f s\n",
            s->p->section, s->p->title, s->sc->name, r->engine, r->iterations,
            r->resolution_ms, r->rate_scale, r->clients, r->setup_s);
    fprintf(f, "   %-30s %-8s", "op", "");
    for (int c = 0; c < 8; c++)
        fprintf(f, " %10s", col_names[c]);
    fprintf(f, " %8s %6s\n", "users", "errors");
    for (int j = 0; j < r->nops; j++) {
        const pt_op_result *o = &r->ops[j];
        double v[8];
        fig_values(&o->fig, v);
        fprintf(f, "   %-30s %-8s %8.3f s", o->name, "minidoc", v[0]);
        for (int c = 1; c < 8; c++)
            fprintf(f, " %10.3f", v[c]);
        fprintf(f, " %8lld %6lld\n", (long long)o->users, (long long)o->errors);
        const pt_figures *b = rn_book_figures(&s->sc->ops[j], r->engine);
        if (b) {
            fig_values(b, v);
            fprintf(f, "   %-30s %-8s %8.3f s", "", "book", v[0]);
            for (int c = 1; c < 8; c++)
                fprintf(f, " %10.3f", v[c]);
            fprintf(f, "\n");
        }
        if (o->errors)
            fprintf(f, "   ERROR: %lld of %lld %s users failed; first: %s\n",
                    (long long)o->errors, (long long)o->users, o->name, o->first_error);
    }
    print_counters(f, "   counters: ", &r->delta);
    if (r->cut_off)
        for (int j = 0; j < r->nops; j++)
            if (r->ops[j].skipped)
                fprintf(f, "   CUT OFF after %g s: %lld of %lld %s users never started\n",
                        r->max_run_s, (long long)r->ops[j].skipped,
                        (long long)(r->ops[j].skipped + r->ops[j].users), r->ops[j].name);
    if (r->check_rc)
        fprintf(f, "   CHECK FAILED: %s\n", r->check_error);
}

/* The pattern's counters on one engine slot, summed over its scenarios. */
static void pattern_counters(const rn_run *run, const pt_pattern *p, int e, pt_counters *c)
{
    memset(c, 0, sizeof *c);
    for (int k = 0; k < run->nsc; k++) {
        const pt_run_result *r = run->sc[k].r[e];
        if (run->sc[k].p != p || !r)
            continue;
        c->lock_waits += r->delta.lock_waits;
        c->lock_wait_us += r->delta.lock_wait_us;
        c->write_conflicts += r->delta.write_conflicts;
        c->latch_wait_us += r->delta.latch_wait_us;
        c->moves += r->delta.moves;
        c->inserts += r->delta.inserts;
        c->updates += r->delta.updates;
        c->in_place += r->delta.in_place;
        c->bytes_written += r->delta.bytes_written;
        c->cpu_us += r->delta.cpu_us;
    }
}

static const char *decisive_ops(const rn_run *run, const pt_pattern *p, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < p->nscenarios; i++)
        for (int j = 0; j < p->scenarios[i]->nops; j++)
            if (pt_op_decides(p->scenarios[i], j) && len < n)
                len += (size_t)snprintf(buf + len, n - len, "%s%s", len ? " + " : "",
                                        p->scenarios[i]->ops[j].name);
    return buf;
}

void rn_print_verdict(FILE *f, const rn_run *run, const rn_pattern *rp)
{
    char ops[512];
    decisive_ops(run, rp->p, ops, sizeof ops);
    if (!rp->ours) {
        fprintf(f, "-- verdict %s %s: not measured on both mmapv1 and btree\n",
                rp->p->section, rp->p->title);
        return;
    }
    bool agree = pt_verdict_agrees(rp->ours, rp->p->book_winner);
    for (int k = 0; k < run->nsc; k++)
        for (int e = 0; e < 2; e++)
            if (run->sc[k].p == rp->p && run->sc[k].r[e] && run->sc[k].r[e]->cut_off)
                fprintf(f, "   (%s on %s was cut off: its mean is a backlog's)\n",
                        run->sc[k].sc->name, run->sc[k].r[e]->engine);
    fprintf(f,
            "-- verdict %s %s: mmapv1 %.3f ms, btree %.3f ms (mean of %s) -> %s; "
            "book: %s -> %s\n",
            rp->p->section, rp->p->title, rp->sum_ms[0], rp->sum_ms[1], ops, rp->ours,
            rp->p->book_winner, agree ? "agree" : "DISAGREE");
    if (rp->svc_ms[0] > 0 && rp->svc_ms[1] > 0)
        fprintf(f, "   service time (one client, back to back): mmapv1 %.1f us, btree %.1f us\n",
                rp->svc_ms[0] * 1e3, rp->svc_ms[1] * 1e3);
    if (strcmp(rp->p->name, "queue") == 0)
        print_queue(f, run);
    if (!agree) {
        pt_counters c;
        pattern_counters(run, rp->p, RN_MMAPV1, &c);
        print_counters(f, "   why, mmapv1: ", &c);
        pattern_counters(run, rp->p, RN_BTREE, &c);
        print_counters(f, "   why, btree:  ", &c);
    }
}

/* ---- CSV ----------------------------------------------------------------------- */

static void csv_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

int rn_write_csv(const rn_run *run, const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/patterns.csv", dir);
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return -1;
    }
    fprintf(f, "section,pattern,scenario,op,decides,engine,rate_scale,clients,iterations,"
               "resolution_ms,users,errors,runtime_s,mean_ms,sd_ms,p75_ms,p95_ms,p99_ms,"
               "min_ms,max_ms,book_runtime_s,book_mean_ms,book_sd_ms,book_p75_ms,"
               "book_p95_ms,book_p99_ms,book_min_ms,book_max_ms,lock_waits,lock_wait_ms,"
               "write_conflicts,inserts,updates,in_place_updates,moves,bytes_written,"
               "cpu_s,check,not_started,service_ms,latch_wait_ms\n");
    for (int k = 0; k < run->nsc; k++) {
        const rn_scenario *s = &run->sc[k];
        for (int e = 0; e < RN_MAX_ENGINES; e++) {
            const pt_run_result *r = s->r[e];
            if (!r)
                continue;
            for (int j = 0; j < r->nops; j++) {
                double v[8], b[8] = {0};
                fig_values(&r->ops[j].fig, v);
                const pt_figures *bf = rn_book_figures(&s->sc->ops[j], r->engine);
                if (bf)
                    fig_values(bf, b);
                csv_str(f, s->p->section);
                fputc(',', f);
                csv_str(f, s->p->name);
                fprintf(f, ",%s,%s,%d,%s,%g,%d,%d,%d,%lld,%lld", s->sc->name, r->ops[j].name,
                        s->sc->ops[j].decides, r->engine, r->rate_scale, r->clients,
                        r->iterations, r->resolution_ms, (long long)r->ops[j].users,
                        (long long)r->ops[j].errors);
                for (int c = 0; c < 8; c++)
                    fprintf(f, ",%.3f", v[c]);
                for (int c = 0; c < 8; c++)
                    if (bf)
                        fprintf(f, ",%.3f", b[c]);
                    else
                        fprintf(f, ",");
                const pt_counters *d = &r->delta;
                fprintf(f, ",%lld,%.3f,%lld,%lld,%lld,%lld,%lld,%lld,%.3f,",
                        (long long)d->lock_waits, (double)d->lock_wait_us / 1000.0,
                        (long long)d->write_conflicts, (long long)d->inserts,
                        (long long)d->updates, (long long)d->in_place, (long long)d->moves,
                        (long long)d->bytes_written, (double)d->cpu_us / 1e6);
                csv_str(f, r->check_rc ? r->check_error : "ok");
                fprintf(f, ",%lld,", (long long)r->ops[j].skipped);
                if (r->ops[j].service_users)
                    fprintf(f, "%.4f", r->ops[j].service_ms);
                fprintf(f, ",%.3f\n", (double)d->latch_wait_us / 1000.0);
            }
        }
    }
    return fclose(f) == 0 ? 0 : -1;
}

/* ---- plots ------------------------------------------------------------------------ */

/* HdrHistogram's percentile distribution: x = 1/(1 - q) on a log axis. */
static void write_distribution(FILE *f, const pt_hist *h)
{
    int64_t seen = 0;
    fprintf(f, "1 %.6f\n", (double)h->min / 1e6);
    for (size_t i = 0; i < PT_HIST_BUCKETS; i++) {
        if (!h->counts[i])
            continue;
        seen += (int64_t)h->counts[i];
        double q = (double)seen / (double)h->count;
        if (q > 1.0 - 0.5 / (double)h->count)
            q = 1.0 - 0.5 / (double)h->count;
        int64_t hi = pt_hist_bucket_hi(i);
        fprintf(f, "%.6f %.6f\n", 1.0 / (1.0 - q), (double)(hi < h->max ? hi : h->max) / 1e6);
    }
    fprintf(f, "\n\n");
}

static int plot_one(const rn_scenario *s, const pt_run_result *r, const char *dir)
{
    char dat[4096], gp[4096], png[4096];
    snprintf(dat, sizeof dat, "%s/patterns/%s-%s.dat", dir, s->sc->name, r->engine);
    snprintf(gp, sizeof gp, "%s/patterns/%s-%s.gp", dir, s->sc->name, r->engine);
    snprintf(png, sizeof png, "%s/patterns/%s-%s.png", dir, s->sc->name, r->engine);
    FILE *d = fopen(dat, "w"), *g = fopen(gp, "w");
    if (!d || !g) {
        if (d)
            fclose(d);
        if (g)
            fclose(g);
        perror(dat);
        return -1;
    }
    int nplotted = 0;
    fprintf(g, "set terminal png size 800,480\nset output '%s'\n", png);
    fprintf(g, "set title \"%s on %s (minidoc, rate x%g, %d clients, %d x %d ms)\" noenhanced\n",
            s->sc->name, r->engine, r->rate_scale, r->clients, r->iterations,
            r->resolution_ms);
    fprintf(g, "set logscale x\nset logscale y\nset grid\nset key top left noenhanced\n"
               "set xlabel 'percentile'\nset ylabel 'latency (ms)'\n"
               "set xtics ('0%%%%' 1, '50%%%%' 2, '90%%%%' 10, '99%%%%' 100, '99.9%%%%' 1000, "
               "'99.99%%%%' 10000, '99.999%%%%' 100000)\n");
    fprintf(g, "plot");
    for (int j = 0; j < r->nops; j++) {
        if (r->ops[j].hist.count == 0)
            continue;
        write_distribution(d, &r->ops[j].hist);
        fprintf(g, "%s '%s' index %d using 1:2 with steps lw 2 title '%s'", nplotted ? "," : "",
                dat, nplotted, r->ops[j].name);
        nplotted++;
    }
    fprintf(g, "\n");
    fclose(d);
    fclose(g);
    int rc = 0;
    if (nplotted) {
        char cmd[8192];
        snprintf(cmd, sizeof cmd, "gnuplot '%s'", gp);
        if (system(cmd) != 0) {
            fprintf(stderr, "patterns: gnuplot failed on %s\n", gp);
            rc = -1;
        }
    }
    unlink(dat);
    unlink(gp);
    return rc;
}

static bool have_gnuplot(void)
{
    return system("command -v gnuplot >/dev/null 2>&1") == 0;
}

int rn_write_plots(const rn_run *run, const char *dir)
{
    if (!have_gnuplot()) {
        printf("gnuplot not found: no plots (install gnuplot-nox for %s/patterns/*.png)\n",
               dir);
        return 0;
    }
    int rc = 0;
    for (int k = 0; k < run->nsc; k++)
        for (int e = 0; e < RN_MAX_ENGINES; e++)
            if (run->sc[k].r[e] && plot_one(&run->sc[k], run->sc[k].r[e], dir))
                rc = -1;
    return rc;
}

/* ---- patterns.md -------------------------------------------------------------- */

static void md_fig_row(FILE *f, const char *op, const char *engine, const char *src,
                       const pt_figures *fig)
{
    double v[8];
    fig_values(fig, v);
    fprintf(f, "| %s | %s | %s | %.3f s", op, engine, src, v[0]);
    for (int c = 1; c < 8; c++)
        fprintf(f, " | %.3f", v[c]);
    fprintf(f, " |\n");
}

static void md_scenario(FILE *f, const rn_run *run, const rn_scenario *s)
{
    fprintf(f, "\n#### %s: %s\n\n", s->sc->name, s->sc->title);
    for (int e = 0; e < RN_MAX_ENGINES; e++)
        if (s->r[e]) {
            fprintf(f, "Rate x%g, %d clients, %d x %d ms. ", s->r[e]->rate_scale,
                    s->r[e]->clients, s->r[e]->iterations, s->r[e]->resolution_ms);
            break;
        }
    if (*s->scale_why)
        fprintf(f, "Load: %s. ", s->scale_why);
    if (s->sc->script)
        fprintf(f, "Simulator scenario: `%s`.\n\n", s->sc->script);
    if (s->sc->note)
        fprintf(f, "%s\n\n", s->sc->note);
    fprintf(f, "| op | engine | | Runtime | Mean | Std Dev | 75%% | 95%% | 99%% | Min | Max |\n"
               "|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int j = 0; j < s->sc->nops; j++)
        for (int e = 0; e < RN_MAX_ENGINES; e++) {
            const pt_run_result *r = s->r[e];
            if (!r)
                continue;
            md_fig_row(f, s->sc->ops[j].name, r->engine, "**minidoc**", &r->ops[j].fig);
            const pt_figures *b = rn_book_figures(&s->sc->ops[j], r->engine);
            if (b)
                md_fig_row(f, "", "", e == RN_MMAPV1 ? "book (MMAP)" : "book (WT)", b);
        }
    fprintf(f, "\n| engine | users | errors | lock waits | waited (ms) | engine latch waited "
               "(ms) | write conflicts | inserts | updates | in place | moves | bytes written | "
               "bytes/write | CPU (s) | check |\n"
               "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int e = 0; e < RN_MAX_ENGINES; e++) {
        const pt_run_result *r = s->r[e];
        if (!r)
            continue;
        int64_t users = 0, errors = 0;
        for (int j = 0; j < r->nops; j++) {
            users += r->ops[j].users;
            errors += r->ops[j].errors;
        }
        const pt_counters *d = &r->delta;
        fprintf(f, "| %s | %lld | %lld | %lld | %.1f | %.1f | %lld | %lld | %lld | %lld | %lld | "
                   "%lld | %.0f | %.2f | %s |\n",
                r->engine, (long long)users, (long long)errors, (long long)d->lock_waits,
                (double)d->lock_wait_us / 1000.0, (double)d->latch_wait_us / 1000.0,
                (long long)d->write_conflicts,
                (long long)d->inserts, (long long)d->updates, (long long)d->in_place,
                (long long)d->moves, (long long)d->bytes_written, per_write(d),
                (double)d->cpu_us / 1e6, r->check_rc ? "**failed**" : "ok");
    }
    fprintf(f, "\n");
    for (int e = 0; e < RN_MAX_ENGINES; e++)
        for (int j = 0; s->r[e] && j < s->r[e]->nops; j++)
            if (s->r[e]->ops[j].skipped)
                fprintf(f, "**Cut off on %s:** the run stopped starting users after %g s; "
                           "%lld of %lld `%s` users never started (the engine could not keep "
                           "up with the scheduled rate, so the latencies above are those of "
                           "a growing backlog).\n\n",
                        s->r[e]->engine, s->r[e]->max_run_s, (long long)s->r[e]->ops[j].skipped,
                        (long long)(s->r[e]->ops[j].skipped + s->r[e]->ops[j].users),
                        s->r[e]->ops[j].name);
    for (int e = 0; e < RN_MAX_ENGINES; e++)
        if (s->r[e])
            fprintf(f, "![%s on %s](patterns/%s-%s.png)\n", s->sc->name, s->r[e]->engine,
                    s->sc->name, s->r[e]->engine);
    (void)run;
}

static const pt_op_result *find_op(const pt_run_result *r, const char *part)
{
    for (int j = 0; r && j < r->nops; j++)
        if (strstr(r->ops[j].name, part))
            return &r->ops[j];
    return NULL;
}

/* The Queue's scenario with its fetch op measured on both engines. */
static const rn_scenario *queue_fetch(const rn_run *run, const pt_op_result **m,
                                      const pt_op_result **b)
{
    for (int k = 0; k < run->nsc; k++) {
        const rn_scenario *s = &run->sc[k];
        if (strcmp(s->p->name, "queue") != 0)
            continue;
        *m = find_op(s->r[RN_MMAPV1], "fetch");
        *b = find_op(s->r[RN_BTREE], "fetch");
        if (*m && *b)
            return s;
    }
    return NULL;
}

static void print_queue(FILE *f, const rn_run *run)
{
    const pt_op_result *m, *b;
    if (!queue_fetch(run, &m, &b))
        return;
    fprintf(f, "   queue: mean %s latency mmapv1 %.3f ms, btree %.3f ms, ratio %.3g "
               "(book: 15195.361 / 48.493 = 313.3)\n",
            m->name, m->fig.mean, b->fig.mean, b->fig.mean > 0 ? m->fig.mean / b->fig.mean : 0);
}

/* The Queue's starvation: mean fetch latency on both engines and the ratio. */
static void md_queue(FILE *f, const rn_run *run)
{
    const pt_op_result *m, *b, *pm, *pb;
    const rn_scenario *s = queue_fetch(run, &m, &b);
    if (!s)
        return;
    const pt_run_result *rm = s->r[RN_MMAPV1], *rb = s->r[RN_BTREE];
    pm = find_op(rm, "publish");
    pb = find_op(rb, "publish");
    fprintf(f,
            "\n### The Queue: readers behind the collection write lock (%s)\n\n"
            "At the book's publisher/reader ratio (1000:300 users per second, here x%g), "
            "the mean `%s` latency is **%.3f ms on mmapv1** and **%.3f ms on btree**, a "
            "ratio of **%.3g** (the book: 15195.361 / 48.493 ms = 313.3)",
            s->sc->name, rm->rate_scale, m->name, m->fig.mean, b->fig.mean,
            b->fig.mean > 0 ? m->fig.mean / b->fig.mean : 0.0);
    if (pm && pb)
        fprintf(f, "; publishing took %.3f ms on mmapv1 and %.3f ms on btree", pm->fig.mean,
                pb->fig.mean);
    fprintf(f,
            ". Each findAndModify needs the collection's write lock on mmapv1 and the "
            "publishers' inserts take it too: on mmapv1 operations waited %lld times for "
            "a lock, %.1f ms in all (serverStatus locks acquireWaitCount / "
            "timeAcquiringMicros); on btree %lld times, its engine latch waited %.1f ms in "
            "all, with %lld write conflicts "
            "(metrics.operation.writeConflicts: readers racing for the same oldest job). "
            "The runtime was %.1f s on mmapv1 and %.1f s on btree for %d x %d ms of "
            "scheduled users.\n",
            (long long)rm->delta.lock_waits, (double)rm->delta.lock_wait_us / 1000.0,
            (long long)rb->delta.lock_waits, (double)rb->delta.latch_wait_us / 1000.0,
            (long long)rb->delta.write_conflicts,
            rm->runtime_s, rb->runtime_s, rm->iterations, rm->resolution_ms);
}

static void md_counters_sentence(FILE *f, const char *engine, const pt_counters *c)
{
    fprintf(f,
            "%s: %lld lock waits (%.1f ms waited), engine latch waited %.1f ms, %lld write "
            "conflicts, %lld updates (%lld in place, %lld moves), %.0f bytes written per "
            "write, %.2f s of CPU",
            engine, (long long)c->lock_waits, (double)c->lock_wait_us / 1000.0,
            (double)c->latch_wait_us / 1000.0, (long long)c->write_conflicts, (long long)c->updates, (long long)c->in_place,
            (long long)c->moves, per_write(c), (double)c->cpu_us / 1e6);
}

int rn_write_markdown(const rn_run *run, const char *dir)
{
    char path[4096], ops[512];
    snprintf(path, sizeof path, "%s/patterns.md", dir);
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return -1;
    }
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int measured = 0;
    for (int i = 0; i < run->npat; i++)
        measured += run->pat[i].ours != NULL;
    fprintf(f,
            "# The Little MongoDB Schema Design Book's tables, measured on minidoc\n\n"
            "<!-- generated by build/patterns (patterns/runner*.c); do not edit -->\n\n"
            "Generated by `%s` on %s (%ld CPUs; load average %s before, %s after; "
            "other work on the machine slows both engines and swells the backlogs), "
            "%.0f s in all.\n\n"
            "Each of the book's simulator runs (mongodb-schema-simulator) is repeated "
            "here on mmapv1 and on btree, each in a fresh database with the journal "
            "(mmapv1) and the log (btree) on, as MongoDB 3.0/3.2 ran by default. The "
            "simulator's model: %d client threads (%d processes x poolSize %d) share one "
            "open database; every op starts its users each iteration (%d iterations of "
            "%d ms, type `linear`), spread evenly across the iteration (`slicetime`); "
            "a user's latency runs from its start to its end: from its scheduled start if it "
            "waited for a free client (the driver's pool queue), else from its client's "
            "wake-up, as the simulator read the time when its timer fired; waiting for "
            "a client or a lock counts. Users per iteration are the book's x **%g**%s. "
            "Runtime is the wall time of the run, in seconds; "
            "the rest is in milliseconds. Percentiles come from a log-linear "
            "(HdrHistogram-style) histogram within 1%% of the exact value; the mean and "
            "standard deviation are exact. Absolute latencies are far below the book's "
            "(no network, no server); the point is the direction and its cause.\n\n",
            run->cmdline, run->started, ncpu, run->load_before, run->load_after, run->total_s, run->opts.processes *
            run->opts.pool_size, run->opts.processes, run->opts.pool_size,
            run->opts.iterations, run->opts.resolution_ms, run->opts.rate_scale,
            run->saturate
                ? ", except where the book's own run was past saturation (a mean of "
                  "seconds: its Queue, both carts, Theater and Account): the book's load "
                  "does not saturate minidoc, two orders of magnitude faster per "
                  "operation, so such a scenario runs at the smallest scale of 1, 2, 4, "
                  "8, 16 at which a 3-iteration probe has a deciding op's mean above 10 "
                  "ms on either engine -- past saturation, as the book's was (the "
                  "`load` column below; the probe that decided it is in each scenario's section). The "
                  "rule is fixed before any run and the same for each of them"
                : ", every scenario alike (`--rate-scale`)");

    fprintf(f, "## Verdicts\n\n"
               "The winner is the engine with the lower sum of the mean latencies of the "
               "pattern's deciding ops; a tie when the two are within 10%% of each other. "
               "The service time beside it is what the same ops cost with nothing around "
               "them: after each run, one iteration's users run back to back by one client "
               "on a fresh database (no schedule, no other client; a subscriber, which "
               "waits for a publisher, has none). Where the two columns disagree, the "
               "difference comes from running 200 clients at once (locks, latches, "
               "background threads), not from the operations themselves.\n\n"
               "| § | Pattern | load | deciding ops | mmapv1 (ms) | btree (ms) | service mmapv1 / btree (µs) | minidoc | book | agree |\n"
               "|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < run->npat; i++) {
        const rn_pattern *rp = &run->pat[i];
        decisive_ops(run, rp->p, ops, sizeof ops);
        char load[64] = "";
        for (int k = 0; k < run->nsc; k++)
            if (run->sc[k].p == rp->p)
                for (int e = 0; e < RN_MAX_ENGINES; e++)
                    if (run->sc[k].r[e]) {
                        snprintf(load, sizeof load, "x%g%s", run->sc[k].r[e]->rate_scale,
                                 run->sc[k].scale > 1 ? " (saturation rule)" : "");
                        break;
                    }
        if (rp->ours)
            fprintf(f, "| %s | %s | %s | %s | %.3f | %.3f | %.1f / %.1f | %s | %s | %s |\n",
                    rp->p->section, rp->p->title, load, ops, rp->sum_ms[0], rp->sum_ms[1],
                    rp->svc_ms[0] * 1e3, rp->svc_ms[1] * 1e3, rp->ours, rp->p->book_winner,
                    pt_verdict_agrees(rp->ours, rp->p->book_winner) ? "yes" : "**no**");
        else
            fprintf(f, "| %s | %s | %s | %s | | | | not measured | %s | |\n", rp->p->section,
                    rp->p->title, load, ops, rp->p->book_winner);
    }
    fprintf(f, "\n**%d of 11 verdicts agree with the book.** (%d of the 11 patterns were "
               "measured on both engines in this run.)\n",
            rn_agree_count(run, false), measured);
    fprintf(f, "\n");
    rn_print_figures_count(f, run);

    bool any = false;
    for (int i = 0; i < run->npat; i++) {
        const rn_pattern *rp = &run->pat[i];
        if (!rp->ours || pt_verdict_agrees(rp->ours, rp->p->book_winner))
            continue;
        if (!any)
            fprintf(f, "\n### Where minidoc disagrees, and the measured cause\n\n");
        any = true;
        pt_counters c;
        fprintf(f, "- **%s %s** (minidoc: %s, book: %s; book's reason: %s). ",
                rp->p->section, rp->p->title, rp->ours, rp->p->book_winner,
                rp->p->book_reason ? rp->p->book_reason : "");
        pattern_counters(run, rp->p, RN_MMAPV1, &c);
        md_counters_sentence(f, "mmapv1", &c);
        fprintf(f, "; ");
        pattern_counters(run, rp->p, RN_BTREE, &c);
        md_counters_sentence(f, "btree", &c);
        if (rp->svc_ms[0] > 0 && rp->svc_ms[1] > 0)
            fprintf(f, "; service time %.1f µs on mmapv1, %.1f µs on btree", rp->svc_ms[0] * 1e3,
                    rp->svc_ms[1] * 1e3);
        fprintf(f, ".\n");
    }
    md_queue(f, run);

    fprintf(f, "\n## The tables, minidoc beside the book\n");
    for (int i = 0; i < run->npat; i++) {
        const rn_pattern *rp = &run->pat[i];
        fprintf(f, "\n### %s %s\n\n", rp->p->section, rp->p->title);
        fprintf(f, "The book: **%s**. %s\n", rp->p->book_winner,
                rp->p->book_reason ? rp->p->book_reason : "");
        if (rp->ours)
            fprintf(f, "\nminidoc: **%s** (mmapv1 %.3f ms, btree %.3f ms).\n", rp->ours,
                    rp->sum_ms[0], rp->sum_ms[1]);
        for (int k = 0; k < run->nsc; k++)
            if (run->sc[k].p == rp->p)
                md_scenario(f, run, &run->sc[k]);
    }
    return fclose(f) == 0 ? 0 : -1;
}
