/*
 * main.c - stratad: start-up and shutdown order.
 *
 *   start:  config -> listeners bound -> log dirs locked -> metadata log
 *           replayed (partitions opened, recovered) -> this broker
 *           registered -> flusher, janitor, controller, group coordinator,
 *           log cleaner, request worker threads -> I/O loops (cleaning
 *           passes a crash cut short are finished or undone before any log
 *           opens)
 *   stop (SIGTERM / SIGINT):  parked group joins answered -> stop accepting
 *           and reading -> finish or expire every request in flight ->
 *           request workers -> group coordinator -> log cleaner -> controller -> partitions -> flush,
 *           checkpoints, segments closed, clean-shutdown marker -> exit 0
 */
#include "group.h"
#include "server.h"
#include "st_objectstore.h"
#include "st_tiering.h"

#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
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
        static const char *const titles[] = {"Object store settings"};
        st_config_doc(stdout, &st_os_config_table, titles, 1);
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
    static st_cfg_bind_t extra[1];
    extra[0] = (st_cfg_bind_t){&st_os_config_table, &oscfg};
    srv.extra_config = extra;
    srv.nextra_config = 1;
    char err[1024];
    if (st_broker_config_load(&srv.cfg, config_path, overrides, noverrides, extra, 1, err,
                              sizeof err)) {
        fprintf(stderr, "stratad: configuration error: %s\n", err);
        return 1;
    }
    st_log_level_t level;
    st_log_parse_level(srv.cfg.logger_level, &level);
    st_log_set_level(level);
    st_log_set_debug(srv.cfg.logger_debug);

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

    st_net_config_t ncfg = {
        .nthreads = srv.cfg.num_network_threads,
        .max_request_bytes = srv.cfg.socket_request_max_bytes,
        .max_inflight_per_conn = 64,
        .idle_timeout_ms = srv.cfg.connections_max_idle_ms,
        .listeners = srv.listeners,
        .nlisteners = srv.nlisteners,
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
        st_loop_set_user(st_net_loop(srv.net, i), &loop_states[i]);
    }
    /* An advertised address takes the port actually bound when it was 0,
     * and a host when none was given. */
    for (int i = 0; i < srv.nadvertised; i++) {
        if (srv.advertised[i].port == 0 && i < srv.nlisteners)
            srv.advertised[i].port = st_net_bound_port(srv.net, i);
        if (!srv.advertised[i].host[0]) snprintf(srv.advertised[i].host, sizeof srv.advertised[i].host, "localhost");
    }

    int ndirs = 0;
    char **dirs = st_split_csv(srv.cfg.log_dirs, &ndirs);
    st_logmgr_config_t lcfg = {
        .dirs = dirs,
        .ndirs = ndirs,
        .node_id = srv.cfg.node_id,
        .retention_check_interval_ms = srv.cfg.log_retention_check_interval_ms,
        .checkpoint_interval_ms = srv.cfg.log_flush_offset_checkpoint_interval_ms,
        .flush_interval_ms = srv.cfg.log_flush_interval_ms,
    };
    if (ndirs == 0 || st_logmgr_open(&lcfg, &srv.logs, err, sizeof err)) {
        fprintf(stderr, "stratad: %s\n", ndirs ? err : "log.dirs is empty");
        return 1;
    }
    /* Cleaning passes a crash interrupted are finished or undone before
     * any log is opened (the .cleaned / .swap files of broker/log/cleaner.c). */
    for (int i = 0; i < ndirs; i++) {
        st_err_t ce = st_log_cleaner_recover(dirs[i]);
        if (ce) ST_WARN("server", "%s: cleaner recovery: %s", dirs[i], st_err_msg(ce));
    }
    srv.rm = st_replicas_new(&srv.cfg, srv.logs);
    st_replicas_set_net(srv.rm, srv.net);
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
            .chunk_bytes = srv.cfg.remote_log_fetch_chunk_bytes,
            .cache_dir = cache_dir,
            .cache_bytes = srv.cfg.remote_log_cache_size_bytes,
            .readahead_chunks = srv.cfg.remote_log_fetch_readahead_chunks,
            .index_cache_bytes = srv.cfg.remote_log_index_file_cache_total_size_bytes,
        };
        if (st_tier_new(&tcfg, os, &tier, err, sizeof err)) {
            fprintf(stderr, "stratad: %s\n", err);
            st_os_destroy(os);
            st_logmgr_close(srv.logs);
            return 1;
        }
        st_replicas_set_tier(srv.rm, tier);
        ST_INFO("server", "tiered storage on: %s", st_os_describe(os));
    }
    st_controller_config_t ccfg = {&srv.cfg, st_logmgr_cluster_id(srv.logs), srv.advertised,
                                   srv.nadvertised};
    if (st_controller_open(&ccfg, srv.logs, st_replicas_sync, srv.rm, &srv.ctl, err, sizeof err)) {
        fprintf(stderr, "stratad: %s\n", err);
        st_logmgr_close(srv.logs);
        return 1;
    }
    srv.groups = st_server_groups_new(&srv);
    st_log_cleaner_t *cleaner = st_server_cleaner_new(&srv);
    srv.workers = st_pool_new(srv.cfg.num_io_threads, "io-worker");
    st_logmgr_start(srv.logs);
    if (tier) st_tier_start(tier);
    st_controller_start(srv.ctl);
    st_group_coord_start(srv.groups);
    if (cleaner) st_log_cleaner_start(cleaner);
    st_net_start(srv.net);

    ST_INFO("server", "stratad node %d of cluster %s is serving at %s:%d (CRC32C %s)",
            (int)srv.cfg.node_id, st_controller_cluster_id(srv.ctl), srv.advertised[0].host,
            srv.advertised[0].port, st_crc32c_hw() ? "SSE4.2" : "software");
    printf("bootstrap.servers=%s:%d\n", srv.advertised[0].host, srv.advertised[0].port);
    fflush(stdout);

    int sig = 0;
    sigwait(&sigs, &sig);
    ST_INFO("server", "%s received: shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");

    st_group_coord_close_requests(srv.groups); /* parked joins and syncs are answered */
    st_net_stop(srv.net);
    st_pool_destroy(srv.workers); /* after the loops: nothing submits any more */
    st_group_coord_destroy(srv.groups);
    st_log_cleaner_destroy(cleaner); /* a pass in progress is undone */
    st_controller_close(srv.ctl);
    st_replicas_destroy(srv.rm);
    st_tier_destroy(tier); /* after the partitions let go of it */
    st_os_destroy(os);
    for (int i = 0; i < st_net_nloops(srv.net); i++) st_produce_gates_free(&loop_states[i]);
    st_net_destroy(srv.net);
    free(loop_states);
    st_logmgr_close(srv.logs);
    st_free_strv(dirs, ndirs);
    free(srv.listeners);
    free(srv.advertised);
    st_broker_config_fini(&srv.cfg);
    st_os_config_fini(&oscfg);
    ST_INFO("server", "stopped cleanly");
    return 0;
}
