#!/usr/bin/env bash
# Feeds train_gpt2 bad input and checks each gives one error line that names the file or flag,
# a non-zero exit code, and no crash (exit codes above 128 are signals, e.g. a segfault).
# usage: dev/test/test_bad_input.sh [model file, default gpt2_tiny.bin]   (from the repo root)
set -u
cd "$(dirname "$0")/../.."
MODEL=${1:-gpt2_tiny.bin}
TRAIN=dev/data/tinyshakespeare/tiny_shakespeare_train.bin
VAL=dev/data/tinyshakespeare/tiny_shakespeare_val.bin
TRAIN_GPT2=${TRAIN_GPT2:-./train_gpt2} # the sanitizer test runs these cases on its build too, CUDA too
# The CUDA trainer checks every file before it touches the GPU, so these cases run on any machine;
# it reads bf16 model files, and without a GPU it never reaches the first batch.
cuda=0; case "$TRAIN_GPT2" in *cu|*cu_emu) cuda=1 ;; esac
# the CPU emulator's build (dev/cuda/emu) runs the CUDA trainer's batches, as a GPU would
have_gpu=0; { nvidia-smi -L >/dev/null 2>&1 || [[ "$TRAIN_GPT2" == *_emu ]]; } && have_gpu=1
for f in "$TRAIN_GPT2" "$MODEL" "$TRAIN" "$VAL"; do
    [ -e "$f" ] || { echo "missing $f (run make test)"; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# binary files with a 256-int32 header: write_file PATH MAGIC VERSION NTOK [TOKENS...]
shard() { # shard PATH MAGIC VERSION CLAIMED_NTOK ACTUAL_NTOK [FILL_TOKEN]
    python3 - "$@" <<'PY'
import struct, sys
path, magic, version, claimed, actual = sys.argv[1], *map(int, sys.argv[2:6])
fill = int(sys.argv[6]) if len(sys.argv) > 6 else 198
with open(path, "wb") as f:
    f.write(struct.pack("<256i", magic, version, claimed, *([0] * 253)))
    f.write(struct.pack("<%dH" % actual, *([fill] * actual)))
PY
}
# model file variants made from the good one
python3 - "$MODEL" "$tmp" <<'PY'
import struct, sys
src, out = sys.argv[1], sys.argv[2]
data = open(src, "rb").read()
hdr = list(struct.unpack("<256i", data[:1024]))
def write(name, header, body):
    open(f"{out}/{name}", "wb").write(struct.pack("<256i", *header) + body)
write("magic.bin", [1234] + hdr[1:], data[1024:])
write("version.bin", hdr[:1] + [7] + hdr[2:], data[1024:])
write("bf16.bin", hdr[:1] + [5] + hdr[2:], data[1024:])
write("config.bin", hdr[:6] + [-4] + hdr[7:], data[1024:])
open(f"{out}/truncated.bin", "wb").write(data[: len(data) // 2])
open(f"{out}/empty.bin", "wb").write(b"")
open(f"{out}/header_only.bin", "wb").write(data[:1024])
PY
shard "$tmp/short.bin" 20240520 1 100 100
shard "$tmp/shard_magic.bin" 20240519 1 5000 5000
shard "$tmp/shard_version.bin" 20240520 2 5000 5000
shard "$tmp/shard_trunc.bin" 20240520 1 5000 3000
shard "$tmp/shard_vocab.bin" 20240520 1 5000 5000 60000
# HellaSwag eval files (llmc/hellaswag.h): a good one (2 examples; the second needs 9 tokens) and
# broken copies: evalfile PATH [FIELD_INDEX VALUE] sets one uint16 of the examples
evalfile() {
    python3 - "$@" <<'PY'
import struct, sys
path = sys.argv[1]
ex = lambda i, label, ctx, ends: [65535, 0, i, label, 4, len(ctx)] + ctx + sum(([len(e)] + e for e in ends), [])
data = [ex(0, 1, [10, 11], [[12], [13, 14], [15], [16]]), ex(1, 3, [20, 21, 22, 23], [[1, 2], [3], [4, 5, 6, 7, 8], [9]])]
for d in data: d[1] = 2 * len(d)
flat = sum(data, [])
if len(sys.argv) > 3: flat[int(sys.argv[2])] = int(sys.argv[3])
with open(path, "wb") as f:
    f.write(struct.pack("<256i", 20240522, 1, 2, max(d[1] for d in data), *([0] * 252)))
    f.write(struct.pack("<%dH" % len(flat), *flat))
PY
}
evalfile "$tmp/eval_good.bin"
evalfile "$tmp/eval_label.bin" 3 7
evalfile "$tmp/eval_delim.bin" 17 65534
evalfile "$tmp/eval_vocab.bin" 7 60000
head -c 1060 "$tmp/eval_good.bin" > "$tmp/eval_trunc.bin"

passed=0; failed=0
# case NAME EXPECTED_SUBSTRING ARGS...
case_() {
    local name=$1 expect=$2; shift 2
    local out rc
    out=$(OMP_NUM_THREADS=1 "$TRAIN_GPT2" -x 1 -v 0 -s 0 -t 64 "$@" 2>&1 >/dev/null); rc=$?
    local last
    last=$(printf '%s\n' "$out" | tail -n 1)
    if [ $rc -ne 0 ] && [ $rc -lt 128 ] && [[ "$last" == *"$expect"* ]] && [ "$(printf '%s\n' "$out" | grep -c .)" -eq 1 ]; then
        passed=$((passed + 1)); echo "ok   $name: exit $rc: $last"
    else
        failed=$((failed + 1)); echo "FAIL $name: exit $rc, expected one line with '$expect', got:"; printf '%s\n' "$out" | head -5
    fi
}
M=(-e "$MODEL" -i "$TRAIN" -j "$VAL")
case_ "missing model"        "cannot open '$tmp/none.bin'"      -e "$tmp/none.bin" -i "$TRAIN" -j "$VAL"
case_ "empty model"          "'$tmp/empty.bin' is 0 bytes"       -e "$tmp/empty.bin" -i "$TRAIN" -j "$VAL"
case_ "model wrong magic"    "'$tmp/magic.bin' has magic 1234"   -e "$tmp/magic.bin" -i "$TRAIN" -j "$VAL"
case_ "model wrong version"  "'$tmp/version.bin' has version 7"  -e "$tmp/version.bin" -i "$TRAIN" -j "$VAL"
if [ $cuda -eq 0 ]; then
case_ "bf16 model on CPU"    "'$tmp/bf16.bin' is a bf16 model"   -e "$tmp/bf16.bin" -i "$TRAIN" -j "$VAL"
else # a version-5 header over fp32 data: the size gives it away
case_ "bf16 header, fp32 data" "'$tmp/bf16.bin' is 13541376 bytes, expected 6771200" -e "$tmp/bf16.bin" -i "$TRAIN" -j "$VAL"
fi
case_ "model bad config"     "'$tmp/config.bin' has an invalid config" -e "$tmp/config.bin" -i "$TRAIN" -j "$VAL"
case_ "model truncated"      "'$tmp/truncated.bin' is"           -e "$tmp/truncated.bin" -i "$TRAIN" -j "$VAL"
case_ "model header only"    "'$tmp/header_only.bin' is 1024 bytes" -e "$tmp/header_only.bin" -i "$TRAIN" -j "$VAL"
case_ "T > maxT"             "flag -t 4096 exceeds the model's maximum sequence length" "${M[@]}" -t 4096
case_ "missing train data"   "no data shard matches '$tmp/none_*.bin'" -e "$MODEL" -i "$tmp/none_*.bin" -j "$VAL"
case_ "shard too short"      "'$tmp/short.bin' has 100 tokens, fewer than one batch needs: ranks 1 x B 4 x T 64 + 1 = 257" -e "$MODEL" -i "$tmp/short.bin" -j "$VAL"
case_ "shard wrong magic"    "'$tmp/shard_magic.bin' has magic 20240519" -e "$MODEL" -i "$tmp/shard_magic.bin" -j "$VAL"
case_ "shard wrong version"  "'$tmp/shard_version.bin' has version 2" -e "$MODEL" -i "$tmp/shard_version.bin" -j "$VAL"
case_ "shard truncated"      "'$tmp/shard_trunc.bin' is 7024 bytes but its header says 5000 tokens" -e "$MODEL" -i "$tmp/shard_trunc.bin" -j "$VAL"
# the val loader exists only when something validates (-v > 0): then a bad or short val file stops the start
case_ "val shard bad (-v 1)" "'$tmp/shard_magic.bin' has magic"  -e "$MODEL" -i "$TRAIN" -j "$tmp/shard_magic.bin" -v 1
case_ "val too short (-v 1)" "'$tmp/short.bin' has 100 tokens, fewer than one batch needs: ranks 1 x B 4 x T 64 + 1 = 257" -e "$MODEL" -i "$TRAIN" -j "$tmp/short.bin" -v 1
# dev/bench/bench_cuda.sh's start (B = 64, T = 1024, -v 0, the default data: its val file holds
# 32768 tokens, fewer than one batch) gets past the loaders to -z auto, which a 1 MB budget stops
# before anything is allocated (without a GPU, the CUDA trainer stops at its first GPU call instead)
if [ $cuda -eq 1 ]; then
    out=$("$TRAIN_GPT2" -e "$MODEL" -i "$TRAIN" -j "$VAL" -b 64 -t 1024 -x 0 -v 0 -s 0 -z auto -zm 1 2>&1); rc=$?
    if [ $rc -ne 0 ] && [ $rc -lt 128 ] && ! printf '%s\n' "$out" | grep -q "fewer than one batch" &&
       { [ $have_gpu -eq 0 ] || printf '%s\n' "$out" | grep -q "^error: -z auto: no stage fits in 1.0 MB"; }; then
        passed=$((passed + 1)); echo "ok   -b 64 -t 1024 -v 0 on the default data: past the loaders ($(printf '%s\n' "$out" | tail -n 1 | cut -c1-80))"
    else failed=$((failed + 1)); echo "FAIL -b 64 -t 1024 -v 0 on the default data: exit $rc"; printf '%s\n' "$out" | tail -n 2; fi
fi
# and with -v 0 it is never read: a val file shorter than one batch (the default one at B >= 32,
# T = 1024: dev/bench/bench_cuda.sh) must not stop a run. Where there is no GPU, the CUDA trainer
# gets past its loaders to the first GPU call instead.
if [ $cuda -eq 0 ] || [ $have_gpu -eq 1 ]; then
    out=$(OMP_NUM_THREADS=1 "$TRAIN_GPT2" -e "$MODEL" -i "$TRAIN" -j "$tmp/short.bin" -x 1 -v 0 -s 0 -t 64 2>&1); rc=$?
    if [ $rc -eq 0 ] && printf '%s\n' "$out" | grep -q "^step *1/1"; then passed=$((passed + 1)); echo "ok   -v 0 with a val file shorter than one batch: trains"
    else failed=$((failed + 1)); echo "FAIL -v 0 with a val file shorter than one batch: exit $rc"; printf '%s\n' "$out" | tail -n 3; fi
else
    out=$("$TRAIN_GPT2" -e "$MODEL" -i "$TRAIN" -j "$tmp/short.bin" -x 1 -v 0 -s 0 -t 64 2>&1); rc=$?
    if [ $rc -ne 0 ] && ! printf '%s\n' "$out" | grep -q "short.bin"; then passed=$((passed + 1)); echo "ok   -v 0 with a val file shorter than one batch: past the loaders (exit $rc: $(printf '%s\n' "$out" | tail -n 1 | cut -c1-100))"
    else failed=$((failed + 1)); echo "FAIL -v 0 with a val file shorter than one batch: exit $rc"; printf '%s\n' "$out" | tail -n 3; fi
fi
if [ $cuda -eq 0 ] || [ $have_gpu -eq 1 ]; then
case_ "token outside vocab"  "'$tmp/shard_vocab.bin' holds token 60000" -e "$MODEL" -i "$tmp/shard_vocab.bin" -j "$VAL"
else
echo "skip token outside vocab: the CUDA trainer reads its first batch on the GPU, and there is none here"
fi
case_ "unknown flag"         "unknown flag '-zz'"                "${M[@]}" -zz 3
case_ "non-numeric value"    "flag -b expects an integer, got 'abc'" "${M[@]}" -b abc
case_ "trailing garbage"     "flag -l expects a number, got '1e-3x'" "${M[@]}" -l 1e-3x
case_ "missing value"        "flag -t needs a value"             "${M[@]}" -t
case_ "zero batch"           "flag -b expects a batch size >= 1, got 0" "${M[@]}" -b 0
case_ "-r 3 (both trainers)" "flag -r expects 0, 1 or 2, got 3" "${M[@]}" -r 3
if [ $cuda -eq 1 ]; then # the optimizer offload (-zo): stages 1-3 of the CUDA trainer only
case_ "-zo 2"                "flag -zo expects 0 or 1, got 2"    "${M[@]}" -z 1 -zo 2
case_ "-zo 1 with -z 0"      "flag -zo 1 applies only to -z 1, 2 or 3: stage 0 has no optimizer shard to offload (got -z 0)" "${M[@]}" -zo 1
case_ "-zo 1 with -z auto"   "flag -zo 1 needs the stage given: -z 1, 2 or 3 (got -z auto)" "${M[@]}" -z auto -zo 1
else
case_ "-zo on the CPU"       "flag -zo is for the CUDA trainer: the CPU trainer's optimizer state is in host memory already" "${M[@]}" -z 1 -zo 1
fi
case_ "-d not a multiple"    "flag -d 1000 must be a positive multiple of B*T*ranks = 4*64*1 = 256" "${M[@]}" -d 1000
case_ "-zg with -z 0"        "flag -zg applies only to -z 1, 2, 3 or auto (got -z 0)" "${M[@]}" -zg 1
case_ "-zg 0"                "flag -zg expects ranks per shard group >= 1, got 0" "${M[@]}" -z 1 -zg 0
case_ "-zg 0 with -z auto"   "flag -zg expects ranks per shard group >= 1, got 0" "${M[@]}" -z auto -zm 100 -zg 0
case_ "-zg 2 on 1 rank"      "flag -zg 2 must divide the 1 ranks" "${M[@]}" -z 2 -zg 2
case_ "-zu 0"                "flag -zu expects blocks per unit 1..2 (the model's layers), got 0" "${M[@]}" -zu 0
case_ "-zu L+1"              "flag -zu expects blocks per unit 1..2 (the model's layers), got 3" "${M[@]}" -zu 3
case_ "bad -e depth"         "flag -e: fresh model depth must be 1..48, got 'd99'" -e d99 -i "$TRAIN" -j "$VAL"
case_ "output dir unusable"  "cannot open '$tmp/empty.bin/main.log'" "${M[@]}" -o "$tmp/empty.bin"
# -h 1 (HellaSwag): flags and eval files, checked at start-up
case_ "-h 2"                 "flag -h expects 0 or 1 (HellaSwag off/on; -h alone prints the flags), got 2" "${M[@]}" -h 2
case_ "-h 1 with -b 2"       "flag -h 1 needs -b >= 4: each HellaSwag example is 4 rows of a batch, got -b 2" "${M[@]}" -h 1 -b 2
case_ "-hf without -h 1"     "flag -hf applies only to -h 1 (got -h 0)" "${M[@]}" -hf "$tmp/eval_good.bin"
case_ "-hf missing"          "no HellaSwag eval file '$tmp/none.bin' (flag -hf; prepare it with: make hellaswag)" "${M[@]}" -h 1 -hf "$tmp/none.bin"
case_ "-hf a token shard"    "'$TRAIN' has magic 20240520, expected 20240522" "${M[@]}" -h 1 -hf "$TRAIN"
case_ "-hf truncated"        "'$tmp/eval_trunc.bin' example 1: the file ends inside its header fields (truncated)" "${M[@]}" -h 1 -hf "$tmp/eval_trunc.bin"
case_ "-hf label 7"          "'$tmp/eval_label.bin' example 0: label 7, expected 0..3" "${M[@]}" -h 1 -hf "$tmp/eval_label.bin"
case_ "-hf no delimiter"     "'$tmp/eval_delim.bin' example 1: starts with 65534, expected the delimiter 65535" "${M[@]}" -h 1 -hf "$tmp/eval_delim.bin"
case_ "-hf token 60000"      "'$tmp/eval_vocab.bin' example 0: token 60000 is outside the vocabulary of 50257" "${M[@]}" -h 1 -hf "$tmp/eval_vocab.bin"
case_ "-hf example > T"      "'$tmp/eval_good.bin' example 1 needs 9 tokens (context + its longest ending), more than -t 8: run with -t 9 or more" "${M[@]}" -h 1 -hf "$tmp/eval_good.bin" -t 8
if [ $cuda -eq 1 ]; then # the process flags, checked before the GPU (llmc/nccl_comm.cuh, llmc/rendezvous.h)
case_ "-pn without -pi"      "flags -pn/-pr need -pi fs (with -pf DIR) or -pi tcp (with -ps HOST[:PORT])" "${M[@]}" -pn 2 -pr 0
case_ "-pr beyond -pn"       "flag -pr 2 must be below -pn 2"    "${M[@]}" -pn 2 -pr 2 -pi fs -pf "$tmp/rdv"
case_ "-pi tcp without -ps"  "flag -pi tcp needs rank 0's address -ps host[:port]" "${M[@]}" -pn 2 -pr 1 -pi tcp
case_ "-pi unknown"          "flag -pi expects fs or tcp, got 'nfs'" "${M[@]}" -pn 2 -pr 1 -pi nfs
case_ "-pn 0"                "flag -pn expects the number of processes >= 1" "${M[@]}" -pn 0 -pr 0
case_ "-zd junk"             "flag -zd expects bf16 or fp32, got 'fp16'" "${M[@]}" -zd fp16
if [[ "$TRAIN_GPT2" == *fp32* ]]; then
case_ "-zd bf16, fp32 build" "flag -zd bf16 needs the bf16 build (make PRECISION=BF16)" "${M[@]}" -zd bf16
else # the bf16 build: the offloaded update reads bf16 gradients (the fp32 build's are fp32 anyway)
case_ "-zd fp32 with -zo 1"  "flags -zd fp32 and -zo 1 do not combine in the bf16 build: the offloaded update reads bf16 gradients (drop one of them)" "${M[@]}" -z 1 -zo 1 -zd fp32
fi
case_ "-ak 2"                "flag -ak expects 0 or 1, got 2" "${M[@]}" -ak 2
if [[ "$TRAIN_GPT2" == *_emu* ]] || nvidia-smi -L > /dev/null 2>&1; then # -ak 1 is checked once the model is on a device
if [[ "$TRAIN_GPT2" == *fp32* ]]; then
case_ "-ak 1, fp32 build"    "flag -ak 1: the sm_90a attention kernels are bf16; this is the fp32 build" "${M[@]}" -ak 1
else # the tiny model's heads have 16 channels: the Hopper kernels are written for 64
case_ "-ak 1, head size 16"  "flag -ak 1: the sm_90a attention kernels need head size 64, this model has 16" "${M[@]}" -ak 1
fi
fi
else
case_ "-pn on the CPU"       "flags -pn/-pr/-pi/-pf/-ps are for the CUDA trainer" "${M[@]}" -pn 2 -pr 0
case_ "-zd on the CPU"       "flag -zd is for the CUDA trainer: the CPU trainer accumulates and reduces fp32 gradients" "${M[@]}" -zd fp32
case_ "-ak on the CPU"       "flag -ak is for the CUDA trainer: the CPU trainer runs no attention kernels" "${M[@]}" -ak 1
fi

echo "bad input: $passed passed, $failed failed"
[ $failed -eq 0 ]
