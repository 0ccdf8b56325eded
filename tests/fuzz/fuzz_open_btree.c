/*
 * fuzz_open_btree.c -- libFuzzer harness: opening a damaged btree data
 * directory (the turtle file, the metadata tree, collection and index
 * files, the write-ahead log; btree/bt_ckpt.c, bt_block.c, bt_page.c,
 * bt_log.c's recovery, bt_verify.c).  The harness itself is fuzz_open.h;
 * here are the engine's options and its checksum fix-up: a log file's
 * header crc32c and every record's crc32c are computed again over the
 * damaged bytes (bt_int.h, "Log file" and "Log record"), so that recovery
 * replays damaged operations instead of stopping at the first bad
 * checksum.  Blocks keep their checksums: a damaged page is found by its
 * crc32c, and the fuzzer's job there is the turtle, the descriptor block,
 * the addresses and truncated files.  The template stores pages
 * uncompressed.  Seeds: tests/fuzz/corpus/open_btree/.
 */
#define FZ_BTOPTS "\"blockCompressor\": \"none\", \"logFileSize\": 65536, \"cacheSizeMB\": 8"
#define FZ_OPTS "{\"engine\": \"btree\", \"btree\": {" FZ_BTOPTS "}}"
#define FZ_CRASH_OPTS                                                                         \
    "{\"engine\": \"btree\", \"btree\": {" FZ_BTOPTS ", \"checkpointIntervalSecs\": 100000}}"

#include "fuzz_open.h"
#include "eng.h"

static void fz_fix_checksums(const char *name, uint8_t *p, size_t n)
{
    if (!strstr(name, "btlog.") || n < 32)
        return;
    fz_wr32(p + 24, eng_crc32c(0, p, 24));
    for (size_t o = 32; o + 24 <= n; ) {
        uint32_t len = fz_rd32(p + o);
        if (len < 24 || len > n - o)
            break;
        fz_wr32(p + o + 4, 0);
        fz_wr32(p + o + 4, eng_crc32c(0, p + o, len));
        o += len;
    }
}
