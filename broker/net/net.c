/*
 * net.c - epoll loops, framing, ordered responses, sendfile.
 *
 * Ownership: a loop owns its connections; a connection is freed when it is
 * closed and its last pending request is done (conn->refs counts the loop's
 * reference plus one per unfinished request).  Everything here runs on the
 * owning loop's thread except st_loop_post / st_loop_wake.
 */
#include "net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define MIN_FRAME 8 /* api key, version, correlation id */

typedef struct mail {
    struct mail *next;
    st_job_cb fn;
    void *arg;
} mail_t;

struct st_conn {
    int fd;
    st_loop_t *loop;
    int refs;
    int closed;
    char peer[64];
    /* reading */
    uint8_t sizebuf[4];
    size_t sizegot;
    uint8_t *frame;
    size_t framelen, framegot;
    int paused; /* EPOLLIN off: too many requests in flight */
    int want_out;
    /* requests in arrival order; responses leave from the head */
    st_request_t *head, *tail;
    int inflight;
    size_t chunk;      /* position in head's response chain */
    int64_t chunk_off;
    int64_t last_active_ms;
    struct st_conn *next_all, *prev_all;
};

struct st_loop {
    st_net_t *net;
    int index;
    int epfd;
    int evfd;
    pthread_t thread;
    pthread_mutex_t mail_lock;
    mail_t *mail_head, *mail_tail;
    int woken; /* atomic */
    void *user;
    st_conn_t *conns;
    int stopping;
    int requests; /* not yet freed, on open or closed connections */
};

typedef struct listener {
    int fd;
    int port;
} listener_t;

struct st_net {
    st_net_config_t cfg;
    st_net_hooks_t hooks;
    st_loop_t *loops;
    int nloops;
    listener_t *listeners;
    int nlisteners;
    unsigned next_loop;
    int started;
};

/* epoll data: listeners are tagged with the low bit set */
#define TAG_LISTENER 1u
#define TAG_EVENTFD 2u

static void conn_close(st_conn_t *c, const char *why);
static void conn_flush(st_conn_t *c);

/* ---- loops and mailboxes -------------------------------------------------- */

int st_loop_index(const st_loop_t *loop) { return loop->index; }
void *st_loop_user(st_loop_t *loop) { return loop->user; }
void st_loop_set_user(st_loop_t *loop, void *user) { loop->user = user; }
int st_net_nloops(st_net_t *n) { return n->nloops; }
st_loop_t *st_net_loop(st_net_t *n, int i) { return &n->loops[i]; }

static void loop_kick(st_loop_t *loop) {
    uint64_t one = 1;
    if (write(loop->evfd, &one, sizeof one) < 0) { /* counter saturated: already kicked */ }
}

void st_loop_post(st_loop_t *loop, st_job_cb fn, void *arg) {
    mail_t *m = st_malloc(sizeof *m);
    m->next = NULL;
    m->fn = fn;
    m->arg = arg;
    pthread_mutex_lock(&loop->mail_lock);
    if (loop->mail_tail) loop->mail_tail->next = m;
    else loop->mail_head = m;
    loop->mail_tail = m;
    pthread_mutex_unlock(&loop->mail_lock);
    loop_kick(loop);
}

void st_loop_wake(st_loop_t *loop) {
    if (__atomic_exchange_n(&loop->woken, 1, __ATOMIC_ACQ_REL) == 0) loop_kick(loop);
}

static void conn_add(st_loop_t *loop, int fd);

static void loop_drain_mail(st_loop_t *loop) {
    uint64_t v;
    if (read(loop->evfd, &v, sizeof v) < 0) { /* nothing pending */ }
    pthread_mutex_lock(&loop->mail_lock);
    mail_t *m = loop->mail_head;
    loop->mail_head = loop->mail_tail = NULL;
    pthread_mutex_unlock(&loop->mail_lock);
    while (m) {
        mail_t *next = m->next;
        if (m->fn) m->fn(m->arg);
        else conn_add(loop, (int)(intptr_t)m->arg); /* an accepted socket */
        free(m);
        m = next;
    }
    if (__atomic_exchange_n(&loop->woken, 0, __ATOMIC_ACQ_REL) && loop->net->hooks.on_wake)
        loop->net->hooks.on_wake(loop, loop->net->hooks.arg);
}

/* ---- connections ---------------------------------------------------------- */

