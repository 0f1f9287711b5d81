#!/usr/bin/env python3
"""Draws docs/bench/abuse.svg from benches/abuse/run.sh's CSV (standard library only): bytes
out / bytes in of cookie-less queries at pqdns-server's defaults against the query rate, one
line per (zone, query), with the 3x goal and, at the right, the same queries with every limit
off (5000/s) for comparison."""
import csv
import math
import sys

rows = list(csv.DictReader(open(sys.argv[1])))
out = sys.argv[2]
W, H, L, R, T, B = 960, 420, 70, 340, 40, 60
defaults = [r for r in rows if "defaults" in r["server"]]
off = [r for r in rows if "limits-off" in r["server"] and "valid cookie" not in r["probe"]]
rates = sorted({int(r["rate_qps"]) for r in defaults})
ymax = 30.0


def x(rate):
    lo, hi = math.log10(rates[0]), math.log10(rates[-1])
    return L + (math.log10(rate) - lo) / (hi - lo) * (W - L - R - 60)


def y(v):
    return T + (1 - math.log10(max(v, 0.3) / 0.3) / math.log10(ymax / 0.3)) * (H - T - B)


colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
          "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd"]
series = {}
for r in defaults:
    _, zone, _ = r["server"].split(" ")
    series.setdefault((zone, r["probe"]), []).append((int(r["rate_qps"]), float(r["ratio"])))
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
       f'<rect width="{W}" height="{H}" fill="white"/>',
       f'<text x="{W/2}" y="20" text-anchor="middle" font-size="14">Cookie-less amplification (bytes out / bytes in), pqdns-server defaults</text>']
for v in [0.5, 1, 3, 10, 30]:
    svg.append(f'<line x1="{L}" x2="{W-R}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/>')
    svg.append(f'<text x="{L-6}" y="{y(v)+4:.1f}" text-anchor="end">{v:g}x</text>')
svg.append(f'<line x1="{L}" x2="{W-R}" y1="{y(3):.1f}" y2="{y(3):.1f}" stroke="red" stroke-dasharray="6,4"/>')
svg.append(f'<text x="{W-R-4}" y="{y(3)-5:.1f}" text-anchor="end" fill="red">goal 3x</text>')
for rate in rates:
    svg.append(f'<text x="{x(rate):.1f}" y="{H-B+18}" text-anchor="middle">{rate}/s</text>')
svg.append(f'<text x="{(L+W-R-60)/2}" y="{H-B+38}" text-anchor="middle">query rate from one address (log)</text>')
xo = W - R - 20
svg.append(f'<text x="{xo}" y="{H-B+18}" text-anchor="middle">off</text>')
for i, ((zone, probe), pts) in enumerate(sorted(series.items())):
    c = colors[i % len(colors)]
    pts.sort()
    path = " ".join(f"{x(a):.1f},{y(v):.1f}" for a, v in pts)
    svg.append(f'<polyline points="{path}" fill="none" stroke="{c}" stroke-width="2"/>')
    for a, v in pts:
        svg.append(f'<circle cx="{x(a):.1f}" cy="{y(v):.1f}" r="3" fill="{c}"/>')
    ref = [float(r["ratio"]) for r in off if r["probe"] == probe and zone in r["server"]]
    if ref:
        svg.append(f'<rect x="{xo-4}" y="{y(ref[0])-4:.1f}" width="8" height="8" fill="{c}"/>')
    svg.append(f'<rect x="{W-R+10}" y="{T+10+i*18}" width="12" height="12" fill="{c}"/>')
    svg.append(f'<text x="{W-R+28}" y="{T+20+i*18}">{zone}, {probe}</text>')
svg.append(f'<text x="{W-R+10}" y="{T+30+len(series)*18}">squares at "off": every limit off, 5000/s</text>')
svg.append("</svg>")
open(out, "w").write("\n".join(svg))
print(f"wrote {out}")
