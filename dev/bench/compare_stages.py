"""
Compare the ZeRO stages by flag: runs a trainer at stages 0-3 on N ranks (mpirun), a few steps
each, and reports per stage what each rank holds (allocated per category, the plan's
prediction, the measured peak: RSS on the CPU, allocated GPU memory on CUDA), what it sends per
step per collective kind (measured and planned), step time, tok/s and the losses, which must be
the same for all four stages.

Writes into --out: compare.md (the table, also printed), compare.csv, and PNG charts:
memory.png (stacked bytes per rank per stage), comm.png (bytes sent per step), throughput.png,
loss.png (the four loss curves overlaid) and memory_vs_ranks.png (bytes per rank against N =
1, 2, 4, 8 from the plan, with the measured points of this run). With --auto MB, one more run
with -z auto -zm MB: the stage it picked and every stage's total it printed go under the table,
into auto.csv and onto memory.png. With --groups G [G ...], one more run per G of stage
--group-stage (default 3) with hybrid sharding -zg G: a second table under the first (memory per
rank, bytes inside the group and across the groups, each measured and planned, losses), groups.csv
and groups.png (memory per rank and bytes per step against G, with stage 0 and the plain stage).
into auto.csv and onto memory.png. With --unit-blocks K,K,... stage 3 runs once per unit size
(-zu K; K = 1 is the stage-3 run above): a second table (units.md, also in compare.md),
units.csv and units.png (memory per rank and collectives per step against K).
With --offload (a CUDA trainer), stages 1-3 run once more with
-zo 1 (the optimizer state in host memory): one more table (GPU state with and without it, the
pinned host bytes, the PCIe bytes per step, each against the plan; the losses must equal the
stage's run without offload), offload.csv and offload.png.
With --timeline, every run is traced (-zt) and one step of each is drawn (dev/bench/timeline.py):
timeline_z0.png ... timeline_z3.png, and stage 3 once more with -zr always and -zr never
(timeline_z3_always.png, timeline_z3_never.png): per rank a compute row and a communication row
(each collective from its issue to its done, numbered, with the line that issued it), rank 0's
gather and gradient slots, and the memory each rank holds over the step; timeline_z3.md lists the
stage-3 step's collectives with their issuing lines. Every traced step's collectives must be the
plan's (dev/bench/zero_plan_print --collectives: count, order, units, bytes). An emulated CUDA
trainer then runs with EMU_SCHEDULE=eager (queued work runs as soon as it may).

    /usr/bin/python3 dev/bench/compare_stages.py                       # tiny model, N=4 (what CI runs)
    /usr/bin/python3 dev/bench/compare_stages.py --model gpt2_124M.bin --ranks 4 --steps 4
    /usr/bin/python3 dev/bench/compare_stages.py --recompute 2 --auto 80  # -r 2 everywhere; -z auto -zm 80
    /usr/bin/python3 dev/bench/compare_stages.py --groups 1 2             # + stage 3 in shard groups of 1 and 2
    /usr/bin/python3 dev/bench/compare_stages.py --unit-blocks 1,2        # stage 3 with 1 and 2 blocks per unit
    /usr/bin/python3 dev/bench/compare_stages.py --trainer ./train_gpt2cu --ranks 2 --steps 3     # a GPU
    /usr/bin/python3 dev/bench/compare_stages.py --trainer ./train_gpt2cu_emu --ranks 2 --steps 2 # the CPU emulator
    /usr/bin/python3 dev/bench/compare_stages.py --trainer ./train_gpt2cu_emu --ranks 2 --steps 2 --offload  # + -zo 1
    /usr/bin/python3 dev/bench/compare_stages.py --trainer ./train_gpt2cu_emu --ranks 2 --steps 2 --grad-dtype fp32
    /usr/bin/python3 dev/bench/compare_stages.py --ranks 2 --steps 2 --timeline           # + one step of each, drawn
    make compare                                                       # the first line with --unit-blocks 1,2

--trainer is the CPU trainer (train_gpt2, built with MPI) or a CUDA one (train_gpt2cu,
train_gpt2fp32cu, their _emu builds; told apart by their -h). For a CUDA trainer the model
defaults to the bf16 file, NCCL is pinned to Ring/Simple (as dev/test/test_zero_cuda.sh does,
so that the stages reduce in the same order), and when there are more ranks than visible GPUs
each rank gets its own NCCL_HOSTID (NCCL refuses two ranks of one host on one device).
--grad-dtype bf16|fp32 passes -zd to every run of a CUDA trainer (the gradients' dtype: fp32
doubles the gradient rows and their bytes on the wire, and adds the table's 'grad scratch' column).
Needs dev/bench/zero_plan_print (make) and Debian's matplotlib.
"""
import argparse
import csv
import os
import re
import shlex
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import timeline  # noqa: E402  (dev/bench/timeline.py)

MB = 1024.0 * 1024.0
STAGES = [0, 1, 2, 3]
STAGE_NAMES = {0: "0 (DDP)", 1: "1 (+optimizer)", 2: "2 (+grads)", 3: "3 (+params)"}
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CPU_MODEL, CUDA_MODEL = "gpt2_tiny.bin", "gpt2_tiny_bf16.bin"
HOSTID_SHELL = 'NCCL_HOSTID=cmp-$OMPI_COMM_WORLD_RANK exec "$@"'  # one NCCL_HOSTID per rank under mpirun


def die(msg):
    print("error: " + msg, file=sys.stderr)
    sys.exit(1)


