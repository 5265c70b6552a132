#!/usr/bin/env bash
# The BF16 tolerances of test_gpt2.cu against dev/test/bf16_rounding.py (a PyTorch twin of the
# bf16 build's rounding) on the tiny model, both ways:
#  - the simulated bf16 errors (logits, the 16 gradients, loss, the AdamW steps' losses and
#    norms) stay within half their bounds: bounds tightened below bf16 rounding fail here first;
#  - the simulation with a broken formula exceeds some bound: bounds loosened until a wrong
#    formula passes fail here. These bugs are ones the bounds catch on gpt2_tiny; subtler ones
#    (GELU's cubic term, the softmax's row term D) hide there under bf16 rounding, as the bounds
#    are gpt2_124M's (2-9x tiny's errors): the fp32 build's tolerances see them (test_gpt2.cu).
# ~30 s. usage: dev/test/test_bf16_bounds.sh
set -u
cd "$(dirname "$0")/../.."
source dev/test/lib.sh
PY=/usr/bin/python3 # Debian's, which has torch (README)
SIM=(nice -n 10 "$PY" dev/test/bf16_rounding.py gpt2_tiny)

if ! "$PY" -c 'import torch' 2> /dev/null; then
    bad "$PY has no torch (dev/install_deps.sh installs it)"
elif "${SIM[@]}" --expect within 2 > "$tmp/clean.txt" 2>&1; then
    ok "bf16 rounding alone: $(grep -o 'worst margin [0-9.]*x' "$tmp/clean.txt") (bound / simulated error, at least 2x)"
else
    bad "bf16 rounding alone exceeds half a bound (or the simulation failed):"; tail -n 25 "$tmp/clean.txt"
fi
for bug in ln_mean attproj_T wte_drop_one; do
    if "${SIM[@]}" --bug $bug --steps 0 --accum fp32 --expect over > "$tmp/$bug.txt" 2>&1; then
        ok "broken: $bug: $(grep -o '[0-9]* logits/gradient checks over their bound' "$tmp/$bug.txt")"
    else
        bad "broken: $bug passes every bound (or the simulation failed):"; tail -n 22 "$tmp/$bug.txt"
    fi
done
summary "bf16_bounds"
