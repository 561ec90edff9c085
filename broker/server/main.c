/*
 * main.c - stratad: start-up and shutdown order.
 *
 *   start:  config -> soft fd limit raised to the hard one -> admin
 *           listener bound (health only) -> listeners bound -> log dirs
 *           locked -> metadata log replayed (partitions opened, recovered) -> this broker registered -> flusher,
 *           janitor, controller, group coordinator, log cleaner, request
 *           worker threads -> the connection limit, from the fds left ->
 *           I/O loops -> the admin listener serves everything (cleaning
 *           passes a crash cut short are finished or undone before any log
 *           opens)
 *   stop (SIGTERM / SIGINT):  the admin listener unready ->
 *           parked group joins answered -> stop accepting
 *           and reading -> finish or expire every request in flight ->
 *           request workers -> group coordinator -> log cleaner -> controller -> partitions -> flush,
 *           checkpoints, segments closed, clean-shutdown marker -> exit 0
 */
#include "admin.h"
#include "group.h"
#include "txn.h"
#include "server.h"
#include "st_objectstore.h"
#include "st_tiering.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

static void usage(FILE *out) {
    fprintf(out,
            "usage: stratad --config FILE [--override key=value ...]\n"
            "       stratad --print-config-doc\n"
            "\n"
            "Runs a Strata broker.  Settings use Kafka's property names; see the README's\n"
            "configuration reference or --print-config-doc.\n");
}

static int serve(const char *config_path, char **overrides, int noverrides);

/* ---- file descriptors --------------------------------------------------------
 *
 * Every connection is an fd, and so is every open segment, index, checkpoint
 * being written, cached chunk and object store socket.  With Kafka's
 * default (no connection limit) and the common soft limit of 1024, clients
 * alone could take every fd and leave the broker unable to open a log.  So,
 * as Redis does, the soft limit is raised to the hard one at start, and
 * unless max.connections says otherwise connections may use only what is
 * left after a reserve for the broker's own files. */

typedef struct fd_limits {
    uint64_t soft, hard, was; /* was: the soft limit before raising it */
    int raise_errno;
} fd_limits_t;

static void fd_limit_raise(fd_limits_t *out) {
    struct rlimit rl = {0, 0};
    memset(out, 0, sizeof *out);
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
    out->was = out->soft = rl.rlim_cur;
    out->hard = rl.rlim_max;
    if (rl.rlim_cur >= rl.rlim_max && rl.rlim_max != RLIM_INFINITY) return;
    rlim_t want = rl.rlim_max;
    if (want == RLIM_INFINITY) {
        /* the kernel refuses more than fs.nr_open */
        want = 1048576;
        char *text = NULL;
        size_t len;
        if (st_read_file("/proc/sys/fs/nr_open", &text, &len) == ST_OK) {
            long long v = atoll(text);
            if (v > 0) want = (rlim_t)v;
            free(text);
        }
    }
    if (want <= rl.rlim_cur) return;
    struct rlimit nl = {want, rl.rlim_max};
    if (setrlimit(RLIMIT_NOFILE, &nl) == 0) out->soft = want;
    else out->raise_errno = errno;
}

static int fds_open(void) {
    DIR *d = opendir("/proc/self/fd");
    if (!d) return 64; /* a guess where /proc is missing */
    int n = 0;
    while (readdir(d)) n++;
    closedir(d);
    return n - 3; /* ".", ".." and the directory itself */
}

/* How many connections: max.connections when set, else what the fd limit
 * leaves once a quarter of it (at least 128, at most half of what is
 * free) is kept for the broker's own files.  Logged either way. */
