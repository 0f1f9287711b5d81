#!/usr/bin/env bash
# Reflection/amplification benchmark for an ECDSA and an ML-DSA-44 signing of
# zones/example.com.zone (NSEC3): pqdns-server with every limit off, and at its defaults
# (amplification limit 3x for clients without a valid cookie, response-rate limiting 200
# responses/s per /24 with slip 2) at each of RATES; NSD 4.6 with RRL off and at its default.
# `pqdns-bench amplification` sends streams of queries from one address (as a spoofing
# attacker does) and counts the bytes that come back; pqdns-server also with a valid DNS
# cookie, and at its defaults also with a client cookie only (what a spoofing attacker can add
# to have our server cookie reflected too; NSD 4.6 has no cookies).
#
#   benches/abuse/run.sh            # from the workspace root, after `cargo build --release`
#
# Writes docs/bench/abuse.csv and prints the table of docs/bench/abuse.md
# (benches/abuse/table.py). Knobs: RATE=5000 queries/s (limits off, NSD, cookie streams),
# RATES="10 150 1000 5000" (pqdns-server defaults), DURATION=4 seconds per stream,
# PQ_PORT=31053 NSD_PORT=31054. Everything runs on 127.0.0.1 and stops by itself.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=${PQDNS_BIN:-$ROOT/target/release}
CSV=${CSV:-$ROOT/docs/bench/abuse.csv}
RATE=${RATE:-5000}
RATES=${RATES:-10 150 1000 5000}
SECONDS_PER=${DURATION:-4}
PQ_PORT=${PQ_PORT:-31053}
NSD_PORT=${NSD_PORT:-31054}
for b in pqdns-server pqdns-zone pqdns-bench; do
    [[ -x $BIN/$b ]] || { echo "missing $BIN/$b: cargo build --release" >&2; exit 1; }
done
command -v nsd >/dev/null || { echo "missing nsd (apt-get install nsd)" >&2; exit 1; }

WORK=$(mktemp -d /tmp/pqdns-abuse.XXXXXX)
PID=""
cleanup() {
    [[ -n $PID ]] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT

wait_udp() { # port
    for _ in $(seq 100); do
        [[ $(dig @127.0.0.1 -p "$1" +tries=1 +time=1 +short example.com. SOA 2>/dev/null) == ns1.* ]] \
            && return 0
        sleep 0.2
    done
    echo "server on port $1 did not answer" >&2
    return 1
}

stop() {
    kill "$PID" 2>/dev/null || true
    wait "$PID" 2>/dev/null || true
    PID=""
}

measure() { # label port rate [--with-cookies]
    "$BIN/pqdns-bench" amplification -t "127.0.0.1:$2" --zone example.com. --rate "$3" \
        --seconds "$SECONDS_PER" --label "$1" --no-header "${@:4}" >>"$WORK/rows.csv"
}

echo "server,probe,rate_qps,queries,bytes_in,responses,truncated,bytes_out,ratio,ip_ratio" \
    >"$WORK/rows.csv"
declare -A ALG=([ecdsa]=ECDSAP256SHA256 [ml-dsa-44]=ML-DSA-44)
for zone in ecdsa ml-dsa-44; do
    d=$WORK/$zone
    mkdir -p "$d"
    cp "$ROOT/zones/example.com.zone" "$d/"
    for limits in off default; do
        if [[ $limits == off ]]; then
            extra=$'rrl_rate = 0\namplification_limit = 0'
        else
            extra=""
        fi
        cat >"$d/zone-$limits.toml" <<TOML
origin = "example.com."
default_ttl = 3600
file = "example.com.zone"
[signing]
algorithms = ["${ALG[$zone]}"]
keys = "ksk-zsk"
denial = "nsec3"
key_directory = "keys"
[server]
udp = ["127.0.0.1:$PQ_PORT"]
tcp = ["127.0.0.1:$PQ_PORT"]
dot = []
doh = []
$extra
TOML
    done
    "$BIN/pqdns-zone" sign "$d/zone-off.toml" -o "$d/example.com.zone.signed" 2>"$d/sign.log"

    for limits in off default; do
        (cd "$d" && exec "$BIN/pqdns-server" --zone "zone-$limits.toml") >"$d/pqdns.log" 2>&1 &
        PID=$!
        wait_udp "$PQ_PORT"
        if [[ $limits == off ]]; then
            measure "pqdns-server $zone limits-off" "$PQ_PORT" "$RATE" --with-cookies
        else
            for rate in $RATES; do
                # A fresh bucket: the previous stream's second must not count against this one.
                sleep 1
                measure "pqdns-server $zone defaults" "$PQ_PORT" "$rate" --with-client-cookies
            done
        fi
        stop
    done
    for rrl in 0 200; do

        cat >"$d/nsd.conf" <<CONF
server:
    ip-address: 127.0.0.1@$NSD_PORT
    server-count: 1
    username: ""
    chroot: ""
    zonesdir: "$d"
    database: ""
    zonelistfile: "$d/zone.list"
    xfrdfile: "$d/xfrd.state"
    xfrdir: "$d"
    pidfile: "$d/nsd.pid"
    logfile: "$d/nsd.log"
    ipv4-edns-size: 1232
    minimal-responses: yes
    rrl-ratelimit: $rrl
    rrl-slip: 2
    rrl-ipv4-prefix-length: 24
remote-control:
    control-enable: no
zone:
    name: example.com.
    zonefile: "example.com.zone.signed"
CONF
        nsd -d -c "$d/nsd.conf" >"$d/nsd.out" 2>&1 &
        PID=$!
        wait_udp "$NSD_PORT"
        measure "nsd $zone rrl=$rrl" "$NSD_PORT" "$RATE"
        stop
    done
done
cp "$WORK/rows.csv" "$CSV"
echo "wrote $CSV" >&2
python3 "$ROOT/benches/abuse/table.py" "$CSV"
