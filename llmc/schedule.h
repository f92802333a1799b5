/*
 * llmc/schedule.h — learning-rate schedules, identical to train_gpt.py's.
 *
 * η = max_lr, η_min = η·final_frac, N = total steps, W = warmup steps, s = 0-based step.
 *   s < W:  η·(s+1)/W                                    (linear warmup, reaches η at s = W−1)
 *   else    r = (s−W) / max(1, N−W)
 *     cosine:   η_min + ½(1 + cos πr)(η − η_min)
 *     linear:   η_min + (1 − r)(η − η_min)
 *     constant: η
 *     wsd:      D = ⌊wsd_frac·N + N·2⁻²⁴⌋ decay steps (D = 0: constant; the N·2⁻²⁴, the most a float
 *               flag's rounding moves wsd_frac·N, keeps 0.7, stored as 0.69999999, from losing a step);
 *               s < N−D: η, else η_min + (1 − (s − (N−D))/D)(η − η_min)
 * The minimum η_min falls at s = N, one past the last step (as in llm.c): the last step runs at
 * r = (N−1−W)/(N−W). Computed in double, returned as float. Steps beyond N hold the value of step N (so the rate
 * never turns back up or negative). The kind ids are those of doc/formats.md (reference and
 * training state files).
 */
#ifndef LLMC_SCHEDULE_H
#define LLMC_SCHEDULE_H

#include <math.h>
#include <string.h>

typedef enum { SCHED_COSINE = 0, SCHED_LINEAR = 1, SCHED_CONSTANT = 2, SCHED_WSD = 3 } ScheduleKind;
#define SCHED_NUM_KINDS 4

typedef struct {
    ScheduleKind kind;
    float max_lr;
    float final_frac;
    int warmup;
    int total;
    float wsd_frac;
} Schedule;

static inline float schedule_lr(const Schedule* s, int step) {
    double lr = s->max_lr, lr_min = lr * (double)s->final_frac;
    if (step > s->total) step = s->total;
    if (step < s->warmup) return (float)(lr * (step + 1) / s->warmup);
    int decay_steps = s->total - s->warmup > 1 ? s->total - s->warmup : 1;
    double r = (double)(step - s->warmup) / decay_steps;
    switch (s->kind) {
    case SCHED_COSINE: return (float)(lr_min + 0.5 * (1.0 + cos(3.14159265358979323846 * r)) * (lr - lr_min));
    case SCHED_LINEAR: return (float)(lr_min + (1.0 - r) * (lr - lr_min));
    case SCHED_CONSTANT: return (float)lr;
    case SCHED_WSD: {
        double d = floor((double)s->wsd_frac * s->total + s->total * 0x1p-24); /* a double: may exceed INT_MAX */
        if (d <= 0 || step < s->total - d) return (float)lr;
        return (float)(lr_min + (1.0 - (double)(step - (s->total - d)) / d) * (lr - lr_min));
    }
    }
    return (float)lr;
}

static inline const char* schedule_name(ScheduleKind k) {
    switch (k) {
    case SCHED_COSINE: return "cosine";
    case SCHED_LINEAR: return "linear";
    case SCHED_CONSTANT: return "constant";
    case SCHED_WSD: return "wsd";
    }
    return "unknown";
}

/* "cosine" | "linear" | "constant" | "wsd" → *out, returns 1; anything else returns 0 */
static inline int schedule_parse(const char* name, ScheduleKind* out) {
    for (int k = 0; k < SCHED_NUM_KINDS; k++) {
        if (strcmp(name, schedule_name((ScheduleKind)k)) == 0) {
            *out = (ScheduleKind)k;
            return 1;
        }
    }
    return 0;
}

#endif
