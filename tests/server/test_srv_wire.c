/*
 * test_srv_wire.c -- the wire protocol without a driver: srv_wire.c's
 * parser on hand-built messages (good ones, bad lengths, bad opcodes, bad
 * flags, bad checksums, malformed sections, each compressor), then the
 * server itself, started in-process on a free loopback port and spoken to
 * through raw sockets: a bad or oversized message closes only its own
 * connection (with a log line getLog shows), moreToCome gets no reply,
 * maxIncomingConnections refuses the connection past the limit, an idle
 * connection is closed, 500 connections are served at once, a cursor
 * opened by find is continued by getMore on a later message, replication,
 * transactions and sharding get a standalone mongod's errors, and hostInfo,
 * getLog and getCmdLineOpts answer.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "srv.h"
#include "t_live.h"

/* ---- building messages ---------------------------------------------------------------- */

typedef struct msgbuf {
    uint8_t b[1 << 16];
    size_t n;
} msgbuf;

static void put32(msgbuf *m, int32_t v)
{
    uint32_t u = (uint32_t)v;
    for (int i = 0; i < 4; i++)
        m->b[m->n++] = (uint8_t)(u >> (8 * i));
}

static void put(msgbuf *m, const void *p, size_t n)
{
    memcpy(m->b + m->n, p, n);
    m->n += n;
}

static void set32(msgbuf *m, size_t at, int32_t v)
{
    uint32_t u = (uint32_t)v;
    for (int i = 0; i < 4; i++)
        m->b[at + (size_t)i] = (uint8_t)(u >> (8 * i));
}

static void hdr(msgbuf *m, int32_t id, int32_t opcode)
{
    m->n = 0;
    put32(m, 0);
    put32(m, id);
    put32(m, 0);
    put32(m, opcode);
}

static void finish(msgbuf *m)
{
    set32(m, 0, (int32_t)m->n);
}

static void body(msgbuf *m, const char *json)
{
    bson_error_t e;
    bson_t *d = bson_new_from_json((const uint8_t *)json, -1, &e);
    cr_assert(d, "%s: %s", json, e.message);
    m->b[m->n++] = 0;
    put(m, bson_get_data(d), d->len);
    bson_destroy(d);
}

static void sequence(msgbuf *m, const char *name, const char **docs, int n)
{
    m->b[m->n++] = 1;
    size_t at = m->n;
    put32(m, 0);
    put(m, name, strlen(name) + 1);
    for (int i = 0; i < n; i++) {
        bson_error_t e;
        bson_t *d = bson_new_from_json((const uint8_t *)docs[i], -1, &e);
        cr_assert(d);
        put(m, bson_get_data(d), d->len);
        bson_destroy(d);
    }
    set32(m, at, (int32_t)(m->n - at));
}

/* an OP_MSG with flags and a body */
static void op_msg(msgbuf *m, int32_t id, uint32_t flags, const char *json)
{
    hdr(m, id, SRV_OP_MSG);
    put32(m, (int32_t)flags);
    body(m, json);
    finish(m);
}

static void add_checksum(msgbuf *m)
{
    set32(m, 16, (int32_t)((uint32_t)m->b[16] | SRV_MSG_CHECKSUM));
    m->n += 4;
    finish(m);
    set32(m, m->n - 4, (int32_t)srv_crc32c(0, m->b, m->n - 4));
}

static int parse(const msgbuf *m, srv_request *req, srv_perr *e)
{
    int rc = srv_msg_parse(m->b, m->n, SRV_MAX_MESSAGE, req, e);
    return rc;
}

static char *json_of(const bson_t *b)
{
    return bson_as_relaxed_extended_json(b, NULL);
}

/* ---- the parser ------------------------------------------------------------------------ */

Test(srv_wire, crc32c_known_value)
{
    /* the CRC-32C check value (RFC 3720's test vector) */
    cr_assert_eq(srv_crc32c(0, "123456789", 9), 0xE3069283u);
    cr_assert_eq(srv_crc32c(srv_crc32c(0, "1234", 4), "56789", 5), 0xE3069283u);
}

Test(srv_wire, op_msg_body_and_db)
{
    msgbuf m;
    srv_request req;
    srv_perr e;
    op_msg(&m, 7, 0, "{\"ping\": 1, \"$db\": \"admin\"}");
    cr_assert_eq(parse(&m, &req, &e), SRV_PARSE_OK, "%s", e.message);
    cr_assert_str_eq(req.db, "admin");
    cr_assert_eq(req.request_id, 7);
    cr_assert_eq(req.opcode, SRV_OP_MSG);
    cr_assert_not(req.more_to_come);
    bson_iter_t it;
    cr_assert(bson_iter_init_find(&it, &req.cmd, "ping"));
    srv_request_cleanup(&req);
}

