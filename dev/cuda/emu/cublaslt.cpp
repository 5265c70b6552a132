/*
cuBLASLt on the CPU: the part of NVIDIA's cublasLt.h that llmc/matmul.cuh calls, written from the
documentation of cublasLtMatmul, for programs built by the CUDA emulator (they link this file
instead of libcublasLt).

What it implements
  library:      cublasLtCreate/Destroy, GetVersion, GetCudartVersion, GetProperty,
                GetStatusName/GetStatusString
  descriptors:  matmul descriptor, matrix layout, matmul preference: Create, Init (the
                header's inline *Init functions), Destroy, SetAttribute, GetAttribute
  algorithms:   cublasLtMatmulAlgoGetHeuristic (one algorithm for every supported problem)
  the product:  cublasLtMatmul, queued on its stream like a kernel and run when the stream runs
The supported problem: D = alpha op(A) op(B) + beta C [+ bias], column-major (ORDER_COL), one
matrix per operand (BATCH_COUNT 1), A/B/C/D all CUDA_R_32F or all CUDA_R_16BF, compute type
CUBLAS_COMPUTE_32F (or _PEDANTIC, the same thing here: fp32 inputs are never rounded to TF32),
scale type CUDA_R_32F with alpha and beta in host memory, epilogue DEFAULT, BIAS (a bias of D's
type, one element per row of D), GELU, GELU_BIAS, GELU_AUX, GELU_AUX_BIAS (the GELU input written
to the aux matrix) or DGELU (the aux matrix read as the GELU input whose gradient multiplies the
product). op() is N or T; C (conjugate transpose) is T for real types.

The GELU epilogues (cublasLt.h's comments on cublasLtEpilogue_t and on the EPILOGUE_AUX_*
attributes are the documentation). The aux matrix has D's shape (m x n, column-major) and type
(EPILOGUE_AUX_DATA_TYPE unset, -1, or D's type), leading dimension CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD
("must be divisible by 8 and be no less than the number of rows in the output matrix"), address
CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, which the heuristic reads for its alignment as it reads
the bias pointer. A missing pointer or ld is refused (CUBLAS_STATUS_INVALID_VALUE), never defaulted.
GELU is the tanh approximation, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), evaluated in fp32
with tanhf; the documentation names only "GELU", and the tanh form is the one frameworks map onto
these epilogues (XLA fuses only its tanh-approximate GELU into them). Its gradient is the exact
derivative of that form. What a GPU's kernel rounds inside GELU is not documented: the emulator's
bits are its own, and only its semantics (which value is the GELU input, what is rounded when) are
cuBLASLt's.

BGRADB (cublasLt.h: "the bias size corresponds to the number of columns of the matrix D. The
reduction happens over the GEMM's k dimension. Stores Bias gradient in the auxiliary output", the
BIAS_POINTER; its elements have D's type): bias[j] = the sum over kk of op(B)[kk, j], in fp32 in
increasing kk from +0.0f, rounded once to D's type, WRITTEN (not added to) whatever beta is; D is
the plain product. BGRADA and DGELU_BGRAD are not implemented.

What it does not: everything else (other data and compute types, fast/TF32 modes, batches, other
orders, other epilogues (RELU*, BGRADA, DGELU_BGRAD), other aux types, device pointer modes, scale/amax pointers, cublasLtMatrixTransform,
AlgoGetIds/AlgoInit/AlgoCheck/AlgoConfig, the logger). A request for any of it returns
CUBLAS_STATUS_NOT_SUPPORTED with one line on stderr naming what; functions not written here fail
at link time. Nothing is silently approximated.

Stricter than a GPU
  - Alignment. The heuristic records in the algorithm the alignments the preference promised
    (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_{A,B,C,D}_BYTES, 256 by default) and the alignment of the
    bias pointer set in the descriptor when it was asked (the docs say the heuristic uses it).
    cublasLtMatmul refuses, with CUBLAS_STATUS_INVALID_VALUE and a message, a pointer less
    aligned than its algorithm was chosen for: a GPU kernel could fault or compute garbage.
  - Memory. Every operand must lie inside one device allocation with its whole extent, and alpha
    and beta must be host memory (pointer mode host): otherwise the process ends (emu::fatal),
    as a GPU kernel reading a host pointer would fault.

Numerics (see "the summation order" below): inputs converted to float, products summed in fp32
in one fixed order per output element, the epilogue in fp32, one rounding to D's type. Results
do not depend on the thread count (EMU_THREADS caps it) nor on how the work is tiled.
*/

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <omp.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <new>
#include <vector>

#include "emu_internal.h"

// cublasLtHandle_t points to this (cublasLt.h leaves the struct incomplete). The library keeps
// no state of its own: the handle only tells valid handles from stray pointers.
struct cublasLtContext {
    uint64_t magic;
};

