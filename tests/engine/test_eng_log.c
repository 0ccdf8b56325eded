/*
 * test_eng_log.c -- engine/eng_log.c: the engines' messages reach stderr,
 * one line each, unless a sink takes them; t_log.h captures them, also
 * from a forked child.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <sys/wait.h>

#include "t_log.h"

static void redirect(void)
{
    cr_redirect_stderr();
}

Test(eng_log, stderr_without_a_sink, .init = redirect)
{
    eng_log("btree: checkpoint failed: %s", "test");
    eng_log("mmapv1: %d", 7);
    fflush(stderr);
    cr_assert_stderr_eq_str("btree: checkpoint failed: test\nmmapv1: 7\n");
}

static void count_sink(void *ctx, const char *msg)
{
    int *n = ctx;
    cr_assert_str_eq(msg, "mmapv1: the journal is damaged");
    ++*n;
}

Test(eng_log, a_sink_takes_them_until_unset, .init = redirect)
{
    int n = 0;
    eng_log_set_sink(count_sink, &n);
    eng_log("mmapv1: the journal is %s", "damaged");
    eng_log_set_sink(NULL, NULL);
    eng_log("back on stderr");
    fflush(stderr);
    cr_assert_eq(n, 1);
    cr_assert_stderr_eq_str("back on stderr\n");
}

Test(eng_log, capture_includes_forked_children, .init = redirect)
{
    long pos = 0;
    t_log_begin();
    eng_log("parent %d", 1);
    char *first = t_log_next(&pos);
    cr_assert_str_eq(first, "parent 1\n");
    free(first);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        eng_log("child %d", 2);
        _exit(0);
    }
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    char *next = t_log_next(&pos);
    cr_assert_str_eq(next, "child 2\n");
    free(next);
    char *all = t_log_end();
    cr_assert_str_eq(all, "parent 1\nchild 2\n");
    cr_assert_eq(t_log_count(all, "child"), 1);
    free(all);
    fflush(stderr);
    cr_assert_stderr_eq_str("");
}
