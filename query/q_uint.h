/*
 * q_uint.h -- private to the update files (q_update.c, q_update_fast.c):
 * the parsed update tree and the state of one application.
 */
#ifndef Q_UINT_H
#define Q_UINT_H

#include "q.h"
#include "q_path.h"
#include "q_uarr.h"

#define Q_DAMAGE_GAP 8 /* equal bytes that still join two changed ranges */
/* An update may pad an array with at most this many nulls to reach the
 * index it names ("a.5000000" on a short array): CannotBackfillArray (34),
 * as MongoDB's kMaxPaddingAllowed. */
#define Q_MAX_ARRAY_PADDING 1500000u
#define Q_CODE_CANNOT_BACKFILL_ARRAY 34

typedef enum q_uop {
    QU_SET, QU_UNSET, QU_INC, QU_MUL, QU_MIN, QU_MAX, QU_SET_ON_INSERT,
    QU_CURRENT_DATE, QU_RENAME_SRC, QU_RENAME_DST,
    QU_PUSH, QU_ADD_TO_SET, QU_POP, QU_PULL, QU_PULL_ALL, QU_BIT,
} q_uop;

typedef struct q_unode q_unode;
struct q_unode {
    char *name;          /* path component; "$" for the positional child */
    char *full;          /* dotted path up to and including this component */
    bool leaf;
    q_uop op;
    bson_iter_t arg;     /* leaf argument, into q_update.doc */
    bool timestamp;      /* $currentDate {$type: "timestamp"} */
    size_t rename;       /* QU_RENAME_*: index into q_update.rename */
    q_uarr *arr;         /* QU_PUSH .. QU_PULL_ALL */
    q_unode **kid;       /* sorted by strcmp of name */
    size_t nkid, capkid;
    q_unode *positional; /* the "$" child */
    q_unode **af;        /* the "$[]" and "$[id]" children */
    size_t naf;
};

typedef struct q_rename {
    q_path from;
    const char *from_dotted;
} q_rename;

/* Everything of a parsed update but its array-operator state, array
 * filters and $rename sources lives in its arena (q_arena.c), the q_update
 * itself included: q_update_destroy releases it at once. */
struct q_update {
    q_arena arena;
    bson_t *doc; /* a static view of the arena's copy of the update */
    q_afilter *af;
    size_t naf;
    bool replacement;
    bool nocache; /* q_update_acquire(cache: false): q_update_release destroys it */
    uint64_t serial; /* unique in the process, never reused (q_update_new_af) */
    q_unode *root;
    q_rename *rename;
    size_t nrename, caprename;
};

typedef struct q_rstate {
    bool found;
    bson_iter_t val; /* the source value, in the old document */
} q_rstate;

typedef struct q_uctx {
    const q_update *u;
    bool inserting;
    const char *pos;        /* what "$" stands for, or NULL */
    bool has_id;
    bson_iter_t id;         /* the old document's _id */
    q_rstate *rs;           /* per $rename */
    const char *array_name; /* field name of the nearest enclosing array */
    md_error *err;
} q_uctx;

/* A leaf applied to an existing element e, written as `key` into dst
 * (q_update.c). */
int q_uleaf_existing(q_uctx *c, const q_unode *n, const bson_iter_t *e, const char *key,
                     q_buf *dst, bool in_array);

#endif /* Q_UINT_H */
