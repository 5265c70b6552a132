"""
perf_model.py: how fast the CUDA trainer should be on a GPU nobody here has, kernel by kernel,
as a PREDICTION to be proven wrong by the first GPU run (dev/gpu_check.sh prints measured beside
predicted). Nothing printed here is a measurement of a GPU.

    make profile                                   (= the line below with the defaults)
    python3 dev/perf/perf_model.py --device h100-sxm --batch 32 --baseline 2e0af91
    python3 dev/perf/perf_model.py --device a100-sxm-80gb --batch 64 --json out.json

How a prediction is made, top to bottom in this file:
  1. What a step launches comes from the code (step_counts.py): the emulator's trace of one real
     training step of the tree (kernels in order, cuBLASLt m x n x k), ptxas -v of the real nvcc
     build (registers, shared memory, spills), and the PTX (bytes each thread keeps in flight).
  2. What each launch does (bytes, FLOPs, shared-memory wavefronts) comes from kernel_costs.py,
     derived from each kernel's source, at the asked B and T.
  3. How long that takes on a device comes from devices.json's constants, each cited: a roofline
     per launch, time = max(tensor FLOPs / (peak x cuBLAS efficiency x wave use), CUDA-core FLOPs /
     peak, shared wavefronts / (SMs x clock), DRAM bytes / achieved bandwidth, serial DRAM round
     trips x latency, one launch), where achieved bandwidth is the published streaming benchmark's
     curve read at the kernel's own bytes in flight (resident threads from the occupancy rules x
     the PTX's loads per thread): Little's law.
  4. The step is the sum of its launches on one stream; ZeRO stages at N = 8 add the collectives
     of the project's plan on a second stream, ordered as train_gpt2.cu orders them (zero_step.py).
MFU is llm.c's (and train_gpt2.cu's): (6 N + 6 L C T) FLOPs per token, N the parameters (padded
vocabulary rows included), against the device's dense bf16 peak.
"""
import argparse
import copy
import json
import math
import os
import sys
from array import array
from collections import Counter, OrderedDict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernel_costs as kc  # noqa: E402
import occupancy as occ  # noqa: E402
import step_counts  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = step_counts.REPO
BASELINE = "2e0af91"  # main before the tensor-core attention and 16-byte kernels (issue 22)


# Each cause issue 29 fixed, as a switch the tests turn off one at a time to show that the measured
# fixtures catch its removal (test_perf_model.py's mutants). Nothing else changes them.
CAUSES = {
    "attention_from_mix": True,     # attention from its phases; off: mma FLOPs at the published 35% (FA2)
    "stack_charge": True,           # ptxas' stack frame's local traffic per thread
    "block_chain": True,            # a block's serial round trips and barriers, once per wave
    "wave_tail": True,              # the last wave's idle slots stretch memory time and a block's chain

    "inflight_from_source": True,   # bytes in flight from the loop that runs at the shape; off: the PTX's busiest loop
    "ieee": True,                   # IEEE div/sqrt/expf/tanhf as instruction sequences (no fixture shows it: no
                                    # kernel measured is bound by its instructions)
    "splitk_reduce": True,          # cuBLASLt's splitKreduce kernels
    "splitk_reduce_one_wave": True, # their grid about one wave whatever m n (ncu); off: a grid growing with m n
    "launch_gap": True,             # the time between launches
    "classifier_dram_pass2": True,  # the classifier's second read of the logits from DRAM
    # perfmodel (issue 29's known misses): how test_kernels --bench times a row
    "bench_queued_launches": True,  # a bench row's later launches queue behind its first (one host gap per row)
    "bench_l2_resident": True,      # a bench row whose tensors fit the L2 runs its repeats from L2
    "wgmma_calibrated": True,       # wgmma at the rate cuDNN's measured kernel reached; off: the dense peak
    # model (issue 29, the 1f4c85f fixture): what the second H200 run showed
    "bgradb_kernel": True,          # cuBLASLt's BGRADB epilogue runs as a kernel of its own re-reading dout; off: hidden
    "serial_phases": True,          # one block per SM whose loads, arithmetic and stores the code orders: their sum
    # attmodel (issue 29): our sm_90a attention priced from its consumer loop, not at cuDNN's rate
    "att90_chain": True,            # a tile's products, softmax and waits in the order the code runs them; off: cuDNN's rate
    "att90_overlap_read": True,     # the forward's loop as the header's ATT90_FWD_OVERLAP builds it; off: always overlapped
}
kc.CAUSES.update(CAUSES)
CAUSES = kc.CAUSES  # one dict: kernel_costs.py reads the classifier's switch from it


def load_devices():
    with open(os.path.join(HERE, "devices.json")) as fp:
        return json.load(fp)


def v(entry):
    return entry["value"] if isinstance(entry, dict) else entry


# ----------------------------------------------------------------------------
# the device: peaks, and the achieved-bandwidth curve (Little's law, normalized)

class Device:
    def __init__(self, devices, key):
        if key not in devices["devices"]:
            raise SystemExit("dev/perf: --device %s: expected one of %s" % (key, ", ".join(devices["devices"])))
        d = devices["devices"][key]
        self.key, self.name, self.cc, self.arch = key, d["name"], d["cc"], d["arch"]
        self.sms = v(d["sms"])
        self.tc = v(d["bf16_tensor_tflops"]) * 1e12
        self.fp32 = v(d["fp32_tflops"]) * 1e12
        self.clock = v(d["clock_ghz"]) * 1e9
        self.bw = v(d["hbm_tb_s"]) * 1e12
        self.smem_bpc = v(d["smem_bytes_per_clk_per_sm"])
        self.latency = v(d["dram_latency_ns"]) * 1e-9
        self.gemm_eff = v(d["gemm_efficiency"])
        self.mma_eff = v(d["mma_attention_efficiency"])
        self.launch = v(d["launch_us"]) * 1e-6
        # the constants issue 29 added (devices.json says which are measured and which fitted, and on what)
        self.launch_gap = v(d["launch_gap_us"]) * 1e-6
        self.graph_gap = v(d["graph_gap_us"]) * 1e-6  # between a CUDA graph's kernels (H200: MEASURED as no gain over launch_gap_us)
        self.chain_latency = v(d["dram_chain_ns"]) * 1e-9
        self.barrier = v(d["barrier_ns"]) * 1e-9
        self.l2_bw = v(d["l2_staging_tb_s"]) * 1e12
        self.local_bw = v(d["local_store_tb_s"]) * 1e12
        self.mma_sync = v(d["mma_sync_fraction"])
        self.sfu_per_clk = v(d["sfu_per_clk_per_sm"])
        # perfmodel (issue 30): the achieved whole-kernel rate of a warp-specialized TMA + wgmma
        # attention kernel (sm_90a)
        self.wgmma_att = v(d["wgmma_attention_fraction"]) if "wgmma_attention_fraction" in d else None
        # attmodel (issue 29): the CUDA-core pipes of a consumer warpgroup's loop (programming guide's
        # throughput table) and the clocks a wgmma.wait_group exposes in a serial chain (FITTED)
        self.alu_per_clk = v(d["alu_per_clk_per_sm"]) if "alu_per_clk_per_sm" in d else None
        self.cvt_per_clk = v(d["cvt_per_clk_per_sm"]) if "cvt_per_clk_per_sm" in d else None
        self.shfl_per_clk = v(d["shfl_per_clk_per_sm"]) if "shfl_per_clk_per_sm" in d else None
        self.wgmma_wait = v(d["wgmma_wait_ns"]) * 1e-9 if "wgmma_wait_ns" in d else None
        # the L2 as a bench row's repeats see it (published, gpu-benches): the largest footprint still
        # served at the L2's full rate, that rate, and an L2 round trip as a share of a DRAM one
        self.l2_resident = v(d["l2_resident_mb"]) * 1e6 if v(d.get("l2_resident_mb")) is not None else None
        self.l2_read_bw = v(d["l2_read_tb_s"]) * 1e12 if v(d.get("l2_read_tb_s")) is not None else None
        self.l2_latency_ratio = v(d.get("l2_latency_ratio")) or 1.0
        self.pcie = v(d["pcie_gb_s"]) * 1e9
        self.nvlink = d["nvlink_busbw_gb_s"]
        self.limits = occ.limits_for(devices, self.cc)
        self.curves = stream_curves(devices["stream_curves"][v(d["stream_curve"])])
        # a measured copy bandwidth sets the curve's height: its best copy ('scale') point is the
        # measured figure (the curve's shape is the published part's)
        self.bw_scale = 1.0
        for key in ("stream_tb_s", "measured_copy_tb_s"):  # a fitted kernel figure before a copy's
            if key in d:
                self.bw_scale = v(d[key]) * 1e12 / (self.bw * self.bw_best("scale", scaled=False))
                break

    def bw_fraction(self, stream, inflight_bytes):
        """Achieved / peak DRAM bandwidth for a kernel whose resident threads keep inflight_bytes of
        loads in flight: the published curve at x = inflight / (peak bandwidth x latency)."""
        pts = self.curves[stream]
        x = inflight_bytes / (self.bw * self.latency)
        if x <= pts[0][0]:
            return self.bw_scale * pts[0][1] * x / pts[0][0]
        for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
            if x <= x1:
                return self.bw_scale * (y0 + (y1 - y0) * (x - x0) / (x1 - x0))
        return self.bw_scale * pts[-1][1]

    def bw_best(self, stream, scaled=True):
        return max(y for _, y in self.curves[stream]) * (self.bw_scale if scaled else 1.0)


def stream_curves(table):
    """(x, y) points per stream kind from a published table (devices.json stream_curves): x the
    loads in flight over (peak x latency), y achieved over peak."""
    cols = table["columns"]
    loads = {"read": 1, "scale": 1, "triad": 2}  # load streams per kernel kind (cuda-stream/main.cu)
    out = {}
    for kind in ("read", "scale", "triad"):
        i = cols.index(kind)
        pts = []
        for row in table["rows"]:
            threads_per_sm = row[0] * table["blocks_per_sm"]
            inflight = threads_per_sm * table["sms"] * table["element_bytes"] * loads[kind]
            x = inflight / (table["peak_gb_s"] * 1e9 * table["latency_ns"] * 1e-9)
            pts.append((x, row[i] / table["peak_gb_s"]))
        out[kind] = sorted(pts)
    return out


