"""
make_fixture.py: a GPU run's raw files -> a measured fixture that dev/perf/test_perf_model.py holds
the performance model to (dev/perf/measured/<card>_<date>/).

    python3 dev/perf/make_fixture.py --out DIR --card NAME --date YYYY-MM-DD \
        [--ncu NCU.csv --ncu-steps N --ncu-batch B] [--steps STEPS.csv] [--bench BENCH.csv] \
        [--conditions TEXT] [--bench-batch 8] [--rev REV | --no-trace] \
        [--ncu-ak1 NCU_AK.csv] [--steps-flags STEPS_FLAGS.csv]
    python3 dev/perf/make_fixture.py --out DIR --card NAME --date YYYY-MM-DD --rev REV
        (no raw files: adds model_inputs.json to a fixture made with --no-trace)

Inputs (dev/gpu_check.sh leaves them in its LOGDIR; any may be .xz-compressed):
  --ncu    `ncu --clock-control none --metrics gpu__time_duration.sum --csv --page raw` over N
           training steps of ours at batch B, T = 1024. A step is found as the launches from one
           occurrence of the step's first kernel (--step-first, encoder_forward_kernel) to the next;
           the last N such spans are kept, and they must launch the same kernels in the same order.
  --steps  header trainer,B,T,recompute,ms_per_step,steps: median wall-clock ms per step.
  --bench  `./dev/cuda/test_kernels --bench --csv` as it is (kernel,ms,bytes,flops), at --bench-batch.
  --ncu-ak1      the same ncu run as --ncu with the trainer's -ak 1 (the sm_90a attention;
                 gpu_check.sh's ncu_ours_ak.csv), same --ncu-steps and --ncu-batch.
  --steps-flags  gpu_check.sh's steps_flags.csv: the header of --steps, trainer one of ours-ak
                 (-ak 1), ours-cg (-cg 1), ours-ak-cg (-ak 1 -cg 1).
What it writes in DIR:
  ncu_launches.csv   one row per launch of the kept steps: step, index in the step, the kernel's
                     short name, grid, block, registers, static and dynamic shared bytes,
                     ns (ncu's own numbers, nothing computed)
  steps.csv, kernels_bench.csv   the inputs, checked and copied
  ncu_launches_ak1.csv, steps_flags.csv   the same for --ncu-ak1 and --steps-flags
  model_inputs_ak1.json   the measured tree traced with -ak 1 (step_counts --attention sm90), when
                     --ncu-ak1 or an -ak row of --steps-flags is given
  model_inputs.json  what the model needs to cost the measured tree without re-tracing it: the
                     tree's traced step (step_counts.py: the launches in order, each cuBLASLt m x n x k,
                     ptxas resources, header fingerprints, the attention slice's emulator counts) for
                     --rev (default: the working tree, which is what gpu_check.sh measured);
                     --no-trace leaves it out (the test then skips the model comparison for DIR)
  meta.json, README.md   card, date, batch, conditions, the commands, and the sha256 of every input
A bad input stops with one line naming the file and what was expected.
"""
import argparse
import csv
import hashlib
import io
import json
import lzma
import os
import re
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

STEPS_HEADER = ["trainer", "B", "T", "recompute", "ms_per_step", "steps"]
TRAINERS = ("ours", "llmc_cudnn", "llmc", "torch_compile", "torch_eager")
# steps_flags.csv's trainers: ours with flags -> (the trainer's -ak as step_counts.ATTENTION's key, -cg 1)
FLAG_TRAINERS = {"ours-ak": ("sm90", False), "ours-cg": ("mma", True), "ours-ak-cg": ("sm90", True)}
BENCH_HEADER = ["kernel", "ms", "bytes", "flops"]


def die(msg):
    sys.stderr.write("make_fixture.py: %s\n" % msg)
    sys.exit(2)


def read_text(path):
    if not os.path.isfile(path):
        die("%s: no such file" % path)
    with open(path, "rb") as fp:
        raw = fp.read()
    if path.endswith(".xz"):
        try:
            raw = lzma.decompress(raw)
        except lzma.LZMAError as e:
            die("%s: not a valid .xz file (%s)" % (path, e))
    try:
        return raw.decode("utf-8"), hashlib.sha256(raw).hexdigest()
    except UnicodeDecodeError:
        die("%s: expected UTF-8 text" % path)


def short_name(n):
    """ncu's 'void attention_forward_kernel<64>(...)' -> attention_forward_kernel; cuBLASLt's as they are."""
    n = re.sub(r"\(.*", "", n)
    n = re.sub(r"<.*", "", n)
    n = n.replace("void ", "").strip()
    return n.split("::")[-1] if n.startswith("cublasLt::") else n


