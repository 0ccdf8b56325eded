/*
 * shell_repl.c -- the shell's interactive loop.
 *
 * On a terminal it reads with GNU readline: line editing, a history kept
 * in ~/.minidoc_shell_history (MINIDOC_SHELL_HISTORY names another file;
 * the last 1000 entries), and tab completion of the word before the
 * cursor (a word is letters, digits, _, $ and dots; __shell.complete in
 * shell_api.js knows collection names and the methods of db, collections
 * and cursors).  The prompt is "<db>> ", as mongosh's.
 *
 * Input is gathered until it is a complete program: a line that leaves an
 * expression unfinished ("db.c.find({", "function f() {") gets the
 * continuation prompt "... " and the next line is added to it.  The whole
 * entry then runs and its value is printed.  Ctrl-C drops the input typed
 * so far (while JavaScript runs, it ends the shell); Ctrl-D or exit leave.
 *
 * When stdin is not a terminal the same loop reads plain lines, without
 * prompts; the exit status is then 1 if any entry failed.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <readline/history.h>
#include <readline/readline.h>

#include "shell.h"

#define SHELL_HISTORY_MAX 1000

/* readline's callbacks take no user pointer: the one shell that reads. */
static shell *rl_shell;
static char **rl_matches; /* the completions of the last TAB */
static size_t rl_next;
static volatile sig_atomic_t in_readline, interrupted;
static char main_prompt[96];

/* ---- completion ------------------------------------------------------------------------ */

static void matches_free(void)
{
    for (size_t i = 0; rl_matches && rl_matches[i]; i++)
        free(rl_matches[i]);
    free(rl_matches);
    rl_matches = NULL;
}

static char *match_next(const char *text, int state)
{
    (void)text;
    if (state == 0)
        rl_next = 0;
    if (!rl_matches || !rl_matches[rl_next])
        return NULL;
    return strdup(rl_matches[rl_next++]);
}

static char **on_complete(const char *text, int start, int end)
{
    (void)start;
    (void)end;
    rl_attempted_completion_over = 1; /* never file names */
    rl_completion_append_character = '\0';
    char *line = strndup(rl_line_buffer, (size_t)rl_point);
    if (!line)
        return NULL;
    matches_free();
    rl_matches = shell_js_complete(rl_shell, line);
    free(line);
    return rl_matches && rl_matches[0] ? rl_completion_matches(text, match_next) : NULL;
}

/* Every printable character but those of a word breaks words. */
static void completion_setup(void)
{
    static char breaks[128];
    size_t n = 0;
    breaks[n++] = ' ';
    breaks[n++] = '\t';
    breaks[n++] = '\n';
    for (int ch = 33; ch < 127; ch++)
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch == '$' || ch == '.'))
            breaks[n++] = (char)ch;
    breaks[n] = '\0';
    rl_completer_word_break_characters = breaks;
    rl_basic_word_break_characters = breaks;
    rl_attempted_completion_function = on_complete;
    rl_readline_name = "minidoc";
}

/* ---- history ------------------------------------------------------------------------------ */

static char *history_path(void)
{
    const char *env = getenv("MINIDOC_SHELL_HISTORY");
    if (env && *env)
        return strdup(env);
    const char *home = getenv("HOME");
    if (!home || !*home)
        return NULL;
    size_t n = strlen(home) + sizeof "/.minidoc_shell_history";
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/.minidoc_shell_history", home);
    return p;
}

static void history_setup(const char *path)
{
    using_history();
    stifle_history(SHELL_HISTORY_MAX);
    if (path && read_history(path) != 0)
        write_history(path); /* create it, so that append_history works */
}

static void history_add(const char *path, const char *entry)
{
    add_history(entry);
    if (path)
        append_history(1, path);
}

/* ---- the loop ----------------------------------------------------------------------------- */

static void on_sigint(int sig)
{
    (void)sig;
    if (!in_readline) {
        signal(SIGINT, SIG_DFL);
        raise(SIGINT);
        return;
    }
    interrupted = 1;
    if (write(STDOUT_FILENO, "\n", 1) < 0) {
        /* nothing to do: the prompt is redrawn anyway */
    }
    rl_on_new_line();
    rl_replace_line("", 0);
    rl_set_prompt(main_prompt);
    rl_redisplay();
}

/* One line from a pipe, without its newline; NULL at the end. */
static char *plain_line(void)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, stdin);
    if (n < 0) {
        free(line);
        return NULL;
    }
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = '\0';
    return line;
}

/* buf + "\n" + line (buf freed); NULL when out of memory. */
static char *append(char *buf, const char *line)
{
    size_t a = buf ? strlen(buf) : 0, b = strlen(line);
    char *p = realloc(buf, a + b + 2);
    if (!p) {
        free(buf);
        return NULL;
    }
    if (a)
        p[a++] = '\n';
    memcpy(p + a, line, b + 1);
    return p;
}

static bool blank(const char *s)
{
    return s[strspn(s, " \t\r\n")] == '\0';
}

int shell_repl(shell *sh, bool quiet)
{
    (void)quiet;
    bool tty = isatty(STDIN_FILENO);
    char *hist = NULL, *buf = NULL;
    bool failed = false;
    if (tty) {
        rl_shell = sh;
        hist = history_path();
        history_setup(hist);
        completion_setup();
        signal(SIGINT, on_sigint);
    }
    for (;;) {
        char dbname[80];
        shell_js_dbname(sh, dbname, sizeof dbname);
        snprintf(main_prompt, sizeof main_prompt, "%s> ", dbname);
        char *line;
        if (tty) {
            interrupted = 0;
            in_readline = 1;
            line = readline(buf ? "... " : main_prompt);
            in_readline = 0;
            if (interrupted) {
                free(buf);
                buf = NULL;
            }
        } else {
            line = plain_line();
        }
        if (!line)
            break;
        buf = append(buf, line);
        free(line);
        if (!buf)
            break;
        if (blank(buf)) {
            free(buf);
            buf = NULL;
            continue;
        }
        if (shell_js_incomplete(sh, buf))
            continue;
        if (tty)
            history_add(hist, buf);
        if (!shell_js_run(sh, buf, SHELL_REPL))
            failed = true;
        free(buf);
        buf = NULL;
        if (sh->exit_asked)
            break;
    }
    if (buf && !sh->exit_asked && !shell_js_run(sh, buf, SHELL_REPL))
        failed = true; /* the input ended inside an expression: its error */
    free(buf);
    if (tty) {
        if (!sh->exit_asked)
            printf("\n");
        signal(SIGINT, SIG_DFL);
        if (hist)
            history_truncate_file(hist, SHELL_HISTORY_MAX);
        matches_free();
        rl_shell = NULL;
    }
    free(hist);
    if (sh->exit_asked)
        return sh->exit_status;
    return !tty && failed ? 1 : 0;
}
