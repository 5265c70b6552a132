"""
What one training step of a source tree launches, taken from the code itself, never typed in:

1. The launch sequence. The tree's own train_gpt2.cu is built for the CPU emulator (dev/cuda/emu's
   nvcc-cpu) and run for one and for two steps of a fresh GPT-2 124M ('-e d12': the real L, C, NH,
   V) at a small batch, with EMU_TRACE=1, which prints every op as it runs: "kernel NAME",
   "cublasLtMatmul MxNxK bf16 TN bias", "cudaMemcpyAsync of N bytes", "cudaMemsetAsync". Both runs do
   the same start-up and first step, and the same ending; the second run holds one more step, so
   that step's ops are exactly what the two traces do not share (x2 = x1[:p] + step + x1[p:]).
   Kernel launches and their order do not depend on B and T, and each cuBLASLt product's m, n, k is
   read from the trace; the model (perf_model.py) rescales the one dimension that is B*T, which is
   unambiguous because the traced B*T (64) is none of the model's other dimensions (checked).
2. Registers, shared memory per block and spills: the tree's train_gpt2.cu compiled by the real
   nvcc for sm_80 and sm_90 with -Xptxas -v, per kernel instance (templates demangled by c++filt).
3. Per-launch counters from the emulator's load/store hook (EMU_COUNTERS=FILE, branch emu-check),
   when the tree's emulator has it: read by read_counters() in the format documented in
   dev/perf/README.md, and used by the model where present.

Which attention kernels (ATTENTION): "mma" (default) traces the trainer as it runs by default
(`-ak 0`: the mma.sync kernels of llmc/attention.cuh) and runs attention_slice.cu with `-ak 0`;
"sm90" traces it with `-ak 1` and the slice with `-ak 1` (the sm_90a wgmma/TMA kernels of
llmc/attention_sm90.cuh, which the trainer runs only when asked for). Both runs refuse where the
kernels cannot run; counts_for() checks that the step and the slice launched the same attention
kernels (a slice that ran other kernels than the step would price the step's from the wrong code).

The results are cached in dev/perf/cache/ under a key made of the tree's sources, so `make profile`
runs the emulator once per version of the code. Nothing here times anything: the emulator's times
say nothing about a GPU (dev/cuda/emu/README.md).
"""
import concurrent.futures
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
CACHE = os.path.join(HERE, "cache")
CACHE_VERSION = 5  # bump when what is stored changes

# The traced shape: one sequence of 64 tokens. 64 is none of GPT-2 124M's other GEMM dimensions
# (C = 768, 3C, 4C, Vp = 50304), so the dimension equal to B*T is found by value.
TRACE_B, TRACE_T = 1, 64
MODEL = "d12"  # a fresh GPT-2 124M (llmc/gpt2_layout.h config_for_depth): L 12, C 768, NH 12, V 50257, Vp 50304


def fail(msg):
    sys.stderr.write("dev/perf: %s\n" % msg)
    sys.exit(1)


def run(cmd, cwd=None, env=None, what=""):
    p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        fail("%s failed (exit %d): %s\n%s" % (what or cmd[0], p.returncode, " ".join(cmd), (p.stdout + p.stderr)[-3000:]))
    return p


# ----------------------------------------------------------------------------
# which tree: the working tree, or a commit checked out with `git archive` into a temporary directory

SOURCES = ["train_gpt2.cu", "train_gpt2.c", "llmc", "dev/cuda/emu", "dev/test/cpu_reference.h"]


ATTENTION = {"mma": 0, "sm90": 1}  # perf_model.py --attention: the trainer's -ak it stands for


def arch_flags(attention):
    """nvcc-cpu's architecture for an emulated build: the sm_90a kernels exist only in a build that
    names sm_90a (nvcc-cpu then defines __CUDA_ARCH_FEAT_SM90_ALL, as `make` builds the trainer for
    80 90a); the default trainer's build stays as it was (its trace is the same either way)."""
    return ["-gencode", "arch=compute_90a,code=sm_90a"] if attention == "sm90" else []


def tree_key(root, recompute, model=MODEL, attention="mma"):
    """A hash of every source file that decides what a step launches, and of how it was traced
    (the default trainer's key is what it was before --attention existed: its trace is the same)."""
    h = hashlib.sha256()
    h.update(("v%d B%d T%d r%d %s" % (CACHE_VERSION, TRACE_B, TRACE_T, recompute, model)).encode())
    if attention != "mma":
        h.update((" -ak %d" % ATTENTION[attention]).encode())
    for s in SOURCES:
        path = os.path.join(root, s)
        files = [path] if os.path.isfile(path) else sorted(
            os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs if not f.endswith((".o", ".pyc")))
        for f in files:
            if "/build/" in f:
                continue
            h.update(os.path.relpath(f, root).encode())
            with open(f, "rb") as fp:
                h.update(fp.read())
    return h.hexdigest()[:16]


