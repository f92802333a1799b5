# Stream modes of the CUDA simulator (CUDASIM_STREAMS=sync|deferred|deferred:others-first|deferred:shuffle:SEED;
# dev/cudasim/cudasim_runtime.h): work queued per stream and run as late as CUDA allows, so that a missing
# cudaStreamWaitEvent or host synchronisation, which synchronous streams hide, reads stale data.
#   make sim-test-streams   planted stream-ordering bugs caught in a deferred order (dev/cudasim/tests/test_streams.cu),
#                           then, under deferred and deferred:others-first: the kernel tests, the bf16 and fp32 model
#                           tests on the awkward reference state (b: T=37, C=96, V=300), the trainer's test (20 steps
#                           against the CPU trainer, exact resume) and the sampler's; the multi-process runs under the
#                           deferred orders are in test-distributed-sim
STREAM_TEST_STATE := build/references/b_L2_H3_C96_T37_V300

ALL_TARGETS += build/cudasim/test_streams

sim-test-streams: build/cudasim/test_streams build/gpu/test_kernels test_gpt_sim test_gpt_sim_fp32 build/references/.stamp \
		train_gpt_sim train_gpt_sim_fp32 train_gpt_cpu sample_gpt_sim sample_gpt_sim_fp32 sample_gpt_cpu
	$(SIM_RUN_ENV) ./build/cudasim/test_streams ./build/gpu/test_kernels "./test_gpt_sim $(STREAM_TEST_STATE) 0" \
		"./test_gpt_sim_fp32 $(STREAM_TEST_STATE) 1" "bash dev/cuda/test_trainer_gpu.sh" \
		"PYTHON=$(PYTHON) bash dev/cuda/test_sample_gpu.sh"

SIM_TEST_TARGETS += sim-test-streams
TEST_TARGETS += sim-test-streams

.PHONY: sim-test-streams
