"""
Fixtures and checks for dev/test/test_openai_weights.sh (run with /usr/bin/python3: numpy + torch).

No network here, so no real OpenAI file: `write` makes a synthetic model.safetensors in the
layout of Hugging Face's GPT-2 exports (GPT2Model names, Conv1D weights stored (in, out), the
attention buffers h.N.attn.bias / masked_bias, a __metadata__ entry, the JSON header padded with
spaces to 8 bytes), with random weights scaled so attention, GELU and the head all do something.
The reference forward here reads that file with its own small reader and runs GPT-2 the way
Hugging Face's GPT2Model does (Conv1D: x @ W + b with W as stored), in float64. It shares no
code with dev/data/gpt2_from_safetensors.py (the converter under test) or with train_gpt2.c.

    write OUT [--L --C --NH --V --maxT --seed --dtype F32|F16|BF16|F64 --prefix transformer.
               --drop NAME --transpose NAME --extra NAME --lm-head same|diff --nan NAME --no-buffers
               --alias NAME=OTHER --gap BYTES --trailing BYTES]
    logits SRC LOGITS.f32 B T tokens...      C logits vs the HF-layout reference
    torchref SRC CONVERTED.bin B T tokens... train_gpt2.py's GPT loaded from our file vs the same reference
    file SRC CONVERTED.bin [BF16.bin]        header, tensors bit for bit, padded rows, bf16 rounding
    configs                                  the converter's derive_config on the 4 GPT-2 sizes' shapes
Each check prints "ok ..." or "FAIL ..." lines; the exit status is 1 if any failed.
"""
import importlib.util
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

ST_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64}
failures = 0


def report(cond, what):
    global failures
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures += 1


# ---------------------------------------------------------------------------------------------
# writing a synthetic HF-layout file

def hf_tensors(L, C, V, maxT, seed):
    """GPT2Model's tensors, Conv1D weights (in, out), fp32, random."""
    g = np.random.default_rng(seed)
    n = lambda std, *shape: (g.standard_normal(shape) * std).astype(np.float32)
    t = {"wte.weight": n(0.1, V, C), "wpe.weight": n(0.1, maxT, C),
         "ln_f.weight": 1 + n(0.1, C), "ln_f.bias": n(0.05, C)}
    for l in range(L):
        p = f"h.{l}."
        t[p + "ln_1.weight"], t[p + "ln_1.bias"] = 1 + n(0.1, C), n(0.05, C)
        t[p + "attn.c_attn.weight"], t[p + "attn.c_attn.bias"] = n(0.1, C, 3 * C), n(0.05, 3 * C)
        t[p + "attn.c_proj.weight"], t[p + "attn.c_proj.bias"] = n(0.1, C, C), n(0.05, C)
        t[p + "ln_2.weight"], t[p + "ln_2.bias"] = 1 + n(0.1, C), n(0.05, C)
        t[p + "mlp.c_fc.weight"], t[p + "mlp.c_fc.bias"] = n(0.1, C, 4 * C), n(0.05, 4 * C)
        t[p + "mlp.c_proj.weight"], t[p + "mlp.c_proj.bias"] = n(0.05, 4 * C, C), n(0.05, C)
    return t


def encode(a, dtype):
    """(safetensors dtype, raw little-endian bytes) of array a stored as dtype."""
    if dtype == "BF16":  # torch's own rounding, not the converter's
        bits = torch.from_numpy(np.ascontiguousarray(a, np.float32)).to(torch.bfloat16).view(torch.int16)
        return "BF16", bits.numpy().astype("<i2").tobytes()
    if dtype == "BOOL":
        return "BOOL", np.ascontiguousarray(a, np.uint8).tobytes()
    return dtype, np.ascontiguousarray(a, np.dtype(ST_DTYPES[dtype]).newbyteorder("<")).tobytes()