Test(srv_wire, document_sequences_become_arrays)
{
    msgbuf m;
    srv_request req;
    srv_perr e;
    const char *docs[] = {"{\"_id\": 1}", "{\"_id\": 2, \"a\": \"x\"}"};
    const char *upd[] = {"{\"q\": {}, \"u\": {\"$set\": {\"b\": 1}}}"};
    hdr(&m, 1, SRV_OP_MSG);
    put32(&m, 0);
    sequence(&m, "documents", docs, 2);
    body(&m, "{\"insert\": \"c\", \"$db\": \"test\"}");
    sequence(&m, "updates", upd, 1);
    finish(&m);
    cr_assert_eq(parse(&m, &req, &e), SRV_PARSE_OK, "%s", e.message);
    char *j = json_of(&req.cmd);
    cr_assert(strstr(j, "\"documents\" : [ { \"_id\" : 1 }, { \"_id\" : 2, \"a\" : \"x\" } ]"),
              "%s", j);
    cr_assert(strstr(j, "\"updates\" : [ { \"q\" : {  }"), "%s", j);
    cr_assert(strncmp(j, "{ \"insert\" : \"c\"", 16) == 0, "%s", j);
    bson_free(j);
    srv_request_cleanup(&req);
}

Test(srv_wire, bad_lengths_close)
{
    msgbuf m;
    srv_request req;
    srv_perr e;
    op_msg(&m, 1, 0, "{\"ping\": 1, \"$db\": \"admin\"}");
    set32(&m, 0, 12); /* shorter than the header */
    cr_assert_eq(parse(&m, &req, &e), SRV_PARSE_CLOSE);
    set32(&m, 0, SRV_MAX_MESSAGE + 1);
    cr_assert_eq(parse(&m, &req, &e), SRV_PARSE_CLOSE);
    cr_assert(strstr(e.message, "out of range"), "%s", e.message);
    set32(&m, 0, -5);
    cr_assert_eq(parse(&m, &req, &e), SRV_PARSE_CLOSE);
    set32(&m, 0, (int32_t)m.n + 1); /* says more than there is */
    cr_assert_eq(parse(&m, &req, &e), SRV_PARSE_CLOSE);
    srv_hdr h;
    set32(&m, 0, SRV_MAX_MESSAGE);
    cr_assert_eq(srv_hdr_read(m.b, SRV_MAX_MESSAGE, &h, &e), SRV_PARSE_OK);
    set32(&m, 0, SRV_MAX_MESSAGE + 1);
    cr_assert_eq(srv_hdr_read(m.b, SRV_MAX_MESSAGE, &h, &e), SRV_PARSE_CLOSE);
    /* a body whose own length runs past the section */
    op_msg(&m, 1, 0, "{\"ping\": 1, \"$db\": \"admin\"}");
    set32(&m, 21, 4000);
    cr_assert_eq(parse(&m, &req, &e), SRV_PARSE_REPLY);
    cr_assert_eq(e.code, MD_CODE_INVALID_BSON);
}

Test(srv_wire, bad_opcodes_close)
{
    msgbuf m;
    srv_request req;
    srv_perr e;
    int32_t ops[] = {SRV_OP_REPLY, SRV_OP_INSERT, SRV_OP_GET_MORE, 1234, -1};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        op_msg(&m, 1, 0, "{\"ping\": 1, \"$db\": \"admin\"}");
        set32(&m, 12, ops[i]);
        cr_assert_eq(parse(&m, &req, &e), SRV_PARSE_CLOSE, "opcode %d", ops[i]);
        cr_assert(strstr(e.message, "Unsupported opcode"), "%s", e.message);
    }
}

Test(srv_wire, flags)
{
    msgbuf m;
    srv_request req;
    srv_perr e;
    op_msg(&m, 1, 1u << 5, "{\"ping\": 1, \"$db\": \"admin\"}"); /* unknown required bit */
    cr_assert_eq(parse(&m, &req, &e), SRV_PARSE_CLOSE);
    cr_assert_eq(e.code, 223);
    op_msg(&m, 1, 1u << 20, "{\"ping\": 1, \"$db\": \"admin\"}"); /* optional: ignored */
    cr_assert_eq(parse(&m, &req, &e), SRV_PARSE_OK);
    srv_request_cleanup(&req);
    op_msg(&m, 1, SRV_MSG_MORE_TO_COME | SRV_MSG_EXHAUST, "{\"ping\": 1, \"$db\": \"a\"}");
    cr_assert_eq(parse(&m, &req, &e), SRV_PARSE_OK);
    cr_assert(req.more_to_come);
    srv_request_cleanup(&req);
}

