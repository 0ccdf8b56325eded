/*
 * srv_main.c -- `minidoc serve`: the listener and the connections.
 *
 *   minidoc serve --dbpath DIR [--port 27017] [--bind 127.0.0.1]
 *                 [--engine btree|mmapv1|ephemeralForTest]
 *                 [--maxConns N] [--idleTimeoutSecs S]
 *                 [--networkMessageCompressors snappy,zstd,zlib|disabled]
 *                 [--opts '<md_db_open options as JSON>'] [--logpath FILE] [--quiet]
 *                 [--auth] [--tlsMode disabled|allowTLS|preferTLS|requireTLS
 *                  --tlsCertificateKeyFile PEM [--tlsCAFile PEM
 *                  [--tlsAllowConnectionsWithoutCertificates]]]
 *
 * One thread per connection, as mongod's default ("synchronous") service
 * executor: a command runs to its end in the connection's thread, blocking
 * only on the engines' own locks (md_db is thread safe), so one slow
 * command or one awaitData getMore holds up no other connection, and the
 * code reads top to bottom.  An event loop would need every md_db_command
 * to be cut into non-blocking steps, which the library does not offer.
 * Threads get 4 MB stacks (virtual memory; the default 8 MB would also
 * do): 500 connections are 500 threads, which Linux handles comfortably.
 *
 * A connection's life:
 *
 *   accept --(count >= maxConns)--> log 22942, close
 *      |
 *   peek at the first 3 bytes (srv_tls.c says why that tells them apart):
 *      a TLS hello --(--tlsMode disabled)--> log 23255, close
 *                  --(else)--> the TLS handshake --(fails)--> log 22988, close
 *      plain --(requireTLS)--> log 23256, close
 *      |
 *   wait for 16 header bytes --(idle > idleTimeoutSecs, or shutdown)--> close
 *      |
 *   length out of 16..48000000 --> log 22988, close
 *      |
 *   read the rest, srv_msg_parse --SRV_PARSE_CLOSE--> log 22988, close
 *      |                       \--SRV_PARSE_REPLY--> error reply
 *   srv_cmd_run --> reply (none when moreToCome) --> wait again
 *
 * Shutdown (SIGINT, SIGTERM, or srv_stop): the listener closes, every
 * connection's socket is shut down so that its thread leaves at the next
 * read (a running command finishes first), and when the last thread is gone
 * srv_destroy closes every database, which flushes both engines (mmapv1's
 * journal and data files, btree's checkpoint).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "srv.h"

#define STACK_SIZE (4u << 20)

typedef struct conn_node {
    srv_conn c;
    struct conn_node *prev, *next;
} conn_node;

struct srv {
    srv_config cfg;
    char *dbpath, *bind, *engine, *compressors, *tls_cert, *tls_ca;
    srv_tls_ctx *tls;
    int64_t users_version;
    bson_t open_opts;
    srv_dbs *dbs;
    int listen_fd;
    int port;
    int stop_pipe[2];
    int stopping; /* set by a signal handler, read by every thread: __atomic */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    conn_node *conns;
    int nconns;
    int64_t created;
    int32_t next_request_id;
};

int64_t srv_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

srv_dbs *srv_databases(srv *s)
{
    return s->dbs;
}

const srv_config *srv_cfg(const srv *s)
{
    return &s->cfg;
}

int srv_port(const srv *s)
{
    return s->port;
}

srv_tls_ctx *srv_tls_context(const srv *s)
{
    return s->tls;
}

int64_t srv_users_version(const srv *s)
{
    return __atomic_load_n(&s->users_version, __ATOMIC_ACQUIRE);
}

void srv_users_changed(srv *s)
{
    __atomic_add_fetch(&s->users_version, 1, __ATOMIC_ACQ_REL);
}

int srv_conn_count(const srv *s, int64_t *total_created)
{
    srv *m = (srv *)s;
    pthread_mutex_lock(&m->mu);
    int n = m->nconns;
    if (total_created)
        *total_created = m->created;
    pthread_mutex_unlock(&m->mu);
    return n;
}

/* ---- setup ---------------------------------------------------------------------------- */

