"""Generate the golden files for the C++ model tests: tests/data/golden/.

    /usr/bin/python3 tools/make_golden.py [--out tests/data/golden] [--seed-start 0] [--no-check]

Writes
  config.json          legacy ZAYA config (spec §2 keys + zaya_real_vocab_size, zaya_router_norm_eps)
  model.safetensors    all parameters, F32, legacy names (spec §6.1); balancing_biases F32
  golden.safetensors   input_ids I32 [B,S], targets I32 [B,S] (one -1 = ignored), logits F32 [B,S,V] (raw,
                       unmasked), loss F32 [1] (mean xent), loss_with_aux F32 [1], grad.<name> F32 (d loss),
                       grad_aux.<name> F32 (d loss_with_aux), routing.<L> I32 [B,S,k] (slot chosen in MoE
                       half-layer L; slot E = MOD skip), __metadata__ (coefficients, seed, ...)

Everything is computed in float64 from the float32 parameter values, then stored as F32.
Self-checks (fail loudly): an independent token-by-token forward written straight from the spec pseudo-code
matches the vectorised reference; the conv padding recipe matches spec §3's explicit z[0] formula; gradients
match central finite differences (routing held fixed) on every parameter tensor; the float32 model makes the
same routing choices as the float64 one.
"""

import argparse
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st  # noqa: E402
from zaya_ref import ZayaConfig, ZayaRef, make_config  # noqa: E402

AUX_COEFF = 0.01
Z_COEFF = 0.001
B, S = 2, 9
IGNORED = (1, 4)  # (batch, position) whose target is -1; mid-sequence so its hidden states still matter
MARGIN = 2e-3  # brief asks > 1e-3; we demand twice that


def golden_config():
    return make_config(hidden=32, blocks=3, q_heads=4, kv_heads=2, head_dim=8, experts=4, ffn=12,
                       router_hidden=16, vocab_size=96, real_vocab_size=90, topk=1, rope_theta=10000.0,
                       partial_rotary_factor=0.5, max_position_embeddings=64, norm_epsilon=1e-5,
                       router_norm_eps=1e-6, torch_dtype="float32")


# linear weight std = gain / sqrt(fan_in); gains chosen so every block contributes O(0.3..1) to the residual
GAINS = {"linear_q": 1.0, "linear_k": 1.0, "val_proj1": 1.0, "val_proj2": 1.0, "o_proj": 0.5,
         "down_proj": 1.0, "router_mlp.0": 1.0, "router_mlp.2": 1.0, "router_mlp.4": 4.0,
         "linear_fc1": 1.0, "linear_fc2": 0.5}


@torch.no_grad()
def golden_init(model, seed):
    g = torch.Generator().manual_seed(seed)

    def randn(shape, std, mean=0.0):
        return torch.randn(shape, generator=g) * std + mean

    for name, p in model.named_parameters():
        if name == "model.embed_tokens.weight":
            p.copy_(randn(p.shape, 0.3))
        elif name.endswith("conv_qk.0.weight"):
            p.copy_(randn(p.shape, 0.3))
        elif name.endswith("conv_qk.1.weight"):
            p.copy_(randn(p.shape, 0.3 / math.sqrt(p.shape[1] * p.shape[2])))  # fan_in = d * t1 = 2d
        elif name.endswith("conv_qk.0.bias") or name.endswith("conv_qk.1.bias"):
            p.copy_(randn(p.shape, 0.1))
        elif name.endswith(".temp"):
            p.copy_(randn(p.shape, 0.3, 1.0))
        elif name.endswith("router_states_scale"):
            p.copy_(randn(p.shape, 0.2, 1.0))
        elif name.endswith("_scale") or name.endswith("norm.weight") or name.endswith("rmsnorm_eda.weight"):
            p.copy_(randn(p.shape, 0.1, 1.0))  # RMSNorm weights, hidden_states_scale, residual_scale
        elif name.endswith("_bias") or (name.endswith(".bias") and p.dim() == 1):
            p.copy_(randn(p.shape, 0.1))  # residual biases, router linear biases
        elif p.dim() == 2:
            gain = [v for k, v in GAINS.items() if k + ".weight" in name]
            assert len(gain) == 1, name
            p.copy_(randn(p.shape, gain[0] / math.sqrt(p.shape[1])))
        else:
            raise AssertionError(f"no init rule for {name}")
    for name, b in model.named_buffers():
        if name.endswith("balancing_biases"):
            b.copy_(randn(b.shape, 0.1))  # skip slot too (the reference init -1 would make skip unreachable)


