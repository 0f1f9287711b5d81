#!/usr/bin/env python3
"""Prints the amplification table of docs/bench/abuse.md from benches/abuse/run.sh's CSV."""
import csv
import sys
from collections import defaultdict

rows = list(csv.DictReader(open(sys.argv[1])))
# (zone, probe) -> {column: "ratio (ip ratio)"}
cells = defaultdict(dict)
columns = []
for r in rows:
    server, zone, rrl = r["server"].split(" ")
    column = f"{server} {rrl}"
    if column not in columns:
        columns.append(column)
    cells[(zone, r["probe"])][column] = f"{float(r['ratio']):.2f} ({float(r['ip_ratio']):.2f})"
print("| zone | query | " + " | ".join(columns) + " |")
print("|---|---|" + "---:|" * len(columns))
for (zone, probe), by_column in cells.items():
    print(f"| {zone} | {probe} | " + " | ".join(by_column.get(c, "—") for c in columns) + " |")