def is_cuda_trainer(trainer):
    """A CUDA trainer's -h ends with its 'One process per GPU' line; the CPU trainer's does not."""
    try:
        proc = subprocess.run([trainer, "-h"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    except OSError as e:
        die("cannot run the trainer '%s': %s" % (trainer, e))
    text = proc.stdout + proc.stderr
    if "usage:" not in text:
        die("'%s -h' printed no usage: is it a train_gpt2 trainer?\n%s" % (trainer, text[-500:]))
    return "One process per GPU" in text


def visible_gpus():
    """GPUs a rank may pick from (select_device: local rank mod this); 1 where none is known (the emulator)."""
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None:
        return max(1, len([d for d in cvd.split(",") if d.strip()]))
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60).stdout
        return max(1, sum(1 for line in out.splitlines() if line.startswith("GPU ")))
    except (OSError, subprocess.SubprocessError):
        return 1


def launch(args, name, flags):
    """Runs the trainer on args.ranks ranks with `flags`; returns (exit code, its output), saved as NAME.txt."""
    threads = max(1, (os.cpu_count() or 1) // args.ranks)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1")
    if args.is_cuda:
        # as dev/test/test_zero_cuda.sh: equal-size reductions add in the same order in every stage
        env.setdefault("NCCL_ALGO", "Ring")
        env.setdefault("NCCL_PROTO", "Simple")
        if args.timeline:  # the emulator's streams run queued work as soon as they may: a timeline like a GPU's
            env.setdefault("EMU_SCHEDULE", "eager")
    wrap = ["bash", "-c", HOSTID_SHELL, "_"] if args.hostid_per_rank else []
    cmd = ["mpirun", "--bind-to", "none", "-np", str(args.ranks)] + wrap + [args.trainer, "-e", args.model,
           "-b", str(args.batch), "-t", str(args.seq_len), "-v", "0", "-s", "0"] + flags
    if args.grad_dtype is not None:
        cmd += ["-zd", args.grad_dtype]
    if args.recompute is not None:
        cmd += ["-r", str(args.recompute)]
    cmd += ["-o", os.path.join(args.out, name)]
    if args.timeline:
        cmd += ["-zt", os.path.join(args.out, "trace_" + name)]
    print("$ " + " ".join(shlex.quote(c) for c in cmd), flush=True)
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
    text = proc.stdout + proc.stderr
    with open(os.path.join(args.out, "%s.txt" % name), "w") as f:
        f.write(text)
    return proc.returncode, text


def parse_memory(args, text, what):
    """The start-up memory table (rows of bytes) and what the run says of itself."""
    header = "GPU memory/rank" if args.is_cuda else "memory per rank"
    if not re.search(r"^%s\s*\| allocated" % re.escape(header), text, re.M):
        die("%s: no '%s' table in the output (a %s trainer was expected)" % (what, header, "CUDA" if args.is_cuda else "CPU"))
    r = {}
    for row, key in [("params", "params"), ("grads", "grads"), ("optimizer", "optimizer"),
                     ("gather buffers", "buffers")]:
        m = re.search(r"^%s\s*\|\s*(\d+)\s*\|\s*(\d+)" % row, text, re.M)
        r[key], r["plan_" + key] = int(m.group(1)), int(m.group(2))
    r["activations"] = int(re.search(r"^activations\s*\|\s*(\d+)", text, re.M).group(1))
    r["grad_scratch"] = r["plan_grad_scratch"] = 0  # the CPU trainer's backward writes its fp32 grads
    if args.is_cuda:
        r["workspace"] = int(re.search(r"^workspace\s*\|\s*(\d+)", text, re.M).group(1))
        m = re.search(r"^grad scratch\s*\|\s*(\d+)\s*\|\s*(\d+)", text, re.M)
        r["grad_scratch"], r["plan_grad_scratch"] = int(m.group(1)), int(m.group(2))
        m = re.search(r"^ZeRO stage \d, \d+ ranks(?: in \d+ shard groups of \d+)?, (bf16|fp32), grads (bf16|fp32)", text, re.M)
        r["precision"], r["grads_dtype"] = m.group(1), m.group(2)
        m = re.search(r"^device (.*) \((\d+) visible\)", text, re.M)
        r["device"] = m.group(1) if m else "?"
    r["table_stage"] = int(re.search(r"^ZeRO stage (\d),", text, re.M).group(1))
    r["recompute"] = int(re.search(r"^\d+ ranks x batch B .*, recompute (\d)", text, re.M).group(1))
    return r


def run_stage(args, stage, group=None, unit_blocks=1, offload=False, reshard=None):
    """Runs one stage (with -zg GROUP if given, -zu unit_blocks when not 1, -zo 1 with offload: the
    optimizer state in host memory, -zr reshard); returns the parsed numbers."""
    name, flags, what = "z%d" % stage, ["-x", str(args.steps), "-z", str(stage)], "stage %d" % stage
    if reshard is not None:
        name, what, flags = "z%d_%s" % (stage, reshard), "stage %d -zr %s" % (stage, reshard), flags + ["-zr", reshard]
    if group is not None:
        name, flags = "z%dg%d" % (stage, group), flags + ["-zg", str(group)]
    if unit_blocks != 1:
        name, what = "z%d_zu%d" % (stage, unit_blocks), "stage %d -zu %d" % (stage, unit_blocks)
        flags += ["-zu", str(unit_blocks)]
    if offload:
        name, what, flags = name + "_zo", what + " -zo 1", flags + ["-zo", "1"]
    rc, text = launch(args, name, flags)
    if rc != 0:
        die("%s failed (exit %d):\n%s" % (what, rc, "\n".join(text.splitlines()[-5:])))
    if offload:
        return parse_offload(args, stage, text)
    r = {"stage": stage, "group": group if group is not None else args.ranks, "name": name}
    r.update(parse_memory(args, text, what))
    if r["table_stage"] != stage:
        die("stage %d: the trainer's table says stage %d" % (stage, r["table_stage"]))
    m = re.search(r"^ZeRO stage \d, .*?(\d+) blocks per unit \((\d+) units\)", text, re.M)
    r["unit_blocks"], r["units"] = int(m.group(1)), int(m.group(2))
    if r["unit_blocks"] != unit_blocks:
        die("%s: the trainer's table says %d blocks per unit" % (what, r["unit_blocks"]))
    m = re.search(r"^collectives per step \(plan\): reduce-scatter (\d+), all-gather (\d+)$", text, re.M)
    r["plan_rs_calls"], r["plan_ag_calls"] = int(m.group(1)), int(m.group(2))
    calls = set(re.findall(r"\| collectives: reduce-scatter (\d+) all-gather (\d+) \|", text))
    if args.ranks > 1 and len(calls) != 1:
        die("%s: the steps counted different collectives: %s" % (what, sorted(calls)))
    r["rs_calls"], r["ag_calls"] = map(int, calls.pop()) if calls else (0, 0)
    m = re.search(r"^comm per step \(plan, bus bytes\): reduce-scatter (\d+), all-gather (\d+), scalars (\d+)", text, re.M)
    r["plan_rs"], r["plan_ag"], r["plan_scalars"] = map(int, m.groups())
    # -zg: the all-reduce across the groups (absent: one group, nothing across)
    m = re.search(r"^comm per step across groups \(plan, bus bytes\): all-reduce (\d+)$", text, re.M)
    r["plan_across"] = int(m.group(1)) if m else 0
    steps = re.findall(r"^step +\d+/\d+: train loss ([0-9.]+) norm [0-9.]+ lr \S+ \(([0-9.]+) ms.*?"
                       r"(?:reduce-scatter (\d+) all-gather (\d+) scalars (\d+))?(?: \| across groups: all-reduce (\d+))?$",
                       text, re.M)
    if len(steps) != args.steps:
        die("stage %d printed %d steps, expected %d" % (stage, len(steps), args.steps))
    r["losses"] = [s[0] for s in steps]  # as printed, so equality is exact
    times = [float(s[1]) for s in steps][1:] or [float(steps[0][1])]  # the first step faults memory in
    r["ms"] = sum(times) / len(times)
    r["tok_s"] = args.ranks * args.batch * args.seq_len / (r["ms"] / 1000.0)
    sent = set((int(s[2] or 0), int(s[3] or 0), int(s[4] or 0), int(s[5] or 0)) for s in steps)
    if len(sent) != 1:
        die("%s sent different bytes in different steps: %s" % (name, sorted(sent)))
    r["rs"], r["ag"], r["scalars"], r["across"] = sent.pop()
    if args.is_cuda:  # every row of the table, the largest rank's sum
        r["measured"] = float(re.search(r"^GPU memory allocated per rank: max ([0-9.]+) MB", text, re.M).group(1)) * MB
    else:
        r["measured"] = float(re.search(r"peak RSS per rank: max ([0-9.]+) MB", text).group(1)) * MB
    return r


def parse_offload(args, stage, text):
    """A -zo 1 run: the start-up table's rows, its host rows and PCIe plan, the steps' PCIe bytes."""
    r = {"stage": stage}
    r.update(parse_memory(args, text, "stage %d -zo 1" % stage))
    for row, key in [("host optimizer", "host_optimizer"), ("host staging", "host_staging")]:
        m = re.search(r"^%s\s*\|\s*(\d+)\s*\|\s*(\d+)" % row, text, re.M)
        if not m:
            die("stage %d -zo 1: no '%s' row in the start-up table" % (stage, row))
        r[key], r["plan_" + key] = int(m.group(1)), int(m.group(2))
    m = re.search(r"^offload per step \(plan, PCIe bytes\): grads down (\d+), params up (\d+)$", text, re.M)
    r["plan_down"], r["plan_up"] = int(m.group(1)), int(m.group(2))
    steps = re.findall(r"^step +\d+/\d+: train loss ([0-9.]+) norm [0-9.]+ lr \S+ \(([0-9.]+) ms.*"
                       r"\| PCIe bytes: grads down (\d+) params up (\d+)", text, re.M)
    if len(steps) != args.steps:
        die("stage %d -zo 1 printed %d steps with PCIe bytes, expected %d" % (stage, len(steps), args.steps))
    r["losses"] = [st[0] for st in steps]
    times = [float(st[1]) for st in steps][1:] or [float(steps[0][1])]
    r["ms"] = sum(times) / len(times)
    sent = set((int(st[2]), int(st[3])) for st in steps)
    if len(sent) != 1:
        die("stage %d -zo 1 copied different bytes in different steps: %s" % (stage, sorted(sent)))
    r["down"], r["up"] = sent.pop()
    return r


def run_offload(args, results):
    """Stages 1-3 again with -zo 1; each must train as its run without offload did, and allocate
    and copy what its plan says."""
    rows = []
    for s in [1, 2, 3]:
        r = run_stage(args, s, offload=True)
        base = results[s]
        if r["losses"] != base["losses"]:
            die("stage %d -zo 1: losses %s, without offload %s" % (s, r["losses"], base["losses"]))
        for k in ["params", "grads", "optimizer", "buffers", "host_optimizer", "host_staging"]:
            if r[k] != r["plan_" + k]:
                die("stage %d -zo 1: %s allocated %d, plan %d" % (s, k, r[k], r["plan_" + k]))
        if (r["down"], r["up"]) != (r["plan_down"], r["plan_up"]):
            die("stage %d -zo 1: PCIe bytes per step %s, plan %s" % (s, (r["down"], r["up"]), (r["plan_down"], r["plan_up"])))
        r["base_state"] = state(base)
        rows.append(r)
    return rows


def offload_table(rows):
    head = ["stage", "GPU state MB", "GPU state MB, -zo 1", "saved MB", "host pinned MB (optimizer + staging)",
            "PCIe down MB/step", "PCIe up MB/step", "ms/step", "ms/step, -zo 1", "losses = no offload"]
    lines = ["-zo 1 (optimizer state in pinned host memory; allocated = plan on every row, PCIe bytes = plan):", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        host = r["host_optimizer"] + r["host_staging"]
        lines.append("| " + " | ".join([
            STAGE_NAMES[r["stage"]], "%.1f" % (r["base_state"] / MB), "%.1f" % (state(r) / MB),
            "%.1f" % ((r["base_state"] - state(r)) / MB),
            "%.1f (%.1f + %.1f)" % (host / MB, r["host_optimizer"] / MB, r["host_staging"] / MB),
            "%.2f" % (r["down"] / MB), "%.2f" % (r["up"] / MB), "%.0f" % r["base_ms"], "%.0f" % r["ms"], "yes"]) + " |")
    return "\n".join(lines) + "\n"


def offload_chart(args, rows):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    x = range(len(rows))
    w = 0.27
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.bar([i - w for i in x], [r["base_state"] / MB for r in rows], w, color="#4c72b0", label="GPU state, no offload")
    ax.bar(list(x), [state(r) / MB for r in rows], w, color="#55a868", label="GPU state, -zo 1")
    ax.bar([i + w for i in x], [(r["host_optimizer"] + r["host_staging"]) / MB for r in rows], w, color="#dd8452",
           label="pinned host, -zo 1")
    ax.set_xticks(list(x), ["stage " + STAGE_NAMES[r["stage"]] for r in rows])
    ax.set_ylabel("bytes per rank (MB)")
    ax.set_title("Optimizer offload (-zo 1): %s, %s, %d ranks" % (os.path.basename(args.trainer), os.path.basename(args.model),
                                                                  args.ranks), fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "offload.png"), dpi=100)
    plt.close(fig)


def run_auto(args, results):
    """One run with -z auto -zm MB (one step: the pick and its allocations come before it).
    Returns the budget, what is outside the plan, the candidates and the pick (None: no stage fits)."""
    rc, text = launch(args, "auto", ["-x", "1", "-z", "auto", "-zm", "%g" % args.auto])
    m = re.search(r"^-z auto: ([0-9.]+) MB per rank \(([^)]*)\); outside the plan ([0-9.]+) MB \(([^)]*)\)", text, re.M)
    cands = re.findall(r"^  stage (\d): plan ([0-9.]+) MB \+ ([0-9.]+) MB = ([0-9.]+) MB: (.*)$", text, re.M)
    if not m or [int(c[0]) for c in cands] != STAGES:
        die("-z auto -zm %g (exit %d): no '-z auto:' line and 4 candidates in its output:\n%s"
            % (args.auto, rc, "\n".join(text.splitlines()[-5:])))
    a = {"budget": float(m.group(1)), "budget_from": m.group(2), "outside": float(m.group(3)), "outside_what": m.group(4),
         "candidates": [{"stage": int(c[0]), "plan": float(c[1]), "total": float(c[3]), "verdict": c[4]} for c in cands]}
    picked = [c["stage"] for c in a["candidates"] if "picked" in c["verdict"]]
    a["picked"] = picked[0] if len(picked) == 1 else None
    if rc != 0:
        err = re.search(r"error: (-z auto: no stage fits[^\n]*)", text)
        if a["picked"] is not None or not err:
            die("-z auto -zm %g failed (exit %d):\n%s" % (args.auto, rc, "\n".join(text.splitlines()[-5:])))
        a["error"] = err.group(1)
        return a
    if a["picked"] is None:
        die("-z auto -zm %g ran but no candidate says 'picked'" % args.auto)
    # the run allocated what the picked stage's own run did
    got = parse_memory(args, text, "-z auto")
    want = results[a["picked"]]
    keys = ["params", "grads", "optimizer", "buffers", "activations"] + (["grad_scratch", "workspace"] if args.is_cuda else [])
    if got["table_stage"] != a["picked"] or any(got[k] != want[k] for k in keys):
        die("-z auto picked stage %d but its run is stage %d allocating %s, not stage %d's %s"
            % (a["picked"], got["table_stage"], [got[k] for k in keys], a["picked"], [want[k] for k in keys]))
    return a


def plan_for_ranks(args, ranks, unit_blocks=1):
    cmd = [os.path.join(ROOT, "dev/bench/zero_plan_print")]
    if args.is_cuda:
        cmd += ["--cuda", "2" if args.precision == "bf16" else "4"]
        if args.precision == "bf16" and args.grads_dtype == "fp32":
            cmd += ["--grads", "4"]
    cmd += ["--zu", str(unit_blocks)]
    proc = subprocess.run(cmd + [args.model] + [str(n) for n in ranks], cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        die("zero_plan_print failed: " + proc.stderr.strip())
    rows = [{k: int(v) for k, v in row.items()} for row in csv.DictReader(proc.stdout.splitlines())]
    return [r for r in rows if r["group"] == r["ranks"]]  # the plain stages (no -zg)


def state(r, prefix=""):
    return sum(r[prefix + k] for k in ["params", "grads", "optimizer", "buffers", "grad_scratch"])


def caption(args, results):
    rec = results[0]["recompute"]
    who = ""
    if args.is_cuda:
        who = "%s (%s, %s grads, %s), " % (os.path.basename(args.trainer), results[0]["precision"], results[0]["grads_dtype"],
                                          results[0]["device"])
    elif os.path.basename(args.trainer) != "train_gpt2":
        who = "%s, " % os.path.basename(args.trainer)
    return ("%s%s, %d ranks, B=%d, T=%d per rank, %d steps, recompute %d (%s"
            % (who, os.path.basename(args.model), args.ranks, args.batch, args.seq_len, args.steps, rec,
               "-r %d" % rec if args.recompute is not None else "the trainer's default"))


def auto_line(args, auto):
    cands = ", ".join("stage %d %.1f MB (%s)" % (c["stage"], c["total"], "picked" if c["stage"] == auto["picked"] else
                                                c["verdict"]) for c in auto["candidates"])
    if auto["picked"] is None:
        head = "-z auto -zm %g: no stage fits (%s)" % (args.auto, auto["error"])
    else:
        head = "-z auto -zm %g: picked stage %d, the lowest whose total fits" % (args.auto, auto["picked"])
    return ("%s; totals per rank = plan + %.1f MB outside it (%s): %s"
            % (head, auto["outside"], auto["outside_what"], cands))


def table(args, results, auto):
    cuda = args.is_cuda
    head = ["stage", "params MB", "grads MB", "optimizer MB", "buffers MB", "activations MB"]
    head += ["grad scratch MB", "workspace MB"] if cuda else []
    head += ["state allocated MB", "state plan MB", "GPU allocated MB" if cuda else "peak RSS MB",
             "reduce-scatter MB/step", "all-gather MB/step", "plan comm MB/step", "ms/step", "tok/s", "final loss"]
    rows = []
    for r in results:
        row = [STAGE_NAMES[r["stage"]], "%.1f" % (r["params"] / MB), "%.1f" % (r["grads"] / MB),
               "%.1f" % (r["optimizer"] / MB), "%.1f" % (r["buffers"] / MB), "%.1f" % (r["activations"] / MB)]
        row += ["%.1f" % (r["grad_scratch"] / MB), "%.1f" % (r["workspace"] / MB)] if cuda else []
        row += ["%.1f" % (state(r) / MB), "%.1f" % (state(r, "plan_") / MB), "%.1f" % (r["measured"] / MB),
                "%.2f" % (r["rs"] / MB), "%.2f" % (r["ag"] / MB), "%.2f" % ((r["plan_rs"] + r["plan_ag"]) / MB),
                "%.0f" % r["ms"], "%.0f" % r["tok_s"], r["losses"][-1]]
        rows.append(row)
    note = "per-rank bytes; MB = 2^20 bytes; bus bytes as nccl-tests count them"
    if cuda:
        note += "; GPU allocated: every row, the largest rank"
    lines = ["%s; %s)" % (caption(args, results), note), "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    if auto is not None:
        lines += ["", auto_line(args, auto)]
    return "\n".join(lines) + "\n"


UNIT_KEYS = ["unit_blocks", "units", "largest_unit", "params", "grads", "optimizer", "buffers", "plan_params", "plan_grads",
             "plan_optimizer", "plan_buffers", "rs_calls", "ag_calls", "plan_rs_calls", "plan_ag_calls", "rs", "ag",
             "plan_rs", "plan_ag", "ms", "tok_s"]


def units_table(args, units):
    """Stage 3 per unit size K: what a rank holds and what a step moves, in how many collectives."""
    head = ["K (-zu)", "units", "largest unit MB", "grads MB", "buffers MB", "state allocated MB", "state plan MB",
            "collectives/step (rs + ag)", "plan collectives", "all-gather MB/step", "plan all-gather MB/step", "ms/step",
            "final loss"]
    lines = ["Stage 3 by unit size, -zu K blocks per unit: %s)" % caption(args, units), "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for u in units:
        lines.append("| " + " | ".join([
            str(u["unit_blocks"]), str(u["units"]), "%.1f" % (u["largest_unit"] * u["elem_bytes"] / MB),
            "%.1f" % (u["grads"] / MB), "%.1f" % (u["buffers"] / MB), "%.1f" % (state(u) / MB),
            "%.1f" % (state(u, "plan_") / MB), "%d + %d" % (u["rs_calls"], u["ag_calls"]),
            "%d + %d" % (u["plan_rs_calls"], u["plan_ag_calls"]), "%.2f" % (u["ag"] / MB), "%.2f" % (u["plan_ag"] / MB),
            "%.0f" % u["ms"], u["losses"][-1]]) + " |")
    return "\n".join(lines) + "\n"


def units_chart(args, units):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    x = range(len(units))
    labels = ["K=%d\n(%d units)" % (u["unit_blocks"], u["units"]) for u in units]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.5))
    bottom = [0.0] * len(units)
    for key, color in [("params", "#4c72b0"), ("grads", "#dd8452"), ("optimizer", "#55a868"), ("buffers", "#8172b3")]:
        vals = [u[key] / MB for u in units]
        ax.bar(x, vals, bottom=bottom, color=color, label=key)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_xticks(list(x), labels)
    ax.set_ylabel("allocated per rank (MB)")
    ax.set_title("Stage 3 model state per rank by unit size", fontsize=10)
    ax.legend(fontsize=8)
    calls = [u["rs_calls"] + u["ag_calls"] for u in units]
    bx.bar(x, calls, color="#c44e52", label="collectives per step (counted)")
    bx.plot(list(x), [u["plan_rs_calls"] + u["plan_ag_calls"] for u in units], "k_", markersize=30, mew=2, label="plan")
    bx.set_xticks(list(x), labels)
    bx.set_ylabel("reduce-scatters + all-gathers per step")
    cx = bx.twinx()
    cx.plot(list(x), [u["ag"] / MB for u in units], "o-", color="#4c72b0", label="all-gather MB/step")
    cx.set_ylabel("all-gather per rank per step (MB)")
    cx.set_ylim(bottom=0)
    bx.set_title("Fewer, larger collectives: %s, %d ranks" % (os.path.basename(args.model), args.ranks), fontsize=10)
    handles = bx.get_legend_handles_labels()[0] + cx.get_legend_handles_labels()[0]
    bx.legend(handles, [h.get_label() for h in handles], fontsize=8, loc="upper right")
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "units.png"), dpi=100)
    plt.close(fig)


def charts(args, results, plan_rows, auto):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    labels = ["stage " + STAGE_NAMES[r["stage"]] for r in results]
    x = range(len(results))
    title = "%s, %d ranks, B=%d T=%d" % (os.path.basename(args.model), args.ranks, args.batch, args.seq_len)
    if args.is_cuda:
        title = "%s: %s" % (os.path.basename(args.trainer), title)
        if results[0]["grads_dtype"] != results[0]["precision"]:
            title += " -zd %s" % results[0]["grads_dtype"]
    if results[0]["recompute"] != (1 if args.is_cuda else 0):
        title += " r=%d" % results[0]["recompute"]

    # memory: stacked categories, with the measured peak (RSS; CUDA: allocated) as a marker, and
    # -z auto's budget, candidate totals and pick
    fig, ax = plt.subplots(figsize=(9.5, 4.5))
    bottom = [0.0] * len(results)
    cats = [("params", "#4c72b0"), ("grads", "#dd8452"), ("optimizer", "#55a868"), ("buffers", "#8172b3"),
            ("activations", "#937860")] + ([("grad_scratch", "#da8bc3"), ("workspace", "#8c8c8c")] if args.is_cuda else [])
    for key, color in cats:
        vals = [r[key] / MB for r in results]
        ax.bar(x, vals, bottom=bottom, color=color, label=key)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.plot(list(x), [r["measured"] / MB for r in results], "k_", markersize=40, mew=2,
            label="GPU memory allocated (max rank)" if args.is_cuda else "measured peak RSS")
    if auto is not None:
        ax.axhline(auto["budget"], color="#c44e52", ls="--", lw=1.5, label="-z auto budget (-zm %g)" % args.auto)
        ax.plot(list(x), [c["total"] for c in auto["candidates"]], "o", color="#c44e52", markersize=7,
                label="-z auto total (plan + outside)")
        if auto["picked"] is not None:
            p = auto["picked"]
            ax.annotate("-z auto\npicks", (p, max(auto["candidates"][p]["total"], results[p]["measured"] / MB)),
                        xytext=(0, 8), textcoords="offset points", ha="center", va="bottom", fontsize=8, color="#c44e52")
            ax.margins(y=0.15)
    ax.set_xticks(list(x), labels)
    ax.set_ylabel("memory per rank (MB)")
    ax.set_title("Memory per rank by ZeRO stage: " + title, fontsize=10 if len(title) > 45 else None)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), markerscale=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "memory.png"), dpi=100)
    plt.close(fig)

    # communication per step
    fig, ax = plt.subplots(figsize=(8, 4.5))
    rs = [r["rs"] / MB for r in results]
    ag = [r["ag"] / MB for r in results]
    ax.bar(x, rs, color="#c44e52", label="reduce-scatter")
    ax.bar(x, ag, bottom=rs, color="#4c72b0", label="all-gather")
    ax.set_xticks(list(x), labels)
    ax.set_ylabel("bytes sent per rank per step (MB, bus bytes)")
    ax.set_title("Communication per step: " + title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "comm.png"), dpi=100)
    plt.close(fig)

    # throughput
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.bar(x, [r["tok_s"] for r in results], color="#55a868")
    ax.set_xticks(list(x), labels)
    ax.set_ylabel("tokens per second (all ranks)")
    where = ("%s" % results[0]["device"]) if args.is_cuda else ("CPU, %d cores shared by the ranks" % (os.cpu_count() or 1))
    ax.set_title("Throughput (%s): %s" % (where, title), fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "throughput.png"), dpi=100)
    plt.close(fig)

    # losses: the four curves lie on top of each other when the stages agree
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for r, style in zip(results, ["-", "--", ":", "-."]):
        ax.plot(range(1, len(r["losses"]) + 1), [float(v) for v in r["losses"]], style, lw=2, label=labels[r["stage"]])
    ax.set_xlabel("step")
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.set_ylabel("train loss (mean over ranks)")
    ax.set_title("Loss by ZeRO stage (identical curves overlap): " + title, fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "loss.png"), dpi=100)
    plt.close(fig)

    # memory per rank vs N: the plan for 1, 2, 4, 8 ranks (and this run's N), measured where it ran
    fig, ax = plt.subplots(figsize=(8, 4.5))
    colors = ["#4c72b0", "#dd8452", "#55a868", "#c44e52"]
    for s in STAGES:
        pts = [(p["ranks"], p["state_total"] / MB) for p in plan_rows if p["stage"] == s]
        ax.plot([n for n, _ in pts], [v for _, v in pts], "o-", color=colors[s], label="stage %s (plan)" % STAGE_NAMES[s])
    for r in results:
        ax.plot([args.ranks], [state(r) / MB], "x", color=colors[r["stage"]], markersize=12, mew=2)
    ax.plot([], [], "kx", markersize=10, label="allocated in this run")
    ticks = sorted(set(p["ranks"] for p in plan_rows))
    ax.set_xscale("log", base=2)
    ax.set_xticks(ticks, [str(n) for n in ticks])
    ax.set_xlabel("ranks N")
    ax.set_ylabel("params + grads + optimizer + buffers per rank (MB)")
    bytes_of = ("%s's bytes: %s params and grads" % (os.path.basename(args.trainer), results[0]["precision"])) if args.is_cuda else ""
    ax.set_title("Model state per rank vs ranks: " + os.path.basename(args.model) + (" (%s)" % bytes_of if bytes_of else ""),
                 fontsize=10 if bytes_of else None)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "memory_vs_ranks.png"), dpi=100)
    plt.close(fig)


