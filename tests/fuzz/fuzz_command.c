/*
 * fuzz_command.c -- libFuzzer harness for md_db_command with arbitrary
 * documents: the command dispatcher, every command's parser, the
 * planner, the executor and the aggregation pipeline, on both engines.
 *
 * The input is up to four command documents (fuzz_util.h: JSON lines, or
 * BSON documents back to back, each validated first as the server's
 * parser does -- md_db_command validates again); they run in order on an
 * mmapv1 database and then on a btree one, so that one input can create
 * an index and then write through it.  Both databases stay open across
 * inputs in a scratch directory (tmpfs when there is one) with small
 * files; every RESET_EVERY inputs they are closed, removed and created
 * again, so that state left by earlier inputs (collections, indexes,
 * cursors) stays small.  Every reply must be a valid document with an
 * "ok" field.  Seeds: tests/fuzz/corpus/command/.
 */
#include "fuzz_util.h"

#define RESET_EVERY 2000

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static md_db *dbs[2];
static unsigned runs;

static void open_all(void)
{
    static const char *const opts[2] = {
        "{\"engine\": \"mmapv1\", \"smallFiles\": true, \"mmapv1\": {\"firstFileSize\": 65536,"
        " \"nsSize\": 16384, \"journalFileSize\": 65536}}",
        "{\"engine\": \"btree\", \"btree\": {\"cacheSizeMB\": 8}}",
    };
    for (int e = 0; e < 2; e++) {
        char dir[512];
        bson_t o;
        md_error err;
        snprintf(dir, sizeof dir, "%s/db%d", fz_scratch_dir(), e);
        fz_rmtree(dir);
        if (md_json_parse(opts[e], -1, &o, &err) != 0 ||
            md_db_open(dir, &o, &dbs[e], &err) != 0) {
            fprintf(stderr, "cannot open %s: %s\n", dir, err.message);
            abort();
        }
        bson_destroy(&o);
    }
}

static void close_all(void)
{
    for (int e = 0; e < 2; e++) {
        md_db_close(dbs[e]);
        dbs[e] = NULL;
    }
}

static void check_reply(const bson_t *cmd, const bson_t *reply)
{
    bson_iter_t it;
    if (!bson_validate(reply, BSON_VALIDATE_NONE, NULL) || !bson_iter_init_find(&it, reply, "ok")) {
        char *c = bson_as_canonical_extended_json(cmd, NULL);
        fprintf(stderr, "command %s: the reply is not valid or has no ok field\n",
                c ? c : "(not UTF-8)");
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bson_t cmds[4];
    if (size > (1u << 20))
        return 0;
    if (!dbs[0] || runs++ % RESET_EVERY == 0) {
        if (dbs[0])
            close_all();
        else {
            fz_scratch_dir(); /* removed after close_all: atexit runs in reverse */
            fz_quiet();
            atexit(close_all);
        }
        open_all();
    }
    int n = fz_docs(data, size, cmds, 4);
    for (int e = 0; e < 2; e++)
        for (int k = 0; k < n; k++) {
            bson_t reply;
            md_error err;
            md_db_command(dbs[e], &cmds[k], &reply, &err);
            check_reply(&cmds[k], &reply);
            bson_destroy(&reply);
        }
    for (int k = 0; k < 4; k++)
        bson_destroy(&cmds[k]);
    return 0;
}
