/*
 * mm_int.h -- private header of the mmapv1 engine: the on-disk format,
 * the in-memory objects, and the functions the mm_*.c files share.
 *
 * Files of database "test" in directory DIR:
 *
 *   DIR/mongod.lock   flock()ed while open; holds the pid
 *   DIR/test.ns       namespace hash table (default 16 MiB, option nsSize)
 *   DIR/test.0, .1 .. data files: 64 MiB << n, capped at 0x7ff00000
 *                     (smallFiles: /4; option firstFileSize for tests)
 *   DIR/journal/j._N  journal files (see "Journal" below); none after a
 *                     clean close
 *   DIR/journal/lsn   last journal section known to be in the data files
 *
 * All integers are little-endian, as the mapped structs below (x86-64 and
 * arm64 only).  A disk location (DiskLoc) is (file number, byte offset).
 *
 * ---- DiskLoc (8 bytes) ----------------------------------------------------
 *   OFFSET SIZE FIELD
 *   0      4    a      file number; -1 = null
 *   4      4    ofs    byte offset in that file (0 when null)
 *   RecordId = ((int64)a << 32) | ofs, the offset of the record header;
 *   ofs >= 8192 + 176 for any record, so a RecordId is never 0.
 *
 * ---- DataFileHeader: first 8192 bytes of every data file ------------------
 *   OFFSET SIZE FIELD
 *   0      4    version         4 (PDFILE_VERSION)
 *   4      4    versionMinor    6 (PDFILE_VERSION_MINOR_24_AND_NEWER)
 *   8      4    fileLength      whole file, a multiple of 4096
 *   12     8    unused          DiskLoc of the never-allocated tail
 *   20     4    unusedLength    fileLength - unused.ofs - 16
 *   24     8    freeListStart   first free extent of this file (or null)
 *   32     8    freeListEnd     last free extent of this file (or null)
 *   40     8    magic           "MDMMAPV1" (minidoc; MongoDB: reserved)
 *   48     4    fileNo          n of DIR/test.n (minidoc)
 *   52     4    (reserved)
 *   56     8    journalLsn      unused, 0 (the LSN lives in journal/lsn)
 *   64     8128 (reserved, zero)
 *   8192   ...  first extent
 *
 * ---- Extent header (176 bytes), 4 KB aligned, length a multiple of 4 KB --
 *   OFFSET SIZE FIELD
 *   0      4    magic           0x41424344 ("DCBA" in a hex dump)
 *   4      8    myLoc           DiskLoc of this header
 *   12     8    xnext           next extent of the namespace (or free list)
 *   20     8    xprev           previous extent
 *   28     128  nsDiagnostic    owning namespace, NUL padded ("$freelist"
 *                               while on a file's extent free list)
 *   156    4    length          whole extent including this header
 *   160    8    firstRecord     first record in the extent's chain (or null)
 *   168    8    lastRecord      last record of the chain (or null)
 *   176    ...  records and deleted records; index extents of >= 32 KB
 *                start their space at the next 4 KB boundary
 *
 * ---- Record (16-byte header + data) ---------------------------------------
 *   OFFSET SIZE FIELD
 *   0      4    lengthWithHeaders  allocated bytes incl. header and padding,
 *                                  a multiple of 4
 *   4      4    extentOfs       offset of the owning extent in the same file
 *   8      4    nextOfs         next record of the extent's chain, -1 = none
 *   12     4    prevOfs         previous record of the chain, -1 = none
 *   16     ...  data            the BSON document (its own int32 length
 *                               first), then padding up to lengthWithHeaders
 *   netLength = lengthWithHeaders - 16.  The chain is in insertion order.
 *
 * ---- DeletedRecord (overlays a Record) ------------------------------------
 *   OFFSET SIZE FIELD
 *   0      4    lengthWithHeaders
 *   4      4    extentOfs
 *   8      8    nextDeleted     DiskLoc of the next free record in the bucket
 *   16     4    0xEEEEEEEE      first data bytes of a deleted record
 *
 * ---- .ns file: slot 0 is a header, slots 1..n a hash table (640 B each) ---
 *   header slot              namespace slot (NamespaceDetails + key)
 *   OFS SIZE FIELD           OFS SIZE FIELD
 *   0   8    magic "MDMMNS01" 0   4   hash   0 free, 1 deleted, else
 *   8   4    version 1                       Namespace::hash | 0x8000000
 *   12  4    slotSize 640    4   4   kind   1 coll, 2 index, 3 catalog
 *   16  8    fileSize        8   128 name   "test.c", NUL padded
 *   24  4    nslots          136 8   firstExtent      144 8 lastExtent
 *   28  4    (reserved)      152 208 deletedList[26]  free list heads
 *   32  8    totalMoves      360 8   datasize (sum of netLength)
 *   40  4    flags           368 8   nrecords
 *            1 = opened with journal: false and not yet closed cleanly
 *            2 = journal replay stopped at damage before the journal's end
 *            (pwrite + fdatasync, never journaled; cleared by a clean close)
 *   44  ...  (reserved)
 *                            376 4   lastExtentSize   380 4 userFlags
 *                            384 8   paddingFactor (double)
 *                            392 8   nInserts         400 8 nUpdates
 *                            408 8   nInPlace         416 8 nMoves
 *                            424 8   bytesWritten
 *                            432 8   indexHead (DiskLoc of the btree root)
 *                            440 4   nIndexes (collections)
 *                            444 4   isCapped         448 8 cappedSize
 *                            456 8   cappedMax
 *                            464 4   pfFitsCount      468 4 pfMoveCount
 *                            472 8   capExtent        480 8 capFirstNewRecord
 *                            488 ... (reserved, zero)
 *   Hash: x = x * 131 + c over the name; slot = 1 + hash % nslots, linear
 *   probing; a deleted slot keeps hash 1 so that probe chains stay intact.
 *   userFlags: 1 = Flag_UsePowerOf2Sizes, 2 = Flag_NoPadding,
 *   0x100 = minidoc's paddingFactor strategy (MongoDB 2.4 behaviour).
 *   Capped collections (isCapped 1, mm_capped.c): capExtent is the extent
 *   the ring allocates in; capFirstNewRecord is the first record allocated
 *   in it on this pass, null when none yet, "invalid" (a = -2) during the
 *   first pass over the extents; deletedList[0] holds every free record of
 *   the collection (cappedListOfAllDeletedRecords), the other 25 are null.
 *   In MongoDB 3.0 these two fields sat in the details' first bytes; here
 *   they use the reserved area so the other offsets stay put.
 *
 * ---- Index buckets --------------------------------------------------------
 *   An index namespace ("test.c.$x_1") holds its B-tree buckets as ordinary
 *   records of lengthWithHeaders 8192 (MM_BUCKET_SIZE = 8176 bytes of body),
 *   managed by mm_btree.c:
 *
 *   BUCKET FORMAT (little-endian, packed, MM_BUCKET_SIZE = 8176 bytes)
 *
 *   OFFSET SIZE  FIELD
 *        0    4  magic    "MBT1" (4d 42 54 31)
 *        4    1  level    0 = leaf, else height above the leaves (< 32)
 *        5    1  flags    bit 0: leaf (set iff level == 0); others 0
 *        6    2  n        number of slots (<= 406)
 *        8    2  top      start of the key area [top, 8176); top >= 48+20n
 *       10    2  garbage  bytes in the key area no slot uses (removed keys)
 *       12    4  reserved 0
 *       16    8  parent   parent bucket, 0 for the root
 *       24    8  next     leaf: right sibling (0 at the right end); else 0
 *       32    8  prev     leaf: left sibling (0 at the left end); else 0
 *       40    8  right    internal: child for entries >= the last
 *                         separator; leaf: 0
 *       48  20n  slots    in eng_key_cmp order, each:
 *                           +0  2  kofs   offset of the key bytes (8176
 *                                         for an empty key)
 *                           +2  2  klen   key length (<= 1024)
 *                           +4  8  rid    RecordId (int64)
 *                          +12  8  child  internal: child for entries in
 *                                         [previous separator, this one);
 *                                         leaf: 0
 *   48+20n     ...   free gap (contiguous, zeroed when built)
 *      top     ...   key bytes, packed from the end backwards
 *
 *   Free space = gap + garbage; an insert that fits only with the garbage
 *   first compacts the bucket.
 *
 * Example: a root leaf at 0x100002000 after inserting ("b", rid 0x1000)
 * then ("ab", rid 0x2000); slot 0 is "ab" (smaller), its bytes were packed
 * last, so they sit lowest:
 *
 *   0000  4d 42 54 31 00 01 02 00 ed 1f 00 00 00 00 00 00  magic lvl flg n top
 *   0010  00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00  parent next
 *   0020  00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00  prev right
 *   0030  ed 1f 02 00 00 20 00 00 00 00 00 00 00 00 00 00  slot 0: "ab" 0x2000
 *   0040  00 00 00 00 ef 1f 01 00 00 10 00 00 00 00 00 00  slot 1: "b" 0x1000
 *   0050  00 00 00 00 00 00 ...                            (gap)
 *   1fe0  00 00 00 00 00 00 00 00 00 00 00 00 00 61 62 62  "ab" "b"
 *
 * ---- Worked example (dumped from a real file) -----------------------------
 *   A collection "test.c" created on a fresh database gets its first extent
 *   at 0:0x2000, length 0x2000 (initialSize(128) = 8192).  Inserting the
 *   100-byte document {_id: 1, s: <78 x 'x'>} under powerOf2 needs
 *   100 + 16 = 116 bytes, quantized to 128, split off the front of the
 *   extent's one big deleted record at 0:0x20b0 (0x2000 + 176); the
 *   8016 - 128 = 7888 bytes left stay free at 0:0x2130 in bucket 8 (8 KB).
 *   Extent header, file offset 0x2000:
 *     2000: 44 43 42 41 00 00 00 00 00 20 00 00 ff ff ff ff  magic, myLoc 0:0x2000,
 *     2010: 00 00 00 00 ff ff ff ff 00 00 00 00 74 65 73 74  xnext, xprev null,
 *     2020: 2e 63 00 00 ... (zero to 0x209b)                 nsDiagnostic "test.c"
 *     2090: .. .. .. .. .. .. .. .. .. .. .. .. 00 20 00 00  length 8192
 *     20a0: 00 00 00 00 b0 20 00 00 00 00 00 00 b0 20 00 00  first/lastRecord 0:0x20b0
 *   Record, RecordId 0x20b0:
 *     20b0: 80 00 00 00 00 20 00 00 ff ff ff ff ff ff ff ff  len 128, extentOfs 0x2000,
 *                                                            nextOfs, prevOfs -1
 *     20c0: 64 00 00 00 10 5f 69 64 00 01 00 00 00 02 73 00  BSON len 100, int32 "_id" 1,
 *     20d0: 4f 00 00 00 78 78 78 ...                          string "s" (79 incl. NUL)
 *     2120: 78 78 00 00 00 00 00 00 00 00 00 00 00 00 00 00  end of BSON at 0x2123, then
 *                                                            12 bytes of padding
 *   Deleted record at 0x2130:
 *     2130: d0 1e 00 00 00 20 00 00 ff ff ff ff 00 00 00 00  len 7888, extentOfs 0x2000,
 *                                                            nextDeleted null
 *   collStats counts netLength: "size" 112 for this document.
 *
 * ---- Transactions and the journal -----------------------------------------
 *   Every byte changed in a mapping is first declared with mm_writing(),
 *   which records an intent (file number or MM_NS_FILENO, offset, length)
 *   and saves the pre-image.  Abort copies pre-images back in reverse
 *   order.  Commit appends the intents, with the bytes they now hold, to
 *   the group-commit buffer (mm_journal.c), which becomes one journal
 *   section every journalCommitInterval ms (default 100, 1..500), at once
 *   for a durable commit ({j: true}), or past 16 MB pending.  Creating a
 *   file is not journaled: it is created as <name>.tmp, allocated with
 *   posix_fallocate (ENOSPC there, not SIGBUS in the mapping), its header
 *   written with pwrite and fdatasynced, then renamed and the directory
 *   fsynced -- journal on or off -- before any section can name it; an
 *   aborted transaction leaves the new file empty and valid.
 *
 *   Ordering: no data-file byte may reach the disk before the section that
 *   carries it.  As MongoDB does, the engine reads and writes a MAP_PRIVATE
 *   (copy-on-write) view of every file, which the kernel never writes back.
 *   A second, MAP_SHARED view of each file receives a section's entries
 *   (memcpy, "WRITETODATAFILES") only after the section was written and
 *   fdatasync'ed; the kernel may write those shared pages back whenever it
 *   likes, which is then harmless.  (Keeping only a MAP_SHARED view and
 *   "not flushing" would not do: the kernel writes dirty shared pages back
 *   at any time.)  The private view keeps a copy of every page changed
 *   since it was last remapped; eng_flush, and any commit after 256 MB of
 *   changes, remap it in place (MAP_FIXED, same addresses, so views stay
 *   valid) and re-apply the commits not yet in the shared view.  Data files
 *   are msync'ed every syncdelay s (default 60, 0 = never), at eng_flush
 *   and at close; then journal/lsn records the last section they hold, a
 *   new j._N+1 is started and the older journal files are removed.  The
 *   flush thread does both the interval commits and the syncdelay flushes.
 *
 *   Recovery (at open, before anything is mapped): the sections of
 *   j._0, j._1, ... whose checksum verifies and whose seqNumber exceeds the
 *   LSN are applied with pwrite in order; the first torn, damaged,
 *   foreign or out-of-sequence section ends the journal (a crash can only
 *   tear the last one; if a valid section follows, the journal was damaged:
 *   flag 2 in the .ns header, and validate reports it).  Entries carry
 *   the final bytes, so replaying a section again is harmless (idempotent).
 *   Then the files are fsynced, the LSN written, and the journal removed.
 *
 *   journal: false: one MAP_SHARED view, no journal, durable commits msync
 *   the touched pages (MongoDB refuses {j: true} then; we sync instead).  After a crash, writes since the last flush are lost
 *   and the files may be inconsistent (the kernel wrote back some pages and
 *   not others): the .ns header flag above records the unclean run, and
 *   validate then reports an error saying so, or, when a structure open
 *   checks is damaged, open refuses with MD_ECORRUPT naming the file and
 *   offset (never a crash; tests/faults/fault_powerloss.c).
 *
 * ---- Journal file DIR/journal/j._N ------------------------------------------
 *   JHeader (8192 bytes)
 *   OFFSET SIZE FIELD
 *   0      2    magic "j\n"
 *   2      2    version 0x4148 (MongoDB's uncompressed version)
 *   8      8    fileId        random; every section repeats it
 *   64     ...  dbpath, NUL terminated
 *   8188   4    crc32c of bytes [0, 8188)
 *   Then sections back to back, each padded with zeros to 8192 bytes:
 *   JSectHeader (24 bytes)
 *   0      4    sectionLen    header + entries + footer, unpadded
 *   4      4    magic 0x5443534a ("JSCT")
 *   8      8    seqNumber     1, 2, ... never reused (continues past the LSN)
 *   16     8    fileId        as in the file header
 *   JEntry (12 bytes + len bytes of data), as many as fit
 *   0      4    len
 *   4      4    ofs           offset in the file
 *   8      4    fileNo        data file number; 0x7fffffff = the .ns file
 *   JSectFooter (16 bytes)
 *   0      4    sentinel 0xffffffff
 *   4      4    crc32c of the section from its first byte to the sentinel
 *                 included
 *   8      4    reserved, 0
 *   12     4    "\n\n\n\n"
 *   Example: entries setting 8 bytes (nrecords = 1 of .ns slot 1, at
 *   0x280 + 368 = 0x3f0) and a 128-byte record at 0:0x20b0 (a real insert
 *   has a few more) give sectionLen 24 + 12+8 + 12+128 + 16 = 200 (0xc8),
 *   padded to 8192:
 *     0000: c8 00 00 00 4a 53 43 54 07 00 00 00 00 00 00 00  len, "JSCT", seq 7
 *     0010: <fileId 8 bytes>        08 00 00 00 f0 03 00 00  entry: len 8, ofs 0x3f0
 *     0020: ff ff ff 7f 01 00 00 00 00 00 00 00 80 00 00 00  .ns, data; len 128
 *     0030: b0 20 00 00 00 00 00 00 <128 bytes of record>     ofs 0x20b0, file 0
 *     00b8: ff ff ff ff <crc32c>    00 00 00 00 0a 0a 0a 0a  footer
 *
 * ---- Damage detection, and its limits --------------------------------------
 *   Checksummed: journal file headers and sections (crc32c).  Checked
 *   structurally: data file headers, the .ns header and slots, extent
 *   headers and chains, record headers and chains, free lists, index
 *   buckets (mm_btree.c: header, slots, key order across siblings), and
 *   every record's BSON length against its slot.  Documents are checked
 *   for well-formed BSON where a query hands them out (q_cursor.c,
 *   eng_bson_well_formed), not on every engine read: the walk costs more
 *   than an in-place $inc of a 1,440-field document.  A
 *   failure is MD_ECORRUPT (DataCorruptionDetected) naming the file and the
 *   offset, at open or from validate; a cursor that meets a damaged bucket
 *   stops (it never hands out the same entry again).
 *   Not detectable: there is no checksum on a record or a bucket, exactly
 *   as in MongoDB's MMAPv1.  A flipped byte inside a document that leaves
 *   valid BSON (a number, a string's bytes, even invalid UTF-8) changes the
 *   value silently; in an index key it makes the index disagree with the
 *   record (validate finds that); in a catalog entry it changes the entry
 *   (an index's key pattern, say), but a name there that the .ns file does
 *   not hold (a collection's key, an index's ident) fails rs/ss open, at
 *   database open, with MD_ECORRUPT naming the record (mm_meta_missing),
 *   and query/ names the record (mm_meta_where) when an entry is
 *   malformed.  A damaged last journal section cannot be told from a torn
 *   one: that commit is lost.
 *   tests/faults/fault_corrupt.c holds the engine to exactly this.
 *
 * ---- DIR/journal/lsn (24 bytes) -------------------------------------------
 *   0      8    magic "MDLSN001"
 *   8      8    lsn           last seqNumber applied and flushed
 *   16     8    ~lsn          check bytes; a torn file counts as LSN 0
 *                             (every section still present is replayed)
 */
