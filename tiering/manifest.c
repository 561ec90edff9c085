/*
 * manifest.c - a partition's remote segments as JSON (jansson), and the
 * object keys of a segment.
 *
 *   {"version": 1, "topic": "orders", "topic_id": "...", "partition": 0,
 *    "log_start_offset": 0, "leader_epoch": 3,
 *    "segments": [{"id": "...", "state": "COPY_SEGMENT_FINISHED",
 *                  "base_offset": 0, "last_offset": 999,
 *                  "max_timestamp": 1700000000000, "size": 1048576,
 *                  "crc32c": "8a9136aa", "leader_epochs": [[0, 0]]}]}
 *
 * Bytes from the bucket are hostile: every field is type-checked and the
 * segments must be ascending and contiguous.
 */
#include "tier_int.h"

#include <jansson.h>
#include <stdlib.h>

void st_tier__manifest_init(st_manifest_t *m) {
    memset(m, 0, sizeof *m);
    m->leader_epoch = -1;
}

void st_tier__manifest_fini(st_manifest_t *m) {
    for (int i = 0; i < m->nsegs; i++) free(m->segs[i].epochs);
    free(m->segs);
    st_tier__manifest_init(m);
}

void st_tier__manifest_copy(st_manifest_t *dst, const st_manifest_t *src) {
    dst->log_start = src->log_start;
    dst->leader_epoch = src->leader_epoch;
    dst->nsegs = src->nsegs;
    dst->segs = st_calloc((size_t)src->nsegs + 1, sizeof *dst->segs);
    for (int i = 0; i < src->nsegs; i++) {
        dst->segs[i] = src->segs[i];
        dst->segs[i].epochs = st_malloc(sizeof(st_tier_epoch_t) * (size_t)(src->segs[i].nepochs + 1));
        memcpy(dst->segs[i].epochs, src->segs[i].epochs,
               sizeof(st_tier_epoch_t) * (size_t)src->segs[i].nepochs);
    }
}

int64_t st_tier__manifest_end(const st_manifest_t *m) {
    return m->nsegs ? m->segs[m->nsegs - 1].last_offset + 1 : m->log_start;
}

int64_t st_tier__manifest_start(const st_manifest_t *m) {
    if (!m->nsegs) return m->log_start;
    return ST_MAX(m->log_start, m->segs[0].base_offset);
}

int64_t st_tier__manifest_bytes(const st_manifest_t *m) {
    int64_t n = 0;
    for (int i = 0; i < m->nsegs; i++) n += m->segs[i].size_bytes;
    return n;
}

char *st_tier__object_key(const char *prefix, const st_rseg_t *s, const char *kind) {
    return st_strprintf("%s/%020lld-%s.%s", prefix, (long long)s->base_offset, s->id, kind);
}

int st_tier__segment_keys(const char *prefix, const st_rseg_t *s, char *keys[6]) {
    static const char *const kinds[] = {"log", "index", "timeindex", "epochs"};
    int n = 0;
    for (int k = 0; k < 4; k++) keys[n++] = st_tier__object_key(prefix, s, kinds[k]);
    if (s->has_txnindex) keys[n++] = st_tier__object_key(prefix, s, "txnindex");
    if (s->has_snapshot) keys[n++] = st_tier__object_key(prefix, s, "snapshot");
    return n;
}

