"""
The timeline of one training step, drawn from the trainers' traces (-zt PREFIX: one file per
rank, PREFIX_rank<r>.txt; the format is in train_gpt2.c's sharding section).

For each rank a compute row (the forward and backward of each unit, the head, the update; on
the CPU also where the rank sat blocked in comm_wait) and a communication row (each collective a
bar from its issue to its done, labelled with its kind, unit, bus bytes and the line of the
trainer that issued it; collectives in flight at once get lanes of their own); for rank 0 the
gather slots and gradient slots (which unit each holds, when); under them the memory each rank
holds over the step: what always holds live data, plus the slots holding a unit, plus the CPU
ring's partial sums, against what it allocated and the plan's total.

On the CPU trainer a collective is known done only when the rank's comm_wait returns, and the
ring reduce-scatter advances only inside comm_wait (llmc/mpi_comm.h): its bars end at waits. On
the CUDA trainer the times are those of CUDA events on the two streams; on the emulator they
are the emulator's (dev/cuda/emu: a CPU running the kernels, so the proportions are not a
GPU's), best read with EMU_SCHEDULE=eager, where queued work runs as soon as it may.

The collectives of the drawn step are checked against the plan's list (dev/bench/zero_plan_print
--collectives: count, order, kind, unit and bus bytes), and each issuing line against the
trainer's source (it must call a collective).

    /usr/bin/python3 dev/bench/timeline.py PREFIX [--out timeline.png] [--step S] [--title TEXT]
    /usr/bin/python3 dev/bench/timeline.py PREFIX --annotate     # the collectives, with their lines
dev/bench/compare_stages.py --timeline draws one per stage (and per reshard policy).
"""
import argparse
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MB = 1024.0 * 1024.0
SHORT = {"all-gather": "AG", "reduce-scatter": "RS", "all-reduce": "AR", "scalars": "sc"}
COLORS = {"all-gather": "#8172b3", "reduce-scatter": "#c44e52", "all-reduce": "#937860", "scalars": "#7f7f7f"}


class TraceError(Exception):
    pass


def read_trace(path):
    """The header's fields and the events: (time s, step, event, {key: value})."""
    header, events = None, []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if line.startswith("#"):
                header = dict(kv.split("=", 1) for kv in line.split(":", 1)[1].split())
                continue
            parts = line.split()
            if len(parts) < 3:
                raise TraceError("%s:%d: not 'TIME STEP EVENT key=value ...': %r" % (path, n, line.strip()))
            fields = dict(kv.split("=", 1) for kv in parts[3:])
            events.append((float(parts[0]), int(parts[1]), parts[2], fields))
    if header is None:
        raise TraceError("%s: no '# gpt2-zero trace:' header line" % path)
    return header, events


def read_run(prefix, step=None):
    """Every rank's trace of one step (default: the last complete one). Returns the header of rank 0,
    the step, and per rank its events of that step (times in ms from the step's earliest begin)."""
    paths = sorted(glob.glob(prefix + "_rank*.txt"), key=lambda p: int(re.search(r"_rank(\d+)\.txt$", p).group(1)))
    if not paths:
        raise TraceError("no trace files %s_rank<r>.txt (run the trainer with -zt %s)" % (prefix, prefix))
    runs = [read_trace(p) for p in paths]
    header = runs[0][0]
    if len(runs) != int(header["ranks"]):
        raise TraceError("%d trace files for %s ranks" % (len(runs), header["ranks"]))
    done = [set(s for _, s, e, _ in ev if e == "step_end") for _, ev in runs]
    common = set.intersection(*done)
    if not common:
        raise TraceError("%s: no step traced to its end on every rank" % prefix)
    step = max(common) if step is None else step
    if step not in common:
        raise TraceError("%s: step %d is not traced on every rank (steps %s)" % (prefix, step, sorted(common)))
    per_rank = [[e for e in ev if e[1] == step] for _, ev in runs]
    t0 = min(e[0] for ev in per_rank for e in ev if e[2] == "step_begin")
    # in file order: the CPU writes events as they happen; the CUDA trainer in the order the host
    # queued them, which is each stream's order
    per_rank = [[((t - t0) * 1e3, s, name, f) for t, s, name, f in ev] for ev in per_rank]
    return header, step, per_rank