#ifndef MM_INT_H
#define MM_INT_H

#include <assert.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "eng.h"
#include "mm.h"
#include "mm_btree.h"

/* ---- constants (MongoDB 3.0 names in comments) -------------------------- */
#define MM_DFH_SIZE 8192          /* DataFileHeader::HeaderSize */
#define MM_EXT_HDR 176            /* Extent::HeaderSize() */
#define MM_REC_HDR 16             /* MmapV1RecordHeader::HeaderSize */
#define MM_EXTENT_MAGIC 0x41424344u
#define MM_NBUCKETS 26            /* RecordStoreV1Base::Buckets */
#define MM_MAX_ALLOC (16 * 1024 * 1024 + 512 * 1024) /* MaxAllowedAllocation */
#define MM_MAX_BSON (16 * 1024 * 1024 + 16 * 1024) /* BSONObjMaxInternalSize */
#define MM_MAX_FILE_SIZE 0x7ff00000LL  /* DataFile::maxSize() on 64-bit */
#define MM_MIN_EXTENT 0x1000      /* ExtentManager::minSize() */
#define MM_MAX_FILES 16000        /* DiskLoc::MaxFiles */
#define MM_NULL_OFS (-1)          /* DiskLoc::NullOfs */
#define MM_MIN_REC_LEN (MM_REC_HDR + 5) /* header + smallest BSON document */
#define MM_DEFAULT_FIRST_FILE (64LL * 1024 * 1024)
#define MM_DEFAULT_NS_SIZE (16LL * 1024 * 1024)
#define MM_MIN_NS_SIZE (16LL * 1024)
#define MM_NS_SLOT_SIZE 640
#define MM_NS_FILENO (-1)         /* intent "file number" of the .ns file */
#define MM_FILE_VERSION 4
#define MM_FILE_VERSION_MINOR 6
#define MM_DFH_MAGIC "MDMMAPV1"
#define MM_NS_MAGIC "MDMMNS01"
#define MM_FREELIST_NS "$freelist"

