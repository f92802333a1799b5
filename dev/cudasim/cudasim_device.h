/*
 * dev/cudasim/cudasim_device.h — device intrinsics for the simulator: atomics, fences, cache-hint loads
 * and stores, math and bit intrinsics. Included by cudasim.h only.
 *
 * Atomics are real host atomics (blocks run on several OS threads), relaxed like CUDA's; the float and
 * bf16 ones are compare-and-swap loops on the bits. Fast-math intrinsics (__expf, __fdividef, ...) are
 * the accurate libm functions: a kernel test must tolerate the GPU's few-ulp differences anyway.
 */
#ifndef CUDASIM_DEVICE_H
#define CUDASIM_DEVICE_H

#include <math.h>
#include <string.h>
#include <type_traits>

/* ---- atomics: each returns the old value ---- */
inline int atomicAdd(int* p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
inline unsigned atomicAdd(unsigned* p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
inline int atomicSub(int* p, int v) { return __atomic_fetch_sub(p, v, __ATOMIC_RELAXED); }
inline unsigned atomicSub(unsigned* p, unsigned v) { return __atomic_fetch_sub(p, v, __ATOMIC_RELAXED); }
inline int atomicExch(int* p, int v) { return __atomic_exchange_n(p, v, __ATOMIC_RELAXED); }
inline unsigned atomicExch(unsigned* p, unsigned v) { return __atomic_exchange_n(p, v, __ATOMIC_RELAXED); }
inline int atomicCAS(int* p, int expected, int desired) {
    __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return expected;
}
inline unsigned atomicCAS(unsigned* p, unsigned expected, unsigned desired) {
    __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return expected;
}
inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long expected, unsigned long long desired) {
    __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return expected;
}

namespace cudasim {
/* *p = op(*p) atomically, for a trivially copyable T of 2, 4 or 8 bytes (CAS on its bits); returns the old value */
template <typename Bits, typename T, typename Op>
inline T atomic_update(T* p, Op op) {
    static_assert(sizeof(Bits) == sizeof(T), "bit container must match the value");
    Bits* bp = (Bits*)p;
    Bits old_bits = __atomic_load_n(bp, __ATOMIC_RELAXED), new_bits;
    T old_value, new_value;
    do {
        memcpy(&old_value, &old_bits, sizeof(T));
        new_value = op(old_value);
        memcpy(&new_bits, &new_value, sizeof(T));
    } while (!__atomic_compare_exchange_n(bp, &old_bits, new_bits, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    return old_value;
}
} /* namespace cudasim */

inline int atomicMax(int* p, int v) {
    return cudasim::atomic_update<uint32_t>(p, [v](int x) { return x > v ? x : v; });
}
inline unsigned atomicMax(unsigned* p, unsigned v) {
    return cudasim::atomic_update<uint32_t>(p, [v](unsigned x) { return x > v ? x : v; });
}
inline int atomicMin(int* p, int v) {
    return cudasim::atomic_update<uint32_t>(p, [v](int x) { return x < v ? x : v; });
}
inline unsigned atomicMin(unsigned* p, unsigned v) {
    return cudasim::atomic_update<uint32_t>(p, [v](unsigned x) { return x < v ? x : v; });
}
inline float atomicAdd(float* p, float v) {
    return cudasim::atomic_update<uint32_t>(p, [v](float x) { return x + v; });
}
inline double atomicAdd(double* p, double v) {
    return cudasim::atomic_update<uint64_t>(p, [v](double x) { return x + v; });
}
inline __nv_bfloat16 atomicAdd(__nv_bfloat16* p, __nv_bfloat16 v) {
    return cudasim::atomic_update<uint16_t>(p, [v](__nv_bfloat16 x) { return __hadd(x, v); });
}
inline __nv_bfloat162 atomicAdd(__nv_bfloat162* p, __nv_bfloat162 v) {
    return cudasim::atomic_update<uint32_t>(p, [v](__nv_bfloat162 x) { return __hadd2(x, v); });
}

inline void __threadfence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

/* ---- cache-hint loads and stores: plain accesses here ---- */
template <typename T> inline T __ldg(const T* p) { return *p; }
template <typename T> inline T __ldcs(const T* p) { return *p; }
template <typename T> inline T __ldcg(const T* p) { return *p; }
template <typename T> inline T __ldca(const T* p) { return *p; }
template <typename T> inline T __ldcv(const T* p) { return *p; }
template <typename T> inline T __ldlu(const T* p) { return *p; }
template <typename T> inline void __stcs(T* p, std::common_type_t<T> v) { *p = v; }
template <typename T> inline void __stcg(T* p, std::common_type_t<T> v) { *p = v; }
template <typename T> inline void __stwb(T* p, std::common_type_t<T> v) { *p = v; }
template <typename T> inline void __stwt(T* p, std::common_type_t<T> v) { *p = v; }

/* ---- float intrinsics ---- */
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanf(float x) { return tanf(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __exp10f(float x) { return powf(10.0f, x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }
inline float __saturatef(float x) { return x != x ? 0.0f : (x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x)); }
inline int __float2int_rn(float x) { return (int)nearbyintf(x); }
inline int __float2int_rz(float x) { return (int)x; }
inline float __int2float_rn(int x) { return (float)x; }
inline int __float_as_int(float x) { int i; memcpy(&i, &x, 4); return i; }
inline unsigned __float_as_uint(float x) { unsigned u; memcpy(&u, &x, 4); return u; }
inline float __int_as_float(int i) { float x; memcpy(&x, &i, 4); return x; }
inline float __uint_as_float(unsigned u) { float x; memcpy(&x, &u, 4); return x; }

/* ---- integer intrinsics ---- */
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
    unsigned r = 0;
    for (int i = 0; i < 32; i++) r |= ((x >> i) & 1u) << (31 - i);
    return r;
}
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }

/* CUDA's overloaded min/max for device code */
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }

#endif /* CUDASIM_DEVICE_H */
