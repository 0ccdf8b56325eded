/*
 * tsan_carts.c -- the shopping-cart protocols (5.5 with reservation, 5.6
 * without; patterns/cart_*.c) under ThreadSanitizer (`make test-tsan`;
 * Criterion cannot start under TSan; test_cart_*.c run the same workload
 * in the suite): many clients adding, changing, removing and checking out
 * against three products with a small stock, the cleanup job racing them,
 * 15% of the operations stopped part-way as if the client died; then the
 * cleanup job and the invariants (inventory conserved, no negative stock,
 * carts and reservations agreeing, one order per completed cart).  On
 * mmapv1 (collection locks, journal on) and btree (document locks, log on).
 */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>

#include "minidoc.h"
#include "patterns.h"

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static int run(const char *engine, bool reserving)
{
    char dir[64] = "/tmp/md_tsan_cart_XXXXXX";
    md_db *db;
    md_error err;
    int64_t initial[3] = {60, 60, 60};
    pt_cart_totals t;
    int bad = 0;
    if (!mkdtemp(dir))
        return 1;
    bson_t *opts = BCON_NEW("engine", BCON_UTF8(engine), "mmapv1", "{", "firstFileSize",
                            BCON_INT32(1 << 20), "}");
    int rc = md_db_open(dir, opts, &db, &err);
    bson_destroy(opts);
    if (rc != 0) {
        fprintf(stderr, "%s: open: %s\n", engine, err.message);
        return 1;
    }
    if (pt_cart_create_indexes(db, &err) != 0 || pt_cart_seed(db, 3, initial, 64, &err) != 0) {
        fprintf(stderr, "%s: setup: %s\n", engine, err.message);
        bad = 1;
        goto out;
    }
    pt_cart_stress s = {.reserving = reserving, .threads = 8, .ops = 200, .nproducts = 3,
                        .crash_pct = 15, .expire_every = 12, .expire_age_ms = 3, .seed = 5};
    if (pt_cart_stress_run(db, &s, &err) != 0) {
        fprintf(stderr, "%s: stress: %s\n", engine, err.message);
        bad = 1;
        goto out;
    }
    if (pt_cart_cleanup(db, pt_now_ms(), NULL, &err) != 0 ||
        pt_cart_check(db, 3, initial, reserving, &t, &err) != 0) {
        fprintf(stderr, "%s: invariants: %s\n", engine, err.message);
        bad = 1;
        goto out;
    }
    if (s.crashed == 0 || s.checked_out == 0 || t.reserved != 0 ||
        t.available + t.sold != 180) {
        fprintf(stderr, "%s: workload did not exercise the protocols\n", engine);
        bad = 1;
    }
    printf("%s %s: %lld ops (%lld ok, %lld out of stock/not active, %lld stopped), "
           "%lld checkouts, %lld cleanups; after cleanup: %lld sold, %lld available, "
           "carts %lld completed / %lld expired\n",
           engine, reserving ? "reservation" : "no reservation",
           (long long)(s.adds + s.updates + s.removes + s.checkouts + s.cleanups),
           (long long)s.ok, (long long)s.notfound, (long long)s.crashed,
           (long long)s.checked_out, (long long)s.cleanups, (long long)t.sold,
           (long long)t.available, (long long)t.completed, (long long)t.expired);
out:
    md_db_close(db);
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return bad;
}

int main(void)
{
    int bad = 0;
    static const char *const engines[] = {"mmapv1", "btree"};
    for (int e = 0; e < 2; e++) {
        bad += run(engines[e], true);
        bad += run(engines[e], false);
    }
    printf("tsan_carts: %s\n", bad ? "FAILED" : "ok");
    return bad != 0;
}
