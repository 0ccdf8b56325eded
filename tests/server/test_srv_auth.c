/*
 * test_srv_auth.c -- `minidoc serve --auth` in-process, spoken to through
 * raw sockets with OP_MSG and a SCRAM-SHA-256 client built from
 * srv_scram.c's client helpers: unauthenticated commands get Unauthorized
 * (13) while the handshake works; the localhost exception lets the first
 * user be created on admin and then closes; a wrong password gets
 * AuthenticationFailed (18); system.users holds salted keys and never the
 * password; the read role cannot write and readWrite can; updateUser's new
 * roles and dropUser reach a connection that is already authenticated;
 * usersInfo, logout, the empty third exchange without skipEmptyExchange,
 * and speculativeAuthenticate in hello.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <ftw.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "srv.h"
#include "t_live.h"

static void live_start(live *l)
{
    srv_config cfg = {.bind = "127.0.0.1", .port = 0, .engine = "ephemeralForTest",
                      .compressors = "", .auth = true};
    t_live_dir(l, "md_auth");
    t_live_run(l, &cfg);
}

static void put32(uint8_t *b, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(v >> (8 * i));
}

static void read_n(int fd, uint8_t *b, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = recv(fd, b + got, n - got, 0);
        cr_assert_gt(r, 0, "the server closed the connection");
        got += (size_t)r;
    }
}

/* One OP_MSG command (its $db added) and its reply. */
static void run(int fd, const char *db, const bson_t *cmd, bson_t *reply)
{
    static int32_t id;
    bson_t full;
    bson_copy_to(cmd, &full);
    BSON_APPEND_UTF8(&full, "$db", db);
    size_t n = 21 + full.len;
    uint8_t *m = malloc(n);
    put32(m, (uint32_t)n);
    put32(m + 4, (uint32_t)++id);
    put32(m + 8, 0);
    put32(m + 12, SRV_OP_MSG);
    put32(m + 16, 0);
    m[20] = 0;
    memcpy(m + 21, bson_get_data(&full), full.len);
    cr_assert_eq(send(fd, m, n, MSG_NOSIGNAL), (ssize_t)n);
    free(m);
    bson_destroy(&full);
    uint8_t h[16];
    read_n(fd, h, 16);
    uint32_t len = h[0] | h[1] << 8 | h[2] << 16 | (uint32_t)h[3] << 24;
    cr_assert(len > 21 && len < (1u << 26));
    uint8_t *b = malloc(len);
    read_n(fd, b, len - 16);
    bson_t view;
    cr_assert(bson_init_static(&view, b + 5, len - 21));
    bson_copy_to(&view, reply);
    free(b);
}

static void run_json(int fd, const char *db, const char *json, bson_t *reply)
{
    bson_error_t e;
    bson_t *cmd = bson_new_from_json((const uint8_t *)json, -1, &e);
    cr_assert(cmd, "%s: %s", json, e.message);
    run(fd, db, cmd, reply);
    bson_destroy(cmd);
}

static int code_of(const bson_t *r)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, r, "ok") && bson_iter_as_double(&it) == 1)
        return 0;
    return bson_iter_init_find(&it, r, "code") ? (int)bson_iter_as_int64(&it) : -1;
}

/* Run and return the code (0: ok: 1). */
static int try_json(int fd, const char *db, const char *json)
{
    bson_t r;
    run_json(fd, db, json, &r);
    int c = code_of(&r);
    bson_destroy(&r);
    return c;
}

static const char *str_of(const bson_t *r, const char *path, char *buf, size_t n)
{
    bson_iter_t it, f;
    buf[0] = '\0';
    if (bson_iter_init(&it, r) && bson_iter_find_descendant(&it, path, &f)) {
        if (BSON_ITER_HOLDS_UTF8(&f))
            snprintf(buf, n, "%s", bson_iter_utf8(&f, NULL));
        else if (BSON_ITER_HOLDS_BINARY(&f)) {
            uint32_t len;
            const uint8_t *d;
            bson_iter_binary(&f, NULL, &len, &d);
            snprintf(buf, n, "%.*s", (int)len, (const char *)d);
        }
    }
    return buf;
}

