/*
 * t_log.h -- capture the engines' messages (engine/eng_log.h) in a test.
 *
 * The fault and corruption tests provoke messages an engine prints for a
 * person (a journal damaged before its end, a journal write or checkpoint
 * that failed).  Between t_log_begin() and t_log_end() they go to an
 * unlinked temporary file instead of the terminal, and the test asserts on
 * them.  The file descriptor is O_APPEND and survives fork(), so children
 * a test forks (the corruption rounds) are captured too.  It is written
 * with stdio and read with pread, which the fault shim (tests/faults,
 * ld --wrap of write, open, ...) does not intercept.
 */
#ifndef T_LOG_H
#define T_LOG_H

#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eng_log.h"

static FILE *t_log_file;

static void t_log_sink(void *ctx, const char *msg)
{
    (void)ctx;
    fprintf(t_log_file, "%s\n", msg);
    fflush(t_log_file);
}

/* From now on the engines' messages are captured. */
static inline void t_log_begin(void)
{
    char path[] = "/tmp/md_tlog.XXXXXX";
    int fd = mkostemp(path, O_APPEND);
    cr_assert_geq(fd, 0, "cannot create the log capture file");
    unlink(path);
    t_log_file = fdopen(fd, "a");
    cr_assert_not_null(t_log_file);
    eng_log_set_sink(t_log_sink, NULL);
}

/* The messages captured from byte *pos on (0: the first), one per line
 * ("" if none); *pos moves past them.  Capturing goes on.  The caller
 * frees the text. */
static inline char *t_log_next(long *pos)
{
    struct stat st;
    int fd = fileno(t_log_file);
    cr_assert_eq(fstat(fd, &st), 0);
    size_t n = st.st_size > *pos ? (size_t)(st.st_size - *pos) : 0;
    char *text = calloc(1, n + 1);
    cr_assert_not_null(text);
    cr_assert_eq(pread(fd, text, n, *pos), (ssize_t)n);
    *pos += (long)n;
    return text;
}

/* Stop capturing; every message captured, one per line ("" if none).  The
 * caller frees it. */
static inline char *t_log_end(void)
{
    long pos = 0;
    eng_log_set_sink(NULL, NULL);
    char *text = t_log_next(&pos);
    fclose(t_log_file);
    t_log_file = NULL;
    return text;
}

/* How many lines of text contain sub. */
static inline int t_log_count(const char *text, const char *sub)
{
    int n = 0;
    for (const char *l = text; *l;) {
        const char *nl = strchr(l, '\n');
        size_t len = nl ? (size_t)(nl - l) : strlen(l);
        const char *hit = strstr(l, sub);
        n += hit && hit + strlen(sub) <= l + len;
        l += len + (nl != NULL);
    }
    return n;
}

/* The number of lines, and the first one that does not start with one of
 * the NULL-terminated prefixes or does not contain `must` (NULL: every
 * line is fine), copied to bad. */
static inline int t_log_lines(const char *text, const char *const *prefixes, const char *must,
                              char *bad, size_t badn)
{
    int n = 0;
    if (bad && badn)
        bad[0] = '\0';
    for (const char *l = text; *l; n++) {
        const char *nl = strchr(l, '\n');
        size_t len = nl ? (size_t)(nl - l) : strlen(l);
        bool ok = false;
        for (int i = 0; prefixes[i] && !ok; i++)
            ok = strncmp(l, prefixes[i], strlen(prefixes[i])) == 0;
        if (ok && must) {
            const char *hit = strstr(l, must);
            ok = hit && hit + strlen(must) <= l + len;
        }
        if (!ok && bad && badn && !bad[0])
            snprintf(bad, badn, "%.*s", (int)len, l);
        l += len + (nl != NULL);
    }
    return n;
}

#endif
