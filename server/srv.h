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
typedef struct srv_config {
    const char *dbpath;
    const char *bind;        /* "127.0.0.1" */
    const char *engine;      /* NULL: each directory's own, else btree */
    const char *compressors; /* "snappy,zstd,zlib" (networkMessageCompressors) */
    int port;                /* 27017; 0: any free port (srv_port tells) */
    int max_conns;           /* maxIncomingConnections (1000000 as MongoDB: 65536 here) */
    int idle_secs;           /* close connections idle this long (0: never) */
    const bson_t *open_opts; /* extra md_db_open options (may be NULL) */
} srv_config;

typedef struct srv srv;

int srv_new(const srv_config *cfg, srv **out, md_error *err); /* binds and listens */
int srv_port(const srv *s);
int srv_run(srv *s);        /* accepts until srv_stop; then waits for connections */
void srv_stop(srv *s);      /* async-signal-safe */
void srv_destroy(srv *s);   /* closes and flushes every database */
int srv_main(int argc, char **argv); /* `minidoc serve ...` */

/* What a connection's thread knows; srv_cmd.c reads and sets it. */
typedef struct srv_conn {
    srv *server;
    int fd;
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

#endif
