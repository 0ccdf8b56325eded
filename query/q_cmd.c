/*
 * q_cmd.c -- the command dispatcher (md_db_command) and the helpers every
 * command file shares: MongoDB-shaped errors, argument checks, write
 * concern, plus the few small commands (ping, buildInfo, isMaster).
 *
 * A command is a document whose FIRST field names it: {find: "c", ...}.
 * Handlers append their reply fields and return 0, or return a negative
 * MD_* code with `err` filled; the dispatcher then answers MongoDB's error
 * shape {ok: 0, errmsg, code, codeName} instead.  Fields every command
 * accepts ($db, lsid, $readPreference, writeConcern...) are ignored here and
 * read where they matter.
 */
#include <assert.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

#include "q_int.h"

/* ---- errors ---------------------------------------------------------------------- */

static void fix_code_name(md_error *err)
{
    if (!err || err->code == MD_CODE_UNKNOWN_ERROR || strcmp(err->code_name, "UnknownError"))
        return;
    if (err->code == Q_CODE_OPERATION_FAILED)
        snprintf(err->code_name, sizeof err->code_name, "OperationFailed");
    else if (err->code == Q_CODE_UNAUTHORIZED)
        snprintf(err->code_name, sizeof err->code_name, "Unauthorized");
    else if (err->code == Q_CODE_INVALID_LENGTH)
        snprintf(err->code_name, sizeof err->code_name, "InvalidLength");
    else if (err->code == Q_CODE_QUERY_PLAN_KILLED)
        snprintf(err->code_name, sizeof err->code_name, "QueryPlanKilled");
    else if (err->code == 50)
        snprintf(err->code_name, sizeof err->code_name, "MaxTimeMSExpired");
    else if (err->code == 168)
        snprintf(err->code_name, sizeof err->code_name, "InvalidPipelineOperator");
    else if (err->code == Q_CODE_CAPPED_CANNOT_GROW)
        snprintf(err->code_name, sizeof err->code_name, "CannotGrowDocumentInCappedNamespace");
    else
        snprintf(err->code_name, sizeof err->code_name, "Location%d", err->code);
}

int q_err(md_error *err, int rc, int code, const char *fmt, ...)
{
    va_list ap;
    if (!err)
        return rc;
    err->code = code;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    snprintf(err->code_name, sizeof err->code_name, "%s", md_code_name(code));
    fix_code_name(err);
    return rc;
}

int q_err_engine(md_error *err, int rc, const char *what)
{
    if (err && rc && !err->message[0])
        q_err(err, rc, eng_rc_to_code(rc), "%s: %s", what, md_strerror(rc));
    else if (err && rc && !err->code)
        err->code = eng_rc_to_code(rc);
    fix_code_name(err);
    return rc;
}

int q_err_field_type(md_error *err, const char *cmd, const char *field, bson_type_t got,
                     const char *want)
{
    return q_err(err, MD_EINVAL, MD_CODE_TYPE_MISMATCH,
                 "BSON field '%s.%s' is the wrong type '%s', expected type '%s'", cmd, field,
                 q_type_name(got), want);
}

int q_err_field_missing(md_error *err, const char *cmd, const char *field)
{
    return q_err(err, MD_EINVAL, Q_CODE_IDL_MISSING_FIELD,
                 "BSON field '%s.%s' is missing but a required field", cmd, field);
}

int q_err_field_unknown(md_error *err, const char *cmd, const char *field)
{
    return q_err(err, MD_EINVAL, Q_CODE_IDL_UNKNOWN_FIELD,
                 "BSON field '%s.%s' is an unknown field.", cmd, field);
}

/* ---- arguments --------------------------------------------------------------------- */

bool q_is_generic_arg(const char *name)
{
    static const char *const names[] = {
        "$db", "lsid", "$readPreference", "writeConcern", "maxTimeMS", "readConcern",
        "$clusterTime", "txnNumber", "$queryOptions", "$audit", "$client", "$configServerState",
        "$gleStats", "$oplogQueryData", "$replData", "allowImplicitCollectionCreation",
        "autocommit", "startTransaction", "stmtId", "$logicalTime", NULL};
    for (size_t i = 0; names[i]; i++)
        if (strcmp(name, names[i]) == 0)
            return true;
    return false;
}

