#!/usr/bin/env bash
# The emulator's cuBLASLt (dev/cuda/emu/cublaslt.cpp) against double-precision references and
# its documented summation order (tests/cublaslt_test.cpp), linked with the emulator's real
# runtime (queued ops) and run under the lazy and random stream schedules, and with device
# memory unreadable from host code (EMU_PROTECT=1), and under the stream-order check.
# usage: dev/cuda/emu/tests/cublaslt_test.sh   (from anywhere)
set -u
cd "$(dirname "$0")/../../../.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
CUDA_INCLUDE=${CUDA_HOME:-/usr/local/cuda}/include
g++ -std=c++17 -O2 -Wall -Wextra -fopenmp -isystem "$CUDA_INCLUDE" -Idev/cuda/emu \
    dev/cuda/emu/runtime.cpp dev/cuda/emu/streams.cpp dev/cuda/emu/kernel.cpp dev/cuda/emu/ptx.cpp dev/cuda/emu/check.cpp \
    dev/cuda/emu/cublaslt.cpp dev/cuda/emu/tests/cublaslt_test.cpp \
    -o "$tmp/cublaslt_test" -lrt -ldl || { echo "cublaslt: 0 passed, 1 failed (build)"; exit 1; }
passed=0; failed=0
for env in "EMU_SCHEDULE=lazy" "EMU_SCHEDULE=random EMU_SEED=5" "EMU_SCHEDULE=eager EMU_PROTECT=1" \
    "EMU_SCHEDULE=random EMU_SEED=2 EMU_CHECK_STREAMS=1"; do
    echo "--- $env"
    out=$(env $env "$tmp/cublaslt_test" 2>&1); rc=$?
    line=$(printf '%s\n' "$out" | grep -Eo '[0-9]+ passed, [0-9]+ failed' | tail -n 1)
    printf '%s\n' "$out" | grep -v '^ok' | tail -n 5
    if [ $rc -eq 0 ] && [ -n "$line" ] && [ "${line#* passed, }" = "0 failed" ]; then
        passed=$((passed + 1)); echo "ok   cublaslt_test under $env: $line"
    else failed=$((failed + 1)); echo "FAIL cublaslt_test under $env: exit $rc, ${line:-no summary}"; fi
done
echo "cublaslt: $passed passed, $failed failed"
[ $failed -eq 0 ]
