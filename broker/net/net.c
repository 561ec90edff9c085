/*
 * net.c - epoll loops, framing, ordered responses, sendfile, and the limits
 * on connections (max.connections, max.connections.per.ip, running out of
 * fds) and on request memory (queued.max.request.bytes).
 *
 * Ownership: a loop owns its connections; a connection is freed when it is
 * closed and its last pending request is done (conn->refs counts the loop's
 * reference plus one per unfinished request).  A frame's buffer belongs to
 * the connection while it is read, then to its request until the request
 * is freed; its bytes are charged to the memory pool all that time.
 *
 * Threads and locks: everything runs on the owning loop's thread except
 *   - st_loop_post / st_loop_wake (mail_lock, eventfd);
 *   - n->nconns: atomic; loop 0 counts up when it accepts, the owning loop
 *     down when it closes;
 *   - the per-IP counts (n->quota, quota.lock): loop 0 up, any loop down;
 *     kept only when a per-IP limit is set;
 *   - n->accept_state: written by loop 0 only, read by a closing loop
 *     (atomic) to know it must wake loop 0 (n->accept_kick + eventfd);
 *   - the memory pool (n->mem, mem.lock): any loop charges and releases.
 *     A connection waiting for memory sits on its own loop's wait list
 *     (loop thread only); loop->nwait, changed under mem.lock, tells a
 *     releasing thread which loops to wake (loop->mem_kick + eventfd).
 */
#include "net.h"
#include "transport.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define MIN_FRAME 8 /* api key, version, correlation id */

/* A frame's buffer grows as its bytes arrive, doubling from FRAME_FIRST_CAP
 * up to the announced size: a size alone reserves little.  From
 * FRAME_MAP_MIN on the buffer is its own mapping, grown with mremap (no
 * copy; munmap gives it back to the system at once). */
#define FRAME_FIRST_CAP (16 * 1024)
#define FRAME_MAP_MIN (128 * 1024)
/* Frames up to this size may use the pool's reserve for small requests. */
#define FRAME_SMALL (64 * 1024)

#define ACCEPT_BATCH 128           /* accepts per listener event */
#define ACCEPT_BACKOFF_MIN_MS 100  /* after EMFILE / ENFILE / ENOBUFS / ENOMEM */
#define ACCEPT_BACKOFF_MAX_MS 1000

typedef struct fbuf {
    uint8_t *p;
    size_t cap;
    int mapped;
    /* what the pool charged for it */
    int64_t main, reserve;
    int token; /* the one frame allowed past the bound */
} fbuf_t;

typedef struct mail {
    struct mail *next;
    st_job_cb fn;
    void *arg;
    int64_t posted_us;
} mail_t;

struct st_conn {
    int fd;
    st_tport_t *tp; /* what carries the bytes: plaintext or TLS */
    int tp_ready;   /* its handshake is done */
    int rd_out;     /* reading waits for the socket to be writable (TLS) */
    int wr_in;      /* writing waits for the socket to be readable (TLS) */
    int again;      /* on loop->again: the transport holds bytes epoll cannot see */
    void *state;    /* the server's (st_request_conn_set_state) */
    void (*state_free)(void *);
    struct st_conn *again_next;
    st_loop_t *loop;
    int refs;
    int closed;
    char peer[64];
    uint8_t ip[16];
    int ip_counted; /* counted in n->quota */
    int listener;   /* index of the listener that accepted it */
    /* reading */
    uint8_t sizebuf[4];
    size_t sizegot;
    fbuf_t fb;                 /* the frame being read */
    size_t framelen, framegot; /* framelen 0: reading the size */
    int paused;   /* too many requests in flight, or shutting down */
    int mem_wait; /* waiting for request memory (on loop->wait_*) */
    struct st_conn *wait_prev, *wait_next;
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
    int64_t wake_us;  /* atomic: when woken was set */
    int64_t cause_us; /* while a job or on_wake runs: when it was posted */
    st_request_t *dispatching; /* in its handler, until answered and freed */
    void *user;
    st_conn_t *conns;
    int stopping;
    int requests; /* not yet freed, on open or closed connections */
    st_conn_t *wait_head, *wait_tail; /* waiting for request memory, FIFO */
    int nwait;    /* their number (mem.lock) */
    int mem_kick; /* atomic: memory was released, retry the waiters */
    st_loop_ticker_t *tickers; /* outbound clients and other users (loop thread) */
    st_conn_t *again; /* connections to read again before waiting (kept) */
    int exited; /* atomic: its thread has run its last job and returned */
};

/* A request and the frame it was decoded from. */
typedef struct req_priv {
    st_request_t req;
    fbuf_t fb;
} req_priv_t;

/* Accepted on loop 0, handed to the loop that will own it. */
typedef struct accepted {
    st_loop_t *loop;
    int fd;
    struct sockaddr_storage addr;
    uint8_t ip[16];
    int ip_counted;
    int listener;
} accepted_t;

#define QUOTA_BUCKETS 1024

typedef struct ip_count {
    struct ip_count *next;
    uint8_t ip[16];
    int n;
} ip_count_t;

/* Connections per address (Kafka's ConnectionQuotas counts). */
typedef struct quota {
    int enabled;
    int per_ip;
    st_net_ip_limit_t *overrides;
    int noverrides;
    pthread_mutex_t lock;
    ip_count_t *buckets[QUOTA_BUCKETS];
} quota_t;

/* Bytes of requests being read or waiting for their answer.  The bound is
 * split: main_limit for any frame, reserve_limit (an eighth) only for
 * frames up to FRAME_SMALL, so that small requests are still read while
 * large ones fill the rest.  Frames grow within their share; when neither
 * has room, one frame at a time (the token holder) may grow past it, so a
 * request bigger than what is left is not starved and frames that are half
 * read cannot wait on each other forever.  That is Kafka's non-strict
 * SimpleMemoryPool: memory in use peaks at the bound plus one request. */
typedef struct mem_pool {
    int64_t bound; /* <= 0: none, and nothing below is used */
    int64_t main_limit, reserve_limit;
    pthread_mutex_t lock;
    int64_t main_used, reserve_used;
    int token_held;
    int64_t last_log_ms;
} mem_pool_t;

typedef struct listener {
    int fd;
    int port;
    st_tls_ctx_t *tls; /* borrowed; NULL: plaintext */
} listener_t;