int q_cmd_coll_name(md_db *db, const bson_t *cmd, bool idl, const char **name, char *ns,
                    md_error *err)
{
    bson_iter_t it;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    if (!BSON_ITER_HOLDS_UTF8(&it)) {
        if (idl)
            return q_err_field_type(err, bson_iter_key(&it), bson_iter_key(&it),
                                    bson_iter_type(&it), "string");
        return q_err(err, MD_EINVAL, MD_CODE_INVALID_NAMESPACE,
                     "collection name has invalid type %s", q_type_name(bson_iter_type(&it)));
    }
    uint32_t len;
    *name = bson_iter_utf8(&it, &len);
    if (strlen(*name) != len)
        return q_err(err, MD_EINVAL, MD_CODE_INVALID_NAMESPACE,
                     "namespaces cannot have embedded null characters");
    return q_ns_make(db, *name, ns, err);
}

bool q_iter_int64(const bson_iter_t *it, int64_t *out)
{
    switch (bson_iter_type(it)) {
    case BSON_TYPE_INT32:
        *out = bson_iter_int32(it);
        return true;
    case BSON_TYPE_INT64:
        *out = bson_iter_int64(it);
        return true;
    case BSON_TYPE_DOUBLE: {
        double d = bson_iter_double(it);
        if (d != d || d < -9.2e18 || d > 9.2e18 || d != (double)(int64_t)d)
            return false;
        *out = (int64_t)d;
        return true;
    }
    default:
        return false;
    }
}

void q_append_number(bson_t *b, const char *key, int64_t v)
{
    if (v >= INT32_MIN && v <= INT32_MAX)
        BSON_APPEND_INT32(b, key, (int32_t)v);
    else
        BSON_APPEND_INT64(b, key, v);
}

bool q_doc_is_one(const bson_t *doc, const char *field)
{
    bson_iter_t it;
    return bson_count_keys(doc) == 1 && bson_iter_init(&it, doc) && bson_iter_next(&it) &&
           strcmp(bson_iter_key(&it), field) == 0 && BSON_ITER_HOLDS_NUMBER(&it) &&
           bson_iter_as_double(&it) == 1;
}

static int write_concern_w(const bson_iter_t *it, md_error *err)
{
    int64_t w;
    if (BSON_ITER_HOLDS_UTF8(it)) {
        if (strcmp(bson_iter_utf8(it, NULL), "majority") != 0)
            return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                         "unrecognized write concern mode: %s", bson_iter_utf8(it, NULL));
        return 0;
    }
    if (!BSON_ITER_HOLDS_NUMBER(it) || !q_iter_int64(it, &w) || w < 0)
        return q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE,
                     "w has to be a non-negative number or a string");
    if (w > 1)
        return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                     "cannot use 'w' > 1 on a standalone minidoc");
    return 0;
}

int q_write_concern(const bson_t *cmd, bool *durable, md_error *err)
{
    bson_iter_t it, wc;
    *durable = false;
    if (!cmd || !bson_iter_init_find(&it, cmd, "writeConcern"))
        return 0;
    if (!BSON_ITER_HOLDS_DOCUMENT(&it))
        return q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE, "writeConcern must be an object");
    bson_iter_recurse(&it, &wc);
    while (bson_iter_next(&wc)) {
        const char *k = bson_iter_key(&wc);
        int rc = 0;
        if (strcmp(k, "w") == 0) {
            rc = write_concern_w(&wc, err);
        } else if (strcmp(k, "j") == 0 || strcmp(k, "fsync") == 0) {
            if (!BSON_ITER_HOLDS_BOOL(&wc) && !BSON_ITER_HOLDS_NUMBER(&wc))
                rc = q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE,
                           "%s must be numeric or a boolean value", k);
            else if (bson_iter_as_bool(&wc))
                *durable = true;
        } else if (strcmp(k, "wtimeout") != 0 && strcmp(k, "getLastError") != 0) {
            rc = q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE,
                       "unrecognized write concern field: %s", k);
        }
        if (rc)
            return rc;
    }
    return 0;
}

