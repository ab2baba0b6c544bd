"""llama.cpp's gguf package (gguf.GGUFReader) reads every GGUF file zaya
writes: `zaya ckpt export --out FILE.gguf` with --dtype f32, bf16, f16 and
q8_0, for a model without and with sliding-window blocks.

- every tensor has the name, shape and ggml type docs/formats-gguf.md gives,
  and its values equal the legacy safetensors export of the same model
  (f32: bit for bit; bf16 / f16: the f32 values rounded as gguf-py's own
  quantizer rounds them; Q8_0: the very bytes gguf-py's reference quantizer
  makes from the f32 values, and those dequantized by gguf-py);
- the metadata keys are spelled as gguf-py's Keys constants spell them and
  typed as llama.cpp's converters write them (counts uint32, float32
  hyperparameters, the tokenizer arrays), and the tokenizer's pieces, scores
  and types are those of the SentencePiece model.

usage: gguf_check.py ZAYA WORKDIR MODEL_DIR... (model directories with tokenizer.model)
"""
import json
import os
import sys

import numpy as np
import sentencepiece as spm
from gguf import GGMLQuantizationType as T, GGUFReader, GGUFValueType as V, Keys
from gguf import quants
from safetensors.numpy import load_file

import hf_common as h

ZAYA, WORK = sys.argv[1:3]
MODELS = sys.argv[3:]
ARCH = "zaya"


def legacy_tensors(d):
    idx = os.path.join(d, "model.safetensors.index.json")
    files = sorted(set(json.load(open(idx))["weight_map"].values())) if os.path.exists(idx) else ["model.safetensors"]
    out = {}
    for f in files:
        out.update(load_file(os.path.join(d, f)))
    return {k: v.astype(np.float32) for k, v in out.items()}


def expected_tensors(st, cfg):
    """GGUF name -> f32 values, from the legacy safetensors export (docs/formats-gguf.md, "Tensors")."""
    blocks = len(cfg["zaya_layers"]) // 2
    ffn = cfg["ffn_hidden_size_list"][1] // 2
    experts = cfg["zaya_layers"][1]
    out = {"token_embd.weight": st["model.embed_tokens.weight"], "output_norm.weight": st["model.final_norm.weight"]}
    for k, g in [("hidden_states_scale", "output_merge_hs.weight"), ("hidden_states_bias", "output_merge_hs.bias"),
                 ("residual_scale", "output_merge_res.weight"), ("residual_bias", "output_merge_res.bias")]:
        out[g] = st[f"model.res_scale.{k}"]
    if "lm_head.weight" in st:
        out["output.weight"] = st["lm_head.weight"]
    for n in range(blocks):
        a, m, b = f"model.layers.{2 * n}.", f"model.layers.{2 * n + 1}.", f"blk.{n}."
        q = a + "self_attn.qkv."
        pairs = {"attn_norm.weight": a + "input_norm.weight",
                 "attn_merge_hs.weight": a + "res_scale.hidden_states_scale",
                 "attn_merge_hs.bias": a + "res_scale.hidden_states_bias",
                 "attn_merge_res.weight": a + "res_scale.residual_scale",
                 "attn_merge_res.bias": a + "res_scale.residual_bias",
                 "attn_q.weight": q + "linear_q.weight", "attn_k.weight": q + "linear_k.weight",
                 "attn_v_cur.weight": q + "val_proj1.weight", "attn_v_prev.weight": q + "val_proj2.weight",
                 "attn_conv_dw.weight": q + "conv_qk.0.weight", "attn_conv_dw.bias": q + "conv_qk.0.bias",
                 "attn_conv_grp.weight": q + "conv_qk.1.weight", "attn_conv_grp.bias": q + "conv_qk.1.bias",
                 "attn_temp.weight": q + "temp", "attn_output.weight": a + "self_attn.o_proj.weight",
                 "ffn_norm.weight": m + "input_norm.weight",
                 "ffn_merge_hs.weight": m + "res_scale.hidden_states_scale",
                 "ffn_merge_hs.bias": m + "res_scale.hidden_states_bias",
                 "ffn_merge_res.weight": m + "res_scale.residual_scale",
                 "ffn_merge_res.bias": m + "res_scale.residual_bias",
                 "ffn_router_down.weight": m + "zaya_block.router.down_proj.weight",
                 "ffn_router_down.bias": m + "zaya_block.router.down_proj.bias",
                 "ffn_router_eda.weight": m + "zaya_block.router.router_states_scale",
                 "ffn_router_norm.weight": m + "zaya_block.router.rmsnorm_eda.weight",
                 "ffn_router_fc1.weight": m + "zaya_block.router.router_mlp.0.weight",
                 "ffn_router_fc1.bias": m + "zaya_block.router.router_mlp.0.bias",
                 "ffn_router_fc2.weight": m + "zaya_block.router.router_mlp.2.weight",
                 "ffn_router_fc2.bias": m + "zaya_block.router.router_mlp.2.bias",
                 "ffn_router_out.weight": m + "zaya_block.router.router_mlp.4.weight",
                 "exp_probs_b.bias": m + "zaya_block.router.balancing_biases"}
        for g, s in pairs.items():
            if s in st:
                out[b + g] = st[s]
        ex = m + "zaya_block.experts.local_experts.{}."
        fc1 = np.stack([st[ex.format(e) + "linear_fc1.weight"] for e in range(experts)])
        out[b + "ffn_gate_exps.weight"] = fc1[:, :ffn]
        out[b + "ffn_up_exps.weight"] = fc1[:, ffn:]
        out[b + "ffn_down_exps.weight"] = np.stack([st[ex.format(e) + "linear_fc2.weight"] for e in range(experts)])
    used = {id(v) for v in out.values()}
    return out


