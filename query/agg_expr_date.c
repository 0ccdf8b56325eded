/*
 * agg_expr_date.c -- date expressions of MongoDB 4.0: $year $month
 * $dayOfMonth $hour $minute $second $millisecond $dayOfWeek $dayOfYear
 * $week $isoWeek $isoWeekYear $isoDayOfWeek (each {$op: <date>} or
 * {$op: {date, timezone}}), $dateToString (every 4.0 specifier: %d %G %H
 * %j %L %m %M %S %u %U %V %w %Y %z %Z %%), $dateFromString (with format),
 * $dateFromParts (calendar and ISO week forms, out-of-range parts carried
 * as MongoDB does) and $dateToParts.  Time zones come from agg_tz.c.
 *
 * Deviation: without a format, $dateFromString (and $toDate of a string)
 * reads ISO 8601 forms only ("2017-02-08", "2017-02-08T12:10:40.787Z",
 * "2017-02-08 12:10:40+05:30", ...); MongoDB's timelib also reads English
 * forms such as "Feb 8, 2017".
 */
#include <stdio.h>
#include <string.h>

#include "agg_expr_int.h"

#define MS_PER_DAY 86400000LL

/* ---- broken-down local time ------------------------------------------------------ */

typedef struct agg_tm {
    int64_t year;
    int month, day, hour, minute, second, millis;
    int wday; /* 0 Sunday */
    int yday; /* 0 based */
    int64_t days; /* local day number */
    int32_t offset; /* seconds east of UTC */
} agg_tm;

