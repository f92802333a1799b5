/*
 * llmc/logger.h — training metrics as JSON lines.
 *
 * logger_init(L, dir, resume) opens dir/metrics.jsonl (truncating it, or appending when resume
 * is non-zero); dir NULL means no file and every call is a no-op. Each record is one JSON object
 * on its own line, flushed at once, so a crash loses nothing written:
 *   {"step":S,"loss":L,"lr":η,"norm":G,"ms":T,"tok_s":R}    a training step (S as the trainer counts)
 *   {"step":S,"val_loss":L}                                  validation after step S
 * Non-finite numbers are written as null (JSON has no NaN). After a resume the file may hold a
 * step twice (the crashed run's tail); readers keep the last record per step. A last line without
 * its newline (a run killed or out of space mid-write) is cut off when a resumed run appends, so
 * every line stays one whole record. A write that fails sets `failed` (the trainers then act by
 * --on-save-error, as for a checkpoint) and ends the logging; so does a failed close (logger_free returns -1).
 */
#ifndef LLMC_LOGGER_H
#define LLMC_LOGGER_H

#include <math.h>
#include "llmc/fileio.h"
#include "llmc/tokenizer.h" /* tokenizer_char_class: UTF-8 sequences */

typedef struct {
    FILE* f;
    char path[4096];
    int failed; /* a write failed: printed, the file closed, no more records (the trainer reads and clears it) */
} Logger;

static inline void logger_init(Logger* L, const char* dir, int resume) {
    L->f = NULL;
    L->path[0] = '\0';
    L->failed = 0;
    if (!dir) return;
    if ((size_t)snprintf(L->path, sizeof(L->path), "%s/metrics.jsonl", dir) >= sizeof(L->path))
        fatalf("%s: path too long for metrics.jsonl", dir);
    FILE* f = resume ? fopen(L->path, "r+b") : NULL;
    if (!f) {
        L->f = fopen_check(L->path, resume ? "ab" : "wb");
        return;
    }
    /* resume: keep the file up to its last newline */
    long long size = file_size_check(f, L->path), keep = size;
    char buf[4096];
    while (keep > 0) {
        long long at = keep > (long long)sizeof(buf) ? keep - (long long)sizeof(buf) : 0;
        size_t n = (size_t)(keep - at);
        fseek_check(f, at, SEEK_SET, L->path);
        fread_check(buf, 1, n, f, L->path);
        size_t i = n;
        while (i > 0 && buf[i - 1] != '\n') i--;
        if (i > 0 || at == 0) {
            keep = at + (long long)i;
            break;
        }
        keep = at;
    }
    if (keep < size) {
        if (ftruncate(fileno(f), (off_t)keep) != 0) sys_fatalf("%s: cannot cut its partial last line: %s", L->path, strerror(errno));
        printf("metrics: %s: cut a partial last line (%lld bytes) an interrupted run left\n", L->path, size - keep);
    }
    fseek_check(f, 0, SEEK_END, L->path);
    L->f = f;
}

/* a JSON number: %.9g round-trips a float; non-finite → null */
static inline void logger_json_number(char* out, size_t cap, double x) {
    if (isfinite(x)) snprintf(out, cap, "%.9g", x);
    else snprintf(out, cap, "null");
}

/* one record: a JSON object (without its newline), written and flushed. A failed write (a full disk)
 * is printed and ends the logging: L->failed is set and later calls do nothing. */
static inline void logger_record(Logger* L, const char* json_object) {
    if (!L->f) return;
    if (fputs(json_object, L->f) < 0 || fputc('\n', L->f) == EOF || fflush(L->f) != 0) {
        fprintf(stderr, "error: %s: write failed: %s\n", L->path, strerror(errno));
        if (fclose(L->f) != 0) fprintf(stderr, "error: %s: close failed too: %s\n", L->path, strerror(errno));
        L->f = NULL;
        L->failed = 1;
    }
}

