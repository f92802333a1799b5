/*
 * llmc/sampler.h — drawing the next token from logits.
 *
 * p_i ∝ exp((l_i − max l) / temperature) over i < V, restricted to the top_k largest logits when
 * 0 < top_k < V (ties at the k-th value: the lower indices win, so exactly k stay). One uniform
 * u ∈ [0,1) picks the first i whose cumulative probability exceeds u. temperature 0 returns the
 * argmax (lowest index among equals) without drawing. Sums in double. No global state.
 */
#ifndef LLMC_SAMPLER_H
#define LLMC_SAMPLER_H

#include <math.h>
#include "llmc/fileio.h"
#include "llmc/rng.h"

/* the k-th largest of x[0..n), 1 ≤ k ≤ n: quickselect (Hoare partition, descending) on a copy */
static inline float sampler_kth_largest_(const float* x, int n, int k) {
    float* a = (float*)malloc_check((size_t)n * sizeof(float));
    memcpy(a, x, (size_t)n * sizeof(float));
    int lo = 0, hi = n - 1, target = k - 1;
    while (lo < hi) {
        float pivot = a[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (a[i] > pivot) i++;
            while (a[j] < pivot) j--;
            if (i <= j) {
                float t = a[i];
                a[i++] = a[j];
                a[j--] = t;
            }
        }
        /* now a[lo..j] ≥ pivot ≥ a[i..hi], and everything strictly between j and i equals pivot */
        if (target <= j) hi = j;
        else if (target >= i) lo = i;
        else break;
    }
    float kth = a[target];
    free(a);
    return kth;
}

static inline int sample_token(const float* logits, int V, float temperature, int top_k, Rng* rng) {
    if (V <= 0) fatalf("sample_token: vocab size %d is not positive", V);
    int best = 0;
    for (int i = 0; i < V; i++) { /* -inf is a token of probability 0; NaN and +inf leave no distribution */
        if (isnan(logits[i]) || logits[i] == INFINITY)
            fatalf("sample_token: logit %d of %d is %g (a diverged model?)", i, V, (double)logits[i]);
        if (logits[i] > logits[best]) best = i;
    }
    if (!isfinite(logits[best])) fatalf("sample_token: every logit is %g", (double)logits[best]);
    if (temperature <= 0.0f) return best;
    int k = top_k > 0 && top_k < V ? top_k : V;
    float threshold = k < V ? sampler_kth_largest_(logits, V, k) : -INFINITY;
    int above = 0; /* logits strictly above the threshold: all kept; the rest of the k are ties */
    for (int i = 0; i < V; i++) above += logits[i] > threshold;
    int ties_left = k - above;
    double max = logits[best], inv_t = 1.0 / temperature, sum = 0.0;
    for (int pass = 0; pass < 2; pass++) {
        double u = pass ? (double)rng_uniform(rng) * sum : 0.0, cum = 0.0;
        int ties = ties_left, last = best;
        for (int i = 0; i < V; i++) {
            if (logits[i] < threshold || (logits[i] == threshold && ties-- <= 0)) continue;
            double p = exp((logits[i] - max) * inv_t);
            if (pass == 0) sum += p;
            else {
                cum += p;
                last = i;
                if (cum > u) return i;
            }
        }
        if (pass) return last; /* rounding: u landed at the very top */
    }
    return best;
}

#endif
