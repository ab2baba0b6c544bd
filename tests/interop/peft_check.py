"""LoRA adapters between zaya and the real PEFT, both ways, over transformers'
ZayaForCausalLM (a 74B-preview-shaped native model saved by transformers:
sliding-window layers; whose layer-1 balancing biases let the skip slot win for some tokens, so that the
native skip rule is part of every comparison):

1. zaya -> PEFT: `zaya train` with [lora] on every target (the five attention
   projections, the router's four matrices, both stacked expert parameters)
   writes OUT/adapter; `PeftModel.from_pretrained(base, OUT/adapter)` gives
   `zaya score --lora`'s logits within 1e-5 relative (float32) at every
   position, and zaya generate --lora's greedy tokens.
2. PEFT -> zaya: an adapter made by PEFT itself (LoraConfig with
   target_modules and target_parameters, every lora_A / lora_B random, so B is
   not zero) and saved with save_pretrained: `zaya score --lora` gives PEFT's
   logits within 1e-5 relative; `zaya generate --lora` its greedy tokens;
   `zaya serve --lora`, through the openai client, the same greedy completion
   and PEFT's log-probabilities of every prompt token (echo, within 1e-4).
3. merge_and_unload() + save_pretrained equals `zaya ckpt export --lora
   --layout native` tensor by tensor within float32 rounding.
4. Options zaya cannot apply (DoRA, rsLoRA, modules_to_save, dropout with
   target_parameters, lora_bias, exclude_modules) are refused by
   `zaya generate --lora` with a message naming the key.

usage: peft_check.py ZAYA WORKDIR DATA_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys

import openai
import peft
import sentencepiece as spm
import torch
from peft import LoraConfig, PeftModel, get_peft_model
from safetensors.torch import load_file

import hf_common as h

ZAYA, WORK, DATA = sys.argv[1:4]
TOKENIZER = os.path.join(DATA, "tokenizer.model")
sp = spm.SentencePieceProcessor(model_file=TOKENIZER)
VOCAB = sp.get_piece_size()
BOS = sp.bos_id()
PROMPT = "And God said, Let there be light"
TEXT = ("In the beginning God created the heaven and the earth. And the earth was without form, and void; "
        "and darkness was upon the face of the deep.")
MODULES = ["q_proj", "k_proj", "v_proj_current", "v_proj_delayed", "o_proj", "mlp.gate.down_proj",
           "mlp.gate.router_mlp.fc1", "mlp.gate.router_mlp.fc2", "mlp.gate.router_mlp.out_proj"]
PARAMETERS = ["mlp.experts.gate_up_proj", "mlp.experts.down_proj"]
SEQS = [[BOS] + sp.encode(PROMPT), [BOS] + sp.encode(TEXT)[:40]]


def load_base(base):
    model = h.load_hf(base, torch.float32)
    h.restore_balancing_biases(model, base)  # transformers 5.25's skip-bias reset (docs/formats.md)
    return model


def check_logits(model, adapter, base, label):
    """zaya score --lora (the training forward with the adapter unmerged) against `model`'s forward."""
    got = h.zaya_logits(ZAYA, base, SEQS, WORK, ["--lora", adapter])
    worst = max(h.max_rel_diff(z, h.hf_logits(model, s)[:, :VOCAB]) for s, z in zip(SEQS, got))
    if not worst <= 1e-5:
        h.fail(f"{label}: zaya score --lora's logits differ from PEFT's by {worst:.3g} relative (allowed 1e-5)")
    print(f"ok: {label}: zaya score --lora's logits ({len(SEQS)} sequences, up to {max(map(len, SEQS))} positions) "
          f"within {worst:.2g} relative of PEFT's")


def check_greedy(model, adapter, base, label, n=24):
    """zaya generate --lora (the cached decoder, adapter unmerged) against PEFT's greedy loop."""
    ids = [BOS] + sp.encode(PROMPT)
    want = h.hf_greedy_uncached(model, ids, n, model.config.eos_token_id)
    prompts = os.path.join(WORK, "prompts.jsonl")
    with open(prompts, "w") as f:
        f.write(json.dumps({"id": 0, "prompt": PROMPT}) + "\n")
    out = h.run([ZAYA, "generate", "--model", base, "--lora", adapter, "--prompts", prompts, "--temperature", "0",
                 "--max-new-tokens", str(n), "--dtype", "f32"])
    r = [json.loads(l) for l in out.splitlines() if l.startswith("{")][0]
    if r["tokens"] != want:
        h.fail(f"{label}: zaya generate --lora {r['tokens']} != PEFT's greedy {want}")
    print(f"ok: {label}: zaya generate --lora's {len(want)} greedy tokens equal PEFT's")
    return r["completion"]


