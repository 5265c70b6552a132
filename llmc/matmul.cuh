/*
Matrix multiplies through cuBLASLt, and the bias gradient. The CUDA twins of train_gpt2.c's
matmul_forward / matmul_backward, with the same argument names.

cuBLAS is column-major and our tensors are row-major, so each product is written for the
transposed view: a row-major (R, K) matrix is a column-major (K, R) one. The three products:
  forward   out (BT,OC) = inp (BT,C) @ weight^T     column-major: out^T (OC x BT) = op(W) inp^T
  backward  dinp (BT,C) = dout (BT,OC) @ weight       column-major: dinp^T (C x BT) = W dout^T
            dweight (OC,C) += dout^T @ inp          column-major: dW^T (C x OC) += inp^T op(dout^T)
where W, stored row-major (OC,C), is column-major (C x OC), and op() transposes.
The bias rides on cuBLASLt's BIAS epilogue in the forward (one pass over the output, not two).
Its gradient (column sums of dout over the BT rows), where the caller asks for it (dbias not
NULL: the trainer's fc product; the two projections into the residual stream get theirs from ln2's
backward, layernorm.cuh's LAYERNORM_SUMS_RESIDUAL, and qkv's from the attention backward, which
writes its dout, attention.cuh's attention_dbias_*), rides on the dweight product's BGRADB
epilogue (issue 30 item 2): that product reads dout as its B operand anyway, and BGRADB sums
op(B) over k = BT for each of its OC columns (cublasLt.h), so dout is not read a second time.
BGRADB writes (=) its sums, in D's type, into a scratch vector; gradient accumulation needs +=,
so a one-thread-per-column kernel adds them into dbias: dbias = floatX(dbias + floatX(sum)), the
micro-step's sum rounded once to floatX before the add (in bf16 one rounding more than the
two-pass kernel this replaced, which added the fp32 sum; with gradients starting from zero, a
single micro-step, as test_gpt2cu runs, the two are the same). The order of the sum is
cuBLASLt's (one fixed order per algorithm, and the plan fixes the algorithm per shape), so it
stays deterministic and the same at every ZeRO stage.

GELU rides on the epilogues too (issue 30 item 2), for the MLP's two products:
  forward   fch_gelu = GELU(ln2 @ fcw^T + fcb), fch = the GELU input, one product
            (CUBLASLT_EPILOGUE_GELU_AUX_BIAS: D = GELU(v), aux = v, v the fp32 sum plus bias;
            GELU reads the unrounded v, and both outputs are rounded once)
  backward  dfch = GELU'(fch) * (dout @ fcprojw), one product (CUBLASLT_EPILOGUE_DGELU: aux = fch,
            the product never rounded to bf16 before the multiply)
so the trainer launches no GELU kernel: the (B,T,4C) tensors are read once less each way. The
aux matrix has D's shape, type and leading dimension (cublasLt.h: AUX_LD divisible by 8 and at
least D's rows), so a product whose OC is not a multiple of 8 takes the kernels of gelu.cuh
instead (matmul_gelu_fused says which); GPT-2's 4C always is.

Precision: bf16 inputs/outputs with fp32 accumulation (CUBLAS_COMPUTE_32F), or fp32 throughout
for the FP32 build (no TF32: that build exists for tight comparisons).
*/
#ifndef LLMC_MATMUL_CUH
#define LLMC_MATMUL_CUH

#include <cublasLt.h>
#include "cuda_common.cuh"
#include "gelu.cuh" // the kernels for shapes the GELU epilogues refuse

static inline void cublas_check(cublasStatus_t status, const char* call, const char* file, int line) {
    if (status != CUBLAS_STATUS_SUCCESS) { fail("cuBLASLt: %s: status %d [%s:%d]", call, (int)status, file, line); }
}
#define cublasCheck(call) cublas_check((call), #call, __FILE__, __LINE__)

#if defined(ENABLE_FP32)
#define CUBLAS_FLOATX CUDA_R_32F
#else
#define CUBLAS_FLOATX CUDA_R_16BF
#endif

