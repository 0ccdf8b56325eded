/*
 * tool.h -- what the minidoc subcommands (dump, restore, import, export,
 * inspect, shell) share: the database options every one of them takes (--dbpath,
 * --engine, --dbname, --smallfiles, --opts), opening the database with a
 * clear message when it cannot be opened (missing, locked by another
 * process: DBPathInUse, 98), running a command and printing its error,
 * and byte streams that are plain files, stdin/stdout or gzip (zlib).
 *
 * The dispatcher (tools/minidoc.c) calls tool_find(): the first word of
 * the command line that is not an option or an option's value names the
 * subcommand; "run" and "eval" stay with minidoc.c.  Every subcommand
 * gets the whole argv and skips its own name (tool_is_name()).
 *
 * Exit statuses, for every subcommand: 0 success, 1 failure (a file that
 * cannot be read or written, a database that cannot be opened, documents
 * that failed), 2 usage errors; inspect: 3 when it drew damage.
 */
#ifndef TOOL_H
#define TOOL_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <zlib.h>

#include "minidoc.h"

typedef struct tool_db_opts {
    const char *dbpath, *engine, *dbname, *opts_json;
    bool smallfiles;
} tool_db_opts;

typedef int (*tool_main_fn)(int argc, char **argv);

/* The subcommand argv names, or NULL when it is run/eval (minidoc.c's). */
tool_main_fn tool_find(int argc, char **argv);
/* argv[i] is the subcommand's own name (the first positional word). */
bool tool_is_name(int argc, char **argv, int i);

int tool_dump_main(int argc, char **argv);
int tool_restore_main(int argc, char **argv);
int tool_import_main(int argc, char **argv);
int tool_export_main(int argc, char **argv);
int tool_inspect_main(int argc, char **argv);
int tool_shell_main(int argc, char **argv); /* shell.c (tools/shell.h) */
/* The import of tool_import_main on an open database, its input read from
 * `in` instead of --file and its per-line messages written to `msgs`
 * (--dbpath and the other database options are ignored; --collection is
 * then required).  Returns the exit status, with the counts of its
 * summary line in *imported and *failed.  The fuzz harness's entry. */
int tool_import_stream(md_db *db, int argc, char **argv, FILE *in, FILE *msgs,
                       int64_t *imported, int64_t *failed);

/* "--name value" or "--name=value" at argv[*i]: the value (advancing *i
 * past a separate value), else NULL. */
const char *tool_opt_value(int argc, char **argv, int *i, const char *name);
/* argv[*i] is one of the database options: store it and return 1; 0 if
 * it is not one; -1 (message printed) if its value is missing. */
int tool_db_opt(int argc, char **argv, int *i, tool_db_opts *o, const char *prog);

/*
 * A tool's options as a table, one row per option, each storing into the
 * tool's options struct at `off` (offsetof):
 *   TOOL_STR     "--name V", "--name=V" or the alias: a const char *
 *   TOOL_FLAG    "--name": a bool set to true
 *   TOOL_CHOICE  "--name V" with V one of `choices` (NULL-terminated): an
 *                int set to V's index; another V is "unknown NAME 'V'"
 *   TOOL_COUNT   "--name N", N an integer in [min, max]: an int64_t
 *   TOOL_OPTIONAL  "--name" alone (a const char * set to "-") or
 *                "--name=V" (set to V): mongodump's --archive
 * The table ends with a row whose name is NULL.
 */
