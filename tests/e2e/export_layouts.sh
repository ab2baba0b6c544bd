#!/usr/bin/env bash
# `zaya ckpt export --layout native|legacy` and `train.save_layout`, for a
# small model of each released preset's structure: the 8B's (tiny widths, full
# attention) and the 74B's (sliding-window blocks). A trained final/ (legacy)
# whose balancing biases keep the skip expert from ever being chosen goes
# legacy -> native -> legacy and native -> legacy -> native bit for bit
# (weights and config.json), and every export generates and scores like
# final/; the same model with a skip slot that can win is refused natively,
# naming the half-layers; a run with train.save_layout = "native" writes a
# native final/ or refuses it by name, and a model with no native spelling is
# refused when the config is read.
source "$(dirname "$0")/common.bash" "$@"

prepare_data 512

# set_biases DIR EXPERT SKIP: every balancing-bias vector of DIR/model.safetensors
# (F32) gets EXPERT for the experts and SKIP for the skip slot (the last).
set_biases() {
  python3 - "$1/model.safetensors" "$2" "$3" <<'PY'
import json, struct, sys
path, expert, skip = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
with open(path, "r+b") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(n))
    for name, t in header.items():
        if not name.endswith("balancing_biases"):
            continue
        assert t["dtype"] == "F32", name
        slots = t["shape"][0]
        f.seek(8 + n + t["data_offsets"][0])
        f.write(struct.pack("<%df" % slots, *([expert] * (slots - 1) + [skip])))
PY
}

greedy() { "$ZAYA" generate --model "$1" --prompt "And God said" --max-new-tokens 16 --temperature 0; }
echo '[[2, 100, 200, 300, 1], [2, 7, 8, 9]]' >"$WORK/ids.json"

for shape in 8b 74b; do
  write_config $shape.toml 8
  sed -i "s|out_dir = .*|out_dir = \"$WORK/$shape\"|" "$WORK/$shape.toml"
  [[ $shape == 74b ]] && sed -i 's/^num_blocks = 2$/num_blocks = 4\nsliding_window = 4\nsliding_rope_theta = 10000.0/' "$WORK/$shape.toml"
  "$ZAYA" train --config "$WORK/$shape.toml" --quiet >/dev/null
  F=$WORK/$shape/final
  E=$WORK/$shape-exports
  mkdir -p "$E"
  if [[ $shape == 74b ]]; then
    info=$("$ZAYA" info --model "$F")
    grep -q "sliding" <<<"$info" || fail "74b: final/ has no sliding blocks: $info"
  fi

  # Biases under which the skip slot can win (1 + 0 > 0): no native export.
  cp -r "$F" "$WORK/live"
  set_biases "$WORK/live" 0 0
  expect_error 1 "--layout native: $WORK/live cannot be written in the native layout exactly: in half-layer\(s\) [0-9, ]+ the balancing biases let the skip slot be chosen" -- \
    "$ZAYA" ckpt export --in "$WORK/live" --out "$E/refused" --layout native
  [[ ! -e $E/refused ]] || fail "$shape: a refused export left $E/refused"
  rm -rf "$WORK/live"

  # 1 + b_skip = 0 < 0.5: the skip slot never wins, and both layouts compute the same.
  set_biases "$F" 0.5 -1
  "$ZAYA" ckpt export --in "$F" --out "$E/l0" >/dev/null                     # the legacy writer's bytes of final/
  "$ZAYA" ckpt export --in "$F" --out "$E/n1" --layout native >"$WORK/n1.log" # legacy -> native
  "$ZAYA" ckpt export --in "$E/n1" --out "$E/l1" --layout legacy >"$WORK/l1.log" # native -> legacy
  # The counts of this model (2 or 4 blocks), not ZAYA1-base's 40 / 80 (red-team L13).
  blocks=$([[ $shape == 74b ]] && echo 4 || echo 2)
  grep -q "native ($blocks-layer) layout" "$WORK/n1.log" || fail "$shape: $(cat "$WORK/n1.log")"
  grep -q "legacy ($((2 * blocks)) half-layers) layout" "$WORK/l1.log" || fail "$shape: $(cat "$WORK/l1.log")"
  "$ZAYA" ckpt export --in "$E/l1" --out "$E/n2" --layout native >/dev/null  # legacy -> native again
  for f in model.safetensors config.json; do
    cmp -s "$E/l0/$f" "$E/l1/$f" || fail "$shape: legacy -> native -> legacy changed $f"
    cmp -s "$E/n1/$f" "$E/n2/$f" || fail "$shape: native -> legacy -> native changed $f"
  done
  grep -q '"layer_types"' "$E/n1/config.json" || fail "$shape: n1 is not the native layout"
  if [[ $shape == 74b ]]; then
    grep -q '"hybrid_sliding"' "$E/n1/config.json" || fail "74b: the native config has no sliding layer"
    grep -q '"swa_layers"' "$E/l1/config.json" || fail "74b: the legacy config has no swa_layers"
  fi
  inspect=$("$ZAYA" ckpt inspect "$E/n1")
  grep -q "model directory, native layout" <<<"$inspect" || fail "$shape: inspect does not say native"
  greedy "$F" >"$WORK/final.txt"
  "$ZAYA" score --model "$F" --tokens "$WORK/ids.json" >"$WORK/s_final.txt"
  for out in "$E/n1" "$E/l1" "$E/n2"; do
    greedy "$out" >"$WORK/gen.txt"
    cmp -s "$WORK/gen.txt" "$WORK/final.txt" || fail "$out generates '$(cat "$WORK/gen.txt")', final/ '$(cat "$WORK/final.txt")'"
    "$ZAYA" score --model "$out" --tokens "$WORK/ids.json" >"$WORK/s.txt"
    cmp -s "$WORK/s.txt" "$WORK/s_final.txt" || fail "$out scores $(cat "$WORK/s.txt"), final/ $(cat "$WORK/s_final.txt")"
  done
  echo "ok: $shape: legacy -> native -> legacy and native -> legacy -> native bit for bit; every export generates and scores like final/"
