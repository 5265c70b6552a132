#!/usr/bin/env bash
# The stage comparison (dev/bench/compare_stages.py):
#  - the CPU trainer on the tiny model, 4 ranks: its table must agree with the plan (bytes sent
#    per step and bytes allocated per category, stage by stage), all four stages must print the
#    same losses, and every chart must be written; dev/plot_log.py must draw a run's log;
#  - in the same run, --unit-blocks 1,2 (stage 3 with -zu 1 and 2; L = 2): each K's allocated,
#    sent and counted collectives = its plan, the collectives = 1 + ceil(L/K) reduce-scatters and
#    2 + 2 ceil(L/K) - 1 all-gathers, losses = stage 0's to 1e-5 relative (at N = 4 the ring adds
#    an element's 4 addends in an order that depends on the slice boundaries, which K moves);
#  - --recompute 2 --auto MB (2 steps): every stage's activations column is smaller than without
#    -r, the losses are the same, and -z auto's reported pick is a stage whose total fits the
#    budget while the next lower stage's does not (the budget is stage 0's total less 0.1 MB,
#    from a probe run of the trainer with -z auto, so the pick is never stage 0); with it
#    --groups 1 2 (stage 3 with -zg 1 and -zg 2): every measured byte (allocated, inside the
#    group, across the groups) = the plan's, G = 1's losses = stage 0's (the same sums),
#    G = 2's within 1e-5 (another order of additions), groups.png written;
#  - a CUDA trainer (COMPARE_CUDA, default ./train_gpt2cu_emu; skipped where not built), 2 ranks,
#    2 steps: the same table = plan and equal-losses checks, its workspace column, GPU allocated =
#    the sum of its rows; with --offload (stages 1-3 again with -zo 1) the GPU saves exactly the
#    optimizer bytes the host now holds, nothing else moves, the host staging and the PCIe bytes are
#    floatX shards, and the table and chart are written;
#    and with --grad-dtype fp32 (-zd fp32): table = plan, and against the bf16 run every stage's
#    grads column and reduce-scatter bytes exactly doubled, a grad scratch column, the same
#    params and optimizer; --grad-dtype on the CPU trainer is refused;
#  - --timeline (the CPU run above and the CUDA one): one PNG per stage and per reshard policy,
#    each traced step's collectives = the plan's list (compare_stages.py stops otherwise), and
#    timeline_z3.md lists the plan's count; a copy of the CPU trainer with its stage 1-2 param
#    all-gathers in reverse unit order is caught by that check;
#  - the old --cuda flag is refused, naming --trainer.
# Timing columns are reported, never asserted.
set -u
cd "$(dirname "$0")/../.."
source dev/test/lib.sh
CUDA_TRAINER=${COMPARE_CUDA:-./train_gpt2cu_emu}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

# consistent CSV: stages 0-3, every measured byte count = the plan's, one loss column for all,
# bytes sent per stage 0 = 1 = 2 < 3 (DESIGN.md §5.1); prints "consistent" or what is not
cat > "$tmp/check.py" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
fails = []
if [r["stage"] for r in rows] != ["0", "1", "2", "3"]:
    fails.append("stages %s" % [r["stage"] for r in rows])
for r in rows:
    for got, plan in [("rs", "plan_rs"), ("ag", "plan_ag"), ("scalars", "plan_scalars"), ("params", "plan_params"),
                      ("grads", "plan_grads"), ("optimizer", "plan_optimizer"), ("buffers", "plan_buffers"),
                      ("grad_scratch", "plan_grad_scratch")]:
        if got in r and r[got] != r[plan]:  # grad_scratch: CUDA only
            fails.append("stage %s: %s %s != plan %s" % (r["stage"], got, r[got], r[plan]))
losses = {r["losses"] for r in rows}
if len(losses) != 1:
    fails.append("loss columns differ: %s" % losses)
# and the stage ratios of DESIGN.md §5.1: stage 3 gathers more than stages 0-2, which move the same;
# with fp32 gradients (-zd fp32: a grad scratch) stage 0 all-gathers 4-byte grads where stages 1-2
# gather 2-byte params, so stage 0 > stage 1 = stage 2
sent = [int(r["rs"]) + int(r["ag"]) for r in rows]
wide = int(rows[0].get("grad_scratch", 0)) > 0
if len(rows) == 4 and not ((sent[0] > sent[1] == sent[2]) if wide else (sent[0] == sent[1] == sent[2] < sent[3])):
    fails.append("bytes per stage %s do not follow stages %s" % (sent, "0 > 1 = 2" if wide else "0 = 1 = 2 < 3"))
