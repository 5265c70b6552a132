"""
fixtures.py: the model beside a measured fixture (dev/perf/measured/<card>_<date>/, made by
make_fixture.py), class by class. Used by test_perf_model.py (the tolerances), fit_constants.py
(the fitted constants) and `python3 dev/perf/fixtures.py [DIR] [--device D]` (the tables).

A fixture is the measurement of one tree (model_inputs.json: that tree's traced step, resources
and attention counts, taken from its code when the fixture was made), so the model costs the
kernels that ran, whatever today's tree holds. Classes group the kernels as the measured run's
README does; each class's measured ms per step is ncu's mean over the kept steps.
"""
import csv
import json
import os
import sys
from collections import OrderedDict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import perf_model as pm  # noqa: E402

MEASURED = os.path.join(HERE, "measured")

# kernel name (ncu's short name or the model's launch name) -> class
CLASSES = [
    ("attention forward", ("attention_forward_kernel",)),
    ("attention dK/dV", ("attention_backward_dkdv_kernel",)),
    ("attention dQ", ("attention_backward_dq_kernel",)),
    ("attention row-dot", ("attention_backward_rowdot_kernel",)),
    # the trainer's -ak 1 (llmc/attention_sm90.cuh): ncu_launches_ak1.csv
    ("attention forward sm_90a", ("attention_forward_sm90_kernel",)),
    ("attention dK/dV sm_90a", ("attention_backward_dkdv_sm90_kernel",)),
    ("attention dQ reduce", ("attention_backward_dq_reduce_kernel",)),
    ("AdamW", ("adamw_kernel",)),
    ("classifier + loss", ("fused_classifier_kernel", "fused_classifier_streamed_kernel", "fused_classifier_reread_kernel")),
    ("layernorm backward", ("layernorm_backward_kernel", "layernorm_backward_warp_kernel", "layernorm_backward_dweight_kernel")),
    ("layernorm forward", ("layernorm_forward_kernel",)),
    ("encoder backward", ("encoder_backward_dwte_kernel", "encoder_backward_dwpe_kernel")),
    ("encoder forward", ("encoder_forward_kernel",)),
    ("GELU forward", ("gelu_forward_kernel",)),
    ("GELU backward", ("gelu_backward_kernel",)),
    ("bias gradients", ("dbias_partial_kernel", "dbias_finish_kernel", "dbias_add_kernel")),
    # cuBLASLt's BGRADB epilogue (issue 30 item 2) runs as a kernel of its own after the dweight product
    ("cuBLASLt BGRADB epilogue", ("epilogue::globalKernelBgradAB_v2",)),
    ("grad norm", ("global_norm_partial_kernel", "global_norm_finish_kernel")),
    ("cuBLASLt split-K reduce", ("splitKreduce_kernel",)),
]
GEMM_CLASS = "cuBLASLt products"


def class_of(name):
    if name.startswith("nvjet") or name.startswith("cublasLt ") or name.startswith("sm90_xmma") or "gemm" in name:
        return GEMM_CLASS
    for cls, names in CLASSES:
        if name in names:
            return cls
    return None


def fixtures():
    """The fixture directories under dev/perf/measured/, sorted."""
    if not os.path.isdir(MEASURED):
        return []
    return sorted(os.path.join(MEASURED, d) for d in os.listdir(MEASURED)
                  if os.path.isfile(os.path.join(MEASURED, d, "meta.json")))