def group_table(args, results, groups):
    """Hybrid sharding (--groups): one row per G, stage 0 and the plain stage beside them."""
    z = args.group_stage
    head = ["run", "G", "state allocated MB", "state plan MB", "inside MB/step", "plan inside MB/step",
            "across MB/step", "plan across MB/step", "ms/step", "final loss"]
    rows = []
    for label, r in [("stage 0", results[0]), ("stage %d" % z, results[z])] + [("stage %d -zg %d" % (z, g["group"]), g) for g in groups]:
        rows.append([label, str(r["group"]), "%.1f" % (state(r) / MB), "%.1f" % (state(r, "plan_") / MB),
                     "%.2f" % ((r["rs"] + r["ag"]) / MB), "%.2f" % ((r["plan_rs"] + r["plan_ag"]) / MB),
                     "%.2f" % (r["across"] / MB), "%.2f" % (r["plan_across"] / MB), "%.0f" % r["ms"], r["losses"][-1]])
    lines = ["Hybrid sharding (-zg G: shard in groups of G ranks, replicate across the %d/G groups); inside = "
             "reduce-scatter + all-gather in the group, across = the grad shards' all-reduce" % args.ranks, "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def group_chart(args, results, groups):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    z = args.group_stage
    runs = [("stage 0", results[0])] + [("G=%d" % g["group"], g) for g in groups] + [("stage %d\n(G=%d)" % (z, args.ranks), results[z])]
    x = range(len(runs))
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.5))
    bottom = [0.0] * len(runs)
    for key, color in [("params", "#4c72b0"), ("grads", "#dd8452"), ("optimizer", "#55a868"), ("buffers", "#8172b3")]:
        vals = [r[key] / MB for _, r in runs]
        a1.bar(x, vals, bottom=bottom, color=color, label=key)
        bottom = [b + v for b, v in zip(bottom, vals)]
    a1.set_xticks(list(x), [l for l, _ in runs])
    a1.set_ylabel("model state per rank (MB)")
    a1.set_title("Memory per rank", fontsize=10)
    a1.legend(fontsize=8)
    inside = [(r["rs"] + r["ag"]) / MB for _, r in runs]
    a2.bar(x, inside, color="#4c72b0", label="inside the group (reduce-scatter + all-gather)")
    a2.bar(x, [r["across"] / MB for _, r in runs], bottom=inside, color="#c44e52", label="across the groups (all-reduce)")
    a2.set_xticks(list(x), [l for l, _ in runs])
    a2.set_ylabel("bytes sent per rank per step (MB, bus bytes)")
    a2.set_title("Communication per step", fontsize=10)
    a2.legend(fontsize=8)
    fig.suptitle("Hybrid sharding, stage %d in groups of G: %s, %d ranks, B=%d T=%d"
                 % (z, os.path.basename(args.model), args.ranks, args.batch, args.seq_len), fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "groups.png"), dpi=100)
    plt.close(fig)


