#!/usr/bin/env bash
# The optimizer-state offload of the CUDA trainer (-zo 1: master, m, v in pinned host memory,
# AdamW on the host) on the CPU emulator (dev/cuda/emu), tiny model, 2 ranks, under the caller's
# EMU_SCHEDULE (run_tests.sh: random). One process is test_gpt2.cu's part (stages 1-3 with -zo 1
# give stage 0's bits, both precisions).
#  A. bf16 and fp32, stages 1, 2, 3 with -zo 1: losses, norms and final model byte-identical to
#     the run without it (the host's AdamW is the kernel's adamw_element, and the norm is the GPU's);
#     every step's collectives = the plan's; the memory table: GPU rows = plan, the optimizer row
#     0, host rows = plan = exact arithmetic (master + m + v: 12 P/N; staging: (b_g + b_p) P/N);
#     every step's PCIe bytes = plan = P/N x bytes per element each way.
#  B. checkpoints: written with -zo 1 (stage 3) resume without it (stage 2), and the other way
#     (stage 1 -> stage 3 with -zo 1): the step-2 model byte-identical to the uninterrupted run.
#  C. the emulator sees a missing wait of the offload: copies of train_gpt2.cu without the copy
#     stream's wait for the reduce-scatter before a grad shard goes down (stage 3, random
#     schedule), without stage 3's wait for a param shard's copy up before its gather (lazy
#     schedule: the copies up run only when something waits for them), and without stage 1-2's
#     all-gather wait for it (stage 2, lazy) must train differently; under the eager schedule the
#     stream-order check (EMU_CHECK_STREAMS=1) must name each missing wait's two ops.
# OFFLOAD_SECTIONS (default "A B C") picks sections; OFFLOAD_BF16 and OFFLOAD_FP32 the two
# trainers (default ./train_gpt2cu_emu, ./train_gpt2fp32cu_emu). make test also runs A with the
# EMU_FMAD=1 builds (train_gpt2cu_emu_fmad, train_gpt2fp32cu_emu_fmad: device code contracted
# into fma as nvcc does by default), where the host's AdamW must still give the kernel's bits:
# llmc/adamw.cuh writes it so that no compiler may contract it (with plain operators, A fails there).
# usage: dev/test/test_offload_emu.sh   (make emu)
set -u
cd "$(dirname "$0")/../.."
source dev/test/lib.sh
source dev/test/zero_lib.sh # losses, norms, mem, padded, plan_bytes, step_bytes
# as dev/test/test_zero_cuda.sh: NCCL's algorithm fixed, and cuBLASLt's summation order following
# each operand's alignment promise, so equal runs must agree to the bit
export NCCL_ALGO=Ring NCCL_PROTO=Simple EMU_CUBLASLT_ALGO_BY_ALIGNMENT=1 OMP_NUM_THREADS=1
BF16=${OFFLOAD_BF16:-./train_gpt2cu_emu} FP32=${OFFLOAD_FP32:-./train_gpt2fp32cu_emu}
SECTIONS=${OFFLOAD_SECTIONS:-A B C}
section() { [[ " $SECTIONS " == *" $1 "* ]]; }
for b in $BF16 $FP32; do [ -x $b ] || { echo "$b missing (make emu)"; echo "offload_emu: 0 passed, 1 failed"; exit 1; }; done