static void conn_update_events(st_conn_t *c) {
    struct epoll_event ev = {0};
    ev.events = (c->paused ? 0 : EPOLLIN) | (c->want_out ? EPOLLOUT : 0) | EPOLLRDHUP;
    ev.data.ptr = c;
    epoll_ctl(c->loop->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

static void conn_release(st_conn_t *c) {
    if (--c->refs > 0) return;
    free(c->frame);
    free(c);
}

static void request_free(st_request_t *req) {
    req->loop->requests--;
    st_chain_fini(&req->resp);
    st_arena_fini(&req->arena);
    free(req->frame);
    st_conn_t *c = req->conn;
    free(req);
    conn_release(c);
}

static void conn_add(st_loop_t *loop, int fd) {
    st_conn_t *c = st_calloc(1, sizeof *c);
    c->fd = fd;
    c->loop = loop;
    c->refs = 1;
    c->last_active_ms = st_mono_ms();
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET) {
            inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, host, sizeof host);
            port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        } else if (ss.ss_family == AF_INET6) {
            inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, host, sizeof host);
            port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
        }
    }
    snprintf(c->peer, sizeof c->peer, "%s:%d", host, port);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct epoll_event ev = {0};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.ptr = c;
    if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        close(fd);
        free(c);
        return;
    }
    c->next_all = loop->conns;
    if (loop->conns) loop->conns->prev_all = c;
    loop->conns = c;
    ST_DEBUG("net", "connection from %s", c->peer);
}

