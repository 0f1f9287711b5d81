"""Summary of benches/xdp/run.sh's CSV: a markdown table (medians and ranges over the
repetitions), the headline `pqdns XDP / pqdns sockets: N.NNx` (queries answered per
CPU-second) and a bar chart with the range of every arm.

The headline's CPU is the server's own (utime+stime, its threads and children) plus
kxdpgun's system time, which on veth holds most of the server side's kernel receive path
(see run.sh). The machine's softirq time is left out of it: it is machine-wide and other
jobs' network traffic (loopback benchmarks running beside this one) lands in it; the table
shows the figures with it and with the server's CPU alone too.

    python3 benches/xdp/summary.py docs/bench/xdp.csv docs/bench/xdp.png
"""

import csv
import statistics
import sys

ARMS = [
    ("pqdns", "xdp"),
    ("pqdns", "sockets"),
    ("knot", "xdp"),
    ("knot", "sockets"),
    ("nsd", "sockets"),
]
NAMES = {"pqdns": "pqdns-server", "knot": "knotd", "nsd": "NSD"}


def column(rows, name):
    return [float(r[name]) for r in rows]


def per_cpu_s(rows, *cpu):
    """Answers per CPU-second of each run, CPU the sum of the named columns."""
    return [float(r["replies"]) / max(sum(float(r[c]) for c in cpu), 1e-9) for r in rows]


HEADLINE = ("server_cpu_s", "client_sys_s")
SERVER = ("server_cpu_s",)
ALL = ("server_cpu_s", "client_sys_s", "softirq_cpu_s")


def fmt(values, scale=1.0, digits=0):
    m = statistics.median(values) * scale
    lo, hi = min(values) * scale, max(values) * scale
    return f"{m:,.{digits}f} ({lo:,.{digits}f}–{hi:,.{digits}f})"


def main(csv_path, png_path):
    rows = list(csv.DictReader(open(csv_path)))
    arms = [a for a in ARMS if any((r["server"], r["path"]) == a for r in rows)]
    by_arm = {a: [r for r in rows if (r["server"], r["path"]) == a] for a in arms}
    runs = {a: per_cpu_s(by_arm[a], *HEADLINE) for a in arms}
    med = {a: statistics.median(runs[a]) for a in arms}
    print(
        "| server | path | runs | replies/s | lost % | queries per CPU-second: server + "
        "kxdpgun system (headline) | CPU µs per answer, same | server alone: µs per answer "
        "| with softirq: µs per answer |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for a in arms:
        sel = by_arm[a]
        lost = column(sel, "lost_pct")
        us = lambda cpu: [1e6 / q for q in per_cpu_s(sel, *cpu)]  # noqa: E731
        print(
            f"| {NAMES[a[0]]} | {'AF_XDP' if a[1] == 'xdp' else 'sockets'} | {len(sel)} "
            f"| {statistics.median(column(sel, 'replies_per_s')):,.0f} "
            f"| {fmt(lost, digits=1)} | {fmt(runs[a])} | {fmt(us(HEADLINE), digits=2)} "
            f"| {fmt(us(SERVER), digits=2)} | {fmt(us(ALL), digits=2)} |"
        )
    loads = column(rows, "loadavg1")
    print(f"\nload average (1 min) during the runs: {min(loads):.1f}–{max(loads):.1f}")

    def ratio(a, b):
        if a in med and b in med and med[b] > 0:
            return f"{med[a] / med[b]:.2f}x"
        return "n/a"

    print(f"\npqdns XDP / pqdns sockets: {ratio(('pqdns', 'xdp'), ('pqdns', 'sockets'))}")
    print(f"pqdns XDP / Knot XDP: {ratio(('pqdns', 'xdp'), ('knot', 'xdp'))}")
    print(f"pqdns sockets / Knot sockets: {ratio(('pqdns', 'sockets'), ('knot', 'sockets'))}")
    print(f"pqdns sockets / NSD sockets: {ratio(('pqdns', 'sockets'), ('nsd', 'sockets'))}")
    print(f"pqdns XDP / NSD sockets: {ratio(('pqdns', 'xdp'), ('nsd', 'sockets'))}")
    for name, cpu in (("server alone", SERVER), ("with softirq", ALL)):
        m = {a: statistics.median(per_cpu_s(by_arm[a], *cpu)) for a in arms}
        x, s, k = m.get(("pqdns", "xdp")), m.get(("pqdns", "sockets")), m.get(("knot", "xdp"))
        if x and s and k:
            print(f"{name}: pqdns XDP / pqdns sockets {x / s:.2f}x, pqdns XDP / Knot XDP {x / k:.2f}x")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot", file=sys.stderr)
        return
    fig, ax = plt.subplots(figsize=(7, 3.4))
    values = [med[a] / 1000 for a in arms]
    low = [(med[a] - min(runs[a])) / 1000 for a in arms]
    high = [(max(runs[a]) - med[a]) / 1000 for a in arms]
    colours = {"xdp": "#27a", "sockets": "#8aa"}
    ax.bar(
        [f"{NAMES[s]}\n{'AF_XDP' if p == 'xdp' else 'sockets'}" for s, p in arms],
        values,
        yerr=[low, high],
        capsize=4,
        color=[colours[p] for _, p in arms],
    )
    ax.set_ylabel("k answers per CPU-second\n(server + kxdpgun system)")
    ax.set_title(
        f"kxdpgun on one veth pair, ECDSA zone, DO=1 (median and range of {len(by_arm[arms[0]])})",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(png_path, dpi=100)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
