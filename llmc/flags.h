/*
 * llmc/flags.h — the command line of both trainers, from one table.
 *
 * TRAIN_FLAGS is an X-macro: each row is (field, short form, long form, type, default, min, max,
 * choices, help). From it come the TrainArgs struct and its llmc/cli.h table, so the parser, --help,
 * --help-markdown (the README's flag table) and the run header (flags_print_values) cannot disagree.
 * The forms accepted and the errors are llmc/cli.h's (exit status 2). "Not given" is "" for strings
 * and 0 for the from-scratch model sizes (shown as "none" in the help), so a trainer tests `a.init[0]`
 * or `a.n_layer > 0`.
 */
#ifndef LLMC_FLAGS_H
#define LLMC_FLAGS_H

#include "llmc/cli.h" /* first: through fileio.h it sets the feature macros */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FLAG_INT_MAX 2147483647.0
#define TRAIN_DEFAULT_TOKENIZER "data/gpt2_tokenizer.bin" /* a missing file is fine here: samples print as ids */

/* X(field, short, long, type, default, min, max, choices, help); short is NULL where there is none */
#define TRAIN_FLAGS(X)                                                                                                               \
    X(train_data, "-i", "--train-data", CLI_STR, "", 0, 0, NULL, "training token shards: glob of GTOK or llm.c .bin files (quote it)")                  \
    X(val_data, "-j", "--val-data", CLI_STR, "", 0, 0, NULL, "validation token shards: glob (none: no validation)")                       \
    X(init, "-e", "--init", CLI_STR, "", 0, 0, NULL,                                                                                      \
      "initial model: model file or preset d6|d12|d24|d36|d48 (none: from scratch, --n-layer ...)")                                  \
    X(n_layer, NULL, "--n-layer", CLI_INT, "0", 0, 1024, NULL, "from scratch: number of layers (0: not set)")                             \
    X(n_head, NULL, "--n-head", CLI_INT, "0", 0, 65536, NULL, "from scratch: attention heads (divides --n-embd) (0: not set)")            \
    X(n_embd, NULL, "--n-embd", CLI_INT, "0", 0, 131072, NULL, "from scratch: channels (0: not set)")                                     \
    X(vocab_size, NULL, "--vocab-size", CLI_INT, "0", 0, 65536, NULL, "vocabulary size (0: 50257, or the --init model's)")                \
    X(max_seq_len, NULL, "--max-seq-len", CLI_INT, "0", 0, 1048576, NULL, "positions, rows of wpe (0: --seq-len, or the --init model's)") \
    X(output_dir, "-o", "--output-dir", CLI_STR, "", 0, 0, NULL,                                                                          \
      "directory for checkpoints and metrics.jsonl (none: write nothing)")                                                           \
    X(batch_size, "-b", "--batch-size", CLI_INT, "4", 1, FLAG_INT_MAX, NULL, "micro-batch size B (sequences per rank)")                   \
    X(seq_len, "-t", "--seq-len", CLI_INT, "64", 1, 1048576, NULL, "sequence length T")                                                   \
    X(total_batch, "-d", "--total-batch", CLI_INT, "-1", -1, FLAG_INT_MAX, NULL,                                                          \
      "tokens per optimizer step, a multiple of B*T*world (-1: B*T*world)")                                                          \
    X(max_steps, "-x", "--max-steps", CLI_INT, "-1", -1, FLAG_INT_MAX, NULL,                                                              \
      "optimizer steps (-1: one epoch of the training data)")                                                                        \
    X(lr, "-l", "--lr", CLI_FLOAT, "3e-4", 0, 1e30, NULL, "maximum learning rate")                                                        \
    X(warmup, "-u", "--warmup", CLI_INT, "0", 0, FLAG_INT_MAX, NULL, "linear warmup steps")                                               \
    X(final_lr_frac, "-q", "--final-lr-frac", CLI_FLOAT, "1.0", 0, 1, NULL, "final learning rate as a fraction of --lr")                  \
    X(lr_schedule, "-k", "--lr-schedule", CLI_STR, "cosine", 0, 0, "cosine|linear|constant|wsd", "learning-rate schedule: cosine|linear|constant|wsd")          \
    X(wsd_frac, NULL, "--wsd-frac", CLI_FLOAT, "0.2", 0, 1, NULL, "wsd: fraction of the steps spent in the final decay")                  \
    X(weight_decay, "-c", "--weight-decay", CLI_FLOAT, "0.0", 0, 1e30, NULL, "AdamW weight decay (2-D tensors only)")                     \
    X(beta1, NULL, "--beta1", CLI_FLOAT, "0.9", 0, 1, NULL, "AdamW beta1")                                                                \
    X(beta2, NULL, "--beta2", CLI_FLOAT, "0.95", 0, 1, NULL, "AdamW beta2")                                                               \
    X(eps, NULL, "--eps", CLI_FLOAT, "1e-8", 0, 1e30, NULL, "AdamW epsilon")                                                              \
    X(grad_clip, NULL, "--grad-clip", CLI_FLOAT, "1.0", 0, 1e30, NULL, "clip the global gradient L2 norm to this (0: off)")               \
    X(val_every, "-v", "--val-every", CLI_INT, "20", 0, FLAG_INT_MAX, NULL, "validate every this many steps (0: never)")                  \
    X(val_batches, "-m", "--val-batches", CLI_INT, "20", 1, FLAG_INT_MAX, NULL, "validation batches per evaluation, B x T x ranks tokens each")\
    X(sample_every, "-s", "--sample-every", CLI_INT, "20", 0, FLAG_INT_MAX, NULL, "generate a sample every this many steps (0: never)")   \
    X(sample_tokens, "-g", "--sample-tokens", CLI_INT, "64", 0, 16777216, NULL, "tokens per generated sample")                                \
    X(temperature, NULL, "--temperature", CLI_FLOAT, "1.0", 0, 1e6, NULL, "sampling temperature (0: argmax)")                             \
    X(prompt, NULL, "--prompt", CLI_STR, "", 0, 0, NULL, "text that samples continue (after <|endoftext|>); needs the tokenizer")     \
    X(top_k, NULL, "--top-k", CLI_INT, "0", 0, FLAG_INT_MAX, NULL, "sample among the k most likely tokens (0: all)")                      \
    X(checkpoint_every, "-n", "--checkpoint-every", CLI_INT, "0", 0, FLAG_INT_MAX, NULL,                                                  \
      "write a checkpoint to -o every this many steps (0: never)")                                                                         \
    X(resume, "-y", "--resume", CLI_BOOL, "0", 0, 1, NULL, "1: resume from the newest complete, valid checkpoint in --output-dir")                \
    X(keep_last, NULL, "--keep-last", CLI_INT, "0", 0, FLAG_INT_MAX, NULL, "keep the newest K checkpoints of -o, delete older ones (0: keep all)")   \
    X(keep_every, NULL, "--keep-every", CLI_INT, "0", 0, FLAG_INT_MAX, NULL,                                                              \
      "also keep every checkpoint whose step is a multiple of M (0: none)")                                                          \
    X(on_save_error, NULL, "--on-save-error", CLI_STR, "stop", 0, 0, "stop|continue",                                                                \
      "a checkpoint write fails (disk full): stop (exit 74) or continue training")                                                   \
    X(max_bad_steps, NULL, "--max-bad-steps", CLI_INT, "5", 0, FLAG_INT_MAX, NULL,                                                        \
      "stop (exit 65) after this many skipped updates in a row (0: never)")                                                          \
    X(spike_zscore, NULL, "--spike-zscore", CLI_FLOAT, "0", 0, 1e30, NULL,                                                                \
      "skip an update whose loss or gradient-norm z-score exceeds this; a skip is no AdamW step (0: off)")                            \
    X(spike_window, NULL, "--spike-window", CLI_INT, "32", 2, 64, NULL, "steps the spike z-score is computed over")                        \
    X(early_stop, NULL, "--early-stop", CLI_INT, "0", 0, FLAG_INT_MAX, NULL,                                                              \
      "stop when the val loss has not improved for N evaluations; best checkpoint in -o DIR/best (0: off)")                         \
    X(profile, NULL, "--profile", CLI_INT, "0", 0, FLAG_INT_MAX, NULL,                                                                    \
      "time each op over N steps (after the first) and print a table (0: off)")                                                     \
    X(zero, "-z", "--zero", CLI_INT, "0", 0, 1, NULL, "ZeRO stage: 0 off, 1 shard optimizer state (stage 2 is not implemented)")                     \
    X(dist_init, NULL, "--dist-init", CLI_STR, "auto", 0, 0, "auto|mpi|file|tcp", "multi-GPU: how ranks share the NCCL id: auto|mpi|file|tcp")             \
    X(dist_file, NULL, "--dist-file", CLI_STR, "", 0, 0, NULL, "multi-GPU: id file for --dist-init file, new per job, on a shared disk")     \
    X(dist_timeout, NULL, "--dist-timeout", CLI_FLOAT, "600", 1, 1e7, NULL,                                                               \
      "multi-GPU: seconds to wait for peers (rendezvous; a step with no progress) before exiting")                                  \
    X(grad_comm, NULL, "--grad-comm", CLI_STR, "bf16", 0, 0, "bf16|fp32", "multi-GPU: type gradients are reduced in: bf16|fp32 (fp32 build: fp32)") \
    X(lr_scale, NULL, "--lr-scale", CLI_STR, "none", 0, 0, "none|linear|sqrt", "scale --lr by the global batch / --lr-ref-batch: none|linear|sqrt")      \
    X(lr_ref_batch, NULL, "--lr-ref-batch", CLI_INT, "0", 0, FLAG_INT_MAX, NULL, "tokens per step --lr was tuned for (--lr-scale; 0: B*T)") \
    X(recompute, "-r", "--recompute", CLI_INT, "0", 0, 2, NULL, "recompute activations in backward: 0 off, 1 GELU, 2 also LayerNorm")     \
    X(master_weights, "-w", "--master-weights", CLI_BOOL, "1", 0, 1, NULL, "keep fp32 master weights (1) or not (0; bf16 build only)")   \
    X(deterministic, NULL, "--deterministic", CLI_BOOL, "1", 0, 1, NULL,                                                                   \
      "1: bit-identical gradients run to run; 0: faster attention backward (atomic dQ)")                                             \
    X(gelu_fusion, NULL, "--gelu-fusion", CLI_BOOL, "1", 0, 1, NULL,                                                                      \
      "1: GELU inside cuBLASLt's matmul epilogues where they fit; 0: a separate kernel (GPU bf16; no effect in fp32: always apart)") \
    X(seed, NULL, "--seed", CLI_INT, "1337", 0, FLAG_INT_MAX, NULL, "random seed (init, data order, sampling)")                           \
    X(mock_data, NULL, "--mock-data", CLI_BOOL, "0", 0, 1, NULL, "train on deterministic random tokens, no files")                        \
    X(shuffle, NULL, "--shuffle", CLI_BOOL, "1", 0, 1, NULL, "1: shuffle shard and batch order each epoch; 0: read in order")             \
    X(tokenizer, NULL, "--tokenizer", CLI_STR, TRAIN_DEFAULT_TOKENIZER, 0, 0, NULL, "tokenizer file (GBPE), to print samples")          \
    X(threads, NULL, "--threads", CLI_INT, "0", 0, 4096, NULL, "CPU threads (0: the OpenMP default)")

