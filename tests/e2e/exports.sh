#!/usr/bin/env bash
# Exports that work on their own: a tiny run exported to a Hugging Face
# directory and to GGUF from its checkpoint, from final/ and from the
# checkpoints root; `zaya generate` from each export gives the greedy text of
# final/ (f32: identical; bf16: it generates; q8_0: as final/ with --dtype
# int8, also after `ckpt import`), the HF directories hold
# tokenizer.model, a GGUF file needs nothing beside it (its tokenizer is
# embedded), `zaya info` reads it like the directory it came from; an existing
# output is refused without --force and replaced with it; a damaged newest
# checkpoint is walked past (and said so); the tokenizer's absence is said
# plainly; a GGUF file of another tool gets a clear error; inspect describes
# final/.
source "$(dirname "$0")/common.bash" "$@"

prepare_data 512
write_config train.toml 40
printf '[checkpoint]\nevery = 20\n' >>"$WORK/train.toml"
"$ZAYA" train --config "$WORK/train.toml" --quiet >/dev/null
R=$WORK/run
ROOT=$R/checkpoints
CK=$ROOT/step_00000040
[[ -f $CK/metadata.json && -f $ROOT/step_00000020/metadata.json ]] || fail "expected checkpoints 20 and 40: $(ls "$ROOT")"
E=$WORK/exports
mkdir -p "$E"

greedy() { "$ZAYA" generate --model "$1" --prompt "And God said" --max-new-tokens 24 --temperature 0 "${@:2}"; }
greedy "$R/final" >"$WORK/final.txt"
[[ $(wc -c <"$WORK/final.txt") -gt 14 ]] || fail "final/ generated nothing: $(cat "$WORK/final.txt")"

# Every input kind, both formats (the format follows the .gguf name).
for kind in ck final root; do
  case $kind in ck) in=$CK ;; final) in=$R/final ;; root) in=$ROOT ;; esac
  "$ZAYA" ckpt export --in "$in" --out "$E/$kind" >"$WORK/$kind.hf.log" || fail "export $kind to HF"
  "$ZAYA" ckpt export --in "$in" --out "$E/$kind.gguf" >"$WORK/$kind.gguf.log" || fail "export $kind to GGUF"
  [[ -f $E/$kind/config.json && -f $E/$kind/model.safetensors ]] || fail "$kind: no HF directory: $(ls "$E/$kind")"
  cmp -s "$E/$kind/tokenizer.model" "$WORK/data/tokenizer.model" || fail "$kind: the HF export lacks tokenizer.model"
  grep -q "GGUF, f32" "$WORK/$kind.gguf.log" || fail "$kind: $(cat "$WORK/$kind.gguf.log")"
  grep -q "tokenizer .* embedded" "$WORK/$kind.gguf.log" || fail "$kind: tokenizer not embedded: $(cat "$WORK/$kind.gguf.log")"
  for out in "$E/$kind" "$E/$kind.gguf"; do
    greedy "$out" >"$WORK/gen.txt" || fail "generate from $out"
    cmp -s "$WORK/gen.txt" "$WORK/final.txt" || fail "$out generates '$(cat "$WORK/gen.txt")', final/ '$(cat "$WORK/final.txt")'"
  done
done
grep -q "$ROOT: using $CK, its newest checkpoint that reads completely" "$WORK/root.gguf.log" ||
  fail "the root export does not say which checkpoint it used: $(cat "$WORK/root.gguf.log")"
grep -q "general.name 'run'" "$WORK/ck.gguf.log" || fail "general.name is not the run's: $(cat "$WORK/ck.gguf.log")"
grep -q "general.name 'run'" "$WORK/final.gguf.log" || fail "final/: general.name is not the run's: $(cat "$WORK/final.gguf.log")"
echo "ok: HF and GGUF exports of a checkpoint, final/ and the checkpoints root generate like final/"

# The GGUF file alone (no tokenizer.model beside it): generate, score, eval, info.
mkdir -p "$WORK/alone"
cp "$E/ck.gguf" "$WORK/alone/model.gguf"
greedy "$WORK/alone/model.gguf" >"$WORK/gen.txt"
cmp -s "$WORK/gen.txt" "$WORK/final.txt" || fail "the GGUF file on its own generates differently"
greedy "$WORK/alone/model.gguf" --full-sequence >"$WORK/gen.txt"
cmp -s "$WORK/gen.txt" "$WORK/final.txt" || fail "--full-sequence from the GGUF file differs"
echo '[[2, 100, 200, 300, 1], [2, 7, 8]]' >"$WORK/ids.json"
"$ZAYA" score --model "$R/final" --tokens "$WORK/ids.json" >"$WORK/s1.txt"
"$ZAYA" score --model "$WORK/alone/model.gguf" --tokens "$WORK/ids.json" >"$WORK/s2.txt"
cmp -s "$WORK/s1.txt" "$WORK/s2.txt" || fail "score differs: $(cat "$WORK/s1.txt") vs $(cat "$WORK/s2.txt")"
awk 'NR > 30 && NR < 45' "$SRC/data/kjv/kjv.txt" >"$WORK/heldout.txt"
"$ZAYA" eval --model "$R/final" --text "$WORK/heldout.txt" --max-tokens 800 | grep -o 'loss [0-9.]*' >"$WORK/e1.txt"
"$ZAYA" eval --model "$WORK/alone/model.gguf" --text "$WORK/heldout.txt" --max-tokens 800 | grep -o 'loss [0-9.]*' >"$WORK/e2.txt"
[[ -s $WORK/e1.txt ]] && cmp -s "$WORK/e1.txt" "$WORK/e2.txt" || fail "eval differs: $(cat "$WORK/e1.txt") vs $(cat "$WORK/e2.txt")"
diff <("$ZAYA" info --model "$R/final" | tail -n +2) <("$ZAYA" info --model "$WORK/alone/model.gguf" | tail -n +2) ||
  fail "zaya info differs between final/ and its GGUF export"
