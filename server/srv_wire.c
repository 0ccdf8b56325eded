/*
 * srv_wire.c -- MongoDB's wire protocol framing, as pure functions over byte
 * buffers (no sockets here, so the tests and the fuzz harness call them
 * directly).
 *
 * OP_MSG (opcode 2013), after the 16-byte header (srv.h):
 *
 *   OFFSET SIZE FIELD
 *       16    4 flagBits        bit 0 checksumPresent, bit 1 moreToCome,
 *                               bit 16 exhaustAllowed; bits 2-15 must be 0
 *       20    ? sections        kind 0: one BSON document (the body)
 *                               kind 1: int32 size, cstring identifier,
 *                                       BSON documents up to size
 *     len-4   4 checksum        CRC-32C of bytes 0..len-4 (when bit 0)
 *
 *   e.g. {ping: 1, $db: "admin"}, no checksum:
 *     2d000000 01000000 00000000 dd070000   len 45, id 1, opcode 2013
 *     00000000 00 18000000 10 70696e6700 01000000
 *                  02 2464620006000000 61646d696e00 00
 *
 * A document sequence becomes an array field of the command, so
 * {insert: "c", $db: "test"} + kind 1 "documents" [d1, d2] is run as
 * {insert: "c", $db: "test", documents: [d1, d2]} -- what md_db_command takes.
 *
 * OP_QUERY (2004) is accepted only on "<db>.$cmd" (the handshake of older
 * drivers); its reply is OP_REPLY (1).  OP_COMPRESSED (2012) wraps either:
 * originalOpcode int32, uncompressedSize int32 (without the header),
 * compressorId uint8, then the compressed bytes.
 *
 * A reply to a checksummed OP_MSG carries a checksum too, as mongod's do (the
 * checksum is inside the compression when both are used).
 *
 * What happens to a bad message follows MongoDB 5.0: a length out of range,
 * an unknown opcode, unknown required flag bits (IllegalOpMsgFlag), more than
 * two document sequences (TooManyDocumentSequences), a bad checksum or a
 * message that cannot be decompressed closes the connection (MongoDB's
 * ConnectionFatalMessageParseError class; the checksum is in it here since
 * a stream whose bytes fail their checksum cannot be trusted for the next
 * message either).  A malformed section or body gets an error reply with
 * MongoDB's code (40430, 40431, 40432, 40433, 40571, 40587, 22) and the
 * connection goes on.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv.h"

/* ---- CRC-32C (Castagnoli, reflected 0x82F63B78) ----------------------------------- */

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[i] = c;
    }
}

uint32_t srv_crc32c(uint32_t crc, const void *data, size_t len)
{
    const uint8_t *p = data;
    pthread_once(&crc_once, crc_init);
    crc = ~crc;
    while (len--)
        crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

/* ---- compression counters (serverStatus' network.compression) ---------------------- */

/* [id][0..3]: compressor bytesIn, bytesOut, decompressor bytesIn, bytesOut */
static int64_t comp_bytes[4][4];

static void comp_count(int id, int which, size_t in, size_t out)
{
    if (id < 0 || id > 3)
        return;
    __atomic_add_fetch(&comp_bytes[id][which], (int64_t)in, __ATOMIC_RELAXED);
    __atomic_add_fetch(&comp_bytes[id][which + 1], (int64_t)out, __ATOMIC_RELAXED);
}

void srv_compression_stats(bson_t *out)
{
    static const char *const names[] = {"snappy", "zstd", "zlib"};
    for (int i = 0; i < 3; i++) {
        const srv_compressor *c = srv_compressor_by_name(names[i]);
        bson_t one, part;
        BSON_APPEND_DOCUMENT_BEGIN(out, names[i], &one);
        for (int k = 0; k < 2; k++) {
            BSON_APPEND_DOCUMENT_BEGIN(&one, k ? "decompressor" : "compressor", &part);
            BSON_APPEND_INT64(&part, "bytesIn",
                              __atomic_load_n(&comp_bytes[c->id][2 * k], __ATOMIC_RELAXED));
            BSON_APPEND_INT64(&part, "bytesOut",
                              __atomic_load_n(&comp_bytes[c->id][2 * k + 1], __ATOMIC_RELAXED));
            bson_append_document_end(&one, &part);
        }
        bson_append_document_end(out, &one);
    }
}

/* ---- little-endian helpers ----------------------------------------------------------- */

static int32_t rd32(const uint8_t *p)
{
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                     (uint32_t)p[3] << 24);
}

