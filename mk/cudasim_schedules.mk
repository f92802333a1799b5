# Schedule modes of the CUDA simulator (CUDASIM_SCHEDULE=fifo|reverse|shuffle[:seed], CUDASIM_CP_ASYNC=deferred;
# dev/cudasim/cudasim.h): ordering bugs FIFO order hides (a missing barrier, a read of cp.async data before its
# wait) must show.
#   make sim-test-schedules   planted races caught under reverse/shuffle but not fifo, deferred cp.async semantics,
#                             then the kernel tests below under reverse, shuffle:1 and shuffle:2 with deferred cp.async
#                             (flash attention's -O2 build without sanitizers, a fifth of the time: an order's wrong
#                             result shows there; its memory errors are the ASan builds' in sim-test-flash-attention,
#                             races whatever the order sim-test-races')
SCHEDULE_TEST_PROGRAMS := build/cudasim/test_flash_attention_fast build/gpu/test_kernels

ALL_TARGETS += build/cudasim/test_schedules

sim-test-schedules: build/cudasim/test_schedules $(SCHEDULE_TEST_PROGRAMS)
	$(SIM_RUN_ENV) ./build/cudasim/test_schedules $(SCHEDULE_TEST_PROGRAMS)

SIM_TEST_TARGETS += sim-test-schedules
TEST_TARGETS += sim-test-schedules

.PHONY: sim-test-schedules
