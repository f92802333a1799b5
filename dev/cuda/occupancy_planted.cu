/*
 * dev/cuda/occupancy_planted.cu — kernels that break dev/cuda/check_occupancy.py's limits on sm_90, one limit each;
 * test_nvcc_gpu.sh compiles them and expects the check to name every one. Not part of any program.
 */

/* 5 blocks of 48 KiB of static shared memory (and 1 KiB reserved each): 250880 bytes, more than an SM's 233472 */
__global__ void __launch_bounds__(256, 5) planted_smem_kernel(float* out) {
    __shared__ float tile[12288];
    tile[threadIdx.x] = out[threadIdx.x];
    __syncthreads();
    out[threadIdx.x] = tile[threadIdx.x * 7 % 12288];
}

/* 3 blocks of 1024 threads: more than the 2048 an SM runs; ptxas ignores the minimum and allocates registers for one
 * block, more than 3 blocks hold */
__global__ void __launch_bounds__(1024, 3) planted_threads_kernel(float* out, int n) {
    float acc[24];
    for (int k = 0; k < 24; k++) acc[k] = out[threadIdx.x + k * n];
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 24; k++) acc[k] = acc[k] * acc[(k + 1) % 24] + 1.0f;
    float s = 0.0f;
    for (int k = 0; k < 24; k++) s += acc[k];
    out[threadIdx.x] = s;
}

/* 2 blocks an SM and dynamic shared memory, whose size the check's table does not state */
__global__ void __launch_bounds__(128, 2) planted_dynamic_kernel(float* out) {
    extern __shared__ float dyn[];
    dyn[threadIdx.x] = out[threadIdx.x];
    __syncthreads();
    out[threadIdx.x] = dyn[127 - threadIdx.x];
}
