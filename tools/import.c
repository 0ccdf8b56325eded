/*
 * import.c -- `minidoc import`: documents from JSON, CSV or TSV into a
 * collection, as mongoimport does.
 *
 *   minidoc import --dbpath DIR [--collection C] [--file F]
 *       [--type json|csv|tsv] [--jsonArray] [--headerline]
 *       [--fields a,b | --fieldFile F] [--columnsHaveTypes] [--ignoreBlanks]
 *       [--mode insert|upsert|merge] [--upsertFields a,b] [--drop]
 *       [--stopOnError] [--batchSize N]
 *
 * JSON: extended JSON documents (canonical, relaxed or legacy) one after
 * the other, a document may span lines; --jsonArray: one array of them.
 * CSV (RFC 4180 quoting, quoted fields may hold newlines and "") and TSV
 * (tab separated, no quoting): the field names come from the first line
 * (--headerline), --fields or --fieldFile; "a.b" builds {a: {b: ...}};
 * values that read wholly as an integer become int32 (int64 when too
 * big), as a number double, anything else a string (mongoimport's
 * inference); --columnsHaveTypes takes "name.type()" headers: auto(),
 * string(), int32(), int64(), double(), decimal(), boolean(),
 * date(LAYOUT) / date_go(LAYOUT) (Go's reference layout tokens 2006 01 02
 * 15 04 05 and Z07:00), binary(hex) / binary(base64).
 *
 * --mode insert (default) inserts; upsert replaces the document matching
 * the --upsertFields (default _id) or inserts it; merge $sets its fields
 * into the matching document, upserting.  A line that does not parse, a
 * value that does not convert, a document the database refuses (a
 * duplicate key, one over 16 MB) is reported as "line N: reason" on
 * stderr and the import goes on (unless --stopOnError); what was
 * imported stays.  The summary is mongoimport's: "N document(s) imported
 * successfully. M document(s) failed to import."  On a terminal a
 * progress line (bytes, documents per second) is redrawn on stderr about
 * once a second; nothing when stderr is not a terminal.
 *
 * The collection defaults to the file's name without its extension.
 * Deviations: no --parseGrace (a bad value always fails its line), no
 * date_ms/date_oracle layouts, no --legacy; a CSV line's number is the
 * line its record starts on.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tool.h"

#define PROG "minidoc import"
#define MAX_FIELDS 512

typedef enum { IM_JSON, IM_CSV, IM_TSV } im_type;
typedef enum { IM_INSERT, IM_UPSERT, IM_MERGE } im_mode;

typedef struct im_opts {
    tool_db_opts db;
    const char *coll, *file, *fields, *field_file, *upsert_fields;
    int type;  /* im_type */
    int mode;  /* im_mode */
    bool json_array, headerline, have_types, drop, stop_on_error, ignore_blanks;
    int64_t batch;
} im_opts;

typedef struct im_field {
    char *name;   /* dotted path */
    char *type;   /* "auto", "int32", ... (--columnsHaveTypes) */
    char *arg;    /* date layout, binary encoding */
} im_field;

typedef struct im_state {
    im_opts *o;
    md_db *db;
    tool_stream in;
    im_field f[MAX_FIELDS];
    int nf;
    char *upsert[32];
    int nupsert;
    /* the pending batch */
    bson_t batch;
    int nbatch;
    long *lines;
    int64_t imported, failed;
    bool stop;
    /* input */
    char *buf;
    size_t len, pos, cap;
    bool in_eof;
    long line;
    /* progress */
    bool tty;
    double t0, last;
    FILE *msgs;    /* where the per-line errors go: stderr, or the caller's */
    char *ufields; /* the --upsertFields list, cut into upsert[] */
} im_state;

static void im_usage(FILE *f)
{
    fprintf(f,
            "usage: minidoc import --dbpath DIR [--collection C] [--file F]\n"
            "         [--type json|csv|tsv] [--jsonArray] [--headerline]\n"
            "         [--fields a,b | --fieldFile F] [--columnsHaveTypes] [--ignoreBlanks]\n"
            "         [--mode insert|upsert|merge] [--upsertFields a,b] [--drop]\n"
            "         [--stopOnError] [--batchSize N]\n");
}

