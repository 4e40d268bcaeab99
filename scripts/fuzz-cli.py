#!/usr/bin/env python3
"""Mutation fuzzing of crfx's parsers through the CLI: CRF++ templates, CoNLL and CRFsuite data,
model files and tagged output for `eval`, each mutated and fed to the binary. A finding is a run
that dies by a signal, prints a sanitizer report, exits with something other than 0/1/2, fails
without saying why (empty stderr), or hangs; its inputs are saved under OUT/findingN/.

  scripts/fuzz-cli.py CRFX SECONDS [SEED] [OUT]      (OUT defaults to ./fuzz-findings)

Best run on a sanitizer build, e.g.
  BUILD_DIR=build-asan scripts/build.sh -DCRFX_CUDA=OFF \
      -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
  scripts/fuzz-cli.py build-asan/crfx 600
"""
import os, random, shutil, subprocess, sys, tempfile, time

if len(sys.argv) < 3:
    sys.exit(__doc__)
crfx = os.path.abspath(sys.argv[1])
seconds = float(sys.argv[2])
rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 1)
out_dir = os.path.abspath(sys.argv[4] if len(sys.argv) > 4 else "fuzz-findings")
data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data")
wd = tempfile.mkdtemp(prefix="crfx-fuzz-")

def lines_of(path, n):
    with open(path, "rb") as f:
        out = []
        for line in f:
            out.append(line)
            if len(out) >= n and line.strip() == b"":
                break
        return b"".join(out)

train = lines_of(f"{data}/conll2000.train300.txt", 120)
tmpl = open(f"{data}/chunking.template", "rb").read()
crfs = lines_of(f"{data}/conll2000.train60.crfsuite.txt", 80)
TOKENS = [b"%x[", b"]", b",", b"-1", b"0", b"1", b"99", b"-99", b"/", b"U", b"B", b":", b"\t", b" ",
          b"\n", b"\n\n", b"\\", b"\\:", b":1.5", b":nan", b":inf", b":-1e308", b"\x00", b"\xff\xfe",
          b"%y[", b"%x[0,0", b"%x[,]", b"-DOCSTART-", b"\r\n", b"B-NP", b"__BOS__", b"a" * 300]

def mutate(b):
    b = bytearray(b)
    for _ in range(rng.randint(1, 6)):
        op = rng.random()
        pos = rng.randint(0, len(b)) if b else 0
        if op < 0.3 and b:
            del b[pos:pos + rng.randint(1, 20)]
        elif op < 0.6:
            b[pos:pos] = rng.choice(TOKENS)
        elif op < 0.8 and b:
            b[min(pos, len(b) - 1)] = rng.randint(0, 255)
        else:  # duplicate a chunk
            a = rng.randint(0, len(b)); c = min(len(b), a + rng.randint(1, 200))
            b[pos:pos] = b[a:c]
    return bytes(b)

def run(args, timeout=60):
    p = subprocess.run([crfx] + args, capture_output=True, timeout=timeout,
                       env=dict(os.environ, ASAN_OPTIONS="detect_leaks=0", UBSAN_OPTIONS="print_stacktrace=1"))
    return p.returncode, p.stderr.decode("utf-8", "replace")

findings = 0
def check(kind, rc, err, files):
    global findings
    bad = rc < 0 or rc not in (0, 1, 2) or "Sanitizer" in err or "runtime error" in err or (rc != 0 and not err.strip())
    if bad:
        findings += 1
        d = os.path.join(out_dir, f"finding{findings}")
        os.makedirs(d, exist_ok=True)
        for name, content in files.items():
            open(os.path.join(d, name), "wb").write(content)
        open(os.path.join(d, "stderr.txt"), "w").write(f"{kind} rc={rc}\n{err}")
        print(f"FINDING {findings}: {kind} rc={rc}: {err[:300]}", flush=True)

# A valid model to mutate.
open(f"{wd}/t.txt", "wb").write(train); open(f"{wd}/t.tmpl", "wb").write(tmpl)
rc, err = run(["train", f"{wd}/t.txt", "-t", f"{wd}/t.tmpl", "-m", f"{wd}/good.model", "-q", "--max-iterations", "5"])
assert rc == 0, err
model = open(f"{wd}/good.model", "rb").read()

def tag_extra():
    """Optional tag outputs: sentence probabilities, marginals, n-best lists."""
    return rng.choice([[], ["-p"], ["--marginals"], ["-p", "--marginals"], ["-n", "3"], ["-n", "2", "--marginals"]])


t_end = time.time() + seconds
n = 0
while time.time() < t_end:
    n += 1
    kind = rng.choice(["template", "conll", "crfsuite", "model", "eval"])
    try:
        if kind == "template":
            t = mutate(tmpl); open(f"{wd}/m.tmpl", "wb").write(t)
            rc, err = run(["train", f"{wd}/t.txt", "-t", f"{wd}/m.tmpl", "-m", f"{wd}/o.model", "-q", "--max-iterations", "2"])
            check(kind, rc, err, {"template": t})
        elif kind == "conll":
            d = mutate(train); open(f"{wd}/m.txt", "wb").write(d)
            rc, err = run(["train", f"{wd}/m.txt", "-t", f"{wd}/t.tmpl", "-m", f"{wd}/o.model", "-q", "--max-iterations", "2"])
            check(kind, rc, err, {"data": d})
            rc, err = run(["tag", f"{wd}/m.txt", "-m", f"{wd}/good.model", "-o", f"{wd}/o.txt"] + tag_extra())
            check(kind + "-tag", rc, err, {"data": d})
        elif kind == "crfsuite":
            d = mutate(crfs); open(f"{wd}/m.crfsuite.txt", "wb").write(d)
            rc, err = run(["train", f"{wd}/m.crfsuite.txt", "--format", "crfsuite", "-m", f"{wd}/o.model", "-q", "--max-iterations", "2"])
            check(kind, rc, err, {"data": d})
        elif kind == "model":
            mm = bytearray(model)
            for _ in range(rng.randint(1, 4)):
                op = rng.random(); pos = rng.randrange(len(mm))
                if op < 0.5: mm[pos] = rng.randint(0, 255)
                elif op < 0.75: del mm[pos:pos + rng.randint(1, 64)]
                else: mm[pos:pos] = bytes(rng.randint(0, 255) for _ in range(rng.randint(1, 16)))
            open(f"{wd}/m.model", "wb").write(bytes(mm))
            for args in (["tag", f"{wd}/t.txt", "-m", f"{wd}/m.model", "-o", f"{wd}/o.txt"] + tag_extra(), ["dump", f"{wd}/m.model"]):
                rc, err = run(args)
                check(kind + "-" + args[0], rc, err, {"model": bytes(mm)})
        else:
            rc, err = run(["tag", f"{wd}/t.txt", "-m", f"{wd}/good.model", "-o", f"{wd}/tagged.txt"] + rng.choice([[], ["-p"]]))
            assert rc == 0, err
            d = mutate(open(f"{wd}/tagged.txt", "rb").read()[:20000]); open(f"{wd}/m.tagged", "wb").write(d)
            rc, err = run(["eval", f"{wd}/m.tagged"])
            check(kind, rc, err, {"tagged": d})
    except subprocess.TimeoutExpired:
        findings += 1
        print(f"FINDING {findings}: {kind} timeout", flush=True)
print(f"{n} cases, {findings} findings")
shutil.rmtree(wd, ignore_errors=True)
sys.exit(1 if findings else 0)
