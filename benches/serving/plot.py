#!/usr/bin/env python3
"""Plot and summarise docs/bench/serving.csv (written by benches/serving/run.sh).

    python3 benches/serving/plot.py docs/bench/serving.csv docs/bench/serving.png

Prints markdown tables (medians over the repetitions, pqdns/NSD ratios against the project
goals) and writes a PNG: server CPU µs per answered query per (zone, transport) for both
servers, and server CPU µs per DoT handshake.
"""
import csv
import statistics
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

GOALS = {"udp": 0.8, "tcp": 1.0, "dot": 1.0}  # pqdns CPU/query <= goal x NSD
HS_GOAL = 0.9  # hybrid handshake rate >= 0.9 x X25519
ZONES = ["classical", "pqc"]
ZONE_LABEL = {"classical": "ECDSAP256SHA256", "pqc": "ML-DSA-44"}
TRANSPORTS = ["udp", "tcp", "dot"]
SHORT_ZONE = {"classical": "ECDSA P-256", "pqc": "ML-DSA-44"}
TRANSPORT_LABEL = {"udp": "UDP", "tcp": "TCP", "dot": "DoT"}


def num(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return None


def med(rows, key):
    vals = [num(r[key]) for r in rows if num(r[key]) is not None]
    return statistics.median(vals) if vals else None


def rng(rows, key):
    vals = [num(r[key]) for r in rows if num(r[key]) is not None]
    return (min(vals), max(vals)) if vals else (None, None)


def fmt(x, spec=".1f"):
    return "–" if x is None else format(x, spec)


def main(csv_path, png_path):
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    cells = defaultdict(list)
    for r in rows:
        key = (r["kind"], r["server"], r["zone"], r["transport"], r["client"], r["curve"])
        cells[key].append(r)

    def get(server, zone, tr):
        return cells.get(("dnsperf", server, zone, tr, "dnsperf", "-"), [])

    print("| zone | transport | pqdns QPS | NSD QPS | pqdns µs CPU/query | NSD µs CPU/query "
          "| ratio pqdns/NSD | per-rep ratios | goal | met | pqdns / NSD mean latency ms "
          "| lost (pqdns / NSD) | avg response B (pqdns / NSD) | UDP TC rate (pqdns / NSD) |")
    print("|" + "---|" * 14)
    for zone in ZONES:
        for tr in TRANSPORTS:
            p, n = get("pqdns", zone, tr), get("nsd", zone, tr)
            if not p or not n:
                continue
            pc, nc = med(p, "server_cpu_us_per_unit"), med(n, "server_cpu_us_per_unit")
            ratio = pc / nc if pc and nc else None
            nd = {r["rep"]: num(r["server_cpu_us_per_unit"]) for r in n}
            per_rep = [num(r["server_cpu_us_per_unit"]) / nd[r["rep"]] for r in p
                       if nd.get(r["rep"]) and num(r["server_cpu_us_per_unit"])]
            goal = GOALS[tr]
            met = "yes" if ratio is not None and ratio <= goal else "**no**"
            lost = lambda rs: int(sum(num(r["queries_lost"]) or 0 for r in rs))  # noqa: E731
            tc = ""
            if tr == "udp":
                tc = f"{fmt(num(p[0]['probe_udp_tc_rate']), '.0%')} / {fmt(num(n[0]['probe_udp_tc_rate']), '.0%')}"
            print(f"| {ZONE_LABEL[zone]} | {tr} | {fmt(med(p, 'rate_per_s'), ',.0f')} "
                  f"| {fmt(med(n, 'rate_per_s'), ',.0f')} | {fmt(pc, '.2f')} | {fmt(nc, '.2f')} "
                  f"| {fmt(ratio, '.2f')} | {', '.join(format(v, '.2f') for v in per_rep)} | ≤ {goal} | {met} "
                  f"| {fmt(med(p, 'mean_latency_ms'), '.3f')} / {fmt(med(n, 'mean_latency_ms'), '.3f')} "
                  f"| {lost(p)} / {lost(n)} "
                  f"| {fmt(med(p, 'avg_response_bytes'), '.0f')} / {fmt(med(n, 'avg_response_bytes'), '.0f')} "
                  f"| {tc} |")
    print()

    hs = [(k, v) for k, v in cells.items() if k[0] == "handshake"]
    hs.sort(key=lambda kv: (kv[0][4], kv[0][1], kv[0][5]))
    if hs:
        print("| server | client | key exchange | handshakes/s (median) | range | "
              "server µs CPU/handshake | failed | runs |")
        print("|" + "---|" * 8)
        for (kind, server, zone, tr, client, curve), rs in hs:
            lo, hi = rng(rs, "rate_per_s")
            failed = int(sum(num(r["queries_lost"]) or 0 for r in rs))
            print(f"| {server} | {client} | {curve} | {fmt(med(rs, 'rate_per_s'), ',.0f')} "
                  f"| {fmt(lo, ',.0f')}–{fmt(hi, ',.0f')} | {fmt(med(rs, 'server_cpu_us_per_unit'), '.0f')} "
                  f"| {failed} | {len(rs)} |")
        hyb = cells.get(("handshake", "pqdns", "classical", "dot-new-conn", "tlsload", "X25519MLKEM768"))
        x = cells.get(("handshake", "pqdns", "classical", "dot-new-conn", "tlsload", "X25519"))
        if hyb and x:
            rr = med(hyb, "rate_per_s") / med(x, "rate_per_s")
            cr = med(hyb, "server_cpu_us_per_unit") / med(x, "server_cpu_us_per_unit")
            # per-repetition ratios (runs of the same rep are back to back)
            per_rep = []
            by_rep = {r["rep"]: r for r in x}
            for r in hyb:
                if r["rep"] in by_rep and num(by_rep[r["rep"]]["rate_per_s"]):
                    per_rep.append(num(r["rate_per_s"]) / num(by_rep[r["rep"]]["rate_per_s"]))
            print()
            print(f"pqdns-server, tlsload: hybrid/X25519 handshake rate = {rr:.2f} "
                  f"(goal ≥ {HS_GOAL}: {'met' if rr >= HS_GOAL else 'MISSED'}); per repetition: "
                  + ", ".join(f"{v:.2f}" for v in per_rep)
                  + f"; server CPU per handshake hybrid/X25519 = {cr:.2f}")

    # ---- plot
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5), gridspec_kw={"width_ratios": [3, 1.3]})
    groups = [(z, t) for z in ZONES for t in TRANSPORTS if get("pqdns", z, t) or get("nsd", z, t)]
    width = 0.38
    for i, (server, color) in enumerate([("pqdns", "#1f77b4"), ("nsd", "#ff7f0e")]):
        xs, ys, lo, hi = [], [], [], []
        for g, (z, t) in enumerate(groups):
            rs = get(server, z, t)
            m = med(rs, "server_cpu_us_per_unit")
            if m is None:
                continue
            a, b = rng(rs, "server_cpu_us_per_unit")
            xs.append(g + (i - 0.5) * width)
            ys.append(m)
            lo.append(m - a)
            hi.append(b - m)
        bars = ax1.bar(xs, ys, width, yerr=[lo, hi], capsize=3, color=color,
                       label="pqdns-server" if server == "pqdns" else "NSD 4.6")
        ax1.bar_label(bars, fmt="%.1f", fontsize=8, padding=2)
    ax1.set_xticks(range(len(groups)))
    ax1.set_xticklabels([f"{TRANSPORT_LABEL[t]}\n{SHORT_ZONE[z]}" for z, t in groups])
    ax1.set_ylabel("server CPU µs per answered query (median, min–max)")
    ax1.set_title("Server CPU per query, dnsperf -D (DO=1), NSEC3 zone, 127.0.0.1")
    ax1.legend()
    ax1.grid(axis="y", alpha=0.3)

    if hs:
        labels, ys, errs, colors = [], [], [[], []], []
        for (kind, server, zone, tr, client, curve), rs in hs:
            m = med(rs, "server_cpu_us_per_unit")
            if m is None:
                continue
            a, b = rng(rs, "server_cpu_us_per_unit")
            labels.append(f"{'pqdns' if server == 'pqdns' else 'NSD'}\n{client}\n{curve.replace('MLKEM768', '+ML-KEM')}")
            ys.append(m)
            errs[0].append(m - a)
            errs[1].append(b - m)
            colors.append("#1f77b4" if server == "pqdns" else "#ff7f0e")
        bars = ax2.bar(range(len(ys)), ys, yerr=errs, capsize=3, color=colors)
        ax2.bar_label(bars, fmt="%.0f", fontsize=8, padding=2)
        ax2.set_xticks(range(len(ys)))
        ax2.set_xticklabels(labels, fontsize=7)
        ax2.set_ylabel("server CPU µs per DoT handshake")
        ax2.set_title("New DoT connection per query")
        ax2.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(png_path, dpi=110)
    print(f"\nwrote {png_path}", file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: plot.py serving.csv serving.png")
    main(sys.argv[1], sys.argv[2])
