#!/usr/bin/env bash
# HellaSwag (-h 1, llmc/hellaswag.h, dev/data/hellaswag.js), on small fixtures; no network.
#  1. prep: dev/data/hellaswag.js on a 7-example jsonl in HellaSwag's layout: the .bin decodes
#     (independently) to js-tiktoken's tokens of each context and " " + ending, which spell the
#     text back through gpt2_tokenizer.bin; header fields; bad lines refused with one line naming
#     the file and line, nothing written; the download path against a mock on 127.0.0.1 only
#     (same bytes, the jsonl kept, a rerun asks nothing); train_gpt2 -h 1 reads the output.
#     -h alone, before another flag, or --help still prints the usage.
#  2. known answers: a model built to predict "the next token repeats this one"
#     (hellaswag_fixture.py repeat-model) on an eval file whose right ending repeats the
#     context's last token: accuracy 1, and 0 with every label moved to a wrong ending; the
#     main.log lines s:STEP eval:ACC at every -v step and the end, drawn by dev/plot_log.py.
#  3. the PyTorch reference: train_gpt2.py's GPT (float64) on the random tiny model: every
#     ending's mean loss (CPU trainer's scoring, dev/test/hellaswag_losses.c) within 1e-4 and
#     the same choices; its count X/Y is what every run below must print.
#  4. ranks: train_gpt2 under mpirun with 1, 2, 3 ranks, stages 0 and 3, B 4 and 8: X/Y each.
#  5. the CUDA trainer on the emulator: fp32 (1 rank, and 2 ranks stage 3) prints X/Y; bf16
#     gives the known answers 1 and 0.
# The bad flags and files (-h 2, -b < 4, missing / corrupt -hf) are in test_bad_input.sh.
# usage: dev/test/test_hellaswag.sh   (needs train_gpt2, npm ci's node_modules, gpt2_tiny.bin;
#        the emulated trainers train_gpt2fp32cu_emu / train_gpt2cu_emu when built)
set -u
cd "$(dirname "$0")/../.."
source dev/test/lib.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 OMP_NUM_THREADS=1
NODE=${NODE:-node}
PY=/usr/bin/python3
FX=dev/test/hellaswag_fixture.py
# run NAME COMMAND...: a trainer run that only evaluates (-x 0: HellaSwag once, at the end);
# prints the X/Y of its "HellaSwag: X/Y = acc" line (a failed run's tail goes to stderr)
run() {
    local name=$1; shift
    timeout 600 "$@" "${DATA[@]}" -v 0 -s 0 -x 0 -h 1 > "$tmp/$name.txt" 2>&1 || { echo "     $name exited $?"; tail -n 3 "$tmp/$name.txt"; } >&2
    grep -o 'HellaSwag: [0-9]*/[0-9]*' "$tmp/$name.txt" | tail -n 1 | cut -d' ' -f2
}

echo "--- 1. prep (dev/data/hellaswag.js)"
"$NODE" dev/test/hellaswag_fixture.mjs write "$tmp/j"
start=$SECONDS
if "$NODE" dev/data/hellaswag.js --local "$tmp/j/val.jsonl" --out "$tmp/prep/hellaswag_val.bin" > "$tmp/prep.txt" 2>&1 \
    && out=$("$NODE" dev/test/hellaswag_fixture.mjs check "$tmp/prep/hellaswag_val.bin" "$tmp/j/val.jsonl" gpt2_tokenizer.bin); then
    ok "prep --local: header, fields, labels; tokens = js-tiktoken's of ctx and ' ' + ending, spelling the text ($out, $((SECONDS - start)) s)"
else bad "prep --local decode: ${out:-}"; cat "$tmp/prep.txt"; fi
for f in "$tmp"/j/bad_*.jsonl; do
    name=$(basename "$f" .jsonl)
    err=$("$NODE" dev/data/hellaswag.js --local "$f" --out "$tmp/badout/x.bin" 2>&1); rc=$?
    if [ $rc -ne 0 ] && [ "$(printf '%s\n' "$err" | grep -c .)" -eq 1 ] && [[ "$err" == "$f line 3: "* ]] && [ ! -e "$tmp/badout/x.bin" ]; then
        ok "refused ${name#bad_}: $err"
    else bad "${name#bad_}: exit $rc: $err"; fi
