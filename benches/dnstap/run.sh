#!/usr/bin/env bash
# dnstap overhead (issue 32 must-show 4): pqdns-server's CPU per UDP query under dnsperf,
# without and with `--dnstap FILE`, same binary, same signed zone, runs alternating so both
# arms see the same machine noise.
#
#   benches/dnstap/run.sh        # from the workspace root, after `cargo build --release`
#
# Writes docs/bench/dnstap.csv (one row per run) and prints the mean CPU per query of each
# arm and their ratio. Knobs (environment): DURATION=10 seconds per run, REPS=5 runs per arm,
# CLIENTS=4 OUTSTANDING=200 (dnsperf -c / -q), PORT=30153, PQDNS_BIN=DIR (default
# target/release), KEEP=1 keeps the work directory.
#
# Needs pqdns-server, dnsperf 2.10 and dig. Every run is bounded by dnsperf -l and `timeout`;
# the trap stops the server this script started.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=${PQDNS_BIN:-$ROOT/target/release}
CSV=${CSV:-$ROOT/docs/bench/dnstap.csv}
DURATION=${DURATION:-10}
REPS=${REPS:-5}
CLIENTS=${CLIENTS:-4}
OUTSTANDING=${OUTSTANDING:-200}
PORT=${PORT:-30153}
TCK=$(getconf CLK_TCK)
for t in dnsperf dig; do
    command -v "$t" >/dev/null || { echo "missing $t (apt-get install dnsperf bind9-dnsutils)" >&2; exit 1; }
done
[[ -x $BIN/pqdns-server ]] || { echo "missing $BIN/pqdns-server: cargo build --release" >&2; exit 1; }

WORK=$(mktemp -d /tmp/pqdns-dnstap.XXXXXX)
cp "$BIN/pqdns-server" "$WORK/pqdns-server"   # pinned: a rebuild may replace target/release
PID=""
cleanup() {
    [[ -n $PID ]] && kill "$PID" 2>/dev/null || true
    [[ -n ${KEEP:-} ]] || rm -rf "$WORK"
}
trap cleanup EXIT

cat >"$WORK/zone.toml" <<ZONE
origin = "pqdns.test."
records = '''
@    SOA ns1 hostmaster 1 7200 3600 1209600 300
@    NS  ns1
ns1  A   127.0.0.1
www  A   192.0.2.80
www  AAAA 2001:db8::80
mail MX  10 www
txt  TXT "dnstap benchmark"
'''
[signing]
algorithms = ["ECDSAP256SHA256"]
key_directory = "keys"
[server]
udp = ["127.0.0.1:$PORT"]
tcp = []
dot = []
doh = []
rrl_rate = 0
amplification_limit = 0
ZONE
printf '%s\n' "www.pqdns.test A" "www.pqdns.test AAAA" "pqdns.test SOA" "mail.pqdns.test MX" \
    "txt.pqdns.test TXT" "nope.pqdns.test A" "pqdns.test DNSKEY" >"$WORK/queries"

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

start() {   # $1: extra arguments
    (cd "$WORK" && exec ./pqdns-server --zone zone.toml $1 >server.out 2>server.log) &
    PID=$!
    for _ in $(seq 1 600); do
        dig +time=1 +tries=1 -p "$PORT" @127.0.0.1 pqdns.test SOA 2>/dev/null | grep -q NOERROR && return
        sleep 0.2
    done
    echo "server did not answer; log:" >&2; cat "$WORK/server.log" >&2; exit 1
}

stop() {
    kill "$PID"
    for _ in $(seq 1 100); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
    PID=""
}

[[ -f $CSV ]] || echo "rep,dnstap,queries,qps,cpu_seconds,cpu_us_per_query,dnstap_bytes,dropped,load1" >"$CSV"
for rep in $(seq 1 "$REPS"); do
    for arm in off on; do
        rm -f "$WORK/tap.fstrm"
        extra=""
        [[ $arm == on ]] && extra="--dnstap tap.fstrm"
        start "$extra"
        dnsperf -s 127.0.0.1 -p "$PORT" -d "$WORK/queries" -l 1 -D >/dev/null 2>&1 || true  # warm-up
        t0=$(ticks "$PID")
        out=$(timeout $((DURATION + 30)) dnsperf -s 127.0.0.1 -p "$PORT" -d "$WORK/queries" \
            -l "$DURATION" -c "$CLIENTS" -q "$OUTSTANDING" -D 2>&1)
        t1=$(ticks "$PID")
        stop
        queries=$(awk '/Queries completed:/ {print $3}' <<<"$out")
        qps=$(awk '/Queries per second:/ {print $4}' <<<"$out")
        bytes=0
        [[ -f $WORK/tap.fstrm ]] && bytes=$(stat -c %s "$WORK/tap.fstrm")
        dropped=$(grep -o 'dropped=[0-9]*' "$WORK/server.log" | tail -1 | cut -d= -f2 || true)
        load=$(cut -d' ' -f1 /proc/loadavg)
        cpu=$(awk -v a="$t0" -v b="$t1" -v t="$TCK" 'BEGIN {printf "%.3f", (b - a) / t}')
        per=$(awk -v c="$cpu" -v q="$queries" 'BEGIN {printf "%.3f", c * 1e6 / q}')
        echo "$rep,$arm,$queries,$qps,$cpu,$per,$bytes,${dropped:-0},$load" | tee -a "$CSV"
    done
done
python3 - "$CSV" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
mean = {a: statistics.mean(float(r["cpu_us_per_query"]) for r in rows if r["dnstap"] == a)
        for a in ("off", "on")}
print(f"CPU per query: off {mean['off']:.2f} us, on {mean['on']:.2f} us, "
      f"ratio {mean['on'] / mean['off']:.3f} (goal <= 1.10)")
PY