// One handle and one workspace for the process (cuBLASLt's split-k and stream-k algorithms use
// it), shared by every model alive in it (a test holds two): the first matmul_init makes them,
// the last matmul_free releases them. Each caller counts the workspace in its own memory table.
static cublasLtHandle_t g_cublaslt = NULL;
static void* g_cublaslt_workspace = NULL;
static int g_cublaslt_users = 0;
static const size_t CUBLASLT_WORKSPACE_BYTES = 32 << 20;

static void matmul_init(size_t* mem_counter) {
    if (g_cublaslt_users++ == 0) {
        cublasCheck(cublasLtCreate(&g_cublaslt));
        g_cublaslt_workspace = cuda_malloc_counted(NULL, CUBLASLT_WORKSPACE_BYTES, "the cuBLASLt workspace");
    }
    if (mem_counter != NULL) { *mem_counter += CUBLASLT_WORKSPACE_BYTES; }
}

static void matmul_plans_free(void); // below

static void matmul_free(void) {
    if (g_cublaslt_users <= 0) { fail("internal: matmul_free without matmul_init"); }
    if (--g_cublaslt_users > 0) { return; }
    matmul_plans_free();
    cudaCheck(cudaFree(g_cublaslt_workspace));
    cublasCheck(cublasLtDestroy(g_cublaslt));
    g_cublaslt = NULL;
    g_cublaslt_workspace = NULL;
}

// Every product promises cuBLASLt the same alignment, 16 bytes (the widest load its kernels make
// at once), so the heuristic picks the algorithm, and with it the summation order, from the shape
// alone: the same bits wherever a tensor sits (stage 0's slab or a stage-3 gather slot, -r 0 or
// -r 2 activations). Promising each pointer's own alignment would let them differ. Units are
// padded to 16 elements and tensors start at multiples of C, so every pointer meets it.
static const uint32_t MATMUL_ALIGN = 16;

static inline void matmul_check_alignment(const void* p, const char* what, int m, int n, int k) {
    if ((uintptr_t)p % MATMUL_ALIGN != 0) {
        fail("internal: matmul m %d n %d k %d: %s at %p is not %u-byte aligned", m, n, k, what, p, MATMUL_ALIGN);
    }
}

// A product's descriptors and the heuristic's algorithm depend only on its shape, transposes and
// epilogue (the alignment promise is fixed): made once per distinct product and kept, instead of
// ~150 descriptor sets and heuristic queries per micro-step. A training step has under 20 shapes,
// evaluation the same, sampling 5 more (B=1 x T=1, one position per token: train_gpt2.cu's
// gpt2_sample). The table is a cache, not a registry: when it is full the least recently used plan
// is destroyed and its slot reused, so no sequence of shapes can overflow it (a shape made again
// gets the same algorithm: the heuristic's answer depends only on the arguments above).
// cublasLtMatmul reads the descriptors when it is called, not when the stream runs it, so a plan
// may be destroyed while products made with it are still queued.
typedef struct {
    int m, n, k, trans_a, trans_b;
    int epilogue; // cublasLtEpilogue_t: DEFAULT, BIAS, GELU_AUX_BIAS, GELU_AUX, DGELU or BGRADB
    unsigned long long last_use; // g_matmul_clock at its last lookup
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulAlgo_t algo;
} MatmulPlan;
#define MATMUL_PLANS 64
static MatmulPlan g_matmul_plans[MATMUL_PLANS];
static int g_matmul_plan_count = 0;
static unsigned long long g_matmul_clock = 0;
static unsigned long long g_matmul_plans_evicted = 0; // for the tests: how many plans were destroyed to make room

static void matmul_plan_destroy(MatmulPlan* q) {
    cublasCheck(cublasLtMatrixLayoutDestroy(q->la));
    cublasCheck(cublasLtMatrixLayoutDestroy(q->lb));
    cublasCheck(cublasLtMatrixLayoutDestroy(q->ld));
    cublasCheck(cublasLtMatmulDescDestroy(q->desc));
}

static int epilogue_has_bias(int e) { // a bias read, or (BGRADB) a bias gradient written
    return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || e == CUBLASLT_EPILOGUE_BGRADB;
}
static int epilogue_has_aux(int e) {
    return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || e == CUBLASLT_EPILOGUE_DGELU;
}