int srv_new(const srv_config *cfg, srv **out, md_error *err)
{
    srv *s = bson_aligned_alloc0(BSON_ALIGNOF(srv), sizeof *s); /* a bson_t inside */
    if (!s)
        return md_error_set(err, MD_ENOMEM, MD_CODE_INTERNAL_ERROR, "out of memory");
    s->cfg = *cfg;
    s->dbpath = strdup(cfg->dbpath);
    s->bind = strdup(cfg->bind ? cfg->bind : "127.0.0.1");
    s->engine = cfg->engine ? strdup(cfg->engine) : NULL;
    s->compressors = strdup(cfg->compressors ? cfg->compressors : "snappy,zstd,zlib");
    s->cfg.dbpath = s->dbpath;
    s->cfg.bind = s->bind;
    s->cfg.engine = s->engine;
    s->cfg.compressors = s->compressors;
    s->tls_cert = cfg->tls_cert ? strdup(cfg->tls_cert) : NULL;
    s->tls_ca = cfg->tls_ca ? strdup(cfg->tls_ca) : NULL;
    s->cfg.tls_cert = s->tls_cert;
    s->cfg.tls_ca = s->tls_ca;
    if (s->cfg.max_conns <= 0)
        s->cfg.max_conns = 65536;
    if (cfg->open_opts)
        bson_copy_to(cfg->open_opts, &s->open_opts);
    else
        bson_init(&s->open_opts);
    s->cfg.open_opts = &s->open_opts;
    s->listen_fd = -1;
    s->stop_pipe[0] = s->stop_pipe[1] = -1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    *out = s;

    mkdir(s->dbpath, 0755);
    struct stat st;
    if (stat(s->dbpath, &st) != 0 || !S_ISDIR(st.st_mode))
        return md_error_set(err, MD_EIO, MD_CODE_INTERNAL_ERROR,
                            "Data directory %s not found, and it cannot be created",
                            s->dbpath);
    srv_dbs_new(s->dbpath, s->engine, &s->open_opts, &s->dbs);
    if (s->cfg.tls_mode != SRV_TLS_DISABLED && !(s->tls = srv_tls_ctx_new(&s->cfg, err)))
        return MD_EINVAL;
    if (pipe(s->stop_pipe) != 0)
        return md_error_set(err, MD_EIO, MD_CODE_INTERNAL_ERROR, "pipe: %s", strerror(errno));
    fcntl(s->stop_pipe[1], F_SETFL, O_NONBLOCK);

    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)cfg->port)};
    if (inet_pton(AF_INET, s->bind, &sa.sin_addr) != 1)
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                            "--bind: '%s' is not an IPv4 address", s->bind);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    if (fd < 0)
        return md_error_set(err, MD_EIO, MD_CODE_INTERNAL_ERROR, "socket: %s", strerror(errno));
    s->listen_fd = fd;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
        return md_error_set(err, MD_EIO, MD_CODE_INTERNAL_ERROR,
                            "Failed to set up listener: bind %s:%d: %s", s->bind, cfg->port,
                            strerror(errno));
    if (listen(fd, 1024) != 0)
        return md_error_set(err, MD_EIO, MD_CODE_INTERNAL_ERROR, "listen: %s", strerror(errno));
    socklen_t sl = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &sl);
    s->port = ntohs(sa.sin_port);
    return 0;
}

void srv_stop(srv *s)
{
    __atomic_store_n(&s->stopping, 1, __ATOMIC_RELAXED);
    if (s->stop_pipe[1] >= 0) {
        char b = 1;
        ssize_t r = write(s->stop_pipe[1], &b, 1);
        (void)r;
    }
}

void srv_destroy(srv *s)
{
    if (!s)
        return;
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    for (int i = 0; i < 2; i++)
        if (s->stop_pipe[i] >= 0)
            close(s->stop_pipe[i]);
    srv_dbs_destroy(s->dbs);
    srv_tls_ctx_destroy(s->tls);
    bson_destroy(&s->open_opts);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s->dbpath);
    free(s->bind);
    free(s->engine);
    free(s->compressors);
    free(s->tls_cert);
    free(s->tls_ca);
    free(s);
}

/* ---- one connection ------------------------------------------------------------------- */

static void log_conn(srv_sev sev, int id, srv_conn *c, const char *msg, const char *error)
{
    bson_t attr = BSON_INITIALIZER;
    if (error)
        BSON_APPEND_UTF8(&attr, "error", error);
    BSON_APPEND_UTF8(&attr, "remote", c->remote);
    BSON_APPEND_INT64(&attr, "connectionId", c->id);
    srv_log(sev, "NETWORK", id, c->ctx, msg, &attr);
    bson_destroy(&attr);
}

