#!/usr/bin/env bash
# Install what Strata needs from Debian 12's packages, skipping what is
# already there.  `deps.sh run` installs what building and running need;
# `deps.sh test` (the default) adds the test tools: kcat, cmocka, clang
# and its libFuzzer runtime (tests/fuzz: without libclang-rt-14-dev clang
# cannot link -fsanitize=fuzzer and the harnesses are skipped), Ceph RGW
# (a real S3 server), Node.js and npm (kafkajs), kafka-python with its
# codecs, Go with Sarama (built offline in GOPATH mode), for the Helm
# chart's tests (tests/helm) the Go packages of tools/helm-render (sprig,
# yaml.v3, gojsonschema), yamllint and the Kubernetes API models of
# python3-kubernetes; Prometheus (a real server scraping /metrics, and
# promtool); and what checks the deploy files: docker-compose (`config
# -q`) and shellcheck.  `deps.sh image` adds to `run` what building the
# container image without a registry needs (deploy/image/build.sh):
# Debian's docker and debootstrap.
set -euo pipefail

what=${1:-test}

run_pkgs=(build-essential cmake pkg-config
          libcurl4-openssl-dev libssl-dev libexpat1-dev libjansson-dev
          zlib1g-dev liblz4-dev libzstd-dev libsnappy-dev librdkafka-dev
          libmicrohttpd-dev)
test_pkgs=(kcat libcmocka-dev python3 curl clang libclang-rt-14-dev openssl
           ceph-mon ceph-osd radosgw ceph-common
           python3-kafka python3-snappy python3-lz4 python3-zstandard
           golang-go golang-github-shopify-sarama-dev
           golang-github-masterminds-sprig-dev golang-gopkg-yaml.v3-dev
           golang-github-xeipuuv-gojsonschema-dev yamllint python3-kubernetes python3-yaml
           prometheus docker-compose shellcheck chromium)
image_pkgs=(docker.io debootstrap kcat python3 python3-yaml docker-compose)

pkgs=("${run_pkgs[@]}")
case "$what" in
run) ;;
test) pkgs+=("${test_pkgs[@]}") ;;
image) pkgs+=("${image_pkgs[@]}") ;;
*) echo "deps.sh: say run, test or image" >&2; exit 2 ;;
esac

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js: any recent node with npm will do (kafkajs needs >= 14).
if [ "$what" = test ] && ! command -v npm >/dev/null 2>&1; then
  missing+=(nodejs npm)
fi

if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
