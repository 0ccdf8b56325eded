/*
 * q_api.c -- include/minidoc.h: opening and closing an md_db, collection
 * handles, the typed wrappers and md_cursor.
 *
 * The wrappers hold no logic of their own.  insert, update, delete and find
 * build the parsed statement the command parser would produce (q_upd_stmt,
 * a delete's filter and limit, q_find_args) and run the same execution code
 * (q_update_exec, q_delete_exec, q_insert_exec, q_find_by_id) under the
 * same lock (q_op_enter): no command document is built and parsed again,
 * and the caller's documents are checked once, here, where they enter.
 * Options these typed paths do not read, and every other wrapper, build the
 * command document a MongoDB driver would send and run md_db_command(),
 * whose parser accepts or rejects them.  Replies take libmongoc's shape
 * (insertedCount, matchedCount, modifiedCount, deletedCount, upsertedCount,
 * upsertedId).  A statement's error becomes an error return filled from the
 * first writeError (also in the reply's writeErrors), as libmongoc does.  md_cursor walks find / getMore batches; the document it
 * hands out points into the current batch reply, so it stays valid until
 * the next md_cursor_next() or md_cursor_destroy().
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "q_int.h"

/* ---- md_db ---------------------------------------------------------------------- */

/* The engine when the options name none and the directory holds no data
 * files yet: btree, as wiredTiger became MongoDB's default in 3.2. */
#define Q_DEFAULT_ENGINE "btree"

/* *engine stays NULL when the options do not name one. */
static int open_opts(const bson_t *opts, const char **engine, const char **name, bool *create,
                     md_error *err)
{
    bson_iter_t it;
    *engine = NULL;
    *name = "test";
    *create = true;
    if (!opts)
        return 0;
    if (bson_iter_init_find(&it, opts, "engine")) {
        if (!BSON_ITER_HOLDS_UTF8(&it))
            return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE, "engine must be a string");
        *engine = bson_iter_utf8(&it, NULL);
    }
    if (bson_iter_init_find(&it, opts, "dbName")) {
        if (!BSON_ITER_HOLDS_UTF8(&it))
            return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE, "dbName must be a string");
        *name = bson_iter_utf8(&it, NULL);
    }
    if (bson_iter_init_find(&it, opts, "create"))
        *create = bson_iter_as_bool(&it);
    return 0;
}

/* MongoDB's database name rules (no / \ . " $ space, at most 63 bytes). */
static int check_db_name(const char *name, md_error *err)
{
    size_t n = strlen(name);
    if (n == 0 || n >= 64 || strpbrk(name, "/\\. \"$*<>:|?") != NULL)
        return q_err(err, MD_EINVAL, MD_CODE_INVALID_NAMESPACE, "Invalid database name: '%s'",
                     name);
    return 0;
}

static int ensure_dir(const char *path, bool create, md_error *err)
{
    struct stat st;
    if (stat(path, &st) == 0)
        return S_ISDIR(st.st_mode) ? 0
                                   : q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                                           "dbpath %s is not a directory", path);
    if (!create)
        return q_err(err, MD_NOTFOUND, MD_CODE_NON_EXISTENT_PATH,
                     "dbpath (%s) does not exist", path);
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        return q_err(err, MD_EIO, MD_CODE_FILE_STREAM_FAILED, "cannot create dbpath %s: %s",
                     path, strerror(errno));
    return 0;
}

int md_db_open(const char *path, const bson_t *opts, md_db **out, md_error *err)
{
    const char *engine, *name;
    bool create;
    md_error_clear(err);
    *out = NULL;
    if (!path)
        return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE, "md_db_open: path is NULL");
    int rc = open_opts(opts, &engine, &name, &create, err);
    if (!rc)
        rc = check_db_name(name, err);
    const eng_ops *ops = rc || !engine ? NULL : eng_find(engine);
    if (!rc && engine && !ops)
        rc = q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE, "unknown storage engine: '%s'", engine);
    if (!rc)
        rc = ensure_dir(path, create, err);
    if (rc)
        return rc;
    /* An existing dbpath keeps the engine that created it (MongoDB 3.2+). */
    const eng_ops *found = eng_detect(path);
    if (found && ops && found != ops)
        return q_err(err, MD_EINVAL, 28662,
                     "Detected data files in %s created by the '%s' storage engine, but the "
                     "specified storage engine was '%s'.",
                     path, found->name, ops->name);
    if (!ops)
        ops = found ? found : eng_find(Q_DEFAULT_ENGINE);
    md_db *db = calloc(1, sizeof *db);
    assert(db);
    db->ops = ops;
    db->path = strdup(path);
    snprintf(db->name, sizeof db->name, "%s", name);
    db->start_ms = q_now_ms();
    db->cursor_seed = (uint64_t)db->start_ms * 2654435761u ^ (uint64_t)getpid() ^
                      (uint64_t)(uintptr_t)db;
    if ((rc = q_db_configure(db, opts, err)) != 0 || (rc = q_lock_init(db, opts, err)) != 0) {
        free(db->path);
        free(db);
        return rc;
    }
    rc = eng_open(ops, path, db->name, opts, &db->eng, err);
    if (rc) {
        q_err_engine(err, rc, "opening the storage engine");
        q_lock_destroy(db);
        free(db->path);
        free(db);
        return rc;
    }
    if ((rc = q_catalog_load(db, err)) == 0 && (rc = q_catalog_upgrade(db, err)) != 0)
        q_catalog_unload(db);
    if (rc) {
        eng_close(db->eng);
        q_lock_destroy(db);
        free(db->path);
        free(db);
        return rc;
    }
    *out = db;
    return 0;
}