static int parse(int argc, char **argv, im_opts *o)
{
    static const char *const types[] = {"json", "csv", "tsv", NULL};  /* im_type */
    static const char *const modes[] = {"insert", "upsert", "merge", NULL}; /* im_mode */
    static const tool_opt table[] = {
        TOOL_OPT_STR("--collection", "-c", im_opts, coll),
        TOOL_OPT_STR("--file", NULL, im_opts, file),
        TOOL_OPT_STR("--fields", "-f", im_opts, fields),
        TOOL_OPT_STR("--fieldFile", NULL, im_opts, field_file),
        TOOL_OPT_STR("--upsertFields", NULL, im_opts, upsert_fields),
        TOOL_OPT_CHOICE("--type", im_opts, type, types),
        TOOL_OPT_CHOICE("--mode", im_opts, mode, modes),
        TOOL_OPT_COUNT("--batchSize", im_opts, batch, 1, 100000),
        TOOL_OPT_FLAG("--jsonArray", im_opts, json_array),
        TOOL_OPT_FLAG("--headerline", im_opts, headerline),
        TOOL_OPT_FLAG("--columnsHaveTypes", im_opts, have_types),
        TOOL_OPT_FLAG("--drop", im_opts, drop),
        TOOL_OPT_FLAG("--stopOnError", im_opts, stop_on_error),
        TOOL_OPT_FLAG("--ignoreBlanks", im_opts, ignore_blanks),
        TOOL_OPT_END,
    };
    memset(o, 0, sizeof *o);
    o->batch = 1000;
    if (tool_parse(argc, argv, table, o, &o->db, &o->file, im_usage, PROG, NULL) != 0)
        return -1;
    if (o->upsert_fields && o->mode == IM_INSERT)
        o->mode = IM_UPSERT;
    if (o->type != IM_JSON && !o->headerline && !o->fields && !o->field_file) {
        fprintf(stderr, "%s: must specify --fields, --fieldFile or --headerline to import "
                        "this file type\n", PROG);
        return -1;
    }
    if (o->type == IM_JSON && (o->headerline || o->fields || o->field_file)) {
        fprintf(stderr, "%s: --headerline, --fields and --fieldFile are for csv and tsv\n",
                PROG);
        return -1;
    }
    if (o->json_array && o->type != IM_JSON) {
        fprintf(stderr, "%s: --jsonArray is for json\n", PROG);
        return -1;
    }
    if (!o->coll && (!o->file || strcmp(o->file, "-") == 0)) {
        fprintf(stderr, "%s: no collection specified (--collection)\n", PROG);
        return -1;
    }
    return 0;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void progress(im_state *st, bool final)
{
    if (!st->tty)
        return;
    double t = now();
    if (!final && t - st->last < 1.0)
        return;
    st->last = t;
    double el = t - st->t0 > 1e-6 ? t - st->t0 : 1e-6;
    fprintf(stderr, "\r%s.%s  %.1f MB  %lld docs  %.0f docs/s  %.1f MB/s%s",
            md_db_name(st->db), st->o->coll, st->in.bytes / 1e6,
            (long long)(st->imported + st->failed + st->nbatch),
            (st->imported + st->failed + st->nbatch) / el, st->in.bytes / 1e6 / el,
            final ? "\n" : "   ");
}

/* ---- input buffer ------------------------------------------------------------ */

/* Make at least `want` bytes available from pos (fewer at the end). */
static void fill(im_state *st, size_t want)
{
    if (st->len - st->pos >= want || st->in_eof)
        return;
    if (st->pos > 0)
        memmove(st->buf, st->buf + st->pos, st->len - st->pos);
    st->len -= st->pos;
    st->pos = 0;
    while (st->len < want && !st->in_eof) {
        if (st->cap - st->len < 65536) {
            st->cap = st->cap * 2 + 65536;
            st->buf = realloc(st->buf, st->cap + 1);
        }
        ssize_t r = st->in.gz ? gzread(st->in.gz, st->buf + st->len, 65536)
                              : (ssize_t)fread(st->buf + st->len, 1, 65536, st->in.f);
        if (r <= 0) {
            if (r < 0 || (st->in.f && ferror(st->in.f)))
                st->in.failed = true;
            st->in_eof = true;
            break;
        }
        st->len += (size_t)r;
        st->in.bytes += (uint64_t)r;
    }
    st->buf[st->len] = '\0';
}

static int peekc(im_state *st, size_t ahead)
{
    fill(st, ahead + 1);
    return st->pos + ahead < st->len ? (unsigned char)st->buf[st->pos + ahead] : EOF;
}

static int getc_(im_state *st)
{
    int c = peekc(st, 0);
    if (c != EOF) {
        st->pos++;
        if (c == '\n')
            st->line++;
    }
    return c;
}

static void skip_blank(im_state *st)
{
    int c;
    if (st->pos == 0 && st->line == 1 && peekc(st, 0) == 0xef && peekc(st, 1) == 0xbb &&
        peekc(st, 2) == 0xbf)
        st->pos += 3; /* a UTF-8 byte order mark */
    while ((c = peekc(st, 0)) != EOF && isspace(c))
        getc_(st);
}

/* ---- writing ------------------------------------------------------------------ */

static void doc_error(im_state *st, long line, const char *msg)
{
    if (st->tty)
        fputc('\n', stderr);
    fprintf(st->msgs, "%s: line %ld: %s\n", PROG, line, msg);
    st->failed++;
    if (st->o->stop_on_error)
        st->stop = true;
}

/* The filter of an upsert/merge: the upsert fields' values (dotted paths
 * allowed).  False when the document has none of them (then insert). */
static bool upsert_filter(im_state *st, const bson_t *doc, bson_t *q)
{
    bool any = false;
    bson_init(q);
    for (int k = 0; k < st->nupsert; k++) {
        bson_iter_t it, f;
        if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, st->upsert[k], &f)) {
            bson_append_iter(q, st->upsert[k], -1, &f);
            any = true;
        }
    }
    return any;
}

