/*
 * mms.c -- the record_hit workload of "MongoDB Schema Design at Scale"
 * (Rick Copeland, 2012: the MMS case study), run for a simulated day on
 * every storage configuration through the public API.
 *
 * One document per metric per day, updated on every hit with
 *
 *   update({_id: "20101011/metric-3",
 *           metadata: {date: ISODate("2010-10-11"), measure: "metric-3"}},
 *          {$inc: {daily: 1, "hourly.HH": 1, "minute.MMMM": 1}}, upsert: true)
 *
 * exactly as the blog's record_hit(), through md_collection_update_one()
 * (which builds the update command).  Three schemas:
 *
 *   naive     the upsert above; the document grows by one minute field the
 *             first time each minute is hit (1440 times a day)
 *   prealloc  the same, and with probability 1/2000 per hit tomorrow's
 *             document is preallocated first: an upsert by _id with $set of
 *             metadata and $inc by 0 of daily, the 24 hours and the 1440
 *             minutes, so today's document never grows
 *   hier      minutes nested under the hours ("minute.HH.MM"), preallocated
 *             the same way with probability 1/1500
 *
 * Six configurations, each on a fresh database directory with the engine's
 * default durability (mmapv1: journal on, journalCommitInterval 100 ms,
 * syncdelay 60 s; btree: log on, commitIntervalMs 100, checkpoints every
 * 60 s): mmapv1 with each allocation strategy (powerOf2, paddingFactor,
 * noPadding) and btree with each block compressor (snappy, zstd, none).
 *
 * The measured day is 2010-10-11.  Its hits arrive in simulated time
 * order: every simulated minute brings --hits hits, each for one of
 * --metrics metrics drawn at random (the same seeded sequence for every
 * run).  Before it, the preallocating schemas replay yesterday's draws:
 * for each of yesterday's hits, with the schema's probability, the
 * preallocate() call that hit would have made for today (yesterday's
 * counting updates themselves are not run).  So today's documents were
 * created ahead exactly as the blog's scheme creates them, and a metric
 * that no draw picked is upserted by its first hit, as in the blog.
 *
 * Per simulated hour: hits, wall seconds, CPU seconds of the process (its
 * engine threads included), writes/s on both clocks (record_hit calls,
 * preallocation included, per wall second and per CPU second), and from
 * collStats and serverStatus the inserts, updates, moves and in-place
 * updates (mmapv1), the document bytes the engine wrote (collStats
 * bytesWritten), journal or log bytes, btree block bytes and evictions,
 * count, size and storageSize; after the day, untimed, an fsync (a btree
 * checkpoint: the compressed pages are written) and storageSize again.
 * With --repeat N every run is made N times and each hour's seconds are
 * the smallest of the N (the counters are the same every time): other
 * processes on a busy machine only add time.
 *
 * Files in --out DIR (default build/mms):
 *
 *   mms.csv           one row per configuration, schema and hour
 *   summary.md        per configuration and schema the first and last
 *                     hour, their ratio, moves, bytes per update, and the
 *                     targets checked
 *   plot.gp           the gnuplot script, run in DIR when gnuplot is found:
 *   throughput.png    writes/s against simulated hour, one panel per
 *                     configuration, one line per schema
 *   bytes.png         document bytes written per update, same layout
 *
 * and on stdout, last, one line per configuration and schema:
 *
 *   mms CONFIG SCHEMA first_hour_wps=X last_hour_wps=X ratio=X moves=N bytes_per_update=X
 *
 * (moves during the day; bytes_per_update is the day's document bytes
 * written over its inserts and updates, preallocations included).
 *
 *   build/bench/mms [--out DIR] [--metrics N] [--hits N] [--seed N]
 *                   [--repeat N] [--config NAME] [--schema NAME]
 *                   [--opts JSON] [--clock cpu|wall] [--quick] [--no-plot]
 *
 * --clock: the writes/s that the plots, the summary and the mms lines use.
 * cpu (the default) divides by the CPU time the whole process used in the
 * hour, so that other processes on a shared machine (the 2-core
 * development machine runs builds and tests beside it) cannot distort the
 * day's shape; on an idle machine it is within a few percent of wall
 * (a second core runs the journal or log thread, which is counted).
 *
 * --quick: 2 metrics, 20 hits a minute (the same 10 hits per metric per
 * minute as the default 6 and 60): all 18 runs in well under a minute.
 * --opts adds md_db_open() options, e.g. '{"mmapv1": {"journal": false}}'.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "minidoc.h"

#define BENCH_NAME "mms"
#include "bench.h"

#define HOURS 24
#define MINUTES 1440
#define TODAY_MS 1286755200000LL /* 2010-10-11T00:00:00Z, after the blog's 20101010 */
#define DAY_MS 86400000LL

