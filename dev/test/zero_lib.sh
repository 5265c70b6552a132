# Readers of a trainer's output for the ZeRO tests (dev/test/test_zero.sh on the CPU,
# dev/test/test_zero_cuda.sh on the GPU): both trainers print the same lines. Source after
# dev/test/lib.sh; a run NAME has its rank-0 output in $tmp/NAME.txt and its files in $tmp/NAME/.
model_of() { ls "$tmp/$1"/model_*.bin 2>/dev/null | head -1; }
losses() { grep -o 'train loss [0-9.]*' "$tmp/$1.txt" | awk '{print $3}'; }
norms() { grep -o ' norm [0-9.]*' "$tmp/$1.txt" | awk '{print $2}'; }
# plan_bytes NAME: "RS AG SC" of the plan; step_bytes NAME: the distinct "RS AG SC" of the steps
plan_bytes() { sed -n 's/^comm per step (plan, bus bytes): reduce-scatter \([0-9]*\), all-gather \([0-9]*\), scalars \([0-9]*\)$/\1 \2 \3/p' "$tmp/$1.txt"; }
step_bytes() { sed -n 's/.*bytes sent: reduce-scatter \([0-9]*\) all-gather \([0-9]*\) scalars \([0-9]*\)$/\1 \2 \3/p' "$tmp/$1.txt" | sort -u; }
# mem NAME ROW COLUMN: the memory table's allocated (2) or plan (3) bytes of a row
mem() { awk -F'|' -v row="$2" -v col="$3" '$1 ~ "^"row" " { gsub(/ /, "", $col); print $col }' "$tmp/$1.txt"; }
padded() { sed -n 's/.*parameters padded to \([0-9]*\)$/\1/p' "$tmp/$1.txt"; }
# val_gathers NAME: "BYTES BATCHES" of the run's evaluations (all equal, so one line)
val_gathers() { sed -n 's/^val comm: all-gather \([0-9]*\) bytes over \([0-9]*\) batches$/\1 \2/p' "$tmp/$1.txt" | sort -u; }
# check_eval_gathers RUN_NEVER RUN_ALWAYS_P0 RUN_ALWAYS_P2: stage 3's evaluation gathers the units
# of one forward per batch (= the plan's per-step all-gather under 'never', which gathers each
# unit once), and prefetching does not reach into the backward's units (prefetch 2 = prefetch 0)
check_eval_gathers() {
    local ag vb vn
    read -r _ ag _ <<< "$(plan_bytes "$1")"; read -r vb vn <<< "$(val_gathers "$1")"
    [ -n "$vb" ] && [ -n "$ag" ] && [ "$vb" = "$((ag * vn))" ] \
        && ok "stage 3 evaluation (reshard never, prefetch 2): one forward's gathers per batch = plan ($vb bytes, $vn batches)" \
        || bad "stage 3 evaluation gathers '$vb' over '$vn' batches, plan per forward '$ag'"
    [ -n "$(val_gathers "$3")" ] && [ "$(val_gathers "$3")" = "$(val_gathers "$2")" ] \
        && ok "stage 3 evaluation (reshard always): prefetch 2 gathers what prefetch 0 does ($(val_gathers "$3"))" \
        || bad "evaluation with prefetch 2 gathers '$(val_gathers "$3")', with prefetch 0 '$(val_gathers "$2")'"
}
