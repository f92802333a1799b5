/*
 * llmc/health.h — training-health guards: skip updates with a non-finite or outlying loss or
 * gradient norm, stop after too many skips in a row, and find non-finite parameters.
 *
 * Each step, before the optimizer update, the trainer calls health_check(state, config, loss, norm):
 *   - loss or norm not finite                    -> HEALTH_SKIP_NONFINITE
 *   - spike detection on (spike_zscore Z > 0), the window full (W accepted steps), and
 *     z(loss) > Z or z(norm) > Z                 -> HEALTH_SKIP_SPIKE
 *   - otherwise                                  -> HEALTH_OK, and (loss, norm) enter the window
 * where z(x) = (x − mean) / max(std, 1e-6·|mean| + 1e-30) over the window of the last W accepted
 * steps (population std, in double; only upward spikes count). A skipped step leaves the window as
 * it was and adds one to bad_in_row; health_should_stop is true once bad_in_row reaches
 * max_bad_steps (0: never). An accepted step resets bad_in_row. A skipped step is not an AdamW
 * step: the trainers count the updates applied, step + 1 − skipped, for AdamW's bias correction
 * (as PyTorch's GradScaler skips optimizer.step()) and the bf16 rounding seed.
 *
 * HealthState is part of the training state (llmc/checkpoint.h writes it into the state file's
 * header), so a resumed run makes the same decisions as an uninterrupted one. The window holds at
 * most HEALTH_WINDOW_MAX steps, oldest first. No global state.
 */
#ifndef LLMC_HEALTH_H
#define LLMC_HEALTH_H

#include <math.h>
#include <stddef.h>
#include <string.h>

#define HEALTH_WINDOW_MAX 64
#define HEALTH_EXIT_STATUS 65 /* the run stopped: too many bad steps in a row, or non-finite parameters */

typedef struct {
    int max_bad_steps;  /* stop after this many skipped steps in a row (0: never) */
    float spike_zscore; /* skip a step whose loss or norm z-score exceeds this (0: off) */
    int window;         /* accepted steps the z-score is computed over, 2..HEALTH_WINDOW_MAX */
} HealthConfig;

typedef struct {
    int count;      /* accepted steps in the window */
    int bad_in_row; /* skipped steps since the last accepted one */
    int skipped;    /* skipped steps in the whole run */
    float loss[HEALTH_WINDOW_MAX], norm[HEALTH_WINDOW_MAX]; /* oldest first */
} HealthState;

typedef enum { HEALTH_OK = 0, HEALTH_SKIP_NONFINITE = 1, HEALTH_SKIP_SPIKE = 2 } HealthVerdict;

typedef struct {
    HealthVerdict verdict;
    double z_loss, z_norm; /* 0 when not computed (window not full or detection off) */
} HealthResult;

/* z-score of x against the n values xs (see the top comment) */
static inline double health_zscore_(const float* xs, int n, float x) {
    double mean = 0.0, var = 0.0;
    for (int i = 0; i < n; i++) mean += xs[i];
    mean /= n;
    for (int i = 0; i < n; i++) var += ((double)xs[i] - mean) * ((double)xs[i] - mean);
    double sd = sqrt(var / n), floor_sd = 1e-6 * fabs(mean) + 1e-30;
    return ((double)x - mean) / (sd > floor_sd ? sd : floor_sd);
}

static inline void health_push_(float* xs, int count, int window, float x) {
    if (count == window) memmove(xs, xs + 1, (size_t)(window - 1) * sizeof(float));
    xs[count == window ? window - 1 : count] = x;
}

static inline HealthResult health_check(HealthState* s, const HealthConfig* c, float loss, float norm) {
    HealthResult r = {HEALTH_OK, 0.0, 0.0};
    if (!isfinite(loss) || !isfinite(norm)) {
        r.verdict = HEALTH_SKIP_NONFINITE;
    } else if (c->spike_zscore > 0.0f && s->count == c->window) {
        r.z_loss = health_zscore_(s->loss, s->count, loss);
        r.z_norm = health_zscore_(s->norm, s->count, norm);
        if (r.z_loss > c->spike_zscore || r.z_norm > c->spike_zscore) r.verdict = HEALTH_SKIP_SPIKE;
    }
    if (r.verdict != HEALTH_OK) {
        s->bad_in_row++;
        s->skipped++;
        return r;
    }
    health_push_(s->loss, s->count, c->window, loss);
    health_push_(s->norm, s->count, c->window, norm);
    if (s->count < c->window) s->count++;
    s->bad_in_row = 0;
    return r;
}

/* Keeps only the newest `window` entries (after a resume with a smaller --spike-window). */
static inline void health_resize(HealthState* s, int window) {
    if (s->count <= window) return;
    int drop = s->count - window;
    memmove(s->loss, s->loss + drop, (size_t)window * sizeof(float));
    memmove(s->norm, s->norm + drop, (size_t)window * sizeof(float));
    memset(s->loss + window, 0, (size_t)drop * sizeof(float));
    memset(s->norm + window, 0, (size_t)drop * sizeof(float));
    s->count = window;
}

static inline int health_should_stop(const HealthState* s, const HealthConfig* c) {
    return c->max_bad_steps > 0 && s->bad_in_row >= c->max_bad_steps;
}

/* Index of the first non-finite value of x[0..n), or n if all are finite. */
static inline size_t health_first_nonfinite(const float* x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return i;
    return n;
}

#endif
