"""
Compare the ZeRO stages by flag: runs train_gpt2 at stages 0-3 on N ranks (mpirun), a few steps
each, and reports per stage what each rank holds (allocated per category, the plan's
prediction, the measured peak RSS), what it sends per step per collective kind (measured and
planned), step time, tok/s and the losses, which must be the same for all four stages.

Writes into --out: compare.md (the table, also printed), compare.csv, and PNG charts:
memory.png (stacked bytes per rank per stage), comm.png (bytes sent per step), throughput.png,
loss.png (the four loss curves overlaid) and memory_vs_ranks.png (bytes per rank against N =
1, 2, 4, 8 from the plan, with the measured points of this run).

    /usr/bin/python3 dev/bench/compare_stages.py                       # tiny model, N=4 (what CI runs)
    /usr/bin/python3 dev/bench/compare_stages.py --model gpt2_124M.bin --ranks 4 --steps 4
    make compare                                                       # the same as the first line

Needs train_gpt2 built with MPI and dev/bench/zero_plan_print (make), and Debian's matplotlib.
"""
import argparse
import csv
import os
import re
import subprocess
import sys

MB = 1024.0 * 1024.0
STAGES = [0, 1, 2, 3]
STAGE_NAMES = {0: "0 (DDP)", 1: "1 (+optimizer)", 2: "2 (+grads)", 3: "3 (+params)"}
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def die(msg):
    print("error: " + msg, file=sys.stderr)
    sys.exit(1)


