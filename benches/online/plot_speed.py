#!/usr/bin/env python3
"""Draws docs/bench/online-speed.svg from benches/online/run.sh's speed CSVs (standard library
only): per algorithm, the cold online signing rate over the bare primitive's (cold_vs_raw) and
the CPU of a cache hit over a pre-signed answer's (hit_vs_presigned), every round of every CSV
given as a dot and their median as a bar, with the goals (>= 0.80 and <= 1.2) as dashed lines.

    plot_speed.py OUT.svg SPEED.csv [SPEED.csv ...]
"""
import csv
import statistics
import sys

out, paths = sys.argv[1], sys.argv[2:]
rows = [r for p in paths for r in csv.DictReader(open(p))]
algorithms = list(dict.fromkeys(r["algorithm"] for r in rows))
panels = [("cold_vs_raw", "cold online answers / bare signatures", 0.80, "goal &gt;= 0.80"),
          ("hit_vs_presigned", "cache-hit CPU / pre-signed CPU", 1.2, "goal &lt;= 1.2")]
W, H, L, T, B, GAP = 960, 400, 60, 50, 60, 40
pw = (W - L - 20 - GAP) / len(panels)
ymax = 1.4


def y(v):
    return T + (1 - v / ymax) * (H - T - B)


svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
       f'<rect width="{W}" height="{H}" fill="white"/>',
       f'<text x="{L}" y="20" font-size="14">Online signing speed (bars: median of {len(paths)} run(s) x rounds; dots: rounds)</text>']
for k, (metric, title, goal, label) in enumerate(panels):
    x0 = L + k * (pw + GAP)
    svg.append(f'<text x="{x0}" y="{T - 10}">{title}</text>')
    for tick in [0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4]:
        svg.append(f'<line x1="{x0}" x2="{x0 + pw}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" stroke="#eee"/>')
        svg.append(f'<text x="{x0 - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">{tick:.1f}</text>')
    group = pw / len(algorithms)
    for i, alg in enumerate(algorithms):
        values = [float(r["value"]) for r in rows if r["algorithm"] == alg and r["metric"] == metric]
        if not values:
            continue
        med = statistics.median(values)
        x = x0 + i * group + group * 0.2
        bw = group * 0.6
        svg.append(f'<rect x="{x:.1f}" y="{y(med):.1f}" width="{bw:.1f}" height="{y(0) - y(med):.1f}" fill="#aec7e8"/>')
        svg.append(f'<text x="{x + bw / 2:.1f}" y="{y(max(values)) - 6:.1f}" text-anchor="middle">{med:.3f}</text>')
        for v in values:
            svg.append(f'<circle cx="{x + bw / 2:.1f}" cy="{y(v):.1f}" r="2.5" fill="black"/>')
        svg.append(f'<text x="{x + bw / 2:.1f}" y="{H - B + 18}" text-anchor="middle">{alg}</text>')
    svg.append(f'<line x1="{x0}" x2="{x0 + pw}" y1="{y(goal):.1f}" y2="{y(goal):.1f}" stroke="#d62728" stroke-dasharray="4 3"/>')
    svg.append(f'<text x="{x0 + 4}" y="{y(goal) - 4:.1f}" fill="#d62728">{label}</text>')
svg.append("</svg>")
open(out, "w").write("\n".join(svg) + "\n")
