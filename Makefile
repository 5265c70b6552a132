# gpt2-zero build. `make` builds the trainers; `make test` prepares the data and the PyTorch
# reference files (once) and runs every test; `make check` runs a quick tier of them (minutes);
# `make demo` trains a small GPT-2 on tiny Shakespeare.
# Install the system packages first: dev/install_deps.sh (see README.md).

# OpenMPI's mpirun refuses root unless both are set: every target that runs mpirun (test, check,
# compare, and the scripts they call) runs with them
export OMPI_ALLOW_RUN_AS_ROOT = 1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM = 1

CC ?= gcc
# -fno-math-errno: sqrtf becomes one vector instruction (nothing here reads errno after math calls)
CFLAGS ?= -O3 -march=native
CFLAGS += -fopenmp -fno-math-errno -Wall -Wextra -Werror=implicit-function-declaration
LDLIBS = -lm
# Debian's python3-torch belongs to /usr/bin/python3, not to the python3 first on PATH
PYTHON ?= /usr/bin/python3
NODE ?= node

DATA_DIR = dev/data/tinyshakespeare
DATA = $(DATA_DIR)/tiny_shakespeare_train.bin $(DATA_DIR)/tiny_shakespeare_val.bin
HEADERS = $(wildcard llmc/*.h)

.PHONY: all cuda emu emu-test test check demo compare data fineweb hellaswag references clean

all: train_gpt2 test_gpt2 dev/test/test_zero_plan dev/test/test_mpi_comm dev/test/rendezvous_demo dev/bench/zero_plan_print cuda

# train_gpt2 runs the ZeRO stages under mpirun when built with MPI (OpenMPI's mpicc); without
# it, the same source builds the single-process trainer.
MPICC ?= $(shell command -v mpicc 2>/dev/null)
ifneq ($(MPICC),)
TRAIN_CC = $(MPICC)
TRAIN_FLAGS = -DUSE_MPI
else
TRAIN_CC = $(CC)
TRAIN_FLAGS =
$(info mpicc not found: building the single-process train_gpt2 (no -z over ranks); apt-get install libopenmpi-dev openmpi-bin)
endif

train_gpt2: train_gpt2.c $(HEADERS)
	$(TRAIN_CC) $(CFLAGS) $(TRAIN_FLAGS) $< -o $@ $(LDLIBS)

test_gpt2: test_gpt2.c train_gpt2.c dev/test/reference.h $(HEADERS)
	$(CC) $(CFLAGS) $< -o $@ $(LDLIBS)

dev/test/test_zero_plan: dev/test/test_zero_plan.c $(HEADERS)
	$(CC) $(CFLAGS) $< -o $@ $(LDLIBS)

# the CPU trainer's collectives (llmc/mpi_comm.h) under mpirun
dev/test/test_mpi_comm: dev/test/test_mpi_comm.c $(HEADERS)
	$(TRAIN_CC) $(CFLAGS) $(TRAIN_FLAGS) $< -o $@ $(LDLIBS)

# the rendezvous of ranks started without mpirun (fs, tcp), tested on the CPU
dev/test/rendezvous_demo: dev/test/rendezvous_demo.c $(HEADERS)
	$(CC) -O2 -Wall -Wextra -Werror $< -o $@

# a sampled sequence against the CPU trainer's model, one forward for the whole sequence (dev/test/test_sample.sh)
dev/test/sample_replay: dev/test/sample_replay.c train_gpt2.c $(HEADERS)
	$(CC) $(CFLAGS) -Wno-unused-function $< -o $@ $(LDLIBS)

dev/bench/zero_plan_print: dev/bench/zero_plan_print.c $(HEADERS)
	$(CC) $(CFLAGS) $< -o $@ $(LDLIBS)

# AddressSanitizer + UndefinedBehaviorSanitizer builds (single process, no MPI), for make test
SANITIZE = -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all -fopenmp -fno-math-errno -Wall -Wextra
train_gpt2_asan: train_gpt2.c $(HEADERS)
	$(CC) $(SANITIZE) $< -o $@ $(LDLIBS)

test_gpt2_asan: test_gpt2.c train_gpt2.c dev/test/reference.h $(HEADERS)
	$(CC) $(SANITIZE) $< -o $@ $(LDLIBS)

# --- CUDA: train_gpt2cu / test_gpt2cu in the chosen PRECISION, plus the fp32 pair for tight checks
# (train_gpt2fp32cu / test_gpt2fp32cu), and the host tests of the kernels' per-element math.
# Built for sm_80 and sm_90a (GPU_COMPUTE_CAPABILITY=90a builds one): 90a, not 90, so that H100/H200
# builds hold the Hopper attention forward (llmc/attention_sm90.cuh, wgmma/TMA: sm_90a only; the
# emulator's nvcc-cpu also compiles that path when it sees 90a). No nvcc: skipped, with a message.
NVCC ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
PRECISION ?= BF16
ifeq ($(filter $(PRECISION),BF16 FP32),)
$(error PRECISION must be BF16 or FP32, got '$(PRECISION)')
endif
GPU_COMPUTE_CAPABILITY ?= 80 90a
NVCC_ARCH = $(foreach cc,$(GPU_COMPUTE_CAPABILITY),-gencode arch=compute_$(cc),code=sm_$(cc))
# warnings are errors: CI cannot run CUDA code, so it must at least compile cleanly
# -fopenmp: host loops over elements (the optimizer update with -zo 1) use the CPU's threads
# -ffp-contract=off: host code never fuses a*b + c into an fma, so arithmetic shared with the
# device that the device writes with rounded intrinsics (llmc/fp_rn.cuh) gives the same bits here
# EXTRA_NVCC_FLAGS: more flags for every CUDA build, real or emulated (e.g. -DLAYERNORM_BWD_ROWS=8;
# dev/gpu_check.sh's `variants` part builds copies of the tree so)
EXTRA_NVCC_FLAGS ?=
NVCC_FLAGS = -O3 -std=c++17 -I. $(NVCC_ARCH) -Xcompiler -Wall,-Wextra,-Wno-unused-function,-fno-math-errno,-fopenmp,-ffp-contract=off --Werror all-warnings $(EXTRA_NVCC_FLAGS)
NVCC_LDLIBS = -lcublasLt -lcudart
# Several GPUs: NCCL, and MPI for mpirun starts when mpicc exists. NO_MULTI_GPU=1 builds
# one-process trainers without NCCL; NO_USE_MPI=1 leaves MPI out (ranks then start with
# -pn/-pr/-pi); MPI's C++ bindings stay out (they do not compile warning-free). Only
# train_gpt2cu/test_gpt2cu and their fp32 twins (and _emu builds) link them.
# NCCL is looked for in $(NCCL_HOME) (the CUDA toolkit by default), then in the
# nvidia-nccl-cu13/cu12 wheel of the first of $(NCCL_PYTHONS) that has one
# (site-packages/nvidia/nccl: include/nccl.h and lib/libnccl.so.2 only, hence -l:libnccl.so.2),
# then in $(NCCL_SYSTEM) (Debian's libnccl-dev: /usr/include, /usr/lib/<arch>-linux-gnu). A lib
# dir found outside the toolkit goes into the binary's rpath: it runs without LD_LIBRARY_PATH
# (the toolkit's lib dir is on the loader's path already: libcudart comes from there too).
NCCL_HOME ?= /usr/local/cuda
NCCL_PYTHONS ?= python3 /usr/bin/python3
NCCL_SYSTEM ?= /usr
comma := ,
ifeq ($(NO_MULTI_GPU),1)
TRAIN_CU_FLAGS = -DNO_MULTI_GPU
TRAIN_CU_LIBS =
$(info NO_MULTI_GPU=1: the CUDA trainers run one process (no NCCL))
else ifneq ($(wildcard $(NCCL_HOME)/include/nccl.h),)
TRAIN_CU_FLAGS = -I$(NCCL_HOME)/include
TRAIN_CU_LIBS = -L$(NCCL_HOME)/lib64 -L$(NCCL_HOME)/lib -lnccl
ifneq ($(NCCL_HOME),/usr/local/cuda)
TRAIN_CU_LIBS += $(foreach d,$(NCCL_HOME)/lib64 $(NCCL_HOME)/lib,$(if $(wildcard $(d)/libnccl.so*),-Xlinker -rpath$(comma)$(d)))
endif
else
# a missing python or module is just "not found" (the probe prints nothing)
NCCL_WHEEL := $(shell for p in $(NCCL_PYTHONS); do $$p -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null && break; done)
ifneq ($(and $(NCCL_WHEEL),$(wildcard $(NCCL_WHEEL)/include/nccl.h),$(wildcard $(NCCL_WHEEL)/lib/libnccl.so*)),)
NCCL_INC := $(NCCL_WHEEL)/include
NCCL_LIB := $(NCCL_WHEEL)/lib
else ifneq ($(wildcard $(NCCL_SYSTEM)/include/nccl.h),)
NCCL_INC := $(NCCL_SYSTEM)/include
NCCL_LIB := $(patsubst %/,%,$(dir $(firstword $(wildcard $(NCCL_SYSTEM)/lib/*-linux-gnu/libnccl.so* $(NCCL_SYSTEM)/lib64/libnccl.so* $(NCCL_SYSTEM)/lib/libnccl.so*))))
endif
ifneq ($(NCCL_LIB),)
TRAIN_CU_FLAGS = -I$(NCCL_INC)
# libnccl.so (a -dev package) or only the runtime's libnccl.so.2 (a wheel)
TRAIN_CU_LIBS = -L$(NCCL_LIB) $(if $(wildcard $(NCCL_LIB)/libnccl.so),-lnccl,-l:libnccl.so.2) -Xlinker -rpath$(comma)$(NCCL_LIB)
else
# stops only a build that links NCCL (the recipe expands it), not make data or train_gpt2
NCCL_MISSING = NCCL not found (looked for $(NCCL_HOME)/include/nccl.h; the nvidia-nccl wheel of $(NCCL_PYTHONS): site-packages/nvidia/nccl/include/nccl.h + lib/libnccl.so.2; $(NCCL_SYSTEM)/include/nccl.h + $(NCCL_SYSTEM)/lib/*-linux-gnu/libnccl.so*): pip install nvidia-nccl-cu13 (or -cu12), apt-get install libnccl-dev, or set NCCL_HOME; NO_MULTI_GPU=1 builds one-process trainers
TRAIN_CU_FLAGS = $(error $(NCCL_MISSING))
TRAIN_CU_LIBS =
endif
endif
ifneq ($(NO_USE_MPI),1)
ifneq ($(MPICC),)
TRAIN_CU_FLAGS += -DUSE_MPI -DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX $(shell $(MPICC) --showme:compile 2>/dev/null)
TRAIN_CU_LIBS += $(shell $(MPICC) --showme:link 2>/dev/null)
endif
endif
CUDA_HEADERS = $(HEADERS) $(wildcard llmc/*.cuh)
CUDA_HOST_TESTS = dev/test/test_attention_host dev/test/test_layers_host dev/test/test_update_host

ifneq ($(NVCC),)
cuda: train_gpt2cu test_gpt2cu train_gpt2fp32cu test_gpt2fp32cu dev/cuda/test_kernels dev/cuda/test_kernels_fp32 $(CUDA_HOST_TESTS)
else
cuda:
	@echo "nvcc not found (PATH or /usr/local/cuda/bin): skipping the CUDA targets"
endif

train_gpt2cu: train_gpt2.cu $(CUDA_HEADERS)
	$(NVCC) $(NVCC_FLAGS) $(TRAIN_CU_FLAGS) -DENABLE_$(PRECISION) $< -o $@ $(NVCC_LDLIBS) $(TRAIN_CU_LIBS)

test_gpt2cu: test_gpt2.cu train_gpt2.cu dev/test/reference.h $(CUDA_HEADERS)
	$(NVCC) $(NVCC_FLAGS) $(TRAIN_CU_FLAGS) -DENABLE_$(PRECISION) $< -o $@ $(NVCC_LDLIBS) $(TRAIN_CU_LIBS)

train_gpt2fp32cu: train_gpt2.cu $(CUDA_HEADERS)
	$(NVCC) $(NVCC_FLAGS) $(TRAIN_CU_FLAGS) -DENABLE_FP32 $< -o $@ $(NVCC_LDLIBS) $(TRAIN_CU_LIBS)

test_gpt2fp32cu: test_gpt2.cu train_gpt2.cu dev/test/reference.h $(CUDA_HEADERS)
	$(NVCC) $(NVCC_FLAGS) $(TRAIN_CU_FLAGS) -DENABLE_FP32 $< -o $@ $(NVCC_LDLIBS) $(TRAIN_CU_LIBS)

# every kernel against its CPU twin on the GPU (and --bench: times against their floors)
dev/cuda/test_kernels: dev/cuda/test_kernels.cu dev/test/cpu_reference.h train_gpt2.c $(CUDA_HEADERS)
	$(NVCC) $(NVCC_FLAGS) -Xcompiler -fopenmp -DENABLE_$(PRECISION) $< -o $@ $(NVCC_LDLIBS) -lm

dev/cuda/test_kernels_fp32: dev/cuda/test_kernels.cu dev/test/cpu_reference.h train_gpt2.c $(CUDA_HEADERS)
	$(NVCC) $(NVCC_FLAGS) -Xcompiler -fopenmp -DENABLE_FP32 $< -o $@ $(NVCC_LDLIBS) -lm

# host programs (no GPU): the kernels' __host__ __device__ math against train_gpt2.c's kernels.
# The headers' kernels compile too, for the trainers' GPUs (the bf16 attention needs sm_80's mma).
dev/test/test_%_host: dev/test/test_%_host.cu dev/test/cpu_reference.h train_gpt2.c $(CUDA_HEADERS)
	$(NVCC) -O2 -std=c++17 -I. $(NVCC_ARCH) -DENABLE_$(PRECISION) -Xcompiler -Wall,-Wextra,-Wno-unused-function,-fopenmp,-ffp-contract=off $< -o $@ -lm

# --- the same CUDA sources on the CPU (dev/cuda/emu, README there): nvcc-cpu takes the nvcc
# command lines above and builds programs that run our kernels, cuBLASLt calls and NCCL
# collectives on the CPU with CUDA's semantics. `make emu`; the _asan ones add AddressSanitizer.
# Needs the CUDA toolkit's headers (for the types), not nvcc or a GPU.
EMU_NVCC = dev/cuda/emu/nvcc-cpu
EMU_SOURCES = $(EMU_NVCC) $(wildcard dev/cuda/emu/*.cpp dev/cuda/emu/*.h dev/cuda/emu/include/*.h dev/cuda/emu/include/*/*.h)
EMU_TARGETS = train_gpt2cu_emu test_gpt2cu_emu train_gpt2fp32cu_emu test_gpt2fp32cu_emu \
              dev/cuda/test_kernels_emu dev/cuda/test_kernels_fp32_emu test_gpt2fp32cu_emu_asan dev/cuda/test_kernels_fp32_emu_asan \
              $(EMU_CHECK_TARGETS) $(EMU_FMAD_TARGETS)
