#!/usr/bin/env bash
# Serving benchmark: pqdns-server against NSD under dnsperf, plus DoT handshake rates.
#
#   benches/serving/run.sh            # from the workspace root, after `cargo build --release`
#
# Writes docs/bench/serving.csv (one row per run) and docs/bench/serving.png, and prints
# markdown summary tables (benches/serving/plot.py). Knobs (environment):
#   DURATION=10   seconds per dnsperf / handshake run      REPS=3   repetitions per cell
#   CLIENTS=4 OUTSTANDING=500   dnsperf -c / -q              HS_CONC=8   tlsload handshake workers
#   KEEP=1        keep the work directory (zones, configs, logs) for inspection
#   PQ_PORT PQ_DOT NSD_PORT NSD_DOT   ports (defaults below), for two runs side by side
#   PQDNS_BIN=DIR directory with pqdns-server, pqdns-zone, pqdns-bench (default target/release)
#   PQ_RRL=N      pqdns-server's --rrl-rate (default 0: off)
#   PQ_AMP=N      pqdns-server's --amplification-limit (default 0: off; dnsperf sends no cookies)
#   ZONES="classical pqc"   which signed zones to serve
#
# Needs: target/release/{pqdns-server,pqdns-zone,pqdns-bench}, nsd 4.6, dnsperf 2.10,
# openssl, dig, python3 with matplotlib; Go >= 1.25 for the hybrid handshake client
# (benches/serving/tlsload; the handshake comparison is skipped without it).
#
# All traffic goes to 127.0.0.1, ports 30053/30853 (pqdns-server) and 30054/30854 (NSD).
# Every run is bounded by dnsperf -l / the client's -d and a `timeout`; the trap below stops
# every process this script started.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=${PQDNS_BIN:-$ROOT/target/release}   # another build's binaries, for A/B runs
OUT=$ROOT/docs/bench
CSV=${CSV:-$OUT/serving.csv}
DURATION=${DURATION:-10}
REPS=${REPS:-3}
CLIENTS=${CLIENTS:-4}
OUTSTANDING=${OUTSTANDING:-500}
HS_CONC=${HS_CONC:-8}
MODES=${MODES:-udp tcp dot}     # dnsperf transports to run
HANDSHAKES=${HANDSHAKES:-1}     # 0 skips the DoT handshake runs
PQ_PORT=${PQ_PORT:-30053} PQ_DOT=${PQ_DOT:-30853}   # override when another run uses these
NSD_PORT=${NSD_PORT:-30054} NSD_DOT=${NSD_DOT:-30854}
TCK=$(getconf CLK_TCK)

for b in pqdns-server pqdns-zone pqdns-bench; do
    [[ -x $BIN/$b ]] || { echo "missing $BIN/$b: cargo build --release" >&2; exit 1; }
done
for t in nsd dnsperf openssl dig python3; do
    command -v "$t" >/dev/null || { echo "missing $t (apt-get install nsd dnsperf ...)" >&2; exit 1; }
done

WORK=$(mktemp -d /tmp/pqdns-serving.XXXXXX)
# Pin the binaries: another `cargo build --release` may replace target/release mid-run.
mkdir -p "$WORK/bin"
cp "$BIN/pqdns-server" "$BIN/pqdns-zone" "$BIN/pqdns-bench" "$WORK/bin/"
SRC_BIN=$BIN
BIN=$WORK/bin
PQ_PID="" NSD_PID=""
cleanup() {
    local p
    for p in $PQ_PID $NSD_PID; do
        kill "$p" 2>/dev/null || true
    done
    for p in $PQ_PID $NSD_PID; do
        for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$p" 2>/dev/null || true
    done
    if [[ ${KEEP:-0} == 1 ]]; then echo "work directory kept: $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# ---------------------------------------------------------------- machine
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "nproc: $(nproc)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
    echo "kernel: $(uname -r)"
    echo "nsd: $(nsd -v 2>&1 | head -1)"
    echo "dnsperf: $(dnsperf -h 2>&1 | grep -m1 -i version || true)"
    echo "openssl: $(openssl version)"
    echo "go: $(go version 2>/dev/null || echo none)"
    echo "pqdns-server: $($BIN/pqdns-server --version), $SRC_BIN/pqdns-server built $(date -u -r "$SRC_BIN/pqdns-server" +%Y-%m-%dT%H:%M:%SZ), sha256 $(sha256sum "$BIN/pqdns-server" | cut -c1-16)"
    echo "git: $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown) ($(git -C "$ROOT" log -1 --format=%cI 2>/dev/null || true))"
} | tee "$WORK/machine.txt" >&2

