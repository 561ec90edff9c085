#!/usr/bin/env bash
# strata-entrypoint: the container's entry point.  It builds stratad's
# properties file from three layers, each overriding the one before:
#
#   1. the image's defaults (paths under /var/lib/strata, every interface);
#   2. a mounted properties file: $STRATA_CONFIG_FILE, or
#      /etc/strata/server.properties when that exists;
#   3. environment variables, one per setting: STRATA_<NAME>, where NAME is
#      the Kafka property name upper-cased with each '.' written as '_'
#      (STRATA_LOG_DIRS -> log.dirs).  A property name's own '_' is written
#      '__' and its '-' is written '___' (the rule Confluent's images use):
#      STRATA_FOO__BAR -> foo_bar, STRATA_FOO___BAR -> foo-bar.
#
# then checks every key against stratad's own table (`stratad
# --print-config-doc`), so a misspelt variable is named at once, writes the
# file (mode 0600: it may hold credentials) and execs stratad on it.
#
#   strata-entrypoint [stratad] [STRATAD-ARGS...]  write the file, exec stratad
#   strata-entrypoint -X ...                       the same (arguments go to stratad)
#   strata-entrypoint print-config                 print the file, secrets masked
#   strata-entrypoint write-config [FILE]          write it and print its path
#   strata-entrypoint env-name KEY                 the variable that sets KEY
#   strata-entrypoint key-name VARIABLE            the key VARIABLE sets
#   strata-entrypoint COMMAND ...                  exec COMMAND (strata, kcat, bash)
#
# Two variables steer the script itself and are not settings:
#   STRATA_CONFIG_FILE  the properties file of layer 2
#   STRATA_CONFIG_OUT   where the file is written (default
#                       /run/strata/server.properties)
set -euo pipefail

me=strata-entrypoint
die() { echo "$me: $*" >&2; exit 2; }

# Variables of the script, never mapped to a setting.
is_control() { [ "$1" = STRATA_CONFIG_FILE ] || [ "$1" = STRATA_CONFIG_OUT ]; }

# STRATA_FOO___BAR -> foo-bar, STRATA_FOO__BAR -> foo_bar, STRATA_FOO_BAR -> foo.bar
key_name() {
    local n="${1#STRATA_}"
    n="${n,,}"
    n="${n//___/-}"
    n="${n//__/$'\x01'}"
    n="${n//_/.}"
    printf '%s\n' "${n//$'\x01'/_}"
}

# log.dirs -> STRATA_LOG_DIRS (the inverse of key_name)
env_name() {
    local k="$1"
    k="${k//_/__}"
    k="${k//-/___}"
    k="${k//./_}"
    printf 'STRATA_%s\n' "${k^^}"
}

is_secret() {
    case "$1" in
    *secret* | *password* | *session.token* | *jaas.config* | *.key.pem | *credentials*) return 0 ;;
    *) return 1 ;;
    esac
}