typedef struct config {
    const char *name;
    const char *engine;
    const char *strategy;   /* mmapv1 allocationStrategy */
    const char *compressor; /* btree block_compressor */
} config;

static const config configs[] = {
    {"mmapv1-powerOf2", "mmapv1", "powerOf2", NULL},
    {"mmapv1-paddingFactor", "mmapv1", "paddingFactor", NULL},
    {"mmapv1-noPadding", "mmapv1", "noPadding", NULL},
    {"btree-snappy", "btree", NULL, "snappy"},
    {"btree-zstd", "btree", NULL, "zstd"},
    {"btree-none", "btree", NULL, "none"},
};
#define NCONFIGS (sizeof configs / sizeof configs[0])

enum schema { NAIVE, PREALLOC, HIER, NSCHEMAS };
static const char *const schema_names[NSCHEMAS] = {"naive", "prealloc", "hier"};
/* Preallocation probability per hit, as in the blog: 1/2000 flat, 1/1500 hier. */
static const double prealloc_p[NSCHEMAS] = {0.0, 1.0 / 2000.0, 1.0 / 1500.0};

/* Counters read from collStats and serverStatus. */
typedef struct counters {
    int64_t inserts, updates, moves, inplace, doc_bytes, log_bytes, size, count,
        storage_size;
    int64_t block_bytes, evictions, cache_bytes; /* btree */
} counters;

typedef struct hour_row {
    int64_t hits, prealloc_calls; /* record_hit calls, preallocate calls among them */
    double seconds, cpu_seconds;
    counters end; /* counters at the end of the hour */
} hour_row;

typedef struct result {
    const config *cfg;
    int schema;
    hour_row h[HOURS];
    counters start;        /* after yesterday's preallocations, before the first hit */
    counters final;        /* after an fsync at the end of the day (untimed) */
} result;

static struct {
    const char *out;
    int metrics, hits, repeat;
    unsigned long long seed;
    const char *only_config, *only_schema;
    const char *open_opts; /* extra md_db_open options, extended JSON */
    bool quick, plot;
    bool wall; /* writes/s from wall-clock time instead of CPU time */
} opt = {"build/mms", 6, 60, 1, 20120925, NULL, NULL, NULL, false, true, false};

/* CPU time of the whole process (the writer and the engine's threads). */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* xorshift64*.  Separate streams, so that today's sequence of metrics is
 * the same for every configuration and schema. */
typedef unsigned long long rng_t;
static rng_t rng_today, rng_yesterday, rng_prealloc;
static unsigned long long rng(rng_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ULL;
}
static double rng_unit(rng_t *s)
{
    return (double)(rng(s) >> 11) / 9007199254740992.0;
}
static void rng_seed(void)
{
    rng_today = opt.seed * 0x9E3779B97F4A7C15ULL + 1;
    rng_yesterday = opt.seed * 0xD1B54A32D192ED03ULL + 2;
    rng_prealloc = opt.seed * 0xBF58476D1CE4E5B9ULL + 3;
}


static int64_t get_i64(const bson_t *doc, const char *path, int64_t dflt)
{
    bson_iter_t it, f;
    return bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, path, &f) &&
                   BSON_ITER_HOLDS_NUMBER(&f)
               ? bson_iter_as_int64(&f)
               : dflt;
}

static void read_counters(md_db *db, const config *cfg, counters *c)
{
    bson_t cs, ss;
    char path[64];
    const char *e = cfg->engine;
    run(db, BCON_NEW("collStats", "daily_hits"), "collStats", &cs);
    run(db, BCON_NEW("serverStatus", BCON_INT32(1)), "serverStatus", &ss);
#define SUB(field) (snprintf(path, sizeof path, "%s.%s", e, field), path)
    c->inserts = get_i64(&cs, SUB("inserts"), 0);
    c->updates = get_i64(&cs, SUB("updates"), 0);
    c->moves = get_i64(&cs, SUB("moves"), 0);         /* btree: records never move */
    c->inplace = get_i64(&cs, SUB("inPlaceUpdates"), -1); /* mmapv1 only */
    c->doc_bytes = get_i64(&cs, SUB("bytesWritten"), 0);
    c->block_bytes = get_i64(&cs, SUB("bytesWrittenTotal"), 0);
#undef SUB
    c->size = get_i64(&cs, "size", 0);
    c->count = get_i64(&cs, "count", 0);
    c->storage_size = get_i64(&cs, "storageSize", 0);
    c->evictions = get_i64(&ss, "btree.evictions", 0);
    c->cache_bytes = get_i64(&ss, "btree.cacheBytes", 0);
    c->log_bytes = strcmp(e, "mmapv1") == 0 ? get_i64(&ss, "mmapv1.dur.journaledBytes", 0)
                                            : get_i64(&ss, "btree.log.storedBytes", 0);
    bson_destroy(&cs);
    bson_destroy(&ss);
}