def checkout(commit, dest):
    """The files of `commit` (any git revision) in dest, without touching the working tree."""
    rev = run(["git", "rev-parse", "--verify", commit + "^{commit}"], cwd=REPO, what="git rev-parse").stdout.strip()
    os.makedirs(dest, exist_ok=True)
    archive = subprocess.Popen(["git", "archive", rev], cwd=REPO, stdout=subprocess.PIPE)
    tar = subprocess.run(["tar", "-x", "-C", dest], stdin=archive.stdout)
    archive.wait()
    if archive.returncode != 0 or tar.returncode != 0:
        fail("git archive %s | tar failed" % commit)
    return rev


# ----------------------------------------------------------------------------
# 1. the launch sequence of one step, from the emulator's trace

TRACE_LINE = re.compile(r"^cuda-emu trace: op \d+ (.*) \(stream (0x[0-9a-f]+|\(nil\))\): [0-9.]+ ms$")
# the epilogue after the shape (dev/cuda/emu/cublaslt.cpp's describe): " bias", then " gelu" (GELU_AUX*:
# the aux written) or " dgelu" (DGELU: the aux read), then " aux" when there is an aux matrix or
# " bgradb" (BGRADB: op(B)'s column sums written through the bias pointer)
GEMM = re.compile(r"^cublasLtMatmul (\d+)x(\d+)x(\d+) (\w+) ([NT])([NT])( bias)?( gelu| dgelu)?( aux| bgradb)?$")
MEMCPY = re.compile(r"^cudaMemcpyAsync of (\d+) bytes$")


def build_emulated(root, out, attention="mma"):
    """The tree's train_gpt2.cu through its own nvcc-cpu (bf16, one process: the collectives of
    N = 1 are no-ops either way, and no NCCL or MPI is needed)."""
    cmd = [os.path.join(root, "dev/cuda/emu/nvcc-cpu"), "-O2", "-std=c++17", "-I.", "-DENABLE_BF16", "-DNO_MULTI_GPU"] + \
        arch_flags(attention) + ["train_gpt2.cu", "-o", out, "-lcublasLt", "-lcudart"]
    # EMU_HOOKS=1: the access hooks EMU_COUNTERS needs (nvcc-cpu --emu-check; an older nvcc-cpu ignores it)
    run(cmd, cwd=root, env=dict(os.environ, EMU_HOOKS="1"), what="building the emulated trainer of %s" % root)


def trace_ops(binary, steps, recompute, counters_file=None, model=MODEL, attention="mma"):
    """The ops the compute stream ran, in order, for a run of `steps` steps. One emulator thread by
    default (EMU_THREADS=1): with 2, main's emulator (8a1189f) hangs in the tensor-core attention
    kernels of branch attn (b654100), every thread waiting on a futex."""
    data = os.path.join(REPO, "dev/data/tinyshakespeare")
    for f in ("tiny_shakespeare_train.bin", "tiny_shakespeare_val.bin"):
        if not os.path.exists(os.path.join(data, f)):
            fail("missing %s/%s: run make data first" % (data, f))
    env = dict(os.environ, EMU_TRACE="1", EMU_THREADS=os.environ.get("EMU_THREADS", "1"))
    if counters_file:
        env["EMU_COUNTERS"] = counters_file
    cmd = ["nice", binary, "-e", model, "-b", str(TRACE_B), "-t", str(TRACE_T), "-x", str(steps), "-v", "0", "-s", "0",
           "-r", str(recompute), "-i", os.path.join(data, "tiny_shakespeare_train.bin"),
           "-j", os.path.join(data, "tiny_shakespeare_val.bin")]
    if attention != "mma":  # the default trainer gets no -ak (a tree older than the flag has none)
        cmd += ["-ak", str(ATTENTION[attention])]
    with tempfile.TemporaryDirectory() as cwd:  # the trainer looks for gpt2_tokenizer.bin here: absent is fine
        p = run(cmd, cwd=cwd, env=env, what="the emulated trainer")
    ops = []
    for line in p.stderr.splitlines():
        m = TRACE_LINE.match(line)
        if m:
            ops.append((m.group(2), m.group(1)))
    # the compute stream is the one that ran the most kernels
    per_stream = {}
    for s, what in ops:
        if what.startswith("kernel ") or what.startswith("cublasLtMatmul"):
            per_stream[s] = per_stream.get(s, 0) + 1
    if not per_stream:
        fail("no kernels in the trace of %s (EMU_TRACE output changed?)" % binary)
    compute = max(per_stream, key=per_stream.get)
    return [what for s, what in ops if s == compute]


