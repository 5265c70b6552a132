"""
Measured beside predicted, for the first GPU run (dev/gpu_check.sh calls this after its benchmarks):
each row of `dev/cuda/test_kernels --bench --csv` joined by name with the performance model's
prediction of the same row at the same shape, and each batch size of dev/bench/bench_cuda.sh with
the predicted step. The table is written for dev/cuda/NOTES.md, which keeps predicted and measured
side by side; measured / predicted far from 1 says which constant or count of dev/perf is wrong.

    python3 dev/perf/join_measured.py --gpu-name "NVIDIA H100 80GB HBM3" --kernels kernels_bench.csv \\
        --bench-b 8 --bench-t 1024 [--steps bench.txt] [--out perf_check.md]
"""
import argparse
import csv
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perf_model as pm  # noqa: E402
import step_counts  # noqa: E402

# nvidia-smi's name -> devices.json's key (a part the model has no constants for is refused)
GPU_NAMES = [(r"H100.*(HBM3|SXM)", "h100-sxm"), (r"A100.*SXM.*80|A100-SXM4-80GB|A100 80GB", "a100-sxm-80gb")]


def device_key(gpu_name):
    for pat, key in GPU_NAMES:
        if re.search(pat, gpu_name):
            return key
    return None


def read_kernels(path):
    with open(path) as fp:
        return {row["kernel"]: float(row["ms"]) for row in csv.DictReader(fp)}


def read_steps(path):
    """bench_cuda.sh's table: 'B ok tok/s MFU GPU-MB log' rows."""
    out = {}
    with open(path) as fp:
        for line in fp:
            f = line.split()
            if len(f) >= 4 and f[1] == "ok" and f[0].isdigit():
                out[int(f[0])] = float(f[2])
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--gpu-name", required=True, help="nvidia-smi's name of the GPU")
    ap.add_argument("--kernels", required=True, help="test_kernels --bench --csv FILE")
    ap.add_argument("--bench-b", type=int, default=8)
    ap.add_argument("--bench-t", type=int, default=1024)
    ap.add_argument("--steps", default=None, help="bench_cuda.sh's output (tokens/s per B)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    key = device_key(a.gpu_name)
    if key is None:
        raise SystemExit("dev/perf/join_measured.py: no constants for '%s' in dev/perf/devices.json (H100 SXM and "
                         "A100 SXM 80GB are there): add the part, with its sources, to compare" % a.gpu_name)
    dev = pm.Device(pm.load_devices(), key)
    counts = step_counts.counts_for(None, 0, a.bench_t)
    pred = pm.bench_predictions(counts, dev, a.bench_b, a.bench_t)
    meas = read_kernels(a.kernels)
    lines = ["### Kernels: measured on %s beside predicted for %s (B=%d, T=%d, bf16)" % (a.gpu_name, dev.name, a.bench_b, a.bench_t),
             "", "| kernel | measured ms | predicted ms | measured / predicted |", "|---|---:|---:|---:|"]
    for row, p in pred.items():
        m = meas.get(row)
        lines.append("| %s | %s | %.4f | %s |" % (row, "%.4f" % m if m is not None else "-", p,
                                                   "%.2f" % (m / p) if m is not None and p > 0 else "-"))
    for row in meas:
        if row not in pred:
            lines.append("| %s | %.4f | - (not modelled for this tree) | - |" % (row, meas[row]))
    if a.steps:
        steps = read_steps(a.steps)
        lines += ["", "### Steps (GPT-2 124M, T=%d, -r 0): measured (dev/bench/bench_cuda.sh) beside predicted" % a.bench_t, "",
                  "| B | measured tok/s | predicted tok/s | measured / predicted | predicted ms/step | predicted MFU |",
                  "|---:|---:|---:|---:|---:|---:|"]
        for B in sorted(steps):
            S, _, _, s = pm.predict(counts, dev, B, a.bench_t)
            lines.append("| %d | %.0f | %.0f | %.2f | %.1f | %.1f%% |" % (B, steps[B], s["tokens_per_s"], steps[B] / s["tokens_per_s"],
                                                                     s["step_s"] * 1e3, 100 * s["mfu"]))
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if a.out:
        with open(a.out, "w") as fp:
            fp.write(text)


if __name__ == "__main__":
    main()