Test(srv_wire, checksums)
{
    msgbuf m;
    srv_request req;
    srv_perr e;
    op_msg(&m, 1, 0, "{\"ping\": 1, \"$db\": \"admin\"}");
    add_checksum(&m);
    cr_assert_eq(parse(&m, &req, &e), SRV_PARSE_OK, "%s", e.message);
    /* the reply is checksummed too, and parses as a checksummed OP_MSG */
    bson_t r = BSON_INITIALIZER;
    BSON_APPEND_DOUBLE(&r, "ok", 1);
    BSON_APPEND_UTF8(&r, "$db", "admin");
    size_t n;
    uint8_t *out = srv_msg_reply(&req, 2, &r, false, &n);
    cr_assert_eq(out[16] & SRV_MSG_CHECKSUM, SRV_MSG_CHECKSUM);
    srv_request back;
    cr_assert_eq(srv_msg_parse(out, n, SRV_MAX_MESSAGE, &back, &e), SRV_PARSE_OK, "%s", e.message);
    srv_request_cleanup(&back);
    out[n - 1] ^= 1;
    cr_assert_eq(srv_msg_parse(out, n, SRV_MAX_MESSAGE, &back, &e), SRV_PARSE_CLOSE);
    free(out);
    bson_destroy(&r);
    srv_request_cleanup(&req);
    m.b[m.n - 1] ^= 0x40; /* the checksum itself */
    cr_assert_eq(parse(&m, &req, &e), SRV_PARSE_CLOSE);
    cr_assert(strstr(e.message, "checksum does not match"), "%s", e.message);
    m.b[m.n - 1] ^= 0x40;
    m.b[25] ^= 1; /* a byte of the body */
    cr_assert_eq(parse(&m, &req, &e), SRV_PARSE_CLOSE);
    /* a checksum flag with no room for one */
    hdr(&m, 1, SRV_OP_MSG);
    put32(&m, SRV_MSG_CHECKSUM);
    put32(&m, 0);
    finish(&m);
    cr_assert_eq(parse(&m, &req, &e), SRV_PARSE_CLOSE);
}

Test(srv_wire, malformed_sections_reply)
{
    msgbuf m;
    srv_request req;
    srv_perr e;
    const char *d[] = {"{\"_id\": 1}"};
    struct {
        int code;
        int kind;
    } want[8];
    int n = 0;
    /* two bodies */
    hdr(&m, 1, SRV_OP_MSG);
    put32(&m, 0);
    body(&m, "{\"ping\": 1, \"$db\": \"a\"}");
    body(&m, "{\"ping\": 1, \"$db\": \"a\"}");
    finish(&m);
    cr_assert_eq(parse(&m, &req, &e), SRV_PARSE_REPLY);
    cr_assert_eq(e.code, 40430);
    /* no body */
    hdr(&m, 1, SRV_OP_MSG);
    put32(&m, 0);
    sequence(&m, "documents", d, 1);
    finish(&m);
    cr_assert_eq(parse(&m, &req, &e), SRV_PARSE_REPLY);
    cr_assert_eq(e.code, 40587);
    /* unknown section kind */
    hdr(&m, 1, SRV_OP_MSG);
    put32(&m, 0);
    body(&m, "{\"ping\": 1, \"$db\": \"a\"}");
    m.b[m.n++] = 7;
    finish(&m);
    cr_assert_eq(parse(&m, &req, &e), SRV_PARSE_REPLY);
    cr_assert_eq(e.code, 40432);
    /* the same sequence twice */
    hdr(&m, 1, SRV_OP_MSG);
    put32(&m, 0);
    body(&m, "{\"insert\": \"c\", \"$db\": \"a\"}");
    sequence(&m, "documents", d, 1);
    sequence(&m, "documents", d, 1);
    finish(&m);
    cr_assert_eq(parse(&m, &req, &e), SRV_PARSE_REPLY);
    cr_assert_eq(e.code, 40431);
    /* a sequence and a body field of one name */
    hdr(&m, 1, SRV_OP_MSG);
    put32(&m, 0);
    body(&m, "{\"insert\": \"c\", \"documents\": [], \"$db\": \"a\"}");
    sequence(&m, "documents", d, 1);
    finish(&m);
    cr_assert_eq(parse(&m, &req, &e), SRV_PARSE_REPLY);
    cr_assert_eq(e.code, 40433);
    /* no $db */
    op_msg(&m, 1, 0, "{\"ping\": 1}");
    cr_assert_eq(parse(&m, &req, &e), SRV_PARSE_REPLY);
    cr_assert_eq(e.code, 40571);
    /* three sequences: connection-fatal, as MongoDB */
    hdr(&m, 1, SRV_OP_MSG);
    put32(&m, 0);
    body(&m, "{\"insert\": \"c\", \"$db\": \"a\"}");
    sequence(&m, "a", d, 1);
    sequence(&m, "b", d, 1);
    sequence(&m, "c", d, 1);
    finish(&m);
    cr_assert_eq(parse(&m, &req, &e), SRV_PARSE_CLOSE);
    cr_assert_eq(e.code, 233);
    /* a document inside a sequence that is not BSON */
    hdr(&m, 1, SRV_OP_MSG);
    put32(&m, 0);
    body(&m, "{\"insert\": \"c\", \"$db\": \"a\"}");
    sequence(&m, "documents", d, 1);
    m.b[m.n - 1] = 9; /* the document's terminating zero */
    finish(&m);
    cr_assert_eq(parse(&m, &req, &e), SRV_PARSE_REPLY);
    cr_assert_eq(e.code, MD_CODE_INVALID_BSON);
    (void)want;
    (void)n;
}

static void op_query(msgbuf *m, int32_t id, const char *ns, const char *json)
{
    bson_error_t be;
    bson_t *d = bson_new_from_json((const uint8_t *)json, -1, &be);
    hdr(m, id, SRV_OP_QUERY);
    put32(m, 0);
    put(m, ns, strlen(ns) + 1);
    put32(m, 0);
    put32(m, -1);
    put(m, bson_get_data(d), d->len);
    bson_destroy(d);
    finish(m);
}

