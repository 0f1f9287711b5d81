#!/usr/bin/env bash
# AF_XDP benchmark (issue 33): pqdns-server's XDP path and socket path, Knot DNS's XDP mode
# and socket path, and NSD's sockets, under the same load generator (kxdpgun, Knot's AF_XDP
# query generator), on one veth pair between two network namespaces this script makes.
#
#   benches/xdp/run.sh      # as root, from the workspace root, after
#                           # cargo build --release -p pqdns-server --features xdp
#                           # cargo build --release -p pqdns-zone
#
# Writes docs/bench/xdp.csv (one row per run), docs/bench/xdp.png and
# docs/bench/xdp-machine.txt, and prints a markdown table and the headline
#   pqdns XDP / pqdns sockets: N.NNx   (queries answered per CPU-second, medians)
# Knobs (environment): DURATION=5 seconds per run, REPS=5, QPS=20000 kxdpgun's target rate
#   (keep it below every server's capacity on the machine: above it, queries are lost in
#   the server's RX ring or socket buffer and the CPU they cost buys no answer),
#   PQDNS_BIN=DIR with pqdns-server (built with the feature xdp) and pqdns-zone (default
#   target/release), CSV=FILE, KEEP=1 keeps the work directory.
#
# Each repetition runs the five arms in turn (pqdns XDP and sockets, Knot XDP and sockets,
# NSD sockets), each server started afresh, so a change in the machine's load spreads over
# all arms instead of landing on one.
#
# CPU, two measures per run:
# - server: the server's own CPU time (utime+stime of its threads and child processes, from
#   /proc/PID/stat) plus the machine's softirq time (/proc/stat) during the run.
# - server + kernel: that plus kxdpgun's system time. On veth a frame is processed by the
#   receiving side's kernel path (XDP program and copy into the AF_XDP socket, or the UDP
#   stack up to the socket's queue) inside the sender's syscall when the softirq runs there,
#   so the server's receive path is mostly charged to kxdpgun's system time and kxdpgun's
#   receive path to the server's. kxdpgun's own sending is in it too, the same per query for
#   every arm. This is the cost of an exchange but for kxdpgun's user space.
# The softirq column also holds other processes' network traffic (little: the other jobs
# on a shared machine compile).
#
# Lost queries: kxdpgun's sent minus replies, and where they went: the veth ends' RX/TX
# drop counters, the server namespace's UDP receive-buffer errors (socket arms), and
# pqdns-server's own AF_XDP counters (RX ring full, fill ring empty).
#
# Zone: 1000 hosts, signed with ECDSA P-256 (pqdns-server at load; NSD serves the same zone
# signed by pqdns-zone with the same keys; knotd with dnssec-signing and its default
# ECDSAP256SHA256 policy); queries: host A with DO=1 (kxdpgun flag D), every answer a
# positive signed one.
# Traffic stays inside the two namespaces (192.0.2.0/24, documentation addresses); every
# run is bounded by kxdpgun -t and `timeout`; the trap stops what this script started and
# deletes the namespaces.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=${PQDNS_BIN:-$ROOT/target/release}
OUT=$ROOT/docs/bench
CSV=${CSV:-$OUT/xdp.csv}
DURATION=${DURATION:-5}
REPS=${REPS:-5}
QPS=${QPS:-20000}
TCK=$(getconf CLK_TCK)
NS_S=pqxb-s NS_C=pqxb-c IF_S=pqxbs IF_C=pqxbc
S4=192.0.2.1 C4=192.0.2.2
XDP_PORT=5300 SOCK_PORT=5301
METRICS=127.0.0.1:9153

[[ $(id -u) == 0 ]] || { echo "run as root (network namespaces, XDP)" >&2; exit 1; }
for b in pqdns-server pqdns-zone; do
    [[ -x $BIN/$b ]] || { echo "missing $BIN/$b" >&2; exit 1; }
done
for t in kxdpgun knotd nsd ip curl python3; do
    command -v "$t" >/dev/null || { echo "missing $t (apt-get install knot knot-dnsutils nsd curl)" >&2; exit 1; }
done

WORK=$(mktemp -d /tmp/pqdns-xdp.XXXXXX)
# Pin the binaries: another build may replace target/release mid-run.
cp "$BIN/pqdns-server" "$BIN/pqdns-zone" "$WORK/"
SRC_BIN=$BIN
BIN=$WORK
SERVER_PID=""
stop_server() {
    [[ -n $SERVER_PID ]] || return 0
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
}
cleanup() {
    stop_server
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
    echo "nsd: $(nsd -v 2>&1 | head -1)"
    echo "kxdpgun: $(kxdpgun --version 2>&1 | head -1)"
    echo "pqdns-server: $($BIN/pqdns-server --version), $SRC_BIN/pqdns-server sha256 $(sha256sum "$BIN/pqdns-server" | cut -c1-16)"
    echo "git: $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)"
    echo "kxdpgun rate: $QPS queries/s for ${DURATION}s per run, $REPS repetitions"
    echo "loadavg at start: $(cut -d' ' -f1-3 /proc/loadavg)"
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
echo "veth queues: $IF_S $(ip netns exec $NS_S ls /sys/class/net/$IF_S/queues | tr '\n' ' ')" \
    | tee -a "$WORK/machine.txt" >&2

# ---------------------------------------------------------------- zone and queries
awk 'BEGIN { print "@ 3600 SOA ns1 hostmaster 1 7200 3600 1209600 300";
             print "@ 3600 NS ns1"; print "ns1 3600 A 192.0.2.53";
             for (i = 0; i < 1000; i++) printf "host%d 3600 A 198.51.100.%d\n", i, i % 250 }' \
    >"$WORK/bench.zone"