done

# ckpt compare takes model directories and GGUF files (weights only), so an
# export is compared with its source without importing both (red-team L15);
# ckpt import without --config records the directory's own config.json, and
# training resumes from it.
F=$WORK/8b/final
"$ZAYA" ckpt compare "$F" "$WORK/8b-exports/n1" >"$WORK/cmp.log" || fail "final/ vs its native export: $(cat "$WORK/cmp.log")"
grep -q "note: weights only: .* holds no optimizer or controller state" "$WORK/cmp.log" || fail "$(cat "$WORK/cmp.log")"
grep -q "every weight tensor equal bit for bit" "$WORK/cmp.log" || fail "$(cat "$WORK/cmp.log")"
"$ZAYA" ckpt export --in "$F" --out "$WORK/8b.gguf" >/dev/null
"$ZAYA" ckpt compare "$WORK/8b.gguf" "$F" >/dev/null || fail "final/ vs its GGUF export"
cp -r "$F" "$WORK/changed"
set_biases "$WORK/changed" 0.25 -1
expect_error 1 "[0-9]+ tensor\(s\) differ" -- "$ZAYA" ckpt compare "$F" "$WORK/changed"
"$ZAYA" ckpt import --in "$WORK/8b-exports/n1" --out "$WORK/imported" >"$WORK/import.log" ||
  fail "import without --config: $(cat "$WORK/import.log")"
grep -q "with its own config.json as the model config (continue with zaya train --config YOUR.toml" "$WORK/import.log" ||
  fail "import without --config: $(cat "$WORK/import.log")"
"$ZAYA" ckpt compare "$WORK/imported/step_00000000" "$F" >/dev/null || fail "the import without --config changed a weight"
"$ZAYA" train --config "$WORK/8b.toml" --quiet --set train.steps=10 --set train.out_dir="$WORK/from_import" \
  --resume "$WORK/imported/step_00000000" --stop-at 1 >/dev/null || fail "training from an import without --config"
echo "ok: compare reads model directories and GGUF files; import defaults to the directory's config"

expect_error 2 "--layout native is for a Hugging Face directory" -- \
  "$ZAYA" ckpt export --in "$WORK/8b/final" --out "$WORK/m.gguf" --layout native
expect_error 2 "--layout sideways is invalid; allowed: legacy, native" -- \
  "$ZAYA" ckpt export --in "$WORK/8b/final" --out "$WORK/x" --layout sideways

# train.save_layout = "native": a native final/ when the trained biases allow it, else a refusal by name.
"$ZAYA" train --config "$WORK/74b.toml" --quiet --set train.save_layout=native --set train.out_dir="$WORK/nat" \
  >"$WORK/nat.log" 2>&1 && rc=0 || rc=$?
if [[ $rc == 0 ]]; then
  grep -q '"layer_types"' "$WORK/nat/final/config.json" || fail "save_layout native wrote $(head -c 300 "$WORK/nat/final/config.json")"
  echo "ok: train.save_layout = native writes a native final/"
else
  grep -q 'train.save_layout = "native": the trained model cannot be written in the native layout exactly: in half-layer(s)' "$WORK/nat.log" ||
    fail "save_layout native: exit $rc, $(cat "$WORK/nat.log")"
  [[ -f $WORK/nat/checkpoints/step_00000008/metadata.json && ! -e $WORK/nat/final ]] ||
    fail "save_layout native refused, but the last checkpoint is missing or final/ was written: $(ls "$WORK/nat")"
  echo "ok: train.save_layout = native refuses a model whose skip slot can win, after its last checkpoint"
fi
expect_error 1 "train.save_layout = \"native\" is invalid for this model: top_k = 2" -- \
  "$ZAYA" train --config "$WORK/8b.toml" --quiet --set train.save_layout=native --set model.top_k=2 \
  --set train.out_dir="$WORK/bad"
echo "ok: export layouts"
