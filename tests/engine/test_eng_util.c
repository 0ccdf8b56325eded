/*
 * test_eng_util.c -- eng_bson_well_formed against libbson's own check, on
 * damaged copies of a document with every kind of element: whatever
 * bson_validate rejects, the walk must reject too (it exists because
 * bson_validate is too slow for reads).  The walk may be stricter: it also
 * refuses, say, an embedded document whose terminator is gone, which
 * bson_validate lets through.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "eng.h"

static bson_t *sample(void)
{
    bson_t *d = BCON_NEW("_id", BCON_INT32(7), "s", "héllo", "i64", BCON_INT64(1), "d",
                         BCON_DOUBLE(1.5), "b", BCON_BOOL(true), "n", BCON_NULL, "sub", "{",
                         "x", BCON_INT32(1), "arr", "[", BCON_INT32(1), BCON_UTF8("two"), "]",
                         "}", "dt", BCON_DATE_TIME(5));
    bson_oid_t oid;
    bson_oid_init_from_string(&oid, "5f1d7a2b9c0e4a3b2c1d0e0f");
    BSON_APPEND_OID(d, "oid", &oid);
    BSON_APPEND_BINARY(d, "bin", BSON_SUBTYPE_BINARY, (const uint8_t *)"abc", 3);
    BSON_APPEND_REGEX(d, "re", "^a.*", "i");
    BSON_APPEND_TIMESTAMP(d, "ts", 1, 2);
    BSON_APPEND_MINKEY(d, "min");
    BSON_APPEND_MAXKEY(d, "max");
    return d;
}

Test(eng_util, well_formed_is_at_least_as_strict_as_bson_validate)
{
    bson_t *d = sample();
    const uint8_t *src = bson_get_data(d);
    uint32_t len = d->len;
    uint8_t *buf = malloc(len);
    cr_assert(eng_bson_well_formed(src, len));
    srand(12345);
    int rejected = 0;
    for (int round = 0; round < 50000; round++) {
        memcpy(buf, src, len);
        for (int k = 1 + rand() % 3; k > 0; k--)
            buf[4 + rand() % (len - 5)] ^= (uint8_t)(1 + rand() % 255);
        bson_t b;
        bool lib = bson_init_static(&b, buf, len) && bson_validate(&b, BSON_VALIDATE_NONE, NULL);
        bool ours = eng_bson_well_formed(buf, len);
        cr_assert(lib || !ours, "round %d: bson_validate rejects what the walk accepts", round);
        rejected += !ours;
    }
    cr_assert_gt(rejected, 1000, "the damage should break the structure often");
    free(buf);
    bson_destroy(d);
}

Test(eng_util, well_formed_rejects_what_readers_trip_on)
{
    /* {"\xef\x17": true} with a key that is not UTF-8, and a bool of 2 */
    uint8_t bad_key[] = {11, 0, 0, 0, 0x08, 0xef, 0x17, 0, 1, 0, 0};
    uint8_t bad_bool[] = {9, 0, 0, 0, 0x08, 'b', 0, 2, 0};
    uint8_t good[] = {9, 0, 0, 0, 0x08, 'b', 0, 1, 0};
    cr_assert_not(eng_bson_well_formed(bad_key, sizeof bad_key));
    cr_assert_not(eng_bson_well_formed(bad_bool, sizeof bad_bool));
    cr_assert(eng_bson_well_formed(good, sizeof good));
    cr_assert_not(eng_bson_well_formed(good, sizeof good - 1));
}

/* The key scan reads eight bytes at a time: keys of every length up to
 * 24, with a byte that is not UTF-8 at each position (or none), in
 * documents ending right after the key's value or with elements after
 * it, are accepted exactly when they are valid; and the top-level notes
 * an insert takes from the same walk are right. */
Test(eng_util, key_scan_finds_every_nul_and_non_ascii_byte)
{
    for (int klen = 1; klen <= 24; klen++) {
        for (int bad = -1; bad < klen; bad++) {
            for (int tail = 0; tail < 2; tail++) {
                char key[32];
                memset(key, 'k', (size_t)klen);
                key[klen] = 0;
                if (bad >= 0)
                    key[bad] = (char)0xff; /* never valid in UTF-8 */
                uint8_t doc[128];
                uint32_t n = 4;
                doc[n++] = 0x08; /* bool */
                memcpy(doc + n, key, (size_t)klen + 1);
                n += (uint32_t)klen + 1;
                doc[n++] = 1;
                if (tail) { /* {_id: true} after it, and a $ name */
                    doc[n++] = 0x08;
                    memcpy(doc + n, "_id", 4);
                    n += 4;
                    doc[n++] = 0;
                    doc[n++] = 0x0A;
                    memcpy(doc + n, "$x", 3);
                    n += 3;
                }
                doc[n++] = 0;
                memcpy(doc, &n, 4);
                eng_bson_top top;
                bool ok = eng_bson_well_formed_top(doc, n, &top);
                cr_assert_eq(ok, bad < 0, "klen %d bad %d tail %d", klen, bad, tail);
                cr_assert_eq(eng_bson_well_formed(doc, n), ok);
                if (ok) {
                    cr_assert_not(top.id_first);
                    cr_assert_eq(top.nid, tail);
                    cr_assert(tail ? top.dollar && strcmp(top.dollar, "$x") == 0 : !top.dollar);
                }
                /* the key's NUL gone: the key runs into the document's end */
                doc[4 + 1 + klen] = 'z';
                cr_assert(tail || !eng_bson_well_formed(doc, n));
            }
        }
    }
    /* _id first */
    uint8_t idf[] = {14, 0, 0, 0, 0x10, '_', 'i', 'd', 0, 7, 0, 0, 0, 0};
    eng_bson_top top;
    cr_assert(eng_bson_well_formed_top(idf, sizeof idf, &top));
    cr_assert(top.id_first && top.nid == 1 && !top.dollar);
}