/* 1: readable; 0: idle timeout or shutdown (why says which); -1: error. */
static int wait_readable(srv_conn *c, const char **why)
{
    srv *s = c->server;
    int64_t start = srv_now_ms();
    for (;;) {
        if (__atomic_load_n(&s->stopping, __ATOMIC_RELAXED)) {
            *why = "shutdown";
            return 0;
        }
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        int r = poll(&p, 1, 500);
        if (r > 0)
            return 1;
        if (r < 0 && errno != EINTR)
            return -1;
        if (s->cfg.idle_secs > 0 && srv_now_ms() - start >= (int64_t)s->cfg.idle_secs * 1000) {
            *why = "idle timeout";
            return 0;
        }
    }
}

/* Read exactly n bytes.  0: done; 1: the peer closed before the first byte
 * of a message; -1: anything else (why says). */
static int read_full(srv_conn *c, uint8_t *b, size_t n, bool first, const char **why)
{
    size_t got = 0;
    while (got < n) {
        int w = c->tls && srv_tls_pending(c->tls) ? 1 : wait_readable(c, why);
        if (w <= 0) {
            if (w < 0)
                *why = strerror(errno);
            return -1;
        }
        ssize_t r;
        if (c->tls) {
            r = srv_tls_recv(c->tls, b + got, n - got);
            if (r == SRV_TLS_AGAIN)
                continue;
            if (r < 0) {
                *why = "TLS read error";
                return -1;
            }
        } else
            r = recv(c->fd, b + got, n - got, 0);
        if (r == 0) {
            *why = "connection closed by the peer in the middle of a message";
            return first && got == 0 ? 1 : -1;
        }
        if (r < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            *why = strerror(errno);
            return -1;
        }
        got += (size_t)r;
    }
    return 0;
}

static bool send_all(srv_conn *c, const uint8_t *b, size_t n)
{
    int fd = c->fd;
    if (c->tls)
        return srv_tls_send_all(c, b, n);
    while (n) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        b += w;
        n -= (size_t)w;
    }
    return true;
}

/* One message: false when the connection is to be closed. */
static bool serve_one(srv_conn *c)
{
    srv *s = c->server;
    uint8_t hdr[16];
    const char *why = NULL;
    srv_perr pe;
    srv_hdr h;
    int r = read_full(c, hdr, 16, true, &why);
    if (r == 1)
        return false; /* the client hung up between messages: the normal end */
    if (r < 0) {
        if (strcmp(why, "shutdown") && strcmp(why, "idle timeout"))
            log_conn(SRV_LOG_I, 22988, c, "Error receiving request from client. Ending "
                     "connection from remote", why);
        else if (!strcmp(why, "idle timeout"))
            log_conn(SRV_LOG_I, 9990001, c, "Connection idle timeout, closing", why);
        return false;
    }
    if (srv_hdr_read(hdr, SRV_MAX_MESSAGE, &h, &pe) != SRV_PARSE_OK) {
        log_conn(SRV_LOG_W, 22988, c, "Error receiving request from client. Ending connection "
                 "from remote", pe.message);
        return false;
    }
    uint8_t *msg = malloc((size_t)h.len);
    if (!msg) {
        log_conn(SRV_LOG_W, 22988, c, "Error receiving request from client. Ending connection "
                 "from remote", "out of memory");
        return false;
    }
    memcpy(msg, hdr, 16);
    if (read_full(c, msg + 16, (size_t)h.len - 16, false, &why) != 0) {
        log_conn(SRV_LOG_I, 22988, c, "Error receiving request from client. Ending connection "
                 "from remote", why);
        free(msg);
        return false;
    }
    srv_request req;
    bson_t reply;
    r = srv_msg_parse(msg, (size_t)h.len, SRV_MAX_MESSAGE, &req, &pe);
    free(msg);
    if (r == SRV_PARSE_CLOSE) {
        log_conn(SRV_LOG_W, 22988, c, "Error receiving request from client. Ending connection "
                 "from remote", pe.message);
        return false;
    }
    bool failure = false;
    if (r == SRV_PARSE_REPLY) {
        bson_init(&reply);
        BSON_APPEND_DOUBLE(&reply, "ok", 0);
        BSON_APPEND_UTF8(&reply, "errmsg", pe.message);
        BSON_APPEND_INT32(&reply, "code", pe.code);
        if (pe.code == 352) {
            BSON_APPEND_UTF8(&reply, "$err", pe.message);
            failure = true;
        }
        BSON_APPEND_UTF8(&reply, "codeName", srv_code_name(pe.code));
    } else {
        srv_cmd_run(c, &req, &reply);
        srv_request_cleanup(&req);
    }
    bool keep = true;
    if (!req.more_to_come) {
        size_t n;
        int32_t id = __atomic_add_fetch(&s->next_request_id, 1, __ATOMIC_RELAXED);
        uint8_t *out = srv_msg_reply(&req, id, &reply, failure, &n);
        keep = out && send_all(c, out, n);
        free(out);
    }
    bson_destroy(&reply);
    return keep;
}