trim() {
    local s="$1"
    s="${s#"${s%%[![:space:]]*}"}"
    s="${s%"${s##*[![:space:]]}"}"
    printf '%s' "$s"
}

declare -A value origin
order=()
set_key() { # key value origin
    [ -n "${value[$1]+x}" ] || order+=("$1")
    value[$1]="$2"
    origin[$1]="$3"
}

# The keys stratad knows: its broker and object store tables (topic settings
# are set per topic, not here).
known_keys() {
    stratad --print-config-doc |
        awk '/^### Topic settings/ { exit } /^\| `/ { split($0, a, "`"); print a[2] }'
}

build_config() {
    command -v stratad >/dev/null 2>&1 || die "stratad is not on PATH"
    # 1. the image's defaults
    set_key listeners "PLAINTEXT://:9092" "the image's default"
    set_key log.dirs /var/lib/strata/logs "the image's default"
    set_key remote.log.cache.dir /var/lib/strata/cache "the image's default"
    set_key objectstore.file.root /var/lib/strata/bucket "the image's default"

    # 2. a mounted properties file
    local file="${STRATA_CONFIG_FILE:-}"
    if [ -z "$file" ] && [ -f /etc/strata/server.properties ]; then
        file=/etc/strata/server.properties
    fi
    if [ -n "$file" ]; then
        [ -r "$file" ] || die "STRATA_CONFIG_FILE: cannot read $file"
        local line n=0 s k v
        while IFS= read -r line || [ -n "$line" ]; do
            n=$((n + 1))
            s="$(trim "$line")"
            case "$s" in '' | '#'* | '!'*) continue ;; esac
            [[ "$s" == *=* ]] || die "$file:$n: expected key=value, got '$s'"
            k="$(trim "${s%%=*}")"
            v="$(trim "${s#*=}")"
            [ -n "$k" ] || die "$file:$n: empty key"
            set_key "$k" "$v" "$file:$n"
        done <"$file"
    fi

    local -A known=()
    local kk
    while IFS= read -r kk; do known[$kk]=1; done < <(known_keys)
    [ "${#known[@]}" -gt 0 ] || die "stratad --print-config-doc listed no settings"

    # 3. the environment, in name order.  Kubernetes gives a pod variables
    # for every Service of its namespace (STRATA_PORT=tcp://..., for a
    # Service named strata, STRATA_HEADLESS_SERVICE_HOST, ...): one that is
    # no stratad setting is left out, saying so (a pod spec with
    # enableServiceLinks: false gets none).
    local var key
    local link='^STRATA_([A-Z0-9_]+_)?(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT(_[0-9]+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?)?)$'
    while IFS= read -r var; do
        is_control "$var" && continue
        [[ "$var" =~ ^STRATA_[A-Z0-9_]+$ ]] || die "$var: not a setting's name (STRATA_ and upper-case letters, digits, '_')"
        key="$(key_name "$var")"
        if [[ "$var" =~ $link ]] && [ -z "${known[$key]+x}" ]; then
            echo "$me: $var left out: a Kubernetes service link, not a setting" >&2
            continue
        fi
        [[ "${!var}" != *$'\n'* ]] || die "$var: a value may not span lines"
        set_key "$key" "${!var}" "$var"
    done < <(compgen -e | grep '^STRATA_' | LC_ALL=C sort || true)

    # every key must be one of stratad's (the listener.name.<listener>.*
    # family and the config providers' keys are checked by stratad itself)
    for kk in "${order[@]}"; do
        case "$kk" in listener.name.* | config.providers*) continue ;; esac
        if [ -z "${known[$kk]+x}" ]; then
            case "${origin[$kk]}" in
            STRATA_*) die "${origin[$kk]}: '$kk' is not a stratad setting (stratad --print-config-doc lists them; a property's own '_' is written '__')" ;;
            *) die "${origin[$kk]}: '$kk' is not a stratad setting (stratad --print-config-doc lists them)" ;;
            esac
        fi
    done
}

emit() { # mask: 1 hides secrets
    echo "# Written by $me at start-up; later layers override earlier ones."
    local k
    for k in "${order[@]}"; do
        echo "# ${origin[$k]}"
        if [ "$1" = 1 ] && is_secret "$k" && [ -n "${value[$k]}" ]; then
            echo "$k=********"
        else
            echo "$k=${value[$k]}"
        fi
    done
}

write_config() { # path
    local out="$1" dir
    dir="$(dirname "$out")"
    mkdir -p "$dir" || die "cannot create $dir"
    (umask 077 && emit 0 >"$out.tmp") || die "cannot write $out"
    mv -f "$out.tmp" "$out"
}

out="${STRATA_CONFIG_OUT:-/run/strata/server.properties}"
cmd="${1:-stratad}"
case "$cmd" in
print-config)
    build_config
    emit 1
    ;;
write-config)
    [ $# -le 2 ] || die "write-config takes at most one path"
    build_config
    write_config "${2:-$out}"
    echo "${2:-$out}"
    ;;
env-name)
    [ $# -eq 2 ] || die "env-name takes one key"
    env_name "$2"
    ;;
key-name)
    [ $# -eq 2 ] || die "key-name takes one variable"
    key_name "$2"
    ;;
stratad | -*)
    [ "$cmd" = stratad ] && [ $# -gt 0 ] && shift
    build_config
    write_config "$out"
    exec stratad --config "$out" "$@"
    ;;
*)
    exec "$@"
    ;;
esac
