/*
 * theater_int.h -- what the Theater pattern's library (theater.c: the
 * chapter's operations, expiry, invariants) shares with its scenario
 * (theater_sim.c: what the book's simulator ran), private to patterns/.
 */
#ifndef THEATER_INT_H
#define THEATER_INT_H

#include "patterns.h"

#define TH_CARTS "carts"
#define TH_SESSIONS "sessions"
#define TH_THEATERS "theaters"
#define TH_RECEIPTS "receipts"

/* One update (multi: updateMany) through the public API; *nmod (may be
 * NULL) gets modifiedCount. */
int th_update(md_db *db, const char *coll, const bson_t *q, const bson_t *u, bool multi,
              int64_t *nmod, md_error *err);
/* parent[key] = [[r, c], ...] for n seats. */
void th_append_seats(bson_t *parent, const char *key, const pt_seat *s, int n);
/* Parse the [[r, c], ...] array at arr_it into a malloc'ed array (the
 * caller frees *out); MD_ECORRUPT when it is not one, MD_ENOMEM. */
int th_parse_seats(const bson_iter_t *arr_it, pt_seat **out, int *n);
/* The number at a dotted path, or dflt. */
int64_t th_i64(const bson_t *doc, const char *path, int64_t dflt);
/* doc.seats: rows arrays of cols free seats (int32 0s). */
void th_append_plan(bson_t *doc, int rows, int cols);
/* Taking n seats, all or none: q.$and = [{"seats.r.c": 0}, ...] (each still
 * free) and u.$set = {"seats.r.c": 1, ...}. */
void th_append_take_seats(bson_t *q, bson_t *u, const pt_seat *seats, int n);

#endif
