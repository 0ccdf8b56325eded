/*
 * srv_users.c -- the users of `minidoc serve`: createUser, updateUser,
 * dropUser, dropAllUsersFromDatabase, grantRolesToUser,
 * revokeRolesFromUser and usersInfo, over the admin database's
 * system.users collection, in MongoDB's document shape:
 *
 *   {_id: "shop.ann", userId: UUID("..."), user: "ann", db: "shop",
 *    credentials: {"SCRAM-SHA-256": {iterationCount: 15000,
 *                                    salt: "<28 bytes, base64>",
 *                                    storedKey: "<base64>", serverKey: "<base64>"}},
 *    roles: [{role: "readWrite", db: "shop"}], customData: {...}}
 *
 * The password itself is never stored: createUser and updateUser derive the
 * SCRAM-SHA-256 keys from it with a fresh random salt (srv_scram.c), and
 * only SCRAM-SHA-256 credentials are made (mechanisms: ["SCRAM-SHA-1"] is
 * BadValue: SCRAM-SHA-1's MD5 password digest is not implemented).  The
 * collection is an ordinary one of the admin md_db (the library allows that
 * one system collection), read and written with md_db_command, so the
 * engine's _id index makes a second createUser of the same name fail.
 * Every change bumps srv_users_version, which open sessions check.
 */
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv.h"

#define USERS "system.users"
#define MECH "SCRAM-SHA-256"
#define USER_MAX 256

/* A command on the admin database: 0 or an error (reply initialized either
 * way).  !create: MD_NOTFOUND when admin does not exist. */
static int admin_run(srv *s, bool create, const bson_t *cmd, bson_t *reply, md_error *err)
{
    srv_db *db;
    int rc = srv_db_get(srv_databases(s), "admin", create, &db, err);
    if (rc) {
        bson_init(reply);
        return rc;
    }
    rc = md_db_command(srv_db_handle(db), cmd, reply, err);
    srv_db_put(db);
    return rc;
}

/* find on system.users: the first batch (at most `limit` documents, 0: all)
 * into *docs (an array; caller destroys). */
static int users_find(srv *s, const bson_t *filter, int limit, bool sorted, bson_t *docs,
                      md_error *err)
{
    bson_t cmd = BSON_INITIALIZER, r, sort;
    bson_iter_t it, b;
    BSON_APPEND_UTF8(&cmd, "find", USERS);
    BSON_APPEND_DOCUMENT(&cmd, "filter", filter);
    if (sorted) {
        BSON_APPEND_DOCUMENT_BEGIN(&cmd, "sort", &sort);
        BSON_APPEND_INT32(&sort, "_id", 1);
        bson_append_document_end(&cmd, &sort);
    }
    if (limit)
        BSON_APPEND_INT32(&cmd, "limit", limit);
    BSON_APPEND_INT32(&cmd, "batchSize", 1000000);
    BSON_APPEND_BOOL(&cmd, "singleBatch", true);
    int rc = admin_run(s, false, &cmd, &r, err);
    bson_destroy(&cmd);
    bson_init(docs);
    if (rc == 0 && bson_iter_init(&it, &r) && bson_iter_find_descendant(&it, "cursor.firstBatch", &b) &&
        BSON_ITER_HOLDS_ARRAY(&b)) {
        uint32_t len;
        const uint8_t *data;
        bson_iter_array(&b, &len, &data);
        bson_t view;
        if (bson_init_static(&view, data, len))
            bson_concat(docs, &view);
    }
    bson_destroy(&r);
    return rc;
}

static void user_id(char *id, size_t n, const char *db, const char *user)
{
    snprintf(id, n, "%s.%s", db, user);
}

static bool cred_field(const bson_t *cred, const char *key, uint8_t *out, size_t cap, size_t *n)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, cred, key) || !BSON_ITER_HOLDS_UTF8(&it))
        return false;
    uint32_t len;
    const char *v = bson_iter_utf8(&it, &len);
    long r = srv_b64_decode(v, len, out, cap);
    if (r < 0)
        return false;
    *n = (size_t)r;
    return true;
}

