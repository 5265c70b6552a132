#!/usr/bin/env bash
# The 16-byte kernels (cuda_common.cuh's Pack128) as nvcc builds them, sm_80 and sm_90, bf16 and
# fp32 (needs nvcc; no GPU): in the PTX each one loads with ld.global.v4 and, where it writes a
# floatX tensor, stores with st.global...v4 (nvcc once split such a store into four 4-byte ones,
# see store128); ptxas -v reports no spills for any of them (AdamW: 16-byte master, m, v since it
# takes four elements a thread; its bf16 params are an 8-byte store). AdamW's kernel (both gradient types):
# no stack frame and no spills (its tensor table once cost a 112-byte copy in local memory per
# thread, issue 30). The layernorm backward's warp kernel, each of its P = 1..4: no stack, no
# spills, and the blocks per SM its launch bounds ask for (4 at GPT-2's C = 768). The persistent
# classifier (fused_classifier_streamed_kernel): cp.async in, no stack, no spills, <= 64 registers.
# usage: dev/test/test_ptx_16byte.sh
set -u
cd "$(dirname "$0")/../.."
source dev/test/lib.sh
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
PTXAS=$(dirname "$NVCC")/ptxas
[ -x "$NVCC" ] && [ -x "$PTXAS" ] || { echo "nvcc or ptxas not found: nothing checked"; echo "ptx_16byte: 0 passed, 1 failed"; exit 1; }
# kernel: 1 if it writes a floatX tensor 16 bytes at a time (the row-dot writes fp32 sums)
KERNELS="gelu_forward_kernel:1 gelu_backward_kernel:1 layernorm_forward_kernel:1 layernorm_backward_kernel:1 layernorm_backward_warp_kernel:1
encoder_forward_kernel:1 encoder_backward_dwte_kernel:1 encoder_backward_dwpe_kernel:1
fused_classifier_kernel:1 fused_classifier_reread_kernel:1 attention_backward_rowdot_kernel:0 adamw_kernel:1"
for prec in BF16 FP32; do
    for arch in 80 90; do
        ptx="$tmp/k_${prec}_$arch.ptx"
        "$NVCC" -O3 -std=c++17 -I. -DENABLE_$prec -arch=sm_$arch -ptx dev/test/ptx_16byte.cu -o "$ptx" 2> "$tmp/nvcc.txt" \
            || { bad "$prec sm_$arch: nvcc"; tail -n 3 "$tmp/nvcc.txt"; continue; }
        "$PTXAS" -arch=sm_$arch -v "$ptx" -o "$tmp/k.cubin" > "$tmp/ptxas_${prec}_$arch.txt" 2>&1 || { bad "$prec sm_$arch: ptxas"; continue; }
        for entry in $KERNELS; do
            k=${entry%:*} writes=${entry#*:}
            body=$(awk -v k="$k" '/^\.visible \.entry/ { inside = index($0, k "P") > 0 || index($0, k "I") > 0 } inside' "$ptx")
            ld=$(grep -cE 'ld\.global(\.[a-z0-9]+)*\.v4' <<< "$body")
            st=$(grep -cE 'st\.global(\.[a-z0-9]+)*\.v4' <<< "$body")
            spill=$(awk -v k="$k" '/Compiling entry function/ { inside = index($0, k "P") > 0 || index($0, k "I") > 0 }
                inside && /bytes spill stores/ { match($0, /[0-9]+ bytes spill stores, [0-9]+ bytes spill loads/); print substr($0, RSTART, RLENGTH); exit }' "$tmp/ptxas_${prec}_$arch.txt")
            regs=$(awk -v k="$k" '/Compiling entry function/ { inside = index($0, k "P") > 0 || index($0, k "I") > 0 }
                inside && /Used [0-9]+ registers/ { match($0, /Used [0-9]+ registers/); print substr($0, RSTART + 5, RLENGTH - 15); exit }' "$tmp/ptxas_${prec}_$arch.txt")
            if [ -n "$body" ] && [ "$ld" -ge 1 ] && { [ "$writes" = 0 ] || [ "$st" -ge 1 ]; } && [ "$spill" = "0 bytes spill stores, 0 bytes spill loads" ]; then
                ok "$prec sm_$arch $k: $ld ld.global.v4, $st st.global.v4, $regs registers, no spills"
            else bad "$prec sm_$arch $k: ld.v4 $ld, st.v4 $st (writes: $writes), ptxas '$spill' (found: ${body:+yes})"; fi
        done
        # layernorm_backward_warp_kernel<P, NS>, every instance (the loop above reads the first
        # ptxas lists): no stack frame, no spills, and registers (rounded up to 8, the allocation
        # unit) that let an SM hold the blocks its launch bounds ask for (LAYERNORM_BWD_MIN_BLOCKS:
        # P = 1 6, P = 2 and 3 4, P = 4 3; blocks of 128 threads, of 64 for NS = 4 at P = 4, where
        # 4 warps' column sums would pass 48 KB): with its column sums in shared memory, GPT-2's
        # C = 768 (P = 3 in bf16) runs 16 warps per SM, B = 64 in one wave, with or without the
        # residual's two sums (NS = 2, 4).
        n=0
        while read -r P NS regs frame; do
            want=$(( P == 1 ? 6 : P <= 3 ? 4 : 3 )); threads=$(( NS == 4 && P == 4 ? 64 : 128 )); n=$((n + 1))
            if [ "$frame" = "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" ] \
                && [ $(( (regs + 7) / 8 * 8 * threads * want )) -le 65536 ]; then
                ok "$prec sm_$arch layernorm_backward_warp_kernel<$P, $NS>: $regs registers, $want blocks of $threads threads per SM, no stack, no spills"
            else bad "$prec sm_$arch layernorm_backward_warp_kernel<$P, $NS>: $regs registers ($want blocks of $threads threads need <= $((65536 / threads / want / 8 * 8))), ptxas '$frame'"; fi
        done < <(awk '/Compiling entry function/ { p = 0; if (match($0, /layernorm_backward_warp_kernelILi[0-9]+ELi[0-9]+E/)) { split(substr($0, RSTART + 33, RLENGTH - 34), a, "ELi"); p = a[1]; ns = a[2] } }
            p && /bytes stack frame/ { match($0, /[0-9]+ bytes stack frame, [0-9]+ bytes spill stores, [0-9]+ bytes spill loads/); frame = substr($0, RSTART, RLENGTH) }
            p && /Used [0-9]+ registers/ { match($0, /Used [0-9]+ registers/); print p, ns, substr($0, RSTART + 5, RLENGTH - 15), frame; p = 0 }' "$tmp/ptxas_${prec}_$arch.txt" | sort -n)
        [ $n = 8 ] || bad "$prec sm_$arch layernorm_backward_warp_kernel: $n instances in ptxas' output, expected P = 1..4 x NS = 2, 4"
        # adamw_kernel<floatX> and <float>: "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" each
        frames=$(awk '/Compiling entry function/ { inside = index($0, "adamw_kernelI") > 0 }
            inside && /bytes stack frame/ { match($0, /[0-9]+ bytes stack frame, [0-9]+ bytes spill stores, [0-9]+ bytes spill loads/); print substr($0, RSTART, RLENGTH); inside = 0 }' "$tmp/ptxas_${prec}_$arch.txt")
        nk=2; [ $prec = FP32 ] && nk=1 # fp32: floatX is float, one kernel
        [ "$(printf '%s\n' "$frames" | grep -c '^0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads$')" = $nk ] \
            && ok "$prec sm_$arch adamw_kernel ($nk gradient type(s)): no stack frame, no spills" \
            || bad "$prec sm_$arch adamw_kernel: ptxas says '$(echo $frames)'"
        # fused_classifier_streamed_kernel (the persistent classifier): its row comes in by 16-byte
        # cp.async into shared memory (no ld.global.v4: not in the loop above), goes to registers by
        # ld.shared.v4 and out by st.global.cs.v4; no stack frame (two buffer pointers in an array
        # were one), no spills, and at most 64 registers so that its block of 1024 threads fits an SM
        k=fused_classifier_streamed_kernel
        body=$(awk -v k="$k" '/^\.visible \.entry/ { inside = index($0, k "P") > 0 } inside' "$ptx")
        cp=$(grep -c 'cp\.async\.cg\.shared\.global' <<< "$body")
        lds=$(grep -cE 'ld\.shared(\.[a-z0-9]+)*\.v4' <<< "$body")
        st=$(grep -cE 'st\.global\.cs(\.[a-z0-9]+)*\.v4' <<< "$body")
        read -r regs frame < <(awk -v k="$k" '/Compiling entry function/ { inside = index($0, k "P") > 0 }
            inside && /bytes stack frame/ { match($0, /[0-9]+ bytes stack frame, [0-9]+ bytes spill stores, [0-9]+ bytes spill loads/); frame = substr($0, RSTART, RLENGTH) }
            inside && /Used [0-9]+ registers/ { match($0, /Used [0-9]+ registers/); print substr($0, RSTART + 5, RLENGTH - 15), frame; exit }' "$tmp/ptxas_${prec}_$arch.txt")
        if [ "$cp" -ge 1 ] && [ "$lds" -ge 1 ] && [ "$st" -ge 1 ] && [ -n "$regs" ] && [ "$regs" -le 64 ] \
            && [ "$frame" = "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" ]; then
            ok "$prec sm_$arch $k: $cp cp.async, $lds ld.shared.v4, $st st.global.cs.v4, $regs registers, no stack, no spills"
        else bad "$prec sm_$arch $k: cp.async $cp, ld.shared.v4 $lds, st.global.cs.v4 $st, registers '$regs' (<= 64), ptxas '$frame'"; fi
    done
done
summary ptx_16byte
