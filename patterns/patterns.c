/*
 * patterns.c -- the pattern registry and the few helpers every pattern
 * shares (a per-user random stream, the clock, a JSON command shortcut).
 *
 * pt_patterns[] lists the book's chapters in order; the runner, the report
 * and the tests walk it, so a pattern appears everywhere once it is here.
 */
#include <time.h>

#include "patterns.h"

const pt_pattern *const pt_patterns[] = {
    /* 5.1 */
    /* 5.2 */
    /* 5.3 */
    /* 5.4 */
    /* 5.5 */
    /* 5.6 */
    /* 5.7 */
    /* 5.8 */
    /* 5.9 */
    /* 5.10 */
    /* 5.11 */
    NULL,
};

uint64_t pt_rand(pt_user *u)
{
    uint64_t x = u->rng ? u->rng : 0x9e3779b97f4a7c15ull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    u->rng = x;
    return x * 0x2545f4914f6cdd1dull;
}

uint64_t pt_rand_below(pt_user *u, uint64_t n)
{
    return n ? pt_rand(u) % n : 0;
}

int64_t pt_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int pt_command_json(md_db *db, const char *json, md_error *err)
{
    bson_t reply;
    int rc = md_db_command_json(db, json, &reply, err);
    bson_destroy(&reply);
    return rc;
}
