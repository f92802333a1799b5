/*
 * dev/cudasim/cudasim.h — a CPU simulator of CUDA, so that the project's .cu/.cuh sources, compiled by the
 * host C++ compiler with -DCUDASIM (llmc/cuda_common.cuh then includes this header instead of the CUDA
 * headers), run on machines without a GPU and can be compared with the CPU reference.
 *
 * Execution model (cudasim_exec.h)
 *   - A grid's blocks are dealt round-robin over OS threads (an OpenMP team; CUDASIM_THREADS=n sets the
 *     count, default omp_get_max_threads()). Each OS thread owns one executor and runs one block at a
 *     time, to completion.
 *   - A block's threads are fibers on that OS thread, cooperatively scheduled from a FIFO ready queue: a
 *     thread runs until it exits or blocks in __syncthreads / a warp operation, then the next ready thread
 *     runs. The switch is a user-space context switch (x86-64 asm saving the callee-saved registers and
 *     rsp; elsewhere, or with -DCUDASIM_UCONTEXT, glibc swapcontext). Fiber stacks come from one mmap per
 *     executor, CUDASIM_STACK_KB (default 256) each plus a guard page. Scheduling is deterministic, so a
 *     kernel without atomics gives bit-identical results for any number of OS threads.
 *   - Schedule modes, so that ordering bugs FIFO order hides show (a missing __syncthreads/__syncwarp where a
 *     lower-numbered thread writes shared memory a higher-numbered one reads, a read of cp.async data before
 *     the wait): CUDASIM_SCHEDULE, read once per launch, sets the order in which fibers become ready at block
 *     start and when a __syncthreads or warp operation releases them:
 *       fifo (default)   thread order; at a release the releasing thread goes on, the others follow in order;
 *       reverse          descending thread (lane) index, the releasing thread queued with the others;
 *       shuffle[:seed]   a pseudo-random permutation (splitmix64, seeded per block from seed, default 1 —
 *                        deterministic for a seed and independent of the OS thread count).
 *     CUDASIM_CP_ASYNC=issue|deferred (default: issue under fifo, deferred otherwise): deferred cp_async_16
 *     records (dst, src) in the thread's open group and fills dst with 0xFF bytes (NaN as bf16 or fp32);
 *     cp_async_commit closes the group; cp_async_wait<N> copies the groups older than the newest N (a GPU
 *     reads the source by completion too). At most 256 copies pending per thread.
 *   - __syncthreads: an arrival counter and a waiter list, O(1) per arrival; the last arrival puts all
 *     waiters back on the ready queue. Warp operations (__shfl*_sync, __ballot/__all/__any_sync,
 *     __syncwarp, and the mma/ldmatrix wrappers of llmc/mma.cuh) are 32-lane rendezvous: each lane
 *     leaves a pointer to its input and output, the last lane of the mask to arrive computes every
 *     lane's result at once, so the exact CUDA semantics (width, out-of-segment lanes) are one function.
 *   - Static __shared__ is `static thread_local` (all fibers of a block share their OS thread; blocks on
 *     other OS threads get their own copy). Dynamic shared memory: kernels write DYNAMIC_SMEM(T, name)
 *     (llmc/cuda_common.cuh); here it is a malloc'd buffer of exactly the launch's size (so ASan sees
 *     overflows), 128-byte aligned, one per executor and launch, filled with 0xFF bytes (NaN) at the
 *     launch, so a read of shared memory no thread of the block wrote shows (a block after the first on
 *     an executor sees its predecessor's leftovers, as on a GPU).
 *   - threadIdx/blockIdx/blockDim/gridDim read the current fiber and executor (thread_local pointers).
 * Errors a GPU would hide — each is one line "cudasim: error: kernel K block (x,y,z): ..." on stderr and
 * exit status 1:
 *   - __syncthreads reached at different call sites by threads of one block, or while some threads of the
 *     block have exited, or a thread exiting while others wait at a barrier;
 *   - a warp operation whose mask lacks the calling lane, names lanes that do not exist, names a lane that
 *     has exited, or whose lanes disagree on the operation, mask or width; a deadlock (every remaining
 *     thread blocked) is reported with what each group waits for.
 *   - deferred cp.async: a thread exiting with copies not waited for (a GPU would complete them, but the
 *     project's kernels always wait), or more than 256 pending in one thread; a bad CUDASIM_SCHEDULE or
 *     CUDASIM_CP_ASYNC value.
 *   - Launch checks (returned through cudaGetLastError, as on a GPU): block dims > (1024,1024,64) or
 *     more than 1024 threads, grid dims > (2^31-1,65535,65535), zero dims, dynamic shared memory above
 *     48 KiB, or above the cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize) value
 *     (at most 227 KiB, or CUDASIM_SMEM_OPTIN bytes); a cudaMalloc beyond 80 GiB in all (or the host's
 *     physical memory where less, or CUDASIM_MEM_BYTES)
 *     fails with cudaErrorMemoryAllocation.
 *   - Out-of-bounds global accesses are caught by AddressSanitizer (the sim tests build with
 *     -fsanitize=address,undefined; fiber switches are annotated for ASan).
 * Host/device memory checks (simulated device memory is host memory, so code that hands a GPU host memory
 * would otherwise work here): the allocation table is ordered, so the cudaMalloc allocation holding any
 * address is found. Each failure prints one line "cudasim: error: <call>: ..." (the fake libraries: their
 * own "<function>: ..." line) beside the caller's cudaCheck line:
 *   - cudaMemcpy/cudaMemcpyAsync: each side the kind says is device memory must lie wholly inside one
 *     cudaMalloc allocation ([p, p + bytes)), each side it says is host memory must not be in one (pinned or
 *     pageable host memory both count as host); cudaMemcpyDefault takes a side that starts in an allocation
 *     as device memory (which must then fit it) and anything else as host memory, as unified addressing
 *     does. cudaMemset/cudaMemsetAsync: [p, p + bytes) inside one cudaMalloc allocation. Else
 *     cudaErrorInvalidValue (what CUDA returns for a pointer of the wrong kind), nothing copied.
 *   - kernel launches: every non-NULL raw pointer argument must point into a cudaMalloc allocation or
 *     pinned host memory (cudaMallocHost, mapped into the device's address space on a GPU), start through
 *     one past the end; a pointer to pageable host memory makes the launch fail with cudaErrorInvalidValue
 *     (nothing runs) and a line naming the kernel, the argument index and the launch text (a GPU without
 *     HMM/ATS launches it, faults when the kernel touches that memory, and reports cudaErrorIllegalAddress
 *     at a later synchronisation: here the failure is at the launch, so it names the culprit). Pointers
 *     inside struct arguments are not checked, nor how far past the pointer a kernel reads (ASan does that).
 *   - the fake NCCL (fake_nccl.h): send/recv buffers must be cudaMalloc memory over the bytes the collective
 *     touches, else ncclInvalidArgument. The fake cuBLAS/cuBLASLt (fake_cublaslt.h): A, B, C (when read),
 *     D over their layouts' extent, the epilogue's bias and aux, the workspace, and device-mode alpha/beta
 *     must be cudaMalloc memory (host-mode alpha/beta must not), and workspaceSizeInBytes must cover the
 *     heuristic's workspaceSize, else CUBLAS_STATUS_INVALID_VALUE.
 *   Stricter than a GPU where CUDA's behaviour is undefined rather than an error (a copy whose kind
 *   contradicts its pointers, memset or NCCL buffers in pinned host memory); looser where the real failure
 *   would come later (a device pointer freed before a queued kernel runs is not checked).
 * Race check (make sim-test-races): built with -fsanitize=thread instead, each simulated thread is a
 * ThreadSanitizer fiber, and each stream's work runs as a fiber of its own; only the orderings CUDA
 * guarantees (__syncthreads, __syncwarp, stream order, event waits, host synchronisation, the legacy
 * stream's implicit ordering) are happens-before edges, so two unordered accesses to one address (one a
 * write, not both atomic) are reported whatever order the fibers ran in: a missing barrier before a
 * shared-memory read, a read of another thread's cp.async data after only its own wait, two threads or
 * blocks writing one global element, a missing event wait between streams or host synchronisation.
 * Shuffles, ballots, mma and ldmatrix order no memory. Blocks run in turn on one OS thread are ordered;
 * blocks on different OS threads (block b on b % CUDASIM_THREADS) are checked against each other. Details
 * in cudasim_exec.h (device side) and cudasim_race.h (streams).
 * Limits (documented, not hidden): one pending rendezvous per warp, so two disjoint lane groups of one
 * warp doing warp operations with different masks at the same time are reported as a mask mismatch;
 * a shuffle reading a lane outside the mask gets 0xFFFF... (NaN for floats) instead of undefined data;
 * the schedule modes reorder fibers only at block start, barriers and warp operations (a fiber runs each
 * stretch between them whole), so a race shows when some order of whole stretches exposes it, and a
 * non-fifo mode tries one order per seed, not all; static shared memory is not counted
 * against the shared-memory limit; streams are synchronous unless CUDASIM_STREAMS says otherwise
 * (cudasim_runtime.h: deferred orders that expose a missing event wait or host synchronisation);
 * __launch_bounds__ is ignored (a GPU refuses a launch of more threads than its maximum: the kernels
 * launch through helpers that use the bound's own constant); float atomicAdd on global memory keeps
 * subnormal sums (a GPU flushes them to zero there); mma accumulates k in order with fp32 rounding at
 * each step and ex2.approx is exp2f (the GPU's accumulation order and rounding are unspecified, its
 * ex2.approx within 2 ulp), so results agree with a GPU's to tolerance, not to the bit.
 *
 * Global mutable state (all documented here): the allocation table (cudasim_runtime.h, an ordered map of
 * start -> size, mutex-guarded), the
 * per-function dynamic-smem limits set by cudaFuncSetAttribute (mutex-guarded), the deferred streams' mode,
 * default stream, stream list, queue lock and pinned-allocation table (cudasim_runtime.h), and
 * thread_local: the last error, the current executor and fiber; in the race-check build, the stream whose
 * work runs and the call on its stack (cudasim_race.h, cudasim_exec.h); the fake NCCL's open group
 * (fake_nccl.h). Each executor holds the current launch's schedule mode, its shuffle
 * generator and deferred cp.async slots (allocated per launch, freed at its end).
 */
