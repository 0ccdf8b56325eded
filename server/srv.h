/*
 * srv.h -- `minidoc serve`: MongoDB's wire protocol in front of md_db_command().
 *
 * The server is a program beside tools/: it uses only include/minidoc.h and
 * libbson.  Its parts:
 *
 *   srv_main.c      options, the listener, one thread per connection, the
 *                   idle timeout, maxIncomingConnections, signals, shutdown
 *   srv_wire.c      message framing: header checks, OP_MSG (sections 0 and 1,
 *                   CRC-32C checksums, moreToCome), OP_QUERY on <db>.$cmd and
 *                   OP_REPLY, OP_COMPRESSED; pure functions over byte buffers
 *   srv_compress.c  the compressors (snappy, zlib, zstd) as a table
 *   srv_cmd.c       the handshake and the commands the server answers itself
 *                   (hello, buildInfo, getLog, listDatabases, ...); the rest
 *                   go to the md_db of the request's $db
 *   srv_db.c        the databases: DIR/<name>/, one md_db each, opened on
 *                   first use, reference counted, removed by dropDatabase
 *   srv_log.c       structured JSON log lines (MongoDB 4.4's t/s/c/id/ctx/
 *                   msg/attr) and the ring getLog reads
 *   srv_scram.c     SCRAM-SHA-256's computations and the server's side of
 *                   one conversation (OpenSSL's PBKDF2, HMAC, SHA-256)
 *   srv_auth.c      --auth: saslStart / saslContinue (and hello's
 *                   speculativeAuthenticate), the users a connection is
 *                   authenticated as, and which commands their roles allow
 *   srv_users.c     createUser, updateUser, dropUser, usersInfo, ...: the
 *                   users in admin's system.users, salted and hashed
 *   srv_tls.c       TLS with OpenSSL: --tlsMode, the certificate, a
 *                   connection's handshake, reads and writes
 *
 *       client --bytes--> srv_conn (thread) --srv_msg_parse--> srv_request
 *              <--bytes-- srv_msg_reply <--bson reply-- srv_cmd_run
 *                                               \--> md_db_command(db, cmd)
 */
#ifndef SRV_H
#define SRV_H

#include <bson/bson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "minidoc.h"

/* ---- limits (MongoDB's) ---------------------------------------------------------- */
#define SRV_MAX_BSON 16777216        /* maxBsonObjectSize */
#define SRV_MAX_MESSAGE 48000000     /* maxMessageSizeBytes */
#define SRV_MAX_WRITE_BATCH 100000   /* maxWriteBatchSize */
#define SRV_MIN_WIRE 0
#define SRV_MAX_WIRE 13              /* MongoDB 5.0: see srv_cmd.c's header */
#define SRV_SESSION_MINUTES 30       /* logicalSessionTimeoutMinutes */
#define SRV_DB_NAME_MAX 64

/* ---- opcodes ----------------------------------------------------------------------- */
enum {
    SRV_OP_REPLY = 1,
    SRV_OP_UPDATE = 2001,
    SRV_OP_INSERT = 2002,
    SRV_OP_QUERY = 2004,
    SRV_OP_GET_MORE = 2005,
    SRV_OP_DELETE = 2006,
    SRV_OP_KILL_CURSORS = 2007,
    SRV_OP_COMPRESSED = 2012,
    SRV_OP_MSG = 2013,
};

/* OP_MSG flag bits */
#define SRV_MSG_CHECKSUM 0x1u
#define SRV_MSG_MORE_TO_COME 0x2u
#define SRV_MSG_EXHAUST 0x10000u
#define SRV_MSG_REQUIRED_MASK 0xffffu /* bits 0-15 must be understood */

/* compressor ids (OP_COMPRESSED) */
enum { SRV_COMP_NOOP = 0, SRV_COMP_SNAPPY = 1, SRV_COMP_ZLIB = 2, SRV_COMP_ZSTD = 3 };

/* ---- srv_wire.c ---------------------------------------------------------------------- */

