"""
The CUDA occupancy rules: how many blocks of a kernel fit on one SM at once, and why.

A block needs three resources of the SM it runs on, and stays resident (holding them) until all its
threads finish:
  - warp slots: ceil(threads / 32) of max_warps_per_sm (64 on compute capability 7.0, 8.0, 9.0);
  - registers: every warp gets regs_per_thread * 32 registers rounded up to the allocation unit (256),
    and the register file is split over 4 sub-partitions, so the warps that fit are rounded down to
    the warp allocation granularity (4) before they are cut into blocks;
  - shared memory: static + dynamic bytes plus the per-block reservation (1 KB from 8.0 on), rounded
    up to the allocation unit (128 bytes);
and there is a cap of max_blocks_per_sm (32). The blocks per SM is the smallest of the four limits.
These are the rules of the CUDA Occupancy Calculator (Nsight Compute's, formerly the spreadsheet),
with the per-compute-capability limits of the Programming Guide's table, all in devices.json with
their sources. dev/perf/test_perf_model.py checks this calculator against the Best Practices
Guide's worked example (37 registers, 128 and 320 threads on 7.0).

Assumption: the driver gives the kernel the largest shared-memory carveout it needs (it picks the
carveout from the kernel's requirements unless the code asks otherwise, and ours never does), so
the whole shared_per_sm is available.
"""


def limits_for(devices, cc):
    """The per-SM limits of compute capability cc ('8.0') as plain numbers."""
    table = devices["compute_capabilities"].get(cc)
    if table is None:
        raise ValueError("no occupancy limits for compute capability %s in devices.json" % cc)
    return {k: v["value"] for k, v in table.items() if isinstance(v, dict)}


def round_up(x, unit):
    return (x + unit - 1) // unit * unit


def occupancy(lim, threads_per_block, regs_per_thread, shared_bytes):
    """Blocks and warps per SM for blocks of threads_per_block threads using regs_per_thread
    registers each and shared_bytes of shared memory (static + dynamic). Returns a dict with
    blocks_per_sm, warps_per_sm, occupancy (warps / max warps) and limiter (the binding resource)."""
    if threads_per_block < 1 or threads_per_block > 1024:
        raise ValueError("a block has 1..1024 threads, got %d" % threads_per_block)
    if regs_per_thread > lim["max_registers_per_thread"]:
        raise ValueError("%d registers per thread is over the limit of %d" % (regs_per_thread, lim["max_registers_per_thread"]))
    warps_per_block = -(-threads_per_block // 32)
    by = {}
    by["warps"] = lim["max_warps_per_sm"] // warps_per_block
    by["blocks"] = lim["max_blocks_per_sm"]
    # registers: per warp, rounded to the allocation unit; whole warps per sub-partition
    regs_per_warp = round_up(max(regs_per_thread, 1) * 32, lim["register_alloc_unit"])
    warps_by_regs = lim["registers_per_sm"] // regs_per_warp
    warps_by_regs = warps_by_regs // lim["warp_alloc_granularity"] * lim["warp_alloc_granularity"]
    by["registers"] = warps_by_regs // warps_per_block
    # shared memory: the block's bytes plus the reservation, rounded to the allocation unit
    if shared_bytes > lim["max_shared_per_block"]:
        raise ValueError("%d bytes of shared memory per block is over the limit of %d" % (shared_bytes, lim["max_shared_per_block"]))
    smem = round_up(shared_bytes + lim["shared_reserved_per_block"], lim["shared_alloc_unit"])
    by["shared memory"] = lim["shared_per_sm"] // smem if smem > 0 else lim["max_blocks_per_sm"]
    limiter = min(by, key=lambda k: (by[k], k != "warps"))
    blocks = by[limiter]
    return {
        "blocks_per_sm": blocks,
        "warps_per_sm": blocks * warps_per_block,
        "threads_per_sm": blocks * threads_per_block,
        "occupancy": blocks * warps_per_block / lim["max_warps_per_sm"],
        "limiter": limiter,
        "by": by,
    }
