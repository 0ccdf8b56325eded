/*
 * bt.h -- the btree engine's public interface: a WiredTiger-like compressed
 * copy-on-write B+tree behind the engine contract (engine/eng.h).
 *
 * Everything the rest of minidoc needs is the operations table
 * bt_engine_ops (name "btree").  The other declarations are for tests: a
 * verifier and a crash hook for checkpoints.
 *
 * Open options (the "btree" subdocument of the open options):
 *   cacheSizeMB            page cache size in MB (default: MongoDB 3.4's for
 *                          WiredTiger, half of (RAM - 1 GB), at least 256)
 *   cacheSize              the same in bytes (wins over cacheSizeMB)
 *   blockCompressor        "none" | "snappy" (default) | "zstd"
 *   checkpointIntervalSecs periodic checkpoint, checked at commit (60)
 *   checkpointIntervalMs   the same in milliseconds
 *   log                    the write-ahead log (default true; bt_log.c)
 *   commitIntervalMs       group commit: the log is written and fsynced
 *                          every this many ms (100); 0: at every commit
 *   logFileSize            bytes per DIR/log/btlog.NNNNNNNNNN file (100 MB;
 *                          logFileSizeMB in MB), 4 KB .. 4 GB
 *   checkpointLogSizeMB    checkpoint when the log since the last one
 *                          exceeds this (2048; checkpointLogSize in bytes;
 *                          0: never)
 *
 * Durability, with the log (the default): a commit with durable = true
 * ({j: true}) returns once its log record is fsynced; any other commit is
 * durable within commitIntervalMs.  Open replays the log after the last
 * checkpoint.  With {log: false}, as WiredTiger without logging, a commit
 * is durable at the next checkpoint (periodic, eng_flush, close) and
 * durable = true waits for nothing (it is acknowledged, not an error):
 * a crash returns the database to its last checkpoint, consistent.
 * Log file preallocation is not implemented.
 *
 * Concurrency (ops->concurrent): any number of transactions, one per
 * thread, each reading the snapshot taken at its begin plus its own writes;
 * two writers of one key conflict (MD_EWRITECONFLICT, the caller retries).
 * serverStatus' btree.transaction counts begins, commits, aborts, write
 * conflicts, update chains, versions freed and latch waits (bt_txn.c).

 * Per collection: eng_rs_options.block_compressor (query/ takes it from
 * create's storageEngine.btree.configString "block_compressor=...").
 * compact rewrites the collection and its indexes into new files at the
 * checkpoint that follows its commit (bt_compact.c).
 */
#ifndef BT_H
#define BT_H

#include "eng.h"

extern const eng_ops bt_engine_ops;

/* Checkpoint crash points for tests: the checkpoint stops (returns MD_EIO)
 * at that point and every later close of that engine skips its checkpoint,
 * as if the process had died there. */
enum bt_crash_point {
    BT_CRASH_NONE = 0,
    BT_CRASH_BEFORE_META,   /* data files written, metadata not */
    BT_CRASH_BEFORE_TURTLE, /* data and metadata written, turtle not switched */
};
void bt_test_set_crash(eng_engine *e, int point);

/* Crash now, as a kill would: the log buffer not yet written is lost,
 * nothing more is written, and close skips its checkpoint. */
void bt_test_crash_now(eng_engine *e);

/* Verify every open tree of the engine (key order, blocks reachable exactly
 * once, checksums, extents).  Returns the number of problems; messages go to
 * v->errors. */
int bt_verify_engine(eng_engine *e, eng_validate *v);

/* The depth of a store's tree (1: the root is a leaf), for tests. */
int bt_test_depth(eng_rs *rs);

/* Cache accounting, for tests. */
int64_t bt_cache_bytes(eng_engine *e);
int64_t bt_evictions(eng_engine *e);
int64_t bt_checkpoints(eng_engine *e);

#endif /* BT_H */