/*
 * The 16-byte header:
 *
 *   OFFSET SIZE FIELD
 *        0    4 messageLength   int32 LE, the whole message, header included
 *        4    4 requestID
 *        8    4 responseTo
 *       12    4 opCode
 */
typedef struct srv_hdr {
    int32_t len, request_id, response_to, opcode;
} srv_hdr;

/* What a parse failure means for the connection. */
enum {
    SRV_PARSE_OK = 0,
    SRV_PARSE_REPLY = 1, /* answer with an error reply (code, message), keep going */
    SRV_PARSE_CLOSE = 2, /* log and close the connection */
};

typedef struct srv_perr {
    int code;           /* MongoDB error code (SRV_PARSE_REPLY) */
    char message[256];
} srv_perr;

/* A parsed request: one command for one database. */
typedef struct srv_request {
    int32_t request_id;
    int32_t opcode;       /* SRV_OP_MSG or SRV_OP_QUERY (after decompression) */
    uint32_t flags;       /* OP_MSG flagBits, or OP_QUERY's flags */
    int compressor;       /* -1: arrived uncompressed, else the id it came in */
    bool more_to_come;    /* OP_MSG moreToCome: no reply wanted */
    char db[SRV_DB_NAME_MAX + 1];
    bson_t cmd;           /* the body with document sequences folded in as arrays */
} srv_request;

uint32_t srv_crc32c(uint32_t crc, const void *data, size_t len);

/* Read the header from 16 bytes and check the length: at least 16 (and room
 * for the opcode's fixed fields), at most `max`.  Returns SRV_PARSE_OK or
 * SRV_PARSE_CLOSE with `e->message` saying why. */
int srv_hdr_read(const uint8_t *b, int32_t max, srv_hdr *h, srv_perr *e);

/* Parse one whole message (`len` bytes, header included).  On SRV_PARSE_OK
 * `req->cmd` is initialized and the caller must srv_request_cleanup() it;
 * otherwise nothing is left to free.  OP_COMPRESSED is unwrapped first. */
int srv_msg_parse(const uint8_t *msg, size_t len, int32_t max, srv_request *req, srv_perr *e);
void srv_request_cleanup(srv_request *req);
/* {snappy: {compressor: {bytesIn, bytesOut}, decompressor: {...}}, zstd, zlib}
 * since the process started, as serverStatus' network.compression. */
void srv_compression_stats(bson_t *out);

/* The reply to `req` carrying `body`, as OP_MSG (flags 0, or checksumPresent
 * with the checksum when the request had one) or, for OP_QUERY,
 * OP_REPLY (responseFlags: QueryFailure when `query_failure`), compressed
 * with the request's compressor when it came compressed.  Returns a malloc'd
 * message (caller frees) and its length in *len, or NULL on failure. */
uint8_t *srv_msg_reply(const srv_request *req, int32_t request_id, const bson_t *body,
                       bool query_failure, size_t *len);

/* ---- srv_compress.c ------------------------------------------------------------------- */
typedef struct srv_compressor {
    const char *name;
    int id;
    /* returns the compressed/decompressed length, or -1 */
    long (*compress)(const uint8_t *in, size_t n, uint8_t *out, size_t cap);
    long (*decompress)(const uint8_t *in, size_t n, uint8_t *out, size_t cap);
    size_t (*bound)(size_t n);
} srv_compressor;

const srv_compressor *srv_compressor_by_id(int id);
const srv_compressor *srv_compressor_by_name(const char *name);

/* ---- srv_log.c ------------------------------------------------------------------------ */
typedef enum { SRV_LOG_I = 'I', SRV_LOG_W = 'W', SRV_LOG_E = 'E', SRV_LOG_F = 'F' } srv_sev;

/* One JSON line: {"t":{"$date":...},"s":"I","c":"NETWORK","id":22943,
 * "ctx":"conn5","msg":"...","attr":{...}}; `attr` may be NULL. */
void srv_log(srv_sev s, const char *component, int id, const char *ctx, const char *msg,
             const bson_t *attr);
void srv_log_open(FILE *out, bool quiet);
/* getLog: "global" (the last lines, at most 1024), "startupWarnings". */
void srv_log_get(const char *which, bson_t *reply);

