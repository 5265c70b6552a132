#!/usr/bin/env bash
# The one command for a machine with a GPU: build the CUDA targets, make the PyTorch reference
# files if missing, test every kernel and the whole trainer in both precisions, benchmark, and
# print a short table last. Works offline with no installs. It needs nvcc, and files the
# repository does not hold (gitignored): the tokenized data and the tokenizer (`make data`,
# which needs npm and the network), and the PyTorch reference files gpt2_*.bin (or a python3
# with torch to write them). Bring those in a directory:
#   dev/gpu_check.sh LOGDIR [all|prep|one|multi|zero1|zero2] [--data DIR]
# DIR may hold tiny_shakespeare_train.bin, tiny_shakespeare_val.bin (also under
# dev/data/tinyshakespeare/), gpt2_tokenizer.bin and gpt2_*.bin: each found is copied into place.
# Whatever is still missing (or no GPU, no nvcc) stops the script before the build, one line
# each, saying how to bring it.
# `one` ends with dev/perf/join_measured.py: every kernel and step time measured beside the performance
# model's prediction (LOGDIR/perf_check.md, for dev/cuda/NOTES.md).
# Parts, each sized for a 10-minute device slot (estimated, not yet timed on a GPU; each runs
# make: the first call builds, later ones on the same machine find the build done):
#   prep   the build and the reference files only
#   one    the one-GPU checks and the benchmark
#   zero1  several ranks on this GPU: sections A B C F of dev/test/test_zero_cuda.sh (B, C and
#          F compare with A's runs, so they go together)
#   zero2  sections D E G, and the ZeRO benchmark
#   multi  zero1 then zero2;  all (default): one then multi
# ZERO_CUDA_STEPS (default 4) shortens sections A and B. Each check's line is appended to
# LOGDIR/summary.txt as the check ends, so a run killed at the slot's end keeps the lines so far;
# the table of this call is printed at the end. Exit status: 0 all passed, 1 a check failed,
# 2 something missing (nothing run). PYTHON names the python3 with torch (default: the first
# of python3, /usr/bin/python3 that has it).
set -u
usage="usage: dev/gpu_check.sh LOGDIR [all|prep|one|multi|zero1|zero2] [--data DIR]"
die() { echo "dev/gpu_check.sh: $*"; exit 2; }
logdir="" part="" bring=""
while [ $# -gt 0 ]; do
    case "$1" in
        --data) [ $# -ge 2 ] || die "--data needs a directory ($usage)"; bring=$2; shift 2 ;;
        --data=*) bring=${1#--data=}; shift ;;
        -*) die "unknown option '$1' ($usage)" ;;
        *) if [ -z "$logdir" ]; then logdir=$1; elif [ -z "$part" ]; then part=$1; else die "unexpected '$1' ($usage)"; fi; shift ;;
    esac
done
[ -n "$logdir" ] || die "$usage"
part=${part:-all}
case "$part" in all|prep|one|multi|zero1|zero2) ;; *) die "the part must be all, prep, one, multi, zero1 or zero2, got '$part'" ;; esac
if [ -n "$bring" ]; then
    [ -d "$bring" ] || die "--data $bring: not a directory"
    bring=$(cd "$bring" && pwd)
fi
# paths given relative to where the script was called from
mkdir -p "$logdir" || die "cannot create LOGDIR $logdir"
logdir=$(cd "$logdir" && pwd)
cd "$(dirname "$0")/.."
one() { [ "$part" = all ] || [ "$part" = one ]; }
zero1() { [ "$part" = all ] || [ "$part" = multi ] || [ "$part" = zero1 ]; }
zero2() { [ "$part" = all ] || [ "$part" = multi ] || [ "$part" = zero2 ]; }

