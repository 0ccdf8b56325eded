/*
 * test_q_fast.c -- the fast paths (IDHACK execution, in-place updates, the
 * affected-index check, the typed API's direct statements) against the
 * general path: the same random operations on two databases, one opened
 * with internalQueryFastPaths: false, must give identical replies, errors,
 * documents and index contents, on every engine.
 */
#include <criterion/criterion.h>

#include "test_q_util.h"

typedef struct pair {
    tdb fast, slow;
    md_collection *cf, *cs;
} pair;

static void open_one(tdb *t, const char *engine, bool fast)
{
    md_error err;
    snprintf(t->dir, sizeof t->dir, "/tmp/md_qfast_XXXXXX");
    cr_assert_not_null(mkdtemp(t->dir));
    t->engine = engine;
    bson_t *o = BCON_NEW("engine", BCON_UTF8(engine), "internalQueryFastPaths", BCON_BOOL(fast),
                         "mmapv1", "{", "firstFileSize", BCON_INT32(131072), "nsSize",
                         BCON_INT32(65536), "}");
    int rc = md_db_open(t->dir, o, &t->db, &err);
    bson_destroy(o);
    cr_assert_eq(rc, 0, "%s", err.message);
}

static char *json(const bson_t *b)
{
    return bson_as_canonical_extended_json(b, NULL);
}

static void same_reply(const char *what, int rca, const bson_t *a, const md_error *ea, int rcb,
                       const bson_t *b, const md_error *eb)
{
    char *ja = json(a), *jb = json(b);
    cr_assert_eq(rca, rcb, "%s: rc %d (fast) vs %d (general)", what, rca, rcb);
    cr_assert_str_eq(ja, jb, "%s: replies differ\n fast:    %s\n general: %s", what, ja, jb);
    if (rca) {
        cr_assert_eq(ea->code, eb->code, "%s: code %d vs %d", what, ea->code, eb->code);
        cr_assert_str_eq(ea->message, eb->message, "%s", what);
    }
    bson_free(ja);
    bson_free(jb);
}

/* Run one command JSON on both. */
static void both_cmd(pair *p, const char *cmd)
{
    bson_t ra, rb;
    md_error ea, eb;
    int a = md_db_command_json(p->fast.db, cmd, &ra, &ea);
    int b = md_db_command_json(p->slow.db, cmd, &rb, &eb);
    same_reply(cmd, a, &ra, &ea, b, &rb, &eb);
    bson_destroy(&ra);
    bson_destroy(&rb);
}

