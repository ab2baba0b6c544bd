"""The PyTorch 2.x side of bench/vs_torch_{pretrain,lora,decode}.sh, and their summary.

transformers' own ZayaForCausalLM (PEFT for LoRA) from the pinned PyPI
environment (scripts/python-env.sh), on the same model directory zaya.cpp
reads (model.init_from / --model), the same batch, sequence length, thread
count and recipe. docs/performance.md "Side by side with PyTorch 2.x" has
the measurements and what each mode means.

  vs_torch.py model --out DIR --layers L --vocab V --experts E [--hidden H ...]
      a model written by transformers (save_pretrained, float32, native layout)
  vs_torch.py train --model DIR --mode f32|bf16|compile|compile-bf16 --batch B --seq S [--lora R] ...
      training steps on random tokens (forward, backward, optimizer), JSON with every step time
  vs_torch.py decode --model DIR --batch B --prompt P --new N ...
      transformers' generate, bf16: prefill time and decode time per token
  vs_torch.py summary pretrain|lora|decode DIR
      the table of the best round of each side, tokens/s, step time, MFU and ratios
"""
import argparse
import glob
import json
import os
import sys
import time


def lazy_torch(threads):
    import torch
    torch.set_num_threads(threads)
    return torch


# --- model ------------------------------------------------------------------------------------------------


def cmd_model(a):
    """ZAYA1-8B's layer widths (transformers' ZayaConfig defaults are the released ZAYA1-8B config) with
    fewer layers, experts or a smaller vocabulary; random weights by transformers' own init, saved in float32."""
    torch = lazy_torch(a.threads)
    from transformers import ZayaConfig, ZayaForCausalLM
    torch.manual_seed(a.seed)
    kw = dict(num_hidden_layers=a.layers, layer_types=["hybrid"] * a.layers, vocab_size=a.vocab,
              num_experts=a.experts)
    for key in ("hidden_size", "moe_intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim",
                "router_hidden_size"):
        if getattr(a, key) is not None:
            kw[key] = getattr(a, key)
    model = ZayaForCausalLM(ZayaConfig(**kw))
    model.save_pretrained(a.out, safe_serialization=True)
    n = sum(p.numel() for p in model.parameters())
    print(f"transformers wrote {a.out}: {n / 1e6:.1f}M parameters, float32")


# --- training ---------------------------------------------------------------------------------------------

ATTENTION = ["q_proj", "k_proj", "v_proj_current", "v_proj_delayed", "o_proj"]
ROUTER = ["mlp.gate.down_proj", "mlp.gate.router_mlp.fc1", "mlp.gate.router_mlp.fc2", "mlp.gate.router_mlp.out_proj"]
EXPERTS = ["mlp.experts.gate_up_proj", "mlp.experts.down_proj"]


def make_optimizer(torch, model, a):
    """AdamW everywhere, or (--optim muon) torch.optim.Muon on the 2-D hidden matrices and AdamW on the rest.
    torch.optim.Muon takes 2-D parameters only: transformers stores the experts stacked, [E, out, in], so
    they stay on AdamW there (zaya.cpp's Muon orthogonalises each expert's matrix)."""
    train = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if a.optim == "adamw" or a.lora:
        return [torch.optim.AdamW([p for _, p in train], lr=a.lr, weight_decay=0.0 if a.lora else 0.1)], "AdamW"
    hidden = [p for n, p in train if p.ndim == 2 and "embed_tokens" not in n and "lm_head" not in n]
    rest = [p for n, p in train if not (p.ndim == 2 and "embed_tokens" not in n and "lm_head" not in n)]
    muon = torch.optim.Muon(hidden, lr=a.lr, weight_decay=0.1, momentum=0.95, nesterov=True, ns_steps=5,
                            adjust_lr_fn="match_rms_adamw")
    return [muon, torch.optim.AdamW(rest, lr=a.lr, weight_decay=0.1)], \
        f"Muon on {len(hidden)} 2-D matrices, AdamW on {len(rest)} others (3-D experts included)"