static int64_t fdiv(int64_t a, int64_t b)
{
    return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

static void to_tm(int64_t ms, const agg_tz *tz, agg_tm *t)
{
    t->offset = agg_tz_offset(tz, ms);
    int64_t local = ms + (int64_t)t->offset * 1000;
    int64_t days = fdiv(local, MS_PER_DAY), rem = local - days * MS_PER_DAY;
    t->days = days;
    agg_civil_from_days(days, &t->year, &t->month, &t->day);
    t->hour = (int)(rem / 3600000);
    t->minute = (int)(rem / 60000 % 60);
    t->second = (int)(rem / 1000 % 60);
    t->millis = (int)(rem % 1000);
    int64_t w = (days + 4) % 7;
    t->wday = (int)(w < 0 ? w + 7 : w);
    t->yday = (int)(days - agg_days_from_civil(t->year, 1, 1));
}

/* ISO 8601 week-numbering year, week (1..53) and day (1 Monday .. 7). */
static void iso_week(const agg_tm *t, int64_t *iy, int *iw, int *id)
{
    *id = t->wday == 0 ? 7 : t->wday;
    int64_t thursday = t->days - (*id - 1) + 3; /* the Thursday of this week */
    int64_t y;
    int m, d;
    agg_civil_from_days(thursday, &y, &m, &d);
    *iy = y;
    *iw = (int)((thursday - agg_days_from_civil(y, 1, 1)) / 7 + 1);
}

/* %U: week of the year, weeks starting on Sunday, days before the first
 * Sunday in week 0. */
static int week_u(const agg_tm *t)
{
    return (t->yday + 7 - t->wday) / 7;
}

/* Value::coerceToDate. */
static int coerce_date(const bson_value_t *v, int64_t *ms, md_error *err)
{
    switch (v->value_type) {
    case BSON_TYPE_DATE_TIME: *ms = v->value.v_datetime; return 0;
    case BSON_TYPE_TIMESTAMP: *ms = (int64_t)v->value.v_timestamp.timestamp * 1000; return 0;
    case BSON_TYPE_OID: *ms = (int64_t)bson_oid_get_time_t(&v->value.v_oid) * 1000; return 0;
    default:
        return agg_err(err, 16006, "can't convert from BSON type %s to Date", agg_type_name(v));
    }
}

/* makeTimeZone: kid i (NULL: UTC); *tz NULL when the timezone is nullish. */
static int eval_tz(const agg_expr *e, size_t i, agg_vars *vars, const agg_tz **tz,
                   md_error *err)
{
    bson_value_t v;
    *tz = agg_tz_utc();
    if (i >= e->nkid || !e->kid[i])
        return 0;
    int rc = agg_eval_kid(e, i, vars, &v, err);
    if (rc)
        return rc;
    if (agg_nullish(&v))
        *tz = NULL;
    else if (v.value_type != BSON_TYPE_UTF8)
        rc = agg_err(err, 40517, "timezone must evaluate to a string, found %s",
                     agg_type_name(&v));
    else
        rc = agg_tz_get(v.value.v_utf8.str, v.value.v_utf8.len, tz, err);
    agg_value_destroy(&v);
    return rc;
}

/* ---- $year and the other parts ------------------------------------------------------- */

/* {$op: <date>}, {$op: [<date>]} or {$op: {date, timezone}}: kid[0] date,
 * kid[1] timezone (NULL: UTC). */
static int part_parse(agg_expr *e, const bson_iter_t *arg, agg_scope *s, md_error *err)
{
    const char *op = e->op->name;
    bson_iter_t x, one;
    agg_expr *kid;
    int rc;
    if (BSON_ITER_HOLDS_DOCUMENT(arg)) {
        bson_iter_recurse(arg, &x);
        if (bson_iter_next(&x) && bson_iter_key(&x)[0] == '$') {
            if ((rc = agg_expr_parse(arg, s, &kid, err)))
                return rc;
            agg_node_add(e, kid);
            agg_node_add(e, NULL);
            return 0;
        }
        static const char *const names[2] = {"date", "timezone"};
        if ((rc = agg_parse_named(e, arg, s, names, 2, 40535,
                                  "unrecognized option to %s: \"%s\"", err)))
            return rc;
        if (!e->kid[0])
            return agg_err(err, 40539, "missing 'date' argument to %s", op);
        return 0;
    }
    if (BSON_ITER_HOLDS_ARRAY(arg)) {
        size_t n = 0;
        bson_iter_recurse(arg, &x);
        while (bson_iter_next(&x)) {
            if (n == 0)
                one = x;
            n++;
        }
        if (n != 1)
            return agg_err(err, 40536,
                           "%s accepts exactly one argument if given an array, but was given %zu",
                           op, n);
        arg = &one;
    }
    if ((rc = agg_expr_parse(arg, s, &kid, err)))
        return rc;
    agg_node_add(e, kid);
    agg_node_add(e, NULL);
    return 0;
}

enum {
    P_YEAR, P_MONTH, P_DAY, P_HOUR, P_MINUTE, P_SECOND, P_MILLIS, P_WDAY, P_YDAY, P_WEEK,
    P_ISOWEEK, P_ISOYEAR, P_ISODAY,
};

static int part_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err,
                     int part)
{
    bson_value_t v;
    const agg_tz *tz;
    int64_t ms;
    int rc = agg_eval_kid(e, 0, vars, &v, err);
    if (rc)
        return rc;
    if (agg_nullish(&v)) {
        agg_set_null(out);
        return 0;
    }
    if ((rc = eval_tz(e, 1, vars, &tz, err)))
        goto out;
    if (!tz) {
        agg_set_null(out);
        goto out;
    }
    if ((rc = coerce_date(&v, &ms, err)))
        goto out;
    agg_tm t;
    int64_t iy;
    int iw, id;
    to_tm(ms, tz, &t);
    iso_week(&t, &iy, &iw, &id);
    switch (part) {
    case P_YEAR: agg_set_int32(out, (int32_t)t.year); break;
    case P_MONTH: agg_set_int32(out, t.month); break;
    case P_DAY: agg_set_int32(out, t.day); break;
    case P_HOUR: agg_set_int32(out, t.hour); break;
    case P_MINUTE: agg_set_int32(out, t.minute); break;
    case P_SECOND: agg_set_int32(out, t.second); break;
    case P_MILLIS: agg_set_int32(out, t.millis); break;
    case P_WDAY: agg_set_int32(out, t.wday + 1); break;
    case P_YDAY: agg_set_int32(out, t.yday + 1); break;
    case P_WEEK: agg_set_int32(out, week_u(&t)); break;
    case P_ISOWEEK: agg_set_int32(out, iw); break;
    case P_ISOYEAR: agg_set_int64(out, iy); break;
    default: agg_set_int32(out, id); break;
    }
out:
    agg_value_destroy(&v);
    return rc;
}

#define PART_FN(fn, part)                                                                 \
    static int fn(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)    \
    {                                                                                     \
        return part_eval(e, vars, out, err, part);                                        \
    }
