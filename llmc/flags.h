/*
 * llmc/flags.h — the command line of both trainers, from one table.
 *
 * TRAIN_FLAGS is an X-macro: each row is (field, short form, long form, type, default, min, max,
 * help). From it come the TrainArgs struct, the parser, --help, --help-markdown (the README's
 * flag table) and the run header (flags_print_values), so they cannot disagree.
 *
 * Forms accepted: `-x 5`, `--max-steps 5`, `--max-steps=5` (and `-x=5`). A bool flag
 * (--mock-data) takes an optional 0/1: alone it means 1. Defaults are strings parsed by the same
 * code as user values. "Not given" is "" for strings and 0 for the from-scratch model sizes
 * (shown as "none" in the help), so a trainer tests `a.init[0]` or `a.n_layer > 0`.
 * A bad value or unknown flag prints one line "error: ..." to stderr and exits with status 2;
 * an unknown flag gets a "did you mean" suggestion (edit distance). -h/--help prints the help,
 * --help-markdown the markdown table, both to stdout, exit 0.
 */
#ifndef LLMC_FLAGS_H
#define LLMC_FLAGS_H

#include "llmc/fileio.h" /* first: it sets the feature macros */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "llmc/schedule.h"

typedef enum { FLAG_STR, FLAG_INT, FLAG_FLOAT, FLAG_BOOL, FLAG_SCHED } FlagType;
#define FLAG_CTYPE_FLAG_STR const char*
#define FLAG_CTYPE_FLAG_INT int
#define FLAG_CTYPE_FLAG_FLOAT float
#define FLAG_CTYPE_FLAG_BOOL int
#define FLAG_CTYPE_FLAG_SCHED const char*
#define FLAG_INT_MAX 2147483647.0
#define TRAIN_DEFAULT_TOKENIZER "data/gpt2_tokenizer.bin" /* a missing file is fine here: samples print as ids */

