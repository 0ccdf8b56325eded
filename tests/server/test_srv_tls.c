/*
 * test_srv_tls.c -- srv_tls.c in-process: a certificate that cannot be
 * loaded stops srv_new with the reason; with --tlsMode requireTLS an
 * OpenSSL client (the certificate, made by the openssl command, as its
 * CA) gets its ping answered over TLS, large replies included, while a
 * plain connection is closed; with allowTLS both kinds are served; with
 * TLS disabled a TLS ClientHello is closed with a log line.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <ftw.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "srv.h"
#include "t_live.h"

/* A directory with a self-signed certificate (DIR/cert.crt) and its
 * key with it (DIR/server.pem). */
static void make_dir(live *l)
{
    char cmd[1024];
    t_live_dir(l, "md_tls");
    snprintf(l->crt, sizeof l->crt, "%s/cert.crt", l->dir);
    snprintf(l->pem, sizeof l->pem, "%s/server.pem", l->dir);
    snprintf(cmd, sizeof cmd,
             "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost "
             "-addext subjectAltName=IP:127.0.0.1 -keyout %s/key.pem -out %s "
             ">/dev/null 2>&1 && cat %s %s/key.pem > %s",
             l->dir, l->crt, l->crt, l->dir, l->pem);
    cr_assert_eq(system(cmd), 0, "the openssl command could not make a certificate");
}

static void live_start(live *l, srv_tls_mode mode)
{
    signal(SIGPIPE, SIG_IGN);
    make_dir(l);
    char data[128];
    snprintf(data, sizeof data, "%s/data", l->dir);
    srv_config cfg = {.bind = "127.0.0.1", .port = 0, .engine = "ephemeralForTest",
                      .compressors = "", .dbpath = data, .tls_mode = mode,
                      .tls_cert = mode ? l->pem : NULL};
    t_live_run(l, &cfg);
}

/* I/O through TLS (ssl) or plain (fd). */
typedef struct chan {
    int fd;
    SSL *ssl;
} chan;

static bool chan_write(chan *c, const void *b, size_t n)
{
    if (c->ssl)
        return SSL_write(c->ssl, b, (int)n) == (int)n;
    return send(c->fd, b, n, MSG_NOSIGNAL) == (ssize_t)n;
}

static bool chan_read(chan *c, uint8_t *b, size_t n)
{
    size_t got = 0;
    while (got < n) {
        int r = c->ssl ? SSL_read(c->ssl, b + got, (int)(n - got))
                       : (int)recv(c->fd, b + got, n - got, 0);
        if (r <= 0)
            return false;
        got += (size_t)r;
    }
    return true;
}

static void put32(uint8_t *b, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(v >> (8 * i));
}

/* One OP_MSG command; false when the server closed instead of answering. */
static bool run(chan *c, const char *json, bson_t *reply)
{
    bson_error_t e;
    bson_t *cmd = bson_new_from_json((const uint8_t *)json, -1, &e);
    cr_assert(cmd, "%s", e.message);
    size_t n = 21 + cmd->len;
    uint8_t *m = malloc(n), h[16];
    put32(m, (uint32_t)n);
    put32(m + 4, 1);
    put32(m + 8, 0);
    put32(m + 12, SRV_OP_MSG);
    put32(m + 16, 0);
    m[20] = 0;
    memcpy(m + 21, bson_get_data(cmd), cmd->len);
    bson_destroy(cmd);
    bool ok = chan_write(c, m, n) && chan_read(c, h, 16);
    free(m);
    if (!ok)
        return false;
    uint32_t len = h[0] | h[1] << 8 | h[2] << 16 | (uint32_t)h[3] << 24;
    cr_assert(len > 21 && len < (1u << 26));
    uint8_t *b = malloc(len);
    cr_assert(chan_read(c, b, len - 16));
    bson_t view;
    cr_assert(bson_init_static(&view, b + 5, len - 21));
    bson_copy_to(&view, reply);
    free(b);
    return true;
}

static double ok_of(const bson_t *r)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, r, "ok") ? bson_iter_as_double(&it) : -1;
}

static SSL_CTX *client_ctx(const live *l)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    cr_assert(ctx);
    cr_assert_eq(SSL_CTX_load_verify_locations(ctx, l->crt, NULL), 1);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    return ctx;
}

static void tls_open(const live *l, SSL_CTX *ctx, chan *c)
{
    c->fd = t_dial(l);
    c->ssl = SSL_new(ctx);
    SSL_set_fd(c->ssl, c->fd);
    SSL_set1_host(c->ssl, "127.0.0.1");
    int r = SSL_connect(c->ssl);
    char buf[256] = "";
    if (r != 1)
        ERR_error_string_n(ERR_get_error(), buf, sizeof buf);
    cr_assert_eq(r, 1, "TLS handshake: %s", buf);
}

static void chan_close(chan *c)
{
    if (c->ssl) {
        SSL_shutdown(c->ssl);
        SSL_free(c->ssl);
    }
    close(c->fd);
}

