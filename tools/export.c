/*
 * export.c -- `minidoc export`: a collection's documents as JSON or CSV,
 * as mongoexport writes them.
 *
 *   minidoc export --dbpath DIR --collection C [--out F]
 *       [--type json|csv] [--fields a,b | --fieldFile F] [--query JSON]
 *       [--sort JSON] [--skip N] [--limit N] [--jsonArray] [--pretty]
 *       [--jsonFormat relaxed|canonical] [--noHeaderLine]
 *
 * JSON: one document per line in relaxed extended JSON v2 (mongoexport's
 * default; doubles in their shortest form, json_out.c), without blanks
 * ({"_id":1,"a":"x"}); --jsonFormat canonical keeps every type exactly
 * ({"$numberInt": "1"}), for a lossless import back; --jsonArray one
 * array; --pretty indents with tabs.  --fields projects (_id included,
 * as mongoexport does).
 * CSV: --fields (or --fieldFile) is required; a header line of the field
 * names (unless --noHeaderLine), then one line per document: strings as
 * they are, numbers as numbers, ObjectIds as ObjectId(<hex>), dates as
 * ISO-8601 with milliseconds in UTC, documents and arrays as their
 * relaxed JSON, a missing field or null empty; a value holding a comma,
 * a quote, a newline or a leading/trailing blank is quoted with "" for
 * quotes (RFC 4180).  Dotted names reach into subdocuments and arrays.
 * The count goes to stderr: "exported N record(s)".
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "json_out.h"
#include "tool.h"

#define PROG "minidoc export"

enum { EX_JSON, EX_CSV };             /* --type, in that order */
enum { EX_RELAXED, EX_CANONICAL }; /* --jsonFormat */

typedef struct ex_opts {
    tool_db_opts db;
    const char *coll, *out, *fields, *field_file, *query, *sort;
    int64_t limit, skip;
    int type;        /* EX_JSON or EX_CSV */
    int json_format; /* EX_RELAXED or EX_CANONICAL */
    bool json_array, pretty, no_header;
} ex_opts;

typedef struct ex_state {
    ex_opts *o;
    tool_stream s;
    char **fields;
    int nf;
    int64_t n;
    char *line;
    size_t cap;
} ex_state;

static void ex_usage(FILE *f)
{
    fprintf(f, "usage: minidoc export --dbpath DIR --collection C [--out F]\n"
               "         [--type json|csv] [--fields a,b | --fieldFile F] [--query JSON]\n"
               "         [--sort JSON] [--skip N] [--limit N] [--jsonArray] [--pretty]\n"
               "         [--jsonFormat relaxed|canonical] [--noHeaderLine]\n");
}

static int parse(int argc, char **argv, ex_opts *o)
{
    static const char *const types[] = {"json", "csv", NULL};
    static const char *const formats[] = {"relaxed", "canonical", NULL};
    static const tool_opt table[] = {
        TOOL_OPT_STR("--collection", "-c", ex_opts, coll),
        TOOL_OPT_STR("--out", "-o", ex_opts, out),
        TOOL_OPT_STR("--fields", "-f", ex_opts, fields),
        TOOL_OPT_STR("--fieldFile", NULL, ex_opts, field_file),
        TOOL_OPT_STR("--query", "-q", ex_opts, query),
        TOOL_OPT_STR("--sort", NULL, ex_opts, sort),
        TOOL_OPT_COUNT("--limit", ex_opts, limit, 0, INT64_MAX),
        TOOL_OPT_COUNT("--skip", ex_opts, skip, 0, INT64_MAX),
        TOOL_OPT_CHOICE("--type", ex_opts, type, types),
        TOOL_OPT_CHOICE("--jsonFormat", ex_opts, json_format, formats),
        TOOL_OPT_FLAG("--jsonArray", ex_opts, json_array),
        TOOL_OPT_FLAG("--pretty", ex_opts, pretty),
        TOOL_OPT_FLAG("--noHeaderLine", ex_opts, no_header),
        TOOL_OPT_END,
    };
    memset(o, 0, sizeof *o);
    if (tool_parse(argc, argv, table, o, &o->db, NULL, ex_usage, PROG, NULL) != 0)
        return -1;
    if (!o->coll) {
        fprintf(stderr, "%s: must specify a collection (--collection)\n", PROG);
        return -1;
    }
    if (o->type == EX_CSV && !o->fields && !o->field_file) {
        fprintf(stderr, "%s: CSV mode requires a field list (--fields or --fieldFile)\n", PROG);
        return -1;
    }
    if (o->type == EX_CSV && (o->json_array || o->pretty)) {
        fprintf(stderr, "%s: --jsonArray and --pretty are for json\n", PROG);
        return -1;
    }
    return 0;
}