static bson_t *doc(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static bson_t *doc(const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    bson_error_t e;
    bson_t *b = bson_new_from_json((const uint8_t *)buf, -1, &e);
    cr_assert_not_null(b, "%s: %s", buf, e.message);
    return b;
}

static uint64_t rnd_state;
static unsigned rnd(unsigned n)
{
    rnd_state ^= rnd_state >> 12;
    rnd_state ^= rnd_state << 25;
    rnd_state ^= rnd_state >> 27;
    return (unsigned)((rnd_state * 2685821657736338717ull) >> 33) % n;
}

/* An _id: mostly ints, some equal doubles and strings. */
static void rnd_id(char *out, size_t n)
{
    unsigned k = rnd(40);
    switch (rnd(6)) {
    case 0: snprintf(out, n, "{\"$numberDouble\": \"%u.0\"}", k); break;
    case 1: snprintf(out, n, "\"s%u\"", k); break;
    case 2: snprintf(out, n, "{\"$numberLong\": \"%u\"}", k); break;
    default: snprintf(out, n, "%u", k); break;
    }
}

static const char *const updates[] = {
    "{\"$inc\": {\"n\": 1}}",
    "{\"$inc\": {\"a\": 2147483647}}", /* int32 overflow: becomes int64, grows */
    "{\"$inc\": {\"a\": 1, \"c.d\": -1}}",
    "{\"$inc\": {\"x\": 0.5}}",
    "{\"$mul\": {\"n\": 3}}",
    "{\"$set\": {\"b\": \"zz\"}}",
    "{\"$set\": {\"b\": \"a much longer string than before\"}}",
    "{\"$set\": {\"c.d\": 7}}",
    "{\"$set\": {\"c\": 5}}",
    "{\"$set\": {\"u\": 1}}", /* unique index: duplicates are errors */
    "{\"$set\": {\"_id\": 99}}", /* ImmutableField */
    "{\"$set\": {\"n\": \"str\"}}",
    "{\"$inc\": {\"b\": 1}}", /* TypeMismatch */
    "{\"$min\": {\"a\": 3}}",
    "{\"$max\": {\"n\": 50}}",
    "{\"$bit\": {\"n\": {\"xor\": 5}}}",
    "{\"$unset\": {\"b\": 1}}",
    "{\"$push\": {\"arr\": 4}}",
    "{\"$set\": {\"arr.0\": 9}}",
    "{\"$inc\": {\"missing\": 1}}",
    "{\"$set\": {\"c.e.f\": 1}}",
    "{\"$inc\": {\"arr.1\": 1}}",
    "{\"$rename\": {\"b\": \"bb\"}}",
    /* the value-bytes path (ip_arith) and where it must give way */
    "{\"$inc\": {\"a\": {\"$numberLong\": \"1\"}}}", /* int32 -> int64; int64 stays */
    "{\"$inc\": {\"a\": {\"$numberLong\": \"9223372036854775000\"}}}", /* overflow */
    "{\"$inc\": {\"n\": 0}}",                              /* identical: not modified */
    "{\"$mul\": {\"x\": -1}}",                             /* double stays double */
    "{\"$mul\": {\"x\": {\"$numberDecimal\": \"2\"}}}",    /* becomes a decimal */
    "{\"$inc\": {\"x\": {\"$numberDouble\": \"NaN\"}}}",
    "{\"$inc\": {\"_id\": 1}}", /* ImmutableField, or TypeMismatch for a string _id */
    "{\"$inc\": {\"n\": 1.5}}", /* int32 -> double: grows */
};
#define NUPD (sizeof updates / sizeof updates[0])

static void typed_update(pair *p, const bson_t *q, const bson_t *u, const bson_t *opts,
                         bool many)
{
    bson_t ra, rb;
    md_error ea, eb;
    int (*fn)(md_collection *, const bson_t *, const bson_t *, const bson_t *, bson_t *,
              md_error *) = many ? md_collection_update_many : md_collection_update_one;
    int a = fn(p->cf, q, u, opts, &ra, &ea);
    int b = fn(p->cs, q, u, opts, &rb, &eb);
    char *jq = json(q), *ju = json(u);
    char what[512];
    snprintf(what, sizeof what, "update %s %s", jq, ju);
    same_reply(what, a, &ra, &ea, b, &rb, &eb);
    bson_free(jq);
    bson_free(ju);
    bson_destroy(&ra);
    bson_destroy(&rb);
}

static void typed_find_one(pair *p, const bson_t *q, const bson_t *opts)
{
    md_cursor *a = md_collection_find_with_opts(p->cf, q, opts);
    md_cursor *b = md_collection_find_with_opts(p->cs, q, opts);
    const bson_t *da, *db;
    for (;;) {
        bool na = md_cursor_next(a, &da), nb = md_cursor_next(b, &db);
        cr_assert_eq(na, nb);
        if (!na)
            break;
        char *ja = json(da), *jb = json(db);
        cr_assert_str_eq(ja, jb);
        bson_free(ja);
        bson_free(jb);
    }
    md_error ea, eb;
    bool fa = md_cursor_error(a, &ea), fb = md_cursor_error(b, &eb);
    cr_assert_eq(fa, fb);
    if (fa) {
        cr_assert_eq(ea.code, eb.code);
        cr_assert_str_eq(ea.message, eb.message);
    }
    md_cursor_destroy(a);
    md_cursor_destroy(b);
}

static void step(pair *p)
{
    char id[64], cmd[2048];
    rnd_id(id, sizeof id);
    bson_t *q = doc("{\"_id\": %s}", id);
    switch (rnd(10)) {
    case 0: { /* insert */
        bson_t *d = doc("{\"_id\": %s, \"a\": %u, \"b\": \"x%u\", \"c\": {\"d\": %u}, \"n\": %u, "
                        "\"x\": 1.5, \"arr\": [1, 2, 3], \"u\": %u}",
                        id, rnd(100), rnd(10), rnd(5), rnd(3), rnd(1000));
        bson_t ra, rb;
        md_error ea, eb;
        int a = md_collection_insert_one(p->cf, d, NULL, &ra, &ea);
        int b = md_collection_insert_one(p->cs, d, NULL, &rb, &eb);
        same_reply("insert", a, &ra, &ea, b, &rb, &eb);
        bson_destroy(&ra);
        bson_destroy(&rb);
        bson_destroy(d);
        break;
    }
    case 1: case 2: case 3: { /* update by _id, typed */
        bson_t *u = bson_new_from_json((const uint8_t *)updates[rnd(NUPD)], -1, NULL);
        bson_t *o = rnd(4) == 0 ? doc("{\"upsert\": true}") : NULL;
        typed_update(p, q, u, o, rnd(5) == 0);
        bson_destroy(u);
        if (o)
            bson_destroy(o);
        break;
    }
    case 4: { /* update by another filter */
        bson_t *f = doc("{\"a\": {\"$gt\": %u}}", rnd(100));
        bson_t *u = bson_new_from_json((const uint8_t *)updates[rnd(NUPD)], -1, NULL);
        typed_update(p, f, u, NULL, rnd(2) == 0);
        bson_destroy(f);
        bson_destroy(u);
        break;
    }
    case 5: { /* the command path, by _id */
        snprintf(cmd, sizeof cmd,
                 "{\"update\": \"c\", \"updates\": [{\"q\": {\"_id\": %s}, \"u\": %s}]}", id,
                 updates[rnd(NUPD)]);
        both_cmd(p, cmd);
        break;
    }
    case 6: { /* findAndModify by _id: typed, or the command */
        if (rnd(2)) {
            bson_t *o = doc("{\"update\": %s, \"new\": %s, \"fields\": {\"arr\": 0}%s}",
                            updates[rnd(NUPD)], rnd(2) ? "true" : "false",
                            rnd(3) ? "" : ", \"upsert\": true");
            bson_t ra, rb;
            md_error ea, eb;
            int a = md_collection_find_and_modify(p->cf, q, o, &ra, &ea);
            int b = md_collection_find_and_modify(p->cs, q, o, &rb, &eb);
            same_reply("findAndModify", a, &ra, &ea, b, &rb, &eb);
            bson_destroy(&ra);
            bson_destroy(&rb);
            bson_destroy(o);
            break;
        }
        snprintf(cmd, sizeof cmd,
                 "{\"findAndModify\": \"c\", \"query\": {\"_id\": %s}, \"update\": %s, "
                 "\"new\": %s, \"fields\": {\"arr\": 0}}",
                 id, updates[rnd(NUPD)], rnd(2) ? "true" : "false");
        both_cmd(p, cmd);
        break;
    }
    case 7: { /* delete by _id: typed or command, or findAndModify remove */
        unsigned k = rnd(3);
        if (k == 0) {
            bson_t ra, rb;
            md_error ea, eb;
            int a = md_collection_delete_one(p->cf, q, NULL, &ra, &ea);
            int b = md_collection_delete_one(p->cs, q, NULL, &rb, &eb);
            same_reply("delete", a, &ra, &ea, b, &rb, &eb);
            bson_destroy(&ra);
            bson_destroy(&rb);
        } else {
            snprintf(cmd, sizeof cmd,
                     k == 1 ? "{\"delete\": \"c\", \"deletes\": [{\"q\": {\"_id\": %s}, "
                              "\"limit\": 1}]}"
                            : "{\"findAndModify\": \"c\", \"query\": {\"_id\": %s}, "
                              "\"remove\": true}",
                     id);
            both_cmd(p, cmd);
        }
        break;
    }
    case 8: { /* typed finds on other filters: sorts, limits, small batches, bad options */
        static const char *const opts[] = {
            "{\"sort\": {\"a\": -1, \"_id\": 1}, \"limit\": 7, \"batchSize\": 2}",
            "{\"projection\": {\"a\": 1, \"_id\": 0}, \"skip\": 3, \"batchSize\": 4}",
            "{\"hint\": {\"a\": 1}, \"sort\": {\"_id\": 1}}",
            "{\"limit\": -2}",
            "{\"sort\": 5}",
            "{\"tailable\": true}",
        };
        bson_t *f = doc("{\"a\": {\"$gte\": %u}}", rnd(100));
        bson_t *o = bson_new_from_json((const uint8_t *)opts[rnd(6)], -1, NULL);
        typed_find_one(p, f, o);
        bson_destroy(f);
        bson_destroy(o);
        break;
    }
    default: { /* finds by _id, with and without a projection */
        bson_t *o = rnd(2) ? doc("{\"projection\": {\"b\": 1, \"c.d\": 1}, \"limit\": 1}")
                           : NULL;
        typed_find_one(p, q, o);
        snprintf(cmd, sizeof cmd, "{\"find\": \"c\", \"filter\": {\"_id\": %s}%s}", id,
                 rnd(2) ? ", \"projection\": {\"a\": 0}" : "");
        both_cmd(p, cmd);
        if (o)
            bson_destroy(o);
        break;
    }
    }
    bson_destroy(q);
}

/* Every document, and what validate counts per index, must be the same. */
static void same_state(pair *p)
{
    both_cmd(p, "{\"find\": \"c\", \"filter\": {}, \"sort\": {\"_id\": 1}, \"batchSize\": 1000}");
    both_cmd(p, "{\"find\": \"c\", \"filter\": {\"a\": {\"$gte\": 0}}, \"hint\": {\"a\": 1}, "
                "\"projection\": {\"_id\": 0, \"a\": 1}, \"batchSize\": 1000}");
    both_cmd(p, "{\"find\": \"c\", \"filter\": {\"c.d\": {\"$exists\": true}}, "
                "\"hint\": {\"c.d\": 1}, \"batchSize\": 1000}");
    const char *v = "{\"validate\": \"c\", \"full\": true}";
    bson_t ra, rb;
    md_error e;
    cr_assert_eq(md_db_command_json(p->fast.db, v, &ra, &e), 0, "%s", e.message);
    cr_assert_eq(md_db_command_json(p->slow.db, v, &rb, &e), 0, "%s", e.message);
    bson_iter_t ia, ib;
    cr_assert(bson_iter_init_find(&ia, &ra, "valid") && bson_iter_as_bool(&ia));
    cr_assert(bson_iter_init_find(&ib, &rb, "valid") && bson_iter_as_bool(&ib));
    cr_assert(bson_iter_init_find(&ia, &ra, "keysPerIndex"));
    cr_assert(bson_iter_init_find(&ib, &rb, "keysPerIndex"));
    bson_t ka, kb;
    const uint8_t *d;
    uint32_t l;
    bson_iter_document(&ia, &l, &d);
    bson_init_static(&ka, d, l);
    bson_iter_document(&ib, &l, &d);
    bson_init_static(&kb, d, l);
    char *ja = json(&ka), *jb = json(&kb);
    cr_assert_str_eq(ja, jb);
    bson_free(ja);
    bson_free(jb);
    bson_destroy(&ra);
    bson_destroy(&rb);
}

Test(q_fast, random_operations_match_the_general_path)
{
    for (const eng_ops *const *e = eng_engines(); *e; e++) {
        pair p;
        rnd_state = 0x9e3779b97f4a7c15ull;
        open_one(&p.fast, (*e)->name, true);
        open_one(&p.slow, (*e)->name, false);
        p.cf = md_db_get_collection(p.fast.db, "c");
        p.cs = md_db_get_collection(p.slow.db, "c");
        both_cmd(&p, "{\"createIndexes\": \"c\", \"indexes\": ["
                     "{\"key\": {\"a\": 1}, \"name\": \"a_1\"},"
                     "{\"key\": {\"c.d\": 1}, \"name\": \"c.d_1\"},"
                     "{\"key\": {\"u\": 1}, \"name\": \"u_1\", \"unique\": true},"
                     "{\"key\": {\"arr\": 1}, \"name\": \"arr_1\"},"
                     "{\"key\": {\"n\": 1}, \"name\": \"n_1\", "
                     "\"partialFilterExpression\": {\"x\": {\"$gt\": 2}}}]}");
        for (int i = 0; i < 1500; i++) {
            step(&p);
            if (i % 500 == 499)
                same_state(&p);
        }
        md_collection_destroy(p.cf);
        md_collection_destroy(p.cs);
        t_close(&p.fast);
        t_close(&p.slow);
    }
}

/* The in-place path writes only the bytes that changed: on an engine that
 * updates in place, an $inc by _id is counted as an in-place update and
 * moves nothing, and the indexes on other fields keep their entries. */
Test(q_fast, inc_by_id_updates_in_place)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        md_collection *c = md_db_get_collection(t.db, "c");
        bson_t *d = doc("{\"_id\": 1, \"n\": 5, \"k\": \"key\"}");
        cr_assert_eq(md_collection_insert_one(c, d, NULL, NULL, NULL), 0);
        T_RUN(&t, "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"k\": 1}, \"name\": "
                  "\"k_1\"}]}");
        bson_t *q = doc("{\"_id\": 1}"), *u = doc("{\"$inc\": {\"n\": 2}}");
        bson_t r;
        cr_assert_eq(md_collection_update_one(c, q, u, NULL, &r, NULL), 0);
        bson_iter_t it;
        cr_assert(bson_iter_init_find(&it, &r, "modifiedCount") && bson_iter_as_int64(&it) == 1);
        bson_destroy(&r);
        bson_t *s = T_OK(&t, "{\"collStats\": \"c\"}");
        if (t_in_place(&t)) {
            char path[64];
            snprintf(path, sizeof path, "%s.inPlaceUpdates", t.engine);
            cr_assert_eq(t_i64(s, path), 1);
            snprintf(path, sizeof path, "%s.moves", t.engine);
            cr_assert_eq(t_i64(s, path), 0);
        }
        bson_destroy(s);
        s = T_OK(&t, "{\"find\": \"c\", \"filter\": {\"k\": \"key\"}, \"hint\": {\"k\": 1}}");
        cr_assert_eq(t_i64(s, "cursor.firstBatch.0.n"), 7);
        bson_destroy(s);
        bson_destroy(q);
        bson_destroy(u);
        bson_destroy(d);
        md_collection_destroy(c);
    }
}

