/*
 * fuzz_wire.c -- libFuzzer harness for the wire-message parser
 * (server/srv_wire.c, server/srv_compress.c): every byte a client sends
 * goes through srv_hdr_read and srv_msg_parse before anything else sees it.
 *
 * The input is one message.  Its first four bytes are overwritten with its
 * real length (when it has a header), so the fuzzer spends its time past
 * the length check, which srv_hdr_read then gets on the raw bytes alone;
 * when requestID's lowest bit is set and the OP_MSG flags ask for a
 * checksum, a correct CRC-32C is written into the last four bytes, so that
 * the sections behind a checksum are reached too.  A message that parses is
 * answered (srv_msg_reply, compressed again when it came compressed) and
 * its command walked.  Seeds: tests/fuzz/corpus/wire/ (OP_MSG with and
 * without sequences and checksums, OP_QUERY, OP_COMPRESSED with each
 * compressor).  make fuzz FUZZ_S=N runs it under ASan and UBSan.
 */
#include <stdlib.h>
#include <string.h>

#include "srv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    srv_hdr h;
    srv_perr e;
    srv_request req;
    if (size >= 16)
        srv_hdr_read(data, SRV_MAX_MESSAGE, &h, &e);
    if (size > (1u << 20))
        return 0;
    uint8_t *m = malloc(size ? size : 1);
    if (!m)
        return 0;
    memcpy(m, data, size);
    if (size >= 16) {
        uint32_t n = (uint32_t)size;
        m[0] = (uint8_t)n;
        m[1] = (uint8_t)(n >> 8);
        m[2] = (uint8_t)(n >> 16);
        m[3] = (uint8_t)(n >> 24);
    }
    if (size >= 25 && (m[4] & 1) && m[12] == (SRV_OP_MSG & 0xff) && m[13] == (SRV_OP_MSG >> 8) &&
        (m[16] & SRV_MSG_CHECKSUM)) {
        uint32_t c = srv_crc32c(0, m, size - 4);
        for (int i = 0; i < 4; i++)
            m[size - 4 + (size_t)i] = (uint8_t)(c >> (8 * i));
    }
    if (srv_msg_parse(m, size, SRV_MAX_MESSAGE, &req, &e) == SRV_PARSE_OK) {
        bson_iter_t it;
        size_t n = 0, len;
        if (bson_iter_init(&it, &req.cmd))
            while (bson_iter_next(&it))
                n++;
        uint8_t *out = srv_msg_reply(&req, 1, &req.cmd, n == 0, &len);
        free(out);
        srv_request_cleanup(&req);
    }
    free(m);
    return 0;
}
