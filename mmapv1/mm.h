/*
 * mm.h -- the mmapv1 storage engine (MongoDB 3.0's MMAPv1), seen from outside.
 *
 * Everything goes through the engine contract (engine/eng.h): the registry
 * lists mm_engine_ops under the name "mmapv1".  This header only adds what
 * tests and tools need beyond the contract.
 *
 * Borrowed views: eng_rs_get() and cursors hand out pointers into the file
 * mappings.  Besides the contract's rule (valid until the next write through
 * the engine or the end of the transaction), note that a view dies when the
 * mappings move: with the open option mmapv1.debugRemapOnGrow every data
 * file is remapped at a new address each time a data file is added, so a
 * stale pointer faults at once instead of reading plausible old bytes.
 * (The journal's periodic remap of the private view keeps every address,
 * so it kills no view, and it never shows a reader of another collection
 * the data files without the pending commits: mm_file.c.)
 *
 * Durability options (open option document "mmapv1"), as MongoDB 3.0:
 *   journal                bool, default true.  false: no journal; after a
 *                          crash, writes since the last flush are lost and
 *                          the files may be inconsistent (validate says so)
 *   journalCommitInterval  ms between group commits, 1..500 (default 100);
 *                          eng_txn_commit(t, durable = true) commits at once
 *   syncdelay              s between data file flushes, 0 = never (60)
 *   journalFileSize        bytes per journal file (1 GB; tests use less)
 *   debugCheckViews        at each flush, abort if a mapped byte changed
 *                          without being declared (tests)
 *   debugCappedExtentSize  bytes, 0 (default) or >= 4 KB: the largest extent
 *                          a capped collection gets at create, so tests see
 *                          rings of several extents without gigabyte sizes
 *                          (3.0 gave those with $nExtents)
 *   debugRemapPrivateViewBytes  bytes copied on write before the private
 *                          views are remapped, 1..256 MB (0: the default,
 *                          256 MB); tests remap at every commit with 1
 * The format and the ordering argument are in mm_int.h ("Journal").
 */
#ifndef MM_H
#define MM_H

#include "eng.h"

extern const eng_ops mm_engine_ops;

/*
 * Check every on-disk structure of the engine: data file headers, the extent
 * free lists of each file, and for every namespace its extent chain, record
 * chains and free lists (as eng_rs_validate does), plus, when v->full, that
 * no two extents overlap.  Findings go into v; returns 0 when the walk
 * completed (v->nerrors says whether anything was wrong).
 */
int mm_verify(eng_engine *e, eng_validate *v);

#endif /* MM_H */
