#!/usr/bin/env bash
# zaya serve in ZAYA1-8B's chat format (--chat-format zaya) with the official
# `openai` Python client (tests/e2e/serve_tools.py): reasoning output, tool
# calls (the client's pydantic tool helpers, whole and streamed), a multi-turn
# tool loop, a malformed call passed on as content with a warning in the log,
# thinking off per request. A tiny model trained here never writes a tool call
# of its own, so the first server runs with the test hook $ZAYA_SERVE_TEST_REPLIES
# (its chat answers are scripted texts, fed a few bytes per generated token
# through the server's real parsing and streaming); the second runs the model
# itself: tools rendered into its prompt, a forced call (tool_choice naming a
# function: the call's opening is prefilled, the model writes the rest), and
# whatever it writes comes back as a call or as content, never an error.
source "$(dirname "$0")/common.bash" "$@"

prepare_data 512
write_config train.toml 2
"$ZAYA" train --config "$WORK/train.toml" --quiet >/dev/null
M=$WORK/run/final
PYTHON=$("$SRC/scripts/python-env.sh") || fail "the pinned Python environment could not be made (scripts/python-env.sh)"
KEY=tools-key

CALL=$'The user asks for the weather.\n</think>\n\nLet me look.\n<zyphra_tool_call>\n<function=GetWeather>\n<parameter=city>\nBonn\n</parameter>\n<parameter=days>\n2\n</parameter>\n</function>\n</zyphra_tool_call>'
ANSWER=$'Got the result.\n</think>\n\nIt is sunny in Bonn.'
MALFORMED=$'<zyphra_tool_call>\n<function=Nope>\n</function>\n</zyphra_tool_call>'
PLAIN=$'plain answer </think> here'
REPLIES=$(jq -cn --arg a "$CALL" --arg b "$ANSWER" --arg c "$MALFORMED" --arg d "$PLAIN" '[$a, $b, $a, $c, $d]')
ZAYA_SERVE_TEST_REPLIES=$REPLIES start_serve "$KEY" "$M" --chat-format zaya --threads 2 --batch 2
grep -q 'chat format zaya (from --chat-format)' "$WORK/serve.log" || fail "no chat-format line: $(cat "$WORK/serve.log")"
"$PYTHON" "$SRC/tests/e2e/serve_tools.py" "$URL/v1" "$KEY" scripted || fail "the scripted tool checks failed"
grep -q 'warning: chatcmpl-3 choice 0: the model wrote a malformed tool call' "$WORK/serve.log" ||
  fail "no warning for the malformed call in the log: $(cat "$WORK/serve.log")"
echo "ok: the malformed call is logged: $(grep -m1 'malformed tool call' "$WORK/serve.log" | head -c 160)"
kill $SERVER; wait $SERVER 2>/dev/null || true

start_serve "$KEY" "$M" --chat-format zaya --threads 2 --batch 2
"$PYTHON" "$SRC/tests/e2e/serve_tools.py" "$URL/v1" "$KEY" model || fail "the model's tool checks failed"
grep -c 'malformed tool call' "$WORK/serve.log" | sed 's/^/ok: malformed calls the tiny model wrote (logged): /'
