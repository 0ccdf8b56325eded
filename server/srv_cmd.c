/*
 * srv_cmd.c -- the commands the server answers itself, and the hand-off of
 * every other command to the md_db of the request's database.
 *
 * Answered here (they concern the server, not one database): hello /
 * isMaster (the handshake, with compression negotiated), buildInfo, ping,
 * getParameter, getLog, hostInfo, whatsmyuri, getCmdLineOpts, startSession
 * (a fresh id) and endSessions / killAllSessions / refreshSessions (minidoc
 * has no sessions: lsid is accepted and ignored, so there is nothing to
 * end), listDatabases and dropDatabase (srv_db.c), and the refusals: the
 * replSet* commands (NoReplicationEnabled, 76; replSetInitiate with its own
 * message), readConcern levels linearizable and snapshot (NotAReplicaSet,
 * 123), transactions (a command
 * with txnNumber / startTransaction / autocommit, commitTransaction,
 * abortTransaction: IllegalOperation, 20, "Transaction numbers are only
 * allowed on a replica set member or mongos", as a standalone mongod says).
 * Authentication (saslStart, saslContinue, logout, connectionStatus) is
 * srv_auth.c's, the user commands srv_users.c's; with --auth,
 * srv_auth_check decides first whether the connection may run the command.
 * serverStatus goes to the database and gains the server's
 * connections, host, pid and uptime.  Sharding commands (shardCollection,
 * enableSharding, addShard) are unknown to a mongod and to minidoc alike:
 * CommandNotFound, 59.
 *
 * maxWireVersion is 13, what MongoDB 5.0 reports.  Drivers gate protocol
 * features on it, not on the version string, and the current ones refuse a
 * server below their minimum (wire 6 for 3.6 in pymongo 3.x and 4.x, wire 7
 * or 8 in the newest pymongo, Node.js driver and mongosh): 13 is inside
 * every one's window, while OP_MSG (6), hello and the rest of the handshake
 * are what minidoc implements.  A driver only sends what is newer than
 * minidoc's 3.6/4.0 semantics (pipelines in update, $merge, ...) when its
 * user asks, and then gets minidoc's error for it.  buildInfo keeps
 * minidoc's own version string ("3.6.0-minidoc-..."): the semantics are
 * 3.6's.  The hello reply has no topologyVersion, so drivers poll the
 * server instead of using the streaming (exhaust) protocol; exhaustAllowed
 * is accepted and answered with one normal reply.
 */
#include <openssl/opensslv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "srv.h"

/* codeName for the codes this file and srv_wire.c use beyond md_code_name. */
const char *srv_code_name(int code)
{
    static const struct {
        int code;
        const char *name;
    } names[] = {
        {11, "UserNotFound"},      {13, "Unauthorized"},
        {17, "ProtocolError"},     {18, "AuthenticationFailed"},
        {31, "RoleNotFound"},      {334, "MechanismUnavailable"},
        {51003, "Location51003"},  {40415, "Location40415"},
        {20, "IllegalOperation"},  {72, "InvalidOptions"},
        {76, "NoReplicationEnabled"}, {96, "OperationFailed"},
        {186, "ClientMetadataCannotBeMutated"}, {215, "DatabaseDropPending"},
        {223, "IllegalOpMsgFlag"}, {233, "TooManyDocumentSequences"},
        {123, "NotAReplicaSet"},   {352, "UnsupportedOpQueryCommand"},
    };
    static __thread char loc[32];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].code == code)
            return names[i].name;
    const char *n = md_code_name(code);
    if (code != MD_CODE_UNKNOWN_ERROR && (!n || strcmp(n, "UnknownError") == 0)) {
        snprintf(loc, sizeof loc, "Location%d", code);
        return loc;
    }
    return n;
}

void srv_reply_error(bson_t *reply, int code, const char *msg)
{
    BSON_APPEND_DOUBLE(reply, "ok", 0);
    BSON_APPEND_UTF8(reply, "errmsg", msg);
    BSON_APPEND_INT32(reply, "code", code);
    BSON_APPEND_UTF8(reply, "codeName", srv_code_name(code));
}

void srv_reply_md_error(bson_t *reply, const md_error *err)
{
    BSON_APPEND_DOUBLE(reply, "ok", 0);
    BSON_APPEND_UTF8(reply, "errmsg", err->message);
    BSON_APPEND_INT32(reply, "code", err->code);
    bool known = err->code_name[0] && strcmp(err->code_name, "UnknownError") != 0;
    BSON_APPEND_UTF8(reply, "codeName", known ? err->code_name : srv_code_name(err->code));
}

