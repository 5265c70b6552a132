// The 16-byte kernels alone, for dev/test/test_ptx_16byte.sh: compiled to PTX and through ptxas,
// without the trainer, so the check takes seconds.
#include "../../llmc/gelu.cuh"
#include "../../llmc/layernorm.cuh"
#include "../../llmc/encoder.cuh"
#include "../../llmc/matmul.cuh"
#include "../../llmc/fused_classifier.cuh"
#include "../../llmc/adamw.cuh"
// AdamW (16-byte master, m and v, four elements a thread; also checked for its stack frame): both
// gradient types the trainer launches
template __global__ void adamw_kernel<floatX>(floatX*, float*, const floatX*, float*, float*, size_t, unsigned int,
                                              AdamWTensors, float, float, float, float, float, float, float, float, int);
#ifdef ENABLE_BF16 // (in the fp32 build floatX is float: one kernel)
template __global__ void adamw_kernel<float>(floatX*, float*, const float*, float*, float*, size_t, unsigned int,
                                             AdamWTensors, float, float, float, float, float, float, float, float, int);
#endif
#include "../../llmc/attention.cuh"