static void flush(im_state *st)
{
    if (st->nbatch == 0)
        return;
    bson_t cmd, reply, arr;
    bson_iter_t it, one;
    md_error err;
    bool insert = st->o->mode == IM_INSERT;
    bson_init(&cmd);
    if (insert) {
        BSON_APPEND_UTF8(&cmd, "insert", st->o->coll);
        BSON_APPEND_ARRAY(&cmd, "documents", &st->batch);
    } else {
        BSON_APPEND_UTF8(&cmd, "update", st->o->coll);
        BSON_APPEND_ARRAY_BEGIN(&cmd, "updates", &arr);
        bson_iter_init(&it, &st->batch);
        int k = 0;
        while (bson_iter_next(&it)) {
            bson_t doc, q, u, upd, set;
            const uint8_t *d;
            uint32_t dl;
            char key[16];
            bson_iter_document(&it, &dl, &d);
            bson_init_static(&doc, d, dl);
            snprintf(key, sizeof key, "%d", k++);
            BSON_APPEND_DOCUMENT_BEGIN(&arr, key, &upd);
            if (!upsert_filter(st, &doc, &q)) {
                /* nothing to match on: a fresh _id, so the upsert inserts */
                bson_oid_t oid;
                bson_oid_init(&oid, NULL);
                bson_reinit(&q);
                BSON_APPEND_OID(&q, "_id", &oid);
            }
            BSON_APPEND_DOCUMENT(&upd, "q", &q);
            if (st->o->mode == IM_UPSERT) {
                BSON_APPEND_DOCUMENT(&upd, "u", &doc);
            } else {
                bson_init(&u);
                bson_init(&set);
                bson_copy_to_excluding_noinit(&doc, &set, "_id", NULL);
                if (bson_count_keys(&set) == 0) {
                    bson_iter_t idf;
                    if (bson_iter_init_find(&idf, &doc, "_id"))
                        bson_append_iter(&set, "_id", -1, &idf);
                }
                BSON_APPEND_DOCUMENT(&u, "$set", &set);
                BSON_APPEND_DOCUMENT(&upd, "u", &u);
                bson_destroy(&u);
                bson_destroy(&set);
            }
            BSON_APPEND_BOOL(&upd, "upsert", true);
            bson_append_document_end(&arr, &upd);
            bson_destroy(&q);
        }
        bson_append_array_end(&cmd, &arr);
    }
    BSON_APPEND_BOOL(&cmd, "ordered", st->o->stop_on_error);
    int rc = tool_command(st->db, &cmd, &reply, &err);
    bson_destroy(&cmd);
    int nerr = 0;
    if (rc != 0) {
        for (int k = 0; k < st->nbatch; k++)
            doc_error(st, st->lines[k], err.message);
        nerr = st->nbatch;
    } else if (bson_iter_init_find(&it, &reply, "writeErrors") && bson_iter_recurse(&it, &one)) {
        while (bson_iter_next(&one)) {
            bson_iter_t sub;
            int idx = -1;
            const char *msg = "write error";
            if (bson_iter_recurse(&one, &sub) && bson_iter_find(&sub, "index"))
                idx = bson_iter_as_int64(&sub);
            if (bson_iter_recurse(&one, &sub) && bson_iter_find(&sub, "errmsg"))
                msg = bson_iter_utf8(&sub, NULL);
            doc_error(st, idx >= 0 && idx < st->nbatch ? st->lines[idx] : 0, msg);
            nerr++;
        }
    }
    /* ordered (stopOnError): the ones after the failed one were not tried */
    int done = st->nbatch - nerr;
    if (st->o->stop_on_error && nerr > 0 && rc == 0) {
        bson_iter_t n;
        int64_t applied = 0;
        if (bson_iter_init_find(&n, &reply, "n"))
            applied = bson_iter_as_int64(&n);
        done = (int)applied;
    }
    st->imported += done;
    bson_destroy(&reply);
    bson_reinit(&st->batch);
    st->nbatch = 0;
    progress(st, false);
}