Test(srv_tls, bad_certificate_stops_startup)
{
    live l;
    make_dir(&l);
    srv *s = NULL;
    md_error err;
    srv_config cfg = {.bind = "127.0.0.1", .port = 0, .dbpath = l.dir,
                      .tls_mode = SRV_TLS_REQUIRE};
    cr_assert_neq(srv_new(&cfg, &s, &err), 0);
    cr_assert(strstr(err.message, "need --tlsCertificateKeyFile"), "%s", err.message);
    srv_destroy(s);
    char missing[160];
    snprintf(missing, sizeof missing, "%s/none.pem", l.dir);
    cfg.tls_cert = missing;
    cr_assert_neq(srv_new(&cfg, &s, &err), 0);
    cr_assert(strstr(err.message, "cannot read the certificate"), "%s", err.message);
    srv_destroy(s);
    /* a certificate without its key */
    cfg.tls_cert = l.crt;
    cr_assert_neq(srv_new(&cfg, &s, &err), 0);
    cr_assert(strstr(err.message, "cannot read the private key"), "%s", err.message);
    srv_destroy(s);
    cfg.tls_cert = l.pem;
    cfg.tls_ca = missing;
    cr_assert_neq(srv_new(&cfg, &s, &err), 0);
    cr_assert(strstr(err.message, "cannot read the CA file"), "%s", err.message);
    srv_destroy(s);
    nftw(l.dir, t_live_rm, 8, FTW_DEPTH | FTW_PHYS);
}

Test(srv_tls, require_tls)
{
    live l;
    live_start(&l, SRV_TLS_REQUIRE);
    SSL_CTX *ctx = client_ctx(&l);
    chan c;
    bson_t r;
    tls_open(&l, ctx, &c);
    cr_assert(run(&c, "{\"ping\": 1, \"$db\": \"admin\"}", &r));
    cr_assert_eq(ok_of(&r), 1);
    bson_destroy(&r);
    /* messages and replies larger than one TLS record (16 KB) */
    size_t cap = 64 * 1024;
    char *big = malloc(cap), pad[1001];
    memset(pad, 'x', 1000);
    pad[1000] = '\0';
    snprintf(big, cap, "{\"insert\": \"t\", \"$db\": \"x\", \"documents\": [");
    for (int i = 0; i < 40; i++)
        snprintf(big + strlen(big), cap - strlen(big), "%s{\"_id\": %d, \"pad\": \"%s\"}",
                 i ? "," : "", i, pad);
    strcat(big, "]}");
    cr_assert(run(&c, big, &r));
    cr_assert_eq(ok_of(&r), 1);
    bson_destroy(&r);
    free(big);
    cr_assert(run(&c, "{\"find\": \"t\", \"$db\": \"x\", \"batchSize\": 1000}", &r));
    bson_iter_t it;
    cr_assert(bson_iter_init(&it, &r) &&
              bson_iter_find_descendant(&it, "cursor.firstBatch.39.pad", &it));
    cr_assert_eq(strlen(bson_iter_utf8(&it, NULL)), 1000);
    bson_destroy(&r);
    cr_assert(run(&c, "{\"buildInfo\": 1, \"$db\": \"admin\"}", &r));
    cr_assert(bson_iter_init(&it, &r) && bson_iter_find_descendant(&it, "openssl.running", &it));
    cr_assert(strstr(bson_iter_utf8(&it, NULL), "OpenSSL"));
    bson_destroy(&r);
    chan_close(&c);

    /* a plain client: closed without an answer */
    chan p = {.fd = t_dial(&l)};
    cr_assert_not(run(&p, "{\"ping\": 1, \"$db\": \"admin\"}", &r));
    chan_close(&p);
    SSL_CTX_free(ctx);
    t_live_stop(&l);
}

Test(srv_tls, allow_tls_serves_both)
{
    live l;
    live_start(&l, SRV_TLS_ALLOW);
    SSL_CTX *ctx = client_ctx(&l);
    chan t, p = {0};
    bson_t r;
    tls_open(&l, ctx, &t);
    p.fd = t_dial(&l);
    cr_assert(run(&t, "{\"insert\": \"t\", \"$db\": \"x\", \"documents\": [{\"_id\": 1}]}", &r));
    cr_assert_eq(ok_of(&r), 1);
    bson_destroy(&r);
    cr_assert(run(&p, "{\"count\": \"t\", \"$db\": \"x\"}", &r));
    bson_iter_t it;
    cr_assert(bson_iter_init_find(&it, &r, "n") && bson_iter_as_int64(&it) == 1);
    bson_destroy(&r);
    chan_close(&t);
    chan_close(&p);
    SSL_CTX_free(ctx);
    t_live_stop(&l);
}

Test(srv_tls, disabled_refuses_a_tls_hello)
{
    live l;
    live_start(&l, SRV_TLS_DISABLED);
    SSL_CTX *ctx = client_ctx(&l);
    chan c = {.fd = t_dial(&l)};
    c.ssl = SSL_new(ctx);
    SSL_set_fd(c.ssl, c.fd);
    cr_assert_neq(SSL_connect(c.ssl), 1);
    ERR_clear_error();
    SSL_free(c.ssl);
    close(c.fd);
    chan p = {.fd = t_dial(&l)};
    bson_t r;
    cr_assert(run(&p, "{\"getLog\": \"global\", \"$db\": \"admin\"}", &r));
    char *j = bson_as_relaxed_extended_json(&r, NULL);
    cr_assert(strstr(j, "SSL handshake received but server is started without SSL support"),
              "%s", j);
    bson_free(j);
    bson_destroy(&r);
    chan_close(&p);
    SSL_CTX_free(ctx);
    t_live_stop(&l);
}
