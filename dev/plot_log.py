"""
Draws the train and val loss curves of one or more training runs from the log files that
train_gpt2 writes with -o (llm.c's format: lines "s:STEP trl:LOSS" and "s:STEP tel:LOSS"), and,
for runs with -h 1, their HellaSwag accuracy ("s:STEP eval:ACC") in a second panel.

    /usr/bin/python3 dev/plot_log.py log_demo/main.log                    # -> log_demo/loss.png
    /usr/bin/python3 dev/plot_log.py runA/main.log runB/main.log -o cmp.png
"""
import argparse
import os
import re
import sys


def read_log(path):
    """Returns (train, val, hellaswag): lists of (step, loss or accuracy)."""
    series = {"trl": [], "tel": [], "eval": []}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            m = re.fullmatch(r"s:(\d+) (trl|tel|eval):([-+0-9.eE]+|nan|inf)", line)
            if m is None:
                sys.exit("error: '%s' line %d is not 's:STEP trl:LOSS', 's:STEP tel:LOSS' or 's:STEP eval:ACC': %r"
                         % (path, n, line))
            series[m.group(2)].append((int(m.group(1)), float(m.group(3))))
    return series["trl"], series["tel"], series["eval"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", nargs="+", help="main.log files written by train_gpt2 -o DIR")
    ap.add_argument("-o", "--out", help="PNG to write (default: loss.png beside the first log)")
    args = ap.parse_args()
    runs = []
    for path in args.logs:
        if not os.path.isfile(path):
            sys.exit("error: no log file '%s'" % path)
        train, val, hs = read_log(path)
        if not train and not val and not hs:
            sys.exit("error: '%s' has no loss or eval lines" % path)
        runs.append((path, train, val, hs))
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    with_hs = any(hs for _, _, _, hs in runs)
    fig, axes = plt.subplots(1, 2 if with_hs else 1, figsize=(14 if with_hs else 8, 4.5), squeeze=False)
    ax = axes[0][0]
    for i, (path, train, val, hs) in enumerate(runs):
        color = "C%d" % i
        name = os.path.basename(os.path.dirname(os.path.abspath(path))) or path
        if train:
            ax.plot([s for s, _ in train], [l for _, l in train], color=color, alpha=0.6, lw=1, label=name + " train")
        if val:
            ax.plot([s for s, _ in val], [l for _, l in val], "o-", color=color, lw=2, label=name + " val")
    ax.set_xlabel("step")
    ax.set_ylabel("loss (cross-entropy, nats per token)")
    ax.set_title("Loss curves")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    if with_hs:
        hx = axes[0][1]
        for i, (path, _, _, hs) in enumerate(runs):
            name = os.path.basename(os.path.dirname(os.path.abspath(path))) or path
            if hs:
                hx.plot([s for s, _ in hs], [a for _, a in hs], "o-", color="C%d" % i, lw=2, label=name)
        hx.axhline(0.25, color="gray", ls="--", lw=1, label="chance (1 in 4)")
        hx.set_xlabel("step")
        hx.set_ylabel("HellaSwag accuracy (lowest mean ending loss)")
        hx.set_title("HellaSwag")
        hx.grid(alpha=0.3)
        hx.legend(fontsize=8)
    fig.tight_layout()
    out = args.out or os.path.join(os.path.dirname(os.path.abspath(args.logs[0])), "loss.png")
    fig.savefig(out, dpi=100)
    print("wrote " + out)


if __name__ == "__main__":
    main()
