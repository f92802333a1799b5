# (named to sort after flash_attention.mk and gpu.mk: the rules below use their header lists)
# The CUDA simulator's race check: the simulator built with ThreadSanitizer (-fsanitize=thread), each simulated
# thread and each stream's work a TSan fiber, ordered only by what CUDA guarantees (barriers, stream order, event
# waits, host synchronisation; dev/cudasim/cudasim_exec.h, cudasim_race.h). Unlike the schedule and deferred-stream
# modes it does not depend on the order the threads or streams happen to run in.
#   make sim-test-races   planted races reported and their fixed kernels not (dev/cudasim/tests/test_races.cu:
#                         shared and global memory, warps, cp.async, streams; again with deferred streams, where
#                         work runs late and out of order); then, on 3 OS threads with cp.async copies landing at
#                         their wait (CUDASIM_CP_ASYNC=deferred: a read that a barrier orders after the issue but
#                         not after the wait shows): the flash-attention kernels (--race: one shape per kernel
#                         instance, TSan is slow), every other kernel (dev/cuda/test_kernels.cu), the bf16 model
#                         test (test_gpt.cu: every kernel of a training step; 2 of its 10 AdamW steps, twice) on the
#                         smallest reference state, and the data-parallel trainer on 2 ranks with ZeRO-1
#                         (dev/cuda/race_dist.sh: the communication stream against the compute stream)
SIM_TSAN_CXXFLAGS ?= -O1 -g -std=c++17 -Wall -Wextra -Wno-unused-parameter -I. -DCUDASIM -fopenmp -fsanitize=thread
# halt at the first report with a known status; OpenMP's own regions in the tests run on one thread (TSan cannot
# see libgomp's synchronisation); the simulator spreads blocks over 3 OS threads
SIM_TSAN_RUN_ENV ?= TSAN_OPTIONS=halt_on_error=1:exitcode=66:history_size=4:atexit_sleep_ms=0 OMP_NUM_THREADS=1 CUDASIM_THREADS=3
RACE_STATE := build/references/c_L1_H1_C32_T16_V129

build/racecheck/test_races: dev/cudasim/tests/test_races.cu $(CUDASIM_HEADERS)
	@mkdir -p build/racecheck
	$(CXX) $(SIM_TSAN_CXXFLAGS) -x c++ $< -x none $(SIM_LDLIBS) -o $@
build/racecheck/test_flash_attention: dev/cuda/test_flash_attention.cu $(FLASH_ATTENTION_DEPS)
	@mkdir -p build/racecheck
	$(CXX) $(SIM_TSAN_CXXFLAGS) -x c++ $< -x none $(SIM_LDLIBS) -o $@
build/racecheck/test_kernels: dev/cuda/test_kernels.cu $(GPU_HEADERS)
	@mkdir -p build/racecheck
	$(CXX) $(SIM_TSAN_CXXFLAGS) -DPRECISION_FP32 -x c++ $< -x none $(SIM_LDLIBS) -o $@
build/racecheck/test_gpt_sim: test_gpt.cu train_gpt.cu $(GPU_HEADERS)
	@mkdir -p build/racecheck
	$(CXX) $(SIM_TSAN_CXXFLAGS) -x c++ $< -x none $(SIM_LDLIBS) -o $@
build/racecheck/train_gpt_sim_dist: train_gpt.cu $(GPU_HEADERS)
	@mkdir -p build/racecheck
	$(MPICXX) $(SIM_TSAN_CXXFLAGS) -DUSE_NCCL -DUSE_MPI -x c++ $< -x none $(SIM_LDLIBS) -o $@

RACE_PROGRAMS := build/racecheck/test_races build/racecheck/test_flash_attention build/racecheck/test_kernels \
                 build/racecheck/test_gpt_sim build/racecheck/train_gpt_sim_dist
ALL_TARGETS += $(RACE_PROGRAMS)

sim-test-races: $(RACE_PROGRAMS) build/references/.stamp
	$(SIM_TSAN_RUN_ENV) ./build/racecheck/test_races "CUDASIM_STREAMS=deferred:others-first ./build/racecheck/test_races" \
		"CUDASIM_CP_ASYNC=deferred ./build/racecheck/test_flash_attention --race" \
		./build/racecheck/test_kernels "CUDASIM_CP_ASYNC=deferred ./build/racecheck/test_gpt_sim $(RACE_STATE) 0 2" \
		"MPIRUN='$(MPIRUN)' MPIRUN_FLAGS='$(MPIRUN_FLAGS)' bash dev/cuda/race_dist.sh build/racecheck/train_gpt_sim_dist"

SIM_TEST_TARGETS += sim-test-races
TEST_TARGETS += sim-test-races

.PHONY: sim-test-races
