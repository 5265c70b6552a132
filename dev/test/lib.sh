# Shared by the shell tests (source it after cd to the repo root): the tiny reference model and
# data, a temporary folder removed on exit, and the ok/bad counters each test sums up with
# `summary NAME` as "NAME: N passed, N failed" (what dev/test/run_tests.sh reads).
MODEL=gpt2_tiny.bin
DATA=(-i dev/data/tinyshakespeare/tiny_shakespeare_train.bin -j dev/data/tinyshakespeare/tiny_shakespeare_val.bin)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0; failed=0
ok() { passed=$((passed + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }
summary() { echo "$1: $passed passed, $failed failed"; [ "$failed" -eq 0 ]; }
