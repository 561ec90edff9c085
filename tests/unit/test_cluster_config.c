/*
 * test_cluster_config.c - process.roles, controller.quorum.voters and the
 * listener names, checked together at start-up (broker/server/cluster.c):
 * each shape a user could write is accepted or refused with a sentence
 * naming the key and the problem.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

#define MAXO 12

typedef struct {
    const char *o[MAXO];
    const char *refusal; /* NULL: accepted; else a substring of the error */
} shape_t;

#define CTL3 "controller.quorum.voters=1@localhost:9093,2@localhost:9095,3@localhost:9097"
#define LST1 "listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093"
#define MAP "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"

static const shape_t shapes[] = {
    /* the README's single node: nothing set */
    {{NULL}, NULL},
    {{"process.roles=broker,controller", "controller.quorum.voters=1@localhost:9093",
      "controller.listener.names=CONTROLLER", LST1, MAP},
     NULL},
    /* a node of a 3-voter quorum, combined */
    {{"process.roles=broker,controller", CTL3, "controller.listener.names=CONTROLLER", LST1, MAP,
      "cluster.id=MkU3OEVBNTcwNTJENDM2Qk"},
     NULL},
    /* ... that forgot the cluster id */
    {{CTL3, "controller.listener.names=CONTROLLER", LST1, MAP}, "cluster.id: must be set"},
    /* a broker-only node */
    {{"process.roles=broker", "node.id=4", CTL3, "controller.listener.names=CONTROLLER",
      "listeners=PLAINTEXT://localhost:9092", MAP, "cluster.id=abc"},
     NULL},
    {{"process.roles=broker", "node.id=4", "controller.quorum.bootstrap.servers=localhost:9093",
      "controller.listener.names=CONTROLLER", "listeners=PLAINTEXT://localhost:9092", MAP},
     NULL},
    /* a controller-only node */
    {{"process.roles=controller", CTL3, "controller.listener.names=CONTROLLER",
      "listeners=CONTROLLER://localhost:9093", MAP, "cluster.id=abc"},
     NULL},
    {{"process.roles=controller", CTL3, "controller.listener.names=CONTROLLER", LST1, MAP,
      "cluster.id=abc"},
     "controller-only node listens on controller listeners only"},
    {{"process.roles=brokr"}, "process.roles: 'brokr' is not broker or controller"},
    {{"process.roles=broker,broker"}, "'broker' appears twice"},
    {{"process.roles="}, "process.roles: must be"},
    {{"process.roles=broker"}, "broker-only node (process.roles broker) needs"},
    {{"process.roles=broker", CTL3, "controller.listener.names=CONTROLLER",
      "listeners=PLAINTEXT://localhost:9092", MAP, "cluster.id=abc"},
     "node.id 1 is a voter, so process.roles must include controller"},
    {{"process.roles=broker", "node.id=4", CTL3, "controller.listener.names=CONTROLLER", LST1, MAP,
      "cluster.id=abc"},
     "broker-only node must not listen on a controller listener"},
    {{"node.id=7", CTL3, "controller.listener.names=CONTROLLER", LST1, MAP, "cluster.id=abc"},
     "node.id 7 is not among the voters"},
    {{"controller.quorum.voters=1@localhost:9093,1@localhost:9095",
      "controller.listener.names=CONTROLLER", LST1, MAP},
     "voter id 1 appears twice"},
    {{"controller.quorum.voters=one@localhost:9093"}, "'one@localhost:9093' is not id@host:port"},
    {{"controller.quorum.voters=1@localhost"}, "voter 1: 'localhost' is not host:port"},
    {{"controller.quorum.voters=1@localhost:0"}, "voter 1: '0' is not a port"},
    {{"controller.quorum.voters=1@:9093"}, "voter 1: ':9093' is not host:port"},
    {{CTL3, "controller.quorum.bootstrap.servers=localhost:9093"}, "set one of them"},
    {{CTL3, LST1, MAP, "cluster.id=abc"}, "controller.listener.names: must name"},
    {{CTL3, "controller.listener.names=CONTROLLER", "listeners=PLAINTEXT://localhost:9092",
      "cluster.id=abc", MAP},
     "controller.listener.names: CONTROLLER is not in listeners"},
    {{CTL3, "controller.listener.names=CONTROLLER",
      "listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9099", MAP, "cluster.id=abc"},
     "node 1 is at port 9093 there, but its CONTROLLER listener is on port 9099"},
    {{CTL3, "controller.listener.names=CONTROLLER", LST1, "cluster.id=abc"},
     "listener CONTROLLER has no security protocol in listener.security.protocol.map"},
    {{"listeners=PLAINTEXT://localhost:9092,PLAINTEXT://localhost:9094"},
     "listener name PLAINTEXT appears twice"},
    {{"listener.security.protocol.map=PLAINTEXT:PLAIN"}, "'PLAIN' is not PLAINTEXT, SSL"},
    {{"listener.security.protocol.map=PLAINTEXT"}, "'PLAINTEXT' is not NAME:PROTOCOL"},
    {{"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,plaintext:SSL"},
     "plaintext appears twice"},
    {{"controller.listener.names=CONTROLLER", "listeners=CONTROLLER://localhost:9093", MAP},
     "no listener for clients"},
    {{"cluster.id=has space"}, "cluster.id: 'has space' is not"},
};