void md_db_close(md_db *db)
{
    if (!db)
        return;
    q_cursor_kill_coll(db, NULL);
    eng_flush(db->eng, true, NULL);
    q_catalog_unload(db);
    eng_close(db->eng);
    q_lock_destroy(db);
    free(db->path);
    free(db);
}

const char *md_db_name(const md_db *db)
{
    return db->name;
}

/* ---- collection handles -------------------------------------------------------- */

struct md_collection {
    md_db *db;
    char name[ENG_IDENT_MAX];
    bool ns_ok; /* q_ns_make accepted db.name when the handle was made
                   (both fixed for the handle's life) */
};

md_collection *md_db_get_collection(md_db *db, const char *name)
{
    md_collection *c = calloc(1, sizeof *c);
    assert(c && db && name);
    c->db = db;
    snprintf(c->name, sizeof c->name, "%s", name);
    char ns[ENG_IDENT_MAX];
    c->ns_ok = q_ns_make(db, c->name, ns, NULL) == 0;
    return c;
}

void md_collection_destroy(md_collection *coll)
{
    free(coll);
}

const char *md_collection_get_name(const md_collection *coll)
{
    return coll->name;
}

/* ---- reply translation ----------------------------------------------------------- */

static int64_t reply_int(const bson_t *r, const char *key)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, r, key) && BSON_ITER_HOLDS_NUMBER(&it)
               ? bson_iter_as_int64(&it)
               : 0;
}

/* The first writeError as an error return (MD_EDUPKEY for 11000). */
static int first_write_error(const bson_t *r, md_error *err)
{
    bson_iter_t it, we;
    if (!bson_iter_init_find(&it, r, "writeErrors") || !BSON_ITER_HOLDS_ARRAY(&it))
        return 0;
    bson_iter_recurse(&it, &we);
    if (!bson_iter_next(&we) || !BSON_ITER_HOLDS_DOCUMENT(&we))
        return 0;
    bson_iter_t f;
    int code = MD_CODE_UNKNOWN_ERROR;
    const char *msg = "write error";
    bson_iter_recurse(&we, &f);
    while (bson_iter_next(&f)) {
        if (strcmp(bson_iter_key(&f), "code") == 0)
            code = (int)bson_iter_as_int64(&f);
        else if (strcmp(bson_iter_key(&f), "errmsg") == 0 && BSON_ITER_HOLDS_UTF8(&f))
            msg = bson_iter_utf8(&f, NULL);
    }
    return q_err(err, code == MD_CODE_DUPLICATE_KEY ? MD_EDUPKEY : MD_ERROR, code, "%s", msg);
}

typedef enum { W_INSERT, W_UPDATE, W_DELETE } write_kind;

static void translate_write(const bson_t *r, write_kind kind, bson_t *out)
{
    bson_iter_t it, up, id;
    int64_t n = reply_int(r, "n"), nup = 0;
    if (kind == W_INSERT)
        BSON_APPEND_INT64(out, "insertedCount", n);
    if (kind == W_DELETE)
        BSON_APPEND_INT64(out, "deletedCount", n);
    if (kind == W_UPDATE) {
        bool have_id = false;
        if (bson_iter_init_find(&it, r, "upserted") && BSON_ITER_HOLDS_ARRAY(&it)) {
            bson_iter_recurse(&it, &up);
            while (bson_iter_next(&up)) {
                nup++;
                if (!have_id && BSON_ITER_HOLDS_DOCUMENT(&up) && bson_iter_recurse(&up, &id) &&
                    bson_iter_find(&id, "_id"))
                    have_id = true;
            }
        }
        BSON_APPEND_INT64(out, "matchedCount", n - nup);
        BSON_APPEND_INT64(out, "modifiedCount", reply_int(r, "nModified"));
        BSON_APPEND_INT64(out, "upsertedCount", nup);
        if (have_id)
            bson_append_iter(out, "upsertedId", -1, &id);
    }
    if (bson_iter_init_find(&it, r, "writeErrors"))
        bson_append_iter(out, NULL, 0, &it);
}

/* Copy every field of opts into cmd except those in `skip` (NULL-terminated). */
static void append_opts(bson_t *cmd, const bson_t *opts, const char *const *skip)
{
    bson_iter_t it;
    if (!opts || !bson_iter_init(&it, opts))
        return;
    while (bson_iter_next(&it)) {
        bool skipped = false;
        for (size_t i = 0; skip && skip[i] && !skipped; i++)
            skipped = strcmp(bson_iter_key(&it), skip[i]) == 0;
        if (!skipped)
            bson_append_iter(cmd, NULL, 0, &it);
    }
}

