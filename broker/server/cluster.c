/*
 * cluster.c - the settings that make a node part of a cluster: its roles,
 * the controller quorum, the listener names that carry controller traffic
 * and the security protocol of every listener.
 *
 * They are checked together, at start-up, as Kafka's KafkaConfig checks
 * its KRaft settings, so that a node that cannot work in the cluster it
 * is configured for stops with a sentence naming the key, instead of
 * starting and failing to elect, register or be reached:
 *   - a controller must be one of controller.quorum.voters and must have
 *     the listener its voter entry names;
 *   - a broker-only node must know the quorum (voters or bootstrap
 *     servers), must not be a voter and must not listen on a controller
 *     listener; a controller-only node listens on controller listeners
 *     only;
 *   - every listener name has a security protocol in
 *     listener.security.protocol.map (PLAINTEXT, SSL, SASL_PLAINTEXT or
 *     SASL_SSL).
 * With none of these set the node is a combined broker and controller
 * that is the whole quorum: the single-node start of the README.
 */
#include "config.h"
#include "kclient.h"

#include <ctype.h>
#include <stdlib.h>
#include <strings.h>
#include <unistd.h>

static void free_strv(char **v, int n) { st_free_strv(v, n); }

/* "host:port" with host non-empty and port 1..65535 ("[v6]:port" too). */
static int parse_hostport(char *s, st_voter_t *out, char *why, size_t n) {
    char *colon = strrchr(s, ':');
    if (!colon || colon == s) {
        snprintf(why, n, "'%s' is not host:port", s);
        return -1;
    }
    *colon = 0;
    char *host = s;
    size_t hl = strlen(host);
    if (host[0] == '[' && hl >= 2 && host[hl - 1] == ']') {
        host[hl - 1] = 0;
        host++;
        hl -= 2;
    }
    if (hl == 0 || hl >= sizeof out->host) {
        snprintf(why, n, "host '%s' is empty or longer than %d characters", host,
                 (int)sizeof out->host - 1);
        return -1;
    }
    memcpy(out->host, host, hl + 1);
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (colon[1] == 0 || *end || port < 1 || port > 65535) {
        snprintf(why, n, "'%s' is not a port (1-65535)", colon + 1);
        return -1;
    }
    out->port = (int)port;
    return 0;
}

st_err_t st_parse_voters(const char *text, st_voter_t **out, int *n, char *err, size_t errlen) {
    int cnt = 0;
    char **items = st_split_csv(text, &cnt);
    st_voter_t *v = st_calloc((size_t)cnt + 1, sizeof *v);
    st_err_t e = ST_OK;
    for (int i = 0; i < cnt && !e; i++) {
        char *s = items[i], *at = strchr(s, '@'), *end;
        long id = at ? strtol(s, &end, 10) : -1;
        if (!at || at == s || end != at || id < 0 || id > INT32_MAX) {
            snprintf(err, errlen, "'%s' is not id@host:port (id a node.id, 0 or more)", s);
            e = ST_E_CONFIG;
            break;
        }
        v[i].id = (int32_t)id;
        char why[300];
        if (parse_hostport(at + 1, &v[i], why, sizeof why)) {
            snprintf(err, errlen, "voter %ld: %s", id, why);
            e = ST_E_CONFIG;
            break;
        }
        for (int j = 0; j < i; j++)
            if (v[j].id == v[i].id) {
                snprintf(err, errlen, "voter id %d appears twice", (int)v[i].id);
                e = ST_E_CONFIG;
            }
    }
    free_strv(items, cnt);
    if (e) {
        free(v);
        return e;
    }
    *out = v;
    *n = cnt;
    return ST_OK;
}

static st_err_t parse_bootstrap(const char *text, st_voter_t **out, int *n, char *err,
                                size_t errlen) {
    int cnt = 0;
    char **items = st_split_csv(text, &cnt);
    st_voter_t *v = st_calloc((size_t)cnt + 1, sizeof *v);
    st_err_t e = ST_OK;
    for (int i = 0; i < cnt; i++) {
        v[i].id = -1;
        if (parse_hostport(items[i], &v[i], err, errlen)) {
            e = ST_E_CONFIG;
            break;
        }
    }
    free_strv(items, cnt);
    if (e) {
        free(v);
        return e;
    }
    *out = v;
    *n = cnt;
    return ST_OK;
}

