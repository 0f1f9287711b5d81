#!/usr/bin/env bash
# dnstap overhead (issue 32 must-show 4): CPU per UDP query under dnsperf, without and with
# `--dnstap FILE`, same binary, same signed zone, runs alternating (off, on, off, on, …) so
# both arms of a repetition see the same machine noise.
#
#   benches/dnstap/run.sh                   # pqdns-server answering from its zone
#   TARGET=resolver benches/dnstap/run.sh   # pqdns-resolver answering from its cache
#
# TARGET=server measures pqdns-server (AUTH_QUERY/AUTH_RESPONSE) and writes
# docs/bench/dnstap.csv; TARGET=resolver measures pqdns-resolver forwarding to a pqdns-server
# (no dnstap there) for the same names, after a warm-up that fills its cache, so the run is
# cache hits (CLIENT_QUERY/CLIENT_RESPONSE), and writes docs/bench/dnstap-resolver.csv. One
# row per run; prints each repetition's ratio (on ÷ off) and their median. Knobs
# (environment): DURATION=10 seconds per run, REPS=5 repetitions, CLIENTS=4 OUTSTANDING=200
# (dnsperf -c / -q), RATE=N queries a second (dnsperf -Q; default: as fast as it goes; a
# fixed rate below what the slower arm manages gives both arms the same load, so the same
# batching per system call), PORT=30153 (the resolver uses PORT+1), PQDNS_BIN=DIR (default
# target/release), KEEP=1 keeps the work directory.
#
# Needs pqdns-server (and pqdns-resolver), dnsperf 2.10, dig and dnssec-dsfromkey
# (bind9-utils, for the resolver's trust anchor). Every run is bounded by dnsperf -l and
# `timeout`; the trap stops the processes this script started.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=${PQDNS_BIN:-$ROOT/target/release}
TARGET=${TARGET:-server}
case $TARGET in
    server) CSV=${CSV:-$ROOT/docs/bench/dnstap.csv} ;;
    resolver) CSV=${CSV:-$ROOT/docs/bench/dnstap-resolver.csv} ;;
    *) echo "TARGET must be server or resolver" >&2; exit 1 ;;
esac
DURATION=${DURATION:-10}
REPS=${REPS:-5}
CLIENTS=${CLIENTS:-4}
OUTSTANDING=${OUTSTANDING:-200}
RATE_ARGS=()
[[ -n ${RATE:-} ]] && RATE_ARGS=(-Q "$RATE")
PORT=${PORT:-30153}
TCK=$(getconf CLK_TCK)
for t in dnsperf dig; do
    command -v "$t" >/dev/null || { echo "missing $t (apt-get install dnsperf bind9-dnsutils)" >&2; exit 1; }
done
BINARIES=(pqdns-server)
[[ $TARGET == resolver ]] && BINARIES+=(pqdns-resolver)
for b in "${BINARIES[@]}"; do
    [[ -x $BIN/$b ]] || { echo "missing $BIN/$b: cargo build --release" >&2; exit 1; }
done

WORK=$(mktemp -d /tmp/pqdns-dnstap.XXXXXX)
# Pinned: a rebuild may replace target/release.
for b in "${BINARIES[@]}"; do cp "$BIN/$b" "$WORK/"; done
PID=""
AUTH=""
cleanup() {
    for p in $PID $AUTH; do kill "$p" 2>/dev/null || true; done
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

wait_for() {   # $1: port, $2: log
    for _ in $(seq 1 600); do
        dig +time=1 +tries=1 -p "$1" @127.0.0.1 pqdns.test SOA 2>/dev/null | grep -q NOERROR && return
        sleep 0.2
    done
    echo "no answer on port $1; log:" >&2; cat "$2" >&2; exit 1
}

QPORT=$PORT   # where dnsperf sends its queries
if [[ $TARGET == resolver ]]; then
    # The authority, started once; the resolver's trust anchor is its zone's DS.
    (cd "$WORK" && exec ./pqdns-server --zone zone.toml >auth.out 2>auth.log) &
    AUTH=$!
    wait_for "$PORT" "$WORK/auth.log"
    dig +time=2 +tries=1 -p "$PORT" @127.0.0.1 pqdns.test DNSKEY +noall +answer |
        dnssec-dsfromkey -2 -f - pqdns.test >"$WORK/anchor.ds"
    QPORT=$((PORT + 1))
fi

start() {   # $1: extra arguments
    if [[ $TARGET == server ]]; then
        (cd "$WORK" && exec ./pqdns-server --zone zone.toml $1 >server.out 2>server.log) &
    else
        (cd "$WORK" && exec ./pqdns-resolver --forward "127.0.0.1:$PORT" \
            --trust-anchor anchor.ds --udp "127.0.0.1:$QPORT" --tcp "127.0.0.1:$QPORT" \
            --dot 127.0.0.1:0 --doh 127.0.0.1:0 --doq 127.0.0.1:0 --tls-dir tls \
            --rrl-rate 0 --amplification-limit 0 $1 >server.out 2>server.log) &
    fi
    PID=$!
    wait_for "$QPORT" "$WORK/server.log"
}

stop() {
    kill "$PID"
    for _ in $(seq 1 100); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
    PID=""
}

echo "rep,dnstap,queries,qps,cpu_seconds,cpu_us_per_query,dnstap_bytes,dropped,load1" >"$CSV"
for rep in $(seq 1 "$REPS"); do
    for arm in off on; do
        rm -f "$WORK/tap.fstrm"
        extra=""
        [[ $arm == on ]] && extra="--dnstap tap.fstrm"
        start "$extra"
        dnsperf -s 127.0.0.1 -p "$QPORT" -d "$WORK/queries" -l 1 -D >/dev/null 2>&1 || true  # warm-up
        t0=$(ticks "$PID")
        out=$(timeout $((DURATION + 30)) dnsperf -s 127.0.0.1 -p "$QPORT" -d "$WORK/queries" \
            -l "$DURATION" -c "$CLIENTS" -q "$OUTSTANDING" "${RATE_ARGS[@]}" -D 2>&1)
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
per = {(r["rep"], r["dnstap"]): float(r["cpu_us_per_query"]) for r in rows}
ratios = []
for rep in sorted({r["rep"] for r in rows}, key=int):
    ratio = per[(rep, "on")] / per[(rep, "off")]
    ratios.append(ratio)
    print(f"rep {rep}: off {per[(rep, 'off')]:.2f} us, on {per[(rep, 'on')]:.2f} us, ratio {ratio:.3f}")
mean = {a: statistics.mean(v for (_, arm), v in per.items() if arm == a) for a in ("off", "on")}
print(f"CPU per query: mean off {mean['off']:.2f} us, on {mean['on']:.2f} us; "
      f"median ratio {statistics.median(ratios):.3f} (goal <= 1.10)")
PY