static int run_write(md_collection *coll, bson_t *cmd, write_kind kind, bson_t *reply,
                     md_error *err)
{
    bson_t r;
    int rc = md_db_command(coll->db, cmd, &r, err);
    if (reply)
        bson_init(reply);
    if (!rc) {
        if (reply)
            translate_write(&r, kind, reply);
        rc = first_write_error(&r, err);
    }
    bson_destroy(&r);
    bson_destroy(cmd);
    return rc;
}

/* ---- the typed write path -------------------------------------------------------------- */

/* Does opts hold only fields named in `known` (NULL-terminated)? */
static bool opts_only(const bson_t *opts, const char *const *known)
{
    bson_iter_t it;
    if (!opts)
        return true;
    if (!bson_iter_init(&it, opts))
        return false;
    while (bson_iter_next(&it)) {
        bool ok = false;
        for (size_t i = 0; known[i] && !ok; i++)
            ok = strcmp(bson_iter_key(&it), known[i]) == 0;
        if (!ok)
            return false;
    }
    return true;
}

/* A caller's document entering the library: it must be BSON that reads
 * safely (lengths, terminators, types, UTF-8 keys), as md_db_command
 * checks a command document.  The engines' one-pass check
 * (eng_bson_well_formed) is the same test without libbson's visitor. */
static int check_doc(const bson_t *doc, const char *what, md_error *err)
{
    if (!doc || !eng_bson_well_formed(bson_get_data(doc), doc->len))
        return q_err(err, MD_EINVAL, MD_CODE_INVALID_BSON, "%s is not valid BSON", what);
    return 0;
}

static void view_of(const bson_t *doc, bson_t *view)
{
    bson_init_static(view, bson_get_data(doc), doc->len);
}

/* Before the lock, after the statement's own documents were checked (rc):
 * the options document and its write concern; the reply is started. */
static int typed_write_check(int rc, const bson_t *opts, bool *durable, bson_t *reply,
                             md_error *err)
{
    if (!rc && opts)
        rc = check_doc(opts, "opts", err);
    if (!rc)
        rc = q_write_concern(opts, durable, err);
    if (reply)
        bson_init(reply);
    return rc;
}

/* Take the database lock in `mode`, then what every typed write checks
 * under it: the namespace and a handle that still takes writes.  The
 * caller leaves with q_op_leave whatever this returns. */
static int typed_write_enter(md_collection *coll, int mode, md_error *err)
{
    char ns[ENG_IDENT_MAX];
    q_op_enter(coll->db, mode, mode == Q_OP_CREATE ? coll->name : NULL, true);
    int rc = coll->ns_ok ? 0 : q_ns_make(coll->db, coll->name, ns, err);
    return rc ? rc : q_write_allowed(coll->db, err);
}

/* A statement's error: the reply's writeErrors entry and the return value
 * libmongoc gives (MD_EDUPKEY for a duplicate key). */
static int typed_write_error(bson_t *reply, int index, md_error *err)
{
    int code = err->code ? err->code : MD_CODE_UNKNOWN_ERROR;
    if (reply) {
        bson_t arr, e;
        BSON_APPEND_ARRAY_BEGIN(reply, "writeErrors", &arr);
        BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &e);
        BSON_APPEND_INT32(&e, "index", index);
        BSON_APPEND_INT32(&e, "code", code);
        BSON_APPEND_UTF8(&e, "errmsg", err->message);
        bson_append_document_end(&arr, &e);
        bson_append_array_end(reply, &arr);
    }
    return code == MD_CODE_DUPLICATE_KEY ? MD_EDUPKEY : MD_ERROR;
}

static const char *const insert_known[] = {"writeConcern", "ordered", NULL};
#define TOP_ON_STACK 16

/* insert_many without a command document: each document checked and
 * inserted as q_cmd_insert does; false when the options need the parser. */