summary_txt="$logdir/summary.txt"
declare -a names results
record() { # record NAME RESULT: into this call's table, and at once into summary.txt
    names+=("$1"); results+=("$2")
    printf "%-32s %s\n" "$1" "$2" >> "$summary_txt"
}
run() { # run NAME LOGFILE CMD...: records PASS/FAIL (with the last summary line) from the exit status
    local name=$1 log=$2; shift 2
    echo "== $name: $*" | tee -a "$logdir/gpu_check.log"
    "$@" >"$log" 2>&1
    local rc=$?
    local last
    last=$(grep -E "passed, [0-9]+ failed" "$log" | tail -1)
    [ -z "$last" ] && last=$(tail -1 "$log" | cut -c1-100)
    if [ $rc -eq 0 ]; then record "$name" "PASS  $last"; else record "$name" "FAIL (rc $rc)  $last  [$log]"; fi
    echo "   rc $rc: $last" | tee -a "$logdir/gpu_check.log"
    return $rc
}
print_table() {
    echo
    echo "==== gpu_check $part summary ($gpu) ===="
    local i fails=0
    for i in "${!names[@]}"; do
        printf "%-32s %s\n" "${names[$i]}" "${results[$i]}"
        case "${results[$i]}" in FAIL*) fails=$((fails + 1)) ;; esac
    done
    echo "logs: $logdir (every part's lines: $summary_txt)"
    return $((fails > 0))
}

# the machine
{
    echo "date: $(date -u)"
    if command -v nvidia-smi >/dev/null; then nvidia-smi -L 2>&1; else echo "nvidia-smi not found"; fi
    command -v nvcc >/dev/null && nvcc --version | tail -2 || /usr/local/cuda/bin/nvcc --version 2>&1 | tail -2
    if command -v mpirun >/dev/null; then echo "mpirun: $(mpirun --version 2>&1 | head -1)"; else echo "mpirun: not found (multi-rank tests run without MPI)"; fi
} 2>&1 | tee "$logdir/machine.txt"
gpu=$(nvidia-smi -L 2>/dev/null | grep -m1 '^GPU ')
echo "==== gpu_check $part, $(date -u), ${gpu:-no GPU}" >> "$summary_txt"

# the files the repository does not hold: data and tokenizer, and the PyTorch reference files
DATA_FILES=(dev/data/tinyshakespeare/tiny_shakespeare_train.bin dev/data/tinyshakespeare/tiny_shakespeare_val.bin gpt2_tokenizer.bin)
REF_PREFIXES=(gpt2_124M gpt2_tiny)
REF_FILES=()
for p in "${REF_PREFIXES[@]}"; do REF_FILES+=("$p.bin" "${p}_bf16.bin" "${p}_debug_state.bin" "${p}_losses.bin"); done
if [ -n "$bring" ]; then
    found=0
    for f in "${DATA_FILES[@]}" "${REF_FILES[@]}"; do
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

# a python with torch: $PYTHON if set, else the plain python3 (the lent machines) or Debian's
# /usr/bin/python3
PY=""
for p in ${PYTHON:-python3 /usr/bin/python3}; do
    if "$p" -c "import torch" >/dev/null 2>&1; then PY=$p; break; fi
done
NVCC=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null)

