# The GPU trainer: train_gpt.cu, test_gpt.cu, llmc/*.cuh kernels, dev/cuda/ kernel tests.
#   simulated (CUDA simulator, no GPU needed; part of `make test`):
#     train_gpt_sim, test_gpt_sim (bf16)   train_gpt_sim_fp32, test_gpt_sim_fp32 (PRECISION=FP32)
#     make test-gpt-sim-fp32 / test-gpt-sim   test_gpt on every reference state (+ recompute 1, 2 runs)
#     make test-trainer-gpu-sim               20 steps vs train_gpt_cpu, exact resume, determinism, bad input
#     make sim-test-kernels                   every kernel vs llmc/cpu_ops.h (ASan + UBSan build), fp32
#     make sim-test-kernels-bf16              the same test in bf16 (floatX = bf16, 16-byte packs of 8)
#     make sim-test-benchmarks                the GPU benchmarks (kernels, flash attention) at a small shape, ASan build:
#                                             every call inside its buffers before a GPU session runs them
#     make test-nvcc-gpu                      nvcc builds train_gpt and test_gpt for sm_80 and sm_90, no warnings; the
#                                             trainer's kernels without spills, within the occupancy they state
#     make sass-stats [SASS_PATTERN=flash]    static SASS per kernel (sm_90): instructions, HMMA, MUFU, spills, loop
#     make test-cublas-probe                  scripts/cublas_probe.sh finds cuBLAS in CUBLAS_HOME, the toolkit or a pip wheel
#     make test-sass-issue                    flash attention's key loops (head dims 64, 128; sm_90 SASS of
#                                             dev/cuda/test_flash_attention.cu) within dev/cuda/sass_issue_limits.txt's
#                                             instructions per HMMA
#     make test-nvcc-cuda12                   every GPU program compiles and links against CUDA 12.1's headers and
#                                             libraries (NVIDIA's pip wheels, fetched by make cuda12-wheels)
#   on a machine with an NVIDIA GPU (nvcc builds; not part of `make`):
#     make train_gpt test_gpt [PRECISION=FP32] [GPU_ARCH="90"]   fat binaries for sm_80 and sm_90 by default
#     make build/gpu/test_gpt_fp32            test_gpt in fp32 whatever PRECISION says (gpucheck runs both)
#     make bench-kernels                      per-kernel time and GB/s or TFLOP/s
#     make gpucheck                           scripts/gpucheck.sh: build for the GPU present, tests, d12 benchmark
#                                             (make device-check, mk/device.mk: the same plus more, for a device session)
#   NVCC_WERROR= drops -Werror (CI keeps warnings as errors; a GPU machine's other host compiler need not)
GPU_ARCH ?= 80 90
PRECISION ?= BF16
NVCC_WERROR ?= -Werror all-warnings
NVCC_FLAGS ?= -O3 -std=c++17 $(NVCC_WERROR) -Xcompiler -Wall,-Wno-unused-function -I.
# machine code for each GPU_ARCH, and PTX of the last one (list them oldest first), which the driver compiles for a
# later GPU that has no SASS of its own
NVCC_GENCODE = $(foreach a,$(GPU_ARCH),-gencode arch=compute_$(a),code=sm_$(a)) \
               -gencode arch=compute_$(lastword $(GPU_ARCH)),code=compute_$(lastword $(GPU_ARCH))
NVCC_PRECISION = $(if $(filter FP32,$(PRECISION)),-DPRECISION_FP32,)
# cuBLAS and cuBLASLt where scripts/cublas_probe.sh finds them (CUBLAS_HOME, the toolkit, or a pip wheel under
# $(PYTHON)'s sys.path): its -I (nvcc compiles and links in one command, so the libraries' words reach the compile)
# and link options, with a run path outside the default paths. Expanded only in a recipe that uses it (the probe
# runs nvcc); without cuBLAS the build stops after the probe's one line saying where it looked.
GPU_LDLIBS ?= $(shell PYTHON="$(PYTHON)" bash scripts/cublas_probe.sh "$(NVCC)" flags) $(or $(shell PYTHON="$(PYTHON)" bash scripts/cublas_probe.sh "$(NVCC)" libs 2>/dev/null),$(error no cuBLAS for $(NVCC): see the line above))

