#!/usr/bin/env bash
# Where pqdns-server's UDP CPU goes under dnsperf: CPU per query, batch size (datagrams per
# recvmmsg), context switches per 1000 queries and who preempts the serving thread, with
# dnsperf as a normal task and as a SCHED_BATCH task (which does not preempt on wake-up).
# Results and discussion: docs/bench/serving.md, "UDP: where the CPU goes".
#
#   KEEP=1 MODES=udp HANDSHAKES=0 ZONES=classical REPS=1 benches/serving/run.sh   # keeps WORK
#   benches/serving/udp_profile.sh /tmp/pqdns-serving.XXXXXX [BINDIR]
#
# Knobs: PAIRS=3 (normal/SCHED_BATCH client pairs), SECONDS_PER_RUN=5, PORT=31053,
# RECORD=1 also writes a call-graph profile (perf record -g) to $WORK/udp-profile.data.
# Needs perf and chrt, and root (or perf_event_paranoid <= 0) for the scheduler tracepoints.
# Every process it starts is stopped by the trap; every run is bounded by dnsperf -l.
set -euo pipefail

WORK=${1:?usage: udp_profile.sh WORK_DIR_FROM_run.sh [BINDIR]}
BIN=${2:-$WORK/bin}
PAIRS=${PAIRS:-3}
LEN=${SECONDS_PER_RUN:-5}
PORT=${PORT:-31053}
PID=""
cleanup() { [[ -n $PID ]] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null; true; }
trap cleanup EXIT
trap 'exit 130' INT TERM

cd "$WORK/classical"
"$BIN/pqdns-server" --zone zone.toml --udp 127.0.0.1:$PORT --rrl-rate 0 \
    --amplification-limit 0 >"$WORK/udp-profile.log" 2>&1 &
PID=$!
for _ in $(seq 50); do
    dig @127.0.0.1 -p $PORT +short +tries=1 +time=1 bench. SOA 2>/dev/null | grep -q hostmaster && break
    sleep 0.2
done
dnsperf_for() { # seconds, prefix command...
    local s=$1
    shift
    timeout $((s + 20)) "$@" dnsperf -s 127.0.0.1 -p $PORT -d "$WORK/queries.txt" -D -c 4 -q 500 \
        -l "$s" 2>&1 | awk '/Queries completed:/ { print $3 }'
}
dnsperf_for 2 >/dev/null # warm-up: prepared answers

run() { # label, client prefix command...
    local label=$1 stat=$WORK/udp-profile-stat.txt q
    shift
    perf stat -x, -e 'task-clock,sched:sched_switch,syscalls:sys_enter_recvmmsg' -p $PID \
        -o "$stat" -- sleep $((LEN + 1)) &
    local s=$!
    q=$(dnsperf_for "$LEN" "$@")
    wait $s
    awk -F, -v q="$q" -v l="$label" -v load="$(cut -d' ' -f1 /proc/loadavg)" '
        $3 == "task-clock" { tc = $1 } $3 ~ /sched_switch/ { sw = $1 } $3 ~ /recvmmsg/ { rc = $1 }
        END { if (q == 0 || rc == 0) { print l ": no queries answered"; exit 1 }
              printf "%-14s queries %8d  cpu %.2f us/query  switches %6.1f per 1000 queries  %.1f datagrams per recvmmsg  load %s\n",
              l, q, tc * 1000 / q, sw * 1000 / q, q / rc, load }' "$stat"
}
for i in $(seq "$PAIRS"); do
    run "client-normal"
    run "client-batch" chrt -b 0
done
if [[ ${RECORD:-0} == 1 ]]; then
    perf record -g -p $PID -o "$WORK/udp-profile.data" -- sleep $((LEN + 1)) 2>/dev/null &
    r=$!
    dnsperf_for "$LEN" >/dev/null
    wait $r
    perf report -i "$WORK/udp-profile.data" --children --sort sym --stdio -g none 2>/dev/null |
        grep '%' | head -40
fi