def collectives(events):
    """The step's collectives in issue order: dicts with kind, unit, bytes, line, issue and done (ms)."""
    out, open_ = [], {}
    for t, _, name, f in events:
        if name == "issue":
            c = {"kind": f["kind"], "unit": int(f["unit"]), "bytes": int(f["bytes"]), "line": int(f["line"]), "issue": t,
                 "done": None}
            out.append(c)
            open_.setdefault((c["kind"], c["unit"]), []).append(c)
        elif name == "done":
            pending = open_.get((f["kind"], int(f["unit"])), [])
            if not pending:
                raise TraceError("a 'done' of %s unit %s at %.3f ms that nothing issued" % (f["kind"], f["unit"], t))
            pending.pop(0)["done"] = t
    for c in out:
        if c["done"] is None:
            raise TraceError("%s of unit %d issued at %.3f ms never done in its step" % (c["kind"], c["unit"], c["issue"]))
    return out


def plan_collectives(header, model, precision_bytes=None, grad_bytes=None):
    """zero_plan_print --collectives for the traced run: [(kind, unit, bytes)]."""
    zpp = os.path.join(ROOT, "dev/bench/zero_plan_print")
    if not os.path.exists(zpp):
        raise TraceError("dev/bench/zero_plan_print is not built: make dev/bench/zero_plan_print")
    cmd = [zpp, "--collectives", header["stage"]]
    if header["trainer"] == "cuda":
        cmd += ["--cuda", str(precision_bytes)]
        if grad_bytes and grad_bytes != precision_bytes:
            cmd += ["--grads", str(grad_bytes)]
    cmd += ["--zu", header["unit_blocks"], "--zr", header["reshard"], "--zp", header["prefetch"], "--zg", header["group"],
            "--accum", header["micro_steps"], model, header["ranks"]]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise TraceError("zero_plan_print --collectives failed: " + proc.stderr.strip())
    return [(k, int(u), int(b)) for k, u, b in (line.split() for line in proc.stdout.splitlines())]


def check_against_plan(per_rank, planned):
    """Every rank issued the plan's collectives, in its order, with its bytes. Returns a list of failures."""
    fails = []
    for r, events in enumerate(per_rank):
        got = [(c["kind"], c["unit"], c["bytes"]) for c in collectives(events)]
        if got == planned:
            continue
        if len(got) != len(planned):
            fails.append("rank %d: %d collectives, the plan %d" % (r, len(got), len(planned)))
        for i, (g, p) in enumerate(zip(got, planned)):
            if g != p:
                fails.append("rank %d: collective %d is %s unit %d, %d bytes; the plan's is %s unit %d, %d bytes" % ((r, i + 1) + g + p))
                break
    return fails


def source_lines(trainer_file):
    with open(os.path.join(ROOT, trainer_file)) as f:
        return f.read().split("\n")


def function_of(lines, n):
    """The function whose body holds line n (1-based): the nearest definition above it."""
    for i in range(n - 1, -1, -1):
        m = re.match(r"^(?:static |inline |__global__ )*[A-Za-z_][\w\s\*]*?\b(\w+)\(.*\{\s*$", lines[i])
        if m and not lines[i].startswith(" "):
            return m.group(1)
    return "?"


def check_lines(header, colls):
    """Each issuing line must call a collective (a trace call put anywhere but right above its call fails here)."""
    lines = source_lines(header["file"])
    fails = []
    for c in colls:
        text = lines[c["line"] - 1] if 0 < c["line"] <= len(lines) else ""
        if not re.search(r"\bcomm_\w+\(|_over_ranks\(", text):
            fails.append("%s line %d (said to issue %s of unit %d) calls no collective: %r" % (header["file"], c["line"], c["kind"],
                                                                                              c["unit"], text.strip()))
    return fails


