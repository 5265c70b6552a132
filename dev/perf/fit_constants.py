"""
fit_constants.py: the constants of devices.json marked FITTED, fitted again on a measured fixture,
printed with what each was fitted on (nothing is written: devices.json keeps the values, with their
notes). `python3 dev/perf/fit_constants.py [DIR]` (default dev/perf/measured/h200_2026-11-28).

Each constant is fitted on the few kernels whose time it sets at the fixture's ncu batch, by a
search for the value with the least worst-case log error over those kernels; everything else the
test holds the model to (the other classes, the step at another batch, the B=8 kernel bench) is
out of the fit.
  launch_gap_us      = (wall-clock ms per step - ncu kernel ms per step) / kernel launches per step
  stream_tb_s        on: GELU forward, GELU backward, layernorm forward (the plain streams)
  dram_chain_ns      on: encoder backward, grad norm (chains of dependent round trips)
  barrier_ns         on: layernorm backward (then, with dram_chain_ns fixed)
  local_store_tb_s   on: AdamW (the one kernel with a stack frame)
  l2_staging_tb_s, mma_sync_fraction  on: attention forward, dK/dV, dQ (barrier_ns fixed)
  wgmma_attention_fraction  on: cuDNN's wgmma flash attention forward in the same run (llm.c +
                     cuDNN, run/ncu_llmc_cudnn.csv.xz): not a kernel of ours (none such was measured)
  wgmma_wait_ns      on: our sm_90a forward (-ak 1), a fixture measured with -ak 1 (the 1f4c85f
                     run: `python3 dev/perf/fit_constants.py dev/perf/measured/h200_2026-11-28_1f4c85f`)
"""
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fixtures  # noqa: E402
import perf_model as pm  # noqa: E402

STREAM_CLASSES = ("GELU forward", "GELU backward", "layernorm forward")
LATENCY_CLASSES = ("encoder backward", "grad norm")  # chains of round trips, no barriers to speak of
BARRIER_CLASSES = ("layernorm backward",)          # a chain of 32 rows of 1 round trip and 4 barriers
ATTENTION_CLASSES = ("attention forward", "attention dK/dV", "attention dQ")


def class_errors(fx, dev, classes):
    counts = fx.inputs
    B, T = fx.meta["ncu"]["B"], fx.meta["ncu"]["T"]
    _, _, results, _ = pm.predict(counts, dev, B, T)
    pred = fixtures.predicted_classes(results)
    meas, _ = fx.measured_classes()
    return {c: pred.get(c, 0.0) / meas[c] for c in classes}


def search(fx, dev, attrs, grids, classes):
    best = None
    for values in _product(grids):
        for a, val in zip(attrs, values):
            setattr(dev, a, val)
        err = class_errors(fx, dev, classes)
        worst = max(abs(math.log(r)) for r in err.values())
        if best is None or worst < best[0]:
            best = (worst, values, err)
    for a, val in zip(attrs, best[1]):
        setattr(dev, a, val)
    return best


def _product(grids):
    if not grids:
        yield ()
        return
    for x in grids[0]:
        for rest in _product(grids[1:]):
            yield (x,) + rest


WGMMA_WAIT_CLASS = "attention forward sm_90a"  # our serial sm_90a forward (2 waits a tile), -ak 1


def fit_wgmma_wait(fx, dev):
    """wgmma_wait_ns (perf_model.att90_chain) on the fixture's -ak 1 ncu time of our sm_90a forward:
    the value whose prediction equals the measurement (the prediction grows with it: bisection to
    1 ns). None where the fixture has no -ak 1 measurement. Returns (ns, predicted/measured of the
    dK/dV kernel at that value: not fitted on)."""
    meas, _ = fx.measured_classes(ak1=True)
    if meas is None or fx.inputs_ak1 is None or WGMMA_WAIT_CLASS not in meas:
        return None
    B, T = fx.meta["ncu_ak1"]["B"], fx.meta["ncu_ak1"]["T"]
    saved = dev.wgmma_wait

    def pred(ns):
        dev.wgmma_wait = ns * 1e-9
        _, _, results, _ = pm.predict(fx.inputs_ak1, dev, B, T)
        return fixtures.predicted_classes(results)
    try:
        lo, hi = 0.0, 5000.0
        while hi - lo > 1.0:
            mid = (lo + hi) / 2
            if pred(mid)[WGMMA_WAIT_CLASS] < meas[WGMMA_WAIT_CLASS]:
                lo = mid
            else:
                hi = mid
        ns = round((lo + hi) / 2)
        p = pred(ns)
        return ns, p["attention dK/dV sm_90a"] / meas["attention dK/dV sm_90a"]
    finally:
        dev.wgmma_wait = saved


