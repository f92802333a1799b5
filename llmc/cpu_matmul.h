/*
 * llmc/cpu_matmul.h — cache-blocked fp32 SGEMM for the CPU, no BLAS.
 *
 *   sgemm(M, N, K, A, rsa, csa, B, rsb, csb, C, ldc, accumulate, bias)
 *     C[i*ldc + j] = (accumulate ? C[i*ldc + j] : 0) + sum_k A(i,k) * B(k,j) + (bias ? bias[j] : 0)
 *     with A(i,k) = A[i*rsa + k*csa] and B(k,j) = B[k*rsb + j*csb]: any of the model's layouts
 *     (A·Bᵀ, A·B, Aᵀ·B) is a choice of strides, and any M, N, K >= 0 is handled.
 *
 * Algorithm (Goto/BLIS): for each NC-column block of C and KC-slice of K, the B block is packed
 * into NR-wide column panels (kc x NR, contiguous per k); for each MC-row block, the A block is
 * packed into MR-tall row panels; a register-resident micro-kernel then computes each MR x NR
 * tile of C over kc (MR broadcasts of A times NR/W vectors of B per k, all accumulators in
 * registers). Tiles that cross the edge of C are computed into a zero-padded buffer and the
 * valid part is added to C, with the same operation order as full tiles.
 *
 * Micro-kernels, one macro body instantiated three times and chosen at run time:
 *   avx512:  8 x 48 (24 zmm accumulators), target("avx512f,fma"); GPT-2's sizes (BT a multiple
 *            of 8, C and Vp multiples of 48) then have no edge tiles
 *   avx2  :  6 x 16 (12 ymm accumulators), target("avx2,fma")
 *   scalar:  4 x 8  portable C (whatever the compiler's baseline vectorises)
 *
 * Threads (OpenMP): C is cut into a pm x pn grid of blocks (pm*pn <= omp_get_max_threads(),
 * block edges on MR/NR multiples; the grid minimises the packed traffic (M/pm + N/pn)*K), and
 * each thread runs the whole blocked algorithm on its block with its own packing buffers, so
 * there are no barriers. Each C element's sum runs over k in the same order whatever the thread
 * count, so results are bit-identical for any number of threads.
 *
 * Global state (per translation unit): the ISA forced by cpu_matmul_force_isa() (default: none,
 * i.e. the widest the CPU supports), and each thread's two packing buffers (__thread, grown
 * on demand, kept until the thread exits: at most (MC + NC) * KC floats, about 5 MB, per thread).
 */
#ifndef LLMC_CPU_MATMUL_H
#define LLMC_CPU_MATMUL_H

#include <stdlib.h>
#include <string.h>
#include <immintrin.h>
#include <omp.h>
#include "llmc/fileio.h"

enum { CPU_ISA_AUTO = -1, CPU_ISA_SCALAR = 0, CPU_ISA_AVX2 = 1, CPU_ISA_AVX512 = 2 };

static inline const char* cpu_isa_name(int isa) {
    switch (isa) {
    case CPU_ISA_SCALAR: return "scalar";
    case CPU_ISA_AVX2: return "avx2";
    case CPU_ISA_AVX512: return "avx512";
    default: return "auto";
    }
}

/* 1 if this CPU (and OS) can run code paths of that ISA */
static inline int cpu_isa_supported(int isa) {
    __builtin_cpu_init();
    switch (isa) {
    case CPU_ISA_SCALAR: return 1;
    case CPU_ISA_AVX2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case CPU_ISA_AVX512: return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
    default: return 0;
    }
}

static int cpu_matmul_forced_isa_ = CPU_ISA_AUTO;

/* Forces sgemm's code path (CPU_ISA_SCALAR/AVX2/AVX512), or back to CPU_ISA_AUTO; tests use it to
 * cover every path. Forcing a path this CPU cannot run is a fatal error. Not thread-safe: call it
 * between sgemm calls. */
static inline void cpu_matmul_force_isa(int isa) {
    if (isa != CPU_ISA_AUTO && !cpu_isa_supported(isa))
        fatalf("cpu_matmul_force_isa: this CPU does not support the %s code path", cpu_isa_name(isa));
    cpu_matmul_forced_isa_ = isa;
}