/* X(field, short, long, type, default, min, max, help); short is NULL where there is none */
#define TRAIN_FLAGS(X)                                                                                                               \
    X(train_data, "-i", "--train-data", FLAG_STR, "", 0, 0, "training token shards: glob of GTOK or llm.c .bin files (quote it)")                  \
    X(val_data, "-j", "--val-data", FLAG_STR, "", 0, 0, "validation token shards: glob (none: no validation)")                       \
    X(init, "-e", "--init", FLAG_STR, "", 0, 0,                                                                                      \
      "initial model: model file or preset d6|d12|d24|d36|d48 (none: from scratch, --n-layer ...)")                                  \
    X(n_layer, NULL, "--n-layer", FLAG_INT, "0", 0, 1024, "from scratch: number of layers (0: not set)")                             \
    X(n_head, NULL, "--n-head", FLAG_INT, "0", 0, 65536, "from scratch: attention heads (divides --n-embd) (0: not set)")            \
    X(n_embd, NULL, "--n-embd", FLAG_INT, "0", 0, 131072, "from scratch: channels (0: not set)")                                     \
    X(vocab_size, NULL, "--vocab-size", FLAG_INT, "0", 0, 65536, "vocabulary size (0: 50257, or the --init model's)")                \
    X(max_seq_len, NULL, "--max-seq-len", FLAG_INT, "0", 0, 1048576, "positions, rows of wpe (0: --seq-len, or the --init model's)") \
    X(output_dir, "-o", "--output-dir", FLAG_STR, "", 0, 0,                                                                          \
      "directory for checkpoints and metrics.jsonl (none: write nothing)")                                                           \
    X(batch_size, "-b", "--batch-size", FLAG_INT, "4", 1, FLAG_INT_MAX, "micro-batch size B (sequences per rank)")                   \
    X(seq_len, "-t", "--seq-len", FLAG_INT, "64", 1, 1048576, "sequence length T")                                                   \
    X(total_batch, "-d", "--total-batch", FLAG_INT, "-1", -1, FLAG_INT_MAX,                                                          \
      "tokens per optimizer step, a multiple of B*T*world (-1: B*T*world)")                                                          \
    X(max_steps, "-x", "--max-steps", FLAG_INT, "-1", -1, FLAG_INT_MAX,                                                              \
      "optimizer steps (-1: one epoch of the training data)")                                                                        \
    X(lr, "-l", "--lr", FLAG_FLOAT, "3e-4", 0, 1e30, "maximum learning rate")                                                        \
    X(warmup, "-u", "--warmup", FLAG_INT, "0", 0, FLAG_INT_MAX, "linear warmup steps")                                               \
    X(final_lr_frac, "-q", "--final-lr-frac", FLAG_FLOAT, "1.0", 0, 1, "final learning rate as a fraction of --lr")                  \
    X(lr_schedule, "-k", "--lr-schedule", FLAG_SCHED, "cosine", 0, 0, "learning-rate schedule: cosine|linear|constant|wsd")          \
    X(wsd_frac, NULL, "--wsd-frac", FLAG_FLOAT, "0.2", 0, 1, "wsd: fraction of the steps spent in the final decay")                  \
    X(weight_decay, "-c", "--weight-decay", FLAG_FLOAT, "0.0", 0, 1e30, "AdamW weight decay (2-D tensors only)")                     \
    X(beta1, NULL, "--beta1", FLAG_FLOAT, "0.9", 0, 1, "AdamW beta1")                                                                \
    X(beta2, NULL, "--beta2", FLAG_FLOAT, "0.95", 0, 1, "AdamW beta2")                                                               \
    X(eps, NULL, "--eps", FLAG_FLOAT, "1e-8", 0, 1e30, "AdamW epsilon")                                                              \
    X(grad_clip, NULL, "--grad-clip", FLAG_FLOAT, "1.0", 0, 1e30, "clip the global gradient L2 norm to this (0: off)")               \
    X(val_every, "-v", "--val-every", FLAG_INT, "20", 0, FLAG_INT_MAX, "validate every this many steps (0: never)")                  \
    X(val_batches, "-m", "--val-batches", FLAG_INT, "20", 1, FLAG_INT_MAX, "validation batches per evaluation, B x T x ranks tokens each")\
    X(sample_every, "-s", "--sample-every", FLAG_INT, "20", 0, FLAG_INT_MAX, "generate a sample every this many steps (0: never)")   \
    X(sample_tokens, "-g", "--sample-tokens", FLAG_INT, "64", 0, 16777216, "tokens per generated sample")                                \
    X(temperature, NULL, "--temperature", FLAG_FLOAT, "1.0", 0, 1e6, "sampling temperature (0: argmax)")                             \
    X(prompt, NULL, "--prompt", FLAG_STR, "", 0, 0, "text that samples continue (after <|endoftext|>); needs the tokenizer")     \
    X(top_k, NULL, "--top-k", FLAG_INT, "0", 0, FLAG_INT_MAX, "sample among the k most likely tokens (0: all)")                      \
    X(checkpoint_every, "-n", "--checkpoint-every", FLAG_INT, "0", 0, FLAG_INT_MAX,                                                  \
      "write a checkpoint to -o every this many steps (0: never)")                                                                         \
    X(resume, "-y", "--resume", FLAG_INT, "0", 0, 1, "1: resume from the newest complete, valid checkpoint in --output-dir")                \
    X(keep_last, NULL, "--keep-last", FLAG_INT, "0", 0, FLAG_INT_MAX, "keep the newest K checkpoints of -o, delete older ones (0: keep all)")   \
    X(keep_every, NULL, "--keep-every", FLAG_INT, "0", 0, FLAG_INT_MAX,                                                              \
      "also keep every checkpoint whose step is a multiple of M (0: none)")                                                          \
    X(on_save_error, NULL, "--on-save-error", FLAG_STR, "stop", 0, 0,                                                                \
      "a checkpoint write fails (disk full): stop (exit 74) or continue training")                                                   \
    X(max_bad_steps, NULL, "--max-bad-steps", FLAG_INT, "5", 0, FLAG_INT_MAX,                                                        \
      "stop (exit 65) after this many skipped updates in a row (0: never)")                                                          \
    X(spike_zscore, NULL, "--spike-zscore", FLAG_FLOAT, "0", 0, 1e30,                                                                \
      "skip an update whose loss or gradient-norm z-score exceeds this; a skip is no AdamW step (0: off)")                            \
    X(spike_window, NULL, "--spike-window", FLAG_INT, "32", 2, 64, "steps the spike z-score is computed over")                        \
    X(early_stop, NULL, "--early-stop", FLAG_INT, "0", 0, FLAG_INT_MAX,                                                              \
      "stop when the val loss has not improved for N evaluations; best checkpoint in -o DIR/best (0: off)")                         \
    X(profile, NULL, "--profile", FLAG_INT, "0", 0, FLAG_INT_MAX,                                                                    \
      "time each op over N steps (after the first) and print a table (0: off)")                                                     \
    X(zero, "-z", "--zero", FLAG_INT, "0", 0, 1, "ZeRO stage: 0 off, 1 shard optimizer state (stage 2 is not implemented)")                     \
    X(dist_init, NULL, "--dist-init", FLAG_STR, "auto", 0, 0, "multi-GPU: how ranks share the NCCL id: auto|mpi|file|tcp")             \
    X(dist_file, NULL, "--dist-file", FLAG_STR, "", 0, 0, "multi-GPU: id file for --dist-init file, new per job, on a shared disk")     \
    X(dist_timeout, NULL, "--dist-timeout", FLAG_FLOAT, "600", 1, 1e7,                                                               \
      "multi-GPU: seconds to wait for peers (rendezvous; a step with no progress) before exiting")                                  \
    X(grad_comm, NULL, "--grad-comm", FLAG_STR, "bf16", 0, 0, "multi-GPU: type gradients are reduced in: bf16|fp32 (fp32 build: fp32)") \
    X(lr_scale, NULL, "--lr-scale", FLAG_STR, "none", 0, 0, "scale --lr by the global batch / --lr-ref-batch: none|linear|sqrt")      \
    X(lr_ref_batch, NULL, "--lr-ref-batch", FLAG_INT, "0", 0, FLAG_INT_MAX, "tokens per step --lr was tuned for (--lr-scale; 0: B*T)") \
    X(recompute, "-r", "--recompute", FLAG_INT, "0", 0, 2, "recompute activations in backward: 0 off, 1 GELU, 2 also LayerNorm")     \
    X(master_weights, "-w", "--master-weights", FLAG_INT, "1", 0, 1, "keep fp32 master weights (1) or not (0; bf16 build only)")   \
    X(deterministic, NULL, "--deterministic", FLAG_INT, "1", 0, 1,                                                                   \
      "1: bit-identical gradients run to run; 0: faster attention backward (atomic dQ)")                                             \
    X(seed, NULL, "--seed", FLAG_INT, "1337", 0, FLAG_INT_MAX, "random seed (init, data order, sampling)")                           \
    X(mock_data, NULL, "--mock-data", FLAG_BOOL, "0", 0, 1, "train on deterministic random tokens, no files")                        \
    X(shuffle, NULL, "--shuffle", FLAG_INT, "1", 0, 1, "1: shuffle shard and batch order each epoch; 0: read in order")             \
    X(tokenizer, NULL, "--tokenizer", FLAG_STR, TRAIN_DEFAULT_TOKENIZER, 0, 0, "tokenizer file (GBPE), to print samples")          \
    X(threads, NULL, "--threads", FLAG_INT, "0", 0, 4096, "CPU threads (0: the OpenMP default)")