void *q_zalloc(size_t size)
{
    void *p = NULL;
    size_t align = BSON_ALIGNOF(bson_t) > sizeof(void *) ? BSON_ALIGNOF(bson_t) : sizeof(void *);
    int rc = posix_memalign(&p, align, size ? size : 1);
    assert(rc == 0 && p);
    (void)rc;
    memset(p, 0, size ? size : 1);
    return p;
}

int64_t q_now_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

/* ---- small commands ------------------------------------------------------------------ */

int q_cmd_ping(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err)
{
    return 0;
}

/* {_hashBSONElement: <value>, seed: <int>}: MongoDB's test command giving
 * the hashed index key of a value -> {key, seed, out: NumberLong}. */
int q_cmd_hash_element(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err)
{
    bson_iter_t it, s;
    int32_t seed = 0;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    if (bson_iter_init_find(&s, cmd, "seed")) {
        if (!BSON_ITER_HOLDS_NUMBER(&s))
            return q_err(err, MD_EINVAL, MD_CODE_TYPE_MISMATCH, "seed must be a number");
        seed = (int32_t)bson_iter_as_int64(&s);
    }
    bson_append_iter(reply, "key", 3, &it);
    BSON_APPEND_INT32(reply, "seed", seed);
    BSON_APPEND_INT64(reply, "out", q_hash_element(&it, seed));
    return 0;
}

/* cursorTimeoutMillis: a positive integral number of milliseconds. */
static int cursor_timeout_value(const bson_iter_t *it, int64_t *ms, md_error *err)
{
    if (!q_iter_int64(it, ms) || *ms <= 0)
        return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                     "cursorTimeoutMillis must be a positive integer");
    return 0;
}

/* The aggregation's memory limits: a positive integral number of bytes,
 * stored into the field the iterator's key names (previous value in *was). */
static int agg_mem_set(md_db *db, const bson_iter_t *it, int64_t *was, md_error *err)
{
    int64_t v;
    const char *k = bson_iter_key(it);
    int64_t *f = strcmp(k, "internalDocumentSourceGroupMaxMemoryBytes") == 0 ? &db->agg_group_mem
                                                                           : &db->agg_sort_mem;
    if (!q_iter_int64(it, &v) || v <= 0)
        return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE, "%s must be a positive integer", k);
    if (was)
        *was = *f > 0 ? *f : 100 * 1024 * 1024;
    *f = v;
    return 0;
}

static int agg_mem_value(md_db *db, const bson_iter_t *it, md_error *err)
{
    return agg_mem_set(db, it, NULL, err);
}

static bool is_agg_mem(const char *k)
{
    return strcmp(k, "internalDocumentSourceGroupMaxMemoryBytes") == 0 ||
           strcmp(k, "internalDocumentSourceSortMaxBlockingSortBytes") == 0;
}

int q_db_configure(md_db *db, const bson_t *opts, md_error *err)
{
    bson_iter_t it;
    int64_t ms;
    db->ttl_sleep_ms = Q_TTL_SLEEP_SECS * 1000;
    db->ttl_last_ms = q_now_ms();
    if (opts && bson_iter_init_find(&it, opts, "ttlMonitorSleepSecs")) {
        if (!BSON_ITER_HOLDS_NUMBER(&it) || bson_iter_as_double(&it) < 0)
            return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                         "ttlMonitorSleepSecs must be a non-negative number");
        db->ttl_sleep_ms = (int64_t)(bson_iter_as_double(&it) * 1000);
    }
    if (opts && bson_iter_init_find(&it, opts, "internalQueryFastPaths")) {
        if (!BSON_ITER_HOLDS_BOOL(&it))
            return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                         "internalQueryFastPaths must be a boolean");
        db->no_fast = !bson_iter_bool(&it);
    }
    static const char *const mem[] = {"internalDocumentSourceSortMaxBlockingSortBytes",
                                      "internalDocumentSourceGroupMaxMemoryBytes"};
    for (int i = 0; i < 2; i++)
        if (opts && bson_iter_init_find(&it, opts, mem[i])) {
            int rc = agg_mem_value(db, &it, err);
            if (rc)
                return rc;
        }
    if (opts && bson_iter_init_find(&it, opts, "jsTimeLimitMS")) {
        if (!BSON_ITER_HOLDS_NUMBER(&it) || bson_iter_as_int64(&it) < 0)
            return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                         "jsTimeLimitMS must be a non-negative number");
        db->js_time_limit_ms = bson_iter_as_int64(&it);
    }
    if (!opts || !bson_iter_init_find(&it, opts, "cursorTimeoutMillis"))
        return 0;
    int rc = cursor_timeout_value(&it, &ms, err);
    if (!rc)
        db->cursor_timeout_ms = ms;
    return rc;
}

