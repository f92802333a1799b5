/*
 * dev/cudasim/cudasim_runtime.h — the CUDA runtime API subset of the simulator (host side).
 *
 * Memory: cudaMalloc is posix_memalign(256, exact size), so AddressSanitizer puts its redzone right after
 * the last byte and reports any out-of-bounds global access; it is filled with 0xFF bytes (NaN as fp32 and
 * bf16), so code that reads device memory it never wrote, which a GPU leaves holding leftovers, fails.
 * Allocations are tracked (a mutex-guarded ordered map, start -> size) for cudaFree validation,
 * cudaMemGetInfo and the host/device memory checks (find_alloc: the allocation holding an address; copies,
 * memsets, kernel arguments and the fake libraries' buffers are checked against it, see cudasim.h). The
 * device is one H100-class device.
 * Streams (CUDASIM_STREAMS, read once per process):
 *   sync (default)  all work runs at the call, so every stream is trivially ordered;
 *   deferred        work (kernels, async copies and memsets, the fake cuBLAS/cuBLASLt/NCCL calls) is queued
 *                   on its stream and runs as late as CUDA allows: when the host synchronises with it
 *                   (cudaStreamSynchronize, cudaEventSynchronize/Query, cudaDeviceSynchronize, cudaFree,
 *                   a synchronous cudaMemcpy, a copy to pageable host memory), or when other work that must
 *                   follow it runs (cudaStreamWaitEvent; the legacy default stream and the blocking streams
 *                   wait for each other's earlier work; non-blocking streams wait for nothing implicit).
 *                   Other streams' work stays queued, so a consumer on stream A of what stream B makes
 *                   runs before B's producer unless A waits for it;
 *   deferred:others-first   the same, but a host synchronisation first runs every other stream's queued
 *                   work, then the stream waited for: the opposite order of unordered streams;
 *   deferred:shuffle:SEED   at each host synchronisation one of the two, drawn (splitmix64 from SEED, the
 *                   same sequence in every process of an MPI job, whose calls are the same).
 *                   A missing event wait or host synchronisation then reads stale data or lets an overwrite
 *                   come first, as it may on a GPU, in some of these orders.
 *                   Copies from pageable host memory read it at the call (CUDA stages them); from pinned
 *                   memory (cudaMallocHost) when they run. Events time their execution.
 * Errors: each call returns its cudaError_t and also records it as the calling host thread's last error
 * (cudaGetLastError reads and clears it, cudaPeekAtLastError only reads). In deferred mode a queued fake
 * library call that fails prints its error and exits with status 1.
 * Included by cudasim.h; not meant to be included on its own.
 */
#ifndef CUDASIM_RUNTIME_H
#define CUDASIM_RUNTIME_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

typedef enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevicePointer = 17,
    cudaErrorInvalidMemcpyDirection = 21,
    cudaErrorInvalidDeviceFunction = 98,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorNotReady = 600,
    cudaErrorIllegalAddress = 700,
    cudaErrorLaunchOutOfResources = 701,
    cudaErrorLaunchFailure = 719,
    cudaErrorNotSupported = 801,
    cudaErrorUnknown = 999
} cudaError_t;

typedef enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4
} cudaMemcpyKind;

typedef enum cudaFuncAttribute {
    cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
    cudaFuncAttributePreferredSharedMemoryCarveout = 9
} cudaFuncAttribute;

typedef enum cudaDeviceAttr {
    cudaDevAttrMaxThreadsPerBlock = 1,
    cudaDevAttrMaxSharedMemoryPerBlock = 8,
    cudaDevAttrWarpSize = 10,
    cudaDevAttrMultiProcessorCount = 16,
    cudaDevAttrComputeCapabilityMajor = 75,
    cudaDevAttrComputeCapabilityMinor = 76,
    cudaDevAttrMaxSharedMemoryPerMultiprocessor = 81,
    cudaDevAttrMaxSharedMemoryPerBlockOptin = 97
} cudaDeviceAttr;