# run NAME BIN ARGS...: the tiny model on 2 ranks (-pn) into $tmp/NAME; rank 0's output in NAME.txt
run() {
    local name=$1 bin=$2; shift 2
    local pids=() r log rc=0
    for r in 1 0; do
        log="$tmp/$name.txt"; [ $r -gt 0 ] && log="$tmp/$name.r$r.txt"
        NCCL_HOSTID="offload-$name-$r" timeout 300 "$bin" -e "$MODEL" "${DATA[@]}" -v 0 -s 0 -b 2 -t 32 -wt 60 \
            -o "$tmp/$name" -pn 2 -pr $r -pi fs -pf "$tmp/rdv_$name" "$@" > "$log" 2>&1 &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || rc=$?; done
    [ $rc -eq 0 ] || { echo "     run $name ($*) exited $rc:"; tail -n 3 "$tmp/$name"*.txt; }
    return $rc
}
final_model() { ls "$tmp/$1"/model_*.bin 2>/dev/null | tail -n 1; } # the last step's (checkpoints write earlier ones)
same_run() { # same final model, losses and norms
    local a b; a=$(final_model "$1"); b=$(final_model "$2")
    [ -n "$a" ] && [ -n "$b" ] && cmp -s "$a" "$b" && [ -n "$(losses "$1")" ] &&
        [ "$(losses "$1")" = "$(losses "$2")" ] && [ "$(norms "$1")" = "$(norms "$2")" ]
}
# plan_pcie NAME / step_pcie NAME: "DOWN UP" of the plan's line / the distinct ones of the steps
plan_pcie() { sed -n 's/^offload per step (plan, PCIe bytes): grads down \([0-9]*\), params up \([0-9]*\)$/\1 \2/p' "$tmp/$1.txt"; }
step_pcie() { sed -n 's/.*| PCIe bytes: grads down \([0-9]*\) params up \([0-9]*\) .*/\1 \2/p' "$tmp/$1.txt" | sort -u; }
# check_offload NAME STAGE BYTES_PER_ELEMENT (floatX): run NAME's table and steps against exact arithmetic
check_offload() {
    local name=$1 z=$2 b=$3 N=2 P row a good=1
    P=$(padded "$name")
    [ -n "$P" ] || { bad "$name: no padded parameter count"; return; }
    for row in params grads optimizer "gather buffers" "host optimizer" "host staging"; do
        a=$(mem "$name" "$row" 2)
        [ -n "$a" ] && [ "$a" = "$(mem "$name" "$row" 3)" ] || { good=0; echo "     $row: allocated '$a' != plan '$(mem "$name" "$row" 3)'"; }
    done
    local exp_params=$(( z < 3 ? b * P : b * P / N ))
    [ "$(mem "$name" params 2)" = "$exp_params" ] || { good=0; echo "     params $(mem "$name" params 2) != $exp_params"; }
    [ "$(mem "$name" optimizer 2)" = 0 ] || { good=0; echo "     GPU optimizer $(mem "$name" optimizer 2) != 0"; }
    [ "$(mem "$name" "host optimizer" 2)" = "$((12 * P / N))" ] || { good=0; echo "     host optimizer != 12 P/N = $((12 * P / N))"; }
    [ "$(mem "$name" "host staging" 2)" = "$((2 * b * P / N))" ] || { good=0; echo "     host staging != 2 x $b P/N = $((2 * b * P / N))"; }
    [ $good -eq 1 ] && ok "$name: memory = plan; GPU optimizer 0, host 12 P/N + staging $((2 * b)) P/N (P=$P)" || bad "$name: memory"
    [ -n "$(plan_bytes "$name")" ] && [ "$(step_bytes "$name")" = "$(plan_bytes "$name")" ] \
        && ok "$name: collectives per step = plan ($(plan_bytes "$name"))" || bad "$name: collectives '$(step_bytes "$name")' != plan '$(plan_bytes "$name")'"
    [ "$(plan_pcie "$name")" = "$((b * P / N)) $((b * P / N))" ] && [ "$(step_pcie "$name")" = "$(plan_pcie "$name")" ] \
        && ok "$name: PCIe bytes per step = plan = $b P/N each way ($(plan_pcie "$name"))" || bad "$name: PCIe bytes '$(step_pcie "$name")', plan '$(plan_pcie "$name")', expected $((b * P / N)) each way"
}

if section A || section B || section C; then # B resumes A's checkpoints, C compares with its runs
echo "--- A. -zo 1 = no offload, stages 1-3, 2 ranks (schedule ${EMU_SCHEDULE:-lazy}, EMU_FMAD=${EMU_FMAD:-0})"
# the bf16 baseline writes a checkpoint at step 1 for B; stages 1-3 give stage 0's bits (test_zero_emu.sh)
for cfg in "bf16 $BF16 2" "fp32 $FP32 4"; do
    set -- $cfg
    prec=$1 bin=$2 b=$3
    ckpt=(); [ $prec = bf16 ] && ckpt=(-n 1)
    run ${prec}_base $bin -z 1 -x 2 "${ckpt[@]}" || { bad "${prec}_base ran"; continue; }
    for z in 1 2 3; do
        name=${prec}_z${z}_zo
        ckpt=(); [ $prec = bf16 ] && [ $z = 3 ] && ckpt=(-n 1)
        run $name $bin -z $z -zo 1 -x 2 "${ckpt[@]}" || { bad "$name ran"; continue; }
        same_run $name ${prec}_base && ok "$prec stage $z -zo 1: losses, norms and model byte-identical to no offload ($(losses $name | tr '\n' ' '))" \
            || { bad "$prec stage $z -zo 1 differs from no offload"; paste <(losses $name) <(losses ${prec}_base) <(norms $name) <(norms ${prec}_base); }
        check_offload $name $z $b
    done
done

fi