awk 'BEGIN { s = 12345; for (i = 0; i < 10000; i++) {
        s = (s * 1103515245 + 12345) % 2147483648; printf "host%d.bench. A D\n", s % 1000 } }' \
    >"$WORK/queries.txt"

mkdir -p "$WORK/pqdns" "$WORK/knot" "$WORK/nsd"
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
# The keys pqdns-zone makes here sign NSD's file and, at load, pqdns-server's zone.
"$BIN/pqdns-zone" sign "$WORK/pqdns/zone.toml" -o "$WORK/nsd/bench.zone.signed" \
    2>"$WORK/nsd/sign.log" || { cat "$WORK/nsd/sign.log" >&2; exit 1; }
cat >"$WORK/nsd/nsd.conf" <<NSD
server:
    ip-address: $S4@$SOCK_PORT
    server-count: 1
    username: ""
    chroot: ""
    zonesdir: "$WORK/nsd"
    database: ""
    zonelistfile: "$WORK/nsd/zone.list"
    xfrdfile: "$WORK/nsd/xfrd.state"
    xfrdir: "$WORK/nsd"
    pidfile: "$WORK/nsd/nsd.pid"
    logfile: "$WORK/nsd/nsd.log"
    # Debian's NSD rate-limits by default and drops load-generator traffic.
    rrl-ratelimit: 0
    rrl-whitelist-ratelimit: 0
    ipv4-edns-size: 1232
    minimal-responses: yes
remote-control:
    control-enable: no
zone:
    name: bench.
    zonefile: "bench.zone.signed"
