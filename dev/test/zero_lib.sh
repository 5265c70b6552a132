# Readers of a trainer's output for the ZeRO tests (dev/test/test_zero.sh on the CPU,
# dev/test/test_zero_cuda.sh on the GPU): both trainers print the same lines. Source after
# dev/test/lib.sh; a run NAME has its rank-0 output in $tmp/NAME.txt and its files in $tmp/NAME/.
# check_stage reads one run against its plan and the ZeRO formula; cuda_run starts the CUDA trainer's ranks.
model_of() { ls "$tmp/$1"/model_*.bin 2>/dev/null | head -1; }
losses() { grep -o 'train loss [0-9.]*' "$tmp/$1.txt" | awk '{print $3}'; }
norms() { grep -o ' norm [0-9.]*' "$tmp/$1.txt" | awk '{print $2}'; }
# plan_bytes NAME: "RS AG SC" of the plan; step_bytes NAME: the distinct "RS AG SC" of the steps
plan_bytes() { sed -n 's/^comm per step (plan, bus bytes): reduce-scatter \([0-9]*\), all-gather \([0-9]*\), scalars \([0-9]*\)$/\1 \2 \3/p' "$tmp/$1.txt"; }
step_bytes() { sed -n 's/.*bytes sent: reduce-scatter \([0-9]*\) all-gather \([0-9]*\) scalars \([0-9]*\)$/\1 \2 \3/p' "$tmp/$1.txt" | sort -u; }
# mem NAME ROW COLUMN: the memory table's allocated (2) or plan (3) bytes of a row
mem() { awk -F'|' -v row="$2" -v col="$3" '$1 ~ "^"row" " { gsub(/ /, "", $col); print $col }' "$tmp/$1.txt"; }
padded() { sed -n 's/.*parameters padded to \([0-9]*\)$/\1/p' "$tmp/$1.txt"; }
# Bytes per parameter each build holds, "PARAMS GRADS OPTIMIZER" (llmc/zero_plan.h's
# ZERO_STATE_BYTES_*): the tests' own statement, not read from the trainer, so that a build
# holding other bytes than its precision says fails the ZeRO formula check below.
BYTES_CPU="4 4 8"   # train_gpt2: fp32 params and grads; AdamW m + v
BYTES_BF16="2 2 12" # train_gpt2cu: bf16 params and grads; fp32 master + m + v
BYTES_BF16_FP32_GRADS="2 4 12" # train_gpt2cu -zd fp32: fp32 grads (plus a bf16 scratch, its own row)
# check_stage NAME N STAGE "PARAMS GRADS OPTIMIZER": run NAME (N ranks, ZeRO STAGE) sent the
# plan's bytes every step (a plan of none at N = 1), and allocated per category the plan's
# bytes, which are the ZeRO formula from the padded parameter count P alone: params PARAMS*P,
# /N in stage 3; optimizer OPTIMIZER*P, /N from stage 1; grads GRADS*P below stage 2 (from
# stage 2 the shard plus buffers, which only the plan counts).
check_stage() {
    local name=$1 N=$2 z=$3 pb gb ob plan steps P row a good=1
    read -r pb gb ob <<< "$4"
    plan=$(plan_bytes "$name"); steps=$(step_bytes "$name")
    if [ "$N" -eq 1 ]; then
        [ "$plan" = "0 0 0" ] && ok "N=1 stage $z: plan moves no bytes" || bad "N=1 stage $z: plan bytes '$plan'"
    elif [ -n "$plan" ] && [ "$steps" = "$plan" ]; then ok "N=$N stage $z: bytes per step = plan ($plan)"
    else bad "N=$N stage $z: bytes per step '$steps' != plan '$plan'"; fi
    P=$(padded "$name")
    [ -n "$P" ] && [ -n "$ob" ] || { bad "N=$N stage $z: no padded count '$P' or bytes per parameter '$4'"; return; }
    for row in params grads optimizer "gather buffers"; do
        a=$(mem "$name" "$row" 2)
        [ -n "$a" ] && [ "$a" = "$(mem "$name" "$row" 3)" ] || { good=0; echo "     $row: allocated '$a' != plan '$(mem "$name" "$row" 3)'"; }
    done
    local exp_params=$(( z < 3 ? pb * P : pb * P / N )) exp_opt=$(( z < 1 ? ob * P : ob * P / N ))
    [ "$(mem "$name" params 2)" = "$exp_params" ] || { good=0; echo "     params $(mem "$name" params 2) != ZeRO $exp_params"; }
    [ "$(mem "$name" optimizer 2)" = "$exp_opt" ] || { good=0; echo "     optimizer $(mem "$name" optimizer 2) != ZeRO $exp_opt"; }
    if [ "$z" -lt 2 ]; then [ "$(mem "$name" grads 2)" = "$((gb * P))" ] || { good=0; echo "     grads $(mem "$name" grads 2) != ZeRO $((gb * P))"; }; fi
    [ $good -eq 1 ] && ok "N=$N stage $z: memory = plan = ZeRO formula (P=$P, $pb/$gb/$ob bytes per parameter)" || bad "N=$N stage $z: memory"
}
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

# cuda_run NAME BIN N ARGS...: the tiny model on N ranks (N processes on this machine's GPUs) into
# $tmp/NAME; rank 0's output in NAME.txt, rank r's in NAME.r<r>.txt
cuda_run() {
    local name=$1 bin=$2 n=$3; shift 3
    local pids=() r log
    for ((r = n - 1; r >= 0; r--)); do # the last rank first: nobody may depend on start order
        log="$tmp/$name.txt"; [ $r -gt 0 ] && log="$tmp/$name.r$r.txt"
        local procs=()
        [ "$n" -gt 1 ] && procs=(-pn "$n" -pr "$r" -pi fs -pf "$tmp/rdv_$name")
        NCCL_HOSTID="gpt2zero-$name-$r" timeout 300 "$bin" -e "$MODEL" "${DATA[@]}" -v 0 -s 0 -b 2 -t 32 -wt 60 \
            -o "$tmp/$name" "${procs[@]}" "$@" > "$log" 2>&1 &
        pids+=($!)
    done
    local rc=0
    for p in "${pids[@]}"; do wait "$p" || rc=$?; done
    [ $rc -eq 0 ] || { echo "     run $name (N=$n $*) exited $rc:"; tail -3 "$tmp/$name"*.txt; }
    return $rc
}
same_run() { # same final model, losses and norms
    local a b; a=$(model_of "$1"); b=$(model_of "$2")
    [ -n "$a" ] && [ -n "$b" ] && cmp -s "$a" "$b" && [ -n "$(losses "$1")" ] &&
        [ "$(losses "$1")" = "$(losses "$2")" ] && [ "$(norms "$1")" = "$(norms "$2")" ]
}
