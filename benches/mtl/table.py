#!/usr/bin/env python3
"""Markdown tables for docs/bench/mtl.md from `pqdns-bench mtl`'s JSON (PREFIX.json).

Sizes are deterministic; times are one run's, so they are printed as ratios to ECDSA's in
the same run (and as seconds only for the record).

    python3 benches/mtl/table.py docs/bench/mtl.json
"""
import json
import sys

NUMBERS = {
    "ECDSAP256SHA256": "13",
    "ML-DSA-44": "18",
    "Falcon-512": "—",
    "ML-DSA-MTL-44": "129",
    "FL-DSA-MTL-512": "128",
    "SLH-DSA-MTL-SHA2-128s": "248 (2025)",
    "SLH-DSA-MTL-SHA2-128s-2026": "130 (2026)",
}


def pct(a):
    return f"{100.0 * a['fitting_1232'] / a['count']:.1f} %"


def main(path):
    report = json.load(open(path))
    for d in sorted({z["delegations"] for z in report["zones"]}):
        rows = [z for z in report["zones"] if z["delegations"] == d]
        ecdsa = next(z for z in rows if z["algorithm"] == "ECDSAP256SHA256")
        print(f"\n### {d} delegations ({rows[0]['signatures']} RRSIGs per algorithm)\n")
        print("| algorithm | number | A answer (B) | × ECDSA | referral mean (B) | × ECDSA "
              "| referrals ≤ 1232 | DS answers ≤ 1232 | referrals + DS ≤ 1232 "
              "| NXDOMAIN mean (B) | NXDOMAIN ≤ 1232 |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for z in rows:
            r, ds, nx = z["referrals"], z["ds"], z["nxdomain"]
            both = {"fitting_1232": r["fitting_1232"] + ds["fitting_1232"],
                    "count": r["count"] + ds["count"]}
            print(f"| {z['algorithm']} | {NUMBERS.get(z['algorithm'], '?')} "
                  f"| {z['a_answer_bytes']} | {z['a_answer_bytes'] / ecdsa['a_answer_bytes']:.2f} "
                  f"| {r['mean_bytes']:.0f} | {r['mean_bytes'] / ecdsa['referrals']['mean_bytes']:.2f} "
                  f"| {pct(r)} | {pct(ds)} | {pct(both)} "
                  f"| {nx['mean_bytes']:.0f} | {pct(nx)} |")
        print(f"\n| algorithm | signed zone (MB) | × ECDSA | full sigs | sign CPU × ECDSA "
              "| verify CPU × ECDSA | sign CPU (s) | verify CPU (s) |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for z in rows:
            print(f"| {z['algorithm']} | {z['signed_zone_bytes'] / 1e6:.2f} "
                  f"| {z['signed_zone_bytes'] / ecdsa['signed_zone_bytes']:.2f} "
                  f"| {z['full_signatures']} "
                  f"| {z['cpu_seconds'] / ecdsa['cpu_seconds']:.1f} "
                  f"| {z['verify_cpu_seconds'] / ecdsa['verify_cpu_seconds']:.2f} "
                  f"| {z['cpu_seconds']:.3f} | {z['verify_cpu_seconds']:.3f} |")
        print("\n| algorithm | NXDOMAIN mean (B), ladder held | × ECDSA | NXDOMAIN ≤ 1232 "
              "| all answers ≤ 1232 (referrals, DS, NXDOMAIN) |")
        print("|---|---:|---:|---:|---:|")
        for z in rows:
            held = z.get("nxdomain_ladder_held")
            if held:
                r, ds = z["referrals"], z["ds"]
                every = {"fitting_1232": r["fitting_1232"] + ds["fitting_1232"]
                         + held["fitting_1232"],
                         "count": r["count"] + ds["count"] + held["count"]}
                print(f"| {z['algorithm']} | {held['mean_bytes']:.0f} "
                      f"| {held['mean_bytes'] / ecdsa['nxdomain']['mean_bytes']:.2f} "
                      f"| {pct(held)} | {pct(every)} |")
        print("\n| algorithm | referral mean (B) | max | after a refresh: mean (B) | max "
              "| ≤ 1232 |")
        print("|---|---:|---:|---:|---:|---:|")
        for z in rows:
            f = z.get("refreshed_referrals")
            if f:
                r = z["referrals"]
                print(f"| {z['algorithm']} | {r['mean_bytes']:.1f} | {r['max_bytes']} "
                      f"| {f['mean_bytes']:.1f} | {f['max_bytes']} | {pct(f)} |")
    print("\n| algorithm | leaves | rungs | condensed min–max (B) | full (B) "
          "| condensed verify (µs) | full verify (µs) | full ÷ condensed |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for s in report["series"]:
        print(f"| {s['algorithm']} | {s['leaves']:,} | {s['rungs']} "
              f"| {s['condensed_min_bytes']}–{s['condensed_max_bytes']} | {s['full_bytes']} "
              f"| {s['verify_condensed_us']:.2f} | {s['verify_full_us']:.1f} "
              f"| {s['verify_full_us'] / s['verify_condensed_us']:.0f}× |")


if __name__ == "__main__":
    main(sys.argv[1])
