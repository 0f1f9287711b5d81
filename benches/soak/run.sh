#!/usr/bin/env bash
# Soak (issue 31 must-show 3): CLIENTS DoT and DoH clients for SECONDS against pqdns-server
# serving an ECDSA-signed zones/example.com.zone, with the server's RSS and open descriptors
# sampled every second. `pqdns-bench soak` runs the clients: half steady (a query every 2-6 s
# on one connection), three in ten idle (ask once, stay until the server's 10 s idle timeout
# closes the connection, come back 10-30 s later), two in ten reconnecting (1-3 queries,
# close, resumed TLS handshake 20-60 s later); 25 clients per source /24 on loopback
# (127.1.0.0 and up), starts spread over RAMP seconds.
#
#   benches/soak/run.sh               # from the workspace root, after `cargo build --release`
#   CLIENTS=500 SECONDS_RUN=15 benches/soak/run.sh   # a smoke run
#
# Writes $OUT.csv (a row per second: answers, errors, timeouts, handshakes, client
# connections open, server RSS KiB and descriptors), $OUT.json (summary), $OUT.svg and
# $OUT.png (benches/soak/plot.py; PNG with rsvg-convert if present). Knobs: CLIENTS=10000,
# SECONDS_RUN=600, RAMP=60, OUT=docs/bench/soak, PORT_DOT=31853, PORT_DOH=31443,
# PORT_UDP=31053. Raises the descriptor limit to 20000 (both processes need one per client).
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
for b in pqdns-server pqdns-zone pqdns-bench; do
    [[ -x $BIN/$b ]] || { echo "missing $BIN/$b: cargo build --release" >&2; exit 1; }
done
ulimit -n 20000 2>/dev/null || ulimit -n "$(ulimit -Hn)"
echo "descriptor limit $(ulimit -n)" >&2

WORK=$(mktemp -d /tmp/pqdns-soak.XXXXXX)
PID=""
cleanup() {
    if [[ -n $PID ]]; then
        kill "$PID" 2>/dev/null || true
        wait "$PID" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

cp "$ROOT/zones/example.com.zone" "$WORK/"
# Each listener holds every client of its transport (no eviction in the steady state).
cat >"$WORK/zone.toml" <<TOML
origin = "example.com."
default_ttl = 3600
file = "example.com.zone"
[signing]
algorithms = ["ECDSAP256SHA256"]
keys = "ksk-zsk"
denial = "nsec3"
key_directory = "keys"
[server]
udp = ["127.0.0.1:$PORT_UDP"]
tcp = []
dot = ["127.0.0.1:$PORT_DOT"]
doh = ["127.0.0.1:$PORT_DOH"]
max_connections = $((CLIENTS / 2 + 1000))
max_connections_per_ip = 32
tcp_idle_timeout = 10
TOML
"$BIN/pqdns-zone" sign "$WORK/zone.toml" -o "$WORK/example.com.zone.signed" 2>"$WORK/sign.log"
(cd "$WORK" && exec "$BIN/pqdns-server" --zone zone.toml) >"$WORK/server.log" 2>&1 &
PID=$!
for _ in $(seq 100); do
    dig @127.0.0.1 -p "$PORT_UDP" +tries=1 +time=1 +short example.com. SOA 2>/dev/null \
        | grep -q . && break
    sleep 0.2
done
kill -0 "$PID" || { cat "$WORK/server.log" >&2; exit 1; }

echo "soak: $CLIENTS clients, ${SECONDS_RUN}s, server pid $PID ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
"$BIN/pqdns-bench" soak --dot "127.0.0.1:$PORT_DOT" --doh "127.0.0.1:$PORT_DOH" \
    --clients "$CLIENTS" --seconds "$SECONDS_RUN" --ramp "$RAMP" \
    --qname www.example.com.,example.com.,nothere.example.com. \
    --pid "server=$PID" >"$WORK/soak.csv" 2>"$WORK/summary.json"
kill -0 "$PID" || { echo "the server died" >&2; cat "$WORK/server.log" >&2; exit 1; }
peak=$(awk '/VmHWM/ {print $2}' "/proc/$PID/status")
cpu=$(awk -v hz="$(getconf CLK_TCK)" '{printf "%.1f", ($14 + $15) / hz}' "/proc/$PID/stat")
load=$(cut -d' ' -f1-3 /proc/loadavg)
tail -n 1 "$WORK/summary.json" | python3 -c '
import json, sys
s = json.load(sys.stdin); s["server_peak_rss_kib"] = int(sys.argv[1])
s["clients"] = int(sys.argv[2]); s["seconds"] = int(sys.argv[3]); s["cores"] = int(sys.argv[4])
s["server_cpu_seconds"] = float(sys.argv[5]); s["load_average_at_end"] = sys.argv[6]
print(json.dumps(s, indent=1))' "$peak" "$CLIENTS" "$SECONDS_RUN" "$(nproc)" "$cpu" "$load" >"$OUT.json"
cp "$WORK/soak.csv" "$OUT.csv"
python3 "$ROOT/benches/soak/plot.py" "$OUT.csv" "$OUT.svg"
if command -v rsvg-convert >/dev/null; then
    rsvg-convert -o "$OUT.png" "$OUT.svg"
fi
cat "$OUT.json"
echo "wrote $OUT.csv $OUT.json $OUT.svg" >&2
