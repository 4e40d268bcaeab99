#!/usr/bin/env python3
"""Reads the logs benchmarks/convergence.sh wrote, writes table.md (with the acceptance checks of
the seed-trainers issue) and one gnuplot script per figure. Usage: convergence_report.py DIR"""
import csv
import os
import sys

out = sys.argv[1]
L2 = ["l2-lbfgs", "l2-sgd", "l2-sag-uniform", "l2-sag-lipschitz", "l2-sag-mixed", "l2-saga", "l2-adf",
      "l2-adf-beta0.9"]
L1 = ["l1-owlqn", "l1-sgd", "l1-two-stage"]
NED = ["ned-lbfgs", "ned-sag-mixed"]  # (c) seed 004's Dutch NER set, beside the issue's CoNLL-2000
PARTS = (("l2", L2, "(a) CoNLL-2000, L2, c2 = 0.5 (λ = 1/n)", "CoNLL-2000, L2, λ = 1/n"),
         ("l1", L1, "(b) CoNLL-2000, L1, c1 = 1, c2 = 0", "CoNLL-2000, L1, c1 = 1"),
         ("ned", NED, "(c) CoNLL-2002 Dutch NER (ned.train, ned.testb), same template, L2, c2 = 0.5 (λ = 1/n)",
          "CoNLL-2002 Dutch, L2, λ = 1/n"))


def load(name):
    path = os.path.join(out, name + ".csv")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        for k in ("passes", "objective", "seconds"):
            r[k] = float(r[k])
        r["active_features"] = int(r["active_features"])
        r["iteration"] = int(r["iteration"])
        r["dev_f1"] = float(r["dev_f1"]) if r.get("dev_f1") else None
    return rows


def test_f1(name):
    path = os.path.join(out, name + ".eval")
    if not os.path.exists(path):
        return None
    line = open(path).read()
    return float(line.rsplit("FB1:", 1)[1].split()[0]) if "FB1:" in line else None


def first_reaching(rows, target, key):
    for r in rows:
        if r["objective"] <= target:
            return r[key]
    return None


logs = {n: load(n) for n in L2 + L1 + NED}
missing = [n for n, rows in logs.items() if not rows]
if missing:
    print("missing logs: " + ", ".join(missing), file=sys.stderr)

fstar = {}
for part, lbfgs in (("l2", "l2-lbfgs"), ("ned", "ned-lbfgs")):
    if logs[lbfgs]:
        fstar[part] = min(r["objective"] for r in logs[lbfgs])
l1_all = [r["objective"] for n in L1 if logs[n] for r in logs[n]]
if l1_all:
    fstar["l1"] = min(l1_all)

def passes_to_gap(part, names):
    """Effective passes (and seconds) until f ≤ f*·(1 + gap), for the L2 parts."""
    gaps = (1e-1, 1e-2, 1e-3, 1e-4)
    out = ["Effective passes (seconds) until (f − f*)/f* ≤ gap:", "",
           "| trainer | " + " | ".join("%g" % g for g in gaps) + " |",
           "|---|" + "---:|" * len(gaps)]
    for n in names:
        rows = logs[n]
        if not rows:
            continue
        cells = []
        for g in gaps:
            target = fstar[part] * (1 + g)
            r = next((r for r in rows if r["objective"] <= target), None)
            cells.append("%.1f (%.1f s)" % (r["passes"], r["seconds"]) if r else "–")
        out.append("| %s | %s |" % (n, " | ".join(cells)))
    return out + [""]


lines = []
machine = open(os.path.join(out, "machine.txt")).read().strip() if os.path.exists(os.path.join(out, "machine.txt")) else ""
lines += ["# Convergence on CoNLL-2000 (chunking.template), and SAG on CoNLL-2002 Dutch", "",
          "Made by `benchmarks/convergence.sh`.", ""]