/* The client's side of SCRAM-SHA-256 after server-first: client-final
 * into cf, the ServerSignature line to expect into v. */
static void client_final(const char *first_bare, const char *server_first, const char *pwd,
                         char *cf, size_t cfn, char *v)
{
    char nonce[200] = "", salt64[200] = "", auth[1024], p64[64];
    int iters = 0;
    sscanf(server_first, "r=%199[^,],s=%199[^,],i=%d", nonce, salt64, &iters);
    cr_assert_geq(iters, 4096, "%s", server_first);
    uint8_t salt[128], salted[SRV_SCRAM_HASH], proof[SRV_SCRAM_HASH], sig[SRV_SCRAM_HASH];
    long sn = srv_b64_decode(salt64, strlen(salt64), salt, sizeof salt);
    cr_assert_gt(sn, 0);
    srv_scram_salted_password(pwd, salt, (size_t)sn, iters, salted);
    snprintf(auth, sizeof auth, "%s,%s,c=biws,r=%s", first_bare, server_first, nonce);
    srv_scram_client_proof(salted, auth, proof, sig);
    srv_b64_encode(proof, sizeof proof, p64);
    snprintf(cf, cfn, "c=biws,r=%s,p=%s", nonce, p64);
    strcpy(v, "v=");
    srv_b64_encode(sig, sizeof sig, v + 2);
}

static void add_payload(bson_t *cmd, const char *p)
{
    BSON_APPEND_BINARY(cmd, "payload", BSON_SUBTYPE_BINARY, (const uint8_t *)p,
                       (uint32_t)strlen(p));
}

/* saslStart + saslContinue (+ the empty one when !skip): 0 or the code. */
static int auth_as(int fd, const char *db, const char *user, const char *pwd, bool skip)
{
    char bare[300], first[400], sfirst[600], cf[800], v[64], buf[600];
    snprintf(bare, sizeof bare, "n=%s,r=fyko+d2lbbFgONRv9qkxdawL", user);
    snprintf(first, sizeof first, "n,,%s", bare);
    bson_t cmd = BSON_INITIALIZER, r, opts;
    BSON_APPEND_INT32(&cmd, "saslStart", 1);
    BSON_APPEND_UTF8(&cmd, "mechanism", "SCRAM-SHA-256");
    add_payload(&cmd, first);
    if (skip) {
        BSON_APPEND_DOCUMENT_BEGIN(&cmd, "options", &opts);
        BSON_APPEND_BOOL(&opts, "skipEmptyExchange", true);
        bson_append_document_end(&cmd, &opts);
    }
    run(fd, db, &cmd, &r);
    bson_destroy(&cmd);
    int code = code_of(&r);
    if (code) {
        bson_destroy(&r);
        return code;
    }
    str_of(&r, "payload", sfirst, sizeof sfirst);
    bson_destroy(&r);
    cr_assert(strncmp(sfirst, "r=fyko+d2lbbFgONRv9qkxdawL", 26) == 0, "%s", sfirst);
    client_final(bare, sfirst, pwd, cf, sizeof cf, v);
    bson_init(&cmd);
    BSON_APPEND_INT32(&cmd, "saslContinue", 1);
    BSON_APPEND_INT32(&cmd, "conversationId", 1);
    add_payload(&cmd, cf);
    run(fd, db, &cmd, &r);
    bson_destroy(&cmd);
    if ((code = code_of(&r))) {
        bson_destroy(&r);
        return code;
    }
    cr_assert_str_eq(str_of(&r, "payload", buf, sizeof buf), v);
    bson_iter_t it;
    cr_assert(bson_iter_init_find(&it, &r, "done"));
    cr_assert_eq(bson_iter_as_bool(&it), skip);
    bson_destroy(&r);
    if (!skip) {
        bson_init(&cmd);
        BSON_APPEND_INT32(&cmd, "saslContinue", 1);
        BSON_APPEND_INT32(&cmd, "conversationId", 1);
        add_payload(&cmd, "");
        run(fd, db, &cmd, &r);
        bson_destroy(&cmd);
        cr_assert_eq(code_of(&r), 0);
        cr_assert(bson_iter_init_find(&it, &r, "done") && bson_iter_as_bool(&it));
        bson_destroy(&r);
    }
    return 0;
}

