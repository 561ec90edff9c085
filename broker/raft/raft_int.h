/*
 * raft_int.h - what broker/raft shares with its own tests only.
 *
 * A planted bug for the simulator (tests/sim/raft_sim.c): the checker must
 * be shown to catch a real mistake in raft.c, so raft.c carries the
 * mistake, off unless a test turns it on.  Process-wide; set it before any
 * st_raft_t runs.  stratad never calls this.
 */
#ifndef ST_RAFT_INT_H
#define ST_RAFT_INT_H

#include "raft.h"

typedef enum st_raft_planted_bug {
    ST_RAFT_BUG_NONE = 0,
    /* The leader moves its high watermark to its own durable end, counting
     * no follower: entries commit without a majority. */
    ST_RAFT_BUG_COMMIT_WITHOUT_MAJORITY = 1
} st_raft_planted_bug_t;

void st_raft__set_planted_bug(st_raft_planted_bug_t bug);

#endif /* ST_RAFT_INT_H */
