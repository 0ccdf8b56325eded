/*
 * fuzz_open_mmapv1.c -- libFuzzer harness: opening a damaged mmapv1 data
 * directory (the .ns file, the data files, the journal and its lsn file;
 * mmapv1/mm_file.c, mm_ns.c, mm_extent.c, mm_journal.c, mm_jsect.c, the
 * index buckets of mm_btree.c, mm_verify.c).  The harness itself is
 * fuzz_open.h; here are the engine's options and its checksum fix-up:
 * a journal file's header crc32c and every section's footer crc32c are
 * computed again over the damaged bytes (mm_int.h, "Journal file"), so
 * that replay applies damaged entries instead of stopping at the first
 * bad checksum.  Seeds: tests/fuzz/corpus/open_mmapv1/.
 */
#define FZ_MMOPTS "\"firstFileSize\": 65536, \"nsSize\": 16384, \"journalFileSize\": 65536"
#define FZ_OPTS "{\"engine\": \"mmapv1\", \"smallFiles\": true, \"mmapv1\": {" FZ_MMOPTS "}}"
#define FZ_CRASH_OPTS                                                                         \
    "{\"engine\": \"mmapv1\", \"smallFiles\": true, \"mmapv1\": {" FZ_MMOPTS                  \
    ", \"syncdelay\": 0}}"

#include "fuzz_open.h"
#include "eng.h"

static void fz_fix_checksums(const char *name, uint8_t *p, size_t n)
{
    if (!strstr(name, "journal/j._") || n < 8192)
        return;
    fz_wr32(p + 8188, eng_crc32c(0, p, 8188));
    for (size_t o = 8192; o + 40 <= n; ) {
        uint32_t len = fz_rd32(p + o);
        if (len < 40 || len > n - o)
            break;
        fz_wr32(p + o + len - 12, eng_crc32c(0, p + o, len - 12));
        o += ((size_t)len + 8191) / 8192 * 8192;
    }
}