/* libbson's spaced JSON, compact or indented with tabs. */
static void reformat(ex_state *st, const char *in, bool pretty)
{
    /* each character adds at most the deepest indentation and 2 bytes */
    int depth = 0, maxd = 0;
    bool s_in = false, s_esc = false;
    for (const char *p = in; *p; p++) {
        if (s_in) {
            if (s_esc)
                s_esc = false;
            else if (*p == '\\')
                s_esc = true;
            else if (*p == '"')
                s_in = false;
        } else if (*p == '"')
            s_in = true;
        else if ((*p == '{' || *p == '[') && ++depth > maxd)
            maxd = depth;
        else if (*p == '}' || *p == ']')
            depth--;
    }
    depth = 0;
    size_t need = strlen(in) * (pretty ? (size_t)maxd + 3 : 1) + 64;
    if (need > st->cap) {
        st->cap = need * 2;
        st->line = realloc(st->line, st->cap);
    }
    char *o = st->line;
    bool str = false, esc = false;
    for (const char *p = in; *p; p++) {
        char c = *p;
        if (str) {
            *o++ = c;
            if (esc)
                esc = false;
            else if (c == '\\')
                esc = true;
            else if (c == '"')
                str = false;
            continue;
        }
        if (c == ' ' || c == '\n' || c == '\t')
            continue;
        if (c == '"') {
            str = true;
            *o++ = c;
            continue;
        }
        if (!pretty) {
            *o++ = c;
            continue;
        }
        if (c == '{' || c == '[') {
            const char *q = p + 1;
            while (*q == ' ')
                q++;
            if (*q == (c == '{' ? '}' : ']')) {
                *o++ = c;
                *o++ = *q;
                p = q;
                continue;
            }
            *o++ = c;
            *o++ = '\n';
            depth++;
            for (int k = 0; k < depth; k++)
                *o++ = '\t';
        } else if (c == '}' || c == ']') {
            *o++ = '\n';
            depth--;
            for (int k = 0; k < depth; k++)
                *o++ = '\t';
            *o++ = c;
        } else if (c == ',') {
            *o++ = ',';
            *o++ = '\n';
            for (int k = 0; k < depth; k++)
                *o++ = '\t';
        } else if (c == ':') {
            *o++ = ':';
            *o++ = ' ';
        } else
            *o++ = c;
    }
    *o = '\0';
}

static int put(ex_state *st, const char *s)
{
    return tool_stream_write(&st->s, s, strlen(s));
}