done
err=$("$NODE" dev/data/hellaswag.js --local "$tmp/none.jsonl" 2>&1); rc=$?
[ $rc -ne 0 ] && [[ "$err" == "$tmp/none.jsonl: no such file" ]] && ok "missing --local file: $err" || bad "missing --local file: exit $rc: $err"

# the download path, against a mock of the URL on 127.0.0.1 (HELLASWAG_URL), never the network
"$NODE" dev/test/hellaswag_fixture.mjs serve "$tmp/j/val.jsonl" "$tmp/port" > "$tmp/serve.log" 2>&1 &
server=$!
for _ in $(seq 50); do [ -s "$tmp/port" ] && break; sleep 0.1; done
url="http://127.0.0.1:$(cat "$tmp/port" 2>/dev/null)/rowanz/hellaswag/data/hellaswag_val.jsonl"
HELLASWAG_URL=$url "$NODE" dev/data/hellaswag.js --out "$tmp/dl/hellaswag_val.bin" > "$tmp/dl1.txt" 2>&1
n1=$(grep -c . "$tmp/serve.log")
HELLASWAG_URL=$url "$NODE" dev/data/hellaswag.js --out "$tmp/dl/hellaswag_val.bin" > "$tmp/dl2.txt" 2>&1
n2=$(grep -c . "$tmp/serve.log")
kill "$server" 2>/dev/null; wait "$server" 2>/dev/null
if cmp -s "$tmp/dl/hellaswag_val.bin" "$tmp/prep/hellaswag_val.bin" && cmp -s "$tmp/dl/hellaswag_val.jsonl" "$tmp/j/val.jsonl" \
    && [ "$n1" -eq 1 ] && [ "$n2" -eq 1 ]; then
    ok "download (mock on 127.0.0.1): the same .bin as --local, the jsonl kept beside it, a rerun reads it (1 request in all)"
else bad "download from the mock: requests $n1 then $n2"; cat "$tmp/dl1.txt" "$tmp/dl2.txt" | tail -4; fi
got=$(run prep ./train_gpt2 -e "$MODEL" -b 4 -t 64 -hf "$tmp/prep/hellaswag_val.bin")
[[ "$got" == */7 ]] && ok "train_gpt2 -h 1 reads the prepared file: $got" || bad "train_gpt2 on the prepared file: '$got'"

# -h is llm.c's HellaSwag flag; alone, before another flag, or --help: the usage, as before
for args in "-h" "-b 4 -h" "-h -b 4" "--help"; do
    out=$(./train_gpt2 $args 2>&1); rc=$?
    [ $rc -eq 0 ] && [[ "$out" == usage:* ]] && grep -q -- "-hf " <<< "$out" && ok "train_gpt2 $args: the usage" || bad "train_gpt2 $args: exit $rc"
done

echo "--- 2. known answers (a model that predicts a repeat of its input token)"
$PY $FX repeat-model "$MODEL" "$tmp/repeat_model.bin" > /dev/null
for mode in repeat wrong; do $PY $FX evalfile "$tmp/$mode.bin" 10 1 $mode > /dev/null; done
timeout 300 ./train_gpt2 -e "$tmp/repeat_model.bin" "${DATA[@]}" -b 8 -t 16 -x 2 -v 1 -s 0 -l 0 -h 1 -hf "$tmp/repeat.bin" \
    -o "$tmp/log" > "$tmp/known.txt" 2>&1
got=$(grep -o 'HellaSwag: .*' "$tmp/known.txt" | sort -u)
[ "$got" = "HellaSwag: 10/10 = 1.000000" ] && [ "$(grep -c HellaSwag "$tmp/known.txt")" -eq 3 ] \
    && ok "the repeat model on the repeat file: $got at steps 0, 1 and the end (2)" || bad "known answers: '$got'"
[ "$(grep eval "$tmp/log/main.log" | tr '\n' ' ')" = "s:0 eval:1.0000 s:1 eval:1.0000 s:2 eval:1.0000 " ] \
    && ok "main.log: s:0 eval:1.0000, s:1 ..., s:2 ... (llm.c's format)" || { bad "main.log eval lines"; cat "$tmp/log/main.log"; }
