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

static bool always(int i)
{
    return true;
}

/* Round 1 ends in a simulated crash: the next round replays the log. */
static void crash_in_round_1(eng_engine *e, int round)
{
    if (round == 1)
        bt_test_crash_now(e);
}

int main(void)
{
    const tsan_driver d = {&bt_engine_ops, "/tmp/bttsan.XXXXXX", 4, options, always,
                           crash_in_round_1};
    return tsan_main(&d);
}