def num(s, path, what):
    try:
        return float(s.replace(",", ""))
    except ValueError:
        die("%s: expected a number for %s, got %r" % (path, what, s))


def read_ncu(path, steps, first):
    text, sha = read_text(path)
    lines = [l for l in text.splitlines() if l.startswith('"')]
    rows = list(csv.reader(lines))
    if not rows or "Kernel Name" not in rows[0] or "gpu__time_duration.sum" not in rows[0]:
        die("%s: expected ncu --csv --page raw output with columns 'Kernel Name' and gpu__time_duration.sum" % path)
    hdr = rows[0]
    col = {k: hdr.index(k) for k in hdr}
    units = None
    launches = []
    for row in rows[1:]:
        if row[col["ID"]] == "":
            units = row[col["gpu__time_duration.sum"]]
            continue
        get = lambda k, d="0": row[col[k]] if k in col and row[col[k]] != "" else d  # noqa: E731
        launches.append({
            "kernel": short_name(row[col["Kernel Name"]]),
            "grid": "%d,%d,%d" % tuple(int(num(get("launch__grid_dim_" + a, "1"), path, "grid")) for a in "xyz"),
            "block": int(num(get("launch__block_size", "0"), path, "block size")),
            "regs": int(num(get("launch__registers_per_thread"), path, "registers")),
            "smem_static": int(num(get("launch__shared_mem_per_block_static"), path, "shared memory")),
            "smem_dynamic": int(num(get("launch__shared_mem_per_block_dynamic"), path, "shared memory")),
            "ns": num(row[col["gpu__time_duration.sum"]], path, "gpu__time_duration.sum"),
        })
    scale = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6}.get(units or "ns")
    if scale is None:
        die("%s: unknown time unit %r for gpu__time_duration.sum" % (path, units))
    for l in launches:
        l["ns"] *= scale
    starts = [i for i, l in enumerate(launches) if l["kernel"] == first]
    if len(starts) < steps:
        die("%s: expected %d training steps (each starting with %s), found %d" % (path, steps, first, len(starts)))
    starts = starts[-steps:] + [len(launches)]
    spans = [launches[a:b] for a, b in zip(starts, starts[1:])]
    seq = [l["kernel"] for l in spans[0]]
    for k, s in enumerate(spans[1:], 2):
        if [l["kernel"] for l in s] != seq:
            die("%s: step %d launches other kernels than step 1 (%d vs %d launches): not %d training steps at the end "
                "of the file" % (path, k, len(s), len(seq), steps))
    return spans, sha, len(launches)


def read_csv_checked(path, header, what):
    text, sha = read_text(path)
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or [h.strip() for h in rows[0]] != header:
        die("%s: expected the header %s (%s)" % (path, ",".join(header), what))
    return rows, text, sha