#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
#define cudaEventDefault 0x00
#define cudaEventBlockingSync 0x01
#define cudaEventDisableTiming 0x02
#define cudaHostAllocDefault 0x00

typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;
/* queue: deferred work not yet run; enqueued/executed: tickets (counts) of work queued and run so far (in
 * both modes); race: the race check's context (cudasim_race.h) */
struct CUstream_st {
    unsigned flags;
    std::deque<std::function<void()>> queue;
    unsigned long long enqueued, executed;
    cudasim::RaceStream race;
};
/* the last record: its stream and ticket (recorded = 1 once that work ran, recorded_ms its time) */
struct CUevent_st {
    unsigned flags;
    double recorded_ms;
    int recorded;
    CUstream_st* stream;
    unsigned long long ticket;
};

/* The device properties the project reads; values of an H100 SXM (sm_90, 132 SMs, 80 GB). */
struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem;
    size_t sharedMemPerBlock;
    size_t sharedMemPerBlockOptin;
    size_t sharedMemPerMultiprocessor;
    int regsPerBlock;
    int warpSize;
    int maxThreadsPerBlock;
    int maxThreadsDim[3];
    int maxGridSize[3];
    int maxThreadsPerMultiProcessor;
    int multiProcessorCount;
    int major, minor;
    int l2CacheSize;
    int memoryBusWidth;
    size_t totalConstMem;
};

namespace cudasim {

constexpr size_t kSmemDefaultMax = 48 * 1024;   /* dynamic smem without cudaFuncSetAttribute */

/* The simulated device's memory (default 80 GiB, or the host's physical memory where that is less: device memory
 * is host memory here, so a program then fails its memory check instead of being killed by the host's; memory
 * already in use, a container's limit and the other ranks of an mpirun are not counted, so a model between what
 * is available and the total can still be killed: set CUDASIM_MEM_BYTES there) and per-block
 * shared-memory opt-in maximum (default the H100's 227 KiB), or a smaller GPU's: CUDASIM_MEM_BYTES,
 * CUDASIM_SMEM_OPTIN (bytes; an A100 has 166912, sm_86/89 parts 101376), so tests can check how a program meets
 * these limits. An SM's shared memory is the opt-in maximum plus the 1 KiB a block reserves (the H100's 228 KiB). */
inline size_t env_bytes(const char* name, size_t fallback) {
    const char* s = getenv(name);
    if (!s || !*s) return fallback;
    char* end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || v == 0) {
        fprintf(stderr, "cudasim: error: %s=%s is not a positive number of bytes\n", name, s);
        exit(1);
    }
    return (size_t)v;
}
inline size_t default_mem_bytes() {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    size_t device = 80ull << 30, host = pages > 0 && page > 0 ? (size_t)pages * (size_t)page : device;
    return host < device ? host : device;
}
inline size_t global_mem_bytes() { return env_bytes("CUDASIM_MEM_BYTES", default_mem_bytes()); }
inline size_t smem_optin_max() { return env_bytes("CUDASIM_SMEM_OPTIN", 227 * 1024); }
constexpr unsigned kMaxThreadsPerBlock = 1024;

inline thread_local cudaError_t t_last_error = cudaSuccess;

/* records err as the thread's last error (sticky until read) and returns it */
inline cudaError_t set_error(cudaError_t err) {
    if (err != cudaSuccess) t_last_error = err;
    return err;
}

/* the process-wide allocation table: start -> size (ordered, so that the allocation holding an address is
 * found), and the bytes in use */
struct AllocTable {
    std::mutex lock;
    std::map<const char*, size_t> sizes;
    size_t bytes_in_use = 0;
};
inline AllocTable& alloc_table() { static AllocTable t; return t; }

/* The cudaMalloc allocation holding address p (start <= p < start + size; with end_ok also p == start + size,
 * a one-past-the-end pointer): true, with its start and size. */