Test(srv_wire, op_query_on_cmd_only)
{
    msgbuf m;
    srv_request req;
    srv_perr e;
    op_query(&m, 3, "admin.$cmd", "{\"isMaster\": 1, \"client\": {}}");
    cr_assert_eq(parse(&m, &req, &e), SRV_PARSE_OK, "%s", e.message);
    cr_assert_str_eq(req.db, "admin");
    cr_assert_eq(req.opcode, SRV_OP_QUERY);
    srv_request_cleanup(&req);
    op_query(&m, 3, "admin.$cmd", "{\"$query\": {\"isMaster\": 1}, \"$readPreference\": {}}");
    cr_assert_eq(parse(&m, &req, &e), SRV_PARSE_OK);
    bson_iter_t it;
    cr_assert(bson_iter_init(&it, &req.cmd) && bson_iter_next(&it));
    cr_assert_str_eq(bson_iter_key(&it), "isMaster");
    srv_request_cleanup(&req);
    op_query(&m, 3, "test.c", "{\"x\": 1}");
    cr_assert_eq(parse(&m, &req, &e), SRV_PARSE_REPLY);
    cr_assert_eq(e.code, 352);
    /* the reply is OP_REPLY, responseTo the request */
    op_query(&m, 9, "admin.$cmd", "{\"ping\": 1}");
    cr_assert_eq(parse(&m, &req, &e), SRV_PARSE_OK);
    bson_t r = BSON_INITIALIZER;
    BSON_APPEND_DOUBLE(&r, "ok", 1);
    size_t n;
    uint8_t *out = srv_msg_reply(&req, 77, &r, false, &n);
    cr_assert_eq(n, 16 + 20 + r.len);
    cr_assert_eq(out[12], 1);  /* OP_REPLY */
    cr_assert_eq(out[8], 9);   /* responseTo */
    cr_assert_eq(out[32], 1);  /* numberReturned */
    free(out);
    bson_destroy(&r);
    srv_request_cleanup(&req);
}

