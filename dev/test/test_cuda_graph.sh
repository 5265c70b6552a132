#!/usr/bin/env bash
# -cg 1 (train_gpt2.cu, gpt2_train_micro_step): each training micro-step's forward and backward
# kernels captured once as a CUDA graph and replayed, on the CPU emulator (dev/cuda/emu: stream
# capture with CUDA's rules, dev/cuda/emu/tests/graph_test.sh), tiny model, B=2 x T=32:
#  A. the graph step = the plain step: 3 steps of 2 micro-steps each (-d 128), with a val loss
#     every step (the plain forward between replays), bf16 and fp32 (the fp32 graph run under the
#     stream-order check and the random schedule): the same losses, norms, val losses and final
#     model bytes; one capture, replayed 5 times; the same kernels run per step
#     (the emulator's trace: a graph replays the captured launches, it adds none and drops none).
#  B. what -cg refuses, one line each and a non-zero exit: -cg 2, -cg 1 with -z 1, -z auto and -zt,
#     with 2 ranks (-pn 2), and the CPU trainer's -cg 1.
#  C. mutants of train_gpt2.cu (fp32 builds): the losses' copy captured into the graph (its pinned
#     destination, the micro-step's loss slot, is then baked in: a pointer that changes after the
#     capture, replayed stale; slot 1 is never written) must give other step losses than A's plain
#     run; the encoder backward captured (it waits on the host for its previous call's copy:
#     cudaEventSynchronize) and a host wait inside the captured region (wait_for_gpu's
#     cudaEventQuery) must be refused at the capture by the emulator, naming the call.
# Cost: ~1 min for A and B on 2 cores (A's plain and graph runs side by side); C (CUDA_GRAPH_MUTANTS=1, three more emulated builds and
# runs) ~3 min more, left out of make test for its time.
# usage: dev/test/test_cuda_graph.sh   (make emu)
set -u
cd "$(dirname "$0")/../.."
source dev/test/lib.sh
source dev/test/zero_lib.sh # losses, norms
export NCCL_ALGO=Ring NCCL_PROTO=Simple EMU_CUBLASLT_ALGO_BY_ALIGNMENT=1 OMP_NUM_THREADS=1
BF16=./train_gpt2cu_emu FP32=./train_gpt2fp32cu_emu
RUN_ENV=()
for b in $BF16 $FP32; do [ -x $b ] || { echo "$b missing (make emu)"; echo "cuda_graph: 0 passed, 1 failed"; exit 1; }; done

