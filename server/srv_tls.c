/*
 * srv_tls.c -- TLS for `minidoc serve`, with OpenSSL.
 *
 *   --tlsMode disabled   plain connections; one that starts with a TLS
 *                        ClientHello is logged and closed
 *   --tlsMode allowTLS   both: the connection's first bytes decide
 *   --tlsMode preferTLS  (the same for a server: allow and prefer differ
 *                        only for connections mongod makes itself)
 *   --tlsMode requireTLS TLS only: a plain connection is logged and closed
 *   --tlsCertificateKeyFile PEM   the server's certificate (chain) and its
 *                        private key in one file, as MongoDB wants it
 *   --tlsCAFile PEM      client certificates are verified against it and
 *                        required, unless --tlsAllowConnectionsWithoutCertificates
 *
 * The first bytes: a TLS connection starts with a handshake record, 0x16
 * 0x03 0x0n; a MongoDB message starts with its length.  The two overlap
 * only for a first message of 0x030016 + n * 0x10000 bytes (790 bytes and
 * up), which no driver's first hello is; mongod tells them apart the same
 * way.
 *
 * After the handshake the socket is non-blocking: srv_tls_recv says
 * SRV_TLS_AGAIN when OpenSSL needs more bytes, and the connection's loop
 * (srv_main.c) polls the socket as it does for plain connections, so the
 * idle timeout and shutdown work the same.  Bytes OpenSSL has already
 * decrypted are not visible to poll: srv_tls_pending says when to read
 * without waiting.
 */
#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv.h"

#define HANDSHAKE_MS 10000 /* a client that has not finished its handshake by then is dropped */
#define SEND_MS 60000      /* a reply that cannot be written for this long ends the connection */

struct srv_tls_ctx {
    SSL_CTX *ctx;
};

struct srv_tls {
    SSL *ssl;
    int fd;
};

static void ssl_errors(char *buf, size_t n)
{
    unsigned long e = ERR_get_error();
    if (!e) {
        snprintf(buf, n, "unknown OpenSSL error");
        return;
    }
    ERR_error_string_n(e, buf, n);
    ERR_clear_error();
}

const char *srv_tls_version(void)
{
    return OpenSSL_version(OPENSSL_VERSION);
}

srv_tls_ctx *srv_tls_ctx_new(const srv_config *cfg, md_error *err)
{
    char why[256];
    if (!cfg->tls_cert) {
        md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                     "need --tlsCertificateKeyFile when --tlsMode is not disabled");
        return NULL;
    }
    srv_tls_ctx *t = calloc(1, sizeof *t);
    if (!t || !(t->ctx = SSL_CTX_new(TLS_server_method()))) {
        free(t);
        md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "cannot create the TLS context");
        return NULL;
    }
    SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
    SSL_CTX_set_mode(t->ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    const char *what = "the certificate";
    if (SSL_CTX_use_certificate_chain_file(t->ctx, cfg->tls_cert) != 1)
        goto out_fail;
    what = "the private key";
    if (SSL_CTX_use_PrivateKey_file(t->ctx, cfg->tls_cert, SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(t->ctx) != 1)
        goto out_fail;
    if (cfg->tls_ca) {
        what = "the CA file";
        if (SSL_CTX_load_verify_locations(t->ctx, cfg->tls_ca, NULL) != 1)
            goto out_fail;
        SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER |
                           (cfg->tls_no_client_cert ? 0 : SSL_VERIFY_FAIL_IF_NO_PEER_CERT), NULL);
    }
    return t;
out_fail:
    ssl_errors(why, sizeof why);
    md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE, "cannot read %s from %s: %s", what,
                 !strcmp(what, "the CA file") ? cfg->tls_ca : cfg->tls_cert, why);
    srv_tls_ctx_destroy(t);
    return NULL;
}

void srv_tls_ctx_destroy(srv_tls_ctx *t)
{
    if (!t)
        return;
    SSL_CTX_free(t->ctx);
    free(t);
}

