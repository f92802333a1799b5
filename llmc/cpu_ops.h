/*
 * llmc/cpu_ops.h — every op of GPT-2's forward and backward pass on the CPU, fp32, OpenMP.
 *
 * The one CPU implementation of each op: the CPU trainer, the GPU kernel tests and the simulator
 * tests all include this header. All arrays are row-major; BT = B*T.
 * Conventions:
 *   - forward functions OVERWRITE their outputs;
 *   - backward functions ACCUMULATE (+=) into every gradient output (callers zero them), except
 *     crossentropy_backward, which overwrites (it usually runs in place over the logits);
 *   - every op's result is the same, bit for bit, for any number of OpenMP threads (each output
 *     element is computed by one thread, in a fixed order).
 * No op needs scratch memory from the caller. Global state: none besides llmc/cpu_matmul.h's.
 */
#ifndef LLMC_CPU_OPS_H
#define LLMC_CPU_OPS_H

#include <math.h>
#include <stddef.h>
#include <omp.h>
#include "llmc/cpu_matmul.h"
#include "llmc/fileio.h"

/* exp(x) for float, vectorisable (no calls, no branches): x = n·ln2 + r with |r| <= ln2/2,
 * exp(r) by its degree-7 Taylor polynomial (truncation < 6e-9 relative), times 2^n built in the
 * exponent bits. Max error about 2 ulp. x is clamped to [-87, 88] so 2^n stays a normal number:
 * exp of anything below -87 returns exp(-87) ~ 1.6e-38 instead of a denormal or 0. NaN stays NaN. */
static inline float cpu_expf(float x) {
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    float n = (x * 1.44269504f + 12582912.0f) - 12582912.0f; /* round to nearest: 1.5·2^23 trick */
    float r = x - n * 0.693359375f;                          /* ln2 split in two for exact n·ln2 */
    r = r + n * 2.12194440e-4f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int bits = ((int)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof(scale));
    return p * scale;
}

/* CPU_OPS_VECTOR marks the per-row / per-range inner functions of the ops: GCC compiles them
 * for AVX-512, AVX2 and the baseline and picks one at load time from the CPU (the build does not
 * use -march). The OpenMP parallel loops stay in the op functions and call these (the loop
 * bodies OpenMP outlines would not be cloned). Not under ThreadSanitizer, which instruments the load-time
 * resolvers that then run before it starts. */
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define CPU_OPS_VECTOR __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CPU_OPS_VECTOR
#endif

/* elementwise ops run over [0, n) in blocks of CPU_OPS_BLOCK elements, threads splitting the blocks; an op on at
 * most one block's elements (a decoder's one row) runs on the calling thread: a parallel region would cost more
 * than it saves, and on a busy machine a wait for a scheduler tick a region */
#define CPU_OPS_BLOCK 16384

/* ----------------------------------------------------------------------------
 * encoder: out[b,t,:] = wte[inp[b,t],:] + wpe[t,:]. Threads split the BT rows. */
static inline void encoder_forward(float* out, const int* inp, const float* wte, const float* wpe, int B, int T, int C) {
#pragma omp parallel for schedule(static) if ((long)B * T * C > CPU_OPS_BLOCK)
    for (int bt = 0; bt < B * T; bt++) {
        const float* w = wte + (long)inp[bt] * C;
        const float* p = wpe + (long)(bt % T) * C;
        float* o = out + (long)bt * C;
#pragma omp simd
        for (int c = 0; c < C; c++) o[c] = w[c] + p[c];
    }
}

/* dwte[inp[b,t],:] += dout[b,t,:], dwpe[t,:] += dout[b,t,:]. Threads split the C channels
 * (rows of dwte repeat across tokens, so splitting tokens would race); each thread adds the
 * tokens in order, so the sums are deterministic. */
static inline void encoder_backward(float* dwte, float* dwpe, const float* dout, const int* inp, int B, int T, int C) {
#pragma omp parallel
    {
        int nt = omp_get_num_threads(), id = omp_get_thread_num();
        int c0 = cpu_split(C, nt, 16, id), c1 = cpu_split(C, nt, 16, id + 1);
        for (int bt = 0; bt < B * T; bt++) {
            float* w = dwte + (long)inp[bt] * C;
            float* p = dwpe + (long)(bt % T) * C;
            const float* d = dout + (long)bt * C;
#pragma omp simd
            for (int c = c0; c < c1; c++) {
                w[c] += d[c];
                p[c] += d[c];
            }
        }
    }
}