static bool typed_insert(md_collection *coll, const bson_t **docs, size_t n,
                         const bson_t *opts, bson_t *reply, md_error *err, int *rcp)
{
    bson_iter_t it;
    bool durable, ordered = true;
    q_coll *c = NULL;
    int rc = 0, failed = -1;
    int64_t ok = 0;
    if (coll->db->no_fast || n < 1 || n > 100000 || !opts_only(opts, insert_known))
        return false;
    if (opts && bson_iter_init_find(&it, opts, "ordered")) {
        if (!BSON_ITER_HOLDS_BOOL(&it))
            return false;
        ordered = bson_iter_bool(&it);
    }
    /* the check that validates a document also notes its top-level names
     * for the insert, so q_doc_prepare_insert does not walk them again */
    eng_bson_top stack_top[TOP_ON_STACK];
    eng_bson_top *top = n <= TOP_ON_STACK ? stack_top : malloc(n * sizeof *top);
    if (!top)
        rc = q_err(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
    for (size_t i = 0; i < n && !rc; i++)
        if (!docs[i] || !eng_bson_well_formed_top(bson_get_data(docs[i]), docs[i]->len, &top[i]))
            rc = q_err(err, MD_EINVAL, MD_CODE_INVALID_BSON, "document is not valid BSON");
    if ((rc = typed_write_check(rc, opts, &durable, reply, err)) != 0) {
        if (top != stack_top)
            free(top);
        *rcp = rc;
        return true;
    }
    md_db *db = coll->db;
    md_error stmt;
    rc = typed_write_enter(coll, Q_OP_CREATE, err);
    if (!rc)
        rc = q_coll_get_or_create(db, coll->name, NULL, &c, err);
    if (!rc) {
        /* {j: true}: one durable commit for the batch, as q_cmd_insert. */
        bool synced = !durable;
        q_coll_lock(db, c, true);
        for (size_t i = 0; i < n; i++) {
            md_error_clear(&stmt);
            if (q_insert_exec(db, c, docs[i], &top[i], durable && i == n - 1, &stmt) == 0) {
                ok++;
                synced = synced || i == n - 1;
                continue;
            }
            if (failed < 0) {
                failed = (int)i;
                *err = stmt;
            }
            if (ordered || Q_LOAD(db->failed))
                break;
        }
        q_coll_unlock(db, c);
        if (!synced && ok > 0) /* ended on an error: that error is the one reported */
            eng_flush(db->eng, true, NULL);
    }
    q_op_leave(db);
    if (top != stack_top)
        free(top);
    if (!rc && reply)
        BSON_APPEND_INT64(reply, "insertedCount", ok);
    *rcp = rc ? rc : failed >= 0 ? typed_write_error(reply, failed, err) : 0;
    return true;
}

static const char *const update_known[] = {"upsert", "arrayFilters", "writeConcern", NULL};

/* update / replace without a command document; false when the options
 * need the parser. */
static bool typed_update(md_collection *coll, const bson_t *q, const bson_t *u, bool multi,
                         const bson_t *opts, bson_t *reply, md_error *err, int *rcp)
{
    bson_iter_t it;
    bool durable;
    q_upd_stmt s;
    memset(&s, 0, sizeof s);
    s.multi = multi;
    if (coll->db->no_fast || !opts_only(opts, update_known))
        return false;
    if (opts && bson_iter_init_find(&it, opts, "upsert")) {
        if (!BSON_ITER_HOLDS_BOOL(&it) && !BSON_ITER_HOLDS_NUMBER(&it))
            return false;
        s.upsert = bson_iter_as_bool(&it);
    }
    if (opts && bson_iter_init_find(&it, opts, "arrayFilters")) {
        const uint8_t *data;
        uint32_t len;
        if (!BSON_ITER_HOLDS_ARRAY(&it))
            return false;
        bson_iter_array(&it, &len, &data);
        s.has_af = bson_init_static(&s.af, data, len);
    }
    int rc = check_doc(q, "selector", err);
    if (!rc)
        rc = check_doc(u, "update", err);
    if ((rc = typed_write_check(rc, opts, &durable, reply, err)) != 0) {
        *rcp = rc;
        return true;
    }
    view_of(q, &s.q);
    view_of(u, &s.u);
    md_db *db = coll->db;
    q_upd_out o = {.id = BSON_INITIALIZER};
    int srv = 0;
    rc = typed_write_enter(coll, Q_OP_CREATE, err);
    if (!rc)
        srv = q_update_exec(db, coll->name, durable, &s, &o, err);
    q_op_leave(db);
    if (!rc && reply) {
        bson_iter_t id;
        BSON_APPEND_INT64(reply, "matchedCount", o.n - o.upserted);
        BSON_APPEND_INT64(reply, "modifiedCount", o.modified);
        BSON_APPEND_INT64(reply, "upsertedCount", o.upserted);
        if (o.upserted && bson_iter_init_find(&id, &o.id, "_id"))
            bson_append_iter(reply, "upsertedId", -1, &id);
    }
    bson_destroy(&o.id);
    *rcp = rc ? rc : srv ? typed_write_error(reply, 0, err) : 0;
    return true;
}

static const char *const delete_known[] = {"writeConcern", NULL};

static bool typed_delete(md_collection *coll, const bson_t *q, int limit, const bson_t *opts,
                         bson_t *reply, md_error *err, int *rcp)
{
    bool durable;
    int64_t n = 0;
    int srv = 0;
    if (coll->db->no_fast || !opts_only(opts, delete_known))
        return false;
    int rc = check_doc(q, "selector", err);
    if ((rc = typed_write_check(rc, opts, &durable, reply, err)) != 0) {
        *rcp = rc;
        return true;
    }
    md_db *db = coll->db;
    rc = typed_write_enter(coll, Q_MODE_IX, err);
    if (!rc)
        srv = q_delete_exec(db, coll->name, durable, q, limit, &n, err);
    q_op_leave(db);
    if (!rc && reply)
        BSON_APPEND_INT64(reply, "deletedCount", n);
    *rcp = rc ? rc : srv ? typed_write_error(reply, 0, err) : 0;
    return true;
}

/* ---- typed write wrappers ----------------------------------------------------------- */

int md_collection_insert_many(md_collection *coll, const bson_t **docs, size_t n,
                              const bson_t *opts, bson_t *reply, md_error *err)
{
    bson_t cmd = BSON_INITIALIZER, arr;
    char key[24];
    md_error local;
    int rc;
    if (!err)
        err = &local;
    md_error_clear(err);
    if (typed_insert(coll, docs, n, opts, reply, err, &rc))
        return rc;
    BSON_APPEND_UTF8(&cmd, "insert", coll->name);
    BSON_APPEND_ARRAY_BEGIN(&cmd, "documents", &arr);
    for (size_t i = 0; i < n; i++) {
        snprintf(key, sizeof key, "%zu", i);
        bson_append_document(&arr, key, -1, docs[i]);
    }
    bson_append_array_end(&cmd, &arr);
    append_opts(&cmd, opts, NULL);
    return run_write(coll, &cmd, W_INSERT, reply, err);
}

int md_collection_insert_one(md_collection *coll, const bson_t *doc, const bson_t *opts,
                             bson_t *reply, md_error *err)
{
    const bson_t *docs[1] = {doc};
    return md_collection_insert_many(coll, docs, 1, opts, reply, err);
}

static bool has_operator(const bson_t *doc)
{
    bson_iter_t it;
    return bson_iter_init(&it, doc) && bson_iter_next(&it) && bson_iter_key(&it)[0] == '$';
}

static int update_cmd(md_collection *coll, const bson_t *q, const bson_t *u, bool multi,
                      const bson_t *opts, bson_t *reply, md_error *err)
{
    static const char *const stmt_opts[] = {"upsert", "collation", "arrayFilters", NULL};
    bson_t cmd = BSON_INITIALIZER, arr, st;
    bson_iter_t it;
    int rc;
    if (typed_update(coll, q, u, multi, opts, reply, err, &rc))
        return rc;
    BSON_APPEND_UTF8(&cmd, "update", coll->name);
    BSON_APPEND_ARRAY_BEGIN(&cmd, "updates", &arr);
    BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &st);
    BSON_APPEND_DOCUMENT(&st, "q", q);
    BSON_APPEND_DOCUMENT(&st, "u", u);
    for (size_t i = 0; opts && stmt_opts[i]; i++)
        if (bson_iter_init_find(&it, opts, stmt_opts[i]))
            bson_append_iter(&st, NULL, 0, &it);
    BSON_APPEND_BOOL(&st, "multi", multi);
    bson_append_document_end(&arr, &st);
    bson_append_array_end(&cmd, &arr);
    append_opts(&cmd, opts, stmt_opts);
    return run_write(coll, &cmd, W_UPDATE, reply, err);
}

