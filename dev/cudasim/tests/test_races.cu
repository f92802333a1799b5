/*
 * dev/cudasim/tests/test_races.cu — the simulator's race check (the ThreadSanitizer build, dev/cudasim/cudasim_exec.h):
 * planted races are reported and their fixed kernels are not, whatever the schedule.
 *   - shared memory, block level: thread t reads the slot thread t+1 writes, without / with __syncthreads, in
 *     dynamic and in static shared memory;
 *   - warp level: lane l reads lane l^1's slot after a shuffle (which orders no memory), without / with
 *     __syncwarp; ldmatrix of a tile the lanes wrote, without / with __syncwarp;
 *   - cp.async: thread t reads thread t+1's copied chunk after its own wait, without / with __syncthreads,
 *     copies at issue and deferred; and after a __syncthreads that comes before the copies' wait / after it
 *     (deferred copies: the copy is the thread's write at its wait);
 *   - global memory: one block's threads writing one element; blocks adding to one element with a plain
 *     add / with atomicAdd, on 3 OS threads (blocks that run in turn on one OS thread are ordered);
 *   - no false reports: shared memory reused by the next block on the same OS thread, and the host writing
 *     and reading buffers between launches that read and write them;
 *   - streams: a kernel reading what a kernel on another non-blocking stream wrote, without / with an event
 *     wait; the host copying a non-blocking stream's result on the legacy stream, without / with a stream
 *     synchronisation; a blocking stream's result copied on the legacy stream (ordered by CUDA); cp.async and
 *     warp kernels on two unordered streams with disjoint outputs (the simulator's per-thread bookkeeping and
 *     the fibers' stacks are not theirs to share); the host
 *     rewriting pinned memory an asynchronous copy reads, before / after synchronising.
 * Each case runs in a child process (CUDASIM_THREADS as given); a race must end it with TSan's exit code
 * (TSAN_OPTIONS=halt_on_error=1:exitcode=66, set by `make sim-test-races`) and a report that names the
 * kernel; a clean case must exit 0 with no report. Then the test programs named on the command line (race
 * check builds of the kernel tests) run, one check each: exit 0 with "0 failed" (a race report stops them).
 * Built with -fsanitize=thread only.
 */
#include "llmc/cuda_common.cuh"
#include "llmc/mma.cuh"
#include "dev/cudasim/tests/sim_test_util.h"

#include <vector>

#ifndef CUDASIM_TSAN
#error "test_races.cu checks the race check: build it with -fsanitize=thread (make sim-test-races)"
#endif

#define BLOCK 64
#define GRID 6
#define TSAN_EXIT 66

/* thread t writes slot t, then reads slot t+1 (another warp's for t = 31) */
__global__ void smem_neighbour_kernel(int* out, int sync) {
    DYNAMIC_SMEM(int, s);
    int t = threadIdx.x;
    s[t] = t + 1;
    if (sync) __syncthreads();
    out[blockIdx.x * BLOCK + t] = s[(t + 1) % BLOCK];
}

/* the same in a static __shared__ array */
__global__ void static_neighbour_kernel(int* out, int sync) {
    __shared__ int s[BLOCK];
    int t = threadIdx.x;
    s[t] = t + 1;
    if (sync) __syncthreads();
    out[blockIdx.x * BLOCK + t] = s[(t + 1) % BLOCK];
}

/* lane l writes its slot, a shuffle, then lane l reads lane l^1's slot */
__global__ void warp_neighbour_kernel(int* out, int sync) {
    DYNAMIC_SMEM(int, s);
    int t = threadIdx.x;
    s[t] = t + 1;
    int v = __shfl_sync(0xffffffffu, t, 0);
    if (sync) __syncwarp();
    out[blockIdx.x * BLOCK + t] = s[t ^ 1] + v;
}

/* one warp: lane l writes elements 2(l%4), 2(l%4)+1 of row l/4 of an 8x8 bf16 tile, then ldmatrix_x1 reads it */
__global__ void ldmatrix_kernel(uint32_t* out, int sync) {
    DYNAMIC_SMEM(uint32_t, tile);
    int lane = threadIdx.x;
    tile[lane] = 0x00010001u * (unsigned)lane;
    if (sync) __syncwarp();
    uint32_t r[1];
    ldmatrix_x1(r, tile + 4 * (lane % 8));
    out[blockIdx.x * 32 + lane] = r[0];
}