# ---------------------------------------------------------------- zone, keys, certificate
log "generating the zone and the query file"
"$BIN/pqdns-bench" gen-zone --origin bench. --delegations 200 --hosts 1000 -o "$WORK/bench.zone" >/dev/null
# 10000 queries, fixed pseudo-random order: 60% host A (authoritative answers),
# 40% names below delegations (referrals with DS + RRSIG).
awk 'BEGIN { s = 12345; for (i = 0; i < 10000; i++) {
        s = (s * 1103515245 + 12345) % 2147483648; r = s % 100;
        s = (s * 1103515245 + 12345) % 2147483648;
        if (r < 60) printf "host%d.bench. A\n", s % 1000;
        else printf "www.d%d.bench. A\n", s % 200 } }' >"$WORK/queries.txt"

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
    -subj /CN=localhost -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
    -keyout "$WORK/tls.key" -out "$WORK/tls.crt" 2>/dev/null

declare -A ALG=([classical]=ECDSAP256SHA256 [pqc]=ML-DSA-44)
for zone in classical pqc; do
    d=$WORK/$zone
    mkdir -p "$d"
    cp "$WORK/bench.zone" "$d/bench.zone"
    cat >"$d/zone.toml" <<EOF
origin = "bench."
default_ttl = 3600
file = "bench.zone"
[signing]
algorithms = ["${ALG[$zone]}"]
keys = "ksk-zsk"
denial = "nsec3"
validity = "14d"
inception_offset = "1h"
key_directory = "keys"
profile = "default"
[server]
doh = []
[server.tls]
certificate = "../tls.crt"
private_key = "../tls.key"
EOF
    # The same keys sign the file NSD serves and the zone pqdns-server signs at load.
    "$BIN/pqdns-zone" sign "$d/zone.toml" -o "$d/bench.zone.signed" 2>"$d/sign.log"
    "$BIN/pqdns-zone" verify "$d/bench.zone.signed" >"$d/verify.log" 2>&1 \
        || { echo "signed $zone zone does not verify" >&2; cat "$d/verify.log" >&2; exit 1; }