/* md_engine_timing: engine time accrues only while on, per thread, and is
 * part of the caller's wall time. */
Test(q_fast, engine_timing_counts_engine_calls)
{
    tdb t;
    FOR_EACH_ENGINE(t) {
        md_collection *c = md_db_get_collection(t.db, "c");
        bson_t *d = doc("{\"_id\": 1, \"n\": 5}");
        md_engine_timing(false);
        cr_assert_eq(md_collection_insert_one(c, d, NULL, NULL, NULL), 0);
        cr_assert_eq(md_engine_time_ns(), 0, "off: nothing counted");
        md_engine_timing(true);
        cr_assert_eq(md_engine_time_ns(), 0, "turning it on starts from zero");
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        bson_t *q = doc("{\"_id\": 1}"), *u = doc("{\"$inc\": {\"n\": 1}}");
        for (int i = 0; i < 200; i++)
            cr_assert_eq(md_collection_update_one(c, q, u, NULL, NULL, NULL), 0);
        clock_gettime(CLOCK_MONOTONIC, &b);
        int64_t wall = (int64_t)(b.tv_sec - a.tv_sec) * 1000000000 + (b.tv_nsec - a.tv_nsec);
        int64_t eng = md_engine_time_ns();
        md_engine_timing(false);
        cr_assert_gt(eng, 0, "[%s] the updates' engine calls were timed", t.engine);
        cr_assert_lt(eng, wall, "[%s] engine time %lld within the wall time %lld", t.engine,
                     (long long)eng, (long long)wall);
        bson_destroy(q);
        bson_destroy(u);
        bson_destroy(d);
        md_collection_destroy(c);
    }
}