/* Peek at the first 3 bytes: 1 a TLS hello, 0 not, -1 closed or waited out. */
static int sniff(srv_conn *c, const char **why)
{
    uint8_t b[3];
    int64_t deadline = srv_now_ms() + 10000; /* for the rest of a partial first record */
    for (;;) {
        if (wait_readable(c, why) <= 0)
            return -1;
        ssize_t r = recv(c->fd, b, sizeof b, MSG_PEEK);
        if (r <= 0 && !(r < 0 && errno == EINTR))
            return -1;
        if (r == (ssize_t)sizeof b)
            return srv_tls_is_hello(b);
        if (r > 0 && b[0] != 0x16)
            return 0;
        if (srv_now_ms() > deadline) {
            *why = "a partial first message";
            return -1;
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL); /* a partial first record: wait for the rest */
    }
}

/* TLS or not, as --tlsMode says: false when the connection is to be closed. */
static bool start_conn(srv_conn *c)
{
    srv *s = c->server;
    const char *gone = NULL;
    int hello = sniff(c, &gone);
    if (hello < 0) {
        if (gone && !strcmp(gone, "idle timeout"))
            log_conn(SRV_LOG_I, 9990001, c, "Connection idle timeout, closing", gone);
        return false;
    }
    if (hello && !s->tls) {
        log_conn(SRV_LOG_I, 23255, c, "SSL handshake received but server is started without "
                 "SSL support", NULL);
        return false;
    }
    if (!hello && s->cfg.tls_mode == SRV_TLS_REQUIRE) {
        log_conn(SRV_LOG_I, 23256, c, "Client connecting without TLS when TLS is required "
                 "(--tlsMode requireTLS)", NULL);
        return false;
    }
    if (!hello)
        return true;
    char why[300];
    if (srv_tls_accept(c, s->tls, why, sizeof why) != 0) {
        log_conn(SRV_LOG_I, 22988, c, "Error receiving request from client. Ending "
                 "connection from remote", why);
        return false;
    }
    return true;
}

static void *conn_main(void *arg)
{
    conn_node *node = arg;
    srv_conn *c = &node->c;
    srv *s = c->server;
    if (start_conn(c))
        while (!__atomic_load_n(&s->stopping, __ATOMIC_RELAXED) && serve_one(c))
            ;
    srv_tls_free(c->tls);
    c->tls = NULL;
    srv_auth_conn_cleanup(c);
    close(c->fd);
    pthread_mutex_lock(&s->mu);
    if (node->prev)
        node->prev->next = node->next;
    else
        s->conns = node->next;
    if (node->next)
        node->next->prev = node->prev;
    int left = --s->nconns;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    bson_t attr = BSON_INITIALIZER;
    BSON_APPEND_UTF8(&attr, "remote", c->remote);
    BSON_APPEND_INT64(&attr, "connectionId", c->id);
    BSON_APPEND_INT32(&attr, "connectionCount", left);
    srv_log(SRV_LOG_I, "NETWORK", 22944, c->ctx, "Connection ended", &attr);
    bson_destroy(&attr);
    free(node);
    return NULL;
}

/* ---- the listener --------------------------------------------------------------------- */