/* ----------------------------------------------------------------------------
 * layernorm over the last dimension, eps 1e-5: mean = Σx/C, rstd = 1/sqrt(Σ(x-mean)²/C + eps),
 * out = (x - mean)·rstd·weight + bias; mean and rstd [BT] are kept for the backward.
 * Threads split the rows. */
static inline void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                              const float* bias, int BT, int C) {
#pragma omp parallel for schedule(static) if ((long)BT * C > CPU_OPS_BLOCK)
    for (int i = 0; i < BT; i++) {
        const float* x = inp + (long)i * C;
        float* o = out + (long)i * C;
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int c = 0; c < C; c++) sum += x[c];
        float m = sum / C;
        float sq = 0.0f;
#pragma omp simd reduction(+ : sq)
        for (int c = 0; c < C; c++) sq += (x[c] - m) * (x[c] - m);
        float s = 1.0f / sqrtf(sq / C + 1e-5f);
#pragma omp simd
        for (int c = 0; c < C; c++) o[c] = (x[c] - m) * s * weight[c] + bias[c];
        mean[i] = m;
        rstd[i] = s;
    }
}

/* With n = (x - mean)·rstd and g = dout·weight:
 *   dinp += (g - mean_c(g) - n·mean_c(g·n))·rstd,  dweight += Σ_rows dout·n,  dbias += Σ_rows dout.
 * Pass 1: threads split the rows (dinp). Pass 2: threads split the channels (dweight, dbias),
 * each adding the rows in order — deterministic, and no scratch. */
static inline void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                               const float* weight, const float* mean, const float* rstd, int BT, int C) {
#pragma omp parallel
    {
#pragma omp for schedule(static)
        for (int i = 0; i < BT; i++) {
            const float* x = inp + (long)i * C;
            const float* d = dout + (long)i * C;
            float* dx = dinp + (long)i * C;
            float m = mean[i], s = rstd[i], g_mean = 0.0f, gn_mean = 0.0f;
#pragma omp simd reduction(+ : g_mean, gn_mean)
            for (int c = 0; c < C; c++) {
                float g = d[c] * weight[c];
                g_mean += g;
                gn_mean += g * (x[c] - m) * s;
            }
            g_mean /= C;
            gn_mean /= C;
#pragma omp simd
            for (int c = 0; c < C; c++) dx[c] += (d[c] * weight[c] - g_mean - (x[c] - m) * s * gn_mean) * s;
        }
        int nt = omp_get_num_threads(), id = omp_get_thread_num();
        int c0 = cpu_split(C, nt, 16, id), c1 = cpu_split(C, nt, 16, id + 1);
        for (int i = 0; i < BT; i++) {
            const float* x = inp + (long)i * C;
            const float* d = dout + (long)i * C;
            float m = mean[i], s = rstd[i];
#pragma omp simd
            for (int c = c0; c < c1; c++) {
                dweight[c] += d[c] * (x[c] - m) * s;
                dbias[c] += d[c];
            }
        }
    }
}

/* ----------------------------------------------------------------------------
 * matmul: out[BT,OC] = inp[BT,C]·weight[OC,C]ᵀ + bias (bias may be NULL). sgemm (cpu_matmul.h)
 * splits the OC columns (or rows) over the threads. */
static inline void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int BT, int C,
                           int OC) {
    sgemm(BT, OC, C, inp, C, 1, weight, 1, C, out, OC, 0, bias);
}

/* dinp[BT,C] += dout[BT,OC]·weight[OC,C] (skipped when dinp is NULL), dweight[OC,C] += doutᵀ·inp,
 * dbias[OC] += Σ_rows dout (skipped when NULL; threads split the OC columns, rows added in order). */
static inline void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                            const float* weight, int BT, int C, int OC) {
    if (dinp) sgemm(BT, C, OC, dout, OC, 1, weight, C, 1, dinp, C, 1, NULL);
    sgemm(OC, C, BT, dout, 1, OC, inp, C, 1, dweight, C, 1, NULL);
    if (dbias) {
#pragma omp parallel
        {
            int nt = omp_get_num_threads(), id = omp_get_thread_num();
            int o0 = cpu_split(OC, nt, 16, id), o1 = cpu_split(OC, nt, 16, id + 1);
            for (int i = 0; i < BT; i++) {
                const float* d = dout + (long)i * OC;
#pragma omp simd
                for (int o = o0; o < o1; o++) dbias[o] += d[o];
            }
        }
    }
}

