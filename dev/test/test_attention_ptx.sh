#!/usr/bin/env bash
# The bf16 build's attention kernels, as the CUDA toolkit compiles them (no GPU needed):
#  - the PTX of every kernel that does products (forward, dK/dV, dQ; hs 16, 32, 64, 128) has the
#    tensor-core instructions of llmc/mma.cuh: mma.sync m16n8k16 bf16 with fp32 accumulation,
#    ldmatrix .x4 and .x4.trans, cp.async 16-byte copies; and no fp32 fallback in local memory;
#  - ptxas (sm_80 and sm_90) reports 0 bytes of spill stores and loads for each of them;
#  - the table of registers, shared memory and blocks per SM that dev/cuda/NOTES.md records.
# Blocks per SM: the fewest of 65536 registers / (128 threads x registers rounded up to 8), the
# shared memory per SM (164 KB on sm_80 A100, 228 KB on sm_90 H100; 1 KB more per block reserved
# by the system) / the kernel's, and 16 (2048 threads / 128): CUDA C++ Programming Guide,
# "Compute Capabilities", table "Technical Specifications per Compute Capability".
# ~40 s. usage: dev/test/test_attention_ptx.sh [--table]   (--table: the markdown table only)
set -u
cd "$(dirname "$0")/../.."
source dev/test/lib.sh
NVCC=${NVCC:-$(command -v nvcc 2> /dev/null || ls /usr/local/cuda/bin/nvcc 2> /dev/null)}
if [ -z "$NVCC" ]; then
    echo "nvcc not found: nothing to check"
    summary "attention_ptx"
    exit 0
fi

# one translation unit that instantiates every launcher, and prints the shared memory per kernel
cat > "$tmp/att.cu" << 'EOF'
#include "llmc/attention.cuh"
void instantiate(floatX* out, float* lse, const floatX* qkv, float* D, floatX* dqkv, const floatX* dout, int B, int T,
                 int C, int NH, cudaStream_t s) {
    attention_forward(out, lse, qkv, B, T, C, NH, s);
    attention_backward(dqkv, dqkv, D, dout, qkv, out, lse, B, T, C, NH, s); // (dbias: any pointer; not run)
}
template <int HS> static void print_smem() {
    printf("forward %d %zu\ndkdv %d %zu\ndq %d %zu\n", HS, att_tc_smem_forward<HS>(), HS, att_tc_smem_dkdv<HS>(), HS,
           att_tc_smem_dq<HS>());
}
int main() { print_smem<16>(); print_smem<32>(); print_smem<64>(); print_smem<128>(); return 0; }
EOF
FLAGS=(-O3 -std=c++17 -I. -DENABLE_BF16)
if ! "$NVCC" "${FLAGS[@]}" -arch=sm_80 "$tmp/att.cu" -o "$tmp/smem" > "$tmp/build.txt" 2>&1 || ! "$tmp/smem" > "$tmp/smem.txt"; then
    bad "compile the instantiating unit"; cat "$tmp/build.txt"; summary "attention_ptx"; exit 1
fi