def annotate(header, step, per_rank):
    """The collectives of rank 0's step, one line each, with the line and function that issued them."""
    lines = source_lines(header["file"])
    out = ["stage %s, %s ranks, reshard_after_forward %s, prefetch %s: step %d of rank 0, times from the step's start"
           % (header["stage"], header["ranks"], header["reshard"], header["prefetch"], step),
           " #  collective      unit  bus bytes  issued by %-25s  issued      done" % header["file"]]
    for i, c in enumerate(collectives(per_rank[0]), 1):
        where = "%d %s" % (c["line"], function_of(lines, c["line"]))
        out.append("%2d  %-14s %5s %10d  %-35s %7.2f ms %7.2f ms" % (i, c["kind"], c["unit"] if c["unit"] >= 0 else "-", c["bytes"],
                                                                    where, c["issue"], c["done"]))
    return "\n".join(out)


def spans(events):
    """The compute row: (start, end, label, kind) with kind forward / head / backward / update / wait."""
    out, phase, opened, waits = [], None, {}, {}
    seen_block = False
    for t, _, name, f in events:
        u = int(f["unit"]) if "unit" in f else None
        if name == "forward_begin":
            phase, seen_block = "forward", False
        elif name == "backward_begin":
            if "head" in opened:  # the final layernorm, the head and the loss: unit 0 again
                out.append((opened.pop("head"), t, "head", "head"))
            phase = "backward"
            opened["head bwd"] = t
        elif name == "use" and phase == "forward":
            if u == 0 and seen_block:
                opened["head"] = t
            else:
                opened[("F", u)] = t
                seen_block = seen_block or u > 0
        elif name == "done_forward" and ("F", u) in opened:
            out.append((opened.pop(("F", u)), t, "F%d" % u, "forward"))
        elif name == "use" and phase == "backward" and u > 0:
            if "head bwd" in opened:
                out.append((opened.pop("head bwd"), t, "B0 head", "backward"))
            opened[("B", u)] = t
        elif name == "done_backward":
            if u > 0 and ("B", u) in opened:
                out.append((opened.pop(("B", u)), t, "B%d" % u, "backward"))
                opened["enc"] = t
            elif u == 0 and "enc" in opened:
                out.append((opened.pop("enc"), t, "B0 enc", "backward"))
        elif name == "update_begin":
            opened["update"] = t
        elif name == "update_end" and "update" in opened:
            out.append((opened.pop("update"), t, "update", "update"))
        elif name == "wait_begin":
            waits[(f["kind"], u)] = t
        elif name == "wait_end" and (f["kind"], u) in waits:
            out.append((waits.pop((f["kind"], u)), t, "", "wait"))
    return out


def slot_bars(events):
    """Gather and gradient slots: (lane name, start, end, unit) from acquire to release."""
    held, out = {}, []
    t_end = events[-1][0]
    for t, _, name, f in events:
        if name not in ("acquire", "release"):
            continue
        what, u = f["what"], int(f["unit"])
        if name == "acquire":
            slot = int(f["slot"])
            lane = ("gather " if what == "gather" else "grad ") + ("unit 0 buffer" if slot < 0 else "slot %d" % slot)
            held[(what, u)] = (lane, t, int(f["bytes"]))
        elif (what, u) in held:
            lane, start, _ = held.pop((what, u))
            out.append((lane, start, t, u))
    for (what, u), (lane, start, _) in held.items():
        out.append((lane, start, t_end, u))
    return out