/* ----------------------------------------------------------------------------
 * causal self-attention. qkv [B,T,3C]: q at columns [0,C), k at [C,2C), v at [2C,3C); head h
 * owns columns h·hs .. h·hs+hs-1 of each (hs = C/NH).
 *   att[b,h,t,t2] = softmax_{t2<=t}(q_t·k_t2 / sqrt(hs))   (0 stored above the diagonal)
 *   out[b,t,h·hs + i] = Σ_{t2<=t} att[b,h,t,t2]·v_t2[i]
 *
 * attention_row: one head's row t, on the calling thread: p[s] = softmax_{s<=t}(scale·q·k_s) and
 * o = Σ_{s<=t} p[s]·v_s, where key s starts at k + s·stride and value s at v + s·stride (hs floats
 * each). The one operation order (max, cpu_expf, sum, scale by 1/sum) of every CPU attention: the
 * KV-cache sampler (sample_gpt.c) matches attention_forward bit for bit through it. */
static inline void attention_row(float* o, float* p, const float* q, const float* k, const float* v, size_t stride, int t, int hs,
                                 float scale) {
    float maxv = -INFINITY;
    for (int s = 0; s <= t; s++) {
        const float* ks = k + (size_t)s * stride;
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int i = 0; i < hs; i++) dot += q[i] * ks[i];
        p[s] = dot * scale;
        maxv = p[s] > maxv ? p[s] : maxv;
    }
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int s = 0; s <= t; s++) {
        p[s] = cpu_expf(p[s] - maxv);
        sum += p[s];
    }
    float inv = 1.0f / sum;
    for (int s = 0; s <= t; s++) p[s] *= inv;
    for (int i = 0; i < hs; i++) o[i] = 0.0f;
    for (int s = 0; s <= t; s++) {
        const float* vs = v + (size_t)s * stride;
#pragma omp simd
        for (int i = 0; i < hs; i++) o[i] += p[s] * vs[i];
    }
}

/* Threads split the (b, h, t) rows. */
static inline void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH) {
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for collapse(3) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float* base = qkv + (long)b * T * 3 * C + h * hs;
                float* a = att + (((long)b * NH + h) * T + t) * T;
                attention_row(out + ((long)b * T + t) * C + h * hs, a, base + (long)t * 3 * C, base + C, base + 2 * C, (size_t)3 * C, t,
                              hs, scale);
                for (int t2 = t + 1; t2 < T; t2++) a[t2] = 0.0f;
            }
}

/* With s = 1/sqrt(hs), for each row t: datt_t2 = dout_t·v_t2, dv_t2 += att_t,t2·dout_t,
 * dpre_t2 = att_t,t2·(datt_t2 - D_t), D_t = Σ_t3 att_t,t3·datt_t3 / Σ_t3 att_t,t3, dq_t += s·Σ dpre_t2·k_t2,
 * dk_t2 += s·dpre_t2·q_t. D_t and datt_t2 - D_t in double, normalised by the row's actual sum: where one key takes
 * nearly all the probability, datt - D ≈ (1 - p_max)·(datt - datt'), and D's fp32 rounding (or a row summing to 1
 * only to rounding) would be amplified by 1/(1 - p_max). Threads split the (b, h) pairs (dk, dv of a head collect
 * from all its rows t, so rows cannot be split); each thread keeps one row of datt (T floats). */
