/*
 * llmc/dataloader.h — batches of token windows from GTOK shards (doc/formats.md), for one rank.
 *
 * Data: the files matching a glob, in sorted order. At init every shard's header is checked
 * (magic, version, length, fields); a shard's payload is read and its CRC and tokens checked
 * each time it is loaded, and a shard whose header (token count, vocab, payload CRC) is not the
 * one seen at init is an error (rewritten during the run). Only the current shard is in memory.
 * dl->fingerprint, a CRC-32 over every shard's (token count, vocab, payload CRC) in glob order,
 * identifies the data: a checkpoint records it, and ranks compare theirs.
 *
 * llm.c's GPT-2 token shards (its dev/data/data_common.py: 256 int32 words, h[0] = 20240520, h[1] = 1,
 * h[2] = token count, then the uint16 tokens; doc/formats.md) are read too, mixed with GTOK ones or
 * not. They state no vocabulary and carry no CRC: their vocab is 0 here (tokens are checked at load
 * against dl->token_limit, the model's vocabulary once dataloader_limit_tokens is called, else 65536),
 * and in place of the payload CRC stands the CRC-32 of the token count and the first and last
 * DL_LLMC_SAMPLE tokens, read at init and again at each load (a change elsewhere in such a shard goes
 * unnoticed). llm.c's LLaMA-3 shards (uint32 tokens) are refused.
 *
 * Batches: with B×T tokens per rank and `world` ranks, a global batch is a window of
 * B·T·world + 1 consecutive tokens of one shard; shard k has (N_k − 1) / (B·T·world) of them,
 * global batch b starting at token b·B·T·world. Rank r takes the B·T + 1 tokens starting at
 * r·B·T of the window: inputs are the first B·T, targets the same shifted by one. Each epoch
 * visits every global batch of every shard exactly once. A shard shorter than one window holds no
 * batch and is skipped (a warning at init names it); if every shard is, that is an error.
 *
 * Order: without shuffle, shards in glob order and batches in file order. With shuffle, each
 * epoch starts from an Rng E (DataLoaderState.rng): a copy of E permutes the shard order,
 * then draws one 64-bit seed per shard position, whose own Rng permutes that shard's batch
 * order; the copy's final state is the next epoch's E. So (epoch, shard position, batch
 * position, E) is the whole position: saving DataLoaderState and restoring it with
 * dataloader_set_state continues the exact same sequence. All ranks must use the same seed
 * (they then agree on every global batch, each taking its own slice).
 *
 * Mock data (dataloader_init_mock): one virtual shard of DL_MOCK_BATCHES global batches whose
 * token j is splitmix64(seed-mixed j) mod V; no files. Deterministic per (seed, rank, batch).
 *
 * Errors (no match, bad shard, too few tokens, bad state) are one line naming the file or the
 * pattern, exit status 1. Tokens ≥ the shard's own vocab size field are an error at load; the
 * trainer checks dl->vocab_size (the largest field over shards) against its model.
 * A shard loaded during the run (dataloader_try_next_slot) that is unreadable, changed or holds a bad
 * token is reported instead: −1, the line in dl->error, the position unchanged and the batch all
 * token 0, so that a trainer can checkpoint the steps it completed before it exits (doc/reliability.md);
 * dataloader_next_slot and dataloader_next exit with that line.
 */
#ifndef LLMC_DATALOADER_H
#define LLMC_DATALOADER_H

#include <glob.h>
#include <stdint.h>
#include "llmc/fileio.h"
#include "llmc/rng.h"

#define GTOK_MAGIC 0x4B4F5447u
#define GTOK_VERSION 1
#define LLMC_SHARD_MAGIC 20240520
#define LLMC_SHARD_VERSION 1
#define LLMC_LLAMA_SHARD_MAGIC 20240801
#define DL_LLMC_SAMPLE 32768
#define DL_MOCK_BATCHES 1000

/* Position of the next batch: epoch, index into the epoch's shard order, index into the
 * shard's batch order, and the Rng the epoch's permutations are drawn from. */
typedef struct {
    uint64_t epoch, shard, batch;
    Rng rng;
} DataLoaderState;

