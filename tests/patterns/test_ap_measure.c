/*
 * test_ap_measure.c -- the measurement of every Applied Design Patterns use
 * case that decides its claims inside measure (ap_claim_set; chapters 5-9
 * but the inventory) at its quick sizes on mmapv1 and btree: it runs
 * without an error, records its metrics, decides every claim, and the
 * claims that rest on counts rather than on timings -- bytes written,
 * moves, in-place updates, explain's plans, documents returned -- come out
 * as the book says.  (The timing claims and the ones minidoc does not meet
 * are reported by build/patterns, not asserted here; the use cases with
 * judged claims are measured by their own suites through ap_run_usecase.)
 */
#include "ap.h"
#include "pt_test_util.h"

/* The claims (bit k: claim k) asserted to hold on both engines; -1 for a
 * use case whose claims have judges (chapters 1-4 and the inventory of
 * chapter 5), tested by its own suite. */
static long must_hold(const char *name)
{
    static const struct {
        const char *name;
        unsigned mask;
    } t[] = {
        {"ap_catalog", 1u << 2 | 1u << 3}, /* 0: multikey sort, 1: index filter: deviations */
        {"ap_category", 0x3},
        {"ap_cms", 0xf},
        {"ap_comments", 1u << 2 | 1u << 3}, /* 0, 1: read latencies */
        {"ap_ads", 0x7},
        {"ap_social", 0x7},
        {"ap_gaming", 0xf},
    };
    for (size_t i = 0; i < sizeof t / sizeof *t; i++)
        if (strcmp(t[i].name, name) == 0)
            return t[i].mask;
    return -1;
}

Test(ap_measure, every_use_case_quick, .timeout = 600)
{
    int n = 0;
    for (const ap_usecase *const *up = ap_usecases; *up; up++) {
        const ap_usecase *uc = *up;
        cr_assert(uc->nclaims >= 1 && uc->nclaims <= AP_MAX_CLAIMS);
        long mask = must_hold(uc->name);
        if (mask < 0)
            continue;
        n++;
        ptt_db t;
        PTT_FOR_EACH_ENGINE(t) {
            if (strcmp(t.engine, "mmapv1") && strcmp(t.engine, "btree"))
                continue;
            ap_result *r = calloc(1, sizeof *r);
            md_error err;
            md_error_clear(&err);
            ap_args args = {.engine = t.engine, .quick = true, .seed = 1};
            int rc = uc->measure(t.db, &args, r, &err);
            cr_assert_eq(rc, 0, "[%s] %s: %s", t.engine, uc->name, err.message);
            cr_assert_gt(r->nmetrics, 0);
            for (int k = 0; k < uc->nclaims; k++) {
                cr_assert_null(uc->claims[k].judge);
                cr_assert_neq(r->claims[k].verdict, AP_NA, "[%s] %s claim %d undecided",
                              t.engine, uc->name, k + 1);
                cr_assert(r->claims[k].evidence[0]);
                if (mask & (1L << k))
                    cr_assert_eq(r->claims[k].verdict, AP_HOLDS, "[%s] %s claim %d: %s",
                                 t.engine, uc->name, k + 1, r->claims[k].evidence);
            }
            free(r);
        }
    }
    cr_assert_eq(n, 7, "the seven use cases of chapters 5-9 are registered (ap_registry.c)");
}
