"""
What each kernel of a training step costs, counted from the code: launch shape, DRAM bytes,
FLOPs on tensor cores and on CUDA cores, shared-memory wavefronts, and the longest chain of
dependent DRAM round trips one thread waits on.

Where the numbers come from, in order of preference:
  1. the emulator's per-launch counters (EMU_COUNTERS, dev/cuda/emu on branch emu-check), once the
     tree's emulator has them: perf_model.py then uses them and these functions are the closed-form
     theory the counters are tested against;
  2. today: these functions, each derived from its kernel's source in llmc/*.cuh (the comment says
     which loop gives which term). They are exact for what they count (e.g. GELU forward reads and
     writes exactly B*T*4C bf16 elements) and are checked against theory in test_perf_model.py.
A kernel this file does not know (a new one from another branch) stops the model with a message,
until the counters can describe it: no guessed cost.

Conventions. X = 2 bytes per bf16 element. "DRAM bytes" count each tensor once per launch (unique
bytes): re-reads that the code makes of a row or a tile it read moments before (layernorm's second
pass over its row, attention's K/V tiles read by every query block of a head, the classifier's second
pass over its logits row) are served by L1/L2 and are not counted. Nothing is assumed to stay in L2
from one kernel to the next. A FLOP is a multiply or an add (an FMA is 2). CUDA-core FLOPs are the
arithmetic the source writes per element; transcendental functions (expf, tanhf) count as 1 each
(they run on the special-function units, a separate pipe). A shared-memory wavefront is one pass of
a warp's request through the 32 banks (128 bytes per clock per SM): a request whose 32 lanes touch
distinct words of distinct banks, or the same word (broadcast), is one wavefront.
"""

X = 2  # bytes per floatX element in the bf16 build

# IEEE special functions as the project builds them (no --use_fast_math; cicc -prec_div=1
# -prec_sqrt=1 -ftz=0): each compiles to a sequence of FP32 instructions rather than one MUFU
# operation. Instructions per call (an estimate from libdevice's sequences: a MUFU approximation,
# Newton-Raphson or range-reduction FMAs and the special-case test; not read from SASS, which no
# tool here disassembles): div.rn.f32, sqrt.rn.f32, expf, tanhf.
IEEE_INSTRUCTIONS = {"div": 10, "sqrt": 8, "exp": 10, "tanh": 16}

# perf_model.CAUSES is this dict: the switches of issue 29's causes (test_perf_model.py's mutants)
CAUSES = {}


