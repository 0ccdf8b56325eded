/*
 * srv_auth.c -- authentication and authorization for `minidoc serve --auth`.
 *
 * Authentication: SCRAM-SHA-256 through saslStart / saslContinue on the
 * user's database (srv_scram.c does the computing), or in one round trip
 * less through hello's speculativeAuthenticate, which pymongo, the Node.js
 * driver and mongosh send.  A conversation:
 *
 *   saslStart {mechanism, payload: client-first, options: {skipEmptyExchange}}
 *      --> {conversationId: 1, done: false, payload: server-first}
 *   saslContinue {conversationId: 1, payload: client-final}
 *      --> {done: true, payload: "v=..."}   (skipEmptyExchange)
 *      --> {done: false, payload: "v=..."}  then one more saslContinue with
 *          an empty payload --> {done: true}, as older clients expect
 *
 * A connection may be authenticated as one user per database (as in
 * MongoDB 3.x); `logout` on a database forgets its user.
 *
 * Authorization (with --auth only): without a user, every command but the
 * handshake and authentication ones is Unauthorized (13), "command X
 * requires authentication".  The localhost exception: while admin's
 * system.users is empty, a connection from 127.0.0.0/8 may run createUser
 * on admin (and nothing else), as mongod's.  With users, each command
 * needs one action on its database (srv_auth_need below): the built-in
 * roles of srv_role_lookup grant actions on one database or on all of
 * them.  The rules are per database, plus two for admin.system.users:
 * reading it as a collection needs userAdmin on admin, writing it needs
 * root.  A session re-reads its users' roles when system.users has changed
 * since (srv_users_version), so updateUser and dropUser take effect on
 * open connections at their next command.
 *
 * A user may always run usersInfo about itself.
 *
 * Not enforced: cursor ownership (a getMore names a cursor by id, whoever
 * made it) and collection-level privileges (there are no user-defined
 * roles); an unknown command needs root, where MongoDB says CommandNotFound
 * first.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv.h"

#define SESS_USERS 8
#define MECH "SCRAM-SHA-256"

typedef struct grant {
    uint32_t actions;
    bool any_db;
    char db[SRV_DB_NAME_MAX + 1];
} grant;

typedef struct sess_user {
    char *user;
    char db[SRV_DB_NAME_MAX + 1];
    bson_t *roles; /* [{role, db}] as stored (a pointer: users move in the array) */
    grant *grants;
    int ngrants;
} sess_user;

struct srv_sess {
    srv_scram conv;
    bool conv_active, conv_skip_empty, conv_speculative;
    char conv_db[SRV_DB_NAME_MAX + 1];
    char *conv_user;
    int nusers;
    sess_user users[SESS_USERS];
    int64_t version; /* srv_users_version when the roles were read */
};

/* ---- the built-in roles ------------------------------------------------------------- */

#define ALL (SRV_ACT_READ | SRV_ACT_WRITE | SRV_ACT_DBADMIN | SRV_ACT_USERADMIN | SRV_ACT_CLUSTER)

static const struct {
    const char *name;
    uint32_t actions;
    bool any_db; /* admin only, and then on every database */
} roles[] = {
    {"read", SRV_ACT_READ, false},
    {"readWrite", SRV_ACT_READ | SRV_ACT_WRITE, false},
    {"dbAdmin", SRV_ACT_DBADMIN, false},
    {"userAdmin", SRV_ACT_USERADMIN, false},
    {"dbOwner", SRV_ACT_READ | SRV_ACT_WRITE | SRV_ACT_DBADMIN | SRV_ACT_USERADMIN, false},
    {"readAnyDatabase", SRV_ACT_READ, true},
    {"readWriteAnyDatabase", SRV_ACT_READ | SRV_ACT_WRITE, true},
    {"dbAdminAnyDatabase", SRV_ACT_DBADMIN, true},
    {"userAdminAnyDatabase", SRV_ACT_USERADMIN, true},
    {"clusterMonitor", SRV_ACT_CLUSTER, true},
    {"clusterAdmin", SRV_ACT_CLUSTER, true},
    {"root", ALL, true},
};

bool srv_role_lookup(const char *role, const char *db, uint32_t *actions, bool *any_db)
{
    for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++)
        if (!strcmp(roles[i].name, role)) {
            if (roles[i].any_db && strcmp(db, "admin") != 0)
                return false;
            *actions = roles[i].actions;
            *any_db = roles[i].any_db;
            return true;
        }
    return false;
}

