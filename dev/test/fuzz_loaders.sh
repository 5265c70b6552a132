#!/usr/bin/env bash
# Fuzzes the model-file, token-shard, tokenizer and HellaSwag eval-file loaders with libFuzzer (clang) under ASan +
# UBSan for a bounded time each, from small valid seeds; fails on any crash, sanitizer report or
# hang. Leak checks are off: a rejected input leaves what the loader had allocated (the real
# trainer exits at that point).
# usage: dev/test/fuzz_loaders.sh [seconds per loader, default 15]
set -u
cd "$(dirname "$0")/../.."
source dev/test/lib.sh
SECS=${1:-15}
if ! command -v clang >/dev/null; then echo "clang not found (dev/install_deps.sh installs it)"; summary "fuzz"; exit 1; fi
/usr/bin/python3 - "$tmp" <<'PY'
import os, struct, sys, random
out = sys.argv[1]
random.seed(0)
# a micro model: maxT 8, V 100, L 1, NH 1, C 4, Vp 128 (tensors as in llmc/gpt2_layout.h)
maxT, V, L, NH, C, Vp = 8, 100, 1, 1, 4, 128
n = Vp * C + maxT * C + L * (C + C + 3 * C * C + 3 * C + C * C + C + C + C + 4 * C * C + 4 * C + 4 * C * C + C) + C + C
for d in ("model", "shard", "tokenizer", "eval"):
    os.makedirs(f"{out}/{d}", exist_ok=True)
with open(f"{out}/model/seed", "wb") as f:
    f.write(struct.pack("<256i", 20240326, 3, maxT, V, L, NH, C, Vp, *([0] * 248)))
    f.write(struct.pack("<%df" % n, *[random.gauss(0, 0.02) for _ in range(n)]))
with open(f"{out}/shard/seed", "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, 64, *([0] * 253)) + struct.pack("<64H", *range(64)))
with open(f"{out}/tokenizer/seed", "wb") as f:
    f.write(struct.pack("<256i", 20240328, 2, 3, 2, *([0] * 252)))
    for tok in (b"a", b"bc", b"<|endoftext|>"):
        f.write(bytes([len(tok)]) + tok)
with open(f"{out}/eval/seed", "wb") as f:  # two examples in llm.c's eval format (llmc/hellaswag.h)
    ex = lambda i, label, ctx, ends: [65535, 0, i, label, 4, len(ctx)] + ctx + sum(([len(e)] + e for e in ends), [])
    data = [ex(0, 1, [10, 11], [[12], [13, 14], [15], [16]]), ex(1, 3, [20, 21, 22], [[1, 2], [3], [4, 5, 6], [9]])]
    for d in data:
        d[1] = 2 * len(d)
    flat = sum(data, [])
    f.write(struct.pack("<256i", 20240522, 1, 2, max(d[1] for d in data), *([0] * 252)))
    f.write(struct.pack("<%dH" % len(flat), *flat))
PY
# fuzz ID NAME: builds and runs one harness (one core: libFuzzer's one process, OpenMP at 1 thread);
# its exit status goes to $tmp/NAME.rc ("build" when the harness does not build), judged below
fuzz() {
    local id=$1 name=$2
    if ! clang -O1 -g -fopenmp -fno-math-errno -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
            -DFUZZ_TARGET=$id dev/test/fuzz_loaders.c -o "$tmp/fuzz_$name" -lm 2> "$tmp/build_$name.txt"; then
        echo build > "$tmp/$name.rc"; return
    fi
    ASAN_OPTIONS=detect_leaks=0 OMP_NUM_THREADS=1 timeout $((SECS + 60)) "$tmp/fuzz_$name" "$tmp/$name" -max_total_time="$SECS" -detect_leaks=0 \
        -rss_limit_mb=2048 -max_len=4096 -timeout=10 -artifact_prefix="$tmp/crash_$name-" > "$tmp/$name.log" 2>&1
    echo $? > "$tmp/$name.rc"
}
# two loaders at a time (each gets its SECS of one core, as when they ran one after the other)
for pair in "1:model 2:shard" "3:tokenizer 4:eval"; do
    for target in $pair; do fuzz "${target%%:*}" "${target#*:}" & done
    wait
done
for name in model shard tokenizer eval; do
    rc=$(cat "$tmp/$name.rc" 2>/dev/null || echo none)
    if [ "$rc" = build ]; then bad "$name: harness does not build"; head -5 "$tmp/build_$name.txt"; continue; fi
    runs=$(grep -o 'Done [0-9]* runs' "$tmp/$name.log" 2>/dev/null | tail -1)
    if [ "$rc" = 0 ] && [ -n "$runs" ] && ! grep -qE "ERROR: (AddressSanitizer|libFuzzer)|runtime error:" "$tmp/$name.log"; then
        ok "$name loader: $runs in ${SECS} s, no crash, no sanitizer report"
    else
        bad "$name loader: exit $rc"; grep -m5 -E "ERROR|runtime error|SUMMARY" "$tmp/$name.log" 2>/dev/null
        ls "$tmp"/crash_"$name"-* 2>/dev/null | head -3
    fi
done
summary "fuzz"
