/*
 * test_net.c - broker/net's pure parts: max.connections.per.ip.overrides as
 * the configuration validator (syntax) and st_net_new (resolved) read it.
 * Numeric addresses only, so no resolver is asked.
 */
#include "unit.h"

#include "net.h"

static const uint8_t v4_127_0_0_2[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 2};
static const uint8_t v6_loopback[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};

static void test_overrides_parse(void **state) {
    (void)state;
    char err[256];
    st_net_ip_limit_t *v = NULL;
    int n = -1;
    assert_int_equal(st_net_ip_overrides_parse(" 127.0.0.2:6 , [::1]:0,10.1.2.3:2147483647", 1,
                                               &v, &n, err, sizeof err),
                     ST_OK);
    assert_int_equal(n, 3);
    assert_memory_equal(v[0].addr, v4_127_0_0_2, 16); /* IPv4 as IPv4-mapped */
    assert_int_equal(v[0].max, 6);
    assert_memory_equal(v[1].addr, v6_loopback, 16);
    assert_int_equal(v[1].max, 0);
    assert_int_equal(v[2].max, INT32_MAX);
    free(v);

    /* empty: no entries */
    v = NULL;
    n = -1;
    assert_int_equal(st_net_ip_overrides_parse("", 1, &v, &n, err, sizeof err), ST_OK);
    assert_int_equal(n, 0);
    free(v);
    /* syntax only: out may be NULL */
    assert_int_equal(st_net_ip_overrides_parse("some.host:100,127.0.0.1:200", 0, NULL, NULL, err,
                                               sizeof err),
                     ST_OK);
}

static void test_overrides_refused(void **state) {
    (void)state;
    static const char *const bad[] = {
        "127.0.0.1",        /* no count */
        "127.0.0.1:",       /* empty count */
        ":5",               /* no host */
        "127.0.0.1:-1",     /* negative */
        "127.0.0.1:5x",     /* not a number */
        "127.0.0.1:2147483648",
        "[::1:5",           /* unclosed bracket */
        "[::1]x:5",
        "127.0.0.1:5,oops", /* one good, one bad */
    };
    for (size_t i = 0; i < ST_ARRAY_SIZE(bad); i++) {
        char err[256] = "";
        st_net_ip_limit_t *v = (st_net_ip_limit_t *)&err; /* must stay untouched */
        int n = 42;
        assert_int_equal(st_net_ip_overrides_parse(bad[i], 0, &v, &n, err, sizeof err), ST_E_CONFIG);
        assert_ptr_equal(v, (st_net_ip_limit_t *)&err);
        assert_int_equal(n, 42);
        assert_true(strlen(err) > 0);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_overrides_parse),
        cmocka_unit_test(test_overrides_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
