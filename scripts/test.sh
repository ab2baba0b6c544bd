#!/usr/bin/env bash
# Builds and runs every test: the release build with warnings as errors (unit,
# golden, end-to-end and multi-process tests through CTest, under Open MPI and
# MPICH), the unit tests and the server's end-to-end tests again under
# AddressSanitizer + UndefinedBehaviorSanitizer, then a short fuzzing run of the
# file parsers and the HTTP request parser.
#   scripts/test.sh              (after scripts/setup-debian.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

# House style first (seconds): every C/C++ file as .clang-format formats it.
mapfile -t sources < <(find src tests fuzz bench tools -name '*.cc' -o -name '*.h' -o -name '*.c' | sort)
clang-format --dry-run --Werror "${sources[@]}"

# The release tree the tests run on compiles each layer in unity batches
# (ZAYA_UNITY_LIBS, CMakeLists.txt): a quarter less build time. It lives in
# build-test, apart from build/: the same code and the same bits, but its
# kernels inline otherwise and train a few percent slower, so benchmarks and
# the quick start use build/ (one file a translation unit).
cmake -S . -B build-test -G Ninja -DCMAKE_BUILD_TYPE=Release -DZAYA_WERROR=ON -DZAYA_UNITY_LIBS=ON
cmake --build build-test -j "$jobs"
# One test at a time: each test already uses every core (OpenMP), and
# oversubscribed OpenMP spin-waits turn seconds into minutes.
(cd build-test && ctest --output-on-failure --timeout 900)

# -O1 with line tables (cold code -O0, CMakeLists.txt): what the sanitizers need
# for exact reports; the build of this tree is the longest phase of this script.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZAYA_WERROR=ON -DZAYA_SANITIZE=ON \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
cmake --build build-asan -j "$jobs" --target zaya_unit_tests zaya
# LeakSanitizer is off: OpenMP and oneDNN keep per-thread caches for the life of the process.
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
build-asan/tests/zaya_unit_tests
# The server is what strangers reach: its end-to-end tests (real clients, the
# hostile client) run on the sanitized binary too. A report aborts the server,
# which the tests see as a dead server.
for t in serve serve_hostile; do
  echo "e2e.$t under ASan/UBSan"
  bash "tests/e2e/$t.sh" build-asan/zaya "$PWD"
done
# The parsers of untrusted files (safetensors, GGUF, token-shard index, HF
# config) under libFuzzer for a few seconds each (docs/fuzzing.md).
scripts/fuzz.sh -t "${FUZZ_SECONDS:-6}"

echo "all tests passed"
