#!/usr/bin/env bash
# The gradient dtype of the CUDA trainer's bf16 build (-zd bf16|fp32), on the tiny model:
#  A. -zd fp32 at N = 2, stages 0-3, without accumulation and with 2 micro-steps: every stage's
#     losses, norms and final model byte-identical to stage 0's; each step's bytes = the plan =
#     exact arithmetic from the padded count P (reduce-scatter 4P(N-1)/N, stage 0's all-gather
#     too, stages 1-2's params 2P(N-1)/N); memory = plan = ZeRO formula with 4-byte grads; the
#     bf16 scratch row = 2 x (unit 0 + one block), from the model's shape; with -zu 2 (two blocks
#     per unit) stage 3 = stage 0 and the scratch = 2 x (unit 0 + the two-block unit).
#  B. 256 micro-steps of B=1: the first step's gradient norm of -zd fp32 is closer to the fp32
#     trainer's than -zd bf16's, by a clear margin.
# usage: dev/test/test_reduce_dtype.sh   (make train_gpt2cu_emu train_gpt2fp32cu_emu; on a GPU:
# ZERO_CUDA_BF16=./train_gpt2cu ZERO_CUDA_FP32=./train_gpt2fp32cu)
set -u
cd "$(dirname "$0")/../.."
source dev/test/lib.sh
export NCCL_ALGO=Ring NCCL_PROTO=Simple EMU_CUBLASLT_ALGO_BY_ALIGNMENT=1 # as dev/test/test_zero_emu.sh
BF16=${ZERO_CUDA_BF16:-./train_gpt2cu_emu} FP32=${ZERO_CUDA_FP32:-./train_gpt2fp32cu_emu}
for b in $BF16 $FP32; do [ -x $b ] || { echo "$b missing (make emu)"; echo "reduce_dtype: 0 passed, 1 failed"; exit 1; }; done
source dev/test/zero_lib.sh # cuda_run, same_run, check_stage, plan_bytes, step_bytes, mem, padded, norms
SECTIONS=" ${RD_SECTIONS:-A B} " # RD_SECTIONS picks sections (default both)
want() { [[ "$SECTIONS" == *" $1 "* ]]; }

if want A; then
echo "--- A. -zd fp32 at N = 2: stage 0's bits, bytes and memory = plan (= arithmetic)"
# the tiny model (gpt2_tiny.bin): C 64, Vp 50304, maxT 1024; units padded to a multiple of 16N = 32
C=64 Vp=50304 maxT=1024 N=2
pad() { echo $(( ($1 + 16 * N - 1) / (16 * N) * (16 * N) )); }
unit0=$(pad $((Vp * C + maxT * C + 2 * C))) block=$(pad $((12 * C * C + 13 * C)))
for acc in 1 2; do
    for z in 0 1 2 3; do
        name=a${acc}z$z
        cuda_run $name $BF16 $N -zd fp32 -z $z -b 1 -t 16 -d $((16 * N * acc)) -x 2 || { bad "$name ran"; continue; }
        if [ $z -gt 0 ]; then
            same_run $name a${acc}z0 && ok "x$acc micro-steps, stage $z: losses, norms and model byte-identical to stage 0" \
                || { bad "x$acc stage $z differs from stage 0"; paste <(losses $name) <(losses a${acc}z0) <(norms $name) <(norms a${acc}z0); }
        fi
        check_stage $name $N $z "$BYTES_BF16_FP32_GRADS" # bytes = plan, memory = plan = ZeRO formula (4-byte grads)
        P=$(padded $name) ring=$(( N - 1 ))
        want_ag=$(( z == 0 ? 4 * P * ring / N : z < 3 ? 2 * P * ring / N : -1 ))
        read -r rs ag _ <<< "$(step_bytes $name)"
        [ -n "$rs" ] && [ "$rs" = $((4 * P * ring / N)) ] && { [ $want_ag -lt 0 ] || [ "$ag" = $want_ag ]; } \
            && ok "x$acc stage $z: reduce-scatter 4P(N-1)/N = $rs$([ $want_ag -ge 0 ] && echo ", all-gather $ag")" \
            || bad "x$acc stage $z: bytes '$rs $ag', want reduce-scatter $((4 * P * ring / N)) all-gather $want_ag"
        scratch=$(( 2 * (unit0 + block) ))
        [ "$(mem $name "grad scratch" 2)" = $scratch ] && [ "$(mem $name "grad scratch" 3)" = $scratch ] \
            && ok "x$acc stage $z: grad scratch allocated = plan = 2 x (unit 0 + block) = $scratch" \
            || bad "x$acc stage $z: grad scratch '$(mem $name "grad scratch" 2)' / plan '$(mem $name "grad scratch" 3)', want $scratch"
    done