/* ---- what a command needs ------------------------------------------------------------ */

static const char *const no_auth[] = {
    "hello", "isMaster", "ismaster", "buildInfo", "buildinfo", "ping", "saslStart",
    "saslContinue", "authenticate", "logout", "whatsmyuri", "connectionStatus",
    "endSessions", "getnonce",
};

static const struct {
    const char *name;
    uint32_t any; /* one of these actions on the command's database */
} needs[] = {
    {"find", SRV_ACT_READ}, {"getMore", SRV_ACT_READ}, {"killCursors", SRV_ACT_READ},
    {"count", SRV_ACT_READ}, {"distinct", SRV_ACT_READ}, {"aggregate", SRV_ACT_READ},
    {"explain", SRV_ACT_READ}, {"mapReduce", SRV_ACT_READ}, {"mapreduce", SRV_ACT_READ},
    {"planCacheListQueryShapes", SRV_ACT_READ}, {"_hashBSONElement", SRV_ACT_READ},
    {"listCollections", SRV_ACT_READ | SRV_ACT_DBADMIN},
    {"listIndexes", SRV_ACT_READ | SRV_ACT_DBADMIN},
    {"collStats", SRV_ACT_READ | SRV_ACT_DBADMIN}, {"dbStats", SRV_ACT_READ | SRV_ACT_DBADMIN},
    {"insert", SRV_ACT_WRITE}, {"update", SRV_ACT_WRITE}, {"delete", SRV_ACT_WRITE},
    {"findAndModify", SRV_ACT_WRITE}, {"findandmodify", SRV_ACT_WRITE},
    {"create", SRV_ACT_WRITE | SRV_ACT_DBADMIN}, {"drop", SRV_ACT_WRITE | SRV_ACT_DBADMIN},
    {"createIndexes", SRV_ACT_WRITE | SRV_ACT_DBADMIN},
    {"dropIndexes", SRV_ACT_WRITE | SRV_ACT_DBADMIN},
    {"deleteIndexes", SRV_ACT_WRITE | SRV_ACT_DBADMIN},
    {"convertToCapped", SRV_ACT_WRITE | SRV_ACT_DBADMIN}, {"emptycapped", SRV_ACT_WRITE},
    {"cloneCollectionAsCapped", SRV_ACT_WRITE},
    {"collMod", SRV_ACT_DBADMIN}, {"validate", SRV_ACT_DBADMIN}, {"compact", SRV_ACT_DBADMIN},
    {"dropDatabase", SRV_ACT_DBADMIN}, {"planCacheClear", SRV_ACT_DBADMIN},
    {"ttlMonitor", SRV_ACT_DBADMIN},
    {"createUser", SRV_ACT_USERADMIN}, {"updateUser", SRV_ACT_USERADMIN},
    {"dropUser", SRV_ACT_USERADMIN}, {"dropAllUsersFromDatabase", SRV_ACT_USERADMIN},
    {"usersInfo", SRV_ACT_USERADMIN}, {"grantRolesToUser", SRV_ACT_USERADMIN},
    {"revokeRolesFromUser", SRV_ACT_USERADMIN},
    {"serverStatus", SRV_ACT_CLUSTER}, {"hostInfo", SRV_ACT_CLUSTER},
    {"getLog", SRV_ACT_CLUSTER}, {"getCmdLineOpts", SRV_ACT_CLUSTER},
    {"getParameter", SRV_ACT_CLUSTER}, {"setParameter", SRV_ACT_CLUSTER},
    {"fsync", SRV_ACT_CLUSTER}, {"killAllSessions", SRV_ACT_CLUSTER},
    {"refreshSessions", SRV_ACT_CLUSTER},
};

/* Does the pipeline (aggregate) or the out (mapReduce) write a collection? */
static bool writes(const bson_t *cmd, const char *name)
{
    bson_iter_t it, st, f;
    if (!strcmp(name, "mapReduce") || !strcmp(name, "mapreduce")) {
        if (!bson_iter_init_find(&it, cmd, "out"))
            return false;
        return !(BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &f) &&
                 bson_iter_find(&f, "inline"));
    }
    if (strcmp(name, "aggregate") != 0 || !bson_iter_init_find(&it, cmd, "pipeline") ||
        !BSON_ITER_HOLDS_ARRAY(&it) || !bson_iter_recurse(&it, &st))
        return false;
    while (bson_iter_next(&st))
        if (BSON_ITER_HOLDS_DOCUMENT(&st) && bson_iter_recurse(&st, &f) && bson_iter_next(&f) &&
            (!strcmp(bson_iter_key(&f), "$out") || !strcmp(bson_iter_key(&f), "$merge")))
            return true;
    return false;
}

