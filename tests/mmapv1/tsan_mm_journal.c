/*
 * tsan_mm_journal.c -- a standalone stress driver for the mmapv1 journal
 * under ThreadSanitizer (not part of the Criterion suite: Criterion 2.4's
 * process arena cannot be set up under TSan, "Could not initialize
 * inheritable arena").  The flush thread runs with a 1 ms commit interval,
 * a 1 s syncdelay and 64 KB journal files (so it rotates and recycles),
 * against inserts, moving updates, aborts, durable commits, flushes,
 * debugRemapOnGrow and journal: false.
 *
 *   make SANITIZER=thread
 *   cc -D_GNU_SOURCE -Iinclude -Iengine -Immapv1 $(pkg-config --cflags libbson-1.0) \
 *      -g -O1 -fsanitize=thread -pthread tests/mmapv1/tsan_mm_journal.c \
 *      build-thread/libminidoc.a $(pkg-config --libs libbson-1.0 libzstd snappy \
 *      libpcre2-8) -lm -o build-thread/tsan_mm_journal
 *   TSAN_OPTIONS=halt_on_error=1 build-thread/tsan_mm_journal
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eng.h"
#include "../engine/tsan_writes.h"
#include "mm.h"

static void options(bson_t *o, int round)
{
    bson_t sub;
    bson_init(o);
    BSON_APPEND_DOCUMENT_BEGIN(o, "mmapv1", &sub);
    BSON_APPEND_INT64(&sub, "firstFileSize", 65536);
    BSON_APPEND_INT64(&sub, "nsSize", 65536);
    BSON_APPEND_BOOL(&sub, "debugRemapOnGrow", round == 1);
    BSON_APPEND_BOOL(&sub, "debugCheckViews", true);
    BSON_APPEND_BOOL(&sub, "journal", round != 2);
    BSON_APPEND_INT32(&sub, "journalCommitInterval", 1);
    BSON_APPEND_INT32(&sub, "syncdelay", 1);
    BSON_APPEND_INT64(&sub, "journalFileSize", 65536);
    bson_append_document_end(o, &sub);
}

int main(void)
{
    char dir[64] = "/tmp/mmtsan.XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    for (int round = 0; round < 3; round++) {
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
        if (eng_open(&mm_engine_ops, dir, "test", &o, &e, &err) != 0) {
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
                eng_flush(e, i % 1000 == 0, NULL);
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
        eng_close(e);
        bson_destroy(&o);
        printf("round %d ok (%d records)\n", round, n);
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : 6;
}
