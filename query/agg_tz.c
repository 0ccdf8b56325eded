/*
 * agg_tz.c -- time zones for the date expressions: "UTC"/"GMT", fixed
 * offsets ("+hh", "+hhmm", "+hh:mm", "-..."), and Olson names read from
 * the system's tzfiles (/usr/share/zoneinfo/<name>, Debian's tzdata),
 * with a small reader of our own: the library never sets TZ or calls
 * localtime (neither is thread-safe with changing zones).
 *
 * A TZif file (RFC 8536) is read from its 64-bit (version 2+) body:
 *
 *   header "TZif" ver  15 reserved  6 counts (isutcnt isstdcnt leapcnt
 *                                             timecnt typecnt charcnt)
 *   v1 body (32-bit times, skipped) | second header | v2 body:
 *   timecnt x int64 transition time   timecnt x uint8 type index
 *   typecnt x {int32 utoff, uint8 isdst, uint8 abbrind}   (rest unused)
 *   footer "\n<POSIX TZ string>\n"
 *
 * An instant before the first transition takes the first standard type;
 * after the last, the footer's rule (std offset, and dst with M-format
 * start/end rules "M3.2.0/2") when there is one, else the last type.
 * Parsed zones are kept for the life of the process (a global list under
 * a mutex; about 600 names exist).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg_expr_int.h"

#define TZ_DIR "/usr/share/zoneinfo/"
#define TZ_MAX_FILE (1 << 20)

typedef struct tz_rule {
    int month, week, wday; /* Mm.w.d */
    int32_t secs;          /* local time of day of the change */
} tz_rule;

struct agg_tz {
    char name[128];
    int32_t fixed; /* seconds east of UTC (no transitions) */
    int64_t *when;
    uint8_t *idx;
    int32_t *utoff;
    size_t ntimes, ntypes;
    bool has_posix, posix_dst;
    int32_t std_off, dst_off; /* east of UTC */
    tz_rule start, end;
    struct agg_tz *next;
};

static agg_tz tz_utc = {.name = "UTC"};
static agg_tz *tz_list;
static pthread_mutex_t tz_mu = PTHREAD_MUTEX_INITIALIZER;

const agg_tz *agg_tz_utc(void)
{
    return &tz_utc;
}

/* ---- calendar ------------------------------------------------------------------------ */

/* Days since 1970-01-01 of a proleptic Gregorian date (Hinnant's algorithm). */
int64_t agg_days_from_civil(int64_t y, int64_t m, int64_t d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

void agg_civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

static int64_t floor_div(int64_t a, int64_t b)
{
    return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

/* Day of week of a day number: 0 Sunday .. 6 Saturday. */
static int weekday(int64_t days)
{
    int64_t w = (days + 4) % 7; /* 1970-01-01 was a Thursday */
    return (int)(w < 0 ? w + 7 : w);
}

/* The day number of rule r (Mm.w.d) in year y. */
static int64_t rule_day(const tz_rule *r, int64_t y)
{
    int64_t first = agg_days_from_civil(y, r->month, 1);
    int64_t d = first + ((r->wday - weekday(first)) + 7) % 7 + (int64_t)(r->week - 1) * 7;
    if (r->week == 5) {
        int64_t next = r->month == 12 ? agg_days_from_civil(y + 1, 1, 1)
                                      : agg_days_from_civil(y, r->month + 1, 1);
        while (d >= next)
            d -= 7;
    }
    return d;
}

/* ---- offsets ------------------------------------------------------------------------------ */

static int32_t posix_offset(const agg_tz *tz, int64_t ms)
{
    if (!tz->posix_dst)
        return tz->std_off;
    int64_t secs = floor_div(ms, 1000);
    int64_t y;
    int m, d;
    agg_civil_from_days(floor_div(secs + tz->std_off, 86400), &y, &m, &d);
    /* the changes as UTC instants: start is given in standard local time,
     * end in daylight local time */
    int64_t start = rule_day(&tz->start, y) * 86400 + tz->start.secs - tz->std_off;
    int64_t end = rule_day(&tz->end, y) * 86400 + tz->end.secs - tz->dst_off;
    bool dst = start < end ? (secs >= start && secs < end) : !(secs >= end && secs < start);
    return dst ? tz->dst_off : tz->std_off;
}

int32_t agg_tz_offset(const agg_tz *tz, int64_t ms)
{
    if (!tz->ntimes && !tz->has_posix)
        return tz->ntypes ? tz->utoff[0] : tz->fixed;
    int64_t secs = floor_div(ms, 1000);
    if (tz->ntimes == 0 || secs < tz->when[0]) {
        if (tz->ntimes == 0 && tz->has_posix)
            return posix_offset(tz, ms);
        return tz->ntypes ? tz->utoff[0] : tz->fixed;
    }
    if (secs >= tz->when[tz->ntimes - 1] && tz->has_posix)
        return posix_offset(tz, ms);
    size_t lo = 0, hi = tz->ntimes; /* the last transition <= secs */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (tz->when[mid] <= secs)
            lo = mid;
        else
            hi = mid;
    }
    uint8_t t = tz->idx[lo];
    return t < tz->ntypes ? tz->utoff[t] : 0;
}

int64_t agg_tz_to_utc(const agg_tz *tz, int64_t local_ms)
{
    int64_t guess = local_ms - (int64_t)agg_tz_offset(tz, local_ms) * 1000;
    int64_t again = local_ms - (int64_t)agg_tz_offset(tz, guess) * 1000;
    return again;
}

/* ---- parsing -------------------------------------------------------------------------------- */

/* "+hh", "+hhmm", "+hh:mm" (and '-'): seconds east of UTC. */
static bool parse_fixed(const char *s, size_t n, int32_t *off)
{
    int h, m = 0;
    if (n < 3 || (s[0] != '+' && s[0] != '-'))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!(s[i] >= '0' && s[i] <= '9') && !(i == 3 && s[i] == ':' && n == 6))
            return false;
    h = (s[1] - '0') * 10 + (s[2] - '0');
    if (n == 5)
        m = (s[3] - '0') * 10 + (s[4] - '0');
    else if (n == 6 && s[3] == ':')
        m = (s[4] - '0') * 10 + (s[5] - '0');
    else if (n != 3)
        return false;
    *off = (h * 3600 + m * 60) * (s[0] == '-' ? -1 : 1);
    return true;
}