char *st_tier__manifest_encode(const st_manifest_t *m, const char *topic, const char *topic_id,
                               int32_t partition) {
    json_t *root = json_object();
    json_object_set_new(root, "version", json_integer(1));
    json_object_set_new(root, "topic", json_string(topic));
    json_object_set_new(root, "topic_id", json_string(topic_id));
    json_object_set_new(root, "partition", json_integer(partition));
    json_object_set_new(root, "log_start_offset", json_integer(m->log_start));
    if (m->leader_epoch >= 0) json_object_set_new(root, "leader_epoch", json_integer(m->leader_epoch));
    json_t *segs = json_array();
    for (int i = 0; i < m->nsegs; i++) {
        const st_rseg_t *s = &m->segs[i];
        json_t *o = json_object();
        char crc[9];
        snprintf(crc, sizeof crc, "%08x", s->crc32c);
        json_object_set_new(o, "id", json_string(s->id));
        json_object_set_new(o, "state", json_string("COPY_SEGMENT_FINISHED"));
        json_object_set_new(o, "base_offset", json_integer(s->base_offset));
        json_object_set_new(o, "last_offset", json_integer(s->last_offset));
        json_object_set_new(o, "max_timestamp", json_integer(s->max_timestamp));
        json_object_set_new(o, "size", json_integer(s->size_bytes));
        json_object_set_new(o, "crc32c", json_string(crc));
        json_t *ep = json_array();
        for (int k = 0; k < s->nepochs; k++)
            json_array_append_new(ep, json_pack("[iI]", (int)s->epochs[k].epoch,
                                                (json_int_t)s->epochs[k].start_offset));
        json_object_set_new(o, "leader_epochs", ep);
        if (s->has_txnindex) json_object_set_new(o, "txn_index", json_true());
        if (s->has_snapshot) json_object_set_new(o, "producer_snapshot", json_true());
        json_array_append_new(segs, o);
    }
    json_object_set_new(root, "segments", segs);
    char *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return text;
}

static int get_i64(json_t *o, const char *name, int64_t *out) {
    json_t *v = json_object_get(o, name);
    if (!json_is_integer(v)) return -1;
    *out = (int64_t)json_integer_value(v);
    return 0;
}

st_err_t st_tier__manifest_decode(const char *text, size_t len, st_manifest_t *out, char *why,
                                  size_t whylen) {
    json_error_t jerr;
    json_t *root = json_loadb(text, len, 0, &jerr);
    st_manifest_t m;
    st_tier__manifest_init(&m);
    st_err_t e = ST_E_CORRUPT;
    if (!root) {
        snprintf(why, whylen, "not JSON: %s (line %d)", jerr.text, jerr.line);
        return e;
    }
    int64_t version;
    json_t *segs = json_object_get(root, "segments");
    if (get_i64(root, "version", &version) || version != 1) {
        snprintf(why, whylen, "unknown manifest version");
        goto out;
    }
    if (get_i64(root, "log_start_offset", &m.log_start) || m.log_start < 0 || !json_is_array(segs)) {
        snprintf(why, whylen, "missing log_start_offset or segments");
        goto out;
    }
    int64_t writer = -1; /* absent in manifests written before it was recorded */
    if (json_object_get(root, "leader_epoch") &&
        (get_i64(root, "leader_epoch", &writer) || writer < 0 || writer > INT32_MAX)) {
        snprintf(why, whylen, "malformed leader_epoch");
        goto out;
    }
    m.leader_epoch = (int32_t)writer;
    m.nsegs = (int)json_array_size(segs);
    m.segs = st_calloc((size_t)m.nsegs + 1, sizeof *m.segs);
    for (int i = 0; i < m.nsegs; i++) {
        json_t *o = json_array_get(segs, (size_t)i);
        st_rseg_t *s = &m.segs[i];
        json_t *id = json_object_get(o, "id"), *crc = json_object_get(o, "crc32c"),
               *ep = json_object_get(o, "leader_epochs");
        if (!json_is_string(id) || strlen(json_string_value(id)) != 22 || !json_is_string(crc) ||
            get_i64(o, "base_offset", &s->base_offset) || get_i64(o, "last_offset", &s->last_offset) ||
            get_i64(o, "max_timestamp", &s->max_timestamp) || get_i64(o, "size", &s->size_bytes) ||
            !json_is_array(ep) || s->base_offset < 0 || s->last_offset < s->base_offset ||
            s->size_bytes < 0) {
            snprintf(why, whylen, "segment %d is malformed", i);
            goto out;
        }
        if (i > 0 && s->base_offset != m.segs[i - 1].last_offset + 1) {
            snprintf(why, whylen, "segment %d does not follow segment %d", i, i - 1);
            goto out;
        }
        snprintf(s->id, sizeof s->id, "%s", json_string_value(id));
        s->crc32c = (uint32_t)strtoul(json_string_value(crc), NULL, 16);
        s->has_txnindex = json_is_true(json_object_get(o, "txn_index"));
        s->has_snapshot = json_is_true(json_object_get(o, "producer_snapshot"));
        s->nepochs = (int)json_array_size(ep);
        s->epochs = st_calloc((size_t)s->nepochs + 1, sizeof *s->epochs);
        for (int k = 0; k < s->nepochs; k++) {
            json_t *pair = json_array_get(ep, (size_t)k);
            if (!json_is_array(pair) || json_array_size(pair) != 2 ||
                !json_is_integer(json_array_get(pair, 0)) || !json_is_integer(json_array_get(pair, 1))) {
                snprintf(why, whylen, "segment %d: bad leader_epochs", i);
                goto out;
            }
            s->epochs[k].epoch = (int32_t)json_integer_value(json_array_get(pair, 0));
            s->epochs[k].start_offset = (int64_t)json_integer_value(json_array_get(pair, 1));
        }
    }
    *out = m;
    st_tier__manifest_init(&m);
    e = ST_OK;
out:
    st_tier__manifest_fini(&m);
    json_decref(root);
    return e;
}