# what is missing, one line each with how to bring it; then stop before the build
problems=()
[ -n "$gpu" ] || problems+=("no GPU: nvidia-smi -L finds none; run this where an NVIDIA GPU and its driver are (without one, the CUDA code runs on the CPU emulator: make emu, README 'No GPU?')")
[ -n "$NVCC" ] || problems+=("no nvcc on PATH or in /usr/local/cuda/bin: install the CUDA toolkit (12.x or 13.x)")
missing_data=()
for f in "${DATA_FILES[@]}"; do [ -f "$f" ] || missing_data+=("$f"); done
[ ${#missing_data[@]} -eq 0 ] || problems+=("missing ${missing_data[*]}: run make data where npm and the network work, then bring them: dev/gpu_check.sh LOGDIR $part --data DIR")
missing_refs=()
for p in "${REF_PREFIXES[@]}"; do
    for f in "$p.bin" "${p}_bf16.bin" "${p}_debug_state.bin" "${p}_losses.bin"; do
        [ -f "$f" ] || { missing_refs+=("$p"); break; }
    done
done
if [ ${#missing_refs[@]} -gt 0 ] && [ -z "$PY" ]; then
    problems+=("missing the PyTorch reference files ${missing_refs[*]/%/*.bin} and no python3 with torch to write them: run make references (python3 train_gpt2.py --model d12, --model tiny) where torch works, then bring the gpt2_*.bin files: --data DIR")
fi
if [ ${#problems[@]} -gt 0 ]; then
    echo
    for p in "${problems[@]}"; do
        echo "dev/gpu_check.sh: $p"
        record "not run" "FAIL  $p"
    done
    exit 2
fi

# build (GPU_COMPUTE_CAPABILITY from the device when nvidia-smi can tell, else sm_80 + sm_90);
# a failed build stops here: older binaries would test older code
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '.')
jobs=$(nproc 2>/dev/null || echo 4)
run "build (make cuda)" "$logdir/build.log" make -j"$jobs" cuda ${cc:+GPU_COMPUTE_CAPABILITY=$cc} || { print_table; exit 1; }

# the reference files (train_gpt2.py writes them from the tokenized val data)
for p in "${missing_refs[@]}"; do
    model=d12; [ "$p" = gpt2_tiny ] && model=tiny
    run "reference files ($p)" "$logdir/ref_$p.log" "$PY" train_gpt2.py --model $model
done

if one; then
# every kernel against its CPU twin, and twice for the same bits
run "kernels fp32" "$logdir/kernels_fp32.log" ./dev/cuda/test_kernels_fp32
run "kernels bf16" "$logdir/kernels_bf16.log" ./dev/cuda/test_kernels
# the whole trainer against PyTorch; save -> reload -> continue
for prefix in gpt2_tiny gpt2_124M; do
    run "test_gpt2fp32cu $prefix" "$logdir/test_fp32_$prefix.log" ./test_gpt2fp32cu "$prefix"
    run "test_gpt2cu $prefix" "$logdir/test_bf16_$prefix.log" ./test_gpt2cu "$prefix"
done
# the trainer's command line end to end: a few steps with eval, sampling and a checkpoint, then a resume
run "train_gpt2cu short run" "$logdir/train_short.log" ./train_gpt2cu -e gpt2_124M_bf16.bin -b 4 -t 256 -x 4 -v 2 -m 2 -s 4 -g 16 -n 2 -o "$logdir/run"
run "train_gpt2cu resume" "$logdir/train_resume.log" ./train_gpt2cu -e gpt2_124M_bf16.bin -b 4 -t 256 -x 6 -v 0 -s 0 -y 1 -o "$logdir/run"

# the benchmark
dev/bench/bench_cuda.sh "$logdir/bench" 12 | tee "$logdir/bench.txt"
best=$(awk '$2 == "ok" {print "B=" $1 ": " $3 " tok/s, MFU " $4 "%"; exit}' "$logdir/bench.txt")
record "benchmark (124M, T=1024, -r 0)" "${best:-no batch size fit: see $logdir/bench}"
kernel_bench="$logdir/kernels_bench.txt"
./dev/cuda/test_kernels --bench --csv "$logdir/kernels_bench.csv" >"$kernel_bench" 2>&1 || echo "kernel benchmark failed: see $kernel_bench"
record "kernel times vs floors" "$kernel_bench"
# measured beside the performance model's prediction (dev/perf; needs no GPU, ~2-3 minutes of CPU
# for the emulated trace of a step): per kernel at test_kernels' shape (B=8) and per step at each
# B of the benchmark; perf_check.md is the table for dev/cuda/NOTES.md
gpu_model=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
run "measured vs predicted (dev/perf)" "$logdir/perf_check.log" python3 dev/perf/join_measured.py \
    --gpu-name "$gpu_model" --kernels "$logdir/kernels_bench.csv" --bench-b 8 --bench-t 1024 --steps "$logdir/bench.txt" \
    --out "$logdir/perf_check.md"
fi
# several ranks on this GPU (-pn, NCCL_HOSTID per rank): every ZeRO stage vs stage 0, bytes, memory
if zero1; then
run "ZeRO A B C F, 2-3 ranks" "$logdir/zero_cuda_ABCF.log" env ZERO_CUDA_SECTIONS="A B C F" bash dev/test/test_zero_cuda.sh
fi
if zero2; then
run "ZeRO D E G, 1-3 ranks" "$logdir/zero_cuda_DEG.log" env ZERO_CUDA_SECTIONS="D E G" bash dev/test/test_zero_cuda.sh
# the ZeRO stages side by side, 2 ranks on this GPU: memory per rank and bytes (times are shared)
BENCH_STEPS=6 dev/bench/bench_zero_cuda.sh 2 "$logdir/bench_zero" | tee "$logdir/bench_zero.txt"
record "ZeRO stages, 2 ranks (bench)" "$logdir/bench_zero.txt"
fi

print_table