# The same programs with the access hooks that EMU_CHECK and EMU_COUNTERS need (nvcc-cpu --emu-check):
# the hooks slow a run even with every check off (dev/cuda/emu/README.md), so only the runs under
# EMU_CHECK use these (train_gpt2cu_emu_check: dev/test/test_emu_check.sh, in make test).
# dev/cuda/test_kernels_fp32_emu_check is built on request.
EMU_CHECK_TARGETS = test_gpt2cu_emu_check dev/cuda/test_kernels_emu_check train_gpt2cu_emu_check
EMU_FMAD_TARGETS = dev/cuda/test_kernels_fp32_emu_fmad train_gpt2cu_emu_fmad train_gpt2fp32cu_emu_fmad
# what make test runs of them: all but the plain test_gpt2cu_emu and test_gpt2fp32cu_emu, whose runs
# are those of their _check and _asan builds (two builds fewer, ~1 min of the 2-core CI machine)
EMU_TEST_TARGETS = $(filter-out test_gpt2cu_emu test_gpt2fp32cu_emu,$(EMU_TARGETS))
CUDA_INCLUDE ?= /usr/local/cuda/include
ifneq ($(wildcard $(CUDA_INCLUDE)/cuda_runtime.h),)
emu: $(EMU_TARGETS)
emu-test: $(EMU_TEST_TARGETS)
else
emu emu-test:
	@echo "CUDA headers not found in $(CUDA_INCLUDE): skipping the emulated CUDA targets"
