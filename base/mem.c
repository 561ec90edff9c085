/* mem.c - allocation wrappers, arenas and heap-formatted strings. */
#include "st_base.h"

#include <stdlib.h>

static void oom(size_t n) {
    fprintf(stderr, "strata: out of memory allocating %zu bytes\n", n);
    abort();
}

void *st_malloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) oom(n);
    return p;
}

void *st_calloc(size_t n, size_t m) {
    void *p = calloc(n ? n : 1, m ? m : 1);
    if (!p) oom(n * m);
    return p;
}

void *st_realloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) oom(n);
    return q;
}

char *st_strdup(const char *s) { return st_strndup(s, strlen(s)); }

char *st_strndup(const char *s, size_t n) {
    char *p = st_malloc(n + 1);
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

/* Arena blocks are chained newest first; a request larger than the block
 * size gets a block of its own. */
struct st_arena_block {
    st_arena_block_t *next;
    size_t used, size;
    _Alignas(16) uint8_t data[];
};

void st_arena_init(st_arena_t *a, size_t block_size) {
    a->head = NULL;
    a->block_size = block_size ? block_size : 4096;
}

void *st_arena_alloc(st_arena_t *a, size_t n) {
    n = (n + 7) & ~(size_t)7;
    st_arena_block_t *b = a->head;
    if (!b || b->size - b->used < n) {
        size_t size = n > a->block_size ? n : a->block_size;
        b = st_malloc(sizeof *b + size);
        b->size = size;
        b->used = 0;
        b->next = a->head;
        a->head = b;
    }
    void *p = b->data + b->used;
    b->used += n;
    memset(p, 0, n);
    return p;
}

char *st_arena_strndup(st_arena_t *a, const char *s, size_t n) {
    char *p = st_arena_alloc(a, n + 1);
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

int32_t *st_arena_dup_i32(st_arena_t *a, const int32_t *v, int n) {
    int32_t *d = st_arena_alloc(a, sizeof *d * (size_t)(n > 0 ? n : 1));
    if (n > 0) memcpy(d, v, sizeof *d * (size_t)n);
    return d;
}

void st_arena_fini(st_arena_t *a) {
    st_arena_block_t *b = a->head;
    while (b) {
        st_arena_block_t *next = b->next;
        free(b);
        b = next;
    }
    a->head = NULL;
}

char *st_vstrprintf(const char *fmt, va_list ap) {
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, again);
    va_end(again);
    if (n < 0) return st_strdup("");
    char *s = st_malloc((size_t)n + 1);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    return s;
}

char *st_strprintf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = st_vstrprintf(fmt, ap);
    va_end(ap);
    return s;
}

int st_snprintf_marked(char *out, size_t n, const char *fmt, ...) {
    static const char mark[] = "...[cut]";
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(out, n, fmt, ap);
    va_end(ap);
    if (m >= 0 && (size_t)m >= n && n >= sizeof mark)
        memcpy(out + n - sizeof mark, mark, sizeof mark);
    return m;
}