def one_step(x1, x2):
    """The ops of the second step: x2 = x1[:p] + step + x1[p:] for the p where both agree."""
    n = len(x2) - len(x1)
    if n <= 0:
        fail("the two-step trace is not longer than the one-step trace")
    for p in range(len(x1), -1, -1):
        if x2[:p] == x1[:p] and x2[p + n:] == x1[p:]:
            return x2[p:p + n]
    fail("the one- and two-step traces do not differ by one step's ops")


def parse_op(what):
    """One trace entry as a dict: kernel, gemm, memcpy, memset, or other (events: no work)."""
    # a launch replayed from a CUDA graph (issue 30 item 2, helper graph): the emulator marks it
    # " [graph]"; perf_model.py then charges devices.json's graph_gap_us, not launch_gap_us
    graph = what.endswith(" [graph]")
    if graph:
        op = parse_op(what[:-len(" [graph]")])
        op["graph"] = True
        return op
    if what.startswith("kernel "):
        name = what[len("kernel "):]
        base = name.split("<")[0]
        return {"op": "kernel", "name": base, "template": name[len(base):]}
    m = GEMM.match(what)
    if m:
        return {"op": "gemm", "m": int(m.group(1)), "n": int(m.group(2)), "k": int(m.group(3)), "type": m.group(4),
                "ta": m.group(5) == "T", "tb": m.group(6) == "T", "bias": bool(m.group(7)),
                "gelu": (m.group(8) or "").strip(), "aux": m.group(9) == " aux", "bgradb": m.group(9) == " bgradb"}
    m = MEMCPY.match(what)
    if m:
        return {"op": "memcpy", "bytes": int(m.group(1))}
    if what == "cudaMemsetAsync":
        return {"op": "memset"}
    return {"op": "other", "what": what}


# ----------------------------------------------------------------------------
# 2. registers, shared memory and spills from ptxas -v of the real nvcc build

PTXAS_ENTRY = re.compile(r"Compiling entry function '(\w+)' for '(sm_\d+a?)'")
PTXAS_SPILL = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
PTXAS_USED = re.compile(r"Used (\d+) registers(?:, used \d+ barriers)?(?:, (\d+) bytes smem)?")


