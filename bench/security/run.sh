#!/usr/bin/env bash
# bench/security/run.sh - produce and consume throughput of 1 KB records
# over a PLAINTEXT and an SSL listener of the same stratad, in one run
# (issue 14).  See bench/README.md and docs/BENCHMARKS.md.
#
# One fresh stratad (empty temporary log dir, config/server.properties
# otherwise, tiering off) listens on PLAINTEXT and SSL; its keystore is a
# throwaway CA's server certificate (SAN DNS:localhost, IP:127.0.0.1) made
# here with openssl.  REPEATS times, the two listeners taking turns (which
# goes first alternates from one round to the next), strata-loadgen
#
#   produce-1    sends N records of 1000 B with acks=1 to a new topic,
#   consume      reads them back from the beginning (assign, no group),
#   produce-all  sends N records with acks=all to another new topic,
#
# over PLAINTEXT, and over SSL with -P security.protocol=SSL -P
# ssl.ca.location=CA.  A round's topics are deleted at its end.  Medians,
# SSL / PLAINTEXT ratios (aims: produce >= 0.7; consume >= 0.8 with
# kernel TLS) and the CPU seconds stratad and the client used per GB are
# printed as Markdown tables; every single run goes to stderr.  Also
# printed: the TLS version and cipher suite the SSL listener negotiates
# with OpenSSL's defaults (librdkafka's too), and whether stratad used
# kernel TLS (it logs once when it cannot).
#
# Settings (environment): REPEATS (5), N (1000000), PARTITIONS (1),
# SETTLE_S (2, the pause before each run, as bench/run.sh explains),
# LINGER_MS (5), BUILD_DIR (build-bench), SKIP_BUILD=1 to reuse a build,
# OVERRIDE (more broker settings, "k=v k=v").
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"

REPEATS=${REPEATS:-5}
N=${N:-1000000}
PARTITIONS=${PARTITIONS:-1}
SETTLE_S=${SETTLE_S:-2}
LINGER_MS=${LINGER_MS:-5}
BUILD_DIR=${BUILD_DIR:-build-bench}
SIZE=1000

if [ "${SKIP_BUILD:-0}" != 1 ]; then
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$BUILD_DIR" -j2 --target stratad strata-loadgen strata >/dev/null
fi
bin="$root/$BUILD_DIR/bin"
for b in stratad strata-loadgen strata; do
  [ -x "$bin/$b" ] || { echo "security/run.sh: $bin/$b is missing" >&2; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/strata-bench-tls.XXXXXX")
# One stratad and at most one other process (strata-loadgen, strata,
# openssl) at a time; a pid is forgotten once reaped, so cleanup never
# signals a pid that may have been reused.
server_pid=""
child_pid=""

cleanup() {
  local pid
  for pid in $child_pid $server_pid; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# run_child OUT CMD...: CMD with stdout and stderr to OUT, in the
# background and waited for (bash runs traps only between foreground
# commands, so a signal to this script is handled at once); returns its
# status.
run_child() {
  local out=$1 rc=0
  shift
  "$@" >"$out" 2>&1 &
  child_pid=$!
  wait "$child_pid" || rc=$?
  child_pid=""
  return "$rc"
}

# ---- a throwaway CA and the server's keystore (key, then certificate chain)
tls="$work/tls"
mkdir "$tls"
(
  cd "$tls"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 \
    -subj "/CN=strata bench CA"
  openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj "/CN=localhost"
  printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >server.ext
  openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.crt \
    -days 2 -extfile server.ext
  cat server.key server.crt >keystore.pem
) >"$work/openssl.log" 2>&1 || {
  echo "security/run.sh: openssl could not make the certificates:" >&2
  cat "$work/openssl.log" >&2
  exit 1
}

# ---- two ports below 32768 (outside Linux's ephemeral range) nobody
# listens on, from a random start so that two runs rarely pick the same
free_port() { # free_port FROM
  local p
  for p in $(seq "$1" 32000); do
    if ! (echo >/dev/tcp/127.0.0.1/"$p") 2>/dev/null; then
      echo "$p"
      return 0
    fi
  done
  return 1
}
plain_port=$(free_port $((21000 + RANDOM % 10000))) || { echo "security/run.sh: no free port" >&2; exit 1; }
ssl_port=$(free_port $((plain_port + 1))) || { echo "security/run.sh: no free port" >&2; exit 1; }
plain_bootstrap="127.0.0.1:$plain_port"
ssl_bootstrap="127.0.0.1:$ssl_port"
ssl_props=(-P security.protocol=SSL -P "ssl.ca.location=$tls/ca.pem")

# ---- one stratad with both listeners
overrides=()
for kv in ${OVERRIDE:-}; do overrides+=(--override "$kv"); done
"$bin/stratad" --config config/server.properties \
  --override "listeners=PLAINTEXT://$plain_bootstrap,SSL://$ssl_bootstrap" \
  --override "ssl.keystore.location=$tls/keystore.pem" \
  --override "log.dirs=$work/logs" --override "num.partitions=$PARTITIONS" \
  --override remote.log.storage.system.enable=false "${overrides[@]}" \
  >"$work/stratad.out" 2>"$work/stratad.err" &
server_pid=$!
for _ in $(seq 1 100); do
  grep -q '^bootstrap.servers=' "$work/stratad.out" && break
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
if ! grep -q '^bootstrap.servers=' "$work/stratad.out"; then
  echo "security/run.sh: stratad did not start (ports $plain_port, $ssl_port):" >&2
  tail -n 20 "$work/stratad.err" >&2
  exit 1
fi

# fail_run WHAT: say what failed, whether stratad still runs, its log's end.
fail_run() {
  echo "security/run.sh: $1" >&2
  if kill -0 "$server_pid" 2>/dev/null; then
    echo "security/run.sh: stratad (pid $server_pid) is running; its log ends:" >&2
  else
    local st=0
    wait "$server_pid" || st=$?
    server_pid=""
    echo "security/run.sh: stratad exited with status $st; its log ends:" >&2
  fi
  tail -n 30 "$work/stratad.err" >&2
  exit 1
}

# loadgen ARGS...: run strata-loadgen, keep its result line in $result; any
# failed record fails the benchmark.
result=""
loadgen() {
  local rc=0
  run_child "$work/loadgen.out" "$bin/strata-loadgen" --quiet "$@" || rc=$?
  result=$(grep '^mode=' "$work/loadgen.out" || true)
  if [ "$rc" != 0 ]; then
    cat "$work/loadgen.out" >&2
    fail_run "strata-loadgen $* failed"
  fi
  case "$result" in
    *" errors=0") ;;
    *) fail_run "strata-loadgen $*: $result" ;;
  esac
}

