#!/usr/bin/env bash
# Soak (issue 31 must-show 3): CLIENTS DoT and DoH clients for SECONDS against one service,
# with its RSS and open descriptors sampled every second. `pqdns-bench soak` runs the clients:
# half steady (a query every 2-6 s on one connection), three in ten idle (ask once, stay until
# the service's 10 s idle timeout closes the connection, come back 10-30 s later), two in ten
# reconnecting (1-3 queries, close, resumed TLS handshake 20-60 s later); 25 clients per
# source /24 on loopback (127.1.0.0 and up), starts spread over RAMP seconds. An answer with
# an RCODE other than NOERROR or NXDOMAIN counts as an error.
#
# TARGET=server (default): pqdns-server serving an ECDSA-signed zones/example.com.zone.
# TARGET=resolver: pqdns-resolver (validating, iterating from root hints) in front of a
#   three-level hierarchy served by three pqdns-server processes on 127.0.5.2-4 (the root,
#   `test.` and `example.test.`, each signed with ECDSAP256SHA256, DS records in the parents,
#   the root's DS as trust anchor); the clients ask with RD=1 for names of example.test., so
#   after the first resolution every answer is a validated cache hit.
#
#   benches/soak/run.sh               # from the workspace root, after `cargo build --release`
#   CLIENTS=500 SECONDS_RUN=15 benches/soak/run.sh   # a smoke run
#   TARGET=resolver OUT=docs/bench/soak-resolver benches/soak/run.sh
#
# Writes $OUT.csv (a row per second: answers, errors, timeouts, handshakes, client
# connections open, service RSS KiB and descriptors), $OUT.json (summary), $OUT.svg and
# $OUT.png (benches/soak/plot.py; PNG with rsvg-convert if present). Knobs: CLIENTS=10000,
# SECONDS_RUN=600, RAMP=60, OUT=docs/bench/soak, PORT_DOT=31853, PORT_DOH=31443,
# PORT_UDP=31053, PORT_AUTH=31054 (the hierarchy's). Raises the descriptor limit to 20000
# (both processes need one per client).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=${PQDNS_BIN:-$ROOT/target/release}
CLIENTS=${CLIENTS:-10000}
SECONDS_RUN=${SECONDS_RUN:-600}
RAMP=${RAMP:-60}
OUT=${OUT:-$ROOT/docs/bench/soak}
PORT_DOT=${PORT_DOT:-31853}
PORT_DOH=${PORT_DOH:-31443}
PORT_UDP=${PORT_UDP:-31053}
PORT_AUTH=${PORT_AUTH:-31054}
TARGET=${TARGET:-server}
[[ $TARGET == server || $TARGET == resolver ]] || { echo "TARGET is server or resolver" >&2; exit 1; }
for b in pqdns-server pqdns-zone pqdns-bench pqdns-resolver; do
    [[ -x $BIN/$b ]] || { echo "missing $BIN/$b: cargo build --release" >&2; exit 1; }
done
ulimit -n 20000 2>/dev/null || ulimit -n "$(ulimit -Hn)"
echo "descriptor limit $(ulimit -n)" >&2

WORK=$(mktemp -d /tmp/pqdns-soak.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do
        kill "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    rm -rf "$WORK"
}
trap cleanup EXIT

# Each listener holds every client of its transport (no eviction in the steady state).
MAX_CONNECTIONS=$((CLIENTS / 2 + 1000))

wait_for_answer() { # ADDR PORT NAME TYPE [dig flags]: until it answers, at most 20 s
    local ip=$1 port=$2 name=$3 type=$4
    shift 4
    for _ in $(seq 100); do
        dig @"$ip" -p "$port" +tries=1 +time=1 +short "$@" "$name" "$type" 2>/dev/null \
            | grep -q . && return 0
        sleep 0.2
    done
    return 1
}

