/*
 * fuzz_scram.c -- libFuzzer harness for the SCRAM-SHA-256 messages
 * (server/srv_scram.c): a client's saslStart and saslContinue payloads are
 * untrusted bytes the server parses before it knows who is talking.
 *
 * The input is a client-first message, a newline, and a client-final
 * message.  The first goes to srv_scram_start; when it parses, the server
 * answers with a fixed credential (RFC 7677's: "pencil", 4096 iterations,
 * derived once) and nonce, and the second goes to srv_scram_server_final.
 * The whole input is also given to the base64 decoder.  Seeds:
 * tests/fuzz/corpus/scram/ (RFC 7677's exchange, escapes, an authzid).
 */
#include <stdlib.h>
#include <string.h>

#include "srv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static srv_scram_cred cred;
    static int ready;
    if (!ready) {
        static const uint8_t salt[] = {0x5b, 0x6d, 0x99, 0x68, 0x9d, 0x12, 0x35, 0x8e,
                                       0xec, 0xa0, 0x4b, 0x14, 0x12, 0x36, 0xfa, 0x81};
        srv_scram_cred_make("pencil", salt, sizeof salt, 4096, &cred);
        ready = 1;
    }
    uint8_t out[256];
    srv_b64_decode((const char *)data, size, out, sizeof out);

    const uint8_t *nl = memchr(data, '\n', size);
    size_t n1 = nl ? (size_t)(nl - data) : size;
    srv_scram s;
    srv_perr e;
    char *user = NULL, *first = NULL, *final = NULL;
    if (srv_scram_start(&s, (const char *)data, n1, &user, &e) == 0 &&
        srv_scram_server_first(&s, &cred, "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0", &first, &e) == 0 &&
        nl)
        srv_scram_server_final(&s, (const char *)nl + 1, size - n1 - 1, &final, &e);
    free(user);
    free(first);
    free(final);
    srv_scram_cleanup(&s);
    return 0;
}
