/*
 * llmc/progress.h — what a trainer tells about its run: the run header (stdout and the first record
 * of metrics.jsonl) and, per step, elapsed time and ETA.
 *
 * RunInfo gathers what the header lists: program, git revision, precision, world size, device,
 * model config, parameter count, batch and steps, the memory plan, FLOPs per token and the peak the
 * MFU is measured against. run_header_print writes it (and every flag's value, llmc/flags.h) to a
 * FILE; run_header_log writes it as the record {"header":{...}} to metrics.jsonl (llmc/logger.h),
 * numbers as JSON numbers and memory in bytes.
 *
 * GIT_REVISION is the output of `git describe --always --dirty` when the binary was built
 * (mk/version.mk passes -DGIT_REVISION="..."), "unknown" otherwise.
 *
 * Progress: progress_step(p, seconds) after each step keeps the last PROGRESS_WINDOW step times;
 * ETA = their mean × the steps left (evaluations, samples and checkpoints not included); elapsed =
 * wall time since progress_init. format_duration writes "42s", "3m07s", "2h05m" or "3d04h".
 * No global state.
 */
#ifndef LLMC_PROGRESS_H
#define LLMC_PROGRESS_H

#include <stdio.h>
#include "llmc/checkpoint.h"
#include "llmc/flags.h"
#include "llmc/logger.h"
#include "llmc/profile.h"

#ifndef GIT_REVISION
#define GIT_REVISION "unknown"
#endif

/* bytes by category: memory the trainer allocates for the model and one batch */
typedef struct {
    size_t params, grads, optimizer, activations, scratch;
    size_t attention; /* of activations, the attention's share (GPU trainer: flash attention's logsumexps); 0: not reported */
} MemoryPlan;

static inline size_t memory_plan_total(const MemoryPlan* m) {
    return m->params + m->grads + m->optimizer + m->activations + m->scratch;
}

typedef struct {
    const char* program;   /* "train_gpt_cpu" */
    const char* precision; /* "fp32", "bf16" */
    const char* device;    /* one line: the processor, threads or GPU name */
    int world_size;
    GPTConfig config;
    size_t num_params;
    int batch_size, seq_len, grad_accum; /* micro-batch B x T, micro-steps per step */
    long long tokens_per_step;
    int start_step, max_steps;
    MemoryPlan memory;
    double flops_per_token;
    double peak_flops; /* FLOP/s the MFU is relative to; 0: unknown */
} RunInfo;

static inline void run_header_print(FILE* f, const RunInfo* r, const TrainArgs* args) {
    const GPTConfig* c = &r->config;
    const MemoryPlan* m = &r->memory;
    const double MiB = 1024.0 * 1024.0;
    fprintf(f, "%s: %d layers, %d heads, %d channels, vocab %d (padded %d), max seq len %d\n", r->program, c->num_layers,
            c->num_heads, c->channels, c->vocab_size, c->padded_vocab_size, c->max_seq_len);
    fprintf(f, "parameters: %zu | batch %d x %d x %d rank(s), %d micro-steps per step (%lld tokens) | %d steps\n", r->num_params,
            r->batch_size, r->seq_len, r->world_size, r->grad_accum, r->tokens_per_step, r->max_steps);
    fprintf(f, "precision %s | world size %d | git revision %s | %s\n", r->precision, r->world_size, GIT_REVISION, r->device);
    fprintf(f, "memory: parameters %.1f MiB | gradients %.1f MiB | optimizer state %.1f MiB | activations %.1f MiB | "
               "scratch %.1f MiB | total %.1f MiB\n",
            m->params / MiB, m->grads / MiB, m->optimizer / MiB, m->activations / MiB, m->scratch / MiB, memory_plan_total(m) / MiB);
    flags_print_values(f, args);
}

/* one flag's value as a JSON value: a string, an integer or a number */
static inline void run_header_flag_json_(FILE* f, const TrainArgs* a, const CliFlag* s) {
    const char* field = (const char*)a + s->offset;
    char text[8200];
    if (s->type == CLI_STR) logger_json_string(text, sizeof(text), *(const char* const*)field);
    else if (s->type == CLI_FLOAT) logger_json_number(text, sizeof(text), *(const float*)field);
    else snprintf(text, sizeof(text), "%d", *(const int*)field); /* the trainers' other types: CLI_INT, CLI_BOOL */
    fputs(text, f);
}