enum { ACCEPT_ON = 0, ACCEPT_AT_LIMIT = 1, ACCEPT_BACKOFF = 2 };

struct st_net {
    /* per API key: time from a request's arrival to its end (response
     * written, or dropped); written by every loop (atomics) */
    st_histo_t request_time[ST_NET_API_KEYS];
    st_histo_t phase_time[ST_NET_PHASES][ST_NET_API_KEYS];
    st_net_config_t cfg;
    st_net_hooks_t hooks;
    st_loop_t *loops;
    int nloops;
    listener_t *listeners;
    int nlisteners;
    unsigned next_loop;
    int started;
    int nconns; /* atomic: accepted and not yet closed */
    quota_t quota;
    mem_pool_t mem;
    /* accepting (loop 0) */
    int accept_state; /* atomic; ACCEPT_* */
    int accept_kick;  /* atomic: a connection closed while not accepting */
    int64_t accept_resume_ms;
    int accept_backoff_ms;
};

/* epoll data: listeners are tagged with the low bit set, st_loop_io_t
 * handles (outbound clients) with bit 2; connections are untagged. */
#define TAG_LISTENER 1u
#define TAG_EVENTFD 2u
#define TAG_IO 4u

/* The loop whose thread this is (NULL on other threads). */
static __thread st_loop_t *current_loop;

static void conn_close(st_conn_t *c, const char *why);
static void conn_flush(st_conn_t *c);
static void conn_update_events(st_conn_t *c);
static void conn_release(st_conn_t *c);
static void conn_read(st_conn_t *c);
static void conn_add_job(void *arg);
static void mem_retry(st_loop_t *loop);

/* ---- loops and mailboxes -------------------------------------------------- */

int st_loop_index(const st_loop_t *loop) { return loop->index; }
st_loop_t *st_loop_current(void) { return current_loop; }

/* ---- file descriptors and tickers of other users (outbound clients) ------ */

st_err_t st_loop_io_add(st_loop_t *loop, st_loop_io_t *io, int fd, uint32_t events) {
    struct epoll_event ev = {0};
    ev.events = events;
    ev.data.ptr = (void *)((uintptr_t)io | TAG_IO);
    io->fd = fd;
    io->events = events;
    if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) return st_err_from_errno(errno);
    return ST_OK;
}

void st_loop_io_mod(st_loop_t *loop, st_loop_io_t *io, uint32_t events) {
    if (io->events == events) return;
    struct epoll_event ev = {0};
    ev.events = events;
    ev.data.ptr = (void *)((uintptr_t)io | TAG_IO);
    io->events = events;
    epoll_ctl(loop->epfd, EPOLL_CTL_MOD, io->fd, &ev);
}

void st_loop_io_del(st_loop_t *loop, st_loop_io_t *io) {
    epoll_ctl(loop->epfd, EPOLL_CTL_DEL, io->fd, NULL);
    io->fd = -1;
}

void st_loop_ticker_add(st_loop_t *loop, st_loop_ticker_t *t) {
    t->next = loop->tickers;
    loop->tickers = t;
}

/* Every ticker once; returns the earliest wait asked (-1: none).  A ticker
 * returning ST_LOOP_TICKER_DONE is unlinked without being touched again (it
 * may have freed itself). */
static int64_t loop_run_tickers(st_loop_t *loop, int64_t now) {
    int64_t wait = -1;
    for (st_loop_ticker_t **pp = &loop->tickers; *pp;) {
        st_loop_ticker_t *t = *pp, *next = t->next;
        int64_t w = t->tick(t, now);
        if (w == ST_LOOP_TICKER_DONE) {
            *pp = next;
            continue;
        }
        if (w >= 0 && (wait < 0 || w < wait)) wait = w;
        pp = &t->next;
    }
    return wait;
}

void st_loop_ticker_del(st_loop_t *loop, st_loop_ticker_t *t) {
    for (st_loop_ticker_t **pp = &loop->tickers; *pp; pp = &(*pp)->next)
        if (*pp == t) {
            *pp = t->next;
            return;
        }
}
void *st_loop_user(st_loop_t *loop) { return loop->user; }
void st_loop_set_user(st_loop_t *loop, void *user) { loop->user = user; }
int st_net_nloops(st_net_t *n) { return n->nloops; }
st_loop_t *st_net_loop(st_net_t *n, int i) { return &n->loops[i]; }
int st_net_connections(st_net_t *n) { return __atomic_load_n(&n->nconns, __ATOMIC_RELAXED); }

static void loop_kick(st_loop_t *loop) {
    uint64_t one = 1;
    if (write(loop->evfd, &one, sizeof one) < 0) { /* counter saturated: already kicked */ }
}

void st_loop_post(st_loop_t *loop, st_job_cb fn, void *arg) {
    mail_t *m = st_malloc(sizeof *m);
    m->next = NULL;
    m->fn = fn;
    m->arg = arg;
    m->posted_us = st_mono_us();
    pthread_mutex_lock(&loop->mail_lock);
    if (loop->mail_tail) loop->mail_tail->next = m;
    else loop->mail_head = m;
    loop->mail_tail = m;
    pthread_mutex_unlock(&loop->mail_lock);
    loop_kick(loop);
}

int st_loop_exited(st_loop_t *loop) { return __atomic_load_n(&loop->exited, __ATOMIC_ACQUIRE); }

void st_loop_wake(st_loop_t *loop) {
    if (__atomic_exchange_n(&loop->woken, 1, __ATOMIC_ACQ_REL) == 0) {
        __atomic_store_n(&loop->wake_us, st_mono_us(), __ATOMIC_RELEASE);
        loop_kick(loop);
    }
}

static void loop_drain_mail(st_loop_t *loop) {
    uint64_t v;
    if (read(loop->evfd, &v, sizeof v) < 0) { /* nothing pending */ }
    pthread_mutex_lock(&loop->mail_lock);
    mail_t *m = loop->mail_head;
    loop->mail_head = loop->mail_tail = NULL;
    pthread_mutex_unlock(&loop->mail_lock);
    while (m) {
        mail_t *next = m->next;
        loop->cause_us = m->posted_us;
        m->fn(m->arg);
        loop->cause_us = 0;
        free(m);
        m = next;
    }
    if (__atomic_exchange_n(&loop->mem_kick, 0, __ATOMIC_ACQ_REL)) mem_retry(loop);
    if (__atomic_exchange_n(&loop->woken, 0, __ATOMIC_ACQ_REL) && loop->net->hooks.on_wake) {
        loop->cause_us = __atomic_load_n(&loop->wake_us, __ATOMIC_ACQUIRE);
        loop->net->hooks.on_wake(loop, loop->net->hooks.arg);
        loop->cause_us = 0;
    }
}

