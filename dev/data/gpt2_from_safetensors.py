"""
OpenAI's GPT-2 weights (Hugging Face's model.safetensors) -> our model files (llm.c's format).

    /usr/bin/python3 dev/data/gpt2_from_safetensors.py --in model.safetensors --out gpt2_124M_openai.bin
    /usr/bin/python3 dev/data/gpt2_from_safetensors.py --in DIR --out gpt2_124M_openai.bin \
        --bf16-out gpt2_124M_openai_bf16.bin

Needs only numpy and the standard library; it never uses the network (see --download).

--in is one of:
  - a model.safetensors file;
  - a directory holding model.safetensors (and maybe config.json);
  - a Hugging Face cache folder (~/.cache/huggingface/hub/models--gpt2, or one of its
    snapshots/<hash>/ folders): the snapshot refs/main names, or the only snapshot there is.
Sharded checkpoints (model.safetensors.index.json, several files) are not supported: refused.

What it reads. safetensors: an 8-byte little-endian header length N, N bytes of JSON
{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then the tensors'
little-endian bytes (offsets count from the end of the JSON; the tensors' ranges must tile the
data region exactly: no overlap, no hole, nothing after the last one). The tensors of GPT2Model,
with or without the "transformer." prefix of GPT2LMHeadModel's exports:
  wte.weight (V, C), wpe.weight (maxT, C), ln_f.weight/bias (C), and per layer N
  h.N.ln_1.weight/bias, h.N.attn.c_attn.weight (C, 3C)/bias, h.N.attn.c_proj.weight (C, C)/bias,
  h.N.ln_2.weight/bias, h.N.mlp.c_fc.weight (C, 4C)/bias, h.N.mlp.c_proj.weight (4C, C)/bias.
GPT-2's Conv1D stores its weights (in, out); our files hold (out, in), so the four weight matrices
are transposed. Ignored: the attention buffers h.N.attn.bias and h.N.attn.masked_bias (the
causal mask; any dtype), and lm_head.weight when it equals wte.weight (GPT-2 ties them; an
lm_head that differs is refused: our model has no separate head). Any other tensor is refused,
so a model that is not GPT-2 is never converted by silently dropping weights.

Dtypes accepted: F32 (copied bit for bit), F16 and BF16 (widened to fp32, which is exact).
Anything else (F64, integers, F8) is refused. Non-finite values are refused.

The config: V and C from wte, maxT from wpe, L from the h.N indices (0..L-1, all present), and NH
from --heads, else config.json's n_head next to the file, else GPT-2's table by C (768: 12,
1024: 16, 1280: 20, 1600: 25). config.json's n_layer, n_embd, n_positions and vocab_size, where
present, must agree with the shapes. Every tensor's shape is checked against the config.

What it writes (the header and order of train_gpt2.py and llmc/model_file.h): 256 int32
(magic 20240326, version 3, maxT, V, L, NH, C, Vp), then the 16 tensors tensor-major (wte, wpe,
ln1w, ln1b, qkvw, qkvb, attprojw, attprojb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb, lnfw, lnfb;
block tensors stacked over the L layers), fp32. wte is padded to Vp = V rounded up to a multiple
of 128 rows (50257 -> 50304) with zero rows, as our files have. --bf16-out also writes the
version-5 file: the same tensors rounded to bf16, to nearest even (what torch's .to(bfloat16)
does). Each file goes to a temporary name first and is renamed at the end: an error leaves no
output behind.

Errors are one line, "error: FILE: what", exit status 1.
"""
import argparse
import json
import math
import os
import sys

import numpy as np

MODEL_MAGIC, MODEL_VERSION_FP32, MODEL_VERSION_BF16 = 20240326, 3, 5
HEADER_INTS = 256

# n_head of OpenAI's four GPT-2 sizes, by n_embd (every one has head size 64)
HEADS_BY_CHANNELS = {768: 12, 1024: 16, 1280: 20, 1600: 25}
# --download: the Hugging Face repositories of the four sizes
HF_REPOS = {"124M": "gpt2", "355M": "gpt2-medium", "774M": "gpt2-large", "1558M": "gpt2-xl"}

DTYPES = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype("<u2")}
# itemsizes of the dtypes we skip or refuse, so their byte ranges can still be checked
OTHER_ITEMSIZE = {"F64": 8, "I64": 8, "U64": 8, "I32": 4, "U32": 4, "I16": 2, "U16": 2,
                  "I8": 1, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}
