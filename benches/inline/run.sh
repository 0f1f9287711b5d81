#!/usr/bin/env bash
# Issue 27, must-show 5: a one-record change arriving by IXFR at a pqdns inline signer of a
# large zone, against signing the zone whole, side by side in one run.
#
#   benches/inline/run.sh             # from the workspace root
#
# `measure_one_ixfr_against_a_whole_signing` (crates/pqdns-server/tests/secondary.rs): BIND's
# named (Debian bind9) serves an unsigned zone of HOSTS host A records; pqdns-server, in the
# test process, is its secondary with inline signing (one ALG CSK, NSEC3, TSIG). Measured as
# the test process's CPU (user + system, all threads; named and kdig are other processes):
# the start (AXFR and the first whole signing), the first IXFR after it, then CHANGES records
# added at named by nsupdate one after the other, each NOTIFY → IXFR in → incremental signing
# → journals synced → the outgoing IXFR taken by kdig; then the same version signed whole,
# keeping unchanged signatures (the path an IXFR took before) and renewing every one.
#
# Writes docs/bench/inline.csv and docs/bench/inline.png (matplotlib). Knobs (environment):
# HOSTS=100000, CHANGES=50, ALGS="ML-DSA-44".
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HOSTS=${HOSTS:-100000}
CHANGES=${CHANGES:-50}
ALGS=${ALGS:-"ML-DSA-44"}
CSV=${CSV:-$ROOT/docs/bench/inline.csv}
PLOT=${PLOT:-${CSV%.csv}.png}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}

echo "algorithm,hosts,start_cpu_s,start_wall_s,first_ixfr_cpu_s,changes,cpu_per_ixfr_s,signatures_per_ixfr,whole_keeping_cpu_s,whole_keeping_wall_s,whole_renewing_cpu_s,whole_renewing_wall_s,renewing_over_ixfr,keeping_over_ixfr" >"$CSV"
cd "$ROOT"
cargo test --release -p pqdns-server --test integration --no-run
for alg in $ALGS; do
    PQDNS_IXFR_BENCH_HOSTS=$HOSTS PQDNS_IXFR_BENCH_ALG=$alg \
        PQDNS_IXFR_BENCH_CHANGES=$CHANGES PQDNS_IXFR_BENCH_CSV=$CSV \
        cargo test --release -p pqdns-server --test integration -- --ignored --nocapture --exact \
        secondary::measure_one_ixfr_against_a_whole_signing
done

python3 - "$CSV" "$PLOT" <<'PY'
import csv, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = list(csv.DictReader(open(sys.argv[1])))
fig, ax = plt.subplots(figsize=(7, 4))
labels = ["whole, renewing", "whole, keeping", "one IXFR, incremental"]
for i, r in enumerate(rows):
    values = [float(r["whole_renewing_cpu_s"]), float(r["whole_keeping_cpu_s"]),
              float(r["cpu_per_ixfr_s"])]
    bars = ax.bar([x + i * 0.3 for x in range(3)], values, 0.3,
                  label=f'{r["algorithm"]}, {int(r["hosts"]):,} hosts')
    for b, v in zip(bars, values):
        ax.annotate(f"{v:.3g} s", (b.get_x() + b.get_width() / 2, v), ha="center",
                    va="bottom", fontsize=8)
ax.set_xticks(range(3))
ax.set_xticklabels(labels)
ax.set_yscale("log")
ax.set_ylabel("CPU seconds (log)")
ax.set_title("A one-record change at an inline signer")
ax.legend()
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=110)
PY
echo "wrote $CSV and $PLOT"
