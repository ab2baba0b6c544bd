"""Loads the items of the zaya_kjv_* tasks (make_items.py wrote them) from the
JSONL files beside this file: no download, no dataset cache, wherever the
harness runs from."""
import json
import os

import datasets

HERE = os.path.dirname(os.path.abspath(__file__))


def _load(name):
    with open(os.path.join(HERE, name), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return {"test": datasets.Dataset.from_list(rows)}


def load_mc(**kwargs):
    return _load("zaya_kjv_mc.jsonl")


def load_gen(**kwargs):
    return _load("zaya_kjv_gen.jsonl")