MAX_HEADER = 100 << 20  # safetensors' own limit for the JSON header

BLOCK_SUFFIXES = [  # per layer, the HF name after "h.N."
    "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
    "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
    "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias",
]
IGNORED_BLOCK_SUFFIXES = ("attn.bias", "attn.masked_bias")

# Our 16 file tensors in order: (HF name, or block suffix), whether it is per layer, and whether
# it is a Conv1D weight stored (in, out) that we store (out, in).
FILE_TENSORS = [
    ("wte.weight", False, False), ("wpe.weight", False, False),
    ("ln_1.weight", True, False), ("ln_1.bias", True, False),
    ("attn.c_attn.weight", True, True), ("attn.c_attn.bias", True, False),
    ("attn.c_proj.weight", True, True), ("attn.c_proj.bias", True, False),
    ("ln_2.weight", True, False), ("ln_2.bias", True, False),
    ("mlp.c_fc.weight", True, True), ("mlp.c_fc.bias", True, False),
    ("mlp.c_proj.weight", True, True), ("mlp.c_proj.bias", True, False),
    ("ln_f.weight", False, False), ("ln_f.bias", False, False),
]


class ConvertError(Exception):
    """One line: what is wrong with which file."""
    def __init__(self, path, msg):
        super().__init__(f"{path}: {msg}")


def padded_vocab(V):
    return (V + 127) // 128 * 128


def expected_shapes(L, C, V, maxT):
    """HF name (no prefix) -> shape, for every tensor we convert."""
    s = {"wte.weight": (V, C), "wpe.weight": (maxT, C), "ln_f.weight": (C,), "ln_f.bias": (C,)}
    per_layer = {
        "ln_1.weight": (C,), "ln_1.bias": (C,),
        "attn.c_attn.weight": (C, 3 * C), "attn.c_attn.bias": (3 * C,),   # Conv1D: (in, out)
        "attn.c_proj.weight": (C, C), "attn.c_proj.bias": (C,),
        "ln_2.weight": (C,), "ln_2.bias": (C,),
        "mlp.c_fc.weight": (C, 4 * C), "mlp.c_fc.bias": (4 * C,),
        "mlp.c_proj.weight": (4 * C, C), "mlp.c_proj.bias": (C,),
    }
    for l in range(L):
        for k, v in per_layer.items():
            s[f"h.{l}.{k}"] = v
    return s


def strip_prefix(name):
    return name[len("transformer."):] if name.startswith("transformer.") else name


def derive_config(shapes, heads=None, hf_config=None, path="model.safetensors"):
    """The config from the tensor shapes (names without the "transformer." prefix -> shape
    tuples; no data needed). heads: --heads; hf_config: config.json as a dict, or None.
    Returns dict(maxT, V, L, NH, C, Vp). Checks every converted tensor's shape."""
    for name in ("wte.weight", "wpe.weight"):
        if name not in shapes:
            raise ConvertError(path, f"missing tensor '{name}'")
        if len(shapes[name]) != 2:
            raise ConvertError(path, f"tensor '{name}' has shape {list(shapes[name])}, expected 2 dimensions")
    V, C = (int(d) for d in shapes["wte.weight"])
    maxT = int(shapes["wpe.weight"][0])
    layers = set()
    for name in shapes:
        parts = name.split(".")
        if parts[0] == "h" and len(parts) > 2 and parts[1].isdigit():
            layers.add(int(parts[1]))
    L = max(layers) + 1 if layers else 0
    if L == 0:
        raise ConvertError(path, "no transformer blocks: missing tensor 'h.0.ln_1.weight'")
    hf = hf_config or {}
    for key, ours in (("n_layer", L), ("n_embd", C), ("n_positions", maxT), ("vocab_size", V)):
        if key in hf and int(hf[key]) != ours:
            raise ConvertError(path, f"config.json says {key} {hf[key]}, the tensors say {ours}")
    if heads is not None:
        NH = int(heads)
    elif "n_head" in hf:
        NH = int(hf["n_head"])
    elif C in HEADS_BY_CHANNELS:
        NH = HEADS_BY_CHANNELS[C]
    else:
        raise ConvertError(path, f"C {C} is not one of GPT-2's sizes {sorted(HEADS_BY_CHANNELS)}: give the head count with --heads")
    if NH <= 0 or C % NH != 0:
        raise ConvertError(path, f"{NH} heads do not divide C {C}")
    # the limits llmc/gpt2_layout.h's config_from_header accepts
    if not (0 < maxT <= 1 << 20 and 0 < V <= 1 << 20 and 0 < L <= 1024 and 0 < C <= 1 << 16):
        raise ConvertError(path, f"config out of range for our files: maxT {maxT}, V {V}, L {L}, C {C}")
    for name, shape in expected_shapes(L, C, V, maxT).items():
        if name not in shapes:
            raise ConvertError(path, f"missing tensor '{name}'")
        if tuple(shapes[name]) != shape:
            raise ConvertError(path, f"tensor '{name}' has shape {list(shapes[name])}, expected {list(shape)} "
                                     f"for L {L}, C {C}, V {V}, maxT {maxT}")
    return {"maxT": maxT, "V": V, "L": L, "NH": NH, "C": C, "Vp": padded_vocab(V)}