static const MatmulPlan* matmul_plan(int m, int n, int k, int trans_a, int trans_b, int epilogue) {
    g_matmul_clock++;
    for (int i = 0; i < g_matmul_plan_count; i++) {
        MatmulPlan* q = &g_matmul_plans[i];
        if (q->m == m && q->n == n && q->k == k && q->trans_a == trans_a && q->trans_b == trans_b && q->epilogue == epilogue) {
            q->last_use = g_matmul_clock;
            return q;
        }
    }
    MatmulPlan* q;
    if (g_matmul_plan_count < MATMUL_PLANS) { q = &g_matmul_plans[g_matmul_plan_count++]; }
    else { // full: the least recently used plan makes room
        q = &g_matmul_plans[0];
        for (int i = 1; i < MATMUL_PLANS; i++) { if (g_matmul_plans[i].last_use < q->last_use) { q = &g_matmul_plans[i]; } }
        matmul_plan_destroy(q);
        g_matmul_plans_evicted++;
    }
    q->last_use = g_matmul_clock;
    q->m = m; q->n = n; q->k = k; q->trans_a = trans_a; q->trans_b = trans_b; q->epilogue = epilogue;
    cublasCheck(cublasLtMatmulDescCreate(&q->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasCheck(cublasLtMatmulDescSetAttribute(q->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
    cublasCheck(cublasLtMatmulDescSetAttribute(q->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
    cublasLtEpilogue_t ep = (cublasLtEpilogue_t)epilogue;
    cublasCheck(cublasLtMatmulDescSetAttribute(q->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof(ep)));
    // the heuristic learns the bias's and the aux's alignment from the pointers' values (cublasLt.h),
    // so it gets an address with exactly the promised alignment; each call sets the real ones
    const void* promise = (const void*)(uintptr_t)MATMUL_ALIGN;
    if (epilogue_has_bias(epilogue)) {
        cublasCheck(cublasLtMatmulDescSetAttribute(q->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &promise, sizeof(promise)));
    }
    if (epilogue_has_aux(epilogue)) { // the aux has D's layout: ld m (matmul_gelu_fused: m % 8 == 0)
        const int64_t aux_ld = m;
        cublasCheck(cublasLtMatmulDescSetAttribute(q->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &promise, sizeof(promise)));
        cublasCheck(cublasLtMatmulDescSetAttribute(q->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld)));
    }
    cublasCheck(cublasLtMatrixLayoutCreate(&q->la, CUBLAS_FLOATX, trans_a ? k : m, trans_a ? m : k, trans_a ? k : m));
    cublasCheck(cublasLtMatrixLayoutCreate(&q->lb, CUBLAS_FLOATX, trans_b ? n : k, trans_b ? k : n, trans_b ? n : k));
    cublasCheck(cublasLtMatrixLayoutCreate(&q->ld, CUBLAS_FLOATX, m, n, m));
    cublasLtMatmulPreference_t pref;
    cublasCheck(cublasLtMatmulPreferenceCreate(&pref));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                     &CUBLASLT_WORKSPACE_BYTES, sizeof(CUBLASLT_WORKSPACE_BYTES)));
    const uint32_t align = MATMUL_ALIGN;
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align, sizeof(align)));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align, sizeof(align)));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align, sizeof(align)));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align, sizeof(align)));
    cublasLtMatmulHeuristicResult_t heuristic;
    int found = 0;
    // no algorithm for the problem: zero results, or (some versions) CUBLAS_STATUS_NOT_SUPPORTED
    cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(g_cublaslt, q->desc, q->la, q->lb, q->ld, q->ld, pref, 1, &heuristic, &found);
    if (status != CUBLAS_STATUS_NOT_SUPPORTED) { cublasCheck(status); }
    if (status == CUBLAS_STATUS_NOT_SUPPORTED || found == 0) {
        fail("cuBLASLt has no algorithm for m %d n %d k %d (trans %d %d, epilogue %d, alignment %u)", m, n, k, trans_a,
             trans_b, epilogue, MATMUL_ALIGN);
    }
    q->algo = heuristic.algo;
    cublasCheck(cublasLtMatmulPreferenceDestroy(pref));
    return q;
}