def zaya_lora_adapter(base):
    """A LoRA run of zaya on every target over `base` (its [model] table from `zaya ckpt import`)."""
    root = os.path.join(WORK, "imported")
    h.run([ZAYA, "ckpt", "import", "--in", base, "--out", root])
    meta = json.load(open(os.path.join(root, "step_00000000", "metadata.json")))
    model_table = re.match(r"(\[model\]\n(?:[^\[\n].*\n|\n)*)", meta["config"]).group(1)
    out = os.path.join(WORK, "lora-run")
    config = os.path.join(WORK, "lora.toml")
    with open(config, "w") as f:
        f.write(model_table + f"init_from = {json.dumps(base)}\n\n")
        f.write(f"[data]\ndir = {json.dumps(DATA)}\ntokenizer = {json.dumps(TOKENIZER)}\n\n"
                f"[train]\nout_dir = {json.dumps(out)}\nmicro_batch = 4\nseq_len = 32\nsteps = 4\n"
                f"eval_every = 0\nlog_every = 1\nprecision = \"f32\"\n\n"
                f"[optim]\nlr = 0.02\n\n[schedule]\nwarmup_steps = 1\n\n"
                f"[lora]\nrank = 4\nalpha = 12\ndropout = 0\ntargets = {json.dumps(MODULES + PARAMETERS)}\n")
    h.run([ZAYA, "train", "--config", config, "--quiet"])
    adapter = os.path.join(out, "adapter")
    zero_b = [k for k, v in load_file(os.path.join(adapter, "adapter_model.safetensors")).items()
              if ".lora_B." in k and not v.abs().max() > 0]
    if zero_b:
        h.fail(f"zaya's LoRA run left lora_B zero in {zero_b[:3]}: the adapters would not be compared")
    return adapter


def peft_made_adapter(base):
    model = load_base(base)
    cfg = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=MODULES, target_parameters=PARAMETERS,
                     task_type="CAUSAL_LM")
    pm = get_peft_model(model, cfg)
    g = torch.Generator().manual_seed(5)
    n = 0
    with torch.no_grad():
        for name, p in pm.named_parameters():
            if ".lora_A." in name or ".lora_B." in name:
                p.copy_(0.3 * torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5)
                n += 1
    layers = model.config.num_hidden_layers
    expected = layers * (2 * len(MODULES) + 2 * len(PARAMETERS))
    if n != expected:
        h.fail(f"PEFT made {n} LoRA tensors for {len(MODULES)} modules and {len(PARAMETERS)} parameters in {layers} "
               f"layers, expected {expected}")
    d = os.path.join(WORK, "peft-adapter")
    pm.save_pretrained(d)
    pm.eval()
    return pm, d


def check_serve(model, adapter, base, label, want_text):
    with h.zaya_server(ZAYA, base, WORK, label, ["--lora", adapter]) as port:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0, timeout=60)
        ids = [BOS] + sp.encode(PROMPT)
        c = client.completions.create(model="m", prompt=ids, max_tokens=24, temperature=0)
        if c.choices[0].text != want_text:
            h.fail(f"{label}: zaya serve --lora's completion {c.choices[0].text!r} != {want_text!r} "
                   f"(PEFT's greedy tokens)")
        seq = SEQS[1]
        e = client.completions.create(model="m", prompt=seq, max_tokens=1, temperature=0, echo=True, logprobs=1)
        got = e.choices[0].logprobs.token_logprobs[1:len(seq)]
        ref = torch.log_softmax(h.hf_logits(model, seq)[:, :VOCAB].double(), -1)
        want = [float(ref[i, seq[i + 1]]) for i in range(len(seq) - 1)]
        worst = max(abs(a - b) for a, b in zip(got, want))
        if len(got) != len(want) or not worst <= 1e-4:
            h.fail(f"{label}: zaya serve --lora's prompt logprobs differ from PEFT's by {worst:.3g} (allowed 1e-4)")
        print(f"ok: {label}: zaya serve --lora through the openai client: the greedy completion, and the "
              f"log-probabilities of {len(want)} prompt tokens within {worst:.2g} of PEFT's")


