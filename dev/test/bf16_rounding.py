"""
How far can the bf16 build of train_gpt2.cu be from the fp32 PyTorch reference through bf16
rounding alone? A PyTorch twin of the CUDA trainer's numerics, independent of the CUDA code:
the BF16 tolerances of test_gpt2.cu are set from what it prints.

It runs GPT-2 forward + backward on the reference batch in two numerics, with the same
hand-written backward (no autograd):
  exact  float64 throughout, the fp32 weights of <prefix>.bin; must match the debug state (this
         checks the hand-written backward, and the AdamW steps against <prefix>_losses.bin)
  bf16   what the bf16 build stores, rounded to bf16 (nearest even) where it stores it:
         parameters (the fp32 master rounded); every activation buffer (encoded, ln1, qkv, atty,
         proj, residual2/3, ln2, fch, fch_gelu, lnf, logits); dlogits; every backward buffer
         (dlnf, dresidual after each add, dfch, dln2, datty, dqkv, dln1); each
         gradient tensor after each add into it. In fp32: matmuls (bf16 inputs, fp32 sums, the
         bias added before the one rounding), GELU and its gradient in the MLP's two products'
         epilogues (llmc/matmul.cuh, issue 30: fch_gelu = GELU of the fc product's unrounded sum
         plus bias, fch that sum rounded beside it; dfch = GELU'(the stored fch) times fcproj's
         unrounded dinp product: dfch_gelu is never stored), layernorm statistics, softmax/lse, attention
         internals, GELU, bias and layernorm-weight column sums, the encoder's scatter sums,
         the loss. AdamW: fp32 master, m, v; the norm in float64 from the bf16 gradients.
         Attention runs on bf16 tensor cores (llmc/attention.cuh), whose products take bf16
         operands, so two internals are rounded too: the softmax weights P before P v (the
         forward: exp(s - m) with m the running max over 64-key tiles, before the division by
         the row sum; the backward: P^T dout) and dS = P (dP - D) before dS k and dS^T q.
Where each rounding is comes from train_gpt2.cu (gpt2_forward, gpt2_backward) and llmc/*.cuh.
Everything rounds to nearest even, including AdamW's master -> params (no stochastic rounding),
so there is no seed to vary. What does vary between implementations is the order of the fp32
sums, which decides some roundings: `--accum both` (default) runs the bf16 numerics twice, the
matmuls summed by torch's CPU BLAS in fp32 and exactly (float64, rounded once to fp32), and
prints both errors; the bounds' columns take the larger.

Errors are against the debug-state file (the reference test_gpt2.cu uses), in test_gpt2.cu's
units (dev/test/reference.h): an element passes when |err| <= atol * rms + rtol * |ref|, rms
that of the whole tensor, or of the element's own row for wte and wpe (check_tensor_rows). Per
check it prints max |err| / rms, the largest |err| / (atol * rms + rtol * |ref|) under the BF16
bounds read from test_gpt2.cu ("of bound": the check passes below 1), and "margined": for a
tensor 2x its max |err| / rms (an atol with that margin taking no credit from the rtol: the
worst element of another rounding pattern may be one of the tensor's small ones), for a scalar
(loss, step loss, step norm) 3x its relative error, both rounded up to 2 significant digits.

usage (Debian's python, which has torch; on 2 shared cores gpt2_124M takes 5-7 min and 8 GB,
gpt2_tiny 12-30 s):
  /usr/bin/python3 dev/test/bf16_rounding.py gpt2_124M
  /usr/bin/python3 dev/test/bf16_rounding.py gpt2_tiny --expect within 2   # exit 0 iff every
        check's error is within half its bound (margin 2)
  /usr/bin/python3 dev/test/bf16_rounding.py gpt2_tiny --bug ln_mean --expect over --steps 0
        # a deliberate bug in the bf16 run: exit 0 iff some gradient or logits check fails
"""
import argparse
import math
import os
import re
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see train_gpt2.py

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
HEADER_INTS = 256
PARAM_NAMES = ["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
               "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"]
