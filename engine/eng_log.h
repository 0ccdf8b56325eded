/*
 * eng_log.h -- where the engines' messages go.
 *
 * An engine says a few things no caller asked for: a journal damaged
 * before its end, a journal write that failed and made the handle refuse
 * writes, a checkpoint (or a compact) that failed in the background or at
 * close.  They go through eng_log(), which writes one line to stderr, or
 * hands it to the sink set with eng_log_set_sink() (tests capture them
 * there and assert on them instead of letting them reach the terminal).
 * Messages printed just before an abort() stay on stderr.
 *
 * Threads: eng_log() may be called from any thread (the journal and
 * checkpoint threads do); the sink is called under a mutex, one message at
 * a time, and must not call eng_log() itself.
 */
#ifndef ENG_LOG_H
#define ENG_LOG_H

/* msg is one line without its newline, valid only during the call. */
typedef void (*eng_log_fn)(void *ctx, const char *msg);

/* Send messages to fn(ctx, msg) from now on; fn NULL: back to stderr. */
void eng_log_set_sink(eng_log_fn fn, void *ctx);

/* One message (printf format, no trailing newline), at most 1 KB. */
void eng_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
