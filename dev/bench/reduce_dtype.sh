#!/usr/bin/env bash
# What the gradient dtype (-zd) does to accumulation: the same tokens per step as one micro-step
# of B=64 and as 64 micro-steps of B=1 (-d), for the bf16 trainer with bf16 gradients (-zd bf16,
# each micro-step rounded to 8 bits against the running sum), with fp32 gradients (-zd fp32), and
# the fp32 trainer. Per run: the loss and gradient norm of each step, and the update's error: the
# rms of (final - initial master weights) minus the fp32 trainer's, relative to the rms of the
# fp32 trainer's, at the same shape (the weights of -o's final model file).
#   dev/bench/reduce_dtype.sh [logdir]
# Env: RD_TRAINER_BF16 (./train_gpt2cu_emu), RD_TRAINER_FP32 (./train_gpt2fp32cu_emu), RD_MODEL
# (gpt2_tiny.bin), RD_T (16), RD_MICRO (64: micro-steps of B=1 against one of B=RD_MICRO), RD_STEPS (3).
# The README's numbers: dev/bench/reduce_dtype.sh on the emulator (about 15 minutes on 2 cores).
set -u
cd "$(dirname "$0")/../.."
logdir=${1:-log_reduce_dtype}
BF16=${RD_TRAINER_BF16:-./train_gpt2cu_emu} FP32=${RD_TRAINER_FP32:-./train_gpt2fp32cu_emu}
model=${RD_MODEL:-gpt2_tiny.bin} T=${RD_T:-16} A=${RD_MICRO:-64} steps=${RD_STEPS:-3}
for b in $BF16 $FP32; do [ -x "$b" ] || { echo "reduce_dtype: $b is missing (make emu, or make cuda)"; exit 1; }; done
mkdir -p "$logdir"

# run NAME BIN B ARGS...: RD_STEPS steps of A*T tokens on one rank, the final model into $logdir/NAME
run() {
    local name=$1 bin=$2 b=$3; shift 3
    rm -rf "${logdir:?}/$name"
    echo "$name: $bin -b $b -d $((A * T)) $*" >&2
    "$bin" -e "$model" -b "$b" -t "$T" -d $((A * T)) -x "$steps" -v 0 -s 0 -gc 0 -o "$logdir/$name" "$@" > "$logdir/$name.log" 2>&1 \
        || { echo "reduce_dtype: run $name failed:"; tail -3 "$logdir/$name.log"; exit 1; }
}
for shape in "one $A" "many 1"; do
    set -- $shape
    run "$1_bf16" "$BF16" "$2" -zd bf16
    run "$1_fp32grads" "$BF16" "$2" -zd fp32
    run "$1_fp32trainer" "$FP32" "$2"
done

/usr/bin/python3 - "$logdir" "$model" "$A" "$steps" <<'EOF'
import re, sys
import numpy as np
logdir, model, A, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def weights(path):  # llm.c's model file: 256 int32 of header, then fp32 parameters (v3)
    return np.fromfile(path, dtype=np.float32, offset=256 * 4).astype(np.float64)
def steps_of(name):
    text = open("%s/%s.log" % (logdir, name)).read()
    return [(float(l), float(n)) for l, n in re.findall(r"train loss ([0-9.]+) norm ([0-9.]+)", text)]
init = weights(model)
print("| shape | gradients | " + " | ".join("step %d loss / norm" % (s + 1) for s in range(steps)) + " | update error vs fp32 trainer |")
print("|---|---|" + "---|" * steps + "---|")
for shape, label in [("one", "1 x B=%d" % A), ("many", "%d x B=1" % A)]:
    ref = weights("%s/%s_fp32trainer/model_%08d.bin" % (logdir, shape, steps)) - init
    for run, what in [("bf16", "bf16 (-zd bf16)"), ("fp32grads", "fp32 (-zd fp32)"), ("fp32trainer", "fp32 trainer")]:
        name = "%s_%s" % (shape, run)
        delta = weights("%s/%s/model_%08d.bin" % (logdir, name, steps)) - init
        err = np.sqrt(np.mean((delta - ref) ** 2)) / np.sqrt(np.mean(ref ** 2))
        cells = " | ".join("%.6f / %.4f" % ln for ln in steps_of(name))
        print("| %s | %s | %s | %s |" % (label, what, cells, "-" if run == "fp32trainer" else "%.4f" % err))
EOF