#define FLAG_CTYPE_CLI_STR const char*
#define FLAG_CTYPE_CLI_INT int
#define FLAG_CTYPE_CLI_FLOAT float
#define FLAG_CTYPE_CLI_BOOL int
#define FLAG_FIELD_(field, shrt, lng, type, def, lo, hi, choices, help) FLAG_CTYPE_##type field;
typedef struct {
    TRAIN_FLAGS(FLAG_FIELD_)
} TrainArgs;
#undef FLAG_FIELD_

#define FLAG_SPEC_(field, shrt, lng, type, def, lo, hi, choices, help) {shrt, lng, type, offsetof(TrainArgs, field), def, lo, hi, choices, help},
static const CliFlag FLAG_SPECS[] = {TRAIN_FLAGS(FLAG_SPEC_)};
#undef FLAG_SPEC_
#define FLAG_COUNT ((int)(sizeof(FLAG_SPECS) / sizeof(FLAG_SPECS[0])))

/* the trainers' command line; usage: the help's first line */
static inline CliSpec flags_spec_(const char* usage) {
    return (CliSpec){FLAG_SPECS, FLAG_COUNT, usage, "an unquoted glob? quote it: -i 'DIR/train_*.bin'", NULL};
}

static inline void flags_set_defaults_(TrainArgs* a) {
    memset(a, 0, sizeof(*a));
    CliSpec spec = flags_spec_("");
    cli_defaults(&spec, a);
}

