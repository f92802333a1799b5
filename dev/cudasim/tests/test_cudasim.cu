/*
 * dev/cudasim/tests/test_cudasim.cu — tests of the CUDA simulator core (dev/cudasim/cudasim.h).
 * Built with g++ -x c++ -DCUDASIM and AddressSanitizer/UBSan. Every expected value is computed on the
 * host from the definition (CUDA Programming Guide wording for shuffles, double-precision sums, an exact
 * rounding reference for bf16), never from the simulator itself. Failure modes run in child processes.
 */
#include "llmc/cuda_common.cuh"
#include "dev/cudasim/tests/sim_test_util.h"

#include <math.h>
#include <vector>

__host__ __device__ static uint32_t hash32(uint32_t x) {
    x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
    return x;
}

/* ---------------------------------------------------------------------------------------------------
 * barriers order shared memory: out[block] = sum of the block's inputs, by a tree reduction through
 * shared memory (thread t adds t+s for s = 1, 2, 4, ...; works for any block size); any block shape */
__global__ void block_sum_kernel(float* out, const float* in) {
    __shared__ float buf[1024];
    unsigned n = blockDim.x * blockDim.y * blockDim.z;
    unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    buf[t] = in[b * n + t];
    __syncthreads();
    for (unsigned s = 1; s < n; s *= 2) {
        if (t % (2 * s) == 0 && t + s < n) buf[t] += buf[t + s];
        __syncthreads();
    }
    if (t == 0) out[b] = buf[0];
}

static void test_block_sum(TestCounts& tc, dim3 grid, dim3 block) {
    unsigned nb = grid.x * grid.y * grid.z, nt = block.x * block.y * block.z;
    float *in, *out;
    cudaCheck(cudaMalloc(&in, (size_t)nb * nt * sizeof(float)));
    cudaCheck(cudaMalloc(&out, nb * sizeof(float)));
    for (unsigned i = 0; i < nb * nt; i++) in[i] = (float)(hash32(i) % 1000) * 0.25f; /* exact in fp32 sums */
    launch_kernel(block_sum_kernel, grid, block, 0, 0, out, in);
    double worst = 0;
    for (unsigned b = 0; b < nb; b++) {
        double ref = 0;
        for (unsigned i = 0; i < nt; i++) ref += in[b * nt + i];
        worst = fmax(worst, fabs(out[b] - ref));
    }
    char what[128];
    snprintf(what, sizeof what, "block reduction via smem, grid (%u,%u,%u) block (%u,%u,%u) vs double", grid.x, grid.y,
             grid.z, block.x, block.y, block.z);
    check(tc, worst == 0, what, worst);
    cudaCheck(cudaFree(in));
    cudaCheck(cudaFree(out));
}

/* ---------------------------------------------------------------------------------------------------
 * thread/block indexing: every thread writes its coordinates to its own slot */
__global__ void index_kernel(uint4* out) {
    unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    unsigned n = blockDim.x * blockDim.y * blockDim.z;
    out[b * n + t] = make_uint4(threadIdx.x | threadIdx.y << 8 | threadIdx.z << 16,
                                blockIdx.x | blockIdx.y << 8 | blockIdx.z << 16, b, t);
}

static void test_indexing(TestCounts& tc) {
    dim3 grid(3, 2, 2), block(4, 3, 2);
    unsigned nb = 12, nt = 24;
    uint4* out;
    cudaCheck(cudaMalloc(&out, nb * nt * sizeof(uint4)));
    cudaCheck(cudaMemset(out, 0xff, nb * nt * sizeof(uint4)));
    launch_kernel(index_kernel, grid, block, 0, 0, out);
    int bad = 0;
    for (unsigned bz = 0; bz < 2; bz++) for (unsigned by = 0; by < 2; by++) for (unsigned bx = 0; bx < 3; bx++)
    for (unsigned tz = 0; tz < 2; tz++) for (unsigned ty = 0; ty < 3; ty++) for (unsigned tx = 0; tx < 4; tx++) {
        unsigned b = bx + 3 * (by + 2 * bz), t = tx + 4 * (ty + 3 * tz);
        uint4 v = out[b * nt + t];
        if (v.x != (tx | ty << 8 | tz << 16) || v.y != (bx | by << 8 | bz << 16) || v.z != b || v.w != t) bad++;
    }
    check(tc, bad == 0, "threadIdx/blockIdx/blockDim/gridDim over a 3-D grid of 3-D blocks", bad);
    cudaCheck(cudaFree(out));
}

/* ---------------------------------------------------------------------------------------------------
 * shuffles: for each arg in [0, nargs), every thread records the four shuffles of its value */
__global__ void shuffle_kernel(long long* idx, long long* up, long long* down, long long* bfly, int width, int nargs,
                               int idx_offset) {
    unsigned t = threadIdx.x, n = blockDim.x;
    long long v = 1000003LL * (t + 1) + (1LL << 40) * (t % 7); /* 64-bit values exercise 8-byte shuffles */
    int v32 = (int)(t * 17 + 5);
    for (int a = 0; a < nargs; a++) {
        idx[a * n + t] = __shfl_sync(0xffffffffu, v, a + idx_offset, width);
        up[a * n + t] = __shfl_up_sync(0xffffffffu, v32, (unsigned)a, width);
        down[a * n + t] = __shfl_down_sync(0xffffffffu, v, (unsigned)a, width);
        bfly[a * n + t] = __shfl_xor_sync(0xffffffffu, v32, a, width);
    }
}