static void matmul_plans_free(void) {
    for (int i = 0; i < g_matmul_plan_count; i++) { matmul_plan_destroy(&g_matmul_plans[i]); }
    g_matmul_plan_count = 0;
}

// d (m x n, column-major, ld m) = op(a) op(b) [+ d when accumulate] [+ bias over the m rows],
// then the GELU epilogues with aux (m x n, ld m) when gelu is not 0:
//   gelu 1: aux = v, d = GELU(v) (GELU_AUX[_BIAS]);  gelu -1: d = v * GELU'(aux) (DGELU);
// or, when bgrad is not NULL (no bias, no gelu), BGRADB: bgrad (n) = the column sums of op(b) over k.
// a is (k x m) when trans_a, else (m x k); b is (n x k) when trans_b, else (k x n).
static void matmul_cublaslt_epi(floatX* d, const floatX* a, const floatX* b, const floatX* bias, floatX* aux,
                                int gelu, floatX* bgrad, int m, int n, int k, int trans_a, int trans_b, int accumulate,
                                cudaStream_t stream) {
    if (g_cublaslt == NULL) { fail("internal: matmul_init was not called"); }
    matmul_check_alignment(a, "a", m, n, k);
    matmul_check_alignment(b, "b", m, n, k);
    matmul_check_alignment(d, "d", m, n, k);
    if (bias != NULL) { matmul_check_alignment(bias, "the bias", m, n, k); }
    int epilogue = bias != NULL ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    if (gelu != 0) {
        if (aux == NULL || m % 8 != 0) { fail("internal: matmul m %d n %d k %d: a GELU epilogue needs aux and m %% 8 == 0", m, n, k); }
        if (gelu < 0 && bias != NULL) { fail("internal: matmul m %d n %d k %d: DGELU takes no bias", m, n, k); }
        matmul_check_alignment(aux, "the aux matrix", m, n, k);
        epilogue = gelu < 0 ? CUBLASLT_EPILOGUE_DGELU : bias != NULL ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    }
    if (bgrad != NULL) {
        if (bias != NULL || gelu != 0) { fail("internal: matmul m %d n %d k %d: BGRADB takes no bias and no GELU", m, n, k); }
        matmul_check_alignment(bgrad, "the bias gradient", m, n, k);
        epilogue = CUBLASLT_EPILOGUE_BGRADB;
        bias = bgrad; // BGRADB writes through the bias pointer
    }
    const MatmulPlan* q = matmul_plan(m, n, k, trans_a, trans_b, epilogue);
    if (bias != NULL) { // the attributes that change from call to call; the call reads them now
        cublasCheck(cublasLtMatmulDescSetAttribute(q->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    }
    if (gelu != 0) {
        cublasCheck(cublasLtMatmulDescSetAttribute(q->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)));
    }
    const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    cublasCheck(cublasLtMatmul(g_cublaslt, q->desc, &alpha, a, q->la, b, q->lb, &beta, d, q->ld, d, q->ld, &q->algo,
                               g_cublaslt_workspace, CUBLASLT_WORKSPACE_BYTES, stream));
}

static void matmul_cublaslt(floatX* d, const floatX* a, const floatX* b, const floatX* bias,
                            int m, int n, int k, int trans_a, int trans_b, int accumulate, cudaStream_t stream) {
    matmul_cublaslt_epi(d, a, b, bias, NULL, 0, NULL, m, n, k, trans_a, trans_b, accumulate, stream);
}

// Whether the GELU of a product with OC outputs per row rides on its epilogue (cublasLt.h: the
// aux's leading dimension, OC here, must be divisible by 8). Otherwise gelu.cuh's kernels run.
static int matmul_gelu_fused(int OC) { return OC % 8 == 0; }

// ----------------------------------------------------------------------------
// bias gradient: BGRADB writes the column sums of dout into a scratch vector; this adds them

// the scratch a matmul_backward with dbias needs, in floats: OC floatX (the floats are room enough)
static size_t matmul_dbias_scratch_floats(int OC) { return (size_t)OC; }

// one thread per column: dbias[col] += sums[col] (the product's BGRADB output, floatX)
__global__ void dbias_add_kernel(floatX* dbias, const floatX* sums, int OC) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= OC) { return; }
    dbias[col] = from_float(__fadd_rn(to_float(dbias[col]), to_float(sums[col])));
}

