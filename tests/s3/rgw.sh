#!/bin/sh
# rgw.sh - run a throwaway single-node Ceph RGW (a real S3 server) on loopback.
#
#   rgw.sh start ENVFILE   start monitor + memstore OSD + radosgw, create a user
#                          with random keys and one bucket, write the
#                          connection settings to ENVFILE (KEY=VALUE lines)
#   rgw.sh stop ENVFILE    stop the daemons recorded in ENVFILE (TERM, then
#                          KILL) and remove their state directory
#   rgw.sh gw-stop ENVFILE   stop only radosgw (an S3 outage; the cluster
#                          and the bucket's contents stay)
#   rgw.sh gw-start ENVFILE  start radosgw again on the same port
#
# All state lives in a fresh directory from mktemp; the monitor and radosgw
# listen on free ports picked at start.  Needs the Debian packages ceph-mon,
# ceph-osd, radosgw, ceph-common, plus curl and python3.
# Environment: RGW_MEMSTORE_BYTES (RAM the OSD may hold, default 3 GiB),
# RGW_GC_MIN_WAIT (seconds before the space of deleted or overwritten
# objects is collected, default 5), RGW_BUCKET (default strata-test),
# RGW_KEEP_STATE=1 keeps the directory.
set -eu

die() { echo "rgw.sh: $*" >&2; exit 1; }

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

random_word() { # $1 characters of [A-Z0-9]
    LC_ALL=C tr -dc 'A-Z0-9' </dev/urandom | head -c "$1"
}

stop_dir() {
    dir=$1
    pids=""
    for name in client.rgw.s3 osd.0 mon.a; do
        f="$dir/run/$name.pid"
        if [ -f "$f" ]; then
            p=$(cat "$f")
            if kill "$p" 2>/dev/null; then pids="$pids $p"; fi
        fi
    done
    i=0
    while [ $i -lt 100 ]; do
        alive=""
        for p in $pids; do if kill -0 "$p" 2>/dev/null; then alive="$alive $p"; fi; done
        [ -z "$alive" ] && break
        sleep 0.1
        i=$((i + 1))
    done
    for p in ${alive:-}; do kill -9 "$p" 2>/dev/null || true; done
    if [ "${RGW_KEEP_STATE:-0}" != 1 ]; then rm -rf "$dir"; fi
}

cmd_stop() {
    envfile=$1
    [ -f "$envfile" ] || { echo "rgw.sh: nothing to stop ($envfile missing)"; return 0; }
    dir=$(sed -n 's/^STRATA_RGW_DIR=//p' "$envfile")
    [ -n "$dir" ] && [ -d "$dir" ] && stop_dir "$dir"
    rm -f "$envfile"
    echo "rgw.sh: stopped"
}

# gw-stop / gw-start: radosgw alone goes away and comes back; the monitor
# and the OSD keep running, so the bucket is as it was.
gw_pid() { # $1 state dir: the pid of a running radosgw, or nothing
    f="$1/run/client.rgw.s3.pid"
    [ -f "$f" ] || return 0
    p=$(cat "$f")
    if kill -0 "$p" 2>/dev/null; then echo "$p"; fi
}

cmd_gw_stop() {
    envfile=$1
    dir=$(sed -n 's/^STRATA_RGW_DIR=//p' "$envfile")
    [ -n "$dir" ] && [ -d "$dir" ] || die "no RGW state recorded in $envfile"
    p=$(gw_pid "$dir")
    [ -n "$p" ] || { echo "rgw.sh: radosgw is not running"; return 0; }
    kill "$p"
    i=0
    while kill -0 "$p" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    kill -9 "$p" 2>/dev/null || true
    i=0
    while kill -0 "$p" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    # radosgw removes its pid file when it exits cleanly; after a KILL the
    # file would name a pid that another process may get next.
    rm -f "$dir/run/client.rgw.s3.pid"
    echo "rgw.sh: radosgw stopped"
}

cmd_gw_start() {
    envfile=$1
    dir=$(sed -n 's/^STRATA_RGW_DIR=//p' "$envfile")
    endpoint=$(sed -n 's/^STRATA_RGW_ENDPOINT=//p' "$envfile")
    [ -n "$dir" ] && [ -f "$dir/ceph.conf" ] && [ -n "$endpoint" ] || die "no RGW recorded in $envfile"
    [ -z "$(gw_pid "$dir")" ] || { echo "rgw.sh: radosgw is already running"; return 0; }
    radosgw -c "$dir/ceph.conf" -n client.rgw.s3
    ok=0
    for i in $(seq 300); do
        if curl -s -m 2 -o /dev/null "$endpoint/"; then ok=1; break; fi
        sleep 0.2
    done
    [ $ok = 1 ] || die "radosgw did not answer on $endpoint again (see $dir/log)"
    echo "rgw.sh: radosgw ready again on $endpoint"
}