def find_nvcc():
    for p in [shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"]:
        if p and os.path.exists(p):
            return p
    return None


PTX_ENTRY = re.compile(r"^\.visible \.entry (\w+)\(", re.M)
PTX_LABEL = re.compile(r"^(\$L__\w+):")
PTX_BRANCH = re.compile(r"\bbra(?:\.uni)?\s+(\$L__\w+);")
PTX_LOAD = re.compile(r"\bld\.global(?:\.nc)?(?:\.(v2|v4))?\.[a-z]*(8|16|32|64)\b")


def ptx_load_bytes(entry):
    """Bytes one thread asks of global memory per iteration of the kernel's busiest innermost
    loop, as the PTX has it after nvcc's unrolling (the loads of one iteration are independent of
    each other, so they are in flight together); a kernel without a loop: all its loads. This is
    what the memory model puts in flight per resident thread (Little's law)."""
    lines = [l.strip() for l in entry.splitlines()]
    labels = {}
    for i, l in enumerate(lines):
        m = PTX_LABEL.match(l)
        if m:
            labels[m.group(1)] = i
    loops = []
    for j, l in enumerate(lines):
        m = PTX_BRANCH.search(l)
        if m and m.group(1) in labels and labels[m.group(1)] < j:
            loops.append((labels[m.group(1)], j))
    innermost = [a for a in loops if not any(b != a and a[0] <= b[0] and b[1] <= a[1] for b in loops)]

    def load_bytes(lo, hi):
        total = 0
        for l in lines[lo:hi + 1]:
            m = PTX_LOAD.search(l)
            if m:
                total += int(m.group(2)) // 8 * {None: 1, "v2": 2, "v4": 4}[m.group(1)]
        return total
    if innermost:
        best = max(load_bytes(a, b) for a, b in innermost)
        if best > 0:
            return best
    return load_bytes(0, len(lines) - 1)


def ptx_loads(ptx_text):
    """{mangled entry name: bytes per thread in flight} for one PTX file."""
    starts = [(m.start(), m.group(1)) for m in PTX_ENTRY.finditer(ptx_text)]
    out = {}
    for k, (pos, name) in enumerate(starts):
        end = starts[k + 1][0] if k + 1 < len(starts) else len(ptx_text)
        out[name] = ptx_load_bytes(ptx_text[pos:end])
    return out


def ptxas_resources(root):
    """{arch: {kernel base name: [{template, regs, smem, spill_stores, spill_loads, stack,
    load_bytes}]}} for the bf16 trainer, compiled as the Makefile compiles it (-O3, sm_80 and
    sm_90), and for sm_90a (the wgmma/TMA kernels exist only there: perf_model.wgmma_resources); load_bytes from the PTX nvcc keeps on the way (ptx_load_bytes)."""
    nvcc = find_nvcc()
    if nvcc is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        p = run([nvcc, "-O3", "-std=c++17", "-I.", "-gencode", "arch=compute_80,code=sm_80", "-gencode",
                 "arch=compute_90,code=sm_90", "-gencode", "arch=compute_90a,code=sm_90a", "-DENABLE_BF16", "-DNO_MULTI_GPU", "-Xptxas", "-v", "-keep",
                 "-keep-dir", tmp, "-c", "train_gpt2.cu", "-o", os.path.join(tmp, "t.o")], cwd=root, what="nvcc -Xptxas -v")
        loads = {}
        for f in os.listdir(tmp):
            m = re.search(r"compute_(\d+a?)\.ptx$", f)
            if m:
                with open(os.path.join(tmp, f)) as fp:
                    loads["sm_" + m.group(1)] = ptx_loads(fp.read())
    entries, current = [], None
    for line in p.stderr.splitlines():
        m = PTXAS_ENTRY.search(line)
        if m:
            current = {"mangled": m.group(1), "arch": m.group(2), "regs": 0, "smem": 0, "stack": 0, "spill_stores": 0,
                       "spill_loads": 0}
            entries.append(current)
            continue
        if current is None:
            continue
        m = PTXAS_SPILL.search(line)
        if m:
            current["stack"], current["spill_stores"], current["spill_loads"] = map(int, m.groups())
        m = PTXAS_USED.search(line)
        if m:
            current["regs"] = int(m.group(1))
            current["smem"] = int(m.group(2) or 0)
    demangled = subprocess.run(["c++filt"], input="\n".join(e["mangled"] for e in entries), stdout=subprocess.PIPE,
                               text=True).stdout.splitlines()
    out = {}
    for e, d in zip(entries, demangled):
        e["load_bytes"] = loads.get(e["arch"], {}).get(e["mangled"])
        # "void attention_forward_kernel<64>(__nv_bfloat16*, ...)" -> base and template arguments
        sig = d[len("void "):] if d.startswith("void ") else d
        name = sig.split("(")[0]
        base = name.split("<")[0]
        e["template"] = name[len(base):]
        e["signature"] = d
        out.setdefault(e["arch"], {}).setdefault(base, []).append(e)
    return out


# ----------------------------------------------------------------------------
# 3. the emulator's per-launch counters (EMU_COUNTERS), when the tree's emulator has them

def emulator_has_counters(root):
    for f in ("runtime.cpp", "kernel.cpp", "emu_device.h", "README.md"):
        path = os.path.join(root, "dev/cuda/emu", f)
        if os.path.exists(path) and "EMU_COUNTERS" in open(path, errors="replace").read():
            return True
    return False


def tree_uses_wgmma(root):
    """Whether the tree's kernels issue wgmma (issue 30 item 3): a header of llmc/ other than the
    wrappers' own llmc/wgmma.cuh that calls them."""
    d = os.path.join(root, "llmc")
    for f in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        if f.endswith((".cuh", ".h")) and f != "wgmma.cuh":
            with open(os.path.join(d, f), errors="replace") as fp:
                if "wgmma_" in fp.read():
                    return True
    return False


def read_counters(path):
    """The CSV of EMU_COUNTERS as a list of dicts (numbers as ints where they are ints)."""
    import csv
    rows = []
    with open(path) as fp:
        for row in csv.DictReader(fp):
            rows.append({k.strip(): (int(v) if re.fullmatch(r"-?\d+", v.strip() or "x") else v.strip()) for k, v in row.items()})
    return rows


# ----------------------------------------------------------------------------
# 4. the attention kernels at the full sequence length, one (b, h) slice (attention_slice.cu)

PTX_COUNTERS = re.compile(r"^cuda-emu trace: kernel (\S+): (\d+) mma\.sync \((\d+) tensor-core FLOPs\), (\d+) ldmatrix "
                          r"\((\d+) bytes\), (\d+) cp\.async \((\d+) bytes\)$")


def attention_slice(root, T, hs=64, B=1, NH=1, attention="mma"):
    """{kernel base name: {launches, mma, mma_flops, ldmatrix_bytes, cp_async_bytes}} for one
    (b, h) at sequence length T, from the emulator's trace of attention_slice.cu built against the
    tree's llmc/attention.cuh (the driver is copied in: it only calls the launchers), run with the
    trainer's -ak for `attention` (ATTENTION)."""
    if attention not in ATTENTION:
        fail("attention %r: expected one of %s" % (attention, ", ".join(ATTENTION)))
    ak = ["-ak", str(ATTENTION[attention])]
    key = tree_key(root, 0) + "_slice_T%d_hs%d_B%d_NH%d_ak%d" % (T, hs, B, NH, ATTENTION[attention])
    path = os.path.join(CACHE, key + ".json")
    if os.path.exists(path):
        with open(path) as fp:
            return json.load(fp)
    os.makedirs(CACHE, exist_ok=True)
    with open(os.path.join(HERE, "attention_slice.cu"), "rb") as fp:
        own_hash = hashlib.sha256(fp.read()).hexdigest()[:8]
    binary = os.path.join(CACHE, tree_key(root, 0) + "_attention_slice_" + own_hash + ("_90a" if attention == "sm90" else ""))
    if not os.path.exists(binary):  # one build per tree (and driver), run for every shape asked
        src = os.path.join(root, "dev/perf/attention_slice.cu")
        own = os.path.join(HERE, "attention_slice.cu")
        if not os.path.exists(src) or os.path.realpath(src) != os.path.realpath(own):
            os.makedirs(os.path.dirname(src), exist_ok=True)
            shutil.copyfile(own, src)
        run([os.path.join(root, "dev/cuda/emu/nvcc-cpu"), "-O2", "-std=c++17", "-I.", "-DENABLE_BF16"] + arch_flags(attention) +
            ["dev/perf/attention_slice.cu", "-o", binary + ".tmp", "-lcudart"], cwd=root, what="building attention_slice")
        os.replace(binary + ".tmp", binary)
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, EMU_TRACE="1", EMU_THREADS=os.environ.get("EMU_THREADS", "1"))
        p = run(["nice", binary] + ak + [str(T), str(hs), str(B), str(NH)], cwd=tmp, env=env,
                what="attention_slice %s on the emulator" % " ".join(ak))
        rows = []
        if attention != "mma" and tree_uses_wgmma(root) and emulator_has_counters(root):
            # the sm_90a kernels' wgmma FLOPs and TMA bytes come from EMU_COUNTERS, which needs the
            # access hooks (nvcc-cpu --emu-check): a second build, only for a tree that issues wgmma
            checked = binary + "_check"
            if not os.path.exists(checked):
                run([os.path.join(root, "dev/cuda/emu/nvcc-cpu"), "--emu-check", "-O2", "-std=c++17", "-I.", "-DENABLE_BF16"] +
                    arch_flags(attention) + ["dev/perf/attention_slice.cu", "-o", checked + ".tmp", "-lcudart"], cwd=root,
                    what="building attention_slice with the emulator's access hooks")
                os.replace(checked + ".tmp", checked)
            counters = os.path.join(tmp, "counters.csv")
            run(["nice", checked] + ak + [str(T), str(hs), str(B), str(NH)], cwd=tmp,
                env=dict(os.environ, EMU_COUNTERS=counters, EMU_THREADS=os.environ.get("EMU_THREADS", "1")),
                what="attention_slice on the emulator with EMU_COUNTERS")
            rows = read_counters(counters) if os.path.exists(counters) else []
    out = {}
    for line in p.stderr.splitlines():
        m = TRACE_LINE.match(line)
        if m and m.group(1).startswith("kernel "):
            name = m.group(1)[len("kernel "):].split("<")[0]
            out.setdefault(name, {"launches": 0, "mma": 0, "mma_flops": 0, "ldmatrix_bytes": 0, "cp_async_bytes": 0})
            out[name]["launches"] += 1
            continue
        m = PTX_COUNTERS.match(line)
        if m:
            name = m.group(1).split("<")[0]
            e = out.setdefault(name, {"launches": 0, "mma": 0, "mma_flops": 0, "ldmatrix_bytes": 0, "cp_async_bytes": 0})
            e["mma"] += int(m.group(2))
            e["mma_flops"] += int(m.group(3))
            e["ldmatrix_bytes"] += int(m.group(5))
            e["cp_async_bytes"] += int(m.group(7))
    # the emulator's per-launch counters (EMU_COUNTERS), summed per kernel: wgmma's tensor-core FLOPs
    # and the bytes TMA brought (sm_90a kernels, issue 30 item 3), the unique DRAM sectors, and the
    # launch's shape (the last launch's: grid blocks, threads per block, dynamic shared memory)
    for row in rows:
        name = str(row.get("kernel", "")).split("<")[0].split("(")[0].replace("void ", "").strip()
        if name not in out:
            continue
        e = out[name]
        for col in ("wgmma_flops", "tma_bytes", "dram_read_sectors", "dram_write_sectors"):
            if isinstance(row.get(col), int):
                e[col] = e.get(col, 0) + row[col]
        dims = [row.get(k) for k in ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")]
        if all(isinstance(d, int) for d in dims):
            e["grid"] = dims[0] * dims[1] * dims[2]
            e["block"] = dims[3] * dims[4] * dims[5]
            e["dyn_smem"] = row.get("dynamic_smem", 0) if isinstance(row.get("dynamic_smem"), int) else 0
    if not out:
        fail("attention_slice ran no kernels (EMU_TRACE output changed?)")
    os.makedirs(CACHE, exist_ok=True)
    with open(path, "w") as fp:
        json.dump(out, fp)
    return out


# ----------------------------------------------------------------------------
# all of it for one tree, cached

def counts_for_tree(root, recompute, label, verbose=True, model=MODEL, resources=True, attention="mma"):
    key = tree_key(root, recompute, model, attention) + ("" if resources else "_noptxas")
    os.makedirs(CACHE, exist_ok=True)
    path = os.path.join(CACHE, key + ".json")
    if os.path.exists(path):
        with open(path) as fp:
            return json.load(fp)
    if verbose:
        sys.stderr.write("dev/perf: counting %s (emulated build and two traced runs, ~2-3 minutes on 2 cores)\n" % label)
    with tempfile.TemporaryDirectory() as tmp:
        binary = os.path.join(tmp, "train_gpt2cu_emu")
        build_emulated(root, binary, attention)
        counters = emulator_has_counters(root)
        c1 = os.path.join(tmp, "c1.csv") if counters else None
        c2 = os.path.join(tmp, "c2.csv") if counters else None
        # the one-step and the two-step runs side by side (each one emulator thread: one core)
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            f1 = pool.submit(trace_ops, binary, 1, recompute, c1, model, attention)
            f2 = pool.submit(trace_ops, binary, 2, recompute, c2, model, attention)
            x1, x2 = f1.result(), f2.result()
        step = [parse_op(w) for w in one_step(x1, x2)]
        counter_rows = None
        if counters and os.path.exists(c2) and os.path.exists(c1):
            r1, r2 = read_counters(c1), read_counters(c2)
            counter_rows = {"one_step_run": r1, "two_step_run": r2}
    if resources:
        # ptxas' resources do not depend on -ak (one build holds both kernels' sets): another
        # attention's cached counts of the same tree lend theirs, one nvcc run fewer
        resources = None
        for other in ATTENTION:
            opath = os.path.join(CACHE, tree_key(root, recompute, model, other) + ".json")
            if other != attention and os.path.exists(opath):
                with open(opath) as fp:
                    resources = json.load(fp).get("resources")
                if resources:
                    break
        if not resources:
            resources = ptxas_resources(root)
    else:
        resources = None
    headers = {}
    for f in sorted(os.listdir(os.path.join(root, "llmc"))):
        if f.endswith((".cuh", ".h")):
            with open(os.path.join(root, "llmc", f), "rb") as fp:
                headers["llmc/" + f] = hashlib.sha256(fp.read()).hexdigest()[:12]
    result = {
        "headers": headers,
        "label": label, "key": key, "trace": {"model": model, "B": TRACE_B, "T": TRACE_T, "recompute": recompute,
                                              "attention": attention},
        "step_ops": [op for op in step if op["op"] != "other"],
        "resources": resources, "counters": counter_rows,
    }
    with open(path + ".tmp", "w") as fp:
        json.dump(result, fp)
    os.replace(path + ".tmp", path)
    return result


def same_attention(result, attention):
    """The step's attention kernels (all but the row-dot, a CUDA-core kernel costed from its
    source) must be ones the slice ran: else the slice priced other kernels than the step launches."""
    ran = set(result["attention_slice"])
    step = sorted({op["name"] for op in result["step_ops"] if op["op"] == "kernel" and op["name"].startswith("attention_")
                   and op["name"] != "attention_backward_rowdot_kernel" and op["name"] not in ran})
    if step:
        fail("--attention %s: the step launches %s, which attention_slice did not run (it ran %s): the trainer's -ak and "
             "the slice's chose different attention kernels" % (attention, ", ".join(step), ", ".join(sorted(ran))))
    result["attention"] = attention
    return result


DEFINE = re.compile(r"^#define\s+([A-Z][A-Z0-9_]*)\s+(\d+)\b", re.M)


def header_defines(root):
    """{NAME: int} of every integer #define of the tree's llmc/*.cuh and *.h (e.g. layernorm.cuh's
    LAYERNORM_BWD_ROWS, LAYERNORM_BWD_WARPS): kernel_costs.py reads a kernel's launch constants from
    here, not from a copy of them (read at every call, outside the cache: a header's constant is
    its text)."""
    out = {}
    d = os.path.join(root, "llmc")
    for f in sorted(os.listdir(d)):
        if f.endswith((".cuh", ".h")):
            with open(os.path.join(d, f), errors="replace") as fp:
                for m in DEFINE.finditer(fp.read()):
                    out.setdefault(m.group(1), int(m.group(2)))
    return out


def counts_for(rev, recompute, T=1024, attention="mma"):
    """rev None: the working tree; else a git revision, checked out into a temporary directory.
    Adds the attention slice at sequence length T. attention: ATTENTION's key, the trainer's -ak."""
    if attention not in ATTENTION:
        fail("attention %r: expected one of %s" % (attention, ", ".join(ATTENTION)))
    if rev is None:
        result = counts_for_tree(REPO, recompute, "the working tree", attention=attention)
        result["attention_slice"] = attention_slice(REPO, T, attention=attention)
        result["defines"] = header_defines(REPO)
        return same_attention(result, attention)
    with tempfile.TemporaryDirectory() as tmp:
        full = checkout(rev, tmp)
        result = counts_for_tree(tmp, recompute, "commit %s" % full[:7], attention=attention)
        result["label"] = "commit %s" % full[:7]
        result["attention_slice"] = attention_slice(tmp, T, attention=attention)
        result["defines"] = header_defines(tmp)
        return same_attention(result, attention)


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description="one step's launches, GEMM shapes and kernel resources of a tree")
    ap.add_argument("--rev", default=None, help="a git revision (default: the working tree)")
    ap.add_argument("-r", "--recompute", type=int, default=0)
    ap.add_argument("--attention", default="mma", choices=sorted(ATTENTION),
                    help="the attention kernels: mma (the trainer's default -ak 0) or sm90 (-ak 1)")
    a = ap.parse_args()
    c = counts_for(a.rev, a.recompute, attention=a.attention)
    kinds = {}
    for op in c["step_ops"]:
        k = op["name"] if op["op"] == "kernel" else op["op"]
        kinds[k] = kinds.get(k, 0) + 1
    for k in sorted(kinds):
        print("%6d  %s" % (kinds[k], k))


