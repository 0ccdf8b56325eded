/*
 * q_regex.c -- regular expressions for filters ($regex/$options and BSON
 * regex literals), over PCRE2 as MongoDB uses PCRE.
 *
 * A pattern is compiled once, when the matcher node is parsed, with the
 * flags MongoDB 3.6 honours: i (caseless), m (multiline), s (dotall),
 * x (extended); other flag letters are ignored, as 3.6's flags2options did.
 * Patterns are UTF-8 (PCRE2_UTF).  An invalid pattern is BadValue (2)
 * "Regular expression is invalid: <PCRE's message>" (MongoDB 4.0 says the
 * same text with code 51091; we keep to BadValue, one code for every filter
 * argument error).  Matching a subject that is not valid UTF-8 never matches.
 */
#include <string.h>

#include "q_regex.h"

#define Q_REGEX_MAX_LEN 32764 /* RegexMatchExpression::kMaxPatternSize */

int q_regex_compile(const char *pattern, uint32_t len, const char *flags, q_regex **out,
                    md_error *err)
{
    uint32_t opts = PCRE2_UTF;
    int ec;
    PCRE2_SIZE eo;
    *out = NULL;
    if (len > Q_REGEX_MAX_LEN)
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE, "Regular expression is too long");
    if (memchr(pattern, '\0', len))
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                            "Regular expression cannot contain an embedded null byte");
    for (const char *f = flags ? flags : ""; *f; f++) {
        switch (*f) {
        case 'i': opts |= PCRE2_CASELESS; break;
        case 'm': opts |= PCRE2_MULTILINE; break;
        case 's': opts |= PCRE2_DOTALL; break;
        case 'x': opts |= PCRE2_EXTENDED; break;
        default: break;
        }
    }
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, len, opts, &ec, &eo, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ec, msg, sizeof msg);
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                            "Regular expression is invalid: %s", (const char *)msg);
    }
    *out = re;
    return 0;
}

bool q_regex_match(const q_regex *re, const char *s, uint32_t len)
{
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    if (!md)
        return false;
    int rc = pcre2_match(re, (PCRE2_SPTR)s, len, 0, 0, md, NULL);
    pcre2_match_data_free(md);
    return rc >= 0;
}

void q_regex_free(q_regex *re)
{
    pcre2_code_free(re);
}