Test(srv_auth, unauthenticated_and_localhost_exception)
{
    live l;
    live_start(&l);
    int fd = t_dial(&l);
    bson_t r;
    char buf[300];
    cr_assert_eq(try_json(fd, "admin", "{\"hello\": 1}"), 0);
    cr_assert_eq(try_json(fd, "admin", "{\"ping\": 1}"), 0);
    cr_assert_eq(try_json(fd, "admin", "{\"buildInfo\": 1}"), 0);
    run_json(fd, "test", "{\"find\": \"t\"}", &r);
    cr_assert_eq(code_of(&r), 13);
    cr_assert_str_eq(str_of(&r, "errmsg", buf, sizeof buf), "command find requires authentication");
    cr_assert_str_eq(str_of(&r, "codeName", buf, sizeof buf), "Unauthorized");
    bson_destroy(&r);
    cr_assert_eq(try_json(fd, "test", "{\"insert\": \"t\", \"documents\": [{}]}"), 13);
    cr_assert_eq(try_json(fd, "admin", "{\"listDatabases\": 1}"), 13);
    cr_assert_eq(try_json(fd, "admin", "{\"serverStatus\": 1}"), 13);
    /* the exception is for createUser on admin only */
    cr_assert_eq(try_json(fd, "test", "{\"createUser\": \"u\", \"pwd\": \"p\", \"roles\": []}"),
                 13);
    cr_assert_eq(try_json(fd, "admin", "{\"usersInfo\": 1}"), 13);
    /* no such user yet: authentication fails */
    cr_assert_eq(auth_as(fd, "admin", "root", "pw", true), 18);
    /* bad input to createUser: clear errors, nothing created */
    cr_assert_eq(try_json(fd, "admin", "{\"createUser\": \"root\", \"pwd\": \"p\", "
                                       "\"roles\": [\"nosuchrole\"]}"), 31);
    cr_assert_eq(try_json(fd, "admin", "{\"createUser\": \"root\", \"pwd\": \"caf\xc3\xa9\", "
                                       "\"roles\": [\"root\"]}"), 2);
    cr_assert_eq(try_json(fd, "admin", "{\"createUser\": \"root\", \"pwd\": \"p\", "
                                       "\"roles\": [\"root\"], \"mechanisms\": [\"SCRAM-SHA-1\"]}"),
                 2);
    cr_assert_eq(try_json(fd, "admin", "{\"createUser\": \"root\", \"roles\": [\"root\"]}"), 2);
    cr_assert_eq(try_json(fd, "admin", "{\"createUser\": \"root\", \"pwd\": \"p\"}"), 2);
    cr_assert_eq(try_json(fd, "admin", "{\"createUser\": \"root\", \"pwd\": \"p\", "
                                       "\"roles\": [], \"bogus\": 1}"), 40415);
    /* the first user */
    cr_assert_eq(try_json(fd, "admin", "{\"createUser\": \"root\", \"pwd\": \"s3cret pw\", "
                                       "\"roles\": [\"root\"]}"), 0);
    /* and the exception is closed */
    cr_assert_eq(try_json(fd, "admin", "{\"createUser\": \"x\", \"pwd\": \"p\", "
                                       "\"roles\": [\"root\"]}"), 13);
    cr_assert_eq(auth_as(fd, "admin", "root", "wrong", true), 18);
    cr_assert_eq(try_json(fd, "test", "{\"find\": \"t\"}"), 13);
    cr_assert_eq(auth_as(fd, "admin", "root", "s3cret pw", true), 0);
    cr_assert_eq(try_json(fd, "test", "{\"insert\": \"t\", \"documents\": [{\"a\": 1}]}"), 0);
    cr_assert_eq(try_json(fd, "admin", "{\"listDatabases\": 1}"), 0);
    cr_assert_eq(try_json(fd, "admin", "{\"createUser\": \"root\", \"pwd\": \"p\", "
                                       "\"roles\": [\"root\"]}"), 51003);

    /* what system.users holds: salted keys, never the password */
    run_json(fd, "admin", "{\"find\": \"system.users\"}", &r);
    cr_assert_eq(code_of(&r), 0);
    char *json = bson_as_relaxed_extended_json(&r, NULL);
    cr_assert(strstr(json, "s3cret") == NULL, "%s", json);
    cr_assert(strstr(json, "\"_id\" : \"admin.root\""), "%s", json);
    cr_assert(strstr(json, "\"iterationCount\" : 15000"), "%s", json);
    cr_assert(strstr(json, "\"storedKey\""), "%s", json);
    cr_assert(strstr(json, "\"serverKey\""), "%s", json);
    cr_assert(strstr(json, "\"roles\" : [ { \"role\" : \"root\", \"db\" : \"admin\" } ]"), "%s",
              json);
    bson_free(json);
    bson_destroy(&r);
    close(fd);
    t_live_stop(&l);
}