PART_FN(year_eval, P_YEAR)
PART_FN(month_eval, P_MONTH)
PART_FN(day_eval, P_DAY)
PART_FN(hour_eval, P_HOUR)
PART_FN(minute_eval, P_MINUTE)
PART_FN(second_eval, P_SECOND)
PART_FN(millis_eval, P_MILLIS)
PART_FN(wday_eval, P_WDAY)
PART_FN(yday_eval, P_YDAY)
PART_FN(week_eval, P_WEEK)
PART_FN(isoweek_eval, P_ISOWEEK)
PART_FN(isoyear_eval, P_ISOYEAR)
PART_FN(isoday_eval, P_ISODAY)

/* ---- $dateToString --------------------------------------------------------------------- */

/* TimeZone::validateToStringFormat. */
static int format_check(const char *f, size_t n, md_error *err)
{
    for (size_t i = 0; i < n; i++) {
        if (f[i] != '%')
            continue;
        if (i + 1 == n)
            return agg_err(err, 18535, "Unmatched '%%' at end of format string");
        if (!strchr("dGHjLmMSuUVwYzZ%", f[i + 1]) || f[i + 1] == '\0')
            return agg_err(err, 18536, "Invalid format character '%%%c' in format string",
                           f[i + 1]);
        i++;
    }
    return 0;
}

static void pad(q_buf *b, int64_t v, int width)
{
    q_buf_printf(b, "%0*" PRId64, width, v);
}

/* TimeZone::formatDate. */
static int format_date(const char *f, size_t n, int64_t ms, const agg_tz *tz, q_buf *b,
                       md_error *err)
{
    agg_tm t;
    int64_t iy;
    int iw, id;
    to_tm(ms, tz, &t);
    iso_week(&t, &iy, &iw, &id);
    for (size_t i = 0; i < n; i++) {
        if (f[i] != '%') {
            q_buf_putc(b, (uint8_t)f[i]);
            continue;
        }
        switch (f[++i]) {
        case 'd': pad(b, t.day, 2); break;
        case 'G':
            if (iy < 0 || iy > 9999)
                return agg_err(err, 18537,
                               "$dateToString is only defined on year 0-9999, tried to use "
                               "year %" PRId64,
                               iy);
            pad(b, iy, 4);
            break;
        case 'H': pad(b, t.hour, 2); break;
        case 'j': pad(b, t.yday + 1, 3); break;
        case 'L': pad(b, t.millis, 3); break;
        case 'm': pad(b, t.month, 2); break;
        case 'M': pad(b, t.minute, 2); break;
        case 'S': pad(b, t.second, 2); break;
        case 'u': q_buf_printf(b, "%d", id); break;
        case 'U': pad(b, week_u(&t), 2); break;
        case 'V': pad(b, iw, 2); break;
        case 'w': q_buf_printf(b, "%d", t.wday + 1); break;
        case 'Y':
            if (t.year < 0 || t.year > 9999)
                return agg_err(err, 18537,
                               "$dateToString is only defined on year 0-9999, tried to use "
                               "year %" PRId64,
                               t.year);
            pad(b, t.year, 4);
            break;
        case 'z': {
            int32_t o = t.offset < 0 ? -t.offset : t.offset;
            q_buf_putc(b, t.offset < 0 ? '-' : '+');
            pad(b, o / 3600, 2);
            pad(b, o / 60 % 60, 2);
            break;
        }
        case 'Z': q_buf_printf(b, "%d", t.offset / 60); break;
        default: q_buf_putc(b, '%'); break;
        }
    }
    return 0;
}

void agg_format_iso_date(int64_t ms, q_buf *b)
{
    static const char iso[] = "%Y-%m-%dT%H:%M:%S.%LZ";
    if (format_date(iso, sizeof iso - 1, ms, agg_tz_utc(), b, NULL))
        q_buf_printf(b, "%" PRId64, ms); /* a year outside 0-9999 */
}

static const char *const to_string_args[] = {"date", "format", "timezone", "onNull"};

static int to_string_parse(agg_expr *e, const bson_iter_t *arg, agg_scope *s, md_error *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(arg))
        return agg_err(err, 18629, "$dateToString only supports an object as its argument");
    int rc = agg_parse_named(e, arg, s, to_string_args, 4, 18534, "Unrecognized argument to %s: %s", err);
    if (!rc && !e->kid[0])
        rc = agg_err(err, 18628, "Missing 'date' parameter to $dateToString");
    return rc;
}