done

# two blocks per unit (-zu 2): the scratch holds unit 0 and the (largest) block unit
for z in 0 3; do cuda_run k2z$z $BF16 $N -zd fp32 -zu 2 -z $z -b 1 -t 16 -x 2 || bad "k2z$z ran"; done
same_run k2z3 k2z0 && ok "-zu 2, stage 3: stage 0's losses, norms and model" || bad "-zu 2: stage 3 differs from stage 0"
scratch=$(( 2 * (unit0 + $(pad $((2 * (12 * C * C + 13 * C))))) ))
[ "$(mem k2z3 "grad scratch" 2)" = $scratch ] && [ "$(mem k2z3 "grad scratch" 3)" = $scratch ] \
    && ok "-zu 2: grad scratch allocated = plan = 2 x (unit 0 + a two-block unit) = $scratch" || bad "-zu 2: grad scratch '$(mem k2z3 "grad scratch" 2)', want $scratch"
fi
if want B; then
echo "--- B. 256 micro-steps of B=1, T=1: fp32 accumulation is closer to the fp32 trainer"
# One step of 256 micro-steps (B=1, T=1). With bf16 gradients every micro-step's contribution
# (~1/256 of the sum, about one unit in the last place of a bf16 sum) is rounded against the
# running sum. Measured on the emulator (first step's norm; 4 digits are what the step line prints):
#   B=1 T=1, 256 micro-steps:  2.3145 (-zd bf16), 2.3156 (-zd fp32), 2.3159 (fp32 trainer)
#   B=1 T=4, 256 micro-steps:  1.7668, 1.7658, 1.7654
#   B=1 T=4,  64 micro-steps:  2.1842, 2.1836, 2.1831   (this section's old shape)
#   B=1 T=1,  64 micro-steps:  3.5964, 3.5953, 3.5957
# The bf16 build's own roundings (parameters, activations, and since the tensor-core attention
# P and dS) put the -zd fp32 run 3e-4 to 6e-4 off the fp32 trainer whatever the accumulation;
# at 64 micro-steps bf16 accumulation adds as much again, so the two are not told apart; at 256
# it costs 1.0e-3 to 1.4e-3. T=1 is the cheapest shape with 256 micro-steps. Demanded: bf16's
# distance at least 5e-4 (5 units of the printed norm: it visibly drifts) and at least 3x
# fp32's (measured 4.7x). The three one-process runs go side by side (one core each, ~1 min).
cuda_run acc_bf16 $BF16 1 -zd bf16 -b 1 -t 1 -d 256 -x 1 -gc 0 & p1=$!
cuda_run acc_fp32grads $BF16 1 -zd fp32 -b 1 -t 1 -d 256 -x 1 -gc 0 & p2=$!
cuda_run acc_fp32 $FP32 1 -b 1 -t 1 -d 256 -x 1 -gc 0 & p3=$!
wait $p1; r1=$?; wait $p2; r2=$?; wait $p3; r3=$?; [ $((r1 | r2 | r3)) -eq 0 ] || bad "B ran ($r1 $r2 $r3)"
read -r nb nf nr <<< "$(norms acc_bf16) $(norms acc_fp32grads) $(norms acc_fp32)"
awk -v b="${nb:-x}" -v f="${nf:-x}" -v r="${nr:-x}" 'BEGIN { db = b - r; if (db < 0) db = -db; df = f - r; if (df < 0) df = -df
    exit !(b r f ~ /^[0-9.]+$/ && db >= 5e-4 && db >= 3 * df) }' \
    && ok "first step's norm: -zd bf16 $nb, -zd fp32 $nf, fp32 trainer $nr (fp32 accumulation closer by a clear margin)" \
    || bad "norms: -zd bf16 '$nb', -zd fp32 '$nf', fp32 trainer '$nr'"
fi
summary reduce_dtype