def cudnn_wgmma_fraction(path, dev, T=1024, hs=64, B=32, NH=12, L=12, first=552, last=987):
    """The achieved rate of cuDNN's sm90 wgmma flash attention (forward, and its backward as a check)
    over the dense bf16 peak, from the run's ncu file of llm.c + cuDNN (launches first..last are one
    training step at B=32, run/README.md). FLOPs as issued: 2 products forward (q k^T, P v) over the
    causal tiles with the diagonal tiles whole, for the tile sizes in the kernels' names (forward
    64 x 128, backward 64 x 64); the backward kernel taken to run 4 products per tile (q k^T,
    dout v^T, P^T dout, dS^T q; cuDNN's separate matmul_dq kernel the fifth): an assumption."""
    import csv
    import lzma
    f = os.path.join(path, "run", "ncu_llmc_cudnn.csv.xz")
    if not os.path.exists(f):
        return None
    with lzma.open(f, "rt") as fp:
        lines = [l for l in fp if l.startswith('"')]
    rows = csv.reader(lines)
    hdr = next(rows)
    ki, ti, ii = hdr.index("Kernel Name"), hdr.index("gpu__time_duration.sum"), hdr.index("ID")
    ns = {"flash_fprop": 0.0, "flash_bprop": 0.0}
    for row in rows:
        if row[0] == "" or not row[ii].isdigit() or not first <= int(row[ii]) <= last:
            continue
        for key in ns:
            if key in row[ki]:
                ns[key] += float(row[ti].replace(",", ""))

    def causal_tiles(br, bc):
        return sum(-(-min(br * (i + 1), T) // bc) for i in range(-(-T // br)))

    fwd = 2 * 2 * 64 * 128 * hs * causal_tiles(64, 128) * B * NH * L
    bwd = 4 * 2 * 64 * 64 * hs * causal_tiles(64, 64) * B * NH * L
    return {"forward": fwd / (ns["flash_fprop"] * 1e-9) / dev.tc, "backward": bwd / (ns["flash_bprop"] * 1e-9) / dev.tc,
            "forward_ms": ns["flash_fprop"] / 1e6, "backward_ms": ns["flash_bprop"] / 1e6, "forward_gflop": fwd / 1e9}


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(fixtures.MEASURED, "h200_2026-11-28")
    fx = fixtures.Fixture(path)
    dev = fixtures.device_for(fx)
    meas, kernel_ms = fx.measured_classes()
    B = fx.meta["ncu"]["B"]
    wall = [ms for b, r, ms, _ in fx.steps() if b == B and r == 0][0]
    launches = fx.meta["ncu"]["launches_per_step"]
    gap = (wall - kernel_ms) / launches * 1e3
    print("launch_gap_us = (%.1f - %.2f ms) / %d launches = %.2f us" % (wall, kernel_ms, launches, gap))
    dev.launch_gap = gap * 1e-6
    # the curve's height: bw_scale x the curve's best copy point x the datasheet peak = stream_tb_s
    best_copy = dev.bw * dev.bw_best("scale", scaled=False)
    w, vals, err = search(fx, dev, ("bw_scale",), [[x / 100 * 1e12 / best_copy for x in range(250, 451)]], STREAM_CLASSES)
    print("stream_tb_s = %.2f (fitted on %s at B=%d: predicted/measured %s)" % (
        vals[0] * best_copy / 1e12, ", ".join(STREAM_CLASSES), B, ", ".join("%.2f" % e for e in err.values())))
    w, vals, err = search(fx, dev, ("chain_latency",), [[x * 1e-9 for x in range(300, 801, 5)]], LATENCY_CLASSES)
    print("dram_chain_ns = %.0f (fitted on %s at B=%d: predicted/measured %s)" % (
        vals[0] * 1e9, ", ".join(LATENCY_CLASSES), B, ", ".join("%.2f" % e for e in err.values())))
    w, vals, err = search(fx, dev, ("barrier",), [[x * 1e-9 for x in range(0, 1001, 4)]], BARRIER_CLASSES)
    print("barrier_ns = %.0f (fitted on %s at B=%d: predicted/measured %s)" % (
        vals[0] * 1e9, ", ".join(BARRIER_CLASSES), B, ", ".join("%.2f" % e for e in err.values())))
    w, vals, err = search(fx, dev, ("local_bw",), [[x * 1e11 for x in range(20, 121)]], ("AdamW",))
    print("local_store_tb_s = %.1f (fitted on AdamW at B=%d: predicted/measured %.2f)" % (vals[0] / 1e12, B, err["AdamW"]))
    w, vals, err = search(fx, dev, ("l2_bw", "mma_sync"),
                          [[x * 1e11 for x in range(20, 81, 2)], [x / 100 for x in range(30, 101, 5)]], ATTENTION_CLASSES)
    print("l2_staging_tb_s = %.1f, mma_sync_fraction = %.2f (fitted on %s at B=%d: predicted/measured %s)" % (
        vals[0] / 1e12, vals[1], ", ".join(ATTENTION_CLASSES), B, ", ".join("%.2f" % e for e in err.values())))
    fit = fit_wgmma_wait(fx, dev)
    if fit is not None:
        print("wgmma_wait_ns = %d (fitted on our sm_90a forward, -ak 1, at B=%d; the dK/dV kernel, not fitted on: "
              "predicted/measured %.2f)" % (fit[0], fx.meta["ncu_ak1"]["B"], fit[1]))
    w = cudnn_wgmma_fraction(path, dev)
    if w is not None:
        print("wgmma_attention_fraction = %.2f (calibrated on cuDNN's wgmma flash forward, not ours: %.0f GFLOP issued in "
              "%.3f ms per step at B=32; its backward reaches %.2f in %.3f ms, not fitted on)" % (
                  w["forward"], w["forward_gflop"], w["forward_ms"], w["backward"], w["backward_ms"]))


if __name__ == "__main__":
    main()
