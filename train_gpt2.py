"""
Independent PyTorch reference for the C trainer (train_gpt2.c / test_gpt2.c).

It builds a GPT-2 from a fixed seed, then writes everything the C side is
checked against:

  <prefix>.bin              initial weights, fp32          (llm.c model format, version 3)
  <prefix>_bf16.bin         initial weights, bf16 bits     (llm.c model format, version 5)
  <prefix>_debug_state.bin  one batch x/y, logits, loss and the gradients of all
                            parameters at the initial weights
  <prefix>_losses.bin       losses and pre-clip grad norms of a few AdamW steps
                            taken repeatedly on that same batch

test_gpt2.c loads <prefix>.bin, runs the same batch, and must reproduce the
logits, loss, gradients and the loss/norm trajectory within tolerance.

Usage (always with Debian's python, which has torch):
  /usr/bin/python3 train_gpt2.py                 # GPT-2 124M (d12) -> gpt2_124M*.bin
  /usr/bin/python3 train_gpt2.py --model tiny    # L=2 NH=4 C=64    -> gpt2_tiny*.bin
  /usr/bin/python3 train_gpt2.py --model d2      # depth N: C=64N, NH=N
Everything runs in float32 on the CPU and is deterministic: two runs with the
same flags give byte-identical files.
"""
import argparse
import math
import os
import re
import sys
import time

# Must be set before torch loads libgomp: by default idle OpenMP threads spin and
# fight OpenBLAS's own pthreads for the cores; on a 2-core box that made every
# step ~4x slower (13 s vs 3.5 s for d12).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# ---------------------------------------------------------------------------
# Training hyperparameters of the reference run.
# test_gpt2.c MUST use exactly the same values, or its losses/norms will differ.
LEARNING_RATE = 1e-4
BETA1, BETA2 = 0.9, 0.999
ADAM_EPS = 1e-8
WEIGHT_DECAY = 0.1      # only on the 2-D weights (wte, wpe, qkvw, attprojw, fcw, fcprojw)
GRAD_CLIP = 1.0         # global L2 norm clip; scale = GRAD_CLIP / (norm + 1e-6) when < 1
# Model constants
VOCAB_SIZE = 50257
INIT_STD = 0.02         # residual projections use INIT_STD / sqrt(2 L)
LN_EPS = 1e-5
# File magics (llm.c compatible)
MODEL_MAGIC, MODEL_VERSION_FP32, MODEL_VERSION_BF16 = 20240326, 3, 5
DEBUG_MAGIC, DEBUG_VERSION = 20240327, 2
LOSSES_MAGIC, LOSSES_VERSION = 20240330, 1
SHARD_MAGIC, SHARD_VERSION = 20240520, 1
HEADER_INTS = 256

# Order of the 16 tensors in the model file (and of the gradients in the debug state).
PARAM_NAMES = ["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
               "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"]
BLOCK_PARAM_NAMES = PARAM_NAMES[2:14]
DECAYED = {"wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw"}


def gelu_tanh(x):
    # GPT-2's GELU: the tanh approximation, written out so it matches the C code exactly.
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


class Block(nn.Module):
    def __init__(self, C):
        super().__init__()
        # Plain parameters named like the file's tensors, in PyTorch (out, in) layout.
        e = lambda *s: nn.Parameter(torch.empty(*s))
        self.ln1w, self.ln1b = nn.Parameter(torch.ones(C)), nn.Parameter(torch.zeros(C))
        self.qkvw, self.qkvb = e(3 * C, C), nn.Parameter(torch.zeros(3 * C))
        self.attprojw, self.attprojb = e(C, C), nn.Parameter(torch.zeros(C))
        self.ln2w, self.ln2b = nn.Parameter(torch.ones(C)), nn.Parameter(torch.zeros(C))
        self.fcw, self.fcb = e(4 * C, C), nn.Parameter(torch.zeros(4 * C))
        self.fcprojw, self.fcprojb = e(C, 4 * C), nn.Parameter(torch.zeros(C))

    def forward(self, x, NH):
        B, T, C = x.shape
        hs = C // NH
        # --- causal self-attention ---
        h = F.layer_norm(x, (C,), self.ln1w, self.ln1b, LN_EPS)
        qkv = F.linear(h, self.qkvw, self.qkvb)                   # (B, T, 3C): q | k | v
        q, k, v = (t.view(B, T, NH, hs).transpose(1, 2) for t in qkv.split(C, dim=2))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))   # (B, NH, T, T)
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)            # heads back side by side
        x = x + F.linear(y, self.attprojw, self.attprojb)
        # --- MLP ---
        h = F.layer_norm(x, (C,), self.ln2w, self.ln2b, LN_EPS)
        h = gelu_tanh(F.linear(h, self.fcw, self.fcb))
        return x + F.linear(h, self.fcprojw, self.fcprojb)


