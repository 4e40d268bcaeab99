#!/usr/bin/env bash
# In-process fuzzing of crfx's parsers with libFuzzer (tests/fuzz/README.md): the CRF++ template
# parser, the CoNLL and CRFsuite readers and the model loader, built with clang++-14 under
# ASan + UBSan into build-fuzz/ (a CMake project of its own, tests/fuzz/CMakeLists.txt).
#
#   scripts/fuzz.sh smoke                      each target ~15 s from its seeds (CI: scripts/test.sh)
#   scripts/fuzz.sh long SECONDS [TARGET...]   long runs (targets: template conll crfsuite model)
#   scripts/fuzz.sh build                      only build
#
# Per target it prints executions, exec/s, libFuzzer's final cov: and ft:, the corpus size and the
# findings (crash-, leak-, timeout-, oom- files: the reproducers, run `build-fuzz/fuzz_T FILE`).
# Any finding makes the exit status non-zero. Environment:
#   FUZZ_WORK   scratch folder (default ${TMPDIR:-/tmp}/crfx-fuzz): long runs keep their growing
#               corpus in FUZZ_WORK/corpus/T (resumed by the next long run), their logs and
#               reproducers in FUZZ_WORK/runs/DATE-PID; a smoke run uses a fresh
#               FUZZ_WORK/smoke.XXXXXX, removed when clean. The seeds in tests/fuzz/T are read,
#               never written.
#   FUZZ_JOBS   targets run at the same time (default: a smoke run one a core, a long run 1)
#   FUZZ_SMOKE_SECONDS   seconds per target in a smoke run (default 15)
#   BUILD_DIR_FUZZ       build folder (default build-fuzz)
set -euo pipefail
cd "$(dirname "$0")/.."
all_targets=(template conll crfsuite model)
build=${BUILD_DIR_FUZZ:-build-fuzz}
work=${FUZZ_WORK:-${TMPDIR:-/tmp}/crfx-fuzz}
jobs=${FUZZ_JOBS:-}

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
mode=${1:-}
[ -n "$mode" ] || usage
shift

build_targets() {
  # clang-14 is required (CI installs it through scripts/deps.sh): its absence is an error.
  if ! command -v clang++-14 >/dev/null; then
    echo "scripts/fuzz.sh: clang++-14 not found; the fuzz targets need clang-14 and libclang-rt-14-dev" \
         "(Debian packages; scripts/deps.sh installs them)" >&2
    exit 1
  fi
  if ! echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' |
       clang++-14 -fsanitize=fuzzer,address,undefined -x c++ - -o /dev/null 2>/dev/null; then
    echo "scripts/fuzz.sh: clang++-14 cannot link a libFuzzer target; install libclang-rt-14-dev" \
         "(scripts/deps.sh installs it)" >&2
    exit 1
  fi
  local gen=()
  [ -f "$build/CMakeCache.txt" ] || ! command -v ninja >/dev/null || gen=(-G Ninja)
  cmake -S tests/fuzz -B "$build" "${gen[@]}" -DCMAKE_CXX_COMPILER=clang++-14 >/dev/null
  nice cmake --build "$build" -j 2
}

# run_target T SECONDS CORPUS FINDINGS LOG: one libFuzzer run; its exit status.
run_target() {
  local t=$1 seconds=$2 corpus=$3 findings=$4 log=$5
  mkdir -p "$corpus" "$findings"
  # New inputs go into $corpus (the first folder); the seeds are only read.
  ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1} \
  UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    nice "$build/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -dict="tests/fuzz/$t.dict" -artifact_prefix="$findings/" \
      "$corpus" "tests/fuzz/$t" >"$log" 2>&1
}