typedef enum { TOOL_STR, TOOL_FLAG, TOOL_CHOICE, TOOL_COUNT, TOOL_OPTIONAL } tool_opt_kind;
typedef struct tool_opt {
    const char *name, *alias; /* "--collection", "-c" (alias may be NULL) */
    tool_opt_kind kind;
    size_t off;
    const char *const *choices; /* TOOL_CHOICE */
    int64_t min, max;           /* TOOL_COUNT */
} tool_opt;
/* The rows, for a field f of options struct T. */
#define TOOL_OPT_STR(name, alias, T, f) {name, alias, TOOL_STR, offsetof(T, f), NULL, 0, 0}
#define TOOL_OPT_FLAG(name, T, f) {name, NULL, TOOL_FLAG, offsetof(T, f), NULL, 0, 0}
#define TOOL_OPT_CHOICE(name, T, f, choices) {name, NULL, TOOL_CHOICE, offsetof(T, f), choices, 0, 0}
#define TOOL_OPT_COUNT(name, T, f, lo, hi) {name, NULL, TOOL_COUNT, offsetof(T, f), NULL, lo, hi}
#define TOOL_OPT_OPTIONAL(name, T, f) {name, NULL, TOOL_OPTIONAL, offsetof(T, f), NULL, 0, 0}
#define TOOL_OPT_END {NULL, NULL, TOOL_STR, 0, NULL, 0, 0}
/* Read argv[1..] into the options struct o by table: the database options
 * (into *db), the table's rows, --help (usage on stdout, exit 0), and one
 * positional argument into *positional when that is not NULL and still
 * unset.  `more` (may be NULL) is asked about any other argument first: 1
 * it took argv[*i] (and maybe more after it), 0 it did not, -1 an error it
 * printed.  Anything else is "<prog>: unexpected argument '...'".  0, or -1
 * with the message printed. */
int tool_parse(int argc, char **argv, const tool_opt *table, void *o, tool_db_opts *db,
               const char **positional, void (*usage)(FILE *), const char *prog,
               int (*more)(int argc, char **argv, int *i, void *o, const char *prog));
/* Open the database; on failure print "<prog>: cannot open DIR: ..." and
 * return NULL.  `create` false refuses a directory that does not exist. */
md_db *tool_open_db(const tool_db_opts *o, bool create, const char *prog);

/* Run `cmd`; 0 when ok: 1.  The reply is always initialized. */
int tool_command(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err);

/* One JSON object (extended JSON: canonical, relaxed or legacy) into
 * `out` (always initialized).  0, or -1 with the reason in msg. */
int tool_json_parse(const char *text, ssize_t len, bson_t *out, char *msg, size_t msgcap);

/* Every document of `coll` matching `filter` (NULL: all) with find
 * options `opts` (NULL: none), in natural order unless opts sorts;
 * calls fn for each; stops when fn returns nonzero (returns that).
 * Returns 0, or -1 with err filled when the find failed. */
int tool_each_doc(md_db *db, const char *coll, const bson_t *filter, const bson_t *opts,
                  int (*fn)(const bson_t *doc, void *arg), void *arg, md_error *err);

/* ---- streams: a plain FILE or a gzip stream ------------------------------ */
typedef struct tool_stream {
    FILE *f;
    gzFile gz;
    bool eof, failed;
    uint64_t bytes; /* uncompressed bytes through the stream */
    char path[1024];
} tool_stream;

/* Open `path` ("-": stdin/stdout) for reading or writing; gzip compresses
 * on write, and reading gunzips when `gzip` (zlib also reads a plain file
 * through gzread transparently).  0, or -1 with errno set. */
int tool_stream_open(tool_stream *s, const char *path, bool write, bool gzip);
/* Read exactly n bytes: n, 0 at a clean end of the stream before any
 * byte, -1 on an error or a short read (s->failed / s->eof say which). */
ssize_t tool_stream_read(tool_stream *s, void *buf, size_t n);
int tool_stream_write(tool_stream *s, const void *buf, size_t n);
/* Close; -1 if a write or the close failed (errno set). */
int tool_stream_close(tool_stream *s);

/* The whole file (gunzipped when gzip; "-": stdin), NUL-terminated, in
 * a malloc'ed buffer; its length in *len if not NULL.  NULL with errno. */
char *tool_slurp(const char *path, bool gzip, size_t *len);

/* Read one BSON document from the stream into *buf (grown as needed):
 * 1 read, 0 clean end, -1 damage (message in msg).  An int32 of -1 (the
 * archive's terminator) is returned as 2 when allow_term. */
int tool_read_bson(tool_stream *s, uint8_t **buf, size_t *cap, bool allow_term, char *msg,
                   size_t msgcap);

/* CRC-64-ECMA as Go's hash/crc64 (ECMA table) computes it: the archive's
 * per-namespace checksum.  Start with crc 0. */
uint64_t tool_crc64(uint64_t crc, const uint8_t *p, size_t n);

/* mkdir -p; 0 or -1 with errno. */
int tool_mkdirs(const char *path);

#endif
