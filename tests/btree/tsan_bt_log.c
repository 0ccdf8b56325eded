/*
 * tsan_bt_log.c -- a standalone stress driver for the btree log's flush
 * thread under ThreadSanitizer (not part of the Criterion suite, which
 * cannot start under TSan; `make test-tsan` builds and runs it).  The
 * flush thread runs with a 1 ms commit interval and 64 KB log files (so it
 * switches files) against inserts, updates, aborts, durable commits,
 * checkpoints every 50 ms (which remove log files) and explicit flushes;
 * round 1 crashes (bt_test_crash_now) and round 2 replays that log; round 3
 * runs with log: false.
 *
 *   make SANITIZER=thread
 *   cc -D_GNU_SOURCE -Iinclude -Iengine -Ibtree $(pkg-config --cflags libbson-1.0) \
 *      -g -O1 -fsanitize=thread -pthread tests/btree/tsan_bt_log.c \
 *      build-thread/libminidoc.a $(pkg-config --libs libbson-1.0 libzstd snappy \
 *      libpcre2-8) -lm -o build-thread/tsan_bt_log
 *   TSAN_OPTIONS=halt_on_error=1 build-thread/tsan_bt_log
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bt.h"
#include "eng.h"
#include "../engine/tsan_writes.h"

static void options(bson_t *o, int round)
{
    bson_t sub;
    bson_init(o);
    BSON_APPEND_DOCUMENT_BEGIN(o, "btree", &sub);
    BSON_APPEND_BOOL(&sub, "log", round != 3);
    BSON_APPEND_INT32(&sub, "commitIntervalMs", 1);
    BSON_APPEND_INT32(&sub, "checkpointIntervalMs", 50);
    BSON_APPEND_INT64(&sub, "logFileSize", 65536);
    BSON_APPEND_INT64(&sub, "cacheSize", 512 * 1024);
    bson_append_document_end(o, &sub);
}

int main(void)
{
    char dir[64] = "/tmp/bttsan.XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    for (int round = 0; round < 4; round++) {
        bson_t o;
        eng_engine *e;
        eng_txn *t;
        eng_rs *rs;
        md_error err;
        char name[32];
        eng_rs_options ro = {0};
        static eng_rid rids[TSAN_MAX_RECORDS];
        int n = 0;
        options(&o, round);
        if (eng_open(&bt_engine_ops, dir, "test", &o, &e, &err) != 0) {
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
                eng_flush(e, true, NULL);
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
        if (round == 1)
            bt_test_crash_now(e);
        eng_close(e);
        bson_destroy(&o);
        printf("round %d ok (%d records)\n", round, n);
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : 6;
}
