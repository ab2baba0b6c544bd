"""Renders the conversations of corpus.json with the Jinja templates beside it, through
transformers' own chat-template renderer (render_jinja_template, what apply_chat_template
runs), and prints one JSON line per case: {"name", "text"} with the text after the BOS.
tests/interop/chat_templates.sh compares its output with expected.jsonl, and the C++
renderer is held to expected.jsonl by data/chat_template_test.cc: so zaya's renderer and
these templates agree on every case.

gemma3.jinja: google/gemma-3-*-it's template, written down from memory of its
tokenizer_config.json (the hub cannot be reached here). zaya.jinja: written for zaya
from the facts of ZAYA1-8B's format (its header says which), not Zyphra's text.
"""
import json
import os
import sys

from transformers.utils.chat_template_utils import render_jinja_template

here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "corpus.json")) as f:
    cases = json.load(f)
for case in cases:
    with open(os.path.join(here, case["format"] + ".jinja")) as f:
        template = f.read()
    kwargs = {"enable_thinking": case["enable_thinking"]} if "enable_thinking" in case else {}
    rendered, _ = render_jinja_template(conversations=[case["messages"]], tools=case.get("tools"),
                                        chat_template=template, bos_token="<bos>",
                                        add_generation_prompt=case["add_generation_prompt"], **kwargs)
    text = rendered[0]
    if not text.startswith("<bos>"):
        sys.exit(f"{case['name']}: the rendering does not start with <bos>: {text[:80]!r}")
    print(json.dumps({"name": case["name"], "text": text[len("<bos>"):]}, ensure_ascii=False))
