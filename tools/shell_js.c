/*
 * shell_js.c -- the shell's JavaScript context: the prelude and the host
 * functions it stands on.
 *
 * The prelude is tools/shell_print.js followed by tools/shell_api.js,
 * turned into a C string literal at build time (the Makefile writes
 * $(BUILD)/tools/shell_prelude.inc), and evaluated as global code.  The
 * host functions (js_ctx_add_host) are the only way from JavaScript to the
 * data: __host_command sends a command document to the database it names
 * (listDatabases and dropDatabase to the data directory, srv_db.c), and
 * answers with the reply, ok: 0 included (the prelude throws it as a
 * MongoServerError).  __host_print writes a line, __host_exit records exit
 * or quit(), __host_colors says whether the output is a terminal.
 *
 * The context has no call time limit (a shell user may run a long loop;
 * Ctrl-C ends the process) and writes integral numbers as int32, as
 * mongosh does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shell.h"

static const char prelude[] =
#include "shell_prelude.inc"
    ;

/* ---- host functions ----------------------------------------------------------------- */

/* args[i] as a string, or NULL. */
static const char *arg_str(const bson_t *args, const char *i)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, args, i) || !BSON_ITER_HOLDS_UTF8(&it))
        return NULL;
    return bson_iter_utf8(&it, NULL);
}

static bool arg_bool(const bson_t *args, const char *i)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, args, i) && bson_iter_as_bool(&it);
}

static void reply_error(bson_t *reply, const md_error *err)
{
    bson_reinit(reply);
    BSON_APPEND_DOUBLE(reply, "ok", 0.0);
    BSON_APPEND_UTF8(reply, "errmsg", err->message);
    BSON_APPEND_INT32(reply, "code", err->code);
    BSON_APPEND_UTF8(reply, "codeName", err->code_name[0] ? err->code_name : "UnknownError");
}

static void list_databases(shell *sh, const bson_t *cmd, bson_t *reply)
{
    bson_iter_t it;
    bson_t dbs;
    int64_t total = 0;
    md_error err;
    bool name_only = bson_iter_init_find(&it, cmd, "nameOnly") && bson_iter_as_bool(&it);
    BSON_APPEND_ARRAY_BEGIN(reply, "databases", &dbs);
    int rc = srv_dbs_list(sh->dbs, name_only, &dbs, &total, &err);
    bson_append_array_end(reply, &dbs);
    if (rc) {
        reply_error(reply, &err);
        return;
    }
    if (!name_only)
        BSON_APPEND_DOUBLE(reply, "totalSize", (double)total);
    BSON_APPEND_DOUBLE(reply, "ok", 1.0);
}

/* __host_command(dbName, cmd): the reply. */
static int host_command(void *arg, const bson_t *args, bson_t *ret, md_error *err)
{
    shell *sh = arg;
    const char *name = arg_str(args, "0");
    bson_iter_t it;
    bson_t cmd, reply;
    const uint8_t *data;
    uint32_t len;
    if (!name || !bson_iter_init_find(&it, args, "1") || !BSON_ITER_HOLDS_DOCUMENT(&it))
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                            "__host_command(dbName, command document)");
    bson_iter_document(&it, &len, &data);
    if (!bson_init_static(&cmd, data, len))
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE, "invalid command document");
    const char *verb = bson_iter_init(&it, &cmd) && bson_iter_next(&it) ? bson_iter_key(&it) : "";
    md_error e;
    md_error_clear(&e);
    bson_init(&reply);
    if (strcmp(verb, "listDatabases") == 0) {
        list_databases(sh, &cmd, &reply);
    } else if (strcmp(verb, "dropDatabase") == 0) {
        if (srv_db_drop(sh->dbs, name, &reply, &e) != 0)
            reply_error(&reply, &e);
        else
            BSON_APPEND_DOUBLE(&reply, "ok", 1.0);
    } else {
        srv_db *db;
        if (srv_db_get(sh->dbs, name, true, &db, &e) != 0) {
            reply_error(&reply, &e);
        } else {
            bson_destroy(&reply);
            md_db_command(srv_db_handle(db), &cmd, &reply, &e);
            srv_db_put(db);
        }
    }
    BSON_APPEND_DOCUMENT(ret, "r", &reply);
    bson_destroy(&reply);
    return 0;
}

/* __host_print(text, toStderr) */
static int host_print(void *arg, const bson_t *args, bson_t *ret, md_error *err)
{
    const char *text = arg_str(args, "0");
    FILE *f = arg_bool(args, "1") ? stderr : stdout;
    fprintf(f, "%s\n", text ? text : "");
    fflush(f);
    return 0;
}

/* __host_exit(status) */
static int host_exit(void *arg, const bson_t *args, bson_t *ret, md_error *err)
{
    shell *sh = arg;
    bson_iter_t it;
    sh->exit_asked = true;
    sh->exit_status = bson_iter_init_find(&it, args, "0") && BSON_ITER_HOLDS_NUMBER(&it)
                          ? (int)bson_iter_as_int64(&it)
                          : 0;
    return 0;
}