static int to_string_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    bson_value_t date, fmt;
    const agg_tz *tz;
    int64_t ms;
    q_buf b;
    int rc = agg_eval_kid(e, 0, vars, &date, err);
    if (rc)
        return rc;
    agg_set_missing(&fmt);
    q_buf_init(&b);
    if (e->kid[1]) {
        if ((rc = agg_eval_kid(e, 1, vars, &fmt, err)))
            goto out;
        if (!agg_nullish(&fmt)) {
            if (fmt.value_type != BSON_TYPE_UTF8) {
                agg_value_render(&b, &fmt);
                rc = agg_err(err, 18533,
                             "$dateToString requires that 'format' be a string, found: %s with "
                             "value %s",
                             agg_type_name(&fmt), q_buf_cstr(&b));
                goto out;
            }
            if ((rc = format_check(fmt.value.v_utf8.str, fmt.value.v_utf8.len, err)))
                goto out;
        }
    }
    if (agg_nullish(&date)) {
        if (e->kid[3])
            rc = agg_eval_kid(e, 3, vars, out, err);
        else
            agg_set_null(out);
        goto out;
    }
    if ((rc = eval_tz(e, 2, vars, &tz, err)))
        goto out;
    if (!tz || (e->kid[1] && agg_nullish(&fmt))) {
        agg_set_null(out);
        goto out;
    }
    if ((rc = coerce_date(&date, &ms, err)))
        goto out;
    if (e->kid[1])
        rc = format_date(fmt.value.v_utf8.str, fmt.value.v_utf8.len, ms, tz, &b, err);
    else
        rc = format_date("%Y-%m-%dT%H:%M:%S.%LZ", 21, ms, tz, &b, err);
    if (!rc)
        agg_set_utf8(out, (const char *)b.data, b.len);
out:
    q_buf_cleanup(&b);
    agg_value_destroy(&date);
    agg_value_destroy(&fmt);
    return rc;
}

/* ---- parsing date strings ------------------------------------------------------------- */

static bool digits(const char *s, size_t n, size_t *i, int want, int64_t *out)
{
    int64_t v = 0;
    int k = 0;
    while (*i < n && k < want && s[*i] >= '0' && s[*i] <= '9') {
        v = v * 10 + (s[*i] - '0');
        (*i)++;
        k++;
    }
    *out = v;
    return k == want;
}

/* "+hh:mm", "+hhmm", "+hh", "Z" at s[*i]: seconds east of UTC. */
static bool parse_offset(const char *s, size_t n, size_t *i, int32_t *off)
{
    int64_t h, m = 0;
    if (*i < n && s[*i] == 'Z') {
        (*i)++;
        *off = 0;
        return true;
    }
    if (*i >= n || (s[*i] != '+' && s[*i] != '-'))
        return false;
    int sign = s[(*i)++] == '-' ? -1 : 1;
    if (!digits(s, n, i, 2, &h))
        return false;
    if (*i < n && s[*i] == ':')
        (*i)++;
    if (*i < n && s[*i] >= '0' && s[*i] <= '9' && !digits(s, n, i, 2, &m))
        return false;
    *off = sign * (int32_t)(h * 3600 + m * 60);
    return true;
}

static bool valid_ymd(int64_t y, int64_t m, int64_t d)
{
    static const int mdays[12] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (m < 1 || m > 12 || d < 1 || d > mdays[m - 1])
        return false;
    return m != 2 || d < 29 || (y % 4 == 0 && (y % 100 != 0 || y % 400 == 0));
}

/* Local parts and an optional offset -> UTC ms (tz when no offset). */
static int64_t assemble(int64_t days, int64_t h, int64_t mi, int64_t sec, int64_t ms,
                        bool has_off, int32_t off, const agg_tz *tz)
{
    int64_t local = days * MS_PER_DAY + h * 3600000 + mi * 60000 + sec * 1000 + ms;
    if (has_off)
        return local - (int64_t)off * 1000;
    return agg_tz_to_utc(tz ? tz : agg_tz_utc(), local);
}