endif

train_gpt2cu_emu: train_gpt2.cu $(CUDA_HEADERS) $(EMU_SOURCES)
	$(EMU_NVCC) $(NVCC_FLAGS) $(TRAIN_CU_FLAGS) -DENABLE_$(PRECISION) $< -o $@ $(NVCC_LDLIBS) $(TRAIN_CU_LIBS)

test_gpt2cu_emu: test_gpt2.cu train_gpt2.cu dev/test/reference.h $(CUDA_HEADERS) $(EMU_SOURCES)
	$(EMU_NVCC) $(NVCC_FLAGS) $(TRAIN_CU_FLAGS) -DENABLE_$(PRECISION) $< -o $@ $(NVCC_LDLIBS) $(TRAIN_CU_LIBS)

train_gpt2fp32cu_emu: train_gpt2.cu $(CUDA_HEADERS) $(EMU_SOURCES)
	$(EMU_NVCC) $(NVCC_FLAGS) $(TRAIN_CU_FLAGS) -DENABLE_FP32 $< -o $@ $(NVCC_LDLIBS) $(TRAIN_CU_LIBS)

test_gpt2fp32cu_emu: test_gpt2.cu train_gpt2.cu dev/test/reference.h $(CUDA_HEADERS) $(EMU_SOURCES)
	$(EMU_NVCC) $(NVCC_FLAGS) $(TRAIN_CU_FLAGS) -DENABLE_FP32 $< -o $@ $(NVCC_LDLIBS) $(TRAIN_CU_LIBS)

