#!/usr/bin/env bash
# `zaya rl` under data x expert parallelism (docs/rl.md "Several ranks"):
# mpirun -np 4 with parallel.ep = 2 (dp 2 x ep 2), a KL reference (this
# rank's experts, as the trainer holds them). What holds, and why:
# - against the data-parallel run on 4 ranks (dp 4), every step: the same
#   samples (rewards, lengths; mean reward within 1e-12, summed in another
#   order), the loss and gradient norm within 1e-6: both split the step's
#   prompts over the same 4 data ranks with the same sampling seeds
#   (rl_dist.h), a row's logits are its own whichever rank's experts compute
#   them (at one thread), and the gradients differ by the order of the expert
#   gradients' sums only;
# - against one rank, the first step (the same initial weights): the same
#   samples. Later steps are not compared: after an update the weights of one
#   rank and of any split differ by the gradients' summation order, which
#   AdamW's first step (g / |g|) magnifies where a gradient is near zero, and
#   sampling at temperature 1 can then draw another token;
# - rl.sample_with_trainer: every step's rollout log-probabilities are the
#   trainer's bit for bit (the ep group runs the per-token forwards together
#   although its ranks' samples end at different tokens);
# - the cached decoder over the experts gathered from the ep group, with
#   routing replay: the trainer (its experts on two ranks) replays every
#   choice of the decoder's routing record (no routed flip), and the greedy
#   held-out scores equal dp 4's;
# - LoRA (the cached decoder over the gathered base and the adapters): the
#   same samples and numbers as dp 4;
# - stop at step 2 and resume under dp 2 x ep 2: the final weights and the
#   metrics bit for bit;
# - configs the mesh cannot run are refused, naming the field.
source "$(dirname "$0")/common.bash" "$@"
command -v mpirun >/dev/null || { echo "skip: no mpirun"; exit 77; }

prepare_rl_task
base=("${RL_TASK[@]}" --set rl.eval_prompts='""' --set rl.prompts_per_step=4 --set rl.group_size=4
  --set rl.max_new_tokens=6 --set train.seq_len=64 --set train.micro_batch=8 --set train.steps=4 --set optim.lr=1e-3
  --set rl.kl_coef=0.05 --set rl.updates_per_rollout=1 --set checkpoint.every=2 --set train.threads=1)
ep=(--set parallel.ep=2)
trainer=(--set rl.sample_with_trainer=true)
# bf16 GEMMs: the decoder's routers and the trainer's then choose differently now and then (flip_rate > 0).
replay=(--set rl.routing_replay=true --set train.precision='"bf16"' --set rl.eval_prompts="\"$WORK/eval.jsonl\""
  --set rl.eval_every=2)
"$ZAYA" rl "${base[@]}" "${trainer[@]}" --set train.out_dir="\"$WORK/one\"" --set train.steps=1 >/dev/null
lora=(--set lora.rank=4 --set lora.dropout=0 --set optim.lr=1e-2)
for name in dp4 ep ep-bf16 dp4-replay ep-replay dp4-lora ep-lora; do
  case $name in
    dp4) extra=("${trainer[@]}") ;;
    ep) extra=("${ep[@]}" "${trainer[@]}") ;;
    ep-bf16) extra=("${ep[@]}" "${trainer[@]}" --set train.precision='"bf16"') ;;
    dp4-replay) extra=("${replay[@]}") ;;
    ep-replay) extra=("${ep[@]}" "${replay[@]}") ;;
    dp4-lora) extra=("${lora[@]}") ;;
    ep-lora) extra=("${ep[@]}" "${lora[@]}") ;;
  esac
  "${MPIRUN[@]}" -np 4 "$ZAYA" rl "${base[@]}" "${extra[@]}" --set train.out_dir="\"$WORK/$name\"" >/dev/null
done
python3 - "$WORK" <<'PY' || fail "dp 2 x ep 2 differs from dp 4 or one rank, or its parity is off"
import json, sys
def load(name):
    return [json.loads(l) for l in open(f"{sys.argv[1]}/{name}/metrics.jsonl")]