def cdiv(a, b):
    return -(-a // b)


class Cost:
    """One launch's counts. stream: which published streaming benchmark the kernel's memory
    traffic resembles ('read': loads only, 'scale': one load and one store stream, 'triad': two or
    more loads and a store), for the bandwidth-vs-bytes-in-flight curve of devices.json."""

    def __init__(self, grid, block, dyn_smem=0, read=0, write=0, tc_flops=0, cc_flops=0, smem_wavefronts=0,
                 serial_trips=1, stream="triad", note="", inflight=None, block_trips=0, block_barriers=0,
                 ieee=None, charge_stack=True, serial_phases=False, persistent=False):
        self.grid, self.block, self.dyn_smem = grid, block, dyn_smem
        self.read, self.write = read, write
        self.tc_flops, self.cc_flops = tc_flops, cc_flops
        self.smem_wavefronts = smem_wavefronts
        self.serial_trips = serial_trips
        self.stream = stream
        self.note = note
        # bytes of loads one thread has in flight in the loop that runs at this shape (None: the
        # PTX's busiest innermost loop, step_counts.py); a block's serial chain: dependent DRAM round
        # trips and block-wide barriers (each a __syncthreads with the reduction around it) one block
        # waits through from its start to its end, in order; IEEE special functions the build
        # compiles to instruction sequences (no --use_fast_math): {"div": n, "sqrt": n, "exp": n,
        # "tanh": n} per launch; charge_stack: ptxas' stack frame is stored (and read) per thread
        self.inflight = inflight
        self.block_trips, self.block_barriers = block_trips, block_barriers
        self.ieee = ieee or {}
        self.charge_stack = charge_stack
        # serial_phases: the code makes a block load all it needs before its arithmetic starts and
        # store after it ends (a barrier between): with one resident block per SM nothing overlaps
        # one phase with another, and the launch takes memory + compute (perf_model.memory_kernel_time)
        self.serial_phases = serial_phases
        # persistent: grid counts work items (rows), not blocks; the launcher starts one block per
        # resident slot (blocks per SM x SMs, at most the items) and each block walks its items in
        # turn, so block_trips is the chain of a block's first item and block_barriers the barriers
        # of ONE item, paid once per item the block walks (perf_model.memory_kernel_time)
        self.persistent = persistent

    @property
    def dram(self):
        return self.read + self.write


# ----------------------------------------------------------------------------
# the shape of one step: GPT-2's config and the batch

def config_for_depth(depth):
    """GPT-2's config for a fresh model "dN", as llmc/gpt2_layout.h's config_for_depth makes it:
    C 768/1024/1280/1600 at depths 12/24/36/48, else 64 N; heads of 64 channels; V 50257, Vp 50304."""
    C = {24: 1024, 36: 1280, 48: 1600}.get(depth, 64 * depth)
    return {"L": depth, "C": C, "NH": C // 64, "V": 50257, "Vp": 50304, "maxT": 1024}


class Shape:
    def __init__(self, B, T, L=12, C=768, NH=12, V=50257, Vp=50304, maxT=1024, distinct_tokens=None, max_bucket=None,
                 bucket_sizes=None):
        self.B, self.T, self.L, self.C, self.NH, self.V, self.Vp, self.maxT = B, T, L, C, NH, V, Vp, maxT
        self.BT = B * T
        self.hs = C // NH
        # the encoder backward's token buckets (encoder.cuh): how many distinct tokens a batch
        # holds, and how many positions the most frequent one has; data, not code (perf_model.py
        # takes them from the project's data file)
        self.D = distinct_tokens if distinct_tokens is not None else min(self.BT, V)
        self.kmax = max_bucket if max_bucket is not None else 1
        # every bucket's size, in ascending token order, where the data is known (None: only D and kmax)
        self.bucket_sizes = bucket_sizes
        # the measured tree's integer #defines of llmc/ (step_counts.header_defines; perf_model sets
        # them from the traced counts): a kernel's launch constants read from its header (define())
        self.defines = {}


# The launch constants the cost functions read from the tree's header (Shape.defines), with the
# value every header version registered in DERIVED_FROM had before the defines were recorded (a
# traced step from before then, e.g. the 2ef5778 fixture's, carries none).
DEFINE_DEFAULTS = {"LAYERNORM_BWD_ROWS": 32, "LAYERNORM_BWD_WARPS": 4,
                   # issue 29: a header without ATT90_FWD_OVERLAP has only the serial forward loop
                   "ATT90_FWD_OVERLAP": 0}


def define(S, name):
    return S.defines.get(name, DEFINE_DEFAULTS[name])


# ----------------------------------------------------------------------------
# encoder.cuh

def encoder_forward_kernel(S, ctx):
    # one thread per element of out (B,T,C): reads inp[bt] (shared by the C threads of a row),
    # wte's row of the token and wpe's row of the position, writes out
    n = S.BT * S.C
    return Cost(cdiv(n, 256), 256, read=4 * S.BT + (S.D + S.T) * S.C * X, write=n * X, cc_flops=n,
                serial_trips=2, stream="triad", note="inp, then wte[inp]: two dependent loads")


def encoder_backward_dwte_kernel(S, ctx):
    # grid (distinct tokens, ceil(C/256)), 256 threads: thread (k, c) walks its token's positions
    # in order, loading pos[j] and then dout[pos[j]][c]; every dout element is read once; dwte rows
    # read and written once each. The longest walk is the most frequent token's: kmax dependent
    # (pos, dout) pairs, which the compiler unrolls by 4 (PTX: 4 pairs per iteration), so
    # 2 * kmax / 4 round trips for that one thread.
    return Cost(S.D * cdiv(S.C, 256), 256, read=S.BT * S.C * X + 4 * (3 * S.BT + 1) + S.D * S.C * X,
                write=S.D * S.C * X, cc_flops=S.BT * S.C, serial_trips=2 * cdiv(S.kmax, 4), stream="read",
                note="longest token bucket %d positions" % S.kmax)


def encoder_backward_dwpe_kernel(S, ctx):
    # one thread per (t, c): dwpe[t][c] += sum over b of dout[b][t][c]
    n = S.T * S.C
    return Cost(cdiv(n, 256), 256, read=S.BT * S.C * X + n * X, write=n * X, cc_flops=S.BT * S.C, stream="triad")


# ----------------------------------------------------------------------------
# layernorm.cuh

def layernorm_forward_kernel(S, ctx):
    # one warp per row, LAYERNORM_WARPS = 4 rows per block, shared memory 4 rows of C floats.
    # Plain: reads the row, writes out. Fused (fused_residual_layernorm_forward): reads inp1 and
    # inp2, writes residual and out. Weight and bias (C each) are read by every row: from cache.
    # Shared memory: each lane stores its C/32 values once and reads them twice (variance, output):
    # 3 C/32 warp requests per row, each 32 consecutive floats = one wavefront.
    # FLOPs per element: sum 1, (x-m)^2 accumulated 3, normalize (x-m)*s*w+b 4, the residual add 1.
    fused = ctx.get("fused", False)
    rows = S.BT
    streams = 2 if fused else 1
    return Cost(cdiv(rows, 4), 128, dyn_smem=4 * S.C * 4,
                read=streams * rows * S.C * X + 2 * S.C * X, write=streams * rows * S.C * X + rows * 8,
                cc_flops=rows * S.C * (8 + (1 if fused else 0)), smem_wavefronts=rows * 3 * S.C // 32,
                stream="triad" if fused else "scale", note="fused residual" if fused else "")


def layernorm_backward_dinp_kernel(S, ctx):
    # one warp per row: two passes over the row (the second from L1/L2), reading inp, dout and
    # the weight; dinp is read and written (+=). mean and rstd: 8 bytes per row.
    # FLOPs per element: pass 1 norm 2, dnorm 1, two sums 3; pass 2 norm 2, dnorm 1, dinp 4, += 1.
    rows = S.BT
    return Cost(cdiv(rows, 4), 128, read=3 * rows * S.C * X + S.C * X + rows * 8, write=rows * S.C * X,
                cc_flops=rows * S.C * 14, stream="triad")


def layernorm_backward_dweight_partial_kernel(S, ctx):
    # grid (ceil(C/32), LAYERNORM_CHUNKS = 64), block (32, 8): each thread sums norm * dout and
    # dout down its column over its chunk's rows; reads dout and inp (and mean, rstd per row from
    # cache), writes 64 x 2C float partials. Shared: 2 x 8 x 32 floats stored once, read by one warp.
    rows = S.BT
    blocks = cdiv(S.C, 32) * 64
    return Cost(blocks, 256, read=2 * rows * S.C * X + rows * 8, write=64 * 2 * S.C * 4, cc_flops=rows * S.C * 5,
                smem_wavefronts=blocks * (2 * 8 + 2 * 8), stream="read")


def layernorm_backward_dweight_finish_kernel(S, ctx):
    # one thread per column: adds the 64 chunk partials in order (an unrolled loop of independent
    # loads), then dweight and dbias +=
    return Cost(cdiv(S.C, 256), 256, read=64 * 2 * S.C * 4 + 2 * S.C * X, write=2 * S.C * X, cc_flops=2 * 64 * S.C,
                serial_trips=2, stream="read")


# ----------------------------------------------------------------------------
# matmul.cuh: the bias gradient (the products themselves are cuBLASLt calls, costed in perf_model.py)

def dbias_partial_kernel(S, ctx):
    # grid (ceil(OC/32), DBIAS_CHUNKS = 64), block (32, 8): column sums of dout (BT, OC) per chunk
    OC = ctx["OC"]
    blocks = cdiv(OC, 32) * 64
    return Cost(blocks, 256, read=S.BT * OC * X, write=64 * OC * 4, cc_flops=S.BT * OC,
                smem_wavefronts=blocks * (8 + 8), stream="read", note="OC %d" % OC)


def dbias_finish_kernel(S, ctx):
    OC = ctx["OC"]
    return Cost(cdiv(OC, 256), 256, read=64 * OC * 4 + OC * X, write=OC * X, cc_flops=64 * OC, serial_trips=2,
                stream="read", note="OC %d" % OC)


# ----------------------------------------------------------------------------
# attention.cuh: FlashAttention-style, fp32 on CUDA cores (today's kernels)
#
# A block owns ATT_ROWS = 64 rows of one (b, h) and walks ATT_TILE = 32-row tiles of the other side,
# staged in shared memory as fp32; a row is split over G = hs/16 lanes holding 16 dims each
# (dims g, g+G, ...), so the G lanes of a row read G consecutive words and the 8 rows of a warp
# read the same words: every shared load is one wavefront (no conflict, broadcast).

ATT_ROWS, ATT_TILE, ATT_DIMS = 64, 32, 16


def _tiles_forward(T):
    # query block i visits keys [0, min(64(i+1), T)) in tiles of 32 (the forward and dQ kernels)
    return sum(cdiv(min(ATT_ROWS * (i + 1), T), ATT_TILE) for i in range(cdiv(T, ATT_ROWS)))


def _tiles_dkdv(T):
    # key block j visits the query tiles from its first key, 64 j, to T
    return sum(cdiv(T - ATT_ROWS * j, ATT_TILE) for j in range(cdiv(T, ATT_ROWS)))


def _attention_launch(S):
    G = S.hs // ATT_DIMS
    return cdiv(S.T, ATT_ROWS) * S.NH * S.B, ATT_ROWS * G


def attention_forward_kernel(S, ctx):
    # per staged tile: K and V tiles stored to shared (2 x 32 x hs floats: 2 x hs warp requests),
    # then per thread and key: 16 loads of k and 16 of v (32 wavefronts per warp), 16 FMAs for q.k
    # and 16 for acc += p v; per tile the online-softmax rescale of 16 accumulators.
    grid, threads = _attention_launch(S)
    warps = threads // 32
    tiles = S.B * S.NH * _tiles_forward(S.T)
    smem = tiles * (warps * ATT_TILE * 2 * ATT_DIMS + 2 * ATT_TILE * S.hs // 32)
    flops = tiles * threads * (ATT_TILE * 2 * 2 * ATT_DIMS + ATT_DIMS)
    return Cost(grid, threads, read=3 * S.BT * S.C * X, write=S.BT * S.C * X + S.B * S.NH * S.T * 4, cc_flops=flops,
                smem_wavefronts=smem, stream="read", note="%d key tiles per (b,h)" % _tiles_forward(S.T))


def attention_backward_rowdot_kernel(S, ctx):
    # one warp per (b, t, h): D = dout . out over the head's dims. issue 29: the loop that runs at
    # hs = 64 is nvcc's remainder loop of `for (i = lane; i < hs; i += 32)`, one iteration at a
    # time (the unrolled-by-4 body the PTX reader picks, 16 bytes, runs only from hs = 128): two
    # 2-byte loads in flight per thread, and each iteration's FMA waits on its loads before the
    # next iteration issues (in-order issue): hs/32 round trips per block, then a warp reduction
    rows = S.B * S.T * S.NH
    return Cost(cdiv(rows, 8), 256, read=2 * S.BT * S.C * X, write=rows * 4, cc_flops=2 * S.BT * S.C, stream="read",
                inflight=2 * X, block_trips=cdiv(S.hs, 32), block_barriers=1)


def attention_backward_dkdv_kernel(S, ctx):
    # per staged tile: q and dout tiles to shared (2 x hs requests) and lse, D (1 + 1); per thread
    # and query: 16 loads each of q and dout for q.k and dout.v, 16 each again for dv += p dout and
    # dk += ds q, and lse, D (broadcast): 66 wavefronts per warp; 64 FMAs.
    grid, threads = _attention_launch(S)
    warps = threads // 32
    tiles = S.B * S.NH * _tiles_dkdv(S.T)
    smem = tiles * (warps * ATT_TILE * (4 * ATT_DIMS + 2) + 2 * ATT_TILE * S.hs // 32 + 2)
    flops = tiles * threads * ATT_TILE * 4 * 2 * ATT_DIMS
    return Cost(grid, threads, read=4 * S.BT * S.C * X + 2 * S.B * S.NH * S.T * 4, write=2 * S.BT * S.C * X,
                cc_flops=flops, smem_wavefronts=smem, stream="read")


def attention_backward_dq_kernel(S, ctx):
    # per staged tile: k and v tiles to shared; per thread and key: 16 loads of k for q.k, 16 of
    # v for dout.v, 16 of k again for dq += ds k: 48 wavefronts per warp; 48 FMAs.
    grid, threads = _attention_launch(S)
    warps = threads // 32
    tiles = S.B * S.NH * _tiles_forward(S.T)
    smem = tiles * (warps * ATT_TILE * 3 * ATT_DIMS + 2 * ATT_TILE * S.hs // 32)
    flops = tiles * threads * ATT_TILE * 3 * 2 * ATT_DIMS
    return Cost(grid, threads, read=4 * S.BT * S.C * X + 2 * S.B * S.NH * S.T * 4, write=S.BT * S.C * X,
                cc_flops=flops, smem_wavefronts=smem, stream="read")


# ----------------------------------------------------------------------------
# gelu.cuh: one thread per element of (B,T,4C)

def gelu_forward_kernel(S, ctx):
    # reads inp, writes out; per element x^3 and the polynomial (5), tanhf (1), 0.5 x (1 + th) (3)
    n = S.BT * 4 * S.C
    return Cost(cdiv(n, 256), 256, read=n * X, write=n * X, cc_flops=9 * n, stream="scale")


def gelu_backward_kernel(S, ctx):
    # reads inp and dout, writes dinp (in place); the derivative ~ 14 operations and tanhf, x dout
    n = S.BT * 4 * S.C
    return Cost(cdiv(n, 256), 256, read=2 * n * X, write=n * X, cc_flops=16 * n, stream="triad")


# ----------------------------------------------------------------------------
# fused_classifier.cuh: one block of 1024 threads per row of logits (BT, Vp)

def fused_classifier_kernel(S, ctx):
    # pass 1 reads the row in 16-byte packs (online max/sum: one expf and ~4 operations per
    # logit), pass 2 reads it again from L1/L2 and overwrites it with dlogits (expf, ~4 operations)
    n = S.BT * S.Vp
    return Cost(S.BT, 1024, read=n * X + 4 * S.BT, write=n * X + 4 * S.BT, cc_flops=10 * n, stream="scale")


# ----------------------------------------------------------------------------
# adamw.cuh and global_norm.cuh: per tensor / per unit (ctx["n"] elements)

def adamw_kernel(S, ctx):
    # per element: reads grad (bf16), master, m, v (fp32); writes master, m, v and params (bf16);
    # ~ 20 operations including sqrtf and a division
    n = ctx["n"]
    return Cost(min(cdiv(n, 512), 1 << 20), 512, read=n * (X + 12), write=n * (12 + X), cc_flops=20 * n,
                stream="triad", note="%d elements" % n)


def global_norm_partial_kernel(S, ctx):
    # a fixed grid of 1024 blocks x 512 threads, each thread squaring and summing (in double) its
    # strided elements; one partial per block
    # issue 29: a thread's elements x[tid], x[tid + nthreads], ... are one 2-byte load per iteration
    # whose fp64 square-add waits on it before the next load issues: ceil(n / 524,288) round trips
    # per block, then a block sum (2 barriers); 1,024 blocks of 512 threads are 2 waves at 4 per SM
    n = ctx["n"]
    return Cost(1024, 512, read=n * X, write=1024 * 8, cc_flops=2 * n, smem_wavefronts=1024 * 32, stream="read",
                note="%d elements" % n, block_trips=cdiv(n, 1024 * 512), block_barriers=2)


def global_norm_finish_kernel(S, ctx):
    return Cost(1, 1024, read=1024 * 8 + 8, write=8, cc_flops=1024, serial_trips=2, stream="read")


# ----------------------------------------------------------------------------
# issue 22's versions (branch kern16): the 16-byte kernels (Pack128 in llmc/cuda_common.cuh: 8 bf16
# per thread and access), the one-pass layernorm backward, AdamW once per unit and the norm once.
# DRAM bytes per tensor are the same as the versions above unless said; launch shapes differ, and
# the bytes in flight per thread come from the PTX as for every kernel (step_counts.py).

PACK = 16 // X  # bf16 elements per 16-byte pack


def _packs(n):
    return cdiv(n, PACK)


def encoder_forward_kernel_16(S, ctx):
    # one thread per pack of out (B,T,C): 16 bytes of wte's and wpe's rows read, 16 written
    c = encoder_forward_kernel(S, ctx)
    c.grid = cdiv(S.BT * _packs(S.C), 256)
    return c


def encoder_backward_dwte_kernel_16(S, ctx):
    # grid (distinct tokens, ceil(packs/256)): thread (k, g) walks its token's positions for one pack
    c = encoder_backward_dwte_kernel(S, ctx)
    c.grid = S.D * cdiv(_packs(S.C), 256)
    # issue 29: the H200 measured one loaded DRAM round trip per position of the longest bucket
    # (1.173 ms / 2,496 positions), not one per 4: each position's dout pack is added into the same
    # 8 accumulators, and the fp32 adds of position i wait on its load, so the unrolled loads do not
    # overlap the chain
    c.serial_trips = S.kmax
    c.inflight = 16
    return c


def encoder_backward_dwpe_kernel_16(S, ctx):
    c = encoder_backward_dwpe_kernel(S, ctx)
    c.grid = cdiv(S.T * _packs(S.C), 256)
    return c


def _ln_threads(C):
    # layernorm_threads: one thread per pack of a row, rounded up to whole warps
    return cdiv(_packs(C), 32) * 32


def layernorm_forward_kernel_16(S, ctx):
    # one row per block, thread t holding pack t in registers (no row cache in shared memory); the
    # same DRAM bytes and FLOPs as above. Shared memory: block_sum twice per row (mean, variance),
    # each a store by every warp's lane 0 and a load per warp: 4 x warps wavefronts per row.
    fused = ctx.get("fused", False)
    rows, streams, threads = S.BT, 2 if fused else 1, _ln_threads(S.C)
    # issue 29: a block is one row: its loads (one round trip, 16 bytes per input pack per thread)
    # then two block sums (2 barriers each) and the IEEE divisions by C and the rsqrt's division
    return Cost(rows, threads, read=streams * rows * S.C * X + 2 * S.C * X, write=streams * rows * S.C * X + rows * 8,
                cc_flops=rows * S.C * (8 + (1 if fused else 0)), smem_wavefronts=rows * 4 * (threads // 32),
                stream="triad" if fused else "scale", note="fused residual" if fused else "",
                inflight=16 * streams, block_trips=1, block_barriers=4, ieee={"div": 3 * rows * threads})


def layernorm_backward_kernel(S, ctx):
    # one pass: blocks of LAYERNORM_BWD_ROWS = 32 rows, thread t owning pack t of each: dout, inp
    # and dinp read once, dinp written, weight once per block (cache), mean and rstd per row; the
    # block's column sums (2 C floats) written once. FLOPs per element: norm 2, dnorm 1, the two
    # row sums 3, dinp 4 and += 1, dweight and dbias terms 3. Shared: two block sums per row.
    rows, threads, R = S.BT, _ln_threads(S.C), define(S, "LAYERNORM_BWD_ROWS")
    chunks = cdiv(rows, R)
    # issue 29: the rows of a block run one after another: each row's loads (mean, rstd and the
    # inp, dout, dinp packs: one round trip, 48 bytes per thread) wait on the previous row's two
    # block sums (4 barriers), and each row divides twice by C (IEEE div.rn)
    per_block = min(R, rows)
    return Cost(chunks, threads, read=3 * rows * S.C * X + S.C * X + rows * 8, write=rows * S.C * X + chunks * 2 * S.C * 4,
                cc_flops=rows * S.C * 14, smem_wavefronts=rows * 4 * (threads // 32), stream="triad",
                note="%d chunks of %d rows" % (chunks, R), inflight=3 * 16, block_trips=per_block,
                block_barriers=4 * per_block, ieee={"div": 2 * rows * threads})


def layernorm_backward_dweight_kernel(S, ctx):
    # grid ceil(C/32), block (32, 32): chunk lane y sums chunks y, y+32, ... of 32 columns (the
    # loads of a lane are independent), then lane 0 adds the 32 lanes from shared memory (each of
    # the 32 warps stores 2 rows of 32 floats, warp 0 reads 2 x 32: 128 wavefronts per block)
    chunks = cdiv(S.BT, define(S, "LAYERNORM_BWD_ROWS"))
    blocks = cdiv(S.C, 32)
    return Cost(blocks, 1024, read=chunks * 2 * S.C * 4 + 2 * S.C * X, write=2 * S.C * X,
                cc_flops=2 * chunks * S.C, smem_wavefronts=blocks * 128, serial_trips=2, stream="read",
                note="%d chunks" % chunks)


def dbias_partial_kernel_16(S, ctx):
    # grid (ceil(packs/32), 64), block (32, 8): thread x sums pack x of its rows; shared
    # sums[8][PACK][32]: every warp stores PACK conflict-free rows, warp 0 reads 8 x PACK
    OC = ctx["OC"]
    blocks = cdiv(_packs(OC), 32) * 64
    return Cost(blocks, 256, read=S.BT * OC * X, write=64 * OC * 4, cc_flops=S.BT * OC,
                smem_wavefronts=blocks * (8 * PACK + 8 * PACK), stream="read", note="OC %d" % OC)


def gelu_forward_kernel_16(S, ctx):
    c = gelu_forward_kernel(S, ctx)
    c.grid = cdiv(_packs(S.BT * 4 * S.C), 256)  # one thread per pack
    c.inflight, c.block_trips = 16, 1
    c.ieee = {"tanh": S.BT * 4 * S.C}  # tanhf without fast math
    return c


def gelu_backward_kernel_16(S, ctx):
    c = gelu_backward_kernel(S, ctx)
    c.grid = cdiv(_packs(S.BT * 4 * S.C), 256)
    c.inflight, c.block_trips = 32, 1
    c.ieee = {"tanh": S.BT * 4 * S.C}
    return c


def fused_classifier_kernel_2pass(S, ctx):
    # issue 29: the second pass over the row is charged at DRAM (a 100 KB row per block, 2 blocks
    # of 1024 threads per SM: 264 rows in flight are 26 MB, and between a row's two passes the
    # other SMs stream ~the L2's 50 MB through: measured 3.33 ms at B=32 against 2.3 ms for three
    # DRAM passes at the measured copy bandwidth, not the 1.6 ms of two); pass 1 merges each logit
    # into the online state (two IEEE expf: the rescale and the new term), pass 2 one expf per logit
    # and the reciprocal; each block: pass 1's loads, a block reduction (1 barrier), pass 2's
    n = S.BT * S.Vp
    per_thread = cdiv(_packs(S.Vp), 1024)
    passes = 2 if CAUSES["classifier_dram_pass2"] else 1
    return Cost(S.BT, 1024, read=passes * n * X + 4 * S.BT, write=n * X + 4 * S.BT, cc_flops=10 * n, stream="scale",
                inflight=16, block_trips=2 * per_thread, block_barriers=1, ieee={"exp": 3 * n, "div": S.BT * 1024})


def adamw_kernel_unit(S, ctx):
    # issue 29: the same bytes; the update's IEEE divisions (3) and square root per element, the
    # loads (14 bytes per thread) issued only after the tensor lookup (which reads the tensor table
    # from ptxas' stack frame: charged in perf_model.py from ptxas' stack bytes)
    c = adamw_kernel(S, ctx)
    n = ctx["n"]
    c.inflight = X + 12
    c.ieee = {"div": 3 * n, "sqrt": n}
    return c


def adamw_kernel_vec4(S, ctx):
    # issue 30 item 1 (llmc/adamw.cuh, ADAMW_VEC = 4): the same bytes, divisions and square roots
    # per element; a thread takes four consecutive elements with one 16-byte load each of master,
    # m and v and one 8-byte load of the bf16 gradients, all issued before the first is used (the
    # PTX: ld.global.v4.f32 x 3, ld.global.nc.v4.u16), so 4 x 14 bytes in flight per thread;
    # 512-thread blocks of 2,048 elements. (The one-at-a-time path, for a shard not aligned to 4
    # elements and the groups at the padding, does not run at GPT-2's units.)
    c = adamw_kernel_unit(S, ctx)
    n = ctx["n"]
    c.grid = min(cdiv(n, 512 * 4), 1 << 20)
    c.inflight = 4 * (X + 12)
    return c


def global_norm_partial_kernel_unrolled(S, ctx):
    # issue 30 (llmc/global_norm.cuh, GLOBAL_NORM_UNROLL = 8): the same grid, bytes and order of
    # adds; a thread loads 8 of its strided elements before it adds them (the PTX: 8 ld.u16, then 8
    # fma.rn.f64), so a block waits one round trip per 8 elements (then one per element of the
    # remainder, under 8) and keeps 16 bytes in flight per thread
    c = global_norm_partial_kernel(S, ctx)
    per_thread = cdiv(ctx["n"], 1024 * 512)
    c.block_trips = per_thread // 8 + per_thread % 8
    c.inflight = 8 * X
    return c


# The issue-22 tree's functions where its kernels differ from 2e0af91's (the rest are the same:
# the classifier already read 16-byte packs, dbias_finish is unchanged, and adamw_kernel and the
# norm's kernels cost per element as before; perf_model.py gives them a unit's, or every unit's,
# elements per launch).
KERNELS_ISSUE22 = {
    "encoder_forward_kernel": encoder_forward_kernel_16,
    "encoder_backward_dwte_kernel": encoder_backward_dwte_kernel_16,
    "encoder_backward_dwpe_kernel": encoder_backward_dwpe_kernel_16,
    "layernorm_forward_kernel": layernorm_forward_kernel_16,
    "layernorm_backward_kernel": layernorm_backward_kernel,
    "layernorm_backward_dweight_kernel": layernorm_backward_dweight_kernel,
    "dbias_partial_kernel": dbias_partial_kernel_16,
    "gelu_forward_kernel": gelu_forward_kernel_16,
    "gelu_backward_kernel": gelu_backward_kernel_16,
    "fused_classifier_kernel": fused_classifier_kernel_2pass,
    "adamw_kernel": adamw_kernel_unit,
}


# ----------------------------------------------------------------------------
# issue 30's versions (branch kernels): a header recorded under "issue 30" in DERIVED_FROM is
# costed with these over issue 22's.

def encoder_backward_dwte_kernel_30(S, ctx):
    # grid (distinct tokens, ceil(packs/32)), block (32, 8): lane = pack, warp = slice; slice s takes
    # positions s, s+8, ... of its bucket, 4 at a time (4 pos loads, then 4 dout packs, then the adds).
    # DRAM bytes as before plus the order array (4 BT + 1 ints copied). Shared: slices 1..7 store
    # PACK rows of 32 floats, slice 0 reads them: 14 PACK wavefronts per block, one barrier.
    # Re-derived with the calibrated rules (perfmodel, issue 30 item 1's kernels): a block's chain,
    # once per wave of blocks (~22 waves at B=32 on the project's data), is order[x] -> start[k] (2
    # dependent round trips), one group of (pos, dout) for a bucket of <= 32 positions (2 more), the
    # barrier, then token[k] -> dwte's row (2: loads are not moved across the barrier): 6 trips and 1
    # barrier. The longest block, the commonest token's, walks ceil(kmax/32) groups of 2 dependent
    # trips after its 2, then its 2 (serial_trips). With many distinct tokens (the bench's uniform
    # draws, or a corpus less repetitive than tinyshakespeare) the waves' chains set the time: 4
    # blocks of 8 warps per SM (__launch_bounds__) wait through 6 round trips each.
    blocks = S.D * cdiv(_packs(S.C), 32)
    return Cost(blocks, 256, read=S.BT * S.C * X + 4 * (4 * S.BT + 1) + S.D * S.C * X,
                write=S.D * S.C * X, cc_flops=S.BT * S.C, smem_wavefronts=blocks * 14 * PACK,
                serial_trips=4 + 2 * cdiv(S.kmax, 32), stream="read", block_trips=6, block_barriers=1,
                note="longest token bucket %d positions, 8 slices" % S.kmax)


def layernorm_backward_warp_kernel(S, ctx):
    # a WARP per chunk of 32 rows (layernorm.cuh, where C <= 1024 in bf16), 4 warps (chunks) per
    # block: lane l holds packs l, l+32, ... of a row in registers. DRAM bytes as the block
    # version (dout, inp, dinp read once, dinp written, mean/rstd, 2 C floats per chunk); weight
    # read once per warp (from L2 after the first). FLOPs per element: the block version's 14 plus
    # norm and dnorm recomputed for dinp (3). No shared memory, no barrier: the two row sums are
    # 2 x 5 shuffles.
    # Re-derived with the calibrated rules (perfmodel): the loop that runs at C = 768 holds P =
    # ceil(C/8/32) = 3 packs per lane and issues all 3P pack loads and mean, rstd before the first
    # use: 48 P + 8 bytes in flight per thread. Each warp walks its 32 rows in turn, one dependent
    # round trip each (the next row's loads wait behind this row's dinp stores: the compiler cannot
    # prove they do not alias): 32 trips per block, no block barrier (the warp sums are shuffles).
    # Two IEEE divisions per row and lane (the two means). Occupancy from ptxas' registers (168 at
    # P = 3: 3 blocks of 128 threads per SM), so at B*T > 3 x 132 x 4 x 32 rows the grid has a
    # second, partial wave (B = 64), whose idle slots stretch the memory time.
    # (32 rows and 4 warps: LAYERNORM_BWD_ROWS and LAYERNORM_BWD_WARPS, read from the tree's header)
    rows, R, W = S.BT, define(S, "LAYERNORM_BWD_ROWS"), define(S, "LAYERNORM_BWD_WARPS")
    chunks = cdiv(rows, R)
    P = cdiv(_packs(S.C), 32)
    return Cost(cdiv(chunks, W), 32 * W, read=3 * rows * S.C * X + chunks * S.C * X + rows * 8,
                write=rows * S.C * X + chunks * 2 * S.C * 4, cc_flops=rows * S.C * 17, serial_trips=R,
                stream="triad", inflight=3 * 16 * P + 8, block_trips=min(R, rows), block_barriers=0,
                ieee={"div": 2 * rows * 32}, note="%d chunks of %d rows, a warp each" % (chunks, R))


def layernorm_backward_warp_kernel_smem(S, ctx):
    # branch lnbwd (issue 30): the same kernel with each lane's dweight/dbias column sums in shared
    # memory instead of registers (layernorm.cuh), so P = 3 fits 128 registers and 4 blocks of 4
    # warps per SM (ptxas: the occupancy comes from its registers and the 24 KB of static shared
    # memory per block at P = 3, as for every kernel). DRAM bytes, FLOPs, bytes in flight and the
    # dependent round trip per row as layernorm_backward_warp_kernel above. Shared memory: per row
    # and warp, a load and a store of each of the lane's 2 x PACK x P sums (one conflict-free
    # 128-byte wavefront each: the 32 lanes read 32 consecutive words), and per chunk the sums
    # zeroed (a store each) and read back for the partial sums (a load each).
    c = layernorm_backward_warp_kernel(S, ctx)
    rows, chunks, P = S.BT, cdiv(S.BT, define(S, "LAYERNORM_BWD_ROWS")), cdiv(_packs(S.C), 32)
    c.smem_wavefronts = rows * 4 * PACK * P + chunks * 4 * PACK * P
    c.note += ", column sums in shared memory"
    return c


def layernorm_nsums(ctx, arity):
    """The column sums a layernorm backward launch keeps (llmc/layernorm.cuh's NS: 2, or 4 with the
    residual's): the last of its `arity` template arguments as the trace labels the launch ("<3, 4>":
    the warp kernel at P = 3 with 4 sums, arity 2; "<4>": the block kernel or the dweight kernel,
    arity 1); 2 where the label has another arity (a tree before the residual's sums: the warp
    kernel <P>, the other two untemplated)."""
    t = ctx.get("template", "")
    args = [a.strip() for a in t.strip("<>").split(",")] if t else []
    if len(args) != arity or not args[-1].isdigit():
        return 2
    return int(args[-1])


def layernorm_backward_warp_kernel_residual(S, ctx):
    # the main after f95b970 (issue 30 item 2): the same kernel with NS column sums (template
    # <P, NS>): NS = 2 as layernorm_backward_warp_kernel_smem; NS = 4 (ln2's backward in the
    # trainer) adds per element two fp32 adds (dinp as read, as written) and per row and warp a
    # shared load and store of each of the 2 more sums; the chunk's partial sums are NS C floats;
    # a block has layernorm_bwd_warps(P, NS) warps (2 where 4 warps' sums pass 48 KB: NS = 4, P = 4)
    NS = layernorm_nsums(ctx, 2)
    c = layernorm_backward_warp_kernel_smem(S, ctx)
    rows, chunks, P = S.BT, cdiv(S.BT, define(S, "LAYERNORM_BWD_ROWS")), cdiv(_packs(S.C), 32)
    W = define(S, "LAYERNORM_BWD_WARPS")
    if NS * P * PACK * 32 * 4 * W > 48 * 1024:
        W //= 2
    c.grid, c.block = cdiv(chunks, W), 32 * W
    c.write += chunks * (NS - 2) * S.C * 4
    c.cc_flops += rows * S.C * (NS - 2)
    c.smem_wavefronts = rows * 2 * NS * PACK * P + chunks * 2 * NS * PACK * P
    c.note += ", %d column sums" % NS
    return c


def layernorm_backward_kernel_residual(S, ctx):
    # the block kernel (a block per chunk, where a warp cannot hold the row) with NS sums in
    # registers: NS = 4 adds two fp32 adds per element and 2 C floats per chunk
    NS = layernorm_nsums(ctx, 1)
    c = layernorm_backward_kernel(S, ctx)
    chunks = cdiv(S.BT, define(S, "LAYERNORM_BWD_ROWS"))
    c.write += chunks * (NS - 2) * S.C * 4
    c.cc_flops += S.BT * S.C * (NS - 2)
    return c


def layernorm_backward_dweight_kernel_residual(S, ctx):
    # the chunks' NS sums of each column (template <NS>, NS independent loads a chunk): NS / 2
    # times the 2-sum kernel's loads, adds, shared stores and writes
    NS = layernorm_nsums(ctx, 1)
    c = layernorm_backward_dweight_kernel(S, ctx)
    k = NS / 2
    c.read, c.write, c.cc_flops, c.smem_wavefronts = c.read * k, c.write * k, c.cc_flops * k, c.smem_wavefronts * k
    return c


def classifier_pass2_dram_fraction(S, threads=1024):
    """The share of the classifier's second pass over a row that comes from DRAM again (issue 30's
    kernel, which rereads each thread's packs last first). A pack's reuse distance is the bytes
    its SM reads between the two reads of it: with the row's packs dealt round-robin to the 1024
    threads and 2 blocks per SM, the pack read k-th from last in pass 1 is reread after 2k pack
    steps of 32 KB each. The measured kernel (2ef5778, forward order: every pack at a distance of
    P = 6-7 steps, ~200 KB per SM, ~26 MB over the GPU) shows its second pass did not hit (3.33 ms
    measured, three DRAM passes 2.9); nothing measured shows a hit at a shorter distance except
    distance 0 (the pack pass 1 read last is the one pass 2 reads first, in L1). So: the one pack
    per thread at distance 0 is a hit, every other pack comes from DRAM (an upper bound; the
    lower, where distances under the measured miss hit too (k < 3), is in dev/cuda/NOTES.md)."""
    packs = _packs(S.Vp)
    hits = min(packs, threads)
    if not CAUSES.get("classifier_dram_pass2", True):
        return 0.0
    return (packs - hits) / packs


def fused_classifier_kernel_30(S, ctx):
    # as fused_classifier_kernel (one block of 1024 threads per row, 16-byte packs; DRAM: the row
    # read once, dlogits written once), with pass 1 per pack: a max over its 8 logits, 8
    # independent expf(x - max) summed, one merge (one expf, a compare) per pack instead of one per
    # logit: ~4 operations per logit; pass 2 walks the thread's packs last first and writes dlogits
    # with st.global.cs (evict first): expf and ~4 operations per logit.
    # Re-derived with the calibrated rules (perfmodel): pass 2 from DRAM but for the distance-0
    # pack per thread (classifier_pass2_dram_fraction); IEEE expf 8 + 1 per pack in pass 1 and one
    # per logit in pass 2, one division per thread (1 / sum); the loop that runs issues one 16-byte
    # load per iteration whose expf waits on it (the PTX's busiest loop, 16 bytes): ceil(packs /
    # 1024) round trips per pass, the block's reduction (one barrier) between them.
    n = S.BT * S.Vp
    per_thread = cdiv(_packs(S.Vp), 1024)
    f2 = classifier_pass2_dram_fraction(S)
    return Cost(S.BT, 1024, read=int((1 + f2) * n * X) + 4 * S.BT, write=n * X + 4 * S.BT, cc_flops=9 * n,
                stream="scale", inflight=16, block_trips=2 * per_thread, block_barriers=1,
                ieee={"exp": n + n * 9 // 8, "div": S.BT * 1024},
                note="second pass in reverse, %.0f%% of it from DRAM, streaming stores" % (100 * f2))


def fused_classifier_kernel_held(S, ctx):
    # branch classifier (issue 30 item 1): one block of 1024 threads per row, each thread's packs
    # tid + i 1024 (i < 7) loaded into registers before the first is used (the PTX: 7 ld.global.v4
    # ahead of the first ex2), folded per pack as fused_classifier_kernel_30's pass 1, the block's
    # reduction (one barrier), then dlogits written from the registers with st.global.cs. Re-derived
    # with the calibrated rules: DRAM the row read once and dlogits written once (the byte floor);
    # bytes in flight per thread the row's 16-byte packs over the block's threads (98 bytes at
    # Vp 50304: 6 or 7 packs each), one round trip per block (pass 2 loads nothing) and the barrier;
    # IEEE expf 8 + 1 per pack in pass 1 and one per logit in pass 2, one division per thread; the
    # occupancy from ptxas' registers (62 on sm_90: one block of 1024 threads per SM).
    # model (the 1f4c85f run): the block's phases run one after another (serial_phases): every
    # thread's 7 loads land before pass 1's arithmetic, the barrier, pass 2's arithmetic before and
    # between its stores; with one block per SM no other block fills the SM meanwhile, so the launch
    # is its DRAM time plus its arithmetic, not the larger (ncu: 3.25 ms at B=32, 1.93 + 1.28 the
    # two terms; the held packs saved no time over 2ef5778's kernel, 3.33 ms)
    n = S.BT * S.Vp
    return Cost(S.BT, 1024, read=n * X + 4 * S.BT, write=n * X + 4 * S.BT, cc_flops=9 * n, stream="scale",
                inflight=16 * _packs(S.Vp) / 1024, block_trips=1, block_barriers=1,
                ieee={"exp": n + n * 9 // 8, "div": S.BT * 1024}, serial_phases=True,
                note="each thread's packs held in registers: the row read once, streaming stores")


def fused_classifier_streamed_kernel(S, ctx):
    # branch cls (issue 30 item 1): fused_classifier_kernel_held's rows, walked by a persistent grid
    # of one block of 1024 threads per SM (ptxas: 64 registers on sm_90, the SM's whole register
    # file; and two rows of dynamic shared memory, 201,216 bytes at Vp 50304); each block copies
    # the next row into shared memory with cp.async (16 bytes per instruction) at the top of this
    # row's iteration, then computes this row from shared memory -> registers as the held kernel
    # does. DRAM: the row read once, dlogits written once (the byte floor), the same arithmetic and
    # IEEE expf as fused_classifier_kernel_held; shared memory: per row the cp.async writes and
    # the ld.shared.v4 reads, 16 bytes a lane (a warp's 32 consecutive packs, 512 bytes: 4
    # wavefronts each way). Bytes in flight per thread: its packs of the next row (98 at Vp 50304).
    # The chain: a block's first row waits one round trip; later rows were requested a whole row
    # earlier; one barrier (the block reduction) per row.
    # ASSUMED (not measured, the point of the kernel): with the next row's read in flight during
    # this row's arithmetic and stores, the phases overlap across rows: no serial_phases, so the
    # launch takes the larger of its DRAM time and its arithmetic (perf_model's roofline), not
    # their sum. What could break it: the dlogit stores (100 KB per SM per row, issued in pass 2)
    # back-pressuring the arithmetic; the next row's read not landing within one row's arithmetic
    # (it has ~5 us for 100 KB per SM: ~20 GB/s per SM, 2.6 TB/s over 132 SMs, below the curve).
    n = S.BT * S.Vp
    packs = _packs(S.Vp)
    return Cost(S.BT, 1024, dyn_smem=2 * S.Vp * X, read=n * X + 4 * S.BT, write=n * X + 4 * S.BT, cc_flops=9 * n,
                smem_wavefronts=S.BT * 2 * cdiv(packs, 32) * 4, stream="scale", inflight=16 * packs / 1024,
                block_trips=1, block_barriers=1, ieee={"exp": n + n * 9 // 8, "div": S.BT * 1024}, persistent=True,
                note="persistent, one block per SM: the next row copied (cp.async) under this row's arithmetic")


def encoder_backward_dwte_kernel_reordered(S, ctx):
    # branch classifier (issue 30 item 1, the encoder backward): as encoder_backward_dwte_kernel_30,
    # but the host lays the buckets out in the blocks' order, so block x reads start[x], start[x+1]
    # and token[x] at once (no order[x] before them: the order array is neither copied nor read),
    # and slice 0 issues its load of dwte's row (it needs only the token) with the pos loads.
    # Re-derived with the calibrated rules: a block's chain is the bounds and token (1 round trip),
    # one group of pos (1) and dout (1) for a bucket of <= 32 positions, the barrier, then the store
    # (the dwte load has long arrived): 3 trips and 1 barrier per wave of blocks (4 blocks of 8 warps
    # per SM, ptxas 64 registers on sm_90 under __launch_bounds__(256, 4)). The longest block, the
    # commonest token's: 1 trip, then ceil(kmax/32) groups of 2 dependent trips (serial_trips).
    blocks = S.D * cdiv(_packs(S.C), 32)
    return Cost(blocks, 256, read=S.BT * S.C * X + 4 * (3 * S.BT + 1) + S.D * S.C * X,
                write=S.D * S.C * X, cc_flops=S.BT * S.C, smem_wavefronts=blocks * 14 * PACK,
                serial_trips=1 + 2 * cdiv(S.kmax, 32), stream="read", block_trips=3, block_barriers=1,
                note="longest token bucket %d positions, 8 slices, buckets in block order" % S.kmax)


def encoder_backward_dwte_kernel_warps(S, ctx):
    # branch dwte (issue 30 item 1): the buckets of more than ENCODER_SHORT_BUCKET = 8 positions
    # ("block buckets") as encoder_backward_dwte_kernel_reordered (but for the longest block's
    # chain, below), a block of 8 warps each, first in
    # the grid; then the short buckets, a WARP each (8 to a block, in ascending token order), which
    # makes the same adds in the same order: the same DRAM bytes. Re-derived with the calibrated
    # rules from encoder_dwte_warp_bucket: the bounds and token (1 round trip), the 8 pos loads (1),
    # the dout packs 4 at a time (1 for a bucket of <= 4 positions, 2 for 5-8), the store; no
    # barrier. A block of 8 short buckets waits for its slowest warp: 3 trips, or 4 where one of
    # its buckets has 5-8 positions; a block bucket's block 3 trips and 1 barrier. The model's
    # chain per wave of blocks is the grid's mean block chain (ptxas: 64 registers in bf16 on
    # sm_90 under __launch_bounds__(256, 4): 4 blocks per SM, 32 short buckets per SM at once).
    # The longest block, the commonest token's: the bounds (1 trip), its first positions (1), then
    # one trip per group of 32 positions (a slice's 4 dout loads; the next group's positions load
    # meanwhile, encoder_dwte_block_bucket's aligned loop), where it was 2 per group.
    # Where the bucket sizes are unknown (S.bucket_sizes None: only D and kmax), one bucket of kmax
    # positions if kmax > 8 and every other bucket short, each block of them charged 4 trips (an
    # upper bound). Shared memory: only the block buckets' blocks exchange slice sums.
    y = cdiv(_packs(S.C), 32)
    if S.bucket_sizes is not None:
        sizes = list(S.bucket_sizes)
    else:
        sizes = ([S.kmax] if S.kmax > 8 else []) + [8] * (S.D - (1 if S.kmax > 8 else 0))
    n_block = sum(1 for n in sizes if n > 8)
    short = [n for n in sizes if n <= 8]
    warp_blocks = [short[i:i + 8] for i in range(0, len(short), 8)]
    trips = n_block * 3 + sum(3 if max(b) <= 4 else 4 for b in warp_blocks)
    nb = n_block + len(warp_blocks)
    return Cost(nb * y, 256, read=S.BT * S.C * X + 4 * (3 * S.BT + 1) + S.D * S.C * X,
                write=S.D * S.C * X, cc_flops=S.BT * S.C, smem_wavefronts=n_block * y * 14 * PACK,
                serial_trips=2 + cdiv(S.kmax, 32), stream="read", block_trips=trips / nb,
                block_barriers=n_block / nb,
                note="longest token bucket %d positions; %d block buckets, %d short buckets a warp each" % (
                    S.kmax, n_block, len(short)))


def attention_backward_rowdot_kernel_30(S, ctx):
    # G = hs / 8 lanes per (b, t, h) row, one 16-byte pack of dout and of out each (8 fmaf), then
    # a butterfly of log2 G shuffles; 256 threads per block; D written as one float per row.
    # Re-derived with the calibrated rules (perfmodel): 32 bytes in flight per thread (both packs
    # issued before the first fmaf), one round trip per block, no block barrier (the sums are
    # shuffles within the warp).
    rows = S.B * S.T * S.NH
    G = S.hs // PACK
    return Cost(cdiv(rows * G, 256), 256, read=2 * S.BT * S.C * X, write=rows * 4, cc_flops=2 * S.BT * S.C,
                stream="read", inflight=2 * 16, block_trips=1, block_barriers=0,
                note="%d lanes per row, 16-byte loads" % G)


def dbias_add_kernel(S, ctx):
    # branch epilogue (issue 30 item 2): the dweight product's BGRADB writes the bias gradient
    # (OC floatX); one thread per column reads it and dbias, writes dbias: 3 x OC x floatX bytes
    OC = ctx["OC"]
    return Cost(cdiv(OC, 256), 256, read=2 * OC * X, write=OC * X, cc_flops=OC, stream="triad", note="OC %d" % OC)


def attention_backward_dq_reduce_kernel(S, ctx):
    # branch attbwd (issue 30 item 3, llmc/attention_sm90.cuh, -ak 1): dQ's fp32 partial tiles that
    # the sm_90a dK/dV kernel wrote, one 64 x 128 tile per (query block, key block at or before it)
    # of each (b, h): (T/128)(T/128 + 1)/2 tiles of 32 KB, read once, and dQ (bf16) written once.
    # One thread per query row, 128 per block (one block per query block of a (b, h)); per key
    # block, 64 independent 4-byte loads (the unrolled dims; consecutive threads, consecutive
    # addresses) then 64 adds into the row's sums: 256 bytes in flight per thread, and the block
    # waits through one DRAM round trip per key block (q / 128 + 1 for its rows; the heaviest
    # block: T/128); no barrier. Adds: one per partial element past the first of each row; one
    # multiply (scale) per dQ element.
    nq = cdiv(S.T, 128)
    tiles = S.B * S.NH * nq * (nq + 1) // 2
    return Cost(S.B * S.NH * nq, 128, read=tiles * 64 * 128 * 4, write=S.BT * S.C * X,
                cc_flops=tiles * 64 * 128 + S.BT * S.C, stream="read", inflight=64 * 4, block_trips=nq,
                block_barriers=0, note="%d partial tiles of 32 KB per (b,h)" % (nq * (nq + 1) // 2))


def attention_dbias_partials_kernel(S, ctx):
    # issue 30 item 2 (llmc/attention.cuh, the qkv bias gradient): the paths that do not take the
    # partials in their kernels (the sm_90a backward, the fp32 build) read dqkv back: block (256
    # columns, 64-row tile, b), one thread per column adding its 64 rows (2-byte loads, unrolled by
    # 16: 32 bytes in flight, 4 round trips); one float per (b, tile, column) written
    tiles = cdiv(S.T, 64)
    C3 = 3 * S.C
    return Cost(cdiv(C3, 256) * tiles * S.B, 256, read=S.BT * C3 * X, write=S.B * tiles * C3 * 4, cc_flops=S.BT * C3,
                stream="read", inflight=16 * X, block_trips=4, block_barriers=0,
                note="%d partial rows of 3C" % (S.B * tiles))


def attention_dbias_reduce_kernel(S, ctx):
    # issue 30 item 2: the partial rows (B ceil(T/64) x 3C floats) added per column into dbias
    # (floatX, read and written): blocks of 32 columns x 8 lanes, a lane's rows unrolled by 16
    # (64 bytes in flight, ceil(rows / 8 / 16) round trips), one barrier, lane 0 adds the 8 sums
    rows = S.B * cdiv(S.T, 64)
    C3 = 3 * S.C
    return Cost(cdiv(C3, 32), 256, read=rows * C3 * 4 + C3 * X, write=C3 * X, cc_flops=rows * C3, stream="read",
                inflight=16 * 4, block_trips=cdiv(cdiv(rows, 8), 16) + 1, block_barriers=1,
                note="%d partial rows of 3C" % rows)


def attention_backward_dq_reduce_kernel_dbias(S, ctx):
    # llmc/attention_sm90.cuh with the qkv bias gradient (issue 30 item 2): the reduce above, then
    # each thread puts its row's 64 bf16 values (as floats) in shared memory (a row per thread,
    # padded: conflict-free, 64 wavefronts a warp), one barrier, and 128 threads add a column of
    # 64 rows each (64 wavefronts a warp): two partial rows of 64 floats per block written
    c = attention_backward_dq_reduce_kernel(S, ctx)
    nq = cdiv(S.T, 128)
    blocks = S.B * S.NH * nq
    c.write += S.B * cdiv(S.T, 64) * S.C * 4
    c.cc_flops += S.BT * S.C
    c.smem_wavefronts = blocks * 4 * (64 + 64)
    c.block_barriers = 1
    c.note += "; the q columns' bias partials through shared memory"
    return c


KERNELS_ISSUE30 = {
    "attention_backward_dq_reduce_kernel": attention_backward_dq_reduce_kernel,
    "dbias_add_kernel": dbias_add_kernel,
    "attention_backward_rowdot_kernel": attention_backward_rowdot_kernel_30,
    "fused_classifier_kernel": fused_classifier_kernel_30,
    "encoder_backward_dwte_kernel": encoder_backward_dwte_kernel_30,
    "layernorm_backward_warp_kernel": layernorm_backward_warp_kernel,
}


# Each cost function above was derived from one version of its header. A tree whose header differs
# (another branch rewrote the kernel under the same name) must not be costed with it: perf_model.py
# stops with a message naming the file, unless the emulator's counters describe the kernel. The
# fingerprint is sha256 of the whole file (first 12 hex digits), recorded here per derivation, with
# the version of the cost functions it was derived for ("2e0af91": KERNELS; "issue 22": KERNELS
# with KERNELS_ISSUE22 over it).
DERIVED_FROM = {
    "llmc/encoder.cuh": {"a8f7b5e37663": "2e0af91", "a8b51ad07db0": "issue 22", "e200a71d3a53": "issue 30", "40762a7034ec": "issue 30 reordered", "ad347b2c7f17": "issue 30 warps"},
    "llmc/layernorm.cuh": {"d8fd5301a5da": "2e0af91", "39aa11bb2b97": "issue 22", "579343cea74d": "issue 30", "ed23b3df8ba2": "issue 30 smem sums", "4a8dd5cf6a73": "issue 30 smem sums", "554b04462f1a": "issue 30 smem sums", "38f16d0a41c2": "issue 30 residual sums", "7ee0c1922828": "issue 30 residual sums", "196715e1a1e8": "issue 30 residual sums"},  # 196715e1a1e8: 7ee0c1922828 less a redundant host line (P above 4 went to the block kernel by the launch's default case anyway; the kernels unchanged); 7ee0c1922828: 38f16d0a41c2 with a comment reworded (the kernels unchanged); 38f16d0a41c2: the chunk kernels and the dweight kernel with NS = 2 or 4 column sums (template <.., NS>; the residual's two: ln2's backward gives fcproj's and attproj's bias gradients), launched by macro so that the trace's labels hold NS; ed23b3df8ba2: branch lnbwd, the warp kernel's column sums in shared memory (its launch bounds per P; the other kernels unchanged); 4a8dd5cf6a73 (main fe67529): LAYERNORM_BWD_ROWS overridable with -D and LAYERNORM_BWD_BLOCK_ONLY (-D only), the kernels unchanged (the rows per chunk are read from the header: define()); 554b04462f1a (main 9a29762): 16 rows a chunk and the warp kernel on whole packs only (C % 8 == 0; the element-by-element fallback it never ran is gone: the same loads, stores, trips and barriers at GPT-2's C)
    "llmc/matmul.cuh": {"2e6e2d1a9e9f": "2e0af91", "c1f9cff10e2d": "issue 22", "24b498badcca": "issue 22", "1cdaf0f66ee2": "issue 30", "7c67827a1f3c": "issue 30", "2dba25e97e06": "issue 30"},  # 2dba25e97e06: the header comment says qkv's bias gradient comes from the attention backward (the kernels unchanged); 7c67827a1f3c: the header comment says which products take BGRADB (the kernels unchanged); 24b498badcca: branch sample's plan cache (evicts); dbias kernels unchanged; 1cdaf0f66ee2: branch epilogue's GELU and BGRADB epilogues (dbias_add_kernel in place of the dbias kernels)
    "llmc/attention.cuh": {"37b04d8430f0": "2e0af91", "0e9fa352748e": "issue 30", "e5cee3b1a7bb": "issue 30", "e6d6a1dbbe81": "issue 30", "8d469f999777": "issue 30", "3a4672d5c2da": "issue 30", "cbc79cf071b3": "issue 30", "65316b2a6096": "issue 30 qkv bias", "c1adc0e4dd30": "issue 30 qkv bias", "37d852297e5e": "issue 30 qkv bias", "4588ce520409": "issue 30 qkv bias"},  # 37d852297e5e: c1adc0e4dd30 with a comment reworded (the kernels unchanged); c1adc0e4dd30: the sm_90a backward takes its partials in its kernels (attention_dbias_partials_kernel for the fp32 build only); 4588ce520409: 65316b2a6096 with the registers in the header comment updated; 65316b2a6096: the qkv bias gradient taken by attention_backward (the mma.sync dK/dV and dQ kernels write partial rows of column sums, attention_dbias_partials_kernel reads dqkv back on the other paths, attention_dbias_reduce_kernel adds them into dbias; the row-dot unchanged); cbc79cf071b3: 3a4672d5c2da with (void)C in attention_backward_scratch_floats (the fp32 build); c017dce60ee9 (branch attbwd): attention_backward_scratch_floats (+ ATTENTION_HAS_SCRATCH_FLOATS) and the sm_90a backward's partials' offset (kernels unchanged); issue 30: the row-dot (the mma kernels: counters); e6d6a1dbbe81: + attention_decode (sampling), the others unchanged; 8d469f999777 (branch fa3): + the include of attention_sm90.cuh and its dispatch at hs 64 (forward; backward where T % 4 == 0) (the mma.sync kernels and the row-dot unchanged; the sm_90a kernels attention_*_sm90_kernel are NOT costed here)
    "llmc/gelu.cuh": {"14e59c45f8d9": "2e0af91", "0ab4cac98887": "issue 22"},
    # branch attbwd: only attention_backward_dq_reduce_kernel is costed from here (the sm_90a
    # forward and dK/dV kernels: the emulator's wgmma counters, perf_model.wgmma_result)
    "llmc/attention_sm90.cuh": {"a02fdad60f62": "issue 30", "4f891bd1c8f2": "issue 30", "cbc6bfeb201c": "issue 30", "4f534d950f38": "issue 30", "c248ab1ad19c": "issue 30", "a714b46e8344": "issue 30 sm90 qkv bias", "2ee952955ac0": "issue 30 sm90 qkv bias"},  # 2ee952955ac0: a714b46e8344 with the dQ reduce's pack initialized (the host compiler's -Wuninitialized; the same PTX loop); a714b46e8344: the qkv bias gradient's partial rows, the dK/dV kernel's after its loop (column sums of its stores; the loop unchanged) and the dQ reduce's (through shared memory: attention_backward_dq_reduce_kernel_dbias); c248ab1ad19c: the wgmma descriptors advanced per k-step (wgmma_desc_advance); 4f534d950f38: the dK/dV kernel's mask on its masked stages only; cbc6bfeb201c: the forward's softmax without per-element branches (mask on the diagonal tile only); 4f891bd1c8f2: the forward's overlapped loop (ATT90_FWD_OVERLAP) and 3-stage ring; the dQ reduce unchanged
    "llmc/fused_classifier.cuh": {"1bc92eec77d3": "2e0af91", "66f3f51a237b": "issue 22", "5bdac35e44a2": "issue 30", "f6998a75056e": "issue 30 held", "08183a38dbf5": "issue 30 streamed", "bc12ffb823bd": "issue 30 streamed"},  # bc12ffb823bd: CLASSIFIER_NO_STREAMED (-D only) added, the kernels unchanged
    # branch fmad (issue 28/30): the same bytes and about the same operations per element (each one
    # rounded on its own, the decay flag per block span): the issue-22 cost per element
    "llmc/adamw.cuh": {"ecde8542e0cf": "2e0af91", "c802bcd4e58e": "issue 22", "0e7664ab0b07": "issue 22", "4bdb7e5fc6a8": "issue 30 vec4"},
    "llmc/global_norm.cuh": {"d1125d1ea8d6": "2e0af91", "80ce77d7589a": "issue 22", "c53e568f8dc0": "issue 30 unrolled"},
}
# Kernels checked unchanged (body and launch) in a later version of their header: the row-dot of
# the attention backward is the same in branch attn's llmc/attention.cuh (b654100), whose other
# kernels moved to tensor cores and are costed from the emulator's counters instead; main's
# (6f2061f) only moved the AttRowsA struct above the products that use it.
KERNEL_DERIVED_FROM = {
    "attention_backward_rowdot_kernel": {"9b8e04fd5dda": "b654100 (kernel and launch unchanged)",
                                         "c3e96622e206": "6f2061f (kernel and launch unchanged)",
                                         "237eab970e7c": "465beb5 (a comment rewrapped; kernel and launch unchanged)"},
}
# issue 29 (attmodel): the sm_90a kernels' consumer loop per thread and trip, as
# step_counts.att90_mix counts it from nvcc 13.0's PTX (-O3, sm_90a), recorded per fingerprint of
# llmc/attention_sm90.cuh for a tree priced where no nvcc is (or not the working tree: a fixture's)
ATT90_MIX = {
    "a02fdad60f62": {  # main 1f4c85f (the second H200 run's tree): the serial forward
        "attention_forward_sm90_kernel": {"alu": 401, "fp32": 226, "mufu": 66, "cvt": 32, "shfl": 4, "lsu": 0,
                                          "wgmma_waits": {0: 2}},
        "attention_backward_dkdv_sm90_kernel": {"alu": 511, "fp32": 144, "mufu": 32, "cvt": 32, "shfl": 0, "lsu": 64,
                                                "wgmma_waits": {0: 2}},
    },
    "4f891bd1c8f2": {  # main 35d0f25: the overlapped forward (ATT90_FWD_OVERLAP 1, 3 stages); dK/dV unchanged
        "attention_forward_sm90_kernel": {"alu": 429, "fp32": 226, "mufu": 66, "cvt": 32, "shfl": 4, "lsu": 0,
                                          "wgmma_waits": {1: 1, 0: 1}},
        "attention_backward_dkdv_sm90_kernel": {"alu": 511, "fp32": 144, "mufu": 32, "cvt": 32, "shfl": 0, "lsu": 64,
                                                "wgmma_waits": {0: 2}},
    },
    "cbc6bfeb201c": {  # the seventh session: the forward's softmax with no branch per element, its mask on
             # the diagonal tile only (that path, marked in the PTX, not counted per trip); dK/dV unchanged
             # (counted before the marks were "rare path": the same counts)
        "attention_forward_sm90_kernel": {"alu": 200, "fp32": 226, "mufu": 66, "cvt": 32, "shfl": 4, "lsu": 0,
                                          "wgmma_waits": {1: 1, 0: 1}},
        "attention_backward_dkdv_sm90_kernel": {"alu": 511, "fp32": 144, "mufu": 32, "cvt": 32, "shfl": 0, "lsu": 64,
                                                "wgmma_waits": {0: 2}},
    },
    "4f534d950f38": {  # and the dK/dV kernel's mask on its masked stages only (marked, not counted per trip)
        "attention_forward_sm90_kernel": {"alu": 200, "fp32": 226, "mufu": 66, "cvt": 32, "shfl": 4, "lsu": 0,
                                          "wgmma_waits": {1: 1, 0: 1}},
        "attention_backward_dkdv_sm90_kernel": {"alu": 353, "fp32": 144, "mufu": 32, "cvt": 32, "shfl": 0, "lsu": 64,
                                                "wgmma_waits": {0: 2}},
    },
    "c248ab1ad19c": {  # and each product's descriptors advanced from one per operand (wgmma_desc_advance)
        "attention_forward_sm90_kernel": {"alu": 164, "fp32": 226, "mufu": 66, "cvt": 32, "shfl": 4, "lsu": 0,
                                          "wgmma_waits": {1: 1, 0: 1}},
        "attention_backward_dkdv_sm90_kernel": {"alu": 291, "fp32": 144, "mufu": 32, "cvt": 32, "shfl": 0, "lsu": 64,
                                                "wgmma_waits": {0: 2}},
    },
    "a714b46e8344": {  # and the qkv bias gradient's column sums after the dK/dV loop (the loop's source unchanged;
             # nvcc's PTX of it has 8 more ALU instructions a trip)
        "attention_forward_sm90_kernel": {"alu": 164, "fp32": 226, "mufu": 66, "cvt": 32, "shfl": 4, "lsu": 0,
                                          "wgmma_waits": {1: 1, 0: 1}},
        "attention_backward_dkdv_sm90_kernel": {"alu": 299, "fp32": 144, "mufu": 32, "cvt": 32, "shfl": 0, "lsu": 64,
                                                "wgmma_waits": {0: 2}},
    },
    "2ee952955ac0": {  # the same with the dQ reduce's pack initialized (the loops' PTX counts unchanged)
        "attention_forward_sm90_kernel": {"alu": 164, "fp32": 226, "mufu": 66, "cvt": 32, "shfl": 4, "lsu": 0,
                                          "wgmma_waits": {1: 1, 0: 1}},
        "attention_backward_dkdv_sm90_kernel": {"alu": 299, "fp32": 144, "mufu": 32, "cvt": 32, "shfl": 0, "lsu": 64,
                                                "wgmma_waits": {0: 2}},
    },
}
HEADER_OF = {
    "attention_backward_dq_reduce": "llmc/attention_sm90.cuh",  # (before "attention_": the first match wins)
    "encoder_": "llmc/encoder.cuh", "layernorm_": "llmc/layernorm.cuh", "dbias_": "llmc/matmul.cuh",
    "attention_": "llmc/attention.cuh", "gelu_": "llmc/gelu.cuh", "fused_classifier": "llmc/fused_classifier.cuh",
    "adamw_": "llmc/adamw.cuh", "global_norm_": "llmc/global_norm.cuh",
}


def header_of(name):
    for prefix, path in HEADER_OF.items():
        if name.startswith(prefix):
            return path
    return None


KERNELS = {f.__name__: f for f in [
    encoder_forward_kernel, encoder_backward_dwte_kernel, encoder_backward_dwpe_kernel,
    layernorm_forward_kernel, layernorm_backward_dinp_kernel, layernorm_backward_dweight_partial_kernel,
    layernorm_backward_dweight_finish_kernel, dbias_partial_kernel, dbias_finish_kernel,
    attention_forward_kernel, attention_backward_rowdot_kernel, attention_backward_dkdv_kernel,
    attention_backward_dq_kernel, gelu_forward_kernel, gelu_backward_kernel, fused_classifier_kernel,
    adamw_kernel, global_norm_partial_kernel, global_norm_finish_kernel,
]}
VERSIONS = {"2e0af91": KERNELS, "issue 22": dict(KERNELS, **KERNELS_ISSUE22),
            "issue 30": {**KERNELS, **KERNELS_ISSUE22, **KERNELS_ISSUE30}}
# branch classifier's llmc/fused_classifier.cuh: the packs held in registers (fused_classifier_kernel),
# and issue 30's two-pass kernel kept under a new name for a Vp over 7 packs a thread
VERSIONS["issue 30 held"] = {**VERSIONS["issue 30"], "fused_classifier_kernel": fused_classifier_kernel_held,
                             "fused_classifier_reread_kernel": fused_classifier_kernel_30}
# branch cls's llmc/fused_classifier.cuh: the held kernel's rows walked by a persistent grid, the next
# row copied into shared memory while this one computes (fused_classifier_streamed_kernel, where two
# rows fit a block's shared memory); the held and reread kernels unchanged, the fallbacks
VERSIONS["issue 30 streamed"] = {**VERSIONS["issue 30 held"],
                                 "fused_classifier_streamed_kernel": fused_classifier_streamed_kernel}
# llmc/adamw.cuh with four elements a thread (issue 30 item 1, fifth session)
VERSIONS["issue 30 vec4"] = {**VERSIONS["issue 30"], "adamw_kernel": adamw_kernel_vec4}
# llmc/global_norm.cuh with 8 loads in flight per thread (issue 30 item 1, fifth session)
VERSIONS["issue 30 unrolled"] = {**VERSIONS["issue 30"], "global_norm_partial_kernel": global_norm_partial_kernel_unrolled}
# branch classifier's llmc/encoder.cuh: the buckets in the dwte kernel's block order
VERSIONS["issue 30 reordered"] = {**VERSIONS["issue 30"], "encoder_backward_dwte_kernel": encoder_backward_dwte_kernel_reordered}
# branch lnbwd's llmc/layernorm.cuh: the warp kernel's column sums in shared memory
VERSIONS["issue 30 smem sums"] = {**VERSIONS["issue 30"], "layernorm_backward_warp_kernel": layernorm_backward_warp_kernel_smem}
# llmc/layernorm.cuh after f95b970: the chunk kernels with NS = 2 or 4 column sums (the residual's
# two: the bias gradients of fcproj and attproj from ln2's backward), the dweight kernel over NS
VERSIONS["issue 30 residual sums"] = {**VERSIONS["issue 30 smem sums"],
                                      "layernorm_backward_warp_kernel": layernorm_backward_warp_kernel_residual,
                                      "layernorm_backward_kernel": layernorm_backward_kernel_residual,
                                      "layernorm_backward_dweight_kernel": layernorm_backward_dweight_kernel_residual}
# llmc/attention.cuh with the qkv bias gradient taken by attention_backward (issue 30 item 2): the
# mma.sync kernels (costed from the emulator's counters; their partial rows, ~1.5% of dqkv's bytes,
# are not in attention_io) and two kernels of their own
VERSIONS["issue 30 qkv bias"] = {**VERSIONS["issue 30"], "attention_dbias_partials_kernel": attention_dbias_partials_kernel,
                                 "attention_dbias_reduce_kernel": attention_dbias_reduce_kernel}
# llmc/attention_sm90.cuh with the qkv bias gradient: its dQ reduce also sums the q columns
VERSIONS["issue 30 sm90 qkv bias"] = {**VERSIONS["issue 30"],
                                      "attention_backward_dq_reduce_kernel": attention_backward_dq_reduce_kernel_dbias}
# branch dwte's llmc/encoder.cuh: the short buckets (<= 8 positions) a warp each
VERSIONS["issue 30 warps"] = {**VERSIONS["issue 30"], "encoder_backward_dwte_kernel": encoder_backward_dwte_kernel_warps}


def cost_function(name, header_fingerprint):
    """The cost function of kernel `name` for the version of its header with this fingerprint, or
    None when no derivation matches (perf_model.py then stops, naming the header)."""
    header = header_of(name)
    version = DERIVED_FROM.get(header, {}).get(header_fingerprint)
    if version is None and header_fingerprint in KERNEL_DERIVED_FROM.get(name, {}):
        version = "2e0af91"  # a kernel checked unchanged from its 2e0af91 derivation
    return VERSIONS.get(version, {}).get(name) if version is not None else None

# Which template instance of a kernel the bf16 trainer launches (ptxas reports each instance):
# the attention kernels are built per head size, the update and the norm per gradient type.
def template_for(name, S):
    if name.startswith("attention_") and name not in ("attention_backward_rowdot_kernel", "attention_backward_dq_reduce_kernel",
                                                      "attention_dbias_partials_kernel", "attention_dbias_reduce_kernel"):
        return "<%d>" % S.hs
    if name == "layernorm_backward_warp_kernel":  # branch kernels (issue 30): built per packs per lane
        return "<%d>" % cdiv(cdiv(S.C, PACK), 32)  # (and after f95b970 per sums: template_candidates)
    if name in ("adamw_kernel", "global_norm_partial_kernel"):
        return "<__nv_bfloat16>"
    return ""


def template_candidates(name, S):
    """The instances template_for's may be named in a tree's ptxas output, in order: after f95b970 the
    layernorm backward's kernels also take NS (2 where a launch does not say: the plain layernorm,
    as test_kernels' bench calls it), so <P> is <P, 2> and the untemplated block and dweight kernels
    are <2>."""
    want = template_for(name, S)
    if name == "layernorm_backward_warp_kernel":
        return [want, want[:-1] + ", 2>"]
    if name in ("layernorm_backward_kernel", "layernorm_backward_dweight_kernel"):
        return [want, "<2>"]
    return [want]


def attention_io(S, name):
    """DRAM bytes (read, write) of a FlashAttention kernel, by what the algorithm reads and writes
    once (any version of llmc/attention.cuh: q, k, v, dout in; out, lse, dq, dk, dv out; the row
    terms D (B,NH,T) in and out), for kernels costed from the emulator's tensor-core counters."""
    lse = S.B * S.NH * S.T * 4
    btc = S.BT * S.C * X
    return {"attention_forward_kernel": (3 * btc, btc + lse),
            "attention_backward_dkdv_kernel": (4 * btc + 2 * lse, 2 * btc),
            "attention_backward_dq_kernel": (4 * btc + 2 * lse, btc)}.get(name)


def attention_useful_flops(S):
    """The FLOPs attention must do for one layer, as MFU counts them: llm.c's 6 C T per token and
    layer (the causal half of q k^T and of P v forward, twice that backward), times B T tokens."""
    return 6 * S.B * S.T * S.T * S.C
