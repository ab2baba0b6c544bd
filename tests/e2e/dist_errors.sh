#!/usr/bin/env bash
# Bad situations in multi-process runs end promptly with one clear error (from
# rank 0 when every rank saw it, from the failing rank otherwise) and a non-zero
# exit on every rank, never a hang.
source "$(dirname "$0")/common.bash" "$@"
prepare_data 512
write_config good.toml 4

# expect_mpi_error PATTERN RANKS_THAT_MUST_SAY_IT [RANKS_THAT_MUST_NOT] -- mpirun args...
# An error every rank saw alike is printed by rank 0 alone, not once per rank.
expect_mpi_error() {
  local pattern=$1 ranks=$2 silent=
  [[ $3 == -- ]] || { silent=$3; shift; }
  shift 3
  local rc=0 start=$SECONDS
  timeout 120 "${MPIRUN[@]}" --tag-output "$@" >"$WORK/out.log" 2>&1 || rc=$?
  [[ $rc != 0 ]] || fail "expected a failure from: $*"
  [[ $rc != 124 ]] || fail "hung (timeout) in: $*"
  for r in $ranks; do
    grep -E "^\[1,$r\]<stderr>:error: .*$pattern" "$WORK/out.log" >/dev/null ||
      { cat "$WORK/out.log"; fail "rank $r did not report /$pattern/"; }
  done
  for r in $silent; do
    ! grep -E "^\[1,$r\]<stderr>:" "$WORK/out.log" >/dev/null ||
      { cat "$WORK/out.log"; fail "rank $r printed an error that rank 0 reports"; }
  done
  echo "ok ($((SECONDS - start)) s, exit $rc): $pattern"
}

# The world does not fit the mesh: 3 ranks with ep = 2.
expect_mpi_error "failed on all 3 ranks: .*world of 3 ranks does not fit parallel.ep = 2" "0" "1 2" -- \
  -np 3 "$ZAYA" train --config "$WORK/good.toml" --set parallel.ep=2
# Experts not divisible by ep (4 experts, ep = 3).
expect_mpi_error "parallel.ep = 3 is invalid; allowed: a divisor of the expert count" "0" "1 2" -- \
  -np 3 "$ZAYA" train --config "$WORK/good.toml" --set parallel.ep=3
# Configs that differ across ranks (MPMD: rank 1 gets another learning rate).
expect_mpi_error "training configuration differs between ranks: rank\(s\) 1 do not match rank 0" "0" "1" -- \
  -np 1 "$ZAYA" train --config "$WORK/good.toml" : -np 1 "$ZAYA" train --config "$WORK/good.toml" --set optim.lr=0.01
# A rank that fails at start-up: every rank stops, rank 0 names the one that failed.
expect_mpi_error "start-up failed on rank 1 of 2: injected start-up fault" "0" "1" -- \
  -np 2 "$ZAYA" train --config "$WORK/good.toml" --inject startup:rank=1
# A rank that fails in the middle of training: the job stops at once (MPI_Abort), the rank says why.
expect_mpi_error "injected fault at step 3 on rank 1" "1" -- \
  -np 2 "$ZAYA" train --config "$WORK/good.toml" --inject step:rank=1,step=3
# A rank that hangs in the middle of training: the collective rank 0 waits in (a blocking call, or one on the
# communication thread) trips the watchdog after parallel.comm_timeout; rank 0 names it and the job ends.
expect_mpi_error "on communicator '[a-z]+' \\(rank 0 of 2\\) did not complete within 2 s" "0" -- \
  -np 2 "$ZAYA" train --config "$WORK/good.toml" --inject hang:rank=1,step=3 --set parallel.comm_timeout=2
# A --set typo (a usage error) under mpirun: rank 0 names it once.
expect_mpi_error "--set train.stesp=3: unknown key 'train.stesp' \\(did you mean 'train.steps'\\?\\)" "0" "1" -- \
  -np 2 "$ZAYA" train --config "$WORK/good.toml" --set train.stesp=3
# So does an unknown verb.
expect_mpi_error "unknown verb 'trian' \\(did you mean 'train'\\?\\)" "0" "1" -- -np 2 "$ZAYA" trian
# One process for a mesh that needs more: the message says to use mpirun.
expect_error 1 "the world of 1 rank does not fit parallel.ep = 2 .*\\(run under mpirun -np N, N a multiple of 2\\)" -- \
  "$ZAYA" train --config "$WORK/good.toml" --set parallel.ep=2
echo "dist errors: OK"