static int connection_limit(const st_broker_config_t *cfg, const fd_limits_t *fl) {
    int open = fds_open();
    int64_t limit = fl->soft > (uint64_t)INT32_MAX ? INT32_MAX : (int64_t)fl->soft;
    int64_t free_fds = limit - open;
    int64_t reserve = ST_MAX(limit / 4, 128);
    if (reserve > free_fds / 2) reserve = free_fds / 2;
    int64_t room = ST_MAX(free_fds - reserve, 1);
    int max = cfg->max_connections >= 0 ? cfg->max_connections : (int)ST_MIN(room, INT32_MAX);
    char raised[160];
    if (fl->soft != fl->was)
        snprintf(raised, sizeof raised, "soft limit raised from %llu", (unsigned long long)fl->was);
    else if (fl->raise_errno)
        snprintf(raised, sizeof raised, "cannot raise it to the hard limit %llu: %s",
                 (unsigned long long)fl->hard, strerror(fl->raise_errno));
    else
        snprintf(raised, sizeof raised, "the hard limit");
    ST_INFO("server", "fd limit %lld (%s); %d open after start-up: up to %d connections (%s), "
                      "%lld fds kept for the broker's own files",
            (long long)limit, raised, open, max,
            cfg->max_connections >= 0 ? "max.connections" : "max.connections=-1: what the fd limit leaves",
            (long long)(limit - open - ST_MIN((int64_t)max, free_fds)));
    if (cfg->max_connections >= 0 && cfg->max_connections > room)
        ST_WARN("server", "max.connections=%d is more than the fd limit leaves room for (%lld): "
                          "once fds run out, accepting backs off on 'too many open files' and "
                          "log files may fail to open",
                cfg->max_connections, (long long)room);
    return max;
}

static int64_t flush_peak(void *logs) { return st_logmgr_take_flush_peak(logs); }

int main(int argc, char **argv) {
    const char *config_path = NULL;
    char **overrides = st_calloc((size_t)argc, sizeof *overrides);
    int noverrides = 0, print_doc = 0, rc = 2;
    static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
                                         {"override", required_argument, NULL, 'o'},
                                         {"print-config-doc", no_argument, NULL, 'd'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "c:o:h", opts, NULL)) != -1) {
        switch (ch) {
        case 'c': config_path = optarg; break;
        case 'o': overrides[noverrides++] = optarg; break;
        case 'd': print_doc = 1; break;
        case 'h': usage(stdout); rc = 0; goto out;
        default: usage(stderr); goto out;
        }
    }
    if (print_doc) {
        static const char *const titles[] = {"Object store settings", "Admin listener settings",
                                             "Security settings"};
        const st_cfg_table_t tables[] = {st_os_config_table, st_admin_config_table,
                                         st_sec_config_table};
        st_config_doc(stdout, tables, titles, 3);
        rc = 0;
    } else if (!config_path || optind != argc) {
        usage(stderr);
    } else {
        rc = serve(config_path, overrides, noverrides);
    }
out:
    free(overrides);
    return rc;
}

