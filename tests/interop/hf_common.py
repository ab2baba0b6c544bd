"""Shared pieces of the transformers interop tests (tests/interop/*.py).

The configs are the hub's ZAYA1-8B (native) and ZAYA1-74B-preview configs
scaled down in width and depth, with the same keys: layer_types (all "hybrid",
or every even block "hybrid_sliding"), sliding_window, rope_parameters keyed
by layer type, tied embeddings, eos lists. Everything runs on the CPU in
float32 unless a test says otherwise.
"""
import contextlib
import json
import os
import subprocess
import sys
import time

import torch
import transformers
from transformers import ZayaConfig, ZayaForCausalLM

torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def hub_like_config(shape, vocab_size):
    """ZayaConfig keyed like Zyphra/ZAYA1-8B ("8b") or ZAYA1-74B-preview ("74b")."""
    common = dict(
        vocab_size=vocab_size,
        hidden_size=64,
        num_attention_heads=4,   # 4 x 8 = hidden / 2, as 8 x 128 of 2048 (8B) and 16 x 128 of 4096 (74B)
        num_key_value_heads=2,
        head_dim=8,
        hidden_act="silu",
        max_position_embeddings=131072,
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
        num_experts_per_tok=1,
        router_hidden_size=16,
        cca_time0=2,
        cca_time1=2,
        bos_token_id=2,
        eos_token_id=[1, 106],
        pad_token_id=0,
        attention_bias=False,
        lm_head_bias=False,
        initializer_range=0.1,
    )
    if shape == "8b":
        return ZayaConfig(
            num_hidden_layers=3, num_experts=4, moe_intermediate_size=64, layer_types=["hybrid"] * 3,
            sliding_window=None,
            rope_parameters={"hybrid": {"rope_type": "default", "rope_theta": 5e6, "partial_rotary_factor": 0.5}},
            **common)
    if shape == "74b":
        layers = 4
        return ZayaConfig(
            num_hidden_layers=layers, num_experts=6, moe_intermediate_size=64,
            layer_types=["hybrid_sliding" if i % 2 == 0 else "hybrid" for i in range(layers)],
            sliding_window=5,
            rope_parameters={"hybrid": {"rope_type": "default", "rope_theta": 5e6, "partial_rotary_factor": 0.5},
                             "hybrid_sliding": {"rope_type": "default", "rope_theta": 1e4,
                                                "partial_rotary_factor": 0.5}},
            **common)
    raise ValueError(shape)


def randomize(model, seed, skip_wins_in_layer=None):
    """Gives every parameter and buffer of `model` seeded random values away from
    transformers' init (norm weights, residual scales and biases, the key
    temperature, router biases), so that no part of the forward is an identity
    or a zero that would hide a misplaced tensor. In `skip_wins_in_layer` the
    balancing biases let the skip slot win for some tokens."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in list(model.named_parameters()) + list(model.named_buffers()):
            leaf = name.rsplit(".", 1)[-1]
            if "inv_freq" in name:
                continue
            if name.endswith("balancing_biases"):
                layer = int(name.split(".")[2])
                b = torch.rand(p.shape, generator=g) * 0.2
                b[-1] = 0.2 if layer == skip_wins_in_layer else -1.0
                p.copy_(b)
            elif name.endswith("qk_norm.temp"):
                p.copy_(0.5 + torch.rand(p.shape, generator=g) * 1.5)
            elif p.dim() == 1 and (leaf.endswith("scale") or (leaf == "weight" and "norm" in name)):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            elif p.dim() == 1:
                p.copy_(0.05 * torch.randn(p.shape, generator=g))
            elif name.endswith("embed_tokens.weight"):
                p.copy_(0.05 * torch.randn(p.shape, generator=g))
            else:
                std = 1.0 / (p.shape[-1] ** 0.5) if "conv" not in name else 0.5
                p.copy_(std * torch.randn(p.shape, generator=g))
    return model


def make_hf_model(shape, vocab_size, seed, dtype=torch.float32, skip_wins_in_layer=None):
    torch.manual_seed(seed)
    cfg = hub_like_config(shape, vocab_size)
    model = ZayaForCausalLM(cfg)
    randomize(model, seed, skip_wins_in_layer)
    model.eval()
    return model.to(dtype)


def skip_choices(model, ids):
    """How many (layer, token) choices of transformers' routers pick the skip slot on `ids`."""
    count = [0]

    def hook(module, args, out):
        count[0] += int((torch.argmax(out[0].detach().float().softmax(-1) + module.balancing_biases, -1)
                         == module.num_experts).sum())

    handles = [layer.mlp.gate.register_forward_hook(hook) for layer in model.model.layers]
    hf_logits(model, ids)
    for handle in handles:
        handle.remove()
    return count[0]


