#!/usr/bin/env bash
# Catalog zones at fleet scale (issue 27 must-show 4): N member zones (default 1,000) through
#
#   Knot (primary: a catalog of N members, and the members)
#     → pqdns-server (consumer: members added at run time, signed ECDSA P-256 + ML-DSA-44 per
#                     the catalog's template; producer: its own catalog of what it serves)
#     → Knot (secondary, `catalog-role: interpret` of pqdns's catalog)
#
# with TSIG on every transfer and NOTIFY. Measured: the time from the primary's new catalog
# (0 → N members, `knotc zone-reload`) until every member is served signed at pqdns and at the
# downstream Knot (polled one after the other, each count stamped with the end of its poll;
# signed = pqdns's `unixtime` serial); pqdns's memory per
# member zone (VmRSS after convergence minus VmRSS serving the empty catalog, ÷ N); the time
# for a removal of R members (default 10) at the primary to reach both (REFUSED).
#
#   benches/fleet/run.sh          # from the workspace root, after `cargo build --release -p pqdns-server`
#
# Writes docs/bench/fleet.csv (the convergence timeline), docs/bench/fleet-summary.csv and
# docs/bench/fleet.png. Knobs (environment): N=1000, R=10, LIMIT=900 seconds for each wait,
# PORT=30253 (three ports from it), PQDNS_BIN=DIR (default target/release), KEEP=1 keeps the
# work directory. Needs knotd/knotc (knot), python3 (matplotlib for the plot).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=${PQDNS_BIN:-$ROOT/target/release}
OUT=${OUT:-$ROOT/docs/bench}
N=${N:-1000}
R=${R:-10}
LIMIT=${LIMIT:-900}
PORT=${PORT:-30253}
UP=$PORT PQ=$((PORT + 1)) DOWN=$((PORT + 2))
for t in knotd knotc python3; do
    command -v "$t" >/dev/null || { echo "missing $t (apt-get install knot)" >&2; exit 1; }
done
[[ -x $BIN/pqdns-server ]] || { echo "missing $BIN/pqdns-server: cargo build --release -p pqdns-server" >&2; exit 1; }

WORK=$(mktemp -d /tmp/pqdns-fleet.XXXXXX)
cp "$BIN/pqdns-server" "$WORK/pqdns-server"   # pinned: a rebuild may replace target/release
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    [[ -n ${KEEP:-} ]] || rm -rf "$WORK"
}
trap cleanup EXIT

SECRET=$(head -c 32 /dev/urandom | base64)
KEY=fleet-key.
mkdir -p "$WORK/up" "$WORK/pq" "$WORK/down"

# The primary: members m0..m(N-1).fleet.test., each a few records, and a catalog.
catalog() { # SERIAL FIRST LAST -> catalog zone text with members FIRST..LAST (none if FIRST > LAST)
    printf '$ORIGIN catalog.upstream.\n$TTL 0\n@ SOA invalid. invalid. %s 3600 600 2419200 0\n@ NS invalid.\nversion TXT "2"\n' "$1"
    local i
    for ((i = $2; i <= $3; i++)); do printf 'id%d.zones PTR m%d.fleet.test.\n' "$i" "$i"; done
}
: >"$WORK/zones.txt"
ZONES=""
for ((i = 0; i < N; i++)); do
    printf '$ORIGIN m%d.fleet.test.\n$TTL 300\n@ SOA ns h 1 3600 60 604800 300\n@ NS ns\nns A 192.0.2.1\nwww A 192.0.2.%d\n@ MX 10 mail\nmail A 192.0.2.25\n@ TXT "member %d"\n' \
        "$i" $((i % 250 + 1)) "$i" >"$WORK/up/m$i.zone"
    ZONES+="  - domain: m$i.fleet.test.
    file: \"$WORK/up/m$i.zone\"
"
    echo "m$i.fleet.test." >>"$WORK/zones.txt"
done
catalog 1 1 0 >"$WORK/up/catalog.zone"
cat >"$WORK/up/knot.conf" <<CONF
server:
  rundir: "$WORK/up"
  listen: 127.0.0.1@$UP