def apply_lora(model, a):
    from peft import LoraConfig, get_peft_model
    targets = a.targets.split(",")
    modules = [t for t in targets if t not in EXPERTS]
    params = [t for t in targets if t in EXPERTS]
    cfg = LoraConfig(r=a.lora, lora_alpha=2 * a.lora, lora_dropout=0.0, target_modules=modules or None,
                     target_parameters=params or None)
    return get_peft_model(model, cfg)


def cmd_train(a):
    torch = lazy_torch(a.threads)
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32)
    if a.lora:
        model = apply_lora(model, a)
    model.train()
    vocab = model.config.vocab_size
    opts, optim_desc = make_optimizer(torch, model, a)
    autocast = a.mode in ("bf16", "compile-bf16")
    compiled = a.mode.startswith("compile")
    fwd = torch.compile(model) if compiled else model
    g = torch.Generator().manual_seed(a.seed)

    def step():
        for _ in range(a.accum):
            x = torch.randint(0, vocab, (a.batch, a.seq + 1), generator=g)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                out = fwd(input_ids=x[:, :-1], use_cache=False)
            logits = out.logits.float()
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
            (loss / a.accum).backward()
        for o in opts:
            o.step()
        for o in opts:
            o.zero_grad(set_to_none=True)
        return float(loss.detach())

    times = []
    first = None
    for i in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        loss = step()
        dt = time.perf_counter() - t0
        if i == 0:
            first = dt
        if i >= a.warmup:
            times.append(dt)
    graph_breaks = None
    if compiled:
        from torch._dynamo.utils import counters
        graph_breaks = sum(counters["graph_break"].values())
    tokens = a.batch * a.seq * a.accum
    mean = sum(times) / len(times)  # as zaya bench train's step_seconds
    res = dict(side="torch", mode=a.mode, lora=a.lora, optimizer=optim_desc, step_seconds=mean,
               best_step_seconds=min(times), step_times=times, first_step_seconds=first, tokens_per_step=tokens,
               tokens_per_second=tokens / mean,
               loss=loss, graph_breaks=graph_breaks, torch=torch.__version__, threads=torch.get_num_threads(),
               trainable_params=sum(p.numel() for p in model.parameters() if p.requires_grad))
    json.dump(res, open(a.json, "w"), indent=1)
    print(f"torch {a.mode}: {res['tokens_per_second']:.1f} tokens/s, step {mean:.3f} s (first {first:.1f} s), "
          f"loss {loss:.3f}, {optim_desc}")


# --- decoding ---------------------------------------------------------------------------------------------


class _Clock:
    """A transformers streamer that only notes when each put arrives: the prompt (before the prefill), then
    every new token of the batch."""

    def __init__(self):
        self.t = []

    def put(self, value):
        self.t.append(time.perf_counter())

    def end(self):
        pass


