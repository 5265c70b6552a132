#!/usr/bin/env bash
# Everything a GPU machine should check, in ONE call from a bare machine (nvcc, a python3 with
# torch, no network), inside a deadline of its own (default 570 s, under the device tool's
# 10-minute command): builds, the PyTorch reference files and the peers' builds in parallel; the
# GPU tests; the benchmark beside the peers; per-kernel device times through ncu; the measured
# files for dev/perf's fixtures; logs packed as it goes; a short table printed last.
#
#   dev/gpu_check.sh [LOGDIR] [all|prep|tests|bench|one|multi|zero1|zero2] [--data DIR]
#                    [--deadline SECONDS] [--emu]
#
# Through the device tool (a lent GPU): once, here, `make data` (the tokenized data and the
# tokenizer; needs npm and the network) and `dev/bench/get_peers.sh` (llm.c and cudnn-frontend
# into peers/, ~4 MB; needs the network or local clones), then one call:
#   run(command="dev/gpu_check.sh $OUT", timeout_s=600,
#       carry=["dev/data/tinyshakespeare", "gpt2_tokenizer.bin", "peers"])
# The reference files gpt2_*.bin are written there by train_gpt2.py (python3 with torch), in
# parallel with the build: GPT-2 124M's (~750 MB) cannot travel (64 MiB per call). What comes
# back ($OUT = LOGDIR, at most 8 files): summary.txt (one line per check as it ends, then the
# table), steps.csv, ncu_ours.csv, kernels_bench.csv (dev/perf's measured-fixture interface:
# dev/perf/README.md), steps_flags.csv, ncu_ours_ak.csv, logs.tar (every check's log, appended as each ends, so a killed call keeps
# them), fixture.tar (dev/perf/make_fixture.py's fixture directory, when that script exists:
# `tar -xf fixture.tar -C dev/perf/measured`).
#
# Order (each check first asks whether its estimated time still fits before the deadline, and is
# skipped, saying so, if not; each command is also cut at the deadline):
#   prep   the build (make cuda), the reference files, llm.c's builds (with and without cuDNN,
#          from peers/llm.c, patched for CUDA 13 in a copy), all at once
#   tests  (a) sampling at length, (b) -zo 1 = no offload bit for bit; both kernel suites;
#          test_gpt2cu / test_gpt2fp32cu on the tiny model and GPT-2 124M; (d) -ak 1 in the trainer
#          at 124M: deterministic and near -ak 0; a short run with
#          evaluation, sampling and checkpoints, and its resume. Beside them (the GPU is shared,
#          nothing is timed): dev/test/test_zero_cuda.sh's sections on 2-3 ranks of this GPU
#          (multi: A B C F, then D E G and dev/bench/bench_zero_cuda.sh)
#   bench  alone on the GPU: (c) dev/bench/bench_cuda.sh at B = 64, 32 (T=1024, -r 0) -> steps.csv;
#          (c'') the same with -ak 1 (sm_90a attention), -ak 1 -cg 1 and (c') -cg 1 (CUDA graph)
#          -> steps_flags.csv; ncu over 2 steps at B=32 -> ncu_ours.csv, and with -ak 1 ->
#          ncu_ours_ak.csv; test_kernels --bench -> kernels_bench.csv; the peers at B = 32, 64:
#          llm.c + cuDNN, torch.compile, llm.c, PyTorch eager (dev/bench/peer_torch_gpt2.py; the
#          list in PEERS_RUN) -> steps.csv; then dev/perf/make_fixture.py
# all (default) runs them all; one = tests + bench without multi; a part alone builds first.
# (a), (b), (c) are the first GPU run's findings (2026-11-28, H200): every sample crashed ("more
# than 64 distinct matmul shapes"), -zo 1 was not stage 0's bits (nvcc contracts a*b + c into
# fma in device code), bench_cuda.sh could not start at B >= 32 (the validation loader is built
# with -v 0 and refuses the 32,768-token val file).
#
# --emu: the same parts and paths on the CPU emulator's builds (train_gpt2cu_emu, ...; make emu),
# tiny shapes, for make test (dev/test/run_tests.sh): no GPU, no nvcc needed. ncu is
# dev/test/ncu_emu.py (the emulator's op times in ncu's file layout); (b) is built with the
# emulator's contraction (EMU_FMAD=1, nvcc's default); (c) uses a val file cut to 256 tokens, as
# the default one is cut against B=32 x T=1024; llm.c is not built (no emulated cuDNN/cuBLAS);
# test_gpt2cu is left to make test's own runs of it (minutes per precision on the emulator).
# --data DIR: files the repository does not hold (data, tokenizer, gpt2_*.bin) copied into
# place from DIR (also DIR/dev/data/tinyshakespeare/). PYTHON: the python3 with torch (default:
# the first of python3, /usr/bin/python3 that has it). PEERS: the peers' folder (peers).
# Exit status: 0 every check that ran passed (skipped ones are listed), 1 a check failed,
# 2 something missing (nothing run). The last line is "gpu_check: N passed, N failed".
set -u
usage="usage: dev/gpu_check.sh [LOGDIR] [all|prep|tests|bench|one|multi|zero1|zero2|variants] [--data DIR] [--deadline SECONDS] [--emu]"
die() { echo "dev/gpu_check.sh: $*"; exit 2; }
logdir="" part="" bring="" emu=0 deadline_s=""
while [ $# -gt 0 ]; do
    case "$1" in
        --data) [ $# -ge 2 ] || die "--data needs a directory ($usage)"; bring=$2; shift 2 ;;
        --data=*) bring=${1#--data=}; shift ;;
        --deadline) [ $# -ge 2 ] || die "--deadline needs seconds ($usage)"; deadline_s=$2; shift 2 ;;
        --deadline=*) deadline_s=${1#--deadline=}; shift ;;
        --emu) emu=1; shift ;;
        -h|--help) echo "$usage"; exit 0 ;;
        -*) die "unknown option '$1' ($usage)" ;;
        *) if [ -z "$logdir" ]; then logdir=$1; elif [ -z "$part" ]; then part=$1; else die "unexpected '$1' ($usage)"; fi; shift ;;
    esac
done
logdir=${logdir:-log_gpu_check}
part=${part:-all}
case "$part" in all|prep|tests|bench|one|multi|zero1|zero2|variants) ;; *) die "the part must be all, prep, tests, bench, one, multi, zero1, zero2 or variants, got '$part'" ;; esac
[ -z "$deadline_s" ] && deadline_s=$([ $emu = 1 ] && echo 600 || echo 570)
[[ "$deadline_s" =~ ^[0-9]+$ ]] && [ "$deadline_s" -ge 1 ] || die "--deadline $deadline_s: expected whole seconds >= 1"
if [ -n "$bring" ]; then
    [ -d "$bring" ] || die "--data $bring: not a directory"
    bring=$(cd "$bring" && pwd)
fi
mkdir -p "$logdir" || die "cannot create LOGDIR $logdir"
logdir=$(cd "$logdir" && pwd) # paths given relative to where the script was called from
cd "$(dirname "$0")/.."
t_start=$(date +%s)
deadline=$((t_start + deadline_s))
RESERVE=$([ $emu = 1 ] && echo 5 || echo 15) # seconds kept at the end for make_fixture, packing and the table
want() { # want PART: does this call run PART?
    case "$part:$1" in all:variants) [ -n "${VARIANTS:-}" ] ;; all:*|"$1":"$1"|one:tests|one:bench|multi:zero1|multi:zero2) return 0 ;; *) return 1 ;; esac
}
# the parts before: a part alone still builds (make is quick when the build is there)