# ----------------------------------------------------------------------------
# 5. issue 29: the sm_90a attention kernels' consumer loop, counted from nvcc's PTX (perf_model.att90_chain)

ATT90_KERNELS = ("attention_forward_sm90_kernel", "attention_backward_dkdv_sm90_kernel")
ATT90_MIX_HEADERS = ("llmc/attention_sm90.cuh", "llmc/attention.cuh", "llmc/wgmma.cuh", "llmc/mma.cuh")


def ptx_op_class(op):
    """The pipe a PTX instruction issues to (one SASS instruction each, as counted here; nvcc's
    register moves and branches are left out: ptxas folds most of them): fp32 (add/sub/mul/fma .f32,
    128 lanes per clock per SM), mufu (ex2: the SFU, 16), cvt (cvt to bf16x2: a conversion, 16),
    shfl, lsu (shared and global loads and stores), alu (compares, min/max, selects, logic, integer
    arithmetic: 64). None: not an instruction of the loop's CUDA-core work (wgmma, mbarrier, moves)."""
    if op.startswith(("mov.", "bra", "wgmma", "mbarrier", "trap", "fence", "ld.param", "ret", "exit")):
        return None
    if op.startswith("ex2"):
        return "mufu"
    if op.startswith("cvt.rn.bf16x2"):
        return "cvt"
    if re.match(r"(add|sub|mul|fma)\.(rn\.)?f32\b", op):
        return "fp32"
    if op.startswith("shfl"):
        return "shfl"
    if op.startswith(("ld.shared", "st.shared", "ld.global", "st.global")):
        return "lsu"
    return "alu"