#define FLAG_FIELD_(field, shrt, lng, type, def, lo, hi, help) FLAG_CTYPE_##type field;
typedef struct {
    TRAIN_FLAGS(FLAG_FIELD_)
} TrainArgs;
#undef FLAG_FIELD_

typedef struct {
    const char* field;
    const char* short_name;
    const char* long_name;
    FlagType type;
    const char* default_value;
    double min, max;
    const char* help;
    size_t offset;
} FlagSpec;

#define FLAG_SPEC_(field, shrt, lng, type, def, lo, hi, help) {#field, shrt, lng, type, def, lo, hi, help, offsetof(TrainArgs, field)},
static const FlagSpec FLAG_SPECS[] = {TRAIN_FLAGS(FLAG_SPEC_)};
#undef FLAG_SPEC_
#define FLAG_COUNT ((int)(sizeof(FLAG_SPECS) / sizeof(FLAG_SPECS[0])))


static inline const char* flags_type_name_(FlagType t) {
    switch (t) {
    case FLAG_STR: return "str";
    case FLAG_INT: return "int";
    case FLAG_FLOAT: return "float";
    case FLAG_BOOL: return "0|1";
    case FLAG_SCHED: return "name";
    }
    return "?";
}

/* Parses text as the flag's type into its field of a; on a bad value, exits 2 naming flag and value. */
static inline void flags_set_(TrainArgs* a, const FlagSpec* f, const char* text) {
    char* field = (char*)a + f->offset;
    if (f->type == FLAG_STR) {
        *(const char**)field = text;
        return;
    }
    if (!text) usagef("%s: missing value", f->long_name);
    if (f->type == FLAG_SCHED) {
        ScheduleKind k;
        if (!schedule_parse(text, &k))
            usagef("%s: bad value '%s': expected cosine, linear, constant or wsd", f->long_name, text);
        *(const char**)field = text;
        return;
    }
    char* end;
    errno = 0;
    if (f->type == FLAG_INT || f->type == FLAG_BOOL) {
        long long v = strtoll(text, &end, 10);
        if (end == text || *end != '\0' || errno == ERANGE || v < f->min || v > f->max)
            usagef("%s: bad value '%s': expected an integer in [%.0f, %.0f]", f->long_name, text, f->min, f->max);
        *(int*)field = (int)v;
    } else {
        double v = strtod(text, &end);
        if (end == text || *end != '\0' || !isfinite(v) || v < f->min || v > f->max || !isfinite((float)v))
            usagef("%s: bad value '%s': expected a finite number in [%g, %g]", f->long_name, text, f->min, f->max);
        *(float*)field = (float)v;
    }
}

