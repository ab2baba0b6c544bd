#!/usr/bin/env python3
"""Writes the items of the lm-evaluation-harness tasks in this folder from the
bundled corpus (data/kjv/kjv.txt), deterministically (no randomness: fixed
strides over the verses):

  zaya_kjv_mc.jsonl   multiple choice: the first half of a verse, and four
                      endings: its own and the second halves of three other
                      verses; gold rotates over the positions. The same file
                      is `zaya eval --mc`'s input (docs/inference.md).
  zaya_kjv_gen.jsonl  generate-until: the first half of a verse; the target is
                      the rest of its sentence (up to the first ".").

Usage: make_items.py KJV_TXT OUT_DIR   (tests/e2e/lmeval.sh checks that the
committed files are what this writes).
"""
import json
import os
import sys

MC_ITEMS, GEN_ITEMS, CHOICES = 40, 8, 4


def verses(path):
    out = []
    for block in open(path, encoding="utf-8").read().split("\n\n"):
        lines = block.strip().split("\n")
        # The chapter's title line ("Genesis 1") is not a verse.
        out += [v for v in lines[1:] if 10 <= len(v.split()) <= 24]
    return out


def split(verse):
    words = verse.split()
    half = len(words) // 2
    return " ".join(words[:half]), " " + " ".join(words[half:])


def main():
    corpus, out_dir = sys.argv[1], sys.argv[2]
    vs = verses(corpus)
    stride = len(vs) // (MC_ITEMS * CHOICES)
    picked = [vs[i * stride] for i in range(MC_ITEMS * CHOICES)]
    with open(os.path.join(out_dir, "zaya_kjv_mc.jsonl"), "w", encoding="utf-8") as f:
        for i in range(MC_ITEMS):
            group = picked[i * CHOICES:(i + 1) * CHOICES]
            context, ending = split(group[0])
            others = [split(v)[1] for v in group[1:]]
            gold = i % CHOICES
            choices = others[:gold] + [ending] + others[gold:]
            f.write(json.dumps({"context": context, "choices": choices, "gold": gold, "id": i}) + "\n")
    with open(os.path.join(out_dir, "zaya_kjv_gen.jsonl"), "w", encoding="utf-8") as f:
        for i in range(GEN_ITEMS):
            context, rest = split(vs[(2 * i + 1) * len(vs) // (2 * GEN_ITEMS)])
            target = rest.split(".")[0]
            f.write(json.dumps({"context": context, "target": target, "id": i}) + "\n")


if __name__ == "__main__":
    main()
