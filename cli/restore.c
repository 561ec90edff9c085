/*
 * restore.c - `strata topics restore`: topics brought back from the bucket
 * onto a broker or cluster that lost them (every local disk, the metadata
 * log with them).
 *
 *   restore (TOPIC ... | --all) [--as NEW-NAME | --read-replica [--source LOCATION]]
 *           [--replication-factor R] [--verify] [--timeout-ms MS]
 *
 * What a topic was is in the bucket: the descriptor its partition 0's
 * leader keeps at <topic>-<topicId>/topic.json (name, id, partition count,
 * replication factor, configs) and each partition's manifest (segments,
 * log start offset, leader epochs).  The tool reads them with the
 * broker's objectstore.* settings and checks everything before it changes
 * anything: each descriptor decodes and lies where its name and id say,
 * each manifest decodes and names the same topic, id and partition, and
 * every object a manifest names is in the bucket (the .log with the size
 * the manifest gives).  With --verify every one of those objects is read
 * whole too (to /dev/null): the store checks its bytes against the CRC32C
 * stored with it, and a .log's CRC32C must be its manifest's; that costs a
 * read of everything (a replay's worth of GETs), so it is asked for.  Any
 * failure is said (topic, partition, key) and nothing is restored, not
 * even the topics that passed.  A topic whose name exists on the cluster
 * is refused unless --as gives another name.
 *
 * Then each topic is created through the bootstrap broker (CreateTopics,
 * validated for every topic first) with the id it had, its partition
 * count, replication factor and configs (remote.storage.enable=true), and
 * partitions whose first leader epoch is above every epoch its manifests
 * were written at (a lower one would be fenced by them).  Each replica
 * opens its partition with the bucket ahead of its empty log: the log
 * starts at the remote end, with the producer state the bucket keeps, and
 * the remote part is served from the bucket.  The tool waits until every
 * partition's leader serves [the manifest's log start, its end) and says
 * so per topic.
 *
 * --as NEW-NAME (one topic): the topic gets a new id, and its objects are
 * copied under the new topic's prefix before it is created (objects keep
 * their names; each manifest is rewritten for the new topic); a copy that
 * fails deletes what it wrote.  The store copies them itself (S3's
 * CopyObject: a write request per object, no byte through the tool).
 *
 * --read-replica: each topic is created as a read replica of the one in
 * the bucket (strata.remote.read.replica=true, same id; uploads and their
 * settings are its source's): another cluster keeps writing it, and the
 * replica's leaders read its manifests again each task interval and
 * serve what they name.  Nothing is copied or written to the bucket.
 * --source LOCATION: the other cluster's bucket location, s3://BUCKET/PREFIX
 * or file:///ROOT, read with this broker's other objectstore.* settings
 * (endpoint, credentials); without it, this broker's own.
 *
 * Progress goes to stderr (a bar on a terminal, a line per quarter
 * otherwise); the result to stdout.  Exit 0 when every topic serves what
 * the bucket holds, 1 otherwise (one line on stderr), 2 on a usage error.
 */
#include "cli_int.h"
#include "st_tiering.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <unistd.h>

void st_cli_restore_usage(FILE *out) {
    fprintf(out,
            "  restore (TOPIC ... | --all) [--as NEW-NAME | --read-replica [--source LOCATION]]\n"
            "          [--replication-factor R] [--verify] [--timeout-ms MS]\n"
            "        recreate topics from the bucket (their descriptor and manifests): same\n"
            "        id, partitions, configs, serving every offset the bucket holds;\n"
            "        --as restores one topic under another name (its objects are copied);\n"
            "        --read-replica serves them read-only while their cluster writes on,\n"
            "        from --source (s3://BUCKET/PREFIX, file:///ROOT) or this bucket;\n"
            "        --verify reads every object first and checks its CRC32C\n");
}

typedef struct rpart {
    int present; /* a manifest: else nothing of it is in the bucket */
    char *manifest;
    size_t mlen;
    st_tier_manifest_objects_t objs;
} rpart_t;

typedef struct rtopic {
    char *dir; /* the topic's prefix in the bucket */
    st_tier_descriptor_t d;
    const char *name; /* as restored (d.topic, or --as) */
    char id[23];      /* as restored */
    rpart_t *parts;   /* d.partitions */
    int32_t max_epoch;
    int segments;
    int64_t bytes;
} rtopic_t;

