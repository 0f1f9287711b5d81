#!/usr/bin/env python3
"""Plot of benches/fleet/run.sh: member zones served signed at pqdns and at the downstream
Knot against seconds since the primary's new catalog.   plot.py CSV PNG N"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

rows = list(csv.DictReader(open(sys.argv[1])))
fig, ax = plt.subplots(figsize=(7, 4))
for server, label in [("pqdns", "pqdns (consumer, signer)"),
                      ("knot-downstream", "Knot 3.2 (interprets pqdns's catalog)")]:
    mine = [r for r in rows if r["server"] == server]
    ax.plot([0.0] + [float(r["seconds"]) for r in mine], [0] + [int(r["signed"]) for r in mine],
            marker="o", label=label)
ax.axhline(int(sys.argv[3]), color="grey", linewidth=0.5)
ax.set_xlabel("seconds since the primary's catalog listed the members")
ax.set_ylabel("member zones served signed")
ax.set_title(f"{sys.argv[3]} member zones: Knot catalog → pqdns → Knot")
ax.legend()
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=100)