static void conn_close(st_conn_t *c, const char *why) {
    if (c->closed) return;
    c->closed = 1;
    if (why) ST_INFO("net", "closing connection from %s: %s", c->peer, why);
    epoll_ctl(c->loop->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    st_loop_t *loop = c->loop;
    if (c->prev_all) c->prev_all->next_all = c->next_all;
    else loop->conns = c->next_all;
    if (c->next_all) c->next_all->prev_all = c->prev_all;
    /* Requests already answered (or never to be) go now; parked ones are
     * freed when their operation completes and finds the connection gone. */
    st_request_t **pp = &c->head;
    while (*pp) {
        st_request_t *r = *pp;
        if (r->state != ST_REQ_PENDING) {
            *pp = r->next;
            request_free(r);
        } else {
            pp = &r->next;
        }
    }
    c->tail = NULL;
    for (st_request_t *r = c->head; r; r = r->next) c->tail = r;
    conn_release(c);
}

static void conn_enqueue(st_conn_t *c, st_request_t *req) {
    req->next = NULL;
    if (c->tail) c->tail->next = req;
    else c->head = req;
    c->tail = req;
    c->inflight++;
    if (c->inflight >= c->loop->net->cfg.max_inflight_per_conn && !c->paused) {
        c->paused = 1;
        conn_update_events(c);
    }
}

/* Decode a whole frame and hand it to the server. */
static void conn_dispatch(st_conn_t *c, uint8_t *frame, size_t len) {
    st_request_t *req = st_calloc(1, sizeof *req);
    req->conn = c;
    req->loop = c->loop;
    req->frame = frame;
    req->len = len;
    req->recv_us = st_mono_us();
    st_arena_init(&req->arena, 4096);
    st_chain_init(&req->resp);
    c->refs++;
    c->loop->requests++;
    conn_enqueue(c, req);
    st_err_t e = st_request_decode(frame, len, &req->arena, &req->hdr, &req->api, &req->body);
    if (e == ST_E_UNSUPPORTED_VERSION && req->api && req->api->key == ST_API_API_VERSIONS) {
        /* Answer in version 0 so the client can pick one we support. */
        req->body = NULL;
    } else if (e) {
        char why[160];
        if (!req->api)
            snprintf(why, sizeof why, "unknown API key %d", (int)(int16_t)st_be16_get(frame));
        else if (e == ST_E_UNSUPPORTED_VERSION)
            snprintf(why, sizeof why, "%s version %d is not supported (%d-%d)", req->api->name,
                     (int)req->hdr.api_version, req->api->min_ver, req->api->max_ver);
        else
            snprintf(why, sizeof why, "malformed %s v%d request", req->api->name,
                     (int)req->hdr.api_version);
        st_request_close_conn(req, why);
        st_request_no_response(req);
        return;
    }
    c->loop->net->hooks.on_request(req, c->loop->net->hooks.arg);
}

/* Read up to n bytes: > 0 read, 0 would block, -1 the connection closed. */
static ssize_t conn_recv(st_conn_t *c, void *buf, size_t n) {
    ssize_t got = read(c->fd, buf, n);
    if (got > 0) return got;
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
    conn_close(c, got < 0 ? strerror(errno) : NULL);
    return -1;
}

static void conn_read(st_conn_t *c) {
    for (int rounds = 0; rounds < 16 && !c->closed && !c->paused; rounds++) {
        if (!c->frame) {
            ssize_t n = conn_recv(c, c->sizebuf + c->sizegot, 4 - c->sizegot);
            if (n <= 0) return;
            c->sizegot += (size_t)n;
            if (c->sizegot < 4) continue;
            int32_t size = (int32_t)st_be32_get(c->sizebuf);
            c->sizegot = 0;
            if (size < MIN_FRAME || size > c->loop->net->cfg.max_request_bytes) {
                char why[128];
                snprintf(why, sizeof why,
                         "request size %d is outside [%d, socket.request.max.bytes=%lld]",
                         (int)size, MIN_FRAME, (long long)c->loop->net->cfg.max_request_bytes);
                conn_close(c, why);
                return;
            }
            c->frame = malloc((size_t)size);
            if (!c->frame) {
                conn_close(c, "out of memory for request");
                return;
            }
            c->framelen = (size_t)size;
            c->framegot = 0;
        }
        ssize_t n = conn_recv(c, c->frame + c->framegot, c->framelen - c->framegot);
        if (n <= 0) return;
        c->framegot += (size_t)n;
        c->last_active_ms = st_mono_ms();
        if (c->framegot == c->framelen) {
            uint8_t *frame = c->frame;
            size_t len = c->framelen;
            c->frame = NULL;
            conn_dispatch(c, frame, len);
        }
    }
}

/* Write what is ready, in order; returns when the socket is full or the
 * head is still being worked on. */
static void conn_flush(st_conn_t *c) {
    while (!c->closed && c->head && c->head->state != ST_REQ_PENDING) {
        st_request_t *r = c->head;
        if (r->state == ST_REQ_READY) {
            st_chain_t *ch = &r->resp;
            while (c->chunk < ch->nchunks) {
                st_chunk_t *k = &ch->chunks[c->chunk];
                ssize_t n;
                if (k->file) {
                    off_t off = (off_t)(k->off + c->chunk_off);
                    n = sendfile(c->fd, k->file->fd, &off, (size_t)(k->len - c->chunk_off));
                    if (n == 0) {
                        /* the file is shorter than promised: never send a
                         * frame whose length lies */
                        conn_close(c, "file range vanished while sending");
                        return;
                    }
                } else {
                    struct iovec iov[16];
                    int niov = 0;
                    for (size_t i = c->chunk; i < ch->nchunks && niov < 16 && !ch->chunks[i].file;
                         i++) {
                        int64_t skip = i == c->chunk ? c->chunk_off : 0;
                        iov[niov].iov_base = ch->mem.data + ch->chunks[i].off + skip;
                        iov[niov].iov_len = (size_t)(ch->chunks[i].len - skip);
                        niov++;
                    }
                    n = writev(c->fd, iov, niov);
                }
                if (n < 0) {
                    if (errno == EAGAIN || errno == EINTR) {
                        if (!c->want_out) {
                            c->want_out = 1;
                            conn_update_events(c);
                        }
                        return;
                    }
                    conn_close(c, strerror(errno));
                    return;
                }
                /* advance over n bytes */
                int64_t left = n;
                while (left > 0 && c->chunk < ch->nchunks) {
                    int64_t room = ch->chunks[c->chunk].len - c->chunk_off;
                    if (left >= room) {
                        left -= room;
                        c->chunk++;
                        c->chunk_off = 0;
                    } else {
                        c->chunk_off += left;
                        left = 0;
                    }
                }
            }
        }
        c->head = r->next;
        if (!c->head) c->tail = NULL;
        c->chunk = 0;
        c->chunk_off = 0;
        c->inflight--;
        c->last_active_ms = st_mono_ms();
        request_free(r);
    }
    if (c->closed) return;
    int want_out = 0;
    int paused = c->inflight >= c->loop->net->cfg.max_inflight_per_conn ||
                 __atomic_load_n(&c->loop->stopping, __ATOMIC_ACQUIRE);
    if (want_out != c->want_out || paused != c->paused) {
        c->want_out = want_out;
        c->paused = paused;
        conn_update_events(c);
    }
}

/* ---- requests ------------------------------------------------------------- */

void st_request_respond(st_request_t *req, const void *body) {
    st_response_encode(req->api, req->hdr.api_version, req->hdr.correlation_id, body, &req->resp);
    req->state = ST_REQ_READY;
    ST_LOG(ST_LOG_TRACE, "net", "%s v%d from %s answered in %lld us", req->api->name,
           (int)req->hdr.api_version, req->conn->peer,
           (long long)(st_mono_us() - req->recv_us));
    if (req->conn->closed) {
        /* nobody to send to: drop it now */
        st_conn_t *c = req->conn;
        st_request_t **pp = &c->head;
        while (*pp && *pp != req) pp = &(*pp)->next;
        if (*pp) *pp = req->next;
        request_free(req);
        return;
    }
    conn_flush(req->conn);
}

void st_request_no_response(st_request_t *req) {
    req->state = ST_REQ_NONE;
    if (req->conn->closed) {
        st_conn_t *c = req->conn;
        st_request_t **pp = &c->head;
        while (*pp && *pp != req) pp = &(*pp)->next;
        if (*pp) *pp = req->next;
        request_free(req);
        return;
    }
    conn_flush(req->conn);
}

void st_request_close_conn(st_request_t *req, const char *why) {
    /* Responses already queued before this request still go out? Kafka
     * drops the connection at once; so do we. */
    req->conn->refs++; /* keep c valid until this returns */
    st_conn_t *c = req->conn;
    conn_close(c, why);
    conn_release(c);
}

int st_request_conn_open(const st_request_t *req) { return !req->conn->closed; }
const char *st_request_peer(const st_request_t *req) { return req->conn->peer; }

/* ---- listeners and threads ------------------------------------------------ */

static void accept_all(st_net_t *n, listener_t *l) {
    for (;;) {
        int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
                ST_LOG_RATELIMITED(ST_LOG_WARN, "net", 5000, "accept: %s", strerror(errno));
            return;
        }
        if (__atomic_load_n(&n->loops[0].stopping, __ATOMIC_ACQUIRE)) {
            close(fd); /* shutting down: no new connections */
            continue;
        }
        st_loop_t *target = &n->loops[n->next_loop++ % (unsigned)n->nloops];
        if (target == &n->loops[0]) {
            conn_add(target, fd);
        } else {
            /* mail without a function carries an accepted socket */
            st_loop_post(target, NULL, (void *)(intptr_t)fd);
        }
    }
}