/* The protocol listener.security.protocol.map gives a listener name, or
 * NULL (err says why: a malformed map or no entry). */
static const char *protocol_of(const char *map, const char *name, char *buf, size_t buflen) {
    int cnt = 0;
    char **items = st_split_csv(map, &cnt);
    const char *found = NULL;
    for (int i = 0; i < cnt && !found; i++) {
        char *colon = strchr(items[i], ':');
        if (!colon) continue;
        *colon = 0;
        if (!strcasecmp(items[i], name)) {
            snprintf(buf, buflen, "%s", colon + 1);
            found = buf;
        }
    }
    free_strv(items, cnt);
    return found;
}

static int check_map(const char *map, char *err, size_t errlen) {
    static const char *const protocols[] = {"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"};
    int cnt = 0, bad = 0;
    char **items = st_split_csv(map, &cnt);
    for (int i = 0; i < cnt && !bad; i++) {
        char *colon = strchr(items[i], ':');
        if (!colon || colon == items[i]) {
            snprintf(err, errlen, "listener.security.protocol.map: '%s' is not NAME:PROTOCOL",
                     items[i]);
            bad = 1;
            break;
        }
        int known = 0;
        for (size_t k = 0; k < ST_ARRAY_SIZE(protocols); k++)
            known |= !strcasecmp(colon + 1, protocols[k]);
        if (!known) {
            snprintf(err, errlen,
                     "listener.security.protocol.map: '%s' is not PLAINTEXT, SSL, "
                     "SASL_PLAINTEXT or SASL_SSL",
                     colon + 1);
            bad = 1;
        }
        for (int j = 0; j < i && !bad; j++)
            if (!strncasecmp(items[j], items[i], (size_t)(colon - items[i])) &&
                items[j][colon - items[i]] == ':') {
                *colon = 0;
                snprintf(err, errlen, "listener.security.protocol.map: %s appears twice",
                         items[i]);
                bad = 1;
            }
    }
    free_strv(items, cnt);
    return bad;
}

int st_listener_protocol(const st_broker_config_t *cfg, const char *name) {
    static const char *const names[] = {[ST_SECPROTO_PLAINTEXT] = "PLAINTEXT",
                                        [ST_SECPROTO_SSL] = "SSL",
                                        [ST_SECPROTO_SASL_PLAINTEXT] = "SASL_PLAINTEXT",
                                        [ST_SECPROTO_SASL_SSL] = "SASL_SSL"};
    char buf[64];
    const char *proto = protocol_of(cfg->listener_security_protocol_map, name, buf, sizeof buf);
    for (int i = 0; proto && i < (int)ST_ARRAY_SIZE(names); i++)
        if (!strcasecmp(proto, names[i])) return i;
    return -1;
}

int st_cluster_is_controller_listener(const st_cluster_config_t *cc, const char *name) {
    for (int i = 0; i < cc->ncontroller_listeners; i++)
        if (!strcasecmp(cc->controller_listeners[i], name)) return 1;
    return 0;
}

static const st_voter_t *find_voter(const st_cluster_config_t *cc, int32_t id) {
    for (int i = 0; i < cc->nvoters; i++)
        if (cc->voters[i].id == id) return &cc->voters[i];
    return NULL;
}

/* Every listener of `key` (listeners or advertised.listeners) has a
 * security protocol. */
static int check_protocols(const st_broker_config_t *cfg, const char *key, const char *text,
                           char *err, size_t errlen) {
    st_listener_spec_t *l = NULL;
    int n = 0;
    char why[256];
    if (!*text) return 0;
    if (st_parse_listeners(text, &l, &n, why, sizeof why)) {
        snprintf(err, errlen, "%s: %s", key, why);
        return 1;
    }
    int bad = 0;
    for (int i = 0; i < n && !bad; i++) {
        char buf[64];
        const char *proto = protocol_of(cfg->listener_security_protocol_map, l[i].name, buf,
                                        sizeof buf);
        if (!proto) {
            snprintf(err, errlen,
                     "%s: listener %s has no security protocol in "
                     "listener.security.protocol.map (add %s:PLAINTEXT)",
                     key, l[i].name, l[i].name);
            bad = 1;
        }
    }
    free(l);
    return bad;
}

