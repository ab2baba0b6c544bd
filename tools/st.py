"""Tiny pure-Python safetensors reader/writer (no `safetensors` package needed).

File layout (https://github.com/huggingface/safetensors, format section):
  8 bytes   little-endian u64 N = length of the JSON header
  N bytes   UTF-8 JSON: {"__metadata__": {str: str}, name: {"dtype", "shape", "data_offsets": [begin, end]}}
            (offsets are relative to the start of the data buffer; we pad the header with spaces
            to a multiple of 8 bytes, as the reference writer does)
  rest      the data buffer, tensors row-major little-endian, no gaps.

Tensors are returned as torch tensors (owning copies). Supported dtypes:
F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL.

    from st import load, save, read_header
    tensors, metadata = load("model.safetensors")
    save("out.safetensors", {"w": torch.zeros(3, 4)}, metadata={"seed": "1"})
"""

import json
import struct
import sys

import torch

if sys.byteorder != "little":  # the format is little-endian; we map bytes directly
    raise RuntimeError("st.py assumes a little-endian host")

_DT = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}
_TD = {v: k for k, v in _DT.items()}


def _itemsize(dt):
    return torch.empty((), dtype=dt).element_size()


def read_header(path):
    """Return (header dict without __metadata__, metadata dict, data start offset)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        if n > 100 * 1024 * 1024:
            raise ValueError(f"{path}: implausible header length {n}")
        hdr = json.loads(f.read(n).decode("utf-8"))
    meta = hdr.pop("__metadata__", None) or {}
    return hdr, meta, 8 + n


def load(path, names=None):
    """Load tensors (all, or only `names`). Returns (dict name -> tensor, metadata)."""
    hdr, meta, start = read_header(path)
    out = {}
    with open(path, "rb") as f:
        for name, info in hdr.items():
            if names is not None and name not in names:
                continue
            dt = _DT.get(info["dtype"])
            if dt is None:
                raise ValueError(f"{path}: tensor {name}: unsupported dtype {info['dtype']}")
            shape = [int(s) for s in info["shape"]]
            b, e = info["data_offsets"]
            numel = 1
            for s in shape:
                numel *= s
            if e - b != numel * _itemsize(dt):
                raise ValueError(f"{path}: tensor {name}: {e - b} bytes for shape {shape} {info['dtype']}")
            f.seek(start + b)
            buf = bytearray(f.read(e - b))
            if numel == 0:
                t = torch.empty(shape, dtype=dt)
            else:
                t = torch.frombuffer(buf, dtype=dt).reshape(shape).clone()
            out[name] = t
    return out, meta


def _tensor_bytes(t):
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)  # numpy has no bf16; same size reinterpretation
    elif t.dtype == torch.float16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def save(path, tensors, metadata=None):
    """Write a dict name -> torch tensor. Tensors are written in sorted name order."""
    hdr = {}
    if metadata:
        hdr["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    chunks = []
    off = 0
    for name in sorted(tensors):
        t = tensors[name]
        if not isinstance(t, torch.Tensor):
            t = torch.as_tensor(t)
        if t.dtype not in _TD:
            raise ValueError(f"tensor {name}: unsupported dtype {t.dtype}")
        data = _tensor_bytes(t)
        hdr[name] = {"dtype": _TD[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(data)]}
        chunks.append(data)
        off += len(data)
    h = json.dumps(hdr, separators=(",", ":")).encode("utf-8")
    h += b" " * ((-len(h)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for c in chunks:
            f.write(c)


if __name__ == "__main__":  # tiny inspector: python3 tools/st.py FILE
    hdr, meta, _ = read_header(sys.argv[1])
    for k, v in meta.items():
        print(f"__metadata__.{k} = {v}")
    for name, info in hdr.items():
        print(f"{name}\t{info['dtype']}\t{info['shape']}")
