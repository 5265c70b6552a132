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
