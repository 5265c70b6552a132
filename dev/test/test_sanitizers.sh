#!/usr/bin/env bash
# The CPU trainer under AddressSanitizer + UndefinedBehaviorSanitizer (single process; any
# report fails): the PyTorch comparison on the tiny model (its first 3 AdamW steps), training at stages 0 and 3 with
# evaluation, sampling past T and a checkpoint, a resume from it, and every bad-input case
# (leak checks off for those: an error exit does not free).
# usage: dev/test/test_sanitizers.sh   (after make train_gpt2_asan test_gpt2_asan)
set -u
cd "$(dirname "$0")/../.."
source dev/test/lib.sh
export OMP_NUM_THREADS=2 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
asan_clean() { ! grep -qE "ERROR: (Address|Leak)Sanitizer|runtime error:" "$1"; }
# 3 of the 10 AdamW steps: each step runs the same code (the plain run, test_gpt2, checks all 10)
./test_gpt2_asan gpt2_tiny 3 > "$tmp/t.txt" 2>&1; rc=$?
[ $rc -eq 0 ] && asan_clean "$tmp/t.txt" && ok "test_gpt2 gpt2_tiny (3 AdamW steps) under ASan+UBSan: $(grep -o '[0-9]* passed, [0-9]* failed' "$tmp/t.txt")" \
    || { bad "test_gpt2_asan: exit $rc"; grep -m5 -E "ERROR|runtime error|FAIL" "$tmp/t.txt"; }
for z in 0 3; do
    ./train_gpt2_asan -e "$MODEL" "${DATA[@]}" -b 2 -t 16 -z $z -x 2 -v 1 -m 2 -s 2 -g 20 -n 2 -o "$tmp/z$z" > "$tmp/z$z.txt" 2>&1; rc=$?
    [ $rc -eq 0 ] && asan_clean "$tmp/z$z.txt" && ok "train_gpt2 -z $z (eval, sampling past T, checkpoint) clean" \
        || { bad "train_gpt2_asan -z $z: exit $rc"; grep -m5 -E "ERROR|runtime error|error:" "$tmp/z$z.txt"; }
done
./train_gpt2_asan -e "$MODEL" "${DATA[@]}" -b 2 -t 16 -z 1 -x 3 -v 0 -s 0 -y 1 -o "$tmp/z3" > "$tmp/r.txt" 2>&1; rc=$?
[ $rc -eq 0 ] && asan_clean "$tmp/r.txt" && grep -q "resumed from checkpoint 2" "$tmp/r.txt" && ok "resume (stage 3 checkpoint as stage 1) clean" \
    || { bad "resume under ASan: exit $rc"; grep -m5 -E "ERROR|runtime error|error:" "$tmp/r.txt"; }
ASAN_OPTIONS=detect_leaks=0 TRAIN_GPT2=./train_gpt2_asan bash dev/test/test_bad_input.sh > "$tmp/b.txt" 2>&1; rc=$?
[ $rc -eq 0 ] && asan_clean "$tmp/b.txt" && ok "all bad-input cases clean: $(tail -1 "$tmp/b.txt")" \
    || { bad "bad input under ASan: exit $rc"; grep -E "FAIL|ERROR|runtime error" "$tmp/b.txt" | head -5; }
summary "sanitizers"
