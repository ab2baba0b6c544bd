#!/usr/bin/env bash
# The chat formats' differential test, its Python half: transformers' own chat
# template renderer (render_jinja_template, what apply_chat_template runs; from
# the pinned environment of scripts/python-env.sh) renders every conversation of
# tests/data/chat_templates/corpus.json with the format's Jinja template, and the
# result must be expected.jsonl byte for byte. Its C++ half,
# ChatTemplate.MatchesTheJinjaTemplatesOnTheCorpus, holds zaya's renderer
# (data/chat_template.h) to the same file: so both render every case alike.
# The corpus: system prompts, multi-turn, empty and whitespace content, tools,
# tool calls with typed and escaped arguments, tool results (one, several in a
# row, last), thinking on and off, reasoning in the history.
#   bash tests/interop/chat_templates.sh ZAYA_BINARY SOURCE_DIR
source "$(dirname "$0")/../e2e/common.bash" "$@"
PY=$("$SRC/scripts/python-env.sh") || fail "the pinned Python environment could not be made (scripts/python-env.sh)"
DIR=$SRC/tests/data/chat_templates
"$PY" "$DIR/render.py" >"$WORK/rendered.jsonl" || fail "render.py failed"
diff -u "$DIR/expected.jsonl" "$WORK/rendered.jsonl" >"$WORK/diff" ||
  fail "transformers renders the corpus differently from expected.jsonl: $(head -c 3000 "$WORK/diff")"
echo "ok: transformers $("$PY" -c 'import transformers; print(transformers.__version__)') renders the $(wc -l <"$DIR/expected.jsonl") conversations of the corpus as expected.jsonl"
