"""
The sample outputs in README.md and DESIGN.md, checked against fresh runs (dev/test/test_doc_samples.sh).

A sample is a fenced block right after a marker comment naming the command that produces it:

    <!-- sample: COMMAND -->                   run COMMAND (bash, at the repository's root, with
                                               $TMP a fresh folder) and compare its output
    <!-- sample, plan columns only (why): COMMAND -->   a table too slow to rerun here (a
                                               benchmark): its columns that are the plan's are
                                               compared with dev/bench/zero_plan_print, the
                                               measured ones (times, RSS, losses) are not

Comparing: the block's lines must appear in the output in order; a line "..." stands for any
number of output lines, and " ... " inside a line for any text. A first line "$ CMD" must be the
marker's command. Timings are masked on both sides (a number before "ms", tok/s, MFU, peak RSS,
the GPU memory in use); every other field must be equal, and a mismatch names the file, the
line and the first field that differs. A block that looks like a trainer's output (a start-up
table, a step line, -z auto's lines, bench_zero's table) without a marker is an error, and so is
a line count in the prose ("(150 lines)"): counts go stale, so the docs cite none.

    /usr/bin/python3 dev/test/doc_samples.py [--only SUBSTRING] README.md DESIGN.md
prints one "ok"/"FAIL" line per sample.
"""
import csv
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MARKER = re.compile(r"^<!-- sample(, plan columns only \([^)]*\))?: (.*) -->$")
# timings, masked before comparing
MASKS = [
    (re.compile(r"\b\d+(\.\d+)? ms\b"), "<ms>"),
    (re.compile(r"\b\d+(\.\d+)? tok/s\b"), "<tok/s>"),
    (re.compile(r"\bMFU [0-9.]+%"), "MFU <%>"),
    (re.compile(r"GPU memory \d+ MB"), "GPU memory <MB>"),
    (re.compile(r"^peak RSS per rank: .*$"), "peak RSS per rank: <rss>"),
    (re.compile(r"cudaMemGetInfo: [0-9.]+ MB"), "cudaMemGetInfo: <MB>"),
    (re.compile(r"^GPU memory allocated per rank: .*$"), "GPU memory allocated per rank: <MB>"),
]
# what a trainer's or a benchmark's output looks like
LOOKS_LIKE_OUTPUT = re.compile(r"^(step +\d+/\d+:|memory per rank +\||GPU memory/rank +\||-z auto: |N +stage +\|)", re.M)


def mask(line):
    """The line with its timings masked and its spaces collapsed: fields are compared, not columns."""
    for pattern, repl in MASKS:
        line = pattern.sub(repl, line)
    return " ".join(line.split())


def samples(path):
    """(line number of the marker, kind, command, block lines) for every marked block; and the
    line numbers of unmarked blocks that look like output."""
    lines = open(os.path.join(ROOT, path)).read().split("\n")
    found, unmarked = [], []
    i = 0
    while i < len(lines):
        m = MARKER.match(lines[i])
        if m and i + 1 < len(lines) and not lines[i + 1].startswith("```"):  # a markdown table (and its caption)
            start, i = i, i + 1
            while i < len(lines) and (lines[i].strip() or not any(x.startswith("|") for x in lines[start + 1:i])):
                i += 1
            found.append((start, "plan" if m.group(1) else "run", m.group(2), lines[start + 1:i]))
            continue
        if lines[i].startswith("```"):
            start, i = i, i + 1
            while i < len(lines) and not lines[i].startswith("```"):
                i += 1
            block = lines[start + 1:i]
            m = MARKER.match(lines[start - 1]) if start > 0 else None
            if m:
                found.append((start, "plan" if m.group(1) else "run", m.group(2), block))
            elif LOOKS_LIKE_OUTPUT.search("\n".join(block)):
                unmarked.append(start + 1)
        i += 1
    return found, unmarked