def read_safetensors_header(path):
    """(entries, data_start): entries maps each tensor name (as in the file) to (dtype, shape,
    begin, end) with absolute byte offsets, all checked against the file's size."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise ConvertError(path, f"not a safetensors file: {size} bytes, too short for the 8-byte header length")
            n = int.from_bytes(head, "little")
            if n < 2 or n > MAX_HEADER or n > size - 8:
                hint = " (a zip: PyTorch's .bin? use model.safetensors)" if head[:2] == b"PK" else ""
                raise ConvertError(path, f"not a safetensors file: header length {n} does not fit its {size} bytes{hint}")
            raw = f.read(n)
    except OSError as e:
        raise ConvertError(path, f"cannot read: {e.strerror or e}")
    if raw[:1] != b"{":
        raise ConvertError(path, "not a safetensors file: the header is not a JSON object")
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ConvertError(path, f"not a safetensors file: its JSON header does not parse ({e})")
    if not isinstance(header, dict):
        raise ConvertError(path, "not a safetensors file: the header is not a JSON object")
    data_start = 8 + n
    entries = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (begin, end) = info["dtype"], [int(d) for d in info["shape"]], info["data_offsets"]
            begin, end = int(begin), int(end)
        except (KeyError, TypeError, ValueError):
            raise ConvertError(path, f"not a safetensors file: bad header entry for '{name}'")
        itemsize = DTYPES[dtype].itemsize if dtype in DTYPES else OTHER_ITEMSIZE.get(dtype)
        if itemsize is not None and (end - begin) != math.prod(shape) * itemsize:
            raise ConvertError(path, f"tensor '{name}' spans {end - begin} bytes, its shape {shape} of {dtype} needs "
                                     f"{math.prod(shape) * itemsize}: corrupt header")
        if begin < 0 or end < begin:
            raise ConvertError(path, f"tensor '{name}' has bad data_offsets [{begin}, {end}]: corrupt header")
        if data_start + end > size:
            raise ConvertError(path, f"truncated: {size} bytes, tensor '{name}' ends at byte {data_start + end}")
        entries[name] = (dtype, tuple(shape), data_start + begin, data_start + end)
    check_coverage(path, entries, data_start, size)
    return entries, data_start


def check_coverage(path, entries, data_start, size):
    """The format's rule: the tensors' byte ranges tile the data region exactly. Sorted by start,
    each begins where the previous one ended, the first at 0 and the last at the end of the file.
    An overlap would convert silently into a wrong model (two tensors reading the same bytes); a
    hole or trailing bytes mean the header and the data disagree. Offsets in the messages count
    from the end of the JSON, as data_offsets do."""
    spans = sorted((b - data_start, e - data_start, name) for name, (_, _, b, e) in entries.items())
    # overlaps first: they name the two tensors that share bytes (an aliased tensor also leaves
    # a hole where its own bytes were, which says less)
    for (_, prev_end, prev_name), (begin, end, name) in zip(spans, spans[1:]):
        if begin < prev_end:
            raise ConvertError(path, f"tensors '{prev_name}' and '{name}' overlap: '{name}' has data_offsets "
                                     f"[{begin}, {end}], '{prev_name}' ends at {prev_end}: corrupt header")
    prev_end, prev_name = 0, None
    for begin, end, name in spans:
        if begin > prev_end:
            where = f"between '{prev_name}' and '{name}'" if prev_name else f"before the first tensor '{name}'"
            raise ConvertError(path, f"bytes [{prev_end}, {begin}) of the data belong to no tensor ({where}): corrupt header")
        prev_end, prev_name = end, name
    if data_start + prev_end != size:
        after = f"after the last tensor '{prev_name}'" if prev_name else "and no tensor in the header"
        raise ConvertError(path, f"bytes [{prev_end}, {size - data_start}) of the data belong to no tensor ({after}): "
                                 f"corrupt header or a file with extra bytes")


def resolve_input(src):
    """--in -> (the safetensors file, config.json beside it or None)."""
    if os.path.isdir(src):
        candidates = [os.path.join(src, "model.safetensors")]
        snapshots = os.path.join(src, "snapshots")
        if os.path.isdir(snapshots):  # a Hugging Face cache folder, models--gpt2
            ref = os.path.join(src, "refs", "main")
            if os.path.isfile(ref):
                with open(ref) as f:
                    candidates.append(os.path.join(snapshots, f.read().strip(), "model.safetensors"))
            else:
                found = sorted(os.path.join(snapshots, d, "model.safetensors") for d in os.listdir(snapshots)
                               if os.path.isfile(os.path.join(snapshots, d, "model.safetensors")))
                if len(found) > 1:
                    raise ConvertError(src, f"{len(found)} snapshots hold a model.safetensors and no refs/main says which: pass one")
                candidates += found
        path = next((c for c in candidates if os.path.isfile(c)), None)
        if path is None:
            if os.path.isfile(os.path.join(src, "model.safetensors.index.json")):
                raise ConvertError(src, "holds a sharded checkpoint (model.safetensors.index.json): not supported, give one model.safetensors")
            raise ConvertError(src, "no model.safetensors in this directory (nor in a Hugging Face cache snapshot under it)")
    elif os.path.isfile(src):
        path = src
    else:
        raise ConvertError(src, "no such file or directory")
    cfg = os.path.join(os.path.dirname(path), "config.json")
    return path, (cfg if os.path.isfile(cfg) else None)


def read_hf_config(cfg_path):
    try:
        with open(cfg_path, "rb") as f:
            cfg = json.loads(f.read().decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ConvertError(cfg_path, f"cannot read config.json: {e}")
    if not isinstance(cfg, dict):
        raise ConvertError(cfg_path, "config.json is not a JSON object")
    return cfg


def to_f32(mm, entry):
    """A tensor's values as an fp32 array (F16 and BF16 widened exactly)."""
    dtype, shape, begin, end = entry
    raw = mm[begin:end]
    if dtype == "F32":
        a = raw.view(DTYPES["F32"])
    elif dtype == "F16":
        a = raw.view(DTYPES["F16"]).astype(np.float32)
    else:  # BF16: its bits are the top half of the fp32 bits
        a = (raw.view(DTYPES["BF16"]).astype(np.uint32) << 16).view(np.float32)
    return a.reshape(shape)


