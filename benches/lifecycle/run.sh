#!/usr/bin/env bash
# One dynamic UPDATE (RFC 2136) in a large signed zone against a full signing of it, side by
# side in one run per algorithm (issue 28 must-show 4; the same incremental path a one-record
# IXFR at an inline signer is meant to take, issue 27 must-show 5).
#
#   benches/lifecycle/run.sh          # from the workspace root
#
# For each algorithm, `measure_one_update_against_a_full_signing` (crates/pqdns-server/tests/
# update.rs) starts pqdns-server in the test process on a zone of HOSTS host A records (NSEC3,
# KSK + ZSK): the start signs it whole (the baseline); then one UPDATE (the first after a load
# copies the zone), then UPDATES more, one after the other over TCP with TSIG, each timed until
# its NOERROR (sent after the change is signed, served and synced to the journal file). CPU is
# the process's user + system time over all threads.
#
# Then `measure_update_to_a_knot_secondary`: a Knot secondary (knotd, TSIG; configured as for a
# large dynamic zone: `zonefile-sync: -1`, `journal-content: changes`, so it keeps the changes in
# its journal instead of rewriting its zone file after each) of an ML-DSA-44 zone of HOSTS
# hosts; for each of SECONDARY_UPDATES updates (at most 1,000), the time from NOERROR until Knot
# serves the new serial (NOTIFY, IXFR), its SOA polled every 2 ms.
#
# Writes docs/bench/lifecycle-updates.csv, lifecycle-updates-secondary.csv and
# lifecycle-updates.png (matplotlib). Knobs (environment): HOSTS=100000, UPDATES=1000,
# SECONDARY_UPDATES=100, ALGS="ECDSAP256SHA256 ML-DSA-44 Falcon-512".
# Every update is bounded by the client's 60 s read timeout; the server stops with the test.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HOSTS=${HOSTS:-100000}
UPDATES=${UPDATES:-1000}
ALGS=${ALGS:-"ECDSAP256SHA256 ML-DSA-44 Falcon-512"}
CSV=${CSV:-$ROOT/docs/bench/lifecycle-updates.csv}
PLOT=${PLOT:-${CSV%.csv}.png}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}

echo "algorithm,hosts,full_cpu_s,full_wall_s,first_update_cpu_s,first_update_wall_s,updates,cpu_per_update_s,p50_ms,p99_ms,updates_per_s,full_over_update" >"$CSV"
cd "$ROOT"
cargo test --release -p pqdns-server --test integration --no-run
for alg in $ALGS; do
    PQDNS_UPDATE_BENCH_HOSTS=$HOSTS PQDNS_UPDATE_BENCH_ALG=$alg \
        PQDNS_UPDATE_BENCH_UPDATES=$UPDATES PQDNS_UPDATE_BENCH_CSV=$CSV \
        cargo test --release -p pqdns-server --test integration -- --ignored --nocapture --exact \
        update::measure_one_update_against_a_full_signing
done

SECONDARY_CSV=${CSV%.csv}-secondary.csv
echo "algorithm,hosts,updates,p50_ms,p99_ms,max_ms" >"$SECONDARY_CSV"
PQDNS_UPDATE_BENCH_HOSTS=$HOSTS PQDNS_UPDATE_BENCH_ALG=ML-DSA-44 \
    PQDNS_UPDATE_BENCH_UPDATES=${SECONDARY_UPDATES:-100} \
    PQDNS_UPDATE_BENCH_SECONDARY_CSV=$SECONDARY_CSV \
    cargo test --release -p pqdns-server --test integration -- --ignored --nocapture --exact \
    update::measure_update_to_a_knot_secondary

python3 - "$CSV" "$PLOT" <<'PY'
import csv, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = list(csv.DictReader(open(sys.argv[1])))
algs = [r["algorithm"] for r in rows]
fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
full = [float(r["full_cpu_s"]) for r in rows]
upd = [float(r["cpu_per_update_s"]) for r in rows]
x = range(len(rows))
a.bar([i - 0.2 for i in x], full, 0.4, label="full signing")
a.bar([i + 0.2 for i in x], upd, 0.4, label="one UPDATE")
a.set_yscale("log"); a.set_xticks(list(x)); a.set_xticklabels(algs)
a.set_ylabel("CPU seconds (log)"); a.legend()
a.set_title(f"{rows[0]['hosts']} hosts: CPU, full signing vs one UPDATE")
for i, r in enumerate(rows):
    a.annotate(f"{float(r['full_over_update']):.0f}x", (i, upd[i]), ha="center", va="bottom")
b.bar(algs, [float(r["updates_per_s"]) for r in rows])
b.set_ylabel("updates per second (sequential, synced)")
b.set_title("sustained UPDATE rate")
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=100)
PY
echo "wrote $CSV and $PLOT"