inline bool find_alloc(const void* p, bool end_ok, const char** start = nullptr, size_t* size = nullptr) {
    AllocTable& t = alloc_table();
    std::lock_guard<std::mutex> guard(t.lock);
    const char* c = (const char*)p;
    auto it = t.sizes.upper_bound(c);
    if (it == t.sizes.begin()) return false;
    --it;
    if (!(c < it->first + it->second || (end_ok && c == it->first + it->second))) return false;
    if (start) *start = it->first;
    if (size) *size = it->second;
    return true;
}
/* whether [p, p + bytes) lies wholly inside one cudaMalloc allocation (bytes == 0: p in one, or one past its end) */
inline bool device_range(const void* p, size_t bytes) {
    const char* start = nullptr;
    size_t size = 0;
    if (!p || !find_alloc(p, bytes == 0, &start, &size)) return false;
    return bytes <= size - (size_t)((const char*)p - start);
}

inline double now_ms() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* pinned host allocations (cudaMallocHost): start -> size */
struct PinnedTable {
    std::mutex lock;
    std::map<const char*, size_t> sizes;
};
inline PinnedTable& pinned_table() { static PinnedTable t; return t; }
/* whether p is in a cudaMallocHost allocation (with end_ok also one past its end: a kernel's end pointer) */
inline bool is_pinned(const void* p, bool end_ok = false) {
    PinnedTable& t = pinned_table();
    std::lock_guard<std::mutex> guard(t.lock);
    auto it = t.sizes.upper_bound((const char*)p);
    if (it == t.sizes.begin()) return false;
    --it;
    return (const char*)p < it->first + it->second || (end_ok && (const char*)p == it->first + it->second);
}
/* What memory p points at, for the messages of the host/device memory checks: "device memory (offset O of
 * a cudaMalloc allocation of N bytes)", "pinned host memory (cudaMallocHost)", or "pageable host memory". */
inline const char* describe_memory(const void* p, char* buf, size_t n) {
    const char* start = nullptr;
    size_t size = 0;
    if (!p) snprintf(buf, n, "NULL");
    else if (find_alloc(p, true, &start, &size))
        snprintf(buf, n, "device memory (offset %zu of a cudaMalloc allocation of %zu bytes)", (size_t)((const char*)p - start), size);
    else if (is_pinned(p, true)) snprintf(buf, n, "pinned host memory (cudaMallocHost)");
    else snprintf(buf, n, "pageable host memory (neither cudaMalloc nor cudaMallocHost)");
    return buf;
}
/* Why [p, p + bytes) is not device memory, into buf: "is not device memory: it is pinned host memory
 * (cudaMallocHost)" / "... pageable host memory (...)", or "runs past the end of its cudaMalloc allocation (...)". */
inline const char* device_range_problem(const void* p, size_t bytes, char* buf, size_t n) {
    const char* start = nullptr;
    size_t size = 0;
    char desc[160];
    if (p && find_alloc(p, true, &start, &size))
        snprintf(buf, n, "runs past the end of its cudaMalloc allocation (it starts at offset %zu of %zu bytes)",
                 (size_t)((const char*)p - start), size);
    else snprintf(buf, n, "is not device memory: it is %s", describe_memory(p, desc, sizeof desc));
    return buf;
}
/* The host/device memory check of an API call that needs device memory: true if [p, p + bytes) lies inside
 * one cudaMalloc allocation; else prints "cudasim: error: <call>: <what> <p> (<bytes> bytes) <why>" to
 * stderr and returns false. */
inline bool check_device_memory(const char* call, const char* what, const void* p, size_t bytes) {
    if (device_range(p, bytes)) return true;
    char why[200];
    fflush(stdout);
    fprintf(stderr, "cudasim: error: %s: %s %p (%zu bytes) %s\n", call, what, p, bytes, device_range_problem(p, bytes, why, sizeof why));
    return false;
}
/* ... and of a call that needs host memory: true unless p is in a cudaMalloc allocation */
inline bool check_host_memory(const char* call, const char* what, const void* p) {
    if (!find_alloc(p, false)) return true;
    char desc[160];
    fflush(stdout);
    fprintf(stderr, "cudasim: error: %s: %s %p is %s, but the copy kind says host memory\n", call, what, p,
            describe_memory(p, desc, sizeof desc));
    return false;
}