# summary T LOG CORPUS FINDINGS SECONDS STATUS: one line for the table; lists the reproducers.
summary() {
  local t=$1 log=$2 corpus=$3 findings=$4 seconds=$5 status=$6
  local execs rate last cov ft corp files n
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+' "$log" | grep -E ' cov: ' | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([^ ]*\).*/\1/p' <<<"$last")
  files=$(find "$corpus" -type f | wc -l)
  mapfile -t found < <(find "$findings" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | sort)
  n=${#found[@]}
  if [ "$status" -ne 0 ] && [ "$n" -eq 0 ]; then n="exit $status"; fi
  printf '%-9s %7s %11s %8s %6s %6s %12s %8s  %s\n' "$t" "$seconds" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" \
    "${corp:-?}" "$files" "$n"
  for f in "${found[@]}"; do
    echo "  finding: $f"
    echo "    reproduce: $build/fuzz_$t $f"
    grep -m2 -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error|invariant broken|terminate called|what\(\):' "$log" |
      sed 's/^/    /' || true
  done
  if [ "$status" -ne 0 ] && [ "${#found[@]}" -eq 0 ]; then echo "  $t failed (exit $status) without a reproducer: see $log"; fi
}

header() {
  printf '%-9s %7s %11s %8s %6s %6s %12s %8s  %s\n' target seconds executions exec/s cov ft corp files findings
}

# run_all SECONDS CORPORA RUNDIR TARGET...: every target, FUZZ_JOBS at a time, growing its corpus
# in CORPORA/T, its log and findings in RUNDIR/T.log and RUNDIR/findings/T; 1 if anything was found.
run_all() {
  local seconds=$1 corpora=$2 dir=$3
  shift 3
  local targets=("$@") pids=() bad=0 t status
  mkdir -p "$dir"
  for t in "${targets[@]}"; do
    ( set +e
      run_target "$t" "$seconds" "$corpora/$t" "$dir/findings/$t" "$dir/$t.log"
      echo $? >"$dir/$t.status" ) &
    pids+=($!)
    if [ "${#pids[@]}" -ge "$jobs" ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
  done
  for p in "${pids[@]}"; do wait "$p"; done
  header
  for t in "${targets[@]}"; do
    status=$(cat "$dir/$t.status")
    summary "$t" "$dir/$t.log" "$corpora/$t" "$dir/findings/$t" "$seconds" "$status"
    if [ "$status" -ne 0 ] || [ -n "$(find "$dir/findings/$t" -maxdepth 1 -type f)" ]; then bad=1; fi
  done
  [ "$bad" -eq 0 ] && [ "${FUZZ_KEEP_LOGS:-keep}" = drop ] || echo "logs: $dir"
  return $bad
}

case "$mode" in
  build)
    build_targets
    ;;
  smoke)
    [ $# -eq 0 ] || usage
    start=$SECONDS
    build_targets
    mkdir -p "$work"
    dir=$(mktemp -d "$work/smoke.XXXXXX")
    secs=${FUZZ_SMOKE_SECONDS:-15}
    jobs=${jobs:-$(nproc)}
    echo "fuzz smoke: ${#all_targets[@]} targets, $secs s each, $jobs at a time (libFuzzer, ASan + UBSan)"
    # Its folder is removed when clean: named only where it stays (findings).
    if FUZZ_KEEP_LOGS=drop run_all "$secs" "$dir/corpus" "$dir" "${all_targets[@]}"; then
      rm -rf "$dir"
      echo "fuzz smoke: clean ($((SECONDS - start)) s with the build)"
    else
      echo "fuzz smoke: FINDINGS (reproducers above; logs in $dir)" >&2
      exit 1
    fi
    ;;
  long)
    [ $# -ge 1 ] || usage
    secs=$1
    shift
    targets=("$@")
    [ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")
    for t in "${targets[@]}"; do
      [[ " ${all_targets[*]} " == *" $t "* ]] || { echo "unknown target '$t' (${all_targets[*]})" >&2; exit 2; }
    done
    build_targets
    jobs=${jobs:-1}
    mkdir -p "$work"
    run=$work/runs/$(date +%Y%m%d-%H%M%S)-$$
    echo "fuzz long: ${targets[*]}, $secs s each, $jobs at a time; corpus in $work/corpus, logs and findings in $run"
    run_all "$secs" "$work/corpus" "$run" "${targets[@]}" || { echo "fuzz long: FINDINGS (reproducers above)" >&2; exit 1; }
    ;;
  *)
    usage
    ;;
esac