static void *loop_main(void *arg) {
    st_loop_t *loop = arg;
    st_net_t *n = loop->net;
    char name[16];
    snprintf(name, sizeof name, "net-%d", loop->index);
    st_thread_set_name(name);
    struct epoll_event evs[64];
    int64_t drain_deadline = 0;
    for (;;) {
        int64_t now = st_mono_ms();
        int64_t wait = n->hooks.on_tick ? n->hooks.on_tick(loop, now, n->hooks.arg) : -1;
        if (wait < 0 || wait > 1000) wait = 1000;
        if (__atomic_load_n(&loop->stopping, __ATOMIC_ACQUIRE)) {
            /* Draining: read nothing more, expire whatever is parked (again
             * each round: a controller reply may have parked more), and wait
             * until every request is answered or the deadline passes. */
            if (!drain_deadline) {
                drain_deadline = now + 5000;
                for (st_conn_t *c = loop->conns; c; c = c->next_all) {
                    c->paused = 1;
                    conn_update_events(c);
                }
            }
            if (n->hooks.on_drain) n->hooks.on_drain(loop, n->hooks.arg);
            int busy = loop->requests > 0;
            for (st_conn_t *c = loop->conns; c && !busy; c = c->next_all) busy = c->head != NULL;
            if (!busy || now >= drain_deadline) break;
            wait = 20;
        }
        int k = epoll_wait(loop->epfd, evs, 64, (int)wait);
        for (int i = 0; i < k; i++) {
            uintptr_t tag = (uintptr_t)evs[i].data.ptr;
            if (tag == TAG_EVENTFD) {
                loop_drain_mail(loop);
            } else if (tag & TAG_LISTENER) {
                accept_all(n, (listener_t *)(tag & ~(uintptr_t)TAG_LISTENER));
            } else {
                st_conn_t *c = evs[i].data.ptr;
                c->refs++;
                if (evs[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) conn_read(c);
                if (!c->closed && (evs[i].events & EPOLLOUT)) conn_flush(c);
                if (!c->closed && (evs[i].events & (EPOLLHUP | EPOLLERR)) && !(evs[i].events & EPOLLIN))
                    conn_close(c, NULL);
                conn_release(c);
            }
        }
        /* idle connections */
        if (n->cfg.idle_timeout_ms > 0) {
            int64_t t = st_mono_ms();
            for (st_conn_t *c = loop->conns, *next; c; c = next) {
                next = c->next_all;
                if (!c->head && t - c->last_active_ms > n->cfg.idle_timeout_ms)
                    conn_close(c, "idle longer than connections.max.idle.ms");
            }
        }
    }
    while (loop->conns) conn_close(loop->conns, NULL);
    return NULL;
}

static st_err_t listen_on(const st_listener_spec_t *spec, listener_t *l, char *err,
                          size_t errlen) {
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    char port[16];
    snprintf(port, sizeof port, "%d", spec->port);
    const char *host = spec->host[0] ? spec->host : NULL;
    int rc = getaddrinfo(host, port, &hints, &res);
    if (rc) {
        snprintf(err, errlen, "listeners: cannot resolve %s: %s", spec->host, gai_strerror(rc));
        return ST_E_CONFIG;
    }
    int fd = -1;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) continue;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 1024) == 0) break;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) {
        snprintf(err, errlen, "listeners: cannot listen on %s:%d: %s", spec->host, spec->port,
                 strerror(errno));
        return ST_E_CONFIG;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    l->fd = fd;
    l->port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                       : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    return ST_OK;
}