/* ---- deferred streams (CUDASIM_STREAMS=deferred; see the top comment) ----
 * Global state: the mode (and deferred:shuffle's generator), the legacy default stream, the list of
 * created streams and the lock over all queues (recursive: running one stream's work may run another's
 * first); the table of pinned host allocations. Streams are not freed (cudaStreamDestroy runs their work),
 * so the tickets other work and events hold never dangle. */
enum StreamMode { STREAMS_SYNC, STREAMS_DEFERRED, STREAMS_OTHERS_FIRST, STREAMS_SHUFFLE };
struct StreamSetting {
    StreamMode mode;
    unsigned long long state; /* deferred:shuffle's generator */
};
inline StreamSetting& stream_setting() {
    static StreamSetting setting = [] {
        const char* v = getenv("CUDASIM_STREAMS");
        char* end = nullptr;
        if (!v || !*v || strcmp(v, "sync") == 0) return StreamSetting{STREAMS_SYNC, 0};
        if (strcmp(v, "deferred") == 0) return StreamSetting{STREAMS_DEFERRED, 0};
        if (strcmp(v, "deferred:others-first") == 0) return StreamSetting{STREAMS_OTHERS_FIRST, 0};
        if (strncmp(v, "deferred:shuffle:", 17) == 0 && v[17] >= '0' && v[17] <= '9') {
            unsigned long long seed = strtoull(v + 17, &end, 10);
            if (*end == 0) return StreamSetting{STREAMS_SHUFFLE, seed};
        }
        fprintf(stderr, "cudasim: error: CUDASIM_STREAMS=%s: expected sync, deferred, deferred:others-first or "
                        "deferred:shuffle:<decimal seed>\n", v);
        exit(1);
    }();
    return setting;
}
inline bool deferred_streams() { return stream_setting().mode != STREAMS_SYNC; }
/* whether this host synchronisation runs the other streams first */
inline bool others_first() {
    StreamSetting& s = stream_setting();
    if (s.mode != STREAMS_SHUFFLE) return s.mode == STREAMS_OTHERS_FIRST;
    unsigned long long z = (s.state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return ((z ^ (z >> 31)) >> 63) != 0;
}
inline std::recursive_mutex& stream_lock() { static std::recursive_mutex m; return m; }
inline CUstream_st* legacy_stream() { static CUstream_st s{0, {}, 0, 0, {}}; return &s; }
inline std::vector<CUstream_st*>& created_streams() { static std::vector<CUstream_st*> v; return v; }
inline CUstream_st* stream_of(cudaStream_t s) { return s ? s : legacy_stream(); }

/* the race check: what waits for st's work up to ticket acquires that work's clock */
inline void race_wait_for(CUstream_st* st, unsigned long long ticket) { race_acquire(race_token(st->race, ticket)); }

/* runs a piece of work and frees it: its objects, which its stream read, are the host's to free (untracked) */
inline void run_work(std::function<void()>& work) {
    work();
    Untracked untracked;
    work = nullptr;
}

/* runs st's queued work up to and including ticket */
inline void run_until(CUstream_st* st, unsigned long long ticket) {
    std::lock_guard<std::recursive_mutex> guard(stream_lock());
    while (st->executed < ticket && !st->queue.empty()) {
        std::function<void()> work = std::move(st->queue.front());
        st->queue.pop_front();
        st->executed++;
        run_work(work);
    }
}
inline void run_all(CUstream_st* st) { run_until(st, st->enqueued); }
/* the host waits for the whole device */
inline void device_sync() {
    std::lock_guard<std::recursive_mutex> guard(stream_lock());
    run_all(legacy_stream());
    race_wait_for(legacy_stream(), legacy_stream()->enqueued);
    for (CUstream_st* st : created_streams()) {
        run_all(st);
        race_wait_for(st, st->enqueued);
    }
}
/* the host waits for st's work up to ticket: deferred:others-first runs the other streams' work first */
inline void host_wait(CUstream_st* st, unsigned long long ticket) {
    std::lock_guard<std::recursive_mutex> guard(stream_lock());
    if (others_first()) {
        if (st != legacy_stream()) run_all(legacy_stream());
        for (CUstream_st* other : created_streams())
            if (other != st) run_all(other);
    }
    run_until(st, ticket);
    race_wait_for(st, ticket);
}

/* work on one stream up to a ticket */
typedef std::vector<std::pair<CUstream_st*, unsigned long long>> StreamPoints;

/* Queues work on stream s (runs it now in sync mode) and returns its ticket. It runs after the work of
 * `after` (a cudaStreamWaitEvent's record); work on the legacy stream after the blocking streams' earlier
 * work, work on a blocking stream after the legacy stream's. The waiting and the queues are the host's;
 * the work itself runs as the stream in the race check. */
inline unsigned long long enqueue(cudaStream_t s, std::function<void()> work, StreamPoints after = {}) {
    std::lock_guard<std::recursive_mutex> guard(stream_lock());
    CUstream_st* st = stream_of(s);
    StreamPoints before = std::move(after);
    if (st == legacy_stream()) {
        for (CUstream_st* other : created_streams())
            if (!(other->flags & cudaStreamNonBlocking)) before.push_back({other, other->enqueued});
    } else if (!(st->flags & cudaStreamNonBlocking)) {
        before.push_back({legacy_stream(), legacy_stream()->enqueued});
    }
    const char* token = race_new_token(st->race);
    std::function<void()> item = [st, before = std::move(before), token, work = std::move(work)] {
        std::vector<const char*> waits;
        for (const auto& b : before) {
            run_until(b.first, b.second);
            waits.push_back(race_token(b.first->race, b.second));
        }
        race_as_stream(st->race, st, token, waits, work);
    };
    race_release(token); /* the host's work so far happens before this work */
    unsigned long long ticket = ++st->enqueued;
    if (deferred_streams()) {
        st->queue.push_back(std::move(item));
    } else {
        st->executed++;
        run_work(item);
    }
    return ticket;
}

} /* namespace cudasim */

