#!/usr/bin/env bash
# AF_XDP benchmark (issue 33): pqdns-server's XDP path and socket path, Knot DNS's XDP mode
# and socket path, under the same load generator (kxdpgun, Knot's AF_XDP query generator),
# on one veth pair between two network namespaces this script makes.
#
#   benches/xdp/run.sh      # as root, from the workspace root, after
#                           # cargo build --release -p pqdns-server --features xdp
#
# Writes docs/bench/xdp.csv (one row per run) and prints the rows and the headline
#   pqdns XDP / pqdns sockets: N.NNx   (queries answered per CPU-second)
# Knobs (environment): DURATION=5 seconds per run, REPS=3, QPS=1000000 kxdpgun's target rate,
#   PQDNS_BIN=DIR (default target/release), KEEP=1 keeps the work directory.
#
# CPU: a run's cost is the server's own CPU time (utime+stime of its threads, from
# /proc/PID/stat) plus the machine's softirq time (/proc/stat) during the run: on veth the
# XDP program, the copy into the AF_XDP socket and the kernel's UDP receive path run in
# softirq context, mostly charged to no process. Other processes on the machine add to the
# softirq column only through their own network traffic.
#
# Zone: 1000 hosts, signed with ECDSA P-256 by each server at load (pqdns-server: its
# [signing]; knotd: dnssec-signing with its default ECDSAP256SHA256 policy); queries: host A
# with DO=1 (kxdpgun flag D), every answer a positive signed one.
# Traffic stays inside the two namespaces (192.0.2.0/24, documentation addresses); every
# run is bounded by kxdpgun -t and `timeout`; the trap stops what this script started and
# deletes the namespaces.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=${PQDNS_BIN:-$ROOT/target/release}
OUT=$ROOT/docs/bench
CSV=${CSV:-$OUT/xdp.csv}
DURATION=${DURATION:-5}
REPS=${REPS:-3}
QPS=${QPS:-1000000}
TCK=$(getconf CLK_TCK)
NS_S=pqxb-s NS_C=pqxb-c IF_S=pqxbs IF_C=pqxbc
S4=192.0.2.1 C4=192.0.2.2
XDP_PORT=5300 SOCK_PORT=5301

[[ $(id -u) == 0 ]] || { echo "run as root (network namespaces, XDP)" >&2; exit 1; }
[[ -x $BIN/pqdns-server ]] || { echo "missing $BIN/pqdns-server" >&2; exit 1; }
for t in kxdpgun knotd knotc ip python3; do
    command -v "$t" >/dev/null || { echo "missing $t (apt-get install knot knot-dnsutils)" >&2; exit 1; }
done

WORK=$(mktemp -d /tmp/pqdns-xdp.XXXXXX)
SERVER_PID=""
cleanup() {
    [[ -n $SERVER_PID ]] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null || true
    ip netns del $NS_S 2>/dev/null || true
    ip netns del $NS_C 2>/dev/null || true
    [[ ${KEEP:-0} == 1 ]] && echo "work directory: $WORK" >&2 || rm -rf "$WORK"
}
trap cleanup EXIT
log() { echo "[$(date -u +%H:%M:%S)] $*" >&2; }

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "kernel: $(uname -r)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') x $(nproc)"
    echo "knotd: $(knotd --version)"
    echo "kxdpgun: $(kxdpgun --version 2>&1 | head -1)"
    echo "pqdns-server: $($BIN/pqdns-server --version)"
    echo "git: $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)"
    echo "loadavg: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$WORK/machine.txt" >&2