#ifndef CUDASIM_H
#define CUDASIM_H

#ifndef __cplusplus
#error "cudasim.h is C++ (compile the .cu sources with g++ -x c++ -DCUDASIM)"
#endif

#include <math.h>
#include <stdint.h>
#include <stddef.h>
#include <algorithm>
/* the standard headers the simulator uses, before __noinline__ is defined (libstdc++ spells
 * __attribute__((__noinline__))) */
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

/* ---- function and variable qualifiers ---- */
#define __global__
#define __device__
#define __host__
#define __constant__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static thread_local

/* ---- vector types (alignment as in CUDA's vector_types.h) ---- */
#define CUDASIM_VEC2(T, name, align) \
    struct alignas(align) name { T x, y; }; \
    static inline name make_##name(T x, T y) { name v; v.x = x; v.y = y; return v; }
#define CUDASIM_VEC3(T, name) \
    struct name { T x, y, z; }; \
    static inline name make_##name(T x, T y, T z) { name v; v.x = x; v.y = y; v.z = z; return v; }
#define CUDASIM_VEC4(T, name, align) \
    struct alignas(align) name { T x, y, z, w; }; \
    static inline name make_##name(T x, T y, T z, T w) { name v; v.x = x; v.y = y; v.z = z; v.w = w; return v; }
