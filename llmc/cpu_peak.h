/*
 * llmc/cpu_peak.h — the machine's FP32 FMA peak, measured: every OpenMP thread runs 12
 * independent FMA chains in registers at the widest ISA the CPU has (llmc/cpu_matmul.h's
 * choice), and peak = threads x chains x iterations x 2 x vector width / time.
 * Used by the trainer's step line (% of peak) and by dev/bench_cpu.c. Another process on the
 * machine only lowers the figure, so callers take the best of a few measurements.
 */
#ifndef LLMC_CPU_PEAK_H
#define LLMC_CPU_PEAK_H

#include <immintrin.h>
#include <omp.h>
#include <time.h>
#include "llmc/cpu_matmul.h"

/* FMA chains of one thread: acc[i] = acc[i]*x + y, 12 chains x iters; returns a value to keep
 * the work alive. One body, three widths. */
#define PEAK_LOOP(NAME, TARGET, VEC, SET1, FMA, ADD, TOFLOAT)                 \
    TARGET static inline float NAME(long iters) {                                     \
        VEC acc[12], x = SET1(0.999f), y = SET1(0.001f);                       \
        for (int i = 0; i < 12; i++) acc[i] = SET1((float)i);                  \
        for (long it = 0; it < iters; it++) {                                  \
            _Pragma("GCC unroll 12") for (int i = 0; i < 12; i++) acc[i] = FMA(acc[i], x, y); \
        }                                                                      \
        VEC s = acc[0];                                                        \
        for (int i = 1; i < 12; i++) s = ADD(s, acc[i]);                       \
        return TOFLOAT(s);                                                     \
    }
#define SCALAR_TOFLOAT(x) (x) /* with llmc/cpu_matmul.h's SCALAR_ stand-ins */
#define M256_TOFLOAT(x) _mm256_cvtss_f32(x)
#define M512_TOFLOAT(x) _mm512_cvtss_f32(x)
PEAK_LOOP(peak_scalar, , float, SCALAR_SET1, SCALAR_FMA, SCALAR_ADD, SCALAR_TOFLOAT)
PEAK_LOOP(peak_avx2, __attribute__((target("avx2,fma"))), __m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps,
          M256_TOFLOAT)
PEAK_LOOP(peak_avx512, __attribute__((target("avx512f,fma"))), __m512, _mm512_set1_ps, _mm512_fmadd_ps,
          _mm512_add_ps, M512_TOFLOAT)

/* measured FP32 peak in GFLOP/s over all threads for `isa`, from `iters` iterations per thread */
static inline double cpu_fma_peak_gflops(int isa, long iters) {
    int width = isa == CPU_ISA_AVX512 ? 16 : isa == CPU_ISA_AVX2 ? 8 : 1;
    if (isa == CPU_ISA_SCALAR) iters /= 8;
    float sink = 0.0f;
    int threads = omp_get_max_threads();
    struct timespec ts0, ts1;
    clock_gettime(CLOCK_MONOTONIC, &ts0);
#pragma omp parallel reduction(+ : sink)
    sink += isa == CPU_ISA_AVX512 ? peak_avx512(iters) : isa == CPU_ISA_AVX2 ? peak_avx2(iters) : peak_scalar(iters);
    clock_gettime(CLOCK_MONOTONIC, &ts1);
    double dt = (double)(ts1.tv_sec - ts0.tv_sec) + 1e-9 * (double)(ts1.tv_nsec - ts0.tv_nsec);
    volatile float keep = sink; /* the FMA chains must not be optimised away */
    (void)keep;
    /* the scalar loop counts a multiply and an add (no FMA in the portable baseline) as 2 flops too */
    return (double)threads * iters * 12 * 2 * width / dt / 1e9;
}


/* best of `tries` measurements with the CPU's own ISA */
static inline double cpu_fma_peak_best(long iters, int tries) {
    double best = 0.0;
    for (int i = 0; i < tries; i++) {
        double p = cpu_fma_peak_gflops(cpu_matmul_isa(), iters);
        if (p > best) best = p;
    }
    return best;
}

#endif