def cmd_decode(a):
    """transformers' generate in bf16, greedy, N new tokens, timed by a streamer: the prefill is the time from
    the prompt to the first new token; a decode step is the mean time between the first and the last new
    token. Best of --reps generates. A static cache where ZAYA takes one."""
    torch = lazy_torch(a.threads)
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.bfloat16)
    model.eval()
    g = torch.Generator().manual_seed(a.seed)
    vocab = model.config.vocab_size
    x = torch.randint(3, vocab, (a.batch, a.prompt), generator=g)
    mask = torch.ones_like(x)
    cache = "static"

    def gen(n):
        clock = _Clock()
        kw = dict(max_new_tokens=n, min_new_tokens=n, do_sample=False, num_beams=1, attention_mask=mask,
                  streamer=clock)
        if cache == "static":
            kw["cache_implementation"] = "static"
        with torch.no_grad():
            model.generate(x, **kw)
        t = clock.t
        if len(t) != n + 1:
            raise RuntimeError(f"the streamer saw {len(t)} puts for {n} new tokens")
        return t[1] - t[0], (t[-1] - t[1]) / (n - 1)

    try:
        gen(2)
    except Exception as e:  # ZAYA's cache is its own (the CCA convolution state): say what happened
        cache = f"dynamic (static refused: {type(e).__name__}: {str(e).splitlines()[0][:120]})"
        gen(2)
    runs = [gen(a.new + 1) for _ in range(a.reps)]
    prefill = min(r[0] for r in runs)
    per_token = min(r[1] for r in runs)
    res = dict(side="torch", batch=a.batch, prompt=a.prompt, new=a.new, cache=cache, prefill_seconds=prefill,
               prefill_tokens_per_second=a.batch * a.prompt / prefill, decode_ms_per_step=1e3 * per_token,
               decode_tokens_per_second=a.batch / per_token, torch=torch.__version__,
               threads=torch.get_num_threads())
    json.dump(res, open(a.json, "w"), indent=1)
    print(f"torch generate b{a.batch} p{a.prompt}: prefill {prefill:.3f} s, decode {1e3 * per_token:.1f} ms/step "
          f"({res['decode_tokens_per_second']:.1f} tokens/s), cache {cache}")


# --- summary ----------------------------------------------------------------------------------------------


def load(pattern):
    return [json.load(open(f)) for f in sorted(glob.glob(pattern))]


def best(runs, key):
    return max(runs, key=key) if runs else None


# Issue 39's targets: pretraining >= 2x the best PyTorch configuration, LoRA >= 3x PEFT, decoding >= 5x
# transformers at batch 1 and >= 3x at batch 8, and within 1.2x of the DRAM roofline at batch 1.
TARGETS = {"pretrain": 2.0, "lora": 3.0}
DECODE_TARGETS = {1: 5.0, 8: 3.0}
ROOFLINE_TARGET = 1.2


def verdict(ok):
    return "met" if ok else "missed"


