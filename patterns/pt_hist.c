/*
 * pt_hist.c -- the runner's latency histogram: HdrHistogram's log-linear
 * bucket array (64 sub-buckets per power of two, layout in pt_sim.h), so a
 * percentile is known to within 1/128 of the exact order statistic however
 * many values were recorded, plus exact running sums (Welford) for the mean
 * and the standard deviation.  One histogram per client thread and op;
 * pt_hist_merge adds them up after the run, so recording takes no lock.
 */
#include <math.h>
#include <string.h>

#include "pt_sim.h"

void pt_hist_init(pt_hist *h)
{
    memset(h, 0, sizeof *h);
    h->min = INT64_MAX;
    h->max = 0;
}

size_t pt_hist_index(int64_t v)
{
    if (v < 0)
        v = 0;
    if (v >= ((int64_t)1 << PT_HIST_MAX_BITS))
        v = ((int64_t)1 << PT_HIST_MAX_BITS) - 1;
    if (v < 2 * PT_HIST_SUB)
        return (size_t)v;
    int e = (63 - __builtin_clzll((unsigned long long)v)) - PT_HIST_SUB_BITS;
    return (size_t)e * PT_HIST_SUB + (size_t)(v >> e);
}

int64_t pt_hist_bucket_lo(size_t i)
{
    if (i < 2 * PT_HIST_SUB)
        return (int64_t)i;
    int e = (int)(i / PT_HIST_SUB) - 1;
    return (int64_t)(i - (size_t)e * PT_HIST_SUB) << e;
}

int64_t pt_hist_bucket_hi(size_t i)
{
    if (i < 2 * PT_HIST_SUB)
        return (int64_t)i;
    int e = (int)(i / PT_HIST_SUB) - 1;
    return pt_hist_bucket_lo(i) + ((int64_t)1 << e) - 1;
}

void pt_hist_record(pt_hist *h, int64_t ns)
{
    if (ns < 0)
        ns = 0;
    h->counts[pt_hist_index(ns)]++;
    h->count++;
    if (ns < h->min)
        h->min = ns;
    if (ns > h->max)
        h->max = ns;
    double d = (double)ns - h->mean;
    h->mean += d / (double)h->count;
    h->m2 += d * ((double)ns - h->mean);
}

void pt_hist_merge(pt_hist *dst, const pt_hist *src)
{
    if (src->count == 0)
        return;
    for (size_t i = 0; i < PT_HIST_BUCKETS; i++)
        dst->counts[i] += src->counts[i];
    double na = (double)dst->count, nb = (double)src->count, n = na + nb;
    double d = src->mean - dst->mean;
    dst->mean += d * nb / n;
    dst->m2 += src->m2 + d * d * na * nb / n;
    dst->count += src->count;
    if (src->min < dst->min)
        dst->min = src->min;
    if (src->max > dst->max)
        dst->max = src->max;
}

int64_t pt_hist_percentile(const pt_hist *h, double pct)
{
    if (h->count == 0)
        return 0;
    double want = ceil(pct / 100.0 * (double)h->count - 1e-9);
    int64_t rank = want < 1 ? 1 : (int64_t)want;
    if (rank > h->count)
        rank = h->count;
    int64_t seen = 0;
    for (size_t i = 0; i < PT_HIST_BUCKETS; i++) {
        seen += (int64_t)h->counts[i];
        if (seen >= rank) {
            int64_t lo = pt_hist_bucket_lo(i), hi = pt_hist_bucket_hi(i);
            int64_t mid = lo + (hi - lo) / 2;
            if (mid < h->min)
                mid = h->min;
            if (mid > h->max)
                mid = h->max;
            return mid;
        }
    }
    return h->max;
}

double pt_hist_mean(const pt_hist *h)
{
    return h->count ? h->mean : 0.0;
}

double pt_hist_sd(const pt_hist *h)
{
    return h->count > 1 ? sqrt(h->m2 / (double)(h->count - 1)) : 0.0;
}