# mutant NAME PYTHON: train_gpt2.cu edited by a python snippet on `s` (which must change it), built for the emulator (fp32)
mutant() {
    python3 - "$tmp/$1.cu" "$2" <<'PY' || return 1
import sys
s = open("train_gpt2.cu").read(); t = s
exec(sys.argv[2])
if t == s: sys.exit("the edit changes nothing in train_gpt2.cu")
open(sys.argv[1], "w").write(s)
PY
    dev/cuda/emu/nvcc-cpu -O2 -I. -DENABLE_FP32 -Xcompiler -fopenmp "$tmp/$1.cu" -o "$tmp/bin_$1" > "$tmp/build_$1.txt" 2>&1 \
        || { tail -n 3 "$tmp/build_$1.txt"; return 1; }
}
MUTANTS=${CUDA_GRAPH_MUTANTS:-0}
if [ "$MUTANTS" = 1 ]; then # built one at a time while section A runs
    ( mutant losses_in_graph '
s = s.replace("    backward_blocks(model, 0);\n    cudaCheck(cudaStreamEndCapture", "    forward_losses_down(model);\n    backward_blocks(model, 0);\n    cudaCheck(cudaStreamEndCapture")
s = s.replace("    cudaCheck(cudaGraphLaunch(model->graph_exec, model->stream));\n    forward_losses_down(model);", "    cudaCheck(cudaGraphLaunch(model->graph_exec, model->stream));")'
      mutant encoder_in_graph '
s = s.replace("    backward_blocks(model, 0);\n    cudaCheck(cudaStreamEndCapture", "    backward_blocks(model, 0);\n    backward_encoder(model, 0);\n    cudaCheck(cudaStreamEndCapture")
s = s.replace("    backward_encoder(model, reduce);\n}\n\n// One optimizer step", "    unit_grads_done(model, 0, reduce);\n    model->dlogits_scale = 0.0f;\n}\n\n// One optimizer step")'
      mutant wait_in_graph '
s = s.replace("    backward_blocks(model, 0);\n    cudaCheck(cudaStreamEndCapture", "    wait_for_gpu(model, \"the forward\");\n    backward_blocks(model, 0);\n    cudaCheck(cudaStreamEndCapture")' ) &
fi

# one NAME BIN ARGS...: one rank, traced, into $tmp/NAME.txt (stdout and the trace interleaved), model into $tmp/NAME/;
# RUN_ENV: more environment for it
one() {
    local name=$1 bin=$2; shift 2
    env ${RUN_ENV[@]+"${RUN_ENV[@]}"} EMU_TRACE=1 timeout 300 "$bin" -e "$MODEL" "${DATA[@]}" -s 0 -b 2 -t 32 -o "$tmp/$name" "$@" > "$tmp/$name.txt" 2>&1 ||
        { echo "     run $name exited $?"; grep -v "^cuda-emu trace" "$tmp/$name.txt" | tail -n 3; return 1; }
}
vals() { grep -o '^val loss [0-9.]*' "$tmp/$1.txt"; }
# kernels NAME: the kernels each step ran, as sorted "count name" lines, one block per step
kernels() {
    awk '/^cuda-emu trace: op [0-9]* kernel / {print n + 0, $5} /^step /{n++}' "$tmp/$1.txt" | sort | uniq -c
}
same_run() { # same final model, losses, norms and val losses
    cmp -s "$tmp/$1/model_00000003.bin" "$tmp/$2/model_00000003.bin" && [ -n "$(losses "$1")" ] &&
        [ "$(losses "$1")" = "$(losses "$2")" ] && [ "$(norms "$1")" = "$(norms "$2")" ] && [ "$(vals "$1")" = "$(vals "$2")" ]
}

echo "--- A. the graph step = the plain step (3 steps x 2 micro-steps, a val loss every step)"
for build in bf16 fp32; do
    bin=$BF16; [ $build = fp32 ] && bin=$FP32
    # the two runs side by side (each is one process on one core: OMP_NUM_THREADS=1)
    one plain_$build $bin -x 3 -d 128 -v 1 -cg 0 & plain_pid=$!
    [ $build = fp32 ] && RUN_ENV=(EMU_CHECK_STREAMS=1 EMU_SCHEDULE=random EMU_SEED=3)
    one graph_$build $bin -x 3 -d 128 -v 1 -cg 1 & graph_pid=$!
    wait $plain_pid; plain_rc=$?
    wait $graph_pid; graph_rc=$?
    [ $plain_rc = 0 ] || { bad "$build: the plain run"; RUN_ENV=(); continue; }
    [ $graph_rc = 0 ] || { bad "$build: the graph run (${RUN_ENV[*]})"; RUN_ENV=(); continue; }
    RUN_ENV=()
    same_run graph_$build plain_$build && ok "$build: -cg 1 gives -cg 0's losses, norms, val losses and model bytes ($(losses graph_$build | tr '\n' ' '))" \
        || { bad "$build: -cg 1 differs from -cg 0"; paste <(losses graph_$build) <(losses plain_$build) <(norms graph_$build) <(norms plain_$build); }
    grep -q "^cuda graph (-cg 1): 1 capture, [1-9][0-9]* nodes per micro-step" "$tmp/graph_$build.txt" \
        && ok "$build: $(grep -o '1 capture, [0-9]* nodes' "$tmp/graph_$build.txt") (6 micro-steps: 1 capture, 5 replays)" \
        || bad "$build: captures '$(grep '^cuda graph' "$tmp/graph_$build.txt")', want 1"
    [ -n "$(kernels plain_$build)" ] && [ "$(kernels graph_$build)" = "$(kernels plain_$build)" ] \
        && ok "$build: each step runs the same kernels, as many times ($(kernels plain_$build | awk '$2 == 0 {n += $1} END {print n}') launches in step 1)" \
        || { bad "$build: the kernels per step differ"; diff <(kernels graph_$build) <(kernels plain_$build) | head -n 6; }
done

echo "--- B. what -cg refuses"
# refused NAME WANT BIN ARGS...: exit non-zero, one line on stderr matching WANT, no step
refused() {
    local name=$1 want=$2 bin=$3; shift 3
    timeout 120 "$bin" -e "$MODEL" "${DATA[@]}" -v 0 -s 0 -b 2 -t 32 -x 1 "$@" > "$tmp/$name.out" 2> "$tmp/$name.err"
    local rc=$?
    [ $rc -ne 0 ] && [ "$(grep -c . "$tmp/$name.err")" = 1 ] && grep -q -- "$want" "$tmp/$name.err" && ! grep -q "^step" "$tmp/$name.out" \
        && ok "$* refused: $(cat "$tmp/$name.err")" || { bad "$*: exit $rc, stderr:"; head -n 3 "$tmp/$name.err"; }
}
refused cg2 "flag -cg expects 0 or 1" $FP32 -cg 2
refused cg_z1 "flag -cg 1 needs -z 0" $FP32 -cg 1 -z 1
refused cg_auto "flag -cg 1 needs -z 0" $FP32 -cg 1 -z auto
refused cg_zt "flags -cg 1 and -zt do not combine" $FP32 -cg 1 -zt "$tmp/trace"
if [ -x ./train_gpt2 ]; then refused cg_cpu "flag -cg is for the CUDA trainer" ./train_gpt2 -cg 1
else echo "     (no ./train_gpt2: the CPU trainer's refusal not checked)"; fi
pids=()
for r in 1 0; do
    NCCL_HOSTID="cg-$r" timeout 120 $FP32 -e "$MODEL" "${DATA[@]}" -v 0 -s 0 -b 2 -t 32 -x 1 -cg 1 -wt 30 -pn 2 -pr $r -pi fs -pf "$tmp/rdv" \
        > "$tmp/cg_2ranks.r$r.out" 2> "$tmp/cg_2ranks.r$r.err" &
    pids+=($!)
done
rcs=""; for p in "${pids[@]}"; do wait "$p"; rcs="$rcs $?"; done
grep -q "flag -cg 1 needs one rank (got 2)" "$tmp/cg_2ranks.r0.err" && [ "$rcs" != " 0 0" ] && ! grep -q "^step" "$tmp/cg_2ranks.r0.out" \
    && ok "-cg 1 -pn 2 refused (exits$rcs): $(grep -m 1 -o 'flag -cg 1 needs one rank.*' "$tmp/cg_2ranks.r0.err")" \
    || { bad "-cg 1 -pn 2: exits$rcs"; head -n 3 "$tmp/cg_2ranks.r0.err"; }

echo "--- C. mutants"
if [ "$MUTANTS" != 1 ]; then echo "     skipped (CUDA_GRAPH_MUTANTS=1 runs them)"; else
    wait # the builds
    [ -d "$tmp/plain_fp32" ] || one plain_fp32 $FP32 -x 3 -d 128 -v 1 -cg 0
    m=losses_in_graph
    if [ -x "$tmp/bin_$m" ]; then
        one $m "$tmp/bin_$m" -x 3 -d 128 -v 1 -cg 1
        grep -q "^step    3/3" "$tmp/$m.txt" && [ "$(grep -o 'train loss [^ ]*' "$tmp/$m.txt")" != "$(grep -o 'train loss [^ ]*' "$tmp/plain_fp32.txt")" ] \
            && ok "mutant $m: caught, the step's losses differ ($(grep -o 'train loss [^ ]*' "$tmp/$m.txt" | awk '{print $3}' | tr '\n' ' ')vs $(losses plain_fp32 | tr '\n' ' '))" \
            || bad "mutant $m: not caught"
    else bad "building the mutant $m"; fi
    # refused_mutant NAME CALL: the run stops at the capture, the emulator naming CALL
    refused_mutant() {
        local m=$1 call=$2 rc
        [ -x "$tmp/bin_$m" ] || { bad "building the mutant $m"; return; }
        one $m "$tmp/bin_$m" -x 1 -v 0 -cg 1 > /dev/null
        rc=$?
        [ $rc -ne 0 ] && ! grep -q "^step" "$tmp/$m.txt" && grep -q "$call at .* during the stream capture begun on .*(cudaErrorStreamCaptureUnsupported)" "$tmp/$m.txt" \
            && ok "mutant $m: refused at the capture, naming $call ($(grep -m 1 -o '^error: CUDA: .*' "$tmp/$m.txt"))" \
            || { bad "mutant $m: not refused naming $call"; grep -v "^cuda-emu trace" "$tmp/$m.txt" | tail -n 3; }
    }
    refused_mutant encoder_in_graph cudaEventSynchronize
    refused_mutant wait_in_graph cudaEventQuery
fi
summary cuda_graph
