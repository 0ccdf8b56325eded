/*
 * shell.h -- `minidoc shell`, the interactive shell (mongosh's style) on
 * the embedded JavaScript engine (js/js.h):
 *
 *   shell.c       options, the data directory, --eval and script files
 *   shell_js.c    the JavaScript context: the prelude (shell_print.js and
 *                 shell_api.js, compiled in at build time) and the host
 *                 functions it calls (commands, printing, exit)
 *   shell_repl.c  the interactive loop: GNU readline, history, multi-line
 *                 input, tab completion; a plain line loop when stdin is
 *                 not a terminal
 *
 * The data directory is the server's layout (server/srv_db.c): --dbpath
 * DIR holds one directory per database, DIR/<name>/, opened on first use,
 * so the shell and `minidoc serve --dbpath DIR` see the same databases.
 */
#ifndef SHELL_H
#define SHELL_H

#include <stdbool.h>

#include "js.h"
#include "srv.h"

typedef struct shell {
    srv_dbs *dbs;      /* the data directory's databases */
    js_ctx *js;
    int fn_run;        /* __shell.run(src, mode) */
    int fn_incomplete; /* __shell.incomplete(src) */
    int fn_complete;   /* __shell.complete(line) */
    int fn_dbname;     /* __shell.dbName() */
    bool colors_out;   /* stdout is a terminal (and NO_COLOR is unset) */
    bool colors_err;   /* the same for stderr */
    bool exit_asked;   /* exit / quit() ran */
    int exit_status;
} shell;

typedef enum { SHELL_REPL, SHELL_EVAL, SHELL_SCRIPT } shell_mode;

int tool_shell_main(int argc, char **argv);

/* shell_js.c */
/* The context with the prelude and host functions, current database
 * dbname.  0, or -1 with a message printed. */
int shell_js_init(shell *sh, const char *dbname);
void shell_js_cleanup(shell *sh);
/* Run src; true when it ran without an uncaught error (which is printed). */
bool shell_js_run(shell *sh, const char *src, shell_mode mode);
/* src is an unfinished expression (a newline and more may complete it). */
bool shell_js_incomplete(shell *sh, const char *src);
/* The completions of the word that ends line: a NULL-terminated array of
 * malloc'ed strings (the caller frees both), or NULL. */
char **shell_js_complete(shell *sh, const char *line);
/* The current database's name, into buf. */
void shell_js_dbname(shell *sh, char *buf, size_t n);

/* shell_repl.c */
/* The interactive loop on stdin; returns the exit status. */
int shell_repl(shell *sh, bool quiet);

#endif