Test(srv_wire, compressed_each_compressor)
{
    int ids[] = {SRV_COMP_NOOP, SRV_COMP_SNAPPY, SRV_COMP_ZLIB, SRV_COMP_ZSTD};
    for (size_t k = 0; k < 4; k++) {
        const srv_compressor *c = srv_compressor_by_id(ids[k]);
        cr_assert(c);
        msgbuf plain, m;
        srv_request req;
        srv_perr e;
        op_msg(&plain, 5, 0, "{\"find\": \"c\", \"filter\": {\"a\": \"aaaaaaaaaaaaaaaaaaaaaaaa\"}, "
                             "\"$db\": \"shop\"}");
        hdr(&m, 5, SRV_OP_COMPRESSED);
        put32(&m, SRV_OP_MSG);
        put32(&m, (int32_t)(plain.n - 16));
        m.b[m.n++] = (uint8_t)c->id;
        long z = c->compress(plain.b + 16, plain.n - 16, m.b + m.n, sizeof m.b - m.n);
        cr_assert_gt(z, 0);
        m.n += (size_t)z;
        finish(&m);
        cr_assert_eq(parse(&m, &req, &e), SRV_PARSE_OK, "%s: %s", c->name, e.message);
        cr_assert_str_eq(req.db, "shop");
        cr_assert_eq(req.compressor, c->id);
        /* the reply goes back compressed with the same compressor */
        bson_t r = BSON_INITIALIZER;
        BSON_APPEND_UTF8(&r, "pad", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb");
        size_t n;
        uint8_t *out = srv_msg_reply(&req, 1, &r, false, &n);
        cr_assert_eq(out[12], SRV_OP_COMPRESSED & 0xff);
        cr_assert_eq(out[24], c->id);
        free(out);
        bson_destroy(&r);
        srv_request_cleanup(&req);
        /* a size that does not match what it decompresses to */
        set32(&m, 20, (int32_t)(plain.n - 16 + 3));
        cr_assert_eq(parse(&m, &req, &e), SRV_PARSE_CLOSE, "%s", c->name);
        set32(&m, 20, SRV_MAX_MESSAGE);
        cr_assert_eq(parse(&m, &req, &e), SRV_PARSE_CLOSE, "%s", c->name);
    }
    msgbuf m;
    srv_request req;
    srv_perr e;
    hdr(&m, 5, SRV_OP_COMPRESSED);
    put32(&m, SRV_OP_MSG);
    put32(&m, 10);
    m.b[m.n++] = 9; /* no such compressor */
    put(&m, "0123456789", 10);
    finish(&m);
    cr_assert_eq(parse(&m, &req, &e), SRV_PARSE_CLOSE);
    cr_assert(strstr(e.message, "Unknown compressor"), "%s", e.message);
}

/* ---- the server over sockets ------------------------------------------------------------ */

static void live_start(live *l, int max_conns, int idle_secs)
{
    srv_config cfg = {.bind = "127.0.0.1", .port = 0, .engine = "ephemeralForTest",
                      .compressors = "snappy,zstd,zlib", .max_conns = max_conns,
                      .idle_secs = idle_secs};
    t_live_dir(l, "md_srv");
    t_live_run(l, &cfg);
}

static void send_msg(int fd, const msgbuf *m)
{
    cr_assert_eq(send(fd, m->b, m->n, MSG_NOSIGNAL), (ssize_t)m->n);
}

/* Read one reply: its body into *out (OP_MSG or OP_REPLY); false when the
 * server closed the connection instead. */
static bool recv_reply(int fd, int32_t *response_to, bson_t *out)
{
    uint8_t h[16];
    size_t got = 0;
    while (got < 16) {
        ssize_t r = recv(fd, h + got, 16 - got, 0);
        if (r <= 0)
            return false;
        got += (size_t)r;
    }
    int32_t len = (int32_t)(h[0] | h[1] << 8 | h[2] << 16 | (uint32_t)h[3] << 24);
    cr_assert(len >= 16 && len < (1 << 26));
    uint8_t *b = malloc((size_t)len);
    memcpy(b, h, 16);
    while (got < (size_t)len) {
        ssize_t r = recv(fd, b + got, (size_t)len - got, 0);
        cr_assert_gt(r, 0);
        got += (size_t)r;
    }
    *response_to = (int32_t)(b[8] | b[9] << 8 | b[10] << 16 | (uint32_t)b[11] << 24);
    size_t off = b[12] == SRV_OP_REPLY ? 36 : 21;
    bson_t view;
    cr_assert(bson_init_static(&view, b + off, (size_t)len - off));
    bson_copy_to(&view, out);
    free(b);
    return true;
}

/* Send a command (OP_MSG) and return its reply. */
static void roundtrip(int fd, int32_t id, const char *json, bson_t *reply)
{
    msgbuf m;
    int32_t to;
    op_msg(&m, id, 0, json);
    send_msg(fd, &m);
    cr_assert(recv_reply(fd, &to, reply), "no reply to %s", json);
    cr_assert_eq(to, id);
}

static double num(const bson_t *b, const char *path)
{
    bson_iter_t it, f;
    if (bson_iter_init(&it, b) && bson_iter_find_descendant(&it, path, &f) &&
        BSON_ITER_HOLDS_NUMBER(&f))
        return bson_iter_as_double(&f);
    return -1;
}

static bool log_has(int fd, const char *what)
{
    bson_t r;
    roundtrip(fd, 99, "{\"getLog\": \"global\", \"$db\": \"admin\"}", &r);
    char *j = json_of(&r);
    bool yes = strstr(j, what) != NULL;
    bson_free(j);
    bson_destroy(&r);
    return yes;
}

Test(srv_live, bad_messages_close_only_their_connection)
{
    live l;
    live_start(&l, 100, 0);
    int good = t_dial(&l);
    bson_t r;
    roundtrip(good, 1, "{\"hello\": 1, \"$db\": \"admin\"}", &r);
    cr_assert_eq(num(&r, "maxWireVersion"), SRV_MAX_WIRE);
    cr_assert_eq(num(&r, "maxMessageSizeBytes"), SRV_MAX_MESSAGE);
    cr_assert_eq(num(&r, "ok"), 1);
    bson_destroy(&r);

    msgbuf m;
    int32_t to;
    struct {
        const char *what;
        void (*mangle)(msgbuf *);
    } cases[4];
    (void)cases;
    /* oversize: the header alone is refused */
    int fd = t_dial(&l);
    op_msg(&m, 2, 0, "{\"ping\": 1, \"$db\": \"admin\"}");
    set32(&m, 0, SRV_MAX_MESSAGE + 1);
    send_msg(fd, &m);
    cr_assert_not(recv_reply(fd, &to, &r));
    close(fd);
    /* a bad opcode */
    fd = t_dial(&l);
    op_msg(&m, 3, 0, "{\"ping\": 1, \"$db\": \"admin\"}");
    set32(&m, 12, 2002);
    send_msg(fd, &m);
    cr_assert_not(recv_reply(fd, &to, &r));
    close(fd);
    /* a bad checksum */
    fd = t_dial(&l);
    op_msg(&m, 4, 0, "{\"ping\": 1, \"$db\": \"admin\"}");
    add_checksum(&m);
    m.b[m.n - 2] ^= 1;
    send_msg(fd, &m);
    cr_assert_not(recv_reply(fd, &to, &r));
    close(fd);
    /* a malformed section: an error reply, and the connection goes on */
    fd = t_dial(&l);
    op_msg(&m, 5, 0, "{\"ping\": 1}");
    send_msg(fd, &m);
    cr_assert(recv_reply(fd, &to, &r));
    cr_assert_eq(num(&r, "code"), 40571);
    cr_assert_eq(num(&r, "ok"), 0);
    bson_iter_t it;
    cr_assert(bson_iter_init_find(&it, &r, "codeName"));
    cr_assert_str_eq(bson_iter_utf8(&it, NULL), "Location40571");
    bson_destroy(&r);
    roundtrip(fd, 6, "{\"ping\": 1, \"$db\": \"admin\"}", &r);
    cr_assert_eq(num(&r, "ok"), 1);
    bson_destroy(&r);
    close(fd);
    /* the first connection never noticed */
    roundtrip(good, 7, "{\"ping\": 1, \"$db\": \"admin\"}", &r);
    cr_assert_eq(num(&r, "ok"), 1);
    bson_destroy(&r);
    cr_assert(log_has(good, "message length out of range"));
    cr_assert(log_has(good, "Unsupported opcode 2002"));
    cr_assert(log_has(good, "checksum does not match"));
    cr_assert(log_has(good, "\\\"id\\\":22988"));
    close(good);
    t_live_stop(&l);
}

Test(srv_live, more_to_come_gets_no_reply)
{
    live l;
    live_start(&l, 100, 0);
    int fd = t_dial(&l);
    msgbuf m;
    bson_t r;
    op_msg(&m, 10, SRV_MSG_MORE_TO_COME,
           "{\"insert\": \"c\", \"documents\": [{\"_id\": 1}], \"$db\": \"t\"}");
    send_msg(fd, &m);
    /* the next reply answers the next request, and sees the write */
    roundtrip(fd, 11, "{\"count\": \"c\", \"$db\": \"t\"}", &r);
    cr_assert_eq(num(&r, "n"), 1);
    bson_destroy(&r);
    close(fd);
    t_live_stop(&l);
}

Test(srv_live, cursors_live_across_requests)
{
    live l;
    live_start(&l, 100, 0);
    int fd = t_dial(&l);
    bson_t r;
    msgbuf m;
    const char *docs[] = {"{\"_id\": 1}", "{\"_id\": 2}", "{\"_id\": 3}", "{\"_id\": 4}",
                          "{\"_id\": 5}"};
    int32_t to;
    hdr(&m, 20, SRV_OP_MSG);
    put32(&m, 0);
    body(&m, "{\"insert\": \"c\", \"$db\": \"shop\"}");
    sequence(&m, "documents", docs, 5);
    finish(&m);
    send_msg(fd, &m);
    cr_assert(recv_reply(fd, &to, &r));
    cr_assert_eq(num(&r, "n"), 5);
    bson_destroy(&r);
    roundtrip(fd, 21, "{\"find\": \"c\", \"batchSize\": 2, \"$db\": \"shop\"}", &r);
    bson_iter_t it, id;
    cr_assert(bson_iter_init(&it, &r) && bson_iter_find_descendant(&it, "cursor.id", &id));
    int64_t cid = bson_iter_int64(&id);
    cr_assert_neq(cid, 0);
    bson_destroy(&r);
    char cmd[160];
    snprintf(cmd, sizeof cmd,
             "{\"getMore\": {\"$numberLong\": \"%lld\"}, \"collection\": \"c\", \"$db\": \"shop\"}",
             (long long)cid);
    roundtrip(fd, 22, cmd, &r);
    char *j = json_of(&r);
    cr_assert(strstr(j, "\"nextBatch\" : [ { \"_id\" : 3 }, { \"_id\" : 4 }, { \"_id\" : 5 } ]"),
              "%s", j);
    bson_free(j);
    bson_destroy(&r);
    /* databases are directories, listed when they hold a collection */
    roundtrip(fd, 23, "{\"listDatabases\": 1, \"nameOnly\": true, \"$db\": \"admin\"}", &r);
    j = json_of(&r);
    cr_assert(strstr(j, "\"name\" : \"shop\""), "%s", j);
    bson_free(j);
    bson_destroy(&r);
    roundtrip(fd, 24, "{\"dropDatabase\": 1, \"$db\": \"shop\"}", &r);
    cr_assert_eq(num(&r, "ok"), 1);
    bson_destroy(&r);
    roundtrip(fd, 25, "{\"listDatabases\": 1, \"$db\": \"admin\"}", &r);
    j = json_of(&r);
    cr_assert_not(strstr(j, "shop"), "%s", j);
    bson_free(j);
    bson_destroy(&r);
    roundtrip(fd, 26, "{\"listDatabases\": 1, \"$db\": \"shop\"}", &r);
    cr_assert_eq(num(&r, "code"), 13);
    bson_destroy(&r);
    roundtrip(fd, 27, "{\"find\": \"c\", \"$db\": \"a.b\"}", &r);
    cr_assert_eq(num(&r, "code"), MD_CODE_INVALID_NAMESPACE);
    bson_destroy(&r);
    roundtrip(fd, 28, "{\"insert\": \"c\", \"documents\": [{}], \"txnNumber\": 1, "
                      "\"$db\": \"shop\"}", &r);
    cr_assert_eq(num(&r, "code"), 20);
    bson_destroy(&r);
    roundtrip(fd, 29, "{\"replSetGetStatus\": 1, \"$db\": \"admin\"}", &r);
    cr_assert_eq(num(&r, "code"), 76);
    bson_destroy(&r);
    close(fd);
    t_live_stop(&l);
}

Test(srv_live, max_incoming_connections)
{
    live l;
    live_start(&l, 2, 0);
    int a = t_dial(&l), b = t_dial(&l);
    bson_t r;
    roundtrip(a, 1, "{\"ping\": 1, \"$db\": \"admin\"}", &r);
    bson_destroy(&r);
    roundtrip(b, 1, "{\"ping\": 1, \"$db\": \"admin\"}", &r);
    bson_destroy(&r);
    int c = t_dial(&l); /* accepted by the kernel, closed by the server */
    msgbuf m;
    int32_t to;
    op_msg(&m, 2, 0, "{\"ping\": 1, \"$db\": \"admin\"}");
    send(c, m.b, m.n, MSG_NOSIGNAL);
    cr_assert_not(recv_reply(c, &to, &r));
    close(c);
    cr_assert(log_has(a, "too many open connections"));
    close(a);
    close(b);
    t_live_stop(&l);
}

Test(srv_live, idle_connection_is_closed)
{
    live l;
    live_start(&l, 10, 1);
    int fd = t_dial(&l);
    bson_t r;
    roundtrip(fd, 1, "{\"ping\": 1, \"$db\": \"admin\"}", &r);
    bson_destroy(&r);
    int32_t to;
    /* nothing sent: the server closes it after a second */
    cr_assert_not(recv_reply(fd, &to, &r));
    close(fd);
    fd = t_dial(&l);
    cr_assert(log_has(fd, "idle timeout"));
    close(fd);
    t_live_stop(&l);
}

Test(srv_live, five_hundred_connections)
{
    enum { N = 500 };
    live l;
    live_start(&l, 1000, 0);
    static int fds[N];
    msgbuf m;
    bson_t r;
    int32_t to;
    for (int i = 0; i < N; i++)
        fds[i] = t_dial(&l);
    /* every connection has a request in flight before any reply is read */
    for (int i = 0; i < N; i++) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "{\"insert\": \"c\", \"documents\": [{\"_id\": %d}], "
                                  "\"$db\": \"many\"}", i);
        op_msg(&m, i + 1, 0, cmd);
        send_msg(fds[i], &m);
    }
    for (int i = 0; i < N; i++) {
        cr_assert(recv_reply(fds[i], &to, &r), "connection %d", i);
        cr_assert_eq(to, i + 1);
        cr_assert_eq(num(&r, "n"), 1);
        bson_destroy(&r);
    }
    roundtrip(fds[0], 1000, "{\"serverStatus\": 1, \"$db\": \"admin\"}", &r);
    cr_assert_eq(num(&r, "connections.current"), N);
    bson_destroy(&r);
    roundtrip(fds[N - 1], 1001, "{\"count\": \"c\", \"$db\": \"many\"}", &r);
    cr_assert_eq(num(&r, "n"), N);
    bson_destroy(&r);
    for (int i = 0; i < N; i++)
        close(fds[i]);
    t_live_stop(&l);
}

