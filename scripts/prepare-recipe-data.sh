#!/usr/bin/env bash
# The two datasets of configs/small-recipe.toml, with one shared tokenizer
# (docs/context-extension.md, "Recipes and phases"):
#   OUT/tokenizer.model  SentencePiece BPE of VOCAB pieces, trained on both corpora
#   OUT/kjv/             the bundled King James Bible (data/kjv/kjv.txt), one document per chapter
#   OUT/pydoc/           the Python 3.11 documentation sources from Debian's python3.11-doc
#                        (scripts/setup-debian.sh installs it), one document per page
# Each dataset directory holds train.{bin,idx} and val.{bin,idx} (zaya data shards).
# Steps whose outputs exist are skipped.
#
# Usage: scripts/prepare-recipe-data.sh [OUT]          (default runs/data/recipe)
# Environment: ZAYA   the zaya binary (default build/zaya)
#              VOCAB  tokenizer pieces (default 8192, the `small` preset's vocabulary)
#              PYDOC  the second corpus: a directory of *.txt / *.md files
#                     (default /usr/share/doc/python3.11/html/_sources)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-runs/data/recipe}
zaya=${ZAYA:-$src/build/zaya}
vocab=${VOCAB:-8192}
pydoc=${PYDOC:-/usr/share/doc/python3.11/html/_sources}

[[ -x $zaya ]] || { echo "error: $zaya not found: build it (cmake --build build --target zaya) or set ZAYA" >&2; exit 1; }
[[ -d $pydoc ]] || {
  echo "error: $pydoc not found: install python3.11-doc (scripts/setup-debian.sh) or set PYDOC to a directory of text files" >&2
  exit 1
}
mkdir -p "$out/corpus"

# The corpora: documents are separated by blank lines (zaya data shards), so
# each page loses its inner blank lines and pages are separated by one.
cp "$src/data/kjv/kjv.txt" "$out/corpus/kjv.txt"
if [[ ! -s $out/corpus/pydoc.txt ]]; then
  while IFS= read -r -d '' page; do
    grep -v '^[[:space:]]*$' "$page" || true
    echo
  done < <(find "$pydoc" -type f \( -name '*.txt' -o -name '*.md' \) -print0 | LC_ALL=C sort -z) >"$out/corpus/pydoc.tmp"
  mv "$out/corpus/pydoc.tmp" "$out/corpus/pydoc.txt"
fi

# One tokenizer for both: every dataset of a recipe must share its vocabulary.
if [[ ! -f $out/tokenizer.model ]]; then
  cat "$out/corpus/kjv.txt" "$out/corpus/pydoc.txt" >"$out/corpus/all.txt"
  "$zaya" data tokenizer --corpus "$out/corpus/all.txt" --vocab-size "$vocab" --out "$out/tokenizer"
  rm -f "$out/corpus/all.txt"
fi
for name in kjv pydoc; do
  if [[ ! -f $out/$name/train.idx ]]; then
    "$zaya" data shards --corpus "$out/corpus/$name.txt" --tokenizer "$out/tokenizer.model" --out "$out/$name"
  fi
done
echo "recipe data ready in $out (tokenizer.model, kjv/, pydoc/)"
