"""Independent PyTorch reference of the ZAYA1 model (legacy 80-half-layer layout).

Written from docs/spec.md (sections 2-8); used to make golden files for the
C++ implementation (tools/make_golden.py). (The speed comparisons run transformers' own ZayaForCausalLM
on PyPI's PyTorch 2.x instead: bench/vs_torch_*.sh.)

Layout: half-layer n = 0..L-1, even n = CCA attention, odd n = MoE (zaya_layers = ['a', E] * blocks).
Module names reproduce the legacy Hugging Face tensor names of spec §6.1, so state_dict() keys are e.g.
  model.embed_tokens.weight, model.layers.0.self_attn.qkv.linear_q.weight,
  model.layers.1.zaya_block.experts.local_experts.3.linear_fc1.weight, model.final_norm.weight, model.res_scale.*
balancing_biases are persistent buffers (in state_dict, not parameters).

Run with Debian's torch:  /usr/bin/python3 tools/zaya_ref.py  (runs a tiny smoke test)
"""

import json
import math
import os
import sys
from dataclasses import dataclass, field
from typing import List, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st  # noqa: E402

EPS32 = float(torch.finfo(torch.float32).eps)  # 1.1920929e-07, QK-norm clamp (spec §3 step 6, upstream port)


# ----------------------------------------------------------------------------------------------------------
# config
# ----------------------------------------------------------------------------------------------------------

def make_config(hidden=32, blocks=3, q_heads=4, kv_heads=2, head_dim=8, experts=4, ffn=12, router_hidden=16,
                vocab_size=96, real_vocab_size=90, topk=1, rope_theta=10000.0, partial_rotary_factor=0.5,
                max_position_embeddings=64, norm_epsilon=1e-5, router_norm_eps=1e-6, torch_dtype="float32",
                use_mod=True, use_eda=True):
    """Legacy (spec §2) config.json dict. `ffn` is the expert intermediate size F (fc1 has 2F rows)."""
    return {
        "model_type": "zaya",
        "architectures": ["ZayaForCausalLM"],
        "hidden_size": hidden,
        "zaya_layers": ["a", experts] * blocks,
        "num_hidden_layers": 2 * blocks,
        "num_attention_heads": hidden // head_dim,
        "kv_channels": head_dim,
        "cca_num_q_heads": [q_heads, 0] * blocks,
        "num_query_groups_list": [kv_heads, 0] * blocks,
        "num_key_value_heads": kv_heads,
        "cca_time0": 2,
        "cca_time1": 2,
        "ffn_hidden_size_list": [0, 2 * ffn] * blocks,
        "zaya_mlp_expansion": [0, router_hidden] * blocks,
        "moe_router_topk": topk,
        "zaya_use_mod": use_mod,
        "zaya_use_eda": use_eda,
        "zaya_high_prec": True,
        "scale_residual_merge": True,
        "residual_in_fp32": True,
        "activation_func": "swiglu",
        "gated_linear_unit": True,
        "add_bias_linear": False,
        "normalization": "RMSNorm",
        "norm_epsilon": norm_epsilon,
        "rope_theta": rope_theta,
        "partial_rotary_factor": partial_rotary_factor,
        "rope_scaling": False,
        "max_position_embeddings": max_position_embeddings,
        "vocab_size": vocab_size,
        "tie_word_embeddings": True,
        "lm_head_bias": False,
        "attention_bias": False,
        "bos_token_id": 2,
        "eos_token_id": 1,
        "pad_token_id": 0,
        "torch_dtype": torch_dtype,
        "zaya_real_vocab_size": real_vocab_size,
        "zaya_router_norm_eps": router_norm_eps,
    }


