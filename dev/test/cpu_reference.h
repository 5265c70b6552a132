/*
The CPU trainer's kernels, for host programs compiled by nvcc (C++): the CUDA kernels' per-element
math (__host__ __device__ functions in the llmc .cuh headers) is tested on the host against these.
train_gpt2.c is C: the two words redefined below are all C++ needs to compile it (TESTING leaves out its main).
*/
#ifndef DEV_TEST_CPU_REFERENCE_H
#define DEV_TEST_CPU_REFERENCE_H
#define TESTING
#define restrict __restrict__
#define _Thread_local thread_local
#include "../../train_gpt2.c"
#undef restrict
#undef _Thread_local
#endif