/* update_one/update_many need operators and replace_one forbids them, as
 * libmongoc checks before sending the command. */
static int checked_update(md_collection *coll, const bson_t *q, const bson_t *u,
                          bool replace, bool multi, const bson_t *opts, bson_t *reply,
                          md_error *err)
{
    md_error local;
    if (!err)
        err = &local;
    md_error_clear(err);
    if (has_operator(u) == replace) {
        if (reply)
            bson_init(reply);
        return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE, "%s",
                     replace ? "Invalid key: replacement document must not contain $ operators"
                             : "Invalid key: update only works with $ operators");
    }
    return update_cmd(coll, q, u, multi, opts, reply, err);
}

int md_collection_update_one(md_collection *coll, const bson_t *selector, const bson_t *update,
                             const bson_t *opts, bson_t *reply, md_error *err)
{
    return checked_update(coll, selector, update, false, false, opts, reply, err);
}

int md_collection_update_many(md_collection *coll, const bson_t *selector,
                              const bson_t *update, const bson_t *opts, bson_t *reply,
                              md_error *err)
{
    return checked_update(coll, selector, update, false, true, opts, reply, err);
}

int md_collection_replace_one(md_collection *coll, const bson_t *selector,
                              const bson_t *replacement, const bson_t *opts, bson_t *reply,
                              md_error *err)
{
    return checked_update(coll, selector, replacement, true, false, opts, reply, err);
}

static int delete_cmd(md_collection *coll, const bson_t *q, int limit, const bson_t *opts,
                      bson_t *reply, md_error *err)
{
    bson_t cmd = BSON_INITIALIZER, arr, st;
    static const char *const stmt_opts[] = {"collation", NULL};
    md_error local;
    int rc;
    if (!err)
        err = &local;
    md_error_clear(err);
    if (typed_delete(coll, q, limit, opts, reply, err, &rc))
        return rc;
    BSON_APPEND_UTF8(&cmd, "delete", coll->name);
    BSON_APPEND_ARRAY_BEGIN(&cmd, "deletes", &arr);
    BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &st);
    BSON_APPEND_DOCUMENT(&st, "q", q);
    BSON_APPEND_INT32(&st, "limit", limit);
    bson_append_document_end(&arr, &st);
    bson_append_array_end(&cmd, &arr);
    append_opts(&cmd, opts, stmt_opts);
    return run_write(coll, &cmd, W_DELETE, reply, err);
}