DECAYED = {"wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw"}
# train_gpt2.py's reference steps (dev/test/reference.h's REF_*)
LR, BETA1, BETA2, EPS, WEIGHT_DECAY, GRAD_CLIP = 1e-4, 0.9, 0.999, 1e-8, 0.1, 1.0
GELU_S, GELU_C = 0.7978845608028654, 0.044715
ATT_TILE = 64  # keys per tile of the tensor-core attention forward (llmc/attention.cuh, ATT_TC_STAGE)

BUGS = {
    "none": "no bug",
    "gelu_cubic": "GELU without its cubic term, forward and backward",
    "gelu_dcubic": "GELU's derivative without the 3 * 0.044715 * x^2 of its chain rule (backward only)",
    "ln_mean": "layernorm backward without the row mean of dnorm",
    "attn_D": "attention backward with D_i = 0 (the softmax's row term dropped)",
    "attn_dk_scale": "attention backward: dK without the 1/sqrt(hs) factor",
    "attproj_T": "the attention projection's weight used transposed in the forward",
    "dbias_last_row": "bias gradients summed over all positions but the last",
    "wte_drop_one": "dwte: the last position of the batch's most frequent token left out of its row",
}


# ----------------------------------------------------------------------------
# files

def load_model(path):
    hdr = np.fromfile(path, dtype="<i4", count=HEADER_INTS)
    if hdr[0] != 20240326 or hdr[1] != 3:
        sys.exit(f"error: {path}: not an fp32 (v3) model file")
    maxT, V, L, NH, C, Vp = (int(v) for v in hdr[2:8])
    shapes = {"wte": (Vp, C), "wpe": (maxT, C), "ln1w": (L, C), "ln1b": (L, C), "qkvw": (L, 3 * C, C),
              "qkvb": (L, 3 * C), "attprojw": (L, C, C), "attprojb": (L, C), "ln2w": (L, C), "ln2b": (L, C),
              "fcw": (L, 4 * C, C), "fcb": (L, 4 * C), "fcprojw": (L, C, 4 * C), "fcprojb": (L, C),
              "lnfw": (C,), "lnfb": (C,)}
    data = np.fromfile(path, dtype="<f4", offset=4 * HEADER_INTS)
    params, off = {}, 0
    for n in PARAM_NAMES:
        k = int(np.prod(shapes[n]))
        params[n] = torch.from_numpy(data[off:off + k].reshape(shapes[n]))
        off += k
    if off != data.size:
        sys.exit(f"error: {path}: {data.size} floats, expected {off}")
    return dict(maxT=maxT, V=V, L=L, NH=NH, C=C, Vp=Vp), params, shapes


def load_debug_state(path, cfg, shapes):
    hdr = np.fromfile(path, dtype="<i4", count=HEADER_INTS)
    if hdr[0] != 20240327 or hdr[1] != 2:
        sys.exit(f"error: {path}: not a debug state (version 2)")
    B, T = int(hdr[2]), int(hdr[3])
    BT, V = B * T, cfg["V"]
    ints = np.fromfile(path, dtype="<i4", count=2 * BT, offset=4 * HEADER_INTS)
    floats = np.fromfile(path, dtype="<f4", offset=4 * (HEADER_INTS + 2 * BT))
    x = torch.from_numpy(ints[:BT].astype(np.int64)).view(B, T)
    y = torch.from_numpy(ints[BT:].astype(np.int64)).view(B, T)
    logits = torch.from_numpy(floats[:BT * V].reshape(B, T, V))
    loss = float(floats[BT * V])
    grads, off = {}, BT * V + 1
    for n in PARAM_NAMES:
        k = int(np.prod(shapes[n]))
        grads[n] = torch.from_numpy(floats[off:off + k].reshape(shapes[n]))
        off += k
    if off != floats.size:
        sys.exit(f"error: {path} does not belong to this model")
    return B, T, x, y, logits, loss, grads


