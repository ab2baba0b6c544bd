#!/usr/bin/env bash
# The [plan] verbs end to end: zaya profile (list, show, a quick measurement
# of this machine, under mpirun with its collectives), zaya plan on built-in
# and measured profiles (text and JSON), zaya size (proposals and --check),
# and the errors for bad profiles, configs and flags. No timing is asserted.
source "$(dirname "$0")/common.bash" "$@"
export OMP_NUM_THREADS=1
J=$WORK/json
mkdir -p "$J"

expect_in() {  # expect_in FILE PATTERN
  grep -Eq -- "$2" "$1" || fail "$1 lacks /$2/: $(head -c 800 "$1")"
}

# --- profiles ---
"$ZAYA" profile list >"$WORK/list.txt"
expect_in "$WORK/list.txt" "^mi300x-pollara"
expect_in "$WORK/list.txt" "^h100"
expect_in "$WORK/list.txt" "^h200"
"$ZAYA" profile show mi300x-pollara >"$WORK/show.txt"
expect_in "$WORK/show.txt" "peak bf16 +1.307e\+06 GFLOP/s +vendor"
expect_in "$WORK/show.txt" "GEMM efficiency .*estimate"
"$ZAYA" profile measure --quick --model tiny --micro-batch 2 --seq-len 64 --name e2e --out "$J/cpu1.json" >"$WORK/m1.txt"
expect_in "$J/cpu1.json" '"format": "zaya.hardware_profile"'
expect_in "$WORK/m1.txt" "peak f32 .*measured"
if command -v mpirun >/dev/null; then
  "${MPIRUN[@]}" -np 2 "$ZAYA" profile measure --quick --model tiny --micro-batch 2 --seq-len 64 --out "$J/cpu2.json" \
    >"$WORK/m2.txt"
  expect_in "$WORK/m2.txt" "reduce_scatter +2 ranks intra +measured"
  expect_in "$WORK/m2.txt" "all_to_all +2 ranks"
  # Curves from zaya bench comm into a profile.
  "${MPIRUN[@]}" -np 2 "$ZAYA" bench comm reduce_scatter,all_gather -b 1K -e 64K -f 8 -n 2 -w 1 --json "$J/comm.json" \
    >/dev/null
  "$ZAYA" profile add-comm "$J/cpu1.json" --comm "$J/comm.json" --scope intra --out "$J/cpu1c.json" >"$WORK/add.txt"
  expect_in "$WORK/add.txt" "2 curve\(s\)"
  "$ZAYA" profile show "$J/cpu1c.json" >"$WORK/show1c.txt"
  expect_in "$WORK/show1c.txt" "reduce_scatter +2 ranks intra +measured"
  expect_error 1 "not a .zaya bench comm --json. file" -- "$ZAYA" profile add-comm h100 --comm "$J/cpu1.json" --out "$WORK/x.json"
fi
echo "ok: zaya profile"

# --- plan ---
"$ZAYA" plan --profile mi300x-pollara --model zaya1-base --world 1024 --micro-batch 1 --seq-len 4096 \
  --global-batch 4096 --json "$J/plan.json" >"$WORK/plan.txt"
expect_in "$WORK/plan.txt" "1024 device\(s\) = dp 1024 x ep 1"
expect_in "$WORK/plan.txt" "16777216 tokens/step"
expect_in "$WORK/plan.txt" "reduce-scatter"
expect_in "$WORK/plan.txt" "# MoE width trade-off"
expect_in "$WORK/plan.txt" "<- this config"
expect_in "$WORK/plan.txt" "KV cache \(CCA"
expect_in "$J/plan.json" '"step_seconds"'
expect_in "$J/plan.json" '"moe_tradeoff"'
"$ZAYA" plan --profile "$J/cpu1.json" --model tiny --micro-batch 2 --seq-len 64 --no-tradeoff >"$WORK/plan_cpu.txt"
expect_in "$WORK/plan_cpu.txt" " measured$"
"$ZAYA" plan --profile h100 --model small --world 16 --ep 8 --global-batch 256 >"$WORK/plan_ep.txt"
expect_in "$WORK/plan_ep.txt" "expert all-to-all [0-9.]+ s"
echo "ok: zaya plan"