int md_collection_delete_one(md_collection *coll, const bson_t *selector, const bson_t *opts,
                             bson_t *reply, md_error *err)
{
    return delete_cmd(coll, selector, 1, opts, reply, err);
}

int md_collection_delete_many(md_collection *coll, const bson_t *selector,
                              const bson_t *opts, bson_t *reply, md_error *err)
{
    return delete_cmd(coll, selector, 0, opts, reply, err);
}

/* ---- other wrappers ------------------------------------------------------------------- */

int md_collection_count(md_collection *coll, const bson_t *filter, const bson_t *opts,
                        int64_t *count, md_error *err)
{
    bson_t cmd = BSON_INITIALIZER, r;
    BSON_APPEND_UTF8(&cmd, "count", coll->name);
    if (filter)
        BSON_APPEND_DOCUMENT(&cmd, "query", filter);
    append_opts(&cmd, opts, NULL);
    int rc = md_db_command(coll->db, &cmd, &r, err);
    *count = rc ? 0 : reply_int(&r, "n");
    bson_destroy(&r);
    bson_destroy(&cmd);
    return rc;
}

int md_collection_find_and_modify(md_collection *coll, const bson_t *query,
                                  const bson_t *opts, bson_t *reply, md_error *err)
{
    bson_t cmd = BSON_INITIALIZER, r;
    md_error local;
    if (!err)
        err = &local;
    md_error_clear(err);
    if (!coll->db->no_fast) { /* the statement built directly, no command document */
        int rc = check_doc(query ? query : &cmd, "query", err);
        if (!rc && opts)
            rc = check_doc(opts, "opts", err);
        bson_init(&r);
        if (!rc) {
            q_op_enter(coll->db, Q_OP_CREATE, coll->name, true);
            rc = q_find_and_modify_exec(coll->db, coll->name, query, opts, &r, err);
            q_op_leave(coll->db);
        }
        if (rc && !err->message[0])
            q_err(err, rc, eng_rc_to_code(rc), "%s", md_strerror(rc));
        rc = q_reply_finish(&r, rc, err);
        if (reply)
            bson_steal(reply, &r);
        else
            bson_destroy(&r);
        return rc;
    }
    BSON_APPEND_UTF8(&cmd, "findAndModify", coll->name);
    if (query)
        BSON_APPEND_DOCUMENT(&cmd, "query", query);
    append_opts(&cmd, opts, NULL);
    int rc = md_db_command(coll->db, &cmd, &r, err);
    bson_destroy(&cmd);
    if (reply)
        bson_steal(reply, &r);
    else
        bson_destroy(&r);
    return rc;
}

int md_collection_create_index(md_collection *coll, const bson_t *keys, const bson_t *opts,
                               bson_t *reply, md_error *err)
{
    bson_t cmd = BSON_INITIALIZER, arr, spec, r;
    bson_iter_t it;
    BSON_APPEND_UTF8(&cmd, "createIndexes", coll->name);
    BSON_APPEND_ARRAY_BEGIN(&cmd, "indexes", &arr);
    BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &spec);
    BSON_APPEND_DOCUMENT(&spec, "key", keys);
    if (opts && bson_iter_init(&it, opts))
        while (bson_iter_next(&it))
            if (strcmp(bson_iter_key(&it), "writeConcern") != 0)
                bson_append_iter(&spec, NULL, 0, &it);
    bson_append_document_end(&arr, &spec);
    bson_append_array_end(&cmd, &arr);
    if (opts && bson_iter_init_find(&it, opts, "writeConcern"))
        bson_append_iter(&cmd, NULL, 0, &it);
    int rc = md_db_command(coll->db, &cmd, &r, err);
    bson_destroy(&cmd);
    if (reply)
        bson_steal(reply, &r);
    else
        bson_destroy(&r);
    return rc;
}

/* ---- md_cursor ---------------------------------------------------------------------- */

struct md_cursor {
    md_db *db;
    char name[ENG_IDENT_MAX];
    bson_t filter, opts;
    bson_t batch;         /* the last find/getMore reply */
    bson_iter_t it;       /* over its firstBatch/nextBatch array */
    bson_t current;       /* static view into batch */
    int64_t id, batch_size;
    int64_t await_ms; /* maxAwaitTimeMS: an awaitData getMore's maxTimeMS, -1: none */
    bool started, done, failed;
    bool tailable;
    bool single; /* the _id path left its one document in batch */
    bool aggregate; /* filter holds {pipeline: [...]}: the first batch is an aggregate's */
    md_error err;
};

/*
 * Each thread keeps the last cursor it destroyed, with its batch buffer,
 * for its next find: a loop of finds by _id then allocates nothing.  The
 * spare is freed when the thread exits.
 */
