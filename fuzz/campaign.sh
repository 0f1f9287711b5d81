#!/usr/bin/env bash
# A fuzzing campaign: `fuzz/campaign.sh TARGET [RUNS]` runs one cargo-fuzz target for RUNS
# executions (default 10 000 000) on its corpus (fuzz/corpus/TARGET, grown in place; only the
# seed* files are committed) and prints libFuzzer's final statistics line (executions,
# coverage `cov`, features `ft`, corpus size) and any crash artifact. Exits non-zero on a crash.
# Targets: query (the server's answer engine), message (core message parsing), reassembly
# (ARRF/QBF), zonefile (master files and TOML zone descriptions), settings (the [server]
# table), keyfile (BIND key file pairs), doh (DoH request decoding). See docs/bench/fuzz.md.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?usage: fuzz/campaign.sh TARGET [RUNS]}
runs=${2:-10000000}
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked --quiet
mkdir -p "fuzz/corpus/$target"
log=$(mktemp)
status=0
# cargo-fuzz passes -Z sanitizer flags; RUSTC_BOOTSTRAP=1 lets the stable toolchain take them.
RUSTC_BOOTSTRAP=1 cargo fuzz run "$target" "fuzz/corpus/$target" -- \
    -runs="$runs" -rss_limit_mb=4096 -print_final_stats=1 >"$log" 2>&1 || status=$?
grep -E "^#[0-9]+[[:space:]]+DONE|^Done [0-9]+ runs|stat::number_of_executed_units|SUMMARY|panicked|Test unit written" "$log" || true
rm -f "$log"
exit "$status"