/* ---- the workload ------------------------------------------------------------ */

static void day_id(int day, int metric, char *id, size_t idlen, char *measure, size_t mlen)
{
    time_t t = (time_t)((TODAY_MS + day * DAY_MS) / 1000);
    struct tm tm;
    char sdate[16];
    gmtime_r(&t, &tm);
    strftime(sdate, sizeof sdate, "%Y%m%d", &tm);
    snprintf(measure, mlen, "metric-%d", metric);
    snprintf(id, idlen, "%s/%s", sdate, measure);
}

static void append_metadata(bson_t *b, int day, const char *measure)
{
    bson_t md;
    BSON_APPEND_DOCUMENT_BEGIN(b, "metadata", &md);
    BSON_APPEND_DATE_TIME(&md, "date", TODAY_MS + day * DAY_MS);
    BSON_APPEND_UTF8(&md, "measure", measure);
    bson_append_document_end(b, &md);
}

static void update(md_collection *coll, const bson_t *sel, const bson_t *upd,
                   const bson_t *opts, const char *what)
{
    md_error err;
    if (md_collection_update_one(coll, sel, upd, opts, NULL, &err) != 0)
        die(what, &err);
}

/* The path of minute m: "minute.MMMM" (flat) or "minute.HH.MM" (hier). */
static const char *minute_key(char *key, size_t n, int schema, int m)
{
    if (schema == HIER)
        snprintf(key, n, "minute.%02d.%02d", m / 60, m % 60);
    else
        snprintf(key, n, "minute.%04d", m);
    return key;
}
/* The blog's preallocate(): {_id} upsert, $set metadata, $inc 0 everywhere. */
static void preallocate(md_collection *coll, const bson_t *upsert, int schema, int day,
                        int metric)
{
    char id[64], measure[32], key[24];
    bson_t sel = BSON_INITIALIZER, upd = BSON_INITIALIZER, set, inc;
    day_id(day, metric, id, sizeof id, measure, sizeof measure);
    BSON_APPEND_UTF8(&sel, "_id", id);
    BSON_APPEND_DOCUMENT_BEGIN(&upd, "$set", &set);
    append_metadata(&set, day, measure);
    bson_append_document_end(&upd, &set);
    BSON_APPEND_DOCUMENT_BEGIN(&upd, "$inc", &inc);
    BSON_APPEND_INT32(&inc, "daily", 0);
    for (int h = 0; h < HOURS; h++) {
        snprintf(key, sizeof key, "hourly.%02d", h);
        BSON_APPEND_INT32(&inc, key, 0);
    }
    for (int m = 0; m < MINUTES; m++)
        BSON_APPEND_INT32(&inc, minute_key(key, sizeof key, schema, m), 0);
    bson_append_document_end(&upd, &inc);
    update(coll, &sel, &upd, upsert, "preallocate");
    bson_destroy(&sel);
    bson_destroy(&upd);
}

/* The blog's record_hit() / record_hit_hier().  Returns 1 if it preallocated. */
static int record_hit(md_collection *coll, const bson_t *upsert, int schema, int day,
                      int minute, int metric)
{
    char id[64], measure[32], key[24];
    int pre = 0;
    if (schema != NAIVE && rng_unit(&rng_prealloc) < prealloc_p[schema]) {
        preallocate(coll, upsert, schema, day + 1, metric);
        pre = 1;
    }
    bson_t sel = BSON_INITIALIZER, upd = BSON_INITIALIZER, inc;
    day_id(day, metric, id, sizeof id, measure, sizeof measure);
    BSON_APPEND_UTF8(&sel, "_id", id);
    append_metadata(&sel, day, measure);
    BSON_APPEND_DOCUMENT_BEGIN(&upd, "$inc", &inc);
    BSON_APPEND_INT32(&inc, "daily", 1);
    snprintf(key, sizeof key, "hourly.%02d", minute / 60);
    BSON_APPEND_INT32(&inc, key, 1);
    BSON_APPEND_INT32(&inc, minute_key(key, sizeof key, schema, minute), 1);
    bson_append_document_end(&upd, &inc);
    update(coll, &sel, &upd, upsert, "record_hit");
    bson_destroy(&sel);
    bson_destroy(&upd);
    return pre;
}