/* ---- srv_db.c ----------------------------------------------------------------------- */
typedef struct srv_db srv_db;
typedef struct srv_dbs srv_dbs;

int srv_dbs_new(const char *dir, const char *engine, const bson_t *open_opts, srv_dbs **out);
void srv_dbs_destroy(srv_dbs *d); /* closes (flushes) every database */
/* MongoDB's database name rules; fills err (InvalidNamespace, 73). */
int srv_db_name_check(const char *name, md_error *err);
/* The database `name`, opened (created when `create`) on first use; NULL
 * with MD_NOTFOUND when it does not exist and !create.  Release with
 * srv_db_put. */
int srv_db_get(srv_dbs *d, const char *name, bool create, srv_db **out, md_error *err);
md_db *srv_db_handle(srv_db *db);
void srv_db_put(srv_db *db);
/* dropDatabase: drops every collection, then removes DIR/<name>/ (at
 * once, or when the last user lets go). */
int srv_db_drop(srv_dbs *d, const char *name, bson_t *reply, md_error *err);
/* listDatabases' entries: names of every database with a collection. */
int srv_dbs_list(srv_dbs *d, bool name_only, bson_t *databases, int64_t *total, md_error *err);

/* ---- srv_main.c: the server ------------------------------------------------------------- */
/* --tlsMode */
typedef enum {
    SRV_TLS_DISABLED = 0, /* plain connections only; a TLS hello is refused */
    SRV_TLS_ALLOW,        /* allowTLS and preferTLS: both, told apart by the first bytes */
    SRV_TLS_PREFER,
    SRV_TLS_REQUIRE,      /* TLS only; a plain connection is closed */
} srv_tls_mode;

typedef struct srv_config {
    const char *dbpath;
    const char *bind;        /* "127.0.0.1" */
    const char *engine;      /* NULL: each directory's own, else btree */
    const char *compressors; /* "snappy,zstd,zlib" (networkMessageCompressors) */
    int port;                /* 27017; 0: any free port (srv_port tells) */
    int max_conns;           /* maxIncomingConnections (1000000 as MongoDB: 65536 here) */
    int idle_secs;           /* close connections idle this long (0: never) */
    const bson_t *open_opts; /* extra md_db_open options (may be NULL) */
    bool auth;               /* --auth: every command but the handshake needs a user */
    srv_tls_mode tls_mode;
    const char *tls_cert;    /* --tlsCertificateKeyFile: PEM with the certificate and key */
    const char *tls_ca;      /* --tlsCAFile: verify client certificates against it */
    bool tls_no_client_cert; /* --tlsAllowConnectionsWithoutCertificates */
} srv_config;

typedef struct srv srv;

int srv_new(const srv_config *cfg, srv **out, md_error *err); /* binds and listens */
int srv_port(const srv *s);
int srv_run(srv *s);        /* accepts until srv_stop; then waits for connections */
void srv_stop(srv *s);      /* async-signal-safe */
void srv_destroy(srv *s);   /* closes and flushes every database */
int srv_main(int argc, char **argv); /* `minidoc serve ...` */

typedef struct srv_tls srv_tls;           /* srv_tls.c: one connection's TLS */
typedef struct srv_tls_ctx srv_tls_ctx;   /* srv_tls.c: the server's certificate */
typedef struct srv_sess srv_sess;         /* srv_auth.c: a connection's users */

/* What a connection's thread knows; srv_cmd.c reads and sets it. */
typedef struct srv_conn {
    srv *server;
    int fd;
    srv_tls *tls;             /* NULL: a plain connection */
    srv_sess *sess;           /* NULL until the first authentication */
    int64_t id;
    char remote[64];          /* "127.0.0.1:53214" */
    char ctx[32];             /* "conn12" */
    bool handshake_done;
    int compressors[4];       /* negotiated ids, -1 terminated */
} srv_conn;

/* ---- srv_cmd.c -------------------------------------------------------------------------- */
/* Run `req` (a command for req->db) on connection `c`; `reply` is
 * initialized by the call. */
