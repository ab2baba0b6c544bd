#!/usr/bin/env bash
# `zaya rl` end to end (docs/rl.md), a short version of the walk-through
# (bench/rl_demo.sh): tools/rl_task.py's "reverse two words" chats, a short
# SFT warm start of a fresh 2-block `tiny` model on a mixture that mostly
# copies the words, then 20 GRPO steps of configs/rl-tiny.toml with the task's
# partial-credit reward program raise the held-out reward (greedy, prompts
# never trained on) by at least 0.15. Also: the parity metrics (the trainer's
# log-probabilities equal the old policy's bit for bit on-policy; the
# decoder's within 1e-3), and bad prompts, configs and reward programs named
# by file, line and field; routing replay's flip rates (with replay no choice
# is routed otherwise than the rollout's) and rl.sample_with_trainer (the
# rollout's log-probabilities the trainer's bit for bit). The runs take one thread: on a loaded machine two
# threads' barriers cost more than they give at these sizes.
source "$(dirname "$0")/common.bash" "$@"

python3 "$SRC/tools/rl_task.py" make "$WORK" --words 2 --vocab 20 --copy-share 0.8 --sft 3000 --prompts 160 --eval 40
"$ZAYA" data tokenizer --corpus "$SRC/data/kjv/kjv.txt" --corpus "$WORK/chat.txt" --vocab-size 1024 \
  --max-sentences 20000 --out "$WORK/tok" >/dev/null
"$ZAYA" data sft --corpus "$WORK/sft.jsonl" --tokenizer "$WORK/tok.model" --out "$WORK/sft" --val-fraction 0.05 \
  --quiet >/dev/null
"$ZAYA" train --config "$SRC/configs/rl-tiny-sft.toml" --threads 1 --set data.dir="\"$WORK/sft\"" \
  --set data.tokenizer="\"$WORK/tok.model\"" --set train.eval_every=0 --set train.out_dir="\"$WORK/sft-run\"" \
  --quiet >/dev/null
rl_args=(--set model.init_from="\"$WORK/sft-run/final\"" --set data.tokenizer="\"$WORK/tok.model\""
  --set rl.prompts="\"$WORK/prompts.jsonl\"" --set rl.eval_prompts="\"$WORK/eval.jsonl\""
  --set rl.command="\"python3 $SRC/tools/rl_task.py reward\"" --set rl.eval_every=0 --set train.log_every=1)
("$ZAYA" rl --config "$SRC/configs/rl-tiny.toml" "${rl_args[@]}" --threads 1 --set train.steps=20 \
  --set train.out_dir="\"$WORK/rl\"") >"$WORK/rl.log" 2>&1 || { cat "$WORK/rl.log"; fail "zaya rl"; }
cat "$WORK/rl.log"
python3 - "$WORK/rl/metrics.jsonl" <<'PY' || fail "the RL run did not learn, or its parity metrics are off"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
steps = [r for r in recs if "reward_mean" in r]
evals = [r for r in recs if "eval_reward" in r]
assert len(steps) == 20 and len(evals) == 2, (len(steps), len(evals))
before, after = evals[0]["eval_reward"], evals[1]["eval_reward"]
first = sum(r["reward_mean"] for r in steps[:5]) / 5
last = sum(r["reward_mean"] for r in steps[-5:]) / 5
print(f"held-out reward (greedy, 40 prompts): {before:.3f} -> {after:.3f}; training reward (T = 1): steps 1-5 "
      f"{first:.3f}, steps 16-20 {last:.3f}")
# The warm start mostly copies where it is asked to reverse; GRPO teaches it to reverse.
assert before < 0.3 and after >= before + 0.15, (before, after)
for r in steps:
    # The first update is on-policy: its log-probabilities are the old policy's, bit for bit (the ratio range
    # spans the second update of each rollout too); the decoder's are close.
    assert r["recompute_mismatches"] == 0 and r["ratio_min"] <= 1.0 <= r["ratio_max"], r
    assert r["decoder_logp_max_abs_diff"] < 1e-3 and r["completion_tokens"] > 0, r
    # The decoder's routing record against the trainer's routers (routing replay off): reported, and rare.
    assert r["routing_choices"] > 0 and r["routed_flip_rate"] == r["flip_rate"] < 0.05, r
    for k in ("reward_std", "response_length", "kl_ref", "clip_fraction", "entropy", "rollout_tokens_per_s",
              "update_tokens_per_s"):
        assert k in r, k
