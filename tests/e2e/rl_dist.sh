#!/usr/bin/env bash
# `zaya rl` on two data-parallel ranks (mpirun -np 2; docs/rl.md "Several
# ranks"): each rank samples half of the step's prompts, from the sampling
# seeds the one-rank run gives them, so the step's samples, rewards and
# response lengths equal the one-rank run's exactly, and the weights after
# the updates (gradients summed over the ranks in another order) agree with
# it within 1e-4 (the rewards' mean within 1e-12: summed in another order); a stop and resume on two ranks is bit for bit; a
# prompts_per_step the ranks cannot share evenly is refused.
source "$(dirname "$0")/common.bash" "$@"
command -v mpirun >/dev/null || { echo "skip: no mpirun"; exit 77; }

prepare_rl_task
base=(--config "$SRC/configs/rl-tiny.toml" --quiet --set model.init_from='""' --set data.tokenizer="\"$WORK/tok.model\""
  --set rl.prompts="\"$WORK/prompts.jsonl\"" --set rl.eval_prompts="\"$WORK/eval.jsonl\"" --set rl.eval_every=2
  --set rl.prompts_per_step=4 --set rl.group_size=4 --set rl.max_new_tokens=6 --set train.seq_len=64
  --set train.micro_batch=8 --set train.steps=4 --set rl.command="\"python3 $WORK/len_reward.py\""
  --set optim.lr=1e-3 --set checkpoint.every=2 --set train.threads=1)
"$ZAYA" rl "${base[@]}" --set train.out_dir="\"$WORK/one\"" >/dev/null
"${MPIRUN[@]}" -np 2 "$ZAYA" rl "${base[@]}" --set train.out_dir="\"$WORK/two\"" >/dev/null
python3 - "$WORK/one/metrics.jsonl" "$WORK/two/metrics.jsonl" <<'PY' || fail "two ranks differ from one"
import json, sys
one, two = ([json.loads(l) for l in open(p)] for p in sys.argv[1:3])
assert len(one) == len(two), (len(one), len(two))
for a, b in zip(one, two):
    if "eval_reward" in a:
        assert a == b, (a, b)  # the held-out prompts, split over the ranks: the same greedy answers
        continue
    for k in ("response_length", "completion_tokens", "recompute_mismatches"):
        assert a[k] == b[k], (a["step"], k, a[k], b[k])
    assert abs(a["reward_mean"] - b["reward_mean"]) < 1e-12, (a, b)  # sums over the ranks: the last bit may differ
    for k in ("reward_std", "loss", "grad_norm", "entropy"):
        assert abs(a[k] - b[k]) <= 1e-4 * max(1.0, abs(a[k])), (a["step"], k, a[k], b[k])
print("ok: 2 ranks: the samples, rewards and lengths of every step equal one rank's; loss, gradient norm within 1e-4")
PY
"$ZAYA" ckpt compare --tolerance 1e-4 "$WORK/one/final" "$WORK/two/final" >/dev/null ||
  fail "the final weights of 2 ranks differ from one rank's by more than 1e-4"
echo "ok: 2 ranks: the final weights within 1e-4 of one rank's"
"${MPIRUN[@]}" -np 2 "$ZAYA" rl "${base[@]}" --set train.out_dir="\"$WORK/split\"" --stop-at 2 >/dev/null
"${MPIRUN[@]}" -np 2 "$ZAYA" rl "${base[@]}" --set train.out_dir="\"$WORK/split\"" --resume >/dev/null
cmp -s "$WORK/two/final/model.safetensors" "$WORK/split/final/model.safetensors" ||
  fail "2 ranks: stop at 2 and resume: the final weights differ"
echo "ok: 2 ranks: stop at 2, resume: the final weights bit for bit"
expect_error 1 "rl.prompts_per_step = 3 on 2 ranks.*allowed: a multiple of 2" -- \
  "${MPIRUN[@]}" -np 2 "$ZAYA" rl "${base[@]}" --set rl.prompts_per_step=3 --set train.out_dir="\"$WORK/bad\""
echo "ok: rl on 2 ranks"
