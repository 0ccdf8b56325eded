/*
 * json_out.h -- relaxed extended JSON with the shortest exact doubles.
 *
 * libbson's writer prints a double with 20 significant digits (2.3 comes
 * out as 2.2999999999999998224).  MongoDB's tools print the shortest text
 * that reads back to the same double; json_out_relaxed() does that and is
 * otherwise libbson's bson_as_relaxed_extended_json() text, byte for byte:
 * same spacing, same wrappers for every other type.  Doubles:
 *
 *   finite      the fewest significant digits that strtod() reads back to
 *               the same bits, laid out as libbson lays them out (plain
 *               from 1e-4 up to 1e20, an exponent outside), with ".0" when
 *               the text would read as an integer (2.3, 1.0, -0.0,
 *               100000.0, 0.0001234, 1e+20, 5e-324)
 *   inf, NaN    libbson's (and MongoDB's canonical) spelling:
 *               { "$numberDouble" : "Infinity" }, "-Infinity", "NaN"
 *
 * An exponent is C's spelling (1e+21); MongoDB's Go tools may spell and
 * place it differently (1E+21), which reads back to the same double.
 */
#ifndef JSON_OUT_H
#define JSON_OUT_H

#include <bson/bson.h>
#include <stddef.h>

/* The relaxed extended JSON of `doc`, or NULL if libbson cannot print some
 * value in it (e.g. invalid UTF-8).  Caller frees with bson_free(). */
char *json_out_relaxed(const bson_t *doc, size_t *len);

/* The text json_out_relaxed() writes for the finite double `d`, in `buf`
 * (at least 32 bytes).  Returns its length. */
int json_out_double(double d, char *buf, size_t cap);

#endif