def main(argv=None):
    ap = argparse.ArgumentParser(description="a GPU run's raw files -> dev/perf/measured/<card>_<date>/")
    ap.add_argument("--out", required=True)
    ap.add_argument("--card", required=True, help="e.g. h200")
    ap.add_argument("--date", required=True, help="YYYY-MM-DD of the run")
    ap.add_argument("--ncu")
    ap.add_argument("--ncu-steps", type=int)
    ap.add_argument("--ncu-batch", type=int)
    ap.add_argument("--ncu-seq", type=int, default=1024)
    ap.add_argument("--step-first", default="encoder_forward_kernel", help="the first kernel of a training step")
    ap.add_argument("--steps")
    ap.add_argument("--ncu-ak1", help="ncu as --ncu, of the trainer with -ak 1")
    ap.add_argument("--steps-flags", help="steps_flags.csv: ours with -ak 1 / -cg 1")
    ap.add_argument("--bench")
    ap.add_argument("--bench-batch", type=int, default=8, help="test_kernels --bench's -b (default 8)")
    ap.add_argument("--conditions", default="", help="free text: the card, driver, commit, build, flags")
    ap.add_argument("--rev", default=None, help="the measured tree as a git revision (default: the working tree)")
    ap.add_argument("--no-trace", action="store_true", help="write no model_inputs.json")
    a = ap.parse_args(argv)
    if not re.fullmatch(r"\d{4}-\d\d-\d\d", a.date):
        die("--date: expected YYYY-MM-DD, got %r" % a.date)
    if not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", a.card):
        die("--card: expected a lower-case name such as h200, got %r" % a.card)
    if (a.ncu or a.ncu_ak1) and (not a.ncu_steps or a.ncu_steps < 1 or not a.ncu_batch or a.ncu_batch < 1):
        die("--ncu needs --ncu-steps N >= 1 and --ncu-batch B >= 1")
    trace_only = not (a.ncu or a.steps or a.bench or a.ncu_ak1 or a.steps_flags)
    if trace_only and a.no_trace:
        die("nothing to do: give --ncu, --steps or --bench (or none of them, to add model_inputs.json to a fixture)")
    os.makedirs(a.out, exist_ok=True)
    meta = {"card": a.card, "date": a.date, "conditions": a.conditions, "inputs": {}, "T": a.ncu_seq}
    if trace_only:  # a fixture made with --no-trace (e.g. on the GPU machine): add the measured tree's trace
        path = os.path.join(a.out, "meta.json")
        if not os.path.exists(path):
            die("%s: no fixture there to add model_inputs.json to (give --ncu, --steps or --bench)" % a.out)
        with open(path) as fp:
            meta = json.load(fp)
        if (meta["card"], meta["date"]) != (a.card, a.date):
            die("%s: the fixture is of %s %s, not %s %s" % (a.out, meta["card"], meta["date"], a.card, a.date))
    cmd = "python3 dev/perf/make_fixture.py " + " ".join(
        ("'%s'" % x if " " in x else x) for x in (argv if argv is not None else sys.argv[1:]))
    def keep_ncu(path, key, out_name):  # an ncu file's kept steps, one row per launch, and meta[key]
        spans, sha, n_all = read_ncu(path, a.ncu_steps, a.step_first)
        with open(os.path.join(a.out, out_name), "w", newline="") as fp:
            w = csv.writer(fp)
            w.writerow(["step", "index", "kernel", "grid", "block", "regs", "smem_static", "smem_dynamic", "ns"])
            for s, span in enumerate(spans, 1):
                for i, l in enumerate(span):
                    w.writerow([s, i, l["kernel"], l["grid"], l["block"], l["regs"], l["smem_static"], l["smem_dynamic"],
                                "%.0f" % l["ns"]])
        meta[key] = {"steps": a.ncu_steps, "B": a.ncu_batch, "T": a.ncu_seq, "launches_per_step": len(spans[0]),
                     "launches_in_file": n_all,
                     "kernel_ms_per_step": [round(sum(l["ns"] for l in s) / 1e6, 4) for s in spans]}
        meta["inputs"][key] = {"file": os.path.basename(path), "sha256": sha}

    if a.ncu:
        keep_ncu(a.ncu, "ncu", "ncu_launches.csv")
    if a.steps:
        rows, text, sha = read_csv_checked(a.steps, STEPS_HEADER, "median wall-clock ms per step")
        for r in rows[1:]:
            if len(r) != len(STEPS_HEADER) or r[0] not in TRAINERS:
                die("%s: row %s: expected trainer one of %s and %d columns" % (a.steps, r, "/".join(TRAINERS), len(STEPS_HEADER)))
            for k in (1, 2, 3, 5):
                if not r[k].strip().isdigit():
                    die("%s: row %s: %s must be an integer" % (a.steps, r, STEPS_HEADER[k]))
            num(r[4], a.steps, "ms_per_step")
        with open(os.path.join(a.out, "steps.csv"), "w") as fp:
            fp.write(text)
        meta["inputs"]["steps"] = {"file": os.path.basename(a.steps), "sha256": sha}
    if a.ncu_ak1:
        keep_ncu(a.ncu_ak1, "ncu_ak1", "ncu_launches_ak1.csv")
    need_ak1 = bool(a.ncu_ak1)
    if a.steps_flags:
        rows, text, sha = read_csv_checked(a.steps_flags, STEPS_HEADER, "median wall-clock ms per step, ours with flags")
        for r in rows[1:]:
            if len(r) != len(STEPS_HEADER) or r[0] not in FLAG_TRAINERS:
                die("%s: row %s: expected trainer one of %s and %d columns" % (a.steps_flags, r, "/".join(FLAG_TRAINERS),
                                                                              len(STEPS_HEADER)))
            for k in (1, 2, 3, 5):
                if not r[k].strip().isdigit():
                    die("%s: row %s: %s must be an integer" % (a.steps_flags, r, STEPS_HEADER[k]))
            num(r[4], a.steps_flags, "ms_per_step")
            need_ak1 |= FLAG_TRAINERS[r[0]][0] == "sm90"
        with open(os.path.join(a.out, "steps_flags.csv"), "w") as fp:
            fp.write(text)
        meta["inputs"]["steps_flags"] = {"file": os.path.basename(a.steps_flags), "sha256": sha}
    if trace_only:
        need_ak1 = "ncu_ak1" in meta or "steps_flags" in meta.get("inputs", {})
    if a.bench:
        rows, text, sha = read_csv_checked(a.bench, BENCH_HEADER, "test_kernels --bench --csv")
        for r in rows[1:]:
            if len(r) != 4:
                die("%s: row %s: expected 4 columns" % (a.bench, r))
            num(r[1], a.bench, "ms")
        with open(os.path.join(a.out, "kernels_bench.csv"), "w") as fp:
            fp.write(text)
        meta["bench"] = {"B": a.bench_batch, "T": 1024}
        meta["inputs"]["bench"] = {"file": os.path.basename(a.bench), "sha256": sha}
    if not a.no_trace:
        import step_counts
        counts = step_counts.counts_for(a.rev, 0, a.ncu_seq)
        rev = a.rev or "the working tree"
        try:
            import subprocess
            head = subprocess.run(["git", "rev-parse", "HEAD" if a.rev is None else a.rev], cwd=step_counts.REPO,
                                  stdout=subprocess.PIPE, text=True).stdout.strip()
        except OSError:
            head = ""
        keep = {k: counts[k] for k in ("headers", "label", "key", "trace", "step_ops", "resources", "attention_slice")}
        keep["rev"] = rev
        keep["commit"] = head
        keep["defines"] = counts["defines"]
        with open(os.path.join(a.out, "model_inputs.json"), "w") as fp:
            json.dump(keep, fp)
        meta["model_inputs"] = {"rev": rev, "commit": head, "tree_key": counts["key"]}
        if need_ak1:  # the same tree traced with -ak 1 (its own emulated build and slice: minutes more)
            c90 = step_counts.counts_for(a.rev, 0, a.ncu_seq, attention="sm90")
            keep90 = {k: c90[k] for k in ("headers", "label", "key", "trace", "step_ops", "resources", "attention_slice")}
            keep90.update(rev=rev, commit=head, defines=keep["defines"])
            with open(os.path.join(a.out, "model_inputs_ak1.json"), "w") as fp:
                json.dump(keep90, fp)
            meta["model_inputs_ak1"] = {"rev": rev, "commit": head, "tree_key": c90["key"]}
    if trace_only:
        meta["trace_command"] = cmd
        with open(os.path.join(a.out, "meta.json"), "w") as fp:
            json.dump(meta, fp, indent=1)
        with open(os.path.join(a.out, "README.md"), "a") as fp:
            fp.write("- model_inputs.json added by `%s`: the measured tree's traced step (%s, commit %s)\n" % (
                cmd, meta["model_inputs"]["rev"], meta["model_inputs"]["commit"][:12]))
        print("make_fixture.py: added model_inputs.json to %s" % a.out)
        return
    meta["command"] = cmd
    with open(os.path.join(a.out, "meta.json"), "w") as fp:
        json.dump(meta, fp, indent=1)
    lines = ["# Measured on %s, %s (a fixture for dev/perf/test_perf_model.py)" % (a.card, a.date), "",
             "Made by `%s` from the run's raw files; nothing here is a prediction." % cmd, ""]
    if a.conditions:
        lines += ["Conditions: " + a.conditions, ""]
    for k, inp in meta["inputs"].items():
        lines.append("- %s: `%s`, sha256 %s" % (k, inp["file"], inp["sha256"]))
    if "ncu" in meta:
        lines.append("- ncu: %d steps at B=%d, T=%d; %d launches per step; kernel ms per step %s" % (
            a.ncu_steps, a.ncu_batch, a.ncu_seq, meta["ncu"]["launches_per_step"], meta["ncu"]["kernel_ms_per_step"]))
    if "ncu_ak1" in meta:
        lines.append("- ncu -ak 1: %d steps at B=%d, T=%d; %d launches per step; kernel ms per step %s" % (
            a.ncu_steps, a.ncu_batch, a.ncu_seq, meta["ncu_ak1"]["launches_per_step"], meta["ncu_ak1"]["kernel_ms_per_step"]))
    if "model_inputs_ak1" in meta:
        lines.append("- model_inputs_ak1.json: the same tree traced with -ak 1 (step_counts.py --attention sm90)")
    if "model_inputs" in meta:
        lines.append("- model_inputs.json: the measured tree's traced step (%s, commit %s), as dev/perf/step_counts.py "
                     "reads it from the code" % (meta["model_inputs"]["rev"], meta["model_inputs"]["commit"][:12]))
    with open(os.path.join(a.out, "README.md"), "w") as fp:
        fp.write("\n".join(lines) + "\n")
    print("make_fixture.py: wrote %s" % a.out)


if __name__ == "__main__":
    main()
