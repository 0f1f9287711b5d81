#!/usr/bin/env python3
"""Draws the soak chart from benches/soak/run.sh's CSV (standard library only): three panels
against time, sharing the x axis: the sampled service's RSS (MiB); its descriptors and client
connections open; answers and errors+timeouts per second. The service is the process sampled
as LABEL=PID (columns LABEL_rss_kib, LABEL_fds): pqdns-server or pqdns-resolver."""
import csv
import sys

rows = list(csv.DictReader(open(sys.argv[1])))
out = sys.argv[2]
W, L, R, PH, GAP, T = 820, 70, 150, 150, 40, 40
H = T + 3 * PH + 2 * GAP + 50
t = [int(r["second"]) for r in rows]
tmax = max(t) if t else 1
label = next(k[: -len("_rss_kib")] for k in rows[0] if k.endswith("_rss_kib"))


def x(s):
    return L + s / tmax * (W - L - R)


svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
       f'<rect width="{W}" height="{H}" fill="white"/>',
       f'<text x="{W/2}" y="20" text-anchor="middle" font-size="14">Soak: pqdns-{label} under DoT + DoH clients (benches/soak/run.sh)</text>']


def panel(i, title, series):
    top = T + i * (PH + GAP)
    ymax = max([max(v) for _, v, _ in series if v] + [1]) * 1.1
    y = lambda v: top + PH - v / ymax * PH
    svg.append(f'<rect x="{L}" y="{top}" width="{W-L-R}" height="{PH}" fill="none" stroke="#999"/>')
    svg.append(f'<text x="{L}" y="{top-6}" font-size="12">{title}</text>')
    for k in range(5):
        v = ymax * k / 4
        svg.append(f'<line x1="{L}" x2="{W-R}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#eee"/>')
        svg.append(f'<text x="{L-6}" y="{y(v)+4:.1f}" text-anchor="end">{v:,.0f}</text>')
    for j, (name, vals, color) in enumerate(series):
        pts = " ".join(f"{x(s):.1f},{y(v):.1f}" for s, v in zip(t, vals))
        svg.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="1.5"/>')
        svg.append(f'<rect x="{W-R+10}" y="{top+8+j*18}" width="12" height="12" fill="{color}"/>')
        svg.append(f'<text x="{W-R+28}" y="{top+18+j*18}">{name}</text>')


col = lambda k: [float(r[k]) for r in rows]
panel(0, f"{label} RSS, MiB", [("RSS", [v / 1024 for v in col(f"{label}_rss_kib")], "#1f77b4")])
panel(1, "connections", [(f"{label} descriptors", col(f"{label}_fds"), "#2ca02c"),
                         ("client connections", col("open"), "#ff7f0e")])
panel(2, "per second", [("answers", col("answers"), "#9467bd"),
                        ("handshakes", col("handshakes"), "#8c564b"),
                        ("errors + timeouts", [a + b for a, b in zip(col("errors"), col("timeouts"))], "#d62728")])
bottom = T + 3 * PH + 2 * GAP
for k in range(0, 11):
    s = tmax * k / 10
    svg.append(f'<text x="{x(s):.1f}" y="{bottom+16}" text-anchor="middle">{s/60:.0f} min</text>' if tmax >= 120 else
               f'<text x="{x(s):.1f}" y="{bottom+16}" text-anchor="middle">{s:.0f} s</text>')
svg.append("</svg>")
open(out, "w").write("\n".join(svg))