def memory_curve(header, events):
    """(times, bytes): what holds live data over the step."""
    level = int(header["fixed"])
    held = {}
    ts, ys = [events[0][0]], [level]
    for t, _, name, f in events:
        delta = 0
        if name == "acquire":
            held[(f["what"], f["unit"])] = int(f["bytes"])
            delta = int(f["bytes"])
        elif name == "release" and (f["what"], f["unit"]) in held:
            delta = -held.pop((f["what"], f["unit"]))
        elif name == "scratch":
            delta = int(float(f["bytes"]))
        if delta:
            ts += [t, t]
            ys += [level, level + delta]
            level += delta
    ts.append(events[-1][0])
    ys.append(level)
    return ts, ys


def lanes_for(bars):
    """Interval lanes: each bar (start, end, ...) in the lowest lane free at its start."""
    ends, placed = [], []
    for b in sorted(bars, key=lambda b: b[0]):
        for i, e in enumerate(ends):
            if e <= b[0]:
                ends[i] = b[1]
                placed.append((i, b))
                break
        else:
            ends.append(b[1])
            placed.append((len(ends) - 1, b))
    return placed, max(1, len(ends))


def human(n):
    return "%.0f B" % n if n < 1024 else "%.0f KB" % (n / 1024) if n < 1024 * 1024 else "%.1f MB" % (n / MB)


class TimeAxis:
    """A time axis that squeezes long stretches in which nothing but one computation happens (in a
    small model the head's matmul over the vocabulary can be most of a step), so the moments that
    show the schedule stay readable. Each squeezed stretch is drawn as a break marked with its
    real length; elsewhere the axis is linear."""

    def __init__(self, per_rank, t_max):
        times = sorted(set(e[0] for ev in per_rank for e in ev))
        self.breaks = []  # (start, end, drawn width), in ms
        gap, keep = 0.10 * t_max, 0.01 * t_max
        cut = [(a + keep, b - keep) for a, b in zip(times, times[1:]) if b - a > gap]
        visible = t_max - sum(b - a for a, b in cut)
        self.breaks = [(a, b, 0.05 * visible) for a, b in cut]

    def __call__(self, t):
        out = t
        for a, b, w in self.breaks:
            if t >= b:
                out -= (b - a) - w
            elif t > a:
                out -= (t - a) * (1 - w / (b - a))
        return out

    def span(self, start, end):
        return self(start), self(end) - self(start)


