#!/usr/bin/env python3
"""Draws docs/bench/denial.svg from benches/online/run.sh's sizes CSV (standard library only):
the median bytes of NXDOMAIN and NODATA answers per algorithm, NSEC3 pre-signed next to online
compact denial (RFC 9824), with the smallest and largest as a whisker and the 1232-byte line."""
import csv
import sys

rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["answers"] != "0"]
out = sys.argv[2]
algorithms = list(dict.fromkeys(r["algorithm"] for r in rows))
W, H, L, T, B = 960, 440, 70, 40, 90
ymax = max(int(r["max_bytes"]) for r in rows) * 1.1
group = (W - L - 20) / len(algorithms)
bar = group / 5
colors = {("nsec3-presigned", "nxdomain"): "#d62728", ("nsec3-presigned", "nodata"): "#ff9896",
          ("online-compact", "nxdomain"): "#1f77b4", ("online-compact", "nodata"): "#aec7e8"}
order = list(colors)


def y(v):
    return T + (1 - v / ymax) * (H - T - B)


svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
       f'<rect width="{W}" height="{H}" fill="white"/>',
       f'<text x="{L}" y="20" font-size="14">Bytes of negative answers (DO, median; whiskers min-max)</text>']
for tick in range(0, int(ymax), 1000 if ymax > 5000 else 500):
    svg.append(f'<line x1="{L}" x2="{W - 20}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" stroke="#eee"/>')
    svg.append(f'<text x="{L - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">{tick}</text>')
svg.append(f'<line x1="{L}" x2="{W - 20}" y1="{y(1232):.1f}" y2="{y(1232):.1f}" stroke="black" stroke-dasharray="4 3"/>')
svg.append(f'<text x="{W - 22}" y="{y(1232) - 4:.1f}" text-anchor="end">1232 bytes</text>')
for i, alg in enumerate(algorithms):
    x0 = L + i * group + bar / 2
    svg.append(f'<text x="{x0 + 2 * bar:.1f}" y="{H - B + 18}" text-anchor="middle">{alg}</text>')
    for j, key in enumerate(order):
        r = next((r for r in rows if r["algorithm"] == alg and (r["denial"], r["kind"]) == key), None)
        if r is None:
            continue
        x = x0 + j * bar
        med, lo, hi = int(r["median_bytes"]), int(r["min_bytes"]), int(r["max_bytes"])
        svg.append(f'<rect x="{x:.1f}" y="{y(med):.1f}" width="{bar * 0.9:.1f}" height="{y(0) - y(med):.1f}" fill="{colors[key]}"/>')
        mid = x + bar * 0.45
        svg.append(f'<line x1="{mid:.1f}" x2="{mid:.1f}" y1="{y(hi):.1f}" y2="{y(lo):.1f}" stroke="black"/>')
        svg.append(f'<text x="{mid:.1f}" y="{y(hi) - 4:.1f}" text-anchor="middle" font-size="10">{med}</text>')
for j, key in enumerate(order):
    lx = L + j * 210
    svg.append(f'<rect x="{lx}" y="{H - 40}" width="12" height="12" fill="{colors[key]}"/>')
    svg.append(f'<text x="{lx + 16}" y="{H - 30}">{key[0]} {key[1]}</text>')
svg.append("</svg>")
open(out, "w").write("\n".join(svg) + "\n")