static void test_shuffles(TestCounts& tc) {
    const int n = 64, nargs = 32, idx_offset = -40; /* srcLane from -40 to -9 and (second pass) beyond 31 */
    long long *idx, *up, *down, *bfly;
    cudaCheck(cudaMallocHost(&idx, n * nargs * sizeof(long long)));
    cudaCheck(cudaMallocHost(&up, n * nargs * sizeof(long long)));
    cudaCheck(cudaMallocHost(&down, n * nargs * sizeof(long long)));
    cudaCheck(cudaMallocHost(&bfly, n * nargs * sizeof(long long)));
    for (int width = 1; width <= 32; width *= 2) {
        for (int pass = 0; pass < 2; pass++) {
            int offset = pass == 0 ? idx_offset : 20; /* pass 1: srcLane 20..51 */
            launch_kernel(shuffle_kernel, 1, n, 0, 0, idx, up, down, bfly, width, nargs, offset);
            int bad[4] = {0, 0, 0, 0};
            for (int a = 0; a < nargs; a++) {
                for (int t = 0; t < n; t++) {
                    int lane = t % 32, base = t - lane;
                    auto v64 = [](int tt) { return 1000003LL * (tt + 1) + (1LL << 40) * (tt % 7); };
                    auto v32 = [](int tt) { return (long long)(tt * 17 + 5); };
                    /* Programming Guide: __shfl_sync reads lane srcLane % width of the caller's width-segment */
                    int src_lane = a + offset;
                    int src = (lane / width) * width + ((src_lane % width) + width) % width;
                    if (idx[a * n + t] != v64(base + src)) bad[0]++;
                    /* __shfl_up_sync: lane - delta, unchanged if that leaves the segment at the bottom */
                    int s_up = lane % width >= a ? lane - a : lane;
                    if (up[a * n + t] != v32(base + s_up)) bad[1]++;
                    /* __shfl_down_sync: lane + delta, unchanged if that leaves the segment at the top */
                    int s_down = lane % width + a < width ? lane + a : lane;
                    if (down[a * n + t] != v64(base + s_down)) bad[2]++;
                    /* __shfl_xor_sync: lane ^ laneMask; a later segment returns the caller's own value */
                    int s_x = lane ^ a;
                    if (s_x / width > lane / width) s_x = lane;
                    if (bfly[a * n + t] != v32(base + s_x)) bad[3]++;
                }
            }
            char what[128];
            const char* names[4] = {"__shfl_sync", "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync"};
            for (int k = 0; k < 4; k++) {
                if (pass == 1 && k != 0) continue;
                snprintf(what, sizeof what, "%s width %d, arg %d..%d, 2 warps, vs definition", names[k], width,
                         k == 0 ? offset : 0, k == 0 ? offset + nargs - 1 : nargs - 1);
                check(tc, bad[k] == 0, what, bad[k]);
            }
        }
    }
    cudaCheck(cudaFreeHost(idx));
    cudaCheck(cudaFreeHost(up));
    cudaCheck(cudaFreeHost(down));
    cudaCheck(cudaFreeHost(bfly));
}

/* a sub-warp group: only the even lanes call, with the mask of the even lanes */
__global__ void partial_mask_kernel(int* out, unsigned* ballots) {
    unsigned lane = threadIdx.x % 32;
    if (lane % 2 == 0) {
        out[threadIdx.x] = __shfl_sync(0x55555555u, (int)threadIdx.x * 3, 2 * ((lane / 2 + 1) % 16));
        ballots[threadIdx.x] = __ballot_sync(0x55555555u, lane % 4 == 0);
    }
}

/* ballot/all/any with per-lane predicates pred(t, trial) */
__global__ void vote_kernel(unsigned* ballot, int* all, int* any, int trial) {
    unsigned t = threadIdx.x;
    int pred;
    switch (trial) {
    case 0: pred = 0; break;
    case 1: pred = 1; break;
    default: pred = (hash32(t * 7919u + trial) & 3) == 0;
    }
    ballot[t] = __ballot_sync(0xffffffffu, pred);
    all[t] = __all_sync(0xffffffffu, pred);
    any[t] = __any_sync(0xffffffffu, pred);
}