def draw_timelines(args, runs):
    """One step of each traced run, drawn; its collectives checked against the plan's list."""
    emulated = args.is_cuda and "emulator" in runs[0].get("device", "")
    floatx = (2 if args.precision == "bf16" else 4) if args.is_cuda else None
    grads = 4 if args.is_cuda and args.grads_dtype == "fp32" else floatx
    who = "%s%s" % (os.path.basename(args.trainer), " (the CPU emulator)" if emulated else "")
    pngs = []
    for r in runs:
        prefix = os.path.join(args.out, "trace_" + r["name"])
        try:
            header, step, per_rank = timeline.read_run(prefix)
            fails = timeline.check_against_plan(per_rank, timeline.plan_collectives(header, args.model, floatx, grads))
            fails += timeline.check_lines(header, timeline.collectives(per_rank[0]))
        except timeline.TraceError as e:
            die("%s: %s" % (r["name"], e))
        if fails:
            die("%s: the traced step's collectives are not the plan's:\n  %s" % (r["name"], "\n  ".join(fails)))
        png = "timeline_%s.png" % r["name"]
        title = "%s, stage %d%s: step %d of %s on %d ranks (%s, B=%d, T=%d)" % (
            who, r["stage"], "" if r["stage"] != 3 else ", reshard_after_forward %s, prefetch %s" % (header["reshard"], header["prefetch"]),
            step, args.steps, args.ranks, os.path.basename(args.model), args.batch, args.seq_len)
        timeline.draw(header, step, per_rank, os.path.join(args.out, png), title, emulated)
        if r["name"] == "z3":
            with open(os.path.join(args.out, "timeline_z3.md"), "w") as f:
                f.write(timeline.annotate(header, step, per_rank) + "\n")
        pngs.append(png)
    return ", ".join(pngs)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trainer", default="./train_gpt2",
                    help="the trainer: ./train_gpt2 (default), or a CUDA one: ./train_gpt2cu, ./train_gpt2fp32cu, "
                         "./train_gpt2cu_emu (the CPU emulator)")
    ap.add_argument("--model", default=None,
                    help="model file (default: the tiny reference model, %s; %s for a CUDA trainer)" % (CPU_MODEL, CUDA_MODEL))
    ap.add_argument("--ranks", type=int, default=4, help="N ranks (mpirun -np N)")
    ap.add_argument("--batch", "-b", type=int, default=2, help="B per rank")
    ap.add_argument("--seq_len", "-t", type=int, default=32, help="T")
    ap.add_argument("--steps", type=int, default=6, help="steps per stage")
    ap.add_argument("--recompute", "-r", type=int, choices=[0, 1, 2], default=None,
                    help="pass -r R to every run (default: the trainer's own, 0 on the CPU, 1 on CUDA)")
    ap.add_argument("--auto", type=float, default=None, metavar="MB",
                    help="one more run with -z auto -zm MB: the stage it picks and every stage's total")
    ap.add_argument("--groups", type=int, nargs="+", default=[], metavar="G",
                    help="one more run per G: --group-stage with hybrid sharding -zg G (G divides --ranks)")
    ap.add_argument("--group-stage", type=int, choices=[1, 2, 3], default=3, help="the stage of the --groups runs")
    ap.add_argument("--unit-blocks", default=None, metavar="K[,K...]",
                    help="also run stage 3 with -zu K for each K (blocks per unit): units.md, units.csv, units.png")
    ap.add_argument("--offload", action="store_true",
                    help="CUDA trainer: stages 1-3 once more with -zo 1 (optimizer state in host memory)")
    ap.add_argument("--grad-dtype", choices=["bf16", "fp32"], default=None,
                    help="CUDA trainer: pass -zd to every run (gradients accumulated and reduced in bf16 or fp32)")
    ap.add_argument("--timeline", action="store_true",
                    help="trace every run (-zt) and draw one step per stage, and per reshard policy of stage 3: timeline_*.png")
    ap.add_argument("--out", default="log_compare", help="output folder")
    ap.add_argument("--cuda", action="store_true", help=argparse.SUPPRESS)  # gone: refused with a pointer to --trainer
    args = ap.parse_args()
    if args.cuda:
        die("--cuda is gone: name the trainer instead, --trainer ./train_gpt2cu (bf16; ./train_gpt2fp32cu for fp32) "
            "on a GPU machine, or --trainer ./train_gpt2cu_emu on the CPU emulator")
    if args.ranks < 1 or args.batch < 1 or args.seq_len < 1 or args.steps < 1:
        die("--ranks, --batch, --seq_len and --steps must be >= 1")
    for g in args.groups:
        if g < 1 or args.ranks % g != 0:
            die("--groups: %d does not divide --ranks %d (shard groups are all the same size)" % (g, args.ranks))
    if args.auto is not None and not args.auto > 0:
        die("--auto expects MB > 0, got %g" % args.auto)
    unit_blocks = []
    if args.unit_blocks is not None:
        try:
            unit_blocks = [int(k) for k in args.unit_blocks.split(",")]
        except ValueError:
            unit_blocks = [0]
        if not unit_blocks or min(unit_blocks) < 1 or len(set(unit_blocks)) != len(unit_blocks):
            die("--unit-blocks expects distinct blocks per unit >= 1, comma-separated, got '%s'" % args.unit_blocks)
    if not os.path.exists(os.path.join(ROOT, args.trainer)):
        die("'%s' not found (make; make cuda or make emu for the CUDA trainers)" % args.trainer)
    args.is_cuda = is_cuda_trainer(args.trainer)
    if args.offload and not args.is_cuda:
        die("--offload needs a CUDA trainer (--trainer ./train_gpt2cu or ./train_gpt2cu_emu): -zo is the CUDA trainer's flag")
    if args.grad_dtype is not None and not args.is_cuda:
        die("--grad-dtype is for a CUDA trainer (-zd): the CPU trainer keeps fp32 gradients")
    if args.model is None:
        args.model = CUDA_MODEL if args.is_cuda else CPU_MODEL
    for path in ["dev/bench/zero_plan_print", args.model]:
        if not os.path.exists(os.path.join(ROOT, path)):
            die("'%s' not found (run make, and make references for the models)" % path)
    args.hostid_per_rank = False
    if args.is_cuda and args.ranks > 1:
        gpus = visible_gpus()
        args.hostid_per_rank = args.ranks > gpus
        if args.hostid_per_rank:
            print("%d ranks on %d GPU(s): each rank gets its own NCCL_HOSTID (NCCL then talks over sockets)"
                  % (args.ranks, gpus), flush=True)
    os.makedirs(args.out, exist_ok=True)
    args.out = os.path.abspath(args.out)
    results = [run_stage(args, s) for s in STAGES]
    if len(set(r["recompute"] for r in results)) != 1:
        die("the stages ran with different recompute: %s" % [r["recompute"] for r in results])
    args.precision, args.grads_dtype = results[0].get("precision"), results[0].get("grads_dtype")
    auto = run_auto(args, results) if args.auto is not None else None
    groups = [run_stage(args, args.group_stage, g) for g in args.groups]
    units = [results[3] if k == 1 else run_stage(args, 3, unit_blocks=k) for k in sorted(unit_blocks)]
    offload = run_offload(args, results) if args.offload else None
    policies = [run_stage(args, 3, reshard=p) for p in ["always", "never"]] if args.timeline else []
    plan_rows = plan_for_ranks(args, sorted(set([1, 2, 4, 8, args.ranks])))
    for r in results:  # the chart's plan (zero_plan_print) is the one the trainer printed, at this N
        p = [q for q in plan_rows if q["ranks"] == args.ranks and q["stage"] == r["stage"]][0]
        if p["state_total"] != state(r, "plan_"):
            die("zero_plan_print says stage %d holds %d bytes per rank at N=%d, the trainer's plan %d: its bytes "
                "per element are not this trainer's" % (r["stage"], p["state_total"], args.ranks, state(r, "plan_")))

    for u in units:  # the plan's largest unit and total from zero_plan_print = the trainer's plan
        p = [q for q in plan_for_ranks(args, [args.ranks], u["unit_blocks"]) if q["stage"] == 3][0]
        if p["state_total"] != state(u, "plan_") or p["units"] != u["units"]:
            die("zero_plan_print --zu %d says %d bytes in %d units, the trainer's plan %d bytes in %d units"
                % (u["unit_blocks"], p["state_total"], p["units"], state(u, "plan_"), u["units"]))
        u["largest_unit"] = p["largest_unit"]  # elements
        u["elem_bytes"] = 2 if args.is_cuda and args.precision == "bf16" else 4  # a parameter's bytes

    md = table(args, results, auto)
    if groups:
        md += "\n" + group_table(args, results, groups)
    if units:
        md += "\n" + units_table(args, units)
    if offload is not None:
        for r in offload:
            r["base_ms"] = results[r["stage"]]["ms"]
        md += "\n" + offload_table(offload)
    print(md)
    with open(os.path.join(args.out, "compare.md"), "w") as f:
        f.write(md)
    measured = "gpu_alloc" if args.is_cuda else "rss"
    keys = ["stage", "params", "grads", "optimizer", "buffers", "activations"] + (["grad_scratch", "workspace"] if args.is_cuda else []) + [
            "plan_params", "plan_grads", "plan_optimizer", "plan_buffers"] + (["plan_grad_scratch"] if args.is_cuda else []) + [measured, "rs", "ag", "scalars", "plan_rs",
            "plan_ag", "plan_scalars", "ms", "tok_s"]
    with open(os.path.join(args.out, "compare.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["ranks"] + keys + ["losses"])
        for r in results:
            r[measured] = r["measured"]
            w.writerow([args.ranks] + [r[k] for k in keys] + [" ".join(r["losses"])])
    written = "compare.md, compare.csv"
    if auto is not None:
        with open(os.path.join(args.out, "auto.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["budget_mb", "stage", "plan_mb", "outside_mb", "total_mb", "picked", "verdict"])
            for c in auto["candidates"]:
                w.writerow([auto["budget"], c["stage"], c["plan"], auto["outside"], c["total"],
                            int(c["stage"] == auto["picked"]), c["verdict"]])
        written += ", auto.csv"
    if groups:
        with open(os.path.join(args.out, "groups.csv"), "w", newline="") as f:
            w = csv.writer(f)
            gkeys = ["group", "stage", "params", "grads", "optimizer", "buffers", "plan_params", "plan_grads", "plan_optimizer",
                     "plan_buffers", "rs", "ag", "across", "plan_rs", "plan_ag", "plan_across", "ms"]
            w.writerow(["ranks"] + gkeys + ["losses"])
            for r in [results[0], results[args.group_stage]] + groups:
                w.writerow([args.ranks] + [r[k] for k in gkeys] + [" ".join(r["losses"])])
        written += ", groups.csv"
        group_chart(args, results, groups)
        written += ", groups.png"
    pngs = "memory.png, comm.png, throughput.png, loss.png, memory_vs_ranks.png"
    if units:
        with open(os.path.join(args.out, "units.md"), "w") as f:
            f.write(units_table(args, units))
        with open(os.path.join(args.out, "units.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["ranks"] + UNIT_KEYS + ["losses", "stage0_losses"])
            for u in units:
                w.writerow([args.ranks] + [u[k] for k in UNIT_KEYS] + [" ".join(u["losses"]), " ".join(results[0]["losses"])])
        written += ", units.md, units.csv"
        pngs += ", units.png"
        units_chart(args, units)
    if offload is not None:
        okeys = ["stage", "params", "grads", "optimizer", "buffers", "host_optimizer", "host_staging", "plan_host_optimizer",
                 "plan_host_staging", "down", "up", "plan_down", "plan_up", "ms", "base_state"]
        with open(os.path.join(args.out, "offload.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["ranks"] + okeys + ["losses"])
            for r in offload:
                w.writerow([args.ranks] + [r[k] for k in okeys] + [" ".join(r["losses"])])
        written += ", offload.csv"
        pngs += ", offload.png"
        offload_chart(args, offload)
    charts(args, results, plan_rows, auto)
    if args.timeline:
        pngs += ", " + draw_timelines(args, results + policies)
        written += ", timeline_z3.md"
    print("wrote %s/{%s, %s}" % (args.out, written, pngs))


if __name__ == "__main__":
    main()