#define reply_error srv_reply_error
#define reply_md_error srv_reply_md_error

static void ok(bson_t *reply)
{
    BSON_APPEND_DOUBLE(reply, "ok", 1);
}

/* ---- hello / isMaster ---------------------------------------------------------------- */

/* compression: the client's list, keeping the ones this server allows. */
static void negotiate(srv_conn *c, const bson_t *cmd, bson_t *reply)
{
    bson_iter_t it, a;
    bson_t arr;
    int n = 0;
    const char *allowed = srv_cfg(c->server)->compressors;
    if (!bson_iter_init_find(&it, cmd, "compression") || !BSON_ITER_HOLDS_ARRAY(&it) ||
        !bson_iter_recurse(&it, &a))
        return;
    BSON_APPEND_ARRAY_BEGIN(reply, "compression", &arr);
    while (bson_iter_next(&a) && n < 3) {
        if (!BSON_ITER_HOLDS_UTF8(&a))
            continue;
        const char *name = bson_iter_utf8(&a, NULL);
        const srv_compressor *comp = srv_compressor_by_name(name);
        size_t len = strlen(name);
        const char *p = allowed;
        bool ok_name = false;
        while (comp && p && *p) {
            if (!strncmp(p, name, len) && (p[len] == ',' || p[len] == '\0'))
                ok_name = true;
            p = strchr(p, ',');
            p = p ? p + 1 : NULL;
        }
        if (!ok_name)
            continue;
        char key[4] = {(char)('0' + n), 0};
        BSON_APPEND_UTF8(&arr, key, name);
        c->compressors[n++] = comp->id;
    }
    c->compressors[n] = -1;
    bson_append_array_end(reply, &arr);
}

static void cmd_hello(srv_conn *c, const bson_t *cmd, bool legacy, bson_t *reply)
{
    bson_iter_t it;
    bool has_client = bson_iter_init_find(&it, cmd, "client");
    if (has_client && c->handshake_done) {
        reply_error(reply, 186, "The client metadata document may only be sent in the first "
                    "hello");
        return;
    }
    if (has_client && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        bson_t attr = BSON_INITIALIZER;
        BSON_APPEND_UTF8(&attr, "remote", c->remote);
        BSON_APPEND_INT64(&attr, "client", c->id);
        bson_append_iter(&attr, "doc", -1, &it);
        srv_log(SRV_LOG_I, "NETWORK", 51800, c->ctx, "client metadata", &attr);
        bson_destroy(&attr);
    }
    if (bson_iter_init_find(&it, cmd, "helloOk") && bson_iter_as_bool(&it))
        BSON_APPEND_BOOL(reply, "helloOk", true);
    BSON_APPEND_BOOL(reply, legacy ? "ismaster" : "isWritablePrimary", true);
    BSON_APPEND_INT32(reply, "maxBsonObjectSize", SRV_MAX_BSON);
    BSON_APPEND_INT32(reply, "maxMessageSizeBytes", SRV_MAX_MESSAGE);
    BSON_APPEND_INT32(reply, "maxWriteBatchSize", SRV_MAX_WRITE_BATCH);
    BSON_APPEND_DATE_TIME(reply, "localTime", srv_now_ms());
    BSON_APPEND_INT32(reply, "logicalSessionTimeoutMinutes", SRV_SESSION_MINUTES);
    BSON_APPEND_INT64(reply, "connectionId", c->id);
    BSON_APPEND_INT32(reply, "minWireVersion", SRV_MIN_WIRE);
    BSON_APPEND_INT32(reply, "maxWireVersion", SRV_MAX_WIRE);
    BSON_APPEND_BOOL(reply, "readOnly", false);
    if (!c->handshake_done)
        negotiate(c, cmd, reply);
    srv_auth_hello(c, cmd, reply);
    c->handshake_done = true;
    ok(reply);
}

/* ---- the small server commands ------------------------------------------------------- */