inline const char* cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorInvalidDeviceFunction: return "invalid device function";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchOutOfResources: return "too many resources requested for launch";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorNotSupported: return "operation not supported";
    default: return "unknown error";
    }
}
inline const char* cudaGetErrorName(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorInvalidDeviceFunction: return "cudaErrorInvalidDeviceFunction";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorLaunchOutOfResources: return "cudaErrorLaunchOutOfResources";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorNotSupported: return "cudaErrorNotSupported";
    default: return "cudaErrorUnknown";
    }
}
inline cudaError_t cudaGetLastError(void) {
    cudaError_t e = cudasim::t_last_error;
    cudasim::t_last_error = cudaSuccess;
    return e;
}
inline cudaError_t cudaPeekAtLastError(void) { return cudasim::t_last_error; }

/* ---- device management: one device, ordinal 0 ---- */
/* the versions a CUDA 13.0 driver and runtime report (1000 x major + 10 x minor) */
inline cudaError_t cudaDriverGetVersion(int* version) { *version = 13000; return cudaSuccess; }
inline cudaError_t cudaRuntimeGetVersion(int* version) { *version = 13000; return cudaSuccess; }
inline cudaError_t cudaGetDeviceCount(int* count) { *count = 1; return cudaSuccess; }
inline cudaError_t cudaSetDevice(int dev) { return cudasim::set_error(dev == 0 ? cudaSuccess : cudaErrorInvalidDevice); }
inline cudaError_t cudaGetDevice(int* dev) { *dev = 0; return cudaSuccess; }
inline cudaError_t cudaDeviceReset(void) { return cudaSuccess; }
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int dev) {
    if (dev != 0) return cudasim::set_error(cudaErrorInvalidDevice);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "cudasim H100 (simulated on CPU)");
    p->totalGlobalMem = cudasim::global_mem_bytes();
    p->sharedMemPerBlock = cudasim::kSmemDefaultMax;
    p->sharedMemPerBlockOptin = cudasim::smem_optin_max();
    p->sharedMemPerMultiprocessor = cudasim::smem_optin_max() + 1024;
    p->regsPerBlock = 65536;
    p->warpSize = 32;
    p->maxThreadsPerBlock = (int)cudasim::kMaxThreadsPerBlock;
    p->maxThreadsDim[0] = 1024; p->maxThreadsDim[1] = 1024; p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 2147483647; p->maxGridSize[1] = 65535; p->maxGridSize[2] = 65535;
    p->maxThreadsPerMultiProcessor = 2048;
    p->multiProcessorCount = 132;
    p->major = 9; p->minor = 0;
    p->l2CacheSize = 50 * 1024 * 1024;
    p->memoryBusWidth = 5120;
    p->totalConstMem = 65536;
    return cudaSuccess;
}
inline cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int dev) {
    cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, dev);
    if (e != cudaSuccess) return e;
    switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = (int)p.sharedMemPerBlock; break;
    case cudaDevAttrWarpSize: *value = p.warpSize; break;
    case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
    case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = (int)p.sharedMemPerBlockOptin; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *value = (int)p.sharedMemPerMultiprocessor; break;
    default: return cudasim::set_error(cudaErrorInvalidValue);
    }
    return cudaSuccess;
}

