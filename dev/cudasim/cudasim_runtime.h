/*
 * dev/cudasim/cudasim_runtime.h — the CUDA runtime API subset of the simulator (host side).
 *
 * Memory: cudaMalloc is posix_memalign(256, exact size), so AddressSanitizer puts its redzone right after
 * the last byte and reports any out-of-bounds global access. Allocations are tracked (a mutex-guarded map)
 * for cudaFree validation and cudaMemGetInfo. Streams and events exist as handles; all work runs
 * synchronously at the call, so every stream is trivially ordered. The device is one H100-class device.
 * Errors: each call returns its cudaError_t and also records it as the calling host thread's last error
 * (cudaGetLastError reads and clears it, cudaPeekAtLastError only reads).
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
#include <mutex>
#include <unordered_map>

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
struct CUstream_st { unsigned flags; };
struct CUevent_st { unsigned flags; double recorded_ms; int recorded; };

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

constexpr size_t kGlobalMemBytes = 80ull << 30;
constexpr size_t kSmemDefaultMax = 48 * 1024;   /* dynamic smem without cudaFuncSetAttribute */
constexpr size_t kSmemOptinMax = 227 * 1024;    /* H100 opt-in maximum per block */
constexpr unsigned kMaxThreadsPerBlock = 1024;

inline thread_local cudaError_t t_last_error = cudaSuccess;

/* records err as the thread's last error (sticky until read) and returns it */
inline cudaError_t set_error(cudaError_t err) {
    if (err != cudaSuccess) t_last_error = err;
    return err;
}

/* the process-wide allocation table: pointer -> size, and the bytes in use */
struct AllocTable {
    std::mutex lock;
    std::unordered_map<void*, size_t> sizes;
    size_t bytes_in_use = 0;
};
inline AllocTable& alloc_table() { static AllocTable t; return t; }

inline double now_ms() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
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
inline cudaError_t cudaGetDeviceCount(int* count) { *count = 1; return cudaSuccess; }
inline cudaError_t cudaSetDevice(int dev) { return cudasim::set_error(dev == 0 ? cudaSuccess : cudaErrorInvalidDevice); }
inline cudaError_t cudaGetDevice(int* dev) { *dev = 0; return cudaSuccess; }
inline cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
inline cudaError_t cudaDeviceReset(void) { return cudaSuccess; }
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int dev) {
    if (dev != 0) return cudasim::set_error(cudaErrorInvalidDevice);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "cudasim H100 (simulated on CPU)");
    p->totalGlobalMem = cudasim::kGlobalMemBytes;
    p->sharedMemPerBlock = cudasim::kSmemDefaultMax;
    p->sharedMemPerBlockOptin = cudasim::kSmemOptinMax;
    p->sharedMemPerMultiprocessor = 228 * 1024;
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
    default: return cudasim::set_error(cudaErrorInvalidValue);
    }
    return cudaSuccess;
}

