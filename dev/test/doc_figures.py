"""
The figures in the prose of the docs, each regenerated from the tree or checked against a fresh
run (dev/test/test_doc_figures.sh). Samples of trainer output are dev/test/doc_samples.py's; this
file checks the numbers written in sentences and in the hand-made tables.

How it works:
  - FIGURES below is the list of checked figures. Each names a doc, a regular expression that
    finds the figure in it (its named groups are the figures) and a function that computes, from
    the tree this runs on, what each group must say (the plan from dev/bench/zero_plan_print, a
    count of files, a table printed by a script, ptxas...). Nothing expected is written here: a
    figure that someone's change makes stale fails, and a figure that moves with the code stays
    true. A pattern that no longer matches fails too ("not found": the sentence was rewritten;
    update its entry here).
  - TABLES: hand-copied tables (dev/cuda/NOTES.md's ptxas and memory-floor tables, the attention
    prediction) compared cell by cell with a fresh run of the script that prints them.
  - the scan: every figure of the kinds that went stale before (registers, programs, products,
    channels, growth factors "N× the ...", FLOPs) in the prose of DOCS must be one that an entry
    checks, or stand in a paragraph that says "measured once" with its date and command (a
    measurement nothing here can repeat).
  - the first hour (issue 31): README's OpenMPI root variables said once, and set wherever the
    project runs mpirun; every script with a #! line executable; every file README's commands
    use made by an earlier README command; README's multi-rank example run as root with only
    the README's settings (skipped, with a line, where mpirun is not installed).

    /usr/bin/python3 dev/test/doc_figures.py [--only SUBSTRING] [--mutants] [--list-unchecked]
prints one "ok"/"FAIL"/"skip" line per check and "doc figures: N passed, N failed". --mutants
also puts back each of issue 31's false figures (OLD_FIGURES) and changes the last digit of each
checked figure, and requires the checks to fail on every one. --list-unchecked lists the unit
figures of the docs outside UNITS_STRICT that nothing checks yet.
Refreshing after a merge: run dev/test/test_doc_figures.sh --mutants. A FAIL names the doc's
line, what it says and what the tree gives: fix the doc, not this file. Only "not found" (the
sentence was rewritten) needs its pattern here changed; a new figure of a scanned kind needs an
entry in FIGURES, or "measured once (DATE, `COMMAND`)" in its paragraph.
"""
import csv
import functools
import glob
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ZPP = os.path.join(ROOT, "dev/bench/zero_plan_print")
# the docs whose prose is checked (README.md's moved text lives in the dev/*/README.md files)
DOCS = ["README.md", "DESIGN.md", "dev/cuda/NOTES.md"] + sorted(
    p for p in (os.path.relpath(x, ROOT) for x in glob.glob(os.path.join(ROOT, "dev/*/README.md")))
    if p not in ("dev/perf/README.md",))  # dev/perf's figures are dev/perf/test_perf_model.py's


class Skip(Exception):
    """A check that cannot run here (a tool missing): printed, neither passed nor failed."""


OVERRIDE = {}  # path -> text: the mutants' docs (--mutants)


def text(path):
    if path in OVERRIDE:
        return OVERRIDE[path]
    return _read(path)


@functools.lru_cache(maxsize=None)
def _read(path):
    return open(os.path.join(ROOT, path), encoding="utf-8").read()


def run(cmd, **kw):
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(cmd), p.returncode, (p.stderr or p.stdout).strip()[-400:]))
    return p.stdout


# The two ptxas scripts (~25 s each, one core each) start together in the background when main()
# knows both will be needed; started(key, ...) starts one (once), finished(key, timeout) waits for
# it: (exit status, stdout, stderr).
_BACKGROUND = {}


def started(key, cmd, env):
    if key not in _BACKGROUND:
        _BACKGROUND[key] = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    return _BACKGROUND[key]


def finished(key, timeout):
    p = _BACKGROUND[key]
    if not hasattr(p, "result"):
        out, err = p.communicate(timeout=timeout)
        p.result = (p.returncode, out, err)
    return p.result


def nvcc_path():
    return shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)


def start_ptx16(nvcc):
    started("ptx16", ["bash", "dev/test/test_ptx_16byte.sh"],
            dict(os.environ, PATH=os.path.dirname(nvcc) + ":" + os.environ.get("PATH", "")))


def start_attention_ptx(nvcc):
    started("attention_ptx", ["bash", "dev/test/test_attention_ptx.sh", "--table"], dict(os.environ, NVCC=nvcc))


# ---- what the tree says -------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def plan(model, n, flags=()):
    """zero_plan_print's G = N rows for MODEL at N ranks (FLAGS: --cuda 2 ...): {stage: row}."""
    if not os.path.exists(ZPP):
        raise RuntimeError("dev/bench/zero_plan_print is not built: make dev/bench/zero_plan_print")
    if model.endswith(".bin") and not os.path.exists(os.path.join(ROOT, model)):
        raise RuntimeError("%s missing: make references" % model)
    rows = csv.DictReader(run([ZPP] + list(flags) + [model, str(n)]).splitlines())
    return {int(r["stage"]): r for r in rows if r["group"] == r["ranks"]}


@functools.lru_cache(maxsize=None)
def gathers(L, policy):
    """All-gathers of one stage-3 micro-step of a fresh dL on 4 ranks (zero_plan_print's walk)."""
    out = run([ZPP, "--collectives", "3", "--zr", policy, "d%d" % L, "4"])
    return sum(1 for x in out.splitlines() if x.split()[:1] == ["all-gather"])


def params_of(L, C, Vp=50304, maxT=1024):
    return Vp * C + maxT * C + 2 * C + L * (12 * C * C + 13 * C)


def channels_of_depth(L):
    """C of the fresh model dL, from zero_plan_print's parameter count (no padding at N = 1)."""
    P = int(plan("d%d" % L, 1)[0]["params"]) // 4
    for C in range(8, 4097, 8):
        if params_of(L, C) == P:
            return C
    raise RuntimeError("d%d: no C gives %d parameters" % (L, P))


def formula(expr, L):
    """A doc formula in L ('2L + 1', 'L + 1'), evaluated."""
    py = re.sub(r"(\d)L", r"\1*L", expr.replace("−", "-"))
    if not re.fullmatch(r"[\dL+\-* ()]+", py):
        raise RuntimeError("not a formula in L: %r" % expr)
    return eval(py, {"L": L})


@functools.lru_cache(maxsize=None)
def catalogue():
    """The emulator's catalogue programs by the first word of their first line: BROKEN, CORRECT, other."""
    counts = {"all": 0, "broken": 0, "correct": 0, "other": 0}
    for f in glob.glob(os.path.join(ROOT, "dev/cuda/emu/tests/catalogue/*.cu")):
        first = open(f, encoding="utf-8").readline().split()
        word = first[1].rstrip(":").lower() if len(first) > 1 else ""
        counts["all"] += 1
        counts[word if word in ("broken", "correct") else "other"] += 1
    return counts


@functools.lru_cache(maxsize=None)
def zero_plan_test_ranks():
    """dev/test/test_zero_plan.c: the world sizes it checks, and the cap above which only the micro config runs."""
    src = text("dev/test/test_zero_plan.c")
    ns = [int(x) for x in re.search(r"int Ns\[\] = \{([^}]*)\}", src).group(1).split(",")]
    cap = int(re.search(r"if \(Ns\[i\] <= (\d+)\)", src).group(1))
    return [n for n in ns if n <= cap], [n for n in ns if n > cap]