typedef struct {
    int B, T, rank, world, shuffle;
    int* inputs;        /* B*T, this rank's inputs of the current batch */
    int* targets;       /* B*T, inputs shifted by one */
    int vocab_size;     /* largest vocab size field over the shards (mock: the given V) */
    int token_limit;    /* tokens of shards without a vocab field (llm.c's) must be below it */
    size_t num_tokens;  /* total over shards */
    /* the shards */
    int num_shards;
    char** shard_paths;        /* NULL for mock data */
    uint64_t* shard_tokens;    /* N_k */
    int* shard_vocab;          /* vocab size field of each shard; 0: none (llm.c's format) */
    uint32_t* shard_crc;       /* payload CRC-32 of each shard (header word 2); llm.c's format: the sample CRC */
    uint32_t fingerprint;      /* CRC-32 over the shards' (N_k, vocab, payload CRC) in glob order; 0 for mock data */
    size_t* shard_batches;     /* global batches in each shard */
    int mock;
    uint64_t mock_seed;
    /* position and this epoch's order */
    DataLoaderState pos;
    Rng initial_rng;           /* pos.rng of epoch 0 (dataloader_reset returns here) */
    Rng next_epoch_rng;
    uint32_t* shard_order;     /* num_shards, the epoch's shard permutation */
    uint64_t* shard_seeds;     /* num_shards, seed of the batch permutation of each shard position */
    uint32_t* batch_order;     /* batch permutation of the shard at position order_shard_pos */
    int64_t order_shard_pos;   /* -1: batch_order not built for this epoch's current position */
    int loaded_shard;          /* file index held in tokens, -1 none */
    uint16_t* tokens;          /* the loaded shard's tokens (capacity: largest shard) */
    char error[4600];          /* why the last dataloader_try_next_slot failed */
} DataLoader;

static inline size_t dataloader_window_(const DataLoader* dl) { return (size_t)dl->B * dl->T * dl->world; }

static inline void dataloader_alloc_(DataLoader* dl, int B, int T, int rank, int world, int num_shards) {
    if (B <= 0 || T <= 0) fatalf("dataloader: batch size %d and sequence length %d must be positive", B, T);
    if (world <= 0 || rank < 0 || rank >= world) fatalf("dataloader: rank %d is not in [0, world=%d)", rank, world);
    dl->B = B;
    dl->T = T;
    dl->rank = rank;
    dl->world = world;
    dl->num_shards = num_shards;
    dl->inputs = (int*)calloc_check((size_t)B * T, sizeof(int));
    dl->targets = (int*)calloc_check((size_t)B * T, sizeof(int));
    dl->shard_tokens = (uint64_t*)calloc_check((size_t)num_shards, sizeof(uint64_t));
    dl->shard_vocab = (int*)calloc_check((size_t)num_shards, sizeof(int));
    dl->shard_crc = (uint32_t*)calloc_check((size_t)num_shards, sizeof(uint32_t));
    dl->shard_batches = (size_t*)calloc_check((size_t)num_shards, sizeof(size_t));
    dl->shard_order = (uint32_t*)calloc_check((size_t)num_shards, sizeof(uint32_t));
    dl->shard_seeds = (uint64_t*)calloc_check((size_t)num_shards, sizeof(uint64_t));
    dl->loaded_shard = -1;
    dl->order_shard_pos = -1;
    dl->token_limit = 65536;
}

static inline size_t dataloader_shard_batches_(const DataLoader* dl, uint64_t ntok) {
    return ntok > 0 ? (size_t)((ntok - 1) / dataloader_window_(dl)) : 0;
}

/* the explanation of a shard too short for one batch: "<path>: token shard has N tokens, one batch needs ..." */
static inline void dataloader_too_short_(const DataLoader* dl, int k, char* out, size_t cap) {
    snprintf(out, cap, "%s: token shard has %llu tokens, one batch needs B x T x slots + 1 = %d x %d x %d + 1 = %zu (slots: ranks, times "
             "micro-steps per step for training)",
             dl->shard_paths ? dl->shard_paths[k] : "mock data", (unsigned long long)dl->shard_tokens[k], dl->B, dl->T, dl->world,
             dataloader_window_(dl) + 1);
}

/* An llm.c shard after its header h: checks version and length; its token count to *n and its sample CRC
 * to *crc (the CRC-32 of N as 8 bytes and of its first and last DL_LLMC_SAMPLE tokens, all of them if
 * fewer than twice that); leaves f at the payload. 0, or −1 with the reason in err. */
