#!/usr/bin/env bash
# Stream capture and graphs on the emulator (graph_test.cu says what it checks), plain and under
# EMU_CHECK_STREAMS=1 (the replayed ops carry their captured byte ranges). ~20 s on 2 cores.
set -u
cd "$(dirname "$0")/../../../.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
dev/cuda/emu/nvcc-cpu -O1 -I. dev/cuda/emu/tests/graph_test.cu -o "$tmp/graph_test" > "$tmp/build.txt" 2>&1 \
    || { tail -n 20 "$tmp/build.txt"; echo "graph_test: 0 passed, 1 failed"; exit 1; }
"$tmp/graph_test" 2> "$tmp/err.txt"; rc=$?
# each forbidden call is named in the emulator's warning
missing=0
for api in cudaMemcpy cudaStreamSynchronize cudaMalloc cudaDeviceSynchronize cudaEventSynchronize; do
    grep -q "cuda-emu.*: $api at .*during the stream capture begun on" "$tmp/err.txt" || { echo "FAIL: no warning names $api"; missing=1; }
done
[ $missing = 0 ] && echo "ok  : every forbidden call named in the emulator's warning"
EMU_CHECK_STREAMS=1 "$tmp/graph_test" > "$tmp/streams.txt" 2>&1; rc2=$?
[ $rc2 = 0 ] && echo "ok  : EMU_CHECK_STREAMS=1 clean" || { tail -n 5 "$tmp/streams.txt"; echo "FAIL: EMU_CHECK_STREAMS=1 exit $rc2"; }
[ $rc = 0 ] && [ $missing = 0 ] && [ $rc2 = 0 ]
