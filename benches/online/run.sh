#!/usr/bin/env bash
# Online signing and compact denial (issue 30 must-shows 1 and 2), on the answer engine
# (crates/pqdns-server/examples/online_bench.rs): answer sizes of NSEC3 pre-signed and online
# compact-denial zones, and online signing speed next to the raw primitive and to pre-signed
# answers, in one run.
#
#   benches/online/run.sh        # from the workspace root
#
# Builds the example (cargo build --release -p pqdns-server --example online_bench), then
# writes docs/bench/denial.csv (sizes), docs/bench/online-speed.csv (speed; further runs in
# online-speed-2.csv, ...) and the plots docs/bench/denial.svg and docs/bench/online-speed.svg
# (.png with rsvg-convert), and prints the tables. Knobs (environment): THREADS=2 threads for
# the rates (the cores), DURATION=3 seconds per arm and round, RUNS=3 speed runs (of three
# rounds each), CARGO_TARGET_DIR as cargo's.
#
# Everything runs in one process per part, bounded by DURATION x arms x rounds; nothing is
# left running.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
THREADS=${THREADS:-2}
DURATION=${DURATION:-3}
RUNS=${RUNS:-3}
OUT=$ROOT/docs/bench

(cd "$ROOT" && cargo build --release -p pqdns-server --example online_bench)
BIN=$TARGET/release/examples/online_bench

echo "# machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "# $(date -u +%Y-%m-%dT%H:%MZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
"$BIN" sizes >"$OUT/denial.csv"
column -s, -t "$OUT/denial.csv"
SPEED=()
for run in $(seq 1 "$RUNS"); do
  csv=$OUT/online-speed.csv
  if [ "$run" -gt 1 ]; then csv=$OUT/online-speed-$run.csv; fi
  "$BIN" speed "$THREADS" "$DURATION" >"$csv"
  column -s, -t "$csv" | grep -E 'cold_vs_raw|hit_vs_presigned'
  SPEED+=("$csv")
done
python3 "$ROOT/benches/online/plot.py" "$OUT/denial.csv" "$OUT/denial.svg"
python3 "$ROOT/benches/online/plot_speed.py" "$OUT/online-speed.svg" "${SPEED[@]}"
if command -v rsvg-convert >/dev/null; then
  rsvg-convert "$OUT/denial.svg" -o "$OUT/denial.png"
  rsvg-convert "$OUT/online-speed.svg" -o "$OUT/online-speed.png"
fi
echo "wrote $OUT/denial.csv ${SPEED[*]} $OUT/denial.svg $OUT/online-speed.svg"
