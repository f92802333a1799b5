/*
 * llmc/encoder.cuh — token + position embedding.
 *   forward:  out[b,t,:] = wte[inp[b,t],:] + wpe[t,:]          one thread per pack of W output elements
 *   backward: dwpe[t,c] += Σ_b dout[b,t,c]                       one thread per pack of (t, c..c+W),
 *                                                                b in order
 *             dwte[v,c] += Σ_{(b,t): inp[b,t]=v} dout[b,t,c]     the positions of each token, in order, cut
 *                                                                into runs of at most ENCODER_RUN; one warp
 *                                                                per run, its lanes striding over packs of c
 * Every access is a pack of W elements (llmc/cuda_utils.cuh), a template argument: W = PACKX (16 bytes) when
 * C % PACKX == 0 and the arrays are 16-byte aligned, else W = 1 (any C); the host functions choose (pack_width).
 * The backward is deterministic and has no atomics: the host (which holds the batch) groups the
 * positions by token (encoder_plan). A token with one run has its dwte row written by that run's warp; a
 * token with several (a frequent token of real text: a newline can be 5-10% of a batch) has each run's
 * sum stored in fp32 partials, which a second kernel adds in run order, one thread per pack of its row.
 * So no warp sums more than ENCODER_RUN positions, and the summation order depends only on the batch.
 */
#ifndef LLMC_ENCODER_CUH
#define LLMC_ENCODER_CUH

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "llmc/cuda_utils.cuh"

#define ENCODER_BLOCK 256

template <int W>
__global__ void encoder_forward_kernel(floatX* out, const int* inp, const floatX* wte, const floatX* wpe, int B, int T, int C) {
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * W;
    if (i >= (size_t)B * T * C) return;
    int c = (int)(i % C), bt = (int)(i / C), t = bt % T;
    float e[W], p[W];
    load_floats(W, e, wte + (size_t)inp[bt] * C + c);
    load_floats(W, p, wpe + (size_t)t * C + c);
    for (int k = 0; k < W; k++) e[k] += p[k];
    store_floats(W, out + i, e);
}