/* ---- connection counts ---------------------------------------------------- */

static void ip_key(const struct sockaddr_storage *ss, uint8_t out[16]) {
    memset(out, 0, 16);
    if (ss->ss_family == AF_INET) {
        out[10] = out[11] = 0xff; /* IPv4-mapped, so that a dual-stack listener counts alike */
        memcpy(out + 12, &((const struct sockaddr_in *)ss)->sin_addr, 4);
    } else if (ss->ss_family == AF_INET6) {
        memcpy(out, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
    }
}

static void ip_text(const uint8_t ip[16], char *out, size_t n) {
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (!memcmp(ip, mapped, 12)) inet_ntop(AF_INET, ip + 12, out, (socklen_t)n);
    else inet_ntop(AF_INET6, ip, out, (socklen_t)n);
}

static uint32_t ip_hash(const uint8_t ip[16]) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (int i = 0; i < 16; i++) h = (h ^ ip[i]) * 16777619u;
    return h % QUOTA_BUCKETS;
}

static int quota_max(const quota_t *q, const uint8_t ip[16]) {
    for (int i = 0; i < q->noverrides; i++)
        if (!memcmp(q->overrides[i].addr, ip, 16)) return q->overrides[i].max;
    return q->per_ip;
}

/* Count a connection from ip; 0 when it is over its limit (not counted),
 * with the count and the limit for the log. */
static int quota_inc(quota_t *q, const uint8_t ip[16], int *count, int *max) {
    int ok = 0;
    pthread_mutex_lock(&q->lock);
    ip_count_t **pp = &q->buckets[ip_hash(ip)];
    while (*pp && memcmp((*pp)->ip, ip, 16)) pp = &(*pp)->next;
    *count = *pp ? (*pp)->n : 0;
    *max = quota_max(q, ip);
    if (*count < *max) {
        if (!*pp) {
            *pp = st_calloc(1, sizeof **pp);
            memcpy((*pp)->ip, ip, 16);
        }
        (*pp)->n++;
        ok = 1;
    }
    pthread_mutex_unlock(&q->lock);
    return ok;
}

static void quota_dec(quota_t *q, const uint8_t ip[16]) {
    pthread_mutex_lock(&q->lock);
    ip_count_t **pp = &q->buckets[ip_hash(ip)];
    while (*pp && memcmp((*pp)->ip, ip, 16)) pp = &(*pp)->next;
    if (*pp && --(*pp)->n == 0) {
        ip_count_t *dead = *pp;
        *pp = dead->next;
        free(dead);
    }
    pthread_mutex_unlock(&q->lock);
}

/* A counted connection is gone (closed, or never became one). */
static void conn_uncount(st_net_t *n, const uint8_t ip[16], int ip_counted) {
    if (ip_counted) quota_dec(&n->quota, ip);
    __atomic_sub_fetch(&n->nconns, 1, __ATOMIC_SEQ_CST);
    /* Loop 0 is not accepting: a slot (and an fd) just freed up. */
    if (__atomic_load_n(&n->accept_state, __ATOMIC_SEQ_CST) != ACCEPT_ON) {
        __atomic_store_n(&n->accept_kick, 1, __ATOMIC_RELEASE);
        loop_kick(&n->loops[0]);
    }
}

/* ---- request memory --------------------------------------------------------- */

static size_t page_round(size_t n) {
    /* asked each time (glibc answers from memory): a static filled in on
     * first use was written by every loop at once, a data race */
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (n + page - 1) / page * page;
}