CUDASIM_VEC2(float, float2, 8)
CUDASIM_VEC3(float, float3)
CUDASIM_VEC4(float, float4, 16)
CUDASIM_VEC2(double, double2, 16)
CUDASIM_VEC2(int, int2, 8)
CUDASIM_VEC3(int, int3)
CUDASIM_VEC4(int, int4, 16)
CUDASIM_VEC2(unsigned int, uint2, 8)
CUDASIM_VEC3(unsigned int, uint3)
CUDASIM_VEC4(unsigned int, uint4, 16)
CUDASIM_VEC2(short, short2, 4)
CUDASIM_VEC2(unsigned short, ushort2, 4)
CUDASIM_VEC4(unsigned short, ushort4, 8)
CUDASIM_VEC4(unsigned char, uchar4, 4)
CUDASIM_VEC4(signed char, char4, 4)
CUDASIM_VEC2(long long, longlong2, 16)
CUDASIM_VEC2(unsigned long long, ulonglong2, 16)
#undef CUDASIM_VEC2
#undef CUDASIM_VEC3
#undef CUDASIM_VEC4

struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const { return uint3{x, y, z}; }
};

#include "cudasim_bf16.h"
#include "cudasim_race.h"
#include "cudasim_runtime.h"
#include "cudasim_exec.h"
#include "cudasim_device.h"

#endif /* CUDASIM_H */