PY
# Routing replay (docs/rl.md): the flip rates are reported; with replay no choice is routed otherwise than the
# rollout's. Sampling with the trainer: the rollout's log-probabilities are the trainer's bit for bit, f32 and bf16.
for name in replay trainer trainer-bf16 lora-bf16 qlora; do
  case $name in
    replay) extra=(--set rl.routing_replay=true) ;;
    trainer) extra=(--set rl.sample_with_trainer=true) ;;
    trainer-bf16) extra=(--set rl.sample_with_trainer=true --set train.precision='"bf16"') ;;
    # LoRA over a frozen base held only as bf16, and over MXFP4 experts: the cached decoder reads those as held.
    lora-bf16) extra=(--set lora.rank=4 --set lora.dropout=0 --set train.precision='"bf16"') ;;
    qlora) extra=(--set lora.rank=4 --set lora.dropout=0 --set lora.base_dtype='"mxfp4"') ;;
  esac
  "$ZAYA" rl --config "$SRC/configs/rl-tiny.toml" "${rl_args[@]}" "${extra[@]}" --threads 1 --set train.steps=3 \
    --set rl.eval_prompts='""' --set train.out_dir="\"$WORK/rl-$name\"" >"$WORK/rl-$name.log" 2>&1 ||
    { cat "$WORK/rl-$name.log"; fail "zaya rl ($name)"; }
  grep "flips" "$WORK/rl-$name.log" | head -3
  python3 - "$WORK/rl-$name/metrics.jsonl" "$name" <<'PY' || fail "routing replay or trainer sampling metrics ($name)"
import json, sys
steps = [json.loads(l) for l in open(sys.argv[1])]
name = sys.argv[2]
assert len(steps) == 3, len(steps)
for r in steps:
    assert r["recompute_mismatches"] == 0 and r["completion_tokens"] > 0, r
    if name in ("lora-bf16", "qlora"):
        # The decoder's log-probs against the trainer's: bf16 matrices (and a bf16 cache), or the same MXFP4 rows.
        assert r["decoder_logp_max_abs_diff"] < (0.1 if name == "lora-bf16" else 1e-3), r
    elif name == "replay":
        assert r["routing_replay"] and r["routing_choices"] > 0, r
        assert r["routed_flip_rate"] == 0 and r["update_routed_flip_rate"] == 0, r
        assert 0 <= r["flip_rate"] < 0.05, r
    else:
        assert r["rollout_logp_mismatches"] == 0 and r["decoder_logp_max_abs_diff"] == 0, r
        assert r["decoder_ratio_min"] == 1 and r["decoder_ratio_max"] == 1 and r["routing_choices"] == 0, r
print(name, "ok:", [(r["flip_rate"], r["rollout_logp_mismatches"], r["decoder_logp_max_abs_diff"]) for r in steps])
PY
done

[[ -f $WORK/rl/final/model.safetensors && -f $WORK/rl/config.toml ]] || fail "no final weights or config.toml"
grep -q '^\[rl\]' "$WORK/rl/config.toml" || fail "config.toml lacks [rl]"
# zaya report plots the run.
"$ZAYA" report "$WORK/rl" --out "$WORK/report" >/dev/null
for f in rl_reward.svg rl_kl.svg rl_length.svg; do [[ -s $WORK/report/$f ]] || fail "zaya report wrote no $f"; done

# Bad input: the file, line and field are named.
printf '{"messages": [{"role": "user", "content": "reverse: a b"}], "answer": "b a"}\n{"prompt": 3}\n' >"$WORK/bad1.jsonl"
expect_error 1 "bad1.jsonl:2: \"prompt\" is 3; allowed: a string" -- \
  "$ZAYA" rl --config "$SRC/configs/rl-tiny.toml" "${rl_args[@]}" --set rl.prompts="\"$WORK/bad1.jsonl\""
printf '{"prompt": "a", "answer": "b"}\n{"prompt": "c"}\n' >"$WORK/bad2.jsonl"
expect_error 1 "bad2.jsonl:2: the record has no \"answer\" field" -- \
  "$ZAYA" rl --config "$SRC/configs/rl-tiny.toml" "${rl_args[@]}" --set rl.reward='"exact"' \
  --set rl.prompts="\"$WORK/bad2.jsonl\""
expect_error 2 "rl.reward = 'best' is invalid; allowed: one of: exact, boxed, regex, command, numeric" -- \
  "$ZAYA" rl --config "$SRC/configs/rl-tiny.toml" "${rl_args[@]}" --set rl.reward='"best"'
# (the held-out prompts are scored first, greedily: one sample each)
expect_error 1 "the reward command .* output line 1 \(the score of .*/eval\.jsonl:1\) is 'x'; allowed: a finite number" -- \
  "$ZAYA" rl --config "$SRC/configs/rl-tiny.toml" "${rl_args[@]}" \
  --set rl.command='"cat >/dev/null; echo x"' --set train.steps=1 --set train.out_dir="\"$WORK/rlbad\""
expect_error 1 "rl-tiny.toml: has an \[rl\] section, which .zaya rl --config" -- \
  "$ZAYA" train --config "$SRC/configs/rl-tiny.toml" --set data.dir='"x"'
echo "ok: rl"
