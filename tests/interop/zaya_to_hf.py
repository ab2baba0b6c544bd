"""zaya -> transformers, and transformers' weights trained on by zaya.

1. `zaya train` with configs/native-tiny.toml (ZAYA1-8B's shape) and
   configs/native-tiny-sliding.toml (ZAYA1-74B-preview's: sliding-window
   blocks), shortened, writes final/ in the native layout; transformers'
   AutoModelForCausalLM.from_pretrained loads it (float32, and a `zaya ckpt
   export --dtype bf16 --layout native` of it) and gives zaya score's logits
   within 1e-5 relative at every position, and transformers' cached greedy
   generate gives zaya generate's 40 tokens.
2. A legacy-layout export of the same model is refused by transformers.
3. A model saved by transformers (save_pretrained, both shapes) goes through
   `zaya ckpt import` (then `zaya train --resume`) and `model.init_from`:
   the loss of the first step equals transformers' loss on the same batch
   within 1e-5 relative. The batch is the whole epoch of a small shard (every
   window once, micro_batch = the number of windows), so the sampler's order
   does not matter to the mean.

usage: zaya_to_hf.py ZAYA SOURCE_DIR WORKDIR DATA_DIR SMALL_DATA_DIR
(DATA_DIR and SMALL_DATA_DIR: tokenizer.model + train/val shards)
"""
import json
import os
import re
import sys

import numpy as np
import sentencepiece as spm
import torch

import hf_common as h

ZAYA, SRC, WORK, DATA, SMALL = sys.argv[1:6]
TOKENIZER = os.path.join(DATA, "tokenizer.model")
sp = spm.SentencePieceProcessor(model_file=TOKENIZER)
BOS = sp.bos_id()
PROMPTS = ["And God said, Let there be light", "In the beginning"]
LONG = ("And the earth was without form, and void; and darkness was upon the face of the deep. "
        "And the Spirit of God moved upon the face of the waters.")


def train(config, out, extra=()):
    sets = {"data.dir": DATA, "data.tokenizer": TOKENIZER, "train.out_dir": out, "train.steps": 6,
            "train.micro_batch": 4, "train.seq_len": 32, "train.eval_every": 0, "train.log_every": 1,
            "train.precision": "f32", "schedule.warmup_steps": 1, "model.num_blocks": 2}
    sets.update(dict(extra))
    args = [ZAYA, "train", "--config", config, "--quiet"]
    for k, v in sets.items():
        args += ["--set", f"{k}={json.dumps(v) if isinstance(v, str) else v}"]
    h.run(args)
    return os.path.join(out, "final")


def check_same_model(model_dir, label):
    hf = h.load_hf(model_dir, torch.float32)
    vocab = hf.config.vocab_size
    seqs = [[BOS] + sp.encode(p) for p in PROMPTS] + [[BOS] + sp.encode(LONG)]
    got = h.zaya_logits(ZAYA, model_dir, seqs, WORK)
    worst = 0.0
    for s, z in zip(seqs, got):
        ref = h.hf_logits(hf, s)
        # zaya dumps the real vocabulary; the padding rows above it are never predicted.
        worst = max(worst, h.max_rel_diff(z, ref[:, :len(z[0])]))
    if not worst <= 1e-5:
        h.fail(f"{label}: transformers' logits differ from zaya score's by {worst:.3g} relative (allowed 1e-5)")
    prompts = os.path.join(WORK, "prompts.jsonl")
    with open(prompts, "w") as f:
        for i, p in enumerate(PROMPTS):
            f.write(json.dumps({"id": i, "prompt": p}) + "\n")
    out = h.run([ZAYA, "generate", "--model", model_dir, "--prompts", prompts, "--temperature", "0",
                 "--max-new-tokens", "40", "--dtype", "f32"])
    results = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    for p, r in zip(PROMPTS, results):
        ids = [BOS] + sp.encode(p)
        want = h.hf_greedy(hf, ids, 40)
        if r["tokens"] != want:
            h.fail(f"{label}: transformers generate {want} != zaya generate {r['tokens']} for {p!r}")
    print(f"ok: {label}: AutoModelForCausalLM loads it (vocab {vocab}); logits of {len(seqs)} sequences (up to "
          f"{max(map(len, seqs))} positions) within {worst:.2g} relative of zaya score's; greedy 40 tokens equal")