/* credentials."SCRAM-SHA-256" of a user document */
static bool parse_cred(const bson_t *doc, srv_scram_cred *cred)
{
    bson_iter_t it, c;
    uint32_t len;
    const uint8_t *data;
    bson_t sub;
    size_t n1, n2, n3;
    uint8_t big[64];
    memset(cred, 0, sizeof *cred);
    if (!bson_iter_init(&it, doc) || !bson_iter_find_descendant(&it, "credentials." MECH, &c) ||
        !BSON_ITER_HOLDS_DOCUMENT(&c))
        return false;
    bson_iter_document(&c, &len, &data);
    if (!bson_init_static(&sub, data, len) || !bson_iter_init_find(&it, &sub, "iterationCount") ||
        !BSON_ITER_HOLDS_NUMBER(&it))
        return false;
    int64_t iters = bson_iter_as_int64(&it);
    if (iters < SRV_SCRAM_MIN_ITERATIONS || iters > 100000000)
        return false;
    cred->iterations = (int)iters;
    if (!cred_field(&sub, "salt", cred->salt, sizeof cred->salt, &n1) ||
        !cred_field(&sub, "storedKey", big, sizeof big, &n2) || n2 != SRV_SCRAM_HASH)
        return false;
    memcpy(cred->stored_key, big, SRV_SCRAM_HASH);
    if (!cred_field(&sub, "serverKey", big, sizeof big, &n3) || n3 != SRV_SCRAM_HASH)
        return false;
    memcpy(cred->server_key, big, SRV_SCRAM_HASH);
    cred->salt_len = n1;
    return true;
}

int srv_users_find(srv *s, const char *db, const char *user, srv_scram_cred *cred,
                   bson_t *roles, md_error *err)
{
    char id[SRV_DB_NAME_MAX + USER_MAX + 8];
    bson_t filter = BSON_INITIALIZER, docs;
    bson_iter_t it;
    if (strlen(user) > USER_MAX)
        return md_error_set(err, MD_NOTFOUND, 11, "no such user");
    user_id(id, sizeof id, db, user);
    BSON_APPEND_UTF8(&filter, "_id", id);
    int rc = users_find(s, &filter, 1, false, &docs, err);
    bson_destroy(&filter);
    if (rc == MD_NOTFOUND) {
        bson_destroy(&docs);
        return MD_NOTFOUND;
    }
    if (rc == 0 && !(bson_iter_init_find(&it, &docs, "0") && BSON_ITER_HOLDS_DOCUMENT(&it)))
        rc = md_error_set(err, MD_NOTFOUND, 11, "no such user");
    bson_t doc;
    if (rc == 0) {
        uint32_t len;
        const uint8_t *data;
        bson_iter_document(&it, &len, &data);
        if (!bson_init_static(&doc, data, len) || !parse_cred(&doc, cred))
            rc = md_error_set(err, MD_NOTFOUND, 11, "user %s@%s has no valid " MECH
                              " credentials", user, db);
    }
    if (rc == 0 && roles) {
        bson_init(roles);
        if (bson_iter_init_find(&it, &doc, "roles") && BSON_ITER_HOLDS_ARRAY(&it)) {
            uint32_t len;
            const uint8_t *data;
            bson_t view;
            bson_iter_array(&it, &len, &data);
            if (bson_init_static(&view, data, len))
                bson_concat(roles, &view);
        }
    }
    bson_destroy(&docs);
    return rc;
}

bool srv_users_exist(srv *s)
{
    bson_t filter = BSON_INITIALIZER, docs;
    md_error err;
    int rc = users_find(s, &filter, 1, false, &docs, &err);
    bool any = rc == 0 && !bson_empty(&docs);
    if (rc && rc != MD_NOTFOUND)
        any = true; /* cannot tell: no localhost exception */
    bson_destroy(&filter);
    bson_destroy(&docs);
    return any;
}

/* ---- parsing the commands --------------------------------------------------------------- */