static int fbuf_resize(fbuf_t *fb, size_t cap) {
    uint8_t *p;
    if (cap < FRAME_MAP_MIN) {
        p = realloc(fb->p, cap);
        if (!p) return -1;
    } else if (!fb->mapped) {
        p = mmap(NULL, page_round(cap), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return -1;
        if (fb->cap) memcpy(p, fb->p, fb->cap);
        free(fb->p);
        fb->mapped = 1;
    } else {
#ifdef __SANITIZE_THREAD__
        /* ThreadSanitizer (GCC 12's) does not intercept mremap: a mapping
         * it moved keeps its old history, and another loop's buffer moved
         * to those addresses later reads as a race with this one.  A new
         * mapping and a copy keep it informed. */
        p = mmap(NULL, page_round(cap), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return -1;
        memcpy(p, fb->p, ST_MIN(fb->cap, cap));
        munmap(fb->p, page_round(fb->cap));
#else
        p = mremap(fb->p, page_round(fb->cap), page_round(cap), MREMAP_MAYMOVE);
        if (p == MAP_FAILED) return -1;
#endif
    }
    fb->p = p;
    fb->cap = cap;
    return 0;
}

/* Give back what the pool charged for fb (any loop) and wake the loops
 * whose connections wait for memory. */
static void mem_release(st_net_t *n, fbuf_t *fb) {
    mem_pool_t *m = &n->mem;
    if (m->bound <= 0 || (!fb->main && !fb->reserve && !fb->token)) return;
    pthread_mutex_lock(&m->lock);
    m->main_used -= fb->main;
    m->reserve_used -= fb->reserve;
    if (fb->token) m->token_held = 0;
    for (int i = 0; i < n->nloops; i++)
        if (n->loops[i].nwait > 0) {
            __atomic_store_n(&n->loops[i].mem_kick, 1, __ATOMIC_RELEASE);
            loop_kick(&n->loops[i]);
        }
    pthread_mutex_unlock(&m->lock);
    fb->main = fb->reserve = 0;
    fb->token = 0;
}

static void fbuf_free(st_net_t *n, fbuf_t *fb) {
    mem_release(n, fb);
    if (fb->mapped) munmap(fb->p, page_round(fb->cap));
    else free(fb->p);
    memset(fb, 0, sizeof *fb);
}

/* Charge need more bytes for the frame c is reading: 0 when granted, 1
 * when c must wait (then counted in loop->nwait, under the same lock as
 * the releases that will wake it). */
static int mem_charge(st_conn_t *c, int64_t need) {
    st_net_t *n = c->loop->net;
    mem_pool_t *m = &n->mem;
    fbuf_t *fb = &c->fb;
    if (m->bound <= 0) return 0;
    int wait = 0;
    pthread_mutex_lock(&m->lock);
    if (m->main_used + need <= m->main_limit) {
        m->main_used += need;
        fb->main += need;
    } else if (c->framelen <= FRAME_SMALL && m->reserve_used + need <= m->reserve_limit) {
        m->reserve_used += need;
        fb->reserve += need;
    } else if (fb->token || !m->token_held) {
        m->token_held = 1;
        fb->token = 1;
        m->main_used += need;
        fb->main += need;
    } else {
        wait = 1;
        c->loop->nwait++;
        int64_t now = st_mono_ms();
        if (now - m->last_log_ms >= 10000) {
            m->last_log_ms = now;
            ST_INFO("net", "requests being read or answered hold %lld bytes, "
                           "queued.max.request.bytes is %lld: reading pauses on connections "
                           "that need more until memory is freed",
                    (long long)(m->main_used + m->reserve_used), (long long)m->bound);
        }
    }
    pthread_mutex_unlock(&m->lock);
    return wait;
}

/* Make room for the next bytes of c's frame: 0 when there is, -1 when c
 * now waits for memory or was closed. */
static int conn_frame_grow(st_conn_t *c) {
    size_t cap = c->fb.cap ? c->fb.cap * 2 : FRAME_FIRST_CAP;
    if (cap > c->framelen) cap = c->framelen;
    if (mem_charge(c, (int64_t)(cap - c->fb.cap))) {
        st_loop_t *loop = c->loop;
        c->mem_wait = 1;
        c->wait_next = NULL;
        c->wait_prev = loop->wait_tail;
        if (loop->wait_tail) loop->wait_tail->wait_next = c;
        else loop->wait_head = c;
        loop->wait_tail = c;
        conn_update_events(c);
        ST_DEBUG("net", "%s: waiting for request memory (%zu of %zu bytes read)", c->peer,
                 c->framegot, c->framelen);
        return -1;
    }
    if (fbuf_resize(&c->fb, cap)) {
        conn_close(c, "out of memory for request");
        return -1;
    }
    return 0;
}

/* Memory was released: read the connections of this loop that waited, in
 * the order they began waiting. */
static void mem_retry(st_loop_t *loop) {
    st_net_t *n = loop->net;
    pthread_mutex_lock(&n->mem.lock);
    loop->nwait = 0;
    pthread_mutex_unlock(&n->mem.lock);
    st_conn_t *c = loop->wait_head;
    loop->wait_head = loop->wait_tail = NULL;
    for (st_conn_t *x = c; x; x = x->wait_next) {
        x->refs++;
        x->mem_wait = 0;
    }
    while (c) {
        st_conn_t *next = c->wait_next;
        c->wait_next = c->wait_prev = NULL;
        if (!c->closed) {
            conn_update_events(c);
            conn_read(c);
        }
        conn_release(c);
        c = next;
    }
}

/* ---- connections ---------------------------------------------------------- */

static void conn_update_events(st_conn_t *c) {
    struct epoll_event ev = {0};
    /* Not reading: not even for the peer's FIN (EPOLLRDHUP is level
     * triggered and would wake the loop in a circle); a reset still comes
     * as EPOLLHUP / EPOLLERR. */
    int in = (!c->paused && !c->mem_wait) || c->wr_in || !c->tp_ready;
    ev.events = (in ? EPOLLIN | EPOLLRDHUP : 0) | (c->want_out || c->rd_out ? EPOLLOUT : 0);
    ev.data.ptr = c;
    epoll_ctl(c->loop->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

/* An epoll tag that is a connection (not the eventfd, a listener or an
 * outbound client's descriptor). */
static int is_conn_tag(uintptr_t tag) {
    return tag != TAG_EVENTFD && !(tag & TAG_IO) && !(tag & TAG_LISTENER);
}

static void conn_release(st_conn_t *c) {
    if (--c->refs > 0) return;
    if (c->state_free) c->state_free(c->state);
    free(c);
}

static void request_free(st_request_t *req) {
    req_priv_t *rp = (req_priv_t *)req;
    st_conn_t *c = req->conn;
    req->loop->requests--;
    if (req->loop->dispatching == req) req->loop->dispatching = NULL;
    if (req->api && req->api->key >= 0 && req->api->key < ST_NET_API_KEYS) {
        int64_t now = st_mono_us();
        st_histo_observe(&c->loop->net->request_time[req->api->key], now - req->recv_us);
        if (req->state == ST_REQ_READY && req->answered_us) {
            int64_t parked = req->parked_us, answered = req->answered_us;
            int64_t woke = parked && req->cause_us >= parked ? req->cause_us : answered;
            int64_t t[ST_NET_PHASES] = {(parked ? parked : answered) - req->recv_us,
                                        parked ? woke - parked : 0, answered - woke,
                                        now - answered};
            for (int ph = 0; ph < ST_NET_PHASES; ph++)
                st_histo_observe(&c->loop->net->phase_time[ph][req->api->key], t[ph]);
        }
    }
    st_chain_fini(&req->resp);
    st_arena_fini(&req->arena);
    fbuf_free(c->loop->net, &rp->fb);
    free(rp);
    conn_release(c);
}

static void conn_add_job(void *arg) {
    accepted_t *a = arg;
    st_loop_t *loop = a->loop;
    st_conn_t *c = st_calloc(1, sizeof *c);
    c->fd = a->fd;
    c->loop = loop;
    c->refs = 1;
    c->last_active_ms = st_mono_ms();
    memcpy(c->ip, a->ip, 16);
    c->ip_counted = a->ip_counted;
    c->listener = a->listener;
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (a->addr.ss_family == AF_INET) {
        inet_ntop(AF_INET, &((struct sockaddr_in *)&a->addr)->sin_addr, host, sizeof host);
        port = ntohs(((struct sockaddr_in *)&a->addr)->sin_port);
    } else if (a->addr.ss_family == AF_INET6) {
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&a->addr)->sin6_addr, host, sizeof host);
        port = ntohs(((struct sockaddr_in6 *)&a->addr)->sin6_port);
    }
    snprintf(c->peer, sizeof c->peer, "%s:%d", host, port);
    st_tls_ctx_t *tls = loop->net->listeners[a->listener].tls;
    free(a);
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char err[256];
    c->tp = tls ? st_tport_tls_new(tls, c->fd, NULL, err, sizeof err) : st_tport_plain_new(c->fd);
    if (!c->tp) {
        ST_WARN("net", "connection from %s: %s", c->peer, err);
        close(c->fd);
        conn_uncount(loop->net, c->ip, c->ip_counted);
        free(c);
        return;
    }
    c->tp_ready = !tls;
    struct epoll_event ev = {0};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.ptr = c;
    if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
        /* (any loop: not ST_LOG_RATELIMITED, whose state is per call site) */
        ST_WARN("net", "cannot watch the connection from %s: %s", c->peer, strerror(errno));
        st_tport_free(c->tp);
        close(c->fd);
        conn_uncount(loop->net, c->ip, c->ip_counted);
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
    st_loop_t *loop = c->loop;
    epoll_ctl(loop->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    st_tport_free(c->tp);
    c->tp = NULL;
    close(c->fd);
    if (c->mem_wait) {
        if (c->wait_prev) c->wait_prev->wait_next = c->wait_next;
        else loop->wait_head = c->wait_next;
        if (c->wait_next) c->wait_next->wait_prev = c->wait_prev;
        else loop->wait_tail = c->wait_prev;
        c->mem_wait = 0;
        pthread_mutex_lock(&loop->net->mem.lock);
        loop->nwait--;
        pthread_mutex_unlock(&loop->net->mem.lock);
    }
    fbuf_free(loop->net, &c->fb); /* a frame half read */
    conn_uncount(loop->net, c->ip, c->ip_counted);
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

/* Decode the frame just read and hand it to the server; the request takes
 * the frame's buffer (and its charge) over. */
static void conn_dispatch(st_conn_t *c) {
    req_priv_t *rp = st_calloc(1, sizeof *rp);
    st_request_t *req = &rp->req;
    rp->fb = c->fb;
    memset(&c->fb, 0, sizeof c->fb);
    uint8_t *frame = rp->fb.p;
    size_t len = c->framelen;
    c->framelen = c->framegot = 0;
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
    /* Whether the handler answered, or parked the request (which it
     * may answer, and the loop free, before it returns) */
    st_loop_t *loop = c->loop;
    loop->dispatching = req;
    loop->net->hooks.on_request(req, loop->net->hooks.arg);
    if (loop->dispatching == req && req->state == ST_REQ_PENDING) req->parked_us = st_mono_us();
    loop->dispatching = NULL;
}

/* Whether the transport waits on the other direction (TLS reading to
 * write, or writing to read): the events follow. */
static void conn_set_cross(st_conn_t *c, int rd_out, int wr_in) {
    if (rd_out == c->rd_out && wr_in == c->wr_in) return;
    c->rd_out = rd_out;
    c->wr_in = wr_in;
    conn_update_events(c);
}

/* Read up to n bytes: > 0 read, 0 would block, -1 the connection closed. */
static ssize_t conn_recv(st_conn_t *c, void *buf, size_t n) {
    ssize_t got = st_tport_recv(c->tp, buf, n);
    if (got > 0) return got;
    if (got == 0) {
        conn_set_cross(c, c->tp->want == EPOLLOUT, c->wr_in);
        return 0;
    }
    conn_close(c, c->tp->why[0] ? c->tp->why : NULL);
    return -1;
}

/* Bytes the transport holds that epoll will not announce (a TLS record
 * read in part): the loop reads this connection again before it waits. */
static void conn_again(st_conn_t *c) {
    if (c->again || c->closed || c->paused || c->mem_wait || !st_tport_pending(c->tp)) return;
    c->again = 1;
    c->refs++;
    c->again_next = c->loop->again;
    c->loop->again = c;
}

/* TLS: drive the handshake; 1 once it is done. */
static int conn_handshake(st_conn_t *c) {
    int r = st_tport_handshake(c->tp);
    if (r > 0) {
        c->tp_ready = 1;
        c->rd_out = c->wr_in = 0;
        conn_update_events(c);
        ST_DEBUG("net", "connection from %s: %s", c->peer, st_tport_describe(c->tp));
        return 1;
    }
    if (r == 0) {
        conn_set_cross(c, c->tp->want == EPOLLOUT, 0);
        return 0;
    }
    /* every reason is said, each at most once a second (a flood of one
     * kind cannot hide another) */
    int skipped;
    if (st_log_allow(c->tp->why, 1000, &skipped))
        ST_INFO("net", "TLS handshake with %s failed: %s%s", c->peer, c->tp->why,
                skipped ? " (and more like it since the last such line)" : "");
    conn_close(c, NULL);
    return 0;
}

static void conn_read(st_conn_t *c) {
    if (!c->closed && !c->tp_ready && !conn_handshake(c)) return;
    if (c->wr_in) conn_flush(c); /* a TLS write that waited for this */
    int rounds = 0;
    for (; rounds < 16 && !c->closed && !c->paused && !c->mem_wait; rounds++) {
        if (!c->framelen) {
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
            c->framelen = (size_t)size;
            c->framegot = 0;
        }
        if (c->framegot == c->fb.cap && conn_frame_grow(c)) return;
        ssize_t n = conn_recv(c, c->fb.p + c->framegot, c->fb.cap - c->framegot);
        if (n <= 0) return;
        c->framegot += (size_t)n;
        c->last_active_ms = st_mono_ms();
        if (c->framegot == c->framelen) conn_dispatch(c);
    }
    if (c->rd_out && !c->closed) conn_set_cross(c, 0, c->wr_in);
    conn_again(c);
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
                    /* a file shorter than promised fails: a frame whose
                     * length lies never goes out */
                    n = st_tport_sendfile(c->tp, k->file->fd, (off_t)(k->off + c->chunk_off),
                                          (size_t)(k->len - c->chunk_off));
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
                    n = st_tport_writev(c->tp, iov, niov);
                }
                if (n == 0) {
                    int in = c->tp->want == EPOLLIN;
                    if (!c->want_out || in != c->wr_in) {
                        c->want_out = !in;
                        c->wr_in = in;
                        conn_update_events(c);
                    }
                    return;
                }
                if (n < 0) {
                    conn_close(c, c->tp->why[0] ? c->tp->why : "connection closed by the peer");
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
        int close_after = r->close_after && r->state == ST_REQ_READY;
        request_free(r);
        if (close_after) {
            conn_close(c, NULL);
            return;
        }
    }
    if (c->closed) return;
    int want_out = 0;
    int paused = c->inflight >= c->loop->net->cfg.max_inflight_per_conn ||
                 __atomic_load_n(&c->loop->stopping, __ATOMIC_ACQUIRE);
    if (want_out != c->want_out || paused != c->paused || c->wr_in) {
        int resumed = c->paused && !paused;
        c->want_out = want_out;
        c->paused = paused;
        c->wr_in = 0;
        conn_update_events(c);
        if (resumed) conn_again(c);
    }
}

/* ---- requests ------------------------------------------------------------- */

void st_request_respond(st_request_t *req, const void *body) {
    if (req->on_respond) req->on_respond(req, (void *)body);
    st_response_encode(req->api, req->hdr.api_version, req->hdr.correlation_id, body, &req->resp);
    req->state = ST_REQ_READY;
    req->answered_us = st_mono_us();
    req->cause_us = req->loop->cause_us;
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

void st_request_respond_close(st_request_t *req, const void *body) {
    req->close_after = 1;
    st_request_respond(req, body);
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

void st_net_request_time(st_net_t *n, int16_t api_key, st_histo_t *out) {
    memset(out, 0, sizeof *out);
    if (api_key >= 0 && api_key < ST_NET_API_KEYS) st_histo_read(&n->request_time[api_key], out);
}

void st_net_request_phase_time(st_net_t *n, st_net_phase_t phase, int16_t api_key,
                               st_histo_t *out) {
    memset(out, 0, sizeof *out);
    if (phase >= 0 && phase < ST_NET_PHASES && api_key >= 0 && api_key < ST_NET_API_KEYS)
        st_histo_read(&n->phase_time[phase][api_key], out);
}

int st_request_conn_open(const st_request_t *req) { return !req->conn->closed; }
void *st_request_conn_state(const st_request_t *req) { return req->conn->state; }
void st_request_conn_set_state(st_request_t *req, void *state, void (*free_fn)(void *)) {
    st_conn_t *c = req->conn;
    if (c->state_free && c->state != state) c->state_free(c->state);
    c->state = state;
    c->state_free = free_fn;
}
const char *st_request_peer_subject(const st_request_t *req) {
    return req->conn->tp ? st_tport_peer_subject(req->conn->tp) : "";
}
const char *st_request_peer(const st_request_t *req) { return req->conn->peer; }

/* ---- listeners and threads ------------------------------------------------ */

/* Listeners in or out of loop 0's epoll (loop 0). */
static void listeners_arm(st_net_t *n, int on) {
    for (int i = 0; i < n->nlisteners; i++) {
        if (n->listeners[i].fd < 0) continue;
        struct epoll_event ev = {0};
        ev.events = EPOLLIN;
        ev.data.ptr = (void *)((uintptr_t)&n->listeners[i] | TAG_LISTENER);
        epoll_ctl(n->loops[0].epfd, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, n->listeners[i].fd, &ev);
    }
}

/* Stop accepting: at max.connections until one closes, or for a backoff
 * after accept failed for want of resources (loop 0).  Connections keep
 * arriving into the kernel's listen queue meanwhile, as they wait in
 * Kafka's acceptor while it blocks for a connection slot. */
static void accept_pause(st_net_t *n, int state) {
    if (n->accept_state == ACCEPT_ON) listeners_arm(n, 0);
    __atomic_store_n(&n->accept_state, state, __ATOMIC_SEQ_CST);
    if (state == ACCEPT_BACKOFF) {
        n->accept_backoff_ms = n->accept_backoff_ms
                                   ? ST_MIN(n->accept_backoff_ms * 2, ACCEPT_BACKOFF_MAX_MS)
                                   : ACCEPT_BACKOFF_MIN_MS;
        n->accept_resume_ms = st_mono_ms() + n->accept_backoff_ms;
    }
}

static void accept_resume(st_net_t *n) {
    __atomic_store_n(&n->accept_kick, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&n->accept_state, ACCEPT_ON, __ATOMIC_SEQ_CST);
    listeners_arm(n, 1);
}

/* Each turn of loop 0: accept again when a slot or the backoff allows;
 * returns ms until it must look again (-1: no deadline). */
static int64_t accept_check(st_net_t *n, int64_t now) {
    int state = n->accept_state;
    if (state == ACCEPT_ON) return -1;
    int kicked = __atomic_exchange_n(&n->accept_kick, 0, __ATOMIC_ACQ_REL);
    if (state == ACCEPT_AT_LIMIT) {
        if (__atomic_load_n(&n->nconns, __ATOMIC_SEQ_CST) < n->cfg.max_connections)
            accept_resume(n);
        return -1;
    }
    /* backoff: until it ends, or a connection closed and gave an fd back */
    if (kicked || now >= n->accept_resume_ms) {
        accept_resume(n);
        return -1;
    }
    return n->accept_resume_ms - now;
}

static void accept_all(st_net_t *n, listener_t *l) {
    /* another listener's event of the same epoll_wait may have paused */
    if (n->accept_state != ACCEPT_ON) return;
    /* a changed certificate is picked up by the next connection */
    if (l->tls) st_tls_ctx_reload_check(l->tls, st_mono_ms());
    for (int i = 0; i < ACCEPT_BATCH; i++) {
        int open = __atomic_load_n(&n->nconns, __ATOMIC_SEQ_CST);
        if (open >= n->cfg.max_connections) {
            accept_pause(n, ACCEPT_AT_LIMIT);
            ST_LOG_RATELIMITED(ST_LOG_INFO, "net", 10000,
                               "%d connections open, the most max.connections allows (%d): new "
                               "connections wait in the listen queue until one closes",
                               open, n->cfg.max_connections);
            /* a close may have come between the count and the pause */
            if (__atomic_load_n(&n->nconns, __ATOMIC_SEQ_CST) < n->cfg.max_connections)
                accept_resume(n);
            return;
        }
        accepted_t a = {0};
        a.listener = (int)(l - n->listeners);
        socklen_t sl = sizeof a.addr;
        a.fd = accept4(l->fd, (struct sockaddr *)&a.addr, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (a.fd < 0) {
            int e = errno;
            if (e == EAGAIN || e == EWOULDBLOCK) return;
            /* the pending connection failed, not the listener: next one */
            if (e == EINTR || e == ECONNABORTED || e == EPROTO || e == ENETDOWN || e == ENOPROTOOPT ||
                e == EHOSTDOWN || e == ENONET || e == EHOSTUNREACH || e == EOPNOTSUPP ||
                e == ENETUNREACH || e == EPERM)
                continue;
            /* Out of fds (EMFILE, ENFILE) or kernel memory, or worse:
             * retrying now would fail the same way, and the listener stays
             * readable, so the loop would spin.  Leave epoll for a while. */
            accept_pause(n, ACCEPT_BACKOFF);
            ST_LOG_RATELIMITED(ST_LOG_WARN, "net", 5000,
                               "accept: %s (%s; %d connections open): not accepting for %d ms "
                               "or until a connection closes",
                               e == EMFILE || e == ENFILE ? st_err_msg(st_err_from_errno(e))
                                                          : strerror(e),
                               e == EMFILE ? "the process's fd limit"
                               : e == ENFILE ? "the system's fd limit"
                                             : "accept failed",
                               __atomic_load_n(&n->nconns, __ATOMIC_RELAXED),
                               n->accept_backoff_ms);
            return;
        }
        n->accept_backoff_ms = 0;
        if (__atomic_load_n(&n->loops[0].stopping, __ATOMIC_ACQUIRE)) {
            close(a.fd); /* shutting down: no new connections */
            continue;
        }
        ip_key(&a.addr, a.ip);
        if (n->quota.enabled) {
            int count, max;
            if (!quota_inc(&n->quota, a.ip, &count, &max)) {
                /* Kafka's TooManyConnectionsException: closed at once */
                char ip[INET6_ADDRSTRLEN];
                ip_text(a.ip, ip, sizeof ip);
                ST_LOG_RATELIMITED(ST_LOG_INFO, "net", 1000,
                                   "refused a connection from %s: it already has %d, the most "
                                   "max.connections.per.ip allows it",
                                   ip, count);
                (void)max;
                close(a.fd);
                continue;
            }
            a.ip_counted = 1;
        }
        __atomic_add_fetch(&n->nconns, 1, __ATOMIC_SEQ_CST);
        st_loop_t *target = &n->loops[n->next_loop++ % (unsigned)n->nloops];
        accepted_t *m = st_malloc(sizeof *m);
        *m = a;
        m->loop = target;
        if (target == &n->loops[0]) conn_add_job(m);
        else st_loop_post(target, conn_add_job, m);
    }
}

static void *loop_main(void *arg) {
    st_loop_t *loop = arg;
    st_net_t *n = loop->net;
    char name[16];
    snprintf(name, sizeof name, "net-%d", loop->index);
    st_thread_set_name(name);
    current_loop = loop;
    struct epoll_event evs[64];
    int64_t drain_deadline = 0;
    for (;;) {
        int64_t now = st_mono_ms();
        int64_t wait = n->hooks.on_tick ? n->hooks.on_tick(loop, now, n->hooks.arg) : -1;
        int64_t tw = loop_run_tickers(loop, now);
        if (tw >= 0 && (wait < 0 || tw < wait)) wait = tw;
        if (wait < 0 || wait > 1000) wait = 1000;
        if (loop->index == 0) {
            int64_t aw = accept_check(n, now);
            if (aw >= 0 && aw < wait) wait = aw;
        }
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
        if (loop->again) wait = 0;
        int k = epoll_wait(loop->epfd, evs, 64, (int)wait);
        /* Every connection named in this batch is held until the batch is
         * done: a job of the mailbox (an answer from the controller thread)
         * or another connection's event may close and release one that a
         * later event of the same batch still points at. */
        for (int i = 0; i < k; i++)
            if (is_conn_tag((uintptr_t)evs[i].data.ptr)) ((st_conn_t *)evs[i].data.ptr)->refs++;
        for (int i = 0; i < k; i++) {
            uintptr_t tag = (uintptr_t)evs[i].data.ptr;
            if (tag == TAG_EVENTFD) {
                loop_drain_mail(loop);
            } else if (tag & TAG_IO) {
                st_loop_io_t *io = (st_loop_io_t *)(tag & ~(uintptr_t)TAG_IO);
                if (io->fd >= 0) io->cb(io, evs[i].events);
            } else if (tag & TAG_LISTENER) {
                accept_all(n, (listener_t *)(tag & ~(uintptr_t)TAG_LISTENER));
            } else {
                st_conn_t *c = evs[i].data.ptr;
                if (c->closed) continue; /* closed earlier in this batch */
                if ((evs[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) ||
                    ((evs[i].events & EPOLLOUT) && (c->rd_out || !c->tp_ready)))
                    conn_read(c);
                if (!c->closed && (evs[i].events & EPOLLOUT) && c->tp_ready) conn_flush(c);
                if (!c->closed && (evs[i].events & (EPOLLHUP | EPOLLERR)) && !(evs[i].events & EPOLLIN))
                    conn_close(c, NULL);
            }
        }
        for (int i = 0; i < k; i++)
            if (is_conn_tag((uintptr_t)evs[i].data.ptr)) conn_release(evs[i].data.ptr);
        /* connections whose transport still holds bytes read before */
        st_conn_t *again = loop->again;
        loop->again = NULL;
        while (again) {
            st_conn_t *c = again;
            again = c->again_next;
            c->again = 0;
            if (!c->closed) conn_read(c);
            conn_release(c);
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
    /* Jobs posted while the loop drained (an outbound client's send from
     * another thread holds the client until its job runs: left in the
     * mailbox, the client was never freed) */
    loop_drain_mail(loop);
    while (loop->conns) conn_close(loop->conns, NULL);
    while (loop->again) {
        st_conn_t *c = loop->again;
        loop->again = c->again_next;
        conn_release(c);
    }
    /* Outbound clients fail what is still in flight (CANCELLED), once. */
    for (st_loop_ticker_t *t = loop->tickers; t; t = t->next)
        if (t->stop) t->stop(t);
    current_loop = NULL;
    __atomic_store_n(&loop->exited, 1, __ATOMIC_RELEASE);
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
    int rc = st_getaddrinfo(host, port, &hints, &res);
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

st_err_t st_net_ip_overrides_parse(const char *text, int resolve, st_net_ip_limit_t **out,
                                   int *n, char *err, size_t errlen) {
    st_net_ip_limit_t *v = NULL;
    int cnt = 0, cap = 0;
    st_err_t e = ST_OK;
    const char *p = text ? text : "";
    while (*p && !e) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        while (len && (*p == ' ' || *p == '\t')) p++, len--;
        while (len && (p[len - 1] == ' ' || p[len - 1] == '\t')) len--;
        if (len) {
            char item[300];
            if (len >= sizeof item) {
                snprintf(err, errlen, "'%.40s...' is too long", p);
                e = ST_E_CONFIG;
                break;
            }
            memcpy(item, p, len);
            item[len] = 0;
            char *colon = strrchr(item, ':');
            char *end = NULL;
            long max = colon ? strtol(colon + 1, &end, 10) : -1;
            if (!colon || colon == item || !colon[1] || *end || max < 0 || max > INT32_MAX) {
                snprintf(err, errlen, "'%s' is not host:count", item);
                e = ST_E_CONFIG;
                break;
            }
            *colon = 0;
            char *host = item;
            if (host[0] == '[') { /* [ipv6] */
                host++;
                char *rb = strchr(host, ']');
                if (!rb || rb[1]) {
                    snprintf(err, errlen, "'%s' is not [ipv6]:count", item);
                    e = ST_E_CONFIG;
                    break;
                }
                *rb = 0;
            }
            if (resolve) {
                struct addrinfo hints = {0}, *res = NULL;
                hints.ai_family = AF_UNSPEC;
                hints.ai_socktype = SOCK_STREAM;
                int rc = st_getaddrinfo(host, NULL, &hints, &res);
                if (rc) {
                    snprintf(err, errlen, "cannot resolve %s: %s", host, gai_strerror(rc));
                    e = ST_E_CONFIG;
                    break;
                }
                for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
                    struct sockaddr_storage ss = {0};
                    memcpy(&ss, ai->ai_addr, ST_MIN(ai->ai_addrlen, (socklen_t)sizeof ss));
                    if (cnt == cap) {
                        cap = cap ? cap * 2 : 8;
                        v = st_realloc(v, (size_t)cap * sizeof *v);
                    }
                    ip_key(&ss, v[cnt].addr);
                    v[cnt].max = (int32_t)max;
                    cnt++;
                }
                freeaddrinfo(res);
            }
        }
        if (!comma) break;
        p = comma + 1;
    }
    if (e || !out) {
        free(v);
        return e;
    }
    *out = v;
    *n = cnt;
    return ST_OK;
}

st_err_t st_net_new(const st_net_config_t *cfg, const st_net_hooks_t *hooks, st_net_t **out,
                    char *err, size_t errlen) {
    st_net_t *n = st_calloc(1, sizeof *n);
    n->cfg = *cfg;
    n->cfg.ip_overrides = NULL; /* borrowed: not kept */
    n->hooks = *hooks;
    if (n->cfg.max_connections <= 0) n->cfg.max_connections = INT32_MAX;
    n->nloops = cfg->nthreads < 1 ? 1 : cfg->nthreads;
    n->loops = st_calloc((size_t)n->nloops, sizeof *n->loops);
    n->listeners = st_calloc((size_t)cfg->nlisteners + 1, sizeof *n->listeners);
    pthread_mutex_init(&n->quota.lock, NULL);
    pthread_mutex_init(&n->mem.lock, NULL);
    n->quota.per_ip = cfg->max_connections_per_ip;
    st_err_t e = st_net_ip_overrides_parse(cfg->ip_overrides, 1, &n->quota.overrides,
                                           &n->quota.noverrides, err, errlen);
    if (e) {
        char why[512];
        snprintf(why, sizeof why, "%s", err);
        snprintf(err, errlen, "max.connections.per.ip.overrides: %s", why);
        st_net_destroy(n);
        return e;
    }
    /* Counting per address costs a lock per accept and close: only when
     * some address has a limit. */
    n->quota.enabled = n->quota.noverrides > 0 ||
                       (cfg->max_connections_per_ip > 0 && cfg->max_connections_per_ip < INT32_MAX);
    if (n->quota.per_ip <= 0 && !n->quota.noverrides) n->quota.per_ip = INT32_MAX;
    if (cfg->queued_max_request_bytes > 0) {
        n->mem.bound = cfg->queued_max_request_bytes;
        n->mem.reserve_limit = n->mem.bound / 8;
        n->mem.main_limit = n->mem.bound - n->mem.reserve_limit;
    }
    for (int i = 0; i < cfg->nlisteners; i++) {
        n->listeners[i].fd = -1;
        n->listeners[i].tls = cfg->listeners[i].tls;
        e = listen_on(&cfg->listeners[i], &n->listeners[i], err, errlen);
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
        if (loop->epfd < 0 || loop->evfd < 0 ||
            epoll_ctl(loop->epfd, EPOLL_CTL_ADD, loop->evfd, &ev) != 0) {
            snprintf(err, errlen, "cannot create the event loops: %s",
                     st_err_msg(st_err_from_errno(errno)));
            st_net_destroy(n);
            return ST_E_IO;
        }
    }
    listeners_arm(n, 1);
    *out = n;
    return ST_OK;
}

int st_request_listener(const st_request_t *req) {
    return req->conn ? req->conn->listener : 0;
}

int st_net_bound_port(st_net_t *n, int listener) {
    return listener < n->nlisteners ? n->listeners[listener].port : -1;
}

void st_net_set_max_connections(st_net_t *n, int max) {
    n->cfg.max_connections = max > 0 ? max : INT32_MAX;
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
            if (m->fn == conn_add_job) { /* a socket never taken over */
                close(((accepted_t *)m->arg)->fd);
                free(m->arg);
            }
            free(m);
            m = next;
        }
        if (loop->epfd >= 0) close(loop->epfd);
        if (loop->evfd >= 0) close(loop->evfd);
        pthread_mutex_destroy(&loop->mail_lock);
    }
    for (int i = 0; i < QUOTA_BUCKETS; i++)
        for (ip_count_t *c = n->quota.buckets[i], *next; c; c = next) {
            next = c->next;
            free(c);
        }
    free(n->quota.overrides);
    pthread_mutex_destroy(&n->quota.lock);
    pthread_mutex_destroy(&n->mem.lock);
    free(n->loops);
    free(n->listeners);
    free(n);
}