bool agg_date_parse(const char *s, size_t n, const agg_tz *tz, int64_t *out, bool *has_zone,
                    char *why, size_t whylen)
{
    size_t i = 0;
    int64_t y, m, d, h = 0, mi = 0, sec = 0, ms = 0;
    int32_t off = 0;
    bool has_off = false;
    if (has_zone)
        *has_zone = false;
    if (!digits(s, n, &i, 4, &y) || i >= n || s[i++] != '-' || !digits(s, n, &i, 2, &m) ||
        i >= n || s[i++] != '-' || !digits(s, n, &i, 2, &d)) {
        snprintf(why, whylen, "the date is not in ISO 8601 form (YYYY-MM-DD)");
        return false;
    }
    if (!valid_ymd(y, m, d)) {
        snprintf(why, whylen, "The parsed date was invalid");
        return false;
    }
    if (i < n && (s[i] == 'T' || s[i] == ' ')) {
        i++;
        if (!digits(s, n, &i, 2, &h) || i >= n || s[i++] != ':' || !digits(s, n, &i, 2, &mi)) {
            snprintf(why, whylen, "the time is not in hh:mm form");
            return false;
        }
        if (i < n && s[i] == ':') {
            i++;
            if (!digits(s, n, &i, 2, &sec)) {
                snprintf(why, whylen, "the seconds are not two digits");
                return false;
            }
            if (i < n && s[i] == '.') {
                i++;
                int k = 0;
                int64_t frac = 0;
                while (i < n && s[i] >= '0' && s[i] <= '9') {
                    if (k < 3)
                        frac = frac * 10 + (s[i] - '0');
                    k++;
                    i++;
                }
                if (k == 0) {
                    snprintf(why, whylen, "no digits after the decimal point");
                    return false;
                }
                for (; k < 3; k++)
                    frac *= 10;
                ms = frac;
            }
        }
        if (h > 23 || mi > 59 || sec > 59) {
            snprintf(why, whylen, "The parsed time was invalid");
            return false;
        }
        while (i < n && s[i] == ' ')
            i++;
        if (i < n) {
            if (!parse_offset(s, n, &i, &off)) {
                snprintf(why, whylen, "unexpected text after the time");
                return false;
            }
            has_off = true;
        }
    }
    if (i != n) {
        snprintf(why, whylen, "trailing data");
        return false;
    }
    if (has_zone)
        *has_zone = has_off;
    *out = assemble(agg_days_from_civil(y, m, d), h, mi, sec, ms, has_off, off, tz);
    return true;
}

/* Parse s with a $dateToString-style format (TimeZone::parse with format). */
static bool parse_with_format(const char *s, size_t n, const char *f, size_t fn,
                              const agg_tz *tz, int64_t *out, bool *has_zone, char *why,
                              size_t whylen)
{
    int64_t y = 1970, m = 1, d = 1, h = 0, mi = 0, sec = 0, ms = 0, v;
    int64_t iy = -1, iw = 1, id = 1, yday = -1;
    int32_t off = 0;
    bool has_off = false;
    size_t i = 0;
    *has_zone = false;
    for (size_t k = 0; k < fn; k++) {
        if (f[k] != '%') {
            if (i >= n || s[i] != f[k])
                goto mismatch;
            i++;
            continue;
        }
        char c = f[++k];
        int width = c == 'Y' || c == 'G' ? 4 : c == 'L' || c == 'j' ? 3 : c == 'u' ? 1 : 2;
        switch (c) {
        case '%':
            if (i >= n || s[i++] != '%')
                goto mismatch;
            continue;
        case 'z':
        case 'Z':
            if (c == 'Z') {
                /* minutes east of UTC, signed */
                int sign = 1;
                if (i < n && (s[i] == '+' || s[i] == '-'))
                    sign = s[i++] == '-' ? -1 : 1;
                int64_t mins = 0;
                size_t st = i;
                while (i < n && s[i] >= '0' && s[i] <= '9')
                    mins = mins * 10 + (s[i++] - '0');
                if (i == st)
                    goto mismatch;
                off = (int32_t)(sign * mins * 60);
            } else if (!parse_offset(s, n, &i, &off)) {
                goto mismatch;
            }
            has_off = true;
            continue;
        default: break;
        }
        if (!digits(s, n, &i, width, &v))
            goto mismatch;
        switch (c) {
        case 'Y': y = v; break;
        case 'm': m = v; break;
        case 'd': d = v; break;
        case 'H': h = v; break;
        case 'M': mi = v; break;
        case 'S': sec = v; break;
        case 'L': ms = v; break;
        case 'j': yday = v; break;
        case 'G': iy = v; break;
        case 'V': iw = v; break;
        case 'u': id = v; break;
        case 'w':
        case 'U':
        default:
            snprintf(why, whylen, "the format specifier %%%c cannot be parsed", c);
            return false;
        }
    }
    if (i != n) {
        snprintf(why, whylen, "Trailing data");
        return false;
    }
    int64_t days;
    if (iy >= 0) {
        int64_t jan4 = agg_days_from_civil(iy, 1, 4);
        int64_t wd = (jan4 + 4) % 7; /* 0 Sunday */
        int64_t monday = jan4 - (wd == 0 ? 6 : wd - 1);
        days = monday + (iw - 1) * 7 + (id - 1);
    } else if (yday >= 0) {
        days = agg_days_from_civil(y, 1, 1) + yday - 1;
    } else {
        if (!valid_ymd(y, m, d)) {
            snprintf(why, whylen, "The parsed date was invalid");
            return false;
        }
        days = agg_days_from_civil(y, m, d);
    }
    if (h > 23 || mi > 59 || sec > 59) {
        snprintf(why, whylen, "The parsed time was invalid");
        return false;
    }
    *has_zone = has_off;
    *out = assemble(days, h, mi, sec, ms, has_off, off, tz);
    return true;
mismatch:
    snprintf(why, whylen, "the string does not match the format");
    return false;
}

