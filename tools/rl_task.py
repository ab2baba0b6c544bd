#!/usr/bin/env python3
"""A small verifiable task for `zaya rl` (docs/rl.md): reverse a list of words.

    python3 tools/rl_task.py make OUT_DIR [--words 3] [--vocab 10] [--seed 7] [--copy-share 0]
writes, as chat (the template's roles; `zaya data sft` and `zaya rl` render them):
    OUT_DIR/sft.jsonl          {"messages": [user, assistant]}   a warm start for `zaya data sft`
    OUT_DIR/prompts.jsonl      {"messages": [user], "answer": "C B A"}   RL prompts
    OUT_DIR/eval.jsonl         the same form, on word lists never in sft.jsonl or prompts.jsonl
    OUT_DIR/chat.txt           the SFT chats as the chat template renders them (Gemma 3 turns,
                               data/chat_template.h), for a tokenizer corpus: a tokenizer trained on it as
                               well learns the turn markers and the words as few pieces
    python3 tools/rl_task.py reward
is an external reward program (rl.reward = "command"): reads {"prompt", "completion",
"record"} lines on stdin and prints, per line, the share of word positions the
completion gets right (1.0: the exact reversal), a partial credit the built-in
verifiers do not give.

--copy-share S makes that share of the SFT examples "copy: A B C" -> "A B C"
(the words as they are) instead of reversals: a warm start that has seen both
operations, the reversal rarely, and mostly copies where it should reverse.
The walk-through (configs/rl-tiny-demo*.toml) uses it: GRPO then teaches the
model to follow the instruction it was asked, which the held-out reward
measures (prompts.jsonl and eval.jsonl only ask for reversals).
"""
import argparse
import itertools
import json
import random
import sys

WORDS = ["God", "earth", "light", "water", "day", "night", "king", "land", "son", "heaven",
         "man", "lord", "people", "house", "father", "children", "city", "hand", "sea", "fire"]


def example(words, op="reverse"):
    return {"messages": [{"role": "user", "content": op + ": " + " ".join(words)}]}


def make(args):
    lists = list(itertools.product(WORDS[:args.vocab], repeat=args.words))
    random.Random(args.seed).shuffle(lists)
    held_out, rl, sft = lists[:args.eval], lists[args.eval:args.eval + args.prompts], lists[args.eval + args.prompts:]
    rng = random.Random(args.seed + 1)
    with open(f"{args.out}/sft.jsonl", "w") as f:
        for _ in range(args.sft):
            w = rng.choice(sft)
            copy = rng.random() < args.copy_share
            ex = example(w, "copy" if copy else "reverse")
            ex["messages"].append({"role": "assistant", "content": " ".join(w if copy else reversed(w))})
            f.write(json.dumps(ex) + "\n")
    with open(f"{args.out}/sft.jsonl") as f, open(f"{args.out}/chat.txt", "w") as g:
        for line in f:
            user, model = json.loads(line)["messages"]
            g.write(f"<start_of_turn>user\n{user['content']}<end_of_turn>\n"
                    f"<start_of_turn>model\n{model['content']}<end_of_turn>\n")
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
    m.add_argument("--vocab", type=int, default=10, choices=range(2, len(WORDS) + 1), metavar="2..20",
                   help="how many distinct words the lists draw from")
    m.add_argument("--sft", type=int, default=3000, help="SFT examples (drawn with replacement)")
    m.add_argument("--prompts", type=int, default=400, help="RL prompts")
    m.add_argument("--eval", type=int, default=100, help="held-out prompts")
    m.add_argument("--seed", type=int, default=7)
    m.add_argument("--copy-share", type=float, default=0.0,
                   help="share of SFT examples that copy the words instead of reversing them")
    sub.add_parser("reward", help="score completions (stdin JSONL -> one score per line)")
    a = p.parse_args()
    if a.cmd == "make":
        make(a)
    else:
        reward()


if __name__ == "__main__":
    main()