static void accept_one(srv *s, pthread_attr_t *attr)
{
    struct sockaddr_in sa;
    socklen_t sl = sizeof sa;
    int fd = accept4(s->listen_fd, (struct sockaddr *)&sa, &sl, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    char remote[64], ip[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof ip);
    snprintf(remote, sizeof remote, "%s:%d", ip, ntohs(sa.sin_port));
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    pthread_mutex_lock(&s->mu);
    if (s->nconns >= s->cfg.max_conns) {
        int n = s->nconns;
        pthread_mutex_unlock(&s->mu);
        close(fd);
        bson_t a = BSON_INITIALIZER;
        BSON_APPEND_UTF8(&a, "remote", remote);
        BSON_APPEND_INT32(&a, "connectionCount", n);
        BSON_APPEND_INT32(&a, "maxConns", s->cfg.max_conns);
        srv_log(SRV_LOG_I, "NETWORK", 22942, "listener",
                "Connection refused because there are too many open connections", &a);
        bson_destroy(&a);
        return;
    }
    conn_node *node = calloc(1, sizeof *node);
    if (!node) {
        pthread_mutex_unlock(&s->mu);
        close(fd);
        return;
    }
    node->c.server = s;
    node->c.fd = fd;
    node->c.id = ++s->created;
    node->c.compressors[0] = -1;
    snprintf(node->c.remote, sizeof node->c.remote, "%s", remote);
    snprintf(node->c.ctx, sizeof node->c.ctx, "conn%lld", (long long)node->c.id);
    node->next = s->conns;
    if (s->conns)
        s->conns->prev = node;
    s->conns = node;
    int count = ++s->nconns;
    int64_t id = node->c.id;
    pthread_t t;
    int rc = pthread_create(&t, attr, conn_main, node);
    if (rc != 0) {
        s->conns = node->next;
        if (s->conns)
            s->conns->prev = NULL;
        s->nconns--;
        pthread_mutex_unlock(&s->mu);
        close(fd);
        free(node);
        srv_log(SRV_LOG_W, "NETWORK", 22948, "listener", "Error accepting new connection: "
                "cannot start its thread", NULL);
        return;
    }
    pthread_mutex_unlock(&s->mu);
    bson_t a = BSON_INITIALIZER;
    BSON_APPEND_UTF8(&a, "remote", remote);
    BSON_APPEND_INT64(&a, "connectionId", id);
    BSON_APPEND_INT32(&a, "connectionCount", count);
    srv_log(SRV_LOG_I, "NETWORK", 22943, "listener", "Connection accepted", &a);
    bson_destroy(&a);
}

int srv_run(srv *s)
{
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, STACK_SIZE);
    bson_t a = BSON_INITIALIZER;
    BSON_APPEND_UTF8(&a, "address", s->bind);
    BSON_APPEND_INT32(&a, "port", s->port);
    srv_log(SRV_LOG_I, "NETWORK", 23015, "listener", "Listening on", &a);
    bson_reinit(&a);
    BSON_APPEND_INT32(&a, "port", s->port);
    BSON_APPEND_UTF8(&a, "ssl", s->tls ? "on" : "off");
    srv_log(SRV_LOG_I, "NETWORK", 23016, "listener", "Waiting for connections", &a);
    bson_destroy(&a);
    while (!__atomic_load_n(&s->stopping, __ATOMIC_RELAXED)) {
        struct pollfd p[2] = {{.fd = s->listen_fd, .events = POLLIN},
                              {.fd = s->stop_pipe[0], .events = POLLIN}};
        int r = poll(p, 2, 1000);
        if (r > 0 && (p[0].revents & POLLIN))
            accept_one(s, &attr);
    }
    pthread_attr_destroy(&attr);
    close(s->listen_fd);
    s->listen_fd = -1;
    pthread_mutex_lock(&s->mu);
    for (conn_node *n = s->conns; n; n = n->next)
        shutdown(n->c.fd, SHUT_RD);
    while (s->nconns > 0)
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

/* ---- the command line ------------------------------------------------------------------ */

static srv *the_server;

static void on_signal(int sig)
{
    if (the_server)
        srv_stop(the_server);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: minidoc serve --dbpath DIR [--port 27017] [--bind 127.0.0.1]\n"
            "                     [--engine btree|mmapv1|ephemeralForTest] [--maxConns N]\n"
            "                     [--idleTimeoutSecs S] [--networkMessageCompressors LIST]\n"
            "                     [--opts '<json>'] [--logpath FILE] [--quiet] [--auth]\n"
            "                     [--tlsMode disabled|allowTLS|preferTLS|requireTLS]\n"
            "                     [--tlsCertificateKeyFile PEM] [--tlsCAFile PEM]\n"
            "                     [--tlsAllowConnectionsWithoutCertificates]\n"
            "\n"
            "  Serves MongoDB's wire protocol: one database per directory DIR/<name>/,\n"
            "  created on first use.  Logs are JSON lines (stdout, or --logpath).\n"
            "  --port 0 takes any free port (the 'Waiting for connections' line says which).\n"
            "  --maxConns      maxIncomingConnections (default 65536)\n"
            "  --idleTimeoutSecs  close a connection idle this long (default 0: never)\n"
            "  --networkMessageCompressors  snappy,zstd,zlib (default) or disabled\n"
            "  --opts JSON     extra md_db_open() options for every database\n"
            "  --auth          require SCRAM-SHA-256 authentication (users: createUser;\n"
            "                  the first one from 127.0.0.1 while there is none)\n"
            "  --tlsMode       disabled (default), allowTLS or preferTLS (TLS and plain\n"
            "                  connections), requireTLS; --sslMode ...SSL also works\n"
            "  --tlsCertificateKeyFile  the server's certificate and private key (PEM)\n"
            "  --tlsCAFile     verify client certificates against this CA (and require\n"
            "                  one, unless --tlsAllowConnectionsWithoutCertificates)\n"
            "  SIGINT or SIGTERM: clean shutdown (every database flushed and closed).\n");
}