namespace {

const uint64_t HANDLE_MAGIC = 0x656d752d636c7448ull;  // "emu-cltH"
const uint32_t DESC_MAGIC = 0x636c7444u;               // "cltD"
const uint32_t LAYOUT_MAGIC = 0x636c744cu;             // "cltL"
const uint32_t PREF_MAGIC = 0x636c7450u;               // "cltP"
const uint64_t ALGO_MAGIC = 0x656d752d636c7441ull;     // "emu-cltA"

bool handle_ok(cublasLtHandle_t h) { return h != nullptr && h->magic == HANDLE_MAGIC; }

// ---------------------------------------------------------------------------------------------
// messages: one line on stderr before every refusal, so a failing cublasCheck says why

__attribute__((format(printf, 1, 2))) cublasStatus_t unsupported(const char* fmt, ...) {
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    emu::warn("cuBLASLt: %s is not supported by the emulator", what);
    return CUBLAS_STATUS_NOT_SUPPORTED;
}

__attribute__((format(printf, 1, 2))) cublasStatus_t invalid(const char* fmt, ...) {
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    emu::warn("cuBLASLt: invalid value: %s", what);
    return CUBLAS_STATUS_INVALID_VALUE;
}

#define NAME(x) \
    case x: return #x;

const char* type_name(int t) {
    switch (t) {
        NAME(CUDA_R_32F) NAME(CUDA_R_16BF) NAME(CUDA_R_16F) NAME(CUDA_R_64F) NAME(CUDA_R_8I)
        NAME(CUDA_R_32I) NAME(CUDA_R_8F_E4M3) NAME(CUDA_R_8F_E5M2) NAME(CUDA_C_32F) NAME(CUDA_C_64F)
    }
    return "an unknown cudaDataType";
}

const char* desc_attr_name(int a) {
    switch (a) {
        NAME(CUBLASLT_MATMUL_DESC_COMPUTE_TYPE) NAME(CUBLASLT_MATMUL_DESC_SCALE_TYPE)
        NAME(CUBLASLT_MATMUL_DESC_POINTER_MODE) NAME(CUBLASLT_MATMUL_DESC_TRANSA)
        NAME(CUBLASLT_MATMUL_DESC_TRANSB) NAME(CUBLASLT_MATMUL_DESC_TRANSC)
        NAME(CUBLASLT_MATMUL_DESC_FILL_MODE) NAME(CUBLASLT_MATMUL_DESC_EPILOGUE)
        NAME(CUBLASLT_MATMUL_DESC_BIAS_POINTER) NAME(CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE)
        NAME(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER) NAME(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD)
        NAME(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE)
        NAME(CUBLASLT_MATMUL_DESC_ALPHA_VECTOR_BATCH_STRIDE) NAME(CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET)
        NAME(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER) NAME(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER)
        NAME(CUBLASLT_MATMUL_DESC_C_SCALE_POINTER) NAME(CUBLASLT_MATMUL_DESC_D_SCALE_POINTER)
        NAME(CUBLASLT_MATMUL_DESC_AMAX_D_POINTER) NAME(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE)
        NAME(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_POINTER)
        NAME(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_AMAX_POINTER) NAME(CUBLASLT_MATMUL_DESC_FAST_ACCUM)
        NAME(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE) NAME(CUBLASLT_MATMUL_DESC_A_SCALE_MODE)
        NAME(CUBLASLT_MATMUL_DESC_B_SCALE_MODE) NAME(CUBLASLT_MATMUL_DESC_C_SCALE_MODE)
        NAME(CUBLASLT_MATMUL_DESC_D_SCALE_MODE) NAME(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_MODE)
        NAME(CUBLASLT_MATMUL_DESC_D_OUT_SCALE_POINTER) NAME(CUBLASLT_MATMUL_DESC_D_OUT_SCALE_MODE)
        NAME(CUBLASLT_MATMUL_DESC_EMULATION_DESCRIPTOR)
    }
    return "unknown matmul descriptor attribute";
}

const char* layout_attr_name(int a) {
    switch (a) {
        NAME(CUBLASLT_MATRIX_LAYOUT_TYPE) NAME(CUBLASLT_MATRIX_LAYOUT_ORDER) NAME(CUBLASLT_MATRIX_LAYOUT_ROWS)
        NAME(CUBLASLT_MATRIX_LAYOUT_COLS) NAME(CUBLASLT_MATRIX_LAYOUT_LD) NAME(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT)
        NAME(CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET) NAME(CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET)
        NAME(CUBLASLT_MATRIX_LAYOUT_BATCH_MODE)
    }
    return "unknown matrix layout attribute";
}

const char* pref_attr_name(int a) {
    switch (a) {
        NAME(CUBLASLT_MATMUL_PREF_SEARCH_MODE) NAME(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES)
        NAME(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK) NAME(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES)
        NAME(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES) NAME(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES)
        NAME(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES) NAME(CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT)
        NAME(CUBLASLT_MATMUL_PREF_IMPL_MASK)
    }
    return "unknown matmul preference attribute";
}

const char* epilogue_name(uint32_t e) {
    switch (e) {
        NAME(CUBLASLT_EPILOGUE_DEFAULT) NAME(CUBLASLT_EPILOGUE_RELU) NAME(CUBLASLT_EPILOGUE_RELU_AUX)
        NAME(CUBLASLT_EPILOGUE_BIAS) NAME(CUBLASLT_EPILOGUE_RELU_BIAS) NAME(CUBLASLT_EPILOGUE_RELU_AUX_BIAS)
        NAME(CUBLASLT_EPILOGUE_DRELU) NAME(CUBLASLT_EPILOGUE_DRELU_BGRAD) NAME(CUBLASLT_EPILOGUE_GELU)
        NAME(CUBLASLT_EPILOGUE_GELU_AUX) NAME(CUBLASLT_EPILOGUE_GELU_BIAS) NAME(CUBLASLT_EPILOGUE_GELU_AUX_BIAS)
        NAME(CUBLASLT_EPILOGUE_DGELU) NAME(CUBLASLT_EPILOGUE_DGELU_BGRAD) NAME(CUBLASLT_EPILOGUE_BGRADA)
        NAME(CUBLASLT_EPILOGUE_BGRADB)
    }
    return "an unknown epilogue";
}

#undef NAME

// ---------------------------------------------------------------------------------------------
// attribute transfer, as the SetAttribute/GetAttribute docs specify it

// SetAttribute: buf not NULL and sizeInBytes exactly the attribute's size, else INVALID_VALUE.
template <typename T>
cublasStatus_t take(const void* buf, size_t size, T* value, const char* name) {
    if (buf == nullptr) { return invalid("%s: buf is NULL", name); }
    if (size != sizeof(T)) { return invalid("%s takes %zu bytes, not %zu", name, sizeof(T), size); }
    memcpy(value, buf, sizeof(T));
    return CUBLAS_STATUS_SUCCESS;
}

// GetAttribute: sizeInBytes 0 asks for the size (sizeWritten required); otherwise buf not NULL
// and sizeInBytes exactly the attribute's size.
template <typename T>
cublasStatus_t give(void* buf, size_t size, size_t* written, T value, const char* name) {
    if (size == 0) {
        if (written == nullptr) { return invalid("%s: sizeInBytes is 0 and sizeWritten is NULL", name); }
        *written = sizeof(T);
        return CUBLAS_STATUS_SUCCESS;
    }
    if (buf == nullptr) { return invalid("%s: buf is NULL", name); }
    if (size != sizeof(T)) { return invalid("%s takes %zu bytes, not %zu", name, sizeof(T), size); }
    memcpy(buf, &value, sizeof(T));
    if (written != nullptr) { *written = sizeof(T); }
    return CUBLAS_STATUS_SUCCESS;
}

// ---------------------------------------------------------------------------------------------
// descriptors: our structs, placed inside the header's semi-opaque storage (so the inline
// cublasLt*Init functions work on stack storage too); magic tells initialized ones apart

struct MatmulDesc {
    uint32_t magic;
    int32_t compute_type;  // cublasComputeType_t
    int32_t scale_type;    // cudaDataType
    int32_t pointer_mode;  // cublasLtPointerMode_t
    int32_t trans_a;       // cublasOperation_t
    int32_t trans_b;
    uint32_t epilogue;     // cublasLtEpilogue_t
    int32_t bias_type;     // cudaDataType, or -1: D's type (the documented default)
    const void* bias;
    void* aux;             // EPILOGUE_AUX_POINTER: the GELU input (written by GELU_AUX*, read by DGELU)
    int64_t aux_ld;        // EPILOGUE_AUX_LD, in elements (0: not set)
    int32_t aux_type;      // EPILOGUE_AUX_DATA_TYPE, or -1: D's type (the documented default)
};

struct Layout {
    uint32_t magic;
    uint32_t type;  // cudaDataType
    int32_t order;  // cublasLtOrder_t
    int32_t batch_count;
    uint64_t rows, cols;
    int64_t ld;
};

struct Pref {
    uint32_t magic;
    uint32_t min_align[4];  // A, B, C, D, in bytes (the documented default: 256)
    uint64_t max_workspace;
};

// What the heuristic chose, kept in cublasLtMatmulAlgo_t's 64 bytes.
struct Algo {
    uint64_t magic;
    uint32_t align[6];  // the alignments promised for A, B, C, D, bias and aux, in bytes
    uint32_t k_chunks;  // split-k chunks of the summation order (1 unless EMU_CUBLASLT_ALGO_BY_ALIGNMENT)
};

static_assert(sizeof(MatmulDesc) <= sizeof(cublasLtMatmulDescOpaque_t), "descriptor too large");
static_assert(sizeof(Layout) <= sizeof(cublasLtMatrixLayoutOpaque_t), "layout too large");
static_assert(sizeof(Pref) <= sizeof(cublasLtMatmulPreferenceOpaque_t), "preference too large");
static_assert(sizeof(Algo) <= sizeof(cublasLtMatmulAlgo_t), "algo too large");

// Our struct inside an opaque descriptor, or NULL when p is NULL or was never initialized.
template <typename T, typename Opaque>
T* unwrap(Opaque* p, uint32_t magic) {
    if (p == nullptr) { return nullptr; }
    T* t = std::launder(reinterpret_cast<T*>(p->data));
    return t->magic == magic ? t : nullptr;
}

bool compute_type_ok(int32_t t) { return t == CUBLAS_COMPUTE_32F || t == CUBLAS_COMPUTE_32F_PEDANTIC; }
bool data_type_ok(uint32_t t) { return t == CUDA_R_32F || t == CUDA_R_16BF; }
size_t type_size(uint32_t t) { return t == CUDA_R_16BF ? 2 : 4; }

cublasStatus_t check_compute_type(int32_t t) {
    if (!compute_type_ok(t)) { return unsupported("compute type %d (only CUBLAS_COMPUTE_32F and _32F_PEDANTIC)", t); }
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t check_scale_type(int32_t t) {
    if (t != CUDA_R_32F) { return unsupported("scale type %s (only CUDA_R_32F)", type_name(t)); }
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t check_data_type(uint32_t t) {
    if (!data_type_ok(t)) { return unsupported("matrix type %s (only CUDA_R_32F and CUDA_R_16BF)", type_name(t)); }
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t check_operation(int32_t op, const char* name) {
    if (op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C) { return CUBLAS_STATUS_SUCCESS; }
    if (op == CUBLAS_OP_CONJG) { return unsupported("%s = CUBLAS_OP_CONJG", name); }
    return invalid("%s = %d is not a cublasOperation_t", name, op);
}

// rows and columns are uint64_t in the API; the docs say usually only int32_t values work
cublasStatus_t check_dimension(uint64_t v, const char* name) {
    if (v > (uint64_t)INT32_MAX) { return unsupported("%s %llu (more than INT32_MAX)", name, (unsigned long long)v); }
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t init_desc(cublasLtMatmulDesc_t p, cublasComputeType_t compute, cudaDataType_t scale) {
    if (cublasStatus_t s = check_compute_type(compute)) { return s; }
    if (cublasStatus_t s = check_scale_type(scale)) { return s; }
    MatmulDesc* d = new (p->data) MatmulDesc();
    d->compute_type = compute;
    d->scale_type = scale;
    d->pointer_mode = CUBLASLT_POINTER_MODE_HOST;
    d->trans_a = d->trans_b = CUBLAS_OP_N;
    d->epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    d->bias_type = -1;
    d->bias = nullptr;
    d->aux = nullptr;
    d->aux_ld = 0;
    d->aux_type = -1;
    d->magic = DESC_MAGIC;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t init_layout(cublasLtMatrixLayout_t p, cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld) {
    if (cublasStatus_t s = check_data_type(type)) { return s; }
    if (cublasStatus_t s = check_dimension(rows, "rows")) { return s; }
    if (cublasStatus_t s = check_dimension(cols, "cols")) { return s; }
    if (ld < (int64_t)rows) { return invalid("matrix layout with ld %lld < rows %llu", (long long)ld, (unsigned long long)rows); }
    Layout* l = new (p->data) Layout();
    l->type = type;
    l->order = CUBLASLT_ORDER_COL;
    l->batch_count = 1;
    l->rows = rows;
    l->cols = cols;
    l->ld = ld;
    l->magic = LAYOUT_MAGIC;
    return CUBLAS_STATUS_SUCCESS;
}

void init_pref(cublasLtMatmulPreference_t p) {
    Pref* pr = new (p->data) Pref();
    for (uint32_t& a : pr->min_align) { a = 256; }
    pr->max_workspace = 0;
    pr->magic = PREF_MAGIC;
}

cublasStatus_t desc_set(MatmulDesc* d, cublasLtMatmulDescAttributes_t attr, const void* buf, size_t size) {
    const char* name = desc_attr_name(attr);
    int32_t v32 = 0;
    switch (attr) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE:
        if (cublasStatus_t s = take(buf, size, &v32, name)) { return s; }
        if (cublasStatus_t s = check_compute_type(v32)) { return s; }
        d->compute_type = v32;
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE:
        if (cublasStatus_t s = take(buf, size, &v32, name)) { return s; }
        if (cublasStatus_t s = check_scale_type(v32)) { return s; }
        d->scale_type = v32;
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_POINTER_MODE:
        if (cublasStatus_t s = take(buf, size, &v32, name)) { return s; }
        if (v32 != CUBLASLT_POINTER_MODE_HOST) { return unsupported("pointer mode %d (only CUBLASLT_POINTER_MODE_HOST)", v32); }
        d->pointer_mode = v32;
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_TRANSA:
    case CUBLASLT_MATMUL_DESC_TRANSB:
        if (cublasStatus_t s = take(buf, size, &v32, name)) { return s; }
        if (cublasStatus_t s = check_operation(v32, name)) { return s; }
        (attr == CUBLASLT_MATMUL_DESC_TRANSA ? d->trans_a : d->trans_b) = v32;
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_EPILOGUE:  // any value is kept; the heuristic and matmul refuse others
        return take(buf, size, &d->epilogue, name);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
        return take(buf, size, &d->bias, name);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:  // checked against D's type when used
        return take(buf, size, &d->bias_type, name);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
        return take(buf, size, &d->aux, name);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:  // checked against D's rows when used
        return take(buf, size, &d->aux_ld, name);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE:  // checked against D's type when used
        return take(buf, size, &d->aux_type, name);
    default:
        return unsupported("matmul descriptor attribute %s (%d)", name, (int)attr);
    }
}

cublasStatus_t desc_get(const MatmulDesc* d, cublasLtMatmulDescAttributes_t attr, void* buf, size_t size, size_t* written) {
    const char* name = desc_attr_name(attr);
    switch (attr) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: return give(buf, size, written, d->compute_type, name);
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE: return give(buf, size, written, d->scale_type, name);
    case CUBLASLT_MATMUL_DESC_POINTER_MODE: return give(buf, size, written, d->pointer_mode, name);
    case CUBLASLT_MATMUL_DESC_TRANSA: return give(buf, size, written, d->trans_a, name);
    case CUBLASLT_MATMUL_DESC_TRANSB: return give(buf, size, written, d->trans_b, name);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return give(buf, size, written, d->epilogue, name);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return give(buf, size, written, d->bias, name);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return give(buf, size, written, d->bias_type, name);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: return give(buf, size, written, d->aux, name);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: return give(buf, size, written, d->aux_ld, name);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE: return give(buf, size, written, d->aux_type, name);
    default: return unsupported("matmul descriptor attribute %s (%d)", name, (int)attr);
    }
}

// ld is not compared with rows here: a caller may set ROWS and LD one after the other, through a
// state that is briefly inconsistent. The heuristic and matmul check the finished layout.
cublasStatus_t layout_set(Layout* l, cublasLtMatrixLayoutAttribute_t attr, const void* buf, size_t size) {
    const char* name = layout_attr_name(attr);
    uint32_t u32 = 0;
    int32_t i32 = 0;
    uint64_t u64 = 0;
    switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE:
        if (cublasStatus_t s = take(buf, size, &u32, name)) { return s; }
        if (cublasStatus_t s = check_data_type(u32)) { return s; }
        l->type = u32;
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATRIX_LAYOUT_ORDER:
        if (cublasStatus_t s = take(buf, size, &i32, name)) { return s; }
        if (i32 != CUBLASLT_ORDER_COL) { return unsupported("matrix order %d (only CUBLASLT_ORDER_COL)", i32); }
        l->order = i32;
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATRIX_LAYOUT_ROWS:
    case CUBLASLT_MATRIX_LAYOUT_COLS:
        if (cublasStatus_t s = take(buf, size, &u64, name)) { return s; }
        if (cublasStatus_t s = check_dimension(u64, name)) { return s; }
        (attr == CUBLASLT_MATRIX_LAYOUT_ROWS ? l->rows : l->cols) = u64;
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATRIX_LAYOUT_LD:
        return take(buf, size, &l->ld, name);
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT:
        if (cublasStatus_t s = take(buf, size, &i32, name)) { return s; }
        if (i32 != 1) { return unsupported("batch count %d (only 1)", i32); }
        l->batch_count = i32;
        return CUBLAS_STATUS_SUCCESS;
    default:
        return unsupported("matrix layout attribute %s (%d)", name, (int)attr);
    }
}

cublasStatus_t layout_get(const Layout* l, cublasLtMatrixLayoutAttribute_t attr, void* buf, size_t size, size_t* written) {
    const char* name = layout_attr_name(attr);
    switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE: return give(buf, size, written, l->type, name);
    case CUBLASLT_MATRIX_LAYOUT_ORDER: return give(buf, size, written, l->order, name);
    case CUBLASLT_MATRIX_LAYOUT_ROWS: return give(buf, size, written, l->rows, name);
    case CUBLASLT_MATRIX_LAYOUT_COLS: return give(buf, size, written, l->cols, name);
    case CUBLASLT_MATRIX_LAYOUT_LD: return give(buf, size, written, l->ld, name);
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return give(buf, size, written, l->batch_count, name);
    default: return unsupported("matrix layout attribute %s (%d)", name, (int)attr);
    }
}

// the index into Pref::min_align of a MIN_ALIGNMENT attribute, or -1
int align_index(cublasLtMatmulPreferenceAttributes_t attr) {
    switch (attr) {
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: return 0;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: return 1;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: return 2;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: return 3;
    default: return -1;
    }
}

cublasStatus_t pref_set(Pref* p, cublasLtMatmulPreferenceAttributes_t attr, const void* buf, size_t size) {
    const char* name = pref_attr_name(attr);
    if (attr == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES) { return take(buf, size, &p->max_workspace, name); }
    int i = align_index(attr);
    if (i >= 0) { return take(buf, size, &p->min_align[i], name); }
    return unsupported("matmul preference attribute %s (%d)", name, (int)attr);
}

cublasStatus_t pref_get(const Pref* p, cublasLtMatmulPreferenceAttributes_t attr, void* buf, size_t size, size_t* written) {
    const char* name = pref_attr_name(attr);
    if (attr == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES) { return give(buf, size, written, p->max_workspace, name); }
    int i = align_index(attr);
    if (i >= 0) { return give(buf, size, written, p->min_align[i], name); }
    return unsupported("matmul preference attribute %s (%d)", name, (int)attr);
}

// ---------------------------------------------------------------------------------------------
// the problem, as the heuristic and matmul both validate it

struct Problem {
    int64_t m, n, k;      // op(A) is m x k, op(B) k x n, C and D m x n
    bool trans_a, trans_b;
    bool bias;            // the epilogue adds a bias (BIAS, GELU_BIAS, GELU_AUX_BIAS)
    int gelu;             // 0 none, GELU_FWD (GELU, GELU_BIAS, GELU_AUX*), GELU_BWD (DGELU)
    bool aux;             // the epilogue uses the aux matrix (GELU_AUX, GELU_AUX_BIAS, DGELU)
    Layout aux_layout;    // the aux matrix: D's type and shape, ld EPILOGUE_AUX_LD
    bool bgradb;          // BGRADB: the column sums of op(B) written to the bias pointer (n elements)
    uint32_t type;        // of A, B, C, D (and of the bias)
    Layout a, b, c, d;    // copies: descriptors may be destroyed before the product runs
};

cublasStatus_t check_layout(const Layout* l, const char* name) {
    if (l == nullptr) { return invalid("the layout of %s is NULL or was not initialized", name); }
    if (l->ld < (int64_t)l->rows) {
        return invalid("matrix %s has ld %lld < rows %llu", name, (long long)l->ld, (unsigned long long)l->rows);
    }
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t check_types(const Problem& p) {
    uint32_t t = p.d.type;
    if (p.a.type != t || p.b.type != t || p.c.type != t) {
        return unsupported("the type combination A %s, B %s, C %s, D %s (all four must be CUDA_R_32F, or all CUDA_R_16BF)",
                           type_name(p.a.type), type_name(p.b.type), type_name(p.c.type), type_name(t));
    }
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t check_shapes(const Problem& p) {
    int64_t k_b = p.trans_b ? (int64_t)p.b.cols : (int64_t)p.b.rows;
    if (k_b != p.k) {
        return invalid("op(A) is %lld x %lld but op(B) is %lld x %lld", (long long)p.m, (long long)p.k, (long long)k_b,
                       (long long)p.n);
    }
    const Layout* out[2] = {&p.c, &p.d};
    for (int i = 0; i < 2; i++) {
        if ((int64_t)out[i]->rows != p.m || (int64_t)out[i]->cols != p.n) {
            return invalid("%s is %llu x %llu but op(A) op(B) is %lld x %lld", i == 0 ? "C" : "D",
                           (unsigned long long)out[i]->rows, (unsigned long long)out[i]->cols, (long long)p.m, (long long)p.n);
        }
    }
    return CUBLAS_STATUS_SUCCESS;
}

const int GELU_FWD = 1, GELU_BWD = 2;

// The epilogue's parts into p (bias, gelu, aux) and its attributes checked: the aux ld as
// cublasLt.h requires it (set, divisible by 8, at least D's rows), the aux and bias types D's.
cublasStatus_t check_epilogue(const MatmulDesc* d, Problem* p) {
    uint32_t e = d->epilogue, d_type = p->type;
    switch (e) {
    case CUBLASLT_EPILOGUE_DEFAULT: break;
    case CUBLASLT_EPILOGUE_BIAS: p->bias = true; break;
    case CUBLASLT_EPILOGUE_GELU: p->gelu = GELU_FWD; break;
    case CUBLASLT_EPILOGUE_GELU_BIAS: p->gelu = GELU_FWD, p->bias = true; break;
    case CUBLASLT_EPILOGUE_GELU_AUX: p->gelu = GELU_FWD, p->aux = true; break;
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS: p->gelu = GELU_FWD, p->aux = true, p->bias = true; break;
    case CUBLASLT_EPILOGUE_DGELU: p->gelu = GELU_BWD, p->aux = true; break;
    case CUBLASLT_EPILOGUE_BGRADB: p->bgradb = true; break;
    default:
        return unsupported("epilogue %s (%u) (only DEFAULT, BIAS, GELU, GELU_BIAS, GELU_AUX, GELU_AUX_BIAS, DGELU and BGRADB)",
                           epilogue_name(e), e);
    }
    if ((p->bias || p->bgradb) && d->bias_type != -1 && (uint32_t)d->bias_type != d_type) {
        return unsupported("a bias of type %s with D of type %s (the bias must have D's type)", type_name(d->bias_type),
                           type_name(d_type));
    }
    if (p->aux) {
        if (d->aux_type != -1 && (uint32_t)d->aux_type != d_type) {
            return unsupported("an aux matrix of type %s with D of type %s (GELU's aux has D's type)", type_name(d->aux_type),
                               type_name(d_type));
        }
        if (d->aux_ld == 0) {
            return invalid("epilogue %s needs CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD (not set)", epilogue_name(e));
        }
        if (d->aux_ld % 8 != 0 || d->aux_ld < (int64_t)p->d.rows) {
            return invalid("epilogue %s: CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD %lld must be divisible by 8 and at least "
                           "D's %llu rows", epilogue_name(e), (long long)d->aux_ld, (unsigned long long)p->d.rows);
        }
        p->aux_layout = p->d;
        p->aux_layout.ld = d->aux_ld;
    }
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t make_problem(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t la, cublasLtMatrixLayout_t lb,
                            cublasLtMatrixLayout_t lc, cublasLtMatrixLayout_t ld, Problem* p) {
    const MatmulDesc* d = unwrap<const MatmulDesc>(desc, DESC_MAGIC);
    if (d == nullptr) { return invalid("the matmul descriptor is NULL or was not initialized"); }
    const Layout* layouts[4] = {unwrap<const Layout>(la, LAYOUT_MAGIC), unwrap<const Layout>(lb, LAYOUT_MAGIC),
                                unwrap<const Layout>(lc, LAYOUT_MAGIC), unwrap<const Layout>(ld, LAYOUT_MAGIC)};
    const char* names[4] = {"A", "B", "C", "D"};
    for (int i = 0; i < 4; i++) {
        if (cublasStatus_t s = check_layout(layouts[i], names[i])) { return s; }
    }
    p->a = *layouts[0], p->b = *layouts[1], p->c = *layouts[2], p->d = *layouts[3];
    p->trans_a = d->trans_a != CUBLAS_OP_N;  // T, or C which is T for real types
    p->trans_b = d->trans_b != CUBLAS_OP_N;
    p->m = p->trans_a ? (int64_t)p->a.cols : (int64_t)p->a.rows;
    p->k = p->trans_a ? (int64_t)p->a.rows : (int64_t)p->a.cols;
    p->n = p->trans_b ? (int64_t)p->b.rows : (int64_t)p->b.cols;
    p->type = p->d.type;
    p->bias = false, p->gelu = 0, p->aux = false, p->bgradb = false;
    if (cublasStatus_t s = check_types(*p)) { return s; }
    if (cublasStatus_t s = check_shapes(*p)) { return s; }
    return check_epilogue(d, p);
}

// ---------------------------------------------------------------------------------------------
// alignment promises and the algorithm

// The largest power of two up to 256 that divides the address (NULL counts as 256).
uint32_t alignment_of(const void* ptr) {
    uintptr_t a = (uintptr_t)ptr;
    uint32_t align = 256;
    while (align > 1 && a % align != 0) { align >>= 1; }
    return align;
}

// A MIN_ALIGNMENT preference as a promise about addresses: the largest power of two up to 256
// that divides it (0 promises nothing: 1).
uint32_t promise_of(uint32_t bytes) {
    if (bytes == 0) { return 1; }
    return std::min<uint32_t>(bytes & (~bytes + 1), 256);
}

// EMU_CUBLASLT_ALGO_BY_ALIGNMENT: unset or 0 off, 1 on.
bool algo_by_alignment() {
    const char* s = getenv("EMU_CUBLASLT_ALGO_BY_ALIGNMENT");
    if (s == nullptr || strcmp(s, "") == 0 || strcmp(s, "0") == 0) { return false; }
    if (strcmp(s, "1") == 0) { return true; }
    emu::fatal("EMU_CUBLASLT_ALGO_BY_ALIGNMENT=%s: expected 0 or 1", s);
}

// The heuristic's choice of summation order from the promised alignments of A, B, C, D: one
// chunk unless EMU_CUBLASLT_ALGO_BY_ALIGNMENT=1 (see "the summation order" below).
uint32_t choose_k_chunks(const uint32_t align[4]) {
    if (!algo_by_alignment()) { return 1; }
    // each promise is a power of two from 1 to 256: 9 classes; any change of class in any
    // operand picks another order (two different tuples collide only now and then: 1 in 7)
    uint32_t code = 0;
    for (int i = 0; i < 4; i++) {
        uint32_t lg = 0;
        while (lg < 8 && (1u << (lg + 1)) <= align[i]) { lg++; }
        code = code * 9 + lg;
    }
    return 1 + code % 7;
}

// The algorithm for the given promises (A, B, C, D, bias, aux).
cublasLtMatmulAlgo_t make_algo(const uint32_t align[6]) {
    Algo a = {};
    a.magic = ALGO_MAGIC;
    memcpy(a.align, align, sizeof a.align);
    a.k_chunks = choose_k_chunks(align);
    cublasLtMatmulAlgo_t out;
    memset(&out, 0, sizeof out);
    memcpy(out.data, &a, sizeof a);
    return out;
}

// Refuses an operand less aligned than its element type or than the algorithm's promise.
cublasStatus_t check_alignment(const char* name, const void* ptr, size_t elem_size, uint32_t promised, const char* pref) {
    uintptr_t a = (uintptr_t)ptr;
    if (a % elem_size != 0) { return invalid("%s at %p is not aligned to its %zu-byte elements", name, ptr, elem_size); }
    if (a % promised != 0) {
        return invalid("%s at %p is aligned to %u bytes only, but the algorithm was chosen for %u-byte alignment (%s); "
                       "a GPU kernel could fault or compute garbage",
                       name, ptr, alignment_of(ptr), promised, pref);
    }
    return CUBLAS_STATUS_SUCCESS;
}

// ---------------------------------------------------------------------------------------------
// the product
//
// The summation order. Each output element D[i,j] is computed by exactly one thread, so the
// result is the same for any thread count and any tiling:
//   1. Row i of op(A) and column j of op(B) are converted to float (exact for bf16) and padded
//      with zeros to kp = k rounded up to a multiple of 8 (0*0 added to a sum changes nothing).
//   2. Eight partial sums: lane l (0..7) adds the products a[kk]*b[kk] for kk = l, l+8, l+16,
//      ... in increasing kk, starting from +0.0f. Each product is rounded to float before it is
//      added: this code is compiled with fp-contract off, so no fused multiply-add appears
//      whatever -march says.
//   3. A fixed tree: t_l = s_l + s_{l+4} (l < 4), then u_l = t_l + t_{l+2} (l < 2), dot = u_0 + u_1.
//   4. The epilogue in float: v = alpha*dot; if beta != 0, v = v + beta*C[i,j] (C is not read
//      when beta == 0, so a NaN there cannot leak into D: BLAS semantics); with the BIAS
//      epilogue v = v + bias[i]; with GELU_AUX* aux[i,j] = v rounded to D's type, then (every
//      GELU form) v = gelu(v) from the unrounded v; with DGELU v = v * gelu'(aux[i,j]) (aux as
//      stored, converted to float); D[i,j] = v rounded to D's type (bf16: to nearest even).
//      Each element reads its own C element before writing its D element, so C == D is safe.
// Split-k, only with EMU_CUBLASLT_ALGO_BY_ALIGNMENT=1: a GPU's heuristic may pick another kernel,
// with another summation order, for a weaker alignment promise. To let tests see that, the
// heuristic then cuts [0, kp) into S chunks of round_up(ceil(k / S), 8) elements, S from 1 to 7 a
// function of the four promised alignments (S = 1 + code % 7, code the four log2 promises as
// base-9 digits: a change in any of them changes S, but for one tuple in seven); each chunk gets steps 2-3 on its own and dot = the chunk results added left
// to right. Results then differ in the last bits between promises, never by more than fp32
// rounding: code whose bits must not depend on where its buffers sit promises one alignment.

// no fused multiply-add from here on, whatever -march allows (step 2 above)
#if defined(__clang__)
#pragma clang fp contract(off)
#else
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#endif

// Four float lanes (SSE width, so g++ keeps them in registers at the baseline x86-64 ISA).
typedef float f4 __attribute__((vector_size(16)));

inline f4 load4(const float* p) {
    f4 v;
    memcpy(&v, p, sizeof v);
    return v;
}

// Step 3: lanes 0-3 in lo, 4-7 in hi.
inline float lane_tree(f4 lo, f4 hi) {
    f4 t = lo + hi;
    return (t[0] + t[2]) + (t[1] + t[3]);
}

// Steps 2-3 over [k0, k1) for one packed row a and NC packed columns (column c at b + c*kp):
// the row is loaded once for NC columns.
template <int NC>
inline void dot_range(const float* a, const float* b, size_t kp, size_t k0, size_t k1, float* out) {
    f4 lo[NC], hi[NC];
    for (int c = 0; c < NC; c++) { lo[c] = hi[c] = f4{0.0f, 0.0f, 0.0f, 0.0f}; }
    for (size_t kk = k0; kk < k1; kk += 8) {
        f4 a_lo = load4(a + kk), a_hi = load4(a + kk + 4);
        for (int c = 0; c < NC; c++) {
            const float* bc = b + (size_t)c * kp + kk;
            lo[c] += a_lo * load4(bc);
            hi[c] += a_hi * load4(bc + 4);
        }
    }
    for (int c = 0; c < NC; c++) { out[c] = lane_tree(lo[c], hi[c]); }
}

// The dot products over all of [0, kp), chunk by chunk (chunk = kp when not split).
template <int NC>
inline void dot(const float* a, const float* b, size_t kp, size_t chunk, float* out) {
    dot_range<NC>(a, b, kp, 0, std::min(chunk, kp), out);
    for (size_t k0 = chunk; k0 < kp; k0 += chunk) {
        float part[NC];
        dot_range<NC>(a, b, kp, k0, std::min(k0 + chunk, kp), part);
        for (int c = 0; c < NC; c++) { out[c] = out[c] + part[c]; }
    }
}

inline float to_float(float x) { return x; }
inline float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
inline void from_float(float* p, float v) { *p = v; }
inline void from_float(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

// Everything the queued product needs, by value.
struct Job {
    int64_t m, n, k;
    bool trans_a, trans_b;
    uint32_t type;
    const void* a;
    int64_t lda;
    const void* b;
    int64_t ldb;
    const void* c;  // not read when beta == 0
    int64_t ldc;
    void* d;
    int64_t ldd;
    const void* bias;  // NULL without a bias epilogue
    int gelu;          // 0, GELU_FWD or GELU_BWD
    void* aux;         // the aux matrix (NULL without one), ld aux_ld
    int64_t aux_ld;
    void* bgrad;       // BGRADB's output (n elements), or NULL
    float alpha, beta;
    uint32_t k_chunks;
};

// Step 1 for vectors v0..v1-1 of a matrix whose element (v, kk) is at m[v*sv + kk*sk]:
// out[(v - v0)*kp + kk], zero-padded from k to kp.
template <typename T>
void pack(const T* m, int64_t sv, int64_t sk, int64_t v0, int64_t v1, int64_t k, size_t kp, float* out) {
    for (int64_t v = v0; v < v1; v++) {
        float* o = out + (size_t)(v - v0) * kp;
        for (size_t kk = (size_t)k; kk < kp; kk++) { o[kk] = 0.0f; }
    }
    if (sk == 1) {  // each vector contiguous
        for (int64_t v = v0; v < v1; v++) {
            const T* src = m + v * sv;
            float* o = out + (size_t)(v - v0) * kp;
            for (int64_t kk = 0; kk < k; kk++) { o[kk] = to_float(src[kk]); }
        }
    } else {  // a transpose: walk memory in order (sv == 1), scatter into the vectors
        for (int64_t kk = 0; kk < k; kk++) {
            const T* src = m + kk * sk;
            for (int64_t v = v0; v < v1; v++) { out[(size_t)(v - v0) * kp + kk] = to_float(src[v]); }
        }
    }
}

// GELU's tanh form and its derivative in fp32 (each operation rounded: fp-contract is off here)
const float GELU_S = 0.7978845608028654f;  // sqrt(2 / pi)
const float GELU_K = 0.044715f;
inline float gelu_tanh(float x) {
    float u = GELU_S * (x + GELU_K * x * x * x);
    return 0.5f * x * (1.0f + tanhf(u));
}
inline float gelu_tanh_grad(float x) {
    float u = GELU_S * (x + GELU_K * x * x * x);
    float th = tanhf(u);
    return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * GELU_S * (1.0f + 3.0f * GELU_K * x * x);
}

// Step 4 for D[i,j].
template <typename T>
inline void finish(const Job& job, int64_t i, int64_t j, float sum) {
    float v = job.alpha * sum;
    if (job.beta != 0.0f) { v = v + job.beta * to_float(static_cast<const T*>(job.c)[i + j * job.ldc]); }
    if (job.bias != nullptr) { v = v + to_float(static_cast<const T*>(job.bias)[i]); }
    if (job.gelu == GELU_FWD) {
        if (job.aux != nullptr) { from_float(static_cast<T*>(job.aux) + i + j * job.aux_ld, v); }
        v = gelu_tanh(v);
    } else if (job.gelu == GELU_BWD) {
        v = v * gelu_tanh_grad(to_float(static_cast<const T*>(job.aux)[i + j * job.aux_ld]));
    }
    from_float(static_cast<T*>(job.d) + i + j * job.ldd, v);
}

const int64_t TILE_ROWS = 64;   // rows of op(A) packed per tile (64 x k floats: L2-resident)
const int64_t TILE_COLS = 128;  // columns of op(B) packed per tile

// D[i0..i1, j0..j1]: packs its rows of op(A) and columns of op(B), then walks 4 columns at a
// time (4 x k floats stay in L1) down all its rows.
template <typename T>
void run_tile(const Job& job, int64_t i0, int64_t i1, int64_t j0, int64_t j1, float* apack, float* bpack) {
    size_t kp = (size_t)(job.k + 7) / 8 * 8;
    size_t chunk = kp;
    if (job.k_chunks > 1) {
        int64_t per = (job.k + job.k_chunks - 1) / job.k_chunks;
        chunk = std::max<size_t>(8, (size_t)(per + 7) / 8 * 8);
    }
    // op(A)[i][kk] is A[kk + i*lda] when transposed, else A[i + kk*lda]; op(B)[kk][j] alike
    const T* a = static_cast<const T*>(job.a);
    const T* b = static_cast<const T*>(job.b);
    pack(a, job.trans_a ? job.lda : 1, job.trans_a ? 1 : job.lda, i0, i1, job.k, kp, apack);
    pack(b, job.trans_b ? 1 : job.ldb, job.trans_b ? job.ldb : 1, j0, j1, job.k, kp, bpack);
    for (int64_t j = j0; j < j1; j += 4) {
        int nc = (int)std::min<int64_t>(4, j1 - j);
        const float* bj = bpack + (size_t)(j - j0) * kp;
        for (int64_t i = i0; i < i1; i++) {
            const float* ai = apack + (size_t)(i - i0) * kp;
            float dots[4];
            if (nc == 4) {
                dot<4>(ai, bj, kp, chunk, dots);
            } else {
                for (int c = 0; c < nc; c++) { dot<1>(ai, bj + (size_t)c * kp, kp, chunk, dots + c); }
            }
            for (int c = 0; c < nc; c++) { finish<T>(job, i, j + c, dots[c]); }
        }
    }
}

#if !defined(__clang__)
#pragma GCC pop_options
#endif

// OpenMP's thread count, capped by EMU_THREADS (a positive integer) when it is set.
int thread_count() {
    int n = omp_get_max_threads();
    const char* s = getenv("EMU_THREADS");
    if (s != nullptr && *s != '\0') {
        char* end = nullptr;
        long cap = strtol(s, &end, 10);
        if (*end != '\0' || cap < 1) { emu::fatal("EMU_THREADS=%s: expected a positive integer", s); }
        n = (int)std::min<long>(n, cap);
    }
    return std::max(n, 1);
}

// The whole product, tiles shared among threads (each tile, so each output element, is done by
// one thread).
template <typename T>
void run_product(const Job& job) {
    size_t kp = (size_t)(job.k + 7) / 8 * 8;
    int64_t tiles_i = (job.m + TILE_ROWS - 1) / TILE_ROWS, tiles_j = (job.n + TILE_COLS - 1) / TILE_COLS;
    int64_t tiles = tiles_i * tiles_j;
    int threads = (int)std::min<int64_t>(thread_count(), tiles);
#pragma omp parallel num_threads(threads)
    {
        std::vector<float> apack((size_t)TILE_ROWS * kp), bpack((size_t)TILE_COLS * kp);
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < tiles; t++) {
            int64_t i0 = (t / tiles_j) * TILE_ROWS, j0 = (t % tiles_j) * TILE_COLS;
            run_tile<T>(job, i0, std::min(i0 + TILE_ROWS, job.m), j0, std::min(j0 + TILE_COLS, job.n), apack.data(),
                        bpack.data());
        }
    }
}

// BGRADB: bgrad[j] = sum over kk of op(B)[kk][j], in fp32 in increasing kk, rounded once
// (adds only: contraction cannot change it).
template <typename T>
void run_bgradb(const Job& job) {
    const T* b = static_cast<const T*>(job.b);
#pragma omp parallel for num_threads(thread_count()) schedule(static)
    for (int64_t j = 0; j < job.n; j++) {
        float sum = 0.0f;
        for (int64_t kk = 0; kk < job.k; kk++) { sum = sum + to_float(job.trans_b ? b[j + kk * job.ldb] : b[kk + j * job.ldb]); }
        from_float(static_cast<T*>(job.bgrad) + j, sum);
    }
}

// ---------------------------------------------------------------------------------------------
// cublasLtMatmul's checks before it queues the product

// Elements a column-major rows x cols matrix with leading dimension ld spans (what a kernel reads).
uint64_t extent(const Layout& l) {
    if (l.rows == 0 || l.cols == 0) { return 0; }
    return (l.cols - 1) * (uint64_t)l.ld + l.rows;
}

// Fatal unless the operand lies in device memory (a GPU kernel would fault on a host pointer).
void check_memory(const void* ptr, const Layout& l, const char* name) {
    uint64_t elems = extent(l);
    if (elems == 0) { return; }
    char what[160];
    snprintf(what, sizeof what, "matrix %s (%llu x %llu %s, ld %lld)", name, (unsigned long long)l.rows,
             (unsigned long long)l.cols, type_name(l.type), (long long)l.ld);
    emu::check_device_range(ptr, elems * type_size(l.type), "cublasLtMatmul", what);
}

// The bytes the operand occupies, for the stream-order check: each column's rows (one range when
// the columns touch, ld == rows), not the gaps between columns that another op may own.
void matrix_ranges(std::vector<emu::OpRange>* out, const void* ptr, const Layout& l, bool write) {
    size_t es = type_size(l.type);
    if (l.rows == 0 || l.cols == 0) { return; }
    if ((uint64_t)l.ld == l.rows) {
        out->push_back(emu::OpRange{ptr, (size_t)(l.rows * l.cols * es), write});
        return;
    }
    for (uint64_t j = 0; j < l.cols; j++) {
        out->push_back(emu::OpRange{(const char*)ptr + j * (uint64_t)l.ld * es, (size_t)(l.rows * es), write});
    }
}

// initcheck (EMU_CHECK): an operand's elements must have been written (column by column: the
// rows between a column's end and the next column's start are not read), and D is written.
void operand_read(const void* ptr, const Layout& l, const char* name, const char* what, const void* caller) {
    if (!emu::check_settings().initcheck || ptr == nullptr) { return; }
    char who[256];
    snprintf(who, sizeof who, "%s reading matrix %s", what, name);
    size_t es = type_size(l.type);
    for (uint64_t j = 0; j < l.cols; j++) { emu::device_bytes_read((const char*)ptr + j * l.ld * es, l.rows * es, who, caller); }
}

void operand_written(void* ptr, const Layout& l) {
    if (!emu::check_settings().initcheck) { return; }
    size_t es = type_size(l.type);
    for (uint64_t j = 0; j < l.cols; j++) { emu::device_bytes_written((char*)ptr + j * l.ld * es, l.rows * es); }
}

// alpha and beta (pointer mode host) as floats, read now as cuBLASLt does.
cublasStatus_t read_scalars(const void* alpha, const void* beta, float* a, float* b) {
    if (alpha == nullptr || beta == nullptr) { return invalid("alpha or beta is NULL"); }
    if (emu::device_range(alpha, sizeof(float)) || emu::device_range(beta, sizeof(float))) {
        emu::fatal("cublasLtMatmul: alpha or beta points to device memory, but the pointer mode is "
                   "CUBLASLT_POINTER_MODE_HOST (a real run would read a host address that is not there)");
    }
    memcpy(a, alpha, sizeof(float));
    memcpy(b, beta, sizeof(float));
    return CUBLAS_STATUS_SUCCESS;
}

// The alignments the algorithm was chosen for (A, B, C, D, bias, aux) and its k chunks; without an
// algorithm, the pointers' own alignments (as if the heuristic had been asked for them).
cublasStatus_t algo_promises(const cublasLtMatmulAlgo_t* algo, const void* const ptrs[6], uint32_t align[6],
                             uint32_t* k_chunks) {
    if (algo == nullptr) {
        for (int i = 0; i < 6; i++) { align[i] = alignment_of(ptrs[i]); }
        *k_chunks = choose_k_chunks(align);
        return CUBLAS_STATUS_SUCCESS;
    }
    Algo a;
    memcpy(&a, algo->data, sizeof a);
    if (a.magic != ALGO_MAGIC) { return invalid("the algorithm did not come from cublasLtMatmulAlgoGetHeuristic"); }
    memcpy(align, a.align, sizeof a.align);
    *k_chunks = a.k_chunks;
    return CUBLAS_STATUS_SUCCESS;
}

// Every pointer the product reads or writes against its element size and its promise.
cublasStatus_t check_pointers(const Problem& p, const void* const ptrs[6], const uint32_t align[6], bool reads_c) {
    static const char* const names[6] = {"matrix A", "matrix B", "matrix C", "matrix D", "the bias", "the aux matrix"};
    static const char* const prefs[6] = {"CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES", "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES",
                                         "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES", "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES",
                                         "the bias pointer's alignment when the heuristic was asked",
                                         "the aux pointer's alignment when the heuristic was asked"};
    for (int i = 0; i < 6; i++) {
        if ((i == 2 && !reads_c) || (i == 4 && !p.bias && !p.bgradb) || (i == 5 && !p.aux)) { continue; }
        if (cublasStatus_t s = check_alignment(names[i], ptrs[i], type_size(p.type), align[i], prefs[i])) { return s; }
    }
    return CUBLAS_STATUS_SUCCESS;
}

// The docs: in place means C == D with Cdesc equal to Ddesc.
cublasStatus_t check_in_place(const Problem& p, const void* c, const void* d) {
    if (c == d && p.c.ld != p.d.ld) {
        return invalid("C == D (in place) but C's ld %lld differs from D's %lld", (long long)p.c.ld, (long long)p.d.ld);
    }
    return CUBLAS_STATUS_SUCCESS;
}

void describe(const Job& job, char* out, size_t size) {
    snprintf(out, size, "cublasLtMatmul %lldx%lldx%lld %s %c%c%s%s%s", (long long)job.m, (long long)job.n, (long long)job.k,
             job.type == CUDA_R_16BF ? "bf16" : "fp32", job.trans_a ? 'T' : 'N', job.trans_b ? 'T' : 'N',
             job.bias != nullptr ? " bias" : "", job.gelu == GELU_FWD ? " gelu" : job.gelu == GELU_BWD ? " dgelu" : "",
             job.aux != nullptr ? " aux" : job.bgrad != nullptr ? " bgradb" : "");
}

}  // namespace

// =============================================================================================
// the API

cublasStatus_t cublasLtCreate(cublasLtHandle_t* lightHandle) {
    emu::ApiScope scope("cublasLtCreate");
    if (lightHandle == nullptr) { return invalid("cublasLtCreate: lightHandle is NULL"); }
    *lightHandle = new cublasLtContext{HANDLE_MAGIC};
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle) {
    emu::ApiScope scope("cublasLtDestroy");
    if (!handle_ok(lightHandle)) { return CUBLAS_STATUS_NOT_INITIALIZED; }
    lightHandle->magic = 0;
    delete lightHandle;
    return CUBLAS_STATUS_SUCCESS;
}

const char* cublasLtGetStatusName(cublasStatus_t status) {
    emu::ApiScope scope("cublasLtGetStatusName");
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasLtGetStatusString(cublasStatus_t status) {
    emu::ApiScope scope("cublasLtGetStatusString");
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR: return "an error was detected when checking the current licensing";
    }
    return "an unknown status";
}

size_t cublasLtGetVersion(void) {
    emu::ApiScope scope("cublasLtGetVersion");
    return CUBLAS_VERSION;
}

size_t cublasLtGetCudartVersion(void) {
    emu::ApiScope scope("cublasLtGetCudartVersion");
    return CUDART_VERSION;
}

cublasStatus_t cublasLtGetProperty(libraryPropertyType type, int* value) {
    emu::ApiScope scope("cublasLtGetProperty");
    if (value == nullptr) { return invalid("cublasLtGetProperty: value is NULL"); }
    switch (type) {
    case MAJOR_VERSION: *value = CUBLAS_VER_MAJOR; return CUBLAS_STATUS_SUCCESS;
    case MINOR_VERSION: *value = CUBLAS_VER_MINOR; return CUBLAS_STATUS_SUCCESS;
    case PATCH_LEVEL: *value = CUBLAS_VER_PATCH; return CUBLAS_STATUS_SUCCESS;
    }
    return invalid("cublasLtGetProperty: property type %d", (int)type);
}

// ---- matmul descriptor

cublasStatus_t cublasLtMatmulDescInit_internal(cublasLtMatmulDesc_t matmulDesc, size_t size,
                                               cublasComputeType_t computeType, cudaDataType_t scaleType) {
    emu::ApiScope scope("cublasLtMatmulDescInit");
    if (matmulDesc == nullptr) { return invalid("cublasLtMatmulDescInit: matmulDesc is NULL"); }
    if (size < sizeof(MatmulDesc)) { return CUBLAS_STATUS_ALLOC_FAILED; }
    return init_desc(matmulDesc, computeType, scaleType);
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* matmulDesc, cublasComputeType_t computeType,
                                        cudaDataType_t scaleType) {
    emu::ApiScope scope("cublasLtMatmulDescCreate");
    if (matmulDesc == nullptr) { return invalid("cublasLtMatmulDescCreate: matmulDesc is NULL"); }
    cublasLtMatmulDesc_t d = new cublasLtMatmulDescOpaque_t();
    if (cublasStatus_t s = init_desc(d, computeType, scaleType)) {
        delete d;
        return s;
    }
    *matmulDesc = d;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
    emu::ApiScope scope("cublasLtMatmulDescDestroy");
    if (matmulDesc != nullptr) { memset(matmulDesc->data, 0, sizeof matmulDesc->data); }
    delete matmulDesc;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t sizeInBytes) {
    emu::ApiScope scope("cublasLtMatmulDescSetAttribute");
    MatmulDesc* d = unwrap<MatmulDesc>(matmulDesc, DESC_MAGIC);
    if (d == nullptr) { return invalid("the matmul descriptor is NULL or was not initialized"); }
    return desc_set(d, attr, buf, sizeInBytes);
}

cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr,
                                              void* buf, size_t sizeInBytes, size_t* sizeWritten) {
    emu::ApiScope scope("cublasLtMatmulDescGetAttribute");
    const MatmulDesc* d = unwrap<const MatmulDesc>(matmulDesc, DESC_MAGIC);
    if (d == nullptr) { return invalid("the matmul descriptor is NULL or was not initialized"); }
    return desc_get(d, attr, buf, sizeInBytes, sizeWritten);
}

// ---- matrix layout

cublasStatus_t cublasLtMatrixLayoutInit_internal(cublasLtMatrixLayout_t matLayout, size_t size, cudaDataType type,
                                                 uint64_t rows, uint64_t cols, int64_t ld) {
    emu::ApiScope scope("cublasLtMatrixLayoutInit");
    if (matLayout == nullptr) { return invalid("cublasLtMatrixLayoutInit: matLayout is NULL"); }
    if (size < sizeof(Layout)) { return CUBLAS_STATUS_ALLOC_FAILED; }
    return init_layout(matLayout, type, rows, cols, ld);
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* matLayout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
    emu::ApiScope scope("cublasLtMatrixLayoutCreate");
    if (matLayout == nullptr) { return invalid("cublasLtMatrixLayoutCreate: matLayout is NULL"); }
    cublasLtMatrixLayout_t l = new cublasLtMatrixLayoutOpaque_t();
    if (cublasStatus_t s = init_layout(l, type, rows, cols, ld)) {
        delete l;
        return s;
    }
    *matLayout = l;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) {
    emu::ApiScope scope("cublasLtMatrixLayoutDestroy");
    if (matLayout != nullptr) { memset(matLayout->data, 0, sizeof matLayout->data); }
    delete matLayout;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout, cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t sizeInBytes) {
    emu::ApiScope scope("cublasLtMatrixLayoutSetAttribute");
    Layout* l = unwrap<Layout>(matLayout, LAYOUT_MAGIC);
    if (l == nullptr) { return invalid("the matrix layout is NULL or was not initialized"); }
    return layout_set(l, attr, buf, sizeInBytes);
}

cublasStatus_t cublasLtMatrixLayoutGetAttribute(cublasLtMatrixLayout_t matLayout, cublasLtMatrixLayoutAttribute_t attr,
                                                void* buf, size_t sizeInBytes, size_t* sizeWritten) {
    emu::ApiScope scope("cublasLtMatrixLayoutGetAttribute");
    const Layout* l = unwrap<const Layout>(matLayout, LAYOUT_MAGIC);
    if (l == nullptr) { return invalid("the matrix layout is NULL or was not initialized"); }
    return layout_get(l, attr, buf, sizeInBytes, sizeWritten);
}

// ---- matmul preference

cublasStatus_t cublasLtMatmulPreferenceInit_internal(cublasLtMatmulPreference_t pref, size_t size) {
    emu::ApiScope scope("cublasLtMatmulPreferenceInit");
    if (pref == nullptr) { return invalid("cublasLtMatmulPreferenceInit: pref is NULL"); }
    if (size < sizeof(Pref)) { return CUBLAS_STATUS_ALLOC_FAILED; }
    init_pref(pref);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
    emu::ApiScope scope("cublasLtMatmulPreferenceCreate");
    if (pref == nullptr) { return invalid("cublasLtMatmulPreferenceCreate: pref is NULL"); }
    *pref = new cublasLtMatmulPreferenceOpaque_t();
    init_pref(*pref);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
    emu::ApiScope scope("cublasLtMatmulPreferenceDestroy");
    if (pref != nullptr) { memset(pref->data, 0, sizeof pref->data); }
    delete pref;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t sizeInBytes) {
    emu::ApiScope scope("cublasLtMatmulPreferenceSetAttribute");
    Pref* p = unwrap<Pref>(pref, PREF_MAGIC);
    if (p == nullptr) { return invalid("the matmul preference is NULL or was not initialized"); }
    return pref_set(p, attr, buf, sizeInBytes);
}

cublasStatus_t cublasLtMatmulPreferenceGetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, void* buf,
                                                    size_t sizeInBytes, size_t* sizeWritten) {
    emu::ApiScope scope("cublasLtMatmulPreferenceGetAttribute");
    const Pref* p = unwrap<const Pref>(pref, PREF_MAGIC);
    if (p == nullptr) { return invalid("the matmul preference is NULL or was not initialized"); }
    return pref_get(p, attr, buf, sizeInBytes, sizeWritten);
}

// ---- the heuristic: one algorithm for every supported problem, no workspace

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc,
                                              cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                              cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                              cublasLtMatmulPreference_t preference, int requestedAlgoCount,
                                              cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                              int* returnAlgoCount) {
    emu::ApiScope scope("cublasLtMatmulAlgoGetHeuristic");
    if (!handle_ok(lightHandle)) { return CUBLAS_STATUS_NOT_INITIALIZED; }
    if (requestedAlgoCount <= 0) { return invalid("requestedAlgoCount %d is not positive", requestedAlgoCount); }
    if (heuristicResultsArray == nullptr || returnAlgoCount == nullptr) {
        return invalid("heuristicResultsArray or returnAlgoCount is NULL");
    }
    const Pref* pref = unwrap<const Pref>(preference, PREF_MAGIC);
    if (pref == nullptr) { return invalid("the matmul preference is NULL or was not initialized"); }
    Problem p;
    if (cublasStatus_t s = make_problem(operationDesc, Adesc, Bdesc, Cdesc, Ddesc, &p)) { return s; }
    uint32_t align[6];
    for (int i = 0; i < 4; i++) { align[i] = promise_of(pref->min_align[i]); }
    // the docs: the heuristic reads the bias and aux pointers' values to learn their alignment
    align[4] = alignment_of(unwrap<const MatmulDesc>(operationDesc, DESC_MAGIC)->bias);
    align[5] = alignment_of(unwrap<const MatmulDesc>(operationDesc, DESC_MAGIC)->aux);
    cublasLtMatmulHeuristicResult_t& r = heuristicResultsArray[0];
    memset(&r, 0, sizeof r);
    r.algo = make_algo(align);
    r.workspaceSize = 0;
    r.state = CUBLAS_STATUS_SUCCESS;
    r.wavesCount = 1.0f;
    *returnAlgoCount = 1;
    return CUBLAS_STATUS_SUCCESS;
}

// ---- the product

cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void* alpha,
                              const void* A, cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc,
                              const void* beta, const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo, void* workspace,
                              size_t workspaceSizeInBytes, cudaStream_t stream) {
    emu::ApiScope scope("cublasLtMatmul");
    (void)workspace;  // our algorithms need none (workspaceSize 0), so it is never touched
    (void)workspaceSizeInBytes;
    if (!handle_ok(lightHandle)) { return CUBLAS_STATUS_NOT_INITIALIZED; }
    Problem p;
    if (cublasStatus_t s = make_problem(computeDesc, Adesc, Bdesc, Cdesc, Ddesc, &p)) { return s; }
    Job job = {};
    if (cublasStatus_t s = read_scalars(alpha, beta, &job.alpha, &job.beta)) { return s; }
    const MatmulDesc* desc = unwrap<const MatmulDesc>(computeDesc, DESC_MAGIC);
    const void* bias = p.bias || p.bgradb ? desc->bias : nullptr;
    void* aux = p.aux ? desc->aux : nullptr;
    if ((p.bias || p.bgradb) && bias == nullptr) {
        return invalid("epilogue %s needs CUBLASLT_MATMUL_DESC_BIAS_POINTER", epilogue_name(desc->epilogue));
    }
    if (p.aux && aux == nullptr) {
        return invalid("epilogue %s needs CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER", epilogue_name(desc->epilogue));
    }
    if (cublasStatus_t s = check_in_place(p, C, D)) { return s; }
    const bool reads_c = job.beta != 0.0f;
    const void* const ptrs[6] = {A, B, C, D, bias, aux};
    uint32_t align[6];
    if (cublasStatus_t s = algo_promises(algo, ptrs, align, &job.k_chunks)) { return s; }
    if (cublasStatus_t s = check_pointers(p, ptrs, align, reads_c)) { return s; }
    if (p.m == 0 || p.n == 0) { return CUBLAS_STATUS_SUCCESS; }  // D is empty: nothing to read or write

    check_memory(A, p.a, "A");
    check_memory(B, p.b, "B");
    if (reads_c) { check_memory(C, p.c, "C"); }
    check_memory(D, p.d, "D");
    if (p.bias) { emu::check_device_range(bias, (size_t)p.m * type_size(p.type), "cublasLtMatmul", "the bias vector"); }
    if (p.bgradb) { emu::check_device_range(bias, (size_t)p.n * type_size(p.type), "cublasLtMatmul", "the bias gradient vector"); }
    if (p.aux) { check_memory(aux, p.aux_layout, "aux"); }

    job.m = p.m, job.n = p.n, job.k = p.k;
    job.trans_a = p.trans_a, job.trans_b = p.trans_b;
    job.type = p.type;
    job.a = A, job.lda = p.a.ld;
    job.b = B, job.ldb = p.b.ld;
    job.c = reads_c ? C : nullptr, job.ldc = p.c.ld;
    job.d = D, job.ldd = p.d.ld;
    job.bias = p.bias ? bias : nullptr;
    job.bgrad = p.bgradb ? const_cast<void*>(bias) : nullptr;
    job.gelu = p.gelu;
    job.aux = aux, job.aux_ld = p.aux_layout.ld;
    char what[160];
    describe(job, what, sizeof what);
    emu::OpDetails details; // for the stream-order check: the caller's line, what it reads and writes
    details.source.pc = __builtin_return_address(0);
    matrix_ranges(&details.ranges, A, p.a, false);
    matrix_ranges(&details.ranges, B, p.b, false);
    if (reads_c) { matrix_ranges(&details.ranges, C, p.c, false); }
    if (p.bias) { details.ranges.push_back(emu::OpRange{bias, (size_t)p.m * type_size(p.type), false}); }
    if (p.bgradb) { details.ranges.push_back(emu::OpRange{bias, (size_t)p.n * type_size(p.type), true}); }
    if (p.aux) { matrix_ranges(&details.ranges, aux, p.aux_layout, p.gelu == GELU_FWD); } // written forward, read by DGELU
    matrix_ranges(&details.ranges, D, p.d, true);
    std::string who = what;
    const void* caller = __builtin_return_address(0);
    cudaError_t e = emu::enqueue(stream, what, [job, p, who, caller]() {
        operand_read(job.a, p.a, "A", who.c_str(), caller);
        operand_read(job.b, p.b, "B", who.c_str(), caller);
        operand_read(job.c, p.c, "C", who.c_str(), caller);
        if (job.bias != nullptr) {
            emu::device_bytes_read(job.bias, (size_t)p.m * type_size(p.type), (who + " reading the bias vector").c_str(),
                                   caller);
        }
        if (job.aux != nullptr && job.gelu == GELU_BWD) { operand_read(job.aux, p.aux_layout, "aux", who.c_str(), caller); }
        if (job.type == CUDA_R_16BF) {
            run_product<__nv_bfloat16>(job);
            if (job.bgrad != nullptr) { run_bgradb<__nv_bfloat16>(job); }
        } else {
            run_product<float>(job);
            if (job.bgrad != nullptr) { run_bgradb<float>(job); }
        }
        if (job.bgrad != nullptr && emu::check_settings().initcheck) { emu::device_bytes_written(job.bgrad, (size_t)job.n * type_size(job.type)); }
        operand_written(job.d, p.d);
        if (job.aux != nullptr && job.gelu == GELU_FWD) { operand_written(job.aux, p.aux_layout); }
        return true;
    }, std::move(details));
    if (e != cudaSuccess) {
        emu::warn("cuBLASLt: cublasLtMatmul could not be queued on stream %p (cudaError %d)", (void*)stream, (int)e);
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    return CUBLAS_STATUS_SUCCESS;
}