#define MM_NSF_NOJOURNAL 1        /* open without the journal, not yet closed */
#define MM_NSF_JDAMAGED 2         /* replay stopped before the journal's end */

#define MM_FLAG_POWEROF2 1        /* Flag_UsePowerOf2Sizes */
#define MM_FLAG_NOPADDING 2       /* Flag_NoPadding */
#define MM_FLAG_PADDINGFACTOR 0x100 /* minidoc: MongoDB 2.4's paddingFactor */

enum mm_kind { MM_KIND_FREE = 0, MM_KIND_COLL = 1, MM_KIND_INDEX = 2, MM_KIND_CATALOG = 3 };

/* ---- on-disk structures -------------------------------------------------- */
typedef struct mm_loc {
    int32_t a;
    int32_t ofs;
} mm_loc;

typedef struct mm_dfh {
    int32_t version;
    int32_t version_minor;
    int32_t file_length;
    mm_loc unused;
    int32_t unused_length;
    mm_loc free_start;
    mm_loc free_end;
    char magic[8];
    int32_t file_no;
    int32_t reserved0;
    int64_t journal_lsn;
    uint8_t reserved[MM_DFH_SIZE - 64];
} mm_dfh;

typedef struct mm_extent {
    uint32_t magic;
    mm_loc my_loc;
    mm_loc xnext;
    mm_loc xprev;
    char ns[128];
    int32_t length;
    mm_loc first_record;
    mm_loc last_record;
} mm_extent;

