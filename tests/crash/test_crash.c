/*
 * test_crash.c -- crash tests for the mmapv1 journal and the btree log
 * through the public API (include/minidoc.h); the engine is an open option.
 *
 * Each round forks a writer, SIGKILLs it at a random moment, reopens the
 * database and checks it: the harness and its checks are in crash_util.h
 * (shared with tests/faults/test_powerloss.c, which cuts the power instead
 * of killing the process).
 *
 * The suite runs a few rounds per engine and setting (< 10 s).
 * MINIDOC_CRASH_ROUNDS=N runs N rounds of the journaled/logged runs and
 * MINIDOC_CRASH_ROUNDS_NOJOURNAL those without (the long run: `make crash`
 * runs 500 on both engines), and MINIDOC_CRASH_SEED fixes the seed (printed
 * on failure).
 */
#include "crash_util.h"

Test(crash, journal_recovers_after_sigkill)
{
    crash_rounds_with(env_int("MINIDOC_CRASH_ROUNDS", 6), "mmapv1", true, NULL);
}

Test(crash, no_journal_is_reported_not_fatal)
{
    crash_rounds_with(env_int("MINIDOC_CRASH_ROUNDS_NOJOURNAL", 2), "mmapv1", false, NULL);
}

Test(crash, btree_log_recovers_after_sigkill)
{
    crash_rounds_with(env_int("MINIDOC_CRASH_ROUNDS", 6), "btree", true, NULL);
}

Test(crash, btree_no_log_recovers_its_last_checkpoint)
{
    crash_rounds_with(env_int("MINIDOC_CRASH_ROUNDS_NOJOURNAL", 3), "btree", false, NULL);
}