static void wr32(uint8_t *p, int32_t v)
{
    uint32_t u = (uint32_t)v;
    p[0] = (uint8_t)u;
    p[1] = (uint8_t)(u >> 8);
    p[2] = (uint8_t)(u >> 16);
    p[3] = (uint8_t)(u >> 24);
}

static int perr(srv_perr *e, int kind, int code, const char *fmt, const char *arg)
{
    if (e) {
        e->code = code;
        snprintf(e->message, sizeof e->message, fmt, arg ? arg : "");
    }
    return kind;
}

/* ---- header ------------------------------------------------------------------------------ */

int srv_hdr_read(const uint8_t *b, int32_t max, srv_hdr *h, srv_perr *e)
{
    char why[96];
    h->len = rd32(b);
    h->request_id = rd32(b + 4);
    h->response_to = rd32(b + 8);
    h->opcode = rd32(b + 12);
    if (h->len < 16 || h->len > max) {
        snprintf(why, sizeof why, "%d (must be 16..%d)", h->len, max);
        return perr(e, SRV_PARSE_CLOSE, 0, "message length out of range: %s", why);
    }
    return SRV_PARSE_OK;
}

/* ---- BSON in a buffer ------------------------------------------------------------------ */

/* A BSON document at p within n bytes: its length in *dlen, checked. */
static bool doc_at(const uint8_t *p, size_t n, bson_t *doc, size_t *dlen)
{
    if (n < 5)
        return false;
    int32_t l = rd32(p);
    if (l < 5 || (size_t)l > n || l > SRV_MAX_BSON + 16 * 1024)
        return false;
    if (!bson_init_static(doc, p, (size_t)l))
        return false;
    *dlen = (size_t)l;
    return true;
}

static bool doc_valid(const bson_t *doc)
{
    size_t off;
    return bson_validate(doc, BSON_VALIDATE_NONE, &off);
}

/* ---- OP_MSG --------------------------------------------------------------------------- */

typedef struct seq {
    const char *name;
    const uint8_t *docs;
    size_t n;
} seq;

/* Fold the body and the sequences into req->cmd; read $db. */
static int msg_build(srv_request *req, const bson_t *body, const seq *seqs, int nseq,
                     srv_perr *e)
{
    bson_iter_t it;
    for (int i = 0; i < nseq; i++)
        if (bson_iter_init_find(&it, body, seqs[i].name))
            return perr(e, SRV_PARSE_REPLY, 40433,
                        "Duplicate field between body and document sequence %s", seqs[i].name);
    if (!bson_iter_init_find(&it, body, "$db"))
        return perr(e, SRV_PARSE_REPLY, 40571, "OP_MSG requests require a $db argument%s", NULL);
    if (!BSON_ITER_HOLDS_UTF8(&it))
        return perr(e, SRV_PARSE_REPLY, MD_CODE_TYPE_MISMATCH,
                    "BSON field '$db' is the wrong type, expected type 'string'%s", NULL);
    uint32_t dl;
    const char *db = bson_iter_utf8(&it, &dl);
    if (dl > SRV_DB_NAME_MAX || strlen(db) != dl)
        return perr(e, SRV_PARSE_REPLY, MD_CODE_INVALID_NAMESPACE, "Invalid database name: '%s'",
                    db);
    memcpy(req->db, db, dl + 1);
    bson_init(&req->cmd);
    if (!bson_concat(&req->cmd, body))
        goto too_big;
    for (int i = 0; i < nseq; i++) {
        bson_t arr;
        char key[16];
        const char *k;
        size_t off = 0, idx = 0;
        if (!bson_append_array_begin(&req->cmd, seqs[i].name, -1, &arr))
            goto too_big;
        while (off < seqs[i].n) {
            bson_t d;
            size_t dlen;
            doc_at(seqs[i].docs + off, seqs[i].n - off, &d, &dlen); /* checked in parse */
            bson_uint32_to_string((uint32_t)idx++, &k, key, sizeof key);
            if (!bson_append_document(&arr, k, -1, &d))
                goto too_big;
            off += dlen;
        }
        if (!bson_append_array_end(&req->cmd, &arr))
            goto too_big;
    }
    return SRV_PARSE_OK;
too_big:
    bson_destroy(&req->cmd);
    return perr(e, SRV_PARSE_REPLY, MD_CODE_BSON_OBJECT_TOO_LARGE,
                "command with its document sequences is too large%s", NULL);
}