def line_matches(doc, out):
    if " ... " in doc:
        parts = [re.escape(p) for p in doc.split(" ... ")]  # (after mask: single spaces)
        return re.fullmatch(" .* ".join(parts), out) is not None
    return doc == out


def first_difference(doc, out):
    d, o = doc.split(), out.split()
    for k in range(max(len(d), len(o))):
        a = d[k] if k < len(d) else "(nothing)"
        b = o[k] if k < len(o) else "(nothing)"
        if a != b and a != "...":
            return "field %d: the doc has '%s', the run '%s'" % (k + 1, a, b)
    return "the lines differ"


def match_block(doc, out):
    """None if the doc lines appear in the output as described, else why not."""
    def go(i, j):
        if i == len(doc):
            return None
        if doc[i] == "...":
            if i + 1 == len(doc):
                return None
            last = "no output line matches the doc line %r" % doc[i + 1]
            for k in range(j, len(out)):
                if line_matches(doc[i + 1], out[k]):
                    why = go(i + 2, k + 1)
                    if why is None:
                        return None
                    last = why
            return last
        if j < len(out) and line_matches(doc[i], out[j]):
            return go(i + 1, j + 1)
        # say what differs, against the output line most like it
        if j >= len(out):
            return "the run's output ended before the doc line %r" % doc[i]
        return "doc line %r\n         run line %r\n         %s" % (doc[i], out[j], first_difference(doc[i], out[j]))
    return go(0, 0)


