/*
 * llmc/encoder.cuh — token + position embedding.
 *   forward:  out[b,t,:] = wte[inp[b,t],:] + wpe[t,:]          one thread per 16-byte pack of PACKX
 *                                                                output elements
 *   backward: dwpe[t,c] += Σ_b dout[b,t,c]                       one thread per pack of (t, c..c+PACKX),
 *                                                                b in order
 *             dwte[v,c] += Σ_{(b,t): inp[b,t]=v} dout[b,t,c]     the positions of each token, in order, cut
 *                                                                into runs of at most ENCODER_RUN; one warp
 *                                                                per run, its lanes striding over packs of c
 * Every access is a 16-byte pack (llmc/cuda_utils.cuh): C % PACKX == 0 and 16-byte aligned arrays,
 * checked by the host functions.
 * The backward is deterministic and has no atomics: the host (which holds the batch) groups the
 * positions by token (encoder_plan). A token with one run has its dwte row written by that run's warp; a
 * token with several (a frequent token of real text: a newline can be 5-10% of a batch) has each run's
 * sum stored in fp32 partials, which a second kernel adds in run order, one thread per pack of its row.
 * So no warp sums more than ENCODER_RUN positions, and the summation order depends only on the batch.
 */
#ifndef LLMC_ENCODER_CUH
#define LLMC_ENCODER_CUH

#include <stdlib.h>
#include "llmc/cuda_utils.cuh"

#define ENCODER_BLOCK 256

__global__ void encoder_forward_kernel(floatX* out, const int* inp, const floatX* wte, const floatX* wpe, int B, int T, int C) {
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * PACKX;
    if (i >= (size_t)B * T * C) return;
    int c = (int)(i % C), bt = (int)(i / C), t = bt % T;
    float e[PACKX], p[PACKX];
    load_floats(PACKX, e, wte + (size_t)inp[bt] * C + c);
    load_floats(PACKX, p, wpe + (size_t)t * C + c);
    for (int k = 0; k < PACKX; k++) e[k] += p[k];
    store_floats(PACKX, out + i, e);
}

__global__ void encoder_backward_wpe_kernel(floatX* dwpe, const floatX* dout, int B, int T, int C) {
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * PACKX;
    if (i >= (size_t)T * C) return;
    float s[PACKX] = {}, d[PACKX];
    for (int b = 0; b < B; b++) {
        load_floats(PACKX, d, dout + (size_t)b * T * C + i);
        for (int k = 0; k < PACKX; k++) s[k] += d[k];
    }
    load_floats(PACKX, d, dwpe + i);
    for (int k = 0; k < PACKX; k++) d[k] += s[k];
    store_floats(PACKX, dwpe + i, d);
}

/* The host's grouping of a batch by token (encoder_plan), into a device array of int laid out as below */
typedef struct {
    int runs;     /* runs of at most ENCODER_RUN positions of one token */
    int split;    /* tokens with more than one run */
    int ints;     /* ints used: 3·runs + 1 + BT + 2·split + 1 */
    int partials; /* fp32 partial rows used (runs of split tokens) */
} EncoderPlan;

/* The plan's arrays in its int buffer: run_token[runs], run_slot[runs] (the partial row of a run of a split
 * token, -1 for a token with a single run), run_start[runs + 1] (into positions), positions[BT] (grouped by
 * token, increasing in a token), split_token[split], split_first[split + 1] (into the partial rows). */
#define ENCODER_RUN 64
static inline size_t encoder_plan_max_ints(long BT) { return 4 * (size_t)BT + 2 * (size_t)(BT / ENCODER_RUN) + 2; }
/* a split token has n > ENCODER_RUN positions and ceil(n / ENCODER_RUN) < 2n / ENCODER_RUN runs */
static inline size_t encoder_partial_floats(long BT, long C) { return (2 * (size_t)BT / ENCODER_RUN + 1) * (size_t)C; }

/* warp w sums run w's positions, pack by pack, into its token's dwte row or its partial row */
__global__ void encoder_backward_runs_kernel(floatX* dwte, float* partials, const floatX* dout, const int* plan, int runs, int C) {
    int run = (int)((blockIdx.x * blockDim.x + threadIdx.x) / 32), lane = threadIdx.x % 32;
    if (run >= runs) return;
    const int *run_slot = plan + runs, *run_start = plan + 2 * runs, *positions = plan + 3 * runs + 1;
    int token = plan[run], slot = run_slot[run];
    const int* pos_end = positions + run_start[run + 1];
    for (int c = lane * PACKX; c < C; c += 32 * PACKX) {
        float s[PACKX] = {}, d[PACKX];
        for (const int* p = positions + run_start[run]; p < pos_end; p++) {
            load_floats(PACKX, d, dout + (size_t)*p * C + c);
            for (int k = 0; k < PACKX; k++) s[k] += d[k];
        }
        if (slot < 0) {
            load_floats(PACKX, d, dwte + (size_t)token * C + c);
            for (int k = 0; k < PACKX; k++) d[k] += s[k];
            store_floats(PACKX, dwte + (size_t)token * C + c, d);
        } else {
            store_floats(PACKX, partials + (size_t)slot * C + c, s);
        }
    }
}

