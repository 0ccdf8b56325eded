/*
 * minidoc.c -- the command-line tool: MongoDB commands in, replies out.
 *
 *   minidoc --dbpath DIR [--engine NAME] [--dbname NAME] [--smallfiles]
 *           [--opts '<json>'] run            one command per stdin line
 *   minidoc ... run --stop-on-error          ... up to the first ok: 0 reply,
 *                                            then exit 1
 *   minidoc ... eval '<command>'             one command; exit 1 if ok: 0
 *   minidoc ... files put|get|list|search|delete ...   GridFS (files.c)
 *   minidoc serve --dbpath DIR [...]         the MongoDB wire-protocol server
 *                                            (server/srv_main.c: its options)
 *
 * Commands are extended JSON; replies are relaxed extended JSON, one per
 * line, with doubles in the shortest text that reads back to the same
 * double (json_out.c: 2.3, not libbson's 2.2999999999999998224).  Blank lines and lines starting with '#' are skipped; a line that
 * does not parse gets an error reply (FailedToParse) and the session goes
 * on.  Usage errors exit 2, a database that cannot be opened exits 1.
 * This is the scripting and testing surface of minidoc: keep it stable.
 * It uses only include/minidoc.h, libbson and json_out.c.
 *
 *   minidoc dump|restore|import|export|inspect ...   the tools, one file each
 *                                            (tools/tool.h; --help each)
 *   minidoc shell [--dbpath DIR] [--eval JS] [file.js]   the interactive
 *                                            JavaScript shell (tools/shell.h)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"
#include "json_out.h"
#include "minidoc.h"
#include "srv.h"
#include "tool.h"

typedef struct cli {
    const char *dbpath, *engine, *dbname, *opts_json, *mode, *eval_cmd;
    bool smallfiles, stop_on_error;
    int sub_argc;    /* files: the words after the subcommand */
    char **sub_argv;
} cli;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: minidoc --dbpath DIR [--engine btree|mmapv1|ephemeralForTest] [--dbname NAME]\n"
            "               [--smallfiles] [--opts '<json>'] (run [--stop-on-error] | eval '<command>'\n"
            "               | files [--prefix fs] [--local PATH] [--type CT] [--replace]\n"
            "                       (put NAME | get NAME | list [PREFIX] | search TEXT | delete NAME))\n"
            "       minidoc serve --dbpath DIR [--port 27017] [--bind 127.0.0.1] [...]\n"
            "               (minidoc serve --help: the server's options)\n"
            "\n"
            "  run     read one command per line from stdin (extended JSON); write one\n"
            "          reply per line (relaxed extended JSON).  Blank lines and lines\n"
            "          starting with '#' are skipped.  Exit status 0 whatever the replies,\n"
            "          unless --stop-on-error: then stop after the first reply with ok: 0\n"
            "          (a line that does not parse included) and exit 1.\n"
            "  eval    run one command; exit status 1 if the reply has ok: 0.\n"
            "  files   GridFS, as mongofiles: store, fetch, list and delete files in the\n"
            "          bucket (fs.files and fs.chunks); get writes the newest version.\n"
            "\n"
            "  --dbpath DIR    database directory (created if missing)\n"
            "  --engine NAME   storage engine (default: the one that created DIR, else btree)\n"
            "  --dbname NAME   database name used in file names and ns (default test)\n"
            "  --smallfiles    mmapv1 data files a quarter of the usual size\n"
            "  --opts JSON     any md_db_open() option, e.g. '{\"mmapv1\": {...}}'\n"
            "  --help          this text\n"
            "\n"
            "  minidoc dump|restore [options]   mongodump/mongorestore (--help each)\n"
            "  minidoc import|export [options]  mongoimport/mongoexport (--help each)\n"
            "  minidoc inspect [options]        draw the data files (--help)\n"
            "  minidoc shell [--dbpath DIR] [--eval JS] [file.js]\n"
            "                                   the interactive shell, as mongosh (--help)\n");
}


static int parse_args(int argc, char **argv, cli *c)
{
    static const char *const names[] = {"--dbpath", "--engine", "--dbname", "--opts"};
    memset(c, 0, sizeof *c);
    for (int i = 1; i < argc; i++) {
        const char **dst[] = {&c->dbpath, &c->engine, &c->dbname, &c->opts_json};
        const char *v = NULL;
        int k;
        for (k = 0; k < 4 && !(v = tool_opt_value(argc, argv, &i, names[k])); k++)
            ;
        if (v) {
            *dst[k] = v;
        } else if (strcmp(argv[i], "--smallfiles") == 0) {
            c->smallfiles = true;
        } else if (strcmp(argv[i], "--stop-on-error") == 0) {
            c->stop_on_error = true;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            exit(0);
        } else if (!c->mode && strcmp(argv[i], "files") == 0) {
            c->mode = argv[i];
            c->sub_argc = argc - i - 1;
            c->sub_argv = argv + i + 1;
            break;
        } else if (!c->mode && (strcmp(argv[i], "run") == 0 || strcmp(argv[i], "eval") == 0)) {
            c->mode = argv[i];
            if (strcmp(argv[i], "eval") == 0 && i + 1 < argc)
                c->eval_cmd = argv[++i];
        } else {
            fprintf(stderr, "minidoc: unexpected argument '%s'\n", argv[i]);
            return -1;
        }
    }
    if (!c->dbpath || !c->mode || (strcmp(c->mode, "eval") == 0 && !c->eval_cmd)) {
        fprintf(stderr, "minidoc: %s\n",
                !c->dbpath ? "--dbpath is required"
                           : !c->mode ? "a mode (run, eval or files) is required"
                                      : "eval needs a command");
        return -1;
    }
    if (c->stop_on_error && strcmp(c->mode, "run") != 0) {
        fprintf(stderr, "minidoc: --stop-on-error is for run\n");
        return -1;
    }
    return 0;
}