st_err_t st_tier_manifest_summarize(const char *text, size_t len, st_tier_manifest_summary_t *out,
                                    char *why, size_t whylen) {
    st_manifest_t m;
    st_err_t e = st_tier__manifest_decode(text, len, &m, why, whylen);
    if (e) return e;
    out->segments = m.nsegs;
    out->bytes = st_tier__manifest_bytes(&m);
    out->start = st_tier__manifest_start(&m);
    out->end = st_tier__manifest_end(&m);
    out->newest_timestamp = m.nsegs ? m.segs[m.nsegs - 1].max_timestamp : -1;
    st_tier__manifest_fini(&m);
    return ST_OK;
}

st_err_t st_tier_manifest_objects(const char *prefix, const char *text, size_t len,
                                  st_tier_manifest_objects_t *out, char *why, size_t whylen) {
    memset(out, 0, sizeof *out);
    out->partition = -1;
    st_manifest_t m;
    st_err_t e = st_tier__manifest_decode(text, len, &m, why, whylen);
    if (e) return e;
    json_t *root = json_loadb(text, len, 0, NULL); /* decoded above: JSON */
    json_t *topic = json_object_get(root, "topic"), *id = json_object_get(root, "topic_id");
    int64_t part;
    if (json_is_string(topic)) out->topic = st_strdup(json_string_value(topic));
    if (json_is_string(id)) out->topic_id = st_strdup(json_string_value(id));
    if (!get_i64(root, "partition", &part) && part >= 0 && part <= INT32_MAX)
        out->partition = (int32_t)part;
    json_decref(root);
    out->summary.segments = m.nsegs;
    out->summary.bytes = st_tier__manifest_bytes(&m);
    out->summary.start = st_tier__manifest_start(&m);
    out->summary.end = st_tier__manifest_end(&m);
    out->summary.newest_timestamp = m.nsegs ? m.segs[m.nsegs - 1].max_timestamp : -1;
    out->max_leader_epoch = m.leader_epoch;
    out->keys = st_malloc(sizeof *out->keys * (size_t)(6 * m.nsegs + 1));
    out->sizes = st_malloc(sizeof *out->sizes * (size_t)(6 * m.nsegs + 1));
    out->crcs = st_malloc(sizeof *out->crcs * (size_t)(6 * m.nsegs + 1));
    for (int i = 0; i < m.nsegs; i++) {
        for (int k = 0; k < m.segs[i].nepochs; k++)
            out->max_leader_epoch = ST_MAX(out->max_leader_epoch, m.segs[i].epochs[k].epoch);
        int n = st_tier__segment_keys(prefix, &m.segs[i], out->keys + out->nkeys);
        for (int k = 0; k < n; k++) {
            out->sizes[out->nkeys + k] = k == 0 ? m.segs[i].size_bytes : -1;
            out->crcs[out->nkeys + k] = k == 0 ? (int64_t)m.segs[i].crc32c : -1;
        }
        out->nkeys += n;
    }
    st_tier__manifest_fini(&m);
    return ST_OK;
}