Test(srv_auth, roles_and_their_changes)
{
    live l;
    live_start(&l);
    int adm = t_dial(&l), fd = t_dial(&l);
    bson_t r;
    char buf[300];
    cr_assert_eq(try_json(adm, "admin", "{\"createUser\": \"root\", \"pwd\": \"rootpw\", "
                                        "\"roles\": [\"root\"]}"), 0);
    cr_assert_eq(auth_as(adm, "admin", "root", "rootpw", false), 0);
    cr_assert_eq(try_json(adm, "shop", "{\"insert\": \"t\", \"documents\": [{\"_id\": 1}]}"),
                 0);
    cr_assert_eq(try_json(adm, "shop", "{\"createUser\": \"ann\", \"pwd\": \"annpw\", "
                                       "\"roles\": [\"read\"], \"customData\": {\"k\": 1}}"), 0);

    /* usersInfo: no credentials unless asked, the mechanisms */
    run_json(adm, "shop", "{\"usersInfo\": \"ann\"}", &r);
    cr_assert_str_eq(str_of(&r, "users.0._id", buf, sizeof buf), "shop.ann");
    cr_assert_str_eq(str_of(&r, "users.0.mechanisms.0", buf, sizeof buf), "SCRAM-SHA-256");
    cr_assert_str_eq(str_of(&r, "users.0.roles.0.role", buf, sizeof buf), "read");
    cr_assert_str_eq(str_of(&r, "users.0.credentials.SCRAM-SHA-256.salt", buf, sizeof buf), "");
    bson_destroy(&r);
    run_json(adm, "shop", "{\"usersInfo\": {\"user\": \"ann\", \"db\": \"shop\"}, "
                          "\"showCredentials\": true}", &r);
    cr_assert_neq(strlen(str_of(&r, "users.0.credentials.SCRAM-SHA-256.salt", buf, sizeof buf)),
                  0);
    bson_destroy(&r);

    /* ann reads shop, and nothing else */
    cr_assert_eq(auth_as(fd, "shop", "ann", "annpw", true), 0);
    cr_assert_eq(try_json(fd, "shop", "{\"find\": \"t\"}"), 0);
    cr_assert_eq(try_json(fd, "shop", "{\"count\": \"t\"}"), 0);
    run_json(fd, "shop", "{\"insert\": \"t\", \"documents\": [{\"_id\": 2}]}", &r);
    cr_assert_eq(code_of(&r), 13);
    cr_assert(strstr(str_of(&r, "errmsg", buf, sizeof buf), "not authorized on shop"), "%s",
              buf);
    bson_destroy(&r);
    cr_assert_eq(try_json(fd, "shop", "{\"aggregate\": \"t\", \"pipeline\": [{\"$out\": \"o\"}], "
                                      "\"cursor\": {}}"), 13);
    cr_assert_eq(try_json(fd, "other", "{\"find\": \"t\"}"), 13);
    cr_assert_eq(try_json(fd, "shop", "{\"dropDatabase\": 1}"), 13);
    cr_assert_eq(try_json(fd, "shop", "{\"createUser\": \"x\", \"pwd\": \"p\", \"roles\": []}"),
                 13);
    cr_assert_eq(try_json(fd, "admin", "{\"find\": \"system.users\"}"), 13);
    /* a user may look at itself, not at others */
    cr_assert_eq(try_json(fd, "shop", "{\"usersInfo\": \"ann\"}"), 0);
    cr_assert_eq(try_json(fd, "shop", "{\"usersInfo\": {\"user\": \"ann\", \"db\": \"shop\"}}"),
                 0);
    cr_assert_eq(try_json(fd, "shop", "{\"usersInfo\": 1}"), 13);
    run_json(fd, "shop", "{\"updateUser\": \"ann\", \"pwd\": \"secretpw\"}", &r);
    cr_assert_eq(code_of(&r), 13);
    cr_assert(strstr(str_of(&r, "errmsg", buf, sizeof buf), "secretpw") == NULL, "%s", buf);
    bson_destroy(&r);

    /* updateUser reaches the open connection at its next command */
    cr_assert_eq(try_json(adm, "shop", "{\"updateUser\": \"ann\", \"roles\": [\"readWrite\"]}"),
                 0);
    cr_assert_eq(try_json(fd, "shop", "{\"insert\": \"t\", \"documents\": [{\"_id\": 2}]}"), 0);
    cr_assert_eq(try_json(adm, "shop", "{\"revokeRolesFromUser\": \"ann\", "
                                       "\"roles\": [\"readWrite\"]}"), 0);
    cr_assert_eq(try_json(fd, "shop", "{\"find\": \"t\"}"), 13);
    cr_assert_eq(try_json(adm, "shop", "{\"grantRolesToUser\": \"ann\", "
                                       "\"roles\": [{\"role\": \"read\", \"db\": \"shop\"}]}"), 0);
    cr_assert_eq(try_json(fd, "shop", "{\"find\": \"t\"}"), 0);
    run_json(fd, "admin", "{\"connectionStatus\": 1}", &r);
    cr_assert_str_eq(str_of(&r, "authInfo.authenticatedUsers.0.user", buf, sizeof buf), "ann");
    cr_assert_str_eq(str_of(&r, "authInfo.authenticatedUserRoles.0.role", buf, sizeof buf),
                     "read");
    bson_destroy(&r);

    /* a new password: the old one stops working */
    cr_assert_eq(try_json(adm, "shop", "{\"updateUser\": \"ann\", \"pwd\": \"newpw\"}"), 0);
    int fd2 = t_dial(&l);
    cr_assert_eq(auth_as(fd2, "shop", "ann", "annpw", true), 18);
    cr_assert_eq(auth_as(fd2, "shop", "ann", "newpw", true), 0);
    cr_assert_eq(try_json(fd2, "shop", "{\"logout\": 1}"), 0);
    cr_assert_eq(try_json(fd2, "shop", "{\"find\": \"t\"}"), 13);
    close(fd2);

    /* dropUser: the connection authenticated as ann loses her */
    cr_assert_eq(try_json(adm, "shop", "{\"dropUser\": \"ann\"}"), 0);
    cr_assert_eq(try_json(fd, "shop", "{\"find\": \"t\"}"), 13);
    cr_assert_eq(try_json(adm, "shop", "{\"dropUser\": \"ann\"}"), 11);
    cr_assert_eq(try_json(adm, "shop", "{\"updateUser\": \"ann\", \"pwd\": \"x\"}"), 11);
    cr_assert_eq(try_json(adm, "shop", "{\"updateUser\": \"root\"}"), 2);
    close(fd);
    close(adm);
    t_live_stop(&l);
}