static int msg_parse(const uint8_t *m, size_t len, srv_request *req, srv_perr *e)
{
    char tmp[64];
    if (len < 21)
        return perr(e, SRV_PARSE_CLOSE, 0, "OP_MSG too short for flags and a section%s", NULL);
    uint32_t flags = (uint32_t)rd32(m + 16);
    req->flags = flags;
    if (flags & SRV_MSG_REQUIRED_MASK & ~(SRV_MSG_CHECKSUM | SRV_MSG_MORE_TO_COME)) {
        snprintf(tmp, sizeof tmp, "0x%08x", flags);
        return perr(e, SRV_PARSE_CLOSE, 223, "Message contains illegal flags value: %s", tmp);
    }
    size_t end = len;
    if (flags & SRV_MSG_CHECKSUM) {
        if (len < 16 + 4 + 1 + 4)
            return perr(e, SRV_PARSE_CLOSE, 51251,
                        "Invalid message size for an OpMsg containing a checksum%s", NULL);
        end = len - 4;
        if ((uint32_t)rd32(m + end) != srv_crc32c(0, m, end))
            return perr(e, SRV_PARSE_CLOSE, 0, "OP_MSG checksum does not match contents%s",
                        NULL);
    }
    req->more_to_come = (flags & SRV_MSG_MORE_TO_COME) != 0;
    bson_t body;
    bool have_body = false;
    seq seqs[2];
    int nseq = 0;
    size_t off = 20;
    while (off < end) {
        uint8_t kind = m[off++];
        size_t dlen;
        if (kind == 0) {
            if (have_body)
                return perr(e, SRV_PARSE_REPLY, 40430, "Multiple body sections in message%s",
                            NULL);
            if (!doc_at(m + off, end - off, &body, &dlen) || !doc_valid(&body))
                return perr(e, SRV_PARSE_REPLY, MD_CODE_INVALID_BSON,
                            "OP_MSG body is not valid BSON%s", NULL);
            have_body = true;
            off += dlen;
        } else if (kind == 1) {
            if (nseq == 2)
                return perr(e, SRV_PARSE_CLOSE, 233, "Too many document sequences in OP_MSG%s",
                            NULL);
            if (end - off < 5)
                return perr(e, SRV_PARSE_REPLY, MD_CODE_INVALID_BSON,
                            "document sequence section truncated%s", NULL);
            int32_t slen = rd32(m + off);
            if (slen < 5 || (size_t)slen > end - off)
                return perr(e, SRV_PARSE_REPLY, MD_CODE_INVALID_BSON,
                            "document sequence size out of range%s", NULL);
            const uint8_t *s = m + off + 4, *send = m + off + (size_t)slen;
            const uint8_t *nul = memchr(s, 0, (size_t)(send - s));
            if (!nul || nul == s)
                return perr(e, SRV_PARSE_REPLY, MD_CODE_INVALID_BSON,
                            "document sequence identifier is missing or not terminated%s", NULL);
            seqs[nseq].name = (const char *)s;
            seqs[nseq].docs = nul + 1;
            seqs[nseq].n = (size_t)(send - (nul + 1));
            for (int i = 0; i < nseq; i++)
                if (strcmp(seqs[i].name, seqs[nseq].name) == 0)
                    return perr(e, SRV_PARSE_REPLY, 40431, "Duplicate document sequence: %s",
                                seqs[nseq].name);
            for (size_t o = 0; o < seqs[nseq].n; o += dlen) {
                bson_t d;
                if (!doc_at(seqs[nseq].docs + o, seqs[nseq].n - o, &d, &dlen) || !doc_valid(&d))
                    return perr(e, SRV_PARSE_REPLY, MD_CODE_INVALID_BSON,
                                "document sequence %s holds invalid BSON", seqs[nseq].name);
            }
            nseq++;
            off += (size_t)slen;
        } else {
            snprintf(tmp, sizeof tmp, "%u", kind);
            return perr(e, SRV_PARSE_REPLY, 40432, "Unknown section kind %s", tmp);
        }
    }
    if (!have_body)
        return perr(e, SRV_PARSE_REPLY, 40587, "OP_MSG messages must have a body%s", NULL);
    return msg_build(req, &body, seqs, nseq, e);
}

