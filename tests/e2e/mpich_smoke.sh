#!/usr/bin/env bash
# Expert- and data-parallel training under MPICH (scripts/test.sh builds zaya
# against MPICH and runs this with that binary; under CTest it runs with the
# Open MPI build, where MPICH's launcher cannot start it, so it skips).
source "$(dirname "$0")/common.bash" "$@"
if ! command -v mpiexec.mpich >/dev/null || ! ldd "$ZAYA" | grep -q libmpich; then
  echo "skipped: $ZAYA is not an MPICH build"
  exit 0
fi
prepare_data 512
write_config mpich.toml 6
OMP_NUM_THREADS=1 timeout 300 mpiexec.mpich -n 4 "$ZAYA" train --config "$WORK/mpich.toml" --quiet \
  --set parallel.ep=2 --set train.micro_batch=2 >"$WORK/mpich.log" 2>&1 || { cat "$WORK/mpich.log"; fail "MPICH run"; }
grep -q "done: 6 steps" "$WORK/mpich.log" || fail "no summary"
[[ -s $WORK/run/final/model.safetensors ]] || fail "no final weights"
echo "MPICH smoke: OK"
