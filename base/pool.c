/*
 * pool.c - a fixed set of worker threads taking jobs from one FIFO.
 * Jobs never block the submitter; st_pool_destroy runs what is queued.
 */
#include "st_base.h"

#include <stdlib.h>
#include <time.h>

typedef struct pool_job {
    struct pool_job *next;
    st_job_cb fn;
    void *arg;
} pool_job_t;

struct st_pool {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    pool_job_t *head, *tail;
    int stopping;
    int nthreads;
    pthread_t *threads;
    char name[12];
};

static void *pool_main(void *arg) {
    st_pool_t *p = arg;
    st_thread_set_name(p->name);
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->head && !p->stopping) pthread_cond_wait(&p->cond, &p->lock);
        pool_job_t *j = p->head;
        if (!j) break; /* stopping and drained */
        p->head = j->next;
        if (!p->head) p->tail = NULL;
        pthread_mutex_unlock(&p->lock);
        j->fn(j->arg);
        free(j);
        pthread_mutex_lock(&p->lock);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

st_pool_t *st_pool_new(int nthreads, const char *name) {
    st_pool_t *p = st_calloc(1, sizeof *p);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->nthreads = nthreads < 1 ? 1 : nthreads;
    p->threads = st_calloc((size_t)p->nthreads, sizeof *p->threads);
    for (int i = 0; i < p->nthreads; i++) pthread_create(&p->threads[i], NULL, pool_main, p);
    return p;
}

void st_pool_submit(st_pool_t *p, st_job_cb fn, void *arg) {
    pool_job_t *j = st_malloc(sizeof *j);
    j->next = NULL;
    j->fn = fn;
    j->arg = arg;
    pthread_mutex_lock(&p->lock);
    if (p->tail) p->tail->next = j;
    else p->head = j;
    p->tail = j;
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
}

void st_pool_destroy(st_pool_t *p) {
    if (!p) return;
    pthread_mutex_lock(&p->lock);
    p->stopping = 1;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < p->nthreads; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->cond);
    free(p->threads);
    free(p);
}

void st_cond_wait_ms(pthread_cond_t *cond, pthread_mutex_t *mutex, int64_t ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (ms < 0) ms = 0;
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(cond, mutex, &ts);
}