# A signed zone served by pqdns-server on ADDR:PORT from directory DIR: zone.toml and the
# master file FILE with ORIGIN, signed with ECDSAP256SHA256 and NSEC3.
serve_zone() { # DIR ORIGIN FILE UDP TCP DOT DOH [extra [server] lines]
    local dir=$1 origin=$2 file=$3 udp=$4 tcp=$5 dot=$6 doh=$7 extra=${8:-}
    cat >"$dir/zone.toml" <<TOML
origin = "$origin"
default_ttl = 3600
file = "$file"
[signing]
algorithms = ["ECDSAP256SHA256"]
keys = "ksk-zsk"
denial = "nsec3"
key_directory = "keys"
[server]
udp = [$udp]
tcp = [$tcp]
dot = [$dot]
doh = [$doh]
$extra
TOML
    "$BIN/pqdns-zone" sign "$dir/zone.toml" -o "$dir/$file.signed" 2>"$dir/sign.log"
}

# DS lines of the KSK of the zone signed by serve_zone as FILE in DIR.
ds_of() { # DIR FILE
    "$BIN/pqdns-zone" ds "$1/$2.signed" 2>/dev/null
}

start_server() { # DIR: starts pqdns-server on DIR/zone.toml, appends its pid to PIDS
    (cd "$1" && exec "$BIN/pqdns-server" --zone zone.toml) >"$1/server.log" 2>&1 &
    PIDS+=("$!")
}

PIDS=()
if [[ $TARGET == server ]]; then
    mkdir "$WORK/zone"
    cp "$ROOT/zones/example.com.zone" "$WORK/zone/"
    serve_zone "$WORK/zone" example.com. example.com.zone "\"127.0.0.1:$PORT_UDP\"" "" \
        "\"127.0.0.1:$PORT_DOT\"" "\"127.0.0.1:$PORT_DOH\"" \
        "max_connections = $MAX_CONNECTIONS
max_connections_per_ip = 32
tcp_idle_timeout = 10"
    start_server "$WORK/zone"
    PID=${PIDS[0]}
    QNAMES=www.example.com.,example.com.,nothere.example.com.
    RD=()
    LABEL=server
    wait_for_answer 127.0.0.1 "$PORT_UDP" example.com. SOA \
        || { cat "$WORK/zone/server.log" >&2; exit 1; }
else
    ROOT_IP=127.0.5.2 TLD_IP=127.0.5.3 LEAF_IP=127.0.5.4
    mkdir "$WORK/root" "$WORK/tld" "$WORK/leaf"
    auth() { echo "\"$1:$PORT_AUTH\""; }
    cat >"$WORK/leaf/example.test.zone" <<ZONE