echo "ok: a GGUF file on its own: generate, --full-sequence, score, eval and info as from final/"

# bf16 exports generate.
"$ZAYA" ckpt export --in "$R/final" --out "$E/bf16.gguf" --dtype bf16 >/dev/null
"$ZAYA" ckpt export --in "$R/final" --out "$E/bf16" --dtype bf16 >/dev/null
for out in "$E/bf16.gguf" "$E/bf16"; do
  greedy "$out" >"$WORK/gen.txt" || fail "generate from $out"
  [[ $(wc -c <"$WORK/gen.txt") -gt 14 ]] || fail "$out generated nothing"
done
[[ $(stat -c %s "$E/bf16.gguf") -lt $(stat -c %s "$E/ck.gguf") ]] || fail "the bf16 GGUF is not smaller"
echo "ok: bf16 exports generate"

# Q8_0 exports: the int8 matrices as Q8_0 blocks, the bytes `--dtype int8` runs, so the file generates what
# final/ does with --dtype int8; imported (dequantized) and run with --dtype int8 again, the same (requantizing
# Q8_0 values is exact); --dtype q8_0 is for GGUF only.
"$ZAYA" ckpt export --in "$R/final" --out "$E/q8.gguf" --dtype q8_0 >"$WORK/q8.log" || fail "export q8_0"
grep -q "GGUF, q8_0" "$WORK/q8.log" || fail "q8_0: $(cat "$WORK/q8.log")"
greedy "$R/final" --dtype int8 >"$WORK/int8.txt"
[[ $(wc -c <"$WORK/int8.txt") -gt 14 ]] || fail "final/ --dtype int8 generated nothing"
greedy "$E/q8.gguf" >"$WORK/gen.txt"
cmp -s "$WORK/gen.txt" "$WORK/int8.txt" || fail "q8.gguf generates '$(cat "$WORK/gen.txt")', final/ --dtype int8 '$(cat "$WORK/int8.txt")'"
[[ $(stat -c %s "$E/q8.gguf") -lt $(stat -c %s "$E/bf16.gguf") ]] || fail "the Q8_0 GGUF is not smaller than the bf16 one"
"$ZAYA" ckpt import --in "$E/q8.gguf" --out "$WORK/q8import" --config "$WORK/train.toml" >/dev/null || fail "import q8.gguf"
greedy "$WORK/q8import/step_00000000" --dtype int8 >"$WORK/gen.txt"
cmp -s "$WORK/gen.txt" "$WORK/int8.txt" || fail "the imported Q8_0 file generates '$(cat "$WORK/gen.txt")' with --dtype int8"
expect_error 2 "--dtype q8_0 is only for --format gguf" -- "$ZAYA" ckpt export --in "$R/final" --out "$E/q8dir" --dtype q8_0
echo "ok: a Q8_0 export generates like --dtype int8, and imports"

# An existing output: refused without --force (untouched), replaced with it.
before=$(md5sum <"$E/ck.gguf")
expect_error 1 "exists \(a file of [0-9]+ bytes\); pass --force" -- "$ZAYA" ckpt export --in "$ROOT/step_00000020" --out "$E/ck.gguf"
[[ $(md5sum <"$E/ck.gguf") == "$before" ]] || fail "a refused export changed the file"
expect_error 1 "exists \(a directory with 3 entries\); pass --force" -- "$ZAYA" ckpt export --in "$ROOT/step_00000020" --out "$E/ck"
"$ZAYA" ckpt export --in "$ROOT/step_00000020" --out "$E/ck.gguf" --force | grep -q "from step 20 .*replacing what was there" ||
  fail "--force did not replace the GGUF file"
[[ $(md5sum <"$E/ck.gguf") != "$before" ]] || fail "--force left the old GGUF file"
"$ZAYA" ckpt export --in "$ROOT/step_00000020" --out "$E/ck" --force >/dev/null
greedy "$E/ck" >"$WORK/gen20.txt"
greedy "$ROOT/step_00000020" >"$WORK/ck20.txt"
cmp -s "$WORK/gen20.txt" "$WORK/ck20.txt" || fail "the replaced directory does not hold step 20"
[[ -z $(find "$E" -name '.*.export*') ]] || fail "staged output left behind: $(find "$E" -name '.*.export*')"
expect_error 2 "--format safetensors writes a directory, but --out .*x.gguf is named like a GGUF file" -- \
  "$ZAYA" ckpt export --in "$CK" --out "$E/x.gguf" --format safetensors