KERNELS="forward dkdv dq"
declare -A MANGLED=([forward]=attention_forward_kernel [dkdv]=attention_backward_dkdv_kernel [dq]=attention_backward_dq_kernel)
for arch in 80 90; do
    "$NVCC" "${FLAGS[@]}" -arch=sm_$arch --ptx "$tmp/att.cu" -o "$tmp/att$arch.ptx" 2> "$tmp/ptx$arch.err" ||
        { bad "nvcc --ptx sm_$arch"; cat "$tmp/ptx$arch.err"; continue; }
    "$NVCC" "${FLAGS[@]}" -arch=sm_$arch -cubin -Xptxas -v "$tmp/att.cu" -o "$tmp/att$arch.cubin" > "$tmp/ptxas$arch.txt" 2>&1 ||
        { bad "ptxas sm_$arch"; cat "$tmp/ptxas$arch.txt"; continue; }
    # one line per kernel: NAME HS REGISTERS SPILL_STORES SPILL_LOADS
    awk '/Compiling entry function/ { name = $0; sub(/.*_Z[0-9]+/, "", name); hs = name; sub(/ILi.*/, "", name);
                                      sub(/.*ILi/, "", hs); sub(/E.*/, "", hs); next }
         /spill stores/ { st = $5; ld = $9 }
         /Used [0-9]+ registers/ { for (i = 1; i <= NF; i++) if ($i == "Used") r = $(i + 1); print name, hs, r, st, ld }' \
        "$tmp/ptxas$arch.txt" > "$tmp/regs$arch.txt"
    for k in $KERNELS; do
        for hs in 16 32 64 128; do
            name=${MANGLED[$k]}
            # the kernel's PTX body: from its .entry to the closing brace at the start of a line
            awk -v pat="_Z[0-9]+${name}ILi${hs}E" '$0 ~ "\\.entry " pat { on = 1 } on { print } on && /^}/ { exit }' \
                "$tmp/att$arch.ptx" > "$tmp/body.ptx"
            mma=$(grep -c 'mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32' "$tmp/body.ptx")
            ldm=$(grep -c 'ldmatrix.sync.aligned.m8n8.x4.shared.b16' "$tmp/body.ptx")
            ldt=$(grep -c 'ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16' "$tmp/body.ptx")
            cpa=$(grep -c 'cp.async.cg.shared.global' "$tmp/body.ptx")
            loc=$(grep -c '\.local' "$tmp/body.ptx")
            read -r _ _ regs st ld <<< "$(awk -v n="$name" -v h="$hs" '$1 == n && $2 == h' "$tmp/regs$arch.txt")"
            smem=$(awk -v k="$k" -v h="$hs" '$1 == k && $2 == h { print $3 }' "$tmp/smem.txt")
            what="sm_$arch $k hs $hs"
            if [ "$mma" -gt 0 ] && [ "$ldm" -gt 0 ] && [ "$ldt" -gt 0 ] && [ "$cpa" -gt 0 ] && [ "$loc" -eq 0 ]; then
                ok "$what: PTX has $mma mma.sync bf16, $ldm ldmatrix.x4, $ldt ldmatrix.x4.trans, $cpa cp.async; no local memory"
            else
                bad "$what: PTX has $mma mma.sync bf16, $ldm ldmatrix.x4, $ldt ldmatrix.x4.trans, $cpa cp.async, $loc .local (expected > 0 of each, 0 .local)"
            fi
            if [ -n "${regs:-}" ] && [ "$st" = 0 ] && [ "$ld" = 0 ]; then
                ok "$what: ptxas: $regs registers, 0 bytes spilled"
            else
                bad "$what: ptxas: ${regs:-?} registers, spill stores ${st:-?} bytes, spill loads ${ld:-?} bytes (expected 0)"
            fi
            # blocks per SM (see the header)
            per_sm=$([ $arch = 80 ] && echo 167936 || echo 233472)
            by_regs=$(( 65536 / (128 * ((${regs:-255} + 7) / 8 * 8)) ))
            by_smem=$(( per_sm / (smem + 1024) ))
            blocks=$(( by_regs < by_smem ? by_regs : by_smem )); blocks=$(( blocks < 16 ? blocks : 16 ))
            echo "| $k | $hs | sm_$arch | ${regs:-?} | ${st:-?}/${ld:-?} | $smem | $by_regs | $by_smem | $blocks | $mma |" >> "$tmp/table.md"
        done
    done