train_gpt_sim: train_gpt.cu $(GPU_HEADERS)
	$(CXX) $(SIM_FAST_CXXFLAGS) -x c++ $< -x none $(SIM_LDLIBS) -o $@
train_gpt_sim_fp32: train_gpt.cu $(GPU_HEADERS)
	$(CXX) $(SIM_FAST_CXXFLAGS) -DPRECISION_FP32 -x c++ $< -x none $(SIM_LDLIBS) -o $@
test_gpt_sim: test_gpt.cu train_gpt.cu $(GPU_HEADERS)
	$(CXX) $(SIM_FAST_CXXFLAGS) -x c++ $< -x none $(SIM_LDLIBS) -o $@
test_gpt_sim_fp32: test_gpt.cu train_gpt.cu $(GPU_HEADERS)
	$(CXX) $(SIM_FAST_CXXFLAGS) -DPRECISION_FP32 -x c++ $< -x none $(SIM_LDLIBS) -o $@
build/gpu/test_kernels: dev/cuda/test_kernels.cu $(GPU_HEADERS)
	@mkdir -p build/gpu
	$(CXX) $(SIM_CXXFLAGS) -DPRECISION_FP32 -x c++ $< -x none $(SIM_LDLIBS) -o $@
build/gpu/test_kernels_bf16: dev/cuda/test_kernels.cu $(GPU_HEADERS)
	@mkdir -p build/gpu
	$(CXX) $(SIM_CXXFLAGS) -x c++ $< -x none $(SIM_LDLIBS) -o $@

ALL_TARGETS += train_gpt_sim train_gpt_sim_fp32 test_gpt_sim test_gpt_sim_fp32 build/gpu/test_kernels build/gpu/test_kernels_bf16

# nvcc builds, explicit only (this machine may have no nvcc or no GPU). Flags go to gpu_build.sh as
# separate, unquoted words so that the shell parses quoted defines (-DGIT_REVISION='"..."') once.
# DIST_NVCC_FLAGS / DIST_LDLIBS (mk/distributed.mk): NCCL and MPI when they link, else empty (one GPU)
train_gpt: train_gpt.cu $(GPU_HEADERS)
	@bash scripts/gpu_build.sh "$(NVCC)" $< $@ $(NVCC_FLAGS) $(NVCC_PRECISION) $(NVCC_GENCODE) $(DIST_NVCC_FLAGS) -- $(GPU_LDLIBS) $(DIST_LDLIBS)
test_gpt: test_gpt.cu train_gpt.cu $(GPU_HEADERS)
	@bash scripts/gpu_build.sh "$(NVCC)" $< $@ $(NVCC_FLAGS) $(NVCC_PRECISION) $(NVCC_GENCODE) -- $(GPU_LDLIBS)
build/gpu/test_gpt_fp32: test_gpt.cu train_gpt.cu $(GPU_HEADERS)
	@mkdir -p build/gpu
	@bash scripts/gpu_build.sh "$(NVCC)" $< $@ $(NVCC_FLAGS) -DPRECISION_FP32 $(NVCC_GENCODE) -- $(GPU_LDLIBS)
build/gpu/bench_kernels: dev/cuda/bench_kernels.cu dev/cuda/lab.cuh $(GPU_HEADERS)
	@mkdir -p build/gpu
	@bash scripts/gpu_build.sh "$(NVCC)" $< $@ $(NVCC_FLAGS) $(NVCC_GENCODE) -- $(GPU_LDLIBS)

test-gpt-sim-fp32: test_gpt_sim_fp32 build/references/.stamp
	@bash dev/cuda/test_gpt_sim.sh ./test_gpt_sim_fp32 build/references c_L1_H1_C32_T16_V129:2
