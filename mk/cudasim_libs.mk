# The simulator's fake libraries: dev/cudasim/fake_cublaslt.h (cuBLAS/cuBLASLt) and
# dev/cudasim/fake_nccl.h (NCCL over MPI). Needs Open MPI (Debian: openmpi-bin libopenmpi-dev).
#   make sim-test-cublaslt-fake   the fake cuBLASLt/cuBLAS vs a naive double-precision matmul (ASan+UBSan build)
#   make sim-test-nccl-fake       the fake NCCL's collectives vs their definitions, mpirun -np 3
#                                 (also sub-communicators of 1 and 2 ranks)
#   make sim-test-nccl-fake-np4   the same with -np 4 (sub-communicators of 1 and 3 ranks)
#   make test-nvcc-libs           both test sources compile with nvcc against the real cublasLt.h / nccl.h
#   make bench-cublaslt-fake      the test without sanitizers; its benchmark line is then representative
MPICXX ?= mpicxx
MPIRUN ?= mpirun
# root in containers, 2 cores shared by the ranks
MPIRUN_FLAGS ?= --allow-run-as-root --oversubscribe
CUDASIM_LIBS_HEADERS := dev/cudasim/fake_cublaslt.h dev/cudasim/fake_nccl.h $(wildcard dev/cudasim/cudasim*.h)

build/cudasim/test_cublaslt_fake: dev/cudasim/tests/test_cublaslt_fake.cu $(CUDASIM_LIBS_HEADERS)
	@mkdir -p build/cudasim
	$(CXX) $(SIM_CXXFLAGS) -x c++ $< -x none $(SIM_LDLIBS) -o $@

build/cudasim/bench_cublaslt_fake: dev/cudasim/tests/test_cublaslt_fake.cu $(CUDASIM_LIBS_HEADERS)
	@mkdir -p build/cudasim
	$(CXX) $(SIM_FAST_CXXFLAGS) -x c++ $< -x none $(SIM_LDLIBS) -o $@

build/cudasim/test_nccl_fake: dev/cudasim/tests/test_nccl_fake.cu $(CUDASIM_LIBS_HEADERS)
	@mkdir -p build/cudasim
	@command -v $(MPICXX) >/dev/null || { echo "$@: $(MPICXX) not found: install Open MPI (apt-get install openmpi-bin libopenmpi-dev)"; exit 1; }
	$(MPICXX) $(SIM_CXXFLAGS) -x c++ $< -x none $(SIM_LDLIBS) -o $@

ALL_TARGETS += build/cudasim/test_cublaslt_fake build/cudasim/test_nccl_fake

sim-test-cublaslt-fake: build/cudasim/test_cublaslt_fake
	$(SIM_RUN_ENV) ./build/cudasim/test_cublaslt_fake

sim-test-nccl-fake: build/cudasim/test_nccl_fake
	$(SIM_RUN_ENV) $(MPIRUN) $(MPIRUN_FLAGS) -np 3 ./build/cudasim/test_nccl_fake

sim-test-nccl-fake-np4: build/cudasim/test_nccl_fake
	$(SIM_RUN_ENV) $(MPIRUN) $(MPIRUN_FLAGS) -np 4 ./build/cudasim/test_nccl_fake

bench-cublaslt-fake: build/cudasim/bench_cublaslt_fake
	./build/cudasim/bench_cublaslt_fake | grep -E '^benchmark|passed'

# compile-only: the tests' use of the API matches CUDA 13's real headers (names, types, enum values)
test-nvcc-libs:
	@p=0; f=0; \
	for src in dev/cudasim/tests/test_cublaslt_fake.cu dev/cudasim/tests/test_nccl_fake.cu; do \
	  if $(NVCC) -std=c++17 -x cu -c $$src -o /dev/null -I. $$($(MPICXX) --showme:compile 2>/dev/null); then \
	    echo "PASS nvcc compiles $$src against the real headers"; p=$$((p+1)); \
	  else echo "FAIL nvcc compiles $$src against the real headers"; f=$$((f+1)); fi; \
	done; echo "$$p passed, $$f failed"; [ $$f -eq 0 ]

SIM_TEST_TARGETS += sim-test-cublaslt-fake sim-test-nccl-fake sim-test-nccl-fake-np4
TEST_TARGETS += sim-test-cublaslt-fake sim-test-nccl-fake sim-test-nccl-fake-np4 test-nvcc-libs

.PHONY: sim-test-cublaslt-fake sim-test-nccl-fake sim-test-nccl-fake-np4 bench-cublaslt-fake test-nvcc-libs