static void cmd_build_info(srv_conn *c, bson_t *reply)
{
    bson_t arr, ssl;
    BSON_APPEND_UTF8(reply, "version", "3.6.0-minidoc-" MD_VERSION_STRING);
    BSON_APPEND_UTF8(reply, "gitVersion", "none");
    BSON_APPEND_ARRAY_BEGIN(reply, "modules", &arr);
    bson_append_array_end(reply, &arr);
    BSON_APPEND_UTF8(reply, "allocator", "system");
    BSON_APPEND_UTF8(reply, "javascriptEngine", "none");
    BSON_APPEND_UTF8(reply, "sysInfo", "deprecated");
    BSON_APPEND_ARRAY_BEGIN(reply, "versionArray", &arr);
    BSON_APPEND_INT32(&arr, "0", 3);
    BSON_APPEND_INT32(&arr, "1", 6);
    BSON_APPEND_INT32(&arr, "2", 0);
    BSON_APPEND_INT32(&arr, "3", 0);
    bson_append_array_end(reply, &arr);
    BSON_APPEND_DOCUMENT_BEGIN(reply, "openssl", &ssl);
    BSON_APPEND_UTF8(&ssl, "running", srv_tls_context(c->server) ? srv_tls_version()
                                                                  : "disabled");
    BSON_APPEND_UTF8(&ssl, "compiled", OPENSSL_VERSION_TEXT);
    bson_append_document_end(reply, &ssl);
    BSON_APPEND_INT32(reply, "bits", (int32_t)(8 * sizeof(void *)));
    BSON_APPEND_BOOL(reply, "debug", false);
    BSON_APPEND_INT32(reply, "maxBsonObjectSize", SRV_MAX_BSON);
    ok(reply);
}

/* getParameter: {getParameter: 1, name: 1, ...} or {getParameter: "*"}. */
static void cmd_get_parameter(srv_conn *c, const bson_t *cmd, bson_t *reply)
{
    bson_iter_t it;
    bool all = bson_iter_init(&it, cmd) && bson_iter_next(&it) && BSON_ITER_HOLDS_UTF8(&it) &&
               strcmp(bson_iter_utf8(&it, NULL), "*") == 0;
    const srv_config *cfg = srv_cfg(c->server);
    bson_t fcv, mech;
    int found = 0;
#define WANT(name) (all || bson_iter_init_find(&it, cmd, name))
    if (WANT("authenticationMechanisms")) {
        BSON_APPEND_ARRAY_BEGIN(reply, "authenticationMechanisms", &mech);
        BSON_APPEND_UTF8(&mech, "0", "SCRAM-SHA-256");
        bson_append_array_end(reply, &mech);
        found++;
    }
    if (WANT("featureCompatibilityVersion")) {
        BSON_APPEND_DOCUMENT_BEGIN(reply, "featureCompatibilityVersion", &fcv);
        BSON_APPEND_UTF8(&fcv, "version", "3.6");
        bson_append_document_end(reply, &fcv);
        found++;
    }
    if (WANT("logLevel")) {
        BSON_APPEND_INT32(reply, "logLevel", 0);
        found++;
    }
    if (WANT("maxIncomingConnections")) {
        BSON_APPEND_INT32(reply, "maxIncomingConnections", cfg->max_conns);
        found++;
    }
    if (WANT("networkMessageCompressors")) {
        BSON_APPEND_UTF8(reply, "networkMessageCompressors", cfg->compressors);
        found++;
    }
    if (WANT("maxBsonObjectSize")) {
        BSON_APPEND_INT32(reply, "maxBsonObjectSize", SRV_MAX_BSON);
        found++;
    }
#undef WANT
    if (!found) {
        bson_reinit(reply);
        reply_error(reply, 72, "no option found to get");
        return;
    }
    ok(reply);
}

static void cmd_get_log(const bson_t *cmd, bson_t *reply)
{
    bson_iter_t it;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    if (!BSON_ITER_HOLDS_UTF8(&it)) {
        reply_error(reply, MD_CODE_TYPE_MISMATCH,
                    "Argument to getLog must be of type String; found a value of another type");
        return;
    }
    const char *which = bson_iter_utf8(&it, NULL);
    if (strcmp(which, "*") == 0) {
        bson_t arr;
        BSON_APPEND_ARRAY_BEGIN(reply, "names", &arr);
        BSON_APPEND_UTF8(&arr, "0", "global");
        BSON_APPEND_UTF8(&arr, "1", "startupWarnings");
        bson_append_array_end(reply, &arr);
    } else if (strcmp(which, "global") == 0 || strcmp(which, "startupWarnings") == 0) {
        srv_log_get(which, reply);
    } else {
        char msg[160];
        snprintf(msg, sizeof msg, "No log named '%s'", which);
        reply_error(reply, 96, msg);
        return;
    }
    ok(reply);
}

