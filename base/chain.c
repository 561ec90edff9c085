/* chain.c - refcounted descriptors and output chains (see st_base.h). */
#include "st_base.h"

#include <stdlib.h>
#include <unistd.h>

st_file_t *st_file_new(int fd) {
    st_file_t *f = st_malloc(sizeof *f);
    f->fd = fd;
    f->refs = 1;
    return f;
}

st_file_t *st_file_keep(st_file_t *f) {
    __atomic_add_fetch(&f->refs, 1, __ATOMIC_RELAXED);
    return f;
}

void st_file_release(st_file_t *f) {
    if (!f) return;
    if (__atomic_sub_fetch(&f->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        close(f->fd);
        free(f);
    }
}

void st_chain_init(st_chain_t *c) { memset(c, 0, sizeof *c); }

void st_chain_fini(st_chain_t *c) {
    for (size_t i = 0; i < c->nchunks; i++) st_file_release(c->chunks[i].file);
    free(c->chunks);
    st_buf_fini(&c->mem);
    memset(c, 0, sizeof *c);
}

static void chain_push(st_chain_t *c, st_file_t *f, int64_t off, int64_t len) {
    if (c->nchunks == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 8;
        c->chunks = st_realloc(c->chunks, c->cap * sizeof *c->chunks);
    }
    c->chunks[c->nchunks++] = (st_chunk_t){f, off, len};
}

static void chain_close_mem(st_chain_t *c) {
    if (c->mem.len == c->mem_mark) return;
    st_chunk_t *last = c->nchunks ? &c->chunks[c->nchunks - 1] : NULL;
    if (last && !last->file && last->off + last->len == (int64_t)c->mem_mark)
        last->len += (int64_t)(c->mem.len - c->mem_mark);
    else
        chain_push(c, NULL, (int64_t)c->mem_mark, (int64_t)(c->mem.len - c->mem_mark));
    c->mem_mark = c->mem.len;
}

void st_chain_add_file(st_chain_t *c, st_file_t *f, int64_t off, int64_t len) {
    chain_close_mem(c);
    if (len > 0) chain_push(c, st_file_keep(f), off, len);
}

int64_t st_chain_seal(st_chain_t *c) {
    chain_close_mem(c);
    int64_t total = 0;
    for (size_t i = 0; i < c->nchunks; i++) total += c->chunks[i].len;
    return total;
}
