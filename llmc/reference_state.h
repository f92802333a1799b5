/*
 * llmc/reference_state.h — reader of the reference states that train_gpt.py
 * writes (doc/formats.md, "Reference state"): the batch, logits, loss, every
 * gradient, the losses of K AdamW steps and the final weights, with the
 * hyperparameters that produced them. Used by test_gpt.c and test_gpt.cu.
 * Valid C11 and C++.
 */
#ifndef LLMC_REFERENCE_STATE_H
#define LLMC_REFERENCE_STATE_H

#include <math.h>
#include <stdio.h>
#include <string.h>
#include "fileio.h"

#define REFERENCE_MAGIC 0x46455247u /* "GREF" */
#define REFERENCE_VERSION 1

typedef struct {
    int B, T, K, V, Vp;
    size_t num_params;
    int schedule_kind, warmup, total_steps, seed;
    float lr, final_lr_frac, weight_decay, beta1, beta2, eps, grad_clip, wsd_frac;
    int* inputs;         /* (B, T) */
    int* targets;        /* (B, T) */
    float* logits;       /* (B, T, V) */
    float loss;
    float* grads;        /* (num_params), model-file order */
    float* step_losses;  /* (K) */
    float* final_params; /* (num_params) */
} ReferenceState;

static inline void reference_state_read(ReferenceState* r, const char* path) {
    FILE* f = fopen_regular_check(path);
    int32_t h[HEADER_WORDS];
    header_read_check(f, path, "reference state", REFERENCE_MAGIC, REFERENCE_VERSION, h);
    memset(r, 0, sizeof(*r));
    r->B = h[5];
    r->T = h[6];
    r->K = h[7];
    r->V = h[8];
    r->Vp = h[9];
    r->num_params = (size_t)header_get_u64(h, 10);
    r->schedule_kind = h[12];
    r->warmup = h[13];
    r->total_steps = h[14];
    r->lr = header_get_f32(h, 16);
    r->final_lr_frac = header_get_f32(h, 17);
    r->weight_decay = header_get_f32(h, 18);
    r->beta1 = header_get_f32(h, 19);
    r->beta2 = header_get_f32(h, 20);
    r->eps = header_get_f32(h, 21);
    r->grad_clip = header_get_f32(h, 22);
    r->wsd_frac = header_get_f32(h, 23);
    r->seed = h[24];
    if (r->B <= 0 || r->T <= 0 || r->K < 0 || r->V <= 0 || r->Vp < r->V || r->num_params == 0)
        fatalf("%s: reference state has invalid sizes B=%d T=%d K=%d V=%d Vp=%d params=%zu", path, r->B, r->T, r->K, r->V, r->Vp,
               r->num_params);
    if (r->schedule_kind < 0 || r->schedule_kind > 3) fatalf("%s: unknown schedule id %d", path, r->schedule_kind);
    size_t BT = (size_t)r->B * r->T;
    uint64_t expect = 4 * (2 * BT + BT * (size_t)r->V + 1 + 2 * r->num_params + (size_t)r->K);
    if (header_payload_bytes(h) != expect)
        fatalf("%s: payload is %llu bytes but B=%d T=%d V=%d K=%d params=%zu need %llu", path,
               (unsigned long long)header_payload_bytes(h), r->B, r->T, r->V, r->K, r->num_params, (unsigned long long)expect);
    r->inputs = (int*)malloc_check(BT * sizeof(int));
    r->targets = (int*)malloc_check(BT * sizeof(int));
    r->logits = (float*)malloc_check(BT * r->V * sizeof(float));
    r->grads = (float*)malloc_check(r->num_params * sizeof(float));
    r->step_losses = (float*)malloc_check(((size_t)r->K + 1) * sizeof(float));
    r->final_params = (float*)malloc_check(r->num_params * sizeof(float));
    uint32_t crc = 0;
    payload_read(f, path, r->inputs, BT * sizeof(int), &crc);
    payload_read(f, path, r->targets, BT * sizeof(int), &crc);
    payload_read(f, path, r->logits, BT * r->V * sizeof(float), &crc);
    payload_read(f, path, &r->loss, sizeof(float), &crc);
    payload_read(f, path, r->grads, r->num_params * sizeof(float), &crc);
    payload_read(f, path, r->step_losses, (size_t)r->K * sizeof(float), &crc);
    payload_read(f, path, r->final_params, r->num_params * sizeof(float), &crc);
    fclose_check(f, path);
    payload_crc_check(h, crc, path, "reference state");
    for (size_t i = 0; i < BT; i++)
        if (r->inputs[i] < 0 || r->inputs[i] >= r->V || r->targets[i] < 0 || r->targets[i] >= r->V)
            fatalf("%s: token at position %zu is outside the vocabulary [0, %d)", path, i, r->V);
}

static inline void reference_state_free(ReferenceState* r) {
    free(r->inputs);
    free(r->targets);
    free(r->logits);
    free(r->grads);
    free(r->step_losses);
    free(r->final_params);
}

/* ----------------------------------------------------------------------------
 * Comparison bookkeeping of the trainers' tests (test_gpt.c, test_gpt.cu). */

