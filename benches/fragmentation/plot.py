"""Plots docs/bench/fragmentation.csv: time to a complete answer, packets and bytes per method.

    python3 benches/fragmentation/plot.py docs/bench/fragmentation.csv docs/bench/fragmentation.png
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

METHODS = ["arrf", "qbf", "arrf-push", "qbf-push", "tc+tcp", "dot-reused"]
COLORS = {"arrf": "#1f77b4", "qbf": "#2ca02c", "arrf-push": "#9ecae1", "qbf-push": "#a1d99b",
          "tc+tcp": "#d62728", "dot-reused": "#7f7f7f"}


def main(csv_path, png_path):
    rows = list(csv.DictReader(open(csv_path)))
    algs = list(dict.fromkeys(r["algorithm"] for r in rows))
    rtts = sorted({int(r["rtt_ms"]) for r in rows})
    qtypes = ["DNSKEY", "A"]
    fig, axes = plt.subplots(3, len(qtypes), figsize=(13, 11))
    metrics = [("median_ms", "median time to complete answer (ms)"),
               ("packets", "IP packets per query"),
               ("ip_bytes", "IP bytes per query")]
    width = 0.8 / len(METHODS)
    for col, qtype in enumerate(qtypes):
        for row, (key, label) in enumerate(metrics):
            ax = axes[row][col]
            groups = [(a, t) for a in algs for t in (rtts if key == "median_ms" else rtts[:1])]
            for i, m in enumerate(METHODS):
                vals = []
                for a, t in groups:
                    match = [r for r in rows if r["algorithm"] == a and int(r["rtt_ms"]) == t
                             and r["qtype"] == qtype and r["method"] == m]
                    vals.append(float(match[0][key]) if match else 0.0)
                xs = [g + (i - (len(METHODS) - 1) / 2) * width for g in range(len(groups))]
                ax.bar(xs, vals, width, label=m, color=COLORS[m])
            ax.set_xticks(range(len(groups)))
            ax.set_xticklabels([f"{a}\n{t} ms" if key == "median_ms" else a for a, t in groups],
                               fontsize=7, rotation=90 if key == "median_ms" else 0)
            ax.set_ylabel(label)
            ax.set_title(f"{qtype}: {label}", fontsize=9)
            if row == 0 and col == 0:
                ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png_path, dpi=100)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