static const char *str(const bson_t *b, const char *path)
{
    bson_iter_t it, f;
    if (bson_iter_init(&it, b) && bson_iter_find_descendant(&it, path, &f) &&
        BSON_ITER_HOLDS_UTF8(&f))
        return bson_iter_utf8(&f, NULL);
    return "";
}

/* What a standalone mongod answers for replication, transactions and
 * sharding, code, codeName and message, as the README's Server section
 * lists them. */
Test(srv_live, standalone_refusals)
{
    static const struct {
        const char *cmd;
        int code;
        const char *code_name, *msg;
    } cases[] = {
        {"{\"replSetGetStatus\": 1, \"$db\": \"admin\"}", 76, "NoReplicationEnabled",
         "not running with --replSet"},
        {"{\"replSetGetConfig\": 1, \"$db\": \"admin\"}", 76, "NoReplicationEnabled",
         "not running with --replSet"},
        {"{\"replSetInitiate\": {}, \"$db\": \"admin\"}", 76, "NoReplicationEnabled",
         "This node was not started with the replSet option"},
        {"{\"insert\": \"c\", \"documents\": [{}], \"lsid\": {\"id\": 1}, \"txnNumber\": "
         "{\"$numberLong\": \"1\"}, \"$db\": \"t\"}",
         20, "IllegalOperation",
         "Transaction numbers are only allowed on a replica set member or mongos"},
        {"{\"find\": \"c\", \"lsid\": {\"id\": 1}, \"txnNumber\": {\"$numberLong\": \"1\"}, "
         "\"startTransaction\": true, \"autocommit\": false, \"$db\": \"t\"}",
         20, "IllegalOperation",
         "Transaction numbers are only allowed on a replica set member or mongos"},
        {"{\"commitTransaction\": 1, \"$db\": \"admin\"}", 20, "IllegalOperation",
         "Transaction numbers are only allowed on a replica set member or mongos"},
        {"{\"abortTransaction\": 1, \"$db\": \"admin\"}", 20, "IllegalOperation",
         "Transaction numbers are only allowed on a replica set member or mongos"},
        {"{\"shardCollection\": \"t.c\", \"key\": {\"_id\": 1}, \"$db\": \"admin\"}", 59,
         "CommandNotFound", "no such command: 'shardCollection'"},
        {"{\"enableSharding\": \"t\", \"$db\": \"admin\"}", 59, "CommandNotFound",
         "no such command: 'enableSharding'"},
        {"{\"addShard\": \"h:1\", \"$db\": \"admin\"}", 59, "CommandNotFound",
         "no such command: 'addShard'"},
        {"{\"isdbgrid\": 1, \"$db\": \"admin\"}", 59, "CommandNotFound",
         "no such command: 'isdbgrid'"},
        {"{\"find\": \"c\", \"readConcern\": {\"level\": \"linearizable\"}, \"$db\": \"t\"}",
         123, "NotAReplicaSet", "node needs to be a replica set member to use read concern"},
        {"{\"find\": \"c\", \"readConcern\": {\"level\": \"snapshot\"}, \"$db\": \"t\"}", 123,
         "NotAReplicaSet", "node needs to be a replica set member to use read concern"},
        {"{\"insert\": \"c\", \"documents\": [{}], \"writeConcern\": {\"w\": 2}, \"$db\": \"t\"}",
         MD_CODE_BAD_VALUE, "BadValue", "cannot use 'w' > 1 on a standalone"},
    };
    live l;
    live_start(&l, 10, 0);
    int fd = t_dial(&l);
    bson_t r;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        roundtrip(fd, (int32_t)i + 1, cases[i].cmd, &r);
        cr_assert_eq(num(&r, "ok"), 0, "%s", cases[i].cmd);
        cr_assert_eq(num(&r, "code"), cases[i].code, "%s: code %g", cases[i].cmd,
                     num(&r, "code"));
        cr_assert_str_eq(str(&r, "codeName"), cases[i].code_name, "%s", cases[i].cmd);
        cr_assert(strstr(str(&r, "errmsg"), cases[i].msg), "%s: %s", cases[i].cmd,
                  str(&r, "errmsg"));
        bson_destroy(&r);
    }
    /* what does work: majority and local reads and writes, startSession, and
     * nothing was written by the refused commands */
    roundtrip(fd, 100, "{\"insert\": \"c\", \"documents\": [{\"_id\": 1}], \"writeConcern\": "
                       "{\"w\": \"majority\"}, \"$db\": \"t\"}", &r);
    cr_assert_eq(num(&r, "n"), 1);
    bson_destroy(&r);
    roundtrip(fd, 101, "{\"count\": \"c\", \"readConcern\": {\"level\": \"majority\"}, "
                       "\"$db\": \"t\"}", &r);
    cr_assert_eq(num(&r, "n"), 1);
    bson_destroy(&r);
    roundtrip(fd, 102, "{\"startSession\": 1, \"$db\": \"admin\"}", &r);
    bson_iter_t it, id;
    cr_assert(bson_iter_init(&it, &r) && bson_iter_find_descendant(&it, "id.id", &id));
    bson_subtype_t sub;
    uint32_t len;
    const uint8_t *bytes;
    cr_assert(BSON_ITER_HOLDS_BINARY(&id));
    bson_iter_binary(&id, &sub, &len, &bytes);
    cr_assert_eq(sub, BSON_SUBTYPE_UUID);
    cr_assert_eq(len, 16);
    cr_assert_eq(num(&r, "timeoutMinutes"), SRV_SESSION_MINUTES);
    bson_destroy(&r);
    close(fd);
    t_live_stop(&l);
}

