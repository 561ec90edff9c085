#!/bin/sh
# fault_test.sh OS_FAULT RGWENV - run os_fault against RGW through faultproxy.py.
#
# About a quarter of all requests fail on purpose (dropped connections, cut
# uploads, 500, 503, stalls past the client's timeout, truncated answers,
# answers lost after the server acted); a tenth more are delayed.
set -eu
os_fault=$1
envfile=$2
here=$(cd "$(dirname "$0")" && pwd)
. "$envfile"
dir=$(mktemp -d "${TMPDIR:-/tmp}/strata-fault.XXXXXX")
seed=${STRATA_FAULT_SEED:-$$}
echo "fault_test: proxy seed $seed (STRATA_FAULT_SEED=$seed repeats the choice of faults)"
python3 "$here/faultproxy.py" --upstream "${STRATA_RGW_ENDPOINT#http://}" \
    --port-file "$dir/port" --stats-file "$dir/stats" --seed "$seed" \
    --drop 0.04 --cut-upload 0.03 --error500 0.04 --error503 0.05 --stall 0.01 \
    --truncate 0.04 --lose 0.03 --delay 0.10 --delay-ms 300 --stall-ms 2500 \
    --lose-first-complete --deny-marker deny-part &
proxy=$!
i=0
while [ ! -s "$dir/port" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
if [ ! -s "$dir/port" ]; then
    echo "fault_test: the proxy did not start" >&2
    kill "$proxy" 2>/dev/null || true
    rm -rf "$dir"
    exit 1
fi
rc=0
TMPDIR=$dir "$os_fault" --env "$envfile" --endpoint "http://127.0.0.1:$(cat "$dir/port")" \
    --rounds "${STRATA_FAULT_ROUNDS:-2}" >"$dir/out" || rc=$?
cat "$dir/out"
kill "$proxy"
wait "$proxy" 2>/dev/null || true
stats=$(cat "$dir/stats" 2>/dev/null || echo '{}')
echo "fault_test: proxy counts: $stats"
# Every request that reached the proxy, failed on purpose or not, is one
# the object store counted for the cost estimate (retries, parts, aborts).
billed=$(sed -n 's/^os_fault: billable requests \([0-9]*\).*/\1/p' "$dir/out")
seen=$(echo "$stats" | sed -n 's/.*"requests": \([0-9]*\).*/\1/p')
if [ -z "$billed" ] || [ "$billed" != "$seen" ]; then
    echo "fault_test: the object store counted ${billed:-no} billable requests, the proxy saw ${seen:-none}" >&2
    rc=1
fi
# The refused part must have led to an abort of its upload.
if ! echo "$stats" | grep -q '"aborts": [1-9]'; then
    echo "fault_test: the upload with a refused part was not aborted" >&2
    rc=1
fi
# Every completed multipart upload lost its first answer and then met
# NoSuchUpload: the puts above succeeded only if the client checked.
if ! echo "$stats" | grep -q '"nosuchupload": [1-9]'; then
    echo "fault_test: no multipart complete was retried into NoSuchUpload" >&2
    rc=1
fi
rm -rf "$dir"
exit $rc