static void add_doc(im_state *st, const bson_t *doc, long line)
{
    char key[16];
    if (doc->len > 16 * 1024 * 1024) {
        char msg[128];
        snprintf(msg, sizeof msg, "document is larger than the maximum size 16777216 (%u "
                 "bytes; BSONObjectTooLarge)", doc->len);
        doc_error(st, line, msg);
        return;
    }
    if (st->o->mode == IM_INSERT && !bson_has_field(doc, "_id")) {
        /* as the tools do: the client gives every document its _id */
        bson_t with;
        bson_oid_t oid;
        bson_init(&with);
        bson_oid_init(&oid, NULL);
        BSON_APPEND_OID(&with, "_id", &oid);
        bson_concat(&with, doc);
        snprintf(key, sizeof key, "%d", st->nbatch);
        BSON_APPEND_DOCUMENT(&st->batch, key, &with);
        bson_destroy(&with);
    } else {
        snprintf(key, sizeof key, "%d", st->nbatch);
        BSON_APPEND_DOCUMENT(&st->batch, key, doc);
    }
    st->lines[st->nbatch++] = line;
    if (st->nbatch >= st->o->batch || st->batch.len > 8 * 1024 * 1024)
        flush(st);
}

/* ---- JSON ---------------------------------------------------------------------- */

/* After a document that does not parse: go on at the line after the one
 * it started on (a truncated document must not swallow the next ones). */
static void resync(im_state *st)
{
    char *nl = memchr(st->buf + st->pos, '\n', st->len - st->pos);
    st->pos = nl ? (size_t)(nl - st->buf) + 1 : st->len;
    st->line++;
}

/* The next JSON object's text, balanced braces outside strings; its
 * first line in *line.  1 found, 0 end, -1 malformed (message). */
static int next_object(im_state *st, char **text, size_t *tlen, long *line, char *msg,
                       size_t cap)
{
    skip_blank(st);
    *line = st->line;
    int c = peekc(st, 0);
    if (c == EOF)
        return 0;
    if (c != '{') {
        snprintf(msg, cap, "expected a document ('{'), found '%c'", c);
        /* skip the rest of the line */
        while ((c = getc_(st)) != EOF && c != '\n')
            ;
        return -1;
    }
    size_t k = 0;
    int depth = 0;
    bool in_str = false, esc = false;
    long nl = 0;
    for (;;) {
        fill(st, k + 1); /* may move the buffer: index from st->pos */
        if (st->pos + k >= st->len) {
            snprintf(msg, cap, "unexpected end of input inside a document (truncated JSON)");
            resync(st);
            return -1;
        }
        char ch = st->buf[st->pos + k];
        k++;
        if (ch == '\n')
            nl++;
        if (in_str) {
            if (esc)
                esc = false;
            else if (ch == '\\')
                esc = true;
            else if (ch == '"')
                in_str = false;
            continue;
        }
        if (ch == '"')
            in_str = true;
        else if (ch == '{' || ch == '[')
            depth++;
        else if ((ch == '}' || ch == ']') && --depth == 0)
            break;
    }
    *text = st->buf + st->pos;
    *tlen = k;
    st->pos += k;
    st->line += nl;
    return 1;
}

static void import_json(im_state *st)
{
    char msg[600];
    if (st->o->json_array) {
        skip_blank(st);
        if (peekc(st, 0) != '[') {
            doc_error(st, st->line, "--jsonArray input does not start with '['");
            return;
        }
        getc_(st);
    }
    while (!st->stop) {
        char *text;
        size_t tlen;
        long line;
        if (st->o->json_array) {
            skip_blank(st);
            int c = peekc(st, 0);
            if (c == ']') {
                getc_(st);
                skip_blank(st);
                if (peekc(st, 0) != EOF)
                    doc_error(st, st->line, "text after the end of the array");
                return;
            }
            if (c == ',') {
                getc_(st);
                continue;
            }
            if (c == EOF) {
                doc_error(st, st->line, "unexpected end of input: the array is not closed");
                return;
            }
        }
        int r = next_object(st, &text, &tlen, &line, msg, sizeof msg);
        if (r == 0)
            return;
        if (r < 0) {
            doc_error(st, line, msg);
            continue;
        }
        bson_t doc;
        char pmsg[512];
        if (tool_json_parse(text, (ssize_t)tlen, &doc, pmsg, sizeof pmsg) != 0) {
            snprintf(msg, sizeof msg, "%s", pmsg);
            doc_error(st, line, msg);
            if (memchr(text, '\n', tlen)) {
                /* it spanned lines: start again after its first one */
                st->pos = (size_t)(text - st->buf);
                st->line = line;
                resync(st);
            }
        } else
            add_doc(st, &doc, line);
        bson_destroy(&doc);
    }
}

/* ---- CSV / TSV ------------------------------------------------------------------ */

/* One record's fields (owned strings); its first line in *line.
 * Returns the field count, 0 at the end, -1 malformed. */