test_gpt2fp32cu_emu_asan: test_gpt2.cu train_gpt2.cu dev/test/reference.h $(CUDA_HEADERS) $(EMU_SOURCES)
	$(EMU_NVCC) --emu-asan $(NVCC_FLAGS) -DNO_MULTI_GPU -DENABLE_FP32 $< -o $@ $(NVCC_LDLIBS)

dev/cuda/test_kernels_emu: dev/cuda/test_kernels.cu dev/test/cpu_reference.h train_gpt2.c $(CUDA_HEADERS) $(EMU_SOURCES)
	$(EMU_NVCC) $(NVCC_FLAGS) -Xcompiler -fopenmp -DENABLE_$(PRECISION) $< -o $@ $(NVCC_LDLIBS) -lm

dev/cuda/test_kernels_fp32_emu: dev/cuda/test_kernels.cu dev/test/cpu_reference.h train_gpt2.c $(CUDA_HEADERS) $(EMU_SOURCES)
	$(EMU_NVCC) $(NVCC_FLAGS) -Xcompiler -fopenmp -DENABLE_FP32 $< -o $@ $(NVCC_LDLIBS) -lm

train_gpt2cu_emu_check: train_gpt2.cu $(CUDA_HEADERS) $(EMU_SOURCES)
	$(EMU_NVCC) --emu-check $(NVCC_FLAGS) $(TRAIN_CU_FLAGS) -DENABLE_$(PRECISION) $< -o $@ $(NVCC_LDLIBS) $(TRAIN_CU_LIBS)

