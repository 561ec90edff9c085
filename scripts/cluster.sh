#!/usr/bin/env bash
# A local cluster of combined (broker + controller) nodes on loopback.
#
#   scripts/cluster.sh up [N]      start N nodes (default 3), print the bootstrap list
#   scripts/cluster.sh status      each node: pid, alive or not, ports
#   scripts/cluster.sh down        stop them (SIGTERM, by pid)
#
# Options (before or after the command):
#   --dir DIR        where nodes keep everything (default ./data/cluster,
#                    or $STRATA_CLUSTER_DIR): DIR/node-<id>/{logs,stratad.log,pid}
#   --base-port P    node i listens for clients on P + 2(i-1) and for the
#                    quorum on P + 2(i-1) + 1 (default 19092)
#   --override k=v   passed to every node (repeatable)
#   --node-override I k=v
#                    passed to node I only, after the others (repeatable;
#                    e.g. a voter list of its own)
#   --no-build       use build/bin/stratad as it is ($STRATA_BIN_DIR/stratad
#                    when that is set)
#   --controllers K  nodes 1..K are the voters of controller.quorum.voters
#                    (default: all N); nodes K+1..N are broker-only
#                    (process.roles=broker), following the quorum as observers
#   --controller-only
#                    the K voters are controller-only (process.roles=controller):
#                    they serve the quorum, not clients
#   --only I[,J...]  up starts these nodes only (the others are left as they
#                    are, running or not)
#
# Node ids are 1..N and they share one cluster.id, made at the first `up`
# of DIR and kept in DIR/cluster.id.  By default every node is both broker
# and controller (combined mode).  The tests start clusters with this
# script.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${STRATA_CLUSTER_DIR:-$root/data/cluster}"
base=19092
build=1
cmd=""
n=""
overrides=()
node_overrides=() # "I k=v" each
ncontrollers=""
controller_only=0
only=""
while [ $# -gt 0 ]; do
    case "$1" in
    --dir) dir="$2"; shift 2 ;;
    --base-port) base="$2"; shift 2 ;;
    --override) overrides+=("--override" "$2"); shift 2 ;;
    --node-override) node_overrides+=("$2 $3"); shift 3 ;;
    --no-build) build=0; shift ;;
    --controllers) ncontrollers="$2"; shift 2 ;;
    --controller-only) controller_only=1; shift ;;
    --only) only=",$2,"; shift 2 ;;
    up|down|status) cmd="$1"; shift ;;
    [0-9]*) n="$1"; shift ;;
    -h|--help) sed -n '2,33p' "$0"; exit 0 ;;
    *) echo "cluster.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[ -n "$cmd" ] || { echo "cluster.sh: say up, status or down (see --help)" >&2; exit 2; }
# STRATA_BIN_DIR: the binaries of another build (the tests set it);
# STRATAD: one stratad binary
stratad="${STRATAD:-${STRATA_BIN_DIR:-$root/build/bin}/stratad}"

nodes() { # the node ids DIR holds
    ls -d "$dir"/node-* 2>/dev/null | sed 's/.*node-//' | sort -n
}

# A node is alive while its process runs; a zombie (exited, not yet reaped
# by whoever adopted it) is not: kill -0 succeeds on one, and taking it for
# a running node made `up` skip a node that was just stopping.
alive() {
    local f="$dir/node-$1/pid" pid state
    [ -f "$f" ] || return 1
    pid="$(cat "$f")"
    kill -0 "$pid" 2>/dev/null || return 1
    state="$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)"
    [ -n "$state" ] && [ "$state" != Z ]
}

