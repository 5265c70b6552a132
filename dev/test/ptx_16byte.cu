// The 16-byte kernels alone, for dev/test/test_ptx_16byte.sh: compiled to PTX and through ptxas,
// without the trainer, so the check takes seconds.
#include "../../llmc/gelu.cuh"
#include "../../llmc/layernorm.cuh"
#include "../../llmc/encoder.cuh"
#include "../../llmc/matmul.cuh"
#include "../../llmc/fused_classifier.cuh"
#include "../../llmc/attention.cuh"