def make_batch(seed, real_vocab):
    g = torch.Generator().manual_seed(10_000 + seed)
    seq = torch.randint(0, real_vocab, (B, S + 1), generator=g)
    ids, tgt = seq[:, :S].clone(), seq[:, 1:].clone()
    tgt[IGNORED] = -1
    return ids, tgt


def routing_ok(routing, E, ignored_tok, verbose=False):
    """Seed acceptance: >= 2 skip tokens in total and >= 1 in every MoE layer, >= 3 distinct experts per layer, the balancing biases change >= 2 choices (vs argmax p), every token's winning
    biased score beats the runner-up by > MARGIN, and the ignored position is never a slot's only token."""
    n_skip = 0
    n_flip = 0
    why = []
    for info in routing:
        sel = info["sel"][:, 0]
        sc = info["scores"]
        top2 = sc.topk(2, dim=-1).values
        margin = (top2[:, 0] - top2[:, 1]).min().item()
        if margin <= MARGIN:
            why.append(f"L{info['layer']} margin {margin:.2e}")
        used = {int(e) for e in sel.tolist() if e < E}
        if len(used) < 3:
            why.append(f"L{info['layer']} only {len(used)} experts")
        n_skip += int((sel == E).sum())
        n_flip += int((info["probs"].argmax(-1) != sel).sum())
        if int((sel == E).sum()) == 0:
            why.append(f"L{info['layer']} no skip token")
        mine = int(sel[ignored_tok])
        if int((sel == mine).sum()) < 2:
            why.append(f"L{info['layer']} ignored token alone on slot {mine}")
    if n_skip < 2:
        why.append(f"{n_skip} skip tokens")
    if n_flip < 2:
        why.append(f"balancing biases change only {n_flip} choices")
    if verbose and why:
        print("  rejected:", "; ".join(why))
    return not why


# ----------------------------------------------------------------------------------------------------------
# independent token-by-token forward written straight from the spec pseudo-code (float64)
# ----------------------------------------------------------------------------------------------------------