/* One CSV cell for the value at path (empty when missing). */
static void csv_cell(ex_state *st, const bson_t *doc, const char *path, char **out)
{
    bson_iter_t it, f;
    char buf[128];
    char *text = NULL;
    *out = NULL;
    if (!bson_iter_init(&it, doc) || !bson_iter_find_descendant(&it, path, &f)) {
        *out = strdup("");
        return;
    }
    switch (bson_iter_type(&f)) {
    case BSON_TYPE_UTF8:
        text = strdup(bson_iter_utf8(&f, NULL));
        break;
    case BSON_TYPE_INT32:
        snprintf(buf, sizeof buf, "%d", bson_iter_int32(&f));
        text = strdup(buf);
        break;
    case BSON_TYPE_INT64:
        snprintf(buf, sizeof buf, "%lld", (long long)bson_iter_int64(&f));
        text = strdup(buf);
        break;
    case BSON_TYPE_DOUBLE:
        json_out_double(bson_iter_double(&f), buf, sizeof buf);
        text = strdup(buf);
        break;
    case BSON_TYPE_BOOL:
        text = strdup(bson_iter_bool(&f) ? "true" : "false");
        break;
    case BSON_TYPE_NULL:
    case BSON_TYPE_UNDEFINED:
        text = strdup("");
        break;
    case BSON_TYPE_OID: {
        char hex[25];
        bson_oid_to_string(bson_iter_oid(&f), hex);
        snprintf(buf, sizeof buf, "ObjectId(%s)", hex);
        text = strdup(buf);
        break;
    }
    case BSON_TYPE_DATE_TIME: {
        int64_t ms = bson_iter_date_time(&f);
        time_t t = (time_t)(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
        struct tm tm;
        gmtime_r(&t, &tm);
        size_t n = strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(buf + n, sizeof buf - n, ".%03dZ", (int)(ms - (int64_t)t * 1000));
        text = strdup(buf);
        break;
    }
    default: {
        /* documents, arrays and the other types: their relaxed JSON */
        bson_t wrap;
        bson_init(&wrap);
        bson_append_iter(&wrap, "v", 1, &f);
        char *j = json_out_relaxed(&wrap, NULL);
        bson_destroy(&wrap);
        if (j) {
            reformat(st, j, false);
            size_t n = strlen(st->line);
            /* {"v":X} -> X */
            text = n > 6 ? strndup(st->line + 5, n - 6) : strdup("");
            bson_free(j);
        } else
            text = strdup("");
    }
    }
    bool quote = text[0] == ' ' || (text[0] && text[strlen(text) - 1] == ' ') ||
                 strpbrk(text, ",\"\n\r") != NULL;
    if (!quote) {
        *out = text;
        return;
    }
    size_t n = strlen(text);
    char *q = malloc(n * 2 + 3), *w = q;
    *w++ = '"';
    for (const char *p = text; *p; p++) {
        if (*p == '"')
            *w++ = '"';
        *w++ = *p;
    }
    *w++ = '"';
    *w = '\0';
    free(text);
    *out = q;
}

static int one_doc(const bson_t *doc, void *arg)
{
    ex_state *st = arg;
    int rc = 0;
    if (st->o->type == EX_CSV) {
        for (int k = 0; k < st->nf && rc == 0; k++) {
            char *cell;
            csv_cell(st, doc, st->fields[k], &cell);
            rc = (k ? put(st, ",") : 0) | put(st, cell);
            free(cell);
        }
        rc |= put(st, "\n");
    } else {
        char *j = st->o->json_format == EX_CANONICAL ? bson_as_canonical_extended_json(doc, NULL)
                                   : json_out_relaxed(doc, NULL);
        if (!j) {
            fprintf(stderr, "%s: a document cannot be written as JSON (invalid UTF-8?); "
                    "skipped\n", PROG);
            return 0;
        }
        reformat(st, j, st->o->pretty);
        bson_free(j);
        if (st->o->json_array && st->n > 0)
            rc |= put(st, st->o->pretty ? ",\n" : ",");
        rc |= put(st, st->line);
        if (!st->o->json_array)
            rc |= put(st, "\n");
    }
    st->n++;
    return rc ? 1 : 0;
}

static int split_fields(ex_state *st, const char *list, char sep)
{
    const char *p = list;
    while (*p) {
        const char *e = strchr(p, sep);
        size_t n = e ? (size_t)(e - p) : strlen(p);
        while (n > 0 && (p[n - 1] == '\r' || p[n - 1] == ' '))
            n--;
        if (n > 0) {
            st->fields = realloc(st->fields, sizeof(char *) * (size_t)(st->nf + 1));
            st->fields[st->nf++] = strndup(p, n);
        }
        if (!e)
            break;
        p = e + 1;
    }
    return 0;
}

int tool_export_main(int argc, char **argv)
{
    ex_opts o;
    ex_state st = {0};
    char msg[256];
    int rc = 1;
    if (parse(argc, argv, &o) != 0) {
        ex_usage(stderr);
        return 2;
    }
    st.o = &o;
    if (o.fields)
        split_fields(&st, o.fields, ',');
    if (o.field_file) {
        char *text = tool_slurp(o.field_file, false, NULL);
        if (!text) {
            fprintf(stderr, "%s: cannot read %s: %s\n", PROG, o.field_file, strerror(errno));
            return 1;
        }
        split_fields(&st, text, '\n');
        free(text);
    }
    bson_t filter, opts, sort, proj;
    bson_init(&opts);
    if (tool_json_parse(o.query ? o.query : "{}", -1, &filter, msg, sizeof msg) != 0) {
        fprintf(stderr, "%s: --query is not valid JSON: %s\n", PROG, msg);
        bson_destroy(&filter);
        bson_destroy(&opts);
        return 2;
    }
    if (o.sort) {
        if (tool_json_parse(o.sort, -1, &sort, msg, sizeof msg) != 0) {
            fprintf(stderr, "%s: --sort is not valid JSON: %s\n", PROG, msg);
            bson_destroy(&sort);
            goto out_filter;
        }
        BSON_APPEND_DOCUMENT(&opts, "sort", &sort);
        bson_destroy(&sort);
    }
    if (o.limit)
        BSON_APPEND_INT64(&opts, "limit", o.limit);
    if (o.skip)
        BSON_APPEND_INT64(&opts, "skip", o.skip);
    if (st.nf > 0 && o.type != EX_CSV) {
        bson_init(&proj);
        for (int k = 0; k < st.nf; k++)
            BSON_APPEND_INT32(&proj, st.fields[k], 1);
        BSON_APPEND_DOCUMENT(&opts, "projection", &proj);
        bson_destroy(&proj);
    }
    md_db *db = tool_open_db(&o.db, false, PROG);
    if (!db)
        goto out_filter;
    const char *out = o.out ? o.out : "-";
    if (tool_stream_open(&st.s, out, true, false) != 0) {
        fprintf(stderr, "%s: cannot write %s: %s\n", PROG, out, strerror(errno));
        goto out_db;
    }
    int wr = 0;
    if (o.type == EX_CSV && !o.no_header)
        for (int k = 0; k < st.nf; k++)
            wr |= (k ? put(&st, ",") : 0) | put(&st, st.fields[k]) |
                  (k == st.nf - 1 ? put(&st, "\n") : 0);
    if (o.json_array)
        wr |= put(&st, "[");
    md_error err;
    int r = tool_each_doc(db, o.coll, &filter, &opts, one_doc, &st, &err);
    if (o.json_array)
        wr |= put(&st, o.pretty && st.n ? "\n]\n" : "]\n");
    if (tool_stream_close(&st.s) != 0 || wr != 0 || r > 0) {
        fprintf(stderr, "%s: cannot write %s: %s\n", PROG, out, strerror(errno));
    } else if (r < 0) {
        fprintf(stderr, "%s: %s (%s, code %d)\n", PROG, err.message, err.code_name, err.code);
    } else {
        fprintf(stderr, "exported %lld record%s\n", (long long)st.n, st.n == 1 ? "" : "s");
        rc = 0;
    }
out_db:
    md_db_close(db);
out_filter:
    bson_destroy(&filter);
    bson_destroy(&opts);
    for (int k = 0; k < st.nf; k++)
        free(st.fields[k]);
    free(st.fields);
    free(st.line);
    return rc;
}