static __thread md_cursor *spare_cursor;
static pthread_key_t spare_key;
static pthread_once_t spare_once = PTHREAD_ONCE_INIT;

static void spare_free(void *p)
{
    md_cursor *c = p;
    spare_cursor = NULL;
    bson_destroy(&c->batch);
    free(c);
}

static void spare_key_make(void)
{
    pthread_key_create(&spare_key, spare_free);
}

/* A cursor with every field reset; the batch keeps its buffer. */
static md_cursor *cursor_new(void)
{
    md_cursor *c = spare_cursor;
    if (!c) {
        c = q_zalloc(sizeof *c);
        assert(c);
        bson_init(&c->batch);
        return c;
    }
    spare_cursor = NULL;
    pthread_setspecific(spare_key, NULL);
    bson_reinit(&c->batch);
    c->id = c->batch_size = 0;
    c->started = c->done = c->failed = c->tailable = c->single = c->aggregate = false;
    md_error_clear(&c->err);
    return c;
}

md_cursor *md_collection_find_with_opts(md_collection *coll, const bson_t *filter,
                                        const bson_t *opts)
{
    bson_iter_t it;
    md_cursor *c = cursor_new();
    c->db = coll->db;
    snprintf(c->name, sizeof c->name, "%s", coll->name);
    if (filter)
        bson_copy_to(filter, &c->filter);
    else
        bson_init(&c->filter);
    if (opts)
        bson_copy_to(opts, &c->opts);
    else
        bson_init(&c->opts);
    if (bson_iter_init_find(&it, &c->opts, "batchSize"))
        q_iter_int64(&it, &c->batch_size);
    c->tailable = bson_iter_init_find(&it, &c->opts, "tailable") && bson_iter_as_bool(&it);
    c->await_ms = -1;
    if (bson_iter_init_find(&it, &c->opts, "maxAwaitTimeMS") && !q_iter_int64(&it, &c->await_ms))
        c->await_ms = -1;
    return c;
}

md_cursor *md_collection_aggregate(md_collection *coll, const bson_t *pipeline,
                                   const bson_t *opts)
{
    bson_iter_t it;
    md_cursor *c = cursor_new();
    c->db = coll->db;
    c->aggregate = true;
    c->await_ms = -1;
    snprintf(c->name, sizeof c->name, "%s", coll->name);
    bson_init(&c->filter);
    if (pipeline && bson_iter_init_find(&it, pipeline, "pipeline"))
        bson_append_iter(&c->filter, "pipeline", -1, &it);
    else if (pipeline)
        bson_append_array(&c->filter, "pipeline", -1, pipeline);
    else
        bson_append_array(&c->filter, "pipeline", -1, &(bson_t)BSON_INITIALIZER);
    if (opts)
        bson_copy_to(opts, &c->opts);
    else
        bson_init(&c->opts);
    if (bson_iter_init_find(&it, &c->opts, "batchSize"))
        q_iter_int64(&it, &c->batch_size);
    return c;
}

/* The aggregate command of an md_collection_aggregate cursor: opts'
 * batchSize goes into cursor: {}. */
static void aggregate_cmd(md_cursor *c, bson_t *cmd)
{
    bson_iter_t it;
    bson_t cur;
    BSON_APPEND_UTF8(cmd, "aggregate", c->name);
    bson_concat(cmd, &c->filter);
    BSON_APPEND_DOCUMENT_BEGIN(cmd, "cursor", &cur);
    if (c->batch_size > 0)
        BSON_APPEND_INT64(&cur, "batchSize", c->batch_size);
    bson_append_document_end(cmd, &cur);
    bson_iter_init(&it, &c->opts);
    while (bson_iter_next(&it))
        if (strcmp(bson_iter_key(&it), "batchSize") != 0)
            bson_append_iter(cmd, NULL, 0, &it);
}

/* Options only md_cursor reads (not the find's). */
static const char *const cursor_only[] = {"maxAwaitTimeMS", NULL};

/* Point c->it at the batch array of the reply in c->batch. */
static bool enter_batch(md_cursor *c, const char *field)
{
    bson_iter_t cur, arr;
    if (!bson_iter_init_find(&cur, &c->batch, "cursor") || !BSON_ITER_HOLDS_DOCUMENT(&cur))
        return false;
    bson_iter_recurse(&cur, &arr);
    bson_iter_t idit = arr;
    if (!bson_iter_find(&idit, "id"))
        return false;
    c->id = bson_iter_as_int64(&idit);
    if (!bson_iter_find(&arr, field) || !BSON_ITER_HOLDS_ARRAY(&arr))
        return false;
    bson_iter_recurse(&arr, &c->it);
    return true;
}

