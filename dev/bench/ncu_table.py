#!/usr/bin/env python3
"""Per-kernel device time of one ncu profile, for dev/gpu_check.sh's table:

    python3 dev/bench/ncu_table.py NCU.csv STEPS

NCU.csv is `ncu --metrics gpu__time_duration.sum --csv --page raw --log-file NCU.csv PROG` (ncu's
==PROF== lines are skipped; the units row gives the time unit). Kernels are grouped by name
(arguments and template parameters dropped); each group's time over the whole run is divided by
STEPS, so the few launches before the first step (weights rounded to bf16, ...) are counted in
too: dev/perf/make_fixture.py takes the training steps alone for the fixtures."""
import csv, re, sys
from collections import defaultdict

if len(sys.argv) != 3 or not sys.argv[2].isdigit() or int(sys.argv[2]) < 1:
    sys.exit("usage: ncu_table.py NCU.csv STEPS")
path, steps = sys.argv[1], int(sys.argv[2])
try:
    lines = [l for l in open(path, newline="") if l.startswith('"')]
except OSError as e:
    sys.exit(f"ncu_table.py: {path}: {e.strerror}")
rows = list(csv.reader(lines))
if len(rows) < 2 or "Kernel Name" not in rows[0] or "gpu__time_duration.sum" not in rows[0]:
    sys.exit(f"ncu_table.py: {path}: no ncu --csv --page raw header with Kernel Name and gpu__time_duration.sum")
head = rows[0]
ki, ti = head.index("Kernel Name"), head.index("gpu__time_duration.sum")
to_ms = {"nsecond": 1e-6, "ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0, "ms": 1.0, "second": 1e3, "s": 1e3}
unit, groups, total = "nsecond", defaultdict(lambda: [0, 0.0]), 0.0
for r in rows[1:]:
    if len(r) <= max(ki, ti):
        continue
    if r[0] == "":  # the units row
        unit = r[ti] or unit
        continue
    try:
        t = float(r[ti].replace(",", ""))
    except ValueError:
        continue
    name = re.sub(r"[(<].*", "", r[ki]).replace("void ", "").strip()
    groups[name][0] += 1
    groups[name][1] += t
    total += t
if unit not in to_ms:
    sys.exit(f"ncu_table.py: {path}: unknown time unit '{unit}'")
scale = to_ms[unit]
launches = sum(c for c, _ in groups.values())
print(f"{launches} launches, {total * scale:.2f} ms of kernels over the run; per step = run / {steps}")
print(f"{'ms/step':>9} {'share':>6} {'per step':>8}  kernel")
for name, (c, t) in sorted(groups.items(), key=lambda kv: -kv[1][1]):
    print(f"{t * scale / steps:9.3f} {100 * t / total if total else 0:5.1f}% {c / steps:8.1f}  {name}")
