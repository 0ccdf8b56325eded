/*
 * fuzz_json.c -- libFuzzer harness for the extended-JSON reader
 * (query/q_json.c, md_json_parse): what the CLI, the tools' --query and
 * --opts, md_db_command_json and the import tool read.
 *
 * The input is the text, read once with its length (embedded NULs
 * included) and once NUL-terminated (len -1).  A document that reads is
 * written back as canonical Extended JSON v2 (libbson's writer) and read
 * again: the round trip must give the same bytes, or the harness aborts --
 * canonical JSON names every type exactly, so any difference is the
 * reader's.  Documents whose strings are not UTF-8 have no JSON form and
 * skip the round trip.  Seeds: tests/fuzz/corpus/json/.
 */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void round_trip(const bson_t *doc, const char *text, size_t tlen)
{
    size_t n;
    char *json = bson_as_canonical_extended_json(doc, &n);
    if (!json)
        return; /* not UTF-8: no JSON form */
    bson_t again;
    md_error err;
    if (md_json_parse(json, (ssize_t)n, &again, &err) != 0) {
        fprintf(stderr, "round trip: %.*s\n-> %s\ndoes not read: %s\n", (int)tlen, text, json,
                err.message);
        abort();
    }
    if (again.len != doc->len || memcmp(bson_get_data(&again), bson_get_data(doc), doc->len)) {
        char *back = bson_as_canonical_extended_json(&again, NULL);
        fprintf(stderr, "round trip: %.*s\n-> %s\n-> %s\n", (int)tlen, text, json,
                back ? back : "(no JSON)");
        abort();
    }
    bson_free(json);
    bson_destroy(&again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bson_t doc;
    md_error err;
    if (size > (1u << 20))
        return 0;
    if (md_json_parse((const char *)data, (ssize_t)size, &doc, &err) == 0)
        round_trip(&doc, (const char *)data, size);
    bson_destroy(&doc);
    char *z = malloc(size + 1);
    memcpy(z, data, size);
    z[size] = '\0';
    md_json_parse(z, -1, &doc, NULL);
    bson_destroy(&doc);
    free(z);
    return 0;
}