/* The actions `name` needs on req->db: any one of *any, and all of *all. */
static void srv_auth_need(const srv_request *req, const char *name, uint32_t *any,
                          uint32_t *all)
{
    *any = 0;
    *all = 0;
    for (size_t i = 0; i < sizeof needs / sizeof needs[0]; i++)
        if (!strcmp(needs[i].name, name))
            *any = needs[i].any;
    if (!*any) {
        *all = ALL; /* unknown here: root only */
        return;
    }
    if (writes(&req->cmd, name))
        *all |= SRV_ACT_WRITE;
    bson_iter_t it;
    bool users_coll = !strcmp(req->db, "admin") && bson_iter_init(&it, &req->cmd) &&
                      bson_iter_next(&it) && BSON_ITER_HOLDS_UTF8(&it) &&
                      !strcmp(bson_iter_utf8(&it, NULL), "system.users");
    if (users_coll) { /* reads need userAdmin on admin, writes root */
        bool w = (*any & (SRV_ACT_WRITE | SRV_ACT_DBADMIN)) || (*all & SRV_ACT_WRITE);
        *any = 0;
        *all = w ? ALL : SRV_ACT_USERADMIN;
    }
}

/* ---- sessions ------------------------------------------------------------------------- */

static srv_sess *sess_of(srv_conn *c)
{
    if (!c->sess)
        c->sess = calloc(1, sizeof *c->sess);
    return c->sess;
}

static void conv_end(srv_sess *s)
{
    srv_scram_cleanup(&s->conv);
    free(s->conv_user);
    s->conv_user = NULL;
    s->conv_active = false;
}

static void user_clear(sess_user *u)
{
    free(u->user);
    free(u->grants);
    if (u->roles)
        bson_destroy(u->roles);
    memset(u, 0, sizeof *u);
}

void srv_auth_conn_cleanup(srv_conn *c)
{
    srv_sess *s = c->sess;
    if (!s)
        return;
    conv_end(s);
    for (int i = 0; i < s->nusers; i++)
        user_clear(&s->users[i]);
    free(s);
    c->sess = NULL;
}

/* Turn a roles array into grants (unknown roles grant nothing). */
static void user_set_roles(sess_user *u, const bson_t *role_arr)
{
    bson_iter_t it, d;
    free(u->grants);
    u->grants = calloc(bson_count_keys(role_arr) + 1, sizeof *u->grants);
    u->ngrants = 0;
    if (u->roles)
        bson_destroy(u->roles);
    u->roles = bson_copy(role_arr);
    if (!u->grants || !bson_iter_init(&it, role_arr))
        return;
    while (bson_iter_next(&it)) {
        const char *role = NULL, *db = NULL;
        if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &d))
            continue;
        while (bson_iter_next(&d)) {
            if (!strcmp(bson_iter_key(&d), "role") && BSON_ITER_HOLDS_UTF8(&d))
                role = bson_iter_utf8(&d, NULL);
            else if (!strcmp(bson_iter_key(&d), "db") && BSON_ITER_HOLDS_UTF8(&d))
                db = bson_iter_utf8(&d, NULL);
        }
        grant *g = &u->grants[u->ngrants];
        if (role && db && strlen(db) <= SRV_DB_NAME_MAX &&
            srv_role_lookup(role, db, &g->actions, &g->any_db)) {
            snprintf(g->db, sizeof g->db, "%s", db);
            u->ngrants++;
        }
    }
}

/* Roles changed since the session read them: read them again; users that
 * were dropped are logged out. */
static void sess_refresh(srv_conn *c)
{
    srv_sess *s = c->sess;
    int64_t v = srv_users_version(c->server);
    if (!s || s->version == v)
        return;
    s->version = v;
    for (int i = 0; i < s->nusers;) {
        sess_user *u = &s->users[i];
        bson_t r;
        md_error err;
        srv_scram_cred cred;
        int rc = srv_users_find(c->server, u->db, u->user, &cred, &r, &err);
        if (rc == 0) {
            user_set_roles(u, &r);
            bson_destroy(&r);
            i++;
        } else if (rc == MD_NOTFOUND) {
            user_clear(u);
            s->users[i] = s->users[--s->nusers];
            memset(&s->users[s->nusers], 0, sizeof(sess_user));
        } else
            i++; /* keep what it had: an I/O error is no reason to log it out */
    }
}

