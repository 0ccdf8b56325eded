/*
 * tsan_writes.h -- the write mix shared by the ThreadSanitizer stress
 * programs (tsan_*.c under tests/): inserts while there is room, updates
 * (which may move a record on mmapv1) after that, one transaction in seven
 * aborted and one in eleven committed durably, so the engine's background
 * thread (the journal's or the log's group commit) races real work.
 */
#ifndef TSAN_WRITES_H
#define TSAN_WRITES_H

#include <stdlib.h>
#include <string.h>

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

#endif /* TSAN_WRITES_H */