static inline void flags_set_defaults_(TrainArgs* a) {
    memset(a, 0, sizeof(*a));
    for (int i = 0; i < FLAG_COUNT; i++) flags_set_(a, &FLAG_SPECS[i], FLAG_SPECS[i].default_value);
}

static inline const char* flags_default_text_(const FlagSpec* s) {
    return s->default_value[0] ? s->default_value : "none";
}

static inline void flags_print_help(FILE* f, const char* program) {
    fprintf(f, "usage: %s [flags]\n\n", program);
    for (int i = 0; i < FLAG_COUNT; i++) {
        const FlagSpec* s = &FLAG_SPECS[i];
        char names[64];
        snprintf(names, sizeof(names), "%s%s%s %s", s->short_name ? s->short_name : "", s->short_name ? ", " : "    ",
                 s->long_name, flags_type_name_(s->type));
        fprintf(f, "  %-30s %s (default: %s)\n", names, s->help, flags_default_text_(s));
    }
    fprintf(f, "  %-30s %s\n", "-h, --help", "print this help and exit");
    fprintf(f, "  %-30s %s\n", "    --help-markdown", "print the flags as a markdown table and exit");
}

static inline void flags_print_markdown(FILE* f) {
    fprintf(f, "| short | long | type | default | meaning |\n|---|---|---|---|---|\n");
    for (int i = 0; i < FLAG_COUNT; i++) {
        const FlagSpec* s = &FLAG_SPECS[i];
        fprintf(f, "| %s | `%s` | %s | %s | %s |\n", s->short_name ? s->short_name : "", s->long_name,
                flags_type_name_(s->type), flags_default_text_(s), s->help);
    }
    fprintf(f, "| -h | `--help` | | | print the help and exit |\n");
}