static void bench_one(const config *cfg, int schema, result *res)
{
    char tmpl[512], rm[600];
    const char *tmp = getenv("TMPDIR");
    snprintf(tmpl, sizeof tmpl, "%s/minidoc-mms-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    char *dir = mkdtemp(tmpl);
    if (!dir) {
        perror("mms: mkdtemp");
        exit(1);
    }
    md_db *db;
    md_error err;
    bson_error_t berr;
    bson_t *opts = opt.open_opts ? bson_new_from_json((const uint8_t *)opt.open_opts, -1, &berr)
                                 : bson_new();
    if (!opts) {
        fprintf(stderr, "mms: --opts: %s\n", berr.message);
        exit(2);
    }
    BSON_APPEND_UTF8(opts, "engine", cfg->engine);
    if (md_db_open(dir, opts, &db, &err) != 0)
        die("open", &err);
    bson_destroy(opts);
    if (cfg->strategy) {
        run(db,
            BCON_NEW("create", "daily_hits", "storageEngine", "{", "mmapv1", "{",
                     "allocationStrategy", BCON_UTF8(cfg->strategy), "}", "}"),
            "create", NULL);
    } else {
        char cs[64];
        snprintf(cs, sizeof cs, "block_compressor=%s", cfg->compressor);
        run(db,
            BCON_NEW("create", "daily_hits", "storageEngine", "{", "btree", "{",
                     "configString", BCON_UTF8(cs), "}", "}"),
            "create", NULL);
    }
    memset(res, 0, sizeof *res);
    res->cfg = cfg;
    res->schema = schema;

    md_collection *coll = md_db_get_collection(db, "daily_hits");
    bson_t *upsert = BCON_NEW("upsert", BCON_BOOL(true));
    rng_seed();
    /* Yesterday (day -1): the preallocate() calls its hits made for today. */
    if (schema != NAIVE)
        for (int i = 0; i < MINUTES * opt.hits; i++) {
            int metric = (int)(rng(&rng_yesterday) % (unsigned long long)opt.metrics);
            if (rng_unit(&rng_prealloc) < prealloc_p[schema])
                preallocate(coll, upsert, schema, 0, metric);
        }
    read_counters(db, cfg, &res->start);
    for (int hour = 0; hour < HOURS; hour++) {
        hour_row *r = &res->h[hour];
        double t0 = now(), c0 = cpu_now();
        for (int minute = hour * 60; minute < (hour + 1) * 60; minute++)
            for (int i = 0; i < opt.hits; i++) {
                int metric = (int)(rng(&rng_today) % (unsigned long long)opt.metrics);
                r->prealloc_calls += record_hit(coll, upsert, schema, 0, minute, metric);
            }
        r->seconds = now() - t0;
        r->cpu_seconds = cpu_now() - c0;
        r->hits = 60LL * opt.hits;
        read_counters(db, cfg, &r->end);
    }
    /* A checkpoint (btree) or data-file flush (mmapv1), so that storageSize
     * shows the compressed pages the btree has not written yet. */
    run(db, BCON_NEW("fsync", BCON_INT32(1)), "fsync", NULL);
    read_counters(db, cfg, &res->final);
    bson_destroy(upsert);
    md_collection_destroy(coll);
    md_db_close(db);
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    if (system(rm) != 0)
        fprintf(stderr, "mms: could not remove %s\n", dir);
}

/* ---- reporting ------------------------------------------------------------------- */

static const counters *before(const result *r, int hour)
{
    return hour > 0 ? &r->h[hour - 1].end : &r->start;
}

static double wall_wps(const result *r, int hour)
{
    const hour_row *h = &r->h[hour];
    return h->seconds > 0 ? (double)h->hits / h->seconds : 0;
}

static double cpu_wps(const result *r, int hour)
{
    const hour_row *h = &r->h[hour];
    return h->cpu_seconds > 0 ? (double)h->hits / h->cpu_seconds : 0;
}

/* writes/s as --clock says: per CPU second of the process (default) or
 * per wall-clock second. */
static double wps(const result *r, int hour)
{
    return opt.wall ? wall_wps(r, hour) : cpu_wps(r, hour);
}

static double ratio(const result *r)
{
    return wps(r, HOURS - 1) / wps(r, 0);
}

/* Document bytes the engine wrote per insert or update, over hours [h0, h1]. */
static double bytes_per_update(const result *r, int h0, int h1)
{
    const counters *a = before(r, h0), *b = &r->h[h1].end;
    int64_t n = (b->inserts - a->inserts) + (b->updates - a->updates);
    return n > 0 ? (double)(b->doc_bytes - a->doc_bytes) / (double)n : 0;
}

/* Journal (mmapv1) or log (btree) bytes per insert or update over the day. */
static double log_per_update(const result *r)
{
    const counters *a = &r->start, *b = &r->h[HOURS - 1].end;
    int64_t n = (b->inserts - a->inserts) + (b->updates - a->updates);
    return n > 0 ? (double)(b->log_bytes - a->log_bytes) / (double)n : 0;
}

static int64_t day_moves(const result *r)
{
    return r->h[HOURS - 1].end.moves - r->start.moves;
}

/* Largest deviation of an hour's writes/s from the day's mean, as a fraction. */
static double max_dev(const result *r)
{
    double mean = 0, dev = 0;
    for (int h = 0; h < HOURS; h++)
        mean += wps(r, h) / HOURS;
    for (int h = 0; h < HOURS; h++)
        dev = fmax(dev, fabs(wps(r, h) / mean - 1));
    return dev;
}

/* The plot script below names these columns by number: keep them in step. */
#define CSV_HEADER                                                                          \
    "config,engine,schema,hour,hits,prealloc_calls,seconds,writes_per_s,cpu_seconds,"       \
    "cpu_us_per_write,writes_per_cpu_s,inserts,updates,moves,in_place,doc_bytes,"           \
    "bytes_per_update,log_bytes,block_bytes,evictions,cache_bytes,count,size,storage_size"
#define COL_HOUR 4
#define COL_WALL_WPS 8
#define COL_CPU_WPS 11
#define COL_BPU 17

static void write_csv(FILE *f, const result *res, size_t n)
{
    fprintf(f, "%s\n", CSV_HEADER);
    for (size_t i = 0; i < n; i++) {
        const result *r = &res[i];
        for (int h = 0; h < HOURS; h++) {
            const hour_row *x = &r->h[h];
            const counters *a = before(r, h), *b = &x->end;
            char inplace[32] = "";
            if (b->inplace >= 0)
                snprintf(inplace, sizeof inplace, "%lld", (long long)(b->inplace - a->inplace));
            fprintf(f,
                    "%s,%s,%s,%d,%lld,%lld,%.6f,%.1f,%.6f,%.3f,%.1f,%lld,%lld,%lld,%s,%lld,%.1f,"
                    "%lld,%lld,%lld,%lld,%lld,%lld,%lld\n",
                    r->cfg->name, r->cfg->engine, schema_names[r->schema], h,
                    (long long)x->hits, (long long)x->prealloc_calls, x->seconds, wall_wps(r, h),
                    x->cpu_seconds, 1e6 * x->cpu_seconds / (double)x->hits, cpu_wps(r, h),
                    (long long)(b->inserts - a->inserts), (long long)(b->updates - a->updates),
                    (long long)(b->moves - a->moves), inplace,
                    (long long)(b->doc_bytes - a->doc_bytes), bytes_per_update(r, h, h),
                    (long long)(b->log_bytes - a->log_bytes),
                    (long long)(b->block_bytes - a->block_bytes),
                    (long long)(b->evictions - a->evictions), (long long)b->cache_bytes,
                    (long long)b->count, (long long)b->size, (long long)b->storage_size);
        }
    }
}

static const result *find(const result *res, size_t n, const char *cfg, int schema)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(res[i].cfg->name, cfg) == 0 && res[i].schema == schema)
            return &res[i];
    return NULL;
}

