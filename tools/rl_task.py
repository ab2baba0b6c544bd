#!/usr/bin/env python3
"""A small verifiable task for `zaya rl` (docs/rl.md): reverse a list of words.

    python3 tools/rl_task.py make OUT_DIR [--words 3] [--seed 7]
writes, as chat (the template's roles; `zaya data sft` and `zaya rl` render them):
    OUT_DIR/sft.jsonl          {"messages": [user, assistant]}   a warm start for `zaya data sft`
    OUT_DIR/prompts.jsonl      {"messages": [user], "answer": "C B A"}   RL prompts
    OUT_DIR/eval.jsonl         the same form, on word lists never in sft.jsonl or prompts.jsonl
    python3 tools/rl_task.py reward
is an external reward program (rl.reward = "command"): reads {"prompt", "completion",
"record"} lines on stdin and prints, per line, the share of word positions the
completion gets right (1.0: the exact reversal), a partial credit the built-in
verifiers do not give.
"""
import argparse
import itertools
import json
import random
import sys

WORDS = ["God", "earth", "light", "water", "day", "night", "king", "land", "son", "heaven"]


def example(words):
    return {"messages": [{"role": "user", "content": "reverse: " + " ".join(words)}]}


def make(args):
    lists = list(itertools.product(WORDS, repeat=args.words))
    random.Random(args.seed).shuffle(lists)
    held_out, rl, sft = lists[:args.eval], lists[args.eval:args.eval + args.prompts], lists[args.eval + args.prompts:]
    rng = random.Random(args.seed + 1)
    with open(f"{args.out}/sft.jsonl", "w") as f:
        for _ in range(args.sft):
            w = rng.choice(sft)
            ex = example(w)
            ex["messages"].append({"role": "assistant", "content": " ".join(reversed(w))})
            f.write(json.dumps(ex) + "\n")
    for name, part in (("prompts", rl), ("eval", held_out)):
        with open(f"{args.out}/{name}.jsonl", "w") as f:
            for w in part:
                ex = example(w)
                ex["answer"] = " ".join(reversed(w))
                f.write(json.dumps(ex) + "\n")


def reward():
    for line in sys.stdin:
        item = json.loads(line)
        want = item["record"]["answer"].split()
        got = item["completion"].split()
        right = sum(1 for i, w in enumerate(want) if i < len(got) and got[i] == w)
        print(right / len(want) if len(got) == len(want) else right / (2 * len(want)))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make", help="write sft.jsonl, prompts.jsonl and eval.jsonl")
    m.add_argument("out")
    m.add_argument("--words", type=int, default=3)
    m.add_argument("--sft", type=int, default=3000, help="SFT examples (drawn with replacement)")
    m.add_argument("--prompts", type=int, default=400, help="RL prompts")
    m.add_argument("--eval", type=int, default=100, help="held-out prompts")
    m.add_argument("--seed", type=int, default=7)
    sub.add_parser("reward", help="score completions (stdin JSONL -> one score per line)")
    a = p.parse_args()
    if a.cmd == "make":
        make(a)
    else:
        reward()


if __name__ == "__main__":
    main()