st_err_t st_cluster_config_parse(const st_broker_config_t *cfg, st_cluster_config_t *out,
                                 char *err, size_t errlen) {
    st_cluster_config_t cc;
    memset(&cc, 0, sizeof cc);
    st_listener_spec_t *l = NULL;
    int nl = 0;
    char why[300];
    st_err_t e = ST_E_CONFIG;

    int nroles = 0;
    char **roles = st_split_csv(cfg->process_roles, &nroles);
    for (int i = 0; i < nroles; i++) {
        int r = !strcmp(roles[i], "broker") ? ST_ROLE_BROKER
                : !strcmp(roles[i], "controller") ? ST_ROLE_CONTROLLER
                                                  : 0;
        if (!r || (cc.roles & r)) {
            snprintf(err, errlen, "process.roles: '%s' %s", roles[i],
                     r ? "appears twice" : "is not broker or controller");
            free_strv(roles, nroles);
            goto out;
        }
        cc.roles |= r;
    }
    free_strv(roles, nroles);
    if (!cc.roles) {
        snprintf(err, errlen, "process.roles: must be broker, controller or broker,controller");
        goto out;
    }
    if (*cfg->controller_quorum_voters &&
        st_parse_voters(cfg->controller_quorum_voters, &cc.voters, &cc.nvoters, why, sizeof why)) {
        snprintf(err, errlen, "controller.quorum.voters: %s", why);
        goto out;
    }
    if (*cfg->controller_quorum_bootstrap_servers &&
        parse_bootstrap(cfg->controller_quorum_bootstrap_servers, &cc.bootstrap, &cc.nbootstrap,
                        why, sizeof why)) {
        snprintf(err, errlen, "controller.quorum.bootstrap.servers: %s", why);
        goto out;
    }
    if (cc.nvoters && cc.nbootstrap) {
        snprintf(err, errlen, "controller.quorum.voters and controller.quorum.bootstrap.servers "
                              "are both set: set one of them");
        goto out;
    }
    cc.controller_listeners = st_split_csv(cfg->controller_listener_names,
                                           &cc.ncontroller_listeners);
    if (check_map(cfg->listener_security_protocol_map, err, errlen) ||
        check_protocols(cfg, "listeners", cfg->listeners, err, errlen) ||
        check_protocols(cfg, "advertised.listeners", cfg->advertised_listeners, err, errlen))
        goto out;
    for (int i = 0; i < cc.ncontroller_listeners; i++) {
        char buf[64];
        if (!protocol_of(cfg->listener_security_protocol_map, cc.controller_listeners[i], buf,
                         sizeof buf)) {
            snprintf(err, errlen,
                     "controller.listener.names: %s has no security protocol in "
                     "listener.security.protocol.map (add %s:PLAINTEXT)",
                     cc.controller_listeners[i], cc.controller_listeners[i]);
            goto out;
        }
    }
    if (st_parse_listeners(cfg->listeners, &l, &nl, why, sizeof why)) {
        snprintf(err, errlen, "listeners: %s", why);
        goto out;
    }
    int nclient = 0, ncontrol = 0;
    for (int i = 0; i < nl; i++) {
        if (st_cluster_is_controller_listener(&cc, l[i].name)) ncontrol++;
        else nclient++;
    }
    if (cc.nvoters > 0 || cc.nbootstrap > 0 || cc.ncontroller_listeners > 0) {
        /* a node of a multi-node quorum: the controller traffic has its
         * own listener, as in every KRaft configuration */
        if (cc.ncontroller_listeners == 0) {
            snprintf(err, errlen, "controller.listener.names: must name the controller "
                                  "listener (e.g. CONTROLLER) when controller.quorum.voters "
                                  "or controller.quorum.bootstrap.servers is set");
            goto out;
        }
    }
    if (cc.roles & ST_ROLE_CONTROLLER) {
        if (cc.nbootstrap) {
            snprintf(err, errlen, "controller.quorum.voters: a controller needs the voter list "
                                  "(a quorum that changes its voters, KIP-853, is not "
                                  "supported); controller.quorum.bootstrap.servers is for "
                                  "broker-only nodes");
            goto out;
        }
        const st_voter_t *self = find_voter(&cc, cfg->node_id);
        if (cc.nvoters && !self) {
            snprintf(err, errlen,
                     "controller.quorum.voters: node.id %d is not among the voters, but "
                     "process.roles includes controller (every controller is a voter)",
                     (int)cfg->node_id);
            goto out;
        }
        if (cc.nvoters) {
            const st_listener_spec_t *cl = NULL;
            for (int i = 0; i < nl && !cl; i++)
                if (!strcasecmp(l[i].name, cc.controller_listeners[0])) cl = &l[i];
            if (!cl) {
                snprintf(err, errlen,
                         "controller.listener.names: %s is not in listeners, but a "
                         "controller listens on it",
                         cc.controller_listeners[0]);
                goto out;
            }
            if (cl->port != 0 && cl->port != self->port) {
                snprintf(err, errlen,
                         "controller.quorum.voters: node %d is at port %d there, but its %s "
                         "listener is on port %d",
                         (int)self->id, self->port, cl->name, cl->port);
                goto out;
            }
        }
    } else {
        if (!cc.nvoters && !cc.nbootstrap) {
            snprintf(err, errlen, "controller.quorum.voters: a broker-only node (process.roles "
                                  "broker) needs controller.quorum.voters or "
                                  "controller.quorum.bootstrap.servers");
            goto out;
        }
        if (find_voter(&cc, cfg->node_id)) {
            snprintf(err, errlen,
                     "controller.quorum.voters: node.id %d is a voter, so process.roles must "
                     "include controller",
                     (int)cfg->node_id);
            goto out;
        }
        if (ncontrol) {
            snprintf(err, errlen, "listeners: a broker-only node must not listen on a "
                                  "controller listener (controller.listener.names)");
            goto out;
        }
    }
    if ((cc.roles & ST_ROLE_BROKER) && nclient == 0) {
        snprintf(err, errlen, "listeners: no listener for clients (every one is in "
                              "controller.listener.names)");
        goto out;
    }
    if (!(cc.roles & ST_ROLE_BROKER) && nclient > 0) {
        snprintf(err, errlen, "listeners: a controller-only node listens on controller "
                              "listeners only (controller.listener.names)");
        goto out;
    }
    if (cc.nvoters > 1 && !*cfg->cluster_id) {
        snprintf(err, errlen, "cluster.id: must be set, the same on every node, when "
                              "controller.quorum.voters names more than one voter");
        goto out;
    }
    if (*cfg->cluster_id) {
        /* Kafka's ids are 16 bytes in URL-safe base64 (22 characters);
         * Strata accepts any such token, which also takes Kafka's */
        size_t n = strlen(cfg->cluster_id);
        int bad = n == 0 || n > 63;
        for (size_t i = 0; i < n && !bad; i++)
            bad = !(isalnum((unsigned char)cfg->cluster_id[i]) || cfg->cluster_id[i] == '-' ||
                    cfg->cluster_id[i] == '_');
        if (bad) {
            snprintf(err, errlen, "cluster.id: '%s' is not 1-63 letters, digits, - or _",
                     cfg->cluster_id);
            goto out;
        }
    }
    e = ST_OK;
out:
    free(l);
    if (e) st_cluster_config_fini(&cc);
    else *out = cc;
    return e;
}