static void test_votes(TestCounts& tc) {
    const int n = 96;
    unsigned* ballot;
    int *all, *any;
    cudaCheck(cudaMallocHost(&ballot, n * sizeof(unsigned)));
    cudaCheck(cudaMallocHost(&all, n * sizeof(int)));
    cudaCheck(cudaMallocHost(&any, n * sizeof(int)));
    int bad = 0;
    for (int trial = 0; trial < 6; trial++) {
        launch_kernel(vote_kernel, 1, n, 0, 0, ballot, all, any, trial);
        for (int w = 0; w < n / 32; w++) {
            unsigned ref = 0;
            for (int l = 0; l < 32; l++) {
                unsigned t = 32 * w + l;
                int pred = trial == 0 ? 0 : trial == 1 ? 1 : (hash32(t * 7919u + trial) & 3) == 0;
                if (pred) ref |= 1u << l;
            }
            for (int l = 0; l < 32; l++) {
                int t = 32 * w + l;
                if (ballot[t] != ref || all[t] != (ref == 0xffffffffu) || any[t] != (ref != 0)) bad++;
            }
        }
    }
    check(tc, bad == 0, "__ballot_sync/__all_sync/__any_sync, 6 predicate patterns x 3 warps", bad);

    int* out;
    unsigned* ballots;
    cudaCheck(cudaMallocHost(&out, 64 * sizeof(int)));
    cudaCheck(cudaMallocHost(&ballots, 64 * sizeof(unsigned)));
    launch_kernel(partial_mask_kernel, 1, 64, 0, 0, out, ballots);
    bad = 0;
    for (int t = 0; t < 64; t += 2) {
        int lane = t % 32, src = 2 * ((lane / 2 + 1) % 16);
        if (out[t] != (t - lane + src) * 3 || ballots[t] != 0x11111111u) bad++;
    }
    check(tc, bad == 0, "shuffle and ballot among the even lanes only (mask 0x55555555)", bad);
    cudaCheck(cudaFreeHost(ballot));
    cudaCheck(cudaFreeHost(all));
    cudaCheck(cudaFreeHost(any));
    cudaCheck(cudaFreeHost(out));
    cudaCheck(cudaFreeHost(ballots));
}

/* ---------------------------------------------------------------------------------------------------
 * atomics from many blocks (on several OS threads) */
struct AtomicTotals {
    int count;
    unsigned lanes;
    float quarters;
    int max_seen;
    float values;
};
__global__ void atomics_kernel(AtomicTotals* tot, const float* values) {
    unsigned g = blockIdx.x * blockDim.x + threadIdx.x;
    atomicAdd(&tot->count, 1);
    atomicAdd(&tot->lanes, threadIdx.x % 32);
    atomicAdd(&tot->quarters, 0.25f * (float)(g % 4));
    atomicMax(&tot->max_seen, (int)(hash32(g) % 100000));
    atomicAdd(&tot->values, values[g]);
}

static void test_atomics(TestCounts& tc) {
    const int blocks = 64, threads = 256, n = blocks * threads;
    AtomicTotals* tot;
    float* values;
    cudaCheck(cudaMalloc(&tot, sizeof *tot));
    cudaCheck(cudaMalloc(&values, n * sizeof(float)));
    cudaCheck(cudaMemset(tot, 0, sizeof *tot));
    double ref_values = 0, ref_quarters = 0;
    int ref_max = 0;
    for (int g = 0; g < n; g++) {
        values[g] = (float)((int)(hash32(g + 99) % 2001) - 1000) * 1e-3f;
        ref_values += values[g];
        ref_quarters += 0.25 * (g % 4);
        ref_max = (int)(hash32(g) % 100000) > ref_max ? (int)(hash32(g) % 100000) : ref_max;
    }
    launch_kernel(atomics_kernel, blocks, threads, 0, 0, tot, values);
    check(tc, tot->count == n, "atomicAdd(int) +1 from 64 blocks x 256 threads", fabs((double)tot->count - n));
    check(tc, tot->lanes == (unsigned)(n / 32) * (31 * 32 / 2), "atomicAdd(unsigned) of lane ids", 0);
    check(tc, tot->quarters == ref_quarters, "atomicAdd(float) of exact quarters vs formula", fabs(tot->quarters - ref_quarters));
    check(tc, tot->max_seen == ref_max, "atomicMax(int) vs host max", fabs((double)(tot->max_seen - ref_max)));
    double err = fabs(tot->values - ref_values);
    check(tc, err < 1e-3 * sqrt((double)n), "atomicAdd(float) of random values vs double sum", err);
    cudaCheck(cudaFree(tot));
    cudaCheck(cudaFree(values));
}

/* ---------------------------------------------------------------------------------------------------
 * determinism: a kernel without atomics gives bit-identical output with 1 and 2 OS threads */
__global__ void mix_kernel(float* out, const float* in, int n) {
    __shared__ float tile[128];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = i < n ? in[i] : 0.0f;
    __syncthreads();
    float acc = 0;
    for (int k = 0; k < (int)blockDim.x; k++) acc += tile[k] * tile[(threadIdx.x + k) % blockDim.x];
    acc += __shfl_xor_sync(0xffffffffu, acc, 5);
    if (i < n) out[i] = acc;
}

static void test_determinism(TestCounts& tc) {
    const int n = 128 * 37;
    float *in, *out1, *out2;
    cudaCheck(cudaMalloc(&in, n * sizeof(float)));
    cudaCheck(cudaMalloc(&out1, n * sizeof(float)));
    cudaCheck(cudaMalloc(&out2, n * sizeof(float)));
    for (int i = 0; i < n; i++) in[i] = sinf((float)i);
    setenv("CUDASIM_THREADS", "1", 1);
    launch_kernel(mix_kernel, n / 128, 128, 0, 0, out1, in, n);
    setenv("CUDASIM_THREADS", "2", 1);
    launch_kernel(mix_kernel, n / 128, 128, 0, 0, out2, in, n);
    unsetenv("CUDASIM_THREADS");
    check(tc, memcmp(out1, out2, n * sizeof(float)) == 0, "same output bits with 1 and 2 OS threads (37 blocks)", 0);
    cudaCheck(cudaFree(in));
    cudaCheck(cudaFree(out1));
    cudaCheck(cudaFree(out2));
}