print("\n".join(fails) if fails else "consistent")
PY

# --timeline: compare_stages.py itself stops unless every traced step's collectives are the plan's
# (zero_plan_print --collectives: count, order, units, bytes) and every issuing line calls a
# collective; here: one PNG per stage and per reshard policy, and timeline_z3.md lists as many
# collectives, each with a line of the trainer, as the plan has for stage 3
check_timelines() { # check_timelines DIR WHAT
    local good=1 f n want
    for f in timeline_z0 timeline_z1 timeline_z2 timeline_z3 timeline_z3_always timeline_z3_never; do
        [ -s "$1/$f.png" ] || { good=0; echo "     missing $f.png"; }
    done
    n=$(grep -cE '^ *[0-9]+  (all-gather|reduce-scatter|all-reduce|scalars) ' "$1/timeline_z3.md" 2>/dev/null)
    want=$(sed -n 's/^collectives per step (plan): reduce-scatter \([0-9]*\), all-gather \([0-9]*\)$/\1 \2/p' "$1/z3.txt" | awk '{ print $1 + $2 + 2 }')
    [ $good -eq 1 ] && [ -n "$want" ] && [ "$n" = "$want" ] \
        && ok "$2 --timeline: 6 timelines (stages, reshard policies); the stage-3 step's $n collectives (plan: $want with the 2 scalars) listed with their lines" \
        || bad "$2 --timeline: PNGs or timeline_z3.md ($n collectives listed, plan $want)"
}

if ! /usr/bin/python3 dev/bench/compare_stages.py --unit-blocks 1,2 --timeline --out "$tmp/cmp" > "$tmp/out.txt" 2>&1; then
    bad "compare_stages.py ran"; tail -5 "$tmp/out.txt"
else
    ok "compare_stages.py ran ($(grep -c '^| [0-3] (' "$tmp/out.txt") stage rows in the printed table)"
    /usr/bin/python3 "$tmp/check.py" "$tmp/cmp/compare.csv" > "$tmp/check.txt"
    [ "$(cat "$tmp/check.txt")" = "consistent" ] && ok "table = plan (bytes sent and allocated, every stage); the 4 loss columns match" \
        || { bad "table vs plan"; cat "$tmp/check.txt"; }
    /usr/bin/python3 - "$tmp/cmp/units.csv" > "$tmp/check.txt" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
