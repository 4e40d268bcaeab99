#!/usr/bin/env python3
"""Reads the runs benchmarks/losses.sh made and writes table.md: seed 002's Tables 1-2 shape.
Usage: losses_report.py DIR CORPUS..."""
import csv
import os
import re
import sys

out, corpora = sys.argv[1], sys.argv[2:]
METHODS = (("seq-log", "L-BFGS, sequential log-loss (the NLL)"), ("seq-exp", "L-BFGS, sequential exp-loss"),
           ("point-log", "L-BFGS, pointwise log-loss"), ("point-exp", "L-BFGS, pointwise exp-loss"),
           ("ap", "averaged perceptron"), ("boost", "sequence boosting"))
TITLES = {"esp": "CoNLL-2002 Spanish NER (esp.train → esp.testb)", "conll2000": "CoNLL-2000 chunking (train → test)"}


def read(corpus, name):
    stem = os.path.join(out, "%s-%s" % (corpus, name))
    if not os.path.exists(stem + ".eval"):
        if os.path.exists(stem + ".err"):  # the run failed: crfx's message
            return {"failed": open(stem + ".err").read().strip().splitlines()[-1]}
        return None
    ev = open(stem + ".eval").read()
    with open(stem + ".csv") as f:  # the last report (also of a run stopped by Ctrl-C)
        last = list(csv.DictReader(f))[-1]
    stopped = [l for l in open(stem + ".err") if l.startswith("crfx train: stopped by")]
    return {"accuracy": float(re.search(r"accuracy:\s*([0-9.]+)%", ev).group(1)),
            "f1": float(re.search(r"FB1:\s*([0-9.]+)", ev).group(1)),
            "iterations": int(last["iteration"]), "active": int(last["active_features"]),
            "seconds": float(last["seconds"]), "stopped": bool(stopped)}


lines = []
for corpus in corpora:
    rows = {m: read(corpus, m) for m, _ in METHODS}
    lines += ["### " + TITLES.get(corpus, corpus), "",
              "| method | test accuracy | test F1 | training time | iterations | active features |",
              "|---|---:|---:|---:|---:|---:|"]
    for m, label in METHODS:
        r = rows[m]
        if r is None:
            lines.append("| %s | not run | | | | |" % label)
            continue
        if "failed" in r:
            lines.append("| %s | failed: %s | | | | |" % (label, r["failed"].replace("|", "\\|")))
            continue
        lines.append("| %s | %.2f%% | %.2f | %.1f s | %d%s | %s |" % (
            label, r["accuracy"], r["f1"], r["seconds"], r["iterations"], " (stopped by Ctrl-C)" if r["stopped"] else "",
            format(r["active"], ",")))
    losses = [rows[m] for m in ("seq-log", "seq-exp", "point-log", "point-exp") if rows[m] and "failed" not in rows[m]]
    if len(losses) >= 2:
        acc = [r["accuracy"] for r in losses]
        f1 = [r["f1"] for r in losses]
        lines += ["", "- The %d losses trained: accuracy %.2f–%.2f%% (range %.2f points), F1 %.2f–%.2f (range %.2f)." %
                  (len(losses), min(acc), max(acc), max(acc) - min(acc), min(f1), max(f1), max(f1) - min(f1))]
    if rows["boost"] and rows["seq-log"] and "failed" not in rows["boost"] and "failed" not in rows["seq-log"]:
        lines.append("- Boosting's model: %s active features, %.1f%% of the NLL model's %s." % (
            format(rows["boost"]["active"], ","), 100.0 * rows["boost"]["active"] / rows["seq-log"]["active"],
            format(rows["seq-log"]["active"], ",")))
    lines.append("")
open(os.path.join(out, "table.md"), "w").write("\n".join(lines))
