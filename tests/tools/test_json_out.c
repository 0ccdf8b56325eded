/*
 * test_json_out.c -- tools/json_out.c: the CLI's JSON writer.
 *
 * Doubles come out as the shortest text that reads back to the same bits:
 * fixed examples (2.3, 1.0, -0.0, 0.1, 1e+300, the smallest subnormal), a
 * round trip through libbson's own JSON parser over random bit patterns
 * (every exponent, subnormals included), random subnormals, random short
 * decimals, ±0, ±inf and NaN, and a check that one digit fewer would not
 * read back.  Every other value prints exactly as libbson prints it.
 */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../tools/json_out.h"

static char *one(double d)
{
    bson_t *b = BCON_NEW("x", BCON_DOUBLE(d));
    char *s = json_out_relaxed(b, NULL);
    bson_destroy(b);
    cr_assert_not_null(s);
    return s;
}

static void expect_text(double d, const char *want)
{
    char *s = one(d);
    char full[128];
    snprintf(full, sizeof full, "{ \"x\" : %s }", want);
    cr_expect_str_eq(s, full, "%.17g printed as %s", d, s);
    bson_free(s);
}

Test(json_out, shortest_examples)
{
    expect_text(2.3, "2.3");
    expect_text(0.1, "0.1");
    expect_text(1.0, "1.0");
    expect_text(-2.0, "-2.0");
    expect_text(0.0, "0.0");
    expect_text(-0.0, "-0.0");
    expect_text(100000.0, "100000.0");
    expect_text(1e300, "1e+300");
    expect_text(1e21, "1e+21");
    expect_text(1e20, "1e+20");
    expect_text(1e19, "10000000000000000000.0");
    expect_text(123456789012.0, "123456789012.0");
    expect_text(0.0001234, "0.0001234");
    expect_text(0.00001234, "1.234e-05");
    expect_text(-1.5e-7, "-1.5e-07");
    expect_text(5e-324, "5e-324");
    expect_text(DBL_MAX, "1.7976931348623157e+308");
    expect_text(DBL_MIN, "2.2250738585072014e-308");
    expect_text(1.0 / 3.0, "0.3333333333333333");
    expect_text(INFINITY, "{ \"$numberDouble\" : \"Infinity\" }");
    expect_text(-INFINITY, "{ \"$numberDouble\" : \"-Infinity\" }");
    expect_text(NAN, "{ \"$numberDouble\" : \"NaN\" }");
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    /* splitmix64: a fixed seed, so a failure repeats */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double from_bits(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* d written by json_out, read back by libbson's parser: the same double. */
static void round_trip(double d)
{
    char *s = one(d);
    bson_error_t err;
    bson_t *b = bson_new_from_json((const uint8_t *)s, -1, &err);
    cr_assert_not_null(b, "libbson cannot read back %s: %s", s, err.message);
    bson_iter_t it;
    cr_assert(bson_iter_init_find(&it, b, "x"));
    cr_assert(BSON_ITER_HOLDS_DOUBLE(&it), "%s did not read back as a double", s);
    double back = bson_iter_double(&it);
    if (isnan(d)) {
        cr_assert(isnan(back), "%s", s);
    } else {
        cr_assert(memcmp(&back, &d, sizeof d) == 0, "%.17g -> %s -> %.17g", d, s, back);
    }
    bson_destroy(b);
    bson_free(s);
}

/* No shorter text reads back: one significant digit fewer differs. */
static void shortest(double d)
{
    char buf[40], fewer[40];
    if (!isfinite(d) || d == 0)
        return;
    json_out_double(d, buf, sizeof buf);
    /* the significant digits: before the exponent, without the point and
     * without leading or trailing zeros (250140.0 has 5, 0.0001234 has 4) */
    char sig[40];
    int n = 0;
    for (const char *p = buf; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9')
            sig[n++] = *p;
    sig[n] = '\0';
    while (n > 0 && sig[n - 1] == '0')
        sig[--n] = '\0';
    int digits = n - (int)strspn(sig, "0");
    cr_assert(digits >= 1 && digits <= 17, "%s: %d digits", buf, digits);
    if (digits == 1)
        return;
    snprintf(fewer, sizeof fewer, "%.*e", digits - 2, d);
    cr_assert(strtod(fewer, NULL) != d, "%s is not the shortest: %s reads back too", buf, fewer);
}

Test(json_out, round_trip_random_bits)
{
    for (int i = 0; i < 100000; i++) {
        double d = from_bits(rnd());
        round_trip(d);
        shortest(d);
    }
}

Test(json_out, round_trip_subnormals)
{
    for (int i = 0; i < 50000; i++) {
        uint64_t u = rnd() & ((1ull << 52) - 1); /* exponent 0 */
        if (i & 1)
            u |= 1ull << 63;
        double d = from_bits(u);
        cr_assert(d == 0 || fpclassify(d) == FP_SUBNORMAL);
        round_trip(d);
        shortest(d);
    }
    round_trip(from_bits(1));                     /* 5e-324 */
    round_trip(from_bits((1ull << 52) - 1));      /* the largest subnormal */
}

Test(json_out, round_trip_decimals)
{
    /* numbers people type: a few digits, a decimal point somewhere */
    for (int i = 0; i < 50000; i++) {
        double d = (double)(int64_t)(rnd() % 2000001 - 1000000) / pow(10, (int)(rnd() % 12));
        round_trip(d);
        shortest(d);
        char buf[40];
        json_out_double(d, buf, sizeof buf);
        cr_assert(strlen(buf) <= 16, "%.17g printed as %s", d, buf);
    }
}

Test(json_out, round_trip_specials)
{
    const double v[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, -NAN, DBL_MAX, -DBL_MAX, DBL_MIN,
                        DBL_EPSILON, 1.0, -1.0, 9007199254740993.0, 0.1 + 0.2};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        round_trip(v[i]);
    char *s = one(-0.0);
    cr_assert_str_eq(s, "{ \"x\" : -0.0 }");
    bson_free(s);
}

/* Every value that is not a finite double: libbson's text, byte for byte. */
Test(json_out, other_types_as_libbson)
{
    bson_oid_t oid;
    bson_decimal128_t dec;
    bson_oid_init_from_string(&oid, "5f0c8f1e2a3b4c5d6e7f8091");
    bson_decimal128_from_string("1.10", &dec);
    bson_t *b = BCON_NEW(
        "s", "tab\there \"quoted\" \\ é", "i", BCON_INT32(-7), "l", BCON_INT64(1LL << 40), "t",
        BCON_BOOL(true), "n", BCON_NULL, "o", BCON_OID(&oid), "d", BCON_DATE_TIME(1500000000000LL),
        "re", BCON_REGEX("^a.*", "i"), "ts", BCON_TIMESTAMP(5, 6), "dec", BCON_DECIMAL128(&dec),
        "bin", BCON_BIN(BSON_SUBTYPE_BINARY, (const uint8_t *)"abc", 3), "min", BCON_MINKEY,
        "max", BCON_MAXKEY, "code", BCON_CODE("function(){}"), "ke\"y", BCON_INT32(1), "emptyd",
        "{", "}", "emptya", "[", "]", "nested", "{", "a", "[", BCON_INT32(1), "{", "b",
        BCON_UTF8("c"), "}", "[", "]", "]", "}", "inf", BCON_DOUBLE(INFINITY), "nan",
        BCON_DOUBLE(NAN));
    char *mine = json_out_relaxed(b, NULL);
    char *theirs = bson_as_relaxed_extended_json(b, NULL);
    cr_assert_not_null(mine);
    cr_assert_str_eq(mine, theirs);
    bson_free(mine);
    bson_free(theirs);
    bson_destroy(b);
}

Test(json_out, doubles_inside_documents)
{
    bson_t *b = BCON_NEW("ok", BCON_DOUBLE(1), "a", "[", BCON_DOUBLE(2.3), "{", "b",
                         BCON_DOUBLE(0.1), "}", "]");
    char *s = json_out_relaxed(b, NULL);
    cr_assert_str_eq(s, "{ \"ok\" : 1.0, \"a\" : [ 2.3, { \"b\" : 0.1 } ] }");
    bson_free(s);
    bson_destroy(b);
}

Test(json_out, damaged_bson_is_null)
{
    /* a document whose string claims more bytes than there are */
    static const uint8_t bad[] = {0x13, 0, 0, 0, 0x02, 's', 0, 0x40, 0, 0, 0,
                                  'a', 'b', 'c', 0, 0x10, 'i', 0, 1};
    bson_t b;
    uint8_t buf[sizeof bad + 1];
    memcpy(buf, bad, sizeof bad);
    buf[sizeof bad] = 0;
    buf[0] = sizeof buf;
    cr_assert(bson_init_static(&b, buf, sizeof buf));
    cr_assert_null(json_out_relaxed(&b, NULL));
}