st_err_t st_net_new(const st_net_config_t *cfg, const st_net_hooks_t *hooks, st_net_t **out,
                    char *err, size_t errlen) {
    st_net_t *n = st_calloc(1, sizeof *n);
    n->cfg = *cfg;
    n->hooks = *hooks;
    n->nloops = cfg->nthreads < 1 ? 1 : cfg->nthreads;
    n->loops = st_calloc((size_t)n->nloops, sizeof *n->loops);
    n->listeners = st_calloc((size_t)cfg->nlisteners + 1, sizeof *n->listeners);
    for (int i = 0; i < cfg->nlisteners; i++) {
        n->listeners[i].fd = -1;
        st_err_t e = listen_on(&cfg->listeners[i], &n->listeners[i], err, errlen);
        if (e) {
            n->nlisteners = i;
            st_net_destroy(n);
            return e;
        }
    }
    n->nlisteners = cfg->nlisteners;
    for (int i = 0; i < n->nloops; i++) {
        st_loop_t *loop = &n->loops[i];
        loop->net = n;
        loop->index = i;
        loop->epfd = epoll_create1(EPOLL_CLOEXEC);
        loop->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        pthread_mutex_init(&loop->mail_lock, NULL);
        struct epoll_event ev = {0};
        ev.events = EPOLLIN;
        ev.data.ptr = (void *)(uintptr_t)TAG_EVENTFD;
        epoll_ctl(loop->epfd, EPOLL_CTL_ADD, loop->evfd, &ev);
    }
    for (int i = 0; i < n->nlisteners; i++) {
        struct epoll_event ev = {0};
        ev.events = EPOLLIN;
        ev.data.ptr = (void *)((uintptr_t)&n->listeners[i] | TAG_LISTENER);
        epoll_ctl(n->loops[0].epfd, EPOLL_CTL_ADD, n->listeners[i].fd, &ev);
    }
    *out = n;
    return ST_OK;
}

int st_net_bound_port(st_net_t *n, int listener) {
    return listener < n->nlisteners ? n->listeners[listener].port : -1;
}

void st_net_start(st_net_t *n) {
    for (int i = 0; i < n->nloops; i++) pthread_create(&n->loops[i].thread, NULL, loop_main, &n->loops[i]);
    n->started = 1;
}

static void stop_listening(void *arg) {
    st_net_t *n = arg;
    for (int i = 0; i < n->nlisteners; i++) {
        if (n->listeners[i].fd < 0) continue;
        epoll_ctl(n->loops[0].epfd, EPOLL_CTL_DEL, n->listeners[i].fd, NULL);
        close(n->listeners[i].fd);
        n->listeners[i].fd = -1;
    }
}

void st_net_stop(st_net_t *n) {
    if (!n->started) return;
    st_loop_post(&n->loops[0], stop_listening, n);
    for (int i = 0; i < n->nloops; i++) {
        __atomic_store_n(&n->loops[i].stopping, 1, __ATOMIC_RELEASE);
        loop_kick(&n->loops[i]);
    }
    for (int i = 0; i < n->nloops; i++) pthread_join(n->loops[i].thread, NULL);
    n->started = 0;
}

void st_net_destroy(st_net_t *n) {
    if (!n) return;
    for (int i = 0; i < n->nlisteners; i++)
        if (n->listeners[i].fd >= 0) close(n->listeners[i].fd);
    for (int i = 0; i < n->nloops; i++) {
        st_loop_t *loop = &n->loops[i];
        if (!loop->net) continue;
        mail_t *m = loop->mail_head;
        while (m) {
            mail_t *next = m->next;
            if (!m->fn) close((int)(intptr_t)m->arg);
            free(m);
            m = next;
        }
        close(loop->epfd);
        close(loop->evfd);
        pthread_mutex_destroy(&loop->mail_lock);
    }
    free(n->loops);
    free(n->listeners);
    free(n);
}