test_gpt2cu_emu_check: test_gpt2.cu train_gpt2.cu dev/test/reference.h $(CUDA_HEADERS) $(EMU_SOURCES)
	$(EMU_NVCC) --emu-check $(NVCC_FLAGS) $(TRAIN_CU_FLAGS) -DENABLE_$(PRECISION) $< -o $@ $(NVCC_LDLIBS) $(TRAIN_CU_LIBS)

dev/cuda/test_kernels_emu_check: dev/cuda/test_kernels.cu dev/test/cpu_reference.h train_gpt2.c $(CUDA_HEADERS) $(EMU_SOURCES)
	$(EMU_NVCC) --emu-check $(NVCC_FLAGS) -Xcompiler -fopenmp -DENABLE_$(PRECISION) $< -o $@ $(NVCC_LDLIBS) -lm

dev/cuda/test_kernels_fp32_emu_check: dev/cuda/test_kernels.cu dev/test/cpu_reference.h train_gpt2.c $(CUDA_HEADERS) $(EMU_SOURCES)
	$(EMU_NVCC) --emu-check $(NVCC_FLAGS) -Xcompiler -fopenmp -DENABLE_FP32 $< -o $@ $(NVCC_LDLIBS) -lm

# Device code contracted into fma instructions as nvcc's default (--fmad=true) does; the rest of the
# emulated builds have no contraction (EMU_FMAD=0, dev/cuda/emu/README.md "Contraction"). For the
# claims of bits between host and device code (make test runs them under both): the AdamW kernel
# against the host's (-zo 1), and the offloaded trainer against stage 0.
dev/cuda/test_kernels_fp32_emu_fmad: dev/cuda/test_kernels.cu dev/test/cpu_reference.h train_gpt2.c $(CUDA_HEADERS) $(EMU_SOURCES)
	$(EMU_NVCC) --fmad=true $(NVCC_FLAGS) -Xcompiler -fopenmp -DENABLE_FP32 $< -o $@ $(NVCC_LDLIBS) -lm