def check_run(command, block, tmp):
    env = dict(os.environ, TMP=tmp, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    proc = subprocess.run(["bash", "-c", command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        return "exit %d:\n%s" % (proc.returncode, (proc.stdout + proc.stderr)[-1500:])
    doc = [mask(x) for x in block]
    if doc and doc[0].startswith("$ "):
        if block[0][2:] != command:
            return "the block's first line runs '%s', the marker '%s'" % (block[0][2:], command)
        doc = doc[1:]
    out = [mask(x) for x in (proc.stdout + proc.stderr).split("\n")]
    return match_block(doc, out)


def plan_rows(model, ranks):
    proc = subprocess.run([os.path.join(ROOT, "dev/bench/zero_plan_print"), model] + [str(n) for n in ranks], cwd=ROOT,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError("zero_plan_print: " + proc.stderr.strip())
    return {(int(r["ranks"]), int(r["stage"])): r for r in csv.DictReader(proc.stdout.splitlines()) if r["group"] == r["ranks"]}


def same(doc_text, value_mb):
    """A doc number (as printed, %.1f or %.2f MB) against the plan's bytes."""
    decimals = len(doc_text.split(".")[1]) if "." in doc_text else 0
    return doc_text == "%.*f" % (decimals, value_mb / 1048576.0)


# the plan's columns of bench_zero.sh's table, in its order after "N stage | ms tok/s |"
BENCH_COLUMNS = [("params MB", ["params"]), ("grads MB", ["grads"]), ("optim MB", ["optimizer"]),
                 ("buffers MB", ["buffers"]), ("state MB", ["state_total"])]


# compare_stages.py's markdown table (CPU trainer): its columns that are the plan's
COMPARE_COLUMNS = {"params MB": ["params"], "grads MB": ["grads"], "optimizer MB": ["optimizer"], "buffers MB": ["buffers"],
                   "state allocated MB": ["state_total"], "state plan MB": ["state_total"],
                   "reduce-scatter MB/step": ["reduce_scatter"], "all-gather MB/step": ["all_gather"],
                   "plan comm MB/step": ["reduce_scatter", "all_gather"]}


def check_compare_table(command, block):
    """compare_stages.py's table: every plan column of every stage's row (the model and N from the command)."""
    flag = lambda name, default: (re.search(r"--%s (\S+)" % name, command).group(1) if "--" + name in command else default)
    model, ranks = flag("model", "gpt2_tiny.bin"), int(flag("ranks", "4"))
    if "--trainer" in command:
        return "the checker knows the CPU trainer's table only"
    table = [[c.strip() for c in x.strip().strip("|").split("|")] for x in block if x.startswith("|")]
    head, rows = table[0], [r for r in table[2:]]
    plans = plan_rows(model, [ranks])
    fails = []
    for r in rows:
        stage = int(r[0].split()[0])
        p = plans[(ranks, stage)]
        for name, text in zip(head, r):
            if name in COMPARE_COLUMNS:
                want = sum(float(p[k]) for k in COMPARE_COLUMNS[name])
                if not same(text, want):
                    fails.append("stage %d: %s %s, the plan %.2f" % (stage, name, text, want / 1048576.0))
    if not rows:
        fails.append("no table rows")
    return "\n         ".join(fails) if fails else None


def check_plan_table(command, block):
    """bench_zero.sh's table: the CPU plan's columns of every row (model and N from the row and the command)."""
    if "compare_stages.py" in command:
        return check_compare_table(command, block)
    if "bench_zero.sh" not in command:
        return "a plan-columns sample must be bench_zero.sh's or compare_stages.py's table (the checker knows their columns)"
    model = command.split("bench_zero.sh", 1)[1].split()[0]
    rows = [x for x in block if re.match(r"^\d+\s+[0-3]\s+\|", x)]
    plans = plan_rows(model, sorted(set(int(x.split()[0]) for x in rows)))
    fails = []
    for x in rows:
        parts = [p.split() for p in x.split("|")]
        n, stage = int(parts[0][0]), int(parts[0][1])
        p = plans[(n, stage)]
        mem, comm = parts[2], parts[4]
        for (name, keys), text in zip(BENCH_COLUMNS, mem):
            if not same(text, sum(int(p[k]) for k in keys)):
                fails.append("N=%d stage %d: %s %s, the plan %.1f" % (n, stage, name, text, sum(int(p[k]) for k in keys) / 1048576.0))
        for name, key, text in [("RS MB/step", "reduce_scatter", comm[0]), ("AG MB/step", "all_gather", comm[1])]:
            if not same(text, float(p[key])):
                fails.append("N=%d stage %d: %s %s, the plan %.1f" % (n, stage, name, text, float(p[key]) / 1048576.0))
    if not rows:
        fails.append("no rows 'N stage | ...' in the block")
    return "\n         ".join(fails) if fails else None


def main():
    args = sys.argv[1:]
    only = None
    if args[:1] == ["--only"]:
        only, args = args[1], args[2:]
    passed = failed = 0
    for path in args:
        found, unmarked = samples(path)
        for line in unmarked:
            print("FAIL %s:%d: a block of trainer output without a '<!-- sample: COMMAND -->' marker" % (path, line))
            failed += 1
        text = open(os.path.join(ROOT, path)).read()
        for m in re.finditer(r"\(\d+ lines\)|\b\d{2,} (?:dense )?lines\b", text):
            print("FAIL %s:%d: a line count ('%s'): cite none, they go stale" % (path, text[:m.start()].count("\n") + 1, m.group(0)))
            failed += 1
        for line, kind, command, block in found:
            if only is not None and only not in command:
                continue
            missing = [b for b in re.findall(r"\./(train_gpt2\w*)", command) if not os.path.exists(os.path.join(ROOT, b))]
            if missing:  # the emulated CUDA trainer is built only where the CUDA headers are
                print("skip %s:%d: %s not built" % (path, line + 1, ", ".join(missing)))
                continue
            with tempfile.TemporaryDirectory() as tmp:
                why = check_run(command, block, tmp) if kind == "run" else check_plan_table(command, block)
            where = "%s:%d (%s)" % (path, line + 1, command if len(command) < 90 else command[:87] + "...")
            if why is None:
                print("ok   %s" % where)
                passed += 1
            else:
                print("FAIL %s\n         %s" % (where, why))
                failed += 1
    print("doc samples: %d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