def write_safetensors(path, items, metadata=None, alias=None, gap=0, trailing=0):
    """items: list of (name, safetensors dtype, shape, raw bytes), written in that order.
    Corrupt layouts for the bad-input tests: alias {NAME: OTHER} gives NAME the data_offsets of
    OTHER (an overlap; NAME's own bytes stay in the file, unnamed); gap puts that many unnamed
    bytes after the first tensor (a hole); trailing appends that many after the last one."""
    header, offset, spans = {}, 0, {}
    if metadata is not None:
        header["__metadata__"] = metadata
    for i, (name, dtype, shape, raw) in enumerate(items):
        spans[name] = [offset, offset + len(raw)]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": spans[name]}
        offset += len(raw) + (gap if i == 0 else 0)
    for name, other in (alias or {}).items():
        header[name]["data_offsets"] = spans[other]
    js = json.dumps(header).encode("utf-8")
    js += b" " * (-len(js) % 8)  # safetensors pads the header with spaces to 8 bytes
    with open(path, "wb") as f:
        f.write(len(js).to_bytes(8, "little"))
        f.write(js)
        for i, (_, _, _, raw) in enumerate(items):
            f.write(raw)
            if i == 0:
                f.write(b"\0" * gap)
        f.write(b"\0" * trailing)


def cmd_write(args):
    import argparse
    ap = argparse.ArgumentParser(prog="write")
    ap.add_argument("out")
    ap.add_argument("--L", type=int, default=2)
    ap.add_argument("--C", type=int, default=64)
    ap.add_argument("--V", type=int, default=50257)
    ap.add_argument("--maxT", type=int, default=32)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dtype", default="F32")
    ap.add_argument("--prefix", default="")
    ap.add_argument("--drop", action="append", default=[])
    ap.add_argument("--transpose", action="append", default=[])
    ap.add_argument("--extra", action="append", default=[])
    ap.add_argument("--lm-head", choices=["same", "diff"])
    ap.add_argument("--nan")
    ap.add_argument("--no-buffers", action="store_true")
    ap.add_argument("--alias", action="append", default=[], help="NAME=OTHER: NAME's data_offsets are OTHER's")
    ap.add_argument("--gap", type=int, default=0)
    ap.add_argument("--trailing", type=int, default=0)
    a = ap.parse_args(args)
    t = hf_tensors(a.L, a.C, a.V, a.maxT, a.seed)
    if a.nan:
        t[a.nan].flat[3] = np.nan
    items = []
    # the order of HF's files: sorted by name (h.0.attn.bias, h.0.attn.c_attn.bias, ...)
    names = sorted(t)
    for name in names:
        if name in a.drop:
            continue
        arr = t[name].T.copy() if name in a.transpose else t[name]
        dt, raw = encode(arr, a.dtype)
        items.append((a.prefix + name, dt, arr.shape, raw))
    if not a.no_buffers:
        # the causal-mask buffers of older exports (ignored by the converter): a bool/float mask
        # of (1, 1, maxT, maxT) and a scalar
        for l in range(a.L):
            mask = np.tril(np.ones((1, 1, a.maxT, a.maxT), np.uint8))
            items.append((f"{a.prefix}h.{l}.attn.bias", "BOOL", mask.shape, mask.tobytes()))
            dt, raw = encode(np.array(-1e4, np.float32), "F32")
            items.append((f"{a.prefix}h.{l}.attn.masked_bias", dt, (), raw))
    for name in a.extra:
        items.append((name, "F32", (a.C,), np.zeros(a.C, "<f4").tobytes()))
    if a.lm_head:
        head = t["wte.weight"] if a.lm_head == "same" else t["wte.weight"] + 1
        dt, raw = encode(head, a.dtype)
        items.append(("lm_head.weight", dt, head.shape, raw))
    alias = dict(x.split("=", 1) for x in a.alias)
    write_safetensors(a.out, items, {"format": "pt"}, alias, a.gap, a.trailing)


# ---------------------------------------------------------------------------------------------
# the reference: read the file and run GPT-2 in Hugging Face's layout

