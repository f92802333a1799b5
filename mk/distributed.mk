# Multi-GPU and multi-node: llmc/process_group.h, llmc/distributed.cuh, llmc/zero.h, scripts/run_*.sh.
#   simulated, several processes under mpirun with the fake NCCL (dev/cudasim/fake_nccl.h); part of `make test`:
#     train_gpt_sim_dist, train_gpt_sim_dist_fp32    the trainer built with mpicxx -DCUDASIM -DUSE_NCCL -DUSE_MPI
#     make test-distributed-sim    dev/cuda/test_distributed_sim.sh: N = 1..4 vs one process, ZeRO 0/1, fp32/bf16,
#                                  resume 4 -> 2 -> 1 ranks, rendezvous by file and tcp, a killed rank
#     make test-process-group      dev/test_process_group.c: rendezvous, timeouts, watchdog, shards, re-sharding
#     make test-nvcc-dist          make train_gpt (fat sm_80 + sm_90, the real nccl.h and mpi.h), fp32 and no-MPI builds
#     make test-dist-probe         dev/cuda/test_dist_probe.sh: the probe finds NCCL in a pip wheel's layout
#                                  (toolkit without NCCL), in NCCL_HOME, in the toolkit; says why when none (~40 s)
#   real GPUs: make train_gpt links NCCL (-DUSE_NCCL) and MPI (-DUSE_MPI) when a test link succeeds
#   (scripts/dist_probe.sh says which NCCL, from NCCL_HOME, the toolkit or $(PYTHON)'s site-packages, or
#   what is missing), else builds the single-GPU trainer.
DIST_SIM_CXXFLAGS = $(SIM_FAST_CXXFLAGS) -DUSE_NCCL -DUSE_MPI
# evaluated only when a recipe uses them (the probe runs nvcc)
DIST_NVCC_FLAGS = $(shell PYTHON="$(PYTHON)" bash scripts/dist_probe.sh "$(NVCC)" "$(MPICXX)" flags)
DIST_LDLIBS = $(shell PYTHON="$(PYTHON)" bash scripts/dist_probe.sh "$(NVCC)" "$(MPICXX)" libs)
DIST_HEADERS := llmc/process_group.h llmc/zero.h llmc/distributed.cuh

train_gpt_sim_dist: train_gpt.cu $(GPU_HEADERS) $(DIST_HEADERS)
	@command -v $(MPICXX) >/dev/null || { echo "$@: $(MPICXX) not found: install Open MPI (apt-get install openmpi-bin libopenmpi-dev)"; exit 1; }
	$(MPICXX) $(DIST_SIM_CXXFLAGS) -x c++ $< -x none $(SIM_LDLIBS) -o $@
train_gpt_sim_dist_fp32: train_gpt.cu $(GPU_HEADERS) $(DIST_HEADERS)
	@command -v $(MPICXX) >/dev/null || { echo "$@: $(MPICXX) not found: install Open MPI (apt-get install openmpi-bin libopenmpi-dev)"; exit 1; }
	$(MPICXX) $(DIST_SIM_CXXFLAGS) -DPRECISION_FP32 -x c++ $< -x none $(SIM_LDLIBS) -o $@
build/dist/test_process_group: dev/test_process_group.c dev/testlib.h $(DIST_HEADERS) llmc/checkpoint.h llmc/fileio.h
	@mkdir -p build/dist
	$(CC) $(CFLAGS) -o $@ $< $(LDLIBS)

ALL_TARGETS += train_gpt_sim_dist train_gpt_sim_dist_fp32 build/dist/test_process_group

test-distributed-sim: train_gpt_sim_dist train_gpt_sim_dist_fp32 train_gpt_sim train_gpt_sim_fp32
	@MPIRUN="$(MPIRUN)" MPIRUN_FLAGS="$(MPIRUN_FLAGS)" bash dev/cuda/test_distributed_sim.sh
test-process-group: build/dist/test_process_group
	./build/dist/test_process_group
test-nvcc-dist:
	@bash dev/cuda/test_nvcc_dist.sh "$(NVCC)" "$(MPICXX)" "$(NVCC_TEST_FLAGS)"
test-dist-probe:
	@PYTHON="$(PYTHON)" bash dev/cuda/test_dist_probe.sh "$(NVCC)" "$(MPICXX)"

TEST_TARGETS += test-distributed-sim test-process-group test-nvcc-dist test-dist-probe
SIM_TEST_TARGETS += test-distributed-sim

.PHONY: test-distributed-sim test-process-group test-nvcc-dist test-dist-probe

# on a GPU machine: the 1-rank NCCL path's throughput vs the plain path (must keep >= 98%)
dist-overhead: train_gpt
	@TRAINER=./train_gpt bash scripts/dist_overhead.sh
.PHONY: dist-overhead
