#!/usr/bin/env python3
"""Summarises `ncu --section SpeedOfLight --csv` output (scripts/gpu-checks.sh's profile step):
one row per kernel, its launches, total and mean duration, and the mean memory, DRAM and SM
throughput as a percentage of the device's peak. The program's own output, which ncu mixes into
the same stream, is skipped (only quoted CSV rows after the header are read).

usage: ncu_summary.py NCU.csv
"""
import csv
import sys
from collections import OrderedDict

UNITS = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6, "ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}


def short(name):
    """The kernel's name without namespaces, template arguments and parameter list."""
    for anon in ("(anonymous namespace)::", "<unnamed>::"):
        name = name.replace(anon, "")
    if name.startswith("void "):
        name = name[5:]
    for stop in ("<", "("):
        cut = name.find(stop)
        if cut > 0:
            name = name[:cut]
    return name.split("::")[-1].strip()


def main(path):
    rows = []
    header = None
    with open(path, newline="") as f:
        for line in f:
            if not line.startswith('"'):
                continue
            fields = next(csv.reader([line]))
            if fields and fields[0] == "ID":
                header = fields
                continue
            # A metric's row stops after its value (the rule columns stay empty or are cut off).
            if header and len(fields) >= header.index("Metric Value") + 1:
                rows.append(dict(zip(header, fields)))
    if not rows:
        print(f"{path}: no ncu rows (did the program run a kernel?)")
        return 1
    launches = OrderedDict()  # launch ID -> (kernel, {metric: value})
    for r in rows:
        entry = launches.setdefault(r["ID"], (short(r["Kernel Name"]), r.get("Grid Size", ""),
                                              r.get("Block Size", ""), {}))
        value = r["Metric Value"].replace(",", "")
        try:
            v = float(value)
        except ValueError:
            continue
        if r["Metric Name"] == "Duration":
            if r["Metric Unit"] not in UNITS:
                sys.exit(f"{path}: unknown duration unit '{r['Metric Unit']}'")
            v *= UNITS[r["Metric Unit"]]
        entry[3][r["Metric Name"]] = v
    kernels = OrderedDict()
    for kernel, grid, block, m in launches.values():
        k = kernels.setdefault(kernel, {"n": 0, "us": 0.0, "mem": 0.0, "dram": 0.0, "sm": 0.0, "shape": ""})
        k["n"] += 1
        k["us"] += m.get("Duration", 0.0)
        k["mem"] += m.get("Memory Throughput", 0.0)
        k["dram"] += m.get("DRAM Throughput", 0.0)
        k["sm"] += m.get("Compute (SM) Throughput", 0.0)
        k["shape"] = f"{grid} x {block}"
    total = sum(k["us"] for k in kernels.values())
    print(f"{'kernel':44s} {'n':>4s} {'total us':>10s} {'mean us':>9s} {'share':>6s} {'mem %':>6s} "
          f"{'dram %':>6s} {'sm %':>6s}  last grid x block")
    for name, k in sorted(kernels.items(), key=lambda kv: -kv[1]["us"]):
        n = k["n"]
        print(f"{name[:44]:44s} {n:4d} {k['us']:10.1f} {k['us'] / n:9.1f} {100 * k['us'] / total:5.1f}% "
              f"{k['mem'] / n:6.1f} {k['dram'] / n:6.1f} {k['sm'] / n:6.1f}  {k['shape']}")
    print(f"{'all kernels':44s} {len(launches):4d} {total:10.1f}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