@functools.lru_cache(maxsize=None)
def floors(gbs=None):
    """dev/bench/memory_floors.py's table: {first word of the kernel: [launches, MB total]} and the micro-step total."""
    out = run([sys.executable, "dev/bench/memory_floors.py"] + (["--gbs", str(gbs)] if gbs else []))
    rows, total = {}, None
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5 or not re.fullmatch(r"[\d.]+", cells[3]):
            continue
        if cells[0] == "per micro-step":
            total = float(cells[3])
            continue
        key = cells[0].split()[0]
        r = rows.setdefault(key, [0, 0.0])
        r[0] += int(cells[1])
        r[1] += float(cells[3])
    return rows, total


def notes_ptx_table():
    """dev/cuda/NOTES.md's ptxas table: {(kernel, hs, arch): row cells}."""
    t = {}
    for line in text("dev/cuda/NOTES.md").splitlines():
        m = re.match(r"^\| (forward|dkdv|dq) \| (\d+) \| (sm_\d+) \|(.*)\|$", line)
        if m:
            t[(m.group(1), int(m.group(2)), m.group(3))] = [c.strip() for c in m.group(4).split("|")]
    if not t:
        raise RuntimeError("dev/cuda/NOTES.md has no ptxas table (| kernel | hs | arch | registers | ...)")
    return t


def reg_range(kernel, hs=64):
    t = notes_ptx_table()
    regs = sorted(int(t[(kernel, hs, a)][0]) for a in ("sm_80", "sm_90"))
    return str(regs[0]) if regs[0] == regs[1] else "%d-%d" % (regs[0], regs[1])


def products(kernel, hs=64):
    """Products a kernel does: its mma.sync count in the PTX over one product's (the forward does 2)."""
    t = notes_ptx_table()
    per = int(t[("forward", hs, "sm_80")][-1]) // 2
    return int(t[(kernel, hs, "sm_80")][-1]) // per


@functools.lru_cache(maxsize=None)
def ptx16_registers():
    """dev/test/test_ptx_16byte.sh's ptxas registers of the bf16 16-byte kernels: {(kernel, arch): registers}."""
    nvcc = nvcc_path()
    if not nvcc:
        raise Skip("nvcc not found: the 16-byte kernels' registers are not regenerated here")
    start_ptx16(nvcc)
    _, out, err = finished("ptx16", timeout=900)
    regs = {(m.group(2), m.group(1)): int(m.group(3))
            for m in re.finditer(r"BF16 (sm_\d+) (\w+)_kernel: .*?(\d+) registers", out)}
    if not regs:
        raise RuntimeError("dev/test/test_ptx_16byte.sh printed no register counts: " + (out + err)[-300:])
    return regs


KERNELS_16 = {"gelu": ("gelu_forward", "gelu_backward"), "layernorm forward": ("layernorm_forward",),
              "layernorm backward": ("layernorm_backward",), "encoder": ("encoder_forward", "encoder_backward_dwte", "encoder_backward_dwpe"),
              "classifier": ("fused_classifier",)}


def check_ptx16(m):
    regs, fails = ptx16_registers(), []
    for name, a80, a90 in re.findall(r"([a-z][a-z ]*?) (\d+(?:-\d+)?) / (\d+(?:-\d+)?)", " ".join(m.group("list").split())):
        name = name.strip()
        if name not in KERNELS_16:
            fails.append("unknown kernel '%s' in the register list (KERNELS_16 in doc_figures.py)" % name)
            continue
        for arch, doc in (("sm_80", a80), ("sm_90", a90)):
            r = sorted(regs[(k, arch)] for k in KERNELS_16[name])
            want = str(r[0]) if r[0] == r[-1] else "%d-%d" % (r[0], r[-1])
            if doc != want:
                fails.append("%s at %s: the doc says %s registers, ptxas %s" % (name, arch, doc, want))
    return "; ".join(fails) or None


@functools.lru_cache(maxsize=None)
def attention_predict():
    """dev/bench/attention_predict.py: {kernel: (TFLOP, {device: (tensor, shared, exp2, predicted)})}, totals."""
    out = run([sys.executable, "dev/bench/attention_predict.py"])
    rows, totals = {}, {}
    for line in out.splitlines():
        c = [x.strip() for x in line.strip().strip("|").split("|")]
        if len(c) == 8 and re.fullmatch(r"[\d.]+", c[2]):
            rows.setdefault(c[0], [c[2], {}])[1][c[3].split()[0]] = (c[4], c[5], c[6], c[7].split()[0])
        m = re.match(r"(\w+) SXM: attention ([\d.]+) ms per step", line)
        if m:
            totals[m.group(1)] = m.group(2)
    return rows, totals


def like(doc_text, value):
    """VALUE printed with as many decimals as the doc's figure has."""
    decimals = len(doc_text.split(".")[1]) if "." in doc_text else 0
    return "%.*f" % (decimals, value)


def js_const(name):
    return int(re.search(r"\b%s = (\d+)" % name, text("dev/data/tinyshakespeare.js")).group(1))


def mb(nbytes, decimals=1):
    return "%.*f" % (decimals, nbytes / 1048576.0)


def pct(x):
    return "%d" % round(100 * x)


# ---- the checked figures ------------------------------------------------------------------------
# (doc, pattern with named groups, function giving {group: expected text}, what it is)
D12, TINY, SMALL = "d12", "gpt2_tiny.bin", "d2"
CUDA2 = ("--cuda", "2")  # the bf16 CUDA trainer's bytes per element


def tiny_unit0_share():
    L, C = 2, 64
    u0 = 50304 * C + 1024 * C + 2 * C
    return {"share": pct(u0 / params_of(L, C))}


def plan_ratio_z3_z0():
    worst = max((int(plan(D12, n)[3]["reduce_scatter"]) + int(plan(D12, n)[3]["all_gather"])) /
                (int(plan(D12, n)[0]["reduce_scatter"]) + int(plan(D12, n)[0]["all_gather"])) for n in (2, 4, 8, 64))
    same = all(plan(D12, n)[s]["reduce_scatter"] == plan(D12, n)[0]["reduce_scatter"] and
               plan(D12, n)[s]["all_gather"] == plan(D12, n)[0]["all_gather"] for n in (2, 4, 8) for s in (1, 2))
    return {"ratio": "%.1f" % worst if same else "stages 0-2 differ"}


