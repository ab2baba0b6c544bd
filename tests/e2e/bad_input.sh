#!/usr/bin/env bash
# Bad input gets a clear error naming the file and field, and a non-zero exit;
# never a crash or a hang.
source "$(dirname "$0")/common.bash" "$@"

prepare_data 512
write_config good.toml 2

# Config files.
printf '[data]\ndir = "%s"\n[train]\nstesp = 3\n' "$WORK/data" >"$WORK/typo.toml"
expect_error 1 "typo.toml:4: unknown key 'train.stesp'.*allowed keys" -- "$ZAYA" train --config "$WORK/typo.toml"
printf '[data]\ndir = "%s"\n[train]\nmicro_batch = -1\n' "$WORK/data" >"$WORK/range.toml"
expect_error 1 "train.micro_batch = -1 is invalid; allowed: an integer in 1" -- "$ZAYA" train --config "$WORK/range.toml"
printf '[model]\npreset = "huge"\n[data]\ndir = "x"\n' >"$WORK/preset.toml"
expect_error 1 "model.preset = 'huge' is invalid; allowed: one of: tiny, small, zaya1-base" -- "$ZAYA" train --config "$WORK/preset.toml"
printf '[data\n' >"$WORK/syntax.toml"
expect_error 1 "syntax.toml:1:.*TOML syntax error" -- "$ZAYA" train --config "$WORK/syntax.toml"
expect_error 2 "^error: --set steps=3 is invalid; expected section.key=value" -- "$ZAYA" train --config "$WORK/good.toml" --set steps=3
printf '[data]\ndir = "%s/nowhere"\n' "$WORK" >"$WORK/nodata.toml"
expect_error 1 "nowhere/train" -- "$ZAYA" train --config "$WORK/nodata.toml"

# Command-line flags.
expect_error 2 "no-such-flag" -- "$ZAYA" train --config "$WORK/good.toml" --no-such-flag
expect_error 2 "--out is required" -- "$ZAYA" data tokenizer --corpus "$SRC/data/kjv/kjv.txt"
expect_error 2 "--vocab-size" -- "$ZAYA" data tokenizer --corpus "$SRC/data/kjv/kjv.txt" --out x --vocab-size 3
expect_error 2 "^error: --top-p 2 is invalid" -- "$ZAYA" generate --model "$WORK/none" --top-p 2 --tokenizer "$WORK/data/tokenizer.model"
expect_error 2 "exactly one of" -- "$ZAYA" info

# Data files: a truncated token shard, a garbage index.
cp -r "$WORK/data" "$WORK/bad"
truncate -s 1000 "$WORK/bad/train.bin"
sed "s|$WORK/data|$WORK/bad|" "$WORK/good.toml" >"$WORK/bad.toml"
expect_error 1 "train.bin" -- "$ZAYA" train --config "$WORK/bad.toml"
head -c 100 /dev/urandom >"$WORK/bad/val.idx"
cp "$WORK/data/train.bin" "$WORK/bad/train.bin"
expect_error 1 "val.idx" -- "$ZAYA" train --config "$WORK/bad.toml"

# Model directories: missing, truncated weights, a config that does not match the weights.
"$ZAYA" train --config "$WORK/good.toml" --quiet >/dev/null
echo '[[2, 5, 99999]]' >"$WORK/ids.json"
expect_error 1 "none/config.json" -- "$ZAYA" score --model "$WORK/none" --tokens "$WORK/ids.json"
expect_error 1 "sequence 0 position 2: 99999 is not a token id" -- "$ZAYA" score --model "$WORK/run/final" --tokens "$WORK/ids.json"
echo '{"a": 1}' >"$WORK/obj.json"
expect_error 1 "expected a JSON list" -- "$ZAYA" score --model "$WORK/run/final" --tokens "$WORK/obj.json"
cp -r "$WORK/run/final" "$WORK/trunc"
truncate -s 5000 "$WORK/trunc/model.safetensors"
expect_error 1 "model.safetensors" -- "$ZAYA" score --model "$WORK/trunc" --tokens "$WORK/ids.json"
cp -r "$WORK/run/final" "$WORK/wrongcfg"
sed -i 's/"hidden_size": 128/"hidden_size": 256/' "$WORK/wrongcfg/config.json"
expect_error 1 "shape" -- "$ZAYA" score --model "$WORK/wrongcfg" --tokens "$WORK/ids.json"
cp -r "$WORK/run/final" "$WORK/unknownkey"
sed -i 's/"hidden_size"/"hidden_sise"/' "$WORK/unknownkey/config.json"
expect_error 1 'unknown config key "hidden_sise"' -- "$ZAYA" info --model "$WORK/unknownkey"
echo "bad input: OK"