delete_topic() { # delete_topic TOPIC
  run_child "$work/strata.out" "$bin/strata" topics --config config/server.properties \
    --bootstrap "$plain_bootstrap" delete "$1" || {
    cat "$work/strata.out" >&2
    fail_run "strata topics delete $1 failed"
  }
}

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
spread() { printf '%s\n' "$@" | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { print lo " - " hi }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }
# server_cpu_s: user + system CPU seconds stratad has used so far
server_cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$server_pid/stat"; }
# children_cpu_s FILE: user + system CPU seconds of the reaped children in
# the output of `times` (its second line), which must run in this shell
# itself: in a $(...) subshell it would count the subshell's children.
children_cpu_s() {
  awk 'NR == 2 { s = 0; for (i = 1; i <= 2; i++) { split($i, a, "m"); s += a[1] * 60 + a[2] }
       printf "%.3f", s }' "$1"
}
per_gb() { awk -v a="$1" -v b="$2" -v n="$N" -v s="$SIZE" 'BEGIN { printf "%.2f", (b - a) / (n * s / 1e9) }'; }

# ---- what is measured on, and which TLS the SSL listener speaks
rev="?"
if head_rev=$(git rev-parse --short HEAD 2>/dev/null); then
  rev=$head_rev
  git diff --quiet HEAD -- base broker || rev="$rev (base/ or broker/ modified)"
fi
cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
aes="no"
grep -qw aes /proc/cpuinfo && aes="yes"
ulp=$(cat /proc/sys/net/ipv4/tcp_available_ulp 2>/dev/null || echo "?")
echo "strata TLS benchmark: PLAINTEXT vs SSL listener of one stratad, loopback, $PARTITIONS partition(s)," \
     "$N records of 1 KB a run, median of $REPEATS runs"
echo "machine: $(nproc) CPUs ($cpu_model, AES-NI: $aes), $(uname -sr), tcp_available_ulp: ${ulp:-none}"
echo "stratad at $rev; librdkafka $(pkg-config --modversion rdkafka 2>/dev/null || echo '?')," \
     "$(openssl version | cut -d' ' -f1-2), linger.ms $LINGER_MS," \
     "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

# openssl s_client with OpenSSL's default versions and suites, as
# librdkafka (linked to the same library, no ssl.cipher.suites set) offers.
run_child "$work/s_client" openssl s_client -connect "$ssl_bootstrap" -CAfile "$tls/ca.pem" \
  -servername localhost -brief </dev/null || fail_run "openssl s_client could not connect to $ssl_bootstrap"
tls_version=$(sed -n 's/^Protocol version: //p' "$work/s_client")
suite=$(sed -n 's/^Ciphersuite: //p' "$work/s_client")
verified=$(sed -n 's/^Verification: //p' "$work/s_client")
echo "SSL listener: $tls_version $suite, key exchange $(sed -n 's/^Server Temp Key: //p' "$work/s_client")," \
     "server key RSA 2048, verification ${verified:-?} (openssl s_client with OpenSSL's defaults)"
evp=""
case "$suite" in
  *AES_256_GCM*) evp="aes-256-gcm" ;;
  *AES_128_GCM*) evp="aes-128-gcm" ;;
  *CHACHA20*) evp="chacha20-poly1305" ;;