# ---------------------------------------------------------------- namespaces and veth
ip netns del $NS_S 2>/dev/null || true
ip netns del $NS_C 2>/dev/null || true
ip netns add $NS_S
ip netns add $NS_C
ip link add $IF_S netns $NS_S type veth peer name $IF_C netns $NS_C
ip -n $NS_S addr add $S4/24 dev $IF_S
ip -n $NS_C addr add $C4/24 dev $IF_C
for n in $NS_S $NS_C; do ip -n $n link set lo up; done
ip -n $NS_S link set $IF_S up
ip -n $NS_C link set $IF_C up
MAC_S=$(ip -n $NS_S -br link show $IF_S | awk '{print $3}')
MAC_C=$(ip -n $NS_C -br link show $IF_C | awk '{print $3}')
# Static neighbours: kxdpgun reads the server's MAC from the neighbour table.
ip -n $NS_C neigh replace $S4 lladdr "$MAC_S" dev $IF_C nud permanent
ip -n $NS_S neigh replace $C4 lladdr "$MAC_C" dev $IF_S nud permanent

# ---------------------------------------------------------------- zone and queries
awk 'BEGIN { print "@ 3600 SOA ns1 hostmaster 1 7200 3600 1209600 300";
             print "@ 3600 NS ns1"; print "ns1 3600 A 192.0.2.53";
             for (i = 0; i < 1000; i++) printf "host%d 3600 A 198.51.100.%d\n", i, i % 250 }' \
    >"$WORK/bench.zone"
awk 'BEGIN { s = 12345; for (i = 0; i < 10000; i++) {
        s = (s * 1103515245 + 12345) % 2147483648; printf "host%d.bench. A D\n", s % 1000 } }' \
    >"$WORK/queries.txt"

mkdir -p "$WORK/pqdns" "$WORK/knot"
cp "$WORK/bench.zone" "$WORK/pqdns/bench.zone"
cat >"$WORK/pqdns/zone.toml" <<TOML
origin = "bench."
file = "bench.zone"
[signing]
algorithms = ["ECDSAP256SHA256"]
key_directory = "keys"
[server]
udp = ["$S4:$SOCK_PORT"]
tcp = ["$S4:$SOCK_PORT"]
dot = []
doh = []
rrl_rate = 0
amplification_limit = 0
TOML
cp "$WORK/bench.zone" "$WORK/knot/bench.zone"
cat >"$WORK/knot/knot.conf" <<KNOT
server:
    rundir: "$WORK/knot"
    listen: $S4@$SOCK_PORT
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
xdp:
    listen: $IF_S@$XDP_PORT
    udp: on
database:
    storage: "$WORK/knot"
template:
  - id: default
    storage: "$WORK/knot"
    file: "%s.zone"
    zonefile-sync: -1
    zonefile-load: whole
    journal-content: none
    dnssec-signing: on
zone:
  - domain: bench.
KNOT

# ---------------------------------------------------------------- helpers
cpu_ticks() { # pid: utime+stime of the process (all threads)
    local f
    read -ra f <"/proc/$1/stat"
    echo $((f[13] + f[14]))
}
softirq_ticks() { awk '/^cpu /{ print $8 }' /proc/stat; }

wait_answers() { # port: until the server answers (through whichever path serves the port)
    local i
    for i in $(seq 100); do
        ip netns exec $NS_C kxdpgun -t 1 -Q 100 -p "$1" -i "$WORK/queries.txt" $S4 2>/dev/null \
            | grep -Eq 'total replies: *[1-9]' && return 0
        sleep 0.2
    done
    echo "nothing answers on port $1" >&2
    return 1
}