def ptx_loop_mix(body):
    """The instruction mix per thread of one trip of the kernel's consumer loop: the largest loop
    (a label and a later branch back to it) of the entry's PTX that issues wgmma. {class: count}
    (ptx_op_class), plus wgmma_waits: the wgmma.wait_group in the trip, by their N ({0: n, 1: n}).
    A path between the comments "att90: rare path {" and "}" (llmc/attention_sm90.cuh: the
    forward's diagonal tile's mask, once per query block; the dK/dV kernel's masked stages, one or
    two of a key block's, under warp-uniform branches) is not counted in the trip: an optimistic
    error of that path's instructions on those trips (the forward's: one tile in n, n = 4.5 on
    average at T = 1024)."""
    lines = body.splitlines()
    labels = {}
    best = None
    for i, line in enumerate(lines):
        m = PTX_LABEL.match(line.strip())
        if m:
            labels[m.group(1)] = i
        m = PTX_BRANCH.search(line)
        if m and m.group(1) in labels and labels[m.group(1)] < i:
            a = labels[m.group(1)]
            if any("wgmma.mma_async" in l for l in lines[a:i]) and (best is None or i - a > best[1] - best[0]):
                best = (a, i)
    if best is None:
        return None
    mix = {"alu": 0, "fp32": 0, "mufu": 0, "cvt": 0, "shfl": 0, "lsu": 0, "wgmma_waits": {}}
    once = False
    for line in lines[best[0]:best[1] + 1]:
        if "att90: rare path {" in line or "att90: rare path }" in line:
            once = "{" in line
            continue
        if once:
            continue
        s = line.strip().lstrip("{").strip()
        if not s or s.startswith(("//", "$", "}", ".reg")):
            continue
        if s.startswith("@"):
            s = s.split(None, 1)[1]
        op = s.split()[0].rstrip(";")
        if op.startswith("wgmma.wait_group"):
            n = int(re.search(r"(\d+)\s*;", s).group(1))
            mix["wgmma_waits"][n] = mix["wgmma_waits"].get(n, 0) + 1
        k = ptx_op_class(op)
        if k:
            mix[k] += 1
    return mix