cmd_start() {
    envfile=$1
    for tool in ceph-mon ceph-osd radosgw radosgw-admin ceph monmaptool ceph-authtool curl python3; do
        command -v "$tool" >/dev/null 2>&1 || die "$tool not found (install ceph-mon ceph-osd radosgw ceph-common curl python3)"
    done
    # A previous run that was not stopped: stop it first.
    [ -f "$envfile" ] && cmd_stop "$envfile"

    dir=$(mktemp -d "${TMPDIR:-/tmp}/strata-rgw.XXXXXX")
    mkdir -p "$dir/mon" "$dir/osd" "$dir/log" "$dir/run" "$dir/rgw"
    mon_port=$(free_port)
    rgw_port=$(free_port)
    fsid=$(cat /proc/sys/kernel/random/uuid)
    bucket=${RGW_BUCKET:-strata-test}
    conf="$dir/ceph.conf"
    cat >"$conf" <<CONF
[global]
fsid = $fsid
mon host = v2:127.0.0.1:$mon_port
mon initial members = a
auth cluster required = none
auth service required = none
auth client required = none
run dir = $dir/run
log file = $dir/log/\$name.log
admin socket = $dir/run/\$name.asok
pid file = $dir/run/\$name.pid
keyring = $dir/keyring
ms bind ipv6 = false
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd crush chooseleaf type = 0
mon allow pool size one = true
mon warn on pool no redundancy = false
mon pg warn min per osd = 0
mon max pg per osd = 1000
osd max object name len = 460
osd max object namespace len = 64
[mon]
mon data = $dir/mon
mon data avail crit = 1
[osd]
osd data = $dir/osd
osd objectstore = memstore
memstore device bytes = ${RGW_MEMSTORE_BYTES:-3221225472}
osd journal size = 0
[client.rgw.s3]
rgw frontends = beast endpoint=127.0.0.1:$rgw_port
rgw data = $dir/rgw
rgw dns name = localhost
debug rgw = 0/0
debug ms = 0/0
# Free the space of deleted and overwritten objects within seconds, not
# after the default two hours: the OSD keeps everything in RAM.
rgw gc obj min wait = ${RGW_GC_MIN_WAIT:-5}
rgw gc processor period = 5
# Without this radosgw keeps retrying its monitor session forever.
ms mon client mode = crc secure
# The usage log (radosgw-admin usage show): requests per user, bucket and
# operation, the object store's own count that integration.cost.rgw
# compares Strata's with.  Written out each second and after every entry,
# so a test need not wait for the default half hour.
rgw enable usage log = true
rgw usage log tick interval = 1
rgw usage log flush threshold = 1
CONF
    c="-c $conf"
    # Record where the state is before anything runs, so that stop can
    # clean up after a start that failed half way.
    echo "STRATA_RGW_DIR=$dir" >"$envfile"

    ceph-authtool --create-keyring "$dir/keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
    monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$mon_port]" "$dir/monmap" >/dev/null
    ceph-mon $c --mkfs -i a --monmap "$dir/monmap" --keyring "$dir/keyring"
    ceph-mon $c -i a
    ok=0
    for i in $(seq 100); do
        if ceph $c -s >/dev/null 2>&1; then ok=1; break; fi
        sleep 0.2
    done
    [ $ok = 1 ] || die "monitor did not come up (see $dir/log)"

    osd_uuid=$(cat /proc/sys/kernel/random/uuid)
    osd_id=$(ceph $c osd new "$osd_uuid")
    ceph-osd $c -i "$osd_id" --mkfs --osd-uuid "$osd_uuid" >/dev/null 2>&1
    ceph-osd $c -i "$osd_id" 2>>"$dir/log/osd.stderr"
    ok=0
    for i in $(seq 150); do
        if ceph $c osd stat 2>/dev/null | grep -q '1 up'; then ok=1; break; fi
        sleep 0.2
    done
    [ $ok = 1 ] || die "OSD did not come up (see $dir/log)"

    radosgw $c -n client.rgw.s3
    endpoint="http://127.0.0.1:$rgw_port"
    ok=0
    for i in $(seq 300); do
        if curl -s -m 2 -o /dev/null "$endpoint/"; then ok=1; break; fi
        sleep 0.2
    done
    [ $ok = 1 ] || die "radosgw did not answer on $endpoint (see $dir/log)"

    access=$(random_word 20)
    secret=$(random_word 40)
    radosgw-admin $c user create --uid=strata-test --display-name="strata test" \
        --access-key="$access" --secret-key="$secret" >/dev/null
    # Create the bucket with a SigV4-signed PUT (body length set, as S3 wants).
    ok=0
    for i in $(seq 20); do
        code=$(curl -s -o "$dir/log/mkbucket.out" -w '%{http_code}' -X PUT \
            --aws-sigv4 "aws:amz:us-east-1:s3" --user "$access:$secret" \
            -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -H "Content-Length: 0" \
            "$endpoint/$bucket") || true
        if [ "$code" = 200 ]; then ok=1; break; fi
        sleep 0.5
    done
    [ $ok = 1 ] || die "could not create bucket $bucket (HTTP $code: $(cat "$dir/log/mkbucket.out"))"

    cat >"$envfile" <<ENV
STRATA_RGW_DIR=$dir
STRATA_RGW_ENDPOINT=$endpoint
STRATA_RGW_ACCESS_KEY=$access
STRATA_RGW_SECRET_KEY=$secret
STRATA_RGW_BUCKET=$bucket
STRATA_RGW_REGION=us-east-1
ENV
    echo "rgw.sh: radosgw ready on $endpoint, bucket $bucket (state in $dir)"
}

[ $# -eq 2 ] || die "usage: rgw.sh start|stop|gw-stop|gw-start ENVFILE"
case $1 in
start) cmd_start "$2" ;;
stop) cmd_stop "$2" ;;
gw-stop) cmd_gw_stop "$2" ;;
gw-start) cmd_gw_start "$2" ;;
*) die "usage: rgw.sh start|stop|gw-stop|gw-start ENVFILE" ;;
esac