static int64_t be(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | p[i];
    if (n == 4)
        return (int32_t)(uint32_t)v;
    return (int64_t)v;
}

/* A POSIX TZ offset "[+-]hh[:mm[:ss]]": seconds WEST of UTC. */
static const char *posix_num(const char *p, int32_t *out)
{
    int sign = 1, h = 0, m = 0, s = 0;
    if (*p == '+' || *p == '-')
        sign = *p++ == '-' ? -1 : 1;
    if (*p < '0' || *p > '9')
        return NULL;
    while (*p >= '0' && *p <= '9')
        h = h * 10 + (*p++ - '0');
    if (*p == ':') {
        p++;
        while (*p >= '0' && *p <= '9')
            m = m * 10 + (*p++ - '0');
        if (*p == ':') {
            p++;
            while (*p >= '0' && *p <= '9')
                s = s * 10 + (*p++ - '0');
        }
    }
    *out = sign * (h * 3600 + m * 60 + s);
    return p;
}

static const char *posix_name(const char *p)
{
    if (*p == '<') {
        while (*p && *p != '>')
            p++;
        return *p ? p + 1 : NULL;
    }
    const char *s = p;
    while ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z'))
        p++;
    return p - s >= 3 ? p : NULL;
}

static const char *posix_rule(const char *p, tz_rule *r)
{
    if (*p != 'M')
        return NULL; /* Jn and n forms: not supported (no zone uses them) */
    p++;
    r->month = (int)strtol(p, (char **)&p, 10);
    if (*p++ != '.')
        return NULL;
    r->week = (int)strtol(p, (char **)&p, 10);
    if (*p++ != '.')
        return NULL;
    r->wday = (int)strtol(p, (char **)&p, 10);
    r->secs = 7200;
    if (*p == '/') {
        int32_t t;
        if (!(p = posix_num(p + 1, &t)))
            return NULL;
        r->secs = t;
    }
    if (r->month < 1 || r->month > 12 || r->week < 1 || r->week > 5 || r->wday < 0 ||
        r->wday > 6)
        return NULL;
    return p;
}

/* The footer "STD off [DST [off] [,start,end]]". */
static void parse_posix(agg_tz *tz, const char *p)
{
    int32_t w;
    if (!(p = posix_name(p)) || !(p = posix_num(p, &w)))
        return;
    tz->std_off = -w;
    tz->dst_off = -w + 3600;
    if (*p && *p != ',') {
        if (!(p = posix_name(p)))
            return;
        if (*p && *p != ',') {
            if (!(p = posix_num(p, &w)))
                return;
            tz->dst_off = -w;
        }
        if (*p != ',' || !(p = posix_rule(p + 1, &tz->start)) || *p != ',' ||
            !(p = posix_rule(p + 1, &tz->end)))
            return;
        tz->posix_dst = true;
    }
    tz->has_posix = true;
}