/* base's field `key`, unless the flag gave a value. */
static void flag_or_base(bson_t *o, const bson_t *base, const char *key, const char *flag)
{
    bson_iter_t it;
    if (flag)
        bson_append_utf8(o, key, -1, flag, -1);
    else if (bson_iter_init_find(&it, base, key))
        bson_append_iter(o, key, -1, &it);
}

/* The md_db_open() options: --opts, with the flags on top. */
static bson_t *open_options(const cli *c)
{
    md_error err;
    bson_iter_t it;
    bson_t base;
    if (md_json_parse(c->opts_json ? c->opts_json : "{}", -1, &base, &err) != 0) {
        bson_destroy(&base);
        fprintf(stderr, "minidoc: --opts is not valid JSON: %s\n", err.message);
        return NULL;
    }
    bson_t *o = bson_new();
    bson_copy_to_excluding_noinit(&base, o, "engine", "dbName", "smallFiles", NULL);
    flag_or_base(o, &base, "engine", c->engine);
    flag_or_base(o, &base, "dbName", c->dbname);
    if (c->smallfiles)
        BSON_APPEND_BOOL(o, "smallFiles", true);
    else if (bson_iter_init_find(&it, &base, "smallFiles"))
        bson_append_iter(o, "smallFiles", -1, &it);
    bson_destroy(&base);
    return o;
}

/* The reply's ok field is true (1, 1.0, true).  A write error inside an
 * ok: 1 reply (writeErrors) is not a failed command, as in MongoDB. */
static bool reply_ok(const bson_t *reply)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, reply, "ok") && bson_iter_as_bool(&it);
}

/* Run one command line; print the reply.  Returns 0 when ok: 1. */
static int run_line(md_db *db, const char *line)
{
    bson_t reply;
    int rc = md_db_command_json(db, line, &reply, NULL);
    if (rc == 0 && !reply_ok(&reply))
        rc = -1;
    char *json = json_out_relaxed(&reply, NULL);
    printf("%s\n", json ? json : "{ \"ok\" : 0.0, \"errmsg\" : \"reply not printable\" }");
    fflush(stdout);
    bson_free(json);
    bson_destroy(&reply);
    return rc;
}

static bool skip_line(const char *line)
{
    while (*line == ' ' || *line == '\t')
        line++;
    return *line == '\0' || *line == '#';
}

/* Every line of stdin, or up to the first failed one with stop_on_error
 * (then returns 1). */
static int run_stdin(md_db *db, bool stop_on_error)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int rc = 0;
    while (rc == 0 && (n = getline(&line, &cap, stdin)) >= 0) {
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        if (!skip_line(line) && run_line(db, line) != 0 && stop_on_error)
            rc = 1;
    }
    free(line);
    return rc;
}

/* The first word that is neither an option nor an option's value is
 * "serve": the server (server/srv_main.c) takes over the arguments. */
static bool is_serve(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--", 2) != 0)
            return strcmp(argv[i], "serve") == 0;
        if (!strchr(argv[i], '=') && strcmp(argv[i], "--smallfiles") &&
            strcmp(argv[i], "--stop-on-error") && strcmp(argv[i], "--quiet") &&
            strcmp(argv[i], "--help") && strcmp(argv[i], "--replace"))
            i++; /* its value */
    }
    return false;
}

int main(int argc, char **argv)
{
    cli c;
    md_db *db = NULL;
    md_error err;
    if (is_serve(argc, argv))
        return srv_main(argc - 1, argv + 1);
    tool_main_fn tool = tool_find(argc, argv); /* dump, restore, ...: tools/tool.h */
    if (tool)
        return tool(argc, argv);
    if (parse_args(argc, argv, &c) != 0) {
        usage(stderr);
        return 2;
    }
    bson_t *opts = open_options(&c);
    if (!opts)
        return 2;
    int rc = md_db_open(c.dbpath, opts, &db, &err);
    bson_destroy(opts);
    if (rc != 0) {
        fprintf(stderr, "minidoc: cannot open %s: %s (%s, code %d)\n", c.dbpath, err.message,
                err.code_name, err.code);
        return 1;
    }
    if (strcmp(c.mode, "files") == 0) {
        rc = files_main(db, c.sub_argc, c.sub_argv);
        md_db_close(db);
        return rc;
    }
    if (strcmp(c.mode, "run") == 0)
        rc = run_stdin(db, c.stop_on_error);
    else
        rc = run_line(db, c.eval_cmd) != 0;
    md_db_close(db);
    return rc ? 1 : 0;
}