/* ---------------------------------------------------------------------------------------------------
 * dynamic shared memory and the launch limits */
__global__ void dyn_smem_kernel(int* out, int nints) {
    DYNAMIC_SMEM(int, smem);
    for (int i = threadIdx.x; i < nints; i += blockDim.x) smem[i] = i % 7 + (int)blockIdx.x;
    __syncthreads();
    int sum = 0;
    for (int i = threadIdx.x; i < nints; i += blockDim.x) sum += smem[nints - 1 - i];
    atomicAdd(out, sum);
}

static void test_launch_limits(TestCounts& tc) {
    int* out;
    cudaCheck(cudaMalloc(&out, sizeof(int)));
    struct Case { dim3 grid, block; size_t smem; const char* what; } bad_cases[] = {
        {dim3(1), dim3(1025), 0, "1025 threads per block"},
        {dim3(1), dim3(32, 32, 2), 0, "32x32x2 = 2048 threads per block"},
        {dim3(1), dim3(1, 1, 65), 0, "block z = 65"},
        {dim3(1), dim3(0), 0, "block x = 0"},
        {dim3(1, 65536), dim3(32), 0, "grid y = 65536"},
        {dim3(0), dim3(32), 0, "grid x = 0"},
        {dim3(1), dim3(32), 48 * 1024 + 4, "48 KiB + 4 of dynamic smem without the attribute"},
    };
    for (const Case& c : bad_cases) {
#ifdef CUDASIM
        cudasim::launch("dyn_smem_kernel", dyn_smem_kernel, c.grid, c.block, c.smem, 0, out, 1);
#else
        dyn_smem_kernel<<<c.grid, c.block, c.smem>>>(out, 1);
#endif
        cudaError_t e = cudaGetLastError();
        char what[128];
        snprintf(what, sizeof what, "launch refused: %s (%s)", c.what, cudaGetErrorName(e));
        check(tc, e != cudaSuccess && cudaGetLastError() == cudaSuccess, what, 0);
    }
    check(tc, cudaFuncSetAttribute(dyn_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 228 * 1024) == cudaErrorInvalidValue &&
              cudaGetLastError() == cudaErrorInvalidValue,
          "cudaFuncSetAttribute above 227 KiB refused", 0);
    cudaCheck(cudaFuncSetAttribute(dyn_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024));
    const int nints = 227 * 1024 / 4, blocks = 3;
    cudaCheck(cudaMemset(out, 0, sizeof(int)));
    launch_kernel(dyn_smem_kernel, blocks, 256, nints * sizeof(int), 0, out, nints);
    long long ref = 0;
    for (int b = 0; b < blocks; b++) for (int i = 0; i < nints; i++) ref += i % 7 + b;
    check(tc, *out == (int)ref, "227 KiB of dynamic smem after cudaFuncSetAttribute, every byte used", fabs((double)(*out - ref)));
    check_child_fails(tc, "launch_kernel reports a refused launch and exits", "invalid configuration argument", [&] {
        launch_kernel(dyn_smem_kernel, 1, 2048, 0, 0, out, 1);
    });
    cudaCheck(cudaFree(out));
}

/* ---------------------------------------------------------------------------------------------------
 * errors a GPU would hide, each in a child process */
__global__ void early_exit_barrier_kernel(int* out) {
    if (threadIdx.x == 5) return;
    __syncthreads();
    out[threadIdx.x] = 1;
}
__global__ void split_barrier_kernel(int* out) {
    if (threadIdx.x < 16) {
        out[threadIdx.x] = 1;
        __syncthreads();
    } else {
        out[threadIdx.x] = 2;
        __syncthreads();
    }
}
__global__ void half_warp_shuffle_kernel(int* out) {
    int v = threadIdx.x;
    if (threadIdx.x % 32 < 16) v = __shfl_xor_sync(0xffffffffu, v, 1);
    __syncthreads();
    out[threadIdx.x] = v;
}
__global__ void exited_lane_shuffle_kernel(int* out) {
    if (threadIdx.x >= 16) return;
    out[threadIdx.x] = __shfl_down_sync(0xffffffffu, (int)threadIdx.x, 1);
}
__global__ void mask_without_caller_kernel(int* out) {
    out[threadIdx.x] = __shfl_sync(0x1u, (int)threadIdx.x, 0);
}
__global__ void mixed_ops_kernel(int* out) {
    int v = threadIdx.x;
    if (threadIdx.x % 2) v = __shfl_xor_sync(0xffffffffu, v, 1);
    else v = __shfl_down_sync(0xffffffffu, v, 1);
    out[threadIdx.x] = v;
}
__global__ void missing_lanes_kernel(int* out) {
    out[threadIdx.x] = __shfl_sync(0xffffffffu, (int)threadIdx.x, 0);
}
__global__ void out_of_bounds_kernel(int* out, int n) {
    out[threadIdx.x + n - 1] = 7; /* thread 1 writes out[n] */
}
__global__ void smem_overflow_kernel(int* out, int nints) {
    DYNAMIC_SMEM(int, smem);
    smem[threadIdx.x] = 1; /* thread nints writes one past the buffer */
    __syncthreads();
    out[0] = smem[0];
}