train_gpt2cu_emu_fmad: train_gpt2.cu $(CUDA_HEADERS) $(EMU_SOURCES)
	$(EMU_NVCC) --fmad=true $(NVCC_FLAGS) $(TRAIN_CU_FLAGS) -DENABLE_$(PRECISION) $< -o $@ $(NVCC_LDLIBS) $(TRAIN_CU_LIBS)

train_gpt2fp32cu_emu_fmad: train_gpt2.cu $(CUDA_HEADERS) $(EMU_SOURCES)
	$(EMU_NVCC) --fmad=true $(NVCC_FLAGS) $(TRAIN_CU_FLAGS) -DENABLE_FP32 $< -o $@ $(NVCC_LDLIBS) $(TRAIN_CU_LIBS)

dev/cuda/test_kernels_fp32_emu_asan: dev/cuda/test_kernels.cu dev/test/cpu_reference.h train_gpt2.c $(CUDA_HEADERS) $(EMU_SOURCES)
	$(EMU_NVCC) --emu-asan $(NVCC_FLAGS) -Xcompiler -fopenmp -DENABLE_FP32 $< -o $@ $(NVCC_LDLIBS) -lm

# --- data: GPT-2 BPE through the npm package js-tiktoken (pinned in package-lock.json)
node_modules/js-tiktoken/package.json: package.json package-lock.json
	npm ci --no-audit --no-fund
	@touch $@

$(DATA) gpt2_tokenizer.bin &: dev/data/tinyshakespeare.js node_modules/js-tiktoken/package.json
	$(NODE) dev/data/tinyshakespeare.js

data: $(DATA) gpt2_tokenizer.bin

# FineWeb's sample-10BT as 100M-token shards (network, ~30 GB of parquet; not part of make test):
# FINEWEB_FLAGS="--edu" for FineWeb-Edu, "--local DIR" for parquet files already downloaded
fineweb: node_modules/js-tiktoken/package.json
	$(NODE) dev/data/fineweb.js $(FINEWEB_FLAGS)

# HellaSwag's validation set as llm.c's eval file, for the trainers' -h 1 (network, 11 MB of jsonl;
# not part of make test): HELLASWAG_FLAGS="--local FILE" for a hellaswag_val.jsonl already downloaded
hellaswag: node_modules/js-tiktoken/package.json
	$(NODE) dev/data/hellaswag.js $(HELLASWAG_FLAGS)

# --- the PyTorch reference: GPT-2 124M (d12) and a tiny config for multi-rank tests
gpt2_124M.bin gpt2_124M_bf16.bin gpt2_124M_debug_state.bin gpt2_124M_losses.bin &: train_gpt2.py $(DATA)
	$(PYTHON) train_gpt2.py --model d12

gpt2_tiny.bin gpt2_tiny_bf16.bin gpt2_tiny_debug_state.bin gpt2_tiny_losses.bin &: train_gpt2.py $(DATA)
	$(PYTHON) train_gpt2.py --model tiny

references: gpt2_124M.bin gpt2_tiny.bin