static bool allowed(const srv_sess *s, const char *db, uint32_t any, uint32_t all)
{
    uint32_t have_db = 0;
    for (int i = 0; s && i < s->nusers; i++)
        for (int k = 0; k < s->users[i].ngrants; k++) {
            const grant *g = &s->users[i].grants[k];
            if (g->any_db || !strcmp(g->db, db))
                have_db |= g->actions;
        }
    return (any == 0 || (have_db & any)) && (have_db & all) == all;
}

/* listDatabases: the cluster action, or read on every database. */
static bool may_list_databases(const srv_sess *s)
{
    for (int i = 0; s && i < s->nusers; i++)
        for (int k = 0; k < s->users[i].ngrants; k++) {
            const grant *g = &s->users[i].grants[k];
            if (g->actions & SRV_ACT_CLUSTER || (g->any_db && g->actions & SRV_ACT_READ))
                return true;
        }
    return false;
}

/* usersInfo about a user this session is authenticated as: allowed, as
 * MongoDB lets every user view itself. */
static bool is_self(const srv_sess *s, const srv_request *req)
{
    bson_iter_t it, d;
    const char *user = NULL, *db = req->db;
    bson_iter_init(&it, &req->cmd);
    bson_iter_next(&it);
    if (BSON_ITER_HOLDS_UTF8(&it))
        user = bson_iter_utf8(&it, NULL);
    else if (BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &d)) {
        db = NULL;
        while (bson_iter_next(&d)) {
            if (!strcmp(bson_iter_key(&d), "user") && BSON_ITER_HOLDS_UTF8(&d))
                user = bson_iter_utf8(&d, NULL);
            else if (!strcmp(bson_iter_key(&d), "db") && BSON_ITER_HOLDS_UTF8(&d))
                db = bson_iter_utf8(&d, NULL);
        }
    }
    for (int i = 0; user && db && i < s->nusers; i++)
        if (!strcmp(s->users[i].user, user) && !strcmp(s->users[i].db, db))
            return true;
    return false;
}

static bool is_loopback(const char *remote)
{
    return !strncmp(remote, "127.", 4);
}

bool srv_auth_check(srv_conn *c, const srv_request *req, const char *name, bson_t *reply)
{
    char msg[512];
    if (!srv_cfg(c->server)->auth)
        return true;
    for (size_t i = 0; i < sizeof no_auth / sizeof no_auth[0]; i++)
        if (!strcmp(no_auth[i], name))
            return true;
    sess_refresh(c);
    srv_sess *s = c->sess;
    if (!s || s->nusers == 0) {
        if (!strcmp(name, "createUser") && !strcmp(req->db, "admin") &&
            is_loopback(c->remote) && !srv_users_exist(c->server))
            return true; /* the localhost exception */
        snprintf(msg, sizeof msg, "command %s requires authentication", name);
        srv_reply_error(reply, 13, msg);
        return false;
    }
    uint32_t any, all;
    srv_auth_need(req, name, &any, &all);
    bool ok = !strcmp(name, "listDatabases") ? may_list_databases(s)
                                              : allowed(s, req->db, any, all);
    if (ok)
        return true;
    if (!strcmp(name, "usersInfo") && is_self(s, req))
        return true;
    /* MongoDB prints the whole command; this names its target only, so that
     * no pwd is ever echoed */
    bson_iter_t it;
    bson_iter_init(&it, &req->cmd);
    bson_iter_next(&it);
    if (BSON_ITER_HOLDS_UTF8(&it))
        snprintf(msg, sizeof msg, "not authorized on %s to execute command { %s: \"%.200s\" }",
                 req->db, name, bson_iter_utf8(&it, NULL));
    else
        snprintf(msg, sizeof msg, "not authorized on %s to execute command { %s: ... }",
                 req->db, name);
    srv_reply_error(reply, 13, msg);
    return false;
}

/* ---- SASL ------------------------------------------------------------------------------ */

