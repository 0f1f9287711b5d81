#!/usr/bin/env bash
# Online signing and compact denial (issue 30 must-shows 1 and 2), on the answer engine
# (crates/pqdns-server/examples/online_bench.rs): answer sizes of NSEC3 pre-signed and online
# compact-denial zones, and online signing speed next to the raw primitive and to pre-signed
# answers, in one run.
#
#   benches/online/run.sh        # from the workspace root
#
# Builds the example (cargo build --release -p pqdns-server --example online_bench), then
# writes docs/bench/denial.csv (sizes), docs/bench/online-speed.csv (speed) and
# docs/bench/denial.svg (the plot; .png with rsvg-convert), and prints both tables. Knobs (environment): THREADS=2
# threads for the rates (the cores), DURATION=3 seconds per arm and round, CARGO_TARGET_DIR
# as cargo's.
#
# Everything runs in one process per part, bounded by DURATION x arms x rounds; nothing is
# left running.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
THREADS=${THREADS:-2}
DURATION=${DURATION:-3}
OUT=$ROOT/docs/bench

(cd "$ROOT" && cargo build --release -p pqdns-server --example online_bench)
BIN=$TARGET/release/examples/online_bench

echo "# machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "# $(date -u +%Y-%m-%dT%H:%MZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
"$BIN" sizes >"$OUT/denial.csv"
column -s, -t "$OUT/denial.csv"
"$BIN" speed "$THREADS" "$DURATION" >"$OUT/online-speed.csv"
column -s, -t "$OUT/online-speed.csv"
python3 "$ROOT/benches/online/plot.py" "$OUT/denial.csv" "$OUT/denial.svg"
if command -v rsvg-convert >/dev/null; then rsvg-convert "$OUT/denial.svg" -o "$OUT/denial.png"; fi
echo "wrote $OUT/denial.csv $OUT/online-speed.csv $OUT/denial.svg"