/* thread t copies its 16-byte chunk with cp.async, waits, then reads thread t+1's */
__global__ void cp_async_neighbour_kernel(float* out, const float* in, int sync) {
    DYNAMIC_SMEM(float, s);
    int t = threadIdx.x;
    cp_async_16(s + 4 * t, in + 4 * (blockIdx.x * BLOCK + t));
    cp_async_commit();
    cp_async_wait<0>();
    if (sync) __syncthreads();
    out[blockIdx.x * BLOCK + t] = s[4 * ((t + 1) % BLOCK)];
}

/* thread t copies its chunk with cp.async, then a __syncthreads, then it reads thread t+1's chunk, and only then waits
 * for its own copy (with_wait_first: waits before the barrier, the fix). A GPU may land t+1's copy after t's read. */
__global__ void cp_async_barrier_kernel(float* out, const float* in, int wait_first) {
    DYNAMIC_SMEM(float, s);
    int t = threadIdx.x;
    cp_async_16(s + 4 * t, in + 4 * (blockIdx.x * BLOCK + t));
    cp_async_commit();
    if (wait_first) cp_async_wait<0>();
    __syncthreads();
    out[blockIdx.x * BLOCK + t] = s[4 * ((t + 1) % BLOCK)];
    cp_async_wait<0>();
}

/* every thread of the block writes out[0] */
__global__ void same_element_kernel(int* out) { out[0] = threadIdx.x; }

/* one thread per block adds 1 to out[0] (thread 0, or thread blockIdx % BLOCK when spread) */
__global__ void block_sum_kernel(int* out, int atomic, int spread) {
    if ((int)threadIdx.x != (spread ? (int)blockIdx.x % BLOCK : 0)) return;
    if (atomic) atomicAdd(out, 1);
    else out[0] += 1;
}

/* out[i] = in[i] + 1 over GRID x BLOCK elements */
__global__ void increment_kernel(int* out, const int* in) {
    int i = blockIdx.x * BLOCK + threadIdx.x;
    out[i] = in[i] + 1;
}

/* zeroed device memory; the memset (legacy stream) is waited for, so non-blocking streams may use it */
static int* device_ints(int n) {
    int* p;
    cudaCheck(cudaMalloc(&p, n * sizeof(int)));
    cudaCheck(cudaMemset(p, 0, n * sizeof(int)));
    cudaCheck(cudaDeviceSynchronize());
    return p;
}

/* kernel(out, in, flag) over GRID x BLOCK on `stream` with fresh buffers: in zeroed (the memset waited for), out
 * one float a thread */
static void cp_async_launch(void (*kernel)(float*, const float*, int), cudaStream_t stream, int flag) {
    float *in, *out;
    cudaCheck(cudaMalloc(&in, GRID * BLOCK * 4 * sizeof(float)));
    cudaCheck(cudaMemset(in, 0, GRID * BLOCK * 4 * sizeof(float)));
    cudaCheck(cudaDeviceSynchronize());
    cudaCheck(cudaMalloc(&out, GRID * BLOCK * sizeof(float)));
    launch_kernel(kernel, GRID, BLOCK, BLOCK * 4 * sizeof(float), stream, out, (const float*)in, flag);
}

/* runs fn in a child with `threads` OS threads: a race must be reported in `kernel`, or nothing at all */
template <typename F>
static void check_case(TestCounts& tc, const char* what, const char* threads, bool racy, const char* kernel, F fn) {
    static char buf[1 << 18];
    int status = run_child_stderr(fn, threads, buf, sizeof buf);
    bool reported = strstr(buf, "ThreadSanitizer") != nullptr;
    bool ok = racy ? status == TSAN_EXIT && strstr(buf, "WARNING: ThreadSanitizer: data race") && strstr(buf, kernel)
                   : status == 0 && !reported;
    char line[512];
    snprintf(line, sizeof line, "%s (CUDASIM_THREADS=%s): %s", what, threads, racy ? "race reported" : "no report");
    if (!ok) printf("      exit status %d; stderr begins: %.600s\n", status, buf);
    check(tc, ok, line, 0.0);
}

