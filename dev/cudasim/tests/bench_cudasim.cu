/*
 * dev/cudasim/tests/bench_cudasim.cu — simulated throughput of a 256-thread block reduction:
 *   thread-barriers/s: a shared-memory tree reduction, 9 __syncthreads per thread per block;
 *   thread-shuffles/s: a warp-shuffle reduction, 5 __shfl_down_sync per thread per block.
 * One OS thread (CUDASIM_THREADS=1) so the figure is per core. `make bench-sim` runs this file built
 * with the asm context switch and with -DCUDASIM_UCONTEXT (glibc swapcontext), the baseline.
 */
#include "llmc/cuda_common.cuh"
#include <time.h>

/* out[block] = sum of the block's 256 inputs; thread t owns buf[t] */
__global__ void smem_reduce_kernel(float* out, const float* in) {
    __shared__ float buf[256];
    unsigned t = threadIdx.x;
    buf[t] = in[blockIdx.x * 256 + t];
    __syncthreads();
    for (unsigned s = 128; s > 0; s /= 2) {
        if (t < s) buf[t] += buf[t + s];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = buf[0];
}

/* out[block * 8 + warp] = sum of the warp's 32 inputs, by a shuffle-down tree */
__global__ void shuffle_reduce_kernel(float* out, const float* in) {
    float v = in[blockIdx.x * 256 + threadIdx.x];
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
    if (threadIdx.x % 32 == 0) out[blockIdx.x * 8 + threadIdx.x / 32] = v;
}

static double seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(void) {
    const int blocks = 2000;
    float *in, *out;
    cudaCheck(cudaMalloc(&in, blocks * 256 * sizeof(float)));
    cudaCheck(cudaMalloc(&out, blocks * 8 * sizeof(float)));
    for (int i = 0; i < blocks * 256; i++) in[i] = (float)(i % 3);
    setenv("CUDASIM_THREADS", "1", 1);
    launch_kernel(smem_reduce_kernel, 1, 256, 0, 0, out, in); /* warm-up: fiber stacks mapped */
    double t0 = seconds();
    launch_kernel(smem_reduce_kernel, blocks, 256, 0, 0, out, in);
    double t1 = seconds();
    launch_kernel(shuffle_reduce_kernel, blocks, 256, 0, 0, out, in);
    double t2 = seconds();
    double barriers = (double)blocks * 256 * 9, shuffles = (double)blocks * 256 * 5;
    printf("context switch: %s\n",
#ifdef CUDASIM_ASM_SWITCH
           "x86-64 asm"
#else
           "glibc swapcontext (baseline)"
#endif
    );
    printf("  thread-barriers/s: %.2f M  (%d blocks x 256 threads x 9 __syncthreads in %.3f s)\n", barriers / (t1 - t0) / 1e6, blocks, t1 - t0);
    printf("  thread-shuffles/s: %.2f M  (%d blocks x 256 threads x 5 __shfl_down_sync in %.3f s)\n", shuffles / (t2 - t1) / 1e6, blocks, t2 - t1);
    cudaCheck(cudaFree(in));
    cudaCheck(cudaFree(out));
    return 0;
}