static inline void flags_print_markdown(FILE* f) {
    CliSpec spec = flags_spec_("");
    cli_print_markdown(f, &spec);
}

/* every flag as "--name value\n", in table order, into out (cap bytes: FLAGS_TEXT_CAP is always enough) */
#define FLAGS_TEXT_CAP ((size_t)FLAG_COUNT * 4200)
static inline void flags_text(char* out, size_t cap, const TrainArgs* a) {
    size_t n = 0;
    out[0] = '\0';
    for (int i = 0; i < FLAG_COUNT && n < cap; i++) {
        char value[4096];
        cli_format(value, sizeof(value), &FLAG_SPECS[i], a);
        n += (size_t)snprintf(out + n, cap - n, "%s %s\n", FLAG_SPECS[i].long_name, value);
    }
}

/* the run header: every flag's value, one per line */
static inline void flags_print_values(FILE* f, const TrainArgs* a) {
    for (int i = 0; i < FLAG_COUNT; i++) {
        char value[4096];
        cli_format(value, sizeof(value), &FLAG_SPECS[i], a);
        fprintf(f, "| %-20s | %-40s |\n", FLAG_SPECS[i].long_name, value);
    }
}

static inline void flags_parse(TrainArgs* a, int argc, char** argv, const char* program) {
    char usage[512];
    snprintf(usage, sizeof(usage), "%s [flags]", program);
    CliSpec spec = flags_spec_(usage);
    memset(a, 0, sizeof(*a));
    cli_parse(&spec, a, argc, argv);
}

/* Exits (status 2) if the flag long_name ("--zero" or "zero") was given a value other than its
 * default: for trainers that do not support it. */
static inline void flags_reject(const TrainArgs* a, const char* long_name, const char* why) {
    const CliFlag* s = NULL;
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
    if (!cli_equal(s, a, &defaults)) {
        char given[4096];
        cli_format(given, sizeof(given), s, a);
        fprintf(stderr, "error: %s %s is not supported: %s\n", s->long_name, given, why);
        exit(2);
    }
}

#endif