static const char *arg_value(int argc, char **argv, int *i, const char *name)
{
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) != 0)
        return NULL;
    if (argv[*i][n] == '=')
        return argv[*i] + n + 1;
    if (argv[*i][n] != '\0' || *i + 1 >= argc)
        return NULL;
    return argv[++*i];
}

static bool int_arg(const char *v, int lo, int hi, int *out)
{
    char *end;
    long x = strtol(v, &end, 10);
    if (*v == '\0' || *end || x < lo || x > hi)
        return false;
    *out = (int)x;
    return true;
}

static bool tls_mode_arg(const char *v, srv_tls_mode *out)
{
    static const struct {
        const char *name;
        srv_tls_mode mode;
    } modes[] = {{"disabled", SRV_TLS_DISABLED}, {"allowTLS", SRV_TLS_ALLOW},
                 {"preferTLS", SRV_TLS_PREFER},  {"requireTLS", SRV_TLS_REQUIRE},
                 {"allowSSL", SRV_TLS_ALLOW},    {"preferSSL", SRV_TLS_PREFER},
                 {"requireSSL", SRV_TLS_REQUIRE}};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        if (!strcmp(v, modes[i].name)) {
            *out = modes[i].mode;
            return true;
        }
    return false;
}

static int bad_value(const char *flag, const char *v)
{
    fprintf(stderr, "minidoc serve: bad value '%s' for %s\n", v, flag);
    return 2;
}