static void log_auth(srv_conn *c, bool ok, const char *user, const char *db, bool spec,
                     const char *error)
{
    bson_t a = BSON_INITIALIZER;
    BSON_APPEND_UTF8(&a, "mechanism", MECH);
    BSON_APPEND_BOOL(&a, "speculative", spec);
    BSON_APPEND_UTF8(&a, "principalName", user ? user : "");
    BSON_APPEND_UTF8(&a, "authenticationDatabase", db);
    BSON_APPEND_UTF8(&a, "remote", c->remote);
    if (error)
        BSON_APPEND_UTF8(&a, "error", error);
    srv_log(SRV_LOG_I, "ACCESS", ok ? 20250 : 20249, c->ctx,
            ok ? "Authentication succeeded" : "Authentication failed", &a);
    bson_destroy(&a);
}

/* The payload, BinData or string. */
static bool payload_of(const bson_t *cmd, const char **p, size_t *n)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, cmd, "payload"))
        return false;
    if (BSON_ITER_HOLDS_BINARY(&it)) {
        bson_subtype_t st;
        uint32_t len;
        const uint8_t *b;
        bson_iter_binary(&it, &st, &len, &b);
        *p = (const char *)b;
        *n = len;
        return true;
    }
    if (BSON_ITER_HOLDS_UTF8(&it)) {
        uint32_t len;
        *p = bson_iter_utf8(&it, &len);
        *n = len;
        return true;
    }
    return false;
}

static void put_payload(bson_t *reply, const char *s)
{
    BSON_APPEND_BINARY(reply, "payload", BSON_SUBTYPE_BINARY, (const uint8_t *)s,
                       (uint32_t)strlen(s));
}

/* Authenticated: the user joins the session (replacing the one on its db). */
static void sess_add(srv_conn *c, const char *db, const char *user, const bson_t *role_arr)
{
    srv_sess *s = c->sess;
    int i;
    for (i = 0; i < s->nusers; i++)
        if (!strcmp(s->users[i].db, db))
            break;
    if (i == s->nusers) {
        if (s->nusers == SESS_USERS)
            user_clear(&s->users[--s->nusers]);
        i = s->nusers++;
    } else
        user_clear(&s->users[i]);
    sess_user *u = &s->users[i];
    u->user = strdup(user);
    snprintf(u->db, sizeof u->db, "%s", db);
    user_set_roles(u, role_arr);
}

/* saslStart (or speculativeAuthenticate's copy of it) on database `db`:
 * false with reply holding the error. */
static bool sasl_start(srv_conn *c, const char *db, const bson_t *cmd, bool spec, bson_t *reply)
{
    bson_iter_t it, o;
    srv_perr pe;
    const char *p;
    size_t n;
    srv_sess *s = sess_of(c);
    if (!s) {
        srv_reply_error(reply, MD_CODE_INTERNAL_ERROR, "out of memory");
        return false;
    }
    conv_end(s);
    const char *mech = bson_iter_init_find(&it, cmd, "mechanism") && BSON_ITER_HOLDS_UTF8(&it)
                           ? bson_iter_utf8(&it, NULL) : NULL;
    if (!mech) {
        srv_reply_error(reply, MD_CODE_BAD_VALUE, "saslStart: no mechanism given");
        return false;
    }
    if (strcmp(mech, MECH) != 0) {
        char msg[200];
        snprintf(msg, sizeof msg, "Received authentication for mechanism %.64s which is "
                 "unknown or not enabled (minidoc serve offers SCRAM-SHA-256)", mech);
        srv_reply_error(reply, 334, msg);
        return false;
    }
    if (!payload_of(cmd, &p, &n)) {
        srv_reply_error(reply, MD_CODE_BAD_VALUE, "saslStart: no payload");
        return false;
    }
    s->conv_skip_empty = bson_iter_init_find(&it, cmd, "options") &&
                         BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &o) &&
                         bson_iter_find(&o, "skipEmptyExchange") && bson_iter_as_bool(&o);
    s->conv_speculative = spec;
    snprintf(s->conv_db, sizeof s->conv_db, "%s", db);
    if (srv_scram_start(&s->conv, p, n, &s->conv_user, &pe)) {
        conv_end(s);
        srv_reply_error(reply, pe.code, pe.message);
        return false;
    }
    srv_scram_cred cred;
    md_error err;
    int rc = srv_users_find(c->server, db, s->conv_user, &cred, NULL, &err);
    if (rc) {
        char why[300];
        snprintf(why, sizeof why, rc == MD_NOTFOUND ? "UserNotFound: Could not find user "
                 "\"%.100s\" for db \"%s\"" : "%.100s%s", rc == MD_NOTFOUND ? s->conv_user
                 : err.message, db);
        log_auth(c, false, s->conv_user, db, spec, why);
        conv_end(s);
        srv_reply_error(reply, 18, "Authentication failed.");
        return false;
    }
    char *first = NULL;
    rc = srv_scram_server_first(&s->conv, &cred, NULL, &first, &pe);
    if (rc) {
        conv_end(s);
        srv_reply_error(reply, pe.code, pe.message);
        return false;
    }
    s->conv_active = true;
    BSON_APPEND_INT32(reply, "conversationId", 1);
    BSON_APPEND_BOOL(reply, "done", false);
    put_payload(reply, first);
    free(first);
    BSON_APPEND_DOUBLE(reply, "ok", 1);
    return true;
}