@dataclass
class ZayaConfig:
    hidden: int
    layer_kinds: List[object]  # 'a' or int (experts)
    q_heads: int
    kv_heads: int
    head_dim: int
    t0: int
    t1: int
    ffn: int  # expert intermediate F (fc1 rows = 2F)
    router_hidden: int
    experts: int
    topk: int
    use_mod: bool
    use_eda: bool
    norm_eps: float
    router_norm_eps: float
    rope_theta: float
    partial_rotary_factor: float
    vocab_size: int
    real_vocab_size: int
    max_position_embeddings: int
    raw: dict = field(default_factory=dict)

    @property
    def n_half(self):
        return len(self.layer_kinds)

    @property
    def slots(self):  # router outputs: E real experts (+1 MOD skip slot)
        return self.experts + (1 if self.use_mod else 0)

    @property
    def rot_dim(self):
        return int(self.head_dim * self.partial_rotary_factor)

    @classmethod
    def from_dict(cls, c):
        kinds = list(c["zaya_layers"])
        attn_idx = [i for i, k in enumerate(kinds) if k == "a"]
        moe_idx = [i for i, k in enumerate(kinds) if k != "a"]
        for i, k in enumerate(kinds):  # the legacy alternation this reference implements
            if (k == "a") != (i % 2 == 0):
                raise ValueError(f"zaya_layers[{i}] = {k!r}: expected 'a' on even and an int on odd half-layers")
        hidden = int(c["hidden_size"])
        if "kv_channels" in c and c["kv_channels"]:
            head_dim = int(c["kv_channels"])
        elif c.get("head_dim"):
            head_dim = int(c["head_dim"])
        else:
            head_dim = hidden // int(c["num_attention_heads"])

        def first(key, idx, default=None):
            lst = c.get(key)
            if lst is None:
                return default
            if not isinstance(lst, list):
                return lst
            vals = {lst[i] for i in idx}
            if len(vals) != 1:
                raise ValueError(f"{key}: per-layer sizes differ ({sorted(vals)}); only uniform sizes are supported")
            return lst[idx[0]]

        glu = bool(c.get("gated_linear_unit", True))
        ffn_list = first("ffn_hidden_size_list", moe_idx)
        experts = {int(kinds[i]) for i in moe_idx}
        if len(experts) != 1:
            raise ValueError(f"zaya_layers: expert counts differ {sorted(experts)}")
        return cls(
            hidden=hidden,
            layer_kinds=kinds,
            q_heads=int(first("cca_num_q_heads", attn_idx)),
            kv_heads=int(first("num_query_groups_list", attn_idx, c.get("num_key_value_heads"))),
            head_dim=head_dim,
            t0=int(c.get("cca_time0", 2)),
            t1=int(c.get("cca_time1", 2)),
            ffn=int(ffn_list) // 2 if glu else int(ffn_list),
            router_hidden=int(first("zaya_mlp_expansion", moe_idx)),
            experts=experts.pop(),
            topk=int(c.get("moe_router_topk", 1)),
            use_mod=bool(c.get("zaya_use_mod", True)),
            use_eda=bool(c.get("zaya_use_eda", True)),
            norm_eps=float(c.get("norm_epsilon", 1e-5)),
            router_norm_eps=float(c.get("zaya_router_norm_eps", 1e-6)),
            rope_theta=float(c.get("rope_theta", 10000.0)),
            partial_rotary_factor=float(c.get("partial_rotary_factor", 0.5)),
            vocab_size=int(c["vocab_size"]),
            real_vocab_size=int(c.get("zaya_real_vocab_size", c["vocab_size"])),
            max_position_embeddings=int(c.get("max_position_embeddings", 4096)),
            raw=dict(c),
        )

    @classmethod
    def from_file(cls, path):
        if os.path.isdir(path):
            path = os.path.join(path, "config.json")
        with open(path) as f:
            return cls.from_dict(json.load(f))


# ----------------------------------------------------------------------------------------------------------
# modules
# ----------------------------------------------------------------------------------------------------------