static const char *const from_string_args[] = {"dateString", "timezone", "format", "onError",
                                               "onNull"};

static int from_string_parse(agg_expr *e, const bson_iter_t *arg, agg_scope *s, md_error *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(arg))
        return agg_err(err, 40540, "$dateFromString only supports an object as an argument, found: %s",
                       q_type_name(bson_iter_type(arg)));
    int rc = agg_parse_named(e, arg, s, from_string_args, 5, 40541, "Unrecognized argument to %s: %s", err);
    if (!rc && !e->kid[0])
        rc = agg_err(err, 40542, "Missing 'dateString' parameter to $dateFromString");
    return rc;
}

static int from_string_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    bson_value_t str, fmt;
    const agg_tz *tz;
    char why[256];
    int rc = agg_eval_kid(e, 0, vars, &str, err);
    if (rc)
        return rc;
    agg_set_missing(&fmt);
    if ((rc = eval_tz(e, 1, vars, &tz, err)))
        goto out;
    if (e->kid[2]) {
        if ((rc = agg_eval_kid(e, 2, vars, &fmt, err)))
            goto out;
        if (!agg_nullish(&fmt)) {
            if (fmt.value_type != BSON_TYPE_UTF8) {
                rc = agg_err(err, 40684,
                             "$dateFromString requires that 'format' be a string, found: %s",
                             agg_type_name(&fmt));
                goto out;
            }
            if ((rc = format_check(fmt.value.v_utf8.str, fmt.value.v_utf8.len, err)))
                goto out;
        }
    }
    if (agg_nullish(&str)) {
        if (e->kid[4])
            rc = agg_eval_kid(e, 4, vars, out, err);
        else
            agg_set_null(out);
        goto out;
    }
    if (!tz || (e->kid[2] && agg_nullish(&fmt))) {
        agg_set_null(out);
        goto out;
    }
    int64_t ms;
    bool ok, zone = false;
    if (str.value_type != BSON_TYPE_UTF8) {
        rc = agg_err(err, 241, "$dateFromString requires that 'dateString' be a string, found: %s",
                     agg_type_name(&str));
    } else {
        if (e->kid[2])
            ok = parse_with_format(str.value.v_utf8.str, str.value.v_utf8.len,
                                   fmt.value.v_utf8.str, fmt.value.v_utf8.len, tz, &ms, &zone,
                                   why, sizeof why);
        else
            ok = agg_date_parse(str.value.v_utf8.str, str.value.v_utf8.len, tz, &ms, &zone, why,
                                sizeof why);
        if (!ok)
            rc = agg_err(err, 241, "Error parsing date string '%.*s'; %s",
                         (int)(str.value.v_utf8.len > 200 ? 200 : str.value.v_utf8.len),
                         str.value.v_utf8.str, why);
        else if (zone && e->kid[1])
            rc = agg_err(err, 40554,
                         "you cannot pass in a date/time string with GMT offset together with a "
                         "timezone argument");
        else
            agg_set_date(out, ms);
    }
    if (rc && err && err->code == 241 && e->kid[3]) {
        agg_value_destroy(out);
        rc = agg_eval_kid(e, 3, vars, out, err);
    }
out:
    agg_value_destroy(&str);
    agg_value_destroy(&fmt);
    return rc;
}

