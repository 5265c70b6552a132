"""
One training step at a ZeRO stage on N GPUs, predicted: the single-GPU launches of perf_model.py
cut into the parts the sharding schedule interleaves with collectives (the encoder, each block's
forward and backward, the head, the update), and the collectives of the project's own plan
(zero_walk_print, built from llmc/zero_plan.h, prints them in train_gpt2.cu's issue order with the
stream orderings it asks for). Two streams, as in the trainer: compute and communication; an op
starts when its stream is free and what it waits for is done. The step is simulated three times
in a row and the third is reported (the first has no previous update to wait for).

What overlap hides = the collectives' time - (the step at N GPUs - the same step's compute alone).
Each collective takes bus bytes / bus bandwidth (nccl-tests' definition, as zero_plan.h counts
them); NVLink's bus bandwidth is the device's published NCCL figure, the network's the line rate
of 2 x 200 Gb/s (devices.json). Not modelled: NCCL's kernels taking SMs from the compute (they
run concurrently), per-collective latency (the messages are 12-69 MB: bandwidth-bound), the host.
"""
import os
import subprocess

import kernel_costs as kc

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))


def walk_events(stage, N, L):
    """zero_walk_print's lines for this stage (built with the host compiler on first use)."""
    exe = os.path.join(HERE, "cache", "zero_walk_print")
    src = os.path.join(HERE, "zero_walk_print.c")
    deps = [src, os.path.join(REPO, "llmc/zero_plan.h"), os.path.join(REPO, "llmc/gpt2_layout.h")]
    if not os.path.exists(exe) or any(os.path.getmtime(d) > os.path.getmtime(exe) for d in deps):
        os.makedirs(os.path.dirname(exe), exist_ok=True)
        p = subprocess.run(["cc", "-O2", src, "-o", exe, "-lm"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            raise SystemExit("dev/perf: building zero_walk_print failed:\n" + p.stderr)
    p = subprocess.run([exe, str(stage), str(N), str(L)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise SystemExit("dev/perf: zero_walk_print failed: " + p.stderr)
    return [line.split() for line in p.stdout.splitlines()]


# ----------------------------------------------------------------------------
# the single-GPU step cut into the schedule's parts

def busy(r):
    """A launch's time on the stream: its kernel time and the time between it and the next launch
    (perf_model.py's launch gap)."""
    return r.time + getattr(r, "gap", 0.0)


def segments(results, L):
    """Seconds of compute per part of the step, from the predicted launches in trace order:
    forward = encoder, then block l ending at its 4th cuBLASLt product (fcproj), then the head;
    backward = head_bwd (the LM head's products and lnf), then each block from its first product
    (with the recomputes just before it) to the next block's, then encoder_bwd (from the copy of the
    token buckets on); update = the rest. The cut only decides which stream waits happen where."""
    fwd = [r for r in results if r.launch.phase == "forward"]
    bwd = [r for r in results if r.launch.phase == "backward"]
    upd = [r for r in results if r.launch.phase == "update"]
    seg = {}
    gemms = [i for i, r in enumerate(fwd) if r.launch.kind == "gemm"]
    if len(gemms) != 4 * L + 1:
        raise SystemExit("dev/perf: the forward has %d cuBLASLt products, expected 4 L + 1 = %d" % (len(gemms), 4 * L + 1))
    first_ln = next(i for i, r in enumerate(fwd) if r.launch.name.startswith("layernorm"))
    seg["encoder"] = sum(busy(r) for r in fwd[:first_ln])
    start = first_ln
    for l in range(L):
        end = gemms[4 * l + 3] + 1
        seg["block %d" % (l + 1)] = sum(busy(r) for r in fwd[start:end])
        start = end
    seg["head"] = sum(busy(r) for r in fwd[start:])
    gemms = [i for i, r in enumerate(bwd) if r.launch.kind == "gemm"]
    if len(gemms) != 8 * L + 2:
        raise SystemExit("dev/perf: the backward has %d cuBLASLt products, expected 8 L + 2 = %d" % (len(gemms), 8 * L + 2))
    enc = next((i for i, r in enumerate(bwd) if r.launch.name.startswith("encoder_backward")), len(bwd))
    while enc > 0 and bwd[enc - 1].launch.kind == "memcpy":
        enc -= 1  # the buckets' copy belongs to the encoder's backward
    starts = []
    for j in range(L):
        s = gemms[2 + 8 * j]
        while s > 0 and bwd[s - 1].launch.kind == "kernel" and bwd[s - 1].launch.name in ("gelu_forward_kernel", "layernorm_forward_kernel"):
            s -= 1  # -r 1/2: the recompute belongs to the block it feeds
        starts.append(s)
    seg["head_bwd"] = sum(busy(r) for r in bwd[:starts[0]])
    for j in range(L):
        end = starts[j + 1] if j + 1 < L else enc
        seg["block_bwd %d" % (L - j)] = sum(busy(r) for r in bwd[starts[j]:end])
    seg["encoder_bwd"] = sum(busy(r) for r in bwd[enc:])
    seg["update"] = sum(busy(r) for r in upd)
    return seg


def sharded_update(results, N, dev):
    """The update on one of N ranks (stages 1-3): each AdamW and norm launch of the one-GPU step
    touches 1/N of its elements (its shard), at no less than one launch each (an upper bound on
    the launches: the stage-1+ update skips tensors outside the rank's slice)."""
    total = 0.0
    for r in results:
        if r.launch.phase != "update":
            continue
        if r.launch.kind == "kernel" and r.parts.get("memory", 0) > 0:
            scaled = {k: (v / N if k in ("memory", "compute", "shared memory") else v) for k, v in r.parts.items()}
            total += max(scaled.values())
        else:
            total += busy(r)
    return total


# ----------------------------------------------------------------------------
# the two-stream timeline

def simulate(events, seg, update_time, busbw, dev, unit_bytes, steps=3):
    """Finish time of each of `steps` steps, and the collectives' total time in one step."""
    t_compute = t_comm = 0.0
    last_compute = 0.0            # when the compute queued so far is done
    slot_free = {}                # gather slot -> the compute time of its last reader
    gathered, reduced = {}, {}    # unit -> when its all-gather / reduce-scatter finished
    ends, comm_busy, memsets = [], 0.0, 0.0
    for step in range(steps):
        comm_busy, memsets = 0.0, 0.0
        for ev in events:
            kind = ev[0]
            if kind == "compute":
                name = " ".join(ev[1:])
                t = update_time if name == "update" else seg[name]
                t_compute = max(t_compute, last_compute) + t
                last_compute = t_compute
            elif kind == "gather":
                u, slot, b = int(ev[1]), int(ev[2]), float(ev[3])
                d = b / busbw["all_gather"]
                t_comm = max(t_comm, slot_free.get(slot, 0.0)) + d
                gathered[u] = t_comm
                comm_busy += d
            elif kind == "wait_gather":  # the first step has no update before it: nothing to wait for
                t_compute = max(t_compute, gathered.get(int(ev[1]), 0.0))
            elif kind == "release":
                slot_free[int(ev[1])] = last_compute
            elif kind == "grads":
                u, prev = int(ev[1]), int(ev[2])
                if prev >= 0:
                    t_compute = max(t_compute, reduced[prev])
                # the slot (or unit 0's buffer) is zeroed on the compute stream
                zeroing = max(dev.launch, unit_bytes[u] / (dev.bw * dev.bw_best("scale")))
                t_compute += zeroing
                memsets += zeroing
                last_compute = t_compute
            elif kind == "reduce_scatter":
                u, b = int(ev[1]), float(ev[2])
                d = b / busbw["reduce_scatter"]
                t_comm += d
                reduced[u] = t_comm
                comm_busy += d
            elif kind == "all_gather":
                b = float(ev[2])
                d = b / busbw["all_gather"]
                t_comm += d
                gathered[int(ev[1])] = t_comm  # stages 1-2: the next forward's wait_gather
                comm_busy += d
            elif kind == "comm_waits_compute":
                t_comm = max(t_comm, last_compute)
            elif kind == "compute_waits_comm":
                t_compute = max(t_compute, t_comm)
                last_compute = t_compute
            elif kind == "plan":
                pass
            else:
                raise SystemExit("dev/perf: zero_walk_print said %r" % ev)
        # the host's sync ends the step (wait_for_gpu "the update"): the compute stream drained; the
        # comm stream goes on (stages 1-2: the parameters' all-gathers, which the next forward waits
        # for per unit; at stages 0 and 3 nothing is queued there after the compute by then)
        last_compute = t_compute
        ends.append(t_compute)
    return ends, comm_busy, memsets


def zero_step(results, S, dev, stage, N, busbw):
    """Predicted seconds per step at `stage` on N GPUs, and what the collectives cost and hide."""
    events = walk_events(stage, N, S.L)
    seg = segments(results, S.L)
    if stage >= 2:  # no full gradient slab to zero at the step's start: the per-unit slots are zeroed instead ("grads")
        first_memset = next((r for r in results if r.launch.kind == "memset"), None)
        if first_memset is not None:
            seg["encoder"] -= first_memset.time
    upd = seg["update"] if stage == 0 else sharded_update(results, N, dev)
    # gradient slot sizes (stage 2-3 memsets) from the plan's padded units
    import perf_model
    _, unit_size = perf_model.layout(S, N)
    unit_bytes = [u * kc.X for u in unit_size]
    ends, comm, memsets = simulate(events, seg, upd, busbw, dev, unit_bytes)
    step = ends[-1] - ends[-2]
    compute_only = sum(v for k, v in seg.items() if k != "update") + upd + memsets
    plan = next(e for e in events if e[0] == "plan")
    return {"step_s": step, "comm_s": comm, "compute_s": compute_only, "exposed_s": step - compute_only,
            "rs_bytes": float(plan[1]), "ag_bytes": float(plan[2]), "rs_calls": int(plan[3]), "ag_calls": int(plan[4])}