Test(srv_auth, sasl_protocol_errors_and_speculative_hello)
{
    live l;
    live_start(&l);
    int fd = t_dial(&l);
    bson_t r;
    char buf[600];
    cr_assert_eq(try_json(fd, "admin", "{\"createUser\": \"root\", \"pwd\": \"pw\", "
                                       "\"roles\": [\"root\"]}"), 0);
    cr_assert_eq(try_json(fd, "admin", "{\"saslContinue\": 1, \"conversationId\": 1, "
                                       "\"payload\": \"\"}"), 17);
    cr_assert_eq(try_json(fd, "admin", "{\"saslStart\": 1, \"mechanism\": \"SCRAM-SHA-1\", "
                                       "\"payload\": \"n,,n=root,r=abc\"}"), 334);
    cr_assert_eq(try_json(fd, "admin", "{\"authenticate\": 1, \"mechanism\": \"MONGODB-CR\"}"),
                 334);
    cr_assert_eq(try_json(fd, "admin", "{\"saslStart\": 1, \"mechanism\": \"SCRAM-SHA-256\", "
                                       "\"payload\": \"p=x,,n=root,r=abc\"}"), 2);
    /* a string payload works as BinData does */
    run_json(fd, "admin", "{\"saslStart\": 1, \"mechanism\": \"SCRAM-SHA-256\", "
                          "\"payload\": \"n,,n=root,r=abc\"}", &r);
    cr_assert_eq(code_of(&r), 0);
    cr_assert(strncmp(str_of(&r, "payload", buf, sizeof buf), "r=abc", 5) == 0, "%s", buf);
    bson_destroy(&r);
    cr_assert_eq(try_json(fd, "admin", "{\"saslContinue\": 1, \"conversationId\": 7, "
                                       "\"payload\": \"\"}"), 17);
    /* the default third exchange */
    cr_assert_eq(auth_as(fd, "admin", "root", "pw", false), 0);

    /* hello: saslSupportedMechs, and speculativeAuthenticate's first step */
    int fd2 = t_dial(&l);
    run_json(fd2, "admin", "{\"hello\": 1, \"saslSupportedMechs\": \"admin.root\", "
                           "\"speculativeAuthenticate\": {\"saslStart\": 1, \"mechanism\": "
                           "\"SCRAM-SHA-256\", \"payload\": \"n,,n=root,r=xyz\", \"db\": "
                           "\"admin\", \"options\": {\"skipEmptyExchange\": true}}}", &r);
    cr_assert_str_eq(str_of(&r, "saslSupportedMechs.0", buf, sizeof buf), "SCRAM-SHA-256");
    str_of(&r, "speculativeAuthenticate.payload", buf, sizeof buf);
    cr_assert(strncmp(buf, "r=xyz", 5) == 0, "%s", buf);
    bson_iter_t it;
    cr_assert(bson_iter_init(&it, &r) &&
              bson_iter_find_descendant(&it, "speculativeAuthenticate.conversationId", &it));
    bson_destroy(&r);
    /* finish it with saslContinue */
    char cf[800], v[64], out[600];
    client_final("n=root,r=xyz", buf, "pw", cf, sizeof cf, v);
    bson_t cmd = BSON_INITIALIZER;
    BSON_APPEND_INT32(&cmd, "saslContinue", 1);
    BSON_APPEND_INT32(&cmd, "conversationId", 1);
    add_payload(&cmd, cf);
    run(fd2, "admin", &cmd, &r);
    bson_destroy(&cmd);
    cr_assert_eq(code_of(&r), 0);
    cr_assert_str_eq(str_of(&r, "payload", out, sizeof out), v);
    bson_destroy(&r);
    cr_assert_eq(try_json(fd2, "test", "{\"find\": \"t\"}"), 0);
    close(fd2);

    /* no such user: no saslSupportedMechs, no speculativeAuthenticate */
    int fd3 = t_dial(&l);
    run_json(fd3, "admin", "{\"hello\": 1, \"saslSupportedMechs\": \"admin.nobody\", "
                           "\"speculativeAuthenticate\": {\"saslStart\": 1, \"mechanism\": "
                           "\"SCRAM-SHA-256\", \"payload\": \"n,,n=nobody,r=xyz\", \"db\": "
                           "\"admin\"}}", &r);
    cr_assert_eq(code_of(&r), 0);
    cr_assert_not(bson_iter_init_find(&it, &r, "saslSupportedMechs"));
    cr_assert_not(bson_iter_init_find(&it, &r, "speculativeAuthenticate"));
    bson_destroy(&r);
    close(fd3);
    close(fd);
    t_live_stop(&l);
}