/* Fields every command may carry, which these ignore. */
static bool generic_field(const char *k)
{
    return k[0] == '$' || !strcmp(k, "lsid") || !strcmp(k, "writeConcern") ||
           !strcmp(k, "comment") || !strcmp(k, "maxTimeMS") || !strcmp(k, "apiVersion") ||
           !strcmp(k, "apiStrict") || !strcmp(k, "apiDeprecationErrors");
}

/* roles: ["name" (a role on db) | {role, db}] into out [{role, db}]. */
static bool parse_roles(const bson_iter_t *field, const char *db, bson_t *out, bson_t *reply)
{
    bson_iter_t it, d;
    char key[16], msg[300];
    int n = 0;
    bson_init(out);
    if (!BSON_ITER_HOLDS_ARRAY(field) || !bson_iter_recurse(field, &it)) {
        srv_reply_error(reply, MD_CODE_TYPE_MISMATCH, "\"roles\" must be an array");
        return false;
    }
    while (bson_iter_next(&it)) {
        const char *role = NULL, *rdb = db;
        if (BSON_ITER_HOLDS_UTF8(&it))
            role = bson_iter_utf8(&it, NULL);
        else if (BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &d)) {
            rdb = NULL;
            while (bson_iter_next(&d)) {
                if (!strcmp(bson_iter_key(&d), "role") && BSON_ITER_HOLDS_UTF8(&d))
                    role = bson_iter_utf8(&d, NULL);
                else if (!strcmp(bson_iter_key(&d), "db") && BSON_ITER_HOLDS_UTF8(&d))
                    rdb = bson_iter_utf8(&d, NULL);
            }
        }
        if (!role || !rdb) {
            srv_reply_error(reply, MD_CODE_FAILED_TO_PARSE, "a role is a name or a document "
                            "{role: <name>, db: <database>}");
            return false;
        }
        uint32_t actions;
        bool any;
        if (!srv_role_lookup(role, rdb, &actions, &any)) {
            snprintf(msg, sizeof msg, "No role named %.100s@%.64s", role, rdb);
            srv_reply_error(reply, 31, msg);
            return false;
        }
        bson_t r;
        snprintf(key, sizeof key, "%d", n++);
        BSON_APPEND_DOCUMENT_BEGIN(out, key, &r);
        BSON_APPEND_UTF8(&r, "role", role);
        BSON_APPEND_UTF8(&r, "db", rdb);
        bson_append_document_end(out, &r);
    }
    return true;
}

/* The user name in the command's first field. */
static const char *user_name(const bson_t *cmd, const char *name, bson_t *reply)
{
    bson_iter_t it;
    char msg[200];
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    uint32_t len;
    const char *u = BSON_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, &len) : NULL;
    if (!u || !u[0] || len > USER_MAX || strlen(u) != len) {
        snprintf(msg, sizeof msg, "%s: the user name must be a non-empty string of at most "
                 "%d bytes", name, USER_MAX);
        srv_reply_error(reply, MD_CODE_BAD_VALUE, msg);
        return NULL;
    }
    return u;
}

