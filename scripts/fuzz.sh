#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang with ASan + UBSan) and runs each
# for a while; fails if any target finds a crash, a sanitizer report, a leak,
# a timeout or an out-of-memory input. docs/fuzzing.md explains the targets.
#
# Usage: scripts/fuzz.sh [-t SECONDS] [-b BUILD_DIR] [TARGET...]
#   -t SECONDS   time per target (default: $FUZZ_SECONDS or 20)
#   -b DIR       build directory (default: build-fuzz)
#   TARGET       run only these (default: all of them)
#
# Needs (Debian 12): clang, libclang-rt-14-dev (libFuzzer and the sanitizer
# runtimes), libomp-dev, plus the project's usual packages (cmake, ninja-build,
# libfmt-dev, nlohmann-json3-dev, libxxhash-dev, pkg-config).
#
# The corpus each target grows is kept in BUILD_DIR/corpus/TARGET, so later
# runs start where earlier ones stopped; crashing inputs are written to
# BUILD_DIR/artifacts/ (reproduce: BUILD_DIR/TARGET FILE).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=${FUZZ_SECONDS:-20}
build="$root/build-fuzz"
while getopts "t:b:h" opt; do
  case $opt in
    t) seconds=$OPTARG ;;
    b) build=$OPTARG ;;
    *) sed -n '2,20p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
all_targets=(fuzz_gguf fuzz_safetensors_header fuzz_safetensors_dir fuzz_shard_index fuzz_hf_config fuzz_openai_request)
targets=("${@:-${all_targets[@]}}")

command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 1; }
cmake -S "$root/fuzz" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ >/dev/null
ninja -C "$build" >"$build/build.log" 2>&1 || { cat "$build/build.log"; echo "fuzz.sh: build failed" >&2; exit 1; }
rm -rf "$build/seeds"
"$build/make_seeds" "$build/seeds"
mkdir -p "$build/artifacts"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=()
for t in "${targets[@]}"; do
  [[ -x "$build/$t" ]] || { echo "fuzz.sh: unknown target '$t' (known: ${all_targets[*]})" >&2; exit 2; }
  corpus="$build/corpus/$t"
  mkdir -p "$corpus"
  log="$build/$t.log"
  dict=()
  [[ -f "$root/fuzz/$t.dict" ]] && dict=(-dict="$root/fuzz/$t.dict")
  printf '%-26s %4ss ... ' "$t" "$seconds"
  # libFuzzer adds new inputs to the first directory and reads the seeds from the second.
  if "$build/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
       -print_final_stats=1 -artifact_prefix="$build/artifacts/$t-" "${dict[@]}" "$corpus" "$build/seeds/$t" \
       >"$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    echo "ok (${runs:-?} runs, corpus $(find "$corpus" -type f | wc -l) files)"
  else
    echo "FAILED"
    grep -E "ERROR|runtime error|SUMMARY|Test unit written" "$log" | head -20 || true
    failed+=("$t")
  fi
done

if ((${#failed[@]})); then
  echo "fuzz.sh: findings in ${failed[*]} (logs: $build/<target>.log, inputs: $build/artifacts/)" >&2
  exit 1
fi
