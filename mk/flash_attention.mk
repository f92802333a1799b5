# Flash attention (llmc/flash_attention.cuh): tests in the simulator, nvcc build checks, GPU benchmark.
#   make sim-test-flash-attention    forward, lse, backward (atomic + deterministic), fp32 path vs llmc/cpu_ops.h,
#                                    ASan+UBSan simulator build (hs 8..128, T up to 257)
#   make sim-test-flash-attention-large   hs = 256 (T = 130, 300) and T = 600, optimised simulator build
#   make test-nvcc-flash-attention   the test and the benchmark compile with nvcc for sm_80 and sm_90, no warnings
#   make bench-flash-attention       GPU only: builds the benchmark for the present GPU and runs it
FLASH_ATTENTION_DEPS := llmc/flash_attention.cuh llmc/cuda_utils.cuh llmc/cpu_ops.h $(CUDASIM_HEADERS)
BENCH_ARCH ?= native

build/cudasim/test_flash_attention: dev/cuda/test_flash_attention.cu $(FLASH_ATTENTION_DEPS)
	@mkdir -p build/cudasim
	$(CXX) $(SIM_CXXFLAGS) -x c++ $< -x none $(SIM_LDLIBS) -o $@

build/cudasim/test_flash_attention_fast: dev/cuda/test_flash_attention.cu $(FLASH_ATTENTION_DEPS)
	@mkdir -p build/cudasim
	$(CXX) $(SIM_FAST_CXXFLAGS) -x c++ $< -x none $(SIM_LDLIBS) -o $@

build/bench_flash_attention: dev/cuda/bench_flash_attention.cu $(FLASH_ATTENTION_DEPS) llmc/cublas_common.cuh
	$(NVCC) -O3 -std=c++17 -arch=$(BENCH_ARCH) -I. $< -lcublas -lcublasLt -o $@

ALL_TARGETS += build/cudasim/test_flash_attention build/cudasim/test_flash_attention_fast

sim-test-flash-attention: build/cudasim/test_flash_attention
	$(SIM_RUN_ENV) ./build/cudasim/test_flash_attention

sim-test-flash-attention-large: build/cudasim/test_flash_attention_fast
	./build/cudasim/test_flash_attention_fast --large

test-nvcc-flash-attention:
	@bash dev/cudasim/tests/nvcc_build.sh "$(NVCC)" "$(NVCC_TEST_FLAGS) -Xcompiler -fopenmp" dev/cuda/test_flash_attention.cu dev/cuda/bench_flash_attention.cu

bench-flash-attention: build/bench_flash_attention
	./build/bench_flash_attention

SIM_TEST_TARGETS += sim-test-flash-attention sim-test-flash-attention-large
TEST_TARGETS += sim-test-flash-attention sim-test-flash-attention-large test-nvcc-flash-attention

.PHONY: sim-test-flash-attention sim-test-flash-attention-large test-nvcc-flash-attention bench-flash-attention