INT8_SET = ("attn_q.weight", "attn_k.weight", "attn_v_cur.weight", "attn_v_prev.weight", "attn_output.weight",
            "ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight")


def expected_type(name, arr, dtype, tied):
    if arr.ndim < 2 or (dtype == "q8_0" and name.endswith("attn_conv_dw.weight")):
        return T.F32
    if dtype == "f32":
        return T.F32
    if dtype in ("bf16", "f16"):
        return T.BF16 if dtype == "bf16" else T.F16
    head = name == ("token_embd.weight" if tied else "output.weight")
    if (name.endswith(INT8_SET) or head) and arr.shape[-1] % 32 == 0:
        return T.Q8_0
    return T.BF16


def varint(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return v, i


def piece_types(model_bytes):
    """The type of every piece of a serialized SentencePiece ModelProto (field 1, repeated SentencePiece; its
    field 3 the type, NORMAL = 1 when absent): the python package exposes no user-defined test, and its
    protobuf module needs the protobuf package."""
    types, i = [], 0
    while i < len(model_bytes):
        key, i = varint(model_bytes, i)
        wire = key & 7
        if wire == 0:
            _, i = varint(model_bytes, i)
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        elif wire == 2:
            n, i = varint(model_bytes, i)
            if key >> 3 == 1:
                piece, j, t = model_bytes[i:i + n], 0, 1
                while j < len(piece):
                    k, j = varint(piece, j)
                    if k & 7 == 0:
                        v, j = varint(piece, j)
                        if k >> 3 == 3:
                            t = v
                    elif k & 7 == 2:
                        m, j = varint(piece, j)
                        j += m
                    elif k & 7 == 5:
                        j += 4
                    else:
                        j += 8
                types.append(t)
            i += n
        else:
            raise ValueError(f"wire type {wire} in the SentencePiece model")
    return types


def field_value(f):
    t = f.types[0]
    if t == V.ARRAY:
        if f.types[1] == V.STRING:
            return [bytes(f.parts[i]).decode("utf-8") for i in f.data]
        return [f.parts[i][0].item() for i in f.data]
    if t == V.STRING:
        return bytes(f.parts[f.data[0]]).decode("utf-8")
    return f.parts[f.data[0]][0].item()


def check_metadata(r, path, cfg, sp, sliding):
    want = {  # key: (type, value or None)
        Keys.General.ARCHITECTURE: (V.STRING, ARCH),
        Keys.General.ALIGNMENT: (V.UINT32, None),
        Keys.General.FILE_TYPE: (V.UINT32, None),
        Keys.General.NAME: (V.STRING, None),
        Keys.LLM.CONTEXT_LENGTH.format(arch=ARCH): (V.UINT32, cfg["max_position_embeddings"]),
        Keys.LLM.EMBEDDING_LENGTH.format(arch=ARCH): (V.UINT32, cfg["hidden_size"]),
        Keys.LLM.BLOCK_COUNT.format(arch=ARCH): (V.UINT32, len(cfg["zaya_layers"]) // 2),
        Keys.LLM.VOCAB_SIZE.format(arch=ARCH): (V.UINT32, cfg["vocab_size"]),
        Keys.LLM.EXPERT_COUNT.format(arch=ARCH): (V.UINT32, cfg["zaya_layers"][1]),
        Keys.LLM.EXPERT_USED_COUNT.format(arch=ARCH): (V.UINT32, cfg["moe_router_topk"]),
        Keys.LLM.EXPERT_FEED_FORWARD_LENGTH.format(arch=ARCH): (V.UINT32, cfg["ffn_hidden_size_list"][1] // 2),
        Keys.Attention.HEAD_COUNT.format(arch=ARCH): (V.UINT32, cfg["cca_num_q_heads"][0]),
        Keys.Attention.HEAD_COUNT_KV.format(arch=ARCH): (V.UINT32, cfg["num_key_value_heads"]),
        Keys.Attention.KEY_LENGTH.format(arch=ARCH): (V.UINT32, None),
        Keys.Attention.VALUE_LENGTH.format(arch=ARCH): (V.UINT32, None),
        Keys.Attention.LAYERNORM_RMS_EPS.format(arch=ARCH): (V.FLOAT32, None),
        Keys.Rope.FREQ_BASE.format(arch=ARCH): (V.FLOAT32, None),
        Keys.Rope.DIMENSION_COUNT.format(arch=ARCH): (V.UINT32, None),
        Keys.Tokenizer.MODEL: (V.STRING, "llama"),
        Keys.Tokenizer.LIST: (V.ARRAY, None),
        Keys.Tokenizer.SCORES: (V.ARRAY, None),
        Keys.Tokenizer.TOKEN_TYPE: (V.ARRAY, None),
        Keys.Tokenizer.BOS_ID: (V.UINT32, sp.bos_id()),
        Keys.Tokenizer.EOS_ID: (V.UINT32, cfg["eos_token_id"] if isinstance(cfg["eos_token_id"], int)
                                else cfg["eos_token_id"][0]),
        Keys.Tokenizer.PAD_ID: (V.UINT32, None),
        Keys.Tokenizer.UNK_ID: (V.UINT32, sp.unk_id()),
        Keys.Tokenizer.ADD_BOS: (V.BOOL, True),
        Keys.Tokenizer.ADD_EOS: (V.BOOL, False),
        Keys.Tokenizer.ADD_PREFIX: (V.BOOL, None),
    }
    if sliding:
        want[Keys.Attention.SLIDING_WINDOW.format(arch=ARCH)] = (V.UINT32, None)
    for key, (typ, value) in want.items():
        f = r.fields.get(key)
        if f is None:
            h.fail(f"{path}: gguf-py finds no key {key}")
        if f.types[0] != typ:
            h.fail(f"{path}: {key} is {f.types[0].name}, llama.cpp writes {typ.name}")
        if value is not None and field_value(f) != value:
            h.fail(f"{path}: {key} = {field_value(f)!r}, expected {value!r}")
    if r.fields[Keys.General.ALIGNMENT].parts[-1][0] != r.alignment:
        h.fail(f"{path}: general.alignment disagrees with the reader's alignment")
    # The tokenizer: the SentencePiece pieces by id, their scores and types, then padding rows.
    arrays = {k: r.fields[k] for k in (Keys.Tokenizer.LIST, Keys.Tokenizer.SCORES, Keys.Tokenizer.TOKEN_TYPE)}
    for k, elem in [(Keys.Tokenizer.LIST, V.STRING), (Keys.Tokenizer.SCORES, V.FLOAT32),
                    (Keys.Tokenizer.TOKEN_TYPE, V.INT32)]:
        if arrays[k].types[1] != elem:
            h.fail(f"{path}: {k} holds {arrays[k].types[1].name}, llama.cpp writes {elem.name}")
    tokens, scores, types = (field_value(arrays[k]) for k in arrays)
    if not len(tokens) == len(scores) == len(types) == cfg["vocab_size"]:
        h.fail(f"{path}: {len(tokens)} tokens, {len(scores)} scores, {len(types)} types for vocab {cfg['vocab_size']}")
    kinds = piece_types(sp.serialized_model_proto())
    for i in range(sp.get_piece_size()):
        t = kinds[i]  # the proto's enum: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte
        if (t == 3) != sp.is_control(i) or (t == 2) != sp.is_unknown(i) or (t == 6) != sp.is_byte(i):
            h.fail(f"piece {i}: this test's reading of the SentencePiece model disagrees with sentencepiece")
        if tokens[i] != sp.id_to_piece(i) or scores[i] != np.float32(sp.get_score(i)) or types[i] != t:
            h.fail(f"{path}: token {i}: {tokens[i]!r} {scores[i]} type {types[i]}; the SentencePiece model: "
                   f"{sp.id_to_piece(i)!r} {sp.get_score(i)} type {t}")
    return len(want)


def check_file(path, dtype, st, cfg, sp):
    r = GGUFReader(path)
    tied = cfg.get("tie_word_embeddings", True)
    want = expected_tensors(st, cfg)
    got = {t.name: t for t in r.tensors}
    if set(got) != set(want):
        h.fail(f"{path}: tensors {sorted(set(got) ^ set(want))} are in only one of the GGUF file and the mapping")
    for name, ref in want.items():
        t = got[name]
        shape = tuple(int(x) for x in reversed(t.shape.tolist()))
        if shape != ref.shape:
            h.fail(f"{path}: {name} has shape {shape} (PyTorch order), the export {ref.shape}")
        typ = expected_type(name, ref, dtype, tied)
        if t.tensor_type != typ:
            h.fail(f"{path}: {name} is {t.tensor_type.name}, expected {typ.name}")
        if typ == T.F32:
            ok = np.array_equal(np.asarray(t.data, dtype=np.float32).reshape(ref.shape), ref)
        else:
            # gguf-py's own quantizer on the f32 values gives the very bytes zaya wrote.
            ok = np.array_equal(np.asarray(t.data).reshape(-1).view(np.uint8),
                                quants.quantize(ref, typ).reshape(-1).view(np.uint8))
            deq = quants.dequantize(np.asarray(t.data), typ).reshape(ref.shape)
            ok = ok and np.array_equal(deq, quants.dequantize(quants.quantize(ref, typ), typ).reshape(ref.shape))
        if not ok:
            if typ == T.F32:
                diff = np.abs(np.asarray(t.data, dtype=np.float32).reshape(ref.shape) - ref).max()
            else:
                deq = quants.dequantize(np.asarray(t.data), typ).reshape(ref.shape)
                mine = quants.dequantize(quants.quantize(ref, typ), typ).reshape(ref.shape)
                diff = f"{int((deq != mine).sum())} of {deq.size} values differ, max {np.abs(deq - mine).max()}"
            h.fail(f"{path}: {name} ({typ.name}) differs from the export: {diff}")
    keys = check_metadata(r, path, cfg, sp, "swa_layers" in cfg)
    print(f"ok: {os.path.basename(path)}: gguf.GGUFReader reads {len(want)} tensors equal to the safetensors "
          f"export and {keys} metadata keys typed as llama.cpp writes them")


for model in MODELS:
    label = os.path.basename(model.rstrip("/"))
    legacy = os.path.join(WORK, label + "-legacy-f32")
    h.run([ZAYA, "ckpt", "export", "--in", model, "--out", legacy, "--layout", "legacy", "--dtype", "f32", "--force"])
    st = legacy_tensors(legacy)
    cfg = json.load(open(os.path.join(legacy, "config.json")))
    sp = spm.SentencePieceProcessor(model_file=os.path.join(model, "tokenizer.model"))
    for dtype in ["f32", "bf16", "f16", "q8_0"]:
        path = os.path.join(WORK, f"{label}-{dtype}.gguf")
        h.run([ZAYA, "ckpt", "export", "--in", model, "--out", path, "--dtype", dtype, "--force"])
        check_file(path, dtype, st, cfg, sp)
print("gguf_check: all checks passed")
