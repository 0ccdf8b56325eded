/*
 * tool.c -- the shared part of the minidoc subcommands (tool.h): finding
 * the subcommand on the command line, the database options, opening the
 * database, commands, document iteration, file/gzip streams, BSON
 * document framing and the archive's CRC-64.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tool.h"

static const struct {
    const char *name;
    tool_main_fn fn;
} tools[] = {
    {"dump", tool_dump_main},
    {"restore", tool_restore_main},
    {"import", tool_import_main},
    {"export", tool_export_main},
    {"inspect", tool_inspect_main},
    {"shell", tool_shell_main},
};

/* Options of minidoc.c and of the tools whose value is a separate word. */
static bool takes_value(const char *a)
{
    static const char *const with_value[] = {
        "--dbpath", "--engine", "--dbname", "--opts", "--out", "-o", "--collection", "-c",
        "--db", "-d", "--query", "-q", "--nsInclude", "--file", "--fields", "-f", "--type",
        "--mode", "--upsertFields", "--batchSize", "--sort", "--limit", "--skip", "--svg",
        "--fieldFile", "--diff", "--png", "--jsonFormat", "--eval", NULL};
    for (int k = 0; with_value[k]; k++)
        if (strcmp(a, with_value[k]) == 0)
            return true;
    return false;
}

static int first_word(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-') {
            if (takes_value(argv[i]))
                i++;
            continue;
        }
        return i;
    }
    return -1;
}

tool_main_fn tool_find(int argc, char **argv)
{
    int i = first_word(argc, argv);
    if (i < 0)
        return NULL;
    for (size_t k = 0; k < sizeof tools / sizeof tools[0]; k++)
        if (strcmp(argv[i], tools[k].name) == 0)
            return tools[k].fn;
    return NULL;
}

bool tool_is_name(int argc, char **argv, int i)
{
    return first_word(argc, argv) == i;
}

const char *tool_opt_value(int argc, char **argv, int *i, const char *name)
{
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) != 0)
        return NULL;
    if (argv[*i][n] == '=')
        return argv[*i] + n + 1;
    if (argv[*i][n] != '\0' || *i + 1 >= argc)
        return NULL;
    return argv[++*i];
}

int tool_db_opt(int argc, char **argv, int *i, tool_db_opts *o, const char *prog)
{
    static const char *const names[] = {"--dbpath", "--engine", "--dbname", "--opts"};
    const char **dst[] = {&o->dbpath, &o->engine, &o->dbname, &o->opts_json};
    if (strcmp(argv[*i], "--smallfiles") == 0) {
        o->smallfiles = true;
        return 1;
    }
    for (int k = 0; k < 4; k++) {
        size_t n = strlen(names[k]);
        if (strncmp(argv[*i], names[k], n) != 0 || (argv[*i][n] != '\0' && argv[*i][n] != '='))
            continue;
        const char *v = tool_opt_value(argc, argv, i, names[k]);
        if (!v) {
            fprintf(stderr, "%s: %s needs a value\n", prog, names[k]);
            return -1;
        }
        *dst[k] = v;
        return 1;
    }
    return 0;
}

/* One table row's value at argv[*i] into o: 1 taken, 0 not this row, -1
 * an error printed. */