typedef struct mm_record {
    int32_t len; /* lengthWithHeaders */
    int32_t extent_ofs;
    int32_t next_ofs;
    int32_t prev_ofs;
} mm_record;

typedef struct mm_deleted {
    int32_t len;
    int32_t extent_ofs;
    mm_loc next;
} mm_deleted;

typedef struct mm_ns_header {
    char magic[8];
    uint32_t version;
    uint32_t slot_size;
    int64_t file_size;
    uint32_t nslots;
    uint32_t reserved0;
    int64_t total_moves;
    uint32_t flags; /* MM_NSF_*: written with pwrite, never journaled */
    uint32_t reserved1;
    uint8_t reserved[MM_NS_SLOT_SIZE - 48];
} mm_ns_header;

typedef struct mm_ns_slot {
    uint32_t hash;
    uint32_t kind;
    char name[128];
    mm_loc first_extent;
    mm_loc last_extent;
    mm_loc deleted[MM_NBUCKETS];
    int64_t datasize;
    int64_t nrecords;
    int32_t last_extent_size;
    int32_t user_flags;
    double padding_factor;
    int64_t n_inserts;
    int64_t n_updates;
    int64_t n_inplace;
    int64_t n_moves;
    int64_t bytes_written;
    mm_loc index_head;
    int32_t n_indexes;
    int32_t is_capped;
    int64_t capped_size;
    int64_t capped_max;
    int32_t pf_fits_count;
    int32_t pf_move_count;
    mm_loc cap_extent;
    mm_loc cap_first_new;
    uint8_t reserved[MM_NS_SLOT_SIZE - 488];
} mm_ns_slot;

_Static_assert(sizeof(mm_loc) == 8, "DiskLoc is 8 bytes");
_Static_assert(sizeof(mm_dfh) == MM_DFH_SIZE, "DataFileHeader is 8192 bytes");
_Static_assert(sizeof(mm_extent) == MM_EXT_HDR, "extent header is 176 bytes");
_Static_assert(sizeof(mm_record) == MM_REC_HDR, "record header is 16 bytes");
_Static_assert(sizeof(mm_deleted) == MM_REC_HDR, "DeletedRecord is 16 bytes");
_Static_assert(sizeof(mm_ns_header) == MM_NS_SLOT_SIZE, "ns header is one slot");
_Static_assert(sizeof(mm_ns_slot) == MM_NS_SLOT_SIZE, "ns slot is 640 bytes");
_Static_assert(offsetof(mm_ns_slot, datasize) == 360, "ns slot layout");
_Static_assert(offsetof(mm_ns_slot, pf_move_count) == 468, "ns slot layout");
_Static_assert(offsetof(mm_ns_slot, cap_extent) == 472, "ns slot layout");
_Static_assert(offsetof(mm_ns_slot, cap_first_new) == 480, "ns slot layout");
_Static_assert(offsetof(mm_extent, length) == 156, "extent layout");

static inline mm_loc mm_loc_null(void)
{
    return (mm_loc){-1, 0};
}
static inline mm_loc mm_loc_make(int32_t a, int32_t ofs)
{
    return (mm_loc){a, ofs};
}
static inline bool mm_loc_is_null(mm_loc l)
{
    return l.a == -1;
}
/* DiskLoc().setInvalid(): capFirstNewRecord during a capped ring's first
 * pass. */
static inline mm_loc mm_loc_invalid(void)
{
    return (mm_loc){-2, 0};
}
static inline bool mm_loc_is_valid(mm_loc l)
{
    return l.a != -2;
}
static inline bool mm_loc_eq(mm_loc x, mm_loc y)
{
    return x.a == y.a && x.ofs == y.ofs;
}
static inline eng_rid mm_loc_to_rid(mm_loc l)
{
    return (eng_rid)(((uint64_t)(uint32_t)l.a << 32) | (uint32_t)l.ofs);
}
static inline mm_loc mm_rid_to_loc(eng_rid r)
{
    return (mm_loc){(int32_t)((uint64_t)r >> 32), (int32_t)(uint32_t)((uint64_t)r & 0xffffffffu)};
}
static inline int32_t mm_le32(const uint8_t *p)
{
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                     (uint32_t)p[3] << 24);
}