int srv_main(int argc, char **argv)
{
    srv_config cfg = {.bind = "127.0.0.1", .port = 27017, .compressors = "snappy,zstd,zlib"};
    const char *opts_json = NULL, *logpath = NULL, *v;
    bool quiet = false;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "serve"))
            continue;
        if ((v = arg_value(argc, argv, &i, "--dbpath")))
            cfg.dbpath = v;
        else if ((v = arg_value(argc, argv, &i, "--bind")) ||
                 (v = arg_value(argc, argv, &i, "--bind_ip")))
            cfg.bind = v;
        else if ((v = arg_value(argc, argv, &i, "--engine")))
            cfg.engine = v;
        else if ((v = arg_value(argc, argv, &i, "--opts")))
            opts_json = v;
        else if ((v = arg_value(argc, argv, &i, "--logpath")))
            logpath = v;
        else if ((v = arg_value(argc, argv, &i, "--networkMessageCompressors")))
            cfg.compressors = strcmp(v, "disabled") ? v : "";
        else if ((v = arg_value(argc, argv, &i, "--port"))) {
            if (!int_arg(v, 0, 65535, &cfg.port))
                return bad_value("--port", v);
        } else if ((v = arg_value(argc, argv, &i, "--maxConns"))) {
            if (!int_arg(v, 1, 1 << 30, &cfg.max_conns))
                return bad_value("--maxConns", v);
        } else if ((v = arg_value(argc, argv, &i, "--idleTimeoutSecs"))) {
            if (!int_arg(v, 0, 1 << 30, &cfg.idle_secs))
                return bad_value("--idleTimeoutSecs", v);
        } else if ((v = arg_value(argc, argv, &i, "--tlsMode")) ||
                   (v = arg_value(argc, argv, &i, "--sslMode"))) {
            if (!tls_mode_arg(v, &cfg.tls_mode))
                return bad_value("--tlsMode", v);
        } else if ((v = arg_value(argc, argv, &i, "--tlsCertificateKeyFile")) ||
                   (v = arg_value(argc, argv, &i, "--sslPEMKeyFile")))
            cfg.tls_cert = v;
        else if ((v = arg_value(argc, argv, &i, "--tlsCAFile")) ||
                 (v = arg_value(argc, argv, &i, "--sslCAFile")))
            cfg.tls_ca = v;
        else if (!strcmp(argv[i], "--tlsAllowConnectionsWithoutCertificates") ||
                 !strcmp(argv[i], "--sslAllowConnectionsWithoutCertificates"))
            cfg.tls_no_client_cert = true;
        else if (!strcmp(argv[i], "--auth"))
            cfg.auth = true;
        else if (!strcmp(argv[i], "--noauth"))
            cfg.auth = false;
        else if (!strcmp(argv[i], "--quiet"))
            quiet = true;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "minidoc serve: unexpected argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!cfg.dbpath) {
        fprintf(stderr, "minidoc serve: --dbpath is required\n");
        usage(stderr);
        return 2;
    }
    bson_t *opts = NULL;
    if (opts_json) {
        md_error jerr;
        bson_t parsed;
        if (md_json_parse(opts_json, -1, &parsed, &jerr) != 0) {
            fprintf(stderr, "minidoc serve: --opts is not valid JSON: %s\n", jerr.message);
            bson_destroy(&parsed);
            return 2;
        }
        opts = bson_copy(&parsed);
        bson_destroy(&parsed);
        cfg.open_opts = opts;
    }
    FILE *log = stdout;
    if (logpath && !(log = fopen(logpath, "a"))) {
        fprintf(stderr, "minidoc serve: cannot open --logpath %s\n", logpath);
        return 2;
    }
    srv_log_open(log, quiet);
    bson_t a = BSON_INITIALIZER;
    BSON_APPEND_INT64(&a, "pid", (int64_t)getpid());
    BSON_APPEND_INT32(&a, "port", cfg.port);
    BSON_APPEND_UTF8(&a, "dbPath", cfg.dbpath);
    BSON_APPEND_UTF8(&a, "version", MD_VERSION_STRING);
    srv_log(SRV_LOG_I, "CONTROL", 4615611, "initandlisten", "minidoc serve starting", &a);
    bson_destroy(&a);
    srv *s = NULL;
    md_error err;
    int rc = srv_new(&cfg, &s, &err);
    if (opts)
        bson_destroy(opts);
    if (rc) {
        bson_t e = BSON_INITIALIZER;
        BSON_APPEND_UTF8(&e, "error", err.message);
        srv_log(SRV_LOG_E, "CONTROL", 20568, "initandlisten", "Error during startup", &e);
        bson_destroy(&e);
        fprintf(stderr, "minidoc serve: %s\n", err.message);
        srv_destroy(s);
        return 1;
    }
    if (!cfg.auth)
        srv_log(SRV_LOG_W, "CONTROL", 22120, "initandlisten",
                "Access control is not enabled for the database. Read and write access to data "
                "and configuration is unrestricted", NULL);
    else
        srv_log(SRV_LOG_I, "ACCESS", 9990002, "initandlisten",
                "Access control is enabled: SCRAM-SHA-256 authentication is required",
                NULL);
    if (strcmp(cfg.bind, "127.0.0.1") != 0 && !cfg.auth)
        srv_log(SRV_LOG_W, "CONTROL", 22140, "initandlisten",
                "This server is bound to an address other than localhost, without "
                "authentication: anyone who can reach it can read and change every database",
                NULL);
    the_server = s;
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    srv_run(s);
    srv_log(SRV_LOG_I, "CONTROL", 4784923, "SignalHandler", "Shutting down: closing every "
            "database (flushing the engines)", NULL);
    srv_destroy(s);
    the_server = NULL;
    bson_t x = BSON_INITIALIZER;
    BSON_APPEND_INT32(&x, "exitCode", 0);
    srv_log(SRV_LOG_I, "CONTROL", 23138, "SignalHandler", "Shutting down", &x);
    bson_destroy(&x);
    if (log != stdout)
        fclose(log);
    return 0;
}
