# The GPU trainer's reliability and run header (train_gpt.cu's main loop), tested on the simulated
# trainer with the CPU trainer's own end-to-end scripts (each takes the trainer as an argument):
#   make test-reliability-gpu-sim   dev/test_reliability.sh ./train_gpt_sim: SIGTERM/SIGUSR1/SIGINT (exit 75, checkpoint,
#                                   bit-identical resume), corrupted checkpoints skipped, out of space (exit 74,
#                                   --on-save-error continue), divergence (exit 65)
#   make test-kill-gpu-sim          dev/test_kill.sh ./train_gpt_sim: repeated SIGKILLs, bit-identical final state
#   make test-reliability-dist-sim  dev/cuda/test_reliability_dist.sh: 2 ranks under mpirun, SIGTERM to one rank
# The trainers carry the git revision (mk/version.mk) for the run header.
train_gpt_sim train_gpt_sim_fp32 train_gpt_sim_dist train_gpt_sim_dist_fp32: SIM_FAST_CXXFLAGS += $(VERSION_DEFINE)
train_gpt_sim train_gpt_sim_fp32 train_gpt_sim_dist train_gpt_sim_dist_fp32: build/git_revision
train_gpt: NVCC_FLAGS += $(VERSION_DEFINE)
train_gpt: build/git_revision

test-reliability-gpu-sim: train_gpt_sim
	@PYTHON=$(PYTHON) bash dev/test_reliability.sh ./train_gpt_sim
test-kill-gpu-sim: train_gpt_sim
	@PYTHON=$(PYTHON) bash dev/test_kill.sh ./train_gpt_sim
test-reliability-dist-sim: train_gpt_sim_dist
	@PYTHON=$(PYTHON) MPIRUN="$(MPIRUN)" MPIRUN_FLAGS="$(MPIRUN_FLAGS)" bash dev/cuda/test_reliability_dist.sh ./train_gpt_sim_dist

# test-reliability-gpu-sim takes ~8 minutes on the shared 2-core machine (its signal runs are long for the
# simulator), so it runs on demand; SIGTERM on the simulated trainer is covered in make test by the 2-rank test
TEST_TARGETS += test-kill-gpu-sim test-reliability-dist-sim
SIM_TEST_TARGETS += test-kill-gpu-sim test-reliability-dist-sim
.PHONY: test-reliability-gpu-sim test-kill-gpu-sim test-reliability-dist-sim