/* ---- $dateFromParts -------------------------------------------------------------------- */

static const char *const from_parts_args[] = {"year",       "month",   "day",          "hour",
                                              "minute",     "second",  "millisecond",  "timezone",
                                              "isoWeekYear", "isoWeek", "isoDayOfWeek"};
enum { FP_YEAR, FP_MONTH, FP_DAY, FP_HOUR, FP_MIN, FP_SEC, FP_MS, FP_TZ, FP_IY, FP_IW, FP_ID };

static int from_parts_parse(agg_expr *e, const bson_iter_t *arg, agg_scope *s, md_error *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(arg))
        return agg_err(err, 40519, "$dateFromParts only supports an object as its argument");
    int rc = agg_parse_named(e, arg, s, from_parts_args, 11, 40518, "Unrecognized argument to %s: %s", err);
    if (rc)
        return rc;
    bool natural = e->kid[FP_YEAR] || e->kid[FP_MONTH] || e->kid[FP_DAY];
    bool iso = e->kid[FP_IY] || e->kid[FP_IW] || e->kid[FP_ID];
    if (!e->kid[FP_YEAR] && !e->kid[FP_IY])
        return agg_err(err, 40516,
                       "$dateFromParts requires either 'year' or 'isoWeekYear' to be present");
    if (natural && iso)
        return agg_err(err, 40489, "$dateFromParts does not allow mixing natural dates with ISO dates");
    return 0;
}

/* One part: *null when nullish; an integer in [lo, hi] (codes as 4.0). */
static int part_value(const agg_expr *e, int i, agg_vars *vars, int64_t def, int64_t *out,
                      bool *null, md_error *err)
{
    bson_value_t v;
    *out = def;
    if (!e->kid[i])
        return 0;
    int rc = agg_eval_kid(e, (size_t)i, vars, &v, err);
    if (rc)
        return rc;
    const char *name = from_parts_args[i];
    if (agg_nullish(&v)) {
        *null = true;
    } else if (!agg_num_int64(&v, out)) {
        q_buf b;
        q_buf_init(&b);
        agg_value_render(&b, &v);
        rc = agg_err(err, 40515, "'%s' must evaluate to an integer, found %s with value %s", name,
                     agg_type_name(&v), q_buf_cstr(&b));
        q_buf_cleanup(&b);
    } else if ((i == FP_YEAR || i == FP_IY) && (*out < 1 || *out > 9999)) {
        rc = agg_err(err, i == FP_YEAR ? 40523 : 31095,
                     "'%s' must evaluate to an integer in the range 1 to 9999, found %" PRId64,
                     name, *out);
    } else if (i != FP_YEAR && i != FP_IY && (*out < -32768 || *out > 32767)) {
        rc = agg_err(err, 31034,
                     "'%s' must evaluate to a value in the range [-32768, 32767]; value %" PRId64
                     " is not in range",
                     name, *out);
    }
    agg_value_destroy(&v);
    return rc;
}

static int from_parts_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    int64_t p[11];
    bool null = false;
    static const int64_t defs[11] = {1970, 1, 1, 0, 0, 0, 0, 0, 1970, 1, 1};
    const agg_tz *tz;
    for (int i = 0; i < 11; i++) {
        if (i == FP_TZ)
            continue;
        int rc = part_value(e, i, vars, defs[i], &p[i], &null, err);
        if (rc)
            return rc;
    }
    int rc = eval_tz(e, FP_TZ, vars, &tz, err);
    if (rc)
        return rc;
    if (null || !tz) {
        agg_set_null(out);
        return 0;
    }
    int64_t days;
    if (e->kid[FP_IY]) {
        int64_t jan4 = agg_days_from_civil(p[FP_IY], 1, 4);
        int64_t wd = ((jan4 + 4) % 7 + 7) % 7;
        int64_t monday = jan4 - (wd == 0 ? 6 : wd - 1);
        days = monday + (p[FP_IW] - 1) * 7 + (p[FP_ID] - 1);
    } else {
        int64_t months = p[FP_YEAR] * 12 + (p[FP_MONTH] - 1);
        int64_t y = fdiv(months, 12), m = months - y * 12 + 1;
        days = agg_days_from_civil(y, m, 1) + p[FP_DAY] - 1;
    }
    int64_t local = days * MS_PER_DAY + p[FP_HOUR] * 3600000 + p[FP_MIN] * 60000 +
                    p[FP_SEC] * 1000 + p[FP_MS];
    agg_set_date(out, agg_tz_to_utc(tz, local));
    return 0;
}