static void test_shapes(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const shape_t *s = &shapes[i];
        char *ov[MAXO];
        int n = 0;
        while (n < MAXO && s->o[n]) {
            ov[n] = (char *)s->o[n];
            n++;
        }
        st_broker_config_t cfg;
        char err[512] = "";
        if (st_broker_config_load(&cfg, NULL, ov, n, NULL, 0, err, sizeof err)) {
            /* some are refused by the key's own check, as they are read */
            if (!s->refusal || !strstr(err, s->refusal)) fail_msg("shape %zu: %s", i, err);
            st_broker_config_fini(&cfg);
            continue;
        }
        st_cluster_config_t cc;
        err[0] = 0;
        st_err_t e = st_cluster_config_parse(&cfg, &cc, err, sizeof err);
        if (s->refusal && (e == ST_OK || !strstr(err, s->refusal)))
            fail_msg("shape %zu (%s ...): wanted a refusal with \"%s\", got %s \"%s\"", i,
                     n ? ov[0] : "defaults", s->refusal, e ? "refusal" : "acceptance", err);
        if (!s->refusal && e != ST_OK)
            fail_msg("shape %zu (%s ...): refused: %s", i, n ? ov[0] : "defaults", err);
        if (e == ST_OK) st_cluster_config_fini(&cc);
        st_broker_config_fini(&cfg);
    }
}

/* What a parse hands the rest of the broker. */
static void test_parsed(void **state) {
    (void)state;
    char *ov[] = {"node.id=2", CTL3, "controller.listener.names=controller", LST1, MAP,
                  "cluster.id=abc", "process.roles=controller,broker"};
    st_broker_config_t cfg;
    char err[512];
    assert_int_equal(st_broker_config_load(&cfg, NULL, ov, 7, NULL, 0, err, sizeof err), ST_OK);
    st_cluster_config_t cc;
    /* node 2's voter entry says 9095, its CONTROLLER listener 9093 */
    assert_int_equal(st_cluster_config_parse(&cfg, &cc, err, sizeof err), ST_E_CONFIG);
    assert_non_null(strstr(err, "node 2 is at port 9095"));
    st_broker_config_fini(&cfg);
    char *ov2[] = {"node.id=2", CTL3, "controller.listener.names=controller",
                   "listeners=PLAINTEXT://:9094,controller://localhost:9095", MAP, "cluster.id=abc",
                   "process.roles=controller,broker"};
    assert_int_equal(st_broker_config_load(&cfg, NULL, ov2, 7, NULL, 0, err, sizeof err), ST_OK);
    assert_int_equal(st_cluster_config_parse(&cfg, &cc, err, sizeof err), ST_OK);
    assert_int_equal(cc.roles, ST_ROLE_BROKER | ST_ROLE_CONTROLLER);
    assert_int_equal(cc.nvoters, 3);
    assert_int_equal(cc.voters[2].id, 3);
    assert_string_equal(cc.voters[2].host, "localhost");
    assert_int_equal(cc.voters[2].port, 9097);
    assert_true(st_cluster_is_controller_listener(&cc, "CONTROLLER"));
    assert_false(st_cluster_is_controller_listener(&cc, "PLAINTEXT"));
    st_cluster_config_fini(&cc);
    st_broker_config_fini(&cfg);
}

/* Listener names: any identifier, upper-cased as Kafka compares them;
 * a name too long for the table is refused, not cut. */
static void test_listener_names(void **state) {
    (void)state;
    st_listener_spec_t *l = NULL;
    int n = 0;
    char err[256];
    assert_int_equal(st_parse_listeners("internal://h:1,EXTERNAL_2://[::1]:2", &l, &n, err,
                                        sizeof err),
                     ST_OK);
    assert_int_equal(n, 2);
    assert_string_equal(l[0].name, "INTERNAL");
    assert_string_equal(l[1].name, "EXTERNAL_2");
    assert_string_equal(l[1].host, "::1");
    free(l);
    assert_int_equal(st_parse_listeners("A234567890123456789012345678901234://h:1", &l, &n, err,
                                        sizeof err),
                     ST_E_CONFIG);
    assert_non_null(strstr(err, "is not a listener name"));
    assert_int_equal(st_parse_listeners("a b://h:1", &l, &n, err, sizeof err), ST_E_CONFIG);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_parsed),
        cmocka_unit_test(test_listener_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
