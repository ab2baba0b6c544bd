"""Training-throughput baseline: the PyTorch reference (tools/zaya_ref.py) trained with zaya.cpp's recipe.

    /usr/bin/python3 bench/torch_train.py --preset tiny --batch 4 --seq 256 --accum 1 --warmup 2 --steps 10 --threads 2
    /usr/bin/python3 bench/torch_train.py --config path/to/config.json (or a model directory) [--load DIR] ...

Progress goes to stderr; one JSON object (tokens/s, step times, threads, torch version, BLAS info) goes to
stdout and, with --json FILE, to FILE.

Recipe (mirrors src/zaya/optim): float32; random token ids (uniform over the real vocabulary) with next-token
targets; `accum` micro-batches of [batch, seq] per optimizer step; global-norm clipping to 1.0; then
  * Muon on every 2-D hidden matrix (q/k/val_proj1/val_proj2/o_proj, router down_proj and router_mlp.0/2/4,
    each expert's linear_fc1 and linear_fc2 as separate matrices): m = 0.95 m + g, u = g + 0.95 m (Nesterov),
    Newton-Schulz 5 steps (3.4445, -4.7750, 2.0315) on u/(||u||_F + 1e-7) with rows <= cols (transposed if
    needed), W <- W (1 - lr wd) - lr 0.2 sqrt(max(rows, cols)) NS(u); same-shape matrices are batched;
  * AdamW (0.9, 0.95, eps 1e-8) on the rest: embedding (weight decay 0.1), norms, biases, residual scales,
    temperatures, router_states_scale, conv weights and biases (no weight decay);
  * balancing biases: Adam (lr --bias-lr, betas 0.9/0.999) on the real-expert biases with gradient
    (share of the batch's choices for expert i) - 1/E; the skip slot is left alone (zaya.cpp's default).
Throughput counts every token of every micro-batch: tokens/s = batch * seq * accum / step time.
"""

import argparse
import json
import math
import os
import platform
import re
import statistics
import sys
import time


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--config", help="config.json, or a directory holding one")
    src.add_argument("--preset", choices=["tiny", "small"], help="the zaya.cpp presets (src/zaya/model/config.cc)")
    ap.add_argument("--load", help="directory with model.safetensors to start from (default: fresh init)")
    ap.add_argument("--batch", "-B", type=int, default=4, help="micro-batch size")
    ap.add_argument("--seq", "-S", type=int, default=256, help="sequence length")
    ap.add_argument("--accum", type=int, default=1, help="gradient-accumulation micro-batches per step")
    ap.add_argument("--warmup", type=int, default=2, help="untimed warmup optimizer steps")
    ap.add_argument("--steps", type=int, default=10, help="timed optimizer steps")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (and OMP/BLAS env)")
    ap.add_argument("--lr", type=float, default=3e-3, help="learning rate of both Muon and AdamW")
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0, help="global grad-norm clip, 0 = off")
    ap.add_argument("--bias-lr", type=float, default=1e-3, help="balancing-bias Adam lr, 0 = off")
    ap.add_argument("--aux-coeff", type=float, default=0.0, help="Switch aux loss coefficient")
    ap.add_argument("--z-coeff", type=float, default=0.0, help="router z-loss coefficient")
    ap.add_argument("--no-muon", action="store_true", help="AdamW on everything")
    ap.add_argument("--ns-dtype", choices=["f32", "bf16"], default="f32",
                    help="Newton-Schulz GEMM operands (bf16: like zaya.cpp's optim.ns_dtype = bf16)")
    ap.add_argument("--autocast", choices=["off", "bf16"], default="off",
                    help="bf16: forward under torch.autocast(device_type='cpu', dtype=torch.bfloat16) "
                         "(float32 master weights; the backward follows autocast's casts)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fixed-batch", action="store_true", help="reuse one batch every step (sanity check: the "
                    "loss must fall)")
    ap.add_argument("--json", help="also write the JSON result here")
    ap.add_argument("--blas-dir", help="directory holding an optimised libblas.so.3 (e.g. OpenBLAS extracted from "
                    "libopenblas0-openmp: .../openblas-openmp); the script re-executes itself with it first on "
                    "LD_LIBRARY_PATH. Debian's torch calls whatever libblas.so.3 resolves to.")
    a = ap.parse_args()
    if not a.config and not a.preset:
        a.preset = "tiny"
    return a