def check_merge(pm, adapter, base):
    merged_hf = os.path.join(WORK, "merged-peft")
    merged = pm.merge_and_unload()
    merged.save_pretrained(merged_hf)
    merged_zaya = os.path.join(WORK, "merged-zaya")
    h.run([ZAYA, "ckpt", "export", "--in", base, "--lora", adapter, "--out", merged_zaya, "--layout", "native"])

    def tensors(d):
        idx = os.path.join(d, "model.safetensors.index.json")
        files = sorted(set(json.load(open(idx))["weight_map"].values())) if os.path.exists(idx) else \
            ["model.safetensors"]
        out = {}
        for f in files:
            out.update(load_file(os.path.join(d, f)))
        return out

    a, b = tensors(merged_hf), tensors(merged_zaya)
    if set(a) != set(b):
        h.fail(f"merged tensors: PEFT's only {sorted(set(a) - set(b))[:5]}, zaya's only {sorted(set(b) - set(a))[:5]}")
    worst, changed = 0.0, 0
    for k in a:
        x, y = a[k].double(), b[k].double()
        worst = max(worst, float((x - y).abs().max() / (1 + y.abs().max())))
    base_t = tensors(base)
    changed = sorted(k for k in a if not torch.equal(a[k], base_t[k]))
    targeted = sorted(k for k in a if any(k.endswith("." + m + ".weight") for m in MODULES) or
                      any(k.endswith("." + p) for p in PARAMETERS))
    if not worst <= 2e-6:
        h.fail(f"merge_and_unload differs from zaya ckpt export --lora by {worst:.3g} (float32 rounding: <= 2e-6)")
    layers = merged.config.num_hidden_layers
    if changed != targeted or len(targeted) != layers * (len(MODULES) + len(PARAMETERS)):
        h.fail(f"the merge changed {changed}, expected every targeted matrix {targeted}")
    changed = len(changed)
    print(f"ok: PEFT merge_and_unload + save_pretrained equals zaya ckpt export --lora --layout native: "
          f"{len(a)} tensors ({changed} merged) within {worst:.2g}")


def check_refusals(adapter, base):
    cases = {"use_dora": True, "use_rslora": True, "modules_to_save": ["lm_head"], "lora_dropout": 0.1,
             "lora_bias": True, "exclude_modules": ["o_proj"]}
    for key, value in cases.items():
        d = os.path.join(WORK, f"bad-{key}")
        shutil.copytree(adapter, d)
        path = os.path.join(d, "adapter_config.json")
        cfg = json.load(open(path))
        cfg[key] = value
        json.dump(cfg, open(path, "w"))
        r = subprocess.run([ZAYA, "generate", "--model", base, "--lora", d, "--prompt", "In", "--max-new-tokens", "1"],
                           capture_output=True, text=True)
        want = f'adapter_config.json: "{key}" = '
        if r.returncode == 0 or want not in r.stderr or "expected" not in r.stderr:
            h.fail(f"zaya generate --lora with {key} = {value!r}: exit {r.returncode}, {r.stderr[-400:]!r}; expected "
                   f"an error naming {want!r} and what is allowed")
    print(f"ok: zaya refuses PEFT options it cannot apply, naming the key: {', '.join(cases)}")


def main():
    print(h.versions() + f", peft {peft.__version__}")
    base = os.path.join(WORK, "base")
    hf = h.make_hf_model("74b", VOCAB, seed=11, skip_wins_in_layer=1)
    hf.save_pretrained(base)
    shutil.copy(TOKENIZER, os.path.join(base, "tokenizer.model"))
    skips = h.skip_choices(load_base(base), SEQS[1])
    if skips == 0:
        h.fail("the base model's skip slot is never chosen: the native skip rule would go untested")
    print(f"ok: the base model's skip slot wins {skips} of transformers' routing choices on a {len(SEQS[1])}-token text")

    adapter = zaya_lora_adapter(base)
    model = PeftModel.from_pretrained(load_base(base), adapter)
    model.eval()
    label = "zaya train [lora] -> PeftModel.from_pretrained"
    check_logits(model, adapter, base, label)
    check_greedy(model, adapter, base, label)

    pm, adapter = peft_made_adapter(base)
    label = "PEFT save_pretrained -> zaya --lora"
    check_logits(pm, adapter, base, label)
    text = check_greedy(pm, adapter, base, label)
    check_serve(pm, adapter, base, label, text)
    check_merge(pm, adapter, base)
    check_refusals(adapter, base)
    print("peft_check: all checks passed")


main()