pairs = (("one", "ep"), ("dp4", "ep"), ("ep-bf16", "ep-bf16"), ("dp4-replay", "ep-replay"), ("dp4-lora", "ep-lora"))
for ref_name, ep_name in pairs:
    ref, ep = load(ref_name), load(ep_name)
    assert len(ep) == (7 if ep_name == "ep-replay" else 4) and len(ref) <= len(ep), (ep_name, len(ref), len(ep))
    for a, b in zip(ref, ep):
        if "eval_reward" in a:
            assert a == b, (a, b)  # the held-out prompts, split over the ranks: the same greedy answers
            continue
        for k in ("response_length", "completion_tokens", "recompute_mismatches"):
            assert a[k] == b[k], (ref_name, a["step"], k, a[k], b[k])
        for k in ("reward_mean", "reward_std"):
            assert abs(a[k] - b[k]) < 1e-12, (ref_name, a["step"], k, a[k], b[k])  # summed in another order
        for k in ("loss", "grad_norm", "entropy", "kl_ref"):
            assert abs(a[k] - b[k]) <= 1e-6 * max(1.0, abs(a[k])), (ref_name, a["step"], k, a[k], b[k])
        assert b["recompute_mismatches"] == 0 and b["completion_tokens"] > 0, b
        if ep_name in ("ep", "ep-bf16"):  # sampled with the trainer: its log-probabilities, bit for bit
            assert b["rollout_logp_mismatches"] == 0 and b["decoder_logp_max_abs_diff"] == 0, b
            assert b["decoder_ratio_min"] == 1 and b["decoder_ratio_max"] == 1, b
        elif ep_name == "ep-lora":  # the gathered decoder over the base, with a copy of the adapters
            assert b["decoder_logp_max_abs_diff"] < 1e-3, b
        else:  # the gathered decoder's routing record, replayed by the expert-parallel trainer
            assert b["routing_replay"] and b["routing_choices"] == a["routing_choices"] > 0, (a, b)
            assert b["routed_flip_rate"] == 0 and b["update_routed_flip_rate"] == 0, b
            assert b["decoder_logp_max_abs_diff"] < 5e-2, b  # the decoder in bf16 (docs/rl.md "Parity")
    if ep_name == "ep-replay":  # the trainer's routers would have chosen otherwise: replay had work to do
        assert sum(r["flip_rate"] for r in ep if "reward_mean" in r) > 0, ep
    print(f"ok: dp 2 x ep 2 ({ep_name}) against {ref_name}: the same samples and rewards, step by step;",
          "(rollout log-prob mismatches, flip rate, routed flip rate):",
          [(r["rollout_logp_mismatches"], r["flip_rate"], r["routed_flip_rate"]) for r in ep if "reward_mean" in r])
PY
# Stop and resume under dp 2 x ep 2: bit for bit.
"${MPIRUN[@]}" -np 4 "$ZAYA" rl "${base[@]}" "${ep[@]}" "${trainer[@]}" --set train.out_dir="\"$WORK/split\"" \
  --stop-at 2 >/dev/null
[[ -d $WORK/split/checkpoints/step_00000002 && ! -e $WORK/split/final ]] || fail "--stop-at 2 left no checkpoint"
"${MPIRUN[@]}" -np 4 "$ZAYA" rl "${base[@]}" "${ep[@]}" "${trainer[@]}" --set train.out_dir="\"$WORK/split\"" \
  --resume >/dev/null
cmp -s "$WORK/ep/final/model.safetensors" "$WORK/split/final/model.safetensors" ||
  fail "dp 2 x ep 2: stop at 2 and resume: the final weights differ"
metrics() { python3 -c 'import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print(json.dumps({k: v for k, v in r.items() if not (k.endswith("_seconds") or k.endswith("_per_s"))}))' "$1"; }
diff <(metrics "$WORK/ep/metrics.jsonl") <(metrics "$WORK/split/metrics.jsonl") >/dev/null ||
  fail "dp 2 x ep 2: stop at 2 and resume: metrics.jsonl differs"
echo "ok: dp 2 x ep 2: stop at 2, resume: the final weights and the metrics bit for bit"
# Configs the mesh cannot run.
expect_error 1 "parallel.ep = 3 is invalid; allowed: a divisor of the expert count \(4\)" -- \
  "$ZAYA" rl "${base[@]}" --set parallel.ep=3 --set train.out_dir="\"$WORK/bad\""
expect_error 1 "the world of 1 rank does not fit parallel.ep = 2.*mpirun" -- \
  "$ZAYA" rl "${base[@]}" "${ep[@]}" --set train.out_dir="\"$WORK/bad\""
expect_error 1 "parallel.cp = 2: .*allowed: 1" -- \
  "$ZAYA" rl "${base[@]}" --set parallel.cp=2 --set train.out_dir="\"$WORK/bad\""
expect_error 1 "rl.prompts_per_step = 2 on 4 ranks.*allowed: a multiple of 4" -- \
  "${MPIRUN[@]}" -np 4 "$ZAYA" rl "${base[@]}" "${ep[@]}" --set rl.prompts_per_step=2 --set train.out_dir="\"$WORK/bad\""
expect_error 1 "lora.base_dtype = \"int8\" with parallel.ep = 2: .*allowed: parallel.ep = 1, or lora.base_dtype = \"float\"" \
  -- "${MPIRUN[@]}" -np 2 "$ZAYA" rl "${base[@]}" "${ep[@]}" --set rl.prompts_per_step=2 --set lora.rank=4 \
  --set lora.base_dtype='"int8"' --set train.out_dir="\"$WORK/bad\""
echo "ok: rl under dp 2 x ep 2"