static int opt_row(int argc, char **argv, int *i, const tool_opt *t, void *o, const char *prog)
{
    char *dst = (char *)o + t->off;
    const char *a = argv[*i], *v = NULL;
    if (t->kind == TOOL_FLAG || t->kind == TOOL_OPTIONAL) {
        size_t n = strlen(t->name);
        if (strcmp(a, t->name) == 0 || (t->alias && strcmp(a, t->alias) == 0)) {
            if (t->kind == TOOL_FLAG)
                *(bool *)dst = true;
            else
                *(const char **)dst = "-";
            return 1;
        }
        if (t->kind == TOOL_OPTIONAL && strncmp(a, t->name, n) == 0 && a[n] == '=') {
            *(const char **)dst = a + n + 1;
            return 1;
        }
        return 0;
    }
    if (!(v = tool_opt_value(argc, argv, i, t->name)) &&
        !(t->alias && (v = tool_opt_value(argc, argv, i, t->alias))))
        return 0;
    if (t->kind == TOOL_STR) {
        *(const char **)dst = v;
    } else if (t->kind == TOOL_CHOICE) {
        int k = 0;
        while (t->choices[k] && strcmp(t->choices[k], v) != 0)
            k++;
        if (!t->choices[k]) {
            fprintf(stderr, "%s: unknown %s '%s' (", prog, t->name + 2, v);
            for (int j = 0; t->choices[j]; j++)
                fprintf(stderr, "%s%s", j == 0 ? "" : t->choices[j + 1] ? ", " : " or ",
                        t->choices[j]);
            fprintf(stderr, ")\n");
            return -1;
        }
        *(int *)dst = k;
    } else {
        char *end;
        errno = 0;
        long long n = strtoll(v, &end, 10);
        if (*v == '\0' || *end || errno || n < t->min || n > t->max) {
            if (t->max == INT64_MAX)
                fprintf(stderr, "%s: %s must be an integer of at least %lld\n", prog, t->name,
                        (long long)t->min);
            else
                fprintf(stderr, "%s: %s must be %lld..%lld\n", prog, t->name,
                        (long long)t->min, (long long)t->max);
            return -1;
        }
        *(int64_t *)dst = n;
    }
    return 1;
}

int tool_parse(int argc, char **argv, const tool_opt *table, void *o, tool_db_opts *db,
               const char **positional, void (*usage)(FILE *), const char *prog,
               int (*more)(int argc, char **argv, int *i, void *o, const char *prog))
{
    for (int i = 1; i < argc; i++) {
        int r = tool_db_opt(argc, argv, &i, db, prog);
        if (r > 0 || (r == 0 && tool_is_name(argc, argv, i)))
            continue;
        if (r == 0 && more)
            r = more(argc, argv, &i, o, prog);
        for (const tool_opt *t = table; r == 0 && t->name; t++)
            r = opt_row(argc, argv, &i, t, o, prog);
        if (r < 0)
            return -1;
        if (r > 0)
            continue;
        if (strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            exit(0);
        }
        if (positional && !*positional && argv[i][0] != '-') {
            *positional = argv[i];
            continue;
        }
        fprintf(stderr, "%s: unexpected argument '%s'\n", prog, argv[i]);
        return -1;
    }
    return 0;
}

/* The library's extended-JSON reader (md_json_parse), so that the tools
 * read {"a": {"$type": "string"}} as the query it is, as the CLI does. */
int tool_json_parse(const char *text, ssize_t len, bson_t *out, char *msg, size_t msgcap)
{
    md_error err;
    if (md_json_parse(text, len, out, &err) != 0) {
        snprintf(msg, msgcap, "%.200s", err.message);
        return -1;
    }
    return 0;
}

