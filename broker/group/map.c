/*
 * map.c - a small open-addressing hash map from byte strings to pointers
 * (groups by id, offsets by topic and partition).  Linear probing,
 * tombstones on delete, rebuilt at 70% use.  Not thread-safe: one owner.
 */
#include "group_int.h"

#include <stdlib.h>

static char tomb_key;
#define TOMB (&tomb_key)

static uint64_t hash_bytes(const void *p, size_t n) {
    const uint8_t *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

void st_gmap_init(st_gmap_t *m) { memset(m, 0, sizeof *m); }

void st_gmap_fini(st_gmap_t *m) {
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].key && m->slots[i].key != TOMB) free(m->slots[i].key);
    free(m->slots);
    memset(m, 0, sizeof *m);
}

static st_gmap_slot_t *find(const st_gmap_t *m, const void *key, size_t len, uint64_t h) {
    if (!m->cap) return NULL;
    for (size_t i = h & (m->cap - 1), k = 0; k < m->cap; i = (i + 1) & (m->cap - 1), k++) {
        st_gmap_slot_t *s = &m->slots[i];
        if (!s->key) return NULL;
        if (s->key != TOMB && s->hash == h && s->len == len && !memcmp(s->key, key, len)) return s;
    }
    return NULL;
}

static void grow(st_gmap_t *m) {
    size_t ncap = m->cap ? m->cap * 2 : 16;
    while (m->n * 2 >= ncap) ncap *= 2;
    st_gmap_slot_t *old = m->slots;
    size_t ocap = m->cap;
    m->slots = st_calloc(ncap, sizeof *m->slots);
    m->cap = ncap;
    m->used = m->n;
    for (size_t i = 0; i < ocap; i++) {
        if (!old[i].key || old[i].key == TOMB) continue;
        size_t j = old[i].hash & (ncap - 1);
        while (m->slots[j].key) j = (j + 1) & (ncap - 1);
        m->slots[j] = old[i];
    }
    free(old);
}

void *st_gmap_get(const st_gmap_t *m, const void *key, size_t len) {
    st_gmap_slot_t *s = find(m, key, len, hash_bytes(key, len));
    return s ? s->val : NULL;
}

void *st_gmap_put(st_gmap_t *m, const void *key, size_t len, void *val) {
    uint64_t h = hash_bytes(key, len);
    st_gmap_slot_t *s = find(m, key, len, h);
    if (s) {
        void *old = s->val;
        s->val = val;
        return old;
    }
    if ((m->used + 1) * 10 >= m->cap * 7) grow(m);
    size_t i = h & (m->cap - 1);
    while (m->slots[i].key && m->slots[i].key != TOMB) i = (i + 1) & (m->cap - 1);
    if (!m->slots[i].key) m->used++;
    m->slots[i].key = st_malloc(len + 1);
    memcpy(m->slots[i].key, key, len);
    m->slots[i].key[len] = 0;
    m->slots[i].len = len;
    m->slots[i].hash = h;
    m->slots[i].val = val;
    m->n++;
    return NULL;
}

void *st_gmap_del(st_gmap_t *m, const void *key, size_t len) {
    st_gmap_slot_t *s = find(m, key, len, hash_bytes(key, len));
    if (!s) return NULL;
    void *v = s->val;
    free(s->key);
    s->key = TOMB;
    s->val = NULL;
    m->n--;
    return v;
}

void *st_gmap_next(const st_gmap_t *m, size_t *i) {
    while (*i < m->cap) {
        st_gmap_slot_t *s = &m->slots[(*i)++];
        if (s->key && s->key != TOMB) return s->val;
    }
    return NULL;
}

/* ---- owned strings -------------------------------------------------------- */

st_str_t st_gstr_dup(st_str_t s) {
    if (s.len < 0) return ST_STR_NULL;
    char *p = st_malloc((size_t)s.len + 1);
    if (s.len) memcpy(p, s.p, (size_t)s.len);
    p[s.len] = 0;
    return (st_str_t){p, s.len};
}

void st_gstr_free(st_str_t *s) {
    free((void *)(uintptr_t)s->p);
    *s = ST_STR_NULL;
}

void st_gstr_set(st_str_t *dst, st_str_t src) {
    st_str_t n = st_gstr_dup(src);
    st_gstr_free(dst);
    *dst = n;
}

int st_gstr_cmp(st_str_t a, st_str_t b) {
    if (a.len < 0 || b.len < 0) return (a.len >= 0) - (b.len >= 0);
    int c = memcmp(a.p, b.p, (size_t)ST_MIN(a.len, b.len));
    return c ? c : (a.len > b.len) - (a.len < b.len);
}