def draw(header, step, per_rank, out_path, title, emulated=False):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    span_colors = {"forward": "#4c72b0", "head": "#64b5cd", "backward": "#dd8452", "update": "#55a868", "wait": "#d0d0d0"}
    t_real = max(ev[-1][0] for ev in per_rank)
    T = TimeAxis(per_rank, t_real)
    t_max = T(t_real)
    tiny = t_max * 0.004  # the narrowest bar drawn
    layout = []
    for r, events in enumerate(per_rank):
        colls = collectives(events)
        for k, c in enumerate(colls, 1):
            c["n"] = k
        placed, nl = lanes_for([(T(c["issue"]), max(T(c["done"]), T(c["issue"]) + tiny), c) for c in colls])
        layout.append((r, events, placed, nl))
    slots = slot_bars(per_rank[0])
    lane_names = sorted(set(s[0] for s in slots), key=lambda n: (not n.startswith("gather"), "unit 0" not in n, n))
    n_rows = sum(1.5 + 0.9 * nl for _, _, _, nl in layout) + 0.8 * len(lane_names)
    fig = plt.figure(figsize=(16, 2.6 + 0.34 * n_rows + 1.9))
    grid = fig.add_gridspec(2, 2, width_ratios=[3.1, 1], height_ratios=[0.34 * n_rows + 0.5, 1.9], wspace=0.03, hspace=0.12)
    ax = fig.add_subplot(grid[0, 0])
    axm = fig.add_subplot(grid[1, 0], sharex=ax)
    axl = fig.add_subplot(grid[:, 1])
    y, yticks, ylabels = 0.0, [], []
    for r, events, placed, nl in layout:
        for start, end, label, kind in spans(events):  # the compute row
            start, end = T(start), T(end)
            ax.barh(y, max(end - start, tiny), left=start, height=0.8, color=span_colors[kind],
                    edgecolor="#555555" if kind == "wait" else "white", linewidth=0.4, hatch="///" if kind == "wait" else None,
                    zorder=1 if kind == "wait" else 2)
            if label and end - start > t_max * 0.009 * max(2, len(label)):
                ax.text((start + end) / 2, y, label, ha="center", va="center", fontsize=7, zorder=6)
        yticks.append(y)
        ylabels.append("rank %d compute" % r)
        y += 1.0
        for lane, (start, end, c) in placed:  # the communication lanes
            yy = y + lane * 0.9
            ax.barh(yy, end - start, left=start, height=0.72, color=COLORS[c["kind"]], edgecolor="white", linewidth=0.4, zorder=2)
            full = "#%d %s %s %s" % (c["n"], SHORT[c["kind"]], "u%d" % c["unit"] if c["unit"] >= 0 else "", human(c["bytes"]))
            if end - start > t_max * 0.0085 * len(full):
                ax.text((start + end) / 2, yy, full, ha="center", va="center", fontsize=6.5, color="white", zorder=3)
            else:
                ax.text(start, yy - 0.42, "#%d" % c["n"], ha="left", va="bottom", fontsize=6, color=COLORS[c["kind"]], zorder=3)
        yticks.append(y + (nl - 1) * 0.45)
        ylabels.append("rank %d comm" % r)
        y += nl * 0.9 + 0.5
    slot_y = {}
    for name in lane_names:  # rank 0's slots
        slot_y[name] = y
        yticks.append(y)
        ylabels.append("rank 0 " + name)
        y += 0.8
    for lane, start, end, u in slots:
        start, end = T(start), T(end)
        color = "#8172b3" if lane.startswith("gather") else "#dd8452"
        ax.barh(slot_y[lane], max(end - start, tiny), left=start, height=0.6, color=color, alpha=0.5, edgecolor=color, zorder=2)
        if end - start > t_max * 0.04:
            ax.text(start + t_max * 0.003, slot_y[lane], "unit %d" % u, ha="left", va="center", fontsize=6.5, zorder=3)
    ax.set_yticks(yticks, ylabels, fontsize=8)
    ax.set_ylim(y - 0.3, -0.7)
    ax.grid(axis="x", color="#eeeeee", zorder=0)
    ax.tick_params(labelbottom=False)
    legend = [Patch(color=span_colors[k], label=n) for k, n in [("forward", "forward of unit u (Fu)"),
                                                                 ("head", "final layernorm + head + loss"),
                                                                 ("backward", "backward of unit u (Bu)"),
                                                                 ("update", "update (norm, AdamW)")]]
    if header["trainer"] == "cpu":
        legend.append(Patch(facecolor=span_colors["wait"], edgecolor="#555555", hatch="///", label="blocked in comm_wait"))
    legend += [Patch(color=COLORS[k], label=k) for k in ["all-gather", "reduce-scatter", "all-reduce", "scalars"]]
    ax.legend(handles=legend, fontsize=7, ncol=5, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    ax.set_title(title, fontsize=10, pad=30)
    for r, events in enumerate(per_rank):  # memory
        ts, ys = memory_curve(header, events)
        axm.plot([T(t) for t in ts], [v / MB for v in ys], label="rank %d holds" % r, linewidth=1.2)
    axm.axhline(int(header["allocated"]) / MB, color="#333333", linestyle="--", linewidth=0.8, label="allocated (state)")
    axm.axhline(int(header["plan_total"]) / MB, color="#c44e52", linestyle=":", linewidth=0.9, label="plan total")
    axm.set_ylabel("MB per rank", fontsize=8)
    axm.set_xlabel("ms since the step began (%s trainer%s)" % (header["trainer"].upper(), ", on the CPU emulator" if emulated else ""),
                   fontsize=8)
    axm.legend(fontsize=7, ncol=3, loc="lower right")
    axm.set_ylim(bottom=0)
    axm.set_xlim(0, t_max * 1.01)
    axm.grid(color="#eeeeee")
    # ticks at real times, none inside a break; each break marked with its real length
    import numpy as np
    step_ms = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000]
    visible = t_max - sum(w for _, _, w in T.breaks)
    unit = [u for u in step_ms if visible / u <= 12][0] if visible / step_ms[-1] <= 12 else step_ms[-1]
    ticks = [t for t in np.arange(0, t_real + unit, unit) if t <= t_real and not any(a - unit * 0.15 < t < b + unit * 0.15 for a, b, _ in T.breaks)]
    axm.set_xticks([T(t) for t in ticks], ["%g" % t for t in ticks], fontsize=8)
    for a, b, w in T.breaks:
        for axis in (ax, axm):
            axis.axvspan(T(a), T(b), facecolor="white", alpha=0.7, zorder=4, hatch="\\\\", edgecolor="#bbbbbb", linewidth=0)
        axm.text(T(a) + w / 2, axm.get_ylim()[1] * 0.96, "%.0f ms\nsqueezed" % (b - a), ha="center", va="top", fontsize=6.5,
                 color="#555555", zorder=5)
    # rank 0's collectives, numbered as on the bars, with the line that issued each
    lines = source_lines(header["file"])
    text = ["rank 0's collectives (bars #k),", "issued by %s's:" % header["file"], ""]
    for _, (_, _, c) in sorted(layout[0][2], key=lambda p: p[1][2]["n"]):
        text.append("#%-2d %-3s %-3s %8s  %s" % (c["n"], SHORT[c["kind"]], "u%d" % c["unit"] if c["unit"] >= 0 else "",
                                                human(c["bytes"]), function_of(lines, c["line"])))
    text += ["", "AG all-gather, RS reduce-scatter,", "AR all-reduce (-zg), sc scalars;", "bytes: bus bytes (nccl-tests);",
             "the issuing lines: timeline.py --annotate"]
    axl.axis("off")
    axl.text(0.0, 1.0, "\n".join(text), ha="left", va="top", fontsize=7 if len(text) < 50 else 5.5, family="monospace",
             transform=axl.transAxes)
    fig.savefig(out_path, dpi=90, bbox_inches="tight")
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("prefix", help="the -zt PREFIX of a traced run")
    ap.add_argument("--model", required=True, help="the run's model (for the plan's list)")
    ap.add_argument("--cuda-bytes", type=int, default=None, help="a CUDA run: floatX bytes (2 bf16, 4 fp32)")
    ap.add_argument("--grad-bytes", type=int, default=None, help="a CUDA run with -zd fp32: 4")
    ap.add_argument("--step", type=int, default=None, help="the step to draw (default: the last one traced)")
    ap.add_argument("--out", default=None, help="the PNG to write")
    ap.add_argument("--title", default=None)
    ap.add_argument("--emulated", action="store_true", help="say so on the time axis")
    ap.add_argument("--annotate", action="store_true", help="print rank 0's collectives with their issuing lines")
    args = ap.parse_args()
    try:
        header, step, per_rank = read_run(args.prefix, args.step)
        fails = check_against_plan(per_rank, plan_collectives(header, args.model, args.cuda_bytes, args.grad_bytes))
        fails += check_lines(header, collectives(per_rank[0]))
        if fails:
            raise TraceError("the traced step does not match the plan:\n  " + "\n  ".join(fails))
    except TraceError as e:
        print("error: %s" % e, file=sys.stderr)
        sys.exit(1)
    if args.annotate:
        print(annotate(header, step, per_rank))
    if args.out:
        draw(header, step, per_rank, args.out, args.title or "stage %s, %s ranks: step %d" % (header["stage"], header["ranks"], step),
             args.emulated)


if __name__ == "__main__":
    main()