md_db *tool_open_db(const tool_db_opts *o, bool create, const char *prog)
{
    md_db *db = NULL;
    md_error err;
    struct stat st;
    char msg[256];
    if (!o->dbpath) {
        fprintf(stderr, "%s: --dbpath is required\n", prog);
        return NULL;
    }
    if (!create && stat(o->dbpath, &st) != 0) {
        fprintf(stderr, "%s: cannot open %s: %s\n", prog, o->dbpath, strerror(errno));
        return NULL;
    }
    bson_t base, opts;
    if (tool_json_parse(o->opts_json ? o->opts_json : "{}", -1, &base, msg, sizeof msg) != 0) {
        fprintf(stderr, "%s: --opts is not valid JSON: %s\n", prog, msg);
        bson_destroy(&base);
        return NULL;
    }
    bson_init(&opts);
    bson_copy_to_excluding_noinit(&base, &opts, "engine", "dbName", "smallFiles", "create",
                                  NULL);
    bson_iter_t it;
    if (o->engine)
        BSON_APPEND_UTF8(&opts, "engine", o->engine);
    else if (bson_iter_init_find(&it, &base, "engine"))
        bson_append_iter(&opts, "engine", -1, &it);
    if (o->dbname)
        BSON_APPEND_UTF8(&opts, "dbName", o->dbname);
    else if (bson_iter_init_find(&it, &base, "dbName"))
        bson_append_iter(&opts, "dbName", -1, &it);
    if (o->smallfiles)
        BSON_APPEND_BOOL(&opts, "smallFiles", true);
    else if (bson_iter_init_find(&it, &base, "smallFiles"))
        bson_append_iter(&opts, "smallFiles", -1, &it);
    if (!create)
        BSON_APPEND_BOOL(&opts, "create", false);
    int rc = md_db_open(o->dbpath, &opts, &db, &err);
    bson_destroy(&opts);
    bson_destroy(&base);
    if (rc != 0) {
        fprintf(stderr, "%s: cannot open %s: %s (%s, code %d)\n", prog, o->dbpath, err.message,
                err.code_name, err.code);
        return NULL;
    }
    return db;
}

int tool_command(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err)
{
    int rc = md_db_command(db, cmd, reply, err);
    bson_iter_t it;
    if (rc == 0 && !(bson_iter_init_find(&it, reply, "ok") && bson_iter_as_bool(&it)))
        rc = MD_ERROR;
    return rc;
}

int tool_each_doc(md_db *db, const char *coll, const bson_t *filter, const bson_t *opts,
                  int (*fn)(const bson_t *doc, void *arg), void *arg, md_error *err)
{
    md_collection *c = md_db_get_collection(db, coll);
    bson_t empty = BSON_INITIALIZER;
    md_cursor *cur = md_collection_find_with_opts(c, filter ? filter : &empty, opts);
    const bson_t *doc;
    int rc = 0;
    while (rc == 0 && md_cursor_next(cur, &doc))
        rc = fn(doc, arg);
    if (rc == 0 && md_cursor_error(cur, err))
        rc = -1;
    md_cursor_destroy(cur);
    md_collection_destroy(c);
    return rc;
}

/* ---- streams -------------------------------------------------------------- */

int tool_stream_open(tool_stream *s, const char *path, bool write, bool gzip)
{
    memset(s, 0, sizeof *s);
    snprintf(s->path, sizeof s->path, "%s", path);
    bool std = strcmp(path, "-") == 0;
    if (gzip) {
        int fd = std ? dup(write ? 1 : 0) : -1;
        if (std && fd < 0)
            return -1;
        s->gz = std ? gzdopen(fd, write ? "wb" : "rb") : gzopen(path, write ? "wb" : "rb");
        if (!s->gz && errno == 0)
            errno = ENOMEM;
        return s->gz ? 0 : -1;
    }
    s->f = std ? (write ? stdout : stdin) : fopen(path, write ? "wb" : "rb");
    return s->f ? 0 : -1;
}

ssize_t tool_stream_read(tool_stream *s, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r;
        if (s->gz) {
            int k = gzread(s->gz, (char *)buf + got, (unsigned)(n - got > (1u << 30) ? 1u << 30 : n - got));
            if (k < 0) {
                s->failed = true;
                return -1;
            }
            r = k;
        } else {
            r = (ssize_t)fread((char *)buf + got, 1, n - got, s->f);
            if (r == 0 && ferror(s->f)) {
                s->failed = true;
                return -1;
            }
        }
        if (r == 0) {
            s->eof = true;
            return got == 0 ? 0 : -1;
        }
        got += (size_t)r;
    }
    s->bytes += n;
    return (ssize_t)n;
}

int tool_stream_write(tool_stream *s, const void *buf, size_t n)
{
    if (s->failed)
        return -1;
    if (n == 0)
        return 0;
    bool ok = s->gz ? gzwrite(s->gz, buf, (unsigned)n) == (int)n : fwrite(buf, 1, n, s->f) == n;
    if (!ok) {
        s->failed = true;
        return -1;
    }
    s->bytes += n;
    return 0;
}

