#!/usr/bin/env python3
"""A stand-in for Nsight Compute's `ncu` on the CPU emulator, for dev/gpu_check.sh --emu: takes
the command line gpu_check.sh gives ncu on a GPU,

    ncu --clock-control none --metrics gpu__time_duration.sum --csv --page raw --log-file FILE PROG ARGS...

runs PROG (an emulated build) with EMU_TRACE=1 and writes FILE in the layout ncu writes there
(its ==PROF== lines, a quoted header with "Kernel Name" and the metric, a units row, one row per
launch with thousands separators), so the script's path from the profile to steps, fixtures and
tables runs in CI. The times are the emulator's wall-clock time per op on the CPU: they say
nothing about a GPU. Launches are the emulated kernels and cuBLASLt products (ncu lists the
products as cuBLASLt's kernels); copies, collectives and events are left out, as ncu leaves them.
PROG's own output goes to this process's stdout and stderr, as under ncu."""
import csv, os, re, subprocess, sys

def die(msg):
    sys.exit(f"ncu_emu.py: {msg}")

args = sys.argv[1:]
log_file, metric, i = None, None, 0
while i < len(args) and args[i].startswith("-"):
    a = args[i]
    if a in ("--clock-control", "--metrics", "--page", "--log-file"):
        if i + 1 >= len(args): die(f"{a} needs a value")
        v = args[i + 1]
        if a == "--log-file": log_file = v
        if a == "--metrics": metric = v
        if a == "--page" and v != "raw": die(f"--page {v}: only raw is emulated")
        if a == "--metrics" and v != "gpu__time_duration.sum": die(f"--metrics {v}: only gpu__time_duration.sum is emulated")
        i += 2
    elif a == "--csv": i += 1
    else: die(f"option {a} is not emulated (--clock-control, --metrics, --csv, --page raw, --log-file)")
prog = args[i:]
if not prog or log_file is None or metric is None: die("usage: ncu_emu.py --metrics gpu__time_duration.sum --csv --page raw --log-file FILE PROG ARGS...")

env = dict(os.environ, EMU_TRACE="1")
p = subprocess.Popen(prog, env=env, stderr=subprocess.PIPE, text=True, errors="replace")
# cuda-emu trace: op 12 kernel layernorm_forward_kernel (stream 0x0): 0.123 ms
trace = re.compile(r"^cuda-emu trace: op \d+ (.*) \(stream ([^)]*)\): ([0-9.]+) ms$")
rows = []
for line in p.stderr:
    m = trace.match(line.rstrip("\n"))
    if not m:
        sys.stderr.write(line)
        continue
    what, stream, ms = m.group(1), m.group(2), float(m.group(3))
    if what.startswith("kernel "): name = what[len("kernel "):].split(" ")[0] + "(emulated)"
    elif what.startswith("cublasLt"): name = "cublasLt emulated product: " + what
    else: continue
    rows.append((name, stream, ms))
rc = p.wait()
with open(log_file, "w", newline="") as f:
    f.write(f"==PROF== Connected to process {p.pid} ({prog[0]}) [emulated: dev/test/ncu_emu.py, EMU_TRACE times on the CPU]\n")
    w = csv.writer(f, quoting=csv.QUOTE_ALL, lineterminator="\n")
    head = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size", "Grid Size", "Device", "CC", metric]
    w.writerow(head)
    w.writerow([""] * (len(head) - 1) + ["nsecond"])
    for k, (name, stream, ms) in enumerate(rows):
        w.writerow([k, p.pid, os.path.basename(prog[0]), "127.0.0.1", name, 1, stream, "", "", 0, "9.0", f"{round(ms * 1e6):,}"])
    f.write(f"==PROF== Disconnected from process {p.pid}\n")
sys.exit(rc)