class Fixture:
    def __init__(self, path):
        self.path = path
        with open(os.path.join(path, "meta.json")) as fp:
            self.meta = json.load(fp)
        self.card = self.meta["card"]
        self.inputs = self.inputs_ak1 = None
        p = os.path.join(path, "model_inputs.json")
        if os.path.exists(p):
            with open(p) as fp:
                self.inputs = json.load(fp)
        p = os.path.join(path, "model_inputs_ak1.json")  # the tree traced with -ak 1 (make_fixture --ncu-ak1)
        if os.path.exists(p):
            with open(p) as fp:
                self.inputs_ak1 = json.load(fp)
                self.inputs_ak1["attention"] = "sm90"

    def measured_classes(self, ak1=False):
        """{class: ms per step} from ncu_launches.csv (ak1: ncu_launches_ak1.csv, the trainer with
        -ak 1) (mean over its steps), and the kernel ms per step."""
        p = os.path.join(self.path, "ncu_launches_ak1.csv" if ak1 else "ncu_launches.csv")
        if not os.path.exists(p):
            return None, None
        steps = self.meta["ncu_ak1" if ak1 else "ncu"]["steps"]
        out = OrderedDict()
        total = 0.0
        with open(p) as fp:
            for row in csv.DictReader(fp):
                cls = class_of(row["kernel"])
                if cls is None:
                    raise SystemExit("dev/perf: %s: kernel %s is in no class of fixtures.py" % (p, row["kernel"]))
                ms = float(row["ns"]) / 1e6 / steps
                out[cls] = out.get(cls, 0.0) + ms
                total += ms
        return out, total

    def steps(self):
        """[(B, recompute, ms)] of our trainer from steps.csv."""
        p = os.path.join(self.path, "steps.csv")
        if not os.path.exists(p):
            return []
        with open(p) as fp:
            return [(int(r["B"]), int(r["recompute"]), float(r["ms_per_step"]), int(r["T"]))
                    for r in csv.DictReader(fp) if r["trainer"] == "ours"]

    def steps_flags(self):
        """[(trainer, B, ms)] of steps_flags.csv (ours-ak, ours-cg, ours-ak-cg), -r 0 only."""
        p = os.path.join(self.path, "steps_flags.csv")
        if not os.path.exists(p):
            return []
        with open(p) as fp:
            return [(r["trainer"], int(r["B"]), float(r["ms_per_step"]), int(r["T"]))
                    for r in csv.DictReader(fp) if int(r["recompute"]) == 0]

    def bench(self):
        """{row: ms} of test_kernels --bench, and its B."""
        p = os.path.join(self.path, "kernels_bench.csv")
        if not os.path.exists(p):
            return None, None
        with open(p) as fp:
            return OrderedDict((r["kernel"], float(r["ms"])) for r in csv.DictReader(fp)), self.meta["bench"]["B"]


def predicted_classes(results):
    out = OrderedDict()
    for r in results:
        if r.launch.kind not in ("kernel", "gemm"):
            continue
        cls = class_of(r.launch.name)
        if cls is None:
            raise SystemExit("dev/perf: the model's kernel %s is in no class of fixtures.py" % r.launch.name)
        out[cls] = out.get(cls, 0.0) + r.time * 1e3
    return out


def compare(fx, dev):
    """The model beside fixture fx on device dev: {"classes": [(class, measured, predicted)], "kernels":
    (measured, predicted), "steps": [(B, measured, predicted)], "bench": [(row, measured, predicted)]}."""
    counts = fx.inputs
    out = {"classes": [], "kernels": None, "steps": [], "bench": []}
    meas, total = fx.measured_classes()
    if meas is not None:
        B, T = fx.meta["ncu"]["B"], fx.meta["ncu"]["T"]
        _, _, results, summ = pm.predict(counts, dev, B, T)
        pred = predicted_classes(results)
        for cls in list(meas) + [c for c in pred if c not in meas]:
            out["classes"].append((cls, meas.get(cls, 0.0), pred.get(cls, 0.0)))
        out["kernels"] = (total, summ["kernel_s"] * 1e3)
    for B, r, ms, T in fx.steps():
        if r != counts["trace"]["recompute"]:
            continue  # the fixture's trace is of -r 0 only
        _, _, _, summ = pm.predict(counts, dev, B, T)
        out["steps"].append((B, ms, summ["step_s"] * 1e3))
    # the trainer with -ak 1 (ncu_launches_ak1.csv, model_inputs_ak1.json) and the flags' steps
    out["classes_ak1"], out["steps_flags"] = [], []
    meas, total = fx.measured_classes(ak1=True)
    if meas is not None and fx.inputs_ak1 is not None:
        B, T = fx.meta["ncu_ak1"]["B"], fx.meta["ncu_ak1"]["T"]
        _, _, results, summ = pm.predict(fx.inputs_ak1, dev, B, T)
        pred = predicted_classes(results)
        for cls in list(meas) + [c for c in pred if c not in meas]:
            out["classes_ak1"].append((cls, meas.get(cls, 0.0), pred.get(cls, 0.0)))
    for trainer, B, ms, T in fx.steps_flags():
        import make_fixture
        attention, graph = make_fixture.FLAG_TRAINERS[trainer]
        counts = fx.inputs_ak1 if attention == "sm90" else fx.inputs
        if counts is None:
            continue
        _, _, _, summ = pm.predict(counts, dev, B, T, graph=graph)
        out["steps_flags"].append((trainer, B, ms, summ["step_s"] * 1e3))
    bench, bB = fx.bench()
    if bench:
        # test_kernels --bench runs the sm_90a attention wherever its build has it and the card is
        # compute capability 9.0 (attention_sm90_mode -1): a fixture measured with -ak 1 was built so
        # (gpu_check: GPU_COMPUTE_CAPABILITY=90a), and its -ak 1 trace holds those kernels' counts
        counts = fx.inputs_ak1 if fx.inputs_ak1 is not None and dev.cc == "9.0" else fx.inputs
        pred = pm.bench_predictions(counts, dev, bB, 1024)
        for row, ms in bench.items():
            if row in pred:
                out["bench"].append((row, ms, pred[row]))
    return out