def read_safetensors(path):
    """name -> float64 torch tensor (F32, F16, BF16 widened), a minimal reader of our own."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] not in ("F32", "F16", "BF16"):
            continue
        b, e = info["data_offsets"]
        raw = data[b:e]
        if info["dtype"] == "BF16":
            a = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            a = np.frombuffer(raw, "<f4" if info["dtype"] == "F32" else "<f2")
        key = name[len("transformer."):] if name.startswith("transformer.") else name
        out[key] = torch.from_numpy(a.astype(np.float64).reshape(info["shape"]))
    return out


def hf_forward(w, idx, NH):
    """GPT2Model + tied head, as Hugging Face computes it (eval, no dropout), float64."""
    B, T = idx.shape
    C = w["wte.weight"].shape[1]
    hs = C // NH
    ln = lambda x, p: F.layer_norm(x, (C,), w[p + ".weight"], w[p + ".bias"], 1e-5)
    conv1d = lambda x, p: torch.addmm(w[p + ".bias"], x.reshape(-1, x.shape[-1]), w[p + ".weight"]).view(*x.shape[:-1], -1)
    gelu_new = lambda x: 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
    x = w["wte.weight"][idx] + w["wpe.weight"][torch.arange(T)]
    L = 1 + max(int(k.split(".")[1]) for k in w if k.startswith("h."))
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(L):
        p = f"h.{l}."
        q, k, v = conv1d(ln(x, p + "ln_1"), p + "attn.c_attn").split(C, dim=2)
        q, k, v = (t.view(B, T, NH, hs).permute(0, 2, 1, 3) for t in (q, k, v))
        att = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hs)
        att = torch.where(causal, att, torch.tensor(torch.finfo(att.dtype).min, dtype=att.dtype)).softmax(-1)
        y = torch.matmul(att, v).permute(0, 2, 1, 3).reshape(B, T, C)
        x = x + conv1d(y, p + "attn.c_proj")
        x = x + conv1d(gelu_new(conv1d(ln(x, p + "ln_2"), p + "mlp.c_fc")), p + "mlp.c_proj")
    return ln(x, "ln_f") @ w["wte.weight"].T


def batch(args):
    B, T = int(args[0]), int(args[1])
    toks = [int(t) for t in args[2:]]
    assert len(toks) == B * T, "need B*T tokens"
    return B, T, torch.tensor(toks).view(B, T)


# Per-logit tolerance, relative: |got - ref| <= 1e-4 * (|ref| + rms(ref)). The reference is
# float64; ours sums in fp32 (~1e-7 relative per operation, over C = 64..256 terms, through 2
# layers and a softmax), measured at a few 1e-7 of rms. The rms term keeps logits near zero from
# demanding more than fp32 can give. A missing transpose or a wrong tensor is off by O(1) rms.
RTOL = 1e-4


def compare(name, got, ref):
    ref = ref.double()
    rms = ref.pow(2).mean().sqrt().item()
    err = (got.double() - ref).abs()
    bound = RTOL * (ref.abs() + rms)
    worst = (err / (ref.abs() + rms)).max().item()
    report(bool((err <= bound).all()) and rms > 0.1,
           f"{name}: {got.numel()} logits within {RTOL:g} relative of the HF-layout reference "
           f"(worst {worst:.2e}, rms of logits {rms:.3f})")


def cmd_logits(args):
    src, path = args[0], args[1]
    B, T, idx = batch(args[2:])
    w = read_safetensors(src)
    V = w["wte.weight"].shape[0]
    NH = int(os.environ.get("NH", "4"))
    ref = hf_forward(w, idx, NH).view(B * T, V)
    got = torch.from_numpy(np.fromfile(path, "<f4")).view(B * T, V)
    compare("train_gpt2.c forward on the converted file", got, ref)


def cmd_torchref(args):
    """Our own PyTorch reference (train_gpt2.py's GPT, (out, in) weights) loaded from the
    converted file must agree with the HF-layout forward on the source."""
    src, conv = args[0], args[1]
    B, T, idx = batch(args[2:])
    sys.path.insert(0, ROOT)
    import train_gpt2 as ref_model
    hdr = np.fromfile(conv, "<i4", count=256)
    maxT, V, L, NH, C, Vp = (int(x) for x in hdr[2:8])
    offset = 256 * 4
    stacked = {}
    with open(conv, "rb") as f:
        f.seek(offset)
        for name in ref_model.PARAM_NAMES:
            shape = {"wte": (Vp, C), "wpe": (maxT, C), "lnfw": (C,), "lnfb": (C,)}.get(name)
            if shape is None:
                shape = (L,) + tuple(getattr(ref_model.Block(C), name).shape)
            stacked[name] = torch.from_numpy(np.fromfile(f, "<f4", count=math.prod(shape)).reshape(shape).copy())
    m = ref_model.GPT(L, NH, C, maxT, V)
    with torch.no_grad():
        m.wte.copy_(stacked["wte"][:V])
        m.wpe.copy_(stacked["wpe"])
        m.lnfw.copy_(stacked["lnfw"])
        m.lnfb.copy_(stacked["lnfb"])
        for l, b in enumerate(m.blocks):
            for name in ref_model.BLOCK_PARAM_NAMES:
                getattr(b, name).copy_(stacked[name][l])
        logits, _ = m(idx, torch.zeros_like(idx))
    w = read_safetensors(src)
    compare("train_gpt2.py's GPT on the converted file", logits.view(B * T, V), hf_forward(w, idx, NH).view(B * T, V))


def cmd_file(args):
    """The converted file against the source tensors, bit for bit."""
    src, conv = args[0], args[1]
    bf16 = args[2] if len(args) > 2 else None
    w = read_safetensors(src)
    V, C = w["wte.weight"].shape
    maxT = w["wpe.weight"].shape[0]
    L = 1 + max(int(k.split(".")[1]) for k in w if k.startswith("h."))
    Vp = (V + 127) // 128 * 128
    NH = int(os.environ.get("NH", "4"))
    hdr = np.fromfile(conv, "<i4", count=256)
    report(list(hdr[:8]) == [20240326, 3, maxT, V, L, NH, C, Vp] and not hdr[8:].any(),
           f"header: magic, version 3, maxT {maxT}, V {V}, L {L}, NH {NH}, C {C}, Vp {Vp}, rest 0 (got {list(hdr[:8])})")
    # our order, with each HF tensor as our file holds it: Conv1D weights transposed to (out, in)
    order = [("wte.weight", 0, 0), ("wpe.weight", 0, 0)]
    for suffix, conv1d in [("ln_1.weight", 0), ("ln_1.bias", 0), ("attn.c_attn.weight", 1), ("attn.c_attn.bias", 0),
                           ("attn.c_proj.weight", 1), ("attn.c_proj.bias", 0), ("ln_2.weight", 0), ("ln_2.bias", 0),
                           ("mlp.c_fc.weight", 1), ("mlp.c_fc.bias", 0), ("mlp.c_proj.weight", 1), ("mlp.c_proj.bias", 0)]:
        order.append((suffix, 1, conv1d))
    order += [("ln_f.weight", 0, 0), ("ln_f.bias", 0, 0)]
    parts = []
    for name, per_layer, conv1d in order:
        for l in (range(L) if per_layer else [None]):
            t = w[f"h.{l}.{name}" if per_layer else name]
            t = t.T if conv1d else t
            if name == "wte.weight":
                t = torch.cat([t, torch.zeros(Vp - V, C, dtype=t.dtype)])
            parts.append(t.contiguous().view(-1))
    want = torch.cat(parts).float().numpy()  # the sources are exact in fp32
    data = np.fromfile(conv, "<f4", offset=256 * 4)
    report(data.size == want.size and np.array_equal(data.view(np.uint32), want.view(np.uint32)),
           f"the {want.size} fp32 values are the source's, bit for bit, in our order with (out, in) weights")
    wte = data[:Vp * C].reshape(Vp, C)
    report(not wte[V:].any(), f"wte rows {V}..{Vp - 1} are zero")
    if bf16:
        hdr5 = np.fromfile(bf16, "<i4", count=256)
        bits = np.fromfile(bf16, "<u2", offset=256 * 4)
        ref_bits = torch.from_numpy(data).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
        report(hdr5[1] == 5 and list(hdr5[2:8]) == list(hdr[2:8]) and np.array_equal(bits, ref_bits),
               "the bf16 file: version 5, same config, torch's round-to-nearest-even of every fp32 value")


def cmd_configs(_args):
    """The converter's derive_config on shape dictionaries of OpenAI's four sizes (no data)."""
    spec = importlib.util.spec_from_file_location("conv", os.path.join(ROOT, "dev/data/gpt2_from_safetensors.py"))
    conv = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conv)
    sizes = {"124M": (12, 12, 768), "355M": (24, 16, 1024), "774M": (36, 20, 1280), "1558M": (48, 25, 1600)}
    # parameters of GPT2Model as Hugging Face counts them (wte unpadded)
    hf_params = {"124M": 124439808, "355M": 354823168, "774M": 774030080, "1558M": 1557611200}
    for size, (L, NH, C) in sizes.items():
        shapes = conv.expected_shapes(L, C, 50257, 1024)
        cfg = conv.derive_config(shapes)
        n = sum(math.prod(s) for s in shapes.values())
        report(cfg == {"maxT": 1024, "V": 50257, "L": L, "NH": NH, "C": C, "Vp": 50304} and n == hf_params[size],
               f"{size}: L {cfg['L']}, NH {cfg['NH']}, C {cfg['C']}, maxT {cfg['maxT']}, V {cfg['V']}, Vp {cfg['Vp']}; "
               f"{n} parameters as Hugging Face counts them")
        # with the prefix stripped the same way the converter does
        pref = {conv.strip_prefix("transformer." + k): v for k, v in shapes.items()}
        report(conv.derive_config(pref) == cfg, f"{size}: the same through the 'transformer.' prefix")
    # 124M's config gives the header our own d12 reference file has (same shapes, maxT 1024)
    ref = os.path.join(ROOT, "gpt2_124M.bin")
    if os.path.exists(ref):
        cfg = conv.derive_config(conv.expected_shapes(12, 768, 50257, 1024))
        hdr = np.fromfile(ref, "<i4", count=256)
        report(list(conv.header_ints(3, cfg)) == list(hdr), "124M's header equals gpt2_124M.bin's (train_gpt2.py's d12)")
    shapes = conv.expected_shapes(2, 96, 50257, 64)
    try:
        conv.derive_config(shapes)
        report(False, "C 96 without --heads: refused")
    except conv.ConvertError as e:
        report("--heads" in str(e), f"C 96 without --heads: refused ({e})")
    report(conv.derive_config(shapes, heads=6)["NH"] == 6, "C 96 with --heads 6: NH 6")
    report(conv.derive_config(shapes, hf_config={"n_head": 3})["NH"] == 3, "C 96 with config.json n_head 3: NH 3")
    report(conv.derive_config(conv.expected_shapes(12, 768, 50257, 1024), heads=8)["NH"] == 8, "--heads overrides the table")
    try:
        conv.derive_config(conv.expected_shapes(12, 768, 50257, 1024), hf_config={"n_layer": 24})
        report(False, "config.json n_layer 24 against 12 blocks: refused")
    except conv.ConvertError as e:
        report("n_layer" in str(e), f"config.json n_layer 24 against 12 blocks: refused ({e})")
    try:
        conv.derive_config(conv.expected_shapes(2, 768, 50257, 1024), heads=7)
        report(False, "7 heads for C 768: refused")
    except conv.ConvertError as e:
        report("divide" in str(e), f"7 heads for C 768: refused ({e})")


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    {"write": cmd_write, "logits": cmd_logits, "torchref": cmd_torchref, "file": cmd_file,
     "configs": cmd_configs}[cmd](args)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