class RMSNorm(nn.Module):
    """x * rsqrt(mean(x^2) + eps) * w (spec §5), in the compute dtype."""

    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class ResidualScaling(nn.Module):
    """out = (h + hs_bias) * hs_scale [+ (res + res_bias) * res_scale]  (spec §5)."""

    def __init__(self, n, has_residual):
        super().__init__()
        self.hidden_states_scale = nn.Parameter(torch.ones(n))
        self.hidden_states_bias = nn.Parameter(torch.zeros(n))
        self.has_residual = has_residual
        if has_residual:
            self.residual_scale = nn.Parameter(torch.ones(n))
            self.residual_bias = nn.Parameter(torch.zeros(n))

    def forward(self, h, res):
        out = (h + self.hidden_states_bias) * self.hidden_states_scale
        if self.has_residual:
            out = out + (res + self.residual_bias) * self.residual_scale
        return out


def rope_cos_sin(S, rot, theta, dtype, device=None):
    """NeoX partial RoPE tables [S, rot]: inv_freq[i] = theta^(-2i/rot), cos/sin = concat(freqs, freqs).
    Computed in float64 then cast to the compute dtype."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, rot, 2, dtype=torch.float64, device=device) / rot))
    pos = torch.arange(S, dtype=torch.float64, device=device)
    freqs = pos[:, None] * inv_freq[None, :]
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def apply_partial_rope(x, cos, sin, rot):
    """x [B, S, H, d]; rotate the first `rot` dims NeoX style (pairs (i, i + rot/2)); rest pass through."""
    xr, xp = x[..., :rot], x[..., rot:]
    half = rot // 2
    x1, x2 = xr[..., :half], xr[..., half:]
    rotated = torch.cat([-x2, x1], dim=-1)
    c = cos[None, :, None, :]
    s = sin[None, :, None, :]
    return torch.cat([xr * c + rotated * s, xp], dim=-1)


class CCA(nn.Module):
    """The `qkv` module of spec §3: projections, q/k mean terms, two stacked causal convs, value streams,
    QK norm with per-KV-head temperature. Returns Q, K (before RoPE), V, each [B, S, H, d]."""

    def __init__(self, cfg: ZayaConfig):
        super().__init__()
        D, Hq, Hk, d = cfg.hidden, cfg.q_heads, cfg.kv_heads, cfg.head_dim
        assert Hq % Hk == 0 and (Hk * d) % 2 == 0
        self.Hq, self.Hk, self.d = Hq, Hk, d
        self.t0, self.t1 = cfg.t0, cfg.t1
        C = (Hq + Hk) * d
        self.linear_q = nn.Linear(D, Hq * d, bias=False)
        self.linear_k = nn.Linear(D, Hk * d, bias=False)
        self.val_proj1 = nn.Linear(D, Hk * d // 2, bias=False)  # current token
        self.val_proj2 = nn.Linear(D, Hk * d // 2, bias=False)  # previous token
        self.conv_qk = nn.ModuleList([
            nn.Conv1d(C, C, cfg.t0, groups=C, padding=0, bias=True),          # depthwise
            nn.Conv1d(C, C, cfg.t1, groups=Hq + Hk, padding=0, bias=True),    # grouped, one group per head
        ])
        self.temp = nn.Parameter(torch.ones(Hk))

    def forward(self, x):
        B, S, _ = x.shape
        Hq, Hk, d = self.Hq, self.Hk, self.d
        G = Hq // Hk
        q = self.linear_q(x)  # [B, S, Hq*d]
        k = self.linear_k(x)  # [B, S, Hk*d]
        # q/k mean terms from the unconvolved projections (spec §3 step 2)
        q4 = q.view(B, S, Hk, G, d)
        k4 = k.view(B, S, Hk, 1, d)
        mq = (q4 + k4) / 2                       # [B, S, Hk, G, d]: query head h = j*G + g uses kv head j
        mk = mq.mean(dim=3)                      # [B, S, Hk, d]
        mq = mq.reshape(B, S, Hq, d)
        # causal conv stack on left-zero-padded raw qk (spec §3 step 3); no padding between the convs
        qk = torch.cat([q, k], dim=-1).transpose(1, 2)         # [B, C, S]
        P = (self.t0 - 1) + (self.t1 - 1)
        c = self.conv_qk[1](self.conv_qk[0](F.pad(qk, (P, 0))))  # [B, C, S]
        c = c.transpose(1, 2)                                   # [B, S, C]
        Q = c[..., : Hq * d].reshape(B, S, Hq, d) + mq
        K = c[..., Hq * d:].reshape(B, S, Hk, d) + mk
        # values: current stream and previous-token stream (x_{-1} = 0), concat then view (step 5)
        x_prev = F.pad(x, (0, 0, 1, 0))[:, :S]
        V = torch.cat([self.val_proj1(x), self.val_proj2(x_prev)], dim=-1).view(B, S, Hk, d)
        # QK norm to sqrt(d), clamp eps32; per-KV-head temperature on K (step 6)
        sd = math.sqrt(d)
        Q = Q * sd / torch.linalg.vector_norm(Q, dim=-1, keepdim=True).clamp_min(EPS32)
        K = K * sd / torch.linalg.vector_norm(K, dim=-1, keepdim=True).clamp_min(EPS32)
        K = K * self.temp.view(1, 1, Hk, 1)
        return Q, K, V


class Attention(nn.Module):
    def __init__(self, cfg: ZayaConfig):
        super().__init__()
        self.qkv = CCA(cfg)
        self.o_proj = nn.Linear(cfg.q_heads * cfg.head_dim, cfg.hidden, bias=False)
        self.rot = cfg.rot_dim

    def forward(self, x, cos, sin):
        B, S, _ = x.shape
        Q, K, V = self.qkv(x)
        Hq, Hk, d = self.qkv.Hq, self.qkv.Hk, self.qkv.d
        G = Hq // Hk
        Q = apply_partial_rope(Q, cos, sin, self.rot)
        K = apply_partial_rope(K, cos, sin, self.rot)
        # GQA without copies: [B, Hk, G, S, d] x [B, Hk, 1, d, S]
        Qg = Q.view(B, S, Hk, G, d).permute(0, 2, 3, 1, 4)
        Kt = K.permute(0, 2, 3, 1).unsqueeze(2)
        Vg = V.permute(0, 2, 1, 3).unsqueeze(2)
        scores = torch.matmul(Qg, Kt) / math.sqrt(d)  # [B, Hk, G, S, S]
        sm_dtype = torch.promote_types(scores.dtype, torch.float32)
        causal = torch.ones(S, S, dtype=torch.bool, device=x.device).triu(1)
        scores = scores.to(sm_dtype).masked_fill(causal, float("-inf"))
        A = torch.softmax(scores, dim=-1).to(V.dtype)
        O = torch.matmul(A, Vg)  # [B, Hk, G, S, d]
        O = O.permute(0, 3, 1, 2, 4).reshape(B, S, Hq * d)
        return self.o_proj(O)


class Router(nn.Module):
    """ZAYA1 router with EDA (spec §4). forward returns (logits [.., N], r_state)."""

    def __init__(self, cfg: ZayaConfig, first: bool):
        super().__init__()
        D, R, N = cfg.hidden, cfg.router_hidden, cfg.slots
        self.down_proj = nn.Linear(D, R, bias=True)
        self.use_eda = cfg.use_eda and not first
        if self.use_eda:
            self.router_states_scale = nn.Parameter(torch.ones(R))
        self.rmsnorm_eda = RMSNorm(R, cfg.router_norm_eps)
        self.router_mlp = nn.Sequential(
            nn.Linear(R, R, bias=True), nn.GELU(),   # exact erf GELU
            nn.Linear(R, R, bias=True), nn.GELU(),
            nn.Linear(R, N, bias=False),
        )
        bb = torch.zeros(N)
        if cfg.use_mod:
            bb[-1] = -1.0  # reference init: skip slot -1
        self.register_buffer("balancing_biases", bb, persistent=True)

    def forward(self, x, r_prev):
        r = self.down_proj(x)
        if self.use_eda and r_prev is not None:
            r = r + self.router_states_scale * r_prev
        h = self.rmsnorm_eda(r)
        return self.router_mlp(h), r


class Expert(nn.Module):
    def __init__(self, D, Fi):
        super().__init__()
        self.linear_fc1 = nn.Linear(D, 2 * Fi, bias=False)  # rows 0..F-1 gate, F..2F-1 up
        self.linear_fc2 = nn.Linear(Fi, D, bias=False)
        self.F = Fi

    def forward(self, x):
        a = self.linear_fc1(x)
        return self.linear_fc2(F.silu(a[..., : self.F]) * a[..., self.F:])


class Experts(nn.Module):
    def __init__(self, cfg: ZayaConfig):
        super().__init__()
        self.local_experts = nn.ModuleList([Expert(cfg.hidden, cfg.ffn) for _ in range(cfg.experts)])


class ZayaBlock(nn.Module):
    """Router + experts + MOD skip slot (legacy: skip output = p_skip * x)."""

    def __init__(self, cfg: ZayaConfig, first: bool):
        super().__init__()
        self.router = Router(cfg, first)
        self.experts = Experts(cfg)
        self.E, self.N, self.k, self.use_mod = cfg.experts, cfg.slots, cfg.topk, cfg.use_mod

    def route(self, logits, force_sel=None):
        """logits [T, N] -> probs, scores, sel [T, k] (slot ids, -1 = void)."""
        p_dtype = torch.promote_types(logits.dtype, torch.float32)
        p = torch.softmax(logits.to(p_dtype), dim=-1)
        scores = p.detach() + self.router.balancing_biases.to(p_dtype)  # biases only select
        if force_sel is not None:
            return p, scores, force_sel.reshape(p.shape[0], self.k).to(torch.long)
        sel = torch.topk(scores, self.k, dim=-1).indices  # descending biased score
        if self.use_mod and self.k > 1:  # once skip is taken, the remaining choices are void
            is_skip = sel == self.E
            after_skip = (torch.cumsum(is_skip.long(), dim=-1) - is_skip.long()) > 0
            sel = sel.masked_fill(after_skip, -1)
        return p, scores, sel

    def forward(self, x, r_prev, force_sel=None):
        B, S, D = x.shape
        T = B * S
        logits, r = self.router(x, r_prev)
        logits = logits.reshape(T, self.N)
        p, scores, sel = self.route(logits, force_sel)
        xf = x.reshape(T, D)
        tok = torch.arange(T, device=x.device).repeat_interleave(self.k)
        slot = sel.reshape(-1)
        keep = slot >= 0
        tok, slot = tok[keep], slot[keep]
        gate = p.gather(1, sel.clamp_min(0)).reshape(-1)[keep].to(x.dtype)
        # group assignments by slot (sort), one matmul pair per expert
        order = torch.argsort(slot, stable=True)
        tok, slot, gate = tok[order], slot[order], gate[order]
        counts = torch.bincount(slot, minlength=self.N).tolist()
        out = torch.zeros_like(xf)
        start = 0
        for e, n in enumerate(counts):
            if n == 0:
                continue
            idx = tok[start:start + n]
            g = gate[start:start + n, None]
            xs = xf.index_select(0, idx)
            y = xs if e == self.E else self.experts.local_experts[e](xs)  # slot E = MOD skip: pass x through
            out.index_add_(0, idx, y * g)
            start += n
        info = {"logits": logits, "probs": p, "scores": scores, "sel": sel, "counts": counts}
        return out.view(B, S, D), r, info


class AttnHalfLayer(nn.Module):
    def __init__(self, cfg, n):
        super().__init__()
        self.input_norm = RMSNorm(cfg.hidden, cfg.norm_eps)
        self.res_scale = ResidualScaling(cfg.hidden, has_residual=(n > 0))
        self.self_attn = Attention(cfg)


class MoEHalfLayer(nn.Module):
    def __init__(self, cfg, n, first):
        super().__init__()
        self.input_norm = RMSNorm(cfg.hidden, cfg.norm_eps)
        self.res_scale = ResidualScaling(cfg.hidden, has_residual=True)
        self.zaya_block = ZayaBlock(cfg, first)


class ZayaModel(nn.Module):
    def __init__(self, cfg: ZayaConfig):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden)
        layers = []
        first_moe = True
        for n, kind in enumerate(cfg.layer_kinds):
            if kind == "a":
                layers.append(AttnHalfLayer(cfg, n))
            else:
                layers.append(MoEHalfLayer(cfg, n, first_moe))
                first_moe = False
        self.layers = nn.ModuleList(layers)
        self.final_norm = RMSNorm(cfg.hidden, cfg.norm_eps)
        self.res_scale = ResidualScaling(cfg.hidden, has_residual=True)


@dataclass
class ZayaOutput:
    logits: torch.Tensor
    loss: Optional[torch.Tensor] = None       # mean cross-entropy over targets >= 0
    aux_loss: Optional[torch.Tensor] = None   # sum over MoE layers of the Switch aux loss (coeff included)
    z_loss: Optional[torch.Tensor] = None     # sum over MoE layers of the router z-loss (coeff included)
    total: Optional[torch.Tensor] = None      # loss + aux_loss + z_loss
    routing: list = field(default_factory=list)  # per MoE half-layer: dict(layer, logits, probs, scores, sel, counts)


class ZayaRef(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        if isinstance(cfg, dict):
            cfg = ZayaConfig.from_dict(cfg)
        self.cfg = cfg
        self.model = ZayaModel(cfg)

    # -- forward -------------------------------------------------------------------------------------------
    def forward(self, input_ids, targets=None, aux_coeff=0.0, z_coeff=0.0, force_routing=None):
        """input_ids [B, S] (long). force_routing: optional list (one per MoE half-layer) of [B, S, k] slot ids
        to replay a routing decision (used for finite differences)."""
        cfg, m = self.cfg, self.model
        B, S = input_ids.shape
        dtype = m.embed_tokens.weight.dtype
        cos, sin = rope_cos_sin(S, cfg.rot_dim, cfg.rope_theta, dtype, input_ids.device)
        h = m.embed_tokens(input_ids)
        res = None
        r_prev = None
        routing = []
        moe_i = 0
        aux = h.new_zeros(())
        zl = h.new_zeros(())
        for n, layer in enumerate(m.layers):
            res = layer.res_scale(h, res)
            x = layer.input_norm(res)
            if isinstance(layer, AttnHalfLayer):
                h = layer.self_attn(x, cos, sin)
            else:
                fs = force_routing[moe_i] if force_routing is not None else None
                h, r_prev, info = layer.zaya_block(x, r_prev, fs)
                info["layer"] = n
                routing.append(info)
                moe_i += 1
                if aux_coeff:
                    aux = aux + switch_aux_loss(info, aux_coeff, cfg.topk)
                if z_coeff:
                    zl = zl + router_z_loss(info["logits"], z_coeff)
        res = m.res_scale(h, res)
        out = m.final_norm(res)
        logits = out @ m.embed_tokens.weight.t()  # tied LM head, no bias
        o = ZayaOutput(logits=logits, routing=routing)
        if targets is not None:
            o.loss = masked_xent(logits, targets, cfg.real_vocab_size)
            o.aux_loss, o.z_loss = aux, zl
            o.total = o.loss + aux + zl
        return o

    # -- I/O -----------------------------------------------------------------------------------------------
    @classmethod
    def from_pretrained(cls, path, dtype=torch.float32):
        cfg = ZayaConfig.from_file(path)
        model = cls(cfg)
        sd, _ = st.load(os.path.join(path, "model.safetensors"))
        lm = sd.pop("lm_head.weight", None)
        if lm is not None and not torch.equal(lm, sd["model.embed_tokens.weight"]):
            print("warning: lm_head.weight differs from the embedding; using the tied embedding", file=sys.stderr)
        own = model.state_dict()
        missing = sorted(set(own) - set(sd))
        extra = sorted(set(sd) - set(own))
        if missing or extra:
            raise ValueError(f"{path}: missing tensors {missing[:8]}..., unexpected {extra[:8]}...")
        for k, v in sd.items():
            if tuple(v.shape) != tuple(own[k].shape):
                raise ValueError(f"{path}: {k}: shape {tuple(v.shape)}, expected {tuple(own[k].shape)}")
        model.load_state_dict({k: v.to(torch.float32) for k, v in sd.items()})
        return model.to(dtype)

    def save_pretrained(self, path, dtype=torch.float32, extra_config=None):
        os.makedirs(path, exist_ok=True)
        cfg = dict(self.cfg.raw)
        if extra_config:
            cfg.update(extra_config)
        with open(os.path.join(path, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
            f.write("\n")
        sd = {}
        for k, v in self.state_dict().items():
            sd[k] = v.detach().to(torch.float32 if k.endswith("balancing_biases") else dtype)
        st.save(os.path.join(path, "model.safetensors"), sd, metadata={"format": "pt"})


# ----------------------------------------------------------------------------------------------------------
# losses
# ----------------------------------------------------------------------------------------------------------

def masked_xent(logits, targets, real_vocab):
    """Mean cross-entropy over positions with target >= 0; logits of padding ids (>= real_vocab) set to -inf."""
    V = logits.shape[-1]
    lg = logits.reshape(-1, V)
    if real_vocab < V:
        pad = torch.arange(V, device=lg.device) >= real_vocab
        lg = lg.masked_fill(pad, float("-inf"))
    logp = torch.log_softmax(lg.to(torch.promote_types(lg.dtype, torch.float32)), dim=-1)
    t = targets.reshape(-1).long()
    valid = t >= 0
    nll = -logp.gather(1, t.clamp_min(0)[:, None])[:, 0]
    return nll[valid].sum() / valid.sum()


def switch_aux_loss(info, coeff, topk=1):
    """coeff * N * sum_i f_i P_i over the N slots; f_i = (#selections of slot i)/(T*k) (no gradient),
    P_i = mean_t p_i (Megatron's switch_load_balancing_loss_func convention)."""
    p = info["probs"]
    T, N = p.shape
    f = torch.tensor(info["counts"], dtype=p.dtype, device=p.device) / (T * topk)
    return coeff * N * (f * p.mean(0)).sum()


def router_z_loss(logits, coeff):
    """coeff * mean_t logsumexp(router logits_t)^2 (ST-MoE)."""
    return coeff * torch.logsumexp(logits, dim=-1).pow(2).mean()


# ----------------------------------------------------------------------------------------------------------
# initialisation for training (spec §10 suggestions); golden files use their own init in make_golden.py
# ----------------------------------------------------------------------------------------------------------

@torch.no_grad()
def init_for_training(model: ZayaRef, seed=0, std=0.02):
    g = torch.Generator().manual_seed(seed)
    cfg = model.cfg
    out_std = std / math.sqrt(2 * cfg.n_half)
    for name, p in model.named_parameters():
        if name.endswith("o_proj.weight") or name.endswith("linear_fc2.weight"):
            p.copy_(torch.randn(p.shape, generator=g) * out_std)
        elif p.dim() == 2:
            p.copy_(torch.randn(p.shape, generator=g) * std)
        elif name.endswith("conv_qk.0.weight"):  # depthwise, identity on the current step (tap t0-1)
            p.zero_()
            p[:, 0, -1] = 1.0
        elif name.endswith("conv_qk.1.weight"):  # grouped, identity within each head group on the current step
            p.zero_()
            d = p.shape[1]
            for o in range(p.shape[0]):
                p[o, o % d, -1] = 1.0
        elif name.endswith("bias"):
            p.zero_()
        else:  # norms, scales, temp, router_states_scale
            p.fill_(1.0)
    for name, b in model.named_buffers():
        if name.endswith("balancing_biases"):
            b.zero_()
            if cfg.use_mod:
                b[-1] = -1.0


def param_count(model):
    return sum(p.numel() for p in model.parameters())


if __name__ == "__main__":
    torch.manual_seed(0)
    m = ZayaRef(make_config()).double()
    init_for_training(m)
    ids = torch.randint(0, 90, (2, 9))
    o = m(ids, targets=torch.roll(ids, -1, 1), aux_coeff=0.01, z_coeff=0.001)
    print("params", param_count(m), "loss", o.loss.item(), "ln(90)", math.log(90), "total", o.total.item())
