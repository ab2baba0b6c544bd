#!/usr/bin/env bash
# Expert- and data-parallel training under MPICH: run by CTest (mpich.smoke)
# with the zaya-mpich binary, which the build makes when MPICH is installed.
source "$(dirname "$0")/../e2e/common.bash" "$@"
ldd "$ZAYA" | grep -q libmpich || fail "$ZAYA is not linked against MPICH"
prepare_data 512
write_config mpich.toml 6
OMP_NUM_THREADS=1 timeout 300 mpiexec.mpich -n 4 "$ZAYA" train --config "$WORK/mpich.toml" --quiet \
  --set parallel.ep=2 --set train.micro_batch=2 >"$WORK/mpich.log" 2>&1 || { cat "$WORK/mpich.log"; fail "MPICH run"; }
grep -q "done: 6 steps" "$WORK/mpich.log" || fail "no summary"
[[ -s $WORK/run/final/model.safetensors ]] || fail "no final weights"
echo "MPICH smoke: OK"