/* pwd, mechanisms, digestPassword: the credentials sub-document into out. */
static bool make_credentials(const bson_t *cmd, const char *pwd, bson_t *out, bson_t *reply)
{
    bson_iter_t it, m;
    srv_perr pe;
    if (bson_iter_init_find(&it, cmd, "mechanisms")) {
        if (!BSON_ITER_HOLDS_ARRAY(&it) || !bson_iter_recurse(&it, &m)) {
            srv_reply_error(reply, MD_CODE_TYPE_MISMATCH, "\"mechanisms\" must be an array");
            return false;
        }
        while (bson_iter_next(&m))
            if (!BSON_ITER_HOLDS_UTF8(&m) || strcmp(bson_iter_utf8(&m, NULL), MECH) != 0) {
                srv_reply_error(reply, MD_CODE_BAD_VALUE, "minidoc serve makes only "
                                "SCRAM-SHA-256 credentials (mechanisms: [\"SCRAM-SHA-256\"])");
                return false;
            }
    }
    if (bson_iter_init_find(&it, cmd, "digestPassword") && !bson_iter_as_bool(&it)) {
        srv_reply_error(reply, MD_CODE_BAD_VALUE,
                        "Use of SCRAM-SHA-256 requires undigested passwords");
        return false;
    }
    if (srv_scram_password_check(pwd, &pe)) {
        srv_reply_error(reply, pe.code, pe.message);
        return false;
    }
    srv_scram_cred c;
    char salt[128], stored[64], server[64];
    if (srv_scram_cred_make(pwd, NULL, SRV_SCRAM_SALT, SRV_SCRAM_ITERATIONS, &c)) {
        srv_reply_error(reply, MD_CODE_INTERNAL_ERROR, "cannot derive the SCRAM keys");
        return false;
    }
    srv_b64_encode(c.salt, c.salt_len, salt);
    srv_b64_encode(c.stored_key, SRV_SCRAM_HASH, stored);
    srv_b64_encode(c.server_key, SRV_SCRAM_HASH, server);
    bson_t sc;
    bson_init(out);
    BSON_APPEND_DOCUMENT_BEGIN(out, MECH, &sc);
    BSON_APPEND_INT32(&sc, "iterationCount", c.iterations);
    BSON_APPEND_UTF8(&sc, "salt", salt);
    BSON_APPEND_UTF8(&sc, "storedKey", stored);
    BSON_APPEND_UTF8(&sc, "serverKey", server);
    bson_append_document_end(out, &sc);
    return true;
}

/* The fields of createUser / updateUser, checked: pwd, roles, customData. */
typedef struct user_spec {
    const char *pwd;
    bool has_roles, has_custom;
    bson_t roles;
    bson_iter_t custom;
} user_spec;

static bool parse_spec(const bson_t *cmd, const char *name, const char *db, user_spec *u,
                       bson_t *reply)
{
    bson_iter_t it;
    char msg[200];
    memset(u, 0, sizeof *u);
    bson_init(&u->roles);
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (!strcmp(k, "pwd")) {
            if (!BSON_ITER_HOLDS_UTF8(&it)) {
                srv_reply_error(reply, MD_CODE_TYPE_MISMATCH, "\"pwd\" must be a string");
                return false;
            }
            u->pwd = bson_iter_utf8(&it, NULL);
        } else if (!strcmp(k, "roles")) {
            bson_destroy(&u->roles);
            if (!parse_roles(&it, db, &u->roles, reply))
                return false;
            u->has_roles = true;
        } else if (!strcmp(k, "customData")) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&it)) {
                srv_reply_error(reply, MD_CODE_TYPE_MISMATCH,
                                "\"customData\" must be a document");
                return false;
            }
            u->custom = it;
            u->has_custom = true;
        } else if (strcmp(k, "mechanisms") && strcmp(k, "digestPassword") &&
                   !generic_field(k)) {
            snprintf(msg, sizeof msg, "BSON field '%s.%.64s' is an unknown field", name, k);
            srv_reply_error(reply, 40415, msg);
            return false;
        }
    }
    return true;
}

static bool db_allows_users(const char *db, bson_t *reply)
{
    if (!strcmp(db, "local") || !strcmp(db, "$external")) {
        srv_reply_error(reply, MD_CODE_BAD_VALUE, !strcmp(db, "local")
                        ? "Cannot create users in the local database"
                        : "minidoc serve has no external (x.509, LDAP, Kerberos) users");
        return false;
    }
    return true;
}

/* ---- the commands ----------------------------------------------------------------------- */

static void write_reply(srv_conn *c, int rc, const md_error *err, const bson_t *r,
                        bson_t *reply)
{
    if (rc) {
        srv_reply_md_error(reply, err);
        return;
    }
    bson_iter_t it, e;
    if (bson_iter_init(&it, r) && bson_iter_find_descendant(&it, "writeErrors.0", &e)) {
        bson_iter_t f;
        int code = 8;
        const char *msg = "write to system.users failed";
        if (bson_iter_recurse(&e, &f) && bson_iter_find(&f, "code"))
            code = (int)bson_iter_as_int64(&f);
        if (bson_iter_recurse(&e, &f) && bson_iter_find(&f, "errmsg") && BSON_ITER_HOLDS_UTF8(&f))
            msg = bson_iter_utf8(&f, NULL);
        srv_reply_error(reply, code, msg);
        return;
    }
    srv_users_changed(c->server);
    BSON_APPEND_DOUBLE(reply, "ok", 1);
}