static void test_divergence(TestCounts& tc) {
    int* out;
    cudaCheck(cudaMalloc(&out, 1024 * sizeof(int)));
    check_child_fails(tc, "early return before __syncthreads is reported", "divergent barrier",
                      [&] { launch_kernel(early_exit_barrier_kernel, 2, 64, 0, 0, out); });
    check_child_fails(tc, "two __syncthreads call sites in one block are reported", "divergent barrier",
                      [&] { launch_kernel(split_barrier_kernel, 1, 32, 0, 0, out); });
    check_child_fails(tc, "half a warp in a full-mask shuffle (others at a barrier): deadlock", "deadlock",
                      [&] { launch_kernel(half_warp_shuffle_kernel, 1, 64, 0, 0, out); });
    check_child_fails(tc, "full-mask shuffle after lanes exited is reported", "divergent warp operation",
                      [&] { launch_kernel(exited_lane_shuffle_kernel, 1, 32, 0, 0, out); });
    check_child_fails(tc, "mask without the calling lane is reported", "does not include the calling lane",
                      [&] { launch_kernel(mask_without_caller_kernel, 1, 32, 0, 0, out); });
    check_child_fails(tc, "lanes in different warp operations are reported", "disagree",
                      [&] { launch_kernel(mixed_ops_kernel, 1, 32, 0, 0, out); });
    check_child_fails(tc, "full mask in a 48-thread block's partial warp is reported", "do not exist",
                      [&] { launch_kernel(missing_lanes_kernel, 1, 48, 0, 0, out); });
    check_child_fails(tc, "kernel named in the report", "kernel mixed_ops_kernel block (0,0,0)",
                      [&] { launch_kernel(mixed_ops_kernel, 1, 32, 0, 0, out); });
#ifdef CUDASIM_ASAN
    check_child_fails(tc, "out-of-bounds global write caught by ASan", "heap-buffer-overflow",
                      [&] { launch_kernel(out_of_bounds_kernel, 1, 2, 0, 0, out, 1024); });
    check_child_fails(tc, "dynamic smem overflow caught by ASan", "heap-buffer-overflow",
                      [&] { launch_kernel(smem_overflow_kernel, 1, 65, 64 * sizeof(int), 0, out, 64); });
#else
    printf("      (built without AddressSanitizer: the out-of-bounds checks are not run, not counted)\n");
#endif
    cudaCheck(cudaFree(out));
}

/* ---------------------------------------------------------------------------------------------------
 * bf16 conversions against an exact reference: the two bf16 neighbours of x, the nearer in double, ties
 * to the even one; NaN -> 0x7FFF */
static unsigned short ref_bf16(float x) {
    if (isnan(x)) return 0x7fff;
    uint32_t u;
    memcpy(&u, &x, 4);
    unsigned short sign = (unsigned short)(u >> 16 & 0x8000u);
    uint32_t mag = u & 0x7fffffffu;
    unsigned short lo = (unsigned short)(mag >> 16), hi = (unsigned short)(lo + 1);
    auto value = [](unsigned short h) {
        if (h >= 0x7f80) return (double)INFINITY;
        uint32_t b = (uint32_t)h << 16;
        float f;
        memcpy(&f, &b, 4);
        return (double)f;
    };
    float fm;
    memcpy(&fm, &mag, 4);
    if (mag >= 0x7f800000u) return (unsigned short)(sign | lo); /* infinity */
    double dlo = (double)fm - value(lo), dhi = value(hi) - (double)fm;
    /* the largest finite bf16 and beyond: the halfway point to 2^128 rounds to infinity */
    if (lo == 0x7f7f) dhi = ldexp(1.0, 128) - (double)fm;
    unsigned short r = dlo < dhi ? lo : dhi < dlo ? hi : ((lo & 1) ? hi : lo);
    return (unsigned short)(sign | r);
}