# ---------------------------------------------------------------------------------------------
# what runs: the GPU's binaries and shapes, or the emulator's
if [ $emu = 1 ]; then
    mode="emulator"
    TRAIN=./train_gpt2cu_emu TRAIN32=./train_gpt2fp32cu_emu TEST=./test_gpt2cu_emu TEST32=./test_gpt2fp32cu_emu
    KERN=./dev/cuda/test_kernels_emu KERN32=./dev/cuda/test_kernels_fp32_emu
    # (not test_gpt2cu_emu, test_gpt2fp32cu_emu: skipped here, make test runs their _check and _asan builds)
    BUILD=(make -j2 train_gpt2cu_emu train_gpt2fp32cu_emu dev/cuda/test_kernels_emu dev/cuda/test_kernels_fp32_emu
           train_gpt2cu_emu_fmad train_gpt2fp32cu_emu_fmad)  # (b)'s trainers: nvcc's contraction
    REF_PREFIXES=(gpt2_tiny)
    KERN_ARGS=(--only layernorm)           # one family: the suite's path, at the emulator's speed
    KBENCH_ARGS=(-b 1 -t 64 --only gelu) KBENCH_B=1  # (AdamW over 124M parameters alone takes minutes here)
    SAMPLE=(-e gpt2_tiny.bin -b 4 -t 64 -x 1 -v 0 -s 1 -g 80)  # the crash's own command (sample_tiny_g80.log)
    SHORT=(-e gpt2_tiny_bf16.bin -b 2 -t 32)
    BENCH_MODEL=gpt2_tiny_bf16.bin BENCH_T=32 BENCH_BATCHES="8 4" BENCH_STEPS=4 VAL_CUT=256
    NCU_B=2 NCU_T=32 NCU_MODEL=gpt2_tiny_bf16.bin
    PEER_B=(4) PEER_T=32 PEER_STEPS=5 TORCH_ARGS=(--device cpu --shape 2,4,64,32)
    ZERO_STEPS=2 ZERO1="G" ZERO2="" # one section runs the path: make test runs A B E G (test_zero_emu.sh)
    export EMU_THREADS=${EMU_THREADS:-2} EMU_CUBLASLT_ALGO_BY_ALIGNMENT=1
else
    mode="GPU"
    TRAIN=./train_gpt2cu TRAIN32=./train_gpt2fp32cu TEST=./test_gpt2cu TEST32=./test_gpt2fp32cu
    KERN=./dev/cuda/test_kernels KERN32=./dev/cuda/test_kernels_fp32
    REF_PREFIXES=(gpt2_tiny gpt2_124M)
    KERN_ARGS=() KBENCH_ARGS=() KBENCH_B=8
    SAMPLE=(-e gpt2_tiny.bin -b 4 -t 64 -x 1 -v 0 -s 1 -g 300)
    SHORT=(-e gpt2_124M_bf16.bin -b 4 -t 256)
    BENCH_MODEL=gpt2_124M_bf16.bin BENCH_T=1024 BENCH_BATCHES="64 32" BENCH_STEPS=14
    NCU_B=32 NCU_T=1024 NCU_MODEL=gpt2_124M_bf16.bin
    PEER_B=(32 64) PEER_T=1024 PEER_STEPS=14 TORCH_ARGS=()
    ZERO_STEPS=4 ZERO1="A B C F" ZERO2="D E G"
fi
TRAIN_BIN=dev/data/tinyshakespeare/tiny_shakespeare_train.bin
VAL_BIN=dev/data/tinyshakespeare/tiny_shakespeare_val.bin
PEERS=${PEERS:-peers}

# ---------------------------------------------------------------------------------------------
# the bookkeeping: a scratch folder for runs and logs; LOGDIR gets only the few files above
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX") || die "cannot make a scratch folder"
mkdir -p "$work/logs"
children=()
cleanup() {
    local p
    for p in "${children[@]}"; do kill -- "$p" 2>/dev/null; done
    rm -rf "$work"
}
trap cleanup EXIT
summary_txt="$logdir/summary.txt" results="$work/results.tsv" mainlog="$work/logs/gpu_check.log"
: > "$results"
now() { date +%s; }
left() { echo $((deadline - $(now))); }
# tmo CMD...: CMD cut at the deadline (less the reserve), and at its check's own cap (check_end,
# set by check: a kernel that hangs on a GPU ends its check, not the call); 124 if no time is left
tmo() {
    local t=$(($(left) - RESERVE)) c
    if [ -n "${check_end:-}" ]; then c=$((check_end - $(now))); [ $c -lt $t ] && t=$c; fi
    [ $t -gt 0 ] || return 124
    timeout -k 5 "$t" "$@"
}
pack() { # pack FILE...: appended to LOGDIR/logs.tar at once (one writer at a time)
    local f
    for f in "$@"; do
        [ -e "$f" ] || continue
        flock "$work/pack.lock" tar -rf "$logdir/logs.tar" -C "$(dirname "$f")" "$(basename "$f")" 2>/dev/null
    done
}
record() { # record NAME STATUS SECONDS DETAIL: this call's table, and at once summary.txt
    printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >> "$results"
    printf '%-44s %-4s %4ss  %s\n' "$1" "$2" "$3" "$4" >> "$summary_txt"
    printf '   %-44s %-4s %4ss  %s\n' "$1" "$2" "$3" "$4"
}
slug() { echo "$1" | tr -c 'A-Za-z0-9_.-' '_' | sed 's/__*/_/g; s/_$//' | cut -c1-60; }
# check NAME ESTIMATE CMD...: runs CMD (a function of this script, or a command cut at the
# deadline) if ESTIMATE seconds still fit; PASS / FAIL from its exit status (99: SKIP, what it
# needs is not on this machine), the detail from its log's last "N passed, N failed" line (else
# its last line); the log packed at once
check() {
    local name=$1 est=$2; shift 2
    local l; l=$(left)
    if [ $((l - RESERVE)) -lt "$est" ]; then
        record "$name" SKIP 0 "needs ~$est s, $((l - RESERVE)) s left before the deadline"
        return 0
    fi
    local log="$work/logs/$(slug "$name").log" t0 rc detail
    t0=$(now)
    local check_end=$((t0 + 3 * est + 60)) # the cap: three times its estimate and a minute
    echo "== $(date -u +%T) $name: $*" >> "$mainlog"
    if [ "$(type -t "$1")" = function ]; then ("$@") > "$log" 2>&1; else tmo "$@" > "$log" 2>&1; fi
    rc=$?
    detail=$(grep -Eo '[0-9]+ passed, [0-9]+ failed.*' "$log" | tail -1)
    [ -n "$detail" ] || detail=$(grep -v '^\s*$' "$log" | tail -1)
    detail=$(echo "$detail" | cut -c1-150)
    [ $rc -eq 124 ] && detail="cut at the deadline; $detail"
    if [ $rc -eq 0 ]; then record "$name" PASS $(($(now) - t0)) "$detail"
    elif [ $rc -eq 99 ]; then record "$name" SKIP $(($(now) - t0)) "$detail"; rc=0
    else record "$name" FAIL $(($(now) - t0)) "(rc $rc) $detail [logs.tar: $(basename "$log")]"; fi
    echo "   rc $rc" >> "$mainlog"
    pack "$log"
    return $rc
}
# background LANE FUNCTION: FUNCTION's checks beside the foreground's
background() { "$2" & children+=($!); eval "lane_$1=$!"; }