static inline void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att, int B, int T,
                               int C, int NH) {
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel
    {
        float* datt = (float*)malloc_check((size_t)T * sizeof(float));
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++) {
                const float* base = qkv + (long)b * T * 3 * C + h * hs;
                float* dbase = dqkv + (long)b * T * 3 * C + h * hs;
                for (int t = 0; t < T; t++) {
                    const float* a = att + (((long)b * NH + h) * T + t) * T;
                    const float* d = dout + ((long)b * T + t) * C + h * hs;
                    const float* q = base + (long)t * 3 * C;
                    float* dq = dbase + (long)t * 3 * C;
                    double weighted = 0.0, total = 0.0;
                    for (int t2 = 0; t2 <= t; t2++) {
                        const float* v = base + (long)t2 * 3 * C + 2 * C;
                        float* dv = dbase + (long)t2 * 3 * C + 2 * C;
                        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
                        for (int i = 0; i < hs; i++) {
                            dot += d[i] * v[i];
                            dv[i] += a[t2] * d[i];
                        }
                        datt[t2] = dot;
                        weighted += (double)a[t2] * dot;
                        total += a[t2];
                    }
                    double D = weighted / total;
                    for (int t2 = 0; t2 <= t; t2++) {
                        float dpre = a[t2] * (float)((double)datt[t2] - D) * scale;
                        const float* k = base + (long)t2 * 3 * C + C;
                        float* dk = dbase + (long)t2 * 3 * C + C;
#pragma omp simd
                        for (int i = 0; i < hs; i++) {
                            dq[i] += dpre * k[i];
                            dk[i] += dpre * q[i];
                        }
                    }
                }
            }
        free(datt);
    }
}

/* ----------------------------------------------------------------------------
 * GELU, tanh approximation: gelu(x) = x/2·(1 + tanh(u)), u = sqrt(2/π)·(x + 0.044715·x³).
 * With E = exp(2u): (1 + tanh u)/2 = E/(E+1) = σ(2u) and (1 - tanh² u)/2 = 2·σ(2u)/(E+1), which
 * have no cancellation (tanh's 1 - 2/(E+1) loses the small values near ±1). Threads split the
 * elements. */
#define GELU_SCALE 0.7978845608028654f /* sqrt(2/pi) */
CPU_OPS_VECTOR static inline void gelu_forward_range(float* out, const float* inp, size_t i0, size_t i1) {
#pragma omp simd
    for (size_t i = i0; i < i1; i++) {
        float x = inp[i];
        float e = cpu_expf(2.0f * GELU_SCALE * (x + 0.044715f * x * x * x));
        out[i] = x * (e / (e + 1.0f)); /* σ first: x·E overflows from x ≈ 10 */
    }
}
static inline void gelu_forward(float* out, const float* inp, size_t N) {
#pragma omp parallel for schedule(static) if (N > CPU_OPS_BLOCK)
    for (size_t i = 0; i < N; i += CPU_OPS_BLOCK) gelu_forward_range(out, inp, i, N - i < CPU_OPS_BLOCK ? N : i + CPU_OPS_BLOCK);
}

/* dinp += dout·gelu'(x), gelu'(x) = σ(2u) + x·(1 - tanh² u)/2·du/dx, du/dx = sqrt(2/π)·(1 + 3·0.044715·x²) */
CPU_OPS_VECTOR static inline void gelu_backward_range(float* dinp, const float* inp, const float* dout, size_t i0, size_t i1) {
#pragma omp simd
    for (size_t i = i0; i < i1; i++) {
        float x = inp[i];
        float e = cpu_expf(2.0f * GELU_SCALE * (x + 0.044715f * x * x * x));
        float inv = 1.0f / (e + 1.0f), sigma = e * inv;
        float grad = sigma + 2.0f * x * sigma * inv * GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] += grad * dout[i];
    }
}
static inline void gelu_backward(float* dinp, const float* inp, const float* dout, size_t N) {
#pragma omp parallel for schedule(static) if (N > CPU_OPS_BLOCK)
    for (size_t i = 0; i < N; i += CPU_OPS_BLOCK)
        gelu_backward_range(dinp, inp, dout, i, N - i < CPU_OPS_BLOCK ? N : i + CPU_OPS_BLOCK);
}

/* ----------------------------------------------------------------------------
 * residual: out = a + b. Threads split the blocks. Its backward needs no kernel: the trainer's one residual-stream
 * gradient buffer flows through each block unchanged (train_gpt.c). */
CPU_OPS_VECTOR static inline void residual_forward_range(float* out, const float* a, const float* b, size_t i0, size_t i1) {
#pragma omp simd
    for (size_t i = i0; i < i1; i++) out[i] = a[i] + b[i];
}
static inline void residual_forward(float* out, const float* a, const float* b, size_t N) {
#pragma omp parallel for schedule(static) if (N > CPU_OPS_BLOCK)
    for (size_t i = 0; i < N; i += CPU_OPS_BLOCK) residual_forward_range(out, a, b, i, N - i < CPU_OPS_BLOCK ? N : i + CPU_OPS_BLOCK);
}

