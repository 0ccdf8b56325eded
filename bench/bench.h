/*
 * bench.h -- what the benchmark programs share: a monotonic clock, a fatal
 * message (fail), and running a command that must succeed (any error or
 * writeError ends the program with the command's name and MongoDB's
 * message).  Each program
 * defines BENCH_NAME before including it, for its messages.
 */
#ifndef BENCH_H
#define BENCH_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "minidoc.h"

#ifndef BENCH_NAME
#error "define BENCH_NAME before including bench.h"
#endif

static inline double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A message and exit(1), for failures that are not a command's. */
static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn, unused));
static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs(BENCH_NAME ": ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static inline void die(const char *what, const md_error *err)
{
    fprintf(stderr, BENCH_NAME ": %s: %s (code %d)\n", what, err->message, err->code);
    exit(1);
}

/* Run cmd (destroyed here); the reply goes to *reply when wanted. */
static inline void run(md_db *db, bson_t *cmd, const char *what, bson_t *reply)
{
    bson_t r;
    md_error err;
    bson_iter_t it;
    if (md_db_command(db, cmd, &r, &err) != 0)
        die(what, &err);
    if (bson_iter_init_find(&it, &r, "writeErrors")) {
        fprintf(stderr, BENCH_NAME ": %s: write error\n", what);
        exit(1);
    }
    if (reply)
        bson_copy_to(&r, reply);
    bson_destroy(&r);
    bson_destroy(cmd);
}

#endif /* BENCH_H */
