# The GPU trainer's reliability and run header (train_gpt.cu's main loop), tested on the simulated
# trainer with the CPU trainer's own end-to-end scripts (each takes the trainer as an argument):
#   make test-reliability-gpu-sim   dev/test_reliability.sh ./train_gpt_sim 4 30: SIGTERM/SIGUSR1/SIGINT/SIGHUP (exit 75,
#                                   checkpoint, bit-identical resume), a stopped validation, corrupted checkpoints
#                                   skipped, out of space (exit 74, --on-save-error continue), divergence (exit 65):
#                                   the CPU trainer's checks, with 4 micro-steps per step in the signal runs instead
#                                   of 20 (a signal still lands inside a step), a validation of 30 batches instead
#                                   of 3000 (still ~2 s) and one simulator thread (two OpenMP threads spin at each of the
#                                   simulator's barriers: with other work on the 2 cores a step took 14x as long
#                                   as with one thread). ~15 s alone, under a minute with other work running
#   make test-kill-gpu-sim          dev/test_kill.sh ./train_gpt_sim: repeated SIGKILLs, bit-identical final state
#   make test-reliability-dist-sim  dev/cuda/test_reliability_dist.sh: 2 ranks under mpirun, SIGTERM to one rank
# The trainers carry the git revision (mk/version.mk) for the run header.
train_gpt_sim train_gpt_sim_fp32 train_gpt_sim_dist train_gpt_sim_dist_fp32: SIM_FAST_CXXFLAGS += $(VERSION_DEFINE)
train_gpt_sim train_gpt_sim_fp32 train_gpt_sim_dist train_gpt_sim_dist_fp32: build/git_revision
train_gpt: NVCC_FLAGS += $(VERSION_DEFINE)
train_gpt: build/git_revision

test-reliability-gpu-sim: train_gpt_sim
	@PYTHON=$(PYTHON) CUDASIM_THREADS=1 OMP_NUM_THREADS=1 bash dev/test_reliability.sh ./train_gpt_sim 4 30
test-kill-gpu-sim: train_gpt_sim
	@PYTHON=$(PYTHON) bash dev/test_kill.sh ./train_gpt_sim
test-reliability-dist-sim: train_gpt_sim_dist
	@PYTHON=$(PYTHON) MPIRUN="$(MPIRUN)" MPIRUN_FLAGS="$(MPIRUN_FLAGS)" bash dev/cuda/test_reliability_dist.sh ./train_gpt_sim_dist

TEST_TARGETS += test-reliability-gpu-sim test-kill-gpu-sim test-reliability-dist-sim
SIM_TEST_TARGETS += test-reliability-gpu-sim test-kill-gpu-sim test-reliability-dist-sim
.PHONY: test-reliability-gpu-sim test-kill-gpu-sim test-reliability-dist-sim