void st_tier_manifest_objects_fini(st_tier_manifest_objects_t *o) {
    for (int i = 0; i < o->nkeys; i++) free(o->keys[i]);
    free(o->keys);
    free(o->sizes);
    free(o->crcs);
    free(o->topic);
    free(o->topic_id);
    memset(o, 0, sizeof *o);
}

char *st_tier_manifest_retarget(const char *text, size_t len, const char *topic,
                                const char *topic_id, int32_t partition, char *why, size_t whylen) {
    st_manifest_t m;
    if (st_tier__manifest_decode(text, len, &m, why, whylen)) return NULL;
    char *out = st_tier__manifest_encode(&m, topic, topic_id, partition);
    st_tier__manifest_fini(&m);
    return out;
}

/* ---- the topic's descriptor ------------------------------------------------
 *
 *   {"version": 1, "topic": "orders", "topic_id": "...", "partitions": 3,
 *    "replication_factor": 3, "configs": {"retention.ms": "-1", ...}}
 */

char *st_tier_descriptor_encode(const st_tier_descriptor_t *d) {
    json_t *root = json_object();
    json_object_set_new(root, "version", json_integer(1));
    json_object_set_new(root, "topic", json_string(d->topic));
    json_object_set_new(root, "topic_id", json_string(d->topic_id));
    json_object_set_new(root, "partitions", json_integer(d->partitions));
    json_object_set_new(root, "replication_factor", json_integer(d->replication_factor));
    json_t *cf = json_object();
    for (int i = 0; i < d->nconfigs; i++)
        json_object_set_new(cf, d->config_names[i], json_string(d->config_values[i]));
    json_object_set_new(root, "configs", cf);
    char *text = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(root);
    return text;
}

void st_tier_descriptor_fini(st_tier_descriptor_t *d) {
    for (int i = 0; i < d->nconfigs; i++) {
        free(d->config_names[i]);
        free(d->config_values[i]);
    }
    free(d->config_names);
    free(d->config_values);
    free(d->topic);
    free(d->topic_id);
    memset(d, 0, sizeof *d);
}

st_err_t st_tier_descriptor_decode(const char *text, size_t len, st_tier_descriptor_t *out,
                                   char *why, size_t whylen) {
    memset(out, 0, sizeof *out);
    json_error_t jerr;
    json_t *root = json_loadb(text, len, 0, &jerr);
    if (!root) {
        snprintf(why, whylen, "not JSON: %s (line %d)", jerr.text, jerr.line);
        return ST_E_CORRUPT;
    }
    int64_t version, parts, rf;
    json_t *topic = json_object_get(root, "topic"), *id = json_object_get(root, "topic_id");
    json_t *cf = json_object_get(root, "configs");
    const char *bad = NULL;
    if (get_i64(root, "version", &version) || version != 1) bad = "version (1 expected)";
    else if (!json_is_string(topic) || !json_string_length(topic)) bad = "topic";
    else if (!json_is_string(id) || json_string_length(id) != 22) bad = "topic_id";
    else if (get_i64(root, "partitions", &parts) || parts < 1 || parts > 1000000) bad = "partitions";
    else if (get_i64(root, "replication_factor", &rf) || rf < 1 || rf > 32767)
        bad = "replication_factor";
    else if (!json_is_object(cf)) bad = "configs";
    if (!bad) {
        const char *k;
        json_t *v;
        json_object_foreach(cf, k, v) if (!json_is_string(v)) bad = "configs (a value not a string)";
    }
    if (bad) {
        snprintf(why, whylen, "field %s missing or invalid", bad);
        json_decref(root);
        return ST_E_CORRUPT;
    }
    out->topic = st_strdup(json_string_value(topic));
    out->topic_id = st_strdup(json_string_value(id));
    out->partitions = (int32_t)parts;
    out->replication_factor = (int16_t)rf;
    size_t n = json_object_size(cf);
    out->config_names = st_calloc(n + 1, sizeof *out->config_names);
    out->config_values = st_calloc(n + 1, sizeof *out->config_values);
    const char *k;
    json_t *v;
    json_object_foreach(cf, k, v) {
        out->config_names[out->nconfigs] = st_strdup(k);
        out->config_values[out->nconfigs++] = st_strdup(json_string_value(v));
    }
    json_decref(root);
    return ST_OK;
}
