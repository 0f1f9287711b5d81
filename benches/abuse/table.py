#!/usr/bin/env python3
"""Prints the amplification tables of docs/bench/abuse.md from benches/abuse/run.sh's CSV:
bytes out / bytes in per (zone, query) and server setting, and per query rate for
pqdns-server's defaults."""
import csv
import sys
from collections import defaultdict

rows = list(csv.DictReader(open(sys.argv[1])))


def table(rows, column_of):
    cells = defaultdict(dict)
    columns = []
    for r in rows:
        column = column_of(r)
        if column not in columns:
            columns.append(column)
        _, zone, _ = r["server"].split(" ")
        cells[(zone, r["probe"])][column] = f"{float(r['ratio']):.2f} ({float(r['ip_ratio']):.2f})"
    print("| zone | query | " + " | ".join(columns) + " |")
    print("|---|---|" + "---:|" * len(columns))
    for (zone, probe), by_column in cells.items():
        print(f"| {zone} | {probe} | " + " | ".join(by_column.get(c, "—") for c in columns) + " |")
    print()


def setting(r):
    server, _, limits = r["server"].split(" ")
    return f"{server} {limits}"


table([r for r in rows if "defaults" not in r["server"]], setting)
table([r for r in rows if "defaults" in r["server"]], lambda r: f"defaults, {r['rate_qps']}/s")
worst = max(
    (float(r["ratio"]), r["server"], r["probe"], r["rate_qps"])
    for r in rows
    if "defaults" in r["server"]
)
print(f"worst cookie-less ratio at pqdns-server's defaults: {worst[0]:.2f} "
      f"({worst[1]}, {worst[2]}, {worst[3]}/s)")
