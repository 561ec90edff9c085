#!/bin/sh
# minio.sh OS_CONFORMANCE - run the conformance suite against MinIO when a
# `minio` binary is on PATH; otherwise say so and exit 77 (skipped).
#
# MinIO runs on a free loopback port with its data in a mktemp directory,
# with random root credentials, and is stopped by its pid afterwards.
set -eu
conformance=$1
if ! command -v minio >/dev/null 2>&1; then
    echo "skipped: no minio binary on PATH"
    exit 77
fi
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
dir=$(mktemp -d "${TMPDIR:-/tmp}/strata-minio.XXXXXX")
port=$(free_port)
console=$(free_port)
user=$(LC_ALL=C tr -dc 'A-Z0-9' </dev/urandom | head -c 20)
pass=$(LC_ALL=C tr -dc 'A-Za-z0-9' </dev/urandom | head -c 40)
MINIO_ROOT_USER=$user MINIO_ROOT_PASSWORD=$pass \
    minio server "$dir/data" --address "127.0.0.1:$port" --console-address "127.0.0.1:$console" \
    >"$dir/minio.log" 2>&1 &
pid=$!
stop() {
    kill "$pid" 2>/dev/null || true
    i=0
    while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    kill -9 "$pid" 2>/dev/null || true
    rm -rf "$dir"
}
trap stop EXIT
endpoint="http://127.0.0.1:$port"
ok=0
for i in $(seq 100); do
    if curl -s -o /dev/null -f "$endpoint/minio/health/live"; then ok=1; break; fi
    sleep 0.2
done
if [ $ok != 1 ]; then
    echo "minio.sh: minio did not start:" >&2
    cat "$dir/minio.log" >&2
    exit 1
fi
bucket=strata-test
code=$(curl -s -o "$dir/mb.out" -w '%{http_code}' -X PUT --aws-sigv4 "aws:amz:us-east-1:s3" \
    --user "$user:$pass" -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -H "Content-Length: 0" \
    "$endpoint/$bucket")
if [ "$code" != 200 ]; then
    echo "minio.sh: creating the bucket failed (HTTP $code): $(cat "$dir/mb.out")" >&2
    exit 1
fi
STRATA_TEST_S3_ENDPOINT=$endpoint STRATA_TEST_S3_ACCESS_KEY=$user \
    STRATA_TEST_S3_SECRET_KEY=$pass STRATA_TEST_S3_BUCKET=$bucket \
    "$conformance" --backend s3 --from-env --portable --name minio
