# CUDA simulator core (dev/cudasim, llmc/cuda_common.cuh, llmc/mma.cuh).
# Simulated binaries compile .cu sources as C++ with -DCUDASIM against dev/cudasim/cudasim.h.
#   SIM_CXXFLAGS       checked build: AddressSanitizer + UBSan (what the sim tests use)
#   SIM_FAST_CXXFLAGS  optimised build without sanitizers (benchmarks, long simulations)
#   SIM_TEST_TARGETS   every simulated test target; `make test-sim` runs them all
SIM_CXXFLAGS ?= -O1 -g -std=c++17 -Wall -Wextra -Wno-unused-parameter -I. -DCUDASIM -fopenmp \
                -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
SIM_FAST_CXXFLAGS ?= -O2 -g -std=c++17 -Wall -Wextra -Wno-unused-parameter -I. -DCUDASIM -fopenmp
SIM_LDLIBS ?= -lm -lpthread
# ASan: no leak check (kernels' test processes exit from fibers on purpose); UBSan: stop at the first report
SIM_RUN_ENV ?= ASAN_OPTIONS=detect_leaks=0:abort_on_error=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
NVCC_TEST_FLAGS ?= -std=c++17 -Werror all-warnings -Xcompiler -Wall,-Wno-unused-function -I.

CUDASIM_HEADERS := $(wildcard dev/cudasim/*.h) llmc/cuda_common.cuh llmc/mma.cuh dev/cudasim/tests/sim_test_util.h
CUDASIM_TESTS := test_cudasim test_mma

build/cudasim/%: dev/cudasim/tests/%.cu $(CUDASIM_HEADERS)
	@mkdir -p build/cudasim
	$(CXX) $(SIM_CXXFLAGS) -x c++ $< -x none $(SIM_LDLIBS) -o $@

build/cudasim/bench_cudasim: dev/cudasim/tests/bench_cudasim.cu $(CUDASIM_HEADERS)
	@mkdir -p build/cudasim
	$(CXX) $(SIM_FAST_CXXFLAGS) -x c++ $< -x none $(SIM_LDLIBS) -o $@
build/cudasim/bench_cudasim_ucontext: dev/cudasim/tests/bench_cudasim.cu $(CUDASIM_HEADERS)
	@mkdir -p build/cudasim
	$(CXX) $(SIM_FAST_CXXFLAGS) -DCUDASIM_UCONTEXT -x c++ $< -x none $(SIM_LDLIBS) -o $@

ALL_TARGETS += $(addprefix build/cudasim/,$(CUDASIM_TESTS))

sim-test-cudasim: build/cudasim/test_cudasim
	$(SIM_RUN_ENV) ./build/cudasim/test_cudasim
sim-test-mma: build/cudasim/test_mma
	$(SIM_RUN_ENV) ./build/cudasim/test_mma

# nvcc compiles the same kernel sources for sm_80 and sm_90 with warnings as errors
test-nvcc-build:
	@bash dev/cudasim/tests/nvcc_build.sh "$(NVCC)" "$(NVCC_TEST_FLAGS)" dev/cudasim/tests/test_cudasim.cu dev/cudasim/tests/test_mma.cu

bench-sim: build/cudasim/bench_cudasim build/cudasim/bench_cudasim_ucontext
	./build/cudasim/bench_cudasim_ucontext
	./build/cudasim/bench_cudasim

SIM_TEST_TARGETS += sim-test-cudasim sim-test-mma
TEST_TARGETS += sim-test-cudasim sim-test-mma test-nvcc-build

test-sim:
	@bash dev/run_tests.sh $(SIM_TEST_TARGETS)

.PHONY: test-sim bench-sim sim-test-cudasim sim-test-mma test-nvcc-build