test-gpt-sim: test_gpt_sim build/references/.stamp
	@bash dev/cuda/test_gpt_sim.sh ./test_gpt_sim build/references a_L2_H4_C64_T32_V512:2 c_L1_H1_C32_T16_V129:1
test-trainer-gpu-sim: train_gpt_sim train_gpt_sim_fp32 train_gpt_cpu
	@bash dev/cuda/test_trainer_gpu.sh
sim-test-kernels: build/gpu/test_kernels
	$(SIM_RUN_ENV) ./build/gpu/test_kernels
sim-test-kernels-bf16: build/gpu/test_kernels_bf16
	$(SIM_RUN_ENV) ./build/gpu/test_kernels_bf16
# compile-only, both precisions, sm_80 and sm_90, warnings as errors (the CI machine has nvcc, no GPU)
test-nvcc-gpu:
	@bash dev/cuda/test_nvcc_gpu.sh "$(NVCC)" "$(NVCC_TEST_FLAGS)"
test-cublas-probe:
	@PYTHON="$(PYTHON)" bash dev/cuda/test_cublas_probe.sh "$(NVCC)"

CUDA12_DIR ?= build/cuda12
cuda12-wheels:
	@bash dev/cuda/test_cuda12.sh fetch $(CUDA12_DIR)
test-nvcc-cuda12:
	@bash dev/cuda/test_cuda12.sh "$(NVCC)" "$(NVCC_TEST_FLAGS)" $(CUDA12_DIR)

sass-stats:
	@$(PYTHON) dev/cuda/sass_stats.py '$(SASS_PATTERN)'
test-sass-issue:
	@NVCC="$(NVCC)" $(PYTHON) dev/cuda/sass_stats.py --source dev/cuda/test_flash_attention.cu --limits dev/cuda/sass_issue_limits.txt
TEST_TARGETS += test-sass-issue
.PHONY: test-sass-issue

bench-kernels: build/gpu/bench_kernels
	./build/gpu/bench_kernels

# the GPU benchmarks' smoke run in the simulator (ASan; a small shape, one repeat): every call inside its buffers
build/cudasim/bench_kernels: dev/cuda/bench_kernels.cu dev/cuda/lab.cuh $(GPU_HEADERS)
	@mkdir -p build/cudasim
	$(CXX) $(SIM_CXXFLAGS) -x c++ $< -x none $(SIM_LDLIBS) -o $@
build/cudasim/bench_flash_attention: dev/cuda/bench_flash_attention.cu dev/cuda/lab.cuh $(GPU_HEADERS)
	@mkdir -p build/cudasim
	$(CXX) $(SIM_CXXFLAGS) -x c++ $< -x none $(SIM_LDLIBS) -o $@
sim-test-benchmarks: build/cudasim/bench_kernels build/cudasim/bench_flash_attention
	@bash dev/cuda/sim_benchmarks.sh ./build/cudasim/bench_kernels ./build/cudasim/bench_flash_attention
gpucheck:
	@NVCC="$(NVCC)" PYTHON="$(PYTHON)" MPICXX="$(MPICXX)" bash scripts/gpucheck.sh

ALL_TARGETS += build/cudasim/bench_kernels build/cudasim/bench_flash_attention
SIM_TEST_TARGETS += test-gpt-sim-fp32 test-gpt-sim test-trainer-gpu-sim sim-test-kernels sim-test-kernels-bf16 sim-test-benchmarks
TEST_TARGETS += test-gpt-sim-fp32 test-gpt-sim test-trainer-gpu-sim sim-test-kernels sim-test-kernels-bf16 sim-test-benchmarks test-nvcc-gpu test-nvcc-cuda12 test-cublas-probe

.PHONY: test-gpt-sim-fp32 test-gpt-sim test-trainer-gpu-sim sim-test-kernels sim-test-kernels-bf16 sim-test-benchmarks test-nvcc-gpu test-cublas-probe cuda12-wheels test-nvcc-cuda12 sass-stats bench-kernels gpucheck