/* the code path sgemm uses now */
static inline int cpu_matmul_isa(void) {
    if (cpu_matmul_forced_isa_ != CPU_ISA_AUTO) return cpu_matmul_forced_isa_;
    if (cpu_isa_supported(CPU_ISA_AVX512)) return CPU_ISA_AVX512;
    if (cpu_isa_supported(CPU_ISA_AVX2)) return CPU_ISA_AVX2;
    return CPU_ISA_SCALAR;
}

/* full unrolling keeps the accumulators in registers (nvcc's front end does not know the pragma) */
#ifdef __CUDACC__
#define SGEMM_UNROLL
#else
#define SGEMM_UNROLL _Pragma("GCC unroll 16")
#endif

/* ----------------------------------------------------------------------------
 * micro-kernels: C[MR x NR tile, row stride ldc] = (accumulate ? C : 0) + Ap·Bp + bias[0..NR)
 * Ap: kc x MR (MR contiguous per k), Bp: kc x NR (NR contiguous per k, 64-byte aligned).
 * NR = NV vectors of W floats. One thread computes the whole tile. */
#define SGEMM_MICROKERNEL(NAME, TARGET, VEC, W, MR, NV, LOADA, LOADU, STOREU, SET1, FMA, ADD, ZERO)       \
    TARGET static inline void NAME(int kc, const float* __restrict__ Ap, const float* __restrict__ Bp, float* __restrict__ C,   \
                            long ldc, int accumulate, const float* __restrict__ bias) {                          \
        VEC acc[MR][NV];                                                                                     \
        SGEMM_UNROLL for (int r = 0; r < MR; r++)                                                \
            SGEMM_UNROLL for (int v = 0; v < NV; v++) acc[r][v] = ZERO;                          \
        for (int k = 0; k < kc; k++) {                                                                       \
            VEC b[NV];                                                                                       \
            SGEMM_UNROLL for (int v = 0; v < NV; v++) b[v] = LOADA(Bp + (long)k * (NV * W) + v * W); \
            SGEMM_UNROLL for (int r = 0; r < MR; r++) {                                          \
                VEC a = SET1(Ap[(long)k * MR + r]);                                                          \
                SGEMM_UNROLL for (int v = 0; v < NV; v++) acc[r][v] = FMA(a, b[v], acc[r][v]);   \
            }                                                                                                \
        }                                                                                                    \
        SGEMM_UNROLL for (int r = 0; r < MR; r++) {                                              \
            SGEMM_UNROLL for (int v = 0; v < NV; v++) {                                          \
                VEC c = acc[r][v];                                                                           \
                float* dst = C + r * ldc + v * W;                                                            \
                if (accumulate) c = ADD(c, LOADU(dst));                                                      \
                if (bias) c = ADD(c, LOADU(bias + v * W));                                                   \
                STOREU(dst, c);                                                                              \
            }                                                                                                \
        }                                                                                                    \
    }

/* the scalar stand-ins for the vector intrinsics: a kernel template's float instantiation (here, llmc/cpu_ops.h's
 * AdamW, llmc/cpu_peak.h's loop) */
#define SCALAR_LOAD(p) (*(p))
#define SCALAR_STORE(p, x) (*(p) = (x))
#define SCALAR_SET1(x) (x)
#define SCALAR_ADD(a, b) ((a) + (b))
#define SCALAR_SUB(a, b) ((a) - (b))
#define SCALAR_MUL(a, b) ((a) * (b))
#define SCALAR_DIV(a, b) ((a) / (b))
#define SCALAR_FMA(a, b, c) ((a) * (b) + (c))
SGEMM_MICROKERNEL(sgemm_kernel_scalar, , float, 1, 4, 8, SCALAR_LOAD, SCALAR_LOAD, SCALAR_STORE, SCALAR_SET1, SCALAR_FMA, SCALAR_ADD,
                  0.0f)
