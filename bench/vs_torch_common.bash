# Shared by bench/vs_torch_{pretrain,lora,decode}.sh: zaya.cpp and the PyTorch 2.x stack
# (transformers' ZayaForCausalLM, PEFT; scripts/python-env.sh's pinned environment) on one model
# directory, one after the other, alternating sides round by round (ROUNDS, default 2; the summary
# keeps each configuration's best round: the machine may be shared).
#
# Environment: ZAYA (default build/zaya), THREADS (default nproc, both sides), ROUNDS, OUT (the
# run's directory, emptied first), PY (default: scripts/python-env.sh's interpreter).
# SHAPE (first argument of each script):
#   tiny, small  zaya's preset, written by `zaya ckpt random --dtype f32` (native layout) and read
#                by transformers' from_pretrained;
#   8b           ZAYA1-8B's layer widths (hidden 2048, 8 x 128 query heads, 2 KV heads, experts of
#                width 2048, router 256), LAYERS blocks (default 2), EXPERTS experts (default 16),
#                VOCAB (default 32768; the released 262,144 does not fit both sides' optimizer state
#                in this machine's memory), written by transformers (save_pretrained, float32) and
#                read by zaya (model.init_from, checked against [model] field by field); HIDDEN,
#                EXPERT_FFN, Q_HEADS, KV_HEADS, HEAD_DIM, ROUTER_HIDDEN narrow it on both sides (CI).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
zaya=${ZAYA:-build/zaya}
threads=${THREADS:-$(nproc)}
rounds=${ROUNDS:-2}
[[ -x $zaya ]] || { echo "build zaya first (cmake --build build)" >&2; exit 1; }
PY=${PY:-$(scripts/python-env.sh)}

# fresh_dir DIR: the run's directory, without an earlier run's files (the summary takes the best of all).
fresh_dir() {
  rm -rf "$1"
  mkdir -p "$1"
}

# make_model SHAPE DIR: writes the model under DIR; sets MODEL (its directory) and ZARGS (zaya's
# --preset / --set arguments describing the same model, with model.init_from = MODEL).
make_model() {
  local shape=$1 dir=$2
  case $shape in
    tiny | small)
      MODEL=$dir/model-$shape
      "$zaya" ckpt random --preset "$shape" --dtype f32 --out "$MODEL" --seed 1 >/dev/null
      ZARGS=(--preset "$shape" --set "model.init_from=$MODEL")
      SHAPE_DESC="$shape (zaya ckpt random, f32, read by transformers)"
      ;;
    8b)
      local layers=${LAYERS:-2} vocab=${VOCAB:-32768} experts=${EXPERTS:-16} hf=() zs=() desc="" kv
      # Optional narrower widths (CI's tiny run of this path), the same on both sides: zaya key=transformers flag.
      for kv in HIDDEN:hidden_size:hidden-size EXPERT_FFN:expert_ffn:moe-intermediate-size Q_HEADS:q_heads:num-attention-heads \
        KV_HEADS:kv_heads:num-key-value-heads HEAD_DIM:head_dim:head-dim ROUTER_HIDDEN:router_hidden:router-hidden-size; do
        IFS=: read -r var key flag <<<"$kv"
        [[ -n ${!var:-} ]] || continue
        hf+=("--$flag" "${!var}")
        zs+=(--set "model.$key=${!var}")
        desc+=", $key ${!var}"
      done
      MODEL=$dir/model-8b
      "$PY" bench/vs_torch.py model --out "$MODEL" --layers "$layers" --vocab "$vocab" --experts "$experts" \
        --threads "$threads" "${hf[@]}" >"$dir/model.log" 2>&1 || { cat "$dir/model.log" >&2; exit 1; }
      ZARGS=(--preset zaya1-8b --set "model.num_blocks=$layers" --set "model.vocab_size=$vocab"
        --set "model.experts=$experts" --set model.router_norm_eps=1e-5 "${zs[@]}" --set "model.init_from=$MODEL")
      SHAPE_DESC="ZAYA1-8B widths$desc, $layers blocks, $experts experts, vocab $vocab (transformers save_pretrained, f32, read by zaya)"
      ;;
    *)
      echo "unknown shape '$shape'; allowed: tiny, small, 8b" >&2
      exit 2
      ;;
  esac
}

# write_meta DIR KEY=VALUE...: the run's settings for the summary (values that parse as JSON are kept
# as such, others as strings).
write_meta() {
  local dir=$1
  shift
  "$PY" - "$dir/meta.json" "$@" <<'PY'
import json, sys
meta = {}
for kv in sys.argv[2:]:
    k, v = kv.split("=", 1)
    try:
        meta[k] = json.loads(v)
    except ValueError:
        meta[k] = v
json.dump(meta, open(sys.argv[1], "w"), indent=1)
PY
}

# torch_run NAME TIMEOUT ARGS...: the PyTorch side as one process (its log beside the JSON); a failure or
# a timeout is recorded as NAME.failed and named in the summary, the other configurations go on.
torch_run() {
  local name=$1 limit=$2
  shift 2
  if ! timeout "$limit" "$PY" bench/vs_torch.py "$@" --threads "$threads" --json "$out/$name.json" \
    >"$out/$name.log" 2>&1; then
    echo "PyTorch $name failed or ran past ${limit}s: $out/$name.log" >&2
    touch "$out/$name.failed"
  fi
}

versions() {
  echo "zaya.cpp $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $("$PY" -c \
    'import torch, transformers, peft; print(f"torch {torch.__version__}, transformers {transformers.__version__}, peft {peft.__version__}")')"
  echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $threads threads"
}