static inline int dataloader_llmc_header_(FILE* f, const char* path, const int32_t* h, long long size, uint64_t* n_out, uint32_t* crc,
                                          char* err, size_t cap) {
    if (h[1] != LLMC_SHARD_VERSION)
        return file_error_(err, cap,
                           "%s: llm.c token shard version %d is not supported (this build reads version %d: GPT-2, uint16 tokens)", path,
                           h[1], LLMC_SHARD_VERSION);
    if (h[2] < 0) return file_error_(err, cap, "%s: llm.c token shard header says %d tokens", path, h[2]);
    uint64_t n = (uint64_t)h[2];
    if ((unsigned long long)(size - HEADER_BYTES) != 2 * n)
        return file_error_(err, cap,
                           "%s: llm.c token shard is %s: header says %llu tokens (%llu bytes), file has %lld bytes after the header", path,
                           (unsigned long long)(size - HEADER_BYTES) < 2 * n ? "truncated" : "too long", (unsigned long long)n,
                           (unsigned long long)(2 * n), size - HEADER_BYTES);
    uint64_t head = n < 2 * DL_LLMC_SAMPLE ? n : DL_LLMC_SAMPLE, tail = n - head < DL_LLMC_SAMPLE ? n - head : DL_LLMC_SAMPLE;
    uint16_t* sample = (uint16_t*)malloc_check(2 * DL_LLMC_SAMPLE * sizeof(uint16_t));
    int rc = -1;
    if (fread_try(sample, sizeof(uint16_t), (size_t)head, f, path, err, cap) == 0 &&
        fseek_try(f, HEADER_BYTES + (long long)(2 * (n - tail)), SEEK_SET, path, err, cap) == 0 &&
        fread_try(sample + head, sizeof(uint16_t), (size_t)tail, f, path, err, cap) == 0 &&
        fseek_try(f, HEADER_BYTES, SEEK_SET, path, err, cap) == 0) {
        *crc = crc32_update(crc32_update(0, &n, sizeof(n)), sample, (size_t)(head + tail) * sizeof(uint16_t));
        rc = 0;
    }
    free(sample);
    *n_out = n;
    return rc;
}

/* Reads and checks a shard's header: GTOK (common fields, bytes per token 2, vocab in [1, 65536],
 * payload = 2·N bytes; its payload CRC to *crc) or llm.c's (vocab 0, the sample CRC to *crc). N to *n,
 * and leaves f at the payload; the vocab field goes to *vocab. 0, or −1 with the reason in err. */
static inline int dataloader_shard_header_(FILE* f, const char* path, int* vocab, int32_t* h, uint64_t* n, uint32_t* crc, char* err,
                                           size_t cap) {
    long long size = 0;
    if (file_size_try(f, path, &size, err, cap) != 0) return -1;
    if (size >= HEADER_BYTES) {
        if (fread_try(h, 4, HEADER_WORDS, f, path, err, cap) != 0) return -1;
        if (h[0] == LLMC_LLAMA_SHARD_MAGIC)
            return file_error_(err, cap, "%s: an llm.c LLaMA-3 token shard (uint32 tokens): this build reads GPT-2 shards (uint16 tokens)",
                               path);
        if (h[0] == LLMC_SHARD_MAGIC) {
            *vocab = 0;
            return dataloader_llmc_header_(f, path, h, size, n, crc, err, cap);
        }
        if ((uint32_t)h[0] != GTOK_MAGIC)
            return file_error_(err, cap, "%s: not a token shard: magic 0x%08x, expected 0x%08x (GTOK) or %d (llm.c's)%s", path,
                               (uint32_t)h[0], GTOK_MAGIC, LLMC_SHARD_MAGIC, file_magic_hint((uint32_t)h[0]));
        if (fseek_try(f, 0, SEEK_SET, path, err, cap) != 0) return -1;
    }
    if (header_read_try(f, path, "token shard", GTOK_MAGIC, GTOK_VERSION, h, err, cap) != 0) return -1;
    *n = header_get_u64(h, 5);
    if (h[8] != 2) return file_error_(err, cap, "%s: token shard has %d bytes per token, this build reads 2 (uint16)", path, h[8]);
    if (h[7] <= 0 || h[7] > 65536) return file_error_(err, cap, "%s: token shard vocab size %d is not in [1, 65536]", path, h[7]);
    if (*n > header_payload_bytes(h) / 2 || header_payload_bytes(h) != 2 * *n) /* the first test: 2n must not wrap */
        return file_error_(err, cap, "%s: token shard header says %llu tokens but %llu payload bytes (expected %llu)", path,
                           (unsigned long long)*n, (unsigned long long)header_payload_bytes(h), (unsigned long long)(2 * *n));
    *vocab = h[7];
    *crc = (uint32_t)h[2];
    return 0;
}