static void write_summary(FILE *f, const result *res, size_t n, const char *cmdline,
                          double elapsed)
{
    fprintf(f, "# MMS record_hit: a simulated day per schema and configuration\n\n");
    fprintf(f,
            "Generated by `%s`: %d metrics, %d hits per simulated minute (%d in the day), "
            "seed %llu, %d run%s per configuration and schema%s, %.0f s in all.\n\n"
            "Durability: the engines' defaults (mmapv1: journal on, journalCommitInterval "
            "100 ms, syncdelay 60 s; btree: log on, commitIntervalMs 100, checkpoints every "
            "60 s).  The measured day is 2010-10-11; for prealloc and hier, yesterday's "
            "preallocate() draws ran first, untimed.\n\n"
            "Writes/s are %s.  The last/first column gives the same ratio on the other "
            "clock in brackets.\n\n",
            cmdline, opt.metrics, opt.hits, MINUTES * opt.hits, (unsigned long long)opt.seed,
            opt.repeat, opt.repeat == 1 ? "" : "s",
            opt.repeat == 1 ? "" : " (each hour's time is the fastest of the runs)", elapsed,
            opt.wall ? "record_hit calls per wall-clock second (--clock wall)"
                     : "record_hit calls per CPU second of the whole process, the engine's "
                       "threads included (--clock cpu, the default): other processes on a "
                       "shared machine do not change them; on an idle machine they are "
                       "within a few percent of wall-clock writes/s");
    fprintf(f, "| configuration | schema | first hour writes/s | last hour writes/s | "
               "last/first | largest hourly deviation from the mean | moves | "
               "bytes/update first hour | bytes/update last hour | bytes/update day | "
               "journal or log bytes/update day | storageSize after fsync at the end |\n");
    fprintf(f, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (size_t i = 0; i < n; i++) {
        const result *r = &res[i];
        fprintf(f,
                "| %s | %s | %.0f | %.0f | **%.2f** (%.2f) | %.0f%% | %lld | %.0f | %.0f | %.0f | "
                "%.0f | %lld |\n",
                r->cfg->name, schema_names[r->schema], wps(r, 0), wps(r, HOURS - 1), ratio(r),
                opt.wall ? cpu_wps(r, HOURS - 1) / cpu_wps(r, 0)
                         : wall_wps(r, HOURS - 1) / wall_wps(r, 0),
                100 * max_dev(r), (long long)day_moves(r), bytes_per_update(r, 0, 0),
                bytes_per_update(r, HOURS - 1, HOURS - 1), bytes_per_update(r, 0, HOURS - 1),
                log_per_update(r), (long long)r->final.storage_size);
    }

    fprintf(f, "\n## Targets\n\n");
    const result *pn = find(res, n, "mmapv1-powerOf2", NAIVE);
    const result *pp = find(res, n, "mmapv1-powerOf2", PREALLOC);
    const result *ph = find(res, n, "mmapv1-powerOf2", HIER);
    if (pn)
        fprintf(f, "- mmapv1-powerOf2 naive: last/first hour %.2f (target <= 0.30): %s\n",
                ratio(pn), ratio(pn) <= 0.30 ? "met" : "missed");
    if (pp && pn)
        fprintf(f,
                "- mmapv1-powerOf2 prealloc: last/first hour %.2f (target: trends down, "
                "below 0.95, but less steeply than naive's %.2f): %s\n",
                ratio(pp), ratio(pn),
                ratio(pp) < 0.95 && ratio(pp) > ratio(pn) ? "met" : "missed");
    if (ph)
        fprintf(f,
                "- mmapv1-powerOf2 hier: last/first hour %.2f, largest hourly deviation from "
                "the day's mean %.0f%% (target: level within ±15%%): %s\n",
                ratio(ph), 100 * max_dev(ph),
                fabs(ratio(ph) - 1) <= 0.15 && max_dev(ph) <= 0.15 ? "met" : "missed");
    static const char *const others[] = {"mmapv1-paddingFactor", "mmapv1-noPadding"};
    for (size_t k = 0; k < 2; k++) {
        const result *o = find(res, n, others[k], NAIVE);
        if (o && pn)
            fprintf(f,
                    "- naive moves: %s %lld against mmapv1-powerOf2 %lld (target: more): %s\n",
                    others[k], (long long)day_moves(o), (long long)day_moves(pn),
                    day_moves(o) > day_moves(pn) ? "met" : "missed");
    }
    for (size_t i = 0; i < NCONFIGS; i++) {
        if (strcmp(configs[i].engine, "btree") != 0)
            continue;
        const result *bn = find(res, n, configs[i].name, NAIVE);
        const result *bp = find(res, n, configs[i].name, PREALLOC);
        if (bn) {
            double a = bytes_per_update(bn, 0, 0), b = bytes_per_update(bn, HOURS - 1, HOURS - 1);
            fprintf(f,
                    "- %s naive: %.0f bytes per update in the first hour, %.0f in the last "
                    "(target: grows with the document): %s\n",
                    configs[i].name, a, b, b > a ? "met" : "missed");
        }
        if (bn && bp) {
            double a = bytes_per_update(bp, 0, 0), b = bytes_per_update(bn, 0, 0);
            fprintf(f,
                    "- %s first hour: %.0f bytes per update preallocated against %.0f naive "
                    "(target: preallocation costs more early in the day): %s\n",
                    configs[i].name, a, b, a > b ? "met" : "missed");
        }
    }
}

static void write_plot(FILE *f)
{
    fprintf(f,
            "# Generated by build/bench/mms (bench/mms.c).  Run in the output directory:\n"
            "#   gnuplot plot.gp\n"
            "set datafile separator ','\n"
            "set terminal pngcairo size 1500,900 font 'DejaVu Sans,10'\n"
            "configs = '");
    for (size_t i = 0; i < NCONFIGS; i++)
        fprintf(f, "%s%s", i ? " " : "", configs[i].name);
    fprintf(f,
            "'\n"
            "schemas = 'naive prealloc hier'\n"
            "# column col of the rows of configuration c and schema s, else NaN\n"
            "sel(c, s, col) = (strcol(1) eq c && strcol(3) eq s) ? column(col) : NaN\n"
            "set key top right\n"
            "set xrange [-0.5:23.5]\n"
            "set xtics 0,3,23\n"
            "set grid\n"
            "set xlabel 'simulated hour'\n"
            "set style line 1 lc rgb '#d62728' lw 2 pt 7 ps 0.6\n"
            "set style line 2 lc rgb '#1f77b4' lw 2 pt 5 ps 0.6\n"
            "set style line 3 lc rgb '#2ca02c' lw 2 pt 9 ps 0.6\n"
            "\n"
            "set output 'throughput.png'\n"
            "set multiplot layout 2,3 title 'record\\_hit writes/s (%s) through a simulated "
            "day: naive upsert, preallocated, hierarchical'\n"
            "set yrange [0:*]\n"
            "set ylabel 'writes/s'\n"
            "do for [i=1:words(configs)] {\n"
            "    cfg = word(configs, i)\n"
            "    set title (cfg)\n"
            "    plot for [j=1:3] 'mms.csv' using %d:(sel(cfg, word(schemas, j), %d)) \\\n"
            "        with linespoints ls j title word(schemas, j)\n"
            "}\n"
            "unset multiplot\n"
            "\n"
            "set output 'bytes.png'\n"
            "set multiplot layout 2,3 title 'document bytes the engine wrote per update "
            "(collStats bytesWritten over inserts + updates)'\n"
            "set logscale y\n"
            "set yrange [1:*]\n"
            "set ylabel 'bytes/update'\n"
            "do for [i=1:words(configs)] {\n"
            "    cfg = word(configs, i)\n"
            "    set title (cfg)\n"
            "    plot for [j=1:3] 'mms.csv' using %d:(sel(cfg, word(schemas, j), %d)) \\\n"
            "        with linespoints ls j title word(schemas, j)\n"
            "}\n"
            "unset multiplot\n",
            opt.wall ? "per wall-clock second" : "per CPU second of the process", COL_HOUR,
            opt.wall ? COL_WALL_WPS : COL_CPU_WPS, COL_HOUR, COL_BPU);
}

static FILE *open_out(const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", opt.out, name);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "mms: %s: %s\n", path, strerror(errno));
        exit(1);
    }
    return f;
}