def bf16_bits(a):
    """fp32 -> bf16 bits, rounded to nearest even (the values are finite: checked before)."""
    u = np.ascontiguousarray(a, dtype="<f4").view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2")


def header_ints(version, cfg):
    h = np.zeros(HEADER_INTS, dtype="<i4")
    h[:8] = [MODEL_MAGIC, version, cfg["maxT"], cfg["V"], cfg["L"], cfg["NH"], cfg["C"], cfg["Vp"]]
    return h


def convert(src, out, bf16_out=None, heads=None, log=print):
    path, cfg_path = resolve_input(src)
    entries, _ = read_safetensors_header(path)
    # names without the prefix; the attention buffers dropped before any dtype check
    tensors, lm_head = {}, None
    for name, entry in entries.items():
        short = strip_prefix(name)
        parts = short.split(".")
        if parts[0] == "h" and len(parts) > 2 and ".".join(parts[2:]) in IGNORED_BLOCK_SUFFIXES:
            continue
        if short == "lm_head.weight" or name == "lm_head.weight":
            lm_head = (name, entry)
            continue
        if short in tensors:
            raise ConvertError(path, f"tensor '{short}' appears twice (with and without the 'transformer.' prefix)")
        tensors[short] = (name, entry)
    hf_config = read_hf_config(cfg_path) if cfg_path else None
    cfg = derive_config({k: e[1] for k, (_, e) in tensors.items()}, heads, hf_config, path)
    known = expected_shapes(cfg["L"], cfg["C"], cfg["V"], cfg["maxT"])
    for short, (name, entry) in tensors.items():
        if short not in known:
            raise ConvertError(path, f"unexpected tensor '{name}': not part of GPT-2 (refusing to drop it)")
        if entry[0] not in DTYPES:
            raise ConvertError(path, f"tensor '{name}' has dtype {entry[0]}: supported are F32, F16 and BF16")
    L, C, V, Vp = cfg["L"], cfg["C"], cfg["V"], cfg["Vp"]
    log(f"{path}: GPT-2 L {L}, NH {cfg['NH']}, C {C}, maxT {cfg['maxT']}, V {V} (padded to {Vp}); "
        f"dtypes {', '.join(sorted({e[0] for _, e in tensors.values()}))}")

    mm = np.memmap(path, dtype=np.uint8, mode="r")

    def values(short):
        name, entry = tensors[short]
        a = to_f32(mm, entry)
        if not np.isfinite(a).all():
            raise ConvertError(path, f"tensor '{name}' holds non-finite values (inf or nan)")
        return a

    if lm_head is not None:
        name, entry = lm_head
        if entry[0] not in DTYPES or entry[1] != (V, C) or not np.array_equal(to_f32(mm, entry), values("wte.weight")):
            raise ConvertError(path, f"'{name}' differs from wte.weight: an untied head, which our model (lm_head = wte) cannot hold")

    outs = [(out, MODEL_VERSION_FP32)] + ([(bf16_out, MODEL_VERSION_BF16)] if bf16_out else [])
    files = []
    try:
        for p, version in outs:
            tmp = f"{p}.tmp{os.getpid()}"
            try:
                files.append((open(tmp, "wb"), tmp, p, version))
            except OSError as e:
                raise ConvertError(p, f"cannot write: {e.strerror or e}")
            files[-1][0].write(header_ints(version, cfg).tobytes())
        count = 0
        for hf_name, per_layer, conv1d in FILE_TENSORS:
            for l in (range(L) if per_layer else [None]):
                a = values(f"h.{l}.{hf_name}" if per_layer else hf_name)
                if conv1d:
                    a = a.T  # (in, out) -> (out, in)
                a = np.ascontiguousarray(a, dtype="<f4")
                if hf_name == "wte.weight":  # rows V..Vp-1 are zero
                    a = np.concatenate([a, np.zeros((Vp - V, C), dtype="<f4")])
                count += a.size
                for f, _, _, version in files:
                    f.write(a.tobytes() if version == MODEL_VERSION_FP32 else bf16_bits(a).tobytes())
        for f, tmp, p, _ in files:
            f.flush()
            os.fsync(f.fileno())
            f.close()
            os.replace(tmp, p)
            log(f"wrote {p} ({os.path.getsize(p)} bytes, {count} parameters with the padded wte rows)")
    except BaseException:
        for f, tmp, _, _ in files:
            f.close()
            if os.path.exists(tmp):
                os.remove(tmp)
        raise
    return cfg


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--in", dest="src", help="model.safetensors, a directory holding it, or a Hugging Face cache folder")
    ap.add_argument("--out", help="the fp32 model file to write (version 3)")
    ap.add_argument("--bf16-out", help="also write the bf16 model file (version 5) here")
    ap.add_argument("--heads", type=int, help="number of attention heads (default: config.json, else GPT-2's by C)")
    ap.add_argument("--download", metavar="SIZE", help="124M, 355M, 774M or 1558M: prints how to fetch it (needs the network; this script does not download)")
    args = ap.parse_args(argv)
    if args.download is not None:
        repo = HF_REPOS.get(args.download, args.download if args.download in HF_REPOS.values() else "gpt2-xl|gpt2-large|gpt2-medium|gpt2")
        sys.exit(f"error: --download needs the network, which this script never uses: fetch it yourself with "
                 f"curl -L -o model.safetensors https://huggingface.co/openai-community/{repo}/resolve/main/model.safetensors "
                 f"(and config.json likewise), then pass --in model.safetensors")
    if not args.src or not args.out:
        ap.error("--in and --out are required")
    try:
        convert(args.src, args.out, args.bf16_out, args.heads)
    except ConvertError as e:
        sys.exit(f"error: {e}")
    except OSError as e:  # writing the output: no such folder, disk full, ...
        sys.exit(f"error: {e.filename or args.out}: {e.strerror or e}")


if __name__ == "__main__":
    main()