control:
  listen: "$WORK/up/knot.sock"
database:
  storage: "$WORK/up"
log:
  - target: "$WORK/up/knot.log"
    any: notice
key:
  - id: $KEY
    algorithm: hmac-sha256
    secret: $SECRET
remote:
  - id: pqdns
    address: 127.0.0.1@$PQ
    key: $KEY
acl:
  - id: transfer
    address: 127.0.0.1
    key: $KEY
    action: transfer
template:
  - id: default
    storage: "$WORK/up"
    notify: pqdns
    acl: [transfer]
zone:
  - domain: catalog.upstream.
    file: "$WORK/up/catalog.zone"
$ZONES
CONF
knotd -c "$WORK/up/knot.conf" >/dev/null 2>&1 &
PIDS+=($!)

# pqdns: the consumer of catalog.upstream. and the producer of catalog.pqdns.
cat >"$WORK/pq/pqdns-server.toml" <<CONF
[server]
udp = ["127.0.0.1:$PQ"]
tcp = ["127.0.0.1:$PQ"]
dot = []
doh = []
rrl_rate = 0
amplification_limit = 0
tsig_key = [{ name = "$KEY", algorithm = "hmac-sha256", secret = "$SECRET" }]
axfr_allow = ["key:$KEY"]
notify = ["127.0.0.1:$DOWN key $KEY"]

[[zone]]
origin = "catalog.upstream."
[zone.secondary]
primaries = ["127.0.0.1:$UP key $KEY"]
state_directory = "state"
[zone.catalog]
role = "consumer"
max_members = $((N + 10))
[zone.catalog.template.signing]
algorithms = ["ECDSAP256SHA256", "ML-DSA-44"]
keys = "csk"
serial = "unixtime"
key_directory = "keys"
state_directory = "state"

[[zone]]
origin = "catalog.pqdns."
[zone.catalog]
role = "producer"
group = "member"
CONF
(cd "$WORK/pq" && exec "$WORK/pqdns-server" --config pqdns-server.toml >"$WORK/pq/log" 2>&1) &
PQPID=$!
PIDS+=($PQPID)

# The downstream Knot, interpreting pqdns's catalog.
cat >"$WORK/down/knot.conf" <<CONF
server:
  rundir: "$WORK/down"
  listen: 127.0.0.1@$DOWN
control:
  listen: "$WORK/down/knot.sock"
database:
  storage: "$WORK/down"
log:
  - target: "$WORK/down/knot.log"
    any: notice
key:
  - id: $KEY
    algorithm: hmac-sha256
    secret: $SECRET
remote:
  - id: pqdns
    address: 127.0.0.1@$PQ
    key: $KEY
acl:
  - id: notify
    address: 127.0.0.1
    key: $KEY
    action: notify
template:
  - id: default
    storage: "$WORK/down"
  - id: member
    storage: "$WORK/down"
    master: pqdns
    acl: [notify]
zone:
  - domain: catalog.pqdns.
    master: pqdns
    acl: [notify]
    catalog-role: interpret
    catalog-template: member
CONF
knotd -c "$WORK/down/knot.conf" >/dev/null 2>&1 &
PIDS+=($!)

rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$PQPID/status"; }
poll() { python3 "$ROOT/benches/fleet/poll.py" 127.0.0.1 "$1" "$2"; }
soa_ok() { # PORT ZONE: NOERROR with an answer
    python3 - "$1" "$2" <<'PY'
import socket, struct, sys
port, name = int(sys.argv[1]), sys.argv[2]
q = struct.pack("!HHHHHH", 7, 0, 1, 0, 0, 0) + b"".join(bytes([len(l)]) + l.encode() for l in name.rstrip(".").split(".")) + b"\0" + struct.pack("!HH", 6, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(1)
try:
    s.sendto(q, ("127.0.0.1", port)); r, _ = s.recvfrom(4096)
    sys.exit(0 if (struct.unpack("!H", r[2:4])[0] & 0xF) == 0 and struct.unpack("!H", r[6:8])[0] > 0 else 1)
except OSError:
    sys.exit(1)
PY
}

# pqdns serves the empty catalog: the baseline.
for ((t = 0; t < 60; t++)); do soa_ok "$PQ" catalog.upstream. && soa_ok "$PQ" catalog.pqdns. && break; sleep 1; done
soa_ok "$PQ" catalog.upstream. || { echo "pqdns never served the catalog; see $WORK/pq/log" >&2; KEEP=1; exit 1; }
sleep 2
RSS0=$(rss_kib)

# 0 → N members at the primary.
catalog 2 0 $((N - 1)) >"$WORK/up/catalog.zone"
T0=$(date +%s.%N)
knotc -c "$WORK/up/knot.conf" zone-reload catalog.upstream. >/dev/null
CSV=$OUT/fleet.csv
echo "server,seconds,signed" >"$CSV"
since() { echo "$(date +%s.%N) - $1" | bc; }
PQ_DONE="" DOWN_DONE=""
while :; do
    # Each count is stamped with the end of its poll (a poll of N zones takes up to ~10 s).
    read -r PQS _ _ < <(poll "$PQ" "$WORK/zones.txt")
    TP=$(since "$T0")
    read -r DNS _ _ < <(poll "$DOWN" "$WORK/zones.txt")
    TD=$(since "$T0")
    T=$TD
    printf 'pqdns,%.1f,%d\nknot-downstream,%.1f,%d\n' "$TP" "$PQS" "$TD" "$DNS" >>"$CSV"
    echo "pqdns $PQS at ${TP}s, downstream $DNS at ${TD}s"
    [[ -z $PQ_DONE && $PQS -eq $N ]] && PQ_DONE=$TP
    [[ -z $DOWN_DONE && $DNS -eq $N ]] && DOWN_DONE=$TD
    [[ -n $DOWN_DONE && -n $PQ_DONE ]] && break
    (($(echo "$T > $LIMIT" | bc))) && { echo "no convergence within $LIMIT s" >&2; KEEP=1; break; }
    sleep 1
done
sleep 2
RSS1=$(rss_kib)

# Remove R members at the primary.
head -n "$R" "$WORK/zones.txt" >"$WORK/removed.txt"
catalog 3 "$R" $((N - 1)) >"$WORK/up/catalog.zone"
T1=$(date +%s.%N)
knotc -c "$WORK/up/knot.conf" zone-reload catalog.upstream. >/dev/null
RM_PQ="" RM_DOWN=""
while :; do
    read -r _ PQR _ < <(poll "$PQ" "$WORK/removed.txt")
    TP=$(since "$T1")
    read -r _ DNR _ < <(poll "$DOWN" "$WORK/removed.txt")
    T=$(since "$T1")
    [[ -z $RM_PQ && $PQR -eq $R ]] && RM_PQ=$TP
    [[ -z $RM_DOWN && $DNR -eq $R ]] && RM_DOWN=$T
    [[ -n $RM_PQ && -n $RM_DOWN ]] && break
    (($(echo "$T > $LIMIT" | bc))) && { echo "removal not seen within $LIMIT s" >&2; KEEP=1; break; }
    sleep 0.2
done

PER_ZONE=$(echo "scale=1; ($RSS1 - $RSS0) / $N" | bc)
CPU=$(awk '{print ($14 + $15)}' "/proc/$PQPID/stat")
TCK=$(getconf CLK_TCK)
{
    echo "members,converge_pqdns_s,converge_downstream_s,rss_before_kib,rss_after_kib,kib_per_zone,pqdns_cpu_s,removed,removal_pqdns_s,removal_downstream_s"
    printf '%d,%.1f,%.1f,%d,%d,%s,%.1f,%d,%.1f,%.1f\n' "$N" "$PQ_DONE" "$DOWN_DONE" "$RSS0" "$RSS1" "$PER_ZONE" \
        "$(echo "scale=1; $CPU / $TCK" | bc)" "$R" "${RM_PQ:-nan}" "${RM_DOWN:-nan}"
} >"$OUT/fleet-summary.csv"
cat "$OUT/fleet-summary.csv"
python3 "$ROOT/benches/fleet/plot.py" "$CSV" "$OUT/fleet.png" "$N" || echo "no plot (matplotlib?)" >&2
