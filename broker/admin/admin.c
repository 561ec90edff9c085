/*
 * admin.c - the admin listener: its setting, its sockets, libmicrohttpd's
 * daemon and the routes.
 *
 *   GET /metrics     Prometheus text format (metrics.c)
 *   GET /v1/health   200 while the process serves
 *   GET /v1/ready    200, or 503 with the reasons (status.c)
 *   GET /v1/status   JSON: brokers, topics, partitions (status.c)
 *   anything else    404; a method other than GET / HEAD 405; what HTTP
 *                    cannot parse is answered 400 by libmicrohttpd, headers
 *                    past ADMIN_HEADER_BYTES 431 (strict parsing: an
 *                    HTTP/1.1 request without Host, a header line without
 *                    a colon are 400).
 *
 * The sockets are bound here, not by libmicrohttpd, so a port in use stops
 * start-up with the address and errno's words.  The daemon uses epoll
 * (stratad's descriptors pass FD_SETSIZE), bounds its connections and their
 * idle time, and never runs a handler on a broker thread.
 */
#include "admin.h"

#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#define ADMIN_CONNECTIONS 64        /* at once, per listener */
#define ADMIN_IDLE_TIMEOUT_S 10     /* a connection silent this long is closed */
#define ADMIN_HEADER_BYTES (32 * 1024) /* request line and headers */


/* ---- the server ------------------------------------------------------------ */

struct st_admin {
    struct MHD_Daemon *daemons[ADMIN_MAX_LISTENERS];
    int ports[ADMIN_MAX_LISTENERS];
    int n;
    pthread_rwlock_t lock; /* src, attached, stopping */
    st_admin_sources_t src;
    st_admin_lag_t *lag; /* /v1/status's memory of group commits */
    int attached;
    int detached; /* shutting down */
};

static void mhd_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t l = strlen(line);
    while (l > 0 && (line[l - 1] == '\n' || line[l - 1] == '\r')) line[--l] = 0;
    ST_LOG_RATELIMITED(ST_LOG_WARN, "admin", 10000, "http: %s", line);
}

static enum MHD_Result respond(struct MHD_Connection *conn, unsigned code, const char *type,
                               char *body_take, size_t len) {
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, body_take, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body_take);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    enum MHD_Result ok = MHD_queue_response(conn, code, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result respond_json(struct MHD_Connection *conn, unsigned code, char *json_take) {
    size_t n = strlen(json_take);
    /* a trailing newline for people reading it with curl */
    char *b = st_realloc(json_take, n + 2);
    b[n] = '\n';
    b[n + 1] = 0;
    return respond(conn, code, "application/json", b, n + 1);
}

/* console.html, built in (see CMakeLists.txt) */
extern const unsigned char st_admin_console_html[];
extern const size_t st_admin_console_html_len;

static char *json_error(const char *what) {
    /* what is one of ours (no quotes to escape) */
    return st_strprintf("{\"error\":\"%s\"}", what);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
    (void)version;
    (void)upload_data;
    st_admin_t *a = cls;
    int get = !strcmp(method, MHD_HTTP_METHOD_GET) || !strcmp(method, MHD_HTTP_METHOD_HEAD);
    if (!*con_cls && get) {
        /* the headers are in: answer once the (empty) body is, so that
         * the connection can stay open for the next scrape */
        st_thread_set_name("admin-http");
        *con_cls = a;
        return MHD_YES;
    }
    if (get && *upload_data_size) {
        *upload_data_size = 0; /* a body is never read */
        return MHD_YES;
    }
    if (!get) {
        struct MHD_Response *r =
            MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
        if (!r) return MHD_NO;
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
        enum MHD_Result ok = MHD_queue_response(conn, MHD_HTTP_METHOD_NOT_ALLOWED, r);
        MHD_destroy_response(r);
        return ok;
    }
    if (!strcmp(url, "/v1/health"))
        return respond_json(conn, MHD_HTTP_OK, st_strdup("{\"status\":\"ok\"}"));
    if (!strcmp(url, "/")) { /* the page reads /v1/status itself */
        char *page = st_malloc(st_admin_console_html_len + 1);
        memcpy(page, st_admin_console_html, st_admin_console_html_len);
        return respond(conn, MHD_HTTP_OK, "text/html; charset=utf-8", page, st_admin_console_html_len);
    }
    int route = !strcmp(url, "/metrics") ? 1 : !strcmp(url, "/v1/ready") ? 2
              : !strcmp(url, "/v1/status") ? 3 : 0;
    if (!route) return respond_json(conn, MHD_HTTP_NOT_FOUND, json_error("no such path"));

    pthread_rwlock_rdlock(&a->lock);
    enum MHD_Result ok;
    if (!a->attached) {
        const char *why = a->detached ? "shutting down" : "starting";
        if (route == 2)
            ok = respond_json(conn, MHD_HTTP_SERVICE_UNAVAILABLE,
                              st_strprintf("{\"ready\":false,\"reasons\":[\"%s\"]}", why));
        else
            ok = respond_json(conn, MHD_HTTP_SERVICE_UNAVAILABLE, json_error(why));
    } else if (route == 1) {
        st_buf_t b;
        st_buf_init(&b);
        st_admin__metrics(&a->src, &b);
        size_t len = b.len;
        char *data = (char *)b.data;
        if (!data) data = st_strdup(""); /* nothing written */
        ok = respond(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", data, len);
    } else if (route == 2) {
        char *body = NULL;
        int ready = st_admin__ready(&a->src, &body);
        ok = respond_json(conn, ready ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, body);
    } else {
        ok = respond_json(conn, MHD_HTTP_OK, st_admin__status(&a->src, a->lag));
    }
    pthread_rwlock_unlock(&a->lock);
    return ok;
}

static int bind_one(const st_admin_addr_t *ad, int *fd_out, int *port_out, char *err, size_t errlen) {
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char port[8];
    snprintf(port, sizeof port, "%d", ad->port);
    int gai = st_getaddrinfo(ad->host[0] ? ad->host : NULL, port, &hints, &res);
    if (gai) {
        snprintf(err, errlen, "admin.listeners: cannot resolve '%s': %s", ad->host,
                 gai_strerror(gai));
        return -1;
    }
    int fd = -1, saved = 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        /* the first address that binds (no host: the wildcard getaddrinfo gives first) */
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            saved = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 64) == 0) break;
        saved = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) {
        snprintf(err, errlen, "admin.listeners: cannot listen on %s:%d: %s",
                 ad->host[0] ? ad->host : "*", ad->port, strerror(saved));
        return -1;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    int bound = ad->port;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
        bound = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                         : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    *fd_out = fd;
    *port_out = bound;
    return 0;
}

