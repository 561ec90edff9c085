/*
 * image.c - the metadata state machine: immutable images and the one
 * function that applies a batch of records to an image.
 *
 * Images share unchanged topics (copy on write, refcounted); a topic that
 * a record changes is copied first.  Nothing here reads clocks, files or
 * randomness: replaying the same log gives the same images.
 */
#include "controller.h"

#include <stdlib.h>

static st_meta_topic_t *topic_keep(st_meta_topic_t *t) {
    __atomic_add_fetch(&t->refs, 1, __ATOMIC_RELAXED);
    return t;
}

static void topic_release(st_meta_topic_t *t) {
    if (!t || __atomic_sub_fetch(&t->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    for (int i = 0; i < t->nparts; i++) {
        free(t->parts[i].replicas);
        free(t->parts[i].isr);
    }
    free(t->parts);
    for (int i = 0; i < t->nconfigs; i++) {
        free(t->configs[i].name);
        free(t->configs[i].value);
    }
    free(t->configs);
    free(t->name);
    free(t);
}

static int32_t *dup_i32(const int32_t *v, int n) {
    int32_t *d = st_malloc(sizeof *d * (size_t)(n ? n : 1));
    if (n) memcpy(d, v, sizeof *d * (size_t)n);
    return d;
}

static st_meta_topic_t *topic_clone(const st_meta_topic_t *t) {
    st_meta_topic_t *c = st_calloc(1, sizeof *c);
    c->refs = 1;
    c->name = st_strdup(t->name);
    c->id = t->id;
    c->internal = t->internal;
    c->nparts = t->nparts;
    c->parts = st_calloc((size_t)(t->nparts ? t->nparts : 1), sizeof *c->parts);
    for (int i = 0; i < t->nparts; i++) {
        c->parts[i] = t->parts[i];
        c->parts[i].replicas = dup_i32(t->parts[i].replicas, t->parts[i].nreplicas);
        c->parts[i].isr = dup_i32(t->parts[i].isr, t->parts[i].nisr);
    }
    c->nconfigs = t->nconfigs;
    c->configs = st_calloc((size_t)(t->nconfigs ? t->nconfigs : 1), sizeof *c->configs);
    for (int i = 0; i < t->nconfigs; i++) {
        c->configs[i].name = st_strdup(t->configs[i].name);
        c->configs[i].value = st_strdup(t->configs[i].value);
    }
    return c;
}

st_meta_image_t *st_image_keep(st_meta_image_t *img) {
    __atomic_add_fetch(&img->refs, 1, __ATOMIC_RELAXED);
    return img;
}

void st_image_release(st_meta_image_t *img) {
    if (!img || __atomic_sub_fetch(&img->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    for (int i = 0; i < img->ntopics; i++) topic_release(img->topics[i]);
    free(img->topics);
    for (int i = 0; i < img->nbrokers; i++) {
        free(img->brokers[i].host);
        free(img->brokers[i].rack);
    }
    free(img->brokers);
    free(img);
}

static int find_topic(const st_meta_image_t *img, const char *name, size_t len, int *at) {
    int lo = 0, hi = img->ntopics - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        /* Length-based: a wire name may hold a NUL ("r\0AAA"), and reading
         * a stored name past its own end is what strncmp would do here.
         * The order is strcmp's for names without NUL. */
        const char *n = img->topics[mid]->name;
        size_t nl = strlen(n);
        int c = memcmp(n, name, ST_MIN(nl, len));
        if (c == 0) c = nl < len ? -1 : nl > len;
        if (c == 0) {
            *at = mid;
            return 1;
        }
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    *at = lo;
    return 0;
}

const st_meta_topic_t *st_image_topic(const st_meta_image_t *img, const char *name, size_t len) {
    int at;
    return find_topic(img, name, len, &at) ? img->topics[at] : NULL;
}

const st_meta_topic_t *st_image_topic_by_id(const st_meta_image_t *img, const st_uuid_t *id) {
    for (int i = 0; i < img->ntopics; i++)
        if (!memcmp(&img->topics[i]->id, id, sizeof *id)) return img->topics[i];
    return NULL;
}

const char *st_meta_topic_config(const st_meta_topic_t *t, const char *name) {
    for (int i = 0; i < t->nconfigs; i++)
        if (!strcmp(t->configs[i].name, name)) return t->configs[i].value;
    return NULL;
}

/* ---- applying records ----------------------------------------------------- */

/* A private copy of topic i of the image being built. */
static st_meta_topic_t *own_topic(st_meta_image_t *img, int i) {
    st_meta_topic_t *t = img->topics[i];
    if (t->refs > 1) {
        img->topics[i] = topic_clone(t);
        topic_release(t);
    }
    return img->topics[i];
}

static int topic_index_by_id(const st_meta_image_t *img, const st_uuid_t *id) {
    for (int i = 0; i < img->ntopics; i++)
        if (!memcmp(&img->topics[i]->id, id, sizeof *id)) return i;
    return -1;
}

static void apply_topic(st_meta_image_t *img, const st_mrec_topic_t *r) {
    int at;
    if (r->name.len <= 0 || find_topic(img, r->name.p, (size_t)r->name.len, &at)) return;
    st_meta_topic_t *t = st_calloc(1, sizeof *t);
    t->refs = 1;
    t->name = st_strndup(r->name.p, (size_t)r->name.len);
    t->id = r->topic_id;
    t->internal = t->name[0] == '_' && t->name[1] == '_';
    t->parts = st_calloc(1, sizeof *t->parts);
    t->configs = st_calloc(1, sizeof *t->configs);
    img->topics = st_realloc(img->topics, sizeof *img->topics * (size_t)(img->ntopics + 1));
    memmove(img->topics + at + 1, img->topics + at,
            sizeof *img->topics * (size_t)(img->ntopics - at));
    img->topics[at] = t;
    img->ntopics++;
}

static void apply_partition(st_meta_image_t *img, const st_mrec_partition_t *r) {
    int i = topic_index_by_id(img, &r->topic_id);
    if (i < 0 || r->partition_id < 0) return;
    st_meta_topic_t *t = own_topic(img, i);
    if (r->partition_id >= t->nparts) {
        t->parts = st_realloc(t->parts, sizeof *t->parts * (size_t)(r->partition_id + 1));
        for (int k = t->nparts; k <= r->partition_id; k++) {
            memset(&t->parts[k], 0, sizeof t->parts[k]);
            t->parts[k].id = k;
            t->parts[k].leader = -1;
            t->parts[k].replicas = st_calloc(1, sizeof(int32_t));
            t->parts[k].isr = st_calloc(1, sizeof(int32_t));
        }
        t->nparts = r->partition_id + 1;
    }
    st_meta_partition_t *p = &t->parts[r->partition_id];
    free(p->replicas);
    free(p->isr);
    p->id = r->partition_id;
    p->leader = r->leader;
    p->leader_epoch = r->leader_epoch;
    p->partition_epoch = r->partition_epoch;
    p->replicas = dup_i32(r->replicas.v, r->replicas.n);
    p->nreplicas = r->replicas.n;
    p->isr = dup_i32(r->isr.v, r->isr.n);
    p->nisr = r->isr.n;
}

static void apply_config(st_meta_image_t *img, const st_mrec_config_t *r) {
    if (r->resource_type != ST_RESOURCE_TOPIC || r->name.len <= 0) return;
    int i;
    if (!find_topic(img, r->resource_name.p, (size_t)r->resource_name.len, &i)) return;
    st_meta_topic_t *t = own_topic(img, i);
    int k;
    for (k = 0; k < t->nconfigs; k++)
        if ((int)strlen(t->configs[k].name) == r->name.len &&
            !memcmp(t->configs[k].name, r->name.p, (size_t)r->name.len))
            break;
    if (r->value.len < 0) { /* delete */
        if (k == t->nconfigs) return;
        free(t->configs[k].name);
        free(t->configs[k].value);
        t->configs[k] = t->configs[--t->nconfigs];
        return;
    }
    if (k == t->nconfigs) {
        t->configs = st_realloc(t->configs, sizeof *t->configs * (size_t)(t->nconfigs + 1));
        t->configs[k].name = st_strndup(r->name.p, (size_t)r->name.len);
        t->configs[k].value = NULL;
        t->nconfigs++;
    }
    free(t->configs[k].value);
    t->configs[k].value = st_strndup(r->value.p, (size_t)r->value.len);
}

static void apply_remove_topic(st_meta_image_t *img, const st_mrec_remove_topic_t *r) {
    int i = topic_index_by_id(img, &r->topic_id);
    if (i < 0) return;
    topic_release(img->topics[i]);
    memmove(img->topics + i, img->topics + i + 1, sizeof *img->topics * (size_t)(img->ntopics - i - 1));
    img->ntopics--;
}

static void apply_register_broker(st_meta_image_t *img, const st_mrec_register_broker_t *r) {
    int k;
    for (k = 0; k < img->nbrokers; k++)
        if (img->brokers[k].id == r->broker_id) break;
    if (k == img->nbrokers) {
        img->brokers = st_realloc(img->brokers, sizeof *img->brokers * (size_t)(img->nbrokers + 1));
        memset(&img->brokers[k], 0, sizeof img->brokers[k]);
        img->nbrokers++;
    }
    st_meta_broker_t *b = &img->brokers[k];
    free(b->host);
    free(b->rack);
    b->id = r->broker_id;
    b->epoch = r->broker_epoch;
    b->fenced = r->fenced;
    b->host = st_strdup("");
    b->port = 0;
    if (r->endpoints.n > 0) {
        free(b->host);
        b->host = st_strndup(r->endpoints.v[0].host.p, (size_t)ST_MAX(r->endpoints.v[0].host.len, 0));
        b->port = r->endpoints.v[0].port;
    }
    b->rack = r->rack.len >= 0 ? st_strndup(r->rack.p, (size_t)r->rack.len) : NULL;
}

st_meta_image_t *st_image_apply(const st_meta_image_t *img, const st_mrec_t *recs, int n,
                                int64_t last_offset) {
    st_meta_image_t *out = st_calloc(1, sizeof *out);
    out->refs = 1;
    if (img) {
        out->ntopics = img->ntopics;
        out->topics = st_malloc(sizeof *out->topics * (size_t)(img->ntopics + 1));
        for (int i = 0; i < img->ntopics; i++) out->topics[i] = topic_keep(img->topics[i]);
        out->nbrokers = img->nbrokers;
        out->brokers = st_calloc((size_t)img->nbrokers + 1, sizeof *out->brokers);
        for (int i = 0; i < img->nbrokers; i++) {
            out->brokers[i] = img->brokers[i];
            out->brokers[i].host = st_strdup(img->brokers[i].host);
            out->brokers[i].rack = img->brokers[i].rack ? st_strdup(img->brokers[i].rack) : NULL;
        }
    }
    for (int i = 0; i < n; i++) {
        switch (recs[i].type) {
        case ST_MREC_TOPIC: apply_topic(out, &recs[i].u.topic); break;
        case ST_MREC_PARTITION: apply_partition(out, &recs[i].u.partition); break;
        case ST_MREC_CONFIG: apply_config(out, &recs[i].u.config); break;
        case ST_MREC_REMOVE_TOPIC: apply_remove_topic(out, &recs[i].u.remove_topic); break;
        case ST_MREC_REGISTER_BROKER: apply_register_broker(out, &recs[i].u.register_broker); break;
        default: break;
        }
    }
    out->offset = last_offset;
    return out;
}