/* Computes this epoch's shard order and per-shard seeds from pos.rng (see the top comment). */
static inline void dataloader_begin_epoch_(DataLoader* dl) {
    Rng w = dl->pos.rng;
    for (int k = 0; k < dl->num_shards; k++) dl->shard_order[k] = (uint32_t)k;
    if (dl->shuffle) rng_shuffle_u32(&w, dl->shard_order, (size_t)dl->num_shards);
    for (int k = 0; k < dl->num_shards; k++) dl->shard_seeds[k] = rng_u64(&w);
    dl->next_epoch_rng = w;
    dl->order_shard_pos = -1;
}

static inline void dataloader_setup_(DataLoader* dl, uint64_t seed) {
    size_t max_batches = 0, max_tokens = 0;
    dl->num_tokens = 0;
    dl->vocab_size = 0;
    for (int k = 0; k < dl->num_shards; k++) {
        if (dl->shard_batches[k] > max_batches) max_batches = dl->shard_batches[k];
        if (dl->shard_tokens[k] > max_tokens) max_tokens = (size_t)dl->shard_tokens[k];
        if (dl->shard_vocab[k] > dl->vocab_size) dl->vocab_size = dl->shard_vocab[k];
        dl->num_tokens += (size_t)dl->shard_tokens[k];
    }
    dl->batch_order = (uint32_t*)malloc_check(max_batches * sizeof(uint32_t));
    dl->tokens = dl->mock ? NULL : (uint16_t*)malloc_check(max_tokens * sizeof(uint16_t));
    rng_seed(&dl->initial_rng, seed);
    dl->pos.epoch = dl->pos.shard = dl->pos.batch = 0;
    dl->pos.rng = dl->initial_rng;
    dataloader_begin_epoch_(dl);
}

static inline void dataloader_init(DataLoader* dl, const char* glob_pattern, int B, int T, int rank, int world,
                                   int shuffle, uint64_t seed) {
    memset(dl, 0, sizeof(*dl));
    glob_t g;
    int rc = glob(glob_pattern, GLOB_TILDE, NULL, &g); /* ~ too: a quoted pattern keeps it from the shell */
    if (rc == GLOB_NOMATCH || (rc == 0 && g.gl_pathc == 0)) fatalf("%s: no files match this pattern", glob_pattern);
    if (rc != 0) fatalf("%s: glob failed (code %d)", glob_pattern, rc);
    if (g.gl_pathc > 0x7FFFFFFF) fatalf("%s: too many files (%zu)", glob_pattern, (size_t)g.gl_pathc);
    dataloader_alloc_(dl, B, T, rank, world, (int)g.gl_pathc);
    dl->shuffle = shuffle;
    dl->shard_paths = (char**)calloc_check((size_t)dl->num_shards, sizeof(char*));
    int32_t* h = (int32_t*)malloc_check(HEADER_BYTES);
    int short_shards = 0, first_short = -1;
    for (int k = 0; k < dl->num_shards; k++) {
        const char* path = g.gl_pathv[k];
        dl->shard_paths[k] = (char*)malloc_check(strlen(path) + 1);
        strcpy(dl->shard_paths[k], path);
        FILE* f = fopen_regular_check(path);
        if (dataloader_shard_header_(f, path, &dl->shard_vocab[k], h, &dl->shard_tokens[k], &dl->shard_crc[k], dl->error,
                                     sizeof(dl->error)) != 0)
            fatalf("%s", dl->error);
        fclose_check(f, path);
        uint32_t record[4] = {(uint32_t)dl->shard_tokens[k], (uint32_t)(dl->shard_tokens[k] >> 32), (uint32_t)dl->shard_vocab[k],
                              dl->shard_crc[k]};
        dl->fingerprint = crc32_update(dl->fingerprint, record, sizeof(record));
        dl->shard_batches[k] = dataloader_shard_batches_(dl, dl->shard_tokens[k]);
        if (dl->shard_batches[k] == 0 && short_shards++ == 0) first_short = k;
    }
    free(h);
    globfree(&g);
    if (short_shards > 0) {
        char why[4600];
        dataloader_too_short_(dl, first_short, why, sizeof(why));
        if (short_shards == dl->num_shards) fatalf("%s%s", why, dl->num_shards > 1 ? "; so is every other shard" : "");
        if (rank == 0)
            fprintf(stderr, "warning: %d of the %d shards of %s hold no batch and are skipped, the first: %s\n", short_shards,
                    dl->num_shards, glob_pattern, why);
    }
    dataloader_setup_(dl, seed);
}

