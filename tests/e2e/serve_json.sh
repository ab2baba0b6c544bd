#!/usr/bin/env bash
# zaya serve's response_format (constrained decoding, docs/serve.md) with the
# official `openai` Python client (tests/e2e/serve_json.py) against a tiny
# model trained here, which knows nothing of JSON: every answer must still
# parse and validate, since the grammar, not the model, decides what may be
# written. json_object and json_schema (nested object, enum, array, strings with
# escapes, $defs/$ref), whole and streamed, chat and completions, n > 1, the
# client's pydantic parse helper, and a token limit that cuts the value.
source "$(dirname "$0")/common.bash" "$@"

prepare_data 512
write_config train.toml 2
"$ZAYA" train --config "$WORK/train.toml" --quiet >/dev/null
M=$WORK/run/final
PYTHON=$("$SRC/scripts/python-env.sh") || fail "the pinned Python environment could not be made (scripts/python-env.sh)"
KEY=json-key

start_serve "$KEY" "$M" --threads 2 --batch 4
"$PYTHON" "$SRC/tests/e2e/serve_json.py" "$URL/v1" "$KEY" || fail "the response_format checks failed"
