#!/usr/bin/env bash
# The stage comparison (dev/bench/compare_stages.py) on the tiny model, 4 ranks: its table must
# agree with the plan (bytes sent per step and bytes allocated per category, stage by stage),
# all four stages must print the same losses, and every chart must be written. Then
# dev/plot_log.py must draw a run's log. Timing columns are reported, never asserted.
set -u
cd "$(dirname "$0")/../.."
source dev/test/lib.sh
if ! /usr/bin/python3 dev/bench/compare_stages.py --out "$tmp/cmp" > "$tmp/out.txt" 2>&1; then
    bad "compare_stages.py ran"; tail -5 "$tmp/out.txt"
else
    ok "compare_stages.py ran ($(grep -c '^| [0-3] ' "$tmp/out.txt") stage rows in the printed table)"
    /usr/bin/python3 - "$tmp/cmp/compare.csv" > "$tmp/check.txt" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
fails = []
if [r["stage"] for r in rows] != ["0", "1", "2", "3"]:
    fails.append("stages %s" % [r["stage"] for r in rows])
for r in rows:
    for got, plan in [("rs", "plan_rs"), ("ag", "plan_ag"), ("scalars", "plan_scalars"), ("params", "plan_params"),
                      ("grads", "plan_grads"), ("optimizer", "plan_optimizer"), ("buffers", "plan_buffers")]:
        if r[got] != r[plan]:
            fails.append("stage %s: %s %s != plan %s" % (r["stage"], got, r[got], r[plan]))
losses = {r["losses"] for r in rows}
if len(losses) != 1:
    fails.append("loss columns differ: %s" % losses)
# and the stage ratios of DESIGN.md §5.1: stage 3 gathers more than stages 0-2, which move the same
if not (int(rows[0]["rs"]) + int(rows[0]["ag"]) == int(rows[1]["rs"]) + int(rows[1]["ag"]) == int(rows[2]["rs"]) + int(rows[2]["ag"]) < int(rows[3]["rs"]) + int(rows[3]["ag"])):
    fails.append("bytes per stage do not follow stages 0 = 1 = 2 < 3")
print("\n".join(fails) if fails else "consistent")
PY
    [ "$(cat "$tmp/check.txt")" = "consistent" ] && ok "table = plan (bytes sent and allocated, every stage); the 4 loss columns match" \
        || { bad "table vs plan"; cat "$tmp/check.txt"; }
    good=1
    for f in compare.md compare.csv memory.png comm.png throughput.png loss.png memory_vs_ranks.png; do
        [ -s "$tmp/cmp/$f" ] || { good=0; echo "     missing $f"; }
    done
    [ $good -eq 1 ] && ok "table, CSV and five charts written" || bad "outputs missing"
    if /usr/bin/python3 dev/plot_log.py "$tmp/cmp/z0/main.log" "$tmp/cmp/z3/main.log" -o "$tmp/loss.png" > /dev/null && [ -s "$tmp/loss.png" ]; then
        ok "plot_log.py draws two runs' logs"
    else bad "plot_log.py"; fi
    printf 's:0 trl:10.5\ngarbage\n' > "$tmp/bad.log"
    /usr/bin/python3 dev/plot_log.py "$tmp/bad.log" -o "$tmp/bad.png" 2> "$tmp/err.txt"; rc=$?
    [ $rc -ne 0 ] && grep -q "line 2 is not" "$tmp/err.txt" && ok "plot_log.py names a malformed log line" || bad "plot_log.py on a bad log: exit $rc"
    /usr/bin/python3 dev/bench/compare_stages.py --cuda > /dev/null 2> "$tmp/err.txt"; rc=$?
    [ $rc -ne 0 ] && grep -q "does not exist yet" "$tmp/err.txt" && ok "--cuda says the CUDA trainer is not there yet" || bad "--cuda: exit $rc"
fi
summary "compare"