static int next_record(im_state *st, char ***out, long *line, char *msg, size_t cap)
{
    bool tsv = st->o->type == IM_TSV;
    int n = 0, c;
    size_t fcap = 64, flen = 0;
    char *field = malloc(fcap);
    char **v = malloc(sizeof(char *) * MAX_FIELDS);
    *line = st->line;
    *out = v;
    if (peekc(st, 0) == EOF) {
        free(field);
        free(v);
        *out = NULL;
        return 0;
    }
    bool quoted = false, was_quoted = false;
    for (;;) {
        c = getc_(st);
        if (quoted) {
            if (c == EOF) {
                snprintf(msg, cap, "unexpected end of input inside a quoted field");
                goto bad;
            }
            if (c == '"') {
                if (peekc(st, 0) == '"') {
                    getc_(st);
                } else {
                    quoted = false;
                    continue;
                }
            }
        } else if (c == '"' && !tsv && flen == 0 && !was_quoted) {
            quoted = was_quoted = true;
            continue;
        } else if (c == (tsv ? '\t' : ',') || c == '\n' || c == EOF) {
            if (c == EOF && n == 0 && flen == 0 && !was_quoted) {
                free(field);
                free(v);
                *out = NULL;
                return 0;
            }
            if (flen > 0 && field[flen - 1] == '\r' && c != (tsv ? '\t' : ','))
                flen--;
            field[flen] = '\0';
            if (n == MAX_FIELDS) {
                snprintf(msg, cap, "more than %d fields", MAX_FIELDS);
                goto bad;
            }
            v[n++] = strdup(field);
            flen = 0;
            was_quoted = false;
            if (c != (tsv ? '\t' : ','))
                break;
            continue;
        } else if (was_quoted) {
            snprintf(msg, cap, "extraneous character '%c' after a quoted field", c);
            goto bad;
        }
        if (flen + 2 > fcap)
            field = realloc(field, fcap *= 2);
        field[flen++] = (char)c;
    }
    free(field);
    return n;
bad:
    free(field);
    while (c != '\n' && c != EOF)
        c = getc_(st);
    for (int k = 0; k < n; k++)
        free(v[k]);
    free(v);
    *out = NULL;
    return -1;
}

static void free_record(char **v, int n)
{
    for (int k = 0; k < n; k++)
        free(v[k]);
    free(v);
}

static bool parse_int(const char *s, int64_t *out)
{
    char *end;
    if (!*s || isspace((unsigned char)*s))
        return false;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end || errno)
        return false;
    *out = v;
    return true;
}

static bool parse_double(const char *s, double *out)
{
    char *end;
    if (!*s || isspace((unsigned char)*s))
        return false;
    double d = strtod(s, &end);
    if (*end)
        return false;
    *out = d;
    return true;
}

/* Go's reference layout to a time: tokens 2006 01 02 15 04 05 .000 Z07:00. */
static bool parse_go_date(const char *layout, const char *s, int64_t *ms)
{
    struct tm tm = {0};
    int frac = 0, tz = 0;
    bool utc_set = false;
    tm.tm_mday = 1;
    while (*layout) {
        int *dst = NULL, w = 0;
        if (strncmp(layout, "2006", 4) == 0)
            dst = &tm.tm_year, w = 4;
        else if (strncmp(layout, "01", 2) == 0)
            dst = &tm.tm_mon, w = 2;
        else if (strncmp(layout, "02", 2) == 0)
            dst = &tm.tm_mday, w = 2;
        else if (strncmp(layout, "15", 2) == 0)
            dst = &tm.tm_hour, w = 2;
        else if (strncmp(layout, "04", 2) == 0)
            dst = &tm.tm_min, w = 2;
        else if (strncmp(layout, "05", 2) == 0)
            dst = &tm.tm_sec, w = 2;
        else if (strncmp(layout, ".000", 4) == 0) {
            if (*s++ != '.')
                return false;
            for (int k = 0; k < 3; k++, s++) {
                if (!isdigit((unsigned char)*s))
                    return false;
                frac = frac * 10 + (*s - '0');
            }
            layout += 4;
            continue;
        } else if (strncmp(layout, "Z07:00", 6) == 0) {
            layout += 6;
            if (*s == 'Z') {
                s++;
                utc_set = true;
                continue;
            }
            /* exactly +hh:mm or -hh:mm: the offset is 6 bytes long */
            int sign = *s == '-' ? -1 : *s == '+' ? 1 : 0;
            if (!sign || !isdigit((unsigned char)s[1]) || !isdigit((unsigned char)s[2]) ||
                s[3] != ':' || !isdigit((unsigned char)s[4]) || !isdigit((unsigned char)s[5]))
                return false;
            tz = sign * (((s[1] - '0') * 10 + s[2] - '0') * 60 + (s[4] - '0') * 10 + s[5] - '0');
            s += 6;
            utc_set = true;
            continue;
        }
        if (dst) {
            int v = 0;
            for (int k = 0; k < w; k++, s++) {
                if (!isdigit((unsigned char)*s))
                    return false;
                v = v * 10 + (*s - '0');
            }
            *dst = v;
            layout += w;
            continue;
        }
        if (*s++ != *layout++)
            return false;
    }
    (void)utc_set;
    if (*s)
        return false;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    if (tm.tm_mon < 0 || tm.tm_mon > 11 || tm.tm_mday < 1 || tm.tm_mday > 31)
        return false;
    time_t t = timegm(&tm);
    *ms = ((int64_t)t - tz * 60) * 1000 + frac;
    return true;
}

