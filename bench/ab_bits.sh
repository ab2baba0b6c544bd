#!/usr/bin/env bash
# Two zaya binaries train to the same bits: the main job's model (configs/tiny.toml,
# float32 and bf16 GEMMs), a dp=2 x ep=2 run under MPI and a LoRA run on the
# first's weights, each with OLD and NEW, and every final weight file compared
# byte for byte (cmp). For refactors that must not change numerics (issue
# [arch2]); minutes on 2 cores, not a CI test.
#
#   bench/ab_bits.sh OLD_ZAYA NEW_ZAYA [STEPS]
#   e.g. bench/ab_bits.sh /tmp/zaya-before build/zaya 200
# STEPS (default: the config's 1,200) shortens the main job; the LoRA run takes 40.
set -euo pipefail
old=$(realpath "$1") new=$(realpath "$2") steps=${3:-}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/zaya-ab-bits.XXXXXX)
trap 'rm -rf "$work"' EXIT
export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
mpi=(mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1)

"$new" data tokenizer --corpus "$root/data/kjv/kjv.txt" --vocab-size 2048 --out "$work/data/tokenizer" >/dev/null
"$new" data shards --corpus "$root/data/kjv/kjv.txt" --tokenizer "$work/data/tokenizer.model" --out "$work/data" \
  >/dev/null
data=(--set "data.dir=$work/data" --set "data.tokenizer=$work/data/tokenizer.model")
short=()
[[ -n $steps ]] && short=(--set "train.steps=$steps" --set "train.eval_every=$steps")

train() {  # side name [launcher...] -- flags...
  local side=$1 name=$2
  shift 2
  local launch=()
  while [[ $1 != -- ]]; do launch+=("$1"); shift; done
  shift
  local bin=$old
  [[ $side == new ]] && bin=$new
  "${launch[@]}" "$bin" train --quiet --set "train.out_dir=$work/$side/$name" "$@" >"$work/$side-$name.log" 2>&1 ||
    { cat "$work/$side-$name.log"; echo "FAIL: $side $name" >&2; exit 1; }
}

for side in old new; do
  train "$side" main_f32 -- --config "$root/configs/tiny.toml" "${data[@]}" "${short[@]}" --set train.precision=f32
  train "$side" main_bf16 -- --config "$root/configs/tiny.toml" "${data[@]}" "${short[@]}" --set train.precision=bf16
  train "$side" dp2ep2 "${mpi[@]}" -np 4 -- --config "$root/configs/tiny.toml" "${data[@]}" --set train.steps=20 \
    --set train.eval_every=20 --set schedule.warmup_steps=4 --set train.micro_batch=4 --set parallel.ep=2 \
    --set train.precision=f32
  train "$side" lora -- --config "$root/configs/lora-tiny.toml" "${data[@]}" --set train.steps=40 \
    --set train.eval_every=40 --set schedule.warmup_steps=4 --set "model.init_from=$work/old/main_f32/final"
done

status=0
for name in main_f32 main_bf16 dp2ep2 lora; do
  files=0 differ=0
  while IFS= read -r f; do
    rel=${f#"$work/old/$name/"}
    files=$((files + 1))
    cmp -s "$f" "$work/new/$name/$rel" || { differ=$((differ + 1)); echo "  differs: $name/$rel"; }
  done < <(find "$work/old/$name" \( -path '*final*' -o -path '*adapter*' \) -type f \( -name '*.safetensors' -o -name '*.bin' \) | sort)
  [[ $files -gt 0 ]] || { echo "FAIL: $name wrote no final weights" >&2; status=1; }
  echo "$name: $files final weight files, $differ differ"
  [[ $differ == 0 ]] || status=1
done
exit $status
