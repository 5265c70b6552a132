#!/usr/bin/env python3
"""
PREDICTED time of the bf16 build's attention kernels (llmc/attention.cuh) on a GPU, from counts
of their work: no GPU has run them. For one training step's attention at a shape (GPT-2 124M:
L 12, NH 12, hs 64; B 32, T 1024 by default) it walks the kernels' tile loops as the kernels do
(64-row blocks of 4 warps x 16 rows, 64-row staged tiles, the warps' causal skips and 16-row
chunks) and counts per kernel: mma.sync m16n8k16 (4096 FLOPs each), the bytes ldmatrix reads
from shared memory (256 per mma: every mma reads its B operand once), and exp2 (one per score).
Then, per device, the time each unit would need at its peak:
    tensor cores   FLOPs / dense bf16 peak
    shared memory  ldmatrix bytes / (128 bytes per clock per SM x SMs x clock)
    MUFU (exp2)    exp2 count / (16 per clock per SM x SMs x clock)
and the prediction: FLOPs / (peak x e), e the efficiency FlashAttention-2-style kernels built on
mma.sync are published to reach: 0.5 of an A100's peak (the low end of FlashAttention-2's
50-73%, as our backward does 7 products where FlashAttention-2 does 5) and 0.35 of an H100's
(FlashAttention-2 on H100, from the FlashAttention-3 paper). The same efficiencies as
dev/perf's model (devices.json), which costs these kernels from the emulator's counters.

Constants and sources:
  H100 SXM5: 989.4 TFLOP/s dense bf16, 132 SMs, 1.83 GHz (the clock of that peak: 989.4e12 /
    (132 x 4096 FLOP per clock)), NVIDIA H100 datasheet and Hopper whitepaper.
  A100 SXM4 80GB: 312 TFLOP/s dense bf16, 108 SMs, 1.41 GHz, NVIDIA A100 datasheet, Ampere
    whitepaper.
  shared memory: 32 banks x 4 bytes per clock per SM (CUDA C++ Programming Guide, shared memory
    of compute capability 5.x and later).
  exp2f (MUFU.EX2): 16 results per clock per SM on compute capability 8.0 and 9.0 (CUDA C++
    Programming Guide, throughput of native arithmetic instructions); the FlashAttention-3 paper
    (Shah et al., 2024, arXiv:2407.08608) quotes the H100 SXM5's 3.9 TFLOPS of special functions.
  efficiencies: T. Dao, FlashAttention-2 (arXiv:2307.08691), section 4: 50-73% of the A100's
    peak; FlashAttention-3, section 1: FlashAttention-2 reaches 35% of the H100's peak.

usage: python3 dev/bench/attention_predict.py [-b 32] [-t 1024] [--layers 12] [--heads 12] [--hs 64]
"""
import argparse

ROWS = 64   # ATT_TC_ROWS: a block's rows, 4 warps of 16
STAGE = 64  # ATT_TC_STAGE: the other side's rows per staged tile
MMA_FLOPS = 2 * 16 * 8 * 16
DEVICES = {  # peak dense bf16 FLOP/s, SMs, clock (Hz), efficiency of mma.sync attention
    "H100 SXM": (989.4e12, 132, 1.83e9, 0.35),
    "A100 SXM": (312e12, 108, 1.41e9, 0.50),
}
SMEM_BYTES_PER_CLOCK = 128
EXP2_PER_CLOCK = 16


def counts(T, hs):
    """(mma, exp2) of each kernel for one (b, h), walking its loops"""
    n_blocks = (T + ROWS - 1) // ROWS
    c = {"forward": [0, 0], "backward dK/dV": [0, 0], "backward dQ": [0, 0]}
    for blk in range(n_blocks):
        r0 = blk * ROWS
        for w in range(4):
            lo = r0 + 16 * w  # the warp's first row
            # forward: key tiles up to min(r0 + 64, T); a warp computes a tile with a key <= its last row
            for k0 in range(0, min(r0 + ROWS, T), STAGE):
                if k0 <= lo + 15:
                    c["forward"][0] += (hs // 16) * (STAGE // 8) + (STAGE // 16) * (hs // 8)  # S, then P V
                    c["forward"][1] += 16 * STAGE
            # dK/dV: the block's keys are r0.., query tiles from r0 to T, 16 queries at a time
            for q0 in range(r0, T, STAGE):
                for ch in range(STAGE // 16):
                    if q0 + 16 * ch + 15 >= lo:  # not every query before every key
                        c["backward dK/dV"][0] += 4 * (hs // 8)  # S^T, dP^T, dV, dK
                        c["backward dK/dV"][1] += 256
            # dQ: the block's queries are r0.., key tiles up to min(r0 + 64, T), 16 keys at a time
            for k0 in range(0, min(r0 + ROWS, T), STAGE):
                for ch in range(STAGE // 16):
                    if k0 + 16 * ch <= lo + 15:
                        c["backward dQ"][0] += 3 * (hs // 8)  # S, dP, dQ
                        c["backward dQ"][1] += 256
    return c


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-b", type=int, default=32)
    ap.add_argument("-t", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--hs", type=int, default=64)
    a = ap.parse_args()
    per_head = counts(a.t, a.hs)
    heads = a.b * a.heads * a.layers
    causal = 4 * a.hs * a.t * (a.t + 1) / 2  # the forward's FLOPs of the visible scores only
    print(f"PREDICTED (no GPU has run these kernels): attention of one step, B={a.b} T={a.t} "
          f"layers={a.layers} heads={a.heads} hs={a.hs}, from the kernels' tile loops\n")
    print("| kernel | mma per (b,h) | TFLOP per step | device | tensor ms | shared ms | exp2 ms | predicted ms (FLOPs / (peak x e)) |")
    print("|---|---|---|---|---|---|---|---|")
    total = {d: 0.0 for d in DEVICES}
    for name, (mma, exp2) in per_head.items():
        flops = mma * MMA_FLOPS * heads
        for dev, (peak, sms, clock, eff) in DEVICES.items():
            t_tc = flops / peak
            t_smem = mma * 256 * heads / (SMEM_BYTES_PER_CLOCK * sms * clock)
            t_exp = exp2 * heads / (EXP2_PER_CLOCK * sms * clock)
            t = flops / (peak * eff)
            total[dev] += t
            print(f"| {name} | {mma} | {flops / 1e12:.3f} | {dev} | {t_tc * 1e3:.2f} | {t_smem * 1e3:.2f} | "
                  f"{t_exp * 1e3:.2f} | {t * 1e3:.2f} (e = {eff}) |")
    fwd = per_head["forward"][0] * MMA_FLOPS
    print(f"\nforward mma FLOPs / the visible scores' 4 hs FLOPs each: {fwd / causal:.3f} (the diagonal tiles' masked half)")
    for dev, t in total.items():
        print(f"{dev}: attention {t * 1e3:.1f} ms per step, PREDICTED")


if __name__ == "__main__":
    main()