fails = [] if [r["unit_blocks"] for r in rows] == ["1", "2"] else ["unit sizes %s" % [r["unit_blocks"] for r in rows]]
for r in rows:
    K, nb = int(r["unit_blocks"]), -(-2 // int(r["unit_blocks"]))  # the tiny model: L = 2
    for got in ["params", "grads", "optimizer", "buffers", "rs", "ag", "rs_calls", "ag_calls"]:
        if r[got] != r["plan_" + got]:
            fails.append("K=%d: %s %s != plan %s" % (K, got, r[got], r["plan_" + got]))
    if (int(r["units"]), int(r["rs_calls"]), int(r["ag_calls"])) != (1 + nb, 1 + nb, 2 + 2 * nb - 1):
        fails.append("K=%d: %s units, %s + %s collectives" % (K, r["units"], r["rs_calls"], r["ag_calls"]))
    for a, b in zip(r["losses"].split(), r["stage0_losses"].split()):
        if abs(float(a) - float(b)) > 1e-5 * float(b):
            fails.append("K=%d: loss %s vs stage 0's %s" % (K, a, b))
print("\n".join(fails) if fails else "consistent")
PY
    [ "$(cat "$tmp/check.txt")" = "consistent" ] && grep -q "^| 2 | 2 | " "$tmp/cmp/compare.md" \
        && ok "--unit-blocks 1,2: each K's memory, bytes and collectives = plan = 1 + L/K units' arithmetic; losses = stage 0's" \
        || { bad "--unit-blocks"; cat "$tmp/check.txt"; }
    good=1
    for f in compare.md compare.csv units.md units.csv memory.png comm.png throughput.png loss.png memory_vs_ranks.png units.png; do
        [ -s "$tmp/cmp/$f" ] || { good=0; echo "     missing $f"; }
    done
    [ $good -eq 1 ] && ok "tables, CSVs and six charts written" || bad "outputs missing"
    check_timelines "$tmp/cmp" "CPU trainer"
    if /usr/bin/python3 dev/plot_log.py "$tmp/cmp/z0/main.log" "$tmp/cmp/z3/main.log" -o "$tmp/loss.png" > /dev/null && [ -s "$tmp/loss.png" ]; then
        ok "plot_log.py draws two runs' logs"
    else bad "plot_log.py"; fi
    printf 's:0 trl:10.5\ngarbage\n' > "$tmp/bad.log"
    /usr/bin/python3 dev/plot_log.py "$tmp/bad.log" -o "$tmp/bad.png" 2> "$tmp/err.txt"; rc=$?
    [ $rc -ne 0 ] && grep -q "line 2 is not" "$tmp/err.txt" && ok "plot_log.py names a malformed log line" || bad "plot_log.py on a bad log: exit $rc"

    # --recompute 2 and --auto, on the first run's ranks, B and T (the script's defaults: 4, 2, 32).
    # The budget: stage 0's total with -r 2 (as -z auto prints it, 0.1 MB steps) less 0.1 MB.
    OMP_NUM_THREADS=1 timeout 600 mpirun --bind-to none -np 4 ./train_gpt2 -e "$MODEL" -b 2 -t 32 -x 1 -v 0 -s 0 -r 2 \
        -z auto -zm 100000 > "$tmp/probe.txt" 2>&1
    total0=$(sed -n 's/^  stage 0: plan .* = \([0-9.]*\) MB: .*/\1/p' "$tmp/probe.txt")
    budget=$(awk -v x="$total0" 'BEGIN { if (x != "") printf "%.1f", x - 0.1 }')
    if [ -z "$budget" ]; then bad "probe -z auto -zm 100000 printed no stage-0 total"; tail -5 "$tmp/probe.txt"
    elif ! /usr/bin/python3 dev/bench/compare_stages.py --ranks 4 --batch 2 --seq_len 32 --steps 2 --recompute 2 \
            --auto "$budget" --groups 1 2 --out "$tmp/r2" > "$tmp/r2.txt" 2>&1; then
        bad "compare_stages.py --recompute 2 --auto $budget --groups 1 2 ran"; tail -5 "$tmp/r2.txt"
    else
        ok "compare_stages.py --recompute 2 --auto $budget --groups 1 2 ran"
        # every stage's activations smaller than without -r; the first 2 losses the same; the caption says -r 2
        /usr/bin/python3 - "$tmp/cmp/compare.csv" "$tmp/r2/compare.csv" > "$tmp/check.txt" <<'PY'
import csv, sys
base, r2 = (list(csv.DictReader(open(p))) for p in sys.argv[1:3])
fails = []
for a, b in zip(base, r2):
    if not int(b["activations"]) < int(a["activations"]):
        fails.append("stage %s: activations %s with -r 2, %s without" % (a["stage"], b["activations"], a["activations"]))
    if b["losses"].split() != a["losses"].split()[:2]:
        fails.append("stage %s: losses %s with -r 2, %s without" % (a["stage"], b["losses"], a["losses"]))
print("\n".join(fails) if fails or len(r2) != 4 else "smaller")
PY
        if [ "$(cat "$tmp/check.txt")" = "smaller" ] && grep -q "^gpt2_tiny.bin, 4 ranks, .*, recompute 2 (-r 2;" "$tmp/r2/compare.md"; then
            ok "--recompute 2: every stage's activations column smaller than without, same losses, caption says so ($(grep '^| 0 ' "$tmp/r2/compare.md" | cut -d'|' -f7 | tr -d ' ') MB vs $(grep '^| 0 ' "$tmp/cmp/compare.md" | cut -d'|' -f7 | tr -d ' ') MB at stage 0)"
        else bad "--recompute 2"; cat "$tmp/check.txt"; head -1 "$tmp/r2/compare.md"; fi
        # the pick: fits the budget we gave, the next lower stage does not; the report's line says it
        picked=$(awk -F, 'NR > 1 && $6 == 1 { print $2 }' "$tmp/r2/auto.csv")
        fits() { awk -F, -v s="$1" -v b="$budget" 'NR > 1 && $2 == s { found = 1; ok = ($5 <= b) } END { exit !(found && ok) }' "$tmp/r2/auto.csv"; }
        if [ -n "$picked" ] && [ "$picked" -ge 1 ] && fits "$picked" && ! fits $((picked - 1)) \
            && grep -q "^-z auto -zm $budget: picked stage $picked, " "$tmp/r2/compare.md"; then
            ok "--auto $budget: picked stage $picked ($(awk -F, -v s="$picked" '$2 == s { print $5 }' "$tmp/r2/auto.csv") MB fits), stage $((picked - 1)) does not ($(awk -F, -v s=$((picked - 1)) '$2 == s { print $5 }' "$tmp/r2/auto.csv") MB)"
        else bad "--auto $budget: picked '$picked'"; cat "$tmp/r2/auto.csv"; grep "^-z auto" "$tmp/r2/compare.md"; fi
        # --groups: rows stage 0, stage 3, G=1, G=2; measured = plan; losses as the header says
        /usr/bin/python3 - "$tmp/r2/groups.csv" > "$tmp/check.txt" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
fails = []
if [(r["stage"], r["group"]) for r in rows] != [("0", "4"), ("3", "4"), ("3", "1"), ("3", "2")]:
    fails.append("rows %s" % [(r["stage"], r["group"]) for r in rows])
for r in rows:
    for k in ["params", "grads", "optimizer", "buffers", "rs", "ag", "across"]:
        if r[k] != r["plan_" + k]:
            fails.append("G=%s: %s %s != plan %s" % (r["group"], k, r[k], r["plan_" + k]))
if len(rows) == 4:
    if int(rows[3]["across"]) <= 0 or int(rows[1]["across"]) != 0:
        fails.append("across: G=2 %s, G=4 %s" % (rows[3]["across"], rows[1]["across"]))
    if rows[2]["losses"] != rows[0]["losses"]:
        fails.append("G=1 losses %s != stage 0's %s" % (rows[2]["losses"], rows[0]["losses"]))
    # another order of fp32 additions than stage 0's (groups, then across them)
    if any(abs(float(a) - float(b)) > 1e-5 * abs(float(b)) for a, b in zip(rows[3]["losses"].split(), rows[0]["losses"].split())):
        fails.append("G=2 losses %s off stage 0's %s" % (rows[3]["losses"], rows[0]["losses"]))
print("\n".join(fails) if fails else "hybrid")
PY
        [ "$(cat "$tmp/check.txt")" = "hybrid" ] && [ -s "$tmp/r2/groups.png" ] && grep -q "^| stage 3 -zg 2 | 2 |" "$tmp/r2/compare.md" \
            && ok "--groups 1 2: allocated, inside and across bytes = plan; G=1 = stage 0's losses, G=2 within 1e-5; table row and groups.png" \
            || { bad "--groups 1 2"; cat "$tmp/check.txt"; }
    fi
fi

# the CUDA trainer (on the emulator here: slow, so 2 ranks and 2 steps)
if [ ! -x "$CUDA_TRAINER" ]; then
    echo "skip $CUDA_TRAINER not built (make emu; COMPARE_CUDA=./train_gpt2cu on a GPU machine)"
else
    start=$SECONDS
    if ! /usr/bin/python3 dev/bench/compare_stages.py --trainer "$CUDA_TRAINER" --ranks 2 --steps 2 --offload --timeline --out "$tmp/cu" > "$tmp/cu.txt" 2>&1; then
        bad "compare_stages.py --trainer $CUDA_TRAINER --offload ran"; tail -5 "$tmp/cu.txt"
    else
        ok "compare_stages.py --trainer $CUDA_TRAINER --ranks 2 --steps 2 --offload --timeline ran ($((SECONDS - start)) s)"
        check_timelines "$tmp/cu" "$CUDA_TRAINER"
        # -zo 1 rows: the GPU saves exactly the optimizer bytes the host now holds (12 P/N: the
        # stage-1 row without offload), nothing else moves, and the host's staging is 2 floatX shards
        fx=2; grep -q "(fp32, " "$tmp/cu/compare.md" && fx=4
        /usr/bin/python3 - "$tmp/cu/offload.csv" "$tmp/cu/compare.csv" $fx > "$tmp/check.txt" <<'PY'
import csv, sys
off = list(csv.DictReader(open(sys.argv[1])))
fx = int(sys.argv[3])  # bytes per floatX element
base = {r["stage"]: r for r in csv.DictReader(open(sys.argv[2]))}
fails = [] if [r["stage"] for r in off] == ["1", "2", "3"] else ["offload rows: stages %s" % [r["stage"] for r in off]]
for r in off:
    b, opt = base[r["stage"]], int(base["1"]["optimizer"])  # stage 1: the shard's master + m + v on the GPU
    shard = opt // 12  # P/N elements: 12 bytes each of master + m + v
    if int(r["optimizer"]) != 0 or int(r["host_optimizer"]) != opt or int(r["host_staging"]) != 2 * fx * shard:
        fails.append("stage %s: GPU optimizer %s, host %s + %s, expected 0, %d + %d" % (r["stage"], r["optimizer"], r["host_optimizer"], r["host_staging"], opt, 2 * fx * shard))
    if any(r[k] != b[k] for k in ["params", "grads", "buffers"]) or int(r["base_state"]) - opt != sum(int(r[k]) for k in ["params", "grads", "optimizer", "buffers"]):
        fails.append("stage %s: GPU rows other than the optimizer changed" % r["stage"])
    if int(r["down"]) != fx * shard or int(r["up"]) != fx * shard:
        fails.append("stage %s: PCIe %s down %s up, expected P/N floatX = %d each" % (r["stage"], r["down"], r["up"], fx * shard))
print("\n".join(fails) if fails else "offload")
PY
        [ "$(cat "$tmp/check.txt")" = "offload" ] && [ -s "$tmp/cu/offload.png" ] && grep -q "^-zo 1 (optimizer state" "$tmp/cu/compare.md" \
            && ok "$CUDA_TRAINER --offload: the GPU saves exactly the host's 12 P/N, staging $((2 * fx)) P/N, PCIe $fx P/N each way; table and chart" \
            || { bad "$CUDA_TRAINER --offload"; cat "$tmp/check.txt"; }
        /usr/bin/python3 "$tmp/check.py" "$tmp/cu/compare.csv" > "$tmp/check.txt"
        [ "$(cat "$tmp/check.txt")" = "consistent" ] && ok "$CUDA_TRAINER: table = plan (bytes sent and allocated, every stage); the 4 loss columns match" \
            || { bad "$CUDA_TRAINER: table vs plan"; cat "$tmp/check.txt"; }
        # GPU allocated (printed in 0.1 MB) = every row of its table, workspace included
        /usr/bin/python3 - "$tmp/cu/compare.csv" > "$tmp/check.txt" <<'PY'
import csv, sys
fails = []
for r in csv.DictReader(open(sys.argv[1])):
    rows = sum(int(r[k]) for k in ["params", "grads", "grad_scratch", "optimizer", "buffers", "activations", "workspace"])
    if int(r["workspace"]) <= 0 or abs(float(r["gpu_alloc"]) - rows) > 0.051 * 1048576:
        fails.append("stage %s: GPU allocated %s, rows %d (workspace %s)" % (r["stage"], r["gpu_alloc"], rows, r["workspace"]))
print("\n".join(fails) if fails else "sums")
PY
        [ "$(cat "$tmp/check.txt")" = "sums" ] && grep -q "| workspace MB | .* | GPU allocated MB |" "$tmp/cu/compare.md" \
            && ok "$CUDA_TRAINER: workspace column; GPU allocated = the sum of the rows" || { bad "$CUDA_TRAINER: GPU allocated"; cat "$tmp/check.txt"; }
    fi
    start=$SECONDS
    if ! /usr/bin/python3 dev/bench/compare_stages.py --trainer "$CUDA_TRAINER" --ranks 2 --steps 2 --grad-dtype fp32 --out "$tmp/cu32" > "$tmp/cu32.txt" 2>&1; then
        bad "compare_stages.py --trainer $CUDA_TRAINER --grad-dtype fp32 ran"; tail -5 "$tmp/cu32.txt"
    else
        ok "compare_stages.py --grad-dtype fp32 ran ($((SECONDS - start)) s)"
        /usr/bin/python3 "$tmp/check.py" "$tmp/cu32/compare.csv" > "$tmp/check.txt"
        [ "$(cat "$tmp/check.txt")" = "consistent" ] && ok "--grad-dtype fp32: table = plan (grad scratch included); the 4 loss columns match" \
            || { bad "--grad-dtype fp32: table vs plan"; cat "$tmp/check.txt"; }
        /usr/bin/python3 - "$tmp/cu/compare.csv" "$tmp/cu32/compare.csv" > "$tmp/check.txt" <<'PY'
import csv, sys
fails = []
for h, f in zip(csv.DictReader(open(sys.argv[1])), csv.DictReader(open(sys.argv[2]))):
    if int(f["grads"]) != 2 * int(h["grads"]) or int(f["rs"]) != 2 * int(h["rs"]) or int(h["grad_scratch"]) != 0 \
            or int(f["grad_scratch"]) <= 0 or (f["params"], f["optimizer"]) != (h["params"], h["optimizer"]):
        fails.append("stage %s: grads %s vs %s, rs %s vs %s, scratch %s vs %s" % (f["stage"], f["grads"], h["grads"], f["rs"],
                                                                              h["rs"], f["grad_scratch"], h["grad_scratch"]))
print("\n".join(fails) if fails else "doubled")
PY
        [ "$(cat "$tmp/check.txt")" = "doubled" ] && grep -q "| grad scratch MB |" "$tmp/cu32/compare.md" && grep -q "fp32 grads" "$tmp/cu32/compare.md" \
            && ok "--grad-dtype fp32: grads and reduce-scatter bytes exactly 2x bf16's per stage, a grad scratch column" \
            || { bad "--grad-dtype fp32 vs bf16"; cat "$tmp/check.txt"; }
    fi
fi
/usr/bin/python3 dev/bench/compare_stages.py --grad-dtype fp32 --out "$tmp/gd_cpu" > /dev/null 2> "$tmp/err.txt"; rc=$?
[ $rc -ne 0 ] && grep -q -- "--grad-dtype is for a CUDA trainer" "$tmp/err.txt" && ok "--grad-dtype refused on the CPU trainer" || bad "--grad-dtype on the CPU: exit $rc"

/usr/bin/python3 dev/bench/compare_stages.py --cuda --out "$tmp/cuda_flag" > /dev/null 2> "$tmp/err.txt"; rc=$?
[ $rc -ne 0 ] && grep -q -- "--cuda is gone.*--trainer ./train_gpt2cu" "$tmp/err.txt" && ok "--cuda refused, pointing to --trainer" || bad "--cuda: exit $rc"
# the timeline's plan check can fail: a copy of train_gpt2.c whose stage 0-2 all-gathers after
# the update go in reverse unit order (the same bits, one line changed, so every issuing line is
# still right) is caught by the order check, which the losses cannot see
python3 - train_gpt2.c "$tmp/mut.c" <<'PY'
import sys
s = open(sys.argv[1]).read()
old = """    for (int u = 0; u < p->layout.num_units; u++) {
        trace_issue(model, &model->group, COLL_ALL_GATHER, u, p->shard_size[u]);"""
assert s.count(old) == 1, "the all_gather_units_inplace loop moved: update this mutant"
open(sys.argv[2], "w").write(s.replace(old, old.replace("for (int u = 0; u < p->layout.num_units; u++)", "for (int u = p->layout.num_units - 1; u >= 0; u--)")))
PY
if mpicc -O2 -fopenmp -DUSE_MPI -I. "$tmp/mut.c" -o "$tmp/train_mut" -lm 2> "$tmp/mut_build.txt"; then
    OMP_NUM_THREADS=1 timeout 300 mpirun --bind-to none -np 2 "$tmp/train_mut" -e "$MODEL" -b 2 -t 32 -x 1 -v 0 -s 0 -z 1 -zt "$tmp/mut" > /dev/null 2>&1
    /usr/bin/python3 dev/bench/timeline.py "$tmp/mut" --model "$MODEL" > "$tmp/mut.txt" 2>&1; rc=$?
    [ $rc -ne 0 ] && grep -q "collective 5 is all-gather unit 2, .* the plan's is all-gather unit 0" "$tmp/mut.txt" \
        && ok "mutant (stage 1's param all-gathers in reverse unit order): the timeline's plan check names collective 5" \
        || { bad "mutant all-gather order: exit $rc"; cat "$tmp/mut.txt"; }
else bad "mutant build"; tail -3 "$tmp/mut_build.txt"; fi

summary "compare"