static void test_bf16(TestCounts& tc) {
    int bad = 0, bad_back = 0, n = 0;
    std::vector<float> xs = {0.0f, -0.0f, 1.0f, -1.0f, 1.00390625f, 1.005859375f, 3.4028235e38f, -3.4028235e38f,
                             3.3961776e38f, 1e-40f, -1e-45f, INFINITY, -INFINITY, NAN, -NAN};
    for (uint32_t i = 0; i < 200000; i++) {
        uint32_t b = hash32(i);
        if (i % 4 == 0) b = (b & 0xffff0000u) | 0x8000u; /* exact ties */
        float f;
        memcpy(&f, &b, 4);
        xs.push_back(f);
    }
    for (float x : xs) {
        n++;
        __nv_bfloat16 h = __float2bfloat16(x);
        if (__bfloat16_as_ushort(h) != ref_bf16(x) || __bfloat16_as_ushort(__float2bfloat16_rn(x)) != ref_bf16(x)) bad++;
        uint32_t back_bits = (uint32_t)__bfloat16_as_ushort(h) << 16;
        float back = __bfloat162float(h), expect;
        memcpy(&expect, &back_bits, 4);
        if (memcmp(&back, &expect, 4) != 0) bad_back++;
    }
    char what[128];
    snprintf(what, sizeof what, "__float2bfloat16(_rn) of %d values (ties, NaN, inf, subnormal) vs exact RNE", n);
    check(tc, bad == 0, what, bad);
    check(tc, bad_back == 0, "__bfloat162float is the exact widening", bad_back);
    __nv_bfloat162 p = __floats2bfloat162_rn(1.5f, -2.25f);
    __nv_bfloat162 s = p + p;
    check(tc, __low2float(s) == 3.0f && __high2float(s) == -4.5f && (float)__hmul(p.x, p.y) == -3.375f,
          "__nv_bfloat162 add and bf16 multiply of exact values", 0);
}

/* ---------------------------------------------------------------------------------------------------
 * runtime API */
static void test_runtime(TestCounts& tc) {
    size_t free0, total, free1, free2;
    cudaCheck(cudaMemGetInfo(&free0, &total));
    void* p;
    cudaCheck(cudaMalloc(&p, 1 << 20));
    cudaCheck(cudaMemGetInfo(&free1, &total));
    size_t nonnan = 0; /* fresh device memory: NaN in every float (a GPU's is leftovers, never promised zeros) */
    for (size_t i = 0; i < (1 << 20) / sizeof(float); i++) nonnan += !isnan(((float*)p)[i]);
    check(tc, nonnan == 0, "fresh cudaMalloc memory of 1 MiB reads as NaN, so a read before a write shows", (double)nonnan);
    cudaCheck(cudaFree(p));
    cudaCheck(cudaMemGetInfo(&free2, &total));
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    size_t host = (size_t)pages * (size_t)page, expect = host < (80ull << 30) ? host : (80ull << 30);
    check(tc, free0 - free1 == (1 << 20) && free2 == free0 && total == expect,
          "cudaMemGetInfo follows cudaMalloc/cudaFree of 1 MiB (device of 80 GiB, or the host's memory where less)", 0);
    int local;
    check(tc, cudaFree(&local) == cudaErrorInvalidDevicePointer && cudaGetLastError() == cudaErrorInvalidDevicePointer &&
              cudaGetLastError() == cudaSuccess,
          "cudaFree of a non-device pointer fails; cudaGetLastError reads and clears", 0);
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    check(tc, prop.major == 9 && prop.maxThreadsPerBlock == 1024 && prop.sharedMemPerBlockOptin == 227 * 1024 && prop.warpSize == 32,
          "H100-class device properties (sm_90, 1024 threads, 227 KiB opt-in smem)", 0);
    cudaStream_t stream;
    cudaEvent_t start, stop;
    cudaCheck(cudaStreamCreate(&stream));
    cudaCheck(cudaEventCreate(&start));
    cudaCheck(cudaEventCreate(&stop));
    char *a, *b;
    cudaCheck(cudaMalloc(&a, 4096));
    cudaCheck(cudaMalloc(&b, 4096));
    cudaCheck(cudaEventRecord(start, stream));
    cudaCheck(cudaMemsetAsync(a, 0x5a, 4096, stream));
    cudaCheck(cudaMemcpyAsync(b, a, 4096, cudaMemcpyDeviceToDevice, stream));
    cudaCheck(cudaEventRecord(stop, stream));
    cudaCheck(cudaStreamSynchronize(stream));
    float ms = -1;
    cudaCheck(cudaEventElapsedTime(&ms, start, stop));
    int mismatches = 0;
    for (int i = 0; i < 4096; i++) mismatches += b[i] != 0x5a;
    check(tc, mismatches == 0 && ms >= 0, "memsetAsync + memcpyAsync on a stream, event timing", mismatches);
    cudaCheck(cudaFree(a));
    cudaCheck(cudaFree(b));
    cudaCheck(cudaEventDestroy(start));
    cudaCheck(cudaEventDestroy(stop));
    cudaCheck(cudaStreamDestroy(stream));
    check(tc, alignof(float4) == 16 && sizeof(float4) == 16 && alignof(float2) == 8 && sizeof(uint3) == 12 &&
              sizeof(__nv_bfloat162) == 4 && alignof(int4) == 16,
          "vector type sizes and alignments as in vector_types.h", 0);
}

/* ---------------------------------------------------------------------------------------------------
 * host/device memory checks: what a GPU refuses (or faults on) is refused here too */
struct HostPtrHolder {
    float* p;
};
__global__ void touch_kernel(float* out, const float* in, int n) {
    if (in && (int)threadIdx.x < n) out[threadIdx.x] = in[threadIdx.x] + 1.0f;
}
__global__ void struct_arg_kernel(HostPtrHolder h, float* out) { out[0] = h.p ? 1.0f : 0.0f; }
__global__ void end_pointer_kernel(const float* begin, const float* end, int* out) { *out = (int)(end - begin); }
/* a launch whose error the test reads (launch_kernel would exit) */
#ifdef CUDASIM
#define RAW_LAUNCH(kernel, grid, block, ...) cudasim::launch(#kernel ", " #grid ", " #block ", 0, 0, " #__VA_ARGS__, kernel, grid, block, 0, 0, __VA_ARGS__)
#else
#define RAW_LAUNCH(kernel, grid, block, ...) kernel<<<grid, block>>>(__VA_ARGS__)
#endif