/* each planted race on one OS thread; each fixed kernel on one (the next block reuses the shared memory) and on three */
static void shared_memory_cases(TestCounts& tc) {
    const char* settings[] = {"1", "1", "3"};
    for (int k = 0; k < 3; k++) {
        int sync = k > 0;
        const char* threads = settings[k];
        /* kernel(out, sync) over GRID x BLOCK with smem bytes of dynamic shared memory */
        auto neighbour_case = [&](const char* fixed, const char* racy, const char* name, void (*kernel)(int*, int), size_t smem) {
            check_case(tc, sync ? fixed : racy, threads, !sync, name, [=] {
                int* out = device_ints(GRID * BLOCK);
                launch_kernel(kernel, GRID, BLOCK, smem, 0, out, sync);
                cudaCheck(cudaDeviceSynchronize());
            });
        };
        neighbour_case("dynamic shared: neighbour read after __syncthreads", "dynamic shared: neighbour read without __syncthreads",
                       "smem_neighbour_kernel", smem_neighbour_kernel, BLOCK * sizeof(int));
        neighbour_case("static shared: neighbour read after __syncthreads", "static shared: neighbour read without __syncthreads",
                       "static_neighbour_kernel", static_neighbour_kernel, 0);
        neighbour_case("warp: neighbour read after a shuffle and __syncwarp", "warp: neighbour read after a shuffle only",
                       "warp_neighbour_kernel", warp_neighbour_kernel, BLOCK * sizeof(int));
        check_case(tc, sync ? "ldmatrix of a tile the warp wrote, after __syncwarp" : "ldmatrix of a tile the warp wrote, no __syncwarp",
                   threads, !sync, "ldmatrix_kernel", [=] {
            uint32_t* out;
            cudaCheck(cudaMalloc(&out, GRID * 32 * sizeof(uint32_t)));
            launch_kernel(ldmatrix_kernel, GRID, 32, 32 * sizeof(uint32_t), 0, out, sync);
            cudaCheck(cudaDeviceSynchronize());
        });
        for (int deferred = 0; deferred < 2; deferred++) {
            char what[128];
            snprintf(what, sizeof what, "cp.async (%s): neighbour's chunk read %s", deferred ? "deferred" : "at issue",
                     sync ? "after __syncthreads" : "after the own wait only");
            check_case(tc, what, threads, !sync, "cp_async_neighbour_kernel", [=] {
                setenv("CUDASIM_CP_ASYNC", deferred ? "deferred" : "issue", 1);
                cp_async_launch(cp_async_neighbour_kernel, 0, sync);
                cudaCheck(cudaDeviceSynchronize());
            });
        }
        check_case(tc, sync ? "cp.async (deferred): neighbour's chunk read after the wait and a __syncthreads"
                            : "cp.async (deferred): neighbour's chunk read after a __syncthreads before the wait",
                   threads, !sync, "cp_async_barrier_kernel", [=] {
            setenv("CUDASIM_CP_ASYNC", "deferred", 1);
            cp_async_launch(cp_async_barrier_kernel, 0, sync);
            cudaCheck(cudaDeviceSynchronize());
        });
    }
}

static void global_memory_cases(TestCounts& tc) {
    check_case(tc, "global: a block's threads write one element", "1", true, "same_element_kernel", [] {
        int* out = device_ints(1);
        launch_kernel(same_element_kernel, 1, BLOCK, 0, 0, out);
        cudaCheck(cudaDeviceSynchronize());
    });
    struct Sum {
        const char* what;
        const char* threads;
        int atomic, spread;
        bool racy;
    } sums[] = {
        {"global: thread 0 of each block adds to one element", "3", 0, 0, true},
        {"global: a different thread of each block adds to one element", "3", 0, 1, true},
        {"global: thread 0 of each block adds with atomicAdd", "3", 1, 0, false},
        {"global: a different thread of each block adds with atomicAdd", "3", 1, 1, false},
    };
    for (const Sum& c : sums)
        check_case(tc, c.what, c.threads, c.racy, "block_sum_kernel", [=] {
            int* out = device_ints(1);
            launch_kernel(block_sum_kernel, GRID, BLOCK, 0, 0, out, c.atomic, c.spread);
            int h = 0;
            cudaCheck(cudaMemcpy(&h, out, sizeof h, cudaMemcpyDeviceToHost));
            if (c.atomic && h != GRID) {
                fprintf(stderr, "error: atomic sum %d, expected %d\n", h, GRID);
                exit(1);
            }
        });
    check_case(tc, "host and launches in turn: buffers written and read on both sides", "3", false, "increment_kernel", [] {
        const int n = GRID * BLOCK;
        int *a = device_ints(n), *b = device_ints(n);
        std::vector<int> h(n);
        for (int round = 0; round < 3; round++) {
            for (int i = 0; i < n; i++) h[i] = round * i;
            cudaCheck(cudaMemcpy(a, h.data(), n * sizeof(int), cudaMemcpyHostToDevice));
            launch_kernel(increment_kernel, GRID, BLOCK, 0, 0, b, (const int*)a);
            launch_kernel(increment_kernel, GRID, BLOCK, 0, 0, a, (const int*)b);
            cudaCheck(cudaMemcpy(h.data(), a, n * sizeof(int), cudaMemcpyDeviceToHost));
            for (int i = 0; i < n; i++)
                if (h[i] != round * i + 2) {
                    fprintf(stderr, "error: element %d is %d, expected %d\n", i, h[i], round * i + 2);
                    exit(1);
                }
        }
    });
}