# --- size ---
"$ZAYA" size --profile mi300x-pollara --total 8.8e9 --save "$WORK/proposals" >"$WORK/size.txt"
expect_in "$WORK/size.txt" "\[1\] hidden [0-9]+"
expect_in "$WORK/size.txt" "head_dim 128"
[[ -f $WORK/proposals/proposal1.json ]] || fail "zaya size --save wrote no proposal1.json"
"$ZAYA" size --check zaya1-base --profile mi300x-pollara >"$WORK/check_ok.txt"
expect_in "$WORK/check_ok.txt" "nothing to flag"
# A config with an off-multiple head dim: flagged with a slowdown (unit tests cover the other rules).
sed -e 's/"kv_channels": 128/"kv_channels": 96/' "$WORK/proposals/proposal1.json" >"$WORK/bad_dims.json"
"$ZAYA" size --check "$WORK/bad_dims.json" --profile mi300x-pollara >"$WORK/check_bad.txt"
expect_in "$WORK/check_bad.txt" "kv_channels \(head_dim\) = 96: .* -> 128; predicted slowdown .*\+[0-9.]+%"
echo "ok: zaya size"

# --- bad input ---
expect_error 1 "unknown hardware profile 'tpu'; allowed: a built-in profile \(mi300x-pollara, h100, h200\)" -- \
  "$ZAYA" plan --profile tpu
echo '{"format": "zaya.hardware_profile", "format_version": 1, "name": "x", "device": {"kind": "gpu"}}' >"$WORK/bad.json"
expect_error 1 "bad.json: device.peak_gflops is missing" -- "$ZAYA" plan --profile "$WORK/bad.json"
sed 's/"source": "measured"/"source": "rumour"/g' "$J/cpu1.json" >"$WORK/bad_source.json"
expect_error 1 "bad_source.json: device.peak_gflops.f32.source = 'rumour' is invalid; allowed: vendor, measured, estimate" -- \
  "$ZAYA" plan --profile "$WORK/bad_source.json" --model tiny
expect_error 2 "--ep = 3 is invalid; allowed: a divisor of --world \(8\)" -- "$ZAYA" plan --world 8 --ep 3
expect_error 2 "--world = 4096 is invalid for profile 'h100'; allowed: 1..1024" -- "$ZAYA" plan --profile h100 --world 4096
expect_error 2 "--global-batch = 100 is invalid; allowed: a multiple of world / cp x micro-batch" -- \
  "$ZAYA" plan --world 8 --global-batch 100
expect_error 2 "--seq-len = 4100 does not fit --cp = 4" -- "$ZAYA" plan --world 4 --cp 4 --seq-len 4100
expect_error 2 "--cp = 3 is invalid" -- "$ZAYA" plan --world 4 --cp 3
# ZAYA1-base at 32K: one MI300X cannot hold it, two context-parallel ones can.
"$ZAYA" plan --model zaya1-base --seq-len 32768 --micro-batch 1 --no-tradeoff | grep -q "DOES NOT FIT" ||
  fail "zaya1-base at 32K on one MI300X should not fit"
"$ZAYA" plan --model zaya1-base --seq-len 32768 --micro-batch 1 --world 2 --cp 2 --no-tradeoff --json "$WORK/cp.json" \
  >"$WORK/cp.txt"
grep -q "DOES NOT FIT" "$WORK/cp.txt" && fail "zaya1-base at 32K over cp 2 should fit"
grep -q "context-parallel K/V" "$WORK/cp.txt" || fail "no context-parallel communication line"
grep -q '"cp": 2' "$WORK/cp.json" || fail "plan JSON lacks the cp layout"
expect_error 2 "give exactly one target" -- "$ZAYA" size --total 1e9 --active 1e8
expect_error 1 "neither a preset" -- "$ZAYA" size --check no-such-config.json
expect_error 2 "dtype" -- "$ZAYA" plan --dtype fp8
echo "ok: bad input"
echo "PASS"
