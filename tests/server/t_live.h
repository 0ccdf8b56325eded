/*
 * t_live.h -- a `minidoc serve` running in the test's process, on a port
 * of its own on 127.0.0.1 and a temporary directory, for the server tests
 * that speak to it through sockets (test_srv_wire.c, test_srv_auth.c,
 * test_srv_tls.c):
 *
 *   t_live_dir(l, "md_srv")   make l->dir (/tmp/md_srv_XXXXXX)
 *   t_live_run(l, &cfg)       srv_new(cfg) and srv_run on a thread
 *   t_dial(l)                 a connected socket
 *   t_live_stop(l)            srv_stop, join, srv_destroy, remove l->dir
 */
#ifndef T_LIVE_H
#define T_LIVE_H

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <ftw.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "srv.h"

typedef struct live {
    srv *s;
    pthread_t t;
    char dir[64];
    char pem[128], crt[128]; /* test_srv_tls.c's certificate files */
} live;

static inline void *t_live_thread(void *arg)
{
    srv_run(arg);
    return NULL;
}

static inline void t_live_dir(live *l, const char *prefix)
{
    snprintf(l->dir, sizeof l->dir, "/tmp/%s_XXXXXX", prefix);
    cr_assert(mkdtemp(l->dir));
}

/* cfg->dbpath unset: l->dir. */
static inline void t_live_run(live *l, srv_config *cfg)
{
    md_error err;
    if (!cfg->dbpath)
        cfg->dbpath = l->dir;
    srv_log_open(NULL, true);
    cr_assert_eq(srv_new(cfg, &l->s, &err), 0, "%s", err.message);
    cr_assert_eq(pthread_create(&l->t, NULL, t_live_thread, l->s), 0);
}

static inline int t_live_rm(const char *p, const struct stat *st, int f, struct FTW *w)
{
    return remove(p);
}

static inline void t_live_stop(live *l)
{
    srv_stop(l->s);
    pthread_join(l->t, NULL);
    srv_destroy(l->s);
    nftw(l->dir, t_live_rm, 8, FTW_DEPTH | FTW_PHYS);
}

static inline int t_dial(const live *l)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)srv_port(l->s))};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    return fd;
}

#endif