FIGURES = [
    # 1 (issue 31): stage 3's gathers per micro-step, each policy, as formulas in L
    ("README.md", r"`-zr default` (?P<default>[0-9L +−-]+?) per micro-step \(\d+ for the tiny model\), `-zr always` (?P<always>[0-9L +−-]+?), `-zr never` (?P<never>[0-9L +−-]+?)[,.)]",
     lambda m: check_gather_formulas(m), "stage 3's all-gathers per micro-step (zero_plan_print --collectives 3 --zr P dL 4, L = 2 and 12)"),
    ("README.md", r"`-zr default` [0-9L +−-]+? per micro-step \((?P<tiny>\d+) for the tiny model\)",
     lambda: {"tiny": str(gathers(2, "default"))}, "the tiny model's stage-3 all-gathers per micro-step"),
    # 2: dN's channels
    ("README.md", r"d24, d36, d48 have C = (?P<d24>\d+), (?P<d36>\d+), (?P<d48>\d+)",
     lambda: {"d24": str(channels_of_depth(24)), "d36": str(channels_of_depth(36)), "d48": str(channels_of_depth(48))},
     "the channels of -e d24/d36/d48 (zero_plan_print's parameter count)"),
    ("README.md", r"other depths N: (?P<k>\d+)·N channels",
     lambda: {"k": str(channels_of_depth(4) // 4) if channels_of_depth(4) // 4 == channels_of_depth(6) // 6 else "?"},
     "the channels of a fresh dN at other depths"),
    # 3: test_zero_plan's world sizes
    ("dev/test/README.md", r"for N ∈ \{(?P<ns>[\d, ]+)\} \(and (?P<big>[\d, ]+) for the micro config\)",
     lambda: {"ns": ", ".join(map(str, zero_plan_test_ranks()[0])), "big": ", ".join(map(str, zero_plan_test_ranks()[1]))},
     "the world sizes dev/test/test_zero_plan.c checks"),
    # 4: Open MPI's reduce-scatter growth (measured once: DESIGN.md §5.5 gives the run); every mention agrees with it
    ("dev/test/README.md", r"grew rank 0's by (?P<g>[\d.]+)× the whole buffer",
     lambda: {"g": re.search(r"rank 0 allocated ([\d.]+)× the whole buffer", text("DESIGN.md")).group(1)},
     "Open MPI's growth, as DESIGN.md §5.5's measurement says"),
    ("DESIGN.md", r"rank 0 allocated (?P<g>[\d.]+)× the whole buffer \(measured once[^)]*: \+(?P<mb>\d+) MB for a (?P<buf>\d+) MB buffer",
     lambda m: {"g": "%.2f" % (round(int(m.group("mb")) / int(m.group("buf")) * 4) / 4)},
     "the growth = the measured +MB / the buffer's MB, to a quarter"),
    ("DESIGN.md", r"d24, d36 and d48 get C = (?P<d24>\d+), (?P<d36>\d+) and\s+(?P<d48>\d+) with heads of (?P<hs>\d+) channels \(NH (?P<h24>\d+), (?P<h36>\d+), (?P<h48>\d+)\)",
     lambda: dict({"d%d" % L: str(channels_of_depth(L)) for L in (24, 36, 48)}, hs="64",
                  **{"h%d" % L: str(channels_of_depth(L) // 64) for L in (24, 36, 48)}),
     "GPT-2's larger shapes (zero_plan_print's parameter count; heads of 64 as GPT-2's)"),
    ("dev/test/README.md", r"grads and reduce-scatter bytes\s+exactly (?P<x>\d+)x the bf16 run's",
     lambda: {"x": "%d" % (int(plan(SMALL, 2, ("--cuda", "2", "--grads", "4"))[1]["reduce_scatter"]) //
                           int(plan(SMALL, 2, ("--cuda", "2"))[1]["reduce_scatter"]))},
     "-zd fp32's reduce-scatter bytes over bf16's (the plan)"),
    ("dev/cuda/NOTES.md", r"(?P<peak>\d+) TFLOP/s dense bf16",
     lambda: {"peak": "%d" % round(float(re.search(r"H100 SXM5: ([\d.]+) TFLOP/s dense bf16", text("dev/bench/attention_predict.py")).group(1)))},
     "the H100's dense bf16 peak, as dev/bench/attention_predict.py cites it"),
    ("dev/cuda/NOTES.md", r"count their mma.sync \((?P<f>\d+) FLOPs each\)",
     lambda: {"f": str(2 * 16 * 8 * 16)}, "one mma.sync m16n8k16: 2·16·8·16 FLOPs"),
    ("dev/cuda/NOTES.md", r"with 1024, the cap of (?P<r>\d+) registers",
     lambda: {"r": str(65536 // 1024)}, "65536 registers per SM over 1024 threads"),
    # 5: the emulator's catalogue
    ("dev/test/README.md", r"(?P<all>\d+) CUDA programs \((?P<broken>\d+) broken, (?P<correct>\d+) correct, (?P<other>\d+) other\)",
     lambda: {k: str(v) for k, v in catalogue().items()}, "the emulator's catalogue (first word of each program's first line)"),
    # 6: the attention kernels' products, from the mma.sync count of the PTX (NOTES' ptxas table)
    ("dev/cuda/NOTES.md", r"- \*\*Products\*\* (?P<fwd>[^()]+) \(forward\), (?P<dkdv>[^()]+) \(dK/dV kernel\), (?P<dq>[^()]+) \(dQ kernel\)",
     lambda m: check_products(m), "products per attention kernel = its mma.sync in the PTX / one product's"),
    ("dev/cuda/NOTES.md", r"~(?P<x>[\d.]+)× that backward \((?P<n>\d+) products, deterministic\)",
     lambda: {"x": "%.1f" % ((float(attention_predict()[0]["backward dK/dV"][0]) + float(attention_predict()[0]["backward dQ"][0]))
                              / float(attention_predict()[0]["forward"][0])),
              "n": str(products("dkdv") + products("dq"))}, "the backward's FLOPs over the forward's, its products"),
    ("dev/cuda/NOTES.md", r"(?P<n>\d+) products where a one-pass backward with atomic dQ does 5, ~(?P<x>[\d.]+)× its FLOPs",
     lambda: {"n": str(products("dkdv") + products("dq")), "x": "%.1f" % ((products("dkdv") + products("dq")) / 5)},
     "the deterministic backward's products against a one-pass backward's 5 (S, dP, dV, dK, dQ)"),
    # 7: registers at hs 64, from the ptxas table (itself checked against ptxas below)
    ("dev/cuda/NOTES.md", r"At GPT-2's hs 64: forward (?P<forward>[\d-]+) registers, \d+ blocks \(16 warps\) per SM; dK/dV (?P<dkdv>[\d-]+), \d+ blocks;\s+dQ (?P<dq>[\d-]+), \d+ blocks",
     lambda: {k: reg_range(k) for k in ("forward", "dkdv", "dq")}, "registers at hs 64 (the ptxas table, sm_80-sm_90)"),
    ("llmc/attention.cuh", r"16 keys at a time:\s+(?P<dq80>\d+) \(sm_80\) / (?P<dq90>\d+) \(sm_90\) registers",
     lambda: {"dq80": notes_ptx_table()[("dq", 64, "sm_80")][0], "dq90": notes_ptx_table()[("dq", 64, "sm_90")][0]},
     "the dQ kernel's registers in attention.cuh's comment"),
    ("llmc/attention.cuh", r"S for 64 keys \(32\): (?P<f>\d+) registers, 4 blocks",
     lambda: {"f": notes_ptx_table()[("forward", 64, "sm_80")][0]}, "the forward's registers (sm_80) in attention.cuh"),
    ("llmc/attention.cuh", r"need only 16:\s+(?P<d>\d+) registers, 3 blocks",
     lambda: {"d": notes_ptx_table()[("dkdv", 64, "sm_80")][0]}, "the dK/dV kernel's registers (sm_80) in attention.cuh"),
    ("dev/cuda/NOTES.md", r"vector accesses and that none spills\): (?P<list>[^.]+?)\.\n",
     lambda m: check_ptx16(m), "the 16-byte kernels' registers (test_ptx_16byte.sh's ptxas, bf16, sm_80 / sm_90)"),
    # 8: the update's bytes (memory_floors.py) in NOTES' prose
    ("dev/cuda/NOTES.md", r"The same at A100 SXM 80GB \(`--gbs 2039`\): (?P<ms>[\d.]+) ms per micro-step",
     lambda: {"ms": "%.1f" % (floors()[1] / 2039.0)}, "the A100 floor per micro-step (memory_floors.py --gbs 2039)"),
    # dev/gpu_check.sh's default deadline (its own code)
    ("DESIGN.md", r"deadline of its own \((?P<s>\d+) s by default",
     lambda: {"s": re.search(r"echo 600 \|\| echo (\d+)\)", text("dev/gpu_check.sh")).group(1)}, "gpu_check.sh's default deadline"),
    ("dev/cuda/README.md", r"deadline of its own \((?P<s>\d+) s by default",
     lambda: {"s": re.search(r"echo 600 \|\| echo (\d+)\)", text("dev/gpu_check.sh")).group(1)}, "gpu_check.sh's default deadline"),
    # tiny Shakespeare: dev/data/tinyshakespeare.js's checked constants
    ("README.md", r"the text of tiny Shakespeare \((?P<mb>[\d.]+) MB\)",
     lambda: {"mb": "%.1f" % (js_const("STD_BYTES") / 1e6)}, "tiny Shakespeare's size (tinyshakespeare.js)"),
    ("dev/data/README.md", r"\((?P<b>\d+) bytes: char-rnn[\s\S]*?(?P<train>\d+) and (?P<val>\d+) tokens",
     lambda: {"b": str(js_const("STD_BYTES")), "train": str(js_const("STD_TRAIN")), "val": str(js_const("STD_VAL"))},
     "tiny Shakespeare's bytes and tokens (tinyshakespeare.js's checked constants)"),
    ("README.md", r"beside OpenAI's model \((?P<p>[\d.]+)%\)",
     lambda: {"p": "%.1f" % (1e-9 + 100 * float(re.search(r"BASELINE_HELLASWAG:-([\d.]+)", text("dev/scripts/run_gpt2_124M.sh")).group(1)))},
     "OpenAI's GPT-2 124M HellaSwag score, as the recipe compares against it"),
    # DESIGN.md's prose figures from the plan (GPT-2 124M)
    ("DESIGN.md", r"In GPT-2 124M unit 0 is (?P<p>[\d.]+)% of the parameters",
     lambda m: {"p": like(m.group("p"), 100 * (50304 * 768 + 1024 * 768 + 2 * 768) / params_of(12, 768))}, "unit 0's share of GPT-2 124M"),
    ("DESIGN.md", r"unit-0 and two block gradient buffers \((?P<g>[\d.]+) MB\), plus, at\s+stage 3, the gather buffers \(another (?P<b>[\d.]+) MB\)",
     lambda m: {"g": like(m.group("g"), (int(plan(D12, 8, CUDA2)[2]["grads"]) - 2 * params_of(12, 768) // 8) / 1048576),
                "b": like(m.group("b"), int(plan(D12, 8, CUDA2)[3]["buffers"]) / 1048576)},
     "the bf16 plan at N = 8: stage 2's gradient buffers beyond the shard, stage 3's gather buffers"),
    ("DESIGN.md", r"goes from (?P<z0>\d+) MB at stage 0 down to (?P<z3>\d+) MB at stage 3\)",
     lambda: {"z0": "%d" % round(int(plan(D12, 4)[0]["state_total"]) / 1048576), "z3": "%d" % round(int(plan(D12, 4)[3]["state_total"]) / 1048576)},
     "the CPU plan's model state at N = 4"),
    ("DESIGN.md", r"The GPU saves (?P<s>[\d.]+) MB \(12·P/8\) at every stage\. At stage 3 that leaves (?P<left>\d+) MB per GPU",
     lambda m: {"s": like(m.group("s"), int(plan(D12, 8, CUDA2)[1]["optimizer"]) / 1048576),
                "left": "%d" % round((int(plan(D12, 8, CUDA2)[3]["state_total"]) - int(plan(D12, 8, CUDA2)[3]["optimizer"])) / 1048576)},
     "-zo 1 at N = 8: the optimizer shard moved to the host, stage 3's GPU state left"),
    ("DESIGN.md", r"AdamW over (?P<e>[\d.]+)M elements per rank at N = 8, (?P<mb>[\d.]+) MB each way",
     lambda m: {"e": like(m.group("e"), int(plan(D12, 8, CUDA2)[3]["params"]) / 2 / 1e6), "mb": like(m.group("mb"), int(plan(D12, 8, CUDA2)[3]["params"]) / 1048576)},
     "-zo 1 at N = 8: the shard's elements and its bf16 bytes"),
    ("DESIGN.md", r"B=4, T=64: (?P<a0>[\d.]+) → (?P<a1>[\d.]+) → (?P<a2>[\d.]+) MB\)",
     lambda m: {"a0": re.search(r"^\| 0 \(DDP\) \|(?:[^|]*\|){4} ([\d.]+) \|", text("dev/bench/README.md"), re.M).group(1),
                "a1": like(m.group("a1"), float(m.group("a0")) - 11 * 4 * 64 * 4 * 768 * 4 / 1048576),
                "a2": like(m.group("a2"), float(m.group("a0")) - 11 * 4 * 64 * 4 * 768 * 4 / 1048576 - 2 * 11 * 4 * 64 * 768 * 4 / 1048576)},
     "-r 1 and -r 2's activations: the measured -r 0 row (dev/bench/README.md's table) less (L−1)·B·T·4C·4 and 2·(L−1)·B·T·C·4 bytes"),
    ("DESIGN.md", r"in the tiny model it is (?P<share>\d+)%", tiny_unit0_share, "unit 0's share of the tiny model"),
    ("DESIGN.md", r"where unit 0 \(wte, (?P<share>\d+)% of it\)", tiny_unit0_share, "unit 0's share of the tiny model"),
    ("DESIGN.md", r"The formula's grads, (?P<mb>[\d.]+) MB",
     lambda m: {"mb": like(m.group("mb"), 2 * params_of(2, 64) / 2 / 1048576)}, "the tiny model's ZeRO-formula grads at N = 2 in bf16 (2Ψ/N)"),
    ("DESIGN.md", r"reduce-scatter =\s+2 × [\d,]+ × ½ = (?P<rs>[\d,]+) bytes\. Stage-3 all-gather with `default` = [^=]+= (?P<ag>[\d,]+) bytes",
     lambda: {"rs": "{:,}".format(int(plan(TINY, 2, CUDA2)[3]["reduce_scatter"])), "ag": "{:,}".format(int(plan(TINY, 2, CUDA2)[3]["all_gather"]))},
     "the tiny model's bytes per step at N = 2, bf16, stage 3 (the plan of gpt2_tiny.bin)"),
    ("DESIGN.md", r"`-wt S` \(default (?P<wt>\d+) s;",
     lambda: {"wt": "%d" % float(re.search(r"\.wait_timeout = ([\d.]+)f", text("llmc/train_args.h")).group(1))}, "-wt's default (llmc/train_args.h)"),
    ("DESIGN.md", r"It spins for the first (?P<ms>\d+) ms, then naps (?P<us>\d+) µs once\s+every (?P<n>\d+) polls",
     lambda: {"ms": "%d" % (1000 * float(re.search(r"if \(waited > ([\d.]+)\)", text("llmc/mpi_comm.h")).group(1))),
              "us": "%d" % (int(re.search(r"struct timespec nap = \{0, (\d+)\}", text("llmc/mpi_comm.h")).group(1)) // 1000),
              "n": "%d" % (1 + int(re.search(r"\(polls & (\d+)\) == 0", text("llmc/mpi_comm.h")).group(1)))},
     "comm_wait_within's spin, nap and polls (llmc/mpi_comm.h)"),
    ("DESIGN.md", r"\(stage 0, G = 8: (?P<cpu>[\d.]+) CPU, (?P<cuda>[\d.]+) CUDA, (?P<mb>[\d.]+) MB moved;",
     lambda m: {"cpu": like(m.group("cpu"), int(plan(D12, 8)[0]["state_total"]) / 1048576),
                "cuda": like(m.group("cuda"), int(plan(D12, 8, CUDA2)[0]["state_total"]) / 1048576),
                "mb": like(m.group("mb"), (int(plan(D12, 8, CUDA2)[0]["reduce_scatter"]) + int(plan(D12, 8, CUDA2)[0]["all_gather"])) / 1048576)},
     "stage 0 at N = 8: the model state (CPU, bf16) and the bf16 bytes moved (the plan)"),
    ("DESIGN.md", r"costs (?P<h>\d+) MB of pinned host memory per rank \((?P<gb>[\d.]+) GB for a node of 8\)",
     lambda m: {"h": "%d" % round((12 + 2 * 2) * (int(plan(D12, 8, CUDA2)[0]["params"]) // 2) / 8 / 1048576),
                "gb": like(m.group("gb"), 8 * int(m.group("h")) / 1024)},
     "-zo 1's pinned host memory per rank at N = 8, bf16: 12·P/N of optimizer + 2·b·P/N of staging; 8 ranks"),
    ("dev/cuda/README.md", r"the `-wt` deadline \(default (?P<wt>\d+) s;",
     lambda: {"wt": "%d" % float(re.search(r"\.wait_timeout = ([\d.]+)f", text("llmc/train_args.h")).group(1))}, "-wt's default (llmc/train_args.h)"),
    # the README's and the moved text's plan figures
    ("README.md", r"stage 3 up to (?P<ratio>[\d.]+)× as many", plan_ratio_z3_z0, "stage 3's bytes over stage 0's (the plan, GPT-2 124M, N = 2-64)"),
    ("dev/bench/README.md", r"Per-rank model state falls from (?P<z0>\d+) MB \(stage 0\) to (?P<z3>\d+) MB \(stage 3\)\s+at N=4",
     lambda: {"z0": "%d" % round(int(plan(D12, 4)[0]["state_total"]) / 1048576), "z3": "%d" % round(int(plan(D12, 4)[3]["state_total"]) / 1048576)},
     "GPT-2 124M's model state per rank at N = 4 (the plan)"),
    ("dev/bench/README.md", r"at N=4 that is (?P<g>[\d.]+) MB rather than (?P<p>[\d.]+)/4 = (?P<q>\d+) MB",
     lambda m: {"g": like(m.group("g"), int(plan(D12, 4)[2]["grads"]) / 1048576), "p": like(m.group("p"), int(plan(D12, 1)[0]["params"]) / 1048576),
                "q": "%d" % round(int(plan(D12, 1)[0]["params"]) / 4 / 1048576)},
     "stage 2's gradients at N = 4 against P/4 (the plan)"),
    ("dev/bench/README.md", r"unit\s+0 \(wte, (?P<p>\d+)% of GPT-2 124M\)",
     lambda: {"p": pct(50304 * 768 / params_of(12, 768))}, "wte's share of GPT-2 124M"),
    ("README.md", r"For this\s+model unit 0 is (?P<share>\d+)% of the\s+parameters", tiny_unit0_share, "unit 0's share of the tiny model"),
    ("DESIGN.md", r"Unit 0 is (?P<share>\d+)% of the\s+parameters", tiny_unit0_share, "unit 0's share of the tiny model"),
    ("DESIGN.md", r"\(`dev/test/test_zero_plan.c` checks N up to (?P<n>\d+)\)",
     lambda: {"n": str(max(zero_plan_test_ranks()[0] + zero_plan_test_ranks()[1]))}, "the largest N test_zero_plan checks"),
    ("DESIGN.md", r"stage 3 with `always` moves exactly (?P<x>[\d.]+)× stage 0",
     lambda: {"x": "%g" % ((int(plan(D12, 4)[0]["reduce_scatter"]) + 2 * int(plan(D12, 4)[0]["all_gather"])) /
                           (int(plan(D12, 4)[0]["reduce_scatter"]) + int(plan(D12, 4)[0]["all_gather"])))},
     "stage 3 'always' over stage 0: reduce-scatter + 2 all-gathers of the same bytes over 1 + 1"),
    ("DESIGN.md", r"stage 3 costs (?P<x>[\d.]+)× stage 0's traffic with `always`",
     lambda: {"x": "1.5" if gathers(12, "always") == 2 * 13 else "?"}, "stage 3 'always' gathers every unit twice"),
]

# the same figures matched by a finder rather than one pattern
def check_gather_formulas(m):
    want, got = {}, {}
    for policy in ("default", "always", "never"):
        for L in (2, 12):
            n = gathers(L, policy)
            if formula(m.group(policy), L) != n:
                return "`-zr %s`: the doc's %s gives %d at L = %d, zero_plan_print walks %d all-gathers" % (
                    policy, m.group(policy).strip(), formula(m.group(policy), L), L, n)
    return None


def check_products(m):
    for k in ("fwd", "dkdv", "dq"):
        listed = len([p for p in m.group(k).split(",") if p.strip()])
        want = products({"fwd": "forward", "dkdv": "dkdv", "dq": "dq"}[k])
        if listed != want:
            return "%s: the doc lists %d products (%s), the PTX's mma.sync count says %d" % (k, listed, m.group(k).strip(), want)
    return None


def check_figure(i, doc, pattern, gen, what, covered):
    where = doc
    hits = list(re.finditer(pattern, text(doc)))
    if not hits:
        return "FAIL", "%s: not found: /%s/ (%s): the sentence was rewritten? fix the doc or its entry in doc_figures.py" % (
            doc, pattern[:70], what)
    fails = []
    for m in hits:
        line = text(doc)[:m.start()].count("\n") + 1
        for name in m.re.groupindex:
            if m.group(name) is not None:
                covered.setdefault(doc, []).append((m.start(name), m.end(name)))
        want = gen(m) if gen.__code__.co_argcount else gen()
        if want is None or isinstance(want, str):  # a check of its own: None or why it failed
            if want:
                fails.append("%s:%d: %s" % (doc, line, want))
            continue
        for name, value in want.items():
            if m.group(name) is not None and m.group(name) != value:
                fails.append("%s:%d: %s: the doc says %s, the tree gives %s" % (doc, line, what, m.group(name), value))
    return ("FAIL", "\n         ".join(fails)) if fails else ("ok", "%s:%d %s" % (doc, text(doc)[:hits[0].start()].count("\n") + 1, what))


# ---- hand-copied tables -------------------------------------------------------------------------

def table_lines(doc, first_cell_re):
    out = []
    for k, line in enumerate(text(doc).splitlines(), 1):
        if line.startswith("|") and re.match(first_cell_re, line):
            out.append((k, [c.strip() for c in line.strip().strip("|").split("|")]))
    return out


def check_floor_table(covered):
    rows, total = floors()
    fails, seen = [], 0
    lines = table_lines("dev/cuda/NOTES.md", r"^\| (\*\*per micro-step\*\*|[a-z_]+[ (|])")
    for k, c in lines:
        if len(c) != 4 or not re.fullmatch(r"[\d.]+", c[2]):
            continue
        seen += 1
        key = c[0].strip("*").split()[0]
        if key == "per":
            mbt, n = total, None
        elif key == "global":
            mbt, n = rows["global"][1], rows["global"][0]
        elif key in rows:
            n, mbt = rows[key]
        else:
            fails.append("NOTES.md:%d: no kernel '%s' in memory_floors.py's table" % (k, c[0]))
            continue
        want = ["" if n is None else str(n), "%.1f" % mbt, "%.3f" % (mbt / 3350.0)]
        got = [c[1], c[2], c[3].strip("*")]
        if got != want:
            fails.append("NOTES.md:%d %s: the doc has %s, memory_floors.py gives %s" % (k, c[0], " | ".join(got), " | ".join(want)))
        start = sum(len(x) + 1 for x in text("dev/cuda/NOTES.md").split("\n")[:k - 1])
        covered.setdefault("dev/cuda/NOTES.md", []).append((start, start + len(text("dev/cuda/NOTES.md").split("\n")[k - 1])))
    if seen < 5:
        fails.append("NOTES.md: the memory-floor table (| kernel | launches | MB total | floor ms |) not found")
    return fails


def check_attention_table(covered):
    rows, totals = attention_predict()
    fails, seen = [], 0
    for k, c in table_lines("dev/cuda/NOTES.md", r"^\| (forward|backward dK/dV|backward dQ|all three) \| \d+\.\d+ \|"):
        seen += 1
        if c[0] == "all three":
            want = ["%.3f" % sum(float(r[0]) for r in rows.values()), "", "**%s**" % totals["H100"], "", "**%s**" % totals["A100"]]
        else:
            tf, dev = rows[c[0]]
            want = [tf, " / ".join(dev["H100"][:3]), dev["H100"][3], " / ".join(dev["A100"][:3]), dev["A100"][3]]
        if c[1:] != want:
            fails.append("NOTES.md:%d %s: the doc has %s, attention_predict.py gives %s" % (k, c[0], " | ".join(c[1:]), " | ".join(want)))
    if seen != 4:
        fails.append("NOTES.md: the attention prediction table (forward, backward dK/dV, backward dQ, all three) not found")
    return fails


def check_ptx_table(covered):
    nvcc = nvcc_path()
    if not nvcc:
        raise Skip("nvcc not found: NOTES.md's ptxas table is not regenerated here")
    start_attention_ptx(nvcc)
    rc, out, err = finished("attention_ptx", timeout=1200)
    if rc != 0:
        raise RuntimeError("dev/test/test_attention_ptx.sh --table: exit %d: %s" % (rc, (err or out).strip()[-400:]))
    fresh = {}
    for line in out.splitlines():
        m = re.match(r"^\| (forward|dkdv|dq) \| (\d+) \| (sm_\d+) \|(.*)\|$", line)
        if m:
            fresh[(m.group(1), int(m.group(2)), m.group(3))] = [c.strip() for c in m.group(4).split("|")]
    doc = notes_ptx_table()
    fails = ["NOTES.md ptxas table %s hs %d %s: the doc has %s, ptxas gives %s" % (key[0], key[1], key[2], " | ".join(doc.get(key, ["(no row)"])),
                                                                                 " | ".join(fresh.get(key, ["(no row)"])))
             for key in sorted(set(doc) | set(fresh)) if doc.get(key) != fresh.get(key)]
    return fails


TABLES = [("NOTES.md's memory-floor table = dev/bench/memory_floors.py", check_floor_table),
          ("NOTES.md's attention prediction = dev/bench/attention_predict.py", check_attention_table),
          ("NOTES.md's ptxas table = test_attention_ptx.sh --table (ptxas, sm_80 and sm_90)", check_ptx_table)]


# ---- the scan for figures nothing checks --------------------------------------------------------
KINDS = re.compile(r"\b\d[\d.,]*(?:[-–]\d[\d.]*)?\s?(?:registers|programs|products|channels|FLOPs|TFLOP\b)"
                   r"|\b\d[\d.]*\s?[×x](?= (?:the|as|its|more|less|fewer|faster|slower)\b)")


def paragraphs(t):
    """(start, end) of each paragraph: runs of lines between blank lines or fences; fenced blocks and table rows left out."""
    spans, pos, start, fence = [], 0, None, False
    for line in t.split("\n"):
        end = pos + len(line)
        if line.startswith("```"):
            fence = not fence
            if start is not None:
                spans.append((start, pos))
                start = None
        elif fence or not line.strip() or line.startswith("|"):
            if start is not None:
                spans.append((start, pos))
                start = None
        elif start is None:
            start = pos
        pos = end + 1
    if start is not None:
        spans.append((start, pos))
    return spans


# figures with units (MB, ms, %, s, ...): in the docs of UNITS_STRICT each must be checked or
# measured once; in the others (the performance model's predictions and the kernels' notes, which
# other work rewrites) they are listed with --list-unchecked, not yet a failure
UNITS_STRICT = [d for d in DOCS if d not in ("dev/cuda/NOTES.md", "dev/bench/README.md", "dev/scripts/README.md")]
UNITS = re.compile(r"\b\d[\d.,]*\s?(?:MB|GB|ms|%|min(?:utes)?\b|s\b(?!\+)|TB/s|tok/s|tokens/s)|\b\d[\d.,]{2,}\s?bytes")  # (an element's 2, 4, 8 bytes are definitions)
MEASURED_ONCE = re.compile(r"measured once[^.]*?\b20\d\d-\d\d-\d\d", re.S)


# a doc-level marker for the durations of its tests or runs (s, min), each measured once:
#   <!-- durations measured once, DATE..DATE, by COMMAND ... -->
DURATIONS = re.compile(r"<!-- durations measured once, 20\d\d-\d\d-\d\d[^>]*-->")
TIME_UNIT = re.compile(r"\s?(?:s|min|minutes)$")


def scan(covered, listing=None):
    fails, count = [], 0
    for doc in DOCS:
        t = text(doc)
        durations = DURATIONS.search(t) is not None
        for a, b in paragraphs(t):
            para = t[a:b]
            kinds = list(KINDS.finditer(para))
            units = [m for m in UNITS.finditer(para) if not any(k.start() <= m.start() < k.end() for k in kinds)]
            for m in kinds + (units if doc in UNITS_STRICT or listing is not None else []):
                if m in units and durations and TIME_UNIT.search(m.group(0)):
                    continue
                if listing is not None and doc not in UNITS_STRICT and m in units:
                    s = a + m.start()
                    if not any(x <= s < y for x, y in covered.get(doc, [])) and not MEASURED_ONCE.search(para):
                        listing.append("%s:%d: %s" % (doc, t[:s].count("\n") + 1, m.group(0)))
                    continue
                s, e = a + m.start(), a + m.end()
                count += 1
                num = re.match(r"[\d.,–-]+", m.group(0)).group(0)
                if any(x <= s + k < y for x, y in covered.get(doc, []) for k in range(len(num))):
                    continue
                if MEASURED_ONCE.search(para):
                    continue
                fails.append("%s:%d: '%s' is a figure nothing checks: add an entry to FIGURES in dev/test/doc_figures.py, "
                             "or say 'measured once (DATE, `COMMAND`)'" % (doc, t[:s].count("\n") + 1, m.group(0)))
    return fails, count


# ---- the first hour, as root --------------------------------------------------------------------

def tracked():
    return run(["git", "ls-files", "-s"]).splitlines()


def check_run_bits():
    fails = []
    for line in tracked():
        mode, _, _, path = line.split(None, 3)
        if mode == "100644" and path.endswith((".sh", ".py", ".js")) and os.path.exists(os.path.join(ROOT, path)):
            with open(os.path.join(ROOT, path), "rb") as f:
                if f.read(2) == b"#!":
                    fails.append("%s has a #! line but no run bit: git update-index --chmod=+x %s" % (path, path))
    return fails


def check_root_variables():
    fails = []
    n = len(re.findall(r"OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", text("README.md")))
    if n != 1:
        fails.append("README.md says 'OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1' %d times, expected once" % n)
    if not re.search(r"^export OMPI_ALLOW_RUN_AS_ROOT\b.*\n?export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM\b|^export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM",
                     text("Makefile"), re.M):
        fails.append("the Makefile does not export OMPI_ALLOW_RUN_AS_ROOT and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM for its mpirun targets")
    for line in tracked():
        path = line.split(None, 3)[3]
        if not path.endswith((".sh", ".py")) or path.startswith("dev/test/") or not os.path.exists(os.path.join(ROOT, path)):
            continue
        src = open(os.path.join(ROOT, path), encoding="utf-8", errors="replace").read()
        code = "\n".join(x for x in src.splitlines() if not x.lstrip().startswith("#"))
        if re.search(r"""(^|[\s"'(\[])mpirun["']?(,\s*["']|\s+)-(?!-version)""", code) and "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM" not in src:
            fails.append("%s runs mpirun without setting OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM)=1 (mpirun refuses root)" % path)
    return fails


@functools.lru_cache(maxsize=None)
def makefile_rules():
    """{target: prerequisites} of the Makefile, its simple variables expanded."""
    src = re.sub(r"\\\n", " ", text("Makefile"))
    var = {}
    for m in re.finditer(r"^([A-Z_0-9]+)\s*[:?]?=\s*(.*)$", src, re.M):
        var.setdefault(m.group(1), m.group(2))

    def expand(s, depth=0):
        if depth > 5:
            return s
        return re.sub(r"\$\(([A-Z_0-9]+)\)", lambda m: expand(var.get(m.group(1), ""), depth + 1), s)
    rules = {}
    for m in re.finditer(r"^([^\s#:=][^:=]*?)\s*&?:(?!=)\s*(.*)$", src, re.M):
        targets = expand(m.group(1)).split()
        for t in targets:  # a rule with several targets makes them all (grouped '&:' rules)
            rules.setdefault(t, []).extend(expand(m.group(2)).split("|")[0].split() + [x for x in targets if x != t])
    return rules


def made_by(target, seen=None):
    """TARGET and everything making it makes: its prerequisites, and its rule's other targets."""
    seen = set() if seen is None else seen
    if target in seen:
        return seen
    seen.add(target)
    for p in makefile_rules().get(target, []):
        made_by(p, seen)
    return seen


def readme_commands():
    """(line, command) of each command in README.md's bash blocks, in order."""
    out, lines, k, fence = [], text("README.md").split("\n"), 0, None
    for k, line in enumerate(lines, 1):
        if line.startswith("```"):
            fence = line[3:].strip() if fence is None else None
            continue
        if fence == "bash" and line.strip() and not line.lstrip().startswith("#"):
            out.append((k, line.split("  #")[0].strip()))
    return out


def check_files_made_first():
    fails, made = [], set()
    tracked_paths = {x.split(None, 3)[3] for x in tracked()}
    for k, cmd in readme_commands():
        for m in re.finditer(r"\bmake\s+([^&|;#]*)", cmd):
            for t in m.group(1).split():
                if not t.startswith("-") and "=" not in t:
                    made |= made_by(t)
        if re.search(r"(^|&&\s*)make(\s*$|\s*&&)", cmd):
            made |= made_by("all")
        made |= set(re.findall(r"(?:--out|--bf16-out|-o)\s+([\w./-]+\.bin)\b", cmd))  # files a command writes
        for f in re.findall(r"(?<![\w/.-])([\w./-]+\.bin)\b", cmd):
            if f in tracked_paths or f in made or "*" in f or f.startswith(("$", "/")):
                continue
            if "train_gpt2.py" in cmd and ("gpt2_124M" in f or "gpt2_tiny" in f):
                continue
            fails.append("README.md:%d uses %s before any README command makes it (make ... %s)" % (k, f, f))
    return fails


def check_quickstart_as_root():
    """README's multi-rank example, as root, with the README's own export line and nothing else of ours."""
    if os.geteuid() != 0:
        raise Skip("not root: the root run is not tried")
    if not shutil.which("mpirun"):
        raise Skip("mpirun not found (dev/install_deps.sh installs OpenMPI): README's multi-rank example not run")
    exports = [c for _, c in readme_commands() if c.startswith("export OMPI_ALLOW_RUN_AS_ROOT")]
    example = [c for _, c in readme_commands() if "mpirun" in c and "gpt2_tiny.bin" in c]
    if not exports or not example:
        return ["README.md: no 'export OMPI_ALLOW_RUN_AS_ROOT...' line or no mpirun example with gpt2_tiny.bin"]
    for f in ("train_gpt2", "gpt2_tiny.bin", "dev/data/tinyshakespeare/tiny_shakespeare_val.bin"):
        if not os.path.exists(os.path.join(ROOT, f)):
            raise Skip("%s missing: make train_gpt2 gpt2_tiny.bin data" % f)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/root")}
    p = subprocess.run(["bash", "-c", exports[0] + " && " + example[0]], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        return ["README's '%s' as root: exit %d: %s" % (example[0], p.returncode, (p.stdout + p.stderr).strip()[-500:])]
    return []


def check_reading_order():
    """Every file that issues a collective (the comm_* calls, outside dev/) is named in DESIGN.md's reading order."""
    order = "\n".join(x for x in text("DESIGN.md").splitlines() if re.match(r"^\| \d+ \| ", x))
    if not order:
        return ["DESIGN.md: no reading-order table (| 1 | README.md | ...)"]
    out = run(["git", "grep", "-l", "-E", r"\bcomm_\w*(reduce|gather)\w*\(", "--", "*.c", "*.h", "*.cu", "*.cuh"])
    files = [f for f in out.split() if not f.startswith("dev/")]
    return ["DESIGN.md's reading order does not name %s, which issues collectives" % f for f in files if "`%s`" % f not in order] + \
        ([] if "reading order" in text("README.md") else ["README.md does not point to DESIGN.md's reading order"])


def check_links():
    """Every relative link of the docs (README.md's moved text included) names a file that exists."""
    fails = []
    for doc in DOCS:
        for m in re.finditer(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text(doc)):
            target = m.group(1)
            if not re.match(r"[a-z]+:", target) and not os.path.exists(os.path.join(ROOT, os.path.dirname(doc), target)):
                fails.append("%s:%d links to %s, which does not exist" % (doc, text(doc)[:m.start()].count("\n") + 1, target))
    return fails


FIRST_HOUR = [("every relative link in the docs resolves", check_links),
              ("DESIGN.md's reading order reaches every file that issues a collective", check_reading_order),
              ("every script with a #! line has its run bit", check_run_bits),
              ("OpenMPI's root variables: said once in README, set where the project runs mpirun", check_root_variables),
              ("every file README's commands use is made by an earlier README command", check_files_made_first),
              ("README's multi-rank example runs as root with the README's settings", check_quickstart_as_root)]


def run_all(only=None, quiet=False, slow=True):
    """Every check; prints one line each unless QUIET. Returns (passed, failed)."""
    passed = failed = 0
    covered = {}

    def report(status, msg):
        nonlocal passed, failed
        if not quiet:
            print("%-4s %s" % (status, msg))
        passed += status == "ok"
        failed += status == "FAIL"

    for i, (doc, pattern, gen, what) in enumerate(FIGURES):
        if what is None or (only and only not in doc + what):
            continue
        try:
            report(*check_figure(i, doc, pattern, gen, what, covered))
        except Skip as e:
            report("skip", str(e))
        except Exception as e:  # a tool that failed: one line
            report("FAIL", "%s: %s: %s" % (doc, what, e))
    for what, fn in TABLES + FIRST_HOUR:
        if (only and only not in what) or (not slow and fn in (check_ptx_table, check_quickstart_as_root)):
            continue
        try:
            fails = fn(covered) if (what, fn) in TABLES else fn()
            report("FAIL" if fails else "ok", what + ("\n         " + "\n         ".join(fails) if fails else ""))
        except Skip as e:
            report("skip", "%s: %s" % (what, e))
        except Exception as e:
            report("FAIL", "%s: %s" % (what, e))
    if not only:
        listing = [] if "--list-unchecked" in sys.argv else None
        fails, count = scan(covered, listing)
        for x in listing or []:
            print("unchecked (not yet an error, see UNITS_STRICT): " + x)
        report("FAIL" if fails else "ok", "every figure of the scanned kinds in %s is checked or measured once (%d found)%s" % (
            ", ".join(DOCS), count, "\n         " + "\n         ".join(fails) if fails else ""))
    return passed, failed


# The figures issue 31 found false, as the docs had them, put back into today's docs: the checks
# must fail on each. (doc, a regular expression finding today's text, the old text replacing it):
# today's figures are matched loosely (\\d+), so a figure that moves with the code needs no change here.
OLD_FIGURES = [
    ("1 stage 3 gathers each unit again before its backward", "README.md", r"`-zr default` 2L \+ \d", "`-zr default` 2L + 2"),
    ("2 -e dN is 64*N channels", "README.md", r"d24, d36, d48 have C = \d+, \d+, \d+", "d24, d36, d48 have C = 1536, 2304, 3072"),
    ("3 test_zero_plan checks N = 1 ... 512", "dev/test/README.md", r"for N ∈ \{[\d, ]+\} \(and [\d, ]+ for the micro config\)", "for N = 1 … 512"),
    ("4 Open MPI grew the buffer 2x", "dev/test/README.md", r"grew rank 0's by [\d.]+× the whole buffer", "grew rank 0's by 2× the whole buffer"),
    ("5 the catalogue has 26 programs", "dev/test/README.md", r"\d+ CUDA programs \(\d+ broken, \d+ correct, \d+ other\)", "26 broken or correct CUDA programs"),
    ("6 the dK/dV kernel does 3 products", "dev/cuda/NOTES.md", r"k·qᵀ, (dout·vᵀ, Pᵀ·dout, dSᵀ·q \(dK/dV kernel\))", r"\1"),
    ("7 dQ at hs 64 uses 121-123 registers (NOTES.md)", "dev/cuda/NOTES.md", r"dQ [\d-]+, (\d+) blocks", r"dQ 121-123, \1 blocks"),
    ("7 dQ at hs 64 uses 123 registers (attention.cuh)", "llmc/attention.cuh", r"16 keys at a time:\s+\d+ \(sm_80\) / \d+ \(sm_90\) registers", "16 keys at a time: 123"),
    ("8 AdamW moves 3236.4 MB", "dev/cuda/NOTES.md", r"\| adamw \(per step\) \| (\d+) \| [\d.]+ \| [\d.]+ \|", r"| adamw (per step) | \1 | 3236.4 | 0.966 |"),
    ("DESIGN.md's reading order without llmc/nccl_comm.cuh", "DESIGN.md", r"(\| \d+ \| `train_gpt2.cu`), `llmc/nccl_comm.cuh`", r"\1"),
    ("README.md without OpenMPI's root variables", "README.md", r"export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1\n", ""),
]


def mutants():
    """Each old figure put back, and each checked figure's last digit changed: every one must fail."""
    passed = failed = 0
    cases = [(what, doc, new, old) for what, doc, new, old in OLD_FIGURES]
    for doc, pattern, gen, what in FIGURES:
        for m in list(re.finditer(pattern, _read(doc)))[:1]:
            names = [n for n in m.re.groupindex if m.group(n) is not None and re.search(r"\d", m.group(n))]
            if not names:  # a figure without digits (a list of products): OLD_FIGURES mutates it
                continue
            name = names[0]
            fig = m.group(name)
            k = max(i for i, ch in enumerate(fig) if ch.isdigit())
            bad = fig[:k] + str((int(fig[k]) + 1) % 10) + fig[k + 1:]
            ctx = _read(doc)[m.start():m.end()]
            short = lambda x: " ".join(x.split()) if len(x) < 60 else " ".join(x.split())[-57:] + "..."
            cases.append(("mutated: %s '%s' -> '%s' (%s)" % (doc, short(fig), short(bad), what), doc, re.escape(ctx),
                          (ctx[:m.start(name) - m.start()] + bad + ctx[m.end(name) - m.start():]).replace("\\", "\\\\")))
    for what, doc, new, old in cases:
        if not re.search(new, _read(doc)):
            print("FAIL mutant '%s': today's text /%s/ not in %s (update OLD_FIGURES)" % (what, new, doc))
            failed += 1
            continue
        OVERRIDE.clear()
        OVERRIDE[doc] = re.sub(new, old, _read(doc), count=1)
        _, f = run_all(quiet=True, slow=False)
        OVERRIDE.clear()
        print("%-4s mutant caught: %s" % ("ok" if f else "FAIL", what))
        passed += f > 0
        failed += f == 0
    return passed, failed


def main():
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    if only is None and "--list-unchecked" not in sys.argv and nvcc_path():  # both will be needed: side by side
        start_ptx16(nvcc_path())
        start_attention_ptx(nvcc_path())
    passed, failed = run_all(only)
    if "--mutants" in sys.argv:
        p, f = mutants()
        passed, failed = passed + p, failed + f
    print("doc figures: %d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