@ SOA ns hostmaster 1 7200 3600 1209600 300
@ NS ns
ns A $LEAF_IP
@ A 192.0.2.1
www A 192.0.2.2
ZONE
    serve_zone "$WORK/leaf" example.test. example.test.zone "$(auth $LEAF_IP)" "$(auth $LEAF_IP)" "" ""
    { cat <<ZONE
@ SOA ns hostmaster 1 7200 3600 1209600 300
@ NS ns
ns A $TLD_IP
example NS ns.example
ns.example A $LEAF_IP
ZONE
      ds_of "$WORK/leaf" example.test.zone; } >"$WORK/tld/test.zone"
    serve_zone "$WORK/tld" test. test.zone "$(auth $TLD_IP)" "$(auth $TLD_IP)" "" ""
    { cat <<ZONE
@ SOA a.root-servers hostmaster 1 7200 3600 1209600 300
@ NS a.root-servers
a.root-servers A $ROOT_IP
test. NS ns.test.
ns.test. A $TLD_IP
ZONE
      ds_of "$WORK/tld" test.zone; } >"$WORK/root/root.zone"
    serve_zone "$WORK/root" . root.zone "$(auth $ROOT_IP)" "$(auth $ROOT_IP)" "" ""
    ds_of "$WORK/root" root.zone >"$WORK/root.ds"
    printf '.  3600000 NS a.root-servers.\na.root-servers.  3600000 A %s\n' "$ROOT_IP" \
        >"$WORK/root.hints"
    for d in root tld leaf; do start_server "$WORK/$d"; done
    for ip in $ROOT_IP $TLD_IP $LEAF_IP; do
        wait_for_answer "$ip" "$PORT_AUTH" . SOA +norecurse >/dev/null || true
    done
    (cd "$WORK" && exec "$BIN/pqdns-resolver" --udp "127.0.0.1:$PORT_UDP" --tcp "127.0.0.1:$PORT_UDP" \
        --dot "127.0.0.1:$PORT_DOT" --doh "127.0.0.1:$PORT_DOH" --tls-dir tls \
        --root-hints root.hints --authority-port "$PORT_AUTH" --trust-anchor root.ds \
        --max-connections "$MAX_CONNECTIONS" --max-connections-per-ip 32 \
        --tcp-idle-timeout 10 --log-level warn) >"$WORK/resolver.log" 2>&1 &
    PID=$!
    PIDS+=("$PID")
    QNAMES=www.example.test.,example.test.,nothere.example.test.
    RD=(--rd)
    LABEL=resolver
    wait_for_answer 127.0.0.1 "$PORT_UDP" www.example.test. A +dnssec \
        || { cat "$WORK"/*/server.log "$WORK/resolver.log" >&2; exit 1; }
    dig @127.0.0.1 -p "$PORT_UDP" +dnssec www.example.test. A | grep -q 'flags:.* ad' \
        || { echo "the resolver does not validate www.example.test. (no AD)" >&2;
             cat "$WORK/resolver.log" >&2; exit 1; }
fi
kill -0 "$PID" || exit 1

echo "soak: $CLIENTS clients, ${SECONDS_RUN}s, $LABEL pid $PID ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
"$BIN/pqdns-bench" soak --dot "127.0.0.1:$PORT_DOT" --doh "127.0.0.1:$PORT_DOH" \
    --clients "$CLIENTS" --seconds "$SECONDS_RUN" --ramp "$RAMP" \
    --qname "$QNAMES" "${RD[@]}" \
    --pid "$LABEL=$PID" >"$WORK/soak.csv" 2>"$WORK/summary.json"
kill -0 "$PID" || { echo "the $LABEL died" >&2; cat "$WORK"/*.log "$WORK"/*/server.log >&2; exit 1; }
peak=$(awk '/VmHWM/ {print $2}' "/proc/$PID/status")
cpu=$(awk -v hz="$(getconf CLK_TCK)" '{printf "%.1f", ($14 + $15) / hz}' "/proc/$PID/stat")
load=$(cut -d' ' -f1-3 /proc/loadavg)
tail -n 1 "$WORK/summary.json" | python3 -c '
import json, sys
s = json.load(sys.stdin); s["service"] = sys.argv[7]; s["peak_rss_kib"] = int(sys.argv[1])
s["clients"] = int(sys.argv[2]); s["seconds"] = int(sys.argv[3]); s["cores"] = int(sys.argv[4])
s["cpu_seconds"] = float(sys.argv[5]); s["load_average_at_end"] = sys.argv[6]
print(json.dumps(s, indent=1))' "$peak" "$CLIENTS" "$SECONDS_RUN" "$(nproc)" "$cpu" "$load" "$LABEL" >"$OUT.json"
cp "$WORK/soak.csv" "$OUT.csv"
python3 "$ROOT/benches/soak/plot.py" "$OUT.csv" "$OUT.svg"
if command -v rsvg-convert >/dev/null; then
    rsvg-convert -o "$OUT.png" "$OUT.svg"
fi
cat "$OUT.json"
echo "wrote $OUT.csv $OUT.json $OUT.svg" >&2