int tool_stream_close(tool_stream *s)
{
    int rc = s->failed ? -1 : 0;
    int saved = errno;
    if (s->gz) {
        if (gzclose(s->gz) != Z_OK)
            rc = -1;
    } else if (s->f == stdout) {
        if (fflush(stdout) != 0)
            rc = -1;
    } else if (s->f && s->f != stdin) {
        if (fclose(s->f) != 0)
            rc = -1;
    }
    if (rc == 0)
        errno = saved;
    else if (errno == 0)
        errno = EIO;
    s->f = NULL;
    s->gz = NULL;
    return rc;
}

char *tool_slurp(const char *path, bool gzip, size_t *lenp)
{
    tool_stream s;
    if (tool_stream_open(&s, path, false, gzip) != 0)
        return NULL;
    size_t cap = 65536, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (len + 65536 + 1 > cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb)
                break;
            buf = nb;
            cap *= 2;
        }
        ssize_t r = s.gz ? gzread(s.gz, buf + len, 65536)
                         : (ssize_t)fread(buf + len, 1, 65536, s.f);
        if (r < 0 || (r == 0 && s.f && ferror(s.f))) {
            s.failed = true;
            break;
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    bool failed = s.failed;
    tool_stream_close(&s);
    if (failed) {
        free(buf);
        errno = EIO;
        return NULL;
    }
    buf[len] = '\0';
    if (lenp)
        *lenp = len;
    return buf;
}

int tool_read_bson(tool_stream *s, uint8_t **buf, size_t *cap, bool allow_term, char *msg,
                   size_t msgcap)
{
    uint8_t lenb[4];
    ssize_t r = tool_stream_read(s, lenb, 4);
    if (r == 0)
        return 0;
    if (r < 0) {
        snprintf(msg, msgcap, s->failed ? "read error" : "truncated document length");
        return -1;
    }
    int32_t len = (int32_t)((uint32_t)lenb[0] | (uint32_t)lenb[1] << 8 |
                            (uint32_t)lenb[2] << 16 | (uint32_t)lenb[3] << 24);
    if (len == -1 && allow_term)
        return 2;
    if (len < 5 || len > 16 * 1024 * 1024 + 16 * 1024) {
        snprintf(msg, msgcap, "invalid BSON length %d", len);
        return -1;
    }
    if ((size_t)len > *cap) {
        uint8_t *nb = realloc(*buf, (size_t)len);
        if (!nb) {
            snprintf(msg, msgcap, "out of memory");
            return -1;
        }
        *buf = nb;
        *cap = (size_t)len;
    }
    memcpy(*buf, lenb, 4);
    if (tool_stream_read(s, *buf + 4, (size_t)len - 4) != len - 4) {
        snprintf(msg, msgcap, "truncated document (length %d)", len);
        return -1;
    }
    if ((*buf)[len - 1] != 0) {
        snprintf(msg, msgcap, "document of length %d does not end with 0", len);
        return -1;
    }
    return 1;
}

uint64_t tool_crc64(uint64_t crc, const uint8_t *p, size_t n)
{
    static uint64_t table[256];
    static bool ready;
    if (!ready) {
        for (int i = 0; i < 256; i++) {
            uint64_t c = (uint64_t)i;
            for (int k = 0; k < 8; k++)
                c = c & 1 ? (c >> 1) ^ 0xC96C5795D7870F42ULL : c >> 1;
            table[i] = c;
        }
        ready = true;
    }
    crc = ~crc;
    for (size_t i = 0; i < n; i++)
        crc = table[(uint8_t)crc ^ p[i]] ^ (crc >> 8);
    return ~crc;
}

int tool_mkdirs(const char *path)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
        return -1;
    struct stat st;
    if (stat(buf, &st) != 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}