static void sasl_continue(srv_conn *c, const srv_request *req, bson_t *reply)
{
    bson_iter_t it;
    srv_perr pe;
    const char *p;
    size_t n;
    srv_sess *s = c->sess;
    if (!s || !s->conv_active || strcmp(s->conv_db, req->db) != 0) {
        srv_reply_error(reply, 17, "No SASL session state found");
        return;
    }
    if (!bson_iter_init_find(&it, &req->cmd, "conversationId") ||
        !BSON_ITER_HOLDS_NUMBER(&it) || bson_iter_as_int64(&it) != 1) {
        conv_end(s);
        srv_reply_error(reply, 17, "sasl: Mismatched conversation id");
        return;
    }
    if (!payload_of(&req->cmd, &p, &n)) {
        conv_end(s);
        srv_reply_error(reply, MD_CODE_BAD_VALUE, "saslContinue: no payload");
        return;
    }
    if (s->conv.step == 3) { /* the empty exchange after v= */
        conv_end(s);
        if (n != 0) {
            srv_reply_error(reply, MD_CODE_BAD_VALUE, "SCRAM: unexpected payload after the "
                            "server's final message");
            return;
        }
        BSON_APPEND_INT32(reply, "conversationId", 1);
        BSON_APPEND_BOOL(reply, "done", true);
        put_payload(reply, "");
        BSON_APPEND_DOUBLE(reply, "ok", 1);
        return;
    }
    char *final = NULL;
    int rc = srv_scram_server_final(&s->conv, p, n, &final, &pe);
    if (rc) {
        log_auth(c, false, s->conv_user, s->conv_db, s->conv_speculative, pe.message);
        conv_end(s);
        srv_reply_error(reply, rc == 18 ? 18 : pe.code, rc == 18 ? "Authentication failed."
                        : pe.message);
        return;
    }
    bson_t role_arr;
    srv_scram_cred cred;
    md_error err;
    if (srv_users_find(c->server, s->conv_db, s->conv_user, &cred, &role_arr, &err) != 0) {
        log_auth(c, false, s->conv_user, s->conv_db, s->conv_speculative,
                 "the user was dropped during its authentication");
        free(final);
        conv_end(s);
        srv_reply_error(reply, 18, "Authentication failed.");
        return;
    }
    s->version = srv_users_version(c->server);
    sess_add(c, s->conv_db, s->conv_user, &role_arr);
    bson_destroy(&role_arr);
    log_auth(c, true, s->conv_user, s->conv_db, s->conv_speculative, NULL);
    BSON_APPEND_INT32(reply, "conversationId", 1);
    BSON_APPEND_BOOL(reply, "done", s->conv_skip_empty);
    put_payload(reply, final);
    free(final);
    BSON_APPEND_DOUBLE(reply, "ok", 1);
    if (s->conv_skip_empty)
        conv_end(s);
}