/* ---- memory ---- */
inline cudaError_t cudaMalloc(void** ptr, size_t bytes) {
    cudasim::AllocTable& t = cudasim::alloc_table();
    std::lock_guard<std::mutex> guard(t.lock);
    *ptr = NULL;
    if (bytes > cudasim::global_mem_bytes() - t.bytes_in_use) return cudasim::set_error(cudaErrorMemoryAllocation);
    void* p = NULL;
    if (posix_memalign(&p, 256, bytes ? bytes : 1) != 0) return cudasim::set_error(cudaErrorMemoryAllocation);
    memset(p, 0xFF, bytes); /* a GPU's fresh memory holds leftovers: NaN here, so a read before a write shows */
    t.sizes[(const char*)p] = bytes;
    t.bytes_in_use += bytes;
    *ptr = p;
    return cudaSuccess;
}
template <typename T>
inline cudaError_t cudaMalloc(T** ptr, size_t bytes) { return cudaMalloc((void**)ptr, bytes); }
inline cudaError_t cudaFree(void* ptr) {
    if (ptr == NULL) return cudaSuccess;
    cudasim::device_sync(); /* cudaFree synchronises the device */
    cudasim::AllocTable& t = cudasim::alloc_table();
    std::lock_guard<std::mutex> guard(t.lock);
    auto it = t.sizes.find((const char*)ptr);
    if (it == t.sizes.end()) return cudasim::set_error(cudaErrorInvalidDevicePointer);
    t.bytes_in_use -= it->second;
    t.sizes.erase(it);
    free(ptr);
    return cudaSuccess;
}
/* pinned host memory is ordinary host memory here (not counted as device memory) */
inline cudaError_t cudaMallocHost(void** ptr, size_t bytes) {
    *ptr = malloc(bytes ? bytes : 1);
    if (!*ptr) return cudasim::set_error(cudaErrorMemoryAllocation);
    cudasim::PinnedTable& t = cudasim::pinned_table();
    std::lock_guard<std::mutex> guard(t.lock);
    t.sizes[(const char*)*ptr] = bytes ? bytes : 1;
    return cudaSuccess;
}
template <typename T>
inline cudaError_t cudaMallocHost(T** ptr, size_t bytes) { return cudaMallocHost((void**)ptr, bytes); }
inline cudaError_t cudaFreeHost(void* ptr) {
    cudasim::device_sync();
    {
        cudasim::PinnedTable& t = cudasim::pinned_table();
        std::lock_guard<std::mutex> guard(t.lock);
        t.sizes.erase((const char*)ptr);
    }
    free(ptr);
    return cudaSuccess;
}
inline cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
    cudasim::AllocTable& t = cudasim::alloc_table();
    std::lock_guard<std::mutex> guard(t.lock);
    *free_bytes = cudasim::global_mem_bytes() - t.bytes_in_use;
    *total_bytes = cudasim::global_mem_bytes();
    return cudaSuccess;
}
namespace cudasim {
inline const char* memcpy_kind_name(cudaMemcpyKind kind) {
    static const char* const names[] = {"cudaMemcpyHostToHost", "cudaMemcpyHostToDevice", "cudaMemcpyDeviceToHost",
                                        "cudaMemcpyDeviceToDevice", "cudaMemcpyDefault"};
    return (unsigned)kind <= (unsigned)cudaMemcpyDefault ? names[kind] : "?";
}
/* A copy on `stream` (fn: the API call's name, for messages). Host/device memory check: each side the kind
 * says is device memory must lie wholly inside one cudaMalloc allocation, each side it says is host memory
 * must not be in one (pinned or pageable host memory), else cudaErrorInvalidValue and a line on stderr; with
 * cudaMemcpyDefault (unified addressing) each side is device memory if it starts in an allocation (and must
 * then fit it), host memory otherwise. The source is read at the call when it is pageable host memory
 * (staged), else when the copy runs; a copy into pageable host memory returns when it is done. */
inline cudaError_t memcpy_on(const char* fn, void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
    if ((unsigned)kind > (unsigned)cudaMemcpyDefault) return set_error(cudaErrorInvalidMemcpyDirection);
    if (bytes && (!dst || !src)) return set_error(cudaErrorInvalidValue);
    if (!bytes) return cudaSuccess;
    bool host_src = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyHostToHost;
    bool host_dst = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyHostToHost;
    if (kind == cudaMemcpyDefault) {
        host_src = !find_alloc(src, false);
        host_dst = !find_alloc(dst, false);
    }
    char call[96];
    snprintf(call, sizeof call, "%s(%s)", fn, memcpy_kind_name(kind));
    bool ok = host_src ? check_host_memory(call, "src", src) : check_device_memory(call, "src", src, bytes);
    ok = (host_dst ? check_host_memory(call, "dst", dst) : check_device_memory(call, "dst", dst, bytes)) && ok;
    if (!ok) return set_error(cudaErrorInvalidValue);
    CUstream_st* st = stream_of(stream);
    if (host_src && host_dst) {
        host_wait(st, st->enqueued);
        memmove(dst, src, bytes);
        return cudaSuccess;
    }
    unsigned long long ticket;
    if (deferred_streams() && host_src && !is_pinned(src)) {
        std::vector<char> staged((const char*)src, (const char*)src + bytes);
        ticket = enqueue(stream, [dst, staged = std::move(staged)] { memcpy(dst, staged.data(), staged.size()); });
    } else {
        ticket = enqueue(stream, [dst, src, bytes] { memmove(dst, src, bytes); });
    }
    if (host_dst && !is_pinned(dst)) host_wait(st, ticket);
    return cudaSuccess;
}
/* a memset of device memory: [dst, dst + bytes) must lie inside one cudaMalloc allocation */
inline cudaError_t memset_on(const char* fn, void* dst, int value, size_t bytes, cudaStream_t stream) {
    if (bytes && !dst) return set_error(cudaErrorInvalidValue);
    if (!bytes) return cudaSuccess;
    if (!check_device_memory(fn, "devPtr", dst, bytes)) return set_error(cudaErrorInvalidValue);
    enqueue(stream, [dst, value, bytes] { memset(dst, value, bytes); });
    return cudaSuccess;
}
} /* namespace cudasim */

inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream = 0) {
    return cudasim::memcpy_on("cudaMemcpyAsync", dst, src, bytes, kind, stream);
}
/* on the legacy default stream, returning when done */
inline cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    cudaError_t err = cudasim::memcpy_on("cudaMemcpy", dst, src, bytes, kind, 0);
    CUstream_st* legacy = cudasim::legacy_stream();
    if (err == cudaSuccess) cudasim::host_wait(legacy, legacy->enqueued);
    return err;
}
inline cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream = 0) {
    return cudasim::memset_on("cudaMemsetAsync", dst, value, bytes, stream);
}
/* on the legacy default stream; like CUDA's, it may return before the memset is done */
inline cudaError_t cudaMemset(void* dst, int value, size_t bytes) { return cudasim::memset_on("cudaMemset", dst, value, bytes, 0); }

/* ---- streams and events (see the top comment: sync or deferred) ---- */
inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags) {
    *s = new CUstream_st{flags, {}, 0, 0, {}};
    std::lock_guard<std::recursive_mutex> guard(cudasim::stream_lock());
    cudasim::created_streams().push_back(*s);
    return cudaSuccess;
}
inline cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, cudaStreamDefault); }
inline cudaError_t cudaStreamDestroy(cudaStream_t s) {
    if (!s) return cudasim::set_error(cudaErrorInvalidResourceHandle);
    cudasim::run_all(s); /* kept: later work and events may hold its tickets */
    return cudaSuccess;
}
/* the legacy stream's synchronisation also waits for the blocking streams (their earlier work) */
inline cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    if (s) cudasim::host_wait(s, s->enqueued);
    else cudasim::host_wait(cudasim::legacy_stream(), cudasim::enqueue(0, [] {}));
    return cudaSuccess;
}
inline cudaError_t cudaDeviceSynchronize(void) {
    cudasim::device_sync();
    return cudaSuccess;
}
/* s's later work first runs the work of e's last record */
inline cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags = 0) {
    if (!e) return cudasim::set_error(cudaErrorInvalidResourceHandle);
    if (e->stream) cudasim::enqueue(s, [] {}, {{e->stream, e->ticket}});
    return cudaSuccess;
}
inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned flags) {
    *e = new CUevent_st{flags, 0.0, 0, NULL, 0};
    return cudaSuccess;
}
inline cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }
inline cudaError_t cudaEventDestroy(cudaEvent_t e) {
    if (!e) return cudasim::set_error(cudaErrorInvalidResourceHandle);
    if (cudasim::deferred_streams() && e->stream) cudasim::run_until(e->stream, e->ticket); /* its queued records */
    delete e;
    return cudaSuccess;
}
inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = 0) {
    if (!e) return cudasim::set_error(cudaErrorInvalidResourceHandle);
    e->recorded = 0;
    e->stream = cudasim::stream_of(s);
    e->ticket = cudasim::enqueue(s, [e] {
        e->recorded_ms = cudasim::now_ms();
        e->recorded = 1;
    });
    return cudaSuccess;
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    if (!e) return cudasim::set_error(cudaErrorInvalidResourceHandle);
    if (e->stream) cudasim::host_wait(e->stream, e->ticket);
    return cudaSuccess;
}
/* deferred: the recorded work runs now (a host polling the event would otherwise wait forever) */
inline cudaError_t cudaEventQuery(cudaEvent_t e) { return cudaEventSynchronize(e); }
/* milliseconds of host wall time between the two records */
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
    if (!start || !end) return cudasim::set_error(cudaErrorInvalidResourceHandle);
    if (!start->recorded || !end->recorded) return cudasim::set_error(cudaErrorNotReady);
    if ((start->flags | end->flags) & cudaEventDisableTiming) return cudasim::set_error(cudaErrorInvalidResourceHandle);
    *ms = (float)(end->recorded_ms - start->recorded_ms);
    return cudaSuccess;
}

#endif /* CUDASIM_RUNTIME_H */