def summary_train(d, job):
    """Best round of each configuration. MFU, the same for both sides: zaya's model FLOPs per token (its JSON)
    at each side's tokens/s, against the GEMM peak of the precision in use (f32 for float32, bf16 for bf16
    autocast) that zaya bench train measured, the highest of the run's rounds (a loaded machine lowers it)."""
    zfs, zbs = load(f"{d}/zaya_f32_*.json"), load(f"{d}/zaya_bf16_*.json")
    zf = best(zfs, lambda j: j["tokens_per_second"])
    zb = best(zbs, lambda j: j["tokens_per_second"])
    ref = zf or zb
    flop_per_token = ref["model_gflops_per_second"] * 1e9 / ref["tokens_per_second"]
    peak = {p: max((j["peak_gemm_gflops"] for j in runs), default=None) for p, runs in (("f32", zfs), ("bf16", zbs))}
    rows = []
    for name, z in (("zaya.cpp f32", zf), ("zaya.cpp bf16", zb)):
        if z:
            pk = peak[z["precision"]]
            rows.append((name, z["tokens_per_second"], z["step_seconds"],
                         flop_per_token * z["tokens_per_second"] / (pk * 1e9), z["precision"]))
    torch_rows = []
    for mode in ("f32", "bf16", "compile", "compile-bf16"):
        # The mean of the timed steps, as zaya bench train's step_seconds; the best round of those.
        runs = load(f"{d}/torch_{mode}_*.json")
        for j in runs:
            j["step_seconds"] = sum(j["step_times"]) / len(j["step_times"])
            j["tokens_per_second"] = j["tokens_per_step"] / j["step_seconds"]
        t = best(runs, lambda j: j["tokens_per_second"])
        if not t:
            continue
        prec = "bf16" if "bf16" in mode else "f32"
        pk = peak[prec]
        mfu = flop_per_token * t["tokens_per_second"] / (pk * 1e9) if pk else float("nan")
        name = {"f32": "PyTorch eager f32", "bf16": "PyTorch eager bf16 autocast", "compile": "PyTorch compile f32",
                "compile-bf16": "PyTorch compile bf16 autocast"}[mode]
        if mode.startswith("compile"):
            name += f" ({t['graph_breaks']} graph breaks)"
        rows.append((name, t["tokens_per_second"], t["step_seconds"], mfu, prec))
        torch_rows.append((name, t))
    fails = sorted(os.path.basename(f) for f in glob.glob(f"{d}/torch_*.failed"))
    meta = json.load(open(f"{d}/meta.json"))
    print(f"== {job}: {meta['shape']}, {meta['batch']} x {meta['seq']} tokens/step, {meta['threads']} threads, "
          f"best of {meta['rounds']} rounds, {meta.get('recipe', '')}")
    print(f"{'':44} {'tokens/s':>10} {'step s':>9} {'MFU':>7}  precision (MFU against {flop_per_token / 1e6:.1f} "
          f"MFLOP/token and the peaks f32 {peak['f32'] or 0:.0f}, bf16 {peak['bf16'] or 0:.0f} GFLOP/s)")
    for name, tps, st, mfu, prec in rows:
        # zaya bench train counts a LoRA step's FLOPs as full training's (the base's weight gradients
        # included, which a LoRA step does not compute): no MFU is printed for LoRA.
        mfu_text = "     -" if job == "lora" else f"{100 * mfu:6.1f}%"
        print(f"{name:44} {tps:10.1f} {st:9.3f} {mfu_text}  {prec}")
    for f in fails:
        print(f"failed (see the .log beside it): {f}")
    if torch_rows:
        bt_name, bt = max(torch_rows, key=lambda r: r[1]["tokens_per_second"])
        zbest_name, zbest = max(((n, z) for n, z in (("zaya.cpp f32", zf), ("zaya.cpp bf16", zb)) if z),
                                key=lambda r: r[1]["tokens_per_second"])
        ratio = zbest["tokens_per_second"] / bt["tokens_per_second"]
        target = TARGETS[job]
        print(f"ratio: {zbest_name} / best PyTorch ({bt_name}) = {ratio:.2f}x "
              f"(issue 39's target >= {target}x: {verdict(ratio >= target)})")
        if zf and torch_rows[0][1]["mode"] == "f32":
            print(f"ratio: zaya.cpp f32 / PyTorch eager f32 = "
                  f"{zf['tokens_per_second'] / torch_rows[0][1]['tokens_per_second']:.2f}x")
        json.dump(dict(job=job, ratio=ratio, zaya=zbest_name, torch=bt_name), open(f"{d}/summary.json", "w"))