if section B; then
echo "--- B. checkpoints across -zo"
mkdir -p "$tmp/to_plain" "$tmp/to_offload"
cp "$tmp/bf16_z3_zo"/*_00000001* "$tmp/to_plain/" 2>/dev/null; cp "$tmp/bf16_base"/*_00000001* "$tmp/to_offload/" 2>/dev/null
run to_plain $BF16 -z 2 -x 2 -y 1 && grep -q "resumed from checkpoint 1" "$tmp/to_plain.txt" \
    && cmp -s "$tmp/to_plain/model_00000002.bin" "$tmp/bf16_base/model_00000002.bin" \
    && ok "-zo 1 stage 3 -> checkpoint at step 1 -> stage 2 without offload: the step-2 model byte-identical" || bad "offload -> no offload resume"
run to_offload $BF16 -z 3 -zo 1 -x 2 -y 1 && grep -q "resumed from checkpoint 1" "$tmp/to_offload.txt" \
    && cmp -s "$tmp/to_offload/model_00000002.bin" "$tmp/bf16_base/model_00000002.bin" \
    && ok "stage 1 without offload -> checkpoint at step 1 -> stage 3 -zo 1: the step-2 model byte-identical" || bad "no offload -> offload resume"

fi

if section C; then
echo "--- C. a missing wait of the offload is seen"
# mutant NAME LINE: train_gpt2.cu without the one line LINE, built for the emulator (fp32)
mutant() {
    [ "$(grep -cF -- "$2" train_gpt2.cu)" = 1 ] || { echo "     the line '$2' is not in train_gpt2.cu once"; return 1; }
    grep -vF -- "$2" train_gpt2.cu > "$tmp/$1.cu"
    dev/cuda/emu/nvcc-cpu -O2 -I. -DENABLE_FP32 -Xcompiler -fopenmp "$tmp/$1.cu" -o "$tmp/bin_$1" > "$tmp/build_$1.txt" 2>&1 \
        || { tail -n 3 "$tmp/build_$1.txt"; return 1; }
}
mutant nodown "stream_wait_for(model->copy_stream, model->comm->stream, model->handoff);" &
mutant noup "offload_wait_params_up(model, g, comm->stream);" &
mutant noag "offload_wait_params_up(model, u, comm->stream);" &
wait
for cfg in "nodown 3 random 2" "noup 3 lazy 1" "noag 2 lazy 1"; do
    set -- $cfg
    name=$1 z=$2 sched=$3 seed=$4 real=fp32_z$2_zo
    [ -x "$tmp/bin_$name" ] || { bad "building the mutant $name"; continue; }
    EMU_CHECK_STREAMS=0 EMU_SCHEDULE=$sched EMU_SEED=$seed run $name "$tmp/bin_$name" -z $z -zo 1 -x 2 > /dev/null 2>&1
    # the mutant must train (a crash would prove nothing about the wait), and unlike the real
    # trainer's same run in A (which gives the no-offload bits under the lazy and random schedules)
    [ -n "$(losses $name)" ] && [ -n "$(losses $real)" ] && [ "$(losses $name) $(norms $name)" != "$(losses $real) $(norms $real)" ] \
        && ok "without that wait ($name), stage $z -zo 1 under the $sched schedule trains differently: $(losses $name | tr '\n' ' ')vs $(losses $real | tr '\n' ' ')" \
        || bad "the mutant $name did not train, or trained like the real trainer: '$(losses $name | tr '\n' ' ')' / '$(losses $real | tr '\n' ' ')'"
done
# the stream-order check (dev/cuda/emu/README.md) names each missing wait under the eager schedule,
# where none of them changes what is computed: the ops and lines it names are the two the wait ordered
for cfg in "nodown 3 cudaMemcpyAsync ncclReduceScatter" "noup 3 ncclAllGather cudaMemcpyAsync" "noag 2 ncclAllGather cudaMemcpyAsync"; do
    set -- $cfg
    name=$1 z=$2
    [ -x "$tmp/bin_$name" ] || continue
    EMU_CHECK_STREAMS=1 EMU_SCHEDULE=eager run ${name}_check "$tmp/bin_$name" -z $z -zo 1 -x 2 > /dev/null 2>&1
    msg=$(cat "$tmp/${name}_check"*.txt | grep -m1 "cuda-emu: streams:")
    [[ $msg == *"$3"* && $msg == *"$4"* && $msg == *"no stream order"* ]] \
        && ok "without that wait ($name), the stream-order check names $3 and $4 under the eager schedule" \
        || bad "the stream-order check did not name the mutant $name's $3 and $4: '${msg:-no message}'"
done
fi
summary "offload_emu"