/* ---- $dateToParts ------------------------------------------------------------------------ */

static const char *const to_parts_args[] = {"date", "timezone", "iso8601"};

static int to_parts_parse(agg_expr *e, const bson_iter_t *arg, agg_scope *s, md_error *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(arg))
        return agg_err(err, 40524, "$dateToParts only supports an object as its argument");
    int rc = agg_parse_named(e, arg, s, to_parts_args, 3, 40520, "Unrecognized argument to %s: %s", err);
    if (!rc && !e->kid[0])
        rc = agg_err(err, 40522, "Missing 'date' parameter to $dateToParts");
    return rc;
}

static int to_parts_eval(const agg_expr *e, agg_vars *vars, bson_value_t *out, md_error *err)
{
    bson_value_t date, iso;
    const agg_tz *tz;
    int64_t ms;
    int rc = agg_eval_kid(e, 0, vars, &date, err);
    if (rc)
        return rc;
    agg_set_missing(&iso);
    if ((rc = eval_tz(e, 1, vars, &tz, err)))
        goto out;
    if ((rc = agg_eval_kid(e, 2, vars, &iso, err)))
        goto out;
    if (!agg_missing(&iso) && !agg_nullish(&iso) && iso.value_type != BSON_TYPE_BOOL) {
        rc = agg_err(err, 40521, "iso8601 must evaluate to a bool, found %s", agg_type_name(&iso));
        goto out;
    }
    if (agg_nullish(&date) || !tz || (e->kid[2] && agg_nullish(&iso))) {
        agg_set_null(out);
        goto out;
    }
    if ((rc = coerce_date(&date, &ms, err)))
        goto out;
    agg_tm t;
    int64_t iy;
    int iw, id;
    bson_t b;
    to_tm(ms, tz, &t);
    bson_init(&b);
    if (iso.value_type == BSON_TYPE_BOOL && iso.value.v_bool) {
        iso_week(&t, &iy, &iw, &id);
        bson_append_int32(&b, "isoWeekYear", -1, (int32_t)iy);
        bson_append_int32(&b, "isoWeek", -1, iw);
        bson_append_int32(&b, "isoDayOfWeek", -1, id);
    } else {
        bson_append_int32(&b, "year", -1, (int32_t)t.year);
        bson_append_int32(&b, "month", -1, t.month);
        bson_append_int32(&b, "day", -1, t.day);
    }
    bson_append_int32(&b, "hour", -1, t.hour);
    bson_append_int32(&b, "minute", -1, t.minute);
    bson_append_int32(&b, "second", -1, t.second);
    bson_append_int32(&b, "millisecond", -1, t.millis);
    agg_set_doc_steal(out, &b, false);
out:
    agg_value_destroy(&date);
    agg_value_destroy(&iso);
    return rc;
}

const agg_op agg_ops_date[] = {
    {"$year", 1, 1, part_parse, year_eval, NULL},
    {"$month", 1, 1, part_parse, month_eval, NULL},
    {"$dayOfMonth", 1, 1, part_parse, day_eval, NULL},
    {"$hour", 1, 1, part_parse, hour_eval, NULL},
    {"$minute", 1, 1, part_parse, minute_eval, NULL},
    {"$second", 1, 1, part_parse, second_eval, NULL},
    {"$millisecond", 1, 1, part_parse, millis_eval, NULL},
    {"$dayOfWeek", 1, 1, part_parse, wday_eval, NULL},
    {"$dayOfYear", 1, 1, part_parse, yday_eval, NULL},
    {"$week", 1, 1, part_parse, week_eval, NULL},
    {"$isoWeek", 1, 1, part_parse, isoweek_eval, NULL},
    {"$isoWeekYear", 1, 1, part_parse, isoyear_eval, NULL},
    {"$isoDayOfWeek", 1, 1, part_parse, isoday_eval, NULL},
    {"$dateToString", 1, 1, to_string_parse, to_string_eval, NULL},
    {"$dateFromString", 1, 1, from_string_parse, from_string_eval, NULL},
    {"$dateFromParts", 1, 1, from_parts_parse, from_parts_eval, NULL},
    {"$dateToParts", 1, 1, to_parts_parse, to_parts_eval, NULL},
    {NULL, 0, 0, NULL, NULL, NULL},
};
