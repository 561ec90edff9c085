/*
 * image.c - the metadata state machine: immutable images and the one
 * function that applies records (one batch, or a replay's run of batches)
 * to an image.
 *
 * Images share unchanged topics (copy on write, refcounted); a topic that
 * a record changes is copied first.  Nothing here reads clocks, files or
 * randomness: replaying the same log gives the same images.
 */
#include "controller.h"

#include <stdlib.h>

#include <openssl/crypto.h>

static st_meta_topic_t *topic_keep(st_meta_topic_t *t) {
    __atomic_add_fetch(&t->refs, 1, __ATOMIC_RELAXED);
    return t;
}

static void topic_release(st_meta_topic_t *t) {
    if (!t || __atomic_sub_fetch(&t->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    for (int i = 0; i < t->nparts; i++) {
        free(t->parts[i].replicas);
        free(t->parts[i].isr);
        free(t->parts[i].adding);
        free(t->parts[i].removing);
        free(t->parts[i].elr);
        free(t->parts[i].lkelr);
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
        c->parts[i].adding = dup_i32(t->parts[i].adding, t->parts[i].nadding);
        c->parts[i].removing = dup_i32(t->parts[i].removing, t->parts[i].nremoving);
        c->parts[i].elr = dup_i32(t->parts[i].elr, t->parts[i].nelr);
        c->parts[i].lkelr = dup_i32(t->parts[i].lkelr, t->parts[i].nlkelr);
    }
    c->nconfigs = t->nconfigs;
    c->configs = st_calloc((size_t)(t->nconfigs ? t->nconfigs : 1), sizeof *c->configs);
    for (int i = 0; i < t->nconfigs; i++) {
        c->configs[i].name = st_strdup(t->configs[i].name);
        c->configs[i].value = st_strdup(t->configs[i].value);
    }
    return c;
}

static void broker_fini(st_meta_broker_t *b) {
    free(b->host);
    free(b->rack);
    for (int i = 0; i < b->nendpoints; i++) {
        free(b->endpoints[i].name);
        free(b->endpoints[i].host);
    }
    free(b->endpoints);
}

/* dst takes a deep copy of src's strings */
static void broker_copy(st_meta_broker_t *dst, const st_meta_broker_t *src) {
    *dst = *src;
    dst->host = st_strdup(src->host);
    dst->rack = src->rack ? st_strdup(src->rack) : NULL;
    dst->endpoints = st_calloc((size_t)src->nendpoints + 1, sizeof *dst->endpoints);
    for (int i = 0; i < src->nendpoints; i++) {
        dst->endpoints[i].name = st_strdup(src->endpoints[i].name);
        dst->endpoints[i].host = st_strdup(src->endpoints[i].host);
        dst->endpoints[i].port = src->endpoints[i].port;
    }
}

st_meta_image_t *st_image_keep(st_meta_image_t *img) {
    __atomic_add_fetch(&img->refs, 1, __ATOMIC_RELAXED);
    return img;
}

static void acl_fini(st_acl_t *a) {
    free(a->resource_name);
    free(a->principal);
    free(a->host);
}

static void security_release(st_meta_security_t *sec) {
    if (!sec || __atomic_sub_fetch(&sec->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    for (int i = 0; i < sec->nscram; i++) free(sec->scram[i].user);
    if (sec->scram) OPENSSL_cleanse(sec->scram, sizeof *sec->scram * (size_t)sec->nscram);
    free(sec->scram);
    for (int i = 0; i < sec->nacls; i++) acl_fini(&sec->acls[i]);
    free(sec->acls);
    free(sec);
}

/* img's security part, its own to change (copied when shared). */
static st_meta_security_t *security_mut(st_meta_image_t *img) {
    st_meta_security_t *old = img->sec, *sec = st_calloc(1, sizeof *sec);
    sec->refs = 1;
    if (old) {
        if (old->refs == 1) {
            free(sec);
            return old;
        }
        sec->nscram = old->nscram;
        sec->scram = st_malloc(sizeof *sec->scram * (size_t)(old->nscram + 1));
        if (old->nscram) memcpy(sec->scram, old->scram, sizeof *sec->scram * (size_t)old->nscram);
        for (int i = 0; i < old->nscram; i++) sec->scram[i].user = st_strdup(old->scram[i].user);
        sec->nacls = old->nacls;
        sec->acls = st_malloc(sizeof *sec->acls * (size_t)(old->nacls + 1));
        for (int i = 0; i < old->nacls; i++) {
            sec->acls[i] = old->acls[i];
            sec->acls[i].resource_name = st_strdup(old->acls[i].resource_name);
            sec->acls[i].principal = st_strdup(old->acls[i].principal);
            sec->acls[i].host = st_strdup(old->acls[i].host);
        }
        security_release(old);
    }
    img->sec = sec;
    return sec;
}

void st_image_release(st_meta_image_t *img) {
    if (!img || __atomic_sub_fetch(&img->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    for (int i = 0; i < img->ntopics; i++) topic_release(img->topics[i]);
    free(img->topics);
    for (int i = 0; i < img->nbrokers; i++) broker_fini(&img->brokers[i]);
    free(img->brokers);
    security_release(img->sec);
    free(img);
}

/* ---- SCRAM credentials ------------------------------------------------------ */

static int scram_cmp(const char *user, st_sasl_mech_t m, const st_meta_scram_t *e) {
    int c = strcmp(user, e->user);
    return c ? c : (int)m - (int)e->cred.mech;
}

/* The index of (user, m), or -(insertion point) - 1. */
static int scram_find(const st_meta_security_t *sec, const char *user, st_sasl_mech_t m) {
    int lo = 0, hi = sec ? sec->nscram - 1 : -1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2, c = scram_cmp(user, m, &sec->scram[mid]);
        if (!c) return mid;
        if (c < 0) hi = mid - 1;
        else lo = mid + 1;
    }
    return -lo - 1;
}

const st_scram_cred_t *st_image_scram(const st_meta_image_t *img, const char *user,
                                      st_sasl_mech_t m) {
    int i = img ? scram_find(img->sec, user, m) : -1;
    return i >= 0 ? &img->sec->scram[i].cred : NULL;
}

void st_image_acls(const st_meta_image_t *img, const st_acl_t **acls, int *n) {
    *acls = img && img->sec ? img->sec->acls : NULL;
    *n = img && img->sec ? img->sec->nacls : 0;
}

static void apply_user_scram(st_meta_image_t *img, const st_mrec_user_scram_t *r) {
    st_sasl_mech_t m = (st_sasl_mech_t)r->mechanism;
    size_t kl = st_scram_key_len(m);
    /* a record that does not make a credential (a mechanism unknown here,
     * keys of the wrong size) is skipped: every node skips it alike */
    if (!st_sasl_is_scram(m) || r->name.len <= 0 || r->salt.len <= 0 ||
        r->salt.len > ST_SCRAM_MAX_SALT || (size_t)r->stored_key.len != kl ||
        (size_t)r->server_key.len != kl)
        return;
    st_meta_security_t *sec = security_mut(img);
    char *user = st_strndup(r->name.p, (size_t)r->name.len);
    int i = scram_find(sec, user, m);
    if (i < 0) {
        i = -i - 1;
        sec->scram = st_realloc(sec->scram, sizeof *sec->scram * (size_t)(sec->nscram + 1));
        memmove(&sec->scram[i + 1], &sec->scram[i], sizeof *sec->scram * (size_t)(sec->nscram - i));
        sec->nscram++;
        sec->scram[i].user = user;
    } else {
        free(user);
    }
    st_scram_cred_t *c = &sec->scram[i].cred;
    memset(c, 0, sizeof *c);
    c->mech = m;
    c->iterations = r->iterations;
    memcpy(c->salt, r->salt.p, (size_t)r->salt.len);
    c->salt_len = (size_t)r->salt.len;
    memcpy(c->stored_key, r->stored_key.p, kl);
    memcpy(c->server_key, r->server_key.p, kl);
    c->key_len = kl;
}

static void apply_remove_user_scram(st_meta_image_t *img, const st_mrec_remove_user_scram_t *r) {
    if (r->name.len <= 0) return;
    char *user = st_strndup(r->name.p, (size_t)r->name.len);
    int found = scram_find(img->sec, user, (st_sasl_mech_t)r->mechanism) >= 0;
    st_meta_security_t *sec = found ? security_mut(img) : NULL;
    int i = found ? scram_find(sec, user, (st_sasl_mech_t)r->mechanism) : -1;
    free(user);
    if (i < 0) return;
    free(sec->scram[i].user);
    OPENSSL_cleanse(&sec->scram[i].cred, sizeof sec->scram[i].cred);
    memmove(&sec->scram[i], &sec->scram[i + 1], sizeof *sec->scram * (size_t)(sec->nscram - i - 1));
    sec->nscram--;
}

/* An ACL binding (AccessControlEntryRecord); one that does not validate is
 * skipped alike on every node. */
static void apply_acl(st_meta_image_t *img, const st_mrec_acl_t *r) {
    st_acl_t a = {r->id,
                  r->resource_type,
                  st_strndup(r->resource_name.p ? r->resource_name.p : "", (size_t)ST_MAX(r->resource_name.len, 0)),
                  r->pattern_type,
                  st_strndup(r->principal.p ? r->principal.p : "", (size_t)ST_MAX(r->principal.len, 0)),
                  st_strndup(r->host.p ? r->host.p : "", (size_t)ST_MAX(r->host.len, 0)),
                  r->operation,
                  r->permission_type};
    char why[128];
    if (st_acl_valid(&a, why, sizeof why)) {
        acl_fini(&a);
        return;
    }
    st_meta_security_t *sec = security_mut(img);
    for (int i = 0; i < sec->nacls; i++)
        if (!memcmp(&sec->acls[i].id, &a.id, sizeof a.id)) { /* replayed: the same id */
            acl_fini(&sec->acls[i]);
            sec->acls[i] = a;
            return;
        }
    sec->acls = st_realloc(sec->acls, sizeof *sec->acls * (size_t)(sec->nacls + 1));
    sec->acls[sec->nacls++] = a;
}

static void apply_remove_acl(st_meta_image_t *img, const st_mrec_remove_acl_t *r) {
    for (int i = 0; img->sec && i < img->sec->nacls; i++) {
        if (memcmp(&img->sec->acls[i].id, &r->id, sizeof r->id)) continue;
        st_meta_security_t *sec = security_mut(img);
        acl_fini(&sec->acls[i]);
        memmove(&sec->acls[i], &sec->acls[i + 1], sizeof *sec->acls * (size_t)(sec->nacls - i - 1));
        sec->nacls--;
        return;
    }
}

const st_meta_broker_t *st_image_broker(const st_meta_image_t *img, int32_t id) {
    for (int i = 0; img && i < img->nbrokers; i++)
        if (img->brokers[i].id == id) return &img->brokers[i];
    return NULL;
}

const st_meta_endpoint_t *st_meta_broker_endpoint(const st_meta_broker_t *b, const char *name) {
    if (b->nendpoints == 0) return NULL;
    for (int i = 0; name && *name && i < b->nendpoints; i++)
        if (!strcmp(b->endpoints[i].name, name)) return &b->endpoints[i];
    return &b->endpoints[0];
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

/* ---- applying records -----------------------------------------------------
 *
 * One call applies any number of records (a replay applies a whole read of
 * the log at once), so its cost must not grow with records x topics: a
 * scratch index of the image being built maps names and ids to positions,
 * new topics are appended, and the array is put back in name order (and
 * cleared of removed topics) once at the end.
 */

typedef struct apply_ctx {
    st_meta_image_t *img;
    int *by_name, *by_id; /* position + 1; 0 empty, -1 deleted */
    size_t cap;           /* a power of two, more than twice the topics */
    int appended, removed;
} apply_ctx_t;

static uint64_t name_hash(const char *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)p[i]) * 1099511628211ull;
    return h;
}

static uint64_t id_hash(const st_uuid_t *id) {
    uint64_t a, b;
    memcpy(&a, id, 8);
    memcpy(&b, (const uint8_t *)id + 8, 8);
    return (a ^ (b * 0x9E3779B97F4A7C15ull)) * 0xff51afd7ed558ccdull;
}

static void index_put(int *v, size_t cap, uint64_t h, int pos) {
    size_t at = h & (cap - 1);
    while (v[at] > 0) at = (at + 1) & (cap - 1);
    v[at] = pos + 1;
}

static void index_build(apply_ctx_t *a) {
    st_meta_image_t *img = a->img;
    size_t cap = 64;
    while (cap <= (size_t)img->ntopics * 2) cap *= 2;
    free(a->by_name);
    free(a->by_id);
    a->by_name = st_calloc(cap, sizeof *a->by_name);
    a->by_id = st_calloc(cap, sizeof *a->by_id);
    a->cap = cap;
    for (int i = 0; i < img->ntopics; i++) {
        const st_meta_topic_t *t = img->topics[i];
        if (!t) continue;
        index_put(a->by_name, cap, name_hash(t->name, strlen(t->name)), i);
        index_put(a->by_id, cap, id_hash(&t->id), i);
    }
}

/* Position of the topic named name (length-based: a stored name matches
 * only when it has exactly these bytes), or -1. */
static int index_name(const apply_ctx_t *a, const char *name, size_t len) {
    for (size_t at = name_hash(name, len) & (a->cap - 1); a->by_name[at];
         at = (at + 1) & (a->cap - 1)) {
        int pos = a->by_name[at] - 1;
        if (pos < 0) continue;
        const char *n = a->img->topics[pos]->name;
        if (strlen(n) == len && !memcmp(n, name, len)) return pos;
    }
    return -1;
}

static int index_id(const apply_ctx_t *a, const st_uuid_t *id, size_t *slot) {
    for (size_t at = id_hash(id) & (a->cap - 1); a->by_id[at]; at = (at + 1) & (a->cap - 1)) {
        int pos = a->by_id[at] - 1;
        if (pos < 0) continue;
        if (!memcmp(&a->img->topics[pos]->id, id, sizeof *id)) {
            if (slot) *slot = at;
            return pos;
        }
    }
    return -1;
}

/* A private copy of topic i of the image being built. */
static st_meta_topic_t *own_topic(st_meta_image_t *img, int i) {
    st_meta_topic_t *t = img->topics[i];
    if (t->refs > 1) {
        img->topics[i] = topic_clone(t);
        topic_release(t);
    }
    return img->topics[i];
}

static void apply_topic(apply_ctx_t *a, const st_mrec_topic_t *r) {
    st_meta_image_t *img = a->img;
    if (r->name.len <= 0 || index_name(a, r->name.p, (size_t)r->name.len) >= 0) return;
    st_meta_topic_t *t = st_calloc(1, sizeof *t);
    t->refs = 1;
    t->name = st_strndup(r->name.p, (size_t)r->name.len);
    t->id = r->topic_id;
    t->internal = t->name[0] == '_' && t->name[1] == '_';
    t->parts = st_calloc(1, sizeof *t->parts);
    t->configs = st_calloc(1, sizeof *t->configs);
    if ((size_t)(img->ntopics + 1) * 2 >= a->cap) {
        img->topics = st_realloc(img->topics, sizeof *img->topics * (size_t)(img->ntopics + 1));
        img->topics[img->ntopics++] = t;
        index_build(a); /* grows the index */
    } else {
        img->topics = st_realloc(img->topics, sizeof *img->topics * (size_t)(img->ntopics + 1));
        img->topics[img->ntopics] = t;
        index_put(a->by_name, a->cap, name_hash(t->name, strlen(t->name)), img->ntopics);
        index_put(a->by_id, a->cap, id_hash(&t->id), img->ntopics);
        img->ntopics++;
    }
    a->appended = 1;
}

static void apply_partition(apply_ctx_t *a, const st_mrec_partition_t *r) {
    int i = index_id(a, &r->topic_id, NULL);
    if (i < 0 || r->partition_id < 0) return;
    st_meta_topic_t *t = own_topic(a->img, i);
    if (r->partition_id >= t->nparts) {
        /* grow geometrically: a topic's partitions arrive one record each */
        int cap = 1;
        while (cap < r->partition_id + 1) cap *= 2;
        t->parts = st_realloc(t->parts, sizeof *t->parts * (size_t)cap);
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
    free(p->adding);
    free(p->removing);
    free(p->elr);
    free(p->lkelr);
    p->id = r->partition_id;
    p->leader = r->leader;
    p->leader_epoch = r->leader_epoch;
    p->partition_epoch = r->partition_epoch;
    p->replicas = dup_i32(r->replicas.v, r->replicas.n);
    p->nreplicas = r->replicas.n;
    p->isr = dup_i32(r->isr.v, r->isr.n);
    p->nisr = r->isr.n;
    p->adding = dup_i32(r->adding_replicas.v, ST_MAX(r->adding_replicas.n, 0));
    p->nadding = ST_MAX(r->adding_replicas.n, 0);
    p->removing = dup_i32(r->removing_replicas.v, ST_MAX(r->removing_replicas.n, 0));
    p->nremoving = ST_MAX(r->removing_replicas.n, 0);
    p->elr = dup_i32(r->eligible_leader_replicas.v, ST_MAX(r->eligible_leader_replicas.n, 0));
    p->nelr = ST_MAX(r->eligible_leader_replicas.n, 0);
    p->lkelr = dup_i32(r->last_known_elr.v, ST_MAX(r->last_known_elr.n, 0));
    p->nlkelr = ST_MAX(r->last_known_elr.n, 0);
}

static void apply_config(apply_ctx_t *a, const st_mrec_config_t *r) {
    if (r->resource_type != ST_RESOURCE_TOPIC || r->name.len <= 0) return;
    int i = index_name(a, r->resource_name.p, (size_t)ST_MAX(r->resource_name.len, 0));
    if (i < 0) return;
    st_meta_topic_t *t = own_topic(a->img, i);
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

static void apply_remove_topic(apply_ctx_t *a, const st_mrec_remove_topic_t *r) {
    size_t id_slot;
    int i = index_id(a, &r->topic_id, &id_slot);
    if (i < 0) return;
    st_meta_topic_t *t = a->img->topics[i];
    for (size_t at = name_hash(t->name, strlen(t->name)) & (a->cap - 1); a->by_name[at];
         at = (at + 1) & (a->cap - 1))
        if (a->by_name[at] == i + 1) {
            a->by_name[at] = -1;
            break;
        }
    a->by_id[id_slot] = -1;
    topic_release(t);
    a->img->topics[i] = NULL; /* dropped from the array at the end */
    a->removed = 1;
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
    broker_fini(b);
    memset(b, 0, sizeof *b);
    b->id = r->broker_id;
    b->epoch = r->broker_epoch;
    b->incarnation = r->incarnation_id;
    b->fenced = r->fenced;
    b->endpoints = st_calloc((size_t)r->endpoints.n + 1, sizeof *b->endpoints);
    for (int i = 0; i < r->endpoints.n; i++) {
        const st_mrec_endpoint_t *ep = &r->endpoints.v[i];
        b->endpoints[i].name = ep->name.len > 0 ? st_strndup(ep->name.p, (size_t)ep->name.len) : st_strdup("");
        b->endpoints[i].host = ep->host.len > 0 ? st_strndup(ep->host.p, (size_t)ep->host.len) : st_strdup("");
        b->endpoints[i].port = ep->port;
    }
    b->nendpoints = r->endpoints.n;
    b->host = st_strdup(b->nendpoints ? b->endpoints[0].host : "");
    b->port = b->nendpoints ? b->endpoints[0].port : 0;
    b->rack = r->rack.len >= 0 ? st_strndup(r->rack.p, (size_t)r->rack.len) : NULL;
}

static void apply_fence(st_meta_image_t *img, const st_mrec_fence_t *r, int fenced) {
    for (int k = 0; k < img->nbrokers; k++)
        if (img->brokers[k].id == r->id && img->brokers[k].epoch == r->epoch)
            img->brokers[k].fenced = fenced;
}

static void apply_partition_change(apply_ctx_t *a, const st_mrec_partition_change_t *r) {
    size_t id_slot;
    int i = index_id(a, &r->topic_id, &id_slot);
    if (i < 0) return;
    st_meta_topic_t *t = a->img->topics[i];
    if (r->partition_id < 0 || r->partition_id >= t->nparts) return;
    t = own_topic(a->img, i);
    st_meta_partition_t *mp = &t->parts[r->partition_id];
    /* Kafka's rule: a leader given, even the same one, starts a new epoch */
    int leader_changed = r->leader != ST_MREC_NO_LEADER_CHANGE;
    if (r->leader != ST_MREC_NO_LEADER_CHANGE) mp->leader = r->leader;
    if (r->isr.n >= 0) {
        free(mp->isr);
        mp->isr = dup_i32(r->isr.v, r->isr.n);
        mp->nisr = r->isr.n;
    }
    if (r->replicas.n >= 0) {
        free(mp->replicas);
        mp->replicas = dup_i32(r->replicas.v, r->replicas.n);
        mp->nreplicas = r->replicas.n;
    }
    if (r->adding_replicas.n >= 0) {
        free(mp->adding);
        mp->adding = dup_i32(r->adding_replicas.v, r->adding_replicas.n);
        mp->nadding = r->adding_replicas.n;
    }
    if (r->removing_replicas.n >= 0) {
        free(mp->removing);
        mp->removing = dup_i32(r->removing_replicas.v, r->removing_replicas.n);
        mp->nremoving = r->removing_replicas.n;
    }
    if (r->eligible_leader_replicas.n >= 0) {
        free(mp->elr);
        mp->elr = dup_i32(r->eligible_leader_replicas.v, r->eligible_leader_replicas.n);
        mp->nelr = r->eligible_leader_replicas.n;
    }
    if (r->last_known_elr.n >= 0) {
        free(mp->lkelr);
        mp->lkelr = dup_i32(r->last_known_elr.v, r->last_known_elr.n);
        mp->nlkelr = r->last_known_elr.n;
    }
    /* Kafka's rule: a new leader starts a new leader epoch; every change
     * is a new partition epoch */
    if (leader_changed) mp->leader_epoch++;
    mp->partition_epoch++;
}

static int cmp_topic_name(const void *x, const void *y) {
    return strcmp((*(st_meta_topic_t *const *)x)->name, (*(st_meta_topic_t *const *)y)->name);
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
        for (int i = 0; i < img->nbrokers; i++) broker_copy(&out->brokers[i], &img->brokers[i]);
        out->next_producer_id = img->next_producer_id;
        if (img->sec) { /* shared until a record of this batch changes it */
            __atomic_add_fetch(&img->sec->refs, 1, __ATOMIC_RELAXED);
            out->sec = img->sec;
        }
    }
    apply_ctx_t a = {out, NULL, NULL, 0, 0, 0};
    int indexed = 0;
    for (int i = 0; i < n; i++) {
        int t = recs[i].type;
        if (!indexed && (t == ST_MREC_TOPIC || t == ST_MREC_PARTITION || t == ST_MREC_CONFIG ||
                         t == ST_MREC_REMOVE_TOPIC || t == ST_MREC_PARTITION_CHANGE)) {
            index_build(&a);
            indexed = 1;
        }
        switch (t) {
        case ST_MREC_TOPIC: apply_topic(&a, &recs[i].u.topic); break;
        case ST_MREC_PARTITION: apply_partition(&a, &recs[i].u.partition); break;
        case ST_MREC_CONFIG: apply_config(&a, &recs[i].u.config); break;
        case ST_MREC_REMOVE_TOPIC: apply_remove_topic(&a, &recs[i].u.remove_topic); break;
        case ST_MREC_REGISTER_BROKER: apply_register_broker(out, &recs[i].u.register_broker); break;
        case ST_MREC_PARTITION_CHANGE: apply_partition_change(&a, &recs[i].u.partition_change); break;
        case ST_MREC_FENCE_BROKER: apply_fence(out, &recs[i].u.fence, 1); break;
        case ST_MREC_UNFENCE_BROKER: apply_fence(out, &recs[i].u.fence, 0); break;
        case ST_MREC_PRODUCER_IDS:
            /* blocks only ever move forward (Kafka's ProducerIdControlManager
             * refuses a record that would go back) */
            if (recs[i].u.producer_ids.next_producer_id > out->next_producer_id)
                out->next_producer_id = recs[i].u.producer_ids.next_producer_id;
            break;
        case ST_MREC_USER_SCRAM_CREDENTIAL: apply_user_scram(out, &recs[i].u.user_scram); break;
        case ST_MREC_REMOVE_USER_SCRAM_CREDENTIAL:
            apply_remove_user_scram(out, &recs[i].u.remove_user_scram);
            break;
        case ST_MREC_ACCESS_CONTROL_ENTRY: apply_acl(out, &recs[i].u.acl); break;
        case ST_MREC_REMOVE_ACCESS_CONTROL_ENTRY: apply_remove_acl(out, &recs[i].u.remove_acl); break;
        default: break;
        }
    }
    if (a.removed) {
        int k = 0;
        for (int i = 0; i < out->ntopics; i++)
            if (out->topics[i]) out->topics[k++] = out->topics[i];
        out->ntopics = k;
    }
    if (a.appended) qsort(out->topics, (size_t)out->ntopics, sizeof *out->topics, cmp_topic_name);
    free(a.by_name);
    free(a.by_id);
    out->offset = last_offset;
    return out;
}
