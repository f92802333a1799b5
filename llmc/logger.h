/*
 * llmc/logger.h — training metrics as JSON lines.
 *
 * logger_init(L, dir, resume) opens dir/metrics.jsonl (truncating it, or appending when resume
 * is non-zero); dir NULL means no file and every call is a no-op. Each record is one JSON object
 * on its own line, flushed at once, so a crash loses nothing written:
 *   {"step":S,"loss":L,"lr":η,"norm":G,"ms":T,"tok_s":R}    a training step (S as the trainer counts)
 *   {"step":S,"val_loss":L}                                  validation after step S
 * Non-finite numbers are written as null (JSON has no NaN). After a resume the file may hold a
 * step twice (the crashed run's tail); readers keep the last record per step.
 */
#ifndef LLMC_LOGGER_H
#define LLMC_LOGGER_H

#include <math.h>
#include "llmc/fileio.h"

typedef struct {
    FILE* f;
    char path[4096];
} Logger;

static inline void logger_init(Logger* L, const char* dir, int resume) {
    L->f = NULL;
    L->path[0] = '\0';
    if (!dir) return;
    if ((size_t)snprintf(L->path, sizeof(L->path), "%s/metrics.jsonl", dir) >= sizeof(L->path))
        fatalf("%s: path too long for metrics.jsonl", dir);
    L->f = fopen_check(L->path, resume ? "ab" : "wb");
}

/* a JSON number: %.9g round-trips a float; non-finite → null */
static inline void logger_number_(char* out, size_t cap, double x) {
    if (isfinite(x)) snprintf(out, cap, "%.9g", x);
    else snprintf(out, cap, "null");
}

static inline void logger_line_(Logger* L, const char* line) {
    if (fputs(line, L->f) < 0 || fflush(L->f) != 0) fatalf("%s: write failed: %s", L->path, strerror(errno));
}

static inline void logger_step(Logger* L, int step, float loss, float lr, float norm, float ms, float tok_s) {
    if (!L->f) return;
    char a[32], b[32], c[32], d[32], e[32], line[256];
    logger_number_(a, sizeof(a), loss);
    logger_number_(b, sizeof(b), lr);
    logger_number_(c, sizeof(c), norm);
    logger_number_(d, sizeof(d), ms);
    logger_number_(e, sizeof(e), tok_s);
    snprintf(line, sizeof(line), "{\"step\":%d,\"loss\":%s,\"lr\":%s,\"norm\":%s,\"ms\":%s,\"tok_s\":%s}\n", step, a, b, c,
             d, e);
    logger_line_(L, line);
}

static inline void logger_val(Logger* L, int step, float val_loss) {
    if (!L->f) return;
    char a[32], line[128];
    logger_number_(a, sizeof(a), val_loss);
    snprintf(line, sizeof(line), "{\"step\":%d,\"val_loss\":%s}\n", step, a);
    logger_line_(L, line);
}

static inline void logger_free(Logger* L) {
    if (L->f) fclose_check(L->f, L->path);
    L->f = NULL;
}

#endif