/* ---- OP_QUERY on <db>.$cmd ----------------------------------------------------------------- */

static int query_parse(const uint8_t *m, size_t len, srv_request *req, srv_perr *e)
{
    if (len < 16 + 4 + 1 + 8 + 5)
        return perr(e, SRV_PARSE_CLOSE, 0, "OP_QUERY too short%s", NULL);
    req->flags = (uint32_t)rd32(m + 16);
    const char *ns = (const char *)m + 20;
    const uint8_t *nul = memchr(ns, 0, len - 20);
    if (!nul)
        return perr(e, SRV_PARSE_CLOSE, 0, "OP_QUERY namespace not terminated%s", NULL);
    size_t nslen = (size_t)((const char *)nul - ns), off = 20 + nslen + 1 + 8, dlen;
    const char *dot = memchr(ns, '.', nslen);
    if (!dot || strcmp(dot, ".$cmd") != 0)
        return perr(e, SRV_PARSE_REPLY, 352,
                    "Unsupported OP_QUERY command: the namespace '%s' is not a command "
                    "namespace; use OP_MSG. The client driver may require an upgrade.",
                    ns);
    size_t dbl = (size_t)(dot - ns);
    if (dbl == 0 || dbl > SRV_DB_NAME_MAX)
        return perr(e, SRV_PARSE_REPLY, MD_CODE_INVALID_NAMESPACE, "Invalid namespace: '%s'", ns);
    memcpy(req->db, ns, dbl);
    req->db[dbl] = '\0';
    bson_t q;
    if (off > len || !doc_at(m + off, len - off, &q, &dlen) || !doc_valid(&q))
        return perr(e, SRV_PARSE_REPLY, MD_CODE_INVALID_BSON, "OP_QUERY query is not valid BSON%s",
                    NULL);
    /* {$query: {isMaster: 1}, $readPreference: ...} or {query: {...}} wrap the command */
    bson_iter_t it;
    if (bson_iter_init(&it, &q) && bson_iter_next(&it) &&
        (!strcmp(bson_iter_key(&it), "$query") || !strcmp(bson_iter_key(&it), "query")) &&
        BSON_ITER_HOLDS_DOCUMENT(&it)) {
        const uint8_t *data;
        uint32_t l;
        bson_iter_document(&it, &l, &data);
        bson_t inner;
        bson_init_static(&inner, data, l);
        bson_copy_to(&inner, &req->cmd);
    } else {
        bson_copy_to(&q, &req->cmd);
    }
    return SRV_PARSE_OK;
}

/* ---- OP_COMPRESSED ------------------------------------------------------------------------- */

static int parse_plain(const uint8_t *m, size_t len, int32_t opcode, srv_request *req,
                       srv_perr *e);

static int compressed_parse(const uint8_t *m, size_t len, int32_t max, srv_request *req,
                            srv_perr *e)
{
    char tmp[64];
    if (len < 16 + 9)
        return perr(e, SRV_PARSE_CLOSE, 0, "OP_COMPRESSED too short%s", NULL);
    int32_t orig = rd32(m + 16), usize = rd32(m + 20);
    int id = m[24];
    const srv_compressor *c = srv_compressor_by_id(id);
    if (!c) {
        snprintf(tmp, sizeof tmp, "%d", id);
        return perr(e, SRV_PARSE_CLOSE, 0, "Unknown compressor id %s", tmp);
    }
    if (usize < 0 || usize > max - 16) {
        snprintf(tmp, sizeof tmp, "%d", usize);
        return perr(e, SRV_PARSE_CLOSE, 0, "OP_COMPRESSED uncompressedSize out of range: %s",
                    tmp);
    }
    if (orig == SRV_OP_COMPRESSED)
        return perr(e, SRV_PARSE_CLOSE, 0, "OP_COMPRESSED may not wrap OP_COMPRESSED%s", NULL);
    uint8_t *plain = malloc((size_t)usize + 16);
    if (!plain)
        return perr(e, SRV_PARSE_CLOSE, 0, "out of memory decompressing a message%s", NULL);
    long n = c->decompress(m + 25, len - 25, plain + 16, (size_t)usize);
    if (n != usize) {
        free(plain);
        return perr(e, SRV_PARSE_CLOSE, 0, "OP_COMPRESSED payload does not decompress to "
                    "uncompressedSize with %s", c->name);
    }
    comp_count(id, 2, len - 25, (size_t)usize);
    memcpy(plain, m, 16);
    wr32(plain, usize + 16);
    wr32(plain + 12, orig);
    int rc = parse_plain(plain, (size_t)usize + 16, orig, req, e);
    free(plain);
    req->compressor = id;
    return rc;
}

