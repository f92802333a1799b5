/*
 * llmc/profile.h — per-op time of a training step: named counters and a table sorted by time.
 *
 * A Profiler holds, for each op of PROFILE_OPS, the seconds spent in it and the number of calls.
 * The CPU trainer brackets each op with profile_begin(p, PROF_X) / profile_end(p, PROF_X) (a
 * monotonic wall clock; the op's OpenMP threads all finish inside the bracket), or with the one-line
 * form PROFILE(p, PROF_X, call). p == NULL means profiling is off: each bracket is one pointer test,
 * so the trainer keeps a `Profiler*` that is NULL except during the profiled steps.
 *
 * A GPU trainer times the same ops with CUDA events (an event pair per bracket, read back after the
 * step's synchronisation) and adds each pair's elapsed time with profile_add(p, PROF_X, seconds);
 * profile_print then gives the same table for both trainers. Ops a trainer fuses or lacks (the GPU's
 * GELU inside its matmul epilogue; the CPU's communication) have no calls and no row.
 *
 * profile_print(f, p, steps, step_seconds) prints one row per op with calls: total ms, ms per step,
 * calls per step and its share of step_seconds (the steps' own wall time, measured by the caller),
 * sorted by time; then the sum of the rows against step_seconds, so unprofiled work shows as the gap.
 * Brackets must not nest (a nested op's time would count twice). No global state.
 */
#ifndef LLMC_PROFILE_H
#define LLMC_PROFILE_H

#include <stdio.h>
#include <string.h>
#include <time.h>

/* X(enum name, row name) */
#define PROFILE_OPS(X)                                       \
    X(PROF_DATA, "data loading")                             \
    X(PROF_ZERO_GRAD, "zero gradients")                      \
    X(PROF_ENCODER_FWD, "encoder forward")                   \
    X(PROF_LAYERNORM_FWD, "layernorm forward")               \
    X(PROF_MATMUL_QKV_FWD, "matmul qkv forward")             \
    X(PROF_ATTENTION_FWD, "attention forward")               \
    X(PROF_MATMUL_ATTPROJ_FWD, "matmul attn proj forward")   \
    X(PROF_RESIDUAL_FWD, "residual forward")                 \
    X(PROF_MATMUL_FC_FWD, "matmul fc forward")               \
    X(PROF_GELU_FWD, "gelu forward")                         \
    X(PROF_MATMUL_FCPROJ_FWD, "matmul fc proj forward")      \
    X(PROF_CLASSIFIER_FWD, "classifier forward")             \
    X(PROF_CLASSIFIER_BWD, "classifier backward")            \
    X(PROF_MATMUL_FCPROJ_BWD, "matmul fc proj backward")     \
    X(PROF_GELU_BWD, "gelu backward")                        \
    X(PROF_MATMUL_FC_BWD, "matmul fc backward")              \
    X(PROF_LAYERNORM_BWD, "layernorm backward")              \
    X(PROF_MATMUL_ATTPROJ_BWD, "matmul attn proj backward")  \
    X(PROF_ATTENTION_BWD, "attention backward")              \
    X(PROF_MATMUL_QKV_BWD, "matmul qkv backward")            \
    X(PROF_ENCODER_BWD, "encoder backward")                  \
    X(PROF_COMM, "communication")                            \
    X(PROF_GRAD_NORM, "grad norm")                           \
    X(PROF_ADAMW, "adamw")                                   \
    X(PROF_HEALTH, "health checks")

#define PROFILE_ENUM_(name, text) name,
typedef enum { PROFILE_OPS(PROFILE_ENUM_) PROF_COUNT } ProfileOp;
#undef PROFILE_ENUM_

#define PROFILE_NAME_(name, text) text,
static const char* const PROFILE_NAMES[PROF_COUNT] = {PROFILE_OPS(PROFILE_NAME_)};
#undef PROFILE_NAME_

typedef struct {
    double seconds[PROF_COUNT]; /* accumulated time per op */
    long calls[PROF_COUNT];
    double started[PROF_COUNT]; /* clock at the open profile_begin of each op */
} Profiler;

static inline double profile_clock(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline void profile_reset(Profiler* p) { memset(p, 0, sizeof(*p)); }

static inline void profile_add(Profiler* p, ProfileOp op, double seconds) {
    if (!p) return;
    p->seconds[op] += seconds;
    p->calls[op]++;
}

static inline void profile_begin(Profiler* p, ProfileOp op) {
    if (p) p->started[op] = profile_clock();
}

static inline void profile_end(Profiler* p, ProfileOp op) {
    if (p) profile_add(p, op, profile_clock() - p->started[op]);
}

#define PROFILE(p, op, call)    \
    do {                        \
        profile_begin((p), op); \
        call;                   \
        profile_end((p), op);   \
    } while (0)

/* the sum of every op's time */
static inline double profile_total(const Profiler* p) {
    double sum = 0.0;
    for (int i = 0; i < PROF_COUNT; i++) sum += p->seconds[i];
    return sum;
}

/* The table described at the top; steps >= 1, step_seconds the steps' summed wall time. */
static inline void profile_print(FILE* f, const Profiler* p, int steps, double step_seconds) {
    int order[PROF_COUNT], n = 0;
    for (int i = 0; i < PROF_COUNT; i++)
        if (p->calls[i] > 0) order[n++] = i;
    for (int i = 1; i < n; i++) /* insertion sort, longest first */
        for (int j = i; j > 0 && p->seconds[order[j]] > p->seconds[order[j - 1]]; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    fprintf(f, "profile of %d step(s), %.1f ms per step:\n", steps, 1e3 * step_seconds / steps);
    fprintf(f, "| %-28s | %10s | %10s | %8s | %6s |\n", "op", "total ms", "ms/step", "calls/st", "share");
    for (int k = 0; k < n; k++) {
        int i = order[k];
        fprintf(f, "| %-28s | %10.2f | %10.3f | %8.1f | %5.1f%% |\n", PROFILE_NAMES[i], 1e3 * p->seconds[i],
                1e3 * p->seconds[i] / steps, (double)p->calls[i] / steps, 100.0 * p->seconds[i] / step_seconds);
    }
    double total = profile_total(p);
    fprintf(f, "profile: the ops sum to %.2f ms of the %d step(s)' %.2f ms (%.1f%%)\n", 1e3 * total, steps, 1e3 * step_seconds,
            100.0 * total / step_seconds);
}

#endif
