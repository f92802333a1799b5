# Flash attention (llmc/flash_attention.cuh): tests in the simulator, nvcc build checks, GPU benchmark.
#   make sim-test-flash-attention    forward, lse, backward (atomic + deterministic), fp32 path vs llmc/cpu_ops.h,
#                                    ASan+UBSan simulator build (hs 8..128, T up to 257)
#   make sim-test-flash-attention-large   hs = 256 (T = 130, 300), 136, 200, 248 (T = 70) and T = 600, optimised simulator build
#   make test-nvcc-flash-attention   the test (front ends only: its kernels are the trainer's) and the benchmark
#                                    compile with nvcc for sm_80 and sm_90, no warnings
#   make bench-flash-attention       GPU only: builds the benchmark for the present GPU and runs it
#   make ptxas-flash-attention       registers, stack frame and spill bytes of every kernel (nvcc -Xptxas -v, sm_80, sm_90)
FLASH_ATTENTION_DEPS := llmc/flash_attention.cuh llmc/mma.cuh llmc/cuda_utils.cuh llmc/cpu_ops.h dev/cuda/lab.cuh $(CUDASIM_HEADERS)
BENCH_ARCH ?= native

build/cudasim/test_flash_attention: dev/cuda/test_flash_attention.cu $(FLASH_ATTENTION_DEPS)
	@mkdir -p build/cudasim
	$(CXX) $(SIM_CXXFLAGS) -x c++ $< -x none $(SIM_LDLIBS) -o $@

build/cudasim/test_flash_attention_fast: dev/cuda/test_flash_attention.cu $(FLASH_ATTENTION_DEPS)
	@mkdir -p build/cudasim
	$(CXX) $(SIM_FAST_CXXFLAGS) -x c++ $< -x none $(SIM_LDLIBS) -o $@

build/bench_flash_attention: dev/cuda/bench_flash_attention.cu $(FLASH_ATTENTION_DEPS) llmc/cublas_common.cuh
	@mkdir -p build
	@bash scripts/gpu_build.sh "$(NVCC)" $< $@ -O3 -std=c++17 -arch=$(BENCH_ARCH) -I. -- $(GPU_LDLIBS)

ALL_TARGETS += build/cudasim/test_flash_attention build/cudasim/test_flash_attention_fast

sim-test-flash-attention: build/cudasim/test_flash_attention
	$(SIM_RUN_ENV) ./build/cudasim/test_flash_attention

sim-test-flash-attention-large: build/cudasim/test_flash_attention_fast
	./build/cudasim/test_flash_attention_fast --large

test-nvcc-flash-attention:
	@bash dev/cudasim/tests/nvcc_build.sh "$(NVCC)" "$(NVCC_TEST_FLAGS) -Xcompiler -fopenmp" front:dev/cuda/test_flash_attention.cu dev/cuda/bench_flash_attention.cu

bench-flash-attention: build/bench_flash_attention
	./build/bench_flash_attention

ptxas-flash-attention:
	@for arch in sm_80 sm_90; do \
	    log=$$($(NVCC) $(NVCC_TEST_FLAGS) -Xcompiler -fopenmp -arch=$$arch -Xptxas -v -c dev/cuda/test_flash_attention.cu -o /dev/null 2>&1) || \
	        { echo "$$log"; echo "error: nvcc -arch=$$arch dev/cuda/test_flash_attention.cu failed"; exit 1; }; \
	    echo "$$log" | c++filt | awk -v arch=$$arch '/Function properties for/ { name = $$0; sub(/.*Function properties for (void )?/, "", name); sub(/\(.*/, "", name) } \
	        /stack frame/ { stack = $$1; st = $$5; ld = $$9 } \
	        /Used [0-9]+ registers/ { for (i = 1; i <= NF; i++) if ($$i == "Used") r = $$(i + 1); \
	            printf "%s  %-52s regs %3d  stack %5d  spill stores %5d  loads %5d\n", arch, name, r, stack, st, ld }'; \
	done

SIM_TEST_TARGETS += sim-test-flash-attention sim-test-flash-attention-large
TEST_TARGETS += sim-test-flash-attention sim-test-flash-attention-large test-nvcc-flash-attention

.PHONY: sim-test-flash-attention sim-test-flash-attention-large test-nvcc-flash-attention bench-flash-attention ptxas-flash-attention