/* usage: test_races [test program...] */
/* stream cases: one kernel or copy on each side of an ordering that `order` supplies or not */
static void stream_cases(TestCounts& tc) {
    const int n = GRID * BLOCK;
    for (int wait = 0; wait < 2; wait++) {
        check_case(tc, wait ? "streams: a kernel reads another stream's result after cudaStreamWaitEvent"
                            : "streams: a kernel reads another non-blocking stream's result, no event wait",
                   "3", !wait, "increment_kernel", [=] {
            cudaStream_t s1, s2;
            cudaEvent_t done;
            cudaCheck(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
            cudaCheck(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
            cudaCheck(cudaEventCreate(&done));
            int *a = device_ints(n), *b = device_ints(n), *c = device_ints(n);
            launch_kernel(increment_kernel, GRID, BLOCK, 0, s1, b, (const int*)a);
            cudaCheck(cudaEventRecord(done, s1));
            if (wait) cudaCheck(cudaStreamWaitEvent(s2, done, 0));
            launch_kernel(increment_kernel, GRID, BLOCK, 0, s2, c, (const int*)b);
            cudaCheck(cudaDeviceSynchronize());
        });
        check_case(tc, wait ? "streams: the host copies a non-blocking stream's result after cudaStreamSynchronize"
                            : "streams: the host copies a non-blocking stream's result, not synchronised",
                   "3", !wait, "increment_kernel", [=] {
            cudaStream_t s1;
            cudaCheck(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
            int *a = device_ints(n), *b = device_ints(n);
            launch_kernel(increment_kernel, GRID, BLOCK, 0, s1, b, (const int*)a);
            if (wait) cudaCheck(cudaStreamSynchronize(s1));
            std::vector<int> h(n);
            cudaCheck(cudaMemcpy(h.data(), b, n * sizeof(int), cudaMemcpyDeviceToHost));
            cudaCheck(cudaStreamSynchronize(s1));
        });
        check_case(tc, wait ? "streams: the host rewrites pinned memory after the copy that reads it is done"
                            : "streams: the host rewrites pinned memory an asynchronous copy reads",
                   "3", !wait, "memmove", [=] {
            cudaStream_t s1;
            cudaCheck(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
            int* h;
            cudaCheck(cudaMallocHost(&h, n * sizeof(int)));
            for (int i = 0; i < n; i++) h[i] = i;
            int* a = device_ints(n);
            cudaCheck(cudaMemcpyAsync(a, h, n * sizeof(int), cudaMemcpyHostToDevice, s1));
            if (wait) cudaCheck(cudaStreamSynchronize(s1));
            for (int i = 0; i < n; i++) h[i] = -i;
            cudaCheck(cudaStreamSynchronize(s1));
        });
    }
    check_case(tc, "streams: cp.async and warp kernels on two unordered streams, disjoint outputs", "3", false,
               "cp_async_neighbour_kernel", [=] {
        setenv("CUDASIM_CP_ASYNC", "deferred", 1);
        cudaStream_t s1, s2;
        cudaCheck(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
        cudaCheck(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
        cp_async_launch(cp_async_neighbour_kernel, s1, 1);
        cp_async_launch(cp_async_neighbour_kernel, s2, 1);
        int *w1 = device_ints(GRID * BLOCK), *w2 = device_ints(GRID * BLOCK);
        launch_kernel(warp_neighbour_kernel, GRID, BLOCK, BLOCK * sizeof(int), s1, w1, 1);
        launch_kernel(warp_neighbour_kernel, GRID, BLOCK, BLOCK * sizeof(int), s2, w2, 1);
        cudaCheck(cudaDeviceSynchronize());
    });
    check_case(tc, "streams: a blocking stream's result copied on the legacy stream (ordered by CUDA)", "3", false,
               "increment_kernel", [=] {
        cudaStream_t s1;
        cudaCheck(cudaStreamCreate(&s1));
        int *a = device_ints(n), *b = device_ints(n);
        launch_kernel(increment_kernel, GRID, BLOCK, 0, s1, b, (const int*)a);
        std::vector<int> h(n);
        cudaCheck(cudaMemcpy(h.data(), b, n * sizeof(int), cudaMemcpyDeviceToHost));
    });
}

int main(int argc, char** argv) {
    TestCounts tc;
    shared_memory_cases(tc);
    global_memory_cases(tc);
    stream_cases(tc);
    for (int i = 1; i < argc; i++) check_program_under(tc, argv[i], "");
    return finish(tc);
}