SGEMM_MICROKERNEL(sgemm_kernel_avx2, __attribute__((target("avx2,fma"))), __m256, 8, 6, 2, _mm256_load_ps,
                  _mm256_loadu_ps, _mm256_storeu_ps, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, _mm256_setzero_ps())
SGEMM_MICROKERNEL(sgemm_kernel_avx512, __attribute__((target("avx512f,fma"))), __m512, 16, 8, 3, _mm512_load_ps,
                  _mm512_loadu_ps, _mm512_storeu_ps, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps, _mm512_setzero_ps())

/* An 8 x 8 transpose in registers (GCC >= 12 / Clang vector extensions: any ISA's shuffles):
 * x[r][c] -> x[c][r], by interleaving pairs, then pairs of pairs, then halves. */
typedef float SgemmV8 __attribute__((vector_size(32)));
typedef float SgemmV8u __attribute__((vector_size(32), aligned(4)));
static inline void sgemm_transpose8(SgemmV8 x[8]) {
    SgemmV8 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = __builtin_shufflevector(x[i], x[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
        t[i + 1] = __builtin_shufflevector(x[i], x[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
    }
    for (int i = 0; i < 8; i += 4)
        for (int j = 0; j < 2; j++) {
            u[i + 2 * j] = __builtin_shufflevector(t[i + j], t[i + j + 2], 0, 1, 8, 9, 4, 5, 12, 13);
            u[i + 2 * j + 1] = __builtin_shufflevector(t[i + j], t[i + j + 2], 2, 3, 10, 11, 6, 7, 14, 15);
        }
    for (int j = 0; j < 4; j++) {
        x[j] = __builtin_shufflevector(u[j], u[j + 4], 0, 1, 2, 3, 8, 9, 10, 11);
        x[j + 4] = __builtin_shufflevector(u[j], u[j + 4], 4, 5, 6, 7, 12, 13, 14, 15);
    }
}

/* Packs X(p, k) = src[p*stride_p + k*stride_k], p < np, k < kc, into panels of w consecutive p:
 * panel q holds dst[q*w*kc + k*w + r] = X(q*w + r, k), zero where q*w + r >= np. Used for A
 * (p = row i) and for B (p = column j). Single-threaded (each thread packs its own).
 * Contiguous p (stride_p 1) is a row copy; contiguous k (stride_k 1, the transposed case) goes
 * through 8 x 8 register transposes (needs w % 8 == 0 and dst 32-byte aligned); the rest, and
 * the ragged ends, element by element. One body, compiled per path's ISA. */
#define SGEMM_PACK(NAME, TARGET)                                                                                  \
    TARGET static inline void NAME(float* __restrict__ dst, const float* __restrict__ src, long stride_p, long stride_k, int np, \
                            int kc, int w) {                                                                      \
        for (int p0 = 0; p0 < np; p0 += w) {                                                                      \
            int valid = np - p0 < w ? np - p0 : w;                                                                \
            float* panel = dst + (long)p0 * kc;                                                                   \
            const float* s = src + p0 * stride_p;                                                                 \
            int k_done = 0, r_done = 0;                                                                           \
            if (stride_k == 1 && w % 8 == 0) {                                                                    \
                k_done = kc / 8 * 8;                                                                              \
                r_done = valid / 8 * 8;                                                                           \
                for (int k = 0; k < k_done; k += 8)                                                               \
                    for (int r = 0; r < r_done; r += 8) {                                                         \
                        SgemmV8 x[8];                                                                             \
                        for (int i = 0; i < 8; i++) x[i] = *(const SgemmV8u*)(s + (r + i) * stride_p + k);       \
                        sgemm_transpose8(x);                                                                      \
                        for (int i = 0; i < 8; i++) *(SgemmV8*)(panel + (long)(k + i) * w + r) = x[i];            \
                    }                                                                                             \
            }                                                                                                     \
            for (int k = 0; k < kc; k++) {                                                                        \
                float* out = panel + (long)k * w;                                                                 \
                const float* in = s + k * stride_k;                                                               \
                int r = k < k_done ? r_done : 0;                                                                  \
                if (stride_p == 1) {                                                                              \
                    memcpy(out + r, in + r, (size_t)(valid - r) * sizeof(float));                                 \
                } else {                                                                                          \
                    for (int rr = r; rr < valid; rr++) out[rr] = in[rr * stride_p];                               \
                }                                                                                                 \
                for (int rr = valid; rr < w; rr++) out[rr] = 0.0f;                                                \
            }                                                                                                     \
        }                                                                                                         \
    }
SGEMM_PACK(sgemm_pack_scalar, )
SGEMM_PACK(sgemm_pack_avx2, __attribute__((target("avx2,fma"))))
SGEMM_PACK(sgemm_pack_avx512, __attribute__((target("avx512f,fma"))))

typedef void (*SgemmKernel)(int kc, const float* Ap, const float* Bp, float* C, long ldc, int accumulate,
                            const float* bias);

/* a code path: its micro-kernel, tile MR x NR, and cache blocks (KC x NR panel of B in L1,
 * MC x KC block of A in L2, KC x NC block of B in L3) */
typedef void (*SgemmPack)(float* dst, const float* src, long stride_p, long stride_k, int np, int kc, int w);
typedef struct {
    SgemmKernel kernel;
    SgemmPack pack;
    int mr, nr, kc, mc, nc;
} SgemmPath;

static inline SgemmPath sgemm_path(int isa) {
    switch (isa) {
    case CPU_ISA_AVX512: return (SgemmPath){sgemm_kernel_avx512, sgemm_pack_avx512, 8, 48, 384, 8 * 32, 48 * 64};
    case CPU_ISA_AVX2: return (SgemmPath){sgemm_kernel_avx2, sgemm_pack_avx2, 6, 16, 256, 6 * 48, 16 * 256};
    default: return (SgemmPath){sgemm_kernel_scalar, sgemm_pack_scalar, 4, 8, 256, 4 * 64, 8 * 256};
    }
}

/* This thread's packing buffer `which` (0: A, 1: B), 64-byte aligned, grown to at least `floats`.
 * Kept for the life of the thread (page-faulting fresh buffers on every call costs more than the
 * packing), so at most (MC + NC) * KC floats per thread stay allocated. */
static __thread float* sgemm_buffer_[2];
static __thread size_t sgemm_buffer_floats_[2];
static inline float* sgemm_buffer(int which, size_t floats) {
    if (sgemm_buffer_floats_[which] < floats) {
        free(sgemm_buffer_[which]);
        size_t bytes = (floats * sizeof(float) + 63) & ~(size_t)63;
        sgemm_buffer_[which] = (float*)aligned_alloc(64, bytes);
        if (!sgemm_buffer_[which]) fatalf("sgemm: out of memory allocating %zu bytes of packing buffer", bytes);
        sgemm_buffer_floats_[which] = floats;
    }
    return sgemm_buffer_[which];
}

/* One thread's share: the rows [m0,m1) x columns [n0,n1) of C, the full blocked algorithm. */
static inline void sgemm_block(const SgemmPath* path, int m0, int m1, int n0, int n1, int K, const float* A, long rsa,
                        long csa, const float* B, long rsb, long csb, float* C, long ldc, int accumulate,
                        const float* bias) {
    const int MR = path->mr, NR = path->nr;
    int M = m1 - m0, N = n1 - n0;
    if (M <= 0 || N <= 0) return;
    if (K == 0) {
        for (int i = m0; i < m1; i++)
            for (int j = n0; j < n1; j++)
                C[i * ldc + j] = (accumulate ? C[i * ldc + j] : 0.0f) + (bias ? bias[j] : 0.0f);
        return;
    }
    int kc_max = K < path->kc ? K : path->kc;
    int mc_max = M < path->mc ? (M + MR - 1) / MR * MR : path->mc;
    int nc_max = N < path->nc ? (N + NR - 1) / NR * NR : path->nc;
    float* Ap = sgemm_buffer(0, (size_t)mc_max * kc_max);
    float* Bp = sgemm_buffer(1, (size_t)nc_max * kc_max);
    float edge[8 * 48]; /* an MR x NR tile (the largest path is 8 x 48) */
    for (int jc = n0; jc < n1; jc += path->nc) {
        int nc = n1 - jc < path->nc ? n1 - jc : path->nc;
        for (int pc = 0; pc < K; pc += path->kc) {
            int kc = K - pc < path->kc ? K - pc : path->kc;
            path->pack(Bp, B + pc * rsb + jc * csb, csb, rsb, nc, kc, NR);
            int acc = accumulate || pc > 0;
            const float* bias_now = (pc == 0 && bias) ? bias + jc : NULL;
            for (int ic = m0; ic < m1; ic += path->mc) {
                int mc = m1 - ic < path->mc ? m1 - ic : path->mc;
                path->pack(Ap, A + ic * rsa + pc * csa, rsa, csa, mc, kc, MR);
                for (int jr = 0; jr < nc; jr += NR) {
                    int nr = nc - jr < NR ? nc - jr : NR;
                    for (int ir = 0; ir < mc; ir += MR) {
                        int mr = mc - ir < MR ? mc - ir : MR;
                        float* Ct = C + (long)(ic + ir) * ldc + jc + jr;
                        const float* Atile = Ap + (long)ir * kc;
                        const float* Btile = Bp + (long)jr * kc;
                        const float* bias_tile = bias_now ? bias_now + jr : NULL;
                        if (mr == MR && nr == NR) {
                            path->kernel(kc, Atile, Btile, Ct, ldc, acc, bias_tile);
                        } else {
                            path->kernel(kc, Atile, Btile, edge, NR, 0, NULL);
                            for (int i = 0; i < mr; i++)
                                for (int j = 0; j < nr; j++) {
                                    float c = edge[i * NR + j];
                                    if (acc) c += Ct[i * ldc + j];
                                    if (bias_tile) c += bias_tile[j];
                                    Ct[i * ldc + j] = c;
                                }
                        }
                    }
                }
            }
        }
    }
}

/* first index of part `idx` of `parts` when [0, n) is cut on multiples of `unit` (a tile, or a
 * vector so each part's loops run on whole vectors); part idx is [cpu_split(idx), cpu_split(idx+1)) */
static inline int cpu_split(int n, int parts, int unit, int idx) {
    long units = (n + unit - 1) / unit;
    long start = units * idx / parts * unit;
    return start < n ? (int)start : n;
}

/* C = (accumulate ? C : 0) + A·B (+ bias), see the top of this file. */
static inline void sgemm(int M, int N, int K, const float* A, long rsa, long csa, const float* B, long rsb, long csb, float* C,
                  long ldc, int accumulate, const float* bias) {
    if (M <= 0 || N <= 0) return;
    SgemmPath path = sgemm_path(cpu_matmul_isa());
    /* threads: at most one per ~4 MFLOP of work; the most threads whose grid gives each a tile or more */
    long flops = 2L * M * N * (K > 0 ? K : 1);
    int nt = omp_in_parallel() ? 1 : omp_get_max_threads();
    if (nt > flops / (4L << 20) + 1) nt = (int)(flops / (4L << 20) + 1);
    int best_pm = 1, best_pn = 1;
    double best_cost = -1.0;
    for (; nt > 1 && best_cost < 0; nt--)
        for (int pm = 1; pm <= nt; pm++) {
            int pn = nt / pm;
            if (nt % pm || (M + path.mr - 1) / path.mr < pm || (N + path.nr - 1) / path.nr < pn) continue;
            double cost = (double)M / pm + (double)N / pn;
            if (best_cost < 0 || cost < best_cost) best_cost = cost, best_pm = pm, best_pn = pn;
        }
    int pm = best_pm, pn = best_pn;
#pragma omp parallel num_threads(pm * pn) if (pm * pn > 1)
    {
        int t = omp_get_thread_num(), im = t / pn, in = t % pn;
        sgemm_block(&path, cpu_split(M, pm, path.mr, im), cpu_split(M, pm, path.mr, im + 1),
                    cpu_split(N, pn, path.nr, in), cpu_split(N, pn, path.nr, in + 1), K, A, rsa, csa, B, rsb,
                    csb, C, ldc, accumulate, bias);
    }
}

#endif /* LLMC_CPU_MATMUL_H */