def load_hf(path, dtype=torch.float32):
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    model.eval()
    return model


def restore_balancing_biases(model, path):
    """transformers 5.25.0's from_pretrained sets every router's skip-slot balancing bias to -1 after loading
    (ZayaPreTrainedModel._init_weights writes `balancing_biases[-1] = -1.0` in place, which its loading does not
    skip), whatever the file holds. The released models hold -1 there, so they are unaffected; a model whose
    skip bias is anything else computes otherwise than its file says. The workaround (docs/formats.md): copy the
    biases from the file after loading. Returns how many layers it corrected."""
    from safetensors.torch import load_file
    idx = os.path.join(path, "model.safetensors.index.json")
    files = sorted(set(json.load(open(idx))["weight_map"].values())) if os.path.exists(idx) else ["model.safetensors"]
    saved = {}
    for f in files:
        saved.update({k: v for k, v in load_file(os.path.join(path, f)).items() if k.endswith("balancing_biases")})
    fixed = 0
    with torch.no_grad():
        for name, buf in model.named_buffers():
            if name.endswith("balancing_biases") and not torch.equal(buf, saved[name].to(buf.dtype)):
                if not torch.equal(buf[:-1], saved[name][:-1].to(buf.dtype)) or float(buf[-1]) != -1.0:
                    fail(f"{path}: {name}: transformers loaded {buf.tolist()}, the file holds {saved[name].tolist()}")
                buf.copy_(saved[name])
                fixed += 1
    return fixed


def hf_logits(model, ids):
    with torch.no_grad():
        out = model(torch.tensor([ids]), use_cache=False)
    return out.logits[0].float()


def hf_greedy(model, ids, n):
    """transformers' own cached generate, greedy, n new tokens (stopping at the eos list as zaya does)."""
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), max_new_tokens=n, do_sample=False, num_beams=1,
                             attention_mask=torch.ones(1, len(ids), dtype=torch.long))
    return out[0, len(ids):].tolist()


def hf_greedy_uncached(model, ids, n, eos):
    """Greedy by full forwards of the whole prefix (no cache): the reference for both cached decoders."""
    seq = list(ids)
    new = []
    for _ in range(n):
        t = int(hf_logits(model, seq)[-1].argmax())
        new.append(t)
        seq.append(t)
        if t in eos:
            break
    return new


def max_rel_diff(a, b):
    """max |a - b| / max |b| over every position and vocabulary entry."""
    a = torch.as_tensor(a, dtype=torch.float64)
    b = torch.as_tensor(b, dtype=torch.float64)
    if a.shape != b.shape:
        fail(f"logits of shape {tuple(a.shape)} against {tuple(b.shape)}")
    return float((a - b).abs().max() / b.abs().max())


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        fail(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr[-2000:]}")
    return r.stdout


def zaya_logits(zaya, model, seqs, workdir, extra=()):
    """zaya score --dump-logits: [sequence][position][vocab] for every sequence."""
    tokens = os.path.join(workdir, "tokens.json")
    dump = os.path.join(workdir, "logits.json")
    with open(tokens, "w") as f:
        json.dump(seqs, f)
    run([zaya, "score", "--model", model, "--tokens", tokens, "--dump-logits", dump, *extra])
    with open(dump) as f:
        return json.load(f)


@contextlib.contextmanager
def zaya_server(zaya, model, workdir, label, extra=()):
    """`zaya serve` of `model` (float32, 2 slots) on a free port for the duration of the block: yields the port."""
    log = open(os.path.join(workdir, "serve.log"), "w")
    server = subprocess.Popen([zaya, "serve", "--model", model, *extra, "--port", "0", "--batch", "2", "--threads", "2",
                               "--dtype", "f32", "--request-timeout", "60"], stdout=log, stderr=log)
    try:
        port = None
        for _ in range(300):
            with open(log.name) as f:
                s = f.read()
            if "on http://" in s:
                port = int(s.split("http://127.0.0.1:")[1].split()[0].strip("/"))
                break
            if server.poll() is not None:
                fail(f"{label}: zaya serve exited: {s}")
            time.sleep(0.1)
        if port is None:
            fail(f"{label}: zaya serve did not start")
        yield port
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def versions():
    return f"transformers {transformers.__version__}, torch {torch.__version__}"