static void cmd_host_info(bson_t *reply)
{
    struct utsname u;
    char host[256] = "localhost";
    bson_t sys, os, extra;
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    gethostname(host, sizeof host - 1);
    uname(&u);
    BSON_APPEND_DOCUMENT_BEGIN(reply, "system", &sys);
    BSON_APPEND_DATE_TIME(&sys, "currentTime", srv_now_ms());
    BSON_APPEND_UTF8(&sys, "hostname", host);
    BSON_APPEND_INT32(&sys, "cpuAddrSize", (int32_t)(8 * sizeof(void *)));
    BSON_APPEND_INT64(&sys, "memSizeMB", (int64_t)pages * psize / (1024 * 1024));
    BSON_APPEND_INT64(&sys, "memLimitMB", (int64_t)pages * psize / (1024 * 1024));
    BSON_APPEND_INT32(&sys, "numCores", (int32_t)sysconf(_SC_NPROCESSORS_ONLN));
    BSON_APPEND_UTF8(&sys, "cpuArch", u.machine);
    BSON_APPEND_BOOL(&sys, "numaEnabled", false);
    bson_append_document_end(reply, &sys);
    BSON_APPEND_DOCUMENT_BEGIN(reply, "os", &os);
    BSON_APPEND_UTF8(&os, "type", u.sysname);
    BSON_APPEND_UTF8(&os, "name", u.sysname);
    BSON_APPEND_UTF8(&os, "version", u.release);
    bson_append_document_end(reply, &os);
    BSON_APPEND_DOCUMENT_BEGIN(reply, "extra", &extra);
    BSON_APPEND_UTF8(&extra, "versionString", u.version);
    BSON_APPEND_INT64(&extra, "pageSize", psize);
    bson_append_document_end(reply, &extra);
    ok(reply);
}

static void cmd_cmd_line_opts(srv_conn *c, bson_t *reply)
{
    const srv_config *cfg = srv_cfg(c->server);
    bson_t argv, parsed, net, storage;
    BSON_APPEND_ARRAY_BEGIN(reply, "argv", &argv);
    BSON_APPEND_UTF8(&argv, "0", "minidoc");
    BSON_APPEND_UTF8(&argv, "1", "serve");
    bson_append_array_end(reply, &argv);
    BSON_APPEND_DOCUMENT_BEGIN(reply, "parsed", &parsed);
    BSON_APPEND_DOCUMENT_BEGIN(&parsed, "net", &net);
    BSON_APPEND_UTF8(&net, "bindIp", cfg->bind);
    BSON_APPEND_INT32(&net, "port", srv_port(c->server));
    BSON_APPEND_INT32(&net, "maxIncomingConnections", cfg->max_conns);
    if (cfg->tls_mode != SRV_TLS_DISABLED) {
        static const char *const modes[] = {"disabled", "allowTLS", "preferTLS", "requireTLS"};
        bson_t tls;
        BSON_APPEND_DOCUMENT_BEGIN(&net, "tls", &tls);
        BSON_APPEND_UTF8(&tls, "mode", modes[cfg->tls_mode]);
        BSON_APPEND_UTF8(&tls, "certificateKeyFile", cfg->tls_cert);
        if (cfg->tls_ca)
            BSON_APPEND_UTF8(&tls, "CAFile", cfg->tls_ca);
        bson_append_document_end(&net, &tls);
    }
    bson_append_document_end(&parsed, &net);
    if (cfg->auth) {
        bson_t sec;
        BSON_APPEND_DOCUMENT_BEGIN(&parsed, "security", &sec);
        BSON_APPEND_UTF8(&sec, "authorization", "enabled");
        bson_append_document_end(&parsed, &sec);
    }
    BSON_APPEND_DOCUMENT_BEGIN(&parsed, "storage", &storage);
    BSON_APPEND_UTF8(&storage, "dbPath", cfg->dbpath);
    if (cfg->engine)
        BSON_APPEND_UTF8(&storage, "engine", cfg->engine);
    bson_append_document_end(&parsed, &storage);
    bson_append_document_end(reply, &parsed);
    ok(reply);
}