bool srv_tls_is_hello(const uint8_t b[3])
{
    return b[0] == 0x16 && b[1] == 0x03 && b[2] <= 0x04;
}

/* Wait for what OpenSSL asked for; false after `ms` or on an error. */
static bool wait_io(int fd, int ssl_err, int ms)
{
    struct pollfd p = {.fd = fd, .events = ssl_err == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN};
    int r;
    do
        r = poll(&p, 1, ms);
    while (r < 0 && errno == EINTR);
    return r > 0;
}

int srv_tls_accept(srv_conn *c, srv_tls_ctx *t, char *why, size_t why_len)
{
    srv_tls *tls = calloc(1, sizeof *tls);
    if (!tls || !(tls->ssl = SSL_new(t->ctx))) {
        free(tls);
        snprintf(why, why_len, "out of memory");
        return -1;
    }
    tls->fd = c->fd;
    fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
    SSL_set_fd(tls->ssl, c->fd);
    int64_t deadline = srv_now_ms() + HANDSHAKE_MS;
    for (;;) {
        ERR_clear_error();
        int r = SSL_accept(tls->ssl);
        if (r == 1)
            break;
        int e = SSL_get_error(tls->ssl, r);
        int64_t left = deadline - srv_now_ms();
        if ((e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) && left > 0 &&
            wait_io(c->fd, e, (int)left))
            continue;
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
            snprintf(why, why_len, "TLS handshake did not finish within %d ms", HANDSHAKE_MS);
        else if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0)
            snprintf(why, why_len, "TLS handshake: connection closed by the peer");
        else {
            char buf[200];
            ssl_errors(buf, sizeof buf);
            snprintf(why, why_len, "TLS handshake failed: %s", buf);
        }
        SSL_free(tls->ssl);
        free(tls);
        return -1;
    }
    c->tls = tls;
    return 0;
}

long srv_tls_recv(srv_tls *t, void *b, size_t n)
{
    ERR_clear_error();
    int r = SSL_read(t->ssl, b, n > (1u << 30) ? 1 << 30 : (int)n);
    if (r > 0)
        return r;
    int e = SSL_get_error(t->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return SRV_TLS_AGAIN;
    if (e == SSL_ERROR_ZERO_RETURN)
        return 0;
    /* OpenSSL 3 reports a close without close_notify as an SSL error
     * (unexpected EOF); drivers do close that way */
    if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0 && errno == 0)
        return 0;
    unsigned long le = ERR_peek_error();
    if (e == SSL_ERROR_SSL && ERR_GET_REASON(le) == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
        ERR_clear_error();
        return 0;
    }
    ERR_clear_error();
    return -1;
}

bool srv_tls_pending(const srv_tls *t)
{
    return SSL_pending(t->ssl) > 0;
}

bool srv_tls_send_all(srv_conn *c, const uint8_t *b, size_t n)
{
    srv_tls *t = c->tls;
    int64_t deadline = srv_now_ms() + SEND_MS;
    while (n) {
        ERR_clear_error();
        int chunk = n > (1u << 30) ? 1 << 30 : (int)n;
        int r = SSL_write(t->ssl, b, chunk);
        if (r > 0) {
            b += r;
            n -= (size_t)r;
            continue;
        }
        int e = SSL_get_error(t->ssl, r);
        int64_t left = deadline - srv_now_ms();
        if ((e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) || left <= 0 ||
            !wait_io(t->fd, e, (int)left)) {
            ERR_clear_error();
            return false;
        }
    }
    return true;
}

void srv_tls_free(srv_tls *t)
{
    if (!t)
        return;
    ERR_clear_error();
    SSL_shutdown(t->ssl); /* one try: send close_notify, do not wait for the peer's */
    ERR_clear_error();
    SSL_free(t->ssl);
    free(t);
}
