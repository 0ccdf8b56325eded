/*
 * json_out.c -- relaxed extended JSON with the shortest exact doubles
 * (json_out.h says what and why).
 *
 * Documents and arrays are walked here; every value but a finite double is
 * printed by libbson itself (a one-field document {"": value} converted
 * and its wrapper cut off), so the text stays libbson's for all the types
 * minidoc does not mean to change.  Keys are escaped with libbson's
 * bson_utf8_escape_for_json(), as its own writer does.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_out.h"

int json_out_double(double d, char *buf, size_t cap)
{
    char e[40], dig[20];
    int prec = 1, n = 0, nd = 0;
    /* the fewest significant digits that read back to d */
    for (; prec < 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, d);
        if (strtod(e, NULL) == d)
            break;
    }
    snprintf(e, sizeof e, "%.*e", prec - 1, d);
    int exp10 = atoi(strchr(e, 'e') + 1);
    /* libbson's layout ("%.20g"): an exponent below 1e-4 and from 1e20 on */
    if (exp10 < -4 || exp10 >= 20) {
        n = snprintf(buf, cap, "%.*g", prec, d);
    } else {
        /* the digits of e ("-d.ddde+X"), placed around the point by hand:
         * "%.*f" would print digits past the 17th that are not d's */
        for (const char *p = e; *p && *p != 'e'; p++)
            if (*p >= '0' && *p <= '9')
                dig[nd++] = *p;
        while (nd > 1 && dig[nd - 1] == '0')
            nd--;
        char out[48];
        if (d < 0 || (d == 0 && signbit(d)))
            out[n++] = '-';
        if (exp10 < 0) {
            out[n++] = '0';
            out[n++] = '.';
            for (int i = -1; i > exp10; i--)
                out[n++] = '0';
            for (int i = 0; i < nd; i++)
                out[n++] = dig[i];
        } else {
            for (int i = 0; i <= exp10; i++)
                out[n++] = i < nd ? dig[i] : '0';
            if (nd > exp10 + 1) {
                out[n++] = '.';
                for (int i = exp10 + 1; i < nd; i++)
                    out[n++] = dig[i];
            }
        }
        out[n] = '\0';
        n = snprintf(buf, cap, "%s", out);
    }
    /* "1" or "-0" would read back as an integer: say it is a double */
    if (n > 0 && strspn(buf, "-0123456789") == (size_t)n && (size_t)n + 2 < cap) {
        memcpy(buf + n, ".0", 3);
        n += 2;
    }
    return n;
}

/* libbson's text for the value at `it` (no key, no wrapper). */
static bool append_libbson_value(bson_string_t *out, const bson_iter_t *it)
{
    static const char head[] = "{ \"\" : ";
    bson_t one = BSON_INITIALIZER;
    size_t len;
    bool ok = bson_append_iter(&one, "", 0, it);
    char *s = ok ? bson_as_relaxed_extended_json(&one, &len) : NULL;
    bson_destroy(&one);
    if (!s)
        return false;
    /* s is "{ "" : VALUE }" */
    size_t h = sizeof head - 1;
    ok = len >= h + 2 && memcmp(s, head, h) == 0 && memcmp(s + len - 2, " }", 2) == 0;
    if (ok) {
        s[len - 2] = '\0';
        bson_string_append(out, s + h);
    }
    bson_free(s);
    return ok;
}

static bool append_doc(bson_string_t *out, const bson_t *doc, bool array);

static bool append_value(bson_string_t *out, const bson_iter_t *it)
{
    char buf[40];
    if (BSON_ITER_HOLDS_DOUBLE(it) && isfinite(bson_iter_double(it))) {
        json_out_double(bson_iter_double(it), buf, sizeof buf);
        bson_string_append(out, buf);
        return true;
    }
    if (BSON_ITER_HOLDS_DOCUMENT(it) || BSON_ITER_HOLDS_ARRAY(it)) {
        const uint8_t *data;
        uint32_t len;
        bson_t sub;
        if (BSON_ITER_HOLDS_DOCUMENT(it))
            bson_iter_document(it, &len, &data);
        else
            bson_iter_array(it, &len, &data);
        if (!bson_init_static(&sub, data, len))
            return false;
        return append_doc(out, &sub, BSON_ITER_HOLDS_ARRAY(it));
    }
    return append_libbson_value(out, it);
}

/* libbson's layout: "{ "k" : v, "k2" : v2 }", "[ v, v2 ]", "{  }", "[  ]". */
static bool append_doc(bson_string_t *out, const bson_t *doc, bool array)
{
    bson_iter_t it;
    bool first = true;
    if (!bson_iter_init(&it, doc))
        return false;
    bson_string_append(out, array ? "[ " : "{ ");
    while (bson_iter_next(&it)) {
        if (!first)
            bson_string_append(out, ", ");
        first = false;
        if (!array) {
            char *key = bson_utf8_escape_for_json(bson_iter_key(&it), -1);
            if (!key)
                return false;
            bson_string_append_printf(out, "\"%s\" : ", key);
            bson_free(key);
        }
        if (!append_value(out, &it))
            return false;
    }
    if (it.err_off) /* bson_iter_next stopped at damaged bytes */
        return false;
    bson_string_append(out, array ? " ]" : " }");
    return true;
}

char *json_out_relaxed(const bson_t *doc, size_t *len)
{
    bson_string_t *out = bson_string_new(NULL);
    if (!append_doc(out, doc, false)) {
        bson_string_free(out, true);
        return NULL;
    }
    if (len)
        *len = out->len;
    return bson_string_free(out, false);
}
