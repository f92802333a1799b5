# A GPU machine lent for a short session (one command, a few minutes; nothing has run on a GPU before it):
#   make device-check    scripts/device_check.sh: preflight (a cuBLASLt + NCCL program, dev/cuda/preflight.cu),
#                        memcheck on a small test_gpt, test_gpt on every reference state, d12 B=64 T=1024 training
#                        in both attention-backward modes with --profile, PyTorch's baselines and our benchmarks,
#                        the 1-rank NCCL overhead, initcheck and racecheck; every step under a timeout
#                        (DEVICE_CHECK_BUDGET, default 360 s in all); the summary so far and the steps' logs in
#                        $$OUT (default build/device_check) after every step; tables for doc/gpu_notes.md and
#                        "N passed, M failed, K skipped" come last.
#   Passes NVCC, PYTHON and MPICXX through; PYTHON: gpucheck.sh's choice (a torch that sees the GPU first).
#   make test-device-check   the same script on this machine, with the simulator's builds and a fake nvidia-smi
#                        and compute-sanitizer: the order, SKIP for the budget, failures counted, a kill mid-way
device-check:
	@NVCC="$(NVCC)" PYTHON="$(PYTHON)" MPICXX="$(MPICXX)" bash scripts/device_check.sh

build/gpu/preflight: dev/cuda/preflight.cu $(GPU_HEADERS)
	@mkdir -p build/gpu
	@bash scripts/gpu_build.sh "$(NVCC)" $< $@ $(NVCC_FLAGS) $(NVCC_PRECISION) $(NVCC_GENCODE) $(DIST_NVCC_FLAGS) -- $(GPU_LDLIBS) $(DIST_LDLIBS)
# the simulator's build uses the fake NCCL, which is written over MPI: mpicxx
build/cudasim/preflight: dev/cuda/preflight.cu $(GPU_HEADERS)
	@mkdir -p build/cudasim
	$(MPICXX) $(SIM_FAST_CXXFLAGS) -DUSE_NCCL -x c++ $< -x none $(SIM_LDLIBS) -o $@

test-device-check: build/cudasim/preflight train_gpt_sim test_gpt_sim test_gpt_sim_fp32 sample_gpt_sim \
                   build/cudasim/bench_kernels build/cudasim/bench_flash_attention build/references/.stamp
	@NVCC="$(NVCC)" PYTHON="$(PYTHON)" bash dev/test_device_check.sh

ALL_TARGETS += build/cudasim/preflight
TEST_TARGETS += test-device-check

.PHONY: device-check test-device-check