/* ---- in-memory objects --------------------------------------------------- */
typedef struct mm_file {
    int fd;
    uint8_t *map;  /* the view everything reads and writes: MAP_PRIVATE with
                      the journal on, MAP_SHARED without */
    uint8_t *wmap; /* MAP_SHARED view the journal applies committed bytes to
                      (== map without the journal) */
    int64_t len;
} mm_file;

typedef struct mm_meta_ent {
    char *key;
    mm_loc loc;
} mm_meta_ent;

typedef struct mm_txn mm_txn;
typedef struct mm_cursor mm_cursor;
typedef struct mm_journal mm_journal;

typedef struct mm_engine {
    eng_engine base;
    char *dir, *db;
    int lock_fd;
    mm_file ns;      /* the .ns file */
    mm_file *files;  /* data files 0 .. nfiles-1 */
    int nfiles, files_cap;
    uint32_t nslots; /* hash slots 1 .. nslots of the .ns file */
    int64_t first_file_size, file_cap;
    bool debug_remap;
    int32_t capped_extent_max; /* option debugCappedExtentSize: largest
                                  extent a capped create allocates (0: as
                                  3.0, the largest extent), so that tests
                                  get rings of several extents as 3.0's
                                  $nExtents gave them */
    int64_t nremaps;
    mm_txn *txn;     /* the active transaction, or NULL */
    mm_txn *spare_txn; /* the last one ended, kept with its intent buffers
                          so that steady-state writes allocate nothing */
    uint64_t txn_serial; /* numbers the transactions (mm_txn.serial) */
    int32_t meta_slot;
    mm_meta_ent *meta; /* catalog: key -> record, sorted by key */
    size_t nmeta, meta_cap;
    bool meta_dirty; /* the active transaction changed the catalog */
    mm_cursor *cursors; /* every open record-store cursor, under cursors_mu:
                           readers of other collections open and close
                           theirs while a writer walks the list */
    pthread_mutex_t cursors_mu;
    bool journal;       /* option journal (default true) */
    bool check_views;   /* option debugCheckViews: compare views at flush */
    int64_t remap_bytes; /* remap the private views past this many copied
                            bytes (MM_J_REMAP_BYTES; option
                            debugRemapPrivateViewBytes lowers it) */
    bool unclean_nojournal; /* last run wrote without a journal and did not
                               close cleanly: files may be inconsistent */
    bool journal_damaged;   /* replay stopped at damage before the end */
    char jdamage[300];      /* where, when this open found it ("" if an
                               earlier open did: only flag 2 says so) */
    mm_journal *j;      /* group commit, flush thread (always allocated) */
} mm_engine;

typedef struct mm_intent {
    int32_t file; /* data file number or MM_NS_FILENO */
    uint32_t len;
    int64_t ofs;
    size_t pre;   /* offset of the pre-image in mm_txn.buf */
} mm_intent;

struct mm_txn {
    eng_txn base;
    mm_engine *e;
    uint64_t serial; /* this transaction's number (mm_txn_begin) */
    mm_intent *v;
    size_t n, cap;
    uint8_t *buf;
    size_t blen, bcap;
};

typedef struct mm_rs {
    eng_rs base;
    mm_engine *e;
    int32_t slot;
    char name[ENG_IDENT_MAX];
} mm_rs;

struct mm_cursor {
    eng_rs_cursor base;
    mm_engine *e;
    int32_t slot;
    bool forward, started, eof;
    mm_loc next; /* the record the next call returns */
    /* Forward cursors on a capped collection tail instead: they remember
     * the last record returned and step from it on every call; its removal
     * loses them (MD_ECAPPEDLOST). */
    bool tail, lost;
    mm_loc last; /* null before the first record */
    int64_t steps; /* records returned: bounds a walk of a damaged chain */
    mm_cursor *link_prev, *link_next;
};

static inline mm_engine *mm_E(eng_engine *e)
{
    assert(e && e->ops == &mm_engine_ops);
    return (mm_engine *)e;
}

/* ---- mm_file.c: lock, data files, .ns file, pointers -------------------- */
int mm_lock_acquire(mm_engine *e, md_error *err);
void mm_lock_release(mm_engine *e);
int mm_ns_file_open(mm_engine *e, int64_t ns_size, bool *created, md_error *err);
int mm_files_open(mm_engine *e, md_error *err);
/* Add data file nfiles, big enough for an extent of ext_size bytes.
 * With debug_remap every existing mapping moves: views die. */
int mm_file_add(mm_engine *e, int64_t ext_size, md_error *err);
int64_t mm_file_default_size(const mm_engine *e, int n);
void mm_files_close(mm_engine *e);
/* msync the shared views (the caller holds the journal lock). */
int mm_files_flush(mm_engine *e, bool sync, md_error *err);
/* Replace every private view by a fresh one at the same address holding
 * the files plus the commits in pend (drops the copy-on-write pages of
 * the commits already in the files).  Readers beside it see the old view
 * or the new one, never the files alone (mm_file.c). */
struct mm_jbuf;
int mm_views_remap(mm_engine *e, const struct mm_jbuf *pend);
/* First byte where the private and shared views differ, or -1. */
int64_t mm_views_diff(const mm_engine *e, int32_t *file);
uint8_t *mm_file_wbase(const mm_engine *e, int32_t file);
int64_t mm_file_len(const mm_engine *e, int32_t file);
int mm_fsync_dir(const char *dir);
/* Set or clear MM_NSF_NOJOURNAL in the .ns file with pwrite + fdatasync. */
int mm_ns_set_flags(mm_engine *e, uint32_t flags);
/* Pointer to [l.ofs, l.ofs + len) of data file l.a, or NULL if outside.
 * Inline, as the other pointer checks below: every point read and write
 * goes through several of them. */
static inline uint8_t *mm_ptr(const mm_engine *e, mm_loc l, int64_t len)
{
    if (l.a < 0 || l.a >= e->nfiles || l.ofs < 0 || len < 0)
        return NULL;
    const mm_file *f = &e->files[l.a];
    if ((int64_t)l.ofs + len > f->len)
        return NULL;
    return f->map + l.ofs;
}
mm_dfh *mm_dfh_at(const mm_engine *e, int n);
/* Which mapping holds p: data file number or MM_NS_FILENO, and offset. */
bool mm_ptr_locate(const mm_engine *e, const void *p, int32_t *file, int64_t *ofs);
uint8_t *mm_file_base(const mm_engine *e, int32_t file);
int64_t mm_total_bytes(const mm_engine *e);