static bool fetch(md_cursor *c)
{
    bson_t cmd = BSON_INITIALIZER;
    bool first = !c->started;
    if (first && c->aggregate) {
        aggregate_cmd(c, &cmd);
    } else if (first) {
        BSON_APPEND_UTF8(&cmd, "find", c->name);
        BSON_APPEND_DOCUMENT(&cmd, "filter", &c->filter);
        append_opts(&cmd, &c->opts, cursor_only);
    } else {
        BSON_APPEND_INT64(&cmd, "getMore", c->id);
        BSON_APPEND_UTF8(&cmd, "collection", c->name);
        if (c->batch_size > 0)
            BSON_APPEND_INT64(&cmd, "batchSize", c->batch_size);
        if (c->await_ms >= 0)
            BSON_APPEND_INT64(&cmd, "maxTimeMS", c->await_ms);
    }
    c->started = true;
    bson_destroy(&c->batch);
    int rc = md_db_command(c->db, &cmd, &c->batch, &c->err);
    bson_destroy(&cmd);
    if (rc == 0 && !enter_batch(c, first ? "firstBatch" : "nextBatch"))
        rc = q_err(&c->err, MD_ERROR, MD_CODE_INTERNAL_ERROR, "malformed cursor reply");
    if (rc) {
        c->failed = c->done = true;
        c->id = 0;
    }
    return rc == 0;
}

/*
 * The first batch without a command document: the find's options parsed by
 * the command's rules (q_find_parse_typed), then IDHACK (q_find_by_id, the
 * one document left in c->batch) or q_cursor_find (its reply in c->batch,
 * as md_db_command would give it).  False when the fast paths are off.
 */
static bool typed_start(md_cursor *c)
{
    q_find_cmd p;
    bool found = false;
    md_db *db = c->db;
    if (db->no_fast || c->aggregate)
        return false;
    memset(&p, 0, sizeof p);
    c->started = true;
    bson_reinit(&c->batch);
    int rc = check_doc(&c->filter, "filter", &c->err);
    if (!rc)
        rc = check_doc(&c->opts, "opts", &c->err);
    if (!rc)
        rc = q_find_parse_typed(db, c->name, &c->filter, &c->opts, cursor_only, &p, &c->err);
    if (!rc) {
        q_op_enter(db, Q_MODE_IS, NULL, true);
        q_coll *qc = q_coll_find(db, c->name);
        rc = qc ? q_find_by_id(db, qc, &p.a, &found, &c->batch, &c->err) : Q_FIND_GENERAL;
        if (rc == Q_FIND_GENERAL) {
            rc = q_cursor_find(db, qc, p.ns, &p.a, &c->batch, &c->err);
            if (rc == 0 && !enter_batch(c, "firstBatch"))
                rc = q_err(&c->err, MD_ERROR, MD_CODE_INTERNAL_ERROR, "malformed cursor reply");
        } else {
            c->id = 0;
            c->single = found;
            c->done = !found;
        }
        q_op_leave(db);
    }
    q_find_cmd_cleanup(&p);
    if (rc && !c->err.message[0])
        q_err(&c->err, rc, eng_rc_to_code(rc), "%s", md_strerror(rc));
    if (rc) {
        c->failed = c->done = true;
        c->id = 0;
    }
    return true;
}

/* A tailable cursor asks the server at most once per call: an empty batch
 * (after awaitData's wait) returns false with the cursor still open. */
bool md_cursor_next(md_cursor *c, const bson_t **doc)
{
    const uint8_t *data;
    uint32_t len;
    bool asked = false;
    *doc = NULL;
    if (!c->started && typed_start(c)) {
        if (c->single) {
            c->single = false;
            c->done = true;
            *doc = &c->batch;
            return true;
        }
        asked = true;
    }
    while (!c->done) {
        if (!c->started) {
            if (!fetch(c))
                return false;
            asked = true;
        }
        if (bson_iter_next(&c->it)) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&c->it))
                continue;
            bson_iter_document(&c->it, &len, &data);
            if (!bson_init_static(&c->current, data, len))
                continue;
            *doc = &c->current;
            return true;
        }
        if (c->id == 0) {
            c->done = true;
            break;
        }
        if (c->tailable && asked)
            return false;
        if (!fetch(c))
            return false;
        asked = true;
    }
    return false;
}

bool md_cursor_more(const md_cursor *c)
{
    return !c->done && !c->failed;
}

bool md_cursor_error(const md_cursor *c, md_error *err)
{
    if (c->failed && err)
        *err = c->err;
    return c->failed;
}

void md_cursor_destroy(md_cursor *c)
{
    if (!c)
        return;
    if (c->id != 0) {
        bson_t cmd = BSON_INITIALIZER, arr, r;
        BSON_APPEND_UTF8(&cmd, "killCursors", c->name);
        BSON_APPEND_ARRAY_BEGIN(&cmd, "cursors", &arr);
        BSON_APPEND_INT64(&arr, "0", c->id);
        bson_append_array_end(&cmd, &arr);
        md_db_command(c->db, &cmd, &r, NULL);
        bson_destroy(&r);
        bson_destroy(&cmd);
    }
    bson_destroy(&c->filter);
    bson_destroy(&c->opts);
    if (spare_cursor) {
        bson_destroy(&c->batch);
        free(c);
        return;
    }
    pthread_once(&spare_once, spare_key_make);
    spare_cursor = c;
    pthread_setspecific(spare_key, c);
}