/* s as a JSON string literal (quotes included) into out, valid UTF-8 whatever s holds (a path or a prompt may hold
 * any bytes): a byte that begins no well-formed UTF-8 sequence becomes \ufffd; cut short after a whole character (still
 * a valid literal) if cap is small */
static inline void logger_json_string(char* out, size_t cap, const char* s) {
    const unsigned char* u = (const unsigned char*)s;
    size_t n = 0, len = strlen(s);
    out[n++] = '"';
    for (size_t i = 0, k; i < len && n + 8 < cap; i += k) {
        unsigned char ch = u[i];
        tokenizer_char_class(u, len, i, &k);
        if (ch == '"' || ch == '\\') {
            out[n++] = '\\';
            out[n++] = (char)ch;
        } else if (ch < 0x20) {
            n += (size_t)snprintf(out + n, cap - n, "\\u%04x", ch);
        } else if (ch >= 0x80 && k == 1) {
            n += (size_t)snprintf(out + n, cap - n, "\\ufffd");
        } else {
            memcpy(out + n, u + i, k); /* k <= 4: fits, as n + 8 < cap */
            n += k;
        }
    }
    out[n++] = '"';
    out[n] = '\0';
}

typedef struct {
    int step;
    float loss, lr, norm, ms, tok_s;
    long long tokens; /* tokens processed since step 0; < 0: not written */
    double elapsed_s; /* seconds since this run started; < 0: not written */
    double mfu;       /* achieved FLOP/s / peak FLOP/s; < 0: not written */
} StepRecord;

static inline void logger_step_record(Logger* L, const StepRecord* r) {
    if (!L->f) return;
    char a[32], b[32], c[32], d[32], e[32], line[512];
    logger_json_number(a, sizeof(a), r->loss);
    logger_json_number(b, sizeof(b), r->lr);
    logger_json_number(c, sizeof(c), r->norm);
    logger_json_number(d, sizeof(d), r->ms);
    logger_json_number(e, sizeof(e), r->tok_s);
    int n = snprintf(line, sizeof(line), "{\"step\":%d,\"loss\":%s,\"lr\":%s,\"norm\":%s,\"ms\":%s,\"tok_s\":%s", r->step, a,
                     b, c, d, e);
    if (r->tokens >= 0) n += snprintf(line + n, sizeof(line) - n, ",\"tokens\":%lld", r->tokens);
    if (r->elapsed_s >= 0) {
        logger_json_number(a, sizeof(a), r->elapsed_s);
        n += snprintf(line + n, sizeof(line) - n, ",\"elapsed_s\":%s", a);
    }
    if (r->mfu >= 0) {
        logger_json_number(a, sizeof(a), r->mfu);
        n += snprintf(line + n, sizeof(line) - n, ",\"mfu\":%s", a);
    }
    snprintf(line + n, sizeof(line) - n, "}");
    logger_record(L, line);
}

/* a step record without the optional fields */
static inline void logger_step(Logger* L, int step, float loss, float lr, float norm, float ms, float tok_s) {
    StepRecord r = {step, loss, lr, norm, ms, tok_s, -1, -1.0, -1.0};
    logger_step_record(L, &r);
}

static inline void logger_val(Logger* L, int step, float val_loss) {
    if (!L->f) return;
    char a[32], line[128];
    logger_json_number(a, sizeof(a), val_loss);
    snprintf(line, sizeof(line), "{\"step\":%d,\"val_loss\":%s}", step, a);
    logger_record(L, line);
}

/* Closes the file. Returns 0, or -1 after printing why the close failed (its last records may not have reached
 * the disk). Never exits: the trainer decides what a failed close does to its exit status (train_log_close in
 * llmc/train_loop.h), so that a preempted run's 75 (requeue) is not turned into 1. */
static inline int logger_free(Logger* L) {
    int rc = 0;
    if (L->f && fclose(L->f) != 0) {
        fprintf(stderr, "error: %s: close failed: %s (%s:%d)\n", L->path, strerror(errno), __FILE__, __LINE__);
        rc = -1;
    }
    L->f = NULL;
    return rc;
}

#endif
