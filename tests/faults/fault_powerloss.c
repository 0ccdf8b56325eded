/*
 * test_powerloss.c -- simulated power losses on both engines, with the
 * journal/log on and off, through the crash harness of
 * tests/crash/crash_util.h.
 *
 * Each round copies the database directory to a shadow directory (what the
 * "disk" holds: the parent closed the database cleanly, so everything is
 * durable), forks a writer whose I/O goes through fault_io.c, and cuts the
 * power after a random number of tracked writes/syncs or a random delay.
 * What the shadow then holds replaces the directory, and the harness
 * reopens it and checks it (validate clean, every j:true acknowledged write
 * present, nothing never written, commits never torn, the index agrees).
 *
 * The disk model (fault_io.h):
 *   - directory operations -- creating a file, truncating it at open,
 *     rename and unlink -- are durable at once (a journaling file system
 *     after the directory fsync the engines do anyway);
 *   - write/pwrite/ftruncate/posix_fallocate stay pending until the file is
 *     fsynced or fdatasynced; msync(MS_SYNC) makes a mapped range durable;
 *   - at the cut, every pending write is dropped, or a random prefix of
 *     them lands in order, or all of them; the last one that lands may be
 *     torn (only a prefix of its bytes reaches the disk); dirty pages of
 *     shared mappings (mmapv1's data and .ns files) that were never synced
 *     land or not, page by page, in any combination.
 *
 * `make test` runs a few dozen power losses per engine (MINIDOC_POWERLOSS_
 * ROUNDS, default 40 with the journal/log, 10 without); `make crash` runs
 * hundreds.  MINIDOC_CRASH_SEED fixes the seed.
 */
#include "../crash/crash_util.h"
#include "fault_io.h"

static char shadow[200];

static void pl_prepare(const char *dir, int round)
{
    char cmd[600];
    snprintf(shadow, sizeof shadow, "%s.shadow", dir);
    nftw(shadow, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    cr_assert_eq(mkdir(shadow, 0755), 0);
    snprintf(cmd, sizeof cmd, "cp -a '%s/.' '%s/'", dir, shadow);
    cr_assert_eq(system(cmd), 0, "round %d: %s", round, cmd);
}

static void pl_child(const char *dir, int round, uint64_t seed)
{
    fio_powerloss_begin(dir, shadow, seed);
    /* half the rounds cut at the n-th write or sync, all after a delay */
    long ops = seed % 2 ? (long)(1 + (seed >> 8) % 400) : 0;
    fio_powerloss_arm(ops, 20 + (int)((seed >> 20) % 400), FIO_CUT_RANDOM);
}

static void pl_reap(pid_t pid, const char *dir, int round, uint64_t seed)
{
    int st = 0;
    for (int waited = 0;; waited += 10) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid)
            break;
        cr_assert_eq(w, 0);
        if (waited > 30000) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            cr_assert_fail("round %d seed %llu: the power cut never came", round,
                           (unsigned long long)seed);
        }
        sleep_ms(10);
    }
    /* a writer that finished its stream before the cut came (a fast run
     * without the log) stands for a cut after its last write: the shadow
     * holds what it synced */
    cr_assert(WIFEXITED(st) && (WEXITSTATUS(st) == FIO_CUT_EXIT || WEXITSTATUS(st) == 0),
              "round %d seed %llu: writer ended with status %#x, not by the power cut", round,
              (unsigned long long)seed, st);
    nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    cr_assert_eq(rename(shadow, dir), 0);
}

static const crash_hooks powerloss = {"powerloss", pl_prepare, pl_child, pl_reap};

Test(powerloss, mmapv1_journal)
{
    crash_rounds_with(env_int("MINIDOC_POWERLOSS_ROUNDS", 40), "mmapv1", true, &powerloss);
}

Test(powerloss, mmapv1_no_journal)
{
    crash_rounds_with(env_int("MINIDOC_POWERLOSS_ROUNDS_NOJOURNAL", 10), "mmapv1", false,
                      &powerloss);
}

Test(powerloss, btree_log)
{
    crash_rounds_with(env_int("MINIDOC_POWERLOSS_ROUNDS", 40), "btree", true, &powerloss);
}

Test(powerloss, btree_no_log)
{
    crash_rounds_with(env_int("MINIDOC_POWERLOSS_ROUNDS_NOJOURNAL", 10), "btree", false,
                      &powerloss);
}
