/*
 * q_regex.h -- compiled regular expressions for the matcher (q_regex.c).
 * A q_regex is immutable once compiled and may be matched from several
 * threads at once (each match allocates its own match data).
 */
#ifndef Q_REGEX_H
#define Q_REGEX_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdbool.h>
#include <stdint.h>

#include "minidoc.h"

typedef pcre2_code q_regex;

/* Compile `pattern` (len bytes) with MongoDB flag letters `flags` (NULL =
 * none).  BadValue on an invalid, too long or NUL-containing pattern.
 * Caller owns *out (q_regex_free). */
int q_regex_compile(const char *pattern, uint32_t len, const char *flags, q_regex **out,
                    md_error *err);
/* Does the regex match somewhere in s[0..len)? */
bool q_regex_match(const q_regex *re, const char *s, uint32_t len);
void q_regex_free(q_regex *re);

#endif /* Q_REGEX_H */
