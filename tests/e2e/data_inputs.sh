#!/usr/bin/env bash
# Real-corpus inputs and Megatron datasets end to end: JSONL parts (gzip and
# zstd, a dotted field) give the same shards as the plain-text corpus for any
# worker count; a bad line names its file and line or is skipped with
# --skip-bad; `zaya train` over a Megatron dataset written by
# `zaya data shards --format megatron` logs exactly the losses of the same
# run over zaya shards.
source "$(dirname "$0")/common.bash" "$@"

mkdir -p "$WORK/data" "$WORK/parts"
head -c 600000 "$SRC/data/kjv/kjv.txt" >"$WORK/corpus.txt"
"$ZAYA" data tokenizer --corpus "$WORK/corpus.txt" --vocab-size 512 --out "$WORK/data/tokenizer" >/dev/null
TOK="$WORK/data/tokenizer.model"

# The corpus's blank-line documents as JSONL in two compressed parts.
python3 - "$WORK/corpus.txt" "$WORK/parts" <<'PY'
import json, re, sys
docs = [d.strip("\n") for d in re.split(r"\n[ \t\r\f\v]*\n", open(sys.argv[1], encoding="utf-8").read()) if d.strip()]
docs = ["\n".join(l.rstrip("\r") for l in d.split("\n")) for d in docs]
half = len(docs) // 2
for name, part in (("a.jsonl", docs[:half]), ("b.jsonl", docs[half:])):
    with open(f"{sys.argv[2]}/{name}", "w", encoding="utf-8") as f:
        for i, d in enumerate(part):
            f.write(json.dumps({"id": i, "doc": {"text": d}}) + "\n")
PY
gzip "$WORK/parts/a.jsonl"
zstd -q --rm "$WORK/parts/b.jsonl"

"$ZAYA" data shards --corpus "$WORK/corpus.txt" --tokenizer "$TOK" --out "$WORK/plain" --workers 1 --quiet >/dev/null
for w in 1 2 3; do
  "$ZAYA" data shards --corpus "$WORK/parts" --field doc.text --tokenizer "$TOK" --out "$WORK/json$w" \
    --workers $w --quiet >/dev/null
  for f in train.bin train.idx val.bin val.idx; do
    cmp "$WORK/plain/$f" "$WORK/json$w/$f" || fail "$f from JSONL parts with $w workers differs from the text corpus"
  done
done
# A glob works as well as the directory.
"$ZAYA" data shards --corpus "$WORK/parts/*.jsonl.*" --field doc.text --tokenizer "$TOK" --out "$WORK/glob" \
  --quiet >/dev/null
cmp "$WORK/plain/train.bin" "$WORK/glob/train.bin" || fail "glob input differs"
echo "ok: text, JSONL .gz + .zst, directory and glob inputs give identical shards for 1, 2 and 3 workers"

# A bad line: the file, line and reason, or skipped and counted.
printf '{"doc": {"text": "fine"}}\n{"doc": {"txt": "oops"}}\n{"doc": {"text": "also fine"}}\n' >"$WORK/bad.jsonl"
expect_error 1 "bad.jsonl: line 2: field 'doc.text' not found.*--skip-bad" -- \
  "$ZAYA" data shards --corpus "$WORK/bad.jsonl" --field doc.text --tokenizer "$TOK" --out "$WORK/bad" --quiet
[[ ! -e "$WORK/bad/train.idx" ]] || fail "a failed build left train.idx"
out=$("$ZAYA" data shards --corpus "$WORK/bad.jsonl" --field doc.text --tokenizer "$TOK" --out "$WORK/bad" \
  --skip-bad --quiet)
grep -q "skipped 1 bad records" <<<"$out" || fail "--skip-bad did not report the skipped line: $out"
echo "ok: bad line reported, or skipped and counted"

# Megatron indexed dataset: written, read by train, same losses as zaya shards.
"$ZAYA" data shards --corpus "$WORK/corpus.txt" --tokenizer "$TOK" --out "$WORK/meg" --format megatron --quiet \
  >/dev/null
head -c 9 "$WORK/meg/train.idx" | od -c | grep -q "M   M   I   D   I   D   X" || fail "no Megatron magic"
cp "$WORK/plain/"* "$WORK/data/"
write_config zaya.toml 6
sed -e "s|^dir = .*|train = \"$WORK/meg/train\"\nval = \"$WORK/meg/val\"|" -e "s|$WORK/run|$WORK/run_meg|" \
  "$WORK/zaya.toml" >"$WORK/meg.toml"
"$ZAYA" train --config "$WORK/zaya.toml" --quiet >/dev/null
"$ZAYA" train --config "$WORK/meg.toml" --quiet >/dev/null
[[ -n "$(losses "$WORK/run/metrics.jsonl")" ]] || fail "no losses logged"
diff <(losses "$WORK/run/metrics.jsonl") <(losses "$WORK/run_meg/metrics.jsonl") ||
  fail "training on the Megatron dataset logged other losses than on zaya shards"
echo "ok: zaya train reads the Megatron dataset (identical losses)"
echo "data_inputs: OK"