lines += ["```", machine, "```", ""]
for part, names, title, _ in PARTS:
    fs = fstar.get(part)
    lines += ["## " + title, ""]
    if fs is not None:
        lines += ["f* = %.6f (%s)" % (fs, "best objective logged by any L1 run" if part == "l1" else "tight L-BFGS run"), ""]
    lines += ["| trainer | final objective | (f − f*)/f* | active features | test F1 | passes | seconds |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for n in names:
        rows = logs[n]
        if not rows:
            lines.append("| %s | (no log) | | | | | |" % n)
            continue
        last = rows[-1]
        rel = (last["objective"] - fs) / abs(fs) if fs is not None else float("nan")
        f1 = test_f1(n)
        lines.append("| %s | %.4f | %.2e | %d | %s | %.1f | %.1f |" % (
            n, last["objective"], rel, last["active_features"], "%.2f" % f1 if f1 is not None else "–",
            last["passes"], last["seconds"]))
    lines.append("")
    if part != "l1" and fs is not None:
        lines += passes_to_gap(part, names)

# Acceptance checks.
lines += ["## Acceptance checks", ""]
checks = []
for part, prefix, label in (("l2", "- ", "SAG (mixed)"),
                            ("ned", "- (for reference, not the issue's data set) ", "on CoNLL-2002 Dutch, SAG (mixed)")):
    if part not in fstar or not logs[part + "-sag-mixed"]:
        continue
    target = fstar[part] + 1e-4 * abs(fstar[part])
    p_lbfgs = first_reaching(logs[part + "-lbfgs"], target, "passes")
    p_sag = first_reaching(logs[part + "-sag-mixed"], target, "passes")
    ok = p_lbfgs is not None and p_sag is not None and p_sag <= p_lbfgs / 3
    checks.append("%s%s reaches f* + 1e-4·|f*| = %.4f after %s effective passes; L-BFGS after %s; "
                  "ratio %s (goal ≤ 1/3): **%s**" % (
                      prefix, label, target, "%.1f" % p_sag if p_sag is not None else "never",
                      "%.1f" % p_lbfgs if p_lbfgs is not None else "never",
                      "%.3f" % (p_sag / p_lbfgs) if p_sag and p_lbfgs else "–", "met" if ok else "NOT met"))
if logs["l1-owlqn"] and logs["l1-two-stage"]:
    o, t = logs["l1-owlqn"][-1], logs["l1-two-stage"][-1]
    rel = (t["objective"] - o["objective"]) / abs(o["objective"])
    tr = t["seconds"] / o["seconds"]
    ar = abs(t["active_features"] - o["active_features"]) / max(1, o["active_features"])
    ok = rel <= 1e-3 and tr <= 0.7 and ar <= 0.1
    target = o["objective"] * (1 + 1e-3)
    t_two = first_reaching(logs["l1-two-stage"], target, "seconds")
    t_owl = first_reaching(logs["l1-owlqn"], target, "seconds")
    two_row = next((r for r in logs["l1-two-stage"] if r["objective"] <= target), None)
    if t_two is not None and t_owl is not None:
        checks.append("- (for reference) time to reach OWL-QN's final objective + 0.1%% (%.4f): two-stage %.1f s "
                      "(%d active features), OWL-QN %.1f s; ratio %.2f" % (
                          target, t_two, two_row["active_features"], t_owl, t_two / t_owl))
    checks.append("- two-stage: objective %.4f vs OWL-QN %.4f (%+.3f%%, goal within 0.1%%), time %.1f s vs %.1f s "
                  "(ratio %.2f, goal ≤ 0.7), active features %d vs %d (%.1f%%, goal within 10%%): **%s**" % (
                      t["objective"], o["objective"], 100 * rel, t["seconds"], o["seconds"], tr,
                      t["active_features"], o["active_features"], 100 * ar, "met" if ok else "NOT met"))
for adf, setting in (("l2-adf", "paper's β = 0.6"), ("l2-adf-beta0.9", "β = 0.9")):
    if not (logs["l2-sgd"] and logs[adf]):
        continue
    sgd = logs["l2-sgd"]
    goal = sgd[-1]["dev_f1"]
    reach = next((r["iteration"] for r in logs[adf] if r["dev_f1"] is not None and goal is not None
                  and r["dev_f1"] >= goal), None)
    ok = reach is not None and reach <= 10
    checks.append("- ADF (%s) reaches SGD's %d-epoch test F1 (%s) at epoch %s (goal ≤ 10): **%s**" % (
        setting, sgd[-1]["iteration"], "%.2f" % goal if goal is not None else "–", reach if reach else "never",
        "met" if ok else "NOT met"))
lines += checks + [""]


def seed_spread():
    """(d): the ADF comparison for every shuffling seed the benchmark ran (seed 1 is (a)'s runs)."""
    import glob
    import re
    seeds = sorted(int(re.search(r"seed(\d+)\.csv$", p).group(1))
                   for p in glob.glob(os.path.join(out, "l2-sgd-seed*.csv")))
    runs = {1: ("l2-sgd", "l2-adf", "l2-adf-beta0.9")}
    for seed in seeds:
        runs[seed] = ("l2-sgd-seed%d" % seed, "l2-adf-seed%d" % seed, "l2-adf-beta0.9-seed%d" % seed)
    rows = {}
    for seed, names in sorted(runs.items()):
        sgd, adf6, adf9 = (load(n) for n in names)
        if not (sgd and adf6 and adf9):
            print("seed %d: missing logs for (d)" % seed, file=sys.stderr)
            continue
        rows[seed] = (sgd[-1]["dev_f1"], [r["dev_f1"] for r in adf6[:10]], [r["dev_f1"] for r in adf9[:10]],
                      sgd[-1]["iteration"])
    if len(rows) < 2:
        return []

    def reach(curve, goal):
        return next((e + 1 for e, f in enumerate(curve) if f >= goal), None)

    out_lines = ["## (d) ADF against SGD over shuffling seeds (CoNLL-2000, L2, c2 = 0.5)", "",
                 "Test F1; ADF columns: best F1 within 10 epochs, and the first epoch ≤ 10 that reaches the same "
                 "seed's SGD F1 (– if none). The mean row averages each epoch's F1 over the seeds; its ADF columns are that "
                 "mean curve's.", "",
                 "| seed | sgd-l1 F1 after %d epochs | adf β 0.6: best F1 ≤ 10 epochs | epoch | F1 at epoch 10 "
                 "| adf β 0.9: best F1 ≤ 10 epochs | epoch |" % next(iter(rows.values()))[3],
                 "|---:|---:|---:|---:|---:|---:|---:|"]
    met6 = met9 = 0
    for seed, (goal, a6, a9, _) in sorted(rows.items()):
        r6, r9 = reach(a6, goal), reach(a9, goal)
        met6 += r6 is not None
        met9 += r9 is not None
        out_lines.append("| %d | %.2f | %.2f | %s | %.2f | %.2f | %s |" % (
            seed, goal, max(a6), r6 or "–", a6[-1], max(a9), r9 or "–"))
    k = len(rows)
    mean_goal = sum(r[0] for r in rows.values()) / k
    mean6 = [sum(r[1][e] for r in rows.values()) / k for e in range(10)]
    mean9 = [sum(r[2][e] for r in rows.values()) / k for e in range(10)]
    spread = max(r[0] for r in rows.values()) - min(r[0] for r in rows.values())
    out_lines.append("| mean | %.3f | %.3f | %s | %.3f | %.3f | %s |" % (
        mean_goal, max(mean6), reach(mean6, mean_goal) or "–", mean6[-1], max(mean9), reach(mean9, mean_goal) or "–"))
    out_lines += ["", "- SGD's final test F1 spans %.2f points over the %d seeds. ADF (β = 0.6) reaches its seed's "
                  "SGD F1 within 10 epochs on %d of %d seeds, ADF (β = 0.9) on %d of %d; averaged over the seeds, "
                  "ADF (β = 0.6) %s and ADF (β = 0.9) %s." % (
                      spread, k, met6, k, met9, k,
                      "reaches SGD's mean F1 at epoch %d" % reach(mean6, mean_goal) if reach(mean6, mean_goal)
                      else "stays below SGD's mean F1 (by %.3f at its best)" % (mean_goal - max(mean6)),
                      "at epoch %d" % reach(mean9, mean_goal) if reach(mean9, mean_goal)
                      else "stays below it (by %.3f)" % (mean_goal - max(mean9))), ""]
    return out_lines


lines += seed_spread()
open(os.path.join(out, "table.md"), "w").write("\n".join(lines))

# Figures: f − f* against effective passes and against seconds, log scale (seed 004 Fig. 1).
for part, names, _, plot_title in PARTS:
    if part not in fstar:
        continue
    fs = fstar[part]
    for xkey, xlabel in (("passes", "effective passes"), ("seconds", "seconds")):
        dat = []
        for n in names:
            rows = logs[n]
            if not rows:
                continue
            path = os.path.join(out, "%s-%s.dat" % (n, xkey))
            with open(path, "w") as f:
                for r in rows:
                    gap = (r["objective"] - fs) / abs(fs)
                    if gap > 0:
                        f.write("%g %g\n" % (r[xkey], gap))
            dat.append((n, os.path.basename(path)))
        stem = "%s-%s" % (part, xkey)
        plot = ", ".join("'%s' using 1:2 with linespoints title '%s'" % (p, n) for n, p in dat)
        gp = ["cd '%s'" % os.path.abspath(out),
              "set logscale y", "set format y '10^{%L}'", "set grid",
              "set xlabel '%s'" % xlabel, "set ylabel '(f(w) − f*) / |f*|'",
              "set key outside right",
              "set title '%s'" % plot_title]
        for term, ext in (("pngcairo size 960,540", "png"), ("svg size 960,540", "svg")):
            gp += ["set terminal " + term, "set output '%s.%s'" % (stem, ext), "plot " + plot]
        open(os.path.join(out, stem + ".gp"), "w").write("\n".join(gp) + "\n")