# ----------------------------------------------------------------------------
# 1. the step's launches at the asked shape, from the traced step

def data_bucket_sizes(B, T):
    """The encoder backward's buckets in the first B*T tokens of the project's training data: how
    many positions each distinct token has, in ascending token order (their number is the distinct
    tokens, their largest the most frequent token's count)."""
    path = os.path.join(REPO, "dev/data/tinyshakespeare/tiny_shakespeare_train.bin")
    if not os.path.exists(path):
        raise SystemExit("dev/perf: %s is missing: run make data" % path)
    tokens = array("H")
    with open(path, "rb") as fp:
        fp.seek(256 * 4)  # llm.c's token file: a 256-int header, then uint16 tokens
        tokens.frombytes(fp.read(2 * B * T))
    counts = Counter(tokens)
    return [counts[t] for t in sorted(counts)]


def layout(S, N=1, align=16):
    """Tensor sizes in slab order (llmc/gpt2_layout.h: unit 0 = wte, wpe, lnfw, lnfb; each block's
    12 tensors), and unit sizes padded to a multiple of N * align (llmc/zero_plan.h)."""
    C, L = S.C, S.L
    unit0 = [S.Vp * C, S.maxT * C, C, C]
    block = [C, C, 3 * C * C, 3 * C, C * C, C, C, C, 4 * C * C, 4 * C, 4 * C * C, C]
    mult = N * align
    sizes = [unit0] + [block] * L
    unit_size = [kc.cdiv(sum(t), mult) * mult for t in sizes]
    return sizes, unit_size


def num_parameters(S):
    sizes, _ = layout(S)
    return sum(sum(t) for t in sizes)


class Launch:
    def __init__(self, kind, name, phase, ctx):
        self.kind, self.name, self.phase, self.ctx = kind, name, phase, ctx


