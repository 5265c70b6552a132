#!/usr/bin/env python3
"""The memory-bound kernels of one CUDA training step (bf16 build, -r 0, one micro-step): the
bytes each must move at least and the time that takes at a GPU's datasheet bandwidth. A
PREDICTED floor, not a measurement: no GPU has run these kernels (dev/cuda/NOTES.md). The bytes
follow the kernels in llmc/*.cuh, each tensor read or written once per launch as the kernel does
(the 16-byte kernels read each element once; the layernorm backward's one pass reads dout, inp
and dinp once and writes dinp once, where the previous kernels read dout and inp three times).

    python3 dev/bench/memory_floors.py [--model 124M] [-b 32] [-t 1024] [--gbs 3350]

Bandwidth: H100 SXM 3.35 TB/s (NVIDIA H100 Tensor Core GPU datasheet); A100 SXM 80GB 2.039 TB/s
(NVIDIA A100 datasheet): --gbs 2039.
"""
import argparse

MODELS = {  # L, C, V, Vp, maxT (GPT-2's published sizes; Vp padded to a multiple of 128)
    "124M": (12, 768, 50257, 50304, 1024),
    "350M": (24, 1024, 50257, 50304, 1024),
    "774M": (36, 1280, 50257, 50304, 1024),
    "1558M": (48, 1600, 50257, 50304, 1024),
}
X = 2  # bytes of a bf16 floatX
F = 4  # bytes of a float


def kernels(L, C, V, Vp, maxT, B, T):
    """(name, launches per micro-step, bytes per launch) of the memory-bound kernels."""
    BT = B * T
    N = BT  # layernorm rows
    chunks = -(-N // 32)  # layernorm_backward_chunks: rows of 32
    rows = []
    # encoder: out written; per position a row of wte and of wpe read (at most BT distinct rows), tokens
    rows.append(("encoder_forward", 1, 4 * BT + 2 * BT * C * X))
    # backward: dout read; each touched dwte row read and written (at most BT); dwpe's T rows read
    # and written; the buckets and their order (4 BT + 1 ints)
    rows.append(("encoder_backward (dwte + dwpe)", 1, BT * C * X + 2 * BT * C * X + 2 * T * C * X + 4 * (4 * BT + 1)))
    # layernorm forward: row read, out written, weight and bias, mean and rstd; fused: + inp2 read, residual written
    ln_fwd = 2 * N * C * X + 2 * C * X + 2 * N * F
    rows.append(("layernorm_forward (layer 0's ln1)", 1, ln_fwd))
    rows.append(("fused_residual_layernorm_forward", 2 * L, ln_fwd + 2 * N * C * X))
    # layernorm backward: dout, inp, dinp read, dinp written, weight, mean, rstd; the chunk sums
    # written and read back by the column kernel, dweight and dbias read and written
    ln_bwd = 4 * N * C * X + C * X + 2 * N * F + 2 * (2 * chunks * C * F) + 4 * C * X
    rows.append(("layernorm_backward (one pass + column sums)", 2 * L + 1, ln_bwd))
    # GELU on (BT, 4C): forward read + write, backward 2 reads + write
    rows.append(("gelu_forward", L, 2 * BT * 4 * C * X))
    rows.append(("gelu_backward", L, 3 * BT * 4 * C * X))
    # dbias: dout (BT, OC) read once, 64 chunks of OC floats written and read, dbias read and written;
    # per layer OC = 3C (qkv), C (attproj), 4C (fc), C (fcproj)
    for name, oc in (("dbias qkv", 3 * C), ("dbias attproj", C), ("dbias fc", 4 * C), ("dbias fcproj", C)):
        rows.append((name, L, BT * oc * X + 2 * 64 * oc * F + 2 * oc * X))
    # classifier: logits read twice (max and sum, then dlogits), dlogits written; targets, losses
    rows.append(("fused_classifier", 1, 3 * BT * Vp * X + 4 * BT + F * BT))
    return rows


def update(L, C, V, Vp, maxT):
    """(name, launches per step, bytes per step) of the optimizer step, stage 0, one rank."""
    P = Vp * C + maxT * C + 2 * C + L * (12 * C * C + 13 * C)  # every parameter (padding units aside)
    units = 1 + L
    return [
        # grads read (floatX); master, m, v read and written (fp32); params written (floatX)
        ("adamw (one launch per unit)", units, P * (2 * X + 6 * F)),
        ("global norm (partials + finish)", 2, P * X),
    ], P


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="124M", choices=sorted(MODELS))
    ap.add_argument("-b", type=int, default=32)
    ap.add_argument("-t", type=int, default=1024)
    ap.add_argument("--gbs", type=float, default=3350.0, help="bandwidth, GB/s (default: H100 SXM's datasheet 3350)")
    a = ap.parse_args()
    L, C, V, Vp, maxT = MODELS[a.model]
    bw = a.gbs * 1e9
    print(f"GPT-2 {a.model}, B={a.b}, T={a.t}, bf16, -r 0; PREDICTED floors at {a.gbs:.0f} GB/s (bytes / bandwidth)\n")
    print(f"| {'kernel':44s} | launches | MB per launch | MB total | floor ms (predicted) |")
    print(f"|{'-' * 46}|----------|---------------|----------|----------------------|")
    total = 0.0
    for name, n, b in kernels(L, C, V, Vp, maxT, a.b, a.t):
        total += n * b
        print(f"| {name:44s} | {n:8d} | {b / 1e6:13.1f} | {n * b / 1e6:8.1f} | {n * b / bw * 1e3:20.3f} |")
    print(f"| {'per micro-step':44s} | {'':8s} | {'':13s} | {total / 1e6:8.1f} | {total / bw * 1e3:20.3f} |")
    rows, P = update(L, C, V, Vp, maxT)
    for name, n, b in rows:
        print(f"| {name + ' (per step)':44s} | {n:8d} | {b / n / 1e6:13.1f} | {b / 1e6:8.1f} | {b / bw * 1e3:20.3f} |")
    print(f"\n{P:,} parameters; the update was {4 + 12 * L} AdamW launches and {2 * (1 + L)} norm launches per step, "
          f"now {1 + L} and 2.")


if __name__ == "__main__":
    main()