template <int W>
__global__ void encoder_backward_wpe_kernel(floatX* dwpe, const floatX* dout, int B, int T, int C) {
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * W;
    if (i >= (size_t)T * C) return;
    float s[W] = {}, d[W];
    for (int b = 0; b < B; b++) {
        load_floats(W, d, dout + (size_t)b * T * C + i);
        for (int k = 0; k < W; k++) s[k] += d[k];
    }
    load_floats(W, d, dwpe + i);
    for (int k = 0; k < W; k++) d[k] += s[k];
    store_floats(W, dwpe + i, d);
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
template <int W>
__global__ void encoder_backward_runs_kernel(floatX* dwte, float* partials, const floatX* dout, const int* plan, int runs, int C) {
    int run = (int)((blockIdx.x * blockDim.x + threadIdx.x) / 32), lane = threadIdx.x % 32;
    if (run >= runs) return;
    const int *run_slot = plan + runs, *run_start = plan + 2 * runs, *positions = plan + 3 * runs + 1;
    int token = plan[run], slot = run_slot[run];
    const int* pos_end = positions + run_start[run + 1];
    for (int c = lane * W; c < C; c += 32 * W) {
        float s[W] = {}, d[W];
        for (const int* p = positions + run_start[run]; p < pos_end; p++) {
            load_floats(W, d, dout + (size_t)*p * C + c);
            for (int k = 0; k < W; k++) s[k] += d[k];
        }
        if (slot < 0) {
            load_floats(W, d, dwte + (size_t)token * C + c);
            for (int k = 0; k < W; k++) d[k] += s[k];
            store_floats(W, dwte + (size_t)token * C + c, d);
        } else {
            store_floats(W, partials + (size_t)slot * C + c, s);
        }
    }
}

/* one thread per pack (split token i, c..c+W): dwte[token] += its runs' partial sums, in run order */
template <int W>
__global__ void encoder_backward_split_kernel(floatX* dwte, const float* partials, const int* split_token, int split, int C) {
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * W;
    if (i >= (size_t)split * C) return;
    int t = (int)(i / C), c = (int)(i % C);
    const int* split_first = split_token + split;
    float s[W] = {}, d[W];
    for (int r = split_first[t]; r < split_first[t + 1]; r++) {
        load_floats(W, d, partials + (size_t)r * C + c);
        for (int k = 0; k < W; k++) s[k] += d[k];
    }
    load_floats(W, d, dwte + (size_t)split_token[t] * C + c);
    for (int k = 0; k < W; k++) d[k] += s[k];
    store_floats(W, dwte + (size_t)split_token[t] * C + c, d);
}

/* Groups the BT positions of inputs (tokens in [0, V)) by token into plan (encoder_plan_max_ints(BT) ints;
 * the first .ints of them are the plan to copy to the device): a counting sort, O(BT + V). counts: V + 1
 * scratch ints. */
static inline EncoderPlan encoder_plan(int* plan, int* counts, const int* inputs, int BT, int V) {
    memset(counts, 0, (size_t)(V + 1) * sizeof(int));
    for (int i = 0; i < BT; i++) {
        if (inputs[i] < 0 || inputs[i] >= V) {
            fprintf(stderr, "error: encoder_plan: token %d at position %d is outside the vocabulary [0, %d)\n", inputs[i], i, V);
            exit(1);
        }
        counts[inputs[i] + 1]++;
    }
    EncoderPlan p = {0, 0, 0, 0};
    for (int v = 1; v <= V; v++) { /* a token's n positions make ceil(n / ENCODER_RUN) runs */
        p.runs += ceil_div(counts[v], ENCODER_RUN);
        p.split += counts[v] > ENCODER_RUN;
        counts[v] += counts[v - 1]; /* counts[v]: where token v's positions start */
    }
    int *run_token = plan, *run_slot = plan + p.runs, *run_start = plan + 2 * p.runs, *positions = plan + 3 * p.runs + 1,
        *split_token = positions + BT, *split_first = split_token + p.split;
    for (int i = 0; i < BT; i++) positions[counts[inputs[i]]++] = i; /* then counts[v]: where token v's positions end */
    int run = 0, split = 0;
    for (int v = 0; v < V; v++) {
        int start = v > 0 ? counts[v - 1] : 0, n = counts[v] - start;
        if (n > ENCODER_RUN) {
            split_token[split] = v;
            split_first[split++] = p.partials;
        }
        for (int j = 0; j < n; j += ENCODER_RUN, run++) {
            run_token[run] = v;
            run_slot[run] = n > ENCODER_RUN ? p.partials++ : -1;
            run_start[run] = start + j;
        }
    }
    run_start[run] = BT;
    split_first[split] = p.partials;
    p.ints = (int)(split_first + p.split + 1 - plan);
    return p;
}

static inline void encoder_forward(floatX* out, const int* inp, const floatX* wte, const floatX* wpe, int B, int T, int C,
                                   cudaStream_t stream) {
    int w = pack_width(C, out, wte, wpe);
    launch_kernel(w == PACKX ? encoder_forward_kernel<PACKX> : encoder_forward_kernel<1>, dim3(ceil_div((long)B * T * C / w, ENCODER_BLOCK)),
                  dim3(ENCODER_BLOCK), 0, stream, out, inp, wte, wpe, B, T, C);
}

/* plan_dev: the device copy of encoder_plan's first plan.ints; partials: encoder_partial_floats(B·T, C) floats */
static inline void encoder_backward(floatX* dwte, floatX* dwpe, float* partials, const floatX* dout, const int* plan_dev, EncoderPlan plan,
                                    int B, int T, int C, cudaStream_t stream) {
    int w = pack_width(C, dwte, dwpe, dout, partials), wide = w == PACKX;
    launch_kernel(wide ? encoder_backward_wpe_kernel<PACKX> : encoder_backward_wpe_kernel<1>, dim3(ceil_div((long)T * C / w, ENCODER_BLOCK)),
                  dim3(ENCODER_BLOCK), 0, stream, dwpe, dout, B, T, C);
    launch_kernel(wide ? encoder_backward_runs_kernel<PACKX> : encoder_backward_runs_kernel<1>, dim3(ceil_div((long)plan.runs * 32, ENCODER_BLOCK)),
                  dim3(ENCODER_BLOCK), 0, stream, dwte, partials, dout, plan_dev, plan.runs, C);
    if (plan.split > 0)
        launch_kernel(wide ? encoder_backward_split_kernel<PACKX> : encoder_backward_split_kernel<1>,
                      dim3(ceil_div((long)plan.split * C / w, ENCODER_BLOCK)), dim3(ENCODER_BLOCK), 0, stream, dwte, partials,
                      plan_dev + 3 * plan.runs + 1 + B * T, plan.split, C);
}

#endif /* LLMC_ENCODER_CUH */