st_err_t st_admin_start(const st_admin_config_t *cfg, st_admin_t **out, char *err,
                        size_t errlen) {
    *out = NULL;
    st_admin_addr_t addrs[ADMIN_MAX_LISTENERS];
    int n = 0;
    char why[256];
    if (st_admin_parse_listeners(cfg->listeners ? cfg->listeners : "", addrs, &n, why, sizeof why)) {
        snprintf(err, errlen, "admin.listeners: %s", why);
        return ST_E_CONFIG;
    }
    if (n == 0) return ST_OK;
    st_admin_t *a = st_calloc(1, sizeof *a);
    pthread_rwlock_init(&a->lock, NULL);
    a->lag = st_admin__lag_new();
    for (int i = 0; i < n; i++) {
        int fd, port;
        if (bind_one(&addrs[i], &fd, &port, err, errlen)) goto fail;
        a->daemons[i] = MHD_start_daemon(
            MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC | MHD_USE_ERROR_LOG, 0,
            NULL, NULL, on_request, a,
            MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, /* first, so that it sees everything */
            MHD_OPTION_LISTEN_SOCKET, fd,
            MHD_OPTION_CONNECTION_LIMIT, (unsigned)ADMIN_CONNECTIONS,
            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)ADMIN_IDLE_TIMEOUT_S,
            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)ADMIN_HEADER_BYTES,
            MHD_OPTION_STRICT_FOR_CLIENT, 1,
            MHD_OPTION_END);
        if (!a->daemons[i]) {
            close(fd);
            snprintf(err, errlen, "admin.listeners: cannot start the HTTP server on %s:%d",
                     addrs[i].host[0] ? addrs[i].host : "*", port);
            goto fail;
        }
        a->ports[i] = port;
        a->n = i + 1;
        ST_INFO("admin", "admin listener serving at http://%s:%d (/metrics, /v1/health, "
                         "/v1/ready, /v1/status)",
                addrs[i].host[0] ? addrs[i].host : "*", port);
    }
    *out = a;
    return ST_OK;
fail:
    st_admin_stop(a);
    return ST_E_CONFIG;
}

int st_admin_bound_port(const st_admin_t *a, int listener) {
    return a && listener >= 0 && listener < a->n ? a->ports[listener] : -1;
}

void st_admin_attach(st_admin_t *a, const st_admin_sources_t *src) {
    if (!a) return;
    pthread_rwlock_wrlock(&a->lock);
    a->src = *src;
    a->attached = 1;
    pthread_rwlock_unlock(&a->lock);
}

void st_admin_detach(st_admin_t *a) {
    if (!a) return;
    pthread_rwlock_wrlock(&a->lock); /* waits for handlers using src */
    memset(&a->src, 0, sizeof a->src);
    a->attached = 0;
    a->detached = 1;
    pthread_rwlock_unlock(&a->lock);
}

void st_admin_stop(st_admin_t *a) {
    if (!a) return;
    for (int i = 0; i < ADMIN_MAX_LISTENERS; i++) {
        if (!a->daemons[i]) continue;
        /* the daemon does not close a listen socket it was given */
        MHD_socket fd = MHD_quiesce_daemon(a->daemons[i]);
        MHD_stop_daemon(a->daemons[i]);
        if (fd != MHD_INVALID_SOCKET) close(fd);
    }
    pthread_rwlock_destroy(&a->lock);
    st_admin__lag_free(a->lag);
    free(a);
}