case "$cmd" in
up)
    n="${n:-3}"
    if [ "$n" -lt 1 ] || [ "$n" -gt 32 ]; then echo "cluster.sh: 1 to 32 nodes" >&2; exit 2; fi
    k="${ncontrollers:-$n}"
    if ! [ "$k" -ge 1 ] 2>/dev/null || [ "$k" -gt "$n" ]; then
        echo "cluster.sh: --controllers takes 1 to N (the node count, $n)" >&2; exit 2
    fi
    if [ "$controller_only" = 1 ] && [ "$k" = "$n" ]; then
        echo "cluster.sh: --controller-only needs broker nodes too: --controllers below N" >&2; exit 2
    fi
    if [ "$build" = 1 ] && [ -z "${STRATAD:-}" ] && [ -z "${STRATA_BIN_DIR:-}" ]; then
        "$root/scripts/deps.sh" run
        cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
        cmake --build "$root/build" -j2 --target stratad >/dev/null
    fi
    mkdir -p "$dir"
    if [ ! -s "$dir/cluster.id" ]; then
        # 16 random bytes, URL-safe base64 without padding: Kafka's shape
        head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n' >"$dir/cluster.id"
    fi
    cid="$(cat "$dir/cluster.id")"
    voters=""
    boot=""
    for i in $(seq 1 "$n"); do
        p=$((base + 2 * (i - 1)))
        [ "$i" -le "$k" ] && voters="${voters:+$voters,}$i@127.0.0.1:$((p + 1))"
        if [ "$i" -gt "$k" ] || [ "$controller_only" = 0 ]; then boot="${boot:+$boot,}127.0.0.1:$p"; fi
    done
    chosen() { [ -z "$only" ] || [ "${only#*,$1,}" != "$only" ]; }
    for i in $(seq 1 "$n"); do
        chosen "$i" || continue
        nd="$dir/node-$i"
        mkdir -p "$nd"
        if alive "$i"; then echo "node $i is running already (pid $(cat "$nd/pid"))"; continue; fi
        p=$((base + 2 * (i - 1)))
        mine=()
        for o in "${node_overrides[@]+"${node_overrides[@]}"}"; do
            [ "${o%% *}" = "$i" ] && mine+=("--override" "${o#* }")
        done
        if [ "$i" -gt "$k" ]; then
            roles=broker listeners="PLAINTEXT://127.0.0.1:$p"
        elif [ "$controller_only" = 1 ]; then
            roles=controller listeners="CONTROLLER://127.0.0.1:$((p + 1))"
        else
            roles=broker,controller listeners="PLAINTEXT://127.0.0.1:$p,CONTROLLER://127.0.0.1:$((p + 1))"
        fi
        echo "$roles" >"$nd/roles"
        echo "==== start $(date -u +%FT%TZ) ====" >>"$nd/stratad.log"
        nohup "$stratad" --config "$root/config/server.properties" \
            --override node.id="$i" \
            --override process.roles="$roles" \
            --override controller.quorum.voters="$voters" \
            --override controller.listener.names=CONTROLLER \
            --override listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT \
            --override listeners="$listeners" \
            --override cluster.id="$cid" \
            --override log.dirs="$nd/logs" \
            --override remote.log.cache.dir="$nd/cache" \
            --override objectstore.file.root="$dir/bucket" \
            "${overrides[@]+"${overrides[@]}"}" "${mine[@]+"${mine[@]}"}" >>"$nd/stratad.log" 2>&1 </dev/null &
        echo $! >"$nd/pid"
    done
    # ready when each answers on its client port (a controller-only node:
    # its quorum port)
    for i in $(seq 1 "$n"); do
        chosen "$i" || continue
        p=$((base + 2 * (i - 1)))
        [ "$(cat "$dir/node-$i/roles")" = controller ] && p=$((p + 1))
        for _ in $(seq 1 300); do
            if ! alive "$i"; then
                echo "cluster.sh: node $i stopped; the end of $dir/node-$i/stratad.log:" >&2
                tail -n 20 "$dir/node-$i/stratad.log" >&2
                exit 1
            fi
            (echo >/dev/tcp/127.0.0.1/"$p") 2>/dev/null && break
            sleep 0.1
        done
    done
    if [ "$k" = "$n" ] && [ "$controller_only" = 0 ]; then
        echo "cluster $cid: $n nodes in $dir"
    else
        echo "cluster $cid: $n nodes in $dir: controllers 1-$k$([ "$controller_only" = 1 ] && echo " (controller-only)"), broker-only $((k + 1))-$n"
    fi
    echo "bootstrap.servers=$boot"
    ;;
status)
    found=0
    for i in $(nodes); do
        found=1
        if alive "$i"; then state="running (pid $(cat "$dir/node-$i/pid"))"; else state="stopped"; fi
        p=$((base + 2 * (i - 1)))
        roles="$(cat "$dir/node-$i/roles" 2>/dev/null || echo broker,controller)"
        case "$roles" in
        broker) ports="clients 127.0.0.1:$p" ;;
        controller) ports="quorum 127.0.0.1:$((p + 1))" ;;
        *) ports="clients 127.0.0.1:$p, quorum 127.0.0.1:$((p + 1))" ;;
        esac
        echo "node $i ($roles): $state, $ports"
    done
    [ "$found" = 1 ] || echo "no cluster in $dir"
    ;;
down)
    pids=()
    for i in $(nodes); do
        if alive "$i"; then
            pid="$(cat "$dir/node-$i/pid")"
            kill -TERM "$pid" && pids+=("$pid")
        fi
    done
    for pid in "${pids[@]+"${pids[@]}"}"; do
        for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$pid" 2>/dev/null; then
            echo "cluster.sh: pid $pid did not stop in 30 s; killing it" >&2
            kill -KILL "$pid" || true
        fi
    done
    for i in $(nodes); do rm -f "$dir/node-$i/pid"; done
    echo "stopped ${#pids[@]} node(s)"
    ;;
esac