/* {setParameter: 1, cursorTimeoutMillis: N} -> {was: old}; also the
 * aggregation's memory limits (one parameter per command). */
int q_cmd_set_parameter(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err)
{
    bson_iter_t it;
    int64_t ms = 0;
    bool found = false;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (q_is_generic_arg(k))
            continue;
        if (is_agg_mem(k)) {
            int64_t was;
            int rc = agg_mem_set(db, &it, &was, err);
            if (rc)
                return rc;
            BSON_APPEND_INT64(reply, "was", was);
            return 0;
        }
        if (strcmp(k, "cursorTimeoutMillis"))
            return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE, "attempted to set unrecognized "
                         "parameter [%s], use help:true to see options ", k);
        int rc = cursor_timeout_value(&it, &ms, err);
        if (rc)
            return rc;
        found = true;
    }
    if (!found)
        return q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE, "no option found to set, use help:true "
                     "to see options ");
    BSON_APPEND_INT64(reply, "was",
                      db->cursor_timeout_ms > 0 ? db->cursor_timeout_ms : Q_CURSOR_TIMEOUT_MS);
    db->cursor_timeout_ms = ms;
    return 0;
}

int q_cmd_build_info(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err)
{
    bson_t arr;
    char key[16];
    BSON_APPEND_UTF8(reply, "version", "3.6.0-minidoc-" MD_VERSION_STRING);
    BSON_APPEND_UTF8(reply, "gitVersion", "none");
    BSON_APPEND_UTF8(reply, "allocator", "system");
    BSON_APPEND_UTF8(reply, "javascriptEngine", "none");
    BSON_APPEND_ARRAY_BEGIN(reply, "versionArray", &arr);
    BSON_APPEND_INT32(&arr, "0", 3);
    BSON_APPEND_INT32(&arr, "1", 6);
    BSON_APPEND_INT32(&arr, "2", 0);
    BSON_APPEND_INT32(&arr, "3", 0);
    bson_append_array_end(reply, &arr);
    BSON_APPEND_INT32(reply, "bits", (int32_t)(8 * sizeof(void *)));
    BSON_APPEND_BOOL(reply, "debug", false);
    BSON_APPEND_INT32(reply, "maxBsonObjectSize", Q_BSON_MAX);
    BSON_APPEND_ARRAY_BEGIN(reply, "storageEngines", &arr);
    const eng_ops *const *e = eng_engines();
    for (int i = 0; e[i]; i++) {
        snprintf(key, sizeof key, "%d", i);
        bson_append_utf8(&arr, key, -1, e[i]->name, -1);
    }
    bson_append_array_end(reply, &arr);
    return 0;
}

int q_cmd_is_master(md_db *db, const bson_t *cmd, bson_t *reply, md_error *err)
{
    BSON_APPEND_BOOL(reply, "ismaster", true);
    BSON_APPEND_INT32(reply, "maxBsonObjectSize", Q_BSON_MAX);
    BSON_APPEND_INT32(reply, "maxMessageSizeBytes", 48000000);
    BSON_APPEND_INT32(reply, "maxWriteBatchSize", 100000);
    BSON_APPEND_DATE_TIME(reply, "localTime", q_now_ms());
    BSON_APPEND_INT32(reply, "minWireVersion", 0);
    BSON_APPEND_INT32(reply, "maxWireVersion", 6);
    BSON_APPEND_BOOL(reply, "readOnly", false);
    return 0;
}