static void cmd_list_databases(srv_conn *c, const srv_request *req, bson_t *reply)
{
    bson_iter_t it;
    bson_t dbs;
    md_error err;
    int64_t total = 0;
    if (strcmp(req->db, "admin") != 0) {
        reply_error(reply, 13, "listDatabases may only be run against the admin database.");
        return;
    }
    if (bson_iter_init_find(&it, &req->cmd, "filter") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        uint32_t len;
        const uint8_t *data;
        bson_iter_document(&it, &len, &data);
        if (len > 5) {
            reply_error(reply, MD_CODE_COMMAND_NOT_SUPPORTED,
                        "listDatabases: filter is not supported by minidoc serve");
            return;
        }
    }
    bool name_only = bson_iter_init_find(&it, &req->cmd, "nameOnly") && bson_iter_as_bool(&it);
    BSON_APPEND_ARRAY_BEGIN(reply, "databases", &dbs);
    int rc = srv_dbs_list(srv_databases(c->server), name_only, &dbs, &total, &err);
    bson_append_array_end(reply, &dbs);
    if (rc) {
        bson_reinit(reply);
        reply_md_error(reply, &err);
        return;
    }
    if (!name_only) {
        BSON_APPEND_DOUBLE(reply, "totalSize", (double)total);
        BSON_APPEND_DOUBLE(reply, "totalSizeMb", (double)(total / (1024 * 1024)));
    }
    ok(reply);
}

/* ---- refusals ---------------------------------------------------------------------------- */

static bool is_txn(const bson_t *cmd, const char *name)
{
    bson_iter_t it;
    return !strcmp(name, "commitTransaction") || !strcmp(name, "abortTransaction") ||
           bson_iter_init_find(&it, cmd, "txnNumber") ||
           bson_iter_init_find(&it, cmd, "startTransaction") ||
           bson_iter_init_find(&it, cmd, "autocommit");
}

/* readConcern levels only a replica set member serves: the level, or NULL. */
static const char *replica_read_concern(const bson_t *cmd)
{
    bson_iter_t it, lv;
    if (!bson_iter_init_find(&it, cmd, "readConcern") || !BSON_ITER_HOLDS_DOCUMENT(&it) ||
        !bson_iter_recurse(&it, &lv) || !bson_iter_find(&lv, "level") ||
        !BSON_ITER_HOLDS_UTF8(&lv))
        return NULL;
    const char *level = bson_iter_utf8(&lv, NULL);
    return !strcmp(level, "linearizable") || !strcmp(level, "snapshot") ? level : NULL;
}

/* startSession: a fresh session id (a random UUID), as a standalone mongod
 * answers; minidoc keeps no state for it (see the header). */
