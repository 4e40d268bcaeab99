#!/usr/bin/env python3
"""Reads the logs benchmarks/maxent.sh wrote (seed 001's Figure 2), writes table.md with the
seed's ordering checked, and the gnuplot scripts of the two figures.
Usage: maxent_report.py DIR TRAINER..."""
import csv
import math
import os
import sys

out, trainers = sys.argv[1], sys.argv[2:]


def load(name):
    with open(os.path.join(out, name + ".csv")) as f:
        rows = list(csv.DictReader(f))
    return [{"iteration": int(r["iteration"]), "objective": float(r["objective"]), "seconds": float(r["seconds"]),
             "dev_f1": float(r["dev_f1"]) if r.get("dev_f1") else None} for r in rows]


def test_f1(name):
    line = open(os.path.join(out, name + ".eval")).read()
    return float(line.rsplit("FB1:", 1)[1].split()[0])


def stop_line(name):
    for line in open(os.path.join(out, name + ".err")):
        if line.startswith("crfx train: stopped by"):
            return "stopped at the time budget"
        if line.startswith("stopped:"):
            return line.split(":", 1)[1].strip()
    return "?"


logs = {t: load(t) for t in trainers}
reference = load("reference")
f_star = min(r["objective"] for rows in list(logs.values()) + [reference] for r in rows)


def gap(r):
    return (r["objective"] - f_star) / abs(f_star)


def time_to(rows, level):
    for r in rows:
        if gap(r) <= level:
            return r["seconds"]
    return None


def fmt_time(t):
    return "not reached" if t is None else "%.1f s" % t


lines = ["Seed 001 Figure 2: Maxent on CoNLL-2000, σ² = 10 (--c2 0.05); f* = %.6f (the lowest objective logged; "
         "tight L-BFGS: %.6f after %d iterations, test F1 %.2f)." % (f_star, reference[-1]["objective"],
                                                                     reference[-1]["iteration"], test_f1("reference")),
         "", "| trainer | s / iteration | time to 1e-1 | time to 1e-2 | at the end | stopped | test F1 |",
         "|---|---:|---:|---:|---|---|---:|"]
for t in trainers:
    rows = logs[t]
    end = rows[-1]
    lines.append("| %s | %.2f | %s | %s | %.1e after %.0f s (%d iterations) | %s | %.2f |" % (
        t, end["seconds"] / end["iteration"], fmt_time(time_to(rows, 1e-1)), fmt_time(time_to(rows, 1e-2)),
        gap(end), end["seconds"], end["iteration"], stop_line(t), test_f1(t)))


def before(a, b, level):
    """Whether trainer a reaches the level before trainer b (or, neither reaching it, ends lower)."""
    if a not in logs or b not in logs:
        return None
    ta, tb = time_to(logs[a], level), time_to(logs[b], level)
    if ta is not None or tb is not None:
        return ta is not None and (tb is None or ta < tb)
    return gap(logs[a][-1]) < gap(logs[b][-1])


lines += ["", "The seed's ordering:"]
for a, b in (("cd", "scgis"), ("scgis", "gis")):
    ok = before(a, b, 1e-2)
    if ok is not None:
        lines.append("- %s reaches a relative difference of 1e-2 before %s (or ends lower): %s" %
                     (a, b, "yes" if ok else "**no**"))
open(os.path.join(out, "table.md"), "w").write("\n".join(lines) + "\n")

# The figures: one data file per trainer and figure, one gnuplot script per figure.
for stem, ylabel, value, logscale in (("gap-seconds", "(f(w) − f*) / f*", gap, True),
                                      ("f1-seconds", "test F1 (after each iteration)", lambda r: r["dev_f1"], False)):
    dat = []
    for t in trainers:
        path = "%s-%s.dat" % (t, stem)
        with open(os.path.join(out, path), "w") as f:
            for r in logs[t]:
                v = value(r)
                if v is not None and (not logscale or v > 0) and not math.isnan(v):
                    f.write("%g %g\n" % (r["seconds"], v))
        dat.append((t, path))
    plot = ", ".join("'%s' using 1:2 with lines lw 2 title '%s'" % (p, n) for n, p in dat)
    gp = ["set grid", "set xlabel 'training time (s), one thread'", "set ylabel '%s'" % ylabel,
          "set key outside right", "set title 'Maxent on CoNLL-2000, σ² = 10 (seed 001, Figure 2)'"]
    if logscale:
        gp += ["set logscale y", "set format y '10^{%L}'"]
    else:
        gp += ["set yrange [80:95]"]
    for term, ext in (("pngcairo size 900,540", "png"), ("svg size 900,540", "svg")):
        gp += ["set terminal " + term, "set output '%s.%s'" % (stem, ext), "plot " + plot]
    open(os.path.join(out, stem + ".gp"), "w").write("\n".join(gp) + "\n")