def load_losses(path):
    hdr = np.fromfile(path, dtype="<i4", count=HEADER_INTS)
    if hdr[0] != 20240330 or hdr[1] != 1:
        sys.exit(f"error: {path}: not a losses file")
    steps = int(hdr[2])
    f = np.fromfile(path, dtype="<f4", offset=4 * HEADER_INTS)
    return f[:steps].astype(np.float64), f[steps:2 * steps].astype(np.float64)


def load_bounds(path):
    """The BF16 block of test_gpt2.cu (the #else of #if defined(ENABLE_FP32)): tolerances by name."""
    src = open(path).read()
    i = src.index("#if defined(ENABLE_FP32)")
    block = src[src.index("#else", i):src.index("#endif", i)]
    block = re.sub(r"//[^\n]*", "", block)  # comments may hold numbers
    num = r"([0-9.eE+-]+)f?"
    pair = r"\{\s*" + num + r"\s*,\s*" + num + r"\s*\}"
    b = {"logits": tuple(float(v) for v in re.search(r"LOGITS_TOL\s*=\s*" + pair, block).groups())}
    grads = re.search(r"GRAD_TOL\[NUM_PARAM_TENSORS\]\s*=\s*\{(.*?)\};", block, re.S).group(1)
    grads = re.sub(r"/\*.*?\*/", "", grads, flags=re.S)
    tols = re.findall(pair, grads)
    if len(tols) != 16:
        sys.exit(f"error: {path}: found {len(tols)} BF16 gradient tolerances, expected 16")
    for n, t in zip(PARAM_NAMES, tols):
        b[n] = (float(t[0]), float(t[1]))
    for k in ("LOSS_RTOL", "STEP_LOSS_RTOL", "STEP_NORM_RTOL"):
        b[k] = float(re.search(k + r"\s*=\s*" + num, block).group(1))
    return b


# ----------------------------------------------------------------------------
# the model, one numerics or the other