static void create_user(srv_conn *c, const srv_request *req, bson_t *reply)
{
    user_spec u;
    char id[SRV_DB_NAME_MAX + USER_MAX + 8], msg[400];
    const char *name = user_name(&req->cmd, "createUser", reply);
    if (!name || !db_allows_users(req->db, reply))
        return;
    if (!parse_spec(&req->cmd, "createUser", req->db, &u, reply))
        goto out;
    if (!u.pwd) {
        srv_reply_error(reply, MD_CODE_BAD_VALUE, "Must provide a 'pwd' field for all user "
                        "documents, except those with '$external' as the user's source db");
        goto out;
    }
    if (!u.has_roles) {
        srv_reply_error(reply, MD_CODE_BAD_VALUE, "\"createUser\" command requires a "
                        "\"roles\" array");
        goto out;
    }
    bson_t creds, doc = BSON_INITIALIZER, cmd = BSON_INITIALIZER, docs, r;
    if (!make_credentials(&req->cmd, u.pwd, &creds, reply))
        goto out;
    uint8_t uuid[16];
    RAND_bytes(uuid, sizeof uuid);
    uuid[6] = (uint8_t)((uuid[6] & 0x0f) | 0x40);
    uuid[8] = (uint8_t)((uuid[8] & 0x3f) | 0x80);
    user_id(id, sizeof id, req->db, name);
    BSON_APPEND_UTF8(&doc, "_id", id);
    BSON_APPEND_BINARY(&doc, "userId", BSON_SUBTYPE_UUID, uuid, sizeof uuid);
    BSON_APPEND_UTF8(&doc, "user", name);
    BSON_APPEND_UTF8(&doc, "db", req->db);
    BSON_APPEND_DOCUMENT(&doc, "credentials", &creds);
    BSON_APPEND_ARRAY(&doc, "roles", &u.roles);
    if (u.has_custom)
        bson_append_iter(&doc, "customData", -1, &u.custom);
    BSON_APPEND_UTF8(&cmd, "insert", USERS);
    BSON_APPEND_ARRAY_BEGIN(&cmd, "documents", &docs);
    BSON_APPEND_DOCUMENT(&docs, "0", &doc);
    bson_append_array_end(&cmd, &docs);
    md_error err;
    int rc = admin_run(c->server, true, &cmd, &r, &err);
    bson_iter_t it;
    if (rc == 0 && bson_iter_init(&it, &r) &&
        bson_iter_find_descendant(&it, "writeErrors.0.code", &it) &&
        bson_iter_as_int64(&it) == MD_CODE_DUPLICATE_KEY) {
        snprintf(msg, sizeof msg, "User \"%s@%s\" already exists", name, req->db);
        srv_reply_error(reply, 51003, msg);
    } else
        write_reply(c, rc, &err, &r, reply);
    bson_destroy(&r);
    bson_destroy(&cmd);
    bson_destroy(&doc);
    bson_destroy(&creds);
out:
    bson_destroy(&u.roles);
}

/* One update of the user's document: n (matched) in *n. */
static int update_user_doc(srv_conn *c, const char *id, const bson_t *update, int64_t *n,
                           bson_t *reply)
{
    bson_t cmd = BSON_INITIALIZER, ups, up, q, r;
    BSON_APPEND_UTF8(&cmd, "update", USERS);
    BSON_APPEND_ARRAY_BEGIN(&cmd, "updates", &ups);
    BSON_APPEND_DOCUMENT_BEGIN(&ups, "0", &up);
    BSON_APPEND_DOCUMENT_BEGIN(&up, "q", &q);
    BSON_APPEND_UTF8(&q, "_id", id);
    bson_append_document_end(&up, &q);
    BSON_APPEND_DOCUMENT(&up, "u", update);
    bson_append_document_end(&ups, &up);
    bson_append_array_end(&cmd, &ups);
    md_error err;
    int rc = admin_run(c->server, false, &cmd, &r, &err);
    bson_iter_t it;
    *n = 0;
    if (rc == MD_NOTFOUND)
        rc = 0; /* no admin database: no such user */
    else if (rc == 0 && bson_iter_init_find(&it, &r, "n"))
        *n = bson_iter_as_int64(&it);
    if (rc || *n)
        write_reply(c, rc, &err, &r, reply);
    bson_destroy(&r);
    bson_destroy(&cmd);
    return rc;
}

