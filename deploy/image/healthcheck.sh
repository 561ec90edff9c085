#!/usr/bin/env bash
# strata-healthcheck: is the stratad of this container serving?  Reads the
# properties file the entry point wrote ($STRATA_CONFIG_OUT, default
# /run/strata/server.properties):
#   - with admin.listeners set, asks its /v1/ready (ready = registered,
#     caught up with metadata, log dirs online);
#   - otherwise asks the first client listener for Metadata with kcat.
# Exit 0 when it answers, 1 when not (what HEALTHCHECK and compose want).
set -euo pipefail

conf="${STRATA_CONFIG_OUT:-/run/strata/server.properties}"
[ -r "$conf" ] || { echo "strata-healthcheck: no $conf yet" >&2; exit 1; }

get() { # the last value of key $1 in the file
    sed -n "s/^[[:space:]]*$1[[:space:]]*=[[:space:]]*//p" "$conf" | tail -n 1 | sed 's/[[:space:]]*$//'
}
local_host() { # a bind address to one that can be dialled here
    case "$1" in '' | 0.0.0.0) echo 127.0.0.1 ;; '[::]' | '::') echo '[::1]' ;; *) echo "$1" ;; esac
}

admin="$(get 'admin\.listeners')"
if [ -n "$admin" ]; then
    a="${admin%%,*}"          # http://host:port
    hp="${a#*://}"
    host="$(local_host "${hp%:*}")"
    exec curl -fsS -o /dev/null --max-time 5 "http://$host:${hp##*:}/v1/ready"
fi

controllers=",$(get 'controller\.listener\.names'),"
IFS=, read -r -a ls <<<"$(get listeners)"
client=""
for l in "${ls[@]}"; do
    name="${l%%://*}"
    [[ "$controllers" == *",$name,"* ]] && continue
    client="${l#*://}"
    break
done
[ -n "$client" ] || { echo "strata-healthcheck: no client listener in $conf" >&2; exit 1; }
exec kcat -b "$(local_host "${client%:*}"):${client##*:}" -L -m 5 >/dev/null
