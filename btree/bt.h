/*
 * bt.h -- the btree engine's public interface: a WiredTiger-like compressed
 * copy-on-write B+tree behind the engine contract (engine/eng.h).
 *
 * Everything the rest of minidoc needs is the operations table
 * bt_engine_ops (name "btree").  The other declarations are for tests: a
 * verifier and a crash hook for checkpoints.
 *
 * Open options (the "btree" subdocument of the open options):
 *   cacheSizeMB            page cache size in MB (default 100)
 *   cacheSize              the same in bytes (wins over cacheSizeMB)
 *   blockCompressor        "none" | "snappy" (default) | "zstd"
 *   checkpointIntervalSecs periodic checkpoint, checked at commit (60)
 *
 * Durability: a committed transaction is durable at the next checkpoint
 * (periodic, eng_flush, close).  There is no log yet.
 *
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