done
# the Hopper kernels (llmc/attention_sm90.cuh), built for sm_90a: their PTX has the wgmma products
# (forward: S = Q K^T m64n128k16 from shared memory, O += P V m64n64k16 with P from registers;
# backward: m64n64k16 of both kinds, and dQ^T's m64n32k16), the TMA copies and the mbarrier waits,
# no local memory (dQ's reduce kernel: no local memory);
# ptxas: no spills, no stack frame. (The sm_80/sm_90 builds above compile them to empty bodies:
# __CUDA_ARCH_FEAT_SM90_ALL is defined for sm_90a only.)
if "$NVCC" "${FLAGS[@]}" -gencode arch=compute_90a,code=sm_90a --ptx "$tmp/att.cu" -o "$tmp/att90a.ptx" 2> "$tmp/ptx90a.err" &&
   "$NVCC" "${FLAGS[@]}" -gencode arch=compute_90a,code=sm_90a -cubin -Xptxas -v "$tmp/att.cu" -o "$tmp/att90a.cubin" > "$tmp/ptxas90a.txt" 2>&1; then
    for kname in attention_forward_sm90_kernel attention_backward_dkdv_sm90_kernel attention_backward_dq_reduce_kernel; do
        # the kernel's PTX: from its .entry to the next .entry (its inline asm has lines starting with "}")
        awk -v pat="\\.entry _Z[0-9]+$kname" '$0 ~ pat { on = 1; print; next } on && /\.entry / { exit } on' "$tmp/att90a.ptx" > "$tmp/body90a.ptx"
        n128=$(grep -c 'wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16' "$tmp/body90a.ptx")
        n64=$(grep -c 'wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16' "$tmp/body90a.ptx")
        n32=$(grep -c 'wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16' "$tmp/body90a.ptx")
        tma=$(grep -c 'cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes' "$tmp/body90a.ptx")
        wait=$(grep -c 'mbarrier.try_wait.parity' "$tmp/body90a.ptx")
        loc=$(grep -c '\.local' "$tmp/body90a.ptx")
        what="sm_90a $kname"
        if [ $kname = attention_backward_dq_reduce_kernel ]; then # dQ's partials summed: plain loads, no products
            if [ "$loc" -eq 0 ] && [ -s "$tmp/body90a.ptx" ]; then ok "$what: PTX has no local memory"
            else bad "$what: PTX has $loc .local (or no body)"; fi
        elif [ $((n128 + n64)) -gt 0 ] && [ "$tma" -gt 0 ] && [ "$wait" -gt 0 ] && [ "$loc" -eq 0 ] &&
           { [ $kname != attention_forward_sm90_kernel ] || [ "$n128" -gt 0 ]; } &&
           { [ $kname != attention_backward_dkdv_sm90_kernel ] || [ "$n32" -gt 0 ]; }; then
            ok "$what: PTX has $n128 wgmma m64n128k16, $n64 wgmma m64n64k16, $n32 wgmma m64n32k16 (dQ^T), $tma TMA 2D loads, $wait mbarrier waits; no local memory"
        else
            bad "$what: PTX has $n128 wgmma m64n128k16, $n64 m64n64k16, $n32 m64n32k16, $tma TMA loads, $wait mbarrier waits, $loc .local (expected wgmma (dK/dV: m64n32k16 too), TMA, waits; 0 .local)"
        fi
        line=$(awk -v k="$kname" '$0 ~ "Compiling entry function .*" k { on = 1 } on && /stack frame/ { print; exit }' "$tmp/ptxas90a.txt")
        regs=$(awk -v k="$kname" '$0 ~ "Compiling entry function .*" k { on = 1 } on && /Used [0-9]+ registers/ { for (i = 1; i <= NF; i++) if ($i == "Used") print $(i + 1); exit }' "$tmp/ptxas90a.txt")
        if [[ "$line" =~ ^[[:space:]]*0\ bytes\ stack\ frame,\ 0\ bytes\ spill\ stores,\ 0\ bytes\ spill\ loads ]]; then
            ok "$what: ptxas: ${regs:-?} registers (before setmaxnreg), no stack frame, 0 bytes spilled"
        else
            bad "$what: ptxas: '${line:-no line}' (expected no stack frame and no spills)"
        fi
    done
    # ptxas's wgmma diagnostics (C7510-C7519: wgmmas serialized, waits injected) cost the overlap
    # the kernels are written for: none may appear
    diag=$(grep -c 'C751[0-9]' "$tmp/ptxas90a.txt")
    if [ "$diag" -eq 0 ]; then ok "sm_90a: ptxas reports no serialized wgmma and no injected wait (C751x)"
    else bad "sm_90a: ptxas: $diag wgmma diagnostics"; grep 'C751[0-9]' "$tmp/ptxas90a.txt"; fi
else
    bad "nvcc sm_90a"; cat "$tmp/ptx90a.err" "$tmp/ptxas90a.txt"
fi

echo
echo "| kernel | hs | arch | registers | spill st/ld bytes | shared bytes | blocks by registers | by shared | blocks per SM | mma.sync in PTX |"
echo "|---|---|---|---|---|---|---|---|---|---|"
sort -t'|' -k2,2 -k4,4 -k3,3n "$tmp/table.md"
echo
summary "attention_ptx"