/* ----------------------------------------------------------------------------
 * cross-entropy over the first V of Vp logit columns (the padded columns never take part).
 * One row: its max, and Σ exp(x - max), optionally writing each exp(x - max) to e (which may
 * be x itself). */
CPU_OPS_VECTOR static inline float crossentropy_row_sumexp(const float* x, float* e, int V, float* maxv_out) {
    float maxv = -INFINITY;
#pragma omp simd reduction(max : maxv)
    for (int j = 0; j < V; j++) maxv = x[j] > maxv ? x[j] : maxv;
    float sum = 0.0f;
    if (e) {
#pragma omp simd reduction(+ : sum)
        for (int j = 0; j < V; j++) {
            e[j] = cpu_expf(x[j] - maxv);
            sum += e[j];
        }
    } else {
#pragma omp simd reduction(+ : sum)
        for (int j = 0; j < V; j++) sum += cpu_expf(x[j] - maxv);
    }
    *maxv_out = maxv;
    return sum;
}

static inline void crossentropy_check_target(const char* op, int target, int i, int V) {
    if (target < 0 || target >= V) fatalf("%s: target %d at position %d is outside the vocabulary [0, %d)", op, target, i, V);
}

/* losses[i] = logsumexp(logits[i,:V]) - logits[i,targets[i]]. Threads split the rows. A target
 * outside [0, V) is a fatal error. */
static inline void crossentropy_forward(float* losses, const float* logits, const int* targets, int BT, int V, int Vp) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < BT; i++) {
        const float* x = logits + (long)i * Vp;
        crossentropy_check_target("crossentropy_forward", targets[i], i, V);
        float maxv, sum = crossentropy_row_sumexp(x, NULL, V, &maxv);
        losses[i] = logf(sum) + maxv - x[targets[i]];
    }
}

CPU_OPS_VECTOR static inline void crossentropy_row_scale(float* dx, float scale, int n) {
#pragma omp simd
    for (int j = 0; j < n; j++) dx[j] *= scale;
}

/* dlogits[i,j] = dlosses[i]·(softmax(logits[i,:V])_j - [j == targets[i]]) for j < V, 0 for
 * V <= j < Vp. OVERWRITES dlogits (the exception to the += rule), which may alias logits (the
 * usual in-place use): each row's exps are written into dlogits, then scaled. Threads split rows. */
static inline void crossentropy_backward(float* dlogits, const float* logits, const int* targets, const float* dlosses,
                                  int BT, int V, int Vp) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < BT; i++) {
        float* dx = dlogits + (long)i * Vp;
        crossentropy_check_target("crossentropy_backward", targets[i], i, V);
        float maxv, sum = crossentropy_row_sumexp(logits + (long)i * Vp, dx, V, &maxv);
        crossentropy_row_scale(dx, dlosses[i] / sum, V);
        dx[targets[i]] -= dlosses[i];
        for (int j = V; j < Vp; j++) dx[j] = 0.0f;
    }
}

/* ----------------------------------------------------------------------------
 * Σ g², deterministic for any thread count: g is cut into at most GNORM_CHUNKS chunks of a
 * size that depends on n only; each chunk is summed in double by one thread, and the chunk sums
 * are added in order by one thread. */
#define GNORM_CHUNKS 4096
static inline double global_norm_squared(const float* g, size_t n) {
    double partial[GNORM_CHUNKS];
    size_t chunk = (n + GNORM_CHUNKS - 1) / GNORM_CHUNKS;
    if (chunk < 4096) chunk = 4096;
    long nchunks = (long)((n + chunk - 1) / chunk);
#pragma omp parallel for schedule(static)
    for (long c = 0; c < nchunks; c++) {
        size_t end = (size_t)(c + 1) * chunk < n ? (size_t)(c + 1) * chunk : n;
        double s = 0.0;
#pragma omp simd reduction(+ : s)
        for (size_t i = (size_t)c * chunk; i < end; i++) s += (double)g[i] * (double)g[i];
        partial[c] = s;
    }
    double total = 0.0;
    for (long c = 0; c < nchunks; c++) total += partial[c];
    return total;
}

/* ----------------------------------------------------------------------------
 * AdamW */
/* AdamW on elements [i0, i1) in vectors of W floats; returns the first element not done (the
 * scalar instance finishes the rest). Explicit vectors because sqrtf only auto-vectorises under
 * -fno-math-errno. No FMA contraction, so every instance gives the same bits. */