static inline void dataloader_init_mock(DataLoader* dl, int B, int T, int vocab_size, int rank, int world, uint64_t seed) {
    memset(dl, 0, sizeof(*dl));
    if (vocab_size <= 0 || vocab_size > 65536) fatalf("dataloader: mock vocab size %d is not in [1, 65536]", vocab_size);
    dataloader_alloc_(dl, B, T, rank, world, 1);
    dl->mock = 1;
    dl->mock_seed = seed;
    dl->shard_batches[0] = DL_MOCK_BATCHES;
    dl->shard_tokens[0] = (uint64_t)DL_MOCK_BATCHES * dataloader_window_(dl) + 1;
    dl->shard_vocab[0] = vocab_size;
    dataloader_setup_(dl, seed);
}

/* Shard file k, opened as f: its header checked again (the file may have changed since init), its
 * tokens into dl->tokens and (GTOK) their CRC checked; N to *n, the vocab field to *vocab. 0, or −1
 * (dl->error). */
static inline int dataloader_read_shard_(DataLoader* dl, int k, FILE* f, int32_t* h, uint64_t* n, int* vocab) {
    const char* path = dl->shard_paths[k];
    char* err = dl->error;
    size_t cap = sizeof(dl->error);
    uint32_t stated, crc = 0;
    if (dataloader_shard_header_(f, path, vocab, h, n, &stated, err, cap) != 0) return -1;
    if (*n != dl->shard_tokens[k] || *vocab != dl->shard_vocab[k] || stated != dl->shard_crc[k])
        return file_error_(err, cap,
                           "%s: token shard changed since it was opened (%llu tokens, vocab %d, CRC 0x%08x; was %llu, %d, 0x%08x)", path,
                           (unsigned long long)*n, *vocab, stated, (unsigned long long)dl->shard_tokens[k], dl->shard_vocab[k],
                           dl->shard_crc[k]);
    if (payload_read_try(f, path, dl->tokens, (size_t)*n * sizeof(uint16_t), *vocab ? &crc : NULL, err, cap) != 0) return -1;
    return *vocab ? payload_crc_try(h, crc, path, "token shard", err, cap) : 0;
}

/* Reads shard file k into dl->tokens (dataloader_read_shard_), checking every token against the shard's
 * vocab size field (llm.c's: against token_limit). 0, or −1 with the reason in dl->error (no shard is
 * loaded then). */
static inline int dataloader_load_shard_(DataLoader* dl, int k) {
    const char* path = dl->shard_paths[k];
    dl->loaded_shard = -1; /* dl->tokens is overwritten */
    FILE* f;
    if (fopen_regular_try(&f, path, dl->error, sizeof(dl->error)) != 0) return -1;
    int32_t* h = (int32_t*)malloc_check(HEADER_BYTES);
    uint64_t n = 0;
    int vocab = 0, rc = dataloader_read_shard_(dl, k, f, h, &n, &vocab);
    fclose(f); /* read only: nothing to lose */
    free(h);
    if (rc != 0) return -1;
    int limit = vocab ? vocab : dl->token_limit;
    for (uint64_t i = 0; i < n; i++)
        if (dl->tokens[i] >= limit)
            return file_error_(dl->error, sizeof(dl->error), "%s: token %u at position %llu is not below %s %d", path, dl->tokens[i],
                               (unsigned long long)i,
                               vocab ? "the shard's vocab size" : "the model's vocabulary (an llm.c shard states none) of", limit);
    dl->loaded_shard = k;
    return 0;
}

/* Tokens must fit a model of vocab_size: a shard whose vocab field is above it is an error now
 * (naming it); the tokens of llm.c shards, which have none, are checked at load. */