ARGS = parse_args()
if ARGS.blas_dir:
    _d = os.path.abspath(ARGS.blas_dir)
    _old = os.environ.get("LD_LIBRARY_PATH", "")
    if not _old.startswith(_d):
        os.environ["LD_LIBRARY_PATH"] = _d + (":" + _old if _old else "")
        os.execv(sys.executable, [sys.executable] + sys.argv)
# Thread counts must be in the environment before torch (and its BLAS/OpenMP) is loaded.
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(ARGS.threads)

import torch  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from zaya_ref import ZayaConfig, ZayaRef, init_for_training, make_config, param_count  # noqa: E402


def preset(name):
    if name == "tiny":
        return make_config(hidden=128, blocks=4, q_heads=4, kv_heads=2, head_dim=32, experts=4, ffn=128,
                           router_hidden=64, vocab_size=4096, real_vocab_size=4096, rope_theta=10000.0,
                           max_position_embeddings=1024)
    if name == "small":
        return make_config(hidden=512, blocks=8, q_heads=4, kv_heads=2, head_dim=64, experts=8, ffn=512,
                           router_hidden=128, vocab_size=8192, real_vocab_size=8192, rope_theta=10000.0,
                           max_position_embeddings=4096)
    raise ValueError(name)


# ----------------------------------------------------------------------------------------------------------
# optimizers
# ----------------------------------------------------------------------------------------------------------

NS_COEFFS = (3.4445, -4.7750, 2.0315)


NS_BF16 = False  # set from --ns-dtype: bf16 GEMM operands, float32 iterate (as zaya.cpp's ns_dtype = bf16)


def _mm(x, y):
    if NS_BF16:
        return (x.bfloat16() @ y.bfloat16()).float()
    return x @ y


def newton_schulz(G, steps=5):
    """Batched quintic Newton-Schulz on [n, r, c]; works on rows <= cols, returns the input's shape."""
    a, b, c = NS_COEFFS
    X = G
    transposed = X.shape[-2] > X.shape[-1]
    if transposed:
        X = X.transpose(-2, -1)
    X = X / (torch.linalg.matrix_norm(X, keepdim=True) + 1e-7)  # Frobenius
    for _ in range(steps):
        A = _mm(X, X.transpose(-2, -1))
        Bm = b * A + c * _mm(A, A)
        X = a * X + _mm(Bm, X)
    if transposed:
        X = X.transpose(-2, -1)
    return X


class Muon:
    def __init__(self, params, lr, momentum=0.95, weight_decay=0.1, ns_steps=5):
        self.lr, self.mu, self.wd, self.ns_steps = lr, momentum, weight_decay, ns_steps
        groups = {}
        for p in params:
            groups.setdefault(tuple(p.shape), []).append(p)
        self.groups = [(ps, torch.zeros((len(ps),) + shape)) for shape, ps in groups.items()]

    @torch.no_grad()
    def step(self):
        for ps, buf in self.groups:
            r, c = ps[0].shape
            g = torch.stack([p.grad for p in ps])
            buf.mul_(self.mu).add_(g)
            u = g.add_(buf, alpha=self.mu)  # Nesterov
            o = newton_schulz(u, self.ns_steps)
            scale = 0.2 * math.sqrt(max(r, c))
            for i, p in enumerate(ps):
                p.mul_(1 - self.lr * self.wd)
                p.add_(o[i], alpha=-self.lr * scale)


class BiasBalancer:
    """Adam on the real-expert balancing biases with gradient share_i - 1/E (skip slot untouched)."""

    def __init__(self, model, lr, betas=(0.9, 0.999), eps=1e-8):
        self.blocks = [l.zaya_block for l in model.model.layers if hasattr(l, "zaya_block")]
        self.lr, self.b1, self.b2, self.eps = lr, betas[0], betas[1], eps
        E = model.cfg.experts
        self.E = E
        self.m = [torch.zeros(E, dtype=torch.float64) for _ in self.blocks]
        self.v = [torch.zeros(E, dtype=torch.float64) for _ in self.blocks]
        self.t = 0
        self.counts = [torch.zeros(model.cfg.slots, dtype=torch.float64) for _ in self.blocks]

    def accumulate(self, routing):
        for c, info in zip(self.counts, routing):
            c += torch.tensor(info["counts"], dtype=torch.float64)

    @torch.no_grad()
    def step(self):
        self.t += 1
        for blk, c, m, v in zip(self.blocks, self.counts, self.m, self.v):
            g = c[: self.E] / c.sum().clamp_min(1) - 1.0 / self.E
            m.mul_(self.b1).add_(g, alpha=1 - self.b1)
            v.mul_(self.b2).addcmul_(g, g, value=1 - self.b2)
            mh = m / (1 - self.b1 ** self.t)
            vh = v / (1 - self.b2 ** self.t)
            blk.router.balancing_biases[: self.E] -= (self.lr * mh / (vh.sqrt() + self.eps)).float()
            c.zero_()

    def loads(self):
        return [[int(x) for x in c.tolist()] for c in self.counts]