/* ---- memory ---- */
inline cudaError_t cudaMalloc(void** ptr, size_t bytes) {
    cudasim::AllocTable& t = cudasim::alloc_table();
    std::lock_guard<std::mutex> guard(t.lock);
    *ptr = NULL;
    if (bytes > cudasim::kGlobalMemBytes - t.bytes_in_use) return cudasim::set_error(cudaErrorMemoryAllocation);
    void* p = NULL;
    if (posix_memalign(&p, 256, bytes ? bytes : 1) != 0) return cudasim::set_error(cudaErrorMemoryAllocation);
    t.sizes[p] = bytes;
    t.bytes_in_use += bytes;
    *ptr = p;
    return cudaSuccess;
}
template <typename T>
inline cudaError_t cudaMalloc(T** ptr, size_t bytes) { return cudaMalloc((void**)ptr, bytes); }
inline cudaError_t cudaFree(void* ptr) {
    if (ptr == NULL) return cudaSuccess;
    cudasim::AllocTable& t = cudasim::alloc_table();
    std::lock_guard<std::mutex> guard(t.lock);
    auto it = t.sizes.find(ptr);
    if (it == t.sizes.end()) return cudasim::set_error(cudaErrorInvalidDevicePointer);
    t.bytes_in_use -= it->second;
    t.sizes.erase(it);
    free(ptr);
    return cudaSuccess;
}
/* pinned host memory is ordinary host memory here (not counted as device memory) */
inline cudaError_t cudaMallocHost(void** ptr, size_t bytes) {
    *ptr = malloc(bytes ? bytes : 1);
    return *ptr ? cudaSuccess : cudasim::set_error(cudaErrorMemoryAllocation);
}
template <typename T>
inline cudaError_t cudaMallocHost(T** ptr, size_t bytes) { return cudaMallocHost((void**)ptr, bytes); }
inline cudaError_t cudaFreeHost(void* ptr) { free(ptr); return cudaSuccess; }
inline cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
    cudasim::AllocTable& t = cudasim::alloc_table();
    std::lock_guard<std::mutex> guard(t.lock);
    *free_bytes = cudasim::kGlobalMemBytes - t.bytes_in_use;
    *total_bytes = cudasim::kGlobalMemBytes;
    return cudaSuccess;
}
inline cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    if ((unsigned)kind > (unsigned)cudaMemcpyDefault) return cudasim::set_error(cudaErrorInvalidMemcpyDirection);
    if (bytes && (!dst || !src)) return cudasim::set_error(cudaErrorInvalidValue);
    if (bytes) memmove(dst, src, bytes);
    return cudaSuccess;
}
inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream = 0) {
    return cudaMemcpy(dst, src, bytes, kind);
}
inline cudaError_t cudaMemset(void* dst, int value, size_t bytes) {
    if (bytes && !dst) return cudasim::set_error(cudaErrorInvalidValue);
    if (bytes) memset(dst, value, bytes);
    return cudaSuccess;
}
inline cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream = 0) {
    return cudaMemset(dst, value, bytes);
}

/* ---- streams and events (synchronous: work is done when the call returns) ---- */
inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags) {
    *s = new CUstream_st{flags};
    return cudaSuccess;
}
inline cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, cudaStreamDefault); }
inline cudaError_t cudaStreamDestroy(cudaStream_t s) {
    if (!s) return cudasim::set_error(cudaErrorInvalidResourceHandle);
    delete s;
    return cudaSuccess;
}
inline cudaError_t cudaStreamSynchronize(cudaStream_t s) { return cudaSuccess; }
inline cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags = 0) {
    return e ? cudaSuccess : cudasim::set_error(cudaErrorInvalidResourceHandle);
}
inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned flags) {
    *e = new CUevent_st{flags, 0.0, 0};
    return cudaSuccess;
}
inline cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }
inline cudaError_t cudaEventDestroy(cudaEvent_t e) {
    if (!e) return cudasim::set_error(cudaErrorInvalidResourceHandle);
    delete e;
    return cudaSuccess;
}
inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = 0) {
    if (!e) return cudasim::set_error(cudaErrorInvalidResourceHandle);
    e->recorded_ms = cudasim::now_ms();
    e->recorded = 1;
    return cudaSuccess;
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    return e ? cudaSuccess : cudasim::set_error(cudaErrorInvalidResourceHandle);
}
inline cudaError_t cudaEventQuery(cudaEvent_t e) {
    return e ? cudaSuccess : cudasim::set_error(cudaErrorInvalidResourceHandle);
}
/* milliseconds of host wall time between the two records */
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
    if (!start || !end) return cudasim::set_error(cudaErrorInvalidResourceHandle);
    if (!start->recorded || !end->recorded) return cudasim::set_error(cudaErrorNotReady);
    if ((start->flags | end->flags) & cudaEventDisableTiming) return cudasim::set_error(cudaErrorInvalidResourceHandle);
    *ms = (float)(end->recorded_ms - start->recorded_ms);
    return cudaSuccess;
}

#endif /* CUDASIM_RUNTIME_H */