/* ---- mm_ns.c: namespace hash table and the catalog ---------------------- */
uint32_t mm_ns_hash(const char *name);
mm_ns_header *mm_ns_header_of(const mm_engine *e);
static inline mm_ns_slot *mm_ns_at(const mm_engine *e, int32_t slot)
{
    assert(slot >= 1 && (uint32_t)slot <= e->nslots);
    return (mm_ns_slot *)(e->ns.map + (int64_t)slot * MM_NS_SLOT_SIZE);
}
int32_t mm_ns_find(const mm_engine *e, const char *name); /* -1 if absent */
int mm_ns_add(mm_engine *e, mm_txn *t, const char *name, int kind, int32_t *slot,
              md_error *err);
void mm_ns_remove(mm_engine *e, mm_txn *t, int32_t slot);
int mm_ns_check_all(mm_engine *e, md_error *err);
int mm_meta_load(mm_engine *e, md_error *err);
/* rs/ss open of an ident that has no namespace of its kind: MD_ECORRUPT
 * naming the catalog record that holds the ident, else MD_NOTFOUND with
 * code and "<what> not found: <ident>". */
int mm_meta_missing(const mm_engine *e, const char *ident, int code, const char *what,
                    md_error *err);
void mm_meta_free(mm_engine *e);
int mm_meta_put(eng_engine *e, eng_txn *t, const char *key, const bson_t *value,
                md_error *err);
int mm_meta_get(eng_engine *e, const char *key, bson_t *out);
int mm_meta_del(eng_engine *e, eng_txn *t, const char *key);
int mm_meta_list(eng_engine *e, eng_meta_fn fn, void *ctx);
void mm_meta_where(eng_engine *e, const char *key, char *buf, size_t n);

/* ---- mm_extent.c: extents ----------------------------------------------- */
int32_t mm_extent_max_size(const mm_engine *e);
int32_t mm_extent_quantize(const mm_engine *e, int64_t size);
int32_t mm_extent_initial_size(const mm_engine *e, int32_t len);
int32_t mm_extent_followup_size(const mm_engine *e, int32_t len, int32_t last_len);
/* The extent header at l, or NULL unless it is in bounds with the right
 * magic, myLoc and a length that fits in the file. */
static inline mm_extent *mm_extent_at(const mm_engine *e, mm_loc l)
{
    if (l.ofs < MM_DFH_SIZE || (l.ofs & 0xfff) != 0)
        return NULL;
    mm_extent *x = (mm_extent *)mm_ptr(e, l, MM_EXT_HDR);
    if (!x || x->magic != MM_EXTENT_MAGIC || !mm_loc_eq(x->my_loc, l))
        return NULL;
    if (x->length < MM_MIN_EXTENT || (int64_t)l.ofs + x->length > e->files[l.a].len)
        return NULL;
    return x;
}
int mm_extent_alloc(mm_engine *e, mm_txn *t, bool capped, int32_t size, mm_loc *out,
                    md_error *err);
int mm_extent_free(mm_engine *e, mm_txn *t, mm_loc l);
/* Append a new extent of about `size` bytes to namespace `slot`; its space
 * becomes one deleted record.  (RecordStoreV1Base::increaseStorageSize) */
int mm_ns_increase_storage(mm_engine *e, mm_txn *t, int32_t slot, int32_t size,
                           md_error *err);
/* Make the whole space of extent el one free record of namespace slot. */
void mm_extent_free_space(mm_engine *e, mm_txn *t, int32_t slot, mm_loc el);
/* The extent chain from start (xnext order) in a new array; MD_ECORRUPT if
 * it is broken.  Caller frees *out. */
int mm_extent_chain(const mm_engine *e, mm_loc start, mm_loc **out, int32_t *n);
int mm_extent_free_chain(mm_engine *e, mm_txn *t, mm_loc start);
int mm_ns_free_extents(mm_engine *e, mm_txn *t, int32_t slot);
int64_t mm_ns_storage_size(const mm_engine *e, int32_t slot, int32_t *nextents);
int64_t mm_max_chain(const mm_engine *e);

/* ---- mm_alloc.c: quantization, free lists, record chains ---------------- */
extern const int32_t mm_bucket_sizes[MM_NBUCKETS];
int mm_bucket(int32_t size);
int32_t mm_quantize(int32_t size);
bool mm_is_quantized(int32_t size);
int mm_strategy(const mm_ns_slot *d); /* enum eng_alloc */
int32_t mm_alloc_size_for(const mm_ns_slot *d, int32_t len_with_headers);
static inline mm_record *mm_record_at(const mm_engine *e, mm_loc l)
{
    if (l.ofs < MM_DFH_SIZE + MM_EXT_HDR || (l.ofs & 3) != 0)
        return NULL;
    return (mm_record *)mm_ptr(e, l, MM_REC_HDR);
}
mm_deleted *mm_deleted_at(const mm_engine *e, mm_loc l);
void mm_add_deleted(mm_engine *e, mm_txn *t, int32_t slot, mm_loc l);
int mm_alloc_record(mm_engine *e, mm_txn *t, int32_t slot, int32_t len, mm_loc *out,
                    md_error *err);
/* Free record l, off its list: keep len bytes, free the rest (>= a
 * record header) as a record of its own. */
void mm_free_split(mm_engine *e, mm_txn *t, int32_t slot, mm_loc l, int32_t len);
/* Fill the allocated record at l with data (len bytes; zeros when data is
 * NULL), link it at the end of its extent's chain and count it. */
int mm_record_place(mm_engine *e, mm_txn *t, int32_t slot, mm_loc l, const uint8_t *data,
                    uint32_t len, md_error *err);
/* Allocate alloc_len bytes, copy data (or zero len bytes when data is NULL),
 * link the record at the end of its extent's chain and count it. */
int mm_record_insert(mm_engine *e, mm_txn *t, int32_t slot, const uint8_t *data,
                     uint32_t len, int32_t alloc_len, mm_loc *out, md_error *err);
void mm_record_delete(mm_engine *e, mm_txn *t, int32_t slot, mm_loc l);
void mm_pf_fits(mm_engine *e, mm_txn *t, int32_t slot);
void mm_pf_too_small(mm_engine *e, mm_txn *t, int32_t slot);

