#!/usr/bin/env bash
# Fragmentation benchmark: ARRF vs QBF (requested and pushed) vs TC=1+TCP fallback vs DoT (reused connection) at
# 0, 20 and 50 ms RTT, for ML-DSA-44, ML-DSA-87, Falcon-512 and SPHINCS+-SHA2-128s zones.
# Runs `pqdns-bench fragmentation` in a network namespace of its own (root needed), so the
# loopback packet counters count only this run; writes docs/bench/fragmentation.{csv,json,png}.
# Extra arguments go to pqdns-bench (e.g. --queries 10 --rtt 0,20).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
cargo build --release -p pqdns-server -p pqdns-bench
NS="pqdns-frag-$$"
ip netns add "$NS"
trap 'ip netns del "$NS"' EXIT
ip netns exec "$NS" ip link set lo up
ip netns exec "$NS" "$ROOT/target/release/pqdns-bench" fragmentation \
    --output "$ROOT/docs/bench/fragmentation" "$@"
# matplotlib: the tests' venv (target/py, `./dev test`) with `pip install matplotlib`, or the system's.
PY=python3
[ -x "$ROOT/target/py/bin/python" ] && "$ROOT/target/py/bin/python" -c 'import matplotlib' 2>/dev/null \
    && PY="$ROOT/target/py/bin/python"
"$PY" "$ROOT/benches/fragmentation/plot.py" docs/bench/fragmentation.csv docs/bench/fragmentation.png