void st_cluster_config_fini(st_cluster_config_t *cc) {
    free(cc->voters);
    free(cc->bootstrap);
    if (cc->controller_listeners) st_free_strv(cc->controller_listeners, cc->ncontroller_listeners);
    memset(cc, 0, sizeof *cc);
}

/* ---- the voters from controller.quorum.bootstrap.servers ---------------------------------
 *
 * Kafka's dynamic quorum (KIP-853) keeps its voter set in the metadata log;
 * this build's quorum is static (controller.quorum.voters on every
 * controller), so a broker-only node given only bootstrap servers learns
 * that set once, at start: DescribeQuorum v2 names each voter with its
 * listeners (the `nodes` array), whichever voter answers, leader or not. */

/* One bootstrap server's answer: ST_OK with cc->voters filled. */
static st_err_t ask_voters(st_cluster_config_t *cc, const st_voter_t *b,
                           const st_client_security_t *sec, char *why, size_t n) {
    char addr[300];
    snprintf(addr, sizeof addr, strchr(b->host, ':') ? "[%s]:%d" : "%s:%d", b->host, b->port);
    st_kclient_t kc = ST_KCLIENT_INIT("strata-bootstrap", sec);
    st_arena_t a;
    st_arena_init(&a, 8192);
    st_err_t e = st_kclient_open(&kc, addr, why, n);
    if (e) goto out;
    st_describe_quorum_req_part_t part;
    st_schema_defaults(&st_describe_quorum_req_part_schema, &part);
    part.partition_index = 0;
    st_describe_quorum_req_topic_t topic;
    st_schema_defaults(&st_describe_quorum_req_topic_schema, &topic);
    topic.topic_name = st_str("__cluster_metadata");
    topic.partitions.v = &part;
    topic.partitions.n = 1;
    st_describe_quorum_req_t q;
    st_schema_defaults(&st_describe_quorum_req_schema, &q);
    q.topics.v = &topic;
    q.topics.n = 1;
    st_describe_quorum_resp_t *r = NULL;
    e = st_kclient_call(&kc, ST_API_DESCRIBE_QUORUM, 2, &q, &a, (void **)&r, why, n);
    if (e) goto out;
    if (r->nodes.n <= 0) {
        snprintf(why, n, "%s named no voters (DescribeQuorum v2 nodes)", addr);
        e = ST_E_INVAL;
        goto out;
    }
    st_voter_t *v = st_calloc((size_t)r->nodes.n, sizeof *v);
    int nv = 0;
    const char *want = cc->ncontroller_listeners ? cc->controller_listeners[0] : NULL;
    for (int i = 0; i < r->nodes.n; i++) {
        const st_describe_quorum_node_t *node = &r->nodes.v[i];
        const st_raft_listener_t *l = NULL;
        for (int j = 0; j < node->listeners.n && !l; j++)
            if (!want || st_str_eq(node->listeners.v[j].name, want)) l = &node->listeners.v[j];
        if (!l || l->host.len <= 0 || l->host.len >= (int32_t)sizeof v[0].host) {
            snprintf(why, n, "%s named voter %d without a %s listener", addr, (int)node->node_id,
                     want ? want : "controller");
            free(v);
            e = ST_E_INVAL;
            goto out;
        }
        v[nv].id = node->node_id;
        memcpy(v[nv].host, l->host.p, (size_t)l->host.len);
        v[nv].port = l->port;
        nv++;
    }
    free(cc->voters);
    cc->voters = v;
    cc->nvoters = nv;
out:
    st_kclient_close(&kc);
    st_arena_fini(&a);
    return e;
}

