/*
 * llmc/cuda_utils.cuh — what every kernel header of the GPU trainer shares: the activation type
 * floatX, conversions, warp and block sums, and bf16 stochastic rounding.
 *
 * Precision (chosen at build time):
 *   default            floatX = __nv_bfloat16: parameters, gradients and activations in bf16; AdamW keeps
 *                      fp32 moments and (with --master-weights 1) fp32 master weights
 *   -DPRECISION_FP32   floatX = float everywhere (PRECISION=FP32 in the Makefile), for exact comparison
 * Every kernel reads floatX, computes in fp32 and rounds once when it stores.
 * No global state.
 */
#ifndef LLMC_CUDA_UTILS_CUH
#define LLMC_CUDA_UTILS_CUH

#include "llmc/cuda_common.cuh"
#include <limits.h>

#if defined(PRECISION_FP32)
typedef float floatX;
#define FLOATX_NAME "fp32"
#else
typedef __nv_bfloat16 floatX;
#define FLOATX_NAME "bf16"
#endif

/* ⌈a/b⌉ as a grid dimension: more than an int holds (a grid's x limit) exits with a message */
static inline int ceil_div(long a, long b) {
    long q = (a + b - 1) / b;
    if (q > INT_MAX) {
        fprintf(stderr, "error: %ld / %ld = %ld blocks: more than a grid dimension holds (%d)\n", a, b, q, INT_MAX);
        exit(1);
    }
    return (int)q;
}

/* full unrolling of a loop over a register array, so the array stays in registers (the simulator has no
 * unroll pragma) */
#if defined(CUDASIM)
#define UNROLL
#else
#define UNROLL _Pragma("unroll")
#endif

/* 2^x by the special-function unit (PTX ex2.approx.ftz.f32: relative error below 2^-22, results under 2^-126
 * flushed to 0, 2^-inf = 0): one instruction, where exp2f adds a subnormal fix-up around it (four). For
 * softmax weights, whose subnormal values do not matter. The simulator computes exp2f and flushes the same. */
__device__ __forceinline__ float fast_exp2f(float x) {
#if defined(CUDASIM)
    float y = exp2f(x);
    return y < 0x1p-126f ? 0.0f : y;
#else
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
#endif
}

/* the full-warp mask: every warp op of the project's kernels runs on whole warps */
#define FULL_MASK 0xffffffffu

/* Σ of x (float or double) over the 32 lanes, the same sum (bits) in every lane: butterfly order, fixed */
template <typename T>
__device__ inline T warp_sum(T x) {
    for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(FULL_MASK, x, offset);
    return x;
}

__device__ inline float warp_max(float x) {
    for (int offset = 16; offset > 0; offset >>= 1) x = fmaxf(x, __shfl_xor_sync(FULL_MASK, x, offset));
    return x;
}

/* Σ of x over the block (blockDim.x a multiple of 32, at most 1024), returned to every thread: warp sums,
 * then warp 0 sums the per-warp values in order. Deterministic. Contains __syncthreads: every thread of
 * the block must call it. */
__device__ inline float block_sum(float x) {
    __shared__ float warp_sums[32];
    __shared__ float total;
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, num_warps = blockDim.x / 32;
    x = warp_sum(x);
    if (lane == 0) warp_sums[warp] = x;
    __syncthreads();
    if (warp == 0) {
        float s = lane < num_warps ? warp_sums[lane] : 0.0f;
        s = warp_sum(s);
        if (lane == 0) total = s;
    }
    __syncthreads();
    float result = total;
    __syncthreads(); /* the shared slots may be reused by the next call */
    return result;
}

/* a 32-bit hash of (index, seed): murmur3's finaliser over the mixed pair. Stochastic rounding draws its
 * random bits from it, so the rounding of element i at step t is a pure function of (i, t, seed). */
__host__ __device__ inline uint32_t hash_u32(uint32_t index, uint32_t seed) {
    uint32_t h = index * 0x9E3779B1u ^ seed;
    h ^= h >> 16;
    h *= 0x85EBCA6Bu;
    h ^= h >> 13;
    h *= 0xC2B2AE35u;
    h ^= h >> 16;
    return h;
}

