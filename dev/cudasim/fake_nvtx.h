/*
 * dev/cudasim/fake_nvtx.h — no-op NVTX ranges for the CUDA simulator.
 *
 * nvcc builds include the CUDA toolkit's header-only <nvtx3/nvToolsExt.h>, whose ranges name regions of
 * the timeline in Nsight Systems; the simulator has no profiler to report to, so the same calls (same
 * names and return types as NVTX 3: the nesting level, or a negative value on error) do nothing here.
 * No state.
 */
#ifndef DEV_CUDASIM_FAKE_NVTX_H
#define DEV_CUDASIM_FAKE_NVTX_H

static inline int nvtxRangePushA(const char* message) {
    (void)message;
    return 0;
}

static inline int nvtxRangePop(void) { return 0; }

#endif