/* one thread per pack (split token i, c..c+PACKX): dwte[token] += its runs' partial sums, in run order */
__global__ void encoder_backward_split_kernel(floatX* dwte, const float* partials, const int* split_token, int split, int C) {
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * PACKX;
    if (i >= (size_t)split * C) return;
    int t = (int)(i / C), c = (int)(i % C);
    const int* split_first = split_token + split;
    float s[PACKX] = {}, d[PACKX];
    for (int r = split_first[t]; r < split_first[t + 1]; r++) {
        load_floats(PACKX, d, partials + (size_t)r * C + c);
        for (int k = 0; k < PACKX; k++) s[k] += d[k];
    }
    load_floats(PACKX, d, dwte + (size_t)split_token[t] * C + c);
    for (int k = 0; k < PACKX; k++) d[k] += s[k];
    store_floats(PACKX, dwte + (size_t)split_token[t] * C + c, d);
}

static int encoder_key_compare_(const void* a, const void* b) {
    uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
    return x < y ? -1 : x > y;
}

/* the number of sorted keys from i on with key i's token */
static inline int encoder_same_token_(const uint64_t* keys, int i, int BT) {
    int n = 1;
    while (i + n < BT && keys[i + n] >> 32 == keys[i] >> 32) n++;
    return n;
}

/* Groups the BT positions of inputs by token into plan (encoder_plan_max_ints(BT) ints; the first .ints
 * of them are the plan to copy to the device). keys: BT scratch words. */
static inline EncoderPlan encoder_plan(int* plan, uint64_t* keys, const int* inputs, int BT) {
    for (int i = 0; i < BT; i++) keys[i] = (uint64_t)(uint32_t)inputs[i] << 32 | (uint32_t)i;
    qsort(keys, (size_t)BT, sizeof(uint64_t), encoder_key_compare_);
    EncoderPlan p = {0, 0, 0, 0};
    for (int i = 0, n; i < BT; i += n) { /* count the runs: a token's n positions make ceil(n / ENCODER_RUN) */
        n = encoder_same_token_(keys, i, BT);
        p.runs += ceil_div(n, ENCODER_RUN);
        p.split += n > ENCODER_RUN;
    }
    int *run_token = plan, *run_slot = plan + p.runs, *run_start = plan + 2 * p.runs, *positions = plan + 3 * p.runs + 1,
        *split_token = positions + BT, *split_first = split_token + p.split;
    int run = 0, split = 0;
    for (int i = 0, n; i < BT; i += n) {
        n = encoder_same_token_(keys, i, BT);
        int token = (int)(keys[i] >> 32);
        if (n > ENCODER_RUN) {
            split_token[split] = token;
            split_first[split++] = p.partials;
        }
        for (int j = 0; j < n; j += ENCODER_RUN, run++) {
            run_token[run] = token;
            run_slot[run] = n > ENCODER_RUN ? p.partials++ : -1;
            run_start[run] = i + j;
        }
        for (int j = i; j < i + n; j++) positions[j] = (int)(uint32_t)keys[j];
    }
    run_start[run] = BT;
    split_first[split] = p.partials;
    p.ints = (int)(split_first + p.split + 1 - plan);
    return p;
}

static inline void encoder_forward(floatX* out, const int* inp, const floatX* wte, const floatX* wpe, int B, int T, int C,
                                   cudaStream_t stream) {
    require_multiple(C, PACKX);
    require_pack_aligned(out);
    require_pack_aligned(wte);
    require_pack_aligned(wpe);
    launch_kernel(encoder_forward_kernel, dim3(ceil_div((long)B * T * C / PACKX, ENCODER_BLOCK)), dim3(ENCODER_BLOCK), 0, stream, out, inp,
                  wte, wpe, B, T, C);
}

/* plan_dev: the device copy of encoder_plan's first plan.ints; partials: encoder_partial_floats(B·T, C) floats */
static inline void encoder_backward(floatX* dwte, floatX* dwpe, float* partials, const floatX* dout, const int* plan_dev, EncoderPlan plan,
                                    int B, int T, int C, cudaStream_t stream) {
    require_multiple(C, PACKX);
    require_pack_aligned(dwte);
    require_pack_aligned(dwpe);
    require_pack_aligned(dout);
    require_pack_aligned(partials);
    launch_kernel(encoder_backward_wpe_kernel, dim3(ceil_div((long)T * C / PACKX, ENCODER_BLOCK)), dim3(ENCODER_BLOCK), 0, stream, dwpe,
                  dout, B, T, C);
    launch_kernel(encoder_backward_runs_kernel, dim3(ceil_div((long)plan.runs * 32, ENCODER_BLOCK)), dim3(ENCODER_BLOCK), 0, stream, dwte,
                  partials, dout, plan_dev, plan.runs, C);
    if (plan.split > 0)
        launch_kernel(encoder_backward_split_kernel, dim3(ceil_div((long)plan.split * C / PACKX, ENCODER_BLOCK)), dim3(ENCODER_BLOCK), 0,
                      stream, dwte, partials, plan_dev + 3 * plan.runs + 1 + B * T, plan.split, C);
}

#endif /* LLMC_ENCODER_CUH */