def summary_decode(d):
    meta = json.load(open(f"{d}/meta.json"))
    print(f"== decode: {meta['shape']}, {meta['threads']} threads, bf16 weights, best of {meta['rounds']} rounds")
    print(f"{'batch':>5} {'prompt':>6} | {'zaya ms/step':>12} {'torch ms/step':>13} {'ratio':>6} | "
          f"{'zaya prefill t/s':>16} {'torch prefill t/s':>17} {'ratio':>6} | roofline ms  zaya/roofline")
    out = []
    for b in meta["batches"]:
        for p in meta["prompts"]:
            zs = load(f"{d}/zaya_round_*.json")
            ts = load(f"{d}/torch_b{b}_p{p}_*.json")
            if not zs or not ts:
                print(f"{b:5} {p:6} | missing: zaya {len(zs)} torch {len(ts)} files")
                continue
            dec = [pt for z in zs for pt in z["decode"] if pt["batch"] == b and pt["context"] == p]
            zd = min(dec, key=lambda pt: pt["ms_per_step"])
            t = min(ts, key=lambda j: j["decode_ms_per_step"])
            roof = zd["roofline_ms"] if b == 1 else None
            r = t["decode_ms_per_step"] / zd["ms_per_step"]
            row = dict(batch=b, prompt=p, ratio=r, zaya_ms=zd["ms_per_step"], torch_ms=t["decode_ms_per_step"],
                       roofline_ms=roof, cache=t["cache"], dram_gbps=zs[0]["dram_gbps"])
            line = f"{b:5} {p:6} | {zd['ms_per_step']:12.2f} {t['decode_ms_per_step']:13.2f} {r:5.2f}x |"
            if b in DECODE_TARGETS:
                row["target"] = f">= {DECODE_TARGETS[b]}x: {verdict(r >= DECODE_TARGETS[b])}"
            if b == 1:  # zaya bench infer prefills one sequence
                zp = max(pt["tokens_per_second"] for z in zs for pt in z["prefill"] if pt["tokens"] == p)
                tp = max(j["prefill_tokens_per_second"] for j in ts)
                row.update(zaya_prefill=zp, torch_prefill=tp)
                line += f" {zp:16.1f} {tp:17.1f} {zp / tp:5.2f}x | {roof:11.2f}  {zd['ms_per_step'] / roof:.2f}x"
                row["roofline_target"] = f"<= {ROOFLINE_TARGET}x: {verdict(zd['ms_per_step'] / roof <= ROOFLINE_TARGET)}"
            out.append(row)
            print(line)
    for row in out:
        if "target" in row or "roofline_target" in row:
            print(f"batch {row['batch']} prompt {row['prompt']}: issue 39's decode target {row.get('target', '-')}"
                  + (f"; roofline {row['roofline_target']}" if "roofline_target" in row else ""))
    if out:
        print(f"transformers' cache: {out[0]['cache']}")
    json.dump(out, open(f"{d}/summary.json", "w"), indent=1)


def cmd_summary(a):
    if a.job == "decode":
        summary_decode(a.dir)
    else:
        summary_train(a.dir, a.job)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("model")
    m.add_argument("--out", required=True)
    m.add_argument("--layers", type=int, default=2)
    m.add_argument("--vocab", type=int, default=32768)
    m.add_argument("--experts", type=int, default=16)
    for key in ("hidden_size", "moe_intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim",
                "router_hidden_size"):
        m.add_argument("--" + key.replace("_", "-"), dest=key, type=int)
    t = sub.add_parser("train")
    t.add_argument("--model", required=True)
    t.add_argument("--mode", choices=["f32", "bf16", "compile", "compile-bf16"], default="f32")
    t.add_argument("--batch", type=int, default=8)
    t.add_argument("--seq", type=int, default=256)
    t.add_argument("--accum", type=int, default=1)
    t.add_argument("--steps", type=int, default=3)
    t.add_argument("--warmup", type=int, default=1)
    t.add_argument("--optim", choices=["adamw", "muon"], default="adamw")
    t.add_argument("--lr", type=float, default=1e-3)
    t.add_argument("--lora", type=int, default=0, help="LoRA rank (0: full training)")
    t.add_argument("--targets", default=",".join(ATTENTION + ROUTER + EXPERTS))
    d = sub.add_parser("decode")
    d.add_argument("--model", required=True)
    d.add_argument("--batch", type=int, default=1)
    d.add_argument("--prompt", type=int, default=128)
    d.add_argument("--new", type=int, default=16)
    d.add_argument("--reps", type=int, default=2)
    for p in (m, t, d):
        p.add_argument("--threads", type=int, default=os.cpu_count())
        p.add_argument("--seed", type=int, default=1)
        if p is not m:
            p.add_argument("--json", required=True)
    s = sub.add_parser("summary")
    s.add_argument("job", choices=["pretrain", "lora", "decode"])
    s.add_argument("dir")
    a = ap.parse_args()
    {"model": cmd_model, "train": cmd_train, "decode": cmd_decode, "summary": cmd_summary}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