/* ||a - b|| / ||b|| in double; if ||b|| is 0, the absolute norm ||a - b||; NaN anywhere gives infinity. */
static inline double rel_l2(const float* a, const float* b, size_t n) {
    double diff = 0.0, ref = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        diff += d * d;
        ref += (double)b[i] * b[i];
    }
    if (!(diff == diff)) return INFINITY;
    return ref > 0.0 ? sqrt(diff / ref) : sqrt(diff);
}

typedef struct {
    int passed, failed;
    double worst, worst_ratio; /* the error with the largest error / bound, and that ratio */
    char worst_name[64];
} CheckTally;

/* One comparison: prints "what name kind err (bound b) ok|FAIL" and counts it. */
static inline void tally_check(CheckTally* t, const char* what, const char* name, const char* kind, double err, double bound) {
    int ok = err <= bound;
    printf("%-8s %-10s %s %.3e (bound %.0e)  %s\n", what, name, kind, err, bound, ok ? "ok" : "FAIL");
    if (ok) t->passed++;
    else t->failed++;
    if (!(err / bound <= t->worst_ratio)) {
        t->worst_ratio = err / bound;
        t->worst = err;
        snprintf(t->worst_name, sizeof(t->worst_name), "%s %s", what, name);
    }
}

/* sums of squared differences and of squared reference values over ranges of a parameter vector */
typedef struct {
    double diff, ref;
} SquareSums;
static inline void square_sums_add(SquareSums* s, const float* ours, const float* ref, size_t begin, size_t n) {
    for (size_t k = begin; k < begin + n; k++) {
        double d = (double)ours[k] - (double)ref[k];
        s->diff += d * d;
        s->ref += (double)ref[k] * ref[k];
    }
}
/* as rel_l2: relative L2 error, absolute if the reference is 0, infinity for NaN */
static inline double square_sums_rel(SquareSums s) {
    if (!(s.diff == s.diff)) return INFINITY;
    return s.ref > 0.0 ? sqrt(s.diff / s.ref) : sqrt(s.diff);
}

/* The weights after the K steps (params, model-file order: num_tensors tensors named names[i] of sizes[i]
 * floats, L layers of C channels) against ref, each tensor to tensor_bound and all together to all_bound,
 * relative L2. qkvw and qkvb are stacked per layer as q, k, v thirds of C rows. Not compared (a line says
 * so, and the all-weights error leaves them out): the weights whose gradient is exactly zero, because
 * AdamW divides each gradient by its own running RMS, so a zero gradient's rounding noise (in fp32, of
 * the order of 1e-10) becomes an update of up to lr per step, in the reference and here: there is nothing
 * to compare. They are the key third of qkvb (it adds q.bk to every score of a query row, which the
 * softmax cancels), and with T = 1 the query and key thirds of qkvw and qkvb (each query sees only its
 * own key: the softmax has one entry). Their gradients are compared, in their tensors', with the rest. */
static inline void check_final_weights(CheckTally* t, const float* params, const float* ref, const char* const* names,
                                       const size_t* sizes, int num_tensors, int L, int C, int T, double tensor_bound,
                                       double all_bound) {
    SquareSums all = {0.0, 0.0}, skipped = {0.0, 0.0};
    size_t off = 0;
    for (int i = 0; i < num_tensors; i++) {
        square_sums_add(&all, params, ref, off, sizes[i]);
        int is_qkvb = strcmp(names[i], "qkvb") == 0, is_qkvw = strcmp(names[i], "qkvw") == 0;
        if (is_qkvb || (is_qkvw && T == 1)) {
            size_t block = (size_t)C * (is_qkvw ? C : 1); /* one third of one layer */
            for (int part = 0; part < 3; part++) {
                char name[32];
                snprintf(name, sizeof(name), "%s.%c", names[i], "qkv"[part]);
                SquareSums sums = {0.0, 0.0};
                for (int l = 0; l < L; l++) square_sums_add(&sums, params, ref, off + (3 * (size_t)l + part) * block, block);
                if ((is_qkvb && part == 1) || (T == 1 && part < 2)) {
                    printf("%-8s %-10s rel L2 %.3e  not compared (zero gradient: both sides are rounding noise)\n", "weights", name,
                           square_sums_rel(sums));
                    skipped.diff += sums.diff;
                    skipped.ref += sums.ref;
                } else {
                    tally_check(t, "weights", name, "rel L2", square_sums_rel(sums), tensor_bound);
                }
            }
        } else {
            tally_check(t, "weights", names[i], "rel L2", rel_l2(params + off, ref + off, sizes[i]), tensor_bound);
        }
        off += sizes[i];
    }
    SquareSums compared = {all.diff - skipped.diff, all.ref - skipped.ref};
    tally_check(t, "weights", "all", "rel L2", square_sums_rel(compared), all_bound);
}

/* the closing lines: the worst error, then "N passed, M failed"; returns the exit status */
static inline int tally_finish(const CheckTally* t) {
    printf("worst relative error %.3e (%s, %.2f of its bound)\n", t->worst, t->worst_name, t->worst_ratio);
    printf("%d passed, %d failed\n", t->passed, t->failed);
    return t->failed ? 1 : 0;
}

#endif