class Numerics:
    def __init__(self, bf16, accum64=False, bug="none"):
        self.bf16, self.accum64, self.bug = bf16, accum64, bug
        self.dt = torch.float32 if bf16 else torch.float64

    def r(self, x):
        """a store into a floatX buffer"""
        return x.to(torch.bfloat16).to(torch.float32) if self.bf16 else x

    def mm(self, a, b):
        """a cuBLASLt product: floatX inputs, fp32 sums (exact sums with accum64)"""
        if self.bf16 and self.accum64:
            return (a.double() @ b.double()).float()
        return a @ b

    def linear(self, inp, w, b=None, rounded=True):  # matmul_forward (rounded=False: what an epilogue sees)
        out = self.mm(inp, w.t())
        out = out if b is None else out + b
        return self.r(out) if rounded else out

    def linear_backward(self, dout, inp, w, want_bias=True):  # matmul_backward into zeroed grads
        dinp = self.r(self.mm(dout, w))
        dw = self.r(self.mm(dout.t(), inp))
        if not want_bias:
            return dinp, dw, None
        rows = dout[:-1] if self.bug == "dbias_last_row" else dout
        # the dweight product's BGRADB epilogue writes the fp32 column sums rounded to bf16, then
        # dbias += them (one more rounding): into zeroed gradients, as here, r(0 + r(s)) = r(s).
        # (fcproj's and attproj's: ln2's backward sums dres as it reads and writes it, in fp32, and
        # adds that once: r(0 + s), the same r(s))
        return dinp, dw, self.r(rows.sum(0))

    def layernorm(self, x, w, b):
        mean = x.mean(-1, keepdim=True)
        rstd = 1.0 / torch.sqrt(((x - mean) ** 2).mean(-1, keepdim=True) + 1e-5)
        return self.r((x - mean) * rstd * w + b), mean, rstd

    def layernorm_backward(self, dres, dout, x, w, mean, rstd):
        """dres += dinp (one rounding); returns dres, dweight, dbias"""
        norm = (x - mean) * rstd
        dnorm = w * dout
        dnorm_mean = dnorm.mean(-1, keepdim=True)
        if self.bug == "ln_mean":
            dnorm_mean = torch.zeros_like(dnorm_mean)
        dx = (dnorm - dnorm_mean - norm * (dnorm * norm).mean(-1, keepdim=True)) * rstd
        return self.r(dres + dx), self.r((norm * dout).sum(0)), self.r(dout.sum(0))

    def gelu(self, x):  # from the fc product's unrounded output (the GELU_AUX_BIAS epilogue)
        c = 0.0 if self.bug == "gelu_cubic" else GELU_C
        return self.r(0.5 * x * (1.0 + torch.tanh(GELU_S * (x + c * x ** 3))))

    def gelu_backward(self, x, dout):  # x the stored fch, dout fcproj's unrounded dinp product (DGELU)
        c = 0.0 if self.bug == "gelu_cubic" else GELU_C
        th = torch.tanh(GELU_S * (x + c * x ** 3))
        chain = 1.0 if self.bug == "gelu_dcubic" else 1.0 + 3.0 * c * x * x
        return self.r((0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * GELU_S * chain) * dout)

    def heads(self, qkv, B, T, C, NH):
        return qkv.view(B, T, 3, NH, C // NH).permute(2, 0, 3, 1, 4)  # q, k, v: (B, NH, T, hs)

    def scores(self, q, k, T):
        s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]))
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        return s.masked_fill(~mask, float("-inf"))

    def attention(self, qkv, B, T, C, NH):
        q, k, v = self.heads(qkv, B, T, C, NH)
        s = self.scores(q, k, T)
        lse = torch.logsumexp(s, -1, keepdim=True)
        if not self.bf16:
            out = torch.exp(s - lse) @ v
        else:  # the tensor-core forward: tiles of ATT_TILE keys, P = exp(s - running max) rounded
            m = torch.full_like(lse, float("-inf"))
            acc = torch.zeros(B, NH, T, C // NH, dtype=s.dtype)
            for k0 in range(0, T, ATT_TILE):
                st = s[..., k0:k0 + ATT_TILE]
                m_new = torch.maximum(m, st.max(-1, keepdim=True).values)  # key 0 is visible: finite
                alpha = torch.exp(m - m_new)  # exp(-inf) = 0 before the first tile
                acc = acc * alpha + self.r(torch.exp(st - m_new)) @ v[..., k0:k0 + ATT_TILE, :]
                m = m_new
            out = acc / torch.exp(lse - m)  # the row sum l relative to the final max
        return self.r(out.transpose(1, 2).reshape(B * T, C)), lse

    def attention_backward(self, dout, qkv, out, lse, B, T, C, NH):
        q, k, v = self.heads(qkv, B, T, C, NH)
        hs = C // NH
        do = dout.view(B, T, NH, hs).transpose(1, 2)
        o = out.view(B, T, NH, hs).transpose(1, 2)
        D = (do * o).sum(-1, keepdim=True)  # from the stored (rounded) output, as the kernel does
        if self.bug == "attn_D":
            D = torch.zeros_like(D)
        p = torch.exp(self.scores(q, k, T) - lse)
        ds = p * (do @ v.transpose(-1, -2) - D)
        scale = 1.0 / math.sqrt(hs)
        p, ds = self.r(p), self.r(ds)  # the tensor-core products' bf16 operands (fp32 in the exact run)
        dq = (ds @ k) * scale
        dk = ds.transpose(-1, -2) @ q * (1.0 if self.bug == "attn_dk_scale" else scale)
        dv = p.transpose(-1, -2) @ do
        dqkv = torch.stack([dq, dk, dv])  # (3, B, NH, T, hs) -> (B, T, 3, NH, hs)
        return self.r(dqkv.permute(1, 3, 0, 2, 4).reshape(B * T, 3 * C))


def forward_backward(N, cfg, P, x, y, backward=True):
    """train_gpt2.cu's gpt2_forward then gpt2_backward on params P (floatX values in N.dt).
    Returns logits (BT, V), the mean loss, and the gradients (file shapes) or None."""
    B, T = x.shape
    BT, L, NH, C, V, Vp = B * T, cfg["L"], cfg["NH"], cfg["C"], cfg["V"], cfg["Vp"]
    xf = x.reshape(-1)
    enc = N.r(P["wte"][xf] + P["wpe"][:T].repeat(B, 1))  # encoder_forward
    cache = []
    res2 = proj = None
    for l in range(L):
        w = {n: P[n][l] for n in PARAM_NAMES[2:14]}
        res_in = enc if l == 0 else N.r(res2 + proj)  # the fused residual add of the previous block
        ln1, m1, s1 = N.layernorm(res_in, w["ln1w"], w["ln1b"])
        qkv = N.linear(ln1, w["qkvw"], w["qkvb"])
        atty, lse = N.attention(qkv, B, T, C, NH)
        wp = w["attprojw"].t() if N.bug == "attproj_T" else w["attprojw"]
        proj = N.linear(atty, wp, w["attprojb"])
        res2 = N.r(res_in + proj)
        ln2, m2, s2 = N.layernorm(res2, w["ln2w"], w["ln2b"])
        pre = N.linear(ln2, w["fcw"], w["fcb"], rounded=False)  # one product: GELU_AUX_BIAS
        fch, fchg = N.r(pre), N.gelu(pre)
        proj = N.linear(fchg, w["fcprojw"], w["fcprojb"])
        cache.append((res_in, ln1, m1, s1, qkv, atty, lse, res2, ln2, m2, s2, fch, fchg))
    res3 = N.r(res2 + proj)
    lnf, mf, sf = N.layernorm(res3, P["lnfw"], P["lnfb"])
    logits = N.linear(lnf, P["wte"])  # (BT, Vp); the padded rows of wte are 0
    # fused_classifier: softmax over the real columns in fp32, loss per position; the mean in double
    real = logits[:, :V]
    lse = torch.logsumexp(real, -1)
    losses = lse - real.gather(1, y.reshape(-1, 1)).squeeze(1)
    loss = float(losses.double().mean())
    if not backward:
        return real, loss, None
    dloss = float(np.float32(1.0 / BT)) if N.bf16 else 1.0 / BT
    dlogits = torch.exp(real - lse[:, None])
    dlogits[torch.arange(BT), y.reshape(-1)] -= 1.0
    dlogits = torch.cat([N.r(dlogits * dloss), torch.zeros(BT, Vp - V, dtype=N.dt)], 1)

    G = {n: torch.zeros_like(P[n]) for n in PARAM_NAMES}
    dlnf, G["wte"], _ = N.linear_backward(dlogits, lnf, P["wte"], want_bias=False)
    dres = torch.zeros(BT, C, dtype=N.dt)
    dres, G["lnfw"], G["lnfb"] = N.layernorm_backward(dres, dlnf, res3, P["lnfw"], mf, sf)
    for l in reversed(range(L)):
        w = {n: P[n][l] for n in PARAM_NAMES[2:14]}
        res_in, ln1, m1, s1, qkv, atty, lse_l, res2, ln2, m2, s2, fch, fchg = cache[l]
        # fcproj's dinp product with the DGELU epilogue: its unrounded output times GELU'(fch)
        _, G["fcprojw"][l], G["fcprojb"][l] = N.linear_backward(dres, fchg, w["fcprojw"])
        dfch = N.gelu_backward(fch, N.mm(dres, w["fcprojw"]))
        dln2, G["fcw"][l], G["fcb"][l] = N.linear_backward(dfch, ln2, w["fcw"])
        dres, G["ln2w"][l], G["ln2b"][l] = N.layernorm_backward(dres, dln2, res2, w["ln2w"], m2, s2)
        wp = w["attprojw"].t() if N.bug == "attproj_T" else w["attprojw"]
        datty, dwp, G["attprojb"][l] = N.linear_backward(dres, atty, wp)
        G["attprojw"][l] = dwp.t() if N.bug == "attproj_T" else dwp
        dqkv = N.attention_backward(datty, qkv, atty, lse_l, B, T, C, NH)
        dln1, G["qkvw"][l], G["qkvb"][l] = N.linear_backward(dqkv, ln1, w["qkvw"])
        dres, G["ln1w"][l], G["ln1b"][l] = N.layernorm_backward(dres, dln1, res_in, w["ln1w"], m1, s1)
    # encoder_backward: per token, the fp32 sum of its positions added to the head's part
    used = torch.ones(BT, dtype=torch.bool)
    if N.bug == "wte_drop_one":
        used[(xf == torch.bincount(xf).argmax()).nonzero().max()] = False
    scatter = torch.zeros(Vp, C, dtype=N.dt).index_add_(0, xf[used], dres[used])
    G["wte"] = N.r(G["wte"] + scatter)
    G["wpe"][:T] = N.r(dres.view(B, T, C).sum(0))
    return real, loss, G


def adamw_step(N, P, master, m, v, G, t):
    """gpt2_update: the norm of the (floatX) gradients, clipping, AdamW on the master, params =
    the master rounded. Returns the norm before clipping."""
    norm = math.sqrt(sum(float((g.double() ** 2).sum()) for g in G.values()))
    scale = min(1.0, GRAD_CLIP / (norm + 1e-6))
    if N.bf16:
        scale = float(np.float32(scale))
    bc1, bc2 = 1.0 - BETA1 ** t, 1.0 - BETA2 ** t
    for n in PARAM_NAMES:
        g = G[n] * scale
        m[n].mul_(BETA1).add_((1.0 - BETA1) * g)
        v[n].mul_(BETA2).add_((1.0 - BETA2) * g * g)
        wd = WEIGHT_DECAY if n in DECAYED else 0.0
        master[n].mul_(1.0 - LR * wd)
        master[n].sub_(LR * (m[n] / bc1) / (torch.sqrt(v[n] / bc2) + EPS))
        P[n] = N.r(master[n])
    return norm


# ----------------------------------------------------------------------------
# test_gpt2.cu's measure

def round_up(x, digits=2):
    """x rounded up to `digits` significant digits"""
    if x <= 0 or math.isinf(x):
        return x
    e = math.floor(math.log10(x)) - digits + 1
    return math.ceil(round(x / 10 ** e, 9)) * 10 ** e


def measure(got, ref, tol, rows):
    """max |err| / rms (the rms of the element's own row when rows > 0), the largest
    |err| / (atol * rms + rtol * |ref|), and the tensor's rms. In slices of rows: wte is 39M
    elements."""
    got, ref = got.reshape(max(rows, 1), -1), ref.reshape(max(rows, 1), -1)
    atol, rtol = tol
    per_rms = of_bound = 0.0
    step = max(1, (1 << 22) // ref.shape[1])
    for i in range(0, ref.shape[0], step):
        g, r = got[i:i + step].double(), ref[i:i + step].double()
        err = (g - r).abs()
        rms = torch.sqrt((r ** 2).mean(1, keepdim=True))
        bound = atol * rms + rtol * r.abs()
        # an all-zero reference row must come back exactly zero: its bound is 0
        if bool(((bound == 0) & (err > 0)).any()):
            return math.inf, math.inf, float(torch.sqrt((ref.double() ** 2).mean()))
        safe_rms = torch.where(rms > 0, rms, torch.ones_like(rms))
        per_rms = max(per_rms, float((err / safe_rms).max()))
        of_bound = max(of_bound, float((err / torch.where(bound > 0, bound, torch.ones_like(bound))).max()))
    return per_rms, of_bound, float(torch.sqrt((ref.double() ** 2).mean()))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("prefix", nargs="?", default="gpt2_124M", help="reference files <prefix>.bin, _debug_state.bin, _losses.bin")
    ap.add_argument("--accum", choices=["fp32", "fp64", "both"], default="both",
                    help="the bf16 run's matmul sums: fp32 (torch's order), exact, or both (report the larger error)")
    ap.add_argument("--steps", type=int, default=-1, help="AdamW steps to compare (default: all of the losses file; 0: none)")
    ap.add_argument("--bug", choices=sorted(BUGS), default="none", help="a deliberate bug in the bf16 run")
    ap.add_argument("--bounds", default=os.path.join(ROOT, "test_gpt2.cu"), help="where the BF16 tolerances are")
    ap.add_argument("--expect", nargs="+", metavar=("within|over", "MARGIN"),
                    help="'within M': exit 1 unless every error x M is within its bound; 'over': exit 1 unless some check fails")
    args = ap.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    prefix = args.prefix if os.path.isabs(args.prefix) or os.path.exists(args.prefix + ".bin") else os.path.join(ROOT, args.prefix)
    t0 = time.time()
    cfg, P32, shapes = load_model(prefix + ".bin")
    B, T, x, y, ref_logits, ref_loss, ref_grads = load_debug_state(prefix + "_debug_state.bin", cfg, shapes)
    ref_step_loss, ref_step_norm = load_losses(prefix + "_losses.bin")
    bounds = load_bounds(args.bounds)
    steps = len(ref_step_loss) if args.steps < 0 else min(args.steps, len(ref_step_loss))
    print(f"{os.path.basename(prefix)}: L {cfg['L']} NH {cfg['NH']} C {cfg['C']} B {B} T {T}; bounds from {args.bounds}; "
          f"bug: {BUGS[args.bug]}")

    # the exact run: the hand-written backward against the reference
    X = Numerics(bf16=False)
    P = {n: p.double() for n, p in P32.items()}
    logits, loss, G = forward_backward(X, cfg, P, x, y)
    worst = max([float((logits - ref_logits.view_as(logits).double()).abs().max() / ref_logits.double().pow(2).mean().sqrt())]
                + [float((G[n] - ref_grads[n].double()).abs().max() / max(ref_grads[n].double().pow(2).mean().sqrt(), 1e-30))
                   for n in PARAM_NAMES])
    print(f"exact run (float64): loss rel err {abs(loss - ref_loss) / ref_loss:.1e}; logits and gradients within {worst:.1e} "
          f"of their rms ({time.time() - t0:.0f} s)")
    if worst > 1e-3:
        sys.exit("error: the float64 run does not reproduce the reference: the simulation is wrong")
    exact_steps = []
    if steps:
        master = P  # exact: the params are the master weights
        m = {n: torch.zeros_like(p) for n, p in P.items()}
        v = {n: torch.zeros_like(p) for n, p in P.items()}
        for s in range(steps):
            if s > 0:
                _, loss, G = forward_backward(X, cfg, P, x, y)
            exact_steps.append((loss, adamw_step(X, P, master, m, v, G, s + 1)))
        e = max(max(abs(l - rl) / rl, abs(nm - rn) / rn) for (l, nm), rl, rn in zip(exact_steps, ref_step_loss, ref_step_norm))
        print(f"exact run, {steps} AdamW steps: losses and norms within {e:.1e} relative of the reference")
        del master, m, v
    del P, G

    # the bf16 runs
    results = {}  # check -> one (max err/rms, of bound, rms) per run

    def keep(name, vals):
        results.setdefault(name, []).append(vals)
    accums = ["fp32", "fp64"] if args.accum == "both" else [args.accum]
    for accum in accums:
        t1 = time.time()
        N = Numerics(bf16=True, accum64=accum == "fp64", bug=args.bug)
        P = {n: N.r(p.float()) for n, p in P32.items()}
        logits_f, _, _ = forward_backward(N, cfg, P, x, y, backward=False)  # test_gpt2.cu's step 2
        keep("logits", measure(logits_f, ref_logits, bounds["logits"], 0))
        logits, loss, G = forward_backward(N, cfg, P, x, y)
        keep("loss", [abs(loss - ref_loss) / ref_loss] * 2 + [0])
        for n in PARAM_NAMES:
            rows = shapes[n][0] if n in ("wte", "wpe") else 0
            keep(n, measure(G[n], ref_grads[n], bounds[n], rows))
        if steps:
            master = {n: p.float().clone() for n, p in P32.items()}
            m = {n: torch.zeros_like(p) for n, p in master.items()}
            v = {n: torch.zeros_like(p) for n, p in master.items()}
            for s in range(steps):
                if s > 0:
                    _, loss, G = forward_backward(N, cfg, P, x, y)
                norm = adamw_step(N, P, master, m, v, G, s + 1)
                rl = abs(loss - ref_step_loss[s]) / ref_step_loss[s]
                rn = abs(norm - ref_step_norm[s]) / ref_step_norm[s]
                keep(f"step {s} loss", [rl, rl, 0])
                keep(f"step {s} norm", [rn, rn, 0])
            del master, m, v
        del P, G
        print(f"bf16 run, matmul sums {'exact' if accum == 'fp64' else 'fp32'}: {time.time() - t1:.0f} s")

    # the table: max |err| / rms of each run; the rest is the worst run's
    runs = " ".join(f"{'fp32 sums' if a == 'fp32' else 'exact sums':>10}" for a in accums)
    print(f"\n{'check':<12} {'rms':>9}  max|err|/rms: {runs} {'bound':>15} {'of bound':>9} {'margined':>8}")
    failed, worst_margin = [], math.inf
    for name, per_run in results.items():
        per_rms = " ".join(f"{r[0]:10.2e}" for r in per_run)
        worst, over, rms = max(r[0] for r in per_run), max(r[1] for r in per_run), per_run[0][2]
        if name in bounds:
            unit = "row rms" if name in ("wte", "wpe") else "rms"
            print(f"{name:<12} {rms:9.3e}  {'':13} {per_rms} {'{%g, %g}' % bounds[name]:>15} {over:9.2f} {round_up(2 * worst):8.2g}  ({unit})")
        else:  # the loss and the steps: relative errors against an rtol
            key = "LOSS_RTOL" if name in ("loss", "step 0 loss") else "STEP_NORM_RTOL" if "norm" in name else "STEP_LOSS_RTOL"
            over = worst / bounds[key]
            print(f"{name:<12} {'':9}  {'':13} {per_rms} {'rtol %g' % bounds[key]:>15} {over:9.2f} {round_up(3 * worst):8.2g}  (relative)")
        if over > 1.0 and name != "loss" and not name.startswith("step"):
            failed.append(name)
        worst_margin = min(worst_margin, 1.0 / over if over > 0 else math.inf)
    print(f"\nworst margin {worst_margin:.2f}x (bound / error); "
          f"{len(failed)} logits/gradient checks over their bound{': ' + ', '.join(failed) if failed else ''}; "
          f"{time.time() - t0:.0f} s")
    if args.expect:
        if args.expect[0] == "within":
            margin = float(args.expect[1]) if len(args.expect) > 1 else 1.0
            ok = worst_margin >= margin
            print(f"{'PASS' if ok else 'FAIL'}: every error within its bound / {margin:g}")
        else:
            ok = len(failed) > 0
            print(f"{'PASS' if ok else 'FAIL'}: the bug is {'caught' if ok else 'NOT caught'} by the bounds")
        sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