/* stores x as floatX. bf16: stochastic rounding — adds 16 random bits below the kept mantissa and
 * truncates, so E[result] = x; infinities and NaN keep round-to-nearest. fp32: exact store. */
__device__ inline void store_stochastic(float* out, float x, uint32_t random) { *out = x; }
#if !defined(PRECISION_FP32)
__device__ inline void store_stochastic(__nv_bfloat16* out, float x, uint32_t random) {
    uint32_t bits = __float_as_uint(x);
    if ((bits & 0x7f800000u) == 0x7f800000u) {
        *out = __float2bfloat16(x);
        return;
    }
    bits = (bits + (random & 0xffffu)) & 0xffff0000u;
    *out = __float2bfloat16_rz(__uint_as_float(bits));
}
#endif

/* ---- vector access ----
 * Pack<T, N>: N consecutive T that one thread loads or stores with one instruction of N·sizeof(T) bytes,
 * aligned to that. Pack16<T> is the 16-byte one (8 bf16, or 4 fp32: a 128-bit instruction; a warp's 32
 * consecutive packs are 512 contiguous bytes, coalesced); Pack<T, 1> a single element, the width of the
 * kernels' fallback for rows that are no multiple of a pack (pack_width). PackX = Pack16<floatX>, PACKX its
 * element count. load_pack(N, p) / store_pack(p, pack) need p aligned to the pack's bytes: a real GPU faults
 * on a misaligned vector access, and in the simulator (-DCUDASIM, where the CPU would not) the helpers
 * stop with "error: cudasim: kernel K ...: misaligned 16-byte load of <pointer expression> ...". */
template <typename T, int N>
struct alignas(N * sizeof(T)) Pack {
    static constexpr int size = N;
    T v[N];
};
template <typename T>
using Pack16 = Pack<T, 16 / (int)sizeof(T)>;
typedef Pack16<floatX> PackX;
#define PACKX (PackX::size)

template <int BYTES, typename T>
__device__ inline void check_pack_address_(const T* p, const char* op, const char* what, const char* file, int line) {
#if defined(CUDASIM)
    if ((uintptr_t)p % BYTES != 0)
        cudasim::fail("misaligned %d-byte %s of %s = %p (%s:%d): a GPU faults with a misaligned address", BYTES, op, what,
                      (const void*)p, file, line);
#endif
}
template <int N, typename T>
__device__ inline Pack<T, N> load_pack_(const T* p, const char* what, const char* file, int line) {
    check_pack_address_<(int)sizeof(Pack<T, N>)>(p, "load", what, file, line);
    return *reinterpret_cast<const Pack<T, N>*>(p);
}
template <typename T, int N>
__device__ inline void store_pack_(T* p, const Pack<T, N>& pack, const char* what, const char* file, int line) {
    check_pack_address_<(int)sizeof(Pack<T, N>)>(p, "store", what, file, line);
    *reinterpret_cast<Pack<T, N>*>(p) = pack;
}
#define load_pack(N, p) load_pack_<N>((p), #p, __FILE__, __LINE__)
#define store_pack(p, pack) store_pack_((p), (pack), #p, __FILE__, __LINE__)

/* N consecutive T (floatX or float) at p as fp32, and back (rounding to nearest): in 16-byte packs when
 * N·sizeof(T) is a multiple of 16 (p then 16-byte aligned), else element by element */
template <typename T, int N>
struct FloatsPack {
    static constexpr int size = N % Pack16<T>::size == 0 ? Pack16<T>::size : 1;
};
template <int N, typename T>
__device__ inline void load_floats_(float* out, const T* p, const char* what, const char* file, int line) {
    constexpr int P = FloatsPack<T, N>::size;
    for (int k = 0; k < N; k += P) {
        Pack<T, P> q = load_pack_<P>(p + k, what, file, line);
        for (int j = 0; j < P; j++) out[k + j] = (float)q.v[j];
    }
}
template <int N, typename T>
__device__ inline void store_floats_(T* p, const float* in, const char* what, const char* file, int line) {
    constexpr int P = FloatsPack<T, N>::size;
    for (int k = 0; k < N; k += P) {
        Pack<T, P> q;
        for (int j = 0; j < P; j++) q.v[j] = (T)in[k + j];
        store_pack_(p + k, q, what, file, line);
    }
}
#define load_floats(N, out, p) load_floats_<N>((out), (p), #p, __FILE__, __LINE__)
#define store_floats(N, p, in) store_floats_<N>((p), (in), #p, __FILE__, __LINE__)