static inline void dataloader_limit_tokens(DataLoader* dl, int vocab_size) {
    for (int k = 0; k < dl->num_shards; k++)
        if (dl->shard_vocab[k] > vocab_size)
            fatalf("%s: token shard has vocab size %d (its header), above the model's vocabulary of %d",
                   dl->shard_paths ? dl->shard_paths[k] : "mock data", dl->shard_vocab[k], vocab_size);
    dl->token_limit = vocab_size;
}

/* Makes sure the shard at pos.shard is loaded and its batch order built: 0, or −1 (dl->error). */
static inline int dataloader_prepare_shard_(DataLoader* dl) {
    int k = (int)dl->shard_order[dl->pos.shard];
    if (!dl->mock && dl->loaded_shard != k && dataloader_load_shard_(dl, k) != 0) return -1;
    if (dl->order_shard_pos != (int64_t)dl->pos.shard) {
        size_t n = dl->shard_batches[k];
        for (size_t i = 0; i < n; i++) dl->batch_order[i] = (uint32_t)i;
        if (dl->shuffle) {
            Rng r;
            rng_seed(&r, dl->shard_seeds[dl->pos.shard]);
            rng_shuffle_u32(&r, dl->batch_order, n);
        }
        dl->order_shard_pos = (int64_t)dl->pos.shard;
    }
    return 0;
}

/* token j of the mock virtual shard: a hash of (seed, j), reduced mod V */
static inline int dataloader_mock_token_(const DataLoader* dl, uint64_t j) {
    uint64_t x = dl->mock_seed * 0xD1B54A32D192ED03ull + j;
    return (int)(rng_splitmix64(&x) % (uint64_t)dl->vocab_size);
}

/* Fills inputs/targets with slice `slot` (in [0, world)) of the current global batch, and moves to
 * the next global batch if `advance`. dataloader_next is slot = rank, advance = 1. A trainer with
 * gradient accumulation makes the loader with world = ranks × micro-steps and reads slot
 * micro·ranks + rank, advancing on the last micro-step: a global batch is then one optimizer step,
 * so the position (and the shuffled order) does not depend on how the step is split.
 * Returns 0, or −1 when the shard to read could not be loaded (unreadable, changed since init, a bad
 * token): the reason in dl->error, the position as before the call, inputs and targets all token 0. */
static inline int dataloader_try_next_slot(DataLoader* dl, int slot, int advance) {
    if (slot < 0 || slot >= dl->world) fatalf("dataloader: slot %d is not in [0, world=%d)", slot, dl->world);
    DataLoaderState before = dl->pos;
    while (dl->pos.batch >= dl->shard_batches[dl->shard_order[dl->pos.shard]]) {
        dl->pos.batch = 0;
        if (++dl->pos.shard == (uint64_t)dl->num_shards) {
            dl->pos.shard = 0;
            dl->pos.epoch++;
            dl->pos.rng = dl->next_epoch_rng;
            dataloader_begin_epoch_(dl);
        }
    }
    size_t bt = (size_t)dl->B * dl->T;
    if (dataloader_prepare_shard_(dl) != 0) {
        dl->pos = before;
        dataloader_begin_epoch_(dl);
        memset(dl->inputs, 0, bt * sizeof(int));
        memset(dl->targets, 0, bt * sizeof(int));
        return -1;
    }
    size_t start = (size_t)dl->batch_order[dl->pos.batch] * dataloader_window_(dl) + (size_t)slot * bt;
    for (size_t i = 0; i < bt; i++) {
        if (dl->mock) {
            dl->inputs[i] = dataloader_mock_token_(dl, start + i);
            dl->targets[i] = dataloader_mock_token_(dl, start + i + 1);
        } else {
            dl->inputs[i] = dl->tokens[start + i];
            dl->targets[i] = dl->tokens[start + i + 1];
        }
    }
    if (advance) dl->pos.batch++;
    return 0;
}

/* dataloader_try_next_slot, exiting with dl->error when it fails */
static inline void dataloader_next_slot(DataLoader* dl, int slot, int advance) {
    if (dataloader_try_next_slot(dl, slot, advance) != 0) fatalf("%s", dl->error);
}

static inline void dataloader_next(DataLoader* dl) { dataloader_next_slot(dl, dl->rank, 1); }

static inline void dataloader_reset(DataLoader* dl) {
    dl->pos.epoch = dl->pos.shard = dl->pos.batch = 0;
    dl->pos.rng = dl->initial_rng;
    dataloader_begin_epoch_(dl);
}

