#!/usr/bin/env bash
# Activation recompute in the CPU trainer (-r, as in train_gpt2.cu): -r 1 keeps one layer's GELU
# output instead of L and recomputes it in the backward, -r 2 also ln1 and ln2. The recomputed
# values are the forward's bits, so for N = 1 (no mpirun) and N = 2 (mpirun) at stages 0 and 3:
#  - -r 1 and -r 2 write the final model byte-identical to -r 0's (cmp), with the same printed
#    losses, norms, val losses, bytes sent and samples;
#  - the memory table's activations row shrinks by exactly what the layout saves (fp32):
#      -r 1: (L-1)*B*T*4C*4 bytes          (GELU output: one layer's buffer instead of L)
#      -r 2: that + 2*(L-1)*B*T*C*4 bytes  (ln1 and ln2: one layer's buffer each instead of L)
#    with L and C from the start-up line (the tiny model: L 2; a fresh d3 at N=1: L 3);
#  - the start-up line says "recompute R", and 0 when -r is not given (the CPU default).
# usage: dev/test/test_recompute.sh   (needs mpirun, train_gpt2 built with MPI, gpt2_tiny.bin)
set -u
cd "$(dirname "$0")/../.."
if ! command -v mpirun >/dev/null; then echo "mpirun not found: install openmpi-bin"; echo "recompute: 0 passed, 1 failed"; exit 1; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export OMPI_MCA_rmaps_base_oversubscribe=1
source dev/test/lib.sh
TRAIN_GPT2=${TRAIN_GPT2:-./train_gpt2} # another build (a mutant) to check
B=2; T=32; STEPS=3

# rrun NAME N MODEL ARGS...: trains on N ranks (N=1: the plain process) into $tmp/NAME (log NAME.txt)
rrun() {
    local name=$1 n=$2 model=$3 rc; shift 3
    local cmd=("$TRAIN_GPT2" -e "$model" "${DATA[@]}" -b $B -t $T -x $STEPS -v 2 -m 2 -s $STEPS -g 8 -o "$tmp/$name" "$@")
    if [ "$n" -eq 1 ]; then timeout 300 "${cmd[@]}" > "$tmp/$name.txt" 2>&1
    else timeout 300 mpirun -np "$n" "${cmd[@]}" > "$tmp/$name.txt" 2>&1; fi
    rc=$?
    [ $rc -eq 0 ] || { echo "     run $name (N=$n $*) exited $rc:"; tail -5 "$tmp/$name.txt"; }
    return $rc
}
# the run's output without what may differ: times, the recompute setting, the activations row
transcript() {
    sed -e 's/([0-9.]* ms, [0-9]* tok\/s)//' -e '/recompute/d' -e '/^activations /d' -e '/^peak RSS/d' \
        -e "s|$tmp/[^/]*/|DIR/|" "$tmp/$1.txt"
}
acts() { awk -F'|' '$1 ~ /^activations / { gsub(/ /, "", $2); print $2 }' "$tmp/$1.txt"; }
config() { sed -n 's/^model .*: L \([0-9]*\), NH [0-9]*, C \([0-9]*\),.*/\1 \2/p' "$tmp/$1.txt"; }

check() { # check N STAGE MODEL TAG
    local N=$1 z=$2 model=$3 tag=$4 r base name L C a0 ar want
    base=${tag}_r0
    rrun "$base" "$N" "$model" -z "$z" || { bad "$tag: -r 0 ran"; return; }
    grep -q ", recompute 0, " "$tmp/$base.txt" && ok "$tag: no -r is recompute 0 on the CPU" \
        || bad "$tag: start-up line without 'recompute 0'"
    read -r L C <<< "$(config "$base")"; a0=$(acts "$base")
    for r in 1 2; do
        name=${tag}_r$r
        rrun "$name" "$N" "$model" -z "$z" -r $r || { bad "$tag -r $r ran"; continue; }
        grep -q ", recompute $r, " "$tmp/$name.txt" || bad "$tag -r $r: start-up line without 'recompute $r'"
        if [ -f "$tmp/$name/model_0000000$STEPS.bin" ] && cmp -s "$tmp/$base/model_0000000$STEPS.bin" "$tmp/$name/model_0000000$STEPS.bin" &&
           [ "$(grep -c 'train loss' "$tmp/$name.txt")" -eq $STEPS ] && [ "$(transcript "$name")" = "$(transcript "$base")" ]; then
            ok "$tag -r $r: final model byte-identical to -r 0, same losses, norms, val losses, sample"
        else
            bad "$tag -r $r: differs from -r 0"; diff <(transcript "$base") <(transcript "$name") | head -6
        fi
        want=$(( (L - 1) * B * T * 4 * C * 4 ))
        [ $r -eq 2 ] && want=$(( want + 2 * (L - 1) * B * T * C * 4 ))
        ar=$(acts "$name")
        if [ -n "$a0" ] && [ -n "$ar" ] && [ $((a0 - ar)) -eq $want ]; then
            ok "$tag -r $r: activations $a0 -> $ar bytes, saves $want as the layout says (L $L, C $C)"
        else bad "$tag -r $r: activations $a0 -> $ar bytes, expected to save $want (L $L, C $C)"; fi
    done
}

for N in 1 2; do
    for z in 0 3; do check $N $z "$MODEL" "N=$N z=$z"; done
done
check 1 0 d3 "N=1 z=0 d3" # a fresh 3-layer model: L-1 = 2 layers saved

summary "recompute"
