/*
 * fuzz_util.h -- what the libFuzzer harnesses (tests/fuzz/fuzz_*.c) share:
 * scratch directories that are removed at exit, copying a template
 * directory, and reading an input as one or more documents.
 *
 * Documents in an input come one of two ways, chosen by its first byte:
 *   '{' or blank  extended JSON, one document per line (md_json_parse), so
 *                 that mutations of the text seeds mostly stay documents;
 *   anything else raw BSON documents back to back, each taken by its own
 *                 int32 length and validated (bson_validate) as the
 *                 server's parser does before anything reads it.
 * A document that does not read ends the list; fz_docs returns how many
 * did.  The engines' messages for a person ("the journal is damaged
 * before its end") are dropped by fz_quiet unless FUZZ_VERBOSE is set: a
 * damaged directory is the normal case here.  Every function here is
 * static: each harness is one program.
 */
#ifndef FUZZ_UTIL_H
#define FUZZ_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bson/bson.h>

#include "eng_log.h"
#include "minidoc.h"

static void fz_drop_message(void *ctx, const char *msg)
{
    (void)ctx;
    (void)msg;
}

static void fz_quiet(void)
{
    if (!getenv("FUZZ_VERBOSE"))
        eng_log_set_sink(fz_drop_message, NULL);
}

static int fz_rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

/* rm -rf path (nothing when it does not exist). */
static void fz_rmtree(const char *path)
{
    nftw(path, fz_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static char fz_scratch[256];

static void fz_scratch_remove(void)
{
    if (fz_scratch[0])
        fz_rmtree(fz_scratch);
}

/* A scratch directory for this process (tmpfs when there is one), removed
 * at exit; the same path on every call. */
static const char *fz_scratch_dir(void)
{
    if (fz_scratch[0])
        return fz_scratch;
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    if (getenv("TMPDIR"))
        base = getenv("TMPDIR");
    snprintf(fz_scratch, sizeof fz_scratch, "%s/minidoc-fuzz-XXXXXX", base);
    if (!mkdtemp(fz_scratch)) {
        perror("mkdtemp");
        abort();
    }
    atexit(fz_scratch_remove);
    return fz_scratch;
}

/* Write n bytes to path (created or truncated). */
static void fz_write_file(const char *path, const void *p, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || (n && write(fd, p, n) != (ssize_t)n)) {
        perror(path);
        abort();
    }
    close(fd);
}

/* Read a whole file into a malloc'ed buffer. */
static uint8_t *fz_read_file(const char *path, size_t *n)
{
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        perror(path);
        abort();
    }
    uint8_t *p = malloc((size_t)st.st_size + 1);
    ssize_t r = st.st_size ? pread(fd, p, (size_t)st.st_size, 0) : 0;
    if (r != st.st_size) {
        perror(path);
        abort();
    }
    close(fd);
    *n = (size_t)st.st_size;
    return p;
}

/* cp -r src dst for the regular files and directories under src. */
static void fz_copytree(const char *src, const char *dst)
{
    DIR *d = opendir(src);
    struct dirent *e;
    if (!d || (mkdir(dst, 0755) != 0 && access(dst, F_OK) != 0)) {
        perror(src);
        abort();
    }
    while ((e = readdir(d))) {
        char s[1024], t[1024];
        struct stat st;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        snprintf(s, sizeof s, "%s/%s", src, e->d_name);
        snprintf(t, sizeof t, "%s/%s", dst, e->d_name);
        if (lstat(s, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            fz_copytree(s, t);
        } else if (S_ISREG(st.st_mode)) {
            size_t n;
            uint8_t *p = fz_read_file(s, &n);
            fz_write_file(t, p, n);
            free(p);
        }
    }
    closedir(d);
}

/* The regular files under dir (relative paths, sorted so that an input
 * names the same file on every run), at most cap of them. */
static int fz_cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int fz_list_files_in(const char *dir, const char *rel, char **out, int n, int cap)
{
    char path[1024];
    snprintf(path, sizeof path, "%s%s%s", dir, *rel ? "/" : "", rel);
    DIR *d = opendir(path);
    struct dirent *e;
    if (!d)
        return n;
    while ((e = readdir(d)) && n < cap) {
        char r[1024], full[2048];
        struct stat st;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        snprintf(r, sizeof r, "%s%s%s", rel, *rel ? "/" : "", e->d_name);
        snprintf(full, sizeof full, "%s/%s", dir, r);
        if (lstat(full, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode))
            n = fz_list_files_in(dir, r, out, n, cap);
        else if (S_ISREG(st.st_mode))
            out[n++] = strdup(r);
    }
    closedir(d);
    return n;
}

static int fz_list_files(const char *dir, char **out, int cap)
{
    int n = fz_list_files_in(dir, "", out, 0, cap);
    qsort(out, (size_t)n, sizeof *out, fz_cmp_str);
    return n;
}

/* Up to `cap` documents from the input (see the top of the file), each
 * initialized in docs[] (bson_destroy them all, also the unread ones,
 * which are left empty).  Returns how many were read. */
static int fz_docs(const uint8_t *data, size_t size, bson_t *docs, int cap)
{
    int n = 0;
    for (int k = 0; k < cap; k++)
        bson_init(&docs[k]);
    if (size > 0 && (data[0] == '{' || data[0] == ' ' || data[0] == '\n')) {
        const char *p = (const char *)data, *end = p + size;
        while (n < cap && p < end) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
            bson_destroy(&docs[n]);
            if (md_json_parse(p, (ssize_t)len, &docs[n], NULL) != 0)
                break;
            n++;
            p += len + 1;
        }
        return n;
    }
    while (n < cap && size >= 5) {
        uint32_t len = (uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 |
                       (uint32_t)data[3] << 24;
        bson_t view;
        if (len < 5 || len > size || !bson_init_static(&view, data, len) ||
            !bson_validate(&view, BSON_VALIDATE_NONE, NULL))
            break;
        bson_destroy(&docs[n]);
        bson_copy_to(&view, &docs[n]);
        n++;
        data += len;
        size -= len;
    }
    return n;
}

#endif
