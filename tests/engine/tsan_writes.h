/*
 * tsan_writes.h -- the write mix shared by the ThreadSanitizer stress
 * programs (tsan_*.c under tests/): inserts while there is room, updates
 * (which may move a record on mmapv1) after that, one transaction in seven
 * aborted and one in eleven committed durably, so the engine's background
 * thread (the journal's or the log's group commit) races real work.
 */
#ifndef TSAN_WRITES_H
#define TSAN_WRITES_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eng.h"

#define TSAN_MAX_RECORDS 2000

/* One write: insert while there is room, else update (often moving). */
static inline void one_write(eng_engine *e, eng_rs *rs, eng_rid *rids, int *n, int i)
{
    bson_t b = BSON_INITIALIZER;
    char pad[600];
    eng_txn *t;
    memset(pad, 'x', sizeof pad);
    pad[(i * 37) % 599] = '\0';
    BSON_APPEND_INT32(&b, "_id", i);
    BSON_APPEND_UTF8(&b, "p", pad);
    if (eng_txn_begin(e, &t) != 0)
        exit(4);
    if (*n < TSAN_MAX_RECORDS && i % 3 != 2) {
        if (eng_rs_insert(rs, t, bson_get_data(&b), b.len, &rids[*n], NULL) == 0)
            (*n)++;
    } else if (*n > 0) {
        eng_rid nr;
        bool moved;
        int k = i % *n;
        if (eng_rs_update(rs, t, rids[k], bson_get_data(&b), b.len, &nr, &moved, NULL) == 0)
            rids[k] = nr;
    }
    if (i % 7 == 0)
        eng_txn_abort(t);
    else if (eng_txn_commit(t, i % 11 == 0, NULL) != 0)
        exit(5);
    bson_destroy(&b);
}

/* What differs between the stress programs; tsan_main() does the rest. */
typedef struct tsan_driver {
    const eng_ops *ops;
    const char *dir_template; /* for mkdtemp, e.g. "/tmp/mmtsan.XXXXXX" */
    int rounds;
    void (*options)(bson_t *o, int round);          /* open options */
    bool (*flush_sync)(int i);                       /* every 500 writes */
    void (*before_close)(eng_engine *e, int round); /* may be NULL */
} tsan_driver;

/* One round: open, 3000 writes with flushes and pauses, validate, close. */
static inline int tsan_round(const tsan_driver *d, const char *dir, int round)
{
    bson_t o;
    eng_engine *e;
    eng_txn *t;
    eng_rs *rs;
    md_error err;
    char name[32];
    eng_rs_options ro = {0};
    static eng_rid rids[TSAN_MAX_RECORDS];
    int n = 0;
    d->options(&o, round);
    if (eng_open(d->ops, dir, "test", &o, &e, &err) != 0) {
        fprintf(stderr, "open: %s\n", err.message);
        return 1;
    }
    snprintf(name, sizeof name, "test.c%d", round);
    if (eng_txn_begin(e, &t) || eng_rs_create(e, t, name, &ro, NULL) ||
        eng_txn_commit(t, false, NULL) || eng_rs_open(e, name, &rs, NULL))
        return 2;
    for (int i = 0; i < 3000; i++) {
        one_write(e, rs, rids, &n, i);
        if (i % 500 == 0)
            eng_flush(e, d->flush_sync(i), NULL);
        if (i % 100 == 0)
            usleep(2000);
    }
    eng_validate v;
    eng_validate_init(&v, true);
    eng_rs_validate(rs, &v);
    if (v.nerrors) {
        char *s = bson_as_relaxed_extended_json(&v.errors, NULL);
        fprintf(stderr, "invalid: %s\n", s);
        return 3;
    }
    eng_validate_cleanup(&v);
    eng_rs_close(rs);
    if (d->before_close)
        d->before_close(e, round);
    eng_close(e);
    bson_destroy(&o);
    printf("round %d ok (%d records)\n", round, n);
    return 0;
}

static inline int tsan_main(const tsan_driver *d)
{
    char dir[64];
    snprintf(dir, sizeof dir, "%s", d->dir_template);
    if (!mkdtemp(dir))
        return 1;
    for (int round = 0; round < d->rounds; round++) {
        int rc = tsan_round(d, dir, round);
        if (rc)
            return rc;
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : 6;
}

#endif /* TSAN_WRITES_H */