expect_error 1 "a run directory; give --in .*/final" -- "$ZAYA" ckpt export --in "$R" --out "$E/y"
echo "ok: existing outputs need --force, which replaces them whole"

# A damaged newest checkpoint: the root's export and inspect walk back to step 20 and say so.
shard=$(find "$CK" -type f -name 'shard-*' | head -1)
[[ -n $shard ]] || fail "no shard file in $CK"
size=$(stat -c %s "$shard")
printf '\xff\xfe\xfd\xfc' | dd of="$shard" bs=1 seek=$((size / 2)) conv=notrunc status=none
"$ZAYA" ckpt export --in "$ROOT" --out "$E/walked.gguf" >"$WORK/walk.out" 2>"$WORK/walk.err"
grep -q "using $ROOT/step_00000020, its newest checkpoint that reads completely (1 newer one(s) skipped)" "$WORK/walk.out" ||
  fail "the export does not say it used step 20: $(cat "$WORK/walk.out")"
grep -q "skipped a damaged checkpoint: .*step_00000040.*checksum mismatch" "$WORK/walk.err" ||
  fail "the export does not name the damaged checkpoint: $(cat "$WORK/walk.err")"
greedy "$E/walked.gguf" >"$WORK/gen.txt"
cmp -s "$WORK/gen.txt" "$WORK/ck20.txt" || fail "the walked-back export is not step 20"
"$ZAYA" ckpt inspect "$ROOT" 2>/dev/null | grep -q "step 20," || fail "inspect of the root did not walk back"
"$ZAYA" ckpt inspect "$R/final" --json "$WORK/final.json" >"$WORK/final.inspect"
grep -q "model directory, legacy layout" "$WORK/final.inspect" && grep -q "tokenizer: $R/final/tokenizer.model" "$WORK/final.inspect" ||
  fail "inspect of final/: $(cat "$WORK/final.inspect")"
grep -q '"kind": "model_directory"' "$WORK/final.json" || fail "inspect --json of final/: $(head -c 300 "$WORK/final.json")"
echo "ok: a damaged newest checkpoint is skipped and named"

# No tokenizer to be found: the export succeeds and says how to add one.
mv "$WORK/data/tokenizer.model" "$WORK/tokenizer.model.away"
"$ZAYA" ckpt export --in "$ROOT/step_00000020" --out "$E/notok" 2>"$WORK/notok.err" >/dev/null || fail "export without tokenizer"
grep -q "has no tokenizer .*which does not exist here.*cp TOKENIZER.model $E/notok/tokenizer.model" "$WORK/notok.err" ||
  fail "no plain word about the missing tokenizer: $(cat "$WORK/notok.err")"
[[ ! -e $E/notok/tokenizer.model ]] || fail "a tokenizer.model appeared from nowhere"
expect_error 1 "has no tokenizer.model; pass --tokenizer FILE" -- "$ZAYA" generate --model "$E/notok" --prompt x
"$ZAYA" ckpt export --in "$ROOT/step_00000020" --out "$E/notok.gguf" 2>"$WORK/notok.err" >/dev/null
grep -q "has no tokenizer.*--tokenizer FILE" "$WORK/notok.err" || fail "GGUF: $(cat "$WORK/notok.err")"
expect_error 1 "embeds no tokenizer.*pass --tokenizer FILE" -- "$ZAYA" generate --model "$E/notok.gguf" --prompt x
mv "$WORK/tokenizer.model.away" "$WORK/data/tokenizer.model"
"$ZAYA" ckpt export --in "$ROOT/step_00000020" --out "$E/notok" --tokenizer "$WORK/data/tokenizer.model" --force >/dev/null
cmp -s "$E/notok/tokenizer.model" "$WORK/data/tokenizer.model" || fail "--tokenizer was not copied"
"$ZAYA" generate --model "$E/notok.gguf" --tokenizer "$WORK/data/tokenizer.model" --prompt x --max-new-tokens 2 >/dev/null ||
  fail "--tokenizer with a GGUF file that embeds none"
echo "ok: a missing tokenizer is said plainly, --tokenizer adds one"

# A GGUF file of another tool: what zaya reads, said plainly.
{
  printf 'GGUF\x03\x00\x00\x00'
  printf '\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00'  # 0 tensors, 1 key
  printf '\x14\x00\x00\x00\x00\x00\x00\x00general.architecture\x08\x00\x00\x00'
  printf '\x05\x00\x00\x00\x00\x00\x00\x00llama'
} >"$WORK/llama.gguf"
expect_error 1 "a 'llama' model \(general.architecture\), not a ZAYA model; zaya reads the GGUF files" -- \
  "$ZAYA" generate --model "$WORK/llama.gguf" --prompt x
expect_error 1 "not a ZAYA model" -- "$ZAYA" info --model "$WORK/llama.gguf"
echo "exports: OK"