/* ---- dispatch ---------------------------------------------------------------------- */

/*
 * Each command's database lock mode (q_lock.c): R reads, W writes that never
 * create a collection, C writes that create their collection when it is
 * missing (exclusive then), X catalog changes.
 */
enum { R = Q_MODE_IS, W = Q_MODE_IX, X = Q_MODE_X, C = Q_OP_CREATE };

static const struct {
    const char *name;
    q_cmd_fn fn;
    int mode;
} commands[] = {
    {"insert", q_cmd_insert, C},
    {"update", q_cmd_update, C},
    {"delete", q_cmd_delete, W},
    {"findAndModify", q_cmd_find_and_modify, C},
    {"findandmodify", q_cmd_find_and_modify, C},
    {"find", q_cmd_find, R},
    {"getMore", q_cmd_get_more, R},
    {"killCursors", q_cmd_kill_cursors, R},
    {"count", q_cmd_count, R},
    {"aggregate", q_cmd_aggregate, R},
    {"explain", q_cmd_explain, R},
    {"planCacheListQueryShapes", q_cmd_plan_cache_list, R},
    {"planCacheClear", q_cmd_plan_cache_clear, R},
    {"ttlMonitor", q_cmd_ttl_monitor, W},
    {"distinct", q_cmd_distinct, R},
    {"mapReduce", q_cmd_map_reduce, R}, /* X when it writes (q_mr_writes) */
    {"mapreduce", q_cmd_map_reduce, R},
    {"create", q_cmd_create, X},
    {"drop", q_cmd_drop, X},
    {"convertToCapped", q_cmd_convert_to_capped, X},
    {"emptycapped", q_cmd_empty_capped, X},
    {"cloneCollectionAsCapped", q_cmd_clone_capped, X},
    {"dropDatabase", q_cmd_drop_database, X},
    {"listCollections", q_cmd_list_collections, R},
    {"collMod", q_cmd_coll_mod, X},
    {"createIndexes", q_cmd_create_indexes, X},
    {"dropIndexes", q_cmd_drop_indexes, X},
    {"deleteIndexes", q_cmd_drop_indexes, X},
    {"listIndexes", q_cmd_list_indexes, R},
    {"collStats", q_cmd_coll_stats, R},
    {"serverStatus", q_cmd_server_status, R},
    {"validate", q_cmd_validate, X},
    {"compact", q_cmd_compact, X},
    {"fsync", q_cmd_fsync, X},
    {"ping", q_cmd_ping, R},
    {"_hashBSONElement", q_cmd_hash_element, R},
    {"setParameter", q_cmd_set_parameter, X},
    {"buildInfo", q_cmd_build_info, R},
    {"buildinfo", q_cmd_build_info, R},
    {"isMaster", q_cmd_is_master, R},
    {"ismaster", q_cmd_is_master, R},
};

static int find_command(const char *name)
{
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(commands[i].name, name) == 0)
            return (int)i;
    return -1;
}

/* C: exclusive when the collection named by the command's first field is
 * missing.  The answer holds while the shared lock is held: only an
 * exclusive holder can create or drop a collection. */

/* Every operation, command or typed call: the database lock in the mode
 * it needs (Q_OP_CREATE: intent-exclusive when collection `coll` exists,
 * else exclusive, since the operation may create it), after reaping idle
 * cursors and running the TTL monitor when it is due. */