/* the value of one flag as text (as the parser would accept it) */
static inline void flags_format_(char* out, size_t cap, const TrainArgs* a, const FlagSpec* s) {
    const char* field = (const char*)a + s->offset;
    switch (s->type) {
    case FLAG_STR:
    case FLAG_SCHED: {
        const char* v = *(const char* const*)field;
        snprintf(out, cap, "%s", v[0] ? v : "none");
        break;
    }
    case FLAG_INT:
    case FLAG_BOOL: snprintf(out, cap, "%d", *(const int*)field); break;
    case FLAG_FLOAT: snprintf(out, cap, "%g", (double)*(const float*)field); break;
    }
}

/* every flag as "--name value\n", in table order, into out (cap bytes: FLAGS_TEXT_CAP is always enough) */
#define FLAGS_TEXT_CAP ((size_t)FLAG_COUNT * 4200)
static inline void flags_text(char* out, size_t cap, const TrainArgs* a) {
    size_t n = 0;
    out[0] = '\0';
    for (int i = 0; i < FLAG_COUNT && n < cap; i++) {
        char value[4096];
        flags_format_(value, sizeof(value), a, &FLAG_SPECS[i]);
        n += (size_t)snprintf(out + n, cap - n, "%s %s\n", FLAG_SPECS[i].long_name, value);
    }
}

/* the run header: every flag's value, one per line */
static inline void flags_print_values(FILE* f, const TrainArgs* a) {
    for (int i = 0; i < FLAG_COUNT; i++) {
        char value[4096];
        flags_format_(value, sizeof(value), a, &FLAG_SPECS[i]);
        fprintf(f, "| %-20s | %-40s |\n", FLAG_SPECS[i].long_name, value);
    }
}

static inline const FlagSpec* flags_find_(const char* name, size_t len) {
    for (int i = 0; i < FLAG_COUNT; i++) {
        const FlagSpec* s = &FLAG_SPECS[i];
        if ((strlen(s->long_name) == len && strncmp(s->long_name, name, len) == 0) ||
            (s->short_name && strlen(s->short_name) == len && strncmp(s->short_name, name, len) == 0))
            return s;
    }
    return NULL;
}

static inline void flags_unknown_(const char* name) {
    if (name[1] != '-' && strlen(name) > 2) {
        char dashed[130];
        snprintf(dashed, sizeof(dashed), "-%s", name);
        if (flags_find_(dashed, strlen(dashed))) usagef("unknown flag '%s', did you mean %s?", name, dashed); /* "-lr" */
        const char* rest = name + 2; /* "-b4", "-o/tmp/x": a short flag with its value attached */
        int numeric = (rest[0] >= '0' && rest[0] <= '9') || ((rest[0] == '-' || rest[0] == '.') && rest[1] >= '0' && rest[1] <= '9');
        for (int i = 0; i < FLAG_COUNT; i++)
            if (FLAG_SPECS[i].short_name && FLAG_SPECS[i].short_name[1] == name[1] &&
                (numeric || FLAG_SPECS[i].type == FLAG_STR || FLAG_SPECS[i].type == FLAG_SCHED))
                usagef("unknown flag '%s': a short flag takes its value as the next argument (%s %s)", name, FLAG_SPECS[i].short_name,
                       rest);
    }
    const char* best = NULL;
    size_t letters = strspn(name, "-") < strlen(name) ? strlen(name) - strspn(name, "-") : 0;
    int best_d = letters <= 4 ? 2 : letters <= 8 ? 3 : 4; /* suggest only names within 1, 2 or 3 edits, by length */
    for (int i = 0; i < FLAG_COUNT; i++) {
        int d = edit_distance(name, FLAG_SPECS[i].long_name);
        if (d < best_d) {
            best_d = d;
            best = FLAG_SPECS[i].long_name;
        }
    }
    if (best) usagef("unknown flag '%s', did you mean %s?", name, best);
    usagef("unknown flag '%s'", name);
}