st_err_t st_cluster_discover_voters(st_cluster_config_t *cc, int32_t node_id, int64_t wait_ms,
                                    const st_client_security_t *sec, char *err, size_t errlen) {
    char why[512] = "";
    int64_t deadline = st_mono_ms() + wait_ms;
    for (;;) {
        for (int i = 0; i < cc->nbootstrap; i++) {
            if (ask_voters(cc, &cc->bootstrap[i], sec, why, sizeof why)) {
                ST_INFO("cluster", "controller.quorum.bootstrap.servers: %s", why);
                continue;
            }
            char list[1024] = "";
            for (int k = 0; k < cc->nvoters; k++) {
                size_t len = strlen(list);
                snprintf(list + len, sizeof list - len, "%s%d@%s:%d", k ? "," : "",
                         (int)cc->voters[k].id, cc->voters[k].host, cc->voters[k].port);
                if (cc->voters[k].id == node_id) {
                    snprintf(err, errlen,
                             "controller.quorum.bootstrap.servers: the quorum's voters (%s) "
                             "include node.id %d, so process.roles must include controller",
                             list, (int)node_id);
                    return ST_E_CONFIG;
                }
            }
            ST_INFO("cluster", "the quorum's voters, from %s:%d: %s", cc->bootstrap[i].host,
                    cc->bootstrap[i].port, list);
            return ST_OK;
        }
        if (st_mono_ms() >= deadline) break;
        usleep(500 * 1000);
    }
    snprintf(err, errlen,
             "controller.quorum.bootstrap.servers: no server named the quorum's voters within "
             "%lld s (the last: %s)",
             (long long)(wait_ms / 1000), why);
    return ST_E_CONFIG;
}