static void mkdirs(const char *path)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(buf, 0777);
            *p = '/';
        }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "mms: mkdir %s: %s\n", buf, strerror(errno));
        exit(1);
    }
}

/* Run one configuration and schema opt.repeat times; each hour's wall and
 * CPU seconds are the smallest of the runs (other processes on the machine
 * only ever add time), the counters those of the last run (they are the
 * same in every run). */
static void bench(const config *cfg, int schema, result *out)
{
    result *rep = malloc(sizeof *rep);
    for (int k = 0; k < opt.repeat; k++) {
        bench_one(cfg, schema, k == 0 ? out : rep);
        if (k == 0)
            continue;
        for (int h = 0; h < HOURS; h++) {
            rep->h[h].seconds = fmin(rep->h[h].seconds, out->h[h].seconds);
            rep->h[h].cpu_seconds = fmin(rep->h[h].cpu_seconds, out->h[h].cpu_seconds);
        }
        *out = *rep;
    }
    free(rep);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: mms [--out DIR] [--metrics N] [--hits N] [--seed N] [--repeat N]\n"
            "           [--config NAME] [--schema naive|prealloc|hier] [--opts JSON]\n"
            "           [--clock cpu|wall] [--quick] [--no-plot]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    bool metrics_set = false, hits_set = false;
    char cmdline[512] = "build/bench/mms";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        size_t l = strlen(cmdline);
        snprintf(cmdline + l, sizeof cmdline - l, " %s", a);
        if (strcmp(a, "--quick") == 0) {
            opt.quick = true;
            continue;
        } else if (strcmp(a, "--no-plot") == 0) {
            opt.plot = false;
            continue;
        } else if (!v) {
            usage();
        } else if (strcmp(a, "--out") == 0) {
            opt.out = v;
        } else if (strcmp(a, "--metrics") == 0) {
            opt.metrics = atoi(v), metrics_set = true;
        } else if (strcmp(a, "--hits") == 0) {
            opt.hits = atoi(v), hits_set = true;
        } else if (strcmp(a, "--seed") == 0) {
            opt.seed = strtoull(v, NULL, 10);
        } else if (strcmp(a, "--repeat") == 0) {
            opt.repeat = atoi(v);
        } else if (strcmp(a, "--config") == 0) {
            opt.only_config = v;
        } else if (strcmp(a, "--schema") == 0) {
            opt.only_schema = v;
        } else if (strcmp(a, "--opts") == 0) {
            opt.open_opts = v;
        } else if (strcmp(a, "--clock") == 0) {
            if (strcmp(v, "wall") != 0 && strcmp(v, "cpu") != 0)
                usage();
            opt.wall = strcmp(v, "wall") == 0;
        } else {
            usage();
        }
        l = strlen(cmdline);
        snprintf(cmdline + l, sizeof cmdline - l, strchr(v, ' ') ? " '%s'" : " %s", v);
        i++;
    }
    if (opt.quick) {
        if (!metrics_set)
            opt.metrics = 2;
        if (!hits_set)
            opt.hits = 20;
    }
    if (opt.metrics <= 0 || opt.hits <= 0 || opt.repeat <= 0)
        usage();
    mkdirs(opt.out);

    result *res = calloc(NCONFIGS * NSCHEMAS, sizeof *res);
    size_t n = 0;
    double t0 = now();
    printf("# mms: %d metrics, %d hits per simulated minute, %d in the day, seed %llu, "
           "%d run%s each\n",
           opt.metrics, opt.hits, MINUTES * opt.hits, (unsigned long long)opt.seed, opt.repeat,
           opt.repeat == 1 ? "" : "s (fastest per hour)");
    printf("# durability: the engines' defaults (mmapv1: journal on, journalCommitInterval "
           "100 ms, syncdelay 60 s; btree: log on, commitIntervalMs 100, checkpoint 60 s)%s\n",
           opt.open_opts ? ", with --opts" : "");
    printf("# writes/s per %s\n", opt.wall ? "wall-clock second (--clock wall)"
                                           : "CPU second of the process (--clock cpu)");
    printf("# config schema first_hour_wps last_hour_wps ratio moves bytes_per_update "
           "seconds\n");
    fflush(stdout);
    for (size_t c = 0; c < NCONFIGS; c++) {
        if (opt.only_config && strcmp(opt.only_config, configs[c].name) != 0)
            continue;
        for (int s = 0; s < NSCHEMAS; s++) {
            if (opt.only_schema && strcmp(opt.only_schema, schema_names[s]) != 0)
                continue;
            double t1 = now();
            result *r = &res[n++];
            bench(&configs[c], s, r);
            printf("%s %s %.0f %.0f %.2f %lld %.0f %.1f\n", configs[c].name, schema_names[s],
                   wps(r, 0), wps(r, HOURS - 1), ratio(r), (long long)day_moves(r),
                   bytes_per_update(r, 0, HOURS - 1), now() - t1);
            fflush(stdout);
        }
    }
    if (n == 0)
        usage();
    double elapsed = now() - t0;

    FILE *f = open_out("mms.csv");
    write_csv(f, res, n);
    fclose(f);
    f = open_out("summary.md");
    write_summary(f, res, n, cmdline, elapsed);
    fclose(f);
    f = open_out("plot.gp");
    write_plot(f);
    fclose(f);
    bool plotted = false;
    if (opt.plot) {
        char cmd[1200];
        snprintf(cmd, sizeof cmd,
                 "command -v gnuplot >/dev/null 2>&1 && cd '%s' && gnuplot plot.gp", opt.out);
        plotted = system(cmd) == 0;
        if (!plotted)
            fprintf(stderr, "mms: no plots: gnuplot is missing or failed (tools/deps.sh "
                            "installs gnuplot-nox)\n");
    }
    printf("# files in %s: mms.csv summary.md plot.gp%s (%.0f s)\n", opt.out,
           plotted ? " throughput.png bytes.png" : "", elapsed);
    for (size_t i = 0; i < n; i++) {
        const result *r = &res[i];
        printf("mms %s %s first_hour_wps=%.0f last_hour_wps=%.0f ratio=%.2f moves=%lld "
               "bytes_per_update=%.0f\n",
               r->cfg->name, schema_names[r->schema], wps(r, 0), wps(r, HOURS - 1), ratio(r),
               (long long)day_moves(r), bytes_per_update(r, 0, HOURS - 1));
    }
    free(res);
    return 0;
}
