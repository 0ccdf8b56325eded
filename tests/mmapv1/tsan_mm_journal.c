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

/* Every other flush also syncs the data files and recycles the journal. */
static bool every_other(int i)
{
    return i % 1000 == 0;
}

int main(void)
{
    const tsan_driver d = {&mm_engine_ops, "/tmp/mmtsan.XXXXXX", 3, options, every_other, NULL};
    return tsan_main(&d);
}