echo "server,path,rep,duration_s,queries_sent,replies,replies_per_s,server_cpu_s,softirq_cpu_s,queries_per_cpu_s,loadavg1" >"$CSV.tmp"
run() { # server path port rep
    local c0 s0 c1 s1 out
    c0=$(cpu_ticks "$SERVER_PID") s0=$(softirq_ticks)
    out=$(timeout $((DURATION + 20)) ip netns exec $NS_C kxdpgun -t "$DURATION" -Q "$QPS" \
        -p "$3" -i "$WORK/queries.txt" $S4 2>&1) || { echo "$out" >&2; return 1; }
    c1=$(cpu_ticks "$SERVER_PID") s1=$(softirq_ticks)
    echo "$out" >"$WORK/$1-$2-$4.kxdpgun"
    awk -v server="$1" -v path="$2" -v rep="$4" -v d="$DURATION" -v tck="$TCK" \
        -v cpu=$((c1 - c0)) -v sirq=$((s1 - s0)) -v load="$(cut -d' ' -f1 /proc/loadavg)" '
        /total queries:/ { sent = $3 }
        /total replies:/ { replies = $3 }
        END { c = cpu / tck; s = sirq / tck;
              printf "%s,%s,%s,%s,%s,%s,%.0f,%.2f,%.2f,%.0f,%s\n", server, path, rep, d, sent,
                  replies, replies / d, c, s, (c + s > 0 ? replies / (c + s) : 0), load }' \
        <<<"$out" | tee -a "$CSV.tmp"
}

# ---------------------------------------------------------------- runs
log "pqdns-server: AF_XDP on $IF_S@$XDP_PORT, sockets on $S4:$SOCK_PORT"
(cd "$WORK/pqdns" && exec ip netns exec $NS_S "$BIN/pqdns-server" --zone zone.toml \
    --xdp "$IF_S@$XDP_PORT") >"$WORK/pqdns/stdout.log" 2>"$WORK/pqdns/server.log" &
SERVER_PID=$!
wait_answers $XDP_PORT && wait_answers $SOCK_PORT || { cat "$WORK/pqdns/server.log" >&2; exit 1; }
for rep in $(seq "$REPS"); do
    run pqdns xdp $XDP_PORT "$rep"
    run pqdns sockets $SOCK_PORT "$rep"
done
kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""

log "knotd: XDP on $IF_S@$XDP_PORT, sockets on $S4@$SOCK_PORT"
ip netns exec $NS_S knotd -c "$WORK/knot/knot.conf" >"$WORK/knot/server.log" 2>&1 &
SERVER_PID=$!
wait_answers $XDP_PORT && wait_answers $SOCK_PORT || { cat "$WORK/knot/server.log" >&2; exit 1; }
for rep in $(seq "$REPS"); do
    run knot xdp $XDP_PORT "$rep"
    run knot sockets $SOCK_PORT "$rep"
done
kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""

mv "$CSV.tmp" "$CSV"
cp "$WORK/machine.txt" "$OUT/xdp-machine.txt"
python3 - "$CSV" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
med = {}
for key in {(r["server"], r["path"]) for r in rows}:
    sel = [r for r in rows if (r["server"], r["path"]) == key]
    med[key] = (statistics.median(float(r["replies_per_s"]) for r in sel),
                statistics.median(float(r["queries_per_cpu_s"]) for r in sel))
print("| server | path | replies/s (median) | queries per CPU-second (median) |")
print("|---|---|---:|---:|")
for key in sorted(med):
    print(f"| {key[0]} | {key[1]} | {med[key][0]:,.0f} | {med[key][1]:,.0f} |")
x, s = med[("pqdns", "xdp")][1], med[("pqdns", "sockets")][1]
print(f"\npqdns XDP / pqdns sockets: {x / s:.2f}x")
k = med[("knot", "xdp")][1]
print(f"pqdns XDP / Knot XDP: {x / k:.2f}x")
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit(0)
keys = [("pqdns", "sockets"), ("pqdns", "xdp"), ("knot", "sockets"), ("knot", "xdp")]
fig, ax = plt.subplots(figsize=(6, 3.2))
ax.bar([f"{s}\n{p}" for s, p in keys], [med[k][1] / 1000 for k in keys],
       color=["#8aa", "#27a", "#a98", "#a52"])
ax.set_ylabel("k queries per CPU-second")
ax.set_title("kxdpgun on one veth pair, ECDSA zone, DO=1 (median)")
fig.tight_layout()
fig.savefig(sys.argv[1].rsplit(".", 1)[0] + ".png", dpi=100)
PY