static inline void dataloader_get_state(const DataLoader* dl, DataLoaderState* st) { *st = dl->pos; }

/* Restores a position saved by dataloader_get_state on a loader over the same data and
 * settings; fails if the position does not exist in this data. */
static inline void dataloader_set_state(DataLoader* dl, const DataLoaderState* st) {
    const char* data = dl->shard_paths ? dl->shard_paths[0] : "mock data";
    if (st->shard >= (uint64_t)dl->num_shards)
        fatalf("%s%s: saved position is in shard %llu of the epoch, but the data has %d shard(s) (data changed?)", data,
               dl->num_shards > 1 ? " ..." : "", (unsigned long long)st->shard, dl->num_shards);
    dl->pos = *st;
    dataloader_begin_epoch_(dl);
    size_t k = dl->shard_order[st->shard], n = dl->shard_batches[k];
    if (st->batch > n)
        fatalf("%s: saved position is batch %llu of this shard, which has %zu batches (data or B/T/world changed?)",
               dl->shard_paths ? dl->shard_paths[k] : data, (unsigned long long)st->batch, n);
}

/* Restores a position saved by a run whose windows (tokens per step) were saved_window tokens, on this
 * loader whose window may differ. Equal windows, or a shard not yet begun: the same position. Otherwise
 * the saved run had read the shard's first batch·saved_window tokens (unshuffled) or batch of its
 * windows in its own order (shuffled): unshuffled, reading goes on at the first window of this size
 * that starts at or after them; shuffled, whose order of the shard's windows has no equivalent, at the
 * next shard of the epoch. Returns the tokens skipped: of the saved run's windows in the shard, those it
 * had not read that lie before where reading goes on (the gap before the next window; the rest of them
 * when reading goes on in the next shard); 0 when the windows are equal. */
static inline uint64_t dataloader_set_state_window(DataLoader* dl, const DataLoaderState* st, size_t saved_window) {
    size_t window = dataloader_window_(dl);
    if (saved_window == window || st->batch == 0) {
        dataloader_set_state(dl, st);
        return 0;
    }
    DataLoaderState s = *st;
    s.batch = 0;
    dataloader_set_state(dl, &s); /* checks the shard index, builds the epoch's order */
    size_t k = dl->shard_order[s.shard];
    /* mock data: DL_MOCK_BATCHES windows of whatever size (its virtual length follows the window) */
    uint64_t usable = dl->mock ? (uint64_t)DL_MOCK_BATCHES * saved_window : dl->shard_tokens[k] > 0 ? dl->shard_tokens[k] - 1 : 0;
    uint64_t saved_batches = usable / saved_window;
    if (st->batch > saved_batches)
        fatalf("%s: saved position is batch %llu of this shard, which holds %llu batches of %zu tokens (the saved tokens per step): "
               "data changed?", dl->shard_paths ? dl->shard_paths[k] : "mock data", (unsigned long long)st->batch,
               (unsigned long long)saved_batches, saved_window);
    uint64_t read = st->batch * saved_window;
    if (dl->shuffle) {
        dl->pos.batch = dl->shard_batches[k];
        return (saved_batches - st->batch) * saved_window;
    }
    uint64_t next = (read + window - 1) / window;
    if (next > dl->shard_batches[k]) next = dl->shard_batches[k];
    dl->pos.batch = next;
    uint64_t resume_at = next < dl->shard_batches[k] ? next * window : saved_batches * saved_window;
    return resume_at > read ? resume_at - read : 0;
}

static inline size_t dataloader_batches_per_epoch(const DataLoader* dl) {
    size_t total = 0;
    for (int k = 0; k < dl->num_shards; k++) total += dl->shard_batches[k];
    return total;
}

static inline void dataloader_free(DataLoader* dl) {
    if (dl->shard_paths)
        for (int k = 0; k < dl->num_shards; k++) free(dl->shard_paths[k]);
    free(dl->shard_paths);
    free(dl->inputs);
    free(dl->targets);
    free(dl->shard_tokens);
    free(dl->shard_vocab);
    free(dl->shard_crc);
    free(dl->shard_batches);
    free(dl->shard_order);
    free(dl->shard_seeds);
    free(dl->batch_order);
    free(dl->tokens);
    memset(dl, 0, sizeof(*dl));
}

#endif