static void not_found(const char *name, const char *db, bson_t *reply)
{
    char msg[400];
    snprintf(msg, sizeof msg, "Could not find user \"%s\" for db \"%s\"", name, db);
    srv_reply_error(reply, 11, msg);
}

static void update_user(srv_conn *c, const srv_request *req, bson_t *reply)
{
    user_spec u;
    char id[SRV_DB_NAME_MAX + USER_MAX + 8];
    const char *name = user_name(&req->cmd, "updateUser", reply);
    if (!name || !parse_spec(&req->cmd, "updateUser", req->db, &u, reply))
        goto out;
    if (!u.pwd && !u.has_roles && !u.has_custom) {
        srv_reply_error(reply, MD_CODE_BAD_VALUE,
                        "Must specify at least one field to update in updateUser");
        goto out;
    }
    bson_t set, upd = BSON_INITIALIZER, creds;
    BSON_APPEND_DOCUMENT_BEGIN(&upd, "$set", &set);
    if (u.pwd) {
        if (!make_credentials(&req->cmd, u.pwd, &creds, reply)) {
            bson_append_document_end(&upd, &set);
            bson_destroy(&upd);
            goto out;
        }
        BSON_APPEND_DOCUMENT(&set, "credentials", &creds);
        bson_destroy(&creds);
    }
    if (u.has_roles)
        BSON_APPEND_ARRAY(&set, "roles", &u.roles);
    if (u.has_custom)
        bson_append_iter(&set, "customData", -1, &u.custom);
    bson_append_document_end(&upd, &set);
    user_id(id, sizeof id, req->db, name);
    int64_t n;
    if (update_user_doc(c, id, &upd, &n, reply) == 0 && n == 0)
        not_found(name, req->db, reply);
    bson_destroy(&upd);
out:
    bson_destroy(&u.roles);
}

/* grantRolesToUser / revokeRolesFromUser: {<cmd>: name, roles: [...]}. */
static void change_roles(srv_conn *c, const srv_request *req, const char *cmdname, bool grant,
                         bson_t *reply)
{
    bson_iter_t it;
    bson_t roles, upd = BSON_INITIALIZER, op, f;
    char id[SRV_DB_NAME_MAX + USER_MAX + 8];
    const char *name = user_name(&req->cmd, cmdname, reply);
    if (!name)
        return;
    if (!bson_iter_init_find(&it, &req->cmd, "roles")) {
        srv_reply_error(reply, MD_CODE_BAD_VALUE, "\"roles\" is required");
        return;
    }
    if (!parse_roles(&it, req->db, &roles, reply)) {
        bson_destroy(&roles);
        return;
    }
    BSON_APPEND_DOCUMENT_BEGIN(&upd, grant ? "$addToSet" : "$pull", &op);
    BSON_APPEND_DOCUMENT_BEGIN(&op, "roles", &f);
    BSON_APPEND_ARRAY(&f, grant ? "$each" : "$in", &roles);
    bson_append_document_end(&op, &f);
    bson_append_document_end(&upd, &op);
    user_id(id, sizeof id, req->db, name);
    int64_t n;
    if (update_user_doc(c, id, &upd, &n, reply) == 0 && n == 0)
        not_found(name, req->db, reply);
    bson_destroy(&upd);
    bson_destroy(&roles);
}

