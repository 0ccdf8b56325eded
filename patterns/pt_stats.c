/*
 * pt_stats.c -- a row of the book's statistics table from a histogram, and
 * the verdict rule: per engine the sum of the mean latencies of the ops
 * that decide a pattern; the lower sum wins unless the larger is within
 * 10% of the smaller, which is a tie (the book calls near-equal means a
 * tie too, e.g. Metadata 0.954 vs 0.992 ms).
 */
#include <string.h>

#include "pt_sim.h"

void pt_figures_from_hist(const pt_hist *h, double runtime_s, pt_figures *f)
{
    const double ms = 1e6;
    f->runtime_s = runtime_s;
    f->mean = pt_hist_mean(h) / ms;
    f->sd = pt_hist_sd(h) / ms;
    f->p75 = (double)pt_hist_percentile(h, 75) / ms;
    f->p95 = (double)pt_hist_percentile(h, 95) / ms;
    f->p99 = (double)pt_hist_percentile(h, 99) / ms;
    f->min = h->count ? (double)h->min / ms : 0.0;
    f->max = (double)h->max / ms;
}

const char *pt_verdict(double mmapv1_ms, double btree_ms)
{
    double lo = mmapv1_ms < btree_ms ? mmapv1_ms : btree_ms;
    double hi = mmapv1_ms < btree_ms ? btree_ms : mmapv1_ms;
    if (hi <= lo * (1.0 + PT_TIE_MARGIN))
        return "tie";
    return mmapv1_ms < btree_ms ? "mmapv1" : "btree";
}

bool pt_verdict_agrees(const char *ours, const char *book)
{
    return ours && book && strcmp(ours, book) == 0;
}

int pt_agree_count(const char *const *ours, const char *const *book, int n)
{
    int agree = 0;
    for (int i = 0; i < n; i++)
        agree += pt_verdict_agrees(ours[i], book[i]);
    return agree;
}
