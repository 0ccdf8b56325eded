/*
 * fault_io.h -- the I/O shim of the fault-injection tests (fault_io.c).
 *
 * build/test_faults is linked with `ld --wrap` for every file-system call
 * the engines make (FAULT_WRAPS in the Makefile), so the library's calls
 * land in __wrap_*() here.  By default each one passes straight through to
 * the real call.  Two things can be switched on:
 *
 *   Fault injection: fio_fail() adds a rule "fail the Nth call of these
 *   kinds on a path containing PATTERN with ERRNO, once or from then on".
 *
 *   Simulated power loss: fio_powerloss_begin(root, shadow) starts keeping,
 *   in the directory `shadow`, what the disk would hold for every file under
 *   `root`: a write stays pending until fsync/fdatasync of the file (or
 *   msync(MS_SYNC) of a MAP_SHARED mapping of it) makes it durable.
 *   fio_powerloss_cut() is the power failure: it freezes every I/O call,
 *   applies to the shadow what a power loss may have left of the pending
 *   writes (see fio_cut_mode) and ends the process with _exit(FIO_CUT_EXIT).
 *   The shadow directory is then the database directory after the crash.
 *
 *   Model (the header comment of test_powerloss.c repeats it):
 *     - directory operations are durable at once: creating a file (open
 *       O_CREAT), truncating it at open (O_TRUNC), rename and unlink;
 *     - write/pwrite/ftruncate/posix_fallocate are pending until the file is
 *       fsynced or fdatasynced (through any descriptor); an fsync makes the
 *       whole file as it is now durable (mapped pages included);
 *     - msync(MS_SYNC) of a shared mapping makes that range durable;
 *       MS_ASYNC makes nothing durable;
 *     - at the cut, pending writes are applied in the order they were made
 *       up to a point, and the last one applied may be torn (a prefix of it
 *       lands); dirty pages of shared mappings that were never synced land
 *       or not, page by page, in any combination (kernel writeback).
 */
#ifndef FAULT_IO_H
#define FAULT_IO_H

#include <stdbool.h>
#include <stdint.h>

/* Kinds of calls a rule can match. */
enum {
    FIO_WRITE = 1,  /* write, pwrite */
    FIO_SYNC = 2,   /* fsync, fdatasync */
    FIO_MSYNC = 4,  /* msync */
    FIO_TRUNC = 8,  /* ftruncate */
    FIO_ALLOC = 16, /* posix_fallocate */
    FIO_OPEN = 32,  /* open with O_CREAT */
    FIO_RENAME = 64 /* rename */
};

#define FIO_CUT_EXIT 77 /* exit status of a process that lost power */

/*
 * Whether fsync, fdatasync and msync(MS_SYNC) reach the kernel (default:
 * no).  Nothing in these tests outlives the machine, and the power-loss
 * shadow does its own bookkeeping, so real syncs would only make the runs
 * slower; the engines still see (and may be failed at) every call.
 */
void fio_real_sync(bool on);

/* Remove every rule and zero the counters (power-loss state is kept). */
void fio_reset(void);

/*
 * Fail the nth (1-based) call of a kind in `ops` on a path containing
 * `pattern` ("" matches every path) with errno `err`; sticky: that call and
 * every later matching one.  Returns the rule number.
 */
int fio_fail(unsigned ops, const char *pattern, long nth, int err, bool sticky);

/*
 * Hold the next fsync/fdatasync of a path containing `pattern`: the calling
 * thread waits inside the call until fio_release_sync().  fio_sync_held():
 * a thread is waiting there now.
 */
void fio_hold_sync(const char *pattern);
bool fio_sync_held(void);
void fio_release_sync(void);

/* Failures injected so far (all rules). */
long fio_injected(void);

/* Matching calls seen so far (whether they failed or not). */
long fio_calls(unsigned ops, const char *pattern);

/* ---- simulated power loss ---------------------------------------------------- */

enum fio_cut_mode {
    FIO_CUT_DROP = 0,   /* every pending write is lost */
    FIO_CUT_PREFIX = 1, /* a random prefix of the pending writes lands, its last
                           one torn */
    FIO_CUT_ALL = 2,    /* every pending write lands but the last, which is torn */
    FIO_CUT_RANDOM = 3  /* one of the above, chosen from the seed */
};

/* Start shadowing `root` into `shadow` (which must already hold a copy of
 * root: everything in it at this point counts as durable). */
void fio_powerloss_begin(const char *root, const char *shadow, uint64_t seed);

/* Cut the power after `ops` more tracked writes/syncs (0: never), or after
 * `ms` milliseconds (0: never), whichever comes first. */
void fio_powerloss_arm(long ops, int ms, enum fio_cut_mode mode);

/* The power failure: see above.  Never returns. */
void fio_powerloss_cut(enum fio_cut_mode mode) __attribute__((noreturn));

/* Writes still pending (not durable) right now, for tests of the shim. */
long fio_pending(void);

#endif /* FAULT_IO_H */