def split_params(model, use_muon):
    muon, decay, no_decay = [], [], []
    for name, p in model.named_parameters():
        if name == "model.embed_tokens.weight":
            decay.append(p)
        elif p.dim() == 2 and use_muon:
            muon.append(p)
        elif p.dim() == 2:
            decay.append(p)
        else:
            no_decay.append(p)
    return muon, decay, no_decay


def blas_info():
    show = torch.__config__.show()
    info = {}
    for key in ("BLAS_INFO", "LAPACK_INFO", "USE_OPENMP", "USE_MKL", "USE_MKLDNN", "CXX_FLAGS"):
        m = re.search(key + r"=([^,\n]*)", show)
        if m:
            info[key.lower()] = m.group(1).strip()
    info["mkl_available"] = torch.backends.mkl.is_available()
    info["mkldnn_available"] = torch.backends.mkldnn.is_available()
    m = re.search(r"CPU capability usage: (\S+)", show)
    if m:
        info["cpu_capability"] = m.group(1)
    par = torch.__config__.parallel_info()
    for line in par.splitlines():
        if "parallel backend" in line or "OpenMP" in line.split(":")[0]:
            info.setdefault("parallel", []).append(line.strip())
    return info


def blas_libraries():
    """Real paths of the BLAS/LAPACK shared objects mapped into this process (after a first matmul)."""
    torch.ones(8, 8) @ torch.ones(8, 8)
    libs = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                if re.search(r"blas|lapack|mkl_|libblis|libflame", os.path.basename(path)):
                    libs.add(os.path.realpath(path))
    except OSError:
        pass
    return sorted(libs)


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def main():
    global NS_BF16
    a = ARGS
    NS_BF16 = a.ns_dtype == "bf16"
    torch.set_num_threads(a.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    torch.manual_seed(a.seed)
    if a.config:
        cfg = ZayaConfig.from_file(a.config)
        cfg_name = a.config
    else:
        cfg = ZayaConfig.from_dict(preset(a.preset))
        cfg_name = "preset:" + a.preset
    if a.load:
        model = ZayaRef.from_pretrained(a.load, dtype=torch.float32)
    else:
        model = ZayaRef(cfg).float()
        init_for_training(model, seed=a.seed)
    cfg = model.cfg
    model.train()

    muon_p, decay_p, nodecay_p = split_params(model, not a.no_muon)
    groups = [g for g in ({"params": decay_p, "weight_decay": a.weight_decay},
                          {"params": nodecay_p, "weight_decay": 0.0}) if g["params"]]
    adamw = torch.optim.AdamW(groups, lr=a.lr, betas=(0.9, 0.95), eps=1e-8, foreach=True)
    muon = Muon(muon_p, lr=a.lr, weight_decay=a.weight_decay) if muon_p else None
    balancer = BiasBalancer(model, a.bias_lr) if a.bias_lr > 0 else None
    params = list(model.parameters())
    for p in params:  # dense gradient buffers (experts no token chose get zeros, as in a C++ arena)
        p.grad = torch.zeros_like(p)

    libs = blas_libraries()
    reference_blas = any("/blas/libblas.so" in p for p in libs)  # Debian's netlib reference BLAS
    if reference_blas:
        log("WARNING: torch is calling the netlib reference BLAS (" + ", ".join(libs) + "), which is ~10x slower "
            "than OpenBLAS. Install libopenblas0-openmp (Debian then points libblas.so.3 at it) or pass --blas-dir.")
    gen = torch.Generator().manual_seed(a.seed + 1)
    tokens_per_step = a.batch * a.seq * a.accum
    n_params = param_count(model)
    n_expert = sum(p.numel() for n, p in model.named_parameters() if ".local_experts." in n)
    active = n_params - n_expert + n_expert * cfg.topk // cfg.experts
    log(f"torch {torch.__version__}, threads {torch.get_num_threads()}, config {cfg_name}: D {cfg.hidden}, "
        f"half-layers {cfg.n_half}, E {cfg.experts}, F {cfg.ffn}, V {cfg.vocab_size}; params {n_params / 1e6:.2f} M "
        f"(active {active / 1e6:.2f} M); B {a.batch} S {a.seq} accum {a.accum} -> {tokens_per_step} tokens/step")

    times, fb_times, opt_times, losses, gnorms = [], [], [], [], []
    for step in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        loss_sum = 0.0
        for _ in range(a.accum):
            if a.fixed_batch:
                gen.manual_seed(a.seed + 1)
            seq = torch.randint(0, cfg.real_vocab_size, (a.batch, a.seq + 1), generator=gen)
            with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=a.autocast == "bf16"):
                out = model(seq[:, :-1], seq[:, 1:], aux_coeff=a.aux_coeff, z_coeff=a.z_coeff)
            (out.total / a.accum).backward()
            loss_sum += out.loss.item()
            if balancer:
                balancer.accumulate(out.routing)
        t1 = time.perf_counter()
        gn = torch.nn.utils.clip_grad_norm_(params, a.clip) if a.clip > 0 else torch.tensor(0.0)
        adamw.step()
        if muon:
            muon.step()
        if balancer:
            loads = balancer.loads()
            balancer.step()
        for p in params:
            p.grad.zero_()
        t2 = time.perf_counter()
        loss = loss_sum / a.accum
        timed = step >= a.warmup
        if timed:
            times.append(t2 - t0)
            fb_times.append(t1 - t0)
            opt_times.append(t2 - t1)
        losses.append(loss)
        gnorms.append(float(gn))
        log(f"step {step:4d}{'' if timed else ' (warmup)'}: loss {loss:.4f} grad-norm {float(gn):.3f} "
            f"time {t2 - t0:.3f} s (fwd+bwd {t1 - t0:.3f}, opt {t2 - t1:.3f}) "
            f"{tokens_per_step / (t2 - t0):.0f} tok/s")

    total_t = sum(times)
    result = {
        "impl": "torch-reference",
        "script": "bench/torch_train.py",
        "config": cfg_name,
        "model": {"hidden": cfg.hidden, "half_layers": cfg.n_half, "q_heads": cfg.q_heads, "kv_heads": cfg.kv_heads,
                  "head_dim": cfg.head_dim, "experts": cfg.experts, "expert_ffn": cfg.ffn,
                  "router_hidden": cfg.router_hidden, "vocab_size": cfg.vocab_size, "top_k": cfg.topk,
                  "params": n_params, "active_params": active},
        "batch": a.batch, "seq": a.seq, "accum": a.accum, "tokens_per_step": tokens_per_step,
        "warmup_steps": a.warmup, "timed_steps": a.steps,
        "tokens_per_s": tokens_per_step * len(times) / total_t if total_t > 0 else None,
        "step_time_s": {"mean": statistics.mean(times), "median": statistics.median(times),
                        "min": min(times), "max": max(times)} if times else None,
        "fwd_bwd_time_s_mean": statistics.mean(fb_times) if fb_times else None,
        "optimizer_time_s_mean": statistics.mean(opt_times) if opt_times else None,
        "loss_first": losses[0], "loss_last": losses[-1], "losses": losses, "grad_norms": gnorms,
        "optimizer": {"muon": not a.no_muon, "lr": a.lr, "weight_decay": a.weight_decay, "clip": a.clip,
                      "adamw_betas": [0.9, 0.95], "muon_momentum": 0.95, "ns_steps": 5, "ns_dtype": a.ns_dtype,
                      "autocast": a.autocast,
                      "bias_lr": a.bias_lr, "aux_coeff": a.aux_coeff, "z_coeff": a.z_coeff},
        "expert_loads_last_step": loads if balancer else None,
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "torch_version": torch.__version__,
        "python": platform.python_version(),
        "cpu": platform.processor() or platform.machine(),
        "blas": blas_info(),
        "blas_libraries": libs,
        "blas_is_netlib_reference": reference_blas,
        "ld_library_path": os.environ.get("LD_LIBRARY_PATH", ""),
    }
    js = json.dumps(result, indent=1)
    print(js)
    if a.json:
        with open(a.json, "w") as f:
            f.write(js + "\n")


if __name__ == "__main__":
    main()