def att90_mix(root=REPO):
    """{kernel: ptx_loop_mix} of the sm_90a forward and dK/dV kernels of the tree at root, from
    nvcc's PTX for sm_90a (one small translation unit: ~2 s), cached by the headers' contents; None
    without nvcc (perf_model then uses kernel_costs.ATT90_MIX, recorded per header fingerprint)."""
    nvcc = find_nvcc()
    if nvcc is None:
        return None
    h = hashlib.sha256(b"att90_mix v2")
    for f in ATT90_MIX_HEADERS:
        with open(os.path.join(root, f), "rb") as fp:
            h.update(fp.read())
    path = os.path.join(CACHE, "att90_mix_%s.json" % h.hexdigest()[:16])
    if os.path.exists(path):
        with open(path) as fp:
            return {k: dict(v, wgmma_waits={int(n): c for n, c in v["wgmma_waits"].items()}) for k, v in json.load(fp).items()}
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "att90.cu")
        with open(src, "w") as fp:
            fp.write('#include "llmc/attention.cuh"\n'
                     "void att90_instantiate(floatX* out, float* lse, const floatX* qkv, float* D, floatX* dqkv,\n"
                     "                       const floatX* dout, int B, int T, int C, int NH, cudaStream_t s) {\n"
                     "    attention_forward(out, lse, qkv, B, T, C, NH, s);\n"
                     "#if defined(ATTENTION_HAS_DBIAS)\n"  # the qkv bias gradient too (issue 30)
                     "    attention_backward(dqkv, dqkv, D, dout, qkv, out, lse, B, T, C, NH, s);\n"  # (compiled, not run)
                     "#else\n"
                     "    attention_backward(dqkv, D, dout, qkv, out, lse, B, T, C, NH, s);\n"
                     "#endif\n}\n")
        ptx = os.path.join(tmp, "att90.ptx")
        run([nvcc, "-O3", "-std=c++17", "-I" + root, "-DENABLE_BF16", "-gencode", "arch=compute_90a,code=sm_90a", "--ptx",
             src, "-o", ptx], cwd=root, what="nvcc --ptx (the sm_90a attention)")
        with open(ptx) as fp:
            text = fp.read()
    starts = [(m.start(), m.group(1)) for m in PTX_ENTRY.finditer(text)]
    out = {}
    for k, (pos, name) in enumerate(starts):
        base = next((b for b in ATT90_KERNELS if re.match(r"_Z\d+%s" % b, name)), None)
        if base:
            mix = ptx_loop_mix(text[pos:starts[k + 1][0] if k + 1 < len(starts) else len(text)])
            if mix:
                out[base] = mix
    os.makedirs(CACHE, exist_ok=True)
    with open(path, "w") as fp:
        json.dump(out, fp, indent=1, sort_keys=True)
    return out