/* __host_colors(forStderr) */
static int host_colors(void *arg, const bson_t *args, bson_t *ret, md_error *err)
{
    shell *sh = arg;
    BSON_APPEND_BOOL(ret, "r", arg_bool(args, "0") ? sh->colors_err : sh->colors_out);
    return 0;
}

/* ---- the context ----------------------------------------------------------------------- */

static int define(shell *sh, const char *src, int *fn)
{
    md_error err;
    if (js_func_new(sh->js, src, strlen(src), fn, &err) != 0) {
        fprintf(stderr, "minidoc shell: %s\n", err.message);
        return -1;
    }
    return 0;
}

int shell_js_init(shell *sh, const char *dbname)
{
    md_error err;
    js_opts o = {0, (int64_t)1 << 40, 0, true}; /* calls may run ~35 years */
    if (js_ctx_new(&o, &sh->js, &err) != 0) {
        fprintf(stderr, "minidoc shell: %s\n", err.message);
        return -1;
    }
    static const struct {
        const char *name;
        js_host_fn fn;
    } hosts[] = {{"__host_command", host_command},
                 {"__host_print", host_print},
                 {"__host_exit", host_exit},
                 {"__host_colors", host_colors}};
    for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++)
        if (js_ctx_add_host(sh->js, hosts[i].name, hosts[i].fn, sh, &err) != 0) {
            fprintf(stderr, "minidoc shell: %s\n", err.message);
            return -1;
        }
    int load;
    if (define(sh, "function (src, db) { (0, eval)(src); __shell.start(db); }", &load) ||
        define(sh, "function (src, mode) { return __shell.run(src, mode); }", &sh->fn_run) ||
        define(sh, "function (src) { return __shell.incomplete(src); }", &sh->fn_incomplete) ||
        define(sh, "function (line) { return __shell.complete(line); }", &sh->fn_complete) ||
        define(sh, "function () { return __shell.dbName(); }", &sh->fn_dbname))
        return -1;
    bson_t args = BSON_INITIALIZER;
    BSON_APPEND_UTF8(&args, "0", prelude);
    BSON_APPEND_UTF8(&args, "1", dbname);
    int rc = js_func_call(sh->js, load, NULL, &args, NULL, NULL, &err);
    bson_destroy(&args);
    if (rc != 0) {
        fprintf(stderr, "minidoc shell: the prelude failed: %s\n", err.message);
        return -1;
    }
    return 0;
}

void shell_js_cleanup(shell *sh)
{
    js_ctx_destroy(sh->js);
    sh->js = NULL;
}

/* Call fn(a0[, a1]) and give its result in *out (initialized). */
static int call(shell *sh, int fn, const char *a0, const char *a1, bson_t *out)
{
    md_error err;
    bson_t args = BSON_INITIALIZER;
    if (a0)
        BSON_APPEND_UTF8(&args, "0", a0);
    if (a1)
        BSON_APPEND_UTF8(&args, "1", a1);
    bson_init(out);
    int rc = js_func_call(sh->js, fn, NULL, &args, out, "r", &err);
    bson_destroy(&args);
    if (rc != 0) {
        fprintf(stderr, "%s\n", err.message);
        fflush(stderr);
    }
    return rc;
}

static bool result_bool(const bson_t *out)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, out, "r") && bson_iter_as_bool(&it);
}

bool shell_js_run(shell *sh, const char *src, shell_mode mode)
{
    static const char *const modes[] = {"repl", "eval", "script"};
    bson_t out;
    bool ok = call(sh, sh->fn_run, src, modes[mode], &out) == 0 && result_bool(&out);
    bson_destroy(&out);
    return ok;
}

bool shell_js_incomplete(shell *sh, const char *src)
{
    bson_t out;
    bool r = call(sh, sh->fn_incomplete, src, NULL, &out) == 0 && result_bool(&out);
    bson_destroy(&out);
    return r;
}

char **shell_js_complete(shell *sh, const char *line)
{
    bson_t out;
    bson_iter_t it, a;
    char **v = NULL;
    if (call(sh, sh->fn_complete, line, NULL, &out) == 0 && bson_iter_init_find(&it, &out, "r") &&
        BSON_ITER_HOLDS_ARRAY(&it) && bson_iter_recurse(&it, &a)) {
        size_t n = 0, cap = 8;
        v = malloc(cap * sizeof *v);
        while (v && bson_iter_next(&a)) {
            if (!BSON_ITER_HOLDS_UTF8(&a))
                continue;
            if (n + 2 > cap) {
                char **nv = realloc(v, (cap *= 2) * sizeof *nv);
                if (!nv)
                    break;
                v = nv;
            }
            v[n++] = strdup(bson_iter_utf8(&a, NULL));
        }
        if (v)
            v[n] = NULL;
    }
    bson_destroy(&out);
    return v;
}

void shell_js_dbname(shell *sh, char *buf, size_t n)
{
    bson_t out;
    bson_iter_t it;
    const char *name = "test";
    if (call(sh, sh->fn_dbname, NULL, NULL, &out) == 0 && bson_iter_init_find(&it, &out, "r") &&
        BSON_ITER_HOLDS_UTF8(&it))
        name = bson_iter_utf8(&it, NULL);
    snprintf(buf, n, "%s", name);
    bson_destroy(&out);
}