esac
if [ -n "$evp" ] && run_child "$work/speed" openssl speed -seconds 1 -bytes 16384 -evp "$evp"; then
  echo "$evp on one core (openssl speed, 16 KiB blocks): $(awk 'END { printf "%.0f", $NF / 1000 }' \
    "$work/speed") MB/s"
fi

# ---- the runs
declare -A mbs scpu ccpu pair
kinds=(produce-1 consume produce-all)

# measure KIND PROTO ROUND: one run; its values are appended to the lists.
measure() {
  local kind=$1 proto=$2 r=$3 args c0 c1
  case "$kind" in
    produce-1) args=(produce -t "r$r-acks1-$proto" -n "$N" -s "$SIZE" -a 1 -l "$LINGER_MS") ;;
    produce-all) args=(produce -t "r$r-acksall-$proto" -n "$N" -s "$SIZE" -a all -l "$LINGER_MS") ;;
    consume) args=(consume -t "r$r-acks1-$proto" -n "$N") ;;
  esac
  if [ "$proto" = ssl ]; then args+=(-b "$ssl_bootstrap" "${ssl_props[@]}")
  else args+=(-b "$plain_bootstrap"); fi
  sleep "$SETTLE_S"
  c0=$(server_cpu_s)
  times >"$work/times0"
  loadgen "${args[@]}"
  times >"$work/times1"
  c1=$(server_cpu_s)
  local s c
  s=$(per_gb "$c0" "$c1")
  c=$(per_gb "$(children_cpu_s "$work/times0")" "$(children_cpu_s "$work/times1")")
  echo "    $kind $proto: $result stratad_cpu_s_per_gb=$s client_cpu_s_per_gb=$c" >&2
  mbs[$kind/$proto]+="$(field mb_per_s "$result") "
  scpu[$kind/$proto]+="$s "
  ccpu[$kind/$proto]+="$c "
}

for r in $(seq 1 "$REPEATS"); do
  echo "  round $r:" >&2
  protos=(plaintext ssl)
  [ $((r % 2)) = 0 ] && protos=(ssl plaintext)
  for kind in "${kinds[@]}"; do
    for proto in "${protos[@]}"; do measure "$kind" "$proto" "$r"; done
    # this round's pair, for the spread of the ratio
    p=${mbs[$kind/plaintext]% }; p=${p##* }
    s=${mbs[$kind/ssl]% }; s=${s##* }
    pair[$kind]+="$(ratio "$s" "$p") "
  done
  for proto in plaintext ssl; do
    delete_topic "r$r-acks1-$proto"
    delete_topic "r$r-acksall-$proto"
  done
done

# ---- kernel TLS: stratad says once when a TLS connection cannot use it
if grep -q 'kernel TLS is not available here' "$work/stratad.err"; then
  echo "kernel TLS: not in use; stratad said: $(grep -o 'kernel TLS is not available here.*' \
    "$work/stratad.err" | head -n 1)"
else
  echo "kernel TLS: in use (stratad did not log that it is unavailable)"
fi

label() {
  case "$1" in
    produce-1) echo "produce, acks=1" ;;
    produce-all) echo "produce, acks=all" ;;
    consume) echo "consume (from the beginning)" ;;
  esac
}
aim() {
  case "$1" in
    consume) echo ">= 0.8 with kernel TLS" ;;
    *) echo ">= 0.7" ;;
  esac
}

echo
echo "Throughput, 1 KB (1000 B) records, MB = 10^6 bytes of record values; SSL / PLAINTEXT = the ratio" \
     "of the medians, and the least and greatest of the $REPEATS rounds' own ratios"
echo
echo "| 1 KB records | PLAINTEXT MB/s | SSL MB/s | SSL / PLAINTEXT | rounds' ratios | aim | PLAINTEXT MB/s min - max | SSL MB/s min - max |"
echo "|--------------|----------------|----------|-----------------|----------------|-----|--------------------------|--------------------|"
for kind in "${kinds[@]}"; do
  # shellcheck disable=SC2086 # the lists are space-separated on purpose
  {
    p=$(median ${mbs[$kind/plaintext]}); s=$(median ${mbs[$kind/ssl]})
    echo "| $(label "$kind") | $p | $s | $(ratio "$s" "$p") | $(spread ${pair[$kind]}) | $(aim "$kind") |" \
         "$(spread ${mbs[$kind/plaintext]}) | $(spread ${mbs[$kind/ssl]}) |"
  }
done
echo
echo "CPU seconds per GB of record values (medians): stratad's, and the client's (strata-loadgen)"
echo
echo "| 1 KB records | stratad PLAINTEXT | stratad SSL | client PLAINTEXT | client SSL |"
echo "|--------------|-------------------|-------------|------------------|------------|"
for kind in "${kinds[@]}"; do
  # shellcheck disable=SC2086
  echo "| $(label "$kind") | $(median ${scpu[$kind/plaintext]}) | $(median ${scpu[$kind/ssl]}) |" \
       "$(median ${ccpu[$kind/plaintext]}) | $(median ${ccpu[$kind/ssl]}) |"
done
echo
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