done
ls -l "$WORK"/*/bench.zone.signed >&2

# ---------------------------------------------------------------- helpers
# Every descendant of a process (NSD forks xfrd and its server processes, two levels deep).
descendants() {
    local c
    for c in $(pgrep -P "$1" || true); do
        echo "$c"
        descendants "$c"
    done
}

# utime+stime in clock ticks of a process and its descendants (threads are included in a
# process's /proc/PID/stat). Processes that exit during a run are not counted: none do.
cpu_ticks() {
    local root=$1 sum=0 p rest
    local -a f
    for p in $root $(descendants "$root"); do
        [[ -r /proc/$p/stat ]] || continue
        rest=$(<"/proc/$p/stat") || continue
        rest=${rest##*) }
        read -ra f <<<"$rest"
        sum=$((sum + f[11] + f[12]))
    done
    echo "$sum"
}

port_busy() { # port: true if anything listens on it (UDP or TCP)
    [[ -n $(ss -Hlnut "sport = :$1") ]]
}

wait_udp() { # port
    local i
    for i in $(seq 100); do
        # (dig +short prints errors such as "connection refused" on stdout too)
        local soa
        soa=$(dig @127.0.0.1 -p "$1" +tries=1 +time=1 +short bench. SOA 2>/dev/null || true)
        [[ $soa == "ns1.bench. hostmaster.bench. "* ]] && return 0
        sleep 0.2
    done
    echo "server on port $1 did not answer" >&2
    return 1
}

start_pqdns() { # zone
    local d=$WORK/$1
    ! port_busy $PQ_PORT && ! port_busy $PQ_DOT || { echo "port $PQ_PORT or $PQ_DOT is in use" >&2; exit 1; }
    # Rate limiting off by default, as in NSD's configuration below: one client sends
    # everything. PQ_RRL=1000000000 keeps its bookkeeping on without limiting anything. The
    # amplification limit is off too: dnsperf sends no DNS cookies, so every signed answer
    # would be truncated (NSD 4.6 has no such limit).
    (cd "$d" && exec "$BIN/pqdns-server" --zone zone.toml --udp 127.0.0.1:$PQ_PORT \
        --tcp 127.0.0.1:$PQ_PORT --dot 127.0.0.1:$PQ_DOT --rrl-rate "${PQ_RRL:-0}" \
        --amplification-limit "${PQ_AMP:-0}") \
        >"$d/pqdns.log" 2>&1 &
    PQ_PID=$!
    wait_udp $PQ_PORT || { cat "$d/pqdns.log" >&2; exit 1; }
    log "pqdns-server pid $PQ_PID serving the $1 zone"
}

start_nsd() { # zone
    local d=$WORK/$1/nsd
    ! port_busy $NSD_PORT && ! port_busy $NSD_DOT || { echo "port $NSD_PORT or $NSD_DOT is in use" >&2; exit 1; }
    mkdir -p "$d"
    cp "$WORK/$1/bench.zone.signed" "$d/bench.zone.signed"
    cat >"$d/nsd.conf" <<EOF
server:
    ip-address: 127.0.0.1@$NSD_PORT
    # NSD 4.6 serves TLS on the interfaces whose port is tls-port.
    ip-address: 127.0.0.1@$NSD_DOT
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
    verbosity: 1
    # Debian's NSD rate-limits by default and drops load-generator traffic.
    rrl-ratelimit: 0
    rrl-whitelist-ratelimit: 0
    # Same EDNS limit as pqdns-server (1232) and the same answer content: pqdns-server
    # answers without the apex NS RRset in the authority section and glue in additional.
    ipv4-edns-size: 1232
    minimal-responses: yes
    tls-service-key: "$WORK/tls.key"
    tls-service-pem: "$WORK/tls.crt"
    tls-port: $NSD_DOT
remote-control:
    control-enable: no
zone:
    name: bench.
    zonefile: "bench.zone.signed"
EOF
    nsd-checkconf "$d/nsd.conf"
    nsd -d -c "$d/nsd.conf" >"$d/stdout.log" 2>&1 &
    NSD_PID=$!
    wait_udp $NSD_PORT || { cat "$d/nsd.log" >&2; exit 1; }
    log "nsd pid $NSD_PID serving the $1 zone"
}

stop_servers() {
    local p port
    for p in $PQ_PID $NSD_PID; do kill "$p" 2>/dev/null || true; done
    for p in $PQ_PID $NSD_PID; do
        for _ in $(seq 150); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$p" 2>/dev/null; then
            log "pid $p still running 15 s after SIGTERM: SIGKILL"
            kill -9 "$p" 2>/dev/null || true
        fi
        wait "$p" 2>/dev/null || true
    done
    PQ_PID="" NSD_PID=""
    for port in $PQ_PORT $PQ_DOT $NSD_PORT $NSD_DOT; do
        for _ in $(seq 50); do port_busy "$port" || break; sleep 0.1; done
    done
}

echo "kind,server,zone,transport,client,curve,rep,duration_s,queries_sent,queries_completed,queries_lost,rate_per_s,mean_latency_ms,server_cpu_s,server_cpu_us_per_unit,avg_response_bytes,probe_udp_tc_rate,probe_udp_bytes,probe_tcp_bytes,loadavg1" >"$CSV.tmp"
declare -A PROBE

probe() { # server zone port
    local out
    out=$("$WORK/tlsload" sizes -addr 127.0.0.1:$3 -f "$WORK/queries.txt" -n 1000)
    log "probe $1 $2: $out"
    PROBE[$1,$2]=$(awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        printf "%s,%s,%s", v["tc_rate"], v["udp_mean_bytes"], v["tcp_mean_bytes"] }' <<<"$out")
}

dnsperf_run() { # server zone mode rep
    local server=$1 zone=$2 mode=$3 rep=$4 port pid out c0 c1
    if [[ $server == pqdns ]]; then pid=$PQ_PID; port=$PQ_PORT; else pid=$NSD_PID; port=$NSD_PORT; fi
    if [[ $mode == dot ]]; then [[ $server == pqdns ]] && port=$PQ_DOT || port=$NSD_DOT; fi
    out=$WORK/dnsperf-$server-$zone-$mode-$rep.txt
    c0=$(cpu_ticks "$pid")
    timeout $((DURATION + 20)) dnsperf -s 127.0.0.1 -p "$port" -m "$mode" -d "$WORK/queries.txt" \
        -D -c "$CLIENTS" -q "$OUTSTANDING" -l "$DURATION" -t 5 >"$out" 2>&1 || true
    c1=$(cpu_ticks "$pid")
    record dnsperf "$server" "$zone" "$mode" dnsperf - "$rep" "$out" $((c1 - c0))
}

# record KIND SERVER ZONE TRANSPORT CLIENT CURVE REP DNSPERF_OUTPUT CPU_TICKS
record() {
    local probe=${PROBE[$2,$3]:-,,}
    awk -v kind="$1" -v server="$2" -v zone="$3" -v tr="$4" -v client="$5" -v curve="$6" \
        -v rep="$7" -v ticks="$9" -v tck="$TCK" -v probe="$probe" \
        -v load="$(cut -d' ' -f1 /proc/loadavg)" '
        /Queries sent:/ { sent = $3 }
        /Queries completed:/ { done = $3 }
        /Queries lost:/ { lost = $3 }
        /Run time \(s\):/ { rt = $4 }
        /Queries per second:/ { qps = $4 }
        /Average Latency \(s\):/ { lat = $4 * 1000 }
        /Average packet size:/ { resp = $NF }
        END {
            if (done == "" || done == 0) { print "dnsperf answered nothing: " FILENAME > "/dev/stderr"; done = 0 }
            cpu = ticks / tck
            per = done > 0 ? cpu * 1e6 / done : ""
            printf "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%.4f,%.2f,%s,%s,%s,%s\n", kind, server, zone, tr,
                client, curve, rep, rt, sent, done, lost, qps, lat, cpu,
                (per == "" ? "" : sprintf("%.2f", per)), resp, probe, load
        }' "$8" | tee -a "$CSV.tmp" >&2
}

# ---------------------------------------------------------------- the tlsload client (Go)
HAVE_GO=0
if command -v go >/dev/null; then
    log "building benches/serving/tlsload"
    if (cd "$ROOT/benches/serving/tlsload" && GOTOOLCHAIN=local GOFLAGS=-mod=mod go build -o "$WORK/tlsload" .); then
        HAVE_GO=1
    fi
fi
[[ $HAVE_GO == 1 ]] || log "no Go toolchain (>= 1.25): skipping TC probes and the hybrid handshake runs"

hs_run() { # server curve rep
    local server=$1 curve=$2 rep=$3 pid port out c0 c1
    if [[ $server == pqdns ]]; then pid=$PQ_PID; port=$PQ_DOT; else pid=$NSD_PID; port=$NSD_DOT; fi
    out=$WORK/hs-$server-$curve-$rep.txt
    c0=$(cpu_ticks "$pid")
    timeout $((DURATION + 20)) "$WORK/tlsload" handshake -addr 127.0.0.1:$port -ca "$WORK/tls.crt" \
        -curve "$curve" -c "$HS_CONC" -d "${DURATION}s" >"$out" 2>&1 || true
    c1=$(cpu_ticks "$pid")
    log "handshake $server $curve: $(cat "$out")"
    awk -v server="$server" -v curve="$curve" -v rep="$rep" -v ticks=$((c1 - c0)) -v tck="$TCK" \
        -v load="$(cut -d' ' -f1 /proc/loadavg)" '
        { for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } }
        END {
            n = v["handshakes"] + 0; cpu = ticks / tck
            printf "handshake,%s,classical,dot-new-conn,tlsload,%s,%s,%s,%d,%d,%d,%s,%s,%.2f,%s,,,,,%s\n",
                server, curve, rep, v["seconds"], n + v["failed"], n, v["failed"], v["rate"], v["p50_ms"],
                cpu, (n > 0 ? sprintf("%.2f", cpu * 1e6 / n) : ""), load
        }' "$out" | tee -a "$CSV.tmp" >&2
}

hs_dnsperf_run() { # server rep
    local server=$1 rep=$2 pid port out c0 c1
    if [[ $server == pqdns ]]; then pid=$PQ_PID; port=$PQ_DOT; else pid=$NSD_PID; port=$NSD_DOT; fi
    out=$WORK/hs-dnsperf-$server-$rep.txt
    c0=$(cpu_ticks "$pid")
    # dnsperf 2.10 paces reconnections (about 30 per client and second here), so it needs
    # many clients; 32 is pqdns-server's default per-address connection limit.
    timeout $((DURATION + 20)) dnsperf -s 127.0.0.1 -p "$port" -m dot -O num-queries-per-conn=1 \
        -d "$WORK/queries.txt" -D -c 32 -q 500 -l "$DURATION" -t 5 >"$out" 2>&1 || true
    c1=$(cpu_ticks "$pid")
    record handshake "$server" classical dot-new-conn dnsperf X25519 "$rep" "$out" $((c1 - c0))
}

# ---------------------------------------------------------------- the runs
SECONDS=0
for zone in ${ZONES:-classical pqc}; do
    log "== $zone zone (${ALG[$zone]}, NSEC3)"
    start_pqdns "$zone"
    start_nsd "$zone"
    if [[ $HAVE_GO == 1 ]]; then
        probe pqdns "$zone" $PQ_PORT
        probe nsd "$zone" $NSD_PORT
    fi
    for s in pqdns nsd; do # warm-up, not recorded
        [[ $s == pqdns ]] && p=$PQ_PORT || p=$NSD_PORT
        timeout 20 dnsperf -s 127.0.0.1 -p $p -d "$WORK/queries.txt" -D -c "$CLIENTS" -q "$OUTSTANDING" -l 2 >/dev/null 2>&1 || true
    done
    k=0
    for rep in $(seq "$REPS"); do
        for mode in $MODES; do
            # alternate which server goes first, cell by cell
            k=$((k + 1))
            if ((k % 2)); then order="pqdns nsd"; else order="nsd pqdns"; fi
            for s in $order; do
                dnsperf_run "$s" "$zone" "$mode" "$rep"
                sleep 1
            done
        done
    done
    if [[ $zone == classical && $HANDSHAKES == 1 ]]; then
        log "== DoT handshakes (new connection per query, classical zone)"
        for rep in $(seq "$REPS"); do
            for s in pqdns nsd; do hs_dnsperf_run "$s" "$rep"; sleep 1; done
            if [[ $HAVE_GO == 1 ]]; then
                if ((rep % 2)); then curves="X25519MLKEM768 X25519"; else curves="X25519 X25519MLKEM768"; fi
                for c in $curves; do hs_run pqdns "$c" "$rep"; sleep 1; done
                # NSD links OpenSSL 3.0: X25519 only.
                hs_run nsd X25519 "$rep"
                sleep 1
            fi
        done
    fi
    for f in "$WORK/$zone/pqdns.log" "$WORK/$zone/nsd/nsd.log"; do
        n=$(grep -ciE "warn|error" "$f" || true)
        [[ $n == 0 ]] || log "$f: $n warning/error lines (kept in the work directory)"
    done
    stop_servers
done
mv "$CSV.tmp" "$CSV"
log "runs done in ${SECONDS}s; wrote $CSV"

python3 -c 'import matplotlib' 2>/dev/null || python3 -m pip install --quiet matplotlib
python3 "$ROOT/benches/serving/plot.py" "$CSV" "$OUT/serving.png"
cat "$WORK/machine.txt"