NSD
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
descendants() { # pid: every descendant (NSD forks its server processes)
    local c
    for c in $(pgrep -P "$1" || true); do
        echo "$c"
        descendants "$c"
    done
}
cpu_ticks() { # pid: utime+stime of the process and its descendants (all threads)
    local p sum=0 rest
    local -a f
    for p in $1 $(descendants "$1"); do
        rest=$(<"/proc/$p/stat") || continue
        rest=${rest##*) }
        read -ra f <<<"$rest"
        sum=$((sum + f[11] + f[12]))
    done
    echo $sum
}
softirq_ticks() { awk '/^cpu /{ print $8 }' /proc/stat; }
stat_of() { # namespace interface counter
    ip netns exec "$1" cat "/sys/class/net/$2/statistics/$3"
}
# Drop counters where a query or an answer can be lost, space-separated: server veth RX and
# TX dropped, client veth RX and TX dropped, UDP receive-buffer errors in the server
# namespace, pqdns-server's AF_XDP RX-ring-full and fill-ring-empty drops and its frames
# redirected but not answered (0 for the other servers).
drops() {
    local rcvbuf xdp_rx=0 xdp_fill=0 xdp_redirected=0 xdp_answered=0 m
    rcvbuf=$(ip netns exec $NS_S nstat -az 2>/dev/null \
        | awk '$1 == "UdpRcvbufErrors" || $1 == "Udp6RcvbufErrors" { n += $2 } END { print n + 0 }')
    if [[ $1 == pqdns ]]; then
        m=$(ip netns exec $NS_S curl -s "http://$METRICS/metrics" || true)
        xdp_rx=$(awk -F'} ' '/^pqdns_xdp_frames_total.*outcome="rx_ring_full"/ { print $2 }' <<<"$m")
        xdp_fill=$(awk -F'} ' '/^pqdns_xdp_frames_total.*outcome="fill_ring_empty"/ { print $2 }' <<<"$m")
        xdp_redirected=$(awk -F'} ' '/^pqdns_xdp_frames_total.*outcome="redirected"/ { print $2 }' <<<"$m")
        xdp_answered=$(awk -F'} ' '/^pqdns_xdp_frames_total.*outcome="answered"/ { print $2 }' <<<"$m")
    fi
    echo "$(stat_of $NS_S $IF_S rx_dropped) $(stat_of $NS_S $IF_S tx_dropped)" \
        "$(stat_of $NS_C $IF_C rx_dropped) $(stat_of $NS_C $IF_C tx_dropped)" \
        "$rcvbuf ${xdp_rx:-0} ${xdp_fill:-0} $((${xdp_redirected:-0} - ${xdp_answered:-0}))"
}

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

echo "server,path,rep,duration_s,qps_target,queries_sent,replies,lost_pct,replies_per_s,server_cpu_s,softirq_cpu_s,queries_per_cpu_s,cpu_us_per_query,client_user_s,client_sys_s,kernel_queries_per_cpu_s,kernel_cpu_us_per_query,server_veth_rx_dropped,server_veth_tx_dropped,client_veth_rx_dropped,client_veth_tx_dropped,udp_rcvbuf_errors,xdp_rx_ring_full,xdp_fill_ring_empty,xdp_unanswered,loadavg1" >"$CSV.tmp"
run() { # server path port rep
    local c0 s0 c1 s1 out d0 d1
    d0=$(drops "$1")
    c0=$(cpu_ticks "$SERVER_PID") s0=$(softirq_ticks)
    # The shell reports kxdpgun's CPU time (its children's utime and stime) when it is done.
    out=$(timeout $((DURATION + 20)) ip netns exec $NS_C bash -c \
        'kxdpgun "$@"; rc=$?; read -ra f </proc/$$/stat; echo "client ticks: ${f[15]} ${f[16]}"; exit $rc' \
        kxdpgun -t "$DURATION" -Q "$QPS" -p "$3" -i "$WORK/queries.txt" $S4 2>&1) \
        || { echo "$out" >&2; return 1; }
    c1=$(cpu_ticks "$SERVER_PID") s1=$(softirq_ticks)
    d1=$(drops "$1")
    echo "$out" >"$WORK/$1-$2-$4.kxdpgun"
    awk -v server="$1" -v path="$2" -v rep="$4" -v d="$DURATION" -v q="$QPS" -v tck="$TCK" \
        -v cpu=$((c1 - c0)) -v sirq=$((s1 - s0)) -v d0="$d0" -v d1="$d1" \
        -v load="$(cut -d' ' -f1 /proc/loadavg)" '
        /total queries:/ { sent = $3 }
        /total replies:/ { replies = $3 }
        /^client ticks:/ { cu = $3 / tck; cs = $4 / tck }
        END { c = cpu / tck; s = sirq / tck; k = c + s + cs; n0 = split(d0, a, " ");
              split(d1, b, " ");
              drops = ""; for (i = 1; i <= n0; i++) drops = drops "," (b[i] - a[i]);
              printf "%s,%s,%s,%s,%s,%s,%s,%.1f,%.0f,%.2f,%.2f,%.0f,%.2f,%.2f,%.2f,%.0f,%.2f%s,%s\n",
                  server, path, rep, d, q, sent, replies,
                  (sent > 0 ? 100 * (sent - replies) / sent : 0), replies / d, c, s,
                  (c + s > 0 ? replies / (c + s) : 0), (replies > 0 ? 1e6 * (c + s) / replies : 0),
                  cu, cs, (k > 0 ? replies / k : 0), (replies > 0 ? 1e6 * k / replies : 0),
                  drops, load }' \
        <<<"$out" | tee -a "$CSV.tmp"
}

start_pqdns() {
    (cd "$WORK/pqdns" && exec ip netns exec $NS_S "$BIN/pqdns-server" --zone zone.toml \
        --xdp "$IF_S@$XDP_PORT" --metrics $METRICS) >"$WORK/pqdns/stdout.log" 2>"$WORK/pqdns/server.log" &
    SERVER_PID=$!
    wait_answers $XDP_PORT && wait_answers $SOCK_PORT || { cat "$WORK/pqdns/server.log" >&2; exit 1; }
}
start_knot() {
    ip netns exec $NS_S knotd -c "$WORK/knot/knot.conf" >"$WORK/knot/server.log" 2>&1 &
    SERVER_PID=$!
    wait_answers $XDP_PORT && wait_answers $SOCK_PORT || { cat "$WORK/knot/server.log" >&2; exit 1; }
}
start_nsd() {
    ip netns exec $NS_S nsd -d -c "$WORK/nsd/nsd.conf" >"$WORK/nsd/stdout.log" 2>&1 &
    SERVER_PID=$!
    wait_answers $SOCK_PORT || { cat "$WORK/nsd/nsd.log" >&2; exit 1; }
}

# ---------------------------------------------------------------- runs
for rep in $(seq "$REPS"); do
    log "repetition $rep of $REPS (loadavg $(cut -d' ' -f1-3 /proc/loadavg))"
    start_pqdns
    run pqdns xdp $XDP_PORT "$rep"
    run pqdns sockets $SOCK_PORT "$rep"
    stop_server
    start_knot
    run knot xdp $XDP_PORT "$rep"
    run knot sockets $SOCK_PORT "$rep"
    stop_server
    # knotd leaves its XDP program attached when it stops (to reuse it on restart).
    ip -n $NS_S link set $IF_S xdp off
    start_nsd
    run nsd sockets $SOCK_PORT "$rep"
    stop_server
done
echo "loadavg at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$WORK/machine.txt"

mv "$CSV.tmp" "$CSV"
cp "$WORK/machine.txt" "$OUT/xdp-machine.txt"
python3 "$ROOT/benches/xdp/summary.py" "$CSV" "${CSV%.csv}.png"