static inline void flags_parse(TrainArgs* a, int argc, char** argv, const char* program) {
    flags_set_defaults_(a);
    for (int i = 1; i < argc; i++) {
        const char* arg = argv[i];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            flags_print_help(stdout, program);
            exit(0);
        }
        if (strcmp(arg, "--help-markdown") == 0) {
            flags_print_markdown(stdout);
            exit(0);
        }
        if (arg[0] != '-' || arg[1] == '\0') { /* a second value of a string flag: most often a glob the shell expanded */
            const FlagSpec* before = i > 2 && argv[i - 1][0] != '-' ? flags_find_(argv[i - 2], strlen(argv[i - 2])) : NULL;
            usagef("unexpected argument '%s' (flags start with -%s)", arg,
                   before && before->type == FLAG_STR ? "; an unquoted glob? quote it: -i 'DIR/train_*.bin'" : "");
        }
        const char* eq = strchr(arg, '=');
        size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
        const FlagSpec* s = flags_find_(arg, name_len);
        if (!s) {
            char name[128];
            snprintf(name, sizeof(name), "%.*s", (int)(name_len < 127 ? name_len : 127), arg);
            flags_unknown_(name);
        }
        const char* value;
        if (eq) value = eq + 1;
        else if (s->type == FLAG_BOOL) {
            int has = i + 1 < argc && (strcmp(argv[i + 1], "0") == 0 || strcmp(argv[i + 1], "1") == 0);
            if (!has && i + 1 < argc && argv[i + 1][0] >= '0' && argv[i + 1][0] <= '9')
                usagef("%s: bad value '%s': expected 0 or 1, or nothing (1)", s->long_name, argv[i + 1]);
            value = has ? argv[++i] : "1";
        } else if (i + 1 < argc) value = argv[++i];
        else usagef("%s: missing value", s->long_name);
        flags_set_(a, s, value);
    }
}

/* Exits (status 2) if the flag long_name ("--zero" or "zero") was given a value other than its
 * default: for trainers that do not support it. */
static inline void flags_reject(const TrainArgs* a, const char* long_name, const char* why) {
    const FlagSpec* s = NULL;
    for (int i = 0; i < FLAG_COUNT; i++) {
        const char* n = FLAG_SPECS[i].long_name;
        if (strcmp(n, long_name) == 0 || strcmp(n + 2, long_name) == 0) s = &FLAG_SPECS[i];
    }
    if (!s) {
        fprintf(stderr, "error: flags_reject: no flag named '%s'\n", long_name);
        exit(2);
    }
    TrainArgs defaults;
    flags_set_defaults_(&defaults);
    const char* field = (const char*)a + s->offset;
    const char* def = (const char*)&defaults + s->offset;
    int same;
    if (s->type == FLAG_STR || s->type == FLAG_SCHED) {
        const char *x = *(const char* const*)field, *y = *(const char* const*)def;
        same = strcmp(x, y) == 0;
    } else if (s->type == FLAG_FLOAT) same = *(const float*)field == *(const float*)def;
    else same = *(const int*)field == *(const int*)def;
    if (!same) {
        char given[4096];
        flags_format_(given, sizeof(given), a, s);
        fprintf(stderr, "error: %s %s is not supported: %s\n", s->long_name, given, why);
        exit(2);
    }
}

#endif