static bool base64_decode(const char *s, uint8_t *out, size_t *olen)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    uint32_t acc = 0;
    int bits = 0, pad = 0;
    *olen = 0;
    for (; *s; s++) {
        if (*s == '=') {
            pad++;
            continue;
        }
        const char *p = strchr(tab, *s);
        if (!p || pad)
            return false;
        acc = acc << 6 | (uint32_t)(p - tab);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[(*olen)++] = (uint8_t)(acc >> bits);
        }
    }
    return pad <= 2;
}

/* One value into doc under key: 0, or -1 with msg. */
static int append_value(im_state *st, bson_t *doc, const char *key, const im_field *f,
                        const char *s, char *msg, size_t cap)
{
    const char *type = f->type ? f->type : "auto";
    int64_t i;
    double d;
    if (strcmp(type, "auto") == 0) {
        if (parse_int(s, &i)) {
            if (i >= INT32_MIN && i <= INT32_MAX)
                BSON_APPEND_INT32(doc, key, (int32_t)i);
            else
                BSON_APPEND_INT64(doc, key, i);
        } else if (parse_double(s, &d) && !isnan(d) && strchr("+-.0123456789", s[0]))
            BSON_APPEND_DOUBLE(doc, key, d);
        else
            BSON_APPEND_UTF8(doc, key, s);
        return 0;
    }
    if (strcmp(type, "string") == 0) {
        BSON_APPEND_UTF8(doc, key, s);
        return 0;
    }
    if (strcmp(type, "int32") == 0 && parse_int(s, &i) && i >= INT32_MIN && i <= INT32_MAX) {
        BSON_APPEND_INT32(doc, key, (int32_t)i);
        return 0;
    }
    if (strcmp(type, "int64") == 0 && parse_int(s, &i)) {
        BSON_APPEND_INT64(doc, key, i);
        return 0;
    }
    if (strcmp(type, "double") == 0 && parse_double(s, &d)) {
        BSON_APPEND_DOUBLE(doc, key, d);
        return 0;
    }
    if (strcmp(type, "decimal") == 0) {
        bson_decimal128_t dec;
        if (bson_decimal128_from_string(s, &dec) && strcmp(s, "NaN") != 0 &&
            !(dec.high == 0x7c00000000000000ULL && dec.low == 0)) {
            BSON_APPEND_DECIMAL128(doc, key, &dec);
            return 0;
        }
    }
    if (strcmp(type, "boolean") == 0) {
        if (strcmp(s, "true") == 0 || strcmp(s, "1") == 0 || strcmp(s, "TRUE") == 0 ||
            strcmp(s, "True") == 0) {
            BSON_APPEND_BOOL(doc, key, true);
            return 0;
        }
        if (strcmp(s, "false") == 0 || strcmp(s, "0") == 0 || strcmp(s, "FALSE") == 0 ||
            strcmp(s, "False") == 0 || *s == '\0') {
            BSON_APPEND_BOOL(doc, key, false);
            return 0;
        }
    }
    if ((strcmp(type, "date") == 0 || strcmp(type, "date_go") == 0) && f->arg &&
        parse_go_date(f->arg, s, &i)) {
        BSON_APPEND_DATE_TIME(doc, key, i);
        return 0;
    }
    if (strcmp(type, "binary") == 0 && f->arg) {
        size_t n = strlen(s);
        uint8_t *out = malloc(n + 3);
        size_t olen = 0;
        bool good = true;
        if (strcmp(f->arg, "hex") == 0) {
            good = n % 2 == 0;
            for (size_t k = 0; good && k < n; k += 2) {
                unsigned v;
                good = isxdigit((unsigned char)s[k]) && isxdigit((unsigned char)s[k + 1]) &&
                       sscanf(s + k, "%2x", &v) == 1;
                out[olen++] = (uint8_t)v;
            }
        } else if (strcmp(f->arg, "base64") == 0) {
            good = base64_decode(s, out, &olen);
        } else
            good = false;
        if (good)
            BSON_APPEND_BINARY(doc, key, BSON_SUBTYPE_BINARY, out, (uint32_t)olen);
        free(out);
        if (good)
            return 0;
    }
    snprintf(msg, cap, "column '%s': could not parse '%.100s' as %s%s%s%s", f->name, s, type,
             f->arg ? "(" : "", f->arg ? f->arg : "", f->arg ? ")" : "");
    return -1;
}