# dev/gpu_check.sh names a card by nvidia-smi's model ("NVIDIA H100 80GB HBM3" -> h100); the
# devices.json entry it is costed with, where the names differ
CARD_DEVICES = {"h100": "h100-sxm", "a100": "a100-sxm-80gb"}


def device_key(fx):
    """devices.json's key for the fixture's card."""
    return CARD_DEVICES.get(fx.card, fx.card)


def device_for(fx, devices=None):
    devices = devices or pm.load_devices()
    return pm.Device(devices, device_key(fx))


def table(fx, dev, cmp=None):
    cmp = cmp or compare(fx, dev)
    lines = ["### %s, %s: measured beside the model (%s)" % (fx.card, fx.meta["date"], dev.name), ""]
    if cmp["classes"]:
        lines += ["| class (B=%d) | measured ms/step | predicted ms/step | predicted / measured |" % fx.meta["ncu"]["B"],
                  "|---|---:|---:|---:|"]
        for cls, m, p in cmp["classes"]:
            lines.append("| `%s` | %.3f | %.3f | %s |" % (cls, m, p, "%.2f" % (p / m) if m else "-"))
        m, p = cmp["kernels"]
        lines.append("| **all kernels** | **%.2f** | **%.2f** | **%.2f** |" % (m, p, p / m))
    for B, m, p in cmp["steps"]:
        lines.append("| **wall-clock step, B=%d** | **%.1f** | **%.1f** | **%.2f** |" % (B, m, p, p / m))
    flags = {"ours-ak": "-ak 1", "ours-cg": "-cg 1", "ours-ak-cg": "-ak 1 -cg 1"}
    for tr, B, m, p in cmp.get("steps_flags", []):
        lines.append("| **wall-clock step, B=%d, %s** | **%.1f** | **%.1f** | **%.2f** |" % (B, flags[tr], m, p, p / m))
    if cmp.get("classes_ak1"):
        lines += ["", "| class (B=%d, -ak 1) | measured ms/step | predicted ms/step | predicted / measured |" %
                  fx.meta["ncu_ak1"]["B"], "|---|---:|---:|---:|"]
        for cls, m, p in cmp["classes_ak1"]:
            lines.append("| `%s` | %.3f | %.3f | %s |" % (cls, m, p, "%.2f" % (p / m) if m else "-"))
    if cmp["bench"]:
        lines += ["", "| test_kernels --bench row (B=%d) | measured ms | predicted ms | predicted / measured |" % fx.meta["bench"]["B"],
                  "|---|---:|---:|---:|"]
        for row, m, p in cmp["bench"]:
            lines.append("| `%s` | %.4f | %.4f | %.2f |" % (row, m, p, p / m))
    return lines


if __name__ == "__main__":
    paths = [a for a in sys.argv[1:] if not a.startswith("--")] or fixtures()
    for path in paths:
        fx = Fixture(path)
        if fx.inputs is None:
            print("%s: no model_inputs.json (made with --no-trace): nothing to compare" % path)
            continue
        print("\n".join(table(fx, device_for(fx))))
        print()
