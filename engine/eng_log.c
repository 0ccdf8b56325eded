/*
 * eng_log.c -- the engines' messages: stderr, or a sink (eng_log.h).
 *
 * One mutex guards the sink and serializes the messages, so lines from the
 * journal thread and a checkpoint never interleave and a sink being
 * replaced is never called after eng_log_set_sink() returns.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

#include "eng_log.h"

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static eng_log_fn log_fn;
static void *log_ctx;

void eng_log_set_sink(eng_log_fn fn, void *ctx)
{
    pthread_mutex_lock(&log_mu);
    log_fn = fn;
    log_ctx = ctx;
    pthread_mutex_unlock(&log_mu);
}

void eng_log(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&log_mu);
    if (log_fn)
        log_fn(log_ctx, msg);
    else
        fprintf(stderr, "%s\n", msg);
    pthread_mutex_unlock(&log_mu);
}