static void test_memory_checks(TestCounts& tc) {
    const size_t n = 64, bytes = n * sizeof(float);
    float *dev, *dev2, *pinned;
    cudaCheck(cudaMalloc(&dev, bytes));
    cudaCheck(cudaMalloc(&dev2, bytes));
    cudaCheck(cudaMallocHost(&pinned, bytes));
    std::vector<float> host(n, 2.0f), host2(n, 0.0f);
    cudaStream_t stream;
    cudaCheck(cudaStreamCreate(&stream));
    /* copies: the side the kind names as device must be inside one cudaMalloc allocation */
    struct CopyCase {
        void* dst;
        const void* src;
        size_t bytes;
        cudaMemcpyKind kind;
        cudaError_t want;
        const char* what;
    } copies[] = {
        {dev, host.data(), bytes, cudaMemcpyHostToDevice, cudaSuccess, "HtoD from pageable memory into cudaMalloc memory"},
        {dev, pinned, bytes, cudaMemcpyHostToDevice, cudaSuccess, "HtoD from pinned memory"},
        {host2.data(), dev, bytes, cudaMemcpyDeviceToHost, cudaSuccess, "DtoH into pageable memory"},
        {dev2, dev, bytes, cudaMemcpyDeviceToDevice, cudaSuccess, "DtoD between two allocations"},
        {host2.data(), host.data(), bytes, cudaMemcpyHostToHost, cudaSuccess, "HtoH between pageable buffers"},
        {dev + n / 2, host.data(), bytes / 2, cudaMemcpyHostToDevice, cudaSuccess, "HtoD into the last half of an allocation"},
        {host2.data(), host.data(), bytes, cudaMemcpyHostToDevice, cudaErrorInvalidValue, "HtoD with dst in pageable host memory"},
        {pinned, host.data(), bytes, cudaMemcpyHostToDevice, cudaErrorInvalidValue, "HtoD with dst in pinned host memory"},
        {dev, dev2, bytes, cudaMemcpyHostToDevice, cudaErrorInvalidValue, "HtoD with src in device memory"},
        {host2.data(), host.data(), bytes, cudaMemcpyDeviceToHost, cudaErrorInvalidValue, "DtoH with src in host memory"},
        {dev2, dev, bytes, cudaMemcpyDeviceToHost, cudaErrorInvalidValue, "DtoH with dst in device memory"},
        {dev2, host.data(), bytes, cudaMemcpyDeviceToDevice, cudaErrorInvalidValue, "DtoD with src in host memory"},
        {dev + 1, host.data(), bytes, cudaMemcpyHostToDevice, cudaErrorInvalidValue, "HtoD running 4 bytes past the allocation's end"},
        {host2.data(), dev + n / 2, bytes, cudaMemcpyDeviceToHost, cudaErrorInvalidValue, "DtoH reading past the allocation's end"},
        {host2.data(), dev, bytes, cudaMemcpyHostToHost, cudaErrorInvalidValue, "HtoH with src in device memory"},
        /* cudaMemcpyDefault (unified addressing): any mix, a device side must fit its allocation */
        {dev, host.data(), bytes, cudaMemcpyDefault, cudaSuccess, "Default host -> device"},
        {host2.data(), dev, bytes, cudaMemcpyDefault, cudaSuccess, "Default device -> host"},
        {dev2, dev, bytes, cudaMemcpyDefault, cudaSuccess, "Default device -> device"},
        {pinned, host.data(), bytes, cudaMemcpyDefault, cudaSuccess, "Default host -> pinned"},
        {host2.data(), dev + 1, bytes, cudaMemcpyDefault, cudaErrorInvalidValue, "Default reading past a device allocation's end"},
    };
    for (const CopyCase& c : copies) {
        for (int async = 0; async < 2; async++) {
            cudaError_t e = async ? cudaMemcpyAsync(c.dst, c.src, c.bytes, c.kind, stream) : cudaMemcpy(c.dst, c.src, c.bytes, c.kind);
            if (async) cudaCheck(cudaStreamSynchronize(stream));
            cudaError_t last = cudaGetLastError();
            char what[192];
            snprintf(what, sizeof what, "%s: %s %s", async ? "cudaMemcpyAsync" : "cudaMemcpy", c.what,
                     c.want == cudaSuccess ? "accepted" : "-> cudaErrorInvalidValue");
            check(tc, e == c.want && last == c.want, what, 0);
        }
    }
    /* memsets: the range must be inside one cudaMalloc allocation */
    check(tc, cudaMemset(dev, 0, bytes) == cudaSuccess && cudaMemsetAsync(dev + n / 2, 0, bytes / 2, stream) == cudaSuccess &&
              cudaGetLastError() == cudaSuccess,
          "cudaMemset/cudaMemsetAsync of (the tail of) a cudaMalloc allocation accepted", 0);
    check(tc, cudaMemset(host2.data(), 0, bytes) == cudaErrorInvalidValue && cudaGetLastError() == cudaErrorInvalidValue,
          "cudaMemset of pageable host memory -> cudaErrorInvalidValue", 0);
    check(tc, cudaMemsetAsync(pinned, 0, bytes, stream) == cudaErrorInvalidValue && cudaGetLastError() == cudaErrorInvalidValue,
          "cudaMemsetAsync of pinned host memory -> cudaErrorInvalidValue", 0);
    check(tc, cudaMemset(dev + 1, 0, bytes) == cudaErrorInvalidValue && cudaGetLastError() == cudaErrorInvalidValue,
          "cudaMemset running 4 bytes past the allocation's end -> cudaErrorInvalidValue", 0);
    cudaCheck(cudaStreamSynchronize(stream));
    check_child_fails(tc, "cudaMemcpy into host memory with HostToDevice: the simulator's line names the call and dst",
                      "cudaMemcpy(cudaMemcpyHostToDevice): dst", [&] {
                          cudaCheck(cudaMemcpy(host2.data(), host.data(), bytes, cudaMemcpyHostToDevice));
                      });
    check_child_fails(tc, "cudaMemsetAsync of host memory: the simulator's line names the call", "cudaMemsetAsync: devPtr", [&] {
        cudaCheck(cudaMemsetAsync(host2.data(), 0, bytes, 0));
    });
    /* kernel arguments: a raw pointer must be device or pinned memory (or NULL) */
    cudaCheck(cudaMemcpy(dev, host.data(), bytes, cudaMemcpyHostToDevice));
    dev2[0] = -1.0f;
    RAW_LAUNCH(touch_kernel, 1, 64, dev2, (const float*)dev, (int)n);
    check(tc, cudaGetLastError() == cudaSuccess && dev2[0] == 3.0f, "launch with cudaMalloc pointer arguments runs", 0);
    pinned[0] = -1.0f;
    RAW_LAUNCH(touch_kernel, 1, 64, pinned, (const float*)dev, (int)n);
    check(tc, cudaGetLastError() == cudaSuccess && pinned[0] == 3.0f, "launch with a pinned (cudaMallocHost) argument runs", 0);
    RAW_LAUNCH(touch_kernel, 1, 64, dev2, (const float*)NULL, (int)n);
    check(tc, cudaGetLastError() == cudaSuccess, "launch with a NULL pointer argument runs", 0);
    int* count;
    cudaCheck(cudaMallocHost(&count, sizeof(int)));
    *count = -1;
    RAW_LAUNCH(end_pointer_kernel, 1, 1, (const float*)dev, (const float*)(dev + n), count);
    check(tc, cudaGetLastError() == cudaSuccess && *count == (int)n, "launch with a one-past-the-end device pointer runs", 0);
    HostPtrHolder holder = {host2.data()};
    RAW_LAUNCH(struct_arg_kernel, 1, 1, holder, dev2);
    check(tc, cudaGetLastError() == cudaSuccess, "launch with a host pointer inside a struct argument runs (not checked)", 0);
    host2[0] = -1.0f;
    RAW_LAUNCH(touch_kernel, 1, 64, host2.data(), (const float*)dev, (int)n);
    check(tc, cudaGetLastError() == cudaErrorInvalidValue && host2[0] == -1.0f,
          "launch with a pageable host pointer (argument 0) -> cudaErrorInvalidValue, nothing runs", 0);
    dev2[0] = -1.0f;
    RAW_LAUNCH(touch_kernel, 1, 64, dev2, (const float*)host.data(), (int)n);
    check(tc, cudaGetLastError() == cudaErrorInvalidValue && dev2[0] == -1.0f,
          "launch with a pageable host pointer (argument 1) -> cudaErrorInvalidValue, nothing runs", 0);
    const float* host_in = host.data();
    check_child_fails(tc, "launch_kernel with a host pointer: the simulator's line names the kernel and argument 1",
                      "kernel touch_kernel: argument 1 (counting from 0)", [&] {
                          launch_kernel(touch_kernel, 1, 64, 0, 0, dev2, host_in, (int)n);
                      });
    cudaCheck(cudaStreamDestroy(stream));
    cudaCheck(cudaFreeHost(count));
    cudaCheck(cudaFreeHost(pinned));
    cudaCheck(cudaFree(dev));
    cudaCheck(cudaFree(dev2));
}

int main(void) {
    TestCounts tc;
    test_block_sum(tc, dim3(7), dim3(256));
    test_block_sum(tc, dim3(2, 3), dim3(1024));
    test_block_sum(tc, dim3(3, 1, 2), dim3(5, 7, 3));
    test_block_sum(tc, dim3(4), dim3(33));
    test_indexing(tc);
    test_shuffles(tc);
    test_votes(tc);
    test_atomics(tc);
    test_determinism(tc);
    test_launch_limits(tc);
    test_divergence(tc);
    test_bf16(tc);
    test_runtime(tc);
    test_memory_checks(tc);
    return finish(tc);
}
