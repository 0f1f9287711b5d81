#!/usr/bin/env python3
"""Draws docs/bench/dnstap.svg from benches/dnstap/run.sh's CSVs (standard library only): each
repetition's CPU per query with dnstap on divided by the same repetition's without, per
program, the median as a bar, the repetitions as dots, and the goal of issue 32 (1.10) as a
line.

    benches/dnstap/plot.py OUT.svg NAME=CSV [NAME=CSV ...]
"""
import csv
import statistics
import sys

out = sys.argv[1]
series = []
for arg in sys.argv[2:]:
    name, path = arg.split("=", 1)
    rows = list(csv.DictReader(open(path)))
    per = {(r["rep"], r["dnstap"]): float(r["cpu_us_per_query"]) for r in rows}
    reps = sorted({r["rep"] for r in rows}, key=int)
    series.append((name, [per[(r, "on")] / per[(r, "off")] for r in reps]))

W, H, L, T, B = 640, 360, 70, 40, 50
lo, hi = 0.9, max(1.2, max(max(r) for _, r in series) + 0.05)
group = (W - L - 20) / len(series)


def y(v):
    return T + (hi - v) / (hi - lo) * (H - T - B)


svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
       f'<rect width="{W}" height="{H}" fill="white"/>',
       f'<text x="{L}" y="20" font-size="14">CPU per query, dnstap on ÷ off (median bar, repetitions as dots)</text>']
tick = lo
while tick <= hi + 1e-9:
    svg.append(f'<line x1="{L}" x2="{W - 20}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" stroke="#eee"/>')
    svg.append(f'<text x="{L - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">{tick:.2f}</text>')
    tick += 0.05
svg.append(f'<line x1="{L}" x2="{W - 20}" y1="{y(1.10):.1f}" y2="{y(1.10):.1f}" stroke="#d62728" stroke-dasharray="4 3"/>')
svg.append(f'<text x="{W - 22}" y="{y(1.10) - 4:.1f}" text-anchor="end" fill="#d62728">goal 1.10</text>')
svg.append(f'<line x1="{L}" x2="{W - 20}" y1="{y(1.0):.1f}" y2="{y(1.0):.1f}" stroke="black"/>')
for i, (name, ratios) in enumerate(series):
    x = L + i * group + group / 4
    med = statistics.median(ratios)
    svg.append(f'<rect x="{x:.1f}" y="{y(med):.1f}" width="{group / 2:.1f}" height="{y(lo) - y(med):.1f}" fill="#1f77b4" opacity="0.6"/>')
    svg.append(f'<text x="{x + group / 2 + 4:.1f}" y="{y(med) + 4:.1f}">{med:.3f}</text>')
    for j, r in enumerate(ratios):
        cx = x + group / 2 * (j + 1) / (len(ratios) + 1)
        svg.append(f'<circle cx="{cx:.1f}" cy="{y(r):.1f}" r="3" fill="black"/>')
    svg.append(f'<text x="{x + group / 4:.1f}" y="{H - B + 18}" text-anchor="middle">{name}</text>')
svg.append("</svg>")
open(out, "w").write("\n".join(svg) + "\n")