got=$(run wrong ./train_gpt2 -e "$tmp/repeat_model.bin" -b 8 -t 16 -hf "$tmp/wrong.bin")
[ "$got" = "0/10" ] && ok "the same examples with every label on a wrong ending: 0/10" || bad "wrong labels: '$got'"
if $PY - "$tmp/log/main.log" "$tmp/loss.png" <<'PY'
import subprocess, sys
sys.path.insert(0, "dev")
import plot_log
train, val, hs = plot_log.read_log(sys.argv[1])
assert hs == [(0, 1.0), (1, 1.0), (2, 1.0)] and len(train) == 2 and len(val) == 3, (train, val, hs)
subprocess.run([sys.executable, "dev/plot_log.py", sys.argv[1], "-o", sys.argv[2]], check=True, stdout=subprocess.DEVNULL)
PY
then [ -s "$tmp/loss.png" ] && ok "plot_log.py reads the eval lines (3 accuracies) and draws them" || bad "plot_log.py: no png"
else bad "plot_log.py on a log with eval lines"; fi

echo "--- 3. the PyTorch reference (train_gpt2.py's GPT, float64) on the random tiny model"
$PY $FX evalfile "$tmp/rand.bin" 23 2 random > /dev/null
if ${CC:-gcc} -O2 -fopenmp -Wall -Wextra -Werror -I. dev/test/hellaswag_losses.c -o "$tmp/hellaswag_losses" -lm 2> "$tmp/cc.txt" \
    && "$tmp/hellaswag_losses" "$MODEL" "$tmp/rand.bin" 8 16 > "$tmp/c_losses.txt" 2> "$tmp/c_count.txt" \
    && out=$($PY $FX reference "$MODEL" "$tmp/rand.bin" "$tmp/c_losses.txt"); then
    ok "per example and ending, $out"
else bad "against the PyTorch reference: ${out:-}"; cat "$tmp/cc.txt" "$tmp/c_count.txt" | head -5; fi
want=$(printf '%s\n' "${out:-}" | grep -o 'correct [0-9]*/[0-9]*' | cut -d' ' -f2)
[ -n "$want" ] || want=none

echo "--- 4. ranks and stages (train_gpt2, mpirun): PyTorch's count $want each"
for cfg in "1 0 8" "1 0 4" "2 0 8" "3 0 8" "2 3 8" "3 3 4"; do
    set -- $cfg
    got=$(run n$1z$2b$3 mpirun -np $1 ./train_gpt2 -e "$MODEL" -z $2 -b $3 -t 16 -hf "$tmp/rand.bin")
    [ "$got" = "$want" ] && ok "N=$1 stage $2 B=$3: $got" || bad "N=$1 stage $2 B=$3: '$got', expected $want"
done

echo "--- 5. the CUDA trainer on the emulator"
if [ -x ./train_gpt2fp32cu_emu ]; then
    got=$(run g1 ./train_gpt2fp32cu_emu -e "$MODEL" -b 8 -t 16 -hf "$tmp/rand.bin")
    [ "$got" = "$want" ] && ok "fp32, 1 rank: $got" || bad "fp32 emulated: '$got', expected $want"
    for r in 1 0; do
        NCCL_HOSTID="emu-hs-$r" run g2r$r ./train_gpt2fp32cu_emu -e "$MODEL" -z 3 -b 4 -t 16 -hf "$tmp/rand.bin" \
            -pn 2 -pr $r -pi fs -pf "$tmp/rdv" -wt 120 > "$tmp/g2r$r.count" &
    done
    wait
    got=$(cat "$tmp/g2r0.count")
    [ "$got" = "$want" ] && ok "fp32, 2 ranks (-pn) stage 3 B=4: $got" || bad "fp32 emulated 2 ranks stage 3: '$got', expected $want"
else bad "no ./train_gpt2fp32cu_emu (make emu)"; fi
if [ -x ./train_gpt2cu_emu ]; then
    got="$(run b1 ./train_gpt2cu_emu -e "$tmp/repeat_model.bin" -b 8 -t 16 -hf "$tmp/repeat.bin") $(run b2 ./train_gpt2cu_emu -e "$tmp/repeat_model.bin" -b 8 -t 16 -hf "$tmp/wrong.bin")"
    [ "$got" = "10/10 0/10" ] && ok "bf16, known answers: 10/10, and 0/10 with the labels moved" || bad "bf16 emulated known answers: '$got'"
else bad "no ./train_gpt2cu_emu (make emu)"; fi
summary hellaswag
