#!/usr/bin/env python3
"""Reads the logs benchmarks/batch.sh wrote and writes table.md: per trainer and batch size the
effective passes and seconds until the objective is within 1e-3 (relative) of f* (the tight
L-BFGS run's best objective), the final relative gap, and test F1.
Usage: batch_report.py DIR "TRAINERS" "BATCHES\""""
import csv
import os
import sys

out, trainers, batches = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
GAP = 1e-3


def load(name):
    with open(os.path.join(out, name + ".csv")) as f:
        return [{k: float(r[k]) for k in ("passes", "objective", "seconds")} for r in csv.DictReader(f)]


def f1(name):
    line = open(os.path.join(out, name + ".eval")).read()
    return line.rsplit("FB1:", 1)[1].split()[0] if "FB1:" in line else "—"


lbfgs = load("lbfgs")
fstar = min(r["objective"] for r in lbfgs)
rows = ["| trainer | batch size | epochs | passes to within 1e-3 of f* | seconds to it | final gap | test F1 |",
        "|---|---:|---:|---:|---:|---:|---:|"]
first = next(r for r in lbfgs if r["objective"] <= fstar * (1 + GAP))
rows.append("| lbfgs (f*) | full | %d its | %.1f | %.1f | 0 | %s |" % (len(lbfgs), first["passes"], first["seconds"],
                                                                    f1("lbfgs")))
for t in trainers:
    for b in batches:
        name = "%s-b%s" % (t, b)
        if not os.path.exists(os.path.join(out, name + ".csv")):
            continue  # not run (e.g. a -scaled trainer at batch size 1, the unscaled one)
        log = load(name)
        hit = next((r for r in log if r["objective"] <= fstar * (1 + GAP)), None)
        gap = (log[-1]["objective"] - fstar) / fstar
        rows.append("| %s | %s | %d | %s | %s | %.1e | %s |" % (
            t, b, len(log), "%.1f" % hit["passes"] if hit else "not reached", "%.1f" % hit["seconds"] if hit else "—",
            gap, f1(name)))
with open(os.path.join(out, "table.md"), "w") as f:
    f.write(open(os.path.join(out, "machine.txt")).read() + "\nf* = %.10g\n\n" % fstar + "\n".join(rows) + "\n")