def naive_forward(sd, cfg: ZayaConfig, ids, sels):
    """Returns logits [B,S,V]; `sels` = per-MoE-layer [B,S,1] routing to check the vectorised choice."""
    D, Hq, Hk, d = cfg.hidden, cfg.q_heads, cfg.kv_heads, cfg.head_dim
    G, C, E, Fi = Hq // Hk, (Hq + Hk) * d, cfg.experts, cfg.ffn
    rot = cfg.rot_dim
    W = lambda n: sd[n]  # noqa: E731

    def rms(v, w, eps):
        return v / math.sqrt(float((v * v).mean()) + eps) * w

    def gelu(v):
        return 0.5 * v * (1 + torch.erf(v / math.sqrt(2)))

    def resmerge(pref, h, res):
        out = (h + W(pref + "hidden_states_bias")) * W(pref + "hidden_states_scale")
        if res is not None:
            out = out + (res + W(pref + "residual_bias")) * W(pref + "residual_scale")
        return out

    out_logits = torch.zeros(ids.shape[0], ids.shape[1], cfg.vocab_size, dtype=torch.float64)
    for b in range(ids.shape[0]):
        Sn = ids.shape[1]
        h = [W("model.embed_tokens.weight")[int(ids[b, t])] for t in range(Sn)]
        res = [None] * Sn
        r_prev = None
        moe_i = 0
        for n, kind in enumerate(cfg.layer_kinds):
            pre = f"model.layers.{n}."
            res = [resmerge(pre + "res_scale.", h[t], res[t] if n > 0 else None) for t in range(Sn)]
            x = [rms(res[t], W(pre + "input_norm.weight"), cfg.norm_eps) for t in range(Sn)]
            if kind == "a":
                a = pre + "self_attn.qkv."
                q = [W(a + "linear_q.weight") @ x[t] for t in range(Sn)]
                k = [W(a + "linear_k.weight") @ x[t] for t in range(Sn)]
                qk = [torch.cat([q[t], k[t]]) for t in range(Sn)]
                # conv A (depthwise) then conv B (grouped) on the left-zero-padded raw qk, by the definition
                P = (cfg.t0 - 1) + (cfg.t1 - 1)
                padded = [torch.zeros(C, dtype=torch.float64)] * P + qk
                wA, bA = W(a + "conv_qk.0.weight"), W(a + "conv_qk.0.bias")
                wB, bB = W(a + "conv_qk.1.weight"), W(a + "conv_qk.1.bias")
                LA = len(padded) - cfg.t0 + 1
                ya = [bA + sum(wA[:, 0, j] * padded[t + j] for j in range(cfg.t0)) for t in range(LA)]
                z = []
                for t in range(LA - cfg.t1 + 1):
                    zt = bB.clone()
                    for o in range(C):
                        gi = o // d
                        for j in range(cfg.t1):
                            zt[o] = zt[o] + (wB[o, :, j] * ya[t + j][gi * d:(gi + 1) * d]).sum()
                    z.append(zt)
                assert len(z) == Sn
                Qs, Ks, Vs = [], [], []
                for t in range(Sn):
                    qh = q[t].view(Hq, d)
                    kh = k[t].view(Hk, d)
                    mq = torch.stack([(qh[hh] + kh[hh // G]) / 2 for hh in range(Hq)])
                    mk = torch.stack([mq[j * G:(j + 1) * G].mean(0) for j in range(Hk)])
                    Qt = z[t][:Hq * d].view(Hq, d) + mq
                    Kt = z[t][Hq * d:].view(Hk, d) + mk
                    xprev = x[t - 1] if t > 0 else torch.zeros(D, dtype=torch.float64)
                    Vt = torch.cat([W(a + "val_proj1.weight") @ x[t], W(a + "val_proj2.weight") @ xprev]).view(Hk, d)
                    Qt = torch.stack([Qt[hh] * math.sqrt(d) / max(float(Qt[hh].norm()), 1.1920929e-07)
                                      for hh in range(Hq)])
                    Kt = torch.stack([Kt[j] * math.sqrt(d) / max(float(Kt[j].norm()), 1.1920929e-07)
                                      * W(a + "temp")[j] for j in range(Hk)])

                    def rope(v, pos):
                        v = v.clone()
                        half = rot // 2
                        for i in range(half):
                            ang = pos * cfg.rope_theta ** (-2.0 * i / rot)
                            c, s = math.cos(ang), math.sin(ang)
                            x1, x2 = v[i].clone(), v[i + half].clone()
                            v[i], v[i + half] = x1 * c - x2 * s, x2 * c + x1 * s
                        return v

                    Qs.append(torch.stack([rope(Qt[hh], t) for hh in range(Hq)]))
                    Ks.append(torch.stack([rope(Kt[j], t) for j in range(Hk)]))
                    Vs.append(Vt)
                hn = []
                for t in range(Sn):
                    o = []
                    for hh in range(Hq):
                        j = hh // G
                        sc = torch.stack([(Qs[t][hh] * Ks[u][j]).sum() / math.sqrt(d) for u in range(t + 1)])
                        pr = torch.softmax(sc, 0)
                        o.append(sum(pr[u] * Vs[u][j] for u in range(t + 1)))
                    hn.append(W(pre + "self_attn.o_proj.weight") @ torch.cat(o))
                h = hn
            else:
                rt = pre + "zaya_block.router."
                hn, rn = [], []
                for t in range(Sn):
                    r = W(rt + "down_proj.weight") @ x[t] + W(rt + "down_proj.bias")
                    if r_prev is not None:
                        r = r + W(rt + "router_states_scale") * r_prev[t]
                    rn.append(r)
                    u = rms(r, W(rt + "rmsnorm_eda.weight"), cfg.router_norm_eps)
                    u = gelu(W(rt + "router_mlp.0.weight") @ u + W(rt + "router_mlp.0.bias"))
                    u = gelu(W(rt + "router_mlp.2.weight") @ u + W(rt + "router_mlp.2.bias"))
                    lg = W(rt + "router_mlp.4.weight") @ u
                    p = torch.softmax(lg, 0)
                    e = int(torch.argmax(p + W(rt + "balancing_biases")))
                    assert e == int(sels[moe_i][b, t, 0]), (n, b, t, e)
                    if e < E:
                        ex = pre + f"zaya_block.experts.local_experts.{e}."
                        ab = W(ex + "linear_fc1.weight") @ x[t]
                        y = W(ex + "linear_fc2.weight") @ (F.silu(ab[:Fi]) * ab[Fi:])
                    else:
                        y = x[t]
                    hn.append(p[e] * y)
                h, r_prev = hn, rn
                moe_i += 1
        for t in range(Sn):
            fin = resmerge("model.res_scale.", h[t], res[t])
            out = rms(fin, W("model.final_norm.weight"), cfg.norm_eps)
            out_logits[b, t] = W("model.embed_tokens.weight") @ out
    return out_logits


def check_conv_z0(model, x):
    """Spec §3: z[0] = bB + WB[0]·bA + WB[1]·(bA + wA[1]⊙qk[0]) for t0 = t1 = 2 (per group)."""
    cca = model.model.layers[0].self_attn.qkv
    with torch.no_grad():
        qk = torch.cat([cca.linear_q(x), cca.linear_k(x)], -1)[0]  # [S, C]
        c = cca.conv_qk[1](cca.conv_qk[0](F.pad(qk.t()[None], (2, 0))))[0].t()
        wA, bA = cca.conv_qk[0].weight[:, 0], cca.conv_qk[0].bias
        wB, bB = cca.conv_qk[1].weight, cca.conv_qk[1].bias
        d, C = cca.d, qk.shape[1]
        in_old = bA.view(-1, d)
        in_new = (bA + wA[:, 1] * qk[0]).view(-1, d)
        z0 = torch.stack([bB[o] + wB[o, :, 0] @ in_old[o // d] + wB[o, :, 1] @ in_new[o // d] for o in range(C)])
        return (z0 - c[0]).abs().max().item()


def grads_or_zero(y, params, retain_graph=False):
    """Gradients of y; zeros for parameters not in the graph (experts no token chose)."""
    gs = torch.autograd.grad(y, params, retain_graph=retain_graph, allow_unused=True)
    return [torch.zeros_like(p) if g is None else g for g, p in zip(gs, params)]


def fd_check(model, ids, tgt, force, names, rng):
    """Central finite differences (h = 1e-6, float64) vs autograd on 2 entries per tensor (largest |grad| and a
    random one), for both the plain loss and loss_with_aux. Routing is replayed (force_routing)."""
    params = dict(model.named_parameters())
    worst = 0.0
    for which in ("loss", "total"):
        kw = dict(aux_coeff=AUX_COEFF, z_coeff=Z_COEFF) if which == "total" else {}

        def f():
            o = model(ids, tgt, force_routing=force, **kw)
            return getattr(o, which)

        grads = grads_or_zero(f(), [params[n] for n in names])
        for n, gr in zip(names, grads):
            p = params[n]
            flat_idx = [int(gr.abs().argmax()), int(torch.randint(0, p.numel(), (1,), generator=rng))]
            for i in flat_idx:
                h = 1e-6
                with torch.no_grad():
                    old = p.view(-1)[i].item()
                    p.view(-1)[i] = old + h
                    fp = f().item()
                    p.view(-1)[i] = old - h
                    fm = f().item()
                    p.view(-1)[i] = old
                fd = (fp - fm) / (2 * h)
                an = gr.view(-1)[i].item()
                err = abs(fd - an) / (1e-6 + abs(an))
                worst = max(worst, abs(fd - an))
                if abs(fd - an) > 1e-7 + 1e-5 * abs(an):
                    raise AssertionError(f"FD mismatch {which} {n}[{i}]: fd {fd:.10e} autograd {an:.10e} rel {err:.2e}")
    return worst


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "tests", "data", "golden"))
    ap.add_argument("--seed-start", type=int, default=0)
    ap.add_argument("--seeds", type=int, default=1000, help="size of the seed window searched")
    ap.add_argument("--no-check", action="store_true", help="skip the (slow-ish) self-checks")
    args = ap.parse_args()
    t_start = time.time()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)

    cfg_dict = golden_config()
    cfg = ZayaConfig.from_dict(cfg_dict)
    E = cfg.experts
    ign_tok = IGNORED[0] * S + IGNORED[1]

    # -- seed search: among the acceptable seeds in the window, keep the one whose routing spreads best ------------
    def build(s):
        m32 = ZayaRef(cfg)
        golden_init(m32, s)
        m64 = ZayaRef(cfg)
        m64.load_state_dict(m32.state_dict())
        return m32, m64.double()

    best = None  # (score, seed)
    n_ok = 0
    for s in range(args.seed_start, args.seed_start + args.seeds):
        m32, m64 = build(s)
        ids, tgt = make_batch(s, cfg.real_vocab_size)
        with torch.no_grad():
            o64 = m64(ids, tgt)
            if not routing_ok(o64.routing, E, ign_tok):
                continue
            o32 = m32(ids, tgt)  # float32 must make the same discrete choices
            if not all(torch.equal(a["sel"], b["sel"]) for a, b in zip(o32.routing, o64.routing)):
                continue
            if not routing_ok(o32.routing, E, ign_tok):
                continue
        n_ok += 1
        # score: number of (layer, slot) pairs used by >= 2 tokens (max 3 * 5)
        score = sum(sum(1 for c in info["counts"] if c >= 2) for info in o64.routing)
        if best is None or score > best[0]:
            best = (score, s)
    if best is None:
        sys.exit("no acceptable seed found")
    seed = best[1]
    print(f"seed {seed}: best of {n_ok} acceptable seeds in [{args.seed_start}, {args.seed_start + args.seeds}), "
          f"{best[0]} (layer, slot) pairs with >= 2 tokens")
    _, model = build(seed)
    ids, tgt = make_batch(seed, cfg.real_vocab_size)
    names = [n for n, _ in model.named_parameters()]
    params = [p for _, p in model.named_parameters()]

    out = model(ids, tgt, aux_coeff=AUX_COEFF, z_coeff=Z_COEFF)
    grad = grads_or_zero(out.loss, params, retain_graph=True)
    grad_aux = grads_or_zero(out.total, params)
    force = [info["sel"].view(B, S, -1).clone() for info in out.routing]

    # -- self-checks -------------------------------------------------------------------------------------------
    if not args.no_check:
        sd = {k: v.detach() for k, v in model.state_dict().items()}
        with torch.no_grad():
            naive = naive_forward(sd, cfg, ids, force)
        dn = (naive - out.logits.detach()).abs().max().item()
        print(f"check: token-by-token spec forward vs vectorised logits: max |diff| {dn:.3e}")
        assert dn < 1e-10, dn
        with torch.no_grad():
            x0 = model.model.layers[0].input_norm(model.model.layers[0].res_scale(
                model.model.embed_tokens(ids), None))
        dz = check_conv_z0(model, x0)
        print(f"check: conv z[0] explicit formula (spec §3) max |diff| {dz:.3e}")
        assert dz < 1e-12, dz
        worst = fd_check(model, ids, tgt, force, names, torch.Generator().manual_seed(seed))
        print(f"check: finite differences on {len(names)} tensors x 2 entries x 2 losses: max |fd - autograd| "
              f"{worst:.3e}")
        # the bulk of the gradient must be non-trivial: every parameter tensor of a used path has a gradient
        zero = [n for n, g in zip(names, grad_aux) if float(g.abs().max()) == 0.0]
        print(f"check: parameter tensors with all-zero grad_aux (unused experts only expected): {zero}")

    # -- write -------------------------------------------------------------------------------------------------
    os.makedirs(args.out, exist_ok=True)
    model32 = ZayaRef(cfg)
    model32.load_state_dict({k: v.float() for k, v in model.state_dict().items()})
    model32.cfg.raw = cfg_dict
    model32.save_pretrained(args.out, dtype=torch.float32)
    # round-trip check of the writer/reader and loader
    back = ZayaRef.from_pretrained(args.out, dtype=torch.float64)
    for k, v in back.state_dict().items():
        assert torch.equal(v, model.state_dict()[k]), k

    g = {
        "input_ids": ids.to(torch.int32),
        "targets": tgt.to(torch.int32),
        "logits": out.logits.detach().float(),
        "loss": out.loss.detach().float().reshape(1),
        "loss_with_aux": out.total.detach().float().reshape(1),
    }
    for n, gr, ga in zip(names, grad, grad_aux):
        g["grad." + n] = gr.float()
        g["grad_aux." + n] = ga.float()
    for info in out.routing:
        g[f"routing.{info['layer']}"] = info["sel"].view(B, S, -1).to(torch.int32)
    meta = {
        "seed": seed,
        "switch_aux_coeff": AUX_COEFF,
        "z_loss_coeff": Z_COEFF,
        "compute_dtype": "float64 (from the float32 parameters); stored F32",
        "loss": f"{out.loss.item():.17g}",
        "loss_with_aux": f"{out.total.item():.17g}",
        "aux_loss": f"{out.aux_loss.item():.17g}",
        "z_loss": f"{out.z_loss.item():.17g}",
        "ignored_target": f"batch {IGNORED[0]} position {IGNORED[1]}",
        "aux_definition": "per MoE half-layer: coeff*N*sum_i f_i*P_i over N=E+1 slots, f_i=count_i/(B*S*topk), "
                          "P_i=mean p_i; z: coeff*mean_t logsumexp(router logits)^2; summed over MoE half-layers",
        "routing": "routing.<L>: slot id per token in MoE half-layer L, slot E = skip",
        "min_routing_margin": MARGIN,
        "generator": "tools/make_golden.py",
        "torch": torch.__version__,
    }
    st.save(os.path.join(args.out, "golden.safetensors"), g, metadata=meta)

    # -- summary -----------------------------------------------------------------------------------------------
    print(f"loss (mean xent over {int((tgt >= 0).sum())} targets) = {out.loss.item():.10f}")
    print(f"loss_with_aux = {out.total.item():.10f}  (aux {out.aux_loss.item():.10f}, z {out.z_loss.item():.10f})")
    for info in out.routing:
        sc = info["scores"]
        top2 = sc.topk(2, dim=-1).values
        marg = (top2[:, 0] - top2[:, 1]).min().item()
        sel = info["sel"].view(B, S)
        rows = " | ".join(" ".join("S" if int(e) == E else str(int(e)) for e in row) for row in sel)
        flips = int((info["probs"].argmax(-1) != info["sel"][:, 0]).sum())
        print(f"MoE half-layer {info['layer']}: slots {rows}   counts {info['counts']} (last = skip)  "
              f"min margin {marg:.4f}  choices changed by the biases {flips}")
    # how close a float32 implementation gets (the PyTorch reference itself run in float32, from the files)
    m32 = ZayaRef.from_pretrained(args.out, dtype=torch.float32)
    gold, _ = st.load(os.path.join(args.out, "golden.safetensors"))
    o32 = m32(gold["input_ids"].long(), gold["targets"].long(), aux_coeff=AUX_COEFF, z_coeff=Z_COEFF)
    p32 = [p for _, p in m32.named_parameters()]
    g32 = grads_or_zero(o32.total, p32)
    dl = (o32.logits.detach() - gold["logits"]).abs().max().item()
    dg = max(((a - gold["grad_aux." + n]).abs().max() / (gold["grad_aux." + n].abs().max() + 1e-30)).item()
             for n, a in zip(names, g32) if gold["grad_aux." + n].abs().max() > 0)
    print(f"float32 torch vs golden: logits max |diff| {dl:.2e}, loss diff {abs(o32.loss.item() - out.loss.item()):.2e}, "
          f"loss_with_aux diff {abs(o32.total.item() - out.total.item()):.2e}, grad_aux max |diff|/max|grad| per "
          f"tensor {dg:.2e}")
    tot = 0
    for f in sorted(os.listdir(args.out)):
        sz = os.path.getsize(os.path.join(args.out, f))
        tot += sz
        print(f"  {f}: {sz} bytes")
    print(f"total {tot} bytes; {time.time() - t_start:.1f} s")


if __name__ == "__main__":
    main()