static bool parse_tzif(agg_tz *tz, const uint8_t *d, size_t n)
{
    if (n < 44 || memcmp(d, "TZif", 4))
        return false;
    int ver = d[4];
    int64_t c[6];
    for (int i = 0; i < 6; i++)
        c[i] = be(d + 20 + 4 * i, 4);
    int64_t isut = c[0], isstd = c[1], leap = c[2], times = c[3], types = c[4], chars = c[5];
    size_t v1 = (size_t)(times * 5 + types * 6 + chars + leap * 8 + isstd + isut);
    const uint8_t *p = d + 44;
    int tsize = 4;
    if (ver >= '2') {
        if (44 + v1 + 44 > n || memcmp(d + 44 + v1, "TZif", 4))
            return false;
        p = d + 44 + v1 + 44;
        for (int i = 0; i < 6; i++)
            c[i] = be(d + 44 + v1 + 20 + 4 * i, 4);
        isut = c[0], isstd = c[1], leap = c[2], times = c[3], types = c[4], chars = c[5];
        tsize = 8;
    }
    size_t body = (size_t)(times * (tsize + 1) + types * 6 + chars + leap * (tsize + 4) + isstd + isut);
    if (types < 1 || times < 0 || (size_t)(p - d) + body > n)
        return false;
    tz->ntimes = (size_t)times;
    tz->ntypes = (size_t)types;
    tz->when = malloc((times ? times : 1) * sizeof *tz->when);
    tz->idx = malloc(times ? (size_t)times : 1);
    tz->utoff = malloc((size_t)types * sizeof *tz->utoff);
    for (int64_t i = 0; i < times; i++)
        tz->when[i] = be(p + i * tsize, tsize);
    p += times * tsize;
    memcpy(tz->idx, p, (size_t)times);
    p += times;
    for (int64_t i = 0; i < types; i++)
        tz->utoff[i] = (int32_t)be(p + i * 6, 4);
    p += types * 6 + chars + leap * (tsize + 4) + isstd + isut;
    /* before the first transition: the first non-DST type (RFC 8536 3.2);
     * keep it first so that utoff[0] answers for early instants */
    if (ver >= '2' && (size_t)(p - d) < n && *p == '\n') {
        const uint8_t *e = memchr(p + 1, '\n', n - (size_t)(p - d) - 1);
        if (e && e > p + 1) {
            char foot[128];
            size_t fl = (size_t)(e - p - 1) < sizeof foot - 1 ? (size_t)(e - p - 1) : sizeof foot - 1;
            memcpy(foot, p + 1, fl);
            foot[fl] = '\0';
            parse_posix(tz, foot);
        }
    }
    return true;
}

static bool name_ok(const char *s, size_t n)
{
    if (n == 0 || n >= sizeof tz_utc.name || s[0] == '/' || s[n - 1] == '/')
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '+' || c == '/'))
            return false;
        if (c == '/' && s[i + 1] == '/')
            return false;
    }
    return !strstr(s, "..") && memcmp(s, "posix", 5) && memcmp(s, "right", 5);
}

static agg_tz *load_olson(const char *name, size_t n)
{
    char path[256];
    snprintf(path, sizeof path, "%s%.*s", TZ_DIR, (int)n, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    uint8_t *buf = malloc(TZ_MAX_FILE);
    size_t len = fread(buf, 1, TZ_MAX_FILE, f);
    fclose(f);
    agg_tz *tz = calloc(1, sizeof *tz);
    snprintf(tz->name, sizeof tz->name, "%.*s", (int)n, name);
    if (!parse_tzif(tz, buf, len)) {
        free(tz->when);
        free(tz->idx);
        free(tz->utoff);
        free(tz);
        tz = NULL;
    }
    free(buf);
    return tz;
}

int agg_tz_get(const char *name, size_t n, const agg_tz **out, md_error *err)
{
    int32_t off;
    if ((n == 3 && (!memcmp(name, "UTC", 3) || !memcmp(name, "GMT", 3))) ||
        (n == 1 && name[0] == 'Z')) {
        *out = &tz_utc;
        return 0;
    }
    if (parse_fixed(name, n, &off)) {
        pthread_mutex_lock(&tz_mu);
        agg_tz *t;
        for (t = tz_list; t; t = t->next)
            if (!t->ntypes && !t->has_posix && t->fixed == off && t->name[0] == '+')
                break;
        if (!t) {
            t = calloc(1, sizeof *t);
            snprintf(t->name, sizeof t->name, "+fixed");
            t->fixed = off;
            t->next = tz_list;
            tz_list = t;
        }
        pthread_mutex_unlock(&tz_mu);
        *out = t;
        return 0;
    }
    if (name_ok(name, n)) {
        pthread_mutex_lock(&tz_mu);
        agg_tz *t;
        for (t = tz_list; t; t = t->next)
            if (strlen(t->name) == n && !memcmp(t->name, name, n))
                break;
        if (!t && (t = load_olson(name, n))) {
            t->next = tz_list;
            tz_list = t;
        }
        pthread_mutex_unlock(&tz_mu);
        if (t) {
            *out = t;
            return 0;
        }
    }
    return agg_err(err, 40485, "unrecognized time zone identifier: \"%.*s\"",
                   (int)(n > 200 ? 200 : n), name);
}
