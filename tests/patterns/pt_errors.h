/*
 * pt_errors.h -- the failures of many client threads in a pattern test:
 * counted, and the first one's text kept for the assertion message.  No
 * Criterion here, so that the standalone ThreadSanitizer programs
 * (tsan_*.c) use it too.
 */
#ifndef PT_ERRORS_H
#define PT_ERRORS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "minidoc.h"

typedef struct ptt_errors {
    atomic_int n;
    char first[256];
    pthread_mutex_t lock;
} ptt_errors;

static inline void ptt_errors_init(ptt_errors *e)
{
    atomic_init(&e->n, 0);
    e->first[0] = '\0';
    pthread_mutex_init(&e->lock, NULL);
}

static inline void ptt_errors_destroy(ptt_errors *e)
{
    pthread_mutex_destroy(&e->lock);
}

/* Count a failure of `what`; the first one's "what: rc: message" is kept. */
static inline void ptt_errors_add(ptt_errors *e, const char *what, int rc, const md_error *err)
{
    pthread_mutex_lock(&e->lock);
    if (atomic_fetch_add(&e->n, 1) == 0)
        snprintf(e->first, sizeof e->first, "%s: %s: %.160s", what, md_strerror(rc),
                 err->message);
    pthread_mutex_unlock(&e->lock);
}

#endif /* PT_ERRORS_H */
