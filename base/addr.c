/* addr.c - host name resolution with the localhost rule of RFC 6761.
 *
 * A name under "localhost" is the loopback address whatever the resolver
 * says (RFC 6761, section 6.3).  A new Debian root without /etc/hosts (a
 * debootstrap, a bare container) cannot resolve "localhost" through
 * getaddrinfo, and the default listeners=PLAINTEXT://localhost:9092 must
 * still work there, so when getaddrinfo fails on such a name the loopback
 * address of the family asked for is used instead. */
#include "st_base.h"

#include <netdb.h>
#include <strings.h>
#include <sys/socket.h>

int st_is_localhost_name(const char *host) {
    if (!host) return 0;
    size_t n = strlen(host);
    if (n && host[n - 1] == '.') n--; /* the root label */
    if (n == 9) return strncasecmp(host, "localhost", 9) == 0;
    return n > 10 && strncasecmp(host + n - 10, ".localhost", 10) == 0;
}

int st_getaddrinfo(const char *host, const char *port, const struct addrinfo *hints,
                   struct addrinfo **res) {
    int rc = getaddrinfo(host, port, hints, res);
    if (rc == 0 || !st_is_localhost_name(host)) return rc;
    struct addrinfo h = hints ? *hints : (struct addrinfo){0};
    h.ai_flags |= AI_NUMERICHOST;
    h.ai_flags &= ~AI_CANONNAME;
    const char *loop = h.ai_family == AF_INET6 ? "::1" : "127.0.0.1";
    if (h.ai_family == AF_UNSPEC) h.ai_family = AF_INET;
    return getaddrinfo(loop, port, &h, res) == 0 ? 0 : rc;
}