/* Fields whose dotted names share a prefix become one subdocument. */
static int build(im_state *st, bson_t *doc, char **vals, int n, int *idx, int m,
                 size_t depth, char *msg, size_t cap)
{
    bool *done = calloc((size_t)m, 1);
    int rc = 0;
    for (int a = 0; a < m && rc == 0; a++) {
        if (done[a])
            continue;
        const im_field *f = &st->f[idx[a]];
        const char *name = f->name + depth;
        const char *dot = strchr(name, '.');
        if (!dot) {
            const char *s = idx[a] < n ? vals[idx[a]] : "";
            done[a] = true;
            if (st->o->ignore_blanks && *s == '\0')
                continue;
            rc = append_value(st, doc, name, f, s, msg, cap);
            continue;
        }
        size_t plen = (size_t)(dot - name);
        int *sub = malloc(sizeof(int) * (size_t)m), ns = 0;
        for (int b = a; b < m; b++) {
            const char *nb = st->f[idx[b]].name + depth;
            if (!done[b] && strncmp(nb, name, plen) == 0 && nb[plen] == '.') {
                sub[ns++] = idx[b];
                done[b] = true;
            }
        }
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)plen, name);
        bson_t child;
        BSON_APPEND_DOCUMENT_BEGIN(doc, key, &child);
        rc = build(st, &child, vals, n, sub, ns, depth + plen + 1, msg, cap);
        bson_append_document_end(doc, &child);
        free(sub);
    }
    free(done);
    return rc;
}

static int add_field_spec(im_state *st, const char *spec)
{
    if (st->nf == MAX_FIELDS) {
        fprintf(st->msgs, "%s: more than %d fields\n", PROG, MAX_FIELDS);
        return -1;
    }
    im_field *f = &st->f[st->nf++];
    memset(f, 0, sizeof *f);
    if (!st->o->have_types) {
        f->name = strdup(spec);
        return 0;
    }
    const char *open = strchr(spec, '(');
    size_t n = strlen(spec);
    if (!open || n == 0 || spec[n - 1] != ')') {
        fprintf(st->msgs, "%s: field '%s' has no type: with --columnsHaveTypes each field is "
                "name.type()\n", PROG, spec);
        return -1;
    }
    const char *dot = open;
    while (dot > spec && *dot != '.')
        dot--;
    if (*dot != '.') {
        fprintf(st->msgs, "%s: field '%s' has no type\n", PROG, spec);
        return -1;
    }
    f->name = strndup(spec, (size_t)(dot - spec));
    f->type = strndup(dot + 1, (size_t)(open - dot - 1));
    if (spec + n - 1 > open + 1)
        f->arg = strndup(open + 1, (size_t)(spec + n - 1 - open - 1));
    static const char *const known[] = {"auto", "string", "int32", "int64", "double",
                                        "decimal", "boolean", "date", "date_go", "binary",
                                        NULL};
    for (int k = 0; known[k]; k++)
        if (strcmp(f->type, known[k]) == 0)
            return 0;
    fprintf(st->msgs, "%s: field '%s': unknown type '%s'\n", PROG, spec, f->type);
    return -1;
}

static int fields_from_list(im_state *st, const char *list, char sep)
{
    const char *p = list;
    while (*p) {
        const char *e = strchr(p, sep);
        size_t n = e ? (size_t)(e - p) : strlen(p);
        while (n > 0 && (p[n - 1] == '\r' || p[n - 1] == ' '))
            n--;
        if (n > 0) {
            char *one = strndup(p, n);
            int rc = add_field_spec(st, one);
            free(one);
            if (rc != 0)
                return -1;
        }
        if (!e)
            break;
        p = e + 1;
    }
    return 0;
}

static void import_csv(im_state *st)
{
    char msg[512];
    char **v;
    long line;
    int n;
    if (st->o->headerline) {
        n = next_record(st, &v, &line, msg, sizeof msg);
        if (n <= 0) {
            doc_error(st, line, n == 0 ? "no header line" : msg);
            st->failed--; /* not a document */
            st->stop = true;
            return;
        }
        for (int k = 0; k < n && !st->stop; k++)
            if (add_field_spec(st, v[k]) != 0)
                st->stop = true;
        free_record(v, n);
        if (st->stop) {
            st->failed++;
            return;
        }
    }
    while (!st->stop && (n = next_record(st, &v, &line, msg, sizeof msg)) != 0) {
        if (n < 0) {
            doc_error(st, line, msg);
            continue;
        }
        if (n == 1 && v[0][0] == '\0') { /* blank line */
            free_record(v, n);
            continue;
        }
        bson_t doc;
        int idx[MAX_FIELDS];
        bson_init(&doc);
        for (int k = 0; k < st->nf; k++)
            idx[k] = k;
        int rc = build(st, &doc, v, n < st->nf ? n : st->nf, idx, st->nf, 0, msg, sizeof msg);
        /* fields past the named ones: field<N>, as mongoimport does */
        for (int k = st->nf; rc == 0 && k < n; k++) {
            char key[32];
            snprintf(key, sizeof key, "field%d", k);
            im_field auto_f = {.name = key};
            rc = append_value(st, &doc, key, &auto_f, v[k], msg, sizeof msg);
        }
        if (rc != 0)
            doc_error(st, line, msg);
        else
            add_doc(st, &doc, line);
        bson_destroy(&doc);
        free_record(v, n);
    }
}

/* ---- running an import ------------------------------------------------------------ */