# ---------------------------------------------------------------------------------------------
# the machine
{
    echo "date: $(date -u), mode: $mode, part: $part, deadline ${deadline_s} s"
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet HEAD 2>/dev/null || echo ' (with changes)')"
    if [ $emu = 1 ]; then echo "GPU: none (CPU emulator dev/cuda/emu)"; else
        nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap,clocks.max.sm --format=csv,noheader 2>&1 | head -2; fi
    echo "nvcc: $({ command -v nvcc >/dev/null && nvcc --version || /usr/local/cuda/bin/nvcc --version; } 2>/dev/null | tail -1)"
    echo "cores: $(nproc)"
    echo "mpirun: $(mpirun --version 2>/dev/null | head -1)"
} > "$work/logs/machine.txt" 2>&1
gpu_name=$([ $emu = 1 ] && echo "emulator" || nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
echo "==== gpu_check $part ($mode${gpu_name:+, $gpu_name}), $(date -u)" | tee -a "$summary_txt"
cat "$work/logs/machine.txt"
pack "$work/logs/machine.txt"

# ---------------------------------------------------------------------------------------------
# the files the repository does not hold
DATA_FILES=("$TRAIN_BIN" "$VAL_BIN" gpt2_tokenizer.bin)
ref_files() { echo "$1.bin ${1}_bf16.bin ${1}_debug_state.bin ${1}_losses.bin"; }
if [ -n "$bring" ]; then
    found=0
    for f in "${DATA_FILES[@]}" $(for p in gpt2_tiny gpt2_124M; do ref_files $p; done); do
        for src in "$bring/$f" "$bring/$(basename "$f")"; do
            [ -f "$src" ] || continue
            found=$((found + 1))
            if ! cmp -s "$src" "$f"; then
                mkdir -p "$(dirname "$f")" && cp "$src" "$f" || die "--data: cannot copy $src to $f"
                echo "took $f from $src"
            fi
            break
        done
    done
    [ $found -gt 0 ] || die "--data $bring holds none of tiny_shakespeare_{train,val}.bin, gpt2_tokenizer.bin, gpt2_*.bin"
fi
PY=""
for p in ${PYTHON:-python3 /usr/bin/python3}; do
    if "$p" -c "import torch" >/dev/null 2>&1; then PY=$p; break; fi
done
NVCC=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
problems=()
if [ $emu = 0 ]; then
    [ -n "$gpu_name" ] || problems+=("no GPU: nvidia-smi finds none; run this where an NVIDIA GPU and its driver are (without one: dev/gpu_check.sh --emu, the same paths on the CPU emulator)")
    [ -n "$NVCC" ] || problems+=("no nvcc on PATH or in /usr/local/cuda/bin: install the CUDA toolkit (12.x or 13.x)")
fi
missing=()
for f in "${DATA_FILES[@]}"; do [ -f "$f" ] || missing+=("$f"); done
[ ${#missing[@]} -eq 0 ] || problems+=("missing ${missing[*]}: run make data where npm and the network work, then bring them (the device tool: carry dev/data/tinyshakespeare and gpt2_tokenizer.bin; else --data DIR)")
missing_refs=()
for p in "${REF_PREFIXES[@]}"; do
    for f in $(ref_files "$p"); do [ -f "$f" ] || { missing_refs+=("$p"); break; }; done
done
if [ ${#missing_refs[@]} -gt 0 ] && [ -z "$PY" ]; then
    problems+=("missing the PyTorch reference files ${missing_refs[*]/%/*.bin} and no python3 with torch to write them: make references where torch works and bring them (--data DIR), or set PYTHON")
fi
if [ ${#problems[@]} -gt 0 ]; then
    for p in "${problems[@]}"; do echo "dev/gpu_check.sh: $p"; record "not run" FAIL 0 "$p"; done
    echo "gpu_check: 0 passed, ${#problems[@]} failed"
    exit 2
fi

# ---------------------------------------------------------------------------------------------
# prep: our build, the reference files and the peers' builds at once
ncpu=$(nproc 2>/dev/null || echo 4)
if [ $emu = 0 ]; then
    cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '.')
    [ "$cc" = 90 ] && cc=90a # H100/H200: the sm_90a build, with the wgmma attention (Makefile)
    BUILD=(make -j"$ncpu" cuda ${cc:+GPU_COMPUTE_CAPABILITY=$cc})
fi
refs() { # the reference files (train_gpt2.py writes them from the tokenized val data)
    local p model rc=0
    for p in "${missing_refs[@]}"; do
        model=d12; [ "$p" = gpt2_tiny ] && model=tiny
        echo "--- $PY train_gpt2.py --model $model"
        tmo "$PY" train_gpt2.py --model $model || rc=1
    done
    return $rc
}
# llm.c (peers/llm.c, dev/bench/get_peers.sh) built in a copy: CUDA 13's cudaMemAdvise takes a
# cudaMemLocation (llm.c f1e2ace passes a device id in its managed-memory fallback); NVML from
# the toolkit's stubs when nvml.h exists (llm.c uses it then); cuDNN from the nvidia-cudnn wheel
# of $PY, with cudnn-frontend's headers, whose current versions also need -lnvrtc -lcuda
# (the flags of llm.c's Makefile); each build in $PEERS/build/NAME, kept for later calls
llmc_nvcc_flags() { echo "--threads=0 --use_fast_math -std=c++17 -O3 -gencode arch=compute_${cc:-90},code=sm_${cc:-90}"; }
llmc_build() { # llmc_build NAME [cudnn]
    local dir="$PEERS/build/$1" cuda_home inc=() libs=(-lcublas -lcublasLt) cudnn fe
    if [ "$dir/train_gpt2cu" -nt "$PEERS/llm.c/train_gpt2.cu" ]; then echo "built before: $dir/train_gpt2cu"; return 0; fi
    rm -rf "$dir" && mkdir -p "$PEERS/build" && cp -a "$PEERS/llm.c" "$dir" || return 1
    sed -i 's/cudaMemAdviseSetPreferredLocation, cudaCpuDeviceId)/cudaMemAdviseSetPreferredLocation, cudaMemLocation{cudaMemLocationTypeHost, 0})/' "$dir/llmc/cuda_utils.cuh"
    cuda_home=$(dirname "$(dirname "$NVCC")")
    if [ -f "$cuda_home/include/nvml.h" ] || ls "$cuda_home"/targets/*/include/nvml.h >/dev/null 2>&1; then
        libs+=(-L"$cuda_home/lib64/stubs" -lnvidia-ml)
    fi
    if [ "${2:-}" = cudnn ]; then
        fe="$PEERS/cudnn-frontend/include"
        [ -d "$fe" ] || { echo "no $fe (dev/bench/get_peers.sh)"; return 1; }
        cudnn=$("$PY" -c 'import nvidia.cudnn as m; print(list(m.__path__)[0])' 2>/dev/null)
        [ -n "$cudnn" ] && [ -d "$cudnn/include" ] || { echo "no cuDNN: $PY has no nvidia.cudnn (pip's nvidia-cudnn-cu13)"; return 1; }
        inc=(-DENABLE_CUDNN -I"$(cd "$fe" && pwd)" -I"$cudnn/include")
        libs+=(-L"$cudnn/lib" "-l:$(cd "$cudnn/lib" && ls libcudnn.so* | head -1)" -Xlinker -rpath,"$cudnn/lib" -lnvrtc -L"$cuda_home/lib64/stubs" -lcuda)
        (cd "$dir" && mkdir -p build && echo "nvcc -c llmc/cudnn_att.cpp" && tmo "$NVCC" -c $(llmc_nvcc_flags) "${inc[@]}" llmc/cudnn_att.cpp -o build/cudnn_att.o) || return 1
        inc+=(build/cudnn_att.o)
    fi
    (cd "$dir" && set -x && tmo "$NVCC" $(llmc_nvcc_flags) train_gpt2.cu "${inc[@]}" "${libs[@]}" -o train_gpt2cu)
}
peer_builds() {
    if [ -f "$PEERS/llm.c/train_gpt2.cu" ]; then
        check "prep: build llm.c (peer)" 60 llmc_build llmc &
        check "prep: build llm.c + cuDNN (peer)" 150 llmc_build llmc_cudnn cudnn &
        wait
    else record "prep: build llm.c (peer)" SKIP 0 "no $PEERS/llm.c (dev/bench/get_peers.sh, then carry peers)"; fi
}
if [ $emu = 0 ] && { want bench || [ $part = prep ]; }; then background peers peer_builds; fi
[ ${#missing_refs[@]} -gt 0 ] && { check "prep: reference files (${missing_refs[*]})" 60 refs & refs_pid=$!; }
# a failed build stops here: older binaries would test older code
if ! check "prep: build ($mode)" $([ $emu = 1 ] && echo 200 || echo 90) "${BUILD[@]}"; then
    [ -n "${refs_pid:-}" ] && wait "$refs_pid"
    stop_early=1
fi
[ -n "${refs_pid:-}" ] && wait "$refs_pid"
for p in "${REF_PREFIXES[@]}"; do for f in $(ref_files "$p"); do [ -f "$f" ] || stop_early=1; done; done

# ---------------------------------------------------------------------------------------------
# tests
# (a) sampling at length: every sample crashed on the first GPU ("more than 64 distinct matmul shapes")
sample_check() {
    tmo "$TRAIN" "${SAMPLE[@]}" > "$work/sample.txt" 2>&1; local rc=$?
    cat "$work/sample.txt"
    [ $rc -eq 0 ] || { echo "the run exited $rc"; return 1; }
    awk '/^generating:/ {g = 1} g && /^---$/ {n++} END {exit !(g && n >= 2)}' "$work/sample.txt" \
        || { echo "no whole sample printed (generating: --- ... ---)"; return 1; }
    echo "sampled ${SAMPLE[*]: -1} tokens: ok"
}
# (b) -zo 1 = no offload, bit for bit: the same losses, norms and final model with the optimizer
# state on the host (AdamW on the CPU) as on the device (the kernel); fp32 and bf16 trainers, one
# process, stage 1 (stage 0's bits, test_gpt2.cu). On the emulator the trainers are built with
# nvcc's contraction (EMU_FMAD=1: a*b + c in device code becomes fma, as nvcc --fmad=true does):
# a build without it computes device code like host code and could not see the difference.
zo_pair() { # zo_pair NAME BIN MODEL: no offload vs -zo 1, the same bits
    local name=$1 bin=$2 model=$3 a b
    for zo in 0 1; do
        tmo "$bin" -e "$model" -b 2 -t 32 -x 3 -v 0 -s 0 -z 1 -zo $zo -n 0 -o "$work/zo_${name}_$zo" > "$work/zo_${name}_$zo.txt" 2>&1 \
            || { echo "$name -zo $zo exited $?:"; tail -3 "$work/zo_${name}_$zo.txt"; return 1; }
    done
    a=$(ls "$work/zo_${name}_0"/model_*.bin 2>/dev/null | tail -1); b=$(ls "$work/zo_${name}_1"/model_*.bin 2>/dev/null | tail -1)
    local la lb
    la=$(grep -o 'train loss [0-9.]* norm [0-9.]*' "$work/zo_${name}_0.txt"); lb=$(grep -o 'train loss [0-9.]* norm [0-9.]*' "$work/zo_${name}_1.txt")
    if [ -n "$a" ] && [ -n "$b" ] && cmp -s "$a" "$b" && [ -n "$la" ] && [ "$la" = "$lb" ]; then
        echo "ok   $name: -zo 1 = no offload: losses, norms and final model bit for bit"; return 0
    fi
    echo "FAIL $name: -zo 1 differs from no offload (or a model file is missing: '$a' '$b'):"
    paste <(echo "$la") <(echo "$lb")
    return 1
}
zo_check() {
    local b32=$TRAIN32 b16=$TRAIN rc=0
    if [ $emu = 1 ]; then
        # nvcc-cpu models nvcc's contraction where it knows EMU_FMAD (dev/cuda/emu/README.md)
        if ! grep -q 'EMU_FMAD' dev/cuda/emu/nvcc-cpu; then
            echo "-zo 1's bitwise claim is unchecked as a GPU computes it (on the H200 it failed: 7.89945936 vs 7.89936543 at step 2):"
            echo "the emulator does not model nvcc's fma contraction (no EMU_FMAD in dev/cuda/emu/nvcc-cpu)"
            return 1
        fi
        # the Makefile's builds with nvcc's --fmad=true, made by the prep (this part used to build
        # its own pair: ~45 s of every emulated run)
        b32=./train_gpt2fp32cu_emu_fmad b16=./train_gpt2cu_emu_fmad
        [ -x $b32 ] && [ -x $b16 ] || { echo "no $b32 or $b16 (make $b32 $b16)"; return 1; }
        export EMU_FMAD=1
    fi
    zo_pair fp32 "$b32" gpt2_tiny.bin || rc=1
    zo_pair bf16 "$b16" gpt2_tiny_bf16.bin || rc=1
    return $rc
}
# (d) -ak 1 in the trainer, at GPT-2 124M's shapes (test_kernels holds the sm_90a kernels to the
# reference at its own shapes): two runs bit for bit the same (losses, norms, final model: no
# atomics), and each step's loss within 1% of -ak 0's (a gate for a broken kernel, not a
# precision claim: the two attentions round differently)
ak_check() {
    local k f flags rc=0
    for k in ak0 ak1 ak1b; do
        flags=(); [ $k = ak0 ] || flags=(-ak 1)
        f="$work/$k.txt"
        tmo "$TRAIN" -e gpt2_124M_bf16.bin -b 8 -t 1024 -r 0 -x 4 -v 0 -s 0 -n 0 -o "$work/$k" "${flags[@]}" > "$f" 2>&1 \
            || { echo "$k exited $?:"; tail -3 "$f"; return 1; }
        grep -o 'train loss [0-9.]* norm [0-9.]*' "$f" > "$work/$k.losses"
        echo "$k: $(tr '\n' ' ' < "$work/$k.losses")"
    done
    local a b
    a=$(ls "$work/ak1"/model_*.bin 2>/dev/null | tail -1); b=$(ls "$work/ak1b"/model_*.bin 2>/dev/null | tail -1)
    if [ -s "$work/ak1.losses" ] && cmp -s "$work/ak1.losses" "$work/ak1b.losses" && [ -n "$a" ] && [ -n "$b" ] && cmp -s "$a" "$b"; then
        echo "ok   -ak 1 twice: losses, norms and final model bit for bit"
    else echo "FAIL -ak 1 twice: not the same bits ('$a' '$b')"; rc=1; fi
    if paste "$work/ak0.losses" "$work/ak1.losses" | awk '{d = $3 - $8; if (d < 0) d = -d; if (NF != 10 || d > 0.01 * $3) bad = 1; n++}
            END {exit (bad || n < 4)}'; then echo "ok   -ak 1's losses within 1% of -ak 0's at each of 4 steps"
    else echo "FAIL -ak 1's losses are not within 1% of -ak 0's (or steps are missing)"; rc=1; fi
    return $rc
}
short_run() { tmo "$TRAIN" "${SHORT[@]}" -x 4 -v 2 -m 2 -s 4 -g 16 -n 2 -o "$work/run"; }
resume_run() {
    tmo "$TRAIN" "${SHORT[@]}" -x 6 -v 0 -s 0 -y 1 -o "$work/run" > "$work/resume.txt" 2>&1; local rc=$?
    cat "$work/resume.txt"
    [ $rc -eq 0 ] && grep -q "resumed from checkpoint 4" "$work/resume.txt"
}
zero_sections() { # zero_sections "SECTIONS": dev/test/test_zero_cuda.sh's, on this machine's binaries
    ZERO_CUDA_BF16=$TRAIN ZERO_CUDA_FP32=$TRAIN32 ZERO_CUDA_SECTIONS="$1" ZERO_CUDA_STEPS=$ZERO_STEPS tmo bash dev/test/test_zero_cuda.sh
}
zero_bench() { # the stages side by side on 2 ranks of this GPU: memory per rank and bytes (times are shared)
    BENCH_TRAINER=$TRAIN BENCH_MODEL=$BENCH_MODEL BENCH_B=2 BENCH_T=$([ $emu = 1 ] && echo 32 || echo 1024) \
        BENCH_STEPS=$([ $emu = 1 ] && echo 3 || echo 6) tmo dev/bench/bench_zero_cuda.sh 2 "$work/bench_zero" > "$work/bench_zero.txt" 2>&1
    local rc=$?
    cat "$work/bench_zero.txt"
    [ $rc -eq 0 ] && ! grep -q 'failed' "$work/bench_zero.txt" && grep -q '^z3_never_0 ' "$work/bench_zero.txt"
}
lane_multi() { # several ranks on this GPU; nothing here is timed
    if want zero1; then check "multi: test_zero_cuda.sh $ZERO1" $([ $emu = 1 ] && echo 60 || echo 150) zero_sections "$ZERO1"; fi
    if want zero2; then
        if [ -n "$ZERO2" ]; then check "multi: test_zero_cuda.sh $ZERO2" 100 zero_sections "$ZERO2"
        else record "multi: test_zero_cuda.sh, more sections" SKIP 0 "one section runs the path here; make test runs A B E G (test_zero_emu.sh)"; fi
        check "multi: bench_zero_cuda.sh, 2 ranks" $([ $emu = 1 ] && echo 60 || echo 90) zero_bench
    fi
}

if [ -z "${stop_early:-}" ]; then
    if want zero1 || want zero2; then background multi lane_multi; fi
    if want tests; then
        check "(a) sampling at length (-g ${SAMPLE[*]: -1})" $([ $emu = 1 ] && echo 60 || echo 20) sample_check
        check "(b) -zo 1 = no offload, bit for bit" $([ $emu = 1 ] && echo 150 || echo 30) zo_check
        check "kernels fp32" $([ $emu = 1 ] && echo 40 || echo 20) "$KERN32" "${KERN_ARGS[@]}"
        check "kernels bf16" $([ $emu = 1 ] && echo 40 || echo 20) "$KERN" "${KERN_ARGS[@]}"
        for prefix in "${REF_PREFIXES[@]}"; do
            for t in "$TEST32" "$TEST"; do
                if [ $emu = 1 ]; then record "$(basename "$t") $prefix" SKIP 0 "minutes on the emulator: make test runs test_gpt2cu_emu_check and test_gpt2fp32cu_emu_asan (run_tests.sh)"; continue; fi
                check "$(basename "$t") $prefix" $([ $prefix = gpt2_tiny ] && echo 10 || echo 30) "$t" "$prefix"
            done
        done
        [ $emu = 0 ] && check "(d) -ak 1: deterministic, near -ak 0 (124M)" 40 ak_check
        check "short run: eval, sampling, checkpoints" $([ $emu = 1 ] && echo 40 || echo 25) short_run
        check "resume from its checkpoint" $([ $emu = 1 ] && echo 30 || echo 15) resume_run
    fi
fi

# ---------------------------------------------------------------------------------------------
# bench: alone on the GPU (the multi lane and the peers' builds end first)
steps_csv="$logdir/steps.csv"
steps_row() { # steps_row TRAINER B T RECOMPUTE MS STEPS: a row of dev/perf's steps.csv
    [ -s "$steps_csv" ] || echo "trainer,B,T,recompute,ms_per_step,steps" > "$steps_csv"
    echo "$1,$2,$3,$4,$5,$6" >> "$steps_csv"
    echo "steps.csv: $1,$2,$3,$4,$5,$6"
}
median_ms() { # median_ms FILE SED_REGEX: "MEDIAN COUNT" of the captured times after the first 3 steps (warm-up)
    sed -nE "s/$2/\1/p" "$1" | tail -n +4 | sort -g | awk '{v[NR] = $1} END {if (NR) printf "%s %d\n", v[int((NR + 1) / 2)], NR}'
}
# (c) our benchmark on the default data at every B it tries (-v 0: nothing evaluates). On the
# emulator the val file is cut to VAL_CUT = 256 tokens, so that B=8 x T=32 + 1 needs more than it
# holds, as B=32 x T=1024 + 1 does of the 32,768-token file.
bench_ours() { # bench_ours DIR [TRAINER FLAGS...]
    local dir=$1 rc=0 B ms n failed=(); shift
    BENCH_TRAINER=$TRAIN BENCH_MODEL=$BENCH_MODEL BENCH_T=$BENCH_T BENCH_BATCHES="$BENCH_BATCHES" BENCH_ARGS="$*" \
        tmo dev/bench/bench_cuda.sh "$dir" $BENCH_STEPS > "$dir.txt" 2>&1
    cat "$dir.txt"
    for B in $BENCH_BATCHES; do
        if awk -v b="$B" '$1 == b && $2 == "ok" {f = 1} END {exit !f}' "$dir.txt"; then
            read -r ms n < <(median_ms "$dir/bench_B$B.log" '^step.*\(([0-9.]+) ms,.*')
            [ -n "$ms" ] && steps_row "${TRAINER_NAME:-ours}" "$B" "$BENCH_T" 0 "$ms" "$n" || { echo "B=$B: no step times"; rc=1; }
        else
            failed+=("B=$B: $(grep "^$B " "$dir.txt" | sed 's/.*(//; s/)$//' | cut -c1-160)"); rc=1
            echo "$B" >> "$work/bench_failed"
        fi
    done
    (cd "$(dirname "$dir")" && tar -cf "$dir.tar" "$(basename "$dir")" "$(basename "$dir").txt" 2>/dev/null); pack "$dir.tar"
    [ $rc -eq 0 ] && echo "benchmark: every B ran ($BENCH_BATCHES)"
    [ ${#failed[@]} -eq 0 ] || printf 'did not run: %s\n' "${failed[@]}"
    return $rc
}
# (c') and (c''): the same benchmark with -cg 1 (each micro-step's forward and backward as one CUDA
# graph), -ak 1 (the sm_90a attention kernels; opt-in) and -ak 1 -cg 1, at
# every B of (c): rows "ours-cg", "ours-ak", "ours-ak-cg" of steps_flags.csv, beside steps.csv
# (make_fixture.py reads steps.csv only; one file keeps LOGDIR within the device tool's 8). -cg 1's
# step against (c)'s at the same B is the measurement of the time between a graph's kernels, which
# dev/perf/devices.json graph_gap_us only assumes (a published figure): with ncu's kernel ms,
# (ms with -cg 1 - ncu kernel ms - the plain gaps left outside the graph) / the graph's kernels.
# -ak 1 -cg 1 is the step the model's "after" prediction prices (dev/cuda/NOTES.md).
bench_ours_flags() { # bench_ours_flags DIR NAME [TRAINER FLAGS...]
    local dir=$1 steps_csv="$logdir/steps_flags.csv" TRAINER_NAME=$2; shift 2
    bench_ours "$dir" "$@"
}
bench_fallback() { # the B that (c) refused, again with the train file as the val file: the times all the same
    local batches; batches=$(tr '\n' ' ' < "$work/bench_failed")
    BENCH_BATCHES=$batches bench_ours "$work/bench_val_is_train" -j "$TRAIN_BIN"
}
NCU=()
if [ $emu = 1 ]; then NCU=(python3 dev/test/ncu_emu.py)
else
    n=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)
    [ -n "$n" ] && NCU=("$n")
fi
# per-kernel device times: ncu over 2 training steps of ours at B = NCU_B, T = NCU_T, every kernel
# (the init's too; dev/perf/make_fixture.py takes the last steps). The train file is the val file
# here so that (c) does not stop the profile. Exit 99: ncu does not work on this machine (skipped).
ncu_ours() {
    [ ${#NCU[@]} -gt 0 ] || { echo "no ncu on PATH, in /usr/local/cuda/bin or /opt/nvidia/nsight-compute"; return 99; }
    local out="$logdir/ncu_ours.csv" rc rows
    tmo "${NCU[@]}" --clock-control none --metrics gpu__time_duration.sum --csv --page raw --log-file "$out" \
        "$TRAIN" -e "$NCU_MODEL" -b $NCU_B -t $NCU_T -r 0 -x 2 -v 0 -s 0 -j "$TRAIN_BIN"
    rc=$?
    rows=$(grep -c '^"[0-9]' "$out" 2>/dev/null)
    grep '^==' "$out" | head -5
    if [ "${rows:-0}" -eq 0 ]; then
        rm -f "$out"
        if [ $rc -ne 0 ] && grep -q '==ERROR==' "$work/logs/"*ncu*.log 2>/dev/null; then echo "ncu does not work here (above)"; return 99; fi
        echo "ncu exited $rc with no kernel rows"; return 1
    fi
    [ $rc -eq 0 ] || { echo "the profiled run exited $rc"; return 1; }
    python3 dev/bench/ncu_table.py "$out" 2 | tee "$work/ncu_table.txt" | head -40
    echo "ncu: $rows launches over 2 steps of B=$NCU_B T=$NCU_T: $logdir/ncu_ours.csv"
}
# the same with -ak 1 (the sm_90a attention): ncu_ours_ak.csv, beside ncu_ours.csv
ncu_ours_ak() {
    [ ${#NCU[@]} -gt 0 ] || { echo "no ncu"; return 99; }
    local out="$logdir/ncu_ours_ak.csv" rows
    tmo "${NCU[@]}" --clock-control none --metrics gpu__time_duration.sum --csv --page raw --log-file "$out" \
        "$TRAIN" -e "$NCU_MODEL" -b $NCU_B -t $NCU_T -r 0 -x 2 -v 0 -s 0 -j "$TRAIN_BIN" -ak 1 || { echo "ncu -ak 1 exited $?"; return 1; }
    rows=$(grep -c '^"[0-9]' "$out" 2>/dev/null)
    [ "${rows:-0}" -gt 0 ] || { echo "no kernel rows"; return 1; }
    python3 dev/bench/ncu_table.py "$out" 2 | tee "$work/ncu_table_ak.txt" | head -40
    echo "ncu -ak 1: $rows launches over 2 steps of B=$NCU_B T=$NCU_T: $logdir/ncu_ours_ak.csv"
}
kernels_bench() {
    tmo "$KERN" --bench "${KBENCH_ARGS[@]}" --csv "$logdir/kernels_bench.csv" || return 1
    echo "kernels_bench.csv: $(($(wc -l < "$logdir/kernels_bench.csv") - 1)) kernels (${KBENCH_ARGS[*]:-B=8, T=1024})"
}
# the peers, each at every B of PEER_B: the median step after the first 3, as ours
# (llm.c takes step % val_loss_every and step % sample_every: -v 0 or -s 0 divides by zero, SIGFPE,
# as the H200 found; a period past the last step evaluates (-m 1: one batch) and samples once,
# after the timed steps)
peer_llmc() { # peer_llmc NAME B: llm.c from a fresh d12 (random init), -r 0, the train file as val
    local bin="$PEERS/build/$1/train_gpt2cu" f="$work/$1_B$2.txt" ms n
    [ -x "$bin" ] || { echo "$1 was not built (see its build)"; return 99; }
    tmo "$bin" -e d12 -b "$2" -t $PEER_T -r 0 -x $PEER_STEPS -v 100000 -s 100000 -m 1 -i "$TRAIN_BIN" -j "$TRAIN_BIN" > "$f" 2>&1
    local rc=$?; tail -n 20 "$f"
    [ $rc -eq 0 ] || return 1
    read -r ms n < <(median_ms "$f" '^step.*\| ([0-9.]+) ms \|.*')
    [ -n "$ms" ] && steps_row "$1" "$2" $PEER_T 0 "$ms" "$n"
}
peer_torch() { # peer_torch NAME B [compile]
    [ -n "$PY" ] || { echo "no python3 with torch"; return 99; }
    local f="$work/$1_B$2.txt" ms
    tmo "$PY" dev/bench/peer_torch_gpt2.py "$2" $PEER_STEPS ${3:-} "${TORCH_ARGS[@]}" > "$f" 2>&1
    local rc=$?; tail -n 5 "$f"
    [ $rc -eq 0 ] || return 1
    ms=$(sed -nE 's/.*: median ([0-9.]+) ms\/step.*/\1/p' "$f")
    [ -n "$ms" ] && steps_row "$1" "$2" $PEER_T 0 "$ms" $((PEER_STEPS - 3))
}
card=$(echo "${gpu_name:-unknown}" | sed -E 's/^NVIDIA //; s/ .*//' | tr 'A-Z' 'a-z' | tr -c 'a-z0-9\n' '-')
[ $emu = 1 ] && card=emu
# dev/perf/make_fixture.py's fixture of this run, packed as fixture.tar. Without the model's inputs
# (--no-trace: tracing the tree on the emulator takes minutes of CPU; FIXTURE_TRACE=1 does it
# here): the command it prints remakes the fixture with them from LOGDIR's files, on any machine
# with this commit.
fixture() {
    [ -f dev/perf/make_fixture.py ] || { echo "no dev/perf/make_fixture.py in this tree: the raw files stay in LOGDIR"; return 99; }
    local day name args=() trace=(--no-trace)
    # named by card, day and commit (a second run of the same card on the same day keeps its own,
    # as dev/perf/measured/h200_2026-11-28 and h200_2026-11-28_1f4c85f)
    day=$(date -u +%F); name="${card}_${day}_$(git rev-parse --short=7 HEAD 2>/dev/null || echo tree)"
    [ "${FIXTURE_TRACE:-0}" = 1 ] && trace=()
    [ -s "$logdir/ncu_ours.csv" ] && args+=(--ncu ncu_ours.csv --ncu-steps 2 --ncu-batch $NCU_B --ncu-seq $NCU_T)
    [ -s "$steps_csv" ] && args+=(--steps steps.csv)
    # the -ak 1 ncu and the -ak 1 / -cg 1 steps: make_fixture.py keeps them (and traces the tree with -ak 1)
    [ -s "$logdir/ncu_ours_ak.csv" ] && [ -s "$logdir/ncu_ours.csv" ] && args+=(--ncu-ak1 ncu_ours_ak.csv)
    [ -s "$logdir/steps_flags.csv" ] && args+=(--steps-flags steps_flags.csv)
    [ -s "$logdir/kernels_bench.csv" ] && args+=(--bench kernels_bench.csv --bench-batch "${KBENCH_B}")
    [ ${#args[@]} -gt 0 ] || { echo "no measured file in LOGDIR (ncu_ours.csv, steps.csv, kernels_bench.csv)"; return 1; }
    args=(--card "$card" --date "$day" "${args[@]}" --conditions "dev/gpu_check.sh ($mode), $(tr '\n' ';' < "$work/logs/machine.txt")")
    mkdir -p "$work/fixture"
    (cd "$logdir" && tmo python3 "$OLDPWD/dev/perf/make_fixture.py" --out "$work/fixture/$name" "${args[@]}" "${trace[@]}") || return 1
    tar -cf "$logdir/fixture.tar" -C "$work/fixture" "$name" || return 1
    echo "fixture: LOGDIR/fixture.tar ($name: tar -xf it in dev/perf/measured)"
    [ ${#trace[@]} -gt 0 ] && echo "with the model's inputs (minutes of CPU), in LOGDIR: python3 \$REPO/dev/perf/make_fixture.py --out \$REPO/dev/perf/measured/$name $(printf "'%s' " "${args[@]}")--rev $(git rev-parse --short HEAD)"
    return 0
}

if [ -z "${stop_early:-}" ] && want bench; then
    [ -n "${lane_multi:-}" ] && wait "$lane_multi"
    [ -n "${lane_peers:-}" ] && wait "$lane_peers"
    rm -f "$work/bench_failed" "$steps_csv" "$logdir/steps_flags.csv" "$logdir/ncu_ours_ak.csv" "$logdir/ncu_ours.csv" "$logdir/kernels_bench.csv" "$logdir/fixture.tar" # this call's measurements
    if [ $emu = 1 ]; then
        # the header (magic, version, token count, ...) with the count set to VAL_CUT, then its tokens
        { head -c 8 "$VAL_BIN"; printf "\\x$(printf %02x $((VAL_CUT % 256)))\\x$(printf %02x $((VAL_CUT / 256)))\\x00\\x00"
          tail -c +13 "$VAL_BIN" | head -c $((1012 + 2 * VAL_CUT)); } > "$work/val_cut.bin"
        BENCH_VAL=(-j "$work/val_cut.bin")
    else BENCH_VAL=(); fi
    check "(c) bench_cuda.sh starts at B = ${BENCH_BATCHES// /, }" $([ $emu = 1 ] && echo 60 || echo 45) bench_ours "$work/bench" "${BENCH_VAL[@]}"
    if [ -s "$work/bench_failed" ]; then
        check "    the same B, the train file as val" $([ $emu = 1 ] && echo 40 || echo 40) bench_fallback
    fi
    if [ $emu = 1 ]; then
        check "(c') bench_cuda.sh -cg 1 (CUDA graph)" 30 bench_ours_flags "$work/bench_cg" ours-cg "${BENCH_VAL[@]}" -cg 1
        record "(c'') bench_cuda.sh -ak 1" SKIP 0 "the emulated bench's tiny model has 16-channel heads (the sm_90a kernels need 64)"
    else
        check "(c'') bench_cuda.sh -ak 1 (sm_90a attention)" 40 bench_ours_flags "$work/bench_ak" ours-ak "${BENCH_VAL[@]}" -ak 1
        check "(c'') bench_cuda.sh -ak 1 -cg 1" 40 bench_ours_flags "$work/bench_ak_cg" ours-ak-cg "${BENCH_VAL[@]}" -ak 1 -cg 1
        check "(c') bench_cuda.sh -cg 1 (CUDA graph)" 40 bench_ours_flags "$work/bench_cg" ours-cg "${BENCH_VAL[@]}" -cg 1
    fi
    check "ncu: per-kernel times, B=$NCU_B, 2 steps" $([ $emu = 1 ] && echo 40 || echo 90) ncu_ours
    [ $emu = 0 ] && check "ncu -ak 1: per-kernel times, B=$NCU_B, 2 steps" 90 ncu_ours_ak
    check "kernels --bench" $([ $emu = 1 ] && echo 30 || echo 40) kernels_bench
    for peer in ${PEERS_RUN:-llmc_cudnn torch_compile llmc torch_eager}; do
        for B in "${PEER_B[@]}"; do
            case $peer in
                llmc*) if [ $emu = 1 ]; then record "peer $peer B=$B" SKIP 0 "llm.c is not built for the emulator (cuBLAS, cuDNN)"; continue; fi
                       check "peer $peer B=$B" 25 peer_llmc $peer "$B" ;;
                torch_compile) if [ $emu = 1 ]; then record "peer $peer B=$B" SKIP 0 "torch.compile on the CPU takes minutes: eager runs the script's path"; continue; fi
                       check "peer $peer B=$B" $([ "$B" = "${PEER_B[0]}" ] && echo 120 || echo 70) peer_torch $peer "$B" compile ;;
                torch_eager) check "peer $peer B=$B" $([ $emu = 1 ] && echo 30 || echo 30) peer_torch $peer "$B" ;;
            esac
        done
    done
    check "dev/perf/make_fixture.py" 10 fixture
fi
# ---------------------------------------------------------------------------------------------
# variants: the same tree built again with other -D flags (VARIANTS="NAME:-DA=1,-DB NAME2:-DC"),
# each beside the plain build ("base") on this GPU: its kernel checks (test_kernels, the
# families in VARIANT_ONLY, default all), the kernel bench at B = VARIANT_B (default 32; rows
# "NAME kernel ms" in the log) and the trainer at that B, base and each variant alternating
# twice (rows ours-NAME of variants.csv, in logs.tar and the table: LOGDIR keeps to the device
# tool's 8 files, and steps_flags.csv to the flags make_fixture.py knows). How a candidate change is measured before it is
# made the default (the layernorm backward's rows per chunk was chosen so, 2026-11-28). E.g.
# VARIANTS="held:-DCLASSIFIER_NO_STREAMED r32:-DLAYERNORM_BWD_ROWS=32" VARIANT_ONLY=... .
# VARIANT_TRAIN_FLAGS: trainer flags for every build's steps (base and variants), e.g. "-ak 1" for
# a change to the sm_90a attention (VARIANTS="serial:-DATT90_FWD_OVERLAP=0": the forward's
# overlapped loop against the serial one); test_kernels uses the sm_90a kernels wherever it can.
variant_build() { # variant_build NAME FLAGS: a copy of the sources, built with FLAGS added to nvcc's
    local dir="$work/v_$1" flags=${2//,/ }
    mkdir -p "$dir" && cp -a Makefile llmc train_gpt2.c train_gpt2.cu dev "$dir/" || return 1
    if [ $emu = 1 ]; then tmo make -C "$dir" -j2 train_gpt2cu_emu dev/cuda/test_kernels_emu EXTRA_NVCC_FLAGS="$flags"
    else tmo make -C "$dir" -j"$ncpu" train_gpt2cu dev/cuda/test_kernels ${cc:+GPU_COMPUTE_CAPABILITY=$cc} EXTRA_NVCC_FLAGS="$flags"; fi
}
variant_measure() {
    local B=${VARIANT_B:-32} v n kern tr rc=0 round only=()
    [ -n "${VARIANT_ONLY:-}" ] && only=(--only "$VARIANT_ONLY")
    mkdir -p "$work/v_base/dev/cuda" && cp "$TRAIN" "$work/v_base/$(basename "$TRAIN")" && cp "$KERN" "$work/v_base/dev/cuda/" || return 1
    for v in base $VARIANTS; do
        n=${v%%:*}; kern="$work/v_$n/dev/cuda/$(basename "$KERN")"
        [ -x "$kern" ] || { echo "$n: not built"; rc=1; continue; }
        echo "-- $n ($([ $n = base ] && echo "the plain build" || echo "${v#*:}")): $(tmo "$kern" "${only[@]}" | tail -1)"
        tmo "$kern" --bench -b "$B" "${only[@]}" | awk -v n="$n" -F'|' 'NF > 3 && $3 ~ /[0-9]/ {gsub(/ +$/, "", $2); printf "%s %s %s ms\n", n, $2, $3}'
    done
    for round in 1 2; do
        for v in base $VARIANTS; do
            n=${v%%:*}; tr="$work/v_$n/$(basename "$TRAIN")"
            [ -x "$tr" ] || continue
            local steps_csv="$work/variants.csv" TRAINER_NAME="ours-$n${VARIANT_TRAIN_FLAGS:+ ${VARIANT_TRAIN_FLAGS}}"
            # shellcheck disable=SC2086 # VARIANT_TRAIN_FLAGS: several words
            tmo "$tr" -e "$BENCH_MODEL" -b "$B" -t $BENCH_T -r 0 -x $BENCH_STEPS -v 0 -s 0 "${BENCH_VAL[@]}" ${VARIANT_TRAIN_FLAGS:-} > "$work/v_${n}_$round.txt" 2>&1 || { echo "$n exited $?"; rc=1; continue; }
            read -r ms cnt < <(median_ms "$work/v_${n}_$round.txt" '^step.*\(([0-9.]+) ms,.*')
            [ -n "$ms" ] && steps_row "$TRAINER_NAME" "$B" "$BENCH_T" 0 "$ms" "$cnt"
        done
    done
    pack "$work/variants.csv"
    return $rc
}
if [ -z "${stop_early:-}" ] && want variants; then
    if [ -z "${VARIANTS:-}" ]; then record "variants" SKIP 0 "no VARIANTS (\"NAME:-DFLAG,... ...\")"
    else
        [ -n "${lane_multi:-}" ] && wait "$lane_multi"
        [ -n "${BENCH_VAL+x}" ] || BENCH_VAL=()
        builds=()
        for v in $VARIANTS; do check "variants: build ${v%%:*} (${v#*:})" $([ $emu = 1 ] && echo 200 || echo 60) variant_build "${v%%:*}" "${v#*:}" & builds+=($!); done
        wait "${builds[@]}"
        check "variants: checks, kernel bench, trainer at B=${VARIANT_B:-32}" $([ $emu = 1 ] && echo 120 || echo 90) variant_measure
    fi
fi
[ -n "${lane_multi:-}" ] && wait "$lane_multi"
[ -n "${lane_peers:-}" ] && wait "$lane_peers"

# ---------------------------------------------------------------------------------------------
# the table, last
table() {
    local n_pass n_fail n_skip
    n_pass=$(awk -F'\t' '$2 == "PASS"' "$results" | wc -l); n_fail=$(awk -F'\t' '$2 == "FAIL"' "$results" | wc -l)
    n_skip=$(awk -F'\t' '$2 == "SKIP"' "$results" | wc -l)
    echo
    echo "==== gpu_check $part on ${gpu_name:-?} ($mode), $(date -u +%F), $(($(now) - t_start)) s of $deadline_s: $n_pass passed, $n_fail failed, $n_skip skipped"
    awk -F'\t' '{printf "%-44s %-4s %4ss  %s\n", $1, $2, $3, $4}' "$results"
    if [ -s "$steps_csv" ]; then
        echo "-- ms per step (T=$BENCH_T, median after 3 warm-up steps; steps.csv)"
        awk -F, -v bl="$(awk -F, 'NR > 1 {print $2}' "$steps_csv" | sort -nu | tr '\n' ' ')" '
            BEGIN {nb = split(bl, b, " ")}
            NR > 1 {if (!($1 in seen)) {seen[$1] = 1; order[++n] = $1} ms[$1, $2] = $5}
            END {printf "%-16s", "trainer"; for (i = 1; i <= nb; i++) printf " %10s", "B=" b[i]; print ""
                 for (j = 1; j <= n; j++) {printf "%-16s", order[j]; for (i = 1; i <= nb; i++) printf " %10s", ((order[j], b[i]) in ms) ? ms[order[j], b[i]] : "-"; print ""}}' "$steps_csv"
    fi
    [ -s "$logdir/steps_flags.csv" ] && { echo "-- ours with flags (steps_flags.csv)"; cat "$logdir/steps_flags.csv"; }
    [ -s "$work/variants.csv" ] && { echo "-- ours built with VARIANTS' flags (variants.csv)"; cat "$work/variants.csv"; }
    [ -s "$work/ncu_table.txt" ] && { echo "-- ncu, ours: the largest kernels"; head -12 "$work/ncu_table.txt"; }
    [ -s "$work/ncu_table_ak.txt" ] && { echo "-- ncu, ours -ak 1: the largest kernels"; head -12 "$work/ncu_table_ak.txt"; }
    echo "LOGDIR $logdir: $(cd "$logdir" && ls | tr '\n' ' ')"
    echo "gpu_check: $n_pass passed, $n_fail failed"
    [ "$n_fail" -eq 0 ]
}
table > "$work/table.txt"; status=$?
cat "$work/table.txt" | tee -a "$summary_txt" > /dev/null
pack "$mainlog" "$work/table.txt"
cat "$work/table.txt"
exit $status
