/*
 * pt_tsan_util.h -- a scratch database for the patterns' ThreadSanitizer
 * programs (tsan_*.c: standalone, since Criterion cannot start under
 * TSan): opened in a fresh directory with small mmapv1 files, removed
 * with everything in it after.
 */
#ifndef PT_TSAN_UTIL_H
#define PT_TSAN_UTIL_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>

#include "minidoc.h"

static int ptsan_rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

/* A fresh database of `engine` in a directory made from the mkdtemp
 * template `dir` (rewritten in place); NULL, said on stderr, if it cannot
 * be made. */
static inline md_db *ptsan_open(const char *engine, char *dir)
{
    md_db *db;
    md_error err;
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return NULL;
    }
    bson_t *opts = BCON_NEW("engine", BCON_UTF8(engine), "mmapv1", "{", "firstFileSize",
                            BCON_INT32(1 << 20), "}");
    int rc = md_db_open(dir, opts, &db, &err);
    bson_destroy(opts);
    if (rc != 0) {
        fprintf(stderr, "%s: open: %s\n", engine, err.message);
        return NULL;
    }
    return db;
}

/* Close db and remove its directory. */
static inline void ptsan_close(md_db *db, const char *dir)
{
    md_db_close(db);
    nftw(dir, ptsan_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

#endif
