"""
Tests of the performance model (dev/perf), for `make test`: every count the model uses is checked
against exact theory or a published worked example, never against numbers the model printed
before, and each check is shown to fail on a deliberate mutant. No timing is asserted anywhere.

    /usr/bin/python3 dev/perf/test_perf_model.py        (~1-2 minutes on 2 cores, cold cache)

The step is traced on a small GPT-2 ('d2': L 2, C 128, the real vocabulary) so the emulator runs
in seconds; every identity below holds for any L and C, and the model traces GPT-2 124M ('d12')
through the same code.
"""
import concurrent.futures
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kernel_costs as kc  # noqa: E402
import occupancy as occ  # noqa: E402
import perf_model as pm  # noqa: E402
import step_counts  # noqa: E402
import zero_step  # noqa: E402

REPO = step_counts.REPO
passed = failed = 0


def check(ok, what, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print("OK   %s" % what)
    else:
        failed += 1
        print("FAIL %s %s" % (what, detail))


def mutant_caught(what, fn):
    """fn() returns True when the check it runs passes; on a mutant it must not."""
    try:
        ok = fn()
    except (SystemExit, Exception) as e:  # a mutant may also stop the model: caught all the same
        ok = False
        what += " (stopped: %s)" % str(e)[:80]
    check(not ok, "mutant caught: " + what)


devices = pm.load_devices()

# ----------------------------------------------------------------------------
# 1. the occupancy rules against the Best Practices Guide's worked example (compute capability 7.0)

lim70 = occ.limits_for(devices, "7.0")
a = occ.occupancy(lim70, 128, 37, 0)
b = occ.occupancy(lim70, 320, 37, 0)
check(a["blocks_per_sm"] == 12 and a["occupancy"] == 0.75,
      "occupancy: 128-thread blocks, 37 registers on 7.0 -> 12 blocks, 75% (Best Practices Guide)", str(a))
check(b["blocks_per_sm"] == 4 and int(b["occupancy"] * 100 + 0.5) == 63,
      "occupancy: 320-thread blocks, 37 registers on 7.0 -> 4 blocks, 63% (Best Practices Guide)", str(b))


def bpg_with(**changes):
    lim = dict(lim70, **changes)
    return occ.occupancy(lim, 128, 37, 0)["blocks_per_sm"] == 12 and occ.occupancy(lim, 320, 37, 0)["blocks_per_sm"] == 4


mutant_caught("occupancy without the 256-register allocation unit", lambda: bpg_with(register_alloc_unit=1))
mutant_caught("occupancy without the warp allocation granularity", lambda: bpg_with(warp_alloc_granularity=1))
# shared memory is a limit too: 9.0, 256 threads of 32 registers and 48 KB of shared memory: 228 KB
# fits 4 blocks of 48 KB + the 1 KB reservation (49 KB each: 196 KB), not 5 (245 KB)
c = occ.occupancy(occ.limits_for(devices, "9.0"), 256, 32, 48 * 1024)
check(c["blocks_per_sm"] == 4 and c["limiter"] == "shared memory", "occupancy: 48 KB blocks on 9.0 -> 4, shared memory", str(c))

# ----------------------------------------------------------------------------
# 2. the traced step: launches and cuBLASLt shapes against the model's structure

# the -ak 1 trace (section 3's) is made beside this one, in a second thread (each build and trace
# takes one core)
HAS_SM90 = step_counts.tree_uses_wgmma(REPO) and step_counts.emulator_has_counters(REPO)
_pool = concurrent.futures.ThreadPoolExecutor(1)
counts90_later = _pool.submit(step_counts.counts_for_tree, REPO, 0, "the working tree", model="d2", resources=False,
                              attention="sm90") if HAS_SM90 else None
counts = step_counts.counts_for_tree(REPO, 0, "the working tree", model="d2", resources=False)  # no ptxas needed here
cfg = kc.config_for_depth(2)
L, C, Vp = cfg["L"], cfg["C"], cfg["Vp"]
B, T = 4, 256
S = kc.Shape(B, T, distinct_tokens=100, max_bucket=10, **cfg)
launches = pm.expand_step(counts, S)
names = [l.name for l in launches if l.kind == "kernel"]
gemms = [l for l in launches if l.kind == "gemm"]
check(len(gemms) == 12 * L + 3, "cuBLASLt products per step = 12 L + 3 (4 per block forward, 8 backward; the head 1 + 2)",
      str(len(gemms)))
check(names.count("adamw_kernel") == L + 1, "AdamW launches = units = L + 1 (one per unit; 12 L + 4 per tensor before issue 22)",
      str(names.count("adamw_kernel")))
check(names.count("global_norm_partial_kernel") == 1 and names.count("global_norm_finish_kernel") == 1,
      "gradient norm: two launches in all (one pass over every unit; two per unit before issue 22)")
ln_bwd = names.count("layernorm_backward_kernel") + names.count("layernorm_backward_warp_kernel")  # block or warp per chunk (issue 30)
check(ln_bwd == 2 * L + 1 and names.count("layernorm_backward_dweight_kernel") == 2 * L + 1,
      "layernorm backward: the one-pass kernel and the column sums, once per layernorm (2 L + 1)")
check(names.count("layernorm_forward_kernel") == 2 * L + 1, "layernorm forward launches = 2 L + 1 (ln1, ln2, lnf)")
# every kernel the model prices from dev/perf/kernel_costs.py has a cost derived for this tree's
# version of its header (else `make profile` stops, naming the header: an edited header must be
# registered in DERIVED_FROM); the attention kernels are priced from the emulator's slice instead
unpriced = sorted({"%s (%s %s)" % (n, kc.header_of(n), counts.get("headers", {}).get(kc.header_of(n)))
                   for n in set(names) if not n.startswith("attention_")
                   and kc.cost_function(n, counts.get("headers", {}).get(kc.header_of(n))) is None})
check(not unpriced, "every kernel of the traced step has a cost for this tree's version of its header (DERIVED_FROM)",
      ", ".join(unpriced))
check(all(names.count(k) == L for k in ("attention_forward_kernel", "attention_backward_dq_kernel")),
      "attention: one launch per layer")
# issue 30 item 2 (branch epilogue): GELU rides on the fc product (GELU_AUX_BIAS) and on fcproj's
# dinp product (DGELU), the bias gradients on the dweight products (BGRADB) plus a small add
fused = [g for g in gemms if g.ctx.get("gelu") == "gelu" and g.ctx.get("aux") and g.ctx["bias"]]
dgelu = [g for g in gemms if g.ctx.get("gelu") == "dgelu" and g.ctx.get("aux")]
check("gelu_forward_kernel" not in names and "gelu_backward_kernel" not in names and len(fused) == L and len(dgelu) == L,
      "GELU: no GELU kernel; one GELU_AUX_BIAS and one DGELU product per layer", "%d, %d" % (len(fused), len(dgelu)))
# (fc's; fcproj's and attproj's come from ln2's backward, its warp kernel's <P, 4> instance; qkv's
# from the attention backward: its mma.sync kernels' partial rows, then one reduce per layer)
bgrad = [g for g in gemms if g.ctx.get("bgradb")]
ln_res = [l for l in launches if l.name == "layernorm_backward_warp_kernel" and kc.layernorm_nsums(l.ctx, 2) == 4]
check(len(bgrad) == L and names.count("dbias_add_kernel") == L and "dbias_partial_kernel" not in names
      and len(ln_res) == L and names.count("attention_dbias_reduce_kernel") == L
      and "attention_dbias_partials_kernel" not in names,
      "bias gradients: L dweight products with BGRADB (fc's), each followed by one dbias_add_kernel; L layernorm "
      "backwards (ln2's) with the residual's two sums; L attention dbias reduces, no pass over dqkv for them (-ak 0)",
      "%d, %d, %d" % (len(bgrad), names.count("dbias_add_kernel"), names.count("attention_dbias_reduce_kernel")))
# every product's FLOPs, rescaled from the traced B*T to 4 x 256: forward 2, backward 4 per
# multiply-add of every weight matrix (L blocks of 12 C^2, the tied LM head Vp C) per position
flops = sum(2 * g.ctx["m"] * g.ctx["n"] * g.ctx["k"] for g in gemms)
theory = 6 * B * T * (12 * L * C * C + Vp * C)
check(flops == theory, "cuBLASLt FLOPs at B=4, T=256 = 6 B T (12 L C^2 + Vp C) exactly", "%d vs %d" % (flops, theory))


def flops_with_trace_bt(bt):
    mutated = dict(counts, trace=dict(counts["trace"], B=bt // counts["trace"]["T"], T=counts["trace"]["T"]))
    g = [l for l in pm.expand_step(mutated, S) if l.kind == "gemm"]
    return sum(2 * x.ctx["m"] * x.ctx["n"] * x.ctx["k"] for x in g) == theory


mutant_caught("a wrong traced B*T (192 for 64: the products' B*T dimension not rescaled)", lambda: flops_with_trace_bt(192))

# ----------------------------------------------------------------------------
# 3. closed forms of the kernels' counts at the step's shape

# the GELU epilogues move exactly one (B,T,4C) bf16 matrix more than the plain product: the aux
# written by GELU_AUX_BIAS, read by DGELU (the model's bytes with and without the aux)
_dev = pm.Device(devices, "h100-sxm")
extra = [pm.gemm_result(g, S, _dev).bytes - pm.gemm_result(pm.Launch("gemm", g.name, g.phase, dict(g.ctx, aux=False)), S, _dev).bytes
         for g in fused + dgelu]
check(len(extra) == 2 * L and all(e == B * T * 4 * C * 2 for e in extra),
      "GELU epilogues: the aux adds exactly B T 4C bf16 elements per product (written forward, read backward)", str(extra))
gelu = []  # the GELU kernels no longer run in the step (kept for widths not a multiple of 8)
gelu = [kc.cost_function("gelu_forward_kernel", counts["headers"]["llmc/gelu.cuh"])(S, l.ctx)
        for l in launches if l.name == "gelu_forward_kernel"]
packs = -(-B * T * 4 * C // 8)
check(all(g.grid * g.block >= packs > (g.grid - 1) * g.block for g in gelu),
      "GELU forward: one thread per 16-byte pack of 8 bf16 (the tree's llmc/gelu.cuh)")
ln = [(l.ctx["fused"], kc.layernorm_forward_kernel(S, l.ctx)) for l in launches if l.name == "layernorm_forward_kernel"]
check([f for f, _ in ln].count(False) == 1 and ln[0][0] is False,
      "layernorm forward: only block 0's ln1 is plain, the 2 L others fuse the residual add")
check(all(c.write == (2 if f else 1) * B * T * C * 2 + B * T * 8 for f, c in ln),
      "layernorm forward writes (B,T,C) per output (+ the residual when fused) and mean, rstd")
for Tn in (64, 256, 1024, 1000):
    n = -(-Tn // 64)
    # query block i visits keys [0, min(64(i+1), T)): ceil(min(64(i+1),T)/32) tiles; for T = 64 n: n(n+1)
    closed = n * (n + 1) if Tn % 64 == 0 else None
    if closed is not None:
        check(kc._tiles_forward(Tn) == closed and kc._tiles_dkdv(Tn) == closed,
              "attention key/query tiles per (b,h) at T=%d = n(n+1), n = T/64 (forward, dQ, dK/dV)" % Tn)
    else:
        brute = sum(1 for i in range(n) for j0 in range(0, min(64 * (i + 1), Tn), 32))
        check(kc._tiles_forward(Tn) == brute, "attention tiles at T=%d (a tail) = the kernel's loop, counted" % Tn)
att = kc.attention_forward_kernel(S, {})
useful = 2 * B * cfg["NH"] * 64 * T * (T + 1)  # q k^T and P v over the causal pairs, 2 FLOPs per multiply-add
check(att.cc_flops >= useful, "attention forward computes at least the causal FLOPs 2 B NH hs T (T+1)")
# the layernorm backward's rows per chunk and warps per block come from the tree's header
# (step_counts.header_defines -> Shape.defines -> kernel_costs.define), not from a copy: the working
# tree's #define, read here by hand, is what header_defines gives, and a chunk of 16 rows (a header
# saying so) gives the grid and the row chain of 16
import re  # noqa: E402
with open(os.path.join(REPO, "llmc/layernorm.cuh")) as fp:
    by_hand = int(re.search(r"^#define LAYERNORM_BWD_ROWS (\d+)", fp.read(), re.M).group(1))
check(step_counts.header_defines(REPO).get("LAYERNORM_BWD_ROWS") == by_hand,
      "header_defines reads llmc/layernorm.cuh's LAYERNORM_BWD_ROWS (%d)" % by_hand)
S16 = kc.Shape(32, 1024)
S16.defines = {"LAYERNORM_BWD_ROWS": 16, "LAYERNORM_BWD_WARPS": 4}
w16 = kc.layernorm_backward_warp_kernel(S16, {})
d16 = kc.layernorm_backward_dweight_kernel(S16, {})
check((w16.grid, w16.serial_trips, w16.block_trips) == (32 * 1024 // 16 // 4, 16, 16)
      and d16.read == (32 * 1024 // 16) * 2 * 768 * 4 + 2 * 768 * kc.X,
      "layernorm backward with LAYERNORM_BWD_ROWS 16 in the header: 512 blocks of 4 chunks, 16 rows a warp, 2048 chunks summed",
      str((w16.grid, w16.serial_trips, d16.read)))
# the AdamW launches, in update order, touch every parameter exactly once
adamw = [l.ctx["n"] for l in launches if l.name == "adamw_kernel"]
check(sum(adamw) == pm.num_parameters(S) and pm.num_parameters(S) == Vp * C + 1024 * C + 2 * C + L * (12 * C * C + 13 * C),
      "AdamW's launches cover every parameter once: Vp C + maxT C + 2C + L (12 C^2 + 13 C)")
# the persistent classifier (fused_classifier_streamed_kernel): the tree's launcher takes it where two
# rows fit a block's shared memory (the emulator's 227 KB, as the H200's). Priced at GPT-2's shape,
# B=32, with ptxas' resources as test_ptx_16byte.sh reads them (64 registers, 512 bytes static; the
# held kernel 62, 256): its DRAM bytes are the byte floor (logits read once, dlogits written once,
# targets and losses); on the H200 a grid of one block per SM walking ceil(32768 / 132) = 249 rows,
# one barrier each, priced at the larger of its DRAM time and its arithmetic (the overlap it is built
# for), not their sum as the held kernel is; on the A100 (163 KB a block) the launcher's fallback,
# the held kernel, with the held kernel's time
check("fused_classifier_streamed_kernel" in names and "fused_classifier_kernel" not in names,
      "the step (d2, on the emulator's 227 KB a block) launches the streamed classifier, not the held one")
if "fused_classifier_streamed_kernel" in names:
    Sc = kc.Shape(32, 1024)
    fn_cls = kc.cost_function("fused_classifier_streamed_kernel", counts["headers"]["llmc/fused_classifier.cuh"])
    c_cls = fn_cls(Sc, {})
    check(c_cls.dram == 2 * 32 * 1024 * Vp * 2 + 8 * 32 * 1024 and c_cls.dyn_smem == 2 * Vp * 2,
          "classifier, streamed: DRAM = the byte floor 2 BT Vp bf16 + targets and losses; two rows of shared memory",
          str((c_cls.dram, c_cls.dyn_smem)))
    res_cls = {"template": "", "smem": 512, "stack": 0, "spill_stores": 0, "spill_loads": 0, "load_bytes": 16}
    fake_cls = {"headers": counts["headers"], "resources": {arch: {
        "fused_classifier_streamed_kernel": [dict(res_cls, regs=64)],
        "fused_classifier_kernel": [dict(res_cls, regs=62, smem=256)]} for arch in ("sm_80", "sm_90")}}
    price = lambda key, name: pm.kernel_result(pm.Launch("kernel", name, "forward", {}), Sc, pm.Device(devices, key), fake_cls)  # noqa: E731
    st, held = price("h200", "fused_classifier_streamed_kernel"), price("h200", "fused_classifier_kernel")
    check(st.cost.grid == 132 and st.cost.block_barriers == 249 and st.occ["blocks_per_sm"] == 1
          and st.time == max(v for k, v in st.parts.items()) and st.time < held.time
          and abs(st.time - max(st.parts["memory"], st.parts["compute"])) < 1e-12
          and abs(held.time - (held.parts["memory"] + held.parts["compute"])) < 1e-12,
          "classifier, streamed, H200 B=32: 132 blocks of 249 rows, one per SM, priced max(memory, compute) "
          "(%.3f ms), the held kernel memory + compute (%.3f)" % (st.time * 1e3, held.time * 1e3),
          str((st.cost.grid, st.cost.block_barriers, st.parts)))
    a100 = price("a100-sxm-80gb", "fused_classifier_streamed_kernel")
    check(a100.launch.name == "fused_classifier_kernel"
          and a100.time == price("a100-sxm-80gb", "fused_classifier_kernel").time,
          "classifier, streamed, A100 (163 KB a block): priced as the launcher's fallback, the held kernel")
check(pm.flops_per_token(kc.Shape(1, 1024)) == 6 * 124475904 + 6 * 12 * 768 * 1024,
      "MFU's FLOPs per token for GPT-2 124M, T=1024 = 6 N + 6 L C T, N = 124,475,904 (llm.c)")

# the attention's counts scale exactly with B x NH: every (b, h) runs the same blocks on its own
# slice. Checked on the emulator's tensor-core counters when the tree's attention issues mma.sync.
# The slice runs the kernels the trainer's -ak picks (perf_model.py --attention): by default (-ak 0,
# the trainer's default) the mma.sync kernels, never the sm_90a ones the emulator could also run.
one = step_counts.attention_slice(REPO, 128, 64, 1, 1)
four = step_counts.attention_slice(REPO, 128, 64, 2, 2)
check(not any(k.endswith("_sm90_kernel") for k in one),
      "attention slice, default (-ak 0, the trainer's default): no sm_90a kernel runs", str(sorted(one)))
if any(e["mma"] for e in one.values()):
    check(all(four[k][f] == 4 * one[k][f] for k in one for f in ("mma_flops", "ldmatrix_bytes", "cp_async_bytes")),
          "attention tensor-core counts at B=2, NH=2 = 4 x those of one (b, h) slice (the model's scaling)")
else:
    check(all(four[k]["launches"] == one[k]["launches"] for k in one),
          "attention: the same launches at B=2, NH=2 as for one slice (no mma.sync in this tree's attention: "
          "the tensor-core scaling check waits for it)")
SM90 = ["attention_backward_dkdv_sm90_kernel", "attention_forward_sm90_kernel"]
SM90_REDUCE = "attention_backward_dq_reduce_kernel"  # dQ's partials summed (no wgmma: kernel_costs.py)
if HAS_SM90:
    # --attention sm90 (-ak 1): the sm_90a kernels, their wgmma FLOPs and TMA bytes from EMU_COUNTERS
    one90 = step_counts.attention_slice(REPO, 128, 64, 1, 1, attention="sm90")
    four90 = step_counts.attention_slice(REPO, 128, 64, 2, 2, attention="sm90")
    k90 = sorted(k for k in one90 if k.endswith("_sm90_kernel"))
    check(k90 == SM90 and all(one90[k].get("wgmma_flops", 0) > 0 for k in k90) and not any(e["mma"] for e in one90.values()),
          "attention slice, --attention sm90 (-ak 1): the two sm_90a kernels run, with wgmma FLOPs, and no mma.sync kernel",
          str({k: one90[k].get("wgmma_flops") for k in one90}))
    # the forward at T = 128: one block of 128 queries against one 128-key tile (the diagonal, issued
    # whole): S = Q K^T and O += P V, 2 x 128 x 128 x hs multiply-adds each
    fwd90 = one90.get("attention_forward_sm90_kernel", {}).get("wgmma_flops")
    check(fwd90 == 2 * 2 * 128 * 128 * 64, "sm_90a forward's wgmma FLOPs at T=128, hs 64 = 2 products x 2 x 128 x 128 x 64",
          str(fwd90))
    check(all(four90[k].get(f, 0) == 4 * one90[k].get(f, 0) for k in one90 for f in ("wgmma_flops", "tma_bytes")),
          "attention wgmma counts at B=2, NH=2 = 4 x those of one (b, h) slice (the model's scaling)")
    # and the model prices them as warp-specialized TMA + wgmma kernels (perf_model.wgmma_result)
    dev90 = pm.Device(devices, "h200")
    fake90 = {"attention_slice": one90, "resources": {"sm_90a": {k: [{
        "template": "", "regs": 168, "smem": 0, "stack": 0, "spill_stores": 0, "spill_loads": 0, "load_bytes": 0}] for k in SM90}}}
    priced = [pm.kernel_result(pm.Launch("kernel", k, "forward", {}), kc.Shape(1, 128), dev90, fake90) for k in SM90]
    check(all("chain (tensor + softmax + waits)" in r.phases for r in priced),
          "--attention sm90: each sm_90a kernel is priced by att90_result (its consumer loop's chain, TMA and DRAM pipes)")
    # issue 29 (attmodel): the consumer loop's mix, counted from nvcc's PTX, against the code: per
    # thread and tile, the forward's 64 x 128 scores over 128 threads = 64 ex2 + the 2 rows' rescale,
    # P packed 2 scores a cvt (32); the dK/dV's 64 x 64 over 128 = 32 ex2, P and dS packed (16 + 16);
    # the serial loops wait for each of their 2 product groups (wait_group 0)
    mix90 = step_counts.att90_mix(REPO)
    if mix90 is not None:
        f90, b90 = mix90["attention_forward_sm90_kernel"], mix90["attention_backward_dkdv_sm90_kernel"]
        overlap90 = step_counts.header_defines(REPO).get("ATT90_FWD_OVERLAP", 0) == 1
        check(f90["mufu"] == 64 + 2 and f90["cvt"] == 32 and b90["mufu"] == 32 and b90["cvt"] == 32
              and b90["wgmma_waits"] == {0: 2}
              and f90["wgmma_waits"] == ({1: 1, 0: 1} if overlap90 else {0: 2}),
              "sm_90a loop mix from the PTX: forward 66 ex2, 32 bf16x2 packs; dK/dV 32 ex2, 32 packs; their waits (%s forward)"
              % ("overlapped" if overlap90 else "serial"), str(mix90))
        with open(os.path.join(REPO, "llmc/attention_sm90.cuh"), "rb") as fp:
            import hashlib
            fp90 = hashlib.sha256(fp.read()).hexdigest()[:12]
        if fp90 in kc.ATT90_MIX:
            check(kc.ATT90_MIX[fp90] == mix90, "kernel_costs.ATT90_MIX's record for attention_sm90.cuh %s = the PTX's count" % fp90,
                  str(kc.ATT90_MIX[fp90]))
    # the chain: serial = products + CUDA-core work + waits; overlapped = S's half + the larger of the
    # softmax and P V's half + one wait (the fixture's mutants att90_chain and att90_overlap_read below)
    mixo = {"alu": 100, "fp32": 0, "mufu": 0, "cvt": 0, "shfl": 0, "lsu": 0, "wgmma_waits": {0: 2}}
    ser = pm.att90_chain("k", dev90, 4e6, mixo, False)
    cuda_o = 2 * 100 * 32 / (dev90.alu_per_clk / 4) / dev90.clock  # 2 warps a sub-partition, 100 ALU instructions
    check(abs(ser["cuda"] - cuda_o) < 1e-15 and abs(ser["chain"] - (ser["tensor"] + cuda_o + 2 * dev90.wgmma_wait)) < 1e-15,
          "att90 chain, serial: tensor + the 2 warps' ALU clocks + 2 waits", str(ser))
    ovl = pm.att90_chain("k", dev90, 4e6, dict(mixo, wgmma_waits={1: 1, 0: 1}), True)
    check(abs(ovl["chain"] - (ovl["tensor"] / 2 + max(cuda_o, ovl["tensor"] / 2) + dev90.wgmma_wait)) < 1e-15,
          "att90 chain, overlapped: S's half + max(softmax, P V's half) + the one wait for S", str(ovl))
    # the step, traced with -ak 1, launches them (and only them, with the row-dot), once per layer,
    # and is priced against the slice of the same -ak; the default trace launches none of them
    counts90 = counts90_later.result()
    n90 = [op["name"] for op in counts90["step_ops"] if op["op"] == "kernel" and op["name"].startswith("attention_")]
    # (and the qkv bias gradient's reduce: the sm_90a kernels write its partial rows, dqkv is not read back)
    check(all(n90.count(k) == L for k in SM90 + [SM90_REDUCE, "attention_backward_rowdot_kernel",
                                                 "attention_dbias_reduce_kernel"])
          and len(n90) == 5 * L and not any(k.endswith("_sm90_kernel") or k == SM90_REDUCE for k in names),
          "trainer -ak 1 (d2): the two sm_90a kernels, dQ's reduce, the row-dot and the qkv bias gradient's reduce once "
          "per layer (no pass over dqkv for its partials); -ak 0 launches none of the sm_90a kernels",
          str(sorted(set(n90))))
    check(step_counts.same_attention(dict(counts90, attention_slice=one90), "sm90")["attention"] == "sm90",
          "--attention sm90: the step's attention kernels are the slice's")
    mutant_caught("the default step (-ak 0) priced with the sm_90a slice",
                  lambda: bool(step_counts.same_attention(dict(counts, attention_slice=one90), "mma")))

# ----------------------------------------------------------------------------
# 4. the collectives: zero_walk_print's bytes and calls = the plan's (dev/bench/zero_plan_print)

plan_print = os.path.join(REPO, "dev/bench/zero_plan_print")
if not os.path.exists(plan_print):
    subprocess.run(["make", "-C", REPO, "dev/bench/zero_plan_print"], stdout=subprocess.DEVNULL)
rows = subprocess.run([plan_print, "--cuda", "2", "d12", "8"], stdout=subprocess.PIPE, text=True).stdout.splitlines()
hdr = rows[0].split(",")
plan = {}
for r in rows[1:]:
    d = dict(zip(hdr, r.split(",")))
    if d["group"] == "8":
        plan[int(d["stage"])] = d
for stage in range(4):
    ev = zero_step.walk_events(stage, 8, 12)
    rs = sum(float(e[2]) for e in ev if e[0] == "reduce_scatter")
    ag = sum(float(e[2]) for e in ev if e[0] == "all_gather") + sum(float(e[3]) for e in ev if e[0] == "gather")
    calls = (sum(1 for e in ev if e[0] == "reduce_scatter"), sum(1 for e in ev if e[0] in ("all_gather", "gather")))
    p = plan[stage]
    check(rs == float(p["reduce_scatter"]) and ag == float(p["all_gather"]) and calls == (int(p["rs_calls"]), int(p["ag_calls"])),
          "stage %d at N=8: the timeline's collectives = zero_plan_print's bytes and calls (%d RS, %d AG)" % (stage, *calls))
# stages 1-2 (train_gpt2.cu params_all_gather, unit_params): after the update every unit's
# all-gather is queued and the compute does not wait for them; the next forward waits for each
# unit's own at its first use: one wait per unit, each before the unit's first compute
def per_unit_waits(ev, units):
    first_use = {0: "compute encoder"}
    first_use.update({u: "compute block %d" % u for u in range(1, units)})
    lines = [" ".join(e) for e in ev]
    upd = lines.index("compute update")
    return (all(lines.count("wait_gather %d" % u) == 1 and lines.index("wait_gather %d" % u) + 1 == lines.index(first_use[u])
                for u in range(units)) and "compute_waits_comm" not in lines[upd:])


for stage in (1, 2):
    check(per_unit_waits(zero_step.walk_events(stage, 8, 12), 13),
          "stage %d at N=8: the compute waits for each unit's all-gather at its first use, not for all after the update" % stage)
old_schedule = [e for e in zero_step.walk_events(1, 8, 12) if e[0] != "wait_gather"] + [["compute_waits_comm"]]
mutant_caught("stage 1 waiting for every all-gather after the update (before issue 22)", lambda: per_unit_waits(old_schedule, 13))
_, units8 = pm.layout(kc.Shape(32, 1024), 8)
check(sum(units8) * 2 == int(plan[0]["params"]), "the model's padded units at N=8 = the plan's parameter bytes / 2")
mutant_caught("a layout without lnf's 2 C parameters", lambda: (sum(units8) - 2 * 768) * 2 == int(plan[0]["params"]))
mutant_caught("collectives counted as whole buffers, not bus bytes (x N/(N-1))",
              lambda: sum(float(e[2]) * 8 / 7 for e in zero_step.walk_events(1, 8, 12) if e[0] == "reduce_scatter")
              == float(plan[1]["reduce_scatter"]))

# ----------------------------------------------------------------------------
# 5. the bandwidth curve reproduces its published table, and the PTX reader its own definition

dev = pm.Device(devices, "h100-sxm")
tab = devices["stream_curves"]["h100-pcie"]
ok = True
for row in tab["rows"]:
    inflight = row[0] * 2 * tab["sms"] * 8  # 'read': one 8-byte load per thread, 2 blocks per SM
    x = inflight / (tab["peak_gb_s"] * 1e9 * tab["latency_ns"] * 1e-9)
    y = dev.bw_fraction("read", x * dev.bw * dev.latency)
    ok &= abs(y - row[1] / tab["peak_gb_s"]) < 1e-12
check(ok, "the achieved-bandwidth curve passes through every published point (H100 PCIe, read)")
ptx = """
.visible .entry k(
{
	ld.global.u32 	%r1, [%rd1];
$L__BB0_1:
	ld.global.u16 	%rs1, [%rd2];
	ld.global.v4.u32 	{%r2, %r3, %r4, %r5}, [%rd3];
	@%p1 bra 	$L__BB0_1;
$L__BB0_2:
	ld.global.f32 	%f1, [%rd4];
	@%p2 bra 	$L__BB0_2;
}
"""
check(step_counts.ptx_load_bytes(ptx) == 18, "PTX: bytes in flight = the busiest innermost loop's loads (2 + 16)")

# ----------------------------------------------------------------------------
# 6. the model against the GPU: every measured fixture (dev/perf/measured/, make_fixture.py)
#
# At the fixture's ncu batch (B=32 on the H200): each kernel class within 15% and the wall-clock
# step within 10%; the constants fitted there (devices.json "FITTED", fit_constants.py) make this
# partly a fit. What was not fitted on: the step at the other batch of steps.csv (B=64) and the
# rows of the B=8 kernel bench, within 20%: there the tolerance is a property of the model.
# Then each of issue 29's causes is switched off in turn (perf_model.CAUSES) and the same
# comparison must fail.
import fixtures  # noqa: E402

CLASS_TOL, STEP_TOL, OUT_OF_FIT_TOL = 0.15, 0.10, 0.20

# Comparisons the model misses today, each with what it does not model. They are printed, not
# counted; each must still miss (a fix that brings one in shows here, and it leaves this list).
# Not loosened tolerances: the misses are reported in dev/cuda/NOTES.md as they are.
LNB = ("the warp kernel (a warp per chunk of LAYERNORM_BWD_ROWS = 32 rows, 4 warps a block, 128 registers: up to 4 blocks per SM) walks its rows one after another; measured per row of a warp ~5.6 us at B=32 (256 blocks on 132 SMs: ~8 warps per SM) and ~3.6 us at B=8 (64 blocks: 4 warps per SM on 64 SMs), i.e. 136 and 107 packs per us per SM (the old block kernel: ~160 at both B), where the model charges one DRAM round trip per row (0.44 us) and prices the launch at its DRAM bytes (1.2 TB/s achieved, 4.3 modelled). Not bandwidth (Little's law: 8 warps x 32 lanes x 152 bytes in flight per SM cover 6 TB/s), not the issue rate (~1,300 PTX instructions in the row loop, with its unaligned fallback: < 1 us at 2 warps per scheduler). Suspected: the row loop's ~300 branches (a bound check per element: `j < PACKX_SIZE && g < packs && g * PACKX_SIZE + j < C`) cut it into basic blocks ptxas cannot schedule across, so one warp's row is a chain of dependent instructions (~7 clocks each with one warp per scheduler) and of its 48 shared read-modify-writes; the model has no term for a warp's instruction chain (no SASS here: the toolkit has no cuobjdump)")
KNOWN_MISSES = {
    "h200_2026-11-28": {
        "class encoder forward": "25.0 us per launch measured, 16.3 predicted (memory-bound, 58 MB, 50 of them written). "
                                 "Not a write-only rate: gpu-benches' cuda-stream init column (stores only, the same H100 "
                                 "PCIe file as the curve) reaches the datasheet peak, faster than the curve used. Like the "
                                 "row-dot, 8-warp blocks of 2 dependent round trips each that turn over at ~265 ns per "
                                 "block per SM (33 ns per warp): see the row-dot's reason (0.01 ms of the step)",
        "class attention row-dot": "98.2 us per launch measured, 76.0 predicted (memory at 4 bytes in flight per thread; "
                                   "its chain, 47 waves of 2 round trips and a warp sum, 63.8). Its 49,152 blocks and the "
                                   "encoder forward's 12,288, both of 8 warps and 2 dependent round trips, turn over at the "
                                   "same ~265 ns per block per SM (33 ns per warp): 1.2 us per block life beyond the "
                                   "round trips the grad norm's long-lived warps of the same 2-byte loads take (435 ns). "
                                   "Not a launch rate: the plain layernorm forward turned its 3-warp blocks over at "
                                   "168 ns, and gpu-benches' init and read kernels (one element per thread, the curve's "
                                   "source) turn warps over at ~14 ns on an H100 PCIe; a constant fitted on these two "
                                   "kernels (tried: 33 ns per warp) contradicts those and moved the 2e0af91 tree's "
                                   "per-element GELU by +5 ms each, unmeasured: not kept",
        "bench encoder_backward (incl. host bucket sort)": "the bench times the host's bucket sort (~0.17 ms of the "
                                                           "0.197) beside the 0.02 ms the model gives the copy and the "
                                                           "two kernels: the model has no host CPU, and no measurement "
                                                           "of the sort alone to price it from",
        "bench layernorm_backward": "the old block kernel's time per row of a block scales with the blocks per SM: "
                                    "~4.8 us at B=32 (7.8 blocks per SM), ~1.1 us at B=8 (1.9), i.e. a throughput "
                                    "(~1.27 TB/s at both), where the model charges a fixed chain per wave with "
                                    "barrier_ns fitted at B=32",
        "bench matmul_backward attproj (768->768)": ("the row's time turns on the dweight product's split at k = 8192, "
                                                     "unmeasured (at k = 32768 ncu shows 5): split as modeled (8) it "
                                                     "predicts 0.74, unsplit (36 tiles on 132 SMs) ~1.2; and the B=8 "
                                                     "forward products run ~15% slower than modeled (0.83-0.86)"),
        "bench fused_classifier (loss + dlogits)": "0.71: at B=8 a row takes 1.3x as long as at B=32 (0.88); not "
                                                   "explained (the bench's logits are the previous call's dlogits, the "
                                                   "step's are real logits: the online merge's branches may differ)",
    },
    # the tree after the fifth session's kernels (main 1f4c85f), which the model was not fitted on
    "h200_2026-11-28_1f4c85f": {
        "class encoder forward": "24.6 us measured, 16.3 predicted: the 2ef5778 fixture's miss, the same kernel (see there)",
        "class -ak 1 encoder forward": "as without -ak 1 (the same kernel)",
        "class layernorm backward": "4.68 ms measured (4.52 the warp kernel, 0.16 the column sums), 1.71 predicted: " + LNB,
        "class -ak 1 layernorm backward": "4.69 measured, 1.71 predicted: as without -ak 1 (the same kernels)",
        "bench layernorm_backward": "0.128 ms measured, 0.020 predicted (B=8, 64 blocks): " + LNB,
        "class encoder backward": "0.092 ms measured (dwte 0.071, dwpe 0.021), 0.051 predicted (dwte 0.031): the short "
                                  "buckets a warp each (branch dwte) were predicted to halve dwte (0.07 -> 0.03) and "
                                  "measured no faster than the 2ef5778 tree's dwte (0.07); the model's chain per wave "
                                  "(the grid's mean block chain, 3-4 round trips) is not what sets the time; not found",
        "class -ak 1 encoder backward": "as without -ak 1 (the same kernels)",
        "bench encoder_backward (incl. host bucket sort)": "the host's bucket sort, as in the 2ef5778 fixture (0.224 ms "
                                                           "measured, 0.02 predicted for the copy and the two kernels)",
        "class grad norm": "0.104 ms measured (the partial kernel 0.102, 249 MB: 2.4 TB/s), 0.069 predicted (8 loads in "
                           "flight per thread, issue 30's unrolled loop, priced near the best of the curve); the 2ef5778 "
                           "tree's norm measured 0.21; not found (the bench row at B=8, the same 124M parameters, is "
                           "0.086 measured, 0.078 predicted: the step's launch runs 1.2x the bench's)",
        "class -ak 1 grad norm": "as without -ak 1 (the same kernel)",
        "bench attention_forward": "0.128 ms measured, 0.100 predicted (B=8; attmodel): the row runs our sm_90a forward "
                                   "(test_kernels leaves attention_sm90_mode at -1 on the sm_90a build: the mma.sync "
                                   "forward measured the same at B=32 in both runs, 4.65 and 4.64 ms, where this row went "
                                   "0.155 -> 0.128), priced before attmodel as the mma.sync kernel (0.133, a pass by "
                                   "accident). The chain fitted at B=32 (2.87 us a tile, 110 tiles on the busiest SM) "
                                   "gives 31 tiles x 2.87 = 0.089 ms + a launch gap; the measurement is 4.1 us a tile: "
                                   "something per block or per launch (5.8 blocks an SM here, 23 at B=32) the chain does "
                                   "not hold; not found (no SASS, no ncu metrics beyond durations)",
        "bench attention_backward": "0.344 ms measured, 0.250 predicted (B=8; attmodel): the row-dot, our sm_90a dK/dV and "
                                    "dQ's reduce (see the forward's row: the same shortfall at B=8, 0.73x)",
        "class -ak 1 attention dQ reduce": "2.18 ms measured, 1.60 predicted (6.0 GB of fp32 partials read once and dQ "
                                          "written, 2.8 TB/s achieved; 128 threads a block, one per query row, 256 "
                                          "bytes in flight each): not found",
        "bench matmul_backward attproj (768->768)": "the 2ef5778 fixture's miss, the same cause (the dweight product's "
                                                    "split at k = 8192, unmeasured): 0.0575 measured, 0.042 predicted",
    },
}


def within(pred, meas, tol):
    return meas > 0 and abs(pred / meas - 1) <= tol


def fixture_comparisons(fx, dev):
    """[(key, measured, predicted, tolerance, note)] of every comparison the fixture supports: ncu's
    classes at its batch (and with -ak 1 where the fixture has ncu_launches_ak1.csv), the steps of
    steps.csv and steps_flags.csv (at the ncu batch: the step tolerance; elsewhere not fitted on),
    the bench rows."""
    cmp = fixtures.compare(fx, dev)
    B = fx.meta["ncu"]["B"] if "ncu" in fx.meta else None
    out = [("class " + cls, m, p, CLASS_TOL, "B=%s" % B) for cls, m, p in cmp["classes"]]
    out += [("class -ak 1 " + cls, m, p, CLASS_TOL, "B=%s, -ak 1" % B) for cls, m, p in cmp["classes_ak1"]]
    for b, m, p in cmp["steps"]:
        out.append(("step B=%d" % b, m, p, STEP_TOL if b == B else OUT_OF_FIT_TOL, "" if b == B else "not fitted on"))
    for trainer, b, m, p in cmp["steps_flags"]:
        out.append(("step B=%d %s" % (b, trainer), m, p, STEP_TOL if b == B else OUT_OF_FIT_TOL,
                    "" if b == B else "not fitted on"))
    for row, m, p in cmp["bench"]:
        out.append(("bench " + row, m, p, OUT_OF_FIT_TOL, "B=%d, not fitted on" % fx.meta["bench"]["B"]))
    return out


def fixture_failures(fx, dev):
    """{key: |log(predicted / measured)|} of the comparisons outside their tolerance."""
    import math
    return {k: abs(math.log(p / m)) if p > 0 and m > 0 else float("inf")
            for k, m, p, tol, _ in fixture_comparisons(fx, dev) if not within(p, m, tol)}


def new_failures(base, now):
    """What a mutant broke: comparisons that passed and now fail, and misses that got worse by more
    than 10% (a known miss can only be caught growing)."""
    import math
    return [k for k, e in now.items() if k not in base or e > base[k] + math.log(1.1)]


MUTANTS = [
    ("attention_from_mix", "attention at FlashAttention-2's published 35% of the dense peak"),
    ("stack_charge", "no charge for ptxas' stack frame (AdamW's tensor table in local memory)"),
    ("block_chain", "no serial chain of round trips and barriers per block"),
    ("wave_tail", "no wave tails (memory time and a block's chain over waves / slots, not whole waves)"),
    ("inflight_from_source", "bytes in flight from the PTX's busiest loop (the row-dot's remainder loop)"),
    ("classifier_dram_pass2", "the classifier's second pass served by L2"),
    ("splitk_reduce", "no cuBLASLt split-K reduce kernels"),
    ("splitk_reduce_one_wave", "the split-K reduce's grid growing with the output (8 elements per thread), not ncu's one wave"),
    ("launch_gap", "no time between launches"),
    ("bench_queued_launches", "a bench row's every launch waiting a host gap (the step's), not only its first"),
    ("bench_l2_resident", "a bench row's repeats from DRAM although its buffers fit the L2"),
    # model (the 1f4c85f run, not fitted on): each caught only where the fixture's tree has what it prices
    ("bgradb_kernel", "cuBLASLt's BGRADB epilogue folded into the product (no kernel re-reading dout)"),
    ("serial_phases", "one block per SM overlapping its loads, arithmetic and stores (the larger, not the sum)"),
    # attmodel (issue 29): our sm_90a attention (the -ak 1 classes and steps)
    ("att90_chain", "our sm_90a attention at cuDNN's overlapped rate (wgmma_attention_fraction), not its own loop's chain"),
    ("att90_overlap_read", "our serial sm_90a forward priced as the overlapped one (ATT90_FWD_OVERLAP not read)"),
]


def tree_has(fx, cause):
    """Whether the fixture's tree has what the mutant of `cause` takes away (a mutant of a kernel the
    tree does not launch cannot be caught by its fixture): the classifier's DRAM second pass only in
    the two-pass kernel (issue 30), the BGRADB kernel only with the epilogue, the serial phases only
    in the held-packs classifier."""
    ops = fx.inputs["step_ops"]
    version = kc.DERIVED_FROM["llmc/fused_classifier.cuh"].get(fx.inputs["headers"].get("llmc/fused_classifier.cuh"))
    if cause == "classifier_dram_pass2":
        return version in ("2e0af91", "issue 22", "issue 30")
    if cause == "bgradb_kernel":
        return any(op.get("bgradb") for op in ops)
    if cause == "serial_phases":
        return version == "issue 30 held"
    if cause in ("att90_chain", "att90_overlap_read"):  # only a fixture measured with -ak 1
        return fx.inputs_ak1 is not None
    if cause == "stack_charge":  # a kernel the step launches with a stack frame (2ef5778's AdamW; none since vec4)
        res = fx.inputs["resources"].get("sm_90", {})
        launched = {op["name"] for op in ops if op["op"] == "kernel"}
        return any(e["stack"] for k in launched for e in res.get(k, []))
    return True

for path in fixtures.fixtures():
    fx = fixtures.Fixture(path)
    name = os.path.basename(path)
    if fx.inputs is None:
        check(False, "fixture %s has model_inputs.json (make_fixture.py without --no-trace)" % name)
        continue
    if fixtures.device_key(fx) not in devices["devices"]:
        check(False, "fixture %s: devices.json has an entry for its card %s" % (name, fx.card))
        continue
    dev_fx = fixtures.device_for(fx, devices)
    known = KNOWN_MISSES.get(name, {})
    for key, m, p, tol, note in fixture_comparisons(fx, dev_fx):
        what = "%s %s: predicted %.4g ms within %d%% of the measured %.4g (%.2fx)%s" % (
            name, key, p, 100 * tol, m, p / m if m else 0, "; " + note if note else "")
        if key in known:
            check(not within(p, m, tol), "KNOWN MISS still a miss: %s -- %s" % (what, known[key]),
                  "(it is in now: take it out of KNOWN_MISSES)")
        else:
            check(within(p, m, tol), what)
    base = fixture_failures(fx, dev_fx)  # a mutant must fail a comparison the model passes
    for cause, what in MUTANTS:
        if not tree_has(fx, cause):
            continue

        def run_mutant(cause=cause):
            pm.CAUSES[cause] = False
            try:
                return not new_failures(base, fixture_failures(fx, dev_fx))
            finally:
                pm.CAUSES[cause] = True
        mutant_caught("%s: %s" % (name, what), run_mutant)
    # the constants the 1f4c85f run measured, set back to what they were before it
    for key, old, what in (("graph_gap", 0.5e-6, "a CUDA graph's kernels 0.5 us apart (the blog's V100 figure, assumed before)"),
                           ("launch", 3.0e-6, "a kernel's floor at 3.0 us (2008-2010 GPUs, before)")):
        if fx.path.endswith("_1f4c85f"):
            def run_constant(key=key, old=old):
                saved = getattr(dev_fx, key)
                setattr(dev_fx, key, old)
                try:
                    return not new_failures(base, fixture_failures(fx, dev_fx))
                finally:
                    setattr(dev_fx, key, saved)
            mutant_caught("%s: %s" % (name, what), run_constant)

# ----------------------------------------------------------------------------
# 7. the warp-specialized TMA + wgmma cost (perf_model.wgmma_result, for the sm_90a attention of
# issue 30 item 3) against the one such kernel the GPU run measured: cuDNN's flash attention in
# llm.c + cuDNN (run/ncu_llmc_cudnn.csv.xz, one training step at B=32, T=1024, hs 64: forward 12
# launches, backward 12). Its rate was calibrated on the forward (devices.json
# wgmma_attention_fraction, fit_constants.py): the forward checks the structure reproduces it and
# that the devices.json value is what the measured file gives; the backward (4 products per 64 x 64
# tile, an assumption) was not fitted on: within 20%. The kernels are cuDNN's, not ours: this
# shows the cost function prices such a kernel from its counts, not that our kernel will match.
import fit_constants  # noqa: E402

h200_fx = os.path.join(fixtures.MEASURED, "h200_2026-11-28")
dev200 = pm.Device(devices, "h200")
cal = fit_constants.cudnn_wgmma_fraction(h200_fx, dev200)
check(cal is not None and abs(cal["forward"] - dev200.wgmma_att) < 0.01,
      "wgmma_attention_fraction in devices.json = cuDNN's measured forward rate from the run's ncu file (%.3f)" % (
          cal["forward"] if cal else -1))

# attmodel (issue 29): our sm_90a attention's one fitted constant, wgmma_wait_ns, is what the -ak 1
# fixture's forward gives (fit_constants.fit_wgmma_wait), and the dK/dV kernel at that value is
# within the class tolerance (not fitted on; the comparison itself is the fixture loop's above)
fx_ak = fixtures.Fixture(os.path.join(fixtures.MEASURED, "h200_2026-11-28_1f4c85f"))
fit_w = fit_constants.fit_wgmma_wait(fx_ak, fixtures.device_for(fx_ak, devices))
check(fit_w is not None and abs(fit_w[0] * 1e-9 - dev200.wgmma_wait) <= 2e-9 and within(fit_w[1], 1.0, CLASS_TOL),
      "wgmma_wait_ns in devices.json (%.0f) = the fit on our sm_90a forward at B=32, -ak 1 (%s); dK/dV at it %.2fx" % (
          dev200.wgmma_wait * 1e9, fit_w and fit_w[0], fit_w[1] if fit_w else 0))


def cudnn_prediction(kind):
    """cuDNN's sdpa kernels as the emulator would count them for one (b, h): issued wgmma FLOPs over
    the causal tiles (diagonal tiles whole), the TMA bytes of the other side's tiles, the DRAM bytes
    of q, k, v, dout in and out, lse, dq, dk, dv out; persistent grids of 132 CTAs of 384 threads."""
    T, hs, Bn, NH, L = 1024, 64, 32, 12, 12
    Sx = kc.Shape(Bn, T)
    tiles = lambda br, bc: sum(-(-min(br * (i + 1), T) // bc) for i in range(-(-T // br)))  # noqa: E731
    if kind == "forward":
        sl = {"wgmma_flops": 2 * 2 * 64 * 128 * hs * tiles(64, 128), "tma_bytes": tiles(64, 128) * 128 * hs * 2 * 2 + T * hs * 2,
              "dram_read_sectors": 3 * T * hs * 2 // 32, "dram_write_sectors": (T * hs * 2 + T * 4) // 32, "grid": T // 64}
    else:
        sl = {"wgmma_flops": 4 * 2 * 64 * 64 * hs * tiles(64, 64), "tma_bytes": tiles(64, 64) * 64 * hs * 2 * 2 + 2 * T * hs * 2,
              "dram_read_sectors": (4 * T * hs * 2 + 2 * T * 4) // 32, "dram_write_sectors": 3 * T * hs * 2 // 32,
              "grid": T // 64}
    sl.update(block=384, dyn_smem=0, persistent=True)
    name = "cudnn_sdpa_" + kind
    fake = {"resources": {"sm_90a": {name: [{"template": "", "regs": 168, "smem": 200 * 1024, "stack": 0,
                                              "spill_stores": 0, "spill_loads": 0, "load_bytes": 0}]}}}
    r = pm.wgmma_result(pm.Launch("kernel", name, kind, {}), Sx, dev200, sl, fake)
    return r.time * L * 1e3


if cal is not None:
    fwd, bwd = cudnn_prediction("forward"), cudnn_prediction("backward")
    check(within(fwd, cal["forward_ms"], CLASS_TOL),
          "wgmma cost: cuDNN's flash forward predicted %.2f ms within 15%% of the measured %.2f (calibrated on it)" % (
              fwd, cal["forward_ms"]))
    check(within(bwd, cal["backward_ms"], OUT_OF_FIT_TOL),
          "wgmma cost: cuDNN's flash backward predicted %.2f ms within 20%% of the measured %.2f (not fitted on)" % (
              bwd, cal["backward_ms"]))

    def wgmma_mutant():
        pm.CAUSES["wgmma_calibrated"] = False
        try:
            return within(cudnn_prediction("forward"), cal["forward_ms"], CLASS_TOL)
        finally:
            pm.CAUSES["wgmma_calibrated"] = True
    mutant_caught("wgmma at the dense peak (a datasheet's rate, not the measured kernel's)", wgmma_mutant)

    def tma_mutant():
        saved = dev200.l2_read_bw
        dev200.l2_read_bw = dev200.l2_bw  # TMA at our cp.async kernels' fitted staging rate
        try:
            return within(cudnn_prediction("forward"), cal["forward_ms"], CLASS_TOL)
        finally:
            dev200.l2_read_bw = saved
    mutant_caught("TMA at the cp.async kernels' fitted L2 staging rate (3.0 TB/s), not the L2's published read rate",
                  tma_mutant)

# the step's graph launches and cuBLASLt epilogues: the model prices what it knows and stops on what
# it does not (helpers graph and epilogue fill devices.json's graph_gap_us and GEMM_EPILOGUES)
S1 = kc.Shape(8, 1024)
g = pm.Launch("gemm", "cublasLt", "forward", {"m": 3072, "n": 8192, "k": 768, "bias": True, "accumulate": False,
                                              "epilogue": ["no_such_epilogue"]})
try:
    pm.gemm_result(g, S1, dev200)
    stopped = False
except SystemExit as e:
    stopped = "no_such_epilogue" in str(e)
check(stopped, "a cuBLASLt epilogue the model does not price stops it, naming the flag")
kg = pm.Launch("kernel", "gelu_forward_kernel", "forward", {"graph": True})
try:
    gap = pm.launch_gap(kg, dev200)
    ok = dev200.graph_gap is not None and gap == dev200.graph_gap
except SystemExit as e:
    ok = dev200.graph_gap is None and "graph_gap_us" in str(e)
check(ok, "a launch replayed from a CUDA graph gets devices.json's graph_gap_us (or stops while it has none)")

# branch dwte: the dwte kernel's short buckets a warp each (kernel_costs.encoder_backward_dwte_kernel_warps),
# counted by hand from llmc/encoder.cuh's layout: buckets (token order) 100, 20 (block buckets: a block
# each, 3 trips and a barrier), then 9 short ones, 8 to a block: [3 x 8] (every bucket <= 4 positions:
# 3 trips) and [6] (5-8 positions: a second group of dout loads, 4 trips); C = 768: 3 blocks of 32 packs
# per bucket group. Grid (2 + 2) x 3; the mean block chain (3 + 3 + 3 + 4) / 4 trips, 2 / 4 barriers;
# shared memory only in the 2 x 3 block-bucket blocks; the longest block 2 + ceil(100 / 32) trips (the
# bounds, the first positions, then one dout trip per group of 32 positions, the next ones prefetched).
sizes = [100, 20] + [3] * 8 + [6]
Sd = kc.Shape(1, sum(sizes), distinct_tokens=len(sizes), max_bucket=100, bucket_sizes=sizes, **kc.config_for_depth(12))
cw = kc.encoder_backward_dwte_kernel_warps(Sd, {})
check((cw.grid, cw.block_trips, cw.block_barriers, cw.smem_wavefronts, cw.serial_trips)
      == (12, 13 / 4, 2 / 4, 6 * 14 * kc.PACK, 6),
      "encoder dwte, short buckets a warp each: grid, mean block chain, barriers, wavefronts, longest chain by hand",
      str((cw.grid, cw.block_trips, cw.block_barriers, cw.smem_wavefronts, cw.serial_trips)))
cu = kc.encoder_backward_dwte_kernel_warps(kc.Shape(1, 1000, distinct_tokens=300, max_bucket=20, **kc.config_for_depth(12)), {})
check((cu.grid, cu.block_trips) == ((1 + 38) * 3, (3 + 38 * 4) / 39),
      "encoder dwte without bucket sizes: one block bucket of kmax, the other D - 1 short, charged 4 trips a block",
      str((cu.grid, cu.block_trips)))

# make_fixture.py refuses bad input with one line and a non-zero exit
def make_fixture(*args):
    p = subprocess.run([sys.executable, os.path.join(HERE, "make_fixture.py")] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    return p.returncode, p.stderr.strip().splitlines()


rc, err = make_fixture("--out", "/nonexistent/x", "--card", "h200", "--date", "28-11-2026", "--no-trace")
check(rc == 2 and len(err) == 1 and "--date" in err[0], "make_fixture.py: a bad --date -> one line, exit 2", str(err))
h200 = os.path.join(fixtures.MEASURED, "h200_2026-11-28")
rc, err = make_fixture("--out", "/tmp", "--card", "h200", "--date", "2026-11-28", "--steps",
                       os.path.join(h200, "kernels_bench.csv"), "--no-trace")
check(rc == 2 and len(err) == 1 and "kernels_bench.csv" in err[0] and "header" in err[0],
      "make_fixture.py: a steps file with the wrong header -> one line naming it, exit 2", str(err))

flags = os.path.join(fixtures.MEASURED, "h200_2026-11-28_1f4c85f", "steps.csv")  # trainer "ours": not a flags row
rc, err = make_fixture("--out", "/tmp", "--card", "h200", "--date", "2026-11-28", "--steps-flags", flags, "--no-trace")
check(rc == 2 and len(err) == 1 and "steps.csv" in err[0] and "ours-ak" in err[0],
      "make_fixture.py: a --steps-flags row whose trainer is not ours-ak/ours-cg/ours-ak-cg -> one line naming it, exit 2", str(err))

print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
