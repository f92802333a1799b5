# Stream modes of the CUDA simulator (CUDASIM_STREAMS=sync|deferred|deferred:others-first|deferred:shuffle:SEED;
# dev/cudasim/cudasim_runtime.h): work queued per stream and run as late as CUDA allows, so that a missing
# cudaStreamWaitEvent or host synchronisation, which synchronous streams hide, reads stale data.
#   make sim-test-streams   planted stream-ordering bugs caught in a deferred order (dev/cudasim/tests/test_streams.cu),
#                           then the kernel tests and the bf16 and fp32 model tests on the awkward reference state
#                           (b: T=37, C=96, V=300) under deferred and deferred:others-first; the multi-process runs
#                           under the deferred orders are in test-distributed-sim
STREAM_TEST_STATE := build/references/b_L2_H3_C96_T37_V300

ALL_TARGETS += build/cudasim/test_streams

sim-test-streams: build/cudasim/test_streams build/gpu/test_kernels test_gpt_sim test_gpt_sim_fp32 build/references/.stamp
	$(SIM_RUN_ENV) ./build/cudasim/test_streams ./build/gpu/test_kernels "./test_gpt_sim $(STREAM_TEST_STATE) 0" \
		"./test_gpt_sim_fp32 $(STREAM_TEST_STATE) 1"

SIM_TEST_TARGETS += sim-test-streams
TEST_TARGETS += sim-test-streams

.PHONY: sim-test-streams