/* host: stops with "error: <what> = <value> ..." unless the kernels' vector layout holds */
static inline void require_pack_aligned_(const void* p, const char* what, const char* file, int line) {
    if ((uintptr_t)p % 16 == 0) return;
    fprintf(stderr, "error: %s = %p is not 16-byte aligned, as the vectorised kernels need (%s:%d)\n", what, p, file, line);
    exit(1);
}
static inline void require_multiple_(long n, long multiple, const char* what, const char* file, int line) {
    if (n % multiple == 0) return;
    fprintf(stderr, "error: %s = %ld is not a multiple of %ld, as the vectorised kernels need (%s:%d)\n", what, n, multiple, file,
            line);
    exit(1);
}
#define require_pack_aligned(p) require_pack_aligned_((const void*)(p), #p, __FILE__, __LINE__)
#define require_multiple(n, multiple) require_multiple_((long)(n), (long)(multiple), #n, __FILE__, __LINE__)

/* the elements per access of a kernel templated on it (llmc/layernorm.cuh, column_sums.cuh, encoder.cuh) over rows
 * of n elements in the arrays ptrs (NULL ones count as aligned): PACKX when n is a multiple of it and every array is
 * 16-byte aligned (the trainer's case for channels % PACKX == 0: 8 in bf16, 4 in fp32), else 1 (any n, any alignment: slower, same sums) */
template <typename... P>
static inline int pack_width(long n, const P*... ptrs) {
    return n % PACKX == 0 && (((uintptr_t)ptrs % 16 == 0) && ...) ? PACKX : 1;
}

/* An elementwise pass over n elements of several arrays (element sizes 2 or 4 bytes) cut into work
 * items: `packs` vector items of `unit` elements starting at element head, where every array is
 * 16-byte aligned, then the scalar items: the head elements [0, head) and the tail after the packs.
 * When the arrays disagree on alignment everything is scalar (head = n, packs = 0): still correct. */
typedef struct {
    size_t head, packs, unit, items; /* items = packs + the scalar elements */
} VectorSplit;

/* count arrays ptrs[k] of element size sizes[k] bytes (NULL entries are skipped); unit·sizes[k] must be a
 * multiple of 16 */
static inline VectorSplit vector_split(size_t n, int unit, int count, const void* const* ptrs, const int* sizes) {
    VectorSplit split = {n, 0, (size_t)unit, n};
    size_t head = n + 1;
    for (int k = 0; k < count; k++) {
        if (!ptrs[k]) continue;
        uintptr_t misalign = (uintptr_t)ptrs[k] % 16;
        if (misalign % sizes[k] != 0) return split;
        if (head == n + 1) head = (16 - misalign) % 16 / sizes[k];
        if (((uintptr_t)ptrs[k] + head * sizes[k]) % 16 != 0) return split;
    }
    if (head > n) return split;
    split.head = head;
    split.packs = (n - head) / unit;
    split.items = n - split.packs * (unit - 1);
    return split;
}

/* work item t of the split: returns 1 and the first element of a pack, or 0 and a scalar element */
__device__ inline int split_item(const VectorSplit& split, size_t t, size_t* element) {
    if (t < split.packs) {
        *element = split.head + t * split.unit;
        return 1;
    }
    size_t s = t - split.packs;
    *element = s < split.head ? s : s + split.packs * split.unit;
    return 0;
}

/* host-side conversions for copies between fp32 host arrays and floatX device arrays */
static inline void floats_to_floatX(floatX* out, const float* in, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = (floatX)in[i];
}
static inline void floatX_to_floats(float* out, const floatX* in, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = (float)in[i];
}

#endif /* LLMC_CUDA_UTILS_CUH */