void srv_cmd_run(srv_conn *c, srv_request *req, bson_t *reply);
/* MongoDB's codeName for a code, "Location<N>" for a location code. */
const char *srv_code_name(int code);
/* srv_main.c's state, for the commands that report it. */
srv_dbs *srv_databases(srv *s);
const srv_config *srv_cfg(const srv *s);
int srv_conn_count(const srv *s, int64_t *total_created);
int64_t srv_now_ms(void);
/* The TLS context (NULL when --tlsMode disabled). */
srv_tls_ctx *srv_tls_context(const srv *s);
/* Bumped by every change to system.users; a session whose users were
 * loaded at an older value loads their roles again. */
int64_t srv_users_version(const srv *s);
void srv_users_changed(srv *s);
/* A reply to a command with an error: ok 0, errmsg, code, codeName. */
void srv_reply_error(bson_t *reply, int code, const char *msg);
void srv_reply_md_error(bson_t *reply, const md_error *err);

/* ---- srv_scram.c: SCRAM-SHA-256 ------------------------------------------------------ */
#define SRV_SCRAM_HASH 32         /* SHA-256 */
#define SRV_SCRAM_SALT 28         /* bytes of salt MongoDB makes for SCRAM-SHA-256 */
#define SRV_SCRAM_ITERATIONS 15000 /* scramSHA256IterationCount's default */
#define SRV_SCRAM_MIN_ITERATIONS 4096

/* One user's SCRAM-SHA-256 credential, as system.users keeps it (there in
 * base64). */
typedef struct srv_scram_cred {
    int iterations;
    uint8_t salt[64];
    size_t salt_len;
    uint8_t stored_key[SRV_SCRAM_HASH];
    uint8_t server_key[SRV_SCRAM_HASH];
} srv_scram_cred;

/* The server's side of one conversation: srv_scram_start, then
 * srv_scram_server_first, then srv_scram_server_final; srv_scram_cleanup
 * frees it after any of them, whatever they returned. */
typedef struct srv_scram {
    int step;                /* 1: client-first read, 2: server-first sent, 3: done, 4: failed */
    char *gs2;               /* "n,," as the client sent it */
    char *client_first_bare;
    char *server_first;
    char *nonce;             /* the client's, then client's + server's */
    srv_scram_cred cred;
} srv_scram;

/* base64 (RFC 4648, padded): encode writes 4*ceil(n/3) chars and a NUL;
 * decode is strict and returns the byte count or -1. */
size_t srv_b64_encode(const uint8_t *in, size_t n, char *out);
long srv_b64_decode(const char *in, size_t n, uint8_t *out, size_t cap);
/* Hi(password, salt, i); 0 or -1. */
int srv_scram_salted_password(const char *pwd, const uint8_t *salt, size_t salt_len, int iters,
                              uint8_t out[SRV_SCRAM_HASH]);
/* ClientKey (when not NULL), StoredKey, ServerKey from SaltedPassword. */
void srv_scram_keys(const uint8_t salted[SRV_SCRAM_HASH], uint8_t client_key[SRV_SCRAM_HASH],
                    uint8_t stored_key[SRV_SCRAM_HASH], uint8_t server_key[SRV_SCRAM_HASH]);
/* A credential for `pwd` with `salt` (NULL: salt_len random bytes). */
int srv_scram_cred_make(const char *pwd, const uint8_t *salt, size_t salt_len, int iters,
                        srv_scram_cred *out);
/* Non-empty printable ASCII, or BadValue (see srv_scram.c on SASLprep). */
int srv_scram_password_check(const char *pwd, srv_perr *e);
/* The client's side, for tests: ClientProof and the ServerSignature to expect. */
void srv_scram_client_proof(const uint8_t salted[SRV_SCRAM_HASH], const char *auth_msg,
                            uint8_t proof[SRV_SCRAM_HASH], uint8_t server_sig[SRV_SCRAM_HASH]);
/* Read client-first; *user gets the user name (malloc'd, caller frees).
 * Errors are BadValue (2) with the reason in e. */
