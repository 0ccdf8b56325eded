/*
 * inspect.h -- the picture `minidoc inspect` draws, independent of the
 * engine: files made of regions (extents, records, pages, free space),
 * each at a byte offset, and per-structure summaries.  inspect_mm.c and
 * inspect_bt.c fill it by reading the data files read-only (open
 * O_RDONLY, pread; the database is not opened, no lock is taken, nothing
 * is written); inspect.c draws it as SVG or text and puts two side by
 * side (--diff).  Whatever cannot be read or does not check out becomes
 * a "damage" region at the offset where the reading stopped, with the
 * reason, and the rest of the file is still drawn.
 */
#ifndef INSPECT_H
#define INSPECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Region kinds; each is one SVG element class (the structural tests
 * count them). */
enum ins_kind {
    INS_EXTENT,   /* mmapv1 extent (header + space), owner in `owner` */
    INS_RECORD,   /* mmapv1 record: used = header + BSON, rest padding */
    INS_BUCKET,   /* mmapv1 record of an index (a B-tree bucket) or the catalog */
    INS_DELETED,  /* mmapv1 deleted record, `bucket` set */
    INS_FREE_EXT, /* mmapv1 extent on the file's free list */
    INS_UNUSED,   /* never allocated (mmapv1 file tail) */
    INS_HEADER,   /* file header (mmapv1 DataFileHeader, btree descriptor) */
    INS_LEAF,     /* btree leaf page (`level` 0) */
    INS_INTERNAL, /* btree internal page */
    INS_OVERFLOW, /* btree overflow block */
    INS_AVAIL,    /* btree free extent (avail list of the checkpoint) */
    INS_DAMAGE,   /* could not be read / did not check out */
    INS_NKINDS
};

extern const char *const ins_kind_name[INS_NKINDS];

typedef struct ins_region {
    uint64_t off, len;
    uint64_t used;    /* record: 16 + BSON length; page: image bytes */
    int kind;
    int level;        /* btree page level, 0 = leaf */
    int bucket;       /* mmapv1 deleted record bucket */
    int owner;        /* index into ins_file's owner names, -1 none */
    int64_t gen;      /* btree page write generation */
    uint32_t entries; /* btree page entries */
    bool moved;       /* --diff: a document at a new place since A */
    char *key;        /* record: hex of its _id element, for --diff */
    char *note;       /* damage: the reason */
} ins_region;

typedef struct ins_file {
    char *name;       /* file name in the directory */
    uint64_t size;
    ins_region *r;
    size_t n, cap;
    char **owners;    /* namespace / ident names */
    size_t nowners;
    char *summary;    /* text lines about this file (malloc'ed) */
} ins_file;

typedef struct ins_db {
    char *dir, *engine, *title;
    ins_file *f;
    size_t n, cap;
    char *summary;    /* database-level text */
    int damaged;      /* damage regions in all */
} ins_db;

/* Read the database in `dir` (engine: "mmapv1", "btree" or NULL to
 * detect; dbname for mmapv1's file names).  0, or -1 with a message
 * printed when nothing at all can be read (no such directory, no data
 * files).  Damage inside files is recorded, not an error. */
int ins_read(ins_db *db, const char *dir, const char *engine, const char *dbname);
int ins_read_mm(ins_db *db, const char *dir, const char *dbname);
int ins_read_bt(ins_db *db, const char *dir);
void ins_free(ins_db *db);

/* Building. */
ins_file *ins_add_file(ins_db *db, const char *name, uint64_t size);
ins_region *ins_add(ins_file *f, int kind, uint64_t off, uint64_t len);
int ins_owner(ins_file *f, const char *name);
void ins_damage(ins_db *db, ins_file *f, uint64_t off, uint64_t len, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Append printf text to a malloc'ed string. */
void ins_appendf(char **s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