/* Everything the options say before any input is read: the collection
 * (default: the file's name without its extension, into coll[256]), the
 * field list (--fields, --fieldFile) and the upsert fields.  0, or the
 * exit status (message printed on st->msgs). */
static int im_prepare(im_state *st, im_opts *o, char *coll, FILE *msgs)
{
    memset(st, 0, sizeof *st);
    st->o = o;
    st->line = 1;
    st->msgs = msgs;
    bson_init(&st->batch);
    if (!o->coll) {
        const char *base = strrchr(o->file, '/');
        base = base ? base + 1 : o->file;
        snprintf(coll, 256, "%s", base);
        char *dot = strrchr(coll, '.');
        if (dot && dot != coll)
            *dot = '\0';
        o->coll = coll;
    }
    if (o->fields && fields_from_list(st, o->fields, ',') != 0)
        return 2;
    if (o->field_file) {
        char *text = tool_slurp(o->field_file, false, NULL);
        if (!text) {
            fprintf(msgs, "%s: cannot read %s: %s\n", PROG, o->field_file, strerror(errno));
            return 1;
        }
        int rc = fields_from_list(st, text, '\n');
        free(text);
        if (rc != 0)
            return 2;
    }
    st->ufields = strdup(o->upsert_fields ? o->upsert_fields : "_id");
    for (char *save, *t = strtok_r(st->ufields, ",", &save); t && st->nupsert < 32;
         t = strtok_r(NULL, ",", &save))
        st->upsert[st->nupsert++] = t;
    return 0;
}

/* With st->db and st->in open: --drop, then every document of the input
 * and the last batch. */
static void im_run(im_state *st)
{
    const im_opts *o = st->o;
    if (o->drop) {
        bson_t cmd, reply;
        md_error err;
        bson_init(&cmd);
        BSON_APPEND_UTF8(&cmd, "drop", o->coll);
        if (tool_command(st->db, &cmd, &reply, &err) != 0 &&
            err.code != MD_CODE_NAMESPACE_NOT_FOUND)
            fprintf(st->msgs, "%s: cannot drop %s: %s\n", PROG, o->coll, err.message);
        else
            fprintf(st->msgs, "dropping: %s.%s\n", md_db_name(st->db), o->coll);
        bson_destroy(&cmd);
        bson_destroy(&reply);
    }
    st->tty = st->msgs == stderr && isatty(2);
    st->t0 = st->last = now();
    st->lines = malloc(sizeof(long) * (size_t)(o->batch + 1));
    if (o->type == IM_JSON)
        import_json(st);
    else
        import_csv(st);
    if (!st->stop || st->nbatch > 0) {
        bool stop = st->stop;
        flush(st);
        st->stop = stop || st->stop;
    }
    progress(st, true);
}

static void im_cleanup(im_state *st)
{
    for (int k = 0; k < st->nf; k++) {
        free(st->f[k].name);
        free(st->f[k].type);
        free(st->f[k].arg);
    }
    free(st->lines);
    free(st->buf);
    free(st->ufields);
    bson_destroy(&st->batch);
}

int tool_import_main(int argc, char **argv)
{
    im_opts o;
    im_state st;
    char coll[256];
    if (parse(argc, argv, &o) != 0) {
        im_usage(stderr);
        return 2;
    }
    int rc = im_prepare(&st, &o, coll, stderr);
    if (rc != 0) {
        im_cleanup(&st);
        return rc;
    }
    const char *path = o.file ? o.file : "-";
    if (tool_stream_open(&st.in, path, false, false) != 0) {
        fprintf(stderr, "%s: cannot read %s: %s\n", PROG, path, strerror(errno));
        im_cleanup(&st);
        return 1;
    }
    st.db = tool_open_db(&o.db, true, PROG);
    if (!st.db) {
        tool_stream_close(&st.in);
        im_cleanup(&st);
        return 1;
    }
    im_run(&st);
    bool read_failed = st.in.failed;
    tool_stream_close(&st.in);
    if (read_failed)
        fprintf(stderr, "%s: read error on %s\n", PROG, path);
    fprintf(stderr, "%lld document(s) imported successfully. %lld document(s) failed to "
            "import.\n", (long long)st.imported, (long long)st.failed);
    im_cleanup(&st);
    md_db_close(st.db);
    return st.failed > 0 || read_failed ? 1 : 0;
}

int tool_import_stream(md_db *db, int argc, char **argv, FILE *in, FILE *msgs,
                       int64_t *imported, int64_t *failed)
{
    im_opts o;
    im_state st;
    char coll[256];
    *imported = *failed = 0;
    if (parse(argc, argv, &o) != 0)
        return 2;
    int rc = im_prepare(&st, &o, coll, msgs);
    if (rc == 0) {
        st.in.f = in;
        st.db = db;
        im_run(&st);
        *imported = st.imported;
        *failed = st.failed;
        rc = st.failed > 0 || st.in.failed ? 1 : 0;
    }
    im_cleanup(&st);
    return rc;
}