# make test builds its ~40 targets with one job per core (a second make, unless you gave -j
# yourself): on the 2-core CI machine that halves the ~15-minute build; the tests then run in order
NPROC := $(shell nproc 2>/dev/null || echo 1)
TEST_TARGETS = train_gpt2 test_gpt2 train_gpt2_asan test_gpt2_asan dev/test/sample_replay dev/test/test_zero_plan dev/test/test_mpi_comm dev/test/rendezvous_demo dev/bench/zero_plan_print cuda emu-test data references
test:
	@$(MAKE) --no-print-directory $(if $(findstring -j,$(MAKEFLAGS)),,-j$(NPROC)) $(TEST_TARGETS)
	bash dev/test/run_tests.sh

# the quick tier, for while you work (a few minutes once built): the tiny model against PyTorch,
# bad input, stage 3 = stage 0 on 2 ranks (CPU and emulated CUDA), one emulated kernel family.
# make test runs everything (before a merge; what CI runs).
CHECK_EMU = $(if $(wildcard $(CUDA_INCLUDE)/cuda_runtime.h),train_gpt2cu_emu dev/cuda/test_kernels_fp32_emu)
check: train_gpt2 test_gpt2 $(CHECK_EMU) data gpt2_tiny.bin
	bash dev/test/run_tests.sh check

# a 4-layer GPT-2 (16M parameters) from scratch, then a sample: 43 min measured once on a shared
# 2-core machine at load average 9-12 (dev/bench/README.md)
demo: train_gpt2 data
	OMP_NUM_THREADS=$$(nproc) ./train_gpt2 -e d4 -b 16 -t 64 -l 1e-3 -u 20 -q 0.1 -c 0.1 -x 300 -v 50 -s 100 -g 128 -o log_demo
	@echo "loss curve: log_demo/main.log; model: log_demo/model_00000300.bin"

# the ZeRO stages side by side (tiny model, 4 ranks), stage 3 at 1 and 2 blocks per unit, and one
# step of each stage drawn as a timeline: table, CSV and charts in log_compare/
compare: train_gpt2 dev/bench/zero_plan_print gpt2_tiny.bin
	$(PYTHON) dev/bench/compare_stages.py --unit-blocks 1,2 --timeline --out log_compare

# `make profile`: the performance model's PREDICTION of one training step of GPT-2 124M, kernel by
# kernel, before (PROFILE_BASELINE, main before issue 22's kernels) and after (this tree), then the
# ZeRO stages at N = 8 (dev/perf/README.md). PROFILE_DEVICE: h200 (the card measured on 2026-11-28,
# dev/perf/measured/), h100-sxm or a100-sxm-80gb; PROFILE_BATCH: B per GPU (T = 1024). The first
# run traces each tree on the emulator (~5-15 minutes per tree on 2 cores; cached in dev/perf/cache/).
# PROFILE_ATTENTION: mma (default: the default trainer, -ak 0) or sm90 (the trainer's -ak 1, the sm_90a
# attention kernels; wgmma's rate calibrated on cuDNN's kernel); PROFILE_FLAGS=--cuda-graph adds -cg 1.
PROFILE_DEVICE ?= h200
PROFILE_BATCH ?= 32
PROFILE_BASELINE ?= 2e0af91
PROFILE_ATTENTION ?= mma
PROFILE_FLAGS ?=
.PHONY: profile
profile: data
	$(PYTHON) dev/perf/perf_model.py --device $(PROFILE_DEVICE) --batch $(PROFILE_BATCH) --baseline $(PROFILE_BASELINE) --attention $(PROFILE_ATTENTION) $(PROFILE_FLAGS)

clean:
	rm -f train_gpt2 test_gpt2 train_gpt2_asan test_gpt2_asan dev/test/sample_replay dev/test/test_zero_plan dev/test/test_mpi_comm dev/test/rendezvous_demo dev/bench/zero_plan_print
	rm -f train_gpt2cu test_gpt2cu train_gpt2fp32cu test_gpt2fp32cu dev/cuda/test_kernels dev/cuda/test_kernels_fp32 $(CUDA_HOST_TESTS)
	rm -f $(EMU_TARGETS) train_gpt2cu_emu_check dev/cuda/test_kernels_fp32_emu_check
	rm -rf dev/cuda/emu/build
