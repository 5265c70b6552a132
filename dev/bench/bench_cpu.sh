#!/usr/bin/env bash
# CPU training speed, side by side on one machine in one run: our train_gpt2; with --llmc DIR,
# llm.c's CPU trainer (the train_gpt2.c of an llm.c checkout, built here with its own Makefile);
# and PyTorch (train_gpt2.py's GPT in a plain training loop) when /usr/bin/python3 has torch.
# The same config for all: GPT-2 124M (12 layers, C 768, 124M parameters), B=4, T=64 (llm.c's
# CPU config), the same number of threads.
#
# Why rounds: a shared or virtual machine's speed drifts (other jobs, clocks), and llm.c's time
# was seen to move 2x between machines of one kind. So the trainers take turns, ROUNDS times
# (ours, llm.c, PyTorch, ours, ...), each for STEPS steps; the first 2 steps of each run are
# dropped (fresh memory: page faults, the optimizer state's first touch). The median over all
# rounds' remaining steps is printed per trainer, with each round's median, so a drift shows.
# Each trainer times its own step (llm.c: batch, forward, backward, update; ours also the
# gradient-norm clip; PyTorch the same as ours). llm.c runs 40 steps with a validation pass and
# samples; it is stopped once it has printed STEPS steps, so only its training steps count.
#
# usage: dev/bench/bench_cpu.sh [--llmc DIR] [--rounds 3] [--steps 5] [--threads N] [--no-torch]
#   (needs gpt2_124M.bin and the tiny Shakespeare shards: make references)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
LLMC="" ROUNDS=3 STEPS=5 THREADS=$(nproc) TORCH=1
while [ $# -gt 0 ]; do
    case "$1" in
        --llmc) LLMC=${2:?--llmc needs a directory}; shift 2 ;;
        --rounds) ROUNDS=${2:?}; shift 2 ;;
        --steps) STEPS=${2:?}; shift 2 ;;
        --threads) THREADS=${2:?}; shift 2 ;;
        --no-torch) TORCH=0; shift ;;
        *) echo "error: unknown argument '$1' (usage: $0 [--llmc DIR] [--rounds R] [--steps S] [--threads N] [--no-torch])" >&2; exit 1 ;;
    esac
done
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "error: --rounds expects a count >= 1, got '$ROUNDS'" >&2; exit 1; }
[[ "$STEPS" =~ ^[0-9]+$ ]] && [ "$STEPS" -ge 3 ] || { echo "error: --steps expects >= 3 (the first 2 are dropped), got '$STEPS'" >&2; exit 1; }
DATA_DIR=dev/data/tinyshakespeare
for f in gpt2_124M.bin gpt2_tokenizer.bin $DATA_DIR/tiny_shakespeare_train.bin $DATA_DIR/tiny_shakespeare_val.bin; do
    [ -f "$f" ] || { echo "error: no $f: run 'make references' first" >&2; exit 1; }
done
PYTHON=/usr/bin/python3
if [ $TORCH = 1 ] && ! $PYTHON -c 'import torch' 2> /dev/null; then echo "(no torch for $PYTHON: PyTorch left out)"; TORCH=0; fi
tmp=$(mktemp -d)
llmc_pid=""
trap '[ -n "$llmc_pid" ] && kill "$llmc_pid" 2> /dev/null; rm -rf "$tmp"' EXIT

make -s train_gpt2
names=("gpt2-zero train_gpt2")
if [ -n "$LLMC" ]; then
    [ -f "$LLMC/train_gpt2.c" ] && [ -f "$LLMC/Makefile" ] || { echo "error: --llmc $LLMC: no train_gpt2.c and Makefile there (an llm.c checkout?)" >&2; exit 1; }
    LLMC=$(cd "$LLMC" && pwd)
    echo "building llm.c's CPU trainer: make -C $LLMC train_gpt2"
    make -s -C "$LLMC" train_gpt2 > "$tmp/llmc_build.txt" 2>&1 || { cat "$tmp/llmc_build.txt"; echo "error: llm.c's build failed" >&2; exit 1; }
    # it reads its files from the working directory, under these names: ours, linked
    mkdir -p "$tmp/llmc_run/dev/data"
    ln -s "$ROOT/gpt2_124M.bin" "$ROOT/gpt2_tokenizer.bin" "$tmp/llmc_run/"
    ln -s "$ROOT/$DATA_DIR" "$tmp/llmc_run/dev/data/tinyshakespeare"
    rev=$(git -C "$LLMC" rev-parse --short HEAD 2> /dev/null || basename "$LLMC")
    names+=("llm.c train_gpt2.c ($rev)")
fi
[ $TORCH = 1 ] && names+=("PyTorch $($PYTHON -c 'import torch; print(torch.__version__)') (train_gpt2.py's GPT)")

