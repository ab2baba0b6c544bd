#!/usr/bin/env bash
# Several LoRA adapters in one zaya serve (docs/serve.md "Adapters"), with the
# official `openai` client (pinned, scripts/python-env.sh): two adapters
# trained here by `zaya train` with [lora] (attention targets at rank 4; the
# router and expert targets too at rank 8) are served as models "a" and "b"
# beside the base; each model name gives the greedy text `zaya generate --lora
# DIR` gives (the base: no --lora), alone and in concurrent mixed requests;
# /v1/models lists the three; an adapter loads and unloads at run time
# through vLLM's admin endpoints (with the API key), and an unload while a
# request streams on it lets that request finish unchanged
# (tests/e2e/serve_lora.py). The hostile cases are in serve_hostile.py.
source "$(dirname "$0")/common.bash" "$@"

prepare_data 512
write_config base.toml 30
"$ZAYA" train --config "$WORK/base.toml" --quiet >/dev/null
BASE=$WORK/run/final

# train_adapter NAME SEED [LORA TOML LINES...]: a 12-step LoRA run on the base; its adapter in $WORK/NAME/adapter.
train_adapter() {
  local name=$1 seed=$2; shift 2
  sed '/^out_dir/d' "$WORK/base.toml" >"$WORK/$name.toml"
  printf '[optim]\nlr = 0.02\n[lora]\n' >>"$WORK/$name.toml"
  printf '%s\n' "$@" >>"$WORK/$name.toml"
  sed -i "/^\[model\]$/a init_from = \"$BASE\"" "$WORK/$name.toml"
  sed -i 's/^steps = 30$/steps = 12/' "$WORK/$name.toml"
  "$ZAYA" train --config "$WORK/$name.toml" --quiet --set train.out_dir="$WORK/$name" --set train.seed="$seed" \
    >/dev/null || fail "the LoRA run $name"
  [[ -f $WORK/$name/adapter/adapter_model.safetensors ]] || fail "the LoRA run $name wrote no adapter"
}
train_adapter a 1 'rank = 4' 'alpha = 8'
train_adapter b 2 'rank = 8' 'alpha = 16' \
  'targets = ["q_proj", "k_proj", "o_proj", "mlp.gate.router_mlp.fc1", "mlp.experts.gate_up_proj", "mlp.experts.down_proj"]'

# The references: zaya generate's greedy text per model and prompt (the base without --lora).
PROMPTS=("In the beginning" "And God said" "The LORD is my shepherd")
: >"$WORK/want.jsonl"
for model in run a b; do
  lora=()
  [[ $model == run ]] || lora=(--lora "$WORK/$model/adapter")
  for p in "${PROMPTS[@]}"; do
    text=$("$ZAYA" generate --model "$BASE" "${lora[@]}" --threads 1 --max-new-tokens 12 --temperature 0 --exact \
      --prompt "$p" 2>/dev/null) || fail "zaya generate ${lora[*]}"
    jq -cn --arg m "$model" --arg p "$p" --arg t "${text#"$p"}" '{model: $m, prompt: $p, text: $t}' >>"$WORK/want.jsonl"
  done
done

PYTHON=$("$SRC/scripts/python-env.sh") || fail "the pinned Python environment could not be made (scripts/python-env.sh)"
KEY=test-key
start_serve "$KEY" "$BASE" --lora a="$WORK/a/adapter" --lora b="$WORK/b/adapter" --lora-admin --batch 4 --threads 1 --exact
grep -q 'LoRA adapters: a, b' "$WORK/serve.log" || fail "the start-up lines do not name the adapters: $(cat "$WORK/serve.log")"
"$PYTHON" "$SRC/tests/e2e/serve_lora.py" "$URL/v1" "$KEY" "$WORK/want.jsonl" "$WORK/a/adapter" "$WORK/b/adapter" ||
  fail "serve_lora.py (server log: $(tail -20 "$WORK/serve.log"))"
echo "ok: serve with LoRA adapters"