/* The commands a driver's or mongosh's startup sends about the host and the
 * log: hostInfo, getLog and getCmdLineOpts. */
Test(srv_live, host_and_log_commands)
{
    live l;
    live_start(&l, 10, 0);
    int fd = t_dial(&l);
    bson_t r;
    roundtrip(fd, 1, "{\"hostInfo\": 1, \"$db\": \"admin\"}", &r);
    cr_assert_eq(num(&r, "ok"), 1);
    cr_assert_gt(num(&r, "system.memSizeMB"), 0);
    cr_assert_gt(num(&r, "system.numCores"), 0);
    cr_assert_str_neq(str(&r, "system.hostname"), "");
    cr_assert_str_neq(str(&r, "os.type"), "");
    bson_destroy(&r);
    roundtrip(fd, 2, "{\"getLog\": \"*\", \"$db\": \"admin\"}", &r);
    cr_assert_str_eq(str(&r, "names.0"), "global");
    cr_assert_str_eq(str(&r, "names.1"), "startupWarnings");
    bson_destroy(&r);
    /* the connection this test opened is in the global log, as a JSON line */
    roundtrip(fd, 3, "{\"getLog\": \"global\", \"$db\": \"admin\"}", &r);
    cr_assert_eq(num(&r, "ok"), 1);
    cr_assert_gt(num(&r, "totalLinesWritten"), 0);
    char *j = json_of(&r);
    cr_assert(strstr(j, "Connection accepted"), "%s", j);
    bson_free(j);
    bson_destroy(&r);
    roundtrip(fd, 4, "{\"getLog\": \"nosuch\", \"$db\": \"admin\"}", &r);
    cr_assert_eq(num(&r, "code"), 96);
    bson_destroy(&r);
    roundtrip(fd, 5, "{\"getLog\": 1, \"$db\": \"admin\"}", &r);
    cr_assert_eq(num(&r, "code"), MD_CODE_TYPE_MISMATCH);
    bson_destroy(&r);
    roundtrip(fd, 6, "{\"getCmdLineOpts\": 1, \"$db\": \"admin\"}", &r);
    cr_assert_eq(num(&r, "parsed.net.maxIncomingConnections"), 10);
    cr_assert_str_eq(str(&r, "parsed.net.bindIp"), "127.0.0.1");
    bson_destroy(&r);
    close(fd);
    t_live_stop(&l);
}
