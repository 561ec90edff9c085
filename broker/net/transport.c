/*
 * transport.c - the plaintext transport: the socket's own read, writev and
 * sendfile (fetch data leaves without passing through user space).
 */
#include "transport.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/sendfile.h>
#include <unistd.h>

static int plain_handshake(st_tport_t *t) {
    (void)t;
    return 1;
}

/* errno of a failed call: would block, or the end */
static ssize_t plain_fail(st_tport_t *t, uint32_t want) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
        t->want = want;
        return 0;
    }
    snprintf(t->why, sizeof t->why, "%s", strerror(errno));
    return -1;
}

static ssize_t plain_recv(st_tport_t *t, void *buf, size_t n) {
    ssize_t got = read(t->fd, buf, n);
    if (got > 0) return got;
    if (got == 0) {
        t->why[0] = 0;
        return -1;
    }
    return plain_fail(t, EPOLLIN);
}

static ssize_t plain_writev(st_tport_t *t, const struct iovec *iov, int niov) {
    ssize_t n = writev(t->fd, iov, niov);
    return n >= 0 ? n : plain_fail(t, EPOLLOUT);
}

static ssize_t plain_sendfile(st_tport_t *t, int fd, off_t off, size_t n) {
    ssize_t k = sendfile(t->fd, fd, &off, n);
    if (k > 0) return k;
    if (k == 0) {
        snprintf(t->why, sizeof t->why, "file range vanished while sending");
        return -1;
    }
    return plain_fail(t, EPOLLOUT);
}

static size_t plain_pending(st_tport_t *t) {
    (void)t;
    return 0;
}

static void plain_free(st_tport_t *t) { free(t); }

static const st_tport_ops_t plain_ops = {
    .name = "plaintext",
    .handshake = plain_handshake,
    .recv = plain_recv,
    .writev = plain_writev,
    .sendfile = plain_sendfile,
    .pending = plain_pending,
    .free = plain_free,
};

st_tport_t *st_tport_plain_new(int fd) {
    st_tport_t *t = st_calloc(1, sizeof *t);
    t->ops = &plain_ops;
    t->fd = fd;
    return t;
}