static int say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int say(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *line = st_vstrprintf(fmt, ap);
    va_end(ap);
    for (char *p = line; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    fprintf(stderr, "strata topics: %s\n", line);
    free(line);
    return ST_CLI_EXIT_FAIL;
}

/* ---- progress ------------------------------------------------------------ */

typedef struct progress {
    const char *what;
    int64_t total;
    int tty, last; /* last: the quarter (no tty) or the per mille (tty) shown */
} progress_t;

static void progress_start(progress_t *p, const char *what, int64_t total) {
    p->what = what;
    p->total = total > 0 ? total : 1;
    p->tty = isatty(STDERR_FILENO);
    p->last = -1;
}

static void progress_show(progress_t *p, int64_t done, const char *unit) {
    int pm = (int)(done * 1000 / p->total);
    if (p->tty) {
        if (pm == p->last && done < p->total) return;
        p->last = pm;
        char bar[31];
        int fill = pm * 30 / 1000;
        for (int i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '.';
        bar[30] = 0;
        fprintf(stderr, "\r%s [%s] %3d%% %lld/%lld %s", p->what, bar, pm / 10, (long long)done,
                (long long)p->total, unit);
        if (done >= p->total) fputc('\n', stderr);
    } else {
        int q = pm / 250;
        if (q == p->last) return;
        p->last = q;
        fprintf(stderr, "%s: %d%% (%lld/%lld %s)\n", p->what, q * 25, (long long)done,
                (long long)p->total, unit);
    }
    fflush(stderr);
}

/* ---- reading the bucket ---------------------------------------------------- */

static st_os_result_t *get(st_os_t *os, const char *key) {
    st_os_request_t rq = {.op = ST_OS_GET, .key = key, .length = ST_OS_TO_END};
    rq.sink.kind = ST_OS_SINK_ALLOC;
    return st_os_run(os, &rq);
}

/* Every key under prefix with its size.  0, or 1 said. */
static int list(st_os_t *os, const char *prefix, st_os_keys_t *out) {
    char *why;
    if (!st_os_list_keys(os, NULL, prefix, out, &why)) return 0;
    say("listing the bucket under '%s': %s", prefix, why);
    free(why);
    return 1;
}

static void topic_fini(rtopic_t *t) {
    for (int32_t i = 0; t->parts && i < t->d.partitions; i++) {
        free(t->parts[i].manifest);
        st_tier_manifest_objects_fini(&t->parts[i].objs);
    }
    free(t->parts);
    free(t->dir);
    st_tier_descriptor_fini(&t->d);
}

/* The descriptor at key into t.  0, or 1 said. */
static int load_descriptor(st_os_t *os, const char *key, rtopic_t *t) {
    memset(t, 0, sizeof *t);
    size_t dl = strlen(key) - strlen("/" ST_TIER_TOPIC_DESCRIPTOR);
    t->dir = st_strprintf("%.*s", (int)dl, key);
    st_os_result_t *r = get(os, key);
    if (r->status) {
        int rc = say("reading %s: %s", key, r->message);
        st_os_result_free(r);
        return rc;
    }
    char why[256];
    st_err_t e = st_tier_descriptor_decode(r->data, r->length, &t->d, why, sizeof why);
    st_os_result_free(r);
    if (e) return say("the topic descriptor %s is corrupt: %s; nothing was restored", key, why);
    char *dir = st_tier_topic_prefix(t->d.topic, t->d.topic_id);
    int misplaced = strcmp(dir, t->dir);
    free(dir);
    if (misplaced)
        return say("the topic descriptor %s names topic '%s' id %s, whose prefix is not %s/; "
                   "nothing was restored", key, t->d.topic, t->d.topic_id, t->dir);
    t->name = t->d.topic;
    snprintf(t->id, sizeof t->id, "%s", t->d.topic_id);
    return 0;
}

/* Partition k's manifest and objects, checked.  0, or 1 said. */
static int check_partition(st_os_t *os, rtopic_t *t, int32_t k) {
    rpart_t *p = &t->parts[k];
    char *prefix = st_tier_part_prefix(t->d.topic, t->d.topic_id, k);
    char *mkey = st_strprintf("%s/manifest.json", prefix);
    char *lprefix = st_strprintf("%s/", prefix);
    st_os_keys_t all = {0};
    char why[300];
    int rc = 1;
    st_os_result_t *r = get(os, mkey);
    if (r->status == ST_E_NOT_FOUND) { /* nothing of it reached the bucket */
        rc = 0;
        goto out;
    }
    if (r->status) {
        say("topic '%s' partition %d: reading %s: %s", t->d.topic, (int)k, mkey, r->message);
        goto out;
    }
    p->present = 1;
    p->mlen = r->length;
    p->manifest = st_malloc(r->length + 1);
    memcpy(p->manifest, r->data, r->length);
    if (st_tier_manifest_objects(prefix, p->manifest, p->mlen, &p->objs, why, sizeof why)) {
        say("topic '%s' partition %d: the manifest %s is corrupt: %s; nothing was restored",
            t->d.topic, (int)k, mkey, why);
        goto out;
    }
    if (!p->objs.topic || strcmp(p->objs.topic, t->d.topic) || !p->objs.topic_id ||
        strcmp(p->objs.topic_id, t->d.topic_id) || p->objs.partition != k) {
        say("topic '%s' partition %d: the manifest %s is of topic '%s' id %s partition %d; "
            "nothing was restored", t->d.topic, (int)k, mkey, p->objs.topic ? p->objs.topic : "?",
            p->objs.topic_id ? p->objs.topic_id : "?", (int)p->objs.partition);
        goto out;
    }
    if (list(os, lprefix, &all)) goto out;
    for (int i = 0; i < p->objs.nkeys; i++) {
        size_t j = 0;
        while (j < all.n && strcmp(all.keys[j], p->objs.keys[i])) j++;
        if (j == all.n) {
            say("topic '%s' partition %d: %s, named by its manifest, is missing from the "
                "bucket; nothing was restored", t->d.topic, (int)k, p->objs.keys[i]);
            goto out;
        }
        if (p->objs.sizes[i] >= 0 && all.sizes[j] != p->objs.sizes[i]) {
            say("topic '%s' partition %d: %s holds %lld bytes, its manifest says %lld; nothing "
                "was restored", t->d.topic, (int)k, p->objs.keys[i], (long long)all.sizes[j],
                (long long)p->objs.sizes[i]);
            goto out;
        }
    }
    t->max_epoch = ST_MAX(t->max_epoch, p->objs.max_leader_epoch);
    t->segments += p->objs.summary.segments;
    t->bytes += p->objs.summary.bytes;
    rc = 0;
out:
    st_os_result_free(r);
    st_os_keys_fini(&all);
    free(lprefix);
    free(mkey);
    free(prefix);
    return rc;
}

/* --verify: every object t's manifests name read whole, to nowhere,
 * VERIFY_AT_ONCE at a time, and checked: the object store compares the
 * bytes with the CRC32C stored with the object, and a .log's must be the
 * one its manifest gives. */
#define VERIFY_AT_ONCE 8

typedef struct verify {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int inflight;
    int64_t done;  /* bytes of the objects checked */
    char *failure; /* the first, said once all are back */
} verify_t;

typedef struct verify_item {
    verify_t *v;
    const char *topic, *key; /* the topic's, alive until verify_topic returns */
    int32_t partition;
    int64_t size, crc; /* the manifest's; -1: not given */
} verify_item_t;

static void verified(st_os_result_t *r, void *arg) {
    verify_item_t *it = arg;
    verify_t *v = it->v;
    char *why = NULL;
    if (r->status)
        why = st_strprintf("topic '%s' partition %d: %s: %s", it->topic, (int)it->partition,
                           it->key, r->message);
    else if (!r->crc32c_verified)
        why = st_strprintf("topic '%s' partition %d: %s carries no CRC32C of Strata's to check "
                           "it by (not written by a broker?)",
                           it->topic, (int)it->partition, it->key);
    else if (it->crc >= 0 && (int64_t)r->crc32c != it->crc)
        why = st_strprintf("topic '%s' partition %d: %s has CRC32C %08x, its manifest says %08x "
                           "(another object under its name?)",
                           it->topic, (int)it->partition, it->key, r->crc32c, (uint32_t)it->crc);
    pthread_mutex_lock(&v->lock);
    if (why && !v->failure) v->failure = why;
    else free(why);
    v->done += ST_MAX(it->size, (int64_t)0);
    v->inflight--;
    pthread_cond_signal(&v->cond);
    pthread_mutex_unlock(&v->lock);
    free(it);
}

/* 0, or 1 said. */
static int verify_topic(st_os_t *os, rtopic_t *t, int devnull) {
    int64_t total = 0;
    for (int32_t k = 0; k < t->d.partitions; k++)
        for (int i = 0; t->parts[k].present && i < t->parts[k].objs.nkeys; i++)
            total += ST_MAX(t->parts[k].objs.sizes[i], (int64_t)0);
    progress_t pg;
    char *what = st_strprintf("verifying %s", t->d.topic);
    int64_t mib = (total + (1 << 20) - 1) >> 20; /* shown in MiB, rounded up */
    progress_start(&pg, what, mib);
    verify_t v = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, NULL};
    for (int32_t k = 0; k < t->d.partitions; k++) {
        const st_tier_manifest_objects_t *o = &t->parts[k].objs;
        for (int i = 0; t->parts[k].present && i < o->nkeys; i++) {
            pthread_mutex_lock(&v.lock);
            while (v.inflight >= VERIFY_AT_ONCE) pthread_cond_wait(&v.cond, &v.lock);
            int stop = v.failure != NULL;
            int64_t done = v.done;
            if (!stop) v.inflight++;
            pthread_mutex_unlock(&v.lock);
            if (stop) goto wait;
            progress_show(&pg, ST_MIN((done + (1 << 20) - 1) >> 20, mib), "MiB");
            verify_item_t *it = st_malloc(sizeof *it);
            *it = (verify_item_t){&v, t->d.topic, o->keys[i], k, o->sizes[i], o->crcs[i]};
            st_os_request_t rq = {.op = ST_OS_GET, .key = o->keys[i], .length = ST_OS_TO_END};
            rq.sink.kind = ST_OS_SINK_FD;
            rq.sink.fd = devnull;
            st_os_submit(os, &rq, verified, it);
        }
    }
wait:
    pthread_mutex_lock(&v.lock);
    while (v.inflight > 0) pthread_cond_wait(&v.cond, &v.lock);
    pthread_mutex_unlock(&v.lock);
    int rc = 0;
    if (v.failure) rc = say("%s; nothing was restored", v.failure);
    else progress_show(&pg, mib, "MiB");
    free(v.failure);
    free(what);
    return rc;
}

/* The descriptors the request names (all with --all) into *out.  0, or 1
 * said. */
static int find_topics(st_os_t *os, char **names, int nnames, int all, rtopic_t **out, int *nout) {
    const char *suffix = "/" ST_TIER_TOPIC_DESCRIPTOR;
    size_t sl = strlen(suffix);
    *out = NULL;
    *nout = 0;
    int rc = 1;
    st_os_keys_t listed = {0};
    /* named topics: their names start their prefixes (either layout) */
    int passes = all ? 1 : nnames;
    rtopic_t *v = st_calloc((size_t)ST_MAX(nnames, 1), sizeof *v);
    int nv = 0, cap = ST_MAX(nnames, 1);
    for (int pass = 0; pass < passes; pass++) {
        if (list(os, all ? "" : names[pass], &listed)) goto out;
        char **keys = listed.keys;
        int found = 0;
        for (size_t i = 0; i < listed.n; i++) {
            size_t kl = strlen(keys[i]);
            if (kl <= sl || strcmp(keys[i] + kl - sl, suffix)) continue;
            /* <topic>-<id>/topic.json or <topic>/<id>/topic.json */
            int slashes = 0;
            for (const char *c = keys[i]; *c; c++) slashes += *c == '/';
            if (slashes > 2) continue;
            /* a named topic's: <name>-<id> or <name>/<id>, the id 22
             * characters (not another topic's that starts with the name) */
            size_t nl = all ? 0 : strlen(names[pass]);
            if (!all && (kl != nl + 1 + 22 + sl || (keys[i][nl] != '-' && keys[i][nl] != '/')))
                continue;
            if (nv == cap) {
                cap *= 2;
                v = st_realloc(v, sizeof *v * (size_t)cap);
            }
            if (load_descriptor(os, keys[i], &v[nv])) {
                topic_fini(&v[nv]);
                goto out;
            }
            if (!all && strcmp(v[nv].d.topic, names[pass])) { /* another name after all */
                topic_fini(&v[nv]);
                continue;
            }
            for (int j = 0; j < nv; j++)
                if (!strcmp(v[j].d.topic, v[nv].d.topic)) {
                    say("the bucket holds topic '%s' twice, as id %s and as id %s (a topic "
                        "deleted and made again whose first prefix was not deleted?); restore "
                        "one with the other's prefix removed", v[nv].d.topic, v[j].d.topic_id,
                        v[nv].d.topic_id);
                    topic_fini(&v[nv]);
                    goto out;
                }
            nv++;
            found = 1;
        }
        st_os_keys_fini(&listed);
        if (!all && !found) {
            say("topic '%s' is not in the bucket (no %s-<topic id>%s); nothing was restored",
                names[pass], names[pass], suffix);
            goto out;
        }
    }
    if (!nv) {
        say("the bucket holds no topic descriptor (*/%s): nothing to restore",
            ST_TIER_TOPIC_DESCRIPTOR);
        goto out;
    }
    rc = 0;
out:
    st_os_keys_fini(&listed);
    if (rc) {
        for (int i = 0; i < nv; i++) topic_fini(&v[i]);
        free(v);
        v = NULL;
        nv = 0;
    }
    *out = v;
    *nout = nv;
    return rc;
}

/* ---- --as: the objects copied under the new topic's prefix -------------------- */

static void delete_all(st_os_t *os, char **keys, size_t n) {
    for (size_t i = 0; i < n; i += 1000) {
        size_t m = ST_MIN(n - i, (size_t)1000);
        st_os_request_t rq = {.op = ST_OS_DELETE_BATCH, .keys = (const char *const *)keys + i,
                              .nkeys = m};
        st_os_result_t *r = st_os_run(os, &rq);
        if (r->status || r->nfailed)
            fprintf(stderr, "strata topics: deleting the copies made: %s (%zu left)\n",
                    r->status ? r->message : "some keys failed", r->status ? m : r->nfailed);
        st_os_result_free(r);
    }
}

/* Copy key to nkey inside the store (S3's CopyObject: no byte comes
 * through here).  0, or 1 said. */
static int copy_object(st_os_t *os, const char *key, const char *nkey) {
    st_os_request_t rq = {.op = ST_OS_COPY, .key = nkey, .copy_source = key};
    st_os_result_t *r = st_os_run(os, &rq);
    int rc = r->status ? say("copying %s: %s", key, r->message) : 0;
    st_os_result_free(r);
    return rc;
}

static int put_text(st_os_t *os, const char *key, const char *text) {
    st_os_request_t rq = {.op = ST_OS_PUT, .key = key};
    rq.src.kind = ST_OS_SRC_MEM;
    rq.src.data = text;
    rq.src.length = strlen(text);
    st_os_result_t *r = st_os_run(os, &rq);
    int rc = r->status ? say("writing %s: %s", key, r->message) : 0;
    st_os_result_free(r);
    return rc;
}

/* t's objects and manifests under the prefix of t->name and t->id (new);
 * the keys written into *written (heap; *nw of them), for the caller to
 * delete should the restore fail after.  0, or 1 said with what was
 * written deleted again. */
static int copy_as(st_os_t *os, rtopic_t *t, char ***written_out, size_t *nw_out) {
    int64_t total = 0, done = 0;
    for (int32_t k = 0; k < t->d.partitions; k++)
        for (int i = 0; t->parts[k].present && i < t->parts[k].objs.nkeys; i++) total++;
    char **written = st_malloc(sizeof *written * (size_t)(total + t->d.partitions + 1));
    size_t nw = 0;
    progress_t pg;
    char *what = st_strprintf("copying %s to %s", t->d.topic, t->name);
    progress_start(&pg, what, total);
    int rc = 1;
    for (int32_t k = 0; k < t->d.partitions; k++) {
        rpart_t *p = &t->parts[k];
        if (!p->present) continue;
        char *from = st_tier_part_prefix(t->d.topic, t->d.topic_id, k);
        char *to = st_tier_part_prefix(t->name, t->id, k);
        size_t fl = strlen(from);
        int failed = 0;
        for (int i = 0; i < p->objs.nkeys && !failed; i++) {
            char *nkey = st_strprintf("%s%s", to, p->objs.keys[i] + fl);
            failed = copy_object(os, p->objs.keys[i], nkey);
            if (failed) free(nkey);
            else written[nw++] = nkey;
            progress_show(&pg, ++done, "objects");
        }
        char why[300];
        char *text = failed ? NULL : st_tier_manifest_retarget(p->manifest, p->mlen, t->name,
                                                               t->id, k, why, sizeof why);
        if (!failed && !text) failed = say("rewriting %s/manifest.json: %s", from, why);
        if (!failed) {
            char *mkey = st_strprintf("%s/manifest.json", to);
            failed = put_text(os, mkey, text);
            if (failed) free(mkey);
            else written[nw++] = mkey;
        }
        free(text);
        free(from);
        free(to);
        if (failed) goto out;
    }
    rc = 0;
out:
    if (rc) {
        delete_all(os, written, nw);
        for (size_t i = 0; i < nw; i++) free(written[i]);
        free(written);
        written = NULL;
        nw = 0;
    }
    *written_out = written;
    *nw_out = nw;
    free(what);
    return rc;
}

/* ---- the topics on the cluster ----------------------------------------------- */

/* Whether the cluster has a topic of that name (Metadata of all topics:
 * one request whatever the count).  0, or 1 said. */
static int existing(const st_cli_ctx_t *ctx, rtopic_t *v, int n) {
    st_arena_t a;
    st_arena_init(&a, 1 << 16);
    st_metadata_req_t mq;
    st_schema_defaults(&st_metadata_req_schema, &mq);
    mq.allow_auto_topic_creation = 0;
    mq.topics.v = NULL;
    mq.topics.n = -1;
    st_metadata_resp_t *md;
    char err[1024];
    int rc = 0;
    if (st_cli_bootstrap_call(ctx, ST_API_METADATA, 12, &mq, &a, (void **)&md, err, sizeof err)) {
        rc = say("%s", err);
        goto out;
    }
    for (int i = 0; i < n && !rc; i++)
        for (int j = 0; j < md->topics.n && !rc; j++)
            if (st_str_eq(md->topics.v[j].name, v[i].name))
                rc = say("cannot restore topic '%s': TOPIC_ALREADY_EXISTS: Topic '%s' already "
                         "exists (--as NEW-NAME restores it under another name); nothing was "
                         "restored", v[i].name, v[i].name);
out:
    st_arena_fini(&a);
    return rc;
}

/* CreateTopics of t as the bucket describes it, validate_only or not.
 * 0, or 1 said. */
/* The settings a read replica does not take from its source: its
 * uploads are the source's. */
static int source_only(const char *k) {
    return !strcmp(k, "remote.log.copy.disable") || !strcmp(k, "remote.log.delete.on.disable") ||
           !strncmp(k, "strata.remote.read.replica", strlen("strata.remote.read.replica"));
}

/* replica: NULL, or the read replica's source location ("": this bucket). */
static int create(const st_cli_ctx_t *ctx, const rtopic_t *t, int32_t rf, const char *replica,
                  int validate_only) {
    st_arena_t a;
    st_arena_init(&a, 1 << 14);
    st_create_topics_topic_t q;
    st_schema_defaults(&st_create_topics_topic_schema, &q);
    q.name = st_str(t->name);
    q.num_partitions = t->d.partitions;
    q.replication_factor = (int16_t)(rf > 0 ? rf : t->d.replication_factor);
    ST_ARRAY_ALLOC(q.assignments, &a, 0);
    ST_ARRAY_ALLOC(q.configs, &a, t->d.nconfigs + 5);
    int n = 0, remote = 0;
    for (int i = 0; i < t->d.nconfigs; i++) {
        const char *k = t->d.config_names[i], *val = t->d.config_values[i];
        if (!strncmp(k, ST_RESTORE_CONFIG_PREFIX, strlen(ST_RESTORE_CONFIG_PREFIX))) continue;
        if (replica && source_only(k)) continue;
        if (!strcmp(k, "remote.storage.enable")) { /* the bucket is served only when tiered */
            remote = 1;
            val = "true";
        }
        st_schema_defaults(&st_config_kv_schema, &q.configs.v[n]);
        q.configs.v[n].name = st_str(k);
        q.configs.v[n++].value = st_str(val);
    }
    if (!remote) {
        st_schema_defaults(&st_config_kv_schema, &q.configs.v[n]);
        q.configs.v[n].name = st_str("remote.storage.enable");
        q.configs.v[n++].value = st_str("true");
    }
    if (replica) {
        st_schema_defaults(&st_config_kv_schema, &q.configs.v[n]);
        q.configs.v[n].name = st_str("strata.remote.read.replica");
        q.configs.v[n++].value = st_str("true");
        if (*replica) {
            st_schema_defaults(&st_config_kv_schema, &q.configs.v[n]);
            q.configs.v[n].name = st_str("strata.remote.read.replica.location");
            q.configs.v[n++].value = st_str(replica);
        }
    }
    char epoch[16];
    snprintf(epoch, sizeof epoch, "%d", (int)(t->max_epoch + 1));
    st_schema_defaults(&st_config_kv_schema, &q.configs.v[n]);
    q.configs.v[n].name = st_str(ST_RESTORE_TOPIC_ID_CONFIG);
    q.configs.v[n++].value = st_str(t->id);
    st_schema_defaults(&st_config_kv_schema, &q.configs.v[n]);
    q.configs.v[n].name = st_str(ST_RESTORE_LEADER_EPOCH_CONFIG);
    q.configs.v[n++].value = st_str(epoch);
    q.configs.n = n;
    const st_create_topics_result_t *res;
    char err[1024];
    int rc = 0;
    if (st_cli_create_topic(ctx, &a, &q, validate_only, &res, err, sizeof err)) {
        rc = say("%s", err);
    } else if (res->error_code) {
        int rf_hint = res->error_code == st_err_wire(ST_E_INVALID_REPLICATION_FACTOR);
        rc = say("cannot restore topic '%s': %s%s%.*s%s%s", t->name,
                 st_err_name(st_err_from_wire(res->error_code)), res->error_message.len > 0 ? ": " : "",
                 ST_STR_FMT(res->error_message.len > 0 ? res->error_message : st_str("")),
                 rf_hint ? " (--replication-factor sets another)" : "",
                 validate_only ? "; nothing was restored" : "");
    }
    st_arena_fini(&a);
    return rc;
}

/* Until every partition's leader serves [start, end) of its manifest (an
 * empty one: nothing), or timeout_ms.  0, or 1 said. */
static int wait_served(const st_cli_ctx_t *ctx, const rtopic_t *t, int64_t timeout_ms) {
    int32_t n = t->d.partitions;
    int64_t *start = st_malloc(sizeof *start * (size_t)n), *end = st_malloc(sizeof *end * (size_t)n);
    int64_t deadline = st_mono_ms() + timeout_ms;
    char err[1024] = "";
    int rc = 1, served = 0;
    progress_t pg;
    char *what = st_strprintf("%s: partitions serving the bucket", t->name);
    progress_start(&pg, what, n);
    for (;;) {
        st_uuid_t id;
        served = 0;
        if (!st_cli_topic_offsets(ctx, t->name, n, start, end, &id, err, sizeof err)) {
            err[0] = 0;
            for (int32_t k = 0; k < n; k++) {
                const rpart_t *p = &t->parts[k];
                int64_t ws = p->present ? p->objs.summary.start : 0;
                int64_t we = p->present ? p->objs.summary.end : 0;
                served += start[k] == ws && end[k] == we;
            }
            progress_show(&pg, served, "partitions");
            if (served == n) {
                rc = 0;
                break;
            }
        }
        if (st_mono_ms() >= deadline) break;
        usleep(200 * 1000);
    }
    if (rc) {
        char *detail = st_strdup("");
        for (int32_t k = 0; k < n && !err[0]; k++) {
            const rpart_t *p = &t->parts[k];
            char *d = st_strprintf("%s%s partition %d serves [%lld, %lld), the bucket [%lld, %lld)",
                                   detail, k ? ";" : "", (int)k, (long long)start[k],
                                   (long long)end[k], (long long)(p->present ? p->objs.summary.start : 0),
                                   (long long)(p->present ? p->objs.summary.end : 0));
            free(detail);
            detail = d;
        }
        say("topic '%s' was created with id %s, but after %lld ms not every partition serves "
            "what the bucket holds: %s", t->name, t->id, (long long)timeout_ms,
            err[0] ? err : detail);
        free(detail);
    }
    free(what);
    free(start);
    free(end);
    return rc;
}

/* ---- the verb ---------------------------------------------------------------- */

int st_cli_topics_restore(const st_cli_ctx_t *ctx, int argc, char **argv) {
    char **names = st_calloc((size_t)argc + 1, sizeof *names);
    int nnames = 0, all = 0, verify = 0, replica = 0, rc = ST_CLI_EXIT_USAGE, nt = 0;
    const char *as = NULL, *source = NULL;
    int32_t rf = -1, timeout_ms = 60000;
    rtopic_t *v = NULL;
    st_os_t *os = NULL;
    char **copies = NULL; /* --as: what was copied (deleted again on a failure) */
    size_t ncopies = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--all")) {
            all = 1;
        } else if (!strcmp(a, "--verify")) {
            verify = 1;
        } else if (!strcmp(a, "--read-replica")) {
            replica = 1;
        } else if (!strcmp(a, "--as") || !strcmp(a, "--replication-factor") ||
                   !strcmp(a, "--timeout-ms") || !strcmp(a, "--source")) {
            if (!val) {
                fprintf(stderr, "strata topics: restore: %s needs a value\n", a);
                goto usage;
            }
            i++;
            char *end = NULL;
            long long n = !strcmp(a, "--as") || !strcmp(a, "--source") ? 0 : strtoll(val, &end, 10);
            if (!strcmp(a, "--as")) {
                as = val;
            } else if (!strcmp(a, "--source")) {
                source = val;
            } else if (!*val || *end || n < 1 || n > (!strcmp(a, "--replication-factor") ? 32767 : 3600000)) {
                fprintf(stderr, "strata topics: restore: %s takes a positive number, not '%s'\n",
                        a, val);
                goto usage;
            } else if (!strcmp(a, "--replication-factor")) {
                rf = (int32_t)n;
            } else {
                timeout_ms = (int32_t)n;
            }
        } else if (!strncmp(a, "--", 2)) {
            fprintf(stderr, "strata topics: restore: unknown option %s\n", a);
            goto usage;
        } else if (!*a) {
            fprintf(stderr, "strata topics: restore: an empty topic name\n");
            goto usage;
        } else {
            names[nnames++] = argv[i];
        }
    }
    if (all == (nnames > 0)) {
        fprintf(stderr, "strata topics: restore: name the topics or give --all (not both)\n");
        goto usage;
    }
    if (as && (all || nnames != 1)) {
        fprintf(stderr, "strata topics: restore: --as renames one topic: name just it\n");
        goto usage;
    }
    if (as && replica) {
        fprintf(stderr, "strata topics: restore: --as copies a topic into one of this cluster's; "
                "a --read-replica serves the source's objects where they are: not both\n");
        goto usage;
    }
    if (source && !replica) {
        fprintf(stderr, "strata topics: restore: --source is where a --read-replica reads; a "
                "restore reads this broker's bucket\n");
        goto usage;
    }
    if (as && !*as) {
        fprintf(stderr, "strata topics: restore: --as needs a name\n");
        goto usage;
    }
    rc = ST_CLI_EXIT_FAIL;
    st_log_set_level(ST_LOG_ERROR); /* retries are in the final message */
    char err[1024];
    st_os_config_t at;
    if (source && st_os_config_at(&ctx->os, source, &at, err, sizeof err)) {
        say("--source: %s", err);
        goto out;
    }
    st_err_t oe = st_os_new(source ? &at : &ctx->os, &os, err, sizeof err);
    if (source) st_os_config_fini(&at);
    if (oe) {
        say("restore reads the bucket with the broker's objectstore.* settings: %s", err);
        goto out;
    }
    if (find_topics(os, names, nnames, all, &v, &nt)) goto out;
    if (as) { /* a topic of its own: a new id, under which its objects are copied */
        st_uuid_t nid;
        st_uuid_random(&nid);
        st_uuid_format(&nid, v[0].id);
        v[0].name = as;
    }
    for (int i = 0; i < nt; i++) {
        v[i].parts = st_calloc((size_t)v[i].d.partitions, sizeof *v[i].parts);
        v[i].max_epoch = -1;
    }
    /* everything checked before anything changes */
    for (int i = 0; i < nt; i++) {
        progress_t pg;
        char *what = st_strprintf("checking %s in the bucket", v[i].d.topic);
        progress_start(&pg, what, v[i].d.partitions);
        int bad = 0;
        for (int32_t k = 0; k < v[i].d.partitions && !bad; k++) {
            bad = check_partition(os, &v[i], k);
            if (!bad) progress_show(&pg, k + 1, "partitions");
        }
        free(what);
        if (bad) goto out;
    }
    if (verify) {
        int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (devnull < 0) {
            say("--verify: cannot open /dev/null: %s", strerror(errno));
            goto out;
        }
        int bad = 0;
        for (int i = 0; i < nt && !bad; i++) bad = verify_topic(os, &v[i], devnull);
        close(devnull);
        if (bad) goto out;
    }
    if (existing(ctx, v, nt)) goto out;
    const char *replica_of = replica ? (source ? source : "") : NULL; /* create's */
    for (int i = 0; i < nt; i++)
        if (create(ctx, &v[i], rf, replica_of, 1)) goto out;
    if (as && copy_as(os, &v[0], &copies, &ncopies)) goto out;
    for (int i = 0; i < nt; i++) {
        if (create(ctx, &v[i], rf, replica_of, 0)) {
            if (as) delete_all(os, copies, ncopies);
            if (i > 0) {
                fprintf(stderr, "strata topics: restored before the failure:");
                for (int j = 0; j < i; j++) fprintf(stderr, " %s", v[j].name);
                fputc('\n', stderr);
            }
            goto out;
        }
    }
    for (int i = 0; i < nt; i++) {
        if (wait_served(ctx, &v[i], timeout_ms)) goto out;
        if (replica)
            printf("Serving a read replica of topic %s (id %s) from %s: ", v[i].name, v[i].id,
                   st_os_describe(os));
        else
            printf("Restored topic %s (id %s) from the bucket: ", v[i].name, v[i].id);
        printf("%d partition%s, %d segments, %lld bytes%s;", (int)v[i].d.partitions,
               v[i].d.partitions == 1 ? "" : "s", v[i].segments, (long long)v[i].bytes,
               verify ? ", every object read and its CRC32C checked" : "");
        for (int32_t k = 0; k < v[i].d.partitions; k++) {
            const rpart_t *p = &v[i].parts[k];
            printf(" %d:[%lld, %lld)", (int)k, (long long)(p->present ? p->objs.summary.start : 0),
                   (long long)(p->present ? p->objs.summary.end : 0));
        }
        if (as) printf(" (copied from topic %s id %s)", v[i].d.topic, v[i].d.topic_id);
        printf("\n");
        fflush(stdout);
    }
    rc = ST_CLI_EXIT_OK;
    goto out;
usage:
    st_cli_topics_usage(stderr);
out:
    for (size_t i = 0; i < ncopies; i++) free(copies[i]);
    free(copies);
    for (int i = 0; i < nt; i++) topic_fini(&v[i]);
    free(v);
    if (os) st_os_destroy(os);
    free(names);
    return rc;
}