void q_op_enter(md_db *db, int mode, const char *coll, bool ttl)
{
    int shared = mode == Q_MODE_IS ? Q_MODE_IS : Q_MODE_IX;
    q_db_lock(db, shared);
    int64_t now = q_now_ms();
    /* idle cursors: looked for at most every quarter of the timeout (and
     * every second), as MongoDB's cursor monitor wakes every few seconds */
    int64_t limit = db->cursor_timeout_ms > 0 ? db->cursor_timeout_ms : Q_CURSOR_TIMEOUT_MS;
    int64_t last = Q_LOAD(db->reap_last_ms), every = limit / 4 < 1000 ? limit / 4 : 1000;
    if (now - last >= every &&
        __atomic_compare_exchange_n(&db->reap_last_ms, &last, now, false, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED))
        q_cursor_reap(db, now);
    if (ttl)
        q_ttl_maybe(db, now);
    if (mode == Q_OP_CREATE)
        mode = coll && q_coll_find(db, coll) ? Q_MODE_IX : Q_MODE_X;
    if (mode != shared) {
        q_db_unlock(db);
        q_db_lock(db, mode);
    }
}

void q_op_leave(md_db *db)
{
    q_db_unlock(db);
}

static int run_command(md_db *db, const bson_t *command, bson_t *reply, md_error *err)
{
    bson_iter_t it;
    size_t off;
    if (!bson_validate(command, BSON_VALIDATE_NONE, &off))
        return q_err(err, MD_EINVAL, MD_CODE_INVALID_BSON,
                     "command document is not valid BSON (at offset %zu)", off);
    if (!bson_iter_init(&it, command) || !bson_iter_next(&it))
        return q_err(err, MD_EINVAL, MD_CODE_FAILED_TO_PARSE, "empty command document");
    int i = find_command(bson_iter_key(&it));
    if (i < 0)
        return q_err(err, MD_EINVAL, MD_CODE_COMMAND_NOT_FOUND, "no such command: '%s'",
                     bson_iter_key(&it));
    int mode = commands[i].mode;
    if (mode == C && !BSON_ITER_HOLDS_UTF8(&it))
        mode = X;
    if (commands[i].fn == q_cmd_aggregate && agg_cmd_writes(command))
        mode = X; /* $out replaces a collection */
    if (commands[i].fn == q_cmd_map_reduce && q_mr_writes(command))
        mode = X;
    q_op_enter(db, mode == C ? Q_OP_CREATE : mode,
               mode == C ? bson_iter_utf8(&it, NULL) : NULL, commands[i].fn != q_cmd_ttl_monitor);
    int rc = commands[i].fn(db, command, reply, err);
    q_op_leave(db);
    if (rc && !err->message[0])
        q_err(err, rc, eng_rc_to_code(rc), "%s", md_strerror(rc));
    return rc;
}

int md_db_command(md_db *db, const bson_t *command, bson_t *reply, md_error *err)
{
    md_error local;
    int rc;
    if (!err)
        err = &local;
    md_error_clear(err);
    bson_init(reply);
    if (!db || !command)
        rc = q_err(err, MD_EINVAL, MD_CODE_BAD_VALUE, "md_db_command: NULL argument");
    else
        rc = run_command(db, command, reply, err);
    return q_reply_finish(reply, rc, err);
}

int q_reply_finish(bson_t *reply, int rc, const md_error *err)
{
    if (rc) {
        if (rc > 0)
            rc = MD_ERROR;
        bson_reinit(reply);
        BSON_APPEND_DOUBLE(reply, "ok", 0.0);
        BSON_APPEND_UTF8(reply, "errmsg", err->message);
        BSON_APPEND_INT32(reply, "code", err->code);
        BSON_APPEND_UTF8(reply, "codeName", err->code_name);
        return rc;
    }
    BSON_APPEND_DOUBLE(reply, "ok", 1.0);
    return 0;
}

int md_db_command_json(md_db *db, const char *json, bson_t *reply, md_error *err)
{
    md_error local;
    bson_t cmd;
    if (!err)
        err = &local;
    md_error_clear(err);
    int rc = md_json_parse(json, -1, &cmd, err);
    if (rc) {
        bson_destroy(&cmd);
        bson_init(reply);
        return q_reply_finish(reply, rc, err);
    }
    rc = md_db_command(db, &cmd, reply, err);
    bson_destroy(&cmd);
    return rc;
}