def check_native_exports():
    for name in ["native-tiny", "native-tiny-sliding"]:
        final = train(os.path.join(SRC, "configs", name + ".toml"), os.path.join(WORK, name),
                      {"model.sliding_window": 8} if "sliding" in name else {})
        cfg = json.load(open(os.path.join(final, "config.json")))
        if "sliding" in name and "hybrid_sliding" not in cfg.get("layer_types", []):
            h.fail(f"{name}: final/config.json has no hybrid_sliding layer: {cfg.get('layer_types')}")
        check_same_model(final, f"zaya train {name} -> transformers, float32")
        bf16 = os.path.join(WORK, name + "-bf16")
        h.run([ZAYA, "ckpt", "export", "--in", final, "--out", bf16, "--layout", "native", "--dtype", "bf16"])
        check_same_model(bf16, f"zaya ckpt export {name} --dtype bf16 -> transformers")
        legacy = os.path.join(WORK, name + "-legacy")
        h.run([ZAYA, "ckpt", "export", "--in", final, "--out", legacy, "--layout", "legacy"])
        try:
            h.load_hf(legacy)
        except Exception as e:  # transformers refuses the legacy keys (which exception is its own business)
            print(f"ok: {name}: transformers refuses the legacy-layout export ({type(e).__name__})")
        else:
            h.fail(f"{name}: transformers loaded the legacy-layout export {legacy}; docs/formats.md says it cannot")


def read_shard(prefix):
    return np.fromfile(prefix + ".bin", dtype="<u4").astype(np.int64)


def hf_epoch_loss(hf, tokens, seq):
    """transformers' mean cross-entropy over every window of the shard (window w: inputs w*seq .. w*seq+seq-1,
    targets one further), the batch of zaya's first step when micro_batch is the number of windows."""
    windows = (len(tokens) - 1) // seq
    x = torch.tensor(np.stack([tokens[w * seq:w * seq + seq] for w in range(windows)]))
    y = torch.tensor(np.stack([tokens[w * seq + 1:w * seq + seq + 1] for w in range(windows)]))
    with torch.no_grad():
        logits = hf(x, use_cache=False).logits.double()
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    return float(loss), windows


def first_loss(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if r.get("step") == 1 and "loss" in r:
                return r["loss"]
    h.fail(f"{run_dir}/metrics.jsonl has no step-1 loss")


def check_import_trains():
    vocab = spm.SentencePieceProcessor(model_file=os.path.join(SMALL, "tokenizer.model")).get_piece_size()
    tokens = read_shard(os.path.join(SMALL, "train"))
    seq = 64
    for shape in ["8b", "74b"]:
        hf_dir = os.path.join(WORK, f"hf-{shape}")
        hf = h.make_hf_model(shape, vocab, seed=3)
        hf.save_pretrained(hf_dir, max_shard_size="100KB")
        want, windows = hf_epoch_loss(hf, tokens, seq)
        root = os.path.join(WORK, f"imported-{shape}")
        h.run([ZAYA, "ckpt", "import", "--in", hf_dir, "--out", root])
        meta = json.load(open(os.path.join(root, "step_00000000", "metadata.json")))
        model_table = re.match(r"(\[model\]\n(?:[^\[\n].*\n|\n)*)", meta["config"]).group(1)
        for how in ["resume", "init_from"]:
            out = os.path.join(WORK, f"run-{shape}-{how}")
            config = os.path.join(WORK, f"{shape}-{how}.toml")
            with open(config, "w") as f:
                f.write(model_table + (f"init_from = {json.dumps(hf_dir)}\n" if how == "init_from" else "") + "\n")
                f.write(f"[data]\ndir = {json.dumps(SMALL)}\n"
                        f"tokenizer = {json.dumps(os.path.join(SMALL, 'tokenizer.model'))}\n\n"
                        f"[train]\nout_dir = {json.dumps(out)}\nmicro_batch = {windows}\nseq_len = {seq}\n"
                        f"steps = 1\neval_every = 0\nlog_every = 1\nprecision = \"f32\"\n\n"
                        f"[schedule]\nwarmup_steps = 1\n")
            args = [ZAYA, "train", "--config", config, "--quiet"]
            if how == "resume":
                args += ["--resume", os.path.join(root, "step_00000000")]
            h.run(args)
            got = first_loss(out)
            rel = abs(got - want) / want
            if not rel <= 1e-5:
                h.fail(f"transformers {shape} -> zaya ({how}): first-step loss {got} != transformers' {want} "
                       f"({rel:.3g} relative, allowed 1e-5)")
            print(f"ok: transformers {shape} -> zaya ckpt import / {how}: first-step loss {got:.6f} over "
                  f"{windows} x {seq} tokens within {rel:.2g} relative of transformers' {want:.6f}")


print(h.versions())
check_native_exports()
check_import_trains()
print("zaya_to_hf: all checks passed")