void srv_auth_hello(srv_conn *c, const bson_t *cmd, bson_t *reply)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, cmd, "saslSupportedMechs") && BSON_ITER_HOLDS_UTF8(&it)) {
        /* "<db>.<user>": the mechanisms that user has (none: no field) */
        const char *v = bson_iter_utf8(&it, NULL), *dot = strchr(v, '.');
        char db[SRV_DB_NAME_MAX + 1];
        srv_scram_cred cred;
        md_error err;
        if (dot && (size_t)(dot - v) <= SRV_DB_NAME_MAX) {
            snprintf(db, sizeof db, "%.*s", (int)(dot - v), v);
            if (srv_users_find(c->server, db, dot + 1, &cred, NULL, &err) == 0) {
                bson_t arr;
                BSON_APPEND_ARRAY_BEGIN(reply, "saslSupportedMechs", &arr);
                BSON_APPEND_UTF8(&arr, "0", MECH);
                bson_append_array_end(reply, &arr);
            }
        }
    }
    if (bson_iter_init_find(&it, cmd, "speculativeAuthenticate") &&
        BSON_ITER_HOLDS_DOCUMENT(&it)) {
        /* a saslStart with its database in `db`; a failure only leaves the
         * answer out, and the client then runs saslStart itself */
        uint32_t len;
        const uint8_t *data;
        bson_t spec, r = BSON_INITIALIZER;
        bson_iter_t d;
        bson_iter_document(&it, &len, &data);
        if (!bson_init_static(&spec, data, len))
            return;
        const char *db = bson_iter_init_find(&d, &spec, "db") && BSON_ITER_HOLDS_UTF8(&d)
                             ? bson_iter_utf8(&d, NULL) : NULL;
        md_error err;
        bool start = bson_iter_init_find(&d, &spec, "saslStart");
        if (db && start && srv_db_name_check(db, &err) == 0 &&
            sasl_start(c, db, &spec, true, &r)) {
            bson_t out;
            BSON_APPEND_DOCUMENT_BEGIN(reply, "speculativeAuthenticate", &out);
            bson_copy_to_excluding_noinit(&r, &out, "ok", NULL);
            bson_append_document_end(reply, &out);
        }
        bson_destroy(&r);
    }
}

void srv_auth_info(srv_conn *c, bson_t *reply)
{
    bson_t info, users, roles_out, u;
    char key[16];
    int nr = 0;
    sess_refresh(c);
    srv_sess *s = c->sess;
    BSON_APPEND_DOCUMENT_BEGIN(reply, "authInfo", &info);
    BSON_APPEND_ARRAY_BEGIN(&info, "authenticatedUsers", &users);
    for (int i = 0; s && i < s->nusers; i++) {
        snprintf(key, sizeof key, "%d", i);
        BSON_APPEND_DOCUMENT_BEGIN(&users, key, &u);
        BSON_APPEND_UTF8(&u, "user", s->users[i].user);
        BSON_APPEND_UTF8(&u, "db", s->users[i].db);
        bson_append_document_end(&users, &u);
    }
    bson_append_array_end(&info, &users);
    BSON_APPEND_ARRAY_BEGIN(&info, "authenticatedUserRoles", &roles_out);
    for (int i = 0; s && i < s->nusers; i++) {
        bson_iter_t it;
        if (!bson_iter_init(&it, s->users[i].roles))
            continue;
        while (bson_iter_next(&it)) {
            snprintf(key, sizeof key, "%d", nr++);
            bson_append_iter(&roles_out, key, -1, &it);
        }
    }
    bson_append_array_end(&info, &roles_out);
    bson_append_document_end(reply, &info);
}

bool srv_auth_command(srv_conn *c, srv_request *req, const char *name, bson_t *reply)
{
    if (!strcmp(name, "saslStart")) {
        sasl_start(c, req->db, &req->cmd, false, reply);
    } else if (!strcmp(name, "saslContinue")) {
        sasl_continue(c, req, reply);
    } else if (!strcmp(name, "authenticate")) {
        bson_iter_t it;
        const char *mech = bson_iter_init_find(&it, &req->cmd, "mechanism") &&
                                   BSON_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, NULL)
                                                             : "MONGODB-CR";
        char msg[200];
        snprintf(msg, sizeof msg, "Received authentication for mechanism %.64s which is "
                 "unknown or not enabled (minidoc serve offers SCRAM-SHA-256)", mech);
        srv_reply_error(reply, 334, msg);
    } else if (!strcmp(name, "logout")) {
        srv_sess *s = c->sess;
        for (int i = 0; s && i < s->nusers; i++)
            if (!strcmp(s->users[i].db, req->db)) {
                user_clear(&s->users[i]);
                s->users[i] = s->users[--s->nusers];
                memset(&s->users[s->nusers], 0, sizeof(sess_user));
                break;
            }
        BSON_APPEND_DOUBLE(reply, "ok", 1);
    } else if (!strcmp(name, "connectionStatus")) {
        srv_auth_info(c, reply);
        BSON_APPEND_DOUBLE(reply, "ok", 1);
    } else
        return false;
    return true;
}
