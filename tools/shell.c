/*
 * shell.c -- `minidoc shell`: options, the data directory, and the
 * non-interactive runs (--eval, script files); the interactive loop is
 * shell_repl.c's (tools/shell.h has the map of the shell's files).
 *
 *   minidoc shell [--dbpath DIR] [--dbname NAME] [--engine mmapv1|btree]
 *                 [--smallfiles] [--opts JSON] [--eval JS]... [--quiet]
 *                 [--no-color] [file.js ...]
 *
 * --eval code runs first and its value is printed (as mongosh does), then
 * each file runs as a script (nothing printed but what it prints); the
 * shell then exits: 0, or 1 at the first uncaught error (the rest is not
 * run).  With neither, the shell is interactive.  The data directory is
 * the server's (one directory per database, DIR/<name>/), ./data unless
 * --dbpath names one, created if missing; the first database is --dbname
 * (default test).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shell.h"
#include "tool.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: minidoc shell [--dbpath DIR] [--dbname NAME] [--engine mmapv1|btree]\n"
            "                     [--smallfiles] [--opts JSON] [--eval JS]... [--quiet]\n"
            "                     [--no-color] [file.js ...]\n"
            "\n"
            "An interactive JavaScript shell in mongosh's style: db.<coll>.find(),\n"
            "insertOne(), aggregate(), ..., show dbs, show collections, use <db>, it, help.\n"
            "\n"
            "  --dbpath DIR   data directory, one subdirectory per database as\n"
            "                 `minidoc serve` keeps them (default: ./data; created)\n"
            "  --dbname NAME  the database `db` starts on (default test)\n"
            "  --engine NAME  storage engine for new databases (default btree)\n"
            "  --smallfiles, --opts JSON   as for the other subcommands\n"
            "  --eval JS      run JS and print its value, then exit (after the files)\n"
            "  file.js        run the script, then exit; 1 on an uncaught error\n"
            "  --quiet        no banner\n"
            "  --no-color     no colours even on a terminal (so does NO_COLOR=1)\n"
            "\n"
            "History: ~/.minidoc_shell_history (MINIDOC_SHELL_HISTORY overrides it).\n");
}

typedef struct shell_args {
    tool_db_opts db;
    const char **evals;
    int nevals;
    const char **files;
    int nfiles;
    bool quiet, no_color;
} shell_args;

static int parse(int argc, char **argv, shell_args *a)
{
    for (int i = 1; i < argc; i++) {
        if (tool_is_name(argc, argv, i))
            continue;
        int r = tool_db_opt(argc, argv, &i, &a->db, "minidoc shell");
        if (r < 0)
            return -1;
        if (r > 0)
            continue;
        const char *v;
        if ((v = tool_opt_value(argc, argv, &i, "--eval"))) {
            a->evals[a->nevals++] = v;
        } else if (strcmp(argv[i], "--eval") == 0) {
            fprintf(stderr, "minidoc shell: --eval needs a value\n");
            return -1;
        } else if (strcmp(argv[i], "--quiet") == 0) {
            a->quiet = true;
        } else if (strcmp(argv[i], "--no-color") == 0) {
            a->no_color = true;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            exit(0);
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "minidoc shell: unknown option '%s'\n", argv[i]);
            return -1;
        } else {
            a->files[a->nfiles++] = argv[i];
        }
    }
    return 0;
}

/* --opts with --smallfiles on top: the options every database opens with. */
static int open_options(const shell_args *a, bson_t *opts)
{
    char msg[256];
    bson_t base;
    if (tool_json_parse(a->db.opts_json ? a->db.opts_json : "{}", -1, &base, msg, sizeof msg)) {
        fprintf(stderr, "minidoc shell: --opts is not valid JSON: %s\n", msg);
        bson_destroy(&base);
        return -1;
    }
    bson_init(opts);
    bson_copy_to_excluding_noinit(&base, opts, "smallFiles", "dbName", NULL);
    if (a->db.smallfiles)
        BSON_APPEND_BOOL(opts, "smallFiles", true);
    bson_destroy(&base);
    return 0;
}

/* A script file's text, or NULL (message printed). */
static char *read_script(const char *path)
{
    char *text = tool_slurp(path, false, NULL);
    if (!text)
        fprintf(stderr, "minidoc shell: cannot read %s: %s\n", path, strerror(errno));
    return text;
}

/* --eval, then the files: 0, or 1 at the first failure. */
static int run_batch(shell *sh, const shell_args *a)
{
    for (int i = 0; i < a->nevals && !sh->exit_asked; i++)
        if (!shell_js_run(sh, a->evals[i], SHELL_EVAL))
            return 1;
    for (int i = 0; i < a->nfiles && !sh->exit_asked; i++) {
        char *text = read_script(a->files[i]);
        if (!text)
            return 1;
        bool ok = shell_js_run(sh, text, SHELL_SCRIPT);
        free(text);
        if (!ok)
            return 1;
    }
    return sh->exit_asked ? sh->exit_status : 0;
}

static bool want_colors(const shell_args *a, int fd)
{
    const char *nc = getenv("NO_COLOR");
    const char *term = getenv("TERM");
    return !a->no_color && !(nc && *nc) && isatty(fd) && !(term && strcmp(term, "dumb") == 0);
}

int tool_shell_main(int argc, char **argv)
{
    shell_args a;
    shell sh;
    memset(&a, 0, sizeof a);
    memset(&sh, 0, sizeof sh);
    a.evals = calloc((size_t)argc, sizeof *a.evals);
    a.files = calloc((size_t)argc, sizeof *a.files);
    int rc = 2;
    if (!a.evals || !a.files)
        goto out_free;
    if (parse(argc, argv, &a) != 0) {
        usage(stderr);
        goto out_free;
    }
    const char *dir = a.db.dbpath ? a.db.dbpath : "data";
    const char *dbname = a.db.dbname ? a.db.dbname : "test";
    md_error err;
    if (srv_db_name_check(dbname, &err) != 0) {
        fprintf(stderr, "minidoc shell: %s\n", err.message);
        goto out_free;
    }
    struct stat st;
    rc = 1;
    if (tool_mkdirs(dir) != 0 || stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "minidoc shell: cannot use %s as the data directory: %s\n", dir,
                strerror(errno ? errno : ENOTDIR));
        goto out_free;
    }
    bson_t opts;
    if (open_options(&a, &opts) != 0) {
        rc = 2;
        goto out_free;
    }
    rc = srv_dbs_new(dir, a.db.engine, &opts, &sh.dbs);
    bson_destroy(&opts);
    if (rc != 0) {
        fprintf(stderr, "minidoc shell: cannot open %s\n", dir);
        rc = 1;
        goto out_free;
    }
    sh.colors_out = want_colors(&a, STDOUT_FILENO);
    sh.colors_err = want_colors(&a, STDERR_FILENO);
    rc = 1;
    if (shell_js_init(&sh, dbname) != 0)
        goto out_close;
    if (a.nevals || a.nfiles) {
        rc = run_batch(&sh, &a);
    } else {
        if (!a.quiet && isatty(STDIN_FILENO))
            printf("minidoc shell: data directory %s%s%s\n"
                   "Type \"help\" for help, \"exit\" or Ctrl-D to leave.\n",
                   dir, a.db.engine ? ", engine " : "", a.db.engine ? a.db.engine : "");
        rc = shell_repl(&sh, a.quiet);
    }
out_close:
    shell_js_cleanup(&sh);
    srv_dbs_destroy(sh.dbs);
out_free:
    free(a.evals);
    free(a.files);
    return rc;
}
