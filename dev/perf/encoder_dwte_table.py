"""
The encoder backward's dwte kernel (llmc/encoder.cuh), PREDICTED (not measured) ms per launch,
before (a git revision) and after (the working tree): on tiny Shakespeare's first B*T tokens at
B = 32 and 64 (T = 1024), and on B = 32 batches of 15,000 and 29,000 distinct tokens. Each tree's
kernel is costed by perf_model.py's rules with the function kernel_costs.py derived from that
tree's llmc/encoder.cuh (DERIVED_FROM) and that tree's ptxas registers (step_counts: cached, else
~3 minutes of emulated build, trace and nvcc per tree).

The synthetic batches: B*T tokens drawn uniformly (a fixed seed) from U equally likely tokens, U
chosen so that the expected number of distinct ones, U (1 - (1 - 1/U)^(B T)), is the asked D (U
is larger than GPT-2's vocabulary at 29,000: a stand-in for a corpus less repetitive than tiny
Shakespeare, not a real one). The table prints the D and the longest bucket the draw gave.

usage: python3 dev/perf/encoder_dwte_table.py [--device h200] [--baseline REV]
"""
import argparse
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernel_costs as kc  # noqa: E402
import perf_model as pm  # noqa: E402
import step_counts  # noqa: E402

NAME = "encoder_backward_dwte_kernel"
FLOOR_TB_S = 4.3  # issue 30's byte floor: the bytes that must move at ~4.3 TB/s


def uniform_sizes(BT, D, seed=30):
    """Bucket sizes (ascending token order) of BT uniform draws from U tokens, E[distinct] = D."""
    lo, hi = float(D), float(D) * 1000
    for _ in range(200):  # bisection on U: the expected distinct count grows with U
        U = (lo + hi) / 2
        if U * (1 - (1 - 1 / U) ** BT) < D:
            lo = U
        else:
            hi = U
    rng = random.Random(seed)
    counts = {}
    for _ in range(BT):
        t = rng.randrange(int(round(U)))
        counts[t] = counts.get(t, 0) + 1
    return [counts[t] for t in sorted(counts)], int(round(U))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--device", default="h200", help="a key of devices.json")
    ap.add_argument("--baseline", default="3b2db94", help="git revision of 'before' (default: main before branch dwte)")
    a = ap.parse_args(argv)
    dev = pm.Device(pm.load_devices(), a.device)
    trees = [("before (%s)" % a.baseline, step_counts.counts_for(a.baseline, 0)),
             ("after (working tree)", step_counts.counts_for(None, 0))]
    cfg = kc.config_for_depth(12)
    rows = []
    for B in (32, 64):
        sizes = pm.data_bucket_sizes(B, 1024)
        rows.append(("tiny Shakespeare's first B T tokens, B=%d" % B, B, sizes))
    for D in (15000, 29000):
        sizes, U = uniform_sizes(32 * 1024, D)
        rows.append(("B=32, uniform draws from %d tokens (E[distinct] %d)" % (U, D), 32, sizes))
    print("# PREDICTED, not measured: %s ms per launch, one %s (dev/perf's rules; chain %.0f ns a round trip, "
          "%.0f ns a barrier)" % (NAME, dev.name, dev.chain_latency * 1e9, dev.barrier * 1e9))
    print("| batch (T=1024) | distinct | longest | short (<= 8) | %s | %s | bound (after) | byte floor at %.1f TB/s |" % (
        trees[0][0], trees[1][0], FLOOR_TB_S))
    print("|---|---:|---:|---:|---:|---:|---|---:|")
    for label, B, sizes in rows:
        S = kc.Shape(B, 1024, distinct_tokens=len(sizes), max_bucket=max(sizes), bucket_sizes=sizes, **cfg)
        ms = []
        for _, counts in trees:
            r = pm.kernel_result(pm.Launch("kernel", NAME, "backward", {}), S, dev, counts)
            ms.append(r)
        after = ms[1]
        print("| %s | %d | %d | %d | %.3f | %.3f | %s | %.3f |" % (
            label, len(sizes), max(sizes), sum(1 for n in sizes if n <= 8), ms[0].time * 1e3, after.time * 1e3,
            after.bound, after.cost.dram / (FLOOR_TB_S * 1e12) * 1e3))


if __name__ == "__main__":
    main()
