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