/* ---- mm_txn.c: write intents --------------------------------------------- */
mm_txn *mm_T(eng_txn *t, mm_engine *e);
/* Declare that [p, p+len) of a mapping is about to change. */
void mm_writing(mm_txn *t, void *p, size_t len);
void mm_w32(mm_txn *t, int32_t *p, int32_t v);
void mm_w64(mm_txn *t, int64_t *p, int64_t v);
void mm_wloc(mm_txn *t, mm_loc *p, mm_loc v);
void mm_wdbl(mm_txn *t, double *p, double v);
int mm_txn_begin(eng_engine *e, eng_txn **out);
void mm_txn_spare_free(mm_engine *e);
/* The write transaction the calling thread began, or NULL (read without
 * a race, unlike e->txn, which other threads' reads may not look at). */
extern __thread mm_txn *mm_txn_mine;
int mm_txn_commit(eng_txn *t, bool durable, md_error *err);
void mm_txn_abort(eng_txn *t);

/* ---- mm_jsect.c / mm_journal.c: the journal ----------------------------- */
#define MM_J_ALIGN 8192           /* JSectHeader alignment (Alignment) */
#define MM_J_FILE_HDR 8192        /* JHeader */
#define MM_J_SECT_HDR 24
#define MM_J_ENTRY_HDR 12
#define MM_J_FOOTER 16
#define MM_J_SECT_MAGIC 0x5443534au /* "JSCT" */
#define MM_J_SENTINEL 0xffffffffu /* JEntry::OpCode_Footer */
#define MM_J_NS_FILENO 0x7fffffffu /* JEntry fileNo of the .ns file */
#define MM_J_SECT_MAX 0x7fff0000u
#define MM_J_DEFAULT_INTERVAL 100 /* journalCommitInterval, ms */
#define MM_J_DEFAULT_SYNCDELAY 60 /* syncdelay, s */
#define MM_J_FILE_LIMIT (1LL << 30) /* DataLimitPerJournalFile */
#define MM_J_EARLY_BYTES (16 << 20) /* commit at once past this much pending */
#define MM_J_REMAP_BYTES (256LL << 20) /* remap the private view past this */
#define MM_LSN_MAGIC "MDLSN001"
#define MM_LSN_SIZE 24

/* A section under construction: MM_J_SECT_HDR bytes of room for the header,
 * then entries {len, ofs, fileNo} + data. */
typedef struct mm_jbuf {
    uint8_t *p;
    size_t len, cap;
    size_t nentries;
} mm_jbuf;

typedef struct mm_jsect_info {
    uint64_t seq, file_id;
    uint32_t len;  /* sectionLen: header + entries + footer */
    size_t padded; /* len rounded up to MM_J_ALIGN */
    size_t nentries;
} mm_jsect_info;

typedef int (*mm_jentry_fn)(void *ctx, int32_t file, uint32_t ofs, const uint8_t *data,
                            uint32_t len);

void mm_jbuf_reset(mm_jbuf *b);
void mm_jbuf_free(mm_jbuf *b);
void mm_jbuf_entry(mm_jbuf *b, int32_t file, uint32_t ofs, const void *data, uint32_t len);
int mm_jbuf_apply(const mm_jbuf *b, mm_jentry_fn fn, void *ctx);
size_t mm_jsect_seal(mm_jbuf *b, uint64_t seq, uint64_t file_id);
size_t mm_jsect_padded_len(const uint8_t *hdr);
int mm_jsect_check(const uint8_t *p, size_t avail, uint64_t file_id, mm_jsect_info *out);
int mm_jsect_apply(const uint8_t *p, const mm_jsect_info *in, mm_jentry_fn fn, void *ctx);
void mm_jfile_header(uint8_t *h, uint64_t file_id, const char *dir);
int mm_jfile_header_check(const uint8_t *h, uint64_t *file_id);
void mm_lsn_encode(uint8_t *p, uint64_t lsn);
int mm_lsn_decode(const uint8_t *p, uint64_t *lsn);

typedef struct mm_jopts {
    int interval_ms;    /* journalCommitInterval, 1..500 */
    int64_t syncdelay;  /* seconds, 0 = never */
    int64_t file_limit; /* bytes per journal file before the next one */
} mm_jopts;

/* Replay DIR/journal (whatever the journal option) into the data files
 * with pwrite, before they are mapped; then flush, write the LSN and remove
 * the journal files.  *last_seq: the highest sequence number seen. */
int mm_journal_recover(mm_engine *e, uint64_t *last_seq, int64_t *replayed, bool *damaged,
                       md_error *err);
/* Allocate e->j, start a journal file (journal on) and the flush thread. */
int mm_journal_open(mm_engine *e, const mm_jopts *o, uint64_t last_seq, int64_t replayed,
                    md_error *err);
/* Stop the thread, flush everything, remove the journal files (clean). */
void mm_journal_close(mm_engine *e);
/* Commit t's intents: append them to the group-commit buffer; durable:
 * write and fsync the section before returning.  *remap: the private view
 * has grown past e->remap_bytes (decided under the same lock). */
int mm_journal_commit(mm_engine *e, mm_txn *t, bool durable, bool *remap, md_error *err);
/* After a commit that set *remap (no transaction open): remap the private
 * view. */
void mm_journal_after_commit(mm_engine *e);
int mm_journal_flush(mm_engine *e, bool sync, md_error *err);
int mm_journal_failed(mm_engine *e); /* 0 or the error that stopped writes */
void mm_journal_lock(mm_engine *e);  /* the files array and views */
void mm_journal_unlock(mm_engine *e);
void mm_journal_status(mm_engine *e, bson_t *sub);

/* ---- mm_rs.c: record stores and cursors ---------------------------------- */
/* The live record at l in namespace slot, or NULL (bounds, chain membership,
 * owning extent and, for documents, the BSON length are checked). */
mm_record *mm_rs_locate(const mm_engine *e, int32_t slot, mm_loc l);
/* The same checks but the chain's: the header's own (length, extent
 * back-pointer and namespace, next link inside the extent, BSON length
 * inside the record), not the predecessor's link to l, which costs a cache
 * miss on a random read.  For reads and writes inside the record (get,
 * in-place update, damages); whatever unlinks a record (remove, move,
 * capped removal) or walks the chain uses mm_rs_locate. */
mm_record *mm_rs_locate_point(const mm_engine *e, int32_t slot, mm_loc l);
/* Successor of cur (or the first record when cur is null) in the given
 * direction; *out is null at the end.  MD_ECORRUPT on a bad pointer. */
int mm_rec_step(const mm_engine *e, int32_t slot, mm_loc cur, bool forward, mm_loc *out);
int mm_do_insert(mm_engine *e, mm_txn *t, int32_t slot, const uint8_t *data, uint32_t len,
                 mm_loc *out, md_error *err);