// ----------------------------------------------------------------------------
// the two operations

// out (BT,OC) = inp (BT,C) @ weight^T + bias; weight (OC,C) as in PyTorch, bias (OC) or NULL
static void matmul_forward(floatX* out, const floatX* inp, const floatX* weight, const floatX* bias,
                           int BT, int C, int OC, cudaStream_t stream) {
    matmul_cublaslt(out, weight, inp, bias, OC, BT, C, 1, 0, 0, stream);
}

// out_gelu (BT,OC) = GELU(pre_gelu), pre_gelu (BT,OC) = inp (BT,C) @ weight^T + bias: the fc
// product with its GELU (GELU_AUX_BIAS; where matmul_gelu_fused(OC) is false, the product then
// gelu.cuh's kernel, which reads the rounded pre_gelu). Run again on the same inputs it gives the
// same bits, which -r 1's recompute relies on.
static void matmul_forward_gelu(floatX* out_gelu, floatX* pre_gelu, const floatX* inp, const floatX* weight,
                                const floatX* bias, int BT, int C, int OC, cudaStream_t stream) {
    if (matmul_gelu_fused(OC)) {
        matmul_cublaslt_epi(out_gelu, weight, inp, bias, pre_gelu, 1, NULL, OC, BT, C, 1, 0, 0, stream);
    } else {
        matmul_cublaslt(pre_gelu, weight, inp, bias, OC, BT, C, 1, 0, 0, stream);
        gelu_forward(out_gelu, pre_gelu, (size_t)BT * OC, stream);
    }
}

// dinp (BT,C) = dout (BT,OC) @ weight (WRITTEN: its callers add it where it is a sum), times
// GELU'(pre_gelu) (BT,C) element by element when pre_gelu is not NULL (the DGELU epilogue: dinp
// is then the gradient at GELU's input; where matmul_gelu_fused(C) is false, the product rounded
// into dinp, then gelu.cuh's backward in place);
// dweight (OC,C) += dout^T @ inp; dbias (OC) += column sums of dout (when not NULL, with
// `scratch` of matmul_dbias_scratch_floats(OC) floats: the dweight product's BGRADB output)
static void matmul_backward(floatX* dinp, floatX* dweight, floatX* dbias, float* scratch, const floatX* dout,
                            const floatX* inp, const floatX* weight, int BT, int C, int OC, cudaStream_t stream,
                            const floatX* pre_gelu = NULL) {
    if (dbias != NULL) { check_aligned16(scratch, "scratch", "matmul_backward's dbias"); } // before anything is queued
    if (pre_gelu != NULL && matmul_gelu_fused(C)) {
        matmul_cublaslt_epi(dinp, weight, dout, NULL, (floatX*)pre_gelu, -1, NULL, C, BT, OC, 0, 0, 0, stream); // aux is read only
    } else {
        matmul_cublaslt(dinp, weight, dout, NULL, C, BT, OC, 0, 0, 0, stream);
        if (pre_gelu != NULL) { gelu_backward(dinp, pre_gelu, dinp, (size_t)BT * C, stream); }
    }
    // dweight^T (C x OC) += inp^T op(dout^T), and BGRADB: op(B) = dout (BT x OC) summed over k = BT
    matmul_cublaslt_epi(dweight, inp, dout, NULL, NULL, 0, dbias != NULL ? (floatX*)scratch : NULL, C, OC, BT, 0, 1, 1, stream);
    if (dbias != NULL) {
        dbias_add_kernel<<<ceil_div(OC, 256), 256, 0, stream>>>(dbias, (const floatX*)scratch, OC);
        cudaCheckLaunch();
    }
}

#endif // LLMC_MATMUL_CUH