static void drop_users(srv_conn *c, const srv_request *req, bool all, bson_t *reply)
{
    bson_t cmd = BSON_INITIALIZER, dels, del, q, r;
    char id[SRV_DB_NAME_MAX + USER_MAX + 8], msg[400];
    const char *name = all ? NULL : user_name(&req->cmd, "dropUser", reply);
    if (!all && !name)
        return;
    BSON_APPEND_UTF8(&cmd, "delete", USERS);
    BSON_APPEND_ARRAY_BEGIN(&cmd, "deletes", &dels);
    BSON_APPEND_DOCUMENT_BEGIN(&dels, "0", &del);
    BSON_APPEND_DOCUMENT_BEGIN(&del, "q", &q);
    if (all)
        BSON_APPEND_UTF8(&q, "db", req->db);
    else {
        user_id(id, sizeof id, req->db, name);
        BSON_APPEND_UTF8(&q, "_id", id);
    }
    bson_append_document_end(&del, &q);
    BSON_APPEND_INT32(&del, "limit", all ? 0 : 1);
    bson_append_document_end(&dels, &del);
    bson_append_array_end(&cmd, &dels);
    md_error err;
    int rc = admin_run(c->server, false, &cmd, &r, &err);
    bson_iter_t it;
    int64_t n = 0;
    if (rc == 0 && bson_iter_init_find(&it, &r, "n"))
        n = bson_iter_as_int64(&it);
    if (rc == MD_NOTFOUND)
        rc = 0;
    if (!all && rc == 0 && n == 0) {
        snprintf(msg, sizeof msg, "User '%s@%s' not found", name, req->db);
        srv_reply_error(reply, 11, msg);
    } else {
        if (all && rc == 0)
            BSON_APPEND_INT32(reply, "n", (int32_t)n);
        write_reply(c, rc, &err, &r, reply);
    }
    bson_destroy(&r);
    bson_destroy(&cmd);
}

/* usersInfo: 1 (this database's users), "name", {user, db}, an array of
 * those, or {forAllDBs: true}; showCredentials; filter. */
static bool users_filter(const srv_request *req, bson_t *filter, bson_t *reply)
{
    bson_iter_t it, a, d;
    char id[SRV_DB_NAME_MAX + USER_MAX + 8];
    bson_iter_init(&it, &req->cmd);
    bson_iter_next(&it);
    bson_init(filter);
    if (BSON_ITER_HOLDS_NUMBER(&it) || BSON_ITER_HOLDS_BOOL(&it)) {
        BSON_APPEND_UTF8(filter, "db", req->db);
    } else if (BSON_ITER_HOLDS_UTF8(&it)) {
        user_id(id, sizeof id, req->db, bson_iter_utf8(&it, NULL));
        BSON_APPEND_UTF8(filter, "_id", id);
    } else if (BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &d) &&
               bson_iter_find(&d, "forAllDBs")) {
        /* every user */
    } else if (BSON_ITER_HOLDS_DOCUMENT(&it) || BSON_ITER_HOLDS_ARRAY(&it)) {
        bson_t in, ids;
        int n = 0;
        bool one = BSON_ITER_HOLDS_DOCUMENT(&it);
        BSON_APPEND_DOCUMENT_BEGIN(filter, "_id", &in);
        BSON_APPEND_ARRAY_BEGIN(&in, "$in", &ids);
        bson_iter_t cur = it;
        if (!one)
            bson_iter_recurse(&it, &a);
        while (one ? n == 0 : bson_iter_next(&a)) {
            const bson_iter_t *e = one ? &cur : &a;
            const char *u = NULL, *db = req->db;
            if (BSON_ITER_HOLDS_UTF8(e))
                u = bson_iter_utf8(e, NULL);
            else if (BSON_ITER_HOLDS_DOCUMENT(e) && bson_iter_recurse(e, &d)) {
                db = NULL;
                while (bson_iter_next(&d)) {
                    if (!strcmp(bson_iter_key(&d), "user") && BSON_ITER_HOLDS_UTF8(&d))
                        u = bson_iter_utf8(&d, NULL);
                    else if (!strcmp(bson_iter_key(&d), "db") && BSON_ITER_HOLDS_UTF8(&d))
                        db = bson_iter_utf8(&d, NULL);
                }
            }
            if (!u || !db) {
                bson_append_array_end(&in, &ids);
                bson_append_document_end(filter, &in);
                srv_reply_error(reply, MD_CODE_BAD_VALUE, "usersInfo: a user is a name or "
                                "{user: <name>, db: <database>}");
                return false;
            }
            char key[16];
            snprintf(key, sizeof key, "%d", n++);
            user_id(id, sizeof id, db, u);
            BSON_APPEND_UTF8(&ids, key, id);
        }
        bson_append_array_end(&in, &ids);
        bson_append_document_end(filter, &in);
    } else {
        srv_reply_error(reply, MD_CODE_BAD_VALUE, "usersInfo: expected 1, a user name, "
                        "{user, db}, an array of those, or {forAllDBs: true}");
        return false;
    }
    if (bson_iter_init_find(&it, &req->cmd, "filter") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        bson_t both = BSON_INITIALIZER, and;
        BSON_APPEND_ARRAY_BEGIN(&both, "$and", &and);
        BSON_APPEND_DOCUMENT(&and, "0", filter);
        bson_append_iter(&and, "1", -1, &it);
        bson_append_array_end(&both, &and);
        bson_destroy(filter);
        bson_steal(filter, &both);
    }
    return true;
}

