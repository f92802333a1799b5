# What a user of the GPU trainer sees (train_gpt.cu's main loop), on the simulated trainer:
#   make test-ux-gpu-sim   dev/cuda/test_ux_gpu.py: metrics.jsonl (header record: git revision, memory plan,
#                          bf16, world size; step records = step lines; tokens), --early-stop at lr 0 with DIR/best,
#                          --profile 2's per-op table summing to the step times, on 1 and 2 ranks (~10 s)
# --profile N times each op with CUDA events; NVTX ranges name layers, the classifier, the update and the
# communication for Nsight Systems (dev/cudasim/fake_nvtx.h in the simulator).
test-ux-gpu-sim: train_gpt_sim train_gpt_sim_dist
	@MPIRUN="$(MPIRUN)" MPIRUN_FLAGS="$(MPIRUN_FLAGS)" $(PYTHON) dev/cuda/test_ux_gpu.py

TEST_TARGETS += test-ux-gpu-sim
SIM_TEST_TARGETS += test-ux-gpu-sim
.PHONY: test-ux-gpu-sim