# Each run_* appends its step times in ms, one a line, the first 2 dropped, to $tmp/<i>.ms and
# its round's median to $tmp/<i>.rounds.
median() { sort -n | awk '{ t[NR] = $1 } END { if (NR == 0) { print "nan"; exit } print (NR % 2) ? t[(NR + 1) / 2] : (t[NR / 2] + t[NR / 2 + 1]) / 2 }'; }
keep() { # keep I: the step times on stdin (first 2 dropped) into trainer I's files
    tail -n +3 > "$tmp/round.ms"
    cat "$tmp/round.ms" >> "$tmp/$1.ms"
    median < "$tmp/round.ms" | awk '{ printf "%.0f\n", $1 }' >> "$tmp/$1.rounds"
}
run_ours() {
    OMP_NUM_THREADS=$THREADS ./train_gpt2 -e gpt2_124M.bin -b 4 -t 64 -x "$STEPS" -v 0 -s 0 > "$tmp/ours.txt"
    grep -o '([0-9.]* ms' "$tmp/ours.txt" | tr -d '(' | awk '{ print $1 }' | keep 0
}
run_llmc() { # llm.c: started, and stopped once it has printed STEPS steps
    (cd "$tmp/llmc_run" && OMP_NUM_THREADS=$THREADS exec stdbuf -oL "$LLMC/train_gpt2" > "$tmp/llmc.txt" 2>&1) &
    llmc_pid=$!
    while kill -0 $llmc_pid 2> /dev/null && [ "$(grep -c '^step [0-9]*: train loss' "$tmp/llmc.txt")" -lt "$STEPS" ]; do sleep 0.2; done
    kill $llmc_pid 2> /dev/null || true; wait $llmc_pid 2> /dev/null || true; llmc_pid=""
    [ "$(grep -c '^step [0-9]*: train loss' "$tmp/llmc.txt")" -ge "$STEPS" ] || { tail -5 "$tmp/llmc.txt"; echo "error: llm.c's trainer stopped early" >&2; exit 1; }
    sed -n 's/^step [0-9]*: train loss [0-9.]* (took \([0-9.]*\) ms)$/\1/p' "$tmp/llmc.txt" | head -n "$STEPS" | keep 1
}
run_torch() { # the reference model of train_gpt2.py, trained as it trains (AdamW, clip at 1.0)
    $PYTHON - "$ROOT" "$STEPS" "$THREADS" > "$tmp/torch.txt" <<'EOF'
import sys, time
import torch
root, steps, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
sys.path.insert(0, root)
import train_gpt2 as ref
torch.set_num_threads(threads)
torch.manual_seed(42)
model = ref.GPT(12, 12, 768, 1024)  # GPT-2 124M, as gpt2_124M.bin
x, y = ref.load_batch(root + "/dev/data/tinyshakespeare/tiny_shakespeare_train.bin", 4, 64)
opt = torch.optim.AdamW(model.parameters(), lr=ref.LEARNING_RATE, betas=(ref.BETA1, ref.BETA2), eps=ref.ADAM_EPS,
                        weight_decay=0.0, foreach=False)
for step in range(steps):
    t = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    _, loss = model(x, y)
    loss.backward()
    ref.clip_grad_norm(list(model.parameters()), ref.GRAD_CLIP)
    opt.step()
    print(f"{(time.perf_counter() - t) * 1000:.1f}", flush=True)
EOF
    keep 2 < "$tmp/torch.txt"
}

echo "GPT-2 124M, B=4, T=64, $THREADS threads: $ROUNDS rounds of $STEPS steps per trainer (the first 2 of each run dropped)"
for r in $(seq "$ROUNDS"); do
    run_ours
    [ -n "$LLMC" ] && run_llmc
    [ $TORCH = 1 ] && run_torch
    line="round $r:"
    for i in 0 1 2; do [ -f "$tmp/$i.rounds" ] && line="$line $(tail -n 1 "$tmp/$i.rounds") ms"; done
    echo "$line"
done

cpu=$(lscpu 2> /dev/null | sed -n 's/^Model name: *//p' | head -n 1)
[ -n "$cpu" ] || cpu=$(grep -m1 "model name" /proc/cpuinfo | sed 's/.*: //')
cores=$(lscpu 2> /dev/null | awk -F: '/^Core\(s\) per socket/ { c = $2 } /^Socket\(s\)/ { s = $2 } END { if (c && s) print c * s }')
avx512=$(grep -qw avx512f /proc/cpuinfo && echo "AVX-512" || echo "no AVX-512")
echo "machine: $cpu, ${cores:-?} cores ($(nproc) CPUs online), $avx512; load average $(cut -d' ' -f1-3 /proc/loadavg)"
ours=$(median < "$tmp/0.ms")
printf "%-42s %14s %8s %7s  %s\n" "trainer" "median ms/step" "tok/s" "steps" "each round's median (ms), time / ours"
for i in 0 1 2; do
    [ -f "$tmp/$i.ms" ] || continue
    m=$(median < "$tmp/$i.ms")
    printf "%-42s %14.0f %8.0f %7d  %s" "${names[$i]}" "$m" "$(awk -v m="$m" 'BEGIN { print 256000 / m }')" "$(wc -l < "$tmp/$i.ms")" \
        "$(tr '\n' ' ' < "$tmp/$i.rounds")"
    [ $i -gt 0 ] && awk -v m="$m" -v o="$ours" 'BEGIN { printf " %.2fx", m / o }'
    echo
done
