"""zaya.cpp loads the quantized-expert checkpoints compressed-tensors writes
(docs/formats.md, "Quantized experts"), against the library itself:

- a random native ZAYA model made by transformers (hf_common.make_hf_model) has
  every routed expert matrix quantized by compressed-tensors' own compressors
  (MXFP4PackedCompressor with its MX scales, and FloatQuantizationCompressor
  with FP8 E4M3 per-channel scales, FP8_DYNAMIC's weights) and written in the
  released checkpoints' layout: stacked [E, rows, ...] tensors
  `P.weight_packed` / `P.weight` and `P.weight_scale`, the rest float, config.json
  with the library's quantization_config;
- the reference is transformers' float32 forward over the library's own
  dequantization (the compressors' decompress) of those tensors;
- zaya score's logits equal it within float32 noise (1e-5 relative), and are
  far from the unquantized model's (so a scale read wrong cannot pass);
- zaya generate's greedy tokens (experts kept packed in memory) equal
  transformers' greedy tokens over the dequantized weights;
- the per-expert 2-D tensor names load to the same logits;
- damaged files are load errors naming the tensor: a scale byte 255, a
  missing scale, a wrong shape, an unknown format;
- `zaya ckpt export --experts mxfp4` writes the bytes compressed-tensors'
  own compressor writes for the same weights, its QuantizationConfig parses
  the config, and its decompress of the file gives zaya's logits;
- `zaya ckpt export --experts fp8` likewise (float-quantized channel FP8): the
  library's decompress equals zaya's dequantization bit for bit, and the
  export of the loaded export is byte for byte the same.

  python quant_check.py ZAYA WORK TOKENIZER
"""
import json
import os
import shutil
import subprocess
import sys

import sentencepiece as spm
import torch
from safetensors.torch import load_file, save_file

import compressed_tensors
from compressed_tensors.compressors import FloatQuantizationCompressor, MXFP4PackedCompressor
from compressed_tensors.config import CompressionFormat
from compressed_tensors.quantization import QuantizationConfig, preset_name_to_scheme
from compressed_tensors.quantization.utils import calculate_qparams

import hf_common as h

ZAYA, WORK, TOKENIZER = sys.argv[1:4]
sp = spm.SentencePieceProcessor(model_file=TOKENIZER)
VOCAB = sp.get_piece_size()
BOS = sp.bos_id()
PROMPTS = ["And God said, Let there be light", "In the beginning"]
TEXT = "In the beginning God created the heaven and the earth. And the earth was without form, and void"

FORMATS = {
    # name: (preset, compressor, format, group size of the scales (None: one per row))
    "mxfp4": ("MXFP4A16", MXFP4PackedCompressor, CompressionFormat.mxfp4_pack_quantized.value, 32),
    "fp8": ("FP8_DYNAMIC", FloatQuantizationCompressor, CompressionFormat.float_quantized.value, None),
}