int srv_scram_start(srv_scram *s, const char *msg, size_t n, char **user, srv_perr *e);
/* server-first for the user's credential; `server_nonce` NULL: 24 random
 * bytes in base64.  *out is malloc'd. */
int srv_scram_server_first(srv_scram *s, const srv_scram_cred *cred, const char *server_nonce,
                           char **out, srv_perr *e);
/* Check client-final's proof: 0 with *out = "v=<ServerSignature>"
 * (malloc'd), AuthenticationFailed (18) for a wrong proof, BadValue for a
 * malformed message. */
int srv_scram_server_final(srv_scram *s, const char *msg, size_t n, char **out, srv_perr *e);
void srv_scram_cleanup(srv_scram *s);

/* ---- srv_auth.c, srv_users.c: authentication and users ----------------------------- */
/* Commands answered by srv_auth.c / srv_users.c: true when `name` is one
 * (then `reply` holds the answer). */
bool srv_auth_command(srv_conn *c, srv_request *req, const char *name, bson_t *reply);
bool srv_users_command(srv_conn *c, srv_request *req, const char *name, bson_t *reply);
/* With --auth: may this connection run `name` (the command in req) on
 * req->db?  false with Unauthorized (13) in reply when not. */
bool srv_auth_check(srv_conn *c, const srv_request *req, const char *name, bson_t *reply);
/* hello's saslSupportedMechs and speculativeAuthenticate, added to reply. */
void srv_auth_hello(srv_conn *c, const bson_t *cmd, bson_t *reply);
/* connectionStatus' authInfo. */
void srv_auth_info(srv_conn *c, bson_t *reply);
void srv_auth_conn_cleanup(srv_conn *c);
/* A user's credential and roles from admin.system.users: 0, MD_NOTFOUND,
 * or another error in err.  `roles` (may be NULL) gets a copy of the roles
 * array (caller destroys). */
int srv_users_find(srv *s, const char *db, const char *user, srv_scram_cred *cred,
                   bson_t *roles, md_error *err);
/* Are there any users at all (for the localhost exception)? */
bool srv_users_exist(srv *s);
/* Is `role` a built-in role that exists on `db`?  Its privileges: */
enum {
    SRV_ACT_READ = 1,      /* find, aggregate, listCollections, ... */
    SRV_ACT_WRITE = 2,     /* insert, update, create, createIndexes, drop, ... */
    SRV_ACT_DBADMIN = 4,   /* collMod, compact, validate, dropDatabase, stats */
    SRV_ACT_USERADMIN = 8, /* createUser, usersInfo, ... */
    SRV_ACT_CLUSTER = 16,  /* serverStatus, getLog, hostInfo, listDatabases, ... */
};
bool srv_role_lookup(const char *role, const char *db, uint32_t *actions, bool *any_db);

/* ---- srv_tls.c: TLS ----------------------------------------------------------------- */
/* Load the certificate (and CA): NULL with err set when it cannot. */
srv_tls_ctx *srv_tls_ctx_new(const srv_config *cfg, md_error *err);
void srv_tls_ctx_destroy(srv_tls_ctx *t);
/* "OpenSSL 3.0.x ..." for buildInfo. */
const char *srv_tls_version(void);
/* Do a connection's first 3 bytes look like a TLS ClientHello's record
 * header (0x16, 0x03, 0x00-0x04)? */
bool srv_tls_is_hello(const uint8_t b[3]);
/* The server side of the handshake on c->fd: 0, or -1 with why. */
int srv_tls_accept(srv_conn *c, srv_tls_ctx *t, char *why, size_t why_len);
/* recv/send through TLS: > 0 bytes, 0 the peer closed, -1 error,
 * SRV_TLS_AGAIN: wait for the socket (readable) and call again. */
#define SRV_TLS_AGAIN (-2)
long srv_tls_recv(srv_tls *t, void *b, size_t n);
bool srv_tls_send_all(srv_conn *c, const uint8_t *b, size_t n);
bool srv_tls_pending(const srv_tls *t);
void srv_tls_free(srv_tls *t);

#endif