def expand_step(counts, S):
    """The traced step's ops as launches at shape S, each with the context its cost needs.
    The traced B*T is rescaled to S's; everything else in the trace is taken as it is."""
    tBT = counts["trace"]["B"] * counts["trace"]["T"]
    if tBT in (S.C, 3 * S.C, 4 * S.C, S.Vp):
        raise SystemExit("dev/perf: the traced B*T %d equals a model dimension: cannot tell it apart" % tBT)
    sizes, unit_size = layout(S)
    tensors = [n for unit in sizes for n in unit]  # 2e0af91's AdamW launches, one per tensor in update order
    units = [sum(t) for t in sizes]  # issue 22's: one per unit (the kernel skips the unit's padding)
    launches, phase = [], "forward"
    last_gemm, n_memset, n_lnf = None, 0, 0
    adamw, norm = [], []  # their launches, given their elements once the step's structure is known
    for op in counts["step_ops"]:
        if op["op"] == "gemm":
            dims = [S.BT if d == tBT else d for d in (op["m"], op["n"], op["k"])]
            # cuBLASLt's D += for the weight gradient: matmul_backward's dweight is the NT product
            ctx = {"m": dims[0], "n": dims[1], "k": dims[2], "bias": op["bias"], "accumulate": (not op["ta"]) and op["tb"],
                   "epilogue": op.get("epilogue", []), "graph": op.get("graph", False),
                   "gelu": op.get("gelu", ""), "aux": op.get("aux", False), "bgradb": op.get("bgradb", False)}
            last_gemm = ctx
            launches.append(Launch("gemm", "cublasLt %s%s" % ("T" if op["ta"] else "N", "T" if op["tb"] else "N"), phase, ctx))
        elif op["op"] == "kernel":
            name, ctx = op["name"], {"graph": op.get("graph", False), "template": op.get("template", "")}
            if name == "global_norm_partial_kernel" and phase == "backward":
                phase = "update"
            if name == "layernorm_forward_kernel":
                # gpt2_forward: block 0's ln1 is plain, every later one is fused with the residual
                # add; the backward's recomputes (-r 2) are plain
                ctx["fused"] = phase == "forward" and n_lnf > 0
                n_lnf += phase == "forward"
            if name in ("dbias_partial_kernel", "dbias_finish_kernel", "dbias_add_kernel"):
                ctx["OC"] = last_gemm["n"]  # matmul_backward: after dweight (m C, n OC, k BT)
            launches.append(Launch("kernel", name, phase, ctx))
            if name == "adamw_kernel":
                adamw.append(launches[-1])
            if name in ("global_norm_partial_kernel", "global_norm_finish_kernel"):
                norm.append(launches[-1])
            if name in ("fused_classifier_kernel", "fused_classifier_reread_kernel",  # (reread: a Vp over 7 packs a thread)
                        "fused_classifier_streamed_kernel"):  # (streamed: where two rows fit a block's shared memory)
                phase = "backward"
        elif op["op"] == "memset":
            # gpt2_zero_grad (the whole gradient slab) starts the step; gpt2_backward zeroes dresidual (B,T,C)
            nbytes = sum(unit_size) * kc.X if n_memset == 0 else S.BT * S.C * kc.X
            n_memset += 1
            launches.append(Launch("memset", "cudaMemsetAsync", phase, {"bytes": nbytes}))
        elif op["op"] == "memcpy":
            b = op["bytes"]
            # inputs, targets, losses: 4 bytes per position; the encoder's buckets 4 (3 BT + 1), with
            # the blocks' order (issue 30) 4 (4 BT + 1); the norm 8
            nb = 4 * S.BT if b == 4 * tBT else b
            for per_position in (3, 4):
                if b == 4 * (per_position * tBT + 1):
                    nb = 4 * (per_position * S.BT + 1)
            launches.append(Launch("memcpy", "cudaMemcpyAsync", phase, {"bytes": nb}))
    # AdamW once per tensor (2e0af91) or once per unit (issue 22); the norm twice per unit (2e0af91,
    # each pass over the unit's slice) or twice in all (issue 22, one pass over every unit)
    if len(adamw) == len(tensors):
        per_launch = tensors
    elif len(adamw) == len(units):
        per_launch = units
    else:
        raise SystemExit("dev/perf: the step launches AdamW %d times; the model knows an update once per tensor (%d) or "
                         "once per unit (%d): this tree's update changed, derive its costs again" % (len(adamw), len(tensors), len(units)))
    for launch, n in zip(adamw, per_launch):
        launch.ctx["n"] = n
    if len(norm) == 2 * len(unit_size):
        for k, launch in enumerate(norm):
            launch.ctx["n"] = unit_size[k // 2]
    elif len(norm) == 2:
        for launch in norm:
            launch.ctx["n"] = sum(unit_size)
    else:
        raise SystemExit("dev/perf: the step launches the norm's kernels %d times; the model knows 2 per unit (%d) or 2"
                         % (len(norm), 2 * len(unit_size)))
    return launches


# ----------------------------------------------------------------------------
# 2-3. a launch's counts and its predicted time

def resources_for(counts, dev, name, S, arch=None, template=None):
    """ptxas' registers and shared memory of the instance of kernel `name` the trainer launches,
    as built for `arch` (default: the device's own)."""
    arch = arch or dev.arch
    res = counts.get("resources")
    if res is None:
        raise SystemExit("dev/perf: no ptxas resources (nvcc not found): registers and occupancy need the real nvcc")
    inst = res.get(arch, {}).get(name)
    if not inst:
        raise SystemExit("dev/perf: ptxas reported no kernel %s for %s" % (name, arch))
    # the instance the launch names (its trace label's template arguments, where they are numbers),
    # else the one kernel_costs.template_for says the trainer takes at this shape
    for e in inst:
        if template and e["template"] == template:
            return e
    for want in kc.template_candidates(name, S):
        for e in inst:
            if e["template"] == want:
                return e
    if len(inst) == 1:
        return inst[0]
    raise SystemExit("dev/perf: which instance of %s does the trainer launch? (%s)" % (name, [e["template"] for e in inst]))


class Result:
    def __init__(self, launch, time, bound, parts, cost=None, res=None, occu=None):
        self.launch, self.time, self.bound, self.parts = launch, time, bound, parts
        self.cost, self.res, self.occ = cost, res, occu


def pick(parts):
    bound = max(parts, key=parts.get)
    return parts[bound], bound


def attention_blocks(S, name):
    """The tiles each block of an attention kernel walks, in launch order (blockIdx.x fastest), from
    llmc/attention.cuh: a block owns 64 rows and stages 64 rows of the other side per tile; the
    forward and dQ blocks take query block gridDim.x - 1 - blockIdx.x (heaviest first) and walk the
    keys up to their diagonal, the dK/dV block j walks the queries from 64 j to T."""
    nb = kc.cdiv(S.T, 64)
    if name == "attention_backward_dkdv_kernel":
        per_head = [kc.cdiv(S.T - 64 * j, 64) for j in range(nb)]
    else:
        per_head = [kc.cdiv(min(64 * (nb - 1 - x) + 64, S.T), 64) for x in range(nb)]
    return per_head * (S.B * S.NH)


def makespan(lengths, slots):
    """Greedy list scheduling, as the block scheduler hands blocks to free slots in launch order:
    the time the last slot finishes, in the units of lengths."""
    import heapq
    if len(lengths) <= slots:
        return max(lengths)
    free = [0] * slots
    for n in lengths:
        t = heapq.heappop(free)
        heapq.heappush(free, t + n)
    return max(free)


# per block-tile of the tensor-core attention kernels, from their loops in llmc/attention.cuh:
# exponentials (ex2, one per score of the 64 x 64 tile; the forward adds one rescale per row and
# warp) and block-wide barriers (cp.async wait + __syncthreads at the end of every tile)
ATT_TILE_EXPS = {"attention_forward_kernel": 64 * 64 + 64 * 2, "attention_backward_dkdv_kernel": 64 * 64,
                 "attention_backward_dq_kernel": 64 * 64}
ATT_TILE_BARRIERS = 1
_TAILS = {}  # (kernel, B, T, NH, slots) -> the scheduling tail, computed once


def tensor_core_result(launch, S, dev, sl, counts):
    """A kernel the emulator saw issue mma.sync (the attention kernels on tensor cores): its counts
    for one (b, h) at the full T (attention_slice.cu) times B x NH, exactly. A tile's work runs one
    phase after another in each warp (S = QK^T on the tensor cores, the softmax's exponentials on
    the special-function units, P V, all fed by ldmatrix from shared memory), and with 3-4 warps per
    scheduler the SM does not hide one phase behind another: the work is the sum of the phases at
    their pipes' rates (mma.sync at its fraction of the dense peak, 16 exponentials per clock per SM,
    128 shared bytes per clock per SM). The next tile's cp.async from L2 (the bytes the emulator
    counted) lands meanwhile, at the L2 staging rate: a tile takes the larger of the two, then its
    barrier (one per tile per resident block). Stretched by the tail of heaviest-first scheduling
    of the blocks' unequal tile counts onto the SMs' slots."""
    scale = S.B * S.NH
    io = kc.attention_io(S, launch.name)
    if io is None:
        raise SystemExit("dev/perf: kernel %s issues mma.sync but is not one of the attention kernels the model knows" % launch.name)
    blocks = attention_blocks(S, launch.name)
    tiles = sum(blocks)
    cost = kc.Cost(len(blocks), 128, read=io[0], write=io[1], tc_flops=sl["mma_flops"] * scale,
                   stream="read", note="tensor cores: %d mma.sync per (b,h)" % sl["mma"])
    smem_bytes = (sl["ldmatrix_bytes"] + sl["cp_async_bytes"]) * scale
    l2_bytes = sl["cp_async_bytes"] * scale
    res = resources_for(counts, dev, launch.name, S)
    o = occ.occupancy(dev.limits, 128, res["regs"], res["smem"])
    slots = max(1, o["blocks_per_sm"]) * dev.sms
    exps = tiles * ATT_TILE_EXPS[launch.name]
    phases = {
        "tensor cores": cost.tc_flops / (dev.tc * dev.mma_sync),
        "exponentials": exps / (dev.sms * dev.clock * dev.sfu_per_clk),
        "shared memory": smem_bytes / (dev.sms * dev.clock * dev.smem_bpc),
        "L2 staging": l2_bytes / dev.l2_bw,
        "barriers": tiles * ATT_TILE_BARRIERS * dev.barrier / slots,
    }
    key = (launch.name, S.B, S.T, S.NH, slots)
    if key not in _TAILS:
        _TAILS[key] = makespan(blocks, slots) / (tiles / slots)
    tail = _TAILS[key]
    # the tile's work (tensor cores, exponentials, shared memory) runs while the next tile's cp.async
    # lands: the larger of the two per tile, then the tile's barrier
    work = phases["tensor cores"] + phases["exponentials"] + phases["shared memory"]
    serial = (max(work, phases["L2 staging"]) + phases["barriers"]) * tail
    bound = "L2 staging" if phases["L2 staging"] > work else max(
        ("tensor cores", "exponentials", "shared memory"), key=phases.get)
    parts = {bound: serial, "memory": cost.dram / (dev.bw * dev.bw_best("read")), "launch": dev.launch}
    cost.smem_wavefronts = smem_bytes / 128
    if not CAUSES["attention_from_mix"]:  # the model before issue 29
        parts = {"tensor cores": cost.tc_flops / (dev.tc * dev.mma_eff),
                 "shared memory": smem_bytes / (dev.sms * dev.clock * dev.smem_bpc),
                 "memory": cost.dram / (dev.bw * dev.bw_best("read")), "launch": dev.launch}
    t, bound = pick(parts)
    r = Result(launch, t, bound, parts, cost, res, o)
    r.phases, r.tail, r.l2_bytes = phases, tail, l2_bytes
    return r


def wgmma_resources(counts, dev, name, S):
    """ptxas' registers and shared memory of a kernel built for sm_90a (wgmma and TMA exist only
    there: step_counts.py compiles the trainer for it too), else the device's own arch's."""
    res = counts.get("resources") or {}
    sm90a = "sm_90a" in res and name in res["sm_90a"] and dev.cc == "9.0"
    return resources_for(counts, dev, name, S, arch="sm_90a" if sm90a else None)


def att90_tiles(S, name):
    """The tiles (one trip of the consumer loop) each block of our sm_90a kernels walks, in launch
    order, from llmc/attention_sm90.cuh: the forward's block of 128 queries (heaviest first) walks
    the 128-key tiles up to its diagonal; the dK/dV block kb of 128 keys walks the 64-query stages
    from 128 kb to T."""
    nb = kc.cdiv(S.T, 128)
    if name == "attention_backward_dkdv_sm90_kernel":
        per_head = [kc.cdiv(S.T - 128 * kb, 64) for kb in range(nb)]
    else:
        per_head = [nb - x for x in range(nb)]
    return per_head * (S.B * S.NH)


def att90_mix_for(counts, name):
    """The consumer loop's instruction mix of kernel `name` for the tree counts describes: nvcc's
    PTX of the working tree when it is that tree (step_counts.att90_mix), else the mix recorded for
    the header's fingerprint (kernel_costs.ATT90_MIX)."""
    fp = (counts.get("headers") or {}).get("llmc/attention_sm90.cuh")
    mine = None
    with open(os.path.join(REPO, "llmc/attention_sm90.cuh"), "rb") as f:
        import hashlib
        mine = hashlib.sha256(f.read()).hexdigest()[:12]
    mix = None
    if fp is None or fp == mine:
        mix = (step_counts.att90_mix(REPO) or {}).get(name)
        fp = fp or mine
    if mix is None:
        mix = kc.ATT90_MIX.get(fp, {}).get(name)
    if mix is None:
        raise SystemExit("dev/perf: kernel %s: no instruction mix for llmc/attention_sm90.cuh %s (no nvcc here to count it "
                         "from the PTX, and kernel_costs.ATT90_MIX has none recorded for it)" % (name, fp))
    return mix


def att90_chain(name, dev, flops_tile, mix, overlap):
    """Seconds of one tile (one trip of the consumer loop) of our sm_90a kernels, both consumer
    warpgroups of the block in lockstep (they wait on the same full[s] barrier and release the same
    empty[s]): {"tensor": both warpgroups' products at the SM's dense rate (they share its 4 tensor
    cores), "cuda": the loop's CUDA-core instructions of the two consumer warps an SM sub-partition
    holds (one of each warpgroup), at the slowest of the scheduler's issue (1 a clock) and each pipe
    (programming guide, per SM per clock: fp32 128, compare/select/integer 64, ex2 16 and bf16
    conversions 16 sharing the SFU, shuffles 32, shared-memory accesses 128 bytes = 32 lanes),
    "waits": the wgmma.wait_group the trip exposes x wgmma_wait_ns (FITTED), "chain": the tile}.
    Serial (the code waits for each product before the next step): chain = tensor + cuda + waits.
    Overlapped (FlashAttention-3's intra-warpgroup overlap, ATT90_FWD_OVERLAP 1: S_j issued with
    P_{j-1} V_{j-1} behind it, the softmax of S_j beside the latter): chain = S's half of the
    products + max(cuda, P V's half) + the one wait for S_j (wait_group 1; its wait_group 0 falls
    after the softmax that runs beside the product it waits for)."""
    clk = dev.clock
    # clocks of a warp instruction on one sub-partition: 32 lanes / (a quarter of the per-SM rate)
    fp32_clk = dev.fp32 / (2 * dev.sms * clk)
    pipes = {
        "issue": sum(mix[k] for k in ("alu", "fp32", "mufu", "cvt", "shfl", "lsu")),
        "alu": mix["alu"] * 32 / (dev.alu_per_clk / 4),
        "fp32": mix["fp32"] * 32 / (fp32_clk / 4),
        "sfu": (mix["mufu"] / dev.sfu_per_clk + mix["cvt"] / dev.cvt_per_clk) * 32 * 4,
        "shfl": mix["shfl"] * 32 / (dev.shfl_per_clk / 4),
        "lsu": mix["lsu"] * 32 / (dev.smem_bpc / 4 / 4),
    }
    warps = 2  # consumer warps per sub-partition: warp w of each consumer warpgroup
    cuda = warps * max(pipes.values()) / clk
    tensor = flops_tile / (dev.tc / dev.sms)
    waits = mix["wgmma_waits"]
    if overlap:
        exposed = sum(n for k, n in waits.items() if k > 0)
        chain = tensor / 2 + max(cuda, tensor / 2) + exposed * dev.wgmma_wait
    else:
        exposed = sum(waits.values())
        chain = tensor + cuda + exposed * dev.wgmma_wait
    return {"tensor": tensor, "cuda": cuda, "waits": exposed * dev.wgmma_wait, "chain": chain,
            "bound_pipe": max(pipes, key=pipes.get)}


def att90_result(launch, S, dev, sl, counts):
    """Our sm_90a attention kernels (llmc/attention_sm90.cuh, the trainer's -ak 1): one block of
    384 threads per SM (ptxas' 168 registers x 384), each tile a chain (att90_chain) and a block's
    tiles one after another; the busiest SM's tiles (the causal blocks over the SMs, heaviest first:
    makespan) x the chain, plus one loaded DRAM round trip per block after an SM's first (its Q and
    first K, V land before its first product), and the longest of that and the TMA and DRAM pipes.
    Which forward loop runs: the header's ATT90_FWD_OVERLAP (the serial one where it is absent)."""
    if dev.wgmma_wait is None or dev.alu_per_clk is None:
        raise SystemExit("dev/perf: kernel %s: device %s has no wgmma_wait_ns / alu_per_clk_per_sm (devices.json)" % (
            launch.name, dev.key))
    scale = S.B * S.NH
    tiles = att90_tiles(S, launch.name)
    per_bh = sum(tiles[:len(tiles) // scale])
    flops_tile = sl["wgmma_flops"] / per_bh
    overlap = launch.name == "attention_forward_sm90_kernel" and (
        kc.define(S, "ATT90_FWD_OVERLAP") == 1 or not CAUSES["att90_overlap_read"])
    mix = att90_mix_for(counts, launch.name)
    ch = att90_chain(launch.name, dev, flops_tile, mix, overlap)
    threads = sl.get("block") or 384
    res = wgmma_resources(counts, dev, launch.name, S)
    o = occ.occupancy(dev.limits, threads, res["regs"], res["smem"] + sl.get("dyn_smem", 0))
    slots = max(1, o["blocks_per_sm"]) * dev.sms
    key = (launch.name, "att90", S.B, S.T, S.NH, slots)
    if key not in _TAILS:
        _TAILS[key] = makespan(tiles, slots)
    busiest = _TAILS[key]
    tma = sl.get("tma_bytes", 0) * scale
    if sl.get("dram_read_sectors") or sl.get("dram_write_sectors"):
        io = (sl.get("dram_read_sectors", 0) * 32 * scale, sl.get("dram_write_sectors", 0) * 32 * scale)
    else:
        io = kc.attention_io(S, launch.name)
    cost = kc.Cost(len(tiles), threads, read=io[0], write=io[1], tc_flops=sl["wgmma_flops"] * scale, stream="read",
                   note="sm_90a chain per tile: tensor %.0f ns, CUDA cores %.0f ns (%s), waits %.0f ns%s" % (
                       ch["tensor"] * 1e9, ch["cuda"] * 1e9, ch["bound_pipe"], ch["waits"] * 1e9,
                       ", overlapped" if overlap else ", serial"))
    fill = (math.ceil(len(tiles) / slots) - 1) * dev.chain_latency
    phases = {"chain (tensor + softmax + waits)": busiest * ch["chain"] + fill,
              "memory": cost.dram / (dev.bw * dev.bw_best("read"))}
    if dev.l2_read_bw is not None:  # (the H100 entry has no published L2 read rate: the chain and DRAM only)
        phases["TMA from L2"] = tma / dev.l2_read_bw
    bound = max(phases, key=phases.get)
    parts = {bound: phases[bound], "launch": dev.launch}
    t, bound = pick(parts)
    r = Result(launch, t, bound, parts, cost, res, o)
    r.phases, r.tail, r.l2_bytes, r.chain = phases, busiest / (sum(tiles) / slots), tma, ch
    return r


def wgmma_result(launch, S, dev, sl, counts):
    """A warp-specialized TMA + wgmma kernel that overlaps its pipes as cuDNN's does (since issue 29's
    attmodel: cuDNN's own kernels in test_perf_model.py, and ours with CAUSES["att90_chain"] off; ours
    are priced by att90_result from their loop). A warp-specialized TMA + wgmma kernel (sm_90a, FlashAttention-3's structure: a producer warp
    issues TMA copies into a ring of shared-memory stages guarded by mbarriers, consumer warpgroups
    issue wgmma on them), from the emulator's counters for one (b, h) at the full T (attention_slice:
    wgmma_flops, tma_bytes, the launch's grid, block and dynamic shared memory, and its unique DRAM
    sectors where the counters have them) x B x NH.

    Producer and consumers overlap (the point of warp specialization, and of two consumer
    warpgroups taking turns between their products and their softmax), so the kernel takes the
    LONGEST of its pipes, not their sum as the mma.sync kernels do:
      - the wgmma FLOPs (masked halves of diagonal tiles included, as the emulator counts what is
        issued) at devices.json wgmma_attention_fraction of the dense peak. No kernel of ours of
        this kind has been measured: the fraction is CALIBRATED on cuDNN's warp-specialized wgmma
        flash attention forward in the same GPU run (llm.c + cuDNN, ncu, B=32, T=1024, hs 64:
        fit_constants.py), so it carries cuDNN's overlap of the exponentials (at hs 64 the 16 ex2
        per clock per SM are as slow as the tensor cores) and its pipeline; a kernel of ours that
        overlaps less runs slower than this predicts. A prediction, labelled as one;
      - the TMA bytes from L2 at the L2's published read rate (l2_read_tb_s: TMA is the bulk path
        built to reach it; our cp.async kernels' fitted l2_staging_tb_s, 3.0 TB/s, carries their
        barriers and re-staging, and at that rate cuDNN's measured forward could not run as fast as
        it did);
      - the DRAM bytes (q, k, v, dout in; out, lse, dq, dk, dv out) at the best read bandwidth;
    stretched by the tail of the blocks' unequal causal work over the SMs' slots (occupancy from
    ptxas' sm_90a registers and shared memory; block i of a (b, h) taken to own a 1/n share of the
    rows with i + 1 tiles of work, heaviest first), plus the pipeline's fill: one DRAM round trip
    per wave of blocks after the first before the block's first wgmma can issue (none for a
    persistent kernel, sl["persistent"], whose blocks load the next tile while finishing one: the
    emulator's one slice cannot tell, so a tree's kernel is priced as not persistent)."""
    if dev.wgmma_att is None or dev.cc != "9.0":
        raise SystemExit("dev/perf: kernel %s issues wgmma (sm_90a only); device %s has no wgmma_attention_fraction "
                         "(devices.json)" % (launch.name, dev.key))
    scale = S.B * S.NH
    flops = sl["wgmma_flops"] * scale
    tma = sl.get("tma_bytes", 0) * scale
    if sl.get("dram_read_sectors") or sl.get("dram_write_sectors"):
        io = (sl.get("dram_read_sectors", 0) * 32 * scale, sl.get("dram_write_sectors", 0) * 32 * scale)
    else:
        io = kc.attention_io(S, launch.name)
        if io is None:
            raise SystemExit("dev/perf: kernel %s issues wgmma but the emulator gave no DRAM sectors and it is not one of "
                             "the attention kernels the model knows" % launch.name)
    threads = sl.get("block") or 128
    per_head = max(1, sl.get("grid") or kc.cdiv(S.T, 64))
    res = wgmma_resources(counts, dev, launch.name, S)
    o = occ.occupancy(dev.limits, threads, res["regs"], res["smem"] + sl.get("dyn_smem", 0))
    slots = max(1, o["blocks_per_sm"]) * dev.sms
    blocks = list(range(per_head, 0, -1)) * scale  # heaviest first (the causal diagonal), in units of tiles
    key = (launch.name, "wgmma", S.B, S.T, S.NH, slots, per_head)
    if key not in _TAILS:
        _TAILS[key] = makespan(blocks, slots) / (sum(blocks) / slots)
    tail = _TAILS[key]
    cost = kc.Cost(len(blocks), threads, read=io[0], write=io[1], tc_flops=flops, stream="read",
                   note="wgmma + TMA: %.3g FLOPs, %.3g TMA bytes per (b,h)" % (sl["wgmma_flops"], sl.get("tma_bytes", 0)))
    phases = {
        "tensor cores (wgmma)": flops / (dev.tc * dev.wgmma_att),
        "TMA from L2": tma / dev.l2_read_bw,
        "memory": cost.dram / (dev.bw * dev.bw_best("read")),
    }
    bound = max(phases, key=phases.get)
    fill = 0.0 if sl.get("persistent") else (math.ceil(len(blocks) / slots) - 1) * dev.chain_latency
    if not CAUSES["wgmma_calibrated"]:  # the mutant: wgmma at the dense peak, as a datasheet would have it
        phases["tensor cores (wgmma)"] = flops / dev.tc
        bound = max(phases, key=phases.get)
    parts = {bound: phases[bound] * tail + fill, "launch": dev.launch}
    t, bound = pick(parts)
    r = Result(launch, t, bound, parts, cost, res, o)
    r.phases, r.tail, r.l2_bytes = phases, tail, tma
    return r


def kernel_result(launch, S, dev, counts):
    sl = counts.get("attention_slice", {}).get(launch.name)
    if sl and sl.get("wgmma_flops", 0) > 0:
        if CAUSES["att90_chain"] and launch.name in step_counts.ATT90_KERNELS:
            return att90_result(launch, S, dev, sl, counts)
        return wgmma_result(launch, S, dev, sl, counts)
    if sl and sl["mma_flops"] > 0:
        return tensor_core_result(launch, S, dev, sl, counts)
    if not any(launch.name in fns for fns in kc.VERSIONS.values()):
        raise SystemExit("dev/perf: no cost model for kernel %s: it needs the emulator's counters (EMU_COUNTERS, "
                         "branch emu-check) or a function in dev/perf/kernel_costs.py" % launch.name)
    header = kc.header_of(launch.name)
    have = counts.get("headers", {}).get(header)
    fn = kc.cost_function(launch.name, have) # the function derived for this version of the header
    if header is None or fn is None:
        raise SystemExit("dev/perf: kernel %s: its cost in dev/perf/kernel_costs.py was derived from %s at %s, and this "
                         "tree's %s differs (sha256 %s): derive it again from the new code (and record the fingerprint), "
                         "or give the model the emulator's counters for it" % (
                             launch.name, header, "/".join(kc.DERIVED_FROM.get(header, {}).values()) or "no version",
                             header, have))
    cost = fn(S, launch.ctx)
    if launch.name == "fused_classifier_streamed_kernel" and cost.dyn_smem + 2 * 32 * 8 > dev.limits["max_shared_per_block"]:
        # the launcher's fallback where two rows do not fit a block's shared memory (classifier_streamed_fits:
        # A100's 163 KB; the trace comes from the emulator, which has an H100's 227 KB): the held kernel
        fallback = Launch("kernel", "fused_classifier_kernel", launch.phase, launch.ctx)
        return memory_kernel_time(fallback, kc.cost_function(fallback.name, have)(S, launch.ctx),
                                  resources_for(counts, dev, fallback.name, S), dev)
    res = resources_for(counts, dev, launch.name, S, template=launch.ctx.get("template"))
    return memory_kernel_time(launch, cost, res, dev)


def memory_kernel_time(launch, cost, res, dev, parts_extra=None):
    """The time of a launch of one of our CUDA-core kernels: the largest of its FP32 instructions,
    its shared-memory wavefronts, its DRAM bytes at the bandwidth its bytes in flight reach (plus
    the local-memory traffic of ptxas' stack frame, at the L2's bandwidth), the serial chain a block
    waits through (dependent DRAM round trips and block-wide barriers) once per wave of blocks, the
    longest single-thread chain, and a launch. Memory time and FP32 time are stretched by the last
    wave's idle SMs (wave tail)."""
    o = occ.occupancy(dev.limits, cost.block, res["regs"], res["smem"] + cost.dyn_smem)
    slots = o["blocks_per_sm"] * dev.sms
    # an SM works through its share of the blocks at its own rate: the busiest SM has ceil(grid/SMs)
    balance = math.ceil(cost.grid / dev.sms) / (cost.grid / dev.sms)
    waves = cost.grid / slots
    if getattr(cost, "persistent", False):
        # a persistent grid (kernel_costs.Cost.persistent): min(items, slots) blocks, one wave, each
        # walking ceil(items / blocks) items at most (the busiest block sets the balance), its chain
        # its first item's round trips and one item's barriers per item it walks
        items = cost.grid
        blocks = min(items, slots)
        per_block = math.ceil(items / blocks)
        balance = per_block / (items / blocks)
        cost = copy.copy(cost)
        cost.grid, cost.block_barriers = blocks, cost.block_barriers * per_block
        waves = blocks / slots
    # the last wave's slots partly idle (a grid of less than one wave: the curve's bytes in flight
    # already count only its resident threads)
    tail = math.ceil(waves) / waves if CAUSES["wave_tail"] and waves > 1 else 1.0
    resident_threads = min(cost.grid, slots) * cost.block
    from_source = cost.inflight is not None and CAUSES["inflight_from_source"]
    per_thread = cost.inflight if from_source else (res.get("load_bytes") or 2)
    inflight = resident_threads * per_thread
    # IEEE special functions (no --use_fast_math): instruction sequences, kc.IEEE_INSTRUCTIONS each
    instr = sum(kc.IEEE_INSTRUCTIONS[k] * n for k, n in cost.ieee.items()) if CAUSES["ieee"] else 0
    # ptxas' stack frame: stored by every thread that runs (AdamW's tensor table, 27 st.local at the
    # kernel's entry), the stores going out to L2 (a frame per thread for 2,048 threads is 224 KB, the
    # L1's size); its reads back hit L1 and are not charged
    stack = res.get("stack", 0) if cost.charge_stack and CAUSES["stack_charge"] else 0
    # a launch whose tensors sit in L2 (a bench row's repeats on a footprint the L2 holds: bench_predictions):
    # its round trips are L2 round trips, and its bytes come at the L2's rate where its bytes in flight
    # over that shorter round trip reach it (Little's law), else the DRAM curve's
    l2 = launch.ctx.get("l2_resident", False)
    trip = dev.chain_latency * (dev.l2_latency_ratio if l2 else 1.0)
    chain = cost.block_trips * trip + cost.block_barriers * dev.barrier if CAUSES["block_chain"] else 0.0
    local_bytes = stack * cost.grid * cost.block
    rate = dev.bw * dev.bw_fraction(cost.stream, inflight)
    if l2:
        rate = max(rate, min(dev.l2_read_bw, inflight / (dev.latency * dev.l2_latency_ratio)))
    dram = cost.dram / rate * tail if cost.dram else 0.0
    parts = {
        "compute": (cost.cc_flops / dev.fp32 + instr / (dev.fp32 / 2)) * balance,
        "shared memory": cost.smem_wavefronts * 128 / (dev.sms * dev.clock * dev.smem_bpc) * balance,
        "memory": dram + local_bytes / dev.local_bw,
        "latency": max(cost.serial_trips * trip,
                       (math.ceil(waves) if CAUSES["wave_tail"] else max(1.0, waves)) * chain),
        "launch": dev.launch,
    }
    if getattr(cost, "serial_phases", False) and o["blocks_per_sm"] == 1 and CAUSES["serial_phases"]:
        # one resident block per SM, whose code loads all, computes, then stores: nothing overlaps
        # the phases (kernel_costs.Cost.serial_phases)
        parts["memory + compute (1 block/SM)"] = parts["memory"] + parts["compute"]
    if parts_extra:
        parts.update(parts_extra)
    t, bound = pick(parts)
    r = Result(launch, t, bound, parts, cost, res, o)
    r.local_bytes = local_bytes
    return r


def gemm_result(launch, S, dev):
    m, n, k = launch.ctx["m"], launch.ctx["n"], launch.ctx["k"]
    flops = 2.0 * m * n * k
    # output tiles of 128 x 128 spread over the SMs in waves (gemm-waves): a last partial wave
    # leaves SMs idle. A product with a long k (the weight gradients, k = B*T) can be split along k
    # (cuBLASLt's split-k/stream-k, for which matmul.cuh gives it a 32 MB workspace); the model
    # assumes the heuristic picks the split into chunks of >= 1024 that fills the waves best. Both
    # are assumptions the first GPU run checks (test_kernels --bench, the matmul rows).
    tiles = kc.cdiv(m, 128) * kc.cdiv(n, 128)
    wave_use = 0.0
    for split in range(1, max(1, k // 1024) + 1 if k >= 4096 else 2):
        waves = tiles * split / dev.sms
        wave_use = max(wave_use, waves / math.ceil(waves))
    # the GELU epilogues (issue 30 item 2) move one more m x n matrix inside the product: GELU_AUX*
    # writes the GELU input beside D, DGELU reads it. Their arithmetic (a tanhf per element, ~20
    # operations, against 2k tensor-core FLOPs per element) is taken as hidden under the MMA: an
    # assumption (llm.c fuses GELU only on H100+, having found cuBLASLt's fused GELU slower on
    # Ampere/Ada), unmeasured until a GPU runs this tree.
    # BGRADB (the bias gradient of the dweight product) sums the B operand the product reads
    # anyway and writes n elements: priced as those n elements, its adds taken as hidden too.
    aux = m * n if launch.ctx.get("aux") else n if launch.ctx.get("bgradb") else 0
    nbytes = (m * k + k * n + m * n * (2 if launch.ctx["accumulate"] else 1) + (m if launch.ctx["bias"] else 0) + aux) * kc.X
    for flag in launch.ctx.get("epilogue", []):
        if flag not in GEMM_EPILOGUES:
            raise SystemExit("dev/perf: a cuBLASLt product with epilogue '%s', which dev/perf/perf_model.py's GEMM_EPILOGUES "
                             "does not price: add its bytes (and what it costs the product) there" % flag)
        nbytes += GEMM_EPILOGUES[flag](m, n, k)
    parts = {
        "compute": flops / (dev.tc * dev.gemm_eff * wave_use),
        "memory": nbytes / (dev.l2_read_bw if launch.ctx.get("l2_resident") else dev.bw * dev.bw_best("triad")),
        "launch": dev.launch,
    }
    t, bound = pick(parts)
    r = Result(launch, t, bound, parts)
    r.flops, r.bytes, r.wave_use = flops, nbytes, wave_use
    r.split = splitk_factor(m, n, k, dev)
    return r


# cuBLASLt epilogues beyond the bias (issue 30 item 2, helper epilogue prices them): flag as the
# emulator's trace prints it -> the DRAM bytes it adds to the product (m x n output, column-major as
# cuBLASLt sees it), e.g. GELU_AUX_BIAS's pre-activation written beside D: m n bf16. The product's
# compute is taken as unchanged (an epilogue runs on the output tile in registers); an epilogue
# measured to slow the product needs a term in gemm_result, not here.
GEMM_EPILOGUES = {}


def splitk_factor(m, n, k, dev):
    """cuBLASLt's split along k, as the H200's ncu shows it choosing (dev/perf/measured/h200_2026-11-28:
    the weight gradients of qkv, attproj, fc and fcproj at k = B*T run as splitK kernels of about one
    wave of CTAs, each followed by a splitKreduce kernel; the lm head's, whose output already fills
    the SMs, is not split): a product with a long k (>= 4096) whose 192 x 192 output tiles number
    fewer than the SMs is split into SMs // tiles parts."""
    tiles = kc.cdiv(m, 192) * kc.cdiv(n, 192)
    if k < 4096 or tiles >= dev.sms:
        return 1
    return max(2, dev.sms // tiles)


REDUCE_RES = {"regs": 32, "smem": 0, "stack": 0, "spill_stores": 0, "spill_loads": 0}


def splitk_reduce_result(g, S, dev):
    """cuBLASLt's splitKreduce kernel after a split product: reads the split fp32 partials of the
    m x n output and the bf16 C it accumulates into (beta = 1), writes the bf16 D; 512-thread blocks
    of 8 elements per thread, as ncu shows (grids 96 x 6 and 24 x 22-24 of 512 threads at m n =
    2.4M and 1.8M elements)."""
    m, n, s = g.launch.ctx["m"], g.launch.ctx["n"], g.split
    mn = m * n
    launch = Launch("kernel", "splitKreduce_kernel", g.launch.phase, {"split": s, "m": m, "n": n,
                                                                      "l2_resident": g.launch.ctx.get("l2_resident", False)})
    # perfmodel (issue 29's known misses): the grid is about one wave whatever the output's size, as
    # ncu shows it (the H200 fixture, 48 launches: 96 x 6, 24 x 24 and 24 x 24 blocks of 512 threads
    # at m n = 2.36M, 1.77M and 0.59M elements, 24 x 22 once at 2.36M), so a thread's share of the
    # elements, not the grid, grows with the output; 576 blocks per 132 SMs, scaled by SMs elsewhere
    # (an assumption: only the H200 was measured). At 4 blocks of 512 threads per SM that is 1.09
    # waves: the second, 48-block wave's idle slots stretch the memory time (wave_tail), as the
    # 528-block launch (13.1 us) against the 576-block ones of the same size (19.2 us) shows.
    if CAUSES["splitk_reduce_one_wave"]:
        grid = max(1, round(REDUCE_GRID_PER_SM * dev.sms))
    else:  # before: 8 elements per thread, a grid that grows with m n
        grid = kc.cdiv(mn, 512 * 8)
    per_thread = kc.cdiv(mn, grid * 512)
    cost = kc.Cost(grid, 512, read=s * mn * 4 + mn * kc.X, write=mn * kc.X, stream="triad",
                   inflight=min(per_thread, 8) * 4 * s, block_trips=2, note="split %d, %d elements per thread" % (s, per_thread))
    return memory_kernel_time(launch, cost, REDUCE_RES, dev)


# cuBLASLt's splitKreduce grid on the H200 (ncu, dev/perf/measured/h200_2026-11-28: 576 blocks of 512
# threads in 36 of its 48 launches, 528 in 12), per SM: MEASURED there, assumed for other cards
REDUCE_GRID_PER_SM = 576 / 132


BGRADB_KERNEL = "epilogue::globalKernelBgradAB_v2"


def bgradb_epilogue_result(g, S, dev):
    """cuBLASLt's BGRADB epilogue on sm_90 (the bias gradient of the dweight product, issue 30 item
    2): not folded into the product's tiles as the model assumed, but a kernel of its own after it,
    as the H200's ncu shows (dev/perf/measured/h200_2026-11-28_1f4c85f: 48 launches of
    epilogue::globalKernelBgradAB_v2 per step, one per BGRADB product, 2.15 ms at B=32), which reads
    the product's B operand, dout (k = B*T rows of n = OC bf16 columns), once more from DRAM and
    writes the n sums. Its grid as ncu shows it: n / 8 blocks of 1024 threads (96, 288 and 384 at OC
    = 768, 2304, 3072): a block per 8 columns (one 16-byte pack of a row), its 1024 threads walking
    the rows, one pack each in flight (cuBLASLt's code is not ours to read: the in-flight bytes are
    the least the grid allows, an assumption). A grid below one wave of the SMs' slots (96 blocks at
    OC = 768) keeps fewer bytes in flight, which the curve prices."""
    m, n, k = g.ctx["m"], g.ctx["n"], g.ctx["k"]
    launch = Launch("kernel", BGRADB_KERNEL, g.phase, {"n": n, "k": k, "l2_resident": g.ctx.get("l2_resident", False)})
    cost = kc.Cost(kc.cdiv(n, 8), 1024, read=k * n * kc.X, write=n * kc.X, stream="read", inflight=16, block_trips=1,
                   note="dout %d x %d read again" % (k, n))
    return memory_kernel_time(launch, cost, BGRADB_RES, dev)


BGRADB_RES = dict(REDUCE_RES, smem=8192)  # ncu: 32 registers, 8 KB of static shared memory per block


def copy_result(launch, S, dev):
    b = launch.ctx["bytes"]
    if launch.kind == "memset":  # a driver kernel of wide stores: the best of the write-heavy curve
        parts = {"memory": b / (dev.bw * dev.bw_best("scale")), "launch": dev.launch}
    else:  # host <-> device over PCIe, plus one DRAM latency for the round trip
        parts = {"pcie": b / dev.pcie + dev.latency, "launch": dev.launch}
    t, bound = pick(parts)
    r = Result(launch, t, bound, parts)
    r.bytes = b
    return r


def predict_launches(launches, S, dev, counts, graph=False):
    out = predict_kernels(launches, S, dev, counts)
    # the time between launches (host and driver), once per kernel launch (ours, cuBLASLt's and its
    # split-k reduce; not the memsets and copies): devices.json launch_gap_us
    for r in out:
        r.gap = launch_gap(r.launch, dev) if r.launch.kind in ("kernel", "gemm") and CAUSES["launch_gap"] else 0.0
    if graph and CAUSES["launch_gap"]:
        price_graph(out, dev)
    return out


def launch_gap(launch, dev):
    """The time between this launch and the one before it on the stream: the trainer's measured gap
    (devices.json launch_gap_us), or, for a launch replayed from a CUDA graph (the trace marks it,
    step_counts.parse_op), the graph's gap (graph_gap_us: on the H200 MEASURED equal to the plain gap; the model
    stops where a card has none)."""
    if not launch.ctx.get("graph"):
        return dev.launch_gap
    if dev.graph_gap is None:
        raise SystemExit("dev/perf: the step launches kernels from a CUDA graph, and devices.json's %s has no "
                         "graph_gap_us value: give it one (measured, or cited with its source)" % dev.key)
    return dev.graph_gap


def in_graph(launch):
    """Whether the trainer's -cg 1 launches this one from its CUDA graph (train_gpt2.cu,
    gpt2_train_micro_step): the forward and the backward, all but the encoder backward (host buckets,
    a grid per batch), which runs after the graph with the losses' copy; the update is outside."""
    return launch.phase in ("forward", "backward") and not launch.name.startswith("encoder_backward")


def price_graph(results, dev):
    """-cg 1: the graph's kernels follow each other with devices.json graph_gap_us between them
    (on the H200 the measured -cg 1 step gained nothing: the same as launch_gap_us), and the graph's launch (one
    cudaGraphLaunch per micro-step; the traced step has one) costs one plain launch gap before its
    first kernel."""
    first = True
    for r in results:
        if r.launch.kind in ("kernel", "gemm") and in_graph(r.launch):
            r.gap = dev.launch_gap if first else dev.graph_gap
            first = False


def predict_kernels(launches, S, dev, counts):
    out = []
    for l in launches:
        if l.kind == "kernel":
            out.append(kernel_result(l, S, dev, counts))
        elif l.kind == "gemm":
            out.append(gemm_result(l, S, dev))
            if out[-1].split > 1 and CAUSES["splitk_reduce"]:
                out.append(splitk_reduce_result(out[-1], S, dev))
            if l.ctx.get("bgradb") and CAUSES["bgradb_kernel"]:
                out.append(bgradb_epilogue_result(l, S, dev))
        else:
            out.append(copy_result(l, S, dev))
    return out


# ----------------------------------------------------------------------------
# 4. the step: per-kernel rows, ms/step, tokens/s, MFU

def flops_per_token(S):
    """llm.c's and train_gpt2.cu's: 6 N + 6 L C T (llmc-mfu in devices.json)."""
    return 6.0 * num_parameters(S) + 6.0 * S.L * S.C * S.T


def summarize(results, S, dev):
    rows = OrderedDict()
    for r in results:
        key = r.launch.name
        row = rows.setdefault(key, {"launches": 0, "ms": 0.0, "tc_gflop": 0.0, "cc_gflop": 0.0, "dram_mb": 0.0,
                                    "smem_mwf": 0.0, "bounds": Counter(), "occ": None, "regs": None, "spills": 0,
                                    "phase": r.launch.phase})
        row["launches"] += 1
        row["ms"] += r.time * 1e3
        row["bounds"][r.bound] += r.time
        if r.launch.kind == "gemm":
            row["tc_gflop"] += r.flops / 1e9
            row["dram_mb"] += r.bytes / 1e6
        elif r.launch.kind == "kernel":
            row["cc_gflop"] += r.cost.cc_flops / 1e9
            row["tc_gflop"] += r.cost.tc_flops / 1e9
            row["dram_mb"] += r.cost.dram / 1e6
            row["smem_mwf"] += r.cost.smem_wavefronts / 1e6
            if r.occ is not None:
                row["occ"] = "%d/%d" % (r.occ["blocks_per_sm"], r.occ["warps_per_sm"])
            if r.res is not None:
                row["regs"] = r.res["regs"]
                row["spills"] = r.res["spill_stores"] + r.res["spill_loads"]
        else:
            row["dram_mb"] += r.bytes / 1e6
    kernels = sum(1 for r in results if r.launch.kind in ("kernel", "gemm"))
    gaps = sum(r.gap for r in results)
    kernel_time = sum(r.time for r in results)
    step = kernel_time + gaps
    tokens = S.BT
    mfu = flops_per_token(S) * tokens / step / dev.tc
    attention = sum(row["ms"] for k, row in rows.items() if k.startswith("attention_")) / 1e3
    phases = Counter()
    for r in results:
        phases[r.launch.phase] += r.time
    return {"rows": rows, "step_s": step, "kernel_s": kernel_time, "gaps_s": gaps, "kernel_launches": kernels, "tokens_per_s": tokens / step, "mfu": mfu, "attention_s": attention,
            "phases": dict(phases), "launches": len(results)}


def fmt_row_table(summary, title):
    lines = ["", "### %s" % title, "",
             "| kernel | launches | TC GFLOP | CUDA-core GFLOP | DRAM MB | smem Mwavefr. | bank conflicts | blocks/warps per SM | regs (spills) | bound | ms | % step |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|"]
    total = summary["step_s"] * 1e3
    for name, r in sorted(summary["rows"].items(), key=lambda kv: -kv[1]["ms"]):
        bound = r["bounds"].most_common(1)[0][0]
        regs = "" if r["regs"] is None else "%d (%d)" % (r["regs"], r["spills"])
        # today's kernels: every shared access is derived conflict-free (consecutive words, or one
        # word broadcast); tensor-core kernels: not counted until the emulator's shared counters land
        conflicts = "" if r["smem_mwf"] == 0 else ("n/a" if r["tc_gflop"] > 0 else "0")
        lines.append("| %s | %d | %.1f | %.1f | %.0f | %.1f | %s | %s | %s | %s | %.2f | %.1f |" % (
            name, r["launches"], r["tc_gflop"], r["cc_gflop"], r["dram_mb"], r["smem_mwf"], conflicts, r["occ"] or "", regs,
            bound, r["ms"], 100 * r["ms"] / total))
    return lines


def fmt_step(summary, S, dev, label):
    s = summary
    return ("%s: %.1f ms/step, %.0f tokens/s, MFU %.1f%% (attention %.1f ms = %.0f%% of the step; forward %.1f, "
            "backward %.1f, update %.1f ms; %d launches)" % (
                label, s["step_s"] * 1e3, s["tokens_per_s"], 100 * s["mfu"], s["attention_s"] * 1e3,
                100 * s["attention_s"] / s["step_s"], s["phases"].get("forward", 0) * 1e3,
                s["phases"].get("backward", 0) * 1e3, s["phases"].get("update", 0) * 1e3, s["launches"]))


def fmt_zero(devices, dev, S, launches, results, label, counts_label, N=8):
    """The step at ZeRO stages 0-3 on N GPUs of this kind, over NVLink and over the network."""
    import zero_step
    lines = ["", "### %s (%s): ZeRO stages on %d x %s, B=%d per GPU (predicted)" % (label, counts_label, N, dev.name, S.B), "",
             "| stage | network | collectives RS/AG | bus MB/step | comm ms | exposed ms | hidden | step ms | tokens/s (all GPUs) | MFU |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    nets = [("NVLink", {"reduce_scatter": dev.nvlink["reduce_scatter"] * 1e9, "all_gather": dev.nvlink["all_gather"] * 1e9})]
    ib = v(devices["networks"]["ib-2x200"]["busbw_gb_s"]) * 1e9
    nets.append(("2x200 Gb/s", {"reduce_scatter": ib, "all_gather": ib}))
    for stage in (0, 1, 2, 3):
        for net, busbw in nets:
            z = zero_step.zero_step(results, S, dev, stage, N, busbw)
            hidden = 1 - z["exposed_s"] / z["comm_s"] if z["comm_s"] > 0 else 1.0
            mfu = flops_per_token(S) * S.BT / z["step_s"] / dev.tc
            lines.append("| %d | %s | %d/%d | %.0f | %.2f | %.2f | %.0f%% | %.1f | %.0f | %.1f%% |" % (
                stage, net, z["rs_calls"], z["ag_calls"], (z["rs_bytes"] + z["ag_bytes"]) / 1e6, z["comm_s"] * 1e3,
                z["exposed_s"] * 1e3, 100 * hidden, z["step_s"] * 1e3, N * S.BT / z["step_s"], 100 * mfu))
    return lines


def shape_for(counts, B, T):
    """The config of the traced model ('d12': GPT-2 124M) at batch B x T, with the data's buckets."""
    sizes = data_bucket_sizes(B, T)
    cfg = kc.config_for_depth(int(counts["trace"]["model"][1:]))
    S = kc.Shape(B, T, distinct_tokens=len(sizes), max_bucket=max(sizes), bucket_sizes=sizes, **cfg)
    S.defines = counts.get("defines") or {}  # the tree's header constants (step_counts.header_defines)
    return S


def predict(counts, dev, B, T, graph=False):
    S = shape_for(counts, B, T)
    launches = expand_step(counts, S)
    results = predict_launches(launches, S, dev, counts, graph)
    return S, launches, results, summarize(results, S, dev)


# ----------------------------------------------------------------------------
# the rows of `dev/cuda/test_kernels --bench`, predicted, for dev/gpu_check.sh to put beside the
# measured ones (join_measured.py). Each row is a launcher of llmc/ at the bench's shape, as
# bench_*() in test_kernels.cu call it, made of the launches the launcher makes (llmc/*.cuh); a row
# whose kernels the tree's step no longer launches is left out (its launcher changed).

BENCH_MATMULS = [("qkv", 1, 3, True), ("attproj", 1, 1, True), ("fc", 1, 4, True), ("fcproj", 4, 1, True), ("lm head", 1, None, False)]


def bench_rows(S, traced=()):
    """{row name: [Launch]} as test_kernels --bench names its rows; traced: the kernels the tree's
    step launches, which say which version of a row's launcher the tree has."""
    K = lambda name, **ctx: Launch("kernel", name, "bench", ctx)  # noqa: E731
    G = lambda m, n, k, bias=False, acc=False, bgradb=False: Launch("gemm", "cublasLt", "bench", {  # noqa: E731
        "m": m, "n": n, "k": k, "bias": bias, "accumulate": acc, "bgradb": bgradb})
    BT, C = S.BT, S.C
    rows = OrderedDict()
    rows["encoder_forward"] = [K("encoder_forward_kernel")]
    rows["encoder_backward (incl. host bucket sort)"] = [Launch("memcpy", "cudaMemcpyAsync", "bench", {"bytes": 4 * (3 * BT + 1)}),
                                                         K("encoder_backward_dwte_kernel"), K("encoder_backward_dwpe_kernel")]
    rows["layernorm_forward"] = [K("layernorm_forward_kernel", fused=False)]
    rows["fused_residual_layernorm_forward"] = [K("layernorm_forward_kernel", fused=True)]
    if "layernorm_backward_warp_kernel" in traced:  # issue 30: a warp per chunk, then the column sums
        rows["layernorm_backward"] = [K("layernorm_backward_warp_kernel"), K("layernorm_backward_dweight_kernel")]
    elif "layernorm_backward_kernel" in traced:  # issue 22: one pass, then the column sums
        rows["layernorm_backward"] = [K("layernorm_backward_kernel"), K("layernorm_backward_dweight_kernel")]
    else:
        rows["layernorm_backward"] = [K("layernorm_backward_dinp_kernel"), K("layernorm_backward_dweight_partial_kernel"),
                                      K("layernorm_backward_dweight_finish_kernel")]
    for name, cin, cout, bias in BENCH_MATMULS:
        Kin, OC = cin * C, (cout * C if cout else S.Vp)
        rows["matmul_forward %s (%d->%d)" % (name, Kin, OC)] = [G(OC, BT, Kin, bias)]
        if "dbias_add_kernel" in traced:  # issue 30 item 2 (llmc/matmul.cuh): BGRADB on the dweight product, then the add
            back = [G(Kin, BT, OC), G(Kin, OC, BT, acc=True, bgradb=bias)] + ([K("dbias_add_kernel", OC=OC)] if bias else [])
        else:
            back = [G(Kin, BT, OC), G(Kin, OC, BT, acc=True)]
            if bias:
                back += [K("dbias_partial_kernel", OC=OC), K("dbias_finish_kernel", OC=OC)]
        rows["matmul_backward %s (%d->%d)" % (name, Kin, OC)] = back
    if "attention_forward_sm90_kernel" in traced:
        # attmodel (issue 29): test_kernels leaves attention_sm90_mode at -1, so a build with sm_90a
        # code on a compute capability 9.0 card benches the sm_90a kernels (a tree traced with -ak 1
        # stands for that build: fixtures.compare)
        rows["attention_forward"] = [K("attention_forward_sm90_kernel")]
        rows["attention_backward"] = [K("attention_backward_rowdot_kernel"), K("attention_backward_dkdv_sm90_kernel"),
                                      K("attention_backward_dq_reduce_kernel")]
    else:
        rows["attention_forward"] = [K("attention_forward_kernel")]
        rows["attention_backward"] = [K("attention_backward_rowdot_kernel"), K("attention_backward_dkdv_kernel"),
                                      K("attention_backward_dq_kernel")]
    # issue 30 item 2: attention_backward also adds the qkv bias gradient (its kernels take the
    # partials as they write dqkv; a tree whose kernels did not read dqkv back for them)
    for k in ("attention_dbias_partials_kernel", "attention_dbias_reduce_kernel"):
        if k in traced:
            rows["attention_backward"].append(K(k))
    rows["gelu_forward"] = [K("gelu_forward_kernel")]
    rows["gelu_backward"] = [K("gelu_backward_kernel")]
    rows["fused_classifier (loss + dlogits)"] = [K("fused_classifier_streamed_kernel" if "fused_classifier_streamed_kernel"
                                                   in traced else "fused_classifier_kernel")]
    n = num_parameters(S)
    rows["adamw_update (124M params)"] = [K("adamw_kernel", n=n)]
    rows["global_norm_squared (124M params)"] = [K("global_norm_partial_kernel", n=n), K("global_norm_finish_kernel", n=n)]
    return rows


def bench_predictions(counts, dev, B, T):
    """{row: predicted ms} at test_kernels --bench's shape: its tokens are uniform random over V, so
    the encoder's buckets are those of B*T draws (expected distinct V (1 - (1 - 1/V)^BT), the
    largest bucket a handful: 8)."""
    cfg = kc.config_for_depth(int(counts["trace"]["model"][1:]))
    V, BT = cfg["V"], B * T
    S = kc.Shape(B, T, distinct_tokens=int(V * (1 - (1 - 1 / V) ** BT)), max_bucket=8, **cfg)
    S.defines = counts.get("defines") or {}
    traced = {op["name"] for op in counts["step_ops"] if op["op"] == "kernel"}
    out = OrderedDict()
    rows = bench_rows(S, traced)
    for row, launches in rows.items():
        if any(l.kind == "kernel" and l.name not in traced for l in launches):
            continue
        # test_kernels' median_ms: 3 untimed calls, then 20 calls each between two cudaEvents, on the
        # same buffers. (1) A row whose buffers fit the L2 (bench_footprint <= the published full-rate
        # footprint) finds them there from the previous call: no cache flush between calls.
        fits = CAUSES["bench_l2_resident"] and dev.l2_resident is not None and bench_footprint(row, S) <= dev.l2_resident
        for l in launches:
            l.ctx["l2_resident"] = fits
        res = predict_launches(launches, S, dev, counts)
        # (2) the start event is recorded on an idle GPU and the row's first launch reaches it one
        # host launch gap later; launch() enqueues the row's other launches at once, and they queue
        # behind the first on the stream, each at least a launch (launch_us) apart: one gap per row,
        # where the trainer's step pays one per launch (its host work between launches)
        gaps = [r.gap for r in res]
        if CAUSES["bench_queued_launches"]:
            first = next((k for k, r in enumerate(res) if r.gap > 0), None)
            gaps = [g if k == first else 0.0 for k, g in enumerate(gaps)]
        out[row] = sum(r.time + g for r, g in zip(res, gaps)) * 1e3
    return out


def bench_footprint(row, S):
    """The bytes of device memory a test_kernels --bench row touches (each buffer once, in-place ones
    once), from bench_*() in dev/cuda/test_kernels.cu: what must sit in L2 for its repeats to hit."""
    BT, C, X = S.BT, S.C, kc.X
    btc = BT * C * X
    table = {
        "encoder_forward": btc + (S.D + S.T) * C * X + 4 * BT,                       # out, wte rows used, wpe, tokens
        "encoder_backward (incl. host bucket sort)": btc + (S.D + S.T) * C * X + 4 * (4 * BT + 1),
        "layernorm_forward": 2 * btc + BT * 8 + 2 * C * X,                            # inp, out, mean/rstd
        "fused_residual_layernorm_forward": 4 * btc + BT * 8 + 2 * C * X,            # inp1, inp2, residual, out
        "layernorm_backward": 3 * btc + BT * 8 + 4 * C * X + kc.cdiv(BT, kc.define(S, "LAYERNORM_BWD_ROWS")) * 2 * C * 4,  # dout, inp, dinp, scratch
        "attention_forward": 4 * btc + S.B * S.NH * S.T * 4,                          # qkv, out, lse
        "attention_backward": 8 * btc + 2 * S.B * S.NH * S.T * 4,                     # qkv, out, dout, dqkv, lse, D
        "gelu_forward": 2 * 4 * btc, "gelu_backward": 2 * 4 * btc,
    }
    if row in table:
        return table[row]
    for name, cin, cout, _ in BENCH_MATMULS:
        Kin, OC = cin * C, (cout * C if cout else S.Vp)
        if row.startswith("matmul_forward %s " % name):
            return (BT * Kin + Kin * OC + BT * OC) * X
        if row.startswith("matmul_backward %s " % name):
            return (2 * BT * Kin + 2 * Kin * OC + BT * OC) * X + (4 * OC if cout else 0) + 64 * OC * 4
    return float("inf")  # the classifier's logits, AdamW's and the norm's 124M parameters: far beyond any L2


def fmt_compare(before, after):
    """Before and after, kernel by kernel: launches and predicted ms."""
    (sb, lb), (sa, la) = before, after
    lines = ["", "### Before (%s) and after (%s), kernel by kernel (predicted ms per step)" % (lb, la), "",
             "| kernel | before: launches | ms | bound | after: launches | ms | bound |", "|---|---:|---:|---|---:|---:|---|"]
    keys = list(OrderedDict.fromkeys(sorted(sb["rows"], key=lambda k: -sb["rows"][k]["ms"]) +
                                     sorted(sa["rows"], key=lambda k: -sa["rows"][k]["ms"])))
    for k in keys:
        cells = []
        for s in (sb, sa):
            r = s["rows"].get(k)
            cells += ["%d" % r["launches"], "%.2f" % r["ms"], r["bounds"].most_common(1)[0][0]] if r else ["-", "-", "-"]
        lines.append("| %s | %s |" % (k, " | ".join(cells)))
    lines.append("| **step** | %d | **%.1f** | MFU %.1f%% | %d | **%.1f** | MFU %.1f%% |" % (
        sb["launches"], sb["step_s"] * 1e3, 100 * sb["mfu"], sa["launches"], sa["step_s"] * 1e3, 100 * sa["mfu"]))
    return lines


def llmc_check(devices, counts, label):
    """The model against llm.c's published whole run (devices.json published_runs): GPT-2 124M on
    8 x A100 80GB SXM, B=64 per GPU, T=1024, ZeRO-1, ~300 ms per step."""
    import zero_step
    run = devices["published_runs"]["llmc-124m-8xa100"]
    dev = Device(devices, "a100-sxm-80gb")
    S, _, results, summ = predict(counts, dev, 64, 1024)
    busbw = {"reduce_scatter": dev.nvlink["reduce_scatter"] * 1e9, "all_gather": dev.nvlink["all_gather"] * 1e9}
    z = zero_step.zero_step(results, S, dev, 1, 8, busbw)
    gemm = sum(r.time for r in results if r.launch.kind == "gemm")
    step = v(run["step_ms"]) / 1e3
    mfu = flops_per_token(S) * S.BT / step / dev.tc
    att = summ["attention_s"]
    return ["", "### A check against a published whole run: llm.c, GPT-2 124M, 8 x A100 80GB SXM, B=64, T=1024, ZeRO-1", "",
            "- published: ~%d ms per step (llm.c scripts/run_gpt2_124M.sh: %d steps, %.1f min; discussion #481: "
            "~%d minutes, 'up to ~60%% MFU'); by this file's MFU formula that step is %.1f%% MFU." % (
                v(run["step_ms"]), v(run["steps"]), v(run["steps"]) * step / 60, v(run["total_minutes"]), 100 * mfu),
            "- the part of that step the model can represent, the same 147 cuBLASLt products (llm.c calls cuBLASLt with "
            "these shapes): predicted %.1f ms = %.0f%% of llm.c's step, i.e. the rest of llm.c's step (cuDNN attention, its "
            "own fused kernels, AdamW, NCCL) would take %.1f ms." % (gemm * 1e3, 100 * gemm / step, (step - gemm) * 1e3),
            "- our trainer (%s) in llm.c's setting, predicted: %.1f ms per step (%.1f%% MFU), attention %.1f ms of it; "
            "ZeRO-1's collectives %.1f ms, %.1f ms of them exposed." % (
                label, z["step_s"] * 1e3, 100 * flops_per_token(S) * S.BT / z["step_s"] / dev.tc, att * 1e3,
                z["comm_s"] * 1e3, z["exposed_s"] * 1e3),
            "- what the model cannot represent of llm.c: its kernels (cuDNN's flash attention, Packed128 GELU and "
            "layernorm, its fused classifier, a fused AdamW), which are not in this repository; only the shared cuBLASLt "
            "products are comparable, and they land below llm.c's measured step as they must (the model is not "
            "pessimistic about them by more than the whole remainder)."]


def main(argv=None):
    ap = argparse.ArgumentParser(description="predicted (not measured) GPU time of one training step, kernel by kernel")
    ap.add_argument("--device", default="h200", help="a key of devices.json: h200 (measured), h100-sxm, a100-sxm-80gb")
    ap.add_argument("--batch", type=int, default=32, help="B per GPU")
    ap.add_argument("--seq", type=int, default=1024, help="T")
    ap.add_argument("--baseline", default=BASELINE, help="git revision of 'before' (none: skip)")
    ap.add_argument("--after", default=None, help="git revision of 'after' (default: the working tree)")
    ap.add_argument("-r", "--recompute", type=int, default=0, help="the trainer's -r (the benchmark uses 0)")
    ap.add_argument("--json", default=None, help="also write the predictions here")
    ap.add_argument("--cuda-graph", action="store_true",
                    help="also price 'after' as the trainer's -cg 1 launches it (its forward and backward as one CUDA "
                         "graph; the time between a graph's kernels is devices.json graph_gap_us: on the H200 measured no shorter)")
    ap.add_argument("--attention", default="mma", choices=sorted(step_counts.ATTENTION),
                    help="the attention kernels of 'after', as the trainer's -ak picks them: mma (default, the "
                         "trainer's default -ak 0: the mma.sync kernels) or sm90 (-ak 1: the sm_90a wgmma/TMA kernels, "
                         "priced from their consumer loop: att90_chain, with wgmma_wait_ns FITTED on the forward); 'before' keeps mma")
    ap.add_argument("--no-zero", action="store_true", help="skip the ZeRO stages at N = 8")
    ap.add_argument("--no-llmc", action="store_true", help="skip the check against llm.c's published run")
    ap.add_argument("--bench-table", action="store_true",
                    help="only the rows of test_kernels --bench (at --batch), predicted, with an empty measured column "
                         "(the table dev/cuda/NOTES.md keeps)")
    a = ap.parse_args(argv)
    if a.batch < 1 or a.seq < 1 or a.seq > 1024:
        raise SystemExit("dev/perf: --batch must be >= 1 and --seq 1..1024 (GPT-2's maximum)")
    if a.recompute not in (0, 1, 2):
        raise SystemExit("dev/perf: -r must be 0, 1 or 2 (the trainer's recompute levels)")
    devices = load_devices()
    dev = Device(devices, a.device)
    if a.attention == "sm90" and dev.cc != "9.0":  # the trainer refuses -ak 1 there (train_gpt2.cu)
        raise SystemExit("dev/perf: --attention sm90: the sm_90a kernels run only on compute capability 9.0; %s is %s" % (
            dev.key, dev.cc))
    after = step_counts.counts_for(a.after, a.recompute, a.seq, attention=a.attention)
    after["label"] += ", -ak %d" % step_counts.ATTENTION[a.attention]
    if a.bench_table:
        pred = bench_predictions(after, dev, a.batch, a.seq)
        print("| kernel (test_kernels --bench, B=%d, T=%d) | predicted ms, %s | measured ms | measured / predicted |" % (
            a.batch, a.seq, dev.name))
        print("|---|---:|---:|---:|")
        for row, ms in pred.items():
            print("| %s | %.3f | | |" % (row, ms))
        return None
    before = None if a.baseline in ("none", "") else step_counts.counts_for(a.baseline, a.recompute, a.seq)
    print("# PREDICTED, not measured: GPT-2 124M, B=%d, T=%d, -r %d, one %s (%s, %d SMs, %.0f dense bf16 TFLOP/s, "
          "%.2f TB/s)" % (a.batch, a.seq, a.recompute, dev.name, dev.arch, dev.sms, dev.tc / 1e12, dev.bw / 1e12))
    print("Every figure below is the performance model's (dev/perf/README.md). Measured: one H200, 2026-11-28, twice: main at "
          "2ef5778, B=32: 73.0 ms/step (68.9 ms of kernels), and main at 1f4c85f: 66.5 ms/step (63.2 ms of kernels; -ak 1 "
          "64.7, -ak 1 -cg 1 64.5); the model is held to both, to B=64 and the B=8 benches, its misses listed "
          "(dev/perf/measured/, test_perf_model.py KNOWN_MISSES; `python3 dev/perf/fixtures.py` prints measured beside "
          "predicted).")
    out = {"device": dev.key, "B": a.batch, "T": a.seq, "recompute": a.recompute, "attention": a.attention, "trees": {}}
    summaries = {}
    for label, counts in (("before", before), ("after", after)):
        if counts is None:
            continue
        S, launches, results, summary = predict(counts, dev, a.batch, a.seq)
        summaries[label] = (S, launches, results, summary, counts["label"])
        out["trees"][label] = {"label": counts["label"], "step_ms": summary["step_s"] * 1e3,
                               "tokens_per_s": summary["tokens_per_s"], "mfu": summary["mfu"],
                               "kernels": {k: r["ms"] for k, r in summary["rows"].items()}}
    S, _, results, summary, label = summaries["after"]
    print("\n".join(fmt_row_table(summary, "after: %s, every kernel" % label)))
    if "before" in summaries:
        b = summaries["before"]
        print("\n".join(fmt_compare((b[3], b[4]), (summary, label))))
    print()
    for k in ("before", "after"):
        if k in summaries:
            print(fmt_step(summaries[k][3], summaries[k][0], dev, "%s (%s)" % (k, summaries[k][4])))
    if a.cuda_graph:
        g = predict(after, dev, a.batch, a.seq, graph=True)[3]
        print(fmt_step(g, S, dev, "after with -cg 1 (%s; between a graph's kernels %.1f us, devices.json "
                                  "graph_gap_us; time between kernels %.2f ms, plain %.2f ms)" % (
                                      label, dev.graph_gap * 1e6, g["gaps_s"] * 1e3, summary["gaps_s"] * 1e3)))
        out["trees"]["after_cuda_graph"] = {"label": label, "step_ms": g["step_s"] * 1e3, "gaps_ms": g["gaps_s"] * 1e3}
    if not a.no_zero:
        print("\n".join(fmt_zero(devices, dev, S, None, results, label="after", counts_label=label)))
    if not a.no_llmc and a.attention == "sm90":
        print("\n(the check against llm.c's published A100 run is skipped: -ak 1 cannot run on an A100)")
    elif not a.no_llmc:
        print("\n".join(llmc_check(devices, after, label)))
    print()
    print("MFU = (6 N + 6 L C T) x tokens / time / dense bf16 peak, N = %d parameters (llm.c's gpt2_estimate_mfu; "
          "train_gpt2.cu prints the same)." % num_parameters(S))
    if a.json:
        with open(a.json, "w") as fp:
            json.dump(out, fp, indent=1)
    return summaries, dev, a


if __name__ == "__main__":
    main()