def run_stage(args, stage):
    """Runs one stage; returns the parsed numbers."""
    out = os.path.join(args.out, "z%d" % stage)
    threads = max(1, (os.cpu_count() or 1) // args.ranks)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1")
    cmd = ["mpirun", "--bind-to", "none", "-np", str(args.ranks), "./train_gpt2", "-e", args.model,
           "-b", str(args.batch), "-t", str(args.seq_len), "-x", str(args.steps), "-v", "0", "-s", "0",
           "-z", str(stage), "-o", out]
    print("$ " + " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
    text = proc.stdout + proc.stderr
    with open(os.path.join(args.out, "z%d.txt" % stage), "w") as f:
        f.write(text)
    if proc.returncode != 0:
        die("stage %d failed (exit %d):\n%s" % (stage, proc.returncode, "\n".join(text.splitlines()[-5:])))
    r = {"stage": stage}
    for row, key in [("params", "params"), ("grads", "grads"), ("optimizer", "optimizer"),
                     ("gather buffers", "buffers")]:
        m = re.search(r"^%s\s*\|\s*(\d+)\s*\|\s*(\d+)" % row, text, re.M)
        r[key], r["plan_" + key] = int(m.group(1)), int(m.group(2))
    r["activations"] = int(re.search(r"^activations\s*\|\s*(\d+)", text, re.M).group(1))
    m = re.search(r"^comm per step \(plan, bus bytes\): reduce-scatter (\d+), all-gather (\d+), scalars (\d+)", text, re.M)
    r["plan_rs"], r["plan_ag"], r["plan_scalars"] = map(int, m.groups())
    steps = re.findall(r"^step +\d+/\d+: train loss ([0-9.]+) norm [0-9.]+ lr \S+ \(([0-9.]+) ms.*?"
                       r"(?:reduce-scatter (\d+) all-gather (\d+) scalars (\d+))?$", text, re.M)
    if len(steps) != args.steps:
        die("stage %d printed %d steps, expected %d" % (stage, len(steps), args.steps))
    r["losses"] = [s[0] for s in steps]  # as printed, so equality is exact
    times = [float(s[1]) for s in steps][1:] or [float(steps[0][1])]  # the first step faults memory in
    r["ms"] = sum(times) / len(times)
    r["tok_s"] = args.ranks * args.batch * args.seq_len / (r["ms"] / 1000.0)
    sent = set((int(s[2] or 0), int(s[3] or 0), int(s[4] or 0)) for s in steps)
    if len(sent) != 1:
        die("stage %d sent different bytes in different steps: %s" % (stage, sorted(sent)))
    r["rs"], r["ag"], r["scalars"] = sent.pop()
    r["rss"] = float(re.search(r"peak RSS per rank: max ([0-9.]+) MB", text).group(1)) * MB
    return r


def plan_for_ranks(model, ranks):
    proc = subprocess.run([os.path.join(ROOT, "dev/bench/zero_plan_print"), model] + [str(n) for n in ranks],
                          cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        die("zero_plan_print failed: " + proc.stderr.strip())
    return [{k: int(v) for k, v in row.items()} for row in csv.DictReader(proc.stdout.splitlines())]


def table(args, results):
    head = ["stage", "params MB", "grads MB", "optimizer MB", "buffers MB", "activations MB", "state allocated MB",
            "state plan MB", "peak RSS MB", "reduce-scatter MB/step", "all-gather MB/step", "plan comm MB/step",
            "ms/step", "tok/s", "final loss"]
    rows = []
    for r in results:
        alloc = r["params"] + r["grads"] + r["optimizer"] + r["buffers"]
        plan = r["plan_params"] + r["plan_grads"] + r["plan_optimizer"] + r["plan_buffers"]
        rows.append([STAGE_NAMES[r["stage"]], "%.1f" % (r["params"] / MB), "%.1f" % (r["grads"] / MB),
                     "%.1f" % (r["optimizer"] / MB), "%.1f" % (r["buffers"] / MB), "%.1f" % (r["activations"] / MB),
                     "%.1f" % (alloc / MB), "%.1f" % (plan / MB), "%.1f" % (r["rss"] / MB),
                     "%.2f" % (r["rs"] / MB), "%.2f" % (r["ag"] / MB), "%.2f" % ((r["plan_rs"] + r["plan_ag"]) / MB),
                     "%.0f" % r["ms"], "%.0f" % r["tok_s"], r["losses"][-1]])
    lines = ["%s, %d ranks, B=%d, T=%d per rank, %d steps (per-rank bytes; MB = 2^20 bytes; bus bytes as nccl-tests count them)"
             % (os.path.basename(args.model), args.ranks, args.batch, args.seq_len, args.steps), "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def charts(args, results, plan_rows):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    labels = ["stage " + STAGE_NAMES[r["stage"]] for r in results]
    x = range(len(results))
    title = "%s, %d ranks, B=%d T=%d" % (os.path.basename(args.model), args.ranks, args.batch, args.seq_len)

    # memory: stacked categories, with the measured peak RSS as a marker
    fig, ax = plt.subplots(figsize=(9.5, 4.5))
    bottom = [0.0] * len(results)
    for key, color in [("params", "#4c72b0"), ("grads", "#dd8452"), ("optimizer", "#55a868"),
                       ("buffers", "#8172b3"), ("activations", "#937860")]:
        vals = [r[key] / MB for r in results]
        ax.bar(x, vals, bottom=bottom, color=color, label=key)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.plot(list(x), [r["rss"] / MB for r in results], "k_", markersize=40, mew=2, label="measured peak RSS")
    ax.set_xticks(list(x), labels)
    ax.set_ylabel("memory per rank (MB)")
    ax.set_title("Memory per rank by ZeRO stage: " + title)
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
    ax.set_title("Throughput (CPU, %d cores shared by the ranks): %s" % (os.cpu_count() or 1, title), fontsize=10)
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

    # memory per rank vs N: the plan for 1, 2, 4, 8 ranks, measured where it ran
    fig, ax = plt.subplots(figsize=(8, 4.5))
    colors = ["#4c72b0", "#dd8452", "#55a868", "#c44e52"]
    for s in STAGES:
        pts = [(p["ranks"], p["plan_total"] / MB) for p in plan_rows if p["stage"] == s]
        ax.plot([n for n, _ in pts], [v for _, v in pts], "o-", color=colors[s], label="stage %s (plan)" % STAGE_NAMES[s])
    for r in results:
        alloc = (r["params"] + r["grads"] + r["optimizer"] + r["buffers"]) / MB
        ax.plot([args.ranks], [alloc], "x", color=colors[r["stage"]], markersize=12, mew=2)
    ax.plot([], [], "kx", markersize=10, label="allocated in this run")
    ax.set_xscale("log", base=2)
    ax.set_xticks([1, 2, 4, 8], ["1", "2", "4", "8"])
    ax.set_xlabel("ranks N")
    ax.set_ylabel("params + grads + optimizer + buffers per rank (MB)")
    ax.set_title("Model state per rank vs ranks: " + os.path.basename(args.model))
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "memory_vs_ranks.png"), dpi=100)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="gpt2_tiny.bin", help="model file (default: the tiny reference model)")
    ap.add_argument("--ranks", type=int, default=4, help="N ranks (mpirun -np N)")
    ap.add_argument("--batch", "-b", type=int, default=2, help="B per rank")
    ap.add_argument("--seq_len", "-t", type=int, default=32, help="T")
    ap.add_argument("--steps", type=int, default=6, help="steps per stage")
    ap.add_argument("--out", default="log_compare", help="output folder")
    ap.add_argument("--cuda", action="store_true", help="compare the CUDA trainer's stages (not built yet)")
    args = ap.parse_args()
    if args.cuda:
        die("--cuda: the CUDA trainer (train_gpt2cu) does not exist yet; only the CPU trainer can be compared")
    if args.ranks < 1 or args.batch < 1 or args.seq_len < 1 or args.steps < 1:
        die("--ranks, --batch, --seq_len and --steps must be >= 1")
    for path in ["train_gpt2", "dev/bench/zero_plan_print", args.model]:
        if not os.path.exists(os.path.join(ROOT, path)):
            die("'%s' not found (run make, and make references for the models)" % path)
    os.makedirs(args.out, exist_ok=True)
    args.out = os.path.abspath(args.out)
    results = [run_stage(args, s) for s in STAGES]
    plan_rows = plan_for_ranks(args.model, [1, 2, 4, 8])

    md = table(args, results)
    print(md)
    with open(os.path.join(args.out, "compare.md"), "w") as f:
        f.write(md)
    keys = ["stage", "params", "grads", "optimizer", "buffers", "activations", "plan_params", "plan_grads",
            "plan_optimizer", "plan_buffers", "rss", "rs", "ag", "scalars", "plan_rs", "plan_ag", "plan_scalars",
            "ms", "tok_s"]
    with open(os.path.join(args.out, "compare.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["ranks"] + keys + ["losses"])
        for r in results:
            w.writerow([args.ranks] + [r[k] for k in keys] + [" ".join(r["losses"])])
    charts(args, results, plan_rows)
    print("wrote %s/{compare.md, compare.csv, memory.png, comm.png, throughput.png, loss.png, memory_vs_ranks.png}" % args.out)


if __name__ == "__main__":
    main()
