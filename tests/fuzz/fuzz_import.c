/*
 * fuzz_import.c -- libFuzzer harness for the import tool's readers
 * (tools/import.c through tool_import_stream): JSON documents one after
 * the other, a JSON array, CSV (RFC 4180 quoting) and TSV, with field
 * lists, dotted names, --columnsHaveTypes conversions (int32 ... date
 * layouts, binary hex/base64), --ignoreBlanks and the upsert and merge
 * modes.
 *
 * The first byte of the input picks the command line:
 *   bits 0-1  json, json --jsonArray, csv, tsv
 *   bit 2     --headerline (else --fields, typed when bit 3)
 *   bit 3     --columnsHaveTypes
 *   bit 4     --ignoreBlanks
 *   bits 5-6  --mode insert, upsert, merge (--upsertFields a), upsert
 *   bit 7     --stopOnError
 * and the rest is the file.  The database is an in-memory one
 * (ephemeralForTest) kept across inputs, its collection dropped every
 * DROP_EVERY inputs; --batchSize 7 makes a long input flush several
 * batches.  Seeds: tests/fuzz/corpus/import/.
 */
#include "fuzz_util.h"
#include "tool.h"

#define DROP_EVERY 500

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static md_db *db;
static FILE *devnull;
static unsigned runs;

static void close_db(void)
{
    md_db_close(db);
}

static void setup(void)
{
    bson_t o;
    md_error err;
    char dir[512];
    bson_init(&o);
    BSON_APPEND_UTF8(&o, "engine", "ephemeralForTest");
    snprintf(dir, sizeof dir, "%s/db", fz_scratch_dir());
    if (md_db_open(dir, &o, &db, &err) != 0) {
        fprintf(stderr, "cannot open %s: %s\n", dir, err.message);
        abort();
    }
    bson_destroy(&o);
    atexit(close_db);
    devnull = fopen("/dev/null", "w");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const types[4] = {"json", "json", "csv", "tsv"};
    static const char *const modes[4] = {"insert", "upsert", "merge", "upsert"};
    if (size < 2 || size > (1u << 20))
        return 0;
    if (!db)
        setup();
    uint8_t b = data[0];
    char *argv[16];
    int argc = 0;
    argv[argc++] = "import";
    argv[argc++] = "--collection=c";
    argv[argc++] = "--batchSize=7";
    char type[32], mode[32];
    snprintf(type, sizeof type, "--type=%s", types[b & 3]);
    argv[argc++] = type;
    if ((b & 3) == 1)
        argv[argc++] = "--jsonArray";
    if ((b & 3) >= 2) {
        if (b & 4)
            argv[argc++] = "--headerline";
        else if (b & 8)
            argv[argc++] = "--fields=a.int32(),b.c.string(),b.d.double(),d.date(2006-01-02T15:04:"
                           "05Z07:00),e.binary(hex),f.binary(base64),g.boolean(),h.decimal(),"
                           "i.int64(),j.auto(),k.date_go(Jan 2 2006)";
        else
            argv[argc++] = "--fields=a,b.c,b.d,e";
        if (b & 8)
            argv[argc++] = "--columnsHaveTypes";
    }
    if (b & 16)
        argv[argc++] = "--ignoreBlanks";
    snprintf(mode, sizeof mode, "--mode=%s", modes[(b >> 5) & 3]);
    argv[argc++] = mode;
    if (((b >> 5) & 3) == 2)
        argv[argc++] = "--upsertFields=a";
    if (b & 128)
        argv[argc++] = "--stopOnError";
    argv[argc] = NULL;
    if (runs++ % DROP_EVERY == 0) {
        argv[argc++] = "--drop";
        argv[argc] = NULL;
    }
    FILE *in = fmemopen((void *)(data + 1), size - 1, "r");
    if (!in)
        abort();
    int64_t imported, failed;
    tool_import_stream(db, argc, argv, in, devnull, &imported, &failed);
    fclose(in);
    return 0;
}
