/*
 * unit.h - what every unit test executable shares: cmocka's includes in the
 * order it wants them, a seeded pseudo-random generator (so a failure can be
 * replayed with STRATA_TEST_SEED=<n>), and scratch directories that are
 * removed when the test that made them ends.
 *
 * No sockets, no sleeps: tests talk to the libraries through their headers
 * and to the file system under a mkdtemp() directory.
 */
#ifndef ST_UNIT_H
#define ST_UNIT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "st_base.h"

/* ---- pseudo-random numbers (xorshift64*) ---------------------------------- */

static uint64_t unit_rng_state = 0x9E3779B97F4A7C15ull;

static inline void unit_seed(const char *suite) {
    const char *s = getenv("STRATA_TEST_SEED");
    uint64_t seed = s ? strtoull(s, NULL, 0) : 20240611ull;
    if (!seed) seed = 1;
    unit_rng_state = seed;
    fprintf(stderr, "[ %s ] seed %llu (set STRATA_TEST_SEED to replay)\n", suite,
            (unsigned long long)seed);
}

static inline uint64_t unit_rand(void) {
    uint64_t x = unit_rng_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    unit_rng_state = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/* Uniform enough in [0, n) for test data. */
static inline uint32_t unit_below(uint32_t n) { return n ? (uint32_t)(unit_rand() % n) : 0; }

static inline void unit_fill(void *p, size_t n) {
    uint8_t *b = p;
    for (size_t i = 0; i < n; i++) b[i] = (uint8_t)unit_rand();
}

/* ---- scratch directories -------------------------------------------------- */

/* Directories made and not yet removed: a failing test jumps out before its
 * own cleanup, so what is left is removed when the executable exits. */
static char *unit_tmpdirs[64];

static inline void unit_tmpdirs_cleanup(void) {
    for (size_t i = 0; i < ST_ARRAY_SIZE(unit_tmpdirs); i++) {
        if (!unit_tmpdirs[i]) continue;
        st_rmtree(unit_tmpdirs[i]);
        free(unit_tmpdirs[i]);
        unit_tmpdirs[i] = NULL;
    }
}

/* A fresh directory under $TMPDIR (or /tmp); the caller frees the string
 * with unit_tmpdir_remove. */
static inline char *unit_tmpdir(void) {
    static int registered;
    const char *base = getenv("TMPDIR");
    char tmpl[4096];
    snprintf(tmpl, sizeof tmpl, "%s/strata-unit-XXXXXX", base && *base ? base : "/tmp");
    char *d = mkdtemp(tmpl);
    assert_non_null(d);
    if (!registered) {
        atexit(unit_tmpdirs_cleanup);
        registered = 1;
    }
    for (size_t i = 0; i < ST_ARRAY_SIZE(unit_tmpdirs); i++) {
        if (unit_tmpdirs[i]) continue;
        unit_tmpdirs[i] = st_strdup(d);
        break;
    }
    return st_strdup(d);
}

static inline void unit_tmpdir_remove(char *dir) {
    if (!dir) return;
    assert_int_equal(st_rmtree(dir), ST_OK);
    for (size_t i = 0; i < ST_ARRAY_SIZE(unit_tmpdirs); i++) {
        if (!unit_tmpdirs[i] || strcmp(unit_tmpdirs[i], dir)) continue;
        free(unit_tmpdirs[i]);
        unit_tmpdirs[i] = NULL;
        break;
    }
    free(dir);
}

/* Join a directory and a name into a static-free buffer of the caller. */
static inline void unit_path(char *out, size_t n, const char *dir, const char *name) {
    snprintf(out, n, "%s/%s", dir, name);
}

#endif /* ST_UNIT_H */
