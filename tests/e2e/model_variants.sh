#!/usr/bin/env bash
# What the reference supports beyond ZAYA1-base's config (spec §11), from the
# command line: a run with an untied LM head (model.tie_word_embeddings =
# false) and float32 RoPE trains, writes lm_head.weight and
# zaya_rope_precision into final/, and its exports (legacy, native, GGUF)
# generate and score like final/; without the key the same weights score
# otherwise (float64 RoPE), so the key is what carries it. A run with plain
# residual merges (model.scale_residual_merge = false) trains without
# res_scale tensors, exports to legacy and GGUF alike, and is refused in the
# native layout by name.
source "$(dirname "$0")/common.bash" "$@"

prepare_data 512
echo '[[2, 100, 200, 300, 1, 9, 40], [2, 7, 8, 9]]' >"$WORK/ids.json"
greedy() { "$ZAYA" generate --model "$1" --prompt "And God said" --max-new-tokens 16 --temperature 0; }

# Untied head, float32 RoPE.
write_config untied.toml 30
sed -i "s|out_dir = .*|out_dir = \"$WORK/untied\"|" "$WORK/untied.toml"
"$ZAYA" train --config "$WORK/untied.toml" --quiet --set model.tie_word_embeddings=false \
  --set model.rope_precision=f32 >/dev/null
F=$WORK/untied/final
first=$(losses "$WORK/untied/metrics.jsonl" | head -1)
last=$(losses "$WORK/untied/metrics.jsonl" | tail -1)
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.5) }' || fail "untied: the loss did not fall ($first -> $last)"
grep -q '"tie_word_embeddings": false' "$F/config.json" || fail "untied: config.json: $(cat "$F/config.json")"
grep -q '"zaya_rope_precision": "f32"' "$F/config.json" || fail "untied: no zaya_rope_precision in config.json"
tensors=$("$ZAYA" ckpt inspect "$F" --tensors)
grep -q "lm_head.weight" <<<"$tensors" || fail "untied: final/ has no lm_head.weight"
grep -q '^tie_word_embeddings = false' "$WORK/untied/config.toml" || fail "untied: config.toml lacks the key"
E=$WORK/untied-exports
"$ZAYA" ckpt export --in "$F" --out "$E/legacy" >/dev/null
"$ZAYA" ckpt export --in "$F" --out "$E/m.gguf" >/dev/null
"$ZAYA" ckpt export --in "$WORK/untied/checkpoints" --out "$E/from_ck" >/dev/null
if "$ZAYA" ckpt export --in "$F" --out "$E/native" --layout native >"$WORK/native.log" 2>&1; then
  grep -q '"zaya_rope_precision": "f32"' "$E/native/config.json" || fail "untied: the native config lacks the precision"
  grep -q '"tie_word_embeddings": false' "$E/native/config.json" || fail "untied: the native config is tied"
  natives=("$E/native")
else
  grep -q "cannot be written in the native layout exactly" "$WORK/native.log" || fail "untied native: $(cat "$WORK/native.log")"
  natives=()
fi
greedy "$F" >"$WORK/final.txt"
"$ZAYA" score --model "$F" --tokens "$WORK/ids.json" >"$WORK/s_final.txt"
for out in "$E/legacy" "$E/m.gguf" "$E/from_ck" "${natives[@]}"; do
  greedy "$out" >"$WORK/gen.txt"
  cmp -s "$WORK/gen.txt" "$WORK/final.txt" || fail "$out generates '$(cat "$WORK/gen.txt")', final/ '$(cat "$WORK/final.txt")'"
  "$ZAYA" score --model "$out" --tokens "$WORK/ids.json" >"$WORK/s.txt"
  cmp -s "$WORK/s.txt" "$WORK/s_final.txt" || fail "$out scores $(cat "$WORK/s.txt"), final/ $(cat "$WORK/s_final.txt")"
done
# The same weights without the key decode with float64 RoPE: other logits (the export's are final/'s).
cp -r "$E/legacy" "$WORK/f64"
sed -i '/"zaya_rope_precision"/d' "$WORK/f64/config.json"
for m in "$F" "$E/legacy" "$WORK/f64"; do
  "$ZAYA" score --model "$m" --tokens "$WORK/ids.json" --dump-logits "$WORK/logits.$(basename "$m").json" >/dev/null
done
cmp -s "$WORK/logits.final.json" "$WORK/logits.legacy.json" || fail "the export's logits differ from final/'s"
! cmp -s "$WORK/logits.f64.json" "$WORK/logits.final.json" || fail "float64 RoPE gives the f32 model's logits bit for bit"
echo "ok: an untied head with float32 RoPE trains, and its exports (${#natives[@]} native) decode like final/"

# Plain residual merges.
write_config plain.toml 30
sed -i "s|out_dir = .*|out_dir = \"$WORK/plain\"|" "$WORK/plain.toml"
"$ZAYA" train --config "$WORK/plain.toml" --quiet --set model.scale_residual_merge=false >/dev/null
P=$WORK/plain/final
first=$(losses "$WORK/plain/metrics.jsonl" | head -1)
last=$(losses "$WORK/plain/metrics.jsonl" | tail -1)
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.5) }' || fail "plain: the loss did not fall ($first -> $last)"
grep -q '"scale_residual_merge": false' "$P/config.json" || fail "plain: config.json: $(cat "$P/config.json")"
tensors=$("$ZAYA" ckpt inspect "$P" --tensors)
! grep -q "res_scale" <<<"$tensors" || fail "plain: final/ holds res_scale tensors"
"$ZAYA" ckpt export --in "$P" --out "$WORK/plain.gguf" >/dev/null
greedy "$P" >"$WORK/final.txt"
greedy "$WORK/plain.gguf" >"$WORK/gen.txt"
cmp -s "$WORK/gen.txt" "$WORK/final.txt" || fail "plain GGUF generates '$(cat "$WORK/gen.txt")', final/ '$(cat "$WORK/final.txt")'"
expect_error 1 "has no native layout: scale_residual_merge = false" -- \
  "$ZAYA" ckpt export --in "$P" --out "$WORK/plain-native" --layout native
echo "ok: model variants"