class GPT(nn.Module):
    def __init__(self, L, NH, C, maxT, V=VOCAB_SIZE):
        super().__init__()
        self.L, self.NH, self.C, self.maxT, self.V = L, NH, C, maxT, V
        self.wte = nn.Parameter(torch.empty(V, C))   # tied: embedding and LM head
        self.wpe = nn.Parameter(torch.empty(maxT, C))
        self.blocks = nn.ModuleList(Block(C) for _ in range(L))
        self.lnfw, self.lnfb = nn.Parameter(torch.ones(C)), nn.Parameter(torch.zeros(C))
        # Deterministic init in a fixed order (the C side loads the file, so the
        # order only matters for reproducing this script's own output).
        resid_std = INIT_STD / math.sqrt(2 * L)
        with torch.no_grad():
            self.wte.normal_(0.0, INIT_STD)
            self.wpe.normal_(0.0, INIT_STD)
            for b in self.blocks:
                b.qkvw.normal_(0.0, INIT_STD)
                b.attprojw.normal_(0.0, resid_std)
                b.fcw.normal_(0.0, INIT_STD)
                b.fcprojw.normal_(0.0, resid_std)

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte[idx] + self.wpe[:T]                 # (B, T, C)
        for b in self.blocks:
            x = b(x, self.NH)
        x = F.layer_norm(x, (self.C,), self.lnfw, self.lnfb, LN_EPS)
        logits = x @ self.wte.t()                        # (B, T, V), only real vocab columns
        loss = F.cross_entropy(logits.view(B * T, self.V), targets.reshape(B * T))
        return logits, loss

    def stacked(self, grad=False):
        """The 16 file tensors in PARAM_NAMES order (block tensors stacked over layers);
        grad=True gives the gradients instead. wte is padded to Vp rows with zeros."""
        get = (lambda p: p.grad) if grad else (lambda p: p)
        out = {}
        for name in PARAM_NAMES:
            if name in BLOCK_PARAM_NAMES:
                out[name] = torch.stack([get(getattr(b, name)) for b in self.blocks])
            else:
                out[name] = get(getattr(self, name)).clone()
        Vp = padded_vocab(self.V)
        out["wte"] = torch.cat([out["wte"], torch.zeros(Vp - self.V, self.C)])
        return {k: v.detach() for k, v in out.items()}


def clip_grad_norm(params, max_norm):
    """Same rule as torch.nn.utils.clip_grad_norm_ (scale = max_norm / (norm + 1e-6)
    when that is < 1), but the norm is summed in float64: torch's float32 reduction
    was off by ~5e-5 relative at 124M, too loose for a reference value.
    Returns the norm before clipping."""
    sq = sum(torch.linalg.vector_norm(p.grad, dtype=torch.float64).item() ** 2 for p in params)
    norm = math.sqrt(sq)
    scale = max_norm / (norm + 1e-6)
    if scale < 1.0:
        for p in params:
            p.grad.mul_(scale)
    return norm


def padded_vocab(V):
    return (V + 127) // 128 * 128   # 50257 -> 50304, keeps matmuls aligned in llm.c


def header(*vals):
    h = np.zeros(HEADER_INTS, dtype="<i4")
    h[:len(vals)] = vals
    return h


