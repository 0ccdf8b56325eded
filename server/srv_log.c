/*
 * srv_log.c -- the server's log: one JSON document per line, in MongoDB
 * 4.4's structured shape
 *
 *   {"t":{"$date":"2026-11-25T15:52:44.123+00:00"},"s":"I","c":"NETWORK",
 *    "id":22943,"ctx":"listener","msg":"Connection accepted",
 *    "attr":{"remote":"127.0.0.1:53214","connectionId":1,"connectionCount":1}}
 *
 * The ids are MongoDB's own where the message is one of mongod's (22943
 * connection accepted, 22944 connection ended, 51800 client metadata, 23016
 * waiting for connections, 4784923 shutting down, ...); messages mongod has
 * no counterpart for use ids from 9990000 (9990001: idle timeout).  The last
 * 1024 lines
 * stay in memory for getLog: "global", and the warnings written before the
 * server listened for getLog: "startupWarnings".  One mutex orders the
 * lines of concurrent threads.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "srv.h"

#define RING 1024
#define WARN_MAX 32

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static FILE *log_out;
static bool log_quiet;
static char *ring[RING];
static int64_t ring_total;
static char *warnings[WARN_MAX];
static int nwarn;
static bool listening;

void srv_log_open(FILE *out, bool quiet)
{
    pthread_mutex_lock(&log_mu);
    log_out = out;
    log_quiet = quiet;
    pthread_mutex_unlock(&log_mu);
}

static void json_str(bson_string_t *s, const char *v)
{
    char *esc = bson_utf8_escape_for_json(v, -1);
    bson_string_append_printf(s, "\"%s\"", esc ? esc : "");
    bson_free(esc);
}

void srv_log(srv_sev sev, const char *component, int id, const char *ctx, const char *msg,
             const bson_t *attr)
{
    struct timeval tv;
    struct tm tm;
    char date[40];
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
    bson_string_t *s = bson_string_new(NULL);
    bson_string_append_printf(s, "{\"t\":{\"$date\":\"%s.%03d+00:00\"},\"s\":\"%c\",\"c\":",
                              date, (int)(tv.tv_usec / 1000), (char)sev);
    json_str(s, component);
    bson_string_append_printf(s, ",\"id\":%d,\"ctx\":", id);
    json_str(s, ctx);
    bson_string_append(s, ",\"msg\":");
    json_str(s, msg);
    if (attr && !bson_empty(attr)) {
        size_t n;
        char *a = bson_as_relaxed_extended_json(attr, &n);
        if (a) {
            /* libbson writes "{ \"k\" : v }": fine JSON, kept as it is */
            bson_string_append(s, ",\"attr\":");
            bson_string_append(s, a);
            bson_free(a);
        }
    }
    bson_string_append(s, "}");
    char *line = bson_string_free(s, false);
    pthread_mutex_lock(&log_mu);
    if (log_out && !log_quiet) {
        fprintf(log_out, "%s\n", line);
        fflush(log_out);
    }
    if (sev != SRV_LOG_I && !listening && nwarn < WARN_MAX)
        warnings[nwarn++] = bson_strdup(line);
    if (strcmp(msg, "Waiting for connections") == 0)
        listening = true;
    int slot = (int)(ring_total++ % RING);
    bson_free(ring[slot]);
    ring[slot] = line;
    pthread_mutex_unlock(&log_mu);
}

/* {totalLinesWritten, log: [...]} as getLog answers. */
void srv_log_get(const char *which, bson_t *reply)
{
    bson_t arr;
    char key[16];
    const char *k;
    uint32_t i = 0;
    pthread_mutex_lock(&log_mu);
    if (strcmp(which, "global") == 0) {
        BSON_APPEND_INT64(reply, "totalLinesWritten", ring_total);
        BSON_APPEND_ARRAY_BEGIN(reply, "log", &arr);
        int64_t first = ring_total > RING ? ring_total - RING : 0;
        for (int64_t n = first; n < ring_total; n++) {
            bson_uint32_to_string(i++, &k, key, sizeof key);
            BSON_APPEND_UTF8(&arr, k, ring[n % RING]);
        }
        bson_append_array_end(reply, &arr);
    } else {
        BSON_APPEND_INT64(reply, "totalLinesWritten", nwarn);
        BSON_APPEND_ARRAY_BEGIN(reply, "log", &arr);
        for (int n = 0; n < nwarn; n++) {
            bson_uint32_to_string(i++, &k, key, sizeof key);
            BSON_APPEND_UTF8(&arr, k, warnings[n]);
        }
        bson_append_array_end(reply, &arr);
    }
    pthread_mutex_unlock(&log_mu);
}
