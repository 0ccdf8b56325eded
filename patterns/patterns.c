/*
 * patterns.c -- the few helpers every pattern shares (a per-user random
 * stream, the clock, a JSON command shortcut).  The registry of patterns
 * is registry.c.
 */
#include <time.h>

#include "patterns.h"


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

int pt_ensure_index(md_db *db, const char *coll, const bson_t *keys, const bson_t *opts,
                    md_error *err)
{
    md_collection *c = md_db_get_collection(db, coll);
    int rc = md_collection_create_index(c, keys, opts, NULL, err);
    md_collection_destroy(c);
    return rc;
}