def quantize_matrix(w, fmt):
    """compressed-tensors' compression of one [rows, cols] matrix, and its own dequantization of the result."""
    preset, comp, _, group = FORMATS[fmt]
    scheme = preset_name_to_scheme(preset, ["Linear"])
    rows, cols = w.shape
    view = w.reshape(rows, cols // group, group) if group else w
    scale, zp = calculate_qparams(view.amin(-1), view.amax(-1), scheme.weights)
    if not group:
        scale, zp = scale.reshape(rows, 1), zp.reshape(rows, 1)
    packed = comp.compress({"weight": w, "weight_scale": scale, "weight_zero_point": zp}, scheme)
    deq = comp.decompress(dict(packed), scheme)["weight"].float()
    return {k: v for k, v in packed.items() if k.startswith("weight")}, deq


def quantization_config(fmt):
    preset, _, form, _ = FORMATS[fmt]
    qc = QuantizationConfig(config_groups={"group_0": preset_name_to_scheme(preset, ["Linear"])}, format=form,
                            quantization_status="compressed", ignore=["re:^(?!.*experts).*$"])
    return json.loads(qc.model_dump_json())


def write_quantized(model, src, dst, fmt, per_expert=False):
    """dst: src's directory with the experts quantized; returns the model over the library's dequantization."""
    shutil.copytree(src, dst)
    tensors = load_file(os.path.join(src, "model.safetensors"))
    for name in [n for n in tensors if n.endswith("experts.gate_up_proj") or n.endswith("experts.down_proj")]:
        stacked = tensors.pop(name)
        parts, deq = {}, []
        for e in range(stacked.shape[0]):
            packed, d = quantize_matrix(stacked[e].float(), fmt)
            deq.append(d)
            for k, v in packed.items():
                if per_expert:  # model.layers.N.mlp.experts.E.gate_up_proj.weight_packed
                    prefix, leaf = name.rsplit(".", 1)
                    tensors[f"{prefix}.{e}.{leaf}.{k}"] = v.contiguous()
                else:
                    parts.setdefault(k, []).append(v)
        for k, vs in parts.items():
            tensors[f"{name}.{k}"] = torch.stack(vs).contiguous()
        with torch.no_grad():
            model.get_parameter(name).copy_(torch.stack(deq))
    save_file(tensors, os.path.join(dst, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(dst, "config.json")) as f:
        cfg = json.load(f)
    cfg["quantization_config"] = quantization_config(fmt)
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    return model


def sequences():
    return [[BOS] + sp.encode(p) for p in PROMPTS] + [[BOS] + sp.encode(TEXT)[:30]]


def worst_diff(model, got, seqs):
    return max(h.max_rel_diff(z, h.hf_logits(model, s)[:, :VOCAB]) for s, z in zip(seqs, got))


def check_cached_loss(model, d, label, seqs):
    """zaya score's cached path (the engine, experts packed in memory) against transformers: with float32
    activations (ops/matvec_lowbit.h, ZAYA_MXFP4_ACTIVATIONS=float, ZAYA_FP8_ACTIVATIONS=float) within float noise;
    MXFP4 also with its default int8-quantized activations (ops/matvec_mxfp4_q8.h), FP8 with its default bf16-rounded
    ones (ops/matvec_fp8_bf16.h), within 1e-3 relative (the activations' rounding)."""
    out = os.path.join(WORK, "losses.json")
    default = {"mxfp4": "int8", "fp8": "bf16"}[label]
    for act, bound in [("float", 1e-5), (default, 1e-3)]:
        h.run([ZAYA, "score", "--model", d, "--tokens", os.path.join(WORK, "tokens.json"), "--json", out],
              env=dict(os.environ, ZAYA_MXFP4_ACTIVATIONS="float" if act == "float" else "int8",
                       ZAYA_FP8_ACTIVATIONS="float" if act == "float" else "bf16"))
        got = [x["mean_loss"] for x in json.load(open(out))]
        worst = 0.0
        for s, g in zip(seqs, got):
            logits = h.hf_logits(model, s)[:-1, :VOCAB].double()
            want = float(torch.nn.functional.cross_entropy(logits, torch.tensor(s[1:])))
            worst = max(worst, abs(g - want) / abs(want))
        if not worst <= bound:
            h.fail(f"{label}: zaya's cached mean losses (packed experts, {act} activations) differ from "
                   f"transformers' by {worst:.3g} relative")
        print(f"ok: {label}: zaya score's cached engine (experts packed, {act} activations) gives transformers' "
              f"mean losses within {worst:.2g} relative")


def check_greedy(model, d, label):
    prompts = os.path.join(WORK, "prompts.jsonl")
    with open(prompts, "w") as f:
        for i, p in enumerate(PROMPTS):
            f.write(json.dumps({"id": i, "prompt": p, "max_new_tokens": 24, "temperature": 0}) + "\n")
    out = h.run([ZAYA, "generate", "--model", d, "--prompts", prompts, "--temperature", "0", "--max-new-tokens", "24",
                 "--dtype", "auto"], env=dict(os.environ, ZAYA_MXFP4_ACTIVATIONS="float", ZAYA_FP8_ACTIVATIONS="float"))
    results = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    if len(results) != len(PROMPTS):
        h.fail(f"{label}: zaya generate gave {len(results)} result lines: {out[-500:]}")
    for p, r in zip(PROMPTS, results):
        want = h.hf_greedy_uncached(model, [BOS] + sp.encode(p), 24, model.config.eos_token_id)
        if r["tokens"] != want:
            h.fail(f"{label}: zaya generate {r['tokens']} != transformers' greedy {want} for {p!r}")
    print(f"ok: {label}: zaya generate's greedy tokens (experts packed) equal transformers' over the dequantized "
          f"weights")


def expect_error(d, label, *needles):
    r = subprocess.run([ZAYA, "info", "--model", d], capture_output=True, text=True)
    if r.returncode == 0 and "quantization_config" not in needles[0]:
        r = subprocess.run([ZAYA, "score", "--model", d, "--tokens", os.path.join(WORK, "tokens.json"),
                            "--dump-logits", os.path.join(WORK, "bad.json")], capture_output=True, text=True)
    if r.returncode == 0:
        h.fail(f"{label}: zaya loaded the damaged model")
    for n in needles:
        if n not in r.stderr:
            h.fail(f"{label}: the error does not say {n!r}: {r.stderr[-600:]}")
    print(f"ok: {label}: refused: {r.stderr.strip().splitlines()[-1][:200]}")


def damage(src, dst, edit_tensors=None, edit_config=None):
    shutil.copytree(src, dst)
    path = os.path.join(dst, "model.safetensors")
    if edit_tensors:
        t = load_file(path)
        edit_tensors(t)
        save_file(t, path, metadata={"format": "pt"})
    if edit_config:
        with open(os.path.join(dst, "config.json")) as f:
            cfg = json.load(f)
        edit_config(cfg)
        with open(os.path.join(dst, "config.json"), "w") as f:
            json.dump(cfg, f)


def check_export(float_dir, seqs):
    """zaya ckpt export --experts mxfp4: the layout compressed-tensors reads back; the library's decompress of it
    is the model zaya computes, and its scale bytes are the library's own for the same float weights."""
    d = os.path.join(WORK, "exported")
    h.run([ZAYA, "ckpt", "export", "--in", float_dir, "--out", d, "--layout", "native", "--experts", "mxfp4"])
    with open(os.path.join(d, "config.json")) as f:
        qc = QuantizationConfig.model_validate(json.load(f)["quantization_config"])
    scheme = qc.config_groups["group_0"]
    written = load_file(os.path.join(d, "model.safetensors"))
    source = load_file(os.path.join(float_dir, "model.safetensors"))
    model = h.make_hf_model("8b", VOCAB, seed=5)
    total_codes = 0
    deq_by_name = {}
    for name in [n for n in source if n.endswith("experts.gate_up_proj") or n.endswith("experts.down_proj")]:
        packed, scale = written[name + ".weight_packed"], written[name + ".weight_scale"]
        deq = []
        for e in range(packed.shape[0]):
            deq.append(MXFP4PackedCompressor.decompress({"weight_packed": packed[e], "weight_scale": scale[e]},
                                                        scheme)["weight"].float())
            lib, _ = quantize_matrix(source[name][e].float(), "mxfp4")
            if not torch.equal(lib["weight_scale"], scale[e]) or not torch.equal(lib["weight_packed"], packed[e]):
                h.fail(f"export: {name}[{e}]: zaya's MXFP4 bytes differ from compressed-tensors' for the same weights "
                       f"({int((lib['weight_packed'] != packed[e]).sum())} packed bytes)")
            total_codes += packed[e].numel()
        deq_by_name[name] = torch.stack(deq)
        with torch.no_grad():
            model.get_parameter(name).copy_(deq_by_name[name])
    got = h.zaya_logits(ZAYA, d, seqs, WORK)
    worst = worst_diff(model, got, seqs)
    if not worst <= 1e-5:
        h.fail(f"export: zaya's logits of its MXFP4 export differ from transformers' over compressed-tensors' "
               f"decompress of it by {worst:.3g}")
    print(f"ok: export: `zaya ckpt export --experts mxfp4` read back by compressed-tensors ({scheme.format or qc.format}):"
          f" its decompress gives zaya's logits within {worst:.2g}; all {total_codes} packed bytes and every scale "
          f"equal to the library's own compression of the same weights")
    check_gguf(d, float_dir, deq_by_name, model, seqs)
    check_export_fp8(float_dir, seqs)


def check_export_fp8(float_dir, seqs):
    """zaya ckpt export --experts fp8: compressed-tensors' float-quantized channel layout (weight float8_e4m3fn
    [E, N, K], weight_scale [E, N, 1]); the library parses the config and its decompress equals zaya's own
    dequantization of the export (zaya's f32 export of it) bit for bit, and the codes and scales are the library's
    own compression of the same weights; zaya's logits of the export equal transformers' over that decompress; and
    zaya -> export -> zaya load -> export gives the same bytes."""
    d = os.path.join(WORK, "exported-fp8")
    h.run([ZAYA, "ckpt", "export", "--in", float_dir, "--out", d, "--layout", "native", "--experts", "fp8"])
    with open(os.path.join(d, "config.json")) as f:
        qc = QuantizationConfig.model_validate(json.load(f)["quantization_config"])
    scheme = qc.config_groups["group_0"]
    wq = scheme.weights
    if (qc.format, wq.num_bits, wq.type, wq.strategy, scheme.input_activations) != (
            "float-quantized", 8, "float", "channel", None):
        h.fail(f"export fp8: the library reads the config as {qc.format}, {wq}, inputs {scheme.input_activations}")
    f32 = os.path.join(WORK, "exported-fp8-f32")
    h.run([ZAYA, "ckpt", "export", "--in", d, "--out", f32, "--layout", "native"])  # zaya's dequantization
    zaya_deq = load_file(os.path.join(f32, "model.safetensors"))
    written = load_file(os.path.join(d, "model.safetensors"))
    source = load_file(os.path.join(float_dir, "model.safetensors"))
    model = h.make_hf_model("8b", VOCAB, seed=5)
    checked = 0
    for name in [n for n in source if n.endswith("experts.gate_up_proj") or n.endswith("experts.down_proj")]:
        w, scale = written[name + ".weight"], written[name + ".weight_scale"]
        if w.dtype != torch.float8_e4m3fn or tuple(scale.shape) != (w.shape[0], w.shape[1], 1):
            h.fail(f"export fp8: {name}: weight {w.dtype} {tuple(w.shape)}, scale {tuple(scale.shape)}")
        deq = []
        for e in range(w.shape[0]):
            deq.append(FloatQuantizationCompressor.decompress({"weight": w[e], "weight_scale": scale[e]},
                                                              scheme)["weight"].float())
            lib, _ = quantize_matrix(source[name][e].float(), "fp8")
            if not torch.equal(lib["weight_scale"].float(), scale[e].float()) or not torch.equal(
                    lib["weight"].view(torch.uint8), w[e].view(torch.uint8)):
                h.fail(f"export fp8: {name}[{e}]: zaya's FP8 codes or scales differ from compressed-tensors' for the "
                       f"same weights ({int((lib['weight'].view(torch.uint8) != w[e].view(torch.uint8)).sum())} "
                       f"codes)")
        deq = torch.stack(deq)
        if not torch.equal(deq, zaya_deq[name].float()):
            h.fail(f"export fp8: {name}: compressed-tensors' decompress differs from zaya's dequantization in "
                   f"{int((deq != zaya_deq[name].float()).sum())} of {deq.numel()} values")
        checked += deq.numel()
        with torch.no_grad():
            model.get_parameter(name).copy_(deq)
    got = h.zaya_logits(ZAYA, d, seqs, WORK)
    worst = worst_diff(model, got, seqs)
    if not worst <= 1e-5:
        h.fail(f"export fp8: zaya's logits of its FP8 export differ from transformers' over compressed-tensors' "
               f"decompress of it by {worst:.3g}")
    again = os.path.join(WORK, "exported-fp8-again")
    h.run([ZAYA, "ckpt", "export", "--in", d, "--out", again, "--layout", "native", "--experts", "fp8"])
    second = load_file(os.path.join(again, "model.safetensors"))
    if sorted(second) != sorted(written) or any(
            not torch.equal(second[k].view(torch.uint8), written[k].view(torch.uint8)) for k in written):
        h.fail("export fp8: zaya's export of its own FP8 export (loaded) differs from it")
    print(f"ok: export: `zaya ckpt export --experts fp8` read back by compressed-tensors ({qc.format}, channel): its "
          f"decompress equals zaya's dequantization in all {checked} expert weights, every code and scale is the "
          f"library's own compression of the same weights, zaya's logits within {worst:.2g} of transformers', and "
          f"export -> load -> export is byte for byte the same")


def check_gguf(mxfp4_dir, float_dir, deq_by_name, model, seqs):
    """zaya ckpt export --format gguf --experts mxfp4: the stacked expert tensors as ggml's MXFP4 (type 39, what
    gguf-py and llama.cpp name it; general.file_type 38, MOSTLY_MXFP4_MOE), which gguf-py's own dequantize reads as
    exactly the values compressed-tensors' decompress gives of the safetensors export, from the MXFP4 directory and
    from the float one; zaya loads the file back to transformers' logits over those values."""
    import numpy as np
    from gguf import GGMLQuantizationType as T, GGUFReader, quants
    for src, label in ((mxfp4_dir, "the MXFP4 directory"), (float_dir, "the float directory")):
        g = os.path.join(WORK, f"experts-{os.path.basename(src)}.gguf")
        h.run([ZAYA, "ckpt", "export", "--in", src, "--out", g, "--experts", "mxfp4"])
        r = GGUFReader(g)
        tensors = {t.name: t for t in r.tensors}
        ftype = r.fields["general.file_type"]
        if ftype.parts[ftype.data[0]][0] != 38:
            h.fail(f"gguf: {g}: general.file_type is {ftype.parts[ftype.data[0]][0]}, not 38 (MOSTLY_MXFP4_MOE)")
        checked = 0
        for name, want in deq_by_name.items():
            layer = int(name.split(".")[2])
            rows = want.shape[1] // 2
            parts = ({"gate": want[:, :rows], "up": want[:, rows:]} if name.endswith("gate_up_proj")
                     else {"down": want})
            for part, w in parts.items():
                t = tensors[f"blk.{layer}.ffn_{part}_exps.weight"]
                if t.tensor_type != T.MXFP4:
                    h.fail(f"gguf: {t.name} is {t.tensor_type.name}, not MXFP4")
                got = quants.dequantize(t.data, t.tensor_type).reshape(w.shape)
                if not np.array_equal(got, w.numpy()):
                    h.fail(f"gguf ({label}): gguf-py's dequantize of {t.name} differs from compressed-tensors' "
                           f"decompress in {int((got != w.numpy()).sum())} of {got.size} values")
                checked += got.size
        others = {t.tensor_type.name for n, t in tensors.items() if "_exps" not in n}
        if others != {"F32"}:
            h.fail(f"gguf: the non-expert tensors are {others}, not F32 (--dtype f32)")
        got = h.zaya_logits(ZAYA, g, seqs, WORK)
        worst = worst_diff(model, got, seqs)
        if not worst <= 1e-5:
            h.fail(f"gguf ({label}): zaya's logits of its MXFP4 GGUF differ from transformers' by {worst:.3g}")
        print(f"ok: gguf ({label}): `ckpt export --experts mxfp4` to GGUF: {checked} expert weights as MXFP4 that "
              f"gguf-py's dequantize reads exactly as compressed-tensors' decompress of the safetensors export; "
              f"zaya loads the file back within {worst:.2g} of transformers")


def main():
    print(h.versions() + f", compressed-tensors {compressed_tensors.__version__}")
    float_dir = os.path.join(WORK, "float")
    base = h.make_hf_model("8b", VOCAB, seed=5)
    base.save_pretrained(float_dir)
    shutil.copy(TOKENIZER, os.path.join(float_dir, "tokenizer.model"))
    seqs = sequences()
    base_logits = {tuple(s): h.hf_logits(base, s)[:, :VOCAB] for s in seqs}
    layer0 = "model.layers.0.mlp.experts.gate_up_proj"
    for fmt in FORMATS:
        d = os.path.join(WORK, fmt)
        model = write_quantized(h.make_hf_model("8b", VOCAB, seed=5), float_dir, d, fmt)
        info = h.run([ZAYA, "info", "--model", d])
        want = {"mxfp4": "mxfp4 (compressed-tensors mxfp4-pack-quantized)", "fp8": "fp8 (compressed-tensors"}[fmt]
        if want not in info:
            h.fail(f"{fmt}: zaya info does not name the format: {info}")
        print(f"ok: {fmt}: zaya info: {[l for l in info.splitlines() if 'experts:' in l][0].strip()}")
        got = h.zaya_logits(ZAYA, d, seqs, WORK)
        worst = worst_diff(model, got, seqs)
        moved = max(h.max_rel_diff(z, base_logits[tuple(s)]) for s, z in zip(seqs, got))
        if not worst <= 1e-5:
            h.fail(f"{fmt}: zaya's logits differ from transformers' over the dequantized weights by {worst:.3g}")
        if not moved > 100 * max(worst, 1e-7):
            h.fail(f"{fmt}: quantization moved the logits by only {moved:.3g} (the test could not tell)")
        print(f"ok: {fmt}: zaya score's logits within {worst:.2g} relative of transformers' forward over "
              f"compressed-tensors' dequantization (the unquantized model's are {moved:.2g} away)")
        check_cached_loss(model, d, fmt, seqs)
        check_greedy(model, d, fmt)
        if fmt == "fp8":  # --dtype mxfp4-all over FP8 experts: the other matrices MXFP4, the experts kept FP8, named so
            bench = os.path.join(WORK, "bench-mxfp4-all.json")
            h.run([ZAYA, "bench", "infer", "--model", d, "--dtype", "mxfp4-all", "--no-prefill", "--no-working-set",
                   "--batch", "1", "--context", "16", "--decode-steps", "2", "--json", bench])
            named = json.load(open(bench))["weights_dtype"]
            if named != "mxfp4-all+fp8-experts+bf16":
                h.fail(f"fp8: --dtype mxfp4-all over FP8 experts is named {named!r}")
            print(f"ok: fp8: --dtype mxfp4-all keeps the checkpoint's FP8 experts and says so ({named})")
        if fmt == "mxfp4":
            d2 = os.path.join(WORK, "mxfp4-per-expert")
            write_quantized(h.make_hf_model("8b", VOCAB, seed=5), float_dir, d2, fmt, per_expert=True)
            got2 = h.zaya_logits(ZAYA, d2, seqs, WORK)
            if got2 != got:
                h.fail("mxfp4: the per-expert 2-D tensor names give other logits than the stacked ones")
            print("ok: mxfp4: per-expert 2-D tensors (experts.E.gate_up_proj.weight_packed) give the same logits")

            def nan_scale(t):
                t[layer0 + ".weight_scale"][1, 3, 1] = 255
            damage(d, os.path.join(WORK, "bad-nan"), nan_scale)
            expect_error(os.path.join(WORK, "bad-nan"), "scale byte 255", layer0 + ".weight_scale", "255", "[1, 3, 1]")
            damage(d, os.path.join(WORK, "bad-missing"), lambda t: t.pop(layer0 + ".weight_scale"))
            expect_error(os.path.join(WORK, "bad-missing"), "missing scale", layer0 + ".weight_packed", "no scale")

            def short(t):
                t[layer0 + ".weight_scale"] = t[layer0 + ".weight_scale"][:, :, :1].contiguous()
            damage(d, os.path.join(WORK, "bad-shape"), short)
            expect_error(os.path.join(WORK, "bad-shape"), "wrong shape", layer0 + ".weight_scale", "expected shape")

            def nvfp4(c):
                c["quantization_config"]["format"] = "nvfp4-pack-quantized"
                c["quantization_config"]["config_groups"]["group_0"]["format"] = "nvfp4-pack-quantized"
            damage(d, os.path.join(WORK, "bad-format"), edit_config=nvfp4)
            expect_error(os.path.join(WORK, "bad-format"), "quantization_config", "nvfp4-pack-quantized",
                         "supported: mxfp4-pack-quantized, float-quantized")
    check_export(float_dir, seqs)
    print("quant_check: all checks passed")


main()