def write_atomic(path, arrays):
    """Write the arrays back to back to path.tmp, then rename over path, so an
    interrupted run never leaves a half-written file behind."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        for a in arrays:
            f.write(np.ascontiguousarray(a).tobytes())
    os.replace(tmp, path)
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


def f32(t):
    return t.detach().contiguous().numpy().astype("<f4")


def bf16_bits(t):
    # torch rounds fp32 -> bf16 to nearest even; store the raw 16-bit patterns.
    return t.detach().to(torch.bfloat16).contiguous().view(torch.int16).numpy().view("<u2")


def load_batch(path, B, T):
    """x, y (B, T) int64 from the start of an llm.c token shard."""
    def die(msg):
        sys.exit(f"error: {path}: {msg}")
    if not os.path.isfile(path):
        die("token shard not found (generate it with the dev/data script)")
    size = os.path.getsize(path)
    if size < 4 * HEADER_INTS:
        die(f"too small for a header ({size} bytes)")
    hdr = np.fromfile(path, dtype="<i4", count=HEADER_INTS)
    if hdr[0] != SHARD_MAGIC or hdr[1] != SHARD_VERSION:
        die(f"bad magic/version {hdr[0]}/{hdr[1]}, expected {SHARD_MAGIC}/{SHARD_VERSION}")
    ntok = int(hdr[2])
    if size != 4 * HEADER_INTS + 2 * ntok:
        die(f"size {size} does not match header token count {ntok}")
    if ntok < B * T + 1:
        die(f"only {ntok} tokens, need B*T+1 = {B * T + 1}")
    tok = np.fromfile(path, dtype="<u2", count=B * T + 1, offset=4 * HEADER_INTS).astype(np.int64)
    if tok.max() >= VOCAB_SIZE:
        die(f"token id {tok.max()} >= vocab size {VOCAB_SIZE}")
    tok = torch.from_numpy(tok)
    return tok[:-1].view(B, T), tok[1:].view(B, T)


def model_config(name):
    if name == "tiny":
        return 2, 4, 64
    m = re.fullmatch(r"d(\d+)", name)
    if not m or int(m.group(1)) < 1:
        sys.exit(f"error: unknown --model {name!r} (use dN, e.g. d12, or tiny)")
    n = int(m.group(1))
    return n, n, 64 * n   # L, NH, C (d12 = GPT-2 124M)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="d12", help="dN (depth N, C=64N, NH=N) or tiny (L=2 NH=4 C=64)")
    ap.add_argument("--max_seq_len", type=int, default=1024, help="maxT, size of wpe")
    ap.add_argument("--batch_size", type=int, default=4)
    ap.add_argument("--seq_len", type=int, default=64)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--input_val", default=os.path.join(here, "dev/data/tinyshakespeare/tiny_shakespeare_val.bin"))
    ap.add_argument("--outdir", default=here)
    ap.add_argument("--out_prefix", default=None, help="default gpt2_124M for d12, else gpt2_<model>")
    args = ap.parse_args()

    L, NH, C = model_config(args.model)
    B, T, maxT, V, Vp = args.batch_size, args.seq_len, args.max_seq_len, VOCAB_SIZE, padded_vocab(VOCAB_SIZE)
    if C % NH or T < 1 or B < 1 or T > maxT or args.steps < 1:
        sys.exit("error: bad sizes (need C % NH == 0, 1 <= T <= maxT, B >= 1, steps >= 1)")
    prefix = args.out_prefix or ("gpt2_124M" if args.model == "d12" else f"gpt2_{args.model}")
    out = os.path.join(args.outdir, prefix)

    # Exact fp32, reproducible run to run.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(os.cpu_count() or 1)
    torch.manual_seed(args.seed)

    x, y = load_batch(args.input_val, B, T)   # fail fast, before building a big model
    t0 = time.time()
    model = GPT(L, NH, C, maxT)
    n_real = sum(p.numel() for p in model.parameters())
    print(f"model {args.model}: L={L} NH={NH} C={C} maxT={maxT} V={V} Vp={Vp} | batch B={B} T={T} | seed {args.seed}")
    print(f"parameters: {n_real} ({n_real + (Vp - V) * C} with padded wte)")

    # 1+2. initial weights, fp32 and bf16
    w = model.stacked()
    hdr = [MODEL_MAGIC, MODEL_VERSION_FP32, maxT, V, L, NH, C, Vp]
    write_atomic(out + ".bin", [header(*hdr)] + [f32(w[n]) for n in PARAM_NAMES])
    hdr[1] = MODEL_VERSION_BF16
    write_atomic(out + "_bf16.bin", [header(*hdr)] + [bf16_bits(w[n]) for n in PARAM_NAMES])
    del w

    # Weight decay only on the 2-D weight matrices; biases and layernorm params are not decayed.
    decay = [model.wte, model.wpe] + [getattr(b, n) for b in model.blocks for n in BLOCK_PARAM_NAMES if n in DECAYED]
    no_decay = [model.lnfw, model.lnfb] + [getattr(b, n) for b in model.blocks for n in BLOCK_PARAM_NAMES if n not in DECAYED]
    assert len(decay) + len(no_decay) == len(list(model.parameters()))
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": WEIGHT_DECAY}, {"params": no_decay, "weight_decay": 0.0}],
        lr=LEARNING_RATE, betas=(BETA1, BETA2), eps=ADAM_EPS, foreach=False)

    # 3+4. train on the same batch; step 0 also gives the debug state.
    losses, norms = [], []
    for step in range(args.steps):
        ts = time.time()
        optimizer.zero_grad(set_to_none=True)
        logits, loss = model(x, y)
        loss.backward()
        if step == 0:
            # Snapshot before clipping, which scales the grads in place.
            g = model.stacked(grad=True)
            write_atomic(out + "_debug_state.bin",
                         [header(DEBUG_MAGIC, DEBUG_VERSION, B, T),
                          x.numpy().astype("<i4"), y.numpy().astype("<i4"),
                          f32(logits), np.array([loss.item()], dtype="<f4")]
                         + [f32(g[n]) for n in PARAM_NAMES])
            del g
        norm = clip_grad_norm(list(model.parameters()), GRAD_CLIP)
        optimizer.step()
        losses.append(loss.item())
        norms.append(norm)
        print(f"step {step:2d}: loss {losses[-1]:.6f}  grad norm {norms[-1]:.6f}  ({time.time() - ts:.2f}s)")

    write_atomic(out + "_losses.bin",
                 [header(LOSSES_MAGIC, LOSSES_VERSION, args.steps, B, T),
                  np.array(losses, dtype="<f4"), np.array(norms, dtype="<f4")])
    print(f"done in {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main()