static void cmd_start_session(bson_t *reply)
{
    uint8_t uuid[16];
    bson_t id;
    FILE *f = fopen("/dev/urandom", "rb");
    if (!f || fread(uuid, 1, sizeof uuid, f) != sizeof uuid) {
        if (f)
            fclose(f);
        reply_error(reply, MD_CODE_INTERNAL_ERROR, "startSession: cannot read /dev/urandom");
        return;
    }
    fclose(f);
    uuid[6] = (uint8_t)((uuid[6] & 0x0f) | 0x40); /* version 4 */
    uuid[8] = (uint8_t)((uuid[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    BSON_APPEND_DOCUMENT_BEGIN(reply, "id", &id);
    bson_append_binary(&id, "id", 2, BSON_SUBTYPE_UUID, uuid, sizeof uuid);
    bson_append_document_end(reply, &id);
    BSON_APPEND_INT32(reply, "timeoutMinutes", SRV_SESSION_MINUTES);
    ok(reply);
}

/* ---- the hand-off ---------------------------------------------------------------------- */

static void run_on_db(srv_conn *c, srv_request *req, const char *name, bson_t *reply)
{
    srv_db *db;
    md_error err;
    bson_t r;
    bson_iter_t it;
    int rc = srv_db_get(srv_databases(c->server), req->db, true, &db, &err);
    if (rc) {
        reply_md_error(reply, &err);
        return;
    }
    md_db_command(srv_db_handle(db), &req->cmd, &r, NULL);
    srv_db_put(db);
    /* admin.system.users written as a collection: sessions re-read roles */
    if (!strcmp(req->db, "admin") && bson_iter_init(&it, &req->cmd) && bson_iter_next(&it) &&
        BSON_ITER_HOLDS_UTF8(&it) && !strcmp(bson_iter_utf8(&it, NULL), "system.users"))
        srv_users_changed(c->server);
    if (strcmp(name, "serverStatus") != 0) {
        bson_concat(reply, &r);
        bson_destroy(&r);
        return;
    }
    bson_t conns;
    int64_t created = 0;
    bson_iter_t it2;
    int cur = srv_conn_count(c->server, &created);
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    BSON_APPEND_UTF8(reply, "host", host);
    BSON_APPEND_UTF8(reply, "process", "minidoc serve");
    BSON_APPEND_INT64(reply, "pid", (int64_t)getpid());
    bson_copy_to_excluding_noinit(&r, reply, "ok", "host", "process", "pid", NULL);
    BSON_APPEND_DOCUMENT_BEGIN(reply, "connections", &conns);
    BSON_APPEND_INT32(&conns, "current", cur);
    BSON_APPEND_INT32(&conns, "available", srv_cfg(c->server)->max_conns - cur);
    BSON_APPEND_INT64(&conns, "totalCreated", created);
    bson_append_document_end(reply, &conns);
    bson_t net, comp;
    BSON_APPEND_DOCUMENT_BEGIN(reply, "network", &net);
    BSON_APPEND_DOCUMENT_BEGIN(&net, "compression", &comp);
    srv_compression_stats(&comp);
    bson_append_document_end(&net, &comp);
    bson_append_document_end(reply, &net);
    if (bson_iter_init_find(&it2, &r, "ok"))
        bson_append_iter(reply, "ok", -1, &it2);
    bson_destroy(&r);
}

void srv_cmd_run(srv_conn *c, srv_request *req, bson_t *reply)
{
    bson_iter_t it;
    bson_init(reply);
    if (!bson_iter_init(&it, &req->cmd) || !bson_iter_next(&it)) {
        reply_error(reply, MD_CODE_FAILED_TO_PARSE, "no command given: the document is empty");
        return;
    }
    const char *name = bson_iter_key(&it);
    md_error err;
    if (srv_db_name_check(req->db, &err)) {
        reply_md_error(reply, &err);
    } else if (!strcmp(name, "hello") || !strcmp(name, "isMaster") ||
               !strcmp(name, "ismaster")) {
        cmd_hello(c, &req->cmd, strcmp(name, "hello") != 0, reply);
    } else if (!srv_auth_check(c, req, name, reply)) {
        /* Unauthorized: the reply says why */
    } else if (srv_auth_command(c, req, name, reply) || srv_users_command(c, req, name, reply)) {
        /* answered */
    } else if (is_txn(&req->cmd, name)) {
        reply_error(reply, 20, "Transaction numbers are only allowed on a replica set member "
                    "or mongos");
    } else if (replica_read_concern(&req->cmd)) {
        char msg[128];
        snprintf(msg, sizeof msg, "node needs to be a replica set member to use read concern "
                 "level '%s'", replica_read_concern(&req->cmd));
        reply_error(reply, 123, msg);
    } else if (!strcmp(name, "ping")) {
        ok(reply);
    } else if (!strcmp(name, "buildInfo") || !strcmp(name, "buildinfo")) {
        cmd_build_info(c, reply);
    } else if (!strcmp(name, "getParameter")) {
        cmd_get_parameter(c, &req->cmd, reply);
    } else if (!strcmp(name, "getLog")) {
        cmd_get_log(&req->cmd, reply);
    } else if (!strcmp(name, "hostInfo")) {
        cmd_host_info(reply);
    } else if (!strcmp(name, "whatsmyuri")) {
        BSON_APPEND_UTF8(reply, "you", c->remote);
        ok(reply);
    } else if (!strcmp(name, "getCmdLineOpts")) {
        cmd_cmd_line_opts(c, reply);
    } else if (!strcmp(name, "startSession")) {
        cmd_start_session(reply);
    } else if (!strcmp(name, "endSessions") || !strcmp(name, "killAllSessions") ||
               !strcmp(name, "refreshSessions")) {
        ok(reply);
    } else if (!strcmp(name, "listDatabases")) {
        cmd_list_databases(c, req, reply);
    } else if (!strcmp(name, "dropDatabase")) {
        int rc = srv_db_drop(srv_databases(c->server), req->db, reply, &err);
        if (!strcmp(req->db, "admin"))
            srv_users_changed(c->server); /* the users went with it */
        if (rc)
            reply_md_error((bson_reinit(reply), reply), &err);
        else
            ok(reply);
    } else if (!strcmp(name, "replSetInitiate")) {
        reply_error(reply, 76, "This node was not started with the replSet option");
    } else if (!strncmp(name, "replSet", 7)) {
        reply_error(reply, 76, "not running with --replSet");
    } else {
        run_on_db(c, req, name, reply);
    }
}