static inline void run_header_log(Logger* L, const RunInfo* r, const TrainArgs* args) {
    if (!L->f) return;
    char* json = NULL;
    size_t json_bytes = 0;
    FILE* f = open_memstream(&json, &json_bytes);
    if (!f) sys_fatalf("%s: header record: open_memstream failed: %s", L->path, strerror(errno));
    char program[256], precision[64], device[1024], revision[256];
    logger_json_string(program, sizeof(program), r->program);
    logger_json_string(precision, sizeof(precision), r->precision);
    logger_json_string(device, sizeof(device), r->device);
    logger_json_string(revision, sizeof(revision), GIT_REVISION);
    const GPTConfig* c = &r->config;
    const MemoryPlan* m = &r->memory;
    fprintf(f, "{\"header\":{\"program\":%s,\"git_revision\":%s,\"precision\":%s,\"world_size\":%d,\"device\":%s,", program, revision,
            precision, r->world_size, device);
    fprintf(f, "\"config\":{\"num_layers\":%d,\"num_heads\":%d,\"channels\":%d,\"vocab_size\":%d,\"padded_vocab_size\":%d,"
               "\"max_seq_len\":%d},",
            c->num_layers, c->num_heads, c->channels, c->vocab_size, c->padded_vocab_size, c->max_seq_len);
    fprintf(f, "\"num_params\":%zu,\"batch_size\":%d,\"seq_len\":%d,\"grad_accum\":%d,\"tokens_per_step\":%lld,"
               "\"start_step\":%d,\"max_steps\":%d,",
            r->num_params, r->batch_size, r->seq_len, r->grad_accum, r->tokens_per_step, r->start_step, r->max_steps);
    fprintf(f, "\"memory\":{\"parameters\":%zu,\"gradients\":%zu,\"optimizer\":%zu,\"activations\":%zu,\"scratch\":%zu,\"total\":%zu},",
            m->params, m->grads, m->optimizer, m->activations, m->scratch, memory_plan_total(m));
    fprintf(f, "\"flops_per_token\":%.17g,\"peak_flops\":%.17g,\"flags\":{", r->flops_per_token, r->peak_flops);
    for (int i = 0; i < FLAG_COUNT; i++) {
        fprintf(f, "%s\"%s\":", i ? "," : "", FLAG_SPECS[i].long_name + 2);
        run_header_flag_json_(f, args, &FLAG_SPECS[i]);
    }
    fputs("}}}", f);
    if (fclose(f) != 0) fatalf("%s: header record: writing to memory failed", L->path);
    logger_record(L, json);
    free(json);
}

#define PROGRESS_WINDOW 20

typedef struct {
    double started;                 /* profile_clock() at progress_init */
    double recent[PROGRESS_WINDOW]; /* the last step times, in seconds (a ring) */
    int count;                      /* steps recorded, up to PROGRESS_WINDOW */
    int next;                       /* where the next one goes */
} Progress;

static inline void progress_init(Progress* p) {
    memset(p, 0, sizeof(*p));
    p->started = profile_clock();
}

static inline void progress_step(Progress* p, double seconds) {
    p->recent[p->next] = seconds;
    p->next = (p->next + 1) % PROGRESS_WINDOW;
    if (p->count < PROGRESS_WINDOW) p->count++;
}

static inline double progress_elapsed(const Progress* p) { return profile_clock() - p->started; }

/* seconds left for steps_left more steps at the recent mean step time (0 before any step) */
static inline double progress_eta(const Progress* p, int steps_left) {
    if (p->count == 0) return 0.0;
    double sum = 0.0;
    for (int i = 0; i < p->count; i++) sum += p->recent[i];
    return sum / p->count * steps_left;
}

/* seconds (rounded to the nearest) as "42s", "3m07s", "2h05m" or "3d04h" */
static inline void format_duration(char* out, size_t cap, double seconds) {
    long long s = seconds > 0 ? (long long)(seconds + 0.5) : 0;
    if (s < 60) snprintf(out, cap, "%llds", s);
    else if (s < 3600) snprintf(out, cap, "%lldm%02llds", s / 60, s % 60);
    else if (s < 86400) snprintf(out, cap, "%lldh%02lldm", s / 3600, s % 3600 / 60);
    else snprintf(out, cap, "%lldd%02lldh", s / 86400, s % 86400 / 3600);
}

#endif