static int parse_plain(const uint8_t *m, size_t len, int32_t opcode, srv_request *req,
                       srv_perr *e)
{
    char tmp[32];
    req->opcode = opcode;
    switch (opcode) {
    case SRV_OP_MSG:
        return msg_parse(m, len, req, e);
    case SRV_OP_QUERY:
        return query_parse(m, len, req, e);
    default:
        snprintf(tmp, sizeof tmp, "%d", opcode);
        return perr(e, SRV_PARSE_CLOSE, 0, "Unsupported opcode %s", tmp);
    }
}

int srv_msg_parse(const uint8_t *msg, size_t len, int32_t max, srv_request *req, srv_perr *e)
{
    srv_hdr h;
    memset(req, 0, sizeof *req);
    req->compressor = -1;
    if (e)
        e->code = 0, e->message[0] = '\0';
    if (len < 16)
        return perr(e, SRV_PARSE_CLOSE, 0, "message shorter than its header%s", NULL);
    int rc = srv_hdr_read(msg, max, &h, e);
    if (rc)
        return rc;
    if ((size_t)h.len != len)
        return perr(e, SRV_PARSE_CLOSE, 0, "message length does not match the bytes read%s",
                    NULL);
    req->request_id = h.request_id;
    req->opcode = h.opcode;
    if (h.opcode == SRV_OP_COMPRESSED)
        return compressed_parse(msg, len, max, req, e);
    return parse_plain(msg, len, h.opcode, req, e);
}

void srv_request_cleanup(srv_request *req)
{
    bson_destroy(&req->cmd);
}

/* ---- replies ---------------------------------------------------------------------------------- */

uint8_t *srv_msg_reply(const srv_request *req, int32_t request_id, const bson_t *body,
                       bool query_failure, size_t *len)
{
    bool op_reply = req->opcode == SRV_OP_QUERY;
    size_t fixed = op_reply ? 20 : 5;
    bool sum = !op_reply && (req->flags & SRV_MSG_CHECKSUM);
    size_t n = 16 + fixed + body->len + (sum ? 4 : 0);
    uint8_t *m = malloc(n);
    if (!m)
        return NULL;
    wr32(m, (int32_t)n);
    wr32(m + 4, request_id);
    wr32(m + 8, req->request_id);
    if (op_reply) {
        wr32(m + 12, SRV_OP_REPLY);
        wr32(m + 16, query_failure ? 2 : 8); /* QueryFailure; AwaitCapable as mongod sets */
        memset(m + 20, 0, 12);               /* cursorID 0, startingFrom 0 */
        wr32(m + 32, 1);                     /* numberReturned */
    } else {
        wr32(m + 12, SRV_OP_MSG);
        wr32(m + 16, 0);
        m[20] = 0;
    }
    memcpy(m + 16 + fixed, bson_get_data(body), body->len);
    if (sum) {
        wr32(m + 16, (int32_t)SRV_MSG_CHECKSUM);
        wr32(m + n - 4, (int32_t)srv_crc32c(0, m, n - 4));
    }
    const srv_compressor *c = req->compressor >= 0 ? srv_compressor_by_id(req->compressor) : NULL;
    if (!c) {
        *len = n;
        return m;
    }
    size_t cap = 25 + c->bound(n - 16);
    uint8_t *z = malloc(cap);
    long zn = z ? c->compress(m + 16, n - 16, z + 25, cap - 25) : -1;
    if (zn < 0) {
        free(z);
        *len = n;
        return m; /* send it plain: a client must accept either */
    }
    memcpy(z, m, 16);
    wr32(z, (int32_t)(25 + zn));
    wr32(z + 12, SRV_OP_COMPRESSED);
    wr32(z + 16, op_reply ? SRV_OP_REPLY : SRV_OP_MSG);
    wr32(z + 20, (int32_t)(n - 16));
    z[24] = (uint8_t)c->id;
    comp_count(c->id, 0, n - 16, (size_t)zn);
    free(m);
    *len = 25 + (size_t)zn;
    return z;
}
