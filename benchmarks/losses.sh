#!/usr/bin/env bash
# Seed 002's Tables 1–2 (Altun, Johnson & Hofmann 2003): the four label-sequence losses, each
# minimised by L-BFGS with the same template and prior, beside the perceptron and sequence boosting,
# on CoNLL-2002 Spanish NER (esp.train, scored on esp.testb) and CoNLL-2000 chunking (train, test).
# One command:
#   benchmarks/losses.sh
# Every run uses the chunking template (words and POS tags in a window; CRFsuite's observed pairs)
# and one thread. Writes under benchmarks/results/losses/: each run's stderr and CSV log, and
# table.md — per corpus and method: test token accuracy, chunk/entity F1 (crfx eval), training
# time, iterations and active features (non-zero weights), and the seed's two claims checked (the
# four losses within a small range of each other; boosting's model much sparser).
# Environment: BUILD_DIR (default build), CONLL2000 (default ../shared/data/conll2000), CONLL2002
# (default ../shared/data/conll2002), OUT_DIR, C2 (the prior, default 1), MAX_ITERATIONS (L-BFGS cap,
# default 300), AP_EPOCHS (default 10), BOOST_ROUNDS (default 2000), THREADS (default 1), CORPORA
# (default "esp conll2000"), METHODS (default "seq-log seq-exp point-log point-exp ap boost"; a
# subset re-runs those rows, keeps the others' outputs, and appends its own line to machine.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
crfx=$build/crfx
conll2000=${CONLL2000:-../shared/data/conll2000}
conll2002=${CONLL2002:-../shared/data/conll2002}
out=${OUT_DIR:-benchmarks/results/losses}
c2=${C2:-1}
max_iterations=${MAX_ITERATIONS:-300}
ap_epochs=${AP_EPOCHS:-10}
boost_rounds=${BOOST_ROUNDS:-2000}
threads=${THREADS:-1}
corpora=${CORPORA:-esp conll2000}
all_methods="seq-log seq-exp point-log point-exp ap boost"
methods=${METHODS:-$all_methods}
[ -x "$crfx" ] || scripts/build.sh
mkdir -p "$out"
tmpl="$conll2000/chunking.template"

commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (+ local changes)')"
settings="c2: $c2, L-BFGS at most $max_iterations iterations, ap $ap_epochs epochs, boost $boost_rounds rounds, $threads thread(s)"
if [ "$methods" = "$all_methods" ]; then
  {
    echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
    echo "commit: $commit"
    echo "date: $(date -u +%F)"
    echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "$settings"
  } > "$out/machine.txt"
else
  echo "re-run of $methods on $corpora: commit $commit, $(date -u +%F), load average at the start $(cut -d' ' -f1-3 /proc/loadavg); $settings" >> "$out/machine.txt"
fi

run() {  # run CORPUS NAME ARGS...: train on CORPUS, tag its test set, score it
  local corpus=$1 name=$2; shift 2
  local train test
  case "$corpus" in
    esp) train=$conll2002/esp.train; test=$conll2002/esp.testb ;;
    conll2000) train=$conll2000/train.txt; test=$conll2000/test.txt ;;
  esac
  echo "-- $corpus $name: crfx train … $*" >&2
  rm -f "$out/$corpus-$name.eval"
  if ! "$crfx" train "$train" -t "$tmpl" --threads "$threads" --device cpu -m "$out/$corpus-$name.model" \
    --log "$out/$corpus-$name.csv" "$@" 2> "$out/$corpus-$name.err"; then
    # A loss that cannot be trained here (seq-exp overflows at w = 0 on long sentences) is a row
    # of the table with crfx's message, not the end of the run.
    tail -1 "$out/$corpus-$name.err" >&2
    return 0
  fi
  "$crfx" tag "$test" -m "$out/$corpus-$name.model" -o "$out/$corpus-$name.tagged" -q
  "$crfx" eval "$out/$corpus-$name.tagged" | sed -n 2p > "$out/$corpus-$name.eval"
  rm -f "$out/$corpus-$name.model" "$out/$corpus-$name.tagged"
}

for corpus in $corpora; do
  for method in $methods; do
    case "$method" in
      seq-log | seq-exp | point-log | point-exp)
        run "$corpus" "$method" -a lbfgs --loss "$method" --c2 "$c2" --max-iterations "$max_iterations" ;;
      ap) run "$corpus" ap -a ap --epochs "$ap_epochs" ;;
      boost) run "$corpus" boost -a boost --max-iterations "$boost_rounds" ;;
      *) echo "losses.sh: unknown method '$method' in METHODS (known: $all_methods)" >&2; exit 2 ;;
    esac
  done
done

python3 benchmarks/losses_report.py "$out" $corpora
cat "$out/table.md"