static int serve(const char *config_path, char **overrides, int noverrides) {
    /* every file and directory the broker makes is its own alone (0600 /
     * 0700): segments, checkpoints, the metadata log, the chunk cache */
    umask(077);

    /* Signals are taken synchronously by this thread; every thread started
     * below inherits the mask. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    static st_server_t srv;
    /* The object store's settings share the properties file (tiering
     * reads them). */
    static st_os_config_t oscfg;
    st_os_config_init(&oscfg);
    /* and so do the admin listener's (admin.listeners) */
    static st_admin_config_t admincfg;
    st_admin_config_init(&admincfg);
    /* and so do the security settings (ssl.*, sasl.*, listener.name.*) */
    static st_sec_config_t seccfg;
    st_sec_config_init(&seccfg);
    srv.sec = &seccfg;
    static st_cfg_bind_t extra[3];
    extra[0] = (st_cfg_bind_t){&st_os_config_table, &oscfg, NULL};
    extra[1] = (st_cfg_bind_t){&st_admin_config_table, &admincfg, NULL};
    extra[2] = (st_cfg_bind_t){&st_sec_config_table, &seccfg, st_sec_config_other};
    srv.extra_config = extra;
    srv.nextra_config = 3;
    char err[1024];
    if (st_broker_config_load(&srv.cfg, config_path, overrides, noverrides, extra, 3, err,
                              sizeof err)) {
        fprintf(stderr, "stratad: configuration error: %s\n", err);
        return 1;
    }
    st_log_level_t level;
    st_log_parse_level(srv.cfg.logger_level, &level);
    st_log_set_level(level);
    st_log_set_debug(srv.cfg.logger_debug);
    fd_limits_t fdl;
    fd_limit_raise(&fdl);

    /* Kafka's checks across keys (KafkaConfig.validateValues) */
    if (srv.cfg.max_connections_per_ip == 0 && !*srv.cfg.max_connections_per_ip_overrides) {
        fprintf(stderr, "stratad: configuration error: max.connections.per.ip can be 0 only if "
                        "max.connections.per.ip.overrides is set\n");
        return 1;
    }
    if (srv.cfg.queued_max_request_bytes > 0 &&
        srv.cfg.queued_max_request_bytes < srv.cfg.socket_request_max_bytes) {
        fprintf(stderr, "stratad: configuration error: queued.max.request.bytes (%lld) must be -1, "
                        "0 or at least socket.request.max.bytes (%d)\n",
                (long long)srv.cfg.queued_max_request_bytes, (int)srv.cfg.socket_request_max_bytes);
        return 1;
    }

    if (st_cluster_config_parse(&srv.cfg, &srv.cluster, err, sizeof err)) {
        fprintf(stderr, "stratad: configuration error: %s\n", err);
        return 1;
    }
    /* A broker-only node given bootstrap servers learns the voters from
     * them now: the controller and its clients want the voter list. */
    /* this broker's own connections: their TLS contexts and SASL logins */
    if (st_server_client_security_open(&srv, err, sizeof err)) {
        fprintf(stderr, "stratad: configuration error: %s\n", err);
        return 1;
    }
    if (srv.cluster.nbootstrap > 0 &&
        st_cluster_discover_voters(&srv.cluster, srv.cfg.node_id, 60000, &srv.ctl_sec, err,
                                   sizeof err)) {
        fprintf(stderr, "stratad: configuration error: %s\n", err);
        return 1;
    }
    int is_broker = (srv.cluster.roles & ST_ROLE_BROKER) != 0;

    if (st_parse_listeners(srv.cfg.listeners, &srv.listeners, &srv.nlisteners, err, sizeof err) ||
        srv.nlisteners == 0) {
        fprintf(stderr, "stratad: configuration error: listeners: %s\n",
                srv.nlisteners ? err : "no listener");
        return 1;
    }
    const char *adv = *srv.cfg.advertised_listeners ? srv.cfg.advertised_listeners : srv.cfg.listeners;
    if (st_parse_listeners(adv, &srv.advertised, &srv.nadvertised, err, sizeof err)) {
        fprintf(stderr, "stratad: configuration error: advertised.listeners: %s\n", err);
        return 1;
    }

    /* TLS contexts: a keystore that does not load stops start-up here */
    if (st_server_security_open(&srv, err, sizeof err)) {
        fprintf(stderr, "stratad: configuration error: %s\n", err);
        return 1;
    }

    /* The admin listener binds now, so a port in use stops start-up before
     * any log dir is locked; until attached it answers health only. */
    st_admin_t *admin = NULL;
    if (st_admin_start(&admincfg, &admin, err, sizeof err)) {
        fprintf(stderr, "stratad: %s\n", err);
        return 1;
    }

    st_net_config_t ncfg = {
        .nthreads = srv.cfg.num_network_threads,
        .max_request_bytes = srv.cfg.socket_request_max_bytes,
        .max_inflight_per_conn = 64,
        .idle_timeout_ms = srv.cfg.connections_max_idle_ms,
        .listeners = srv.listeners,
        .nlisteners = srv.nlisteners,
        .max_connections = INT32_MAX, /* set below, once the log files are open */
        .max_connections_per_ip = srv.cfg.max_connections_per_ip,
        .ip_overrides = srv.cfg.max_connections_per_ip_overrides,
        .queued_max_request_bytes = srv.cfg.queued_max_request_bytes,
    };
    st_net_hooks_t hooks = {st_server_on_request, st_server_on_wake, st_server_on_tick,
                            st_server_on_drain, &srv};
    if (st_net_new(&ncfg, &hooks, &srv.net, err, sizeof err)) {
        fprintf(stderr, "stratad: %s\n", err);
        return 1;
    }
    st_loop_state_t *loop_states = st_calloc((size_t)st_net_nloops(srv.net), sizeof *loop_states);
    for (int i = 0; i < st_net_nloops(srv.net); i++) {
        loop_states[i].srv = &srv;
        st_purgatory_init(&loop_states[i].purgatory);
        st_loop_set_user(st_net_loop(srv.net, i), &loop_states[i]);
    }
    /* An advertised address takes the port actually bound when it was 0,
     * and a host when none was given. */
    for (int i = 0; i < srv.nadvertised; i++) {
        int li = -1;
        for (int j = 0; j < srv.nlisteners && li < 0; j++)
            if (!strcmp(srv.listeners[j].name, srv.advertised[i].name)) li = j;
        if (li < 0 && i < srv.nlisteners) li = i;
        if (srv.advertised[i].port == 0 && li >= 0)
            srv.advertised[i].port = st_net_bound_port(srv.net, li);
        if (!srv.advertised[i].host[0]) snprintf(srv.advertised[i].host, sizeof srv.advertised[i].host, "localhost");
    }
    /* Controller listeners are never given to clients (Kafka's rule).  A
     * controller-only node registers nothing and keeps its own for the
     * log line below. */
    int nclient = 0;
    for (int i = 0; i < srv.nadvertised && is_broker; i++)
        if (!st_cluster_is_controller_listener(&srv.cluster, srv.advertised[i].name))
            srv.advertised[nclient++] = srv.advertised[i];
    if (is_broker) srv.nadvertised = nclient;
    if (srv.nadvertised == 0) {
        fprintf(stderr, "stratad: configuration error: advertised.listeners: no listener for "
                        "clients (every one is in controller.listener.names)\n");
        return 1;
    }
    const char *ibl = srv.cfg.inter_broker_listener_name;
    if (is_broker && *ibl) {
        int found = 0;
        for (int i = 0; i < srv.nadvertised && !found; i++) found = !strcmp(srv.advertised[i].name, ibl);
        if (!found) {
            fprintf(stderr, "stratad: configuration error: inter.broker.listener.name: %s is not "
                            "an advertised listener of this broker (nor may it be a controller "
                            "listener)\n", ibl);
            return 1;
        }
    }

    int ndirs = 0;
    char **dirs = st_split_csv(srv.cfg.log_dirs, &ndirs);
    st_logmgr_config_t lcfg = {
        .dirs = dirs,
        .ndirs = ndirs,
        .node_id = srv.cfg.node_id,
        .cluster_id = srv.cfg.cluster_id,
        .retention_check_interval_ms = srv.cfg.log_retention_check_interval_ms,
        .checkpoint_interval_ms = srv.cfg.log_flush_offset_checkpoint_interval_ms,
        .max_open_files = srv.cfg.log_max_open_files,
        .producer_id_expiration_check_interval_ms =
            srv.cfg.producer_id_expiration_check_interval_ms,
    };
    if (ndirs == 0 || st_logmgr_open(&lcfg, &srv.logs, err, sizeof err)) {
        fprintf(stderr, "stratad: %s\n", ndirs ? err : "log.dirs is empty");
        st_free_strv(dirs, ndirs);
        return 1;
    }
    /* Cleaning passes a crash interrupted are finished or undone as each
     * log is opened (st_log__open sees the .cleaned / .swap files of
     * broker/log/cleaner.c): no second walk over every partition. */
    srv.rm = st_replicas_new(&srv.cfg, srv.logs);
    st_replicas_set_net(srv.rm, srv.net);
    st_replicas_set_client_security(srv.rm, &srv.ib_sec);
    st_replicas_set_purgatories(srv.rm, st_server_loop_purgatory);
    st_os_t *os = NULL;
    st_tier_t *tier = NULL;
    if (srv.cfg.remote_log_storage_system_enable) {
        /* The bucket must answer before any partition opens: a missing
         * bucket, refused credentials or an unreachable endpoint stop
         * start-up with one line. */
        if (st_os_new(&oscfg, &os, err, sizeof err) || st_os_check(os, err, sizeof err)) {
            fprintf(stderr, "stratad: object store: %s\n", err);
            st_os_destroy(os);
            st_logmgr_close(srv.logs);
            st_free_strv(dirs, ndirs);
            return 1;
        }
        char cache_dir[4200];
        if (*srv.cfg.remote_log_cache_dir)
            snprintf(cache_dir, sizeof cache_dir, "%s", srv.cfg.remote_log_cache_dir);
        else
            snprintf(cache_dir, sizeof cache_dir, "%s/remote-cache", dirs[0]);
        st_tier_config_t tcfg = {
            .task_interval_ms = srv.cfg.remote_log_manager_task_interval_ms,
            .copy_threads = srv.cfg.remote_log_manager_copier_threads,
            .copy_max_bytes_per_s = srv.cfg.remote_log_manager_copy_max_bytes_per_second == INT64_MAX
                                        ? 0 : srv.cfg.remote_log_manager_copy_max_bytes_per_second,
            .fetch_max_bytes_per_s = srv.cfg.remote_log_manager_fetch_max_bytes_per_second == INT64_MAX
                                         ? 0 : srv.cfg.remote_log_manager_fetch_max_bytes_per_second,
            .retry_backoff_ms = srv.cfg.remote_log_manager_task_retry_backoff_ms,
            .retry_backoff_max_ms = srv.cfg.remote_log_manager_task_retry_backoff_max_ms,
            .retry_jitter = srv.cfg.remote_log_manager_task_retry_jitter,
            .orphan_min_age_ms = srv.cfg.remote_log_orphan_min_age_ms,
            .chunk_bytes = srv.cfg.remote_log_fetch_chunk_bytes,
            .cache_dir = cache_dir,
            .cache_bytes = srv.cfg.remote_log_cache_size_bytes,
            .cache_memory_bytes = srv.cfg.remote_log_cache_memory_bytes,
            .readahead_chunks = srv.cfg.remote_log_fetch_readahead_chunks,
            .index_cache_bytes = srv.cfg.remote_log_index_file_cache_total_size_bytes,
            /* live traffic's wait: acks=all produces on the log flush */
            .foreground_latency_us = flush_peak,
            .foreground_arg = srv.logs,
            .yield_latency_us = srv.cfg.remote_log_fetch_yield_latency_ms * 1000,
            .yield_min_bytes_per_s = srv.cfg.remote_log_fetch_yield_min_bytes_per_second,
            .store_config = &oscfg, /* read replicas' sources elsewhere */
        };
        if (st_tier_new(&tcfg, os, &tier, err, sizeof err)) {
            fprintf(stderr, "stratad: %s\n", err);
            st_os_destroy(os);
            st_logmgr_close(srv.logs);
            st_free_strv(dirs, ndirs);
            return 1;
        }
        st_replicas_set_tier(srv.rm, tier);
        ST_INFO("server", "tiered storage on: %s", st_os_describe(os));
    }
    st_controller_config_t ccfg = {&srv.cfg,          st_logmgr_cluster_id(srv.logs),
                                   srv.advertised,    srv.nadvertised,
                                   srv.cluster.voters, srv.cluster.nvoters,
                                   srv.net,           is_broker,
                                   &srv.ctl_sec};
    if (st_controller_open(&ccfg, srv.logs, st_replicas_sync, srv.rm, &srv.ctl, err, sizeof err)) {
        fprintf(stderr, "stratad: %s\n", err);
        st_logmgr_close(srv.logs);
        st_free_strv(dirs, ndirs);
        return 1;
    }
    st_replicas_set_controller(srv.rm, srv.ctl);
    srv.groups = st_server_groups_new(&srv);
    st_log_cleaner_t *cleaner = st_server_cleaner_new(&srv);
    srv.workers = st_pool_new(srv.cfg.num_io_threads, "io-worker");
    srv.pids = st_pid_pool_new(srv.ctl);
    srv.txns = st_server_txns_new(&srv);
    st_logmgr_start(srv.logs);
    if (tier) st_tier_start(tier);
    st_controller_start(srv.ctl);
    st_group_coord_start(srv.groups);
    st_txn_coord_start(srv.txns);
    if (cleaner) st_log_cleaner_start(cleaner);
    st_net_set_max_connections(srv.net, connection_limit(&srv.cfg, &fdl));
    if (srv.cfg.queued_max_request_bytes > 0)
        ST_INFO("server", "requests being read or answered may hold %lld bytes "
                          "(queued.max.request.bytes), one request (up to %d bytes) past that",
                (long long)srv.cfg.queued_max_request_bytes, (int)srv.cfg.socket_request_max_bytes);
    else
        ST_INFO("server", "no bound on the memory of requests (queued.max.request.bytes=%lld)",
                (long long)srv.cfg.queued_max_request_bytes);
    st_replicas_start(srv.rm);
    st_net_start(srv.net);

    ST_INFO("server", "stratad node %d (%s) of cluster %s is serving at %s:%d (CRC32C %s)",
            (int)srv.cfg.node_id,
            !is_broker ? "controller"
            : srv.cluster.roles & ST_ROLE_CONTROLLER ? "broker and controller" : "broker",
            st_controller_cluster_id(srv.ctl), srv.advertised[0].host, srv.advertised[0].port,
            st_crc32c_hw() ? "SSE4.2" : "software");
    st_admin_sources_t asrc = {&srv.cfg, srv.ctl, srv.rm, srv.net, tier, os, srv.groups, srv.logs};
    st_admin_attach(admin, &asrc);
    if (is_broker)
        printf("bootstrap.servers=%s:%d\n", srv.advertised[0].host, srv.advertised[0].port);
    else /* clients never reach a controller-only node */
        printf("controller listener %s:%d (a controller-only node: no client listener)\n",
               srv.advertised[0].host, srv.advertised[0].port);
    fflush(stdout);

    int sig = 0;
    sigwait(&sigs, &sig);
    ST_INFO("server", "%s received: shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");

    st_admin_detach(admin); /* /v1/ready answers 503 from here on */
    st_controller_stop(srv.ctl); /* controlled shutdown, while the loops still run */
    st_group_coord_close_requests(srv.groups); /* parked joins and syncs are answered */
    st_txn_coord_close_requests(srv.txns);     /* no marker goes out any more */
    st_net_stop(srv.net);
    st_pool_destroy(srv.workers); /* after the loops: nothing submits any more */
    st_group_coord_destroy(srv.groups);
    st_txn_coord_destroy(srv.txns); /* its clients, after the loops stopped */
    st_log_cleaner_destroy(cleaner); /* a pass in progress is undone */
    st_controller_close(srv.ctl);
    st_replicas_destroy(srv.rm);
    st_tier_destroy(tier); /* after the partitions let go of it */
    st_os_destroy(os);
    for (int i = 0; i < st_net_nloops(srv.net); i++) {
        st_produce_gates_free(&loop_states[i]);
        st_purgatory_fini(&loop_states[i].purgatory); /* no notifier left (logs, tiering) */
    }
    st_admin_stop(admin);
    st_net_destroy(srv.net);
    st_server_security_close(&srv);
    st_pid_pool_free(srv.pids); /* after the controller thread and the loops */
    free(loop_states);
    st_logmgr_close(srv.logs);
    st_free_strv(dirs, ndirs);
    free(srv.listeners);
    st_cluster_config_fini(&srv.cluster);
    free(srv.advertised);
    st_broker_config_fini(&srv.cfg);
    st_os_config_fini(&oscfg);
    st_admin_config_fini(&admincfg);
    st_sec_config_fini(&seccfg);
    ST_INFO("server", "stopped cleanly");
    return 0;
}
