/*
 * qstate.c - the formats raft owns: the quorum-state file (drawn in
 * raft.h), snapshot file names, and the LeaderChange control record.
 *
 * The quorum-state decoder reads hostile bytes: every length is checked
 * before it is used and each refusal says what was wrong, so an operator
 * who finds a node that will not start knows which file to look at and why.
 */
#include "raft.h"

#include <inttypes.h>
#include <stdlib.h>

#define QS_HEADER 20 /* magic .. voted_id */

void st_raft_qstate_encode(const st_raft_qstate_t *qs, st_buf_t *out) {
    size_t start = out->len;
    st_buf_put(out, ST_RAFT_QSTATE_MAGIC, 4);
    st_buf_put_i16(out, ST_RAFT_QSTATE_VERSION);
    st_buf_put_i16(out, (int16_t)qs->nvoters);
    st_buf_put_i32(out, qs->leader_epoch);
    st_buf_put_i32(out, qs->leader_id);
    st_buf_put_i32(out, qs->voted_id);
    for (int i = 0; i < qs->nvoters; i++) st_buf_put_i32(out, qs->voters[i]);
    st_buf_put_i32(out, (int32_t)st_crc32c(0, out->data + start, out->len - start));
}

static int in_voters(const st_raft_qstate_t *qs, int32_t id) {
    for (int i = 0; i < qs->nvoters; i++)
        if (qs->voters[i] == id) return 1;
    return 0;
}

st_err_t st_raft_qstate_decode(const uint8_t *p, size_t len, st_raft_qstate_t *out, char *why,
                               size_t whylen) {
    st_raft_qstate_t qs;
    memset(&qs, 0, sizeof qs);
    if (len < QS_HEADER + 4) {
        st_snprintf_marked(why, whylen,
                           "quorum-state is truncated: %zu bytes, the smallest is %d", len,
                           QS_HEADER + 4 + 4);
        return ST_E_TRUNCATED;
    }
    if (memcmp(p, ST_RAFT_QSTATE_MAGIC, 4) != 0) {
        st_snprintf_marked(why, whylen,
                           "quorum-state does not start with the magic \"%s\" (not a Strata "
                           "quorum-state file, or overwritten)",
                           ST_RAFT_QSTATE_MAGIC);
        return ST_E_CORRUPT;
    }
    int version = (int16_t)st_be16_get(p + 4);
    if (version != ST_RAFT_QSTATE_VERSION) {
        st_snprintf_marked(why, whylen, "quorum-state has version %d; this build reads %d",
                           version, ST_RAFT_QSTATE_VERSION);
        return ST_E_CORRUPT;
    }
    int n = (int16_t)st_be16_get(p + 6);
    if (n < 1 || n > ST_RAFT_MAX_VOTERS) {
        st_snprintf_marked(why, whylen, "quorum-state lists %d voters; 1 to %d are allowed", n,
                           ST_RAFT_MAX_VOTERS);
        return ST_E_CORRUPT;
    }
    size_t want = QS_HEADER + 4 * (size_t)n + 4;
    if (len != want) {
        st_snprintf_marked(why, whylen,
                           "quorum-state is %zu bytes but its %d voters make %zu: %s", len, n,
                           want, len < want ? "truncated" : "trailing bytes");
        return len < want ? ST_E_TRUNCATED : ST_E_CORRUPT;
    }
    uint32_t stored = st_be32_get(p + want - 4);
    uint32_t computed = st_crc32c(0, p, want - 4);
    if (stored != computed) {
        st_snprintf_marked(why, whylen,
                           "quorum-state checksum mismatch: stored 0x%08x, computed 0x%08x",
                           stored, computed);
        return ST_E_CORRUPT;
    }
    qs.nvoters = n;
    qs.leader_epoch = (int32_t)st_be32_get(p + 8);
    qs.leader_id = (int32_t)st_be32_get(p + 12);
    qs.voted_id = (int32_t)st_be32_get(p + 16);
    for (int i = 0; i < n; i++) {
        qs.voters[i] = (int32_t)st_be32_get(p + QS_HEADER + 4 * (size_t)i);
        if (qs.voters[i] < 0 || (i > 0 && qs.voters[i] <= qs.voters[i - 1])) {
            st_snprintf_marked(why, whylen,
                               "quorum-state voter ids are not distinct, ascending and >= 0 "
                               "(voter %d is %" PRId32 ")",
                               i, qs.voters[i]);
            return ST_E_CORRUPT;
        }
    }
    if (qs.leader_epoch < 0) {
        st_snprintf_marked(why, whylen, "quorum-state has a negative epoch %" PRId32,
                           qs.leader_epoch);
        return ST_E_CORRUPT;
    }
    if (qs.leader_id != -1 && !in_voters(&qs, qs.leader_id)) {
        st_snprintf_marked(why, whylen, "quorum-state names leader %" PRId32
                           ", which is not one of its voters", qs.leader_id);
        return ST_E_CORRUPT;
    }
    if (qs.voted_id != -1 && !in_voters(&qs, qs.voted_id)) {
        st_snprintf_marked(why, whylen, "quorum-state records a vote for %" PRId32
                           ", which is not one of its voters", qs.voted_id);
        return ST_E_CORRUPT;
    }
    *out = qs;
    return ST_OK;
}

void st_raft_snapshot_name(st_raft_snapshot_id_t id, char out[ST_RAFT_SNAPSHOT_NAME_MAX]) {
    snprintf(out, ST_RAFT_SNAPSHOT_NAME_MAX, "%020" PRId64 "-%010" PRId32 ".checkpoint",
             id.end_offset, id.epoch);
}

int st_raft_snapshot_name_parse(const char *name, st_raft_snapshot_id_t *id) {
    /* Exactly 20 digits, '-', 10 digits, ".checkpoint". */
    if (strlen(name) != 20 + 1 + 10 + 11 || name[20] != '-' ||
        strcmp(name + 31, ".checkpoint") != 0)
        return -1;
    int64_t off = 0;
    int64_t ep = 0;
    for (int i = 0; i < 20; i++) {
        if (name[i] < '0' || name[i] > '9') return -1;
        if (off > (INT64_MAX - 9) / 10) return -1;
        off = off * 10 + (name[i] - '0');
    }
    for (int i = 21; i < 31; i++) {
        if (name[i] < '0' || name[i] > '9') return -1;
        ep = ep * 10 + (name[i] - '0');
    }
    if (ep > INT32_MAX) return -1;
    id->end_offset = off;
    id->epoch = (int32_t)ep;
    return 0;
}

static void put_voter_array(st_buf_t *out, const int32_t *ids, int n) {
    st_buf_put_uvarint(out, (uint64_t)n + 1); /* compact array */
    for (int i = 0; i < n; i++) {
        st_buf_put_i32(out, ids[i]);
        st_buf_put_uvarint(out, 0); /* Voter's tagged fields */
    }
}

void st_raft_leader_change_encode(int32_t leader_id, const int32_t *voters, int nvoters,
                                  const int32_t *granting, int ngranting, st_buf_t *out) {
    st_buf_put_i16(out, 0); /* version */
    st_buf_put_i32(out, leader_id);
    put_voter_array(out, voters, nvoters);
    put_voter_array(out, granting, ngranting);
    st_buf_put_uvarint(out, 0); /* tagged fields */
}