#define ADAMW_RANGE(NAME, TARGET, VEC, W, LOADU, STOREU, SET1, ADD, SUB, MUL, DIV, SQRT)                        \
    TARGET static inline size_t NAME(float* params, const float* grads, float* m, float* v, size_t i0, size_t i1,       \
                              float step_size, float bc2_sqrt, float decay, float beta1, float beta2, float eps,  \
                              float grad_scale) {                                                                \
        size_t i = i0;                                                                                           \
        for (; i + W <= i1; i += W) {                                                                            \
            VEC g = MUL(LOADU(grads + i), SET1(grad_scale));                                                     \
            VEC mi = ADD(MUL(SET1(beta1), LOADU(m + i)), MUL(SET1(1.0f - beta1), g));                            \
            VEC vi = ADD(MUL(SET1(beta2), LOADU(v + i)), MUL(MUL(SET1(1.0f - beta2), g), g));                    \
            VEC denom = ADD(DIV(SQRT(vi), SET1(bc2_sqrt)), SET1(eps));                                           \
            STOREU(m + i, mi);                                                                                   \
            STOREU(v + i, vi);                                                                                   \
            STOREU(params + i, SUB(MUL(LOADU(params + i), SET1(decay)), DIV(MUL(SET1(step_size), mi), denom)));  \
        }                                                                                                        \
        return i;                                                                                                \
    }
ADAMW_RANGE(adamw_range_scalar, , float, 1, SCALAR_LOAD, SCALAR_STORE, SCALAR_SET1, SCALAR_ADD, SCALAR_SUB, SCALAR_MUL, SCALAR_DIV,
            sqrtf) /* the SCALAR_ stand-ins: llmc/cpu_matmul.h */
ADAMW_RANGE(adamw_range_avx2, __attribute__((target("avx2"))), __m256, 8, _mm256_loadu_ps, _mm256_storeu_ps,
            _mm256_set1_ps, _mm256_add_ps, _mm256_sub_ps, _mm256_mul_ps, _mm256_div_ps, _mm256_sqrt_ps)
/* GCC 12 at -O1 warns falsely inside _mm512_sqrt_ps, whose masked form takes an _mm512_undefined_ps() operand */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
ADAMW_RANGE(adamw_range_avx512, __attribute__((target("avx512f"))), __m512, 16, _mm512_loadu_ps, _mm512_storeu_ps,
            _mm512_set1_ps, _mm512_add_ps, _mm512_sub_ps, _mm512_mul_ps, _mm512_div_ps, _mm512_sqrt_ps)
#pragma GCC diagnostic pop

/* AdamW, as torch.optim.AdamW (single-tensor path), on g = grads·grad_scale, t >= 1:
 *   p *= 1 - lr·wd;  m = β1·m + (1-β1)·g;  v = β2·v + (1-β2)·g²;
 *   p -= (lr/(1-β1^t))·m / (sqrt(v)/sqrt(1-β2^t) + eps).
 * Threads split the blocks; the widest vector instance the CPU has (cpu_matmul_isa()) runs. */
static inline void adamw_update(float* params, const float* grads, float* m, float* v, size_t n, float lr, float beta1,
                         float beta2, float eps, float weight_decay, float grad_scale, int t) {
    float step_size = (float)((double)lr / (1.0 - pow((double)beta1, t)));
    float bc2_sqrt = (float)sqrt(1.0 - pow((double)beta2, t));
    float decay = 1.0f - lr * weight_decay;
    int isa = cpu_matmul_isa();
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i += CPU_OPS_BLOCK) {
        size_t end = n - i < CPU_OPS_BLOCK ? n : i + CPU_OPS_BLOCK, done = i;
        if (isa == CPU_ISA_AVX512)
            done = adamw_range_avx512(params, grads, m, v, i, end, step_size, bc2_sqrt, decay, beta1, beta2, eps, grad_scale);
        else if (isa == CPU_ISA_AVX2)
            done = adamw_range_avx2(params, grads, m, v, i, end, step_size, bc2_sqrt, decay, beta1, beta2, eps, grad_scale);
        adamw_range_scalar(params, grads, m, v, done, end, step_size, bc2_sqrt, decay, beta1, beta2, eps, grad_scale);
    }
}

#endif /* LLMC_CPU_OPS_H */