static void users_info(srv_conn *c, const srv_request *req, bson_t *reply)
{
    bson_t filter, docs, users;
    bson_iter_t it, f;
    md_error err;
    bool creds = bson_iter_init_find(&it, &req->cmd, "showCredentials") &&
                 bson_iter_as_bool(&it);
    if (!users_filter(req, &filter, reply)) {
        bson_destroy(&filter);
        return;
    }
    int rc = users_find(c->server, &filter, 0, true, &docs, &err);
    bson_destroy(&filter);
    if (rc && rc != MD_NOTFOUND) {
        srv_reply_md_error(reply, &err);
        bson_destroy(&docs);
        return;
    }
    BSON_APPEND_ARRAY_BEGIN(reply, "users", &users);
    int n = 0;
    if (bson_iter_init(&it, &docs))
        while (bson_iter_next(&it)) {
            bson_t doc, out, mechs;
            uint32_t len;
            const uint8_t *data;
            char key[16];
            if (!BSON_ITER_HOLDS_DOCUMENT(&it))
                continue;
            bson_iter_document(&it, &len, &data);
            if (!bson_init_static(&doc, data, len))
                continue;
            snprintf(key, sizeof key, "%d", n++);
            BSON_APPEND_DOCUMENT_BEGIN(&users, key, &out);
            bson_copy_to_excluding_noinit(&doc, &out, "credentials", NULL);
            BSON_APPEND_ARRAY_BEGIN(&out, "mechanisms", &mechs);
            if (bson_iter_init_find(&f, &doc, "credentials") && BSON_ITER_HOLDS_DOCUMENT(&f)) {
                bson_iter_t m;
                int k = 0;
                bson_iter_recurse(&f, &m);
                while (bson_iter_next(&m)) {
                    snprintf(key, sizeof key, "%d", k++);
                    BSON_APPEND_UTF8(&mechs, key, bson_iter_key(&m));
                }
                bson_append_array_end(&out, &mechs);
                if (creds)
                    bson_append_iter(&out, "credentials", -1, &f);
            } else
                bson_append_array_end(&out, &mechs);
            bson_append_document_end(&users, &out);
        }
    bson_append_array_end(reply, &users);
    bson_destroy(&docs);
    BSON_APPEND_DOUBLE(reply, "ok", 1);
}

bool srv_users_command(srv_conn *c, srv_request *req, const char *name, bson_t *reply)
{
    if (!strcmp(name, "createUser"))
        create_user(c, req, reply);
    else if (!strcmp(name, "updateUser"))
        update_user(c, req, reply);
    else if (!strcmp(name, "dropUser"))
        drop_users(c, req, false, reply);
    else if (!strcmp(name, "dropAllUsersFromDatabase"))
        drop_users(c, req, true, reply);
    else if (!strcmp(name, "grantRolesToUser"))
        change_roles(c, req, name, true, reply);
    else if (!strcmp(name, "revokeRolesFromUser"))
        change_roles(c, req, name, false, reply);
    else if (!strcmp(name, "usersInfo"))
        users_info(c, req, reply);
    else
        return false;
    return true;
}