int mm_do_update(mm_engine *e, mm_txn *t, int32_t slot, mm_loc l, const uint8_t *data,
                 uint32_t len, mm_loc *out, bool *moved, md_error *err);
void mm_cursors_removing(mm_engine *e, int32_t slot, mm_loc l);
void mm_cursors_invalidate(mm_engine *e, int32_t slot);
int mm_rs_create(eng_engine *e, eng_txn *t, const char *ident, const eng_rs_options *o,
                 md_error *err);
int mm_rs_open(eng_engine *e, const char *ident, eng_rs **out, md_error *err);
void mm_rs_close(eng_rs *rs);
int mm_rs_drop(eng_engine *e, eng_txn *t, const char *ident);
int mm_rs_insert(eng_rs *rs, eng_txn *t, const uint8_t *data, uint32_t len, eng_rid *out,
                 md_error *err);
int mm_rs_get(eng_rs *rs, eng_rid rid, const uint8_t **data, uint32_t *len);
int mm_rs_update(eng_rs *rs, eng_txn *t, eng_rid rid, const uint8_t *data, uint32_t len,
                 eng_rid *new_rid, bool *moved, md_error *err);
int mm_rs_update_damages(eng_rs *rs, eng_txn *t, eng_rid rid, const uint8_t *src,
                         const eng_damage *d, size_t nd, md_error *err);
int mm_rs_remove(eng_rs *rs, eng_txn *t, eng_rid rid);
int mm_rs_truncate(eng_rs *rs, eng_txn *t);
int mm_rs_set_alloc(eng_rs *rs, eng_txn *t, int alloc);
void mm_rs_stats(eng_rs *rs, struct eng_rs_stats *s);
void mm_rs_append_stats(eng_rs *rs, bson_t *sub);
int mm_rs_cursor_open(eng_rs *rs, bool forward, eng_rs_cursor **out);
int mm_rs_cursor_next(eng_rs_cursor *c, eng_rid *rid, const uint8_t **data, uint32_t *len);
void mm_rs_cursor_save(eng_rs_cursor *c);
int mm_rs_cursor_restore(eng_rs_cursor *c);
void mm_rs_cursor_close(eng_rs_cursor *c);
mm_ns_slot *mm_rs_details(const mm_rs *rs); /* NULL if dropped */

/* ---- mm_capped.c: capped collections (CappedRecordStoreV1) -------------- */
/* Set up slot (just added) as a capped collection of `size` bytes and `max`
 * documents: extents covering size allocated now, the ring at the first. */
int mm_capped_create(mm_engine *e, mm_txn *t, int32_t slot, int64_t size, int64_t max,
                     md_error *err);
/* Insert into the ring, removing its oldest records (each announced to the
 * handle's capped-delete hook through tx first) until the record fits. */
int mm_capped_insert(mm_engine *e, mm_txn *t, eng_rs *rs, eng_txn *tx, int32_t slot,
                     const uint8_t *data, uint32_t len, mm_loc *out, md_error *err);
/* Free record l joins deletedList[0], merged with free neighbours. */
void mm_capped_add_deleted(mm_engine *e, mm_txn *t, int32_t slot, mm_loc l);
/* Record l is about to be unlinked: keep capFirstNewRecord on a record. */
void mm_capped_removing(mm_engine *e, mm_txn *t, int32_t slot, mm_loc l);
/* Ring order, oldest first: the successor (forward) or predecessor of cur,
 * or the oldest / newest record when cur is null; *out null at the end. */
int mm_capped_step(const mm_engine *e, int32_t slot, mm_loc cur, bool forward, mm_loc *out);
/* emptycapped: every extent becomes one free record, the ring restarts. */
int mm_capped_truncate(mm_engine *e, mm_txn *t, int32_t slot);
/* validate: the ring's fields and a walk of it in ring order. */
void mm_capped_verify(const mm_engine *e, int32_t slot, eng_validate *v, int64_t nrecords);

/* ---- mm_verify.c / mm_compact.c ------------------------------------------ */
/* Check namespace slot's structures; with_info appends the validate fields
 * (nrecords, deletedCount, ...) to v->info. */
void mm_verify_ns(const mm_engine *e, int32_t slot, eng_validate *v, bool with_info);
/* Bytes read from disk (at most n, up to a NUL) made printable ASCII for an
 * error message: anything else becomes \xNN.  Returns buf. */
const char *mm_printable(const char *s, size_t n, char *buf, size_t bufn);
int mm_rs_validate(eng_rs *rs, eng_validate *v);
int mm_rs_compact(eng_rs *rs, eng_txn *t, const eng_compact_opts *o, bson_t *info,
                  md_error *err);

/* ---- mm_index.c: sorted stores over mm_btree ----------------------------- */
int mm_ss_create(eng_engine *e, eng_txn *t, const char *ident, md_error *err);
int mm_ss_open(eng_engine *e, const char *ident, eng_ss **out, md_error *err);
void mm_ss_close(eng_ss *ss);
int mm_ss_drop(eng_engine *e, eng_txn *t, const char *ident);
int mm_ss_insert(eng_ss *ss, eng_txn *t, const uint8_t *key, uint32_t klen, eng_rid rid,
                 bool unique, eng_rid *dup_rid, md_error *err);
int mm_ss_remove(eng_ss *ss, eng_txn *t, const uint8_t *key, uint32_t klen, eng_rid rid);
int mm_ss_truncate(eng_ss *ss, eng_txn *t);
int64_t mm_ss_size(eng_ss *ss);
int64_t mm_ss_entries(eng_ss *ss);
int mm_ss_validate(eng_ss *ss, eng_validate *v);
int mm_ss_find(eng_ss *ss, const uint8_t *key, uint32_t klen, eng_rid *rid);
int mm_ss_cursor_open(eng_ss *ss, eng_ss_cursor **out);
int mm_ss_cursor_seek(eng_ss_cursor *c, const uint8_t *key, uint32_t klen, eng_rid rid);
int mm_ss_cursor_next(eng_ss_cursor *c);
int mm_ss_cursor_prev(eng_ss_cursor *c);
int mm_ss_cursor_get(eng_ss_cursor *c, const uint8_t **key, uint32_t *klen, eng_rid *rid);
void mm_ss_cursor_save(eng_ss_cursor *c);
int mm_ss_cursor_restore(eng_ss_cursor *c);
void mm_ss_cursor_close(eng_ss_cursor *c);

#endif /* MM_INT_H */
