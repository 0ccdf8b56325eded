/*
 * peers_doc.h -- what bench/peers and bench/wire share: the fixed-seed
 * xorshift64* generator (every system sees the same sequence) and the
 * ~300-byte main-collection document (a user profile with an address and a
 * short bio; n is the counter the inc workload increments).  bench/wire.py
 * builds the same document in Python and checks that its BSON length is
 * the one bench/wire prints.
 */
#ifndef PEERS_DOC_H
#define PEERS_DOC_H

#include <stdint.h>
#include <stdio.h>

#include "minidoc.h"

/* xorshift64*: the same sequence for every system. */
static inline uint64_t rng_seed(uint64_t s) { return s * 0x9E3779B97F4A7C15ull + 1; }
static inline uint32_t rng_below(uint64_t *st, uint32_t n)
{
    *st ^= *st >> 12;
    *st ^= *st << 25;
    *st ^= *st >> 27;
    return (uint32_t)((*st * 0x2545F4914F6CDD1Dull) >> 32) % n;
}

/* The document with _id i (an int64), initialized into *d (the caller
 * destroys it). */
static inline void make_doc(bson_t *d, int64_t i)
{
    static const char *const cities[] = {"Paris",  "Berlin", "Madrid", "Rome",
                                         "Lisbon", "Vienna", "Prague", "Dublin"};
    static const char *const tags[] = {"sports", "music", "books", "travel", "food", "games"};
    char name[32], email[48], street[48];
    bson_t arr, addr;
    unsigned u = (unsigned)i;
    snprintf(name, sizeof name, "user%07lld", (long long)i);
    snprintf(email, sizeof email, "user%07lld@example.com", (long long)i);
    snprintf(street, sizeof street, "%u Rue de la Paix", u % 997 + 1);
    bson_init(d);
    BSON_APPEND_INT64(d, "_id", i);
    BSON_APPEND_INT32(d, "n", 0);
    BSON_APPEND_UTF8(d, "name", name);
    BSON_APPEND_UTF8(d, "email", email);
    BSON_APPEND_INT32(d, "age", 18 + (int)(u * 2654435761u % 60));
    BSON_APPEND_ARRAY_BEGIN(d, "tags", &arr);
    BSON_APPEND_UTF8(&arr, "0", tags[u % 6]);
    BSON_APPEND_UTF8(&arr, "1", tags[(u / 6) % 6]);
    bson_append_array_end(d, &arr);
    BSON_APPEND_DOCUMENT_BEGIN(d, "address", &addr);
    BSON_APPEND_UTF8(&addr, "street", street);
    BSON_APPEND_UTF8(&addr, "city", cities[u * 40503u % 8]);
    BSON_APPEND_UTF8(&addr, "zip", "75002");
    BSON_APPEND_UTF8(&addr, "country", "FR");
    bson_append_document_end(d, &addr);
    BSON_APPEND_DATE_TIME(d, "created", 1500000000000LL + (int64_t)i * 61000);
    BSON_APPEND_BOOL(d, "active", u % 3 != 0);
    BSON_APPEND_DOUBLE(d, "score", (double)(u * 7919u % 10000) / 100.0);
    BSON_APPEND_UTF8(d, "bio", "Writes software, reads history.");
}

#endif /* PEERS_DOC_H */
